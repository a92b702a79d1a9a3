/* Graph passes: dim binding, identity removal, dead-code elimination, shape inference with constant
 * folding (PyTorch's Shape->Gather->Unsqueeze->Concat->Reshape chain), graph_prepare end to end;
 * and deferred value naming (graph_names_defer / graph_names_resolve). */
#include <stdint.h>

#include "backends/cpu/cpu.h"
#include "graph/passes.h"
#include "shape_test_util.h"

static void t_io(int *ids, int n, bool outputs) {
    int *arr = sc_arena_alloc_array(&G.arena, (size_t)(n ? n : 1), sizeof(int));
    memcpy(arr, ids, sizeof(int) * (size_t)n);
    if (outputs) {
        G.outputs = arr, G.n_outputs = n;
        for (int i = 0; i < n; i++) G.values[ids[i]].is_output = true;
    } else {
        G.inputs = arr, G.n_inputs = n;
    }
}
#define T_INPUTS(...) t_io((int[]){__VA_ARGS__}, sizeof((int[]){__VA_ARGS__}) / sizeof(int), false)
#define T_OUTPUTS(...) t_io((int[]){__VA_ARGS__}, sizeof((int[]){__VA_ARGS__}) / sizeof(int), true)

static void t_names(int v, const char *d0, const char *d1) {
    CHECK(!graph_set_dim_name(&G, v, 0, d0) && !graph_set_dim_name(&G, v, 1, d1), "naming dims of %d", v);
}

