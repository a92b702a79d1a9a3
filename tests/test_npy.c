/* core/npy: round trips for every dtype .npy can hold, byte equality with files written by numpy
 * 2.x (hard-coded below from np.save), and malformed files rejected with the file named. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/npy.h"
#include "tests/check.h"

/* np.save(f, np.arange(6, dtype='<f4').reshape(2, 3) * 0.5), np.array([-1,2,3,4,5], '<i8'),
 * np.array(True), np.zeros((0, 3), '<u2') with numpy 2.4. */
static const unsigned char numpy_f32_2x3[152] = {0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x01, 0x00, 0x76, 0x00, 0x7b, 0x27, 0x64, 0x65, 0x73, 0x63, 0x72, 0x27, 0x3a, 0x20, 0x27, 0x3c, 0x66, 0x34, 0x27, 0x2c, 0x20, 0x27, 0x66, 0x6f, 0x72, 0x74, 0x72, 0x61, 0x6e, 0x5f, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x27, 0x3a, 0x20, 0x46, 0x61, 0x6c, 0x73, 0x65, 0x2c, 0x20, 0x27, 0x73, 0x68, 0x61, 0x70, 0x65, 0x27, 0x3a, 0x20, 0x28, 0x32, 0x2c, 0x20, 0x33, 0x29, 0x2c, 0x20, 0x7d, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x3f, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x20, 0x40};
static const unsigned char numpy_i64_5[168] = {0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x01, 0x00, 0x76, 0x00, 0x7b, 0x27, 0x64, 0x65, 0x73, 0x63, 0x72, 0x27, 0x3a, 0x20, 0x27, 0x3c, 0x69, 0x38, 0x27, 0x2c, 0x20, 0x27, 0x66, 0x6f, 0x72, 0x74, 0x72, 0x61, 0x6e, 0x5f, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x27, 0x3a, 0x20, 0x46, 0x61, 0x6c, 0x73, 0x65, 0x2c, 0x20, 0x27, 0x73, 0x68, 0x61, 0x70, 0x65, 0x27, 0x3a, 0x20, 0x28, 0x35, 0x2c, 0x29, 0x2c, 0x20, 0x7d, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
static const unsigned char numpy_bool_scalar[129] = {0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x01, 0x00, 0x76, 0x00, 0x7b, 0x27, 0x64, 0x65, 0x73, 0x63, 0x72, 0x27, 0x3a, 0x20, 0x27, 0x7c, 0x62, 0x31, 0x27, 0x2c, 0x20, 0x27, 0x66, 0x6f, 0x72, 0x74, 0x72, 0x61, 0x6e, 0x5f, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x27, 0x3a, 0x20, 0x46, 0x61, 0x6c, 0x73, 0x65, 0x2c, 0x20, 0x27, 0x73, 0x68, 0x61, 0x70, 0x65, 0x27, 0x3a, 0x20, 0x28, 0x29, 0x2c, 0x20, 0x7d, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x0a, 0x01};
static const unsigned char numpy_u16_0x3[128] = {0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x01, 0x00, 0x76, 0x00, 0x7b, 0x27, 0x64, 0x65, 0x73, 0x63, 0x72, 0x27, 0x3a, 0x20, 0x27, 0x3c, 0x75, 0x32, 0x27, 0x2c, 0x20, 0x27, 0x66, 0x6f, 0x72, 0x74, 0x72, 0x61, 0x6e, 0x5f, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x27, 0x3a, 0x20, 0x46, 0x61, 0x6c, 0x73, 0x65, 0x2c, 0x20, 0x27, 0x73, 0x68, 0x61, 0x70, 0x65, 0x27, 0x3a, 0x20, 0x28, 0x30, 0x2c, 0x20, 0x33, 0x29, 0x2c, 0x20, 0x7d, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x0a};

static void check_numpy_file(const char *what, const unsigned char *bytes, size_t size, sc_dtype dtype, int rank,
                             const int64_t *dims, const void *data) {
    sc_tensor t;
    sc_status st = sc_npy_decode(bytes, size, what, &t);
    EXPECT(st == SC_OK);
    if (st) {
        fprintf(stderr, "%s: %s\n", what, sc_status_message(st));
        sc_status_free(st);
        return;
    }
    EXPECT(t.desc.dtype == dtype && t.desc.rank == rank);
    for (int i = 0; i < rank && i < t.desc.rank; i++) EXPECT(t.desc.dims[i] == dims[i]);
    size_t nbytes = (size_t)sc_desc_bytes(&t.desc);
    EXPECT(nbytes == 0 || memcmp(t.data, data, nbytes) == 0);
    /* Our encoder must reproduce numpy's bytes exactly (same header padding). */
    void *enc;
    size_t enc_size;
    st = sc_npy_encode(&t, &enc, &enc_size);
    EXPECT(st == SC_OK);
    if (!st) {
        EXPECT(enc_size == size && memcmp(enc, bytes, size) == 0);
        if (enc_size != size || memcmp(enc, bytes, size)) fprintf(stderr, "%s: encoding differs from numpy's\n", what);
        free(enc);
    }
    sc_status_free(st);
    free(t.data);
}

static void test_numpy_files(void) {
    const float f[6] = {0, 0.5f, 1, 1.5f, 2, 2.5f};
    const int64_t i64[5] = {-1, 2, 3, 4, 5};
    const unsigned char yes = 1;
    check_numpy_file("f32", numpy_f32_2x3, sizeof numpy_f32_2x3, SC_F32, 2, (const int64_t[]){2, 3}, f);
    check_numpy_file("i64", numpy_i64_5, sizeof numpy_i64_5, SC_I64, 1, (const int64_t[]){5}, i64);
    check_numpy_file("bool", numpy_bool_scalar, sizeof numpy_bool_scalar, SC_BOOL, 0, NULL, &yes);
    check_numpy_file("u16", numpy_u16_0x3, sizeof numpy_u16_0x3, SC_U16, 2, (const int64_t[]){0, 3}, NULL);
}

static void test_round_trip(const char *dir) {
    static const sc_dtype types[] = {SC_F32, SC_F64, SC_F16, SC_I8, SC_I16, SC_I32, SC_I64,
                                     SC_U8,  SC_U16, SC_U32, SC_U64, SC_BOOL};
    static const int64_t shapes[][SC_MAX_RANK] = {{0}, {5}, {2, 3, 4}, {0, 3}, {1, 1, 1, 1, 1, 1, 1, 2}};
    static const int ranks[] = {0, 1, 3, 2, 8};
    char path[512];
    snprintf(path, sizeof path, "%s/t.npy", dir);
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
        for (size_t s = 0; s < sizeof ranks / sizeof ranks[0]; s++) {
            sc_tensor t = {.desc = sc_desc_make(types[k], ranks[s], shapes[s])};
            size_t bytes = (size_t)sc_desc_bytes(&t.desc);
            unsigned char *data = malloc(bytes + 1);
            for (size_t i = 0; i < bytes; i++) data[i] = types[k] == SC_BOOL ? (unsigned char)(i % 2) : (unsigned char)(i * 37 + 11);
            t.data = data;
            sc_status st = sc_npy_write(path, &t);
            EXPECT(st == SC_OK);
            sc_status_free(st);
            sc_tensor r;
            st = sc_npy_read(path, &r);
            EXPECT(st == SC_OK);
            if (!st) {
                EXPECT(r.desc.dtype == t.desc.dtype && sc_desc_same_shape(&r.desc, &t.desc));
                EXPECT(memcmp(r.data, data, bytes) == 0);
                EXPECT(((uintptr_t)r.data & 63) == 0);
                free(r.data);
            } else {
                fprintf(stderr, "round trip %s rank %d: %s\n", sc_dtype_name(types[k]), ranks[s], sc_status_message(st));
            }
            sc_status_free(st);
            free(data);
        }
    unlink(path);
    /* Types .npy cannot hold are refused. */
    sc_tensor bad = {.desc = sc_desc_make(SC_BF16, 1, (const int64_t[]){1}), .data = (void *)"ab"};
    sc_status st = sc_npy_write(path, &bad);
    EXPECT(st && strstr(sc_status_message(st), path));
    sc_status_free(st);
}

/* A .npy file from a header dict and payload; version 1 or 2 framing, padded like numpy. */
static unsigned char *make_npy(const char *dict, const void *data, size_t size, int version, size_t *out) {
    size_t start = version == 1 ? 10 : 12, n = strlen(dict);
    size_t total = ((start + n + 1 + 63) / 64) * 64, hlen = total - start;
    unsigned char *b = calloc(1, total + size + 1);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)version;
    for (size_t i = 0; i < start - 8; i++) b[8 + i] = (unsigned char)(hlen >> (8 * i));
    memcpy(b + start, dict, n);
    memset(b + start + n, ' ', hlen - n - 1);
    b[total - 1] = '\n';
    if (size) memcpy(b + total, data, size);
    *out = total + size;
    return b;
}

