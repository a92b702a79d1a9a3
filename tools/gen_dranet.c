/* DRANet generator: a dual relation-aware attention segmentation network in the form of DANet
 * (Fu et al. 2019, "Dual Attention Network for Scene Segmentation"; Fu et al. 2020, "Scene
 * Segmentation with Dual Relation-aware Attention Network"), layout and init after PyTorch-Encoding's
 * DANetHead. Ops are those of graph/ops.def only.
 *
 *   input [batch,3,S,S]                              S a multiple of 8, F = S/8
 *   backbone: dilated ResNet-50/101 (gen_resnet_trunk, dilated): stride 8, layer3 dilation 2 and
 *             layer4 dilation 4 (their first blocks keep the previous dilation, as torchvision);
 *             features x [batch, Cb=32w, F, F]  (w = --width, Cb = 2048 at w = 64)
 *   head, C' = Cb/4:
 *     position branch: pa = conv5a(x)       3x3 conv Cb->C' + BN + ReLU
 *       q = query(pa) 1x1 C'->C'/8 (bias), k = key(pa) 1x1 C'->C'/8, v = value(pa) 1x1 C'->C'
 *       Q = Transpose(Reshape(q, [0, C'/8, F*F]), [0,2,1])   [batch, HW, C'/8]
 *       A = Softmax(MatMul(Q, Reshape(k)), axis -1)            [batch, HW, HW]
 *       o = MatMul(Reshape(v), Transpose(A))                   [batch, C', HW]
 *       pam = gamma_p * Reshape(o, [0, C', F, F]) + pa;  sa = conv51(pam) 3x3 + BN + ReLU
 *     channel branch: ca = conv5c(x)        3x3 conv Cb->C' + BN + ReLU
 *       X = Reshape(ca, [0, C', HW]);  E = MatMul(X, Transpose(X))  [batch, C', C']
 *       DANet takes softmax(rowmax(E) - E); softmax is invariant to a per-row shift, so this is
 *       exactly Softmax(Neg(E)) (no ReduceMax needed).
 *       cam = gamma_c * Reshape(MatMul(A_c, X), [0, C', F, F]) + ca;  sc = conv52(cam) 3x3 + BN + ReLU
 *     fused: conv8(sa + sc), 1x1 conv C'->classes with bias (the training-only Dropout is omitted)
 *   Resize x8, mode linear, half_pixel (PyTorch's bilinear, align_corners=False)
 *   -> output [batch, classes, S, S]
 *
 * Init: convs kaiming_normal(fan_out), conv biases uniform(+-1/sqrt(fan_in)), BN 1/0/0/1 except each
 * backbone block's last BN gamma, --residual-gamma (1 as torchvision's default); attention gammas
 * --gamma (0 as in DANet, so an untrained head starts as the identity on each branch).
 */
#include <stdio.h>

#include "tools/gen_models.h"

static const char *reshape(onnxb *b, const char *x, const char *name, int n, const int64_t *shape) {
    const char *s = onnxb_const_i64(b, onnxb_name(b, "%s.shape", name), n, shape);
    return gen_op2(b, "Reshape", x, s, name);
}

static const char *transpose(onnxb *b, const char *x, const char *name, int n, const int64_t *perm) {
    const char *in[1] = {x}, *out[1] = {name};
    Onnx__NodeProto *node = onnxb_node(b, "Transpose", name, in, 1, out, 1);
    onnxb_attr_ints(b, node, "perm", perm, n);
    return name;
}

static const char *softmax(onnxb *b, const char *x, const char *name) {
    const char *in[1] = {x}, *out[1] = {name};
    Onnx__NodeProto *node = onnxb_node(b, "Softmax", name, in, 1, out, 1);
    onnxb_attr_int(b, node, "axis", -1);
    return name;
}

/* gamma * y + x, gamma a learnable [1] parameter. */
static const char *gamma_residual(onnxb *b, const char *p, const char *y, const char *x, double gamma) {
    int64_t gd[1] = {1};
    const char *g = gen_param_fill(b, onnxb_name(b, "%s.gamma", p), 1, gd, (float)gamma);
    y = gen_op2(b, "Mul", g, y, onnxb_name(b, "%s.scaled", p));
    return gen_op2(b, "Add", y, x, onnxb_name(b, "%s.out", p));
}

