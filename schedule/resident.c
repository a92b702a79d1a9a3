/* Which parameters weights streaming leaves resident (contract in sched_internal.h).
 *
 * A parameter's group is the parameter and the optimizer state its update reads (momentum; AdamW's
 * m and v): they stream together or not at all. Streaming a group costs link time of
 *     transfers * link_latency + bytes / link_bandwidth
 * per step (the parameter in once per cluster of reads and its gradient out, plus the state both
 * ways with device updates), and keeping it resident costs its bytes for the whole step. Below
 * about link_latency * link_bandwidth bytes (120 KB on the CPU's modelled link, 500 KB on PCIe) a
 * transfer is mostly latency, so biases and normalisation scales are cheap to keep and dear to move.
 * Which threshold is best under a budget is left to the planner's timeline model: plan.c tries
 * resident_max = 0, L, 4L, 16L, ... (L = latency * bandwidth) while the plans still fit, and keeps
 * the fastest. */
#include <stdlib.h>

#include "schedule/sched_internal.h"

bool sched_is_update(const sc_node *n) { return n->op == SC_OP_SGD_UPDATE || n->op == SC_OP_ADAMW_UPDATE; }

bool sched_streamable(const sc_graph *g, int v) {
    sc_value_kind k = g->values[v].kind;
    return sched_persistent(g, v) && !g->values[v].is_output && (k == SC_VALUE_PARAM || k == SC_VALUE_OPT_STATE);
}

/* Input k of update node n is in its parameter's group: the parameter or a state, streamable. */
static bool in_group(const sc_graph *g, const sc_node *n, int k) {
    int v = n->in[k];
    return v >= 0 && (k == 0 || g->values[v].kind == SC_VALUE_OPT_STATE) && sched_streamable(g, v);
}

/* Per streamable value: the bytes of its group (parameter and state), or its own for a value no
 * update reads (a frozen parameter); 0 for the rest. */
static void group_bytes(const sc_graph *g, int64_t *bytes) {
    for (int v = 0; v < g->n_values; v++) bytes[v] = sched_streamable(g, v) ? sched_value_bytes(g, v) : 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const sc_node *n = &g->nodes[i];
        if (!sched_is_update(n) || !in_group(g, n, 0)) continue;
        int64_t sum = 0;
        for (int k = 0; k < n->n_in; k++)
            if (in_group(g, n, k)) sum += sched_value_bytes(g, n->in[k]);
        for (int k = 0; k < n->n_in; k++)
            if (in_group(g, n, k)) bytes[n->in[k]] = sum;
    }
}

sc_status plan_resident_mark(const sc_graph *g, int64_t resident_max, bool *resident) {
    int64_t *bytes = malloc(sizeof(int64_t) * ((size_t)g->n_values + 1));
    if (!bytes) return sc_errorf("out of memory choosing resident parameters");
    group_bytes(g, bytes);
    for (int v = 0; v < g->n_values; v++) resident[v] = sched_streamable(g, v) && resident_max > 0 && bytes[v] <= resident_max;
    free(bytes);
    return SC_OK;
}

void plan_resident_count(const sc_graph *g, const sc_plan *p, int *n_params, int64_t *bytes) {
    bool *fixed = calloc((size_t)g->n_values + 1, 1);
    *n_params = 0;
    *bytes = 0;
    if (!fixed) return;
    for (int i = 0; i < p->n_fixed_intervals; i++) {
        int v = p->intervals[i].value;
        if (v < 0 || !sched_streamable(g, v) || fixed[v]) continue;
        fixed[v] = true;
        *bytes += sched_value_bytes(g, v);
    }
    for (int i = 0; i < g->n_nodes; i++) /* trainable parameters: those an update writes */
        *n_params += sched_is_update(&g->nodes[i]) && g->nodes[i].in[0] >= 0 && fixed[g->nodes[i].in[0]];
    free(fixed);
}

int plan_resident_thresholds(const sc_graph *g, const sc_cost_model *m, int64_t *out, int max) {
    int64_t *bytes = malloc(sizeof(int64_t) * ((size_t)g->n_values + 1)), largest = 0;
    if (!bytes) return 0;
    group_bytes(g, bytes);
    for (int v = 0; v < g->n_values; v++)
        if (sched_needs_fixed(g, v) && bytes[v] > largest) largest = bytes[v];
    int64_t L = (int64_t)(m->link_latency * m->link_bandwidth);
    if (L < 1) L = 1;
    int n = 0;
    out[n++] = 0;
    for (int64_t t = L, prev = 0; n < max && prev < largest; prev = t, t *= 4) {
        bool changes = false; /* some group is in (prev, t]: the resident set grows */
        for (int v = 0; v < g->n_values && !changes; v++) changes = sched_needs_fixed(g, v) && bytes[v] > prev && bytes[v] <= t;
        if (changes) out[n++] = t;
    }
    free(bytes);
    return n;
}

void plan_update_places(const sc_graph *g, const sc_plan *p, sc_update_where *where) {
    for (int v = 0; v < g->n_values; v++) where[v] = SC_WHERE_NONE;
    for (int i = 0; i < g->n_nodes; i++) {
        const sc_node *n = &g->nodes[i];
        if (sched_is_update(n) && n->in[0] >= 0) where[n->in[0]] = SC_WHERE_DEVICE_STREAMED;
    }
    for (int i = 0; i < p->n_fixed_intervals; i++) {
        int v = p->intervals[i].value;
        if (v >= 0 && where[v] != SC_WHERE_NONE) where[v] = SC_WHERE_DEVICE_RESIDENT;
    }
    for (int s = 0; s < p->n_steps; s++)
        if (p->steps[s].kind == SC_STEP_HOST_RUN) where[g->nodes[p->steps[s].node].in[0]] = SC_WHERE_HOST;
}
