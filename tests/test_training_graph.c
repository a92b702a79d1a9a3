/* autodiff_build_training end to end on small graphs built here in C, run with sc_forward_cpu:
 *   - an MLP (Gemm-Relu-Gemm, class logits [N, C]) with plain SGD and keep_grads: the step-0 loss
 *     and every parameter gradient against a hand-written forward/backward in double, the update
 *     w - lr * g, and the loss going down over 5 steps;
 *   - SGD with momentum and Nesterov and frozen parameters (--freeze): frozen ones stay bit-identical,
 *     the others change, and only the trainable ones get gradients;
 *   - AdamW with global-norm clipping: one step against torch's formulas from the reference grads;
 *   - the loss heads: MSE (by opt->loss), language-model logits [B, T, V] with next-token labels and
 *     ignore_index, per-pixel logits [N, C, H, W]: loss against references written here;
 *   - BatchNormalization and Dropout switched to training mode: running statistics as graph outputs
 *     and writebacks (checked against batch statistics computed here), BN statistics not trained,
 *     Dropout's training_mode constant and mask output;
 *   - errors: a bad freeze regex, a label outside [0, C).
 * Fails through the exit code.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "backends/cpu/cpu_rng.h"
#include "tests/ref_executor.h"
#include "graph/passes.h"
#include "graph/shape.h"
#include "tests/check.h"


static bool close_to(double got, double want, double rtol, double atol) {
    return fabs(got - want) <= atol + rtol * fabs(want) && !isnan(got);
}

static uint64_t rng = 42;
static double urand(void) { /* xorshift64*, uniform in [0, 1) */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (double)((rng * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

/* ---- building graphs by hand ---- */

static int add_param(sc_graph *g, const char *name, int rank, const int64_t *dims, double scale) {
    sc_status st = SC_OK;
    sc_desc d = sc_desc_make(SC_F32, rank, dims);
    int v = graph_add_value(g, name, SC_VALUE_PARAM, &d, &st);
    SC_ASSERT(v >= 0 && !graph_alloc_data(g, v));
    float *p = g->values[v].data;
    for (int64_t i = 0; i < sc_desc_numel(&d); i++) p[i] = (float)(scale * (2 * urand() - 1));
    return v;
}

static int add_input(sc_graph *g, const char *name, int rank, const int64_t *dims) {
    sc_status st = SC_OK;
    sc_desc d = sc_desc_make(SC_F32, rank, dims);
    int v = graph_add_value(g, name, SC_VALUE_INPUT, &d, &st);
    SC_ASSERT(v >= 0);
    int *in = sc_arena_alloc_array(&g->arena, (size_t)g->n_inputs + 1, sizeof(int));
    if (g->n_inputs) memcpy(in, g->inputs, sizeof(int) * (size_t)g->n_inputs);
    in[g->n_inputs++] = v;
    g->inputs = in;
    return v;
}

static int add_node(sc_graph *g, sc_op op, const sc_attrs *a, const int *in, int n_in, const char *out_name) {
    sc_status st = SC_OK;
    int v = graph_add_value(g, out_name, SC_VALUE_ACT, NULL, &st);
    SC_ASSERT(v >= 0);
    int n = graph_add_node(g, op, out_name, in, n_in, &v, 1, &st);
    SC_ASSERT(n >= 0);
    if (a) SC_ASSERT(!graph_node_set_attrs(g, &g->nodes[n], a));
    st = sc_shape_fns[op](g, &g->nodes[n]);
    if (st) printf("shape: %s\n", sc_status_message(st));
    SC_ASSERT(!st);
    return v;
}

static void set_output(sc_graph *g, int v) {
    g->outputs = sc_arena_alloc_array(&g->arena, 1, sizeof(int));
    g->outputs[0] = v;
    g->n_outputs = 1;
    g->values[v].is_output = true;
}

/* ---- the MLP: logits = Gemm(Relu(Gemm(x, W1, b1)), W2, b2), transB = 1 ---- */

enum { NB = 8, NI = 4, NH = 16, NC = 3 };

typedef struct {
    sc_graph g;
    int x, w1, b1, w2, b2, logits;
    float xs[NB * NI];
    int64_t y[NB];
} mlp;

static void mlp_build(mlp *m) {
    sc_graph *g = &m->g;
    graph_init(g);
    rng = 42;
    m->x = add_input(g, "x", 2, (const int64_t[]){NB, NI});
    m->w1 = add_param(g, "W1", 2, (const int64_t[]){NH, NI}, 0.5);
    m->b1 = add_param(g, "b1", 1, (const int64_t[]){NH}, 0.1);
    m->w2 = add_param(g, "W2", 2, (const int64_t[]){NC, NH}, 0.5);
    m->b2 = add_param(g, "b2", 1, (const int64_t[]){NC}, 0.1);
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.gemm = (sc_gemm_attrs){.alpha = 1.0f, .beta = 1.0f, .trans_b = true};
    int h = add_node(g, SC_OP_GEMM, &a, (const int[]){m->x, m->w1, m->b1}, 3, "h");
    int r = add_node(g, SC_OP_RELU, NULL, (const int[]){h}, 1, "r");
    m->logits = add_node(g, SC_OP_GEMM, &a, (const int[]){r, m->w2, m->b2}, 3, "logits");
    set_output(g, m->logits);
    for (int i = 0; i < NB * NI; i++) m->xs[i] = (float)(2 * urand() - 1);
    for (int i = 0; i < NB; i++) m->y[i] = (int64_t)(urand() * NC);
}

typedef struct {
    double loss;
    double dw1[NH * NI], db1[NH], dw2[NC * NH], db2[NC];
} mlp_ref;

/* Forward and backward by hand in double: mean softmax cross-entropy over the batch. */
static void mlp_reference(const mlp *m, mlp_ref *r) {
    const float *w1 = m->g.values[m->w1].data, *b1 = m->g.values[m->b1].data;
    const float *w2 = m->g.values[m->w2].data, *b2 = m->g.values[m->b2].data;
    memset(r, 0, sizeof *r);
    for (int n = 0; n < NB; n++) {
        double h[NH], z[NC], dz[NC], dr[NH] = {0};
        for (int j = 0; j < NH; j++) {
            h[j] = b1[j];
            for (int i = 0; i < NI; i++) h[j] += (double)m->xs[n * NI + i] * w1[j * NI + i];
        }
        double zmax = -INFINITY, se = 0;
        for (int k = 0; k < NC; k++) {
            z[k] = b2[k];
            for (int j = 0; j < NH; j++) z[k] += fmax(h[j], 0) * w2[k * NH + j];
            zmax = fmax(zmax, z[k]);
        }
        for (int k = 0; k < NC; k++) se += exp(z[k] - zmax);
        r->loss += (zmax + log(se) - z[m->y[n]]) / NB;
        for (int k = 0; k < NC; k++) dz[k] = (exp(z[k] - zmax) / se - (k == m->y[n])) / NB;
        for (int k = 0; k < NC; k++) {
            r->db2[k] += dz[k];
            for (int j = 0; j < NH; j++) {
                r->dw2[k * NH + j] += dz[k] * fmax(h[j], 0);
                dr[j] += dz[k] * w2[k * NH + j];
            }
        }
        for (int j = 0; j < NH; j++) {
            double dh = h[j] > 0 ? dr[j] : 0;
            r->db1[j] += dh;
            for (int i = 0; i < NI; i++) r->dw1[j * NI + i] += dh * m->xs[n * NI + i];
        }
    }
}

/* Feeds x / labels / lr / step in g->inputs order and runs one step; returns the loss. Outputs
 * are left in outs (caller frees). */
static sc_status run_step(sc_graph *g, const sc_training_graph *tg, int data_input, const void *data, const void *labels,
                          float lr, int64_t step, sc_tensor *outs, double *loss) {
    sc_tensor feeds[8];
    SC_ASSERT(g->n_inputs <= 8);
    for (int i = 0; i < g->n_inputs; i++) {
        int v = g->inputs[i];
        feeds[i].desc = g->values[v].desc;
        feeds[i].data = v == tg->labels ? (void *)labels : v == tg->lr ? (void *)&lr : v == tg->step ? (void *)&step
                        : v == data_input                                                     ? (void *)data
                                                                                              : NULL;
    }
    SC_TRY(sc_forward_cpu(g, feeds, outs));
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == tg->loss) *loss = *(const float *)outs[i].data;
    return SC_OK;
}

static void outs_free(const sc_graph *g, sc_tensor *outs) {
    for (int i = 0; i < g->n_outputs; i++) sc_tensor_free_data(&outs[i]);
}

static const float *output_of(const sc_graph *g, sc_tensor *outs, int v) {
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == v) return outs[i].data;
    return NULL;
}

