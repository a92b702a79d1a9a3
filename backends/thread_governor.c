/* The host thread count of a repeated step (thread_governor.h). */
#include "backends/thread_governor.h"

enum { FIRST_INTERVAL = 4, CLEAR_INTERVAL = 16, MAX_INTERVAL = 64 };

/* An arm this much slower than the fastest is clearly beaten: one timed step of it is enough, and
 * a choice over it is not re-checked for CLEAR_INTERVAL steps. */
#define CLEARLY_SLOWER 1.5

/* The running arm's estimate past this multiple of another's last figure probes that one on the
 * next step instead of at the interval's end. */
#define SLOWED_DOWN 1.25

/* The arm of the lowest estimate other than `skip` (-1: any), the first on ties. */
static int fastest_but(const sc_thread_governor *g, int skip) {
    int lo = -1;
    for (int a = 0; a < g->n_arms; a++)
        if (a != skip && (lo < 0 || g->est[a] < g->est[lo])) lo = a;
    return lo;
}

/* Every arm but `a` is CLEARLY_SLOWER than it. */
static bool clear_win(const sc_thread_governor *g, int a) {
    for (int o = 0; o < g->n_arms; o++)
        if (o != a && g->est[o] < CLEARLY_SLOWER * g->est[a]) return false;
    return true;
}

/* Timed steps exploring still wants of arm a: one of each, a second of each arm within
 * CLEARLY_SLOWER of the fastest (the fastest itself unless it wins clearly). A second 1-thread step
 * of an idle machine whose cores scale tells nothing new, and on a model whose idle step takes
 * seconds it is the largest cost of a short run. */
static int wanted(const sc_thread_governor *g, int a) {
    for (int o = 0; o < g->n_arms; o++)
        if (g->timed[o] < 1) return g->timed[a] < 1;
    int lo = fastest_but(g, -1);
    if (a == lo ? clear_win(g, lo) : g->est[a] >= CLEARLY_SLOWER * g->est[lo]) return 0;
    return g->timed[a] < 2;
}

/* Exploring ends once; estimates that later move within CLEARLY_SLOWER do not restart it (the
 * probes re-measure the other arms). */
static bool exploring(const sc_thread_governor *g) {
    if (g->explored) return false;
    for (int a = 0; a < g->n_arms; a++)
        if (wanted(g, a)) return true;
    return false;
}

void thread_governor_init(sc_thread_governor *g, int threads) {
    *g = (sc_thread_governor){.n_arms = threads >= 3 ? 3 : 2, .arms = {threads, threads >= 3 ? threads - 1 : 1, 1},
                              .interval = FIRST_INTERVAL, .enabled = threads > 1};
    g->until_probe = g->interval;
}

/* Exploring: warm-ups first, then the wanted arm with the fewest timed steps (the lowest on ties). */
static int explore_next(const sc_thread_governor *g) {
    for (int a = 0; a < g->n_arms; a++)
        if (!g->warm[a]) return a;
    int pick = -1;
    for (int a = 0; a < g->n_arms; a++)
        if (wanted(g, a) && (pick < 0 || g->timed[a] < g->timed[pick])) pick = a;
    return pick;
}

int thread_governor_next(sc_thread_governor *g) {
    if (!g->enabled) return g->arms[0];
    if (exploring(g)) g->cur = explore_next(g);
    else g->cur = g->until_probe == 0 ? g->probe : g->best;
    return g->arms[g->cur];
}

/* The arm after `a` other than the best, in turn. */
static int next_other(const sc_thread_governor *g, int a) {
    do a = (a + 1) % g->n_arms;
    while (a == g->best);
    return a;
}

static void choose(sc_thread_governor *g, int best) {
    g->best = best;
    g->interval = g->until_probe = clear_win(g, best) ? CLEAR_INTERVAL : FIRST_INTERVAL;
    g->probe = next_other(g, best);
}

/* The best arm's step: its estimate follows the load; when it has slowed past the fastest other
 * arm's last figure (a core turned busy, or a lucky probe chose the wrong arm), that arm is worth
 * one step at once. A probe that finds it is not faster sets its estimate >= 0.95 of the best's, so this does
 * not fire again until the running arm slows down by another 30% or so. */
static void record_best(sc_thread_governor *g, double seconds) {
    int a = g->best;
    g->est[a] += 0.25 * (seconds - g->est[a]);
    g->until_probe--;
    int o = fastest_but(g, a);
    if (g->est[a] > SLOWED_DOWN * g->est[o]) {
        g->until_probe = 0;
        g->probe = o;
    }
}

/* A probe's step: its time is the arm's estimate now (the last one is at least `interval` steps
 * old: the load may have changed). */
static void record_probe(sc_thread_governor *g, int a, double seconds) {
    g->est[a] = seconds;
    if (g->est[a] < 0.95 * g->est[g->best]) {
        choose(g, a);
        return;
    }
    if (g->interval < MAX_INTERVAL) g->interval *= 2;
    g->until_probe = g->interval;
    g->probe = next_other(g, a);
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
            g->explored = true;
            choose(g, fastest_but(g, -1));
        }
        return;
    }
    if (a == g->best) record_best(g, seconds);
    else record_probe(g, a, seconds);
}

void thread_governor_runs(const sc_thread_governor *g, int64_t runs[2]) {
    runs[0] = g->runs[0];
    runs[1] = 0;
    for (int a = 1; a < g->n_arms; a++) runs[1] += g->runs[a];
}
