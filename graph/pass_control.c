/* Control flow and sequences, lowered during graph_infer_shapes (graph/pass_internal.h).
 *
 * Exporters emit Loop, If and sequence ops for work that is fixed once the input dims are known:
 * torch.repeat_interleave over a dynamic axis (GPT-J's rotary sin/cos) is a Loop that splits a
 * tensor into a sequence, expands each piece and concatenates them again. Scorch plans static
 * graphs, so each such node is replaced by the tensor ops it amounts to, when the walk of shape
 * inference reaches it and everything before it is inferred and folded:
 *   - Loop with a constant trip count M and condition: M copies of the body, iteration t reading
 *     the constant t, the condition and carried values of iteration t - 1 and the captured values;
 *     carried outputs are the last iteration's, scan outputs Concat(Unsqueeze(x_t, 0)). The
 *     condition each iteration computes must fold to true (checked after the walk): a loop that
 *     exits early or on run-time data is refused, naming it.
 *   - If with a constant condition: the chosen branch's nodes.
 *   - A sequence is a list of tensor values known while lowering (an ONNX sequence of tensors whose
 *     length and positions are constants): SequenceEmpty, SequenceConstruct, SequenceInsert,
 *     SequenceErase and Identity build the list and go; SequenceAt becomes an Identity of the
 *     element, SequenceLength a constant, SplitToSequence a Split (with Squeezes for keepdims 0),
 *     ConcatFromSequence a Concat (of Unsqueezes for new_axis 1).
 * The new nodes go where the lowered node was and are inferred (and folded) next, so the result is
 * an ordinary graph: it folds where its inputs are constant and is differentiated like any other.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/pass_internal.h"

#define SC_LOOP_MAX_TRIPS 65536
#define SC_LOOP_MAX_NODES (1 << 22) /* nodes the Loops of one graph may unroll into */

typedef struct {
    sc_graph *g;
    sc_control_state *s;
    const char *base; /* the lowered node's name, prefix of what it makes */
    sc_status st;
} lower_ctx;

static sc_status node_errorf(const char *name, sc_op op, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sc_status st = sc_op_verrorf("node", name, op, fmt, ap);
    va_end(ap);
    return st;
}

static int new_value(lower_ctx *x, const char *what, sc_value_kind kind, const sc_desc *d) {
    if (x->st) return -1;
    char name[600];
    snprintf(name, sizeof name, "%s/%s", x->base, what);
    return graph_add_value_unique(x->g, name, kind, d, &x->st);
}

static int emit_to(lower_ctx *x, sc_op op, const char *name, const int *in, int n_in, const int *out, int n_out,
                   const sc_attrs *a) {
    if (x->st) return -1;
    int id = graph_add_node(x->g, op, name, in, n_in, out, n_out, &x->st);
    if (id >= 0 && a) x->st = graph_node_set_attrs(x->g, &x->g->nodes[id], a);
    return x->st ? -1 : id;
}

/* One output op(in...) into `out`, or into a new value when out < 0; returns the output. */
static int emit1(lower_ctx *x, sc_op op, const char *what, const int *in, int n_in, int out, const sc_attrs *a) {
    if (out < 0) out = new_value(x, what, SC_VALUE_ACT, NULL);
    if (out < 0) return -1;
    return emit_to(x, op, x->g->values[out].name, in, n_in, &out, 1, a) < 0 ? -1 : out;
}

static int const_of(lower_ctx *x, const char *what, sc_dtype t, int rank, int64_t len, const void *v) {
    sc_desc d = sc_desc_make(t, rank, &len);
    int id = new_value(x, what, SC_VALUE_CONST, &d);
    if (id < 0 || (x->st = graph_alloc_data(x->g, id))) return -1;
    memcpy(x->g->values[id].data, v, (size_t)sc_desc_bytes(&d));
    return id;
}

static int const_i64(lower_ctx *x, const char *what, const int64_t *v, int64_t n) {
    return const_of(x, what, SC_I64, 1, n, v);
}

