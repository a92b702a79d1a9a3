/* Gradient rules of ReduceSum and ReduceMean (opset 18 form: axes as optional input 1), and CumSum.
 *
 * Every reduced element receives the output gradient of its group: dX = Expand(dY', X.shape) with
 * dY' = dY reshaped to keepdims form (reduced axes as 1); ReduceMean also divides by the group size.
 * No axes reduce everything, or are the identity when noop_with_empty_axes is set.
 */
#include <string.h>

#include "autodiff/grad_rules.h"

void grad_reduce(sc_grad_ctx *c) {
    int x = I(c, 0), dy = GO(c, 0);
    sc_desc xd = *ad_desc(c, x);
    int64_t axes[SC_MAX_RANK];
    int n_axes = 0;
    if (!ad_const_ints(c, I(c, 1), axes, SC_MAX_RANK, &n_axes)) return;
    bool reduced[SC_MAX_RANK] = {false};
    if (n_axes == 0) {
        if (c->fwd.attrs->reduce.noop_with_empty_axes) {
            set_GI(c, 0, dy);
            return;
        }
        for (int i = 0; i < xd.rank; i++) reduced[i] = true;
    }
    for (int i = 0; i < n_axes; i++) {
        int64_t a = axes[i] < 0 ? axes[i] + xd.rank : axes[i];
        if (a < 0 || a >= xd.rank) {
            ad_fail(c, "axis %lld out of range for rank %d", (long long)axes[i], xd.rank);
            return;
        }
        reduced[a] = true;
    }
    sc_desc kd = xd; /* keepdims form of Y */
    int64_t group = 1;
    for (int i = 0; i < xd.rank; i++)
        if (reduced[i]) {
            group *= xd.dims[i];
            kd.dims[i] = 1;
        }
    kd.dtype = ad_desc(c, dy)->dtype;
    int g = ad_reshape(c, dy, &kd);
    if (c->fwd.op == SC_OP_REDUCE_MEAN && group > 0) g = ad_scale(c, g, 1.0 / (double)group);
    if (sc_desc_same_shape(&kd, &xd)) {
        set_GI(c, 0, g);
        return;
    }
    int in[2] = {g, ad_const_i64(c, xd.dims, xd.rank)};
    set_GI(c, 0, ad_emit(c, SC_OP_EXPAND, in, 2, 1, NULL, NULL));
}

/* CumSum: y[j] = sum over i <= j of x[i] (i < j exclusive), so dx[i] = sum over j >= i of dy[j]
 * (j > i exclusive): the running sum of dY taken the other way, same axis and exclusivity. The axis
 * is an integer input: no gradient. */
void grad_cum_sum(sc_grad_ctx *c) {
    sc_attrs a = *c->fwd.attrs;
    a.cum_sum.reverse = !a.cum_sum.reverse;
    int in[2] = {GO(c, 0), I(c, 1)};
    set_GI(c, 0, ad_emit(c, SC_OP_CUM_SUM, in, 2, 1, NULL, &a));
}
