/* Normalisations of the CUDA backend: Softmax / LogSoftmax and their gradients, LayerNormalization
 * and its gradient. Semantics are the CPU's (cpu_nn_norm.c, cpu_nn_grad.c, cpu_nn_norm_grad.c):
 *   Softmax along axis (legacy_2d: over the flattened dims [axis:]); SoftmaxGrad
 *     dX = Y (dY - sum(dY Y)), LogSoftmaxGrad dX = dY - exp(Y) sum(dY).
 *   LayerNorm over dims [axis:], two-pass population variance, inv_std = 1 / sqrt(var + eps);
 *     its gradient dX = istd (g - mean(g) - xhat mean(g xhat)), g = dY scale, dScale = sum_rows dY
 *     xhat, dBias = sum_rows dY.
 * One block per row with block reductions (cu_block.cuh); the order of additions differs from the
 * CPU's, hence the tolerances of tests/cuda/test_cuda_ops.c.
 */
#include <math.h>
#include <stdint.h>

#include "backends/cuda/cu_block.cuh"
#include "backends/cuda/cu_kernels.h"

/* ---- Softmax family: rows of n values at stride `inner` ---- */

enum { SM_SOFTMAX, SM_LOG_SOFTMAX, SM_SOFTMAX_GRAD, SM_LOG_SOFTMAX_GRAD };

template <int OP, typename T>
__global__ void k_softmax(const T *a, const T *b, T *y, int64_t rows, int64_t n, int64_t inner) {
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        int64_t o = row / inner, j = row % inner, base = o * n * inner + j;
        if (OP == SM_SOFTMAX || OP == SM_LOG_SOFTMAX) {
            const T *x = a + base;
            T m = -INFINITY;
            for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
                T v = x[i * inner];
                m = (v > m || v != v) ? v : m;
            }
            m = block_max<T>(m);
            T s = 0;
            for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += exp(x[i * inner] - m);
            s = block_sum<T>(s);
            T ls = m + log(s);
            for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
                y[base + i * inner] = OP == SM_LOG_SOFTMAX ? x[i * inner] - ls : exp(x[i * inner] - ls);
        } else { /* a = dY, b = Y */
            T s = 0;
            for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
                s += OP == SM_SOFTMAX_GRAD ? a[base + i * inner] * b[base + i * inner] : a[base + i * inner];
            s = block_sum<T>(s);
            for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
                int64_t k = base + i * inner;
                y[k] = OP == SM_SOFTMAX_GRAD ? b[k] * (a[k] - s) : a[k] - exp(b[k]) * s;
            }
        }
    }
}

template <int OP> static sc_status softmax_run(const cu_call *c) {
    const sc_axis_attrs *aa = &c->node->attrs->axis;
    bool grad = OP >= SM_SOFTMAX_GRAD;
    const sc_desc *x = &c->in[grad ? 1 : 0].desc;
    int64_t outer, n, inner;
    if (!sc_softmax_groups(x, aa, &outer, &n, &inner))
        return cu_errorf(c, "axis %lld out of range for rank %d", (long long)aa->axis, x->rank);
    int64_t rows = outer * inner;
    if (n == 0 || rows == 0) return SC_OK;
    if (grad && (c->in[0].desc.dtype != x->dtype || !sc_desc_same_shape(&c->in[0].desc, x)))
        return cu_errorf(c, "dY must match Y");
    unsigned blocks = (unsigned)(rows < 2147483647 ? rows : 2147483647);
    int th = cu_row_threads(n > 512 ? 512 : n);
    const void *a = c->in[0].data, *b = grad ? c->in[1].data : NULL;
    switch (x->dtype) {
    case SC_F32: k_softmax<OP, float><<<blocks, th, 0, c->ctx->stream>>>((const float *)a, (const float *)b, (float *)c->out[0].data, rows, n, inner); break;
    case SC_F64: k_softmax<OP, double><<<blocks, th, 0, c->ctx->stream>>>((const double *)a, (const double *)b, (double *)c->out[0].data, rows, n, inner); break;
    default: return cu_errorf(c, "dtype %s not supported", sc_dtype_name(x->dtype));
    }
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

/* ---- LayerNormalization ---- */

/* Scale / B broadcast (numpy, right-aligned) to the normalised dims; dense when st == NULL-like
 * (dense flag), so the common case reads p[i] directly. */
typedef struct {
    bool dense;
    int nr;
    int64_t dims[SC_MAX_RANK], st[SC_MAX_RANK];
} ln_param_geom;

template <typename T> __device__ __forceinline__ T ln_param_at(const T *p, const ln_param_geom &g, int64_t i) {
    if (g.dense) return p[i];
    int64_t off = 0;
    for (int k = g.nr - 1; k >= 0; k--) {
        off += (i % g.dims[k]) * g.st[k];
        i /= g.dims[k];
    }
    return p[off];
}

/* Mean m and 1 / sqrt(variance + eps) of one row of K, two passes (the CPU's order of terms per
 * thread differs, not the formula); every thread of the block gets both. */
template <typename T> __device__ void ln_row_stats(const T *p, int64_t K, T eps, T *m, T *is) {
    T s = 0;
    for (int64_t i = threadIdx.x; i < K; i += blockDim.x) s += p[i];
    T mean = block_sum<T>(s) / (T)K;
    T ss = 0;
    for (int64_t i = threadIdx.x; i < K; i += blockDim.x) ss += (p[i] - mean) * (p[i] - mean);
    *m = mean;
    *is = (T)1 / sqrt(block_sum<T>(ss) / (T)K + eps);
}

template <typename T>
__global__ void k_layer_norm(const T *x, const T *g, ln_param_geom gg, const T *b, ln_param_geom bg, T *y, T *mean_out,
                             T *istd_out, int64_t R, int64_t K, T eps) {
    for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
        const T *p = x + r * K;
        T m, is;
        ln_row_stats(p, K, eps, &m, &is);
        for (int64_t i = threadIdx.x; i < K; i += blockDim.x) {
            T v = (p[i] - m) * is * ln_param_at(g, gg, i);
            y[r * K + i] = b ? v + ln_param_at(b, bg, i) : v;
        }
        if (threadIdx.x == 0) {
            if (mean_out) mean_out[r] = m;
            if (istd_out) istd_out[r] = is;
        }
    }
}

