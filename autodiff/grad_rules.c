/* The gradient-rule table: one designated initializer per differentiable op (docs/STYLE.md habit 2), and
 * the reason for every op without one. tests/test_grad_tables.c fails on an op with neither.
 * Sections belong to the file that defines the rules; add entries only in your own. */
#include "autodiff/grad_rules.h"

const sc_grad_rule sc_grad_rules[SC_OP_COUNT] = {
    /* grad_elementwise.c */
    [SC_OP_RELU] = grad_relu,
    [SC_OP_LEAKY_RELU] = grad_leaky_relu,
    [SC_OP_SIGMOID] = grad_sigmoid,
    [SC_OP_TANH] = grad_tanh,
    [SC_OP_ERF] = grad_erf,
    [SC_OP_GELU] = grad_gelu,
    [SC_OP_CLIP] = grad_clip,
    [SC_OP_SQRT] = grad_sqrt,
    [SC_OP_RECIPROCAL] = grad_reciprocal,
    [SC_OP_NEG] = grad_neg,
    [SC_OP_EXP] = grad_exp,
    [SC_OP_LOG] = grad_log,
    [SC_OP_CAST] = grad_cast,
    [SC_OP_IDENTITY] = grad_identity,
    [SC_OP_DROPOUT] = grad_dropout,
    [SC_OP_ADD] = grad_add,
    [SC_OP_SUB] = grad_sub,
    [SC_OP_MUL] = grad_mul,
    [SC_OP_DIV] = grad_div,
    [SC_OP_POW] = grad_pow,
    [SC_OP_MAX] = grad_max_min,
    [SC_OP_MIN] = grad_max_min,
    [SC_OP_WHERE] = grad_where,

    /* grad_linear.c */
    [SC_OP_MATMUL] = grad_matmul,
    [SC_OP_GEMM] = grad_gemm,

    /* grad_reduce.c */
    [SC_OP_REDUCE_SUM] = grad_reduce,
    [SC_OP_REDUCE_MEAN] = grad_reduce,

    /* grad_movement.c */
    [SC_OP_RESHAPE] = grad_reshape_like,
    [SC_OP_FLATTEN] = grad_reshape_like,
    [SC_OP_SQUEEZE] = grad_reshape_like,
    [SC_OP_UNSQUEEZE] = grad_reshape_like,
    [SC_OP_TRANSPOSE] = grad_transpose,
    [SC_OP_CONCAT] = grad_concat,
    [SC_OP_SPLIT] = grad_split,
    [SC_OP_SLICE] = grad_slice,
    [SC_OP_GATHER] = grad_gather,
    [SC_OP_EXPAND] = grad_expand,
    [SC_OP_PAD] = grad_pad,
    [SC_OP_TRILU] = grad_trilu,

    /* grad_nn.c */
    [SC_OP_CONV] = grad_conv,
    [SC_OP_BATCH_NORM] = grad_batch_norm,
    [SC_OP_MAX_POOL] = grad_max_pool,
    [SC_OP_AVERAGE_POOL] = grad_average_pool,
    [SC_OP_GLOBAL_AVERAGE_POOL] = grad_global_average_pool,
    [SC_OP_SOFTMAX] = grad_softmax,
    [SC_OP_LOG_SOFTMAX] = grad_log_softmax,
    [SC_OP_LAYER_NORM] = grad_layer_norm,
    [SC_OP_RESIZE] = grad_resize,

    /* grad_loss.c */
    [SC_OP_SOFTMAX_CROSS_ENTROPY_LOSS] = grad_sce_loss,

};

const char *grad_rule_missing_reason(sc_op op) {
    if (sc_op_is_internal(op)) return "not differentiable: gradient ops are not differentiated twice";
    switch (op) {
    case SC_OP_SHAPE: return "not differentiable: the output is a shape (integers)";
    case SC_OP_CONSTANT_OF_SHAPE: return "not differentiable: the output does not depend on input values";
    case SC_OP_RANGE: return "not differentiable: the output is an integer or fixed sequence";
    case SC_OP_EQUAL:
    case SC_OP_LESS:
    case SC_OP_GREATER: return "not differentiable: comparisons output booleans";
    case SC_OP_NOT:
    case SC_OP_AND:
    case SC_OP_OR: return "not differentiable: logical ops work on booleans";
    case SC_OP_CONSTANT: return "not differentiable: Constant nodes become constant values at import";
    default: return NULL;
    }
}
