/* Timing training steps for `plan --measure` and `bench`: the step's wall time and its kernels'
 * thread CPU time, each from its own steps.
 *
 * The kernel CPU time comes from the profile hook (backends/profile.h), which reads the thread CPU
 * clock around every node: a system call each time (CLOCK_THREAD_CPUTIME_ID has no vDSO path), so
 * about 1.5 us a node. On a graph of small nodes that is most of the step (a 2-layer GPT of 209
 * nodes: 0.51 ms unhooked, 0.89 ms hooked, one thread), so wall times are taken from steps run
 * without the hook, and the hooked steps give the kernel time only. */
#ifndef SC_TOOLS_STEP_TIME_H
#define SC_TOOLS_STEP_TIME_H

#include <stdint.h>

#include "core/status.h"
#include "train/trainer.h"

typedef struct {
    double wall;      /* median seconds of the plan's execution (sc_step_result.exec_time) */
    double kernels;   /* median of the kernels' summed thread CPU seconds; 0 when not asked */
    int64_t peak;     /* the largest measured device peak of those steps */
} step_times;

/* One warm-up step, n unhooked steps (their median wall time), then, when `kernels`, n hooked steps
 * (their median kernel CPU time): 1 + n or 1 + 2n steps of t. */
sc_status step_times_measure(sc_trainer *t, int n, bool kernels, step_times *out);
/* Steps step_times_measure(n, kernels) takes. */
static inline int64_t step_times_count(int n, bool kernels) { return 1 + (int64_t)n * (kernels ? 2 : 1); }

#endif
