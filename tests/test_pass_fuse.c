/* graph_fuse_inference and graph_fuse_gelu (graph/pass_fuse.c) keep what a graph computes: each graph
 * is prepared twice, once as written (no rewrites: graph_prepare would fuse GELU, which training uses
 * too) and once by graph_prepare with the inference rewrites, and both run on the CPU backend. The
 * unfused run goes through the separate Conv, BatchNormalization, Add, Relu and Erf/Mul/Add kernels,
 * so it is an independent reference for the folded weights, the oneDNN sum and Relu post-ops and
 * the Gelu kernel. The test also checks each rewrite actually fired (fewer nodes of the fused kinds)
 * and that the fused graph passes shape inference again.
 *
 * Residual blocks (Add of a Conv and S, then Relu) cover the executor's buffer reuse: when the
 * block's Add is S's last reader the fused Conv accumulates into S's buffer; when S is read again
 * afterwards (the "shared residual" graph) it must not, or the later reader sees the block's sum. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "tests/ref_executor.h"
#include "graph/passes.h"

static int failures;
static uint64_t rng = 99;

static float urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) * 0x1.0p-24) * 2.0f - 1.0f;
}

static int add_value(sc_graph *g, const char *name, sc_value_kind kind, int rank, const int64_t *dims,
                     float lo, float hi) {
    sc_status st = SC_OK;
    sc_desc d = sc_desc_make(SC_F32, rank, dims);
    int id = graph_add_value(g, name, kind, &d, &st);
    SC_ASSERT(id >= 0 && !st);
    if (kind == SC_VALUE_PARAM || kind == SC_VALUE_CONST) {
        SC_ASSERT(!graph_alloc_data(g, id));
        float *p = g->values[id].data;
        for (int64_t i = 0; i < sc_desc_numel(&d); i++) p[i] = lo + (hi - lo) * 0.5f * (urand() + 1.0f);
    }
    return id;
}

static int add_scalar(sc_graph *g, const char *name, float v) {
    int id = add_value(g, name, SC_VALUE_CONST, 0, NULL, 0, 0);
    *(float *)g->values[id].data = v;
    return id;
}

static void add_node(sc_graph *g, sc_op op, const char *name, const int *in, int n_in, int out) {
    sc_status st = SC_OK;
    int id = graph_add_node(g, op, name, in, n_in, &out, 1, &st);
    SC_ASSERT(id >= 0 && !st);
}

static void mark_io(sc_graph *g, int in, int out) {
    g->inputs = sc_arena_alloc(&g->arena, sizeof(int));
    g->outputs = sc_arena_alloc(&g->arena, sizeof(int));
    g->inputs[0] = in;
    g->n_inputs = 1;
    g->outputs[0] = out;
    g->n_outputs = 1;
    g->values[out].is_output = true;
    g->opset = 17;
}

/* Conv(x, W, b) -> BatchNormalization (inference) -> Relu, seeded so both copies are identical; with
 * clip_cap > 0 the last node is Clip(., 0, clip_cap) (MobileNet's ReLU6 form) instead of Relu. */
static float clip_cap;
static void build_conv_bn_relu(sc_graph *g) {
    rng = 7;
    graph_init(g);
    int64_t xd[] = {2, 3, 9, 9}, wd[] = {8, 3, 3, 3}, cd[] = {8}, yd[] = {2, 8, 9, 9};
    int x = add_value(g, "x", SC_VALUE_INPUT, 4, xd, 0, 0);
    int w = add_value(g, "W", SC_VALUE_PARAM, 4, wd, -0.5f, 0.5f), b = add_value(g, "b", SC_VALUE_PARAM, 1, cd, -0.2f, 0.2f);
    int sc = add_value(g, "bn.scale", SC_VALUE_PARAM, 1, cd, 0.5f, 1.5f), bb = add_value(g, "bn.B", SC_VALUE_PARAM, 1, cd, -0.3f, 0.3f);
    int mean = add_value(g, "bn.mean", SC_VALUE_PARAM, 1, cd, -0.2f, 0.2f), var = add_value(g, "bn.var", SC_VALUE_PARAM, 1, cd, 0.3f, 2.0f);
    int c = add_value(g, "c", SC_VALUE_ACT, 4, yd, 0, 0), n = add_value(g, "n", SC_VALUE_ACT, 4, yd, 0, 0);
    int y = add_value(g, "y", SC_VALUE_ACT, 4, yd, 0, 0);
    int cin[] = {x, w, b}, bin[] = {c, sc, bb, mean, var};
    add_node(g, SC_OP_CONV, "conv", cin, 3, c);
    sc_window_attrs *wa = &graph_node_attrs_mut(g, &g->nodes[0])->window;
    wa->n_spatial = 2;
    for (int i = 0; i < 2; i++) wa->strides[i] = wa->dilations[i] = 1, wa->pads[i] = wa->pads[2 + i] = 1;
    wa->group = 1;
    add_node(g, SC_OP_BATCH_NORM, "bn", bin, 5, n);
    sc_attrs *ba = graph_node_attrs_mut(g, &g->nodes[1]);
    ba->batch_norm.epsilon = 1e-5f;
    ba->batch_norm.momentum = 0.9f;
    if (clip_cap > 0) {
        int lo = add_scalar(g, "lo", 0.0f), hi = add_scalar(g, "hi", clip_cap);
        add_node(g, SC_OP_CLIP, "relu6", (int[]){n, lo, hi}, 3, y);
    } else {
        add_node(g, SC_OP_RELU, "relu", &n, 1, y);
    }
    mark_io(g, x, y);
}

