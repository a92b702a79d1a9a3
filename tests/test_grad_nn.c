/* Gradient rules of autodiff/grad_nn.c and the fused gradient kernels of backends/cpu/cpu_nn_*_grad.c:
 *  1. finite differences (tests/grad_check.h, f64, central differences, rtol 1e-3, atol 1e-5) of
 *     Conv (groups, depthwise, strides, dilations, asymmetric and SAME pads, 1-3 spatial dims),
 *     BatchNormalization in training and inference mode, MaxPool / AveragePool (pads, ceil_mode,
 *     count_include_pad, dilations), GlobalAveragePool, Softmax / LogSoftmax (middle axis,
 *     legacy_2d), LayerNormalization (axis, broadcast Scale / B), Resize (nearest, linear,
 *     coordinate modes, tf_crop_and_resize), Relu / Gelu (kernels of ReluGrad / GeluGrad), and
 *     training-mode Dropout;
 *  2. the f32 fast paths (oneDNN for ConvGrad) against the f64 reference loops on the same data;
 *  3. the Dropout mask: reproducible for one (seed, step, node), different across steps and nodes,
 *     kept fraction near 1 - ratio, Y = X mask / (1 - ratio).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_rng.h"
#include "tests/grad_check.h"

#define D GC_DIMS
#define F SC_F64
#define I64(...) ((const int64_t[]){__VA_ARGS__})

static int failures, checks;

static void expect(bool ok) {
    checks++;
    failures += !ok;
}

static void fail(const char *label, const char *what) {
    printf("FAIL %s: %s\n", label, what);
    checks++;
    failures++;
}

/* ---- attribute builders ---- */

static sc_attrs window(int ns, const int64_t *kernel, const int64_t *strides, const int64_t *dil, const int64_t *pads,
                       int64_t group) {
    sc_attrs a;
    memset(&a, 0, sizeof a);
    sc_window_attrs *w = &a.window;
    w->n_spatial = ns;
    w->has_kernel_shape = kernel != NULL;
    for (int i = 0; i < ns; i++) {
        w->kernel_shape[i] = kernel ? kernel[i] : 0;
        w->strides[i] = strides ? strides[i] : 1;
        w->dilations[i] = dil ? dil[i] : 1;
        w->pads[i] = pads ? pads[i] : 0;
        w->pads[ns + i] = pads ? pads[ns + i] : 0;
    }
    w->group = group;
    return a;
}

/* ---- 1. finite differences ---- */

static void conv(const char *label, sc_attrs a, gc_input x, gc_input w, bool bias) {
    gc_input in[3] = {x, w, bias ? gc_rand(F, 1, D(w.desc.dims[0])) : gc_omitted()};
    expect(grad_check_op(label, SC_OP_CONV, &a, 3, in, 1, NULL));
}

static void test_conv(void) {
    conv("conv2d_3x3_pad1_bias", window(2, NULL, NULL, NULL, I64(1, 1, 1, 1), 1), gc_rand(F, 4, D(2, 3, 5, 5)),
         gc_rand(F, 4, D(4, 3, 3, 3)), true);
    conv("conv2d_group2_stride_dil_asym_pads", window(2, NULL, I64(2, 1), I64(2, 1), I64(1, 0, 2, 1), 2),
         gc_rand(F, 4, D(2, 4, 7, 6)), gc_rand(F, 4, D(6, 2, 3, 2)), true);
    conv("conv2d_depthwise_stride2", window(2, NULL, I64(2, 2), NULL, I64(1, 1, 1, 1), 4), gc_rand(F, 4, D(1, 4, 5, 5)),
         gc_rand(F, 4, D(4, 1, 3, 3)), true);
    conv("conv2d_depthwise_multiplier2", window(2, NULL, NULL, I64(2, 2), I64(2, 2, 2, 2), 3),
         gc_rand(F, 4, D(2, 3, 6, 6)), gc_rand(F, 4, D(6, 1, 3, 3)), false);
    conv("conv2d_1x1_stride2", window(2, NULL, I64(2, 2), NULL, NULL, 1), gc_rand(F, 4, D(2, 3, 5, 4)),
         gc_rand(F, 4, D(5, 3, 1, 1)), true);
    conv("conv1d_dilation2", window(1, NULL, NULL, I64(2), I64(1, 0), 1), gc_rand(F, 3, D(2, 2, 9)),
         gc_rand(F, 3, D(3, 2, 3)), false);
    conv("conv3d", window(3, NULL, I64(1, 2, 1), NULL, I64(0, 1, 0, 1, 0, 1), 1), gc_rand(F, 5, D(1, 2, 4, 4, 3)),
         gc_rand(F, 5, D(2, 2, 2, 2, 2)), true);
    sc_attrs same = window(2, NULL, I64(2, 2), NULL, NULL, 1);
    same.window.auto_pad = SC_AUTO_PAD_SAME_UPPER;
    conv("conv2d_same_upper_stride2", same, gc_rand(F, 4, D(1, 2, 6, 5)), gc_rand(F, 4, D(3, 2, 4, 3)), true);
    /* Only the weight gradient (X a constant): ConvGrad with dX omitted. */
    sc_attrs a = window(2, NULL, NULL, NULL, I64(1, 1, 1, 1), 1);
    gc_input in[3] = {gc_nocheck(gc_rand(F, 4, D(2, 2, 4, 4))), gc_rand(F, 4, D(3, 2, 3, 3)), gc_rand(F, 1, D(3))};
    in[0].is_const = true;
    expect(grad_check_op("conv2d_weights_only", SC_OP_CONV, &a, 3, in, 1, NULL));
}