/* The integer value of constant scalar (or one-element) v; false when v is not one. */
static bool const_int(const sc_graph *g, int v, int64_t *out) {
    if (v < 0 || g->values[v].kind != SC_VALUE_CONST || !g->values[v].data) return false;
    const sc_value *val = &g->values[v];
    if (sc_desc_numel(&val->desc) != 1) return false;
    switch (val->desc.dtype) {
    case SC_I64: *out = *(const int64_t *)val->data; return true;
    case SC_I32: *out = *(const int32_t *)val->data; return true;
    case SC_BOOL:
    case SC_U8: *out = *(const uint8_t *)val->data; return true;
    default: return false;
    }
}

/* ---- sequences ---- */

static sc_status seq_grow(sc_control_state *s, int n_values) {
    if (n_values <= s->cap) return SC_OK;
    int nc = s->cap ? s->cap : 256;
    while (nc < n_values) nc *= 2;
    sc_control_seq *p = realloc(s->seqs, sizeof *p * (size_t)nc);
    if (!p) return sc_errorf("out of memory lowering sequences");
    memset(p + s->cap, 0, sizeof *p * (size_t)(nc - s->cap));
    s->seqs = p;
    s->cap = nc;
    return SC_OK;
}

static const sc_control_seq *seq_of(const sc_graph *g, const sc_control_state *s, int v) {
    if (v < 0 || !g->values[v].is_sequence || v >= s->cap || !s->seqs[v].known) return NULL;
    return &s->seqs[v];
}

static void seq_set(lower_ctx *x, int v, const int *ids, int n) {
    if (x->st || v < 0) return;
    if ((x->st = seq_grow(x->s, x->g->n_values))) return;
    int *copy = n ? sc_arena_alloc_array(&x->g->arena, (size_t)n, sizeof(int)) : NULL;
    if (n && !copy) {
        x->st = sc_errorf("out of memory lowering sequences");
        return;
    }
    if (n) memcpy(copy, ids, sizeof(int) * (size_t)n);
    x->s->seqs[v] = (sc_control_seq){.ids = copy, .n = n, .known = true};
}

/* A position input in [-n, n - 1 + extra] (extra 1: insertion may append), normalised. */
static bool seq_pos(lower_ctx *x, const sc_node *n, int k, int len, int extra, int def, int *pos) {
    int64_t p = def;
    if (node_has_input(n, k) && !const_int(x->g, n->in[k], &p)) {
        x->st = node_errorf(n->name, n->op, "the position is computed from run-time data; only constant positions "
                                            "are supported");
        return false;
    }
    if (p < 0) p += len;
    if (p < 0 || p > len - 1 + extra) {
        x->st = node_errorf(n->name, n->op, "position %lld is outside the sequence of %d tensors", (long long)p, len);
        return false;
    }
    *pos = (int)p;
    return true;
}

static void lower_seq_build(lower_ctx *x, const sc_node *n, const sc_control_seq *in) {
    int len = in ? in->n : 0, pos;
    int *ids = malloc(sizeof *ids * ((size_t)len + (size_t)n->n_in + 1));
    if (!ids) {
        x->st = sc_errorf("out of memory lowering sequences");
        return;
    }
    if (len) memcpy(ids, in->ids, sizeof *ids * (size_t)len);
    switch (n->op) {
    case SC_OP_SEQUENCE_EMPTY: len = 0; break;
    case SC_OP_SEQUENCE_CONSTRUCT:
        len = n->n_in;
        memcpy(ids, n->in, sizeof *ids * (size_t)len);
        break;
    case SC_OP_SEQUENCE_INSERT:
        if (!seq_pos(x, n, 2, len, 1, len, &pos)) break;
        memmove(ids + pos + 1, ids + pos, sizeof *ids * (size_t)(len - pos));
        ids[pos] = n->in[1];
        len++;
        break;
    case SC_OP_SEQUENCE_ERASE:
        if (!len) x->st = node_errorf(n->name, n->op, "the sequence is empty");
        if (x->st || !seq_pos(x, n, 1, len, 0, len - 1, &pos)) break;
        memmove(ids + pos, ids + pos + 1, sizeof *ids * (size_t)(len - pos - 1));
        len--;
        break;
    default: break; /* Identity: the same list */
    }
    seq_set(x, n->out[0], ids, len);
    free(ids);
}

