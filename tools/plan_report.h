/* What `scorch-run plan`, `train --memory` and `bench` show about a plan (schedule/plan.h): the summary
 * (text table or one JSON object), a Chrome/Perfetto trace and an SVG memory timeline, plus the SVG
 * plot of a bench sweep. Nothing here executes a plan; every figure comes from the plan and the cost
 * model (schedule/cost.h).
 *
 * Timeline model (trace and summary): plan_timeline (schedule/timeline.c), the planner's own: the
 * compute stream, the link's host-to-device and device-to-host directions and the host worker, each
 * a FIFO (the trace has a track for each). Device memory at step s is the fixed region plus every
 * interval with begin <= s <= end, split by value kind: "fixed" (the fixed region and intervals of
 * persistent values that are streamed in), "activations" (values of forward nodes, recomputations
 * included) and "gradients" (values of backward and optimizer nodes).
 * All files are written with sc_write_file_atomic.
 */
#ifndef SC_PLAN_REPORT_H
#define SC_PLAN_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "autodiff/autodiff.h"
#include "graph/graph.h"
#include "schedule/cost.h"
#include "schedule/plan.h"
#include "tools/args.h"
#include "train/calibrate.h"

/* The plan options shared by `plan`, `train` and `bench` (with these help texts). */
#define PLAN_CLI_OPTS                                                                                       \
    {.name = "memory", .kind = ARG_STR, .metavar = "SIZE",                                                  \
     .help = "device memory budget: 256MiB, 1.5GiB, 500MB or plain bytes (K/M/G/T are binary)"},          \
        {.name = "strategy", .kind = ARG_STR, .metavar = "none|sqrt|dc|optimal|evict|auto",                       \
         .help = "checkpointing strategy (default auto with --memory, else none); evict: the graph's order "    \
                 "with forward values evicted and recomputed per value under the budget (no streaming); auto "  \
                 "tries all; under a budget every plan is then refined per value, keeping what is expensive "   \
                 "to recompute where memory allows"},                                                           \
        {.name = "offload", .kind = ARG_STR, .metavar = "auto|weights|activations|both|none",               \
         .help = "stream parameters/state or checkpointed activations through host memory (default none)"}, \
        {.name = "slots", .kind = ARG_INT, .metavar = "S", .help = "dc: at most S snapshot slots (binomial placement)"}, \
        PLAN_LINK_OPT, PLAN_UPDATE_OPT, PLAN_RESIDENT_OPT
#define PLAN_LINK_OPT                                                                                        \
    {.name = "link-bandwidth", .kind = ARG_STR, .metavar = "RATE",                                            \
     .help = "the host<->device link in bytes/s each way, e.g. 25GB (a PCIe 4 x16 link): the cost model "     \
             "uses it, and on the CPU backend every copy takes that long (default: memcpy speed)"}
#define PLAN_UPDATE_OPT                                                                                      \
    {.name = "optimizer-on", .kind = ARG_STR, .metavar = "host|device|auto",                                  \
     .help = "where streamed parameters update: on the host (the gradient goes out, the state stays home) "   \
             "or on the device (parameter and state travel); auto: the faster plan (default)"}
#define PLAN_RESIDENT_OPT                                                                                    \
    {.name = "resident", .kind = ARG_STR, .metavar = "SIZE|auto|none",                                        \
     .help = "with streamed parameters, keep those whose bytes with their optimizer state are at most SIZE " \
             "on the device, updated there; none streams every one; auto (default): the fastest that fits, " \
             "tried from none upwards (small tensors cost more in transfer latency than in memory)"}

/* --param-block of `plan`, `train` and `bench` (sc_train_options.param_block). */
#define PARAM_BLOCK_OPT                                                                                      \
    {.name = "param-block", .kind = ARG_STR, .metavar = "SIZE|off",                                           \
     .help = "a parameter over SIZE read by whole rows (an embedding table, a tied LM head) trains as row "  \
             "blocks of about SIZE, each streamed, differentiated and updated alone (default 16MiB)"}
#define PARAM_BLOCK_USAGE "--param-block must be a size such as 16MiB, or off"

