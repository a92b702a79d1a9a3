/* SoftmaxCrossEntropyLoss (ONNX opset 13) and its gradient SoftmaxCrossEntropyLossGrad; f32
 * (vectorised rows) and f64 (same loops, used by the finite-difference checks).
 *
 * scores x [N, C, D1..Dk] (D = prod Di, 1 for [N, C]), labels y [N, D1..Dk] (i32 / i64),
 * optional weights w [C]. Per element (n, d), over the class dim 1 (stride D):
 *   log_prob[n,c,d] = x[n,c,d] - max_c x - log(sum_c exp(x[n,c,d] - max_c x))
 *   l[n,d] = -w[y] * log_prob[n,y,d]      (w = 1 without weights; 0 where y == ignore_index)
 *   reduction none: l;  sum: sum l;  mean: sum l / sum_{not ignored} w[y]  (the ONNX reference and
 *   torch.nn.CrossEntropyLoss; all elements ignored gives 0/0 = NaN, as both do).
 * Gradient (dLoss, log_prob, labels[, weights]) -> dScores:
 *   dScores[n,c,d] = (exp(log_prob[n,c,d]) - [c == y]) * w[y] * g[n,d],
 *   g = dLoss (sum), dLoss / sum w[y] (mean), dLoss[n,d] (none); 0 where y is ignored.
 * Labels outside [0, C) that are not ignore_index fail with a status naming the node and the index.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_math.h"

static inline double exp_f64(double x) { return exp(x); }

typedef struct {
    int64_t N, C, D;     /* D: product of the dims after C */
    const void *labels;  /* i32 or i64, N * D */
    sc_dtype label_type;
    bool has_ignore;
    int64_t ignore;
} sce_geom;

static int64_t label_at(const sce_geom *s, int64_t i) {
    return s->label_type == SC_I64 ? ((const int64_t *)s->labels)[i] : ((const int32_t *)s->labels)[i];
}

static bool label_ignored(const sce_geom *s, int64_t y) { return s->has_ignore && y == s->ignore; }

/* Shapes from scores and labels, plus the label range check (before any output is written). */
static sc_status sce_geom_init(const sc_kernel_call *c, const sc_tensor *scores, const sc_tensor *labels,
                               const sc_sce_attrs *a, sce_geom *s) {
    const sc_desc *x = &scores->desc;
    if (x->rank < 2) return cpu_errorf(c, "scores must have rank >= 2");
    if (labels->desc.dtype != SC_I32 && labels->desc.dtype != SC_I64)
        return cpu_errorf(c, "labels dtype %s not supported (i32, i64)", sc_dtype_name(labels->desc.dtype));
    s->N = x->dims[0];
    s->C = x->dims[1];
    s->D = 1;
    for (int i = 2; i < x->rank; i++) s->D *= x->dims[i];
    if (sc_desc_numel(&labels->desc) != s->N * s->D)
        return cpu_errorf(c, "labels have %lld elements, expected N * D = %lld", (long long)sc_desc_numel(&labels->desc),
                          (long long)(s->N * s->D));
    s->labels = labels->data;
    s->label_type = labels->desc.dtype;
    s->has_ignore = a->has_ignore_index;
    s->ignore = a->ignore_index;
    for (int64_t i = 0; i < s->N * s->D; i++) {
        int64_t y = label_at(s, i);
        if (!label_ignored(s, y) && (y < 0 || y >= s->C))
            return cpu_errorf(c, "label %lld at index %lld is outside [0, %lld)%s", (long long)y, (long long)i,
                              (long long)s->C, s->has_ignore ? " and is not ignore_index" : "");
    }
    return SC_OK;
}

static sc_status sce_check_float(const sc_kernel_call *c, int scores_input, int weights_input) {
    sc_dtype t = c->in[scores_input].desc.dtype;
    if (t != SC_F32 && t != SC_F64) return cpu_errorf(c, "dtype %s not supported (f32, f64)", sc_dtype_name(t));
    if (weights_input < c->n_in && c->in[weights_input].data) {
        if (c->in[weights_input].desc.dtype != t) return cpu_errorf(c, "weights dtype differs from scores");
    }
    return SC_OK;
}

