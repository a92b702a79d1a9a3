/* Host memory of a plan's copies (schedule/plan.h): the host buffers a session makes for values it
 * moves that have no host home of their own (offloaded activations, gradients offloaded for host
 * updates, offloaded intermediate sums), as the plan executor (backends/plan_exec.c) makes them.
 *
 * The executor's policy, which plan_host_copy_bytes replays:
 *   - a transferred value whose home is host memory (a streamed parameter or optimizer state: no
 *     producer, prefetched, not in the fixed region) uses its graph data: no copy;
 *   - any other value gets a buffer at its first transfer and keeps it, step after step, unless
 *     plan_host_release_steps gives it a release step: a value only host updates read after its
 *     offload (a gradient) returns its buffer to a pool after its last host read, and a later copy
 *     of exactly the same size takes it from there.
 * Buffers kept across steps make later steps allocate little: a pooled buffer that a kept value
 * adopted in one step is missing from the pool in the next, which then allocates once more. The
 * replay runs step after step until one allocates nothing and returns the total: the session's
 * whole footprint from then on (2 steps in practice; at most 8 are replayed). With host updates on a
 * worker thread (device backends) a copy can be needed before the worker has pooled an equal one,
 * so the figure is the inline (CPU backend) footprint; the worker's can exceed it by the copies of
 * updates still queued. */
#include <stdlib.h>

#include "core/free_all.h"
#include "schedule/sched_internal.h"
#include "graph/ops.h"

void plan_value_roots(const sc_graph *g, int *root) {
    for (int v = 0; v < g->n_values; v++) root[v] = v;
    for (int i = 0; i < g->n_nodes; i++) {
        const sc_node *n = &g->nodes[i];
        for (int o = 0; o < n->n_out; o++) {
            int a = sc_op_inplace_input(n->op, o);
            if (n->out[o] >= 0 && a >= 0 && a < n->n_in && n->in[a] >= 0) root[n->out[o]] = root[n->in[a]];
        }
    }
}

void plan_host_release_steps(const sc_graph *g, const sc_plan *p, const int *root, int *release_at) {
    for (int v = 0; v < g->n_values; v++) release_at[v] = -1;
    for (int i = 0; i < p->n_steps; i++) {
        const sc_step *sp = &p->steps[i];
        if (sp->kind == SC_STEP_PREFETCH) release_at[sp->value] = -2; /* brought back: keep */
        if (sp->kind != SC_STEP_HOST_RUN) continue;
        const sc_node *n = &g->nodes[sp->node];
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k] >= 0 ? root[n->in[k]] : -1;
            if (v < 0 || g->values[v].producer < 0 || g->values[v].is_output || release_at[v] == -2) continue;
            release_at[v] = i;
        }
    }
    for (int i = 0; i < p->n_steps; i++) /* a prefetch after the last host read keeps it too */
        if (p->steps[i].kind == SC_STEP_PREFETCH && release_at[p->steps[i].value] >= 0 &&
            i > release_at[p->steps[i].value])
            release_at[p->steps[i].value] = -1;
}

bool plan_host_homes(const sc_graph *g, const sc_plan *p, bool *home) {
    bool *fixed = calloc((size_t)g->n_values + 1, 1);
    if (!fixed) return false;
    for (int v = 0; v < g->n_values; v++) home[v] = false;
    for (int i = 0; i < p->n_fixed_intervals; i++) fixed[p->intervals[i].value] = true;
    for (int i = 0; i < p->n_steps; i++) {
        int v = p->steps[i].value;
        if (p->steps[i].kind == SC_STEP_PREFETCH && g->values[v].producer < 0 && !fixed[v]) home[v] = true;
    }
    free(fixed);
    return true;
}

int64_t plan_host_buffer_bytes(int64_t bytes) { return sched_align(bytes); }

/* Pooled buffers by size: a short list (a model has few distinct gradient sizes). */
typedef struct {
    int64_t size;
    int count;
} pool_slot;

static bool pool_take(pool_slot *pool, int n, int64_t size) {
    for (int i = 0; i < n; i++)
        if (pool[i].size == size && pool[i].count > 0) {
            pool[i].count--;
            return true;
        }
    return false;
}

static int pool_give(pool_slot *pool, int n, int64_t size) {
    for (int i = 0; i < n; i++)
        if (pool[i].size == size) {
            pool[i].count++;
            return n;
        }
    pool[n] = (pool_slot){size, 1};
    return n + 1;
}

/* The executor's state between steps: which values hold a buffer, and the pool. */
typedef struct {
    int *root, *release_at;
    bool *home, *has;
    pool_slot *pool;
    int n_pool;
} replay;

/* One step of the plan, as the executor runs it inline; returns the bytes it allocates. */
static int64_t replay_step(const sc_graph *g, const sc_plan *p, replay *r) {
    int64_t made = 0;
    for (int i = 0; i < p->n_steps; i++) {
        const sc_step *sp = &p->steps[i];
        if (sp->kind == SC_STEP_PREFETCH || sp->kind == SC_STEP_OFFLOAD) {
            int v = sp->value;
            int64_t size = plan_host_buffer_bytes(sched_data_bytes(g, v));
            if (r->home[v] || r->has[v]) continue;
            r->has[v] = true;
            if (!pool_take(r->pool, r->n_pool, size)) made += size;
        } else if (sp->kind == SC_STEP_HOST_RUN) {
            const sc_node *n = &g->nodes[sp->node];
            for (int k = 0; k < n->n_in; k++) {
                int v = n->in[k] >= 0 ? r->root[n->in[k]] : -1;
                if (v < 0 || r->release_at[v] != i || !r->has[v]) continue;
                r->has[v] = false;
                r->n_pool = pool_give(r->pool, r->n_pool, plan_host_buffer_bytes(sched_data_bytes(g, v)));
            }
        }
    }
    return made;
}

int64_t plan_host_copy_bytes(const sc_graph *g, const sc_plan *p) {
    size_t nv = (size_t)g->n_values + 1;
    replay r = {.root = malloc(nv * sizeof(int)), .release_at = malloc(nv * sizeof(int)), .home = malloc(nv),
                .has = calloc(nv, 1), .pool = malloc(nv * sizeof(pool_slot))};
    int64_t total = -1;
    if (r.root && r.release_at && r.home && r.has && r.pool && plan_host_homes(g, p, r.home)) {
        plan_value_roots(g, r.root);
        plan_host_release_steps(g, p, r.root, r.release_at);
        total = 0;
        for (int rep = 0; rep < 8; rep++) {
            int64_t made = replay_step(g, p, &r);
            total += made;
            if (!made) break;
        }
    }
    SC_FREE_ALL(r.root, r.release_at, r.home, r.has, r.pool);
    return total;
}
