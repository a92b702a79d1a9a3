/* The CPU kernel table, generated from the ops.def rows (docs/STYLE.md habit 2). Kernels are declared in
 * cpu_kernels.h and defined in one file per op family (cpu_<family>*.c). tests/op_coverage.py
 * fails if an op has neither a kernel nor a reason in sc_kernel_missing_reason. */
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/profile.h"

/* Generated from the ops.def rows; `none` rows get NULL. */
#define cpu_none NULL
#define KERNEL_NAME(kernel) cpu_##kernel
const sc_cpu_kernel sc_cpu_kernels[SC_OP_COUNT] = {
#include "backends/common/kernel_table.def"
};
#undef KERNEL_NAME
#undef cpu_none

sc_status cpu_run_node(const sc_node *node, const sc_tensor *in, int n_in, sc_tensor *out, int n_out) {
    sc_cpu_kernel k = sc_cpu_kernels[node->op];
    if (!k) {
        const char *why = sc_kernel_missing_reason(node->op);
        return sc_errorf("node '%s': op %s is not supported by the CPU backend%s%s", node->name,
                         sc_op_name(node->op), why ? ": " : "", why ? why : "");
    }
    sc_kernel_call call = {node, in, n_in, out, n_out};
    bool wide = cpu_needs_widening(node->op, in, n_in, out, n_out);
    if (!sc_profile_enabled()) return wide ? cpu_run_widened(k, &call) : k(&call);
    double t0 = sc_profile_now_ms();
    sc_status st = wide ? cpu_run_widened(k, &call) : k(&call);
    int64_t bytes = 0;
    for (int i = 0; i < n_out; i++)
        if (out[i].data) bytes += sc_desc_bytes(&out[i].desc);
    sc_profile_add(node, sc_profile_now_ms() - t0, bytes);
    return st;
}

static bool cpu_can_run(sc_op op) { return sc_cpu_kernels[op] != NULL; }

const sc_node_evaluator *cpu_evaluator(void) {
    static const sc_node_evaluator eval = {.can_run = cpu_can_run, .run = cpu_run_node};
    return &eval;
}
