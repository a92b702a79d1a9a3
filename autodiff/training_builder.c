/* The node builder of the training graph (train_internal.h), shared by training.c, loss.c and
 * optimizer.c: nodes and values appended with sticky errors, so a builder stops at its first
 * failure and reports it once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/train_internal.h"
#include "core/free_all.h"
#include "graph/shape.h"

int tb_fail(tb_builder *b, sc_status st) {
    if (!b->st) b->st = st;
    else sc_status_free(st);
    return -1;
}

int tb_emit(tb_builder *b, sc_op op, const char *name, const int *in, int n_in, int n_out, int *out,
            const sc_attrs *attrs, sc_value_kind kind) {
    if (b->st) return -1;
    sc_graph *g = b->g;
    for (int i = 0; i < n_in; i++)
        if (in[i] < -1 || in[i] >= g->n_values) return tb_fail(b, sc_errorf("%s: input %d is not a value", name, i));
    int ids[8];
    SC_ASSERT(n_out >= 1 && n_out <= 8);
    for (int k = 0; k < n_out; k++) {
        if (out && out[k] == TB_OMIT && k > 0) {
            ids[k] = -1;
            continue;
        }
        char buf[512];
        if (k == 0) snprintf(buf, sizeof buf, "%s", name);
        else snprintf(buf, sizeof buf, "%s_out%d", name, k);
        sc_status st = SC_OK;
        ids[k] = graph_add_value_unique(g, buf, kind, NULL, &st);
        if (ids[k] < 0) return tb_fail(b, st);
    }
    sc_status st = SC_OK;
    int node = graph_add_node(g, op, name, in, n_in, ids, n_out, &st);
    if (node < 0) return tb_fail(b, st);
    sc_node *n = &g->nodes[node];
    if (attrs && (st = graph_node_set_attrs(g, n, attrs))) return tb_fail(b, st);
    for (int k = 0; k < n_out; k++)
        if (ids[k] >= 0) g->values[ids[k]].producer = node;
    if (!sc_shape_fns[op]) return tb_fail(b, sc_errorf("node '%s': op %s has no shape function", name, sc_op_name(op)));
    st = sc_shape_fns[op](g, n);
    if (st) return tb_fail(b, st);
    if (out)
        for (int k = 0; k < n_out; k++) out[k] = ids[k];
    return ids[0];
}

int tb_const(tb_builder *b, const char *name, const sc_desc *desc, const void *data) {
    if (b->st) return -1;
    sc_status st = SC_OK;
    int v = graph_add_value_unique(b->g, name, SC_VALUE_CONST, desc, &st);
    if (v < 0) return tb_fail(b, st);
    st = graph_alloc_data(b->g, v);
    if (st) return tb_fail(b, st);
    memcpy(b->g->values[v].data, data, (size_t)sc_desc_bytes(desc));
    return v;
}

int tb_const_scalar(tb_builder *b, const char *name, sc_dtype dtype, double v) {
    sc_desc d = sc_desc_make(dtype, 0, NULL);
    union { float f; double d; int64_t i; int32_t i32; uint8_t u8; } u = {0};
    switch (dtype) {
    case SC_F32: u.f = (float)v; break;
    case SC_F64: u.d = v; break;
    case SC_I64: u.i = (int64_t)v; break;
    case SC_I32: u.i32 = (int32_t)v; break;
    case SC_BOOL: u.u8 = v != 0; break;
    default: return tb_fail(b, sc_errorf("%s: scalar constants of dtype %s are not supported", name, sc_dtype_name(dtype)));
    }
    return tb_const(b, name, &d, &u);
}

static int *ids_append(tb_builder *b, const int *ids, int n, int v) {
    int *p = sc_arena_alloc_array(&b->g->arena, (size_t)n + 1, sizeof(int));
    if (!p) {
        tb_fail(b, sc_errorf("out of memory growing an id list"));
        return NULL;
    }
    if (n) memcpy(p, ids, sizeof(int) * (size_t)n);
    p[n] = v;
    return p;
}

int tb_input(tb_builder *b, const char *name, const sc_desc *desc) {
    if (b->st) return -1;
    if (graph_find_value(b->g, name) >= 0)
        return tb_fail(b, sc_errorf("cannot add graph input '%s': the model already has a value of that name", name));
    sc_status st = SC_OK;
    int v = graph_add_value(b->g, name, SC_VALUE_INPUT, desc, &st);
    if (v < 0) return tb_fail(b, st);
    int *p = ids_append(b, b->g->inputs, b->g->n_inputs, v);
    if (!p) return -1;
    b->g->inputs = p;
    b->g->n_inputs++;
    return v;
}

/* A training graph of a 250,000-block ResNet gains about a million outputs (batch-norm running
 * statistics, kept gradients), so the list grows by doubling and membership is the value's flag,
 * not a scan: appending stays O(1) amortised. */
