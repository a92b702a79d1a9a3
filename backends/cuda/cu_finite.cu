// The per-step finite check of the state on the device (backend_cuda.c, cuda_all_finite): a value
// is non-finite exactly when its exponent bits are all ones, so each element is tested with integer
// ops on its bits and any thread that finds one sets *flag. Every writer stores the same 1, so the
// unordered stores need no atomics; the host reads the flag once for all the tensors.
#include "backends/cuda/cu_block.cuh"
#include "backends/cuda/cuda_common.h"

template <typename U> __global__ void k_nonfinite(const U *x, U mask, int64_t n, unsigned *flag) {
    bool bad = false;
    GRID_STRIDE(i, n) bad |= (x[i] & mask) == mask;
    if (bad) *flag = 1u;
}

extern "C" sc_status cu_nonfinite_launch(cudaStream_t s, const void *x, sc_dtype t, int64_t n, unsigned *flag) {
    const cu_call *c = NULL;
    if (n == 0) return SC_OK;
    switch (t) {
    case SC_F32: k_nonfinite<uint32_t><<<cu_grid(n), CU_BLOCK, 0, s>>>((const uint32_t *)x, 0x7f800000u, n, flag); break;
    case SC_F64:
        k_nonfinite<unsigned long long><<<cu_grid(n), CU_BLOCK, 0, s>>>((const unsigned long long *)x,
                                                                         0x7ff0000000000000ull, n, flag);
        break;
    case SC_BF16: k_nonfinite<uint16_t><<<cu_grid(n), CU_BLOCK, 0, s>>>((const uint16_t *)x, (uint16_t)0x7f80u, n, flag); break;
    case SC_F16: k_nonfinite<uint16_t><<<cu_grid(n), CU_BLOCK, 0, s>>>((const uint16_t *)x, (uint16_t)0x7c00u, n, flag); break;
    default: return SC_OK; /* integers are finite */
    }
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}