static void batch_norm(const char *label, bool training, gc_input x) {
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.batch_norm.epsilon = 1e-5f;
    a.batch_norm.momentum = 0.9f;
    a.batch_norm.training_mode = training;
    int64_t C = x.desc.dims[1];
    gc_input in[5] = {x, gc_rand_range(F, 1, D(C), 0.5, 1.5), gc_rand(F, 1, D(C)), gc_rand(F, 1, D(C)),
                      gc_rand_range(F, 1, D(C), 0.5, 2.0)};
    if (training) {
        /* Y does not depend on input_mean / input_var in training mode; the running statistics
         * (outputs 1, 2) are written back, not differentiated. */
        in[3] = gc_nocheck(in[3]);
        in[4] = gc_nocheck(in[4]);
        static const bool use[3] = {true, false, false};
        gc_options o = {.use_out = use};
        expect(grad_check_op(label, SC_OP_BATCH_NORM, &a, 5, in, 3, &o));
    } else {
        expect(grad_check_op(label, SC_OP_BATCH_NORM, &a, 5, in, 1, NULL));
    }
}

static void test_batch_norm(void) {
    batch_norm("batch_norm_training_4d", true, gc_rand(F, 4, D(3, 4, 2, 3)));
    batch_norm("batch_norm_training_2d", true, gc_rand(F, 2, D(5, 3)));
    batch_norm("batch_norm_training_3d", true, gc_rand_range(F, 3, D(2, 2, 5), -2, 3));
    batch_norm("batch_norm_inference_4d", false, gc_rand(F, 4, D(2, 3, 3, 2)));
    batch_norm("batch_norm_inference_2d", false, gc_rand(F, 2, D(4, 3)));
}

static void pool(const char *label, sc_op op, sc_attrs a, gc_input x) {
    gc_input in[1] = {x};
    expect(grad_check_op(label, op, &a, 1, in, 1, NULL));
}

static void test_pools(void) {
    sc_attrs a = window(2, I64(3, 3), I64(2, 2), NULL, I64(1, 1, 1, 1), 0);
    a.window.ceil_mode = true;
    pool("max_pool_3x3_s2_pad1_ceil", SC_OP_MAX_POOL, a, gc_rand(F, 4, D(2, 2, 6, 7)));
    pool("max_pool_2x2_dil2", SC_OP_MAX_POOL, window(2, I64(2, 2), NULL, I64(2, 2), NULL, 0), gc_rand(F, 4, D(1, 2, 5, 5)));
    pool("max_pool_1d_overlap", SC_OP_MAX_POOL, window(1, I64(3), NULL, NULL, I64(1, 2), 0), gc_rand(F, 3, D(2, 3, 7)));
    pool("avg_pool_3x3_s2_pad1_ceil", SC_OP_AVERAGE_POOL, a, gc_rand(F, 4, D(2, 2, 6, 7)));
    a.window.count_include_pad = true;
    pool("avg_pool_3x3_s2_pad1_ceil_include_pad", SC_OP_AVERAGE_POOL, a, gc_rand(F, 4, D(2, 2, 6, 7)));
    sc_attrs b = window(2, I64(2, 3), I64(1, 2), NULL, I64(0, 1, 1, 2), 0);
    b.window.count_include_pad = true;
    pool("avg_pool_asym_pads_include_pad", SC_OP_AVERAGE_POOL, b, gc_rand(F, 4, D(1, 3, 4, 6)));
    pool("avg_pool_3d", SC_OP_AVERAGE_POOL, window(3, I64(2, 2, 2), I64(2, 1, 2), NULL, I64(0, 1, 0, 1, 0, 1), 0),
         gc_rand(F, 5, D(1, 2, 4, 3, 5)));
    gc_input in[1] = {gc_rand(F, 4, D(2, 3, 4, 5))};
    expect(grad_check_op("global_average_pool", SC_OP_GLOBAL_AVERAGE_POOL, NULL, 1, in, 1, NULL));
}

static void softmax(const char *label, sc_op op, int64_t axis, bool legacy, gc_input x) {
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.axis.axis = axis;
    a.axis.legacy_2d = legacy;
    gc_input in[1] = {x};
    expect(grad_check_op(label, op, &a, 1, in, 1, NULL));
}

