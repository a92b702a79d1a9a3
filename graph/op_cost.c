/* Per-op cost functions, named in the ops.def rows (cost_<cost>), and the table they generate.
 *
 * FLOPs:
 *   Conv      2 * out_numel * (C/group * prod(kernel)): each output sums that many products
 *   ConvGrad  dX and dW are each a convolution as big as the forward one, dB one add per dY element
 *   Gemm      2 * M * N * K, K being A's inner dim after the optional transpose
 *   MatMul    2 * out_numel * K
 *   pools     one comparison or add per window element and output, plus the elements read and written
 *   AllReduce, Reduce, Broadcast  the elements read plus written, and comm_bytes on the wire
 *   others    the elements read plus written: these ops are bound by memory traffic, which `bytes`
 *             measures, and their arithmetic is at most a few operations per element
 */
#include "graph/op_cost.h"

typedef sc_op_cost (*sc_cost_fn)(const sc_graph *g, const sc_node *n);

static double numel_of(const sc_graph *g, int v) {
    if (v < 0) return 0;
    int64_t n = sc_desc_numel(&g->values[v].desc);
    return n < 0 ? 0 : (double)n;
}

static double bytes_of(const sc_graph *g, int v) {
    if (v < 0) return 0;
    int64_t n = sc_desc_bytes(&g->values[v].desc);
    return n < 0 ? 0 : (double)n;
}

static sc_op_cost cost_elementwise(const sc_graph *g, const sc_node *n) {
    sc_op_cost c = {0, 0, 0};
    for (int k = 0; k < n->n_in; k++) c.flops += numel_of(g, n->in[k]), c.bytes += bytes_of(g, n->in[k]);
    for (int k = 0; k < n->n_out; k++) c.flops += numel_of(g, n->out[k]), c.bytes += bytes_of(g, n->out[k]);
    return c;
}

/* Multiply-adds of a convolution with output y and weights w [M, C/group, k...]. */
static double conv_macs(const sc_graph *g, int y, int w) {
    if (y < 0 || w < 0) return 0;
    const sc_desc *wd = &g->values[w].desc;
    if (wd->rank < 1 || wd->dims[0] <= 0) return 0;
    return numel_of(g, y) * (numel_of(g, w) / (double)wd->dims[0]);
}

static sc_op_cost cost_conv(const sc_graph *g, const sc_node *n) {
    sc_op_cost c = cost_elementwise(g, n);
    c.flops = 2.0 * conv_macs(g, n->out[0], n->in[1]);
    return c;
}

/* (dY, X, W) -> (dX, dW, dB), each optional */
static sc_op_cost cost_conv_grad(const sc_graph *g, const sc_node *n) {
    sc_op_cost c = cost_elementwise(g, n);
    double fwd = conv_macs(g, n->in[0], n->in[2]);
    c.flops = 0;
    if (n->n_out > 0 && n->out[0] >= 0) c.flops += 2.0 * fwd;
    if (n->n_out > 1 && n->out[1] >= 0) c.flops += 2.0 * fwd;
    if (n->n_out > 2 && n->out[2] >= 0) c.flops += numel_of(g, n->in[0]);
    return c;
}

static sc_op_cost cost_gemm(const sc_graph *g, const sc_node *n) {
    sc_op_cost c = cost_elementwise(g, n);
    const sc_desc *a = &g->values[n->in[0]].desc;
    int64_t k = a->rank == 2 ? a->dims[n->attrs->gemm.trans_a ? 0 : 1] : 1;
    c.flops = 2.0 * numel_of(g, n->out[0]) * (double)(k > 0 ? k : 0);
    return c;
}

static sc_op_cost cost_matmul(const sc_graph *g, const sc_node *n) {
    sc_op_cost c = cost_elementwise(g, n);
    const sc_desc *a = &g->values[n->in[0]].desc;
    int64_t k = a->rank >= 1 ? a->dims[a->rank - 1] : 1;
    c.flops = 2.0 * numel_of(g, n->out[0]) * (double)(k > 0 ? k : 0);
    return c;
}

static sc_op_cost cost_pool(const sc_graph *g, const sc_node *n) {
    sc_op_cost c = cost_elementwise(g, n);
    double window = 1;
    for (int i = 0; i < n->attrs->window.n_spatial; i++) window *= (double)n->attrs->window.kernel_shape[i];
    c.flops += numel_of(g, n->out[0]) * window;
    return c;
}

/* AllReduce: packing and unpacking the bucket (its bytes read and written twice), and on the wire each
 * rank sends and receives 2 (N - 1) / N of them (reduce-scatter, then all-gather). */
static sc_op_cost cost_collective(const sc_graph *g, const sc_node *n) {
    sc_op_cost c = cost_elementwise(g, n);
    double bucket = 0;
    for (int k = 0; k < n->n_in; k++) bucket += bytes_of(g, n->in[k]);
    int ranks = n->attrs->all_reduce.ranks;
    double share = n->op == SC_OP_ALL_REDUCE ? 2.0 : 1.0; /* reduce-scatter + all-gather, or one of them */
    c.comm_bytes = ranks > 1 ? share * (ranks - 1) / ranks * bucket : 0;
    return c;
}

static const sc_cost_fn cost_fns[SC_OP_COUNT] = {
#define SC_OP(id, name, min_in, max_in, min_out, max_out, family, attrs, since, shape, kernel, grad, cost, ...) \
    [SC_OP_##id] = cost_##cost,
#include "graph/ops.def"
#include "graph/ops_train.def"
#undef SC_OP
};

sc_op_cost sc_node_cost(const sc_graph *g, const sc_node *n) { return cost_fns[n->op](g, n); }
