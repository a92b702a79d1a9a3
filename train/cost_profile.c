/* This machine's cost profile: micro-benchmarks on the CPU backend and their cache (contract in
 * cost_profile.h). */
#include "train/cost_profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "core/atomic_write.h"
#include "graph/op_cost.h"
#include "train/cost_bench.h"

#define PROFILE_RUNS 7
#define PROBE_RUNS 3
#define PROFILE_FORMAT "scorch cost profile 3"

static sc_status bench_op_time(const sc_node_evaluator *ev, sc_op op, const sc_attrs *a, const sc_desc *in, int n_in,
                               int n_out, int repeat, double *seconds, sc_op_cost *cost) {
    bench_op b;
    sc_status st = bench_make(&b, op, a, in, n_in, n_out);
    if (!st) st = bench_time(ev, &b, PROFILE_RUNS, repeat, repeat == 1 ? BENCH_COLD_ALL : BENCH_WARM, seconds);
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
/* The profile's first figure, conv_flops (a 3x3 convolution, batch 8, 64 -> 64 channels, 56x56),
 * over `runs` runs; also the probe that checks a cached profile against the machine. */
static sc_status conv_rate(const sc_node_evaluator *ev, int runs, double *rate) {
    sc_attrs conv = window_attrs(3, 1, 1, false);
    sc_desc cin[2] = {desc4(8, 64, 56, 56), desc4(64, 64, 3, 3)};
    bench_op b;
    sc_status st = bench_make(&b, SC_OP_CONV, &conv, cin, 2, 1);
    double t = 0;
    if (!st) st = bench_time(ev, &b, runs, 1, BENCH_COLD_ALL, &t);
    if (!st) *rate = t > 0 ? sc_node_cost(&b.g, &b.g.nodes[b.node]).flops / t : 0;
    bench_free(&b);
    return st;
}

static sc_status measure_with(const sc_node_evaluator *ev, sc_cost_profile *p) {
    sc_op_cost c;
    double t;
    sc_attrs conv = window_attrs(3, 1, 1, false), conv1 = window_attrs(1, 1, 0, false);
    SC_TRY(conv_rate(ev, PROFILE_RUNS, &p->conv_flops));
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

/* Runs measure (the profile) or, without it, the probe into *probe, on a CPU backend of `threads`. */
static sc_status with_cpu(int threads, sc_cost_profile *measure, double *probe) {
    sc_backend *be = NULL;
    sc_backend_config cpu = {.device = SC_DEVICE_CPU};
    SC_TRY(backend_open(&cpu, &be));
    if (threads > 0) be->iface->set_threads(be, threads);
    sc_status st = bench_caches_open();
    const sc_node_evaluator *ev = be->iface->evaluator(be);
    if (!st) st = measure ? measure_with(ev, measure) : conv_rate(ev, PROBE_RUNS, probe);
    bench_caches_close();
    backend_destroy(be);
    return st;
}

sc_status sc_cost_profile_measure(int threads, sc_cost_profile *p) {
    memset(p, 0, sizeof *p);
    sc_status st = with_cpu(threads, p, NULL);
    if (!st && !profile_valid(p))
        st = sc_errorf("the cost profile's micro-benchmarks measured a zero time");
    return st;
}

/* ---- the cache ---- */

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

/* Whether the cached profile still describes the machine: its 3x3 convolution measured again runs
 * within SC_COST_PROFILE_DRIFT of the cached rate. A probe that cannot run keeps the cache. */
static bool profile_current(int threads, const sc_cost_profile *p, double *now) {
    *now = 0;
    sc_status st = with_cpu(threads, NULL, now);
    sc_status_free(st);
    double r = *now > 0 ? *now / p->conv_flops : 1;
    return st || (r <= SC_COST_PROFILE_DRIFT && r >= 1 / SC_COST_PROFILE_DRIFT);
}

sc_status sc_cost_profile_get(int threads, sc_cost_profile *p, char *where, size_t where_size) {
    memset(p, 0, sizeof *p);
    if (sc_cost_profile_off()) {
        snprintf(where, where_size, "off (SCORCH_COST_PROFILE=off: the built-in constants)");
        return SC_OK;
    }
    int n_threads = threads > 0 ? threads : backend_host_threads();
    char path[1536], stale[256] = "";
    double now = 0;
    sc_status pst = bench_cache_path("cost-profile", NULL, n_threads, path, sizeof path);
    if (!pst && profile_parse(path, p)) {
        if (profile_current(n_threads, p, &now)) {
            snprintf(where, where_size, "cached in %s", path);
            return SC_OK;
        }
        snprintf(stale, sizeof stale, " (the cached one said %.3g GFLOP/s for its 3x3 convolution, the machine now ran it "
                 "at %.3g)", p->conv_flops * 1e-9, now * 1e-9);
    }
    sc_status st = sc_cost_profile_measure(n_threads, p);
    if (st) {
        sc_status_free(pst);
        return st;
    }
    st = pst ? pst : profile_write(path, p);
    const char *again = stale[0] ? "measured again" : "measured now";
    if (st) {
        snprintf(where, where_size, "%s%s, not cached: %s", again, stale, sc_status_message(st));
        sc_status_free(st);
    } else {
        snprintf(where, where_size, "%s%s, cached in %s", again, stale, path);
    }
    return SC_OK;
}

void sc_cost_profile_gpu(sc_cost_profile *p) {
    *p = (sc_cost_profile){.conv_flops = 30e12, .conv_grad_flops = 30e12, .conv1x1_flops = 20e12,
                           .conv1x1_grad_flops = 20e12, .gemm_flops = 30e12, .norm_bandwidth = 1e12,
                           .norm_grad_bandwidth = 0.7e12, .pool_rate = 200e9, .elem_rate = 500e9,
                           .mem_bandwidth = 2e12, .node_overhead = 5e-6};
}

sc_status sc_cost_profile_times(int threads, const sc_graph *g, double **times, char *where, size_t where_size) {
    *times = NULL;
    sc_cost_profile p;
    char from[1024], shapes[1024];
    SC_TRY(sc_cost_profile_get(threads, &p, from, sizeof from));
    if (!(p.conv_flops > 0)) {
        snprintf(where, where_size, "the built-in constants (%s)", from);
        return SC_OK;
    }
    sc_shape_table t;
    SC_TRY(sc_shape_table_get(SC_DEVICE_CPU, threads, &p, g, &t, shapes, sizeof shapes));
    *times = malloc(sizeof(double) * ((size_t)g->n_nodes + 1));
    if (!*times) {
        sc_shape_table_free(&t);
        return sc_errorf("out of memory");
    }
    cost_profile_node_times(&p, g, *times);
    sc_status st = sc_shape_table_apply(&t, g, *times);
    sc_shape_table_free(&t);
    if (st) {
        free(*times);
        *times = NULL;
        return st;
    }
    snprintf(where, where_size, "this machine's cost profile (%s%s%s)", from, shapes[0] ? "; " : "", shapes);
    return SC_OK;
}
