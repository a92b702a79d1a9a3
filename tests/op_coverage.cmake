# The backend-ops check (tests/op_coverage.py): every op row of graph/ops.def has a shape function, CPU
# and CUDA kernels and a gradient rule in its family's files, a CPU-vs-CUDA case, a finite-difference
# case and a conformance case, or a stated reason. It reads the built objects, so it needs both
# libraries built (the test itself builds nothing).
if(TARGET scorch_cuda)
  add_test(NAME op_coverage COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/op_coverage.py ${CMAKE_BINARY_DIR})
else()
  add_test(NAME op_coverage_needs_the_cuda_backend COMMAND ${CMAKE_COMMAND} -E false)
endif()
