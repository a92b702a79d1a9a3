/* Streaming plans (schedule/offload.c) executed by backends/plan_exec on the CPU backend, whose
 * copy thread runs the transfers asynchronously, against the store-everything executor:
 *   - for the mlp, residual and dense training graphs (plan_test_graphs.h), offload weights /
 *     activations / both under every strategy (none, sqrt, dc, optimal, auto): 3 SGD-with-momentum
 *     steps give losses, parameters and optimizer state BIT-IDENTICAL (memcmp) to 3 steps of
 *     sc_forward_cpu; the measured arena high-water mark equals plan.arena_bytes; the bytes the
 *     session moved equal the plan's bytes_h2d / bytes_d2h (plus the inputs and outputs);
 *   - the same for every look-ahead window W = 0 .. R through plan_offload directly;
 *   - weights streaming removes parameters and optimizer state from the fixed region, and a budget
 *     smaller than parameters + optimizer state is refused without weights streaming and met (and
 *     run, with the device capped at the budget) with it; offload auto meets it too.
 *   - a graph with BatchNormalization (running statistics are graph outputs written back into their
 *     initializers after each step): under every streaming mode and strategy the last instance of
 *     every running statistic is OFFLOADed and no longer resident at the end of the step, and the
 *     write-back from the host copy gives statistics bit-identical to the store-everything run;
 *   - the bytes a session moves for outputs: those still resident at the end are copied device ->
 *     host, offloaded ones are read from their host copy (already counted by the plan's OFFLOAD);
 *   - every window again on the graphs in bf16 mixed precision (a third pass, SGD): with weights
 *     streamed and updated on the host, the casts' gradients leave and the cast weights arrive in
 *     16 bits (schedule/wire.c), still bit-identical to the bf16 store-everything run, with the
 *     counted bytes the plan's.
 * Every other run has the CPU backend do copies inline while nothing is pending
 * (backend_cpu_set_inline_copies, as the trainer does for small copies), the rest through the copy
 * thread; two runs in three put host updates on the host worker thread, the third runs them inline;
 * all must give the same bits.
 * Debug builds also run plan_exec's in-flight transfer assert on every step. Fails through the exit
 * code.
 *
 * `test_plan_offload --cuda` runs every plan on the CUDA backend instead (every strategy
 * with offload on the GPU gives the same weights as `none` on the GPU). The reference is then the
 * none plan run on the CUDA backend, and the comparison stays bit-exact: the same kernels run on
 * the same values in the same order whatever the plan (recomputation repeats a node exactly,
 * transfers copy bits). Without a CUDA device it prints "SKIP: ..." and exits 77.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/ref_executor.h"
#include "backends/plan_exec.h"
#ifdef SCORCH_HAVE_CUDA
#include "backends/cuda/backend_cuda.h"
#endif
#include "plan_test_graphs.h"
#include "schedule/sched_internal.h"
#include "tests/check.h"


/* A fourth graph where parameters dominate (the plan_test_graphs ones are activation-heavy), so a
 * budget below parameters + optimizer state can be met by streaming them:
 *   wide: x -> Gemm(W0 [64,4]) -> Relu -> 4 x (Gemm([64,64]) -> Relu) -> Gemm([3,64]) */
enum { PT_WIDE = 3, WIDE_H = 64, WIDE_L = 4 };

/* A fifth with BatchNormalization (training mode: running statistics written back after the step):
 *   bnorm: x -> 3 x (Gemm([16,*]) -> BatchNormalization -> Relu) -> Gemm([3,16]) */
enum { PT_BNORM = 4, BN_L = 3 };

static const char *model_name(int kind) {
    static char name[32];
    snprintf(name, sizeof name, "%s%s", kind == PT_WIDE ? "wide" : kind == PT_BNORM ? "bnorm" : pt_kind_name((pt_kind)kind),
             pt_low ? "-bf16" : "");
    return name;
}

/* BatchNormalization over [N, C]: scale, bias, mean, var initializers of [C]. */
static int bn_add(sc_graph *g, int x, int c, int l) {
    char name[32];
    int in[5] = {x};
    static const char *const what[4] = {"scale", "bias", "mean", "var"};
    for (int k = 0; k < 4; k++) {
        snprintf(name, sizeof name, "bn%d.%s", l, what[k]);
        in[k + 1] = pt_param(g, name, c, 0, k == 3 ? 0.5 : 0.3);
        if (k == 3) /* a variance is positive */
            for (int i = 0; i < c; i++) ((float *)g->values[in[k + 1]].data)[i] += 1.0f;
    }
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.batch_norm = (sc_batch_norm_attrs){.epsilon = 1e-5f, .momentum = 0.9f};
    snprintf(name, sizeof name, "bn%d", l);
    return pt_node(g, SC_OP_BATCH_NORM, &a, in, 5, name);
}

