/* MaxPool, AveragePool, GlobalAveragePool (ONNX opsets up to 22), f32 and f64, 1 to 3 spatial dims.
 *
 * Window o of spatial dim i covers input positions p = o * stride - pad_begin + t * dil, t < k.
 * MaxPool ignores positions outside the input (as if padded with -inf). Its optional Indices output
 * holds the flat index of the maximum in the whole input tensor, ((n * C + c) * D1 + i1) * D2 + ...
 * for storage_order 0, and i1 + i2 * D1 + ... (column-major spatial part) for storage_order 1.
 * AveragePool divides by the taps inside the input, or with count_include_pad by the taps inside the
 * explicitly padded extent [-pad_begin, D + pad_end): with ceil_mode the part of the last window
 * beyond that extent is never counted (as onnxruntime and PyTorch do).
 * Output dims come from shape inference (ceil_mode included); windows are clamped, so any output
 * size is safe. Loops run in parallel over N * C planes.
 */
#include <math.h>
#include <string.h>

#include "backends/cpu/cpu_kernels.h"

/* The taps [lo, hi) of window o along dim i that fall inside the input, the first input position
 * `start` (tap 0), and how many taps fall inside the padded extent. */
typedef struct {
    int64_t start, lo, hi, n_padded;
} window_taps;

static int64_t ceil_div(int64_t a, int64_t b) { return a <= 0 ? 0 : (a + b - 1) / b; }

