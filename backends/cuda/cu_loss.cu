/* Loss, Dropout and optimizer kernels of the CUDA backend; the math is the CPU's, see cpu_loss.c,
 * cpu_dropout_train.c / cpu_rng.h and cpu_optim.c for the derivations.
 *   SoftmaxCrossEntropyLoss: per (n, d) row over C classes at stride D, log_prob = x - logsumexp;
 *     l = -w[y] log_prob[y] (0 where ignored); mean = sum l / sum w[y].
 *   Grad: (exp(log_prob) - onehot) * w[y] * g, g = dLoss (sum), dLoss / sum w[y] (mean), dLoss[r].
 *   Dropout (training, ratio > 0): keep = (mix64(key + i * GOLDEN) >> 32) >= ceil(ratio 2^32), the
 *     key computed on the host exactly as the CPU does from (seed, step, node name, seed attribute),
 *     so the mask is bit-identical to the CPU's for the same seed / step / node / element.
 *   SGD / AdamW: PyTorch's rules with the host-side scalars (bias corrections, lr * wd) computed in
 *     double from the shortest decimal of the f32 attributes, as cpu_optim.c does.
 * The loss sums run in double on one block (deterministic); labels out of range are clamped out
 * (treated as ignored) rather than reported: reporting would need a read-back of the labels.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/common/common.h"
#include "backends/cuda/cu_block.cuh"
#include "backends/cuda/cu_kernels.h"

extern "C" {
#include "backends/cpu/cpu_rng.h"
}

/* ---- SoftmaxCrossEntropyLoss ---- */

__device__ __forceinline__ int64_t label_at(const void *l, bool i64, int64_t r) {
    return i64 ? ((const int64_t *)l)[r] : (int64_t)((const int32_t *)l)[r];
}

/* One thread per row: writes log_prob and per-row loss / weight into row_l, row_w (double). */
template <typename T>
__global__ void k_sce_rows(const T *x, const void *labels, bool i64, const T *w, T *lp, double *row_l, double *row_w,
                           int64_t N, int64_t C, int64_t D, bool has_ignore, int64_t ignore) {
    GRID_STRIDE(r, N * D) {
        int64_t n = r / D, d = r % D, y = label_at(labels, i64, r);
        bool ign = (has_ignore && y == ignore) || y < 0 || y >= C;
        const T *xr = x + n * C * D + d;
        T mx = xr[0];
        for (int64_t c = 1; c < C; c++) mx = xr[c * D] > mx ? xr[c * D] : mx;
        T se = 0;
        for (int64_t c = 0; c < C; c++) se += exp(xr[c * D] - mx);
        T lse = mx + log(se);
        if (lp)
            for (int64_t c = 0; c < C; c++) lp[n * C * D + d + c * D] = xr[c * D] - lse;
        double wy = ign ? 0.0 : (w ? (double)w[y] : 1.0);
        row_l[r] = ign ? 0.0 : -(double)(xr[y * D] - lse) * wy;
        row_w[r] = wy;
    }
}

/* One block sums rows in a fixed order per thread, then a block reduction: deterministic. */
template <typename T> __global__ void k_sce_total(const double *row_l, const double *row_w, int64_t R, int reduction, T *out) {
    double a = 0, b = 0;
    for (int64_t r = threadIdx.x; r < R; r += blockDim.x) a += row_l[r], b += row_w[r];
    a = block_sum<double>(a);
    b = block_sum<double>(b);
    if (threadIdx.x == 0) out[0] = (T)(reduction == SC_REDUCTION_SUM ? a : a / b);
}

template <typename T> __global__ void k_rows_to(const double *row_l, T *out, int64_t R) {
    GRID_STRIDE(r, R) out[r] = (T)row_l[r];
}

/* Weighted count of non-ignored rows (the mean's denominator) into *wsum. */
__global__ void k_weight_sum(const double *row_w, int64_t R, double *wsum) {
    double b = 0;
    for (int64_t r = threadIdx.x; r < R; r += blockDim.x) b += row_w[r];
    b = block_sum<double>(b);
    if (threadIdx.x == 0) *wsum = b;
}

