/* Shape functions of the fused gradient ops of NN layers (graph/ops_train.def lists their inputs).
 *
 * A gradient has the desc of the value it is the gradient of: dX like X, dW like W, dB [M],
 * dScale / dBias of BatchNormalizationGrad like scale ([C]). LayerNormalizationGrad's dScale and
 * dBias are dense over the normalised dims X.shape[axis:] (the rule sums them down to the shapes of
 * a broadcast Scale or B). Gradient ops take explicit pads only: the forward's shape function has
 * already resolved auto_pad (graph/shape_nn.c), and the rule copies those attributes.
 */
#include "graph/shape_fns.h"

/* SoftmaxGrad, LogSoftmaxGrad (dY, Y): dX like Y; the axis must fit Y's rank. */
sc_status shape_softmax_grad(sc_graph *g, sc_node *n) {
    SC_TRY(shape_float_input(g, n, 0));
    SC_TRY(shape_same_desc(g, n, 0, 1));
    const sc_desc *y = shape_in(g, n, 1);
    int axis;
    SC_TRY(shape_axis(g, n, n->attrs->axis.axis, y->rank > 0 ? y->rank : 1, &axis));
    return shape_out(g, n, y);
}

/* Window ops take what the forward's shape function left: explicit pads, kernel_shape set. */
static sc_status window_explicit(const sc_graph *g, const sc_node *n, const sc_desc *x) {
    const sc_window_attrs *w = &n->attrs->window;
    if (x->rank < 3 || x->rank - 2 > SC_MAX_SPATIAL) return shape_fail(g, n, "X must have rank 3..%d", SC_MAX_SPATIAL + 2);
    if (w->auto_pad != SC_AUTO_PAD_NOTSET)
        return shape_fail(g, n, "auto_pad must be resolved into explicit pads (by the forward's shape inference)");
    if (w->n_spatial != x->rank - 2)
        return shape_fail(g, n, "window attributes have %d spatial dims, X has %d", w->n_spatial, x->rank - 2);
    for (int i = 0; i < w->n_spatial; i++)
        if (w->strides[i] <= 0 || w->dilations[i] <= 0 || w->pads[i] < 0 || w->pads[i + w->n_spatial] < 0)
            return shape_fail(g, n, "strides and dilations must be positive and pads not negative (spatial dim %d)", i);
    return SC_OK;
}

/* ConvGrad (dY [N, M, O...], X [N, C, D...], W [M, C/group, k...]) -> (dX like X, dW like W, dB [M]). */
sc_status shape_conv_grad(sc_graph *g, sc_node *n) {
    const sc_desc *dy = shape_in(g, n, 0), *x = shape_in(g, n, 1), *w = shape_in(g, n, 2);
    SC_TRY(shape_float_input(g, n, 0));
    SC_TRY(window_explicit(g, n, x));
    int64_t G = n->attrs->window.group > 0 ? n->attrs->window.group : 1;
    if (dy->dtype != x->dtype || w->dtype != x->dtype) return shape_fail(g, n, "dY, X and W must share one dtype");
    if (w->rank != x->rank || dy->rank != x->rank || x->dims[1] != w->dims[1] * G || w->dims[0] % G ||
        dy->dims[0] != x->dims[0] || dy->dims[1] != w->dims[0])
        return shape_fail(g, n, "shapes do not fit a convolution with group %lld", (long long)G);
    shape_set_out(g, n, 0, x);
    shape_set_out(g, n, 1, w);
    sc_desc b = sc_desc_make(x->dtype, 1, &w->dims[0]);
    shape_set_out(g, n, 2, &b);
    return SC_OK;
}

/* MaxPoolGrad, AveragePoolGrad (dY [N, C, O...], X [N, C, D...]) -> dX like X. */
sc_status shape_pool_grad(sc_graph *g, sc_node *n) {
    const sc_desc *dy = shape_in(g, n, 0), *x = shape_in(g, n, 1);
    SC_TRY(shape_float_input(g, n, 0));
    SC_TRY(window_explicit(g, n, x));
    if (!n->attrs->window.has_kernel_shape) return shape_fail(g, n, "kernel_shape is missing");
    if (dy->dtype != x->dtype || dy->rank != x->rank || dy->dims[0] != x->dims[0] || dy->dims[1] != x->dims[1])
        return shape_fail(g, n, "dY must be [N, C, O...] with X's N, C and dtype");
    return shape_out(g, n, x);
}

/* BatchNormalizationGrad (dY, X [N, C, D...], scale [C]) -> (dX like X, dScale [C], dBias [C]). */
sc_status shape_batch_norm_grad(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 1), *s = shape_in(g, n, 2);
    SC_TRY(shape_float_input(g, n, 0));
    SC_TRY(shape_same_desc(g, n, 0, 1));
    if (x->rank < 2) return shape_fail(g, n, "X must have rank >= 2");
    if (s->rank != 1 || s->dims[0] != x->dims[1] || !sc_dtype_is_float(s->dtype))
        return shape_fail(g, n, "scale must be a float [C] with C = %lld", (long long)x->dims[1]);
    shape_set_out(g, n, 0, x);
    shape_set_out(g, n, 1, s);
    shape_set_out(g, n, 2, s);
    return SC_OK;
}

/* LayerNormalizationGrad (dY, X, scale dense over X.shape[axis:]) -> (dX like X, dScale, dBias
 * both X.shape[axis:]). */
sc_status shape_layer_norm_grad(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 1), *s = shape_in(g, n, 2);
    SC_TRY(shape_float_input(g, n, 0));
    SC_TRY(shape_same_desc(g, n, 0, 1));
    int axis;
    SC_TRY(shape_axis(g, n, n->attrs->layer_norm.axis, x->rank, &axis));
    sc_desc norm = sc_desc_make(x->dtype, x->rank - axis, x->dims + axis);
    if (s->dtype != x->dtype || sc_desc_numel(s) != sc_desc_numel(&norm))
        return shape_fail(g, n, "scale must hold the %lld values of the normalised dims (axis %d)",
                          (long long)sc_desc_numel(&norm), axis);
    shape_set_out(g, n, 0, x);
    shape_set_out(g, n, 1, &norm);
    shape_set_out(g, n, 2, &norm);
    return SC_OK;
}

/* ResizeGrad (dY, X[, roi, scales, sizes]) -> dX like X; roi/scales/sizes are the forward's. */
sc_status shape_resize_grad(sc_graph *g, sc_node *n) {
    const sc_desc *dy = shape_in(g, n, 0), *x = shape_in(g, n, 1);
    SC_TRY(shape_float_input(g, n, 0));
    if (dy->dtype != x->dtype || dy->rank != x->rank) return shape_fail(g, n, "dY must have X's dtype and rank");
    return shape_out(g, n, x);
}
