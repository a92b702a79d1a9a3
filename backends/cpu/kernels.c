/* The CPU kernel table: one designated initializer per op (docs/STYLE.md habit 2). Kernels are declared in
 * cpu_kernels.h and defined in one file per op family (cpu_<family>.c). tests/test_op_tables.c
 * fails if an op has neither an entry here nor a reason in cpu_kernel_missing_reason. */
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/profile.h"

const sc_cpu_kernel sc_cpu_kernels[SC_OP_COUNT] = {
    /* cpu_conv.c, cpu_gemm.c, cpu_pool.c, cpu_norm.c */
    [SC_OP_CONV] = cpu_conv,
    [SC_OP_GEMM] = cpu_gemm,
    [SC_OP_MATMUL] = cpu_matmul,
    [SC_OP_MAX_POOL] = cpu_max_pool,
    [SC_OP_AVERAGE_POOL] = cpu_average_pool,
    [SC_OP_GLOBAL_AVERAGE_POOL] = cpu_global_average_pool,
    [SC_OP_BATCH_NORM] = cpu_batch_norm,
    [SC_OP_LAYER_NORM] = cpu_layer_norm,
    [SC_OP_SOFTMAX] = cpu_softmax,
    [SC_OP_LOG_SOFTMAX] = cpu_log_softmax,

    /* cpu_unary.c, cpu_binary.c, cpu_reduce.c, cpu_movement.c, cpu_resize.c */
    [SC_OP_RELU] = cpu_relu,
    [SC_OP_LEAKY_RELU] = cpu_leaky_relu,
    [SC_OP_SIGMOID] = cpu_sigmoid,
    [SC_OP_TANH] = cpu_tanh,
    [SC_OP_ERF] = cpu_erf,
    [SC_OP_GELU] = cpu_gelu,
    [SC_OP_CLIP] = cpu_clip,
    [SC_OP_SQRT] = cpu_sqrt,
    [SC_OP_RECIPROCAL] = cpu_reciprocal,
    [SC_OP_NEG] = cpu_neg,
    [SC_OP_EXP] = cpu_exp,
    [SC_OP_LOG] = cpu_log,
    [SC_OP_NOT] = cpu_not,
    [SC_OP_CAST] = cpu_cast,
    [SC_OP_IDENTITY] = cpu_copy_input,
    [SC_OP_DROPOUT] = cpu_dropout,
    [SC_OP_ADD] = cpu_add,
    [SC_OP_SUB] = cpu_sub,
    [SC_OP_MUL] = cpu_mul,
    [SC_OP_DIV] = cpu_div,
    [SC_OP_POW] = cpu_pow,
    [SC_OP_MAX] = cpu_max,
    [SC_OP_MIN] = cpu_min,
    [SC_OP_EQUAL] = cpu_equal,
    [SC_OP_LESS] = cpu_less,
    [SC_OP_GREATER] = cpu_greater,
    [SC_OP_AND] = cpu_and,
    [SC_OP_OR] = cpu_or,
    [SC_OP_WHERE] = cpu_where,
    [SC_OP_REDUCE_MEAN] = cpu_reduce_mean,
    [SC_OP_REDUCE_SUM] = cpu_reduce_sum,
    [SC_OP_RESHAPE] = cpu_copy_input,
    [SC_OP_FLATTEN] = cpu_copy_input,
    [SC_OP_SQUEEZE] = cpu_copy_input,
    [SC_OP_UNSQUEEZE] = cpu_copy_input,
    [SC_OP_TRANSPOSE] = cpu_transpose,
    [SC_OP_CONCAT] = cpu_concat,
    [SC_OP_SPLIT] = cpu_split,
    [SC_OP_SLICE] = cpu_slice,
    [SC_OP_GATHER] = cpu_gather,
    [SC_OP_EXPAND] = cpu_expand,
    [SC_OP_PAD] = cpu_pad,
    [SC_OP_TRILU] = cpu_trilu,
    [SC_OP_SHAPE] = cpu_shape,
    [SC_OP_CONSTANT_OF_SHAPE] = cpu_constant_of_shape,
    [SC_OP_RANGE] = cpu_range,
    [SC_OP_RESIZE] = cpu_resize,

    /* cpu_grad_movement.c (training: SliceGrad, GatherGrad) */
    [SC_OP_SLICE_GRAD] = cpu_slice_grad,
    [SC_OP_GATHER_GRAD] = cpu_gather_grad,

    /* cpu_grad_nn.c, cpu_grad_conv.c, ... (training: fused gradient ops of NN layers) */
    [SC_OP_RELU_GRAD] = cpu_relu_grad,
    [SC_OP_GELU_GRAD] = cpu_gelu_grad,
    [SC_OP_SOFTMAX_GRAD] = cpu_softmax_grad,
    [SC_OP_LOG_SOFTMAX_GRAD] = cpu_log_softmax_grad,
    [SC_OP_CONV_GRAD] = cpu_conv_grad,
    [SC_OP_BATCH_NORM_GRAD] = cpu_batch_norm_grad,
    [SC_OP_MAX_POOL_GRAD] = cpu_max_pool_grad,
    [SC_OP_AVERAGE_POOL_GRAD] = cpu_average_pool_grad,
    [SC_OP_LAYER_NORM_GRAD] = cpu_layer_norm_grad,
    [SC_OP_RESIZE_GRAD] = cpu_resize_grad,

    /* cpu_loss.c, cpu_optim.c (training: loss and optimizer ops) */
    [SC_OP_SOFTMAX_CROSS_ENTROPY_LOSS] = cpu_sce_loss,
    [SC_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD] = cpu_sce_loss_grad,
    [SC_OP_SGD_UPDATE] = cpu_sgd_update,
    [SC_OP_ADAMW_UPDATE] = cpu_adamw_update,

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
    if (!sc_profile_enabled()) return k(&call);
    double t0 = sc_profile_now_ms();
    sc_status st = k(&call);
    int64_t bytes = 0;
    for (int i = 0; i < n_out; i++)
        if (out[i].data) bytes += sc_desc_bytes(&out[i].desc);
    sc_profile_add(node, sc_profile_now_ms() - t0, bytes);
    return st;
}

static _Atomic uint64_t params_epoch;

void cpu_params_changed(void) { params_epoch++; }

uint64_t cpu_params_epoch(void) { return params_epoch; }

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

static bool cpu_can_run(sc_op op) { return sc_cpu_kernels[op] != NULL; }

const sc_node_evaluator *cpu_evaluator(void) {
    static const sc_node_evaluator eval = {.can_run = cpu_can_run, .run = cpu_run_node};
    return &eval;
}
