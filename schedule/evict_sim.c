/* The eviction simulation behind per-value eviction plans (contract in evict_sim.h; the plans
 * themselves: evict.c).
 *
 * The chain strategies checkpoint segments of the forward pass, and their smallest plan is bounded
 * by the chain view: a value read across many segments (a skip connection of a random DAG, a
 * DenseNet concatenation) is resident in every cut it crosses, and a segment's backward keeps its
 * whole FWD_ALL. The exact optimum (Checkmate's MILP, bench/milp_oracle.py) decides per value and
 * schedules at budgets far below that floor. This decides per value too, as dynamic tensor
 * rematerialisation does (Kirisame et al., DTR, 2021), but offline, where the whole future is known:
 *
 *   1. Nodes run in a fixed order: graph order (forward, then autodiff's backward and updates), or the
 *      forward pass then the backward phases of the finest chain (order_build). Before a node runs,
 *      its computed inputs that are not resident are brought back: every producer their closure
 *      needs (through inputs not resident either) runs once, in forward order, as a re-run segment
 *      does, and a value stays held only while a later run of that set reads it (bring_back), so
 *      the live set is a frontier, not the chain.
 *   2. When a node's outputs would take the live computed bytes over the activation budget cap,
 *      resident forward values are evicted, cheapest first by h(v) = c(v) / b(v), or
 *      h(v) = c(v) / (b(v) * d(v)) with by_distance (Belady's rule weighted by what a miss costs):
 *      c the seconds to bring v back (its producer and every non-resident value that run needs,
 *      transitively), b its bytes, d the distance in the node order to its next read. A node's
 *      inputs are held while it and the recomputations it needs run.
 *   3. A value is freed at once when no later node of the order reads it; graph outputs stay.
 *   4. Updates write parameters in place, so a forward node reading a parameter must not run after
 *      its update. A value is evictable only if bringing it back reads no updated parameter. Before
 *      an update runs, the values a later node reads that could not be brought back once it has
 *      written are brought back (update_ready: a few small values, where waiting would hold every
 *      gradient of the layers in between); when that does not fit, the update waits, its inputs
 *      held, and is retried after each node.
 * Every run computes the bits its node computes from the same inputs, and no forward node reads an
 * updated parameter, so the runs train to the same weights as storing everything.
 */
#include "schedule/evict_sim.h"

#include "core/free_all.h"

#include <stdlib.h>
#include <string.h>

/* EVICT_MAX_RUNS_PER_NODE stops thrashing (a budget so tight that recomputation never ends);
 * EVICT_MAX_DEPTH bounds one closure walk. */
enum { EVICT_MAX_RUNS_PER_NODE = 32, EVICT_MAX_DEPTH = 1024 };

enum { V_RESIDENT = 1, V_OUTPUT = 2, V_FORWARD = 4, V_COMPUTED = 8, V_WRITTEN = 16 };

struct evict_sim {
    const sc_graph *g;
    const sc_cost_model *m;
    int F, N, V;
    double *ntime;         /* [N] seconds of a run of the node */
    int *use_start, *use;  /* base positions of value v's readers: use[use_start[v] .. use_start[v+1]), ascending */
    int *next;             /* [V] cursor into use: the first read at or after t */
    int64_t *bytes;        /* [V] reserved bytes of computed values; 0 for persistent and alias values */
    unsigned char *flag;   /* [V] V_* */
    int *lock;             /* [V] holds: a value locked is neither evicted nor freed */
    int *mark, stamp;      /* [V] closure walks */
    int *res, *res_at, n_res; /* resident forward values (swap-removed), and v's index there (-1) */
    int *order;            /* [N] the node run at each position */
    int *pending, n_pending;  /* updates waiting (their inputs locked) */
    int *runs, R, R_cap, R_max;
    int64_t live, cap;
    int t;                 /* position of the node order being run */
    bool by_distance;      /* eviction order: h = c / (b * d), else c / b */
    int *nmark;            /* [N] bring_back_inputs' walk (x->stamp) */
    int *list, n_list;     /* [N] the recomputations it runs */
    int *pend;             /* [V] reads of a value left among them */
    bool *memo;            /* [V] needs_written's answers (valid where mark == stamp) */
    int *block;            /* [V] values update_ready brings back */
};
typedef struct evict_sim ev_ctx;

