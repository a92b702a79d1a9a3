/* The dispatch of launches by element size (CU_BY_SIZE) and float type (CU_BY_FLOAT), the grid-stride loop, and the
 * block-wide reductions shared by the row kernels (cu_reduce.cu, cu_nn.cu, cu_nn_norm.cu, cu_loss.cu): warp
 * shuffles, then one value per warp through shared memory. Every thread of the block must call
 * them (they contain __syncthreads) and every thread receives the result. Blocks are at most 1024
 * threads, a multiple of 32.
 */
#ifndef SC_CU_BLOCK_CUH
#define SC_CU_BLOCK_CUH

/* Runs CASE with T the unsigned type of es bytes (1, 2, 4, 8): the kernels that only move elements
 * serve every dtype this way; another size returns an error naming call c. */
#define CU_BY_SIZE(c, es, CASE)                                                                            \
    switch (es) {                                                                                          \
    case 1: { typedef uint8_t T; CASE; break; }                                                            \
    case 2: { typedef uint16_t T; CASE; break; }                                                           \
    case 4: { typedef uint32_t T; CASE; break; }                                                           \
    case 8: { typedef uint64_t T; CASE; break; }                                                           \
    default: return cu_errorf(c, "element size %zu not supported", (size_t)(es));                          \
    }

/* Runs CASE with T float or double for an f32 or f64 dtype t; another dtype returns an error naming
 * call c. */
#define CU_BY_FLOAT(c, t, CASE)                                                                            \
    switch (t) {                                                                                           \
    case SC_F32: { typedef float T; CASE; break; }                                                         \
    case SC_F64: { typedef double T; CASE; break; }                                                        \
    default: return cu_errorf(c, "dtype %s not supported (f32, f64)", sc_dtype_name(t));                   \
    }

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

/* Per-channel reductions over [N, C, S] spread over many blocks (BatchNormalization statistics,
 * bias gradients): each channel's M = N * S elements are cut into P chunks, P a function of the
 * shape alone (so the order of the sums, and their bits, depend on nothing else): enough chunks
 * for about 1024 blocks in all, none smaller than 8192 elements. */
static inline int64_t ch_parts(int64_t C, int64_t M) {
    int64_t by_size = (M + 8191) / 8192, by_grid = (1024 + C - 1) / C;
    int64_t p = by_size < by_grid ? by_size : by_grid;
    return p > 0 ? p : 1;
}

/* Chunk p of P of a channel's M elements: [lo, hi). */
__device__ __forceinline__ void ch_chunk(int64_t M, int64_t P, int64_t p, int64_t *lo, int64_t *hi) {
    *lo = M * p / P;
    *hi = M * (p + 1) / P;
}

/* Element j of channel c in [N, C, S]. */
__device__ __forceinline__ int64_t ch_at(int64_t j, int64_t c, int64_t C, int64_t S) { return (j / S * C + c) * S + j % S; }

#endif
