/* BatchNormalization, LayerNormalization, Softmax, LogSoftmax; f32 (vectorised) and f64 (reference).
 *
 * BatchNormalization (opset 15), X (N, C, D...), per-channel scale, B, input_mean, input_var:
 *   inference:  Y = (X - input_mean) / sqrt(input_var + eps) * scale + B
 *   training_mode: mean, var = batch statistics over N and D (var is the population variance, as in
 *   the ONNX reference); Y uses them, and the optional outputs are
 *   running_mean = input_mean * momentum + mean * (1 - momentum), running_var likewise with var.
 * LayerNormalization (opset 17): over the dims from `axis` on, Y = (X - mean) * inv_std * Scale + B,
 *   inv_std = 1 / sqrt(var + eps) (population variance); Scale and B broadcast to X.shape[axis:].
 *   Optional outputs Mean and InvStdDev have X.shape[:axis] followed by ones.
 * Softmax / LogSoftmax (opset 13): along `axis`. Before opset 13 (legacy_2d) the input is coerced
 *   to 2-D (prod(shape[:axis]), prod(shape[axis:])) and normalised over the second dim.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_math.h"


static int64_t prod(const int64_t *d, int from, int to) {
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= d[i];
    return p;
}

/* ---- BatchNormalization ---- */

/* Per-channel mean and population variance over N and the spatial dims, in double. */
/* Per channel, in double (two passes: mean, then the centred sum of squares), with each row
 * (n, c) summed by a vectorised reduction. The order is fixed by the build, not the thread count
 * (threads split channels only). */
#define BN_STATS_IMPL(T, NAME)                                                                           \
    static void NAME(const T *x, int64_t N, int64_t C, int64_t S, double *mean, double *var) {           \
        _Pragma("omp parallel for") for (int64_t c = 0; c < C; c++) {                                    \
            double s = 0, ss = 0;                                                                        \
            for (int64_t n = 0; n < N; n++) {                                                            \
                const T *p = x + (n * C + c) * S;                                                        \
                double ps = 0;                                                                           \
                _Pragma("omp simd reduction(+ : ps)") for (int64_t i = 0; i < S; i++) ps += (double)p[i]; \
                s += ps;                                                                                 \
            }                                                                                            \
            double m = s / (double)(N * S);                                                              \
            for (int64_t n = 0; n < N; n++) {                                                            \
                const T *p = x + (n * C + c) * S;                                                        \
                double pss = 0;                                                                          \
                _Pragma("omp simd reduction(+ : pss)") for (int64_t i = 0; i < S; i++) {                 \
                    double d = (double)p[i] - m;                                                         \
                    pss += d * d;                                                                        \
                }                                                                                        \
                ss += pss;                                                                               \
            }                                                                                            \
            mean[c] = m;                                                                                 \
            var[c] = ss / (double)(N * S);                                                               \
        }                                                                                                \
    }
BN_STATS_IMPL(float, bn_stats_f32)
BN_STATS_IMPL(double, bn_stats_f64)

/* Y = X * a[c] + b[c] with the per-channel affine map folded from the statistics; with relu (an
 * inference fusion, attrs.batch_norm.fused_relu) then Relu's own map, (y < 0 ? 0 : y) + 0, which
 * passes NaN and turns -0 into +0 (backends/cpu/cpu_elementwise.c). Small tensors run on the
 * calling thread: DenseNet's 62 normalisations of 16 to 64 positions each cost more in the
 * parallel region than in the arithmetic. */
#define BN_APPLY_IMPL(T, NAME)                                                                           \
    static void NAME(const T *x, int64_t N, int64_t C, int64_t S, const double *a, const double *b, bool relu, \
                     T *y) {                                                                             \
        _Pragma("omp parallel for if (N * C * S >= CPU_PAR_MIN)") for (int64_t nc = 0; nc < N * C; nc++) { \
            T ac = (T)a[nc % C], bc = (T)b[nc % C];                                                      \
            const T *p = x + nc * S;                                                                     \
            T *q = y + nc * S;                                                                           \
            if (relu)                                                                                    \
                _Pragma("omp simd") for (int64_t i = 0; i < S; i++) {                                    \
                    T v = p[i] * ac + bc;                                                                \
                    q[i] = (v < (T)0 ? (T)0 : v) + (T)0;                                                 \
                }                                                                                        \
            else                                                                                         \
                _Pragma("omp simd") for (int64_t i = 0; i < S; i++) q[i] = p[i] * ac + bc;               \
        }                                                                                                \
    }
BN_APPLY_IMPL(float, bn_apply_f32)
BN_APPLY_IMPL(double, bn_apply_f64)

