/* Checkpointing strategies on hand-built chains (schedule/strategies.h), against references written
 * here independently of schedule/:
 *   - sim(): a simulator of chain actions that checks validity (BWD k-1 .. 0, each after a FWD_ALL
 *     of its segment, every FWD from cut 0, a pinned cut or the current one, no FWD of a segment
 *     already reversed, no pin left at the end) and recomputes chain.c's documented estimate (peak =
 *     fixed + cuts pinned, current or of a held segment + held fwd_all + the action's transient;
 *     time = forward + backward time); every schedule is also run through chain_schedule_validate/estimate and must
 *     agree with it;
 *   - revolve's count t l - C(s+t, s+1) by explicit binomials and by its defining recursion;
 *   - exhaustive search (Dijkstra over every state of the chain: pins, held segments, current cut,
 *     reversed prefix) for the fastest schedule under a budget on chains of k <= 6, over persistent
 *     schedules (rotor's class: a pin is released only once its segment is reversed) that never
 *     re-run a held segment and never drop a discarded forward's result unused.
 * Fails through the exit code.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "schedule/strategies.h"

static int failures;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            if (failures < 30) {                                                                   \
                fprintf(stderr, "%s:%d: FAIL %s: ", __FILE__, __LINE__, #cond);                    \
                fprintf(stderr, __VA_ARGS__);                                                      \
                fprintf(stderr, "\n");                                                             \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}
static int rnd_int(int lo, int hi) { return lo + (int)(rnd() % (uint64_t)(hi - lo + 1)); }
static double rnd_unit(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }

/* ---- chains ---- */

typedef struct {
    sc_chain c;
} test_chain;

static void test_chain_alloc(test_chain *t, int k) {
    sc_chain *c = &t->c;
    bool ok = chain_alloc(c, k);
    SC_ASSERT(ok);
    for (int i = 0; i <= k; i++) c->pos[i] = i;
}

static void chain_release(test_chain *t) {
    chain_free(&t->c);
}

/* Heterogeneous chain; sizes in multiples of 64 like real tensors; cut 0 and cut k empty as
 * segment.c builds them. */
static void chain_random(test_chain *t, int k) {
    test_chain_alloc(t, k);
    sc_chain *c = &t->c;
    for (int i = 1; i < k; i++) c->cut_bytes[i] = 64 * rnd_int(1, 20);
    for (int i = 0; i < k; i++) {
        c->fwd_all_bytes[i] = 64 * rnd_int(0, 30);
        c->fwd_peak_bytes[i] = 64 * rnd_int(1, 20);
        c->bwd_peak_bytes[i] = 64 * rnd_int(0, 20);
        c->fwd_time[i] = 0.1 + rnd_unit() * (rnd() % 4 == 0 ? 10 : 1);
        c->bwd_time[i] = 0.1 + rnd_unit();
    }
    c->fixed_bytes = 64 * rnd_int(0, 100);
}

static void chain_uniform(test_chain *t, int k) {
    test_chain_alloc(t, k);
    sc_chain *c = &t->c;
    for (int i = 1; i < k; i++) c->cut_bytes[i] = 100;
    for (int i = 0; i < k; i++) {
        c->fwd_all_bytes[i] = 300;
        c->fwd_peak_bytes[i] = 150;
        c->bwd_peak_bytes[i] = 200;
        c->fwd_time[i] = 1;
        c->bwd_time[i] = 2;
    }
    c->fixed_bytes = 1000;
}

/* ---- independent simulator ---- */

typedef struct {
    int64_t peak;
    double time;
    int max_pinned; /* cut 0 included */
    int n_discard, n_all;
} sim_result;

static int64_t sim_mem(const sc_chain *c, const char *pinned, const char *held, int cur) {
    int64_t m = c->fixed_bytes;
    for (int j = 1; j <= c->k; j++)
        if (pinned[j] || cur == j || (j < c->k && held[j])) m += c->cut_bytes[j];
    for (int j = 0; j < c->k; j++)
        if (held[j]) m += c->fwd_all_bytes[j];
    return m;
}

