/* SoftmaxCrossEntropyLoss and its gradient on the CUDA backend; the math is the CPU's (cpu_loss.c):
 *   per (n, d) row over C classes at stride D, log_prob = x - logsumexp;
 *     l = -w[y] log_prob[y] (0 where ignored); mean = sum l / sum w[y].
 *   Grad (dLoss, scores, labels[, weights]): (exp(x - lse) - onehot) * w[y] * g, g = dLoss (sum),
 *   dLoss / sum w[y] (mean), dLoss[r]; each row's lse is recomputed first (k_sce_lse, the forward's
 *   arithmetic), then one thread per element.
 * 16-bit scores run on widened copies (cu_widen.cu).
 * The loss sums run in double on one block (deterministic); labels out of range are clamped out
 * (treated as ignored) rather than reported: reporting would need a read-back of the labels.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/common/common.h"
#include "backends/cuda/cu_block.cuh"
#include "backends/cuda/cu_kernels.h"

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

/* One thread per row: lse = max + log(sum exp(x - max)), as k_sce_rows computes it. */
template <typename T> __global__ void k_sce_lse(const T *x, T *lse, int64_t N, int64_t C, int64_t D) {
    GRID_STRIDE(r, N * D) {
        const T *xr = x + (r / D) * C * D + r % D;
        T mx = xr[0];
        for (int64_t c = 1; c < C; c++) mx = xr[c * D] > mx ? xr[c * D] : mx;
        T se = 0;
        for (int64_t c = 0; c < C; c++) se += exp(xr[c * D] - mx);
        lse[r] = mx + log(se);
    }
}

template <typename T>
__global__ void k_sce_grad(const T *dl, bool per_elem, int reduction, const double *wsum, const T *x, const T *lse, const void *labels, bool i64,
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
        T v = exp(x[e] - lse[r]) * g;
        dx[e] = c == y ? v - g : v;
    }
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

/* (dLoss, scores, labels[, weights]) -> dScores */
sc_status cu_sce_loss_grad(const cu_call *c) {
    const sc_sce_attrs *a = &c->node->attrs->sce;
    int64_t N = 0, C = 0, D = 0;
    SC_TRY(sce_common(c, &c->in[1], &c->in[2], &N, &C, &D));
    sc_dtype t = c->in[1].desc.dtype;
    if (c->in[0].desc.dtype != t) return cu_errorf(c, "dLoss dtype differs from the scores'");
    const void *w = c->n_in > 3 ? c->in[3].data : NULL;
    bool per_elem = a->reduction == SC_REDUCTION_NONE;
    int64_t R = N * D;
    if (sc_desc_numel(&c->in[0].desc) != (per_elem ? R : 1)) return cu_errorf(c, "dLoss has the wrong number of elements");
    void *buf;
    SC_TRY(cu_scratch(c, (2 * R + 1) * (int64_t)sizeof(double), &buf));
    double *row_w = (double *)buf, *wsum = row_w + R;
    void *lse = wsum + 1; /* R values of the scores' type */
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
    k_sce_lse<T><<<cu_grid(R), CU_BLOCK, 0, s>>>((const T *)c->in[1].data, (T *)lse, N, C, D);              \
    CU_LAUNCH_CHECK(c);                                                                                    \
    k_sce_grad<T><<<cu_grid(n), CU_BLOCK, 0, s>>>((const T *)c->in[0].data, per_elem, (int)a->reduction, wsum, \
        (const T *)c->in[1].data, (const T *)lse, c->in[2].data, i64, (const T *)w, (T *)c->out[0].data, N, C, D, \
        a->has_ignore_index, a->ignore_index);                                                             \
    CU_LAUNCH_CHECK(c);
    if (t == SC_F32) { SCEG(float) } else { SCEG(double) }
#undef SCEG
    return SC_OK;
}

} /* extern "C" */
