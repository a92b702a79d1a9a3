# The public API as installed (tests/api_check.sh): install, build examples/train.c with pkg-config
# and with find_package(Scorch), and train to the same bytes as scorch-run.
# Not under the sanitizers: a plain program cannot load a sanitized library (its runtime must come first).
if(SCORCH_SANITIZE OR SCORCH_FUZZ)
  return()
endif()
add_test(NAME api_installed
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/api_check.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR}
          $<TARGET_FILE:scorch-run> ${CMAKE_CURRENT_BINARY_DIR}/api_tmp)
set_tests_properties(api_installed PROPERTIES TIMEOUT 300)
