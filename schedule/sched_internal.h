/* Helpers shared by segment.c, lower.c, alloc.c and plan.c (not part of the public contract).
 *
 * Value classes: a value with no producer (graph input, parameter, constant, optimizer state) is
 * persistent and lives in the fixed region; an output of an in-place op (sc_op_inplace_input) is an
 * alias of its input's storage; every other node output is a computed value with intervals.
 * Sizes are rounded up to 64 bytes (at least 64) so every tensor is aligned and non-empty.
 */
#ifndef SC_SCHED_INTERNAL_H
#define SC_SCHED_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "autodiff/autodiff.h"
#include "graph/graph.h"
#include "schedule/chain.h"
#include "schedule/cost.h"
#include "schedule/plan.h"
#include "schedule/segment.h"

static inline bool sched_persistent(const sc_graph *g, int v) { return g->values[v].producer < 0; }

static inline int64_t sched_align(int64_t bytes) { return bytes <= 0 ? 64 : (bytes + 63) / 64 * 64; }

/* Bytes of a value's data (0 when its shape is not static): what a copy of it moves. */
static inline int64_t sched_data_bytes(const sc_graph *g, int v) {
    int64_t b = sc_desc_bytes(&g->values[v].desc);
    return b < 0 ? 0 : b;
}

/* Reserved bytes of a value (static shape required; -1 when it has none). */
static inline int64_t sched_value_bytes(const sc_graph *g, int v) {
    int64_t b = sc_desc_bytes(&g->values[v].desc);
    return b < 0 ? -1 : sched_align(b);
}

/* The input value whose storage output k of node n shares, or -1. */
static inline int sched_alias_input(const sc_node *n, int k) {
    int a = sc_op_inplace_input(n->op, k);
    return a >= 0 && a < n->n_in ? n->in[a] : -1;
}

/* Persistent values that need a home: read by some node, or a graph output. */
static inline bool sched_needs_fixed(const sc_graph *g, int v) {
    return sched_persistent(g, v) && (g->values[v].n_consumers > 0 || g->values[v].is_output);
}

/* plan.c: the largest single node's working set (its computed inputs and outputs, less the input
 * block its output may take over when that input dies there: plan_alloc), the floor of any plan
 * beyond the fixed region; *which: the node. Named in over-budget messages. */
int64_t sched_largest_node(const sc_graph *g, int *which);

/* seg[i] for forward nodes i < n_fwd from the cut positions of c. */
void sched_segment_of_nodes(const sc_chain *c, int n_fwd, int *seg);

/* Backward phase of every non-forward node (DESIGN: BWD(i) runs phase i): phase(n) = min(the
 * highest phase where every forward value n reads is resident (value v is, in phases seg(producer
 * of v) .. seg(last forward reader of v): held by its segment's FWD_ALL, then part of each cut up to
 * there; if the inputs' ranges do not meet, the latest producer's segment), the phases of the
 * non-forward nodes it depends on,
 * and, for in-place updates, the segment / phase of every earlier reader of the storage it
 * overwrites). Nodes reading no forward value inherit from their dependencies; nodes with neither
 * get k-1. For forward nodes phase[i] = seg[i]. Running phases k-1 .. 0, graph order inside each,
 * after the forward pass of their segments respects every dependency. */
sc_status sched_phases(const sc_graph *g, int n_fwd, const int *seg, int k, int *phase);

/* Non-forward nodes bucketed by phase, graph order inside a phase: nodes of phase p are
 * order[start[p] .. start[p+1]). start has k+1 entries. */
sc_status sched_phase_buckets(const sc_graph *g, int n_fwd, const int *phase, int k, int **order, int **start);

/* lower.c: the steps and intervals of a validated chain schedule (offsets left 0). */
sc_status plan_lower(const sc_graph *g, const sc_training_graph *tg, const sc_chain *c, const sc_chain_schedule *s,
                     const sc_cost_model *m, sc_plan *plan);

/* lower.c: a plan from a given sequence of node runs (refine.c's edited runs): dead recomputations
 * pruned, intervals, frees and predictions as plan_lower. Runs of forward nodes (< n_forward) after
 * their first are recomputations. Offsets are left for plan_alloc. */
sc_status plan_lower_runs(const sc_graph *g, int n_forward, const int *runs, int n_runs, const sc_cost_model *m,
                          sc_plan *plan);

/* refine.c: replaces a lowered, placed plan without streaming by a faster one that fits budget
 * (> 0), where dropping recomputations and keeping their previous instances resident instead fits
 * (refine.c has the rules). plan->refined_keeps counts the values kept, refined_drops
 * the recomputations dropped. Unchanged when
 * nothing gains, and for plans of more than a million runs. */
sc_status plan_refine(const sc_graph *g, int n_forward, const sc_cost_model *m, int64_t budget, sc_plan *plan);

