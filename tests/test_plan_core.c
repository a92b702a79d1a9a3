/* The planning core (schedule/) on the small training graphs of plan_test_graphs.h:
 *   - chain cuts against values worked out by hand from each graph's forward order;
 *   - chain_schedule_validate rejects a schedule that forgets to keep a cut;
 *   - every lowered plan (none, sqrt and dc at every-node segmentation; none, sqrt at 2 segments) is
 *     valid: every read resident, every interval opened once and freed once (graph outputs live to
 *     the end), every forward node run, every other node run exactly once, in-place updates after
 *     every read of what they overwrite;
 *   - static offsets: intervals that overlap in time never overlap in the arena (checked pairwise),
 *     64-byte aligned, inside [fixed_bytes, arena_bytes);
 *   - the `none` plan runs every node once in graph order;
 *   - backward phases (sched_phases) on a tied-weight graph: a backward node that reads a forward
 *     value made early and read again late (GPT's transposed embedding) runs in the late segment's
 *     phase, not in segment 0's, which would hold every gradient and activation to the end;
 *   - plan_build's infeasible-budget error names a budget that then plans (exact, not estimated);
 *   - calibrated node times (sc_plan_options.node_time, `--calibrate`) drive the choice: on a chain of
 *     six Gemm+Relu layers, at every budget where the plan made with equal node times recomputes a
 *     forward node, making that node 10^4 times as expensive in the calibration data must give a plan
 *     that recomputes it fewer times at some budget, and every calibrated plan predicts exactly the
 *     sum of its RUNs' calibrated times.
 * Fails through the exit code.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_test_graphs.h"
#include "schedule/plan.h"
#include "schedule/sched_internal.h"
#include "schedule/segment.h"
#include "tests/check.h"

static int takers; /* interval pairs that share a block (plan_alloc's in-place outputs), checked */

static int64_t al(int64_t elems) { return (elems * 4 + 63) / 64 * 64; }

/* Cut bytes at positions 1..n_expect when every forward node is its own segment. */
static void check_cuts(pt_kind kind, const int64_t *want, int n_want) {
    pt_model m;
    pt_build(&m, kind);
    sc_chain c;
    sc_status st = chain_build(&m.g, &m.tg, NULL, m.tg.n_forward_nodes, &c);
    CHECK(!st, "%s: chain_build: %s", pt_kind_name(kind), st ? sc_status_message(st) : "");
    if (!st) {
        CHECK(c.k == m.tg.n_forward_nodes, "%s: k = %d, want %d", pt_kind_name(kind), c.k, m.tg.n_forward_nodes);
        for (int p = 0; p <= n_want && p <= c.k; p++) {
            CHECK(c.pos[p] == p, "%s: pos[%d] = %d", pt_kind_name(kind), p, c.pos[p]);
            int64_t w = p == 0 ? 0 : want[p - 1];
            CHECK(c.cut_bytes[p] == w, "%s: cut %d has %lld bytes, want %lld", pt_kind_name(kind), p,
                  (long long)c.cut_bytes[p], (long long)w);
        }
        /* fixed: x, labels, lr, step? and params + momentum buffers: at least params twice */
        CHECK(c.fixed_bytes > 0, "%s: no fixed bytes", pt_kind_name(kind));
        /* two segments: the cut lands somewhere inside, with the smallest cut in its window */
        chain_free(&c);
        st = chain_build(&m.g, &m.tg, NULL, 2, &c);
        CHECK(!st && c.k == 2 && c.pos[1] > 0 && c.pos[1] < m.tg.n_forward_nodes, "%s: two segments",
              pt_kind_name(kind));
        if (!st) chain_free(&c);
    }
    sc_status_free(st);
    graph_free(&m.g);
}

