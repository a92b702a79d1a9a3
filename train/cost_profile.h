/* The cost model right by default: this machine's throughput per op family (schedule/cost.h,
 * sc_cost_profile), measured once by a micro-benchmark on the CPU backend and cached.
 *
 * What is measured (about a second, at the thread count the run uses), each the median of 7 runs
 * after a warm-up, with the caches flushed before each: a 3x3 convolution (batch 8, 64 -> 64
 * channels, 56x56) and a 1x1 one (256 -> 64, 28x28) with their gradients, a 256x1024 by 1024x256
 * MatMul, a training-mode batch norm and its gradient over [8, 256, 28, 28], a 3x3 stride-2 max pool
 * and its gradient, an Add of two 4M-element vectors, and an Add of 16 elements for the per-node
 * overhead (schedule/cost.h says which ops each figure times).
 *
 * The cache: one small text file per machine key in $SCORCH_CACHE_DIR, else $XDG_CACHE_HOME/scorch,
 * else ~/.cache/scorch. The key is the CPU model name (/proc/cpuinfo), the thread count and the
 * library version, so a new CPU, a different --threads or an upgrade measures again. A file that
 * does not parse is measured again and rewritten (written to a temp file, then renamed). A cached
 * profile is checked each time it is read by a probe, its 3x3 convolution run 3 times (about 50 ms):
 * when the machine now runs it more than SC_COST_PROFILE_DRIFT faster or slower, the profile no
 * longer describes the machine (it was measured beside another job, or on another VM of the same CPU
 * model name: one measured so was 5.5x slow, and every prediction with it) and is measured again. With
 * SCORCH_COST_PROFILE=off the constants of schedule/cost.h are used, as the test suite does so that
 * its plans do not depend on the machine.
 */
#ifndef SC_COST_PROFILE_H
#define SC_COST_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"
#include "core/status.h"
#include "schedule/cost.h"

#define SC_COST_PROFILE_DRIFT 1.5

/* The profile for `threads` CPU threads (0: the library default), from the cache or measured now
 * (and cached). *p is all zeros when profiles are off; where describes what happened ("off",
 * "cached in PATH", "measured now, cached in PATH", or why the cache could not be written). */
sc_status sc_cost_profile_get(int threads, sc_cost_profile *p, char *where, size_t where_size);

/* Node times of g under this machine's profile (cost_profile_node_times) and its kernel-shape table
 * (sc_shape_table_apply), *times malloc'd, or NULL when profiles are off; `where` says what a plan's
 * node times then are ("this machine's cost profile (cached in PATH; N kernel shapes timed alone: ...)"
 * or "the built-in constants (...)"). */
sc_status sc_cost_profile_times(int threads, const sc_graph *g, double **times, char *where, size_t where_size);

/* A GPU's op-family rates before anything is measured on it: the H100/H200 class (fp32 without
 * TF32: 50 TFLOP/s datasheet, about 30 achieved in convolutions and GEMMs; 3 TB/s of HBM, about 2
 * achieved), and a kernel launch's 5 us as the per-node overhead. Only the nodes the GPU's
 * kernel-shape table cannot time (views, collectives, control flow, nodes fed run-time indices)
 * take these; every other node's time is measured on the device. */
void sc_cost_profile_gpu(sc_cost_profile *p);

/* Measures the profile without the cache. */
sc_status sc_cost_profile_measure(int threads, sc_cost_profile *p);

