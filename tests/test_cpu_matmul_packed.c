/* MatMul and Gemm with a constant B (b_const, backends/cpu/cpu_nn_matmul_packed.c): oneDNN's
 * matmul with B prepacked once, against a float64 reference and against the sgemm path of the same
 * node without the flag.
 *   - shapes from 1x1x1 to ConvNeXt's 4x768x3072, with A's batch folded into M, on 1 and 2 threads;
 *   - Gemm with a constant B (sc_gemm_attrs.b_const), with and without transB, C a row vector;
 *   - B changed in place: after cpu_params_changed() the result follows the new B (a stale packed
 *     copy would give the old product);
 *   - graph_fuse_inference flags the MatMuls whose B is a 2-D parameter and not one whose B is an
 *     activation, and the fused graph computes what the graph as written computes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "graph/passes.h"
#include "tests/check.h"
#include "tests/ref_executor.h"

static uint64_t rng = 7;

static float urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) * 0x1.0p-24) * 2.0f - 1.0f;
}

static void fill(float *p, int64_t n) {
    for (int64_t i = 0; i < n; i++) p[i] = urand();
}

/* Worst |got - want| over the largest |want|. */
static double rel_err(const float *got, const double *want, int64_t n) {
    double worst = 0, scale = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs(got[i] - want[i]));
        scale = fmax(scale, fabs(want[i]));
    }
    return worst / scale;
}

static void reference(const float *A, const float *B, double *Y, int64_t M, int64_t K, int64_t N) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++) acc += (double)A[i * K + k] * B[k * N + j];
            Y[i * N + j] = acc;
        }
}

/* Runs MatMul A (batch, rows, K) @ B (K, N) with and without b_const; both within 1e-5 of the
 * reference. */
static void check_kernel(int64_t batch, int64_t rows, int64_t K, int64_t N, int threads) {
    int64_t M = batch * rows;
    float *A = malloc(sizeof(float) * (size_t)(M * K)), *B = malloc(sizeof(float) * (size_t)(K * N));
    float *Y = malloc(sizeof(float) * (size_t)(M * N));
    double *R = malloc(sizeof(double) * (size_t)(M * N));
    fill(A, M * K);
    fill(B, K * N);
    reference(A, B, R, M, K, N);
    int ids[3] = {0, 1, 2};
    sc_attrs flagged = {0};
    flagged.matmul.b_const = true;
    sc_node node = {.op = SC_OP_MATMUL, .name = "mm", .in = ids, .n_in = 2, .out = ids + 2, .n_out = 1};
    int64_t ad[3] = {batch, rows, K}, bd[2] = {K, N}, yd[3] = {batch, rows, N};
    sc_tensor in[2] = {{sc_desc_make(SC_F32, 3, ad), A}, {sc_desc_make(SC_F32, 2, bd), B}};
    sc_tensor out = {sc_desc_make(SC_F32, 3, yd), Y};
    cpu_set_num_threads(threads);
    for (int pass = 0; pass < 2; pass++) {
        node.attrs = pass ? &flagged : &sc_attrs_none;
        memset(Y, 0, sizeof(float) * (size_t)(M * N));
        sc_status st = cpu_run_node(&node, in, 2, &out, 1);
        CHECK(!st, "MatMul %lldx%lldx%lldx%lld: %s", (long long)batch, (long long)rows, (long long)K, (long long)N,
              sc_status_message(st));
        sc_status_free(st);
        double e = rel_err(Y, R, M * N);
        CHECK(e < 1e-5, "MatMul (%lld, %lld, %lld) @ (%lld, %lld), %s, %d threads: error %.3g", (long long)batch,
              (long long)rows, (long long)K, (long long)K, (long long)N, pass ? "b_const" : "sgemm", threads, e);
    }
    /* B updated in place, as an optimizer or a weight load would: every element changes, so the
     * old packed copy would give a different product. */
    for (int64_t i = 0; i < K * N; i++) B[i] = -0.5f * B[i] + 0.25f;
    cpu_params_changed();
    reference(A, B, R, M, K, N);
    sc_status st = cpu_run_node(&node, in, 2, &out, 1);
    CHECK(!st, "MatMul after the update: %s", sc_status_message(st));
    sc_status_free(st);
    double e = rel_err(Y, R, M * N);
    CHECK(e < 1e-5, "b_const MatMul after B changed and cpu_params_changed(): error %.3g (a stale packed B?)", e);
    free(A);
    free(B);
    free(Y);
    free(R);
}