static void test_cuts(void) {
    /* mlp: h1 [8,16] | r1 | h2 [8,12] | r2 | logits [8,3]; each cut is the one tensor between */
    const int64_t mlp[] = {al(8 * 16), al(8 * 16), al(8 * 12), al(8 * 12), al(8 * 3)};
    check_cuts(PT_MLP, mlp, 5);
    /* residual: g0 | h | g1 (h also live for the Add) | r1 (+ h) | s | logits */
    const int64_t res[] = {al(128), al(128), 2 * al(128), 2 * al(128), al(128), al(24)};
    check_cuts(PT_RESIDUAL, res, 6);
    /* dense: f0 | g1 (+ f0) | f1 (+ f0) | cat1 | g2 (+ cat1) | f2 (+ cat1) | cat2 | logits */
    const int64_t dense[] = {al(64), 2 * al(64), 2 * al(64), al(128), al(128) + al(64), al(128) + al(64), al(192),
                             al(24)};
    check_cuts(PT_DENSE, dense, 8);
}

static void test_validate(void) {
    pt_model m;
    pt_build(&m, PT_MLP);
    sc_chain c;
    sc_status st = chain_build(&m.g, &m.tg, NULL, 4, &c);
    SC_ASSERT(!st);
    sc_chain_schedule s = {0};
    /* a sweep that keeps nothing, then reverses from cut 2 */
    chain_schedule_push(&s, SC_CHAIN_FWD_DISCARD, 0);
    chain_schedule_push(&s, SC_CHAIN_FWD_DISCARD, 1);
    chain_schedule_push(&s, SC_CHAIN_FWD_DISCARD, 2);
    chain_schedule_push(&s, SC_CHAIN_FWD_ALL, 3);
    chain_schedule_push(&s, SC_CHAIN_BWD, 3);
    chain_schedule_push(&s, SC_CHAIN_FWD_ALL, 2);
    st = chain_schedule_validate(&c, &s);
    CHECK(st && strstr(sc_status_message(st), "FWD_ALL(2)"), "forgotten KEEP not reported: %s",
          st ? sc_status_message(st) : "accepted");
    sc_status_free(st);
    chain_schedule_free(&s);
    chain_free(&c);
    graph_free(&m.g);
}

/* Walks the plan like an executor, checking residency and interval bookkeeping. */

/* Interval j took interval i's block (plan_alloc's in-place rule): same offset and size, j opened
 * by a RUN of an op whose output (j's value) may write over that input (sc_op_donor_pair_ok), which reads i's value,
 * and i ends before the next RUN with no transfer of its value in between. */
static bool taker_ok(const sc_graph *g, const sc_plan *p, int i, int j) {
    const sc_interval *a = &p->intervals[i], *b = &p->intervals[j];
    if (a->offset != b->offset || a->bytes != b->bytes || b->begin < 0 || a->end < b->begin) return false;
    const sc_step *run = &p->steps[b->begin];
    if (run->kind != SC_STEP_RUN) return false;
    const sc_node *n = &g->nodes[run->node];
    bool reads = false;
    for (int o = 0; o < n->n_out; o++)
        for (int k = 0; k < n->n_in; k++)
            reads |= n->out[o] == b->value && n->in[k] == a->value && sc_op_donor_pair_ok(n->op, o, k);
    for (int t = b->begin + 1; t <= a->end; t++) {
        const sc_step *u = &p->steps[t];
        if (u->kind == SC_STEP_RUN || (u->kind != SC_STEP_FREE && u->kind != SC_STEP_HOST_RUN && u->value == a->value))
            return false;
    }
    return reads;
}

