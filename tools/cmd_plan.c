/* `scorch-run plan MODEL.onnx --batch N --memory SIZE [--strategy S] [--offload O] [--slots S]`: builds
 * the training graph exactly as `train` does (same loss head, SGD with momentum 0.9 or AdamW) and the
 * plan under the budget, and prints what the plan costs (tools/plan_report.h): strategy used,
 * segments, planned peak against the store-everything peak, fixed bytes, recompute FLOPs and time
 * share, bytes moved, predicted step time. --json prints the same as one object; --trace writes a
 * Chrome/Perfetto trace, --svg a memory timeline.
 *
 * By default nothing is executed. --measure N runs the plan: a training session (train/trainer.h,
 * synthetic data, learning rate 0 so nothing diverges) built with the plan, one warm-up step, N
 * timed ones and, on the CPU, N more with the profile hook (tools/step_time.h); the summary adds
 * the median measured step time (wall clock, and the kernels' thread CPU time, which other jobs
 * barely change) and the prediction's error against both.
 * --calibrate first measures every node of the training graph (train/calibrate.h) and plans with
 * those times and the measured copy rate; it implies --measure 3, and the summary shows the
 * uncalibrated cost model's prediction of the same plan next to the calibrated one, so both errors
 * can be read off.
 * --device cuda|auto plans for the GPU that train would use: the plan is built by a training session
 * on that device, so its node times are the GPU's own (train/cost_profile.h: each kernel shape
 * timed there once and cached per GPU model) and its link the measured pinned copy rate; with
 * --measure the steps run there and the error is against their wall time (a GPU's kernels are not
 * host CPU time). The default, cpu, needs no device and executes nothing.
 * An infeasible budget exits 1 with plan_build's message (it names the smallest feasible budget).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/cpu/cpu.h"
#include "graph/passes.h"
#include "import/onnx.h"
#include "tools/cmd.h"
#include "tools/model_load.h"
#include "tools/plan_report.h"
#include "tools/step_time.h"
#include "train/calibrate.h"
#include "train/cost_profile.h"
#include "train/trainer.h"

typedef struct {
    const char *path;
    int64_t batch, seq;
    bool adamw;
    float clip; /* global-norm gradient clipping as train --clip (0: none) */
    sc_dtype precision;
    int ranks;  /* data parallel as `mpirun -np N ... train`: the step of one rank, all-reduces included */
    int64_t param_block; /* --param-block as train's (0: the default) */
    sc_device device;    /* --device: CPU plans without a backend; others through a training session */
} plan_model_opts;

typedef struct {
    sc_model *model;
    sc_training_graph tg;
} plan_model;

static sc_status plan_model_load(const plan_model_opts *o, plan_model *pm) {
    memset(pm, 0, sizeof *pm);
    SC_TRY(sc_model_load(o->path, &pm->model));
    sc_graph *g = &pm->model->graph;
    sc_bind_options bo = {.batch = o->batch, .seq = o->seq, .eval = cpu_evaluator(), .precision = o->precision};
    sc_train_options to;
    sc_train_options_default(&to); /* as sc_trainer_config_default + cmd_train's optimizer defaults */
    to.optim = o->adamw ? SC_OPTIM_ADAMW : SC_OPTIM_SGD;
    to.momentum = o->adamw ? 0.0f : 0.9f;
    to.weight_decay = o->adamw ? 0.01f : 0.0f;
    to.clip_norm = o->clip;
    to.loss_scaling = o->precision == SC_F16; /* as the trainer: the scale inputs are part of the step */
    to.ranks = o->ranks;
    to.param_block = o->param_block;
    sc_status st = sc_status_prefix(graph_prepare(g, &bo), "%s: ", o->path);
    if (!st) st = sc_status_prefix(autodiff_build_training(g, &to, &pm->tg), "%s: ", o->path);
    if (st) {
        sc_model_free(pm->model);
        pm->model = NULL;
    }
    return st;
}

static void plan_model_free(plan_model *pm) {
    sc_model_free(pm->model); /* the training graph's arrays live in the graph's arena */
    pm->model = NULL;
}

static sc_status plan_none_peak(const sc_graph *g, const sc_training_graph *tg, const sc_plan_options *like,
                                int64_t *peak, int64_t *fixed, double *time) {
    sc_plan_options o = *like;
    o.strategy = SC_STRATEGY_NONE;
    o.offload = SC_OFFLOAD_NONE;
    o.budget = 0;
    o.slots = 0;
    sc_plan p = {0};
    SC_TRY(plan_build(g, tg, &o, &p));
    *peak = p.arena_bytes;
    *fixed = p.fixed_bytes;
    *time = p.predicted_time;
    plan_free(&p);
    return SC_OK;
}

