/* `scorch-run gen MODEL [options] -o FILE.onnx`: writes a freshly initialised model (gen_*.c). */
#include <stdio.h>
#include <string.h>

#include "tools/args.h"
#include "tools/cmd.h"
#include "tools/gen_models.h"

#define OPT(n, sh, k, mv, h) {.name = n, .short_name = sh, .kind = k, .metavar = mv, .help = h}
#define COMMON_OPTS                                                                                    \
    OPT("output", 'o', ARG_STR, "FILE.onnx", "where to write the model (required)"),                   \
        OPT("seed", 0, ARG_INT, "N", "PRNG seed for the initial weights (default 0)"),                  \
        OPT("external-threshold", 0, ARG_INT, "BYTES",                                                  \
            "initializers this big go to FILE.onnx.data once the model outgrows 1.5 GiB (default 1024)"), \
        OPT("external", 0, ARG_FLAG, NULL, "always write initializers over the threshold as external data"),  \
        OPT("inline-limit", 0, ARG_INT, "BYTES", "inline weight bytes before switching to external data (1.5 GiB)")

enum { OPT_OUTPUT, OPT_SEED, OPT_EXT_THRESHOLD, OPT_EXTERNAL, OPT_INLINE_LIMIT, N_COMMON };

static int gen_finish(arg_spec *spec, const char *what, sc_status (*build)(onnxb *, const void *), const void *opts) {
    const char *out = spec->opts[OPT_OUTPUT].s;
    if (!out) {
        args_error("gen %s: -o FILE.onnx is required", what);
        return 2;
    }
    if (spec->opts[OPT_EXT_THRESHOLD].i < 0 || spec->opts[OPT_INLINE_LIMIT].i < 0) {
        args_error("gen %s: --external-threshold and --inline-limit must not be negative", what);
        return 2;
    }
    onnxb_options bo = {.external_threshold = spec->opts[OPT_EXT_THRESHOLD].i,
                        .inline_limit = spec->opts[OPT_INLINE_LIMIT].i,
                        .force_external = spec->opts[OPT_EXTERNAL].set};
    onnxb *b = onnxb_new(out, what, &bo);
    if (!b) return cmd_report(sc_errorf("out of memory"));
    sc_status st = build(b, opts);
    if (!st) st = onnxb_save(b);
    if (!st)
        printf("wrote %s: %s, %lld parameters, %lld nodes%s%s\n", out, what, (long long)onnxb_param_count(b),
               (long long)onnxb_node_count(b), onnxb_has_external(b) ? ", external data in " : "",
               onnxb_has_external(b) ? "<output>.data" : "");
    onnxb_free(b);
    return cmd_report(st);
}

static sc_status build_resnet(onnxb *b, const void *o) { return gen_resnet(b, o); }
static sc_status build_dranet(onnxb *b, const void *o) { return gen_dranet(b, o); }
static sc_status build_gpt(onnxb *b, const void *o) { return gen_gpt(b, o); }
static sc_status build_densenet(onnxb *b, const void *o) { return gen_densenet(b, o); }

/* One `gen MODEL`: its options after the common ones, and configure(), which turns the parsed
 * options (opts[0] is the model's first) into the generator's options and the model's label; it
 * returns 0, or 2 after printing what is wrong. */
#define GEN_MAX_OPTS 8
typedef union {
    gen_resnet_opts resnet;
    gen_dranet_opts dranet;
    gen_gpt_opts gpt;
    gen_densenet_opts densenet;
} gen_any_opts;

typedef struct {
    const char *name, *usage, *summary;
    arg_opt opts[GEN_MAX_OPTS];
    int n_opts;
    int (*configure)(const arg_opt *opts, uint64_t seed, gen_any_opts *o, char *what, size_t what_size);
    sc_status (*build)(onnxb *b, const void *opts);
} gen_model;

/* Options opts[0..n) given on the command line override the defaults already in *fields[i]. */
static void apply_ints(const arg_opt *opts, int64_t *const *fields, int n) {
    for (int i = 0; i < n; i++)
        if (opts[i].set) *fields[i] = opts[i].i;
}

static int configure_resnet(const arg_opt *opts, uint64_t seed, gen_any_opts *any, char *what, size_t what_size) {
    if (!opts[0].set) {
        args_error("gen resnet: --depth is required");
        return 2;
    }
    gen_resnet_opts *o = &any->resnet;
    *o = (gen_resnet_opts){.width = 64, .classes = 1000, .image = 224, .seed = seed};
    apply_ints(opts, (int64_t *const[]){&o->depth, &o->width, &o->classes, &o->image}, 4);
    o->zero_init_residual = opts[4].set ? (opts[4].i != 0) : -1;
    snprintf(what, what_size, "resnet%lld", (long long)o->depth);
    return 0;
}