static void build_conv_bn_clip(sc_graph *g) {
    clip_cap = 0.6f; /* below most positive outputs, so the cap is exercised */
    build_conv_bn_relu(g);
    clip_cap = 0;
}

/* 0.5 * x * (1 + erf(x / sqrt 2)) as GPT's generator writes it: Mul(Mul(x, 0.5), Add(Erf(Div(x, s)), 1)). */
static void build_gelu(sc_graph *g) {
    rng = 11;
    graph_init(g);
    int64_t d[] = {4, 33};
    int x = add_value(g, "x", SC_VALUE_INPUT, 2, d, 0, 0);
    int s2 = add_scalar(g, "sqrt2", (float)M_SQRT2), one = add_scalar(g, "one", 1.0f), half = add_scalar(g, "half", 0.5f);
    int q = add_value(g, "q", SC_VALUE_ACT, 2, d, 0, 0), e = add_value(g, "e", SC_VALUE_ACT, 2, d, 0, 0);
    int a = add_value(g, "a", SC_VALUE_ACT, 2, d, 0, 0), h = add_value(g, "h", SC_VALUE_ACT, 2, d, 0, 0);
    int y = add_value(g, "y", SC_VALUE_ACT, 2, d, 0, 0);
    add_node(g, SC_OP_DIV, "div", (int[]){x, s2}, 2, q);
    add_node(g, SC_OP_ERF, "erf", &q, 1, e);
    add_node(g, SC_OP_ADD, "add", (int[]){e, one}, 2, a);
    add_node(g, SC_OP_MUL, "half", (int[]){x, half}, 2, h);
    add_node(g, SC_OP_MUL, "mul", (int[]){h, a}, 2, y);
    mark_io(g, x, y);
}

/* An op node writing a fresh [4, 33] activation named like the node; returns the value. */
static int gelu_op(sc_graph *g, sc_op op, const char *name, int a, int b) {
    int64_t d[] = {4, 33};
    int y = add_value(g, name, SC_VALUE_ACT, 2, d, 0, 0);
    add_node(g, op, name, (int[]){a, b}, b < 0 ? 1 : 2, y);
    return y;
}

/* PyTorch's nn.GELU export: Mul(Mul(x, Add(Erf(Div(x, sqrt2)), 1)), 0.5). */
static void build_gelu_torch(sc_graph *g) {
    rng = 12;
    graph_init(g);
    int64_t d[] = {4, 33};
    int x = add_value(g, "x", SC_VALUE_INPUT, 2, d, 0, 0);
    int q = gelu_op(g, SC_OP_DIV, "div", x, add_scalar(g, "sqrt2", (float)M_SQRT2));
    int a = gelu_op(g, SC_OP_ADD, "add", gelu_op(g, SC_OP_ERF, "erf", q, -1), add_scalar(g, "one", 1.0f));
    int y = gelu_op(g, SC_OP_MUL, "mul", gelu_op(g, SC_OP_MUL, "xa", x, a), add_scalar(g, "half", 0.5f));
    mark_io(g, x, y);
}

/* The tanh form, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): Hugging Face's gelu_new
 * (Mul(Mul(0.5, x), Add(1, Tanh(..))), x^3 = Pow(x, 3)) when hf, else PyTorch's
 * nn.GELU(approximate="tanh") export (Mul(0.5, Mul(x, Add(1, Tanh(..)))), x^3 = Mul(x, Mul(x, x))). */
static bool tanh_hf;
static void build_gelu_tanh(sc_graph *g) {
    rng = 13;
    graph_init(g);
    int64_t d[] = {4, 33};
    int x = add_value(g, "x", SC_VALUE_INPUT, 2, d, 0, 0), half = add_scalar(g, "half", 0.5f);
    int cube = tanh_hf ? gelu_op(g, SC_OP_POW, "pow", x, add_scalar(g, "three", 3.0f))
                       : gelu_op(g, SC_OP_MUL, "cube", x, gelu_op(g, SC_OP_MUL, "sq", x, x));
    int inner = gelu_op(g, SC_OP_ADD, "inner", x, gelu_op(g, SC_OP_MUL, "kappa", add_scalar(g, "k", 0.044715f), cube));
    int u = gelu_op(g, SC_OP_MUL, "beta", add_scalar(g, "b", 0.7978845608028654f), inner);
    int a = gelu_op(g, SC_OP_ADD, "add", add_scalar(g, "one", 1.0f), gelu_op(g, SC_OP_TANH, "tanh", u, -1));
    int y = tanh_hf ? gelu_op(g, SC_OP_MUL, "mul", gelu_op(g, SC_OP_MUL, "hx", half, x), a)
                    : gelu_op(g, SC_OP_MUL, "mul", half, gelu_op(g, SC_OP_MUL, "xa", x, a));
    mark_io(g, x, y);
}

