/* graph_apply_precision: mixed precision as a graph pass (docs/DESIGN.md, graph/). PyTorch's autocast
 * is the reference behaviour, and each op's rule is the precision column of its ops.def row:
 *
 *   low     its float inputs are cast to the low type (bf16 or f16): Conv, Gemm, MatMul (and their
 *           gradients, which autodiff derives from the casts: dX of a bf16 MatMul is a bf16 MatMul)
 *   fp32    its low inputs are cast up to f32: LayerNormalization, reductions, Exp, Log, Pow and the
 *           loss
 *   follow  it runs in its inputs' type; when they mix, the low ones are cast up (type promotion),
 *           except that a one-element constant follows the others (as a Python scalar does).
 *           Softmax and LogSoftmax follow, as in PyTorch's CPU autocast: they compute in f32 and
 *           store bf16, which halves the N x N attention maps a transformer keeps for backward
 *           (an f32 softmax of bf16 scores would store both an f32 and a bf16 copy of each)
 *   bias    an Add of a low op's output and an f32 parameter one row long (the bias of a Linear,
 *           which ONNX exports as MatMul + Add) runs low, the bias read through its Cast as the
 *           weight is: PyTorch's autocast runs Linear as one addmm whose output is low. Promoting
 *           would make every projection's output f32, and with it the activations after it (GPT-2
 *           small's MLP kept its 4 x dim hidden state in f32, 100 MB a layer at b8 T1024)
 *   table   a Gather of an f32 parameter that a low op reads too (a tied embedding: GPT-2's token
 *           table is its LM head's weight) reads the 16-bit copy the low op reads. The lookup only
 *           moves rows, and with every device reader taking 16 bits, streaming moves the table in 16
 *           bits (schedule/wire.c): GPT-2 small's 38.6M-row-element table is 31% of its weights.
 *           Here we differ from autocast, which looks the rows up in f32: the rows carry bf16's
 *           rounding of the table, the rounding the head's product already applies to the same
 *           weight. A table that only Gathers read (untied, positions) stays f32.
 *
 * Parameters stay f32 (the master weights the optimizer updates); a low op reads a Cast of them, an
 * activation made each step, whose gradient autodiff casts back to f32. One Cast per value and type
 * is made, and its output is shared by every consumer. Graph outputs keep their f32 type: a value
 * that became low is renamed "<name>/bf16" and cast back into the output's id and name.
 * Kernels compute low-precision ops with f32 accumulation (the CPU backend widens bf16 tensors to
 * f32 and rounds the outputs once, backends/cpu/cpu_widen.c).
 *
 * f16 follows the same table. PyTorch's CUDA autocast, the fp16 reference, differs in one row: it
 * runs Softmax in fp32, where here Softmax still computes in f32 and stores f16 (its values lie in
 * [0, 1], well inside fp16's range). fp16's narrow range elsewhere is what the trainer's dynamic
 * loss scaling is for (train/loss_scale.c).
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/free_all.h"
#include "graph/pass_internal.h"
#include "graph/shape.h"

typedef struct {
    sc_graph *g;
    sc_dtype low;
    int n_values;   /* values before the pass: the ones casts are made of */
    int *cast_low;  /* [n_values] the value's Cast to low, or -1 */
    int *cast_f32;  /* [n_values] its Cast to f32, or -1 */
    bool *low_read; /* [n_values] a low op reads the value */
    sc_status st;
} prec_ctx;

static bool is_float(sc_dtype t) { return t == SC_F32 || t == SC_BF16 || t == SC_F16; }

/* Inputs that are settings rather than data keep their type: Resize's roi and scales, Dropout's
 * ratio, and BatchNormalization's scale, bias and statistics (f32 parameters whose running
 * updates are written back; ONNX lets them differ from X's type, and the statistics are computed in
 * f32 either way). */
static bool input_is_setting(sc_op op, int k) {
    return (op == SC_OP_RESIZE && (k == 1 || k == 2)) || (op == SC_OP_DROPOUT && k == 1) ||
           (op == SC_OP_BATCH_NORM && k >= 1);
}

static bool one_element_const(const sc_graph *g, int v) {
    return g->values[v].kind == SC_VALUE_CONST && sc_desc_numel(&g->values[v].desc) == 1;
}