/* Gemm Y = A (M, K) @ op(B) + beta C, C (N) broadcast over rows, B (K, N) or (N, K) under transB,
 * with sc_gemm_attrs.b_const: within 1e-5 of the reference. */
static void check_gemm(int64_t M, int64_t K, int64_t N, bool trans_b, float beta) {
    float *A = malloc(sizeof(float) * (size_t)(M * K)), *B = malloc(sizeof(float) * (size_t)(K * N));
    float *Bt = malloc(sizeof(float) * (size_t)(K * N)), *C = malloc(sizeof(float) * (size_t)N);
    float *Y = malloc(sizeof(float) * (size_t)(M * N));
    double *R = malloc(sizeof(double) * (size_t)(M * N));
    fill(A, M * K);
    fill(B, K * N);
    fill(C, N);
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < N; j++) Bt[j * K + k] = B[k * N + j];
    reference(A, B, R, M, K, N);
    for (int64_t i = 0; i < M * N; i++) R[i] += (double)beta * C[i % N];
    int ids[4] = {0, 1, 2, 3};
    sc_attrs at = {0};
    at.gemm = (sc_gemm_attrs){.alpha = 1.0f, .beta = beta, .trans_b = trans_b, .b_const = true};
    sc_node node = {.op = SC_OP_GEMM, .name = "gemm", .in = ids, .n_in = 3, .out = ids + 3, .n_out = 1, .attrs = &at};
    int64_t ad[2] = {M, K}, bd[2] = {trans_b ? N : K, trans_b ? K : N}, cd[1] = {N}, yd[2] = {M, N};
    sc_tensor in[3] = {{sc_desc_make(SC_F32, 2, ad), A},
                       {sc_desc_make(SC_F32, 2, bd), trans_b ? Bt : B},
                       {sc_desc_make(SC_F32, 1, cd), C}};
    sc_tensor out = {sc_desc_make(SC_F32, 2, yd), Y};
    sc_status st = cpu_run_node(&node, in, 3, &out, 1);
    CHECK(!st, "Gemm: %s", sc_status_message(st));
    sc_status_free(st);
    double e = rel_err(Y, R, M * N);
    CHECK(e < 1e-5, "b_const Gemm (%lld, %lld) @ (%lld, %lld)%s + %g C: error %.3g", (long long)M, (long long)K,
          (long long)K, (long long)N, trans_b ? " (transB)" : "", beta, e);
    free(A);
    free(B);
    free(Bt);
    free(C);
    free(Y);
    free(R);
}

static int add_value(sc_graph *g, const char *name, sc_value_kind kind, int64_t rows, int64_t cols) {
    sc_status st = SC_OK;
    int64_t dims[2] = {rows, cols};
    sc_desc d = sc_desc_make(SC_F32, 2, dims);
    int id = graph_add_value(g, name, kind, &d, &st);
    SC_ASSERT(id >= 0 && !st);
    if (kind == SC_VALUE_PARAM) {
        SC_ASSERT(!graph_alloc_data(g, id));
        fill(g->values[id].data, rows * cols);
    }
    return id;
}

static void add_matmul(sc_graph *g, const char *name, int a, int b, int y) {
    sc_status st = SC_OK;
    int in[2] = {a, b};
    SC_ASSERT(graph_add_node(g, SC_OP_MATMUL, name, in, 2, &y, 1, &st) >= 0 && !st);
}

