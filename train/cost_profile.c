/* This machine's cost profile: micro-benchmarks on the CPU backend and their cache (contract in
 * cost_profile.h). */
#include "train/cost_profile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/backend.h"
#include "core/atomic_write.h"
#include "core/clock.h"
#include "core/stats.h"
#include "graph/op_cost.h"
#include "graph/shape.h"
#include "include/scorch.h"

#define PROFILE_RUNS 7
#define PROFILE_FORMAT "scorch cost profile 3"

/* ---- one op, timed through the backend's node evaluator ---- */

typedef struct {
    sc_graph g;
    int node;
    sc_tensor in[5], out[3];
    int n_in, n_out;
} bench_op;

static void bench_free(bench_op *b) {
    for (int k = 0; k < b->n_in; k++) free(b->in[k].data);
    for (int k = 0; k < b->n_out; k++) free(b->out[k].data);
    graph_free(&b->g);
}

/* A graph of one node `op` with n_out outputs over inputs of the given descs (filled with small
 * values), its outputs allocated. */
static sc_status bench_make(bench_op *b, sc_op op, const sc_attrs *attrs, const sc_desc *in, int n_in, int n_out) {
    memset(b, 0, sizeof *b);
    graph_init(&b->g);
    b->n_in = n_in;
    b->n_out = n_out;
    sc_status st = SC_OK;
    int ids[5], outs[3];
    for (int k = 0; k < n_in && !st; k++) {
        char name[16];
        snprintf(name, sizeof name, "x%d", k);
        ids[k] = graph_add_value(&b->g, name, SC_VALUE_INPUT, &in[k], &st);
        int64_t n = sc_desc_numel(&in[k]);
        float *data = st ? NULL : malloc(sizeof(float) * (size_t)n);
        if (!st && !data) st = sc_errorf("out of memory measuring the cost profile");
        for (int64_t i = 0; data && i < n; i++) data[i] = 0.5f + (float)(i % 7) * 0.125f; /* positive: variances */
        b->in[k] = (sc_tensor){.desc = in[k], .data = data};
    }
    for (int k = 0; k < n_out && !st; k++) {
        char name[16];
        snprintf(name, sizeof name, "y%d", k);
        outs[k] = graph_add_value(&b->g, name, SC_VALUE_ACT, &(sc_desc){.dtype = SC_F32}, &st);
    }
    if (!st) b->node = graph_add_node(&b->g, op, "op", ids, n_in, outs, n_out, &st);
    if (!st && attrs) st = graph_node_set_attrs(&b->g, &b->g.nodes[b->node], attrs);
    if (!st) st = sc_shape_fns[op](&b->g, &b->g.nodes[b->node]);
    for (int k = 0; k < n_out && !st; k++) {
        b->out[k].desc = b->g.values[outs[k]].desc;
        b->out[k].data = malloc((size_t)sc_desc_bytes(&b->out[k].desc) + 1);
        if (!b->out[k].data) st = sc_errorf("out of memory measuring the cost profile");
    }
    return st;
}

/* Writes a buffer larger than the caches, so that the next run reads its inputs from memory, as an
 * op of a training step does whose inputs were made many ops ago. */
#define FLUSH_BYTES ((size_t)96 << 20)
static unsigned char *flush_buf; /* only while sc_cost_profile_measure runs */
static void caches_flush(void) {
    if (flush_buf) memset(flush_buf, (int)(sc_clock_seconds() * 1e6) & 0xff, FLUSH_BYTES);
}

/* Median wall seconds of one run of b's node over PROFILE_RUNS runs after a warm-up, each with cold
 * caches; repeat runs are timed together (for ops too short to time alone). */