/* The Cast of value v to type `to`, made once. */
static int cast_of(prec_ctx *c, int v, sc_dtype to) {
    int *cache = to == SC_F32 ? c->cast_f32 : c->cast_low;
    if (v < c->n_values && cache[v] >= 0) return cache[v];
    sc_graph *g = c->g;
    char name[512];
    snprintf(name, sizeof name, "%s/to_%s", g->values[v].name, sc_dtype_name(to));
    sc_desc d = g->values[v].desc;
    d.dtype = to;
    int out = graph_add_value_unique(g, name, SC_VALUE_ACT, &d, &c->st);
    if (out < 0) return -1;
    int node = graph_add_node(g, SC_OP_CAST, name, &v, 1, &out, 1, &c->st);
    if (node < 0) return -1;
    sc_attrs a = {0};
    a.cast.to = to;
    sc_status st = graph_node_set_attrs(g, &g->nodes[node], &a);
    if (st) {
        c->st = st;
        return -1;
    }
    if (v < c->n_values) cache[v] = out;
    return out;
}

static bool made_by_low_op(const prec_ctx *c, int v) {
    int p = v < c->n_values ? c->g->values[v].producer : -1; /* linked at the start; casts add values */
    return p >= 0 && sc_op_infos[c->g->nodes[p].op].precision == SC_OP_PREC_LOW &&
           c->g->values[v].desc.dtype == c->low;
}

/* Gather(table, ids) of an f32 parameter that a low op also reads. */
static bool is_low_table_gather(const prec_ctx *c, const sc_node *n) {
    if (n->op != SC_OP_GATHER || n->n_in < 2 || n->in[0] < 0 || n->in[0] >= c->n_values) return false;
    const sc_value *t = &c->g->values[n->in[0]];
    return t->kind == SC_VALUE_PARAM && t->desc.dtype == SC_F32 && c->low_read[n->in[0]];
}

/* A parameter of one row: rank 1, or leading dims of 1, as long as x's last dim. */
static bool is_bias_of(const sc_graph *g, int b, int x) {
    const sc_desc *bd = &g->values[b].desc, *xd = &g->values[x].desc;
    if (g->values[b].kind != SC_VALUE_PARAM || bd->dtype != SC_F32 || bd->rank < 1 || xd->rank < 1 ||
        bd->rank > xd->rank)
        return false;
    for (int d = 0; d + 1 < bd->rank; d++)
        if (bd->dims[d] != 1) return false;
    return bd->dims[bd->rank - 1] == xd->dims[xd->rank - 1];
}

/* Add(low op's output, bias) in either order: the Linear's bias add runs low. */
static bool is_low_bias_add(const prec_ctx *c, const sc_node *n) {
    if (n->op != SC_OP_ADD || n->n_in != 2 || n->in[0] < 0 || n->in[1] < 0) return false;
    for (int side = 0; side < 2; side++)
        if (made_by_low_op(c, n->in[side]) && is_bias_of(c->g, n->in[1 - side], n->in[side])) return true;
    return false;
}

/* The type node i's float data inputs should have, or SC_DTYPE_UNDEFINED to leave them. */
static sc_dtype node_target(const prec_ctx *c, int i) {
    const sc_graph *g = c->g;
    const sc_node *n = &g->nodes[i];
    if (is_low_bias_add(c, n) || is_low_table_gather(c, n)) return c->low;
    bool any_f32 = false, any_low = false;
    for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k];
        if (v < 0 || input_is_setting(n->op, k) || !is_float(g->values[v].desc.dtype)) continue;
        if (g->values[v].desc.dtype == SC_F32 && !one_element_const(g, v)) any_f32 = true;
        if (g->values[v].desc.dtype == c->low) any_low = true;
    }
    switch (sc_op_infos[n->op].precision) {
    case SC_OP_PREC_LOW: return c->low;
    case SC_OP_PREC_FP32: return SC_F32;
    case SC_OP_PREC_FOLLOW: return any_low ? (any_f32 ? SC_F32 : c->low) : SC_DTYPE_UNDEFINED;
    }
    return SC_DTYPE_UNDEFINED;
}

