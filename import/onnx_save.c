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
 *
 * bf16 weights (sc_model_save_as): a converted initializer is packed under "<name>.bf16" with bf16
 * data, and the graph field starts with one Cast node per converted initializer. Initializers come
 * after the nodes in the graph's bytes, so the first pass learns which are converted (and the
 * Casts' length) by the end of the graph, and the second writes the Casts first. Initializers also
 * listed as graph inputs (IR < 4: an input a caller may feed) stay f32, since their name must stay
 * an input.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
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
    sc_dtype weights;      /* SC_F32, or SC_BF16: parameters stored in bf16 behind Casts */
    uint32_t node_field, input_field;
    char **inputs;         /* names of the graph's inputs (first pass) */
    size_t n_inputs;
    char **casts;          /* initializers converted to bf16, in order (first pass) */
    size_t n_casts;
    bool casts_known;      /* the list is complete (second pass) */
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

static sc_status name_push(char ***list, size_t *n, const char *name) {
    char **l = realloc(*list, (*n + 1) * sizeof *l), *copy = strdup(name);
    if (l) *list = l;
    if (!l || !copy) {
        free(copy);
        return sc_errorf("out of memory");
    }
    l[(*n)++] = copy;
    return SC_OK;
}

static bool name_listed(char *const *list, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(list[i], name)) return true;
    return false;
}

/* Whether initializer t is stored in bf16: an f32 parameter of the graph, not also a graph input. */
static bool to_bf16(const save_ctx *c, const Onnx__TensorProto *t) {
    if (c->weights != SC_BF16 || !t->name || t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) return false;
    int id = graph_find_value((sc_graph *)&c->m->graph, t->name);
    return id >= 0 && c->m->graph.values[id].kind == SC_VALUE_PARAM && c->m->graph.values[id].data &&
           !name_listed(c->inputs, c->n_inputs, t->name);
}

/* The Cast node making initializer `name` float again from "<name>.bf16", packed into c->out. */
static sc_status cast_node_write(save_ctx *c, const char *name) {
    size_t len = strlen(name) + 16;
    char *from = malloc(len), *node_name = malloc(len);
    if (!from || !node_name) {
        free(from), free(node_name);
        return sc_errorf("out of memory");
    }
    snprintf(from, len, "%s.bf16", name);
    snprintf(node_name, len, "%s.to_float", name);
    Onnx__AttributeProto to = ONNX__ATTRIBUTE_PROTO__INIT, *attrs[1] = {&to};
    to.name = "to";
    to.has_type = 1;
    to.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    to.has_i = 1;
    to.i = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    Onnx__NodeProto n = ONNX__NODE_PROTO__INIT;
    char *in[1] = {from}, *out[1] = {(char *)name};
    n.n_input = n.n_output = n.n_attribute = 1;
    n.input = in;
    n.output = out;
    n.attribute = attrs;
    n.name = node_name;
    n.op_type = "Cast";
    size_t size = onnx__node_proto__get_packed_size(&n);
    sc_status st = emit_len_header(c, c->node_field, size);
    if (!st && c->writing) {
        file_sink sink = {.base = {.append = file_sink_append}, .c = c};
        protobuf_c_message_pack_to_buffer(&n.base, &sink.base);
    } else if (!st) {
        c->out_n += size;
    }
    free(from);
    free(node_name);
    return st;
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
    if (to_bf16(c, t)) { /* t's name and type are restored by the caller */
        if (!c->casts_known) SC_TRY(name_push(&c->casts, &c->n_casts, t->name));
        size_t n = bytes / 4, len = strlen(t->name) + 6;
        uint16_t *half = malloc(n * 2 + 1);
        char *name = malloc(len);
        if (!half || !name) {
            free(half), free(name);
            return sc_errorf("out of memory converting '%s' to bf16", t->name);
        }
        sc_f32_to_bf16_n(half, data, (int64_t)n);
        snprintf(name, len, "%s.bf16", t->name);
        if (graph_find_value((sc_graph *)&c->m->graph, name) >= 0) {
            free(half), free(name);
            return sc_errorf("initializer '%s': its bf16 copy would be named '%s.bf16', which the model already uses",
                             t->name, t->name);
        }
        free(*owned);
        *owned = half;
        data = half;
        bytes = n * 2;
        t->name = name; /* freed by the caller */
        t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
    }
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
    char *name = t->name;
    int32_t data_type = t->data_type;
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
    if (t->name != name) free(t->name);
    t->name = name;
    t->data_type = data_type;
    free(owned);
    onnx__tensor_proto__free_unpacked(t, NULL);
    onnx_bytes_drop(c->m, f->data, f->size);
    return st;
}