static sc_status bench_time(const sc_node_evaluator *ev, bench_op *b, int repeat, double *seconds) {
    const sc_node *n = &b->g.nodes[b->node];
    double t[PROFILE_RUNS];
    SC_TRY(ev->run(n, b->in, b->n_in, b->out, b->n_out));
    for (int r = 0; r < PROFILE_RUNS; r++) {
        if (repeat == 1) caches_flush();
        double t0 = sc_clock_seconds();
        for (int k = 0; k < repeat; k++) SC_TRY(ev->run(n, b->in, b->n_in, b->out, b->n_out));
        t[r] = (sc_clock_seconds() - t0) / repeat;
    }
    *seconds = sc_median(t, PROFILE_RUNS);
    return SC_OK;
}

static sc_status bench_op_time(const sc_node_evaluator *ev, sc_op op, const sc_attrs *a, const sc_desc *in, int n_in,
                               int n_out, int repeat, double *seconds, sc_op_cost *cost) {
    bench_op b;
    sc_status st = bench_make(&b, op, a, in, n_in, n_out);
    if (!st) st = bench_time(ev, &b, repeat, seconds);
    if (!st) *cost = sc_node_cost(&b.g, &b.g.nodes[b.node]);
    bench_free(&b);
    return st;
}

static sc_desc desc4(int64_t a, int64_t b, int64_t c, int64_t d) {
    return (sc_desc){.dtype = SC_F32, .rank = 4, .dims = {a, b, c, d}};
}

static sc_desc desc1(int64_t n) { return (sc_desc){.dtype = SC_F32, .rank = 1, .dims = {n}}; }

static sc_attrs window_attrs(int64_t k, int64_t stride, int64_t pad, bool kernel_shape) {
    sc_attrs a = {0};
    a.window.n_spatial = 2;
    a.window.group = 1;
    a.window.has_kernel_shape = kernel_shape;
    for (int i = 0; i < 2; i++) {
        a.window.kernel_shape[i] = kernel_shape ? k : 0;
        a.window.strides[i] = stride;
        a.window.dilations[i] = 1;
        a.window.pads[i] = a.window.pads[2 + i] = pad;
    }
    return a;
}

/* Sizes typical of a training step's tensors: ResNet-stage convolutions (3x3 and 1x1) and their
 * gradients, a transformer block's projection, a batch norm and its gradient over 6.4M elements, a
 * stride-2 3x3 max pool and its gradient, and element-wise operands of 16 MB. */