static int sim(const sc_chain *c, const sc_chain_schedule *s, sim_result *r, char *err, size_t n) {
    int k = c->k, cur = -1, nb = k - 1, ok = 1;
    char *pinned = calloc((size_t)k + 1, 1), *held = calloc((size_t)k, 1);
    memset(r, 0, sizeof *r);
    r->peak = c->fixed_bytes;
    r->max_pinned = 1;
    for (int i = 0; i < s->n && ok; i++) {
        int x = s->a[i].seg;
        sc_chain_action_kind kind = s->a[i].kind;
        int is_fwd = kind == SC_CHAIN_FWD_DISCARD || kind == SC_CHAIN_FWD_ALL;
        if (!((is_fwd || kind == SC_CHAIN_KEEP) && x == cur)) cur = -1; /* the current cut goes unused */
        int64_t mem = sim_mem(c, pinned, held, cur);
        int np = 1;
        for (int j = 1; j <= k; j++) np += pinned[j];
        switch (kind) {
        case SC_CHAIN_FWD_DISCARD:
        case SC_CHAIN_FWD_ALL:
            if (x < 0 || x >= k || x > nb || !(x == 0 || pinned[x] || cur == x) || held[x]) {
                snprintf(err, n, "action %d: FWD(%d) invalid (cur %d, next bwd %d)", i, x, cur, nb);
                ok = 0;
                break;
            }
            if (mem + c->fwd_peak_bytes[x] > r->peak) r->peak = mem + c->fwd_peak_bytes[x];
            r->time += c->fwd_time[x];
            if (kind == SC_CHAIN_FWD_ALL)
                held[x] = 1, r->n_all++;
            else
                r->n_discard++;
            cur = x + 1;
            break;
        case SC_CHAIN_BWD:
            if (x != nb || !held[x]) {
                snprintf(err, n, "action %d: BWD(%d) invalid (next bwd %d)", i, x, nb);
                ok = 0;
                break;
            }
            if (mem + c->bwd_peak_bytes[x] > r->peak) r->peak = mem + c->bwd_peak_bytes[x];
            r->time += c->bwd_time[x];
            held[x] = 0, nb--;
            break;
        case SC_CHAIN_KEEP:
            if (x < 1 || x > k || pinned[x] || cur != x) {
                snprintf(err, n, "action %d: KEEP(%d) of a cut not current (cur %d)", i, x, cur);
                ok = 0;
                break;
            }
            pinned[x] = 1;
            if (np + 1 > r->max_pinned) r->max_pinned = np + 1;
            break;
        case SC_CHAIN_DROP:
            if (x < 1 || x > k || !pinned[x]) {
                snprintf(err, n, "action %d: DROP(%d) of a cut not pinned", i, x);
                ok = 0;
                break;
            }
            pinned[x] = 0;
            break;
        }
        if (!ok) break;
        int64_t after = sim_mem(c, pinned, held, cur);
        if (after > r->peak) r->peak = after;
    }
    if (ok && nb != -1) snprintf(err, n, "ends before BWD(%d)", nb), ok = 0;
    for (int j = 1; ok && j <= k; j++)
        if (pinned[j]) snprintf(err, n, "cut %d still pinned at the end", j), ok = 0;
    free(pinned), free(held);
    return ok;
}

/* Runs sim and the library's validate/estimate on s; returns 1 when all agree and s is valid. */
static int check_schedule(const char *what, const sc_chain *c, const sc_chain_schedule *s, sim_result *r) {
    char err[200] = "";
    int ok = sim(c, s, r, err, sizeof err);
    CHECK(ok, "%s (k=%d): %s", what, c->k, err);
    if (!ok && failures < 5) { /* the schedule, for diagnosis */
        static const char *names[] = {"D", "A", "B", "K", "X"};
        for (int i = 0; i < s->n; i++) fprintf(stderr, "%s%d ", names[s->a[i].kind], s->a[i].seg);
        fprintf(stderr, "\n");
    }
    sc_status st = chain_schedule_validate(c, s);
    CHECK(st == SC_OK, "%s (k=%d): chain_schedule_validate: %s", what, c->k, st ? sc_status_message(st) : "");
    sc_status_free(st);
    int64_t peak;
    double t;
    chain_schedule_estimate(c, s, &peak, &t);
    CHECK(!ok || peak == r->peak, "%s (k=%d): estimate peak %" PRId64 " vs sim %" PRId64, what, c->k, peak, r->peak);
    CHECK(!ok || fabs(t - r->time) <= 1e-9 * (1 + t), "%s (k=%d): estimate time %g vs sim %g", what, c->k, t,
          r->time);
    return ok;
}

