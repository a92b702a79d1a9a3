/* plan_build: chain -> strategy -> lowering -> static offsets (docs/DESIGN.md, schedule/).
 *
 * `none` uses a one-segment chain, so its steps run every node in graph order (today's executor).
 * The other strategies use a chain of opt->segments segments. Without streaming, schedule/search.c
 * picks the schedule by exact lowered arenas (optimal and auto lower several candidates); a budget
 * no candidate fits is an error naming the smallest exact arena found, which then plans.
 * Streaming (opt->offload != none): for each requested mode (auto: none, weights, activations, both)
 * and strategy (auto: none, sqrt, dc, optimal), the lowered plan goes through schedule/offload.c
 * with a look-ahead window widened while it fits; the fastest predicted plan (stalls included) that
 * fits wins. Without a fit the error names the smallest arena any candidate reached.
 */
#include "schedule/plan.h"

#include <stdlib.h>
#include <string.h>

#include "schedule/sched_internal.h"
#include "schedule/search.h"
#include "schedule/strategies.h"

static sc_status schedule_make(const sc_chain *c, const sc_plan_options *opt, sc_strategy s, sc_chain_schedule *out,
                               sc_strategy *used) {
    *used = s;
    switch (s) {
    case SC_STRATEGY_NONE: return strategy_none(c, out);
    case SC_STRATEGY_SQRT: return strategy_sqrt(c, out);
    case SC_STRATEGY_DC: return strategy_dc(c, opt->slots, opt->budget, out);
    case SC_STRATEGY_OPTIMAL: return strategy_optimal(c, opt->budget, out);
    case SC_STRATEGY_EVICT: return sc_errorf("strategy evict plans without streaming only (--offload none)");
    case SC_STRATEGY_AUTO: return strategy_auto_pick(c, opt->budget, out, used);
    }
    return sc_errorf("unknown strategy %d", (int)s);
}

static sc_status over_budget_n(const sc_graph *g, int64_t arena, int64_t fixed, int64_t budget, int64_t smallest) {
    int big = -1;
    int64_t nb = sched_largest_node(g, &big);
    return sc_errorf("the plan needs %lld bytes of device memory, over the budget of %lld (smallest plan found: "
                     "%lld bytes; fixed region %lld bytes of parameters, optimizer state and inputs; largest single "
                     "node '%s' needs %lld bytes of activations)",
                     (long long)arena, (long long)budget, (long long)smallest, (long long)fixed,
                     big >= 0 ? g->nodes[big].name : "-", (long long)nb);
}

static sc_status build_plain(const sc_graph *g, const sc_training_graph *tg, const sc_plan_options *opt,
                             const sc_cost_model *mp, sc_plan *plan) {
    memset(plan, 0, sizeof *plan);
    sc_cost_model m = *mp;
    int F = tg->n_forward_nodes;
    int k = opt->strategy == SC_STRATEGY_NONE ? 1 : opt->segments > 0 ? opt->segments : SC_PLAN_DEFAULT_SEGMENTS;
    if (k > F) k = F;
    sc_chain c;
    SC_TRY(chain_build(g, tg, &m, k, &c));
    sc_status st = plan_search(g, tg, &c, opt, &m, plan); /* judged by exact lowered arenas (search.h) */
    chain_free(&c);
    return st;
}

/* ---- streaming (opt->offload; schedule/offload.c) ---- */


typedef struct {
    sc_plan best;
    bool have;
    int64_t smallest, smallest_fixed; /* the smallest arena seen (fitting or not) */
    const sc_graph *g;
    int64_t host_budget;              /* opt->host_budget */
    int64_t host_short;               /* the least host_bytes of a plan that fit the device but not
                                         host_budget; INT64_MAX when none */
} stream_pick;

/* A candidate fits when its arena fits the device budget and its host copies the host budget.
 * Returns whether it fits. */
static bool pick_offer(stream_pick *k, sc_plan *cand, int64_t budget) {
    if (cand->arena_bytes < k->smallest) k->smallest = cand->arena_bytes, k->smallest_fixed = cand->fixed_bytes;
    bool fits = budget <= 0 || cand->arena_bytes <= budget;
    cand->host_bytes = plan_host_copy_bytes(k->g, cand);
    if (fits && k->host_budget > 0 && cand->host_bytes > k->host_budget) {
        if (cand->host_bytes < k->host_short) k->host_short = cand->host_bytes;
        fits = false;
    }
    plan_keep_best(&k->best, &k->have, cand, fits);
    return fits;
}

