/* The kernel-shape table (train/cost_profile.h): keys that tell shapes apart, the cache's round trip
 * (measured once, then read back to the bit), damaged cache lines dropped, node times applied to
 * every node of a shape, which nodes are timed alone (not views, not ops whose integer inputs come
 * at run time), and off with SCORCH_COST_PROFILE=off; ops timed on a backend's own arena
 * (bench_time_device, as a GPU times them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/graph.h"
#include "tests/check.h"
#include "train/cost_bench.h"
#include "train/cost_profile.h"

static sc_desc d4(int64_t a, int64_t b, int64_t c, int64_t d) {
    return (sc_desc){.dtype = SC_F32, .rank = 4, .dims = {a, b, c, d}};
}

static int value(sc_graph *g, const char *name, sc_desc d) {
    sc_status st = SC_OK;
    int v = graph_add_value(g, name, SC_VALUE_ACT, &d, &st);
    CHECK(!st, "value %s", name);
    return v;
}

static int conv_node(sc_graph *g, sc_op op, const char *name, const int *in, int n_in, const int *out, int n_out,
                     int64_t stride) {
    sc_status st = SC_OK;
    int n = graph_add_node(g, op, name, in, n_in, out, n_out, &st);
    sc_attrs a = {0};
    a.window.n_spatial = 2;
    a.window.group = 1;
    for (int i = 0; i < 2; i++) {
        a.window.strides[i] = stride;
        a.window.dilations[i] = 1;
        a.window.pads[i] = a.window.pads[2 + i] = 1;
    }
    if (!st) st = graph_node_set_attrs(g, &g->nodes[n], &a);
    CHECK(!st, "node %s", name);
    return n;
}

/* Two Convs of one shape, one of another stride, a ConvGrad without dX, a MatMul and a Relu: five
 * shapes. */
typedef struct {
    sc_graph g;
    int conv_a, conv_b, conv_s2, grad, matmul, relu;
} shapes_graph;

static void build(shapes_graph *s) {
    sc_graph *g = &s->g;
    graph_init(g);
    int x = value(g, "x", d4(2, 3, 8, 8)), w = value(g, "w", d4(4, 3, 3, 3));
    int b = value(g, "b", (sc_desc){.dtype = SC_F32, .rank = 1, .dims = {4}});
    int y1 = value(g, "y1", d4(2, 4, 8, 8)), y2 = value(g, "y2", d4(2, 4, 8, 8)), y3 = value(g, "y3", d4(2, 4, 4, 4));
    int dw = value(g, "dw", d4(4, 3, 3, 3)), r = value(g, "r", d4(2, 4, 8, 8));
    int m1 = value(g, "m1", (sc_desc){.dtype = SC_F32, .rank = 2, .dims = {16, 32}});
    int m2 = value(g, "m2", (sc_desc){.dtype = SC_F32, .rank = 2, .dims = {32, 8}});
    int mo = value(g, "mo", (sc_desc){.dtype = SC_F32, .rank = 2, .dims = {16, 8}});
    s->conv_a = conv_node(g, SC_OP_CONV, "conv_a", (int[]){x, w, b}, 3, &y1, 1, 1);
    s->conv_b = conv_node(g, SC_OP_CONV, "conv_b", (int[]){x, w, b}, 3, &y2, 1, 1);
    s->conv_s2 = conv_node(g, SC_OP_CONV, "conv_s2", (int[]){x, w, b}, 3, &y3, 1, 2);
    s->grad = conv_node(g, SC_OP_CONV_GRAD, "grad", (int[]){y1, x, w}, 3, (int[]){-1, dw}, 2, 1);
    sc_status st = SC_OK;
    s->matmul = graph_add_node(g, SC_OP_MATMUL, "mm", (int[]){m1, m2}, 2, &mo, 1, &st);
    s->relu = graph_add_node(g, SC_OP_RELU, "relu", &y1, 1, &r, 1, &st);
    CHECK(!st, "build: %s", st ? sc_status_message(st) : "");
}

