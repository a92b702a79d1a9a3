/* Ops timed alone, and the cost caches' file names (contract in cost_bench.h). */
#include "train/cost_bench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/stats.h"
#include "graph/shape.h"
#include "include/scorch.h"

/* The input whose buffer output k of b's node shares (an optimizer's state, updated in place), or -1. */
static int shared_input(const bench_op *b, int k) {
    if (b->node >= b->g.n_nodes) return -1;
    int in = sc_op_inplace_input(b->g.nodes[b->node].op, k);
    return in >= 0 && in < b->n_in && b->in[in].data ? in : -1;
}

void bench_free(bench_op *b) {
    for (int k = 0; k < b->n_out; k++)
        if (shared_input(b, k) < 0) free(b->out[k].data);
    for (int k = 0; k < b->n_in; k++) free(b->in[k].data);
    graph_free(&b->g);
}

/* Input k of the bench graph: a value of desc d, its data small positive values (variances stay
 * positive) for f32 and zeros otherwise. */
static int bench_input_desc(bench_op *b, int k, const sc_desc *d, sc_status *st) {
    char name[16];
    snprintf(name, sizeof name, "x%d", k);
    int id = graph_add_value(&b->g, name, SC_VALUE_INPUT, d, st);
    if (*st) return -1;
    int64_t n = sc_desc_numel(d);
    void *data = calloc(1, (size_t)sc_desc_bytes(d) + 1);
    if (!data) {
        *st = sc_errorf("out of memory measuring the cost profile");
        return -1;
    }
    if (d->dtype == SC_F32)
        for (int64_t i = 0; i < n; i++) ((float *)data)[i] = 0.5f + (float)(i % 7) * 0.125f;
    b->in[k] = (sc_tensor){.desc = *d, .data = data};
    return id;
}

/* Input k as a copy of value v: a constant's data (axes, pads and sizes set what the op does), else
 * filled as above. */
static int bench_input(bench_op *b, int k, const sc_value *v, sc_status *st) {
    int id = bench_input_desc(b, k, &v->desc, st);
    if (id >= 0 && v->kind == SC_VALUE_CONST && v->data) memcpy(b->in[k].data, v->data, (size_t)sc_desc_bytes(&v->desc));
    return id;
}

static sc_status bench_alloc_outputs(bench_op *b) {
    const sc_node *n = &b->g.nodes[b->node];
    for (int k = 0; k < b->n_out; k++) {
        if (n->out[k] < 0) continue;
        b->out[k].desc = b->g.values[n->out[k]].desc;
        int in = shared_input(b, k);
        if (in >= 0) {
            b->out[k].data = b->in[in].data;
            continue;
        }
        b->out[k].data = malloc((size_t)sc_desc_bytes(&b->out[k].desc) + 1);
        if (!b->out[k].data) return sc_errorf("out of memory measuring the cost profile");
    }
    return SC_OK;
}

sc_status bench_make(bench_op *b, sc_op op, const sc_attrs *attrs, const sc_desc *in, int n_in, int n_out) {
    memset(b, 0, sizeof *b);
    graph_init(&b->g);
    b->n_in = n_in;
    b->n_out = n_out;
    sc_status st = SC_OK;
    int ids[BENCH_MAX_IN], outs[BENCH_MAX_OUT];
    for (int k = 0; k < n_in && !st; k++) ids[k] = bench_input_desc(b, k, &in[k], &st);
    for (int k = 0; k < n_out && !st; k++) {
        char name[16];
        snprintf(name, sizeof name, "y%d", k);
        outs[k] = graph_add_value(&b->g, name, SC_VALUE_ACT, &(sc_desc){.dtype = SC_F32}, &st);
    }
    if (!st) b->node = graph_add_node(&b->g, op, "op", ids, n_in, outs, n_out, &st);
    if (!st && attrs) st = graph_node_set_attrs(&b->g, &b->g.nodes[b->node], attrs);
    if (!st) st = sc_shape_fns[op](&b->g, &b->g.nodes[b->node]);
    return st ? st : bench_alloc_outputs(b);
}

sc_status bench_make_like(bench_op *b, const sc_graph *g, int node) {
    const sc_node *src = &g->nodes[node];
    memset(b, 0, sizeof *b);
    graph_init(&b->g);
    if (src->n_in > BENCH_MAX_IN || src->n_out > BENCH_MAX_OUT)
        return sc_errorf("node '%s' has too many inputs or outputs to measure alone", src->name);
    b->n_in = src->n_in;
    b->n_out = src->n_out;
    sc_status st = SC_OK;
    int ids[BENCH_MAX_IN], outs[BENCH_MAX_OUT];
    for (int k = 0; k < src->n_in && !st; k++)
        ids[k] = src->in[k] < 0 ? -1 : bench_input(b, k, &g->values[src->in[k]], &st);
    for (int k = 0; k < src->n_out && !st; k++) {
        char name[16];
        snprintf(name, sizeof name, "y%d", k);
        outs[k] = src->out[k] < 0 ? -1 : graph_add_value(&b->g, name, SC_VALUE_ACT, &g->values[src->out[k]].desc, &st);
    }
    if (!st) b->node = graph_add_node(&b->g, src->op, "op", ids, src->n_in, outs, src->n_out, &st);
    if (!st) st = graph_node_set_attrs(&b->g, &b->g.nodes[b->node], src->attrs);
    return st ? st : bench_alloc_outputs(b);
}

