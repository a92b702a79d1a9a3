/* MaxPoolGrad and AveragePoolGrad (graph/ops_train.def), f32 and f64, 1 to 3 spatial dims: the
 * adjoints of the forward kernels in cpu_pool.c, over the same windows (explicit pads, strides,
 * dilations; ceil_mode shows only in dY's size, and windows are clamped to the input).
 *   MaxPoolGrad (dY, X):      each dY element goes to the FIRST maximum of its window in scan order
 *                             (PyTorch's choice, and the element the forward's Indices names);
 *                             overlapping windows add up.
 *   AveragePoolGrad (dY, X):  dX[p] = sum over windows w containing p of dY[w] / count(w), with
 *                             count the taps inside the input, or with count_include_pad the taps
 *                             inside the explicitly padded extent (never beyond it under ceil_mode),
 *                             exactly the divisor the forward used. X gives only the shape.
 * Parallel over the N * C planes, which never share dX elements.
 */
#include <math.h>
#include <string.h>

#include "backends/cpu/cpu_kernels.h"

/* Taps [lo, hi) of window o on spatial dim i inside the input, first input position `start`, and
 * the taps inside the padded extent (the count_include_pad divisor). Same rules as cpu_pool.c. */
typedef struct {
    int64_t start, lo, hi, n_padded;
} pool_taps;

static int64_t ceil_div(int64_t a, int64_t b) { return a <= 0 ? 0 : (a + b - 1) / b; }

static pool_taps pool_taps_of(const cpu_window *w, int i, int64_t o) {
    pool_taps t;
    int64_t d = w->dil[i], k = w->k[i], in = w->in[i];
    t.start = o * w->stride[i] - w->pad_begin[i];
    t.lo = ceil_div(-t.start, d);
    t.hi = ceil_div(in - t.start, d);
    if (t.hi > k) t.hi = k;
    if (t.lo > t.hi) t.lo = t.hi;
    int64_t plo = ceil_div(-w->pad_begin[i] - t.start, d), phi = ceil_div(in + w->pad_end[i] - t.start, d);
    if (phi > k) phi = k;
    t.n_padded = phi > plo ? phi - plo : 0;
    return t;
}

#define MAX_POOL_GRAD_IMPL(T, NAME)                                                                      \
    static void NAME(const cpu_window *w, int64_t NC, const T *dy, const T *x, T *dx) {                  \
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
                        pool_taps c = pool_taps_of(w, 2, o2);                                            \
                        T best = -INFINITY;                                                              \
                        int64_t at = -1;                                                                 \
                        for (int64_t t0 = a.lo; t0 < a.hi; t0++) {                                       \
                            int64_t i0 = a.start + t0 * w->dil[0];                                       \
                            for (int64_t t1 = b.lo; t1 < b.hi; t1++) {                                   \
                                int64_t row = (i0 * w->in[1] + b.start + t1 * w->dil[1]) * w->in[2];     \
                                for (int64_t t2 = c.lo; t2 < c.hi; t2++) {                               \
                                    int64_t p = row + c.start + t2 * w->dil[2];                          \
                                    if (xp[p] > best || at < 0) {                                        \
                                        best = xp[p];                                                    \
                                        at = p;                                                          \
                                    }                                                                    \
                                }                                                                        \
                            }                                                                            \
                        }                                                                                \
                        if (at >= 0) dp[at] += gp[yi];                                                   \
                    }                                                                                    \
                }                                                                                        \
            }                                                                                            \
        }                                                                                                \
    }
MAX_POOL_GRAD_IMPL(float, max_pool_grad_f32)
MAX_POOL_GRAD_IMPL(double, max_pool_grad_f64)