static void test_keys(const shapes_graph *s) {
    char a[SC_SHAPE_KEY_MAX], b[SC_SHAPE_KEY_MAX], c[SC_SHAPE_KEY_MAX], gk[SC_SHAPE_KEY_MAX], mk[SC_SHAPE_KEY_MAX];
    sc_shape_key(&s->g, s->conv_a, a, sizeof a);
    sc_shape_key(&s->g, s->conv_b, b, sizeof b);
    sc_shape_key(&s->g, s->conv_s2, c, sizeof c);
    sc_shape_key(&s->g, s->grad, gk, sizeof gk);
    sc_shape_key(&s->g, s->matmul, mk, sizeof mk);
    CHECK(!strcmp(a, "Conv:f32[2,3,8,8]f32[4,3,3,3]f32[4]:o1:s1x1p1x1x1x1d1x1g1a0"), "conv key %s", a);
    CHECK(!strcmp(a, b), "one shape, two keys: %s / %s", a, b);
    CHECK(strcmp(a, c) && strstr(c, ":s2x2p"), "a stride-2 conv's key %s", c);
    CHECK(!strcmp(gk, "ConvGrad:f32[2,4,8,8]f32[2,3,8,8]f32[4,3,3,3]:o01:s1x1p1x1x1x1d1x1g1a0"), "grad key %s", gk);
    CHECK(!strcmp(mk, "MatMul:f32[16,32]f32[32,8]:o1"), "matmul key %s", mk);
    for (int i = 0; i < s->g.n_nodes; i++) EXPECT(sc_shape_node(&s->g, i));
}

static int const_i64(sc_graph *g, const char *name, int64_t v) {
    sc_status st = SC_OK;
    sc_desc d = {.dtype = SC_I64, .rank = 1, .dims = {1}};
    int id = graph_add_value(g, name, SC_VALUE_CONST, &d, &st);
    int64_t *data = st ? NULL : sc_arena_alloc_array(&g->arena, 1, sizeof(int64_t));
    CHECK(data, "constant %s", name);
    if (data) *data = v;
    g->values[id].data = data;
    return id;
}

static int node(sc_graph *g, sc_op op, const char *name, const int *in, int n_in, int out) {
    sc_status st = SC_OK;
    int n = graph_add_node(g, op, name, in, n_in, &out, 1, &st);
    CHECK(!st, "node %s", name);
    return n;
}