/* A plan over PLAN_SLOW_RATIO times the store-everything step: the smallest budget whose plan (same
 * options otherwise) is within PLAN_CHEAP_RATIO, by bisection between the budget and the
 * store-everything peak (plans are monotone in the budget, plan.c), to 1/256 of the peak or 12
 * plans, whichever comes first. */
static sc_status cheap_budget_find(const sc_graph *g, const sc_training_graph *tg, const sc_plan_options *po,
                                   const sc_plan *p, plan_summary *s) {
    s->budget_cheap = -1;
    if (po->budget <= 0 || s->none_time <= 0 || p->predicted_time <= PLAN_SLOW_RATIO * s->none_time) return SC_OK;
    int64_t lo = po->budget, hi = s->none_peak, tol = s->none_peak / 256 > 4096 ? s->none_peak / 256 : 4096;
    s->budget_cheap = 0;
    for (int k = 0; k < 12 && hi - lo > tol; k++) {
        sc_plan_options o = *po;
        o.budget = lo + (hi - lo) / 2;
        sc_plan q = {0};
        sc_status st = plan_build(g, tg, &o, &q);
        bool cheap = !st && q.predicted_time <= PLAN_CHEAP_RATIO * s->none_time;
        if (cheap) s->budget_cheap = o.budget, s->time_cheap = q.predicted_time, hi = o.budget;
        else lo = o.budget;
        sc_status_free(st);
        plan_free(&q);
    }
    return SC_OK;
}

/* The store-everything peak for the comparison line, built on a second thread while the requested
 * plan is built: both only read the graph, and at depth 250000 the none plan alone takes 7 s. */
typedef struct {
    const sc_graph *g;
    const sc_training_graph *tg;
    const sc_plan_options *like;
    int64_t peak, fixed;
    double time;
    sc_status st;
} none_job;

static void *none_job_run(void *arg) {
    none_job *j = arg;
    j->st = plan_none_peak(j->g, j->tg, j->like, &j->peak, &j->fixed, &j->time);
    return NULL;
}

typedef struct {
    bool json, calibrate;
    int measure; /* timed steps, 0 = execute nothing */
    int threads; /* 0 = all cores */
    const char *trace, *svg, *graph;
} plan_outputs;

/* Summary, trace and SVG of plan p for graph (g, tg) under the model of po; have_none: s->none_peak
 * and none_fixed are filled already. */
static sc_status plan_show(const sc_graph *g, const sc_training_graph *tg, const sc_plan *p, const sc_plan_options *po,
                           bool have_none, plan_summary *s, const plan_outputs *out) {
    sc_cost_model m;
    cost_model_default(&m, po->link_bandwidth, po->node_time);
    if (!have_none) SC_TRY(plan_none_peak(g, tg, po, &s->none_peak, &s->none_fixed, &s->none_time));
    SC_TRY(cheap_budget_find(g, tg, po, p, s));
    SC_TRY(plan_summary_fill(g, tg, p, &m, s));
    if (out->json) plan_summary_json(stdout, g, s, p);
    else plan_summary_print(stdout, s, p);
    if (out->trace) {
        SC_TRY(plan_trace_write(out->trace, g, tg, p, &m));
        if (!out->json) printf("wrote %s\n", out->trace);
    }
    if (out->svg) {
        SC_TRY(plan_svg_write(out->svg, g, tg, p, s));
        if (!out->json) printf("wrote %s\n", out->svg);
    }
    if (out->graph) {
        SC_TRY(plan_graph_write(out->graph, g, tg, &m));
        if (!out->json) printf("wrote %s\n", out->graph);
    }
    return SC_OK;
}

/* Node times from this machine's cost profile into *po (owned by *times), unless it has some. */
static sc_status profile_times(const sc_graph *g, int threads, sc_plan_options *po, double **times, plan_summary *s,
                               char *where, size_t n) {
    *times = NULL;
    snprintf(where, n, "the built-in constants");
    s->cost_source = where;
    if (po->node_time) return SC_OK;
    SC_TRY(sc_cost_profile_times(threads, g, times, where, n));
    if (*times) po->node_time = *times, s->profiled = true;
    return SC_OK;
}

