/* Loss heads appended to the model output (autodiff/autodiff.h), each ending in a scalar loss that
 * becomes a graph output, with the targets as a new graph input named "labels":
 *   classes    logits [N, C]        labels i64 [N]        SoftmaxCrossEntropyLoss, mean
 *   per-pixel  logits [N, C, H, W]  labels i64 [N, H, W]  SoftmaxCrossEntropyLoss, mean over the
 *                                                         pixels whose label is not ignore_index
 *   LM         logits [B, T, V]     labels i64 [B, T]     logits reshaped to [B*T, V] and labels to
 *                                                         [B*T] (class dim second, no Transpose);
 *                                                         labels[b, t] is the token after t
 *   MSE        output of any shape  target of that desc   ReduceMean((y - t)^2) over everything
 * Every cross-entropy ignores labels equal to opt->ignore_index (-100 by default), as
 * torch.nn.CrossEntropyLoss does; the head asks SoftmaxCrossEntropyLoss for the loss alone (its
 * gradient reads the scores, autodiff/grad_loss.c).
 * In mixed precision graph_apply_precision ends the model in a Cast of its 16-bit logits to f32 (a
 * graph output keeps its type). A cross-entropy reads the 16-bit logits instead and the Cast goes:
 * the loss kernels widen each row exactly, as the Cast did, so loss and gradient keep their bits,
 * the f32 copy is never made, and backward keeps the 16-bit logits (GPT-2 small at batch 8, seq
 * 1024: 0.82 GB where the f32 logits and log_prob took 1.65 GB each).
 * SC_LOSS_AUTO picks from the output: rank 2 float -> classes; rank 4 when some graph input is an
 * image with the same H, W -> per-pixel; rank 3 -> LM; anything else -> MSE.
 */
#include <stdio.h>

#include "autodiff/train_internal.h"

typedef enum { HEAD_CLASSES, HEAD_PIXELS, HEAD_LM, HEAD_MSE } head_kind;

static const char *head_name(head_kind h) {
    static const char *const names[] = {"cross-entropy over classes", "per-pixel cross-entropy",
                                        "language-model cross-entropy", "mean squared error"};
    return names[h];
}

/* Some graph input of rank 4 has the output's H and W (segmentation: logits at image resolution). */
static bool has_image_input_like(const sc_graph *g, const sc_desc *out) {
    for (int i = 0; i < g->n_inputs; i++) {
        const sc_desc *d = &g->values[g->inputs[i]].desc;
        if (d->rank == 4 && d->dims[2] == out->dims[2] && d->dims[3] == out->dims[3]) return true;
    }
    return false;
}

static sc_status head_choose(const sc_graph *g, const sc_train_options *opt, int output, head_kind *h) {
    const sc_desc *d = &g->values[output].desc;
    const char *name = g->values[output].name;
    switch (opt->loss) {
    case SC_LOSS_MSE: *h = HEAD_MSE; return SC_OK;
    case SC_LOSS_CROSS_ENTROPY:
        if (d->rank == 2) *h = HEAD_CLASSES;
        else if (d->rank == 3) *h = HEAD_LM;
        else if (d->rank >= 4) *h = HEAD_PIXELS;
        else {
            char s[128];
            return sc_errorf("cross-entropy needs logits [N, C], [B, T, V] or [N, C, H, W]; model output '%s' is %s", name,
                             sc_desc_str(d, s, sizeof s));
        }
        return SC_OK;
    case SC_LOSS_AUTO:
        if (d->rank == 2) *h = HEAD_CLASSES;
        else if (d->rank == 4 && has_image_input_like(g, d)) *h = HEAD_PIXELS;
        else if (d->rank == 3) *h = HEAD_LM;
        else *h = HEAD_MSE;
        return SC_OK;
    }
    return sc_errorf("unknown loss kind %d", (int)opt->loss);
}

static int reshape_to(tb_builder *b, const char *name, int x, int rank, const int64_t *dims) {
    int64_t shape[SC_MAX_RANK];
    for (int i = 0; i < rank; i++) shape[i] = dims[i];
    sc_desc sd = sc_desc_make(SC_I64, 1, (const int64_t[]){rank});
    char cname[256];
    snprintf(cname, sizeof cname, "%s.shape", name);
    int s = tb_const(b, cname, &sd, shape);
    return tb_emit(b, SC_OP_RESHAPE, name, (const int[]){x, s}, 2, 1, NULL, NULL, SC_VALUE_ACT);
}