/* A 3x3 (pad 1) or 1x1 Conv with fresh random weights and bias: x (1, ci, 8, 8) -> (1, co, 8, 8). */
static int add_conv(sc_graph *g, const char *name, int x, int ci, int co, int k) {
    char buf[64];
    int64_t wd[] = {co, ci, k, k}, bd[] = {co}, yd[] = {1, co, 8, 8};
    snprintf(buf, sizeof buf, "%s.W", name);
    int w = add_value(g, buf, SC_VALUE_PARAM, 4, wd, -0.3f, 0.3f);
    snprintf(buf, sizeof buf, "%s.B", name);
    int b = add_value(g, buf, SC_VALUE_PARAM, 1, bd, -0.2f, 0.2f);
    snprintf(buf, sizeof buf, "%s.y", name);
    int y = add_value(g, buf, SC_VALUE_ACT, 4, yd, 0, 0);
    add_node(g, SC_OP_CONV, name, (int[]){x, w, b}, 3, y);
    sc_window_attrs *wa = &graph_node_attrs_mut(g, &g->nodes[g->n_nodes - 1])->window;
    wa->n_spatial = 2;
    wa->group = 1;
    for (int i = 0; i < 2; i++) wa->strides[i] = wa->dilations[i] = 1, wa->pads[i] = wa->pads[2 + i] = k / 2;
    return y;
}

static int add_unary(sc_graph *g, sc_op op, const char *name, int x) {
    int y = add_value(g, name, SC_VALUE_ACT, g->values[x].desc.rank, g->values[x].desc.dims, 0, 0);
    add_node(g, op, name, &x, 1, y);
    return y;
}

static int add_binary(sc_graph *g, sc_op op, const char *name, int a, int b) {
    int y = add_value(g, name, SC_VALUE_ACT, g->values[a].desc.rank, g->values[a].desc.dims, 0, 0);
    add_node(g, op, name, (int[]){a, b}, 2, y);
    return y;
}

/* kind 0: identity block, a = relu(conv(x)); y = relu(conv3x3(relu(conv1x1(a))) + a), the Add is
 *         a's last reader (the fused Conv reuses a's buffer);
 * kind 1: the same with S on the Add's left and a read again afterwards, out = y * a;
 * kind 2: projection block, y = relu(conv1x1(relu(conv3x3(a))) + conv1x1_proj(a)), both Add
 *         operands Convs (the later one fuses, the other's output is S);
 * kind 3: no Relu after the Add, S is the graph input x (not an executor-owned buffer);
 * kind 4: S = sigmoid(a) is computed after the Conv (the fused Conv must run at the Add's place);
 * kind 5: kind 0 followed by a 1x1 head Conv, so a, h and the block's output are all read by Convs
 *         only and live channels-last (the summand a too, in the fused Conv's output buffer). */
static void build_residual(sc_graph *g, int kind) {
    rng = 21 + (uint64_t)kind;
    graph_init(g);
    int64_t xd[] = {1, 8, 8, 8};
    int x = add_value(g, "x", SC_VALUE_INPUT, 4, xd, 0, 0);
    int a = kind == 3 ? x : add_unary(g, SC_OP_RELU, "a", add_conv(g, "stem", x, 8, 8, 3));
    int h = add_unary(g, SC_OP_RELU, "h", add_conv(g, "c1", a, 8, 6, kind == 2 ? 3 : 1));
    int c2 = add_conv(g, "c2", h, 6, 8, kind == 2 ? 1 : 3);
    int s = kind == 2 ? add_conv(g, "proj", a, 8, 8, 1) : kind == 4 ? add_unary(g, SC_OP_SIGMOID, "sig", a) : a;
    int sum = kind == 1 ? add_binary(g, SC_OP_ADD, "sum", s, c2) : add_binary(g, SC_OP_ADD, "sum", c2, s);
    int y = kind == 3 ? sum : add_unary(g, SC_OP_RELU, "y", sum);
    if (kind == 1) y = add_binary(g, SC_OP_MUL, "out", y, a);
    if (kind == 5) y = add_conv(g, "head", y, 8, 4, 1);
    mark_io(g, x, y);
}
static void build_identity_block(sc_graph *g) { build_residual(g, 0); }
static void build_shared_residual(sc_graph *g) { build_residual(g, 1); }
static void build_projection_block(sc_graph *g) { build_residual(g, 2); }
static void build_input_residual(sc_graph *g) { build_residual(g, 3); }
static void build_late_residual(sc_graph *g) { build_residual(g, 4); }
static void build_channels_last_block(sc_graph *g) { build_residual(g, 5); }

