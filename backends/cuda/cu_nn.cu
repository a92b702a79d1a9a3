/* Pools and BatchNormalization on the CUDA backend (semantics of cpu_nn_pool.c, cpu_nn_pool_grad.c,
 * cpu_nn_norm.c, cpu_nn_norm_grad.c); windows padded to 3 spatial dims (cu_window).
 *   MaxPool: max over the taps inside the input; Indices (storage_order 0) = flat index in X.
 *   AveragePool: divides by the taps inside the input, or with count_include_pad inside the
 *     explicitly padded extent [-pad_begin, D + pad_end) (never beyond it under ceil_mode).
 *   MaxPoolGrad: each dY goes to the FIRST maximum of its window in scan order; AveragePoolGrad
 *     spreads dY / count; both accumulate overlapping windows with atomics into a zeroed dX.
 *   BatchNorm: training statistics per channel in double (two passes, population variance), then
 *     Y = X a + b with a = scale / sqrt(var + eps), b = B - mean a; running stats
 *     r * momentum + cur * (1 - momentum). BatchNormGrad: dBias = sum dY, dScale = sum dY xhat,
 *     dX = scale istd (dY - dBias / M - xhat dScale / M).
 */
#include <math.h>
#include <stdint.h>

#include "backends/cuda/cu_block.cuh"
#include "backends/cuda/cu_kernels.h"

typedef struct {
    int64_t in[3], out[3], k[3], stride[3], dil[3], pb[3], pe[3];
} pwin;

static pwin pwin_of(const cu_window *w) {
    pwin v;
    for (int i = 0; i < 3; i++)
        v.in[i] = w->in[i], v.out[i] = w->out[i], v.k[i] = w->k[i], v.stride[i] = w->stride[i], v.dil[i] = w->dil[i],
        v.pb[i] = w->pb[i], v.pe[i] = w->pe[i];
    return v;
}

/* Output element e -> plane nc and window origin per dim. */
__device__ __forceinline__ void pool_pos(const pwin &w, int64_t e, int64_t *nc, int64_t *o) {
    o[2] = e % w.out[2];
    o[1] = (e / w.out[2]) % w.out[1];
    o[0] = (e / (w.out[2] * w.out[1])) % w.out[0];
    *nc = e / (w.out[2] * w.out[1] * w.out[0]);
}

/* Calls f(p) with the flat in-plane index p of each tap of window o inside the input, in tap order. */
template <typename F> __device__ __forceinline__ void for_taps(const pwin &w, const int64_t *o, F f) {
    for (int64_t t0 = 0; t0 < w.k[0]; t0++) {
        int64_t i0 = o[0] * w.stride[0] - w.pb[0] + t0 * w.dil[0];
        if (i0 < 0 || i0 >= w.in[0]) continue;
        for (int64_t t1 = 0; t1 < w.k[1]; t1++) {
            int64_t i1 = o[1] * w.stride[1] - w.pb[1] + t1 * w.dil[1];
            if (i1 < 0 || i1 >= w.in[1]) continue;
            for (int64_t t2 = 0; t2 < w.k[2]; t2++) {
                int64_t i2 = o[2] * w.stride[2] - w.pb[2] + t2 * w.dil[2];
                if (i2 < 0 || i2 >= w.in[2]) continue;
                f((i0 * w.in[1] + i1) * w.in[2] + i2);
            }
        }
    }
}

/* Scans the window; returns the flat in-plane index of the first maximum (-1 if no tap inside). */
template <typename T> __device__ int64_t max_tap(const pwin &w, const T *plane, const int64_t *o, T *best) {
    int64_t arg = -1;
    T m = 0;
    for_taps(w, o, [&](int64_t p) {
        T v = plane[p];
        if (arg < 0 || v > m || (v != v && m == m)) m = v, arg = p;
    });
    *best = m;
    return arg;
}

/* Taps of dim d counted by AveragePool: inside [0, in) or with include_pad [-pb, in + pe). */
__device__ __forceinline__ int64_t avg_count(const pwin &w, const int64_t *o, bool include_pad) {
    int64_t cnt = 1;
    for (int d = 0; d < 3; d++) {
        int64_t lo = include_pad ? -w.pb[d] : 0, hi = include_pad ? w.in[d] + w.pe[d] : w.in[d], n = 0;
        for (int64_t t = 0; t < w.k[d]; t++) {
            int64_t i = o[d] * w.stride[d] - w.pb[d] + t * w.dil[d];
            n += i >= lo && i < hi;
        }
        cnt *= n;
    }
    return cnt;
}

