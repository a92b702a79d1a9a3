/* graph_infer_shapes: shape inference in topological order, with constant folding.
 *
 * A node is folded (run once on the CPU at load, its outputs turned into SC_VALUE_CONST data in the
 * graph arena, the node removed) when
 *   - every present input is SC_VALUE_CONST, or the node is Shape of a value with a static desc
 *     (parameters are never folded: they may be trained later),
 *   - its outputs hold at most SC_FOLD_MAX_ELEMS elements together and its FLOPs (graph/op_cost.c) are
 *     at most SC_FOLD_MAX_WORK: folding runs kernels while loading, so small tensors must not be able
 *     to ask for hours of work (a fuzzed 500x500 kernel over a constant 1000x1000 image is 6e10
 *     multiply-adds, all under the element limit),
 *   - the CPU backend has a kernel for it,
 *   - none of its outputs is a graph output (outputs stay computed by a node, which keeps the
 *     executor's contract simple), and
 *   - it is not a Dropout given a training_mode input (folding would freeze one random mask).
 * Folding in node order makes PyTorch's Shape->Gather->Unsqueeze->Concat->Reshape chains vanish: by
 * the time Reshape's shape function reads its shape input, that input is a constant.
 */
#include <stdlib.h>
#include <string.h>

#include "core/free_all.h"
#include "graph/op_cost.h"
#include "graph/pass_internal.h"
#include "graph/shape.h"

#define SC_FOLD_MAX_ELEMS ((int64_t)1 << 20)
#define SC_FOLD_MAX_WORK ((int64_t)1 << 30)

static bool fold_wanted(const sc_graph *g, const sc_node *n, const bool *is_out, const sc_node_evaluator *eval) {
    if (!eval || !eval->can_run(n->op)) return false;
    if (n->op == SC_OP_DROPOUT && node_has_input(n, 2)) return false;
    bool all_const = true;
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0) continue;
        const sc_value *v = &g->values[n->in[k]];
        if (v->kind != SC_VALUE_CONST || !v->data) all_const = false;
    }
    if (!all_const && !(n->op == SC_OP_SHAPE && sc_desc_is_static(&g->values[n->in[0]].desc))) return false;
    int64_t elems = 0;
    for (int k = 0; k < n->n_out; k++) {
        if (n->out[k] < 0) continue;
        if (is_out[n->out[k]]) return false;
        int64_t e = sc_desc_numel(&g->values[n->out[k]].desc);
        if (e < 0) return false;
        elems += e;
    }
    return elems <= SC_FOLD_MAX_ELEMS && sc_node_cost(g, n).flops <= (double)SC_FOLD_MAX_WORK;
}

static sc_status fold_node(sc_graph *g, const sc_node *n, const sc_node_evaluator *eval) {
    sc_tensor *in = calloc((size_t)n->n_in + 1, sizeof *in), *out = calloc((size_t)n->n_out + 1, sizeof *out);
    sc_status st = SC_OK;
    if (!in || !out) st = sc_errorf("out of memory folding node '%s'", n->name);
    for (int k = 0; !st && k < n->n_in; k++) {
        if (n->in[k] < 0) continue;
        in[k].desc = g->values[n->in[k]].desc;
        in[k].data = g->values[n->in[k]].data; /* NULL for Shape's run-time input: only its desc is read */
    }
    for (int k = 0; !st && k < n->n_out; k++) {
        if (n->out[k] < 0) continue;
        st = graph_alloc_data(g, n->out[k]);
        out[k].desc = g->values[n->out[k]].desc;
        out[k].data = g->values[n->out[k]].data;
    }
    if (!st) st = eval->run(n, in, n->n_in, out, n->n_out);
    for (int k = 0; !st && k < n->n_out; k++)
        if (n->out[k] >= 0) g->values[n->out[k]].kind = SC_VALUE_CONST;
    free(in);
    free(out);
    return st ? sc_status_prefix(st, "constant folding: ") : SC_OK;
}

/* Shape functions check what they read; this catches any output past the limit before a later
 * node multiplies its dims. */
static sc_status infer_check_outputs(const sc_graph *g, const sc_node *n) {
    for (int k = 0; k < n->n_out; k++) {
        if (n->out[k] < 0) continue;
        const sc_value *v = &g->values[n->out[k]];
        int64_t numel = sc_desc_numel(&v->desc);
        if (numel < 0 || numel > SC_SHAPE_MAX_DIM) {
            char buf[160];
            return shape_errorf(n, "output %d ('%s') would be %s: a negative dim or more than 2^40 elements", k,
                                v->name, sc_desc_str(&v->desc, buf, sizeof buf));
        }
    }
    return SC_OK;
}

