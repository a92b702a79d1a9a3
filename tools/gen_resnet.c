/* ResNet generator (He et al. 2015, "Deep Residual Learning"), following torchvision 0.14's
 * resnet.py (the "v1.5" variant: a Bottleneck strides on its 3x3 conv, not the first 1x1).
 *
 *   input [batch,3,S,S] -> conv1 7x7/2 (w) -> bn1 -> relu -> maxpool 3x3/2 pad 1
 *   -> layer1..layer4 (planes w, 2w, 4w, 8w; layer2..4 stride 2 in their first block)
 *   -> GlobalAveragePool -> Flatten -> fc (Gemm, transB) -> logits [batch, classes]
 *
 * Standard depths: 18 [2,2,2,2] and 34 [3,4,6,3] BasicBlocks (expansion 1); 50 [3,4,6,3],
 * 101 [3,4,23,3], 152 [3,8,36,3] Bottlenecks (expansion 4). A block's shortcut is a 1x1 conv + BN
 * ("downsample") when its stride or channel count changes, identity otherwise; the sum goes through
 * ReLU. Any other depth D >= 1 is a *generic* ResNet: the same stem, then D BasicBlocks (two 3x3
 * conv+BN, identity shortcut) all at width w and stride 1, named blocks.<i>, then the same head;
 * every block adds the same nodes, so generation is O(D) in time and memory.
 *
 * zero_init_residual (torchvision's option; Goyal et al. 2017): the last BN of every block starts with
 * gamma 0, so each block starts as the identity. It is the default for generic depths, where the
 * plain init doubles the activation variance per block (a 1000-block stack overflows float32), and
 * off for the standard depths (torchvision's default); --zero-init-residual {0,1} overrides both.
 *
 * Init as torchvision: convs kaiming_normal(fan_out, relu), BN gamma 1 beta 0 (running mean 0,
 * var 1), fc weight and bias uniform(+-1/sqrt(fan_in)) (nn.Linear's default).
 */
#include <math.h>
#include <stdio.h>

#include "tools/gen_models.h"

typedef struct {
    int64_t depth;
    int blocks[4];
    int bottleneck;
} resnet_spec;

static const resnet_spec resnet_specs[] = {
    {18, {2, 2, 2, 2}, 0}, {34, {3, 4, 6, 3}, 0}, {50, {3, 4, 6, 3}, 1}, {101, {3, 4, 23, 3}, 1}, {152, {3, 8, 36, 3}, 1},
};

static const resnet_spec *spec_find(int64_t depth) {
    for (size_t i = 0; i < sizeof resnet_specs / sizeof resnet_specs[0]; i++)
        if (resnet_specs[i].depth == depth) return &resnet_specs[i];
    return NULL;
}

bool gen_resnet_is_standard(int64_t depth) { return spec_find(depth) != NULL; }

/* One residual block; p is its path ("layer1.0", "blocks.7"). */
static const char *block(onnxb *b, gen_rng *r, const char *p, const char *x, int64_t cin, int64_t planes,
                         int bottleneck, int stride, int dilation, float last_gamma, int64_t *c_out) {
    int64_t cout = bottleneck ? planes * 4 : planes;
    const char *y;
    if (bottleneck) {
        y = gen_conv_bn(b, r, onnxb_name(b, "%s.conv1", p), onnxb_name(b, "%s.bn1", p), x, cin, planes, 1, 1, 1, 1);
        y = gen_conv_bn(b, r, onnxb_name(b, "%s.conv2", p), onnxb_name(b, "%s.bn2", p), y, planes, planes, 3, stride,
                        dilation, 1);
        y = gen_conv_bn_gamma(b, r, onnxb_name(b, "%s.conv3", p), onnxb_name(b, "%s.bn3", p), y, planes, cout, 1, 1, 1,
                              0, last_gamma);
    } else {
        y = gen_conv_bn(b, r, onnxb_name(b, "%s.conv1", p), onnxb_name(b, "%s.bn1", p), x, cin, planes, 3, stride,
                        dilation, 1);
        y = gen_conv_bn_gamma(b, r, onnxb_name(b, "%s.conv2", p), onnxb_name(b, "%s.bn2", p), y, planes, cout, 3, 1,
                              dilation, 0, last_gamma);
    }
    const char *sc = x;
    if (stride != 1 || cin != cout)
        sc = gen_conv_bn(b, r, onnxb_name(b, "%s.downsample.0", p), onnxb_name(b, "%s.downsample.1", p), x, cin,
                         cout, 1, stride, 1, 0);
    y = gen_op2(b, "Add", y, sc, onnxb_name(b, "%s.add", p));
    *c_out = cout;
    return gen_op1(b, "Relu", y, onnxb_name(b, "%s.relu", p));
}

