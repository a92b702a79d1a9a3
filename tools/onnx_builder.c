/* ONNX model builder (see onnx_builder.h for the memory and external-data contract). */
#include "tools/onnx_builder.h"

#include "core/free_all.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "import/onnx.h"

#define ONNXB_CHUNK (1u << 20)
#define ONNXB_EXT_ALIGN 4096

typedef struct onnxb_chunk {
    struct onnxb_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
} onnxb_chunk;

/* A growable array of pointers (node, initializer, input and output lists). */
typedef struct {
    void **items;
    size_t n, cap;
} ptr_list;

struct onnxb {
    onnxb_options opt;
    char *out_path, *data_path, *data_tmp, *data_location;
    onnxb_chunk *chunks;
    sc_status err;
    ptr_list nodes, inits, inputs, outputs;
    int64_t inline_bytes, n_params, n_auto_names;
    int data_fd; /* -1 until the first external tensor */
    int64_t data_off;
    Onnx__GraphProto graph;
    const char *graph_name;
};

void onnxb_fail(onnxb *b, sc_status st) {
    if (!b->err)
        b->err = st;
    else
        sc_status_free(st);
}

static void *balloc(onnxb *b, size_t size) {
    if (b->err) return NULL;
    size = (size + 15) & ~(size_t)15;
    onnxb_chunk *c = b->chunks;
    if (!c || c->cap - c->used < size) {
        size_t cap = size > ONNXB_CHUNK / 4 ? size : ONNXB_CHUNK;
        c = malloc(sizeof *c + cap);
        if (!c) {
            onnxb_fail(b, sc_errorf("%s: out of memory building the model", b->out_path));
            return NULL;
        }
        c->used = 0;
        c->cap = cap;
        /* Big one-off blocks go behind the current chunk so it keeps filling. */
        if (cap > ONNXB_CHUNK && b->chunks) {
            c->next = b->chunks->next;
            b->chunks->next = c;
        } else {
            c->next = b->chunks;
            b->chunks = c;
        }
    }
    void *p = c->mem + c->used;
    c->used += size;
    memset(p, 0, size);
    return p;
}

static char *bstrdup(onnxb *b, const char *s) {
    size_t n = strlen(s) + 1;
    char *p = balloc(b, n);
    if (p) memcpy(p, s, n);
    return p;
}

static void list_push(onnxb *b, ptr_list *l, void *item) {
    if (b->err) return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        void **items = realloc(l->items, cap * sizeof *items);
        if (!items) {
            onnxb_fail(b, sc_errorf("%s: out of memory building the model", b->out_path));
            return;
        }
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = item;
}

onnxb *onnxb_new(const char *out_path, const char *graph_name, const onnxb_options *opt) {
    onnxb *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->opt.external_threshold = 1024;
    b->opt.inline_limit = (int64_t)3 << 29; /* 1.5 GiB: protobuf messages must stay under 2 GiB */
    if (opt) {
        if (opt->external_threshold > 0) b->opt.external_threshold = opt->external_threshold;
        if (opt->inline_limit > 0) b->opt.inline_limit = opt->inline_limit;
        b->opt.force_external = opt->force_external;
    }
    b->data_fd = -1;
    size_t n = strlen(out_path);
    b->out_path = strdup(out_path);
    b->data_path = malloc(n + 6);
    b->data_tmp = malloc(n + 32);
    if (!b->out_path || !b->data_path || !b->data_tmp) {
        onnxb_free(b);
        return NULL;
    }
    snprintf(b->data_path, n + 6, "%s.data", out_path);
    snprintf(b->data_tmp, n + 32, "%s.data.tmp.%ld", out_path, (long)getpid());
    const char *slash = strrchr(b->data_path, '/');
    b->data_location = slash ? (char *)slash + 1 : b->data_path;
    onnx__graph_proto__init(&b->graph);
    b->graph_name = bstrdup(b, graph_name);
    return b;
}