static sc_status measure_with(const sc_node_evaluator *ev, sc_cost_profile *p) {
    sc_op_cost c;
    double t;
    sc_attrs conv = window_attrs(3, 1, 1, false), conv1 = window_attrs(1, 1, 0, false);
    sc_desc cin[2] = {desc4(8, 64, 56, 56), desc4(64, 64, 3, 3)};
    SC_TRY(bench_op_time(ev, SC_OP_CONV, &conv, cin, 2, 1, 1, &t, &c));
    p->conv_flops = c.flops / t;
    sc_desc gin[3] = {desc4(8, 64, 56, 56), desc4(8, 64, 56, 56), desc4(64, 64, 3, 3)}; /* dY, X, W */
    SC_TRY(bench_op_time(ev, SC_OP_CONV_GRAD, &conv, gin, 3, 3, 1, &t, &c));
    p->conv_grad_flops = c.flops / t;
    sc_desc c1in[2] = {desc4(8, 256, 28, 28), desc4(64, 256, 1, 1)};
    SC_TRY(bench_op_time(ev, SC_OP_CONV, &conv1, c1in, 2, 1, 1, &t, &c));
    p->conv1x1_flops = c.flops / t;
    sc_desc g1in[3] = {desc4(8, 64, 28, 28), desc4(8, 256, 28, 28), desc4(64, 256, 1, 1)};
    SC_TRY(bench_op_time(ev, SC_OP_CONV_GRAD, &conv1, g1in, 3, 3, 1, &t, &c));
    p->conv1x1_grad_flops = c.flops / t;
    sc_desc mm[2] = {{.dtype = SC_F32, .rank = 2, .dims = {256, 1024}}, {.dtype = SC_F32, .rank = 2, .dims = {1024, 256}}};
    SC_TRY(bench_op_time(ev, SC_OP_MATMUL, NULL, mm, 2, 1, 1, &t, &c));
    p->gemm_flops = c.flops / t;
    sc_attrs bn = {0};
    bn.batch_norm = (sc_batch_norm_attrs){.epsilon = 1e-5f, .momentum = 0.9f, .training_mode = true};
    sc_desc bin[5] = {desc4(8, 256, 28, 28), desc1(256), desc1(256), desc1(256), desc1(256)};
    SC_TRY(bench_op_time(ev, SC_OP_BATCH_NORM, &bn, bin, 5, 3, 1, &t, &c));
    p->norm_bandwidth = c.bytes / t;
    sc_desc bgin[3] = {desc4(8, 256, 28, 28), desc4(8, 256, 28, 28), desc1(256)}; /* dY, X, scale */
    SC_TRY(bench_op_time(ev, SC_OP_BATCH_NORM_GRAD, &bn, bgin, 3, 3, 1, &t, &c));
    p->norm_grad_bandwidth = c.bytes / t;
    sc_attrs pool = window_attrs(3, 2, 1, true);
    sc_desc pin[1] = {desc4(8, 64, 112, 112)};
    SC_TRY(bench_op_time(ev, SC_OP_MAX_POOL, &pool, pin, 1, 1, 1, &t, &c));
    double fwd_rate = c.flops / t;
    sc_desc pgin[2] = {desc4(8, 64, 56, 56), desc4(8, 64, 112, 112)}; /* dY, X */
    SC_TRY(bench_op_time(ev, SC_OP_MAX_POOL_GRAD, &pool, pgin, 2, 1, 1, &t, &c));
    double grad_rate = c.flops / t;
    p->pool_rate = 2 / (1 / fwd_rate + 1 / grad_rate); /* one rate for both: their harmonic mean */
    sc_desc big[2] = {desc1(1 << 22), desc1(1 << 22)};
    SC_TRY(bench_op_time(ev, SC_OP_ADD, NULL, big, 2, 1, 1, &t, &c));
    p->mem_bandwidth = c.bytes / t;
    p->elem_rate = c.flops / t;
    sc_desc tiny[2] = {desc1(16), desc1(16)};
    SC_TRY(bench_op_time(ev, SC_OP_ADD, NULL, tiny, 2, 1, 200, &t, &c));
    p->node_overhead = t;
    return SC_OK;
}

static bool profile_valid(const sc_cost_profile *p) {
    return p->conv_flops > 0 && p->conv_grad_flops > 0 && p->conv1x1_flops > 0 && p->conv1x1_grad_flops > 0 &&
           p->gemm_flops > 0 && p->norm_bandwidth > 0 && p->norm_grad_bandwidth > 0 && p->pool_rate > 0 &&
           p->elem_rate > 0 && p->mem_bandwidth > 0 && p->node_overhead >= 0;
}

sc_status sc_cost_profile_measure(int threads, sc_cost_profile *p) {
    memset(p, 0, sizeof *p);
    sc_backend *be = NULL;
    sc_backend_config cpu = {.device = SC_DEVICE_CPU};
    SC_TRY(backend_open(&cpu, &be));
    if (threads > 0) be->iface->set_threads(be, threads);
    flush_buf = malloc(FLUSH_BYTES); /* without it the runs see warm caches, and are a little optimistic */
    sc_status st = measure_with(be->iface->evaluator(be), p);
    free(flush_buf);
    flush_buf = NULL;
    backend_destroy(be);
    if (!st && !profile_valid(p))
        st = sc_errorf("the cost profile's micro-benchmarks measured a zero time");
    return st;
}

/* ---- the cache ---- */

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