/* The look-ahead search over one lowered plan: W = 0, 1, 2, 4, ... RUNs, widened while the plan
 * fits the budget and the predicted stalls are not zero yet (a wider window holds prefetched
 * values longer: more memory, fewer stalls). *fit: some window's plan fits. */
static sc_status stream_search(const sc_graph *g, const sc_cost_model *m, const sc_plan *lowered, stream_opts so,
                               int64_t budget, int window_max, stream_pick *k, bool *fit) {
    int R = 0;
    *fit = false;
    for (int i = 0; i < lowered->n_steps; i++) R += lowered->steps[i].kind == SC_STEP_RUN;
    for (int W = 0;; W = W ? 2 * W : 1) {
        if (window_max > 0 && W > window_max) W = window_max;
        sc_plan cand;
        so.window = W;
        sc_status st = plan_offload_ex(g, lowered, &so, &cand);
        if (!st) st = plan_wire_assign(g, &cand);
        if (!st) st = plan_alloc(g, &cand);
        if (!st) st = plan_predict(g, m, &cand);
        if (st) {
            plan_free(&cand);
            return st;
        }
        bool fits = budget <= 0 || cand.arena_bytes <= budget;
        bool no_stall = cand.stall_time <= 0;
        *fit |= pick_offer(k, &cand, budget);
        if (!fits || no_stall || W >= R || (window_max > 0 && W >= window_max)) break;
    }
    return SC_OK;
}

/* The window search under each resident set worth trying (resident.c): the one asked for, or, by
 * default, growing from none while the plans still fit (more resident bytes never fit better).
 * Without a budget only the latency threshold L is tried: streaming was asked for, and below L
 * keeping a group costs less than moving it. */
static sc_status stream_resident(const sc_graph *g, const sc_cost_model *m, const sc_plan *lowered, stream_opts so,
                                 const sc_plan_options *opt, stream_pick *k) {
    int64_t t[16];
    int n = 1;
    bool fit;
    if (!so.weights || opt->resident_max < 0) t[0] = 0;
    else if (opt->resident_max > 0) t[0] = opt->resident_max;
    else n = plan_resident_thresholds(g, m, t, 16);
    if (so.weights && opt->resident_max == 0 && opt->budget <= 0 && n > 1) t[0] = t[1], n = 1;
    for (int i = 0; i < n; i++) {
        so.resident_max = t[i];
        SC_TRY(stream_search(g, m, lowered, so, opt->budget, opt->window_max, k, &fit));
        if (!fit) break;
    }
    return SC_OK;
}

/* Bytes of the values weights streaming moves out of the fixed region, and the largest one. */
static int64_t streamed_bytes(const sc_graph *g, int64_t *largest) {
    int64_t sum = 0;
    *largest = 0;
    for (int v = 0; v < g->n_values; v++)
        if (sched_needs_fixed(g, v) && sched_streamable(g, v)) {
            int64_t b = sched_value_bytes(g, v);
            sum += b;
            if (b > *largest) *largest = b;
        }
    return sum;
}

/* One strategy's schedule under `budget` (0 = unconstrained), lowered and searched over windows. */
static sc_status stream_strategy(const sc_graph *g, const sc_training_graph *tg, sc_chain *c,
                                 const sc_plan_options *opt, const sc_cost_model *m, sc_strategy strategy,
                                 int64_t budget, bool weights, bool activations, stream_pick *k) {
    sc_plan_options o = *opt;
    o.budget = budget;
    sc_chain_schedule s = {0};
    sc_strategy used;
    sc_status st = schedule_make(c, &o, strategy, &s, &used);
    sc_plan lowered;
    memset(&lowered, 0, sizeof lowered);
    if (!st) st = plan_lower(g, tg, c, &s, m, &lowered);
    chain_schedule_free(&s);
    /* where streamed parameters update: the requested place, or both (host first, so that it
       wins a tie in pick_offer) */
    bool try_host = weights && opt->update_on != SC_UPDATE_DEVICE;
    bool try_device = !weights || opt->update_on != SC_UPDATE_HOST;
    if (!st) lowered.strategy = used;
    stream_opts so = {weights, activations, true, 0, 0};
    if (!st && try_host) st = stream_resident(g, m, &lowered, so, opt, k);
    so.host_updates = false;
    if (!st && try_device) st = stream_resident(g, m, &lowered, so, opt, k);
    plan_free(&lowered);
    return st;
}