static void check_array(const char *what, const float *got, const double *want, int n, double rtol, double atol) {
    for (int i = 0; i < n; i++)
        if (!close_to(got[i], want[i], rtol, atol)) {
            CHECK(false, "%s[%d] = %.8g, want %.8g", what, i, got[i], want[i]);
            return;
        }
}

static int grad_of(const sc_training_graph *tg, int param) {
    for (int i = 0; i < tg->n_params; i++)
        if (tg->params[i] == param) return tg->grads[i];
    return -1;
}

/* Plain SGD, keep_grads: loss and gradients at step 0 against the reference, the update, descent. */
static void test_mlp_sgd(void) {
    mlp m;
    mlp_build(&m);
    mlp_ref ref;
    mlp_reference(&m, &ref);
    float w1_before[NH * NI];
    memcpy(w1_before, m.g.values[m.w1].data, sizeof w1_before);
    sc_train_options o;
    sc_train_options_default(&o);
    o.keep_grads = true;
    sc_training_graph tg;
    sc_status st = autodiff_build_training(&m.g, &o, &tg);
    CHECK(!st, "build: %s", st ? sc_status_message(st) : "");
    if (st) {
        sc_status_free(st);
        graph_free(&m.g);
        return;
    }
    CHECK(tg.n_params == 4, "4 trainable parameters, got %d", tg.n_params);
    CHECK(strcmp(m.g.values[tg.labels].name, "labels") == 0, "labels input named 'labels'");
    sc_tensor outs[16];
    double losses[5];
    const float lr = 0.1f;
    for (int step = 1; step <= 5; step++) {
        st = run_step(&m.g, &tg, m.x, m.xs, m.y, lr, step, outs, &losses[step - 1]);
        CHECK(!st, "step %d: %s", step, st ? sc_status_message(st) : "");
        if (st) break;
        if (step == 1) {
            CHECK(close_to(losses[0], ref.loss, 1e-5, 1e-6), "loss %.8g, want %.8g", losses[0], ref.loss);
            const float *g1 = output_of(&m.g, outs, grad_of(&tg, m.w1)), *gb1 = output_of(&m.g, outs, grad_of(&tg, m.b1));
            const float *g2 = output_of(&m.g, outs, grad_of(&tg, m.w2)), *gb2 = output_of(&m.g, outs, grad_of(&tg, m.b2));
            CHECK(g1 && gb1 && g2 && gb2, "keep_grads: every gradient is a graph output");
            if (g1 && gb1 && g2 && gb2) {
                check_array("dW1", g1, ref.dw1, NH * NI, 1e-4, 1e-6);
                check_array("db1", gb1, ref.db1, NH, 1e-4, 1e-6);
                check_array("dW2", g2, ref.dw2, NC * NH, 1e-4, 1e-6);
                check_array("db2", gb2, ref.db2, NC, 1e-4, 1e-6);
            }
            double w1_want[NH * NI];
            for (int i = 0; i < NH * NI; i++) w1_want[i] = w1_before[i] - 0.1 * ref.dw1[i];
            check_array("W1 after one SGD step", m.g.values[m.w1].data, w1_want, NH * NI, 1e-5, 1e-6);
        }
        outs_free(&m.g, outs);
    }
    if (!st)
        for (int i = 1; i < 5; i++)
            CHECK(losses[i] < losses[i - 1], "loss went up at step %d: %.6f -> %.6f", i + 1, losses[i - 1], losses[i]);
    sc_status_free(st);
    graph_free(&m.g);
}