static sc_status plan_run(const plan_model_opts *mo, const sc_plan_options *po_in, plan_summary *s,
                          const plan_outputs *out) {
    plan_model pm;
    SC_TRY(plan_model_load(mo, &pm));
    const sc_graph *g = &pm.model->graph;
    sc_plan_options po_local = *po_in, *po = &po_local;
    double *times = NULL;
    char where[2400];
    sc_status pst = profile_times(g, out->threads, po, &times, s, where, sizeof where);
    if (pst) {
        plan_model_free(&pm);
        return pst;
    }
    /* A requested none plan (no streaming) is the store-everything plan itself: the budget only
     * decides whether it is accepted. */
    bool is_none = po->strategy == SC_STRATEGY_NONE && po->offload == SC_OFFLOAD_NONE;
    none_job job = {.g = g, .tg = &pm.tg, .like = po};
    pthread_t th;
    bool threaded = !is_none && pthread_create(&th, NULL, none_job_run, &job) == 0;
    sc_plan p = {0};
    sc_status st = plan_build(g, &pm.tg, po, &p);
    if (threaded) pthread_join(th, NULL);
    else if (!is_none && !st) none_job_run(&job);
    if (st) sc_status_free(job.st);
    else st = job.st;
    if (!st) {
        s->none_peak = is_none ? p.arena_bytes : job.peak;
        s->none_fixed = is_none ? p.fixed_bytes : job.fixed;
        s->none_time = is_none ? p.predicted_time : job.time;
        st = plan_show(g, &pm.tg, &p, po, true, s, out);
    }
    plan_free(&p);
    plan_model_free(&pm);
    free(times);
    return st;
}

/* --measure / --calibrate / --device other than cpu: the plan is built by a training session on the
 * device, and run there when measure > 0. */
static sc_status plan_run_measured(const plan_model_opts *mo, const sc_plan_options *po, plan_summary *s,
                                   const plan_outputs *out) {
    sc_trainer_config cfg;
    sc_trainer_config_default(&cfg);
    cfg.model_path = mo->path;
    cfg.batch = mo->batch;
    cfg.seq = mo->seq;
    cfg.lr = 0; /* timing only: every step trains the same weights */
    cfg.train.optim = mo->adamw ? SC_OPTIM_ADAMW : SC_OPTIM_SGD;
    cfg.train.momentum = mo->adamw ? 0.0f : 0.9f;
    cfg.train.weight_decay = mo->adamw ? 0.01f : 0.0f;
    cfg.train.clip_norm = mo->clip;
    cfg.train.param_block = mo->param_block;
    cfg.steps = step_times_count(out->measure, true);
    cfg.use_plan = true;
    cfg.plan = *po;
    cfg.link_bandwidth = po->link_bandwidth; /* --link-bandwidth (calibration comes later, into the plan only) */
    cfg.device = mo->device;
    /* A fixed count, the one the cost profile was measured with: train's thread governor would run
     * some of the timed steps on one thread (3 of the first 6 while it explores), and their median
     * would then compare a 2-thread prediction with a 1-thread step. */
    cfg.threads = out->threads > 0 ? out->threads : backend_host_threads();
    cfg.calibrate = out->calibrate;
    cfg.precision = mo->precision;
    sc_trainer *t = NULL;
    SC_TRY(sc_trainer_create(&cfg, &t));
    sc_graph *g = &sc_trainer_model(t)->graph;
    const sc_training_graph *tg = sc_trainer_graph(t);
    sc_plan_options o = *sc_trainer_plan_options(t); /* node times and link included when calibrated */
    s->cost_source = sc_trainer_cost_source(t);
    s->profiled = !out->calibrate && o.node_time != NULL;
    if (sc_trainer_calibration(t) && !out->json) plan_calibration_print(sc_trainer_calibration(t), g, stdout);
    char device[160];
    sc_device d = sc_trainer_device(t);
    snprintf(device, sizeof device, "%s", sc_device_name(d));
    char gpu[128];
    if (d != SC_DEVICE_CPU && backend_device_model(d, gpu, sizeof gpu))
        snprintf(device, sizeof device, "%s (%s)", sc_device_name(d), gpu);
    s->device = device;
    /* a GPU's kernel time would be the host's time of queuing them */
    step_times m;
    sc_status st = out->measure ? step_times_measure(t, out->measure, d == SC_DEVICE_CPU, &m) : SC_OK;
    if (!st && out->measure) s->measured_time = m.wall, s->measured_kernel_time = m.kernels;
    s->measured_steps = out->measure;
    int threads;
    int64_t runs[2];
    s->measured_threads = sc_trainer_thread_runs(t, &threads, runs) ? 0 : cfg.threads;
    if (!st) st = plan_show(g, tg, sc_trainer_plan(t), &o, false, s, out);
    sc_trainer_free(t);
    return st;
}

