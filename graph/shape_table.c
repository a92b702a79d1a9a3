/* The shape-function table (graph/shape.h), generated from the ops.def rows. */
#include "graph/shape_fns.h"

/* Generated from the ops.def rows; `none` rows get NULL. */
#define shape_none NULL
const sc_shape_fn sc_shape_fns[SC_OP_COUNT] = {
#define SC_OP(id, name, min_in, max_in, min_out, max_out, family, attrs, since, shape, ...) [SC_OP_##id] = shape_##shape,
#include "graph/ops.def"
#include "graph/ops_train.def"
#undef SC_OP
};
#undef shape_none

const char *shape_fn_missing_reason(sc_op op) {
    switch (op) {
    case SC_OP_CONSTANT: return "Constant nodes are turned into constant values by the importer";
    default: return sc_op_is_control(op) ? SC_CONTROL_OP_REASON : NULL;
    }
}
