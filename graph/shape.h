/* Shape inference: one function per op (graph/shape_<family>.c), indexed by op in sc_shape_fns.
 *
 * A shape function reads its inputs' descs (and, for shape-carrying inputs such as Reshape's shape
 * or Slice's starts, their constant data) and writes the desc of every present output. It fails with
 * a status naming the node and the offending shapes. It never allocates data.
 */
#ifndef SC_SHAPE_H
#define SC_SHAPE_H

#include "graph/graph.h"

typedef sc_status (*sc_shape_fn)(sc_graph *g, sc_node *n);

extern const sc_shape_fn sc_shape_fns[SC_OP_COUNT];
/* Why an op has no shape function (NULL if it should have one). */
const char *shape_fn_missing_reason(sc_op op);

/* Helpers for shape functions. */
sc_status shape_errorf(const sc_node *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* numpy broadcasting of two descs' dims; fails naming the node and both shapes. */
sc_status shape_broadcast(const sc_node *n, const sc_desc *a, const sc_desc *b, sc_desc *out);
/* Reads a constant 1-D integer input (i32 or i64) into dst; fails if the input is not constant. */
sc_status shape_const_ints(const sc_graph *g, const sc_node *n, int input, int64_t *dst, int max, int *count);

/* Added for fuzzing: the largest dim, element count, window attribute or shape-input value
 * shape inference accepts, 2^40 as the importer's tensor limit. graph_infer_shapes refuses inputs and
 * outputs past it, and shape functions check values read from attributes or constant inputs against
 * it, so sums and products of a few such operands cannot overflow int64. */
#define SC_SHAPE_MAX_DIM ((int64_t)1 << 40)

#endif