/* Activations a Conv absorbs (rewrite 4), each between two Convs so the values can go
 * channels-last too: kind 0 SiLU as Mul(t, Sigmoid(t)), kind 1 as Mul(Sigmoid(t), t), kind 2
 * HardSwish, kind 3 Sigmoid (an SE block's gate, then multiplied into the stem's output). */
static void build_conv_act(sc_graph *g, int kind) {
    rng = 41 + (uint64_t)kind;
    graph_init(g);
    int64_t xd[] = {1, 8, 8, 8};
    int x = add_value(g, "x", SC_VALUE_INPUT, 4, xd, 0, 0);
    int stem = add_conv(g, "stem", x, 8, 8, 3);
    int t = add_conv(g, "c1", stem, 8, 8, 3), y;
    if (kind <= 1) {
        int sg = add_unary(g, SC_OP_SIGMOID, "sig", t);
        y = kind ? add_binary(g, SC_OP_MUL, "silu", sg, t) : add_binary(g, SC_OP_MUL, "silu", t, sg);
    } else if (kind == 2) {
        y = add_unary(g, SC_OP_HARD_SWISH, "hswish", t);
    } else {
        y = add_binary(g, SC_OP_MUL, "gated", stem, add_unary(g, SC_OP_SIGMOID, "gate", t));
    }
    mark_io(g, x, add_conv(g, "head", y, 8, 4, 1));
}
static void build_conv_silu(sc_graph *g) { build_conv_act(g, 0); }
static void build_conv_silu_swapped(sc_graph *g) { build_conv_act(g, 1); }
static void build_conv_hard_swish(sc_graph *g) { build_conv_act(g, 2); }
static void build_conv_gate(sc_graph *g) { build_conv_act(g, 3); }

/* An I64 constant of n values (Pad's pads). */
static int add_ints(sc_graph *g, const char *name, const int64_t *v, int64_t n) {
    sc_status st = SC_OK;
    sc_desc d = sc_desc_make(SC_I64, 1, &n);
    int id = graph_add_value(g, name, SC_VALUE_CONST, &d, &st);
    SC_ASSERT(id >= 0 && !st && !graph_alloc_data(g, id));
    memcpy(g->values[id].data, v, sizeof(int64_t) * (size_t)n);
    return id;
}

/* A k x k pool, stride s, no pads of its own; zero_pad > 0 first pads x with zero_pad zeros on
 * each spatial side by a Pad node (as PyTorch exports avg_pool2d(padding=...)), and zero_pad == 0
 * with an all-zero Pad (DenseNet's transitions). */
static int add_pool(sc_graph *g, sc_op op, const char *name, int x, int64_t k, int64_t s, int64_t zero_pad) {
    if (op == SC_OP_AVERAGE_POOL) {
        int64_t pads[8] = {0, 0, zero_pad, zero_pad, 0, 0, zero_pad, zero_pad};
        char buf[64];
        snprintf(buf, sizeof buf, "%s.pads", name);
        int p = add_ints(g, buf, pads, 8);
        snprintf(buf, sizeof buf, "%s.padded", name);
        int y = add_value(g, buf, SC_VALUE_ACT, 4, g->values[x].desc.dims, 0, 0);
        add_node(g, SC_OP_PAD, buf, (int[]){x, p}, 2, y);
        x = y;
    }
    int y = add_value(g, name, SC_VALUE_ACT, 4, g->values[x].desc.dims, 0, 0);
    add_node(g, op, name, &x, 1, y);
    sc_window_attrs *wa = &graph_node_attrs_mut(g, &g->nodes[g->n_nodes - 1])->window;
    wa->n_spatial = 2;
    wa->has_kernel_shape = true;
    for (int i = 0; i < 2; i++) wa->kernel_shape[i] = k, wa->strides[i] = s, wa->dilations[i] = 1;
    if (op == SC_OP_MAX_POOL) wa->pads[0] = wa->pads[1] = wa->pads[2] = wa->pads[3] = k / 2;
    return y;
}

/* An Inception block and a DenseNet layer: four branches joined by a Concat (1x1; 1x1 then 3x3;
 * MaxPool then 1x1; zero Pad + AveragePool then 1x1), BatchNormalization + Relu + 1x1 on the join,
 * a second Concat of the join and that, a DenseNet transition (all-zero Pad + 2x2 AveragePool) and
 * a 1x1 head. Every value between the stem and the head can live channels-last. */