/* The step's shape and optimizer, and the host threads: the same options of `plan`, `train` and
 * `bench`. */
#define STEP_SHAPE_OPTS                                                                                      \
    {.name = "batch", .kind = ARG_INT, .metavar = "N", .help = "batch size, binds the inputs' dim 0 (default 1)"}, \
        PRECISION_OPT,                                                                                       \
        {.name = "seq", .kind = ARG_INT, .metavar = "N", .help = "sequence length of token inputs (default: the model's)"}
#define OPTIMIZER_OPT \
    {.name = "optimizer", .kind = ARG_STR, .metavar = "sgd|adamw", .help = "sgd (default; momentum 0.9) or adamw"}
#define CLIP_OPT {.name = "clip", .kind = ARG_FLOAT, .metavar = "X", .help = "clip gradients to global norm X"}
#define THREADS_OPT {.name = "threads", .kind = ARG_INT, .metavar = "N", .help = "CPU threads (default: all cores)"}

/* --calibrate of `plan`, `train` and `bench` (train/calibrate.h). */
#define PLAN_CALIBRATE_OPT                                                                                   \
    {.name = "calibrate", .kind = ARG_FLAG,                                                                   \
     .help = "plan with per-node times measured on the CPU backend (the training graph run 1 + 5 times, "    \
             "median per node) and the measured host<->device copy rate, instead of the FLOP/byte model"}

/* Reads PLAN_CLI_OPTS into *o. *given is set when any of them appeared. Returns NULL, or a usage
 * message. strategy_name/offload_name receive the names as given (or the defaults). */
const char *plan_options_from_args(arg_spec *spec, sc_plan_options *o, bool *given, const char **strategy_name,
                                   const char **offload_name);
/* "cpu", "cuda", "auto" -> sc_device (train/trainer.h) of --device (train, run); -1 when unknown. */
int device_parse(const char *name);

typedef struct {
    const char *model;          /* path, for titles */
    const char *device;         /* where the plan was made for and run: "cpu" (NULL too) or "cuda (MODEL)" */
    int64_t batch, seq;         /* seq 0 = the model's own */
    const char *precision;      /* "fp32", "bf16" or "fp16" (--precision) */
    int ranks;                  /* data-parallel ranks the step is one of (--ranks; 0 or 1: none) */
    int64_t budget;             /* requested device bytes, 0 = unlimited */
    const char *requested;      /* strategy asked for ("auto", "dc", ...) */
    const char *offload;        /* "none", "weights", ... */
    int slots;
    int64_t none_peak;          /* arena bytes of the store-everything plan, -1 unknown */
    int64_t none_fixed;         /* its fixed region */
    double none_time;           /* its predicted step time (0 unknown) */
    /* When this plan's predicted step is over SLOW_RATIO times none_time: the smallest budget found
     * (binary search up to the store-everything peak) whose plan is within CHEAP_RATIO of it, and
     * that plan's time; budget_cheap -1 when not searched, 0 when none was found. */
    int64_t budget_cheap;
    double time_cheap;
    /* derived by plan_summary_fill */
    int64_t param_bytes, state_bytes;  /* trainable parameters and optimizer state */
    int64_t params;                    /* trainable parameter elements (for B/param/step) */
    int64_t bytes_16bit[2];            /* of the bytes moved h2d and d2h, those in a 16-bit wire type */
    int split_params, row_blocks;      /* parameters trained as row blocks, and their blocks (tg.block_of) */
    double compute_time;        /* predicted seconds of every RUN */
    double comm_time;           /* of those, the all-reduces' exchanges between ranks */
    double comm_bytes;          /* bytes a rank sends (and receives) per step */
    int n_collectives;          /* AllReduce RUNs */
    double recompute_time;      /* of RUNs of forward nodes run before in the step */
    int64_t recompute_runs;
    double timeline_time;       /* step time of the timeline model (transfers overlapping compute) */
    double link_time[2];        /* predicted seconds the link is busy host to device and device to host
                                   (the two directions are independent FIFOs) */
    const char *bound;          /* the busiest of the step's resources (plan_timeline_bound): "device
                                   compute" (RUNs), "link (host to device)" or "link (device to host)"
                                   (transfers), "host updates" (HOST_RUNs) */
    int64_t peak_live;          /* max over steps of the sum of resident bytes (<= arena_bytes) */
    int64_t peak_activations;   /* arena_bytes - fixed_bytes */
    double model_time;          /* the built-in constants' timeline_time of the same plan */
    bool calibrated;            /* the plan was made with measured node times (--calibrate) */
    bool profiled;              /* set by the caller: node times came from this machine's cost profile
                                   (train/cost_profile.h), not from calibration */
    const char *cost_source;    /* set by the caller: what the node times came from, for the text */
    /* set by the caller when the plan was run (plan --measure/--calibrate): median wall time of the
     * plan's execution over measured_steps steps after a warm-up, and of its kernels' CPU time over
     * measured_steps more (the figure other jobs on the machine barely change; tools/step_time.h);
     * 0 = not run */
    double measured_time;
    double measured_kernel_time; /* median of the kernels' summed thread CPU time (backends/profile.h); 0 on
                                    a GPU, whose kernels run after the host has queued them */
    int measured_steps;
    int measured_threads; /* the steps' host thread count; 0 = chosen per step by train's governor */
} plan_summary;

