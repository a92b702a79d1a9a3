/* Calibrating the planner's cost model with measured times (`--calibrate` of `scorch-run plan`,
 * `train` and `bench`; docs/DESIGN.md, schedule/ 1: "calibrated from measured per-op times").
 *
 * sc_trainer_calibrate runs the session's training graph with the store-everything plan (every node
 * exactly once, graph order) on its own CPU backend and plan session: `warmup` untimed steps, then
 * `runs` timed ones; node_time[n] is the median over the timed steps of node n's kernel time, taken
 * by the per-op profile hook (backends/profile.h) on the calling thread's CPU clock, so that other
 * jobs on a shared machine do not inflate it (with one thread it is the kernel's own time; with
 * several, close to its wall time on an idle machine). The session's
 * weights, optimizer state and plan are untouched: the calibration session updates its own device
 * copies, which are dropped (a batch of the configured data is fed, as a training step would be).
 * link_bandwidth is the CPU backend's measured host<->device copy rate: the median of
 * SC_CALIBRATE_LINK_REPS round trips (h2d then d2h of SC_CALIBRATE_LINK_BYTES each), bytes moved
 * over seconds. step_time is the median wall time of the whole timed steps (the node times plus the
 * executor's own work: FREE steps, feeding the inputs, collecting the outputs; and any time other
 * jobs took the CPU).
 *
 * Node ids are those of the trainer's graph: a plan built for that graph (sc_plan_options.node_time)
 * uses them directly. sc_calibration_check verifies another graph has the same nodes (count and op
 * per id) before its plan uses them.
 */
#ifndef SC_CALIBRATE_H
#define SC_CALIBRATE_H

#include "graph/graph.h"
#include "train/trainer.h"

#define SC_CALIBRATE_RUNS 5
#define SC_CALIBRATE_WARMUP 1
#define SC_CALIBRATE_LINK_BYTES ((int64_t)32 << 20)
#define SC_CALIBRATE_LINK_REPS 3

/* A GPU's host<->device rate in bytes/s each way (the harmonic mean of the two directions): the
 * medians of SC_CALIBRATE_LINK_REPS copies of SC_CALIBRATE_LINK_BYTES from pinned host memory to the
 * device and back, one at a time, on a backend of its own. What a CUDA plan's transfers are costed
 * at when no --link-bandwidth is given. */
sc_status sc_link_measure_device(sc_device d, double *bandwidth);

typedef struct {
    int n_nodes;
    double *node_time;     /* [n_nodes] seconds, median of the timed runs */
    int *op;               /* [n_nodes] the op of each node, for sc_calibration_check */
    double link_bandwidth; /* bytes/s */
    double step_time;      /* seconds, median of the timed runs of the whole step */
    int runs;
} sc_calibration;

sc_status sc_trainer_calibrate(sc_trainer *t, int warmup, int runs, sc_calibration *out);
void sc_calibration_free(sc_calibration *c);
/* What the session was planned with (sc_trainer_config.calibrate), or NULL. */
const sc_calibration *sc_trainer_calibration(const sc_trainer *t);
/* SC_OK when g has c's nodes (same count and op per id); else a status naming the first mismatch. */
sc_status sc_calibration_check(const sc_calibration *c, const sc_graph *g);

#endif