/* SGD with momentum and Nesterov, first layer frozen. */
static void test_mlp_frozen(void) {
    mlp m;
    mlp_build(&m);
    float w1[NH * NI], b1[NH], w2[NC * NH];
    memcpy(w1, m.g.values[m.w1].data, sizeof w1);
    memcpy(b1, m.g.values[m.b1].data, sizeof b1);
    memcpy(w2, m.g.values[m.w2].data, sizeof w2);
    sc_train_options o;
    sc_train_options_default(&o);
    o.momentum = 0.9f;
    o.nesterov = true;
    o.weight_decay = 1e-4f;
    o.freeze_regex = "^(W1|b1)$";
    sc_training_graph tg;
    sc_status st = autodiff_build_training(&m.g, &o, &tg);
    CHECK(!st, "build: %s", st ? sc_status_message(st) : "");
    if (!st) {
        CHECK(tg.n_params == 2 && grad_of(&tg, m.w1) < 0 && grad_of(&tg, m.b1) < 0 && grad_of(&tg, m.w2) >= 0,
              "frozen parameters get no gradient (%d trainable)", tg.n_params);
        CHECK(tg.n_states == 2, "one momentum buffer per trainable parameter, got %d", tg.n_states);
        sc_tensor outs[16];
        double first = 0, loss = 0;
        for (int step = 1; step <= 5 && !st; step++) {
            st = run_step(&m.g, &tg, m.x, m.xs, m.y, 0.05f, step, outs, &loss);
            CHECK(!st, "step %d: %s", step, st ? sc_status_message(st) : "");
            if (!st) outs_free(&m.g, outs);
            if (step == 1) first = loss;
        }
        CHECK(loss < first, "loss did not go down with the first layer frozen: %.6f -> %.6f", first, loss);
        CHECK(memcmp(w1, m.g.values[m.w1].data, sizeof w1) == 0 && memcmp(b1, m.g.values[m.b1].data, sizeof b1) == 0,
              "frozen parameters changed");
        CHECK(memcmp(w2, m.g.values[m.w2].data, sizeof w2) != 0, "trainable W2 did not change");
    }
    sc_status_free(st);
    graph_free(&m.g);
}

