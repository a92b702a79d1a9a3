/* The automatic choice among the strategies.
 *
 * strategy_auto_pick: the fastest (chain_schedule_estimate's time) of none, sqrt, dc (bisection and
 *   several slot counts) and optimal whose estimated peak fits the budget; ties go to the simpler
 *   strategy. When nothing fits, the status gives strategy_min_budget's smallest feasible budget
 *   and what dominates it.
 */
#include <math.h>
#include <string.h>

#include "schedule/strategies.h"

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