static const char *stem(onnxb *b, gen_rng *r, const char *x, int64_t width) {
    const char *y = gen_conv_bn(b, r, "conv1", "bn1", x, 3, width, 7, 2, 1, 0);
    /* conv1 is 7x7 with pad 3, which gen_conv's "same" padding gives; ReLU then max pool. */
    y = gen_op1(b, "Relu", y, "relu");
    const char *in[1] = {y}, *out[1] = {"maxpool"};
    Onnx__NodeProto *n = onnxb_node(b, "MaxPool", "maxpool", in, 1, out, 1);
    int64_t ks[2] = {3, 3}, st[2] = {2, 2}, pads[4] = {1, 1, 1, 1};
    onnxb_attr_ints(b, n, "kernel_shape", ks, 2);
    onnxb_attr_ints(b, n, "strides", st, 2);
    onnxb_attr_ints(b, n, "pads", pads, 4);
    return "maxpool";
}

const char *gen_resnet_trunk(onnxb *b, gen_rng *r, int64_t depth, int64_t width, bool dilated, float last_gamma,
                             const char *x, int64_t *c_out) {
    const resnet_spec *s = spec_find(depth);
    SC_ASSERT(s);
    const char *y = stem(b, r, x, width);
    int64_t c = width;
    int dilation = 1;
    for (int l = 0; l < 4; l++) {
        int stride = l == 0 ? 1 : 2;
        int prev_dilation = dilation;
        if (dilated && l >= 2) { /* torchvision _make_layer(dilate=True) */
            dilation *= stride;
            stride = 1;
        }
        for (int i = 0; i < s->blocks[l]; i++)
            y = block(b, r, onnxb_name(b, "layer%d.%d", l + 1, i), y, c, width << l, s->bottleneck, i == 0 ? stride : 1,
                      i == 0 ? prev_dilation : dilation, last_gamma, &c);
    }
    *c_out = c;
    return y;
}

static const char *generic_trunk(onnxb *b, gen_rng *r, int64_t depth, int64_t width, float last_gamma,
                                 const char *x) {
    const char *y = stem(b, r, x, width);
    int64_t c = width;
    for (int64_t i = 0; i < depth && !onnxb_error(b); i++)
        y = block(b, r, onnxb_name(b, "blocks.%lld", (long long)i), y, c, width, 0, 1, 1, last_gamma, &c);
    return y;
}

sc_status gen_resnet(onnxb *b, const gen_resnet_opts *o) {
    if (o->depth < 1) return sc_errorf("resnet: --depth must be at least 1 (got %lld)", (long long)o->depth);
    if (o->width < 1 || o->classes < 1 || o->image < 1)
        return sc_errorf("resnet: --width, --classes and --image must be positive");
    gen_rng r;
    gen_rng_seed(&r, o->seed);
    gen_image_input(b, o->image);
    int64_t c = o->width;
    bool standard = gen_resnet_is_standard(o->depth);
    bool zero_res = o->zero_init_residual >= 0 ? o->zero_init_residual > 0 : !standard;
    float last_gamma = zero_res ? 0.0f : 1.0f;
    const char *y = standard ? gen_resnet_trunk(b, &r, o->depth, o->width, false, last_gamma, "input", &c)
                             : generic_trunk(b, &r, o->depth, o->width, last_gamma, "input");
    gen_classifier_head(b, &r, "fc", y, c, o->classes);
    return SC_OK;
}