template <typename T>
__global__ void k_sce_row_weights(const void *labels, bool i64, const T *w, double *row_w, int64_t R, int64_t C, bool has_ignore, int64_t ignore) {
    GRID_STRIDE(r, R) {
        int64_t y = label_at(labels, i64, r);
        bool ign = (has_ignore && y == ignore) || y < 0 || y >= C;
        row_w[r] = ign ? 0.0 : (w ? (double)w[y] : 1.0);
    }
}

template <typename T>
__global__ void k_sce_grad(const T *dl, bool per_elem, int reduction, const double *wsum, const T *lp, const void *labels, bool i64,
                           const T *w, T *dx, int64_t N, int64_t C, int64_t D, bool has_ignore, int64_t ignore) {
    GRID_STRIDE(e, N * C * D) {
        int64_t d = e % D, c = (e / D) % C, n = e / (C * D), r = n * D + d, y = label_at(labels, i64, r);
        bool ign = (has_ignore && y == ignore) || y < 0 || y >= C;
        if (ign) {
            dx[e] = 0;
            continue;
        }
        double scale = reduction == SC_REDUCTION_MEAN ? 1.0 / *wsum : 1.0;
        T g = (T)((per_elem ? (double)dl[r] : (double)dl[0]) * scale * (w ? (double)w[y] : 1.0));
        T v = exp(lp[e]) * g;
        dx[e] = c == y ? v - g : v;
    }
}

/* ---- Dropout ---- */

