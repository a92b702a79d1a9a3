/* Measured per-node times and link bandwidth for the planner (contract in calibrate.h). */
#include "core/stats.h"
#include "train/calibrate.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "backends/profile.h"
#include "train/trainer_internal.h"

static double median(double *x, int n) { return n > 0 ? sc_median(x, (size_t)n) : 0; }

void sc_calibration_free(sc_calibration *c) {
    free(c->node_time);
    free(c->op);
    memset(c, 0, sizeof *c);
}

sc_status sc_calibration_check(const sc_calibration *c, const sc_graph *g) {
    if (c->n_nodes != g->n_nodes)
        return sc_errorf("calibration: measured a graph of %d nodes, planning one of %d", c->n_nodes, g->n_nodes);
    for (int i = 0; i < g->n_nodes; i++)
        if (c->op[i] != (int)g->nodes[i].op)
            return sc_errorf("calibration: node %d is %s in the measured graph and %s ('%s') in the planned one", i,
                             sc_op_name((sc_op)c->op[i]), sc_op_name(g->nodes[i].op), g->nodes[i].name);
    return SC_OK;
}

/* The CPU backend's copy rate: round trips of one buffer through its copy thread. */
static sc_status link_measure(double *bandwidth) {
    int64_t n = SC_CALIBRATE_LINK_BYTES;
    sc_backend *be = NULL;
    sc_backend_config cpu = {.device = SC_DEVICE_CPU, .capacity = n};
    SC_TRY(backend_open(&cpu, &be));
    void *dev = NULL, *host = aligned_alloc(64, (size_t)n);
    sc_status st = host ? be->iface->arena_create(be, n, &dev) : sc_errorf("out of memory");
    double t[SC_CALIBRATE_LINK_REPS];
    if (!st) memset(host, 1, (size_t)n); /* touch the pages before timing */
    for (int r = 0; r < SC_CALIBRATE_LINK_REPS && !st; r++) {
        int64_t a, b;
        double t0 = sc_clock_seconds();
        st = be->iface->copy_h2d(be, dev, host, n, &a);
        if (!st) st = be->iface->copy_d2h(be, host, dev, n, &b);
        if (!st) st = be->iface->wait(be, b);
        t[r] = sc_clock_seconds() - t0;
    }
    if (!st) {
        double m = median(t, SC_CALIBRATE_LINK_REPS);
        *bandwidth = m > 0 ? 2.0 * (double)n / m : 0;
    }
    free(host);
    backend_destroy(be);
    return st;
}

/* A GPU's link: one direction at a time, each copy waited for, between pinned host memory and the
 * device, as the streaming steps copy. */
static sc_status device_link_times(sc_backend *be, void *dev, void *host, int64_t n, double *up, double *down) {
    double t[2][SC_CALIBRATE_LINK_REPS];
    for (int r = 0; r < SC_CALIBRATE_LINK_REPS; r++) {
        int64_t id;
        double t0 = sc_clock_seconds();
        SC_TRY(be->iface->copy_h2d(be, dev, host, n, &id));
        SC_TRY(be->iface->wait(be, id));
        double t1 = sc_clock_seconds();
        SC_TRY(be->iface->copy_d2h(be, host, dev, n, &id));
        SC_TRY(be->iface->wait(be, id));
        t[0][r] = t1 - t0, t[1][r] = sc_clock_seconds() - t1;
    }
    *up = median(t[0], SC_CALIBRATE_LINK_REPS);
    *down = median(t[1], SC_CALIBRATE_LINK_REPS);
    return SC_OK;
}

sc_status sc_link_measure_device(sc_device d, double *bandwidth) {
    *bandwidth = 0;
    int64_t n = SC_CALIBRATE_LINK_BYTES;
    sc_backend *be = NULL;
    sc_backend_config c = {.device = d};
    SC_TRY(backend_open(&c, &be));
    void *dev = NULL, *host = be->iface->host_alloc ? be->iface->host_alloc(be, n) : NULL;
    sc_status st = host ? be->iface->arena_create(be, n, &dev) : sc_errorf("no pinned host memory to time the link");
    double up = 0, down = 0;
    if (!st) memset(host, 1, (size_t)n);
    if (!st) st = device_link_times(be, dev, host, n, &up, &down);
    if (!st && up + down > 0) *bandwidth = 2.0 * (double)n / (up + down);
    if (host) be->iface->host_free(be, host);
    backend_destroy(be);
    return st;
}

typedef struct {
    sc_plan plan;
    sc_backend *be;
    sc_plan_session *session;
    sc_tensor *outs;
    double *samples; /* [runs][n_nodes] */
    double *steps;   /* [runs] */
} calib_run;

static void run_free(calib_run *r, int n_outputs) {
    if (r->outs)
        for (int i = 0; i < n_outputs; i++) sc_tensor_free_data(&r->outs[i]);
    free(r->outs);
    plan_session_free(r->session);
    backend_destroy(r->be);
    plan_free(&r->plan);
    free(r->samples);
    free(r->steps);
}

