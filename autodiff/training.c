/* autodiff_build_training (autodiff/autodiff.h): forward graph -> training graph, in place.
 *
 * Order of the work, each step on the graph the previous one left:
 *   1. BatchNormalization nodes switch to training mode; their running_mean / running_var outputs
 *      (created when absent) become graph outputs and writebacks into the mean / var initializers.
 *   2. Dropout nodes get a true training_mode constant (input 2) and their mask output; the mask's
 *      seed is set per step by the trainer (the backend's set_seed with the configured seed).
 *   3. Trainable parameters: PARAM values of a float dtype that some node reads, minus the
 *      BatchNormalization statistics and the names matching opt->freeze_regex (POSIX extended);
 *      large ones read by whole rows train as row blocks (param_blocks.c).
 *   4. The loss head (loss.c), then autodiff_build_backward for the trainable parameters.
 *   5. Optimizer updates (optimizer.c); keep_grads makes every gradient a graph output.
 * Parameters the loss does not depend on get no gradient and no update (listed at debug level).
 * The node builder the steps share is in training_builder.c.
 */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/train_internal.h"
#include "core/units.h"
#include "graph/shape.h"

int64_t sc_param_block_parse(const char *s) {
    if (!strcmp(s, "off")) return -1;
    int64_t n = sc_parse_size(s);
    return n > 0 ? n : 0;
}

void sc_train_options_default(sc_train_options *o) {
    memset(o, 0, sizeof *o);
    o->loss = SC_LOSS_AUTO;
    o->ignore_index = -100;
    o->optim = SC_OPTIM_SGD;
    o->momentum = 0.0f;
    o->nesterov = false;
    o->weight_decay = 0.0f;
    o->beta1 = 0.9f;
    o->beta2 = 0.999f;
    o->eps = 1e-8f;
    o->clip_norm = 0.0f;
    o->freeze_regex = NULL;
    o->keep_grads = false;
    o->dropout_seed = 0;
}

/* ---- step 1: BatchNormalization in training mode ---- */

typedef struct {
    int n, cap;
    int *src, *dst;
} wb_list;

static void wb_add(tb_builder *b, wb_list *w, int src, int dst) {
    if (b->st) return;
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 16;
        int *s = sc_arena_alloc_array(&b->g->arena, (size_t)cap, sizeof(int));
        int *d = sc_arena_alloc_array(&b->g->arena, (size_t)cap, sizeof(int));
        if (!s || !d) {
            tb_fail(b, sc_errorf("out of memory listing writebacks"));
            return;
        }
        if (w->n) {
            memcpy(s, w->src, sizeof(int) * (size_t)w->n);
            memcpy(d, w->dst, sizeof(int) * (size_t)w->n);
        }
        w->src = s;
        w->dst = d;
        w->cap = cap;
    }
    w->src[w->n] = src;
    w->dst[w->n] = dst;
    w->n++;
}

/* ONNX BatchNormalization-15 training mode: outputs (Y, running_mean, running_var). The running
 * statistics are written back into the input_mean / input_var initializers after each step. */
static void bn_to_training(tb_builder *b, int node, wb_list *wb) {
    sc_graph *g = b->g;
    sc_node *n = &g->nodes[node];
    sc_attrs a = *n->attrs;
    a.batch_norm.training_mode = true;
    sc_status st = graph_node_set_attrs(g, n, &a);
    if (st) {
        tb_fail(b, st);
        return;
    }
    int outs[3] = {n->out[0], n->n_out > 1 ? n->out[1] : -1, n->n_out > 2 ? n->out[2] : -1};
    static const char *const suffix[3] = {"", "running_mean", "running_var"};
    for (int k = 1; k < 3; k++) {
        int stat = g->nodes[node].in[k + 2];
        sc_value_kind kind = g->values[stat].kind;
        if ((kind != SC_VALUE_PARAM && kind != SC_VALUE_CONST) || !g->values[stat].data) {
            tb_fail(b, sc_errorf("node '%s' (BatchNormalization): input %d ('%s') must be an initializer to hold the "
                                 "running statistics in training mode",
                                 g->nodes[node].name, k + 2, g->values[stat].name));
            return;
        }
        if (outs[k] < 0) {
            char name[512];
            snprintf(name, sizeof name, "%s.%s", g->nodes[node].name, suffix[k]);
            sc_status st = SC_OK;
            sc_desc d = g->values[stat].desc; /* a copy: adding a value may move g->values */
            outs[k] = graph_add_value_unique(g, name, SC_VALUE_ACT, &d, &st);
            if (outs[k] < 0) {
                tb_fail(b, st);
                return;
            }
        }
        wb_add(b, wb, outs[k], stat);
        tb_output(b, outs[k]);
    }
    tb_node_set_outputs(b, node, outs, 3);
    if (!b->st) {
        sc_status st = sc_shape_fns[SC_OP_BATCH_NORM](g, &g->nodes[node]);
        if (st) tb_fail(b, st);
    }
}

