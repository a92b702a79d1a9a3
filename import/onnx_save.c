/* Graph parameters -> ONNX file (import/onnx.h).
 *
 * The model's kept serialized bytes are unpacked again and written back unchanged except for initializer data: each initializer gets
 * the bytes of the graph value of the same name as raw_data (typed fields and external data cleared),
 * or, past external_threshold, a slice of one "<basename>.data" file beside the output. Unknown
 * fields survive because protobuf-c repacks them. The initializers' fields are swapped in only for
 * packing and restored before the unpacked copy is freed (protobuf-c frees what the fields point
 * to). An initializer that graph passes removed keeps its original data (decoded from
 * the model, external data included, and rewritten as raw bytes or into the new data file).
 * Both files are written atomically (sc_write_file_atomic); the data file first, so a crash never
 * leaves a model pointing at a missing data file.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/onnx.h"
#include "import/onnx_internal.h"

/* The fields of one initializer that saving replaces, kept to restore them. */
typedef struct {
    ProtobufCBinaryData raw_data;
    protobuf_c_boolean has_raw_data, has_data_location;
    Onnx__TensorProto__DataLocation data_location;
    size_t n_float_data, n_int32_data, n_int64_data, n_double_data, n_uint64_data, n_string_data, n_external_data;
    Onnx__StringStringEntryProto **external_data;
} saved_fields;

typedef struct {
    Onnx__StringStringEntryProto entries[3], *ptrs[3];
    char offset[24], length[24];
} external_ref;

typedef struct {
    const sc_model *m;
    const Onnx__ModelProto *mp; /* unpacked for this save */
    size_t n;
    saved_fields *saved;
    void **owned;          /* data decoded from the original model for initializers the graph lost */
    external_ref *refs;
    uint8_t *ext;          /* contents of the data file */
    size_t ext_size, ext_cap;
    char *location;        /* bare file name of the data file */
} save_ctx;

static void fields_save(const Onnx__TensorProto *t, saved_fields *s) {
    s->raw_data = t->raw_data;
    s->has_raw_data = t->has_raw_data;
    s->has_data_location = t->has_data_location;
    s->data_location = t->data_location;
    s->n_float_data = t->n_float_data;
    s->n_int32_data = t->n_int32_data;
    s->n_int64_data = t->n_int64_data;
    s->n_double_data = t->n_double_data;
    s->n_uint64_data = t->n_uint64_data;
    s->n_string_data = t->n_string_data;
    s->n_external_data = t->n_external_data;
    s->external_data = t->external_data;
}

static void fields_restore(Onnx__TensorProto *t, const saved_fields *s) {
    t->raw_data = s->raw_data;
    t->has_raw_data = s->has_raw_data;
    t->has_data_location = s->has_data_location;
    t->data_location = s->data_location;
    t->n_float_data = s->n_float_data;
    t->n_int32_data = s->n_int32_data;
    t->n_int64_data = s->n_int64_data;
    t->n_double_data = s->n_double_data;
    t->n_uint64_data = s->n_uint64_data;
    t->n_string_data = s->n_string_data;
    t->n_external_data = s->n_external_data;
    t->external_data = s->external_data;
}

/* The bytes to write for initializer i: the graph value's, or the original decoded. */
static sc_status initializer_bytes(save_ctx *c, size_t i, const Onnx__TensorProto *t, const void **data,
                                   size_t *bytes) {
    char what[300];
    snprintf(what, sizeof what, "initializer '%.256s'", t->name ? t->name : "");
    sc_desc file_desc;
    SC_TRY(onnx_tensor_desc(t, what, &file_desc));
    int id = t->name ? graph_find_value((sc_graph *)&c->m->graph, t->name) : -1;
    const sc_value *v = id >= 0 ? &c->m->graph.values[id] : NULL;
    if (v && v->data) {
        char a[96], b[96];
        if (v->desc.dtype != file_desc.dtype || sc_desc_numel(&v->desc) != sc_desc_numel(&file_desc))
            return sc_errorf("%s: graph value is %s but the file declares %s", what, sc_desc_str(&v->desc, a, sizeof a),
                             sc_desc_str(&file_desc, b, sizeof b));
        *data = v->data;
        *bytes = (size_t)sc_desc_bytes(&file_desc);
        return SC_OK;
    }
    sc_tensor_src src = {.dir = c->m->dir, .max_inline = SIZE_MAX, .arena = NULL};
    sc_tensor tensor;
    SC_TRY(onnx_tensor_decode(t, what, &src, &tensor));
    c->owned[i] = tensor.data;
    *data = tensor.data;
    *bytes = (size_t)sc_desc_bytes(&tensor.desc);
    return SC_OK;
}

