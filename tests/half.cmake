# 16-bit floats (core/half.h) against numpy: every f16 bit pattern through Cast and the element-wise
# kernels, via `scorch-run run` (tests/half_check.py). The portability stage of scripts/run_tests.sh
# runs it again on its x86-64-v2 build, where the scalar conversions replace F16C.
find_program(SCORCH_PYTHON3_HALF python3)
if(SCORCH_PYTHON3_HALF)
  add_test(NAME half_check
           COMMAND ${SCORCH_PYTHON3_HALF} ${CMAKE_CURRENT_SOURCE_DIR}/half_check.py $<TARGET_FILE:scorch-run>
                   ${CMAKE_CURRENT_BINARY_DIR}/half_check)
  set_tests_properties(half_check PROPERTIES LABELS half TIMEOUT 300)
endif()
