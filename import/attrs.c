/* Per-op attribute parsers (graph/attrs.h) and their table indexed by sc_op.
 *
 * Defaults follow the ONNX operator specs (https://onnx.ai/onnx/operators/) for the model's opset:
 * Softmax/LogSoftmax axis is 1 with 2-D coercion before opset 13 and -1 after; ceil_mode exists from
 * MaxPool-10; AveragePool dilations from opset 19; Gelu is opset 20; Resize's antialias, axes and
 * keep_aspect_ratio_policy from opset 18; Split's num_outputs from opset 18. Attributes that later
 * opsets moved to inputs are handled by onnx_canonicalise (import/canonical.c), not here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/onnx_internal.h"

static sc_status parse_none(const sc_node_ctx *c, sc_attrs *out) { return SC_OK; }

/* Every given spatial list must agree on the number of spatial dims. */
static sc_status window_rank(const sc_node_ctx *c, const char *attr, int count, int per_dim, int *n_spatial) {
    if (!count) return SC_OK;
    if (count % per_dim) return attr_errorf(c, attr, "has %d values, expected a multiple of %d", count, per_dim);
    int n = count / per_dim;
    if (*n_spatial && *n_spatial != n)
        return attr_errorf(c, attr, "has %d values, inconsistent with %d spatial dims", count, *n_spatial);
    *n_spatial = n;
    return SC_OK;
}