/* The graph field: its length is measured by the first pass (its contents change size) and
 * written before it by the second. */
static sc_status fields_write(save_ctx *c, const uint8_t *p, const uint8_t *end, bool graph);

/* The names of the graph's inputs (ValueInfoProto fields, after the initializers in the bytes). */
static sc_status inputs_collect(save_ctx *c, const onnx_wire_field *graph) {
    const uint8_t *p = graph->data, *end = graph->data + graph->size;
    onnx_wire_field f;
    while (onnx_wire_next(&p, end, &f)) {
        if (f.wire != 2 || f.number != c->input_field) continue;
        Onnx__ValueInfoProto *vi = onnx__value_info_proto__unpack(NULL, f.size, f.data);
        if (!vi) return sc_errorf("a graph input does not parse");
        sc_status st = vi->name ? name_push(&c->inputs, &c->n_inputs, vi->name) : SC_OK;
        onnx__value_info_proto__free_unpacked(vi, NULL);
        SC_TRY(st);
    }
    return SC_OK;
}

/* The graph's own fields, the bf16 Casts first once they are known. */
static sc_status graph_fields_write(save_ctx *c, const onnx_wire_field *f) {
    for (size_t i = 0; c->casts_known && i < c->n_casts; i++) SC_TRY(cast_node_write(c, c->casts[i]));
    SC_TRY(fields_write(c, f->data, f->data + f->size, true));
    if (c->casts_known) return SC_OK;
    for (size_t i = 0; i < c->n_casts; i++) SC_TRY(cast_node_write(c, c->casts[i])); /* counted only */
    c->casts_known = true;
    return SC_OK;
}

static sc_status graph_write(save_ctx *c, const onnx_wire_field *f) {
    if (!c->writing) {
        uint64_t at = c->out_n;
        if (c->weights == SC_BF16) SC_TRY(inputs_collect(c, f));
        SC_TRY(graph_fields_write(c, f));
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
    SC_TRY(graph_fields_write(c, f));
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
    return sc_model_save_as(m, path, external_threshold, SC_F32);
}

static void names_free(char **list, size_t n) {
    for (size_t i = 0; i < n; i++) free(list[i]);
    free(list);
}

sc_status sc_model_save_as(const sc_model *m, const char *path, int64_t external_threshold, sc_dtype weights) {
    SC_ASSERT(m->proto_bytes);
    if (weights != SC_F32 && weights != SC_BF16)
        return sc_errorf("%s: weights can be saved in f32 or bf16, not %s", path, sc_dtype_name(weights));
    if (weights == SC_BF16 && m->graph.opset < 13)
        return sc_errorf("%s: bf16 weights need a Cast from bf16, which ONNX has from opset 13; the model imports "
                         "opset %lld", path, (long long)m->graph.opset);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (!*base) return sc_errorf("%s: not a file name", path);
    save_ctx c = {.m = m,
                  .threshold = external_threshold,
                  .graph_field = onnx_field_number(&onnx__model_proto__descriptor, "graph"),
                  .initializer_field = onnx_field_number(&onnx__graph_proto__descriptor, "initializer"),
                  .out = {.fd = -1},
                  .ext = {.fd = -1},
                  .weights = weights,
                  .node_field = onnx_field_number(&onnx__graph_proto__descriptor, "node"),
                  .input_field = onnx_field_number(&onnx__graph_proto__descriptor, "input")};
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
    names_free(c.inputs, c.n_inputs);
    names_free(c.casts, c.n_casts);
    return sc_status_prefix(st, "%s: ", path);
}
