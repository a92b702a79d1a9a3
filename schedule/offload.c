/* Streaming plans ("Streaming"; docs/DESIGN.md schedule/): rewrites a lowered RUN/FREE plan so
 * that parameters and optimizer state (weights) and long-lived activations live in host memory
 * between their uses. Contract in sched_internal.h (plan_offload, plan_predict).
 *
 * Entities. A streamed weight is a PARAM or OPT_STATE value with a fixed home in the input plan
 * (not a graph output); its uses are the RUNs that read it or update it in place (the optimizer
 * update, a write). An activation entity is one instance (interval) of a computed value that is not
 * resident at the end; its uses are the producing RUN (a write) and the RUNs that read it.
 * An output entity (any streaming mode) is the last instance of a computed graph output, which the
 * lowering keeps resident to the end of the step: BatchNormalization running statistics (written
 * back after the step), the loss, kept gradients. It is OFFLOADed after its producing RUN like an
 * activation, and its host copy is what the executor hands out at the end (plan_exec.c), so it is
 * never brought back unless a later RUN reads it. Earlier instances (recomputations) are freed
 * after their last read by the lowering already. Without this, a 250,000-block ResNet keeps 1M
 * running statistics (64 MB) on the device from their forward run to the end of the step.
 *
 * Clusters. Uses u_0 < u_1 < ... (RUN indices) are split where the gap between two uses,
 * u_{j+1} - u_j - 1 RUNs, exceeds the look-ahead W: with the prefetch issued W RUNs ahead, only such
 * a gap frees memory. An activation with one cluster is left as lowered.
 *
 * Steps for a cluster [a, b] of an entity (R runs; "before r" / "after r" are the places around
 * RUN r; at one place frees come before prefetches because "after r" precedes "before r+1"):
 *   - unless the producing RUN opens it (an activation's first cluster): PREFETCH before RUN
 *     max(a - W, f_prev + 1), where f_prev is the RUN after which the previous instance was freed,
 *     and WAIT right before RUN a (the RUN reads the bytes the copy writes);
 *   - if the cluster writes (a weight's update at RUN w, or an activation's creation at w = a):
 *     OFFLOAD right after RUN w (the host copy is the value's home from then on), then WAIT and FREE
 *     after RUN f = max(b, min(w + W, limit)), limit = R-1 or, with a next cluster at a', a'-1-W
 *     (so its prefetch still fits after the free). The WAIT before the FREE is what keeps the
 *     allocator from handing the bytes out while the copy still reads them: the interval ends at
 *     its WAIT;
 *   - otherwise FREE right after RUN b.
 * Transfer ids count the PREFETCH/OFFLOAD steps in step order. The result is a valid plan for
 * plan_alloc (RUN/PREFETCH open intervals, FREE closes them) and for backends/plan_exec.
 *
 * Host updates (host_updates with weights; plan.h HOST_RUN). The update node of a streamed
 * parameter leaves the device: its RUN slot emits nothing and it is no use of the parameter or its
 * state, so the state is never prefetched and the parameter, read-only on the device, is never
 * offloaded. Each computed input of the update (its gradient, the clip scale) becomes a host-read
 * entity: like an output entity, its instance is OFFLOADed after its write and WAITed and FREEd
 * after RUN f (the window rule above). The HOST_RUN goes after RUN h, h = max(slot - 1, f of each
 * host-read input): after its inputs' WAITs, and after every device read of the parameter (the
 * lowering put the update after them), so no prefetch of it is still reading the host home that
 * the update rewrites. Per parameter and step that moves the fp32 weight in once per cluster of
 * device reads and the gradient out once, whatever the optimizer's state.
 *
 * Resident parameters (stream_opts.resident_max; resident.c chooses it). A parameter whose group
 * (it and its optimizer state) is at most resident_max bytes is not an entity: it keeps its fixed
 * interval, so it and its state stay on the device all step and its update runs there, whatever
 * host_updates says. A plan can so mix host updates (large tensors) and device updates (biases,
 * normalisation scales, whose transfers would cost more in latency than their bytes).
 *
 * Prediction (plan_predict): the timeline model of schedule/timeline.c under cost_node_time:
 * compute, the link's two directions and the host worker, each a FIFO.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/free_all.h"
#include "schedule/sched_internal.h"

typedef enum { EV_PREFETCH, EV_WAIT, EV_OFFLOAD, EV_FREE, EV_HOST_RUN } ev_kind;

/* Place keys: before RUN r = 2r, after RUN r = 2r + 1; times 4 plus a class orders steps at one
 * place: after a RUN, OFFLOADs (0), then WAIT+FREE pairs (1), then plain FREEs (2), then HOST_RUNs
 * (3); before a RUN, PREFETCHes (0), then WAITs (1). */