template <typename T> __global__ void k_max_pool(pwin w, const T *x, T *y, int64_t *ind, int64_t n) {
    int64_t S = w.in[0] * w.in[1] * w.in[2];
    GRID_STRIDE(e, n) {
        int64_t nc, o[3];
        pool_pos(w, e, &nc, o);
        T m;
        int64_t arg = max_tap(w, x + nc * S, o, &m);
        y[e] = arg < 0 ? (T)-INFINITY : m;
        if (ind) ind[e] = nc * S + (arg < 0 ? 0 : arg);
    }
}

template <typename T> __global__ void k_avg_pool(pwin w, const T *x, T *y, bool include_pad, int64_t n) {
    int64_t S = w.in[0] * w.in[1] * w.in[2];
    GRID_STRIDE(e, n) {
        int64_t nc, o[3];
        pool_pos(w, e, &nc, o);
        const T *p = x + nc * S;
        T s = 0;
        for_taps(w, o, [&](int64_t i) { s += p[i]; });
        int64_t cnt = avg_count(w, o, include_pad);
        y[e] = cnt > 0 ? s / (T)cnt : (T)0;
    }
}

/* The gradients gather instead of scattering: one thread per element of dX sums the outputs whose
 * window covers it, in increasing output order, in T: the CPU's scatter (cpu_nn_pool.c walks the
 * outputs in order and adds to dX) gives the same sums, and unlike atomics the result does not
 * depend on thread timing, so a recomputed node repeats its bits (the plan invariant).
 * f(o0, o1, o2) is called for each covering output position; along dim d those are
 * o = (i + pb - t dil) / stride for the taps t whose numerator is a non-negative multiple of the
 * stride, in increasing o (decreasing t). */
template <typename F> __device__ __forceinline__ void for_covering(const pwin &w, const int64_t *i, F f) {
    for (int64_t t0 = w.k[0] - 1; t0 >= 0; t0--) {
        int64_t n0 = i[0] + w.pb[0] - t0 * w.dil[0];
        if (n0 < 0 || n0 % w.stride[0] || n0 / w.stride[0] >= w.out[0]) continue;
        for (int64_t t1 = w.k[1] - 1; t1 >= 0; t1--) {
            int64_t n1 = i[1] + w.pb[1] - t1 * w.dil[1];
            if (n1 < 0 || n1 % w.stride[1] || n1 / w.stride[1] >= w.out[1]) continue;
            for (int64_t t2 = w.k[2] - 1; t2 >= 0; t2--) {
                int64_t n2 = i[2] + w.pb[2] - t2 * w.dil[2];
                if (n2 < 0 || n2 % w.stride[2] || n2 / w.stride[2] >= w.out[2]) continue;
                f(n0 / w.stride[0], n1 / w.stride[1], n2 / w.stride[2]);
            }
        }
    }
}

/* Input element e -> plane nc and position per dim. */
__device__ __forceinline__ void input_pos(const pwin &w, int64_t e, int64_t *nc, int64_t *i) {
    i[2] = e % w.in[2];
    i[1] = (e / w.in[2]) % w.in[1];
    i[0] = (e / (w.in[2] * w.in[1])) % w.in[0];
    *nc = e / (w.in[2] * w.in[1] * w.in[0]);
}

/* Pass 1 of MaxPool's gradient: the in-plane index of each window's first maximum (-1: none). */
template <typename T> __global__ void k_max_pool_arg(pwin w, const T *x, int64_t *arg, int64_t n) {
    int64_t S = w.in[0] * w.in[1] * w.in[2];
    GRID_STRIDE(e, n) {
        int64_t nc, o[3];
        pool_pos(w, e, &nc, o);
        T m;
        arg[e] = max_tap(w, x + nc * S, o, &m);
    }
}

/* Pass 2: dX[p] = sum of dY over the covering windows whose maximum is p. */
template <typename T> __global__ void k_max_pool_grad(pwin w, const T *dy, const int64_t *arg, T *dx, int64_t n) {
    int64_t O = w.out[0] * w.out[1] * w.out[2];
    GRID_STRIDE(e, n) {
        int64_t nc, i[3];
        input_pos(w, e, &nc, i);
        int64_t p = (i[0] * w.in[1] + i[1]) * w.in[2] + i[2];
        T acc = 0;
        for_covering(w, i, [&](int64_t o0, int64_t o1, int64_t o2) {
            int64_t q = nc * O + (o0 * w.out[1] + o1) * w.out[2] + o2;
            if (arg[q] == p) acc += dy[q];
        });
        dx[e] = acc;
    }
}

