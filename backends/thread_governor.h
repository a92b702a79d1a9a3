/* The host thread count of a repeated step, chosen by measured step time.
 *
 * On a machine where another process keeps a core busy, an OpenMP region with one thread per core
 * waits at every barrier for the thread that shares its core: oneDNN partitions each convolution
 * statically, so the whole pass runs at the pace of the slowest thread. MobileNetV2 at 64x64 took
 * 5.9 ms with 2 threads beside a busy loop on one of 2 cores, against 2.3 ms with 1 thread and
 * 1.25 ms idle. The governor runs the step with the configured count N, with N - 1 (N >= 3) or with
 * 1 thread, whichever its recent steps measured faster, and re-tries the others now and then since
 * load comes and goes. N - 1 is for the common case on a larger machine: one core taken by a data
 * loader or another job. The thread that would share it stalls every op, N - 1 threads leave it to
 * the other process and keep (N - 1) / N of the machine, where 1 thread keeps 1 / N; when more
 * cores are busy 1 thread wins again, as on a machine of two.
 *
 * Policy (a multi-armed bandit with exponential back-off; arms [0] N, then N - 1, then 1):
 *   - the first step of each arm is a warm-up and is not counted (it creates the primitives of that
 *     thread count); then each arm gets a timed step, and a second one while it is within 1.5x of
 *     the fastest (the fastest too, unless every other arm is 1.5x slower or worse: an idle machine
 *     of two cores whose cores scale runs 2 of its first 4 steps on one thread, not 3 of 6); the
 *     estimate is their mean;
 *   - afterwards the fastest arm runs; each of its steps updates its estimate (weight 1/4);
 *   - every `interval` steps one step runs on another arm (in turn), and its time becomes that
 *     arm's estimate (the old one is stale). When it is faster by 5% it becomes the one that runs;
 *     otherwise the interval doubles, up to 64, so an idle machine pays one slower step in 64 and a
 *     change of load is seen within 64 steps per arm;
 *   - a running arm whose estimate grows past 1.25x another's probes that one on the next step:
 *     a core turning busy, or a probe that ran fast by luck and chose the wrong arm, then costs 2 to
 *     3 slow steps instead of the rest of the interval (a 30-step ResNet-18 training run beside a
 *     busy core had a median step 1.5x its 1-thread time, most steps on 2 threads after such a
 *     probe);
 *   - after a choice the interval starts at 16 when every other arm is 1.5x slower or worse (a busy
 *     core of two costs 2x to 4x), else at 4.
 * All arms compute the same bits: every CPU kernel cuts its work by the shapes (and the machine's
 * core count), never by the thread count in use (cpu_nn_conv_grad_w.c, cpu_nn_gemm.c, the blocks of
 * CPU_SIMD_LOOP and cpu_bcast_run, the loss's and LayerNormalizationGrad's row chunks). So `run`
 * (backends/infer.c) and `train` (train/trainer.c) both adapt when no thread count is given.
 */
#ifndef SC_THREAD_GOVERNOR_H
#define SC_THREAD_GOVERNOR_H

#include <stdbool.h>
#include <stdint.h>

enum { SC_GOVERNOR_MAX_ARMS = 3 };

typedef struct {
    int n_arms;                         /* 2: {N, 1}; 3 when N >= 3: {N, N - 1, 1} */
    int arms[SC_GOVERNOR_MAX_ARMS];     /* thread counts, [0] the configured one */
    double est[SC_GOVERNOR_MAX_ARMS];   /* estimated step seconds per arm */
    int timed[SC_GOVERNOR_MAX_ARMS];    /* timed steps per arm (warm-ups excluded) */
    bool warm[SC_GOVERNOR_MAX_ARMS];    /* the arm's warm-up step ran */
    int cur;          /* arm of the step in progress */
    int best;         /* arm that runs between probes */
    int probe;        /* arm the next probe runs */
    int interval;     /* steps between probes of another arm */
    int until_probe;  /* steps of the best arm before the next probe */
    bool enabled;     /* false for one configured thread: nothing to choose */
    bool explored;    /* exploring is over */
    int64_t runs[SC_GOVERNOR_MAX_ARMS]; /* steps recorded per arm, warm-ups included */
} sc_thread_governor;

void thread_governor_init(sc_thread_governor *g, int threads);
/* The thread count for the next step (remembers which arm it is). */
int thread_governor_next(sc_thread_governor *g);
/* Records the step just run by the arm thread_governor_next chose. */
void thread_governor_record(sc_thread_governor *g, double seconds);
/* Steps recorded on the configured count ([0]) and on fewer threads ([1]), warm-ups included. */
void thread_governor_runs(const sc_thread_governor *g, int64_t runs[2]);

#endif