/* ---- step 2: Dropout in training mode ---- */

/* Dropout-13 (data, ratio, training_mode) -> (output, mask): training_mode becomes a true constant
 * and the mask output (which the gradient reads) is created when absent. The mask itself is the
 * CPU kernel's: a counter-based hash of (seed, step, node name, element) whose seed and step the
 * trainer sets each step (backends/cpu/cpu_rng.h, from opt->dropout_seed), so nothing random is
 * stored in the graph. */
static void dropout_to_training(tb_builder *b, int node) {
    sc_graph *g = b->g;
    char name[512];
    snprintf(name, sizeof name, "%s.training_mode", g->nodes[node].name);
    int on = tb_const_scalar(b, name, SC_BOOL, 1);
    if (on < 0) return;
    sc_node *n = &g->nodes[node];
    int ins[3] = {n->in[0], n->n_in > 1 ? n->in[1] : -1, on};
    int outs[2] = {n->out[0], n->n_out > 1 ? n->out[1] : -1};
    if (outs[1] < 0) {
        snprintf(name, sizeof name, "%s.mask", n->name);
        sc_desc d = g->values[n->out[0]].desc;
        d.dtype = SC_BOOL;
        sc_status st = SC_OK;
        outs[1] = graph_add_value_unique(g, name, SC_VALUE_ACT, &d, &st);
        if (outs[1] < 0) {
            tb_fail(b, st);
            return;
        }
    }
    tb_node_set_inputs(b, node, ins, 3);
    tb_node_set_outputs(b, node, outs, 2);
    if (!b->st) {
        sc_status st = sc_shape_fns[SC_OP_DROPOUT](g, &g->nodes[node]);
        if (st) tb_fail(b, st);
    }
}

/* ---- step 3: trainable parameters ---- */

/* Fills tg->params; `not_trainable` marks values excluded before (BN statistics). */
static sc_status params_collect(sc_graph *g, const sc_train_options *opt, const bool *not_trainable,
                                sc_training_graph *tg) {
    regex_t re;
    bool use_re = opt->freeze_regex && opt->freeze_regex[0];
    if (use_re) {
        int rc = regcomp(&re, opt->freeze_regex, REG_EXTENDED | REG_NOSUB);
        if (rc) {
            char msg[256];
            regerror(rc, &re, msg, sizeof msg);
            return sc_errorf("--freeze regex '%s' is invalid: %s", opt->freeze_regex, msg);
        }
    }
    SC_TRY(graph_link(g));
    tg->params = sc_arena_alloc_array(&g->arena, (size_t)g->n_values + 1, sizeof(int));
    if (!tg->params) {
        if (use_re) regfree(&re);
        return sc_errorf("out of memory listing parameters");
    }
    tg->n_params = 0;
    for (int v = 0; v < g->n_values; v++) {
        const sc_value *val = &g->values[v];
        if (val->kind != SC_VALUE_PARAM || !sc_dtype_is_float(val->desc.dtype) || !val->n_consumers || not_trainable[v])
            continue;
        if (use_re && regexec(&re, val->name, 0, NULL, 0) == 0) continue;
        if (val->desc.dtype == SC_BF16 || val->desc.dtype == SC_F16) { /* not frozen (params_check_16bit) */
            if (use_re) regfree(&re);
            return sc_errorf("parameter '%s' is stored in %s and not frozen by --freeze: training updates f32 master "
                             "weights", val->name, sc_dtype_name(val->desc.dtype));
        }
        tg->params[tg->n_params++] = v;
    }
    if (use_re) regfree(&re);
    return SC_OK;
}

