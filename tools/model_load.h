/* Loading a model for `info` and `run`: sc_model_load, then graph_prepare with the dims given by
 * --batch, --seq and --dim NAME=N (parsed here, shared by both commands). */
#ifndef SC_MODEL_LOAD_H
#define SC_MODEL_LOAD_H

#include "tools/stages.h"
#include "tools/args.h"

#define MODEL_LOAD_OPTS                                                                               \
    {.name = "batch", .kind = ARG_INT, .metavar = "N", .help = "binds every input's symbolic dim 0 (default 1)"}, \
        {.name = "seq", .kind = ARG_INT, .metavar = "N", .help = "binds dim 1 of token-id inputs"},          \
        {.name = "dim", .kind = ARG_LIST, .metavar = "NAME=N", .help = "binds a symbolic dim by name (repeatable)"}, \
        PRECISION_OPT
#define PRECISION_OPT                                                                                  \
    {.name = "precision", .kind = ARG_STR, .metavar = "fp32|bf16|fp16",                                 \
     .help = "fp32 (default), or bf16 / fp16 mixed precision: convolutions and matrix products in 16 bits " \
             "with f32 accumulation, norms, reductions and the loss in f32, f32 master weights; fp16 "    \
             "training scales the loss dynamically"}

/* --precision NAME -> the low type (SC_F32 for fp32, SC_BF16, SC_F16); SC_DTYPE_UNDEFINED with *why
 * set when NAME is not one. */
sc_dtype precision_parse(const char *name, const char **why);
/* The option's word for a low type: "fp32", "bf16" or "fp16". */
const char *precision_word(sc_dtype low);

/* Loads and prepares spec's first positional argument with the options above. Returns a status with
 * a usage-style message for a malformed --dim (sets *usage_error). */
sc_status model_load_prepared(arg_spec *spec, sc_model **out, int *usage_error);
/* Added (perf helper): as above; inference also runs the inference-only fusions of graph_prepare
 * (graph/pass_fuse.c), for a model that will only run forward (`run`). */
sc_status model_load_prepared_for(arg_spec *spec, bool inference, sc_model **out, int *usage_error);

#endif
