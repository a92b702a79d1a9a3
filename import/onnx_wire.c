/* Wire-format pre-scan of a serialized ModelProto, run before protobuf-c unpacks it.
 *
 * protobuf-c's unpack recurses once per nested message with no depth limit, so a crafted file of a
 * few hundred kilobytes (a GraphProto attribute holding a graph whose node holds a GraphProto ...,
 * 100k deep) would overflow the C stack. This scan walks the same bytes with the generated
 * descriptors (which fields are messages), recursing at most SC_IMPORT_MAX_NESTING levels, and
 * refuses deeper nesting. It also names the field of a length-delimited value whose declared length
 * runs past its enclosing message (a string of 2^62 bytes in a small file), which unpack would only
 * report as a corrupt file, and a string field holding a NUL byte: protobuf-c hands strings over NUL
 * terminated, so "\0x" would silently become "", turning a named input into an omitted one (a
 * fuzzer finding: an out-of-bounds read in shape inference). Anything else malformed is left for
 * unpack to reject.
 * Linear in the input: each byte is visited once, by the innermost message holding it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/onnx_internal.h"

/* Reads a base-128 varint; false when it is truncated or longer than 10 bytes. */
static bool varint_read(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 70 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << (shift < 64 ? shift : 63);
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

/* Moves *p past a field's value of wire type `wire` (0 varint, 1 fixed64, 5 fixed32); for 2
 * (length-delimited) reads the length into *len and stops at the data, not checked against end.
 * False when the value is truncated or the wire type is none of these (groups, invalid). */
static bool value_head(const uint8_t **p, const uint8_t *end, int wire, uint64_t *len) {
    int fixed = wire == 1 ? 8 : wire == 5 ? 4 : 0;
    if (wire == 0 || wire == 2) return varint_read(p, end, len);
    if (!fixed || end - *p < fixed) return false;
    *p += fixed;
    return true;
}

static sc_status scan_message(const uint8_t *p, const uint8_t *end, const ProtobufCMessageDescriptor *desc,
                              int depth) {
    if (depth > SC_IMPORT_MAX_NESTING)
        return sc_errorf("not a supported ONNX model: messages nested more than %d deep (at %s)", SC_IMPORT_MAX_NESTING,
                         desc->short_name);
    while (p < end) {
        uint64_t tag, len = 0;
        /* a truncated value, a group or an invalid wire type: unpack refuses them */
        if (!varint_read(&p, end, &tag) || !value_head(&p, end, (int)(tag & 7), &len)) return SC_OK;
        if ((tag & 7) != 2) continue;
        const ProtobufCFieldDescriptor *f =
            tag >> 3 <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(desc, (unsigned)(tag >> 3)) : NULL;
        if (len > (uint64_t)(end - p))
            return sc_errorf("not a valid ONNX model: field %s.%s declares %llu bytes but only %zu remain (corrupt "
                             "or truncated file)",
                             desc->short_name, f ? f->name : "<unknown>", (unsigned long long)len, (size_t)(end - p));
        if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) SC_TRY(scan_message(p, p + len, f->descriptor, depth + 1));
        if (f && f->type == PROTOBUF_C_TYPE_STRING && len && memchr(p, 0, len))
            return sc_errorf("not a valid ONNX model: string field %s.%s contains a NUL byte", desc->short_name,
                             f->name);
        p += len;
    }
    return SC_OK;
}

bool onnx_wire_next(const uint8_t **p, const uint8_t *end, onnx_wire_field *f) {
    const uint8_t *q = *p;
    uint64_t tag, len;
    if (q >= end || !varint_read(&q, end, &tag) || (tag >> 3) == 0 || (tag >> 3) > UINT32_MAX) return false;
    f->number = (uint32_t)(tag >> 3);
    f->wire = (int)(tag & 7);
    f->start = *p;
    f->data = NULL;
    f->size = 0;
    if (!value_head(&q, end, f->wire, &len)) return false;
    if (f->wire == 2) {
        if (len > (uint64_t)(end - q)) return false;
        f->data = q;
        f->size = (size_t)len;
        q += len;
    }
    f->end = *p = q;
    return true;
}

sc_status onnx_wire_check(const void *data, size_t size) {
    const uint8_t *p = data;
    return scan_message(p, p + size, &onnx__model_proto__descriptor, 1);
}

uint32_t onnx_field_number(const ProtobufCMessageDescriptor *d, const char *name) {
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, name);
    SC_ASSERT(f);
    return f->id;
}

bool onnx_buf_reserve(onnx_buf *b, size_t n) {
    if (b->cap - b->n >= n) return true;
    size_t cap = b->cap ? 2 * b->cap : 4096;
    while (cap - b->n < n) cap *= 2;
    uint8_t *q = realloc(b->p, cap);
    if (!q) return false;
    b->p = q, b->cap = cap;
    return true;
}

bool onnx_buf_put(onnx_buf *b, const void *p, size_t n) {
    if (!onnx_buf_reserve(b, n)) return false;
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
    return true;
}

static size_t varint_write(uint8_t *out, uint64_t v) {
    size_t n = 0;
    for (; v >= 0x80; v >>= 7) out[n++] = (uint8_t)(v | 0x80);
    out[n++] = (uint8_t)v;
    return n;
}

bool onnx_buf_put_len_header(onnx_buf *b, uint32_t number, size_t len) {
    uint8_t h[20];
    size_t n = varint_write(h, (uint64_t)number << 3 | 2);
    n += varint_write(h + n, len);
    return onnx_buf_put(b, h, n);
}
