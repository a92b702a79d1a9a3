/* Shape functions of the loss: SoftmaxCrossEntropyLoss (ONNX opset 13) and the internal op
 * SoftmaxCrossEntropyLossGrad (graph/ops_train.def, where the input list is). A gradient has the
 * desc of the value it is the gradient of. */
#include "graph/shape_fns.h"

/* scores and labels: [N, C, D1..Dk] and [N, D1..Dk] (i32 / i64). */
static sc_status sce_check(const sc_graph *g, const sc_node *n, const sc_desc *s, const sc_desc *l) {
    if (s->rank < 2 || l->rank != s->rank - 1) return shape_fail(g, n, "scores must be [N, C, D...] and labels [N, D...]");
    if (!sc_dtype_is_float(s->dtype)) return shape_fail(g, n, "scores must be a float tensor");
    if (l->dtype != SC_I64 && l->dtype != SC_I32) return shape_fail(g, n, "labels must be i32 or i64");
    if (l->dims[0] != s->dims[0]) return shape_fail(g, n, "labels batch differs from scores");
    for (int i = 2; i < s->rank; i++)
        if (l->dims[i - 1] != s->dims[i]) return shape_fail(g, n, "labels dim %d differs from scores dim %d", i - 1, i);
    return SC_OK;
}

/* The type the loss computes in, which its loss, dLoss and weights have: f32 for 16-bit scores (the
 * kernels widen them, as PyTorch's autocast runs the loss in f32), else the scores' type. */
static sc_dtype sce_compute_type(sc_dtype scores) {
    return sc_dtype_is_half(scores) ? SC_F32 : scores;
}

/* (scores, labels[, weights [C]]) -> (loss [N, D1..Dk] with reduction none, else a scalar;
 * log_prob like scores). */
sc_status shape_sce_loss(sc_graph *g, sc_node *n) {
    const sc_desc *s = shape_in(g, n, 0), *l = shape_in(g, n, 1);
    SC_TRY(sce_check(g, n, s, l));
    sc_dtype ct = sce_compute_type(s->dtype);
    if (node_has_input(n, 2)) {
        const sc_desc *w = shape_in(g, n, 2);
        if (w->rank != 1 || w->dims[0] != s->dims[1] || w->dtype != ct)
            return shape_fail(g, n, "weights must be [C] of %s", sc_dtype_name(ct));
    }
    sc_desc loss = *l;
    loss.dtype = ct;
    if (n->attrs->sce.reduction != SC_REDUCTION_NONE) loss.rank = 0;
    shape_set_out(g, n, 0, &loss);
    shape_set_out(g, n, 1, s);
    return SC_OK;
}

/* (dLoss, scores, labels[, weights]) -> dScores like scores. dLoss is a scalar for mean/sum and
 * shaped like labels for reduction none, of the loss's type. */
sc_status shape_sce_loss_grad(sc_graph *g, sc_node *n) {
    const sc_desc *dl = shape_in(g, n, 0), *s = shape_in(g, n, 1), *l = shape_in(g, n, 2);
    SC_TRY(sce_check(g, n, s, l));
    int64_t want = n->attrs->sce.reduction == SC_REDUCTION_NONE ? sc_desc_numel(l) : 1;
    if (sc_desc_numel(dl) != want || dl->dtype != sce_compute_type(s->dtype))
        return shape_fail(g, n, "dLoss must have %lld elements of %s", (long long)want,
                          sc_dtype_name(sce_compute_type(s->dtype)));
    return shape_out(g, n, s);
}