/* One (n, d) row of C classes at stride S: writes log_prob (when lp != NULL) and returns
 * -log_prob[y] (y < 0: no target, returns 0). */
#define SCE_ROW_IMPL(T, NAME, EXP, LOG)                                                                    \
    static inline double NAME(const T *x, T *lp, int64_t C, int64_t S, int64_t y) {                        \
        T mx = x[0];                                                                                       \
        _Pragma("omp simd reduction(max : mx)") for (int64_t c = 1; c < C; c++) mx = x[c * S] > mx ? x[c * S] : mx; \
        T se = 0;                                                                                          \
        _Pragma("omp simd reduction(+ : se)") for (int64_t c = 0; c < C; c++) se += EXP(x[c * S] - mx);    \
        T lse = mx + LOG(se);                                                                              \
        if (lp) {                                                                                          \
            _Pragma("omp simd") for (int64_t c = 0; c < C; c++) lp[c * S] = x[c * S] - lse;                \
        }                                                                                                  \
        return y >= 0 ? -(double)(x[y * S] - lse) : 0.0;                                                   \
    }
SCE_ROW_IMPL(float, sce_row_f32, cpu_exp_f32, logf)
SCE_ROW_IMPL(double, sce_row_f64, exp_f64, log)

/* Forward over all rows: per-element weighted losses into `none` (may be NULL), returns their sum
 * and the sum of the weights of the non-ignored elements through *wsum. */
#define SCE_FWD_IMPL(T, NAME, ROW)                                                                         \
    static double NAME(const sce_geom *s, const T *x, const T *w, T *lp, T *none, double *wsum) {          \
        double total = 0, wtotal = 0;                                                                      \
        int64_t R = s->N * s->D, C = s->C, D = s->D;                                                       \
        _Pragma("omp parallel for reduction(+ : total, wtotal) schedule(static)") for (int64_t r = 0; r < R; r++) { \
            int64_t n = r / D, d = r % D, y = label_at(s, r);                                              \
            bool ign = label_ignored(s, y);                                                                \
            const T *xr = x + n * C * D + d;                                                               \
            T *lr = lp ? lp + n * C * D + d : NULL;                                                        \
            double l = D == 1 ? ROW(xr, lr, C, 1, ign ? -1 : y) : ROW(xr, lr, C, D, ign ? -1 : y);         \
            double wy = ign ? 0.0 : (w ? (double)w[y] : 1.0);                                              \
            l *= wy;                                                                                       \
            if (none) none[r] = (T)l;                                                                      \
            total += l;                                                                                    \
            wtotal += wy;                                                                                  \
        }                                                                                                  \
        *wsum = wtotal;                                                                                    \
        return total;                                                                                      \
    }
SCE_FWD_IMPL(float, sce_fwd_f32, sce_row_f32)
SCE_FWD_IMPL(double, sce_fwd_f64, sce_row_f64)

/* Inputs (scores, labels[, weights]) -> (loss[, log_prob]); attrs.sce. */
sc_status cpu_sce_loss(const sc_kernel_call *c) {
    const sc_sce_attrs *a = &c->node->attrs->sce;
    SC_TRY(sce_check_float(c, 0, 2));
    sce_geom s;
    SC_TRY(sce_geom_init(c, &c->in[0], &c->in[1], a, &s));
    const void *w = c->n_in > 2 ? c->in[2].data : NULL;
    void *lp = c->n_out > 1 ? c->out[1].data : NULL;
    void *none = a->reduction == SC_REDUCTION_NONE ? c->out[0].data : NULL;
    double wsum, total;
    bool f32 = c->in[0].desc.dtype == SC_F32;
    if (f32) total = sce_fwd_f32(&s, c->in[0].data, w, lp, none, &wsum);
    else total = sce_fwd_f64(&s, c->in[0].data, w, lp, none, &wsum);
    if (a->reduction == SC_REDUCTION_NONE) return SC_OK;
    double v = a->reduction == SC_REDUCTION_SUM ? total : total / wsum;
    if (f32) *(float *)c->out[0].data = (float)v;
    else *(double *)c->out[0].data = v;
    return SC_OK;
}