#define BEFORE(r) (2 * (int64_t)(r))
#define AFTER(r) (2 * (int64_t)(r) + 1)

typedef struct {
    int64_t key;
    int seq; /* push order: ties keep it, so a WAIT+FREE pair stays adjacent */
    ev_kind kind;
    int value;
    int ref; /* WAIT: index (seq) of the transfer event it waits for; HOST_RUN: the node */
} event;

typedef struct {
    int run;
    bool write;
} use;

typedef struct {
    const sc_graph *g;
    const sc_plan *in;
    int W, R;
    bool host;       /* host updates requested (with weights) */
    int *run_step;   /* [R] step of the input plan */
    bool *run_host;  /* [R] the RUN is an update that moves to the host */
    int n_host;
    int *hr_run, *hr_ent, n_hr; /* host-read pairs: the host RUN slot and an entity it reads */
    int *ent_wait;   /* per entity: the RUN after which its written instance's OFFLOAD is WAITed, -1 */
    int *root;       /* per value: storage root */
    bool *streamed;  /* per value */
    int *ent_value;  /* per entity: its value */
    int *ent_of_value, *ent_of_iv, n_ent;
    bool *ent_output;  /* per entity: an output entity (streamed even with a single cluster) */
    use *uses;       /* grouped by entity: ent_start[e] .. ent_start[e+1] */
    int *ent_start;
    int *free_run, *free_value, *free_iv, n_free; /* FREE steps of the input plan */
    event *ev;
    int n_ev, cap_ev;
} off_ctx;

static void ctx_free(off_ctx *x) {
    SC_FREE_ALL(x->run_step, x->run_host, x->hr_run, x->hr_ent, x->ent_wait, x->root, x->streamed, x->ent_value,
                x->ent_of_value, x->ent_of_iv, x->ent_output, x->uses, x->ent_start, x->free_run, x->free_value,
                x->free_iv, x->ev);
}

static sc_status ev_push(off_ctx *x, int64_t place, int cls, ev_kind kind, int value, int ref, int *idx) {
    if (x->n_ev == x->cap_ev) {
        int cap = x->cap_ev ? 2 * x->cap_ev : 1024;
        event *e = realloc(x->ev, sizeof *e * (size_t)cap);
        if (!e) return sc_errorf("out of memory building streaming steps");
        x->ev = e;
        x->cap_ev = cap;
    }
    if (idx) *idx = x->n_ev;
    x->ev[x->n_ev] = (event){place * 4 + cls, x->n_ev, kind, value, ref};
    x->n_ev++;
    return SC_OK;
}

static int ev_cmp(const void *a, const void *b) {
    const event *p = a, *q = b;
    if (p->key != q->key) return p->key < q->key ? -1 : 1;
    return (p->seq > q->seq) - (p->seq < q->seq);
}

static bool slot_opens(const sc_node *n, int o) { return n->out[o] >= 0 && sched_alias_input(n, o) < 0; }

