/* The per-node and per-transfer cost model (contract and constants in cost.h). */
#include "schedule/cost.h"

#include "graph/op_cost.h"

void cost_model_default(sc_cost_model *m, double link_bandwidth, const double *node_time) {
    m->peak_flops = SC_COST_CPU_PEAK_FLOPS;
    m->mem_bandwidth = SC_COST_CPU_MEM_BANDWIDTH;
    m->link_bandwidth = link_bandwidth > 0 ? link_bandwidth : SC_COST_LINK_CPU;
    m->link_latency = SC_COST_LINK_LATENCY;
    m->node_time = node_time;
}

double cost_node_flops(const sc_graph *g, int node) { return sc_node_cost(g, &g->nodes[node]).flops; }

int64_t cost_node_bytes(const sc_graph *g, int node) { return (int64_t)sc_node_cost(g, &g->nodes[node]).bytes; }

static double comm_bandwidth = SC_COST_COMM_BANDWIDTH, comm_latency = SC_COST_COMM_LATENCY;

void cost_set_comm_link(double bytes_per_second, double latency_seconds) {
    comm_bandwidth = bytes_per_second > 0 ? bytes_per_second : SC_COST_COMM_BANDWIDTH;
    comm_latency = latency_seconds > 0 ? latency_seconds : SC_COST_COMM_LATENCY;
}

static double comm_time(const sc_op_cost *c) {
    return c->comm_bytes > 0 ? c->comm_bytes / comm_bandwidth + comm_latency : 0;
}

double cost_node_comm_time(const sc_graph *g, int node) {
    sc_op_cost c = sc_node_cost(g, &g->nodes[node]);
    return comm_time(&c);
}

double cost_node_time(const sc_cost_model *m, const sc_graph *g, int node) {
    if (m->node_time) return m->node_time[node];
    sc_op_cost c = sc_node_cost(g, &g->nodes[node]);
    double tf = c.flops / m->peak_flops;
    double tb = (double)(int64_t)c.bytes / m->mem_bandwidth;
    return (tf > tb ? tf : tb) + comm_time(&c);
}

double cost_transfer_time(const sc_cost_model *m, int64_t bytes) {
    return m->link_latency + (double)bytes / m->link_bandwidth;
}

typedef enum { FAM_ELEM, FAM_VIEW, FAM_CONV, FAM_CONV_GRAD, FAM_GEMM, FAM_NORM, FAM_NORM_GRAD, FAM_POOL } op_family;

static op_family family_of(sc_op op) {
    if (sc_op_is_view(op)) return FAM_VIEW; /* its output is its input's storage: nothing is copied */
    switch (op) {
    case SC_OP_CONV: return FAM_CONV;
    case SC_OP_CONV_GRAD: return FAM_CONV_GRAD;
    case SC_OP_MATMUL:
    case SC_OP_GEMM: return FAM_GEMM;
    case SC_OP_BATCH_NORM:
    case SC_OP_LAYER_NORM:
    case SC_OP_SOFTMAX:
    case SC_OP_LOG_SOFTMAX: return FAM_NORM;
    case SC_OP_BATCH_NORM_GRAD:
    case SC_OP_LAYER_NORM_GRAD:
    case SC_OP_SOFTMAX_GRAD:
    case SC_OP_LOG_SOFTMAX_GRAD: return FAM_NORM_GRAD;
    case SC_OP_MAX_POOL:
    case SC_OP_AVERAGE_POOL:
    case SC_OP_MAX_POOL_GRAD:
    case SC_OP_AVERAGE_POOL_GRAD: return FAM_POOL;
    default: return FAM_ELEM;
    }
}

/* Whether a Conv / ConvGrad node's weights (input 1 of Conv, 2 of ConvGrad) have a 1x1... kernel. */
static bool kernel_is_1x1(const sc_graph *g, const sc_node *n) {
    int w = n->op == SC_OP_CONV ? 1 : 2;
    if (w >= n->n_in || n->in[w] < 0) return false;
    const sc_desc *d = &g->values[n->in[w]].desc;
    for (int i = 2; i < d->rank; i++)
        if (d->dims[i] != 1) return false;
    return d->rank > 2;
}

void cost_profile_node_times(const sc_cost_profile *p, const sc_graph *g, double *node_time) {
    for (int i = 0; i < g->n_nodes; i++) {
        const sc_node *n = &g->nodes[i];
        sc_op_cost c = sc_node_cost(g, n);
        double bytes = (double)(int64_t)c.bytes, t;
        switch (family_of(n->op)) {
        case FAM_CONV: t = c.flops / (kernel_is_1x1(g, n) ? p->conv1x1_flops : p->conv_flops); break;
        case FAM_CONV_GRAD: t = c.flops / (kernel_is_1x1(g, n) ? p->conv1x1_grad_flops : p->conv_grad_flops); break;
        case FAM_GEMM: t = c.flops / p->gemm_flops; break;
        case FAM_NORM: t = bytes / p->norm_bandwidth; break;
        case FAM_NORM_GRAD: t = bytes / p->norm_grad_bandwidth; break;
        case FAM_POOL: t = c.flops / p->pool_rate; break;
        case FAM_VIEW: t = 0; break;
        default: {
            double te = c.flops / p->elem_rate, tb = bytes / p->mem_bandwidth;
            t = te > tb ? te : tb;
        }
        }
        node_time[i] = p->node_overhead + t + comm_time(&c);
    }
}