/* ---- revolve references ---- */

static int64_t binom(int64_t n, int64_t r) {
    if (r < 0 || r > n) return 0;
    int64_t b = 1;
    for (int64_t i = 1; i <= r; i++) b = b * (n - r + i) / i;
    return b;
}

static int64_t revolve_formula(int64_t l, int64_t s) {
    int64_t t = 0;
    while (l > binom(s + t, s)) t++;
    return t * l - binom(s + t, s + 1);
}

enum { RL = 60, RS = 5 };
static int64_t revolve_rec[RL + 1][RS + 1]; /* F(l, s) by its defining recursion */
static void revolve_table(void) {
    for (int s = 1; s <= RS; s++)
        for (int l = 1; l <= RL; l++) {
            if (l == 1) {
                revolve_rec[l][s] = 0;
                continue;
            }
            if (s == 1) {
                revolve_rec[l][s] = (int64_t)l * (l - 1) / 2;
                continue;
            }
            int64_t best = INT64_MAX;
            for (int j = 1; j < l; j++) {
                int64_t v = j + revolve_rec[l - j][s - 1] + revolve_rec[j][s];
                if (v < best) best = v;
            }
            revolve_rec[l][s] = best;
        }
}

static void test_binomial(void) {
    revolve_table();
    CHECK(revolve_formula(3, 1) == 3, "revolve s=1 l=3 gives %" PRId64, revolve_formula(3, 1));
    for (int s = 1; s <= RS; s++)
        for (int l = 1; l <= RL; l++) {
            test_chain t;
            chain_uniform(&t, l);
            sc_chain_schedule sch = {0};
            sc_status st = strategy_dc(&t.c, s, 0, &sch);
            CHECK(st == SC_OK, "dc slots=%d l=%d: %s", s, l, st ? sc_status_message(st) : "");
            sc_status_free(st);
            sim_result r;
            if (check_schedule("dc binomial", &t.c, &sch, &r)) {
                int64_t want = revolve_formula(l, s);
                CHECK(want == revolve_rec[l][s], "formula %" PRId64 " vs recursion %" PRId64 " (l=%d s=%d)", want,
                      revolve_rec[l][s], l, s);
                CHECK(r.n_discard == want, "binomial l=%d s=%d: %d forward steps, revolve %" PRId64, l, s,
                      r.n_discard, want);
                CHECK(r.n_all == l, "binomial l=%d s=%d: %d FWD_ALL", l, s, r.n_all);
                CHECK(r.max_pinned <= s, "binomial l=%d s=%d: %d cuts pinned", l, s, r.max_pinned);
                CHECK(strategy_binomial_forwards(l, s) == want, "strategy_binomial_forwards(%d,%d)", l, s);
            }
            chain_schedule_free(&sch);
            chain_release(&t);
        }
}

static int ceil_log2(int k) {
    int d = 0;
    while ((1 << d) < k) d++;
    return d;
}

static void test_bisection(void) {
    for (int k = 1; k <= 300; k += (k < 40 ? 1 : 7)) {
        test_chain t;
        chain_random(&t, k);
        if (k % 3 == 0) t.c.fwd_time[k / 2] = 1000; /* skewed costs must not deepen the recursion */
        sc_chain_schedule sch = {0};
        sc_status st = strategy_dc(&t.c, 0, 0, &sch);
        CHECK(st == SC_OK, "dc k=%d: %s", k, st ? sc_status_message(st) : "");
        sc_status_free(st);
        sim_result r;
        if (check_schedule("dc bisection", &t.c, &sch, &r)) {
            int d = ceil_log2(k);
            CHECK(r.max_pinned <= d + 1, "bisection k=%d: %d cuts pinned > %d", k, r.max_pinned, d + 1);
            CHECK(r.n_discard + r.n_all <= k * (d + 1), "bisection k=%d: %d forwards", k, r.n_discard + r.n_all);
            CHECK(r.n_all == k, "bisection k=%d: %d FWD_ALL", k, r.n_all);
        }
        chain_schedule_free(&sch);
        chain_release(&t);
    }
}

/* ---- exhaustive search ---- */

typedef struct {
    int k;
    size_t n_states;
    double *dist;
    int64_t budget_free; /* budget - fixed */
} bf_ctx;

