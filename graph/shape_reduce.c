/* Shape functions of the reductions (ReduceMean, ReduceSum; opset 18 form, axes as input 1) and of
 * CumSum (a running sum along one axis).
 * No axes (input omitted or empty): every axis, or the identity when noop_with_empty_axes is set.
 * keepdims keeps reduced axes as 1. */
#include <stdbool.h>

#include "graph/shape_fns.h"

sc_status shape_reduce(sc_graph *g, sc_node *n) {
    const sc_desc *x = &g->values[n->in[0]].desc;
    const sc_reduce_attrs *ra = &n->attrs->reduce;
    int64_t axes[SC_MAX_RANK];
    int cnt = 0;
    if (node_has_input(n, 1)) SC_TRY(shape_const_ints(g, n, 1, axes, SC_MAX_RANK, &cnt));
    bool reduced[SC_MAX_RANK] = {false};
    if (cnt == 0) {
        if (ra->noop_with_empty_axes) {
            return shape_out(g, n, x);
        }
        for (int i = 0; i < x->rank; i++) reduced[i] = true;
    }
    for (int i = 0; i < cnt; i++) {
        int a;
        SC_TRY(shape_axis(g, n, axes[i], x->rank, &a));
        if (reduced[a]) return shape_fail(g, n, "axis %d repeats in axes", a);
        reduced[a] = true;
    }
    sc_desc out = *x;
    out.rank = 0;
    for (int i = 0; i < x->rank; i++) {
        if (!reduced[i])
            out.dims[out.rank++] = x->dims[i];
        else if (ra->keepdims)
            out.dims[out.rank++] = 1;
    }
    return shape_out(g, n, &out);
}

/* CumSum: Y has X's shape and type. axis (input 1) is an integer scalar or 1-element tensor in
 * [-rank, rank - 1], checked here when it is a constant (exports) and by the kernels when it is fed. */
sc_status shape_cum_sum(sc_graph *g, sc_node *n) {
    const sc_desc *x = &g->values[n->in[0]].desc, *a = &g->values[n->in[1]].desc;
    if (x->rank < 1) return shape_fail(g, n, "input must have rank >= 1");
    if ((a->dtype != SC_I64 && a->dtype != SC_I32) || a->rank > 1 || sc_desc_numel(a) != 1)
        return shape_fail(g, n, "axis must be an i32 or i64 scalar");
    if (g->values[n->in[1]].data) {
        int64_t axis;
        int cnt, ax;
        SC_TRY(shape_const_ints(g, n, 1, &axis, 1, &cnt));
        SC_TRY(shape_axis(g, n, axis, x->rank, &ax));
    }
    return shape_out(g, n, x);
}
