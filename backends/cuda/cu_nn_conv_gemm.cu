/* Convolution on im2col + cuBLAS (used when cuDNN is absent or the pads are asymmetric, which
 * cuDNN cannot express), and the bias gradient shared with the cuDNN path. Math of cpu_nn_conv.c /
 * cpu_nn_conv_grad.c, with i = o * stride - pad_begin + t * dil per spatial dim (padded to 3 dims):
 *   col[(c K + t) O + o] = X[n, g Cg + c, i]        (0 outside the input)
 *   Y[n, g Mg : (g+1) Mg] = W_g (Mg x Cg K) @ col (Cg K x O)   (+ B[m])
 *   dW_g += dY_ng (Mg x O) @ col^T;   col = W_g^T @ dY_ng, then dX = col2im(col)
 * col2im gathers (each dX element sums the taps that read it), so it is deterministic.
 * One image at a time: the column buffer is Cg K O elements of the scratch workspace.
 */
#include <math.h>
#include <stdint.h>

#include "backends/cuda/cu_block.cuh"
#include "backends/cuda/cu_kernels.h"
#include "core/half.h"

typedef struct {
    int64_t in[3], out[3], k[3], stride[3], dil[3], pb[3];
} win3;

static win3 win3_of(const cu_window *w) {
    win3 v;
    for (int i = 0; i < 3; i++) {
        v.in[i] = w->in[i], v.out[i] = w->out[i], v.k[i] = w->k[i];
        v.stride[i] = w->stride[i], v.dil[i] = w->dil[i], v.pb[i] = w->pb[i];
    }
    return v;
}

template <typename T> __global__ void k_im2col(win3 w, const T *x, T *col, int64_t Cg, int64_t n) {
    int64_t O = w.out[0] * w.out[1] * w.out[2], Kt = w.k[0] * w.k[1] * w.k[2];
    GRID_STRIDE(e, n) {
        int64_t o = e % O, t = (e / O) % Kt, c = e / (O * Kt);
        int64_t o2 = o % w.out[2], o1 = (o / w.out[2]) % w.out[1], o0 = o / (w.out[2] * w.out[1]);
        int64_t t2 = t % w.k[2], t1 = (t / w.k[2]) % w.k[1], t0 = t / (w.k[2] * w.k[1]);
        int64_t i0 = o0 * w.stride[0] - w.pb[0] + t0 * w.dil[0];
        int64_t i1 = o1 * w.stride[1] - w.pb[1] + t1 * w.dil[1];
        int64_t i2 = o2 * w.stride[2] - w.pb[2] + t2 * w.dil[2];
        bool in = i0 >= 0 && i0 < w.in[0] && i1 >= 0 && i1 < w.in[1] && i2 >= 0 && i2 < w.in[2];
        col[e] = in ? x[((c * w.in[0] + i0) * w.in[1] + i1) * w.in[2] + i2] : (T)0;
    }
}

template <typename T> __global__ void k_col2im(win3 w, const T *col, T *dx, int64_t Cg, int64_t n) {
    int64_t O = w.out[0] * w.out[1] * w.out[2], Kt = w.k[0] * w.k[1] * w.k[2];
    GRID_STRIDE(e, n) {
        int64_t i2 = e % w.in[2], i1 = (e / w.in[2]) % w.in[1], i0 = (e / (w.in[2] * w.in[1])) % w.in[0];
        int64_t c = e / (w.in[2] * w.in[1] * w.in[0]);
        T s = 0;
        for (int64_t t0 = 0; t0 < w.k[0]; t0++) {
            int64_t a0 = i0 + w.pb[0] - t0 * w.dil[0];
            if (a0 < 0 || a0 % w.stride[0]) continue;
            int64_t o0 = a0 / w.stride[0];
            if (o0 >= w.out[0]) continue;
            for (int64_t t1 = 0; t1 < w.k[1]; t1++) {
                int64_t a1 = i1 + w.pb[1] - t1 * w.dil[1];
                if (a1 < 0 || a1 % w.stride[1]) continue;
                int64_t o1 = a1 / w.stride[1];
                if (o1 >= w.out[1]) continue;
                for (int64_t t2 = 0; t2 < w.k[2]; t2++) {
                    int64_t a2 = i2 + w.pb[2] - t2 * w.dil[2];
                    if (a2 < 0 || a2 % w.stride[2]) continue;
                    int64_t o2 = a2 / w.stride[2];
                    if (o2 >= w.out[2]) continue;
                    int64_t t = (t0 * w.k[1] + t1) * w.k[2] + t2, o = (o0 * w.out[1] + o1) * w.out[2] + o2;
                    s += col[(c * Kt + t) * O + o];
                }
            }
        }
        dx[e] = s;
    }
}

