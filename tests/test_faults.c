/* Host allocation failure by injection (core/alloc_fail.h): for a small training graph
 * (Gemm, Relu, a skip Add and a Concat; SGD with momentum), the library path a training run takes
 * after import -- graph_link, autodiff_build_training, plan_build (sqrt with activation streaming
 * and the none plan), the CPU backend, a plan session, two plan steps, the parameter sync, and two
 * steps of the store-everything executor -- is run once clean to count its allocations, then once
 * per allocation n = 1 .. count with the n-th failing. Every run must end in a status (the failure
 * reported) or in success (the failure absorbed), never a crash; everything is freed on every path,
 * which the ASan build (LeakSanitizer at exit) checks. Fails through the exit code.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "tests/ref_executor.h"
#include "backends/plan_exec.h"
#include "core/alloc_fail.h"
#include "plan_test_graphs.h"

static int failures;

/* The forward graph (no allocation failure armed while it is built: the pt_ helpers assert). */
static void forward_build(sc_graph *g, int *x) {
    graph_init(g);
    pt_rng = 4242;
    *x = pt_input(g, "x", PT_N, PT_IN);
    int w0 = pt_param(g, "W0", PT_H, PT_IN, 0.5), b0 = pt_param(g, "b0", PT_H, 0, 0.1);
    int w1 = pt_param(g, "W1", PT_H, PT_H, 0.3), w2 = pt_param(g, "W2", PT_C, 2 * PT_H, 0.3);
    int h = pt_relu(g, pt_gemm(g, *x, w0, b0, "g0"), "h");
    int r = pt_relu(g, pt_gemm(g, h, w1, -1, "g1"), "r");
    int add[2] = {r, h};
    int s = pt_node(g, SC_OP_ADD, NULL, add, 2, "s");
    sc_attrs cat;
    memset(&cat, 0, sizeof cat);
    cat.axis.axis = 1;
    int c[2] = {s, h};
    int cc = pt_node(g, SC_OP_CONCAT, &cat, c, 2, "cat");
    pt_output(g, pt_gemm(g, cc, w2, -1, "logits"));
}

typedef struct {
    float x[PT_N * PT_IN];
    int64_t labels[PT_N];
    float lr;
    int64_t step;
    sc_tensor t[8];
} feeds;

static void feeds_fill(const sc_graph *g, const sc_training_graph *tg, int x, int step, feeds *f) {
    for (int i = 0; i < PT_N * PT_IN; i++) f->x[i] = (float)((i * 37 + step * 11) % 17) / 17.0f - 0.5f;
    for (int i = 0; i < PT_N; i++) f->labels[i] = (i + step) % PT_C;
    f->lr = 0.1f;
    f->step = step;
    for (int i = 0; i < g->n_inputs && i < 8; i++) {
        int v = g->inputs[i];
        f->t[i].desc = g->values[v].desc;
        f->t[i].data = v == x ? (void *)f->x : v == tg->labels ? (void *)f->labels : v == tg->lr ? (void *)&f->lr
                       : v == tg->step ? (void *)&f->step : NULL;
    }
}

/* One plan built and run for two steps. */
static sc_status run_plan(sc_graph *g, sc_training_graph *tg, int x, const sc_plan_options *o) {
    sc_plan p;
    SC_TRY(plan_build(g, tg, o, &p));
    sc_backend *be = NULL;
    sc_plan_session *s = NULL;
    sc_status st = backend_cpu_create(0, &be);
    if (!st) st = plan_session_create(be, g, &p, &s);
    for (int step = 1; !st && step <= 2; step++) {
        feeds f;
        feeds_fill(g, tg, x, step, &f);
        sc_tensor outs[8] = {0};
        SC_ASSERT(g->n_outputs <= 8);
        st = plan_session_step(s, f.t, outs);
        for (int i = 0; i < g->n_outputs; i++) sc_tensor_free_data(&outs[i]);
    }
    if (!st) st = plan_exec_sync_params_to_host(s);
    plan_session_free(s);
    if (be) backend_destroy(be);
    plan_free(&p);
    return st;
}

/* The whole path; every allocation after the forward graph is counted. */
static sc_status workflow(int64_t fail_at) {
    sc_graph g;
    int x;
    sc_alloc_fail_arm(0);
    forward_build(&g, &x);
    sc_alloc_fail_arm(fail_at);
    sc_status st = graph_link(&g);
    sc_training_graph tg;
    memset(&tg, 0, sizeof tg);
    if (!st) {
        sc_train_options o;
        sc_train_options_default(&o);
        o.optim = SC_OPTIM_SGD;
        o.momentum = 0.9f;
        st = autodiff_build_training(&g, &o, &tg);
    }
    if (!st) {
        sc_plan_options o = {0};
        o.strategy = SC_STRATEGY_SQRT;
        o.offload = SC_OFFLOAD_ACTIVATIONS;
        o.window_max = 2;
        st = run_plan(&g, &tg, x, &o);
    }
    if (!st) {
        sc_plan_options o = {0};
        st = run_plan(&g, &tg, x, &o);
    }
    for (int step = 1; !st && step <= 2; step++) {
        feeds f;
        feeds_fill(&g, &tg, x, step, &f);
        sc_tensor outs[8] = {0};
        st = sc_forward_cpu(&g, f.t, outs);
        for (int i = 0; !st && i < g.n_outputs; i++) sc_tensor_free_data(&outs[i]);
    }
    graph_free(&g);
    return st;
}


int main(void) {
    (void)pt_build;
    cpu_set_num_threads(1);
    sc_status st = workflow(0);
    int64_t count = sc_alloc_fail_count();
    if (st) {
        printf("FAIL: the clean run failed: %s\n", sc_status_message(st));
        return 1;
    }
    printf("clean run: %lld counted allocations\n", (long long)count);
    int reported = 0, absorbed = 0;
    for (int64_t n = 1; n <= count; n++) {
        st = workflow(n);
        bool fired = sc_alloc_fail_fired();
        sc_alloc_fail_arm(0);
        if (!fired) {
            printf("FAIL: allocation %lld of %lld never happened (the path is not deterministic)\n", (long long)n,
                   (long long)count);
            failures++;
        } else if (st) {
            reported++;
            if (n <= 3 || n == count || n % 50 == 0) printf("allocation %lld fails: %s\n", (long long)n, sc_status_message(st));
        } else {
            absorbed++;
            printf("allocation %lld fails: absorbed (the run succeeded)\n", (long long)n);
        }
        sc_status_free(st);
    }
    printf("%lld injected failures: %d reported as a status, %d absorbed, 0 crashes\n", (long long)count, reported,
           absorbed);
    if (failures) printf("%d failures\n", failures);
    else printf("ok\n");
    return failures ? 1 : 0;
}
