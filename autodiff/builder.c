/* The emit helpers of autodiff/grad.h and autodiff/grad_rules.h.
 *
 * Every node a rule emits is named "<forward node>/grad/<Op>", its outputs the same (":<k>" appended
 * when it has several; each value name made unique with a "_k" suffix) so a plan, a trace or an
 * error message points back at the forward node it differentiates. Output descs
 * come from the op's shape function right away, so rules can read the shapes of what they built.
 * Errors are sticky in c->st: once set, every helper returns -1 and emits nothing. ad_emit makes at
 * most 8 outputs per node (the most any op of ops_train.def has is 3).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/half.h"

#include "autodiff/grad_rules.h"
#include "graph/shape.h"

/* "<forward node>/grad/<what>" into buf (size 512). */
static void ad_base(const sc_grad_ctx *c, const char *what, char *buf) {
    snprintf(buf, 512, "%s/grad/%s", c->fwd.name && c->fwd.name[0] ? c->fwd.name : "node", what);
}

static void ad_fail_node(sc_grad_ctx *c, const char *what, sc_status inner) {
    c->st = sc_status_prefix(inner, "gradient of node '%s' (%s): %s: ", c->fwd.name, sc_op_name(c->fwd.op), what);
}

int ad_emit(sc_grad_ctx *c, sc_op op, const int *in, int n_in, int n_out, int *out, const sc_attrs *attrs) {
    if (c->st) return -1;
    SC_ASSERT(n_out >= 1 && n_out <= 8 && n_in >= 0);
    for (int i = 0; i < n_in; i++) {
        if (in[i] < -1 || in[i] >= c->g->n_values) {
            c->st = sc_errorf("gradient of node '%s' (%s): input %d of emitted %s is invalid", c->fwd.name,
                              sc_op_name(c->fwd.op), i, sc_op_name(op));
            return -1;
        }
    }
    char base[512];
    ad_base(c, sc_op_name(op), base);
    int ids[8];
    for (int k = 0; k < n_out; k++) {
        char buf[600];
        if (n_out > 1) snprintf(buf, sizeof buf, "%s:%d", base, k);
        sc_status st = SC_OK;
        ids[k] = graph_add_value_unique(c->g, n_out > 1 ? buf : base, SC_VALUE_ACT, NULL, &st);
        if (ids[k] < 0) {
            c->st = st;
            return -1;
        }
    }
    /* A single output's node carries its name (graph_names_resolve renames both together). */
    const char *name = n_out == 1 ? c->g->values[ids[0]].name : base;
    sc_status st = SC_OK;
    int nid = graph_add_node(c->g, op, name, in, n_in, ids, n_out, &st);
    if (nid < 0) {
        c->st = st;
        return -1;
    }
    sc_node *n = &c->g->nodes[nid];
    if (attrs && (c->st = graph_node_set_attrs(c->g, n, attrs))) return -1;
    for (int k = 0; k < n_out; k++) c->g->values[ids[k]].producer = nid;
    if (!sc_shape_fns[op]) {
        c->st = sc_errorf("gradient of node '%s' (%s): emitted op %s has no shape function", c->fwd.name,
                          sc_op_name(c->fwd.op), sc_op_name(op));
        return -1;
    }
    st = sc_shape_fns[op](c->g, n);
    if (st) {
        ad_fail_node(c, "emitted node has inconsistent shapes", st);
        return -1;
    }
    if (out)
        for (int k = 0; k < n_out; k++) out[k] = ids[k];
    return ids[0];
}

void ad_grad_kernel(sc_grad_ctx *c, sc_op op, int v) {
    int in[2] = {GO(c, 0), v};
    set_GI(c, 0, ad_emit(c, op, in, 2, 1, NULL, c->fwd.attrs));
}

int ad_unary(sc_grad_ctx *c, sc_op op, int x) { return ad_emit(c, op, &x, 1, 1, NULL, NULL); }

int ad_binary(sc_grad_ctx *c, sc_op op, int a, int b) {
    if (a < 0 || b < 0) {
        if (!c->st)
            c->st = sc_errorf("gradient of node '%s' (%s): missing operand for %s", c->fwd.name, sc_op_name(c->fwd.op),
                              sc_op_name(op));
        return -1;
    }
    int in[2] = {a, b};
    return ad_emit(c, op, in, 2, 1, NULL, NULL);
}