static void check_plan(const char *what, const pt_model *m, const sc_plan *p) {
    const sc_graph *g = &m->g;
    int F = m->tg.n_forward_nodes;
    int *cur = malloc(sizeof(int) * (size_t)g->n_values), *root = malloc(sizeof(int) * (size_t)g->n_values);
    int *runs = calloc((size_t)g->n_nodes, sizeof(int));
    int *opened = calloc((size_t)p->n_intervals, sizeof(int)), *freed = calloc((size_t)p->n_intervals, sizeof(int));
    for (int v = 0; v < g->n_values; v++) cur[v] = -1, root[v] = v;
    for (int i = 0; i < g->n_nodes; i++)
        for (int o = 0; o < g->nodes[i].n_out; o++) {
            int a = sc_op_inplace_input(g->nodes[i].op, o);
            if (a >= 0 && g->nodes[i].out[o] >= 0) root[g->nodes[i].out[o]] = g->nodes[i].in[a];
        }
    int nfix = 0;
    for (; nfix < p->n_intervals && g->values[p->intervals[nfix].value].producer < 0; nfix++) {
        cur[p->intervals[nfix].value] = nfix;
        opened[nfix] = 1;
    }
    int bad = 0;
    for (int s = 0; s < p->n_steps && bad < 5; s++) {
        const sc_step *sp = &p->steps[s];
        if (sp->kind == SC_STEP_FREE) {
            int iv = cur[sp->value];
            if (iv < 0) CHECK(++bad < 0, "%s: step %d frees '%s', not resident", what, s, g->values[sp->value].name);
            else {
                freed[iv]++;
                CHECK(p->intervals[iv].end == s, "%s: interval %d ends at %d, freed at %d", what, iv, p->intervals[iv].end, s);
                cur[sp->value] = -1;
            }
            continue;
        }
        CHECK(sp->kind == SC_STEP_RUN, "%s: step %d has kind %d", what, s, (int)sp->kind);
        const sc_node *n = &g->nodes[sp->node];
        runs[sp->node]++;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0 && cur[root[n->in[j]]] < 0) {
                bad++;
                CHECK(false, "%s: step %d (node '%s') reads '%s', not resident", what, s, n->name, g->values[n->in[j]].name);
            }
        int next = sp->interval;
        for (int o = 0; o < n->n_out; o++) {
            int v = n->out[o];
            if (v < 0 || root[v] != v) continue;
            if (next < 0 || next >= p->n_intervals || p->intervals[next].value != v || p->intervals[next].begin != s) {
                bad++;
                CHECK(false, "%s: step %d does not open an interval for '%s'", what, s, g->values[v].name);
                continue;
            }
            opened[next]++;
            cur[v] = next++;
        }
        /* an in-place update must come after every run of every node reading the old storage */
        for (int o = 0; o < n->n_out; o++)
            if (n->out[o] >= 0 && root[n->out[o]] != n->out[o])
                for (int t = s + 1; t < p->n_steps; t++)
                    if (p->steps[t].kind == SC_STEP_RUN) {
                        const sc_node *r = &g->nodes[p->steps[t].node];
                        for (int j = 0; j < r->n_in; j++)
                            if (r->in[j] == root[n->out[o]])
                                CHECK(false, "%s: '%s' reads '%s' after its update '%s'", what, r->name,
                                      g->values[r->in[j]].name, n->name);
                    }
    }
    for (int i = 0; i < p->n_intervals; i++) {
        CHECK(opened[i] == 1, "%s: interval %d opened %d times", what, i, opened[i]);
        bool lives = i < nfix || (g->values[p->intervals[i].value].is_output && p->intervals[i].end == p->n_steps - 1);
        CHECK(freed[i] == (lives ? 0 : 1), "%s: interval %d ('%s') freed %d times", what, i,
              g->values[p->intervals[i].value].name, freed[i]);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        if (i < F) CHECK(runs[i] >= 1, "%s: forward node %d never runs", what, i);
        else CHECK(runs[i] == 1, "%s: node '%s' runs %d times", what, g->nodes[i].name, runs[i]);
    }
    /* placement */
    for (int i = 0; i < p->n_intervals; i++) {
        const sc_interval *a = &p->intervals[i];
        CHECK(a->offset % 64 == 0 && a->offset + a->bytes <= p->arena_bytes, "%s: interval %d at %lld+%lld", what, i,
              (long long)a->offset, (long long)a->bytes);
        CHECK(a->bytes >= sc_desc_bytes(&g->values[a->value].desc), "%s: interval %d too small", what, i);
        if (i >= nfix) CHECK(a->offset >= p->fixed_bytes, "%s: interval %d inside the fixed region", what, i);
        for (int j = i + 1; j < p->n_intervals; j++) {
            const sc_interval *b = &p->intervals[j];
            bool in_time = a->begin <= b->end && b->begin <= a->end;
            bool in_space = a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
            if (in_time && in_space && p->iv_from && p->iv_from[j] == i && taker_ok(g, p, i, j)) {
                takers++;
                continue;
            }
            if (in_time && in_space) {
                CHECK(false, "%s: intervals %d ('%s') and %d ('%s') overlap", what, i, g->values[a->value].name, j,
                      g->values[b->value].name);
                break;
            }
        }
    }
    free(cur);
    free(root);
    free(runs);
    free(opened);
    free(freed);
}

