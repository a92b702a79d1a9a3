/* The per-node and per-transfer cost model (contract and constants in cost.h). */
#include "schedule/cost.h"

#include "graph/op_cost.h"

void cost_model_default(sc_cost_model *m, double link_bandwidth, const double *node_time) {
    m->peak_flops = SC_COST_CPU_PEAK_FLOPS;
    m->mem_bandwidth = SC_COST_CPU_MEM_BANDWIDTH;
    m->link_bandwidth = link_bandwidth > 0 ? link_bandwidth : SC_COST_LINK_CPU;
    m->node_time = node_time;
}

double cost_node_flops(const sc_graph *g, int node) { return sc_node_cost(g, &g->nodes[node]).flops; }

int64_t cost_node_bytes(const sc_graph *g, int node) { return (int64_t)sc_node_cost(g, &g->nodes[node]).bytes; }

double cost_node_time(const sc_cost_model *m, const sc_graph *g, int node) {
    if (m->node_time) return m->node_time[node];
    sc_op_cost c = sc_node_cost(g, &g->nodes[node]);
    double tf = c.flops / m->peak_flops;
    double tb = (double)(int64_t)c.bytes / m->mem_bandwidth;
    return tf > tb ? tf : tb;
}

double cost_transfer_time(const sc_cost_model *m, int64_t bytes) { return (double)bytes / m->link_bandwidth; }

static bool is_norm(sc_op op) {
    switch (op) {
    case SC_OP_BATCH_NORM:
    case SC_OP_BATCH_NORM_GRAD:
    case SC_OP_LAYER_NORM:
    case SC_OP_LAYER_NORM_GRAD:
    case SC_OP_SOFTMAX:
    case SC_OP_SOFTMAX_GRAD:
    case SC_OP_LOG_SOFTMAX:
    case SC_OP_LOG_SOFTMAX_GRAD: return true;
    default: return false;
    }
}

void cost_profile_node_times(const sc_cost_profile *p, const sc_graph *g, double *node_time) {
    for (int i = 0; i < g->n_nodes; i++) {
        sc_op op = g->nodes[i].op;
        sc_op_cost c = sc_node_cost(g, &g->nodes[i]);
        double t;
        if (op == SC_OP_CONV) t = c.flops / p->conv_flops;
        else if (op == SC_OP_CONV_GRAD) t = c.flops / p->conv_grad_flops;
        else if (op == SC_OP_MATMUL || op == SC_OP_GEMM) t = c.flops / p->gemm_flops;
        else if (is_norm(op)) t = (double)(int64_t)c.bytes / p->norm_bandwidth;
        else {
            double te = c.flops / p->elem_rate, tb = (double)(int64_t)c.bytes / p->mem_bandwidth;
            t = te > tb ? te : tb;
        }
        node_time[i] = p->node_overhead + t;
    }
}
