/* Helpers for the passes that lower one node to others (graph/pass_einsum.c, graph/pass_resize.c):
 * nodes appended at the end with their descs inferred, then spliced in where the lowered node was
 * (contracts in graph/pass_internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/pass_internal.h"
#include "graph/shape.h"

/* Node i is replaced by the nodes appended from n0 on (pass_internal.h). */
sc_status graph_splice_lowered(sc_graph *g, int *i, int n0) {
    int at = *i, out = g->nodes[at].out[0], extra = g->n_nodes - n0;
    if (extra <= 0) return sc_errorf("node '%s': lowered to nothing", g->nodes[at].name);
    /* the last node made writes node i's output; node i writes the value nobody reads */
    sc_node *last = &g->nodes[g->n_nodes - 1];
    g->nodes[at].out[0] = last->out[0];
    last->out[0] = out;
    g->values[out].producer = g->n_nodes - 1;
    SC_TRY(graph_move_nodes(g, n0, at));
    bool *keep = malloc(sizeof(bool) * (size_t)g->n_nodes);
    if (!keep) return sc_errorf("out of memory lowering node '%s'", g->nodes[at + extra].name);
    for (int j = 0; j < g->n_nodes; j++) keep[j] = j != at + extra;
    sc_status st = graph_compact_nodes(g, keep);
    free(keep);
    *i = at + extra - 1;
    return st;
}

int lowering_emit(sc_lowering *x, sc_op op, const char *what, const int *in, int n_in, const sc_attrs *a) {
    if (x->st) return -1;
    sc_graph *g = x->g;
    char name[512];
    snprintf(name, sizeof name, "%s/%s", x->base, what);
    int out = graph_add_value_unique(g, name, SC_VALUE_ACT, NULL, &x->st);
    if (out < 0) return -1;
    int id = graph_add_node(g, op, g->values[out].name, in, n_in, &out, 1, &x->st);
    if (id < 0) return -1;
    if (a && (x->st = graph_node_set_attrs(g, &g->nodes[id], a))) return -1;
    x->st = sc_shape_fns[op](g, &g->nodes[id]);
    return x->st ? -1 : out;
}

int lowering_const(sc_lowering *x, const char *what, const sc_desc *d, const void *data) {
    if (x->st) return -1;
    sc_graph *g = x->g;
    char name[512];
    snprintf(name, sizeof name, "%s/%s", x->base, what);
    int id = graph_add_value_unique(g, name, SC_VALUE_CONST, d, &x->st);
    if (id < 0 || (x->st = graph_alloc_data(g, id))) return -1;
    int64_t bytes = sc_desc_bytes(d);
    if (bytes) memcpy(g->values[id].data, data, (size_t)bytes);
    return id;
}