static void test_plans(pt_kind kind) {
    pt_model m;
    pt_build(&m, kind);
    int F = m.tg.n_forward_nodes;
    struct {
        sc_strategy s;
        int segments;
    } cases[] = {{SC_STRATEGY_NONE, 0}, {SC_STRATEGY_SQRT, 0}, {SC_STRATEGY_SQRT, 2}, {SC_STRATEGY_DC, 0},
                 {SC_STRATEGY_DC, 3}, {SC_STRATEGY_OPTIMAL, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        sc_plan_options o = {0};
        o.strategy = cases[c].s;
        o.segments = cases[c].segments ? cases[c].segments : F;
        sc_plan p;
        char what[128];
        snprintf(what, sizeof what, "%s/%s/%d segments", pt_kind_name(kind), plan_strategy_name(o.strategy), o.segments);
        sc_status st = plan_build(&m.g, &m.tg, &o, &p);
        CHECK(!st, "%s: plan_build: %s", what, st ? sc_status_message(st) : "");
        sc_status_free(st);
        if (st) continue;
        check_plan(what, &m, &p);
        if (o.strategy == SC_STRATEGY_NONE) {
            int r = 0;
            for (int s = 0; s < p.n_steps; s++)
                if (p.steps[s].kind == SC_STEP_RUN) {
                    CHECK(p.steps[s].node == r, "%s: run %d is node %d", what, r, p.steps[s].node);
                    r++;
                }
            CHECK(r == m.g.n_nodes && p.recompute_flops == 0, "%s: %d runs of %d nodes", what, r, m.g.n_nodes);
        }
        printf("%-28s steps %5d  intervals %4d  fixed %6lld  arena %6lld  recompute %.0f flops\n", what, p.n_steps,
               p.n_intervals, (long long)p.fixed_bytes, (long long)p.arena_bytes, p.recompute_flops);
        plan_free(&p);
    }
    graph_free(&m.g);
}

/* plan_refine (schedule/refine.c) on sqrt's plan with 3 segments (it recomputes on every graph):
 * under a budget of the larger of its arena and none's, the refined plan is valid (check_plan), fits
 * the budget, and is faster by dropping recomputations when it says it kept values; under a budget
 * of its own arena it still fits. */
static void test_refine(pt_kind kind) {
    pt_model m;
    pt_build(&m, kind);
    sc_plan_options o = {0};
    sc_plan none, p;
    sc_status st = plan_build(&m.g, &m.tg, &o, &none);
    SC_ASSERT(!st);
    o.strategy = SC_STRATEGY_SQRT;
    o.segments = 3;
    for (int tight = 0; tight < 2; tight++) {
        st = plan_build(&m.g, &m.tg, &o, &p); /* no budget: not refined */
        SC_ASSERT(!st);
        CHECK(p.refined_keeps == 0, "%s: a plan without a budget was refined", pt_kind_name(kind));
        int64_t budget = tight || p.arena_bytes > none.arena_bytes ? p.arena_bytes : none.arena_bytes;
        double time = p.predicted_time, recompute = p.recompute_flops;
        sc_cost_model cm;
        cost_model_default(&cm, 0, NULL);
        st = plan_refine(&m.g, m.tg.n_forward_nodes, &cm, budget, &p);
        CHECK(!st, "%s: plan_refine: %s", pt_kind_name(kind), st ? sc_status_message(st) : "");
        sc_status_free(st);
        char what[96];
        snprintf(what, sizeof what, "%s/sqrt/3 refined under %lld", pt_kind_name(kind), (long long)budget);
        check_plan(what, &m, &p);
        CHECK(p.arena_bytes <= budget, "%s: arena %lld", what, (long long)p.arena_bytes);
        CHECK(p.refined_keeps == 0 ? p.predicted_time == time
                                   : p.predicted_time < time && p.recompute_flops < recompute,
              "%s: %d kept, time %g -> %g, recompute %g -> %g", what, p.refined_keeps, time, p.predicted_time,
              recompute, p.recompute_flops);
        CHECK(tight || p.refined_keeps > 0, "%s: nothing kept with %lld bytes of room", what,
              (long long)(budget - p.arena_bytes));
        printf("%-36s %d kept, recompute %.0f -> %.0f flops, arena %lld\n", what, p.refined_keeps, recompute,
               p.recompute_flops, (long long)p.arena_bytes);
        plan_free(&p);
    }
    plan_free(&none);
    graph_free(&m.g);
}

/* x -> wr = Relu(W3) (node 0, read again by node 5) -> Gemm -> Relu -> Gemm -> Relu -> Gemm(., wr^T). */
static void tied_build(pt_model *m) {
    sc_graph *g = &m->g;
    graph_init(g);
    pt_rng = 77;
    int x = m->x = pt_input(g, "x", PT_N, PT_IN);
    int w1 = pt_param(g, "W1", PT_H, PT_IN, 0.5), w2 = pt_param(g, "W2", PT_H2, PT_H, 0.5);
    int w3 = pt_param(g, "W3", PT_C, PT_H2, 0.5);
    m->act[0] = pt_relu(g, w3, "wr");
    m->act[1] = pt_gemm(g, x, w1, -1, "h1");
    m->act[2] = pt_relu(g, m->act[1], "r1");
    m->act[3] = pt_gemm(g, m->act[2], w2, -1, "h2");
    m->act[4] = pt_relu(g, m->act[3], "r2");
    m->act[5] = pt_gemm(g, m->act[4], m->act[0], -1, "logits");
    pt_output(g, m->act[5]);
    sc_train_options o;
    sc_train_options_default(&o);
    o.optim = SC_OPTIM_SGD;
    o.momentum = 0.9f;
    sc_status st = graph_link(g);
    if (!st) st = autodiff_build_training(g, &o, &m->tg);
    if (st) printf("building tied: %s\n", sc_status_message(st));
    SC_ASSERT(!st);
}

static void test_tied_phases(void) {
    pt_model m;
    tied_build(&m);
    const sc_graph *g = &m.g;
    int F = m.tg.n_forward_nodes, k = F;
    sc_chain c;
    sc_status st = chain_build(g, &m.tg, NULL, k, &c);
    CHECK(!st, "tied: chain_build: %s", st ? sc_status_message(st) : "");
    sc_status_free(st);
    if (st) return;
    int *seg = malloc(sizeof(int) * (size_t)F), *phase = malloc(sizeof(int) * (size_t)g->n_nodes);
    SC_ASSERT(seg && phase);
    sched_segment_of_nodes(&c, F, seg);
    st = sched_phases(g, F, seg, k, phase);
    CHECK(!st, "tied: sched_phases failed");
    sc_status_free(st);
    int logits = g->values[m.act[5]].producer, readers = 0;
    for (int i = F; i < g->n_nodes; i++) {
        const sc_node *n = &g->nodes[i];
        bool reads_wr = false, reads_grad = false;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0) {
                reads_wr |= n->in[j] == m.act[0];
                reads_grad |= g->values[n->in[j]].producer >= F;
            }
        if (!reads_wr || !reads_grad) continue;
        readers++; /* the gradient through logits = r2 @ wr^T: dr2 = dlogits @ wr */
        CHECK(phase[i] == seg[logits], "tied: backward node '%s' reads wr (segment %d, last read in segment %d) and "
              "a gradient, but runs in phase %d", n->name, seg[g->values[m.act[0]].producer], seg[logits], phase[i]);
    }
    CHECK(readers > 0, "tied: no backward node reads wr and a gradient");
    free(seg);
    free(phase);
    chain_free(&c);
    graph_free(&m.g);
}

