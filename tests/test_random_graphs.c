/* Random-graph property test for the planner.
 *
 * A seeded generator builds random valid training DAGs from supported ops: Gemm (with and without
 * bias), MatMul, Add/Mul with broadcasting ([N,d] with [N,d], [d], [1,d] or [N,1]), Relu, Tanh,
 * Sigmoid, Concat (joins), Split (two outputs), LayerNormalization, Softmax, and weights shared by
 * two nodes. Inputs of each node are drawn from every live activation (not just the last), so graphs
 * branch and join; every activation left unread is concatenated into the classifier, so nothing is
 * dead. The training graph is SGD with momentum 0.9 and cross-entropy, keep_grads on.
 *
 * The property, for every graph: each strategy (none, sqrt, dc, dc with 2 slots, optimal, evict, auto),
 * each streaming mode (none, weights, activations; evict refuses streaming, checked), at
 *   - a random budget between the minimum the planner reports (planning at 1 byte fails naming the
 *     smallest plan found) and the store-everything peak: the plan is built, fits the budget, runs
 *     for 2 steps on a CPU device capped at the budget, and its losses, gradients, parameters and
 *     optimizer state are BIT-IDENTICAL (memcmp) to the `none` plan's; the measured arena
 *     high-water mark equals the planned arena_bytes;
 *   - the reported minimum itself: it plans (search.h promises this);
 *   - one byte below the minimum: plan_build reports the budget infeasible.
 * Each graph prints its seed; SEED=<n> reruns that one graph, `--graphs N` runs N graphs (default
 * 200), `--seed S` starts at S. Fails through the exit code.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "tests/ref_executor.h"
#include "backends/plan_exec.h"
#include "plan_test_graphs.h"

static int failures, verbose;

#define CHECK(cond, ...)                                                                                   \
    do {                                                                                                   \
        if (!(cond)) {                                                                                     \
            printf("FAIL seed %" PRIu64 ": ", cur_seed);                                                  \
            printf(__VA_ARGS__);                                                                           \
            printf("\n");                                                                                  \
            failures++;                                                                                    \
        }                                                                                                  \
    } while (0)

enum { STEPS = 2, MAX_ACT = 64, MAX_W = 64, MAX_OUT = 256 };

static uint64_t cur_seed;

/* The test's own choices (segments, budgets): a generator apart from pt_rng, which every graph
 * build reseeds. */