#define PLAN_SLOW_RATIO 2.0   /* a plan this much slower than storing everything gets a warning */
#define PLAN_CHEAP_RATIO 1.25 /* ... naming the budget at which it is within this */

/* Fills the derived fields of s (the caller sets the descriptive ones first). */
sc_status plan_summary_fill(const sc_graph *g, const sc_training_graph *tg, const sc_plan *p, const sc_cost_model *m,
                            plan_summary *s);

/* The plan's step time under cost model m by the timeline model above. */
sc_status plan_timeline_time(const sc_graph *g, const sc_plan *p, const sc_cost_model *m, double *seconds);

/* --calibrate: measures t's training graph (sc_trainer_calibrate, CPU), checks g is that graph, and
 * points o->node_time (owned by c: keep c alive while o is used) and o->link_bandwidth at the
 * measurements. Prints one line about it to f (NULL: quiet). */
sc_status plan_calibrate(sc_trainer *t, const sc_graph *g, sc_plan_options *o, sc_calibration *c, FILE *f);
/* The one-line summary of a calibration (what plan_calibrate prints). */
void plan_calibration_print(const sc_calibration *c, const sc_graph *g, FILE *f);

/* Human-readable summary table. */
void plan_summary_print(FILE *f, const plan_summary *s, const sc_plan *p);
/* The same figures as one JSON object followed by a newline. */
void plan_summary_json(FILE *f, const sc_graph *g, const plan_summary *s, const sc_plan *p);

/* Chrome trace JSON ({"traceEvents": [...]}, times in microseconds). */
sc_status plan_trace_write(const char *path, const sc_graph *g, const sc_training_graph *tg, const sc_plan *p,
                           const sc_cost_model *m);
/* SVG stacked-area memory timeline over the steps; title names model, strategy and budget. */
/* The training graph as the planner sees it, as JSON, for an external solver (bench/milp_oracle.py):
 * each node's modelled time (cost_node_time under m) and its activation inputs and outputs, each
 * value's arena bytes (64-byte aligned; 0 for persistent values, which are the fixed region, and for
 * outputs of in-place ops, which alias an input), and fixed_bytes, n_forward. */
sc_status plan_graph_write(const char *path, const sc_graph *g, const sc_training_graph *tg, const sc_cost_model *m);
sc_status plan_svg_write(const char *path, const sc_graph *g, const sc_training_graph *tg, const sc_plan *p,
                         const plan_summary *s);

/* One measured bench point. */
typedef struct {
    const char *strategy;
    int64_t budget;
    int64_t activation_bytes; /* measured peak minus fixed */
    double overhead;          /* measured step time / none's - 1 */
} bench_point;

/* SVG plot of time overhead (%) against activation memory (MiB), one polyline per strategy. */
sc_status bench_svg_write(const char *path, const char *title, const bench_point *pts, int n);

/* "1.50 GiB" style (static buffer per call site: pass one). */
const char *fmt_bytes(int64_t b, char *buf, size_t n);

#endif