/* dX per row, and the row statistics (mean, istd) for the column sums that follow. */
template <typename T>
__global__ void k_layer_norm_grad_rows(const T *dy, const T *x, const T *g, T *dx, T *stats, int64_t R, int64_t K, T eps) {
    for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
        const T *xp = x + r * K, *gp = dy + r * K;
        T m, is;
        ln_row_stats(xp, K, eps, &m, &is);
        T sg = 0, sgx = 0;
        for (int64_t i = threadIdx.x; i < K; i += blockDim.x) {
            T xh = (xp[i] - m) * is, gi = gp[i] * g[i];
            sg += gi;
            sgx += gi * xh;
        }
        T mg = block_sum<T>(sg) / (T)K, mgx = block_sum<T>(sgx) / (T)K;
        if (dx)
            for (int64_t i = threadIdx.x; i < K; i += blockDim.x) {
                T xh = (xp[i] - m) * is;
                dx[r * K + i] = is * (gp[i] * g[i] - mg - xh * mgx);
            }
        if (threadIdx.x == 0) stats[2 * r] = m, stats[2 * r + 1] = is;
    }
}

/* dScale[i] = sum_r dY[r, i] xhat[r, i], dBias[i] = sum_r dY[r, i]: one thread per column, rows
 * walked in order (coalesced across the threads of a warp). */
template <typename T>
__global__ void k_layer_norm_grad_cols(const T *dy, const T *x, const T *stats, T *dscale, T *dbias, int64_t R, int64_t K) {
    GRID_STRIDE(i, K) {
        T a = 0, b = 0;
        for (int64_t r = 0; r < R; r++) {
            T g = dy[r * K + i];
            a += g * (x[r * K + i] - stats[2 * r]) * stats[2 * r + 1];
            b += g;
        }
        if (dscale) dscale[i] = a;
        if (dbias) dbias[i] = b;
    }
}

static sc_status ln_param_geom_make(const cu_call *c, int idx, int axis, int64_t K, ln_param_geom *g) {
    const sc_desc *x = &c->in[0].desc, *p = &c->in[idx].desc;
    *g = ln_param_geom{};
    if (p->dtype != x->dtype) return cu_errorf(c, "input %d is %s, X is %s", idx, sc_dtype_name(p->dtype), sc_dtype_name(x->dtype));
    g->dense = sc_desc_numel(p) == K;
    if (g->dense) return SC_OK;
    int nr = x->rank - axis;
    if (p->rank > nr) return cu_errorf(c, "input %d has rank %d > normalised rank %d", idx, p->rank, nr);
    g->nr = nr;
    int64_t s = 1;
    for (int i = nr - 1; i >= 0; i--) {
        int pi = i - (nr - p->rank);
        int64_t d = pi >= 0 ? p->dims[pi] : 1;
        if (d != 1 && d != x->dims[axis + i]) return cu_errorf(c, "input %d does not broadcast to the normalised shape", idx);
        g->dims[i] = x->dims[axis + i];
        g->st[i] = d == 1 ? 0 : s;
        s *= d;
    }
    return SC_OK;
}

static void *out_at(const cu_call *c, int k) { return k < c->n_out ? c->out[k].data : NULL; }