/* state: nb+1 in [0,k], pinned mask over cuts 1..k, held mask, cur+1 in [0,k+1], fresh bit */
static size_t bf_encode(int k, int nb, unsigned P, unsigned H, int cur, int fresh) {
    size_t v = (size_t)(nb + 1);
    v = v * ((size_t)1 << k) + P;
    v = v * ((size_t)1 << k) + H;
    v = v * (size_t)(k + 2) + (size_t)(cur + 1);
    return v * 2 + (size_t)fresh;
}
static void bf_decode(int k, size_t v, int *nb, unsigned *P, unsigned *H, int *cur, int *fresh) {
    *fresh = (int)(v % 2), v /= 2;
    *cur = (int)(v % (size_t)(k + 2)) - 1, v /= (size_t)(k + 2);
    *H = (unsigned)(v % ((size_t)1 << k)), v /= ((size_t)1 << k);
    *P = (unsigned)(v % ((size_t)1 << k)), v /= ((size_t)1 << k);
    *nb = (int)v - 1;
}

static int64_t bf_mem(const sc_chain *c, unsigned P, unsigned H, int cur) {
    int64_t m = 0;
    for (int j = 1; j <= c->k; j++)
        if ((P >> (j - 1) & 1) || cur == j || (j < c->k && (H >> j & 1))) m += c->cut_bytes[j];
    for (int j = 0; j < c->k; j++)
        if (H >> j & 1) m += c->fwd_all_bytes[j];
    return m;
}

typedef struct {
    double d;
    size_t v;
} heap_item;
typedef struct {
    heap_item *h;
    size_t n, cap;
} heap;
static void heap_push(heap *q, double d, size_t v) {
    if (q->n == q->cap) q->cap = q->cap ? 2 * q->cap : 1024, q->h = realloc(q->h, q->cap * sizeof *q->h);
    size_t i = q->n++;
    while (i > 0 && q->h[(i - 1) / 2].d > d) q->h[i] = q->h[(i - 1) / 2], i = (i - 1) / 2;
    q->h[i] = (heap_item){d, v};
}
static heap_item heap_pop(heap *q) {
    heap_item top = q->h[0], last = q->h[--q->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= q->n) break;
        if (l + 1 < q->n && q->h[l + 1].d < q->h[l].d) l++;
        if (q->h[l].d >= last.d) break;
        q->h[i] = q->h[l], i = l;
    }
    if (q->n) q->h[i] = last;
    return top;
}

/* Least forward time of any schedule whose peak stays within budget; INFINITY when none. */
static double brute_force(const sc_chain *c, int64_t budget) {
    int k = c->k;
    int64_t M = budget - c->fixed_bytes;
    if (M < 0) return INFINITY;
    size_t n = (size_t)(k + 1) << (2 * k);
    n = n * (size_t)(k + 2) * 2;
    double *dist = malloc(n * sizeof(double));
    size_t *from = getenv("BF_TRACE") ? malloc(n * sizeof(size_t)) : NULL;
    for (size_t i = 0; i < n; i++) dist[i] = INFINITY;
    heap q = {0};
    size_t s0 = bf_encode(k, k - 1, 0, 0, -1, 0);
    dist[s0] = 0;
    heap_push(&q, 0, s0);
    double answer = INFINITY;
    while (q.n) {
        heap_item it = heap_pop(&q);
        if (it.d > dist[it.v]) continue;
        int nb, cur, fresh;
        unsigned P, H;
        bf_decode(k, it.v, &nb, &P, &H, &cur, &fresh);
        if (nb == -1) {
            answer = it.d;
            for (size_t v = it.v; from && v != s0; v = from[v]) {
                int a1, a2, a3;
                unsigned b1, b2;
                bf_decode(k, v, &a1, &b1, &b2, &a2, &a3);
                fprintf(stderr, "[nb%d P%x H%x cur%d] <- ", a1, b1, b2, a2);
            }
            if (from) fprintf(stderr, "\n");
            break;
        }
        int64_t mem = bf_mem(c, P, H, -1); /* the current cut dropped, as any action but KEEP/FWD of it does */
#define RELAX(D, NB, NP, NH, NC, NF)                                                               \
    do {                                                                                           \
        size_t w_ = bf_encode(k, NB, NP, NH, NC, NF);                                              \
        if ((D) < dist[w_]) {                                                                      \
            dist[w_] = (D), heap_push(&q, (D), w_);                                                \
            if (from) from[w_] = it.v;                                                             \
        }                                                                                          \
    } while (0)
        /* forwards */
        for (int i = 0; i <= nb; i++) {
            if (H >> i & 1) continue;
            if (!(i == 0 || (P >> (i - 1) & 1) || cur == i)) continue;
            if (fresh && cur != i) continue; /* the previous discard's result would go unused */
            int64_t before = bf_mem(c, P, H, cur == i ? cur : -1);
            if (before + c->fwd_peak_bytes[i] > M) continue;
            for (int all = 0; all < 2; all++) {
                unsigned nh = all ? H | 1u << i : H;
                if (bf_mem(c, P, nh, i + 1) > M) continue;
                RELAX(it.d + c->fwd_time[i], nb, P, nh, i + 1, !all);
            }
        }
        /* backward */
        if (!fresh && (H >> nb & 1) && mem + c->bwd_peak_bytes[nb] <= M)
            RELAX(it.d + c->bwd_time[nb], nb - 1, P, H & ~(1u << nb), -1, 0);
        /* keep the current cut */
        if (cur >= 1 && !(P >> (cur - 1) & 1)) RELAX(it.d, nb, P | 1u << (cur - 1), H, cur, 0);
        /* drops (they drop the current cut too) */
        if (!fresh)
            for (int j = 1; j <= k; j++)
                if ((P >> (j - 1) & 1) && j > nb) RELAX(it.d, nb, P & ~(1u << (j - 1)), H, -1, 0);
#undef RELAX
    }
    free(q.h);
    free(dist);
    free(from);
    return answer;
}

