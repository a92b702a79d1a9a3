/* Finite-difference checks (tests/grad_check.h, f64, central differences) of the gradient rules in
 * autodiff/grad_elementwise.c and autodiff/grad_nn_linear.c: every unary op, every binary op with
 * numpy broadcasting ([2,3,4] with [3,1], [2,3,4,5] with [1,3,1,1], scalars), Max/Min including a
 * tie (central differences at a tie give exactly 1/2, PyTorch's torch.maximum convention), Where,
 * MatMul (batched, broadcast, 1-D operands, shared weights) and Gemm (every transpose combination,
 * alpha/beta, C broadcast), plus multi-consumer graphs whose gradients must be accumulated. */
#include <stdio.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "tests/grad_check.h"

#define D GC_DIMS
#define F SC_F64

static int failures, checks;

static void expect(bool ok) {
    checks++;
    failures += !ok;
}

static void unary(const char *label, sc_op op, const sc_attrs *a, gc_input x) {
    gc_input in[1] = {x};
    expect(grad_check_op(label, op, a, 1, in, 1, NULL));
}

static void binary(const char *label, sc_op op, gc_input a, gc_input b) {
    gc_input in[2] = {a, b};
    expect(grad_check_op(label, op, NULL, 2, in, 1, NULL));
}

static void test_unary(void) {
    sc_attrs a;
    unary("relu", SC_OP_RELU, NULL, gc_rand(F, 2, D(3, 4)));
    memset(&a, 0, sizeof a);
    a.leaky_relu.alpha = 0.1f;
    unary("leaky_relu", SC_OP_LEAKY_RELU, &a, gc_rand(F, 2, D(3, 4)));
    unary("sigmoid", SC_OP_SIGMOID, NULL, gc_rand_range(F, 2, D(3, 4), -3, 3));
    unary("tanh", SC_OP_TANH, NULL, gc_rand_range(F, 2, D(3, 4), -2, 2));
    unary("erf", SC_OP_ERF, NULL, gc_rand_range(F, 2, D(3, 4), -2, 2));
    memset(&a, 0, sizeof a);
    unary("gelu", SC_OP_GELU, &a, gc_rand_range(F, 2, D(3, 4), -3, 3));
    a.gelu.tanh_approx = true;
    unary("gelu_tanh", SC_OP_GELU, &a, gc_rand_range(F, 2, D(3, 4), -3, 3));
    a.hard_sigmoid = (sc_hard_sigmoid_attrs){.alpha = 0.2f, .beta = 0.5f};
    unary("hard_sigmoid", SC_OP_HARD_SIGMOID, &a, gc_rand_range(F, 2, D(3, 4), -4, 4));
    unary("hard_swish", SC_OP_HARD_SWISH, NULL, gc_rand_range(F, 2, D(3, 4), -4.5, 4.5));
    unary("sqrt", SC_OP_SQRT, NULL, gc_rand_range(F, 2, D(3, 4), 0.5, 2));
    unary("reciprocal", SC_OP_RECIPROCAL, NULL, gc_rand_range(F, 2, D(3, 4), 0.5, 2));
    unary("neg", SC_OP_NEG, NULL, gc_rand(F, 2, D(3, 4)));
    unary("exp", SC_OP_EXP, NULL, gc_rand(F, 2, D(3, 4)));
    unary("log", SC_OP_LOG, NULL, gc_rand_range(F, 2, D(3, 4), 0.5, 2));
    unary("identity", SC_OP_IDENTITY, NULL, gc_rand(F, 1, D(5)));
    unary("scalar_exp", SC_OP_EXP, NULL, gc_rand(F, 0, NULL));
    memset(&a, 0, sizeof a);
    a.cast.to = SC_F64;
    unary("cast_f64_f64", SC_OP_CAST, &a, gc_rand(F, 2, D(2, 3)));

    /* Clip with constant bounds, then with bounds that need gradients too. */
    gc_input clip[3] = {gc_rand_range(F, 2, D(4, 5), -2, 2), gc_const_scalar(F, -0.5), gc_const_scalar(F, 0.7)};
    expect(grad_check_op("clip", SC_OP_CLIP, NULL, 3, clip, 1, NULL));
    gc_input clip_min_only[3] = {gc_rand_range(F, 2, D(4, 5), -2, 2), gc_const_scalar(F, -0.5), gc_omitted()};
    expect(grad_check_op("clip_min_only", SC_OP_CLIP, NULL, 3, clip_min_only, 1, NULL));
    double lo = -0.4, hi = 0.6;
    gc_input clip_b[3] = {gc_rand_range(F, 2, D(4, 5), -2, 2), gc_data(F, 0, NULL, &lo), gc_data(F, 0, NULL, &hi)};
    expect(grad_check_op("clip_bounds", SC_OP_CLIP, NULL, 3, clip_b, 1, NULL));

    /* Dropout at inference (ratio given, no training_mode) is the identity. */
    gc_input drop[2] = {gc_rand(F, 2, D(3, 4)), gc_const_scalar(SC_F32, 0.3)};
    expect(grad_check_op("dropout_inference", SC_OP_DROPOUT, NULL, 2, drop, 1, NULL));
    /* Training mode through the mask output; ratio 0 keeps every element, so the forward kernel
     * needs no random mask and the check covers the dY * mask / (1 - ratio) path. */
    static const uint8_t yes = 1;
    gc_input drop_t[3] = {gc_rand(F, 2, D(3, 4)), gc_const_scalar(SC_F32, 0.0), gc_const(SC_BOOL, 0, NULL, &yes)};
    expect(grad_check_op("dropout_training_mask", SC_OP_DROPOUT, NULL, 3, drop_t, 2, NULL));
}