static int configure_dranet(const arg_opt *opts, uint64_t seed, gen_any_opts *any, char *what, size_t what_size) {
    gen_dranet_opts *o = &any->dranet;
    *o = (gen_dranet_opts){.depth = 50, .width = 64, .classes = 19, .image = 512, .residual_gamma = 1.0, .seed = seed};
    apply_ints(opts, (int64_t *const[]){&o->depth, &o->width, &o->classes, &o->image}, 4);
    if (opts[4].set) o->gamma = opts[4].f;
    if (opts[5].set) o->residual_gamma = opts[5].f;
    snprintf(what, what_size, "dranet%lld", (long long)o->depth);
    return 0;
}

typedef struct {
    const char *name;
    int64_t layers, heads, dim;
} gpt_preset;

static const gpt_preset gpt_presets[] = {
    {"small", 12, 12, 768}, {"medium", 24, 16, 1024}, {"large", 36, 20, 1280}, {"xl", 48, 25, 1600}};

static int configure_gpt(const arg_opt *opts, uint64_t seed, gen_any_opts *any, char *what, size_t what_size) {
    gen_gpt_opts *o = &any->gpt;
    *o = (gen_gpt_opts){.vocab = 50257, .seq = 1024, .seed = seed};
    const char *preset = opts[0].s;
    if (preset) {
        const gpt_preset *p = NULL;
        for (size_t i = 0; i < sizeof gpt_presets / sizeof gpt_presets[0]; i++)
            if (!strcmp(gpt_presets[i].name, preset)) p = &gpt_presets[i];
        if (!p) {
            args_error("gen gpt: unknown preset '%s' (small, medium, large, xl)", preset);
            return 2;
        }
        o->layers = p->layers, o->heads = p->heads, o->dim = p->dim;
    }
    apply_ints(opts + 1, (int64_t *const[]){&o->layers, &o->heads, &o->dim, &o->vocab, &o->seq}, 5);
    if (!o->layers || !o->heads || !o->dim) {
        args_error("gen gpt: give --preset or all of --layers, --heads and --dim");
        return 2;
    }
    snprintf(what, what_size, "gpt2-L%lld-H%lld-D%lld", (long long)o->layers, (long long)o->heads, (long long)o->dim);
    return 0;
}

static int configure_densenet(const arg_opt *opts, uint64_t seed, gen_any_opts *any, char *what, size_t what_size) {
    gen_densenet_opts *o = &any->densenet;
    *o = (gen_densenet_opts){.blocks = 4, .layers = 6, .growth = 12, .classes = 10, .image = 32, .seed = seed};
    apply_ints(opts, (int64_t *const[]){&o->blocks, &o->layers, &o->growth, &o->classes, &o->image}, 5);
    snprintf(what, what_size, "densenet-B%lld-L%lld-K%lld", (long long)o->blocks, (long long)o->layers,
             (long long)o->growth);
    return 0;
}

/* Options the image models share, the same name and meaning in each; the help text ends with the
 * model's default. */
#define OPT_WIDTH(help) OPT("width", 0, ARG_INT, "W", help)
#define OPT_CLASSES(help) OPT("classes", 0, ARG_INT, "C", help)
#define OPT_IMAGE(help) OPT("image", 0, ARG_INT, "S", "input is [batch,3,S,S]" help)

