/* Chain construction: cuts, cut positions and per-segment numbers (contract in segment.h), and the
 * backward phases shared with lower.c (sched_internal.h). */
#include "schedule/segment.h"

#include "core/free_all.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/sched_internal.h"

void sched_segment_of_nodes(const sc_chain *c, int n_fwd, int *seg) {
    for (int i = 0; i < c->k; i++)
        for (int p = c->pos[i]; p < c->pos[i + 1] && p < n_fwd; p++) seg[p] = i;
}

/* A node that may run late (graph_node_sinks: a large weight gradient made from small values) goes
 * to the latest phase among its readers', where autodiff's graph order already puts it just before
 * the first of them. Its inputs then stay live across the phases in between, which lowering's exact
 * liveness keeps; they are what the rule bounds. Readers come later in the graph, so a reverse walk
 * sees their final phases, and since they depend on the node their phases are at most its own. */
static void phases_sink(const sc_graph *g, int n_fwd, int *phase) {
    for (int i = g->n_nodes - 1; i >= n_fwd; i--) {
        const sc_node *n = &g->nodes[i];
        if (!graph_node_sinks(g, i)) continue;
        int ph = -1;
        bool fixed = false;
        for (int o = 0; o < n->n_out; o++) {
            int v = n->out[o];
            if (v < 0) continue;
            fixed |= g->values[v].is_output || sched_alias_input(n, o) >= 0;
            for (int c = 0; c < g->values[v].n_consumers; c++)
                if (phase[g->values[v].consumers[c]] > ph) ph = phase[g->values[v].consumers[c]];
        }
        if (!fixed && ph >= 0 && ph < phase[i]) phase[i] = ph;
    }
}

sc_status sched_phases(const sc_graph *g, int n_fwd, const int *seg, int k, int *phase) {
    int *minreader = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    int *maxfwd = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    if (!minreader || !maxfwd) {
        free(minreader);
        free(maxfwd);
        return sc_errorf("out of memory assigning backward phases");
    }
    for (int v = 0; v < g->n_values; v++) minreader[v] = INT_MAX, maxfwd[v] = -1;
    for (int i = 0; i < n_fwd; i++) {
        phase[i] = seg[i];
        const sc_node *n = &g->nodes[i];
        for (int j = 0; j < n->n_in; j++) {
            int v = n->in[j];
            if (v < 0) continue;
            if (minreader[v] > seg[i]) minreader[v] = seg[i];
            if (maxfwd[v] < seg[i]) maxfwd[v] = seg[i];
        }
    }
    for (int i = n_fwd; i < g->n_nodes; i++) {
        const sc_node *n = &g->nodes[i];
        /* forward value v is resident in phases [seg(producer), seg(last forward reader)]: held by
         * FWD_ALL of its own segment, then part of every cut up to its last forward reader */
        int lb = -1, ub = INT_MAX, dep = INT_MAX;
        for (int j = 0; j < n->n_in; j++) {
            int v = n->in[j];
            if (v < 0) continue;
            int p = g->values[v].producer;
            if (p < 0) continue;
            if (p < n_fwd) {
                int hi = maxfwd[v] > seg[p] ? maxfwd[v] : seg[p];
                if (seg[p] > lb) lb = seg[p];
                if (hi < ub) ub = hi;
            } else if (phase[p] < dep) {
                dep = phase[p];
            }
        }
        /* the highest phase where every forward input is resident; when there is none (inputs
         * from disjoint ranges), the segment of the latest one, keeping the earlier ones alive */
        int nat = lb < 0 ? -1 : ub >= lb ? ub : lb;
        /* an in-place update must follow every reader of the storage it overwrites, including
         * forward nodes that a later phase may still recompute */
        for (int o = 0; o < n->n_out; o++) {
            int a = n->out[o] >= 0 ? sched_alias_input(n, o) : -1;
            if (a >= 0 && minreader[a] < dep) dep = minreader[a];
        }
        int ph = nat >= 0 ? (dep < nat ? dep : nat) : (dep != INT_MAX ? dep : k - 1);
        phase[i] = ph;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0 && minreader[n->in[j]] > ph) minreader[n->in[j]] = ph;
    }
    phases_sink(g, n_fwd, phase);
    free(minreader);
    free(maxfwd);
    return SC_OK;
}