/* Roots, streamed weights, activation entities, runs. */
static sc_status ctx_init(off_ctx *x, bool weights, bool activations, int64_t resident_max) {
    const sc_graph *g = x->g;
    const sc_plan *in = x->in;
    size_t nv = (size_t)g->n_values + 1;
    x->root = malloc(sizeof(int) * nv);
    x->streamed = calloc(nv, 1);
    x->ent_of_value = malloc(sizeof(int) * nv);
    x->ent_of_iv = malloc(sizeof(int) * ((size_t)in->n_intervals + 1));
    x->ent_value = malloc(sizeof(int) * ((size_t)in->n_intervals + 1));
    x->ent_output = calloc((size_t)in->n_intervals + 1, 1);
    x->run_step = malloc(sizeof(int) * ((size_t)in->n_steps + 1));
    x->run_host = calloc((size_t)in->n_steps + 1, sizeof(bool));
    x->ent_wait = malloc(sizeof(int) * ((size_t)in->n_intervals + 1));
    x->free_run = malloc(sizeof(int) * ((size_t)in->n_steps + 1));
    x->free_value = malloc(sizeof(int) * ((size_t)in->n_steps + 1));
    x->free_iv = malloc(sizeof(int) * ((size_t)in->n_steps + 1));
    if (!x->root || !x->streamed || !x->ent_of_value || !x->ent_of_iv || !x->ent_value || !x->ent_output || !x->run_step ||
        !x->run_host || !x->ent_wait || !x->free_run || !x->free_value || !x->free_iv)
        return sc_errorf("out of memory building streaming steps");
    bool *keep = calloc(nv, 1); /* streamable values left resident */
    sc_status st = keep ? SC_OK : sc_errorf("out of memory building streaming steps");
    if (!st && weights) st = plan_resident_mark(g, resident_max, keep);
    if (st) {
        free(keep);
        return st;
    }
    for (int v = 0; v < g->n_values; v++) x->root[v] = v, x->ent_of_value[v] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const sc_node *n = &g->nodes[i];
        for (int o = 0; o < n->n_out; o++) {
            int a = n->out[o] >= 0 ? sched_alias_input(n, o) : -1;
            if (a >= 0) x->root[n->out[o]] = x->root[a];
        }
    }
    int last = in->n_steps - 1;
    for (int i = 0; i < in->n_intervals; i++) {
        int v = in->intervals[i].value;
        x->ent_of_iv[i] = -1;
        if (i < in->n_fixed_intervals) {
            if (weights && sched_streamable(g, v) && !keep[v]) {
                x->streamed[v] = true;
                x->ent_of_value[v] = x->n_ent;
                x->ent_value[x->n_ent++] = v;
            }
        } else if (in->intervals[i].end < last ? activations : (weights || activations) && g->values[v].is_output) {
            x->ent_of_iv[i] = x->n_ent;
            x->ent_output[x->n_ent] = in->intervals[i].end >= last;
            x->ent_value[x->n_ent++] = v;
        }
    }
    free(keep);
    for (int s = 0; s < in->n_steps; s++) {
        sc_step_kind k = in->steps[s].kind;
        if (k != SC_STEP_RUN && k != SC_STEP_FREE)
            return sc_errorf("streaming: step %d of the lowered plan is neither RUN nor FREE", s);
        if (k != SC_STEP_RUN) continue;
        const sc_node *nd = &g->nodes[in->steps[s].node];
        x->run_host[x->R] = x->host && weights && sched_is_update(nd) && nd->in[0] >= 0 && x->streamed[x->root[nd->in[0]]];
        x->n_host += x->run_host[x->R];
        x->run_step[x->R++] = s;
    }
    for (int e = 0; e <= in->n_intervals; e++) x->ent_wait[e] = -1;
    return SC_OK;
}

/* Host-read entities: the instance of every computed input of a host update, current at its slot
 * (walking the input plan as uses_collect does). They must exist before uses are collected, so
 * that the producer's write is recorded as a use. */
static sc_status host_reads_mark(off_ctx *x) {
    const sc_graph *g = x->g;
    const sc_plan *in = x->in;
    if (!x->n_host) return SC_OK;
    int *cur = malloc(sizeof(int) * ((size_t)g->n_values + 1)), cap = 2 * x->n_host + 8;
    x->hr_run = malloc(sizeof(int) * (size_t)cap);
    x->hr_ent = malloc(sizeof(int) * (size_t)cap);
    if (!cur || !x->hr_run || !x->hr_ent) {
        free(cur);
        return sc_errorf("out of memory building streaming steps");
    }
    for (int v = 0; v < g->n_values; v++) cur[v] = -1;
    sc_status st = SC_OK;
    for (int s = 0, r = -1; !st && s < in->n_steps; s++) {
        const sc_step *sp = &in->steps[s];
        if (sp->kind == SC_STEP_FREE) {
            cur[sp->value] = -1;
            continue;
        }
        const sc_node *nd = &g->nodes[sp->node];
        r++;
        for (int o = 0, iv = sp->interval; o < nd->n_out; o++)
            if (slot_opens(nd, o)) cur[nd->out[o]] = iv++;
        if (!x->run_host[r]) continue;
        for (int j = 0; j < nd->n_in; j++) {
            int v = nd->in[j] >= 0 ? x->root[nd->in[j]] : -1;
            if (v < 0 || sched_persistent(g, v)) continue;
            int iv = cur[v];
            SC_ASSERT(iv >= 0 && iv >= in->n_fixed_intervals); /* the lowering keeps a read input resident */
            if (x->ent_of_iv[iv] < 0) {
                x->ent_of_iv[iv] = x->n_ent;
                x->ent_value[x->n_ent++] = v;
            }
            x->ent_output[x->ent_of_iv[iv]] = true; /* offloaded after its write, like an output */
            if (x->n_hr == cap) {
                cap *= 2;
                int *a = realloc(x->hr_run, sizeof(int) * (size_t)cap), *b = realloc(x->hr_ent, sizeof(int) * (size_t)cap);
                if (a) x->hr_run = a;
                if (b) x->hr_ent = b;
                if (!a || !b) {
                    st = sc_errorf("out of memory building streaming steps");
                    break;
                }
            }
            x->hr_run[x->n_hr] = r, x->hr_ent[x->n_hr++] = x->ent_of_iv[iv];
        }
    }
    free(cur);
    return st;
}

