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
 *      from its old end to r: that gap costs the outputs' bytes there. The recomputations that fed
 *      only r (transitively) then have no reader: they go too, and the bytes of what they made are
 *      freed. (The inputs r read may also die sooner: a saving the choice does not count and the
 *      next round sees.)
 *   2. Greedy, best first by seconds saved (r's and its dead feeders') per byte kept, or per byte
 *      kept per run it stays (short gaps first): r is dropped when the live bytes over its gap, less
 *      what its dead feeders freed, plus its outputs stay under the plan's live-byte peak plus the
 *      budget's headroom (budget - arena). A segment tree holds the live bytes per run (range add,
 *      range max), so a round is O(R log R) plus the feeder walks.
 *   3. The remaining runs are lowered again (plan_lower_runs) and placed (plan_alloc). Placement
 *      can fragment differently from the live-byte sum, so an arena over the budget retries with the
 *      first half of the drops, then a quarter, and so on.
 *   Rounds repeat while they gain, each order on its own (a greedy path depends on its first
 *   choices), and the faster end result replaces the plan. Runs making a graph output (BatchNorm's
 *   running statistics) are left alone: the last instance of a graph output lives to the end of the
 *   step.
 *
 * Every instance still holds the bits its node computes from the same inputs, so a refined plan
 * trains to the same weights as the plan it came from (tests/test_plan_exec.c, tests/plan_invariant.py).
 */
#include <stdlib.h>
#include <string.h>

#include "schedule/sched_internal.h"

/* REFINE_FEEDERS bounds one dead-feeder walk (a long recomputed chain would make the candidates'
 * walks quadratic); a longer one counts only what it reached. */
enum { REFINE_ROUNDS = 6, REFINE_MAX_RUNS = 1 << 20, REFINE_BACKOFFS = 6, REFINE_FEEDERS = 256 };

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
    int prev_run;   /* the run that made the instances it would keep */
    int lo, hi;     /* runs over which those instances must now stay resident (lo > hi: none) */
    int64_t bytes;  /* what they keep there */
    double gain;    /* seconds saved: its own and its dead feeders' */
    double density; /* gain per byte kept, or per byte-run (the order tried) */
} keep_candidate;

static int by_density(const void *a, const void *b) {
    const keep_candidate *x = a, *y = b;
    if (x->density != y->density) return x->density > y->density ? -1 : 1;
    return x->run - y->run;
}

enum { KEPT = 1, DEAD = 2 }; /* why a run is dropped */

typedef struct {
    const sc_graph *g;
    const sc_cost_model *m;
    int F;
    const sc_plan *p;
    int R;
    int *runs;             /* [R] node of each run */
    int *run_iv, *run_niv; /* [R] first interval the run opens, and how many */
    int *step_run;         /* [n_steps] the run a step is or follows */
    int *iv_run, *iv_end;  /* [n_intervals] computed intervals: the run opening it, the run its FREE follows */
    int *rd_start, *rd;    /* readers of interval i: rd[rd_start[i] .. rd_start[i+1]) (runs) */
    int *in_start, *in;    /* intervals run r reads: in[in_start[r] .. in_start[r+1]) */
    bool *recompute;       /* [R] a forward node's second or later run making no graph output */
    double *time;          /* [R] its node's seconds (recomputations; 0 for the other runs) */
    int64_t *live;         /* [R] live computed bytes during run r */
    int64_t peak;
    unsigned char *dropped; /* [R] 0, KEPT or DEAD */
    bool *pinned;           /* [R] its instances serve a dropped run's reads now: never DEAD */
    bool *in_dead;          /* [R] in the dead set being built */
    int *dead, n_dead, *stack;
    keep_candidate *cand;
    int n_cand;
} round_ctx;

static void round_free(round_ctx *x) {
    void *all[] = {x->runs, x->run_iv, x->run_niv, x->step_run, x->iv_run, x->iv_end, x->rd_start, x->rd,
                   x->in_start, x->in, x->recompute, x->time, x->live, x->dropped, x->pinned, x->in_dead,
                   x->dead, x->stack, x->cand};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]);
}

static int opened_count(const sc_node *n) {
    int c = 0;
    for (int o = 0; o < n->n_out; o++) c += n->out[o] >= 0 && sched_alias_input(n, o) < 0;
    return c;
}

/* Runs, the run of every step, interval extents and the live bytes per run (an interval is live
 * from the run that opens it through the run its FREE follows). */
