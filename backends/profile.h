/* Per-op time profile of the CPU kernels (`scorch-run run --profile`, `train --profile`).
 *
 * When enabled, every cpu_run_node call is timed with the monotonic clock and added to a per-op
 * total (calls, milliseconds, output bytes). The report sorts ops by time so the kernel worth
 * optimising is the first line. Disabled (the default) it costs one branch per node.
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
/* Prints a table (op, calls, total ms, share, ms per call) divided by `passes`, the number of
 * forward/training passes the totals cover. */
void sc_profile_report(FILE *f, int passes);

#endif
