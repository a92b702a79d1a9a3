/* graph_fold_transpose_into_gemm (graph/passes.h): Y = MatMul(A, Transpose(W)) with a 2-D W becomes
 * one Gemm with transB = 1 that reads W as it is stored.
 *
 * GPT's tied LM head is the case that matters: logits = h @ wte^T. Run as written, every forward
 * pass materialises the [dim, vocab] transposed table (154 MB for GPT-2's 50257 x 768) just before
 * the logits, while every checkpointed activation is live, and that one transient value is the
 * largest single-node need of the training graph. oneDNN's sgemm reads a transposed operand by
 * its strides, so the copy buys nothing.
 *
 * Shapes: A [..., M, K] with rank r >= 2, W [N, K], Y [..., M, N]. For r = 2 the MatMul node becomes
 * Gemm(A, W) in place. For r > 2 the leading dims fold into the rows (a shared weight broadcasts
 * over them, numpy matmul):
 *     A2 = Reshape(A, [P, K]),  Y2 = Gemm(A2, W, transB=1),  Y = Reshape(Y2, dims of Y),  P = numel(A) / K
 * The two Reshapes are copies the allocator lets their outputs make in their inputs' blocks
 * (sc_op_is_view), and autodiff differentiates the Gemm with the flag (dA = dY2 W, dW = dY2^T A2),
 * so neither pass nor its gradient ever holds W^T. The Transpose goes when the MatMuls were its only
 * readers (dead-code elimination).
 *
 * Valid for training and inference: the rewrite is exact up to the Gemm kernel's summation order.
 * Only static float values with W of rank 2 are rewritten; the node keeps its name (the Gemm in
 * the middle of a rank > 2 rewrite is named after it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/pass_internal.h"

static bool rewritable(const sc_graph *g, const sc_node *n, int *w) {
    if (n->op != SC_OP_MATMUL || n->n_in != 2 || n->in[0] < 0 || n->out[0] < 0) return false;
    const sc_desc *a = &g->values[n->in[0]].desc, *y = &g->values[n->out[0]].desc;
    if (a->rank < 2 || !sc_desc_is_static(a) || !sc_desc_is_static(y) || !sc_dtype_is_float(a->dtype)) return false;
    *w = graph_transposed_matrix(g, n->in[1]);
    return *w >= 0 && g->values[*w].desc.dtype == a->dtype && g->values[*w].desc.dims[1] == a->dims[a->rank - 1];
}

static int reshape_const(sc_graph *g, const char *base, const sc_desc *to, sc_status *st) {
    int64_t r = to->rank;
    sc_desc d = sc_desc_make(SC_I64, 1, &r);
    int id = graph_add_value_unique(g, base, SC_VALUE_CONST, &d, st);
    if (id < 0) return -1;
    if ((*st = graph_alloc_data(g, id))) return -1;
    memcpy(g->values[id].data, to->dims, sizeof(int64_t) * (size_t)to->rank);
    return id;
}

/* Appends op(in) -> a new value of desc d, both named after base; returns the node's output or -1. */
static int append_node(sc_graph *g, sc_op op, const char *base, const int *in, int n_in, const sc_desc *d,
                       const sc_attrs *a, sc_status *st) {
    int out = graph_add_value_unique(g, base, SC_VALUE_ACT, d, st);
    if (out < 0) return -1;
    int id = graph_add_node(g, op, g->values[out].name, in, n_in, &out, 1, st);
    if (id < 0) return -1;
    if ((*st = graph_node_set_attrs(g, &g->nodes[id], a))) return -1;
    return out;
}

static sc_status rewrite_one(sc_graph *g, int i, int w) {
    sc_attrs gemm;
    memset(&gemm, 0, sizeof gemm);
    gemm.gemm.alpha = 1.0f;
    gemm.gemm.beta = 1.0f;
    gemm.gemm.trans_b = true;
    sc_node *n = &g->nodes[i];
    sc_desc a = g->values[n->in[0]].desc, y = g->values[n->out[0]].desc;
    if (a.rank == 2) {
        SC_TRY(graph_node_set_attrs(g, n, &gemm));
        n->op = SC_OP_GEMM;
        n->in[1] = w;
        return SC_OK;
    }
    int64_t K = a.dims[a.rank - 1], N = y.dims[y.rank - 1], P = sc_desc_numel(&a) / K;
    sc_desc a2 = sc_desc_make(a.dtype, 2, (int64_t[]){P, K}), y2 = sc_desc_make(y.dtype, 2, (int64_t[]){P, N});
    char base[256], shape[256];
    snprintf(base, sizeof base, "%s/rows", n->name);
    snprintf(shape, sizeof shape, "%s/rows_shape", n->name);
    sc_status st = SC_OK;
    int n0 = g->n_nodes;
    int s_a = reshape_const(g, shape, &a2, &st);
    snprintf(shape, sizeof shape, "%s/shape", g->nodes[i].name);
    int s_y = st ? -1 : reshape_const(g, shape, &y, &st);
    if (st) return st;
    sc_attrs rs;
    memset(&rs, 0, sizeof rs);
    rs.reshape.allowzero = true; /* literal dims */
    int in_a[2] = {g->nodes[i].in[0], s_a};
    int a_rows = append_node(g, SC_OP_RESHAPE, base, in_a, 2, &a2, &rs, &st);
    snprintf(base, sizeof base, "%s/gemm", g->nodes[i].name);
    int in_g[2] = {a_rows, w};
    int y_rows = st ? -1 : append_node(g, SC_OP_GEMM, base, in_g, 2, &y2, &gemm, &st);
    if (st) return st;
    sc_node *m = &g->nodes[i]; /* the MatMul becomes the Reshape back to Y's dims */
    sc_attrs keep = rs;
    SC_TRY(graph_node_set_attrs(g, m, &keep));
    m->op = SC_OP_RESHAPE;
    m->in[0] = y_rows;
    m->in[1] = s_y;
    return graph_move_nodes(g, n0, i);
}

sc_status graph_fold_transpose_into_gemm(sc_graph *g, int *count) {
    SC_TRY(graph_link(g));
    int done = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        int w = -1;
        if (!rewritable(g, &g->nodes[i], &w)) continue;
        bool two_d = g->values[g->nodes[i].in[0]].desc.rank == 2;
        SC_TRY(rewrite_one(g, i, w));
        done++;
        if (!two_d) i += 2; /* past the Reshape and Gemm put before it */
    }
    if (count) *count = done;
    return graph_link(g);
}
