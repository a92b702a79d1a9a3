/* The host thread count of a repeated step, chosen by measured step time.
 *
 * On a machine where another process keeps a core busy, an OpenMP region with one thread per core
 * waits at every barrier for the thread that shares its core: oneDNN partitions each convolution
 * statically, so the whole pass runs at the pace of the slowest thread. MobileNetV2 at 64x64 took
 * 5.9 ms with 2 threads beside a busy loop on one of 2 cores, against 2.3 ms with 1 thread and
 * 1.25 ms idle. The governor runs the step with the configured count or with 1 thread, whichever
 * its recent steps measured faster, and re-tries the other now and then since load comes and goes.
 *
 * Policy (a two-armed bandit with exponential back-off):
 *   - the first step of each arm is a warm-up and is not counted (it creates the primitives of that
 *     thread count), then the arms alternate until each has two timed steps, or one each when one
 *     arm is 1.5x slower or worse (an idle machine whose cores scale: 2 of the first 4 steps on one
 *     thread, not 3 of 6); the estimate is their mean;
 *   - afterwards the faster arm runs; each of its steps updates its estimate (weight 1/4);
 *   - every `interval` steps one step runs on the other arm, and its time becomes that arm's
 *     estimate (the old one is stale). When the other arm is faster by 5% it becomes the one that
 *     runs; otherwise the interval doubles, up to 64, so an idle machine pays one 1-thread step in
 *     64 and a change of load is seen within 64 steps;
 *   - a running arm whose estimate grows past 1.25x the other's probes the other on the next step:
 *     a core turning busy, or a probe that ran fast by luck and chose the wrong arm, then costs 2 to
 *     3 slow steps instead of the rest of the interval (a 30-step ResNet-18 training run beside a
 *     busy core had a median step 1.5x its 1-thread time, most steps on 2 threads after such a
 *     probe);
 *   - after a choice the interval starts at 16 when the loser is 1.5x slower or worse (a busy core
 *     of two costs 2x to 4x), else at 4.
 * Both arms compute the same bits: every CPU kernel cuts its work by the shapes (and the machine's
 * core count), never by the thread count in use (cpu_nn_conv_grad_w.c, cpu_nn_gemm.c, the blocks of
 * CPU_SIMD_LOOP and cpu_bcast_run, the loss's and LayerNormalizationGrad's row chunks). So `run`
 * (backends/infer.c) and `train` (train/trainer.c) both adapt when no thread count is given.
 */
#ifndef SC_THREAD_GOVERNOR_H
#define SC_THREAD_GOVERNOR_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    int arms[2];      /* thread counts: [0] the configured one, [1] one thread */
    double est[2];    /* estimated step seconds per arm */
    int timed[2];     /* timed steps per arm (warm-ups excluded) */
    bool warm[2];     /* the arm's warm-up step ran */
    int cur;          /* arm of the step in progress */
    int best;         /* arm that runs between probes */
    int interval;     /* steps between probes of the other arm */
    int until_probe;  /* steps of the best arm before the next probe */
    bool enabled;     /* false for one configured thread: nothing to choose */
    int64_t runs[2];  /* steps recorded per arm, warm-ups included */
} sc_thread_governor;

void thread_governor_init(sc_thread_governor *g, int threads);
/* The thread count for the next step (remembers which arm it is). */
int thread_governor_next(sc_thread_governor *g);
/* Records the step just run by the arm thread_governor_next chose. */
void thread_governor_record(sc_thread_governor *g, double seconds);

#endif