/* The same map on a channels-last X (N, S, C) (attrs.batch_norm.nhwc, inference only, set by
 * graph/pass_layout.c): C contiguous channels per position. */
static bool bn_apply_cl_f32(const float *x, int64_t N, int64_t C, int64_t S, const double *a, const double *b,
                            bool relu, float *y) {
    float *ab = malloc(sizeof(float) * (size_t)(2 * C + 1));
    if (!ab) return false;
    for (int64_t c = 0; c < C; c++) ab[c] = (float)a[c], ab[C + c] = (float)b[c];
    const float *af = ab, *bf = ab + C;
#pragma omp parallel for if (N * C * S >= CPU_PAR_MIN)
    for (int64_t p = 0; p < N * S; p++) {
        const float *xp = x + p * C;
        float *yp = y + p * C;
        if (relu)
#pragma omp simd
            for (int64_t c = 0; c < C; c++) {
                float v = xp[c] * af[c] + bf[c];
                yp[c] = (v < 0.0f ? 0.0f : v) + 0.0f;
            }
        else
#pragma omp simd
            for (int64_t c = 0; c < C; c++) yp[c] = xp[c] * af[c] + bf[c];
    }
    free(ab);
    return true;
}

static double load(const void *p, sc_dtype t, int64_t i) {
    return t == SC_F64 ? ((const double *)p)[i] : ((const float *)p)[i];
}

static void store(void *p, sc_dtype t, int64_t i, double v) {
    if (t == SC_F64) ((double *)p)[i] = v;
    else ((float *)p)[i] = (float)v;
}

sc_status cpu_batch_norm(const sc_kernel_call *call) {
    const sc_batch_norm_attrs *ba = &call->node->attrs->batch_norm;
    const sc_desc *x = &call->in[0].desc;
    sc_dtype t = x->dtype;
    if (t != SC_F32 && t != SC_F64) return cpu_errorf(call, "dtype %s not supported", sc_dtype_name(t));
    if (x->rank < 2) return cpu_errorf(call, "input rank %d < 2", x->rank);
    int64_t N = x->dims[0], C = x->dims[1], S = prod(x->dims, 2, x->rank);
    for (int i = 1; i < 5; i++) {
        if (call->in[i].desc.dtype != t)
            return cpu_errorf(call, "input %d is %s, X is %s (mixed dtypes not supported)", i,
                              sc_dtype_name(call->in[i].desc.dtype), sc_dtype_name(t));
        if (sc_desc_numel(&call->in[i].desc) != C)
            return cpu_errorf(call, "input %d has %lld elements, expected C = %lld", i,
                              (long long)sc_desc_numel(&call->in[i].desc), (long long)C);
    }
    double *buf = malloc((size_t)(4 * (C > 0 ? C : 1)) * sizeof(double));
    if (!buf) return cpu_errorf(call, "out of memory");
    double *mean = buf, *var = buf + C, *a = buf + 2 * C, *b = buf + 3 * C;
    if (ba->training_mode) {
        if (t == SC_F32) bn_stats_f32(call->in[0].data, N, C, S, mean, var);
        else bn_stats_f64(call->in[0].data, N, C, S, mean, var);
    } else {
        for (int64_t c = 0; c < C; c++) {
            mean[c] = load(call->in[3].data, t, c);
            var[c] = load(call->in[4].data, t, c);
        }
    }
    for (int64_t c = 0; c < C; c++) {
        a[c] = load(call->in[1].data, t, c) / sqrt(var[c] + ba->epsilon);
        b[c] = load(call->in[2].data, t, c) - mean[c] * a[c];
    }
    if (ba->nhwc) {
        bool ok = !ba->training_mode && t == SC_F32 &&
                  bn_apply_cl_f32(call->in[0].data, N, C, S, a, b, ba->fused_relu, call->out[0].data);
        free(buf);
        return ok ? SC_OK : cpu_errorf(call, ba->training_mode || t != SC_F32 ? "channels-last needs f32 inference" : "out of memory");
    }
    bool relu = ba->fused_relu && !ba->training_mode;
    if (t == SC_F32) bn_apply_f32(call->in[0].data, N, C, S, a, b, relu, call->out[0].data);
    else bn_apply_f64(call->in[0].data, N, C, S, a, b, relu, call->out[0].data);
    if (ba->training_mode) {
        double m = ba->momentum;
        for (int k = 1; k < 3 && k < call->n_out; k++) {
            if (!call->out[k].data) continue;
            const double *cur = k == 1 ? mean : var;
            const void *run = call->in[k + 2].data;
            for (int64_t c = 0; c < C; c++) store(call->out[k].data, t, c, load(run, t, c) * m + cur[c] * (1 - m));
        }
    } else {
        /* Outside training the optional outputs, if present, pass the running statistics through. */
        for (int k = 1; k < 3 && k < call->n_out; k++)
            if (call->out[k].data && call->out[k].data != call->in[k + 2].data)
                memcpy(call->out[k].data, call->in[k + 2].data, (size_t)C * sc_dtype_size(t));
    }
    free(buf);
    return SC_OK;
}

