/* Per-value eviction plans (docs/DESIGN.md, schedule/; contract in sched_internal.h, plan_evict):
 * the simulation of evict_sim.c turned into plans, and the search over its variants.
 *
 *   1. Variants: both node orders, each with both eviction orders (cost per byte; per byte and
 *      distance to the next read, on graphs of up to EVICT_VARIANT_MAX_NODES). Which wins depends on
 *      the graph (cost per byte on ResNet-50 and at most MILP budgets, bench/results/
 *      2026-11-27-evict.md), so each is refined (plan_refine) and the fastest kept.
 *   2. A variant's runs go to plan_lower_runs, which frees each instance after its last read (never
 *      later than the simulation's model), and plan_alloc; an arena over the budget by fragmentation
 *      is simulated again with the activation budget lowered by the excess, and a simulation that
 *      gets stuck again with 1/16, 2/16 and 3/16 less room.
 *   3. Whether a simulation finds a plan is not monotone in the budget (fragmentation, and updates
 *      that make values impossible to bring back), so the answer is made monotone: a budget under
 *      the floor (plan_evict_floor: bisection to the byte, independent of the budget) fails; at or
 *      above it, when the budget's own simulation fails, the plan with nothing evicted answers if
 *      the budget holds it, else the floor's plan. The floor named in an error is then exact.
 *      Graphs over EVICT_FLOOR_MAX_NODES have no floor: their simulations answer as they come.
 * An eviction plan trains to the same weights as storing everything (tests/test_plan_exec.c,
 * tests/plan_invariant.py, tests/test_random_graphs.c). Graphs over EVICT_MAX_NODES nodes are not
 * simulated (eviction scans the resident values; a 250,000-layer ResNet keeps the chain strategies).
 */
#include <stdlib.h>
#include <string.h>

#include "schedule/evict_sim.h"
#include "schedule/sched_internal.h"

enum { EVICT_MAX_NODES = 1 << 16, EVICT_RETRIES = 4, EVICT_SHRINKS = 4, EVICT_FLOOR_MAX_NODES = 1 << 13,
       EVICT_VARIANT_MAX_NODES = 1 << 14 };

/* The order simulated under activation budget cap, lowered and placed; an arena over the budget by
 * fragmentation is simulated again with cap lowered by the excess. */
static sc_status evict_at(evict_sim *x, const sc_graph *g, int F, const sc_cost_model *m, int64_t cap, int64_t budget,
                          sc_plan *plan) {
    sc_status st = SC_OK;
    for (int attempt = 0; !st && attempt < EVICT_RETRIES; attempt++) {
        const int *runs;
        int n_runs;
        st = evict_sim_run(x, cap, &runs, &n_runs);
        if (!st) st = plan_lower_runs(g, F, runs, n_runs, m, plan);
        if (!st) st = plan_alloc(g, plan);
        if (!st && plan->arena_bytes <= budget) return SC_OK;
        if (!st) cap -= plan->arena_bytes - budget;
        plan_free(plan);
        memset(plan, 0, sizeof *plan);
    }
    return st ? st : sc_errorf("eviction: no placement of the runs fits %lld bytes", (long long)budget);
}

/* One node order's plan (order_build), retried with less room when the simulation gets stuck. */
static sc_status evict_order(const sc_graph *g, int F, const sc_cost_model *m, int64_t budget, int64_t room,
                             int order_kind, bool by_distance, sc_plan *plan) {
    memset(plan, 0, sizeof *plan);
    evict_sim *x;
    sc_status st = evict_sim_create(g, F, m, order_kind, by_distance, &x), first = SC_OK;
    /* with more room, values stay until an update makes them impossible to bring back, where less
     * room would have evicted them before it, and placement fragments differently: whatever fits a
     * little less room fits the budget */
    for (int shrink = 0; !st && shrink < EVICT_SHRINKS; shrink++) {
        sc_status e = evict_at(x, g, F, m, room - room * shrink / 16, budget, plan);
        if (!e) break;
        if (first) sc_status_free(e);
        else first = e;
    }
    evict_sim_destroy(x);
    if (!st && plan->n_steps > 0) {
        sc_status_free(first);
        return SC_OK;
    }
    plan_free(plan);
    memset(plan, 0, sizeof *plan);
    if (st) sc_status_free(first);
    return st ? st : first;
}

/* The plan at budget from both node orders, each with both eviction orders (by distance to the
 * next read only on graphs of up to EVICT_VARIANT_MAX_NODES): the fastest one once refined
 * (plan_refine) wins; with first_fit, the first one found (whether any fits is the same answer). */