static void test_brute_force(void) {
    int compared = 0, infeasible = 0;
    for (int trial = 0; trial < 400; trial++) {
        int k = rnd_int(1, trial < 300 ? 5 : 6);
        test_chain t;
        chain_random(&t, k);
        sc_chain_schedule none = {0};
        sc_status st = strategy_none(&t.c, &none);
        sc_status_free(st);
        int64_t none_peak;
        double ft;
        chain_schedule_estimate(&t.c, &none, &none_peak, &ft);
        chain_schedule_free(&none);
        int64_t minb = strategy_min_budget(&t.c, NULL, 0);
        /* the claimed least budget is exactly the least feasible one */
        CHECK(brute_force(&t.c, minb) < INFINITY, "k=%d: brute force finds nothing at min budget %" PRId64, k, minb);
        CHECK(brute_force(&t.c, minb - 1) == INFINITY, "k=%d: brute force fits below min budget %" PRId64, k, minb);
        for (int b = 0; b < 4; b++) {
            int64_t lo = minb - 64 * 3, hi = none_peak + 64;
            int64_t budget = lo + (int64_t)(rnd_unit() * (double)(hi - lo));
            if (b == 0) budget = minb;
            double want = brute_force(&t.c, budget);
            sc_chain_schedule sch = {0};
            st = strategy_optimal(&t.c, budget, &sch);
            if (want == INFINITY) {
                CHECK(st != SC_OK, "k=%d budget %" PRId64 ": optimal found a schedule, brute force none", k, budget);
                infeasible++;
            } else {
                CHECK(st == SC_OK, "k=%d budget %" PRId64 ": optimal failed (%s), brute force %g", k, budget,
                      st ? sc_status_message(st) : "", want);
                sim_result r;
                if (st == SC_OK && check_schedule("optimal", &t.c, &sch, &r)) {
                    CHECK(r.peak <= budget, "k=%d: optimal peak %" PRId64 " over budget %" PRId64, k, r.peak, budget);
                    CHECK(fabs(r.time - want) <= 1e-9 * (1 + want), "k=%d budget %" PRId64 ": optimal %.12g, brute %.12g",
                          k, budget, r.time, want);
                    if (fabs(r.time - want) > 1e-9 * (1 + want) && failures <= 2) { /* show both */
                        const sc_chain *c = &t.c;
                        fprintf(stderr, "fixed %" PRId64 "\n", c->fixed_bytes);
                        for (int i = 0; i < k; i++)
                            fprintf(stderr, "seg %d: cut %" PRId64 " all %" PRId64 " fpk %" PRId64 " bpk %" PRId64
                                    " ft %g bt %g\n", i, c->cut_bytes[i], c->fwd_all_bytes[i], c->fwd_peak_bytes[i],
                                    c->bwd_peak_bytes[i], c->fwd_time[i], c->bwd_time[i]);
                        static const char *names[] = {"D", "A", "B", "K", "X"};
                        for (int i = 0; i < sch.n; i++) fprintf(stderr, "%s%d ", names[sch.a[i].kind], sch.a[i].seg);
                        fprintf(stderr, "\n");
                        setenv("BF_TRACE", "1", 1);
                        brute_force(c, budget);
                        unsetenv("BF_TRACE");
                    }
                    compared++;
                }
            }
            sc_status_free(st);
            chain_schedule_free(&sch);
        }
        chain_release(&t);
    }
    printf("brute force: %d optimal schedules compared, %d infeasible budgets\n", compared, infeasible);
    CHECK(compared > 500 && infeasible > 50, "too few cases (%d, %d)", compared, infeasible);
}

