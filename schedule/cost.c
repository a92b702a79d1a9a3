/* The per-node and per-transfer cost model (contract and constants in cost.h). */
#include "schedule/cost.h"

static int64_t numel_of(const sc_graph *g, int v) {
    if (v < 0) return 0;
    int64_t n = sc_desc_numel(&g->values[v].desc);
    return n < 0 ? 0 : n;
}

static int64_t bytes_of(const sc_graph *g, int v) {
    if (v < 0) return 0;
    int64_t n = sc_desc_bytes(&g->values[v].desc);
    return n < 0 ? 0 : n;
}

void cost_model_default(sc_cost_model *m, double link_bandwidth, const double *node_time) {
    m->peak_flops = SC_COST_CPU_PEAK_FLOPS;
    m->mem_bandwidth = SC_COST_CPU_MEM_BANDWIDTH;
    m->link_bandwidth = link_bandwidth > 0 ? link_bandwidth : SC_COST_LINK_CPU;
    m->node_time = node_time;
}

/* MACs of a convolution with output y and weights w [M, C/group, k...]: each output element sums
 * C/group * prod(k) products. */
static double conv_macs(const sc_graph *g, int y, int w) {
    if (y < 0 || w < 0) return 0;
    const sc_desc *wd = &g->values[w].desc;
    if (wd->rank < 1 || wd->dims[0] <= 0) return 0;
    return (double)numel_of(g, y) * (double)(numel_of(g, w) / wd->dims[0]);
}

double cost_node_flops(const sc_graph *g, int node) {
    const sc_node *n = &g->nodes[node];
    switch (n->op) {
    case SC_OP_CONV: return 2.0 * conv_macs(g, n->out[0], n->in[1]);
    case SC_OP_GEMM: {
        /* Y[M, N] = A[M, K] B[K, N]; K is A's inner dim after the optional transpose */
        const sc_desc *a = &g->values[n->in[0]].desc;
        int64_t k = a->rank == 2 ? a->dims[n->attrs->gemm.trans_a ? 0 : 1] : 1;
        return 2.0 * (double)numel_of(g, n->out[0]) * (double)k;
    }
    case SC_OP_MATMUL: {
        const sc_desc *a = &g->values[n->in[0]].desc;
        int64_t k = a->rank >= 1 ? a->dims[a->rank - 1] : 1;
        return 2.0 * (double)numel_of(g, n->out[0]) * (double)k;
    }
    case SC_OP_CONV_GRAD: {
        /* (dY, X, W) -> (dX, dW, dB): dX and dW are each a convolution as big as the forward one */
        double fwd = conv_macs(g, n->in[0], n->in[2]);
        double f = 0;
        if (n->n_out > 0 && n->out[0] >= 0) f += 2.0 * fwd;
        if (n->n_out > 1 && n->out[1] >= 0) f += 2.0 * fwd;
        if (n->n_out > 2 && n->out[2] >= 0) f += (double)numel_of(g, n->in[0]);
        return f;
    }
    default: {
        double e = 0;
        for (int k = 0; k < n->n_in; k++) e += (double)numel_of(g, n->in[k]);
        for (int k = 0; k < n->n_out; k++) e += (double)numel_of(g, n->out[k]);
        return e;
    }
    }
}

int64_t cost_node_bytes(const sc_graph *g, int node) {
    const sc_node *n = &g->nodes[node];
    int64_t b = 0;
    for (int k = 0; k < n->n_in; k++) b += bytes_of(g, n->in[k]);
    for (int k = 0; k < n->n_out; k++) b += bytes_of(g, n->out[k]);
    return b;
}

double cost_node_time(const sc_cost_model *m, const sc_graph *g, int node) {
    if (m->node_time) return m->node_time[node];
    double tf = cost_node_flops(g, node) / m->peak_flops;
    double tb = (double)cost_node_bytes(g, node) / m->mem_bandwidth;
    return tf > tb ? tf : tb;
}

double cost_transfer_time(const sc_cost_model *m, int64_t bytes) { return (double)bytes / m->link_bandwidth; }
