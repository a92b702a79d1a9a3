/* Shape functions of the loss and optimizer ops: SoftmaxCrossEntropyLoss (ONNX opset 13) and the
 * internal ops SoftmaxCrossEntropyLossGrad, SGDUpdate, AdamWUpdate (graph/ops_train.def, where the
 * input lists are). A gradient has the desc of the value it is the gradient of; optimizer updates
 * return their state with unchanged descs (they work in place). */
#include "graph/shape_fns.h"

static const sc_desc *in_desc(const sc_graph *g, const sc_node *n, int i) { return &g->values[n->in[i]].desc; }

static sc_status same_shape(const sc_graph *g, const sc_node *n, int a, int b) {
    if (!sc_desc_same_shape(in_desc(g, n, a), in_desc(g, n, b)) || in_desc(g, n, a)->dtype != in_desc(g, n, b)->dtype)
        return shape_fail(g, n, "inputs %d and %d must have the same dtype and shape", a, b);
    return SC_OK;
}

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

/* (scores, labels[, weights [C]]) -> (loss [N, D1..Dk] with reduction none, else a scalar;
 * log_prob like scores). */
sc_status shape_sce_loss(sc_graph *g, sc_node *n) {
    const sc_desc *s = in_desc(g, n, 0), *l = in_desc(g, n, 1);
    SC_TRY(sce_check(g, n, s, l));
    if (node_has_input(n, 2)) {
        const sc_desc *w = in_desc(g, n, 2);
        if (w->rank != 1 || w->dims[0] != s->dims[1] || w->dtype != s->dtype)
            return shape_fail(g, n, "weights must be [C] with the scores' dtype");
    }
    sc_desc loss = *l;
    loss.dtype = s->dtype;
    if (n->attrs->sce.reduction != SC_REDUCTION_NONE) loss.rank = 0;
    shape_set_out(g, n, 0, &loss);
    shape_set_out(g, n, 1, s);
    return SC_OK;
}

/* (dLoss, log_prob, labels[, weights]) -> dScores like log_prob. dLoss is a scalar for mean/sum and
 * shaped like labels for reduction none. */
sc_status shape_sce_loss_grad(sc_graph *g, sc_node *n) {
    const sc_desc *dl = in_desc(g, n, 0), *lp = in_desc(g, n, 1), *l = in_desc(g, n, 2);
    SC_TRY(sce_check(g, n, lp, l));
    int64_t want = n->attrs->sce.reduction == SC_REDUCTION_NONE ? sc_desc_numel(l) : 1;
    if (sc_desc_numel(dl) != want || dl->dtype != lp->dtype)
        return shape_fail(g, n, "dLoss must have %lld elements of log_prob's dtype", (long long)want);
    shape_set_out(g, n, 0, lp);
    return SC_OK;
}

static sc_status scalar_input(const sc_graph *g, const sc_node *n, int i, sc_dtype t, const char *what) {
    if (!node_has_input(n, i)) return SC_OK;
    const sc_desc *d = in_desc(g, n, i);
    if (d->dtype != t || sc_desc_numel(d) != 1)
        return shape_fail(g, n, "%s (input %d) must be a %s scalar", what, i, sc_dtype_name(t));
    return SC_OK;
}

/* SGDUpdate (W, G, M, lr[, grad_scale]) -> (W', M'); AdamWUpdate (W, G, M, V, lr, step[, gs]) ->
 * (W', M', V'). States keep their descs; G must match W. SGD without momentum omits M and M'. */
sc_status shape_optimizer(sc_graph *g, sc_node *n) {
    bool adamw = n->op == SC_OP_ADAMW_UPDATE;
    SC_TRY(same_shape(g, n, 0, 1));
    if (!sc_dtype_is_float(in_desc(g, n, 0)->dtype)) return shape_fail(g, n, "W must be a float tensor");
    for (int k = 0; k < n->n_out; k++) {
        int src = k == 0 ? 0 : k + 1; /* W, then M (input 2), V (input 3) */
        if (!node_has_input(n, src)) {
            if (adamw || k == 0) return shape_fail(g, n, "input %d is required", src);
            continue;
        }
        if (src > 0) SC_TRY(same_shape(g, n, 0, src));
        shape_set_out(g, n, k, in_desc(g, n, src));
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