static void test_softmax(void) {
    static const sc_op ops[2] = {SC_OP_SOFTMAX, SC_OP_LOG_SOFTMAX};
    for (int k = 0; k < 2; k++) {
        char l[80];
        const char *n = sc_op_name(ops[k]);
        snprintf(l, sizeof l, "%s_middle_axis", n);
        softmax(l, ops[k], 1, false, gc_rand_range(F, 3, D(2, 3, 4), -2, 2));
        snprintf(l, sizeof l, "%s_last_axis", n);
        softmax(l, ops[k], -1, false, gc_rand_range(F, 3, D(2, 3, 5), -2, 2));
        snprintf(l, sizeof l, "%s_legacy_2d_axis1", n);
        softmax(l, ops[k], 1, true, gc_rand_range(F, 3, D(2, 3, 4), -2, 2));
        snprintf(l, sizeof l, "%s_legacy_2d_axis0", n);
        softmax(l, ops[k], 0, true, gc_rand_range(F, 2, D(3, 4), -2, 2));
    }
}

static void layer_norm(const char *label, int64_t axis, gc_input x, gc_input scale, gc_input bias) {
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.layer_norm.axis = axis;
    a.layer_norm.epsilon = 1e-5f;
    a.layer_norm.stash_type = SC_F32;
    gc_input in[3] = {x, scale, bias};
    expect(grad_check_op(label, SC_OP_LAYER_NORM, &a, bias.omitted ? 2 : 3, in, 1, NULL));
}

static void test_layer_norm(void) {
    layer_norm("layer_norm_last_axis", -1, gc_rand(F, 3, D(2, 3, 4)), gc_rand_range(F, 1, D(4), 0.5, 1.5),
               gc_rand(F, 1, D(4)));
    layer_norm("layer_norm_axis1", 1, gc_rand(F, 3, D(2, 3, 4)), gc_rand_range(F, 2, D(3, 4), 0.5, 1.5),
               gc_rand(F, 2, D(3, 4)));
    layer_norm("layer_norm_axis1_broadcast_params", 1, gc_rand(F, 3, D(2, 3, 4)), gc_rand_range(F, 2, D(1, 4), 0.5, 1.5),
               gc_rand(F, 1, D(4)));
    layer_norm("layer_norm_no_bias", -1, gc_rand(F, 2, D(3, 6)), gc_rand_range(F, 1, D(6), 0.5, 1.5), gc_omitted());
}

/* Resize (X, roi, scales, sizes): one of scales (f32) / sizes (i64) given, roi for tf_crop_and_resize. */
static void resize(const char *label, sc_resize_mode mode, sc_coord_transform coord, gc_input x, const float *scales,
                   const int64_t *sizes, const float *roi) {
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.resize.mode = mode;
    a.resize.coord = coord;
    a.resize.nearest_mode = SC_NEAREST_ROUND_PREFER_FLOOR;
    a.resize.cubic_coeff_a = -0.75f;
    a.resize.extrapolation_value = 0.5f;
    int r = x.desc.rank;
    int64_t rr = 2 * r, rn = r;
    gc_input in[4] = {roi ? gc_const(SC_F32, 1, &rr, roi) : gc_omitted(),
                      scales ? gc_const(SC_F32, 1, &rn, scales) : gc_omitted(),
                      sizes ? gc_const_i64(r, sizes) : gc_omitted(), gc_omitted()};
    gc_input all[4] = {x, in[0], in[1], in[2]};
    expect(grad_check_op(label, SC_OP_RESIZE, &a, sizes ? 4 : 3, all, 1, NULL));
}

static void test_resize(void) {
    static const float up[4] = {1, 1, 2, 3}, frac[4] = {1, 1, 1.5f, 2.5f}, down[4] = {1, 1, 0.6f, 0.5f};
    static const float roi[8] = {0, 0, 0.1f, -0.2f, 1, 1, 0.8f, 1.3f};
    resize("resize_nearest_up_half_pixel", SC_RESIZE_NEAREST, SC_CT_HALF_PIXEL, gc_rand(F, 4, D(1, 2, 3, 2)), up, NULL, NULL);
    resize("resize_nearest_down_asymmetric", SC_RESIZE_NEAREST, SC_CT_ASYMMETRIC, gc_rand(F, 4, D(2, 1, 5, 6)), down, NULL,
           NULL);
    resize("resize_nearest_sizes", SC_RESIZE_NEAREST, SC_CT_HALF_PIXEL, gc_rand(F, 4, D(1, 2, 3, 4)), NULL,
           I64(1, 2, 5, 3), NULL);
    resize("resize_linear_half_pixel_frac", SC_RESIZE_LINEAR, SC_CT_HALF_PIXEL, gc_rand(F, 4, D(1, 2, 3, 4)), frac, NULL,
           NULL);
    resize("resize_linear_pytorch_half_pixel_down", SC_RESIZE_LINEAR, SC_CT_PYTORCH_HALF_PIXEL,
           gc_rand(F, 4, D(1, 2, 5, 6)), down, NULL, NULL);
    resize("resize_linear_align_corners_sizes", SC_RESIZE_LINEAR, SC_CT_ALIGN_CORNERS, gc_rand(F, 4, D(2, 1, 3, 4)), NULL,
           I64(2, 1, 7, 5), NULL);
    resize("resize_linear_tf_crop_and_resize", SC_RESIZE_LINEAR, SC_CT_TF_CROP_AND_RESIZE, gc_rand(F, 4, D(1, 1, 4, 5)),
           up, NULL, roi);
}

