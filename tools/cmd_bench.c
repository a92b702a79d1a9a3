/* `scorch-run bench MODEL.onnx --batch N --memories a,b,c --strategies none,sqrt,dc,optimal,evict`: measures
 * the memory/time trade-off of strategies by running training steps with their plans (train/trainer.h
 * with use_plan; one session, re-planned per point, learning rate 0 so every point trains the same
 * weights and nothing diverges).
 *
 * Baseline: the store-everything plan (strategy none, no budget). For every (strategy, memory) pair
 * whose plan fits: one warm-up step, then --steps measured steps, twice (tools/step_time.h). Per point:
 * the step time, the median wall time of the plan executions of the first --steps (host-side data
 * filling and the NaN check excluded; no profile hook, whose clock reads would inflate it); the kernel
 * CPU time, the median of the second --steps' kernel times summed on the thread CPU clock (per-op
 * profile hook, backends/profile.h: with one thread the compute itself, which other jobs on a shared
 * machine inflate far less than the wall time; the executor's own work is left out); planned and measured
 * peak (the executor's arena high-water mark), activation memory (measured peak - fixed bytes) and
 * its cut vs none, both overheads vs none (the none plan measured again right after each point: a shared
 * machine's speed drifts over the minutes a table takes, so each point is compared with a baseline
 * measured under the same load; the first baseline row is the one shown), recompute factor (forward FLOPs run / forward FLOPs of one
 * pass). Memories are sizes (256MiB, 1.5GiB, bytes) or percentages of the none plan's peak ("60%").
 * Output: a markdown table on stdout, --csv FILE, --svg FILE (wall-time overhead against activation
 * memory per strategy, tools/plan_report.h).
 *
 * Predictions: every point also shows the step time its plan predicts and its error against the
 * measured kernel CPU time, by the uncalibrated cost model (schedule/cost.h) and, with --calibrate,
 * by the calibrated one: all points are then planned with per-node times measured once on the CPU
 * backend before the first point (train/calibrate.h), so the table shows both prediction errors and
 * the plans calibration picks.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/backend.h"
#include "import/onnx.h"
#include "schedule/cost.h"
#include "tools/cmd.h"
#include "tools/model_load.h"
#include "core/units.h"
#include "tools/plan_report.h"
#include "tools/step_time.h"
#include "train/trainer.h"

typedef struct {
    const char *strategy;
    int64_t budget;          /* 0 = unlimited (the baseline) */
    bool feasible;
    char why[512];           /* infeasible: the planner's message */
    sc_strategy used;
    int segments;
    int64_t planned_peak, measured_peak, fixed;
    double time, predicted, recompute_factor;
    double model_predicted; /* the uncalibrated cost model's prediction of the same plan */
    double cpu_time;        /* median over the steps of the kernels' summed thread CPU time */
    double base_time, base_cpu; /* the store-everything plan's, measured right after this point (0: none) */
} bench_row;

/* r's overhead over the store-everything step: against the baseline measured right after it when
 * there is one (a shared machine's speed drifts over minutes; adjacent runs see the same load),
 * else against the run's first baseline. cpu: the kernel CPU times instead of the wall times. */
static double overhead(const bench_row *r, const bench_row *none, bool cpu) {
    double t = cpu ? r->cpu_time : r->time, b = cpu ? r->base_cpu : r->base_time;
    if (b <= 0) b = cpu ? none->cpu_time : none->time;
    return b > 0 ? t / b - 1.0 : 0.0;
}

static double forward_flops(const sc_graph *g, const sc_training_graph *tg) {
    double f = 0;
    for (int i = 0; i < tg->n_forward_nodes; i++) f += cost_node_flops(g, i);
    return f;
}

/* Replans t under (strategy, budget) and runs warm-up + steps; fills r. Infeasible plans are not an
 * error: r->feasible = false with the planner's message. */
