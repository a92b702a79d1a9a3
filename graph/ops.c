#include "graph/ops.h"

#include <string.h>

const sc_op_info sc_op_infos[SC_OP_COUNT] = {
#define SC_OP(id, name, min_in, max_in, min_out, max_out) [SC_OP_##id] = {name, min_in, max_in, min_out, max_out},
#include "graph/ops.def"
#include "graph/ops_train.def"
#undef SC_OP
};

sc_op sc_op_from_onnx_name(const char *name) {
    for (int i = 0; i < SC_OP_PUBLIC_COUNT; i++)
        if (strcmp(sc_op_infos[i].onnx_name, name) == 0) return (sc_op)i;
    return SC_OP_COUNT;
}

int sc_op_inplace_input(sc_op op, int out) {
    switch (op) {
    case SC_OP_SGD_UPDATE: return out == 0 ? 0 : 2;           /* W' = W, M' = M */
    case SC_OP_ADAMW_UPDATE: return out == 0 ? 0 : out + 1;  /* W' = W, M' = M, V' = V */
    default: return -1;
    }
}