static sc_status round_runs(round_ctx *x) {
    const sc_plan *p = x->p;
    size_t R1 = 0, NI = (size_t)p->n_intervals + 1;
    for (int s = 0; s < p->n_steps; s++) R1 += p->steps[s].kind == SC_STEP_RUN;
    x->R = (int)R1++;
    x->runs = malloc(sizeof(int) * R1);
    x->run_iv = malloc(sizeof(int) * R1);
    x->run_niv = malloc(sizeof(int) * R1);
    x->step_run = malloc(sizeof(int) * ((size_t)p->n_steps + 1));
    x->iv_run = malloc(sizeof(int) * NI);
    x->iv_end = malloc(sizeof(int) * NI);
    x->time = malloc(sizeof(double) * R1);
    x->live = calloc(R1 + 1, sizeof(int64_t));
    x->recompute = calloc(R1, 1);
    x->dropped = calloc(R1, 1);
    x->pinned = calloc(R1, 1);
    x->in_dead = calloc(R1, 1);
    x->dead = malloc(sizeof(int) * R1);
    if (!x->runs || !x->run_iv || !x->run_niv || !x->step_run || !x->iv_run || !x->iv_end || !x->time || !x->live ||
        !x->recompute || !x->dropped || !x->pinned || !x->in_dead || !x->dead)
        return sc_errorf("out of memory refining a plan of %d steps", p->n_steps);
    bool *seen = calloc((size_t)x->g->n_nodes + 1, 1);
    if (!seen) return sc_errorf("out of memory refining a plan of %d steps", p->n_steps);
    for (int s = 0, r = -1; s < p->n_steps; s++) {
        const sc_step *st = &p->steps[s];
        if (st->kind == SC_STEP_RUN) {
            const sc_node *n = &x->g->nodes[st->node];
            x->runs[++r] = st->node;
            x->run_iv[r] = st->interval;
            x->run_niv[r] = st->interval < 0 ? 0 : opened_count(n);
            bool out = false;
            for (int o = 0; o < n->n_out; o++) out |= n->out[o] >= 0 && x->g->values[n->out[o]].is_output;
            x->recompute[r] = st->node < x->F && seen[st->node] && !out && x->run_niv[r] > 0;
            x->time[r] = x->recompute[r] ? cost_node_time(x->m, x->g, st->node) : 0; /* read for recomputations only */
            seen[st->node] = true;
        }
        x->step_run[s] = r < 0 ? 0 : r;
    }
    free(seen);
    for (int i = p->n_fixed_intervals; i < p->n_intervals; i++) {
        const sc_interval *iv = &p->intervals[i];
        x->iv_run[i] = x->step_run[iv->begin];
        x->iv_end[i] = x->step_run[iv->end];
        x->live[x->iv_run[i]] += iv->bytes;
        x->live[x->iv_end[i] + 1] -= iv->bytes;
    }
    x->peak = 0;
    for (int r = 0; r < x->R; r++) {
        if (r > 0) x->live[r] += x->live[r - 1];
        if (x->live[r] > x->peak) x->peak = x->live[r];
    }
    return SC_OK;
}

/* Who reads which instance: two passes over the runs with the current instance of every value
 * (persistent values and in-place aliases have none and are skipped). */
static sc_status round_reads(round_ctx *x) {
    const sc_graph *g = x->g;
    const sc_plan *p = x->p;
    int *cur = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    x->rd_start = calloc((size_t)p->n_intervals + 2, sizeof(int));
    x->in_start = calloc((size_t)x->R + 2, sizeof(int));
    if (!cur || !x->rd_start || !x->in_start) {
        free(cur);
        return sc_errorf("out of memory refining a plan of %d runs", x->R);
    }
    for (int pass = 0; pass < 2; pass++) {
        int *rd_fill = pass ? x->rd_start : NULL, n_in = 0;
        for (int v = 0; v < g->n_values; v++) cur[v] = -1;
        for (int r = 0; r < x->R; r++) {
            const sc_node *n = &g->nodes[x->runs[r]];
            if (pass) x->in_start[r] = n_in;
            for (int j = 0; j < n->n_in; j++) {
                int iv = n->in[j] >= 0 ? cur[n->in[j]] : -1;
                if (iv < 0) continue;
                if (pass) x->rd[rd_fill[iv]++] = r, x->in[n_in] = iv;
                else x->rd_start[iv + 1]++;
                n_in++;
            }
            for (int k = 0; k < x->run_niv[r]; k++) cur[p->intervals[x->run_iv[r] + k].value] = x->run_iv[r] + k;
        }
        if (pass) {
            x->in_start[x->R] = n_in;
            for (int i = p->n_intervals; i > 0; i--) x->rd_start[i] = x->rd_start[i - 1]; /* fill moved them on */
            x->rd_start[0] = 0;
        } else {
            for (int i = 0; i < p->n_intervals; i++) x->rd_start[i + 1] += x->rd_start[i];
            x->rd = malloc(sizeof(int) * ((size_t)n_in + 1));
            x->in = malloc(sizeof(int) * ((size_t)n_in + 1));
            x->stack = malloc(sizeof(int) * ((size_t)n_in + 1));
            if (!x->rd || !x->in || !x->stack) {
                free(cur);
                return sc_errorf("out of memory refining a plan of %d runs", x->R);
            }
        }
    }
    free(cur);
    return SC_OK;
}

