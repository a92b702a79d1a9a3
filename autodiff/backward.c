/* autodiff_build_backward (contract in autodiff/autodiff.h): reverse-mode differentiation as graph
 * rewriting, ONNX Runtime's gradient graph builder being the model.
 *
 * 1. A value needs a gradient when it is a float value reachable forward from some wrt value and
 *    backward from the loss; everything else (integer values, frozen parameters, branches not
 *    reaching the loss) gets nothing computed.
 * 2. The seed dLoss is a constant 1 with the loss's dtype and shape.
 * 3. Forward nodes are visited in reverse topological order; a node whose outputs carry some
 *    gradient and whose inputs need one calls its rule (sc_grad_rules). Each gradient a rule
 *    returns is added to the input's running sum at once (Add in visit order: deterministic, and
 *    only one partial sum per value is live).
 * Emitted nodes are appended, so the graph stays topologically sorted: a rule only reads forward
 * values and the final gradients of its outputs, which are complete because every consumer of an
 * output comes later in the forward order and was visited first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "autodiff/grad_rules.h"
#include "core/free_all.h"

typedef struct {
    sc_graph *g;
    int n_fwd;      /* forward nodes: [0, n_fwd) */
    int first_new;  /* first value id created by the backward pass */
    bool *need;     /* per value: needs a gradient */
    int *grad;      /* per value: gradient value id (running sum) or -1 */
} bw_state;

/* Spreads a per-value mark over the forward nodes [0, n_fwd): forward, a node reading a marked value
 * marks its outputs; backward (in reverse order), a node writing one marks its inputs. */
static void mark_reach(const sc_graph *g, int n_fwd, bool forward, bool *mark) {
    for (int j = 0; j < n_fwd; j++) {
        const sc_node *n = &g->nodes[forward ? j : n_fwd - 1 - j];
        const int *from = forward ? n->in : n->out, *to = forward ? n->out : n->in;
        int n_from = forward ? n->n_in : n->n_out, n_to = forward ? n->n_out : n->n_in;
        bool hit = false;
        for (int k = 0; k < n_from; k++) hit |= from[k] >= 0 && mark[from[k]];
        for (int k = 0; hit && k < n_to; k++)
            if (to[k] >= 0) mark[to[k]] = true;
    }
}

static sc_status bw_mark(bw_state *s, int loss, const int *wrt, int n_wrt) {
    sc_graph *g = s->g;
    bool *from_wrt = calloc((size_t)g->n_values + 1, 1), *to_loss = calloc((size_t)g->n_values + 1, 1);
    if (!from_wrt || !to_loss) {
        free(from_wrt);
        free(to_loss);
        return sc_errorf("out of memory building the backward graph");
    }
    for (int w = 0; w < n_wrt; w++)
        if (wrt[w] >= 0) from_wrt[wrt[w]] = true;
    mark_reach(g, s->n_fwd, true, from_wrt);
    to_loss[loss] = true;
    mark_reach(g, s->n_fwd, false, to_loss);
    for (int v = 0; v < g->n_values; v++)
        s->need[v] = from_wrt[v] && to_loss[v] && sc_dtype_is_float(g->values[v].desc.dtype);
    free(from_wrt);
    free(to_loss);
    return SC_OK;
}

static sc_status bw_seed(bw_state *s, int loss, int seed) {
    sc_graph *g = s->g;
    const sc_value *l = &g->values[loss];
    if (!sc_dtype_is_float(l->desc.dtype) || !sc_desc_is_static(&l->desc)) {
        char d[128];
        return sc_errorf("loss '%s' must be a float value with a static shape, got %s", l->name,
                         sc_desc_str(&l->desc, d, sizeof d));
    }
    if (seed >= 0) {
        const sc_value *sv = &g->values[seed];
        if (sv->desc.dtype != l->desc.dtype || !sc_desc_same_shape(&sv->desc, &l->desc))
            return sc_errorf("loss '%s': the seed '%s' differs from it in type or shape", l->name, sv->name);
        s->grad[loss] = seed;
        return SC_OK;
    }
    char base[512];
    snprintf(base, sizeof base, "%s/grad", l->name);
    sc_status st = SC_OK;
    sc_desc d = l->desc;
    int v = graph_add_value_unique(g, base, SC_VALUE_CONST, &d, &st);
    if (v < 0) return st;
    SC_TRY(graph_alloc_data(g, v));
    int64_t n = sc_desc_numel(&d);
    void *p = g->values[v].data;
    for (int64_t i = 0; i < n; i++) {
        switch (d.dtype) {
        case SC_F32: ((float *)p)[i] = 1.0f; break;
        case SC_F64: ((double *)p)[i] = 1.0; break;
        default: return sc_errorf("loss '%s': seeding a %s loss is not supported (f32, f64)", l->name, sc_dtype_name(d.dtype));
        }
    }
    s->grad[loss] = v;
    return SC_OK;
}

