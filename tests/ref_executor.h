/* The tests' reference forward executor for a prepared graph (all shapes static) on the CPU backend:
 * nodes in the graph's (topological) order, activations in heap buffers freed right after their last
 * reader, parameters and constants read in place. The library itself runs graphs with the plan
 * executor only (backends/plan_exec.h, backends/infer.h); this one is what tests compare it with.
 */
#ifndef SC_REF_EXECUTOR_H
#define SC_REF_EXECUTOR_H

#include "graph/graph.h"

/* inputs[i] feeds g->inputs[i] (desc must match exactly). On success outputs[i] holds
 * g->outputs[i] with data malloc'd and owned by the caller (free with sc_tensor_free_data). */
sc_status sc_forward_cpu(sc_graph *g, const sc_tensor *inputs, sc_tensor *outputs);

#endif
