/* .npy reading and writing (see npy.h). The header is a Python dict literal, e.g.
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * preceded by "\x93NUMPY", major, minor and a little-endian header length (u16 for 1.0, u32 for
 * 2.0/3.0) and followed by the raw C-order data. */
#include "core/npy.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/atomic_write.h" /* sc_write_file_atomic */

typedef struct {
    const char *descr; /* without the byte-order character */
    sc_dtype dtype;
} npy_type;

static const npy_type npy_types[] = {
    {"f2", SC_F16}, {"f4", SC_F32}, {"f8", SC_F64}, {"i1", SC_I8},  {"i2", SC_I16}, {"i4", SC_I32},
    {"i8", SC_I64}, {"u1", SC_U8},  {"u2", SC_U16}, {"u4", SC_U32}, {"u8", SC_U64}, {"b1", SC_BOOL},
};

const char *sc_npy_descr(sc_dtype t) {
    switch (t) {
    case SC_F16: return "<f2";
    case SC_F32: return "<f4";
    case SC_F64: return "<f8";
    case SC_I8: return "|i1";
    case SC_I16: return "<i2";
    case SC_I32: return "<i4";
    case SC_I64: return "<i8";
    case SC_U8: return "|u1";
    case SC_U16: return "<u2";
    case SC_U32: return "<u4";
    case SC_U64: return "<u8";
    case SC_BOOL: return "|b1";
    default: return NULL;
    }
}

/* ---- header parsing: just enough of Python's literal syntax for numpy's headers ---- */

typedef struct {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static int eat(cursor *c, char ch) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* A quoted string ('...' or "..."), copied into buf. */
static int parse_str(cursor *c, char *buf, size_t size) {
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return 0;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (n + 1 >= size) return 0;
        buf[n++] = *c->p++;
    }
    if (c->p >= c->end) return 0;
    c->p++;
    buf[n] = '\0';
    return 1;
}

static int parse_word(cursor *c, const char *w) {
    skip_ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) >= n && !strncmp(c->p, w, n)) {
        c->p += n;
        return 1;
    }
    return 0;
}

/* (d0, d1, ...) with an optional trailing comma; "()" is rank 0. */
static sc_status parse_shape(cursor *c, const char *name, sc_desc *d) {
    if (!eat(c, '(')) return sc_errorf("%s: .npy header: shape is not a tuple", name);
    d->rank = 0;
    while (!eat(c, ')')) {
        skip_ws(c);
        if (d->rank == SC_MAX_RANK) return sc_errorf("%s: .npy rank over %d is not supported", name, SC_MAX_RANK);
        char *endp;
        errno = 0;
        long long v = strtoll(c->p, &endp, 10);
        if (endp == c->p || endp > c->end || errno || v < 0)
            return sc_errorf("%s: .npy header: bad dimension in shape", name);
        c->p = endp;
        d->dims[d->rank++] = v;
        if (!eat(c, ',')) {
            if (!eat(c, ')')) return sc_errorf("%s: .npy header: malformed shape tuple", name);
            break;
        }
    }
    return SC_OK;
}

static sc_status parse_descr(const char *descr, const char *name, sc_dtype *out) {
    char order = descr[0];
    if (order != '<' && order != '>' && order != '|' && order != '=')
        return sc_errorf("%s: .npy dtype '%s' is not supported (numeric little-endian dtypes only)", name, descr);
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++) {
        if (strcmp(descr + 1, npy_types[i].descr)) continue;
        size_t size = sc_dtype_size(npy_types[i].dtype);
        if (order == '>' && size > 1)
            return sc_errorf("%s: .npy dtype '%s' is big-endian; convert it with arr.astype('<%s')", name, descr,
                             descr + 1);
        *out = npy_types[i].dtype;
        return SC_OK;
    }
    return sc_errorf("%s: .npy dtype '%s' is not supported (numeric little-endian dtypes only)", name, descr);
}

static sc_status parse_header(const char *h, size_t len, const char *name, sc_desc *d) {
    cursor c = {h, h + len};
    int have_descr = 0, have_order = 0, have_shape = 0;
    if (!eat(&c, '{')) return sc_errorf("%s: .npy header is not a dict", name);
    while (!eat(&c, '}')) {
        char key[32], val[64];
        if (!parse_str(&c, key, sizeof key) || !eat(&c, ':'))
            return sc_errorf("%s: .npy header: malformed dict", name);
        if (!strcmp(key, "descr")) {
            if (!parse_str(&c, val, sizeof val))
                return sc_errorf("%s: .npy dtype is not a simple type string (structured arrays are not supported)",
                                 name);
            SC_TRY(parse_descr(val, name, &d->dtype));
            have_descr = 1;
        } else if (!strcmp(key, "fortran_order")) {
            if (parse_word(&c, "True"))
                return sc_errorf("%s: .npy array is in Fortran order; save it with np.ascontiguousarray", name);
            if (!parse_word(&c, "False")) return sc_errorf("%s: .npy header: fortran_order is not a bool", name);
            have_order = 1;
        } else if (!strcmp(key, "shape")) {
            SC_TRY(parse_shape(&c, name, d));
            have_shape = 1;
        } else {
            return sc_errorf("%s: .npy header: unexpected key '%s'", name, key);
        }
        if (!eat(&c, ',')) {
            if (!eat(&c, '}')) return sc_errorf("%s: .npy header: malformed dict", name);
            break;
        }
    }
    if (!have_descr || !have_order || !have_shape)
        return sc_errorf("%s: .npy header lacks %s", name, !have_descr ? "'descr'" : !have_order ? "'fortran_order'" : "'shape'");
    return SC_OK;
}

