/* plan_search: candidate schedules judged by their lowered, placed plans (contract in search.h). */
#include "schedule/search.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/strategies.h"

enum { CALIBRATION_ROUNDS = 6 };

typedef struct {
    const sc_graph *g;
    const sc_training_graph *tg;
    const sc_chain *c;
    const sc_cost_model *m;
    int64_t budget; /* 0 = unlimited */
    sc_plan best;
    bool have;
    int64_t smallest, smallest_fixed; /* smallest exact arena among budget-independent candidates */
    sc_strategy smallest_by;
    int64_t evict_floor; /* plan_evict's floor (-1: none, or not asked) */
} search;

/* Keeps the placed plan p (made by strategy `by`; taken over) when it fits and beats the best.
 * frugal: a budget-independent candidate, counted in the smallest arena. A plan that fits is refined
 * (plan_refine) before it is compared: a slower schedule can refine into a faster plan, so every
 * candidate is lowered. */
static sc_status offer_placed(search *x, sc_plan *p, sc_strategy by, bool frugal) {
    p->strategy = by;
    if (frugal && p->arena_bytes < x->smallest)
        x->smallest = p->arena_bytes, x->smallest_fixed = p->fixed_bytes, x->smallest_by = by;
    bool fits = x->budget <= 0 || p->arena_bytes <= x->budget;
    sc_status st = SC_OK;
    if (fits && x->budget > 0 && by != SC_STRATEGY_NONE) st = plan_refine(x->g, x->tg->n_forward_nodes, x->m, x->budget, p);
    plan_keep_best(&x->best, &x->have, p, !st && fits);
    return st;
}

/* Lowers and places s (made by strategy `by`) and offers it (offer_placed). *arena gets the exact
 * arena (-1 if lowering failed), before refinement. */
static sc_status offer(search *x, const sc_chain_schedule *s, sc_strategy by, bool frugal, int64_t *arena) {
    if (arena) *arena = -1;
    sc_plan p;
    memset(&p, 0, sizeof p);
    sc_status st = plan_lower(x->g, x->tg, x->c, s, x->m, &p);
    if (!st) st = plan_alloc(x->g, &p);
    if (st) {
        plan_free(&p);
        return sc_status_prefix(st, "strategy %s: ", plan_strategy_name(by));
    }
    if (arena) *arena = p.arena_bytes; /* the schedule's own, before refinement spends the headroom */
    return offer_placed(x, &p, by, frugal);
}

/* The eviction plan at the budget (schedule/evict.c), offered when one is found; *why gets the
 * reason when none is. */
static sc_status evict_candidate(search *x, sc_status *why) {
    sc_plan p;
    sc_status st = plan_evict(x->g, x->tg->n_forward_nodes, x->m, x->budget, &p, &x->evict_floor);
    if (st) {
        *why = st;
        return SC_OK;
    }
    return offer_placed(x, &p, SC_STRATEGY_EVICT, false);
}

typedef sc_status (*schedule_fn)(const sc_chain *c, int arg, int64_t budget, sc_chain_schedule *out);

static sc_status make_none(const sc_chain *c, int arg, int64_t budget, sc_chain_schedule *out) {
    (void)arg, (void)budget;
    return strategy_none(c, out);
}
static sc_status make_sqrt(const sc_chain *c, int arg, int64_t budget, sc_chain_schedule *out) {
    (void)arg, (void)budget;
    return strategy_sqrt(c, out);
}
static sc_status make_dc(const sc_chain *c, int slots, int64_t budget, sc_chain_schedule *out) {
    (void)budget;
    return strategy_dc(c, slots, 0, out);
}
static sc_status make_optimal(const sc_chain *c, int arg, int64_t budget, sc_chain_schedule *out) {
    (void)arg;
    return strategy_optimal(c, budget, out);
}

/* One candidate: a schedule made by fn, lowered and offered. */
static sc_status candidate(search *x, schedule_fn fn, int arg, int64_t est_budget, sc_strategy by, bool frugal,
                           int64_t *arena, int64_t *est_peak) {
    sc_chain_schedule s = {0};
    sc_status st = fn(x->c, arg, est_budget, &s);
    if (!st) {
        if (est_peak) chain_schedule_estimate(x->c, &s, est_peak, NULL);
        st = offer(x, &s, by, frugal, arena);
    }
    chain_schedule_free(&s);
    return st;
}

/* strategy_optimal at estimate budgets calibrated against the exact arenas: the next estimate
 * budget scales the activation part of the budget by estimate / exact of the last candidate, kept
 * between the largest estimate budget known to fit and the smallest known not to. */
