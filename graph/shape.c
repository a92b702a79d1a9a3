/* The helpers every shape function shares (the table is in shape_table.c).
 *
 * Contract (graph/shape.h): a shape function reads its inputs' descs, plus the constant data of
 * shape-carrying inputs, and writes the desc of every present output. Errors read
 * "node 'NAME' (Op): <what>, input shapes f32[1,3,224,224] and f32[64,3,7,7]".
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "graph/shape_fns.h"

static size_t shape_prefix(const sc_node *n, char *buf, size_t size) {
    int len = snprintf(buf, size, "node '%s' (%s): ", n->name ? n->name : "", sc_op_name(n->op));
    return len < 0 ? 0 : (size_t)len < size ? (size_t)len : size - 1;
}

sc_status shape_errorf(const sc_node *n, const char *fmt, ...) {
    char msg[2048];
    size_t at = shape_prefix(n, msg, sizeof msg);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + at, sizeof msg - at, fmt, ap);
    va_end(ap);
    return sc_errorf("%s", msg);
}

sc_status shape_fail(const sc_graph *g, const sc_node *n, const char *fmt, ...) {
    char msg[4096];
    size_t at = shape_prefix(n, msg, sizeof msg);
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(msg + at, sizeof msg - at, fmt, ap);
    va_end(ap);
    if (len > 0) at += (size_t)len;
    bool first = true;
    for (int i = 0; i < n->n_in && at < sizeof msg; i++) {
        if (n->in[i] < 0) continue;
        char d[160];
        sc_desc_str(&g->values[n->in[i]].desc, d, sizeof d);
        len = snprintf(msg + at, sizeof msg - at, "%s%s", first ? ", input shapes " : " and ", d);
        if (len > 0) at += (size_t)len;
        first = false;
    }
    return sc_errorf("%s", msg);
}

sc_status shape_broadcast(const sc_node *n, const sc_desc *a, const sc_desc *b, sc_desc *out) {
    int rank = a->rank > b->rank ? a->rank : b->rank;
    sc_desc r;
    memset(&r, 0, sizeof r);
    r.dtype = a->dtype;
    r.rank = rank;
    /* numpy rule: align trailing dims; each pair must be equal or contain a 1. */
    for (int i = 0; i < rank; i++) {
        int ia = i - (rank - a->rank), ib = i - (rank - b->rank);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da == db || db == 1)
            r.dims[i] = da;
        else if (da == 1)
            r.dims[i] = db;
        else {
            char sa[160], sb[160];
            return shape_errorf(n, "shapes cannot be broadcast (dim %d: %lld vs %lld), input shapes %s and %s", i,
                                (long long)da, (long long)db, sc_desc_str(a, sa, sizeof sa),
                                sc_desc_str(b, sb, sizeof sb));
        }
    }
    *out = r;
    return SC_OK;
}

bool shape_is_const(const sc_graph *g, int value_id) {
    const sc_value *v = &g->values[value_id];
    return (v->kind == SC_VALUE_CONST || v->kind == SC_VALUE_PARAM) && v->data != NULL;
}

/* A shape-carrying input must be known at load: static shapes are what make static planning
 * possible (docs/DESIGN.md). Names the producer when the value is computed at run time. */
static sc_status shape_need_const(const sc_graph *g, const sc_node *n, int input, const char *what) {
    if (!node_has_input(n, input)) return shape_errorf(n, "%s (input %d) is missing", what, input);
    const sc_value *v = &g->values[n->in[input]];
    if (shape_is_const(g, n->in[input])) return SC_OK;
    if (v->producer >= 0 && v->producer < g->n_nodes) {
        const sc_node *p = &g->nodes[v->producer];
        return shape_errorf(n, "%s (input %d, '%s') must be a constant known at load, but it is computed at run time "
                               "by node '%s' (%s), which could not be folded",
                            what, input, v->name, p->name, sc_op_name(p->op));
    }
    return shape_errorf(n, "%s (input %d, '%s') must be a constant known at load", what, input, v->name);
}