extern "C" {

sc_status cu_softmax(const cu_call *c) { return softmax_run<SM_SOFTMAX>(c); }
sc_status cu_log_softmax(const cu_call *c) { return softmax_run<SM_LOG_SOFTMAX>(c); }
sc_status cu_softmax_grad(const cu_call *c) { return softmax_run<SM_SOFTMAX_GRAD>(c); }
sc_status cu_log_softmax_grad(const cu_call *c) { return softmax_run<SM_LOG_SOFTMAX_GRAD>(c); }

sc_status cu_layer_norm(const cu_call *c) {
    const sc_layer_norm_attrs *la = &c->node->attrs->layer_norm;
    const sc_desc *x = &c->in[0].desc;
    int axis = (int)(la->axis < 0 ? la->axis + x->rank : la->axis);
    if (axis < 0 || axis >= x->rank) return cu_errorf(c, "axis %lld out of range for rank %d", (long long)la->axis, x->rank);
    int64_t R = cu_prod(x->dims, 0, axis), K = cu_prod(x->dims, axis, x->rank);
    for (int k = 1; k < 3 && k < c->n_out; k++)
        if (c->out[k].data && sc_desc_numel(&c->out[k].desc) != R) return cu_errorf(c, "output %d must have %lld elements", k, (long long)R);
    ln_param_geom gg, bg = {};
    SC_TRY(ln_param_geom_make(c, 1, axis, K, &gg));
    const void *b = c->n_in > 2 ? c->in[2].data : NULL;
    if (b) SC_TRY(ln_param_geom_make(c, 2, axis, K, &bg));
    if (R == 0 || K == 0) return SC_OK;
    unsigned blocks = (unsigned)(R < 2147483647 ? R : 2147483647);
    int th = cu_row_threads(K > 1024 ? 1024 : K);
    switch (x->dtype) {
    case SC_F32:
        k_layer_norm<float><<<blocks, th, 0, c->ctx->stream>>>((const float *)c->in[0].data, (const float *)c->in[1].data, gg,
            (const float *)b, bg, (float *)c->out[0].data, (float *)out_at(c, 1), (float *)out_at(c, 2), R, K, la->epsilon);
        break;
    case SC_F64:
        k_layer_norm<double><<<blocks, th, 0, c->ctx->stream>>>((const double *)c->in[0].data, (const double *)c->in[1].data, gg,
            (const double *)b, bg, (double *)c->out[0].data, (double *)out_at(c, 1), (double *)out_at(c, 2), R, K, la->epsilon);
        break;
    default: return cu_errorf(c, "dtype %s not supported", sc_dtype_name(x->dtype));
    }
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

sc_status cu_layer_norm_grad(const cu_call *c) {
    const sc_layer_norm_attrs *la = &c->node->attrs->layer_norm;
    const sc_desc *dy = &c->in[0].desc, *x = &c->in[1].desc, *s = &c->in[2].desc;
    sc_dtype t = x->dtype;
    int axis = (int)(la->axis < 0 ? la->axis + x->rank : la->axis);
    if (axis < 0 || axis >= x->rank) return cu_errorf(c, "axis %lld out of range for rank %d", (long long)la->axis, x->rank);
    int64_t R = cu_prod(x->dims, 0, axis), K = cu_prod(x->dims, axis, x->rank);
    if (dy->dtype != t || s->dtype != t || !sc_desc_same_shape(dy, x) || sc_desc_numel(s) != K)
        return cu_errorf(c, "dY must match X and scale must hold the %lld normalised values", (long long)K);
    if (K == 0 || R == 0) return SC_OK;
    void *stats;
    SC_TRY(cu_scratch(c, 2 * R * (int64_t)sc_dtype_size(t), &stats));
    unsigned blocks = (unsigned)(R < 2147483647 ? R : 2147483647);
    int th = cu_row_threads(K > 1024 ? 1024 : K);
    cudaStream_t st = c->ctx->stream;
#define LNG(T)                                                                                             \
    k_layer_norm_grad_rows<T><<<blocks, th, 0, st>>>((const T *)c->in[0].data, (const T *)c->in[1].data,  \
        (const T *)c->in[2].data, (T *)out_at(c, 0), (T *)stats, R, K, (T)la->epsilon);                    \
    CU_LAUNCH_CHECK(c);                                                                                    \
    if (out_at(c, 1) || out_at(c, 2)) {                                                                    \
        k_layer_norm_grad_cols<T><<<cu_grid(K), CU_BLOCK, 0, st>>>((const T *)c->in[0].data,               \
            (const T *)c->in[1].data, (const T *)stats, (T *)out_at(c, 1), (T *)out_at(c, 2), R, K);       \
        CU_LAUNCH_CHECK(c);                                                                                \
    }
    switch (t) {
    case SC_F32: { LNG(float) break; }
    case SC_F64: { LNG(double) break; }
    default: return cu_errorf(c, "dtype %s not supported", sc_dtype_name(t));
    }
#undef LNG
    return SC_OK;
}

} /* extern "C" */