template <typename T> __global__ void k_add_bias(T *y, const T *b, int64_t M, int64_t S, int64_t n) {
    GRID_STRIDE(e, n) y[e] += b[(e / S) % M];
}

/* db[m] = sum of dy over n and the S positions, in double: chunk sums (ch_parts chunks per channel,
 * cu_block.cuh), then one thread per channel adds its chunks in order. bf16 and f16 (stored as
 * uint16_t, `half` the format) are read exactly into double and db is rounded as the widened f32 path
 * rounds it: to float, then once to the 16-bit type, so the bits are the same without the f32 copy
 * of dy. */
template <typename T> struct bias_io {
    static __device__ double load(T v, bool) { return (double)v; }
    static __device__ T store(double s, bool) { return (T)s; }
};
template <> struct bias_io<uint16_t> {
    static __device__ double load(uint16_t v, bool f16) { return f16 ? sc_f16_to_f32(v) : sc_bf16_to_f32(v); }
    static __device__ uint16_t store(double s, bool f16) { return f16 ? sc_f32_to_f16((float)s) : sc_f32_to_bf16((float)s); }
};

template <typename T>
__global__ void k_bias_grad_part(const T *dy, int64_t N, int64_t M, int64_t S, int64_t P, bool f16, double *part) {
    int64_t m = blockIdx.x / P, p = blockIdx.x % P, lo, hi;
    ch_chunk(N * S, P, p, &lo, &hi);
    double s = 0;
    for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x) s += bias_io<T>::load(dy[ch_at(j, m, M, S)], f16);
    s = block_sum<double>(s);
    if (threadIdx.x == 0) part[m * P + p] = s;
}

template <typename T> __global__ void k_bias_grad(const double *part, int64_t M, int64_t P, bool f16, T *db) {
    GRID_STRIDE(m, M) {
        double s = 0;
        for (int64_t p = 0; p < P; p++) s += part[m * P + p];
        db[m] = bias_io<T>::store(s, f16);
    }
}

static __device__ float act_exp(float v) { return expf(v); }
static __device__ double act_exp(double v) { return exp(v); }

/* sc_fused_act (graph/attrs.h) on one element, as the CPU's post-ops compute it. */
template <typename T> static __device__ T act_apply(int act, T cap, T v) {
    switch (act) {
    case SC_FUSED_RELU: v = v < (T)0 ? (T)0 : v; return cap > (T)0 && v > cap ? cap : v;
    case SC_FUSED_SIGMOID: return (T)1 / ((T)1 + act_exp(-v));
    case SC_FUSED_SWISH: return v / ((T)1 + act_exp(-v));
    case SC_FUSED_HARD_SWISH: {
        T h = v / (T)6 + (T)0.5;
        return v * (h < (T)0 ? (T)0 : h > (T)1 ? (T)1 : h);
    }
    default: return v;
    }
}

template <typename T> __global__ void k_conv_epilogue(T *y, const T *s, int64_t n, int act, T cap) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = act_apply(act, cap, s ? y[i] + s[i] : y[i]);
}

/* y[n, m, s] = b[m], moved by element size. */
template <typename T> __global__ void k_fill_channels(T *y, const T *b, int64_t M, int64_t S, int64_t n) {
    GRID_STRIDE(i, n) y[i] = b[(i / S) % M];
}