/* AdamW with clipping: one step against torch's formulas applied to the reference gradients. */
static void test_mlp_adamw_clip(void) {
    mlp m;
    mlp_build(&m);
    mlp_ref ref;
    mlp_reference(&m, &ref);
    double norm2 = 0;
    for (int i = 0; i < NH * NI; i++) norm2 += ref.dw1[i] * ref.dw1[i];
    for (int i = 0; i < NH; i++) norm2 += ref.db1[i] * ref.db1[i];
    for (int i = 0; i < NC * NH; i++) norm2 += ref.dw2[i] * ref.dw2[i];
    for (int i = 0; i < NC; i++) norm2 += ref.db2[i] * ref.db2[i];
    const double clip = 0.05, lr = 0.01, wd = 0.1;
    double scale = fmin(1.0, clip / (sqrt(norm2) + 1e-6));
    CHECK(scale < 0.9, "the test needs clipping to be active (scale %g)", scale);
    float w2[NC * NH];
    memcpy(w2, m.g.values[m.w2].data, sizeof w2);
    sc_train_options o;
    sc_train_options_default(&o);
    o.optim = SC_OPTIM_ADAMW;
    o.weight_decay = (float)wd;
    o.clip_norm = (float)clip;
    sc_training_graph tg;
    sc_status st = autodiff_build_training(&m.g, &o, &tg);
    CHECK(!st, "build: %s", st ? sc_status_message(st) : "");
    if (!st) {
        CHECK(tg.n_states == 8, "exp_avg and exp_avg_sq per parameter, got %d states", tg.n_states);
        sc_tensor outs[16];
        double loss;
        st = run_step(&m.g, &tg, m.x, m.xs, m.y, (float)lr, 1, outs, &loss);
        CHECK(!st, "step: %s", st ? sc_status_message(st) : "");
        if (!st) {
            outs_free(&m.g, outs);
            double want[NC * NH];
            for (int i = 0; i < NC * NH; i++) {
                double g = ref.dw2[i] * scale, mm = (1 - 0.9) * g, vv = (1 - 0.999) * g * g;
                double mhat = mm / (1 - 0.9), vhat = vv / (1 - 0.999);
                want[i] = w2[i] * (1 - lr * wd) - lr * mhat / (sqrt(vhat) + 1e-8);
            }
            check_array("W2 after AdamW with clipping", m.g.values[m.w2].data, want, NC * NH, 1e-4, 2e-6);
        }
    }
    sc_status_free(st);
    graph_free(&m.g);
}

/* MSE chosen by opt->loss on the MLP's [N, C] output: loss and db2 = 2 (z - t) / numel summed. */
static void test_mse_head(void) {
    mlp m;
    mlp_build(&m);
    float target[NB * NC];
    for (int i = 0; i < NB * NC; i++) target[i] = (float)(2 * urand() - 1);
    /* reference logits */
    const float *w1 = m.g.values[m.w1].data, *b1 = m.g.values[m.b1].data, *w2 = m.g.values[m.w2].data,
                *b2 = m.g.values[m.b2].data;
    double loss_ref = 0, db2[NC] = {0};
    for (int n = 0; n < NB; n++)
        for (int k = 0; k < NC; k++) {
            double z = b2[k];
            for (int j = 0; j < NH; j++) {
                double h = b1[j];
                for (int i = 0; i < NI; i++) h += (double)m.xs[n * NI + i] * w1[j * NI + i];
                z += fmax(h, 0) * w2[k * NH + j];
            }
            double d = z - target[n * NC + k];
            loss_ref += d * d / (NB * NC);
            db2[k] += 2 * d / (NB * NC);
        }
    sc_train_options o;
    sc_train_options_default(&o);
    o.loss = SC_LOSS_MSE;
    o.keep_grads = true;
    sc_training_graph tg;
    sc_status st = autodiff_build_training(&m.g, &o, &tg);
    CHECK(!st, "build: %s", st ? sc_status_message(st) : "");
    if (!st) {
        CHECK(m.g.values[tg.labels].desc.dtype == SC_F32 && m.g.values[tg.labels].desc.rank == 2, "MSE target is f32 [N, C]");
        sc_tensor outs[16];
        double loss;
        st = run_step(&m.g, &tg, m.x, m.xs, target, 0.1f, 1, outs, &loss);
        CHECK(!st, "step: %s", st ? sc_status_message(st) : "");
        if (!st) {
            CHECK(close_to(loss, loss_ref, 1e-5, 1e-7), "MSE loss %.8g, want %.8g", loss, loss_ref);
            const float *g = output_of(&m.g, outs, grad_of(&tg, m.b2));
            CHECK(g != NULL, "db2 kept");
            if (g) check_array("MSE db2", g, db2, NC, 1e-4, 1e-6);
            outs_free(&m.g, outs);
        }
    }
    sc_status_free(st);
    graph_free(&m.g);
}

