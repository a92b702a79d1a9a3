/* Optimizer updates as graph nodes (autodiff/autodiff.h): one SGDUpdate or AdamWUpdate per
 * trainable parameter, its state values and the scalar inputs "lr" (f32) and "step" (i64, 1-based),
 * fed by the trainer each step (schedules live on the host).
 *
 * State: SGD keeps "<param>.momentum_buffer" (none when momentum is 0), AdamW "<param>.exp_avg" and
 * "<param>.exp_avg_sq" (torch's names), SC_VALUE_OPT_STATE with zeroed data in the graph arena (one
 * allocation for all of them, states_pool);
 * the update nodes overwrite W and the state in place (sc_op_inplace_input).
 *
 * Placement: each update goes right after the later of (a) the node producing the final gradient
 * and (b) the last node reading W, because a backward node may still read W after its gradient is
 * final (Gemm's dX = dY W is emitted beside dW) and the update overwrites W. This frees each
 * gradient as early as possible. With clipping every update needs the global norm, so they all go
 * after the last gradient (at the end). Data parallel: after the next bucket's collective too
 * (tg->update_after), so that the collective of a parameter's bucket overlaps that much backward.
 *
 * Clipping (opt->clip_norm > 0), torch.nn.utils.clip_grad_norm_:
 *   total_norm = sqrt(sum_p sum(g_p^2)),  grad_scale = min(1, clip / (total_norm + 1e-6)),
 * computed in f32 by graph nodes and passed to every update as its grad_scale input.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/train_internal.h"

/* A state's bytes in the pool: rounded up to 64, so every state is aligned like an arena block. */
static size_t state_bytes(const sc_desc *d) { return ((size_t)sc_desc_bytes(d) + 63) / 64 * 64; }

/* One zeroed allocation for every state: a big one is never faulted in while only planning (the
 * arena takes it from calloc; core/arena.c). */
static sc_status states_pool(sc_graph *g, const sc_train_options *opt, const sc_training_graph *tg,
                             unsigned char **pool) {
    int per = opt->optim == SC_OPTIM_ADAMW ? 2 : opt->momentum != 0 ? 1 : 0;
    size_t total = 0;
    for (int i = 0; i < tg->n_params && per; i++) {
        const sc_value *w = &g->values[tg->params[i]];
        if (sc_desc_bytes(&w->desc) < 0) return sc_errorf("parameter '%s' has no static size for its optimizer state", w->name);
        total += per * state_bytes(&w->desc);
    }
    *pool = total ? sc_arena_alloc(&g->arena, total) : NULL;
    if (total && !*pool) return sc_errorf("out of memory allocating %zu bytes of optimizer state", total);
    return SC_OK;
}

/* pool: the next zeroed block of the states' common allocation (states_pool). */
static int state_new(tb_builder *b, sc_training_graph *tg, int param, const char *suffix, unsigned char **pool) {
    if (b->st) return -1;
    sc_graph *g = b->g;
    char name[512];
    snprintf(name, sizeof name, "%s.%s", g->values[param].name, suffix);
    sc_status st = SC_OK;
    sc_desc d = g->values[param].desc; /* a copy: adding a value may move g->values */
    int v = graph_add_value_unique(g, name, SC_VALUE_OPT_STATE, &d, &st);
    if (v < 0) {
        b->st = st;
        return -1;
    }
    g->values[v].data = *pool; /* zero: torch's buffers start at 0 */
    *pool += state_bytes(&d);
    tg->states[tg->n_states++] = v;
    return v;
}

/* Sharded optimizer: each rank holds its own buckets' gradients, so its sum of squares is a part of
 * the total: their mean over the ranks (an AllReduce, which every rank runs, an owner of nothing with
 * a zero) times the number of ranks. The sum is then taken in another order than one rank's would
 * (per owner, then over the ranks), so clipped weights agree with unsharded ones to float32
 * rounding, not bit for bit. */
static int clip_total_over_ranks(tb_builder *b, const sc_train_options *opt, int total) {
    if (total < 0) total = tb_const_scalar(b, "clip.sumsq_none", SC_F32, 0);
    sc_attrs a = {0};
    a.all_reduce = (sc_all_reduce_attrs){opt->ranks, SC_CLIP_BUCKET, 0};
    int mean = tb_emit(b, SC_OP_ALL_REDUCE, "clip.allreduce", (const int[]){total}, 1, 1, NULL, &a, SC_VALUE_ACT);
    int n = tb_const_scalar(b, "clip.ranks", SC_F32, opt->ranks);
    return tb_emit(b, SC_OP_MUL, "clip.total_all_ranks", (const int[]){mean, n}, 2, 1, NULL, NULL, SC_VALUE_ACT);
}

