/* Gradient rules of the element-wise ops (contract in autodiff/grad.h). dY is GO(c,0); each rule
 * writes the math it emits. Binary ops broadcast (numpy rules), so every input gradient is summed
 * back to the input's shape with ad_reduce_to_shape. Conventions at kinks follow PyTorch:
 * Relu'(0) = 0, LeakyRelu uses x > 0, Clip passes the gradient where min <= x <= max, and
 * Max/Min split the gradient evenly between tied inputs (torch.maximum/minimum for two inputs).
 */
#include <math.h>
#include <string.h>

#include "autodiff/grad_rules.h"

static sc_dtype dt(sc_grad_ctx *c, int v) { return ad_desc(c, v)->dtype; }
static int one_like(sc_grad_ctx *c, int v) { return ad_const_scalar(c, dt(c, v), 1.0); }
static int zero_like(sc_grad_ctx *c, int v) { return ad_const_scalar(c, dt(c, v), 0.0); }

/* Sets input i's gradient to g summed to the input's shape. */
static void set_reduced(sc_grad_ctx *c, int i, int g) {
    if (!NEED_GI(c, i) || g < 0) return;
    set_GI(c, i, ad_reduce_to_shape(c, g, ad_desc(c, I(c, i))));
}

/* Relu: dX = ReluGrad(dY, Y) = dY * (Y > 0). */
void grad_relu(sc_grad_ctx *c) {
    int in[2] = {GO(c, 0), O(c, 0)};
    set_GI(c, 0, ad_emit(c, SC_OP_RELU_GRAD, in, 2, 1, NULL, NULL));
}

/* LeakyRelu: dX = X > 0 ? dY : alpha * dY. */
void grad_leaky_relu(sc_grad_ctx *c) {
    int x = I(c, 0), dy = GO(c, 0);
    int pos = ad_binary(c, SC_OP_GREATER, x, zero_like(c, x));
    set_GI(c, 0, ad_where(c, pos, dy, ad_scale(c, dy, c->fwd.attrs->leaky_relu.alpha)));
}

/* Sigmoid: dX = dY * Y * (1 - Y). */
void grad_sigmoid(sc_grad_ctx *c) {
    int y = O(c, 0);
    int d = ad_binary(c, SC_OP_MUL, y, ad_binary(c, SC_OP_SUB, one_like(c, y), y));
    set_GI(c, 0, ad_binary(c, SC_OP_MUL, GO(c, 0), d));
}

/* Tanh: dX = dY * (1 - Y^2). */
void grad_tanh(sc_grad_ctx *c) {
    int y = O(c, 0);
    int d = ad_binary(c, SC_OP_SUB, one_like(c, y), ad_binary(c, SC_OP_MUL, y, y));
    set_GI(c, 0, ad_binary(c, SC_OP_MUL, GO(c, 0), d));
}

/* Erf: dX = dY * 2/sqrt(pi) * exp(-X^2). */
void grad_erf(sc_grad_ctx *c) {
    int x = I(c, 0);
    int e = ad_unary(c, SC_OP_EXP, ad_unary(c, SC_OP_NEG, ad_binary(c, SC_OP_MUL, x, x)));
    set_GI(c, 0, ad_binary(c, SC_OP_MUL, GO(c, 0), ad_scale(c, e, 2.0 / sqrt(M_PI))));
}

/* HardSigmoid: dX = dY * alpha where 0 < Y < 1 (the unclamped part), else 0: PyTorch's rule, which
 * gives 0 at the kinks. */
void grad_hard_sigmoid(sc_grad_ctx *c) {
    int y = O(c, 0), dy = GO(c, 0);
    int inside = ad_binary(c, SC_OP_AND, ad_binary(c, SC_OP_GREATER, y, zero_like(c, y)),
                           ad_binary(c, SC_OP_LESS, y, one_like(c, y)));
    set_GI(c, 0, ad_where(c, inside, ad_scale(c, dy, c->fwd.attrs->hard_sigmoid.alpha), zero_like(c, dy)));
}

