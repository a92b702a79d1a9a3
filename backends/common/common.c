/* Host helpers shared by the CPU and CUDA kernels (backends/common/common.h). */
#include <stdio.h>
#include <stdlib.h>

#include "backends/comm.h"
#include "backends/common/common.h"

const char *sc_kernel_missing_reason(sc_op op) {
    switch (op) {
    case SC_OP_CONSTANT: return "Constant nodes are turned into constant values by the importer";
    case SC_OP_EINSUM: return "graph_prepare lowers Einsum to Transpose, Reshape, ReduceSum and MatMul";
    default: return sc_op_is_control(op) ? SC_CONTROL_OP_REASON : NULL;
    }
}

bool sc_optim_tensors_match(const sc_tensor *in, const int *idx, int n, bool half_g, char *why, size_t why_size) {
    sc_dtype t = in[0].desc.dtype;
    int64_t numel = sc_desc_numel(&in[0].desc);
    if (t != SC_F32 && t != SC_F64) {
        snprintf(why, why_size, "dtype %s not supported (f32, f64)", sc_dtype_name(t));
        return false;
    }
    for (int k = 0; k < n; k++) {
        const sc_tensor *x = &in[idx[k]];
        if (!x->data) continue;
        bool half = half_g && idx[k] == 1 && t == SC_F32 && (x->desc.dtype == SC_BF16 || x->desc.dtype == SC_F16);
        if ((x->desc.dtype != t && !half) || sc_desc_numel(&x->desc) != numel) {
            snprintf(why, why_size, "input %d must match W (%s, %lld elements)", idx[k], sc_dtype_name(t), (long long)numel);
            return false;
        }
    }
    return true;
}

double sc_decimal_of(float f) {
    char buf[32];
    for (int digits = 6; digits < 9; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, (double)f);
        double d = strtod(buf, NULL);
        if ((float)d == f) return d;
    }
    return (double)f;
}

sc_status sc_collective_host(const sc_node *n, void *flat, int64_t elems, sc_dtype t) {
    const sc_all_reduce_attrs *a = &n->attrs->all_reduce;
    int64_t bytes = elems * (int64_t)sc_dtype_size(t);
    char what[600];
    snprintf(what, sizeof what, "%s '%s' (bucket %d, %lld bytes)", sc_op_name(n->op), n->name, a->bucket, (long long)bytes);
    switch (n->op) {
    case SC_OP_ALL_REDUCE: return sc_comm_allreduce_mean(flat, elems, t, what);
    case SC_OP_REDUCE: return sc_comm_reduce_mean(flat, elems, t, a->owner, what);
    case SC_OP_BROADCAST: return sc_comm_bcast(flat, bytes, a->owner, what);
    default: return sc_errorf("internal: node '%s' (%s) is not a collective", n->name, sc_op_name(n->op));
    }
}