/* The model output the loss reads: the first float graph output. */
static sc_status model_output(const sc_graph *g, int *out) {
    for (int i = 0; i < g->n_outputs; i++) {
        const sc_value *v = &g->values[g->outputs[i]];
        if (sc_dtype_is_float(v->desc.dtype)) {
            if (!sc_desc_is_static(&v->desc)) return sc_errorf("model output '%s' has no static shape; bind its dims first", v->name);
            *out = g->outputs[i];
            return SC_OK;
        }
    }
    return sc_errorf("the model has no float output to attach a loss to");
}

/* Drops parameters the loss does not depend on (gradient -1) from params/grads. */
static void params_keep_with_grads(const sc_graph *g, sc_training_graph *tg) {
    int k = 0;
    for (int i = 0; i < tg->n_params; i++) {
        if (tg->grads[i] < 0) {
            sc_log(SC_LOG_DEBUG, "parameter '%s' does not affect the loss: no gradient, not updated",
                   g->values[tg->params[i]].name);
            continue;
        }
        tg->params[k] = tg->params[i];
        tg->grads[k] = tg->grads[i];
        if (tg->block_of) tg->block_of[k] = tg->block_of[i];
        k++;
    }
    tg->n_params = k;
}

static sc_status mode_switch(sc_graph *g, bool *not_trainable, wb_list *wb) {
    tb_builder b = {g, SC_OK};
    int n_nodes = g->n_nodes;
    for (int i = 0; i < n_nodes && !b.st; i++) {
        if (g->nodes[i].op == SC_OP_BATCH_NORM) {
            not_trainable[g->nodes[i].in[3]] = not_trainable[g->nodes[i].in[4]] = true;
            bn_to_training(&b, i, wb);
        } else if (g->nodes[i].op == SC_OP_DROPOUT) {
            dropout_to_training(&b, i);
        }
    }
    return b.st;
}

/* Mixed precision (graph/pass_precision.c) casts each parameter to bf16 once, and ConvGrad / MatMul
 * gradients read that cast in the backward pass, so a whole model's bf16 copy would stay from its
 * forward use to its backward one: for a large model more than its activations. A second Cast of the
 * parameter feeds the backward readers instead, placed right before the first of them: the forward
 * copy dies after its last forward reader, and the backward one is made when it is needed (PyTorch's
 * autocast keeps the forward copy; recomputing a cast costs one pass over the weights). */
static sc_status param_casts_again(sc_graph *g, int F) {
    int n0 = g->n_nodes;
    sc_status st = SC_OK;
    for (int i = 0; !st && i < F; i++) {
        const sc_node *c = &g->nodes[i];
        if (c->op != SC_OP_CAST || c->in[0] < 0 || g->values[c->in[0]].kind != SC_VALUE_PARAM) continue;
        int v = c->out[0], f = -1;
        for (int j = F; j < n0 && f < 0; j++)
            for (int k = 0; k < g->nodes[j].n_in; k++)
                if (g->nodes[j].in[k] == v) f = j;
        if (f < 0) continue;
        char name[512];
        snprintf(name, sizeof name, "%s/again", g->values[v].name);
        int again = graph_add_value_unique(g, name, SC_VALUE_ACT, &g->values[v].desc, &st);
        sc_node copy = g->nodes[i];
        int id = again < 0 ? -1 : graph_add_node(g, SC_OP_CAST, name, copy.in, 1, &again, 1, &st);
        if (id < 0) break;
        g->nodes[id].attrs = copy.attrs;
        for (int j = f; j < n0; j++)
            for (int k = 0; k < g->nodes[j].n_in; k++)
                if (g->nodes[j].in[k] == v) g->nodes[j].in[k] = again;
    }
    return st ? st : graph_place_appended(g, n0);
}

/* A model whose weights are stored in 16 bits (a file saved with --save-precision bf16, or an fp16
 * export) is refused: updates of a bf16 weight would round away most of each step, and training
 * keeps f32 master weights. Checked before BatchNormalization's statistics, which such a file also
 * stores behind Casts. */
static sc_status params_check_16bit(const sc_graph *g, const sc_train_options *opt) {
    for (int v = 0; v < g->n_values; v++) {
        const sc_value *val = &g->values[v];
        if (val->kind == SC_VALUE_PARAM && (val->desc.dtype == SC_BF16 || val->desc.dtype == SC_F16) &&
            !(opt->freeze_regex && opt->freeze_regex[0]))
            return sc_errorf("parameter '%s' is stored in %s: training updates f32 master weights (mixed precision "
                             "is --precision bf16|fp16 on an f32 model); train from the f32 model",
                             val->name, sc_dtype_name(val->desc.dtype));
    }
    return SC_OK;
}

