/* The op enum and its derived tables, from graph/ops.def. */
#ifndef SC_OPS_H
#define SC_OPS_H

typedef enum {
#define SC_OP(id, name, min_in, max_in, min_out, max_out) SC_OP_##id,
#include "graph/ops.def"
#undef SC_OP
    SC_OP_COUNT
} sc_op;

typedef struct {
    const char *onnx_name;
    int min_inputs, max_inputs, min_outputs, max_outputs;
} sc_op_info;

extern const sc_op_info sc_op_infos[SC_OP_COUNT];

static inline const char *sc_op_name(sc_op op) { return sc_op_infos[op].onnx_name; }
/* SC_OP_COUNT when the ONNX op type is not one of ours. */
sc_op sc_op_from_onnx_name(const char *name);

#endif