/* Walks the input plan once: every use of every entity, and the input plan's FREEs. */
static sc_status uses_collect(off_ctx *x) {
    const sc_graph *g = x->g;
    const sc_plan *in = x->in;
    int cap = 1024, n = 0, r = -1;
    use *all = malloc(sizeof *all * (size_t)cap);
    int *ent = malloc(sizeof(int) * (size_t)cap);
    int *cur = malloc(sizeof(int) * ((size_t)g->n_values + 1)); /* value -> open input interval */
    sc_status st = (!all || !ent || !cur) ? sc_errorf("out of memory building streaming steps") : SC_OK;
    for (int v = 0; !st && v < g->n_values; v++) cur[v] = -1;
    for (int s = 0; !st && s < in->n_steps; s++) {
        const sc_step *sp = &in->steps[s];
        if (sp->kind == SC_STEP_FREE) {
            int i = cur[sp->value];
            SC_ASSERT(i >= 0);
            x->free_run[x->n_free] = r, x->free_value[x->n_free] = sp->value, x->free_iv[x->n_free++] = i;
            cur[sp->value] = -1;
            continue;
        }
        r++;
        if (x->run_host[r]) continue; /* no device use: its outputs are in place, its reads come from host copies */
        const sc_node *nd = &g->nodes[sp->node];
        int next_iv = sp->interval;
        for (int pass = 0; pass < 2 && !st; pass++) {
            int m = pass == 0 ? nd->n_in : nd->n_out;
            for (int j = 0; j < m; j++) {
                int v = pass == 0 ? nd->in[j] : nd->out[j], e = -1;
                bool write = pass == 1;
                if (v < 0) continue;
                if (pass == 1 && slot_opens(nd, j)) {
                    SC_ASSERT(next_iv >= 0 && next_iv < in->n_intervals && in->intervals[next_iv].value == v);
                    cur[v] = next_iv;
                    e = x->ent_of_iv[next_iv++];
                } else if (x->streamed[x->root[v]]) {
                    e = x->ent_of_value[x->root[v]];
                } else if (!sched_persistent(g, x->root[v])) {
                    SC_ASSERT(cur[x->root[v]] >= 0);
                    e = x->ent_of_iv[cur[x->root[v]]];
                }
                if (e < 0) continue;
                if (n == cap) {
                    cap *= 2;
                    use *a = realloc(all, sizeof *a * (size_t)cap);
                    int *b = realloc(ent, sizeof(int) * (size_t)cap);
                    if (a) all = a;
                    if (b) ent = b;
                    if (!a || !b) {
                        st = sc_errorf("out of memory building streaming steps");
                        break;
                    }
                }
                all[n] = (use){r, write};
                ent[n++] = e;
            }
        }
    }
    /* group by entity (counting sort, stable: runs stay increasing), merging uses of one RUN */
    if (!st) {
        x->ent_start = calloc((size_t)x->n_ent + 2, sizeof(int));
        x->uses = malloc(sizeof *x->uses * ((size_t)n + 1));
        if (!x->ent_start || !x->uses) st = sc_errorf("out of memory building streaming steps");
    }
    if (!st) {
        for (int i = 0; i < n; i++) x->ent_start[ent[i] + 1]++;
        for (int e = 0; e < x->n_ent; e++) x->ent_start[e + 1] += x->ent_start[e];
        int *fill = calloc((size_t)x->n_ent + 1, sizeof(int));
        if (!fill) st = sc_errorf("out of memory building streaming steps");
        for (int i = 0; !st && i < n; i++) {
            int e = ent[i], at = x->ent_start[e] + fill[e];
            if (fill[e] > 0 && x->uses[at - 1].run == all[i].run) x->uses[at - 1].write |= all[i].write;
            else x->uses[at] = all[i], fill[e]++;
        }
        /* compact: entity e keeps fill[e] uses */
        int w = 0;
        for (int e = 0; !st && e < x->n_ent; e++) {
            int from = x->ent_start[e];
            x->ent_start[e] = w;
            memmove(&x->uses[w], &x->uses[from], sizeof *x->uses * (size_t)fill[e]);
            w += fill[e];
        }
        if (!st) x->ent_start[x->n_ent] = w;
        free(fill);
    }
    SC_FREE_ALL(all, ent, cur);
    return st;
}

