/* MaxPool, AveragePool, GlobalAveragePool (ONNX opsets up to 22), f32 and f64, 1 to 3 spatial dims.
 *
 * The windows (pads, strides, dilations, ceil_mode, the count_include_pad divisor, first-maximum
 * rule) are those of cpu_nn_pool_geom.h, shared with the gradients in cpu_nn_pool_grad.c. MaxPool ignores
 * positions outside the input (as if padded with -inf). Its optional Indices output holds the flat
 * index of the maximum in the whole input tensor, ((n * C + c) * D1 + i1) * D2 + ... for
 * storage_order 0, and i1 + i2 * D1 + ... (column-major spatial part) for storage_order 1.
 * AveragePool of a window that reads nothing is NaN. Output dims come from shape inference.
 * Loops run in parallel over N * C planes; 2-D f32 windows take the separable passes of
 * cpu_nn_pool_2d.c (not MaxPool with Indices, whose argmax stays here), except f32 MaxPools whose
 * rows hold fewer than POOL_PLANES_MAX_OW outputs, which pool 16 planes at a time as vectors
 * (pool_max_planes_f32, cpu_nn_pool_cl.c). Channels-last f32 inputs
 * (nhwc_in, set for inference by graph/pass_fuse.c) run in cpu_nn_pool_cl.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_nn_pool_geom.h"


pool_taps *pool_last_dim_taps(const cpu_window *w) {
    pool_taps *ct = malloc(sizeof *ct * (size_t)(w->out[2] > 0 ? w->out[2] : 1));
    if (ct)
        for (int64_t o = 0; o < w->out[2]; o++) ct[o] = pool_taps_of(w, 2, o);
    return ct;
}

/* pool_argmax_f32/f64 (cpu_nn_pool_geom.h) with the same result, the first maximum in scan order (a
 * NaN counts only as the first tap), written without data-dependent branches: the first tap seeds
 * (m, at) and every tap then replaces them only when strictly greater, so the compare compiles to
 * blends instead of a branch that random activations mispredict half the time. */
#define POOL_FIRST_MAX_IMPL(T, NAME)                                                                      \
    int64_t NAME(const cpu_window *w, const pool_taps *a, const pool_taps *b, const pool_taps *c, const T *xp, \
                 T *best) {                                                                               \
        if (a->lo >= a->hi || b->lo >= b->hi || c->lo >= c->hi) {                                         \
            *best = -INFINITY;                                                                            \
            return -1;                                                                                    \
        }                                                                                                 \
        int64_t d0 = w->dil[0], d1 = w->dil[1], d2 = w->dil[2], in1 = w->in[1], in2 = w->in[2];           \
        int64_t c0 = c->start + c->lo * d2, nc = c->hi - c->lo;                                           \
        int64_t at = ((a->start + a->lo * d0) * in1 + b->start + b->lo * d1) * in2 + c0;                  \
        T m = xp[at];                                                                                     \
        for (int64_t t0 = a->lo; t0 < a->hi; t0++)                                                        \
            for (int64_t t1 = b->lo; t1 < b->hi; t1++) {                                                  \
                int64_t row = ((a->start + t0 * d0) * in1 + b->start + t1 * d1) * in2 + c0;               \
                for (int64_t j = 0; j < nc; j++) {                                                        \
                    int64_t p = row + j * d2;                                                             \
                    T v = xp[p];                                                                          \
                    bool gt = v > m;                                                                      \
                    m = gt ? v : m;                                                                       \
                    at = gt ? p : at;                                                                     \
                }                                                                                         \
            }                                                                                             \
        *best = m;                                                                                        \
        return at;                                                                                        \
    }
POOL_FIRST_MAX_IMPL(float, pool_first_max_f32)
POOL_FIRST_MAX_IMPL(double, pool_first_max_f64)

/* Flat spatial index of row-major plane position p: p itself, or column-major over the real
 * spatial dims. */
static int64_t spatial_index(const cpu_window *w, int64_t p, bool col_major) {
    if (!col_major) return p;
    int64_t idx[3] = {p / (w->in[1] * w->in[2]), p / w->in[2] % w->in[1], p % w->in[2]}, r = 0, mul = 1;
    for (int i = 0; i < w->n_spatial; i++) {
        r += idx[i] * mul;
        mul *= w->in[i];
    }
    return r;
}

/* The last dim's taps are the same for every row and plane: computed once per call (ct, out[2]
 * entries) rather than per output, which spares the per-window divisions of pool_taps_of. */
