/* Helpers shared by tests/test_shape.c and tests/test_passes.c: build small graphs in C and check
 * descs by their printed form ("f32[1,64,112,112]"). Expected shapes in the tests are worked out
 * from the ONNX operator specs (and numpy for slicing / matmul), never from our own output. */
#ifndef SC_SHAPE_TEST_UTIL_H
#define SC_SHAPE_TEST_UTIL_H

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "graph/shape.h"

static int t_failures;
static sc_graph G;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);                                  \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            t_failures++;                                                                          \
        }                                                                                          \
    } while (0)

/* Per node: the private attributes T_ATTRS gave it (graph_node_attrs_mut), if it still has them. */
enum { T_MAX_NODES = 4096 };
static const sc_attrs *t_private[T_MAX_NODES];

static void t_reset(void) {
    graph_free(&G);
    graph_init(&G);
    memset(t_private, 0, sizeof t_private);
}

/* "f32[1,3,?]" -> desc; '?' is an unknown dim. */
static sc_desc t_parse(const char *s) {
    sc_desc d;
    memset(&d, 0, sizeof d);
    const char *br = strchr(s, '[');
    SC_ASSERT(br);
    for (int t = 1; t < SC_DTYPE_MAX; t++)
        if (strlen(sc_dtype_name((sc_dtype)t)) == (size_t)(br - s) && !strncmp(sc_dtype_name((sc_dtype)t), s, (size_t)(br - s)))
            d.dtype = (sc_dtype)t;
    SC_ASSERT(d.dtype != SC_DTYPE_UNDEFINED);
    const char *p = br + 1;
    while (*p && *p != ']') {
        if (*p == '?') {
            d.dims[d.rank++] = -1;
            p++;
        } else {
            d.dims[d.rank++] = strtoll(p, (char **)&p, 10);
        }
        if (*p == ',') p++;
    }
    return d;
}

static int t_value(const char *name, sc_value_kind kind, const char *desc) {
    sc_status st = SC_OK;
    sc_desc d = desc ? t_parse(desc) : (sc_desc){0};
    int id = graph_add_value(&G, name, kind, &d, &st);
    SC_ASSERT(id >= 0 && !st);
    return id;
}
static int t_in(const char *name, const char *desc) { return t_value(name, SC_VALUE_INPUT, desc); }
static int t_act(const char *name) { return t_value(name, SC_VALUE_ACT, NULL); }

static int t_const_i64(const char *name, int n, const int64_t *vals) {
    int64_t dim = n;
    sc_desc d = sc_desc_make(SC_I64, 1, &dim);
    sc_status st = SC_OK;
    int id = graph_add_value(&G, name, SC_VALUE_CONST, &d, &st);
    SC_ASSERT(id >= 0 && !graph_alloc_data(&G, id));
    if (n) memcpy(G.values[id].data, vals, sizeof(int64_t) * (size_t)n);
    return id;
}

/* f32 constant; rank 0 when n < 0 (a scalar holding vals[0]). */
static int t_const_f32(const char *name, int n, const float *vals) {
    int64_t dim = n;
    sc_desc d = sc_desc_make(SC_F32, n < 0 ? 0 : 1, &dim);
    sc_status st = SC_OK;
    int id = graph_add_value(&G, name, SC_VALUE_CONST, &d, &st);
    SC_ASSERT(id >= 0 && !graph_alloc_data(&G, id));
    memcpy(G.values[id].data, vals, sizeof(float) * (size_t)(n < 0 ? 1 : n));
    return id;
}

static int t_node(sc_op op, const char *name, const int *in, int n_in, const int *out, int n_out) {
    sc_status st = SC_OK;
    int id = graph_add_node(&G, op, name, in, n_in, out, n_out, &st);
    SC_ASSERT(id >= 0 && !st);
    return id;
}
#define T_NODE(op, name, ins, outs) \
    t_node(op, name, (int[])ins, sizeof((int[])ins) / sizeof(int), (int[])outs, sizeof((int[])outs) / sizeof(int))
#define L(...) {__VA_ARGS__}
/* A node's attributes to set field by field: its private copy (graph_node_attrs_mut), made on first
 * use. t_shape keeps it the node's across shape functions, so a test may hold the pointer. */
static sc_attrs *t_attrs(int node) {
    SC_ASSERT(node >= 0 && node < T_MAX_NODES);
    if (G.nodes[node].attrs != t_private[node]) t_private[node] = graph_node_attrs_mut(&G, &G.nodes[node]);
    SC_ASSERT(t_private[node]);
    return (sc_attrs *)t_private[node];
}
#define T_ATTRS(node) t_attrs(node)

/* Runs node id's shape function. A shape function sets interned attributes (the defaults it
 * resolved); a node with private attributes gets them copied back into its private copy. */
static inline sc_status t_shape(int id) {
    sc_attrs *mine = G.nodes[id].attrs == t_private[id] ? (sc_attrs *)t_private[id] : NULL;
    sc_status st = sc_shape_fns[G.nodes[id].op](&G, &G.nodes[id]);
    if (mine) {
        *mine = *G.nodes[id].attrs;
        G.nodes[id].attrs = mine;
    }
    return st;
}

static const char *t_desc(int value_id) {
    static char buf[8][160];
    static int k;
    k = (k + 1) % 8;
    return sc_desc_str(&G.values[value_id].desc, buf[k], sizeof buf[k]);
}

#define CHECK_DESC(vid, want) CHECK(strcmp(t_desc(vid), want) == 0, "'%s' is %s, want %s", G.values[vid].name, t_desc(vid), want)

#endif