static sc_status bench_point_run(sc_trainer *t, const sc_plan_options *base, bench_row *r, int steps, double fwd_flops) {
    sc_cost_model model;
    cost_model_default(&model, 0, NULL);
    sc_plan_options o = *base;
    o.strategy = (sc_strategy)plan_strategy_parse(r->strategy);
    o.budget = r->budget;
    if (o.strategy != SC_STRATEGY_DC) o.slots = 0;
    sc_status st = sc_trainer_replan(t, &o);
    if (st) {
        snprintf(r->why, sizeof r->why, "%s", sc_status_message(st));
        sc_status_free(st);
        r->feasible = false;
        return SC_OK;
    }
    r->feasible = true;
    const sc_plan *p = sc_trainer_plan(t);
    r->used = p->strategy;
    r->segments = p->n_segments;
    r->planned_peak = p->arena_bytes;
    r->fixed = p->fixed_bytes;
    r->predicted = p->predicted_time;
    r->recompute_factor = fwd_flops > 0 ? 1.0 + p->recompute_flops / fwd_flops : 1.0;
    SC_TRY(plan_timeline_time(&sc_trainer_model(t)->graph, p, &model, &r->model_predicted));
    step_times m;
    st = step_times_measure(t, steps, true, &m);
    if (!st) r->time = m.wall, r->cpu_time = m.kernels, r->measured_peak = m.peak;
    return st ? sc_status_prefix(st, "%s at %lld bytes: ", r->strategy, (long long)r->budget) : SC_OK;
}

/* ---- output ---- */

enum { N_COLS = 13 };

/* "412.1 (+3.0%)": a predicted step time in ms and its error against the measured kernel CPU time
 * (what the prediction models: the kernels' run times; on a shared machine the wall time also holds
 * the time other jobs took). */
static void pred_cell(char *cell, double predicted, double measured) {
    snprintf(cell, 48, "%.2f (%+.1f%%)", predicted * 1e3, measured > 0 ? 100.0 * (predicted / measured - 1.0) : 0.0);
}

static void row_cells(const bench_row *r, const bench_row *none, bool calibrated, char cells[N_COLS][48]) {
    char a[32];
    snprintf(cells[0], 48, "%s", r->strategy);
    snprintf(cells[1], 48, "%s", r->budget ? fmt_bytes(r->budget, a, sizeof a) : "unlimited");
    if (!r->feasible) {
        snprintf(cells[2], 48, "infeasible");
        for (int i = 3; i < N_COLS; i++) snprintf(cells[i], 48, "-");
        return;
    }
    int64_t act = r->measured_peak - r->fixed, act0 = none->measured_peak - none->fixed;
    snprintf(cells[2], 48, "%s", fmt_bytes(r->planned_peak, a, sizeof a));
    snprintf(cells[3], 48, "%s", fmt_bytes(r->measured_peak, a, sizeof a));
    snprintf(cells[4], 48, "%s", fmt_bytes(act, a, sizeof a));
    snprintf(cells[5], 48, "%.1f%%", act0 > 0 ? 100.0 * (1.0 - (double)act / (double)act0) : 0.0);
    snprintf(cells[6], 48, "%.2f", r->time * 1e3);
    snprintf(cells[7], 48, "%+.1f%%", 100.0 * overhead(r, none, false));
    snprintf(cells[8], 48, "%.2f", r->cpu_time * 1e3);
    snprintf(cells[9], 48, "%+.1f%%", 100.0 * overhead(r, none, true));
    snprintf(cells[10], 48, "%.2f", r->recompute_factor);
    pred_cell(cells[11], r->model_predicted, r->cpu_time);
    if (calibrated) pred_cell(cells[12], r->predicted, r->cpu_time);
    else snprintf(cells[12], 48, "-");
}

static void table_print(const bench_row *rows, int n, const bench_row *none, bool calibrated) {
    static const char *const head[N_COLS] = {"strategy", "budget", "planned peak", "measured peak", "activations",
                                             "act. cut", "step ms", "overhead", "kernel CPU ms", "CPU overhead",
                                             "recompute", "model ms (err)", "calibrated ms (err)"};
    int cols = calibrated ? N_COLS : N_COLS - 1;
    printf("|");
    for (int i = 0; i < cols; i++) printf(" %s |", head[i]);
    printf("\n|");
    for (int i = 0; i < cols; i++) printf("%s|", i < 2 ? "---" : "---:");
    printf("\n");
    for (int k = -1; k < n; k++) {
        char cells[N_COLS][48];
        const bench_row *r = k < 0 ? none : &rows[k];
        row_cells(r, none, calibrated, cells);
        printf("|");
        for (int i = 0; i < cols; i++) printf(" %s%s |", cells[i], k < 0 && i == 0 ? " (baseline)" : "");
        printf("\n");
    }
    for (int k = 0; k < n; k++)
        if (!rows[k].feasible) printf("\n%s at %lld bytes: %s", rows[k].strategy, (long long)rows[k].budget, rows[k].why);
    printf("\n");
}