/* HardSwish: dX = 0 for X < -3, dY * (X / 3 + 1/2) for -3 <= X <= 3, dY above: PyTorch's
 * hardswish_backward, kinks included. */
void grad_hard_swish(sc_grad_ctx *c) {
    int x = I(c, 0), dy = GO(c, 0);
    sc_dtype t = dt(c, x);
    int slope = ad_binary(c, SC_OP_ADD, ad_scale(c, x, 1.0 / 3.0), ad_const_scalar(c, t, 0.5));
    int g = ad_where(c, ad_binary(c, SC_OP_GREATER, x, ad_const_scalar(c, t, 3.0)), dy,
                     ad_binary(c, SC_OP_MUL, dy, slope));
    set_GI(c, 0, ad_where(c, ad_binary(c, SC_OP_LESS, x, ad_const_scalar(c, t, -3.0)), zero_like(c, dy), g));
}

/* Gelu: dX = GeluGrad(dY, X) with the forward's approximation. */
void grad_gelu(sc_grad_ctx *c) {
    ad_grad_kernel(c, SC_OP_GELU_GRAD, I(c, 0));
}

/* Clip: dX = dY where min <= X <= max (torch.clamp's backward), else 0. The bounds get the
 * gradient where X lies outside them: dmin = sum(dY where X < min), dmax = sum(dY where X > max). */
void grad_clip(sc_grad_ctx *c) {
    int x = I(c, 0), dy = GO(c, 0), mn = I(c, 1), mx = I(c, 2);
    int zero = zero_like(c, dy);
    int below = mn >= 0 ? ad_binary(c, SC_OP_LESS, x, mn) : -1;
    int above = mx >= 0 ? ad_binary(c, SC_OP_GREATER, x, mx) : -1;
    if (NEED_GI(c, 0)) {
        int g = dy;
        if (below >= 0) g = ad_where(c, below, zero, g);
        if (above >= 0) g = ad_where(c, above, zero, g);
        set_GI(c, 0, g);
    }
    if (NEED_GI(c, 1) && below >= 0) set_reduced(c, 1, ad_where(c, below, dy, zero));
    if (NEED_GI(c, 2) && above >= 0) set_reduced(c, 2, ad_where(c, above, dy, zero));
}

/* Sqrt: dX = dY * 0.5 / Y. */
void grad_sqrt(sc_grad_ctx *c) {
    int y = O(c, 0);
    set_GI(c, 0, ad_binary(c, SC_OP_DIV, ad_scale(c, GO(c, 0), 0.5), y));
}

/* Reciprocal: dX = -dY * Y^2. */
void grad_reciprocal(sc_grad_ctx *c) {
    int y = O(c, 0);
    set_GI(c, 0, ad_unary(c, SC_OP_NEG, ad_binary(c, SC_OP_MUL, GO(c, 0), ad_binary(c, SC_OP_MUL, y, y))));
}

void grad_neg(sc_grad_ctx *c) { set_GI(c, 0, ad_unary(c, SC_OP_NEG, GO(c, 0))); }

/* Exp: dX = dY * Y. */
void grad_exp(sc_grad_ctx *c) { set_GI(c, 0, ad_binary(c, SC_OP_MUL, GO(c, 0), O(c, 0))); }

/* Log: dX = dY / X. */
void grad_log(sc_grad_ctx *c) { set_GI(c, 0, ad_binary(c, SC_OP_DIV, GO(c, 0), I(c, 0))); }

/* Cast between float types: the gradient is cast back (only float inputs ever need one). */
void grad_cast(sc_grad_ctx *c) {
    int x = I(c, 0);
    if (!sc_dtype_is_float(dt(c, x))) return;
    set_GI(c, 0, ad_cast(c, GO(c, 0), dt(c, x)));
}

void grad_identity(sc_grad_ctx *c) { set_GI(c, 0, GO(c, 0)); }