/* The second pass of main trains with AdamW and gradient clipping instead of SGD with momentum. */
static bool model_adamw;

static void model_build(pt_model *m, int kind) {
    if (kind != PT_WIDE && kind != PT_BNORM) {
        pt_build_opt(m, (pt_kind)kind, model_adamw);
        return;
    }
    sc_graph *g = &m->g;
    graph_init(g);
    pt_rng = kind == PT_WIDE ? 777 : 4242;
    int h = m->x = pt_input(g, "x", PT_N, PT_IN);
    char name[32];
    for (int l = 0; kind == PT_BNORM && l < BN_L; l++) {
        snprintf(name, sizeof name, "W%d", l);
        int w = pt_param(g, name, PT_H, l ? PT_H : PT_IN, 0.5);
        snprintf(name, sizeof name, "g%d", l);
        h = bn_add(g, pt_gemm(g, h, w, -1, name), PT_H, l);
        snprintf(name, sizeof name, "r%d", l);
        h = pt_relu(g, h, name);
    }
    for (int l = 0; kind == PT_WIDE && l <= WIDE_L; l++) {
        snprintf(name, sizeof name, "W%d", l);
        int w = pt_param(g, name, WIDE_H, l ? WIDE_H : PT_IN, 0.3);
        snprintf(name, sizeof name, "b%d", l);
        int b = pt_param(g, name, WIDE_H, 0, 0.1);
        snprintf(name, sizeof name, "g%d", l);
        h = pt_gemm(g, h, w, b, name);
        snprintf(name, sizeof name, "r%d", l);
        h = pt_relu(g, h, name);
    }
    int w = pt_param(g, "Wout", PT_C, kind == PT_WIDE ? WIDE_H : PT_H, 0.3);
    pt_output(g, pt_gemm(g, h, w, -1, "logits"));
    sc_train_options o;
    sc_train_options_default(&o);
    o.optim = model_adamw ? SC_OPTIM_ADAMW : SC_OPTIM_SGD;
    o.momentum = model_adamw ? 0.0f : 0.9f;
    o.weight_decay = model_adamw ? 0.01f : 0.0f;
    o.clip_norm = model_adamw ? 0.5f : 0.0f; /* a scale every host update reads */
    sc_status st = graph_link(g);
    if (!st && pt_low) st = graph_apply_precision(g, pt_low, NULL);
    if (!st) st = autodiff_build_training(g, &o, &m->tg);
    if (st) printf("building %s: %s\n", model_name(kind), sc_status_message(st));
    SC_ASSERT(!st);
}

enum { STEPS = 3 };

typedef struct {
    pt_model m;             /* the store-everything run, after STEPS steps */
    float loss[STEPS];
    int64_t io_h2d, io_d2h; /* bytes a session moves for inputs and outputs alone (the none plan) */
    int64_t none_fixed;     /* the none plan's fixed region */
} reference;

static float loss_of(const pt_model *m, const sc_tensor *outs) {
    for (int i = 0; i < m->g.n_outputs; i++)
        if (m->g.outputs[i] == m->tg.loss) return *(const float *)outs[i].data;
    SC_ASSERT(0);
    return 0;
}

static bool on_cuda; /* --cuda: every plan (and the reference) runs on the CUDA backend */
static bool worker_forced; /* the last test_backend_open put host updates on the worker */
static int64_t cuda_moved, cuda_staged; /* --cuda: bytes copied in all, and through staging */

/* The backend a plan runs on, with `capacity` device bytes. On the CPU, every other backend
 * copies inline while nothing is pending (backend_cpu_set_inline_copies), the rest through the
 * copy thread; and host updates run inline in one run of three, on the host worker in the others
 * (plan_exec_force_host_worker: the worker is what a GPU session uses). */
static sc_status test_backend_open(int64_t capacity, sc_backend **be) {
#ifdef SCORCH_HAVE_CUDA
    if (on_cuda) return backend_cuda_create(capacity, be);
#endif
    static int runs;
    sc_status st = backend_cpu_create(capacity, be);
    worker_forced = runs % 3 != 0;
    plan_exec_force_host_worker(worker_forced);
    if (!st) backend_cpu_set_inline_copies(*be, runs++ % 2 ? INT64_MAX : 0);
    return st;
}