/* ---- LayerNormalization ---- */

/* A Scale or B input broadcast (numpy, right-aligned) to the normalised shape dims[axis:], as a
 * dense array of `inner` values; points at the input itself when it is already dense. */
static sc_status ln_param(const sc_kernel_call *call, int idx, int axis, int64_t inner, void **dense, bool *owned) {
    const sc_tensor *p = &call->in[idx];
    const sc_desc *x = &call->in[0].desc;
    size_t es = sc_dtype_size(x->dtype);
    *owned = false;
    *dense = p->data;
    if (p->desc.dtype != x->dtype)
        return cpu_errorf(call, "input %d is %s, X is %s", idx, sc_dtype_name(p->desc.dtype), sc_dtype_name(x->dtype));
    if (sc_desc_numel(&p->desc) == inner) return SC_OK;
    int nr = x->rank - axis;
    if (p->desc.rank > nr) return cpu_errorf(call, "input %d has rank %d > normalised rank %d", idx, p->desc.rank, nr);
    int64_t str[SC_MAX_RANK];
    int64_t s = 1;
    for (int i = nr - 1; i >= 0; i--) {
        int pi = i - (nr - p->desc.rank);
        int64_t d = pi >= 0 ? p->desc.dims[pi] : 1;
        if (d != 1 && d != x->dims[axis + i])
            return cpu_errorf(call, "input %d does not broadcast to the normalised shape", idx);
        str[i] = d == 1 ? 0 : s;
        s *= d;
    }
    char *out = malloc((size_t)inner * es);
    if (!out) return cpu_errorf(call, "out of memory");
    for (int64_t j = 0; j < inner; j++) {
        int64_t rem = j, off = 0;
        for (int i = nr - 1; i >= 0; i--) {
            off += (rem % x->dims[axis + i]) * str[i];
            rem /= x->dims[axis + i];
        }
        memcpy(out + j * es, (const char *)p->data + off * es, es);
    }
    *dense = out;
    *owned = true;
    return SC_OK;
}

static void ln_f32(const float *x, int64_t outer, int64_t inner, float eps, const float *g, const float *b,
                   float *y, float *mean_out, float *istd_out) {
#pragma omp parallel for
    for (int64_t r = 0; r < outer; r++) {
        const float *p = x + r * inner;
        float *q = y + r * inner;
        float s = 0, ss = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t i = 0; i < inner; i++) s += p[i];
        float m = s / (float)inner;
#pragma omp simd reduction(+ : ss)
        for (int64_t i = 0; i < inner; i++) ss += (p[i] - m) * (p[i] - m);
        float is = 1.0f / sqrtf(ss / (float)inner + eps);
        if (b) {
#pragma omp simd
            for (int64_t i = 0; i < inner; i++) q[i] = (p[i] - m) * is * g[i] + b[i];
        } else {
#pragma omp simd
            for (int64_t i = 0; i < inner; i++) q[i] = (p[i] - m) * is * g[i];
        }
        if (mean_out) mean_out[r] = m;
        if (istd_out) istd_out[r] = is;
    }
}

static void ln_f64(const double *x, int64_t outer, int64_t inner, double eps, const double *g, const double *b,
                   double *y, double *mean_out, double *istd_out) {
#pragma omp parallel for
    for (int64_t r = 0; r < outer; r++) {
        const double *p = x + r * inner;
        double s = 0, ss = 0;
        for (int64_t i = 0; i < inner; i++) s += p[i];
        double m = s / (double)inner;
        for (int64_t i = 0; i < inner; i++) ss += (p[i] - m) * (p[i] - m);
        double is = 1.0 / sqrt(ss / (double)inner + eps);
        for (int64_t i = 0; i < inner; i++) y[r * inner + i] = (p[i] - m) * is * g[i] + (b ? b[i] : 0.0);
        if (mean_out) mean_out[r] = m;
        if (istd_out) istd_out[r] = is;
    }
}

