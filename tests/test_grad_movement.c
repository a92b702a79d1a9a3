/* Finite-difference checks (tests/grad_check.h, f64, central differences) of the gradient rules in
 * autodiff/grad_reduce.c and autodiff/grad_movement.c, and so of the SliceGrad and GatherGrad
 * kernels: reductions with and without keepdims, empty axes (all, or the identity with
 * noop_with_empty_axes), negative axes; every reshape-like op; Transpose; Concat; Split with and
 * without gradients on every output; Slice with negative starts and steps; Gather with repeated and
 * negative indices (scatter-add); Expand; Pad (padding, cropping, the pad value); Trilu. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "tests/grad_check.h"

#define D GC_DIMS
#define F SC_F64
#define I64(...) ((const int64_t[]){__VA_ARGS__})

static int failures, checks;

static void expect(bool ok) {
    checks++;
    failures += !ok;
}

static void reduce(const char *label, sc_op op, gc_input x, int n_axes, const int64_t *axes, bool keepdims, bool noop) {
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.reduce.keepdims = keepdims;
    a.reduce.noop_with_empty_axes = noop;
    gc_input in[2] = {x, n_axes >= 0 ? gc_const_i64(n_axes, axes) : gc_omitted()};
    expect(grad_check_op(label, op, &a, n_axes >= 0 ? 2 : 1, in, 1, NULL));
}

static void test_reduce(void) {
    static const sc_op ops[] = {SC_OP_REDUCE_SUM, SC_OP_REDUCE_MEAN};
    for (int k = 0; k < 2; k++) {
        char l[64];
        const char *n = sc_op_name(ops[k]);
        snprintf(l, sizeof l, "%s_axis1_keep", n);
        reduce(l, ops[k], gc_rand(F, 3, D(2, 3, 4)), 1, I64(1), true, false);
        snprintf(l, sizeof l, "%s_axes02_nokeep", n);
        reduce(l, ops[k], gc_rand(F, 3, D(2, 3, 4)), 2, I64(0, 2), false, false);
        snprintf(l, sizeof l, "%s_neg_axis", n);
        reduce(l, ops[k], gc_rand(F, 3, D(2, 3, 4)), 1, I64(-1), false, false);
        snprintf(l, sizeof l, "%s_all_keep", n);
        reduce(l, ops[k], gc_rand(F, 2, D(3, 4)), -1, NULL, true, false);
        snprintf(l, sizeof l, "%s_all_nokeep", n);
        reduce(l, ops[k], gc_rand(F, 2, D(3, 4)), -1, NULL, false, false);
        snprintf(l, sizeof l, "%s_empty_axes", n);
        reduce(l, ops[k], gc_rand(F, 2, D(3, 4)), 0, NULL, false, false);
        snprintf(l, sizeof l, "%s_empty_axes_noop", n);
        reduce(l, ops[k], gc_rand(F, 2, D(3, 4)), 0, NULL, true, true);
    }
}

static void test_reshape_like(void) {
    gc_input rs[2] = {gc_rand(F, 3, D(2, 3, 4)), gc_const_i64(2, I64(6, -1))};
    expect(grad_check_op("reshape", SC_OP_RESHAPE, NULL, 2, rs, 1, NULL));
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.axis.axis = 2;
    gc_input fl[1] = {gc_rand(F, 4, D(2, 3, 2, 2))};
    expect(grad_check_op("flatten", SC_OP_FLATTEN, &a, 1, fl, 1, NULL));
    gc_input sq[2] = {gc_rand(F, 3, D(2, 1, 3)), gc_const_i64(1, I64(1))};
    expect(grad_check_op("squeeze", SC_OP_SQUEEZE, NULL, 2, sq, 1, NULL));
    gc_input us[2] = {gc_rand(F, 2, D(2, 3)), gc_const_i64(2, I64(0, 3))};
    expect(grad_check_op("unsqueeze", SC_OP_UNSQUEEZE, NULL, 2, us, 1, NULL));

    memset(&a, 0, sizeof a);
    a.transpose.n_perm = 3;
    a.transpose.perm[0] = 2, a.transpose.perm[1] = 0, a.transpose.perm[2] = 1;
    gc_input tr[1] = {gc_rand(F, 3, D(2, 3, 4))};
    expect(grad_check_op("transpose_201", SC_OP_TRANSPOSE, &a, 1, tr, 1, NULL));
    memset(&a, 0, sizeof a);
    expect(grad_check_op("transpose_default", SC_OP_TRANSPOSE, &a, 1, tr, 1, NULL));

    gc_input ex[2] = {gc_rand(F, 2, D(3, 1)), gc_const_i64(3, I64(2, 3, 4))};
    expect(grad_check_op("expand", SC_OP_EXPAND, NULL, 2, ex, 1, NULL));
    gc_input ex2[2] = {gc_rand(F, 3, D(2, 1, 4)), gc_const_i64(2, I64(3, 1))};
    expect(grad_check_op("expand_keep_larger", SC_OP_EXPAND, NULL, 2, ex2, 1, NULL));
}

static void test_concat_split(void) {
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.axis.axis = 1;
    gc_input cc[3] = {gc_rand(F, 2, D(2, 3)), gc_nocheck(gc_rand(F, 2, D(2, 1))), gc_rand(F, 2, D(2, 4))};
    expect(grad_check_op("concat_axis1", SC_OP_CONCAT, &a, 3, cc, 1, NULL));
    a.axis.axis = -3;
    gc_input cc2[2] = {gc_rand(F, 3, D(1, 2, 3)), gc_rand(F, 3, D(2, 2, 3))};
    expect(grad_check_op("concat_neg_axis", SC_OP_CONCAT, &a, 2, cc2, 1, NULL));

    a.axis.axis = 1;
    gc_input sp[2] = {gc_rand(F, 2, D(2, 6)), gc_const_i64(3, I64(1, 2, 3))};
    expect(grad_check_op("split_3", SC_OP_SPLIT, &a, 2, sp, 3, NULL));
    static const bool only_middle[3] = {false, true, false};
    gc_options opt;
    memset(&opt, 0, sizeof opt);
    opt.use_out = only_middle;
    expect(grad_check_op("split_missing_grads", SC_OP_SPLIT, &a, 2, sp, 3, &opt));
    a.axis.axis = 0;
    a.axis.num_outputs = 2;
    gc_input sp2[1] = {gc_rand(F, 2, D(4, 3))};
    expect(grad_check_op("split_equal", SC_OP_SPLIT, &a, 1, sp2, 2, NULL));
}

static void test_slice_gather(void) {
    gc_input s1[5] = {gc_rand(F, 3, D(3, 4, 5)), gc_const_i64(2, I64(1, -4)), gc_const_i64(2, I64(3, 100)),
                      gc_const_i64(2, I64(0, 2)), gc_const_i64(2, I64(1, 2))};
    expect(grad_check_op("slice_steps", SC_OP_SLICE, NULL, 5, s1, 1, NULL));
    gc_input s2[5] = {gc_rand(F, 2, D(4, 6)), gc_const_i64(1, I64(-1)), gc_const_i64(1, I64(-100)),
                      gc_const_i64(1, I64(1)), gc_const_i64(1, I64(-2))};
    expect(grad_check_op("slice_negative_step", SC_OP_SLICE, NULL, 5, s2, 1, NULL));
    gc_input s3[3] = {gc_rand(F, 2, D(4, 6)), gc_const_i64(2, I64(1, 2)), gc_const_i64(2, I64(3, 5))};
    expect(grad_check_op("slice_default_axes", SC_OP_SLICE, NULL, 3, s3, 1, NULL));

    sc_attrs a;
    memset(&a, 0, sizeof a);
    static const int64_t idx[6] = {0, 2, -1, 2, 2, 1}; /* repeats and a negative index */
    gc_input g0[2] = {gc_rand(F, 2, D(4, 3)), gc_const(SC_I64, 2, D(2, 3), idx)};
    expect(grad_check_op("gather_axis0_repeats", SC_OP_GATHER, &a, 2, g0, 1, NULL));
    a.axis.axis = 1;
    gc_input g1[2] = {gc_rand(F, 3, D(2, 4, 3)), gc_const(SC_I64, 1, D(6), idx)};
    expect(grad_check_op("gather_axis1", SC_OP_GATHER, &a, 2, g1, 1, NULL));
    static const int32_t idx32[3] = {3, -4, 3};
    a.axis.axis = -1;
    gc_input g2[2] = {gc_rand(F, 2, D(2, 4)), gc_const(SC_I32, 1, D(3), idx32)};
    expect(grad_check_op("gather_last_axis_i32", SC_OP_GATHER, &a, 2, g2, 1, NULL));
    static const int64_t one = 2;
    a.axis.axis = 0;
    gc_input g3[2] = {gc_rand(F, 2, D(4, 3)), gc_const(SC_I64, 0, NULL, &one)};
    expect(grad_check_op("gather_scalar_index", SC_OP_GATHER, &a, 2, g3, 1, NULL));
    /* GatherElements: repeated and negative indices, an index tensor smaller than data off the axis. */
    static const int64_t ge[8] = {0, 2, -1, 1, 2, 2, 0, -3};
    a.axis.axis = 0;
    gc_input e0[2] = {gc_rand(F, 2, D(3, 4)), gc_const(SC_I64, 2, D(2, 4), ge)};
    expect(grad_check_op("gather_elements_axis0", SC_OP_GATHER_ELEMENTS, &a, 2, e0, 1, NULL));
    static const int32_t ge1[6] = {3, 0, 3, -1, 1, 1};
    a.axis.axis = -1;
    gc_input e1[2] = {gc_rand(F, 3, D(2, 2, 5)), gc_const(SC_I32, 3, D(1, 2, 3), ge1)};
    expect(grad_check_op("gather_elements_last_axis_i32", SC_OP_GATHER_ELEMENTS, &a, 2, e1, 1, NULL));
    /* ScatterND: rows (k = 1, a negative index) and single elements (k = 2); every reduction. */
    static const int64_t rows[2] = {2, -4}, elems[6] = {0, 1, 2, 3, 1, -1};
    memset(&a, 0, sizeof a);
    gc_input c0[3] = {gc_rand(F, 2, D(4, 3)), gc_const(SC_I64, 2, D(2, 1), rows), gc_rand(F, 2, D(2, 3))};
    expect(grad_check_op("scatter_nd_rows", SC_OP_SCATTER_ND, &a, 3, c0, 1, NULL));
    gc_input c1[3] = {gc_rand(F, 2, D(3, 4)), gc_const(SC_I64, 2, D(3, 2), elems), gc_rand(F, 1, D(3))};
    expect(grad_check_op("scatter_nd_elements", SC_OP_SCATTER_ND, &a, 3, c1, 1, NULL));
    a.scatter_nd.reduction = SC_SCATTER_ADD;
    static const int64_t rep[3] = {1, 3, 1}; /* a repeated row: both updates add */
    gc_input c2[3] = {gc_rand(F, 2, D(4, 2)), gc_const(SC_I64, 2, D(3, 1), rep), gc_rand(F, 2, D(3, 2))};
    expect(grad_check_op("scatter_nd_add_repeats", SC_OP_SCATTER_ND, &a, 3, c2, 1, NULL));
    /* max and min, a repeated row included: dY goes to the winner of data and updates */
    a.scatter_nd.reduction = SC_SCATTER_MAX;
    gc_input c3[3] = {gc_rand(F, 2, D(4, 2)), gc_const(SC_I64, 2, D(3, 1), rep), gc_rand(F, 2, D(3, 2))};
    expect(grad_check_op("scatter_nd_max_repeats", SC_OP_SCATTER_ND, &a, 3, c3, 1, NULL));
    a.scatter_nd.reduction = SC_SCATTER_MIN;
    gc_input c4[3] = {gc_rand(F, 2, D(3, 4)), gc_const(SC_I64, 2, D(3, 2), elems), gc_rand(F, 1, D(3))};
    expect(grad_check_op("scatter_nd_min_elements", SC_OP_SCATTER_ND, &a, 3, c4, 1, NULL));
    /* a two-way tie: the even split is what central differences see at the kink */
    a.scatter_nd.reduction = SC_SCATTER_MAX;
    static const double tie_x[4] = {0.5, -1, 2, 0.25}, tie_u[2] = {0.5, 0.75};
    static const int64_t tie_at[2] = {0, 3};
    gc_input c5[3] = {gc_data(F, 1, D(4), tie_x), gc_const(SC_I64, 2, D(2, 1), tie_at), gc_data(F, 1, D(2), tie_u)};
    expect(grad_check_op("scatter_nd_max_tie", SC_OP_SCATTER_ND, &a, 3, c5, 1, NULL));
    /* mul with distinct tuples */
    a.scatter_nd.reduction = SC_SCATTER_MUL;
    gc_input c6[3] = {gc_rand(F, 2, D(3, 4)), gc_const(SC_I64, 2, D(3, 2), elems), gc_rand(F, 1, D(3))};
    expect(grad_check_op("scatter_nd_mul_elements", SC_OP_SCATTER_ND, &a, 3, c6, 1, NULL));
    gc_input c7[3] = {gc_rand(F, 2, D(4, 3)), gc_const(SC_I64, 2, D(2, 1), rows), gc_rand(F, 2, D(2, 3))};
    expect(grad_check_op("scatter_nd_mul_rows", SC_OP_SCATTER_ND, &a, 3, c7, 1, NULL));
    /* GatherND: whole rows with a repeat, elements of a 3-D tensor, and batch_dims 1 and 2. */
    memset(&a, 0, sizeof a);
    gc_input n0[2] = {gc_rand(F, 2, D(4, 3)), gc_const(SC_I64, 2, D(3, 1), rep)};
    expect(grad_check_op("gather_nd_rows_repeats", SC_OP_GATHER_ND, &a, 2, n0, 1, NULL));
    static const int64_t pairs[6] = {0, 1, 1, 2, 1, -1};
    gc_input n1[2] = {gc_rand(F, 3, D(2, 3, 4)), gc_const(SC_I64, 2, D(3, 2), pairs)};
    expect(grad_check_op("gather_nd_3d", SC_OP_GATHER_ND, &a, 2, n1, 1, NULL));
    /* batch_dims 1: per batch row, two tuples (one repeated, one negative) into [3, 4] slices */
    a.gather_nd.batch_dims = 1;
    static const int64_t per_row[8] = {0, 1, 0, 1, 2, -1, 1, 3};
    gc_input n2[2] = {gc_rand(F, 3, D(2, 3, 4)), gc_const(SC_I64, 3, D(2, 2, 2), per_row)};
    expect(grad_check_op("gather_nd_batch1", SC_OP_GATHER_ND, &a, 2, n2, 1, NULL));
    /* batch_dims 2, whole rows (k 1) of a 4-D tensor */
    a.gather_nd.batch_dims = 2;
    static const int64_t rows2[12] = {0, 2, 2, 1, 0, 0, 1, 1, 2, 0, 1, 2};
    gc_input n3[2] = {gc_rand(F, 4, D(2, 3, 3, 2)), gc_const(SC_I64, 4, D(2, 3, 2, 1), rows2)};
    expect(grad_check_op("gather_nd_batch2_rows", SC_OP_GATHER_ND, &a, 2, n3, 1, NULL));
}