/* --cuda: the reference is the none plan on the CUDA backend. */
static void reference_run_plan(pt_model *ref, float *losses) {
    sc_plan_options o = {0};
    sc_plan p;
    sc_backend *be = NULL;
    sc_plan_session *s = NULL;
    sc_status st = plan_build(&ref->g, &ref->tg, &o, &p);
    SC_ASSERT(!st);
    st = test_backend_open(0, &be);
    if (!st) st = plan_session_create(be, &ref->g, &p, &s);
    for (int step = 1; !st && step <= STEPS; step++) {
        pt_feeds f;
        pt_feeds_fill(ref, step, &f);
        sc_tensor outs[16];
        st = plan_session_step(s, f.t, outs);
        if (st) break;
        losses[step - 1] = loss_of(ref, outs);
        for (int i = 0; i < ref->g.n_outputs; i++) sc_tensor_free_data(&outs[i]);
        for (int i = 0; !st && i < ref->tg.n_writebacks; i++) /* as run_plan does */
            st = plan_session_copy_value(s, ref->tg.wb_src[i], ref->tg.wb_dst[i]);
    }
    if (!st) st = plan_exec_sync_params_to_host(s);
    if (st) printf("reference: %s\n", sc_status_message(st));
    SC_ASSERT(!st);
    plan_session_free(s);
    backend_destroy(be);
    plan_free(&p);
}

static void reference_run(pt_model *ref, float *losses) {
    if (on_cuda) {
        reference_run_plan(ref, losses);
        return;
    }
    for (int s = 1; s <= STEPS; s++) {
        pt_feeds f;
        pt_feeds_fill(ref, s, &f);
        sc_tensor outs[16];
        SC_ASSERT(ref->g.n_outputs <= 16);
        sc_status st = sc_forward_cpu(&ref->g, f.t, outs);
        if (st) printf("reference: %s\n", sc_status_message(st));
        SC_ASSERT(!st);
        losses[s - 1] = loss_of(ref, outs);
        /* writebacks (BatchNorm running statistics), as the trainer applies them */
        for (int w = 0; w < ref->tg.n_writebacks; w++)
            for (int i = 0; i < ref->g.n_outputs; i++)
                if (ref->g.outputs[i] == ref->tg.wb_src[w])
                    memcpy(ref->g.values[ref->tg.wb_dst[w]].data, outs[i].data,
                           (size_t)sc_desc_bytes(&ref->g.values[ref->tg.wb_dst[w]].desc));
        for (int i = 0; i < ref->g.n_outputs; i++) sc_tensor_free_data(&outs[i]);
    }
}

static void compare_state(const char *what, const pt_model *a, const pt_model *b) {
    int n = 0;
    for (int v = 0; v < a->g.n_values; v++) {
        const sc_value *x = &a->g.values[v], *y = &b->g.values[v];
        if (x->kind != SC_VALUE_PARAM && x->kind != SC_VALUE_OPT_STATE) continue;
        n++;
        CHECK(strcmp(x->name, y->name) == 0 && x->data && y->data &&
                  memcmp(x->data, y->data, (size_t)sc_desc_bytes(&x->desc)) == 0,
              "%s: '%s' differs from the store-everything run", what, x->name);
    }
    CHECK(n > 0, "%s: nothing compared", what);
}

/* Bytes a session copies device -> host for graph outputs at the end of a step: those resident at
 * the end (an interval of theirs reaches the last step, or they open none: persistent, in place). */
static int64_t outputs_d2h(const sc_graph *g, const sc_plan *p) {
    int64_t b = 0;
    for (int i = 0; i < g->n_outputs; i++) {
        int v = g->outputs[i];
        bool any = false, to_end = false;
        for (int k = 0; k < p->n_intervals; k++)
            if (p->intervals[k].value == v) any = true, to_end |= p->intervals[k].end == p->n_steps - 1;
        if (!any || to_end) b += sc_desc_bytes(&g->values[v].desc);
    }
    return b;
}

/* Transfers per kind in a plan. */
static void count_steps(const sc_plan *p, int *prefetch, int *offload) {
    *prefetch = *offload = 0;
    for (int i = 0; i < p->n_steps; i++) {
        *prefetch += p->steps[i].kind == SC_STEP_PREFETCH;
        *offload += p->steps[i].kind == SC_STEP_OFFLOAD;
    }
}

/* Runs plan p on m (fresh) for STEPS steps with the device capped at capacity (0: the plan's size)
 * and checks it against the reference. Returns the measured bytes of the last step in *h2d and *d2h. */
