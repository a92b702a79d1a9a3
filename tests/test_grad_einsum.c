/* Finite-difference checks (tests/grad_check.h, f64, central differences) of Einsum's gradients
 * through its lowering (graph/pass_einsum.c: Transpose, Reshape, ReduceSum, MatMul and, for a letter
 * repeated in one operand, a strided Slice), for the equation forms the lowering has a step for:
 * a batched contraction, three operands, a letter summed out of one operand, an outer product,
 * ellipses with broadcasting, and diagonals (a matrix's, a batched one, a trace, a letter three
 * times, a size-1 diagonal broadcast against another operand). Einsum has no gradient rule of its
 * own, so each case lowers the graph before autodiff sees it, as graph_run_passes does. */
#include <stdio.h>
#include <string.h>

#include "graph/passes.h"
#include "tests/grad_check.h"

#define D GC_DIMS
#define F SC_F64

static int failures, checks;

static void expect(bool ok) {
    checks++;
    failures += !ok;
}

static sc_status build_einsum(sc_graph *g, const int *in_ids, int *out_ids, int *n_out, void *ctx) {
    const char *eq = ctx;
    int n_in = 1;
    for (const char *p = eq; *p && !(p[0] == '-' && p[1] == '>'); p++) n_in += *p == ',';
    sc_attrs a;
    memset(&a, 0, sizeof a);
    snprintf(a.einsum.equation, sizeof a.einsum.equation, "%s", eq);
    sc_status st = SC_OK;
    int y = gc_add_node(g, SC_OP_EINSUM, &a, in_ids, n_in, 1, NULL, &st);
    if (y < 0) return st;
    int lowered = 0;
    SC_TRY(graph_lower_einsum(g, &lowered));
    if (lowered != 1) return sc_errorf("equation '%s': %d Einsum nodes lowered, want 1", eq, lowered);
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == SC_OP_EINSUM) return sc_errorf("equation '%s': an Einsum is left", eq);
    out_ids[0] = y;
    *n_out = 1;
    return SC_OK;
}

static void check(const char *eq, int n_in, const gc_input *in) {
    expect(grad_check_graph(eq, n_in, in, build_einsum, (void *)eq, NULL));
}

static void test_contractions(void) {
    check("bij,bjk->bik", 2, (gc_input[]){gc_rand(F, 3, D(2, 3, 4)), gc_rand(F, 3, D(2, 4, 5))});
    check("bhid,de,e->bhi", 3, (gc_input[]){gc_rand(F, 4, D(2, 2, 3, 4)), gc_rand(F, 2, D(4, 3)), gc_rand(F, 1, D(3))});
    check("bhij->bj", 1, (gc_input[]){gc_rand(F, 4, D(2, 3, 4, 5))});
    check("bi,bj->bij", 2, (gc_input[]){gc_rand(F, 2, D(2, 3)), gc_rand(F, 2, D(2, 4))});
    check("...id,...jd->...ij", 2, (gc_input[]){gc_rand(F, 4, D(2, 3, 4, 5)), gc_rand(F, 4, D(2, 1, 2, 5))});
    check("b...d,d", 2, (gc_input[]){gc_rand(F, 4, D(2, 3, 4, 5)), gc_rand(F, 1, D(5))});
}

static void test_diagonals(void) {
    check("ii->i", 1, (gc_input[]){gc_rand(F, 2, D(4, 4))});
    check("ii", 1, (gc_input[]){gc_rand(F, 2, D(4, 4))}); /* implicit: the trace */
    check("bii->bi", 1, (gc_input[]){gc_rand(F, 3, D(2, 3, 3))});
    check("ibi->bi", 1, (gc_input[]){gc_rand(F, 3, D(3, 2, 3))}); /* not adjacent */
    check("iii->i", 1, (gc_input[]){gc_rand(F, 3, D(3, 3, 3))});
    check("ijij->ij", 1, (gc_input[]){gc_rand(F, 4, D(2, 3, 2, 3))}); /* two letters repeat */
    check("ii,i->i", 2, (gc_input[]){gc_rand(F, 2, D(4, 4)), gc_rand(F, 1, D(4))});
    check("bii,bi->bi", 2, (gc_input[]){gc_rand(F, 3, D(2, 1, 1)), gc_rand(F, 2, D(2, 3))}); /* size 1 broadcasts */
    check("bij,bjj->bi", 2, (gc_input[]){gc_rand(F, 3, D(2, 3, 4)), gc_rand(F, 3, D(2, 4, 4))});
}

int main(void) {
    test_contractions();
    test_diagonals();
    printf("%d/%d Einsum gradient checks passed\n", checks - failures, checks);
    return failures ? 1 : 0;
}
