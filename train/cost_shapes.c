/* The kernel-shape table: each node shape of a graph timed alone on this machine's CPU or its GPU,
 * cached per machine and device (contract in cost_profile.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "core/atomic_write.h"
#include "core/clock.h"
#include "schedule/reuse.h"
#include "train/cost_bench.h"
#include "train/cost_profile.h"

#define SHAPES_FORMAT "scorch kernel shapes 4"

/* Ops whose integer or bool inputs may hold any in-range index, so the zeros a bench input holds
 * time them as well as real indices do: the rest must get such inputs from constants. */
static bool takes_any_index(sc_op op) {
    return op == SC_OP_GATHER || op == SC_OP_GATHER_GRAD || op == SC_OP_GATHER_ELEMENTS || op == SC_OP_WHERE ||
           op == SC_OP_SOFTMAX_CROSS_ENTROPY_LOSS || op == SC_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD || op == SC_OP_CAST;
}

/* Ops whose output shape follows their inputs' values even when those are floats (Resize's scales,
 * Range's bounds): timed alone only when every input after the first is a constant. */
static bool shape_from_values(sc_op op) { return op == SC_OP_RESIZE || op == SC_OP_RANGE; }

bool sc_shape_node(const sc_graph *g, int node) {
    const sc_node *n = &g->nodes[node];
    if (sc_op_is_view(n->op) || sc_op_is_collective(n->op) || sc_op_is_control(n->op)) return false;
    if (n->n_in > BENCH_MAX_IN || n->n_out > BENCH_MAX_OUT) return false; /* a Concat of many: the family rate */
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0) continue;
        const sc_value *v = &g->values[n->in[k]];
        if (v->kind == SC_VALUE_CONST && v->data) continue; /* copied into the bench input */
        if (k > 0 && shape_from_values(n->op)) return false;
        if (!sc_dtype_is_float(v->desc.dtype) && !takes_any_index(n->op)) return false;
    }
    return true;
}

/* ---- keys: what sets a kernel's time (op, operand descs, absent outputs, geometry) ---- */

typedef struct {
    char *p;
    size_t left;
} key_buf;

static void key_put(key_buf *k, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(k->p, k->left, fmt, ap);
    va_end(ap);
    if (w < 0) w = 0;
    if ((size_t)w >= k->left) w = k->left ? (int)k->left - 1 : 0; /* truncated: the key stays a prefix */
    k->p += w;
    k->left -= (size_t)w;
}

/* FNV-1a: a constant's bytes or an op's attributes (interned, so equal attributes are equal bytes). */
static uint64_t fnv(const void *p, size_t n, uint64_t h) {
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
    return h;
}
#define FNV_SEED 14695981039346656037ull

static void key_desc(key_buf *k, const sc_graph *g, int v) {
    if (v < 0) {
        key_put(k, "-");
        return;
    }
    const sc_desc *d = &g->values[v].desc;
    key_put(k, "%s[", sc_dtype_name(d->dtype));
    for (int i = 0; i < d->rank; i++) key_put(k, i ? ",%lld" : "%lld", (long long)d->dims[i]);
    key_put(k, "]");
    const sc_value *val = &g->values[v];
    if (val->kind == SC_VALUE_CONST && val->data) /* axes, pads, sizes: they set the work */
        key_put(k, "=%016llx", (unsigned long long)fnv(val->data, (size_t)sc_desc_bytes(d), FNV_SEED));
}

static void key_list(key_buf *k, const char *tag, const int64_t *v, int n) {
    key_put(k, "%s", tag);
    for (int i = 0; i < n; i++) key_put(k, i ? "x%lld" : "%lld", (long long)v[i]);
}

