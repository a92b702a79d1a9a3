/* The simple strategies and the automatic choice among all of them.
 *
 * strategy_none: FWD_ALL 0..k-1 then BWD k-1..0 (today's store-everything step).
 * strategy_sqrt: Chen et al. 2016. Groups of g = ceil(sqrt(k)) consecutive segments; one forward
 *   sweep pins each group's first cut and runs the last group with FWD_ALL; then each earlier group,
 *   last first, is re-run with FWD_ALL from its pinned cut and reversed. One extra forward pass at
 *   most, about sqrt(k) pinned cuts plus one group's kept activations.
 * strategy_auto_pick: the fastest (chain_schedule_estimate's time) of none, sqrt, dc (bisection and
 *   several slot counts) and optimal whose estimated peak fits the budget; ties go to the simpler
 *   strategy. When nothing fits, the status gives strategy_min_budget's smallest feasible budget
 *   and what dominates it.
 */
#include <math.h>
#include <string.h>

#include "schedule/strategies.h"

sc_status strategy_none(const sc_chain *c, sc_chain_schedule *out) {
    if (c->k < 1) return sc_errorf("strategy none: the chain has no segment (k = %d)", c->k);
    for (int i = 0; i < c->k; i++) SC_TRY(chain_schedule_push(out, SC_CHAIN_FWD_ALL, i));
    for (int i = c->k - 1; i >= 0; i--) SC_TRY(chain_schedule_push(out, SC_CHAIN_BWD, i));
    return SC_OK;
}

sc_status strategy_sqrt(const sc_chain *c, sc_chain_schedule *out) {
    int k = c->k;
    if (k < 1) return sc_errorf("strategy sqrt: the chain has no segment (k = %d)", k);
    int g = (int)ceil(sqrt((double)k));
    int last = (k - 1) / g * g; /* first segment of the last group */
    for (int i = 0; i < last; i++) {
        SC_TRY(chain_schedule_push(out, SC_CHAIN_FWD_DISCARD, i));
        if ((i + 1) % g == 0) SC_TRY(chain_schedule_push(out, SC_CHAIN_KEEP, i + 1));
    }
    for (int p = last; p >= 0; p -= g) {
        int q = p + g < k ? p + g : k;
        for (int i = p; i < q; i++) SC_TRY(chain_schedule_push(out, SC_CHAIN_FWD_ALL, i));
        for (int i = q - 1; i >= p; i--) SC_TRY(chain_schedule_push(out, SC_CHAIN_BWD, i));
        if (p > 0) SC_TRY(chain_schedule_push(out, SC_CHAIN_DROP, p)); /* held until BWD(p) anyway */
    }
    return SC_OK;
}

typedef struct {
    sc_chain_schedule best;
    double time;
    sc_strategy strategy;
} auto_choice;

/* Takes cand (produced by strategy s with status st) when it fits and is strictly faster. */
static void auto_offer(const sc_chain *c, int64_t budget, sc_strategy s, sc_status st, sc_chain_schedule *cand,
                       auto_choice *ch) {
    if (st) {
        sc_status_free(st);
        chain_schedule_free(cand);
        memset(cand, 0, sizeof *cand);
        return;
    }
    int64_t peak;
    double t;
    chain_schedule_estimate(c, cand, &peak, &t);
    if ((budget <= 0 || peak <= budget) && t < ch->time) {
        chain_schedule_free(&ch->best);
        ch->best = *cand;
        ch->time = t;
        ch->strategy = s;
    } else {
        chain_schedule_free(cand);
    }
    memset(cand, 0, sizeof *cand);
}

sc_status strategy_auto_pick(const sc_chain *c, int64_t budget, sc_chain_schedule *out, sc_strategy *chosen) {
    if (c->k < 1) return sc_errorf("strategy auto: the chain has no segment (k = %d)", c->k);
    char why[256];
    int64_t min_budget = strategy_min_budget(c, why, sizeof why);
    if (budget > 0 && budget < min_budget)
        return sc_errorf("no plan fits in %lld bytes: the smallest feasible budget is %lld bytes, %s",
                         (long long)budget, (long long)min_budget, why);
    auto_choice ch = {.time = INFINITY, .strategy = SC_STRATEGY_NONE};
    sc_chain_schedule cand = {0};
    auto_offer(c, budget, SC_STRATEGY_NONE, strategy_none(c, &cand), &cand, &ch);
    auto_offer(c, budget, SC_STRATEGY_SQRT, strategy_sqrt(c, &cand), &cand, &ch);
    static const int slot_choices[] = {0, 2, 4, 8, 16, 32};
    for (size_t i = 0; i < sizeof slot_choices / sizeof *slot_choices; i++) {
        int s = slot_choices[i];
        if (s > c->k) break;
        if (s > 0 && strategy_binomial_forwards(c->k, s) > 64 * (int64_t)c->k) continue;
        auto_offer(c, budget, SC_STRATEGY_DC, strategy_dc(c, s, 0, &cand), &cand, &ch);
    }
    /* optimal also runs dc internally; it wins only when strictly faster */
    auto_offer(c, budget, SC_STRATEGY_OPTIMAL, strategy_optimal(c, budget, &cand), &cand, &ch);
    if (ch.time == INFINITY)
        return sc_errorf("no plan fits in %lld bytes: the smallest feasible budget is %lld bytes, %s",
                         (long long)budget, (long long)min_budget, why);
    sc_status st = SC_OK;
    for (int i = 0; i < ch.best.n && !st; i++) st = chain_schedule_push(out, ch.best.a[i].kind, ch.best.a[i].seg);
    chain_schedule_free(&ch.best);
    if (!st && chosen) *chosen = ch.strategy;
    return st;
}
