#include "core/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t sc_dtype_size(sc_dtype t) {
    switch (t) {
    case SC_F32: case SC_I32: case SC_U32: return 4;
    case SC_U8: case SC_I8: case SC_BOOL: return 1;
    case SC_U16: case SC_I16: case SC_F16: case SC_BF16: return 2;
    case SC_I64: case SC_F64: case SC_U64: return 8;
    default: return 0;
    }
}

const char *sc_dtype_name(sc_dtype t) {
    switch (t) {
    case SC_F32: return "f32";
    case SC_U8: return "u8";
    case SC_I8: return "i8";
    case SC_U16: return "u16";
    case SC_I16: return "i16";
    case SC_I32: return "i32";
    case SC_I64: return "i64";
    case SC_STRING: return "string";
    case SC_BOOL: return "bool";
    case SC_F16: return "f16";
    case SC_F64: return "f64";
    case SC_U32: return "u32";
    case SC_U64: return "u64";
    case SC_BF16: return "bf16";
    default: return "undefined";
    }
}

bool sc_dtype_is_float(sc_dtype t) { return t == SC_F32 || t == SC_F64 || t == SC_F16 || t == SC_BF16; }
bool sc_dtype_is_half(sc_dtype t) { return t == SC_BF16 || t == SC_F16; }

int64_t sc_desc_numel(const sc_desc *d) {
    int64_t n = 1;
    for (int i = 0; i < d->rank; i++) {
        if (d->dims[i] < 0) return -1;
        /* overflow test without a division: this runs per value per plan step on 13M-value graphs */
        if (__builtin_mul_overflow(n, d->dims[i], &n)) return -1;
    }
    return n;
}

int64_t sc_desc_bytes(const sc_desc *d) {
    int64_t n = sc_desc_numel(d);
    int64_t es = (int64_t)sc_dtype_size(d->dtype);
    int64_t b;
    if (n < 0 || __builtin_mul_overflow(n, es, &b)) return -1;
    return b;
}

bool sc_desc_is_static(const sc_desc *d) {
    for (int i = 0; i < d->rank; i++)
        if (d->dims[i] < 0) return false;
    return true;
}

bool sc_desc_same_shape(const sc_desc *a, const sc_desc *b) {
    if (a->rank != b->rank) return false;
    return memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank) == 0;
}

char *sc_desc_str(const sc_desc *d, char *buf, size_t size) {
    size_t at = (size_t)snprintf(buf, size, "%s[", sc_dtype_name(d->dtype));
    for (int i = 0; i < d->rank && at < size; i++) {
        if (d->dims[i] < 0)
            at += (size_t)snprintf(buf + at, size - at, "%s?", i ? "," : "");
        else
            at += (size_t)snprintf(buf + at, size - at, "%s%lld", i ? "," : "", (long long)d->dims[i]);
    }
    if (at < size) snprintf(buf + at, size - at, "]");
    return buf;
}

sc_desc sc_desc_make(sc_dtype t, int rank, const int64_t *dims) {
    sc_desc d;
    memset(&d, 0, sizeof d);
    d.dtype = t;
    d.rank = rank;
    for (int i = 0; i < rank; i++) d.dims[i] = dims[i];
    return d;
}

void sc_tensor_free_data(sc_tensor *t) {
    free(t->data);
    t->data = NULL;
}

/* A float is non-finite exactly when its exponent bits are all ones: with e the masked exponent,
 * e + (lowest exponent bit) carries into the bit above the exponent only then. Integer ops, so the
 * loop vectorises; parameters and optimizer state are tens to hundreds of MB, scanned every step, so
 * the scan is split across threads (an OR does not depend on the split). */
#define ALL_FINITE_SCAN(T, mask, carry, top)                                     \
    do {                                                                         \
        const unsigned char *p_ = data;                                          \
        T acc_ = 0;                                                              \
        _Pragma("omp parallel for simd reduction(| : acc_) if (n >= (1 << 16))") \
        for (int64_t i = 0; i < n; i++) {                                        \
            T u_;                                                                \
            memcpy(&u_, p_ + (size_t)i * sizeof u_, sizeof u_);                  \
            acc_ |= (T)((T)(u_ & (mask)) + (carry));                             \
        }                                                                        \
        return !(acc_ & (top));                                                  \
    } while (0)

bool sc_data_all_finite(const sc_desc *d, const void *data) {
    int64_t n = sc_desc_numel(d);
    switch (d->dtype) {
    case SC_F32: ALL_FINITE_SCAN(uint32_t, 0x7f800000u, 0x00800000u, 0x80000000u);
    case SC_BF16: ALL_FINITE_SCAN(uint16_t, 0x7f80u, 0x0080u, 0x8000u);
    case SC_F16: ALL_FINITE_SCAN(uint16_t, 0x7c00u, 0x0400u, 0x8000u);
    case SC_F64: ALL_FINITE_SCAN(uint64_t, 0x7ff0000000000000ull, 0x0010000000000000ull, 0x8000000000000000ull);
    default: return true;
    }
}
