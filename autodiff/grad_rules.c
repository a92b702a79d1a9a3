/* The gradient-rule table, generated from the ops.def rows (docs/STYLE.md habit 2), and the reason for
 * every op without a rule. tests/test_grad_tables.c fails on an op with neither. */
#include "autodiff/grad_rules.h"

#define grad_none NULL
const sc_grad_rule sc_grad_rules[SC_OP_COUNT] = {
#define SC_OP(id, name, min_in, max_in, min_out, max_out, family, attrs, since, shape, kernel, grad, ...) \
    [SC_OP_##id] = grad_##grad,
#include "graph/ops.def"
#include "graph/ops_train.def"
#undef SC_OP
};
#undef grad_none

const char *grad_rule_missing_reason(sc_op op) {
    if (sc_op_is_internal(op)) return "not differentiable: gradient ops are not differentiated twice";
    if (sc_op_is_control(op)) return "not differentiable as such: " SC_CONTROL_OP_REASON ", which are";
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
    case SC_OP_EINSUM:
        return "not differentiable as such: graph_prepare lowers Einsum to Transpose, Reshape, ReduceSum and MatMul, "
               "which are";
    default: return NULL;
    }
}
