/* The importer's per-graph state, shared by onnx_load.c and onnx_graph.c (private to import/). */
#ifndef SC_ONNX_LOAD_CTX_H
#define SC_ONNX_LOAD_CTX_H

#include "import/onnx_internal.h"

typedef struct load_ctx {
    sc_graph *g;
    const Onnx__GraphProto *gp; /* the shell: everything but nodes and initializers */
    onnx_wire_field *graphs;    /* the ModelProto's graph fields, in file order (usually one) */
    int n_graphs;
    size_t n_node, n_initializer;
    proto_block *scratch; /* one node or initializer at a time */
    ProtobufCAllocator scratch_alloc;
    sc_tensor_src src;
    int64_t opset;
    int first_node_value; /* values from here on are node outputs */
    int *value_node;      /* per value from first_node_value on: the index of the node that outputs it, -1
                           * for a constant the importer made (import/canonical.c) */
    size_t value_node_n, value_node_cap;
    int *in_buf;
    size_t in_cap;
    /* A Loop body or If branch: the enclosing scope's context, where names this graph does not
     * define are looked up (NULL for the model's graph), and the model's graph, which owns every
     * subgraph. captured[k] is the enclosing scope's value that the subgraph's capture k
     * (g->captures[k]) stands for. */
    struct load_ctx *parent;
    sc_graph *top;
    size_t at; /* the index of the node being imported when a subgraph of it is built */
    int *captured;
    int n_captured, cap_captured;
} load_ctx;

/* onnx_graph.c: one initializer (a TensorProto) and one node (a NodeProto, with the subgraphs of a
 * Loop or If) of c's graph, its inputs and its outputs. */
sc_status onnx_load_initializer(load_ctx *c, size_t idx, const ProtobufCMessage *msg);
sc_status onnx_load_inputs(load_ctx *c);
sc_status onnx_load_node(load_ctx *c, size_t idx, const ProtobufCMessage *msg);
sc_status onnx_load_outputs(load_ctx *c);

#endif
