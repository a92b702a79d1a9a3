/* Shape inference per op family, on graphs built in C. Expected shapes follow the ONNX operator
 * specs by hand (the formula is quoted next to the less obvious ones). */
#include <stdint.h>

#include "shape_test_util.h"

/* Runs node id's shape function; returns its status message or NULL. */
static sc_status infer(int id) { return t_shape(id); }

#define EXPECT_OK(id)                                                                              \
    do {                                                                                           \
        sc_status st_ = infer(id);                                                                 \
        CHECK(!st_, "node '%s': %s", G.nodes[id].name, st_ ? sc_status_message(st_) : "");        \
        sc_status_free(st_);                                                                       \
    } while (0)

/* The error must name the node and contain each of the given fragments. */
static void expect_error(int id, const char *a, const char *b, int line) {
    sc_status st = infer(id);
    if (!st) {
        fprintf(stderr, "line %d: node '%s' should fail\n", line, G.nodes[id].name);
        t_failures++;
        return;
    }
    const char *m = sc_status_message(st);
    char node[128];
    snprintf(node, sizeof node, "node '%s' (%s)", G.nodes[id].name, sc_op_name(G.nodes[id].op));
    if (!strstr(m, node) || (a && !strstr(m, a)) || (b && !strstr(m, b))) {
        fprintf(stderr, "line %d: error '%s' lacks '%s' / '%s' / '%s'\n", line, m, node, a ? a : "", b ? b : "");
        t_failures++;
    }
    sc_status_free(st);
}
#define EXPECT_ERROR(id, a, b) expect_error(id, a, b, __LINE__)

static void test_table(void) {
    /* ONNX ops of ops.def; SoftmaxCrossEntropyLoss and the internal training ops of ops_train.def
     * belong to the training shape files (tests/test_op_tables.c covers every op). */
    for (int op = 0; op < SC_OP_PUBLIC_COUNT; op++)
        if (op != SC_OP_SOFTMAX_CROSS_ENTROPY_LOSS)
            CHECK(sc_shape_fns[op] || shape_fn_missing_reason((sc_op)op), "op %s has no shape function and no reason",
                  sc_op_name((sc_op)op));
    CHECK(!sc_shape_fns[SC_OP_CONSTANT] && shape_fn_missing_reason(SC_OP_CONSTANT), "Constant");
}

static void test_conv(void) {
    t_reset();
    int x = t_in("x", "f32[1,3,224,224]"), w = t_in("w", "f32[64,3,7,7]"), b = t_in("b", "f32[64]"), y = t_act("y");
    int n = T_NODE(SC_OP_CONV, "conv1", L(x, w, b), L(y));
    sc_window_attrs *a = &T_ATTRS(n)->window;
    a->strides[0] = a->strides[1] = 2;
    a->pads[0] = a->pads[1] = a->pads[2] = a->pads[3] = 3;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[1,64,112,112]"); /* floor((224 + 6 - 7) / 2) + 1 */

    /* SAME_UPPER, stride 2: out = ceil(8 / 2) = 4; total pad (4-1)*2 + 3 - 8 = 1, extra at the end */
    t_reset();
    x = t_in("x", "f32[1,3,8,9]"), w = t_in("w", "f32[8,3,3,3]"), y = t_act("y");
    n = T_NODE(SC_OP_CONV, "same", L(x, w), L(y));
    a = &T_ATTRS(n)->window;
    a->auto_pad = SC_AUTO_PAD_SAME_UPPER;
    a->strides[0] = a->strides[1] = 2;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[1,8,4,5]");
    CHECK(a->pads[0] == 0 && a->pads[2] == 1 && a->pads[1] == 1 && a->pads[3] == 1 && a->auto_pad == SC_AUTO_PAD_NOTSET,
          "SAME_UPPER pads %lld,%lld,%lld,%lld", (long long)a->pads[0], (long long)a->pads[1], (long long)a->pads[2],
          (long long)a->pads[3]);
    a->auto_pad = SC_AUTO_PAD_SAME_LOWER;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[1,8,4,5]");
    CHECK(a->pads[0] == 1 && a->pads[2] == 0, "SAME_LOWER pads %lld,%lld", (long long)a->pads[0], (long long)a->pads[2]);
    /* VALID: floor((8 - 3) / 2) + 1 = 3, floor((9 - 3) / 2) + 1 = 4 */
    memset(a->pads, 0, sizeof a->pads);
    a->auto_pad = SC_AUTO_PAD_VALID;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[1,8,3,4]");

    /* groups and dilations: effective kernel 2*(3-1)+1 = 5, 10 - 5 + 1 = 6 */
    t_reset();
    x = t_in("x", "f32[2,8,10,10]"), w = t_in("w", "f32[16,2,3,3]"), y = t_act("y");
    n = T_NODE(SC_OP_CONV, "grouped", L(x, w), L(y));
    a = &T_ATTRS(n)->window;
    a->group = 4;
    a->dilations[0] = a->dilations[1] = 2;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[2,16,6,6]");
    a->group = 3;
    EXPECT_ERROR(n, "f32[2,8,10,10]", "f32[16,2,3,3]");

    /* 1-D conv: floor((20 + 4 - 5) / 2) + 1 = 10 */
    t_reset();
    x = t_in("x", "f32[1,4,20]"), w = t_in("w", "f32[6,4,5]"), y = t_act("y");
    n = T_NODE(SC_OP_CONV, "conv1d", L(x, w), L(y));
    a = &T_ATTRS(n)->window;
    a->strides[0] = 2;
    a->pads[0] = a->pads[1] = 2;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[1,6,10]");
}