/* One streaming mode: every requested strategy scheduled on the chain both under the budget and
 * unconstrained, each lowered and searched; the fastest plan that fits wins. Trying the
 * unconstrained schedule every time (not only when the budgeted one fails) keeps the result
 * monotone in the budget: the smallest plan this reports when nothing fits is the unconstrained
 * schedule's narrowest-window plan, so planning again at that size finds the same plan. With
 * weights streamed the chain's fixed_bytes drops by the streamed bytes (two of the largest remain
 * as the estimate of what is prefetched at once), so the strategies budget for activations. */
static sc_status stream_mode(const sc_graph *g, const sc_training_graph *tg, sc_chain *c, const sc_plan_options *opt,
                             const sc_cost_model *m, bool weights, bool activations, stream_pick *k) {
    static const sc_strategy all[] = {SC_STRATEGY_NONE, SC_STRATEGY_SQRT, SC_STRATEGY_DC, SC_STRATEGY_OPTIMAL};
    const sc_strategy *list = opt->strategy == SC_STRATEGY_AUTO ? all : &opt->strategy;
    int n_list = opt->strategy == SC_STRATEGY_AUTO ? 4 : 1;
    int64_t saved = c->fixed_bytes, largest = 0;
    if (weights) {
        int64_t moved = streamed_bytes(g, &largest);
        c->fixed_bytes = saved - moved + 2 * largest > 0 ? saved - moved + 2 * largest : 0;
        if (c->fixed_bytes > saved) c->fixed_bytes = saved;
    }
    sc_status err = SC_OK;
    for (int i = 0; i < n_list; i++) {
        sc_status st = SC_OK;
        if (opt->budget > 0) {
            st = stream_strategy(g, tg, c, opt, m, list[i], opt->budget, weights, activations, k);
            sc_status_free(st); /* the unconstrained schedule below may still fit */
        }
        st = stream_strategy(g, tg, c, opt, m, list[i], 0, weights, activations, k);
        if (st) {
            st = sc_status_prefix(st, "strategy %s: ", plan_strategy_name(list[i]));
            if (err) sc_status_free(st);
            else err = st;
        }
    }
    c->fixed_bytes = saved;
    if (k->have) sc_status_free(err), err = SC_OK;
    return err;
}

static sc_status build_streaming(const sc_graph *g, const sc_training_graph *tg, const sc_plan_options *opt,
                                 const sc_cost_model *m, sc_plan *plan) {
    static const sc_offload all[] = {SC_OFFLOAD_NONE, SC_OFFLOAD_WEIGHTS, SC_OFFLOAD_ACTIVATIONS, SC_OFFLOAD_BOTH};
    const sc_offload *modes = opt->offload == SC_OFFLOAD_AUTO ? all : &opt->offload;
    int n_modes = opt->offload == SC_OFFLOAD_AUTO ? 4 : 1;
    int F = tg->n_forward_nodes;
    int kseg = opt->strategy == SC_STRATEGY_NONE ? 1 : opt->segments > 0 ? opt->segments : SC_PLAN_DEFAULT_SEGMENTS;
    if (kseg > F) kseg = F;
    sc_chain c;
    SC_TRY(chain_build(g, tg, m, kseg, &c));
    stream_pick k;
    memset(&k, 0, sizeof k);
    k.smallest = INT64_MAX;
    k.g = g;
    k.host_budget = opt->host_budget;
    k.host_short = INT64_MAX;
    sc_status err = SC_OK;
    for (int i = 0; i < n_modes; i++) {
        sc_status st = SC_OK;
        if (modes[i] == SC_OFFLOAD_NONE) {
            sc_plan_options plain = *opt;
            plain.offload = SC_OFFLOAD_NONE;
            sc_plan cand;
            st = build_plain(g, tg, &plain, m, &cand);
            if (!st) pick_offer(&k, &cand, opt->budget);
        } else {
            bool w = modes[i] == SC_OFFLOAD_WEIGHTS || modes[i] == SC_OFFLOAD_BOTH;
            bool a = modes[i] == SC_OFFLOAD_ACTIVATIONS || modes[i] == SC_OFFLOAD_BOTH;
            st = stream_mode(g, tg, &c, opt, m, w, a, &k);
        }
        if (st) {
            st = sc_status_prefix(st, "offload %s: ", plan_offload_name(modes[i]));
            if (err) sc_status_free(st);
            else err = st;
        }
    }
    chain_free(&c);
    if (k.have) {
        sc_status_free(err);
        *plan = k.best;
        return SC_OK;
    }
    if (k.host_short != INT64_MAX) {
        sc_status_free(err);
        return sc_errorf("offload %s: host memory: every plan that fits the device budget keeps copies of moved "
                         "values in host memory, the least of them %lld bytes (%.1f MiB), but %lld bytes (%.1f MiB) "
                         "are left for them; a larger device budget needs fewer, or free host memory",
                         plan_offload_name(opt->offload), (long long)k.host_short, (double)k.host_short / 1048576.0,
                         (long long)opt->host_budget, (double)opt->host_budget / 1048576.0);
    }
    if (k.smallest != INT64_MAX) {
        sc_status_free(err);
        return sc_status_prefix(over_budget_n(g, k.smallest, k.smallest_fixed, opt->budget, k.smallest),
                                "offload %s: ", plan_offload_name(opt->offload));
    }
    return err ? err : sc_errorf("offload %s: no plan could be built", plan_offload_name(opt->offload));
}