void sc_shape_key(const sc_graph *g, int node, char *out, size_t size) {
    const sc_node *n = &g->nodes[node];
    key_buf k = {out, size};
    out[0] = 0;
    key_put(&k, "%s:", sc_op_name(n->op));
    for (int i = 0; i < n->n_in; i++) key_desc(&k, g, n->in[i]);
    key_put(&k, ":o");
    for (int i = 0; i < n->n_out; i++) key_put(&k, "%d", n->out[i] >= 0);
    if (n->op == SC_OP_CONV || n->op == SC_OP_CONV_GRAD) {
        const sc_window_attrs *w = &n->attrs->window;
        key_list(&k, ":s", w->strides, w->n_spatial);
        key_list(&k, "p", w->pads, 2 * w->n_spatial);
        key_list(&k, "d", w->dilations, w->n_spatial);
        key_put(&k, "g%llda%d", (long long)w->group, (int)w->auto_pad);
    }
    else if (n->op == SC_OP_GEMM) key_put(&k, ":t%d%d", n->attrs->gemm.trans_a, n->attrs->gemm.trans_b);
    else if (n->attrs != &sc_attrs_none) key_put(&k, ":a%016llx", (unsigned long long)fnv(n->attrs, sizeof *n->attrs, FNV_SEED));
}

/* ---- the table: rows sorted by key ---- */

void sc_shape_table_free(sc_shape_table *t) {
    for (int i = 0; i < t->n; i++) free(t->rows[i].key);
    free(t->rows);
    memset(t, 0, sizeof *t);
}

static bool table_add(sc_shape_table *t, const char *key, double warm, double cold) {
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        sc_shape_row *rows = realloc(t->rows, sizeof(sc_shape_row) * (size_t)cap);
        if (!rows) return false;
        t->rows = rows;
        t->cap = cap;
    }
    char *k = strdup(key);
    if (!k) return false;
    t->rows[t->n++] = (sc_shape_row){k, warm, cold};
    return true;
}

static int row_cmp(const void *a, const void *b) {
    return strcmp(((const sc_shape_row *)a)->key, ((const sc_shape_row *)b)->key);
}

/* Sorted by key, one row per key (the first of a damaged file's repeats). */
static void table_sort(sc_shape_table *t) {
    if (t->n) qsort(t->rows, (size_t)t->n, sizeof *t->rows, row_cmp);
    int m = 0;
    for (int i = 0; i < t->n; i++) {
        if (m && !strcmp(t->rows[m - 1].key, t->rows[i].key)) {
            free(t->rows[i].key);
            continue;
        }
        t->rows[m++] = t->rows[i];
    }
    t->n = m;
}

const sc_shape_row *sc_shape_table_find(const sc_shape_table *t, const char *key) {
    sc_shape_row probe = {(char *)key, 0, 0};
    return t->n ? bsearch(&probe, t->rows, (size_t)t->n, sizeof *t->rows, row_cmp) : NULL;
}

/* ---- text: the cache file's body and what ranks share ("key warm cold" lines) ---- */

/* "W C" at p (len bytes, nothing after them): both positive and under 1e6 s. */
static bool parse_times(const char *p, size_t len, double *warm, double *cold) {
    char *end;
    *warm = strtod(p, &end);
    if (end == p || *end != ' ') return false;
    const char *c = end + 1;
    *cold = strtod(c, &end);
    return end != c && end == p + len && *warm > 0 && *warm < 1e6 && *cold > 0 && *cold < 1e6;
}

sc_status sc_shape_table_parse(const char *text, sc_shape_table *t) {
    memset(t, 0, sizeof *t);
    const char *p = text;
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *space = memchr(p, ' ', len);
        if (space && space > p && (size_t)(space - p) < SC_SHAPE_KEY_MAX) {
            char key[SC_SHAPE_KEY_MAX];
            memcpy(key, p, (size_t)(space - p));
            key[space - p] = 0;
            double warm, cold;
            bool ok = parse_times(space + 1, len - (size_t)(space + 1 - p), &warm, &cold);
            if (ok && !table_add(t, key, warm, cold)) {
                sc_shape_table_free(t);
                return sc_errorf("out of memory reading the kernel-shape table");
            }
        }
        p += len + (eol != NULL);
    }
    table_sort(t);
    return SC_OK;
}

