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
 * does not parse is measured again and rewritten (written to a temp file, then renamed). With
 * SCORCH_COST_PROFILE=off the constants of schedule/cost.h are used, as the test suite does so that
 * its plans do not depend on the machine.
 */
#ifndef SC_COST_PROFILE_H
#define SC_COST_PROFILE_H

#include <stddef.h>

#include "core/status.h"
#include "schedule/cost.h"

/* The profile for `threads` CPU threads (0: the library default), from the cache or measured now
 * (and cached). *p is all zeros when profiles are off; where describes what happened ("off",
 * "cached in PATH", "measured now, cached in PATH", or why the cache could not be written). */
sc_status sc_cost_profile_get(int threads, sc_cost_profile *p, char *where, size_t where_size);

/* Node times of g under this machine's profile (cost_profile_node_times), *times malloc'd, or NULL
 * when profiles are off; `where` says what a plan's node times then are ("this machine's cost
 * profile (cached in PATH)" or "the built-in constants (...)"). */
sc_status sc_cost_profile_times(int threads, const sc_graph *g, double **times, char *where, size_t where_size);

/* Measures the profile without the cache. */
sc_status sc_cost_profile_measure(int threads, sc_cost_profile *p);

#endif