static const char *position_attention(onnxb *b, gen_rng *r, const char *x, int64_t c, int64_t hw, int64_t f,
                                      double gamma) {
    int64_t c8 = c / 8 > 0 ? c / 8 : 1;
    const char *q = gen_conv(b, r, "head.sa.query_conv", x, c, c8, 1, 1, 1, 1);
    const char *k = gen_conv(b, r, "head.sa.key_conv", x, c, c8, 1, 1, 1, 1);
    const char *v = gen_conv(b, r, "head.sa.value_conv", x, c, c, 1, 1, 1, 1);
    int64_t s8[3] = {0, c8, hw}, sc[3] = {0, c, hw}, s4[4] = {0, c, f, f}, perm[3] = {0, 2, 1};
    q = reshape(b, q, "head.sa.q", 3, s8);
    q = transpose(b, q, "head.sa.qT", 3, perm);
    k = reshape(b, k, "head.sa.k", 3, s8);
    v = reshape(b, v, "head.sa.v", 3, sc);
    const char *e = gen_op2(b, "MatMul", q, k, "head.sa.energy");
    const char *a = softmax(b, e, "head.sa.attention");
    a = transpose(b, a, "head.sa.attentionT", 3, perm);
    const char *o = gen_op2(b, "MatMul", v, a, "head.sa.mix");
    o = reshape(b, o, "head.sa.mix4", 4, s4);
    return gamma_residual(b, "head.sa", o, x, gamma);
}

static const char *channel_attention(onnxb *b, const char *x, int64_t c, int64_t hw, int64_t f, double gamma) {
    int64_t sc[3] = {0, c, hw}, s4[4] = {0, c, f, f}, perm[3] = {0, 2, 1};
    const char *xf = reshape(b, x, "head.sc.x", 3, sc);
    const char *xt = transpose(b, xf, "head.sc.xT", 3, perm);
    const char *e = gen_op2(b, "MatMul", xf, xt, "head.sc.energy");
    e = gen_op1(b, "Neg", e, "head.sc.energy_new");
    const char *a = softmax(b, e, "head.sc.attention");
    const char *o = gen_op2(b, "MatMul", a, xf, "head.sc.mix");
    o = reshape(b, o, "head.sc.mix4", 4, s4);
    return gamma_residual(b, "head.sc", o, x, gamma);
}

sc_status gen_dranet(onnxb *b, const gen_dranet_opts *o) {
    if (o->depth != 50 && o->depth != 101)
        return sc_errorf("dranet: --depth must be 50 or 101 (got %lld)", (long long)o->depth);
    if (o->image < 8 || o->image % 8)
        return sc_errorf("dranet: --image must be a positive multiple of 8 (output stride 8), got %lld",
                         (long long)o->image);
    if (o->width < 1 || o->classes < 1) return sc_errorf("dranet: --width and --classes must be positive");
    gen_rng r;
    gen_rng_seed(&r, o->seed);
    int64_t out_dims[4] = {-1, o->classes, o->image, o->image};
    const char *dn[4] = {"batch"};
    gen_image_input(b, o->image);
    int64_t cb;
    const char *x = gen_resnet_trunk(b, &r, o->depth, o->width, true, (float)o->residual_gamma, "input", &cb);
    int64_t c = cb / 4, f = o->image / 8, hw = f * f;

    const char *pa = gen_conv_bn(b, &r, "head.conv5a.0", "head.conv5a.1", x, cb, c, 3, 1, 1, 1);
    const char *ca = gen_conv_bn(b, &r, "head.conv5c.0", "head.conv5c.1", x, cb, c, 3, 1, 1, 1);
    const char *sa = position_attention(b, &r, pa, c, hw, f, o->gamma);
    const char *sc = channel_attention(b, ca, c, hw, f, o->gamma);
    sa = gen_conv_bn(b, &r, "head.conv51.0", "head.conv51.1", sa, c, c, 3, 1, 1, 1);
    sc = gen_conv_bn(b, &r, "head.conv52.0", "head.conv52.1", sc, c, c, 3, 1, 1, 1);
    const char *sum = gen_op2(b, "Add", sa, sc, "head.feat_sum");
    const char *logits = gen_conv(b, &r, "head.conv8.1", sum, c, o->classes, 1, 1, 1, 1);

    float scales[4] = {1, 1, 8, 8};
    int64_t sd[1] = {4};
    const char *in[3] = {logits, "", onnxb_const(b, "resize.scales", SC_F32, 1, sd, scales)};
    const char *out[1] = {"output"};
    Onnx__NodeProto *n = onnxb_node(b, "Resize", "resize", in, 3, out, 1);
    onnxb_attr_string(b, n, "mode", "linear");
    onnxb_attr_string(b, n, "coordinate_transformation_mode", "half_pixel");
    onnxb_output(b, "output", SC_F32, 4, out_dims, dn);
    return SC_OK;
}
