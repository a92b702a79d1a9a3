/* Shape functions of the element-wise ops. Unary ops keep the input desc; binary and variadic ops
 * use numpy broadcasting (ONNX Broadcasting.md). Operands must share a dtype except Pow's exponent;
 * comparisons and logical ops produce bool. Also Dropout, and the activation gradients ReluGrad and
 * GeluGrad (graph/ops_train.def). */
#include "graph/shape_fns.h"

/* Relu, Sigmoid, ..., Identity, Clip (whose optional min / max are scalars of the input dtype). */
sc_status shape_unary(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 0);
    for (int i = 1; i < n->n_in; i++) {
        if (!node_has_input(n, i)) continue;
        const sc_desc *b = shape_in(g, n, i);
        if (sc_desc_numel(b) != 1 || b->dtype != x->dtype)
            return shape_fail(g, n, "input %d must be a scalar of the input's dtype", i);
    }
    return shape_out(g, n, x);
}

sc_status shape_not(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 0);
    if (x->dtype != SC_BOOL) return shape_fail(g, n, "input must be bool");
    return shape_out(g, n, x);
}

sc_status shape_cast(sc_graph *g, sc_node *n) {
    sc_desc out = *shape_in(g, n, 0);
    sc_dtype to = n->attrs->cast.to;
    if (to == SC_DTYPE_UNDEFINED || to == SC_STRING || sc_dtype_size(to) == 0)
        return shape_fail(g, n, "cannot cast to %s", sc_dtype_name(to));
    out.dtype = to;
    return shape_out(g, n, &out);
}

static sc_status binary_out(sc_graph *g, sc_node *n, bool same_dtype, sc_desc *out) {
    const sc_desc *a = shape_in(g, n, 0), *b = shape_in(g, n, 1);
    if (same_dtype && a->dtype != b->dtype)
        return shape_fail(g, n, "operand dtypes differ (%s vs %s)", sc_dtype_name(a->dtype), sc_dtype_name(b->dtype));
    return shape_broadcast(n, a, b, out);
}

/* Add, Sub, Mul, Div; Pow's result has the base's dtype whatever the exponent's. */
sc_status shape_binary(sc_graph *g, sc_node *n) {
    sc_desc out;
    SC_TRY(binary_out(g, n, n->op != SC_OP_POW, &out));
    out.dtype = shape_in(g, n, 0)->dtype;
    return shape_out(g, n, &out);
}

sc_status shape_compare(sc_graph *g, sc_node *n) {
    sc_desc out;
    SC_TRY(binary_out(g, n, true, &out));
    out.dtype = SC_BOOL;
    return shape_out(g, n, &out);
}

sc_status shape_logical(sc_graph *g, sc_node *n) {
    if (shape_in(g, n, 0)->dtype != SC_BOOL || shape_in(g, n, 1)->dtype != SC_BOOL)
        return shape_fail(g, n, "operands must be bool");
    sc_desc out;
    SC_TRY(binary_out(g, n, true, &out));
    return shape_out(g, n, &out);
}

/* Max, Min: every input broadcasts together. */
sc_status shape_variadic(sc_graph *g, sc_node *n) {
    sc_desc out = *shape_in(g, n, 0);
    for (int i = 1; i < n->n_in; i++) {
        if (!node_has_input(n, i)) return shape_fail(g, n, "input %d is missing (variadic inputs cannot be omitted)", i);
        const sc_desc *b = shape_in(g, n, i);
        if (b->dtype != out.dtype)
            return shape_fail(g, n, "input %d has dtype %s, input 0 has %s", i, sc_dtype_name(b->dtype), sc_dtype_name(out.dtype));
        SC_TRY(shape_broadcast(n, &out, b, &out));
    }
    return shape_out(g, n, &out);
}

/* Where(cond, X, Y): three-way broadcast, X's dtype. */
sc_status shape_where(sc_graph *g, sc_node *n) {
    const sc_desc *c = shape_in(g, n, 0), *x = shape_in(g, n, 1), *y = shape_in(g, n, 2);
    if (c->dtype != SC_BOOL) return shape_fail(g, n, "condition must be bool");
    if (x->dtype != y->dtype) return shape_fail(g, n, "X and Y dtypes differ");
    sc_desc xy, out;
    SC_TRY(shape_broadcast(n, x, y, &xy));
    SC_TRY(shape_broadcast(n, c, &xy, &out));
    out.dtype = x->dtype;
    return shape_out(g, n, &out);
}

/* Dropout (X[, ratio[, training_mode]]) -> (Y like X[, mask: bool like X]). */
sc_status shape_dropout(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 0);
    shape_set_out(g, n, 0, x);
    sc_desc mask = *x;
    mask.dtype = SC_BOOL;
    shape_set_out(g, n, 1, &mask);
    return SC_OK;
}

/* ReluGrad (dY, Y), GeluGrad (dY, X): dX like input 1. */
sc_status shape_grad_unary(sc_graph *g, sc_node *n) {
    SC_TRY(shape_float_input(g, n, 0));
    SC_TRY(shape_same_desc(g, n, 0, 1));
    return shape_out(g, n, shape_in(g, n, 1));
}