/* A tied embedding whose head gradient sinks (graph_node_sinks): tokens -> h = Gather(E) -> Relu ->
 * Relu -> logits = Gemm(., E, transB), E [12, 16] for 3 tokens, so dE's head part (192 floats) is made
 * from less than half as much (dlogits 36 + the rows 48). It must run in the phase of the GatherGrad
 * that adds the lookup's rows into it (segment 0's), not at the start of backward with dlogits, and
 * every strategy's plan must still be valid (check_plan). */
static void test_sunk_phase(void) {
    pt_model m;
    sc_graph *g = &m.g;
    graph_init(g);
    pt_rng = 5;
    sc_status st = SC_OK;
    sc_desc td = sc_desc_make(SC_I64, 1, (const int64_t[]){3});
    int tok = m.x = graph_add_value(g, "tokens", SC_VALUE_INPUT, &td, &st);
    g->inputs = sc_arena_alloc_array(&g->arena, 1, sizeof(int));
    g->inputs[0] = tok;
    g->n_inputs = 1;
    int e = pt_param(g, "E", 12, 16, 0.5);
    sc_attrs ax;
    memset(&ax, 0, sizeof ax);
    int h = pt_node(g, SC_OP_GATHER, &ax, (const int[]){e, tok}, 2, "h");
    int r = pt_relu(g, pt_relu(g, h, "r1"), "r2");
    int logits = pt_gemm(g, r, e, -1, "logits");
    pt_output(g, logits);
    sc_train_options o;
    sc_train_options_default(&o);
    st = graph_link(g);
    if (!st) st = autodiff_build_training(g, &o, &m.tg);
    CHECK(!st, "sunk: build: %s", st ? sc_status_message(st) : "");
    sc_status_free(st);
    if (st) return;
    int F = m.tg.n_forward_nodes, gg = -1;
    for (int i = F; i < g->n_nodes; i++)
        if (g->nodes[i].op == SC_OP_GATHER_GRAD) gg = i;
    int head = gg >= 0 && g->nodes[gg].n_in > 3 && g->nodes[gg].in[3] >= 0 ? g->values[g->nodes[gg].in[3]].producer : -1;
    CHECK(head >= F && graph_node_sinks(g, head) && head == gg - 1, "sunk: the head's dE (node %d) is not made just before "
          "the GatherGrad (node %d) adding into it", head, gg);
    sc_chain c;
    st = head >= 0 ? chain_build(g, &m.tg, NULL, F, &c) : sc_errorf("no head gradient");
    CHECK(!st, "sunk: chain_build: %s", st ? sc_status_message(st) : "");
    sc_status_free(st);
    if (st) return;
    int *seg = malloc(sizeof(int) * (size_t)F), *phase = malloc(sizeof(int) * (size_t)g->n_nodes);
    SC_ASSERT(seg && phase);
    sched_segment_of_nodes(&c, F, seg);
    st = sched_phases(g, F, seg, F, phase);
    CHECK(!st && phase[head] == phase[gg] && phase[gg] < seg[g->values[logits].producer],
          "sunk: head dE in phase %d, its GatherGrad in %d, logits in segment %d", phase[head], phase[gg],
          seg[g->values[logits].producer]);
    sc_status_free(st);
    sc_strategy strategies[] = {SC_STRATEGY_NONE, SC_STRATEGY_SQRT, SC_STRATEGY_DC, SC_STRATEGY_OPTIMAL};
    for (int k = 0; k < 4; k++) {
        sc_plan_options po = {0};
        po.strategy = strategies[k];
        po.segments = F;
        sc_plan p;
        st = plan_build(g, &m.tg, &po, &p);
        CHECK(!st, "sunk/%s: plan_build: %s", plan_strategy_name(po.strategy), st ? sc_status_message(st) : "");
        if (!st) {
            check_plan(plan_strategy_name(po.strategy), &m, &p);
            plan_free(&p);
        }
        sc_status_free(st);
    }
    free(seg);
    free(phase);
    chain_free(&c);
    graph_free(g);
}

