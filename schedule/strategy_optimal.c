/* strategy_optimal: the fastest reversal of a heterogeneous chain under a peak-memory budget, by a
 * dynamic program in the manner of rotor (Herrmann, Beaumont, Eyraud-Dubois et al. 2019, "Optimal
 * checkpointing for heterogeneous chains"), over the memory model of schedule/strategies.h (the
 * one chain_schedule_estimate computes).
 *
 * T(a, b, M): least time to reverse segments [a, b) when cut a is resident (pinned, the pin owned
 * by the sub-problem, or current) and M bytes are free for the sub-problem, cut a's included (cut 0
 * lives in fixed bytes: 0 here). Cut a stays resident until BWD(a) either way (held or pinned).
 *   all:        FWD_ALL(a), reverse [a+1, b) with M - cut[a] - fwd_all[a], BWD(a)
 *               [DROP(a) if pinned]. Needs cut[a] + fwd_peak[a],
 *               cut[a] + fwd_all[a] + cut[a+1] and cut[a] + fwd_all[a] + bwd_peak[a] <= M.
 *   checkpoint: [KEEP(a) if current], FWD_DISCARD(a .. j-1), reverse [j, b) (cut j current) with
 *               M - cut[a], reverse [a, j) (cut a pinned) with M      (a < j < b).
 *               Needs cut[a] + fwd_peak[a] and cut[a] + cut[i] + fwd_peak[i] (a < i < j) <= M.
 * This covers rotor's persistent schedules: tests/test_strategies.c checks it equals exhaustive
 * search over every schedule that keeps each pin until its segment is reversed, never re-runs a
 * held segment and never leaves a discarded forward's result unused. Non-persistent schedules can
 * be faster under tight budgets: drop a pinned cut early and get it back for free from the
 * FWD_ALL of the segment before it, which has to run anyway (e.g. D0 K1 D1 D2 A3 B3 D1 K2 X1 A2 A0
 * K1 B2 A1 B1 B0 saves cut 1's bytes during A2); the program does not search those.
 * Memory is counted in units u: u = the gcd of the chain's byte counts when that gives at most
 * DP_EXACT_SLOTS units (the program is then exact), else budget / slots with every size rounded
 * up (the result then fits, possibly not optimally). Time O(k^3 S), table k^2 S.
 *
 * Chains longer than DP_MAX_K are coarsened to DP_MAX_K groups of consecutive segments (a coarse
 * chain whose numbers bound those of the fine schedule a coarse one expands to) and the program
 * runs on that; chains of up to DP_FULL_K segments also get the program on the whole chain with a
 * larger table, and the faster of the two competes. The result always competes with strategy_dc
 * (bisection and a range of slot counts): the fastest under chain_schedule_estimate within the
 * budget wins, which also covers rounding. The times are whatever the chain carries: the cost
 * model's, or measured per-node times with --calibrate (schedule/cost.h), so the program minimises
 * predicted recompute time, never FLOPs.
 *
 * The smallest feasible budget is exact in this model: every schedule runs each segment i with
 * FWD_ALL from a resident cut i and then BWD(i), so it needs fixed + need(i),
 * need(i) = cut[i] + max(fwd_peak[i], fwd_all[i] + cut[i+1], fwd_all[i] + bwd_peak[i]),
 * and dc with one slot (re-run from the inputs for every segment) has exactly max need as peak.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/units.h"
#include "schedule/strategies.h"

/* Two table shapes compete (strategy_optimal): a chain coarsened to DP_MAX_K groups with
 * DP_TABLE_ENTRIES cells (fine memory units), and, for chains of up to DP_FULL_K segments, the
 * uncoarsened chain with DP_FULL_ENTRIES cells (every segment boundary a candidate checkpoint, which
 * lets the program keep the output of an expensive node and re-run only the cheap ones after it;
 * its memory units are coarser). */
enum { DP_MAX_K = 96, DP_EXACT_SLOTS = 4096, DP_TABLE_ENTRIES = 4000000, DP_FULL_K = 160, DP_FULL_ENTRIES = 8000000 };

