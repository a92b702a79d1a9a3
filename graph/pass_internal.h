/* Private to graph/pass*.c. */
#ifndef SC_PASS_INTERNAL_H
#define SC_PASS_INTERNAL_H

#include "graph/passes.h"

/* Keeps the nodes with keep[i] set, in order, then relinks the graph. */
sc_status graph_compact_nodes(sc_graph *g, const bool *keep);

#endif
