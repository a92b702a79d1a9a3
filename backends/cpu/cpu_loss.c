/* SoftmaxCrossEntropyLoss (ONNX opset 13) and its gradient SoftmaxCrossEntropyLossGrad; f32
 * (vectorised rows) and f64 (same loops, used by the finite-difference checks), and bf16 / f16
 * scores computed in f32.
 *
 * scores x [N, C, D1..Dk] (D = prod Di, 1 for [N, C]), labels y [N, D1..Dk] (i32 / i64),
 * optional weights w [C]. Per element (n, d), over the class dim 1 (stride D):
 *   log_prob[n,c,d] = x[n,c,d] - lse,  lse = max_c x + log(sum_c exp(x[n,c,d] - max_c x))
 *   l[n,d] = -w[y] * log_prob[n,y,d]      (w = 1 without weights; 0 where y == ignore_index)
 *   reduction none: l;  sum: sum l;  mean: sum l / sum_{not ignored} w[y]  (the ONNX reference and
 *   torch.nn.CrossEntropyLoss; all elements ignored gives 0/0 = NaN, as both do).
 * Gradient (dLoss, scores, labels[, weights]) -> dScores:
 *   dScores[n,c,d] = (exp(x[n,c,d] - lse) - [c == y]) * w[y] * g[n,d],
 *   g = dLoss (sum), dLoss / sum w[y] (mean), dLoss[n,d] (none); 0 where y is ignored.
 * The gradient recomputes lse from the scores rather than reading a stored log_prob: backward keeps
 * the scores (which in mixed precision are the 16-bit logits) instead of an f32 tensor as large,
 * for one more max and sum per row. exp(x - lse) is the same float expression as exp(log_prob) was.
 * 16-bit scores: each row is widened exactly into a per-thread f32 buffer (the bits a Cast to f32
 * gives, without an f32 copy of the whole tensor: GPT-2's 50257-way logits are 1.65 GB in f32 at
 * batch 8, seq 1024), the loss and dLoss are f32, and log_prob / dScores are rounded once to the
 * scores' type, as a Cast of the f32 results would be.
 * Labels outside [0, C) that are not ignore_index fail with a status naming the node and the index.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_math.h"
#include "core/half.h"

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

/* The type the kernel computes in: f64 for f64 scores, else f32. */
static sc_dtype sce_compute_type(sc_dtype scores) { return scores == SC_F64 ? SC_F64 : SC_F32; }

static sc_status sce_check_float(const sc_kernel_call *c, int scores_input, int weights_input) {
    sc_dtype t = c->in[scores_input].desc.dtype;
    if (t != SC_F32 && t != SC_F64 && !sc_dtype_is_half(t))
        return cpu_errorf(c, "dtype %s not supported (f32, f64, bf16, f16)", sc_dtype_name(t));
    if (weights_input < c->n_in && c->in[weights_input].data) {
        if (c->in[weights_input].desc.dtype != sce_compute_type(t))
            return cpu_errorf(c, "weights must be %s for %s scores", sc_dtype_name(sce_compute_type(t)), sc_dtype_name(t));
    }
    return SC_OK;
}

/* Scores as the row loops read them. */
typedef struct {
    const void *x;
    sc_dtype t;
} sce_scores;

static float half_at(const uint16_t *h, sc_dtype t, int64_t i) {
    return t == SC_BF16 ? sc_bf16_to_f32(h[i]) : sc_f16_to_f32(h[i]);
}

/* Row (n, d) of C classes: in place at stride D for f32 / f64, or widened into buf (stride 1). */
#define SCE_ROW_FETCH_IMPL(T, NAME)                                                                        \
    static const T *NAME(const sce_scores *x, const sce_geom *s, int64_t r, T *buf, int64_t *stride) {     \
        int64_t C = s->C, D = s->D, base = (r / D) * C * D + r % D;                                        \
        if (!sc_dtype_is_half(x->t)) {                                                                             \
            *stride = D;                                                                                   \
            return (const T *)x->x + base;                                                                 \
        }                                                                                                  \
        const uint16_t *h = (const uint16_t *)x->x + base;                                                 \
        for (int64_t c = 0; c < C; c++) buf[c] = (T)half_at(h, x->t, c * D);                              \
        *stride = 1;                                                                                       \
        return buf;                                                                                        \
    }