/* SoftmaxCrossEntropyLoss(scores, labels) with mean reduction and ignore_index. */
static int sce_head(tb_builder *b, const sc_train_options *opt, int scores, int labels) {
    sc_attrs a = {0};
    a.sce.reduction = SC_REDUCTION_MEAN;
    a.sce.has_ignore_index = true;
    a.sce.ignore_index = opt->ignore_index;
    return tb_emit(b, SC_OP_SOFTMAX_CROSS_ENTROPY_LOSS, "loss", (const int[]){scores, labels}, 2, 1, NULL, &a,
                   SC_VALUE_ACT);
}

static int ce_head(tb_builder *b, const sc_train_options *opt, head_kind h, int output, int *labels) {
    const sc_desc dv = b->g->values[output].desc, *d = &dv; /* a copy: adding a value may move g->values */
    int64_t ldims[SC_MAX_RANK];
    int lrank = 0;
    ldims[lrank++] = d->dims[0];
    if (h == HEAD_LM) ldims[lrank++] = d->dims[1];
    else
        for (int i = 2; i < d->rank; i++) ldims[lrank++] = d->dims[i];
    sc_desc ld = sc_desc_make(SC_I64, lrank, ldims);
    *labels = tb_input(b, "labels", &ld);
    if (h != HEAD_LM) return sce_head(b, opt, output, *labels);
    int64_t BT = d->dims[0] * d->dims[1], V = d->dims[2];
    int scores = reshape_to(b, "loss.logits_2d", output, 2, (const int64_t[]){BT, V});
    int flat = reshape_to(b, "loss.labels_1d", *labels, 1, (const int64_t[]){BT});
    return sce_head(b, opt, scores, flat);
}

/* torch.nn.MSELoss(): mean over all elements of (y - t)^2. */
static int mse_head(tb_builder *b, int output, int *labels) {
    sc_desc d = b->g->values[output].desc; /* a copy: adding a value may move g->values */
    *labels = tb_input(b, "labels", &d);
    int diff = tb_emit(b, SC_OP_SUB, "loss.diff", (const int[]){output, *labels}, 2, 1, NULL, NULL, SC_VALUE_ACT);
    int sq = tb_emit(b, SC_OP_MUL, "loss.sq", (const int[]){diff, diff}, 2, 1, NULL, NULL, SC_VALUE_ACT);
    sc_attrs a = {0};
    a.reduce.keepdims = false;
    return tb_emit(b, SC_OP_REDUCE_MEAN, "loss", (const int[]){sq}, 1, 1, NULL, &a, SC_VALUE_ACT);
}

/* The 16-bit logits in place of the model output *output when that is an f32 Cast of them that
 * nothing reads (see the header): the Cast is removed and the graph output list names them. */
static sc_status output_narrow(sc_graph *g, int *output) {
    SC_TRY(graph_link(g));
    int o = *output, p = g->values[o].producer;
    if (p < 0 || g->nodes[p].op != SC_OP_CAST || g->values[o].n_consumers) return SC_OK;
    int src = g->nodes[p].in[0];
    sc_dtype t = g->values[src].desc.dtype;
    if ((t != SC_BF16 && t != SC_F16) || g->values[o].desc.dtype != SC_F32) return SC_OK;
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == o) g->outputs[i] = src;
    g->values[o].is_output = false;
    g->values[src].is_output = true;
    *output = src;
    return graph_remove_node(g, p);
}

sc_status loss_head_build(sc_graph *g, const sc_train_options *opt, int *output, int *loss, int *labels) {
    head_kind h = HEAD_MSE;
    SC_TRY(head_choose(g, opt, *output, &h));
    if (h != HEAD_MSE) SC_TRY(output_narrow(g, output));
    tb_builder b = {g, SC_OK};
    *loss = h == HEAD_MSE ? mse_head(&b, *output, labels) : ce_head(&b, opt, h, *output, labels);
    tb_output(&b, *loss);
    if (b.st) return sc_status_prefix(b.st, "loss head (%s) on output '%s': ", head_name(h), g->values[*output].name);
    sc_log(SC_LOG_INFO, "loss: %s on output '%s'", head_name(h), g->values[*output].name);
    return SC_OK;
}
