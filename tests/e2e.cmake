# End-to-end training checks against PyTorch ("Tests"; tests/e2e/, run by Debian's
# /usr/bin/python3 with torch 1.13). Each test generates or exports its model and seeded data in its
# own folder, trains it with `scorch-run train` and compares with tests/e2e/onnx_torch.py (the same
# ONNX graph and weights under torch autograd, float64). Checks and tolerances: tests/e2e/e2e_common.py.
#   *_grads      float32: loss rel 1e-4; every gradient elementwise rtol 1e-4, atol 1e-5*max|g|+1e-7
#   *_sgd10      float32: loss of each of 10 SGD steps (momentum 0.9, wd 1e-4) within 1e-3 relative
#   *_adamw10    the same with AdamW (lr 1e-3, betas 0.9/0.999, eps 1e-8, wd 0.01)
#   *_grads64    model and data in float64 on both sides: gradients within 1e-9 relative
#   *_sgd3_64    float64: weights after 3 SGD / AdamW steps within 1e-4 of the update
#   *_bf16       --precision bf16, 10 steps: losses within 2x the largest relative difference between
#                torch's float32 run and its torch.autocast("cpu", bfloat16) run, of torch's float32 ones
#   *_fp16       --precision fp16 (dynamic loss scaling), 10 steps: the bf16 allowance, and the first
#                loss within half of torch autocast bf16's first-loss difference (fp16 rounds 8x
#                finer) or of fp16's unit roundoff, whichever is larger (torch's bf16 sample depends on
#                the CPU); at most 3 skipped updates, at the start, which the torch runs skip too
#   *_adamw3_64
# resnet18 trains on a fresh batch each step (10 batches of 16; adamw10 at the fine-tuning lr 3e-5).
# DRANet is the small, better-conditioned one of e2e_dranet.py (image 16, width 4, batch 8, attention
# gammas 0.1, each block's last batch-norm gamma 0.1; sgd10 at lr 1e-3): at torchvision's default
# init (gamma 1) the untrained 50-layer net is so ill-conditioned that one float32 rounding of the
# input already moves float64 gradients past the tolerance, for PyTorch float32 as for Scorch.
# resnet18's SGD curve runs with every block's last BN gamma at 0.1 (--residual-gamma): at
# torchvision's gamma 1, PyTorch float32 stays within 1.2e-5 but float32 ReLU flips (inputs within
# rounding of zero switching sides, different for every summation order) grow step by step under SGD
# with momentum to 2e-3 in Scorch (tests/e2e/README.md); at 0.1 Scorch is within 2.7e-7.
find_program(E2E_TORCH_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(E2E_TORCH_PYTHON)
  set(E2E_DIR ${CMAKE_CURRENT_SOURCE_DIR}/e2e)
  function(scorch_e2e_test model check)
    set(dir ${CMAKE_CURRENT_BINARY_DIR}/e2e_tmp/${model}_${check})
    add_test(NAME e2e_${model}_${check}
             COMMAND ${E2E_TORCH_PYTHON} ${E2E_DIR}/e2e_${model}.py --scorch $<TARGET_FILE:scorch-run>
                     --workdir ${dir} --check ${check} ${ARGN})
    set_tests_properties(e2e_${model}_${check} PROPERTIES TIMEOUT 300 LABELS e2e)
  endfunction()
  foreach(check grads sgd10 adamw10 grads64 adamw10_bf16 adamw10_fp16)
    scorch_e2e_test(gpt ${check})
  endforeach()
  # The GPT's tied table (128 x 64 floats) trained as 4 row blocks (--param-block 8KiB,
  # autodiff/param_blocks.c): its gradient, dumped whole, and the curves against the same PyTorch runs.
  foreach(check grads adamw10 grads64 adamw10_bf16)
    set(dir ${CMAKE_CURRENT_BINARY_DIR}/e2e_tmp/gpt_blocks_${check})
    add_test(NAME e2e_gpt_blocks_${check}
             COMMAND ${E2E_TORCH_PYTHON} ${E2E_DIR}/e2e_gpt.py --scorch $<TARGET_FILE:scorch-run> --workdir ${dir}
                     --check ${check} --scorch-arg=--param-block --scorch-arg=8KiB)
    set_tests_properties(e2e_gpt_blocks_${check} PROPERTIES TIMEOUT 300 LABELS e2e)
  endforeach()
  foreach(check grads adamw10 grads64 sgd3_64 adamw3_64)
    scorch_e2e_test(resnet18 ${check})
  endforeach()
  # The SGD curve on torchvision's resnet18 with each block's last BN gamma started at 0.1 (see above).
  scorch_e2e_test(resnet18 sgd10 --residual-gamma 0.1)
  scorch_e2e_test(resnet18 sgd10_bf16 --residual-gamma 0.1)
  scorch_e2e_test(resnet18 sgd10_fp16 --residual-gamma 0.1)
  foreach(check grads sgd10 adamw10 grads64 sgd3_64 adamw3_64 sgd10_bf16 sgd10_fp16)
    scorch_e2e_test(dranet ${check})
  endforeach()
  # torchvision exports in training mode (tests/e2e/e2e_torchvision.py): 3 SGD steps in float32 against
  # PyTorch float64, within 8x PyTorch float32's own distance from it (sgd3); gradients in float64,
  # the interpreter cross-checked with the torchvision module itself (grads64; swin_t's mask subgraph
  # makes float32 tensors that the harness's float64 conversion does not reach).
  foreach(model mobilenet_v3_small efficientnet_b0 convnext_tiny vit swin_t)
    set(checks sgd3 grads64)
    if(model STREQUAL "swin_t")
      set(checks sgd3)
    endif()
    foreach(check ${checks})
      set(dir ${CMAKE_CURRENT_BINARY_DIR}/e2e_tmp/tv_${model}_${check})
      add_test(NAME e2e_tv_${model}_${check}
               COMMAND ${E2E_TORCH_PYTHON} ${E2E_DIR}/e2e_torchvision.py --scorch $<TARGET_FILE:scorch-run>
                       --workdir ${dir} --check ${check} --model ${model})
      set_tests_properties(e2e_tv_${model}_${check} PROPERTIES TIMEOUT 600 LABELS e2e)
    endforeach()
  endforeach()
  # Hugging Face transformers exports (tests/e2e/e2e_hf.py), 3 SGD steps against the HF module in
  # PyTorch: with an attention mask (left out, filled with ones) and --data, and without one and
  # --tokens. Exit 77 (skipped) where transformers is not installed.
  foreach(hf gpt2 gpt_neox llama llama_gqa opt bloom gptj)
    foreach(variant "mask;yes;data" "nomask;no;tokens")
      list(GET variant 0 tag)
      list(GET variant 1 mask)
      list(GET variant 2 source)
      set(dir ${CMAKE_CURRENT_BINARY_DIR}/e2e_tmp/hf_${hf}_${tag})
      add_test(NAME e2e_hf_${hf}_${tag}_sgd3
               COMMAND ${E2E_TORCH_PYTHON} ${E2E_DIR}/e2e_hf.py --scorch $<TARGET_FILE:scorch-run> --workdir ${dir}
                       --check sgd3_64 --model ${hf} --mask ${mask} --source ${source})
      set_tests_properties(e2e_hf_${hf}_${tag}_sgd3 PROPERTIES TIMEOUT 300 LABELS e2e SKIP_RETURN_CODE 77)
    endforeach()
  endforeach()
endif()