/* Events of one entity's clusters; *split: whether it was streamed at all. */
static sc_status entity_events(off_ctx *x, int e, bool *split) {
    const use *u = &x->uses[x->ent_start[e]];
    int n = x->ent_start[e + 1] - x->ent_start[e], W = x->W, v = x->ent_value[e];
    bool weight = x->streamed[v];
    int n_clusters = n > 0;
    for (int j = 1; j < n; j++) n_clusters += u[j].run - u[j - 1].run - 1 > W;
    *split = weight || x->ent_output[e] ? n > 0 : n_clusters > 1;
    if (!*split) return SC_OK;
    int prev_free = -1, idx = -1;
    for (int lo = 0, c = 0; lo < n; c++) {
        int hi = lo + 1;
        while (hi < n && u[hi].run - u[hi - 1].run - 1 <= W) hi++;
        int a = u[lo].run, b = u[hi - 1].run, next_a = hi < n ? u[hi].run : -1, wrote = -1;
        for (int j = lo; j < hi; j++)
            if (u[j].write) wrote = u[j].run;
        bool by_run = !weight && c == 0; /* the producing RUN opens the instance */
        if (!by_run) {
            int p = a - W > prev_free + 1 ? a - W : prev_free + 1;
            SC_TRY(ev_push(x, BEFORE(p), 0, EV_PREFETCH, v, -1, &idx));
            SC_TRY(ev_push(x, BEFORE(a), 1, EV_WAIT, v, idx, NULL));
        }
        int f = b;
        if (wrote >= 0) {
            SC_ASSERT(weight || c == 0); /* an activation is written only by its producer */
            SC_TRY(ev_push(x, AFTER(wrote), 0, EV_OFFLOAD, v, -1, &idx));
            int limit = next_a >= 0 ? next_a - 1 - W : x->R - 1;
            int want = wrote + W < limit ? wrote + W : limit;
            if (want > f) f = want;
            SC_TRY(ev_push(x, AFTER(f), 1, EV_WAIT, v, idx, NULL));
            SC_TRY(ev_push(x, AFTER(f), 1, EV_FREE, v, -1, NULL));
            x->ent_wait[e] = f;
        } else {
            SC_TRY(ev_push(x, AFTER(b), 2, EV_FREE, v, -1, NULL));
        }
        prev_free = f;
        lo = hi;
    }
    return SC_OK;
}

/* One HOST_RUN per host slot r, after RUN h = max(r - 1, the WAIT run of each entity it reads). */
static sc_status host_events(off_ctx *x) {
    int k = 0;
    for (int r = 0; r < x->R; r++) {
        if (!x->run_host[r]) continue;
        int h = r - 1;
        for (; k < x->n_hr && x->hr_run[k] == r; k++) {
            int f = x->ent_wait[x->hr_ent[k]];
            SC_ASSERT(f >= 0); /* a host-read instance is written, so offloaded, before the update */
            if (f > h) h = f;
        }
        SC_ASSERT(h >= 0);
        SC_TRY(ev_push(x, AFTER(h), 3, EV_HOST_RUN, -1, x->in->steps[x->run_step[r]].node, NULL));
    }
    SC_ASSERT(k == x->n_hr);
    return SC_OK;
}

