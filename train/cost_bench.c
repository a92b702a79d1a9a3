/* Ops timed alone, and the cost caches' file names (contract in cost_bench.h). */
#include "train/cost_bench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#endif

#include "core/big_alloc.h"
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
    size_t bytes = (size_t)sc_desc_bytes(d) + 1;
    void *data = sc_big_alloc(bytes); /* on huge pages as a step's arena is: its TLB misses, not 4 KiB pages' */
    if (!data) {
        *st = sc_errorf("out of memory measuring the cost profile");
        return -1;
    }
    memset(data, 0, bytes);
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
        b->out[k].data = sc_big_alloc((size_t)sc_desc_bytes(&b->out[k].desc) + 1);
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

/* Every thread of the pool writes its share: the flush is as fast as memory allows, and the pool's
 * threads are awake for the timed run as in a step. Written by one thread, the others slept through
 * it, and a cold run of a 10 us op timed their 50 us wake-up. */
static void caches_flush(void) {
    if (!flush_buf) return;
    int byte = (int)(sc_clock_seconds() * 1e6) & 0xff;
    enum { CHUNK = 1 << 20 };
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < FLUSH_BYTES / CHUNK; c++) memset(flush_buf + c * CHUNK, byte, CHUNK);
}

#if defined(__x86_64__) || defined(__i386__)
static void tensor_flush(const sc_tensor *t) {
    const char *p = t->data;
    int64_t n = p ? sc_desc_bytes(&t->desc) : 0;
    for (int64_t at = 0; at < n; at += 64) _mm_clflush(p + at);
    if (n > 0) _mm_clflush(p + n - 1);
}
#endif

/* b's operand bytes (inputs and outputs) evicted from every cache level, the rest (code, page
 * tables, the pool's state) left as the last run left it: a step's node whose operands were last
 * touched long ago. Without a cache line flush instruction, every cache is flushed. */
static void operands_flush(const bench_op *b) {
#if defined(__x86_64__) || defined(__i386__)
    for (int k = 0; k < b->n_in; k++) tensor_flush(&b->in[k]);
    for (int k = 0; k < b->n_out; k++)
        if (shared_input(b, k) < 0) tensor_flush(&b->out[k]);
    _mm_mfence();
#else
    (void)b;
    caches_flush();
#endif
}

static void caches_set(const bench_op *b, bench_caches caches) {
    if (caches == BENCH_COLD_ALL) caches_flush();
    else if (caches == BENCH_COLD_OPERANDS) operands_flush(b);
}

/* Runs for BENCH_RUNS_AUTO after a warm-up of `warm` seconds. */
static int auto_runs(double warm) {
    int runs = warm > 0 ? (int)(BENCH_AUTO_SECONDS / warm) : 5;
    return runs < 1 ? 1 : runs > 5 ? 5 : runs;
}

sc_status bench_time(const sc_node_evaluator *ev, bench_op *b, int runs, int repeat, bench_caches caches,
                     double *seconds) {
    const sc_node *n = &b->g.nodes[b->node];
    double t[BENCH_MAX_RUNS];
    caches_set(b, caches);
    double t0 = sc_clock_seconds();
    SC_TRY(ev->run(n, b->in, b->n_in, b->out, b->n_out));
    if (runs == BENCH_RUNS_AUTO) {
        double warm = sc_clock_seconds() - t0;
        runs = auto_runs(warm);
        if (caches == BENCH_WARM && repeat < BENCH_MAX_REPEAT && warm * repeat < BENCH_MIN_RUN_SECONDS)
            repeat = warm > BENCH_MIN_RUN_SECONDS / BENCH_MAX_REPEAT ? (int)(BENCH_MIN_RUN_SECONDS / warm) + 1
                                                                   : BENCH_MAX_REPEAT;
    }
    if (runs > BENCH_MAX_RUNS) runs = BENCH_MAX_RUNS;
    for (int r = 0; r < runs; r++) {
        caches_set(b, caches);
        t0 = sc_clock_seconds();
        for (int k = 0; k < repeat; k++) SC_TRY(ev->run(n, b->in, b->n_in, b->out, b->n_out));
        t[r] = (sc_clock_seconds() - t0) / repeat;
    }
    *seconds = sc_median(t, (size_t)runs);
    return SC_OK;
}

/* The device arena's layout for b: each operand 256-byte aligned; an in-place output takes its
 * input's place. Returns the arena's bytes. */
static int64_t device_layout(const bench_op *b, int64_t *in_at, int64_t *out_at) {
    int64_t at = 0;
    for (int k = 0; k < b->n_in; k++) {
        in_at[k] = at;
        if (b->in[k].data) at += (sc_desc_bytes(&b->in[k].desc) + 255) / 256 * 256;
    }
    for (int k = 0; k < b->n_out; k++) {
        out_at[k] = at;
        if (b->out[k].data && shared_input(b, k) < 0) at += (sc_desc_bytes(&b->out[k].desc) + 255) / 256 * 256;
    }
    return at > 0 ? at : 256;
}

