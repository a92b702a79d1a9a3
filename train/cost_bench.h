/* One op timed alone on the CPU backend, and where its figures are cached: what the cost profile
 * (train/cost_profile.c) and the kernel-shape table (train/cost_shapes.c) measure with.
 *
 * A bench op is a graph of one node over inputs filled with small positive values (f32; other
 * dtypes zeros; a copy of a constant's data), its outputs allocated (an in-place update's outputs
 * are its inputs). Timed runs start with cold caches (a 96 MiB buffer written first) when asked, as
 * an op of a training step does whose inputs were made many ops ago. */
#ifndef SC_COST_BENCH_H
#define SC_COST_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"
#include "graph/graph.h"
#include "graph/op_cost.h"

#define BENCH_MAX_IN 8
#define BENCH_MAX_OUT 4
#define BENCH_MAX_RUNS 9

typedef struct {
    sc_graph g;
    int node;
    sc_tensor in[BENCH_MAX_IN], out[BENCH_MAX_OUT];
    int n_in, n_out;
} bench_op;

/* A node `op` with n_out outputs over inputs of the given descs, its outputs' shapes inferred. */
sc_status bench_make(bench_op *b, sc_op op, const sc_attrs *attrs, const sc_desc *in, int n_in, int n_out);
/* A copy of node `node` of g: the same op, attributes, input and output descs, absent ones absent. */
sc_status bench_make_like(bench_op *b, const sc_graph *g, int node);
void bench_free(bench_op *b);

/* What a timed run finds in the caches: what the last run left (warm), nothing (every cache
 * flushed: a 96 MiB buffer written by every thread), or everything but its operands (their lines
 * flushed: cold data, warm code and page tables, as in a step). */
typedef enum { BENCH_WARM, BENCH_COLD_ALL, BENCH_COLD_OPERANDS } bench_caches;

/* Median wall seconds of one run of b's node over `runs` runs (at most BENCH_MAX_RUNS) after a
 * warm-up run, each with the caches as `caches` says; with
 * repeat > 1 that many runs are timed together (for ops too short to time alone). runs
 * BENCH_RUNS_AUTO: as many as fit in about BENCH_AUTO_SECONDS by the warm-up's time, 1 to 5 (a
 * convolution of a large model takes seconds), and with warm caches repeat raised until a timed run
 * lasts BENCH_MIN_RUN_SECONDS (at most BENCH_MAX_REPEAT): the clock and the first touch of the
 * output are microseconds, a small op's whole time. Between bench_caches_open and
 * bench_caches_close only (the flush buffer). */
#define BENCH_RUNS_AUTO 0
#define BENCH_AUTO_SECONDS 0.3
#define BENCH_MIN_RUN_SECONDS 1e-3
#define BENCH_MAX_REPEAT 1000
sc_status bench_time(const sc_node_evaluator *ev, bench_op *b, int runs, int repeat, bench_caches caches,
                     double *seconds);
/* The same on a device backend (be: the CUDA one; one arena per backend, so none may exist): b's
 * inputs copied into a device arena once, then per timed run its node launched `repeat` times (1 to
 * BENCH_MAX_REPEAT, so that a run lasts BENCH_MIN_RUN_SECONDS) and the device synchronised; the
 * median over 1 to 5 runs (as BENCH_RUNS_AUTO) of wall seconds per launch. Launches queue behind
 * each other as a step's do, so the figure is the kernel's time plus what its launch adds to it.
 * The device's caches are left as the last run left them. */
sc_status bench_time_device(sc_backend *be, bench_op *b, double *seconds);
/* The last-level cache's bytes (the L3, else the L2, else 8 MiB when unknown): the capacity whose
 * reuse distances pick a node's warm or cold time (schedule/reuse.h). */
int64_t bench_llc_bytes(void);
sc_status bench_caches_open(void);
void bench_caches_close(void);

/* SCORCH_COST_PROFILE=off: no cost profile, no kernel shapes, no measured link; the built-in
 * constants (the test suite sets it so that its plans do not depend on the machine). */
bool sc_cost_profile_off(void);

/* The file `<cache folder>/<stem>-<model>-t<threads>-v<version>.txt`, its folder created (the
 * folder: $SCORCH_CACHE_DIR, else $XDG_CACHE_HOME/scorch, else ~/.cache/scorch; the model: the CPU's
 * model name, or device_model when not NULL, backend_device_model); an error saying why there is
 * none (out then empty). */
sc_status bench_cache_path(const char *stem, const char *device_model, int threads, char *out, size_t size);

#endif