static sc_status events_build(off_ctx *x) {
    bool *split = calloc((size_t)x->n_ent + 1, 1);
    if (!split) return sc_errorf("out of memory building streaming steps");
    sc_status st = SC_OK;
    for (int e = 0; !st && e < x->n_ent; e++) st = entity_events(x, e, &split[e]);
    for (int f = 0; !st && f < x->n_free; f++) {
        int e = x->ent_of_iv[x->free_iv[f]];
        if (e >= 0 && split[e]) continue; /* the entity's own steps free it */
        st = ev_push(x, AFTER(x->free_run[f]), 2, EV_FREE, x->free_value[f], -1, NULL);
    }
    free(split);
    if (!st) st = host_events(x);
    if (!st) qsort(x->ev, (size_t)x->n_ev, sizeof *x->ev, ev_cmp);
    return st;
}

typedef struct {
    sc_plan *p;
    int ns, ni, n_tid;
    int *cur; /* value -> open output interval */
    int *tid; /* event seq -> transfer id */
} emitter;

static void emit_event(emitter *m, const sc_graph *g, const event *e) {
    sc_plan *p = m->p;
    switch (e->kind) {
    case EV_PREFETCH:
        p->intervals[m->ni] = (sc_interval){e->value, 0, sched_value_bytes(g, e->value), m->ns, -1};
        SC_ASSERT(m->cur[e->value] < 0);
        m->cur[e->value] = m->ni;
        m->tid[e->seq] = m->n_tid;
        p->steps[m->ns++] = (sc_step){SC_STEP_PREFETCH, -1, e->value, m->n_tid++, m->ni++, SC_DTYPE_UNDEFINED};
        break;
    case EV_OFFLOAD:
        SC_ASSERT(m->cur[e->value] >= 0);
        m->tid[e->seq] = m->n_tid;
        p->steps[m->ns++] = (sc_step){SC_STEP_OFFLOAD, -1, e->value, m->n_tid++, -1, SC_DTYPE_UNDEFINED};
        break;
    case EV_WAIT:
        SC_ASSERT(m->tid[e->ref] >= 0);
        p->steps[m->ns++] = (sc_step){SC_STEP_WAIT, -1, e->value, m->tid[e->ref], -1, SC_DTYPE_UNDEFINED};
        break;
    case EV_HOST_RUN: p->steps[m->ns++] = (sc_step){SC_STEP_HOST_RUN, e->ref, -1, -1, -1, SC_DTYPE_UNDEFINED}; break;
    case EV_FREE:
        SC_ASSERT(m->cur[e->value] >= 0);
        p->intervals[m->cur[e->value]].end = m->ns;
        m->cur[e->value] = -1;
        p->steps[m->ns++] = (sc_step){SC_STEP_FREE, -1, e->value, -1, -1, SC_DTYPE_UNDEFINED};
        break;
    }
}

static sc_status plan_emit(off_ctx *x, sc_plan *out) {
    const sc_graph *g = x->g;
    const sc_plan *in = x->in;
    int n_pref = 0;
    for (int i = 0; i < x->n_ev; i++) n_pref += x->ev[i].kind == EV_PREFETCH;
    out->n_steps = x->R - x->n_host + x->n_ev;
    out->steps = malloc(sizeof(sc_step) * ((size_t)out->n_steps + 1));
    out->intervals = malloc(sizeof(sc_interval) * ((size_t)in->n_intervals + n_pref + 1));
    emitter m = {out, 0, 0, 0, malloc(sizeof(int) * ((size_t)g->n_values + 1)), malloc(sizeof(int) * ((size_t)x->n_ev + 1))};
    if (!out->steps || !out->intervals || !m.cur || !m.tid) {
        free(m.cur);
        free(m.tid);
        return sc_errorf("out of memory building a streaming plan of %d steps", out->n_steps);
    }
    enum { LIVE_TO_END = -2 };
    for (int v = 0; v < g->n_values; v++) m.cur[v] = -1;
    for (int i = 0; i < x->n_ev; i++) m.tid[i] = -1;
    for (int i = 0; i < in->n_fixed_intervals; i++)
        if (!x->streamed[in->intervals[i].value]) out->intervals[m.ni++] = in->intervals[i];
    out->n_fixed_intervals = m.ni;
    int ei = 0, in_last = in->n_steps - 1;
    for (int r = 0; r < x->R; r++) {
        for (; ei < x->n_ev && x->ev[ei].key < AFTER(r) * 4; ei++) emit_event(&m, g, &x->ev[ei]);
        if (x->run_host[r]) { /* its HOST_RUN is an event */
            for (; ei < x->n_ev && x->ev[ei].key < BEFORE(r + 1) * 4; ei++) emit_event(&m, g, &x->ev[ei]);
            continue;
        }
        const sc_step *os = &in->steps[x->run_step[r]];
        int first = -1;
        for (int i = os->interval; i >= 0 && i < in->n_intervals && in->intervals[i].begin == x->run_step[r]; i++) {
            sc_interval iv = in->intervals[i];
            iv.begin = m.ns;
            iv.end = iv.end >= in_last ? LIVE_TO_END : -1;
            if (first < 0) first = m.ni;
            m.cur[iv.value] = m.ni;
            out->intervals[m.ni++] = iv;
        }
        out->steps[m.ns++] = (sc_step){SC_STEP_RUN, os->node, -1, -1, first, SC_DTYPE_UNDEFINED};
        for (; ei < x->n_ev && x->ev[ei].key < BEFORE(r + 1) * 4; ei++) emit_event(&m, g, &x->ev[ei]);
    }
    SC_ASSERT(ei == x->n_ev && m.ns == out->n_steps);
    out->n_intervals = m.ni;
    for (int i = 0; i < m.ni; i++) {
        sc_interval *iv = &out->intervals[i];
        if (i < out->n_fixed_intervals || iv->end == LIVE_TO_END) iv->end = m.ns - 1;
        SC_ASSERT(iv->end >= iv->begin); /* every streamed instance was freed */
    }
    free(m.cur);
    free(m.tid);
    return SC_OK;
}