/* A budget between fixed and the none peak that dc cannot meet: the error's named budget plans. */
static void test_named_minimum(pt_kind kind) {
    pt_model m;
    pt_build(&m, kind);
    sc_plan_options o = {0};
    o.strategy = SC_STRATEGY_NONE;
    sc_plan none;
    sc_status st = plan_build(&m.g, &m.tg, &o, &none);
    SC_ASSERT(!st);
    sc_strategy list[] = {SC_STRATEGY_SQRT, SC_STRATEGY_DC, SC_STRATEGY_OPTIMAL, SC_STRATEGY_AUTO};
    for (size_t i = 0; i < sizeof list / sizeof *list; i++) {
        o.strategy = list[i];
        o.segments = m.tg.n_forward_nodes;
        o.budget = none.fixed_bytes + 64;
        sc_plan p;
        st = plan_build(&m.g, &m.tg, &o, &p);
        CHECK(st, "%s/%s: a budget of fixed + 64 bytes planned", pt_kind_name(kind), plan_strategy_name(list[i]));
        if (!st) {
            plan_free(&p);
            continue;
        }
        const char *msg = sc_status_message(st), *at = strstr(msg, "smallest feasible budget is ");
        long long named = at ? atoll(at + strlen("smallest feasible budget is ")) : 0;
        CHECK(named > o.budget, "%s/%s: no smallest budget in: %s", pt_kind_name(kind), plan_strategy_name(list[i]), msg);
        sc_status_free(st);
        o.budget = named;
        st = plan_build(&m.g, &m.tg, &o, &p);
        CHECK(!st, "%s/%s: the named smallest budget %lld does not plan: %s", pt_kind_name(kind),
              plan_strategy_name(list[i]), named, st ? sc_status_message(st) : "");
        if (!st) {
            CHECK(p.arena_bytes <= named, "%s/%s: plan at the named budget has arena %lld", pt_kind_name(kind),
                  plan_strategy_name(list[i]), (long long)p.arena_bytes);
            plan_free(&p);
        }
        sc_status_free(st);
    }
    plan_free(&none);
    graph_free(&m.g);
}