sc_status shape_const_ints(const sc_graph *g, const sc_node *n, int input, int64_t *dst, int max, int *count) {
    SC_TRY(shape_need_const(g, n, input, "integer input"));
    const sc_value *v = &g->values[n->in[input]];
    if (v->desc.rank > 1) return shape_errorf(n, "input %d ('%s') must be 1-D, got rank %d", input, v->name, v->desc.rank);
    int64_t cnt = sc_desc_numel(&v->desc);
    if (cnt < 0 || cnt > max)
        return shape_errorf(n, "input %d ('%s') has %lld values, at most %d supported", input, v->name, (long long)cnt, max);
    for (int64_t i = 0; i < cnt; i++) {
        if (v->desc.dtype == SC_I64)
            dst[i] = ((const int64_t *)v->data)[i];
        else if (v->desc.dtype == SC_I32)
            dst[i] = ((const int32_t *)v->data)[i];
        else
            return shape_errorf(n, "input %d ('%s') must be i32 or i64, got %s", input, v->name,
                                sc_dtype_name(v->desc.dtype));
    }
    *count = (int)cnt;
    return SC_OK;
}

static bool shape_read_double(const sc_value *v, int64_t i, double *dst) {
    const void *p = v->data;
    switch (v->desc.dtype) {
    case SC_F32: *dst = ((const float *)p)[i]; return true;
    case SC_F64: *dst = ((const double *)p)[i]; return true;
    case SC_I64: *dst = (double)((const int64_t *)p)[i]; return true;
    case SC_I32: *dst = ((const int32_t *)p)[i]; return true;
    case SC_I16: *dst = ((const int16_t *)p)[i]; return true;
    case SC_I8: *dst = ((const int8_t *)p)[i]; return true;
    case SC_U8: *dst = ((const uint8_t *)p)[i]; return true;
    case SC_U16: *dst = ((const uint16_t *)p)[i]; return true;
    case SC_U32: *dst = ((const uint32_t *)p)[i]; return true;
    case SC_U64: *dst = (double)((const uint64_t *)p)[i]; return true;
    default: return false;
    }
}

sc_status shape_const_scalar(const sc_graph *g, const sc_node *n, int input, double *dst) {
    SC_TRY(shape_need_const(g, n, input, "scalar input"));
    const sc_value *v = &g->values[n->in[input]];
    if (sc_desc_numel(&v->desc) != 1)
        return shape_errorf(n, "input %d ('%s') must hold one value", input, v->name);
    if (!shape_read_double(v, 0, dst))
        return shape_errorf(n, "input %d ('%s') has unsupported dtype %s", input, v->name, sc_dtype_name(v->desc.dtype));
    return SC_OK;
}

sc_status shape_const_floats(const sc_graph *g, const sc_node *n, int input, double *dst, int max, int *count) {
    SC_TRY(shape_need_const(g, n, input, "float input"));
    const sc_value *v = &g->values[n->in[input]];
    if (v->desc.rank > 1) return shape_errorf(n, "input %d ('%s') must be 1-D, got rank %d", input, v->name, v->desc.rank);
    if (v->desc.dtype != SC_F32 && v->desc.dtype != SC_F64)
        return shape_errorf(n, "input %d ('%s') must be f32 or f64, got %s", input, v->name, sc_dtype_name(v->desc.dtype));
    int64_t cnt = sc_desc_numel(&v->desc);
    if (cnt < 0 || cnt > max)
        return shape_errorf(n, "input %d ('%s') has %lld values, at most %d supported", input, v->name, (long long)cnt, max);
    for (int64_t i = 0; i < cnt; i++) shape_read_double(v, i, &dst[i]);
    *count = (int)cnt;
    return SC_OK;
}

sc_status shape_axis(const sc_graph *g, const sc_node *n, int64_t axis, int rank, int *out) {
    if (axis < -rank || axis >= rank) return shape_fail(g, n, "axis %lld is out of range for rank %d", (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return SC_OK;
}

void shape_set_out(sc_graph *g, const sc_node *n, int k, const sc_desc *d) {
    if (k < n->n_out && n->out[k] >= 0) g->values[n->out[k]].desc = *d;
}

sc_status shape_out(sc_graph *g, const sc_node *n, const sc_desc *d) {
    shape_set_out(g, n, 0, d);
    return SC_OK;
}

sc_status shape_same_desc(const sc_graph *g, const sc_node *n, int a, int b) {
    const sc_desc *da = shape_in(g, n, a), *db = shape_in(g, n, b);
    if (da->dtype != db->dtype || da->rank != db->rank || !sc_desc_same_shape(da, db))
        return shape_fail(g, n, "inputs %d and %d must have the same dtype and shape", a, b);
    return SC_OK;
}

sc_status shape_float_input(const sc_graph *g, const sc_node *n, int i) {
    if (!sc_dtype_is_float(shape_in(g, n, i)->dtype)) return shape_fail(g, n, "input %d must be a float tensor", i);
    return SC_OK;
}
