/* Graph passes, run in this order by graph_prepare after import (DESIGN.md, graph/). */
#ifndef SC_PASSES_H
#define SC_PASSES_H

#include "graph/graph.h"

typedef struct {
    const char *name;
    int64_t value;
} sc_dim_binding;

typedef struct {
    int64_t batch; /* binds a symbolic dim 0 of every graph input; 0 = default 1 */
    int64_t seq;   /* binds a symbolic dim 1 of integer (token id) inputs; 0 = unset */
    const sc_dim_binding *dims; /* --dim NAME=N, by symbolic name; wins over batch/seq */
    int n_dims;
    /* Added (perf helper): the graph will only run forward with frozen parameters, so
     * graph_prepare may run graph_fuse_inference. Never set for a graph that trains. */
    bool inference;
} sc_bind_options;

/* Binds symbolic input dims; fails naming the input and dim that stays unbound. */
sc_status graph_bind_dims(sc_graph *g, const sc_bind_options *opt);
/* Infers every value's desc in topological order, folding nodes whose inputs are all constant
 * (and Shape of a static value) into constant values, so PyTorch's shape subgraphs disappear. */
sc_status graph_infer_shapes(sc_graph *g);
/* Removes Identity nodes (and Dropout outside training) by rewiring their consumers. */
sc_status graph_remove_identity(sc_graph *g);
/* Removes nodes and values that no graph output depends on. */
sc_status graph_eliminate_dead_code(sc_graph *g);
/* Added (perf helper, graph/pass_fuse.c): inference-only rewrites (parameter folding, Conv+BN,
 * Conv+Relu, GELU from Erf). Invalid for a graph that trains. */
sc_status graph_fuse_inference(sc_graph *g);
/* All of the above, in order (graph_fuse_inference only with opt->inference), then links and
 * checks the graph. */
sc_status graph_prepare(sc_graph *g, const sc_bind_options *opt);

#endif
