/* Gradient rules of the NN layers (contract in autodiff/grad.h). dY is GO(c,0). Fused gradient ops
 * (graph/ops_train.def, CPU kernels in backends/cpu/cpu_nn_*_grad.c) where composing ONNX ops would be
 * slow or need stored intermediates; compositions of ordinary ops where they are cheap:
 *   Conv                  -> ConvGrad(dY, X, W) -> (dX, dW, dB), only the needed outputs
 *   BatchNormalization    training mode -> BatchNormalizationGrad(dY, X, scale) (batch statistics);
 *                         inference mode (frozen statistics, an affine map per channel) ->
 *                         composition, with std = sqrt(var + eps) and sums over all axes but 1:
 *                           dX = dY scale / std,  dB = sum dY,  dScale = (sum dY X - mean dB) / std,
 *                           dMean = -scale dB / std,  dVar = -dScale scale / (2 (var + eps))
 *   MaxPool, AveragePool  -> MaxPoolGrad / AveragePoolGrad(dY, X) with the forward's window
 *   GlobalAveragePool     -> Expand(dY, X.shape) / prod(spatial dims)
 *   Softmax, LogSoftmax   -> SoftmaxGrad / LogSoftmaxGrad(dY, Y), same axis and legacy_2d
 *   LayerNormalization    -> LayerNormalizationGrad(dY, X, scale) -> (dX, dScale, dBias) over the
 *                            normalised dims, summed down to the shapes of a broadcast Scale / B
 *   Resize                -> ResizeGrad(dY, X, roi, scales, sizes) (nearest, linear)
 * Relu and Gelu rules live in grad_elementwise.c (they emit ReluGrad / GeluGrad, whose kernels are
 * in cpu_nn_grad.c). Window attributes are copied from the forward node after its shape inference,
 * so pads are explicit (auto_pad resolved, graph/shape_nn.c).
 */
#include <string.h>

#include "autodiff/grad_rules.h"

/* Emits op with n_out outputs and drops those with want[k] false (the kernel then skips them):
 * the dropped values stay in the graph with no producer or consumer. */
static void emit_partial(sc_grad_ctx *c, sc_op op, const int *in, int n_in, int n_out, const bool *want, int *out,
                         const sc_attrs *attrs) {
    for (int k = 0; k < n_out; k++) out[k] = -1;
    int ids[8];
    if (ad_emit(c, op, in, n_in, n_out, ids, attrs) < 0) return;
    sc_node *n = &c->g->nodes[c->g->values[ids[0]].producer];
    for (int k = 0; k < n_out; k++) {
        if (want[k]) {
            out[k] = ids[k];
        } else {
            n->out[k] = -1;
            c->g->values[ids[k]].producer = -1;
        }
    }
}

/* Conv (X, W[, B]): one ConvGrad computes whichever of dX, dW, dB are needed. */
void grad_conv(sc_grad_ctx *c) {
    bool want[3] = {NEED_GI(c, 0), NEED_GI(c, 1), I(c, 2) >= 0 && NEED_GI(c, 2)};
    int n_out = want[2] ? 3 : want[1] ? 2 : 1;
    int in[3] = {GO(c, 0), I(c, 0), I(c, 1)}, out[3];
    emit_partial(c, SC_OP_CONV_GRAD, in, 3, n_out, want, out, c->fwd.attrs);
    for (int k = 0; k < n_out; k++)
        if (want[k]) set_GI(c, k, out[k]);
}

/* [C] -> [C, 1, ..., 1] so it broadcasts against X [N, C, D...]. */
static int per_channel(sc_grad_ctx *c, int v, const sc_desc *x) {
    sc_desc d = *ad_desc(c, v);
    d.rank = x->rank - 1;
    d.dims[0] = x->dims[1];
    for (int i = 1; i < d.rank; i++) d.dims[i] = 1;
    return ad_reshape(c, v, &d);
}

/* Sum over every axis but the channel axis 1: [N, C, D...] -> [C]. */
static int sum_but_channel(sc_grad_ctx *c, int v) {
    const sc_desc *d = ad_desc(c, v);
    int64_t axes[SC_MAX_RANK];
    int n = 0;
    for (int i = 0; i < d->rank; i++)
        if (i != 1) axes[n++] = i;
    return ad_reduce_sum(c, v, axes, n, false);
}

static void grad_batch_norm_inference(sc_grad_ctx *c) {
    const sc_desc x = *ad_desc(c, I(c, 0));
    int dy = GO(c, 0), scale = I(c, 1), mean = I(c, 3), var = I(c, 4);
    int ve = ad_binary(c, SC_OP_ADD, var, ad_const_scalar(c, x.dtype, (double)c->fwd.attrs->batch_norm.epsilon));
    int std = ad_unary(c, SC_OP_SQRT, ve);
    int a = ad_binary(c, SC_OP_DIV, scale, std); /* scale / std, [C] */
    if (NEED_GI(c, 0)) set_GI(c, 0, ad_binary(c, SC_OP_MUL, dy, per_channel(c, a, &x)));
    bool need_db = NEED_GI(c, 1) || NEED_GI(c, 2) || NEED_GI(c, 3) || NEED_GI(c, 4);
    int db = need_db ? sum_but_channel(c, dy) : -1;
    if (NEED_GI(c, 2)) set_GI(c, 2, db);
    if (NEED_GI(c, 3)) set_GI(c, 3, ad_unary(c, SC_OP_NEG, ad_binary(c, SC_OP_MUL, a, db)));
    if (NEED_GI(c, 1) || NEED_GI(c, 4)) {
        int s1 = sum_but_channel(c, ad_binary(c, SC_OP_MUL, dy, I(c, 0)));
        int dscale = ad_binary(c, SC_OP_DIV, ad_binary(c, SC_OP_SUB, s1, ad_binary(c, SC_OP_MUL, mean, db)), std);
        set_GI(c, 1, dscale);
        if (NEED_GI(c, 4)) {
            int t = ad_binary(c, SC_OP_DIV, ad_binary(c, SC_OP_MUL, dscale, scale), ve);
            set_GI(c, 4, ad_scale(c, t, -0.5));
        }
    }
}