static void test_activations(void) {
    gc_input x[1] = {gc_rand_range(F, 3, D(2, 3, 4), -2, 2)};
    expect(grad_check_op("relu", SC_OP_RELU, NULL, 1, x, 1, NULL));
    sc_attrs a;
    memset(&a, 0, sizeof a);
    expect(grad_check_op("gelu_exact", SC_OP_GELU, &a, 1, x, 1, NULL));
    a.gelu.tanh_approx = true;
    expect(grad_check_op("gelu_tanh", SC_OP_GELU, &a, 1, x, 1, NULL));
}

/* Training-mode Dropout: the mask is a fixed function of (seed, step, node), so the perturbed
 * forward runs of the finite differences see the same mask. */
static void test_dropout_grad(void) {
    cpu_set_dropout_rng(7, 3);
    static const uint8_t on = 1;
    gc_input in[3] = {gc_rand(F, 2, D(8, 9)), gc_const_scalar(SC_F32, 0.3), gc_const(SC_BOOL, 0, NULL, &on)};
    expect(grad_check_op("dropout_training", SC_OP_DROPOUT, NULL, 3, in, 2, NULL));
}

/* ---- 2. f32 fast path against the f64 reference ---- */

static uint64_t rng_state = 0x1234567;

static double urand(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 9007199254740992.0 * 2 - 1;
}

typedef struct {
    sc_tensor t64, t32;
} dual;

static dual dual_make(const sc_desc *d, bool fill) {
    dual r;
    int64_t n = sc_desc_numel(d);
    r.t64.desc = *d;
    r.t64.desc.dtype = SC_F64;
    r.t32.desc = *d;
    r.t32.desc.dtype = SC_F32;
    r.t64.data = calloc((size_t)(n ? n : 1), sizeof(double));
    r.t32.data = calloc((size_t)(n ? n : 1), sizeof(float));
    for (int64_t i = 0; fill && i < n; i++) {
        ((double *)r.t64.data)[i] = (float)urand(); /* representable in f32: same data on both paths */
        ((float *)r.t32.data)[i] = (float)((double *)r.t64.data)[i];
    }
    return r;
}

static void dual_free(dual *d) {
    free(d->t64.data);
    free(d->t32.data);
}

/* A node for cpu_run_node: no value ids, only what the kernels read. */
static sc_node node_of(const char *label, sc_op op, const sc_attrs *a, int n_in, int n_out) {
    return (sc_node){.op = op, .name = label, .n_in = n_in, .n_out = n_out, .attrs = a};
}

/* Runs op on f64 and f32 copies of random inputs; outputs given by desc, NULL = omitted. Compares
 * every output with |f32 - f64| <= rtol * max|f64| + 1e-6. */
static void f32_vs_f64(const char *label, sc_op op, const sc_attrs *a, int n_in, const sc_desc *in_d, int n_out,
                       const sc_desc *const *out_d, double rtol) {
    sc_node node = node_of(label, op, a, n_in, n_out);
    dual in[4], out[4];
    sc_tensor i64[4], i32[4], o64[4], o32[4];
    for (int i = 0; i < n_in; i++) {
        in[i] = dual_make(&in_d[i], true);
        i64[i] = in[i].t64;
        i32[i] = in[i].t32;
    }
    for (int k = 0; k < n_out; k++) {
        sc_desc none = sc_desc_make(SC_F64, 0, NULL);
        out[k] = dual_make(out_d[k] ? out_d[k] : &none, false);
        o64[k] = out[k].t64;
        o32[k] = out[k].t32;
        if (!out_d[k]) o64[k].data = o32[k].data = NULL;
    }
    sc_status s64 = cpu_run_node(&node, i64, n_in, o64, n_out);
    sc_status s32 = s64 ? SC_OK : cpu_run_node(&node, i32, n_in, o32, n_out);
    if (s64 || s32) {
        fail(label, sc_status_message(s64 ? s64 : s32));
        sc_status_free(s64 ? s64 : s32);
    } else {
        bool ok = true;
        for (int k = 0; k < n_out; k++) {
            if (!out_d[k]) continue;
            int64_t n = sc_desc_numel(out_d[k]);
            const double *r = o64[k].data;
            const float *f = o32[k].data;
            double mx = 0, worst = 0;
            int64_t wi = 0;
            for (int64_t i = 0; i < n; i++) mx = fmax(mx, fabs(r[i]));
            for (int64_t i = 0; i < n; i++) {
                double e = fabs((double)f[i] - r[i]);
                if (e > worst || !(e == e)) worst = e, wi = i;
            }
            if (!(worst <= rtol * mx + 1e-6)) {
                printf("FAIL %s: output %d element %lld: f32 %.8g vs f64 %.8g (max |f64| %.4g)\n", label, k,
                       (long long)wi, f[wi], r[wi], mx);
                ok = false;
            }
        }
        expect(ok);
    }
    for (int i = 0; i < n_in; i++) dual_free(&in[i]);
    for (int k = 0; k < n_out; k++) dual_free(&out[k]);
}

/* The f32 kernel gives the same bits on 1, 2 and 3 threads: its reductions are partitioned by the
 * shape alone (LayerNormalizationGrad's row chunks, ConvGrad's dW items, sgemm's tiles), never by
 * the thread count. */
