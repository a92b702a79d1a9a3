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

/* One node's kernel call: the tensors a kernel reads and fills. The CPU's sc_kernel_call is these
 * fields; CUDA's cu_call (cuda_common.h) adds its stream context in front of them. */
#define SC_KERNEL_CALL_FIELDS                                                                       \
    const sc_node *node;                                                                            \
    const sc_tensor *in; /* n_in entries, data NULL when omitted */                                 \
    int n_in;                                                                                       \
    sc_tensor *out; /* n_out entries, data NULL when omitted */                                     \
    int n_out;

typedef struct {
    SC_KERNEL_CALL_FIELDS
} sc_kernel_call;

/* Why no backend has a kernel for op (it is rewritten before any plan runs), or NULL. */
const char *sc_kernel_missing_reason(sc_op op);

/* Softmax's groups (forward and gradient, both backends): x viewed as outer x n x inner and
 * normalised over the n elements of each group, at stride inner. Opset 13 groups along axis; the
 * earlier opsets (legacy_2d) flatten the dims [axis:] into n, and there axis may equal the rank (groups
 * of one). A scalar counts as rank 1. False when axis is out of range. */
static inline bool sc_softmax_groups(const sc_desc *x, const sc_axis_attrs *aa, int64_t *outer, int64_t *n,
                                     int64_t *inner) {
    int rank = x->rank > 0 ? x->rank : 1;
    int64_t one = 1;
    const int64_t *dims = x->rank > 0 ? x->dims : &one;
    int64_t axis = aa->axis < 0 ? aa->axis + rank : aa->axis;
    if (axis < 0 || axis >= rank + (aa->legacy_2d ? 1 : 0)) return false;
    *outer = *n = *inner = 1;
    for (int i = 0; i < axis; i++) *outer *= dims[i];
    if (aa->legacy_2d)
        for (int i = (int)axis; i < rank; i++) *n *= dims[i];
    else {
        *n = dims[axis];
        for (int i = (int)axis + 1; i < rank; i++) *inner *= dims[i];
    }
    return true;
}

/* An optimizer update's tensors (both backends): W (input 0) is f32 or f64, and each present input
 * idx[0..n) has W's dtype and element count, except that G (input 1) may be bf16 or f16 beside an
 * f32 W where half_g. False with the reason in why when one does not. */
bool sc_optim_tensors_match(const sc_tensor *in, const int *idx, int n, bool half_g, char *why, size_t why_size);

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
