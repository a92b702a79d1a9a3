/* Plans executed by backends/plan_exec on the CPU backend against the store-everything executor:
 * for the mlp, residual and dense training graphs (plan_test_graphs.h), 3 SGD-with-momentum steps
 * under the none, sqrt, dc and optimal plans (every forward node its own segment, so sqrt and dc
 * recompute), dc under a budget that lets schedule/refine.c keep some of its recomputed values, and
 * evict (schedule/evict.c) at budgets from its floor to none's arena, give losses, parameters and optimizer state BIT-IDENTICAL (memcmp) to 3 steps of
 * sc_forward_cpu on an identical graph; the measured arena high-water mark equals the plan's
 * arena_bytes; a device capacity below the plan is refused with a clear message. Backend caches keyed
 * by weight values (params_changed) are invalidated at every training step and never by an
 * inference plan's steps, which write no weight. The modelled link
 * (backend_cpu_set_link_bandwidth): every copy lasts at least bytes / bandwidth on its direction's
 * FIFO, and the data arrives intact. The state's finite check between steps runs on the device
 * copies and finds a NaN or Inf put there; the host data is synced only when asked.
 * Fails through the exit code.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/ref_executor.h"
#include "core/clock.h"
#include "backends/plan_exec.h"
#include "plan_test_graphs.h"
#include "tests/check.h"


enum { STEPS = 3 };

static float loss_of(const pt_model *m, const sc_tensor *outs) {
    for (int i = 0; i < m->g.n_outputs; i++)
        if (m->g.outputs[i] == m->tg.loss) return *(const float *)outs[i].data;
    SC_ASSERT(0);
    return 0;
}

/* The reference: STEPS steps of sc_forward_cpu. */
static void reference_run(pt_model *ref, float *losses) {
    for (int s = 1; s <= STEPS; s++) {
        pt_feeds f;
        pt_feeds_fill(ref, s, &f);
        sc_tensor outs[16];
        SC_ASSERT(ref->g.n_outputs <= 16);
        sc_status st = sc_forward_cpu(&ref->g, f.t, outs);
        if (st) printf("reference: %s\n", sc_status_message(st));
        SC_ASSERT(!st);
        losses[s - 1] = loss_of(ref, outs);
        for (int i = 0; i < ref->g.n_outputs; i++) sc_tensor_free_data(&outs[i]);
    }
}

/* Every PARAM and OPT_STATE value of a against b, byte for byte (the two graphs have the same ids). */
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

/* One plan (budget 0: none) trained STEPS steps against the reference; *arena and *keeps (when not
 * NULL) get the plan's arena and refined_keeps. */
static void run_case(pt_kind kind, sc_strategy strategy, int segments, int64_t budget, const pt_model *ref,
                     const float *ref_loss, int64_t *arena, int *keeps) {
    pt_model m;
    pt_build(&m, kind);
    char what[96];
    snprintf(what, sizeof what, "%s/%s/%d/budget %lld", pt_kind_name(kind), plan_strategy_name(strategy), segments,
             (long long)budget);
    sc_plan_options o = {0};
    o.strategy = strategy;
    o.segments = segments;
    o.budget = budget;
    sc_plan p;
    sc_status st = plan_build(&m.g, &m.tg, &o, &p);
    CHECK(!st, "%s: plan_build: %s", what, st ? sc_status_message(st) : "");
    if (st) {
        sc_status_free(st);
        graph_free(&m.g);
        return;
    }
    CHECK(budget <= 0 || p.arena_bytes <= budget, "%s: arena %lld over the budget", what, (long long)p.arena_bytes);
    if (arena) *arena = p.arena_bytes;
    if (keeps) *keeps = p.refined_keeps;
    sc_backend *be = NULL;
    sc_plan_session *s = NULL;
    st = backend_cpu_create(p.arena_bytes, &be);
    if (!st) st = plan_session_create(be, &m.g, &p, &s);
    for (int step = 1; !st && step <= STEPS; step++) {
        pt_feeds f;
        pt_feeds_fill(&m, step, &f);
        sc_tensor outs[16];
        st = plan_session_step(s, f.t, outs);
        if (st) break;
        float loss = loss_of(&m, outs);
        CHECK(memcmp(&loss, &ref_loss[step - 1], sizeof loss) == 0, "%s: step %d loss %.9g, store-everything %.9g",
              what, step, loss, ref_loss[step - 1]);
        for (int i = 0; i < m.g.n_outputs; i++) sc_tensor_free_data(&outs[i]);
        sc_plan_stats ps;
        plan_session_stats(s, &ps);
        CHECK(ps.peak_bytes == p.arena_bytes, "%s: step %d measured peak %lld, planned %lld", what, step,
              (long long)ps.peak_bytes, (long long)p.arena_bytes);
    }
    if (!st) st = plan_exec_sync_params_to_host(s);
    CHECK(!st, "%s: %s", what, st ? sc_status_message(st) : "");
    sc_status_free(st);
    if (!st) compare_state(what, ref, &m);
    printf("%-36s arena %6lld (fixed %lld), %d steps, recompute %.0f flops, %d kept by refinement\n", what,
           (long long)p.arena_bytes, (long long)p.fixed_bytes, p.n_steps, p.recompute_flops, p.refined_keeps);
    plan_session_free(s);
    backend_destroy(be);
    plan_free(&p);
    graph_free(&m.g);
}