sc_status sched_phase_buckets(const sc_graph *g, int n_fwd, const int *phase, int k, int **order, int **start) {
    int nb = g->n_nodes - n_fwd;
    *order = malloc(sizeof(int) * ((size_t)nb + 1));
    *start = calloc((size_t)k + 2, sizeof(int));
    int *fill = calloc((size_t)k + 1, sizeof(int));
    if (!*order || !*start || !fill) {
        SC_FREE_ALL(*order, *start, fill);
        *order = *start = NULL;
        return sc_errorf("out of memory ordering backward phases");
    }
    for (int i = n_fwd; i < g->n_nodes; i++) (*start)[phase[i] + 1]++;
    for (int p = 0; p < k; p++) (*start)[p + 1] += (*start)[p];
    for (int i = n_fwd; i < g->n_nodes; i++) (*order)[(*start)[phase[i]] + fill[phase[i]]++] = i;
    free(fill);
    return SC_OK;
}

/* ---- cuts ---- */

typedef struct {
    const sc_graph *g;
    int F;             /* forward nodes */
    int64_t *vbytes;   /* per value: reserved bytes, 0 for persistent and alias values */
    int *last_fwd;     /* per value: last forward reader, -1 if none */
    bool *bwd_read;    /* per value: read by a non-forward node or a graph output */
    int64_t *cutb;     /* [F+1] cut bytes at every position */
    int64_t global_bytes; /* long-lived forward values and forward graph outputs, counted as fixed */
    double *cc;        /* [F+1] cumulative forward time */
} seg_ctx;

static sc_status ctx_init(seg_ctx *s, const sc_graph *g, int F, const sc_cost_model *m) {
    s->g = g;
    s->F = F;
    size_t nv = (size_t)g->n_values + 1;
    s->vbytes = calloc(nv, sizeof(int64_t));
    s->last_fwd = malloc(nv * sizeof(int));
    s->bwd_read = calloc(nv, sizeof(bool));
    s->cutb = calloc((size_t)F + 2, sizeof(int64_t));
    s->cc = calloc((size_t)F + 2, sizeof(double));
    if (!s->vbytes || !s->last_fwd || !s->bwd_read || !s->cutb || !s->cc) return sc_errorf("out of memory segmenting");
    for (int v = 0; v < g->n_values; v++) {
        s->last_fwd[v] = -1;
        s->bwd_read[v] = g->values[v].is_output;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const sc_node *n = &g->nodes[i];
        for (int j = 0; j < n->n_in; j++) {
            int v = n->in[j];
            if (v < 0) continue;
            if (i < F) s->last_fwd[v] = i;
            else s->bwd_read[v] = true;
        }
        for (int o = 0; o < n->n_out; o++) {
            int v = n->out[o];
            if (v < 0 || sched_alias_input(n, o) >= 0) continue;
            int64_t b = sched_value_bytes(g, v);
            if (b < 0) return sc_errorf("value '%s' (output of node '%s') has no static shape; bind dims first",
                                        g->values[v].name, n->name);
            s->vbytes[v] = b;
        }
    }
    /* Long-lived forward values (read across more than a third of the forward pass, e.g. GPT's
     * transposed tied embedding) and forward-made graph outputs no forward node reads (BatchNorm
     * running statistics, the loss: their last instance lives to the end of the step) are resident most of the step in any
     * schedule. Counting them once in fixed_bytes, not in every cut and held segment that contains
     * them, keeps the strategies' estimate close to the lowered plan. */
    for (int i = 0; i < F; i++) {
        const sc_node *n = &g->nodes[i];
        for (int o = 0; o < n->n_out; o++) {
            int v = n->out[o];
            if (v < 0 || !s->vbytes[v]) continue;
            bool spans = s->last_fwd[v] >= 0 && (int64_t)(s->last_fwd[v] - i) * 3 > F && F >= 12;
            if (spans || (g->values[v].is_output && s->last_fwd[v] < 0)) {
                s->global_bytes += s->vbytes[v];
                s->vbytes[v] = 0;
            }
        }
    }
    /* cut(p) holds v for producer(v) < p <= last_fwd(v): a difference array over positions */
    for (int i = 0; i < F; i++) {
        const sc_node *n = &g->nodes[i];
        for (int o = 0; o < n->n_out; o++) {
            int v = n->out[o];
            if (v < 0 || s->last_fwd[v] <= i) continue;
            s->cutb[i + 1] += s->vbytes[v];
            s->cutb[s->last_fwd[v] + 1] -= s->vbytes[v];
        }
    }
    for (int p = 1; p <= F; p++) s->cutb[p] += s->cutb[p - 1];
    /* a tiny per-node floor keeps cost strictly increasing, so zero-cost nodes still split evenly */
    for (int i = 0; i < F; i++) s->cc[i + 1] = s->cc[i] + cost_node_time(m, g, i) + 1e-12;
    return SC_OK;
}

