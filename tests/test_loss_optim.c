/* SoftmaxCrossEntropyLoss forward and its gradient op, SGDUpdate and AdamWUpdate on the CPU backend,
 * each against a reference written out here independently of the kernels:
 *   - the loss: a naive log-sum-exp per (n, d) in double, for [N, C], [N, C, D] and [N, C, H, W],
 *     with and without weights and ignore_index, every reduction, f32, f64, bf16 and f16 scores (the
 *     16-bit ones computed in f32: loss, dLoss and weights f32, log_prob and dScores rounded once),
 *     i32 and i64 labels;
 *   - the gradient op, which reads the scores: the closed form (softmax - onehot) * w * dLoss /
 *     denominator, and finite differences of the reference loss (f64; the graph-level rule is
 *     checked in test_grad_loss.c);
 *   - SGD (momentum, Nesterov, weight decay, grad_scale) and AdamW over 3 steps against the PyTorch
 *     formulas of torch.optim.SGD / AdamW written as plain loops.
 * Fails through the exit code.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "core/half.h"
#include "tests/check.h"


static uint64_t rng = 0x1234567887654321ULL;
static double urand(void) { /* xorshift64*, uniform in [0, 1) */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (double)((rng * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

static double get(const void *p, sc_dtype t, int64_t i) {
    if (t == SC_BF16) return sc_bf16_to_f32(((const uint16_t *)p)[i]);
    if (t == SC_F16) return sc_f16_to_f32(((const uint16_t *)p)[i]);
    return t == SC_F32 ? ((const float *)p)[i] : ((const double *)p)[i];
}
static void put(void *p, sc_dtype t, int64_t i, double v) {
    if (t == SC_BF16) ((uint16_t *)p)[i] = sc_f32_to_bf16((float)v);
    else if (t == SC_F16) ((uint16_t *)p)[i] = sc_f32_to_f16((float)v);
    else if (t == SC_F32) ((float *)p)[i] = (float)v;
    else ((double *)p)[i] = v;
}

static bool close_to(double got, double want, double rtol, double atol) {
    return fabs(got - want) <= atol + rtol * fabs(want) && !isnan(got);
}

/* ---- SoftmaxCrossEntropyLoss ---- */

typedef struct {
    const char *label;
    sc_dtype t, lt;
    int rank;
    int64_t dims[4];
    bool weights;
    bool ignore;
    int64_t ignore_index;
    sc_reduction red;
} sce_case;

typedef struct {
    int64_t N, C, D;
    double *x, *w;   /* x: N*C*D, w: C or NULL */
    int64_t *y;      /* N*D */
    bool ignore;
    int64_t ignore_index;
} sce_ref;

/* Naive reference: per (n, d) log-sum-exp, weighted NLL; returns the reduced loss and fills the
 * per-element loss and log_prob arrays. */
static double sce_reference(const sce_ref *r, sc_reduction red, double *elem, double *logp) {
    double total = 0, wsum = 0;
    for (int64_t n = 0; n < r->N; n++)
        for (int64_t d = 0; d < r->D; d++) {
            double m = -INFINITY;
            for (int64_t c = 0; c < r->C; c++) m = fmax(m, r->x[(n * r->C + c) * r->D + d]);
            double s = 0;
            for (int64_t c = 0; c < r->C; c++) s += exp(r->x[(n * r->C + c) * r->D + d] - m);
            double lse = m + log(s);
            for (int64_t c = 0; c < r->C; c++) logp[(n * r->C + c) * r->D + d] = r->x[(n * r->C + c) * r->D + d] - lse;
            int64_t y = r->y[n * r->D + d];
            double l = 0, wy = 0;
            if (!(r->ignore && y == r->ignore_index)) {
                wy = r->w ? r->w[y] : 1.0;
                l = -wy * logp[(n * r->C + y) * r->D + d];
            }
            elem[n * r->D + d] = l;
            total += l;
            wsum += wy;
        }
    return red == SC_REDUCTION_SUM ? total : red == SC_REDUCTION_MEAN ? total / wsum : 0;
}

static void run_sce_case(const sce_case *k) {
    int64_t N = k->dims[0], C = k->dims[1], D = 1;
    for (int i = 2; i < k->rank; i++) D *= k->dims[i];
    sce_ref r = {N, C, D, malloc(sizeof(double) * N * C * D), k->weights ? malloc(sizeof(double) * C) : NULL,
                 malloc(sizeof(int64_t) * N * D), k->ignore, k->ignore_index};
    size_t es = sc_dtype_size(k->t);
    sc_dtype ct = k->t == SC_F64 ? SC_F64 : SC_F32; /* loss, dLoss and weights */
    size_t cs = sc_dtype_size(ct);
    void *x = malloc(es * N * C * D), *w = malloc(cs * C), *labels = malloc(8 * N * D);
    for (int64_t i = 0; i < N * C * D; i++) {
        put(x, k->t, i, 6 * urand() - 3);
        r.x[i] = get(x, k->t, i);
    }
    if (r.w)
        for (int64_t c = 0; c < C; c++) {
            put(w, ct, c, 0.25 + urand());
            r.w[c] = get(w, ct, c);
        }
    for (int64_t i = 0; i < N * D; i++) {
        int64_t y = (int64_t)(urand() * C);
        if (k->ignore && i % 3 == 1) y = k->ignore_index; /* a third of the elements ignored */
        r.y[i] = y;
        if (k->lt == SC_I64) ((int64_t *)labels)[i] = y;
        else ((int32_t *)labels)[i] = (int32_t)y;
    }
    double *elem = malloc(sizeof(double) * N * D), *logp = malloc(sizeof(double) * N * C * D);
    double want = sce_reference(&r, k->red, elem, logp);

    sc_attrs a = {.sce = {k->red, k->ignore, k->ignore_index}};
    sc_node node = {.op = SC_OP_SOFTMAX_CROSS_ENTROPY_LOSS, .name = k->label, .n_in = 3, .n_out = 2, .attrs = &a};
    int64_t ldims[4] = {N};
    for (int i = 2; i < k->rank; i++) ldims[i - 1] = k->dims[i];
    sc_tensor in[3] = {{sc_desc_make(k->t, k->rank, k->dims), x}, {sc_desc_make(k->lt, k->rank - 1, ldims), labels},
                       {sc_desc_make(ct, 1, &C), k->weights ? w : NULL}};
    sc_desc loss_desc = k->red == SC_REDUCTION_NONE ? sc_desc_make(ct, k->rank - 1, ldims) : sc_desc_make(ct, 0, NULL);
    void *loss = malloc(cs * N * D), *lp = malloc(es * N * C * D);
    sc_tensor out[2] = {{loss_desc, loss}, {in[0].desc, lp}};
    sc_status st = cpu_run_node(&node, in, 3, out, 2);
    CHECK(!st, "%s: %s", k->label, st ? sc_status_message(st) : "");
    sc_status_free(st);
    /* 16-bit outputs are the f32 results rounded once: within half a unit in the last of 8 (bf16) or
     * 11 (f16) bits */
    double rtol = ct == SC_F64 ? 1e-12 : 2e-5, rtol_out = k->t == SC_BF16 ? 4e-3 : k->t == SC_F16 ? 6e-4 : rtol;
    if (!st) {
        if (k->red == SC_REDUCTION_NONE) {
            for (int64_t i = 0; i < N * D; i++)
                CHECK(close_to(get(loss, ct, i), elem[i], rtol, rtol), "%s: loss[%lld] %g want %g", k->label, (long long)i,
                      get(loss, ct, i), elem[i]);
        } else {
            CHECK(close_to(get(loss, ct, 0), want, rtol, rtol), "%s: loss %.9g want %.9g", k->label, get(loss, ct, 0),
                  want);
        }
        for (int64_t i = 0; i < N * C * D; i++)
            CHECK(close_to(get(lp, k->t, i), logp[i], rtol_out, rtol), "%s: log_prob[%lld] %g want %g", k->label,
                  (long long)i, get(lp, k->t, i), logp[i]);
    }

    /* The gradient op: closed form, and central differences of the reference loss (f64 only). */
    void *dl = malloc(cs * N * D), *dx = malloc(es * N * C * D);
    double *dlv = malloc(sizeof(double) * N * D);
    int64_t n_dl = k->red == SC_REDUCTION_NONE ? N * D : 1;
    for (int64_t i = 0; i < n_dl; i++) {
        put(dl, ct, i, 0.5 + urand());
        dlv[i] = get(dl, ct, i);
    }
    sc_node gnode = {.op = SC_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD, .name = k->label, .n_in = 4, .n_out = 1};
    gnode.attrs = node.attrs;
    sc_tensor gin[4] = {{loss_desc, dl}, in[0], in[1], in[2]};
    sc_tensor gout[1] = {{in[0].desc, dx}};
    st = cpu_run_node(&gnode, gin, 4, gout, 1);
    CHECK(!st, "%s grad: %s", k->label, st ? sc_status_message(st) : "");
    sc_status_free(st);
    double wsum = 0;
    for (int64_t i = 0; i < N * D; i++)
        if (!(k->ignore && r.y[i] == k->ignore_index)) wsum += r.w ? r.w[r.y[i]] : 1.0;
    for (int64_t n = 0; n < N && !st; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t d = 0; d < D; d++) {
                int64_t y = r.y[n * D + d], i = (n * C + c) * D + d;
                double want_g = 0;
                if (!(k->ignore && y == k->ignore_index)) {
                    double g = k->red == SC_REDUCTION_NONE ? dlv[n * D + d] : dlv[0];
                    if (k->red == SC_REDUCTION_MEAN) g /= wsum;
                    want_g = (exp(logp[i]) - (c == y)) * (r.w ? r.w[y] : 1.0) * g;
                }
                CHECK(close_to(get(dx, k->t, i), want_g, rtol_out, rtol), "%s: dScores[%lld] %g want %g", k->label,
                      (long long)i, get(dx, k->t, i), want_g);
                if (k->t != SC_F64) continue;
                /* d/dx of sum_e dLoss_e * loss_e by central differences of the reference */
                double keep = r.x[i], h = 1e-6, lo, hi;
                for (int s = 0; s < 2; s++) {
                    r.x[i] = keep + (s ? h : -h);
                    double red = sce_reference(&r, k->red, elem, logp);
                    double v = 0;
                    if (k->red == SC_REDUCTION_NONE)
                        for (int64_t e = 0; e < N * D; e++) v += dlv[e] * elem[e];
                    else v = dlv[0] * red;
                    if (s) hi = v;
                    else lo = v;
                }
                r.x[i] = keep;
                sce_reference(&r, k->red, elem, logp); /* restore logp for the closed form */
                double fd = (hi - lo) / (2 * h);
                CHECK(close_to(get(dx, k->t, i), fd, 1e-5, 1e-7), "%s: dScores[%lld] %g, finite differences %g", k->label,
                      (long long)i, get(dx, k->t, i), fd);
            }
    free(r.x), free(r.w), free(r.y), free(x), free(w), free(labels), free(elem), free(logp), free(loss), free(lp);
    free(dl), free(dx), free(dlv);
}

static void test_sce(void) {
    static const sc_reduction reds[3] = {SC_REDUCTION_MEAN, SC_REDUCTION_SUM, SC_REDUCTION_NONE};
    static const char *const red_names[3] = {"mean", "sum", "none"};
    static const sc_dtype types[4] = {SC_F32, SC_F64, SC_BF16, SC_F16};
    for (int t = 0; t < 4; t++)
        for (int ri = 0; ri < 3; ri++)
            for (int variant = 0; variant < 4; variant++) {
                char label[128];
                sce_case k = {label, types[t], variant % 2 ? SC_I32 : SC_I64, 0, {0}, variant >= 2,
                              variant == 1 || variant == 3, variant == 3 ? -100 : 2, reds[ri]};
                /* classes [N, C]; LM-sized rows; [N, C, D]; per-pixel [N, C, H, W] */
                static const int64_t shapes[4][5] = {{2, 5, 7}, {2, 3, 97}, {3, 2, 4, 5}, {4, 2, 3, 3, 4}};
                const int64_t *s = shapes[(variant + ri) % 4];
                k.rank = (int)s[0];
                for (int i = 0; i < k.rank; i++) k.dims[i] = s[1 + i];
                snprintf(label, sizeof label, "sce_%s_%s_rank%d_%s%s%s", sc_dtype_name(k.t), red_names[ri], k.rank,
                         sc_dtype_name(k.lt), k.weights ? "_weights" : "", k.ignore ? "_ignore" : "");
                run_sce_case(&k);
            }
}

/* A label outside [0, C) is a status naming the node and the index, not a crash. */
static void test_sce_bad_label(void) {
    float x[6] = {0};
    int64_t y[2] = {1, 3};
    float loss;
    sc_node node = {.op = SC_OP_SOFTMAX_CROSS_ENTROPY_LOSS, .name = "my_loss", .n_in = 2, .n_out = 1, .attrs = &sc_attrs_none};
    sc_tensor in[2] = {{sc_desc_make(SC_F32, 2, (const int64_t[]){2, 3}), x}, {sc_desc_make(SC_I64, 1, (const int64_t[]){2}), y}};
    sc_tensor out[1] = {{sc_desc_make(SC_F32, 0, NULL), &loss}};
    sc_status st = cpu_run_node(&node, in, 2, out, 1);
    CHECK(st && strstr(sc_status_message(st), "my_loss") && strstr(sc_status_message(st), "label 3") &&
              strstr(sc_status_message(st), "index 1"),
          "bad label: %s", st ? sc_status_message(st) : "no error");
    sc_status_free(st);
}

/* ---- optimizers ---- */

#define NP 37 /* odd, so vector remainders run too */

/* torch.optim.SGD step (dampening 0) on one element, in double. */
static void sgd_ref(double *w, double *m, double g, double lr, double gs, double mom, double wd, bool nesterov, int t) {
    g = g * gs + wd * *w;
    double d = g;
    if (mom != 0) {
        *m = t == 1 ? g : mom * *m + g; /* torch: buf = clone(g) on the first step */
        d = nesterov ? g + mom * *m : *m;
    }
    *w -= lr * d;
}

/* torch.optim.AdamW step on one element, in double. */
static void adamw_ref(double *w, double *m, double *v, double g, double lr, double gs, double b1, double b2, double eps,
                      double wd, int t) {
    g *= gs;
    *w *= 1 - lr * wd;
    *m = b1 * *m + (1 - b1) * g;
    *v = b2 * *v + (1 - b2) * g * g;
    double mhat = *m / (1 - pow(b1, t)), vhat = *v / (1 - pow(b2, t));
    *w -= lr * mhat / (sqrt(vhat) + eps);
}

/* Hyperparameters are decimals (double) as in torch; the attributes hold them as f32. */
static void test_sgd(sc_dtype t, double mom, double wd, bool nesterov, bool use_scale) {
    size_t es = sc_dtype_size(t);
    void *w = malloc(es * NP), *g = malloc(es * NP), *m = calloc(NP, es);
    double rw[NP], rm[NP] = {0};
    for (int i = 0; i < NP; i++) {
        put(w, t, i, 2 * urand() - 1);
        rw[i] = get(w, t, i);
    }
    const float lr = 0.1f, gs = 0.625f;
    sc_attrs a = {.sgd = {(float)mom, (float)wd, nesterov}};
    sc_node node = {.op = SC_OP_SGD_UPDATE, .name = "sgd", .n_in = 5, .n_out = 2, .attrs = &a};
    sc_desc d = sc_desc_make(t, 1, (const int64_t[]){NP}), sd = sc_desc_make(SC_F32, 0, NULL);
    for (int step = 1; step <= 3; step++) {
        for (int i = 0; i < NP; i++) put(g, t, i, 2 * urand() - 1);
        for (int i = 0; i < NP; i++)
            sgd_ref(&rw[i], &rm[i], get(g, t, i), 0.1, use_scale ? gs : 1.0, mom, wd, nesterov, step);
        sc_tensor in[5] = {{d, w}, {d, g}, {d, mom != 0 ? m : NULL}, {sd, (void *)&lr}, {sd, use_scale ? (void *)&gs : NULL}};
        sc_tensor out[2] = {{d, w}, {d, mom != 0 ? m : NULL}};
        sc_status st = cpu_run_node(&node, in, 5, out, 2);
        CHECK(!st, "sgd: %s", st ? sc_status_message(st) : "");
        sc_status_free(st);
    }
    double tol = t == SC_F32 ? 1e-5 : 1e-13;
    for (int i = 0; i < NP; i++) {
        CHECK(close_to(get(w, t, i), rw[i], tol, tol), "sgd %s mom %g wd %g nesterov %d scale %d: w[%d] %.9g want %.9g",
              sc_dtype_name(t), mom, wd, nesterov, use_scale, i, get(w, t, i), rw[i]);
        if (mom != 0) CHECK(close_to(get(m, t, i), rm[i], tol, tol), "sgd momentum buffer[%d] %g want %g", i, get(m, t, i), rm[i]);
    }
    free(w), free(g), free(m);
}

static void test_adamw(sc_dtype t, double wd, bool use_scale) {
    size_t es = sc_dtype_size(t);
    void *w = malloc(es * NP), *g = malloc(es * NP), *m = calloc(NP, es), *v = calloc(NP, es);
    double rw[NP], rm[NP] = {0}, rv[NP] = {0};
    for (int i = 0; i < NP; i++) {
        put(w, t, i, 2 * urand() - 1);
        rw[i] = get(w, t, i);
    }
    const float lr = 1e-2f, gs = 0.5f;
    sc_attrs a = {.adamw = {0.9f, 0.999f, 1e-8f, (float)wd}};
    sc_node node = {.op = SC_OP_ADAMW_UPDATE, .name = "adamw", .n_in = 7, .n_out = 3, .attrs = &a};
    sc_desc d = sc_desc_make(t, 1, (const int64_t[]){NP}), sd = sc_desc_make(SC_F32, 0, NULL);
    for (int64_t step = 1; step <= 3; step++) {
        for (int i = 0; i < NP; i++) put(g, t, i, (2 * urand() - 1) * (i % 5 ? 1 : 1e-3));
        for (int i = 0; i < NP; i++)
            adamw_ref(&rw[i], &rm[i], &rv[i], get(g, t, i), 0.01, use_scale ? gs : 1.0, 0.9, 0.999, 1e-8, wd, (int)step);
        sc_tensor in[7] = {{d, w}, {d, g}, {d, m}, {d, v}, {sd, (void *)&lr}, {sc_desc_make(SC_I64, 0, NULL), &step},
                           {sd, use_scale ? (void *)&gs : NULL}};
        sc_tensor out[3] = {{d, w}, {d, m}, {d, v}};
        sc_status st = cpu_run_node(&node, in, 7, out, 3);
        CHECK(!st, "adamw: %s", st ? sc_status_message(st) : "");
        sc_status_free(st);
    }
    double tol = t == SC_F32 ? 2e-5 : 1e-12;
    for (int i = 0; i < NP; i++) {
        CHECK(close_to(get(w, t, i), rw[i], tol, tol), "adamw %s wd %g scale %d: w[%d] %.9g want %.9g", sc_dtype_name(t), wd,
              use_scale, i, get(w, t, i), rw[i]);
        CHECK(close_to(get(m, t, i), rm[i], tol, t == SC_F32 ? 1e-7 : 1e-15), "adamw exp_avg[%d] %g want %g", i, get(m, t, i), rm[i]);
        CHECK(close_to(get(v, t, i), rv[i], tol, t == SC_F32 ? 1e-9 : 1e-15), "adamw exp_avg_sq[%d] %g want %g", i, get(v, t, i), rv[i]);
    }
    free(w), free(g), free(m), free(v);
}

int main(void) {
    test_sce();
    test_sce_bad_label();
    for (int t = 0; t < 2; t++) {
        sc_dtype dt = t ? SC_F64 : SC_F32;
        test_sgd(dt, 0.0, 0.0, false, false);
        test_sgd(dt, 0.0, 0.01, false, true);
        test_sgd(dt, 0.9, 0.0, false, false);
        test_sgd(dt, 0.9, 1e-4, true, true);
        test_sgd(dt, 0.5, 0.05, false, true);
        test_adamw(dt, 0.0, false);
        test_adamw(dt, 0.01, true);
    }
    printf("%s (%d failures)\n", failures ? "FAILED" : "ok", failures);
    return failures ? 1 : 0;
}