/* The mlp training graph and its store-everything plan. */
static void mlp_none_plan(pt_model *m, sc_plan *p) {
    pt_build(m, PT_MLP);
    sc_plan_options o = {0};
    sc_status st = plan_build(&m->g, &m->tg, &o, p);
    SC_ASSERT(!st);
}

static void test_capacity(void) {
    pt_model m;
    sc_plan p;
    mlp_none_plan(&m, &p);
    sc_backend *be = NULL;
    sc_plan_session *s = NULL;
    sc_status st = backend_cpu_create(p.arena_bytes - 64, &be);
    SC_ASSERT(!st);
    st = plan_session_create(be, &m.g, &p, &s);
    CHECK(st && strstr(sc_status_message(st), "capacity"), "a plan over the device capacity was accepted: %s",
          st ? sc_status_message(st) : "ok");
    sc_status_free(st);
    backend_destroy(be);
    plan_free(&p);
    graph_free(&m.g);
}

/* 1 MiB each way over a 100 MB/s link: each copy lasts at least 10.5 ms from when its lane starts
 * it, so waiting for the second copy of a lane takes at least two copies' time, while the other
 * lane runs beside it (only lower bounds are checked: a loaded machine may only add time). */
static void test_link(void) {
    enum { BYTES = 1 << 20 };
    const double bw = 100e6, copy_s = BYTES / bw;
    sc_backend *be = NULL;
    sc_status st = backend_cpu_create(4 * BYTES, &be);
    SC_ASSERT(!st);
    backend_cpu_set_link_bandwidth(be, bw);
    backend_cpu_set_inline_copies(be, INT64_MAX); /* a modelled link never copies inline */
    char *dev = NULL;
    st = be->iface->arena_create(be, 4 * BYTES, (void **)&dev);
    SC_ASSERT(!st);
    char *host = malloc(4 * BYTES);
    for (int i = 0; i < 4 * BYTES; i++) host[i] = (char)(i * 7);
    int64_t t[4];
    double t0 = sc_clock_seconds();
    st = be->iface->copy_h2d(be, dev, host, BYTES, &t[0]);
    if (!st) st = be->iface->copy_d2h(be, host + 2 * BYTES, dev + 3 * BYTES, BYTES, &t[1]);
    if (!st) st = be->iface->copy_h2d(be, dev + BYTES, host + BYTES, BYTES, &t[2]);
    if (!st) st = be->iface->wait(be, t[0]);
    double first = sc_clock_seconds() - t0;
    if (!st) st = be->iface->wait(be, t[2]);
    double second = sc_clock_seconds() - t0;
    CHECK(!st, "link copies: %s", st ? sc_status_message(st) : "");
    CHECK(first >= copy_s, "a 1 MiB copy at 100 MB/s took %.4f s, under %.4f s", first, copy_s);
    CHECK(second >= 2 * copy_s, "two 1 MiB copies one after the other on one lane took %.4f s, under %.4f s",
          second, 2 * copy_s);
    CHECK(!memcmp(dev, host, 2 * (size_t)BYTES), "data copied over the modelled link differs");
    printf("link at 100 MB/s: 1 MiB in %.4f s, two on one lane in %.4f s (the other lane beside them)\n", first,
           second);
    sc_status_free(st);
    free(host);
    backend_destroy(be);
}

/* params_changed calls, counted around the CPU backend's own hook. */
static int params_changed_calls;
static void (*cpu_params_changed_hook)(sc_backend *);
static void count_params_changed(sc_backend *b) {
    params_changed_calls++;
    cpu_params_changed_hook(b);
}