/* The recomputations that dropping run r leaves with no reader (its feeders, transitively): every
 * instance they open is read only by r, by them, or by runs already dropped. x->dead[0 .. n_dead),
 * marked in in_dead; returns their seconds. */
static double dead_feeders(round_ctx *x, int r) {
    double t = 0;
    int sp = 0;
    x->n_dead = 0;
    for (int i = x->in_start[r]; i < x->in_start[r + 1]; i++) x->stack[sp++] = x->in[i];
    while (sp > 0) {
        int q = x->iv_run[x->stack[--sp]];
        if (!x->recompute[q] || x->dropped[q] || x->in_dead[q] || x->pinned[q] || x->n_dead >= REFINE_FEEDERS) continue;
        bool unread = true;
        for (int k = 0; unread && k < x->run_niv[q]; k++) {
            int iv = x->run_iv[q] + k;
            for (int j = x->rd_start[iv]; unread && j < x->rd_start[iv + 1]; j++) {
                int u = x->rd[j];
                unread = u == r || x->dropped[u] || x->in_dead[u];
            }
        }
        if (!unread) continue;
        x->in_dead[q] = true;
        x->dead[x->n_dead++] = q;
        t += x->time[q];
        for (int i = x->in_start[q]; i < x->in_start[q + 1] && sp < x->in_start[x->R]; i++) x->stack[sp++] = x->in[i];
    }
    return t;
}

static void dead_clear(round_ctx *x) {
    for (int i = 0; i < x->n_dead; i++) x->in_dead[x->dead[i]] = false;
    x->n_dead = 0;
}

/* The recomputations and what dropping each would keep resident, best first. */
static sc_status round_candidates(round_ctx *x) {
    const sc_plan *p = x->p;
    int *last_run = malloc(sizeof(int) * ((size_t)x->g->n_values + 1));
    x->cand = malloc(sizeof(keep_candidate) * ((size_t)x->R + 1));
    if (!last_run || !x->cand) {
        free(last_run);
        return sc_errorf("out of memory refining a plan of %d runs", x->R);
    }
    for (int v = 0; v < x->g->n_values; v++) last_run[v] = -1;
    x->n_cand = 0;
    for (int r = 0; r < x->R; r++) {
        keep_candidate c = {r, -1, r, r - 1, 0, 0, 0};
        for (int k = 0; k < x->run_niv[r]; k++) {
            int i = x->run_iv[r] + k, v = p->intervals[i].value, prev = last_run[v];
            last_run[v] = r;
            if (prev < 0 || !x->recompute[r] || x->iv_end[i] <= r) continue; /* nothing reads this instance */
            int prev_iv = x->run_iv[prev];
            while (p->intervals[prev_iv].value != v) prev_iv++;
            if (x->iv_end[prev_iv] + 1 < c.lo) c.lo = x->iv_end[prev_iv] + 1;
            c.bytes += p->intervals[i].bytes;
            c.prev_run = prev;
        }
        if (!x->recompute[r] || c.prev_run < 0) continue;
        c.gain = x->time[r] + dead_feeders(x, r);
        dead_clear(x);
        x->cand[x->n_cand++] = c;
    }
    free(last_run);
    return SC_OK;
}

/* The candidates best first: by seconds saved per byte kept (order 0), or per byte kept per run it
 * stays (order 1: short gaps first, which leaves room for more of them). The greedy state is reset. */
static void round_order(round_ctx *x, int order) {
    for (int i = 0; i < x->n_cand; i++) {
        keep_candidate *c = &x->cand[i];
        c->density = c->gain / ((double)c->bytes * (order ? (double)(c->hi - c->lo + 2) : 1.0));
    }
    qsort(x->cand, (size_t)x->n_cand, sizeof *x->cand, by_density);
    memset(x->dropped, 0, (size_t)x->R);
    memset(x->pinned, 0, (size_t)x->R);
}

/* Adds (sign) the bytes of the intervals the runs in x->dead open over their extents. */
static void dead_add(round_ctx *x, range_tree *t, int sign) {
    for (int i = 0; i < x->n_dead; i++) {
        int q = x->dead[i];
        for (int k = 0; k < x->run_niv[q]; k++) {
            int iv = x->run_iv[q] + k;
            tree_add(t, 1, 0, x->R - 1, x->iv_run[iv], x->iv_end[iv], sign * x->p->intervals[iv].bytes);
        }
    }
}