int64_t plan_param_count(const sc_graph *g) {
    int64_t n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const sc_node *nd = &g->nodes[i];
        if (sched_is_update(nd) && nd->in[0] >= 0) n += sc_desc_numel(&g->values[nd->in[0]].desc);
    }
    return n;
}

static sc_status build_for(const sc_graph *g, const sc_training_graph *tg, const sc_plan_options *opt, sc_plan *plan) {
    memset(plan, 0, sizeof *plan);
    sc_cost_model m;
    cost_model_default(&m, opt->link_bandwidth, opt->node_time);
    sc_status st = opt->offload == SC_OFFLOAD_NONE ? build_plain(g, tg, opt, &m, plan) : build_streaming(g, tg, opt, &m, plan);
    if (!st && plan->update_on == SC_UPDATE_AUTO) plan->update_on = SC_UPDATE_DEVICE; /* no streamed parameter */
    if (!st && opt->offload == SC_OFFLOAD_NONE) plan->host_bytes = 0; /* no transfers; streaming plans got theirs in pick_offer */
    if (!st) plan->budget = opt->budget;
    return st;
}

/* Without a budget on a device of known size: the plan as asked when it fits the room the kernels'
 * workspace leaves, else one planned for that room (so `train model.onnx` on a GPU too small for the
 * model still trains). */
static sc_status build_in_room(const sc_graph *g, const sc_training_graph *tg, const sc_plan_options *opt, sc_plan *plan) {
    SC_TRY(build_for(g, tg, opt, plan));
    int64_t room = opt->capacity - plan_workspace_reserve(opt->capacity);
    if (plan->arena_bytes <= room) return SC_OK;
    sc_plan_options o = *opt;
    o.budget = room;
    if (o.strategy == SC_STRATEGY_NONE) o.strategy = SC_STRATEGY_AUTO;
    if (o.offload == SC_OFFLOAD_NONE) o.offload = SC_OFFLOAD_AUTO;
    sc_log(SC_LOG_WARN, "the %s plan needs %lld bytes; the device has %lld free: planning for %lld bytes (%lld kept for "
           "workspace) with --strategy %s --offload %s", plan_strategy_name(plan->strategy), (long long)plan->arena_bytes,
           (long long)opt->capacity, (long long)room, (long long)(opt->capacity - room), plan_strategy_name(o.strategy),
           plan_offload_name(o.offload));
    plan_free(plan);
    SC_TRY(build_for(g, tg, &o, plan));
    plan->refit = true;
    return SC_OK;
}

sc_status plan_build(const sc_graph *g, const sc_training_graph *tg, const sc_plan_options *opt, sc_plan *plan) {
    if (opt->capacity <= 0) return build_for(g, tg, opt, plan);
    if (opt->budget <= 0) return build_in_room(g, tg, opt, plan);
    sc_plan_options o = *opt;
    if (o.budget > o.capacity) {
        sc_log(SC_LOG_WARN, "--memory %lld bytes is more than the device's %lld free bytes; planning for %lld",
               (long long)o.budget, (long long)o.capacity, (long long)o.capacity);
        o.budget = o.capacity;
    }
    return build_for(g, tg, &o, plan);
}
