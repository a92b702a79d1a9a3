/* The plan type's own functions (schedule/plan.h): names and parsing of its options, freeing, and
 * the figures the strategies and the driver (plan.c) both use. Split from the driver so that the
 * parts plan_build calls (search.c, offload.c) depend on the type, not on the driver. */
#include "core/free_all.h"
#include "schedule/plan.h"

#include <stdlib.h>
#include <string.h>

#include "schedule/sched_internal.h"

const char *plan_strategy_name(sc_strategy s) {
    switch (s) {
    case SC_STRATEGY_NONE: return "none";
    case SC_STRATEGY_SQRT: return "sqrt";
    case SC_STRATEGY_DC: return "dc";
    case SC_STRATEGY_OPTIMAL: return "optimal";
    case SC_STRATEGY_EVICT: return "evict";
    case SC_STRATEGY_AUTO: return "auto";
    }
    return "?";
}

int plan_strategy_parse(const char *name) {
    for (int k = SC_STRATEGY_NONE; name && k <= SC_STRATEGY_AUTO; k++)
        if (!strcmp(name, plan_strategy_name((sc_strategy)k))) return k;
    return -1;
}

int plan_offload_parse(const char *name) {
    for (int k = SC_OFFLOAD_NONE; name && k <= SC_OFFLOAD_BOTH; k++)
        if (!strcmp(name, plan_offload_name((sc_offload)k))) return k;
    return -1;
}

int plan_update_parse(const char *name) {
    for (int k = SC_UPDATE_AUTO; name && k <= SC_UPDATE_HOST; k++)
        if (!strcmp(name, plan_update_name((sc_update_place)k))) return k;
    return -1;
}

bool plan_better(const sc_plan *a, const sc_plan *b) {
    double eps = 1e-9 * (b->predicted_time > 0 ? b->predicted_time : 1);
    if (a->predicted_time < b->predicted_time - eps) return true;
    return a->predicted_time <= b->predicted_time + eps && a->arena_bytes < b->arena_bytes;
}

void plan_keep_best(sc_plan *best, bool *have, sc_plan *cand, bool eligible) {
    if (!eligible || (*have && !plan_better(cand, best))) {
        plan_free(cand);
        return;
    }
    if (*have) plan_free(best);
    *best = *cand;
    *have = true;
}

void plan_free(sc_plan *plan) {
    SC_FREE_ALL(plan->steps, plan->intervals, plan->iv_from);
    memset(plan, 0, sizeof *plan);
}

const char *plan_update_name(sc_update_place u) {
    switch (u) {
    case SC_UPDATE_AUTO: return "auto";
    case SC_UPDATE_DEVICE: return "device";
    case SC_UPDATE_HOST: return "host";
    }
    return "?";
}

const char *plan_offload_name(sc_offload o) {
    switch (o) {
    case SC_OFFLOAD_NONE: return "none";
    case SC_OFFLOAD_WEIGHTS: return "weights";
    case SC_OFFLOAD_ACTIVATIONS: return "activations";
    case SC_OFFLOAD_AUTO: return "auto";
    case SC_OFFLOAD_BOTH: return "both";
    }
    return "?";
}

int64_t plan_workspace_reserve(int64_t capacity) {
    const int64_t reserve = (int64_t)256 << 20;
    return capacity / 4 < reserve ? capacity / 4 : reserve;
}

int64_t sched_largest_node(const sc_graph *g, int *which) {
    int64_t best = 0;
    *which = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const sc_node *n = &g->nodes[i];
        int64_t b = 0, donor = 0;
        for (int j = 0; j < n->n_in; j++) {
            if (n->in[j] < 0 || sched_persistent(g, n->in[j])) continue;
            int64_t vb = sched_value_bytes(g, n->in[j]);
            b += vb;
            if (n->n_out > 0 && n->out[0] >= 0 && sc_op_donor_input_ok(n->op, j) &&
                g->values[n->in[j]].desc.dtype == g->values[n->out[0]].desc.dtype &&
                (sc_desc_same_shape(&g->values[n->in[j]].desc, &g->values[n->out[0]].desc) || sc_op_is_view(n->op)) &&
                vb > donor)
                donor = vb;
        }
        for (int o = 0; o < n->n_out; o++)
            if (n->out[o] >= 0 && sched_alias_input(n, o) < 0) b += sched_value_bytes(g, n->out[o]);
        b -= donor; /* the output may take over a dying input's block (plan_alloc) */
        if (b > best) best = b, *which = i;
    }
    return best;
}