static sc_status feeds_prepare(sc_trainer *t) {
    sc_graph *g = &t->model->graph;
    train_prefetch_wait(&t->prefetch); /* the worker shares the data */
    SC_TRY(train_data_fill(&t->data, g, train_shard_sample(t), t->feeds));
    train_scalars_fill(t, t->feeds, t->cfg.lr, t->skipped + 1);
    return SC_OK;
}

/* One step of the none plan; with row, each node's kernel time (ms, profile hook) goes to row[node]. */
static sc_status run_once(calib_run *r, sc_trainer *t, double *row, double *step_s) {
    sc_graph *g = &t->model->graph;
    for (int i = 0; i < g->n_outputs; i++) sc_tensor_free_data(&r->outs[i]);
    r->be->iface->params_changed(r->be);
    bool was = sc_profile_enabled();
    if (row) {
        sc_profile_nodes(g, row);
        sc_profile_clock_cpu(true);
        sc_profile_enable(true);
    }
    sc_status st = plan_session_step(r->session, t->feeds, r->outs);
    if (row) {
        sc_profile_enable(was);
        sc_profile_clock_cpu(false);
        sc_profile_nodes(NULL, NULL);
    }
    SC_TRY(st);
    sc_plan_stats ps;
    plan_session_stats(r->session, &ps);
    if (step_s) *step_s = ps.step_seconds;
    return SC_OK;
}

static sc_status calibrate_nodes(sc_trainer *t, int warmup, int runs, calib_run *r, sc_calibration *c) {
    sc_graph *g = &t->model->graph;
    sc_plan_options o = {.strategy = SC_STRATEGY_NONE, .offload = SC_OFFLOAD_NONE};
    SC_TRY(plan_build(g, &t->tg, &o, &r->plan));
    sc_backend_config cpu = {.device = SC_DEVICE_CPU, .capacity = r->plan.arena_bytes};
    SC_TRY(backend_open(&cpu, &r->be));
    SC_TRY(plan_session_create(r->be, g, &r->plan, &r->session));
    r->outs = calloc((size_t)g->n_outputs + 1, sizeof *r->outs);
    r->samples = calloc((size_t)runs * (size_t)g->n_nodes + 1, sizeof *r->samples);
    r->steps = calloc((size_t)runs + 1, sizeof *r->steps);
    if (!r->outs || !r->samples || !r->steps) return sc_errorf("out of memory calibrating");
    SC_TRY(feeds_prepare(t));
    r->be->iface->set_seed(r->be, t->cfg.seed, 1);
    for (int i = 0; i < warmup; i++) SC_TRY(run_once(r, t, NULL, NULL));
    for (int i = 0; i < runs; i++) SC_TRY(run_once(r, t, r->samples + (size_t)i * (size_t)g->n_nodes, &r->steps[i]));
    double *col = malloc(sizeof *col * (size_t)runs);
    if (!col) return sc_errorf("out of memory calibrating");
    for (int n = 0; n < g->n_nodes; n++) {
        for (int i = 0; i < runs; i++) col[i] = r->samples[(size_t)i * (size_t)g->n_nodes + (size_t)n];
        c->node_time[n] = 1e-3 * median(col, runs);
        c->op[n] = (int)g->nodes[n].op;
    }
    free(col);
    c->step_time = median(r->steps, runs);
    return SC_OK;
}

sc_status train_calibrate_once(sc_trainer *t) {
    if (t->cal.n_nodes) return SC_OK;
    SC_TRY(sc_trainer_calibrate(t, SC_CALIBRATE_WARMUP, SC_CALIBRATE_RUNS, &t->cal));
    sc_status st = sc_calibration_check(&t->cal, &t->model->graph);
    if (st) sc_calibration_free(&t->cal);
    return st;
}

const sc_calibration *sc_trainer_calibration(const sc_trainer *t) { return t->cal.n_nodes ? &t->cal : NULL; }

sc_status sc_trainer_calibrate(sc_trainer *t, int warmup, int runs, sc_calibration *out) {
    memset(out, 0, sizeof *out);
    if (runs < 1 || warmup < 0) return sc_errorf("calibration: runs must be at least 1 (got %d), warm-up >= 0", runs);
    if (t->cfg.device != SC_DEVICE_CPU)
        return sc_errorf("calibration: not supported on device %s (it measures the CPU backend)",
                         sc_device_name(t->cfg.device));
    const sc_graph *g = &t->model->graph;
    out->n_nodes = g->n_nodes;
    out->runs = runs;
    out->node_time = calloc((size_t)g->n_nodes + 1, sizeof *out->node_time);
    out->op = calloc((size_t)g->n_nodes + 1, sizeof *out->op);
    if (!out->node_time || !out->op) {
        sc_calibration_free(out);
        return sc_errorf("out of memory calibrating");
    }
    calib_run r;
    memset(&r, 0, sizeof r);
    sc_status st = calibrate_nodes(t, warmup, runs, &r, out);
    run_free(&r, g->n_outputs);
    train_backends_params_changed(t); /* the trainer's own weights are at other addresses than the ones just used */
    if (!st) st = link_measure(&out->link_bandwidth);
    if (st) {
        sc_calibration_free(out);
        return sc_status_prefix(st, "calibration: ");
    }
    return SC_OK;
}