static void test_pad_trilu(void) {
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.pad.mode = SC_PAD_CONSTANT;
    gc_input p1[3] = {gc_rand(F, 2, D(3, 4)), gc_const_i64(4, I64(1, 0, 2, 3)), gc_const_scalar(F, 0.5)};
    expect(grad_check_op("pad_constant", SC_OP_PAD, &a, 3, p1, 1, NULL));
    gc_input p2[2] = {gc_rand(F, 2, D(3, 4)), gc_const_i64(4, I64(-1, 2, 1, -2))};
    expect(grad_check_op("pad_crop_mixed", SC_OP_PAD, &a, 2, p2, 1, NULL));
    double v = 0.25;
    gc_input p3[3] = {gc_rand(F, 2, D(3, 4)), gc_const_i64(4, I64(1, 1, 0, 2)), gc_data(F, 0, NULL, &v)};
    expect(grad_check_op("pad_value_grad", SC_OP_PAD, &a, 3, p3, 1, NULL));
    gc_input p4[4] = {gc_rand(F, 3, D(2, 3, 4)), gc_const_i64(2, I64(2, 1)), gc_omitted(), gc_const_i64(1, I64(-1))};
    expect(grad_check_op("pad_axes", SC_OP_PAD, &a, 4, p4, 1, NULL));

    memset(&a, 0, sizeof a);
    a.trilu.upper = true;
    gc_input t1[1] = {gc_rand(F, 3, D(2, 3, 4))};
    expect(grad_check_op("trilu_upper", SC_OP_TRILU, &a, 1, t1, 1, NULL));
    a.trilu.upper = false;
    static const int64_t k = -1;
    gc_input t2[2] = {gc_rand(F, 2, D(4, 4)), gc_const(SC_I64, 0, NULL, &k)};
    expect(grad_check_op("trilu_lower_k", SC_OP_TRILU, &a, 2, t2, 1, NULL));
}

