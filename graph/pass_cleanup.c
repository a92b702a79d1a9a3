/* Clean-up passes: Identity / inference-Dropout removal and dead-code elimination.
 *
 * Identity removal (and Dropout whose mask is unused and that has no training_mode input, or a
 * constant false one; ONNX Dropout is the identity outside training) rewires consumers of the
 * output y to the input x. Graph outputs keep their names, which takes one of two forms:
 *   - y is not a graph output: every use of y reads x instead; the node goes.
 *   - y is a graph output and x is an activation that is neither a graph output nor a graph input:
 *     x's producer writes y directly and x's other consumers read y; the node goes.
 *   - otherwise (x is an input, parameter, constant or another graph output) a copy is needed for
 *     the output to exist under its own name, so the node stays (a Dropout becomes an Identity).
 */
#include <stdlib.h>
#include <string.h>

#include "graph/pass_internal.h"

/* Follows the replacement chain (set by earlier removals) to the value actually read. */
static int repl_resolve(const int *repl, int v) {
    while (v >= 0 && repl[v] >= 0) v = repl[v];
    return v;
}

static bool dropout_is_identity(const sc_graph *g, const sc_node *n, const bool *is_out) {
    if (n->n_out > 1 && n->out[1] >= 0) {
        const sc_value *mask = &g->values[n->out[1]];
        if (mask->n_consumers > 0 || is_out[n->out[1]]) return false;
    }
    if (!node_has_input(n, 2)) return true;
    const sc_value *t = &g->values[n->in[2]];
    return t->kind == SC_VALUE_CONST && t->data && sc_desc_numel(&t->desc) == 1 && t->desc.dtype == SC_BOOL &&
           *(const uint8_t *)t->data == 0;
}

sc_status graph_remove_identity(sc_graph *g) {
    SC_TRY(graph_link(g));
    int *repl = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    bool *is_out = calloc((size_t)g->n_values + 1, 1), *is_in = calloc((size_t)g->n_values + 1, 1);
    bool *keep = malloc((size_t)g->n_nodes + 1);
    if (!repl || !is_out || !is_in || !keep) {
        free(repl), free(is_out), free(is_in), free(keep);
        return sc_errorf("out of memory removing identities");
    }
    for (int v = 0; v < g->n_values; v++) repl[v] = -1;
    for (int i = 0; i < g->n_outputs; i++) is_out[g->outputs[i]] = true;
    for (int i = 0; i < g->n_inputs; i++) is_in[g->inputs[i]] = true;
    for (int i = 0; i < g->n_nodes; i++) {
        sc_node *n = &g->nodes[i];
        keep[i] = true;
        for (int k = 0; k < n->n_in; k++) n->in[k] = repl_resolve(repl, n->in[k]);
        bool identity = n->op == SC_OP_IDENTITY || (n->op == SC_OP_DROPOUT && dropout_is_identity(g, n, is_out));
        if (!identity || n->out[0] < 0) continue;
        int x = n->in[0], y = n->out[0];
        const sc_value *xv = &g->values[x];
        if (!is_out[y]) {
            repl[y] = x;
            keep[i] = false;
        } else if (xv->kind == SC_VALUE_ACT && xv->producer >= 0 && !is_out[x] && !is_in[x]) {
            sc_node *p = &g->nodes[xv->producer];
            for (int k = 0; k < p->n_out; k++)
                if (p->out[k] == x) p->out[k] = y;
            g->values[y].producer = xv->producer;
            repl[x] = y;
            keep[i] = false;
        } else if (n->op == SC_OP_DROPOUT) {
            n->op = SC_OP_IDENTITY;
            n->n_in = n->n_out = 1;
            n->attrs = &sc_attrs_none;
        }
    }
    /* Consumers earlier than a rename (a producer's other consumers) read the renamed value too. */
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) g->nodes[i].in[k] = repl_resolve(repl, g->nodes[i].in[k]);
    sc_status st = graph_compact_nodes(g, keep);
    free(repl), free(is_out), free(is_in), free(keep);
    return st;
}

/* One reverse sweep over the topological order: a node is live when a live value is among its
 * outputs; graph outputs are live. g->inputs stays as ONNX declares it. */
sc_status graph_eliminate_dead_code(sc_graph *g) {
    int bad;
    if (!graph_is_topo_sorted(g, &bad)) SC_TRY(graph_topo_sort(g));
    bool *live = calloc((size_t)g->n_values + 1, 1), *keep = calloc((size_t)g->n_nodes + 1, 1);
    if (!live || !keep) {
        free(live), free(keep);
        return sc_errorf("out of memory eliminating dead code");
    }
    for (int i = 0; i < g->n_outputs; i++) live[g->outputs[i]] = true;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const sc_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_out && !keep[i]; k++) keep[i] = n->out[k] >= 0 && live[n->out[k]];
        if (!keep[i]) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) live[n->in[k]] = true;
    }
    sc_status st = graph_compact_nodes(g, keep);
    free(live), free(keep);
    return st;
}

/* Moves the nodes appended after index n0 to position `at`, in their order (pass_internal.h). */
sc_status graph_move_nodes(sc_graph *g, int n0, int at) {
    int extra = g->n_nodes - n0;
    if (extra <= 0) return SC_OK;
    sc_node *tmp = malloc(sizeof(sc_node) * (size_t)extra);
    if (!tmp) return sc_errorf("out of memory moving nodes");
    memcpy(tmp, &g->nodes[n0], sizeof(sc_node) * (size_t)extra);
    memmove(&g->nodes[at + extra], &g->nodes[at], sizeof(sc_node) * (size_t)(n0 - at));
    memcpy(&g->nodes[at], tmp, sizeof(sc_node) * (size_t)extra);
    free(tmp);
    return SC_OK;
}
