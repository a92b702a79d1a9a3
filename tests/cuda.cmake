# The cross-backend CUDA suite (tests/cuda/test_cuda_ops.c), the streaming plans on the CUDA
# backend (test_plan_offload --cuda) and whole-model training against the CPU and across plans
# (train_cuda_check.py), registered only when the CUDA backend is built
# (backends/cuda/cuda.cmake, or tests/cuda_emu/cuda_emu.cmake on the CPU emulator). Without a GPU
# they print "SKIP: no CUDA device (...)" and exit 77, which ctest reports as skipped
# (SKIP_RETURN_CODE), not passed.
if(TARGET scorch_cuda)
  add_executable(test_cuda_ops ${CMAKE_CURRENT_SOURCE_DIR}/cuda/test_cuda_ops.c)
  target_include_directories(test_cuda_ops PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(test_cuda_ops PRIVATE scorch_cuda sc_ref_exec)
  add_test(NAME test_cuda_ops COMMAND test_cuda_ops WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  add_test(NAME test_plan_offload_cuda COMMAND test_plan_offload --cuda WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/device_tmp/train_cuda)
  file(MAKE_DIRECTORY ${dir})
  set(emu_memory "")
  if(SCORCH_CUDA_EMU) # a device too small for the GPT's none plan (756 KiB)
    set(emu_memory --emulated-memory 600K)
  endif()
  add_test(NAME train_cuda_vs_cpu
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/train_cuda_check.py $<TARGET_FILE:scorch-run> ${emu_memory}
           WORKING_DIRECTORY ${dir})
  set_tests_properties(test_cuda_ops test_plan_offload_cuda train_cuda_vs_cpu PROPERTIES SKIP_RETURN_CODE 77 LABELS cuda)
endif()
