/* The CUDA kernel table, generated from the ops.def rows (docs/STYLE.md habit 2), launchers declared
 * in cu_kernels.h. A NULL entry is "not supported by the CUDA backend" with the reason below;
 * tests/op_coverage.py fails on an op that has neither.
 */
#include "backends/cuda/cu_kernels.h"

/* Generated from the ops.def rows; `none` rows get NULL. */
#define cu_none NULL
#define KERNEL_NAME(kernel) cu_##kernel
const cu_kernel cu_kernels[SC_OP_COUNT] = {
#include "backends/common/kernel_table.def"
};
#undef KERNEL_NAME
#undef cu_none
