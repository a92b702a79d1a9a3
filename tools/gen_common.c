/* Generator helpers: PRNG, parameter initializers, conv/bn layers (see gen_common.h). */
#include "tools/gen_common.h"

#include <math.h>
#include <stdlib.h>

void gen_rng_seed(gen_rng *r, uint64_t seed) {
    r->state = seed;
    r->has_spare = 0;
    r->spare = 0;
}

/* splitmix64: state += golden gamma, then two xor-shift-multiply rounds. */
uint64_t gen_rng_next(gen_rng *r) {
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double gen_rng_uniform(gen_rng *r) { return (double)(gen_rng_next(r) >> 11) * 0x1.0p-53; }

/* Box-Muller: r = sqrt(-2 ln u1), theta = 2 pi u2; u1 is taken in (0, 1] so the log is finite. */
double gen_rng_normal(gen_rng *r) {
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    double u1 = 1.0 - gen_rng_uniform(r);
    double u2 = gen_rng_uniform(r);
    double rad = sqrt(-2.0 * log(u1));
    r->spare = rad * sin(2.0 * M_PI * u2);
    r->has_spare = 1;
    return rad * cos(2.0 * M_PI * u2);
}

static float *param_buffer(onnxb *b, const char *name, int rank, const int64_t *dims, int64_t *n_out) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    *n_out = n;
    if (onnxb_error(b)) return NULL;
    float *p = malloc((size_t)(n ? n : 1) * sizeof *p);
    if (!p) onnxb_fail(b, sc_errorf("out of memory for parameter %s (%lld floats)", name, (long long)n));
    return p;
}

const char *gen_param_normal(onnxb *b, gen_rng *r, const char *name, int rank, const int64_t *dims, double std) {
    int64_t n;
    float *p = param_buffer(b, name, rank, dims, &n);
    if (!p) return name;
    for (int64_t i = 0; i < n; i++) p[i] = (float)(std * gen_rng_normal(r));
    return onnxb_param(b, name, rank, dims, p);
}

const char *gen_param_uniform(onnxb *b, gen_rng *r, const char *name, int rank, const int64_t *dims,
                              double bound) {
    int64_t n;
    float *p = param_buffer(b, name, rank, dims, &n);
    if (!p) return name;
    for (int64_t i = 0; i < n; i++) p[i] = (float)(bound * (2.0 * gen_rng_uniform(r) - 1.0));
    return onnxb_param(b, name, rank, dims, p);
}

const char *gen_param_fill(onnxb *b, const char *name, int rank, const int64_t *dims, float value) {
    int64_t n;
    float *p = param_buffer(b, name, rank, dims, &n);
    if (!p) return name;
    for (int64_t i = 0; i < n; i++) p[i] = value;
    return onnxb_param(b, name, rank, dims, p);
}

const char *gen_op1(onnxb *b, const char *op, const char *x, const char *out) {
    const char *in[1] = {x}, *o[1] = {out};
    onnxb_node(b, op, out, in, 1, o, 1);
    return out;
}

const char *gen_op2(onnxb *b, const char *op, const char *x, const char *y, const char *out) {
    const char *in[2] = {x, y}, *o[1] = {out};
    onnxb_node(b, op, out, in, 2, o, 1);
    return out;
}