static void thread_invariant(const char *label, sc_op op, const sc_attrs *a, int n_in, const sc_desc *in_d,
                             int n_out, const sc_desc *const *out_d) {
    sc_node node = node_of(label, op, a, n_in, n_out);
    dual in[4], out[3][4];
    sc_tensor i32[4], o32[3][4];
    for (int i = 0; i < n_in; i++) {
        in[i] = dual_make(&in_d[i], true);
        i32[i] = in[i].t32;
    }
    int saved = cpu_num_threads();
    bool ok = true;
    for (int t = 0; t < 3; t++) {
        for (int k = 0; k < n_out; k++) {
            out[t][k] = dual_make(out_d[k], false);
            o32[t][k] = out[t][k].t32;
        }
        cpu_set_num_threads(t + 1);
        sc_status st = cpu_run_node(&node, i32, n_in, o32[t], n_out);
        if (st) {
            fail(label, sc_status_message(st));
            sc_status_free(st);
            ok = false;
        }
        for (int k = 0; ok && t > 0 && k < n_out; k++)
            if (memcmp(o32[t][k].data, o32[0][k].data, sizeof(float) * (size_t)sc_desc_numel(out_d[k]))) {
                printf("FAIL %s: output %d on %d threads differs from 1 thread\n", label, k, t + 1);
                ok = false;
            }
    }
    cpu_set_num_threads(saved);
    expect(ok);
    for (int i = 0; i < n_in; i++) dual_free(&in[i]);
    for (int t = 0; t < 3; t++)
        for (int k = 0; k < n_out; k++) dual_free(&out[t][k]);
}

/* ConvGrad's operands and outputs: X [N, C, H, W], W [M, C/G, kh, kw]; dY's size from the window;
 * in = {dY, X, W}, out = {dX, dW, dB}. */
static void conv_grad_descs(const int64_t *xd, const int64_t *wd, sc_attrs *a, int rank, sc_desc *in, sc_desc *out) {
    const sc_window_attrs *w = &a->window;
    a->window.n_spatial = rank - 2;
    a->window.has_kernel_shape = true;
    sc_desc x = sc_desc_make(F, rank, xd), wt = sc_desc_make(F, rank, wd), dy = x;
    dy.dims[1] = wd[0];
    for (int i = 0; i < rank - 2; i++) {
        a->window.kernel_shape[i] = wd[2 + i];
        int64_t ext = (wd[2 + i] - 1) * w->dilations[i] + 1;
        dy.dims[2 + i] = (xd[2 + i] + w->pads[i] + w->pads[rank - 2 + i] - ext) / w->strides[i] + 1;
    }
    in[0] = dy;
    in[1] = out[0] = x;
    in[2] = out[1] = wt;
    out[2] = sc_desc_make(F, 1, wd);
}

/* ConvGrad's three gradients are the same bits on 1, 2 and 3 threads (dW: cpu_nn_conv_grad_w.c). */
static void conv_grad_threads(const char *label, const int64_t *xd, const int64_t *wd, sc_attrs a) {
    sc_desc in[3], out[3];
    conv_grad_descs(xd, wd, &a, 4, in, out);
    const sc_desc *outp[3] = {&out[0], &out[1], &out[2]};
    thread_invariant(label, SC_OP_CONV_GRAD, &a, 3, in, 3, outp);
}

static void conv_grad_f32(const char *label, const int64_t *xd, const int64_t *wd, sc_attrs a, int rank,
                          const bool *want) {
    sc_desc in[3], d[3];
    conv_grad_descs(xd, wd, &a, rank, in, d);
    const sc_desc *out[3] = {want[0] ? &d[0] : NULL, want[1] ? &d[1] : NULL, want[2] ? &d[2] : NULL};
    f32_vs_f64(label, SC_OP_CONV_GRAD, &a, 3, in, 3, out, 2e-5);
}

