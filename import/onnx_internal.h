/* Private contracts between the importer's files (the import/ sources); nothing outside import/ includes this.
 *
 * Error messages built here are "<what>: <details>" (e.g. "initializer 'W': raw_data has 20 bytes,
 * expected 24 for f32[2,3]"); the entry points in onnx_load.c / onnx_save.c prefix the file name, so
 * every message the user sees is one line "<file>: <what>: <details>".
 */
#ifndef SC_ONNX_INTERNAL_H
#define SC_ONNX_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "graph/graph.h"
#include "import/attrs.h"
#include "import/onnx.h"
#include "onnx/onnx.pb-c.h"

/* Import refuses tensors with more elements than this before allocating (a corrupt dim list must not
 * be able to ask for petabytes). */
#define SC_IMPORT_MAX_NUMEL ((int64_t)1 << 40)
#define SC_IMPORT_MAX_NODES 10000000
/* Deepest message nesting accepted (ModelProto = 1). A plain model needs 6 (Model > Graph > Node >
 * Attribute > Tensor > StringStringEntry, or ValueInfo > Type > Tensor > Shape > Dimension); subgraphs
 * and nested sequence types add levels, and Scorch refuses subgraphs anyway. */
#define SC_IMPORT_MAX_NESTING 64

/* Wire-format check run before unpacking (onnx_wire.c): refuses nesting deeper than
 * SC_IMPORT_MAX_NESTING (protobuf-c's unpack recurses without a limit) and names a field whose
 * declared length runs past its message. */
sc_status onnx_wire_check(const void *data, size_t size);

/* One field of a serialized message: its number and wire type, the bytes of the whole field (tag
 * included: [start, end)) and, for a length-delimited field, its payload [data, data + size). */
typedef struct {
    uint32_t number;
    int wire;
    const uint8_t *start, *end;
    const uint8_t *data;
    size_t size;
} onnx_wire_field;

/* Reads the field at *p and advances past it. False at the end and on bytes that are not a field
 * (truncated varint, a length past end, a group or invalid wire type): *p is then left where the
 * bad field starts, so the caller can tell the end (*p == end) from an error. */
bool onnx_wire_next(const uint8_t **p, const uint8_t *end, onnx_wire_field *f);

/* The number of a message's field, by name (the field must exist). */
uint32_t onnx_field_number(const ProtobufCMessageDescriptor *d, const char *name);

/* Gives the pages wholly inside [p, p + n) of a mapped model's kept bytes back to the page cache
 * (madvise DONTNEED): read again from the file when touched. No-op for a model in malloc'd memory.
 * The loader drops them once everything is decoded and saving drops each initializer after
 * writing it, so a model's file does not stay resident beside its decoded weights. */
void onnx_bytes_drop(const sc_model *m, const void *p, size_t n);

/* A bump allocator for unpacked messages (proto_pool.c), as a ProtobufCAllocator: alloc and free
 * take a proto_block ** as their pool (free does nothing; release frees every block, reset keeps
 * one shared block for the next message, so no page is faulted twice). */
typedef struct proto_block proto_block;
void *proto_pool_alloc(void *pool, size_t size);
void proto_pool_free(void *pool, void *ptr);
void proto_pool_release(proto_block *b);
void proto_pool_reset(proto_block **head);

/* Serialized bytes appended to a growing buffer (malloc; free p). */
typedef struct {
    uint8_t *p;
    size_t n, cap;
} onnx_buf;
/* Room for n more bytes at p + n; false when out of memory. */
bool onnx_buf_reserve(onnx_buf *b, size_t n);
bool onnx_buf_put(onnx_buf *b, const void *p, size_t n);
/* The tag and length of a length-delimited field `number` of len bytes (the payload follows). */
bool onnx_buf_put_len_header(onnx_buf *b, uint32_t number, size_t len);

/* Where a TensorProto's bytes may come from and where the decoded data goes. */
typedef struct {
    const char *dir;    /* folder that external data must stay inside; NULL refuses external data */
    size_t max_inline;  /* inline data larger than this (the file size) cannot be genuine */
    sc_arena *arena;    /* destination; NULL = malloc (caller frees) */
} sc_tensor_src;

/* Decodes one TensorProto (raw_data, typed fields or external data) into out->data, validating dtype,
 * rank, dims and sizes. `what` names the tensor in errors ("initializer 'W'"). The single decoder
 * behind initializers, Constant nodes and sc_load_tensor_pb. */
sc_status onnx_tensor_decode(const Onnx__TensorProto *t, const char *what, const sc_tensor_src *src, sc_tensor *out);
/* Validates dtype, rank and dims only and fills desc (used before reading any bytes). */
sc_status onnx_tensor_desc(const Onnx__TensorProto *t, const char *what, sc_desc *desc);

/* Reads a whole regular file; an empty file is an error ("<path>: empty file"). */
sc_status onnx_read_file(const char *path, uint8_t **buf, size_t *size);
/* The folder of path ("." when it has none), malloc'd; NULL on out of memory. */
char *onnx_dir_of(const char *path);

/* Per-node import context shared by attribute parsing and canonicalisation. */
struct sc_node_ctx {
    const Onnx__NodeProto *node;
    const char *label; /* node name, or "OpType#index" for unnamed nodes */
    sc_op op;
    int64_t opset;
    sc_graph *g;
    const sc_tensor_src *src; /* for tensor-valued attributes */
};

/* Lookup and typed readers of ONNX attributes. Absent attributes leave *out = default and return OK;
 * an attribute of the wrong type is an error naming node and attribute. */
const Onnx__AttributeProto *attr_find(const sc_node_ctx *c, const char *name);
sc_status attr_int(const sc_node_ctx *c, const char *name, int64_t def, int64_t *out);
/* An int attribute used as a flag: nonzero is true. */
sc_status attr_flag(const sc_node_ctx *c, const char *name, bool def, bool *out);
sc_status attr_float(const sc_node_ctx *c, const char *name, float def, float *out);
/* NUL-terminated copy of a STRING attribute into buf (error if it does not fit). */
sc_status attr_string(const sc_node_ctx *c, const char *name, const char *def, char *buf, size_t size);
/* INTS attribute into out[max]; *n = count (0 when absent). More than max values is an error. */
sc_status attr_ints(const sc_node_ctx *c, const char *name, int64_t *out, int max, int *n);
/* A STRING attribute mapped onto the index of one of names[] (error lists nothing; it names the value). */
sc_status attr_enum(const sc_node_ctx *c, const char *name, const char *const *names, int n_names, int def, int *out);
sc_status attr_errorf(const sc_node_ctx *c, const char *attr, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Attribute-form parameters of old opsets turned into constant inputs (graph/ops.def). in has room
 * for sc_op_infos[op].max_inputs (capped) entries; *n_in grows. */
sc_status onnx_canonicalise(const sc_node_ctx *c, int *in, int *n_in, int cap);
/* Adds a CONST value holding data (copied) under a fresh name derived from base. Returns id or -1. */
int onnx_add_const(sc_graph *g, const char *base, const sc_desc *desc, const void *data, sc_status *st);

/* The Constant node's value attribute (value, value_float(s), value_int(s)) as a tensor in arena. */
sc_status onnx_constant_value(const sc_node_ctx *c, sc_tensor *out);

#endif
