# The GPU bench script (bench/train_vs_torch_gpu.py) on the CPU with --smoke-cpu: a lent GPU is
# rare and its minutes few, so a script error or an output line of `train` that its parsing no
# longer finds must show here, not on the device (tests/gpu_bench_check.py).
find_program(GPU_BENCH_TORCH_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(GPU_BENCH_TORCH_PYTHON)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/gpu_bench_tmp)
  file(MAKE_DIRECTORY ${dir})
  add_test(NAME gpu_bench_smoke
           COMMAND ${GPU_BENCH_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/gpu_bench_check.py $<TARGET_FILE:scorch-run>
                   ${CMAKE_SOURCE_DIR}/bench/train_vs_torch_gpu.py
           WORKING_DIRECTORY ${dir})
  set_tests_properties(gpu_bench_smoke PROPERTIES TIMEOUT 300)
endif()
