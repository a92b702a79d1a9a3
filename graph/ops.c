#include "graph/ops.h"

#include <string.h>

const sc_op_info sc_op_infos[SC_OP_COUNT] = {
#define SC_OP(id, name, min_in, max_in, min_out, max_out) [SC_OP_##id] = {name, min_in, max_in, min_out, max_out},
#include "graph/ops.def"
#undef SC_OP
};

sc_op sc_op_from_onnx_name(const char *name) {
    for (int i = 0; i < SC_OP_COUNT; i++)
        if (strcmp(sc_op_infos[i].onnx_name, name) == 0) return (sc_op)i;
    return SC_OP_COUNT;
}