template <typename T> __global__ void k_avg_pool_grad(pwin w, const T *dy, T *dx, bool include_pad, int64_t n) {
    int64_t O = w.out[0] * w.out[1] * w.out[2];
    GRID_STRIDE(e, n) {
        int64_t nc, i[3];
        input_pos(w, e, &nc, i);
        T acc = 0;
        for_covering(w, i, [&](int64_t o0, int64_t o1, int64_t o2) {
            int64_t o[3] = {o0, o1, o2};
            int64_t cnt = avg_count(w, o, include_pad);
            if (cnt > 0) acc += dy[nc * O + (o0 * w.out[1] + o1) * w.out[2] + o2] / (T)cnt;
        });
        dx[e] = acc;
    }
}

/* ---- BatchNormalization ---- */

/* Batch statistics in two kernels, so that a channel's N * S elements are read by many blocks, not
 * one (a ResNet-50 stem has 64 channels of 800k elements at batch 64: one block per channel would
 * leave half an H100 idle). Each channel is cut into ch_parts chunks (cu_block.cuh); each block
 * reduces one chunk to (mean, M2) around its own mean, two passes over its chunk in double, and one
 * thread per channel merges the chunks in order with Chan et al.'s update (n = na + nb,
 * d = mb - ma, m = ma + d nb / n, M2 = M2a + M2b + d^2 na nb / n). */
/* part[3 (c P + p) ..]: the chunk's count, mean and M2; with dy, also part2[2 (c P + p) ..]: the
 * sum of dy and the sum of dy (x - chunk mean). */
template <typename T>
__global__ void k_bn_partial(const T *x, const T *dy, int64_t N, int64_t C, int64_t S, int64_t P, double *part, double *part2) {
    int64_t c = blockIdx.x / P, p = blockIdx.x % P, M = N * S, lo, hi;
    ch_chunk(M, P, p, &lo, &hi);
    double s = 0;
    for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x) s += (double)x[ch_at(j, c, C, S)];
    double cnt = (double)(hi - lo), total = block_sum<double>(s), m = cnt > 0 ? total / cnt : 0;
    double ss = 0, g = 0, gx = 0;
    for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x) {
        int64_t k = ch_at(j, c, C, S);
        double d = (double)x[k] - m;
        ss += d * d;
        if (dy) g += (double)dy[k], gx += (double)dy[k] * d;
    }
    ss = block_sum<double>(ss);
    if (dy) g = block_sum<double>(g), gx = block_sum<double>(gx);
    if (threadIdx.x == 0) {
        double *r = part + 3 * (c * P + p);
        r[0] = cnt, r[1] = m, r[2] = ss;
        if (dy) part2[2 * (c * P + p)] = g, part2[2 * (c * P + p) + 1] = gx;
    }
}

/* Chan's merge of channel c's P chunks, in order: mean and M2 over all of them. */
__device__ __forceinline__ void bn_merge(const double *part, int64_t c, int64_t P, double *mean, double *m2) {
    double n = 0, m = 0, q = 0;
    for (int64_t p = 0; p < P; p++) {
        const double *r = part + 3 * (c * P + p);
        if (r[0] == 0) continue;
        double nn = n + r[0], d = r[1] - m;
        m += d * r[0] / nn;
        q += r[2] + d * d * n * r[0] / nn;
        n = nn;
    }
    *mean = m, *m2 = q;
}

__global__ void k_bn_stats(const double *part, int64_t C, int64_t P, int64_t M, double *mean, double *var) {
    GRID_STRIDE(c, C) {
        double m, q;
        bn_merge(part, c, P, &m, &q);
        mean[c] = m, var[c] = q / (double)M;
    }
}