sc_status sc_shape_table_text(const sc_shape_table *t, const char *header, char **text, size_t *len) {
    size_t cap = (header ? strlen(header) + 1 : 0) + 1;
    for (int i = 0; i < t->n; i++) cap += strlen(t->rows[i].key) + 64;
    char *s = malloc(cap);
    if (!s) return sc_errorf("out of memory writing the kernel-shape table");
    size_t k = header ? (size_t)snprintf(s, cap, "%s\n", header) : 0;
    s[k] = 0;
    for (int i = 0; i < t->n; i++)
        k += (size_t)snprintf(s + k, cap - k, "%s %.17g %.17g\n", t->rows[i].key, t->rows[i].warm, t->rows[i].cold);
    *text = s;
    *len = k;
    return SC_OK;
}

/* ---- measuring what the cache lacks ---- */

/* The cache file's table (empty when absent, of another format or unreadable) and the profile's
 * conv_flops its rows were measured under (its format line: SHAPES_FORMAT and that rate). */
static sc_status cache_read(const char *path, sc_shape_table *t, double *rate) {
    memset(t, 0, sizeof *t);
    *rate = 0;
    FILE *f = path[0] ? fopen(path, "rb") : NULL;
    if (!f) return SC_OK;
    char *text = NULL;
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (size > 0 && size < (64L << 20) && fseek(f, 0, SEEK_SET) == 0 && (text = malloc((size_t)size + 1))) {
        size_t got = fread(text, 1, (size_t)size, f);
        text[got] = 0;
    }
    fclose(f);
    sc_status st = SC_OK;
    size_t head = strlen(SHAPES_FORMAT);
    char *eol = text ? strchr(text, '\n') : NULL, *end = NULL;
    if (eol && !strncmp(text, SHAPES_FORMAT " ", head + 1)) *rate = strtod(text + head + 1, &end);
    if (*rate > 0 && end == eol) st = sc_shape_table_parse(eol + 1, t);
    else *rate = 0;
    free(text);
    return st;
}

/* The graph's distinct shape keys, sorted, each with a node of that shape (*nodes). */
static sc_status graph_keys(const sc_graph *g, sc_shape_table *keys, int **nodes) {
    memset(keys, 0, sizeof *keys);
    *nodes = NULL;
    char key[SC_SHAPE_KEY_MAX];
    for (int i = 0; i < g->n_nodes; i++) {
        if (!sc_shape_node(g, i)) continue;
        sc_shape_key(g, i, key, sizeof key);
        if (!table_add(keys, key, (double)i, 0)) return sc_errorf("out of memory listing the kernel shapes");
    }
    table_sort(keys);
    *nodes = malloc(sizeof(int) * ((size_t)keys->n + 1));
    if (!*nodes) return sc_errorf("out of memory listing the kernel shapes");
    for (int i = 0; i < keys->n; i++) (*nodes)[i] = (int)keys->rows[i].warm;
    return SC_OK;
}

typedef struct {
    int cached, measured, over_time, too_big, failed;
    int dropped;        /* rows of the file measured under another profile */
    double drop_rate;   /* the conv_flops they were measured under */
    double seconds;
    char failure[256];
} measure_count;

/* Bytes a node's operands take (inputs + outputs): what measuring it alone allocates. */
static int64_t node_operand_bytes(const sc_graph *g, const sc_node *n) {
    int64_t b = 0;
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] >= 0) b += sc_desc_bytes(&g->values[n->in[i]].desc);
    for (int i = 0; i < n->n_out; i++)
        if (n->out[i] >= 0) b += sc_desc_bytes(&g->values[n->out[i]].desc);
    return b;
}

/* Times node `node` of g alone on be, warm and cold (*row's times); false when it could not be run
 * (counted in *c). The CPU backend runs it through its evaluator on host tensors, cold with its
 * operands flushed from the caches, and warm repeated. A device backend runs it on its own, warm
 * only (cold = warm): the GPU's L2 is not flushed, and no node of its step is told apart. */