#define EXPECT_OK(expr)                                                                            \
    do {                                                                                           \
        sc_status st_ = (expr);                                                                    \
        CHECK(!st_, "%s: %s", #expr, st_ ? sc_status_message(st_) : "");                          \
        sc_status_free(st_);                                                                       \
    } while (0)

#define EXPECT_MSG(expr, want)                                                                     \
    do {                                                                                           \
        sc_status st_ = (expr);                                                                    \
        CHECK(st_ && strstr(sc_status_message(st_), want), "%s: got '%s', want '%s'", #expr,      \
              st_ ? sc_status_message(st_) : "success", want);                                     \
        sc_status_free(st_);                                                                       \
    } while (0)

static void bind_graph(void) {
    t_reset();
    int ids = t_in("ids", "i64[?,?]"), mask = t_in("mask", "f32[?,?]"), y = t_value("y", SC_VALUE_ACT, "f32[?,?,8]");
    t_names(ids, "batch", "seq");
    t_names(mask, "batch", "seq");
    t_names(y, "batch", "seq");
    T_INPUTS(ids, mask);
}

static void test_bind(void) {
    bind_graph();
    EXPECT_MSG(graph_bind_dims(&G, &(sc_bind_options){0}), "input 'ids' dim 1 ('seq') is symbolic: pass --seq N or --dim seq=N");

    bind_graph();
    EXPECT_OK(graph_bind_dims(&G, &(sc_bind_options){.seq = 16}));
    CHECK_DESC(graph_find_value(&G, "ids"), "i64[1,16]");
    CHECK_DESC(graph_find_value(&G, "mask"), "f32[1,16]"); /* float input: bound by name through 'ids' */
    CHECK_DESC(graph_find_value(&G, "y"), "f32[1,16,8]");

    bind_graph();
    sc_dim_binding dims[] = {{"seq", 32}, {"batch", 4}};
    EXPECT_OK(graph_bind_dims(&G, &(sc_bind_options){.batch = 2, .seq = 16, .dims = dims, .n_dims = 2}));
    CHECK_DESC(graph_find_value(&G, "ids"), "i64[4,32]");
    CHECK_DESC(graph_find_value(&G, "mask"), "f32[4,32]");

    bind_graph();
    EXPECT_OK(graph_bind_dims(&G, &(sc_bind_options){.batch = 8, .seq = 3}));
    CHECK_DESC(graph_find_value(&G, "ids"), "i64[8,3]");

    bind_graph();
    sc_dim_binding zero[] = {{"seq", 0}};
    EXPECT_MSG(graph_bind_dims(&G, &(sc_bind_options){.dims = zero, .n_dims = 1}), "--dim seq=0");
    bind_graph();
    EXPECT_MSG(graph_bind_dims(&G, &(sc_bind_options){.batch = -2, .seq = 4}), "--batch");

    /* an image input: dim 0 from --batch; a symbolic spatial dim needs --dim */
    t_reset();
    int x = t_in("x", "f32[?,3,?,224]");
    CHECK(!graph_set_dim_name(&G, x, 0, "N"), "naming a dim");
    CHECK(!graph_set_dim_name(&G, x, 2, "h"), "naming a dim");
    T_INPUTS(x);
    EXPECT_MSG(graph_bind_dims(&G, NULL), "input 'x' dim 2 ('h') is symbolic: pass --dim h=N");
    sc_dim_binding h[] = {{"h", 200}};
    EXPECT_OK(graph_bind_dims(&G, &(sc_bind_options){.dims = h, .n_dims = 1}));
    CHECK_DESC(x, "f32[1,3,200,224]");
}

static void test_identity(void) {
    /* x -> Relu -> a -> Identity -> b -> Relu -> c: the second Relu reads a */
    t_reset();
    int x = t_in("x", "f32[2,3]"), a = t_act("a"), b = t_act("b"), c = t_act("c");
    T_NODE(SC_OP_RELU, "r1", L(x), L(a));
    T_NODE(SC_OP_IDENTITY, "id", L(a), L(b));
    T_NODE(SC_OP_RELU, "r2", L(b), L(c));
    T_INPUTS(x);
    T_OUTPUTS(c);
    EXPECT_OK(graph_remove_identity(&G));
    CHECK(G.n_nodes == 2 && G.nodes[1].in[0] == a, "identity not bypassed (%d nodes)", G.n_nodes);

    /* the identity's output is a graph output: Relu writes 'out' directly and Neg reads it */
    t_reset();
    x = t_in("x", "f32[2,3]"), a = t_act("a");
    int out = t_act("out"), neg = t_act("neg");
    T_NODE(SC_OP_RELU, "r1", L(x), L(a));
    T_NODE(SC_OP_NEG, "neg", L(a), L(neg));
    T_NODE(SC_OP_IDENTITY, "id", L(a), L(out));
    T_INPUTS(x);
    T_OUTPUTS(out, neg);
    EXPECT_OK(graph_remove_identity(&G));
    CHECK(G.n_nodes == 2, "want 2 nodes, got %d", G.n_nodes);
    CHECK(G.nodes[0].out[0] == out && G.nodes[1].in[0] == out && G.values[out].producer == 0,
          "output not renamed: relu writes '%s', neg reads '%s'", G.values[G.nodes[0].out[0]].name,
          G.values[G.nodes[1].in[0]].name);
    CHECK(G.outputs[0] == out && G.outputs[1] == neg, "graph outputs changed");

    /* input -> Identity -> output must stay (a copy under the output's name); a Dropout in the same
     * position becomes an Identity; a Dropout whose mask is used stays a Dropout */
    t_reset();
    x = t_in("x", "f32[2,3]");
    int y = t_act("y"), z = t_act("z"), d = t_act("d"), mask = t_act("mask"), m2 = t_act("m2"), w = t_act("w");
    T_NODE(SC_OP_IDENTITY, "keep", L(x), L(y));
    T_NODE(SC_OP_DROPOUT, "drop_out", L(x), L(z));
    T_NODE(SC_OP_DROPOUT, "drop_mask", L(x), L(d, mask));
    T_NODE(SC_OP_NOT, "use_mask", L(mask), L(m2));
    T_NODE(SC_OP_DROPOUT, "drop_plain", L(d), L(w));
    T_INPUTS(x);
    T_OUTPUTS(y, z, m2, w);
    EXPECT_OK(graph_remove_identity(&G));
    CHECK(G.n_nodes == 4, "want 4 nodes, got %d", G.n_nodes);
    CHECK(G.nodes[0].op == SC_OP_IDENTITY && G.nodes[1].op == SC_OP_IDENTITY && G.nodes[1].n_out == 1,
          "input->output Identity/Dropout not kept as Identity");
    CHECK(G.nodes[2].op == SC_OP_DROPOUT, "Dropout with a used mask must stay");
    CHECK(G.nodes[3].op == SC_OP_NOT, "order changed");
    CHECK(G.values[w].producer == 2, "output 'w' should now be written by drop_mask");
}

static void test_dce(void) {
    t_reset();
    int x = t_in("x", "f32[4]"), unused_in = t_in("unused", "f32[4]"), a = t_act("a"), b = t_act("b"), c = t_act("c");
    T_NODE(SC_OP_NEG, "dead1", L(x), L(b));
    T_NODE(SC_OP_RELU, "live", L(x), L(a));
    T_NODE(SC_OP_EXP, "dead2", L(b), L(c));
    T_INPUTS(x, unused_in);
    T_OUTPUTS(a);
    EXPECT_OK(graph_eliminate_dead_code(&G));
    CHECK(G.n_nodes == 1 && G.nodes[0].op == SC_OP_RELU, "DCE left %d nodes", G.n_nodes);
    CHECK(G.n_inputs == 2, "graph inputs must stay as declared");
}

static void test_prepare_convnet(void) {
    t_reset();
    int x = t_in("x", "f32[?,3,32,32]"), w = t_value("w", SC_VALUE_PARAM, "f32[8,3,3,3]"), c = t_act("c"),
        r = t_act("r"), p = t_act("p"), f = t_act("f"), fw = t_value("fw", SC_VALUE_PARAM, "f32[10,8]"),
        fb = t_value("fb", SC_VALUE_PARAM, "f32[10]"), y = t_act("y"), yy = t_act("yy");
    CHECK(!graph_set_dim_name(&G, x, 0, "N"), "naming a dim");
    int n = T_NODE(SC_OP_CONV, "conv", L(x, w), L(c));
    T_ATTRS(n)->window.pads[0] = T_ATTRS(n)->window.pads[1] = 1;
    T_ATTRS(n)->window.pads[2] = T_ATTRS(n)->window.pads[3] = 1;
    T_NODE(SC_OP_RELU, "relu", L(c), L(r));
    T_NODE(SC_OP_GLOBAL_AVERAGE_POOL, "gap", L(r), L(p));
    n = T_NODE(SC_OP_FLATTEN, "flat", L(p), L(f));
    T_ATTRS(n)->axis.axis = 1;
    n = T_NODE(SC_OP_GEMM, "fc", L(f, fw, fb), L(y));
    T_ATTRS(n)->gemm = (sc_gemm_attrs){.alpha = 1, .beta = 1, .trans_b = true};
    T_NODE(SC_OP_IDENTITY, "out", L(y), L(yy));
    T_INPUTS(x);
    T_OUTPUTS(yy);
    sc_status st = graph_infer_shapes(&G, cpu_evaluator());
    CHECK(st && strstr(sc_status_message(st), "node 'conv' (Conv): input 0 ('x') has no static shape"),
          "unbound input: %s", st ? sc_status_message(st) : "success");
    sc_status_free(st);
    EXPECT_OK(graph_prepare(&G, &(sc_bind_options){.batch = 5, .eval = cpu_evaluator()}));
    CHECK_DESC(c, "f32[5,8,32,32]");
    CHECK_DESC(yy, "f32[5,10]");
    CHECK(G.n_nodes == 5, "want 5 nodes after identity removal, got %d", G.n_nodes);
}

/* graph_fold_transpose_into_gemm: h [2, 3, 4] @ Transpose(W [5, 4]) becomes Reshape -> Gemm(transB)
 * reading W -> Reshape to the MatMul's output (its name and dims kept); a 2-D x @ Transpose(W) becomes
 * the Gemm in place; a Transpose with another reader stays for it, and a MatMul whose B is no
 * transposed matrix is left alone. */
static void test_transpose_gemm(void) {
    t_reset();
    int h = t_in("h", "f32[2,3,4]"), x = t_in("x", "f32[6,4]"), w = t_value("w", SC_VALUE_PARAM, "f32[5,4]"),
        u = t_value("u", SC_VALUE_PARAM, "f32[4,5]"), wt = t_act("wt"), y = t_act("y"), z = t_act("z"), q = t_act("q"),
        e = t_act("e");
    T_NODE(SC_OP_TRANSPOSE, "tr", L(w), L(wt));
    T_NODE(SC_OP_MATMUL, "head", L(h, wt), L(y));
    T_NODE(SC_OP_MATMUL, "flat", L(x, wt), L(z));
    T_NODE(SC_OP_MATMUL, "plain", L(x, u), L(q));
    T_NODE(SC_OP_EXP, "other", L(wt), L(e));
    T_INPUTS(h, x);
    T_OUTPUTS(y, z, q, e);
    EXPECT_OK(graph_infer_shapes(&G, cpu_evaluator()));
    int n = -1;
    EXPECT_OK(graph_fold_transpose_into_gemm(&G, &n));
    CHECK(n == 2, "want 2 MatMuls rewritten, got %d", n);
    CHECK_DESC(y, "f32[2,3,5]");
    CHECK_DESC(z, "f32[6,5]");
    const sc_node *yp = &G.nodes[G.values[y].producer], *zp = &G.nodes[G.values[z].producer];
    CHECK(yp->op == SC_OP_RESHAPE && strcmp(yp->name, "head") == 0, "y made by %s '%s'", sc_op_name(yp->op), yp->name);
    const sc_node *gm = &G.nodes[G.values[yp->in[0]].producer];
    CHECK(gm->op == SC_OP_GEMM && gm->in[1] == w && gm->attrs->gemm.trans_b && !gm->attrs->gemm.trans_a,
          "head's product: %s reading %d", sc_op_name(gm->op), gm->in[1]);
    CHECK_DESC(gm->out[0], "f32[6,5]");
    CHECK_DESC(gm->in[0], "f32[6,4]");
    CHECK(zp->op == SC_OP_GEMM && zp->in[0] == x && zp->in[1] == w && zp->attrs->gemm.trans_b, "flat: %s", sc_op_name(zp->op));
    CHECK(G.nodes[G.values[q].producer].op == SC_OP_MATMUL, "plain MatMul must stay");
    CHECK(G.values[wt].producer >= 0 && G.nodes[G.values[wt].producer].op == SC_OP_TRANSPOSE, "the Transpose Exp reads stays");
    int bad = -1;
    CHECK(graph_is_topo_sorted(&G, &bad), "graph out of order at node %d", bad);
}

/* The node reading value v as its input k, or -1. */
static int reader_of(int v, int *k) {
    for (int i = 0; i < G.n_nodes; i++)
        for (int j = 0; j < G.nodes[i].n_in; j++)
            if (G.nodes[i].in[j] == v) {
                *k = j;
                return i;
            }
    return -1;
}

/* bf16 mixed precision (graph/pass_precision.c): x -> MatMul(x, w) (low) -> Exp (fp32) -> Add with
 * the MatMul's output (follow, mixed: promoted) -> Relu (follow) -> output; and the MatMul's output is
 * a graph output too, which must keep its f32 type and name. */
static void test_precision(void) {
    t_reset();
    int x = t_in("x", "f32[2,4]"), w = t_value("w", SC_VALUE_PARAM, "f32[4,3]"), m = t_act("m"), s = t_act("s"),
        a = t_act("a"), r = t_act("r");
    T_NODE(SC_OP_MATMUL, "mm", L(x, w), L(m));
    T_NODE(SC_OP_EXP, "exp", L(m), L(s));
    T_NODE(SC_OP_ADD, "add", L(s, m), L(a));
    T_NODE(SC_OP_RELU, "relu", L(a), L(r));
    T_INPUTS(x);
    T_OUTPUTS(r, m);
    EXPECT_OK(graph_prepare(&G, &(sc_bind_options){.eval = cpu_evaluator(), .precision = SC_BF16}));
    int k = -1, mm = -1;
    for (int i = 0; i < G.n_nodes; i++)
        if (G.nodes[i].op == SC_OP_MATMUL) mm = i;
    CHECK(mm >= 0, "the MatMul is gone");
    if (mm < 0) return;
    for (int j = 0; j < 2; j++) {
        int v = G.nodes[mm].in[j], p = G.values[v].producer;
        CHECK(G.values[v].desc.dtype == SC_BF16 && p >= 0 && G.nodes[p].op == SC_OP_CAST,
              "MatMul input %d is not a bf16 Cast (%s)", j, sc_dtype_name(G.values[v].desc.dtype));
    }
    CHECK(G.nodes[G.values[w].consumers[0]].op == SC_OP_CAST && G.values[w].desc.dtype == SC_F32,
          "the parameter must stay f32, read through a Cast");
    int low = G.nodes[mm].out[0];
    CHECK(low != m && G.values[low].desc.dtype == SC_BF16, "the MatMul must write a bf16 value");
    int smn = reader_of(low, &k), soft = -1;
    CHECK(smn >= 0 && G.nodes[smn].op == SC_OP_CAST, "the MatMul's bf16 output is read by a Cast");
    for (int i = 0; i < G.n_nodes; i++)
        if (G.nodes[i].op == SC_OP_EXP) soft = i;
    CHECK(soft >= 0 && G.values[G.nodes[soft].in[0]].desc.dtype == SC_F32 && G.values[s].desc.dtype == SC_F32,
          "Exp runs in f32");
    CHECK(G.values[a].desc.dtype == SC_F32 && G.values[r].desc.dtype == SC_F32, "Add (mixed) and Relu promote to f32");
    CHECK(G.values[m].desc.dtype == SC_F32 && !strcmp(G.values[m].name, "m") && G.values[m].producer >= 0 &&
              G.nodes[G.values[m].producer].op == SC_OP_CAST,
          "the graph output 'm' keeps f32 and its name, cast from the bf16 value");
    int bad = -1;
    CHECK(graph_is_topo_sorted(&G, &bad), "not in topological order at node %d", bad);
}

/* A Linear's bias add (graph/pass_precision.c, "bias"): MatMul(x, w) + b with b a parameter as long
 * as the last dim runs low, b read through a bf16 Cast; + c with c a [2,3] parameter (not a bias)
 * promotes as any mixed Add does. */
static void test_precision_bias(void) {
    t_reset();
    int x = t_in("x", "f32[2,4]"), w = t_value("w", SC_VALUE_PARAM, "f32[4,3]"), b = t_value("b", SC_VALUE_PARAM, "f32[3]"),
        c = t_value("c", SC_VALUE_PARAM, "f32[2,3]"), m = t_act("m"), y = t_act("y"), m2 = t_act("m2"), z = t_act("z");
    T_NODE(SC_OP_MATMUL, "mm", L(x, w), L(m));
    T_NODE(SC_OP_ADD, "bias", L(m, b), L(y));
    T_NODE(SC_OP_MATMUL, "mm2", L(x, w), L(m2));
    T_NODE(SC_OP_ADD, "plus", L(c, m2), L(z));
    T_INPUTS(x);
    T_OUTPUTS(y, z);
    EXPECT_OK(graph_prepare(&G, &(sc_bind_options){.eval = cpu_evaluator(), .precision = SC_BF16}));
    int bias = -1, plus = -1;
    for (int i = 0; i < G.n_nodes; i++)
        if (G.nodes[i].op == SC_OP_ADD) *(!strcmp(G.nodes[i].name, "bias") ? &bias : &plus) = i;
    CHECK(bias >= 0 && plus >= 0, "an Add is gone");
    if (bias < 0 || plus < 0) return;
    const sc_node *n = &G.nodes[bias];
    CHECK(G.values[n->out[0]].desc.dtype == SC_BF16, "the bias add must write bf16, wrote %s",
          sc_dtype_name(G.values[n->out[0]].desc.dtype));
    for (int j = 0; j < 2; j++)
        CHECK(G.values[n->in[j]].desc.dtype == SC_BF16, "bias add input %d is %s", j,
              sc_dtype_name(G.values[n->in[j]].desc.dtype));
    int p = G.values[n->in[1]].producer;
    CHECK(p >= 0 && G.nodes[p].op == SC_OP_CAST && G.nodes[p].in[0] == b, "the bias is read through its Cast");
    CHECK(G.values[b].desc.dtype == SC_F32, "the bias parameter stays f32");
    CHECK(G.values[G.nodes[plus].out[0]].desc.dtype == SC_F32, "an Add of a [2,3] parameter promotes to f32");
    CHECK(G.values[y].desc.dtype == SC_F32 && G.values[z].desc.dtype == SC_F32, "graph outputs keep f32");
}

static bool need_kernels(const char *test, const sc_op *ops, int n) {
    bool ok = true;
    for (int i = 0; i < n; i++)
        if (!sc_cpu_kernels[ops[i]]) {
            fprintf(stderr, "%s: FAIL: CPU kernel for %s is missing (sc_cpu_kernels[SC_OP_...] is NULL), folding cannot run\n",
                    test, sc_op_name(ops[i]));
            ok = false;
        }
    if (!ok) t_failures++;
    return ok;
}

/* PyTorch's x.reshape(x.shape[0], -1): Shape -> Gather(0) -> Unsqueeze(0) -> Concat([-1]) -> Reshape. */
static void test_fold_shape_chain(void) {
    sc_op ops[] = {SC_OP_SHAPE, SC_OP_GATHER, SC_OP_UNSQUEEZE, SC_OP_CONCAT};
    if (!need_kernels("test_fold_shape_chain", ops, 4)) return;
    t_reset();
    int x = t_in("x", "f32[?,3,4,5]"), s = t_act("s"), b0 = t_act("b0"), b1 = t_act("b1"), shp = t_act("shp"),
        y = t_act("y");
    CHECK(!graph_set_dim_name(&G, x, 0, "batch"), "naming a dim");
    int zero = t_value("zero", SC_VALUE_CONST, "i64[]");
    SC_ASSERT(!graph_alloc_data(&G, zero));
    int axes = t_const_i64("axes", 1, (int64_t[]){0}), minus1 = t_const_i64("minus1", 1, (int64_t[]){-1});
    T_NODE(SC_OP_SHAPE, "shape", L(x), L(s));
    T_NODE(SC_OP_GATHER, "gather", L(s, zero), L(b0));
    T_NODE(SC_OP_UNSQUEEZE, "unsqueeze", L(b0, axes), L(b1));
    int cat = T_NODE(SC_OP_CONCAT, "concat", L(b1, minus1), L(shp));
    T_ATTRS(cat)->axis.axis = 0;
    T_NODE(SC_OP_RESHAPE, "reshape", L(x, shp), L(y));
    T_INPUTS(x);
    T_OUTPUTS(y);
    EXPECT_OK(graph_prepare(&G, &(sc_bind_options){.batch = 7, .eval = cpu_evaluator()}));
    CHECK_DESC(y, "f32[7,60]");
    CHECK(G.n_nodes == 1 && G.nodes[0].op == SC_OP_RESHAPE, "want only Reshape left, got %d nodes", G.n_nodes);
    const sc_value *sv = &G.values[shp];
    CHECK(sv->kind == SC_VALUE_CONST && sv->data && ((int64_t *)sv->data)[0] == 7 && ((int64_t *)sv->data)[1] == -1,
          "folded shape is not the constant [7, -1]");
}

/* Parameters may be trained later: a node reading one is never folded. Constants fold. */
static void test_fold_params_never(void) {
    sc_op ops[] = {SC_OP_ADD};
    if (!need_kernels("test_fold_params_never", ops, 1)) return;
    t_reset();
    int p = t_value("p", SC_VALUE_PARAM, "f32[2]"), c = t_const_f32("c", 2, (float[]){1, 2}),
        c2 = t_const_f32("c2", 2, (float[]){10, 20}), a = t_act("a"), b = t_act("b"), y = t_act("y");
    SC_ASSERT(!graph_alloc_data(&G, p));
    T_NODE(SC_OP_ADD, "param_add", L(p, c), L(a));
    T_NODE(SC_OP_ADD, "const_add", L(c, c2), L(b));
    T_NODE(SC_OP_ADD, "out", L(a, b), L(y));
    T_OUTPUTS(y);
    EXPECT_OK(graph_infer_shapes(&G, cpu_evaluator()));
    CHECK(G.n_nodes == 2 && G.values[a].kind == SC_VALUE_ACT, "param node folded or const node kept (%d nodes)", G.n_nodes);
    CHECK(G.values[b].kind == SC_VALUE_CONST && ((float *)G.values[b].data)[1] == 22.0f, "const_add not folded to [11, 22]");
}


static int t_unique(const char *base) {
    sc_status st = SC_OK;
    int id = graph_add_value_unique(&G, base, SC_VALUE_ACT, NULL, &st);
    SC_ASSERT(id >= 0 && !st);
    return id;
}

static void check_name(int v, const char *want) {
    CHECK(!strcmp(G.values[v].name, want), "value %d is named '%s', want '%s'", v, G.values[v].name, want);
    CHECK(graph_find_value(&G, want) == v, "'%s' maps to %d, want %d", want, graph_find_value(&G, want), v);
    CHECK(!G.values[v].name_pending, "'%s' is still pending", want);
}

/* Clashes with earlier values, with each other and with a fixed name added while deferred; a
 * renamed value's producer follows it; nested defers resolve at the outermost. */
static void test_deferred_names(void) {
    t_reset();
    int x = t_act("x");
    t_act("x_1");
    graph_names_defer(&G);
    int p1 = t_unique("x"), p2 = t_unique("y"), p3 = t_unique("y");
    int node = T_NODE(SC_OP_RELU, "y", L(x), L(p3));
    G.values[p3].producer = node;
    graph_names_defer(&G);
    int fixed = t_act("z"), p4 = t_unique("z");
    EXPECT_OK(graph_names_resolve(&G));
    CHECK(graph_find_value(&G, "y") < 0, "a pending name is visible before the outermost resolve");
    CHECK(graph_find_value(&G, "z") == fixed, "a fixed name added while deferred is not entered at once");
    EXPECT_OK(graph_names_resolve(&G));
    check_name(x, "x");
    check_name(p1, "x_2");
    check_name(p2, "y");
    check_name(p3, "y_1");
    CHECK(!strcmp(G.nodes[node].name, "y_1"), "the producer of a renamed value is '%s', want 'y_1'", G.nodes[node].name);
    check_name(fixed, "z");
    check_name(p4, "z_1");
}

/* Without "<b>_<k>" bases, deferred naming gives exactly the names of checking one by one, for 5000
 * values over 40 bases (many clashes) and a map that grows while pending names are entered. */
static void test_deferred_names_match(void) {
    char *want[5000];
    for (int pass = 0; pass < 2; pass++) {
        t_reset();
        t_act("b3");
        t_act("b17");
        if (pass) graph_names_defer(&G);
        uint64_t r = 88172645463325252ull;
        int first = G.n_values;
        for (int i = 0; i < 5000; i++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            char base[16];
            snprintf(base, sizeof base, "b%d", (int)(r % 40));
            t_unique(base);
        }
        if (pass) EXPECT_OK(graph_names_resolve(&G));
        for (int i = 0; i < 5000; i++) {
            const char *name = G.values[first + i].name;
            if (!pass) {
                want[i] = strdup(name);
                continue;
            }
            CHECK(!strcmp(name, want[i]), "value %d: deferred '%s', one by one '%s'", first + i, name, want[i]);
            CHECK(graph_find_value(&G, name) == first + i, "'%s' is not found", name);
            free(want[i]);
        }
    }
}

/* sc_strmap_remove (backward-shift deletion) on a map small enough that probe runs wrap around:
 * after removing a pseudo-random half, every kept key is found with its value and no removed one. */
static void test_strmap_remove(void) {
    enum { N = 3000 };
    static char keys[N][16];
    sc_strmap m;
    sc_strmap_init(&m);
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i * 7919 % 10007);
        CHECK(sc_strmap_put(&m, keys[i], i), "put %s", keys[i]);
    }
    bool gone[N] = {false};
    uint64_t r = 0x2545f4914f6cdd1dull;
    for (int i = 0; i < N; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        if (r & 1) gone[i] = sc_strmap_remove(&m, keys[i]);
    }
    CHECK(!sc_strmap_remove(&m, "absent"), "removing an absent key");
    size_t kept = 0;
    for (int i = 0; i < N; i++) {
        kept += !gone[i];
        CHECK(sc_strmap_get(&m, keys[i]) == (gone[i] ? -1 : i), "%s: got %d", keys[i], sc_strmap_get(&m, keys[i]));
    }
    CHECK(m.count == kept, "count %zu, kept %zu", m.count, kept);
    sc_strmap_free(&m);
}

/* A renamed value frees its name for another. */
static void test_rename_value(void) {
    t_reset();
    int a = t_act("a");
    t_act("a_1");
    EXPECT_OK(graph_value_rename_unique(&G, a));
    check_name(a, "a_2");
    CHECK(graph_find_value(&G, "a") < 0, "the old name is still mapped");
    int b = t_act("a");
    check_name(b, "a");
}

int main(void) {
    graph_init(&G);
    test_bind();
    test_identity();
    test_dce();
    test_prepare_convnet();
    test_precision();
    test_precision_bias();
    test_transpose_gemm();
    test_fold_shape_chain();
    test_fold_params_never();
    test_deferred_names();
    test_deferred_names_match();
    test_strmap_remove();
    test_rename_value();
    graph_free(&G);
    if (t_failures) {
        fprintf(stderr, "test_passes: %d failures\n", t_failures);
        return 1;
    }
    printf("test_passes: ok\n");
    return 0;
}
