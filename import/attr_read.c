/* Typed readers of ONNX NodeProto attributes (onnx.proto AttributeProto).
 *
 * An attribute's declared type must match what the op expects; files from IR version 1 may omit
 * `type`, so then the populated field decides. Absent attributes yield the caller's default.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "import/onnx_internal.h"

static const char *attr_type_name(int t) {
    switch (t) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: return "FLOAT";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: return "INT";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: return "STRING";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: return "TENSOR";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH: return "GRAPH";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS: return "FLOATS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS: return "INTS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: return "STRINGS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS: return "TENSORS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS: return "GRAPHS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR: return "SPARSE_TENSOR";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS: return "SPARSE_TENSORS";
    default: return "UNDEFINED";
    }
}

/* The attribute's type, inferred from its populated field when `type` is absent. */
static int attr_type_of(const Onnx__AttributeProto *a) {
    if (a->has_type) return a->type;
    if (a->has_f) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    if (a->has_i) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    if (a->has_s) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    if (a->t) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    if (a->n_floats) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
    if (a->n_ints) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    if (a->n_strings) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED;
}

sc_status attr_errorf(const sc_node_ctx *c, const char *attr, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sc_errorf("node '%s' (%s): attribute '%s': %s", c->label, sc_op_name(c->op), attr, msg);
}

const Onnx__AttributeProto *attr_find(const sc_node_ctx *c, const char *name) {
    for (size_t i = 0; i < c->node->n_attribute; i++) {
        const Onnx__AttributeProto *a = c->node->attribute[i];
        if (a->name && strcmp(a->name, name) == 0) return a;
    }
    return NULL;
}

static sc_status attr_expect(const sc_node_ctx *c, const Onnx__AttributeProto *a, int want) {
    int got = attr_type_of(a);
    if (got != want)
        return attr_errorf(c, a->name, "has type %s, expected %s", attr_type_name(got), attr_type_name(want));
    return SC_OK;
}

/* The attribute `name` in *a, checked to be of type want; NULL when the node does not set it. */
static sc_status attr_typed(const sc_node_ctx *c, const char *name, int want, const Onnx__AttributeProto **a) {
    *a = attr_find(c, name);
    return *a ? attr_expect(c, *a, want) : SC_OK;
}

sc_status attr_int(const sc_node_ctx *c, const char *name, int64_t def, int64_t *out) {
    const Onnx__AttributeProto *a;
    SC_TRY(attr_typed(c, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, &a));
    *out = a ? a->i : def;
    return SC_OK;
}

sc_status attr_flag(const sc_node_ctx *c, const char *name, bool def, bool *out) {
    int64_t v;
    SC_TRY(attr_int(c, name, def ? 1 : 0, &v));
    *out = v != 0;
    return SC_OK;
}

sc_status attr_float(const sc_node_ctx *c, const char *name, float def, float *out) {
    const Onnx__AttributeProto *a;
    SC_TRY(attr_typed(c, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, &a));
    *out = a ? a->f : def;
    return SC_OK;
}

sc_status attr_string(const sc_node_ctx *c, const char *name, const char *def, char *buf, size_t size) {
    const Onnx__AttributeProto *a;
    SC_TRY(attr_typed(c, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING, &a));
    if (!a) {
        snprintf(buf, size, "%s", def);
        return SC_OK;
    }
    if (a->s.len >= size) return attr_errorf(c, name, "string of %zu bytes is too long", a->s.len);
    if (a->s.len) memcpy(buf, a->s.data, a->s.len);
    buf[a->s.len] = 0;
    if (strlen(buf) != a->s.len) return attr_errorf(c, name, "string contains a NUL byte");
    return SC_OK;
}

sc_status attr_ints(const sc_node_ctx *c, const char *name, int64_t *out, int max, int *n) {
    *n = 0;
    const Onnx__AttributeProto *a;
    SC_TRY(attr_typed(c, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS, &a));
    if (!a) return SC_OK;
    if (a->n_ints > (size_t)max) return attr_errorf(c, name, "has %zu values, at most %d supported", a->n_ints, max);
    for (size_t i = 0; i < a->n_ints; i++) out[i] = a->ints[i];
    *n = (int)a->n_ints;
    return SC_OK;
}

sc_status attr_enum(const sc_node_ctx *c, const char *name, const char *const *names, int n_names, int def, int *out) {
    char buf[64];
    *out = def;
    if (!attr_find(c, name)) return SC_OK;
    SC_TRY(attr_string(c, name, "", buf, sizeof buf));
    for (int i = 0; i < n_names; i++)
        if (names[i] && strcmp(buf, names[i]) == 0) {
            *out = i;
            return SC_OK;
        }
    return attr_errorf(c, name, "value '%s' is not supported", buf);
}