static void test_binary(void) {
    static const sc_op ops[] = {SC_OP_ADD, SC_OP_SUB, SC_OP_MUL, SC_OP_DIV};
    for (int k = 0; k < 4; k++) {
        char l[64];
        const char *n = sc_op_name(ops[k]);
        double lo = ops[k] == SC_OP_DIV ? 0.5 : -1, hi = ops[k] == SC_OP_DIV ? 2 : 1;
        snprintf(l, sizeof l, "%s_same", n);
        binary(l, ops[k], gc_rand(F, 2, D(3, 4)), gc_rand_range(F, 2, D(3, 4), lo, hi));
        snprintf(l, sizeof l, "%s_[2,3,4]_[3,1]", n);
        binary(l, ops[k], gc_rand(F, 3, D(2, 3, 4)), gc_rand_range(F, 2, D(3, 1), lo, hi));
        snprintf(l, sizeof l, "%s_[2,3,4,5]_[1,3,1,1]", n);
        binary(l, ops[k], gc_rand(F, 4, D(2, 3, 4, 5)), gc_rand_range(F, 4, D(1, 3, 1, 1), lo, hi));
        snprintf(l, sizeof l, "%s_[1,3,1,1]_[2,3,4,5]", n);
        binary(l, ops[k], gc_rand_range(F, 4, D(1, 3, 1, 1), lo, hi), gc_rand_range(F, 4, D(2, 3, 4, 5), lo, hi));
        snprintf(l, sizeof l, "%s_scalar_[2,3]", n);
        binary(l, ops[k], gc_rand(F, 0, NULL), gc_rand_range(F, 2, D(2, 3), lo, hi));
        snprintf(l, sizeof l, "%s_[4,1]_[1,5]", n);
        binary(l, ops[k], gc_rand(F, 2, D(4, 1)), gc_rand_range(F, 2, D(1, 5), lo, hi));
    }
    binary("pow", SC_OP_POW, gc_rand_range(F, 2, D(3, 4), 0.5, 2), gc_rand_range(F, 2, D(3, 4), -1.5, 1.5));
    binary("pow_bcast", SC_OP_POW, gc_rand_range(F, 3, D(2, 3, 4), 0.5, 2), gc_rand_range(F, 1, D(4), -1.5, 1.5));
    { /* fmod away from its jumps: A / B in (1.2, 2.6) and (-2.6, -1.2), trunc 1 or -1 (2 at most) */
        sc_attrs m;
        memset(&m, 0, sizeof m);
        m.mod.fmod = true;
        gc_input pos[2] = {gc_rand_range(F, 2, D(3, 4), 3.0, 3.9), gc_rand_range(F, 2, D(3, 4), 1.5, 2.5)};
        expect(grad_check_op("mod_fmod", SC_OP_MOD, &m, 2, pos, 1, NULL));
        gc_input neg[2] = {gc_rand_range(F, 3, D(2, 3, 4), -3.9, -3.0), gc_rand_range(F, 1, D(4), 1.5, 2.5)};
        expect(grad_check_op("mod_fmod_neg_bcast", SC_OP_MOD, &m, 2, neg, 1, NULL));
    }
    int64_t two = 2;
    gc_input pow_int[2] = {gc_rand(F, 2, D(3, 4)), gc_const(SC_I64, 0, NULL, &two)};
    expect(grad_check_op("pow_int_exponent", SC_OP_POW, NULL, 2, pow_int, 1, NULL));

    binary("max", SC_OP_MAX, gc_rand(F, 2, D(3, 4)), gc_rand(F, 2, D(3, 4)));
    binary("min_bcast", SC_OP_MIN, gc_rand(F, 3, D(2, 3, 4)), gc_rand(F, 2, D(3, 1)));
    gc_input max3[3] = {gc_rand(F, 2, D(3, 4)), gc_rand(F, 1, D(4)), gc_rand(F, 2, D(3, 1))};
    expect(grad_check_op("max3", SC_OP_MAX, NULL, 3, max3, 1, NULL));
    gc_input max1[1] = {gc_rand(F, 1, D(4))};
    expect(grad_check_op("max1", SC_OP_MAX, NULL, 1, max1, 1, NULL));
    static const double ta[4] = {0.5, -0.25, 0.75, 0.1}, tb[4] = {0.5, 0.3, 0.75, -0.2};
    gc_input tie[2] = {gc_data(F, 1, D(4), ta), gc_data(F, 1, D(4), tb)};
    expect(grad_check_op("max_ties", SC_OP_MAX, NULL, 2, tie, 1, NULL));
    expect(grad_check_op("min_ties", SC_OP_MIN, NULL, 2, tie, 1, NULL));

    static const uint8_t cond[6] = {1, 0, 0, 1, 1, 0};
    gc_input wh[3] = {gc_const(SC_BOOL, 2, D(2, 3), cond), gc_rand(F, 2, D(2, 3)), gc_rand(F, 1, D(3))};
    expect(grad_check_op("where_bcast", SC_OP_WHERE, NULL, 3, wh, 1, NULL));
}