/* dScores for every row: (softmax - onehot) * w[y] * g, g per row from dLoss (see the header). */
#define SCE_BWD_IMPL(T, NAME, EXP)                                                                         \
    static void NAME(const sce_geom *s, const T *dl, bool per_elem, double scale, const T *lp, const T *w, T *dx) { \
        int64_t R = s->N * s->D, C = s->C, D = s->D;                                                       \
        _Pragma("omp parallel for schedule(static)") for (int64_t r = 0; r < R; r++) {                     \
            int64_t n = r / D, d = r % D, y = label_at(s, r);                                              \
            const T *lr = lp + n * C * D + d;                                                              \
            T *gr = dx + n * C * D + d;                                                                    \
            if (label_ignored(s, y)) {                                                                     \
                for (int64_t c = 0; c < C; c++) gr[c * D] = 0;                                             \
                continue;                                                                                  \
            }                                                                                              \
            T g = (T)((per_elem ? (double)dl[r] : (double)dl[0]) * scale * (w ? (double)w[y] : 1.0));      \
            if (D == 1) {                                                                                  \
                _Pragma("omp simd") for (int64_t c = 0; c < C; c++) gr[c] = EXP(lr[c]) * g;                \
            } else {                                                                                       \
                for (int64_t c = 0; c < C; c++) gr[c * D] = EXP(lr[c * D]) * g;                            \
            }                                                                                              \
            gr[y * D] -= g;                                                                                \
        }                                                                                                  \
    }
SCE_BWD_IMPL(float, sce_bwd_f32, cpu_exp_f32)
SCE_BWD_IMPL(double, sce_bwd_f64, exp_f64)

/* Sum of w[y] over non-ignored elements (their count without weights): the mean's denominator. */
static double sce_weight_sum(const sce_geom *s, const void *w, sc_dtype t) {
    double sum = 0;
    for (int64_t r = 0; r < s->N * s->D; r++) {
        int64_t y = label_at(s, r);
        if (label_ignored(s, y)) continue;
        sum += !w ? 1.0 : t == SC_F32 ? (double)((const float *)w)[y] : ((const double *)w)[y];
    }
    return sum;
}

/* Inputs (dLoss, log_prob, labels[, weights]) -> dScores; attrs.sce. */
sc_status cpu_sce_loss_grad(const sc_kernel_call *c) {
    const sc_sce_attrs *a = &c->node->attrs->sce;
    SC_TRY(sce_check_float(c, 1, 3));
    sc_dtype t = c->in[1].desc.dtype;
    if (c->in[0].desc.dtype != t) return cpu_errorf(c, "dLoss dtype differs from log_prob");
    sce_geom s;
    SC_TRY(sce_geom_init(c, &c->in[1], &c->in[2], a, &s));
    const void *w = c->n_in > 3 ? c->in[3].data : NULL;
    bool per_elem = a->reduction == SC_REDUCTION_NONE;
    int64_t want = per_elem ? s.N * s.D : 1;
    if (sc_desc_numel(&c->in[0].desc) != want)
        return cpu_errorf(c, "dLoss has %lld elements, expected %lld", (long long)sc_desc_numel(&c->in[0].desc),
                          (long long)want);
    double scale = 1.0;
    if (a->reduction == SC_REDUCTION_MEAN) scale = 1.0 / sce_weight_sum(&s, w, t);
    if (t == SC_F32) sce_bwd_f32(&s, c->in[0].data, per_elem, scale, c->in[1].data, w, c->out[0].data);
    else sce_bwd_f64(&s, c->in[0].data, per_elem, scale, c->in[1].data, w, c->out[0].data);
    return SC_OK;
}
