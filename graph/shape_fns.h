/* Private to graph/shape*.c: the per-op shape functions (one file per op family) and the helpers
 * they share. Public callers use sc_shape_fns from graph/shape.h. */
#ifndef SC_SHAPE_FNS_H
#define SC_SHAPE_FNS_H

#include "graph/shape.h"

/* The shape function of every op, named in its ops.def row (shape_<shape>, defined in
 * shape_<family>*.c). shape_none is never defined: shape.c's table reads it as NULL. */
#define SC_OP(id, name, min_in, max_in, min_out, max_out, family, attrs, since, shape, ...) \
    sc_status shape_##shape(sc_graph *g, sc_node *n);
#include "graph/ops.def"
#include "graph/ops_train.def"
#undef SC_OP

/* Helpers (shape.c). */

/* The desc of input i (present). */
static inline const sc_desc *shape_in(const sc_graph *g, const sc_node *n, int i) { return &g->values[n->in[i]].desc; }
/* Fails unless inputs a and b have the same dtype and shape. */
sc_status shape_same_desc(const sc_graph *g, const sc_node *n, int a, int b);
/* Fails unless input i is a float tensor. */
sc_status shape_float_input(const sc_graph *g, const sc_node *n, int i);
/* shape_errorf plus ", input shapes A and B and C" listing every present input's desc. */
sc_status shape_fail(const sc_graph *g, const sc_node *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Normalises an axis in [-rank, rank) to [0, rank); fails naming the node. */
sc_status shape_axis(const sc_graph *g, const sc_node *n, int64_t axis, int rank, int *out);
/* Sets output k's desc (no-op when the output is omitted). */
void shape_set_out(sc_graph *g, const sc_node *n, int k, const sc_desc *d);
/* The usual last step of a one-output shape function: sets output 0's desc, returns SC_OK. */
sc_status shape_out(sc_graph *g, const sc_node *n, const sc_desc *d);
/* Reads a constant scalar or one-element input of any integer or float dtype as double. */
sc_status shape_const_scalar(const sc_graph *g, const sc_node *n, int input, double *dst);
/* Reads a constant 1-D float input (f32, f64) into dst, like shape_const_ints. */
sc_status shape_const_floats(const sc_graph *g, const sc_node *n, int input, double *dst, int max, int *count);
/* The length of one axis of dim elements sliced by ONNX Slice's start, end and step (shape_movement.c):
 * Slice and SliceGrad agree by calling this one rule. */
int64_t shape_slice_len(int64_t dim, int64_t start, int64_t end, int64_t step);
/* True when the value carries data fixed at load (CONST, or an initializer read for its shape). */
bool shape_is_const(const sc_graph *g, int value_id);

#endif