/* The cache folder (created), or an empty string when there is none. */
static void cache_dir(char *out, size_t n) {
    const char *dir = getenv("SCORCH_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (dir && *dir) snprintf(out, n, "%s", dir);
    else if (xdg && *xdg) snprintf(out, n, "%s/scorch", xdg);
    else if (home && *home) snprintf(out, n, "%s/.cache/scorch", home);
    else out[0] = 0;
    if (!out[0]) return;
    char parent[1024];
    snprintf(parent, sizeof parent, "%s", out);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = 0;
        mkdir(parent, 0777); /* ~/.cache may not exist yet */
    }
    if (mkdir(out, 0777) != 0 && errno != EEXIST) out[0] = 0;
}

/* The figures as they appear in the cache file, in order. */
#define PROFILE_FIELDS(X)                                                                                    \
    X(conv_flops) X(conv_grad_flops) X(conv1x1_flops) X(conv1x1_grad_flops) X(gemm_flops) X(norm_bandwidth) \
        X(norm_grad_bandwidth) X(pool_rate) X(elem_rate) X(mem_bandwidth) X(node_overhead)

static bool profile_parse(const char *path, sc_cost_profile *p) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char head[64] = {0}, name[64];
    bool ok = fgets(head, sizeof head, f) && !strncmp(head, PROFILE_FORMAT, strlen(PROFILE_FORMAT));
#define READ_FIELD(F) ok = ok && fscanf(f, "%63s %lf", name, &p->F) == 2 && !strcmp(name, #F);
    PROFILE_FIELDS(READ_FIELD)
#undef READ_FIELD
    fclose(f);
    return ok && profile_valid(p);
}

static sc_status profile_write(const char *path, const sc_cost_profile *p) {
    char text[2048];
    int k = snprintf(text, sizeof text, PROFILE_FORMAT "\n");
#define WRITE_FIELD(F) k += snprintf(text + k, sizeof text - (size_t)k, "%s %.17g\n", #F, p->F);
    PROFILE_FIELDS(WRITE_FIELD)
#undef WRITE_FIELD
    return sc_write_file_atomic(path, text, (size_t)k);
}

sc_status sc_cost_profile_get(int threads, sc_cost_profile *p, char *where, size_t where_size) {
    memset(p, 0, sizeof *p);
    const char *mode = getenv("SCORCH_COST_PROFILE");
    if (mode && !strcmp(mode, "off")) {
        snprintf(where, where_size, "off (SCORCH_COST_PROFILE=off: the built-in constants)");
        return SC_OK;
    }
    int n_threads = threads > 0 ? threads : backend_host_threads();
    char dir[1024], model[256], path[1536];
    cache_dir(dir, sizeof dir);
    cpu_model(model, sizeof model);
    snprintf(path, sizeof path, "%s/cost-profile-%s-t%d-v%s.txt", dir, model, n_threads, SCORCH_VERSION);
    if (dir[0] && profile_parse(path, p)) {
        snprintf(where, where_size, "cached in %s", path);
        return SC_OK;
    }
    SC_TRY(sc_cost_profile_measure(n_threads, p));
    sc_status st = dir[0] ? profile_write(path, p) : sc_errorf("no cache folder (HOME and XDG_CACHE_HOME unset)");
    if (st) {
        snprintf(where, where_size, "measured now, not cached: %s", sc_status_message(st));
        sc_status_free(st);
    } else {
        snprintf(where, where_size, "measured now, cached in %s", path);
    }
    return SC_OK;
}

sc_status sc_cost_profile_times(int threads, const sc_graph *g, double **times, char *where, size_t where_size) {
    *times = NULL;
    sc_cost_profile p;
    char from[1024];
    SC_TRY(sc_cost_profile_get(threads, &p, from, sizeof from));
    if (!(p.conv_flops > 0)) {
        snprintf(where, where_size, "the built-in constants (%s)", from);
        return SC_OK;
    }
    *times = malloc(sizeof(double) * ((size_t)g->n_nodes + 1));
    if (!*times) return sc_errorf("out of memory");
    cost_profile_node_times(&p, g, *times);
    snprintf(where, where_size, "this machine's cost profile (%s)", from);
    return SC_OK;
}