static void ctx_free(seg_ctx *s) {
    SC_FREE_ALL(s->vbytes, s->last_fwd, s->bwd_read, s->cutb, s->cc);
}

/* First position p in [lo, hi] with cc[p] >= t (hi + 1 if none). */
static int cc_lower_bound(const double *cc, int lo, int hi, double t) {
    int a = lo, b = hi + 1;
    while (a < b) {
        int mid = a + (b - a) / 2;
        if (cc[mid] < t) a = mid + 1;
        else b = mid;
    }
    return a;
}

static void positions_choose(const seg_ctx *s, int k, int *pos) {
    int F = s->F;
    double total = s->cc[F], share = total / k;
    pos[0] = 0;
    pos[k] = F;
    for (int j = 1; j < k; j++) {
        int lo_ok = pos[j - 1] + 1, hi_ok = F - (k - j); /* leave one node for each later segment */
        double ideal = share * j;
        int a = cc_lower_bound(s->cc, lo_ok, hi_ok, ideal - 0.3 * share);
        int b = cc_lower_bound(s->cc, lo_ok, hi_ok, ideal + 0.3 * share);
        if (b > hi_ok) b = hi_ok;
        if (a > b) a = b;
        int best = a;
        for (int p = a; p <= b; p++) {
            double dp = s->cc[p] - ideal, db = s->cc[best] - ideal;
            if (s->cutb[p] < s->cutb[best] || (s->cutb[p] == s->cutb[best] && (dp < 0 ? -dp : dp) < (db < 0 ? -db : db)))
                best = p;
        }
        pos[j] = best;
    }
}

/* fwd_peak: the live set of values produced inside a segment, each freed after its last forward
 * read (FWD_DISCARD), maximised over the segment's nodes. fwd_all: values it produces that the
 * backward pass reads. */
static void forward_numbers(const seg_ctx *s, sc_chain *c) {
    const sc_graph *g = s->g;
    for (int i = 0; i < c->k; i++) {
        int64_t live = 0, peak = 0, all = 0;
        for (int p = c->pos[i]; p < c->pos[i + 1]; p++) {
            const sc_node *n = &g->nodes[p];
            for (int o = 0; o < n->n_out; o++)
                if (n->out[o] >= 0) {
                    live += s->vbytes[n->out[o]];
                    if (s->bwd_read[n->out[o]]) all += s->vbytes[n->out[o]];
                }
            if (live > peak) peak = live;
            for (int j = 0; j < n->n_in; j++) {
                int v = n->in[j];
                if (v >= 0 && s->last_fwd[v] == p && g->values[v].producer >= c->pos[i]) live -= s->vbytes[v];
            }
            for (int o = 0; o < n->n_out; o++)
                if (n->out[o] >= 0 && s->last_fwd[n->out[o]] < 0) live -= s->vbytes[n->out[o]];
        }
        c->fwd_peak_bytes[i] = peak;
        c->fwd_all_bytes[i] = all;
        c->fwd_time[i] = s->cc[c->pos[i + 1]] - s->cc[c->pos[i]];
        c->cut_bytes[i] = s->cutb[c->pos[i]];
    }
    c->cut_bytes[c->k] = 0; /* after the loss head nothing forward is left to run */
}

