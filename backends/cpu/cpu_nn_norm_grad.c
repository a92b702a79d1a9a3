/* BatchNormalizationGrad and LayerNormalizationGrad (graph/ops_train.def); f32 fast path and f64
 * reference. Both recompute the statistics from X, so the forward stores nothing extra.
 *
 * BatchNormalizationGrad (dY, X [N, C, D...], scale [C]) -> (dX, dScale, dBias), training mode:
 * per channel over the M = N * prod(D) positions, mean and the biased variance var of X,
 * istd = 1 / sqrt(var + eps), xhat = (X - mean) istd (what the forward normalised with);
 *   dBias = sum dY,  dScale = sum dY xhat,
 *   dX = scale istd (dY - dBias / M - xhat dScale / M)
 * (the mean and variance depend on X, which gives the two subtracted terms).
 *
 * LayerNormalizationGrad (dY, X, scale) -> (dX, dScale, dBias): rows are X.shape[:axis], each
 * normalised over its K = prod(X.shape[axis:]) values; scale is dense over those K values. With
 * g = dY scale:
 *   dX = istd (g - mean_K(g) - xhat mean_K(g xhat)),  dScale = sum_rows dY xhat,  dBias = sum_rows dY.
 * Statistics are accumulated in double for BatchNormalization (like the forward, cpu_nn_norm.c) and in
 * the tensor's dtype for LayerNormalization (again like the forward). Any output may be omitted.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_kernels.h"

static int64_t prod(const int64_t *d, int from, int to) {
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= d[i];
    return p;
}

static void *out_data(const sc_kernel_call *call, int k) { return k < call->n_out ? call->out[k].data : NULL; }

/* ---- BatchNormalizationGrad ---- */

#define BN_GRAD_IMPL(T, NAME)                                                                            \
    static void NAME(const T *dy, const T *x, const T *scale, int64_t N, int64_t C, int64_t S, double eps,  \
                     T *dx, T *dscale, T *dbias) {                                                       \
        double M = (double)(N * S);                                                                      \
        _Pragma("omp parallel for schedule(dynamic)") for (int64_t c = 0; c < C; c++) {                  \
            double s = 0;                                                                                \
            for (int64_t n = 0; n < N; n++) {                                                            \
                const T *xp = x + (n * C + c) * S;                                                       \
                T ps = 0;                                                                                \
                _Pragma("omp simd reduction(+ : ps)") for (int64_t i = 0; i < S; i++) ps += xp[i];       \
                s += ps;                                                                                 \
            }                                                                                            \
            double mean = s / M, ss = 0, sdy = 0, sdyx = 0;                                              \
            T m = (T)mean;                                                                               \
            for (int64_t n = 0; n < N; n++) {                                                            \
                const T *xp = x + (n * C + c) * S, *gp = dy + (n * C + c) * S;                           \
                T a = 0, b = 0, d = 0;                                                                   \
                _Pragma("omp simd reduction(+ : a, b, d)") for (int64_t i = 0; i < S; i++) {             \
                    T xc = xp[i] - m;                                                                    \
                    a += xc * xc;                                                                        \
                    b += gp[i];                                                                          \
                    d += gp[i] * xc;                                                                     \
                }                                                                                        \
                ss += a;                                                                                 \
                sdy += b;                                                                                \
                sdyx += d;                                                                               \
            }                                                                                            \
            double istd = 1.0 / sqrt(ss / M + eps);                                                      \
            double ds = sdyx * istd; /* sum dY xhat */                                                   \
            if (dscale) dscale[c] = (T)ds;                                                               \
            if (dbias) dbias[c] = (T)sdy;                                                                \
            if (!dx) continue;                                                                           \
            double k = (double)scale[c] * istd;                                                          \
            T kk = (T)k, ky = (T)(k * sdy / M), kx = (T)(k * ds * istd / M);                             \
            for (int64_t n = 0; n < N; n++) {                                                            \
                const T *xp = x + (n * C + c) * S, *gp = dy + (n * C + c) * S;                           \
                T *op = dx + (n * C + c) * S;                                                            \
                _Pragma("omp simd") for (int64_t i = 0; i < S; i++) op[i] = kk * gp[i] - ky - kx * (xp[i] - m); \
            }                                                                                            \
        }                                                                                                \
    }
BN_GRAD_IMPL(float, bn_grad_f32)
BN_GRAD_IMPL(double, bn_grad_f64)

sc_status cpu_batch_norm_grad(const sc_kernel_call *call) {
    const sc_desc *dy = &call->in[0].desc, *x = &call->in[1].desc, *s = &call->in[2].desc;
    sc_dtype t = x->dtype;
    if (t != SC_F32 && t != SC_F64) return cpu_errorf(call, "dtype %s not supported", sc_dtype_name(t));
    if (x->rank < 2 || dy->dtype != t || s->dtype != t || !sc_desc_same_shape(dy, x) || sc_desc_numel(s) != x->dims[1])
        return cpu_errorf(call, "dY must match X [N, C, ...] and scale must be [C] of X's dtype");
    int64_t N = x->dims[0], C = x->dims[1], S = prod(x->dims, 2, x->rank);
    double eps = call->node->attrs->batch_norm.epsilon;
    if (N * S == 0) return cpu_errorf(call, "batch statistics of an empty input");
    if (t == SC_F32)
        bn_grad_f32(call->in[0].data, call->in[1].data, call->in[2].data, N, C, S, eps, out_data(call, 0),
                    out_data(call, 1), out_data(call, 2));
    else
        bn_grad_f64(call->in[0].data, call->in[1].data, call->in[2].data, N, C, S, eps, out_data(call, 0),
                    out_data(call, 1), out_data(call, 2));
    return SC_OK;
}