static void lower_seq_at(lower_ctx *x, const sc_node *n, const sc_control_seq *in) {
    int pos;
    if (!in->n) x->st = node_errorf(n->name, n->op, "the sequence is empty");
    if (!x->st && seq_pos(x, n, 1, in->n, 0, 0, &pos)) emit1(x, SC_OP_IDENTITY, "", &in->ids[pos], 1, n->out[0], NULL);
}

static void lower_seq_length(lower_ctx *x, const sc_node *n, const sc_control_seq *in) {
    sc_value *v = &x->g->values[n->out[0]];
    int64_t none = 0;
    v->desc = sc_desc_make(SC_I64, 0, &none);
    v->kind = SC_VALUE_CONST;
    if ((x->st = graph_alloc_data(x->g, n->out[0]))) return;
    *(int64_t *)v->data = in->n;
}

/* SplitToSequence(x, split?): sizes from split (a scalar: chunks of that size, the last one
 * shorter; a list: those sizes) or all 1 (then keepdims 0 squeezes the axis away). */
static void lower_split_to_sequence(lower_ctx *x, const sc_node *n) {
    const sc_desc *d = &x->g->values[n->in[0]].desc;
    int64_t axis = n->attrs->sequence.axis;
    if (axis < 0) axis += d->rank;
    if (axis < 0 || axis >= d->rank) {
        x->st = node_errorf(n->name, n->op, "axis %lld is outside rank %d", (long long)n->attrs->sequence.axis, d->rank);
        return;
    }
    int64_t len = d->dims[axis], n_pieces = len, chunk = 1;
    const sc_value *sv = node_has_input(n, 1) ? &x->g->values[n->in[1]] : NULL;
    if (sv && (sv->kind != SC_VALUE_CONST || !sv->data || sv->desc.rank > 1 || sv->desc.dtype != SC_I64)) {
        x->st = node_errorf(n->name, n->op, "split must be a constant int64 scalar or list");
        return;
    }
    if (sv && sv->desc.rank == 0) {
        chunk = *(const int64_t *)sv->data;
        n_pieces = chunk > 0 ? (len + chunk - 1) / chunk : -1;
    } else if (sv) {
        n_pieces = sv->desc.dims[0];
    }
    if (n_pieces < 0 || n_pieces > SC_LOOP_MAX_TRIPS) {
        x->st = node_errorf(n->name, n->op, "split gives %lld pieces", (long long)n_pieces);
        return;
    }
    int64_t *sizes = malloc(sizeof *sizes * ((size_t)n_pieces + 1));
    int *pieces = malloc(sizeof *pieces * ((size_t)n_pieces + 1));
    int64_t sum = 0;
    for (int64_t k = 0; sizes && k < n_pieces; k++) {
        sizes[k] = sv && sv->desc.rank == 1 ? ((const int64_t *)sv->data)[k] : (k + 1) * chunk <= len ? chunk : len - k * chunk;
        sum += sizes[k];
    }
    if (!sizes || !pieces) x->st = sc_errorf("out of memory lowering '%s'", n->name);
    else if (sum != len)
        x->st = node_errorf(n->name, n->op, "split sizes add up to %lld, the axis has %lld", (long long)sum, (long long)len);
    char what[48];
    for (int64_t k = 0; !x->st && k < n_pieces; k++) {
        snprintf(what, sizeof what, "piece%lld", (long long)k);
        pieces[k] = new_value(x, what, SC_VALUE_ACT, NULL);
    }
    sc_attrs a = {.axis = {.axis = axis}};
    int in[2] = {n->in[0], n_pieces ? const_i64(x, "split", sizes, n_pieces) : -1};
    if (n_pieces) emit_to(x, SC_OP_SPLIT, n->name, in, 2, pieces, (int)n_pieces, &a);
    bool squeeze = !sv && !n->attrs->sequence.flag;
    int axes = squeeze ? const_i64(x, "axes", &axis, 1) : -1;
    for (int64_t k = 0; squeeze && !x->st && k < n_pieces; k++) {
        int sq[2] = {pieces[k], axes};
        snprintf(what, sizeof what, "squeezed%lld", (long long)k);
        pieces[k] = emit1(x, SC_OP_SQUEEZE, what, sq, 2, -1, NULL);
    }
    seq_set(x, n->out[0], pieces, (int)n_pieces);
    free(sizes);
    free(pieces);
}