/* x (6, 8) -> h = x @ W1 (8, 6) -> u = h @ W2 (6, 6) -> y = u @ h: two MatMuls with a parameter B
 * and one whose B (h) is an activation. */
static void build(sc_graph *g) {
    graph_init(g);
    rng = 11;
    int x = add_value(g, "x", SC_VALUE_INPUT, 6, 8), w1 = add_value(g, "W1", SC_VALUE_PARAM, 8, 6);
    int w2 = add_value(g, "W2", SC_VALUE_PARAM, 6, 6), h = add_value(g, "h", SC_VALUE_ACT, 6, 6);
    int u = add_value(g, "u", SC_VALUE_ACT, 6, 6), y = add_value(g, "y", SC_VALUE_ACT, 6, 6);
    add_matmul(g, "mm_w1", x, w1, h);
    add_matmul(g, "mm_w2", h, w2, u);
    add_matmul(g, "mm_act", u, h, y);
    g->inputs = sc_arena_alloc(&g->arena, sizeof(int));
    g->outputs = sc_arena_alloc(&g->arena, sizeof(int));
    g->inputs[0] = x;
    g->outputs[0] = y;
    g->n_inputs = g->n_outputs = 1;
    g->values[y].is_output = true;
    g->opset = 17;
}

static float *run(sc_graph *g, bool inference, const float *x) {
    sc_bind_options opt = {.inference = inference, .eval = cpu_evaluator()};
    sc_status st = inference ? graph_prepare(g, &opt) : graph_topo_sort(g);
    if (!st && !inference) st = graph_infer_shapes(g, NULL);
    if (!st && !inference) st = graph_link(g);
    sc_tensor in = {g->values[g->inputs[0]].desc, (void *)x}, out = {0};
    if (!st) st = sc_forward_cpu(g, &in, &out);
    CHECK(!st, "graph (inference=%d): %s", inference, sc_status_message(st));
    sc_status_free(st);
    return out.data;
}

static void check_pass(void) {
    float x[48];
    fill(x, 48);
    sc_graph plain, fused;
    build(&plain);
    build(&fused);
    float *want = run(&plain, false, x), *got = run(&fused, true, x);
    int flagged = 0, total = 0;
    for (int i = 0; i < fused.n_nodes; i++) {
        const sc_node *n = &fused.nodes[i];
        if (n->op != SC_OP_MATMUL) continue;
        total++;
        flagged += n->attrs->matmul.b_const;
        bool param_b = fused.values[n->in[1]].kind == SC_VALUE_PARAM || fused.values[n->in[1]].kind == SC_VALUE_CONST;
        CHECK(n->attrs->matmul.b_const == param_b, "MatMul '%s': b_const %d with a B of kind %d", n->name,
              n->attrs->matmul.b_const, fused.values[n->in[1]].kind);
    }
    CHECK(total == 3 && flagged == 2, "expected 2 of 3 MatMuls flagged b_const, got %d of %d", flagged, total);
    if (want && got) {
        double worst = 0;
        for (int i = 0; i < 36; i++) worst = fmax(worst, fabs(got[i] - want[i]) / (1e-5 + fabs(want[i])));
        CHECK(worst < 1e-4, "fused graph differs from the graph as written: worst relative difference %.3g", worst);
    }
    free(want);
    free(got);
    graph_free(&plain);
    graph_free(&fused);
}

int main(void) {
    const int64_t shapes[][4] = {{1, 1, 1, 1}, {1, 5, 7, 3}, {2, 3, 17, 129}, {1, 4, 768, 3072}, {1, 197, 64, 96}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int t = 1; t <= 2; t++) check_kernel(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], t);
    check_gemm(1, 768, 1000, true, 1.0f);
    check_gemm(197, 64, 96, false, 1.3f);
    check_gemm(5, 7, 3, true, 0.0f);
    check_pass();
    printf(failures ? "test_cpu_matmul_packed: %d failure(s)\n" : "test_cpu_matmul_packed: all passed\n", failures);
    return failures ? 1 : 0;
}
