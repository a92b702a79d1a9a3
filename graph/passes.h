/* Graph passes, run in this order by graph_prepare after import (docs/DESIGN.md, graph/). */
#ifndef SC_PASSES_H
#define SC_PASSES_H

#include "graph/graph.h"

typedef struct {
    const char *name;
    int64_t value;
} sc_dim_binding;

/* What constant folding runs nodes with: the caller's kernels (the CPU backend's, cpu_evaluator()
 * in backends/cpu/cpu.h), so graph/ needs no backend. can_run: a kernel exists for op. */
typedef struct {
    bool (*can_run)(sc_op op);
    sc_status (*run)(const sc_node *n, const sc_tensor *in, int n_in, sc_tensor *out, int n_out);
} sc_node_evaluator;

typedef struct {
    int64_t batch; /* binds a symbolic dim 0 of every graph input; 0 = default 1 */
    int64_t seq;   /* binds a symbolic dim 1 of integer (token id) inputs; 0 = unset */
    const sc_dim_binding *dims; /* --dim NAME=N, by symbolic name; wins over batch/seq */
    int n_dims;
    /* Added (perf helper): the graph will only run forward with frozen parameters, so
     * graph_prepare may run graph_fuse_inference. Never set for a graph that trains. */
    bool inference;
    /* Constant folding's kernels; NULL: nothing is folded, so a graph that needs folding to get
     * static shapes (PyTorch's Shape/Gather/Concat chains) does not prepare. */
    const sc_node_evaluator *eval;
    /* Mixed precision: SC_BF16 runs the ops the precision column of graph/ops.def marks low in bf16
     * (graph_apply_precision); 0 or SC_F32: everything as the model has it. */
    sc_dtype precision;
} sc_bind_options;

/* Binds symbolic input dims; fails naming the input and dim that stays unbound. */
sc_status graph_bind_dims(sc_graph *g, const sc_bind_options *opt);
/* Infers every value's desc in topological order, folding nodes whose inputs are all constant
 * (and Shape of a static value) into constant values, so PyTorch's shape subgraphs disappear. */
sc_status graph_infer_shapes(sc_graph *g, const sc_node_evaluator *eval);
/* Removes Identity nodes (and Dropout outside training) by rewiring their consumers. */
sc_status graph_remove_identity(sc_graph *g);
/* Removes nodes and values that no graph output depends on. */
sc_status graph_eliminate_dead_code(sc_graph *g);
/* Every Einsum becomes Transpose/Reshape/ReduceSum/MatMul nodes (graph/pass_einsum.c); needs static
 * shapes. Fails naming the node for an equation that does not fit its operands. */
sc_status graph_lower_einsum(sc_graph *g, int *count);
/* Resize in cubic mode, or linear with antialias, becomes one MatMul per resized axis with a
 * constant interpolation matrix (graph/pass_resize.c); *count (may be NULL) gets the nodes
 * lowered. Needs static shapes and constant scales / sizes / roi (after graph_infer_shapes). */
sc_status graph_lower_resize(sc_graph *g, int *count);
/* MatMul(A, Transpose(W)) of a 2-D W becomes a Gemm with transB reading W in place (plus two
 * Reshapes when A has rank > 2), so W^T is never materialised (graph/pass_transpose_gemm.c).
 * Valid for training. *count (may be NULL): MatMuls rewritten. */
sc_status graph_fold_transpose_into_gemm(sc_graph *g, int *count);
/* Added (perf helper, graph/pass_fuse.c): inference-only rewrites (parameter folding, Conv+BN,
 * Conv+Relu, channels-last values). Invalid for a graph that trains. */
sc_status graph_fuse_inference(sc_graph *g, const sc_node_evaluator *eval);
/* GELU written as element-wise ops, exact (Erf) or tanh form, becomes one Gelu node
 * (graph/pass_gelu.c). Valid for training. *count (may be NULL): Gelu nodes made. */
sc_status graph_fuse_gelu(sc_graph *g, int *count);
/* Casts the inputs of every node to the type its op's precision rule wants (graph/pass_precision.c),
 * low being SC_BF16 (SC_F32: nothing to do); graph outputs keep their types. */
sc_status graph_apply_precision(sc_graph *g, sc_dtype low, const sc_node_evaluator *eval);
/* All of the above, in order (graph_fuse_inference only with opt->inference), then links and
 * checks the graph. */
sc_status graph_prepare(sc_graph *g, const sc_bind_options *opt);

#endif