void onnxb_free(onnxb *b) {
    if (!b) return;
    if (b->data_fd >= 0) {
        close(b->data_fd);
        unlink(b->data_tmp);
    }
    for (size_t i = 0; i < b->inits.n; i++) free(((Onnx__TensorProto *)b->inits.items[i])->raw_data.data);
    SC_FREE_ALL(b->nodes.items, b->inits.items, b->inputs.items, b->outputs.items);
    while (b->chunks) {
        onnxb_chunk *next = b->chunks->next;
        free(b->chunks);
        b->chunks = next;
    }
    sc_status_free(b->err);
    SC_FREE_ALL(b->out_path, b->data_path, b->data_tmp, b);
}

sc_status onnxb_error(const onnxb *b) { return b->err; }
int64_t onnxb_param_count(const onnxb *b) { return b->n_params; }
int64_t onnxb_node_count(const onnxb *b) { return (int64_t)b->nodes.n; }
bool onnxb_has_external(const onnxb *b) { return b->data_fd != -1; }

const char *onnxb_name(onnxb *b, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof buf) {
        onnxb_fail(b, sc_errorf("%s: generated name too long", b->out_path));
        return "";
    }
    char *s = bstrdup(b, buf);
    return s ? s : "";
}

/* ---- types ---- */

static Onnx__ValueInfoProto *value_info(onnxb *b, const char *name, sc_dtype t, int rank, const int64_t *dims,
                                        const char *const *dim_params) {
    Onnx__ValueInfoProto *vi = balloc(b, sizeof *vi);
    Onnx__TypeProto *tp = balloc(b, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = balloc(b, sizeof *tt);
    Onnx__TensorShapeProto *sh = balloc(b, sizeof *sh);
    Onnx__TensorShapeProto__Dimension **dv = balloc(b, sizeof *dv * (size_t)(rank ? rank : 1));
    if (b->err) return NULL;
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sh);
    for (int i = 0; i < rank; i++) {
        Onnx__TensorShapeProto__Dimension *d = balloc(b, sizeof *d);
        if (!d) return NULL;
        onnx__tensor_shape_proto__dimension__init(d);
        if (dims[i] >= 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = dims[i];
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = bstrdup(b, dim_params && dim_params[i] ? dim_params[i] : "unk");
        }
        dv[i] = d;
    }
    sh->n_dim = (size_t)rank;
    sh->dim = dv;
    tt->has_elem_type = 1;
    tt->elem_type = (int32_t)t;
    tt->shape = sh;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->name = bstrdup(b, name);
    vi->type = tp;
    return vi;
}

void onnxb_input(onnxb *b, const char *name, sc_dtype t, int rank, const int64_t *dims, const char *const *dim_params) {
    Onnx__ValueInfoProto *vi = value_info(b, name, t, rank, dims, dim_params);
    if (vi) list_push(b, &b->inputs, vi);
}

void onnxb_output(onnxb *b, const char *name, sc_dtype t, int rank, const int64_t *dims,
                  const char *const *dim_params) {
    Onnx__ValueInfoProto *vi = value_info(b, name, t, rank, dims, dim_params);
    if (vi) list_push(b, &b->outputs, vi);
}

/* ---- nodes and attributes ---- */

Onnx__NodeProto *onnxb_node(onnxb *b, const char *op, const char *name, const char *const *in, int n_in,
                            const char *const *out, int n_out) {
    Onnx__NodeProto *n = balloc(b, sizeof *n);
    char **iv = balloc(b, sizeof *iv * (size_t)(n_in ? n_in : 1));
    char **ov = balloc(b, sizeof *ov * (size_t)(n_out ? n_out : 1));
    if (b->err) return NULL;
    onnx__node_proto__init(n);
    for (int i = 0; i < n_in; i++) iv[i] = bstrdup(b, in[i]);
    for (int i = 0; i < n_out; i++) ov[i] = bstrdup(b, out[i]);
    n->n_input = (size_t)n_in;
    n->input = iv;
    n->n_output = (size_t)n_out;
    n->output = ov;
    n->op_type = bstrdup(b, op);
    n->name = name ? bstrdup(b, name) : (char *)onnxb_name(b, "%s_%lld", op, (long long)b->n_auto_names++);
    list_push(b, &b->nodes, n);
    return b->err ? NULL : n;
}

