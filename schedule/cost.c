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
