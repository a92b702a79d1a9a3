/* Finite-difference checks (tests/grad_check.h, f64, central differences) of the gradient rule of
 * SoftmaxCrossEntropyLoss (autodiff/grad_loss.c, emitting SoftmaxCrossEntropyLossGrad) for the
 * shapes the loss heads use ([N, C], [N, C, D], [N, C, H, W]), every reduction, class weights,
 * ignore_index, i32 labels; and through the loss heads' graphs: LM logits [B, T, V] reshaped to
 * [B*T, V], and the mean squared error head (Sub, Mul, ReduceMean). */
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

/* Only the loss output feeds the checker's loss, so the rule's main path is what is checked. */
static const bool loss_only[2] = {true, false};

static void sce(const char *label, sc_reduction red, bool ignore, int64_t ignore_index, int rank, const int64_t *dims,
                const void *labels, sc_dtype lt, const double *weights) {
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.sce = (sc_sce_attrs){red, ignore, ignore_index};
    int64_t ldims[SC_MAX_RANK] = {dims[0]};
    for (int i = 2; i < rank; i++) ldims[i - 1] = dims[i];
    gc_input in[3] = {gc_rand_range(F, rank, dims, -2, 2), gc_const(lt, rank - 1, ldims, labels),
                      weights ? gc_const(F, 1, &dims[1], weights) : gc_omitted()};
    gc_options o = {.use_out = loss_only};
    expect(grad_check_op(label, SC_OP_SOFTMAX_CROSS_ENTROPY_LOSS, &a, weights ? 3 : 2, in, 2, &o));
}

static void test_sce(void) {
    static const int64_t y4[4] = {2, 0, 4, 1};
    static const double w5[5] = {0.5, 1.5, 1.0, 2.0, 0.25};
    sce("sce_mean", SC_REDUCTION_MEAN, false, 0, 2, D(4, 5), y4, SC_I64, NULL);
    sce("sce_sum", SC_REDUCTION_SUM, false, 0, 2, D(4, 5), y4, SC_I64, NULL);
    sce("sce_none", SC_REDUCTION_NONE, false, 0, 2, D(4, 5), y4, SC_I64, NULL);
    sce("sce_mean_weights", SC_REDUCTION_MEAN, false, 0, 2, D(4, 5), y4, SC_I64, w5);
    sce("sce_none_weights", SC_REDUCTION_NONE, false, 0, 2, D(4, 5), y4, SC_I64, w5);
    static const int64_t y4_ign[4] = {2, -100, 4, -100};
    sce("sce_mean_ignore", SC_REDUCTION_MEAN, true, -100, 2, D(4, 5), y4_ign, SC_I64, NULL);
    sce("sce_mean_weights_ignore", SC_REDUCTION_MEAN, true, -100, 2, D(4, 5), y4_ign, SC_I64, w5);
    static const int32_t y23[6] = {0, 2, 1, 1, 0, 2};
    sce("sce_nc_d_i32", SC_REDUCTION_MEAN, false, 0, 3, D(2, 3, 3), y23, SC_I32, NULL);
    /* per-pixel [N, C, H, W] with ignored pixels */
    static const int64_t ypix[2 * 2 * 3] = {0, 1, 2, -1, 1, 0, 2, 2, -1, 0, 1, 1};
    sce("sce_pixels_ignore", SC_REDUCTION_MEAN, true, -1, 4, D(2, 3, 2, 3), ypix, SC_I64, NULL);
    sce("sce_pixels_sum", SC_REDUCTION_SUM, true, -1, 4, D(2, 3, 2, 3), ypix, SC_I64, NULL);
}

/* The LM head's graph: logits [B, T, V] -> Reshape [B*T, V] -> loss with labels [B*T]. */
typedef struct {
    const int64_t *labels; /* B*T */
    int64_t B, T, V;
} lm_ctx;

static sc_status build_lm(sc_graph *g, const int *in_ids, int *out_ids, int *n_out, void *ctx) {
    const lm_ctx *c = ctx;
    sc_status st = SC_OK;
    sc_desc sd = sc_desc_make(SC_I64, 1, D(2));
    int shape = graph_add_value(g, "shape2d", SC_VALUE_CONST, &sd, &st);
    if (shape < 0) return st;
    SC_TRY(graph_alloc_data(g, shape));
    ((int64_t *)g->values[shape].data)[0] = c->B * c->T;
    ((int64_t *)g->values[shape].data)[1] = c->V;
    sc_desc ld = sc_desc_make(SC_I64, 1, D(c->B * c->T));
    int labels = graph_add_value(g, "labels", SC_VALUE_CONST, &ld, &st);
    if (labels < 0) return st;
    SC_TRY(graph_alloc_data(g, labels));
    memcpy(g->values[labels].data, c->labels, sizeof(int64_t) * (size_t)(c->B * c->T));
    int flat = gc_add_node(g, SC_OP_RESHAPE, NULL, (const int[]){in_ids[0], shape}, 2, 1, NULL, &st);
    if (flat < 0) return st;
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.sce = (sc_sce_attrs){SC_REDUCTION_MEAN, true, -100};
    int outs[2];
    if (gc_add_node(g, SC_OP_SOFTMAX_CROSS_ENTROPY_LOSS, &a, (const int[]){flat, labels}, 2, 2, outs, &st) < 0) return st;
    out_ids[0] = outs[0];
    *n_out = 1;
    return SC_OK;
}

/* torch.nn.MSELoss: ReduceMean((y - t)^2), gradients for both y and t. */
static sc_status build_mse(sc_graph *g, const int *in_ids, int *out_ids, int *n_out, void *ctx) {
    (void)ctx;
    sc_status st = SC_OK;
    int diff = gc_add_node(g, SC_OP_SUB, NULL, in_ids, 2, 1, NULL, &st);
    int sq = diff < 0 ? -1 : gc_add_node(g, SC_OP_MUL, NULL, (const int[]){diff, diff}, 2, 1, NULL, &st);
    sc_attrs a;
    memset(&a, 0, sizeof a);
    int loss = sq < 0 ? -1 : gc_add_node(g, SC_OP_REDUCE_MEAN, &a, (const int[]){sq}, 1, 1, NULL, &st);
    if (loss < 0) return st;
    out_ids[0] = loss;
    *n_out = 1;
    return SC_OK;
}

static void test_heads(void) {
    static const int64_t next[6] = {3, 1, -100, 0, 2, 3};
    lm_ctx lm = {next, 2, 3, 4};
    gc_input in[1] = {gc_rand_range(F, 3, D(2, 3, 4), -2, 2)};
    expect(grad_check_graph("lm_head", 1, in, build_lm, &lm, NULL));
    gc_input mse[2] = {gc_rand(F, 3, D(2, 3, 2)), gc_rand(F, 3, D(2, 3, 2))};
    expect(grad_check_graph("mse_head", 2, mse, build_mse, NULL, NULL));
}

int main(void) {
    test_sce();
    test_heads();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
