/* MaxPoolGrad and AveragePoolGrad (graph/ops_train.def), f32 and f64, 1 to 3 spatial dims: the
 * adjoints of the forward kernels in cpu_nn_pool.c, over the same windows (cpu_nn_pool_geom.h: explicit
 * pads, strides, dilations; ceil_mode shows only in dY's size, and windows are clamped to the input).
 *   MaxPoolGrad (dY, X):      each dY element goes to the FIRST maximum of its window in scan order
 *                             (PyTorch's choice, and the element the forward's Indices names);
 *                             overlapping windows add up.
 *   AveragePoolGrad (dY, X):  dX[p] = sum over windows w containing p of dY[w] / count(w), with
 *                             count the taps inside the input, or with count_include_pad the taps
 *                             inside the explicitly padded extent (never beyond it under ceil_mode),
 *                             exactly the divisor the forward used. X gives only the shape.
 * Parallel over the N * C planes, which never share dX elements.
 */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_nn_pool_geom.h"


/* ct: the last dim's taps, computed once per call (pool_last_dim_taps in cpu_nn_pool.c). */
#define MAX_POOL_GRAD_IMPL(T, NAME, ARGMAX)                                                              \
    static void NAME(const cpu_window *w, int64_t NC, const T *dy, const T *x, T *dx, const pool_taps *ct) { \
        int64_t in_sp = w->in[0] * w->in[1] * w->in[2], out_sp = w->out[0] * w->out[1] * w->out[2];      \
        _Pragma("omp parallel for") for (int64_t nc = 0; nc < NC; nc++) {                                \
            const T *xp = x + nc * in_sp, *gp = dy + nc * out_sp;                                        \
            T *dp = dx + nc * in_sp;                                                                     \
            memset(dp, 0, sizeof(T) * (size_t)in_sp);                                                    \
            int64_t yi = 0;                                                                              \
            for (int64_t o0 = 0; o0 < w->out[0]; o0++) {                                                 \
                pool_taps a = pool_taps_of(w, 0, o0);                                                    \
                for (int64_t o1 = 0; o1 < w->out[1]; o1++) {                                             \
                    pool_taps b = pool_taps_of(w, 1, o1);                                                \
                    for (int64_t o2 = 0; o2 < w->out[2]; o2++, yi++) {                                   \
                        T best;                                                                          \
                        int64_t at = ARGMAX(w, &a, &b, &ct[o2], xp, &best);                              \
                        if (at >= 0) dp[at] += gp[yi];                                                   \
                    }                                                                                    \
                }                                                                                        \
            }                                                                                            \
        }                                                                                                \
    }
MAX_POOL_GRAD_IMPL(float, max_pool_grad_f32, pool_first_max_f32)
MAX_POOL_GRAD_IMPL(double, max_pool_grad_f64, pool_first_max_f64)

/* 2-D windows in f32, every CNN's stem pool: the first maximum as pool_first_max_f32 finds it (the
 * first tap's value to start, then strictly greater in scan order, so a NaN first tap sticks), with
 * both tap loops inline. The generic loops above walk a third, size-1 dim and call the search per
 * window: ResNet-18's 3x3 stride-2 pool at batch 8, 64x64, took 2.6 ms a training step there.
 * cols: pool_taps_of(w, 1, o) for every o < out[1]. */
static void max_pool_grad_2d_f32(const cpu_window *w, int64_t NC, const float *dy, const float *x, float *dx,
                                 const pool_taps *cols) {
    int64_t W = w->in[1], d0 = w->dil[0], d1 = w->dil[1], in_sp = w->in[0] * W, out_sp = w->out[0] * w->out[1];
#pragma omp parallel for
    for (int64_t nc = 0; nc < NC; nc++) {
        const float *xp = x + nc * in_sp, *gp = dy + nc * out_sp;
        float *dp = dx + nc * in_sp;
        memset(dp, 0, sizeof(float) * (size_t)in_sp);
        for (int64_t o0 = 0; o0 < w->out[0]; o0++) {
            pool_taps a = pool_taps_of(w, 0, o0);
            if (a.lo >= a.hi) continue;
            for (int64_t o1 = 0; o1 < w->out[1]; o1++) {
                const pool_taps *b = &cols[o1];
                if (b->lo >= b->hi) continue;
                int64_t at = (a.start + a.lo * d0) * W + b->start + b->lo * d1;
                float m = xp[at];
                for (int64_t t0 = a.lo; t0 < a.hi; t0++) {
                    int64_t rowp = (a.start + t0 * d0) * W + b->start;
                    for (int64_t t1 = b->lo; t1 < b->hi; t1++) {
                        int64_t p = rowp + t1 * d1;
                        float v = xp[p];
                        bool gt = v > m;
                        m = gt ? v : m;
                        at = gt ? p : at;
                    }
                }
                dp[at] += gp[o0 * w->out[1] + o1];
            }
        }
    }
}

#define AVG_POOL_GRAD_IMPL(T, NAME)                                                                      \
    static void NAME(const cpu_window *w, int64_t NC, const T *dy, T *dx, bool include_pad) {            \
        int64_t in_sp = w->in[0] * w->in[1] * w->in[2], out_sp = w->out[0] * w->out[1] * w->out[2];      \
        _Pragma("omp parallel for") for (int64_t nc = 0; nc < NC; nc++) {                                \
            const T *gp = dy + nc * out_sp;                                                              \
            T *dp = dx + nc * in_sp;                                                                     \
            memset(dp, 0, sizeof(T) * (size_t)in_sp);                                                    \
            pool_walk it;                                                                                \
            pool_walk_start(&it, w);                                                                     \
            for (int64_t yi = 0; yi < out_sp; yi++, pool_walk_next(&it, w)) {                            \
                const pool_taps *a = &it.t[0], *b = &it.t[1], *c = &it.t[2];                             \
                int64_t n = pool_divisor(a, b, c, include_pad);                                          \
                if (n <= 0) continue;                                                                    \
                T g = gp[yi] / (T)n;                                                                     \
                POOL_FOR_TAPS(w, a, b, c, p) dp[p] += g;                                                 \
            }                                                                                            \
        }                                                                                                \
    }
