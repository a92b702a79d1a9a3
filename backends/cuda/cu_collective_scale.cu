// The division of a summed bucket by the number of ranks (cu_collective.c, NCCL path): x / N in the
// element type, as the CPU's collectives divide (backends/comm_mpi.c), so a mean over two ranks has
// the bits of the CPU backend's (NCCL's sum of two values is one correctly rounded add either way).
#include "backends/cuda/cu_block.cuh"
#include "backends/cuda/cu_kernels.h"
#include "backends/cuda/cuda_common.h"

template <typename T> __global__ void k_divide(T *x, T d, int64_t n) {
    GRID_STRIDE(i, n) x[i] = x[i] / d;
}

extern "C" sc_status cu_divide_launch(cudaStream_t s, void *x, sc_dtype t, double d, int64_t n) {
    const cu_call *c = NULL;
    if (n == 0) return SC_OK;
    CU_BY_FLOAT(c, t, (k_divide<T><<<cu_grid(n), CU_BLOCK, 0, s>>>((T *)x, (T)d, n)));
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}