/* What is timed alone, and what sets a key beyond the descs: a constant's bytes, the attributes. */
static void test_key_rules(void) {
    sc_graph g;
    graph_init(&g);
    sc_desc x4 = d4(2, 4, 8, 8);
    int x = value(&g, "x", x4), ya = value(&g, "ya", x4), yb = value(&g, "yb", x4), yc = value(&g, "yc", x4);
    int r1 = value(&g, "r1", d4(2, 1, 8, 8)), r2 = value(&g, "r2", d4(2, 4, 1, 8)), flat = value(&g, "flat", d4(1, 1, 1, 512));
    sc_status st = SC_OK;
    sc_desc i1 = {.dtype = SC_I64, .rank = 1, .dims = {4}}, i2 = {.dtype = SC_I64, .rank = 1, .dims = {3}};
    int shape_act = graph_add_value(&g, "shape_act", SC_VALUE_ACT, &i1, &st);
    int idx_act = graph_add_value(&g, "idx_act", SC_VALUE_ACT, &i2, &st);
    int gathered = value(&g, "gathered", d4(3, 4, 8, 8));
    CHECK(!st, "values");
    int relu = node(&g, SC_OP_RELU, "relu", &x, 1, ya);
    int leaky_a = node(&g, SC_OP_LEAKY_RELU, "leaky_a", &x, 1, yb), leaky_b = node(&g, SC_OP_LEAKY_RELU, "leaky_b", &x, 1, yc);
    sc_attrs la = {0}, lb = {0};
    la.leaky_relu.alpha = 0.1f;
    lb.leaky_relu.alpha = 0.2f;
    st = graph_node_set_attrs(&g, &g.nodes[leaky_a], &la);
    if (!st) st = graph_node_set_attrs(&g, &g.nodes[leaky_b], &lb);
    int sum1 = node(&g, SC_OP_REDUCE_SUM, "sum1", (int[]){x, const_i64(&g, "ax1", 1)}, 2, r1);
    int sum2 = node(&g, SC_OP_REDUCE_SUM, "sum2", (int[]){x, const_i64(&g, "ax2", 2)}, 2, r2);
    int reshape = node(&g, SC_OP_RESHAPE, "reshape", (int[]){x, const_i64(&g, "shape", 512)}, 2, flat);
    int expand = node(&g, SC_OP_EXPAND, "expand", (int[]){x, shape_act}, 2, yc);
    int gather = node(&g, SC_OP_GATHER, "gather", (int[]){x, idx_act}, 2, gathered);
    CHECK(!st, "attrs");
    char k1[SC_SHAPE_KEY_MAX], k2[SC_SHAPE_KEY_MAX];
    sc_shape_key(&g, relu, k1, sizeof k1);
    CHECK(!strcmp(k1, "Relu:f32[2,4,8,8]:o1"), "relu key %s", k1);
    sc_shape_key(&g, leaky_a, k1, sizeof k1);
    sc_shape_key(&g, leaky_b, k2, sizeof k2);
    CHECK(strcmp(k1, k2) && strstr(k1, ":a"), "LeakyRelu alpha 0.1 / 0.2: %s / %s", k1, k2);
    sc_shape_key(&g, sum1, k1, sizeof k1);
    sc_shape_key(&g, sum2, k2, sizeof k2);
    CHECK(strcmp(k1, k2) && strstr(k1, "i64[1]="), "ReduceSum over axis 1 / 2: %s / %s", k1, k2);
    EXPECT(sc_shape_node(&g, relu) && sc_shape_node(&g, sum1) && sc_shape_node(&g, gather));
    CHECK(!sc_shape_node(&g, reshape), "a Reshape (a view) is timed alone");
    CHECK(!sc_shape_node(&g, expand), "an Expand to a shape computed at run time is timed alone");
    graph_free(&g);
}

static void test_text(void) {
    sc_shape_table t;
    sc_status st = sc_shape_table_parse("b:x 0.5 0.7\na:y 2e-3 3e-3\nbroken\nc:z -1 1\nd:w 0.25 0.3 trailing\n"
                                        "f:u 0.25\ng:t 0.25 0\na:y 9 9\n\ne:v 1e-3 2e-3", &t);
    CHECK(!st && t.n == 3, "parse: %d rows (want a:y, b:x, e:v)", t.n);
    const sc_shape_row *r = sc_shape_table_find(&t, "a:y");
    CHECK(r && r->warm == 2e-3 && r->cold == 3e-3, "a:y: %g %g (the first of repeated keys)", r ? r->warm : -1,
          r ? r->cold : -1);
    CHECK(!sc_shape_table_find(&t, "c:z") && !sc_shape_table_find(&t, "d:w") && !sc_shape_table_find(&t, "f:u") &&
              !sc_shape_table_find(&t, "g:t"),
          "damaged rows kept");
    char *text;
    size_t len;
    st = sc_shape_table_text(&t, NULL, &text, &len);
    sc_shape_table u;
    if (!st) st = sc_shape_table_parse(text, &u);
    CHECK(!st && u.n == t.n, "round trip: %d rows of %d", u.n, t.n);
    for (int i = 0; !st && i < t.n && i < u.n; i++)
        CHECK(!strcmp(t.rows[i].key, u.rows[i].key) && t.rows[i].warm == u.rows[i].warm && t.rows[i].cold == u.rows[i].cold,
              "row %d changed", i);
    if (!st) {
        free(text);
        sc_shape_table_free(&u);
    }
    sc_shape_table_free(&t);
}

