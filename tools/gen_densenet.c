/* DenseNet generator (Huang et al. 2017, "Densely Connected Convolutional Networks"), following
 * torchvision 0.14's densenet.py without the bottleneck's memory-efficient mode:
 *
 *   input [batch,3,S,S] -> conv0 3x3 (2k channels; the CIFAR stem, so small images keep their size)
 *   -> denseblock1 -> transition1 -> ... -> denseblockB -> norm5 -> relu
 *   -> GlobalAveragePool -> Flatten -> classifier (Gemm, transB) -> logits [batch, classes]
 *
 * A dense layer reads the concatenation of every earlier feature map of its block and emits k (the
 * growth rate) new channels: BN -> ReLU -> Conv 1x1 (4k, bottleneck "DenseNet-B") -> BN -> ReLU ->
 * Conv 3x3 (k); the block's running feature map becomes Concat(features, new) on axis 1. A
 * transition halves the channels and the resolution: BN -> ReLU -> Conv 1x1 -> AveragePool 2x2/2
 * (none after the last block, and none once the map is 1x1). Every layer's input is the whole
 * concatenation, so the cuts between layers are wide and grow through each block: the planner's
 * stress case for concatenating graphs.
 *
 * Init as torchvision: convs kaiming_normal (fan_out, relu), BN gamma 1 beta 0, classifier weight and
 * bias uniform(+-1/sqrt(fan_in)) (nn.Linear's default; torchvision zeroes the bias, we keep the
 * generators' common Linear init).
 */
#include <math.h>
#include <stdio.h>

#include "tools/gen_models.h"

static const char *bn_relu(onnxb *b, const char *prefix, const char *x, int64_t c) {
    const char *y = gen_bn(b, prefix, x, c, 1.0f);
    return gen_op1(b, "Relu", y, onnxb_name(b, "%s.relu", prefix));
}

/* One dense layer at path p ("features.denseblock1.denselayer3"); returns its k new channels. */
static const char *dense_layer(onnxb *b, gen_rng *r, const char *p, const char *x, int64_t cin, int64_t growth) {
    const char *y = bn_relu(b, onnxb_name(b, "%s.norm1", p), x, cin);
    y = gen_conv(b, r, onnxb_name(b, "%s.conv1", p), y, cin, 4 * growth, 1, 1, 1, 0);
    y = bn_relu(b, onnxb_name(b, "%s.norm2", p), y, 4 * growth);
    return gen_conv(b, r, onnxb_name(b, "%s.conv2", p), y, 4 * growth, growth, 3, 1, 1, 0);
}

static const char *concat(onnxb *b, const char *x, const char *y, const char *out) {
    const char *in[2] = {x, y}, *o[1] = {out};
    Onnx__NodeProto *n = onnxb_node(b, "Concat", out, in, 2, o, 1);
    onnxb_attr_int(b, n, "axis", 1);
    return out;
}

static const char *transition(onnxb *b, gen_rng *r, int t, const char *x, int64_t cin, int64_t cout) {
    const char *p = onnxb_name(b, "features.transition%d", t);
    const char *y = bn_relu(b, onnxb_name(b, "%s.norm", p), x, cin);
    y = gen_conv(b, r, onnxb_name(b, "%s.conv", p), y, cin, cout, 1, 1, 1, 0);
    const char *in[1] = {y}, *out[1] = {onnxb_name(b, "%s.pool", p)};
    Onnx__NodeProto *n = onnxb_node(b, "AveragePool", out[0], in, 1, out, 1);
    int64_t ks[2] = {2, 2}, st[2] = {2, 2};
    onnxb_attr_ints(b, n, "kernel_shape", ks, 2);
    onnxb_attr_ints(b, n, "strides", st, 2);
    return out[0];
}

sc_status gen_densenet(onnxb *b, const gen_densenet_opts *o) {
    if (o->blocks < 1 || o->layers < 1 || o->growth < 1 || o->classes < 1 || o->image < 1)
        return sc_errorf("densenet: --blocks, --layers-per-block, --growth, --classes and --image must be positive");
    gen_rng r;
    gen_rng_seed(&r, o->seed);
    gen_image_input(b, o->image);
    int64_t c = 2 * o->growth, side = o->image;
    const char *y = gen_conv(b, &r, "features.conv0", "input", 3, c, 3, 1, 1, 0);
    for (int64_t blk = 1; blk <= o->blocks && !onnxb_error(b); blk++) {
        for (int64_t l = 1; l <= o->layers; l++) {
            const char *p = onnxb_name(b, "features.denseblock%lld.denselayer%lld", (long long)blk, (long long)l);
            const char *nw = dense_layer(b, &r, p, y, c, o->growth);
            y = concat(b, y, nw, onnxb_name(b, "%s.concat", p));
            c += o->growth;
        }
        if (blk < o->blocks && side >= 2) {
            y = transition(b, &r, (int)blk, y, c, c / 2);
            c /= 2;
            side /= 2;
        }
    }
    y = bn_relu(b, "features.norm5", y, c);
    gen_classifier_head(b, &r, "classifier", y, c, o->classes);
    return SC_OK;
}