static void test_f32_paths(void) {
    static const bool all[3] = {true, true, true}, data_only[3] = {true, false, false}, bias_only[3] = {false, false, true},
                      wb[3] = {false, true, true};
    conv_grad_f32("f32_conv_grad_3x3_pad1", I64(2, 8, 9, 9), I64(16, 8, 3, 3), window(2, NULL, NULL, NULL, I64(1, 1, 1, 1), 1),
                  4, all);
    conv_grad_f32("f32_conv_grad_1x1_plain", I64(2, 16, 7, 7), I64(8, 16, 1, 1), window(2, NULL, NULL, NULL, NULL, 1), 4, all);
    conv_grad_f32("f32_conv_grad_7x7_s2_p3", I64(2, 3, 16, 16), I64(8, 3, 7, 7),
                  window(2, NULL, I64(2, 2), NULL, I64(3, 3, 3, 3), 1), 4, all);
    conv_grad_f32("f32_conv_grad_group2_dil2_asym", I64(2, 8, 11, 10), I64(12, 4, 3, 2),
                  window(2, NULL, I64(2, 1), I64(2, 1), I64(1, 0, 2, 1), 2), 4, all);
    conv_grad_f32("f32_conv_grad_depthwise_s2", I64(2, 16, 10, 10), I64(16, 1, 3, 3),
                  window(2, NULL, I64(2, 2), NULL, I64(1, 1, 1, 1), 16), 4, all);
    conv_grad_f32("f32_conv_grad_1d", I64(3, 4, 20), I64(6, 4, 5), window(1, NULL, I64(2), I64(2), I64(2, 1), 1), 3, all);
    conv_grad_f32("f32_conv_grad_3d_group2", I64(2, 4, 6, 5, 4), I64(4, 2, 3, 3, 3),
                  window(3, NULL, I64(1, 2, 1), NULL, I64(1, 1, 0, 1, 0, 1), 2), 5, all);
    conv_grad_f32("f32_conv_grad_data_only", I64(2, 8, 9, 9), I64(16, 8, 3, 3), window(2, NULL, NULL, NULL, I64(1, 1, 1, 1), 1),
                  4, data_only);
    conv_grad_f32("f32_conv_grad_bias_only", I64(2, 8, 9, 9), I64(16, 8, 3, 3), window(2, NULL, NULL, NULL, I64(1, 1, 1, 1), 1),
                  4, bias_only);
    conv_grad_f32("f32_conv_grad_weights_bias", I64(2, 8, 9, 9), I64(16, 8, 3, 3), window(2, NULL, I64(2, 2), NULL, NULL, 1),
                  4, wb);

    /* Big enough for dW to be cut into batch chunks and output-channel slices (ragged: 40 = 16 + 24),
     * or into runs of groups (cpu_nn_conv_grad_w.c). */
    conv_grad_f32("f32_conv_grad_cut_chunks_slices", I64(6, 32, 16, 16), I64(40, 32, 3, 3),
                  window(2, NULL, NULL, NULL, I64(1, 1, 1, 1), 1), 4, wb);
    conv_grad_f32("f32_conv_grad_cut_groups", I64(1, 64, 32, 32), I64(64, 16, 3, 3),
                  window(2, NULL, NULL, NULL, I64(1, 1, 1, 1), 4), 4, wb);
    conv_grad_f32("f32_conv_grad_cut_1x1_s2", I64(5, 64, 16, 16), I64(128, 64, 1, 1),
                  window(2, NULL, I64(2, 2), NULL, NULL, 1), 4, all);
    conv_grad_f32("f32_conv_grad_cut_1d", I64(8, 32, 512), I64(48, 32, 5), window(1, NULL, I64(1), NULL, I64(2, 2), 1), 3,
                  wb);
    conv_grad_f32("f32_conv_grad_cut_3d", I64(2, 16, 8, 8, 8), I64(40, 16, 3, 3, 3),
                  window(3, NULL, NULL, NULL, I64(1, 1, 1, 1, 1, 1), 1), 5, wb);
    conv_grad_threads("conv_grad_threads_3x3", I64(16, 64, 16, 16), I64(64, 64, 3, 3),
                      window(2, NULL, NULL, NULL, I64(1, 1, 1, 1), 1));
    conv_grad_threads("conv_grad_threads_1x1_s2", I64(4, 64, 16, 16), I64(128, 64, 1, 1),
                      window(2, NULL, I64(2, 2), NULL, NULL, 1));
    conv_grad_threads("conv_grad_threads_depthwise", I64(8, 96, 16, 16), I64(96, 1, 3, 3),
                      window(2, NULL, NULL, NULL, I64(1, 1, 1, 1), 96));

    /* sgemm on all threads gave other bits than on one (cpu_nn_gemm.c), e.g. for a GPT MLP's dX
     * (the trans_b case below); also a weight gradient's shape and a batched MatMul. */
    sc_attrs mm;
    memset(&mm, 0, sizeof mm);
    sc_desc ma[2] = {sc_desc_make(F, 2, D(8, 4096)), sc_desc_make(F, 2, D(4096, 48))}, my = sc_desc_make(F, 2, D(8, 48));
    const sc_desc *myp[1] = {&my};
    thread_invariant("matmul_threads_long_k", SC_OP_MATMUL, &mm, 2, ma, 1, myp);
    sc_desc ba[2] = {sc_desc_make(F, 4, D(2, 3, 64, 32)), sc_desc_make(F, 4, D(2, 3, 32, 64))},
            by = sc_desc_make(F, 4, D(2, 3, 64, 64));
    const sc_desc *byp[1] = {&by};
    thread_invariant("matmul_threads_batched", SC_OP_MATMUL, &mm, 2, ba, 1, byp);
    sc_attrs gm;
    memset(&gm, 0, sizeof gm);
    gm.gemm.alpha = gm.gemm.beta = 1.0f;
    gm.gemm.trans_a = true;
    sc_desc ga[2] = {sc_desc_make(F, 2, D(3000, 64)), sc_desc_make(F, 2, D(3000, 96))}, gy = sc_desc_make(F, 2, D(64, 96));
    const sc_desc *gyp[1] = {&gy};
    thread_invariant("gemm_threads_trans_a", SC_OP_GEMM, &gm, 2, ga, 1, gyp);
    gm.gemm.trans_a = false;
    gm.gemm.trans_b = true;
    sc_desc ta[2] = {sc_desc_make(F, 2, D(512, 1024)), sc_desc_make(F, 2, D(256, 1024))}, ty = sc_desc_make(F, 2, D(512, 256));
    const sc_desc *typ[1] = {&ty};
    thread_invariant("gemm_threads_trans_b", SC_OP_GEMM, &gm, 2, ta, 1, typ);

    sc_attrs bn;
    memset(&bn, 0, sizeof bn);
    bn.batch_norm.epsilon = 1e-5f;
    bn.batch_norm.training_mode = true;
    sc_desc x = sc_desc_make(F, 4, D(4, 6, 5, 7)), c = sc_desc_make(F, 1, D(6));
    sc_desc bin[3] = {x, x, c};
    const sc_desc *bout[3] = {&x, &c, &c};
    f32_vs_f64("f32_batch_norm_grad", SC_OP_BATCH_NORM_GRAD, &bn, 3, bin, 3, bout, 1e-4);

    sc_attrs ln;
    memset(&ln, 0, sizeof ln);
    ln.layer_norm.axis = -1;
    ln.layer_norm.epsilon = 1e-5f;
    sc_desc lx = sc_desc_make(F, 3, D(4, 70, 48)), lk = sc_desc_make(F, 1, D(48));
    sc_desc lin[3] = {lx, lx, lk};
    const sc_desc *lout[3] = {&lx, &lk, &lk};
    f32_vs_f64("f32_layer_norm_grad", SC_OP_LAYER_NORM_GRAD, &ln, 3, lin, 3, lout, 1e-4);
    thread_invariant("layer_norm_grad_threads", SC_OP_LAYER_NORM_GRAD, &ln, 3, lin, 3, lout);

    sc_attrs mp = window(2, I64(3, 3), I64(2, 2), NULL, I64(1, 1, 1, 1), 0);
    mp.window.ceil_mode = true;
    sc_desc px = sc_desc_make(F, 4, D(2, 3, 10, 9)), py = sc_desc_make(F, 4, D(2, 3, 5, 5));
    sc_desc pin[2] = {py, px};
    const sc_desc *pout[1] = {&px};
    f32_vs_f64("f32_max_pool_grad", SC_OP_MAX_POOL_GRAD, &mp, 2, pin, 1, pout, 1e-6);
    /* f32 2-D windows have their own loops (cpu_nn_pool_grad.c); f64 runs the generic ones. */
    sc_attrs md = window(2, I64(3, 2), I64(1, 2), I64(2, 2), I64(0, 1, 1, 0), 0);
    sc_desc dmx = sc_desc_make(F, 4, D(2, 3, 9, 8)), dmy = sc_desc_make(F, 4, D(2, 3, 6, 4));
    sc_desc min_[2] = {dmy, dmx};
    const sc_desc *mout[1] = {&dmx};
    f32_vs_f64("f32_max_pool_grad_dilated", SC_OP_MAX_POOL_GRAD, &md, 2, min_, 1, mout, 1e-6);
    f32_vs_f64("f32_average_pool_grad_dilated", SC_OP_AVERAGE_POOL_GRAD, &md, 2, min_, 1, mout, 1e-6);
    md.window.count_include_pad = true;
    f32_vs_f64("f32_average_pool_grad_dilated_pad", SC_OP_AVERAGE_POOL_GRAD, &md, 2, min_, 1, mout, 1e-6);
    mp.window.count_include_pad = true;
    f32_vs_f64("f32_average_pool_grad", SC_OP_AVERAGE_POOL_GRAD, &mp, 2, pin, 1, pout, 1e-6);

    sc_attrs sm;
    memset(&sm, 0, sizeof sm);
    sm.axis.axis = -1;
    sc_desc sx = sc_desc_make(F, 3, D(3, 5, 37));
    sc_desc sin_[2] = {sx, sx};
    const sc_desc *sout[1] = {&sx};
    f32_vs_f64("f32_softmax_grad", SC_OP_SOFTMAX_GRAD, &sm, 2, sin_, 1, sout, 1e-5);
    f32_vs_f64("f32_log_softmax_grad", SC_OP_LOG_SOFTMAX_GRAD, &sm, 2, sin_, 1, sout, 1e-5);
    sm.axis.axis = 1;
    f32_vs_f64("f32_softmax_grad_middle_axis", SC_OP_SOFTMAX_GRAD, &sm, 2, sin_, 1, sout, 1e-5);

    sc_attrs ge;
    memset(&ge, 0, sizeof ge);
    sc_desc gx = sc_desc_make(F, 1, D(5000));
    sc_desc gin[2] = {gx, gx};
    const sc_desc *gout[1] = {&gx};
    f32_vs_f64("f32_gelu_grad_exact", SC_OP_GELU_GRAD, &ge, 2, gin, 1, gout, 1e-5);
    ge.gelu.tanh_approx = true;
    f32_vs_f64("f32_gelu_grad_tanh", SC_OP_GELU_GRAD, &ge, 2, gin, 1, gout, 1e-5);
}

