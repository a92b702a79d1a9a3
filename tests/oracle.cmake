# Oracle tests: whole models through `scorch-run run` against onnxruntime (tests/oracle/oracle.py),
# plus load/save round trips. One ctest entry each, label "oracle" (the sanitizer run skips them).
# Models: our generators (`scorch-run gen`) and PyTorch exports made with Debian's python3 (torch 1.13).

add_executable(roundtrip ${CMAKE_CURRENT_SOURCE_DIR}/oracle/roundtrip.c)
target_link_libraries(roundtrip PRIVATE scorch)

find_program(SCORCH_PYTHON3 python3)
set(SCORCH_TORCH_PYTHON /usr/bin/python3 CACHE FILEPATH "A python3 with torch and torchvision (Debian's)")
set(_oracle_py ${CMAKE_CURRENT_SOURCE_DIR}/oracle/oracle.py)
set(_oracle_work ${CMAKE_CURRENT_BINARY_DIR}/oracle)

# scorch_oracle(NAME <ctest name suffix> ARGS <oracle.py arguments...>)
function(scorch_oracle name)
  add_test(NAME oracle_${name}
           COMMAND ${SCORCH_PYTHON3} ${_oracle_py} --scorch-run $<TARGET_FILE:scorch-run>
                   --workdir ${_oracle_work}/${name} --torch-python ${SCORCH_TORCH_PYTHON} ${ARGN})
  set_tests_properties(oracle_${name} PROPERTIES LABELS oracle TIMEOUT 900)
endfunction()

if(NOT SCORCH_PYTHON3)
  message(WARNING "python3 not found: oracle tests not registered")
  return()
endif()

# Models from our own generators.
scorch_oracle(gen_resnet18 --gen "resnet --depth 18 --width 16 --image 64" --batch 2)
# ResNet-50's logits reach |y| ~ 28; over 53 convolutions the summation order alone moves them by
# up to 2.3e-5 (onnxruntime against itself with graph optimizations on and off), so an absolute 1e-5
# fails on reordered but equally exact kernels: atol is 1e-5 of the output's max, as for DRANet.
scorch_oracle(gen_resnet50 --gen "resnet --depth 50 --width 16 --image 64" --batch 2 --atol-of-max 1e-5)
# DRANet's attention (gamma 0.5, random weights) drives outputs to |y| ~ 700, where float32's spacing
# is 6e-5: atol becomes 1e-5 of the output's max instead of an absolute 1e-5.
scorch_oracle(gen_dranet50 --gen "dranet --depth 50 --width 16 --image 64 --gamma 0.5" --batch 1
              --atol-of-max 1e-5)
scorch_oracle(gen_gpt --gen "gpt --layers 2 --heads 4 --dim 64 --vocab 256 --seq 32" --batch 2 --seq 32)

# PyTorch exports (tests/oracle/export_torch.py); PyTorch's own output is checked against onnxruntime too.
scorch_oracle(torch_resnet18_eval --torch resnet18_eval --batch 2)
scorch_oracle(torch_resnet18_train --torch resnet18_train --batch 2)
scorch_oracle(torch_gpt2 --torch gpt2 --batch 2 --seq 32)
# CumSum (OPT's position ids), Mod and ScatterND (Swin's window padding and shifted-window mask).
scorch_oracle(torch_gpt2_cumsum --torch gpt2_cumsum --batch 2 --seq 32)
scorch_oracle(torch_swin_t --torch swin_t --batch 1)
# Einsum, lowered to Transpose/Reshape/ReduceSum/MatMul (graph/pass_einsum.c).
scorch_oracle(torch_einsum --torch einsum --batch 2)
# Resize in cubic mode, lowered to one MatMul per axis (graph/pass_resize.c).
scorch_oracle(torch_resize_cubic --torch resize_cubic --batch 2)

# Load + save: initializers and onnxruntime outputs must be bit-identical; once inline, once with
# every initializer over 1 KiB in external data.
scorch_oracle(roundtrip_torch_gpt2 --torch gpt2 --batch 2 --seq 32 --roundtrip $<TARGET_FILE:roundtrip>)
scorch_oracle(roundtrip_gen_resnet18_external --gen "resnet --depth 18 --width 16 --image 64" --batch 2
              --roundtrip $<TARGET_FILE:roundtrip> --external-threshold 1024)

# Loop, If and sequence ops lowered once dims are bound (graph/pass_control.c): models built with
# onnx.helper against onnxruntime, refusals of what cannot be lowered, and training through an
# unrolled Loop against numpy in float64. Named test_* so the sanitizer run covers the lowering too.
add_test(NAME test_control_flow
         COMMAND ${SCORCH_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/control_flow_check.py --scorch-run $<TARGET_FILE:scorch-run>
                 --workdir ${_oracle_work}/control_flow)
set_tests_properties(test_control_flow PROPERTIES TIMEOUT 300)
