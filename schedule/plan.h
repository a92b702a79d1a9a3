/* Plans: what a backend executes verbatim (docs/DESIGN.md, schedule/).
 *
 * A plan is a flat list of steps over one training (or inference) graph:
 *   RUN node       run the node; its outputs are placed at the offsets of the intervals it opens
 *   FREE value     the value's current interval ends
 *   OFFLOAD value  start copying the value device -> host (transfer id); the host copy persists
 *   PREFETCH value start copying host -> device into a new interval (transfer id)
 *   WAIT transfer  block until the transfer finished
 *   HOST_RUN node  run an optimizer update on the host, on the host copies of its inputs: the
 *                  parameter and its state in their host homes (streamed, never on the device),
 *                  the gradient (and clip scale) from this step's OFFLOAD, lr and step from the
 *                  feeds. Its outputs are in place, so it opens no interval.
 * A transfer may cross the link in a 16-bit type (wire, schedule/wire.c) when that loses nothing any
 * reader sees: the gradient a Cast widened from bf16 / f16, or a weight whose every device reader
 * casts it to that type (mixed precision). The backend rounds, copies half the bytes and widens.
 * Recomputation is a forward RUN appearing again. Every device-resident interval of a value has a
 * static offset in one device arena of arena_bytes, so a step performs no allocation and the planned
 * peak is the real peak (the executor measures the high-water mark and tests compare).
 *
 * Persistent values (parameters, optimizer state, constants, graph inputs) live in the arena's
 * fixed region [0, fixed_bytes) for the whole step unless the plan streams them (offload), in which
 * case their home is host memory and PREFETCH/OFFLOAD move them.
 */
#ifndef SC_PLAN_H
#define SC_PLAN_H

#include <stdint.h>

#include "autodiff/autodiff.h"
#include "graph/graph.h"
#include "schedule/cost.h"
#include "schedule/chain.h"

typedef enum { SC_STEP_RUN, SC_STEP_FREE, SC_STEP_OFFLOAD, SC_STEP_PREFETCH, SC_STEP_WAIT, SC_STEP_HOST_RUN } sc_step_kind;

typedef struct {
    sc_step_kind kind;
    int node;     /* RUN, HOST_RUN */
    int value;    /* FREE, OFFLOAD, PREFETCH; WAIT: the value its transfer moves (informative) */
    int transfer; /* OFFLOAD, PREFETCH: its id; WAIT: the id waited for */
    int interval; /* RUN: first interval its outputs open (one per present output, in order);
                     PREFETCH: the interval it opens; else -1 */
    sc_dtype wire; /* OFFLOAD, PREFETCH of an f32 value: SC_BF16 / SC_F16 when it crosses the link in
                      that type (schedule/wire.c), else 0 (SC_DTYPE_UNDEFINED: its own type) */
} sc_step;

/* Intervals of resident persistent values come first (n_fixed_intervals of them), one per value,
 * spanning every step, packed in [0, fixed_bytes); the others follow in the order their steps open them. bytes is the reserved size
 * (the value's bytes rounded up to 64, at least 64). */
typedef struct {
    int value;
    int64_t offset, bytes; /* place in the arena */
    int begin, end;        /* steps [begin, end] during which it is resident */
} sc_interval;

/* EVICT: per-value eviction and recomputation in the graph's own order (schedule/evict.c), not a chain
 * schedule; plans without streaming only. */
typedef enum {
    SC_STRATEGY_NONE,
    SC_STRATEGY_SQRT,
    SC_STRATEGY_DC,
    SC_STRATEGY_OPTIMAL,
    SC_STRATEGY_EVICT,
    SC_STRATEGY_AUTO
} sc_strategy;
/* Streaming (schedule/offload.c). WEIGHTS: parameters and optimizer state live in host memory and
 * are prefetched before each use, written back after their update. ACTIVATIONS: activations with
 * a long gap between uses are offloaded after creation and prefetched before their next use. BOTH:
 * both (added by offload; kept after AUTO so existing values do not move). AUTO: the fastest of
 * none / weights / activations / both that fits the budget. */
typedef enum { SC_OFFLOAD_NONE, SC_OFFLOAD_WEIGHTS, SC_OFFLOAD_ACTIVATIONS, SC_OFFLOAD_AUTO, SC_OFFLOAD_BOTH } sc_offload;

/* Where the optimizer update of a streamed parameter runs (schedule/offload.c). DEVICE: the update
 * node runs on the device, so the parameter and its state are prefetched for it and offloaded
 * after it (about 16 + 8 B/param/step with AdamW in fp32). HOST: the gradient is offloaded once it
 * is final and the update runs on the host, where the parameter and state live; the state never
 * crosses the link (4-8 B in, 4 B out). AUTO: the plan with the lower predicted time (host on a
 * tie). Parameters resident on the device always update there. */
