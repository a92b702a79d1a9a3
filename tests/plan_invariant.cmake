# The every-plan-equals-store-all invariant (tests/plan_invariant.py): for each model family, every
# strategy at 100/60/35% of the none plan's peak trains 3 steps with weights byte-identical to the
# none plan and a measured arena peak equal to the planned one. One test per family, each in its own
# folder, so ctest -j runs them side by side.
set(PLAN_INVARIANT ${CMAKE_CURRENT_SOURCE_DIR}/plan_invariant.py)
foreach(model resnet dranet gpt densenet)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/plan_tmp/invariant_${model})
  file(MAKE_DIRECTORY ${dir})
  add_test(NAME plan_invariant_${model} COMMAND python3 ${PLAN_INVARIANT} $<TARGET_FILE:scorch-run> invariant ${model}
           WORKING_DIRECTORY ${dir})
  set_tests_properties(plan_invariant_${model} PROPERTIES TIMEOUT 900)
endforeach()

# The GPT's tied table (64 x 64 floats) as 2 row blocks (--param-block 8KiB, autodiff/param_blocks.c),
# in fp32 and in bf16 (each block cast on its own): each block streamed, differentiated and updated
# alone, host updates and resume included.
foreach(precision fp32 bf16)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/plan_tmp/invariant_gpt_blocks_${precision})
  file(MAKE_DIRECTORY ${dir})
  add_test(NAME plan_invariant_gpt_blocks_${precision}
           COMMAND python3 ${PLAN_INVARIANT} $<TARGET_FILE:scorch-run> invariant gpt --param-block 8KiB
                   --precision ${precision}
           WORKING_DIRECTORY ${dir})
  set_tests_properties(plan_invariant_gpt_blocks_${precision} PROPERTIES TIMEOUT 900)
endforeach()

# The same under bf16 and fp16 mixed precision (--precision: graph/pass_precision.c; fp16 adds the loss
# scale inputs and their unscaling to every update), for the families the precision rules change
# most: convolutions with batch norm, attention and the LM head, both.
foreach(precision bf16 fp16)
  foreach(model resnet dranet gpt)
    set(dir ${CMAKE_CURRENT_BINARY_DIR}/plan_tmp/invariant_${model}_${precision})
    file(MAKE_DIRECTORY ${dir})
    add_test(NAME plan_invariant_${model}_${precision}
             COMMAND python3 ${PLAN_INVARIANT} $<TARGET_FILE:scorch-run> invariant ${model} --precision ${precision}
             WORKING_DIRECTORY ${dir})
    set_tests_properties(plan_invariant_${model}_${precision} PROPERTIES TIMEOUT 900)
  endforeach()
endforeach()

# The weights do not depend on the thread count (tests/plan_invariant.py threads): 1, 2, 3 threads and
# the adaptive count that train picks per step without --threads.
foreach(model resnet gpt densenet)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/plan_tmp/threads_${model})
  file(MAKE_DIRECTORY ${dir})
  add_test(NAME train_threads_${model} COMMAND python3 ${PLAN_INVARIANT} $<TARGET_FILE:scorch-run> threads ${model}
           WORKING_DIRECTORY ${dir})
  set_tests_properties(train_threads_${model} PROPERTIES TIMEOUT 900)
endforeach()
