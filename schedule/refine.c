/* Refining a lowered plan: values kept instead of recomputed where the budget leaves room
 * (docs/DESIGN.md, schedule/; contract in sched_internal.h, plan_refine).
 *
 * The chain strategies decide per segment: a segment re-run for its backward recomputes every
 * forward node in it, cheap or expensive, and its activations are kept or dropped together. The
 * exact optimum (Checkmate's MILP, bench/milp_oracle.py) decides per value: it keeps outputs that
 * cost much time per byte to recompute (convolutions, matrix products) and recomputes cheap ones
 * (normalisations, activations), and it spends the memory a plan leaves unused away from its peak.
 * This pass does that on a lowered plan, with the plan's exact liveness:
 *
 *   1. Candidates: every recomputation, a forward node's second or later run r. Without r, the reads
 *      its outputs served use the node's previous instance instead, which must then stay resident
 *      from its old end to r: that gap costs the outputs' bytes there. The inputs r read may die
 *      sooner, and runs that fed only r become dead and are pruned by the lowering: savings the
 *      choice does not count, and the next round sees.
 *   2. Greedy by seconds saved per byte kept: r is dropped when the live bytes over its gap plus its
 *      outputs stay under the plan's live-byte peak plus the budget's headroom (budget - arena). A
 *      segment tree holds the live bytes per run (range add, range max), so a round is O(R log R).
 *   3. The remaining runs are lowered again (plan_lower_runs) and placed (plan_alloc). Placement
 *      can fragment differently from the live-byte sum, so an arena over the budget retries with the
 *      first half of the drops, then a quarter, and so on. The result replaces the plan when it fits
 *      and is faster.
 *   Rounds repeat while they gain. Runs making a graph output (BatchNorm's running statistics) are
 *   left alone: the last instance of a graph output lives to the end of the step.
 *
 * Every instance still holds the bits its node computes from the same inputs, so a refined plan
 * trains to the same weights as the plan it came from (tests/test_plan_refine.c).
 */
#include <stdlib.h>
#include <string.h>

#include "schedule/sched_internal.h"

enum { REFINE_ROUNDS = 6, REFINE_MAX_RUNS = 1 << 20, REFINE_BACKOFFS = 6 };

/* ---- live bytes per run: range add, range max ---- */

typedef struct {
    int n;
    int64_t *mx, *lz; /* [4n]: a node's max over its range, and the add pending for its children */
} range_tree;

static void tree_build(range_tree *t, int node, int lo, int hi, const int64_t *v) {
    t->lz[node] = 0;
    if (lo == hi) {
        t->mx[node] = v[lo];
        return;
    }
    int mid = lo + (hi - lo) / 2;
    tree_build(t, 2 * node, lo, mid, v);
    tree_build(t, 2 * node + 1, mid + 1, hi, v);
    t->mx[node] = t->mx[2 * node] > t->mx[2 * node + 1] ? t->mx[2 * node] : t->mx[2 * node + 1];
}

static void tree_add(range_tree *t, int node, int lo, int hi, int a, int b, int64_t d) {
    if (b < lo || hi < a) return;
    if (a <= lo && hi <= b) {
        t->mx[node] += d;
        t->lz[node] += d;
        return;
    }
    int mid = lo + (hi - lo) / 2;
    tree_add(t, 2 * node, lo, mid, a, b, d);
    tree_add(t, 2 * node + 1, mid + 1, hi, a, b, d);
    int64_t m = t->mx[2 * node] > t->mx[2 * node + 1] ? t->mx[2 * node] : t->mx[2 * node + 1];
    t->mx[node] = m + t->lz[node];
}

static int64_t tree_max(const range_tree *t, int node, int lo, int hi, int a, int b) {
    if (b < lo || hi < a) return INT64_MIN;
    if (a <= lo && hi <= b) return t->mx[node];
    int mid = lo + (hi - lo) / 2;
    int64_t l = tree_max(t, 2 * node, lo, mid, a, b), r = tree_max(t, 2 * node + 1, mid + 1, hi, a, b);
    int64_t m = l > r ? l : r;
    return m == INT64_MIN ? m : m + t->lz[node];
}