static void lower_concat_from_sequence(lower_ctx *x, const sc_node *n, const sc_control_seq *in) {
    if (!in->n) {
        x->st = node_errorf(n->name, n->op, "the sequence is empty: there is nothing to concatenate");
        return;
    }
    int64_t axis = n->attrs->sequence.axis;
    int rank = x->g->values[in->ids[0]].desc.rank + (n->attrs->sequence.flag ? 1 : 0);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) {
        x->st = node_errorf(n->name, n->op, "axis %lld is outside rank %d", (long long)n->attrs->sequence.axis, rank);
        return;
    }
    int *ids = malloc(sizeof *ids * (size_t)in->n);
    if (!ids) {
        x->st = sc_errorf("out of memory lowering '%s'", n->name);
        return;
    }
    memcpy(ids, in->ids, sizeof *ids * (size_t)in->n);
    int axes = n->attrs->sequence.flag ? const_i64(x, "axes", &axis, 1) : -1;
    for (int k = 0; axes >= 0 && k < in->n; k++) {
        int un[2] = {ids[k], axes};
        char what[32];
        snprintf(what, sizeof what, "stacked%d", k);
        ids[k] = emit1(x, SC_OP_UNSQUEEZE, what, un, 2, -1, NULL);
    }
    sc_attrs a = {.axis = {.axis = axis}};
    emit1(x, SC_OP_CONCAT, "", ids, in->n, n->out[0], &a);
    free(ids);
}

/* ---- subgraphs ----
 * Every value made here is named uniquely by construction (<node>/<iteration>/<body name>, and
 * indices on pieces): graph_unique_name probes <base>_1, _2, ... in turn, which is quadratic over
 * the copies of one loop if they share a base. */

typedef struct {
    const sc_graph *body;
    int *map;    /* body value -> graph value, this copy */
    int *consts; /* body constant -> graph constant, shared by every copy */
    const char *prefix;
} copy_ctx;

static int copy_value(lower_ctx *x, copy_ctx *c, int v) {
    if (x->st || v < 0) return -1;
    if (c->map[v] >= 0) return c->map[v];
    const sc_value *bv = &c->body->values[v];
    if (c->consts[v] < 0 && (bv->kind == SC_VALUE_CONST || bv->kind == SC_VALUE_PARAM) && bv->data) {
        int id = new_value(x, bv->name, SC_VALUE_CONST, &bv->desc);
        if (id < 0 || (x->st = graph_alloc_data(x->g, id))) return -1;
        memcpy(x->g->values[id].data, bv->data, (size_t)sc_desc_bytes(&bv->desc));
        c->consts[v] = id;
    }
    if (c->consts[v] < 0) x->st = sc_errorf("node '%s': subgraph value '%s' is read before it is computed", x->base, bv->name);
    return c->consts[v];
}

/* Appends one copy of the subgraph's nodes; c->map holds its inputs and captures on entry and
 * every value on return. */