static void ev_free(ev_ctx *x) {
    SC_FREE_ALL(x->ntime, x->use_start, x->use, x->next, x->bytes, x->flag, x->lock, x->mark, x->res, x->res_at,
                x->pending, x->runs, x->order, x->nmark, x->list, x->pend, x->memo, x->block);
}

static bool writes_persistent(const sc_node *n) {
    for (int o = 0; o < n->n_out; o++)
        if (n->out[o] >= 0 && sched_alias_input(n, o) >= 0) return true;
    return false;
}

/* The node order: graph order (order_kind 0), or the forward nodes then the backward phases of a
 * chain with every forward node its own segment (sched_phases: a backward node runs as soon as the
 * forward values it reads would be resident, and updates after the last forward reader's phase). */
static sc_status order_build(ev_ctx *x, int order_kind) {
    for (int i = 0; i < x->N; i++) x->order[i] = i;
    if (order_kind == 0 || x->F < 1) return SC_OK;
    int *seg = malloc(sizeof(int) * ((size_t)x->F + 1)), *phase = malloc(sizeof(int) * ((size_t)x->N + 1));
    int *border = NULL, *bstart = NULL;
    sc_status st = seg && phase ? SC_OK : sc_errorf("out of memory ordering nodes");
    for (int i = 0; !st && i < x->F; i++) seg[i] = i;
    if (!st) st = sched_phases(x->g, x->F, seg, x->F, phase);
    if (!st) st = sched_phase_buckets(x->g, x->F, phase, x->F, &border, &bstart);
    for (int p = x->F - 1, t = x->F; !st && p >= 0; p--)
        for (int b = bstart[p]; b < bstart[p + 1]; b++) x->order[t++] = border[b];
    free(seg), free(phase), free(border), free(bstart);
    return st;
}

static sc_status ev_init(ev_ctx *x, const sc_graph *g, int F, const sc_cost_model *m, int order_kind) {
    memset(x, 0, sizeof *x);
    x->g = g, x->F = F, x->N = g->n_nodes, x->V = g->n_values;
    size_t nv = (size_t)x->V + 1, nn = (size_t)x->N + 1;
    x->ntime = malloc(sizeof(double) * nn);
    x->use_start = calloc(nv + 1, sizeof(int));
    x->next = calloc(nv, sizeof(int));
    x->bytes = calloc(nv, sizeof(int64_t));
    x->flag = calloc(nv, 1);
    x->lock = calloc(nv, sizeof(int));
    x->mark = calloc(nv, sizeof(int));
    x->res = malloc(sizeof(int) * nv);
    x->res_at = malloc(sizeof(int) * nv);
    x->pending = malloc(sizeof(int) * nn);
    x->order = malloc(sizeof(int) * nn);
    x->nmark = calloc(nn, sizeof(int));
    x->list = malloc(sizeof(int) * nn);
    x->pend = calloc(nv, sizeof(int));
    x->memo = calloc(nv, sizeof(bool));
    x->block = malloc(sizeof(int) * nv);
    x->R_max = EVICT_MAX_RUNS_PER_NODE * x->N + 1024;
    if (!x->ntime || !x->use_start || !x->next || !x->bytes || !x->flag || !x->lock || !x->mark || !x->res ||
        !x->res_at || !x->pending || !x->order || !x->nmark || !x->list || !x->pend || !x->memo ||
        !x->block)
        return sc_errorf("out of memory planning evictions");
    int64_t n_use = 0;
    for (int i = 0; i < x->N; i++) {
        const sc_node *n = &g->nodes[i];
        x->ntime[i] = cost_node_time(m, g, i);
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0) x->use_start[n->in[j] + 1]++, n_use++;
        for (int o = 0; o < n->n_out; o++) {
            int v = n->out[o];
            if (v < 0 || sched_alias_input(n, o) >= 0) continue;
            x->bytes[v] = sched_value_bytes(g, v);
            if (x->bytes[v] < 0)
                return sc_errorf("value '%s' (output of node '%s') has no static shape; bind dims first",
                                 g->values[v].name, n->name);
            x->flag[v] |= V_COMPUTED | (i < F ? V_FORWARD : 0);
        }
    }
    for (int v = 0; v < x->V; v++) {
        x->use_start[v + 1] += x->use_start[v];
        x->next[v] = x->use_start[v];
        x->res_at[v] = -1;
        if (g->values[v].is_output) x->flag[v] |= V_OUTPUT;
    }
    x->use = malloc(sizeof(int) * ((size_t)n_use + 1));
    if (!x->use) return sc_errorf("out of memory planning evictions");
    SC_TRY(order_build(x, order_kind));
    int *fill = x->next; /* positions come ascending */
    for (int t = 0; t < x->N; t++) {
        const sc_node *n = &g->nodes[x->order[t]];
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0) x->use[fill[n->in[j]]++] = t;
    }
    for (int v = 0; v < x->V; v++) x->next[v] = x->use_start[v];
    return SC_OK;
}