/* LM head: x [B, T, D] MatMul W [D, V] -> logits [B, T, V], labels [B, T] with -100 ignored. */
static void test_lm_head(void) {
    enum { B = 2, T = 3, DD = 4, V = 5 };
    sc_graph g;
    graph_init(&g);
    rng = 7;
    int x = add_input(&g, "tokens_emb", 3, (const int64_t[]){B, T, DD});
    int w = add_param(&g, "W", 2, (const int64_t[]){DD, V}, 1.0);
    int logits = add_node(&g, SC_OP_MATMUL, NULL, (const int[]){x, w}, 2, "logits");
    set_output(&g, logits);
    float xs[B * T * DD];
    for (int i = 0; i < B * T * DD; i++) xs[i] = (float)(2 * urand() - 1);
    int64_t y[B * T] = {1, 4, -100, 0, 2, 3};
    const float *wd = g.values[w].data;
    double loss_ref = 0, dw[DD * V] = {0};
    int count = 0;
    for (int r = 0; r < B * T; r++) count += y[r] != -100;
    for (int r = 0; r < B * T; r++) {
        if (y[r] == -100) continue;
        double z[V], mx = -INFINITY, se = 0;
        for (int v = 0; v < V; v++) {
            z[v] = 0;
            for (int d = 0; d < DD; d++) z[v] += (double)xs[r * DD + d] * wd[d * V + v];
            mx = fmax(mx, z[v]);
        }
        for (int v = 0; v < V; v++) se += exp(z[v] - mx);
        loss_ref += (mx + log(se) - z[y[r]]) / count;
        for (int v = 0; v < V; v++)
            for (int d = 0; d < DD; d++) dw[d * V + v] += xs[r * DD + d] * (exp(z[v] - mx) / se - (v == y[r])) / count;
    }
    sc_train_options o;
    sc_train_options_default(&o);
    o.keep_grads = true;
    sc_training_graph tg;
    sc_status st = autodiff_build_training(&g, &o, &tg);
    CHECK(!st, "LM build: %s", st ? sc_status_message(st) : "");
    if (!st) {
        const sc_desc *ld = &g.values[tg.labels].desc;
        CHECK(ld->dtype == SC_I64 && ld->rank == 2 && ld->dims[0] == B && ld->dims[1] == T, "LM labels are i64 [B, T]");
        sc_tensor outs[16];
        double loss;
        st = run_step(&g, &tg, x, xs, y, 0.1f, 1, outs, &loss);
        CHECK(!st, "LM step: %s", st ? sc_status_message(st) : "");
        if (!st) {
            CHECK(close_to(loss, loss_ref, 1e-5, 1e-7), "LM loss %.8g, want %.8g", loss, loss_ref);
            const float *gw = output_of(&g, outs, grad_of(&tg, w));
            CHECK(gw != NULL, "dW kept");
            if (gw) check_array("LM dW", gw, dw, DD * V, 1e-4, 1e-6);
            outs_free(&g, outs);
        }
    }
    sc_status_free(st);
    graph_free(&g);
}

/* A tied embedding: h = Gather(E, tokens), logits = h @ Transpose(E). dE has two parts (the head's
 * and the lookup's) against a double reference, and the graph is the memory-lean one: the Gather's
 * gradient adds its rows into the head's (GatherGrad with a base, no Add of two [V, D] tensors), the
 * head's gradient is one [V, D] Gemm (no Transpose in the backward), made just before the GatherGrad
 * that adds into it (sunk: graph_node_sinks), and the head's dX reads E, not the transposed copy.
 * fold: the MatMul of Transpose(E) is first rewritten to a Gemm with transB (as graph_prepare does).
 * blocks (with fold): E trains as row blocks (autodiff/param_blocks.c; 11 + 1 rows): E becomes a
 * constant nothing reads, each block gets its own sunk head Gemm and based GatherGrad, and the blocks'
 * gradients stacked are dE. */