static void copy_nodes(lower_ctx *x, copy_ctx *c) {
    int *in = NULL, *out = NULL, cap = 0;
    for (int i = 0; i < c->body->n_nodes && !x->st; i++) {
        const sc_node *bn = &c->body->nodes[i];
        if (bn->n_in + bn->n_out > cap) {
            cap = 2 * (bn->n_in + bn->n_out);
            free(in);
            in = malloc(sizeof *in * (size_t)cap);
            out = in;
            if (!in) x->st = sc_errorf("out of memory unrolling '%s'", x->base);
            if (x->st) break;
        }
        out = in + bn->n_in;
        for (int k = 0; k < bn->n_in; k++) in[k] = bn->in[k] < 0 ? -1 : copy_value(x, c, bn->in[k]);
        for (int k = 0; k < bn->n_out && !x->st; k++) {
            out[k] = -1;
            if (bn->out[k] < 0) continue;
            char what[400];
            snprintf(what, sizeof what, "%s/%s", c->prefix, c->body->values[bn->out[k]].name);
            out[k] = c->map[bn->out[k]] = new_value(x, what, SC_VALUE_ACT, NULL);
            if (out[k] >= 0) x->g->values[out[k]].is_sequence = c->body->values[bn->out[k]].is_sequence;
        }
        char name[600];
        snprintf(name, sizeof name, "%s/%s/%s", x->base, c->prefix, bn->name ? bn->name : "");
        emit_to(x, bn->op, name, in, bn->n_in, out, bn->n_out, bn->attrs);
    }
    free(in);
}

static sc_status copy_ctx_init(copy_ctx *c, const sc_graph *body) {
    c->body = body;
    c->map = malloc(sizeof *c->map * 2 * ((size_t)body->n_values + 1));
    c->consts = c->map ? c->map + body->n_values + 1 : NULL;
    if (!c->map) return sc_errorf("out of memory unrolling a subgraph");
    for (int v = 0; v <= body->n_values; v++) c->consts[v] = -1;
    return SC_OK;
}

static void copy_ctx_reset(copy_ctx *c, const int *captured) {
    for (int v = 0; v <= c->body->n_values; v++) c->map[v] = -1;
    for (int k = 0; k < c->body->n_captures; k++) c->map[c->body->captures[k]] = captured[k];
}

static sc_status loop_bounds(const sc_graph *g, const sc_node *n, sc_control_state *s, int64_t *trips) {
    const sc_graph *body = n->attrs->control.body[0];
    int64_t m, cond = 1;
    if (!node_has_input(n, 0))
        return node_errorf(n->name, n->op, "has no trip count (a while loop); Scorch unrolls loops whose trip count "
                                           "is a constant once dims are bound");
    if (!const_int(g, n->in[0], &m))
        return node_errorf(n->name, n->op, "the trip count '%s' is computed from run-time data; Scorch unrolls loops "
                                           "whose trip count is a constant once dims are bound", g->values[n->in[0]].name);
    if (node_has_input(n, 1) && !const_int(g, n->in[1], &cond))
        return node_errorf(n->name, n->op, "the condition '%s' is computed from run-time data; only loops that run "
                                           "their whole trip count are supported", g->values[n->in[1]].name);
    *trips = cond ? (m > 0 ? m : 0) : 0;
    /* Nested loops multiply: the bound is on all the nodes unrolled in one graph. */
    if (*trips > SC_LOOP_MAX_TRIPS || s->unrolled + *trips * (body->n_nodes + 1) > SC_LOOP_MAX_NODES)
        return node_errorf(n->name, n->op, "%lld iterations of %d nodes: more than Scorch unrolls (%d iterations, %d "
                                           "nodes in all)", (long long)m, body->n_nodes, SC_LOOP_MAX_TRIPS,
                           SC_LOOP_MAX_NODES);
    s->unrolled += *trips * (body->n_nodes + 1);
    return SC_OK;
}

static void cond_record(lower_ctx *x, int v, int64_t iteration) {
    sc_control_state *s = x->s;
    if (x->st) return;
    if (s->n_conds == s->cap_conds) {
        int nc = s->cap_conds ? 2 * s->cap_conds : 64;
        sc_control_cond *p = realloc(s->conds, sizeof *p * (size_t)nc);
        if (!p) {
            x->st = sc_errorf("out of memory unrolling '%s'", x->base);
            return;
        }
        s->conds = p;
        s->cap_conds = nc;
    }
    s->conds[s->n_conds++] = (sc_control_cond){.value = v, .loop = x->base, .iteration = iteration};
}

