/* The CUDA kernel table: one designated initializer per op (docs/STYLE.md habit 2), launchers declared
 * in cu_kernels.h. A NULL entry is "not supported by the CUDA backend" with the reason below;
 * tests/cuda/test_cuda_ops.c fails on an op that has neither.
 */
#include "backends/cuda/cu_kernels.h"

const cu_kernel cu_kernels[SC_OP_COUNT] = {
    /* cu_conv.c, cu_blas.c, cu_nn.cu, cu_reduce.cu */
    [SC_OP_CONV] = cu_conv,
    [SC_OP_GEMM] = cu_gemm,
    [SC_OP_MATMUL] = cu_matmul,
    [SC_OP_MAX_POOL] = cu_max_pool,
    [SC_OP_AVERAGE_POOL] = cu_average_pool,
    [SC_OP_GLOBAL_AVERAGE_POOL] = cu_global_average_pool,
    [SC_OP_BATCH_NORM] = cu_batch_norm,
    [SC_OP_LAYER_NORM] = cu_layer_norm,
    [SC_OP_SOFTMAX] = cu_softmax,
    [SC_OP_LOG_SOFTMAX] = cu_log_softmax,
    [SC_OP_DROPOUT] = cu_dropout,
    [SC_OP_SOFTMAX_CROSS_ENTROPY_LOSS] = cu_sce_loss,

    /* cu_elementwise.cu */
    [SC_OP_RELU] = cu_relu,
    [SC_OP_LEAKY_RELU] = cu_leaky_relu,
    [SC_OP_SIGMOID] = cu_sigmoid,
    [SC_OP_TANH] = cu_tanh,
    [SC_OP_ERF] = cu_erf,
    [SC_OP_GELU] = cu_gelu,
    [SC_OP_CLIP] = cu_clip,
    [SC_OP_SQRT] = cu_sqrt,
    [SC_OP_RECIPROCAL] = cu_reciprocal,
    [SC_OP_NEG] = cu_neg,
    [SC_OP_EXP] = cu_exp,
    [SC_OP_LOG] = cu_log,
    [SC_OP_NOT] = cu_not,
    [SC_OP_CAST] = cu_cast,
    [SC_OP_IDENTITY] = cu_copy_input,
    [SC_OP_ADD] = cu_add,
    [SC_OP_SUB] = cu_sub,
    [SC_OP_MUL] = cu_mul,
    [SC_OP_DIV] = cu_div,
    [SC_OP_POW] = cu_pow,
    [SC_OP_MAX] = cu_max,
    [SC_OP_MIN] = cu_min,
    [SC_OP_EQUAL] = cu_equal,
    [SC_OP_LESS] = cu_less,
    [SC_OP_GREATER] = cu_greater,
    [SC_OP_AND] = cu_and,
    [SC_OP_OR] = cu_or,
    [SC_OP_WHERE] = cu_where,
    [SC_OP_EXPAND] = cu_expand,

    /* cu_reduce.cu */
    [SC_OP_REDUCE_MEAN] = cu_reduce_mean,
    [SC_OP_REDUCE_SUM] = cu_reduce_sum,

    /* cu_movement.cu (Reshape & co. are copies: the output desc holds the new shape) */
    [SC_OP_RESHAPE] = cu_copy_input,
    [SC_OP_FLATTEN] = cu_copy_input,
    [SC_OP_SQUEEZE] = cu_copy_input,
    [SC_OP_UNSQUEEZE] = cu_copy_input,
    [SC_OP_TRANSPOSE] = cu_transpose,
    [SC_OP_CONCAT] = cu_concat,
    [SC_OP_SPLIT] = cu_split,
    [SC_OP_SLICE] = cu_slice,
    [SC_OP_GATHER] = cu_gather,
    [SC_OP_PAD] = cu_pad,
    [SC_OP_TRILU] = cu_trilu,
    [SC_OP_SHAPE] = cu_shape,
    [SC_OP_CONSTANT_OF_SHAPE] = cu_constant_of_shape,
    [SC_OP_RANGE] = cu_range,

    /* cu_resize.cu (geometry from cpu_resize_geom.c through cu_resize_geom.c) */
    [SC_OP_RESIZE] = cu_resize,

    /* training: gradient ops */
    [SC_OP_RELU_GRAD] = cu_relu_grad,
    [SC_OP_GELU_GRAD] = cu_gelu_grad,
    [SC_OP_SOFTMAX_GRAD] = cu_softmax_grad,
    [SC_OP_LOG_SOFTMAX_GRAD] = cu_log_softmax_grad,
    [SC_OP_CONV_GRAD] = cu_conv_grad,
    [SC_OP_BATCH_NORM_GRAD] = cu_batch_norm_grad,
    [SC_OP_MAX_POOL_GRAD] = cu_max_pool_grad,
    [SC_OP_AVERAGE_POOL_GRAD] = cu_average_pool_grad,
    [SC_OP_LAYER_NORM_GRAD] = cu_layer_norm_grad,
    [SC_OP_SLICE_GRAD] = cu_slice_grad,
    [SC_OP_GATHER_GRAD] = cu_gather_grad,
    [SC_OP_RESIZE_GRAD] = cu_resize_grad,

    /* cu_loss.cu: losses and optimizers */
    [SC_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD] = cu_sce_loss_grad,
    [SC_OP_SGD_UPDATE] = cu_sgd_update,
    [SC_OP_ADAMW_UPDATE] = cu_adamw_update,
};

const char *cu_kernel_missing_reason(sc_op op) {
    switch (op) {
    case SC_OP_CONSTANT: return "Constant nodes are turned into constant values by the importer";
    default: return NULL;
    }
}
