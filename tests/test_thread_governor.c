/* backends/thread_governor.h on synthetic step times, where the right answer is known:
 *   - an idle machine (the configured count twice as fast as 1 thread): after the warm-ups and
 *     one timed step per arm (a clear win needs no second), the 1-thread arm runs only as a probe;
 *   - a close race (1 thread 1.2x slower): two timed steps per arm before the choice;
 *   - a core that turns busy at step 150 (the configured count now 3x slower than 1 thread): the
 *     governor moves to 1 thread within 4 steps (the running arm's estimate outgrows the other's
 *     and triggers a probe, not the probe interval of up to 64) and stays there, and moves back
 *     within 70 steps (the longest interval) of the load going away at step 300;
 *   - busy again: a probe of the configured count that happens to run fast (the other process
 *     paused) makes it the choice; its next, slow steps bring the governor back to 1 thread within
 *     3 steps, not at the next probe 16 steps later;
 *   - four configured threads (arms 4, 3, 1): idle it settles on 4; with one core taken by another
 *     process (4 threads stall, 3 keep three quarters of the machine) on 3 within a few steps; with
 *     three cores taken on 1; and back on 4 when the load goes;
 *   - one configured thread: always 1, nothing explored.
 * Fails through the exit code.
 */
#include <stdio.h>

#include "backends/thread_governor.h"
#include "tests/check.h"


/* Seconds of a step with `threads` threads while the machine is busy or not; the first step of a
 * thread count costs 10x (primitive creation), which the governor must not count. A small
 * deterministic jitter keeps equal times from deciding anything. */
static double step_time(int threads, bool busy, int step, bool first) {
    double t = threads == 1 ? 2.0 : busy ? 6.0 : 1.0;
    t *= 1.0 + 0.02 * ((step * 7919) % 5 - 2) / 2.0;
    return first ? 10.0 * t : t;
}

/* Runs steps [from, to) with the machine busy or not; returns how many ran on 1 thread and the step
 * from which the governor's choice between probes stayed `settle_on` threads (-1: not at the end). */
static int run_steps(sc_thread_governor *g, int from, int to, bool busy, bool *seen, int settle_on, int *settled) {
    int ones = 0;
    *settled = -1;
    for (int s = from; s < to; s++) {
        int n = thread_governor_next(g);
        bool first = !seen[n == 1];
        seen[n == 1] = true;
        thread_governor_record(g, step_time(n, busy, s, first));
        ones += n == 1;
        if (g->arms[g->best] != settle_on) *settled = -1;
        else if (*settled < 0) *settled = s;
    }
    return ones;
}