/* ---- LayerNormalizationGrad ---- */

/* Rows in LN_CHUNKS(R) chunks of consecutive rows, fixed by R alone: each chunk sums its rows'
 * dScale / dBias contributions in row order into its own slice of acc (2 K values per chunk), and
 * the slices are added up in chunk order afterwards. The sums are thus the same bits on any number
 * of threads, and a thread that a busy core slows down holds up one chunk, not a static share. */
#define LN_ROWS_PER_CHUNK 32
#define LN_MAX_CHUNKS 256
static int64_t ln_chunks(int64_t R) {
    int64_t c = (R + LN_ROWS_PER_CHUNK - 1) / LN_ROWS_PER_CHUNK;
    return c < 1 ? 1 : c > LN_MAX_CHUNKS ? LN_MAX_CHUNKS : c;
}

#define LN_GRAD_IMPL(T, NAME)                                                                            \
    static void NAME(const T *dy, const T *x, const T *g, int64_t R, int64_t K, T eps, T *dx, T *dscale,   \
                     T *dbias, T *acc, int64_t chunks) {                                                 \
        memset(acc, 0, sizeof(T) * (size_t)(2 * K * chunks));                                            \
        _Pragma("omp parallel for schedule(dynamic) if (chunks > 1)") for (int64_t c = 0; c < chunks; c++) { \
            T *ad = acc + c * 2 * K, *ab = ad + K;                                                       \
            for (int64_t r = c * R / chunks; r < (c + 1) * R / chunks; r++) {                            \
                const T *xp = x + r * K, *gp = dy + r * K;                                               \
                T s = 0, ss = 0, sg = 0, sgx = 0;                                                        \
                _Pragma("omp simd reduction(+ : s)") for (int64_t i = 0; i < K; i++) s += xp[i];         \
                T m = s / (T)K;                                                                          \
                _Pragma("omp simd reduction(+ : ss)") for (int64_t i = 0; i < K; i++) ss += (xp[i] - m) * (xp[i] - m); \
                T is = (T)1 / (T)sqrt(ss / (T)K + eps);                                                  \
                _Pragma("omp simd reduction(+ : sg, sgx)") for (int64_t i = 0; i < K; i++) {             \
                    T xh = (xp[i] - m) * is, gi = gp[i] * g[i];                                          \
                    sg += gi;                                                                            \
                    sgx += gi * xh;                                                                      \
                    ad[i] += gp[i] * xh;                                                                 \
                    ab[i] += gp[i];                                                                      \
                }                                                                                        \
                if (dx) {                                                                                \
                    T *op = dx + r * K, mg = sg / (T)K, mgx = sgx / (T)K;                                \
                    _Pragma("omp simd") for (int64_t i = 0; i < K; i++) {                                \
                        T xh = (xp[i] - m) * is;                                                         \
                        op[i] = is * (gp[i] * g[i] - mg - xh * mgx);                                     \
                    }                                                                                    \
                }                                                                                        \
            }                                                                                            \
        }                                                                                                \
        for (int64_t i = 0; i < K; i++) {                                                                \
            T a = 0, b = 0;                                                                              \
            for (int64_t c = 0; c < chunks; c++) {                                                       \
                a += acc[c * 2 * K + i];                                                                 \
                b += acc[c * 2 * K + K + i];                                                             \
            }                                                                                            \
            if (dscale) dscale[i] = a;                                                                   \
            if (dbias) dbias[i] = b;                                                                     \
        }                                                                                                \
    }
LN_GRAD_IMPL(float, ln_grad_f32)
LN_GRAD_IMPL(double, ln_grad_f64)

sc_status cpu_layer_norm_grad(const sc_kernel_call *call) {
    const sc_layer_norm_attrs *la = &call->node->attrs->layer_norm;
    const sc_desc *dy = &call->in[0].desc, *x = &call->in[1].desc, *s = &call->in[2].desc;
    sc_dtype t = x->dtype;
    if (t != SC_F32 && t != SC_F64) return cpu_errorf(call, "dtype %s not supported", sc_dtype_name(t));
    int axis = (int)(la->axis < 0 ? la->axis + x->rank : la->axis);
    if (axis < 0 || axis >= x->rank) return cpu_errorf(call, "axis %lld out of range for rank %d", (long long)la->axis, x->rank);
    int64_t R = prod(x->dims, 0, axis), K = prod(x->dims, axis, x->rank);
    if (dy->dtype != t || s->dtype != t || !sc_desc_same_shape(dy, x) || sc_desc_numel(s) != K)
        return cpu_errorf(call, "dY must match X and scale must hold the %lld normalised values", (long long)K);
    if (K == 0) return SC_OK;
    int64_t chunks = ln_chunks(R);
    void *acc = malloc((size_t)(2 * K * chunks) * sc_dtype_size(t));
    if (!acc) return cpu_errorf(call, "out of memory");
    if (t == SC_F32)
        ln_grad_f32(call->in[0].data, call->in[1].data, call->in[2].data, R, K, la->epsilon, out_data(call, 0),
                    out_data(call, 1), out_data(call, 2), acc, chunks);
    else
        ln_grad_f64(call->in[0].data, call->in[1].data, call->in[2].data, R, K, la->epsilon, out_data(call, 0),
                    out_data(call, 1), out_data(call, 2), acc, chunks);
    free(acc);
    return SC_OK;
}
