# The CUDA backend built against the CPU emulator of CUDA (tests/cuda_emu/README.md), in place of
# nvcc and a GPU: cmake -DSCORCH_CUDA_EMU=ON. The backend's C files compile unchanged with the
# emulator's headers found first; its .cu files are translated to C++ by cu2cpp.py (only the
# <<<>>> launches change). Everything that uses the CUDA backend (test_cuda_ops, the device CLI
# tests, `scorch-run train --device cuda`) then runs on the emulated device.
find_package(Python3 REQUIRED COMPONENTS Interpreter)
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(emu_dir ${CMAKE_SOURCE_DIR}/tests/cuda_emu)

add_library(scorch_cuda_emu STATIC ${emu_dir}/emu_runtime.cpp ${emu_dir}/emu_kernel.cpp ${emu_dir}/emu_cublas.cpp
  ${emu_dir}/emu_cudnn.cpp ${emu_dir}/emu_nccl.cpp)
target_include_directories(scorch_cuda_emu BEFORE PUBLIC ${emu_dir}/include ${emu_dir})
# emulated NCCL exchanges over the process group (backends/comm.h) in libscorch
target_include_directories(scorch_cuda_emu PRIVATE ${CMAKE_SOURCE_DIR})
target_link_libraries(scorch_cuda_emu PUBLIC pthread scorch)

file(GLOB emu_cu_sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/backends/cuda/*.cu)
set(emu_translated "")
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/cuda_emu)
foreach(cu ${emu_cu_sources})
  get_filename_component(stem ${cu} NAME_WE)
  set(cpp ${CMAKE_BINARY_DIR}/cuda_emu/${stem}.cpp)
  add_custom_command(OUTPUT ${cpp}
    COMMAND ${Python3_EXECUTABLE} ${emu_dir}/cu2cpp.py ${cu} ${cpp}
    DEPENDS ${cu} ${emu_dir}/cu2cpp.py
    COMMENT "cu2cpp: ${stem}.cu for the CUDA emulator")
  list(APPEND emu_translated ${cpp})
endforeach()

file(GLOB emu_c_sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/backends/cuda/*.c)
add_library(scorch_cuda STATIC ${emu_c_sources} ${emu_translated})
# -ffp-contract=off: the optimizer kernels round as the CPU's and as nvcc's -fmad=false build do
# (backends/cuda/cuda.cmake); the other kernels never relied on fused multiply-adds.
set_source_files_properties(${emu_translated} PROPERTIES COMPILE_OPTIONS "-Wno-unknown-pragmas;-ffp-contract=off")
target_include_directories(scorch_cuda BEFORE PRIVATE ${emu_dir}/include ${emu_dir} ${CMAKE_SOURCE_DIR}/backends/cuda)
target_compile_definitions(scorch_cuda PUBLIC SC_HAVE_CUDNN=1 SC_HAVE_NCCL=1 SCORCH_CUDA_EMU=1)
target_link_libraries(scorch_cuda PUBLIC scorch scorch_cuda_emu)
message(STATUS "scorch: CUDA backend built on the CPU emulator (tests/cuda_emu); convolutions on emulated cuDNN")

target_compile_definitions(scorch PUBLIC SCORCH_HAVE_CUDA=1)
target_link_libraries(scorch PUBLIC scorch_cuda)
