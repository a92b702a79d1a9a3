/* Private to graph/shape*.c: the per-op shape functions (one file per op family) and the helpers
 * they share. Public callers use sc_shape_fns from graph/shape.h. */
#ifndef SC_SHAPE_FNS_H
#define SC_SHAPE_FNS_H

#include "graph/shape.h"

/* shape_nn.c */
sc_status shape_conv(sc_graph *g, sc_node *n);
sc_status shape_pool(sc_graph *g, sc_node *n); /* MaxPool, AveragePool */
sc_status shape_global_pool(sc_graph *g, sc_node *n);
sc_status shape_batch_norm(sc_graph *g, sc_node *n);
sc_status shape_gemm(sc_graph *g, sc_node *n);
sc_status shape_matmul(sc_graph *g, sc_node *n);
sc_status shape_softmax(sc_graph *g, sc_node *n); /* Softmax, LogSoftmax */
sc_status shape_layer_norm(sc_graph *g, sc_node *n);
sc_status shape_dropout(sc_graph *g, sc_node *n);
sc_status shape_resize(sc_graph *g, sc_node *n);

/* shape_elementwise.c */
sc_status shape_unary(sc_graph *g, sc_node *n);
sc_status shape_not(sc_graph *g, sc_node *n);
sc_status shape_cast(sc_graph *g, sc_node *n);
sc_status shape_binary(sc_graph *g, sc_node *n);  /* Add, Sub, Mul, Div, Pow */
sc_status shape_compare(sc_graph *g, sc_node *n); /* Equal, Less, Greater */
sc_status shape_logical(sc_graph *g, sc_node *n); /* And, Or */
sc_status shape_variadic(sc_graph *g, sc_node *n); /* Max, Min */
sc_status shape_where(sc_graph *g, sc_node *n);

/* shape_reduce.c */
sc_status shape_reduce(sc_graph *g, sc_node *n);

/* shape_movement.c */
sc_status shape_reshape(sc_graph *g, sc_node *n);
sc_status shape_flatten(sc_graph *g, sc_node *n);
sc_status shape_transpose(sc_graph *g, sc_node *n);
sc_status shape_squeeze(sc_graph *g, sc_node *n);
sc_status shape_unsqueeze(sc_graph *g, sc_node *n);
sc_status shape_concat(sc_graph *g, sc_node *n);
sc_status shape_split(sc_graph *g, sc_node *n);
sc_status shape_slice(sc_graph *g, sc_node *n);
sc_status shape_gather(sc_graph *g, sc_node *n);
sc_status shape_expand(sc_graph *g, sc_node *n);
sc_status shape_pad(sc_graph *g, sc_node *n);
sc_status shape_trilu(sc_graph *g, sc_node *n);
sc_status shape_shape(sc_graph *g, sc_node *n);
sc_status shape_constant_of_shape(sc_graph *g, sc_node *n);
sc_status shape_range(sc_graph *g, sc_node *n);

/* Helpers (shape.c). */

/* shape_errorf plus ", input shapes A and B and C" listing every present input's desc. */
sc_status shape_fail(const sc_graph *g, const sc_node *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Normalises an axis in [-rank, rank) to [0, rank); fails naming the node. */
sc_status shape_axis(const sc_graph *g, const sc_node *n, int64_t axis, int rank, int *out);
/* Sets output k's desc (no-op when the output is omitted). */
void shape_set_out(sc_graph *g, const sc_node *n, int k, const sc_desc *d);
/* Reads a constant scalar or one-element input of any integer or float dtype as double. */
sc_status shape_const_scalar(const sc_graph *g, const sc_node *n, int input, double *dst);
/* Reads a constant 1-D float input (f32, f64) into dst, like shape_const_ints. */
sc_status shape_const_floats(const sc_graph *g, const sc_node *n, int input, double *dst, int max, int *count);
/* True when the value carries data fixed at load (CONST, or an initializer read for its shape). */
bool shape_is_const(const sc_graph *g, int value_id);

/* shape_grad_movement.c (training) */
sc_status shape_slice_grad(sc_graph *g, sc_node *n);  /* SliceGrad */
sc_status shape_gather_grad(sc_graph *g, sc_node *n); /* GatherGrad */

/* shape_grad_nn.c (training) */
sc_status shape_grad_unary(sc_graph *g, sc_node *n);      /* ReluGrad, GeluGrad */
sc_status shape_softmax_grad(sc_graph *g, sc_node *n);    /* SoftmaxGrad, LogSoftmaxGrad */
sc_status shape_conv_grad(sc_graph *g, sc_node *n);
sc_status shape_pool_grad(sc_graph *g, sc_node *n);       /* MaxPoolGrad, AveragePoolGrad */
sc_status shape_batch_norm_grad(sc_graph *g, sc_node *n);
sc_status shape_layer_norm_grad(sc_graph *g, sc_node *n);
sc_status shape_resize_grad(sc_graph *g, sc_node *n);

/* shape_train.c (training) */
sc_status shape_sce_loss(sc_graph *g, sc_node *n);      /* SoftmaxCrossEntropyLoss */
sc_status shape_sce_loss_grad(sc_graph *g, sc_node *n); /* SoftmaxCrossEntropyLossGrad */
sc_status shape_optimizer(sc_graph *g, sc_node *n);     /* SGDUpdate, AdamWUpdate */

#endif
