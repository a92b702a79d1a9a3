/* The model generators behind `scorch-run gen` (one file each: gen_resnet.c, gen_dranet.c,
 * gen_gpt.c). Each adds its graph to a fresh builder; the caller saves it. */
#ifndef SC_GEN_MODELS_H
#define SC_GEN_MODELS_H

#include <stdbool.h>
#include <stdint.h>

#include "tools/gen_common.h"

typedef struct {
    int64_t depth;   /* 18/34/50/101/152: torchvision; anything else >= 1: generic (gen_resnet.c) */
    int64_t width;   /* base channels (64) */
    int64_t classes; /* 1000 */
    int64_t image;   /* input side S (224) */
    int zero_init_residual; /* -1: default (on for generic depths only), 0 off, 1 on */
    uint64_t seed;
} gen_resnet_opts;

typedef struct {
    int64_t depth;   /* 50 or 101 */
    int64_t width;   /* backbone base channels (64) */
    int64_t classes; /* 19 (Cityscapes) */
    int64_t image;   /* 512, a multiple of 8 */
    double gamma;    /* initial attention gammas (0 as in DANet) */
    double residual_gamma; /* initial gamma of each backbone block's last BN (1; 0 = zero-init residual) */
    uint64_t seed;
} gen_dranet_opts;

typedef struct {
    int64_t layers, heads, dim, vocab, seq;
    uint64_t seed;
} gen_gpt_opts;

sc_status gen_resnet(onnxb *b, const gen_resnet_opts *o);
sc_status gen_dranet(onnxb *b, const gen_dranet_opts *o);
sc_status gen_gpt(onnxb *b, const gen_gpt_opts *o);
/* DenseNet-BC style (gen_densenet.c): dense blocks of BN-ReLU-Conv layers whose outputs are concatenated. */
typedef struct { int64_t blocks, layers, growth, classes, image; uint64_t seed; } gen_densenet_opts;
sc_status gen_densenet(onnxb *b, const gen_densenet_opts *o);

/* torchvision ResNet stem + layer1..4 (depth in 18/34/50/101/152). With `dilated`, layer3 and layer4
 * keep stride 1 and dilate by 2 and 4 (output stride 8, torchvision replace_stride_with_dilation =
 * [False, True, True]). Returns the feature map's name and its channels in *c_out. */
const char *gen_resnet_trunk(onnxb *b, gen_rng *r, int64_t depth, int64_t width, bool dilated, float last_gamma,
                             const char *x, int64_t *c_out);
bool gen_resnet_is_standard(int64_t depth);

#endif
