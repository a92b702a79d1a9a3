/* Lowering a chain schedule to plan steps with exact value liveness (docs/DESIGN.md, schedule/).
 *
 * 1. The actions become a sequence of node runs: FWD_DISCARD(i) / FWD_ALL(i) run segment i's forward
 *    nodes in order; BWD(i) runs the non-forward nodes of phase i (sched_phases) in graph order;
 *    KEEP / DROP run nothing (chain_schedule_validate has checked them: a schedule that relies on a
 *    cut it did not keep is rejected there, naming the action).
 * 2. Every run of a node opens a new instance of each of its outputs (a recomputed value is a new
 *    instance). A read refers to the latest instance produced before it; reading a value no earlier
 *    run produced is a lowering error naming the node, the value and the action.
 * 3. An instance ends at its last read before the value is produced again: FREE follows the RUN of
 *    that reader at once (or the producing RUN when nothing reads it). The last instance of a graph
 *    output (loss, writebacks, kept gradients) lives to the end. So nothing is kept that the rest of
 *    the schedule does not read: the FWD_ALL/FWD_DISCARD distinction shows up only through which
 *    runs follow.
 * Persistent values get one interval each spanning the plan (listed first, in value order); outputs
 * of in-place ops alias their input's storage and open no interval.
 * With one segment (the `none` plan) the runs are nodes 0..n-1 in graph order.
 * Speed (a 13M-value graph lowers to 32M runs): the per-value facts the run walks need (persistent,
 * graph output) are copied into one byte per value first, since sc_value is 184 bytes and every
 * lookup into the values array would be a cache miss (so are the interval sizes); costs are computed once
 * per node, not per run.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/free_all.h"
#include "schedule/sched_internal.h"

enum { END_OF_PLAN = INT_MAX };

typedef struct {
    const sc_graph *g;
    int F, k;
    int *seg, *phase, *border, *bstart; /* segments, phases, phase buckets */
    int *runs, R;                       /* node of every run */
    int *out_base, n_slots;             /* first output slot of run r */
    int *slot_end;                      /* run index after which the slot's instance is freed */
    int *root;                          /* per value: storage root (in-place aliases resolved) */
    unsigned char *vflag;               /* per value: VF_PERSISTENT | VF_OUTPUT */
    int64_t *vbytes;                    /* per value: sched_value_bytes */
} lower_ctx;

enum { VF_PERSISTENT = 1, VF_OUTPUT = 2 };

static void ctx_free(lower_ctx *x) {
    SC_FREE_ALL(x->seg, x->phase, x->border, x->bstart, x->runs, x->out_base, x->slot_end, x->root, x->vflag,
                x->vbytes);
}

static bool slot_opens(const sc_node *n, int o) { return n->out[o] >= 0 && sched_alias_input(n, o) < 0; }

/* Runs of action i (as runs_build lays them out). */
static int action_runs(const lower_ctx *x, const sc_chain *c, const sc_chain_action *a) {
    if (a->kind == SC_CHAIN_FWD_ALL || a->kind == SC_CHAIN_FWD_DISCARD) return c->pos[a->seg + 1] - c->pos[a->seg];
    return a->kind == SC_CHAIN_BWD ? x->bstart[a->seg + 1] - x->bstart[a->seg] : 0;
}

/* out_base and n_slots for x->runs. */
static sc_status out_base_fill(lower_ctx *x) {
    x->out_base = malloc(sizeof(int) * ((size_t)x->R + 2));
    if (!x->out_base) return sc_errorf("out of memory lowering %d runs", x->R);
    int64_t slots = 0;
    for (int r = 0; r < x->R; r++) {
        x->out_base[r] = (int)slots;
        slots += x->g->nodes[x->runs[r]].n_out;
        if (slots > INT_MAX / 2) return sc_errorf("the schedule opens too many intervals for a plan");
    }
    x->out_base[x->R] = (int)slots;
    x->n_slots = (int)slots;
    return SC_OK;
}