/* Per channel: the affine map (a, b) into ab, and the running statistics outputs. */
template <typename T>
__global__ void k_bn_coef(const T *scale, const T *bias, const T *in_mean, const T *in_var, const double *bmean, const double *bvar,
                          bool training, double eps, double mom, double *ab, T *run_mean, T *run_var, int64_t C) {
    GRID_STRIDE(c, C) {
        double m = training ? bmean[c] : (double)in_mean[c], v = training ? bvar[c] : (double)in_var[c];
        double a = (double)scale[c] / sqrt(v + eps);
        ab[c] = a;
        ab[C + c] = (double)bias[c] - m * a;
        if (training) {
            if (run_mean) run_mean[c] = (T)((double)in_mean[c] * mom + m * (1 - mom));
            if (run_var) run_var[c] = (T)((double)in_var[c] * mom + v * (1 - mom));
        } else {
            if (run_mean) run_mean[c] = in_mean[c];
            if (run_var) run_var[c] = in_var[c];
        }
    }
}

template <typename T> __global__ void k_bn_apply(const T *x, const double *ab, T *y, int64_t C, int64_t S, int64_t n) {
    GRID_STRIDE(e, n) {
        int64_t c = (e / S) % C;
        y[e] = x[e] * (T)ab[c] + (T)ab[C + c];
    }
}

/* Per channel (one block): dScale, dBias and the dX coefficients (mean, k, ky, kx) into coef. */
/* dScale = sum dy (x - mean) istd, dBias = sum dy, and dX's coefficients, from the merged chunks:
 * sum dy (x - mean) = sum over chunks of [sum dy (x - mb) + (mb - mean) sum dy]. */
template <typename T>
__global__ void k_bn_grad_stats(const double *part, const double *part2, const T *scale, int64_t C, int64_t P, int64_t M0,
                                double eps, T *dscale, T *dbias, double *coef) {
    GRID_STRIDE(c, C) {
        double mean, q, sdy = 0, sdyx = 0, M = (double)M0;
        bn_merge(part, c, P, &mean, &q);
        for (int64_t p = 0; p < P; p++) {
            const double *r = part + 3 * (c * P + p), *g = part2 + 2 * (c * P + p);
            sdy += g[0];
            sdyx += g[1] + (r[1] - mean) * g[0];
        }
        double istd = 1.0 / sqrt(q / M + eps), ds = sdyx * istd, k = (double)scale[c] * istd;
        if (dscale) dscale[c] = (T)ds;
        if (dbias) dbias[c] = (T)sdy;
        coef[4 * c] = mean, coef[4 * c + 1] = k, coef[4 * c + 2] = k * sdy / M, coef[4 * c + 3] = k * ds * istd / M;
    }
}

template <typename T> __global__ void k_bn_grad_apply(const T *dy, const T *x, const double *coef, T *dx, int64_t C, int64_t S, int64_t n) {
    GRID_STRIDE(e, n) {
        int64_t c = (e / S) % C;
        const double *k = coef + 4 * c;
        dx[e] = (T)k[1] * dy[e] - (T)k[2] - (T)k[3] * (x[e] - (T)k[0]);
    }
}

static void *out_at(const cu_call *c, int k) { return k < c->n_out ? c->out[k].data : NULL; }

/* x: the pooled input's desc, y: the pooled output's desc. */
static sc_status pool_window(const cu_call *c, const sc_desc *x, const sc_desc *y, pwin *pw) {
    const sc_window_attrs *wa = &c->node->attrs->window;
    if (!wa->has_kernel_shape && wa->n_spatial == 0) return cu_errorf(c, "kernel_shape is missing");
    cu_window w;
    SC_TRY(cu_window_get(c, wa, x, wa->kernel_shape, y, &w));
    *pw = pwin_of(&w);
    return SC_OK;
}

#define FLOAT_ONLY(t)                                                                                      \
    if ((t) != SC_F32 && (t) != SC_F64) return cu_errorf(c, "dtype %s not supported (f32, f64)", sc_dtype_name(t));

