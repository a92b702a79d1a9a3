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
 * data included, and rewritten as raw bytes or into the new data file).
 *
 * Nothing the size of the model is held in memory (a model whose weights and optimizer
 * state fill the host cannot afford a second copy of the weights at save). Two passes walk the
 * kept bytes: the first only counts, to learn the length of the graph field (written before the
 * graph) and the data file's offsets; the second streams both files to disk, each initializer
 * packed straight into the file (protobuf_c_message_pack_to_buffer). Both files are written
 * atomically (sc_atomic_file); the data file first, so a crash never leaves a model pointing at a
 * missing data file.
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
    bool writing;          /* second pass: bytes go to the files; first pass: only counted */
    sc_atomic_file out;    /* the model (second pass) */
    sc_atomic_file ext;    /* the data file (second pass, when the first found external data) */
    uint64_t out_n;        /* bytes of the model so far */
    uint64_t ext_size;     /* bytes of the data file so far */
    size_t *graph_len;     /* length of each graph field, from the first pass */
    size_t n_graph_len, graph_at;
    char *location;        /* bare file name of the data file */
} save_ctx;

static void emit(save_ctx *c, const void *p, size_t n) {
    c->out_n += n;
    if (c->writing) sc_atomic_write(&c->out, p, n);
}

static sc_status emit_len_header(save_ctx *c, uint32_t number, size_t len) {
    onnx_buf head = {0};
    if (!onnx_buf_put_len_header(&head, number, len)) return sc_errorf("out of memory");
    emit(c, head.p, head.n);
    free(head.p);
    return SC_OK;
}

/* ProtobufCBuffer that appends to the model file. */
typedef struct {
    ProtobufCBuffer base;
    save_ctx *c;
} file_sink;

static void file_sink_append(ProtobufCBuffer *b, size_t len, const uint8_t *data) {
    emit(((file_sink *)b)->c, data, len);
}

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

/* Places bytes in the data file (written in the second pass) at *offset. */
static void ext_place(save_ctx *c, const void *data, size_t bytes, size_t *offset) {
    /* 4096-byte alignment, as onnx.proto recommends for mmap-able external data. */
    uint64_t start = (c->ext_size + 4095) & ~(uint64_t)4095;
    if (c->writing) {
        static const uint8_t zeros[4096];
        sc_atomic_write(&c->ext, zeros, (size_t)(start - c->ext_size));
        sc_atomic_write(&c->ext, data, bytes);
    }
    c->ext_size = start + bytes;
    *offset = (size_t)start;
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
        ext_place(c, data, bytes, &offset);
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
        st = emit_len_header(c, c->initializer_field, size);
        file_sink sink = {.base = {.append = file_sink_append}, .c = c};
        if (!st && c->writing) {
            uint64_t before = c->out_n;
            protobuf_c_message_pack_to_buffer(&t->base, &sink.base);
            if (c->out_n - before != size)
                st = sc_errorf("internal: initializer '%s' packed to %llu bytes, %zu expected", t->name ? t->name : "",
                               (unsigned long long)(c->out_n - before), size);
        } else if (!st) {
            c->out_n += size;
        }
    }
    fields_restore(t, &saved);
    free(owned);
    onnx__tensor_proto__free_unpacked(t, NULL);
    onnx_bytes_drop(c->m, f->data, f->size);
    return st;
}

/* The graph field: its length is measured by the first pass (its contents change size) and
 * written before it by the second. */
static sc_status fields_write(save_ctx *c, const uint8_t *p, const uint8_t *end, bool graph);

static sc_status graph_write(save_ctx *c, const onnx_wire_field *f) {
    if (!c->writing) {
        uint64_t at = c->out_n;
        SC_TRY(fields_write(c, f->data, f->data + f->size, true));
        size_t len = (size_t)(c->out_n - at), *l = realloc(c->graph_len, (c->n_graph_len + 1) * sizeof *l);
        if (!l) return sc_errorf("out of memory");
        c->graph_len = l;
        l[c->n_graph_len++] = len;
        c->out_n = at;
        SC_TRY(emit_len_header(c, c->graph_field, len));
        c->out_n += len;
        return SC_OK;
    }
    SC_ASSERT(c->graph_at < c->n_graph_len);
    size_t len = c->graph_len[c->graph_at++];
    SC_TRY(emit_len_header(c, c->graph_field, len));
    uint64_t at = c->out_n;
    SC_TRY(fields_write(c, f->data, f->data + f->size, true));
    if (c->out_n - at != len)
        return sc_errorf("internal: the graph took %llu bytes writing, %zu measuring", (unsigned long long)(c->out_n - at),
                         len);
    return SC_OK;
}

