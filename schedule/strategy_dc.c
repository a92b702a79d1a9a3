/* Divide-and-conquer reversal of a chain (strategy_dc), two flavours.
 *
 * slots == 0, bisection (Siskind and Pearlmutter 2018). reverse([a, b)), cut a resident and pinned:
 *   b - a == 1: FWD_ALL(a), BWD(a), DROP(a) (its last use; not for cut 0)
 *   else:       FWD_DISCARD(a .. m-1), KEEP(m), reverse([m, b)), reverse([a, m))
 * m balances the forward time of the two halves, restricted so that neither half holds more than
 * 2^(d-1) segments when [a, b) holds at most 2^d: the recursion is then at most ceil(log2 k) deep,
 * so at most ceil(log2 k) + 1 cuts are pinned (cut 0 included) whatever the costs, and every
 * segment is re-run at most ceil(log2 k) times: O(k log k) forward work.
 *
 * slots > 0, binomial placement (Griewank and Walther 2000, revolve). `slots` counts snapshot
 * slots the way revolve does: the chain's input (cut 0) occupies one, so slots = 1 re-runs from
 * the inputs for every segment. With F(l, s) the FWD_DISCARDs needed to reverse l segments with s
 * slots (the slot of the range's first cut included), FWD_ALL (revolve's recording step) not
 * counted:
 *   F(1, s) = 0,  F(l, 1) = l (l - 1) / 2,
 *   F(l, s) = min_{0<j<l} j + F(l - j, s - 1) + F(j, s)   (advance j, pin, right part, left part)
 *           = t l - C(s + t, s + 1),  t the least integer with l <= C(s + t, s)   (their Theorem).
 * This is the convention under which "s = 1, l = 3 gives 3" holds (REFERENCES.md): 2 + 1 + 0
 * forward steps before the three recordings. F(., s) is convex (slope t on each binomial band), so
 * the best j is found by binary search on the discrete slope of j + F(j, s) + F(l - j, s - 1).
 * On heterogeneous chains the placement is the same, by segment count (revolve is optimal only
 * for uniform steps; strategy_optimal handles costs).
 */
#include <stdint.h>

#include "schedule/strategies.h"

static double range_fwd_time(const sc_chain *c, int a, int b) {
    double t = 0;
    for (int i = a; i < b; i++) t += c->fwd_time[i];
    return t;
}

/* The cut m in (a, b) that best balances forward time between [a, m) and [m, b) while keeping
 * both halves within half the enclosing power of two. */
static int bisect_cut(const sc_chain *c, int a, int b) {
    int n = b - a, half = 1;
    while (2 * half < n) half *= 2; /* n <= 2 * half */
    int lo = b - half, hi = a + half;
    if (lo < a + 1) lo = a + 1;
    if (hi > b - 1) hi = b - 1;
    double total = range_fwd_time(c, a, b), left = range_fwd_time(c, a, lo);
    int best = lo;
    double best_gap = -1;
    for (int m = lo; m <= hi; m++) {
        double gap = left - (total - left);
        if (gap < 0) gap = -gap;
        if (best_gap < 0 || gap < best_gap) best_gap = gap, best = m;
        left += c->fwd_time[m];
    }
    return best;
}

static sc_status advance(sc_chain_schedule *out, int from, int to) {
    for (int i = from; i < to; i++) SC_TRY(chain_schedule_push(out, SC_CHAIN_FWD_DISCARD, i));
    return SC_OK;
}

/* The last use of pinned cut a: FWD_ALL(a), BWD(a), unpin (segment a held cut a until its BWD). */
static sc_status reverse_one(int a, sc_chain_schedule *out) {
    SC_TRY(chain_schedule_push(out, SC_CHAIN_FWD_ALL, a));
    SC_TRY(chain_schedule_push(out, SC_CHAIN_BWD, a));
    return a > 0 ? chain_schedule_push(out, SC_CHAIN_DROP, a) : SC_OK;
}

/* Reverses [a, b) with cut a pinned (cut 0: always there); the call owns the pin and drops it once
 * FWD_ALL(a) has run. The left half is a tail call, so the loop bounds the C stack by the
 * bisection depth. */