SCE_ROW_FETCH_IMPL(float, sce_fetch_f32)
SCE_ROW_FETCH_IMPL(double, sce_fetch_f64)

/* Writes row (n, d) of C values from src (stride 1) into dst of type t at stride D, rounding 16-bit. */
#define SCE_ROW_STORE_IMPL(T, NAME)                                                                        \
    static void NAME(void *dst, sc_dtype t, const sce_geom *s, int64_t r, const T *src) {                  \
        int64_t C = s->C, D = s->D, base = (r / D) * C * D + r % D;                                        \
        if (t == SC_BF16)                                                                                  \
            for (int64_t c = 0; c < C; c++) ((uint16_t *)dst)[base + c * D] = sc_f32_to_bf16((float)src[c]); \
        else if (t == SC_F16)                                                                              \
            for (int64_t c = 0; c < C; c++) ((uint16_t *)dst)[base + c * D] = sc_f32_to_f16((float)src[c]); \
        else                                                                                               \
            for (int64_t c = 0; c < C; c++) ((T *)dst)[base + c * D] = src[c];                             \
    }
SCE_ROW_STORE_IMPL(float, sce_store_f32)
SCE_ROW_STORE_IMPL(double, sce_store_f64)

/* lse = max + log(sum exp(x - max)) of one row of C classes at stride S. */
#define SCE_LSE_IMPL(T, NAME, EXP, LOG)                                                                    \
    static inline T NAME(const T *x, int64_t C, int64_t S) {                                               \
        T mx = x[0];                                                                                       \
        _Pragma("omp simd reduction(max : mx)") for (int64_t c = 1; c < C; c++) mx = x[c * S] > mx ? x[c * S] : mx; \
        T se = 0;                                                                                          \
        _Pragma("omp simd reduction(+ : se)") for (int64_t c = 0; c < C; c++) se += EXP(x[c * S] - mx);    \
        return mx + LOG(se);                                                                               \
    }
SCE_LSE_IMPL(float, sce_lse_f32, cpu_exp_f32, logf)
SCE_LSE_IMPL(double, sce_lse_f64, exp_f64, log)

/* The loss sums rows in fixed chunks, in order, so its bits do not depend on the thread count: at
 * least SCE_CHUNK_ROWS rows a chunk, at most SCE_MAX_CHUNKS chunks. */
#define SCE_CHUNK_ROWS 64
#define SCE_MAX_CHUNKS 1024

/* Forward over all rows: writes log_prob (lp, of type lt, when not NULL) and per-element weighted
 * losses into `none` (may be NULL); returns their sum and the sum of the weights of the non-ignored
 * elements through *wsum. buf: C values per thread for 16-bit scores or a 16-bit log_prob. */