/* Whether contribution gv (for input k) is a GatherGrad this rule just emitted (node index >=
 * first_node) with no base yet and given to no other input: it can start from the running sum. */
static bool bw_gather_foldable(const sc_graph *g, const sc_grad_ctx *c, int k, int gv, int first_node) {
    int p = g->values[gv].producer;
    if (p < first_node || p >= g->n_nodes) return false;
    const sc_node *n = &g->nodes[p];
    if (n->op != SC_OP_GATHER_GRAD || n->n_in != 4 || n->in[3] >= 0 || n->out[0] != gv) return false;
    for (int j = 0; j < c->fwd.n_in; j++)
        if (j != k && c->gi[j] == gv) return false;
    return true;
}

/* Adds contribution `gv` to input k's running gradient sum: an Add, or, when gv is a fresh
 * GatherGrad, the sum becomes its base (the rows are added into it; the planner may let the
 * output take the sum's storage). first_node: the graph's node count before the rule ran. */
static void bw_accumulate(bw_state *s, sc_grad_ctx *c, int k, int gv, int first_node) {
    sc_graph *g = s->g;
    int v = c->fwd.in[k];
    const sc_desc *want = &g->values[v].desc, *got = &g->values[gv].desc;
    if (got->dtype != want->dtype || got->rank != want->rank || !sc_desc_same_shape(got, want)) {
        char a[128], b[128];
        ad_fail(c, "the rule produced a gradient %s for input %d '%s' of %s", sc_desc_str(got, a, sizeof a), k,
                g->values[v].name, sc_desc_str(want, b, sizeof b));
        return;
    }
    if (s->grad[v] < 0) {
        s->grad[v] = gv;
    } else if (s->grad[v] != gv && bw_gather_foldable(g, c, k, gv, first_node)) {
        sc_node *gg = &g->nodes[g->values[gv].producer];
        gg->in[3] = s->grad[v];
        gg->in[2] = -1; /* data only gave the shape, which base has: no read of the table (no prefetch of it) */
        s->grad[v] = gv;
    } else {
        s->grad[v] = ad_binary(c, SC_OP_ADD, s->grad[v], gv);
        if (c->st) return;
    }
    /* Values built by the backward pass that hold a gradient are GRAD; helper values stay ACT. */
    int r = s->grad[v];
    if (r >= s->first_new && g->values[r].kind == SC_VALUE_ACT) g->values[r].kind = SC_VALUE_GRAD;
}

/* A 2-D Transpose whose output gradient is a Gemm this backward pass made, read by nothing yet and
 * the gradient of no other value: the Gemm computes the transposed result instead, operands swapped
 * and flags flipped ((A' B')^T = B'^T A'^T), and is the input's gradient. A tied LM head's weight
 * gradient is then one [vocab, dim] GEMM, not a [dim, vocab] GEMM and a transposed copy of it.
 * Returns the gradient value, or -1 when the pattern does not apply. */