/* Sum of squares of every gradient, as an f32 scalar; then the clip factor. With loss scaling the
 * norm is that of the unscaled gradients (g * inv_loss_scale, as GradScaler.unscale_ before
 * clip_grad_norm_), and the factor the updates apply is clip factor * inv_loss_scale: a power of two
 * times the factor, so g * (coef * inv) equals (g * inv) * coef bit for bit. */
static int clip_scale_build(tb_builder *b, const sc_train_options *opt, const sc_training_graph *tg) {
    sc_attrs red = {0};
    red.reduce.keepdims = false;
    int total = -1;
    for (int i = 0; i < tg->n_params && !b->st; i++) {
        int gv = tg->grads[i];
        if (tg->inv_loss_scale >= 0)
            gv = tb_emit(b, SC_OP_MUL, "clip.unscaled", (const int[]){gv, tg->inv_loss_scale}, 2, 1, NULL, NULL,
                         SC_VALUE_ACT);
        int sq = tb_emit(b, SC_OP_MUL, "clip.sq", (const int[]){gv, gv}, 2, 1, NULL, NULL, SC_VALUE_ACT);
        int s = tb_emit(b, SC_OP_REDUCE_SUM, "clip.sumsq", (const int[]){sq}, 1, 1, NULL, &red, SC_VALUE_ACT);
        if (s >= 0 && b->g->values[s].desc.dtype != SC_F32) {
            sc_attrs ca = {0};
            ca.cast.to = SC_F32;
            s = tb_emit(b, SC_OP_CAST, "clip.sumsq_f32", (const int[]){s}, 1, 1, NULL, &ca, SC_VALUE_ACT);
        }
        total = total < 0 ? s : tb_emit(b, SC_OP_ADD, "clip.total", (const int[]){total, s}, 2, 1, NULL, NULL, SC_VALUE_ACT);
    }
    if (opt->shard_optimizer && opt->ranks > 1) total = clip_total_over_ranks(b, opt, total);
    int norm = tb_emit(b, SC_OP_SQRT, "clip.norm", (const int[]){total}, 1, 1, NULL, NULL, SC_VALUE_ACT);
    int eps = tb_const_scalar(b, "clip.eps", SC_F32, 1e-6);
    int denom = tb_emit(b, SC_OP_ADD, "clip.denom", (const int[]){norm, eps}, 2, 1, NULL, NULL, SC_VALUE_ACT);
    int maxn = tb_const_scalar(b, "clip.max_norm", SC_F32, opt->clip_norm);
    int coef = tb_emit(b, SC_OP_DIV, "clip.coef", (const int[]){maxn, denom}, 2, 1, NULL, NULL, SC_VALUE_ACT);
    int one = tb_const_scalar(b, "clip.one", SC_F32, 1.0);
    int scale = tb_emit(b, SC_OP_MIN, "clip.scale", (const int[]){coef, one}, 2, 1, NULL, NULL, SC_VALUE_ACT);
    if (tg->inv_loss_scale < 0) return scale;
    return tb_emit(b, SC_OP_MUL, "clip.scale_unscaled", (const int[]){scale, tg->inv_loss_scale}, 2, 1, NULL, NULL,
                   SC_VALUE_ACT);
}

static int update_emit(tb_builder *b, const sc_train_options *opt, sc_training_graph *tg, int i, int scale,
                       unsigned char **pool) {
    sc_graph *g = b->g;
    int w = tg->params[i], gr = tg->grads[i];
    char name[512];
    snprintf(name, sizeof name, "%s.update", g->values[w].name);
    sc_attrs a = {0};
    if (opt->optim == SC_OPTIM_ADAMW) {
        a.adamw = (sc_adamw_attrs){opt->beta1, opt->beta2, opt->eps, opt->weight_decay};
        int m = state_new(b, tg, w, "exp_avg", pool), v = state_new(b, tg, w, "exp_avg_sq", pool);
        int in[7] = {w, gr, m, v, tg->lr, tg->step, scale};
        return tb_emit(b, SC_OP_ADAMW_UPDATE, name, in, 7, 3, NULL, &a, SC_VALUE_ACT);
    }
    a.sgd = (sc_sgd_attrs){opt->momentum, opt->weight_decay, opt->nesterov};
    int m = opt->momentum != 0 ? state_new(b, tg, w, "momentum_buffer", pool) : -1;
    int in[5] = {w, gr, m, tg->lr, scale};
    int outs[2] = {0, m < 0 ? TB_OMIT : 0}; /* without momentum there is no buffer, so no M' */
    return tb_emit(b, SC_OP_SGD_UPDATE, name, in, 5, 2, outs, &a, SC_VALUE_ACT);
}

