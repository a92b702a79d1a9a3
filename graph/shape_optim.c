/* Shape functions of the optimizer updates SGDUpdate and AdamWUpdate (internal ops, graph/ops_train.def,
 * where the input lists are): they return their state with unchanged descs (they work in place). */
#include "graph/shape_fns.h"

static sc_status scalar_input(const sc_graph *g, const sc_node *n, int i, sc_dtype t, const char *what) {
    if (!node_has_input(n, i)) return SC_OK;
    const sc_desc *d = shape_in(g, n, i);
    if (d->dtype != t || sc_desc_numel(d) != 1)
        return shape_fail(g, n, "%s (input %d) must be a %s scalar", what, i, sc_dtype_name(t));
    return SC_OK;
}

/* SGDUpdate (W, G, M, lr[, grad_scale]) -> (W', M'); AdamWUpdate (W, G, M, V, lr, step[, gs]) ->
 * (W', M', V'). States keep their descs; G must match W, or be its bf16/f16 form when W is f32
 * (mixed precision: the update widens it as it reads it). SGD without momentum omits M and M'. */
sc_status shape_optimizer(sc_graph *g, sc_node *n) {
    bool adamw = n->op == SC_OP_ADAMW_UPDATE;
    if (!node_has_input(n, 0) || !node_has_input(n, 1)) return shape_fail(g, n, "W and G are required");
    const sc_desc *w = shape_in(g, n, 0), *gr = shape_in(g, n, 1);
    bool half_g = w->dtype == SC_F32 && (gr->dtype == SC_BF16 || gr->dtype == SC_F16);
    if (!half_g) SC_TRY(shape_same_desc(g, n, 0, 1));
    else if (!sc_desc_same_shape(w, gr)) return shape_fail(g, n, "G must have W's shape");
    if (!sc_dtype_is_float(w->dtype)) return shape_fail(g, n, "W must be a float tensor");
    for (int k = 0; k < n->n_out; k++) {
        int src = k == 0 ? 0 : k + 1; /* W, then M (input 2), V (input 3) */
        if (!node_has_input(n, src)) {
            if (adamw || k == 0) return shape_fail(g, n, "input %d is required", src);
            continue;
        }
        if (src > 0) SC_TRY(shape_same_desc(g, n, 0, src));
        shape_set_out(g, n, k, shape_in(g, n, src));
    }
    int lr = adamw ? 4 : 3;
    if (!node_has_input(n, lr)) return shape_fail(g, n, "lr (input %d) is required", lr);
    SC_TRY(scalar_input(g, n, lr, SC_F32, "lr"));
    if (adamw) {
        if (!node_has_input(n, 5)) return shape_fail(g, n, "step (input 5) is required");
        SC_TRY(scalar_input(g, n, 5, SC_I64, "step"));
    }
    return scalar_input(g, n, adamw ? 6 : 4, SC_F32, "grad_scale");
}
