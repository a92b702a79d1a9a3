/* Small training graphs built in C for the plan tests (test_plan_core.c, test_plan_exec.c):
 *   mlp:      x -> Gemm -> Relu -> Gemm -> Relu -> Gemm (a chain)
 *   residual: x -> Gemm -> Relu = h; Relu(Gemm(h)) + h -> Gemm (a skip connection across a cut)
 *   dense:    DenseNet-style: each layer's output concatenated to everything before it
 * Each is turned into a training graph with SGD + momentum (in-place state) and cross-entropy, with
 * deterministic weights, so building twice gives two identical graphs.
 */
#ifndef SC_PLAN_TEST_GRAPHS_H
#define SC_PLAN_TEST_GRAPHS_H

#include <stdio.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "graph/passes.h"
#include "graph/shape.h"

enum { PT_N = 8, PT_IN = 4, PT_H = 16, PT_H2 = 12, PT_C = 3, PT_D = 8 };

static uint64_t pt_rng;
/* Mixed precision of the graphs built from now on (graph_apply_precision before autodiff), 0 = f32. */
static sc_dtype pt_low;
static double pt_urand(void) {
    pt_rng ^= pt_rng >> 12;
    pt_rng ^= pt_rng << 25;
    pt_rng ^= pt_rng >> 27;
    return (double)((pt_rng * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

static int pt_param(sc_graph *g, const char *name, int64_t a, int64_t b, double scale) {
    sc_status st = SC_OK;
    int64_t dims[2] = {a, b};
    sc_desc d = sc_desc_make(SC_F32, b ? 2 : 1, dims);
    int v = graph_add_value(g, name, SC_VALUE_PARAM, &d, &st);
    SC_ASSERT(v >= 0 && !graph_alloc_data(g, v));
    float *p = g->values[v].data;
    for (int64_t i = 0; i < sc_desc_numel(&d); i++) p[i] = (float)(scale * (2 * pt_urand() - 1));
    return v;
}

static int pt_input(sc_graph *g, const char *name, int64_t a, int64_t b) {
    sc_status st = SC_OK;
    sc_desc d = sc_desc_make(SC_F32, 2, (const int64_t[]){a, b});
    int v = graph_add_value(g, name, SC_VALUE_INPUT, &d, &st);
    SC_ASSERT(v >= 0);
    int *in = sc_arena_alloc_array(&g->arena, (size_t)g->n_inputs + 1, sizeof(int));
    if (g->n_inputs) memcpy(in, g->inputs, sizeof(int) * (size_t)g->n_inputs);
    in[g->n_inputs++] = v;
    g->inputs = in;
    return v;
}

static int pt_node(sc_graph *g, sc_op op, const sc_attrs *a, const int *in, int n_in, const char *out_name) {
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

static int pt_gemm(sc_graph *g, int x, int w, int b, const char *name) {
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.gemm = (sc_gemm_attrs){.alpha = 1.0f, .beta = 1.0f, .trans_b = true};
    int in[3] = {x, w, b};
    return pt_node(g, SC_OP_GEMM, &a, in, b >= 0 ? 3 : 2, name);
}

static int pt_relu(sc_graph *g, int x, const char *name) { return pt_node(g, SC_OP_RELU, NULL, &x, 1, name); }

static void pt_output(sc_graph *g, int v) {
    g->outputs = sc_arena_alloc_array(&g->arena, 1, sizeof(int));
    g->outputs[0] = v;
    g->n_outputs = 1;
    g->values[v].is_output = true;
}

typedef enum { PT_MLP, PT_RESIDUAL, PT_DENSE } pt_kind;
static inline const char *pt_kind_name(pt_kind k) { return k == PT_MLP ? "mlp" : k == PT_RESIDUAL ? "residual" : "dense"; }

typedef struct {
    sc_graph g;
    sc_training_graph tg;
    int x;
    int act[8]; /* forward activations of interest, per kind (see pt_build) */
} pt_model;

/* Builds the forward graph of kind, then the training graph: SGD with momentum 0.9, or with adamw
 * AdamW (weight decay 0.01) with gradient clipping to norm 0.5. */
static void pt_build_opt(pt_model *m, pt_kind kind, bool adamw) {
    sc_graph *g = &m->g;
    graph_init(g);
    pt_rng = 1234 + (uint64_t)kind;
    int x = m->x = pt_input(g, "x", PT_N, PT_IN);
    int out = -1;
    if (kind == PT_MLP) {
        int w1 = pt_param(g, "W1", PT_H, PT_IN, 0.5), b1 = pt_param(g, "b1", PT_H, 0, 0.1);
        int w2 = pt_param(g, "W2", PT_H2, PT_H, 0.5), b2 = pt_param(g, "b2", PT_H2, 0, 0.1);
        int w3 = pt_param(g, "W3", PT_C, PT_H2, 0.5), b3 = pt_param(g, "b3", PT_C, 0, 0.1);
        m->act[0] = pt_gemm(g, x, w1, b1, "h1");          /* node 0, [8,16] */
        m->act[1] = pt_relu(g, m->act[0], "r1");          /* node 1 */
        m->act[2] = pt_gemm(g, m->act[1], w2, b2, "h2");  /* node 2, [8,12] */
        m->act[3] = pt_relu(g, m->act[2], "r2");          /* node 3 */
        out = m->act[4] = pt_gemm(g, m->act[3], w3, b3, "logits"); /* node 4, [8,3] */
    } else if (kind == PT_RESIDUAL) {
        int w0 = pt_param(g, "W0", PT_H, PT_IN, 0.5), w1 = pt_param(g, "W1", PT_H, PT_H, 0.3);
        int w2 = pt_param(g, "W2", PT_C, PT_H, 0.5);
        m->act[0] = pt_gemm(g, x, w0, -1, "g0");          /* node 0 */
        m->act[1] = pt_relu(g, m->act[0], "h");           /* node 1: the skip source */
        m->act[2] = pt_gemm(g, m->act[1], w1, -1, "g1");  /* node 2 */
        m->act[3] = pt_relu(g, m->act[2], "r1");          /* node 3 */
        int add_in[2] = {m->act[3], m->act[1]};
        m->act[4] = pt_node(g, SC_OP_ADD, NULL, add_in, 2, "s"); /* node 4 */
        out = m->act[5] = pt_gemm(g, m->act[4], w2, -1, "logits"); /* node 5 */
    } else {
        int w0 = pt_param(g, "W0", PT_D, PT_IN, 0.5), w1 = pt_param(g, "W1", PT_D, PT_D, 0.4);
        int w2 = pt_param(g, "W2", PT_D, 2 * PT_D, 0.3), w3 = pt_param(g, "W3", PT_C, 3 * PT_D, 0.3);
        sc_attrs cat;
        memset(&cat, 0, sizeof cat);
        cat.axis.axis = 1;
        m->act[0] = pt_gemm(g, x, w0, -1, "f0");          /* node 0, [8,8] */
        m->act[1] = pt_gemm(g, m->act[0], w1, -1, "g1");  /* node 1 */
        m->act[2] = pt_relu(g, m->act[1], "f1");          /* node 2 */
        int c1[2] = {m->act[0], m->act[2]};
        m->act[3] = pt_node(g, SC_OP_CONCAT, &cat, c1, 2, "cat1"); /* node 3, [8,16] */
        m->act[4] = pt_gemm(g, m->act[3], w2, -1, "g2");  /* node 4 */
        m->act[5] = pt_relu(g, m->act[4], "f2");          /* node 5 */
        int c2[2] = {m->act[3], m->act[5]};
        m->act[6] = pt_node(g, SC_OP_CONCAT, &cat, c2, 2, "cat2"); /* node 6, [8,24] */
        out = m->act[7] = pt_gemm(g, m->act[6], w3, -1, "logits"); /* node 7 */
    }
    pt_output(g, out);
    sc_train_options o;
    sc_train_options_default(&o);
    o.optim = adamw ? SC_OPTIM_ADAMW : SC_OPTIM_SGD;
    o.momentum = adamw ? 0.0f : 0.9f;
    o.weight_decay = adamw ? 0.01f : 0.0f;
    o.clip_norm = adamw ? 0.5f : 0.0f;
    sc_status st = graph_link(g);
    if (!st && pt_low) st = graph_apply_precision(g, pt_low, NULL);
    if (!st) st = autodiff_build_training(g, &o, &m->tg);
    if (st) printf("building %s: %s\n", pt_kind_name(kind), sc_status_message(st));
    SC_ASSERT(!st);
}

static inline void pt_build(pt_model *m, pt_kind kind) { pt_build_opt(m, kind, false); }

/* Inputs of step `step` (1-based) in g->inputs order; storage in the given buffers. */
typedef struct {
    float x[PT_N * PT_IN];
    int64_t labels[PT_N];
    float lr;
    int64_t step;
    sc_tensor t[8];
} pt_feeds;

static inline void pt_feeds_fill(const pt_model *m, int step, pt_feeds *f) {
    uint64_t save = pt_rng;
    pt_rng = 999 + (uint64_t)step;
    for (int i = 0; i < PT_N * PT_IN; i++) f->x[i] = (float)(2 * pt_urand() - 1);
    for (int i = 0; i < PT_N; i++) f->labels[i] = (int64_t)(pt_urand() * PT_C) % PT_C;
    pt_rng = save;
    f->lr = 0.1f;
    f->step = step;
    const sc_graph *g = &m->g;
    SC_ASSERT(g->n_inputs <= 8);
    for (int i = 0; i < g->n_inputs; i++) {
        int v = g->inputs[i];
        f->t[i].desc = g->values[v].desc;
        f->t[i].data = v == m->x ? (void *)f->x : v == m->tg.labels ? (void *)f->labels : v == m->tg.lr ? (void *)&f->lr
                       : v == m->tg.step ? (void *)&f->step : NULL;
        SC_ASSERT(f->t[i].data);
    }
}

#endif