static void build_inception_dense(sc_graph *g) {
    rng = 61;
    graph_init(g);
    int64_t xd[] = {1, 8, 8, 8}, cd[] = {16};
    int x = add_value(g, "x", SC_VALUE_INPUT, 4, xd, 0, 0);
    int stem = add_unary(g, SC_OP_RELU, "stem", add_conv(g, "c0", x, 8, 8, 3));
    int b1 = add_conv(g, "b1", stem, 8, 4, 1);
    int b2 = add_conv(g, "b2", add_conv(g, "b2a", stem, 8, 4, 1), 4, 6, 3);
    int b3 = add_conv(g, "b3", add_pool(g, SC_OP_MAX_POOL, "b3p", stem, 3, 1, 0), 8, 3, 1);
    int b4 = add_conv(g, "b4", add_pool(g, SC_OP_AVERAGE_POOL, "b4p", stem, 3, 1, 1), 8, 3, 1);
    int64_t jd[] = {1, 16, 8, 8};
    int join = add_value(g, "join", SC_VALUE_ACT, 4, jd, 0, 0);
    add_node(g, SC_OP_CONCAT, "join", (int[]){b1, b2, b3, b4}, 4, join);
    graph_node_attrs_mut(g, &g->nodes[g->n_nodes - 1])->axis.axis = 1;
    int sc = add_value(g, "bn.scale", SC_VALUE_PARAM, 1, cd, 0.5f, 1.5f), bb = add_value(g, "bn.B", SC_VALUE_PARAM, 1, cd, -0.3f, 0.3f);
    int mean = add_value(g, "bn.mean", SC_VALUE_PARAM, 1, cd, -0.2f, 0.2f), var = add_value(g, "bn.var", SC_VALUE_PARAM, 1, cd, 0.3f, 2.0f);
    int bn = add_value(g, "bn", SC_VALUE_ACT, 4, jd, 0, 0);
    add_node(g, SC_OP_BATCH_NORM, "bn", (int[]){join, sc, bb, mean, var}, 5, bn);
    graph_node_attrs_mut(g, &g->nodes[g->n_nodes - 1])->batch_norm.epsilon = 1e-5f;
    int grow = add_conv(g, "grow", add_unary(g, SC_OP_RELU, "bn.relu", bn), 16, 4, 1);
    int64_t dd[] = {1, 20, 8, 8};
    int dense = add_value(g, "dense", SC_VALUE_ACT, 4, dd, 0, 0);
    add_node(g, SC_OP_CONCAT, "dense", (int[]){join, grow}, 2, dense);
    graph_node_attrs_mut(g, &g->nodes[g->n_nodes - 1])->axis.axis = -3;
    int down = add_pool(g, SC_OP_AVERAGE_POOL, "transition", dense, 2, 2, 0);
    mark_io(g, x, add_conv(g, "head", down, 20, 4, 1));
}

/* A squeeze-and-excitation block between Convs: y = t * sigmoid(fc2(relu(fc1(pool(t))))), pool a
 * GlobalAveragePool and fc1/fc2 1x1 Convs on (1, 8, 1, 1), then a residual Add of t and a 1x1
 * head. The gate broadcasts over H and W, so the Mul can read t channels-last. */
static void build_squeeze_excite(sc_graph *g) {
    rng = 71;
    graph_init(g);
    int64_t xd[] = {1, 8, 8, 8}, pd[] = {1, 8, 1, 1};
    int x = add_value(g, "x", SC_VALUE_INPUT, 4, xd, 0, 0);
    int t = add_conv(g, "stem", x, 8, 8, 3);
    int pooled = add_value(g, "pool", SC_VALUE_ACT, 4, pd, 0, 0);
    add_node(g, SC_OP_GLOBAL_AVERAGE_POOL, "pool", &t, 1, pooled);
    int fc1 = add_unary(g, SC_OP_RELU, "fc1.relu", add_conv(g, "fc1", pooled, 8, 4, 1));
    int gate = add_unary(g, SC_OP_SIGMOID, "gate", add_conv(g, "fc2", fc1, 4, 8, 1));
    int scaled = add_binary(g, SC_OP_MUL, "scaled", t, gate);
    int sum = add_binary(g, SC_OP_ADD, "sum", scaled, t);
    mark_io(g, x, add_conv(g, "head", add_unary(g, SC_OP_TANH, "act", sum), 8, 4, 1));
}

/* Nodes of op whose layout flag says channels-last (graph/pass_layout.c). */
static int count_flagged(const sc_graph *g, sc_op op) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const sc_node *nd = &g->nodes[i];
        if (nd->op != op) continue;
        n += op == SC_OP_CONCAT                                          ? nd->attrs->axis.nhwc
             : op == SC_OP_BATCH_NORM                                    ? nd->attrs->batch_norm.nhwc
             : op == SC_OP_MUL || op == SC_OP_ADD || op == SC_OP_SUB ? nd->attrs->binary.nhwc
                                      : nd->attrs->window.nhwc_in && nd->attrs->window.nhwc_out;
    }
    return n;
}

static int count_op(const sc_graph *g, sc_op op) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += g->nodes[i].op == op;
    return n;
}

