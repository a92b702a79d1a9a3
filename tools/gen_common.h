/* Shared pieces of the model generators (gen_resnet.c, gen_dranet.c, gen_gpt.c).
 *
 * PRNG: splitmix64 (Steele, Lea, Flood 2014; the seeding generator of xoshiro) gives 64-bit words;
 * uniform(0,1) takes the top 53 bits; normal(0,1) is Box-Muller on two uniforms, both outputs used.
 * A model is a pure function of its options and --seed: parameters are drawn in creation order.
 *
 * Layer helpers add nodes and initializers to a builder and return the output value's name. Names
 * follow PyTorch's module paths ("layer1.0.conv1.weight"), so a parameter is easy to find.
 */
#ifndef SC_GEN_COMMON_H
#define SC_GEN_COMMON_H

#include <stdint.h>

#include "tools/onnx_builder.h"

typedef struct {
    uint64_t state;
    int has_spare;
    double spare;
} gen_rng;

void gen_rng_seed(gen_rng *r, uint64_t seed);
uint64_t gen_rng_next(gen_rng *r);
double gen_rng_uniform(gen_rng *r); /* [0, 1) */
double gen_rng_normal(gen_rng *r);  /* N(0, 1) */

/* f32 initializers: normal(0, std), uniform(-bound, bound), or every element = value. */
const char *gen_param_normal(onnxb *b, gen_rng *r, const char *name, int rank, const int64_t *dims, double std);
const char *gen_param_uniform(onnxb *b, gen_rng *r, const char *name, int rank, const int64_t *dims, double bound);
const char *gen_param_fill(onnxb *b, const char *name, int rank, const int64_t *dims, float value);

/* One-output nodes. */
const char *gen_op1(onnxb *b, const char *op, const char *x, const char *out);
const char *gen_op2(onnxb *b, const char *op, const char *x, const char *y, const char *out);

/* Conv (no bias unless `bias`), weight kaiming_normal(mode='fan_out', relu) as torchvision's ResNet:
 * std = sqrt(2 / (cout * k * k)); a bias is uniform(+-1/sqrt(cin*k*k)) as torch's Conv2d default.
 * pad = dilation * (k - 1) / 2 keeps "same" size at stride 1. Names: <prefix>.weight, output <prefix>. */
const char *gen_conv(onnxb *b, gen_rng *r, const char *prefix, const char *x, int64_t cin, int64_t cout, int k,
                     int stride, int dilation, int bias);
/* BatchNormalization in inference mode: gamma (1, or 0 for a zero-initialised residual branch),
 * beta 0, running mean 0, var 1, eps 1e-5, momentum 0.9 (ONNX's, = PyTorch's 0.1). */
const char *gen_bn(onnxb *b, const char *prefix, const char *x, int64_t c, float gamma);
/* conv -> bn -> (relu), conv and bn named by the caller. */
const char *gen_conv_bn(onnxb *b, gen_rng *r, const char *conv_name, const char *bn_name, const char *x,
                        int64_t cin, int64_t cout, int k, int stride, int dilation, int relu);
/* The same with the BN's gamma given. */
const char *gen_conv_bn_gamma(onnxb *b, gen_rng *r, const char *conv_name, const char *bn_name, const char *x,
                              int64_t cin, int64_t cout, int k, int stride, int dilation, int relu, float gamma);
/* The graph input 'input' f32 [batch, 3, image, image] of the vision models. */
void gen_image_input(onnxb *b, int64_t image);
/* The classifier head of torchvision's CNNs: GlobalAveragePool -> Flatten -> Gemm (transB) named
 * <fc>, weight and bias uniform(+-1/sqrt(c)) as torch's Linear, into the graph output 'logits'
 * [batch, classes]. */
void gen_classifier_head(onnxb *b, gen_rng *r, const char *fc, const char *x, int64_t c, int64_t classes);

#endif
