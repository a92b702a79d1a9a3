/* Reuse distances of a repeated training step (contract in reuse.h): a Fenwick tree over touch
 * times holds each storage's bytes at its last touch, so the distinct bytes touched after time t
 * and before now is a prefix-sum difference, O(log n) per read. */
#include <stdlib.h>
#include <string.h>

#include "schedule/reuse.h"
#include "schedule/sched_internal.h"

typedef struct {
    int n;
    int64_t *sum; /* 1-based */
} fenwick;

static void fenwick_add(fenwick *f, int at, int64_t bytes) {
    for (; at <= f->n; at += at & -at) f->sum[at] += bytes;
}

static int64_t fenwick_prefix(const fenwick *f, int at) {
    int64_t s = 0;
    for (; at > 0; at -= at & -at) s += f->sum[at];
    return s;
}

/* root[v]: the value whose storage v is (views and in-place outputs are their input's). */
static void storage_roots(const sc_graph *g, int *root) {
    for (int v = 0; v < g->n_values; v++) root[v] = v;
    for (int i = 0; i < g->n_nodes; i++) {
        const sc_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_out; k++) {
            if (n->out[k] < 0) continue;
            int a = k == 0 && sc_op_is_view(n->op) && n->n_in > 0 ? n->in[0] : sched_alias_input(n, k);
            if (a >= 0) root[n->out[k]] = root[a];
        }
    }
}

/* The node's distinct storages: its inputs', then its outputs' not among them. */
static int node_storages(const sc_node *n, const int *root, int *s) {
    int m = 0;
    for (int pass = 0; pass < 2; pass++) {
        const int *v = pass ? n->out : n->in;
        int count = pass ? n->n_out : n->n_in;
        for (int k = 0; k < count; k++) {
            if (v[k] < 0) continue;
            int r = root[v[k]], j = 0;
            while (j < m && s[j] != r) j++;
            if (j == m) s[m++] = r;
        }
    }
    return m;
}

typedef struct {
    const sc_graph *g;
    const int *root;
    int *last; /* per storage: the time of its last touch, 0 for none */
    int64_t *bytes;
    int *scratch; /* a node's storages: n_in + n_out of the widest node */
    fenwick f;
} reuse_walk;

/* Node i at time t: the share of its operand bytes that miss (when cold != NULL), then its touches. */
static void walk_node(reuse_walk *w, int i, int t, int64_t cache_bytes, double *cold) {
    const sc_node *n = &w->g->nodes[i];
    int *s = w->scratch;
    int m = node_storages(n, w->root, s);
    int64_t miss = 0, total = 0;
    for (int k = 0; k < m; k++) {
        int64_t b = w->bytes[s[k]];
        int64_t dist = w->last[s[k]] ? fenwick_prefix(&w->f, t - 1) - fenwick_prefix(&w->f, w->last[s[k]]) : -1;
        total += b;
        if (dist < 0 || dist + b > cache_bytes) miss += b;
    }
    if (cold) *cold = total > 0 ? (double)miss / (double)total : 0;
    for (int k = 0; k < m; k++) {
        if (w->last[s[k]]) fenwick_add(&w->f, w->last[s[k]], -w->bytes[s[k]]);
        fenwick_add(&w->f, t, w->bytes[s[k]]);
        w->last[s[k]] = t;
    }
}

sc_status sc_reuse_cold_share(const sc_graph *g, int64_t cache_bytes, double *cold) {
    int nv = g->n_values, nn = g->n_nodes;
    reuse_walk w = {.g = g, .f = {.n = 2 * nn}};
    int widest = 1;
    for (int i = 0; i < nn; i++)
        if (g->nodes[i].n_in + g->nodes[i].n_out > widest) widest = g->nodes[i].n_in + g->nodes[i].n_out;
    w.scratch = malloc(sizeof(int) * (size_t)widest);
    int *root = malloc(sizeof(int) * ((size_t)nv + 1));
    w.last = calloc((size_t)nv + 1, sizeof(int));
    w.bytes = malloc(sizeof(int64_t) * ((size_t)nv + 1));
    w.f.sum = calloc((size_t)w.f.n + 1, sizeof(int64_t));
    sc_status st = root && w.last && w.bytes && w.f.sum && w.scratch ? SC_OK : sc_errorf("out of memory finding reuse distances");
    if (!st) {
        w.root = root;
        storage_roots(g, root);
        for (int v = 0; v < nv; v++) w.bytes[v] = sched_data_bytes(g, v);
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < nn; i++) {
                bool view = sc_op_is_view(g->nodes[i].op);
                if (pass && view) cold[i] = 0;
                if (!view) walk_node(&w, i, pass * nn + i + 1, cache_bytes, pass ? &cold[i] : NULL);
            }
    }
    free(root);
    free(w.last);
    free(w.bytes);
    free(w.f.sum);
    free(w.scratch);
    return st;
}