/* Convs reading and writing channels-last values (pass_fuse.c rewrite 6). */
static int count_channels_last(const sc_graph *g, int *in, int *out) {
    *in = *out = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == SC_OP_CONV) *in += g->nodes[i].attrs->window.nhwc_in, *out += g->nodes[i].attrs->window.nhwc_out;
    return *in + *out;
}

/* Shapes and links g as written, with none of graph_prepare's rewrites. */
static sc_status prepare_as_written(sc_graph *g) {
    SC_TRY(graph_topo_sort(g));
    SC_TRY(graph_infer_shapes(g, NULL));
    return graph_link(g);
}

/* Prepares g (fused by graph_prepare, or as written) and runs it on x; returns the malloc'd output. */
static float *prepare_and_run(sc_graph *g, bool inference, const float *x) {
    sc_bind_options opt = {.batch = 0, .inference = inference, .eval = cpu_evaluator()};
    sc_status st = inference ? graph_prepare(g, &opt) : prepare_as_written(g);
    if (st) {
        fprintf(stderr, "FAIL prepare (inference=%d): %s\n", inference, sc_status_message(st));
        sc_status_free(st);
        failures++;
        return NULL;
    }
    sc_tensor in = {g->values[g->inputs[0]].desc, (void *)x}, out;
    st = sc_forward_cpu(g, &in, &out);
    if (st) {
        fprintf(stderr, "FAIL run (inference=%d): %s\n", inference, sc_status_message(st));
        sc_status_free(st);
        failures++;
        return NULL;
    }
    return out.data;
}

/* The rewritten graph's output got against the plain graph's want (plain's output shape): fails
 * when the worst relative difference exceeds tol. */
static void compare_outputs(const char *what, const char *kind, const sc_graph *plain, const float *want,
                            const float *got, double tol) {
    int64_t n = sc_desc_numel(&plain->values[plain->outputs[0]].desc);
    double worst = 0;
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)got[i] - want[i]) / (1e-5 + fabs(want[i])));
    if (worst > tol) {
        fprintf(stderr, "FAIL %s: %s output differs, worst relative difference %.3g\n", what, kind, worst);
        failures++;
    } else {
        printf("ok   %s (worst relative difference %.2g)\n", what, worst);
    }
}

/* min_cl_in / min_cl_out: how many Convs must read / write channels-last values after fusion. */
static void check_case_cl(const char *what, void (*build)(sc_graph *), sc_op gone, sc_op fused_into, int64_t n_x,
                          int min_cl_in, int min_cl_out) {
    float *x = malloc(sizeof(float) * (size_t)n_x);
    rng = 1234;
    for (int64_t i = 0; i < n_x; i++) x[i] = 2.0f * urand();
    sc_graph plain, fused;
    build(&plain);
    build(&fused);
    float *want = prepare_and_run(&plain, false, x), *got = prepare_and_run(&fused, true, x);
    if (want && got) {
        if (count_op(&fused, gone) != 0 || count_op(&plain, gone) == 0) {
            fprintf(stderr, "FAIL %s: %s nodes %d -> %d, expected the rewrite to remove them\n", what,
                    sc_op_name(gone), count_op(&plain, gone), count_op(&fused, gone));
            failures++;
        }
        if (count_op(&fused, fused_into) == 0) {
            fprintf(stderr, "FAIL %s: no %s node after fusion\n", what, sc_op_name(fused_into));
            failures++;
        }
        int cl_in, cl_out;
        count_channels_last(&fused, &cl_in, &cl_out);
        if (cl_in < min_cl_in || cl_out < min_cl_out) {
            fprintf(stderr, "FAIL %s: %d / %d Convs read / write channels-last values, expected at least %d / %d\n", what,
                    cl_in, cl_out, min_cl_in, min_cl_out);
            failures++;
        }
        sc_status st = graph_infer_shapes(&fused, cpu_evaluator());
        if (st) {
            fprintf(stderr, "FAIL %s: shape inference of the fused graph: %s\n", what, sc_status_message(st));
            sc_status_free(st);
            failures++;
        }
        compare_outputs(what, "fused", &plain, want, got, 1e-4);
    }
    free(want);
    free(got);
    free(x);
    graph_free(&plain);
    graph_free(&fused);
}

static void check_case(const char *what, void (*build)(sc_graph *), sc_op gone, sc_op fused_into, int64_t n_x) {
    check_case_cl(what, build, gone, fused_into, n_x, 0, 0);
}

/* Rewrite 2b: x (1, 4, 5, in_w) -> Conv W (6, 4, 3, 3), dilations (6, dil_w), pads (6, pad_w, 6,
 * pad_w). Along H only the centre tap reads the input (5 rows, dilation 6, pad 6). */