static void run_plan(const char *what, pt_model *m, const sc_plan *p, int64_t capacity, const reference *ref,
                     int64_t *h2d, int64_t *d2h) {
    sc_backend *be = NULL;
    sc_plan_session *s = NULL;
    sc_status st = test_backend_open(capacity > 0 ? capacity : p->arena_bytes, &be);
    if (!st) st = plan_session_create(be, &m->g, p, &s);
    for (int step = 1; !st && step <= STEPS; step++) {
        pt_feeds f;
        pt_feeds_fill(m, step, &f);
        sc_tensor outs[16];
        st = plan_session_step(s, f.t, outs);
        if (st) break;
        float loss = loss_of(m, outs);
        CHECK(memcmp(&loss, &ref->loss[step - 1], sizeof loss) == 0, "%s: step %d loss %.9g, store-everything %.9g",
              what, step, loss, ref->loss[step - 1]);
        for (int i = 0; i < m->g.n_outputs; i++) sc_tensor_free_data(&outs[i]);
        sc_plan_stats ps;
        plan_session_stats(s, &ps);
        CHECK(ps.peak_bytes == p->arena_bytes, "%s: step %d measured peak %lld, planned %lld", what, step,
              (long long)ps.peak_bytes, (long long)p->arena_bytes);
        /* host copies: the planned bytes with inline updates, reached by the last step (a pooled buffer
         * a kept value adopts makes the next step allocate once more) and never exceeded; with the
         * worker an update still queued can hold a copy the executor would have reused */
        int64_t want = plan_host_copy_bytes(&m->g, p);
        bool host_ok = worker_forced || on_cuda ? step < STEPS || ps.host_bytes >= want
                       : step < STEPS ? ps.host_bytes <= want : ps.host_bytes == want;
        CHECK(host_ok, "%s: step %d host copies %lld bytes, planned %lld%s", what, step, (long long)ps.host_bytes,
              (long long)want, worker_forced ? " (host worker)" : "");
        *h2d = ps.bytes_h2d, *d2h = ps.bytes_d2h;
        /* writebacks (BatchNorm statistics in bnorm) and the host copy, as the trainer does */
        for (int i = 0; !st && i < m->tg.n_writebacks; i++)
            st = plan_session_copy_value(s, m->tg.wb_src[i], m->tg.wb_dst[i]);
    }
    if (!st) st = plan_exec_sync_params_to_host(s);
    CHECK(!st, "%s: %s", what, st ? sc_status_message(st) : "");
    if (be) {
        sc_backend_memory bm;
        be->iface->memory(be, &bm);
        cuda_moved += on_cuda ? bm.copied_h2d + bm.copied_d2h : 0;
        cuda_staged += on_cuda ? bm.staged : 0;
    }
    if (!st) compare_state(what, &ref->m, m);
    sc_status_free(st);
    plan_session_free(s);
    backend_destroy(be);
}

/* Streaming plans: no computed graph output (running statistics, loss) is resident at the end of the
 * step; each one's last instance is OFFLOADed. */
static void outputs_check(const char *what, const pt_model *m, const sc_plan *p) {
    const sc_graph *g = &m->g;
    for (int i = 0; i < g->n_outputs; i++) {
        int v = g->outputs[i], offloads = 0, pr = g->values[v].producer;
        bool alias = false;
        for (int k = 0; pr >= 0 && k < g->nodes[pr].n_out; k++) alias |= g->nodes[pr].out[k] == v && sched_alias_input(&g->nodes[pr], k) >= 0;
        if (pr < 0 || alias) continue;
        for (int k = 0; k < p->n_intervals; k++)
            CHECK(p->intervals[k].value != v || p->intervals[k].end < p->n_steps - 1,
                  "%s: graph output '%s' is resident to the end of a streaming plan", what, g->values[v].name);
        for (int s = 0; s < p->n_steps; s++) offloads += p->steps[s].kind == SC_STEP_OFFLOAD && p->steps[s].value == v;
        CHECK(offloads >= 1, "%s: graph output '%s' is never offloaded", what, g->values[v].name);
    }
}

/* A plan from plan_build, run and checked; returns false when plan_build failed. */
static bool build_and_run(int kind, const sc_plan_options *o, const reference *ref, const char *what,
                          sc_plan *keep) {
    pt_model m;
    model_build(&m, kind);
    sc_plan p;
    sc_status st = plan_build(&m.g, &m.tg, o, &p);
    CHECK(!st, "%s: plan_build: %s", what, st ? sc_status_message(st) : "");
    if (st) {
        sc_status_free(st);
        graph_free(&m.g);
        return false;
    }
    CHECK(p.host_bytes == plan_host_copy_bytes(&m.g, &p), "%s: plan_build's host_bytes %lld, replayed %lld", what,
          (long long)p.host_bytes, (long long)plan_host_copy_bytes(&m.g, &p));
    int64_t h2d = 0, d2h = 0;
    run_plan(what, &m, &p, o->budget, ref, &h2d, &d2h);
    int64_t out_d2h = outputs_d2h(&m.g, &p);
    CHECK(h2d == ref->io_h2d + p.bytes_h2d && d2h == out_d2h + p.bytes_d2h,
          "%s: moved %lld/%lld bytes h2d/d2h, the plan says %lld/%lld plus %lld/%lld for inputs/outputs", what,
          (long long)h2d, (long long)d2h, (long long)p.bytes_h2d, (long long)p.bytes_d2h, (long long)ref->io_h2d,
          (long long)out_d2h);
    if (p.offload != SC_OFFLOAD_NONE) outputs_check(what, &m, &p);
    int npf, nof;
    count_steps(&p, &npf, &nof);
    printf("%-40s %-11s W=%-3d arena %6lld fixed %5lld  %3d prefetch %3d offload  h2d %6lld d2h %6lld  "
           "time %.3g us (stall %.3g)\n",
           what, plan_offload_name(p.offload), p.offload_window, (long long)p.arena_bytes, (long long)p.fixed_bytes,
           npf, nof, (long long)p.bytes_h2d, (long long)p.bytes_d2h, 1e6 * p.predicted_time, 1e6 * p.stall_time);
    if (keep) *keep = p;
    else plan_free(&p);
    graph_free(&m.g);
    return true;
}