#define MAX_POOL_IMPL(T, NAME, ARGMAX)                                                                   \
    static void NAME(const cpu_window *w, int64_t NC, const T *x, T *y, int64_t *ind, bool col_major,   \
                     const pool_taps *ct) {                                                              \
        int64_t in_sp = w->in[0] * w->in[1] * w->in[2], out_sp = w->out[0] * w->out[1] * w->out[2];      \
        _Pragma("omp parallel for") for (int64_t nc = 0; nc < NC; nc++) {                                \
            const T *xp = x + nc * in_sp;                                                                \
            int64_t yi = nc * out_sp;                                                                    \
            for (int64_t o0 = 0; o0 < w->out[0]; o0++) {                                                 \
                pool_taps a = pool_taps_of(w, 0, o0);                                                    \
                for (int64_t o1 = 0; o1 < w->out[1]; o1++) {                                             \
                    pool_taps b = pool_taps_of(w, 1, o1);                                                \
                    for (int64_t o2 = 0; o2 < w->out[2]; o2++, yi++) {                                   \
                        int64_t at = ARGMAX(w, &a, &b, &ct[o2], xp, &y[yi]);                             \
                        if (ind) ind[yi] = at < 0 ? -1 : nc * in_sp + spatial_index(w, at, col_major);   \
                    }                                                                                    \
                }                                                                                        \
            }                                                                                            \
        }                                                                                                \
    }
MAX_POOL_IMPL(float, max_pool_f32, pool_first_max_f32)
MAX_POOL_IMPL(double, max_pool_f64, pool_first_max_f64)

#define AVG_POOL_IMPL(T, NAME)                                                                           \
    static void NAME(const cpu_window *w, int64_t NC, const T *x, T *y, bool include_pad) {              \
        int64_t in_sp = w->in[0] * w->in[1] * w->in[2], out_sp = w->out[0] * w->out[1] * w->out[2];      \
        _Pragma("omp parallel for") for (int64_t nc = 0; nc < NC; nc++) {                                \
            const T *xp = x + nc * in_sp;                                                                \
            pool_walk it;                                                                                \
            pool_walk_start(&it, w);                                                                     \
            for (int64_t yi = nc * out_sp; yi < (nc + 1) * out_sp; yi++, pool_walk_next(&it, w)) {       \
                const pool_taps *a = &it.t[0], *b = &it.t[1], *c = &it.t[2];                             \
                T sum = 0;                                                                               \
                POOL_FOR_TAPS(w, a, b, c, p) sum += xp[p];                                               \
                int64_t n = pool_divisor(a, b, c, include_pad);                                          \
                y[yi] = n > 0 ? sum / (T)n : (T)NAN;                                                     \
            }                                                                                            \
        }                                                                                                \
    }
AVG_POOL_IMPL(float, avg_pool_f32)
AVG_POOL_IMPL(double, avg_pool_f64)

static sc_status pool_window(const sc_kernel_call *call, cpu_window *w) {
    return pool_geom_resolve(call, &call->in[0].desc, "input", &call->out[0].desc, "output", w);
}

sc_status cpu_max_pool(const sc_kernel_call *call) {
    cpu_window w;
    SC_TRY(pool_window(call, &w));
    const sc_desc *x = &call->in[0].desc;
    int64_t *ind = call->n_out > 1 ? call->out[1].data : NULL;
    if (ind && call->out[1].desc.dtype != SC_I64) return cpu_errorf(call, "Indices must be int64");
    bool col = call->node->attrs->window.storage_order == 1;
    int64_t NC = x->dims[0] * x->dims[1];
    if (x->dtype != SC_F32 && x->dtype != SC_F64) return cpu_errorf(call, "dtype %s not supported", sc_dtype_name(x->dtype));
    const sc_window_attrs *wa = &call->node->attrs->window;
    if (wa->nhwc_in || wa->nhwc_out) {
        if (wa->nhwc_in != wa->nhwc_out || ind || x->dtype != SC_F32)
            return cpu_errorf(call, "channels-last MaxPool needs f32, no Indices, and both sides channels-last");
        pool_max_channels_last_f32(&w, x->dims[0], x->dims[1], call->in[0].data, call->out[0].data);
        return SC_OK;
    }
    if (x->dtype == SC_F32 && !ind && w.out[w.n_spatial - 1] < POOL_PLANES_MAX_OW && NC > 1) {
        if (!pool_max_planes_f32(&w, NC, call->in[0].data, call->out[0].data))
            return cpu_errorf(call, "out of memory for the pool blocks");
        return SC_OK;
    }
    if (x->dtype == SC_F32 && !ind && pool_2d_fast_applies(&w)) {
        if (!pool_2d_f32(&w, NC, call->in[0].data, call->out[0].data, true, false))
            return cpu_errorf(call, "out of memory for the pool rows");
        return SC_OK;
    }
    pool_taps *ct = pool_last_dim_taps(&w);
    if (!ct) return cpu_errorf(call, "out of memory for %lld pool windows", (long long)w.out[2]);
    if (x->dtype == SC_F32) max_pool_f32(&w, NC, call->in[0].data, call->out[0].data, ind, col, ct);
    else max_pool_f64(&w, NC, call->in[0].data, call->out[0].data, ind, col, ct);
    free(ct);
    return SC_OK;
}

