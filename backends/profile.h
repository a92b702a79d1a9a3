/* Per-op time profile of the CPU kernels (`scorch-run run --profile`, `train --profile`).
 *
 * When enabled, every cpu_run_node call is timed with the monotonic clock and added to a per-op
 * total (calls, milliseconds, output bytes). The report sorts ops by time so the kernel worth
 * optimising is the first line. Disabled (the default) it costs one branch per node.
 *
 * Per-node times (calibration, train/calibrate.h): with sc_profile_nodes(g, ms) every timed node of
 * g (a node pointer inside g->nodes) also adds its milliseconds to ms[node id]. The clock is the
 * monotonic wall clock, or with sc_profile_clock_cpu(true) the calling thread's CPU time: with one
 * thread that is the kernel's own run time whatever else the machine runs; with several it counts
 * the calling thread's share (its work and its spinning at the join), close to the wall time on an
 * idle machine.
 */
#ifndef SC_PROFILE_H
#define SC_PROFILE_H

#include <stdbool.h>
#include <stdio.h>

#include "graph/graph.h"

void sc_profile_enable(bool on);
bool sc_profile_enabled(void);
void sc_profile_reset(void);
double sc_profile_now_ms(void);
void sc_profile_add(const sc_node *n, double ms, int64_t out_bytes);
/* Per-node totals of g's nodes into ms[] (g->n_nodes entries, not owned); g = NULL stops. */
void sc_profile_nodes(const sc_graph *g, double *ms);
void sc_profile_clock_cpu(bool on);
/* Milliseconds summed over every op since the last reset. */
double sc_profile_total_ms(void);
/* Prints a table (op, calls, total ms, share, ms per call) divided by `passes`, the number of
 * forward/training passes the totals cover. */
void sc_profile_report(FILE *f, int passes);

#endif
