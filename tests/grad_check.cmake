# The shared finite-difference gradient checker (tests/grad_check.{c,h}) as a small static library,
# linked into every test_grad_*.c executable (tests/CMakeLists.txt has created them before this
# file is included).
add_library(sc_grad_check STATIC ${CMAKE_CURRENT_SOURCE_DIR}/grad_check.c)
target_link_libraries(sc_grad_check PUBLIC scorch sc_ref_exec)

file(GLOB _grad_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/test_grad_*.c)
foreach(_src ${_grad_tests})
  get_filename_component(_name ${_src} NAME_WE)
  if(TARGET ${_name})
    target_link_libraries(${_name} PRIVATE sc_grad_check)
  endif()
endforeach()