sc_status cpu_average_pool(const sc_kernel_call *call) {
    cpu_window w;
    SC_TRY(pool_window(call, &w));
    const sc_desc *x = &call->in[0].desc;
    const sc_window_attrs *wa = &call->node->attrs->window;
    bool inc = wa->count_include_pad;
    int64_t NC = x->dims[0] * x->dims[1];
    if (wa->nhwc_in || wa->nhwc_out) {
        if (wa->nhwc_in != wa->nhwc_out || x->dtype != SC_F32)
            return cpu_errorf(call, "channels-last AveragePool needs f32 and both sides channels-last");
        pool_avg_channels_last_f32(&w, x->dims[0], x->dims[1], call->in[0].data, call->out[0].data, inc);
    } else if (x->dtype == SC_F32 && pool_2d_fast_applies(&w)) {
        if (!pool_2d_f32(&w, NC, call->in[0].data, call->out[0].data, false, inc))
            return cpu_errorf(call, "out of memory for the pool rows");
    } else if (x->dtype == SC_F32) avg_pool_f32(&w, NC, call->in[0].data, call->out[0].data, inc);
    else if (x->dtype == SC_F64) avg_pool_f64(&w, NC, call->in[0].data, call->out[0].data, inc);
    else return cpu_errorf(call, "dtype %s not supported", sc_dtype_name(x->dtype));
    return SC_OK;
}

/* y[i] = mean of row i of x (NC rows of sp elements). */
#define GLOBAL_AVG(NAME, T)                                                                        \
    static void NAME(int64_t NC, int64_t sp, const T *x, T *y) {                                   \
        _Pragma("omp parallel for") for (int64_t i = 0; i < NC; i++) {                             \
            T s = 0;                                                                               \
            _Pragma("omp simd reduction(+ : s)") for (int64_t j = 0; j < sp; j++) s += x[i * sp + j]; \
            y[i] = s / (T)sp;                                                                      \
        }                                                                                          \
    }
GLOBAL_AVG(global_avg_f32, float)
GLOBAL_AVG(global_avg_f64, double)

/* Y[n, c, 1, ..] = mean over all spatial positions of X[n, c, ...]. Its attrs are empty but for
 * attrs.window.nhwc_in (channels-last X), set only by graph/pass_fuse.c. */
sc_status cpu_global_average_pool(const sc_kernel_call *call) {
    const sc_desc *x = &call->in[0].desc;
    if (x->rank < 2) return cpu_errorf(call, "input rank %d < 2", x->rank);
    int64_t NC = x->dims[0] * x->dims[1], sp = 1;
    for (int i = 2; i < x->rank; i++) sp *= x->dims[i];
    if (sc_desc_numel(&call->out[0].desc) != NC) return cpu_errorf(call, "output must have N * C elements");
    if (call->node->attrs->window.nhwc_in) {
        if (x->dtype != SC_F32) return cpu_errorf(call, "channels-last input needs f32");
        pool_global_avg_channels_last_f32(x->dims[0], x->dims[1], sp, call->in[0].data, call->out[0].data);
    } else if (x->dtype == SC_F32) {
        global_avg_f32(NC, sp, call->in[0].data, call->out[0].data);
    } else if (x->dtype == SC_F64) {
        global_avg_f64(NC, sp, call->in[0].data, call->out[0].data);
    } else {
        return cpu_errorf(call, "dtype %s not supported", sc_dtype_name(x->dtype));
    }
    return SC_OK;
}