static sc_status parse_window(const sc_node_ctx *c, sc_attrs *out) {
    sc_window_attrs *w = &out->window;
    int nk, ns, nd, np;
    SC_TRY(attr_ints(c, "kernel_shape", w->kernel_shape, SC_MAX_SPATIAL, &nk));
    for (int i = 0; i < SC_MAX_SPATIAL; i++) w->strides[i] = w->dilations[i] = 1;
    SC_TRY(attr_ints(c, "strides", w->strides, SC_MAX_SPATIAL, &ns));
    SC_TRY(attr_ints(c, "pads", w->pads, 2 * SC_MAX_SPATIAL, &np));
    bool has_dilations = c->op != SC_OP_AVERAGE_POOL || c->opset >= 19;
    nd = 0;
    if (has_dilations) SC_TRY(attr_ints(c, "dilations", w->dilations, SC_MAX_SPATIAL, &nd));
    w->has_kernel_shape = nk > 0;
    if (!w->has_kernel_shape && c->op != SC_OP_CONV)
        return attr_errorf(c, "kernel_shape", "required attribute is missing");
    int n = 0;
    SC_TRY(window_rank(c, "kernel_shape", nk, 1, &n));
    SC_TRY(window_rank(c, "strides", ns, 1, &n));
    SC_TRY(window_rank(c, "dilations", nd, 1, &n));
    SC_TRY(window_rank(c, "pads", np, 2, &n));
    w->n_spatial = w->has_kernel_shape ? nk : 0; /* Conv without kernel_shape: from the weight later */
    for (int i = 0; i < nk; i++)
        if (w->kernel_shape[i] <= 0) return attr_errorf(c, "kernel_shape", "value %lld is not positive", (long long)w->kernel_shape[i]);
    for (int i = 0; i < SC_MAX_SPATIAL; i++) {
        if (w->strides[i] <= 0) return attr_errorf(c, "strides", "value %lld is not positive", (long long)w->strides[i]);
        if (w->dilations[i] <= 0) return attr_errorf(c, "dilations", "value %lld is not positive", (long long)w->dilations[i]);
    }
    for (int i = 0; i < np; i++)
        if (w->pads[i] < 0) return attr_errorf(c, "pads", "value %lld is negative", (long long)w->pads[i]);
    static const char *const auto_pads[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
    int ap;
    SC_TRY(attr_enum(c, "auto_pad", auto_pads, 4, SC_AUTO_PAD_NOTSET, &ap));
    w->auto_pad = (sc_auto_pad)ap;
    int64_t v;
    SC_TRY(attr_int(c, "group", 1, &v));
    if (v <= 0) return attr_errorf(c, "group", "value %lld is not positive", (long long)v);
    w->group = c->op == SC_OP_CONV ? v : 1;
    SC_TRY(attr_int(c, "ceil_mode", 0, &v));
    w->ceil_mode = c->op != SC_OP_CONV && v != 0;
    SC_TRY(attr_int(c, "count_include_pad", 0, &v));
    w->count_include_pad = c->op == SC_OP_AVERAGE_POOL && v != 0;
    SC_TRY(attr_int(c, "storage_order", 0, &v));
    if (v != 0 && v != 1) return attr_errorf(c, "storage_order", "value %lld is not 0 or 1", (long long)v);
    w->storage_order = c->op == SC_OP_MAX_POOL ? v : 0;
    return SC_OK;
}

static sc_status parse_batch_norm(const sc_node_ctx *c, sc_attrs *out) {
    SC_TRY(attr_float(c, "epsilon", 1e-5f, &out->batch_norm.epsilon));
    SC_TRY(attr_float(c, "momentum", 0.9f, &out->batch_norm.momentum));
    int64_t tm = 0;
    if (c->opset >= 14) SC_TRY(attr_int(c, "training_mode", 0, &tm));
    out->batch_norm.training_mode = tm != 0;
    return SC_OK;
}

static sc_status parse_gemm(const sc_node_ctx *c, sc_attrs *out) {
    int64_t ta, tb;
    SC_TRY(attr_float(c, "alpha", 1.0f, &out->gemm.alpha));
    SC_TRY(attr_float(c, "beta", 1.0f, &out->gemm.beta));
    SC_TRY(attr_int(c, "transA", 0, &ta));
    SC_TRY(attr_int(c, "transB", 0, &tb));
    out->gemm.trans_a = ta != 0;
    out->gemm.trans_b = tb != 0;
    return SC_OK;
}

/* Softmax-1/11 coerce the input to 2-D around `axis` (default 1); Softmax-13 works along one axis
 * (default -1). */
static sc_status parse_softmax(const sc_node_ctx *c, sc_attrs *out) {
    bool legacy = c->opset < 13;
    out->axis.legacy_2d = legacy;
    return attr_int(c, "axis", legacy ? 1 : -1, &out->axis.axis);
}

static sc_status parse_flatten(const sc_node_ctx *c, sc_attrs *out) { return attr_int(c, "axis", 1, &out->axis.axis); }
static sc_status parse_gather(const sc_node_ctx *c, sc_attrs *out) { return attr_int(c, "axis", 0, &out->axis.axis); }

static sc_status parse_concat(const sc_node_ctx *c, sc_attrs *out) {
    if (!attr_find(c, "axis")) return attr_errorf(c, "axis", "required attribute is missing");
    return attr_int(c, "axis", 0, &out->axis.axis);
}

static sc_status parse_split(const sc_node_ctx *c, sc_attrs *out) {
    SC_TRY(attr_int(c, "axis", 0, &out->axis.axis));
    out->axis.num_outputs = 0;
    if (c->opset >= 18) SC_TRY(attr_int(c, "num_outputs", 0, &out->axis.num_outputs));
    if (out->axis.num_outputs < 0)
        return attr_errorf(c, "num_outputs", "value %lld is negative", (long long)out->axis.num_outputs);
    return SC_OK;
}

static sc_status parse_layer_norm(const sc_node_ctx *c, sc_attrs *out) {
    int64_t stash;
    SC_TRY(attr_int(c, "axis", -1, &out->layer_norm.axis));
    SC_TRY(attr_float(c, "epsilon", 1e-5f, &out->layer_norm.epsilon));
    SC_TRY(attr_int(c, "stash_type", SC_F32, &stash));
    if (stash <= 0 || stash >= SC_DTYPE_MAX || !sc_dtype_is_float((sc_dtype)stash))
        return attr_errorf(c, "stash_type", "value %lld is not a floating-point type", (long long)stash);
    out->layer_norm.stash_type = (sc_dtype)stash;
    return SC_OK;
}

static sc_status parse_transpose(const sc_node_ctx *c, sc_attrs *out) {
    return attr_ints(c, "perm", out->transpose.perm, SC_MAX_RANK, &out->transpose.n_perm);
}

static sc_status parse_gelu(const sc_node_ctx *c, sc_attrs *out) {
    static const char *const modes[] = {"none", "tanh"};
    int m;
    SC_TRY(attr_enum(c, "approximate", modes, 2, 0, &m));
    out->gelu.tanh_approx = m == 1;
    return SC_OK;
}

static sc_status parse_cast(const sc_node_ctx *c, sc_attrs *out) {
    if (!attr_find(c, "to")) return attr_errorf(c, "to", "required attribute is missing");
    int64_t to;
    SC_TRY(attr_int(c, "to", 0, &to));
    if (to <= 0 || to >= SC_DTYPE_MAX || sc_dtype_size((sc_dtype)to) == 0)
        return attr_errorf(c, "to", "data type %lld is not supported", (long long)to);
    out->cast.to = (sc_dtype)to;
    return SC_OK;
}

/* ONNX: "If the input type is floating point, then fmod attribute must be set to 1"; checked by
 * the kernels, which see the type. */
static sc_status parse_mod(const sc_node_ctx *c, sc_attrs *out) {
    int64_t f;
    SC_TRY(attr_int(c, "fmod", 0, &f));
    if (f != 0 && f != 1) return attr_errorf(c, "fmod", "must be 0 or 1, got %lld", (long long)f);
    out->mod.fmod = f == 1;
    return SC_OK;
}

static sc_status parse_scatter_nd(const sc_node_ctx *c, sc_attrs *out) {
    static const char *const modes[] = {"none", "add", "mul", "max", "min"};
    int m;
    SC_TRY(attr_enum(c, "reduction", modes, 5, SC_SCATTER_NONE, &m));
    out->scatter_nd.reduction = (sc_scatter_reduction)m;
    return SC_OK;
}

static sc_status parse_einsum(const sc_node_ctx *c, sc_attrs *out) {
    char eq[256];
    if (!attr_find(c, "equation")) return attr_errorf(c, "equation", "required attribute is missing");
    SC_TRY(attr_string(c, "equation", "", eq, sizeof eq));
    size_t n = 0;
    for (const char *p = eq; *p; p++)
        if (*p != ' ') {
            if (n + 1 >= sizeof out->einsum.equation)
                return attr_errorf(c, "equation", "longer than %zu characters", sizeof out->einsum.equation - 1);
            out->einsum.equation[n++] = *p;
        }
    out->einsum.equation[n] = 0;
    return SC_OK;
}

static sc_status parse_reshape(const sc_node_ctx *c, sc_attrs *out) {
    int64_t az = 0;
    if (c->opset >= 14) SC_TRY(attr_int(c, "allowzero", 0, &az));
    out->reshape.allowzero = az != 0;
    return SC_OK;
}

static sc_status parse_shape(const sc_node_ctx *c, sc_attrs *out) {
    out->shape.has_end = attr_find(c, "end") != NULL;
    SC_TRY(attr_int(c, "start", 0, &out->shape.start));
    return attr_int(c, "end", 0, &out->shape.end);
}

static sc_status parse_dropout(const sc_node_ctx *c, sc_attrs *out) {
    out->dropout.has_seed = attr_find(c, "seed") != NULL;
    return attr_int(c, "seed", 0, &out->dropout.seed);
}

static double scalar_as_double(const sc_tensor *t) {
    switch (t->desc.dtype) {
    case SC_F32: return *(const float *)t->data;
    case SC_F64: return *(const double *)t->data;
    case SC_I64: return (double)*(const int64_t *)t->data;
    case SC_I32: return *(const int32_t *)t->data;
    case SC_I16: return *(const int16_t *)t->data;
    case SC_I8: return *(const int8_t *)t->data;
    case SC_U8: case SC_BOOL: return *(const uint8_t *)t->data;
    case SC_U16: return *(const uint16_t *)t->data;
    case SC_U32: return *(const uint32_t *)t->data;
    case SC_U64: return (double)*(const uint64_t *)t->data;
    default: return 0; /* f16/bf16 rejected by the caller */
    }
}

/* ConstantOfShape's value: a one-element tensor; its dtype is the output's (default f32 0). */
static sc_status parse_fill(const sc_node_ctx *c, sc_attrs *out) {
    out->fill.dtype = SC_F32;
    out->fill.value = 0;
    const Onnx__AttributeProto *a = attr_find(c, "value");
    if (!a) return SC_OK;
    if (!a->t) return attr_errorf(c, "value", "expected a TENSOR");
    sc_tensor_src src = *c->src;
    src.arena = NULL;
    sc_tensor t;
    char what[300];
    snprintf(what, sizeof what, "node '%.200s' (%s): attribute 'value'", c->label, sc_op_name(c->op));
    SC_TRY(onnx_tensor_decode(a->t, what, &src, &t));
    sc_status st = SC_OK;
    if (sc_desc_numel(&t.desc) != 1) st = attr_errorf(c, "value", "must hold exactly one element");
    else if (sc_dtype_is_half(t.desc.dtype))
        st = attr_errorf(c, "value", "data type %s is not supported", sc_dtype_name(t.desc.dtype));
    else {
        out->fill.dtype = t.desc.dtype;
        out->fill.value = scalar_as_double(&t);
    }
    free(t.data);
    return st;
}

static sc_status parse_resize(const sc_node_ctx *c, sc_attrs *out) {
    sc_resize_attrs *r = &out->resize;
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const coords[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                                         "align_corners", "asymmetric", "tf_crop_and_resize"};
    static const char *const nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    static const char *const aspect[] = {"stretch", "not_larger", "not_smaller"};
    int m, ct, nm, ka = 0;
    int64_t excl, anti = 0;
    SC_TRY(attr_enum(c, "mode", modes, 3, SC_RESIZE_NEAREST, &m));
    SC_TRY(attr_enum(c, "coordinate_transformation_mode", coords, 6, SC_CT_HALF_PIXEL, &ct));
    SC_TRY(attr_enum(c, "nearest_mode", nearest, 4, SC_NEAREST_ROUND_PREFER_FLOOR, &nm));
    SC_TRY(attr_float(c, "cubic_coeff_a", -0.75f, &r->cubic_coeff_a));
    SC_TRY(attr_int(c, "exclude_outside", 0, &excl));
    SC_TRY(attr_float(c, "extrapolation_value", 0.0f, &r->extrapolation_value));
    r->n_axes = 0;
    if (c->opset >= 18) {
        SC_TRY(attr_int(c, "antialias", 0, &anti));
        SC_TRY(attr_ints(c, "axes", r->axes, SC_MAX_RANK, &r->n_axes));
        SC_TRY(attr_enum(c, "keep_aspect_ratio_policy", aspect, 3, SC_KEEP_ASPECT_STRETCH, &ka));
    }
    r->mode = (sc_resize_mode)m;
    r->coord = (sc_coord_transform)ct;
    r->nearest_mode = (sc_nearest_mode)nm;
    r->exclude_outside = excl != 0;
    r->antialias = anti != 0;
    r->keep_aspect_ratio_policy = (sc_keep_aspect)ka;
    return SC_OK;
}

static sc_status parse_pad(const sc_node_ctx *c, sc_attrs *out) {
    static const char *const modes[] = {"constant", "reflect", "edge", "wrap"};
    int m;
    SC_TRY(attr_enum(c, "mode", modes, c->opset >= 19 ? 4 : 3, SC_PAD_CONSTANT, &m));
    out->pad.mode = (sc_pad_mode)m;
    return SC_OK;
}

/* SoftmaxCrossEntropyLoss-12: reduction mean|sum|none (default mean), optional ignore_index. */
static sc_status parse_sce(const sc_node_ctx *c, sc_attrs *out) {
    static const char *const reductions[] = {[SC_REDUCTION_MEAN] = "mean", [SC_REDUCTION_SUM] = "sum",
                                             [SC_REDUCTION_NONE] = "none"};
    int r;
    SC_TRY(attr_enum(c, "reduction", reductions, 3, SC_REDUCTION_MEAN, &r));
    out->sce.reduction = (sc_reduction)r;
    out->sce.has_ignore_index = attr_find(c, "ignore_index") != NULL;
    return attr_int(c, "ignore_index", 0, &out->sce.ignore_index);
}

static sc_status parse_gather_nd(const sc_node_ctx *c, sc_attrs *out) {
    SC_TRY(attr_int(c, "batch_dims", 0, &out->gather_nd.batch_dims));
    if (out->gather_nd.batch_dims < 0)
        return attr_errorf(c, "batch_dims", "value %lld is negative", (long long)out->gather_nd.batch_dims);
    return SC_OK;
}

static sc_status parse_sequence(const sc_node_ctx *c, sc_attrs *out) {
    SC_TRY(attr_int(c, "axis", 0, &out->sequence.axis));
    bool split = c->op == SC_OP_SPLIT_TO_SEQUENCE;
    return attr_flag(c, split ? "keepdims" : "new_axis", split, &out->sequence.flag);
}

/* The parsers of the SC_ATTRS rows of graph/ops.def: each field read with its default. */
#define SC_ATTR_FLOAT(name, def) SC_TRY(attr_float(c, #name, def, &a->name));
#define SC_ATTR_INT(name, def) SC_TRY(attr_int(c, #name, def, &a->name));
#define SC_ATTR_FLAG(name, def) SC_TRY(attr_flag(c, #name, def, &a->name));
#define SC_ATTRS(stem, fields)                                              \
    static sc_status parse_##stem(const sc_node_ctx *c, sc_attrs *out) {    \
        sc_##stem##_attrs *a = &out->stem;                                  \
        fields return SC_OK;                                                \
    }
#include "graph/ops.def"
#undef SC_ATTRS
#undef SC_ATTR_FLOAT
#undef SC_ATTR_INT
#undef SC_ATTR_FLAG

/* Generated from the ops.def rows. Internal ops (ops_train.def) never come from a file, so they have no
 * parser; Constant has none either (the importer turns it into a value). */
#define parse_unparsed NULL
const sc_attr_parser sc_attr_parsers[SC_OP_COUNT] = {
#define SC_OP(id, name, min_in, max_in, min_out, max_out, family, attrs, ...) [SC_OP_##id] = parse_##attrs,
#include "graph/ops.def"
#undef SC_OP
};
#undef parse_unparsed

const char *attrs_parser_missing_reason(sc_op op) {
    switch (op) {
    case SC_OP_CONSTANT: return "Constant nodes are turned into constant values by the importer";
    case SC_OP_LOOP:
    case SC_OP_IF: return "the importer builds the subgraphs of Loop and If itself (import/onnx_graph.c)";
    default: return sc_op_is_internal(op) ? "internal op (graph/ops_train.def): never read from a file" : NULL;
    }
}