static int bw_transpose_into_gemm(bw_state *s, const sc_node *fwd, int go) {
    sc_graph *g = s->g;
    if (fwd->op != SC_OP_TRANSPOSE || go < s->first_new || g->values[go].desc.rank != 2) return -1;
    if (fwd->out[0] < 0 || graph_transposed_matrix(g, fwd->out[0]) < 0) return -1;
    int p = g->values[go].producer;
    if (p < s->n_fwd || g->nodes[p].op != SC_OP_GEMM || g->nodes[p].n_in != 2 || g->nodes[p].out[0] != go) return -1;
    for (int i = p + 1; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] == go) return -1;
    int owners = 0;
    for (int v = 0; v < s->first_new; v++) owners += s->grad[v] == go;
    if (owners != 1) return -1;
    sc_node *n = &g->nodes[p];
    sc_attrs a = *n->attrs;
    bool ta = a.gemm.trans_a;
    a.gemm.trans_a = !a.gemm.trans_b;
    a.gemm.trans_b = !ta;
    if (graph_node_set_attrs(g, n, &a)) return -1;
    int x = n->in[0];
    n->in[0] = n->in[1];
    n->in[1] = x;
    sc_desc *d = &g->values[go].desc;
    int64_t r0 = d->dims[0];
    d->dims[0] = d->dims[1];
    d->dims[1] = r0;
    return go;
}

static sc_status bw_missing_rule(const sc_graph *g, const sc_node *n) {
    const char *why = grad_rule_missing_reason(n->op);
    return sc_errorf("node '%s' (%s) lies between the parameters and the loss but has no gradient rule%s%s", n->name,
                     sc_op_name(n->op), why ? ": " : "", why ? why : "");
}

static sc_status bw_node(bw_state *s, int i) {
    sc_graph *g = s->g;
    sc_node fwd = g->nodes[i];
    int *go = malloc(sizeof(int) * ((size_t)fwd.n_out + 1));
    int *gi = malloc(sizeof(int) * ((size_t)fwd.n_in + 1));
    bool *need_gi = malloc((size_t)fwd.n_in + 1);
    if (!go || !gi || !need_gi) {
        SC_FREE_ALL(go, gi, need_gi);
        return sc_errorf("out of memory building the backward graph");
    }
    bool any_go = false, any_need = false;
    for (int k = 0; k < fwd.n_out; k++) {
        go[k] = fwd.out[k] >= 0 ? s->grad[fwd.out[k]] : -1;
        any_go |= go[k] >= 0;
    }
    for (int k = 0; k < fwd.n_in; k++) {
        gi[k] = -1;
        need_gi[k] = fwd.in[k] >= 0 && s->need[fwd.in[k]];
        any_need |= need_gi[k];
    }
    sc_status st = SC_OK;
    int folded = any_go && any_need && need_gi[0] ? bw_transpose_into_gemm(s, &fwd, go[0]) : -1;
    if (folded >= 0) {
        sc_grad_ctx c = {g, fwd, i, go, gi, need_gi, SC_OK};
        bw_accumulate(s, &c, 0, folded, g->n_nodes);
        st = c.st;
    } else if (any_go && any_need) {
        sc_grad_rule rule = sc_grad_rules[fwd.op];
        if (!rule) {
            st = bw_missing_rule(g, &fwd);
        } else {
            sc_grad_ctx c = {g, fwd, i, go, gi, need_gi, SC_OK};
            int first_node = g->n_nodes;
            rule(&c);
            for (int k = 0; k < fwd.n_in && !c.st; k++)
                if (need_gi[k] && gi[k] >= 0) bw_accumulate(s, &c, k, gi[k], first_node);
            st = c.st;
        }
    }
    SC_FREE_ALL(go, gi, need_gi);
    return st;
}

/* ---- sinking gradient producers ----
 * A rule emits every gradient of a node when it visits the node, so a weight gradient is made as
 * early as backward allows. For a gradient much larger than what it is computed from, that is the
 * worst time: a tied LM head's dW = dY^T h (154 MB for GPT-2, from 26 MB of dY) is made at the
 * start of backward and then waits, beside every activation kept for backward, for the embedding's
 * GatherGrad at the very end, which adds its rows into it. Run just before that reader instead,
 * holding dY and h meanwhile, the peak holds 26 MB where it held 154 MB.
 *
 * A backward node sinks when graph_node_sinks says so and its outputs are read by later nodes. It goes just before its first
 * reader (that reader's own new place when it sank too), keeping the order among nodes that land
 * at one place, so the graph stays topologically sorted and deterministic. */

