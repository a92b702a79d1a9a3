/* The forward executor for a prepared graph (all shapes static) on the CPU backend.
 *
 * Runs nodes in the graph's (topological) order. Until schedule/ produces plans, activations are
 * heap buffers freed right after their last consumer runs; parameters and constants are read in
 * place from the graph.
 */
#ifndef SC_EXECUTOR_H
#define SC_EXECUTOR_H

#include "graph/graph.h"

/* inputs[i] feeds g->inputs[i] (desc must match exactly). On success outputs[i] holds
 * g->outputs[i] with data malloc'd and owned by the caller (free with sc_tensor_free_data). */
sc_status sc_forward_cpu(sc_graph *g, const sc_tensor *inputs, sc_tensor *outputs);
void sc_tensor_free_data(sc_tensor *t);

#endif