static sc_status bisect_reverse(const sc_chain *c, int a, int b, sc_chain_schedule *out) {
    while (b - a > 1) {
        int m = bisect_cut(c, a, b);
        SC_TRY(advance(out, a, m));
        SC_TRY(chain_schedule_push(out, SC_CHAIN_KEEP, m));
        SC_TRY(bisect_reverse(c, m, b, out));
        b = m;
    }
    return reverse_one(a, out);
}

/* F(l, s) above, in closed form. */
static int64_t binomial_forwards(int64_t l, int64_t s) {
    if (l <= 1) return 0;
    if (s <= 1) return l * (l - 1) / 2;
    int64_t t = 0, beta = 1; /* beta = C(s + t, s) */
    while (beta < l) {
        t++;
        beta = beta * (s + t) / t;
    }
    return t * l - beta * t / (s + 1); /* C(s + t, s + 1) = C(s + t, s) t / (s + 1) */
}

int64_t strategy_binomial_forwards(int64_t l, int64_t s) { return binomial_forwards(l, s); }

/* The j in (0, l) minimising j + F(j, s) + F(l - j, s - 1), s >= 2. */
static int64_t binomial_split(int64_t l, int64_t s) {
    int64_t lo = 1, hi = l - 1; /* find the least j whose slope g(j+1) - g(j) is >= 0 */
    while (lo < hi) {
        int64_t j = lo + (hi - lo) / 2;
        int64_t g0 = j + binomial_forwards(j, s) + binomial_forwards(l - j, s - 1);
        int64_t g1 = j + 1 + binomial_forwards(j + 1, s) + binomial_forwards(l - j - 1, s - 1);
        if (g1 - g0 >= 0)
            hi = j;
        else
            lo = j + 1;
    }
    return lo;
}

/* Reverses [a, b) with cut a pinned (owned as in bisect_reverse) and s slots (cut a's included). */
static sc_status binomial_reverse(int a, int b, int s, sc_chain_schedule *out) {
    while (b - a > 1) {
        if (s <= 1) { /* no slot to spare: re-run from cut a for each segment */
            SC_TRY(advance(out, a, b - 1));
            SC_TRY(chain_schedule_push(out, SC_CHAIN_FWD_ALL, b - 1));
            SC_TRY(chain_schedule_push(out, SC_CHAIN_BWD, b - 1));
            b--;
            continue;
        }
        int m = a + (int)binomial_split(b - a, s);
        SC_TRY(advance(out, a, m));
        SC_TRY(chain_schedule_push(out, SC_CHAIN_KEEP, m));
        SC_TRY(binomial_reverse(m, b, s - 1, out));
        b = m;
    }
    return reverse_one(a, out);
}

static int ceil_log2(int k) {
    int d = 0;
    while ((1 << d) < k) d++;
    return d;
}

sc_status strategy_dc(const sc_chain *c, int slots, int64_t budget, sc_chain_schedule *out) {
    if (c->k < 1) return sc_errorf("strategy dc: the chain has no segment (k = %d)", c->k);
    if (slots < 0) return sc_errorf("strategy dc: slots must be >= 0, got %d", slots);
    if (slots == 0)
        SC_TRY(bisect_reverse(c, 0, c->k, out));
    else
        SC_TRY(binomial_reverse(0, c->k, slots > c->k ? c->k : slots, out));
    if (budget <= 0) return SC_OK;
    int64_t peak;
    double time;
    chain_schedule_estimate(c, out, &peak, &time);
    if (peak <= budget) return SC_OK;
    if (slots == 0)
        return sc_errorf("strategy dc (bisection, up to %d pinned cuts over %d segments) needs %lld bytes, "
                         "over the budget of %lld bytes",
                         ceil_log2(c->k) + 1, c->k, (long long)peak, (long long)budget);
    return sc_errorf("strategy dc (binomial, %d slots over %d segments) needs %lld bytes, over the budget "
                     "of %lld bytes",
                     slots, c->k, (long long)peak, (long long)budget);
}