static void test_pool(void) {
    t_reset();
    int x = t_in("x", "f32[1,1,4,4]"), y = t_act("y"), idx = t_act("idx");
    int n = T_NODE(SC_OP_MAX_POOL, "mp", L(x), L(y, idx));
    sc_window_attrs *a = &T_ATTRS(n)->window;
    a->n_spatial = 2;
    a->kernel_shape[0] = a->kernel_shape[1] = 3;
    a->strides[0] = a->strides[1] = 2;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[1,1,1,1]"); /* floor((4 - 3) / 2) + 1 */
    CHECK_DESC(idx, "i64[1,1,1,1]");
    a->ceil_mode = true;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[1,1,2,2]"); /* ceil((4 - 3) / 2) + 1 */

    /* onnx test maxpool_2d_ceil_output_size_reduce_by_one: the last window would start past the input */
    t_reset();
    x = t_in("x", "f32[1,1,2,2]"), y = t_act("y");
    n = T_NODE(SC_OP_MAX_POOL, "mp", L(x), L(y));
    a = &T_ATTRS(n)->window;
    a->n_spatial = 2;
    a->kernel_shape[0] = a->kernel_shape[1] = 1;
    a->strides[0] = a->strides[1] = 2;
    a->ceil_mode = true;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[1,1,1,1]");

    /* ResNet stem: k3 s2 p1 on 112 -> 56 */
    t_reset();
    x = t_in("x", "f32[1,64,112,112]"), y = t_act("y");
    n = T_NODE(SC_OP_MAX_POOL, "mp", L(x), L(y));
    a = &T_ATTRS(n)->window;
    a->n_spatial = 2;
    a->kernel_shape[0] = a->kernel_shape[1] = 3;
    a->strides[0] = a->strides[1] = 2;
    a->pads[0] = a->pads[1] = a->pads[2] = a->pads[3] = 1;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[1,64,56,56]");

    /* AveragePool with dilations (3-D): window 2*(2-1)+1 = 3; ceil((32 - 3) / 2) + 1 = 16 vs floor: 15 */
    t_reset();
    x = t_in("x", "f32[1,1,32,32,32]"), y = t_act("y");
    n = T_NODE(SC_OP_AVERAGE_POOL, "ap", L(x), L(y));
    a = &T_ATTRS(n)->window;
    a->n_spatial = 3;
    for (int i = 0; i < 3; i++) a->kernel_shape[i] = a->dilations[i] = a->strides[i] = 2;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[1,1,15,15,15]");
    a->ceil_mode = true;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[1,1,16,16,16]");
    /* SAME_UPPER pools: ceil(32 / 2) */
    a->ceil_mode = false;
    a->auto_pad = SC_AUTO_PAD_SAME_UPPER;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[1,1,16,16,16]");

    t_reset();
    x = t_in("x", "f32[2,3,7,5]"), y = t_act("y");
    n = T_NODE(SC_OP_GLOBAL_AVERAGE_POOL, "gap", L(x), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[2,3,1,1]");
}

static void test_norm_gemm(void) {
    t_reset();
    int x = t_in("x", "f32[2,3,5,5]"), s = t_in("s", "f32[3]"), b = t_in("b", "f32[3]"), m = t_in("m", "f32[3]"),
        v = t_in("v", "f32[3]"), y = t_act("y"), rm = t_act("rm"), rv = t_act("rv");
    int n = T_NODE(SC_OP_BATCH_NORM, "bn", L(x, s, b, m, v), L(y, rm, rv));
    T_ATTRS(n)->batch_norm.training_mode = true;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[2,3,5,5]");
    CHECK_DESC(rm, "f32[3]");
    CHECK_DESC(rv, "f32[3]");
    int bad = t_in("bad", "f32[4]");
    n = T_NODE(SC_OP_BATCH_NORM, "bn_bad", L(x, s, b, bad, v), L(y));
    EXPECT_ERROR(n, "f32[2,3,5,5]", "f32[4]");

    /* Gemm transA transB: A' = [3,4], B' = [4,5] */
    t_reset();
    int a = t_in("a", "f32[4,3]"), bb = t_in("b", "f32[5,4]"), c = t_in("c", "f32[5]"), c2 = t_in("c2", "f32[3,1]"),
        c3 = t_in("c3", "f32[4]");
    y = t_act("y");
    n = T_NODE(SC_OP_GEMM, "gemm", L(a, bb, c), L(y));
    T_ATTRS(n)->gemm = (sc_gemm_attrs){.alpha = 1, .beta = 1, .trans_a = true, .trans_b = true};
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[3,5]");
    G.nodes[n].in[2] = c2;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[3,5]");
    G.nodes[n].in[2] = c3;
    EXPECT_ERROR(n, "f32[4]", NULL);
    T_ATTRS(n)->gemm.trans_b = false;
    G.nodes[n].in[2] = c;
    EXPECT_ERROR(n, "f32[4,3]", "f32[5,4]");

    /* MatMul: numpy batched broadcast and 1-D operands */
    t_reset();
    int p = t_in("p", "f32[2,1,3,4]"), q = t_in("q", "f32[5,4,2]"), v4 = t_in("v4", "f32[4]"), r = t_in("r", "f32[2,4,3]");
    y = t_act("y");
    n = T_NODE(SC_OP_MATMUL, "mm", L(p, q), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[2,5,3,2]");
    G.nodes[n].in[0] = v4, G.nodes[n].in[1] = r;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[2,3]");
    G.nodes[n].in[0] = p, G.nodes[n].in[1] = v4;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[2,1,3]");
    G.nodes[n].in[0] = v4;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[]");
    G.nodes[n].in[0] = r, G.nodes[n].in[1] = r;
    EXPECT_ERROR(n, "f32[2,4,3]", NULL);

    /* Softmax / LayerNormalization */
    t_reset();
    x = t_in("x", "f32[2,5,8]"), s = t_in("s", "f32[8]"), y = t_act("y");
    int mean = t_act("mean"), isd = t_act("isd");
    n = T_NODE(SC_OP_SOFTMAX, "sm", L(x), L(y));
    T_ATTRS(n)->axis.axis = -1;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[2,5,8]");
    T_ATTRS(n)->axis.axis = 3;
    EXPECT_ERROR(n, "f32[2,5,8]", NULL);
    n = T_NODE(SC_OP_LAYER_NORM, "ln", L(x, s), L(y, mean, isd));
    T_ATTRS(n)->layer_norm.axis = -1;
    EXPECT_OK(n);
    CHECK_DESC(mean, "f32[2,5,1]");
    CHECK_DESC(isd, "f32[2,5,1]");
    T_ATTRS(n)->layer_norm.axis = 1;
    EXPECT_OK(n);
    CHECK_DESC(mean, "f32[2,1,1]");

    int mask = t_act("mask");
    n = T_NODE(SC_OP_DROPOUT, "drop", L(x), L(y, mask));
    EXPECT_OK(n);
    CHECK_DESC(mask, "bool[2,5,8]");
}

static void test_resize(void) {
    t_reset();
    int x = t_in("x", "f32[1,3,10,10]"), y = t_act("y");
    int scales = t_const_f32("scales", 4, (float[]){1, 1, 2, 0.35f});
    int n = T_NODE(SC_OP_RESIZE, "rs", L(x, -1, scales), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[1,3,20,3]"); /* floor(10 * 0.35) */

    int sizes = t_const_i64("sizes", 2, (int64_t[]){15, 20});
    n = T_NODE(SC_OP_RESIZE, "rs2", L(x, -1, -1, sizes), L(y));
    sc_resize_attrs *a = &T_ATTRS(n)->resize;
    a->n_axes = 2, a->axes[0] = 2, a->axes[1] = -1;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[1,3,15,20]");
    a->keep_aspect_ratio_policy = SC_KEEP_ASPECT_NOT_LARGER; /* scale min(1.5, 2) */
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[1,3,15,15]");
    a->keep_aspect_ratio_policy = SC_KEEP_ASPECT_NOT_SMALLER;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[1,3,20,20]");
    a->n_axes = 0; /* sizes for all 4 axes expected */
    EXPECT_ERROR(n, "f32[1,3,10,10]", NULL);
}

static void test_elementwise(void) {
    t_reset();
    int a = t_in("a", "f32[2,1,4]"), b = t_in("b", "f32[3,1]"), c = t_in("c", "f32[2,3]"), d = t_in("d", "f32[4,3]"),
        e = t_in("e", "i64[]"), cond = t_in("cond", "bool[3,1]"), s = t_in("s", "f32[]"), y = t_act("y");
    int n = T_NODE(SC_OP_ADD, "add", L(a, b), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[2,3,4]");
    n = T_NODE(SC_OP_MUL, "bad_mul", L(c, d), L(y));
    EXPECT_ERROR(n, "f32[2,3]", "f32[4,3]");
    n = T_NODE(SC_OP_SUB, "mixed", L(a, e), L(y));
    EXPECT_ERROR(n, "f32", "i64");
    n = T_NODE(SC_OP_POW, "pow", L(a, e), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[2,1,4]");
    n = T_NODE(SC_OP_LESS, "less", L(a, b), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "bool[2,3,4]");
    n = T_NODE(SC_OP_WHERE, "where", L(cond, a, s), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[2,3,4]");
    n = T_NODE(SC_OP_MAX, "max3", L(s, b, a), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[2,3,4]");
    n = T_NODE(SC_OP_CAST, "cast", L(a), L(y));
    T_ATTRS(n)->cast.to = SC_I64;
    EXPECT_OK(n);
    CHECK_DESC(y, "i64[2,1,4]");
    n = T_NODE(SC_OP_GELU, "gelu", L(c), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[2,3]");
    n = T_NODE(SC_OP_CLIP, "clip", L(c, s, s), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[2,3]");
    n = T_NODE(SC_OP_AND, "and", L(cond, cond), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "bool[3,1]");
    n = T_NODE(SC_OP_NOT, "not_f32", L(c), L(y));
    EXPECT_ERROR(n, "f32[2,3]", NULL);
}

static void test_reduce(void) {
    t_reset();
    int x = t_in("x", "f32[2,3,4]"), y = t_act("y");
    int ax1 = t_const_i64("ax1", 1, (int64_t[]){1}), axm = t_const_i64("axm", 1, (int64_t[]){-1}),
        none = t_const_i64("none", 0, NULL), dup = t_const_i64("dup", 2, (int64_t[]){1, -2});
    int n = T_NODE(SC_OP_REDUCE_MEAN, "rm", L(x, ax1), L(y));
    T_ATTRS(n)->reduce.keepdims = true;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[2,1,4]");
    T_ATTRS(n)->reduce.keepdims = false;
    G.nodes[n].in[1] = axm;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[2,3]");
    G.nodes[n].in[1] = none; /* empty axes: all of them */
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[]");
    T_ATTRS(n)->reduce.keepdims = true;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[1,1,1]");
    T_ATTRS(n)->reduce.noop_with_empty_axes = true;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[2,3,4]");
    n = T_NODE(SC_OP_REDUCE_SUM, "rs", L(x), L(y)); /* axes omitted */
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[]");
    n = T_NODE(SC_OP_REDUCE_SUM, "rs_dup", L(x, dup), L(y));
    EXPECT_ERROR(n, "f32[2,3,4]", NULL);
    int act = t_in("runtime_axes", "i64[1]");
    n = T_NODE(SC_OP_REDUCE_SUM, "rs_rt", L(x, act), L(y));
    EXPECT_ERROR(n, "runtime_axes", "constant");
}

static void test_reshape_family(void) {
    t_reset();
    int x = t_in("x", "f32[2,3,4]"), y = t_act("y");
    int s1 = t_const_i64("s1", 2, (int64_t[]){0, -1}), s2 = t_const_i64("s2", 3, (int64_t[]){4, 0, -1}),
        s3 = t_const_i64("s3", 2, (int64_t[]){5, -1});
    int n = T_NODE(SC_OP_RESHAPE, "r", L(x, s1), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[2,12]");
    G.nodes[n].in[1] = s2;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[4,3,2]");
    G.nodes[n].in[1] = s3;
    EXPECT_ERROR(n, "f32[2,3,4]", NULL);
    int z = t_in("z", "f32[0,7]"), s4 = t_const_i64("s4", 2, (int64_t[]){7, 0});
    n = T_NODE(SC_OP_RESHAPE, "rz", L(z, s4), L(y));
    T_ATTRS(n)->reshape.allowzero = true;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[7,0]");

    n = T_NODE(SC_OP_FLATTEN, "fl", L(x), L(y));
    T_ATTRS(n)->axis.axis = 0;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[1,24]");
    T_ATTRS(n)->axis.axis = -1;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[6,4]");

    n = T_NODE(SC_OP_TRANSPOSE, "tr", L(x), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[4,3,2]");
    T_ATTRS(n)->transpose = (sc_transpose_attrs){3, {1, 2, 0}};
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[3,4,2]");

    int w = t_in("w", "f32[1,3,1,5]"), axm2 = t_const_i64("axm2", 1, (int64_t[]){-2}),
        ax1 = t_const_i64("ax1", 1, (int64_t[]){1});
    n = T_NODE(SC_OP_SQUEEZE, "sq_all", L(w), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[3,5]");
    n = T_NODE(SC_OP_SQUEEZE, "sq", L(w, axm2), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[1,3,5]");
    n = T_NODE(SC_OP_SQUEEZE, "sq_bad", L(w, ax1), L(y));
    EXPECT_ERROR(n, "f32[1,3,1,5]", NULL);
    int uax = t_const_i64("uax", 2, (int64_t[]){0, -1});
    n = T_NODE(SC_OP_UNSQUEEZE, "usq", L(x, uax), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[1,2,3,4,1]");
}

static void test_concat_split_slice(void) {
    t_reset();
    int a = t_in("a", "f32[2,3,4]"), b = t_in("b", "f32[2,5,4]"), y = t_act("y");
    int n = T_NODE(SC_OP_CONCAT, "cat", L(a, b, a), L(y));
    T_ATTRS(n)->axis.axis = -2;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[2,11,4]");
    T_ATTRS(n)->axis.axis = 0;
    EXPECT_ERROR(n, "f32[2,3,4]", "f32[2,5,4]");

    int x = t_in("x", "f32[10,6]"), o1 = t_act("o1"), o2 = t_act("o2"), o3 = t_act("o3");
    n = T_NODE(SC_OP_SPLIT, "split_num", L(x), L(o1, o2, o3));
    T_ATTRS(n)->axis.num_outputs = 3; /* ceil(10 / 3) = 4: 4, 4, 2 */
    EXPECT_OK(n);
    CHECK_DESC(o1, "f32[4,6]");
    CHECK_DESC(o2, "f32[4,6]");
    CHECK_DESC(o3, "f32[2,6]");
    int sp = t_const_i64("sp", 3, (int64_t[]){2, 3, 5});
    n = T_NODE(SC_OP_SPLIT, "split_sizes", L(x, sp), L(o1, o2, o3));
    EXPECT_OK(n);
    CHECK_DESC(o1, "f32[2,6]");
    CHECK_DESC(o3, "f32[5,6]");
    n = T_NODE(SC_OP_SPLIT, "split_even", L(x), L(o1, o2));
    T_ATTRS(n)->axis.axis = -1;
    EXPECT_OK(n);
    CHECK_DESC(o2, "f32[10,3]");
    n = T_NODE(SC_OP_SPLIT, "split_uneven", L(x), L(o1, o2, o3));
    T_ATTRS(n)->axis.axis = 0;
    EXPECT_ERROR(n, "f32[10,6]", NULL);

    /* Slice, checked against numpy: a[-1::-1] -> 10, a[8:1:-3] -> 3, a[-100:100] -> 10, a[5:2] -> 0,
     * b[:, 0::2] -> 5 */
    int v = t_in("v", "f32[10]"), m = t_in("m", "f32[3,10]");
    struct { int64_t start, end, step; const char *want; } cases[] = {
        {-1, INT64_MIN, -1, "f32[10]"}, {8, 1, -3, "f32[3]"}, {-100, 100, 1, "f32[10]"},
        {5, 2, 1, "f32[0]"},  {9, -100, -2, "f32[5]"}, {3, -3, 2, "f32[2]"},
        {0, 10, INT64_MAX, "f32[1]"}, {9, -100, INT64_MIN, "f32[1]"}, {-1, 0, INT64_MIN + 1, "f32[1]"},
    };
    /* SliceGrad checks dY against the same rule: a dY of the slice's shape passes, one element more
     * fails (steps near +-2^63 once overflowed its own copy of the rule). */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "st%zu", i);
        int st = t_const_i64(nm, 1, &cases[i].start);
        nm[1] = 'e';
        int en = t_const_i64(nm, 1, &cases[i].end);
        nm[1] = 'p';
        int stp = t_const_i64(nm, 1, &cases[i].step);
        n = T_NODE(SC_OP_SLICE, "slice", L(v, st, en, -1, stp), L(y));
        EXPECT_OK(n);
        CHECK_DESC(y, cases[i].want);
        char ok[32], bad[32], name[32];
        int64_t len = G.values[y].desc.dims[0];
        snprintf(ok, sizeof ok, "f32[%lld]", (long long)len);
        snprintf(bad, sizeof bad, "f32[%lld]", (long long)len + 1);
        snprintf(name, sizeof name, "dy%zu", i);
        int dy = t_in(name, ok), dx = t_act(name + 1);
        name[0] = 'b';
        int dy_bad = t_in(name, bad);
        n = T_NODE(SC_OP_SLICE_GRAD, "slice_grad", L(dy, v, st, en, -1, stp), L(dx));
        EXPECT_OK(n);
        CHECK_DESC(dx, "f32[10]");
        n = T_NODE(SC_OP_SLICE_GRAD, "slice_grad_bad", L(dy_bad, v, st, en, -1, stp), L(dx));
        EXPECT_ERROR(n, bad, NULL);
    }
    int z = t_const_i64("zero", 1, (int64_t[]){0}), big = t_const_i64("big", 1, (int64_t[]){INT64_MAX}),
        axl = t_const_i64("axl", 1, (int64_t[]){-1}), two = t_const_i64("two", 1, (int64_t[]){2});
    n = T_NODE(SC_OP_SLICE, "slice_axes", L(m, z, big, axl, two), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[3,5]");
    n = T_NODE(SC_OP_SLICE, "slice_step0", L(m, z, big, axl, z), L(y));
    EXPECT_ERROR(n, "f32[3,10]", NULL);
}

static void test_gather_expand_pad(void) {
    t_reset();
    int d = t_in("d", "f32[3,4,5]"), idx = t_in("idx", "i64[2,6]"), sc = t_in("sc", "i64[]"), y = t_act("y");
    int n = T_NODE(SC_OP_GATHER, "g", L(d, idx), L(y));
    T_ATTRS(n)->axis.axis = -1;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[3,4,2,6]");
    T_ATTRS(n)->axis.axis = -3;
    G.nodes[n].in[1] = sc;
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[4,5]");
    T_ATTRS(n)->axis.axis = 3;
    EXPECT_ERROR(n, "f32[3,4,5]", NULL);

    int x = t_in("x", "f32[3,1]"), shp = t_const_i64("shp", 3, (int64_t[]){2, 1, 4}),
        shp_bad = t_const_i64("shp_bad", 2, (int64_t[]){2, 3}); /* 3 vs 2 */
    n = T_NODE(SC_OP_EXPAND, "ex", L(x, shp), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[2,3,4]");
    n = T_NODE(SC_OP_EXPAND, "ex_bad", L(x, shp_bad), L(y));
    EXPECT_ERROR(n, "f32[3,1]", NULL);

    int img = t_in("img", "f32[1,3,4,4]"), pads = t_const_i64("pads", 8, (int64_t[]){0, 0, 1, 1, 0, 0, 1, 2}),
        pads2 = t_const_i64("pads2", 4, (int64_t[]){1, -1, 3, 4}), axes = t_const_i64("axes", 2, (int64_t[]){2, 3});
    n = T_NODE(SC_OP_PAD, "pad", L(img, pads), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[1,3,6,7]");
    n = T_NODE(SC_OP_PAD, "pad_axes", L(img, pads2, -1, axes), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[1,3,8,7]");

    n = T_NODE(SC_OP_TRILU, "tri", L(img), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[1,3,4,4]");
}

static void test_shape_ops(void) {
    t_reset();
    int x = t_in("x", "f32[2,3,4,5]"), y = t_act("y");
    int n = T_NODE(SC_OP_SHAPE, "shape", L(x), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "i64[4]");
    T_ATTRS(n)->shape = (sc_shape_attrs){1, -1, true};
    EXPECT_OK(n);
    CHECK_DESC(y, "i64[2]");
    T_ATTRS(n)->shape = (sc_shape_attrs){-10, 0, false};
    EXPECT_OK(n);
    CHECK_DESC(y, "i64[4]");

    int s = t_const_i64("s", 2, (int64_t[]){2, 3});
    n = T_NODE(SC_OP_CONSTANT_OF_SHAPE, "cos", L(s), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[2,3]");
    T_ATTRS(n)->fill.dtype = SC_I64;
    EXPECT_OK(n);
    CHECK_DESC(y, "i64[2,3]");

    int a = t_const_f32("a", -1, (float[]){1}), b = t_const_f32("b", -1, (float[]){2}),
        c = t_const_f32("c", -1, (float[]){0.3f});
    n = T_NODE(SC_OP_RANGE, "range", L(a, b, c), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "f32[4]"); /* ceil(1 / 0.3) */
    int i10 = t_const_i64("i10", 1, (int64_t[]){10}), i4 = t_const_i64("i4", 1, (int64_t[]){4}),
        im2 = t_const_i64("im2", 1, (int64_t[]){-2});
    n = T_NODE(SC_OP_RANGE, "range_down", L(i10, i4, im2), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "i64[3]");
    n = T_NODE(SC_OP_RANGE, "range_empty", L(i4, i10, im2), L(y));
    EXPECT_OK(n);
    CHECK_DESC(y, "i64[0]");
}

int main(void) {
    graph_init(&G);
    test_table();
    test_conv();
    test_pool();
    test_norm_gemm();
    test_resize();
    test_elementwise();
    test_reduce();
    test_reshape_family();
    test_concat_split_slice();
    test_gather_expand_pad();
    test_shape_ops();
    graph_free(&G);
    if (t_failures) {
        fprintf(stderr, "test_shape: %d failures\n", t_failures);
        return 1;
    }
    printf("test_shape: ok\n");
    return 0;
}