/* Backward phases run k-1 .. 0: the live set of non-forward values along that order. */
static sc_status backward_numbers(const seg_ctx *s, const sc_cost_model *m, sc_chain *c) {
    const sc_graph *g = s->g;
    int F = s->F, k = c->k;
    int *seg = malloc(sizeof(int) * ((size_t)F + 1));
    int *phase = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    int *last = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    int *order = NULL, *start = NULL;
    sc_status st = (!seg || !phase || !last) ? sc_errorf("out of memory segmenting") : SC_OK;
    if (!st) {
        sched_segment_of_nodes(c, F, seg);
        st = sched_phases(g, F, seg, k, phase);
    }
    if (!st) st = sched_phase_buckets(g, F, phase, k, &order, &start);
    if (!st) {
        int nb = g->n_nodes - F, t = 0;
        for (int v = 0; v < g->n_values; v++) last[v] = -1;
        for (int p = k - 1; p >= 0; p--) /* execution position of node order[...] */
            for (int x = start[p]; x < start[p + 1]; x++, t++) {
                const sc_node *n = &g->nodes[order[x]];
                for (int j = 0; j < n->n_in; j++)
                    if (n->in[j] >= 0) last[n->in[j]] = t;
            }
        (void)nb;
        int64_t live = 0;
        t = 0;
        for (int p = k - 1; p >= 0; p--) {
            int64_t peak = 0;
            double time = 0;
            for (int x = start[p]; x < start[p + 1]; x++, t++) {
                const sc_node *n = &g->nodes[order[x]];
                time += cost_node_time(m, g, order[x]);
                for (int o = 0; o < n->n_out; o++)
                    if (n->out[o] >= 0) live += s->vbytes[n->out[o]];
                if (live > peak) peak = live;
                for (int j = 0; j < n->n_in; j++) {
                    int v = n->in[j];
                    if (v >= 0 && last[v] == t && g->values[v].producer >= F && !g->values[v].is_output) {
                        live -= s->vbytes[v];
                        last[v] = -2; /* a node reading v twice frees it once */
                    }
                }
                for (int o = 0; o < n->n_out; o++) {
                    int v = n->out[o];
                    if (v >= 0 && last[v] == -1 && !g->values[v].is_output) live -= s->vbytes[v];
                }
            }
            c->bwd_peak_bytes[p] = peak;
            c->bwd_time[p] = time;
        }
    }
    SC_FREE_ALL(seg, phase, last, order, start);
    return st;
}

sc_status chain_build(const sc_graph *g, const sc_training_graph *tg, const sc_cost_model *m, int target_segments,
                      sc_chain *c) {
    memset(c, 0, sizeof *c);
    int F = tg->n_forward_nodes;
    if (F <= 0 || F > g->n_nodes) return sc_errorf("training graph has %d forward nodes of %d", F, g->n_nodes);
    sc_cost_model dm;
    if (!m) {
        cost_model_default(&dm, 0, NULL);
        m = &dm;
    }
    int k = target_segments < 1 ? 1 : target_segments > F ? F : target_segments;
    seg_ctx s = {0};
    sc_status st = ctx_init(&s, g, F, m);
    if (!st && !chain_alloc(c, k)) st = sc_errorf("out of memory building the chain");
    if (!st) {
        positions_choose(&s, k, c->pos);
        forward_numbers(&s, c);
        for (int v = 0; v < g->n_values; v++)
            if (sched_needs_fixed(g, v)) {
                int64_t b = sched_value_bytes(g, v);
                if (b < 0) {
                    st = sc_errorf("value '%s' has no static shape; bind dims first", g->values[v].name);
                    break;
                }
                c->fixed_bytes += b;
            }
        c->fixed_bytes += s.global_bytes;
    }
    if (!st) st = backward_numbers(&s, m, c);
    ctx_free(&s);
    if (st) chain_free(c);
    return st;
}