typedef struct {
    int k, S;
    const double *ft, *bt;
    int64_t *cut, *all, *fpk, *bpk; /* in units; cut[0] = 0 */
    double *T;                      /* [a][b][M] least time, INFINITY if infeasible */
    int *choice;                    /* 0 = all, j = checkpoint at j */
} dp_table;

static size_t dp_at(const dp_table *d, int a, int b, int64_t m) {
    return ((size_t)a * (size_t)(d->k + 1) + (size_t)b) * (size_t)(d->S + 1) + (size_t)m;
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t ceil_div(int64_t x, int64_t u) { return x <= 0 ? 0 : (x + u - 1) / u; }

int64_t strategy_segment_need(const sc_chain *c, int i, const char **what) {
    int64_t in = i > 0 ? c->cut_bytes[i] : 0, all = c->fwd_all_bytes[i];
    int64_t f = c->fwd_peak_bytes[i], kept = all + c->cut_bytes[i + 1], b = all + c->bwd_peak_bytes[i];
    const char *w = "forward transient peak";
    int64_t need = f;
    if (kept > need) need = kept, w = "kept activations (FWD_ALL) plus its output cut";
    if (b > need) need = b, w = "kept activations (FWD_ALL) plus its backward transient peak";
    if (what) *what = w;
    return in + need;
}

int64_t strategy_min_budget(const sc_chain *c, char *why, size_t why_len) {
    int worst = 0;
    const char *what = "";
    int64_t need = 0;
    for (int i = 0; i < c->k; i++) {
        const char *w;
        int64_t n = strategy_segment_need(c, i, &w);
        if (n > need) need = n, worst = i, what = w;
    }
    if (why && why_len && need >= c->fixed_bytes)
        snprintf(why, why_len,
                 "dominated by segment %d: its %s with its input cut need %lld bytes, on top of %lld fixed "
                 "bytes (parameters, optimizer state, inputs)",
                 worst, what, (long long)need, (long long)c->fixed_bytes);
    else if (why && why_len)
        snprintf(why, why_len,
                 "dominated by the fixed bytes (parameters, optimizer state, inputs): %lld; the largest segment "
                 "need, segment %d's %s with its input cut, adds %lld",
                 (long long)c->fixed_bytes, worst, what, (long long)need);
    return c->fixed_bytes + need;
}

static void dp_fill_cell(dp_table *d, int a, int b, const int64_t *adv_need, const double *adv_time) {
    int64_t ca = d->cut[a], held = ca + d->all[a];
    int64_t all_need = max64(ca + d->fpk[a], held + max64(d->cut[a + 1], d->bpk[a]));
    for (int64_t m = 0; m <= d->S; m++) {
        double best = INFINITY;
        int choice = -1;
        if (all_need <= m) {
            double sub = b == a + 1 ? 0 : d->T[dp_at(d, a + 1, b, m - held)];
            if (sub < INFINITY) best = d->ft[a] + sub + d->bt[a], choice = 0;
        }
        for (int j = a + 1; j < b; j++) {
            if (ca + adv_need[j] > m) continue;
            double right = d->T[dp_at(d, j, b, m - ca)];
            if (right == INFINITY) continue;
            double t = adv_time[j] + right + d->T[dp_at(d, a, j, m)];
            if (t < best) best = t, choice = j;
        }
        d->T[dp_at(d, a, b, m)] = best;
        d->choice[dp_at(d, a, b, m)] = choice;
    }
}

static void dp_fill(dp_table *d) {
    int64_t *adv_need = malloc(sizeof(int64_t) * (size_t)(d->k + 1));
    double *adv_time = malloc(sizeof(double) * (size_t)(d->k + 1));
    SC_ASSERT(adv_need && adv_time);
    for (int len = 1; len <= d->k; len++)
        for (int a = 0; a + len <= d->k; a++) {
            double t = 0;
            int64_t need = d->fpk[a];
            for (int j = a + 1; j < a + len; j++) {
                if (j > a + 1) need = max64(need, d->cut[j - 1] + d->fpk[j - 1]);
                t += d->ft[j - 1];
                adv_time[j] = t;
                adv_need[j] = need;
            }
            dp_fill_cell(d, a, a + len, adv_need, adv_time);
        }
    free(adv_need);
    free(adv_time);
}

static sc_status dp_emit(const dp_table *d, int a, int b, int64_t m, int pinned, sc_chain_schedule *out) {
    int j = d->choice[dp_at(d, a, b, m)];
    SC_ASSERT(j >= 0);
    if (j == 0) {
        SC_TRY(chain_schedule_push(out, SC_CHAIN_FWD_ALL, a));
        if (b > a + 1) SC_TRY(dp_emit(d, a + 1, b, m - d->cut[a] - d->all[a], 0, out));
        SC_TRY(chain_schedule_push(out, SC_CHAIN_BWD, a));
        /* cut a was held until BWD(a) anyway; a DROP right after FWD_ALL would drop the current cut */
        return pinned && a > 0 ? chain_schedule_push(out, SC_CHAIN_DROP, a) : SC_OK;
    }
    if (!pinned) SC_TRY(chain_schedule_push(out, SC_CHAIN_KEEP, a));
    for (int i = a; i < j; i++) SC_TRY(chain_schedule_push(out, SC_CHAIN_FWD_DISCARD, i));
    SC_TRY(dp_emit(d, j, b, m - d->cut[a], 0, out));
    return dp_emit(d, a, j, m, 1, out);
}

/* Runs the program for free memory `avail` bytes; appends the schedule and returns 1, or returns
 * 0 (no table fits, or nothing feasible at this rounding; *err set only on allocation failure). */
static int dp_solve(const sc_chain *c, int64_t avail, int64_t entries, sc_chain_schedule *out, sc_status *err) {
    int k = c->k;
    int64_t u = 0;
    for (int i = 1; i <= k; i++) u = sc_gcd64(u, c->cut_bytes[i]);
    for (int i = 0; i < k; i++)
        u = sc_gcd64(sc_gcd64(sc_gcd64(u, c->fwd_all_bytes[i]), c->fwd_peak_bytes[i]), c->bwd_peak_bytes[i]);
    int64_t slots_cap = entries / ((int64_t)k * (k + 1));
    if (slots_cap > DP_EXACT_SLOTS) slots_cap = DP_EXACT_SLOTS;
    if (slots_cap < 16 || avail < 0) return 0;
    if (u <= 0) u = 1;
    if (avail / u > slots_cap) u = ceil_div(avail, slots_cap);
    dp_table d = {.k = k, .S = (int)(avail / u), .ft = c->fwd_time, .bt = c->bwd_time};
    size_t cells = (size_t)k * (size_t)(k + 1) * (size_t)(d.S + 1);
    d.cut = calloc((size_t)(k + 1), sizeof(int64_t));
    d.all = calloc((size_t)k, sizeof(int64_t));
    d.fpk = calloc((size_t)k, sizeof(int64_t));
    d.bpk = calloc((size_t)k, sizeof(int64_t));
    d.T = malloc(cells * sizeof(double));
    d.choice = malloc(cells * sizeof(int));
    int ok = 0;
    if (d.cut && d.all && d.fpk && d.bpk && d.T && d.choice) {
        for (int i = 1; i <= k; i++) d.cut[i] = ceil_div(c->cut_bytes[i], u);
        for (int i = 0; i < k; i++) {
            d.all[i] = ceil_div(c->fwd_all_bytes[i], u);
            d.fpk[i] = ceil_div(c->fwd_peak_bytes[i], u);
            d.bpk[i] = ceil_div(c->bwd_peak_bytes[i], u);
        }
        dp_fill(&d);
        if (d.T[dp_at(&d, 0, k, d.S)] < INFINITY) {
            *err = dp_emit(&d, 0, k, d.S, 1, out);
            ok = *err == SC_OK;
        }
    } else {
        *err = sc_errorf("strategy optimal: out of memory for a %d x %d x %d table", k, k + 1, d.S + 1);
    }
    free(d.cut), free(d.all), free(d.fpk), free(d.bpk), free(d.T), free(d.choice);
    return ok;
}

/* A coarse chain of n groups of consecutive segments whose numbers bound the fine schedule the
 * groups expand to: a group's FWD_ALL holds its members' kept bytes and inner cuts, its forward
 * peak covers the keeping pass (which dominates the discarding one: each member starts from the
 * current cut with the earlier members held), its backward peak the worst member once the later
 * members are released. */
typedef struct {
    sc_chain c;
    int *start; /* [n+1] first fine segment of each group */
} coarse_chain;

static void coarse_free(coarse_chain *cc) {
    chain_free(&cc->c);
    free(cc->start);
}

static int coarse_build(const sc_chain *f, int n, coarse_chain *cc) {
    memset(cc, 0, sizeof *cc);
    sc_chain *c = &cc->c;
    if (!chain_alloc(c, n)) return 0;
    c->fixed_bytes = f->fixed_bytes;
    cc->start = calloc((size_t)n + 1, sizeof(int));
    if (!cc->start) return 0;
    for (int g = 0; g <= n; g++) cc->start[g] = (int)((int64_t)f->k * g / n);
    for (int g = 0; g < n; g++) {
        int p = cc->start[g], q = cc->start[g + 1];
        int64_t held = 0, peak = 0, bpk = 0;
        for (int i = p; i < q; i++) { /* FWD_ALL(i) from the current cut i; earlier members held */
            int64_t in = i > p ? f->cut_bytes[i] : 0;
            peak = max64(peak, held + in + f->fwd_peak_bytes[i]);
            held += in + f->fwd_all_bytes[i];
            c->fwd_time[g] += f->fwd_time[i];
            c->bwd_time[g] += f->bwd_time[i];
        }
        int64_t above = 0; /* bytes of the group's later members, released before BWD(i) */
        for (int i = q - 1; i >= p; i--) {
            bpk = max64(bpk, f->bwd_peak_bytes[i] - above);
            above += f->fwd_all_bytes[i] + (i > p ? f->cut_bytes[i] : 0);
        }
        c->pos[g] = f->pos[p];
        c->cut_bytes[g] = f->cut_bytes[p];
        c->fwd_all_bytes[g] = held;
        c->fwd_peak_bytes[g] = peak;
        c->bwd_peak_bytes[g] = bpk;
    }
    c->pos[n] = f->pos[f->k];
    c->cut_bytes[n] = f->cut_bytes[f->k];
    return 1;
}

static sc_status coarse_expand(const coarse_chain *cc, const sc_chain_schedule *s, sc_chain_schedule *out) {
    for (int i = 0; i < s->n; i++) {
        int g = s->a[i].seg, p = cc->start[g], q = cc->start[g + 1];
        switch (s->a[i].kind) {
        case SC_CHAIN_FWD_DISCARD:
        case SC_CHAIN_FWD_ALL:
            for (int j = p; j < q; j++) SC_TRY(chain_schedule_push(out, s->a[i].kind, j));
            break;
        case SC_CHAIN_BWD:
            for (int j = q - 1; j >= p; j--) SC_TRY(chain_schedule_push(out, SC_CHAIN_BWD, j));
            break;
        case SC_CHAIN_KEEP:
        case SC_CHAIN_DROP: SC_TRY(chain_schedule_push(out, s->a[i].kind, p)); break;
        }
    }
    return SC_OK;
}

/* Keeps `cand` in *best when it fits and is faster; frees the loser. */
static void keep_best(const sc_chain *c, int64_t budget, sc_chain_schedule *cand, sc_chain_schedule *best,
                      double *best_time) {
    int64_t peak;
    double t;
    chain_schedule_estimate(c, cand, &peak, &t);
    if ((budget <= 0 || peak <= budget) && t < *best_time) {
        chain_schedule_free(best);
        *best = *cand;
        *best_time = t;
    } else {
        chain_schedule_free(cand);
    }
    memset(cand, 0, sizeof *cand);
}

/* The program's schedule on c coarsened to at most max_k groups, with a table of `entries` cells. */
static sc_status dp_candidate(const sc_chain *c, int64_t avail, int max_k, int64_t entries, sc_chain_schedule *cand) {
    sc_status err = SC_OK;
    if (c->k <= max_k) {
        dp_solve(c, avail, entries, cand, &err);
        return err;
    }
    coarse_chain cc;
    if (!coarse_build(c, max_k, &cc)) {
        coarse_free(&cc);
        return sc_errorf("strategy optimal: out of memory coarsening a chain of %d segments", c->k);
    }
    sc_chain_schedule coarse = {0};
    if (dp_solve(&cc.c, avail, entries, &coarse, &err)) err = coarse_expand(&cc, &coarse, cand);
    chain_schedule_free(&coarse);
    coarse_free(&cc);
    return err;
}

sc_status strategy_optimal(const sc_chain *c, int64_t budget, sc_chain_schedule *out) {
    if (c->k < 1) return sc_errorf("strategy optimal: the chain has no segment (k = %d)", c->k);
    char why[256];
    int64_t min_budget = strategy_min_budget(c, why, sizeof why);
    if (budget > 0 && budget < min_budget)
        return sc_errorf("strategy optimal: no schedule fits in %lld bytes; the smallest feasible budget "
                         "is %lld bytes, %s",
                         (long long)budget, (long long)min_budget, why);
    if (budget <= 0) return strategy_none(c, out); /* no limit: nothing recomputed is the fastest */
    sc_chain_schedule best = {0}, cand = {0};
    double best_time = INFINITY;
    int64_t avail = budget;
    avail -= c->fixed_bytes;
    sc_status st = dp_candidate(c, avail, DP_MAX_K, DP_TABLE_ENTRIES, &cand);
    if (!st && cand.n) keep_best(c, budget, &cand, &best, &best_time);
    chain_schedule_free(&cand);
    if (!st && c->k > DP_MAX_K && c->k <= DP_FULL_K) {
        st = dp_candidate(c, avail, DP_FULL_K, DP_FULL_ENTRIES, &cand);
        if (!st && cand.n) keep_best(c, budget, &cand, &best, &best_time);
        chain_schedule_free(&cand);
    }
    if (st) {
        chain_schedule_free(&best);
        return st;
    }
    /* none, sqrt and dc compete: on long chains against the coarse program, everywhere against
     * rounding */
    st = strategy_none(c, &cand);
    if (!st) keep_best(c, budget, &cand, &best, &best_time);
    chain_schedule_free(&cand);
    if (!st) st = strategy_sqrt(c, &cand);
    if (!st) keep_best(c, budget, &cand, &best, &best_time);
    chain_schedule_free(&cand);
    if (st) {
        chain_schedule_free(&best);
        return st;
    }
    static const int slot_choices[] = {0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128, 256};
    for (size_t i = 0; i < sizeof slot_choices / sizeof *slot_choices; i++) {
        int s = slot_choices[i];
        if (s > c->k) break;
        if (s > 0 && strategy_binomial_forwards(c->k, s) > 64 * (int64_t)c->k) continue; /* too many re-runs */
        memset(&cand, 0, sizeof cand);
        st = strategy_dc(c, s, 0, &cand);
        if (st) {
            chain_schedule_free(&cand);
            chain_schedule_free(&best);
            return st;
        }
        keep_best(c, budget, &cand, &best, &best_time);
    }
    if (best.n == 0 && c->k <= 4096) { /* last resort: re-run from the inputs, peak = min_budget */
        memset(&cand, 0, sizeof cand);
        st = strategy_dc(c, 1, 0, &cand);
        if (!st) keep_best(c, budget, &cand, &best, &best_time);
        chain_schedule_free(&cand);
        if (st) return st;
    }
    if (best.n == 0)
        return sc_errorf("strategy optimal: found no schedule within %lld bytes for %d segments; the least "
                         "budget, %lld bytes, needs re-running from the inputs for every segment (quadratic), "
                         "which is not tried beyond 4096 segments; %s",
                         (long long)budget, c->k, (long long)min_budget, why);
    for (int i = 0; i < best.n; i++) {
        st = chain_schedule_push(out, best.a[i].kind, best.a[i].seg);
        if (st) break;
    }
    chain_schedule_free(&best);
    return st;
}