static void test_tied_embedding(bool fold, bool blocks) {
    enum { B = 1, T = 3, DD = 16, V = 12 }; /* [V, D] > 2 ([T, V] + [T, D]): the head's dE sinks */
    sc_graph g;
    graph_init(&g);
    rng = 11;
    sc_status st = SC_OK;
    sc_desc td = sc_desc_make(SC_I64, 2, (const int64_t[]){B, T});
    int tok = graph_add_value(&g, "tokens", SC_VALUE_INPUT, &td, &st);
    g.inputs = sc_arena_alloc_array(&g.arena, 1, sizeof(int));
    g.inputs[0] = tok;
    g.n_inputs = 1;
    int e = add_param(&g, "E", 2, (const int64_t[]){V, DD}, 1.0);
    int h = add_node(&g, SC_OP_GATHER, NULL, (const int[]){e, tok}, 2, "h");
    sc_attrs tr = {0};
    tr.transpose = (sc_transpose_attrs){.n_perm = 2, .perm = {1, 0}};
    int et = add_node(&g, SC_OP_TRANSPOSE, &tr, (const int[]){e}, 1, "E_t");
    int logits = add_node(&g, SC_OP_MATMUL, NULL, (const int[]){h, et}, 2, "logits");
    set_output(&g, logits);
    int64_t toks[B * T] = {0, 3, 11}, y[B * T] = {3, 9, 5};
    if (fold) { /* as graph_prepare does: logits = Gemm(h rows, E, transB) */
        int rewritten = 0;
        st = graph_fold_transpose_into_gemm(&g, &rewritten);
        if (!st) st = graph_eliminate_dead_code(&g);
        CHECK(!st && rewritten == 1, "folding the transposed head: %d rewritten: %s", rewritten, st ? sc_status_message(st) : "");
        for (int i = 0; i < g.n_nodes; i++)
            CHECK(g.nodes[i].op != SC_OP_TRANSPOSE && g.nodes[i].op != SC_OP_MATMUL, "node '%s' (%s) left after folding",
                  g.nodes[i].name, sc_op_name(g.nodes[i].op));
    }
    const float *E = g.values[e].data;
    double loss_ref = 0, dE[V * DD] = {0};
    for (int r = 0; r < B * T; r++) {
        double z[V], mx = -INFINITY, se = 0, dz[V];
        for (int v = 0; v < V; v++) {
            z[v] = 0;
            for (int d = 0; d < DD; d++) z[v] += (double)E[toks[r] * DD + d] * E[v * DD + d];
            mx = fmax(mx, z[v]);
        }
        for (int v = 0; v < V; v++) se += exp(z[v] - mx);
        loss_ref += (mx + log(se) - z[y[r]]) / (B * T);
        for (int v = 0; v < V; v++) dz[v] = (exp(z[v] - mx) / se - (v == y[r])) / (B * T);
        for (int v = 0; v < V; v++)
            for (int d = 0; d < DD; d++) {
                dE[v * DD + d] += dz[v] * E[toks[r] * DD + d];       /* the head: E as the weight */
                dE[toks[r] * DD + d] += dz[v] * E[v * DD + d];       /* the lookup: E as the table */
            }
    }
    sc_train_options o;
    sc_train_options_default(&o);
    o.keep_grads = true;
    o.param_block = blocks ? 64 : -1;
    sc_training_graph tg;
    st = autodiff_build_training(&g, &o, &tg);
    CHECK(!st, "tied build: %s", st ? sc_status_message(st) : "");
    int n_blocks = 0, want = blocks ? 2 : 1;
    for (int i = 0; !st && tg.block_of && i < tg.n_params; i++) n_blocks += tg.block_of[i] == e;
    CHECK(st || n_blocks == (blocks ? 2 : 0), "tied (blocks %d): %d row blocks of E, want %d", blocks, n_blocks,
          blocks ? 2 : 0);
    CHECK(st || !blocks || (g.values[e].kind == SC_VALUE_CONST && g.values[e].n_consumers == 0),
          "split E must be a constant nothing reads (kind %d, %d readers)", g.values[e].kind, g.values[e].n_consumers);
    if (!st) {
        int based = 0, transposes = 0, adds_of_vd = 0, reads_et = 0, sunk = 0;
        for (int i = tg.n_forward_nodes; i < g.n_nodes; i++) {
            const sc_node *n = &g.nodes[i];
            bool b = n->op == SC_OP_GATHER_GRAD && n->n_in > 3 && n->in[3] >= 0 && n->in[2] < 0; /* no table read */
            based += b;
            sunk += b && g.values[n->in[3]].producer == i - 1; /* the head's dE made just before it */
            transposes += n->op == SC_OP_TRANSPOSE;
            adds_of_vd += n->op == SC_OP_ADD && sc_desc_same_shape(&g.values[n->out[0]].desc, &g.values[e].desc);
            for (int k = 0; k < n->n_in; k++) reads_et += n->in[k] == et;
        }
        /* blocks: the 1-row block's dE (64 bytes from 204) is no larger than its inputs and is not sunk */
        CHECK(based == want && transposes == 0 && adds_of_vd == 0 && reads_et == 0 && sunk == 1,
              "tied backward (fold %d, blocks %d): %d GatherGrad with a base and no data input (want %d), %d Transpose (0), "
              "%d [V, D] Add (0), %d reads of E_t (0), %d bases made just before (1)",
              fold, blocks, based, want, transposes, adds_of_vd, reads_et, sunk);
        sc_tensor outs[16];
        double loss;
        st = run_step(&g, &tg, tok, toks, y, 0.1f, 1, outs, &loss);
        CHECK(!st, "tied step: %s", st ? sc_status_message(st) : "");
        if (!st) {
            CHECK(close_to(loss, loss_ref, 1e-5, 1e-7), "tied loss %.8g, want %.8g", loss, loss_ref);
            float stacked[V * DD];
            const float *ge = blocks ? NULL : output_of(&g, outs, grad_of(&tg, e));
            for (int i = 0, row = 0; blocks && i < tg.n_params; i++) {
                const float *gb = tg.block_of[i] == e ? output_of(&g, outs, tg.grads[i]) : NULL;
                int64_t rows = g.values[tg.params[i]].desc.dims[0];
                if (!gb) continue;
                CHECK((const float *)g.values[tg.params[i]].data == E + row * DD, "block %d does not view E's rows from %d", i, row);
                memcpy(stacked + row * DD, gb, sizeof(float) * (size_t)(rows * DD));
                ge = stacked, row += (int)rows;
            }
            CHECK(ge != NULL, "dE kept");
            if (ge) check_array("tied dE", ge, dE, V * DD, 1e-4, 1e-6);
            outs_free(&g, outs);
        }
    }
    sc_status_free(st);
    graph_free(&g);
}