AVG_POOL_GRAD_IMPL(float, avg_pool_grad_f32)
AVG_POOL_GRAD_IMPL(double, avg_pool_grad_f64)

/* 2-D windows in f32 (DenseNet's transitions, Inception's branch pools): the generic loops' windows,
 * divisors and order of additions, so the same bits, without their size-1 third dim (DenseNet-121's
 * three transition pools at batch 8, 64x64: 2.6 ms a training step there). cols as for MaxPoolGrad. */
static void avg_pool_grad_2d_f32(const cpu_window *w, int64_t NC, const float *dy, float *dx, bool include_pad,
                                 const pool_taps *cols) {
    int64_t W = w->in[1], d0 = w->dil[0], d1 = w->dil[1], in_sp = w->in[0] * W, out_sp = w->out[0] * w->out[1];
    pool_taps one = pool_taps_of(w, 2, 0); /* the padding dim: one tap, n_padded 1 */
#pragma omp parallel for
    for (int64_t nc = 0; nc < NC; nc++) {
        const float *gp = dy + nc * out_sp;
        float *dp = dx + nc * in_sp;
        memset(dp, 0, sizeof(float) * (size_t)in_sp);
        for (int64_t o0 = 0; o0 < w->out[0]; o0++) {
            pool_taps a = pool_taps_of(w, 0, o0);
            for (int64_t o1 = 0; o1 < w->out[1]; o1++) {
                const pool_taps *b = &cols[o1];
                int64_t n = pool_divisor(&a, b, &one, include_pad);
                if (n <= 0) continue;
                float g = gp[o0 * w->out[1] + o1] / (float)n;
                for (int64_t t0 = a.lo; t0 < a.hi; t0++) {
                    float *row = dp + (a.start + t0 * d0) * W + b->start;
                    for (int64_t t1 = b->lo; t1 < b->hi; t1++) row[t1 * d1] += g;
                }
            }
        }
    }
}

/* pool_taps_of(w, 1, o) for every o < out[1] (malloc'd; NULL when out of memory). */
static pool_taps *pool_dim1_taps(const cpu_window *w) {
    pool_taps *cols = malloc(sizeof *cols * (size_t)(w->out[1] > 0 ? w->out[1] : 1));
    for (int64_t o = 0; cols && o < w->out[1]; o++) cols[o] = pool_taps_of(w, 1, o);
    return cols;
}

static sc_status pool_grad_window(const sc_kernel_call *call, cpu_window *w) {
    const sc_desc *dy = &call->in[0].desc, *x = &call->in[1].desc;
    if (x->dtype != SC_F32 && x->dtype != SC_F64) return cpu_errorf(call, "dtype %s not supported", sc_dtype_name(x->dtype));
    if (dy->dtype != x->dtype)
        return cpu_errorf(call, "dY dtype %s differs from X dtype %s", sc_dtype_name(dy->dtype), sc_dtype_name(x->dtype));
    return pool_geom_resolve(call, x, "X", dy, "dY", w);
}

sc_status cpu_max_pool_grad(const sc_kernel_call *call) {
    cpu_window w;
    SC_TRY(pool_grad_window(call, &w));
    const sc_desc *x = &call->in[1].desc;
    int64_t NC = x->dims[0] * x->dims[1];
    if (x->dtype == SC_F32 && w.n_spatial == 2) {
        pool_taps *cols = pool_dim1_taps(&w);
        if (!cols) return cpu_errorf(call, "out of memory for %lld pool windows", (long long)w.out[1]);
        max_pool_grad_2d_f32(&w, NC, call->in[0].data, call->in[1].data, call->out[0].data, cols);
        free(cols);
        return SC_OK;
    }
    pool_taps *ct = pool_last_dim_taps(&w);
    if (!ct) return cpu_errorf(call, "out of memory for %lld pool windows", (long long)w.out[2]);
    if (x->dtype == SC_F32) max_pool_grad_f32(&w, NC, call->in[0].data, call->in[1].data, call->out[0].data, ct);
    else max_pool_grad_f64(&w, NC, call->in[0].data, call->in[1].data, call->out[0].data, ct);
    free(ct);
    return SC_OK;
}

sc_status cpu_average_pool_grad(const sc_kernel_call *call) {
    cpu_window w;
    SC_TRY(pool_grad_window(call, &w));
    const sc_desc *x = &call->in[1].desc;
    int64_t NC = x->dims[0] * x->dims[1];
    bool inc = call->node->attrs->window.count_include_pad;
    if (x->dtype == SC_F32 && w.n_spatial == 2) {
        pool_taps *cols = pool_dim1_taps(&w);
        if (!cols) return cpu_errorf(call, "out of memory for %lld pool windows", (long long)w.out[1]);
        avg_pool_grad_2d_f32(&w, NC, call->in[0].data, call->out[0].data, inc, cols);
        free(cols);
        return SC_OK;
    }
    if (x->dtype == SC_F32) avg_pool_grad_f32(&w, NC, call->in[0].data, call->out[0].data, inc);
    else avg_pool_grad_f64(&w, NC, call->in[0].data, call->out[0].data, inc);
    return SC_OK;
}