#define SCE_FWD_IMPL(T, NAME, FETCH, LSE, STORE)                                                           \
    static double NAME(const sce_geom *s, const sce_scores *x, const T *w, void *lp, sc_dtype lt, T *none, T *bufs, \
                       double *wsum) {                                                                     \
        int64_t R = s->N * s->D, C = s->C, D = s->D;                                                       \
        int64_t rows = R > SCE_MAX_CHUNKS * SCE_CHUNK_ROWS ? (R + SCE_MAX_CHUNKS - 1) / SCE_MAX_CHUNKS : SCE_CHUNK_ROWS; \
        int64_t chunks = (R + rows - 1) / rows;                                                            \
        double part[2 * SCE_MAX_CHUNKS];                                                                   \
        _Pragma("omp parallel for schedule(static)") for (int64_t ch = 0; ch < chunks; ch++) {             \
        double total = 0, wtotal = 0;                                                                      \
        for (int64_t r = ch * rows; r < R && r < (ch + 1) * rows; r++) {                                   \
            int64_t y = label_at(s, r), S;                                                                 \
            bool ign = label_ignored(s, y);                                                                \
            T *buf = bufs ? bufs + (int64_t)omp_get_thread_num() * 2 * C : NULL;                           \
            const T *xr = FETCH(x, s, r, buf, &S);                                                         \
            T lse = S == 1 ? LSE(xr, C, 1) : LSE(xr, C, S);                                                \
            if (lp && !sc_dtype_is_half(lt)) {                                                                     \
                T *lr = (T *)lp + (r / D) * C * D + r % D;                                                 \
                _Pragma("omp simd") for (int64_t c = 0; c < C; c++) lr[c * D] = xr[c * S] - lse;           \
            } else if (lp) {                                                                               \
                T *row = buf + C;                                                                          \
                for (int64_t c = 0; c < C; c++) row[c] = xr[c * S] - lse;                                  \
                STORE(lp, lt, s, r, row);                                                                  \
            }                                                                                              \
            double l = ign ? 0.0 : -(double)(xr[y * S] - lse);                                             \
            double wy = ign ? 0.0 : (w ? (double)w[y] : 1.0);                                              \
            l *= wy;                                                                                       \
            if (none) none[r] = (T)l;                                                                      \
            total += l;                                                                                    \
            wtotal += wy;                                                                                  \
        }                                                                                                  \
        part[2 * ch] = total;                                                                              \
        part[2 * ch + 1] = wtotal;                                                                         \
        }                                                                                                  \
        double total = 0, wtotal = 0;                                                                      \
        for (int64_t ch = 0; ch < chunks; ch++) total += part[2 * ch], wtotal += part[2 * ch + 1];         \
        *wsum = wtotal;                                                                                    \
        return total;                                                                                      \
    }
SCE_FWD_IMPL(float, sce_fwd_f32, sce_fetch_f32, sce_lse_f32, sce_store_f32)
SCE_FWD_IMPL(double, sce_fwd_f64, sce_fetch_f64, sce_lse_f64, sce_store_f64)

/* Per-thread rows (2 C values each) when scores or outputs are 16-bit; *bufs stays NULL otherwise. */
static sc_status sce_bufs(const sc_kernel_call *c, bool need, int64_t C, size_t elem, void **bufs) {
    *bufs = NULL;
    if (!need) return SC_OK;
    *bufs = malloc(elem * 2 * (size_t)C * (size_t)cpu_num_threads());
    return *bufs ? SC_OK : cpu_errorf(c, "out of memory for %lld-class rows", (long long)C);
}

/* Inputs (scores, labels[, weights]) -> (loss[, log_prob]); attrs.sce. */
sc_status cpu_sce_loss(const sc_kernel_call *c) {
    const sc_sce_attrs *a = &c->node->attrs->sce;
    SC_TRY(sce_check_float(c, 0, 2));
    sce_geom s;
    SC_TRY(sce_geom_init(c, &c->in[0], &c->in[1], a, &s));
    const void *w = c->n_in > 2 ? c->in[2].data : NULL;
    void *lp = c->n_out > 1 ? c->out[1].data : NULL;
    void *none = a->reduction == SC_REDUCTION_NONE ? c->out[0].data : NULL;
    sce_scores x = {c->in[0].data, c->in[0].desc.dtype};
    sc_dtype lt = lp ? c->out[1].desc.dtype : x.t;
    bool f32 = sce_compute_type(x.t) == SC_F32;
    void *bufs;
    SC_TRY(sce_bufs(c, sc_dtype_is_half(x.t) || sc_dtype_is_half(lt), s.C, f32 ? sizeof(float) : sizeof(double), &bufs));
    double wsum, total;
    if (f32) total = sce_fwd_f32(&s, &x, w, lp, lt, none, bufs, &wsum);
    else total = sce_fwd_f64(&s, &x, w, lp, lt, none, bufs, &wsum);
    free(bufs);
    if (a->reduction == SC_REDUCTION_NONE) return SC_OK;
    double v = a->reduction == SC_REDUCTION_SUM ? total : total / wsum;
    if (f32) *(float *)c->out[0].data = (float)v;
    else *(double *)c->out[0].data = v;
    return SC_OK;
}