/* Per-pixel head: image [N, C, H, W] * P [1, C, 1, 1] -> logits of the image's H, W. */
static void test_pixel_head(void) {
    enum { N = 2, C = 3, H = 2, W = 3 };
    sc_graph g;
    graph_init(&g);
    rng = 9;
    int img = add_input(&g, "image", 4, (const int64_t[]){N, C, H, W});
    int p = add_param(&g, "P", 4, (const int64_t[]){1, C, 1, 1}, 2.0);
    int logits = add_node(&g, SC_OP_MUL, NULL, (const int[]){img, p}, 2, "logits");
    set_output(&g, logits);
    float xs[N * C * H * W];
    for (int i = 0; i < N * C * H * W; i++) xs[i] = (float)(2 * urand() - 1);
    int64_t y[N * H * W] = {0, 1, 2, -100, 1, 0, 2, 2, -100, 0, 1, 1};
    const float *pd = g.values[p].data;
    double loss_ref = 0;
    int count = 0;
    for (int i = 0; i < N * H * W; i++) count += y[i] != -100;
    for (int n = 0; n < N; n++)
        for (int s = 0; s < H * W; s++) {
            int64_t yy = y[n * H * W + s];
            if (yy == -100) continue;
            double z[C], mx = -INFINITY, se = 0;
            for (int c = 0; c < C; c++) {
                z[c] = (double)xs[(n * C + c) * H * W + s] * pd[c];
                mx = fmax(mx, z[c]);
            }
            for (int c = 0; c < C; c++) se += exp(z[c] - mx);
            loss_ref += (mx + log(se) - z[yy]) / count;
        }
    sc_train_options o;
    sc_train_options_default(&o);
    sc_training_graph tg;
    sc_status st = autodiff_build_training(&g, &o, &tg);
    CHECK(!st, "pixel build: %s", st ? sc_status_message(st) : "");
    if (!st) {
        const sc_desc *ld = &g.values[tg.labels].desc;
        CHECK(ld->rank == 3 && ld->dims[1] == H && ld->dims[2] == W, "per-pixel labels are [N, H, W]");
        sc_tensor outs[16];
        double loss;
        st = run_step(&g, &tg, img, xs, y, 0.1f, 1, outs, &loss);
        CHECK(!st, "pixel step: %s", st ? sc_status_message(st) : "");
        if (!st) {
            CHECK(close_to(loss, loss_ref, 1e-5, 1e-7), "per-pixel loss %.8g, want %.8g", loss, loss_ref);
            outs_free(&g, outs);
        }
        /* A label outside [0, C) is a status naming the loss node and the index. */
        sc_status_free(st);
        y[4] = 7;
        st = run_step(&g, &tg, img, xs, y, 0.1f, 2, outs, &loss);
        CHECK(st && strstr(sc_status_message(st), "label 7") && strstr(sc_status_message(st), "index 4"),
              "bad label: %s", st ? sc_status_message(st) : "no error");
    }
    sc_status_free(st);
    graph_free(&g);
}

