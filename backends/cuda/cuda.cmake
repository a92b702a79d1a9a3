# The CUDA backend (backends/cuda/), included from the top-level CMakeLists.txt only when
# check_language(CUDA) found nvcc: the build always compiles it then, so CI catches compile errors
# even on machines without a GPU (its tests skip there, tests/cuda.cmake).
#
# cuDNN is optional: found (header cudnn.h + library cudnn, in the toolkit or under pip's
# nvidia/cudnn) and SCORCH_CUDNN on, convolutions run on cuDNN; otherwise on our im2col + cuBLAS
# kernels (cu_nn_conv_gemm.cu). The configure log says which path is built.
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
# PTX for every GPU from Ampere on (JIT-compiled once), native code for Hopper (the lent H100/H200).
# Our own variable: CMake fills CMAKE_CUDA_ARCHITECTURES with the compiler's default (sm_75) itself.
set(SCORCH_CUDA_ARCHS "80-virtual;90-real" CACHE STRING "CUDA architectures of the CUDA backend")
option(SCORCH_CUDNN "Use cuDNN for convolutions when it is found" ON)

file(GLOB SCORCH_CUDA_SOURCES CONFIGURE_DEPENDS
  ${CMAKE_SOURCE_DIR}/backends/cuda/*.c ${CMAKE_SOURCE_DIR}/backends/cuda/*.cu)
add_library(scorch_cuda STATIC ${SCORCH_CUDA_SOURCES})
set_target_properties(scorch_cuda PROPERTIES CUDA_ARCHITECTURES "${SCORCH_CUDA_ARCHS}"
  POSITION_INDEPENDENT_CODE ON)
# The directory's warning (and sanitizer) options are C compiler flags: hand them to nvcc's host
# compiler through -Xcompiler instead of to nvcc itself. -Xcompiler splits its value at commas, so
# options that contain one (-fsanitize=address,undefined) stay C-only: the CUDA files are then built
# without the host sanitizers (the link still has them; compute-sanitizer is the tool for kernels).
get_target_property(scorch_cuda_opts scorch_cuda COMPILE_OPTIONS)
set(scorch_cuda_wrapped "")
if(scorch_cuda_opts)
  foreach(o ${scorch_cuda_opts})
    list(APPEND scorch_cuda_wrapped "$<$<COMPILE_LANGUAGE:C>:${o}>")
    if(NOT o MATCHES ",")
      list(APPEND scorch_cuda_wrapped "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${o}>")
    endif()
  endforeach()
endif()
set_property(TARGET scorch_cuda PROPERTY COMPILE_OPTIONS ${scorch_cuda_wrapped})
target_compile_options(scorch_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
# The optimizer updates (and the loss, as before) round every product and sum apart, as cpu_optim.c (-ffp-contract=off)
# does: host and device updates of a parameter then agree bit for bit (CMakeLists.txt).
set_source_files_properties(${CMAKE_SOURCE_DIR}/backends/cuda/cu_optim.cu ${CMAKE_SOURCE_DIR}/backends/cuda/cu_loss.cu
                            PROPERTIES COMPILE_OPTIONS -fmad=false)
target_link_libraries(scorch_cuda PUBLIC scorch CUDA::cudart_static CUDA::cublas)

# NCCL for the data-parallel collectives (cu_collective.c) when it is found beside the toolkit (the
# CUDA 13 toolkit ships it under lib/); without it they go through host memory and MPI.
option(SCORCH_NCCL "Use NCCL for data-parallel collectives when it is found" ON)
if(SCORCH_NCCL)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2
    HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib ${CUDAToolkit_TARGET_DIR}/lib)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    target_include_directories(scorch_cuda PUBLIC ${NCCL_INCLUDE_DIR})
    target_link_libraries(scorch_cuda PUBLIC ${NCCL_LIBRARY})
    target_compile_definitions(scorch_cuda PUBLIC SC_HAVE_NCCL=1)
    message(STATUS "scorch: data-parallel collectives on NCCL (${NCCL_LIBRARY})")
  else()
    message(STATUS "scorch: NCCL not found; data-parallel collectives on the CUDA backend go through host memory")
  endif()
endif()

set(SCORCH_CUDNN_FOUND OFF)
if(SCORCH_CUDNN)
  execute_process(COMMAND python3 -c "import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))"
    OUTPUT_VARIABLE scorch_pip_nvidia OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  find_path(CUDNN_INCLUDE_DIR cudnn.h
    HINTS ${CUDAToolkit_INCLUDE_DIRS} ${scorch_pip_nvidia}/nvidia/cudnn/include)
  find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9
    HINTS ${CUDAToolkit_LIBRARY_DIR} ${scorch_pip_nvidia}/nvidia/cudnn/lib)
  if(CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY)
    set(SCORCH_CUDNN_FOUND ON)
    target_include_directories(scorch_cuda PUBLIC ${CUDNN_INCLUDE_DIR})
    target_link_libraries(scorch_cuda PUBLIC ${CUDNN_LIBRARY})
    target_compile_definitions(scorch_cuda PUBLIC SC_HAVE_CUDNN=1)
  endif()
endif()
if(SCORCH_CUDNN_FOUND)
  message(STATUS "scorch: CUDA backend built; convolutions on cuDNN (${CUDNN_LIBRARY})")
else()
  message(STATUS "scorch: CUDA backend built; cuDNN not used, convolutions on im2col + cuBLAS")
endif()

# The trainer opens this backend for `--device cuda|auto` (train/train_plan.c): libscorch links it
# back (a cycle of static libraries, which CMake allows and repeats on the link line), and
# SCORCH_HAVE_CUDA tells C code (libscorch, scorch-run) that backend_cuda_* exist in this build.
target_compile_definitions(scorch PUBLIC SCORCH_HAVE_CUDA=1)
target_link_libraries(scorch PUBLIC scorch_cuda)
# Both were created before enable_language(CUDA), so CMake did not give them the architectures it
# requires of targets that link CUDA code (policy CMP0104).
set_target_properties(scorch scorch-run PROPERTIES CUDA_ARCHITECTURES "${SCORCH_CUDA_ARCHS}")