static bool measure_node(sc_backend *be, const sc_graph *g, int node, sc_shape_row *row, measure_count *c) {
    bench_op b;
    sc_status st = bench_make_like(&b, g, node);
    if (!st && be->iface->compute_on_host) {
        const sc_node_evaluator *ev = be->iface->evaluator(be);
        st = bench_time(ev, &b, BENCH_RUNS_AUTO, 1, BENCH_COLD_OPERANDS, &row->cold);
        if (!st) st = bench_time(ev, &b, BENCH_RUNS_AUTO, 1, BENCH_WARM, &row->warm);
    } else if (!st) {
        st = bench_time_device(be, &b, &row->warm);
        row->cold = row->warm;
    }
    bench_free(&b);
    if (!st) return true;
    if (!c->failed++)
        snprintf(c->failure, sizeof c->failure, "%s '%s': %s", sc_op_name(g->nodes[node].op), g->nodes[node].name,
                 sc_status_message(st));
    sc_status_free(st);
    return false;
}

/* Measures the keys the cache lacks into both the cache and *out, within the time limit. */
static sc_status measure_missing(sc_device device, int threads, const sc_graph *g, const sc_shape_table *keys,
                                 const int *nodes, sc_shape_table *cache, sc_shape_table *out, measure_count *c) {
    sc_backend *be = NULL;
    double t0 = sc_clock_seconds();
    sc_status st = SC_OK;
    int sorted = cache->n; /* rows measured now go after them, unsorted until the end */
    for (int i = 0; i < keys->n && !st; i++) {
        const char *key = keys->rows[i].key;
        const sc_shape_row *hit = sc_shape_table_find(&(sc_shape_table){.n = sorted, .rows = cache->rows}, key);
        sc_shape_row got = hit ? *hit : (sc_shape_row){0};
        if (hit) c->cached++;
        else if (node_operand_bytes(g, &g->nodes[nodes[i]]) > SC_SHAPE_MAX_BYTES) c->too_big++;
        else if (sc_clock_seconds() - t0 > SC_SHAPE_TIME_LIMIT) c->over_time++;
        else {
            if (!be) {
                sc_backend_config on = {.device = device};
                SC_TRY(backend_open(&on, &be));
                if (threads > 0) be->iface->set_threads(be, threads);
                st = bench_caches_open();
                if (st) break;
            }
            if (measure_node(be, g, nodes[i], &got, c)) {
                c->measured++;
                if (!table_add(cache, key, got.warm, got.cold)) st = sc_errorf("out of memory measuring the kernel shapes");
            }
        }
        if (!st && got.warm > 0 && !table_add(out, key, got.warm, got.cold))
            st = sc_errorf("out of memory measuring the kernel shapes");
    }
    c->seconds = sc_clock_seconds() - t0;
    if (be) {
        bench_caches_close();
        backend_destroy(be);
    }
    table_sort(out);
    table_sort(cache);
    return st;
}

static sc_status cache_write(const char *path, const sc_shape_table *cache, double rate) {
    char *text, header[96];
    size_t len;
    snprintf(header, sizeof header, "%s %.17g", SHAPES_FORMAT, rate);
    SC_TRY(sc_shape_table_text(cache, header, &text, &len));
    sc_status st = sc_write_file_atomic(path, text, len);
    free(text);
    return st;
}

