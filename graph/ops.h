/* The op enum and its derived tables, from graph/ops.def. */
#ifndef SC_OPS_H
#define SC_OPS_H

#include <stdarg.h>
#include <stdbool.h>

#include "core/status.h"

/* Any number of inputs or outputs (ops.def's arity columns). */
#define SC_MANY 2147483647

typedef enum {
#define SC_OP(id, ...) SC_OP_##id,
#include "graph/ops.def"
    SC_OP_PUBLIC_COUNT, /* ops above can come from ONNX files; internal ops follow */
    SC_OP_INTERNAL_BEFORE_ = SC_OP_PUBLIC_COUNT - 1,
#include "graph/ops_train.def"
#undef SC_OP
    SC_OP_COUNT
} sc_op;

/* Where an op runs under mixed precision (ops.def's precision column, graph/pass_precision.c). */
typedef enum { SC_OP_PREC_LOW, SC_OP_PREC_FP32, SC_OP_PREC_FOLLOW } sc_op_precision;

typedef struct {
    const char *onnx_name;
    int min_inputs, max_inputs, min_outputs, max_outputs;
    const char *family; /* file stem in every stage (ops.def) */
    int since;          /* ONNX opset that introduced the op; 0 for internal ops */
    sc_op_precision precision;
} sc_op_info;

extern const sc_op_info sc_op_infos[SC_OP_COUNT];

static inline const char *sc_op_name(sc_op op) { return sc_op_infos[op].onnx_name; }
/* "<what> '<name>' (<Op>): <message>": the error of one node, as every stage words it (what: "node",
 * "gradient of node"). */
sc_status sc_op_verrorf(const char *what, const char *name, sc_op op, const char *fmt, va_list ap);
/* SC_OP_COUNT when the ONNX op type is not one of ours. Internal ops (ops_train.def) are never
 * returned: they cannot come from a file. */
sc_op sc_op_from_onnx_name(const char *name);
/* Internal ops (from ops_train.def) are in [SC_OP_PUBLIC_COUNT, SC_OP_COUNT). */
static inline int sc_op_is_internal(sc_op op) { return op >= SC_OP_PUBLIC_COUNT; }
/* Loop, If and the sequence ops (ops.def's last rows): graph_infer_shapes lowers them to tensor ops
 * (graph/pass_control.c), so no later stage sees one. */
static inline bool sc_op_is_control(sc_op op) { return op >= SC_OP_LOOP && op <= SC_OP_CONCAT_FROM_SEQUENCE; }
/* What every stage says of a control op it has no function for. */
#define SC_CONTROL_OP_REASON                                                                                          \
    "graph_infer_shapes lowers Loop, If and sequence ops to tensor ops once dims are bound (graph/pass_control.c)"
/* The data-parallel collectives (AllReduce, Reduce, Broadcast; graph/ops_train.def). */
static inline bool sc_op_is_collective(sc_op op) {
    return op == SC_OP_ALL_REDUCE || op == SC_OP_REDUCE || op == SC_OP_BROADCAST;
}
/* For ops that update state in place (optimizer updates): the input whose storage output `out`
 * shares, or -1. The executor and the planner treat such an output as the same memory. */
int sc_op_inplace_input(sc_op op, int out);
/* Whether output 0 of op may be written over input k's storage when that input is dead after the
 * node and has the output's shape and dtype: every backend's kernel for op is an element-wise map
 * that reads element i of input k before it writes element i of the output, and nothing else
 * there. The planner then hands the dying input's block to the output (schedule/alloc.c): a
 * gradient sum Add(partial, contribution) needs two buffers instead of three. Kernels must keep this
 * true (tests/test_inplace.c runs each such op in place against out of place). */
bool sc_op_donor_input_ok(sc_op op, int k);
/* Ops whose output 0 holds input 0's bytes unchanged under another shape (Identity, Reshape,
 * Flatten, Squeeze, Unsqueeze). They are donors for input 0 with equal byte counts instead of equal
 * shapes, and their kernels copy nothing when the two buffers are one. */
bool sc_op_is_view(sc_op op);
/* The same for output `out`: output 0 as above, and AllReduce's output k over its input k (its kernel
 * packs every input before it writes an output). */
bool sc_op_donor_pair_ok(sc_op op, int out, int k);

#endif