static void optimal_calibrated(search *x, sc_strategy by, bool frugal) {
    int64_t fixed = x->c->fixed_bytes, E = x->budget, lo = 0, hi = INT64_MAX;
    for (int round = 0; round < CALIBRATION_ROUNDS; round++) {
        int64_t arena, est;
        sc_status st = candidate(x, make_optimal, 0, E, by, frugal, &arena, &est);
        if (st || arena < 0) {
            sc_status_free(st); /* below the estimate's own minimum: nothing to learn */
            break;
        }
        if (arena <= x->budget) lo = E;
        else hi = E;
        int64_t real_act = arena - fixed, est_act = est - fixed;
        if (real_act <= 0 || est_act <= 0) break;
        double scale = (double)est_act / (double)real_act;
        int64_t next = fixed + (int64_t)((double)(x->budget - fixed) * scale);
        if (next <= lo) next = lo + (hi == INT64_MAX ? (x->budget - fixed) / 16 : (hi - lo) / 2);
        if (next >= hi) next = lo > 0 ? lo + (hi - lo) / 2 : hi - (hi - fixed) / 16;
        if (next <= fixed || next == E || (hi != INT64_MAX && hi - lo < (x->budget - fixed) / 200 + 64)) break;
        E = next;
    }
}

/* dc's bisection splits a range at its middle by forward time, so its schedules (and whether one
 * fits a tight budget) change with the node times: calibrated times can lose a frugal schedule that
 * the FLOP/byte model's times found. With calibrated times, the dc schedules made on copies of the
 * chain whose forward times are the uncalibrated cost model's, and all equal (middle by segment
 * count), are offered too, judged with the calibrated times. */
static sc_status frugal_retimed(search *x, sc_strategy by) {
    if (!x->m->node_time) return SC_OK; /* the chain's times are the cost model's already */
    const sc_chain *c = x->c;
    sc_chain u = *c;
    u.fwd_time = malloc(sizeof(double) * (size_t)c->k);
    u.bwd_time = malloc(sizeof(double) * (size_t)c->k);
    sc_status st = u.fwd_time && u.bwd_time ? SC_OK : sc_errorf("out of memory copying a chain of %d segments", c->k);
    sc_cost_model model;
    cost_model_default(&model, x->m->link_bandwidth, NULL);
    for (int variant = 0; !st && variant < 2; variant++) {
        for (int i = 0; i < c->k; i++) {
            u.fwd_time[i] = variant ? 0 : 1;
            u.bwd_time[i] = c->bwd_time[i];
            for (int n = c->pos[i]; variant && n < c->pos[i + 1]; n++) u.fwd_time[i] += cost_node_time(&model, x->g, n);
        }
        static const int slot_choices[] = {0, 2, 4};
        for (size_t i = 0; !st && i < sizeof slot_choices / sizeof *slot_choices; i++) {
            int slots = slot_choices[i];
            if (slots > c->k) break;
            if (slots > 0 && strategy_binomial_forwards(c->k, slots) > 64 * (int64_t)c->k) continue;
            sc_chain_schedule s = {0};
            st = strategy_dc(&u, slots, 0, &s);
            if (!st) st = offer(x, &s, by == SC_STRATEGY_AUTO ? SC_STRATEGY_DC : by, true, NULL);
            chain_schedule_free(&s);
        }
    }
    free(u.fwd_time);
    free(u.bwd_time);
    return st;
}

/* The program calibrated (as optimal_calibrated) at a budget one byte under the smallest exact arena
 * found so far, repeated while that finds a smaller one (a few rounds). Exact arenas are not
 * monotone in the estimate budget (the lowering drops dead recomputations and lets outputs take
 * over dying inputs' blocks, which the estimate does not see), so a tighter estimate can come out
 * smaller; without this a budget under the smallest feasible budget a failed search names could
 * still plan. A plan found on the way that fits the real budget is offered. */
static void frugal_descend(search *x, sc_strategy by) {
    for (int round = 0; round < 4 && x->smallest != INT64_MAX && x->smallest > x->c->fixed_bytes + 64; round++) {
        search y = *x;
        y.have = false;
        memset(&y.best, 0, sizeof y.best);
        y.budget = x->smallest - 1;
        optimal_calibrated(&y, by, true);
        if (y.have) {
            if (x->budget <= 0 || y.best.arena_bytes <= x->budget) {
                if (!x->have || plan_better(&y.best, &x->best)) {
                    if (x->have) plan_free(&x->best);
                    x->best = y.best;
                    x->have = true;
                    y.have = false;
                }
            }
            if (y.have) plan_free(&y.best);
        }
        if (y.smallest >= x->smallest) break;
        x->smallest = y.smallest, x->smallest_fixed = y.smallest_fixed, x->smallest_by = y.smallest_by;
    }
}

/* Budget-independent schedules that use little memory: dc bisection and binomial placements, sqrt,
 * none, and the program at the estimate's smallest budget. Labelled `by` unless by is AUTO. */