typedef enum { SC_UPDATE_AUTO, SC_UPDATE_DEVICE, SC_UPDATE_HOST } sc_update_place;

typedef struct {
    sc_strategy strategy;
    sc_offload offload;
    sc_update_place update_on; /* with weights streaming; AUTO (0) by default */
    int64_t budget;          /* device bytes; 0 = unlimited */
    int slots;               /* dc: fixed number of snapshot slots (binomial placement); 0 = unbounded bisection */
    double link_bandwidth;   /* bytes/s host<->device, for the cost model; 0 = default */
    const double *node_time; /* optional calibrated seconds per node (--calibrate), else the cost model */
    int segments;            /* chain segments for sqrt/dc/optimal/auto (added by plancore); 0 = min(forward
                                nodes, SC_PLAN_DEFAULT_SEGMENTS); `none` always uses one segment */
    int window_max;          /* streaming (added by offload): the largest look-ahead tried, in RUN steps;
                                0 = no limit (widened while the plan fits and stalls remain) */
    int64_t host_budget;     /* host bytes the plan's copies (host_bytes) may take; 0 = unlimited. A
                                plan over it is not chosen, as one over `budget` is not */
    int64_t resident_max;    /* weights streaming: a parameter whose bytes with its optimizer state are at
                                most this stays resident and updates on the device; 0 = chosen by the
                                planner (schedule/resident.c), -1 = stream every one */
    int64_t capacity;        /* the device's free bytes, 0 = unknown (the CPU's modelled device). A budget
                                above it is lowered to it; without a budget, a plan that does not fit
                                it less plan_workspace_reserve is re-planned for that room with
                                strategy and offload auto (none replaced, others kept) */
} sc_plan_options;

/* Device bytes kept free for the kernels' workspace outside the arena (cuDNN's is capped at 256 MiB)
 * when the budget is the device's own memory: a quarter of it on a small device. */
int64_t plan_workspace_reserve(int64_t capacity);

#define SC_PLAN_DEFAULT_SEGMENTS 1024

typedef struct {
    sc_step *steps;
    int n_steps;
    sc_interval *intervals;
    int n_intervals;
    int *iv_from;         /* [n_intervals], from plan_alloc: the interval whose block this one took
                             over at the RUN that opens it (an input of that RUN dying there,
                             sc_op_donor_input_ok), else -1. The two are both open during that RUN
                             and its FREEs, at one offset: the kernel runs in place. */
    int64_t fixed_bytes;  /* persistent region */
    int64_t arena_bytes;  /* planned peak: fixed region + the highest interval end */
    /* predictions (the plan's own figures, shown by `scorch-run plan`) */
    double flops, recompute_flops;
    double predicted_time; /* seconds */
    int64_t bytes_h2d, bytes_d2h;
    sc_strategy strategy;  /* the one used (auto resolves to a concrete one) */
    int n_segments;
    int refined_keeps;     /* recomputations of the strategy's schedule the plan drops, keeping the
                              earlier instance resident instead (schedule/refine.c) */
    int refined_drops;     /* all recomputations dropped: those and the ones that fed only them */
    /* added by offload (streaming): */
    int n_fixed_intervals; /* intervals [0, n_fixed_intervals) form the fixed region; the persistent
                              values they hold are resident the whole step. Streamed values (their
                              home is host memory) are not among them. */
    sc_offload offload;    /* the streaming used (auto resolves; never SC_OFFLOAD_AUTO) */
    int offload_window;    /* look-ahead in RUN steps: a PREFETCH is issued up to this many RUNs
                              before the RUN that reads it; -1 without streaming */
    double stall_time;     /* predicted seconds the compute waits on transfers (part of predicted_time) */
    sc_update_place update_on; /* DEVICE or HOST (never AUTO): where streamed parameters update */
    int n_host_updates;    /* HOST_RUN steps */
    int64_t resident_max;  /* weights streaming: the threshold used (stream_opts), 0 = none resident */
    int n_resident;        /* weights streaming: trainable parameters left resident (updated on the device) */
    int64_t resident_bytes;/* weights streaming: bytes of the parameters and state left resident */
    double host_time;      /* predicted seconds of host updates (on the host worker, overlapping
                              the device; what is left at the end of the step is part of
                              predicted_time and stall_time) */
    int64_t host_bytes;    /* host memory of the session's copies of moved values (plan_host_copy_bytes);
                              streamed parameters and state live in their own host data, not counted */
    int64_t budget;        /* the budget it was built under (opt's, or the capacity's) */
    bool refit;            /* built for the capacity's room instead of the options (sc_plan_options.capacity) */
} sc_plan;