static void test_matmul(void) {
    binary("matmul_2d", SC_OP_MATMUL, gc_rand(F, 2, D(3, 4)), gc_rand(F, 2, D(4, 5)));
    binary("matmul_batched", SC_OP_MATMUL, gc_rand(F, 3, D(2, 3, 4)), gc_rand(F, 3, D(2, 4, 5)));
    binary("matmul_bcast_batch", SC_OP_MATMUL, gc_rand(F, 4, D(2, 1, 3, 4)), gc_rand(F, 3, D(3, 4, 5)));
    binary("matmul_shared_weight", SC_OP_MATMUL, gc_rand(F, 3, D(2, 3, 4)), gc_rand(F, 2, D(4, 5)));
    binary("matmul_shared_lhs", SC_OP_MATMUL, gc_rand(F, 2, D(3, 4)), gc_rand(F, 3, D(2, 4, 5)));
    binary("matmul_1d_lhs", SC_OP_MATMUL, gc_rand(F, 1, D(4)), gc_rand(F, 2, D(4, 5)));
    binary("matmul_1d_lhs_batched", SC_OP_MATMUL, gc_rand(F, 1, D(4)), gc_rand(F, 3, D(2, 4, 5)));
    binary("matmul_1d_rhs", SC_OP_MATMUL, gc_rand(F, 3, D(2, 3, 4)), gc_rand(F, 1, D(4)));
    binary("matmul_1d_both", SC_OP_MATMUL, gc_rand(F, 1, D(4)), gc_rand(F, 1, D(4)));

    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        sc_attrs a;
        memset(&a, 0, sizeof a);
        a.gemm.alpha = 0.7f;
        a.gemm.beta = 1.3f;
        a.gemm.trans_a = ta;
        a.gemm.trans_b = tb;
        gc_input A = ta ? gc_rand(F, 2, D(4, 3)) : gc_rand(F, 2, D(3, 4));
        gc_input B = tb ? gc_rand(F, 2, D(5, 4)) : gc_rand(F, 2, D(4, 5));
        char l[64];
        gc_input in[3] = {A, B, gc_rand(F, 1, D(5))};
        snprintf(l, sizeof l, "gemm_tA%d_tB%d_C[N]", ta, tb);
        expect(grad_check_op(l, SC_OP_GEMM, &a, 3, in, 1, NULL));
        in[2] = gc_rand(F, 2, D(3, 5));
        snprintf(l, sizeof l, "gemm_tA%d_tB%d_C[M,N]", ta, tb);
        expect(grad_check_op(l, SC_OP_GEMM, &a, 3, in, 1, NULL));
        in[2] = gc_rand(F, 2, D(3, 1));
        snprintf(l, sizeof l, "gemm_tA%d_tB%d_C[M,1]", ta, tb);
        expect(grad_check_op(l, SC_OP_GEMM, &a, 3, in, 1, NULL));
        snprintf(l, sizeof l, "gemm_tA%d_tB%d_noC", ta, tb);
        expect(grad_check_op(l, SC_OP_GEMM, &a, 2, in, 1, NULL));
    }
}

