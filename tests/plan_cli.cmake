# `scorch-run plan` and `bench` end to end (tests/plan_invariant.py cli): JSON consistency, the trace
# and SVG files, size parsing, usage errors, infeasible budgets; and `gen densenet` checked like the
# other generators (onnx.checker, onnxruntime, `scorch-run run` against onnxruntime).
set(dir ${CMAKE_CURRENT_BINARY_DIR}/plan_tmp/cli)
file(MAKE_DIRECTORY ${dir})
add_test(NAME plan_cli COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/plan_invariant.py $<TARGET_FILE:scorch-run> cli
         WORKING_DIRECTORY ${dir})

set(dir ${CMAKE_CURRENT_BINARY_DIR}/plan_tmp/gen_densenet)
file(MAKE_DIRECTORY ${dir})
add_test(NAME run_densenet
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/gen_check.py $<TARGET_FILE:scorch-run> run_densenet --expect 2,7
                 --scorch -- densenet --blocks 3 --layers-per-block 3 --growth 6 --image 16 --classes 7
         WORKING_DIRECTORY ${dir})

# --calibrate / --measure of plan, bench and train (tests/plan_calibrate_check.py).
set(dir ${CMAKE_CURRENT_BINARY_DIR}/plan_tmp/calibrate)
file(MAKE_DIRECTORY ${dir})
add_test(NAME plan_calibrate COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/plan_calibrate_check.py $<TARGET_FILE:scorch-run>
         WORKING_DIRECTORY ${dir})