extern "C" sc_status cu_fill_channels(const cu_call *c, size_t es, void *y, const void *b, int64_t N, int64_t M,
                                      int64_t S) {
    int64_t n = N * M * S;
    if (n == 0) return SC_OK;
    cudaStream_t s = c->ctx->stream;
    CU_BY_SIZE(c, es, (k_fill_channels<T><<<cu_grid(n), CU_BLOCK, 0, s>>>((T *)y, (const T *)b, M, S, n)));
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

extern "C" sc_status cu_conv_epilogue(const cu_call *c, sc_dtype t, void *y, const void *s, int64_t n, sc_fused_act act,
                                      double cap) {
    if (n == 0 || (!s && act == SC_FUSED_NONE)) return SC_OK;
    cudaStream_t st = c->ctx->stream;
    if (t == SC_F32) k_conv_epilogue<float><<<cu_grid(n), CU_BLOCK, 0, st>>>((float *)y, (const float *)s, n, (int)act, (float)cap);
    else k_conv_epilogue<double><<<cu_grid(n), CU_BLOCK, 0, st>>>((double *)y, (const double *)s, n, (int)act, cap);
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

extern "C" sc_status cu_bias_grad(const cu_call *c, sc_dtype t, const void *dy, int64_t N, int64_t M, int64_t S, void *db) {
    if (M == 0) return SC_OK;
    int64_t P = ch_parts(M, N * S), th = N * S / P > 256 ? 256 : N * S / P;
    void *part = NULL;
    SC_TRY(cu_scratch(c, M * P * (int64_t)sizeof(double), &part));
    cudaStream_t s = c->ctx->stream;
    bool f16 = t == SC_F16;
    unsigned blocks = (unsigned)(M * P), threads = cu_row_threads(th);
    double *pd = (double *)part;
#define BIAS_GRAD(T)                                                                          \
    do {                                                                                      \
        k_bias_grad_part<T><<<blocks, threads, 0, s>>>((const T *)dy, N, M, S, P, f16, pd);   \
        CU_LAUNCH_CHECK(c);                                                                   \
        k_bias_grad<T><<<cu_grid(M), CU_BLOCK, 0, s>>>(pd, M, P, f16, (T *)db);               \
    } while (0)
    if (t == SC_F32) BIAS_GRAD(float);
    else if (t == SC_F64) BIAS_GRAD(double);
    else if (sc_dtype_is_half(t)) BIAS_GRAD(uint16_t);
    else return cu_errorf(c, "bias gradient: dtype %s not supported", sc_dtype_name(t));
#undef BIAS_GRAD
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

template <typename T>
static sc_status conv_fwd(const cu_call *c, const cu_window *cw, int64_t N, int64_t C, int64_t M, int64_t G, const T *x,
                          const T *wt, const T *b, T *y, sc_dtype t) {
    win3 w = win3_of(cw);
    int64_t Cg = C / G, Mg = M / G, Kt = w.k[0] * w.k[1] * w.k[2], O = w.out[0] * w.out[1] * w.out[2];
    int64_t Si = w.in[0] * w.in[1] * w.in[2], ncol = Cg * Kt * O;
    void *colv;
    SC_TRY(cu_scratch(c, ncol * (int64_t)sizeof(T), &colv));
    T *col = (T *)colv;
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            k_im2col<T><<<cu_grid(ncol), CU_BLOCK, 0, c->ctx->stream>>>(w, x + (n * C + g * Cg) * Si, col, Cg, ncol);
            CU_LAUNCH_CHECK(c);
            SC_TRY(cu_gemm_rm(c, t, false, false, Mg, O, Cg * Kt, 1.0, wt + g * Mg * Cg * Kt, Cg * Kt, 0, col, O, 0, 0.0,
                              y + (n * M + g * Mg) * O, O, 0, 1));
        }
    if (b && N * M * O > 0) {
        k_add_bias<T><<<cu_grid(N * M * O), CU_BLOCK, 0, c->ctx->stream>>>(y, b, M, O, N * M * O);
        CU_LAUNCH_CHECK(c);
    }
    return SC_OK;
}

template <typename T>
static sc_status conv_bwd(const cu_call *c, const cu_window *cw, int64_t N, int64_t C, int64_t M, int64_t G, const T *dy,
                          const T *x, const T *wt, T *dx, T *dw, T *db, sc_dtype t) {
    win3 w = win3_of(cw);
    int64_t Cg = C / G, Mg = M / G, Kt = w.k[0] * w.k[1] * w.k[2], O = w.out[0] * w.out[1] * w.out[2];
    int64_t Si = w.in[0] * w.in[1] * w.in[2], ncol = Cg * Kt * O, nx = Cg * Si;
    if (db) SC_TRY(cu_bias_grad(c, t, dy, N, M, O, db));
    if (!dx && !dw) return SC_OK;
    void *colv;
    SC_TRY(cu_scratch(c, ncol * (int64_t)sizeof(T), &colv));
    T *col = (T *)colv;
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            const T *dyg = dy + (n * M + g * Mg) * O;
            if (dw) {
                k_im2col<T><<<cu_grid(ncol), CU_BLOCK, 0, c->ctx->stream>>>(w, x + (n * C + g * Cg) * Si, col, Cg, ncol);
                CU_LAUNCH_CHECK(c);
                SC_TRY(cu_gemm_rm(c, t, false, true, Mg, Cg * Kt, O, 1.0, dyg, O, 0, col, O, 0, n == 0 ? 0.0 : 1.0,
                                  dw + g * Mg * Cg * Kt, Cg * Kt, 0, 1));
            }
            if (dx) {
                SC_TRY(cu_gemm_rm(c, t, true, false, Cg * Kt, O, Mg, 1.0, wt + g * Mg * Cg * Kt, Cg * Kt, 0, dyg, O, 0, 0.0,
                                  col, O, 0, 1));
                k_col2im<T><<<cu_grid(nx), CU_BLOCK, 0, c->ctx->stream>>>(w, col, dx + (n * C + g * Cg) * Si, Cg, nx);
                CU_LAUNCH_CHECK(c);
            }
        }
    if (dw && N == 0) CU_CHECK(c, cudaMemsetAsync(dw, 0, (size_t)(M * Cg * Kt) * sizeof(T), c->ctx->stream));
    return SC_OK;
}

extern "C" sc_status cu_conv_gemm_fwd(const cu_call *c, const cu_window *w, int64_t N, int64_t C, int64_t M, int64_t G,
                                      sc_dtype t, const void *x, const void *wt, const void *b, void *y) {
    if (t == SC_F32) return conv_fwd<float>(c, w, N, C, M, G, (const float *)x, (const float *)wt, (const float *)b, (float *)y, t);
    if (t == SC_F64) return conv_fwd<double>(c, w, N, C, M, G, (const double *)x, (const double *)wt, (const double *)b, (double *)y, t);
    return cu_errorf(c, "dtype %s not supported (f32, f64)", sc_dtype_name(t));
}

extern "C" sc_status cu_conv_gemm_bwd(const cu_call *c, const cu_window *w, int64_t N, int64_t C, int64_t M, int64_t G,
                                      sc_dtype t, const void *dy, const void *x, const void *wt, void *dx, void *dw, void *db) {
    if (t == SC_F32)
        return conv_bwd<float>(c, w, N, C, M, G, (const float *)dy, (const float *)x, (const float *)wt, (float *)dx, (float *)dw, (float *)db, t);
    if (t == SC_F64)
        return conv_bwd<double>(c, w, N, C, M, G, (const double *)dy, (const double *)x, (const double *)wt, (double *)dx, (double *)dw, (double *)db, t);
    return cu_errorf(c, "dtype %s not supported (f32, f64)", sc_dtype_name(t));
}