sc_status sc_npy_decode(const void *data, size_t size, const char *name, sc_tensor *t) {
    memset(t, 0, sizeof *t);
    const unsigned char *b = data;
    if (size < 10 || memcmp(b, "\x93NUMPY", 6))
        return sc_errorf("%s: not a .npy file (bad magic)", name);
    unsigned major = b[6];
    size_t hlen, start;
    if (major == 1) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        start = 10;
    } else if (major == 2 || major == 3) {
        if (size < 12) return sc_errorf("%s: .npy file truncated in its header", name);
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        start = 12;
    } else {
        return sc_errorf("%s: .npy format version %u.%u is not supported", name, major, b[7]);
    }
    if (hlen > size - start) return sc_errorf("%s: .npy file truncated in its header", name);
    sc_desc d = {0};
    SC_TRY(parse_header((const char *)b + start, hlen, name, &d));
    int64_t bytes = sc_desc_bytes(&d);
    if (bytes < 0) return sc_errorf("%s: .npy shape is too large", name);
    size_t off = start + hlen, have = size - off;
    char shape[128];
    if ((uint64_t)bytes != have)
        return sc_errorf("%s: .npy data is %zu bytes but %s needs %lld", name, have, sc_desc_str(&d, shape, sizeof shape),
                         (long long)bytes);
    void *buf = NULL;
    if (posix_memalign(&buf, 64, bytes ? (size_t)bytes : 1)) return sc_errorf("%s: out of memory (%lld bytes)", name, (long long)bytes);
    memcpy(buf, b + off, (size_t)bytes);
    if (d.dtype == SC_BOOL)
        for (int64_t i = 0; i < bytes; i++) {
            unsigned byte = ((unsigned char *)buf)[i];
            if (byte > 1) {
                free(buf);
                return sc_errorf("%s: .npy bool array holds byte %u at element %lld (must be 0 or 1)", name, byte,
                                 (long long)i);
            }
        }
    t->desc = d;
    t->data = buf;
    return SC_OK;
}

sc_status sc_npy_read(const char *path, sc_tensor *t) {
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "rb");
    if (!f) return sc_errorf("%s: cannot open: %s", path, strerror(errno));
    sc_status st = SC_OK;
    char *buf = NULL;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) st = sc_errorf("%s: cannot read: %s", path, strerror(errno));
    if (!st && !(buf = malloc(size ? (size_t)size : 1))) st = sc_errorf("%s: out of memory (%ld bytes)", path, size);
    if (!st && fread(buf, 1, (size_t)size, f) != (size_t)size) st = sc_errorf("%s: read failed", path);
    fclose(f);
    if (!st) st = sc_npy_decode(buf, (size_t)size, path, t);
    free(buf);
    return st;
}

sc_status sc_npy_encode(const sc_tensor *t, void **out, size_t *out_size) {
    *out = NULL;
    *out_size = 0;
    const char *descr = sc_npy_descr(t->desc.dtype);
    if (!descr) return sc_errorf(".npy cannot hold dtype %s", sc_dtype_name(t->desc.dtype));
    int64_t bytes = sc_desc_bytes(&t->desc);
    if (bytes < 0) return sc_errorf(".npy: tensor shape is not static");
    char dict[96 + SC_MAX_RANK * 24];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    /* numpy's repr of a tuple: "(2, 3)", "(5,)", "()". */
    for (int i = 0; i < t->desc.rank; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%lld", i ? ", " : "", (long long)t->desc.dims[i]);
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }", t->desc.rank == 1 ? "," : "");
    /* numpy (format.py _write_array_header) reserves room for dim 0 to grow to 21 digits, then pads
     * with spaces and a final '\n' so that the data starts 64-byte aligned. Matching it keeps our
     * files byte-identical to np.save's. */
    if (t->desc.rank > 0) {
        char d0[24];
        int grow = 21 - snprintf(d0, sizeof d0, "%lld", (long long)t->desc.dims[0]);
        for (int i = 0; i < grow; i++) dict[n++] = ' ';
        dict[n] = '\0';
    }
    size_t start = 10, total = ((start + (size_t)n + 1 + 63) / 64) * 64;
    size_t hlen = total - start;
    if (hlen > 65535) { /* cannot happen for rank <= 8, but keep the 2.0 branch honest */
        start = 12;
        total = ((start + (size_t)n + 1 + 63) / 64) * 64;
        hlen = total - start;
    }
    unsigned char *buf = malloc(total + (size_t)bytes);
    if (!buf) return sc_errorf(".npy: out of memory (%lld bytes)", (long long)(total + (size_t)bytes));
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = start == 10 ? 1 : 2;
    buf[7] = 0;
    for (size_t i = 0; i < start - 8; i++) buf[8 + i] = (unsigned char)(hlen >> (8 * i));
    memcpy(buf + start, dict, (size_t)n);
    memset(buf + start + n, ' ', hlen - (size_t)n - 1);
    buf[total - 1] = '\n';
    if (bytes) memcpy(buf + total, t->data, (size_t)bytes);
    *out = buf;
    *out_size = total + (size_t)bytes;
    return SC_OK;
}

sc_status sc_npy_write(const char *path, const sc_tensor *t) {
    void *buf;
    size_t size;
    SC_TRY(sc_status_prefix(sc_npy_encode(t, &buf, &size), "%s: ", path));
    sc_status st = sc_write_file_atomic(path, buf, size);
    free(buf);
    return st;
}