/* x used twice by one node: y = x * x. */
static sc_status build_square(sc_graph *g, const int *in, int *out, int *n_out, void *ctx) {
    sc_status st = SC_OK;
    out[0] = gc_add_node(g, SC_OP_MUL, NULL, (int[]){in[0], in[0]}, 2, 1, NULL, &st);
    *n_out = 1;
    return st;
}

/* x feeding three nodes, and a diamond: y = x * w; z = Exp(y) + Tanh(x) + Sigmoid(y). */
static sc_status build_fanout(sc_graph *g, const int *in, int *out, int *n_out, void *ctx) {
    sc_status st = SC_OK;
    int y = gc_add_node(g, SC_OP_MUL, NULL, (int[]){in[0], in[1]}, 2, 1, NULL, &st);
    if (y < 0) return st;
    int e = gc_add_node(g, SC_OP_EXP, NULL, &y, 1, 1, NULL, &st);
    int t = e < 0 ? -1 : gc_add_node(g, SC_OP_TANH, NULL, &in[0], 1, 1, NULL, &st);
    int s = t < 0 ? -1 : gc_add_node(g, SC_OP_SIGMOID, NULL, &y, 1, 1, NULL, &st);
    int a = s < 0 ? -1 : gc_add_node(g, SC_OP_ADD, NULL, (int[]){e, t}, 2, 1, NULL, &st);
    int z = a < 0 ? -1 : gc_add_node(g, SC_OP_ADD, NULL, (int[]){a, s}, 2, 1, NULL, &st);
    out[0] = z;
    out[1] = y; /* y is also an output read by the loss: a third consumer */
    *n_out = 2;
    return st;
}

/* An MLP layer: Relu(x @ W + b) @ W2, W shared-weight path, b broadcast. */
static sc_status build_mlp(sc_graph *g, const int *in, int *out, int *n_out, void *ctx) {
    sc_status st = SC_OK;
    int h = gc_add_node(g, SC_OP_MATMUL, NULL, (int[]){in[0], in[1]}, 2, 1, NULL, &st);
    int hb = h < 0 ? -1 : gc_add_node(g, SC_OP_ADD, NULL, (int[]){h, in[2]}, 2, 1, NULL, &st);
    int r = hb < 0 ? -1 : gc_add_node(g, SC_OP_TANH, NULL, &hb, 1, 1, NULL, &st);
    int o = r < 0 ? -1 : gc_add_node(g, SC_OP_MATMUL, NULL, (int[]){r, in[3]}, 2, 1, NULL, &st);
    out[0] = o;
    *n_out = 1;
    return st;
}