/* Tile: the gradient sums the copies. */
static void test_tile(void) {
    gc_input t1[2] = {gc_rand(F, 3, D(2, 3, 2)), gc_const_i64(3, I64(2, 1, 3))};
    expect(grad_check_op("tile", SC_OP_TILE, NULL, 2, t1, 1, NULL));
    gc_input t2[2] = {gc_rand(F, 1, D(4)), gc_const_i64(1, I64(3))};
    expect(grad_check_op("tile_1d", SC_OP_TILE, NULL, 2, t2, 1, NULL));
}

/* CumSum over a middle and the last axis, each way, inclusive and exclusive. */
static void test_cum_sum(void) {
    static const int64_t mid = 1, last = -1;
    for (int v = 0; v < 4; v++) {
        sc_attrs a;
        memset(&a, 0, sizeof a);
        a.cum_sum = (sc_cum_sum_attrs){.exclusive = v & 1, .reverse = v >> 1};
        char l[64];
        snprintf(l, sizeof l, "cum_sum_mid_ex%d_rev%d", v & 1, v >> 1);
        gc_input m[2] = {gc_rand(F, 3, D(2, 5, 3)), gc_const(SC_I64, 0, NULL, &mid)};
        expect(grad_check_op(l, SC_OP_CUM_SUM, &a, 2, m, 1, NULL));
        snprintf(l, sizeof l, "cum_sum_last_ex%d_rev%d", v & 1, v >> 1);
        gc_input t[2] = {gc_rand(F, 2, D(3, 6)), gc_const(SC_I64, 0, NULL, &last)};
        expect(grad_check_op(l, SC_OP_CUM_SUM, &a, 2, t, 1, NULL));
    }
}