static const gen_model gen_models[] = {
    {"resnet", "scorch-run gen resnet --depth D [options] -o FILE.onnx",
     "ResNet (He et al. 2015) as in torchvision 0.14, input 'input' f32 [batch,3,S,S],\n"
     "output 'logits' [batch,C]. Weights: kaiming normal (fan_out), BN 1/0.",
     {OPT("depth", 0, ARG_INT, "D",
          "18, 34, 50, 101, 152: torchvision's ResNet; any other D >= 1: stem + D basic blocks at constant width"),
      OPT_WIDTH("base channels (default 64)"), OPT_CLASSES("output classes (default 1000)"),
      OPT_IMAGE(" (default 224)"),
      OPT("zero-init-residual", 0, ARG_INT, "0|1",
          "start each block's last BN gamma at 0 (default: 1 for generic depths, 0 for standard ones)")},
     5, configure_resnet, build_resnet},
    {"dranet", "scorch-run gen dranet [options] -o FILE.onnx",
     "DRANet/DANet-style segmentation net: dilated ResNet (output stride 8), position and\n"
     "channel attention head, bilinear upsampling; output 'output' [batch,C,S,S].",
     {OPT("depth", 0, ARG_INT, "D", "backbone ResNet depth, 50 or 101 (default 50)"),
      OPT_WIDTH("backbone base channels (default 64)"), OPT_CLASSES("segmentation classes (default 19)"),
      OPT_IMAGE(", S a multiple of 8 (default 512)"),
      OPT("gamma", 0, ARG_FLOAT, "G", "initial attention gammas (default 0, as DANet)"),
      OPT("residual-gamma", 0, ARG_FLOAT, "G",
          "initial gamma of each backbone block's last BN (default 1; 0 = zero-init residual, Goyal et al. "
          "2017; below 1 the untrained net is better conditioned)")},
     6, configure_dranet, build_dranet},
    {"gpt", "scorch-run gen gpt (--preset NAME | --layers L --heads H --dim D) [options] -o FILE.onnx",
     "GPT-2 (Radford et al. 2019): input 'input_ids' i64 [batch,seq], output 'logits'\n"
     "[batch,seq,V]. Options given with --preset override the preset's values.",
     {OPT("preset", 0, ARG_STR, "NAME", "small 12/12/768, medium 24/16/1024, large 36/20/1280, xl 48/25/1600"),
      OPT("layers", 0, ARG_INT, "L", "transformer blocks"), OPT("heads", 0, ARG_INT, "H", "attention heads"),
      OPT("dim", 0, ARG_INT, "D", "model width"), OPT("vocab", 0, ARG_INT, "V", "vocabulary size (default 50257)"),
      OPT("seq", 0, ARG_INT, "T", "maximum sequence length (default 1024)")},
     6, configure_gpt, build_gpt},
    {"densenet", "scorch-run gen densenet [--blocks B] [--layers-per-block L] [--growth K] [options] -o FILE.onnx",
     "DenseNet-BC (Huang et al. 2017): dense blocks (BN-ReLU-Conv1x1-BN-ReLU-Conv3x3, Concat),\n"
     "transitions (BN-ReLU-Conv1x1-AveragePool); input 'input' [batch,3,S,S], output 'logits'.",
     {OPT("blocks", 0, ARG_INT, "B", "dense blocks (default 4)"),
      OPT("layers-per-block", 0, ARG_INT, "L", "dense layers per block (default 6)"),
      OPT("growth", 0, ARG_INT, "K", "growth rate: channels each layer adds (default 12)"),
      OPT_CLASSES("output classes (default 10)"), OPT_IMAGE(" (default 32)")},
     5, configure_densenet, build_densenet},
};

static int gen_model_cmd(const gen_model *m, int argc, char **argv) {
    arg_opt opts[N_COMMON + GEN_MAX_OPTS] = {COMMON_OPTS};
    memcpy(opts + N_COMMON, m->opts, sizeof *opts * (size_t)m->n_opts);
    arg_spec spec = {.usage = m->usage, .summary = m->summary, .opts = opts, .n_opts = N_COMMON + m->n_opts};
    int exit_code;
    if (args_done(&spec, argc, argv, &exit_code)) return exit_code;
    gen_any_opts o;
    memset(&o, 0, sizeof o);
    char what[96];
    int rc = m->configure(opts + N_COMMON, (uint64_t)opts[OPT_SEED].i, &o, what, sizeof what);
    if (!rc) rc = gen_finish(&spec, what, m->build, &o);
    args_free(&spec);
    return rc;
}

int cmd_gen(int argc, char **argv) {
    static const char *help = "usage: scorch-run gen MODEL [options] -o FILE.onnx\n\n"
                              "models:\n"
                              "  resnet  ResNet-18/34/50/101/152 (torchvision) or a generic depth\n"
                              "  dranet  dual-attention segmentation net on a dilated ResNet-50/101\n"
                              "  gpt     GPT-2 small/medium/large/xl or any size\n"
                              "  densenet DenseNet-BC with any blocks, layers and growth rate\n\n"
                              "'scorch-run gen MODEL --help' lists a model's options.\n";
    if (argc < 1) {
        fputs(help, stderr);
        return 2;
    }
    if (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
        fputs(help, stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof gen_models / sizeof gen_models[0]; i++)
        if (!strcmp(argv[0], gen_models[i].name)) return gen_model_cmd(&gen_models[i], argc - 1, argv + 1);
    args_error("gen: unknown model '%s' (resnet, dranet, gpt, densenet)", argv[0]);
    return 2;
}