static sc_status infer_check_node(const sc_graph *g, const sc_node *n) {
    const sc_op_info *info = &sc_op_infos[n->op];
    if (n->n_in < info->min_inputs || n->n_in > info->max_inputs || n->n_out < info->min_outputs ||
        n->n_out > info->max_outputs)
        return shape_errorf(n, "has %d inputs and %d outputs; the op takes %d..%d and %d..%d", n->n_in, n->n_out,
                            info->min_inputs, info->max_inputs, info->min_outputs, info->max_outputs);
    if (!sc_shape_fns[n->op]) {
        const char *why = shape_fn_missing_reason(n->op);
        return shape_errorf(n, "no shape function%s%s", why ? ": " : "", why ? why : "");
    }
    for (int k = 0; k < info->min_inputs && k < n->n_in; k++)
        if (n->in[k] < 0) return shape_errorf(n, "required input %d is missing", k);
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0) continue;
        const sc_value *v = &g->values[n->in[k]];
        if (!sc_desc_is_static(&v->desc) || v->desc.dtype == SC_DTYPE_UNDEFINED) {
            char buf[160];
            return shape_errorf(n, "input %d ('%s') has no static shape (%s); bind symbolic dims first", k, v->name,
                                sc_desc_str(&v->desc, buf, sizeof buf));
        }
        int64_t numel = sc_desc_numel(&v->desc);
        if (numel < 0 || numel > SC_SHAPE_MAX_DIM) {
            char buf[160];
            return shape_errorf(n, "input %d ('%s') is %s: more than 2^40 elements", k, v->name,
                                sc_desc_str(&v->desc, buf, sizeof buf));
        }
    }
    return SC_OK;
}

/* A node that is not a control op must not read a sequence. */
static sc_status infer_check_tensor_inputs(const sc_graph *g, const sc_node *n) {
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] >= 0 && g->values[n->in[k]].is_sequence)
            return shape_errorf(n, "input %d ('%s') is a sequence; only sequence ops read sequences", k,
                                g->values[n->in[k]].name);
    return SC_OK;
}

typedef struct {
    bool *keep; /* per node: kept (false: folded or lowered) */
    bool *is_out; /* per value: a graph output */
    int cap_nodes, cap_values;
} infer_walk;

static bool walk_grow(infer_walk *w, const sc_graph *g) {
    if (g->n_nodes + 1 > w->cap_nodes) {
        int nc = 2 * (g->n_nodes + 1);
        bool *p = realloc(w->keep, (size_t)nc);
        if (!p) return false;
        w->keep = p;
        w->cap_nodes = nc;
    }
    if (g->n_values + 1 > w->cap_values) {
        int nc = 2 * (g->n_values + 1);
        bool *p = realloc(w->is_out, (size_t)nc);
        if (!p) return false;
        memset(p + w->cap_values, 0, (size_t)(nc - w->cap_values));
        w->is_out = p;
        w->cap_values = nc;
    }
    return true;
}

/* Lowers control node i (graph/pass_control.c): what it amounts to goes at i, to be visited next,
 * and the node itself is emptied and dropped. */
static sc_status walk_lower(sc_graph *g, int i, infer_walk *w, sc_control_state *cs) {
    int n0 = g->n_nodes;
    SC_TRY(graph_lower_control_node(g, i, cs));
    int added = g->n_nodes - n0;
    if (!walk_grow(w, g)) return sc_errorf("out of memory inferring shapes");
    SC_TRY(graph_move_nodes(g, n0, i));
    memmove(w->keep + i + added, w->keep + i, (size_t)(n0 - i));
    for (int k = i; k < i + added; k++) w->keep[k] = true;
    sc_node *n = &g->nodes[i + added];
    n->n_in = n->n_out = 0;
    w->keep[i + added] = false;
    return graph_link(g);
}

sc_status graph_infer_shapes(sc_graph *g, const sc_node_evaluator *eval) {
    int bad;
    if (!graph_is_topo_sorted(g, &bad)) SC_TRY(graph_topo_sort(g));
    SC_TRY(graph_link(g)); /* producers name unfolded shape inputs in error messages */
    infer_walk w = {0};
    sc_control_state cs = {0};
    if (!walk_grow(&w, g)) {
        SC_FREE_ALL(w.keep, w.is_out);
        return sc_errorf("out of memory inferring shapes");
    }
    memset(w.keep, 1, (size_t)g->n_nodes);
    for (int i = 0; i < g->n_outputs; i++) w.is_out[g->outputs[i]] = true;
    sc_status st = SC_OK;
    for (int i = 0; i < g->n_outputs && !st; i++)
        if (g->values[g->outputs[i]].is_sequence)
            st = sc_errorf("graph output '%s' is a sequence; only tensor outputs are supported",
                           g->values[g->outputs[i]].name);
    int folded = 0;
    for (int i = 0; i < g->n_nodes && !st; i++) {
        if (!w.keep[i]) continue;
        sc_node *n = &g->nodes[i];
        if (graph_is_control_node(g, n)) {
            st = walk_lower(g, i, &w, &cs);
            folded++;
            i--; /* visit what it became */
            continue;
        }
        st = infer_check_tensor_inputs(g, n);
        if (!st) st = infer_check_node(g, n);
        if (!st) st = sc_shape_fns[n->op](g, n);
        if (!st) st = infer_check_outputs(g, n);
        if (!st && fold_wanted(g, n, w.is_out, eval)) {
            st = fold_node(g, n, eval);
            w.keep[i] = false;
            folded++;
        }
    }
    if (!st) st = graph_control_check(g, &cs);
    if (!st && folded) {
        sc_log(SC_LOG_DEBUG, "constant folding removed %d nodes", folded);
        st = graph_compact_nodes(g, w.keep);
    }
    graph_control_state_free(&cs);
    SC_FREE_ALL(w.keep, w.is_out);
    return st;
}