static int ad_const_value(sc_grad_ctx *c, const sc_desc *d, const void *data) {
    if (c->st) return -1;
    char name[512];
    ad_base(c, "const", name);
    sc_status st = SC_OK;
    int v = graph_add_value_unique(c->g, name, SC_VALUE_CONST, d, &st);
    if (v < 0 || (st = graph_alloc_data(c->g, v))) {
        c->st = st;
        return -1;
    }
    int64_t bytes = sc_desc_bytes(d);
    if (bytes > 0) memcpy(c->g->values[v].data, data, (size_t)bytes);
    return v;
}

int ad_const_i64(sc_grad_ctx *c, const int64_t *vals, int n) {
    int64_t dim = n;
    sc_desc d = sc_desc_make(SC_I64, 1, &dim);
    return ad_const_value(c, &d, vals);
}

int ad_const_scalar(sc_grad_ctx *c, sc_dtype dtype, double v) {
    sc_desc d = sc_desc_make(dtype, 0, NULL);
    union {
        double f64;
        float f32;
        int64_t i64;
        int32_t i32;
        uint16_t b16;
        uint8_t u8;
    } u;
    memset(&u, 0, sizeof u);
    switch (dtype) {
    case SC_F64: u.f64 = v; break;
    case SC_F32: u.f32 = (float)v; break;
    case SC_I64: u.i64 = (int64_t)v; break;
    case SC_I32: u.i32 = (int32_t)v; break;
    case SC_BOOL: u.u8 = v != 0; break;
    case SC_BF16: u.b16 = sc_f32_to_bf16((float)v); break; /* mixed precision (graph/pass_precision.c) */
    case SC_F16: u.b16 = sc_f64_to_f16(v); break;
    default:
        if (!c->st)
            c->st = sc_errorf("gradient of node '%s' (%s): no scalar constant of dtype %s (f32, f64, bf16, f16, i32, i64, "
                              "bool)",
                              c->fwd.name, sc_op_name(c->fwd.op), sc_dtype_name(dtype));
        return -1;
    }
    return ad_const_value(c, &d, &u);
}

int ad_reshape(sc_grad_ctx *c, int x, const sc_desc *shape_in) {
    if (c->st || x < 0) return -1;
    /* a copy: shape_in may point into g->values, which adding the constant below may reallocate */
    sc_desc shape_copy = *shape_in;
    const sc_desc *shape = &shape_copy;
    const sc_desc *xd = ad_desc(c, x);
    if (xd->rank == shape->rank && sc_desc_same_shape(xd, shape)) return x;
    int s = ad_const_i64(c, shape->dims, shape->rank);
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.reshape.allowzero = true; /* our dims are literal: a 0 means an empty dim, not "copy" */
    int in[2] = {x, s};
    return ad_emit(c, SC_OP_RESHAPE, in, 2, 1, NULL, &a);
}

/* numpy broadcasting aligns trailing dims, so the gradient of a broadcast operand sums over the
 * leading dims it lacks and over the dims where it has 1 and the result does not. */
int ad_reduce_to_shape(sc_grad_ctx *c, int grad, const sc_desc *target_in) {
    if (c->st || grad < 0) return -1;
    sc_desc target_copy = *target_in; /* target_in may point into g->values (reallocated below) */
    const sc_desc *target = &target_copy;
    sc_desc gd = *ad_desc(c, grad);
    if (gd.rank == target->rank && sc_desc_same_shape(&gd, target)) return grad;
    int lead = gd.rank - target->rank;
    if (lead < 0) {
        char a[128], b[128];
        c->st = sc_errorf("gradient of node '%s' (%s): cannot reduce a gradient %s to the larger shape %s", c->fwd.name,
                          sc_op_name(c->fwd.op), sc_desc_str(&gd, a, sizeof a), sc_desc_str(target, b, sizeof b));
        return -1;
    }
    int64_t axes[SC_MAX_RANK];
    int n_axes = 0;
    for (int i = 0; i < gd.rank; i++) {
        if (i < lead) {
            axes[n_axes++] = i;
            continue;
        }
        int64_t t = target->dims[i - lead];
        if (t == gd.dims[i]) continue;
        if (t != 1) {
            char a[128], b[128];
            c->st = sc_errorf("gradient of node '%s' (%s): gradient %s does not broadcast from %s", c->fwd.name,
                              sc_op_name(c->fwd.op), sc_desc_str(&gd, a, sizeof a), sc_desc_str(target, b, sizeof b));
            return -1;
        }
        axes[n_axes++] = i;
    }
    int r = grad;
    if (n_axes) r = ad_reduce_sum(c, grad, axes, n_axes, true);
    return ad_reshape(c, r, target);
}