int cmd_plan(int argc, char **argv) {
    arg_opt opts[] = {
        STEP_SHAPE_OPTS,
        OPTIMIZER_OPT,
        CLIP_OPT,
        PARAM_BLOCK_OPT,
        {.name = "ranks", .kind = ARG_INT, .metavar = "N",
         .help = "plan one rank of a data-parallel job of N ranks (mpirun -np N ... train): the gradient "
                 "all-reduces are steps with their cost"},
        PLAN_CLI_OPTS,
        {.name = "json", .kind = ARG_FLAG, .help = "print the summary as one JSON object"},
        {.name = "trace", .kind = ARG_STR, .metavar = "FILE.json", .help = "write a Chrome/Perfetto trace of the plan"},
        {.name = "svg", .kind = ARG_STR, .metavar = "FILE.svg", .help = "write the device memory over the steps"},
        {.name = "graph", .kind = ARG_STR, .metavar = "FILE.json",
         .help = "write the training graph as the planner sees it (node times, value bytes) for an external solver "
                 "(bench/milp_oracle.py)"},
        PLAN_CALIBRATE_OPT,
        THREADS_OPT,
        {.name = "measure", .kind = ARG_INT, .metavar = "N",
         .help = "run the plan (1 warm-up + N steps on --device, N more on the CPU for the kernel time) and show the "
                 "measured step time against the prediction"},
        {.name = "device", .kind = ARG_STR, .metavar = "cpu|cuda|auto",
         .help = "the device planned for (default cpu; cuda and auto time node shapes on the GPU once, cached)"},
    };
    arg_spec spec = ARGS_MODEL_SPEC(
        "scorch-run plan MODEL.onnx [--memory SIZE] [options]",
        "Plans one training step (as `train` would build it) under a device memory budget and prints its\n"
        "predicted costs. Nothing is executed unless --measure or --calibrate is given.",
        opts);
    int exit_code;
    if (args_done(&spec, argc, argv, &exit_code)) return exit_code;
    plan_model_opts mo = {.path = spec.pos[0], .batch = 1};
    sc_plan_options po;
    plan_summary s = {.model = spec.pos[0]};
    bool given;
    const char *usage = plan_options_from_args(&spec, &po, &given, &s.requested, &s.offload);
    arg_opt *a;
    if (!usage && (a = args_get(&spec, "batch"))->set && (mo.batch = a->i) < 1) usage = "--batch must be at least 1";
    if (!usage && (a = args_get(&spec, "seq"))->set && (mo.seq = a->i) < 1) usage = "--seq must be at least 1";
    const char *why = NULL;
    if (!usage && (a = args_get(&spec, "precision"))->set && !(mo.precision = precision_parse(a->s, &why))) usage = why;
    s.precision = precision_word(mo.precision);
    if (!usage && (a = args_get(&spec, "optimizer"))->set) {
        if (!strcmp(a->s, "adamw")) mo.adamw = true;
        else if (strcmp(a->s, "sgd")) usage = "--optimizer must be sgd or adamw";
    }
    if (!usage && (a = args_get(&spec, "clip"))->set && !((mo.clip = (float)a->f) > 0)) usage = "--clip must be > 0";
    if (!usage && (a = args_get(&spec, "param-block"))->set && !(mo.param_block = sc_param_block_parse(a->s)))
        usage = PARAM_BLOCK_USAGE;
    if (!usage && (a = args_get(&spec, "ranks"))->set && ((mo.ranks = (int)a->i) < 1 || a->i > 1 << 20))
        usage = "--ranks must be at least 1";
    plan_outputs out = {.json = args_get(&spec, "json")->set, .trace = args_get(&spec, "trace")->s,
                        .svg = args_get(&spec, "svg")->s, .graph = args_get(&spec, "graph")->s, .calibrate = args_get(&spec, "calibrate")->set};
    if (!usage && (a = args_get(&spec, "measure"))->set && ((out.measure = (int)a->i) < 1 || a->i > 1000))
        usage = "--measure takes a step count between 1 and 1000";
    if (out.calibrate && !out.measure) out.measure = 3;
    mo.device = SC_DEVICE_CPU;
    if (!usage && (a = args_get(&spec, "device"))->set) {
        int k = device_parse(a->s);
        if (k < 0) usage = "--device must be cpu, cuda or auto";
        else mo.device = (sc_device)k;
    }
    if (!usage && mo.ranks > 1 && (out.measure || mo.device != SC_DEVICE_CPU))
        usage = "--ranks plans a rank of a job that is not running: measure under mpirun with train instead, and "
                "plan it without --device";
    if (!usage && (a = args_get(&spec, "threads"))->set && ((out.threads = (int)a->i) < 1))
        usage = "--threads must be at least 1";
    if (usage) {
        args_error("%s", usage);
        args_free(&spec);
        return 2;
    }
    s.batch = mo.batch, s.seq = mo.seq, s.budget = po.budget, s.slots = po.slots, s.ranks = mo.ranks;
    bool session = out.measure || mo.device != SC_DEVICE_CPU;
    sc_status st = session ? plan_run_measured(&mo, &po, &s, &out) : plan_run(&mo, &po, &s, &out);
    args_free(&spec);
    return cmd_report(st);
}