static sc_status ext_append(save_ctx *c, const void *data, size_t bytes, size_t *offset) {
    /* 4096-byte alignment, as onnx.proto recommends for mmap-able external data. */
    size_t start = (c->ext_size + 4095) & ~(size_t)4095;
    if (start + bytes > c->ext_cap) {
        size_t cap = c->ext_cap ? c->ext_cap : (1u << 20);
        while (cap < start + bytes) cap *= 2;
        uint8_t *p = realloc(c->ext, cap);
        if (!p) return sc_errorf("out of memory building external data (%zu bytes)", cap);
        c->ext = p;
        c->ext_cap = cap;
    }
    memset(c->ext + c->ext_size, 0, start - c->ext_size);
    memcpy(c->ext + start, data, bytes);
    c->ext_size = start + bytes;
    *offset = start;
    return SC_OK;
}

static void set_external(save_ctx *c, Onnx__TensorProto *t, size_t i, size_t offset, size_t bytes) {
    external_ref *r = &c->refs[i];
    snprintf(r->offset, sizeof r->offset, "%zu", offset);
    snprintf(r->length, sizeof r->length, "%zu", bytes);
    const char *keys[3] = {"location", "offset", "length"};
    char *vals[3] = {c->location, r->offset, r->length};
    for (int k = 0; k < 3; k++) {
        Onnx__StringStringEntryProto init = ONNX__STRING_STRING_ENTRY_PROTO__INIT;
        r->entries[k] = init;
        r->entries[k].key = (char *)keys[k];
        r->entries[k].value = vals[k];
        r->ptrs[k] = &r->entries[k];
    }
    t->has_raw_data = 0;
    t->raw_data.len = 0;
    t->raw_data.data = NULL;
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    t->n_external_data = 3;
    t->external_data = r->ptrs;
}

static sc_status swap_in(save_ctx *c, int64_t threshold) {
    Onnx__GraphProto *gp = c->mp->graph;
    for (size_t i = 0; i < c->n; i++) {
        Onnx__TensorProto *t = gp->initializer[i];
        const void *data = NULL;
        size_t bytes = 0;
        SC_TRY(initializer_bytes(c, i, t, &data, &bytes));
        t->n_float_data = t->n_int32_data = t->n_int64_data = t->n_double_data = 0;
        t->n_uint64_data = t->n_string_data = t->n_external_data = 0;
        t->external_data = NULL;
        t->has_data_location = 0;
        t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT;
        if (threshold > 0 && bytes > (uint64_t)threshold) {
            size_t offset = 0;
            SC_TRY(ext_append(c, data, bytes, &offset));
            set_external(c, t, i, offset, bytes);
        } else {
            t->has_raw_data = 1;
            t->raw_data.len = bytes;
            t->raw_data.data = (uint8_t *)data; /* only read by pack */
        }
    }
    return SC_OK;
}

static sc_status pack_and_write(save_ctx *c, const char *path) {
    const Onnx__ModelProto *mp = c->mp;
    size_t size = onnx__model_proto__get_packed_size(mp);
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return sc_errorf("out of memory packing %zu bytes", size);
    size_t packed = onnx__model_proto__pack(mp, buf);
    SC_ASSERT(packed == size);
    sc_status st = SC_OK;
    if (c->ext_size) {
        size_t len = strlen(path) + 6;
        char *data_path = malloc(len);
        if (!data_path) st = sc_errorf("out of memory");
        else {
            snprintf(data_path, len, "%s.data", path);
            st = sc_write_file_atomic(data_path, c->ext, c->ext_size);
            free(data_path);
        }
    }
    if (!st) st = sc_write_file_atomic(path, buf, size);
    free(buf);
    return st;
}

sc_status sc_model_save(const sc_model *m, const char *path, int64_t external_threshold) {
    SC_ASSERT(m->proto_bytes);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (!*base) return sc_errorf("%s: not a file name", path);
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, m->proto_size, m->proto_bytes);
    if (!mp || !mp->graph) {
        if (mp) onnx__model_proto__free_unpacked(mp, NULL);
        return sc_errorf("%s: out of memory unpacking the model to save it", path);
    }
    save_ctx c = {.m = m, .mp = mp, .n = mp->graph->n_initializer};
    size_t len = strlen(base) + 6;
    c.location = malloc(len);
    c.saved = calloc(c.n + 1, sizeof *c.saved);
    c.owned = calloc(c.n + 1, sizeof *c.owned);
    c.refs = calloc(c.n + 1, sizeof *c.refs);
    sc_status st = SC_OK;
    if (!c.location || !c.saved || !c.owned || !c.refs) st = sc_errorf("out of memory");
    if (!st) {
        snprintf(c.location, len, "%s.data", base);
        for (size_t i = 0; i < c.n; i++) fields_save(mp->graph->initializer[i], &c.saved[i]);
        st = swap_in(&c, external_threshold);
        if (!st) st = pack_and_write(&c, path);
        for (size_t i = 0; i < c.n; i++) fields_restore(mp->graph->initializer[i], &c.saved[i]);
    }
    for (size_t i = 0; c.owned && i < c.n; i++) free(c.owned[i]);
    free(c.owned);
    free(c.saved);
    free(c.refs);
    free(c.ext);
    free(c.location);
    onnx__model_proto__free_unpacked(mp, NULL);
    return sc_status_prefix(st, "%s: ", path);
}