/* Forward runs of node n in p. */
static int runs_of(const sc_plan *p, int n) {
    int r = 0;
    for (int s = 0; s < p->n_steps; s++) r += p->steps[s].kind == SC_STEP_RUN && p->steps[s].node == n;
    return r;
}

static double calibrated_sum(const sc_plan *p, const double *t) {
    double sum = 0;
    for (int s = 0; s < p->n_steps; s++)
        if (p->steps[s].kind == SC_STEP_RUN) sum += t[p->steps[s].node];
    return sum;
}

/* x -> (Gemm -> Relu) x 6, all [8,16]: a chain long enough for several recomputation choices. */
static void deep_build(pt_model *m) {
    sc_graph *g = &m->g;
    graph_init(g);
    pt_rng = 4321;
    int h = m->x = pt_input(g, "x", PT_N, PT_IN);
    char name[32];
    for (int l = 0; l < 6; l++) {
        snprintf(name, sizeof name, "W%d", l);
        int w = pt_param(g, name, PT_H, l ? PT_H : PT_IN, 0.4);
        snprintf(name, sizeof name, "g%d", l);
        h = pt_gemm(g, h, w, -1, name);
        snprintf(name, sizeof name, "r%d", l);
        h = pt_relu(g, h, name);
    }
    int wc = pt_param(g, "Wc", PT_C, PT_H, 0.4);
    pt_output(g, pt_gemm(g, h, wc, -1, "logits"));
    sc_train_options o;
    sc_train_options_default(&o);
    o.optim = SC_OPTIM_SGD;
    o.momentum = 0.9f;
    sc_status st = graph_link(g);
    if (!st) st = autodiff_build_training(g, &o, &m->tg);
    SC_ASSERT(!st);
}