static int64_t params_state_bytes(const sc_graph *g) {
    int64_t b = 0;
    for (int v = 0; v < g->n_values; v++)
        if (sched_needs_fixed(g, v) && (g->values[v].kind == SC_VALUE_PARAM || g->values[v].kind == SC_VALUE_OPT_STATE))
            b += sched_value_bytes(g, v);
    return b;
}

/* offload x strategy under no budget (look-ahead limited to 2 RUNs so streaming is exercised). */
static void test_modes(int kind, const reference *ref) {
    static const sc_offload modes[] = {SC_OFFLOAD_WEIGHTS, SC_OFFLOAD_ACTIVATIONS, SC_OFFLOAD_BOTH, SC_OFFLOAD_AUTO};
    int F = ref->m.tg.n_forward_nodes;
    struct {
        sc_strategy s;
        int segments;
    } strategies[] = {{SC_STRATEGY_NONE, 0},  {SC_STRATEGY_SQRT, 0},    {SC_STRATEGY_SQRT, 3},
                      {SC_STRATEGY_DC, 0},    {SC_STRATEGY_OPTIMAL, 0}, {SC_STRATEGY_AUTO, 0}};
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++)
        for (size_t j = 0; j < sizeof strategies / sizeof *strategies; j++) {
            sc_plan_options o = {0};
            o.strategy = strategies[j].s;
            o.segments = strategies[j].segments ? strategies[j].segments : F;
            o.offload = modes[i];
            o.window_max = 2;
            o.resident_max = -1; /* every parameter streamed: the checks below count on it */
            char what[96];
            snprintf(what, sizeof what, "%s/%s/%d/offload-%s", model_name(kind), plan_strategy_name(o.strategy),
                     o.segments, plan_offload_name(o.offload));
            sc_plan p;
            if (!build_and_run(kind, &o, ref, what, &p)) continue;
            int npf, nof;
            count_steps(&p, &npf, &nof);
            if (modes[i] == SC_OFFLOAD_WEIGHTS || modes[i] == SC_OFFLOAD_BOTH) {
                CHECK(npf > 0 && nof > 0, "%s: weights streaming moved nothing", what);
                CHECK(p.fixed_bytes == ref->none_fixed - params_state_bytes(&ref->m.g),
                      "%s: fixed region %lld bytes, the none plan's %lld less parameters and state %lld", what,
                      (long long)p.fixed_bytes, (long long)ref->none_fixed, (long long)params_state_bytes(&ref->m.g));
            }
            if (modes[i] == SC_OFFLOAD_ACTIVATIONS && o.strategy == SC_STRATEGY_NONE)
                CHECK(nof > 0 && p.bytes_d2h > 0, "%s: no activation was offloaded", what);
            plan_free(&p);
        }
}

/* With host updates every streamed parameter's update is a HOST_RUN and neither parameters nor
 * optimizer state cross the link device -> host, nor state host -> device; without, no HOST_RUN at
 * all. `resident` parameters stay on the device with their state: no transfer moves them. */
static void host_updates_check(const char *what, const pt_model *m, const sc_plan *p, bool host, int resident) {
    const sc_graph *g = &m->g;
    int runs = 0, want = host ? m->tg.n_params - resident : 0;
    for (int s = 0; s < p->n_steps; s++) {
        const sc_step *sp = &p->steps[s];
        runs += sp->kind == SC_STEP_HOST_RUN;
        if (!host || (sp->kind != SC_STEP_OFFLOAD && sp->kind != SC_STEP_PREFETCH)) continue;
        sc_value_kind k = g->values[sp->value].kind;
        CHECK(k != SC_VALUE_OPT_STATE, "%s: optimizer state '%s' crosses the link", what, g->values[sp->value].name);
        CHECK(sp->kind != SC_STEP_OFFLOAD || k != SC_VALUE_PARAM, "%s: parameter '%s' is offloaded", what,
              g->values[sp->value].name);
    }
    CHECK(runs == want && runs == p->n_host_updates, "%s: %d HOST_RUN steps (plan says %d), want %d", what, runs,
          p->n_host_updates, want);
    CHECK(p->update_on == (want ? SC_UPDATE_HOST : SC_UPDATE_DEVICE), "%s: update_on %s", what, plan_update_name(p->update_on));
}

