/* Gradient rules: one per differentiable op, emitting ordinary graph nodes (docs/DESIGN.md, autodiff/;
 * ONNX Runtime's gradient_builder.cc is the model).
 *
 * A rule reads the forward node through I(c,i) (input value id), O(c,i) (output value id) and
 * GO(c,i) (gradient of output i, -1 if no gradient flows into it) and sets the gradient of each input
 * that needs one with set_GI(c, i, value). It must only set inputs for which NEED_GI(c,i) is true and
 * must reduce broadcast gradients back to the input's shape (ad_reduce_to_shape). Contributions of
 * several consumers are summed by the driver, not by rules.
 *
 * Nodes are emitted with ad_emit, which infers output descs with the op's shape function at once, so
 * a rule can look at the shapes of what it built. Errors are sticky in c->st: after the first error
 * every emit helper returns -1 and does nothing, so rules need not check each call.
 *
 * Value kinds: emitted values are SC_VALUE_GRAD when they carry a gradient, SC_VALUE_ACT for helper
 * values, SC_VALUE_CONST for constants (ad_const_*).
 */
#ifndef SC_GRAD_H
#define SC_GRAD_H

#include "graph/graph.h"

typedef struct {
    sc_graph *g;
    sc_node fwd;          /* a copy: g->nodes moves when nodes are added */
    int fwd_index;        /* index of the forward node */
    const int *go;        /* gradient of each forward output, -1 if none */
    int *gi;              /* gradient of each forward input, set by the rule, -1 if none */
    const bool *need_gi;  /* whether input i needs a gradient */
    sc_status st;         /* first error; sticky */
} sc_grad_ctx;

typedef void (*sc_grad_rule)(sc_grad_ctx *c);

extern const sc_grad_rule sc_grad_rules[SC_OP_COUNT];
/* Why an op has no gradient rule ("not differentiable: ..."), or NULL if it should have one. */
const char *grad_rule_missing_reason(sc_op op);

static inline int I(const sc_grad_ctx *c, int i) { return i < c->fwd.n_in ? c->fwd.in[i] : -1; }
static inline int O(const sc_grad_ctx *c, int i) { return i < c->fwd.n_out ? c->fwd.out[i] : -1; }
static inline int GO(const sc_grad_ctx *c, int i) { return i < c->fwd.n_out ? c->go[i] : -1; }
static inline bool NEED_GI(const sc_grad_ctx *c, int i) { return i < c->fwd.n_in && c->need_gi[i]; }
static inline void set_GI(sc_grad_ctx *c, int i, int v) { if (NEED_GI(c, i)) c->gi[i] = v; }
static inline const sc_desc *ad_desc(const sc_grad_ctx *c, int v) { return &c->g->values[v].desc; }

/* Emits op on `in` (-1 = omitted optional input) with attrs (NULL = zeroed); creates n_out outputs
 * named after the forward node, infers their descs, stores their ids in out (may be NULL when
 * n_out == 1) and returns the first output id, or -1 after an error. */
int ad_emit(sc_grad_ctx *c, sc_op op, const int *in, int n_in, int n_out, int *out, const sc_attrs *attrs);
/* dX = op(dY, v) with the forward node's attributes: the rules whose gradient kernel reads dY and one
 * forward value v (the input X or the output Y); sets input 0's gradient. */
void ad_grad_kernel(sc_grad_ctx *c, sc_op op, int v);
/* Shorthands for single-output ops without attributes. */
int ad_unary(sc_grad_ctx *c, sc_op op, int x);
int ad_binary(sc_grad_ctx *c, sc_op op, int a, int b);
/* Constants: a 1-D i64 tensor, and a scalar (rank 0) of the given float or int dtype. */
int ad_const_i64(sc_grad_ctx *c, const int64_t *vals, int n);
int ad_const_scalar(sc_grad_ctx *c, sc_dtype dtype, double v);
/* Sums a broadcast gradient down to `target`'s shape (numpy rules): ReduceSum over the broadcast
 * axes then Reshape. Returns grad itself when the shapes already match. */
int ad_reduce_to_shape(sc_grad_ctx *c, int grad, const sc_desc *target);
/* Reshape to a static shape (a constant shape input). */
int ad_reshape(sc_grad_ctx *c, int x, const sc_desc *shape);

#endif
