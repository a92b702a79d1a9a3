/* Gradient rule of SoftmaxCrossEntropyLoss (ONNX opset 13): (scores, labels[, weights]) ->
 * (loss, log_prob).
 *   dScores = SoftmaxCrossEntropyLossGrad(dLoss, scores, labels[, weights])
 *           = (softmax - onehot(labels)) * w[label] * dLoss / (sum of w over non-ignored labels for
 *             mean), zero for ignored labels (backends/cpu/cpu_loss.c has the full formula)
 *   plus, when log_prob itself is used downstream, LogSoftmaxGrad(dLogProb, log_prob) over axis 1.
 * The rule reads the scores and the kernel recomputes the softmax (one more max and sum per row), so
 * backward keeps the scores rather than log_prob, an extra tensor as large, and in mixed precision the
 * scores are the 16-bit logits (autodiff/loss.c): GPT-2 small at b8 T1024 keeps 0.82 GB instead of
 * 1.65 GB. Labels are integers and get no gradient; a gradient for the class weights is not supported
 * (they are constants in every loss we build).
 */
#include "autodiff/grad_rules.h"

void grad_sce_loss(sc_grad_ctx *c) {
    if (NEED_GI(c, 2)) {
        ad_fail(c, "a gradient with respect to the class weights (input 2) is not supported");
        return;
    }
    if (!NEED_GI(c, 0)) return;
    int dscores = -1;
    if (GO(c, 0) >= 0) {
        sc_attrs a = {0};
        a.sce = c->fwd.attrs->sce;
        bool weighted = node_has_input(&c->fwd, 2);
        int in[4] = {GO(c, 0), I(c, 0), I(c, 1), weighted ? I(c, 2) : -1};
        dscores = ad_emit(c, SC_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD, in, weighted ? 4 : 3, 1, NULL, &a);
    }
    if (GO(c, 1) >= 0) {
        sc_attrs a = {0};
        a.axis.axis = 1; /* log-softmax over the class dim */
        int d = ad_emit(c, SC_OP_LOG_SOFTMAX_GRAD, (const int[]){GO(c, 1), O(c, 1)}, 2, 1, NULL, &a);
        dscores = dscores < 0 ? d : ad_binary(c, SC_OP_ADD, dscores, d);
    }
    if (dscores >= 0) set_GI(c, 0, dscores);
}