/* The smallest group of a parameter and its optimizer state, in bytes (schedule/resident.c): as
 * resident_max it keeps at least that parameter resident. */
static int64_t smallest_group(const sc_graph *g) {
    int64_t least = INT64_MAX;
    for (int i = 0; i < g->n_nodes; i++) {
        const sc_node *n = &g->nodes[i];
        if (!sched_is_update(n)) continue;
        int64_t b = 0;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && (k == 0 || g->values[n->in[k]].kind == SC_VALUE_OPT_STATE))
                b += sched_value_bytes(g, n->in[k]);
        if (b < least) least = b;
    }
    return least;
}

/* Every look-ahead window through plan_offload directly, on the none and sqrt plans; with weights
 * streaming, with updates on the device and on the host, with every parameter streamed and with
 * the smallest ones resident (a mixed plan: resident ones update on the device, the rest where
 * asked). */
static void test_windows(int kind, const reference *ref) {
    for (int strat = 0; strat < 2; strat++)
        for (int mode = 1; mode <= 3; mode++) {
            pt_model m;
            model_build(&m, kind);
            sc_plan_options o = {0};
            o.strategy = strat ? SC_STRATEGY_SQRT : SC_STRATEGY_NONE;
            o.segments = m.tg.n_forward_nodes;
            sc_plan lowered;
            sc_status st = plan_build(&m.g, &m.tg, &o, &lowered);
            SC_ASSERT(!st);
            int R = 0;
            for (int i = 0; i < lowered.n_steps; i++) R += lowered.steps[i].kind == SC_STEP_RUN;
            graph_free(&m.g);
            for (int res = 0; res <= (mode & 1); res++)
            for (int host = 0; host <= (mode & 1); host++)
            for (int W = 0; W <= R + 1; W += W < 4 ? 1 : 3) {
                model_build(&m, kind);
                sc_plan p;
                sc_cost_model cm;
                cost_model_default(&cm, 0, NULL);
                stream_opts so = {mode & 1, mode & 2, host, W, res ? smallest_group(&m.g) : 0};
                st = plan_offload_ex(&m.g, &lowered, &so, &p);
                if (!st) st = plan_wire_assign(&m.g, &p);
                if (!st) st = plan_alloc(&m.g, &p);
                if (!st) st = plan_predict(&m.g, &cm, &p);
                char what[96];
                snprintf(what, sizeof what, "%s%s/%s/W=%d/%s%s%s", model_name(kind), model_adamw ? "-adamw" : "",
                         plan_strategy_name(o.strategy), W, mode == 1 ? "weights" : mode == 2 ? "activations" : "both",
                         host ? "/host-updates" : "", res ? "/resident" : "");
                CHECK(!st, "%s: %s", what, st ? sc_status_message(st) : "");
                if (!st) {
                    int64_t h2d = 0, d2h = 0;
                    run_plan(what, &m, &p, 0, ref, &h2d, &d2h);
                    CHECK(h2d == ref->io_h2d + p.bytes_h2d && d2h == outputs_d2h(&m.g, &p) + p.bytes_d2h,
                          "%s: moved bytes differ from the plan's", what);
                    outputs_check(what, &m, &p);
                    int n_res = 0;
                    int64_t res_bytes = 0;
                    plan_resident_count(&m.g, &p, &n_res, &res_bytes);
                    if (mode & 1) {
                        int64_t moved = params_state_bytes(&m.g) - res_bytes;
                        CHECK(p.fixed_bytes == lowered.fixed_bytes - moved,
                              "%s: fixed region %lld, expected %lld without the streamed parameters and state", what,
                              (long long)p.fixed_bytes, (long long)(lowered.fixed_bytes - moved));
                        CHECK(res ? n_res > 0 : n_res == 0, "%s: %d parameters resident", what, n_res);
                    }
                    if (mode == 2 && W == 0)
                        CHECK(p.bytes_d2h > 0, "%s: no activation offloaded with a zero window", what);
                    host_updates_check(what, &m, &p, host, n_res);
                    int64_t wire[2];
                    plan_wire_bytes(&m.g, &p, wire);
                    if (pt_low && host && n_res == 0) /* every Gemm weight is cast: each one arrives in bf16 */
                        CHECK(wire[0] > 0 && wire[1] > 0, "%s: %lld and %lld bytes cross in bf16", what,
                              (long long)wire[0], (long long)wire[1]);
                    if (!pt_low) CHECK(wire[0] == 0 && wire[1] == 0, "%s: 16-bit transfers in an f32 graph", what);
                    plan_free(&p);
                }
                sc_status_free(st);
                graph_free(&m.g);
            }
            plan_free(&lowered);
        }
}

