/* The CUDA kernel table, generated from the ops.def rows (docs/STYLE.md habit 2), launchers declared
 * in cu_kernels.h. A NULL entry is "not supported by the CUDA backend" with the reason below;
 * tests/op_coverage.py fails on an op that has neither.
 */
#include "backends/cuda/cu_kernels.h"

/* Generated from the ops.def rows; `none` rows get NULL. */
#define cu_none NULL
const cu_kernel cu_kernels[SC_OP_COUNT] = {
#define SC_OP(id, name, min_in, max_in, min_out, max_out, family, attrs, since, shape, kernel, ...) \
    [SC_OP_##id] = cu_##kernel,
#include "graph/ops.def"
#include "graph/ops_train.def"
#undef SC_OP
};
#undef cu_none

const char *cu_kernel_missing_reason(sc_op op) {
    switch (op) {
    case SC_OP_CONSTANT: return "Constant nodes are turned into constant values by the importer";
    case SC_OP_EINSUM: return "graph_prepare lowers Einsum to Transpose, Reshape, ReduceSum and MatMul";
    default: return NULL;
    }
}
