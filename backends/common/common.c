/* Host helpers shared by the CPU and CUDA kernels (backends/common/common.h). */
#include <stdio.h>
#include <stdlib.h>

#include "backends/comm.h"
#include "backends/common/common.h"

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
