#include "graph/ops.h"

#include <stdio.h>
#include <string.h>

const sc_op_info sc_op_infos[SC_OP_COUNT] = {
#define PREC_low SC_OP_PREC_LOW
#define PREC_fp32 SC_OP_PREC_FP32
#define PREC_follow SC_OP_PREC_FOLLOW
#define SC_OP(id, name, min_in, max_in, min_out, max_out, family, attrs, since, shape, kernel, grad, cost, precision) \
    [SC_OP_##id] = {name, min_in, max_in, min_out, max_out, #family, since, PREC_##precision},
#include "graph/ops.def"
#include "graph/ops_train.def"
#undef SC_OP
};

sc_status sc_op_verrorf(const char *what, const char *name, sc_op op, const char *fmt, va_list ap) {
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    return sc_errorf("%s '%s' (%s): %s", what, name, sc_op_name(op), msg);
}

sc_op sc_op_from_onnx_name(const char *name) {
    for (int i = 0; i < SC_OP_PUBLIC_COUNT; i++)
        if (strcmp(sc_op_infos[i].onnx_name, name) == 0) return (sc_op)i;
    return SC_OP_COUNT;
}

bool sc_op_donor_input_ok(sc_op op, int k) {
    switch (op) {
    case SC_OP_ADD:
    case SC_OP_SUB:
    case SC_OP_MUL:
    case SC_OP_DIV: return k == 0 || k == 1;
    case SC_OP_RELU: return k == 0;
    case SC_OP_RELU_GRAD: return k == 0 || k == 1; /* (dY, Y) -> dX */
    case SC_OP_GATHER_GRAD: return k == 3;         /* base: each element read once, then its rows added */
    default: return k == 0 && sc_op_is_view(op);
    }
}

bool sc_op_is_view(sc_op op) {
    switch (op) {
    case SC_OP_IDENTITY:
    case SC_OP_RESHAPE:
    case SC_OP_FLATTEN:
    case SC_OP_SQUEEZE:
    case SC_OP_UNSQUEEZE: return true;
    default: return false;
    }
}

bool sc_op_donor_pair_ok(sc_op op, int out, int k) {
    if (op == SC_OP_ALL_REDUCE || op == SC_OP_REDUCE) return out == k;
    return out == 0 && sc_op_donor_input_ok(op, k);
}

int sc_op_inplace_input(sc_op op, int out) {
    switch (op) {
    case SC_OP_SGD_UPDATE: return out == 0 ? 0 : 2;           /* W' = W, M' = M */
    case SC_OP_ADAMW_UPDATE: return out == 0 ? 0 : out + 1;  /* W' = W, M' = M, V' = V */
    case SC_OP_BROADCAST: return out;                         /* W_i' = W_i */
    default: return -1;
    }
}