static sc_status runs_build(lower_ctx *x, const sc_chain *c, const sc_chain_schedule *s) {
    int64_t R = 0;
    for (int i = 0; i < s->n; i++) R += action_runs(x, c, &s->a[i]);
    if (R > INT_MAX / 2) return sc_errorf("the schedule runs %lld nodes, more than a plan can hold", (long long)R);
    x->R = (int)R;
    x->runs = malloc(sizeof(int) * ((size_t)R + 1));
    if (!x->runs) return sc_errorf("out of memory lowering %lld runs", (long long)R);
    int r = 0;
    for (int i = 0; i < s->n; i++) {
        int q = s->a[i].seg;
        if (s->a[i].kind == SC_CHAIN_FWD_ALL || s->a[i].kind == SC_CHAIN_FWD_DISCARD) {
            for (int p = c->pos[q]; p < c->pos[q + 1]; p++, r++) x->runs[r] = p;
        } else if (s->a[i].kind == SC_CHAIN_BWD) {
            for (int b = x->bstart[q]; b < x->bstart[q + 1]; b++, r++) x->runs[r] = x->border[b];
        }
    }
    return out_base_fill(x);
}

/* Recomputations nothing reads are dropped: a forward node's second or later run whose outputs no
 * later run reads before they are made again, and that makes no graph output's last instance (and,
 * transitively, the runs that fed only such runs). A segment's recomputation reruns all of its
 * forward nodes, though its backward may read few of them: a tied LM head's transposed embedding
 * (154 MB for GPT-2) depends on a parameter alone, sits in the first segment, and would be rebuilt
 * there for nothing. Runs after reads_check (which maps runs to actions for its messages). */
static sc_status runs_prune_dead(lower_ctx *x) {
    const sc_graph *g = x->g;
    int R = x->R;
    bool *seen = calloc((size_t)g->n_nodes + 1, 1), *keep = malloc((size_t)R + 1);
    bool *read_later = calloc((size_t)g->n_values + 1, 1), *made_later = calloc((size_t)g->n_values + 1, 1);
    bool *first = malloc((size_t)R + 1);
    sc_status st = (!seen || !keep || !read_later || !made_later || !first) ? sc_errorf("out of memory lowering") : SC_OK;
    for (int r = 0; !st && r < R; r++) {
        first[r] = !seen[x->runs[r]];
        seen[x->runs[r]] = true;
    }
    int kept = 0;
    for (int r = R - 1; !st && r >= 0; r--) {
        const sc_node *n = &g->nodes[x->runs[r]];
        bool dead = x->runs[r] < x->F && !first[r];
        for (int o = 0; dead && o < n->n_out; o++) {
            int v = n->out[o];
            if (v >= 0 && (read_later[v] || ((x->vflag[v] & VF_OUTPUT) && !made_later[v]))) dead = false;
        }
        keep[r] = !dead;
        if (dead) continue;
        kept++;
        for (int o = 0; o < n->n_out; o++)
            if (n->out[o] >= 0) read_later[n->out[o]] = false, made_later[n->out[o]] = true;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0) read_later[x->root[n->in[j]]] = true;
    }
    if (!st && kept < R) {
        int w = 0;
        for (int r = 0; r < R; r++)
            if (keep[r]) x->runs[w++] = x->runs[r];
        x->R = w;
        int64_t slots = 0;
        for (int r = 0; r < x->R; r++) {
            x->out_base[r] = (int)slots;
            slots += g->nodes[x->runs[r]].n_out;
        }
        x->out_base[x->R] = (int)slots;
        x->n_slots = (int)slots;
    }
    SC_FREE_ALL(seen, keep, read_later, made_later, first);
    return st;
}

/* The action that run r belongs to (error messages only: a walk over the actions). */
static int run_action(const lower_ctx *x, const sc_chain *c, const sc_chain_schedule *s, int r) {
    for (int i = 0, end = 0; i < s->n; i++)
        if ((end += action_runs(x, c, &s->a[i])) > r) return i;
    return s->n - 1;
}

static const char *act_name(sc_chain_action_kind k) {
    return k == SC_CHAIN_FWD_ALL ? "FWD_ALL" : k == SC_CHAIN_FWD_DISCARD ? "FWD_DISCARD" : "BWD";
}