static sc_status bw_sink(sc_graph *g, int n_fwd) {
    SC_TRY(graph_link(g));
    int n = g->n_nodes;
    int *to = malloc(sizeof(int) * ((size_t)n + 1));    /* per node: the position it goes before */
    int *count = calloc((size_t)n + 2, sizeof(int));
    sc_node *order = malloc(sizeof(sc_node) * ((size_t)n + 1));
    if (!to || !count || !order) {
        SC_FREE_ALL(to, count, order);
        return sc_errorf("out of memory ordering the backward graph");
    }
    int moved = 0;
    for (int i = n - 1; i >= 0; i--) {
        to[i] = i;
        if (i < n_fwd || !graph_node_sinks(g, i)) continue;
        int first = n;
        const sc_node *nd = &g->nodes[i];
        for (int k = 0; k < nd->n_out; k++) {
            int v = nd->out[k];
            if (v < 0) continue;
            if (g->values[v].is_output) first = i; /* a graph output stays where it is made */
            for (int c = 0; c < g->values[v].n_consumers; c++) {
                int r = to[g->values[v].consumers[c]];
                if (r < first) first = r;
            }
        }
        if (first < n && first > i + 1) to[i] = first, moved++;
    }
    if (moved) {
        /* counting sort by (target, original index): nodes bound for position p precede node p */
        for (int i = 0; i < n; i++) count[to[i] + 1]++;
        for (int p = 0; p < n; p++) count[p + 1] += count[p];
        for (int i = 0; i < n; i++) order[count[to[i]]++] = g->nodes[i]; /* stable: sunk nodes come from below */
        memcpy(g->nodes, order, sizeof(sc_node) * (size_t)n);
    }
    SC_FREE_ALL(to, count, order);
    return moved ? graph_link(g) : SC_OK;
}

static sc_status backward_build(sc_graph *g, int loss, int seed, const int *wrt, int n_wrt, int *grads) {
    if (loss < 0 || loss >= g->n_values) return sc_errorf("autodiff: loss value id %d is invalid", loss);
    int bad = -1;
    if (!graph_is_topo_sorted(g, &bad)) SC_TRY(graph_topo_sort(g));
    bw_state s = {g, g->n_nodes, g->n_values, NULL, NULL};
    s.need = calloc((size_t)g->n_values + 1, sizeof(bool));
    s.grad = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    sc_status st = (!s.need || !s.grad) ? sc_errorf("out of memory building the backward graph") : SC_OK;
    if (!st) {
        for (int v = 0; v < g->n_values; v++) s.grad[v] = -1;
        st = bw_mark(&s, loss, wrt, n_wrt);
    }
    if (!st) st = bw_seed(&s, loss, seed);
    /* grad and need are indexed by forward values only (inputs and outputs of forward nodes), so
     * values the backward pass creates need no slots. */
    for (int i = s.n_fwd - 1; i >= 0 && !st; i--) {
        st = bw_node(&s, i);
    }
    for (int w = 0; w < n_wrt && !st; w++) grads[w] = wrt[w] >= 0 && s.need[wrt[w]] ? s.grad[wrt[w]] : -1;
    /* The loss itself may be in wrt. */
    for (int w = 0; w < n_wrt && !st; w++)
        if (wrt[w] == loss) grads[w] = s.grad[loss];
    free(s.need);
    free(s.grad);
    if (!st) st = graph_link(g);
    if (!st) st = bw_sink(g, s.n_fwd);
    return st;
}

sc_status autodiff_build_backward(sc_graph *g, int loss, const int *wrt, int n_wrt, int *grads) {
    return autodiff_build_backward_seeded(g, loss, -1, wrt, n_wrt, grads);
}

sc_status autodiff_build_backward_seeded(sc_graph *g, int loss, int seed, const int *wrt, int n_wrt, int *grads) {
    graph_names_defer(g);
    sc_status st = backward_build(g, loss, seed, wrt, n_wrt, grads);
    sc_status named = graph_names_resolve(g);
    if (st) sc_status_free(named);
    return st ? st : named;
}