static void expect_error(const char *what, const unsigned char *bytes, size_t size, const char *needle) {
    sc_tensor t;
    sc_status st = sc_npy_decode(bytes, size, what, &t);
    EXPECT(st != SC_OK);
    EXPECT(t.data == NULL);
    if (st) {
        const char *msg = sc_status_message(st);
        if (!strstr(msg, what) || !strstr(msg, needle)) {
            fprintf(stderr, "%s: message '%s' lacks the file name or '%s'\n", what, msg, needle);
            failures++;
        }
    }
    sc_status_free(st);
}

static void test_malformed(const char *dir) {
    const float four[4] = {1, 2, 3, 4};
    const unsigned char two[2] = {0, 2};
    size_t n;
    unsigned char *b;
#define BAD(dict, data, size, version, needle)                                                     \
    b = make_npy(dict, data, size, version, &n);                                                   \
    expect_error(#dict, b, n, needle);                                                             \
    free(b)
    BAD("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", four, 16, 1, "Fortran");
    BAD("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }", four, 16, 1, "big-endian");
    BAD("{'descr': '<U3', 'fortran_order': False, 'shape': (1,), }", four, 12, 1, "not supported");
    BAD("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", four, 16, 1, "not supported");
    BAD("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", four, 8, 1, "structured");
    BAD("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", four, 16, 1, "needs 24");
    BAD("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", four, 16, 1, "needs 12");
    BAD("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,4), }", four, 16, 1, "rank");
    BAD("{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }", four, 16, 1, "dimension");
    BAD("{'descr': '<f4', 'fortran_order': False, 'shape': (9999999999, 9999999999, 9999999999), }", four, 16, 2, "too large");
    BAD("{'descr': '<f4', 'shape': (4,), }", four, 16, 1, "fortran_order");
    BAD("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'x': 1}", four, 16, 1, "unexpected key");
    BAD("['descr', '<f4']", four, 16, 1, "not a dict");
    BAD("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", two, 2, 1, "0 or 1");
#undef BAD
    /* Framing errors. */
    static const unsigned char not_npy[] = "PK\x03\x04 this is a zip file";
    expect_error("zip", not_npy, sizeof not_npy, "bad magic");
    b = make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", four, 16, 1, &n);
    expect_error("cut", b, 40, "truncated");
    b[6] = 4;
    expect_error("v4", b, n, "version 4");
    b[6] = 1;
    /* The same file through sc_npy_read names the path. */
    char path[512];
    snprintf(path, sizeof path, "%s/big_endian.npy", dir);
    free(b);
    b = make_npy("{'descr': '>i8', 'fortran_order': False, 'shape': (2,), }", four, 16, 1, &n);
    FILE *f = fopen(path, "wb");
    EXPECT(f && fwrite(b, 1, n, f) == n);
    if (f) fclose(f);
    free(b);
    sc_tensor t;
    sc_status st = sc_npy_read(path, &t);
    EXPECT(st && strstr(sc_status_message(st), path) && strstr(sc_status_message(st), "big-endian"));
    sc_status_free(st);
    unlink(path);
    snprintf(path, sizeof path, "%s/missing.npy", dir);
    st = sc_npy_read(path, &t);
    EXPECT(st && strstr(sc_status_message(st), path));
    sc_status_free(st);
}

/* Version 2.0 framing (u32 header length) is read too. */
static void test_version2(void) {
    const int32_t v[3] = {7, -8, 9};
    size_t n;
    unsigned char *b = make_npy("{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", v, 12, 2, &n);
    sc_tensor t;
    sc_status st = sc_npy_decode(b, n, "v2", &t);
    EXPECT(st == SC_OK && t.desc.dtype == SC_I32 && t.desc.rank == 1 && t.desc.dims[0] == 3);
    if (!st) EXPECT(memcmp(t.data, v, 12) == 0);
    sc_status_free(st);
    if (!st) free(t.data);
    free(b);
}

int main(void) {
    char dir[] = "/tmp/test_npy_XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_numpy_files();
    test_round_trip(dir);
    test_malformed(dir);
    test_version2();
    rmdir(dir);
    if (failures) {
        fprintf(stderr, "test_npy: %d checks failed\n", failures);
        return 1;
    }
    printf("test_npy: ok\n");
    return 0;
}