/* Every read of a computed value must follow a run producing it. */
static sc_status reads_check(lower_ctx *x, const sc_chain *c, const sc_chain_schedule *s) {
    const sc_graph *g = x->g;
    bool *made = calloc((size_t)g->n_values + 1, 1);
    if (!made) return sc_errorf("out of memory lowering");
    sc_status st = SC_OK;
    for (int r = 0; r < x->R && !st; r++) {
        const sc_node *n = &g->nodes[x->runs[r]];
        for (int j = 0; j < n->n_in && !st; j++) {
            int v = n->in[j] >= 0 ? x->root[n->in[j]] : -1;
            if (v >= 0 && !(x->vflag[v] & VF_PERSISTENT) && !made[v]) {
                int ai = run_action(x, c, s, r);
                sc_chain_action a = s->a[ai];
                st = sc_errorf("lowering: node '%s' (run by action %d, %s(%d)) reads '%s', which no earlier action "
                               "produced (its producer '%s' is in %s %d)",
                               n->name, ai, act_name(a.kind), a.seg, g->values[v].name,
                               g->nodes[g->values[v].producer].name,
                               g->values[v].producer < x->F ? "segment" : "backward phase",
                               x->phase[g->values[v].producer]);
            }
        }
        for (int o = 0; o < n->n_out; o++)
            if (slot_opens(n, o)) made[n->out[o]] = true;
    }
    free(made);
    return st;
}

/* Walks the runs backwards: an instance ends at the last read seen before its value is produced
 * again (later in time), or END_OF_PLAN for the last instance of a graph output. */
static sc_status ends_compute(lower_ctx *x) {
    const sc_graph *g = x->g;
    int *last = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    bool *later = calloc((size_t)g->n_values + 1, 1);
    x->slot_end = malloc(sizeof(int) * ((size_t)x->n_slots + 1));
    if (!last || !later || !x->slot_end) {
        free(last);
        free(later);
        return sc_errorf("out of memory lowering");
    }
    for (int v = 0; v < g->n_values; v++) last[v] = -1;
    for (int r = x->R - 1; r >= 0; r--) {
        const sc_node *n = &g->nodes[x->runs[r]];
        for (int o = 0; o < n->n_out; o++) {
            int v = n->out[o], slot = x->out_base[r] + o;
            x->slot_end[slot] = -1;
            if (!slot_opens(n, o)) continue;
            if ((x->vflag[v] & VF_OUTPUT) && !later[v]) x->slot_end[slot] = END_OF_PLAN;
            else x->slot_end[slot] = last[v] >= 0 ? last[v] : r;
            last[v] = -1;
            later[v] = true;
        }
        for (int j = 0; j < n->n_in; j++) {
            int v = n->in[j] >= 0 ? x->root[n->in[j]] : -1;
            if (v >= 0 && !(x->vflag[v] & VF_PERSISTENT) && last[v] < 0) last[v] = r;
        }
    }
    free(last);
    free(later);
    return SC_OK;
}

/* Frees are bucketed by the run they follow (a counting sort of the slots by end, filled from the
 * back so that each bucket lists its slots in ascending order and fcount[r + 1] ends up at bucket
 * r's start). slot_end is reused for each slot's interval once the slot is reached (a free only ever
 * names a slot opened at or before its run). */