/* The model's own outputs (its logits) are read by the loss head and by nothing after the step. Kept
 * as graph outputs they would live to the end of the step and be copied to the host after it: GPT-2's
 * logits (26 MB at batch 1, seq 128) through all of backward, or a segmentation map. The training
 * graph's outputs are the loss, the writebacks and any kept gradients; the first n_model entries of
 * the list are the model's (the builder appends). */
static void model_outputs_drop(sc_graph *g, int n_model) {
    for (int i = 0; i < n_model; i++) g->values[g->outputs[i]].is_output = false;
    for (int i = n_model; i < g->n_outputs; i++) g->values[g->outputs[i]].is_output = true;
    memmove(g->outputs, g->outputs + n_model, sizeof(int) * (size_t)(g->n_outputs - n_model));
    g->n_outputs -= n_model;
}

static sc_status training_build(sc_graph *g, const sc_train_options *opt, sc_training_graph *tg) {
    tg->loss = tg->output = tg->labels = tg->lr = tg->step = -1;
    SC_TRY(params_check_16bit(g, opt));
    tg->loss_scale = tg->inv_loss_scale = -1;
    SC_TRY(model_output(g, &tg->output));
    int n_model = g->n_outputs;
    bool *not_trainable = calloc((size_t)g->n_values + 1, 1);
    if (!not_trainable) return sc_errorf("out of memory building the training graph");
    wb_list wb = {0};
    sc_status st = mode_switch(g, not_trainable, &wb);
    if (!st) st = params_collect(g, opt, not_trainable, tg);
    free(not_trainable);
    SC_TRY(st);
    SC_TRY(param_blocks_split(g, opt, tg));
    tg->n_writebacks = wb.n;
    tg->wb_src = wb.src;
    tg->wb_dst = wb.dst;
    SC_TRY(loss_head_build(g, opt, &tg->output, &tg->loss, &tg->labels));
    tg->grads = sc_arena_alloc_array(&g->arena, (size_t)tg->n_params + 1, sizeof(int));
    if (!tg->grads) return sc_errorf("out of memory listing gradients");
    tg->n_forward_nodes = g->n_nodes;
    if (opt->loss_scaling) {
        tb_builder b = {g, SC_OK};
        tg->loss_scale = tb_input(&b, "loss_scale", &g->values[tg->loss].desc);
        SC_TRY(b.st);
    }
    SC_TRY(autodiff_build_backward_seeded(g, tg->loss, tg->loss_scale, tg->params, tg->n_params, tg->grads));
    params_keep_with_grads(g, tg);
    /* before the updates exist, so that each parameter's update is placed after its second cast too
       (optimizer.c updates_positions): the update overwrites what the cast reads */
    SC_TRY(param_casts_again(g, tg->n_forward_nodes));
    SC_TRY(data_parallel_build(g, opt, tg)); /* before keep_grads: the averaged gradients are the ones kept */
    if (opt->keep_grads) {
        tb_builder b = {g, SC_OK};
        for (int i = 0; i < tg->n_params; i++) tb_output(&b, tg->grads[i]);
        SC_TRY(b.st);
    }
    SC_TRY(optimizer_build(g, opt, tg)); /* ends with graph_link (updates_place) */
    SC_TRY(data_parallel_finish(g, opt, tg));
    model_outputs_drop(g, n_model);
    SC_TRY(graph_link(g));
    int bad = -1;
    if (!graph_is_topo_sorted(g, &bad))
        return sc_errorf("internal: the training graph is not in topological order at node '%s'",
                         bad >= 0 ? g->nodes[bad].name : "?");
    return SC_OK;
}

void autodiff_inference_graph(const sc_graph *g, sc_training_graph *tg) {
    memset(tg, 0, sizeof *tg);
    tg->loss = tg->output = tg->labels = tg->lr = tg->step = -1;
    tg->loss_scale = tg->inv_loss_scale = -1;
    tg->n_forward_nodes = g->n_nodes;
}

/* The new values' names are checked for uniqueness in one pass at the end (graph_names_defer). */
sc_status autodiff_build_training(sc_graph *g, const sc_train_options *opt, sc_training_graph *tg) {
    memset(tg, 0, sizeof *tg);
    graph_names_defer(g);
    sc_status st = training_build(g, opt, tg);
    sc_status named = graph_names_resolve(g);
    if (st) sc_status_free(named);
    return st ? st : named;
}