const char *gen_conv(onnxb *b, gen_rng *r, const char *prefix, const char *x, int64_t cin, int64_t cout, int k,
                     int stride, int dilation, int bias) {
    int64_t wd[4] = {cout, cin, k, k};
    const char *w = gen_param_normal(b, r, onnxb_name(b, "%s.weight", prefix), 4, wd, sqrt(2.0 / (double)(cout * k * k)));
    const char *in[3] = {x, w, NULL};
    if (bias) {
        int64_t bd[1] = {cout};
        in[2] = gen_param_uniform(b, r, onnxb_name(b, "%s.bias", prefix), 1, bd, 1.0 / sqrt((double)(cin * k * k)));
    }
    const char *out[1] = {prefix};
    Onnx__NodeProto *n = onnxb_node(b, "Conv", prefix, in, bias ? 3 : 2, out, 1);
    int64_t p = (int64_t)dilation * (k - 1) / 2;
    int64_t ks[2] = {k, k}, st[2] = {stride, stride}, dl[2] = {dilation, dilation}, pads[4] = {p, p, p, p};
    onnxb_attr_ints(b, n, "kernel_shape", ks, 2);
    onnxb_attr_ints(b, n, "strides", st, 2);
    onnxb_attr_ints(b, n, "dilations", dl, 2);
    onnxb_attr_ints(b, n, "pads", pads, 4);
    onnxb_attr_int(b, n, "group", 1);
    return prefix;
}

const char *gen_bn(onnxb *b, const char *prefix, const char *x, int64_t c, float gamma) {
    int64_t d[1] = {c};
    const char *in[5] = {
        x,
        gen_param_fill(b, onnxb_name(b, "%s.weight", prefix), 1, d, gamma),
        gen_param_fill(b, onnxb_name(b, "%s.bias", prefix), 1, d, 0.0f),
        gen_param_fill(b, onnxb_name(b, "%s.running_mean", prefix), 1, d, 0.0f),
        gen_param_fill(b, onnxb_name(b, "%s.running_var", prefix), 1, d, 1.0f),
    };
    const char *out[1] = {prefix};
    Onnx__NodeProto *n = onnxb_node(b, "BatchNormalization", prefix, in, 5, out, 1);
    onnxb_attr_float(b, n, "epsilon", 1e-5f);
    onnxb_attr_float(b, n, "momentum", 0.9f);
    return prefix;
}

const char *gen_conv_bn(onnxb *b, gen_rng *r, const char *conv_name, const char *bn_name, const char *x,
                        int64_t cin, int64_t cout, int k, int stride, int dilation, int relu) {
    return gen_conv_bn_gamma(b, r, conv_name, bn_name, x, cin, cout, k, stride, dilation, relu, 1.0f);
}

const char *gen_conv_bn_gamma(onnxb *b, gen_rng *r, const char *conv_name, const char *bn_name, const char *x,
                              int64_t cin, int64_t cout, int k, int stride, int dilation, int relu, float gamma) {
    const char *y = gen_conv(b, r, conv_name, x, cin, cout, k, stride, dilation, 0);
    y = gen_bn(b, bn_name, y, cout, gamma);
    if (relu) y = gen_op1(b, "Relu", y, onnxb_name(b, "%s.relu", bn_name));
    return y;
}

void gen_classifier_head(onnxb *b, gen_rng *r, const char *fc, const char *x, int64_t c, int64_t classes) {
    const char *y = gen_op1(b, "GlobalAveragePool", x, "avgpool");
    y = gen_op1(b, "Flatten", y, "flatten");
    int64_t wd[2] = {classes, c}, bd[1] = {classes};
    double bound = 1.0 / sqrt((double)c);
    const char *in[3] = {y, gen_param_uniform(b, r, onnxb_name(b, "%s.weight", fc), 2, wd, bound),
                         gen_param_uniform(b, r, onnxb_name(b, "%s.bias", fc), 1, bd, bound)};
    const char *out[1] = {"logits"};
    Onnx__NodeProto *n = onnxb_node(b, "Gemm", fc, in, 3, out, 1);
    onnxb_attr_int(b, n, "transB", 1);
    int64_t out_dims[2] = {-1, classes};
    const char *out_names[2] = {"batch"};
    onnxb_output(b, "logits", SC_F32, 2, out_dims, out_names);
}

void gen_image_input(onnxb *b, int64_t image) {
    int64_t dims[4] = {-1, 3, image, image};
    const char *names[4] = {"batch"};
    onnxb_input(b, "input", SC_F32, 4, dims, names);
}