static sc_status steps_emit(lower_ctx *x, sc_plan *plan) {
    const sc_graph *g = x->g;
    int n_fixed = 0, n_free = 0;
    for (int v = 0; v < g->n_values; v++) n_fixed += sched_needs_fixed(g, v);
    int *fcount = calloc((size_t)x->R + 2, sizeof(int));
    if (!fcount) return sc_errorf("out of memory lowering");
    for (int sl = 0; sl < x->n_slots; sl++)
        if (x->slot_end[sl] >= 0 && x->slot_end[sl] != END_OF_PLAN) fcount[x->slot_end[sl] + 1]++, n_free++;
    for (int r = 0; r < x->R; r++) fcount[r + 1] += fcount[r];
    fcount[x->R + 1] = n_free;
    int *flist = malloc(sizeof(int) * ((size_t)n_free + 1));
    plan->n_steps = x->R + n_free;
    plan->steps = malloc(sizeof(sc_step) * ((size_t)plan->n_steps + 1));
    plan->intervals = malloc(sizeof(sc_interval) * ((size_t)n_fixed + x->n_slots + 1));
    if (!flist || !plan->steps || !plan->intervals) {
        free(fcount);
        free(flist);
        return sc_errorf("out of memory for a plan of %d steps", plan->n_steps);
    }
    for (int sl = x->n_slots - 1; sl >= 0; sl--)
        if (x->slot_end[sl] >= 0 && x->slot_end[sl] != END_OF_PLAN) flist[--fcount[x->slot_end[sl] + 1]] = sl;
    int last_step = plan->n_steps - 1, ni = 0, ns = 0;
    for (int v = 0; v < g->n_values; v++)
        if (sched_needs_fixed(g, v))
            plan->intervals[ni++] = (sc_interval){v, 0, sched_value_bytes(g, v), 0, last_step};
    int *slot_iv = x->slot_end;
    for (int r = 0; r < x->R; r++) {
        const sc_node *n = &g->nodes[x->runs[r]];
        int first = -1;
        for (int o = 0; o < n->n_out; o++) {
            int sl = x->out_base[r] + o;
            if (!slot_opens(n, o)) continue;
            if (first < 0) first = ni;
            int end = x->slot_end[sl] == END_OF_PLAN ? last_step : -1;
            slot_iv[sl] = ni;
            plan->intervals[ni++] = (sc_interval){n->out[o], 0, x->vbytes[n->out[o]], ns, end};
        }
        plan->steps[ns++] = (sc_step){SC_STEP_RUN, x->runs[r], -1, -1, first, SC_DTYPE_UNDEFINED};
        for (int f = fcount[r + 1]; f < fcount[r + 2]; f++) {
            int iv = slot_iv[flist[f]];
            plan->intervals[iv].end = ns;
            plan->steps[ns++] = (sc_step){SC_STEP_FREE, -1, plan->intervals[iv].value, -1, -1, SC_DTYPE_UNDEFINED};
        }
    }
    SC_ASSERT(ns == plan->n_steps);
    plan->n_intervals = ni;
    plan->n_fixed_intervals = n_fixed;
    free(fcount);
    free(flist);
    return SC_OK;
}

static sc_status stats_fill(lower_ctx *x, const sc_cost_model *m, sc_plan *plan) {
    int n = x->g->n_nodes;
    double flops = 0, once = 0, time = 0;
    double *nf = malloc(sizeof(double) * ((size_t)n + 1)), *nt = malloc(sizeof(double) * ((size_t)n + 1));
    if (!nf || !nt) {
        free(nf);
        free(nt);
        return sc_errorf("out of memory lowering");
    }
    for (int i = 0; i < n; i++) {
        nf[i] = cost_node_flops(x->g, i);
        nt[i] = cost_node_time(m, x->g, i);
        once += nf[i];
    }
    /* summed in run order, as before, so the figures do not change */
    bool collectives = false;
    for (int r = 0; r < x->R; r++) {
        flops += nf[x->runs[r]];
        time += nt[x->runs[r]];
        collectives |= cost_node_comm_time(x->g, x->runs[r]) > 0;
    }
    sc_status st = SC_OK;
    if (collectives) { /* data parallel: the exchanges overlap backward (the timeline model) */
        sc_timeline tl;
        st = plan_timeline(x->g, plan, nt, m, false, &tl);
        if (!st) time = tl.total, plan->stall_time = tl.stall;
    }
    free(nf);
    free(nt);
    plan->flops = flops;
    plan->recompute_flops = flops - once > 0 ? flops - once : 0;
    plan->predicted_time = time;
    return st;
}