static void describe(sc_device device, const measure_count *c, const char *path, sc_status wst, char *where,
                     size_t size) {
    int k = snprintf(where, size, "%d kernel shapes timed alone%s%s: %d cached", c->cached + c->measured,
                     device != SC_DEVICE_CPU ? " on " : "", device != SC_DEVICE_CPU ? sc_device_name(device) : "",
                     c->cached);
    if (c->measured) k += snprintf(where + k, size - (size_t)k, ", %d measured now in %.1f s", c->measured, c->seconds);
    if (c->dropped)
        k += snprintf(where + k, size - (size_t)k, " (the cache's %d were measured when the profile's 3x3 convolution ran "
                      "at %.3g GFLOP/s: measured again)", c->dropped, c->drop_rate * 1e-9);
    if (c->measured && !wst) k += snprintf(where + k, size - (size_t)k, " (cached in %s)", path);
    if (wst) k += snprintf(where + k, size - (size_t)k, " (not cached: %s)", sc_status_message(wst));
    if (c->over_time)
        k += snprintf(where + k, size - (size_t)k, "; %d left to the op-family rates (over the %g s limit, measured by a "
                      "later run)", c->over_time, SC_SHAPE_TIME_LIMIT);
    if (c->too_big) k += snprintf(where + k, size - (size_t)k, "; %d too large to time alone", c->too_big);
    if (c->failed) snprintf(where + k, size - (size_t)k, "; %d failed (%s)", c->failed, c->failure);
}

/* Empties *cache when its rows were measured under a profile more than SC_COST_PROFILE_DRIFT away
 * from p (counted in *c); else *rate stays the one they were measured under. */
static void cache_check(sc_shape_table *cache, double *rate, const sc_cost_profile *p, measure_count *c) {
    double r = *rate > 0 ? p->conv_flops / *rate : 0;
    if (r <= SC_COST_PROFILE_DRIFT && r >= 1 / SC_COST_PROFILE_DRIFT) return;
    c->dropped = cache->n;
    c->drop_rate = *rate;
    sc_shape_table_free(cache);
    *rate = p->conv_flops;
}

sc_status sc_shape_table_get(sc_device device, int threads, const sc_cost_profile *p, const sc_graph *g,
                             sc_shape_table *t, char *where, size_t where_size) {
    memset(t, 0, sizeof *t);
    where[0] = 0;
    if (sc_cost_profile_off() || !(p->conv_flops > 0)) return SC_OK;
    int n_threads = threads > 0 ? threads : backend_host_threads();
    char path[1536], model[256];
    bool on_device = device != SC_DEVICE_CPU;
    if (on_device && !backend_device_model(device, model, sizeof model))
        snprintf(model, sizeof model, "unknown-%s", sc_device_name(device));
    sc_status pst = bench_cache_path(on_device ? "kernel-shapes-gpu" : "kernel-shapes", on_device ? model : NULL,
                                     on_device ? 1 : n_threads, path, sizeof path);
    sc_shape_table keys = {0}, cache = {0};
    int *nodes = NULL;
    measure_count c = {0};
    double rate = 0;
    sc_status st = cache_read(path, &cache, &rate);
    if (!st) cache_check(&cache, &rate, p, &c);
    if (!st) st = graph_keys(g, &keys, &nodes);
    if (!st) st = measure_missing(device, n_threads, g, &keys, nodes, &cache, t, &c);
    sc_status wst = SC_OK;
    if (!st && c.measured) {
        wst = pst ? pst : cache_write(path, &cache, rate);
        pst = SC_OK;
    }
    if (!st && keys.n) describe(device, &c, path, wst, where, where_size);
    sc_status_free(wst);
    sc_status_free(pst);
    sc_shape_table_free(&keys);
    sc_shape_table_free(&cache);
    free(nodes);
    if (st) sc_shape_table_free(t);
    return st;
}

sc_status sc_shape_table_apply(const sc_shape_table *t, const sc_graph *g, double *node_time) {
    if (!t->n) return SC_OK;
    double *cold = malloc(sizeof(double) * ((size_t)g->n_nodes + 1));
    if (!cold) return sc_errorf("out of memory applying the kernel shapes");
    sc_status st = sc_reuse_cold_share(g, bench_llc_bytes(), cold);
    char key[SC_SHAPE_KEY_MAX];
    for (int i = 0; i < g->n_nodes && !st; i++) {
        if (!sc_shape_node(g, i)) continue;
        sc_shape_key(g, i, key, sizeof key);
        const sc_shape_row *r = sc_shape_table_find(t, key);
        if (r) node_time[i] = r->warm + (r->cold - r->warm) * cold[i];
    }
    free(cold);
    return st;
}