/* Position of v's next read at or after position `after`, or -1. Reads are consumed in order. */
static int next_read(ev_ctx *x, int v, int after) {
    while (x->next[v] < x->use_start[v + 1] && x->use[x->next[v]] < after) x->next[v]++;
    return x->next[v] < x->use_start[v + 1] ? x->use[x->next[v]] : -1;
}

static bool resident(const ev_ctx *x, int v) { return (x->flag[v] & V_RESIDENT) != 0; }

static void set_resident(ev_ctx *x, int v) {
    x->flag[v] |= V_RESIDENT;
    x->live += x->bytes[v];
    if (x->flag[v] & V_FORWARD) x->res_at[v] = x->n_res, x->res[x->n_res++] = v;
}

static void drop(ev_ctx *x, int v) {
    x->flag[v] &= (unsigned char)~V_RESIDENT;
    x->live -= x->bytes[v];
    int at = x->res_at[v];
    if (at >= 0) {
        int last = x->res[--x->n_res];
        x->res[at] = last, x->res_at[last] = at, x->res_at[v] = -1;
    }
}

/* Frees v when nothing from position `after` on reads it and nothing holds it. */
static void free_if_dead(ev_ctx *x, int v, int after) {
    if (v < 0 || !(x->flag[v] & V_COMPUTED) || !resident(x, v) || x->lock[v] || (x->flag[v] & V_OUTPUT)) return;
    if (next_read(x, v, after) < 0) drop(x, v);
}

/* Seconds to bring back the non-resident value v (its producer and, transitively, every
 * non-resident computed input; values the walk (x->stamp) has seen count once); -1 when that is
 * impossible: a backward value, a parameter already updated in place, or more than *budget_nodes
 * producers. */
static double return_cost(ev_ctx *x, int v, int *budget_nodes) {
    if (x->mark[v] == x->stamp) return 0;
    x->mark[v] = x->stamp;
    if (!(x->flag[v] & V_COMPUTED)) return (x->flag[v] & V_WRITTEN) ? -1 : 0;
    if (resident(x, v)) return 0;
    if (!(x->flag[v] & V_FORWARD) || --*budget_nodes < 0) return -1;
    int p = x->g->values[v].producer;
    const sc_node *n = &x->g->nodes[p];
    double c = x->ntime[p];
    for (int j = 0; j < n->n_in; j++) {
        if (n->in[j] < 0) continue;
        double d = return_cost(x, n->in[j], budget_nodes);
        if (d < 0) return -1;
        c += d;
    }
    return c;
}

/* The cost of evicting resident v: return_cost as if it were gone (-1: it could not be). */
static double evict_cost(ev_ctx *x, int v) {
    x->stamp++;
    x->flag[v] &= (unsigned char)~V_RESIDENT;
    int budget_nodes = EVICT_MAX_DEPTH;
    double c = return_cost(x, v, &budget_nodes);
    x->flag[v] |= V_RESIDENT;
    return c;
}

/* Evicts the resident forward value with the smallest h = cost / (bytes * distance); false when
 * none can go. */