/* ---- every strategy valid; optimal and auto no slower than any other that fits ---- */

static double run_and_check(const char *what, const sc_chain *c, sc_status st, sc_chain_schedule *s, int64_t budget) {
    double t = INFINITY;
    if (st == SC_OK) {
        sim_result r;
        if (check_schedule(what, c, s, &r) && (budget <= 0 || r.peak <= budget)) t = r.time;
    }
    sc_status_free(st);
    chain_schedule_free(s);
    return t;
}

static void test_orders(void) {
    for (int trial = 0; trial < 150; trial++) {
        int k = rnd_int(1, trial < 120 ? 40 : 130);
        test_chain t;
        chain_random(&t, k);
        sc_chain_schedule s = {0};
        int64_t none_peak;
        double dummy;
        sc_status_free(strategy_none(&t.c, &s));
        chain_schedule_estimate(&t.c, &s, &none_peak, &dummy);
        chain_schedule_free(&s);
        int64_t minb = strategy_min_budget(&t.c, NULL, 0);
        int64_t budget = trial % 5 == 0 ? 0 : minb + (int64_t)(rnd_unit() * (double)(none_peak - minb));
        double others = INFINITY;
        others = fmin(others, run_and_check("none", &t.c, strategy_none(&t.c, &s), &s, budget));
        others = fmin(others, run_and_check("sqrt", &t.c, strategy_sqrt(&t.c, &s), &s, budget));
        for (int slots = 0; slots <= 8; slots++)
            others = fmin(others, run_and_check("dc", &t.c, strategy_dc(&t.c, slots, 0, &s), &s, budget));
        double opt = run_and_check("optimal", &t.c, strategy_optimal(&t.c, budget, &s), &s, budget);
        CHECK(opt < INFINITY, "k=%d budget %" PRId64 " (min %" PRId64 "): optimal found nothing", k, budget, minb);
        CHECK(opt <= others * (1 + 1e-12), "k=%d budget %" PRId64 ": optimal %g slower than another strategy %g", k,
              budget, opt, others);
        sc_strategy chosen = SC_STRATEGY_AUTO;
        double au = run_and_check("auto", &t.c, strategy_auto_pick(&t.c, budget, &s, &chosen), &s, budget);
        CHECK(au <= fmin(opt, others) * (1 + 1e-12), "k=%d: auto %g vs best %g", k, au, fmin(opt, others));
        CHECK(chosen != SC_STRATEGY_AUTO, "auto did not say what it chose");
        if (budget == 0) CHECK(chosen == SC_STRATEGY_NONE, "unlimited budget: auto chose %d", (int)chosen);
        chain_release(&t);
    }
}

/* ---- infeasible budgets ---- */