static void loop_outputs(lower_ctx *x, const sc_node *n, const int *carried, int n_carried, int *const *scans,
                         int64_t trips) {
    for (int k = 0; k < n_carried && !x->st; k++) {
        if (n->out[k] < 0) continue;
        if (carried[k] < 0) x->st = node_errorf(n->name, n->op, "loop-carried value %d has no initial value", k);
        emit1(x, SC_OP_IDENTITY, "", &carried[k], 1, n->out[k], NULL);
    }
    int64_t zero = 0;
    int axes = n->n_out > n_carried && trips ? const_i64(x, "axes", &zero, 1) : -1;
    for (int k = n_carried; k < n->n_out && !x->st; k++) {
        if (n->out[k] < 0) continue;
        if (!trips) {
            x->st = node_errorf(n->name, n->op, "runs no iteration, so scan output %d has no shape", k - n_carried);
            break;
        }
        int *parts = scans[k - n_carried];
        for (int64_t t = 0; t < trips; t++) {
            int un[2] = {parts[t], axes};
            char what[64];
            snprintf(what, sizeof what, "scan%d/%lld", k - n_carried, (long long)t);
            parts[t] = emit1(x, SC_OP_UNSQUEEZE, what, un, 2, trips == 1 ? n->out[k] : -1, NULL);
        }
        sc_attrs a = {.axis = {.axis = 0}};
        if (trips > 1) emit1(x, SC_OP_CONCAT, "", parts, (int)trips, n->out[k], &a);
    }
}

static void lower_loop(lower_ctx *x, const sc_node *n) {
    int64_t trips;
    if ((x->st = loop_bounds(x->g, n, x->s, &trips))) return;
    const sc_graph *body = n->attrs->control.body[0];
    int n_carried = n->n_in - n->attrs->control.n_captures[0] - 2, n_scans = n->n_out - n_carried;
    copy_ctx c = {.prefix = NULL};
    if ((x->st = copy_ctx_init(&c, body))) return;
    int *carried = malloc(sizeof *carried * ((size_t)n_carried + 1));
    int **scans = calloc((size_t)n_scans + 1, sizeof *scans);
    if (!carried || !scans) x->st = sc_errorf("out of memory unrolling '%s'", n->name);
    for (int k = 0; !x->st && k < n_scans; k++)
        if (!(scans[k] = malloc(sizeof **scans * ((size_t)trips + 1)))) x->st = sc_errorf("out of memory");
    for (int k = 0; carried && k < n_carried; k++) carried[k] = n->in[2 + k];
    uint8_t one = 1;
    int cond = node_has_input(n, 1) ? n->in[1] : -1;
    for (int64_t t = 0; t < trips && !x->st; t++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "%lld", (long long)t);
        c.prefix = prefix;
        copy_ctx_reset(&c, n->in + n->n_in - body->n_captures);
        if (cond < 0) cond = const_of(x, "cond", SC_BOOL, 0, 1, &one);
        char what[48];
        snprintf(what, sizeof what, "%lld/iteration", (long long)t);
        c.map[body->inputs[0]] = const_of(x, what, SC_I64, 0, 1, &t);
        c.map[body->inputs[1]] = cond;
        for (int k = 0; k < n_carried; k++) c.map[body->inputs[2 + k]] = carried[k];
        copy_nodes(x, &c);
        cond = copy_value(x, &c, body->outputs[0]);
        cond_record(x, cond, t);
        for (int k = 0; k < n_carried; k++) carried[k] = copy_value(x, &c, body->outputs[1 + k]);
        for (int k = 0; k < n_scans; k++) scans[k][t] = copy_value(x, &c, body->outputs[1 + n_carried + k]);
    }
    if (!x->st) loop_outputs(x, n, carried, n_carried, scans, trips);
    for (int k = 0; scans && k < n_scans; k++) free(scans[k]);
    free(scans);
    free(carried);
    free(c.map);
}

