/* Index geometry shared by Slice / Gather (cpu_movement_index.c) and their adjoints SliceGrad / GatherGrad
 * (cpu_movement_grad.c), so that a gradient writes exactly the positions its forward read.
 *
 * Slice (ONNX opset 13): starts/ends/axes/steps are 1-D i32/i64 inputs. Per the spec, negative
 * starts/ends add the axis size, then for step > 0 start and end clamp to [0, dim], for step < 0
 * start clamps to [0, dim-1] and end to [-1, dim-1]; the count is ceil((end - start) / step), at
 * least 0. Axes default to 0, 1, ..; steps to 1; an axis may appear once. Slice element idx sits at
 * X offset base + sum over axes idx[a] * x_stride[a], with x_stride = step * X's stride.
 * Gather: axis normalised to [0, rank), out = data[:axis] ++ indices.shape ++ data[axis+1:];
 * negative indices count from the end; an index outside [-n, n-1] is an error naming the node,
 * the index and its position.
 */
#ifndef SC_CPU_INDEX_GEOM_H
#define SC_CPU_INDEX_GEOM_H

#include "backends/cpu/cpu_kernels.h"

typedef struct {
    int64_t base;                  /* X offset (elements) of the slice's first element */
    int64_t x_stride[SC_MAX_RANK]; /* X elements between neighbours of the slice along each axis */
    int64_t y_stride[SC_MAX_RANK]; /* row-major strides of the slice itself (Y, dY) */
    bool empty;                    /* some axis has count 0 */
} slice_geom;

/* Reads starts, ends, axes, steps from inputs first_input .. first_input + 3 and checks that the
 * slice of x has y's shape (y named y_name in errors). */
sc_status slice_geom_read(const sc_kernel_call *c, int first_input, const sc_desc *x, const sc_desc *y,
                          const char *y_name, slice_geom *g);

/* dst[sum idx * dst_stride] = src[sum idx * src_stride] for every index idx of the box dims
 * (elements of es bytes); rows are memcpy'd when both innermost strides are 1. The destination
 * positions must be distinct (rows run in parallel). */
void slice_geom_copy(char *dst, const int64_t *dst_stride, const char *src, const int64_t *src_stride, int rank,
                     const int64_t *dims, size_t es);

typedef struct {
    int64_t axis, n;      /* normalised axis, data's length along it */
    int64_t outer, inner; /* elements before and after the axis */
    int64_t nidx;         /* number of indices */
    int64_t *idx;         /* indices in [0, n) (malloc'd; gather_geom_free) */
} gather_geom;

/* Normalises the node's axis for data, checks that `gathered` (the output, or dY; named
 * gathered_name in errors) has outer * nidx * inner elements, then reads and checks `indices`
 * (i32/i64). */
sc_status gather_geom_read(const sc_kernel_call *c, const sc_desc *data, const sc_tensor *indices,
                           const sc_desc *gathered, const char *gathered_name, gather_geom *g);

void gather_geom_free(gather_geom *g);

#endif
