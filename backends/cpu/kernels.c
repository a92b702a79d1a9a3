/* The CPU kernel table: one designated initializer per op (STYLE.md habit 2). Kernels are declared in
 * cpu_kernels.h and defined in one file per op family (cpu_<family>.c). tests/test_op_tables.c
 * fails if an op has neither an entry here nor a reason in cpu_kernel_missing_reason. */
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_kernels.h"

const sc_cpu_kernel sc_cpu_kernels[SC_OP_COUNT] = {
    /* cpu_conv.c, cpu_gemm.c, cpu_pool.c, cpu_norm.c */

    /* cpu_unary.c, cpu_binary.c, cpu_reduce.c, cpu_movement.c, cpu_resize.c */

};

const char *cpu_kernel_missing_reason(sc_op op) {
    switch (op) {
    case SC_OP_CONSTANT: return "Constant nodes are turned into constant values by the importer";
    default: return NULL;
    }
}

sc_status cpu_run_node(const sc_node *node, const sc_tensor *in, int n_in, sc_tensor *out, int n_out) {
    sc_cpu_kernel k = sc_cpu_kernels[node->op];
    if (!k)
        return sc_errorf("node '%s': op %s is not supported by the CPU backend%s%s", node->name,
                         sc_op_name(node->op), cpu_kernel_missing_reason(node->op) ? ": " : "",
                         cpu_kernel_missing_reason(node->op) ? cpu_kernel_missing_reason(node->op) : "");
    sc_kernel_call call = {node, in, n_in, out, n_out};
    return k(&call);
}

void cpu_set_num_threads(int n) {
    if (n > 0) omp_set_num_threads(n);
}

int cpu_num_threads(void) { return omp_get_max_threads(); }

sc_status cpu_errorf(const sc_kernel_call *call, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sc_errorf("node '%s' (%s): %s", call->node->name, sc_op_name(call->node->op), msg);
}
