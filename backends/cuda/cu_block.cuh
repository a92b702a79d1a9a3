/* Block-wide reductions shared by the row kernels (cu_reduce.cu, cu_nn.cu, cu_loss.cu): warp
 * shuffles, then one value per warp through shared memory. Every thread of the block must call
 * them (they contain __syncthreads) and every thread receives the result. Blocks are at most 1024
 * threads, a multiple of 32.
 */
#ifndef SC_CU_BLOCK_CUH
#define SC_CU_BLOCK_CUH

#define GRID_STRIDE(i, n) for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

template <typename A> __device__ __forceinline__ A warp_sum(A v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
template <typename A> __device__ __forceinline__ A warp_max(A v) {
    for (int o = 16; o > 0; o >>= 1) {
        A w = __shfl_xor_sync(0xffffffffu, v, o);
        v = w > v ? w : v;
    }
    return v;
}

template <typename A> __device__ A block_sum(A v) {
    __shared__ A sh[32];
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads(); /* sh may still be read by a previous call */
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : (A)0;
    return warp_sum(v);
}

/* NaN-aware: a NaN anywhere makes the result NaN, like the CPU's running max over x > m. */
template <typename A> __device__ A block_max(A v) {
    __shared__ A sh[32];
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : sh[0];
    return warp_max(v);
}

/* Threads per block for a row of n elements: a multiple of 32 up to 1024. */
static inline int cu_row_threads(int64_t n) {
    int t = 32;
    while (t < 1024 && t < n) t *= 2;
    return t;
}

#endif