static void test_infeasible(void) {
    for (int trial = 0; trial < 40; trial++) {
        int k = rnd_int(1, 60);
        test_chain t;
        chain_random(&t, k);
        if (trial % 2) t.c.fixed_bytes = 1 << 20; /* fixed bytes dominate */
        int64_t minb = strategy_min_budget(&t.c, NULL, 0);
        char num[32];
        snprintf(num, sizeof num, "%" PRId64, minb);
        sc_chain_schedule s = {0};
        sc_status st = strategy_optimal(&t.c, minb - 1, &s);
        CHECK(st && strstr(sc_status_message(st), num), "optimal below min: %s", st ? sc_status_message(st) : "ok");
        CHECK(st && strstr(sc_status_message(st), "dominated by"), "no cause given");
        if (st && trial % 2) CHECK(strstr(sc_status_message(st), "fixed bytes (parameters"), "%s", sc_status_message(st));
        if (trial == 0 && st) printf("message: %s\n", sc_status_message(st));
        sc_status_free(st);
        chain_schedule_free(&s);
        sc_strategy chosen;
        st = strategy_auto_pick(&t.c, minb - 1, &s, &chosen);
        CHECK(st && strstr(sc_status_message(st), num), "auto below min: %s", st ? sc_status_message(st) : "ok");
        sc_status_free(st);
        chain_schedule_free(&s);
        CHECK(run_and_check("optimal at min", &t.c, strategy_optimal(&t.c, minb, &s), &s, minb) < INFINITY,
              "k=%d: optimal fails at the min budget it reported", k);
        CHECK(run_and_check("auto at min", &t.c, strategy_auto_pick(&t.c, minb, &s, &chosen), &s, minb) < INFINITY,
              "k=%d: auto fails at the min budget it reported", k);
        chain_release(&t);
    }
}

/* ---- long chains: coarsened program, speed ---- */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_long(void) {
    test_chain t;
    chain_random(&t, 1500);
    sc_chain_schedule s = {0};
    int64_t none_peak, bis_peak;
    double none_t, bis_t;
    sc_status_free(strategy_none(&t.c, &s));
    chain_schedule_estimate(&t.c, &s, &none_peak, &none_t);
    chain_schedule_free(&s);
    sc_status_free(strategy_dc(&t.c, 0, 0, &s));
    chain_schedule_estimate(&t.c, &s, &bis_peak, &bis_t);
    chain_schedule_free(&s);
    int64_t budgets[] = {bis_peak, (bis_peak + none_peak) / 2, none_peak / 4 + bis_peak};
    for (int i = 0; i < 3; i++) {
        double t0 = now();
        double opt = run_and_check("optimal long", &t.c, strategy_optimal(&t.c, budgets[i], &s), &s, budgets[i]);
        printf("k=1500 budget %" PRId64 " (none %" PRId64 "): optimal time %.1f (none %.1f, bisection %.1f) "
               "in %.2f s\n",
               budgets[i], none_peak, opt, none_t, bis_t, now() - t0);
        CHECK(opt <= bis_t * (1 + 1e-12), "long chain: optimal %g slower than bisection %g", opt, bis_t);
    }
    chain_release(&t);

    chain_uniform(&t, 250000);
    double t0 = now();
    sc_status st = strategy_dc(&t.c, 0, 0, &s);
    CHECK(st == SC_OK, "dc on 250000 segments");
    sc_status_free(st);
    int64_t peak;
    double ft;
    chain_schedule_estimate(&t.c, &s, &peak, &ft);
    /* uniform: fwd_time 1, bwd_time 2 per segment; forward work over one sweep */
    printf("k=250000 bisection: %d actions, peak %" PRId64 ", forward work %.2f sweeps, %.2f s\n", s.n, peak,
           (ft - 500000.0) / 250000.0, now() - t0);
    CHECK(chain_schedule_validate(&t.c, &s) == SC_OK, "dc 250000 invalid");
    chain_schedule_free(&s);
    t0 = now();
    st = strategy_optimal(&t.c, peak, &s);
    CHECK(st == SC_OK, "optimal on 250000 segments: %s", st ? sc_status_message(st) : "");
    sc_status_free(st);
    int64_t opeak;
    double oft;
    chain_schedule_estimate(&t.c, &s, &opeak, &oft);
    printf("k=250000 optimal at that budget: peak %" PRId64 ", forward work %.2f sweeps, %.2f s\n", opeak,
           (oft - 500000.0) / 250000.0, now() - t0);
    CHECK(opeak <= peak && oft <= ft, "optimal worse than bisection on 250000");
    chain_schedule_free(&s);
    chain_release(&t);
}

int main(void) {
    test_binomial();
    test_bisection();
    test_brute_force();
    test_orders();
    test_infeasible();
    test_long();
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("all strategy tests passed\n");
    return 0;
}
