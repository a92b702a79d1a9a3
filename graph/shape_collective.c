/* Shape functions of the collectives (internal ops, graph/ops_train.def): a bucket of gradients
 * averaged over the ranks (AllReduce; Reduce, whose outputs exist on the bucket's owner only) or of
 * parameters sent from their owner (Broadcast); each output has its input's desc. */
#include "graph/shape_fns.h"

sc_status shape_all_reduce(sc_graph *g, sc_node *n) {
    if (n->n_out != n->n_in) return shape_fail(g, n, "AllReduce needs one output per input (%d inputs, %d outputs)", n->n_in, n->n_out);
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0) return shape_fail(g, n, "input %d is required", k);
        sc_dtype t = shape_in(g, n, k)->dtype;
        if (t != SC_F32 && t != SC_F64)
            return shape_fail(g, n, "input %d is %s: gradients are averaged in f32 or f64", k, sc_dtype_name(t));
        shape_set_out(g, n, k, shape_in(g, n, k));
    }
    return SC_OK;
}

sc_status shape_reduce_to_owner(sc_graph *g, sc_node *n) {
    if (n->n_out != 0 && n->n_out != n->n_in)
        return shape_fail(g, n, "Reduce has one output per input on the owner and none elsewhere (%d inputs, %d outputs)",
                          n->n_in, n->n_out);
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0) return shape_fail(g, n, "input %d is required", k);
        sc_dtype t = shape_in(g, n, k)->dtype;
        if (t != SC_F32 && t != SC_F64)
            return shape_fail(g, n, "input %d is %s: gradients are averaged in f32 or f64", k, sc_dtype_name(t));
        if (n->n_out) shape_set_out(g, n, k, shape_in(g, n, k));
    }
    return SC_OK;
}

sc_status shape_broadcast_from_owner(sc_graph *g, sc_node *n) {
    if (n->n_out != n->n_in) return shape_fail(g, n, "Broadcast needs one output per input (%d inputs, %d outputs)", n->n_in, n->n_out);
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0) return shape_fail(g, n, "input %d is required", k);
        shape_set_out(g, n, k, shape_in(g, n, k));
    }
    return SC_OK;
}