/* Copies the fields of [p, end) to the model, rewriting the initializers (wire 2, field `number`). */
static sc_status fields_write(save_ctx *c, const uint8_t *p, const uint8_t *end, bool graph) {
    onnx_wire_field f;
    while (onnx_wire_next(&p, end, &f)) {
        if (f.wire == 2 && !graph && f.number == c->graph_field) SC_TRY(graph_write(c, &f));
        else if (f.wire == 2 && graph && f.number == c->initializer_field) SC_TRY(initializer_write(c, &f));
        else emit(c, f.start, (size_t)(f.end - f.start));
    }
    return p == end ? SC_OK : sc_errorf("the model's kept bytes do not parse");
}

/* The second pass: the data file (when there is one) and the model, each committed when whole. */
static sc_status files_write(save_ctx *c, const char *path) {
    bool ext = c->ext_size > 0;
    uint64_t ext_bytes = c->ext_size, out_bytes = c->out_n;
    c->writing = true;
    c->ext_size = c->out_n = 0;
    c->graph_at = 0;
    if (ext) {
        size_t len = strlen(path) + 6;
        char *data_path = malloc(len);
        if (!data_path) return sc_errorf("out of memory");
        snprintf(data_path, len, "%s.data", path);
        sc_status st = sc_atomic_open(&c->ext, data_path);
        free(data_path);
        SC_TRY(st);
    }
    sc_status st = sc_atomic_open(&c->out, path);
    const uint8_t *p = c->m->proto_bytes;
    if (!st) st = fields_write(c, p, p + c->m->proto_size, false);
    if (!st && (c->ext_size != ext_bytes || c->out_n != out_bytes))
        st = sc_errorf("internal: the second pass wrote %llu + %llu bytes, the first counted %llu + %llu",
                       (unsigned long long)c->out_n, (unsigned long long)c->ext_size, (unsigned long long)out_bytes,
                       (unsigned long long)ext_bytes);
    if (!st && ext) st = sc_atomic_commit(&c->ext);
    else if (ext) sc_atomic_abort(&c->ext);
    if (!st) return sc_atomic_commit(&c->out);
    sc_atomic_abort(&c->out);
    return st;
}

int64_t sc_model_external_threshold(const sc_model *m) {
    const sc_graph *g = &m->graph;
    int64_t bytes = 0;
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].kind == SC_VALUE_PARAM) bytes += sc_desc_bytes(&g->values[v].desc);
    return bytes > ((int64_t)1 << 30) * 3 / 2 ? 1024 : 0;
}

sc_status sc_model_save(const sc_model *m, const char *path, int64_t external_threshold) {
    SC_ASSERT(m->proto_bytes);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (!*base) return sc_errorf("%s: not a file name", path);
    save_ctx c = {.m = m,
                  .threshold = external_threshold,
                  .graph_field = onnx_field_number(&onnx__model_proto__descriptor, "graph"),
                  .initializer_field = onnx_field_number(&onnx__graph_proto__descriptor, "initializer"),
                  .out = {.fd = -1},
                  .ext = {.fd = -1}};
    size_t len = strlen(base) + 6;
    c.location = malloc(len);
    sc_status st = c.location ? SC_OK : sc_errorf("out of memory");
    if (!st) {
        snprintf(c.location, len, "%s.data", base);
        const uint8_t *p = m->proto_bytes;
        st = fields_write(&c, p, p + m->proto_size, false);
    }
    if (!st) st = files_write(&c, path);
    free(c.graph_len);
    free(c.location);
    return sc_status_prefix(st, "%s: ", path);
}
