/* Einsum equations (ONNX Einsum, numpy's einsum convention; an ellipsis becomes fresh letters at
 * parse time, so no caller sees one): parsing and the letter sizes, shared by the shape function
 * (graph/shape_nn_einsum.c) and the lowering of Einsum to Transpose, Reshape, ReduceSum and MatMul
 * (graph/pass_einsum.c). */
#ifndef SC_EINSUM_H
#define SC_EINSUM_H

#include "graph/graph.h"

#define SC_EINSUM_MAX_IN 8

typedef struct {
    int n_in;
    char in[SC_EINSUM_MAX_IN][SC_MAX_RANK + 1]; /* each operand's letters, one per dim */
    char out[SC_MAX_RANK + 1];                   /* the output's letters (implicit form: the letters
                                                    used once, in alphabetical order) */
    int64_t size[128];                           /* per letter: its size (1 broadcasts), -1 unused */
} sc_einsum_spec;

/* Parses equation (spaces already removed) for n_in operands of the given descs. On failure returns
 * false with why (a sentence naming the operand or letter). */
bool sc_einsum_parse(const char *equation, int n_in, const sc_desc *const *ins, sc_einsum_spec *sp, char *why,
                     size_t why_size);

#endif