int ad_reduce_sum(sc_grad_ctx *c, int x, const int64_t *axes, int n_axes, bool keepdims) {
    if (c->st || x < 0) return -1;
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.reduce.keepdims = keepdims;
    if (n_axes == 0) return ad_emit(c, SC_OP_REDUCE_SUM, &x, 1, 1, NULL, &a); /* every axis */
    int in[2] = {x, ad_const_i64(c, axes, n_axes)};
    return ad_emit(c, SC_OP_REDUCE_SUM, in, 2, 1, NULL, &a);
}

int ad_fill(sc_grad_ctx *c, const sc_desc *d_in, double value) {
    if (c->st) return -1;
    sc_desc d_copy = *d_in; /* d_in may point into g->values (reallocated below) */
    const sc_desc *d = &d_copy;
    int s = ad_const_i64(c, d->dims, d->rank);
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.fill.dtype = d->dtype;
    a.fill.value = value;
    return ad_emit(c, SC_OP_CONSTANT_OF_SHAPE, &s, 1, 1, NULL, &a);
}

int ad_zeros(sc_grad_ctx *c, const sc_desc *d) { return ad_fill(c, d, 0); }

int ad_scale(sc_grad_ctx *c, int x, double s) {
    if (c->st || x < 0) return -1;
    if (s == 1) return x;
    return ad_binary(c, SC_OP_MUL, x, ad_const_scalar(c, ad_desc(c, x)->dtype, s));
}

int ad_transpose(sc_grad_ctx *c, int x, const int64_t *perm, int rank) {
    if (c->st || x < 0) return -1;
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.transpose.n_perm = rank;
    for (int i = 0; i < rank; i++) a.transpose.perm[i] = perm[i];
    return ad_emit(c, SC_OP_TRANSPOSE, &x, 1, 1, NULL, &a);
}

int ad_cast(sc_grad_ctx *c, int x, sc_dtype to) {
    if (c->st || x < 0) return -1;
    if (ad_desc(c, x)->dtype == to) return x;
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.cast.to = to;
    return ad_emit(c, SC_OP_CAST, &x, 1, 1, NULL, &a);
}

int ad_where(sc_grad_ctx *c, int cond, int a, int b) {
    if (c->st || cond < 0 || a < 0 || b < 0) return -1;
    int in[3] = {cond, a, b};
    return ad_emit(c, SC_OP_WHERE, in, 3, 1, NULL, NULL);
}

void ad_fail(sc_grad_ctx *c, const char *fmt, ...) {
    if (c->st) return;
    va_list ap;
    va_start(ap, fmt);
    c->st = sc_op_verrorf("gradient of node", c->fwd.name, c->fwd.op, fmt, ap);
    va_end(ap);
}

bool ad_const_ints(sc_grad_ctx *c, int v, int64_t *dst, int max, int *count) {
    *count = 0;
    if (c->st) return false;
    if (v < 0) return true;
    const sc_value *val = &c->g->values[v];
    if (!val->data || (val->kind != SC_VALUE_CONST && val->kind != SC_VALUE_PARAM)) {
        ad_fail(c, "'%s' must be a constant known at load", val->name);
        return false;
    }
    int64_t n = sc_desc_numel(&val->desc);
    if (val->desc.rank > 1 || n > max || (val->desc.dtype != SC_I64 && val->desc.dtype != SC_I32)) {
        ad_fail(c, "'%s' must be a 1-D i32/i64 tensor of at most %d values", val->name, max);
        return false;
    }
    for (int64_t i = 0; i < n; i++)
        dst[i] = val->desc.dtype == SC_I64 ? ((const int64_t *)val->data)[i] : ((const int32_t *)val->data)[i];
    *count = (int)n;
    return true;
}