/* Steps of plan p on a CPU backend whose params_changed is counted; the count over those steps. */
static int params_changed_over_steps(const pt_model *m, sc_graph *g, const sc_plan *p) {
    sc_backend *be = NULL;
    sc_plan_session *s = NULL;
    sc_status st = backend_cpu_create(p->arena_bytes, &be);
    sc_backend_i counted;
    if (!st) {
        counted = *be->iface;
        cpu_params_changed_hook = counted.params_changed;
        counted.params_changed = count_params_changed;
        be->iface = &counted;
        st = plan_session_create(be, g, p, &s);
    }
    params_changed_calls = 0;
    for (int step = 1; !st && step <= STEPS; step++) {
        pt_feeds f;
        pt_feeds_fill(m, step, &f);
        sc_tensor outs[16];
        st = plan_session_step(s, f.t, outs);
        for (int i = 0; !st && i < g->n_outputs; i++) sc_tensor_free_data(&outs[i]);
    }
    CHECK(!st, "params_changed count: %s", st ? sc_status_message(st) : "");
    sc_status_free(st);
    plan_session_free(s);
    backend_destroy(be);
    return params_changed_calls;
}

/* A training plan updates the weights in place, so the CPU backend's reordered convolution weights
 * (cpu_dnnl.h) are dropped before each step; an inference plan keeps them for the session. */
static void test_params_changed(void) {
    pt_model m;
    sc_plan p;
    mlp_none_plan(&m, &p);
    int n = params_changed_over_steps(&m, &m.g, &p);
    CHECK(n == STEPS, "training plan: params_changed ran %d times in %d steps, want once per step", n, STEPS);
    plan_free(&p);
    graph_free(&m.g);

    pt_model f; /* the mlp's forward pass alone, fed the same x */
    graph_init(&f.g);
    pt_rng = 1234;
    f.x = pt_input(&f.g, "x", PT_N, PT_IN);
    int w1 = pt_param(&f.g, "W1", PT_H, PT_IN, 0.5), b1 = pt_param(&f.g, "b1", PT_H, 0, 0.1);
    pt_output(&f.g, pt_relu(&f.g, pt_gemm(&f.g, f.x, w1, b1, "h1"), "r1"));
    sc_status st = graph_link(&f.g);
    SC_ASSERT(!st);
    autodiff_inference_graph(&f.g, &f.tg);
    st = plan_build(&f.g, &f.tg, &(sc_plan_options){0}, &p);
    SC_ASSERT(!st);
    n = params_changed_over_steps(&f, &f.g, &p);
    CHECK(n == 0, "inference plan: params_changed ran %d times in %d steps, want none", n, STEPS);
    plan_free(&p);
    graph_free(&f.g);
}

/* sc_data_all_finite on every float dtype, at the edges of finite (the largest value, a
 * subnormal, -0) and past them (either infinity, a NaN with a payload), in a scan long enough to be
 * split across threads; integers always pass. */
static void test_data_all_finite(void) {
    enum { N = 100003 };
    float *f = calloc(N, sizeof *f);
    SC_ASSERT(f);
    sc_desc d = {.dtype = SC_F32, .rank = 1, .dims = {N}};
    f[1] = 3.4028235e38f, f[2] = 1e-45f, f[3] = -0.0f;
    CHECK(sc_data_all_finite(&d, f), "f32: finite values taken for non-finite");
    float bad[3] = {INFINITY, -INFINITY, NAN};
    for (int k = 0; k < 3; k++) {
        f[N - 1] = bad[k];
        CHECK(!sc_data_all_finite(&d, f), "f32: %g at the end not found", (double)bad[k]);
    }
    memset(f, 0, N * sizeof *f);
    sc_desc dl = {.dtype = SC_BF16, .rank = 1, .dims = {2 * N}}; /* the 16-bit scan split across threads */
    uint16_t nan16 = 0xffc0u;
    memcpy((uint16_t *)(void *)f + 2 * N - 1, &nan16, sizeof nan16);
    CHECK(!sc_data_all_finite(&dl, f), "bf16: a NaN at the end of %d elements not found", 2 * N);
    free(f);
    uint16_t h[4] = {0x7bffu, 0x0001u, 0x8000u, 0}; /* f16: largest, subnormal, -0 */
    uint16_t b[4] = {0x7f7fu, 0x0001u, 0x8000u, 0}; /* bf16 */
    sc_desc d16 = {.dtype = SC_F16, .rank = 1, .dims = {4}}, db = {.dtype = SC_BF16, .rank = 1, .dims = {4}};
    CHECK(sc_data_all_finite(&d16, h) && sc_data_all_finite(&db, b), "16-bit: finite values taken for non-finite");
    h[3] = 0xfc00u, b[3] = 0x7fc1u; /* f16 -inf, bf16 NaN */
    CHECK(!sc_data_all_finite(&d16, h) && !sc_data_all_finite(&db, b), "16-bit: Inf or NaN not found");
    double x[2] = {1.7976931348623157e308, 0};
    sc_desc d64 = {.dtype = SC_F64, .rank = 1, .dims = {2}};
    CHECK(sc_data_all_finite(&d64, x), "f64: the largest double taken for non-finite");
    x[1] = -INFINITY;
    CHECK(!sc_data_all_finite(&d64, x), "f64: -inf not found");
    int32_t ints[2] = {-1, 0x7f800000};
    sc_desc di = {.dtype = SC_I32, .rank = 1, .dims = {2}};
    CHECK(sc_data_all_finite(&di, ints), "i32 data with an Inf's bits taken for non-finite");
}