/* Mixed precision: a gradient that is Cast(16-bit dW) -> f32 and read by nothing yet (no clipping,
 * no collective, not kept as an output) goes to its update in 16 bits, and the Cast is removed. The
 * update widens each element as it reads it, which is exact, so the weights are the same bits; the
 * f32 copy, twice the 16-bit gradient's bytes beside it, is never made. That copy sat at the
 * activation peak of a convnet's backward (ResNet-50's 2.4M-parameter 3x3 convolutions), and on a
 * streamed parameter the gradient then leaves the device in its own 16 bits. */
static sc_status grads_narrow(sc_graph *g, sc_training_graph *tg) {
    SC_TRY(graph_link(g)); /* producers and readers of the nodes data parallel and clipping added */
    bool *keep = malloc((size_t)g->n_nodes + 1);
    if (!keep) return sc_errorf("out of memory narrowing gradients");
    for (int i = 0; i < g->n_nodes; i++) keep[i] = true;
    bool any = false;
    for (int i = 0; i < tg->n_params; i++) {
        int gr = tg->grads[i], p = g->values[gr].producer;
        if (p < 0 || g->values[gr].n_consumers || g->values[gr].is_output || g->values[gr].desc.dtype != SC_F32)
            continue;
        const sc_node *n = &g->nodes[p];
        if (n->op != SC_OP_CAST || n->in[0] < 0) continue;
        sc_dtype from = g->values[n->in[0]].desc.dtype;
        if (from != SC_BF16 && from != SC_F16) continue;
        tg->grads[i] = n->in[0];
        keep[p] = false;
        any = true;
    }
    sc_status st = any ? graph_compact_nodes(g, keep) : SC_OK;
    free(keep);
    return st;
}

/* For update k (parameter i): the index of the last node that must run before it. */
static void updates_positions(const sc_graph *g, const sc_training_graph *tg, int first, int *pos) {
    for (int i = 0; i < tg->n_params; i++) {
        int p = g->values[tg->grads[i]].producer;
        const sc_value *w = &g->values[tg->params[i]];
        for (int c = 0; c < w->n_consumers; c++)
            if (w->consumers[c] < first && w->consumers[c] > p) p = w->consumers[c];
        if (tg->update_after && tg->update_after[i] > p) p = tg->update_after[i];
        pos[i] = p;
    }
}

sc_status optimizer_build(sc_graph *g, const sc_train_options *opt, sc_training_graph *tg) {
    tb_builder b = {g, SC_OK};
    tg->lr = tb_input(&b, "lr", &(sc_desc){.dtype = SC_F32, .rank = 0});
    tg->step = tb_input(&b, "step", &(sc_desc){.dtype = SC_I64, .rank = 0});
    if (opt->loss_scaling) tg->inv_loss_scale = tb_input(&b, "inv_loss_scale", &(sc_desc){.dtype = SC_F32, .rank = 0});
    tg->states = sc_arena_alloc_array(&g->arena, (size_t)(2 * tg->n_params + 1), sizeof(int));
    if (!tg->states) return sc_errorf("out of memory listing optimizer state");
    tg->n_states = 0;
    bool sharded = opt->shard_optimizer && opt->ranks > 1;
    bool clip = opt->clip_norm > 0 && (tg->n_params > 0 || sharded); /* sharded: every rank's part of the norm */
    int scale = clip ? clip_scale_build(&b, opt, tg) : tg->inv_loss_scale;
    SC_TRY(b.st);
    /* The caller's graph is linked (autodiff_build_backward ends with graph_link) and lr/step are
     * new values without consumers; only clipping added nodes. */
    if (clip) SC_TRY(graph_link(g));
    SC_TRY(grads_narrow(g, tg));
    unsigned char *pool;
    SC_TRY(states_pool(g, opt, tg, &pool));
    int first = g->n_nodes;
    int *pos = malloc(sizeof(int) * (size_t)(tg->n_params + 1));
    if (!pos) return sc_errorf("out of memory placing optimizer updates");
    /* Positions come from the graph before the updates exist; with clipping they all stay at the end. */
    updates_positions(g, tg, first, pos);
    for (int i = 0; i < tg->n_params; i++) {
        update_emit(&b, opt, tg, i, scale, &pool);
        if (clip) pos[i] = first - 1;
    }
    sc_status st = b.st ? b.st : tb_place_new_nodes(g, first, pos);
    free(pos);
    return st;
}
