# Generated-model tests (tools/gen_*.c): each writes a small model with `scorch-run gen`, checks it
# with onnx.checker (full_check) and onnxruntime via gen_check.py. The run_* tests also compare
# `scorch-run run` with onnxruntime on the same model and inputs. Each test works in its own folder.
set(GEN_CHECK ${CMAKE_CURRENT_SOURCE_DIR}/gen_check.py)
function(scorch_gen_test name)
  cmake_parse_arguments(T "SCORCH" "EXPECT" "ARGS" ${ARGN})
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/gen_tmp/${name})
  file(MAKE_DIRECTORY ${dir})
  set(extra)
  if(T_SCORCH)
    list(APPEND extra --scorch)
  endif()
  add_test(NAME ${name}
           COMMAND python3 ${GEN_CHECK} $<TARGET_FILE:scorch-run> ${name} --expect ${T_EXPECT} ${extra} -- ${T_ARGS}
           WORKING_DIRECTORY ${dir})
endfunction()

scorch_gen_test(gen_resnet18 EXPECT 2,10 ARGS resnet --depth 18 --image 64 --width 16 --classes 10)
scorch_gen_test(gen_resnet50 EXPECT 2,1000 ARGS resnet --depth 50 --image 64 --width 8)
scorch_gen_test(gen_resnet_depth7 EXPECT 2,5 ARGS resnet --depth 7 --image 32 --width 8 --classes 5)
scorch_gen_test(gen_dranet50 EXPECT 2,4,64,64 ARGS dranet --depth 50 --image 64 --width 8 --classes 4 --gamma 0.5)
scorch_gen_test(gen_gpt_small EXPECT 2,7,100 ARGS gpt --layers 2 --heads 2 --dim 64 --vocab 100 --seq 16)
scorch_gen_test(gen_gpt_external EXPECT 2,7,100
                ARGS gpt --layers 2 --heads 2 --dim 64 --vocab 100 --seq 16 --external --external-threshold 4096)
scorch_gen_test(gen_gpt_external_switch EXPECT 2,7,100
                ARGS gpt --layers 2 --heads 2 --dim 64 --vocab 100 --seq 16 --inline-limit 60000)

scorch_gen_test(run_resnet18 SCORCH EXPECT 2,10 ARGS resnet --depth 18 --image 64 --width 16 --classes 10)
scorch_gen_test(run_resnet_depth7 SCORCH EXPECT 2,5 ARGS resnet --depth 7 --image 32 --width 8 --classes 5)
scorch_gen_test(run_dranet50 SCORCH EXPECT 2,4,64,64 ARGS dranet --depth 50 --image 64 --width 8 --classes 4 --gamma 0.5)
scorch_gen_test(run_gpt_small SCORCH EXPECT 2,7,100 ARGS gpt --layers 2 --heads 2 --dim 64 --vocab 100 --seq 16)

add_test(NAME cli_usage COMMAND python3 ${GEN_CHECK} $<TARGET_FILE:scorch-run> --cli
         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/gen_tmp)
