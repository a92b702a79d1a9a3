/* Math the CPU and CUDA backends share (the one definition both kernels use): index rules written
 * once as inline functions that compile for the host and, under nvcc, for the device too, and host
 * helpers of the kernels' scalar arguments (common.c). */
#ifndef SC_BACKENDS_COMMON_H
#define SC_BACKENDS_COMMON_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* the library's headers are C: included first from a .cu file, they must stay C here */
#endif

#include "core/tensor.h"
#include "graph/attrs.h"
#include "graph/graph.h"

#ifdef __CUDACC__
#define SC_HD __host__ __device__ __forceinline__
#else
#define SC_HD static inline
#endif

/* Pad: the source index on one axis for output index i (the axis has dim elements and begin of
 * padding before it), or -1 where the output takes the constant value. Edge repeats the border,
 * reflect mirrors without repeating it (period 2 (dim - 1)), wrap repeats the axis. */
SC_HD int64_t sc_pad_source(int64_t i, int64_t begin, int64_t dim, int mode) {
    int64_t j = i - begin;
    if (j >= 0 && j < dim) return j;
    switch (mode) {
    case SC_PAD_EDGE: return j < 0 ? 0 : dim - 1;
    case SC_PAD_REFLECT: {
        if (dim == 1) return 0;
        int64_t p = 2 * (dim - 1);
        j = ((j % p) + p) % p;
        return j >= dim ? p - j : j;
    }
    case SC_PAD_WRAP: return ((j % dim) + dim) % dim;
    default: return -1;
    }
}

/* Shape (opset 15 start/end): the dims [*start, *start + n) of x that the output lists; returns n.
 * Negative bounds count from the end, and both are clamped to [0, rank]. */
static inline int64_t sc_shape_range(const sc_desc *x, const sc_shape_attrs *a, int64_t *start) {
    int64_t r = x->rank, s = a->start, e = a->has_end ? a->end : r;
    if (s < 0) s += r;
    if (e < 0) e += r;
    s = s < 0 ? 0 : s > r ? r : s;
    e = e < 0 ? 0 : e > r ? r : e;
    *start = s;
    return e > s ? e - s : 0;
}

/* The shortest decimal that rounds to f, as a double: attributes and lr arrive as f32, while torch
 * holds the user's decimal (0.9, 1e-3) as a Python double. Recovering it makes the optimizers'
 * scalar math (bias corrections, 1 - lr * wd) agree with torch's to the last bit in the common
 * cases, on either backend. */
double sc_decimal_of(float f);

/* Node n's collective (AllReduce, Reduce to attrs.owner, Broadcast from it) over the process group
 * (backends/comm.h) on its bucket packed into host memory: elems elements of dtype t. Errors name the
 * node, its bucket and its bytes. The CPU kernels, the CUDA kernels without NCCL and the executor's
 * comm thread all run this. */
sc_status sc_collective_host(const sc_node *n, void *flat, int64_t elems, sc_dtype t);

#ifdef __cplusplus
}
#endif

#endif
