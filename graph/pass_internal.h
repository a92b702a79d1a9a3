/* Private to graph/pass*.c. */
#ifndef SC_PASS_INTERNAL_H
#define SC_PASS_INTERNAL_H

#include "graph/passes.h"

/* Keeps the nodes with keep[i] set, in order, then relinks the graph. */
sc_status graph_compact_nodes(sc_graph *g, const bool *keep);
/* Moves the nodes appended after index n0 (n0 .. n_nodes - 1) to position at <= n0, in their order;
 * the caller relinks. */
sc_status graph_move_nodes(sc_graph *g, int n0, int at);

#endif