/* BatchNormalization (X, scale, B, input_mean, input_var). In training mode Y depends on the batch
 * statistics of X only; input_mean / input_var feed just the running-statistics outputs, which are
 * written back, not differentiated. */
void grad_batch_norm(sc_grad_ctx *c) {
    if (GO(c, 1) >= 0 || GO(c, 2) >= 0) {
        ad_fail(c, "a gradient flows into the running mean / variance outputs, which is not supported");
        return;
    }
    if (!c->fwd.attrs->batch_norm.training_mode) {
        grad_batch_norm_inference(c);
        return;
    }
    bool want[3] = {NEED_GI(c, 0), NEED_GI(c, 1), NEED_GI(c, 2)};
    if (!want[0] && !want[1] && !want[2]) return;
    int n_out = want[2] ? 3 : want[1] ? 2 : 1;
    int in[3] = {GO(c, 0), I(c, 0), I(c, 1)}, out[3];
    emit_partial(c, SC_OP_BATCH_NORM_GRAD, in, 3, n_out, want, out, c->fwd.attrs);
    for (int k = 0; k < n_out; k++)
        if (want[k]) set_GI(c, k, out[k]);
}

/* MaxPool (X) -> (Y[, Indices]); Indices are integers and carry no gradient. */
void grad_max_pool(sc_grad_ctx *c) {
    ad_grad_kernel(c, SC_OP_MAX_POOL_GRAD, I(c, 0));
}

void grad_average_pool(sc_grad_ctx *c) {
    ad_grad_kernel(c, SC_OP_AVERAGE_POOL_GRAD, I(c, 0));
}

/* GlobalAveragePool: Y[n, c] = mean X[n, c, :], so dX = dY broadcast over the spatial dims / S. */
void grad_global_average_pool(sc_grad_ctx *c) {
    const sc_desc x = *ad_desc(c, I(c, 0));
    int64_t s = 1;
    for (int i = 2; i < x.rank; i++) s *= x.dims[i];
    int in[2] = {GO(c, 0), ad_const_i64(c, x.dims, x.rank)};
    int e = ad_emit(c, SC_OP_EXPAND, in, 2, 1, NULL, NULL);
    set_GI(c, 0, ad_scale(c, e, s > 0 ? 1.0 / (double)s : 1.0));
}

void grad_softmax(sc_grad_ctx *c) {
    ad_grad_kernel(c, SC_OP_SOFTMAX_GRAD, O(c, 0));
}

void grad_log_softmax(sc_grad_ctx *c) {
    ad_grad_kernel(c, SC_OP_LOG_SOFTMAX_GRAD, O(c, 0));
}

/* LayerNormalization (X, Scale[, B]) -> (Y[, Mean, InvStdDev]). The kernel wants Scale dense over
 * the normalised dims, so a broadcast Scale is expanded first; dScale and dBias come back dense and
 * are summed down to each parameter's own shape. */
void grad_layer_norm(sc_grad_ctx *c) {
    if (GO(c, 1) >= 0 || GO(c, 2) >= 0) {
        ad_fail(c, "gradients through the Mean / InvStdDev outputs are not supported");
        return;
    }
    const sc_desc x = *ad_desc(c, I(c, 0));
    int64_t ax = c->fwd.attrs->layer_norm.axis;
    int axis = (int)(ax < 0 ? ax + x.rank : ax);
    sc_desc norm = sc_desc_make(x.dtype, x.rank - axis, x.dims + axis);
    int scale = I(c, 1);
    if (sc_desc_numel(ad_desc(c, scale)) != sc_desc_numel(&norm)) {
        int in[2] = {scale, ad_const_i64(c, norm.dims, norm.rank)};
        scale = ad_emit(c, SC_OP_EXPAND, in, 2, 1, NULL, NULL);
    }
    bool want[3] = {NEED_GI(c, 0), NEED_GI(c, 1), I(c, 2) >= 0 && NEED_GI(c, 2)};
    int n_out = want[2] ? 3 : want[1] ? 2 : 1;
    int in[3] = {GO(c, 0), I(c, 0), scale}, out[3];
    emit_partial(c, SC_OP_LAYER_NORM_GRAD, in, 3, n_out, want, out, c->fwd.attrs);
    if (want[0]) set_GI(c, 0, out[0]);
    for (int k = 1; k < n_out; k++)
        if (want[k]) set_GI(c, k, ad_reduce_to_shape(c, out[k], ad_desc(c, I(c, k))));
}

/* Resize (X, roi, scales, sizes): only X gets a gradient; roi, scales and sizes are constants. */
void grad_resize(sc_grad_ctx *c) {
    int in[5] = {GO(c, 0), I(c, 0), I(c, 1), I(c, 2), I(c, 3)};
    int n_in = c->fwd.n_in + 1;
    set_GI(c, 0, ad_emit(c, SC_OP_RESIZE_GRAD, in, n_in > 5 ? 5 : n_in, 1, NULL, c->fwd.attrs));
}
