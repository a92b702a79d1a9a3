/* Gradients in mixed precision against float64 finite differences: every op whose ops.def row says
 * `low` (graph/pass_precision.c runs it on 16-bit inputs with f32 accumulation) and has a gradient
 * rule, in bf16 and in f16 (tests/op_coverage.py checks that each such op has a case here).
 *
 * Each case runs the op on its inputs cast to the 16-bit type, so its gradient comes from the
 * 16-bit kernels of the op's gradient rule (ConvGrad, MatMul/Gemm in 16 bits), and compares it with
 * central differences of the same op in f64 at the same point: the inputs are rounded to the 16-bit
 * type first (tests/grad_check.h, gc_options.low).
 *
 * Tolerance, from the error of one 16-bit gradient element g = sum_j a_j b_j: the factors carry one
 * rounding each (the inputs are exact; the incoming gradient dY is rounded once to 16 bits) and the
 * sum is rounded once after f32 accumulation, so |err| <= u |g| + u sum_j |a_j b_j| to first order,
 * u the unit roundoff (2^-9 bf16, 2^-12 f16). Rounding errors of independent terms partly cancel,
 * so the second term is about u sqrt(K) max|term|, within a few u of max|g|. The checks allow
 * rtol 2u and atol 4u max|g| (worst measured err/tol is printed). A gradient that is right in f64
 * but wrong in 16 bits (a kernel reading the wrong type, a missing cast, an f32 intermediate
 * rounded twice) is off by far more. */
#include <stdio.h>
#include <string.h>

#include "tests/grad_check.h"

#define D GC_DIMS
#define F SC_F64
#define I64(...) ((const int64_t[]){__VA_ARGS__})

static int failures, checks;

static void expect(bool ok) {
    checks++;
    failures += !ok;
}

static gc_options low_options(sc_dtype low) {
    double u = low == SC_F16 ? 1.0 / 4096 : 1.0 / 512;
    gc_options o;
    memset(&o, 0, sizeof o);
    o.low = low;
    o.rtol = 2 * u;
    o.atol = 1e-12;
    o.atol_of_max = 4 * u;
    o.verbose = true;
    return o;
}

static void check_op(const char *label, sc_op op, const sc_attrs *a, int n_in, const gc_input *in) {
    static const sc_dtype lows[] = {SC_BF16, SC_F16};
    for (int k = 0; k < 2; k++) {
        char l[128];
        snprintf(l, sizeof l, "%s_%s", label, sc_dtype_name(lows[k]));
        gc_options o = low_options(lows[k]);
        expect(grad_check_op(l, op, a, n_in, in, 1, &o));
    }
}

static sc_attrs window(int ns, const int64_t *strides, const int64_t *pads, int64_t group) {
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.window.n_spatial = ns;
    for (int i = 0; i < ns; i++) {
        a.window.strides[i] = strides ? strides[i] : 1;
        a.window.dilations[i] = 1;
        a.window.pads[i] = pads ? pads[i] : 0;
        a.window.pads[ns + i] = pads ? pads[ns + i] : 0;
    }
    a.window.group = group;
    return a;
}

static void test_conv(void) {
    sc_attrs a = window(2, NULL, I64(1, 1, 1, 1), 1);
    gc_input in[3] = {gc_rand(F, 4, D(2, 3, 5, 5)), gc_rand(F, 4, D(4, 3, 3, 3)), gc_rand(F, 1, D(4))};
    check_op("conv2d_3x3_pad1_bias", SC_OP_CONV, &a, 3, in);
    a = window(2, I64(2, 2), I64(1, 0, 1, 0), 2);
    gc_input grouped[3] = {gc_rand(F, 4, D(1, 4, 6, 5)), gc_rand(F, 4, D(4, 2, 3, 2)), gc_omitted()};
    check_op("conv2d_group2_stride2", SC_OP_CONV, &a, 3, grouped);
}

static void test_matmul(void) {
    gc_input in[2] = {gc_rand(F, 2, D(3, 8)), gc_rand(F, 2, D(8, 5))};
    check_op("matmul_2d", SC_OP_MATMUL, NULL, 2, in);
    gc_input batched[2] = {gc_rand(F, 3, D(2, 3, 6)), gc_rand(F, 2, D(6, 4))};
    check_op("matmul_shared_weight", SC_OP_MATMUL, NULL, 2, batched);
}

static void test_gemm(void) {
    for (int t = 0; t < 4; t++) {
        sc_attrs a;
        memset(&a, 0, sizeof a);
        a.gemm.alpha = 0.75f;
        a.gemm.beta = 1.25f;
        a.gemm.trans_a = t & 1;
        a.gemm.trans_b = (t & 2) != 0;
        gc_input in[3] = {a.gemm.trans_a ? gc_rand(F, 2, D(6, 3)) : gc_rand(F, 2, D(3, 6)),
                          a.gemm.trans_b ? gc_rand(F, 2, D(5, 6)) : gc_rand(F, 2, D(6, 5)), gc_rand(F, 1, D(5))};
        char l[64];
        snprintf(l, sizeof l, "gemm_tA%d_tB%d", t & 1, (t & 2) != 0);
        check_op(l, SC_OP_GEMM, &a, 3, in);
    }
}

int main(void) {
    test_conv();
    test_matmul();
    test_gemm();
    printf("%d low-precision gradient checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