/* The host budget (sc_plan_options.host_budget): a plan's copies of moved values must fit it. With
 * activations offloaded the copies are not zero; one byte less than the chosen plan's must give a
 * plan within it (run and checked like every plan) or a refusal that names host memory; with one
 * byte, offloading activations is refused outright. */
static void test_host_budget(int kind, const reference *ref) {
    for (int pass = 0; pass < 2; pass++) {
        pt_model m;
        model_build(&m, kind);
        sc_plan_options o = {0};
        o.strategy = SC_STRATEGY_AUTO;
        o.segments = m.tg.n_forward_nodes;
        o.offload = pass ? SC_OFFLOAD_ACTIVATIONS : SC_OFFLOAD_BOTH;
        sc_plan p;
        sc_status st = plan_build(&m.g, &m.tg, &o, &p);
        CHECK(!st, "%s: %s", model_name(kind), st ? sc_status_message(st) : "");
        int64_t h = st ? 0 : p.host_bytes;
        if (!st) plan_free(&p);
        sc_status_free(st);
        graph_free(&m.g);
        if (h <= 0) continue;
        o.host_budget = pass ? 1 : h - 1;
        char what[128];
        snprintf(what, sizeof what, "%s/host budget %lld/offload-%s", model_name(kind), (long long)o.host_budget,
                 plan_offload_name(o.offload));
        model_build(&m, kind);
        st = plan_build(&m.g, &m.tg, &o, &p);
        if (st) {
            CHECK(strstr(sc_status_message(st), "host memory"), "%s: refused without naming host memory: %s", what,
                  sc_status_message(st));
            printf("%s: refused (%s)\n", what, sc_status_message(st));
            sc_status_free(st);
        } else {
            CHECK(!pass, "%s: offloading activations with a 1-byte host budget was planned", what);
            CHECK(p.host_bytes <= o.host_budget, "%s: host copies %lld over the host budget", what,
                  (long long)p.host_bytes);
            plan_free(&p);
            if (build_and_run(kind, &o, ref, what, &p)) plan_free(&p);
        }
        graph_free(&m.g);
    }
}

/* A budget below parameters + optimizer state: infeasible unless weights are streamed (refused
 * on every graph; met with weights streaming on the parameter-heavy one). */
static void test_budget(int kind, const reference *ref) {
    int64_t ps = params_state_bytes(&ref->m.g);
    int64_t budget = ps - 64;
    char what[96];
    static const sc_offload without[] = {SC_OFFLOAD_NONE, SC_OFFLOAD_ACTIVATIONS};
    for (size_t i = 0; i < 2; i++) {
        pt_model m;
        model_build(&m, kind);
        sc_plan_options o = {0};
        o.strategy = SC_STRATEGY_AUTO;
        o.segments = m.tg.n_forward_nodes;
        o.offload = without[i];
        o.budget = budget;
        sc_plan p;
        sc_status st = plan_build(&m.g, &m.tg, &o, &p);
        CHECK(st && strstr(sc_status_message(st), "budget"),
              "%s: offload %s met a budget of %lld below the %lld bytes of parameters and state: %s", model_name(kind),
              plan_offload_name(o.offload), (long long)budget, (long long)ps, st ? sc_status_message(st) : "ok");
        if (st) printf("%s offload %s at %lld: refused (%s)\n", model_name(kind), plan_offload_name(o.offload),
                       (long long)budget, sc_status_message(st));
        if (!st) plan_free(&p);
        sc_status_free(st);
        graph_free(&m.g);
    }
    if (kind != PT_WIDE) return; /* activations alone exceed parameters + state there */
    static const sc_offload with[] = {SC_OFFLOAD_WEIGHTS, SC_OFFLOAD_BOTH, SC_OFFLOAD_AUTO};
    static const sc_strategy strategies[] = {SC_STRATEGY_NONE, SC_STRATEGY_DC, SC_STRATEGY_AUTO};
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 3; j++) {
            sc_plan_options o = {0};
            o.strategy = strategies[j];
            o.segments = ref->m.tg.n_forward_nodes;
            o.offload = with[i];
            o.budget = budget;
            snprintf(what, sizeof what, "%s/%s/budget %lld/offload-%s", model_name(kind),
                     plan_strategy_name(o.strategy), (long long)budget, plan_offload_name(o.offload));
            sc_plan p;
            if (!build_and_run(kind, &o, ref, what, &p)) continue;
            CHECK(p.arena_bytes <= budget, "%s: arena %lld over the budget", what, (long long)p.arena_bytes);
            CHECK(p.offload == SC_OFFLOAD_WEIGHTS || p.offload == SC_OFFLOAD_BOTH, "%s: resolved to offload %s", what,
                  plan_offload_name(p.offload));
            plan_free(&p);
        }
}