static Onnx__AttributeProto *attr_add(onnxb *b, Onnx__NodeProto *n, const char *name,
                                      Onnx__AttributeProto__AttributeType type) {
    if (!n || b->err) return NULL;
    Onnx__AttributeProto *a = balloc(b, sizeof *a);
    Onnx__AttributeProto **list = balloc(b, sizeof *list * (n->n_attribute + 1));
    if (b->err) return NULL;
    onnx__attribute_proto__init(a);
    a->name = bstrdup(b, name);
    a->has_type = 1;
    a->type = type;
    /* Nodes carry a handful of attributes: copying the list on each add stays cheap. */
    if (n->n_attribute) memcpy(list, n->attribute, sizeof *list * n->n_attribute);
    list[n->n_attribute++] = a;
    n->attribute = list;
    return a;
}

void onnxb_attr_int(onnxb *b, Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = attr_add(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (!a) return;
    a->has_i = 1;
    a->i = v;
}

/* An attribute holding a copy of count elements of type T in its repeated field FIELD (n_FIELD, FIELD). */
#define ONNXB_ATTR_ARRAY(fn, T, TYPE, FIELD)                                                            \
    void fn(onnxb *b, Onnx__NodeProto *n, const char *name, const T *v, int count) {                     \
        Onnx__AttributeProto *a = attr_add(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__##TYPE);  \
        T *dst = a ? balloc(b, sizeof *dst * (size_t)(count ? count : 1)) : NULL;                        \
        if (!dst) return;                                                                                \
        if (count) memcpy(dst, v, sizeof *dst * (size_t)count);                                          \
        a->n_##FIELD = (size_t)count;                                                                    \
        a->FIELD = dst;                                                                                  \
    }
ONNXB_ATTR_ARRAY(onnxb_attr_ints, int64_t, INTS, ints)
ONNXB_ATTR_ARRAY(onnxb_attr_floats, float, FLOATS, floats)

void onnxb_attr_float(onnxb *b, Onnx__NodeProto *n, const char *name, float v) {
    Onnx__AttributeProto *a = attr_add(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (!a) return;
    a->has_f = 1;
    a->f = v;
}

void onnxb_attr_string(onnxb *b, Onnx__NodeProto *n, const char *name, const char *v) {
    Onnx__AttributeProto *a = attr_add(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    char *s = a ? bstrdup(b, v) : NULL;
    if (!s) return;
    a->has_s = 1;
    a->s.len = strlen(v);
    a->s.data = (uint8_t *)s;
}

static Onnx__TensorProto *tensor_new(onnxb *b, const char *name, sc_dtype t, int rank, const int64_t *dims) {
    Onnx__TensorProto *tp = balloc(b, sizeof *tp);
    int64_t *dv = balloc(b, sizeof *dv * (size_t)(rank ? rank : 1));
    if (b->err) return NULL;
    onnx__tensor_proto__init(tp);
    if (rank) memcpy(dv, dims, sizeof *dv * (size_t)rank);
    tp->n_dims = (size_t)rank;
    tp->dims = dv;
    tp->has_data_type = 1;
    tp->data_type = (int32_t)t;
    tp->name = name ? bstrdup(b, name) : NULL;
    return tp;
}

static int64_t numel_of(int rank, const int64_t *dims) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    return n;
}

void onnxb_attr_tensor(onnxb *b, Onnx__NodeProto *n, const char *name, sc_dtype t, int rank, const int64_t *dims,
                       const void *data) {
    Onnx__AttributeProto *a = attr_add(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    Onnx__TensorProto *tp = a ? tensor_new(b, NULL, t, rank, dims) : NULL;
    size_t bytes = (size_t)numel_of(rank, dims) * sc_dtype_size(t);
    void *copy = tp ? balloc(b, bytes ? bytes : 1) : NULL;
    if (!copy) return;
    memcpy(copy, data, bytes);
    tp->has_raw_data = 1;
    tp->raw_data.len = bytes;
    tp->raw_data.data = copy;
    a->t = tp;
}

const char *onnxb_const(onnxb *b, const char *name, sc_dtype t, int rank, const int64_t *dims, const void *data) {
    const char *out[1] = {name};
    Onnx__NodeProto *n = onnxb_node(b, "Constant", onnxb_name(b, "%s_const", name), NULL, 0, out, 1);
    onnxb_attr_tensor(b, n, "value", t, rank, dims, data);
    return name;
}

const char *onnxb_const_i64(onnxb *b, const char *name, int count, const int64_t *v) {
    int64_t dims[1] = {count};
    return onnxb_const(b, name, SC_I64, 1, dims, v);
}

const char *onnxb_const_f32_scalar(onnxb *b, const char *name, float v) {
    return onnxb_const(b, name, SC_F32, 0, NULL, &v);
}

/* ---- initializers and external data ---- */

static void write_all(onnxb *b, const void *data, size_t size) {
    const char *p = data;
    while (size && !b->err) {
        ssize_t n = write(b->data_fd, p, size > (1u << 30) ? (1u << 30) : size);
        if (n < 0) {
            if (errno == EINTR) continue;
            onnxb_fail(b, sc_errorf("%s: write failed: %s", b->data_tmp, strerror(errno)));
            return;
        }
        p += n;
        size -= (size_t)n;
    }
}

static void ext_entry(onnxb *b, Onnx__StringStringEntryProto **slot, const char *key, const char *value) {
    Onnx__StringStringEntryProto *e = balloc(b, sizeof *e);
    if (!e) return;
    onnx__string_string_entry_proto__init(e);
    e->key = bstrdup(b, key);
    e->value = bstrdup(b, value);
    *slot = e;
}

/* Appends tp's raw_data to the data file, points tp at it and frees the buffer. Inline initializers
 * always own their raw_data (a malloc'd buffer handed to onnxb_param). */
static void tensor_externalise(onnxb *b, Onnx__TensorProto *tp) {
    if (b->err) return;
    if (b->data_fd < 0) {
        b->data_fd = open(b->data_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (b->data_fd < 0) {
            onnxb_fail(b, sc_errorf("%s: cannot create external data file: %s", b->data_tmp, strerror(errno)));
            return;
        }
    }
    static const unsigned char zeros[ONNXB_EXT_ALIGN];
    int64_t pad = (ONNXB_EXT_ALIGN - b->data_off % ONNXB_EXT_ALIGN) % ONNXB_EXT_ALIGN;
    write_all(b, zeros, (size_t)pad);
    b->data_off += pad;
    int64_t len = (int64_t)tp->raw_data.len;
    write_all(b, tp->raw_data.data, (size_t)len);
    Onnx__StringStringEntryProto **ents = balloc(b, sizeof *ents * 3);
    if (b->err) return;
    char num[32];
    ext_entry(b, &ents[0], "location", b->data_location);
    snprintf(num, sizeof num, "%lld", (long long)b->data_off);
    ext_entry(b, &ents[1], "offset", num);
    snprintf(num, sizeof num, "%lld", (long long)len);
    ext_entry(b, &ents[2], "length", num);
    b->data_off += len;
    tp->n_external_data = 3;
    tp->external_data = ents;
    tp->has_data_location = 1;
    tp->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    tp->has_raw_data = 0;
    free(tp->raw_data.data);
    tp->raw_data.data = NULL;
    tp->raw_data.len = 0;
    b->inline_bytes -= len;
}

/* Once a model has gone external, every later big tensor follows (the inline part stays small). */
static bool ext_mode(const onnxb *b) {
    return b->opt.force_external || b->data_fd != -1 || b->inline_bytes > b->opt.inline_limit;
}

/* Switching to external mode moves every big inline tensor held so far to the data file. */
static void externalise_held(onnxb *b) {
    for (size_t i = 0; i < b->inits.n && !b->err; i++) {
        Onnx__TensorProto *tp = b->inits.items[i];
        if (tp->has_raw_data && (int64_t)tp->raw_data.len >= b->opt.external_threshold) tensor_externalise(b, tp);
    }
}

const char *onnxb_param(onnxb *b, const char *name, int rank, const int64_t *dims, float *data) {
    Onnx__TensorProto *tp = b->err ? NULL : tensor_new(b, name, SC_F32, rank, dims);
    if (!tp) {
        free(data);
        return name;
    }
    int64_t n = numel_of(rank, dims);
    tp->has_raw_data = 1;
    tp->raw_data.len = (size_t)n * sizeof(float);
    tp->raw_data.data = (uint8_t *)data;
    list_push(b, &b->inits, tp);
    if (b->err) {
        free(data);
        return name;
    }
    b->n_params += n;
    b->inline_bytes += (int64_t)tp->raw_data.len;
    if (ext_mode(b) && (int64_t)tp->raw_data.len >= b->opt.external_threshold) {
        if (b->data_fd == -1 && !b->opt.force_external)
            externalise_held(b); /* first switch: includes this tensor */
        else
            tensor_externalise(b, tp);
    }
    return name;
}

static Onnx__OperatorSetIdProto default_opset(void) {
    Onnx__OperatorSetIdProto o = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    o.domain = "";
    o.has_version = 1;
    o.version = ONNXB_OPSET;
    return o;
}

static sc_status data_file_commit(onnxb *b) {
    if (b->data_fd < 0) return SC_OK;
    sc_status st = SC_OK;
    if (fsync(b->data_fd) != 0) st = sc_errorf("%s: fsync failed: %s", b->data_tmp, strerror(errno));
    if (close(b->data_fd) != 0 && !st) st = sc_errorf("%s: close failed: %s", b->data_tmp, strerror(errno));
    b->data_fd = -2; /* closed, but the model has external data */
    if (!st && rename(b->data_tmp, b->data_path) != 0)
        st = sc_errorf("%s: cannot rename %s into place: %s", b->data_path, b->data_tmp, strerror(errno));
    if (st) unlink(b->data_tmp);
    return st;
}

sc_status onnxb_save(onnxb *b) {
    if (b->err) {
        sc_status st = b->err;
        b->err = NULL;
        return st;
    }
    Onnx__GraphProto *g = &b->graph;
    g->name = (char *)b->graph_name;
    g->n_node = b->nodes.n;
    g->node = (Onnx__NodeProto **)b->nodes.items;
    g->n_initializer = b->inits.n;
    g->initializer = (Onnx__TensorProto **)b->inits.items;
    g->n_input = b->inputs.n;
    g->input = (Onnx__ValueInfoProto **)b->inputs.items;
    g->n_output = b->outputs.n;
    g->output = (Onnx__ValueInfoProto **)b->outputs.items;

    Onnx__OperatorSetIdProto opset = default_opset();
    Onnx__OperatorSetIdProto *opsets[1] = {&opset};
    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    m.has_ir_version = 1;
    m.ir_version = ONNXB_IR_VERSION;
    m.n_opset_import = 1;
    m.opset_import = opsets;
    m.producer_name = "scorch";
    m.producer_version = "0.1.0";
    m.graph = g;

    size_t size = onnx__model_proto__get_packed_size(&m);
    if (size >= ((size_t)1 << 31))
        return sc_errorf("%s: model is %zu bytes, over protobuf's 2 GiB limit; lower the external data threshold",
                         b->out_path, size);
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return sc_errorf("%s: out of memory packing %zu bytes", b->out_path, size);
    size_t packed = onnx__model_proto__pack(&m, buf);
    SC_ASSERT(packed == size);
    /* Inline weights are now in buf: release them before writing, so they are held twice only
     * during packing. */
    for (size_t i = 0; i < b->inits.n; i++) {
        Onnx__TensorProto *tp = b->inits.items[i];
        free(tp->raw_data.data);
        tp->raw_data.data = NULL;
        tp->raw_data.len = 0;
    }
    sc_status st = data_file_commit(b);
    if (!st) st = sc_write_file_atomic(b->out_path, buf, size);
    free(buf);
    return st;
}