/* dScores for every row: (softmax - onehot) * w[y] * g, g per row from dLoss (see the header). The
 * row is computed in T and stored at stride D, rounded when dx is 16-bit. */
#define SCE_BWD_IMPL(T, NAME, FETCH, LSE, STORE, EXP)                                                      \
    static void NAME(const sce_geom *s, const T *dl, bool per_elem, double scale, const sce_scores *x, const T *w, \
                     void *dx, sc_dtype dt, T *bufs) {                                                     \
        int64_t R = s->N * s->D, C = s->C, D = s->D;                                                       \
        _Pragma("omp parallel for schedule(static)") for (int64_t r = 0; r < R; r++) {                     \
            int64_t y = label_at(s, r), S;                                                                 \
            T *buf = bufs ? bufs + (int64_t)omp_get_thread_num() * 2 * C : NULL;                           \
            bool direct = !sc_dtype_is_half(dt) && D == 1;                                                         \
            T *gr = direct ? (T *)dx + r * C : buf + C;                                                    \
            if (label_ignored(s, y)) {                                                                     \
                for (int64_t c = 0; c < C; c++) gr[c] = 0;                                                 \
                if (!direct) STORE(dx, dt, s, r, gr);                                                      \
                continue;                                                                                  \
            }                                                                                              \
            const T *xr = FETCH(x, s, r, buf, &S);                                                         \
            T lse = S == 1 ? LSE(xr, C, 1) : LSE(xr, C, S);                                                \
            T g = (T)((per_elem ? (double)dl[r] : (double)dl[0]) * scale * (w ? (double)w[y] : 1.0));      \
            if (S == 1) {                                                                                  \
                _Pragma("omp simd") for (int64_t c = 0; c < C; c++) gr[c] = EXP(xr[c] - lse) * g;          \
            } else {                                                                                       \
                for (int64_t c = 0; c < C; c++) gr[c] = EXP(xr[c * S] - lse) * g;                          \
            }                                                                                              \
            gr[y] -= g;                                                                                    \
            if (!direct) STORE(dx, dt, s, r, gr);                                                          \
        }                                                                                                  \
    }
SCE_BWD_IMPL(float, sce_bwd_f32, sce_fetch_f32, sce_lse_f32, sce_store_f32, cpu_exp_f32)
SCE_BWD_IMPL(double, sce_bwd_f64, sce_fetch_f64, sce_lse_f64, sce_store_f64, exp_f64)

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

/* Inputs (dLoss, scores, labels[, weights]) -> dScores; attrs.sce. */
sc_status cpu_sce_loss_grad(const sc_kernel_call *c) {
    const sc_sce_attrs *a = &c->node->attrs->sce;
    SC_TRY(sce_check_float(c, 1, 3));
    sce_scores x = {c->in[1].data, c->in[1].desc.dtype};
    sc_dtype t = sce_compute_type(x.t), dt = c->out[0].desc.dtype;
    if (c->in[0].desc.dtype != t) return cpu_errorf(c, "dLoss must be %s for %s scores", sc_dtype_name(t), sc_dtype_name(x.t));
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
    void *bufs;
    SC_TRY(sce_bufs(c, sc_dtype_is_half(x.t) || sc_dtype_is_half(dt) || s.D > 1, s.C, t == SC_F32 ? sizeof(float) : sizeof(double),
                    &bufs));
    if (t == SC_F32) sce_bwd_f32(&s, c->in[0].data, per_elem, scale, &x, w, c->out[0].data, dt, bufs);
    else sce_bwd_f64(&s, c->in[0].data, per_elem, scale, &x, w, c->out[0].data, dt, bufs);
    free(bufs);
    return SC_OK;
}
