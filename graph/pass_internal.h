/* Private to graph/pass*.c. */
#ifndef SC_PASS_INTERNAL_H
#define SC_PASS_INTERNAL_H

#include "graph/passes.h"

/* Moves the nodes appended after index n0 (n0 .. n_nodes - 1) to position at <= n0, in their order;
 * the caller relinks. */
sc_status graph_move_nodes(sc_graph *g, int n0, int at);

/* graph_fuse_inference's last rewrite (graph/pass_layout.c): picks the f32 activations stored
 * channels-last and sets the layout flags of the ops around them; *count gains the nodes that read
 * or write one. Needs graph_link. */
sc_status graph_fuse_channels_last(sc_graph *g, int *count);

/* A constant or parameter with its data. */
static inline bool value_is_fixed(const sc_graph *g, int v) {
    return v >= 0 && (g->values[v].kind == SC_VALUE_CONST || g->values[v].kind == SC_VALUE_PARAM) &&
           g->values[v].data;
}

/* A value that a rewrite may drop: read once, not a graph output. Needs graph_link. */
static inline bool value_is_private(const sc_graph *g, int v) {
    return v >= 0 && g->values[v].n_consumers == 1 && !g->values[v].is_output;
}

#endif