static void test_measure_and_cache(const shapes_graph *s, const char *dir) {
    setenv("SCORCH_CACHE_DIR", dir, 1);
    unsetenv("SCORCH_COST_PROFILE");
    sc_shape_table t1, t2;
    char w1[2048], w2[2048];
    sc_cost_profile prof = {.conv_flops = 1e11}; /* the rate the rows are measured under */
    sc_status st = sc_shape_table_get(SC_DEVICE_CPU, 1, &prof, &s->g, &t1, w1, sizeof w1);
    CHECK(!st && t1.n == 5, "first get: %d shapes (want conv, conv stride 2, grad, matmul, relu): %s", t1.n, w1);
    CHECK(strstr(w1, "5 kernel shapes timed alone: 0 cached, 5 measured now"), "first get says: %s", w1);
    for (int i = 0; i < t1.n; i++)
        CHECK(t1.rows[i].warm > 0 && t1.rows[i].cold > 0, "%s: %g s warm, %g s cold", t1.rows[i].key, t1.rows[i].warm,
              t1.rows[i].cold);
    st = sc_shape_table_get(SC_DEVICE_CPU, 1, &prof, &s->g, &t2, w2, sizeof w2);
    CHECK(!st && t2.n == 5 && strstr(w2, "5 kernel shapes timed alone: 5 cached") && !strstr(w2, "measured now"),
          "second get: %s", w2);
    for (int i = 0; i < t1.n && i < t2.n; i++)
        CHECK(!strcmp(t1.rows[i].key, t2.rows[i].key) && t1.rows[i].warm == t2.rows[i].warm &&
                  t1.rows[i].cold == t2.rows[i].cold,
              "cached %s: %.17g, measured %.17g", t1.rows[i].key, t2.rows[i].warm, t1.rows[i].warm);

    /* a graph of a few KiB: every read hits, every node takes its shape's warm time */
    double times[16];
    for (int i = 0; i < s->g.n_nodes; i++) times[i] = -1;
    st = sc_shape_table_apply(&t2, &s->g, times);
    char key[SC_SHAPE_KEY_MAX];
    sc_shape_key(&s->g, s->conv_a, key, sizeof key);
    const sc_shape_row *conv = sc_shape_table_find(&t2, key);
    CHECK(!st && conv && times[s->conv_a] == conv->warm && times[s->conv_a] == times[s->conv_b],
          "conv times %g / %g, its warm time %g", times[s->conv_a], times[s->conv_b], conv ? conv->warm : -1);
    CHECK(times[s->conv_s2] > 0 && times[s->grad] > 0 && times[s->matmul] > 0 && times[s->relu] > 0,
          "a shape node left unset");

    /* another thread count is another file: measured again */
    sc_shape_table t3;
    char w3[2048];
    st = sc_shape_table_get(SC_DEVICE_CPU, 2, &prof, &s->g, &t3, w3, sizeof w3);
    CHECK(!st && strstr(w3, "0 cached, 5 measured now"), "2 threads: %s", w3);
    sc_shape_table_free(&t3);

    /* under a profile 2x faster than the one they were measured under, the rows are measured again */
    prof.conv_flops = 2e11;
    st = sc_shape_table_get(SC_DEVICE_CPU, 1, &prof, &s->g, &t3, w3, sizeof w3);
    CHECK(!st && strstr(w3, "0 cached, 5 measured now") && strstr(w3, "the cache's 5 were measured when the profile's "
                                                                    "3x3 convolution ran at 100 GFLOP/s"),
          "a drifted profile: %s", w3);
    sc_shape_table_free(&t3);
    prof.conv_flops = 2.5e11; /* within 1.5x of the rate they are now measured under */
    st = sc_shape_table_get(SC_DEVICE_CPU, 1, &prof, &s->g, &t3, w3, sizeof w3);
    CHECK(!st && strstr(w3, "5 cached") && !strstr(w3, "measured now"), "a profile within the drift: %s", w3);
    sc_shape_table_free(&t3);

    setenv("SCORCH_COST_PROFILE", "off", 1);
    st = sc_shape_table_get(SC_DEVICE_CPU, 1, &prof, &s->g, &t3, w3, sizeof w3);
    CHECK(!st && t3.n == 0 && !w3[0], "off: %d shapes, '%s'", t3.n, w3);
    sc_shape_table_free(&t1);
    sc_shape_table_free(&t2);
}

/* Warm or cold by reuse distance, with the machine's last-level cache: a Relu over twice its bytes
 * misses (cold time); a small Relu after it misses too (its input and output were last touched a
 * step ago, with the large one's bytes touched since); a small Relu of a value just written hits on
 * its input and misses on its output (half way). */