/* Timed runs of n on device tensors: `repeat` launches, then one synchronize; wall seconds per launch. */
static sc_status device_run(sc_backend *be, const sc_node *n, const bench_op *b, sc_tensor *in, sc_tensor *out,
                            int repeat, double *seconds) {
    double t0 = sc_clock_seconds();
    for (int k = 0; k < repeat; k++) SC_TRY(be->iface->run_node(be, n, in, b->n_in, out, b->n_out));
    SC_TRY(be->iface->synchronize(be));
    *seconds = (sc_clock_seconds() - t0) / repeat;
    return SC_OK;
}

static sc_status device_time(sc_backend *be, bench_op *b, char *base, const int64_t *in_at, const int64_t *out_at,
                             double *seconds) {
    const sc_node *n = &b->g.nodes[b->node];
    sc_tensor in[BENCH_MAX_IN], out[BENCH_MAX_OUT];
    for (int k = 0; k < b->n_in; k++) {
        in[k] = (sc_tensor){b->in[k].desc, b->in[k].data ? base + in_at[k] : NULL};
        int64_t id = 0;
        if (in[k].data) SC_TRY(be->iface->copy_h2d(be, in[k].data, b->in[k].data, sc_desc_bytes(&in[k].desc), &id));
        if (in[k].data) SC_TRY(be->iface->wait(be, id));
    }
    for (int k = 0; k < b->n_out; k++) {
        int sh = shared_input(b, k);
        out[k] = (sc_tensor){b->out[k].desc, !b->out[k].data ? NULL : sh >= 0 ? in[sh].data : base + out_at[k]};
    }
    double warm, t[BENCH_MAX_RUNS];
    SC_TRY(device_run(be, n, b, in, out, 1, &warm));
    int runs = auto_runs(warm);
    int repeat = warm * BENCH_MAX_REPEAT < BENCH_MIN_RUN_SECONDS ? BENCH_MAX_REPEAT
                 : warm < BENCH_MIN_RUN_SECONDS                 ? (int)(BENCH_MIN_RUN_SECONDS / warm) + 1
                                                               : 1;
    for (int r = 0; r < runs; r++) SC_TRY(device_run(be, n, b, in, out, repeat, &t[r]));
    *seconds = sc_median(t, (size_t)runs);
    return SC_OK;
}

sc_status bench_time_device(sc_backend *be, bench_op *b, double *seconds) {
    int64_t in_at[BENCH_MAX_IN], out_at[BENCH_MAX_OUT];
    int64_t bytes = device_layout(b, in_at, out_at);
    void *base = NULL;
    SC_TRY(be->iface->arena_create(be, bytes, &base));
    sc_status st = device_time(be, b, base, in_at, out_at, seconds);
    sc_status_free(st ? SC_OK : be->iface->synchronize(be));
    be->iface->arena_destroy(be);
    return st;
}

/* ---- cache file names ---- */

bool sc_cost_profile_off(void) {
    const char *mode = getenv("SCORCH_COST_PROFILE");
    return mode && !strcmp(mode, "off");
}

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

/* The size in bytes of cpu0's cache index k in sysfs ("32768K"), and its level; 0 when absent. */
static int64_t sysfs_cache(int k, int *level) {
    char path[128], text[64];
    int64_t size = 0;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", k);
    FILE *f = fopen(path, "r");
    *level = f && fgets(text, sizeof text, f) ? atoi(text) : 0;
    if (f) fclose(f);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", k);
    f = fopen(path, "r");
    if (f && fgets(text, sizeof text, f)) {
        char *end;
        size = strtoll(text, &end, 10);
        size <<= *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
    }
    if (f) fclose(f);
    return size;
}

/* sysfs first: glibc's sysconf reads CPUID, which on a KVM guest of an AMD EPYC with a 32 MiB L3
 * (sysfs, lscpu) says 320 MiB. */
int64_t bench_llc_bytes(void) {
    int64_t best = 0;
    int best_level = 0, level;
    for (int k = 0; k < 8; k++) {
        int64_t size = sysfs_cache(k, &level);
        if (size > 0 && level >= best_level) best = size, best_level = level;
    }
    if (best > 0) return best;
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l3 > 0 ? l3 : l2 > 0 ? l2 : (int64_t)8 << 20;
}

sc_status bench_cache_path(const char *stem, const char *device_model, int threads, char *out, size_t size) {
    char dir[1024], model[256];
    out[0] = 0;
    SC_TRY(cache_dir(dir, sizeof dir));
    if (device_model) snprintf(model, sizeof model, "%s", device_model);
    else cpu_model(model, sizeof model);
    snprintf(out, size, "%s/%s-%s-t%d-v%s.txt", dir, stem, model, threads, SCORCH_VERSION);
    return SC_OK;
}