/* Ties: every window of a constant input has its first element as the maximum (PyTorch's
 * choice), so a 2x2 stride-1 window over 3x3 ones sends dY to the top-left 2x2 block. */
static void test_max_pool_ties(void) {
    sc_node node;
    memset(&node, 0, sizeof node);
    node.op = SC_OP_MAX_POOL_GRAD;
    node.name = "max_pool_ties";
    sc_attrs pool = window(2, I64(2, 2), NULL, NULL, NULL, 0);
    node.attrs = &pool;
    float x[9], dy[4] = {1, 2, 3, 4}, dx[9];
    for (int i = 0; i < 9; i++) x[i] = 1;
    static const float want[9] = {1, 2, 0, 3, 4, 0, 0, 0, 0};
    sc_tensor in[2] = {{sc_desc_make(SC_F32, 4, D(1, 1, 2, 2)), dy}, {sc_desc_make(SC_F32, 4, D(1, 1, 3, 3)), x}};
    sc_tensor out[1] = {{sc_desc_make(SC_F32, 4, D(1, 1, 3, 3)), dx}};
    sc_status st = cpu_run_node(&node, in, 2, out, 1);
    if (st) {
        fail("max_pool_ties", sc_status_message(st));
        sc_status_free(st);
        return;
    }
    if (memcmp(dx, want, sizeof want)) fail("max_pool_ties", "gradient not routed to the first maximum of each window");
    else expect(true);
}

