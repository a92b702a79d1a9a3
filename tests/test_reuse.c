/* Reuse distances (schedule/reuse.h): which reads of a repeated step miss a cache of C bytes. A
 * chain whose distances are worked out by hand, at three capacities; a view is its input's storage
 * and touches nothing; a value read twice by one node counts once; a read of a value larger than the
 * cache always misses. */
#include <stdio.h>
#include <stdlib.h>

#include "graph/graph.h"
#include "schedule/reuse.h"
#include "tests/check.h"

static int value(sc_graph *g, const char *name, sc_value_kind kind, int64_t floats) {
    sc_status st = SC_OK;
    sc_desc d = {.dtype = SC_F32, .rank = 1, .dims = {floats}};
    int v = graph_add_value(g, name, kind, &d, &st);
    CHECK(!st, "value %s", name);
    return v;
}

static int node(sc_graph *g, sc_op op, const char *name, const int *in, int n_in, int out) {
    sc_status st = SC_OK;
    int n = graph_add_node(g, op, name, in, n_in, &out, 1, &st);
    CHECK(!st, "node %s", name);
    return n;
}

/* n0 Relu(x) -> a; n1 Relu(a) -> b; n2 Relu(b) -> c; n3 Add(a, c) -> d; n4 Reshape(d) -> e (a view);
 * n5 Add(e, e) -> f. Bytes: x, a, d, e, f 100; b, c 400. Distance + own bytes of each access in the
 * second step:
 *  n0 reads x (last touched by n0 a step before; a b c d f since): 1100 + 100; writes a (last read
 *     by n3; d f since): 200 + 100.
 *  n1 reads a, just written: 0 + 100; writes b (last read by n2; a c d f x since): 800 + 400.
 *  n2 reads b: 0 + 400; writes c (last read by n3; d f x a b since): 800 + 400.
 *  n3 reads a (last read by n1; b c since): 800 + 100, c: 0 + 400; writes d (read by n5; x a b c
 *     since): 1000 + 100.
 *  n5 reads e, whose storage is d, written by n3 with only the view between: 0 + 100, once; writes
 *     f (x a b c d since): 1100 + 100. */
static void test_chain(void) {
    sc_graph g;
    graph_init(&g);
    int x = value(&g, "x", SC_VALUE_PARAM, 25), a = value(&g, "a", SC_VALUE_ACT, 25);
    int b = value(&g, "b", SC_VALUE_ACT, 100), c = value(&g, "c", SC_VALUE_ACT, 100);
    int d = value(&g, "d", SC_VALUE_ACT, 25), e = value(&g, "e", SC_VALUE_ACT, 25), f = value(&g, "f", SC_VALUE_ACT, 25);
    int n0 = node(&g, SC_OP_RELU, "n0", &x, 1, a), n1 = node(&g, SC_OP_RELU, "n1", &a, 1, b);
    int n2 = node(&g, SC_OP_RELU, "n2", &b, 1, c), n3 = node(&g, SC_OP_ADD, "n3", (int[]){a, c}, 2, d);
    int n4 = node(&g, SC_OP_RESHAPE, "n4", &d, 1, e), n5 = node(&g, SC_OP_ADD, "n5", (int[]){e, e}, 2, f);
    double cold[6];
    struct {
        int64_t cache;
        double want[6];
    } cases[] = {
        {10000, {0, 0, 0, 0, 0, 0}},                             /* everything fits */
        {1000, {0.5, 0.8, 0.5, 100.0 / 600, 0, 0.5}},            /* the accesses at 1100 + 100 or more */
        {850, {0.5, 0.8, 0.5, 200.0 / 600, 0, 0.5}},             /* and a at n3: 800 + 100 > 850 */
        {50, {1, 1, 1, 1, 0, 1}},                                /* every access larger than the cache */
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        sc_status st = sc_reuse_cold_share(&g, cases[k].cache, cold);
        CHECK(!st, "reuse: %s", st ? sc_status_message(st) : "");
        for (int i = 0; i < 6; i++)
            CHECK(cold[i] == cases[k].want[i], "cache %lld B: node %s misses %g of its operand bytes, want %g",
                  (long long)cases[k].cache, g.nodes[i].name, cold[i], cases[k].want[i]);
    }
    (void)n0, (void)n1, (void)n2, (void)n3, (void)n4, (void)n5;
    graph_free(&g);
}

int main(void) {
    test_chain();
    printf(failures ? "%d failures\n" : "reuse ok\n", failures);
    return failures != 0;
}