/* Debug builds: a plan whose RUN reads a prefetched value before its WAIT (the WAIT moved past the
 * RUN) must trip plan_exec's in-flight assert. Run in a child process, which must abort. */
static void test_inflight_assert(void) {
#ifndef NDEBUG
    pt_model m;
    model_build(&m, PT_MLP);
    sc_plan_options o = {0};
    o.offload = SC_OFFLOAD_WEIGHTS;
    o.window_max = 1;
    o.resident_max = -1; /* stream every parameter: by default this small graph's stay resident */
    sc_plan p;
    sc_status st = plan_build(&m.g, &m.tg, &o, &p);
    SC_ASSERT(!st);
    int w = -1;
    for (int i = 0; i + 1 < p.n_steps && w < 0; i++)
        if (p.steps[i].kind == SC_STEP_WAIT && p.steps[i + 1].kind == SC_STEP_RUN) w = i;
    CHECK(w >= 0, "no WAIT right before a RUN in a weights plan");
    if (w >= 0) {
        sc_step t = p.steps[w];
        p.steps[w] = p.steps[w + 1];
        p.steps[w + 1] = t;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            if (!freopen("/dev/null", "w", stderr)) _exit(2);
            int64_t h2d, d2h;
            reference dummy;
            memset(&dummy, 0, sizeof dummy);
            model_build(&dummy.m, PT_MLP);
            run_plan("bad", &m, &p, 0, &dummy, &h2d, &d2h);
            _exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
              "a RUN reading bytes under a transfer in flight was not caught (status %d)", status);
        printf("in-flight assert: a RUN before its WAIT %s\n",
               WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT ? "aborts as it must" : "WAS NOT CAUGHT");
    }
    plan_free(&p);
    graph_free(&m.g);
#endif
}

int main(int argc, char **argv) {
    on_cuda = argc > 1 && strcmp(argv[1], "--cuda") == 0;
    if (on_cuda) {
#ifdef SCORCH_HAVE_CUDA
        char why[256];
        if (!backend_cuda_available(why, sizeof why)) {
            printf("SKIP: no CUDA device (%s)\n", why);
            return 77;
        }
#else
        printf("SKIP: this build has no CUDA backend\n");
        return 77;
#endif
    }
    int kinds[] = {PT_MLP, PT_RESIDUAL, PT_DENSE, PT_WIDE, PT_BNORM};
    for (int pass = 0; pass < 3; pass++)
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        model_adamw = pass == 1; /* AdamW + clipping: every window with host and device updates */
        pt_low = pass == 2 ? SC_BF16 : SC_DTYPE_UNDEFINED;
        reference ref;
        model_build(&ref.m, kinds[k]);
        reference_run(&ref.m, ref.loss);
        /* the none plan: its session moves only inputs and outputs */
        {
            pt_model m;
            model_build(&m, kinds[k]);
            sc_plan_options o = {0};
            sc_plan p;
            sc_status st = plan_build(&m.g, &m.tg, &o, &p);
            SC_ASSERT(!st);
            ref.io_h2d = ref.io_d2h = 0;
            run_plan("none", &m, &p, 0, &ref, &ref.io_h2d, &ref.io_d2h);
            CHECK(ref.io_d2h == outputs_d2h(&m.g, &p), "%s none: outputs moved %lld bytes, expected %lld",
                  model_name(kinds[k]), (long long)ref.io_d2h, (long long)outputs_d2h(&m.g, &p));
            if (kinds[k] == PT_BNORM) CHECK(m.tg.n_writebacks == 2 * BN_L, "bnorm: %d writebacks", m.tg.n_writebacks);
            ref.none_fixed = p.fixed_bytes;
            plan_free(&p);
            graph_free(&m.g);
        }
        bool first = pass == 0;
        if (first) test_modes(kinds[k], &ref);
        test_windows(kinds[k], &ref);
        if (first) test_budget(kinds[k], &ref);
        if (first) test_host_budget(kinds[k], &ref);
        graph_free(&ref.m.g);
    }
    if (!on_cuda) test_inflight_assert(); /* forks: a CUDA context does not survive fork() */
    if (on_cuda) { /* the session's host copies are pinned (host_alloc), so some copies must be direct */
        printf("cuda: %lld bytes copied, %lld of them through staging\n", (long long)cuda_moved, (long long)cuda_staged);
        CHECK(cuda_staged < cuda_moved, "every copy went through staging: nothing was pinned");
    }
    if (failures) printf("%d failures\n", failures);
    else printf("ok\n");
    return failures ? 1 : 0;
}