/* Between steps the state's truth is its device copy (params not in place): the check of it in place
 * (plan_session_state_finite) finds a NaN or Inf put into any device copy, through the backend's
 * all_finite and without it (copies to the host), and reads no host data; the host data lags until
 * plan_exec_sync_params_to_host, which counts what it copied. */
static void test_state_finite(void) {
    pt_model m;
    sc_plan p;
    mlp_none_plan(&m, &p);
    sc_backend *be = NULL;
    sc_plan_session *s = NULL;
    sc_status st = backend_cpu_create(p.arena_bytes, &be);
    if (!st) st = plan_session_create(be, &m.g, &p, &s);
    pt_feeds f;
    pt_feeds_fill(&m, 1, &f);
    sc_tensor outs[16];
    if (!st) st = plan_session_step(s, f.t, outs);
    SC_ASSERT(!st);
    for (int i = 0; i < m.g.n_outputs; i++) sc_tensor_free_data(&outs[i]);
    int64_t dev_bytes = 0;
    int first = -1, n_dev = 0;
    for (int v = 0; v < m.g.n_values; v++)
        if (plan_session_state_on_device(s, v)) {
            n_dev++;
            dev_bytes += sc_desc_bytes(&m.g.values[v].desc);
            if (first < 0 && m.g.values[v].kind == SC_VALUE_PARAM) first = v;
        }
    CHECK(n_dev == m.tg.n_params + m.tg.n_states && first >= 0,
          "%d values on the device, want the %d parameters and %d states", n_dev, m.tg.n_params, m.tg.n_states);
    const sc_backend_i *own = be->iface;
    sc_backend_i no_check = *own;
    no_check.all_finite = NULL;
    for (int pass = 0; pass < 2 && first >= 0; pass++) {
        be->iface = pass ? &no_check : own;
        const char *how = pass ? "through the host" : "by the backend";
        float *w = plan_session_value(s, first);
        int64_t last = sc_desc_numel(&m.g.values[first].desc) - 1;
        float keep = w[last];
        bool finite = false;
        st = plan_session_state_finite(s, &finite);
        CHECK(!st && finite, "%s: the state after a step is not finite", how);
        float bad[2] = {NAN, -INFINITY};
        for (int k = 0; k < 2; k++) {
            w[last] = bad[k];
            finite = true;
            st = plan_session_state_finite(s, &finite);
            CHECK(!st && !finite, "%s: %g in the device copy of '%s' not found", how, (double)bad[k],
                  m.g.values[first].name);
            sc_status_free(st);
        }
        w[last] = keep;
    }
    be->iface = own;
    sc_plan_stats ps;
    plan_session_stats(s, &ps);
    CHECK(ps.bytes_synced == 0, "%lld bytes synced to the host before anything asked", (long long)ps.bytes_synced);
    const float *host = m.g.values[first].data, *dev = plan_session_value(s, first);
    int64_t n = sc_desc_numel(&m.g.values[first].desc);
    CHECK(memcmp(host, dev, (size_t)n * sizeof *host) != 0, "the step did not change '%s'", m.g.values[first].name);
    st = plan_exec_sync_params_to_host(s);
    plan_session_stats(s, &ps);
    CHECK(!st && ps.bytes_synced == dev_bytes, "synced %lld bytes, the device holds %lld", (long long)ps.bytes_synced,
          (long long)dev_bytes);
    CHECK(memcmp(host, dev, (size_t)n * sizeof *host) == 0, "the host copy of '%s' is not the device's after the sync",
          m.g.values[first].name);
    sc_status_free(st);
    plan_session_free(s);
    backend_destroy(be);
    plan_free(&p);
    graph_free(&m.g);
}