static int64_t crop_in_w, crop_dil_w, crop_pad_w;
static void build_dilated(sc_graph *g) {
    graph_init(g);
    rng = 77;
    int64_t xd[] = {1, 4, 5, crop_in_w}, wd[] = {6, 4, 3, 3}, bd[] = {6};
    int64_t ow = crop_in_w + 2 * crop_pad_w - 2 * crop_dil_w;
    int64_t yd[] = {1, 6, 5, ow};
    int x = add_value(g, "x", SC_VALUE_INPUT, 4, xd, 0, 0);
    int w = add_value(g, "W", SC_VALUE_PARAM, 4, wd, -0.5f, 0.5f);
    int b = add_value(g, "B", SC_VALUE_PARAM, 1, bd, -0.2f, 0.2f);
    int y = add_value(g, "y", SC_VALUE_ACT, 4, yd, 0, 0);
    add_node(g, SC_OP_CONV, "aspp", (int[]){x, w, b}, 3, y);
    sc_window_attrs *wa = &graph_node_attrs_mut(g, &g->nodes[0])->window;
    wa->n_spatial = 2;
    wa->group = 1;
    wa->strides[0] = wa->strides[1] = 1;
    wa->dilations[0] = 6, wa->dilations[1] = crop_dil_w;
    wa->pads[0] = wa->pads[2] = 6, wa->pads[1] = wa->pads[3] = crop_pad_w;
    mark_io(g, x, y);
}

/* Runs build_dilated with and without inference fusion; the fused Conv's kernel must be want_h x
 * want_w and its output must match. */
static void check_crop(const char *what, int64_t in_w, int64_t dil_w, int64_t pad_w, int64_t want_h, int64_t want_w) {
    crop_in_w = in_w, crop_dil_w = dil_w, crop_pad_w = pad_w;
    int64_t n_x = 4 * 5 * in_w;
    float *x = malloc(sizeof(float) * (size_t)n_x);
    for (int64_t i = 0; i < n_x; i++) x[i] = urand();
    sc_graph plain, fused;
    build_dilated(&plain);
    build_dilated(&fused);
    float *want = prepare_and_run(&plain, false, x), *got = prepare_and_run(&fused, true, x);
    if (want && got) {
        const sc_node *c = &fused.nodes[0];
        const sc_desc *wd = &fused.values[c->in[1]].desc;
        if (c->op != SC_OP_CONV || wd->dims[2] != want_h || wd->dims[3] != want_w) {
            fprintf(stderr, "FAIL %s: fused kernel %lldx%lld, want %lldx%lld\n", what, (long long)wd->dims[2],
                    (long long)wd->dims[3], (long long)want_h, (long long)want_w);
            failures++;
        }
        for (int k = 0; k < 4; k++)
            if (c->attrs->window.pads[k] < 0) {
                fprintf(stderr, "FAIL %s: negative pad %d\n", what, k);
                failures++;
            }
        compare_outputs(what, "cropped", &plain, want, got, 1e-5);
    }
    free(want);
    free(got);
    free(x);
    graph_free(&plain);
    graph_free(&fused);
}

/* graph_prepare fuses GELU for a graph that trains too (no inference flag): one Gelu, no Erf. */
static void check_gelu_trains(void) {
    sc_graph g;
    build_gelu(&g);
    sc_status st = graph_prepare(&g, &(sc_bind_options){.eval = cpu_evaluator()});
    if (st || count_op(&g, SC_OP_ERF) != 0 || count_op(&g, SC_OP_GELU) != 1) {
        fprintf(stderr, "FAIL GELU fused for training: %s, %d Erf, %d Gelu\n", st ? sc_status_message(st) : "prepared",
                count_op(&g, SC_OP_ERF), count_op(&g, SC_OP_GELU));
        sc_status_free(st);
        failures++;
    } else {
        printf("ok   GELU fused for training\n");
    }
    graph_free(&g);
}

/* Prepares build's graph for inference and checks how many nodes of each ops[k] carry the
 * channels-last flag: want[k]. */
static void check_layout_flags(const char *what, void (*build)(sc_graph *), const sc_op *ops, const int *want, int n) {
    sc_graph g;
    build(&g);
    sc_bind_options opt = {.batch = 0, .inference = true, .eval = cpu_evaluator()};
    sc_status st = graph_prepare(&g, &opt);
    bool ok = !st;
    for (int k = 0; k < n && !st; k++) {
        int got = count_flagged(&g, ops[k]);
        if (got != want[k]) fprintf(stderr, "FAIL %s: channels-last %s %d of %d\n", what, sc_op_name(ops[k]), got, want[k]);
        ok = ok && got == want[k];
    }
    if (st) fprintf(stderr, "FAIL %s: %s\n", what, sc_status_message(st));
    if (ok) printf("ok   %s: layout flags\n", what);
    failures += !ok;
    sc_status_free(st);
    graph_free(&g);
}

/* The Inception/DenseNet graph: both Pads go into their AveragePools, every Concat, the
 * BatchNormalization, both pools and all Convs but the stem's input side pass channels-last
 * values, and the output matches the graph as written. */