/* Reads Dropout's constant training_mode input (absent: inference). */
static bool dropout_training(sc_grad_ctx *c) {
    int t = I(c, 2);
    if (t < 0) return false;
    const sc_value *v = &c->g->values[t];
    if (!v->data || v->desc.dtype != SC_BOOL) {
        ad_fail(c, "training_mode '%s' must be a constant bool", v->name);
        return false;
    }
    return *(const uint8_t *)v->data != 0;
}

/* Dropout: inference is the identity. Training: Y = X * mask / (1 - ratio), so
 * dX = dY * mask / (1 - ratio) with the mask the forward pass drew (output 1, which the rule
 * requires: recomputing the mask here would need the forward's counter state). */
void grad_dropout(sc_grad_ctx *c) {
    bool training = dropout_training(c);
    if (c->st) return;
    if (!training) {
        set_GI(c, 0, GO(c, 0));
        return;
    }
    int mask = O(c, 1);
    if (mask < 0) {
        ad_fail(c, "training-mode Dropout needs its mask output (output 1) for the gradient");
        return;
    }
    int dy = GO(c, 0);
    int g = ad_binary(c, SC_OP_MUL, dy, ad_cast(c, mask, dt(c, dy)));
    int r = I(c, 1);
    if (r < 0) {
        g = ad_scale(c, g, 2.0); /* default ratio 0.5 */
    } else {
        const sc_value *rv = &c->g->values[r];
        if (rv->data && rv->desc.dtype == SC_F32 && sc_desc_numel(&rv->desc) == 1)
            g = ad_scale(c, g, 1.0 / (1.0 - *(const float *)rv->data));
        else if (rv->data && rv->desc.dtype == SC_F64 && sc_desc_numel(&rv->desc) == 1)
            g = ad_scale(c, g, 1.0 / (1.0 - *(const double *)rv->data));
        else /* ratio computed at run time: divide by (1 - ratio) in the graph */
            g = ad_binary(c, SC_OP_DIV, g, ad_cast(c, ad_binary(c, SC_OP_SUB, one_like(c, r), r), dt(c, dy)));
    }
    set_GI(c, 0, g);
}

/* Add: dA = dY, dB = dY (each summed to its shape). */
void grad_add(sc_grad_ctx *c) {
    set_reduced(c, 0, GO(c, 0));
    set_reduced(c, 1, GO(c, 0));
}

/* Sub: dA = dY, dB = -dY. The negation runs after the reduction, on the smaller tensor. */
void grad_sub(sc_grad_ctx *c) {
    set_reduced(c, 0, GO(c, 0));
    if (NEED_GI(c, 1)) set_GI(c, 1, ad_unary(c, SC_OP_NEG, ad_reduce_to_shape(c, GO(c, 0), ad_desc(c, I(c, 1)))));
}

/* Mod (floats, fmod = 1): Y = A - B trunc(A / B), so dA = dY and dB = -dY trunc(A / B) =
 * -dY (A - Y) / B, away from the jumps (PyTorch's fmod_backward). Integer Mod has no gradient (its
 * inputs need none). */
void grad_mod(sc_grad_ctx *c) {
    int a = I(c, 0), b = I(c, 1), y = O(c, 0), dy = GO(c, 0);
    set_reduced(c, 0, dy);
    if (NEED_GI(c, 1)) {
        int q = ad_binary(c, SC_OP_DIV, ad_binary(c, SC_OP_SUB, a, y), b);
        set_reduced(c, 1, ad_unary(c, SC_OP_NEG, ad_binary(c, SC_OP_MUL, dy, q)));
    }
}

/* Mul: dA = dY * B, dB = dY * A. */
void grad_mul(sc_grad_ctx *c) {
    int a = I(c, 0), b = I(c, 1), dy = GO(c, 0);
    if (NEED_GI(c, 0)) set_reduced(c, 0, ad_binary(c, SC_OP_MUL, dy, b));
    if (NEED_GI(c, 1)) set_reduced(c, 1, ad_binary(c, SC_OP_MUL, dy, a));
}