static bool evict_one(ev_ctx *x) {
    int best = -1;
    double best_h = 0;
    for (int k = 0; k < x->n_res; k++) {
        int v = x->res[k];
        if (x->lock[v] || (x->flag[v] & V_OUTPUT) || x->bytes[v] <= 0) continue;
        int r = next_read(x, v, x->t);
        if (r < 0) continue; /* dead values are freed where they die; one held by a lock waits for it */
        double c = evict_cost(x, v);
        if (c < 0) continue;
        double h = c / ((double)x->bytes[v] * (x->by_distance ? (double)(r - x->t + 1) : 1.0));
        if (best < 0 || h < best_h) best = v, best_h = h;
    }
    if (best < 0) return false;
    drop(x, best);
    return true;
}

static sc_status push_run(ev_ctx *x, int node) {
    if (x->R >= x->R_max)
        return sc_errorf("eviction: more than %d runs for %d nodes: the budget leaves too little room to recompute",
                         x->R_max, x->N);
    if (x->R == x->R_cap) {
        int cap = x->R_cap ? 2 * x->R_cap : 2 * x->N + 16;
        int *r = realloc(x->runs, sizeof(int) * (size_t)cap);
        if (!r) return sc_errorf("out of memory planning evictions");
        x->runs = r, x->R_cap = cap;
    }
    x->runs[x->R++] = node;
    return SC_OK;
}

static void lock_inputs(ev_ctx *x, const sc_node *n, int d) {
    for (int j = 0; j < n->n_in; j++)
        if (n->in[j] >= 0) x->lock[n->in[j]] += d;
}

/* Adds to x->list the producers needed to bring back the non-resident value v (postorder); fails on
 * a value that cannot come back. */
static sc_status collect(ev_ctx *x, int v, int level) {
    if (!(x->flag[v] & V_COMPUTED) || resident(x, v)) return SC_OK;
    int p = x->g->values[v].producer;
    if (!(x->flag[v] & V_FORWARD) || p < 0) return sc_errorf("eviction: '%s' is needed and gone", x->g->values[v].name);
    if (x->nmark[p] == x->stamp) return SC_OK;
    if (level > EVICT_MAX_DEPTH) return sc_errorf("eviction: bringing back '%s' needs too long a chain", x->g->values[v].name);
    x->nmark[p] = x->stamp;
    const sc_node *n = &x->g->nodes[p];
    for (int j = 0; j < n->n_in; j++) {
        int u = n->in[j];
        if (u < 0) continue;
        if ((x->flag[u] & V_WRITTEN))
            return sc_errorf("eviction: forward node '%s' would read '%s' after its update", n->name, x->g->values[u].name);
        SC_TRY(collect(x, u, level + 1));
    }
    x->list[x->n_list++] = p;
    return SC_OK;
}