const char *plan_update_name(sc_update_place u);

/* Where each trainable parameter of a plan updates (schedule/resident.c): on the host (a HOST_RUN),
 * on the device while resident all step (not streamed, or left resident by --resident), or on the
 * device with the parameter and state streamed in and out for it. */
typedef enum { SC_WHERE_NONE, SC_WHERE_HOST, SC_WHERE_DEVICE_RESIDENT, SC_WHERE_DEVICE_STREAMED } sc_update_where;
/* where[v] for every value of g (SC_WHERE_NONE: not a trainable parameter). */
void plan_update_places(const sc_graph *g, const sc_plan *p, sc_update_where *where);

const char *plan_offload_name(sc_offload o);

/* Elements of the trainable parameters (those an update node writes), for B/param/step figures. */
int64_t plan_param_count(const sc_graph *g);

/* Builds a plan for a training graph under opt, measured node times (node_time) and the device's
 * capacity included. Fails with a clear status when the budget cannot be met, naming the smallest
 * budget found feasible and what dominates it. */
sc_status plan_build(const sc_graph *g, const sc_training_graph *tg, const sc_plan_options *opt, sc_plan *plan);
void plan_free(sc_plan *plan);

const char *plan_strategy_name(sc_strategy s);

/* The names above back to their enum (for the CLI and the public API); -1 when name is none of them. */
int plan_strategy_parse(const char *name);
int plan_offload_parse(const char *name);
int plan_update_parse(const char *name);

/* The timeline model of one step (schedule/timeline.c has the rules): five FIFO resources, the
 * device's compute stream, the link's two directions, the host worker and the collectives.
 * node_time: seconds per node (cost_node_time, or calibrated); m: the link's bandwidth and latency;
 * with arrays, per step its track (SC_TRACK_*, -1 for steps that take no time) and its start and
 * end. */
enum { SC_TRACK_COMPUTE, SC_TRACK_H2D, SC_TRACK_D2H, SC_TRACK_HOST, SC_TRACK_COMM, SC_N_TRACKS };
typedef struct {
    double *t0, *t1;     /* [n_steps] with arrays, else NULL */
    int *track;
    double total;        /* the step: when all four resources are idle */
    double stall;        /* of it, time the compute stream waits on transfers and host updates */
    double compute_busy, host_busy, link_busy[2]; /* busy seconds: compute, host, h2d and d2h */
    double comm_busy;    /* seconds the collectives exchange data between ranks (data parallel) */
    int64_t bytes_h2d, bytes_d2h;
} sc_timeline;
sc_status plan_timeline(const sc_graph *g, const sc_plan *p, const double *node_time, const sc_cost_model *m,
                        bool arrays, sc_timeline *tl);
void plan_timeline_free(sc_timeline *tl);
/* The resource with the most busy time: "device compute", "link (host to device)", "link (device
 * to host)" or "host updates". */
const char *plan_timeline_bound(const sc_timeline *tl);

/* Host copies (schedule/host_copies.c; the executor's policy, replayed). root[v]: the value whose
 * storage v shares (in-place outputs chained to their input). release_at[v]: the HOST_RUN step
 * after which v's host copy returns to the pool (read only by host updates, never brought back,
 * not a graph output), else -1. home[v]: v's host side is its graph data (a streamed parameter or
 * state). plan_host_buffer_bytes: the size of the buffer the executor makes for `bytes`.
 * plan_host_copy_bytes: the host bytes a session's copies take (-1 when out of memory). */
void plan_value_roots(const sc_graph *g, int *root);
/* The bytes an OFFLOAD or PREFETCH moves over the link: its value's, or in its wire type (wire.c). */
int64_t plan_step_bytes(const sc_graph *g, const sc_step *st);
/* Of a plan's transfer bytes host to device ([0]) and back ([1]), those that cross in 16 bits: in a
 * 16-bit wire type, or of a bf16/f16 value (a gradient handed to its update in 16 bits). */
void plan_wire_bytes(const sc_graph *g, const sc_plan *p, int64_t bytes[2]);
void plan_host_release_steps(const sc_graph *g, const sc_plan *p, const int *root, int *release_at);
bool plan_host_homes(const sc_graph *g, const sc_plan *p, bool *home); /* false: out of memory */
int64_t plan_host_buffer_bytes(int64_t bytes);
int64_t plan_host_copy_bytes(const sc_graph *g, const sc_plan *p);

#endif
