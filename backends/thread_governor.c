/* The host thread count of a repeated step (thread_governor.h). */
#include "backends/thread_governor.h"

enum { FIRST_INTERVAL = 4, CLEAR_INTERVAL = 16, MAX_INTERVAL = 64 };

/* The running arm's estimate past this multiple of the other's last figure probes the other on the
 * next step instead of at the interval's end. */
#define SLOWED_DOWN 1.25

/* The probe interval after choosing `best` over the other arm: a clear win (the other arm 1.5x
 * slower or worse, as one busy core of two gives) is not re-checked for 16 steps; a close one
 * after 4. */
static int interval_after(const sc_thread_governor *g) {
    return g->est[!g->best] > 1.5 * g->est[g->best] ? CLEAR_INTERVAL : FIRST_INTERVAL;
}

void thread_governor_init(sc_thread_governor *g, int threads) {
    *g = (sc_thread_governor){.arms = {threads, 1}, .interval = FIRST_INTERVAL, .enabled = threads > 1};
    g->until_probe = g->interval;
}

/* Exploring lasts until each arm has two timed steps, or one each when one arm is the clear winner
 * (the other 1.5x slower or worse): a second 1-thread step then tells nothing new, and on a model
 * whose idle step takes seconds it is the largest cost of a short run. */
static bool exploring(const sc_thread_governor *g) {
    if (g->timed[0] < 1 || g->timed[1] < 1) return true;
    double lo = g->est[0] < g->est[1] ? g->est[0] : g->est[1], hi = g->est[0] + g->est[1] - lo;
    return (g->timed[0] < 2 || g->timed[1] < 2) && hi < 1.5 * lo;
}

int thread_governor_next(sc_thread_governor *g) {
    if (!g->enabled) return g->arms[0];
    if (exploring(g)) /* warm-ups first, then alternate, the arm with fewer timed steps first */
        g->cur = !g->warm[0] ? 0 : !g->warm[1] ? 1 : g->timed[1] < g->timed[0];
    else if (g->until_probe == 0)
        g->cur = !g->best;
    else
        g->cur = g->best;
    return g->arms[g->cur];
}

void thread_governor_record(sc_thread_governor *g, double seconds) {
    if (!g->enabled) return;
    int a = g->cur;
    g->runs[a]++;
    if (!g->warm[a]) {
        g->warm[a] = true;
        return;
    }
    if (exploring(g)) {
        g->est[a] = (g->est[a] * g->timed[a] + seconds) / (g->timed[a] + 1);
        g->timed[a]++;
        if (!exploring(g)) {
            g->best = g->est[1] < g->est[0];
            g->interval = g->until_probe = interval_after(g);
        }
        return;
    }
    if (a == g->best) {
        g->est[a] += 0.25 * (seconds - g->est[a]);
        g->until_probe--;
        /* The load changed under the running arm (a core turned busy, or a lucky probe chose the
         * wrong arm): whether the other is faster now is worth one step at once. A probe that finds
         * it is not faster sets est[!a] >= 0.95 est[a], so this does not fire again until the
         * running arm slows down by another 30% or so. */
        if (g->est[a] > SLOWED_DOWN * g->est[!a]) g->until_probe = 0;
        return;
    }
    g->est[a] = seconds; /* its last estimate is at least `interval` steps old: the load may have changed */
    if (g->est[a] < 0.95 * g->est[g->best]) {
        g->best = a;
        g->interval = interval_after(g);
    } else if (g->interval < MAX_INTERVAL) {
        g->interval *= 2;
    }
    g->until_probe = g->interval;
}
