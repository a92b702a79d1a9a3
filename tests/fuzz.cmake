# Importer fuzzing (tests/fuzz/).
#   - test_fuzz_regressions (every build): loads and prepares each input under tests/fuzz/regressions/
#     (crashes the fuzzer once found, minimised) and expects each to load or be refused with a status.
#     Named test_* so that the ASan/UBSan stage of scripts/run_tests.sh runs it too.
#   - fuzz_import (only with -DSCORCH_FUZZ=ON -DSCORCH_SANITIZE=ON and clang): the libFuzzer target.
#     scripts/fuzz_ci.sh builds it into build-fuzz/ and runs it; tests/fuzz/make_corpus.sh seeds it.
set(SCORCH_FUZZ_DIR ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)

add_executable(test_fuzz_regressions ${SCORCH_FUZZ_DIR}/regressions_check.c)
target_link_libraries(test_fuzz_regressions PRIVATE scorch)
add_test(NAME test_fuzz_regressions COMMAND test_fuzz_regressions ${SCORCH_FUZZ_DIR}/regressions)

if(SCORCH_FUZZ)
  if(CMAKE_C_COMPILER_ID MATCHES "Clang")
    add_executable(fuzz_import ${SCORCH_FUZZ_DIR}/fuzz_import.c)
    target_link_libraries(fuzz_import PRIVATE scorch)
    target_compile_options(fuzz_import PRIVATE -fsanitize=fuzzer)
    target_link_options(fuzz_import PRIVATE -fsanitize=fuzzer)
    if(NOT SCORCH_SANITIZE)
      message(WARNING "SCORCH_FUZZ without SCORCH_SANITIZE: fuzz_import runs without ASan/UBSan")
    endif()
  else()
    message(WARNING "SCORCH_FUZZ=ON needs clang (CMAKE_C_COMPILER_ID is ${CMAKE_C_COMPILER_ID}); fuzz_import not built")
  endif()
endif()