/* The kernel-shape table. A kernel's rate depends on its shape as much as on its family: on a
 * 2-core AVX-512 Xeon, oneDNN runs a 3x3 convolution's gradient on 4x4 planes (ResNet-50's last
 * stage at 112x112) at half the rate of the profile's 56x56 one, and a 2048-channel one on 8x8
 * planes at the full rate (bench/results/2026-12-02-conv-prediction-breakdown.md); a GPT's small
 * Transposes, Wheres and Gelus run at half the rate of the profile's 4 MiB Add. So every distinct
 * node shape of a graph (sc_shape_node) is timed alone on the CPU backend, once per machine, on
 * huge-page buffers as the step's arena is, twice: cold (its operands' cache lines flushed before
 * each run, code and page tables left warm) and warm (repeated to 1 ms); 1 to 5 runs after a
 * warm-up, their median. A node of that shape then takes the warm time, the cold one, or a mix by
 * the share of its operand bytes whose reuse distance in the step exceeds the last-level cache
 * (sc_shape_table_apply): an input just written is warm in the step, a weight read once a step or
 * an activation kept for backward is not. Timing every shape cold above one core's L2, as before,
 * over-predicted mid-size GPTs by 15-28%, and cold only above the L3 under-predicted them as much
 * (bench/results/2026-12-03-measure-unhooked.md); a whole-cache flush made a 10 us op's cold run
 * 50 us (its code, page tables and the thread pool's state went too).
 *
 * The key of a shape is the op, each operand's dtype and dims ("-" when absent; a constant's also
 * its bytes' hash, "=0123abcd..."), which outputs are present, and the attributes: a convolution's
 * geometry (strides, pads, dilations, group, auto_pad) and Gemm's transposes spelled out, e.g.
 *   ConvGrad:f32[8,512,4,4]f32[8,512,4,4]f32[512,512,3,3]:o110:s1x1p1x1x1x1d1x1g1a0
 * other ops' attributes as their bytes' hash (":a0123abcd..."). The cache is a text file beside
 * the profile's (same folder and machine key), "key warm cold" (seconds) per line
 * after a format line that records the profile's conv_flops the rows were measured under; shapes
 * measured by any run are added to it, and the rows are dropped (measured again) when the profile
 * they are used with is more than SC_COST_PROFILE_DRIFT away from that rate. Measuring stops after
 * SC_SHAPE_TIME_LIMIT seconds per call (the rest keep the family rates until a later run measures
 * them); shapes whose operands exceed SC_SHAPE_MAX_BYTES are not timed alone. Off with
 * SCORCH_COST_PROFILE=off, like the profile. */
#define SC_SHAPE_KEY_MAX 384
#define SC_SHAPE_TIME_LIMIT 30.0
#define SC_SHAPE_MAX_BYTES ((int64_t)2 << 30)

typedef struct {
    char *key;
    double warm; /* seconds with the operands where the last run left them (the L2 or L3 when they fit) */
    double cold; /* seconds after a cache flush: every operand from memory */
} sc_shape_row;

typedef struct {
    int n, cap;
    sc_shape_row *rows; /* sorted by key, one per key */
} sc_shape_table;

/* Whether node `node` of g is timed alone: every node but views (they copy nothing), collectives
 * (the link's time) and nodes whose integer inputs are computed at run time (their values may set
 * the work; a constant's are copied, and indices of Gather, GatherElements, Where, Cast and the loss
 * take the bench input's zeros). */
bool sc_shape_node(const sc_graph *g, int node);
/* The shape key of node `node` (size SC_SHAPE_KEY_MAX is always enough for ranks up to 8). */
void sc_shape_key(const sc_graph *g, int node, char *out, size_t size);

/* The times of g's shapes on `device`, from the cache or measured now and added to it, for use with
 * profile p; empty when profiles are off (or p is all zeros). On the CPU with `threads` threads (0:
 * the library default); on a GPU each shape runs on its backend (bench_time_device), cached in
 * kernel-shapes-gpu-<device model>-t1-v<version>.txt (backend_device_model: the GPU, its compute
 * capability and CUDA runtime), with p the GPU's constant profile (sc_cost_profile_gpu), since no
 * probe checks a GPU for drift yet. `where` says what happened ("" when g has no such node). A shape
 * that cannot be run alone is left out and named in `where`, not an error. */
sc_status sc_shape_table_get(sc_device device, int threads, const sc_cost_profile *p, const sc_graph *g,
                             sc_shape_table *t, char *where, size_t where_size);
/* node_time[i] = warm + (cold - warm) * share for every node of g whose shape the table holds, where
 * share is the part of its operand bytes that miss the last-level cache (bench_llc_bytes) by their
 * reuse distance in a step (sc_reuse_cold_share); others unchanged. */
sc_status sc_shape_table_apply(const sc_shape_table *t, const sc_graph *g, double *node_time);
const sc_shape_row *sc_shape_table_find(const sc_shape_table *t, const char *key);
void sc_shape_table_free(sc_shape_table *t);
/* "key warm cold" lines (after `header` and a newline, when not NULL), and back: how ranks share it. */
sc_status sc_shape_table_text(const sc_shape_table *t, const char *header, char **text, size_t *len);
sc_status sc_shape_table_parse(const char *text, sc_shape_table *t);

#endif