/* plan_type.c: whether a is a better plan than b: faster (beyond a relative 1e-9), or as fast and
 * smaller. */
bool plan_better(const sc_plan *a, const sc_plan *b);
/* plan_type.c: a search's best plan so far. Takes cand over: it becomes *best when it is eligible
 * (it fits) and the first (*have false) or better than *best, which is then freed; else it is freed. */
void plan_keep_best(sc_plan *best, bool *have, sc_plan *cand, bool eligible);

/* evict.c: a lowered, placed plan of budget (> 0) made by running the graph's node order and evicting
 * forward values, recomputed when read again, wherever the live bytes would pass the budget
 * (evict.c has the rules); strategy SC_STRATEGY_EVICT. Fails under the floor (*floor, when not NULL:
 * plan_evict_floor's answer), when no order of evictions fits, or when the graph has more nodes than
 * it simulates. */
sc_status plan_evict(const sc_graph *g, int n_forward, const sc_cost_model *m, int64_t budget, sc_plan *plan,
                     int64_t *floor);
/* evict.c: the smallest budget plan_evict plans at (every budget from it up does, one byte less
 * fails); -1 when not searched (graphs of more than 8192 nodes) or none is found. */
int64_t plan_evict_floor(const sc_graph *g, int n_forward, const sc_cost_model *m);

/* alloc.c: static offsets for every interval, fixed_bytes and arena_bytes. */
sc_status plan_alloc(const sc_graph *g, sc_plan *plan);

/* offload.c: rewrites a lowered RUN/FREE plan `in` (offsets not needed) into a streaming plan *out
 * (a new plan; `in` is untouched): with weights, parameters and optimizer state leave the fixed
 * region and are PREFETCHed before their uses and OFFLOADed after their update; with activations,
 * computed values with a gap of more than `window` RUNs between two uses are OFFLOADed after
 * creation and PREFETCHed again; with either, the last instance of every computed graph output
 * (BatchNorm running statistics, loss) is OFFLOADed after its producing RUN and freed instead of
 * staying resident to the end (the executor reads it from the host copy). `window` is the look-ahead
 * in RUN steps (>= 0). Offsets are left for plan_alloc; predictions for plan_predict. */
sc_status plan_offload(const sc_graph *g, const sc_plan *in, bool weights, bool activations, int window, sc_plan *out);
/* What plan_offload_ex streams. weights, activations: as plan_offload. host_updates (with
 * weights): every update node whose parameter is streamed becomes a HOST_RUN (plan.h): its
 * computed inputs (the gradient, the clip scale) are OFFLOADed after their last write like output
 * entities, the HOST_RUN follows their WAITs and the parameter's last device read, and the
 * parameter and state lose the update as a device use (so the state is never prefetched, the
 * parameter never offloaded). resident_max (with weights): a parameter whose group (it and its
 * optimizer state) takes at most this many bytes stays resident with its state, and updates on
 * the device (resident.c); 0 streams every one. */
typedef struct {
    bool weights, activations, host_updates;
    int window;
    int64_t resident_max;
} stream_opts;
sc_status plan_offload_ex(const sc_graph *g, const sc_plan *in, const stream_opts *so, sc_plan *out);

/* resident.c: resident[v] for every value: a streamable value weights streaming leaves resident
 * under resident_max (stream_opts). */
sc_status plan_resident_mark(const sc_graph *g, int64_t resident_max, bool *resident);
/* Of a plan's streamable values, those in its fixed region (resident all step): how many are
 * trainable parameters, and the bytes of all (parameters, state, frozen values). */
void plan_resident_count(const sc_graph *g, const sc_plan *p, int *n_params, int64_t *bytes);
/* The resident_max values worth trying under cost model m, ascending from 0, each keeping more
 * groups resident than the one before; at most max of them. Returns how many. */
int plan_resident_thresholds(const sc_graph *g, const sc_cost_model *m, int64_t *out, int max);

/* offload.c: predicted_time (compute stream plus waits on one FIFO host<->device link, i.e. stalls),
 * stall_time, bytes_h2d and bytes_d2h of a plan's steps under cost model m. */
sc_status plan_predict(const sc_graph *g, const sc_cost_model *m, sc_plan *plan);
/* Sets the wire type of every OFFLOAD and PREFETCH of a streaming plan (schedule/wire.c). */
sc_status plan_wire_assign(const sc_graph *g, sc_plan *p);

/* resident.c: whether node n is an optimizer update (SGDUpdate, AdamWUpdate; input 0 the parameter). */
bool sched_is_update(const sc_node *n);

/* resident.c: whether weights streaming may move value v (a PARAM or OPT_STATE with a fixed home). */
bool sched_streamable(const sc_graph *g, int v);

#endif