/* The f32 GatherGrad kernel on an embedding-sized case (large enough for the threaded path) against
 * a naive scatter-add loop written here. */
static void test_gather_grad_f32(void) {
    enum { V = 50, C = 1000, N = 64 };
    float *dy = malloc(sizeof(float) * N * C), *got = malloc(sizeof(float) * V * C), *want = calloc(V * C, sizeof(float));
    int64_t idx[N];
    for (int k = 0; k < N; k++) idx[k] = (k * 7) % V - (k % 3 == 0 ? V : 0); /* repeats and negatives */
    for (int i = 0; i < N * C; i++) dy[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    for (int k = 0; k < N; k++)
        for (int j = 0; j < C; j++) want[((idx[k] + V) % V) * C + j] += dy[k * C + j];
    sc_tensor in[3] = {{sc_desc_make(SC_F32, 2, D(N, C)), dy}, {sc_desc_make(SC_I64, 1, D(N)), idx},
                       {sc_desc_make(SC_F32, 2, D(V, C)), got}};
    sc_tensor out[1] = {{sc_desc_make(SC_F32, 2, D(V, C)), got}};
    sc_node n;
    memset(&n, 0, sizeof n);
    n.op = SC_OP_GATHER_GRAD;
    n.name = "gather_grad_f32";
    n.attrs = &sc_attrs_none; /* axis 0 */
    sc_status st = cpu_run_node(&n, in, 3, out, 1);
    double worst = 0;
    for (int i = 0; !st && i < V * C; i++) worst = fmax(worst, fabs(got[i] - want[i]));
    bool ok = !st && worst <= 1e-5;
    if (!ok) printf("FAIL gather_grad_f32: %s (max error %g)\n", st ? sc_status_message(st) : "mismatch", worst);
    sc_status_free(st);
    free(dy);
    free(got);
    free(want);
    expect(ok);
}

int main(void) {
    test_gather_grad_f32();
    test_reduce();
    test_reshape_like();
    test_concat_split();
    test_slice_gather();
    test_pad_trilu();
    test_cum_sum();
    test_tile();
    printf("%d gradient checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
