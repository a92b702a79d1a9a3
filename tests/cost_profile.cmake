# This machine's cost profile (tests/cost_profile_check.py): measured, cached, re-measured when
# damaged, off on request. Every other test plans with the built-in constants (SCORCH_COST_PROFILE=off,
# set for all tests in tests/CMakeLists.txt), so that no test's plans depend on the machine.
add_test(NAME cost_profile COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/cost_profile_check.py $<TARGET_FILE:scorch-run>
                                   ${CMAKE_CURRENT_BINARY_DIR}/plan_tmp/cost_profile)