static sc_status csv_write(const char *path, const char *model, const bench_row *rows, int n, const bench_row *none) {
    size_t cap = 512 + (size_t)(n + 1) * 400, len = 0;
    char *buf = malloc(cap);
    if (!buf) return sc_errorf("out of memory");
    len += (size_t)snprintf(buf + len, cap - len,
                            "model,strategy,used,budget,feasible,segments,planned_peak,measured_peak,fixed_bytes,"
                            "activation_bytes,activation_cut,step_time_s,overhead,recompute_factor,predicted_time_s,"
                            "model_predicted_time_s,kernel_cpu_time_s\n");
    int64_t act0 = none->measured_peak - none->fixed;
    for (int k = -1; k < n; k++) {
        const bench_row *r = k < 0 ? none : &rows[k];
        int64_t act = r->measured_peak - r->fixed;
        if (!r->feasible)
            len += (size_t)snprintf(buf + len, cap - len, "%s,%s,,%lld,0,,,,,,,,,,,,\n", model, r->strategy,
                                    (long long)r->budget);
        else
            len += (size_t)snprintf(buf + len, cap - len, "%s,%s,%s,%lld,1,%d,%lld,%lld,%lld,%lld,%.6f,%.9g,%.6f,%.6f,%.9g,%.9g,%.9g\n",
                                    model, r->strategy, plan_strategy_name(r->used), (long long)r->budget, r->segments,
                                    (long long)r->planned_peak, (long long)r->measured_peak, (long long)r->fixed,
                                    (long long)act, act0 > 0 ? 1.0 - (double)act / (double)act0 : 0.0, r->time,
                                    overhead(r, none, false), r->recompute_factor, r->predicted,
                                    r->model_predicted, r->cpu_time);
    }
    sc_status st = sc_write_file_atomic(path, buf, len);
    free(buf);
    return st;
}

static sc_status svg_write(const char *path, const char *model, const bench_row *rows, int n, const bench_row *none) {
    bench_point *pts = calloc((size_t)n + 1, sizeof *pts);
    if (!pts) return sc_errorf("out of memory");
    int m = 0;
    pts[m++] = (bench_point){"none", 0, none->measured_peak - none->fixed, 0.0};
    for (int k = 0; k < n; k++)
        if (rows[k].feasible)
            pts[m++] = (bench_point){rows[k].strategy, rows[k].budget, rows[k].measured_peak - rows[k].fixed,
                                     overhead(&rows[k], none, false)};
    char title[512];
    snprintf(title, sizeof title, "%s: time overhead vs activation memory (measured)", model);
    sc_status st = bench_svg_write(path, title, pts, m);
    free(pts);
    return st;
}

/* ---- arguments ---- */

/* Splits a comma list in place into at most max items. */
static int split(char *s, char **items, int max) {
    int n = 0;
    for (char *tok = strtok(s, ","); tok && n < max; tok = strtok(NULL, ",")) items[n++] = tok;
    return n;
}

typedef struct {
    char *strategies_buf, *memories_buf;
    char *strategies[8], *memories[64];
    int n_strategies, n_memories, steps;
    const char *csv, *svg;
    bool calibrate;
} bench_args;