static void test_apply_warm_cold(void) {
    sc_graph g;
    graph_init(&g);
    sc_desc big = {.dtype = SC_F32, .rank = 1, .dims = {bench_llc_bytes() / 2}}, small = {.dtype = SC_F32, .rank = 1, .dims = {256}};
    int x = value(&g, "x", big), y = value(&g, "y", big), sv = value(&g, "s", small), t = value(&g, "t", small);
    int u = value(&g, "u", small);
    node(&g, SC_OP_RELU, "big", &x, 1, y);
    node(&g, SC_OP_RELU, "far", &sv, 1, t);
    node(&g, SC_OP_RELU, "near", &t, 1, u);
    char kb[SC_SHAPE_KEY_MAX], ks[SC_SHAPE_KEY_MAX], text[2 * SC_SHAPE_KEY_MAX + 64];
    sc_shape_key(&g, 0, kb, sizeof kb);
    sc_shape_key(&g, 1, ks, sizeof ks);
    snprintf(text, sizeof text, "%s 1 4\n%s 2 3\n", kb, ks);
    sc_shape_table tab;
    sc_status st = sc_shape_table_parse(text, &tab);
    double times[3] = {-1, -1, -1};
    if (!st) st = sc_shape_table_apply(&tab, &g, times);
    CHECK(!st && times[0] == 4 && times[1] == 3 && times[2] == 2.5, "big %g (want cold 4), far %g (cold 3), near %g (2.5)",
          times[0], times[1], times[2]);
    sc_status_free(st);
    sc_shape_table_free(&tab);
    graph_free(&g);
}

/* bench_time_device on a backend's own arena (the CPU backend here, under the sanitizers; CUDA's in
 * tests/device_cli_check.py): a Conv timed twice (the arena each call makes is given back, or the
 * second could not make its own) and an SGDUpdate, whose outputs take their inputs' places, each
 * time positive. */
static void test_time_device(const shapes_graph *s) {
    sc_backend *be = NULL;
    sc_status st = backend_cpu_create(0, &be);
    CHECK(!st, "backend: %s", st ? sc_status_message(st) : "");
    if (st) return;
    bench_op b;
    for (int k = 0; k < 2 && !st; k++) {
        st = bench_make_like(&b, &s->g, s->conv_a);
        double sec = 0;
        if (!st) st = bench_time_device(be, &b, &sec);
        CHECK(!st && sec > 0, "Conv timed on the device arena: %g s (%s)", sec, st ? sc_status_message(st) : "ok");
        bench_free(&b);
    }
    sc_desc v = {.dtype = SC_F32, .rank = 1, .dims = {1000}}, one = {.dtype = SC_F32, .rank = 0};
    sc_attrs a = {0};
    a.sgd.momentum = 0.9f;
    st = bench_make(&b, SC_OP_SGD_UPDATE, &a, (sc_desc[]){v, v, v, one}, 4, 2);
    double sec = 0;
    if (!st) st = bench_time_device(be, &b, &sec);
    CHECK(!st && sec > 0, "SGDUpdate timed on the device arena: %g s (%s)", sec, st ? sc_status_message(st) : "ok");
    if (!st) CHECK(b.out[0].data == b.in[0].data && b.out[1].data == b.in[2].data, "SGDUpdate's outputs are not its W and M");
    bench_free(&b);
    sc_status_free(st);
    backend_destroy(be);
}

int main(void) {
    char dir[] = "/tmp/scorch_shapes_XXXXXX";
    if (!mkdtemp(dir)) {
        printf("FAIL: mkdtemp\n");
        return 1;
    }
    shapes_graph s;
    build(&s);
    test_keys(&s);
    test_key_rules();
    test_text();
    test_measure_and_cache(&s, dir);
    test_apply_warm_cold();
    test_time_device(&s);
    graph_free(&s.g);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) printf("note: could not remove %s\n", dir);
    printf(failures ? "%d failures\n" : "cost shapes ok\n", failures);
    return failures != 0;
}