__device__ __forceinline__ uint64_t mix64_d(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
#define GOLDEN 0x9e3779b97f4a7c15ull

template <typename T> __global__ void k_dropout(const T *x, T *y, uint8_t *mask, int64_t n, uint64_t key, uint64_t thr, T scale) {
    GRID_STRIDE(i, n) {
        uint64_t u = mix64_d(key + (uint64_t)i * GOLDEN) >> 32;
        bool keep = u >= thr;
        y[i] = keep ? x[i] * scale : (T)0;
        if (mask) mask[i] = keep;
    }
}

/* The host half of the CPU's key (cpu_dropout_train.c), copied so the two stay bit-identical. */
static uint64_t mix64_h(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static uint64_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}
static uint64_t dropout_key(const sc_node *node) {
    uint64_t seed, step;
    cpu_get_dropout_rng(&seed, &step);
    uint64_t k = mix64_h(seed + GOLDEN);
    k = mix64_h(k ^ (step + 2 * GOLDEN));
    k = mix64_h(k ^ name_hash(node->name));
    if (node->attrs->dropout.has_seed) k = mix64_h(k ^ (uint64_t)node->attrs->dropout.seed);
    return k;
}

/* ---- optimizers ---- */

template <typename T> __global__ void k_sgd(int64_t n, T *w, const T *g, T *m, T lr, T gs, T wd, T mom, bool nesterov) {
    GRID_STRIDE(i, n) {
        T gi = g[i] * gs + wd * w[i];
        if (!m) {
            w[i] = w[i] - lr * gi;
            continue;
        }
        T mi = mom * m[i] + gi;
        T d = nesterov ? gi + mom * mi : mi;
        m[i] = mi;
        w[i] = w[i] - lr * d;
    }
}

template <typename T>
__global__ void k_adamw(int64_t n, T *w, const T *g, T *m, T *v, T decay, T gs, T b1, T one_b1, T b2, T one_b2, T step_size, T bc2_sqrt, T eps) {
    GRID_STRIDE(i, n) {
        T gi = g[i] * gs;
        T wi = w[i] * decay;
        T mi = m[i] * b1 + gi * one_b1;
        T vi = v[i] * b2 + gi * gi * one_b2;
        T denom = sqrt(vi) / bc2_sqrt + eps;
        m[i] = mi;
        v[i] = vi;
        w[i] = wi + -step_size * (mi / denom);
    }
}

static sc_status f32_scalar(const cu_call *c, int i, const char *what, bool decimal, double *v) {
    if (c->in[i].desc.dtype != SC_F32 || sc_desc_numel(&c->in[i].desc) != 1) return cu_errorf(c, "%s must be an f32 scalar", what);
    SC_TRY(cu_read_f64(c, i, v));
    if (decimal) *v = sc_decimal_of((float)*v);
    return SC_OK;
}

static sc_status optim_check(const cu_call *c, const int *idx, int n, int64_t *numel) {
    sc_dtype t = c->in[0].desc.dtype;
    if (t != SC_F32 && t != SC_F64) return cu_errorf(c, "dtype %s not supported (f32, f64)", sc_dtype_name(t));
    *numel = sc_desc_numel(&c->in[0].desc);
    for (int k = 0; k < n; k++) {
        const sc_tensor *x = &c->in[idx[k]];
        if (!x->data) continue;
        if (x->desc.dtype != t || sc_desc_numel(&x->desc) != *numel) return cu_errorf(c, "input %d must match W", idx[k]);
    }
    return SC_OK;
}

static sc_status sce_common(const cu_call *c, const sc_tensor *scores, const sc_tensor *labels, int64_t *N, int64_t *C, int64_t *D) {
    const sc_desc *x = &scores->desc;
    if (x->rank < 2) return cu_errorf(c, "scores must have rank >= 2");
    if (x->dtype != SC_F32 && x->dtype != SC_F64) return cu_errorf(c, "dtype %s not supported (f32, f64)", sc_dtype_name(x->dtype));
    if (labels->desc.dtype != SC_I32 && labels->desc.dtype != SC_I64) return cu_errorf(c, "labels must be i32 or i64");
    *N = x->dims[0], *C = x->dims[1], *D = cu_prod(x->dims, 2, x->rank);
    if (sc_desc_numel(&labels->desc) != *N * *D) return cu_errorf(c, "labels have %lld elements, expected %lld", (long long)sc_desc_numel(&labels->desc), (long long)(*N * *D));
    return SC_OK;
}

extern "C" {

/* (scores, labels[, weights]) -> (loss[, log_prob]) */
sc_status cu_sce_loss(const cu_call *c) {
    const sc_sce_attrs *a = &c->node->attrs->sce;
    int64_t N = 0, C = 0, D = 0;
    SC_TRY(sce_common(c, &c->in[0], &c->in[1], &N, &C, &D));
    const void *w = c->n_in > 2 ? c->in[2].data : NULL;
    if (w && c->in[2].desc.dtype != c->in[0].desc.dtype) return cu_errorf(c, "weights dtype differs from scores");
    void *lp = c->n_out > 1 ? c->out[1].data : NULL;
    int64_t R = N * D;
    void *buf;
    SC_TRY(cu_scratch(c, 2 * (R > 0 ? R : 1) * (int64_t)sizeof(double), &buf));
    double *row_l = (double *)buf, *row_w = row_l + R;
    bool i64 = c->in[1].desc.dtype == SC_I64;
    cudaStream_t s = c->ctx->stream;
#define SCE(T)                                                                                             \
    k_sce_rows<T><<<cu_grid(R), CU_BLOCK, 0, s>>>((const T *)c->in[0].data, c->in[1].data, i64, (const T *)w, (T *)lp, \
                                                 row_l, row_w, N, C, D, a->has_ignore_index, a->ignore_index); \
    CU_LAUNCH_CHECK(c);                                                                                    \
    if (a->reduction == SC_REDUCTION_NONE) k_rows_to<T><<<cu_grid(R), CU_BLOCK, 0, s>>>(row_l, (T *)c->out[0].data, R); \
    else k_sce_total<T><<<1, 1024, 0, s>>>(row_l, row_w, R, (int)a->reduction, (T *)c->out[0].data);      \
    CU_LAUNCH_CHECK(c);
    if (c->in[0].desc.dtype == SC_F32) { SCE(float) } else { SCE(double) }
#undef SCE
    return SC_OK;
}

/* (dLoss, log_prob, labels[, weights]) -> dScores */
sc_status cu_sce_loss_grad(const cu_call *c) {
    const sc_sce_attrs *a = &c->node->attrs->sce;
    int64_t N = 0, C = 0, D = 0;
    SC_TRY(sce_common(c, &c->in[1], &c->in[2], &N, &C, &D));
    sc_dtype t = c->in[1].desc.dtype;
    if (c->in[0].desc.dtype != t) return cu_errorf(c, "dLoss dtype differs from log_prob");
    const void *w = c->n_in > 3 ? c->in[3].data : NULL;
    bool per_elem = a->reduction == SC_REDUCTION_NONE;
    int64_t R = N * D;
    if (sc_desc_numel(&c->in[0].desc) != (per_elem ? R : 1)) return cu_errorf(c, "dLoss has the wrong number of elements");
    void *buf;
    SC_TRY(cu_scratch(c, (R + 1) * (int64_t)sizeof(double), &buf));
    double *row_w = (double *)buf, *wsum = row_w + R;
    bool i64 = c->in[2].desc.dtype == SC_I64;
    cudaStream_t s = c->ctx->stream;
    int64_t n = N * C * D;
#define SCEG(T)                                                                                            \
    if (a->reduction == SC_REDUCTION_MEAN) {                                                               \
        k_sce_row_weights<T><<<cu_grid(R), CU_BLOCK, 0, s>>>(c->in[2].data, i64, (const T *)w, row_w, R, C, a->has_ignore_index, a->ignore_index); \
        CU_LAUNCH_CHECK(c);                                                                                \
        k_weight_sum<<<1, 1024, 0, s>>>(row_w, R, wsum);                                                   \
        CU_LAUNCH_CHECK(c);                                                                                \
    }                                                                                                      \
    k_sce_grad<T><<<cu_grid(n), CU_BLOCK, 0, s>>>((const T *)c->in[0].data, per_elem, (int)a->reduction, wsum, \
        (const T *)c->in[1].data, c->in[2].data, i64, (const T *)w, (T *)c->out[0].data, N, C, D, a->has_ignore_index, a->ignore_index); \
    CU_LAUNCH_CHECK(c);
    if (t == SC_F32) { SCEG(float) } else { SCEG(double) }
#undef SCEG
    return SC_OK;
}

/* Dropout (X[, ratio[, training_mode]]) -> (Y[, mask]) */
sc_status cu_dropout(const cu_call *c) {
    double ratio = 0.5, tm = 0;
    if (c->n_in > 1 && c->in[1].data) SC_TRY(cu_read_f64(c, 1, &ratio));
    if (c->n_in > 2 && c->in[2].data) SC_TRY(cu_read_f64(c, 2, &tm));
    uint8_t *mask = c->n_out > 1 ? (uint8_t *)c->out[1].data : NULL;
    int64_t n = sc_desc_numel(&c->in[0].desc);
    if (!(tm != 0 && ratio > 0)) {
        SC_TRY(cu_copy_input(c));
        if (mask && n > 0) CU_CHECK(c, cudaMemsetAsync(mask, 1, (size_t)n, c->ctx->stream));
        return SC_OK;
    }
    if (!(ratio >= 0 && ratio <= 1)) return cu_errorf(c, "ratio %g must lie in [0, 1]", ratio);
    if (mask && c->out[1].desc.dtype != SC_BOOL) return cu_errorf(c, "mask output must be bool");
    double th = ratio * 4294967296.0;
    uint64_t thr = th >= 4294967296.0 ? (1ull << 32) : (uint64_t)ceil(th);
    double scale = ratio < 1 ? 1.0 / (1.0 - ratio) : 0.0;
    uint64_t key = dropout_key(c->node);
    if (n == 0) return SC_OK;
    cudaStream_t s = c->ctx->stream;
    switch (c->in[0].desc.dtype) {
    case SC_F32: k_dropout<float><<<cu_grid(n), CU_BLOCK, 0, s>>>((const float *)c->in[0].data, (float *)c->out[0].data, mask, n, key, thr, (float)scale); break;
    case SC_F64: k_dropout<double><<<cu_grid(n), CU_BLOCK, 0, s>>>((const double *)c->in[0].data, (double *)c->out[0].data, mask, n, key, thr, scale); break;
    default: return cu_errorf(c, "training-mode Dropout supports f32 and f64, not %s", sc_dtype_name(c->in[0].desc.dtype));
    }
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

/* (W, G, M, lr[, grad_scale]) -> (W', M') in place */
sc_status cu_sgd_update(const cu_call *c) {
    const sc_sgd_attrs *a = &c->node->attrs->sgd;
    int64_t n = 0;
    const int idx[2] = {1, 2};
    SC_TRY(optim_check(c, idx, 2, &n));
    double lr = 0, gs = 1.0;
    SC_TRY(f32_scalar(c, 3, "lr", true, &lr));
    if (c->n_in > 4 && c->in[4].data) SC_TRY(f32_scalar(c, 4, "grad_scale", false, &gs));
    void *m = c->in[2].data;
    if (a->momentum != 0 && !m) return cu_errorf(c, "momentum %g needs the momentum buffer input", a->momentum);
    if (a->momentum == 0) m = NULL;
    if (n == 0) return SC_OK;
    cudaStream_t s = c->ctx->stream;
    if (c->in[0].desc.dtype == SC_F32)
        k_sgd<float><<<cu_grid(n), CU_BLOCK, 0, s>>>(n, (float *)c->in[0].data, (const float *)c->in[1].data, (float *)m, (float)lr,
                                                    (float)gs, a->weight_decay, a->momentum, a->nesterov);
    else
        k_sgd<double><<<cu_grid(n), CU_BLOCK, 0, s>>>(n, (double *)c->in[0].data, (const double *)c->in[1].data, (double *)m, lr, gs,
                                                     sc_decimal_of(a->weight_decay), sc_decimal_of(a->momentum), a->nesterov);
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

/* (W, G, M, V, lr, step[, grad_scale]) -> (W', M', V') in place */
sc_status cu_adamw_update(const cu_call *c) {
    const sc_adamw_attrs *a = &c->node->attrs->adamw;
    int64_t n = 0;
    const int idx[3] = {1, 2, 3};
    SC_TRY(optim_check(c, idx, 3, &n));
    if (!c->in[2].data || !c->in[3].data) return cu_errorf(c, "the moment buffers M and V are required");
    double lr = 0, gs = 1.0, td = 0;
    SC_TRY(f32_scalar(c, 4, "lr", true, &lr));
    if (c->in[5].desc.dtype != SC_I64 || sc_desc_numel(&c->in[5].desc) != 1) return cu_errorf(c, "step must be an i64 scalar");
    SC_TRY(cu_read_f64(c, 5, &td));
    if (td < 1) return cu_errorf(c, "step %g must be >= 1 (1-based)", td);
    if (c->n_in > 6 && c->in[6].data) SC_TRY(f32_scalar(c, 6, "grad_scale", false, &gs));
    double b1 = sc_decimal_of(a->beta1), b2 = sc_decimal_of(a->beta2), wd = sc_decimal_of(a->weight_decay);
    double decay = 1.0 - lr * wd, bc1 = 1.0 - pow(b1, td), bc2 = 1.0 - pow(b2, td);
    double step_size = lr / bc1, bc2_sqrt = sqrt(bc2);
    if (n == 0) return SC_OK;
    cudaStream_t s = c->ctx->stream;
    if (c->in[0].desc.dtype == SC_F32)
        k_adamw<float><<<cu_grid(n), CU_BLOCK, 0, s>>>(n, (float *)c->in[0].data, (const float *)c->in[1].data, (float *)c->in[2].data,
            (float *)c->in[3].data, (float)decay, (float)gs, (float)b1, (float)(1 - b1), (float)b2, (float)(1 - b2), (float)step_size,
            (float)bc2_sqrt, a->eps);
    else
        k_adamw<double><<<cu_grid(n), CU_BLOCK, 0, s>>>(n, (double *)c->in[0].data, (const double *)c->in[1].data, (double *)c->in[2].data,
            (double *)c->in[3].data, decay, gs, b1, 1 - b1, b2, 1 - b2, step_size, bc2_sqrt, sc_decimal_of(a->eps));
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

} /* extern "C" */