/* x [6, 4] -> Gemm W [3, 4] -> BatchNormalization -> Dropout(0.25) -> logits [6, 3]. */
static void test_bn_dropout(void) {
    enum { N = 6, K = 4, C = 3 };
    sc_graph g;
    graph_init(&g);
    rng = 11;
    int x = add_input(&g, "x", 2, (const int64_t[]){N, K});
    int w = add_param(&g, "W", 2, (const int64_t[]){C, K}, 1.0);
    int scale = add_param(&g, "bn.scale", 1, (const int64_t[]){C}, 1.0);
    int bias = add_param(&g, "bn.bias", 1, (const int64_t[]){C}, 0.5);
    int mean = add_param(&g, "bn.running_mean", 1, (const int64_t[]){C}, 0.5);
    int var = add_param(&g, "bn.running_var", 1, (const int64_t[]){C}, 0.5);
    float *vd = g.values[var].data;
    for (int c = 0; c < C; c++) vd[c] = 1.0f + vd[c];
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.gemm = (sc_gemm_attrs){.alpha = 1.0f, .beta = 1.0f, .trans_b = true};
    int z = add_node(&g, SC_OP_GEMM, &a, (const int[]){x, w}, 2, "z");
    memset(&a, 0, sizeof a);
    a.batch_norm = (sc_batch_norm_attrs){.epsilon = 1e-5f, .momentum = 0.9f};
    int y = add_node(&g, SC_OP_BATCH_NORM, &a, (const int[]){z, scale, bias, mean, var}, 5, "bn");
    sc_status st = SC_OK;
    sc_desc rd = sc_desc_make(SC_F32, 0, NULL);
    int ratio = graph_add_value(&g, "ratio", SC_VALUE_CONST, &rd, &st);
    SC_ASSERT(ratio >= 0 && !graph_alloc_data(&g, ratio));
    *(float *)g.values[ratio].data = 0.25f;
    int logits = add_node(&g, SC_OP_DROPOUT, NULL, (const int[]){y, ratio}, 2, "drop");
    set_output(&g, logits);
    float xs[N * K];
    for (int i = 0; i < N * K; i++) xs[i] = (float)(2 * urand() - 1);
    int64_t labels[N] = {0, 1, 2, 2, 1, 0};
    /* Reference running statistics: 0.9 * running + 0.1 * batch (population variance, ONNX). */
    const float *wd = g.values[w].data, *md = g.values[mean].data;
    double want_mean[C], want_var[C];
    for (int c = 0; c < C; c++) {
        double zs[N], mu = 0, v = 0;
        for (int n = 0; n < N; n++) {
            zs[n] = 0;
            for (int k = 0; k < K; k++) zs[n] += (double)xs[n * K + k] * wd[c * K + k];
            mu += zs[n] / N;
        }
        for (int n = 0; n < N; n++) v += (zs[n] - mu) * (zs[n] - mu) / N;
        want_mean[c] = 0.9 * md[c] + 0.1 * mu;
        want_var[c] = 0.9 * vd[c] + 0.1 * v;
    }
    const int bn_node = 1, drop_node = 2; /* node order: Gemm, BatchNormalization, Dropout */
    sc_train_options o;
    sc_train_options_default(&o);
    sc_training_graph tg;
    st = autodiff_build_training(&g, &o, &tg);
    CHECK(!st, "BN/Dropout build: %s", st ? sc_status_message(st) : "");
    if (!st) {
        const sc_node *bn = &g.nodes[bn_node], *dr = &g.nodes[drop_node];
        CHECK(bn->op == SC_OP_BATCH_NORM && bn->attrs->batch_norm.training_mode && bn->n_out == 3 && bn->out[1] >= 0 &&
                  bn->out[2] >= 0 && g.values[bn->out[1]].is_output && g.values[bn->out[2]].is_output,
              "BatchNormalization in training mode with running statistics as graph outputs");
        CHECK(tg.n_writebacks == 2 && tg.wb_dst[0] == mean && tg.wb_dst[1] == var && tg.wb_src[0] == bn->out[1] &&
                  tg.wb_src[1] == bn->out[2],
              "writebacks running_mean/var -> the BN initializers (%d)", tg.n_writebacks);
        CHECK(tg.n_params == 3 && grad_of(&tg, mean) < 0 && grad_of(&tg, var) < 0,
              "BN statistics are not trained (%d trainable)", tg.n_params);
        CHECK(dr->op == SC_OP_DROPOUT && dr->n_in == 3 && dr->in[2] >= 0 && g.values[dr->in[2]].kind == SC_VALUE_CONST &&
                  g.values[dr->in[2]].desc.dtype == SC_BOOL && *(const uint8_t *)g.values[dr->in[2]].data == 1 &&
                  dr->n_out == 2 && dr->out[1] >= 0,
              "Dropout in training mode with a mask output");
        cpu_set_dropout_rng(1234, 1);
        sc_tensor outs[16];
        double loss = NAN;
        st = run_step(&g, &tg, x, xs, labels, 0.1f, 1, outs, &loss);
        CHECK(!st, "BN/Dropout step: %s", st ? sc_status_message(st) : "");
        if (!st) {
            CHECK(isfinite(loss) && loss > 0, "loss %g", loss);
            const float *rm = output_of(&g, outs, tg.wb_src[0]), *rv = output_of(&g, outs, tg.wb_src[1]);
            CHECK(rm && rv, "running statistics are outputs");
            if (rm && rv) {
                check_array("running_mean", rm, want_mean, C, 1e-5, 1e-6);
                check_array("running_var", rv, want_var, C, 1e-5, 1e-6);
            }
            outs_free(&g, outs);
        }
    }
    sc_status_free(st);
    graph_free(&g);
}

static void test_bad_regex(void) {
    mlp m;
    mlp_build(&m);
    sc_train_options o;
    sc_train_options_default(&o);
    o.freeze_regex = "W1(";
    sc_training_graph tg;
    sc_status st = autodiff_build_training(&m.g, &o, &tg);
    CHECK(st && strstr(sc_status_message(st), "W1("), "bad regex: %s", st ? sc_status_message(st) : "no error");
    sc_status_free(st);
    graph_free(&m.g);
}

int main(void) {
    test_mlp_sgd();
    test_mlp_frozen();
    test_mlp_adamw_clip();
    test_mse_head();
    test_lm_head();
    test_tied_embedding(false, false);
    test_tied_embedding(true, false);
    test_tied_embedding(true, true);
    test_pixel_head();
    test_bn_dropout();
    test_bad_regex();
    printf("%s (%d failures)\n", failures ? "FAILED" : "ok", failures);
    return failures ? 1 : 0;
}
