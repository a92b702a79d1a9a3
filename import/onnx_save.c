/* Graph parameters -> ONNX file (import/onnx.h).
 *
 * The model's kept serialized bytes are written back unchanged except for initializer data: each
 * initializer gets the bytes of the graph value of the same name as raw_data (typed fields and
 * external data cleared), or, past external_threshold, a slice of one "<basename>.data" file beside
 * the output. The bytes are rewritten as a stream: every field of the ModelProto and of its graph is
 * copied as it is (unknown fields included), and only each initializer is unpacked, alone, to swap
 * its data fields in, be packed and have its fields restored (protobuf-c frees what they point to).
 * Unpacking the whole model instead took about 5 GB of protobuf-c messages at depth 250000. An
 * initializer that graph passes removed keeps its original data (decoded from the model, external
 * data included, and rewritten as raw bytes or into the new data file). Both files are written
 * atomically (sc_write_file_atomic); the data file first, so a crash never leaves a model pointing
 * at a missing data file.
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
    int64_t threshold;
    uint32_t graph_field, initializer_field;
    onnx_buf out;          /* the model being written */
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
/* *owned: data decoded here, for the caller to free. */
static sc_status initializer_bytes(const save_ctx *c, const Onnx__TensorProto *t, const void **data, size_t *bytes,
                                   void **owned) {
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
    *owned = tensor.data;
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

static void set_external(const save_ctx *c, Onnx__TensorProto *t, external_ref *r, size_t offset, size_t bytes) {
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

/* Points t's data fields at its bytes to write (raw, or a slice of the data file through r). */
static sc_status swap_in(save_ctx *c, Onnx__TensorProto *t, external_ref *r, void **owned) {
    const void *data = NULL;
    size_t bytes = 0;
    SC_TRY(initializer_bytes(c, t, &data, &bytes, owned));
    t->n_float_data = t->n_int32_data = t->n_int64_data = t->n_double_data = 0;
    t->n_uint64_data = t->n_string_data = t->n_external_data = 0;
    t->external_data = NULL;
    t->has_data_location = 0;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT;
    if (c->threshold > 0 && bytes > (uint64_t)c->threshold) {
        size_t offset = 0;
        SC_TRY(ext_append(c, data, bytes, &offset));
        set_external(c, t, r, offset, bytes);
    } else {
        t->has_raw_data = 1;
        t->raw_data.len = bytes;
        t->raw_data.data = (uint8_t *)data; /* only read by pack */
    }
    return SC_OK;
}

/* One initializer field f: unpacked alone, its data swapped in, packed into c->out. */
static sc_status initializer_write(save_ctx *c, const onnx_wire_field *f) {
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, f->size, f->data);
    if (!t) return sc_errorf("out of memory unpacking an initializer to save it");
    saved_fields saved;
    fields_save(t, &saved);
    external_ref ref;
    void *owned = NULL;
    sc_status st = swap_in(c, t, &ref, &owned);
    if (!st) {
        size_t size = onnx__tensor_proto__get_packed_size(t);
        if (!onnx_buf_put_len_header(&c->out, c->initializer_field, size) || !onnx_buf_reserve(&c->out, size))
            st = sc_errorf("out of memory packing initializer '%s'", t->name ? t->name : "");
        else
            c->out.n += onnx__tensor_proto__pack(t, c->out.p + c->out.n);
    }
    fields_restore(t, &saved);
    free(owned);
    onnx__tensor_proto__free_unpacked(t, NULL);
    return st;
}

/* Copies the fields of [p, end) to c->out, rewriting the initializers (wire 2, field `number`). */
static sc_status fields_write(save_ctx *c, const uint8_t *p, const uint8_t *end, bool graph) {
    onnx_wire_field f;
    while (onnx_wire_next(&p, end, &f)) {
        sc_status st = SC_OK;
        if (f.wire == 2 && !graph && f.number == c->graph_field) {
            /* The graph's length changes: written after a placeholder, then moved up behind its
             * real header (one memmove of the graph, not a second buffer). */
            size_t at = c->out.n;
            uint8_t room[16] = {0};
            if (!onnx_buf_put(&c->out, room, sizeof room)) return sc_errorf("out of memory");
            SC_TRY(fields_write(c, f.data, f.data + f.size, true));
            size_t len = c->out.n - at - sizeof room;
            onnx_buf head = {0};
            if (!onnx_buf_put_len_header(&head, c->graph_field, len)) return sc_errorf("out of memory");
            memcpy(c->out.p + at, head.p, head.n);
            memmove(c->out.p + at + head.n, c->out.p + at + sizeof room, len);
            c->out.n = at + head.n + len;
            free(head.p);
        } else if (f.wire == 2 && graph && f.number == c->initializer_field) {
            st = initializer_write(c, &f);
        } else if (!onnx_buf_put(&c->out, f.start, (size_t)(f.end - f.start))) {
            st = sc_errorf("out of memory");
        }
        SC_TRY(st);
    }
    return p == end ? SC_OK : sc_errorf("the model's kept bytes do not parse");
}

static sc_status files_write(save_ctx *c, const char *path) {
    if (c->ext_size) {
        size_t len = strlen(path) + 6;
        char *data_path = malloc(len);
        if (!data_path) return sc_errorf("out of memory");
        snprintf(data_path, len, "%s.data", path);
        sc_status st = sc_write_file_atomic(data_path, c->ext, c->ext_size);
        free(data_path);
        SC_TRY(st);
    }
    return sc_write_file_atomic(path, c->out.p, c->out.n);
}

sc_status sc_model_save(const sc_model *m, const char *path, int64_t external_threshold) {
    SC_ASSERT(m->proto_bytes);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (!*base) return sc_errorf("%s: not a file name", path);
    save_ctx c = {.m = m,
                  .threshold = external_threshold,
                  .graph_field = onnx_field_number(&onnx__model_proto__descriptor, "graph"),
                  .initializer_field = onnx_field_number(&onnx__graph_proto__descriptor, "initializer")};
    size_t len = strlen(base) + 6;
    c.location = malloc(len);
    sc_status st = c.location && onnx_buf_reserve(&c.out, m->proto_size + 64) ? SC_OK : sc_errorf("out of memory");
    if (!st) {
        snprintf(c.location, len, "%s.data", base);
        const uint8_t *p = m->proto_bytes;
        st = fields_write(&c, p, p + m->proto_size, false);
    }
    if (!st) st = files_write(&c, path);
    free(c.out.p);
    free(c.ext);
    free(c.location);
    return sc_status_prefix(st, "%s: ", path);
}