sc_status cpu_layer_norm(const sc_kernel_call *call) {
    const sc_layer_norm_attrs *la = &call->node->attrs->layer_norm;
    const sc_desc *x = &call->in[0].desc;
    sc_dtype t = x->dtype;
    if (t != SC_F32 && t != SC_F64) return cpu_errorf(call, "dtype %s not supported", sc_dtype_name(t));
    int axis = (int)(la->axis < 0 ? la->axis + x->rank : la->axis);
    if (axis < 0 || axis >= x->rank) return cpu_errorf(call, "axis %lld out of range for rank %d", (long long)la->axis, x->rank);
    int64_t outer = prod(x->dims, 0, axis), inner = prod(x->dims, axis, x->rank);
    for (int k = 1; k < 3 && k < call->n_out; k++)
        if (call->out[k].data && sc_desc_numel(&call->out[k].desc) != outer)
            return cpu_errorf(call, "output %d must have %lld elements", k, (long long)outer);
    void *g, *b = NULL;
    bool g_owned, b_owned = false;
    SC_TRY(ln_param(call, 1, axis, inner, &g, &g_owned));
    sc_status st = SC_OK;
    if (call->n_in > 2 && call->in[2].data) st = ln_param(call, 2, axis, inner, &b, &b_owned);
    if (!st) {
        void *mo = call->n_out > 1 ? call->out[1].data : NULL, *io = call->n_out > 2 ? call->out[2].data : NULL;
        if (t == SC_F32) ln_f32(call->in[0].data, outer, inner, la->epsilon, g, b, call->out[0].data, mo, io);
        else ln_f64(call->in[0].data, outer, inner, la->epsilon, g, b, call->out[0].data, mo, io);
    }
    if (g_owned) free(g);
    if (b_owned) free(b);
    return st;
}

/* ---- Softmax / LogSoftmax ---- */

/* n values at stride `st` starting at x; log selects LogSoftmax. */
static void softmax_row_f32(const float *x, float *y, int64_t n, int64_t st, bool take_log) {
    float m = -INFINITY, s = 0;
    if (st == 1) {
#pragma omp simd reduction(max : m)
        for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
        if (take_log) {
#pragma omp simd reduction(+ : s)
            for (int64_t i = 0; i < n; i++) s += cpu_exp_f32(x[i] - m);
            float ls = m + logf(s);
#pragma omp simd
            for (int64_t i = 0; i < n; i++) y[i] = x[i] - ls;
        } else {
#pragma omp simd reduction(+ : s)
            for (int64_t i = 0; i < n; i++) {
                y[i] = cpu_exp_f32(x[i] - m);
                s += y[i];
            }
            float inv = 1.0f / s;
#pragma omp simd
            for (int64_t i = 0; i < n; i++) y[i] *= inv;
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) m = x[i * st] > m ? x[i * st] : m;
    for (int64_t i = 0; i < n; i++) s += cpu_exp_f32(x[i * st] - m);
    float ls = m + logf(s);
    for (int64_t i = 0; i < n; i++) y[i * st] = take_log ? x[i * st] - ls : cpu_exp_f32(x[i * st] - ls);
}

static void softmax_row_f64(const double *x, double *y, int64_t n, int64_t st, bool take_log) {
    double m = -INFINITY, s = 0;
    for (int64_t i = 0; i < n; i++) m = x[i * st] > m ? x[i * st] : m;
    for (int64_t i = 0; i < n; i++) s += exp(x[i * st] - m);
    double ls = m + log(s);
    for (int64_t i = 0; i < n; i++) y[i * st] = take_log ? x[i * st] - ls : exp(x[i * st] - ls);
}

static sc_status softmax_run(const sc_kernel_call *call, bool take_log) {
    const sc_axis_attrs *aa = &call->node->attrs->axis;
    const sc_desc *x = &call->in[0].desc;
    sc_dtype t = x->dtype;
    if (t != SC_F32 && t != SC_F64) return cpu_errorf(call, "dtype %s not supported", sc_dtype_name(t));
    int64_t outer, n, inner;
    if (!sc_softmax_groups(x, aa, &outer, &n, &inner))
        return cpu_errorf(call, "axis %lld out of range for rank %d", (long long)aa->axis, x->rank);
    if (n == 0) return SC_OK;
#pragma omp parallel for collapse(2)
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < inner; j++) {
            int64_t off = o * n * inner + j;
            if (t == SC_F32) softmax_row_f32((const float *)call->in[0].data + off, (float *)call->out[0].data + off, n, inner, take_log);
            else softmax_row_f64((const double *)call->in[0].data + off, (double *)call->out[0].data + off, n, inner, take_log);
        }
    return SC_OK;
}

sc_status cpu_softmax(const sc_kernel_call *call) { return softmax_run(call, false); }
sc_status cpu_log_softmax(const sc_kernel_call *call) { return softmax_run(call, true); }