static sc_status bench_run(sc_trainer_config *cfg, const sc_plan_options *base_in, bench_args *a) {
    sc_trainer *t = NULL;
    SC_TRY(sc_trainer_create(cfg, &t));
    sc_model *model = sc_trainer_model(t);
    sc_plan_options calibrated = *base_in, *base = &calibrated;
    sc_calibration cal = {0};
    if (a->calibrate) {
        sc_status cs = plan_calibrate(t, &model->graph, base, &cal, stdout);
        if (cs) {
            sc_trainer_free(t);
            return cs;
        }
    }
    double fwd = forward_flops(&model->graph, sc_trainer_graph(t));
    bench_row none = {.strategy = "none", .budget = 0};
    sc_status st = bench_point_run(t, base, &none, a->steps, fwd);
    if (!st && !none.feasible) st = sc_errorf("the store-everything plan failed: %s", none.why);
    int n = a->n_strategies * a->n_memories;
    bench_row *rows = calloc((size_t)n + 1, sizeof *rows);
    if (!st && !rows) st = sc_errorf("out of memory");
    for (int i = 0; !st && i < a->n_strategies; i++)
        for (int j = 0; !st && j < a->n_memories; j++) {
            bench_row *r = &rows[i * a->n_memories + j];
            r->strategy = a->strategies[i];
            const char *m = a->memories[j];
            size_t len = strlen(m);
            if (len > 1 && m[len - 1] == '%') r->budget = (int64_t)(atof(m) / 100.0 * (double)none.planned_peak);
            else r->budget = sc_parse_size(m);
            st = bench_point_run(t, base, r, a->steps, fwd);
            if (!st)
                fprintf(stderr, "bench: %s at %s: %s\n", r->strategy, m,
                        r->feasible ? "measured" : "infeasible");
            bench_row again = {.strategy = "none", .budget = 0};
            if (!st && r->feasible) st = bench_point_run(t, base, &again, a->steps, fwd);
            if (!st && again.feasible) r->base_time = again.time, r->base_cpu = again.cpu_time;
        }
    if (!st) {
        printf("%s, %s, %d measured steps per point (median), on %s (%d CPU threads), planned with %s; overheads "
               "against the store-everything plan measured again right after each point\n\n",
               cfg->model_path, sc_trainer_data_desc(t), a->steps, sc_device_name(sc_trainer_device(t)), cfg->threads,
               a->calibrate ? "calibrated node times" : "the cost model's node times");
        table_print(rows, n, &none, a->calibrate);
    }
    if (!st && a->csv) st = csv_write(a->csv, cfg->model_path, rows, n, &none);
    if (!st && a->svg) st = svg_write(a->svg, cfg->model_path, rows, n, &none);
    if (!st && a->csv) printf("wrote %s\n", a->csv);
    if (!st && a->svg) printf("wrote %s\n", a->svg);
    free(rows);
    sc_trainer_free(t);
    sc_calibration_free(&cal);
    return st;
}

static const char *bench_parse(arg_spec *s, sc_trainer_config *cfg, sc_plan_options *base, bench_args *a) {
    arg_opt *o;
    cfg->model_path = s->pos[0];
    cfg->lr = 0.0f; /* every point trains the same weights; nothing can diverge */
    cfg->train.momentum = 0.9f;
    if ((o = args_get(s, "batch"))->set && (cfg->batch = o->i) < 1) return "--batch must be at least 1";
    const char *why;
    if ((o = args_get(s, "precision"))->set && !(cfg->precision = precision_parse(o->s, &why))) return why;
    if ((o = args_get(s, "seq"))->set && (cfg->seq = o->i) < 1) return "--seq must be at least 1";
    if ((o = args_get(s, "threads"))->set && (cfg->threads = (int)o->i) < 1) return "--threads must be at least 1";
    /* Measured points compare plans, so every step runs on one fixed count: train's thread governor
     * would put some of them on one thread. */
    if (!cfg->threads) cfg->threads = backend_host_threads();
    int k = 0;
    cfg->device = SC_DEVICE_AUTO; /* as train: the GPU when present */
    if ((o = args_get(s, "device"))->set && (k = device_parse(o->s)) < 0) return "--device must be cpu, cuda or auto";
    if (o->set) cfg->device = (sc_device)k;
    cfg->tf32 = args_get(s, "tf32")->set;
    if ((o = args_get(s, "optimizer"))->set) {
        if (!strcmp(o->s, "adamw")) cfg->train.optim = SC_OPTIM_ADAMW, cfg->train.momentum = 0;
        else if (strcmp(o->s, "sgd")) return "--optimizer must be sgd or adamw";
    }
    if ((o = args_get(s, "param-block"))->set && !(cfg->train.param_block = sc_param_block_parse(o->s)))
        return PARAM_BLOCK_USAGE;
    a->steps = 3;
    if ((o = args_get(s, "steps"))->set && (a->steps = (int)o->i) < 1) return "--steps must be at least 1";
    a->csv = args_get(s, "csv")->s;
    a->calibrate = args_get(s, "calibrate")->set;
    a->svg = args_get(s, "svg")->s;
    const char *mem = args_get(s, "memories")->s, *str = args_get(s, "strategies")->s;
    if (!mem) return "--memories a,b,c is required";
    a->strategies_buf = strdup(str ? str : "none,sqrt,dc,optimal,evict");
    a->memories_buf = strdup(mem);
    if (!a->strategies_buf || !a->memories_buf) return "out of memory";
    a->n_strategies = split(a->strategies_buf, a->strategies, 8);
    a->n_memories = split(a->memories_buf, a->memories, 64);
    if (!a->n_strategies || !a->n_memories) return "--memories and --strategies must not be empty";
    for (int i = 0; i < a->n_strategies; i++)
        if (plan_strategy_parse(a->strategies[i]) < 0) return "--strategies takes none, sqrt, dc, optimal, evict, auto";
    for (int i = 0; i < a->n_memories; i++) {
        size_t len = strlen(a->memories[i]);
        bool pct = len > 1 && a->memories[i][len - 1] == '%' && atof(a->memories[i]) > 0;
        if (!pct && sc_parse_size(a->memories[i]) <= 0) return "--memories takes sizes (256MiB, 1.5GiB, bytes) or N%";
    }
    bool given;
    const char *sn, *on;
    const char *u = plan_options_from_args(s, base, &given, &sn, &on);
    if (u) return u;
    /* a run of 1 + steps per point, the baseline again after each, and the first baseline, never
       reaching the end of the schedule */
    cfg->steps = step_times_count(a->steps, true) * (2 * a->n_strategies * a->n_memories + 1) + 1;
    cfg->use_plan = true;
    cfg->plan = *base;
    cfg->link_bandwidth = base->link_bandwidth; /* --link-bandwidth: the CPU backend's link too */
    cfg->plan.strategy = SC_STRATEGY_NONE;
    cfg->plan.budget = 0;
    return NULL;
}