/* ---- one round ---- */

typedef struct {
    int run;        /* the recomputation's run index */
    int lo, hi;     /* runs over which the previous instance must now stay resident (lo > hi: none) */
    int64_t bytes;  /* what it keeps there */
    double density; /* seconds saved per byte kept */
} keep_candidate;

static int by_density(const void *a, const void *b) {
    const keep_candidate *x = a, *y = b;
    if (x->density != y->density) return x->density > y->density ? -1 : 1;
    return x->run - y->run;
}

typedef struct {
    const sc_graph *g;
    const sc_cost_model *m;
    int F;
    const sc_plan *p;
    int R;
    int *runs;         /* [R] node of each run */
    int *step_run;     /* [n_steps] the run a step is or follows */
    int64_t *live;     /* [R] live computed bytes during run r */
    int64_t peak;
    keep_candidate *cand;
    int n_cand;
} round_ctx;

static void round_free(round_ctx *x) {
    free(x->runs);
    free(x->step_run);
    free(x->live);
    free(x->cand);
}

/* Runs, the run of every step, and the live bytes per run (an interval is live from the run that
 * opens it through the run its FREE follows). */
static sc_status round_runs(round_ctx *x) {
    const sc_plan *p = x->p;
    x->R = 0;
    for (int s = 0; s < p->n_steps; s++) x->R += p->steps[s].kind == SC_STEP_RUN;
    x->runs = malloc(sizeof(int) * ((size_t)x->R + 1));
    x->step_run = malloc(sizeof(int) * ((size_t)p->n_steps + 1));
    x->live = calloc((size_t)x->R + 2, sizeof(int64_t));
    if (!x->runs || !x->step_run || !x->live) return sc_errorf("out of memory refining a plan of %d steps", p->n_steps);
    for (int s = 0, r = -1; s < p->n_steps; s++) {
        if (p->steps[s].kind == SC_STEP_RUN) x->runs[++r] = p->steps[s].node;
        x->step_run[s] = r < 0 ? 0 : r;
    }
    for (int i = p->n_fixed_intervals; i < p->n_intervals; i++) {
        const sc_interval *iv = &p->intervals[i];
        x->live[x->step_run[iv->begin]] += iv->bytes;
        x->live[x->step_run[iv->end] + 1] -= iv->bytes;
    }
    x->peak = 0;
    for (int r = 0; r < x->R; r++) {
        if (r > 0) x->live[r] += x->live[r - 1];
        if (x->live[r] > x->peak) x->peak = x->live[r];
    }
    return SC_OK;
}

/* The recomputations and what dropping each would keep resident. */
static sc_status round_candidates(round_ctx *x) {
    const sc_plan *p = x->p;
    const sc_graph *g = x->g;
    int *last_iv = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    x->cand = malloc(sizeof(keep_candidate) * ((size_t)x->R + 1));
    if (!last_iv || !x->cand) {
        free(last_iv);
        return sc_errorf("out of memory refining a plan of %d runs", x->R);
    }
    for (int v = 0; v < g->n_values; v++) last_iv[v] = -1;
    x->n_cand = 0;
    for (int s = 0; s < p->n_steps; s++) {
        const sc_step *st = &p->steps[s];
        if (st->kind != SC_STEP_RUN || st->interval < 0) continue;
        const sc_node *n = &g->nodes[st->node];
        int r = x->step_run[s], opened = 0;
        keep_candidate c = {r, r, r - 1, 0, 0};
        bool ok = st->node < x->F;
        for (int o = 0; o < n->n_out; o++) {
            if (n->out[o] < 0 || sched_alias_input(n, o) >= 0) continue;
            const sc_interval *iv = &p->intervals[st->interval + opened++];
            int prev = last_iv[iv->value];
            last_iv[iv->value] = st->interval + opened - 1;
            if (prev < 0 || g->values[iv->value].is_output) {
                ok = false;
                continue;
            }
            if (x->step_run[iv->end] <= r) continue; /* nothing reads this instance */
            int from = x->step_run[p->intervals[prev].end] + 1;
            if (from < c.lo) c.lo = from;
            c.bytes += iv->bytes;
        }
        if (!ok || c.bytes == 0) continue;
        double t = cost_node_time(x->m, g, st->node);
        c.density = t / (double)c.bytes;
        x->cand[x->n_cand++] = c;
    }
    free(last_iv);
    qsort(x->cand, (size_t)x->n_cand, sizeof *x->cand, by_density);
    return SC_OK;
}

