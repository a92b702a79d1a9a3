/* Finite-difference checks (tests/grad_check.h, f64, central differences) of the gradients through
 * the lowerings of graph_prepare, whose ops have no gradient rule of their own: each case lowers
 * its graph before autodiff sees it, as graph_prepare does.
 *   - Einsum (graph/pass_einsum.c: Transpose, Reshape, ReduceSum, MatMul and, for a letter
 *     repeated in one operand, a strided Slice), for the equation forms the lowering has a step
 *     for: a batched contraction, three operands, a letter summed out of one operand, an outer
 *     product, ellipses with broadcasting, and diagonals (a matrix's, a batched one, a trace, a
 *     letter three times, a size-1 diagonal broadcast against another operand).
 *   - Resize in cubic mode and with antialias (graph/pass_resize.c: one MatMul per resized axis):
 *     up and down, by scales and by sizes, exclude_outside, align_corners.
 */
#include <stdio.h>
#include <string.h>

#include "graph/passes.h"
#include "tests/grad_check.h"

#define D GC_DIMS
#define I64(...) ((const int64_t[]){__VA_ARGS__})
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

typedef struct {
    sc_attrs a;
    int n_in;
} resize_case;

static sc_status build_resize(sc_graph *g, const int *in_ids, int *out_ids, int *n_out, void *ctx) {
    resize_case *rc = ctx;
    sc_status st = SC_OK;
    int y = gc_add_node(g, SC_OP_RESIZE, &rc->a, in_ids, rc->n_in, 1, NULL, &st);
    if (y < 0) return st;
    int lowered = 0;
    SC_TRY(graph_lower_resize(g, &lowered));
    if (lowered != 1) return sc_errorf("%d Resize nodes lowered, want 1", lowered);
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == SC_OP_RESIZE) return sc_errorf("a Resize is left");
    out_ids[0] = y;
    *n_out = 1;
    return SC_OK;
}

/* Resize (X, roi, scales, sizes) with one of scales (f32) / sizes (i64), X random [1, 2, h, w]. */
static void resize(const char *label, sc_resize_mode mode, bool antialias, bool exclude, sc_coord_transform coord,
                   int64_t h, int64_t w, const float *scales, const int64_t *sizes) {
    resize_case rc;
    memset(&rc, 0, sizeof rc);
    rc.a.resize.mode = mode;
    rc.a.resize.antialias = antialias;
    rc.a.resize.exclude_outside = exclude;
    rc.a.resize.coord = coord;
    rc.a.resize.cubic_coeff_a = -0.75f;
    int64_t four = 4;
    gc_input in[4] = {gc_rand(F, 4, D(1, 2, h, w)), gc_omitted(),
                      scales ? gc_const(SC_F32, 1, &four, scales) : gc_omitted(),
                      sizes ? gc_const_i64(4, sizes) : gc_omitted()};
    rc.n_in = sizes ? 4 : 3;
    expect(grad_check_graph(label, rc.n_in, in, build_resize, &rc, NULL));
}

static void test_resize(void) {
    static const float up[4] = {1, 1, 2, 1.5f}, down[4] = {1, 1, 0.5f, 0.6f};
    resize("cubic_up_half_pixel", SC_RESIZE_CUBIC, false, false, SC_CT_HALF_PIXEL, 3, 4, up, NULL);
    resize("cubic_down_exclude_outside", SC_RESIZE_CUBIC, false, true, SC_CT_HALF_PIXEL, 6, 5, down, NULL);
    resize("cubic_sizes_align_corners", SC_RESIZE_CUBIC, false, false, SC_CT_ALIGN_CORNERS, 4, 3, NULL, I64(1, 2, 7, 2));
    resize("cubic_antialias_down", SC_RESIZE_CUBIC, true, false, SC_CT_HALF_PIXEL, 8, 7, down, NULL);
    resize("linear_antialias_down_pytorch", SC_RESIZE_LINEAR, true, false, SC_CT_PYTORCH_HALF_PIXEL, 8, 6, down, NULL);
}

int main(void) {
    test_contractions();
    test_diagonals();
    test_resize();
    printf("%d/%d gradient checks through lowerings passed\n", checks - failures, checks);
    return failures ? 1 : 0;
}