#define FLUSH_BYTES ((size_t)96 << 20)
static unsigned char *flush_buf; /* without it the runs see warm caches, and are a little optimistic */

sc_status bench_caches_open(void) {
    flush_buf = malloc(FLUSH_BYTES);
    return flush_buf ? SC_OK : sc_errorf("out of memory measuring the cost profile");
}

void bench_caches_close(void) {
    free(flush_buf);
    flush_buf = NULL;
}

static void caches_flush(void) {
    if (flush_buf) memset(flush_buf, (int)(sc_clock_seconds() * 1e6) & 0xff, FLUSH_BYTES);
}

/* Runs for BENCH_RUNS_AUTO after a warm-up of `warm` seconds. */
static int auto_runs(double warm) {
    int runs = warm > 0 ? (int)(BENCH_AUTO_SECONDS / warm) : 5;
    return runs < 1 ? 1 : runs > 5 ? 5 : runs;
}

sc_status bench_time(const sc_node_evaluator *ev, bench_op *b, int runs, int repeat, bool cold, double *seconds) {
    const sc_node *n = &b->g.nodes[b->node];
    double t[BENCH_MAX_RUNS];
    if (cold) caches_flush();
    double t0 = sc_clock_seconds();
    SC_TRY(ev->run(n, b->in, b->n_in, b->out, b->n_out));
    if (runs == BENCH_RUNS_AUTO) {
        double warm = sc_clock_seconds() - t0;
        runs = auto_runs(warm);
        if (!cold && repeat < BENCH_MAX_REPEAT && warm * repeat < BENCH_MIN_RUN_SECONDS)
            repeat = warm > BENCH_MIN_RUN_SECONDS / BENCH_MAX_REPEAT ? (int)(BENCH_MIN_RUN_SECONDS / warm) + 1
                                                                   : BENCH_MAX_REPEAT;
    }
    if (runs > BENCH_MAX_RUNS) runs = BENCH_MAX_RUNS;
    for (int r = 0; r < runs; r++) {
        if (cold) caches_flush();
        t0 = sc_clock_seconds();
        for (int k = 0; k < repeat; k++) SC_TRY(ev->run(n, b->in, b->n_in, b->out, b->n_out));
        t[r] = (sc_clock_seconds() - t0) / repeat;
    }
    *seconds = sc_median(t, (size_t)runs);
    return SC_OK;
}

/* ---- cache file names ---- */

static void cpu_model(char *out, size_t n) {
    snprintf(out, n, "unknown-cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) || !colon) continue;
        colon += 1 + (colon[1] == ' ');
        size_t k = 0;
        for (; colon[k] && colon[k] != '\n' && k + 1 < n; k++) {
            char ch = colon[k];
            out[k] = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ? ch : '-';
        }
        out[k] = 0;
        break;
    }
    if (f) fclose(f);
}

/* The cache folder, created: SC_OK, or why there is none. */
static sc_status cache_dir(char *out, size_t n) {
    const char *dir = getenv("SCORCH_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (dir && *dir) snprintf(out, n, "%s", dir);
    else if (xdg && *xdg) snprintf(out, n, "%s/scorch", xdg);
    else if (home && *home) snprintf(out, n, "%s/.cache/scorch", home);
    else return sc_errorf("no cache folder (SCORCH_CACHE_DIR, XDG_CACHE_HOME and HOME unset)");
    char parent[1024];
    snprintf(parent, sizeof parent, "%s", out);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = 0;
        mkdir(parent, 0777); /* ~/.cache may not exist yet */
    }
    if (mkdir(out, 0777) != 0 && errno != EEXIST)
        return sc_errorf("cannot create the cache folder '%s': %s", out, strerror(errno));
    return SC_OK;
}

int64_t bench_l2_bytes(void) {
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l2 > 0 ? l2 : (int64_t)1 << 20;
}

sc_status bench_cache_path(const char *stem, int threads, char *out, size_t size) {
    char dir[1024], model[256];
    out[0] = 0;
    SC_TRY(cache_dir(dir, sizeof dir));
    cpu_model(model, sizeof model);
    snprintf(out, size, "%s/%s-%s-t%d-v%s.txt", dir, stem, model, threads, SCORCH_VERSION);
    return SC_OK;
}