static sc_status evict_plan_at(const sc_graph *g, int n_forward, const sc_cost_model *m, int64_t budget,
                               int64_t fixed, bool first_fit, sc_plan *plan) {
    memset(plan, 0, sizeof *plan);
    int64_t room = budget - fixed;
    if (room <= 0)
        return sc_errorf("eviction: the budget %lld is not above the fixed region of %lld bytes", (long long)budget,
                         (long long)fixed);
    sc_status err = SC_OK;
    bool have = false;
    int variants = g->n_nodes <= EVICT_VARIANT_MAX_NODES ? 4 : 2;
    for (int variant = 0; variant < variants; variant++) {
        sc_plan p;
        sc_status st = evict_order(g, n_forward, m, budget, room, variant % 2, variant >= 2, &p);
        if (!st && first_fit) {
            sc_status_free(err);
            *plan = p;
            return SC_OK;
        }
        if (!st && budget < INT64_MAX / 4) { /* judged as the search will use it */
            st = plan_refine(g, n_forward, m, budget, &p);
            if (st) plan_free(&p);
        }
        if (st) {
            if (err) sc_status_free(st);
            else err = st;
            continue;
        }
        if (have && !plan_better(&p, plan)) {
            plan_free(&p);
            continue;
        }
        if (have) plan_free(plan);
        *plan = p;
        have = true;
    }
    if (!have) return err;
    sc_status_free(err);
    return SC_OK;
}

static int64_t fixed_region(const sc_graph *g) {
    int64_t fixed = 0;
    for (int v = 0; v < g->n_values; v++)
        if (sched_needs_fixed(g, v)) fixed += sched_value_bytes(g, v);
    return fixed;
}

/* With room for everything: the order run without evictions. Its arena can be below what the
 * simulation needs at that budget (an output placed over an input dying at its run is counted twice
 * there), so it answers for every budget from its arena up. */
static sc_status evict_none(const sc_graph *g, int n_forward, const sc_cost_model *m, int64_t fixed, sc_plan *plan) {
    return evict_plan_at(g, n_forward, m, INT64_MAX / 4, fixed, false, plan);
}

/* The floor every eviction plan is answered from when the one at its own budget fails: by bisection
 * to the byte between the fixed region (fails) and the arena of evict_none (plans), on whether the
 * simulation at a budget finds a plan. It does not depend on the budget asked, so every budget at or
 * above it plans, and one byte below it fails; -1 for graphs over EVICT_FLOOR_MAX_NODES (about 30
 * simulations). */
int64_t plan_evict_floor(const sc_graph *g, int n_forward, const sc_cost_model *m) {
    if (g->n_nodes > EVICT_FLOOR_MAX_NODES) return -1;
    int64_t fixed = fixed_region(g);
    sc_plan p;
    sc_status st = evict_none(g, n_forward, m, fixed, &p);
    if (st) {
        sc_status_free(st);
        return -1;
    }
    int64_t lo = fixed, hi = p.arena_bytes;
    plan_free(&p);
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        st = evict_plan_at(g, n_forward, m, mid, fixed, true, &p);
        if (st) {
            sc_status_free(st);
            lo = mid;
        } else {
            plan_free(&p);
            hi = mid;
        }
    }
    return hi;
}

sc_status plan_evict(const sc_graph *g, int n_forward, const sc_cost_model *m, int64_t budget, sc_plan *plan,
                     int64_t *floor_out) {
    memset(plan, 0, sizeof *plan);
    if (floor_out) *floor_out = -1;
    if (g->n_nodes > EVICT_MAX_NODES)
        return sc_errorf("eviction: %d nodes, more than the %d it simulates", g->n_nodes, (int)EVICT_MAX_NODES);
    int64_t fixed = fixed_region(g), floor = plan_evict_floor(g, n_forward, m);
    if (floor_out) *floor_out = floor;
    if (floor > 0 && budget < floor)
        return sc_errorf("eviction: no plan fits %lld bytes; the smallest that does is %lld", (long long)budget,
                         (long long)floor);
    sc_status st = evict_plan_at(g, n_forward, m, budget, fixed, false, plan);
    if (st && floor > 0) { /* the plan with nothing evicted, or the floor's, answers for it */
        sc_status_free(st);
        st = evict_none(g, n_forward, m, fixed, plan);
        if (!st && plan->arena_bytes > budget) {
            plan_free(plan);
            st = evict_plan_at(g, n_forward, m, floor, fixed, false, plan);
        }
    }
    if (!st) plan->strategy = SC_STRATEGY_EVICT;
    return st;
}