void tb_output(tb_builder *b, int v) {
    sc_graph *g = b->g;
    if (b->st || v < 0 || g->values[v].is_output) return;
    if (g->n_outputs >= g->cap_outputs) {
        int cap = g->n_outputs < 16 ? 32 : 2 * g->n_outputs;
        int *p = sc_arena_alloc_array(&g->arena, (size_t)cap, sizeof(int));
        if (!p) {
            tb_fail(b, sc_errorf("out of memory growing the graph's output list"));
            return;
        }
        if (g->n_outputs) memcpy(p, g->outputs, sizeof(int) * (size_t)g->n_outputs);
        g->outputs = p;
        g->cap_outputs = cap;
    }
    g->outputs[g->n_outputs++] = v;
    g->values[v].is_output = true;
}

static int *ids_copy(tb_builder *b, const int *ids, int n) {
    int *p = sc_arena_alloc_aligned(&b->g->arena, sizeof(int) * (size_t)(n ? n : 1), _Alignof(int));
    if (!p) {
        tb_fail(b, sc_errorf("out of memory copying an id list"));
        return NULL;
    }
    if (n) memcpy(p, ids, sizeof(int) * (size_t)n);
    return p;
}

void tb_node_set_inputs(tb_builder *b, int node, const int *ids, int n) {
    int *p = ids_copy(b, ids, n);
    if (!p) return;
    b->g->nodes[node].in = p;
    b->g->nodes[node].n_in = n;
}

void tb_node_set_outputs(tb_builder *b, int node, const int *ids, int n) {
    int *p = ids_copy(b, ids, n);
    if (!p) return;
    b->g->nodes[node].out = p;
    b->g->nodes[node].n_out = n;
}

/* nodes[i] = old nodes[src[i]] for every i, in place by following the permutation's cycles (a
 * copy of the node array would be another GB to fault in at depth 250000). src is consumed. */
static void nodes_permute(sc_node *nodes, int *src, int n) {
    for (int i = 0; i < n; i++) {
        if (src[i] == i) continue;
        sc_node held = nodes[i];
        int j = i;
        while (src[j] != i) {
            int k = src[j];
            nodes[j] = nodes[k];
            src[j] = j;
            j = k;
        }
        nodes[j] = held;
        src[j] = j;
    }
}

/* A counting sort by position (positions lie in [-1, first)): a deep ResNet has ~10^6 updates whose
 * positions come in descending order, which an insertion sort would make quadratic. */
sc_status tb_place_new_nodes(sc_graph *g, int first, const int *pos) {
    int n = g->n_nodes, n_upd = n - first;
    int *src = malloc(sizeof(int) * (size_t)n); /* new position -> old node id */
    int *order = malloc(sizeof(int) * ((size_t)n_upd + 1));
    int *start = calloc((size_t)first + 2, sizeof(int)); /* bucket of position p is p + 1 */
    if (!src || !order || !start) {
        SC_FREE_ALL(src, order, start);
        return sc_errorf("out of memory placing new nodes");
    }
    for (int k = 0; k < n_upd; k++) {
        SC_ASSERT(pos[k] >= -1 && pos[k] < first);
        start[pos[k] + 2]++;
    }
    for (int p = 1; p <= first + 1; p++) start[p] += start[p - 1];
    for (int k = 0; k < n_upd; k++) order[start[pos[k] + 1]++] = k; /* start[p+1] ends as bucket p+1's start */
    int at = 0, u = 0;
    while (u < n_upd && pos[order[u]] < 0) src[at++] = first + order[u++];
    for (int i = 0; i < first; i++) {
        src[at++] = i;
        while (u < n_upd && pos[order[u]] == i) src[at++] = first + order[u++];
    }
    SC_ASSERT(at == n && u == n_upd);
    nodes_permute(g->nodes, src, n);
    SC_FREE_ALL(src, order, start);
    return graph_link(g);
}