static int by_index(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* Makes room for the outputs of node i that are not resident; false when nothing more can go. */
static bool make_room(ev_ctx *x, int i) {
    const sc_node *n = &x->g->nodes[i];
    int64_t need = 0;
    for (int o = 0; o < n->n_out; o++)
        if (n->out[o] >= 0 && (x->flag[n->out[o]] & V_COMPUTED) && !resident(x, n->out[o])) need += x->bytes[n->out[o]];
    while (x->live + need > x->cap)
        if (!evict_one(x)) return false;
    return true;
}

static sc_status no_room(const ev_ctx *x, int i) {
    return sc_errorf("eviction: node '%s' does not fit: %lld of the %lld bytes live cannot go", x->g->nodes[i].name,
                     (long long)x->live, (long long)x->cap);
}

/* Makes node i's outputs resident and records its run. */
static sc_status produce(ev_ctx *x, int i) {
    const sc_node *n = &x->g->nodes[i];
    for (int o = 0; o < n->n_out; o++) {
        int v = n->out[o];
        if (v >= 0 && (x->flag[v] & V_COMPUTED) && !resident(x, v)) set_resident(x, v);
    }
    return push_run(x, i);
}

/* Brings back the non-resident computed values vals (the caller holds them once made): every
 * producer the closure needs runs once, in forward order, as a re-run segment does, and a value stays
 * locked only while a later run of the set reads it, so the live set stays a frontier, not the whole
 * chain. */
static sc_status bring_back(ev_ctx *x, const int *vals, int n_vals) {
    x->stamp++;
    x->n_list = 0;
    for (int j = 0; j < n_vals; j++)
        if (vals[j] >= 0) SC_TRY(collect(x, vals[j], 0));
    qsort(x->list, (size_t)x->n_list, sizeof(int), by_index); /* forward nodes: index order is topological */
    for (int k = 0; k < x->n_list; k++) {
        const sc_node *p = &x->g->nodes[x->list[k]];
        for (int j = 0; j < p->n_in; j++) {
            int u = p->in[j];
            if (u < 0 || !(x->flag[u] & V_COMPUTED)) continue;
            if (x->pend[u]++ == 0 && resident(x, u)) x->lock[u]++;
        }
    }
    sc_status st = SC_OK;
    for (int k = 0; k < x->n_list; k++) {
        int r = x->list[k];
        const sc_node *p = &x->g->nodes[r];
        if (!st && !make_room(x, r)) st = no_room(x, r);
        if (!st) st = produce(x, r);
        for (int o = 0; !st && o < p->n_out; o++) {
            int v = p->out[o];
            if (v < 0 || !(x->flag[v] & V_COMPUTED)) continue;
            if (x->pend[v] > 0) x->lock[v]++;
            else free_if_dead(x, v, x->t);
        }
        /* on failure the locks still come off, so the next simulation starts clean */
        for (int j = 0; j < p->n_in; j++) {
            int u = p->in[j];
            if (u < 0 || !(x->flag[u] & V_COMPUTED) || --x->pend[u] > 0) continue;
            if (resident(x, u)) x->lock[u]--;
            free_if_dead(x, u, x->t);
        }
    }
    return st;
}

/* Runs node i: its missing inputs are brought back first (bring_back), room is made for its
 * outputs; then what no position from `after` on reads is freed. */
static sc_status run_node(ev_ctx *x, int i, int after) {
    const sc_node *n = &x->g->nodes[i];
    sc_status st = SC_OK;
    lock_inputs(x, n, 1);
    for (int j = 0; !st && j < n->n_in; j++) {
        int v = n->in[j];
        if (v < 0) continue;
        if (!(x->flag[v] & V_COMPUTED) && (x->flag[v] & V_WRITTEN) && i < x->F)
            st = sc_errorf("eviction: forward node '%s' would read '%s' after its update", n->name, x->g->values[v].name);
        else if ((x->flag[v] & V_COMPUTED) && !resident(x, v))
            st = bring_back(x, n->in, n->n_in);
    }
    if (!st && !make_room(x, i)) st = no_room(x, i);
    if (!st) st = produce(x, i);
    lock_inputs(x, n, -1);
    if (st) return st;
    for (int o = 0; o < n->n_out; o++) free_if_dead(x, n->out[o], after);
    for (int j = 0; j < n->n_in; j++) free_if_dead(x, n->in[j], after);
    return SC_OK;
}

/* Whether forward node p reads a persistent value that update u writes. */
static bool reads_written_by(const ev_ctx *x, int p, const sc_node *u) {
    const sc_node *n = &x->g->nodes[p];
    for (int o = 0; o < u->n_out; o++) {
        int w = u->out[o] >= 0 ? sched_alias_input(u, o) : -1;
        for (int j = 0; w >= 0 && j < n->n_in; j++)
            if (n->in[j] == w) return true;
    }
    return false;
}

/* Whether bringing back v needs a forward node reading what update u writes (memoised per walk,
 * x->stamp; a chain deeper than EVICT_MAX_DEPTH counts as needing one). */
static bool needs_written(ev_ctx *x, int v, const sc_node *u, int level) {
    if (!(x->flag[v] & V_COMPUTED) || resident(x, v)) return false;
    if (x->mark[v] == x->stamp) return x->memo[v];
    bool r = !(x->flag[v] & V_FORWARD) || level > EVICT_MAX_DEPTH;
    int p = x->g->values[v].producer;
    r = r || reads_written_by(x, p, u);
    const sc_node *n = &x->g->nodes[p];
    for (int j = 0; !r && j < n->n_in; j++)
        if (n->in[j] >= 0) r = needs_written(x, n->in[j], u, level + 1);
    x->mark[v] = x->stamp;
    x->memo[v] = r;
    return r;
}

/* Readies update u to run now: the values read from position `after` on that could not be brought
 * back once it has written its parameters are brought back first (a few small values, where
 * waiting would hold every gradient of the layers in between). False when that does not fit: the
 * update then waits. */
static bool update_ready(ev_ctx *x, int u, int after) {
    const sc_node *un = &x->g->nodes[u];
    x->stamp++;
    int n_block = 0;
    for (int v = 0; v < x->V; v++) {
        if ((x->flag[v] & (V_FORWARD | V_RESIDENT)) != V_FORWARD || next_read(x, v, after) < 0) continue;
        if (needs_written(x, v, un, 0)) x->block[n_block++] = v;
    }
    if (!n_block) return true;
    for (int k = 0; k < n_block; k++) x->lock[x->block[k]]++;
    sc_status st = bring_back(x, x->block, n_block);
    for (int k = 0; k < n_block; k++) x->lock[x->block[k]]--;
    if (st) {
        sc_status_free(st);
        return false;
    }
    return true;
}

static sc_status run_update(ev_ctx *x, int u, int after) {
    const sc_node *n = &x->g->nodes[u];
    SC_TRY(run_node(x, u, after));
    for (int o = 0; o < n->n_out; o++) {
        int w = n->out[o] >= 0 ? sched_alias_input(n, o) : -1;
        if (w >= 0) x->flag[w] |= V_WRITTEN;
    }
    return SC_OK;
}

static sc_status flush_pending(ev_ctx *x, int after, bool all) {
    int kept = 0;
    for (int k = 0; k < x->n_pending; k++) {
        int u = x->pending[k];
        if (!all && !update_ready(x, u, after)) {
            x->pending[kept++] = u;
            continue;
        }
        lock_inputs(x, &x->g->nodes[u], -1);
        SC_TRY(run_update(x, u, after));
    }
    x->n_pending = kept;
    return SC_OK;
}

/* The node order run under activation budget cap; x->runs gets the runs. */
static sc_status simulate(ev_ctx *x, int64_t cap) {
    x->cap = cap, x->live = 0, x->R = 0, x->n_res = 0, x->n_pending = 0;
    for (int v = 0; v < x->V; v++) {
        x->flag[v] &= (unsigned char)~(V_RESIDENT | V_WRITTEN);
        x->next[v] = x->use_start[v], x->lock[v] = 0, x->res_at[v] = -1;
    }
    for (x->t = 0; x->t < x->N; x->t++) {
        int i = x->order[x->t];
        const sc_node *n = &x->g->nodes[i];
        for (int j = 0; j < n->n_in; j++) {
            int p = n->in[j] >= 0 ? x->g->values[n->in[j]].producer : -1;
            for (int k = 0; p >= 0 && k < x->n_pending; k++)
                if (x->pending[k] == p)
                    return sc_errorf("eviction: node '%s' reads what update '%s' writes", n->name, x->g->nodes[p].name);
        }
        if (writes_persistent(n) && !update_ready(x, i, x->t + 1)) {
            lock_inputs(x, n, 1);
            x->pending[x->n_pending++] = i;
            continue;
        }
        SC_TRY(writes_persistent(n) ? run_update(x, i, x->t + 1) : run_node(x, i, x->t + 1));
        if (x->n_pending) SC_TRY(flush_pending(x, x->t + 1, false));
    }
    return flush_pending(x, x->N, true);
}

sc_status evict_sim_create(const sc_graph *g, int n_forward, const sc_cost_model *m, int order_kind, bool by_distance,
                           evict_sim **out) {
    *out = NULL;
    ev_ctx *x = malloc(sizeof *x);
    if (!x) return sc_errorf("out of memory planning evictions");
    sc_status st = ev_init(x, g, n_forward, m, order_kind);
    x->m = m;
    x->by_distance = by_distance;
    if (st) {
        ev_free(x);
        free(x);
        return st;
    }
    *out = x;
    return SC_OK;
}

sc_status evict_sim_run(evict_sim *x, int64_t cap, const int **runs, int *n_runs) {
    SC_TRY(simulate(x, cap));
    *runs = x->runs;
    *n_runs = x->R;
    return SC_OK;
}

void evict_sim_destroy(evict_sim *x) {
    if (!x) return;
    ev_free(x);
    free(x);
}