static sc_status frugal_set(search *x, sc_strategy by) {
    const sc_chain *c = x->c;
    bool a = by == SC_STRATEGY_AUTO;
    SC_TRY(candidate(x, make_none, 0, 0, a ? SC_STRATEGY_NONE : by, true, NULL, NULL));
    SC_TRY(candidate(x, make_sqrt, 0, 0, a ? SC_STRATEGY_SQRT : by, true, NULL, NULL));
    static const int slot_choices[] = {0, 1, 2, 3, 4, 8, 16, 32};
    for (size_t i = 0; i < sizeof slot_choices / sizeof *slot_choices; i++) {
        int s = slot_choices[i];
        if (s > c->k) break;
        if (s > 0 && strategy_binomial_forwards(c->k, s) > 64 * (int64_t)c->k) continue; /* too many re-runs */
        SC_TRY(candidate(x, make_dc, s, 0, a ? SC_STRATEGY_DC : by, true, NULL, NULL));
    }
    SC_TRY(frugal_retimed(x, by));
    int64_t min_est = strategy_min_budget(c, NULL, 0);
    sc_status st = candidate(x, make_optimal, 0, min_est, a ? SC_STRATEGY_OPTIMAL : by, true, NULL, NULL);
    sc_status_free(st); /* the program may find nothing at its rounding; dc with one slot covers it */
    frugal_descend(x, a ? SC_STRATEGY_OPTIMAL : by);
    return SC_OK;
}

static sc_status infeasible(const search *x, sc_strategy requested, sc_status evict_why) {
    bool evict = requested == SC_STRATEGY_EVICT || requested == SC_STRATEGY_AUTO;
    int64_t ev = evict ? x->evict_floor : -1;
    if (ev > x->budget && ev < x->smallest) {
        sc_status_free(evict_why);
        if (requested == SC_STRATEGY_EVICT)
            return sc_errorf("strategy evict: no plan fits in %lld bytes: the smallest feasible budget is %lld bytes "
                             "(the eviction floor)", (long long)x->budget, (long long)ev);
        return sc_errorf("strategy %s: no plan fits in %lld bytes: the smallest feasible budget is %lld bytes (an "
                         "evict plan at the eviction floor; the most frugal %s plan needs %lld)",
                         plan_strategy_name(requested), (long long)x->budget, (long long)ev,
                         plan_strategy_name(x->smallest_by), (long long)x->smallest);
    }
    if (requested == SC_STRATEGY_EVICT)
        return evict_why ? sc_status_prefix(evict_why, "strategy evict: no plan fits in %lld bytes: ", (long long)x->budget)
                         : sc_errorf("strategy evict: no plan fits in %lld bytes", (long long)x->budget);
    sc_status_free(evict_why);
    char why[256];
    strategy_min_budget(x->c, why, sizeof why);
    int big;
    int64_t nb = sched_largest_node(x->g, &big);
    return sc_errorf("strategy %s: no plan fits in %lld bytes: the smallest feasible budget is %lld bytes (the "
                     "exact peak of the most frugal %s plan; fixed region %lld bytes of parameters, optimizer "
                     "state and inputs; largest single node '%s' needs %lld bytes of activations; chain "
                     "estimate: %s)",
                     plan_strategy_name(requested), (long long)x->budget, (long long)x->smallest,
                     plan_strategy_name(x->smallest_by), (long long)x->smallest_fixed,
                     big >= 0 ? x->g->nodes[big].name : "-", (long long)nb, why);
}

sc_status plan_search(const sc_graph *g, const sc_training_graph *tg, const sc_chain *c, const sc_plan_options *opt,
                      const sc_cost_model *m, sc_plan *plan) {
    memset(plan, 0, sizeof *plan);
    search x = {.g = g, .tg = tg, .c = c, .m = m, .budget = opt->budget, .smallest = INT64_MAX, .evict_floor = -1};
    sc_strategy s = opt->strategy;
    sc_status st = SC_OK, evict_why = SC_OK;
    switch (s) {
    case SC_STRATEGY_NONE: st = candidate(&x, make_none, 0, 0, s, true, NULL, NULL); break;
    case SC_STRATEGY_SQRT: st = candidate(&x, make_sqrt, 0, 0, s, true, NULL, NULL); break;
    case SC_STRATEGY_DC: st = candidate(&x, make_dc, opt->slots, 0, s, true, NULL, NULL); break;
    case SC_STRATEGY_OPTIMAL:
    case SC_STRATEGY_AUTO:
        if (opt->budget <= 0) { /* no limit: storing everything is the fastest */
            st = candidate(&x, make_none, 0, 0, s == SC_STRATEGY_AUTO ? SC_STRATEGY_NONE : s, true, NULL, NULL);
            break;
        }
        optimal_calibrated(&x, SC_STRATEGY_OPTIMAL, false);
        st = frugal_set(&x, s);
        if (!st && s == SC_STRATEGY_AUTO) st = evict_candidate(&x, &evict_why);
        break;
    case SC_STRATEGY_EVICT:
        if (opt->budget <= 0) { /* nothing to evict: the graph's order, everything stored */
            st = candidate(&x, make_none, 0, 0, s, true, NULL, NULL);
            break;
        }
        st = evict_candidate(&x, &evict_why);
        break;
    }
    if (st) {
        sc_status_free(evict_why);
        if (x.have) plan_free(&x.best);
        return st;
    }
    if (!x.have) return infeasible(&x, s, evict_why);
    sc_status_free(evict_why);
    *plan = x.best;
    return SC_OK;
}