/* Every budget from the none peak down (64-byte steps) that `optimal` plans with equal node times
 * while recomputing some forward node X: with X made expensive, X must run fewer times. */
static void test_calibrated_choice(void) {
    pt_model m;
    deep_build(&m);
    const char *kn = "deep";
    const sc_graph *g = &m.g;
    int F = m.tg.n_forward_nodes;
    double *flat = malloc(sizeof(double) * (size_t)g->n_nodes), *skew = malloc(sizeof(double) * (size_t)g->n_nodes);
    SC_ASSERT(flat && skew);
    for (int i = 0; i < g->n_nodes; i++) flat[i] = 1e-3;
    sc_plan_options o = {0};
    o.strategy = SC_STRATEGY_NONE;
    sc_plan none;
    SC_ASSERT(!plan_build(g, &m.tg, &o, &none));
    o.strategy = SC_STRATEGY_OPTIMAL;
    o.segments = F;
    int changed = 0, tried = 0;
    for (int64_t budget = none.arena_bytes - 64; budget > none.fixed_bytes; budget -= 64) {
        o.budget = budget;
        o.node_time = flat;
        sc_plan a, b;
        sc_status st = plan_build(g, &m.tg, &o, &a);
        if (st) { /* below the smallest budget */
            sc_status_free(st);
            break;
        }
        int x = -1;
        for (int n = 0; n < F && x < 0; n++)
            if (runs_of(&a, n) > 1) x = n;
        if (x < 0) {
            plan_free(&a);
            continue;
        }
        tried++;
        for (int i = 0; i < g->n_nodes; i++) skew[i] = i == x ? 10.0 : 1e-3;
        o.node_time = skew;
        st = plan_build(g, &m.tg, &o, &b);
        CHECK(!st, "%s at %lld: the calibrated plan failed: %s", kn, (long long)budget,
              st ? sc_status_message(st) : "");
        sc_status_free(st);
        if (!st) {
            double want = calibrated_sum(&b, skew);
            CHECK(b.predicted_time > 0.999 * want && b.predicted_time < 1.001 * want,
                  "%s at %lld: predicted %g s, calibrated RUN times sum to %g s", kn,
                  (long long)budget, b.predicted_time, want);
            CHECK(b.arena_bytes <= budget, "%s at %lld: calibrated plan needs %lld", kn,
                  (long long)budget, (long long)b.arena_bytes);
            if (runs_of(&b, x) < runs_of(&a, x)) changed++;
            plan_free(&b);
        }
        plan_free(&a);
    }
    printf("%s: %d of %d budgets with a recomputed node avoid recomputing it once it is made expensive\n", kn,
           changed, tried);
    CHECK(tried > 0, "%s: no budget where optimal recomputes a node (nothing to test)", kn);
    CHECK(changed > 0, "%s: making the recomputed node expensive never changed the plan (%d budgets)",
          kn, tried);
    plan_free(&none);
    free(flat);
    free(skew);
    graph_free(&m.g);
}

int main(void) {
    test_calibrated_choice();
    test_tied_phases();
    test_sunk_phase();
    test_named_minimum(PT_RESIDUAL);
    test_named_minimum(PT_DENSE);
    test_cuts();
    test_validate();
    test_plans(PT_MLP);
    test_plans(PT_RESIDUAL);
    test_plans(PT_DENSE);
    test_refine(PT_MLP);
    test_refine(PT_RESIDUAL);
    test_refine(PT_DENSE);
    /* the relaxed overlap rule above is exercised (backward Adds and ReluGrads take dying blocks) */
    CHECK(takers > 0, "no plan placed an output in a dying input's block");
    printf("%d in-place placements checked\n", takers);
    if (failures) printf("%d failures\n", failures);
    else printf("ok\n");
    return failures ? 1 : 0;
}