/* The eviction floor plan_build names for a budget of one byte (-1 if it names none). */
static int64_t evict_floor_of(pt_kind kind) {
    pt_model m;
    pt_build(&m, kind);
    sc_plan_options o = {.strategy = SC_STRATEGY_EVICT, .budget = 1};
    sc_plan p;
    sc_status st = plan_build(&m.g, &m.tg, &o, &p);
    graph_free(&m.g);
    CHECK(st, "%s/evict: a budget of one byte planned", pt_kind_name(kind));
    if (!st) {
        plan_free(&p);
        return -1;
    }
    const char *at = strstr(sc_status_message(st), "smallest feasible budget is ");
    int64_t floor = at ? strtoll(at + strlen("smallest feasible budget is "), NULL, 10) : -1;
    CHECK(floor > 0, "%s/evict: infeasible without naming the floor: %s", pt_kind_name(kind), sc_status_message(st));
    sc_status_free(st);
    return floor;
}

/* Eviction plans (schedule/evict.c) at budgets from the floor to none's arena run as run_case checks
 * them, and one byte under the floor is refused. Returns how many of them recompute. */
static int evict_cases(pt_kind kind, int64_t high, const pt_model *ref, const float *ref_loss) {
    int64_t low = evict_floor_of(kind);
    if (low <= 0) return 0;
    int recomputing = 0;
    for (int k = 0; k <= 4; k++) {
        int64_t budget = low + (high > low ? (high - low) * k / 4 : 0);
        pt_model m;
        pt_build(&m, kind);
        sc_plan_options o = {.strategy = SC_STRATEGY_EVICT, .budget = budget};
        sc_plan p;
        sc_status st = plan_build(&m.g, &m.tg, &o, &p);
        graph_free(&m.g);
        CHECK(!st, "%s/evict/budget %lld (floor %lld): %s", pt_kind_name(kind), (long long)budget, (long long)low,
              st ? sc_status_message(st) : "");
        if (st) {
            sc_status_free(st);
            continue;
        }
        recomputing += p.recompute_flops > 0;
        plan_free(&p);
        run_case(kind, SC_STRATEGY_EVICT, 0, budget, ref, ref_loss, NULL, NULL);
    }
    pt_model m;
    pt_build(&m, kind);
    sc_plan_options o = {.strategy = SC_STRATEGY_EVICT, .budget = low - 1};
    sc_plan p;
    sc_status st = plan_build(&m.g, &m.tg, &o, &p);
    graph_free(&m.g);
    CHECK(st, "%s/evict: one byte under the floor %lld planned", pt_kind_name(kind), (long long)low);
    if (!st) plan_free(&p);
    sc_status_free(st);
    return recomputing;
}

int main(void) {
    pt_kind kinds[] = {PT_MLP, PT_RESIDUAL, PT_DENSE};
    int refined = 0, evicting = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        pt_model ref;
        pt_build(&ref, kinds[k]);
        float ref_loss[STEPS];
        reference_run(&ref, ref_loss);
        int F = ref.tg.n_forward_nodes;
        int64_t none_arena = 0, sqrt_arena = 0, dc_arena = 0;
        int keeps = 0;
        run_case(kinds[k], SC_STRATEGY_NONE, 0, 0, &ref, ref_loss, &none_arena, NULL);
        run_case(kinds[k], SC_STRATEGY_SQRT, F, 0, &ref, ref_loss, NULL, NULL);
        run_case(kinds[k], SC_STRATEGY_SQRT, 3, 0, &ref, ref_loss, &sqrt_arena, NULL);
        run_case(kinds[k], SC_STRATEGY_DC, F, 0, &ref, ref_loss, &dc_arena, NULL);
        run_case(kinds[k], SC_STRATEGY_OPTIMAL, F, 0, &ref, ref_loss, NULL, NULL);
        /* under a budget of the larger of their arena and none's, refinement keeps some of what
           sqrt and dc recompute */
        run_case(kinds[k], SC_STRATEGY_SQRT, 3, sqrt_arena > none_arena ? sqrt_arena : none_arena, &ref, ref_loss,
                 NULL, &keeps);
        refined += keeps;
        run_case(kinds[k], SC_STRATEGY_DC, F, dc_arena > none_arena ? dc_arena : none_arena, &ref, ref_loss, NULL,
                 &keeps);
        refined += keeps;
        evicting += evict_cases(kinds[k], none_arena, &ref, ref_loss);
        graph_free(&ref.g);
    }
    CHECK(refined > 0, "no plan under a budget was refined (schedule/refine.c): nothing checks refined plans");
    CHECK(evicting > 0, "no eviction plan recomputed anything (schedule/evict.c): nothing checks them");
    test_capacity();
    test_link();
    test_params_changed();
    test_data_all_finite();
    test_state_finite();
    if (failures) printf("%d failures\n", failures);
    else printf("ok\n");
    return failures ? 1 : 0;
}