/* ---- 3. Dropout masks ---- */

/* Runs training-mode Dropout (ratio, node name) on x of n f32 ones; returns the kept fraction. */
static double dropout_run(const char *name, float ratio, int64_t n, float *y, uint8_t *mask, sc_status *st) {
    sc_node node;
    memset(&node, 0, sizeof node);
    node.op = SC_OP_DROPOUT;
    node.name = name;
    node.attrs = &sc_attrs_none;
    node.n_in = 3;
    node.n_out = 2;
    static const uint8_t on = 1;
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) x[i] = 1.0f + (float)(i % 7);
    sc_tensor in[3] = {{sc_desc_make(SC_F32, 1, &n), x}, {sc_desc_make(SC_F32, 0, NULL), &ratio},
                       {sc_desc_make(SC_BOOL, 0, NULL), (void *)&on}};
    sc_tensor out[2] = {{sc_desc_make(SC_F32, 1, &n), y}, {sc_desc_make(SC_BOOL, 1, &n), mask}};
    *st = cpu_run_node(&node, in, 3, out, 2);
    int64_t kept = 0;
    bool values_ok = true;
    for (int64_t i = 0; i < n && !*st; i++) {
        kept += mask[i];
        float want = mask[i] ? x[i] / (1.0f - ratio) : 0.0f;
        values_ok = values_ok && fabsf(y[i] - want) <= 1e-6f * fabsf(want);
    }
    free(x);
    if (!values_ok) *st = sc_errorf("Y != X * mask / (1 - ratio)");
    return (double)kept / (double)n;
}

static void test_dropout_mask(void) {
    enum { N = 200000 };
    float *y = malloc(sizeof(float) * N);
    uint8_t *m1 = malloc(N), *m2 = malloc(N), *m3 = malloc(N), *m4 = malloc(N);
    sc_status st = SC_OK;
    cpu_set_dropout_rng(42, 1);
    double f1 = dropout_run("drop_a", 0.3f, N, y, m1, &st);
    if (!st) dropout_run("drop_a", 0.3f, N, y, m2, &st);
    cpu_set_dropout_rng(42, 2);
    if (!st) dropout_run("drop_a", 0.3f, N, y, m3, &st);
    cpu_set_dropout_rng(42, 1);
    if (!st) dropout_run("drop_b", 0.3f, N, y, m4, &st);
    if (st) {
        fail("dropout_mask", sc_status_message(st));
        sc_status_free(st);
    } else {
        int64_t diff_step = 0, diff_node = 0;
        for (int i = 0; i < N; i++) {
            diff_step += m1[i] != m3[i];
            diff_node += m1[i] != m4[i];
        }
        if (memcmp(m1, m2, N)) fail("dropout_same_seed_step", "masks differ");
        else expect(true);
        /* Independent masks with keep 0.7 differ in 2 * 0.7 * 0.3 = 42% of the elements. */
        if (fabs((double)diff_step / N - 0.42) > 0.01) fail("dropout_new_step", "mask of the next step not independent");
        else expect(true);
        if (fabs((double)diff_node / N - 0.42) > 0.01) fail("dropout_other_node", "masks of two nodes not independent");
        else expect(true);
        /* Binomial standard deviation sqrt(0.21 / N) ~ 0.001. */
        if (fabs(f1 - 0.7) > 0.005) {
            printf("FAIL dropout_fraction: kept %.4f, expected 0.7\n", f1);
            failures++, checks++;
        } else {
            expect(true);
        }
    }
    free(y);
    free(m1);
    free(m2);
    free(m3);
    free(m4);
}

int main(void) {
    test_conv();
    test_batch_norm();
    test_pools();
    test_softmax();
    test_layer_norm();
    test_resize();
    test_activations();
    test_dropout_grad();
    test_f32_paths();
    test_max_pool_ties();
    test_dropout_mask();
    printf("%d gradient checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