/* Greedy choice under cap live bytes; the chosen candidates are moved to the front of x->cand, in
 * the order chosen. Dropping one also drops its dead feeders, whose instances free their bytes.
 * Returns how many. */
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
        if (x->dropped[c.run] || x->dropped[c.prev_run] == DEAD) continue;
        dead_feeders(x, c.run);
        dead_add(x, &t, -1);
        bool fits = c.lo > c.hi || tree_max(&t, 1, 0, x->R - 1, c.lo, c.hi) + c.bytes <= cap;
        if (!fits) {
            dead_add(x, &t, +1);
            dead_clear(x);
            continue;
        }
        if (c.lo <= c.hi) tree_add(&t, 1, 0, x->R - 1, c.lo, c.hi, c.bytes);
        x->dropped[c.run] = KEPT;
        x->pinned[c.prev_run] = true;
        for (int k = 0; k < x->n_dead; k++) x->dropped[x->dead[k]] = DEAD;
        dead_clear(x);
        x->cand[i] = x->cand[chosen];
        x->cand[chosen++] = c;
    }
    free(t.mx);
    free(t.lz);
    return chosen;
}

static int run_count(const sc_plan *p) {
    int r = 0;
    for (int s = 0; s < p->n_steps; s++) r += p->steps[s].kind == SC_STEP_RUN;
    return r;
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

/* The greedy choice in x's current order, lowered: *best gets the first plan of n, n/2, n/4, ...
 * chosen drops that fits budget and is faster than *from (*have), else nothing. */
static sc_status round_try(round_ctx *x, int64_t budget, const sc_plan *from, sc_plan *best, bool *have) {
    *have = false;
    int chosen = round_choose(x, x->peak + (budget - from->arena_bytes));
    sc_status st = SC_OK;
    for (int n = chosen, tries = 0; !st && n > 0 && tries < REFINE_BACKOFFS; n /= 2, tries++) {
        sc_plan cand;
        st = round_lower(x, n, &cand);
        double eps = 1e-9 * from->predicted_time;
        if (!st && cand.arena_bytes <= budget && cand.predicted_time < from->predicted_time - eps) {
            cand.strategy = from->strategy;
            cand.n_segments = from->n_segments;
            cand.refined_keeps = from->refined_keeps + n;
            cand.refined_drops = from->refined_drops + run_count(from) - run_count(&cand);
            *best = cand;
            *have = true;
            break;
        }
        bool fits = !st && cand.arena_bytes <= budget;
        plan_free(&cand);
        if (fits) break; /* fits but gains too little: fewer drops gain less */
    }
    return st;
}

/* One round from *from in the given order: *out gets a faster refined plan that fits budget
 * (*gained), else nothing. */
static sc_status refine_round(const sc_graph *g, int F, const sc_cost_model *m, int64_t budget, int order,
                              const sc_plan *from, sc_plan *out, bool *gained) {
    *gained = false;
    round_ctx x = {.g = g, .m = m, .F = F, .p = from};
    sc_status st = round_runs(&x);
    if (!st && x.R > 0) st = round_reads(&x);
    if (!st && x.R > 0) st = round_candidates(&x);
    if (!st && x.R > 0) {
        round_order(&x, order);
        st = round_try(&x, budget, from, out, gained);
    }
    round_free(&x);
    return st;
}

/* Rounds in one order from *plan while they gain; *out gets the last plan (*gained), else nothing. */
static sc_status refine_order(const sc_graph *g, int F, const sc_cost_model *m, int64_t budget, int order,
                              const sc_plan *plan, sc_plan *out, bool *gained) {
    *gained = false;
    for (int round = 0; round < REFINE_ROUNDS; round++) {
        sc_plan next;
        bool more;
        SC_TRY(refine_round(g, F, m, budget, order, *gained ? out : plan, &next, &more));
        if (!more) break;
        if (*gained) plan_free(out);
        *out = next;
        *gained = true;
    }
    return SC_OK;
}

sc_status plan_refine(const sc_graph *g, int n_forward, const sc_cost_model *m, int64_t budget, sc_plan *plan) {
    if (budget <= 0 || plan->offload != SC_OFFLOAD_NONE || plan->n_steps > 2 * REFINE_MAX_RUNS) return SC_OK;
    sc_plan best;
    bool have = false;
    for (int order = 0; order < 2; order++) {
        sc_plan p;
        bool gained;
        sc_status st = refine_order(g, n_forward, m, budget, order, plan, &p, &gained);
        if (st) {
            if (have) plan_free(&best);
            return st;
        }
        if (gained && (!have || p.predicted_time < best.predicted_time)) {
            if (have) plan_free(&best);
            best = p, have = true;
        } else if (gained) {
            plan_free(&p);
        }
    }
    if (have) {
        plan_free(plan);
        *plan = best;
    }
    return SC_OK;
}