int main(void) {
    sc_thread_governor g;
    thread_governor_init(&g, 2);
    bool seen[2] = {false, false};
    int settled;
    int ones = run_steps(&g, 0, 150, false, seen, 2, &settled);
    CHECK(ones <= 2 + 5, "idle: %d of 150 steps on 1 thread, want the 2 of exploring and at most 5 probes", ones);
    CHECK(settled >= 0 && settled < 4, "idle: settled on 2 threads at step %d", settled);
    sc_thread_governor close;
    thread_governor_init(&close, 2);
    int close_ones = 0;
    for (int k = 0; k < 6; k++) {
        int n = thread_governor_next(&close);
        close_ones += n == 1;
        thread_governor_record(&close, (n == 1 ? 1.2 : 1.0) * (k < 2 ? 10 : 1));
    }
    CHECK(close_ones == 3 && close.timed[0] == 2 && close.timed[1] == 2 && close.arms[close.best] == 2,
          "a close race: %d of the first 6 steps on 1 thread, %d and %d timed, chose %d threads", close_ones,
          close.timed[0], close.timed[1], close.arms[close.best]);

    ones = run_steps(&g, 150, 300, true, seen, 1, &settled);
    CHECK(settled >= 0 && settled <= 150 + 4, "busy from step 150: settled on 1 thread at step %d", settled);
    CHECK(ones >= 150 - 4 - 10, "busy: only %d of 150 steps on 1 thread", ones);

    ones = run_steps(&g, 300, 450, false, seen, 2, &settled);
    CHECK(settled >= 0 && settled <= 300 + 70, "idle again from step 300: settled on 2 threads at step %d", settled);

    run_steps(&g, 450, 520, true, seen, 1, &settled);
    CHECK(settled >= 0, "busy from step 450: not on 1 thread at step 520");
    int s = 520;
    while (thread_governor_next(&g) == 1 && s < 700) thread_governor_record(&g, step_time(1, true, s++, false));
    thread_governor_record(&g, step_time(2, false, s++, false)); /* the lucky probe */
    CHECK(g.arms[g.best] == 2, "a probe 2x faster than 1 thread did not switch to 2 threads");
    int slow = 0;
    for (int end = s + 30; s < end; s++) {
        int n = thread_governor_next(&g);
        slow += n == 2;
        thread_governor_record(&g, step_time(n, true, s, false));
    }
    CHECK(slow <= 3, "busy: %d slow steps on 2 threads after a lucky probe chose them", slow);
    CHECK(g.arms[g.best] == 1, "busy: back on %d threads 30 steps after a lucky probe", g.arms[g.best]);

    /* Four threads: step time per count under `load` busy cores (0, 1 or 3 of 4). */
    sc_thread_governor q;
    thread_governor_init(&q, 4);
    CHECK(q.n_arms == 3 && q.arms[0] == 4 && q.arms[1] == 3 && q.arms[2] == 1, "4 threads: arms %d (%d, %d, %d)",
          q.n_arms, q.arms[0], q.arms[1], q.arms[2]);
    static const double quad[3][3] = {{1.0, 1.3, 3.6}, {5.0, 1.35, 3.6}, {9.0, 7.0, 3.6}};
    static const int row[4] = {0, 1, 2, 0}, load_of[4] = {0, 1, 3, 0}, want[4] = {4, 3, 1, 4};
    bool qseen[3] = {false, false, false};
    for (int phase = 0, s = 0; phase < 4; phase++) {
        int on_want = 0, first_settled = -1;
        for (int end = s + 200; s < end; s++) {
            int n = thread_governor_next(&q), arm = n == 4 ? 0 : n == 3 ? 1 : 2;
            double t = quad[row[phase]][arm] * (1.0 + 0.02 * ((s * 7919) % 5 - 2) / 2.0);
            thread_governor_record(&q, qseen[arm] ? t : 10.0 * t);
            qseen[arm] = true;
            on_want += n == want[phase];
            if (q.arms[q.best] != want[phase]) first_settled = -1;
            else if (first_settled < 0) first_settled = s - (end - 200);
        }
        CHECK(first_settled >= 0 && first_settled <= (phase ? 70 : 8),
              "4 threads, %d busy cores: settled on %d threads after %d steps", load_of[phase], want[phase], first_settled);
        CHECK(on_want >= 200 - (phase ? 70 : 8) - 16, "4 threads, %d busy cores: %d of 200 steps on %d threads",
              load_of[phase], on_want, want[phase]);
    }
    int64_t qruns[2];
    thread_governor_runs(&q, qruns);
    CHECK(qruns[0] + qruns[1] == 800 && qruns[1] > 0, "4 threads: runs %lld + %lld, want 800 with some on fewer",
          (long long)qruns[0], (long long)qruns[1]);

    thread_governor_init(&g, 1);
    int other = 0;
    for (int s = 0; s < 50; s++) {
        other += thread_governor_next(&g) != 1;
        thread_governor_record(&g, 1.0);
    }
    CHECK(other == 0, "one configured thread: %d steps asked for another count", other);

    if (failures) printf("%d failures\n", failures);
    else printf("ok\n");
    return failures ? 1 : 0;
}