int cmd_bench(int argc, char **argv) {
    arg_opt opts[] = {
        STEP_SHAPE_OPTS,
        {.name = "memories", .kind = ARG_STR, .metavar = "a,b,c", .help = "budgets: sizes or N% of the none peak"},
        {.name = "strategies", .kind = ARG_STR, .metavar = "s,t,...", .help = "default none,sqrt,dc,optimal,evict"},
        {.name = "steps", .kind = ARG_INT, .metavar = "N", .help = "measured steps per point after one warm-up (default 3)"},
        OPTIMIZER_OPT,
        {.name = "offload", .kind = ARG_STR, .metavar = "auto|weights|activations|none", .help = "as plan (default none)"},
        {.name = "slots", .kind = ARG_INT, .metavar = "S", .help = "dc points: at most S snapshot slots"},
        PLAN_LINK_OPT, PLAN_UPDATE_OPT, PARAM_BLOCK_OPT,
        {.name = "memory", .kind = ARG_STR, .metavar = "SIZE", .help = "(unused by bench; see --memories)"},
        {.name = "strategy", .kind = ARG_STR, .metavar = "S", .help = "(unused by bench; see --strategies)"},
        THREADS_OPT,
        {.name = "device", .kind = ARG_STR, .metavar = "cpu|cuda|auto", .help = "where the steps run (default auto: the GPU when present)"},
        {.name = "tf32", .kind = ARG_FLAG, .help = "allow TF32 for f32 products and convolutions (CUDA)"},
        {.name = "csv", .kind = ARG_STR, .metavar = "FILE.csv", .help = "write the table as CSV"},
        {.name = "svg", .kind = ARG_STR, .metavar = "FILE.svg", .help = "plot time overhead against activation memory"},
        PLAN_CALIBRATE_OPT,
    };
    arg_spec spec = ARGS_MODEL_SPEC(
        "scorch-run bench MODEL.onnx --memories a,b,c [options]",
        "Runs training steps under every (strategy, memory) plan that fits and reports the measured peak,\n"
        "activation memory cut and step time overhead against the store-everything plan.",
        opts);
    int exit_code;
    if (args_done(&spec, argc, argv, &exit_code)) return exit_code;
    sc_trainer_config cfg;
    sc_trainer_config_default(&cfg);
    sc_plan_options base;
    bench_args a = {0};
    const char *usage = bench_parse(&spec, &cfg, &base, &a);
    if (!usage && (args_get(&spec, "memory")->set || args_get(&spec, "strategy")->set))
        usage = "bench takes --memories and --strategies (lists), not --memory/--strategy";
    sc_status st = SC_OK;
    if (usage) args_error("%s", usage);
    else st = bench_run(&cfg, &base, &a);
    free(a.strategies_buf);
    free(a.memories_buf);
    args_free(&spec);
    return usage ? 2 : cmd_report(st);
}
