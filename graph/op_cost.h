/* The cost of one node, from its op's cost function (the `cost` column of graph/ops.def). One
 * estimate serves the planner's time model (schedule/cost.c), constant folding's work limit
 * (pass_infer.c) and `scorch-run info`. */
#ifndef SC_OP_COST_H
#define SC_OP_COST_H

#include "graph/graph.h"

typedef struct {
    double flops; /* arithmetic work; for data-bound ops, one per element read or written */
    double bytes; /* bytes of the node's inputs and outputs: its memory traffic */
    double comm_bytes; /* bytes each rank sends (and receives) between ranks: collectives only */
} sc_op_cost;

/* Unknown (symbolic) dims count as 0 elements. */
sc_op_cost sc_node_cost(const sc_graph *g, const sc_node *n);

#endif
