/* Allocation-failure injection for tests ("host allocation failure, tested by injection:
 * a status, no crash, no leak"). Compiled in always, off by default; the cost per counted
 * allocation is one relaxed atomic increment and load (allocation sites, not kernel loops).
 *
 * Counted allocations: every sc_arena_alloc call (graph, import and plan bookkeeping), the
 * executor's activation buffers (backends/executor.c), the CPU backend's device arena and the plan
 * executor's host copies and output buffers (backends/backend_cpu.c, backends/plan_exec.c). When
 * armed with n > 0, the n-th counted allocation from then on returns NULL, exactly as if malloc had
 * failed; every later one succeeds again (one failure per arming, so error paths that allocate work).
 *
 * Arming: sc_alloc_fail_arm(n), or the environment variable SCORCH_ALLOC_FAIL=n read at the first
 * counted allocation (for whole-process tests of scorch-run). sc_alloc_fail_count() is the number of
 * counted allocations since the last arming (or process start): a clean run's count bounds the n
 * worth trying. sc_alloc_fail_fired() says whether the armed failure happened.
 */
#ifndef SC_ALLOC_FAIL_H
#define SC_ALLOC_FAIL_H

#include <stdbool.h>
#include <stdint.h>

void sc_alloc_fail_arm(int64_t n); /* 0 disarms; resets the count */
int64_t sc_alloc_fail_count(void);
bool sc_alloc_fail_fired(void);
/* True when this allocation must fail (counts it). Call at each counted allocation site. */
bool sc_alloc_fail_now(void);

#endif