/* Div: Y = A / B; dA = dY / B, dB = -dY * Y / B. */
void grad_div(sc_grad_ctx *c) {
    int b = I(c, 1), y = O(c, 0), dy = GO(c, 0);
    int da = ad_binary(c, SC_OP_DIV, dy, b);
    if (NEED_GI(c, 0)) set_reduced(c, 0, da);
    if (NEED_GI(c, 1)) set_reduced(c, 1, ad_unary(c, SC_OP_NEG, ad_binary(c, SC_OP_MUL, da, y)));
}

/* Pow: Y = A^B. Like PyTorch's pow_backward:
 *   dA = B == 0 ? 0 : dY * B * A^(B-1)
 *   dB = A == 0 ? 0 : dY * Y * log(A)     (PyTorch also requires B >= 0 there; for A == 0 and
 *                                           B < 0, Y is infinite and so is any gradient)
 * An integer exponent is cast to A's dtype for the arithmetic. */
void grad_pow(sc_grad_ctx *c) {
    int a = I(c, 0), b = I(c, 1), y = O(c, 0), dy = GO(c, 0);
    sc_dtype t = dt(c, a);
    if (NEED_GI(c, 0)) {
        int bf = ad_cast(c, b, t);
        int p = ad_binary(c, SC_OP_POW, a, ad_binary(c, SC_OP_SUB, bf, one_like(c, a)));
        int g = ad_binary(c, SC_OP_MUL, dy, ad_binary(c, SC_OP_MUL, bf, p));
        g = ad_where(c, ad_binary(c, SC_OP_EQUAL, bf, zero_like(c, a)), zero_like(c, a), g);
        set_reduced(c, 0, g);
    }
    if (NEED_GI(c, 1)) {
        int l = ad_binary(c, SC_OP_MUL, y, ad_unary(c, SC_OP_LOG, a));
        l = ad_where(c, ad_binary(c, SC_OP_EQUAL, a, zero_like(c, a)), zero_like(c, a), l);
        set_reduced(c, 1, ad_cast(c, ad_binary(c, SC_OP_MUL, dy, l), dt(c, b)));
    }
}

/* Max/Min over n inputs: input i gets dY * [X_i == Y] / #{j : X_j == Y}, i.e. the gradient goes to
 * the input that won and is split evenly at ties. For two inputs this is exactly PyTorch's
 * torch.maximum/torch.minimum backward (grad / 2 on ties). */
void grad_max_min(sc_grad_ctx *c) {
    int y = O(c, 0), dy = GO(c, 0), n = c->fwd.n_in;
    if (n == 1) {
        set_GI(c, 0, dy);
        return;
    }
    sc_dtype t = dt(c, dy);
    int masks[64];
    if (n > 64) {
        ad_fail(c, "more than 64 inputs are not supported");
        return;
    }
    int count = -1;
    for (int i = 0; i < n; i++) {
        masks[i] = ad_cast(c, ad_binary(c, SC_OP_EQUAL, I(c, i), y), t);
        count = count < 0 ? masks[i] : ad_binary(c, SC_OP_ADD, count, masks[i]);
    }
    int share = ad_binary(c, SC_OP_DIV, dy, count);
    for (int i = 0; i < n; i++)
        if (NEED_GI(c, i)) set_reduced(c, i, ad_binary(c, SC_OP_MUL, share, masks[i]));
}

/* Where(cond, A, B): dA = cond ? dY : 0, dB = cond ? 0 : dY. cond is boolean (no gradient). */
void grad_where(sc_grad_ctx *c) {
    int cond = I(c, 0), dy = GO(c, 0);
    int zero = zero_like(c, dy);
    if (NEED_GI(c, 1)) set_reduced(c, 1, ad_where(c, cond, dy, zero));
    if (NEED_GI(c, 2)) set_reduced(c, 2, ad_where(c, cond, zero, dy));
}
