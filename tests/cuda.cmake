# The cross-backend CUDA suite (tests/cuda/test_cuda_ops.c), registered only when the CUDA backend
# is built (backends/cuda/cuda.cmake). Without a GPU it prints "SKIP: no CUDA device (...)" and
# exits 77, which ctest reports as skipped (SKIP_RETURN_CODE), not passed.
if(TARGET scorch_cuda)
  add_executable(test_cuda_ops ${CMAKE_CURRENT_SOURCE_DIR}/cuda/test_cuda_ops.c)
  target_include_directories(test_cuda_ops PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(test_cuda_ops PRIVATE scorch_cuda)
  add_test(NAME test_cuda_ops COMMAND test_cuda_ops WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(test_cuda_ops PROPERTIES SKIP_RETURN_CODE 77 LABELS cuda)
endif()
