/* Private to autodiff/: the gradient rules (one function per op or op family, in
 * autodiff/grad_<family>.c, indexed by op in sc_grad_rules of grad_rules.c) and emit helpers beyond
 * the public ones of grad.h. Each owner adds declarations in their file's section only. */
#ifndef SC_GRAD_RULES_H
#define SC_GRAD_RULES_H

#include "autodiff/grad.h"

/* More emit helpers (builder.c); sticky errors like grad.h's. */

/* ReduceSum over axes (none: every axis). */
int ad_reduce_sum(sc_grad_ctx *c, int x, const int64_t *axes, int n_axes, bool keepdims);
/* Zeros of desc d (ConstantOfShape, so nothing is stored in the graph). */
int ad_zeros(sc_grad_ctx *c, const sc_desc *d);
/* x * s (a scalar constant of x's dtype); x itself when s == 1. */
int ad_scale(sc_grad_ctx *c, int x, double s);
int ad_transpose(sc_grad_ctx *c, int x, const int64_t *perm, int rank);
/* Cast to dtype `to`; x itself when it already has that dtype. */
int ad_cast(sc_grad_ctx *c, int x, sc_dtype to);
int ad_where(sc_grad_ctx *c, int cond, int a, int b);
/* Sets c->st (once) to "gradient of node 'NAME' (Op): <message>". */
void ad_fail(sc_grad_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Reads constant 1-D integer value v (-1: absent, *count = 0); fails through c->st otherwise. */
bool ad_const_ints(sc_grad_ctx *c, int v, int64_t *dst, int max, int *count);

/* grad_elementwise.c */
void grad_relu(sc_grad_ctx *c);
void grad_leaky_relu(sc_grad_ctx *c);
void grad_sigmoid(sc_grad_ctx *c);
void grad_tanh(sc_grad_ctx *c);
void grad_erf(sc_grad_ctx *c);
void grad_gelu(sc_grad_ctx *c);
void grad_clip(sc_grad_ctx *c);
void grad_sqrt(sc_grad_ctx *c);
void grad_reciprocal(sc_grad_ctx *c);
void grad_neg(sc_grad_ctx *c);
void grad_exp(sc_grad_ctx *c);
void grad_log(sc_grad_ctx *c);
void grad_cast(sc_grad_ctx *c);
void grad_identity(sc_grad_ctx *c);
void grad_dropout(sc_grad_ctx *c);
void grad_add(sc_grad_ctx *c);
void grad_sub(sc_grad_ctx *c);
void grad_mul(sc_grad_ctx *c);
void grad_div(sc_grad_ctx *c);
void grad_pow(sc_grad_ctx *c);
void grad_max_min(sc_grad_ctx *c); /* Max, Min */
void grad_where(sc_grad_ctx *c);

/* grad_linear.c */
void grad_matmul(sc_grad_ctx *c);
void grad_gemm(sc_grad_ctx *c);

/* grad_reduce.c */
void grad_reduce(sc_grad_ctx *c); /* ReduceSum, ReduceMean */

/* grad_movement.c */
void grad_reshape_like(sc_grad_ctx *c); /* Reshape, Flatten, Squeeze, Unsqueeze */
void grad_transpose(sc_grad_ctx *c);
void grad_concat(sc_grad_ctx *c);
void grad_split(sc_grad_ctx *c);
void grad_slice(sc_grad_ctx *c);
void grad_gather(sc_grad_ctx *c);
void grad_expand(sc_grad_ctx *c);
void grad_pad(sc_grad_ctx *c);
void grad_trilu(sc_grad_ctx *c);

/* grad_nn.c */
void grad_conv(sc_grad_ctx *c);
void grad_batch_norm(sc_grad_ctx *c);
void grad_max_pool(sc_grad_ctx *c);
void grad_average_pool(sc_grad_ctx *c);
void grad_global_average_pool(sc_grad_ctx *c);
void grad_softmax(sc_grad_ctx *c);
void grad_log_softmax(sc_grad_ctx *c);
void grad_layer_norm(sc_grad_ctx *c);
void grad_resize(sc_grad_ctx *c);

/* grad_loss.c */
void grad_sce_loss(sc_grad_ctx *c); /* SoftmaxCrossEntropyLoss */

#endif
