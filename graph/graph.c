/* Graph construction, name lookup, linking and topological order. */
#include "graph/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void graph_init(sc_graph *g) {
    memset(g, 0, sizeof *g);
    sc_arena_init(&g->arena);
    sc_strmap_init(&g->by_name);
}

void graph_free(sc_graph *g) {
    free(g->values);
    free(g->nodes);
    free(g->link_pool);
    free(g->link_scratch);
    sc_strmap_free(&g->by_name);
    sc_arena_free_all(&g->arena);
    memset(g, 0, sizeof *g);
}

/* The room beyond the count is not cleared: graph_add_value / graph_add_node clear each entry they
 * add, and clearing ahead would touch (fault in) up to half a doubled 2.4 GB array never used. */
static bool grow_array(void **arr, int *cap, size_t elem, int need) {
    if (need <= *cap) return true;
    int nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p) return false;
    *arr = p;
    *cap = nc;
    return true;
}

/* The name is checked and entered with one map probe (13M names in a training graph at depth
 * 250000); a duplicate leaves only its arena copy behind. */
int graph_add_value(sc_graph *g, const char *name, sc_value_kind kind, const sc_desc *desc, sc_status *st) {
    if (!grow_array((void **)&g->values, &g->cap_values, sizeof(sc_value), g->n_values + 1)) {
        *st = sc_errorf("out of memory adding value '%s'", name);
        return -1;
    }
    sc_value *v = &g->values[g->n_values];
    memset(v, 0, sizeof *v);
    v->name = sc_arena_strdup(&g->arena, name);
    int had = v->name ? sc_strmap_put_new(&g->by_name, v->name, g->n_values) : -2;
    if (had >= 0) {
        *st = sc_errorf("value '%s' is defined twice", name);
        return -1;
    }
    if (had == -2) {
        *st = sc_errorf("out of memory adding value '%s'", name);
        return -1;
    }
    v->kind = kind;
    if (desc) v->desc = *desc;
    v->producer = -1;
    return g->n_values++;
}

int graph_add_node(sc_graph *g, sc_op op, const char *name, const int *in, int n_in, const int *out,
                   int n_out, sc_status *st) {
    if (!grow_array((void **)&g->nodes, &g->cap_nodes, sizeof(sc_node), g->n_nodes + 1)) {
        *st = sc_errorf("out of memory adding node '%s'", name ? name : "");
        return -1;
    }
    sc_node *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->name = sc_arena_strdup(&g->arena, name ? name : "");
    /* One block for both lists, int-aligned (64-byte padding per list doubled the arena). */
    n->in = sc_arena_alloc_aligned(&g->arena, sizeof(int) * (size_t)(n_in + n_out + 1), _Alignof(int));
    n->out = n->in ? n->in + n_in : NULL;
    if (!n->name || !n->in || !n->out) {
        *st = sc_errorf("out of memory adding node '%s'", name ? name : "");
        return -1;
    }
    if (n_in) memcpy(n->in, in, sizeof(int) * (size_t)n_in);
    if (n_out) memcpy(n->out, out, sizeof(int) * (size_t)n_out);
    n->n_in = n_in;
    n->n_out = n_out;
    return g->n_nodes++;
}

int graph_find_value(const sc_graph *g, const char *name) { return sc_strmap_get(&g->by_name, name); }

sc_status graph_set_dim_name(sc_graph *g, int value_id, int d, const char *name) {
    sc_value *v = &g->values[value_id];
    if (!name) {
        if (v->dim_names) v->dim_names[d] = NULL;
        return SC_OK;
    }
    if (!v->dim_names) v->dim_names = sc_arena_alloc_array(&g->arena, SC_MAX_RANK, sizeof *v->dim_names);
    const char *copy = v->dim_names ? sc_arena_strdup(&g->arena, name) : NULL;
    if (!copy) return sc_errorf("out of memory naming dim %d of '%s'", d, v->name);
    v->dim_names[d] = copy;
    return SC_OK;
}

const char *graph_unique_name(sc_graph *g, const char *base) {
    if (sc_strmap_get(&g->by_name, base) < 0) return sc_arena_strdup(&g->arena, base);
    size_t len = strlen(base) + 24;
    char *buf = sc_arena_alloc(&g->arena, len);
    if (!buf) return NULL;
    for (long k = 1;; k++) {
        snprintf(buf, len, "%s_%ld", base, k);
        if (sc_strmap_get(&g->by_name, buf) < 0) return buf;
    }
}

sc_status graph_alloc_data(sc_graph *g, int value_id) {
    sc_value *v = &g->values[value_id];
    int64_t bytes = sc_desc_bytes(&v->desc);
    if (bytes < 0) return sc_errorf("value '%s' has no static size to allocate", v->name);
    v->data = sc_arena_alloc(&g->arena, (size_t)bytes);
    if (!v->data) return sc_errorf("out of memory allocating %lld bytes for '%s'", (long long)bytes, v->name);
    return SC_OK;
}

/* Grows *buf to at least need bytes (contents not kept); false when out of memory. */
static bool reserve(void **buf, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    void *p = realloc(*buf, need);
    if (!p) return false;
    *buf = p;
    *cap = need;
    return true;
}