/* The per-value facts every lowering needs: flags, reserved sizes and storage roots. */
static sc_status ctx_values(lower_ctx *x, const sc_graph *g, int F) {
    x->g = g;
    x->F = F;
    x->root = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    x->vflag = malloc((size_t)g->n_values + 1);
    x->vbytes = malloc(sizeof(int64_t) * ((size_t)g->n_values + 1));
    if (!x->root || !x->vflag || !x->vbytes) return sc_errorf("out of memory lowering");
    for (int v = 0; v < g->n_values; v++) {
        x->vflag[v] = (unsigned char)((sched_persistent(g, v) ? VF_PERSISTENT : 0) | (g->values[v].is_output ? VF_OUTPUT : 0));
        x->vbytes[v] = sched_value_bytes(g, v);
    }
    for (int v = 0; v < g->n_values; v++) x->root[v] = v;
    for (int i = 0; i < g->n_nodes; i++) {
        const sc_node *n = &g->nodes[i];
        for (int o = 0; o < n->n_out; o++) {
            int a = n->out[o] >= 0 ? sched_alias_input(n, o) : -1;
            if (a < 0) continue;
            if (!sched_persistent(g, x->root[a]))
                return sc_errorf("not supported: node '%s' updates '%s' in place, which is not a parameter or state",
                                 n->name, g->values[a].name);
            x->root[n->out[o]] = x->root[a];
        }
    }
    return SC_OK;
}

static sc_status ctx_init(lower_ctx *x, const sc_graph *g, const sc_training_graph *tg, const sc_chain *c) {
    SC_TRY(ctx_values(x, g, tg->n_forward_nodes));
    x->k = c->k;
    x->seg = malloc(sizeof(int) * ((size_t)x->F + 1));
    x->phase = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    if (!x->seg || !x->phase) return sc_errorf("out of memory lowering");
    if (c->k < 1 || c->pos[0] != 0 || c->pos[c->k] != x->F)
        return sc_errorf("lowering: the chain does not cover the %d forward nodes", x->F);
    sched_segment_of_nodes(c, x->F, x->seg);
    SC_TRY(sched_phases(g, x->F, x->seg, c->k, x->phase));
    return sched_phase_buckets(g, x->F, x->phase, c->k, &x->border, &x->bstart);
}

/* The outputs of node runs, given as a list: what is left of lowering once the runs are known. */
static sc_status runs_finish(lower_ctx *x, const sc_cost_model *m, sc_plan *plan) {
    sc_status st = runs_prune_dead(x);
    if (!st) st = ends_compute(x);
    if (!st) st = steps_emit(x, plan);
    if (!st) st = stats_fill(x, m, plan);
    if (!st) {
        plan->offload = SC_OFFLOAD_NONE;
        plan->offload_window = -1;
    }
    return st;
}

sc_status plan_lower_runs(const sc_graph *g, int n_forward, const int *runs, int n_runs, const sc_cost_model *m,
                          sc_plan *plan) {
    lower_ctx x;
    memset(&x, 0, sizeof x);
    memset(plan, 0, sizeof *plan);
    sc_status st = ctx_values(&x, g, n_forward);
    if (!st) {
        x.R = n_runs;
        x.runs = malloc(sizeof(int) * ((size_t)n_runs + 1));
        st = x.runs ? SC_OK : sc_errorf("out of memory lowering %d runs", n_runs);
    }
    if (!st) {
        memcpy(x.runs, runs, sizeof(int) * (size_t)n_runs);
        st = out_base_fill(&x);
    }
    if (!st) st = runs_finish(&x, m, plan);
    ctx_free(&x);
    return st;
}

sc_status plan_lower(const sc_graph *g, const sc_training_graph *tg, const sc_chain *c, const sc_chain_schedule *s,
                     const sc_cost_model *m, sc_plan *plan) {
    SC_TRY(chain_schedule_validate(c, s));
    lower_ctx x;
    memset(&x, 0, sizeof x);
    sc_status st = ctx_init(&x, g, tg, c);
    if (!st) st = runs_build(&x, c, s);
    if (!st) st = reads_check(&x, c, s);
    if (!st) st = runs_finish(&x, m, plan);
    if (!st) plan->n_segments = c->k;
    ctx_free(&x);
    return st;
}