#define AVG_POOL_GRAD_IMPL(T, NAME)                                                                      \
    static void NAME(const cpu_window *w, int64_t NC, const T *dy, T *dx, bool include_pad) {            \
        int64_t in_sp = w->in[0] * w->in[1] * w->in[2], out_sp = w->out[0] * w->out[1] * w->out[2];      \
        _Pragma("omp parallel for") for (int64_t nc = 0; nc < NC; nc++) {                                \
            const T *gp = dy + nc * out_sp;                                                              \
            T *dp = dx + nc * in_sp;                                                                     \
            memset(dp, 0, sizeof(T) * (size_t)in_sp);                                                    \
            int64_t yi = 0;                                                                              \
            for (int64_t o0 = 0; o0 < w->out[0]; o0++) {                                                 \
                pool_taps a = pool_taps_of(w, 0, o0);                                                    \
                for (int64_t o1 = 0; o1 < w->out[1]; o1++) {                                             \
                    pool_taps b = pool_taps_of(w, 1, o1);                                                \
                    for (int64_t o2 = 0; o2 < w->out[2]; o2++, yi++) {                                   \
                        pool_taps c = pool_taps_of(w, 2, o2);                                            \
                        int64_t n = include_pad ? a.n_padded * b.n_padded * c.n_padded                   \
                                                : (a.hi - a.lo) * (b.hi - b.lo) * (c.hi - c.lo);         \
                        if (n <= 0) continue;                                                            \
                        T g = gp[yi] / (T)n;                                                             \
                        for (int64_t t0 = a.lo; t0 < a.hi; t0++) {                                       \
                            int64_t i0 = a.start + t0 * w->dil[0];                                       \
                            for (int64_t t1 = b.lo; t1 < b.hi; t1++) {                                   \
                                T *row = dp + (i0 * w->in[1] + b.start + t1 * w->dil[1]) * w->in[2];     \
                                for (int64_t t2 = c.lo; t2 < c.hi; t2++) row[c.start + t2 * w->dil[2]] += g; \
                            }                                                                            \
                        }                                                                                \
                    }                                                                                    \
                }                                                                                        \
            }                                                                                            \
        }                                                                                                \
    }
AVG_POOL_GRAD_IMPL(float, avg_pool_grad_f32)
AVG_POOL_GRAD_IMPL(double, avg_pool_grad_f64)

static sc_status pool_grad_window(const sc_kernel_call *call, cpu_window *w) {
    const sc_window_attrs *wa = &call->node->attrs.window;
    const sc_desc *dy = &call->in[0].desc, *x = &call->in[1].desc;
    if (x->dtype != SC_F32 && x->dtype != SC_F64) return cpu_errorf(call, "dtype %s not supported", sc_dtype_name(x->dtype));
    if (dy->dtype != x->dtype || dy->rank != x->rank || x->rank < 3 || dy->dims[0] != x->dims[0] ||
        dy->dims[1] != x->dims[1]) {
        char a[96], b[96];
        return cpu_errorf(call, "dY %s and X %s do not match a pool", sc_desc_str(dy, a, sizeof a), sc_desc_str(x, b, sizeof b));
    }
    if (!wa->has_kernel_shape || wa->n_spatial != x->rank - 2)
        return cpu_errorf(call, "kernel_shape missing or not of rank %d", x->rank - 2);
    return cpu_window_resolve(call, wa, x, wa->kernel_shape, dy, w);
}

sc_status cpu_max_pool_grad(const sc_kernel_call *call) {
    cpu_window w;
    SC_TRY(pool_grad_window(call, &w));
    const sc_desc *x = &call->in[1].desc;
    int64_t NC = x->dims[0] * x->dims[1];
    if (x->dtype == SC_F32) max_pool_grad_f32(&w, NC, call->in[0].data, call->in[1].data, call->out[0].data);
    else max_pool_grad_f64(&w, NC, call->in[0].data, call->in[1].data, call->out[0].data);
    return SC_OK;
}

sc_status cpu_average_pool_grad(const sc_kernel_call *call) {
    cpu_window w;
    SC_TRY(pool_grad_window(call, &w));
    const sc_desc *x = &call->in[1].desc;
    int64_t NC = x->dims[0] * x->dims[1];
    bool inc = call->node->attrs.window.count_include_pad;
    if (x->dtype == SC_F32) avg_pool_grad_f32(&w, NC, call->in[0].data, call->out[0].data, inc);
    else avg_pool_grad_f64(&w, NC, call->in[0].data, call->out[0].data, inc);
    return SC_OK;
}