static window_taps taps_of(const cpu_window *w, int i, int64_t o) {
    window_taps t;
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

/* Flat spatial index of (i0, i1, i2): row-major, or column-major over the real spatial dims. */
static int64_t spatial_index(const cpu_window *w, int64_t i0, int64_t i1, int64_t i2, bool col_major) {
    if (!col_major) return (i0 * w->in[1] + i1) * w->in[2] + i2;
    int64_t idx[3] = {i0, i1, i2}, r = 0, mul = 1;
    for (int i = 0; i < w->n_spatial; i++) {
        r += idx[i] * mul;
        mul *= w->in[i];
    }
    return r;
}

#define MAX_POOL_IMPL(T, NAME)                                                                           \
    static void NAME(const cpu_window *w, int64_t NC, const T *x, T *y, int64_t *ind, bool col_major) {  \
        int64_t in_sp = w->in[0] * w->in[1] * w->in[2], out_sp = w->out[0] * w->out[1] * w->out[2];      \
        _Pragma("omp parallel for") for (int64_t nc = 0; nc < NC; nc++) {                                \
            const T *xp = x + nc * in_sp;                                                                \
            int64_t yi = nc * out_sp;                                                                    \
            for (int64_t o0 = 0; o0 < w->out[0]; o0++) {                                                 \
                window_taps a = taps_of(w, 0, o0);                                                       \
                for (int64_t o1 = 0; o1 < w->out[1]; o1++) {                                             \
                    window_taps b = taps_of(w, 1, o1);                                                   \
                    for (int64_t o2 = 0; o2 < w->out[2]; o2++, yi++) {                                   \
                        window_taps c = taps_of(w, 2, o2);                                               \
                        T best = -INFINITY;                                                              \
                        int64_t bi0 = -1, bi1 = 0, bi2 = 0;                                              \
                        for (int64_t t0 = a.lo; t0 < a.hi; t0++) {                                       \
                            int64_t i0 = a.start + t0 * w->dil[0];                                       \
                            for (int64_t t1 = b.lo; t1 < b.hi; t1++) {                                   \
                                int64_t i1 = b.start + t1 * w->dil[1];                                   \
                                const T *row = xp + (i0 * w->in[1] + i1) * w->in[2];                     \
                                for (int64_t t2 = c.lo; t2 < c.hi; t2++) {                               \
                                    int64_t i2 = c.start + t2 * w->dil[2];                               \
                                    if (row[i2] > best || bi0 < 0) {                                     \
                                        best = row[i2];                                                  \
                                        bi0 = i0, bi1 = i1, bi2 = i2;                                    \
                                    }                                                                    \
                                }                                                                        \
                            }                                                                            \
                        }                                                                                \
                        y[yi] = best;                                                                    \
                        if (ind) ind[yi] = bi0 < 0 ? -1 : nc * in_sp + spatial_index(w, bi0, bi1, bi2, col_major); \
                    }                                                                                    \
                }                                                                                        \
            }                                                                                            \
        }                                                                                                \
    }
MAX_POOL_IMPL(float, max_pool_f32)
MAX_POOL_IMPL(double, max_pool_f64)

#define AVG_POOL_IMPL(T, NAME)                                                                           \
    static void NAME(const cpu_window *w, int64_t NC, const T *x, T *y, bool include_pad) {              \
        int64_t in_sp = w->in[0] * w->in[1] * w->in[2], out_sp = w->out[0] * w->out[1] * w->out[2];      \
        _Pragma("omp parallel for") for (int64_t nc = 0; nc < NC; nc++) {                                \
            const T *xp = x + nc * in_sp;                                                                \
            int64_t yi = nc * out_sp;                                                                    \
            for (int64_t o0 = 0; o0 < w->out[0]; o0++) {                                                 \
                window_taps a = taps_of(w, 0, o0);                                                       \
                for (int64_t o1 = 0; o1 < w->out[1]; o1++) {                                             \
                    window_taps b = taps_of(w, 1, o1);                                                   \
                    for (int64_t o2 = 0; o2 < w->out[2]; o2++, yi++) {                                   \
                        window_taps c = taps_of(w, 2, o2);                                               \
                        T sum = 0;                                                                       \
                        for (int64_t t0 = a.lo; t0 < a.hi; t0++) {                                       \
                            int64_t i0 = a.start + t0 * w->dil[0];                                       \
                            for (int64_t t1 = b.lo; t1 < b.hi; t1++) {                                   \
                                int64_t i1 = b.start + t1 * w->dil[1];                                   \
                                const T *row = xp + (i0 * w->in[1] + i1) * w->in[2];                     \
                                for (int64_t t2 = c.lo; t2 < c.hi; t2++) sum += row[c.start + t2 * w->dil[2]]; \
                            }                                                                            \
                        }                                                                                \
                        int64_t n = include_pad ? a.n_padded * b.n_padded * c.n_padded                   \
                                                : (a.hi - a.lo) * (b.hi - b.lo) * (c.hi - c.lo);         \
                        y[yi] = n > 0 ? sum / (T)n : (T)NAN;                                             \
                    }                                                                                    \
                }                                                                                        \
            }                                                                                            \
        }                                                                                                \
    }
AVG_POOL_IMPL(float, avg_pool_f32)
AVG_POOL_IMPL(double, avg_pool_f64)

static sc_status pool_window(const sc_kernel_call *call, cpu_window *w) {
    const sc_window_attrs *wa = &call->node->attrs.window;
    const sc_desc *x = &call->in[0].desc, *y = &call->out[0].desc;
    if (x->rank < 3 || x->rank > 2 + SC_MAX_SPATIAL || y->rank != x->rank || y->dims[0] != x->dims[0] ||
        y->dims[1] != x->dims[1]) {
        char a[96], b[96];
        return cpu_errorf(call, "input %s and output %s do not match a pool", sc_desc_str(x, a, sizeof a),
                          sc_desc_str(y, b, sizeof b));
    }
    if (!wa->has_kernel_shape || wa->n_spatial != x->rank - 2)
        return cpu_errorf(call, "kernel_shape missing or not of rank %d", x->rank - 2);
    return cpu_window_resolve(call, wa, x, wa->kernel_shape, y, w);
}

sc_status cpu_max_pool(const sc_kernel_call *call) {
    cpu_window w;
    SC_TRY(pool_window(call, &w));
    const sc_desc *x = &call->in[0].desc;
    int64_t *ind = call->n_out > 1 ? call->out[1].data : NULL;
    if (ind && call->out[1].desc.dtype != SC_I64) return cpu_errorf(call, "Indices must be int64");
    bool col = call->node->attrs.window.storage_order == 1;
    int64_t NC = x->dims[0] * x->dims[1];
    if (x->dtype == SC_F32) max_pool_f32(&w, NC, call->in[0].data, call->out[0].data, ind, col);
    else if (x->dtype == SC_F64) max_pool_f64(&w, NC, call->in[0].data, call->out[0].data, ind, col);
    else return cpu_errorf(call, "dtype %s not supported", sc_dtype_name(x->dtype));
    return SC_OK;
}

sc_status cpu_average_pool(const sc_kernel_call *call) {
    cpu_window w;
    SC_TRY(pool_window(call, &w));
    const sc_desc *x = &call->in[0].desc;
    bool inc = call->node->attrs.window.count_include_pad;
    int64_t NC = x->dims[0] * x->dims[1];
    if (x->dtype == SC_F32) avg_pool_f32(&w, NC, call->in[0].data, call->out[0].data, inc);
    else if (x->dtype == SC_F64) avg_pool_f64(&w, NC, call->in[0].data, call->out[0].data, inc);
    else return cpu_errorf(call, "dtype %s not supported", sc_dtype_name(x->dtype));
    return SC_OK;
}

/* Y[n, c, 1, ..] = mean over all spatial positions of X[n, c, ...]. */
sc_status cpu_global_average_pool(const sc_kernel_call *call) {
    const sc_desc *x = &call->in[0].desc;
    if (x->rank < 2) return cpu_errorf(call, "input rank %d < 2", x->rank);
    int64_t NC = x->dims[0] * x->dims[1], sp = 1;
    for (int i = 2; i < x->rank; i++) sp *= x->dims[i];
    if (sc_desc_numel(&call->out[0].desc) != NC) return cpu_errorf(call, "output must have N * C elements");
    if (x->dtype == SC_F32) {
        const float *xp = call->in[0].data;
        float *y = call->out[0].data;
#pragma omp parallel for
        for (int64_t i = 0; i < NC; i++) {
            float s = 0;
#pragma omp simd reduction(+ : s)
            for (int64_t j = 0; j < sp; j++) s += xp[i * sp + j];
            y[i] = s / (float)sp;
        }
    } else if (x->dtype == SC_F64) {
        const double *xp = call->in[0].data;
        double *y = call->out[0].data;
#pragma omp parallel for
        for (int64_t i = 0; i < NC; i++) {
            double s = 0;
            for (int64_t j = 0; j < sp; j++) s += xp[i * sp + j];
            y[i] = s / (double)sp;
        }
    } else {
        return cpu_errorf(call, "dtype %s not supported", sc_dtype_name(x->dtype));
    }
    return SC_OK;
}