static uint64_t pick_rng;
static double pick_urand(void) {
    pick_rng ^= pick_rng >> 12;
    pick_rng ^= pick_rng << 25;
    pick_rng ^= pick_rng >> 27;
    return (double)((pick_rng * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

/* ---- the generator ---- */

typedef struct {
    int v;
    int64_t d; /* the activation is [N, d] */
    int used;
} rg_act;

typedef struct {
    int v;
    int64_t a, b; /* shape [a, b] (b = 0: [a]) */
    int uses;
} rg_weight;

typedef struct {
    pt_model m;
    int64_t n, d_in, classes;
    rg_act act[MAX_ACT];
    int n_act;
    rg_weight w[MAX_W];
    int n_w, n_nodes, n_shared;
    char desc[512]; /* op summary, printed with the seed */
} rg_graph;

static int64_t rnd(int64_t lo, int64_t hi) { return lo + (int64_t)(pt_urand() * (double)(hi - lo + 1)) % (hi - lo + 1); }

static void note(rg_graph *r, const char *op) {
    size_t l = strlen(r->desc);
    if (l + strlen(op) + 2 < sizeof r->desc) snprintf(r->desc + l, sizeof r->desc - l, "%s%s", l ? " " : "", op);
}

/* An activation to read: any live one, the newest ones twice as likely (long chains and branches). */
static rg_act *pick_act(rg_graph *r) {
    int i = pt_urand() < 0.5 ? r->n_act - 1 - (int)rnd(0, r->n_act > 2 ? 2 : r->n_act - 1) : (int)rnd(0, r->n_act - 1);
    r->act[i].used++;
    return &r->act[i];
}

static rg_act *push_act(rg_graph *r, int v, int64_t d) {
    SC_ASSERT(r->n_act < MAX_ACT);
    r->act[r->n_act] = (rg_act){v, d, 0};
    r->n_nodes++;
    return &r->act[r->n_act++];
}

/* A parameter of shape [a, b]: an existing one of that shape (shared weights) a third of the time. */
static int weight(rg_graph *r, int64_t a, int64_t b, double scale) {
    if (pt_urand() < 0.35)
        for (int i = 0; i < r->n_w; i++)
            if (r->w[i].a == a && r->w[i].b == b) {
                if (r->w[i].uses++ == 1) r->n_shared++;
                return r->w[i].v;
            }
    char name[32];
    snprintf(name, sizeof name, "w%d", r->n_w);
    SC_ASSERT(r->n_w < MAX_W);
    int v = pt_param(&r->m.g, name, a, b, scale);
    r->w[r->n_w++] = (rg_weight){v, a, b, 1};
    return v;
}

static const char *vname(rg_graph *r) {
    static char name[32];
    snprintf(name, sizeof name, "t%d", r->n_nodes);
    return name;
}

static sc_attrs axis_attrs(int64_t axis, int64_t num_outputs) {
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.axis.axis = axis;
    a.axis.num_outputs = num_outputs;
    return a;
}

static void gen_gemm(rg_graph *r) {
    rg_act *x = pick_act(r);
    int64_t h = rnd(2, 12);
    int64_t d = x->d;
    int w = weight(r, h, d, 0.5);
    int b = pt_urand() < 0.5 ? weight(r, h, 0, 0.1) : -1;
    push_act(r, pt_gemm(&r->m.g, x->v, w, b, vname(r)), h);
    note(r, b >= 0 ? "gemm+b" : "gemm");
}

static void gen_matmul(rg_graph *r) {
    rg_act *x = pick_act(r);
    int64_t h = rnd(2, 12), d = x->d;
    int in[2] = {x->v, weight(r, d, h, 0.5)};
    push_act(r, pt_node(&r->m.g, SC_OP_MATMUL, NULL, in, 2, vname(r)), h);
    note(r, "matmul");
}

static void gen_unary(rg_graph *r) {
    static const sc_op ops[] = {SC_OP_RELU, SC_OP_TANH, SC_OP_SIGMOID};
    static const char *names[] = {"relu", "tanh", "sigmoid"};
    int k = (int)rnd(0, 2);
    rg_act *x = pick_act(r);
    int64_t d = x->d;
    push_act(r, pt_node(&r->m.g, ops[k], NULL, &x->v, 1, vname(r)), d);
    note(r, names[k]);
}

/* Add or Mul: with another activation of the same width, else with a broadcast parameter. */
static void gen_binary(rg_graph *r) {
    sc_op op = pt_urand() < 0.5 ? SC_OP_ADD : SC_OP_MUL;
    rg_act *x = pick_act(r);
    int64_t d = x->d;
    int xv = x->v, other = -1;
    for (int i = r->n_act - 1; i >= 0 && pt_urand() < 0.7; i--)
        if (r->act[i].v != xv && r->act[i].d == d) {
            other = r->act[i].v;
            r->act[i].used++;
            break;
        }
    const char *what = "act";
    if (other < 0) {
        int form = (int)rnd(0, 2);
        double s = op == SC_OP_MUL ? 1.0 : 0.3;
        other = form == 0 ? weight(r, d, 0, s) : form == 1 ? weight(r, 1, d, s) : weight(r, r->n, 1, s);
        what = form == 0 ? "[d]" : form == 1 ? "[1,d]" : "[N,1]";
    }
    int in[2] = {xv, other};
    if (pt_urand() < 0.5) in[0] = other, in[1] = xv;
    push_act(r, pt_node(&r->m.g, op, NULL, in, 2, vname(r)), d);
    char buf[24];
    snprintf(buf, sizeof buf, "%s%s", op == SC_OP_ADD ? "add" : "mul", what);
    note(r, buf);
}

static void gen_concat(rg_graph *r) {
    if (r->n_act < 2) return gen_unary(r);
    rg_act *a = pick_act(r);
    int av = a->v;
    int64_t ad = a->d;
    rg_act *b = pick_act(r);
    sc_attrs at = axis_attrs(1, 0);
    int in[2] = {av, b->v};
    int64_t d = ad + b->d;
    push_act(r, pt_node(&r->m.g, SC_OP_CONCAT, &at, in, 2, vname(r)), d);
    note(r, "concat");
}

static void gen_split(rg_graph *r) {
    rg_act *x = NULL;
    for (int i = r->n_act - 1; i >= 0; i--)
        if (r->act[i].d % 2 == 0) {
            x = &r->act[i];
            break;
        }
    if (!x) return gen_gemm(r);
    x->used++;
    sc_graph *g = &r->m.g;
    sc_status st = SC_OK;
    int64_t half = x->d / 2;
    int xv = x->v;
    char name[32];
    int outs[2];
    for (int k = 0; k < 2; k++) {
        snprintf(name, sizeof name, "t%d_%d", r->n_nodes, k);
        outs[k] = graph_add_value(g, name, SC_VALUE_ACT, NULL, &st);
        SC_ASSERT(outs[k] >= 0);
    }
    int n = graph_add_node(g, SC_OP_SPLIT, name, &xv, 1, outs, 2, &st);
    SC_ASSERT(n >= 0);
    sc_attrs split = axis_attrs(1, 2);
    SC_ASSERT(!graph_node_set_attrs(g, &g->nodes[n], &split));
    st = sc_shape_fns[SC_OP_SPLIT](g, &g->nodes[n]);
    if (st) printf("split shape: %s\n", sc_status_message(st));
    SC_ASSERT(!st);
    push_act(r, outs[0], half);
    r->n_nodes--;
    push_act(r, outs[1], half);
    note(r, "split");
}

static void gen_layer_norm(rg_graph *r) {
    rg_act *x = pick_act(r);
    int64_t d = x->d;
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.layer_norm = (sc_layer_norm_attrs){-1, 1e-5f, SC_F32};
    int in[3] = {x->v, weight(r, d, 0, 1.0), weight(r, d, 0, 0.1)};
    push_act(r, pt_node(&r->m.g, SC_OP_LAYER_NORM, &a, in, 3, vname(r)), d);
    note(r, "layernorm");
}

static void gen_softmax(rg_graph *r) {
    rg_act *x = pick_act(r);
    int64_t d = x->d;
    sc_attrs a = axis_attrs(-1, 0);
    push_act(r, pt_node(&r->m.g, SC_OP_SOFTMAX, &a, &x->v, 1, vname(r)), d);
    note(r, "softmax");
}

/* Builds the graph of seed into r (fresh): same seed, same graph and same weights. */
static void rg_build(rg_graph *r, uint64_t seed) {
    memset(r, 0, sizeof *r);
    pt_rng = seed * 0x9E3779B97F4A7C15ULL + 1;
    sc_graph *g = &r->m.g;
    graph_init(g);
    r->n = rnd(1, 6);
    r->d_in = rnd(2, 10);
    r->classes = rnd(2, 5);
    r->m.x = pt_input(g, "x", r->n, r->d_in);
    r->act[r->n_act++] = (rg_act){r->m.x, r->d_in, 0};
    int n_ops = (int)rnd(2, 14);
    static void (*const gens[])(rg_graph *) = {gen_gemm, gen_gemm, gen_matmul, gen_unary, gen_unary, gen_binary,
                                                gen_binary, gen_concat, gen_split, gen_layer_norm, gen_softmax};
    for (int i = 0; i < n_ops && r->n_act < MAX_ACT - 4; i++) {
        void (*f)(rg_graph *) = gens[rnd(0, (int64_t)(sizeof gens / sizeof *gens) - 1)];
        /* keep widths bounded: concat of wide values grows fast */
        if (f == gen_concat && r->act[r->n_act - 1].d > 24) f = gen_gemm;
        f(r);
    }
    /* every unread activation (the input excepted) joins the classifier input */
    int leaves[MAX_ACT], n_leaves = 0;
    int64_t width = 0;
    for (int i = 1; i < r->n_act; i++)
        if (!r->act[i].used) leaves[n_leaves++] = r->act[i].v, width += r->act[i].d;
    if (!n_leaves) leaves[n_leaves++] = r->act[r->n_act - 1].v, width = r->act[r->n_act - 1].d;
    int head = leaves[0];
    if (n_leaves > 1) {
        sc_attrs at = axis_attrs(1, 0);
        head = pt_node(g, SC_OP_CONCAT, &at, leaves, n_leaves, "leaves");
        note(r, "concat-leaves");
    }
    int wo = weight(r, r->classes, width, 0.4);
    pt_output(g, pt_gemm(g, head, wo, -1, "logits"));
    sc_train_options o;
    sc_train_options_default(&o);
    o.optim = SC_OPTIM_SGD;
    o.momentum = 0.9f;
    o.keep_grads = true;
    sc_status st = graph_link(g);
    if (!st) st = autodiff_build_training(g, &o, &r->m.tg);
    if (st) printf("seed %" PRIu64 ": building: %s\n", seed, sc_status_message(st));
    SC_ASSERT(!st);
}

/* ---- running plans ---- */

typedef struct {
    float x[64 * 64];
    int64_t labels[64];
    float lr;
    int64_t step;
    sc_tensor t[8];
} rg_feeds;

static void rg_feeds_fill(const rg_graph *r, int step, rg_feeds *f) {
    uint64_t save = pt_rng;
    pt_rng = cur_seed * 31 + 7 + (uint64_t)step;
    for (int64_t i = 0; i < r->n * r->d_in; i++) f->x[i] = (float)(2 * pt_urand() - 1);
    for (int64_t i = 0; i < r->n; i++) f->labels[i] = (int64_t)(pt_urand() * (double)r->classes) % r->classes;
    pt_rng = save;
    f->lr = 0.05f;
    f->step = step;
    const sc_graph *g = &r->m.g;
    SC_ASSERT(g->n_inputs <= 8);
    for (int i = 0; i < g->n_inputs; i++) {
        int v = g->inputs[i];
        f->t[i].desc = g->values[v].desc;
        f->t[i].data = v == r->m.x ? (void *)f->x : v == r->m.tg.labels ? (void *)f->labels
                       : v == r->m.tg.lr ? (void *)&f->lr : v == r->m.tg.step ? (void *)&f->step : NULL;
        SC_ASSERT(f->t[i].data);
    }
}

/* What a run leaves: every output of every step and every PARAM / OPT_STATE value, concatenated. */
typedef struct {
    unsigned char *bytes;
    size_t n;
    int64_t peak[STEPS];
} rg_result;

static void result_add(rg_result *res, const void *p, size_t n) {
    res->bytes = realloc(res->bytes, res->n + n);
    SC_ASSERT(res->bytes);
    memcpy(res->bytes + res->n, p, n);
    res->n += n;
}

/* Runs plan p (built on r's graph) for STEPS steps on a device of capacity bytes. */
static sc_status run_plan(rg_graph *r, const sc_plan *p, int64_t capacity, rg_result *res) {
    memset(res, 0, sizeof *res);
    sc_backend *be = NULL;
    sc_plan_session *s = NULL;
    sc_graph *g = &r->m.g;
    sc_status st = backend_cpu_create(capacity, &be);
    if (!st) st = plan_session_create(be, g, p, &s);
    for (int step = 1; !st && step <= STEPS; step++) {
        rg_feeds f;
        rg_feeds_fill(r, step, &f);
        sc_tensor outs[MAX_OUT];
        SC_ASSERT(g->n_outputs <= MAX_OUT);
        st = plan_session_step(s, f.t, outs);
        if (st) break;
        for (int i = 0; i < g->n_outputs; i++) {
            result_add(res, outs[i].data, (size_t)sc_desc_bytes(&outs[i].desc));
            sc_tensor_free_data(&outs[i]);
        }
        sc_plan_stats ps;
        plan_session_stats(s, &ps);
        res->peak[step - 1] = ps.peak_bytes;
        for (int i = 0; !st && i < r->m.tg.n_writebacks; i++)
            st = plan_session_copy_value(s, r->m.tg.wb_src[i], r->m.tg.wb_dst[i]);
    }
    if (!st) st = plan_exec_sync_params_to_host(s);
    for (int v = 0; !st && v < g->n_values; v++)
        if (g->values[v].kind == SC_VALUE_PARAM || g->values[v].kind == SC_VALUE_OPT_STATE)
            result_add(res, g->values[v].data, (size_t)sc_desc_bytes(&g->values[v].desc));
    plan_session_free(s);
    backend_destroy(be);
    return st;
}

/* The smallest budget plan_build reports for opt (planning at 1 byte must fail and name it); -1 if
 * the message names none. */
static int64_t reported_minimum(uint64_t seed, const sc_plan_options *opt, const char *what) {
    rg_graph *r = malloc(sizeof *r);
    rg_build(r, seed);
    sc_plan_options o = *opt;
    o.budget = 1;
    sc_plan p;
    sc_status st = plan_build(&r->m.g, &r->m.tg, &o, &p);
    int64_t min = -1;
    CHECK(st, "%s: a budget of 1 byte was met (arena %lld)", what, st ? 0LL : (long long)p.arena_bytes);
    if (!st) plan_free(&p);
    /* the two forms plan.c writes */
    static const char *keys[] = {"smallest plan found: ", "the smallest feasible budget is "};
    for (int k = 0; st && min < 0 && k < 2; k++) {
        const char *at = strstr(sc_status_message(st), keys[k]);
        if (at) min = strtoll(at + strlen(keys[k]), NULL, 10);
    }
    if (min < 0 && st) CHECK(0, "%s: infeasible without naming the minimum: %s", what, sc_status_message(st));
    sc_status_free(st);
    graph_free(&r->m.g);
    free(r);
    return min;
}

/* Builds (fresh graph) and runs one plan; compares with ref. expect_ok false: must be infeasible. */
static void check_config(uint64_t seed, const sc_plan_options *opt, const rg_result *ref, bool expect_ok, const char *what) {
    rg_graph *r = malloc(sizeof *r);
    rg_build(r, seed);
    sc_plan p;
    sc_status st = plan_build(&r->m.g, &r->m.tg, opt, &p);
    if (!expect_ok) {
        CHECK(st && strstr(sc_status_message(st), "budget"), "%s: budget %lld below the reported minimum was met (arena %lld)",
              what, (long long)opt->budget, st ? 0LL : (long long)p.arena_bytes);
    } else {
        CHECK(!st, "%s: budget %lld: %s", what, (long long)opt->budget, st ? sc_status_message(st) : "");
    }
    if (st) {
        sc_status_free(st);
        graph_free(&r->m.g);
        free(r);
        return;
    }
    if (expect_ok) {
        CHECK(opt->budget <= 0 || p.arena_bytes <= opt->budget, "%s: arena %lld over the budget %lld", what,
              (long long)p.arena_bytes, (long long)opt->budget);
        rg_result res;
        int64_t cap = opt->budget > 0 ? opt->budget : p.arena_bytes;
        st = run_plan(r, &p, cap, &res);
        CHECK(!st, "%s: budget %lld: running: %s", what, (long long)opt->budget, st ? sc_status_message(st) : "");
        if (!st) {
            CHECK(res.n == ref->n && memcmp(res.bytes, ref->bytes, res.n) == 0,
                  "%s: budget %lld (plan %s, offload %s, arena %lld): losses/gradients/weights differ from the none plan",
                  what, (long long)opt->budget, plan_strategy_name(p.strategy), plan_offload_name(p.offload),
                  (long long)p.arena_bytes);
            for (int i = 0; i < STEPS; i++)
                CHECK(res.peak[i] == p.arena_bytes, "%s: budget %lld: step %d measured peak %lld, planned %lld", what,
                      (long long)opt->budget, i + 1, (long long)res.peak[i], (long long)p.arena_bytes);
        }
        sc_status_free(st);
        free(res.bytes);
    }
    plan_free(&p);
    graph_free(&r->m.g);
    free(r);
}

typedef struct {
    const char *name;
    sc_strategy strategy;
    int slots;
} rg_strategy;

static const rg_strategy strategies[] = {
    {"none", SC_STRATEGY_NONE, 0}, {"sqrt", SC_STRATEGY_SQRT, 0},       {"dc", SC_STRATEGY_DC, 0},
    {"dc-slots2", SC_STRATEGY_DC, 2}, {"optimal", SC_STRATEGY_OPTIMAL, 0}, {"evict", SC_STRATEGY_EVICT, 0},
    {"auto", SC_STRATEGY_AUTO, 0},
};
static const sc_offload offloads[] = {SC_OFFLOAD_NONE, SC_OFFLOAD_WEIGHTS, SC_OFFLOAD_ACTIVATIONS};

/* evict plans without streaming only: asked to stream, plan_build says so. */
static void evict_refuses_streaming(uint64_t seed, sc_offload off) {
    rg_graph *r = malloc(sizeof *r);
    rg_build(r, seed);
    sc_plan_options o = {.strategy = SC_STRATEGY_EVICT, .offload = off, .budget = 1 << 30};
    sc_plan p;
    sc_status st = plan_build(&r->m.g, &r->m.tg, &o, &p);
    CHECK(st && strstr(sc_status_message(st), "without streaming"), "evict/offload-%s: %s", plan_offload_name(off),
          st ? sc_status_message(st) : "planned");
    if (!st) plan_free(&p);
    sc_status_free(st);
    graph_free(&r->m.g);
    free(r);
}

static int run_graph(uint64_t seed) {
    int before = failures;
    cur_seed = seed;
    rg_graph *r = malloc(sizeof *r);
    rg_build(r, seed);
    int F = r->m.tg.n_forward_nodes, n_nodes = r->m.g.n_nodes, n_params = r->m.tg.n_params, shared = r->n_shared;
    sc_plan_options none = {0};
    sc_plan p;
    sc_status st = plan_build(&r->m.g, &r->m.tg, &none, &p);
    CHECK(!st, "none plan: %s", st ? sc_status_message(st) : "");
    if (st) {
        sc_status_free(st);
        graph_free(&r->m.g);
        free(r);
        return 1;
    }
    rg_result ref;
    int64_t none_peak = p.arena_bytes;
    st = run_plan(r, &p, p.arena_bytes, &ref);
    CHECK(!st, "none plan run: %s", st ? sc_status_message(st) : "");
    sc_status_free(st);
    plan_free(&p);
    printf("seed %" PRIu64 ": N=%lld in=%lld C=%lld, %d forward / %d nodes, %d params (%d shared), none peak %lld: %s\n", seed,
           (long long)r->n, (long long)r->d_in, (long long)r->classes, F, n_nodes, n_params, shared,
           (long long)none_peak, r->desc);
    fflush(stdout);
    graph_free(&r->m.g);
    free(r);
    pick_rng = seed * 0xD1B54A32D192ED03ULL + 0xABCDEF12345ULL;
    for (size_t si = 0; si < sizeof strategies / sizeof *strategies; si++) {
        for (size_t oi = 0; oi < sizeof offloads / sizeof *offloads; oi++) {
            if (strategies[si].strategy == SC_STRATEGY_EVICT && offloads[oi] != SC_OFFLOAD_NONE) {
                evict_refuses_streaming(seed, offloads[oi]);
                continue;
            }
            sc_plan_options o = {0};
            o.strategy = strategies[si].strategy;
            o.slots = strategies[si].slots;
            o.offload = offloads[oi];
            /* sometimes fewer segments than forward nodes (cuts the planner must choose) */
            if (o.strategy != SC_STRATEGY_NONE && pick_urand() < 0.3) o.segments = 1 + (int)(pick_urand() * F) % F;
            char what[96];
            snprintf(what, sizeof what, "%s/offload-%s/segments %d", strategies[si].name, plan_offload_name(o.offload),
                     o.segments);
            int64_t min = reported_minimum(seed, &o, what);
            if (min <= 0) continue;
            int64_t hi = none_peak > min ? none_peak : min;
            o.budget = min + (int64_t)(pick_urand() * (double)(hi - min + 1));
            if (o.budget > hi) o.budget = hi;
            if (verbose) printf("  %s: min %lld budget %lld\n", what, (long long)min, (long long)o.budget);
            check_config(seed, &o, &ref, true, what);
            o.budget = min;
            check_config(seed, &o, &ref, true, what);
            /* Without streaming the named minimum is exact (the smallest lowered plan of the
             * budget-independent candidates), so one byte less must be refused. With streaming it is
             * the smallest plan the search found, not a proven minimum (a budgeted schedule plus
             * a window search can land below it), so only its feasibility is asserted above. */
            if (o.offload == SC_OFFLOAD_NONE) {
                o.budget = min - 1;
                check_config(seed, &o, &ref, false, what);
            }
        }
    }
    free(ref.bytes);
    if (failures > before) printf("seed %" PRIu64 ": %d failures (rerun: SEED=%" PRIu64 ")\n", seed, failures - before, seed);
    return failures > before;
}

int main(int argc, char **argv) {
    int n_graphs = 200;
    uint64_t first = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--graphs") && i + 1 < argc) n_graphs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) first = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-v")) verbose = 1;
        else {
            fprintf(stderr, "usage: %s [--graphs N] [--seed S] [-v]   (SEED=n reruns one graph)\n", argv[0]);
            return 2;
        }
    }
    (void)pt_build;
    /* tiny kernels: one thread avoids OpenMP wake-ups dominating (results are per thread count) */
    cpu_set_num_threads(1);
    const char *one = getenv("SEED");
    if (one && *one) first = strtoull(one, NULL, 10), n_graphs = 1;
    int bad_graphs = 0;
    for (int i = 0; i < n_graphs; i++) bad_graphs += run_graph(first + (uint64_t)i);
    /* seeds past the default range that once failed: 396, a gradient that a host update reads while
       it is being prefetched back for a device node (dc --slots 2 --offload weights) */
    static const uint64_t regressions[] = {396};
    for (size_t i = 0; !(one && *one) && i < sizeof regressions / sizeof *regressions; i++)
        if (regressions[i] < first || regressions[i] >= first + (uint64_t)n_graphs) bad_graphs += run_graph(regressions[i]);
    printf("%d graphs, %d failing, %d failed checks\n", n_graphs, bad_graphs, failures);
    return failures ? 1 : 0;
}