static void lower_if(lower_ctx *x, const sc_node *n) {
    int64_t cond;
    if (!const_int(x->g, n->in[0], &cond)) {
        x->st = node_errorf(n->name, n->op, "the condition '%s' is computed from run-time data; Scorch inlines an If "
                                            "whose condition is a constant once dims are bound", x->g->values[n->in[0]].name);
        return;
    }
    int b = cond ? 0 : 1;
    const sc_graph *body = n->attrs->control.body[b];
    copy_ctx c = {.prefix = b ? "else" : "then"};
    if ((x->st = copy_ctx_init(&c, body))) return;
    copy_ctx_reset(&c, n->in + 1 + (b ? n->attrs->control.n_captures[0] : 0));
    copy_nodes(x, &c);
    for (int k = 0; k < n->n_out && !x->st; k++) {
        int v = copy_value(x, &c, body->outputs[k]);
        if (n->out[k] >= 0) emit1(x, SC_OP_IDENTITY, "", &v, 1, n->out[k], NULL);
    }
    free(c.map);
}

bool graph_is_control_node(const sc_graph *g, const sc_node *n) {
    if (sc_op_is_control(n->op)) return true;
    return n->op == SC_OP_IDENTITY && n->n_in > 0 && n->in[0] >= 0 && g->values[n->in[0]].is_sequence;
}

/* The sequence input 0 of a node that reads one, or NULL with x->st set when it is not known. */
static const sc_control_seq *seq_input(lower_ctx *x, const sc_node *n) {
    const sc_control_seq *s = seq_of(x->g, x->s, n->in[0]);
    if (!s) x->st = node_errorf(n->name, n->op, "input 0 ('%s') is not a sequence Scorch could follow (its length "
                                               "and positions must be constants)", x->g->values[n->in[0]].name);
    return s;
}

sc_status graph_lower_control_node(sc_graph *g, int i, sc_control_state *s) {
    sc_node n = g->nodes[i]; /* a copy: the node array grows below */
    lower_ctx x = {.g = g, .s = s, .base = n.name};
    const sc_control_seq *in = NULL;
    switch (n.op) {
    case SC_OP_LOOP: lower_loop(&x, &n); break;
    case SC_OP_IF: lower_if(&x, &n); break;
    case SC_OP_SEQUENCE_EMPTY:
    case SC_OP_SEQUENCE_CONSTRUCT: lower_seq_build(&x, &n, NULL); break;
    case SC_OP_SEQUENCE_INSERT:
    case SC_OP_SEQUENCE_ERASE:
    case SC_OP_IDENTITY:
        if ((in = seq_input(&x, &n))) lower_seq_build(&x, &n, in);
        break;
    case SC_OP_SEQUENCE_AT:
        if ((in = seq_input(&x, &n))) lower_seq_at(&x, &n, in);
        break;
    case SC_OP_SEQUENCE_LENGTH:
        if ((in = seq_input(&x, &n))) lower_seq_length(&x, &n, in);
        break;
    case SC_OP_SPLIT_TO_SEQUENCE: lower_split_to_sequence(&x, &n); break;
    case SC_OP_CONCAT_FROM_SEQUENCE:
        if ((in = seq_input(&x, &n))) lower_concat_from_sequence(&x, &n, in);
        break;
    default: break;
    }
    return x.st;
}

sc_status graph_control_check(const sc_graph *g, const sc_control_state *s) {
    for (int k = 0; k < s->n_conds; k++) {
        int64_t v;
        if (!const_int(g, s->conds[k].value, &v))
            return sc_errorf("node '%s' (Loop): the condition of iteration %lld is computed from run-time data; only "
                             "loops that run their whole trip count are supported", s->conds[k].loop,
                             (long long)s->conds[k].iteration);
        bool last = k + 1 == s->n_conds || s->conds[k + 1].loop != s->conds[k].loop;
        if (!v && !last)
            return sc_errorf("node '%s' (Loop): stops at iteration %lld, before its trip count; loops that exit early "
                             "are not supported", s->conds[k].loop, (long long)s->conds[k].iteration);
    }
    return SC_OK;
}

void graph_control_state_free(sc_control_state *s) {
    free(s->seqs);
    free(s->conds);
    memset(s, 0, sizeof *s);
}
