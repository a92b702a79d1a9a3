/* Graph construction, name lookup, linking and topological order. */
#include "graph/graph.h"

#include "core/free_all.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void graph_init(sc_graph *g) {
    memset(g, 0, sizeof *g);
    sc_arena_init(&g->arena);
    sc_strmap_init(&g->by_name);
}

void graph_free(sc_graph *g) {
    for (int i = 0; i < g->n_subgraphs; i++) {
        graph_free(g->subgraphs[i]);
        free(g->subgraphs[i]);
    }
    SC_FREE_ALL(g->values, g->nodes, g->link_pool, g->link_scratch, g->attrs_set, g->subgraphs);
    sc_strmap_free(&g->by_name);
    sc_arena_free_all(&g->arena);
    memset(g, 0, sizeof *g);
}

sc_status graph_own_subgraph(sc_graph *g, sc_graph *sub) {
    if (g->n_subgraphs == g->cap_subgraphs) {
        int nc = g->cap_subgraphs ? 2 * g->cap_subgraphs : 8;
        sc_graph **p = realloc(g->subgraphs, sizeof *p * (size_t)nc);
        if (!p) {
            graph_free(sub);
            free(sub);
            return sc_errorf("out of memory keeping a subgraph");
        }
        g->subgraphs = p;
        g->cap_subgraphs = nc;
    }
    g->subgraphs[g->n_subgraphs++] = sub;
    return SC_OK;
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

/* Appends a value whose name is in the arena already. Unless pending, the name is checked and
 * entered with one map probe (a duplicate leaves only its arena copy behind). */
static int value_append(sc_graph *g, const char *name, bool pending, sc_value_kind kind, const sc_desc *desc,
                        sc_status *st) {
    if (!grow_array((void **)&g->values, &g->cap_values, sizeof(sc_value), g->n_values + 1)) {
        *st = sc_errorf("out of memory adding value '%s'", name);
        return -1;
    }
    int had = pending ? -1 : sc_strmap_put_new(&g->by_name, name, g->n_values);
    if (had >= 0) {
        *st = sc_errorf("value '%s' is defined twice", name);
        return -1;
    }
    if (had == -2) {
        *st = sc_errorf("out of memory adding value '%s'", name);
        return -1;
    }
    sc_value *v = &g->values[g->n_values];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->name_pending = pending;
    v->kind = kind;
    if (desc) v->desc = *desc;
    v->producer = -1;
    return g->n_values++;
}

int graph_add_value(sc_graph *g, const char *name, sc_value_kind kind, const sc_desc *desc, sc_status *st) {
    const char *copy = sc_arena_strdup(&g->arena, name);
    if (!copy) {
        *st = sc_errorf("out of memory adding value '%s'", name);
        return -1;
    }
    return value_append(g, copy, false, kind, desc, st);
}

int graph_add_value_unique(sc_graph *g, const char *base, sc_value_kind kind, const sc_desc *desc, sc_status *st) {
    bool defer = g->names_deferred > 0;
    const char *name = defer ? sc_arena_strdup(&g->arena, base) : graph_unique_name(g, base);
    if (!name) {
        *st = sc_errorf("out of memory naming '%s'", base);
        return -1;
    }
    return value_append(g, name, defer, kind, desc, st);
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
    n->attrs = &sc_attrs_none;
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

const sc_attrs sc_attrs_none;

/* A word at a time (millions of nodes get attributes while autodiff builds a deep model). */
static uint64_t attrs_hash(const sc_attrs *a) {
    const unsigned char *p = (const unsigned char *)a;
    uint64_t h = 0x9e3779b97f4a7c15ull;
    size_t i = 0;
    for (; i + 8 <= sizeof *a; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    for (; i < sizeof *a; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static bool attrs_grow(sc_graph *g) {
    size_t cap = g->attrs_cap ? 2 * g->attrs_cap : 64;
    const sc_attrs **set = calloc(cap, sizeof *set);
    if (!set) return false;
    for (size_t i = 0; i < g->attrs_cap; i++) {
        if (!g->attrs_set[i]) continue;
        size_t j = attrs_hash(g->attrs_set[i]) & (cap - 1);
        while (set[j]) j = (j + 1) & (cap - 1);
        set[j] = g->attrs_set[i];
    }
    free(g->attrs_set);
    g->attrs_set = set;
    g->attrs_cap = cap;
    return true;
}

/* Compared bytewise, padding included: attributes built alike (zeroed, then filled) share one copy;
 * others only cost a copy each. */
const sc_attrs *graph_attrs_intern(sc_graph *g, const sc_attrs *a) {
    if (!memcmp(a, &sc_attrs_none, sizeof *a)) return &sc_attrs_none;
    if ((g->attrs_count + 1) * 2 > g->attrs_cap && !attrs_grow(g)) return NULL;
    size_t i = attrs_hash(a) & (g->attrs_cap - 1);
    for (; g->attrs_set[i]; i = (i + 1) & (g->attrs_cap - 1))
        if (!memcmp(g->attrs_set[i], a, sizeof *a)) return g->attrs_set[i];
    sc_attrs *copy = sc_arena_alloc_aligned(&g->arena, sizeof *copy, _Alignof(sc_attrs));
    if (!copy) return NULL;
    *copy = *a;
    g->attrs_set[i] = copy;
    g->attrs_count++;
    return copy;
}

sc_status graph_node_set_attrs(sc_graph *g, sc_node *n, const sc_attrs *a) {
    const sc_attrs *p = graph_attrs_intern(g, a);
    if (!p) return sc_errorf("out of memory setting the attributes of node '%s'", n->name);
    n->attrs = p;
    return SC_OK;
}

sc_attrs *graph_node_attrs_mut(sc_graph *g, sc_node *n) {
    sc_attrs *copy = sc_arena_alloc_aligned(&g->arena, sizeof *copy, _Alignof(sc_attrs));
    if (!copy) return NULL;
    *copy = *n->attrs;
    n->attrs = copy;
    return copy;
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

/* The old name is unmapped only when it is this value's (a pending value clashed with another's);
 * the producing node, when it carries the value's name, is renamed with it. */
sc_status graph_value_rename_unique(sc_graph *g, int id) {
    sc_value *v = &g->values[id];
    const char *old = v->name, *name = graph_unique_name(g, old);
    if (!name) return sc_errorf("out of memory renaming '%s'", old);
    if (sc_strmap_get(&g->by_name, old) == id) sc_strmap_remove(&g->by_name, old);
    if (sc_strmap_put_new(&g->by_name, name, id) == -2) return sc_errorf("out of memory renaming '%s'", old);
    if (v->producer >= 0 && !strcmp(g->nodes[v->producer].name, old)) g->nodes[v->producer].name = name;
    v->name = name;
    return SC_OK;
}

void graph_names_defer(sc_graph *g) {
    if (g->names_deferred++ == 0) g->first_pending = g->n_values;
}

typedef struct {
    unsigned hash;
    int id;
} pending_name;

/* Stable LSD radix sort of a[0..n) by home slot (hash & mask), 11 bits a pass; tmp holds n. */
static pending_name *sort_by_home(pending_name *a, pending_name *tmp, int n, unsigned mask) {
    enum { BITS = 11, BUCKETS = 1 << BITS };
    for (int shift = 0; shift < 32 && (mask >> shift); shift += BITS) {
        int count[BUCKETS + 1] = {0};
        for (int i = 0; i < n; i++) count[(((a[i].hash & mask) >> shift) & (BUCKETS - 1)) + 1]++;
        for (int b = 0; b < BUCKETS; b++) count[b + 1] += count[b];
        for (int i = 0; i < n; i++) tmp[count[((a[i].hash & mask) >> shift) & (BUCKETS - 1)]++] = a[i];
        pending_name *t = a;
        a = tmp;
        tmp = t;
    }
    return a;
}

static int cmp_int(const void *a, const void *b) { return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b); }

/* Enters the pending names in home-slot order: consecutive inserts probe neighbouring slots, so the
 * map is walked about once instead of missed per name. Pending values with the same name arrive in
 * id order (the sort is stable), so the earliest keeps it, as with checks one by one. */
static sc_status names_enter(sc_graph *g, pending_name *keys, pending_name *tmp, int n, int *clash) {
    sc_strmap *m = &g->by_name;
    if (!sc_strmap_reserve(m, m->count + (size_t)n)) return sc_errorf("out of memory entering %d value names", n);
    pending_name *sorted = sort_by_home(keys, tmp, n, (unsigned)(m->cap - 1));
    int n_clash = 0;
    for (int i = 0; i < n; i++) {
        int had = sc_strmap_put_new_hashed(m, g->values[sorted[i].id].name, sorted[i].hash, sorted[i].id);
        if (had == -2) return sc_errorf("out of memory entering %d value names", n);
        if (had >= 0) clash[n_clash++] = sorted[i].id;
    }
    qsort(clash, (size_t)n_clash, sizeof *clash, cmp_int);
    for (int i = 0; i < n_clash; i++) SC_TRY(graph_value_rename_unique(g, clash[i]));
    return SC_OK;
}

sc_status graph_names_resolve(sc_graph *g) {
    SC_ASSERT(g->names_deferred > 0);
    if (--g->names_deferred > 0) return SC_OK;
    int n = 0;
    for (int v = g->first_pending; v < g->n_values; v++) n += g->values[v].name_pending;
    if (!n) return SC_OK;
    pending_name *keys = malloc(sizeof *keys * 2 * (size_t)n);
    int *clash = malloc(sizeof *clash * (size_t)n);
    sc_status st = keys && clash ? SC_OK : sc_errorf("out of memory entering %d value names", n);
    if (!st) {
        int k = 0;
        for (int v = g->first_pending; v < g->n_values; v++)
            if (g->values[v].name_pending) keys[k++] = (pending_name){sc_strmap_hash(g->values[v].name), v};
        st = names_enter(g, keys, keys + n, n, clash);
    }
    for (int v = g->first_pending; v < g->n_values; v++) g->values[v].name_pending = false;
    free(keys);
    free(clash);
    return st;
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

sc_status graph_remove_node(sc_graph *g, int i) {
    memmove(&g->nodes[i], &g->nodes[i + 1], sizeof *g->nodes * (size_t)(g->n_nodes - i - 1));
    g->n_nodes--;
    return graph_link(g);
}

sc_status graph_compact_nodes(sc_graph *g, const bool *keep) {
    int j = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (keep[i]) g->nodes[j++] = g->nodes[i];
    g->n_nodes = j;
    return graph_link(g);
}

sc_status graph_place_appended(sc_graph *g, int n0) {
    int n = g->n_nodes;
    if (n0 >= n) return graph_link(g);
    int *reader = malloc(sizeof(int) * ((size_t)g->n_values + 1)); /* per value: its first reader < n0 */
    int *at = malloc(sizeof(int) * ((size_t)(n - n0) + 1));        /* per appended node: where it goes */
    sc_node *order = malloc(sizeof(sc_node) * ((size_t)n + 1));
    if (!reader || !at || !order) {
        SC_FREE_ALL(reader, at, order);
        return sc_errorf("out of memory placing nodes");
    }
    for (int v = 0; v < g->n_values; v++) reader[v] = n0;
    for (int j = n0 - 1; j >= 0; j--)
        for (int k = 0; k < g->nodes[j].n_in; k++)
            if (g->nodes[j].in[k] >= 0) reader[g->nodes[j].in[k]] = j;
    for (int m = n0; m < n; m++) {
        at[m - n0] = n0;
        for (int k = 0; k < g->nodes[m].n_out; k++)
            if (g->nodes[m].out[k] >= 0 && reader[g->nodes[m].out[k]] < at[m - n0]) at[m - n0] = reader[g->nodes[m].out[k]];
    }
    int put = 0;
    for (int j = 0; j <= n0; j++) {
        for (int m = n0; m < n; m++)
            if (at[m - n0] == j) order[put++] = g->nodes[m];
        if (j < n0) order[put++] = g->nodes[j];
    }
    memcpy(g->nodes, order, sizeof(sc_node) * (size_t)n);
    SC_FREE_ALL(reader, at, order);
    return graph_link(g);
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
        SC_FREE_ALL(pending, queue, sorted);
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
    SC_FREE_ALL(pending, queue, sorted);
    if (st || !moved) return st;
    return graph_link(g);
}

/* Ops an exporter puts between token ids and their embedding Gather without changing the ids. */
static bool passes_ids(const sc_node *n, int v) {
    switch (n->op) {
    case SC_OP_RESHAPE:
    case SC_OP_SQUEEZE:
    case SC_OP_UNSQUEEZE: return n->in[0] == v;
    case SC_OP_CAST:
    case SC_OP_FLATTEN:
    case SC_OP_IDENTITY: return true;
    default: return false;
    }
}

static int64_t gather_rows_from(const sc_graph *g, int v, int depth) {
    const sc_value *x = &g->values[v];
    for (int i = 0; i < x->n_consumers; i++) {
        const sc_node *n = &g->nodes[x->consumers[i]];
        if (n->op == SC_OP_GATHER && n->n_in == 2 && n->in[1] == v && n->in[0] >= 0) {
            const sc_desc *d = graph_in_desc(g, n, 0);
            if (d->rank >= 1 && d->dims[0] > 0) return d->dims[0];
        }
    }
    for (int i = 0; depth < 4 && i < x->n_consumers; i++) {
        const sc_node *n = &g->nodes[x->consumers[i]];
        int64_t rows = n->n_out >= 1 && n->out[0] >= 0 && passes_ids(n, v) ? gather_rows_from(g, n->out[0], depth + 1) : 0;
        if (rows) return rows;
    }
    return 0;
}

int64_t graph_gather_rows(const sc_graph *g, int v) { return gather_rows_from(g, v, 0); }

bool graph_node_sinks(const sc_graph *g, int i) {
    const sc_node *n = &g->nodes[i];
    int64_t in = 0, out = 0;
    for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k];
        if (v < 0) continue;
        sc_value_kind kind = g->values[v].kind;
        if (kind == SC_VALUE_CONST) continue;
        if (g->values[v].producer < 0) return false;
        in += sc_desc_bytes(&g->values[v].desc);
    }
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k] >= 0) out += sc_desc_bytes(&g->values[n->out[k]].desc);
    return out >= 2 * in;
}

int graph_transposed_matrix(const sc_graph *g, int x) {
    int p = x >= 0 ? g->values[x].producer : -1;
    if (p < 0) return -1;
    const sc_node *t = &g->nodes[p];
    if (t->op != SC_OP_TRANSPOSE || t->n_in < 1 || t->in[0] < 0 || g->values[t->in[0]].desc.rank != 2) return -1;
    const sc_transpose_attrs *a = &t->attrs->transpose;
    bool swap = a->n_perm == 0 || (a->n_perm == 2 && a->perm[0] == 1 && a->perm[1] == 0);
    return swap ? t->in[0] : -1;
}

static bool name_has(const char *name, const char *word) {
    size_t n = strlen(word);
    for (const char *p = name; *p; p++) {
        size_t k = 0;
        while (k < n && p[k] && (p[k] | 0x20) == word[k]) k++;
        if (k == n) return true;
    }
    return false;
}

sc_input_role graph_input_role(const sc_value *v) {
    sc_dtype t = v->desc.dtype;
    bool integer = !sc_dtype_is_float(t) && t != SC_BOOL && t != SC_STRING && sc_dtype_size(t) > 0;
    if (!integer || v->desc.rank < 2) return SC_INPUT_DATA;
    if (name_has(v->name, "mask")) return SC_INPUT_MASK;
    if (name_has(v->name, "position")) return SC_INPUT_POSITIONS;
    return SC_INPUT_DATA;
}