extern "C" {

sc_status cu_max_pool(const cu_call *c) {
    const sc_desc *x = &c->in[0].desc, *y = &c->out[0].desc;
    FLOAT_ONLY(x->dtype);
    pwin w;
    SC_TRY(pool_window(c, x, y, &w));
    int64_t *ind = (int64_t *)out_at(c, 1);
    if (ind && (c->out[1].desc.dtype != SC_I64 || c->node->attrs->window.storage_order != 0))
        return cu_errorf(c, "Indices must be int64 with storage_order 0 (column-major Indices not supported on CUDA)");
    int64_t n = sc_desc_numel(y);
    if (n == 0) return SC_OK;
    CU_BY_FLOAT(c, x->dtype, (k_max_pool<T><<<cu_grid(n), CU_BLOCK, 0, c->ctx->stream>>>(w, (const T *)c->in[0].data, (T *)c->out[0].data, ind, n)));
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

sc_status cu_average_pool(const cu_call *c) {
    const sc_desc *x = &c->in[0].desc, *y = &c->out[0].desc;
    FLOAT_ONLY(x->dtype);
    pwin w;
    SC_TRY(pool_window(c, x, y, &w));
    bool inc = c->node->attrs->window.count_include_pad;
    int64_t n = sc_desc_numel(y);
    if (n == 0) return SC_OK;
    CU_BY_FLOAT(c, x->dtype, (k_avg_pool<T><<<cu_grid(n), CU_BLOCK, 0, c->ctx->stream>>>(w, (const T *)c->in[0].data, (T *)c->out[0].data, inc, n)));
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

/* (dY, X) -> dX */
static sc_status pool_grad(const cu_call *c, bool is_max) {
    const sc_desc *dy = &c->in[0].desc, *x = &c->in[1].desc;
    FLOAT_ONLY(x->dtype);
    if (dy->dtype != x->dtype) return cu_errorf(c, "dY and X dtypes differ");
    pwin w;
    SC_TRY(pool_window(c, x, dy, &w));
    int64_t n = sc_desc_numel(dy), nx = sc_desc_numel(x);
    if (nx == 0) return SC_OK;
    bool inc = c->node->attrs->window.count_include_pad;
    cudaStream_t s = c->ctx->stream;
    int64_t *arg = NULL;
    if (is_max && n > 0) SC_TRY(cu_scratch(c, n * (int64_t)sizeof(int64_t), (void **)&arg));
#define POOL_GRAD(T)                                                                                       \
    if (is_max) {                                                                                          \
        if (n > 0) k_max_pool_arg<T><<<cu_grid(n), CU_BLOCK, 0, s>>>(w, (const T *)c->in[1].data, arg, n); \
        CU_LAUNCH_CHECK(c);                                                                                \
        k_max_pool_grad<T><<<cu_grid(nx), CU_BLOCK, 0, s>>>(w, (const T *)c->in[0].data, arg, (T *)c->out[0].data, nx); \
    } else {                                                                                               \
        k_avg_pool_grad<T><<<cu_grid(nx), CU_BLOCK, 0, s>>>(w, (const T *)c->in[0].data, (T *)c->out[0].data, inc, nx); \
    }                                                                                                      \
    CU_LAUNCH_CHECK(c);
    if (x->dtype == SC_F32) { POOL_GRAD(float) } else { POOL_GRAD(double) }
#undef POOL_GRAD
    return SC_OK;
}

sc_status cu_max_pool_grad(const cu_call *c) { return pool_grad(c, true); }
sc_status cu_average_pool_grad(const cu_call *c) { return pool_grad(c, false); }

sc_status cu_batch_norm(const cu_call *c) {
    const sc_batch_norm_attrs *ba = &c->node->attrs->batch_norm;
    const sc_desc *x = &c->in[0].desc;
    sc_dtype t = x->dtype;
    FLOAT_ONLY(t);
    if (x->rank < 2) return cu_errorf(c, "input rank %d < 2", x->rank);
    int64_t N = x->dims[0], C = x->dims[1], S = cu_prod(x->dims, 2, x->rank);
    for (int i = 1; i < 5; i++)
        if (c->in[i].desc.dtype != t || sc_desc_numel(&c->in[i].desc) != C) return cu_errorf(c, "input %d must be %s[%lld]", i, sc_dtype_name(t), (long long)C);
    if (C == 0) return SC_OK;
    int64_t P = ch_parts(C, N * S);
    void *buf;
    SC_TRY(cu_scratch(c, (4 * C + 3 * C * P) * (int64_t)sizeof(double), &buf));
    double *mean = (double *)buf, *var = mean + C, *ab = var + C, *part = ab + 2 * C;
    cudaStream_t s = c->ctx->stream;
    bool tr = ba->training_mode;
    int64_t n = N * C * S;
    void *rm = out_at(c, 1), *rv = out_at(c, 2);
#define BN(T)                                                                                              \
    if (tr) {                                                                                              \
        if (N * S == 0) return cu_errorf(c, "batch statistics of an empty input");                         \
        k_bn_partial<T><<<(unsigned)(C * P), cu_row_threads(N * S / P > 256 ? 256 : N * S / P), 0, s>>>(   \
            (const T *)c->in[0].data, (const T *)NULL, N, C, S, P, part, (double *)NULL);                  \
        CU_LAUNCH_CHECK(c);                                                                                \
        k_bn_stats<<<cu_grid(C), CU_BLOCK, 0, s>>>(part, C, P, N * S, mean, var);                          \
        CU_LAUNCH_CHECK(c);                                                                                \
    }                                                                                                      \
    k_bn_coef<T><<<cu_grid(C), CU_BLOCK, 0, s>>>((const T *)c->in[1].data, (const T *)c->in[2].data, (const T *)c->in[3].data, \
        (const T *)c->in[4].data, mean, var, tr, ba->epsilon, ba->momentum, ab, (T *)rm, (T *)rv, C);     \
    CU_LAUNCH_CHECK(c);                                                                                    \
    if (n > 0) {                                                                                           \
        k_bn_apply<T><<<cu_grid(n), CU_BLOCK, 0, s>>>((const T *)c->in[0].data, ab, (T *)c->out[0].data, C, S, n); \
        CU_LAUNCH_CHECK(c);                                                                                \
    }
    if (t == SC_F32) { BN(float) } else { BN(double) }
#undef BN
    return SC_OK;
}

/* (dY, X, scale) -> (dX, dScale, dBias) */
sc_status cu_batch_norm_grad(const cu_call *c) {
    const sc_desc *dy = &c->in[0].desc, *x = &c->in[1].desc, *sd = &c->in[2].desc;
    sc_dtype t = x->dtype;
    FLOAT_ONLY(t);
    if (x->rank < 2 || dy->dtype != t || sd->dtype != t || !sc_desc_same_shape(dy, x) || sc_desc_numel(sd) != x->dims[1])
        return cu_errorf(c, "dY must match X [N, C, ...] and scale must be [C] of X's dtype");
    int64_t N = x->dims[0], C = x->dims[1], S = cu_prod(x->dims, 2, x->rank), n = N * C * S;
    if (N * S == 0) return cu_errorf(c, "batch statistics of an empty input");
    int64_t P = ch_parts(C, N * S);
    void *buf;
    SC_TRY(cu_scratch(c, (4 * C + 5 * C * P) * (int64_t)sizeof(double), &buf));
    double *coef = (double *)buf, *part = coef + 4 * C, *part2 = part + 3 * C * P;
    cudaStream_t s = c->ctx->stream;
    double eps = c->node->attrs->batch_norm.epsilon;
#define BNG(T)                                                                                             \
    k_bn_partial<T><<<(unsigned)(C * P), cu_row_threads(N * S / P > 256 ? 256 : N * S / P), 0, s>>>(       \
        (const T *)c->in[1].data, (const T *)c->in[0].data, N, C, S, P, part, part2);                      \
    CU_LAUNCH_CHECK(c);                                                                                    \
    k_bn_grad_stats<T><<<cu_grid(C), CU_BLOCK, 0, s>>>(part, part2, (const T *)c->in[2].data, C, P, N * S, eps, \
        (T *)out_at(c, 1), (T *)out_at(c, 2), coef);                                                       \
    CU_LAUNCH_CHECK(c);                                                                                    \
    if (out_at(c, 0)) {                                                                                    \
        k_bn_grad_apply<T><<<cu_grid(n), CU_BLOCK, 0, s>>>((const T *)c->in[0].data, (const T *)c->in[1].data, coef, (T *)out_at(c, 0), C, S, n); \
        CU_LAUNCH_CHECK(c);                                                                                \
    }
    if (C == 0) return SC_OK;
    if (t == SC_F32) { BNG(float) } else { BNG(double) }
#undef BNG
    return SC_OK;
}

/* GlobalAveragePool: the mean of each (n, c) plane, a reduction over the trailing dims (cu_reduce.cu). */
sc_status cu_global_average_pool(const cu_call *c) {
    const sc_desc *x = &c->in[0].desc;
    if (x->rank < 2) return cu_errorf(c, "input rank %d < 2", x->rank);
    return cu_mean_planes(c, x->dtype, c->in[0].data, c->out[0].data, x->dims[0] * x->dims[1],
                          cu_prod(x->dims, 2, x->rank));
}

} /* extern "C" */