static void test_multi_consumer(void) {
    gc_input sq[1] = {gc_rand(F, 2, D(3, 4))};
    expect(grad_check_graph("mul_x_x", 1, sq, build_square, NULL, NULL));
    gc_input fan[2] = {gc_rand(F, 2, D(3, 4)), gc_rand(F, 1, D(4))};
    expect(grad_check_graph("fanout_diamond", 2, fan, build_fanout, NULL, NULL));
    gc_input mlp[4] = {gc_rand(F, 3, D(2, 3, 4)), gc_rand(F, 2, D(4, 5)), gc_rand(F, 1, D(5)), gc_rand(F, 2, D(5, 2))};
    expect(grad_check_graph("mlp", 4, mlp, build_mlp, NULL, NULL));
    /* Only some inputs need gradients: the others must not be differentiated (nothing computed). */
    gc_input frozen[4] = {gc_nocheck(gc_rand(F, 3, D(2, 3, 4))), gc_rand(F, 2, D(4, 5)), gc_nocheck(gc_rand(F, 1, D(5))),
                          gc_rand(F, 2, D(5, 2))};
    expect(grad_check_graph("mlp_partial", 4, frozen, build_mlp, NULL, NULL));
}

/* Cast f64 -> f32: the gradient arriving in f32 must be cast back to f64 (checked structurally:
 * finite differences through f32 would measure f32 rounding, not the rule). */
static void test_cast_back(void) {
    sc_graph g;
    graph_init(&g);
    sc_status st = SC_OK;
    sc_desc xd = sc_desc_make(SC_F64, 1, D(3));
    int x = graph_add_value(&g, "x", SC_VALUE_INPUT, &xd, &st);
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.cast.to = SC_F32;
    int y = gc_add_node(&g, SC_OP_CAST, &a, &x, 1, 1, NULL, &st);
    sc_attrs r;
    memset(&r, 0, sizeof r);
    int l = y < 0 ? -1 : gc_add_node(&g, SC_OP_REDUCE_SUM, &r, &y, 1, 1, NULL, &st);
    int gx = -1;
    if (!st) st = autodiff_build_backward(&g, l, &x, 1, &gx);
    bool ok = !st && gx >= 0 && g.values[gx].desc.dtype == SC_F64 && g.values[gx].kind == SC_VALUE_GRAD;
    if (!ok) printf("FAIL cast_back: %s\n", st ? sc_status_message(st) : "gradient of x is not an f64 GRAD value");
    sc_status_free(st);
    graph_free(&g);
    expect(ok);
}

/* Nothing is computed for inputs that need no gradient: y = Sum(Tanh(x) * w) differentiated with
 * respect to w alone must emit fewer nodes than with respect to both, and x gets no gradient. */
static int backward_nodes(bool with_x, int *gx) {
    sc_graph g;
    graph_init(&g);
    sc_status st = SC_OK;
    sc_desc d = sc_desc_make(SC_F64, 1, D(4));
    int x = graph_add_value(&g, "x", SC_VALUE_INPUT, &d, &st);
    int w = graph_add_value(&g, "w", SC_VALUE_PARAM, &d, &st);
    int t = gc_add_node(&g, SC_OP_TANH, NULL, &x, 1, 1, NULL, &st);
    int m = t < 0 ? -1 : gc_add_node(&g, SC_OP_MUL, NULL, (int[]){t, w}, 2, 1, NULL, &st);
    sc_attrs r;
    memset(&r, 0, sizeof r);
    int l = m < 0 ? -1 : gc_add_node(&g, SC_OP_REDUCE_SUM, &r, &m, 1, 1, NULL, &st);
    int n_fwd = g.n_nodes, wrt[2] = {w, with_x ? x : -1}, grads[2] = {-1, -1};
    if (!st) st = autodiff_build_backward(&g, l, wrt, 2, grads);
    int emitted = st || grads[0] < 0 ? -1 : g.n_nodes - n_fwd;
    if (st) printf("FAIL frozen input: %s\n", sc_status_message(st));
    *gx = grads[1];
    sc_status_free(st);
    graph_free(&g);
    return emitted;
}

static void test_no_work_for_frozen(void) {
    int gx_both, gx_frozen;
    int both = backward_nodes(true, &gx_both), only_w = backward_nodes(false, &gx_frozen);
    bool ok = both > 0 && only_w > 0 && only_w < both && gx_both >= 0 && gx_frozen < 0;
    if (!ok) printf("FAIL frozen input: %d nodes for (x, w), %d for w alone\n", both, only_w);
    expect(ok);
}

int main(void) {
    test_no_work_for_frozen();
    test_unary();
    test_binary();
    test_matmul();
    test_multi_consumer();
    test_cast_back();
    printf("%d gradient checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
