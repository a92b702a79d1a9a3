/* Canonical forms at import: Constant nodes become CONST values, and parameters that old opsets kept
 * in attributes become constant inputs, so everything downstream sees the newest form only
 * (graph/ops.def). The opset boundaries, from the ONNX operator changelog:
 *   Squeeze/Unsqueeze axes        attribute before 13, input 1 from 13
 *   ReduceSum axes                attribute before 13, input 1 from 13
 *   ReduceMean axes               attribute before 18, input 1 from 18
 *   Split split                   attribute before 13, input 1 from 13
 *   Dropout ratio                 attribute before 12, input 1 (f32 scalar) from 12
 *   Pad pads/value, Clip min/max  inputs since opset 11 = SC_MIN_OPSET, so nothing to convert.
 */
#include <stdio.h>
#include <string.h>

#include "import/onnx_internal.h"

int onnx_add_const(sc_graph *g, const char *base, const sc_desc *desc, const void *data, sc_status *st) {
    int id = graph_add_value_unique(g, base, SC_VALUE_CONST, desc, st);
    if (id < 0) return -1;
    *st = graph_alloc_data(g, id);
    if (*st) return -1;
    int64_t bytes = sc_desc_bytes(desc);
    if (bytes > 0) memcpy(g->values[id].data, data, (size_t)bytes);
    return id;
}

/* Appends attribute `attr` (INTS) as an i64 1-D constant input at position `pos`. */
static sc_status ints_to_input(const sc_node_ctx *c, const char *attr, int pos, int *in, int *n_in, int cap) {
    const Onnx__AttributeProto *a = attr_find(c, attr);
    if (!a) return SC_OK;
    if (*n_in > pos && in[pos] >= 0)
        return attr_errorf(c, attr, "given both as attribute and as input %d (opset %lld takes the attribute)", pos,
                           (long long)c->opset);
    if (pos >= cap) return attr_errorf(c, attr, "no room for it as input %d", pos);
    if (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS)
        return attr_errorf(c, attr, "expected type INTS");
    sc_status st = SC_OK;
    int64_t dims[1] = {(int64_t)a->n_ints};
    sc_desc d = sc_desc_make(SC_I64, 1, dims);
    char base[256];
    snprintf(base, sizeof base, "%.200s_%s", c->label, attr);
    int id = onnx_add_const(c->g, base, &d, a->ints, &st);
    if (id < 0) return st;
    while (*n_in < pos) in[(*n_in)++] = -1;
    in[pos] = id;
    if (*n_in <= pos) *n_in = pos + 1;
    return SC_OK;
}

static sc_status ratio_to_input(const sc_node_ctx *c, int *in, int *n_in, int cap) {
    if (!attr_find(c, "ratio")) return SC_OK;
    if (*n_in > 1 && in[1] >= 0) return attr_errorf(c, "ratio", "given both as attribute and as input 1");
    float ratio;
    SC_TRY(attr_float(c, "ratio", 0.5f, &ratio));
    sc_desc d = sc_desc_make(SC_F32, 0, NULL);
    char base[256];
    snprintf(base, sizeof base, "%.200s_ratio", c->label);
    sc_status st = SC_OK;
    int id = onnx_add_const(c->g, base, &d, &ratio, &st);
    if (id < 0) return st;
    if (*n_in < 1) in[(*n_in)++] = -1;
    in[1] = id;
    if (*n_in < 2) *n_in = 2;
    return SC_OK;
}

sc_status onnx_canonicalise(const sc_node_ctx *c, int *in, int *n_in, int cap) {
    switch (c->op) {
    case SC_OP_SQUEEZE:
        if (c->opset < 13) return ints_to_input(c, "axes", 1, in, n_in, cap);
        return SC_OK;
    case SC_OP_UNSQUEEZE:
        if (c->opset < 13) {
            if (!attr_find(c, "axes")) return attr_errorf(c, "axes", "required attribute is missing");
            return ints_to_input(c, "axes", 1, in, n_in, cap);
        }
        return SC_OK;
    case SC_OP_REDUCE_SUM:
        if (c->opset < 13) return ints_to_input(c, "axes", 1, in, n_in, cap);
        return SC_OK;
    case SC_OP_REDUCE_MEAN:
        if (c->opset < 18) return ints_to_input(c, "axes", 1, in, n_in, cap);
        return SC_OK;
    case SC_OP_SPLIT:
        if (c->opset < 13) return ints_to_input(c, "split", 1, in, n_in, cap);
        return SC_OK;
    case SC_OP_DROPOUT:
        if (c->opset < 12) return ratio_to_input(c, in, n_in, cap);
        return SC_OK;
    default:
        return SC_OK;
    }
}

/* Constant-17: exactly one of value, value_float(s), value_int(s) (strings and sparse unsupported). */
sc_status onnx_constant_value(const sc_node_ctx *c, sc_tensor *out) {
    memset(out, 0, sizeof *out);
    if (c->node->n_attribute != 1)
        return sc_errorf("node '%s' (Constant): expected exactly one attribute, found %zu", c->label,
                         c->node->n_attribute);
    const Onnx__AttributeProto *a = c->node->attribute[0];
    const char *name = a->name ? a->name : "";
    if (strcmp(name, "value") == 0) {
        if (!a->t) return attr_errorf(c, name, "expected a TENSOR");
        char what[300];
        snprintf(what, sizeof what, "node '%.200s' (Constant): attribute 'value'", c->label);
        sc_tensor_src src = *c->src;
        src.arena = &c->g->arena;
        return onnx_tensor_decode(a->t, what, &src, out);
    }
    if (strcmp(name, "value_float") == 0 || strcmp(name, "value_int") == 0) {
        bool is_f = name[6] == 'f';
        if (is_f) {
            float f;
            SC_TRY(attr_float(c, name, 0, &f));
            out->desc = sc_desc_make(SC_F32, 0, NULL);
            out->data = sc_arena_alloc(&c->g->arena, sizeof f);
            if (out->data) memcpy(out->data, &f, sizeof f);
        } else {
            int64_t i;
            SC_TRY(attr_int(c, name, 0, &i));
            out->desc = sc_desc_make(SC_I64, 0, NULL);
            out->data = sc_arena_alloc(&c->g->arena, sizeof i);
            if (out->data) memcpy(out->data, &i, sizeof i);
        }
        return out->data ? SC_OK : sc_errorf("out of memory");
    }
    if (strcmp(name, "value_floats") == 0 || strcmp(name, "value_ints") == 0) {
        bool is_f = name[6] == 'f';
        int want = is_f ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS : ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        if (a->has_type && (int)a->type != want) return attr_errorf(c, name, "expected %s", is_f ? "FLOATS" : "INTS");
        int64_t dims[1] = {(int64_t)(is_f ? a->n_floats : a->n_ints)};
        out->desc = sc_desc_make(is_f ? SC_F32 : SC_I64, 1, dims);
        size_t bytes = (size_t)sc_desc_bytes(&out->desc);
        out->data = sc_arena_alloc(&c->g->arena, bytes);
        if (!out->data) return sc_errorf("out of memory");
        if (bytes) memcpy(out->data, is_f ? (const void *)a->floats : (const void *)a->ints, bytes);
        return SC_OK;
    }
    return attr_errorf(c, name, "Constant attribute is not supported (only value, value_float(s), value_int(s))");
}