/* Casts node i's float data inputs to its target type, then infers its outputs again. */
static sc_status node_apply(prec_ctx *c, int i) {
    sc_graph *g = c->g;
    sc_op op = g->nodes[i].op;
    if (op == SC_OP_CAST) return SC_OK; /* its output type is its attribute */
    sc_dtype to = node_target(c, i);
    if (to == SC_DTYPE_UNDEFINED) return SC_OK;
    for (int k = 0; k < g->nodes[i].n_in; k++) {
        int v = g->nodes[i].in[k];
        if (v < 0 || input_is_setting(op, k) || !is_float(g->values[v].desc.dtype) || g->values[v].desc.dtype == to)
            continue;
        int cv = cast_of(c, v, to); /* may move g->nodes */
        if (cv < 0) return c->st;
        g->nodes[i].in[k] = cv;
    }
    return sc_shape_fns[op](g, &g->nodes[i]);
}

/* A graph output that became low: its producer writes "<name>/bf16", cast back to the output. */
static sc_status output_restore(prec_ctx *c, int out, sc_dtype was) {
    sc_graph *g = c->g;
    int prod = -1, slot = -1;
    for (int i = 0; i < g->n_nodes && prod < 0; i++)
        for (int k = 0; k < g->nodes[i].n_out; k++)
            if (g->nodes[i].out[k] == out) prod = i, slot = k;
    if (prod < 0) return SC_OK;
    char name[512];
    snprintf(name, sizeof name, "%s/%s", g->values[out].name, sc_dtype_name(c->low));
    int low = graph_add_value_unique(g, name, SC_VALUE_ACT, &g->values[out].desc, &c->st);
    if (low < 0) return c->st;
    g->nodes[prod].out[slot] = low;
    g->values[out].desc.dtype = was;
    int node = graph_add_node(g, SC_OP_CAST, name, &low, 1, &out, 1, &c->st);
    if (node < 0) return c->st;
    sc_attrs a = {0};
    a.cast.to = was;
    return graph_node_set_attrs(g, &g->nodes[node], &a);
}

sc_status graph_apply_precision(sc_graph *g, sc_dtype low, const sc_node_evaluator *eval) {
    if (low == SC_F32 || low == SC_DTYPE_UNDEFINED) return SC_OK;
    if (low != SC_BF16 && low != SC_F16)
        return sc_errorf("precision %s is not supported (f32, bf16 or f16)", sc_dtype_name(low));
    prec_ctx c = {.g = g, .low = low, .n_values = g->n_values};
    c.cast_low = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    c.cast_f32 = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    c.low_read = calloc((size_t)g->n_values + 1, 1);
    sc_dtype *out_was = malloc(sizeof(sc_dtype) * ((size_t)g->n_outputs + 1));
    sc_status st =
        c.cast_low && c.cast_f32 && c.low_read && out_was ? SC_OK : sc_errorf("out of memory applying precision");
    if (!st) st = graph_link(g);
    for (int v = 0; !st && v < g->n_values; v++) c.cast_low[v] = c.cast_f32[v] = -1;
    for (int i = 0; !st && i < g->n_nodes; i++)
        if (sc_op_infos[g->nodes[i].op].precision == SC_OP_PREC_LOW)
            for (int k = 0; k < g->nodes[i].n_in; k++)
                if (g->nodes[i].in[k] >= 0) c.low_read[g->nodes[i].in[k]] = true;
    for (int i = 0; !st && i < g->n_outputs; i++) out_was[i] = g->values[g->outputs[i]].desc.dtype;
    int n_nodes = g->n_nodes; /* the casts appended are not visited */
    for (int i = 0; !st && i < n_nodes; i++) st = node_apply(&c, i);
    for (int i = 0; !st && i < g->n_outputs; i++)
        if (g->values[g->outputs[i]].desc.dtype != out_was[i]) st = output_restore(&c, g->outputs[i], out_was[i]);
    SC_FREE_ALL(c.cast_low, c.cast_f32, c.low_read, out_was);
    /* each cast lives from its first reader on, not from the start of the step (a topological sort
     * would run every parameter's cast first) */
    if (!st) st = graph_place_appended(g, n_nodes);
    if (!st) st = graph_infer_shapes(g, eval); /* folds the casts of constants */
    return st;
}