/* Memory traffic is the cost at 13M values of 128 bytes: the node walks write producers and
 * consumer lists into side arrays (producer ids, write cursors into one pool) and the values are
 * then visited once, in order. Consumer lists stay in node order. One block holds every list, owned
 * by the graph and reused by the next link together with the working arrays: per-value arena blocks
 * cost 64 bytes each, and fresh arrays per link are pages faulted in again (about 10 links build a
 * training graph). */
sc_status graph_link(sc_graph *g) {
    size_t nv = (size_t)g->n_values + 1;
    if (!reserve(&g->link_scratch, &g->link_scratch_bytes, nv * (sizeof(size_t) + 2 * sizeof(int))))
        return sc_errorf("out of memory linking the graph");
    size_t *cur = g->link_scratch;
    int *counts = (int *)(cur + nv), *prod = counts + nv;
    memset(counts, 0, nv * sizeof(int));
    for (int v = 0; v < g->n_values; v++) prod[v] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const sc_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) counts[n->in[k]]++;
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0) prod[n->out[k]] = i;
    }
    size_t total = 0;
    for (int v = 0; v < g->n_values; v++) cur[v] = total, total += (size_t)counts[v];
    size_t pool_bytes = g->link_pool_cap * sizeof(int);
    if (!reserve((void **)&g->link_pool, &pool_bytes, (total + 1) * sizeof(int)))
        return sc_errorf("out of memory linking the graph");
    g->link_pool_cap = pool_bytes / sizeof(int);
    int *pool = g->link_pool;
    for (int i = 0; i < g->n_nodes; i++) {
        const sc_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) pool[cur[n->in[k]]++] = i;
    }
    for (int v = 0; v < g->n_values; v++) {
        sc_value *val = &g->values[v];
        val->producer = prod[v];
        val->n_consumers = counts[v];
        val->consumers = counts[v] ? pool + (cur[v] - (size_t)counts[v]) : NULL;
    }
    return SC_OK;
}

bool graph_is_topo_sorted(const sc_graph *g, int *first_bad_node) {
    char *ready = calloc((size_t)g->n_values + 1, 1);
    if (!ready) return false;
    for (int v = 0; v < g->n_values; v++) {
        sc_value_kind k = g->values[v].kind;
        ready[v] = k == SC_VALUE_INPUT || k == SC_VALUE_PARAM || k == SC_VALUE_CONST ||
                   (k == SC_VALUE_OPT_STATE && g->values[v].producer < 0);
    }
    bool ok = true;
    for (int i = 0; i < g->n_nodes && ok; i++) {
        const sc_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && !ready[n->in[k]]) {
                ok = false;
                if (first_bad_node) *first_bad_node = i;
                break;
            }
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0) ready[n->out[k]] = 1;
    }
    free(ready);
    return ok;
}

/* Kahn's algorithm with a FIFO of ready nodes seeded in index order, so an already sorted graph
 * keeps its order. Nodes left over sit on a cycle (or depend on one). */
sc_status graph_topo_sort(sc_graph *g) {
    SC_TRY(graph_link(g));
    int n = g->n_nodes;
    int *pending = calloc((size_t)n + 1, sizeof(int));
    int *queue = malloc(sizeof(int) * ((size_t)n + 1));
    sc_node *sorted = malloc(sizeof(sc_node) * ((size_t)n + 1));
    if (!pending || !queue || !sorted) {
        free(pending);
        free(queue);
        free(sorted);
        return sc_errorf("out of memory sorting the graph");
    }
    int head = 0, tail = 0;
    for (int i = 0; i < n; i++) {
        const sc_node *nd = &g->nodes[i];
        for (int k = 0; k < nd->n_in; k++)
            if (nd->in[k] >= 0 && g->values[nd->in[k]].producer >= 0) pending[i]++;
        if (!pending[i]) queue[tail++] = i;
    }
    while (head < tail) {
        int i = queue[head++];
        sorted[head - 1] = g->nodes[i];
        const sc_node *nd = &g->nodes[i];
        for (int k = 0; k < nd->n_out; k++) {
            if (nd->out[k] < 0) continue;
            const sc_value *v = &g->values[nd->out[k]];
            for (int c = 0; c < v->n_consumers; c++)
                if (--pending[v->consumers[c]] == 0) queue[tail++] = v->consumers[c];
        }
    }
    sc_status st = SC_OK;
    bool moved = false; /* an unchanged order keeps the links just made */
    for (int i = 0; i < tail && !moved; i++) moved = queue[i] != i;
    if (tail < n) {
        int bad = 0;
        while (bad < n && pending[bad] == 0) bad++;
        st = sc_errorf("node '%s' (%s) is on a cycle or depends on one", g->nodes[bad].name,
                       sc_op_name(g->nodes[bad].op));
    } else if (n > 0 && moved) {
        memcpy(g->nodes, sorted, sizeof(sc_node) * (size_t)n);
    }
    free(pending);
    free(queue);
    free(sorted);
    if (st || !moved) return st;
    return graph_link(g);
}
