/* Private to autodiff/: the gradient rules (one function per op or op family, in
 * autodiff/grad_<family>*.c, indexed by op in sc_grad_rules of grad_rules.c) and emit helpers beyond
 * the public ones of grad.h. */
#ifndef SC_GRAD_RULES_H
#define SC_GRAD_RULES_H

#include "autodiff/grad.h"

/* More emit helpers (builder.c); sticky errors like grad.h's. */

/* ReduceSum over axes (none: every axis). */
int ad_reduce_sum(sc_grad_ctx *c, int x, const int64_t *axes, int n_axes, bool keepdims);
/* A tensor of desc d filled with value, and zeros (ConstantOfShape, so nothing is stored in the
 * graph). */
int ad_fill(sc_grad_ctx *c, const sc_desc *d, double value);
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

/* Every gradient rule, generated from the ops.def rows (grad_<grad>, defined in grad_<family>*.c).
 * grad_none is never defined: grad_rules.c's table reads it as NULL (not differentiable). */
#define SC_OP(id, name, min_in, max_in, min_out, max_out, family, attrs, since, shape, kernel, grad, ...) \
    void grad_##grad(sc_grad_ctx *c);
#include "graph/ops.def"
#include "graph/ops_train.def"
#undef SC_OP

#endif