static void check_inception_dense(void) {
    const char *what = "Inception block + DenseNet layer: Pad into AveragePool, channels-last Concat/BN/pools";
    check_case_cl(what, build_inception_dense, SC_OP_PAD, SC_OP_AVERAGE_POOL, 512, 7, 7);
    check_layout_flags(what, build_inception_dense,
                       (const sc_op[]){SC_OP_CONCAT, SC_OP_BATCH_NORM, SC_OP_AVERAGE_POOL, SC_OP_MAX_POOL},
                       (const int[]){2, 1, 2, 1}, 4);
}

/* The SE block: its Mul and the residual Add run channels-last, and the output matches. */
static void check_squeeze_excite(void) {
    const char *what = "squeeze-and-excitation gate and residual Add on channels-last values";
    check_case_cl(what, build_squeeze_excite, SC_OP_RELU, SC_OP_CONV, 512, 2, 1);
    check_layout_flags(what, build_squeeze_excite, (const sc_op[]){SC_OP_MUL, SC_OP_ADD}, (const int[]){1, 1}, 2);
}

int main(void) {
    check_gelu_trains();
    check_crop("dilated Conv cropped along H (centre tap alone reads the input)", 4, 2, 1, 1, 3);
    check_crop("dilated Conv cropped along H and W", 4, 5, 5, 1, 1);
    check_crop("no crop along W where a pad would turn negative", 3, 2, 1, 1, 3);
    check_case("Conv + BatchNormalization + Relu", build_conv_bn_relu, SC_OP_BATCH_NORM, SC_OP_CONV, 2 * 3 * 9 * 9);
    check_case("Conv + BatchNormalization + Relu (Relu post-op)", build_conv_bn_relu, SC_OP_RELU, SC_OP_CONV, 2 * 3 * 9 * 9);
    check_case("Conv + BatchNormalization + Clip(0, 0.6) (clip post-op)", build_conv_bn_clip, SC_OP_CLIP, SC_OP_CONV,
               2 * 3 * 9 * 9);
    check_case("GELU pattern", build_gelu, SC_OP_ERF, SC_OP_GELU, 4 * 33);
    check_case("GELU as PyTorch exports nn.GELU", build_gelu_torch, SC_OP_ERF, SC_OP_GELU, 4 * 33);
    tanh_hf = true;
    check_case("GELU tanh form as Hugging Face's gelu_new (Pow)", build_gelu_tanh, SC_OP_TANH, SC_OP_GELU, 4 * 33);
    tanh_hf = false;
    check_case("GELU tanh form as PyTorch exports it (x * x * x)", build_gelu_tanh, SC_OP_TANH, SC_OP_GELU, 4 * 33);
    check_case("identity block (Add into Conv, residual buffer reused)", build_identity_block, SC_OP_ADD, SC_OP_CONV, 512);
    check_case("identity block (Relu after the sum)", build_identity_block, SC_OP_RELU, SC_OP_CONV, 512);
    check_case("residual read after the Add (no buffer reuse)", build_shared_residual, SC_OP_ADD, SC_OP_CONV, 512);
    check_case("projection block (both operands Convs)", build_projection_block, SC_OP_ADD, SC_OP_CONV, 512);
    check_case("graph input as the residual", build_input_residual, SC_OP_ADD, SC_OP_CONV, 512);
    check_case("residual computed after the Conv", build_late_residual, SC_OP_ADD, SC_OP_CONV, 512);
    check_case_cl("identity block + head: channels-last values, summand too", build_channels_last_block, SC_OP_ADD,
                  SC_OP_CONV, 512, 3, 3);
    check_case_cl("identity block: channels-last between its two Convs", build_identity_block, SC_OP_ADD, SC_OP_CONV,
                  512, 1, 1);
    check_case_cl("Conv + SiLU, Mul(t, Sigmoid(t)) (swish post-op)", build_conv_silu, SC_OP_SIGMOID, SC_OP_CONV, 512, 1, 1);
    check_case("Conv + SiLU, Mul(t, Sigmoid(t)) (the Mul goes too)", build_conv_silu, SC_OP_MUL, SC_OP_CONV, 512);
    check_case("Conv + SiLU, Mul(Sigmoid(t), t)", build_conv_silu_swapped, SC_OP_SIGMOID, SC_OP_CONV, 512);
    check_case_cl("Conv + HardSwish (hardswish post-op)", build_conv_hard_swish, SC_OP_HARD_SWISH, SC_OP_CONV, 512, 1, 1);
    check_case("Conv + Sigmoid gate (logistic post-op)", build_conv_gate, SC_OP_SIGMOID, SC_OP_CONV, 512);
    check_inception_dense();
    check_squeeze_excite();
    check_case("DenseNet's BatchNormalization + Relu (fused_relu)", build_inception_dense, SC_OP_RELU, SC_OP_BATCH_NORM, 512);
    if (failures) printf("%d failure(s)\n", failures);
    else printf("test_pass_fuse: all passed\n");
    return failures ? 1 : 0;
}
