# The planner against the exact MILP oracle (tests/milp_check.py, bench/milp_oracle.py: Checkmate's
# formulation solved by HiGHS, highspy from scripts/install.sh) on small GPT, ResNet and random-DAG
# training graphs: the oracle's own consistency, and the planner's gap under a regression ceiling.
add_test(NAME milp_oracle COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/milp_check.py $<TARGET_FILE:scorch-run>
                                  ${CMAKE_CURRENT_BINARY_DIR}/plan_tmp/milp)
set_tests_properties(milp_oracle PROPERTIES TIMEOUT 900)