sc_status plan_offload(const sc_graph *g, const sc_plan *in, bool weights, bool activations, int window, sc_plan *out) {
    stream_opts so = {weights, activations, false, window, 0};
    return plan_offload_ex(g, in, &so, out);
}

sc_status plan_offload_ex(const sc_graph *g, const sc_plan *in, const stream_opts *so, sc_plan *out) {
    bool weights = so->weights, activations = so->activations;
    int window = so->window;
    memset(out, 0, sizeof *out);
    if (window < 0) return sc_errorf("streaming: the look-ahead window must be >= 0, got %d", window);
    off_ctx x;
    memset(&x, 0, sizeof x);
    x.g = g;
    x.in = in;
    x.W = window;
    x.host = so->host_updates && weights;
    sc_status st = ctx_init(&x, weights, activations, so->resident_max);
    if (x.W > x.R) x.W = x.R; /* no gap is longer; keeps the arithmetic in range */
    if (!st) st = host_reads_mark(&x);
    if (!st) st = uses_collect(&x);
    if (!st) st = events_build(&x);
    if (!st) st = plan_emit(&x, out);
    ctx_free(&x);
    if (st) {
        plan_free(out);
        return st;
    }
    out->flops = in->flops;
    out->recompute_flops = in->recompute_flops;
    out->predicted_time = in->predicted_time;
    out->strategy = in->strategy;
    out->n_segments = in->n_segments;
    out->offload = weights && activations ? SC_OFFLOAD_BOTH
                   : weights              ? SC_OFFLOAD_WEIGHTS
                   : activations          ? SC_OFFLOAD_ACTIVATIONS
                                          : SC_OFFLOAD_NONE;
    out->offload_window = window;
    out->update_on = x.n_host ? SC_UPDATE_HOST : SC_UPDATE_DEVICE; /* every parameter resident: device */
    out->n_host_updates = x.n_host;
    out->resident_max = weights ? so->resident_max : 0;
    if (weights) plan_resident_count(g, out, &out->n_resident, &out->resident_bytes);
    return SC_OK;
}

sc_status plan_predict(const sc_graph *g, const sc_cost_model *m, sc_plan *plan) {
    double *nt = malloc(sizeof(double) * ((size_t)g->n_nodes + 1)); /* per node: recomputed runs repeat it */
    if (!nt) return sc_errorf("out of memory predicting a plan's time");
    for (int i = 0; i < g->n_nodes; i++) nt[i] = cost_node_time(m, g, i);
    sc_timeline tl;
    sc_status st = plan_timeline(g, plan, nt, m, false, &tl);
    free(nt);
    SC_TRY(st);
    plan->predicted_time = tl.total;
    plan->stall_time = tl.stall;
    plan->host_time = tl.host_busy;
    plan->bytes_h2d = tl.bytes_h2d;
    plan->bytes_d2h = tl.bytes_d2h;
    return SC_OK;
}