/* Greedy choice under cap live bytes; the chosen candidates are moved to the front of x->cand, in
 * the order chosen. Returns how many. */
static int round_choose(round_ctx *x, int64_t cap) {
    range_tree t = {x->R, malloc(sizeof(int64_t) * 4 * ((size_t)x->R + 1)), malloc(sizeof(int64_t) * 4 * ((size_t)x->R + 1))};
    if (!t.mx || !t.lz) {
        free(t.mx);
        free(t.lz);
        return 0;
    }
    tree_build(&t, 1, 0, x->R - 1, x->live);
    int chosen = 0;
    for (int i = 0; i < x->n_cand; i++) {
        keep_candidate c = x->cand[i];
        if (c.lo <= c.hi) {
            if (tree_max(&t, 1, 0, x->R - 1, c.lo, c.hi) + c.bytes > cap) continue;
            tree_add(&t, 1, 0, x->R - 1, c.lo, c.hi, c.bytes);
        }
        x->cand[i] = x->cand[chosen];
        x->cand[chosen++] = c;
    }
    free(t.mx);
    free(t.lz);
    return chosen;
}

/* The plan without the first n chosen recomputations, lowered and placed. */
static sc_status round_lower(const round_ctx *x, int n, sc_plan *out) {
    bool *drop = calloc((size_t)x->R + 1, 1);
    int *runs = malloc(sizeof(int) * ((size_t)x->R + 1));
    sc_status st = drop && runs ? SC_OK : sc_errorf("out of memory refining a plan of %d runs", x->R);
    int kept = 0;
    for (int i = 0; !st && i < n; i++) drop[x->cand[i].run] = true;
    for (int r = 0; !st && r < x->R; r++)
        if (!drop[r]) runs[kept++] = x->runs[r];
    if (!st) st = plan_lower_runs(x->g, x->F, runs, kept, x->m, out);
    if (!st) st = plan_alloc(x->g, out);
    free(drop);
    free(runs);
    return st;
}

/* One round on *plan: replaced by a faster refined plan that fits budget (*gained), else unchanged. */
static sc_status refine_round(const sc_graph *g, int F, const sc_cost_model *m, int64_t budget, sc_plan *plan,
                              bool *gained) {
    *gained = false;
    round_ctx x = {.g = g, .m = m, .F = F, .p = plan};
    sc_status st = round_runs(&x);
    if (!st && x.R > 0) st = round_candidates(&x);
    int chosen = !st && x.R > 0 ? round_choose(&x, x.peak + (budget - plan->arena_bytes)) : 0;
    for (int n = chosen, tries = 0; !st && n > 0 && tries < REFINE_BACKOFFS; n /= 2, tries++) {
        sc_plan cand;
        st = round_lower(&x, n, &cand);
        if (st) {
            plan_free(&cand);
            break;
        }
        double eps = 1e-9 * plan->predicted_time;
        if (cand.arena_bytes <= budget && cand.predicted_time < plan->predicted_time - eps) {
            cand.strategy = plan->strategy;
            cand.n_segments = plan->n_segments;
            cand.refined_keeps = plan->refined_keeps + n;
            plan_free(plan);
            *plan = cand;
            *gained = true;
            break;
        }
        plan_free(&cand);
    }
    round_free(&x);
    return st;
}

sc_status plan_refine(const sc_graph *g, int n_forward, const sc_cost_model *m, int64_t budget, sc_plan *plan) {
    if (budget <= 0 || plan->offload != SC_OFFLOAD_NONE || plan->n_steps > 2 * REFINE_MAX_RUNS) return SC_OK;
    bool gained = true;
    for (int round = 0; gained && round < REFINE_ROUNDS; round++) SC_TRY(refine_round(g, n_forward, m, budget, plan, &gained));
    return SC_OK;
}
