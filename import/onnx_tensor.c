/* TensorProto decoding: the one place that turns ONNX tensor bytes into dense host data.
 *
 * Sources, in the order onnx.proto gives them precedence: external data (data_location EXTERNAL,
 * key/value pairs location/offset/length, path relative to the model's folder), raw_data
 * (little-endian, exactly numel * elem_size bytes), then the typed field for the dtype:
 *   float_data (f32), int32_data (i32, and bool/i8/u8/i16/u16/f16/bf16 one element per entry, the
 *   16-bit floats as their bit pattern), int64_data (i64), double_data (f64), uint64_data (u32, u64).
 * Everything is checked before memory is allocated: dtype, rank <= SC_MAX_RANK, non-negative dims,
 * numel <= 2^40, and inline bytes no larger than the file that holds them.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "import/onnx.h"
#include "import/onnx_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "raw_data is little-endian; a big-endian host needs byte swapping here"
#endif

sc_status onnx_tensor_desc(const Onnx__TensorProto *t, const char *what, sc_desc *desc) {
    memset(desc, 0, sizeof *desc);
    int dt = t->has_data_type ? t->data_type : 0;
    if (dt == SC_DTYPE_UNDEFINED) return sc_errorf("%s: undefined data type", what);
    if (dt < 0 || dt >= SC_DTYPE_MAX || sc_dtype_size((sc_dtype)dt) == 0)
        return dt == SC_STRING ? sc_errorf("%s: unsupported data type %d (string)", what, dt)
                               : sc_errorf("%s: unsupported data type %d", what, dt);
    if (t->n_dims > SC_MAX_RANK)
        return sc_errorf("%s: rank %zu exceeds the maximum %d", what, t->n_dims, SC_MAX_RANK);
    desc->dtype = (sc_dtype)dt;
    desc->rank = (int)t->n_dims;
    int64_t numel = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        int64_t d = t->dims[i];
        if (d < 0) return sc_errorf("%s: negative dim %lld at axis %zu", what, (long long)d, i);
        desc->dims[i] = d;
        if (d != 0 && numel > SC_IMPORT_MAX_NUMEL / d)
            return sc_errorf("%s: dims overflow: more than 2^40 elements (dim %lld at axis %zu)", what,
                             (long long)d, i);
        numel *= d;
    }
    if (numel > SC_IMPORT_MAX_NUMEL) return sc_errorf("%s: dims overflow: more than 2^40 elements", what);
    if (t->segment) return sc_errorf("%s: segmented tensors are not supported", what);
    return SC_OK;
}

static void *tensor_alloc(const sc_tensor_src *src, size_t bytes) {
    if (src->arena) return sc_arena_alloc(src->arena, bytes);
    void *p = malloc(bytes ? bytes : 1);
    if (p) memset(p, 0, bytes ? bytes : 1);
    return p;
}

static void tensor_release(const sc_tensor_src *src, void *p) {
    if (!src->arena) free(p); /* arena memory goes with the graph */
}

/* Copies a typed repeated field, converting each element to the tensor's dtype. */
static sc_status decode_typed(const Onnx__TensorProto *t, const char *what, const sc_desc *d, void *dst) {
    size_t numel = (size_t)sc_desc_numel(d);
    size_t have = 0;
    const char *field = "";
    switch (d->dtype) {
    case SC_F32: field = "float_data"; have = t->n_float_data; break;
    case SC_I64: field = "int64_data"; have = t->n_int64_data; break;
    case SC_F64: field = "double_data"; have = t->n_double_data; break;
    case SC_U32: case SC_U64: field = "uint64_data"; have = t->n_uint64_data; break;
    default: field = "int32_data"; have = t->n_int32_data; break;
    }
    if (have != numel)
        return sc_errorf("%s: %s has %zu values, expected %zu for its dims", what, field, have, numel);
    for (size_t i = 0; i < numel; i++) {
        switch (d->dtype) {
        case SC_F32: ((float *)dst)[i] = t->float_data[i]; break;
        case SC_I64: ((int64_t *)dst)[i] = t->int64_data[i]; break;
        case SC_F64: ((double *)dst)[i] = t->double_data[i]; break;
        case SC_U32: ((uint32_t *)dst)[i] = (uint32_t)t->uint64_data[i]; break;
        case SC_U64: ((uint64_t *)dst)[i] = t->uint64_data[i]; break;
        case SC_I32: ((int32_t *)dst)[i] = t->int32_data[i]; break;
        case SC_BOOL: ((uint8_t *)dst)[i] = t->int32_data[i] != 0; break;
        case SC_U8: ((uint8_t *)dst)[i] = (uint8_t)t->int32_data[i]; break;
        case SC_I8: ((int8_t *)dst)[i] = (int8_t)t->int32_data[i]; break;
        case SC_U16: case SC_F16: case SC_BF16: ((uint16_t *)dst)[i] = (uint16_t)t->int32_data[i]; break;
        case SC_I16: ((int16_t *)dst)[i] = (int16_t)t->int32_data[i]; break;
        default: return sc_errorf("%s: data type %s has no typed field", what, sc_dtype_name(d->dtype));
        }
    }
    return SC_OK;
}

/* A location must name a file inside dir: relative, no ".." component, and its real path (after
 * symlinks, in the file name or any parent folder) under dir's real path. Returns the resolved path
 * (malloc'd) in *full and dir's real path in real_dir (PATH_MAX bytes). */
static bool path_inside(const char *real_file, const char *real_dir) {
    size_t dl = strlen(real_dir);
    return strncmp(real_file, real_dir, dl) == 0 && (real_file[dl] == '/' || (dl == 1 && real_dir[0] == '/'));
}

static sc_status external_path(const char *what, const char *dir, const char *loc, char **full, char *real_dir) {
    *full = NULL;
    if (!loc || !*loc) return sc_errorf("%s: external data has no location", what);
    if (loc[0] == '/') return sc_errorf("%s: external data location '%s' is an absolute path", what, loc);
    for (const char *p = loc; *p;) {
        size_t n = strcspn(p, "/\\");
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return sc_errorf("%s: external data location '%s' contains '..'", what, loc);
        p += n;
        if (*p) p++;
    }
    if (!dir) return sc_errorf("%s: external data '%s' needs the model's folder, which is unknown", what, loc);
    if (!realpath(dir, real_dir)) return sc_errorf("%s: model folder '%s': %s", what, dir, strerror(errno));
    size_t len = strlen(dir) + strlen(loc) + 2;
    char *joined = malloc(len);
    if (!joined) return sc_errorf("%s: out of memory", what);
    snprintf(joined, len, "%s/%s", dir, loc);
    char real_file[PATH_MAX];
    if (!realpath(joined, real_file)) {
        sc_status st = sc_errorf("%s: external data file '%s': %s", what, joined, strerror(errno));
        free(joined);
        return st;
    }
    free(joined);
    if (!path_inside(real_file, real_dir))
        return sc_errorf("%s: external data location '%s' resolves to '%s', outside the model folder '%s'", what,
                         loc, real_file, real_dir);
    *full = strdup(real_file);
    return *full ? SC_OK : sc_errorf("%s: out of memory", what);
}

static sc_status parse_i64(const char *what, const char *key, const char *s, int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s ? s : "", &end, 10);
    if (!s || !*s || *end || errno || v < 0)
        return sc_errorf("%s: external data %s '%s' is not a non-negative integer", what, key, s ? s : "");
    *out = v;
    return SC_OK;
}

static sc_status read_exact(int fd, void *dst, size_t bytes, int64_t offset, const char *what, const char *path) {
    char *p = dst;
    while (bytes) {
        ssize_t n = pread(fd, p, bytes > (1u << 30) ? (1u << 30) : bytes, (off_t)offset);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return sc_errorf("%s: reading external data '%s': %s", what, path, strerror(errno));
        if (n == 0) return sc_errorf("%s: external data '%s' ended early (short read)", what, path);
        p += n;
        bytes -= (size_t)n;
        offset += n;
    }
    return SC_OK;
}

/* Checks on the file actually opened, after the path checks:
 *  - hard links: a hard link inside the model folder to a file elsewhere (say ~/.ssh/id_rsa) is
 *    indistinguishable by path from a file that belongs there, so the rule is the conservative one:
 *    an external data file with more than one link (st_nlink > 1) is refused. Copy the file instead
 *    of linking it.
 *  - races: the folder could change between realpath and open; the kernel's name for the open file
 *    (/proc/self/fd, when /proc is mounted) must still lie inside the model folder. */
static sc_status external_fd_check(const char *what, int fd, const struct stat *sb, const char *path,
                                   const char *real_dir) {
    if (sb->st_nlink > 1)
        return sc_errorf("%s: external data '%s' has %llu hard links; refused, since a hard link can make a file "
                         "outside the model folder appear inside it (copy the file instead)",
                         what, path, (unsigned long long)sb->st_nlink);
    char proc[64], actual[PATH_MAX];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, actual, sizeof actual - 1);
    if (n < 0) return SC_OK; /* no /proc: the realpath check stands */
    actual[n] = 0;
    if (!path_inside(actual, real_dir))
        return sc_errorf("%s: external data '%s' was opened as '%s', outside the model folder '%s'", what, path, actual,
                         real_dir);
    return SC_OK;
}

static sc_status decode_external(const Onnx__TensorProto *t, const char *what, const sc_tensor_src *src,
                                 const sc_desc *d, void **data) {
    const char *loc = NULL;
    int64_t offset = 0, length = -1;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const char *k = t->external_data[i]->key ? t->external_data[i]->key : "";
        const char *v = t->external_data[i]->value;
        if (strcmp(k, "location") == 0) loc = v;
        else if (strcmp(k, "offset") == 0) SC_TRY(parse_i64(what, k, v, &offset));
        else if (strcmp(k, "length") == 0) SC_TRY(parse_i64(what, k, v, &length));
    }
    int64_t bytes = sc_desc_bytes(d);
    if (length >= 0 && length != bytes)
        return sc_errorf("%s: external data length %lld does not match %lld bytes for its dims", what,
                         (long long)length, (long long)bytes);
    char *path = NULL, real_dir[PATH_MAX];
    SC_TRY(external_path(what, src->dir, loc, &path, real_dir));
    /* O_NOFOLLOW: path is already resolved, so a symlink here was swapped in after the check. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat sb;
    sc_status st = SC_OK;
    if (fd < 0 || fstat(fd, &sb) != 0)
        st = sc_errorf("%s: cannot open external data '%s': %s", what, path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = sc_errorf("%s: external data '%s' is not a regular file", what, path);
    else if (offset > sb.st_size || bytes > sb.st_size - offset)
        st = sc_errorf("%s: external data '%s' has %lld bytes, too short for %lld bytes at offset %lld (short read)",
                       what, path, (long long)sb.st_size, (long long)bytes, (long long)offset);
    else
        st = external_fd_check(what, fd, &sb, path, real_dir);
    if (!st) {
        *data = tensor_alloc(src, (size_t)bytes);
        if (!*data) st = sc_errorf("%s: out of memory for %lld bytes", what, (long long)bytes);
        else st = read_exact(fd, *data, (size_t)bytes, offset, what, path);
        if (st) {
            tensor_release(src, *data);
            *data = NULL;
        }
    }
    if (fd >= 0) close(fd);
    free(path);
    return st;
}

sc_status onnx_tensor_decode(const Onnx__TensorProto *t, const char *what, const sc_tensor_src *src, sc_tensor *out) {
    memset(out, 0, sizeof *out);
    sc_desc d;
    SC_TRY(onnx_tensor_desc(t, what, &d));
    int64_t bytes = sc_desc_bytes(&d);
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        SC_TRY(decode_external(t, what, src, &d, &out->data));
        out->desc = d;
        return SC_OK;
    }
    if (t->has_raw_data && t->raw_data.len != (size_t)bytes)
        return sc_errorf("%s: raw_data has %zu bytes, expected %lld for %s", what, t->raw_data.len,
                         (long long)bytes, sc_desc_str(&d, (char[96]){0}, 96));
    if ((uint64_t)bytes > (uint64_t)src->max_inline)
        return sc_errorf("%s: %lld bytes of data cannot fit in a file of %zu bytes", what, (long long)bytes,
                         src->max_inline);
    void *data = tensor_alloc(src, (size_t)bytes);
    if (!data) return sc_errorf("%s: out of memory for %lld bytes", what, (long long)bytes);
    sc_status st = SC_OK;
    if (t->has_raw_data) {
        if (bytes) memcpy(data, t->raw_data.data, (size_t)bytes);
    } else {
        st = decode_typed(t, what, &d, data);
    }
    if (st) {
        tensor_release(src, data);
        return st;
    }
    out->desc = d;
    out->data = data;
    return SC_OK;
}

sc_status onnx_read_file(const char *path, uint8_t **buf, size_t *size) {
    *buf = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return sc_errorf("%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return sc_errorf("%s: not a regular file", path);
    }
    if (sb.st_size == 0) {
        fclose(f);
        return sc_errorf("%s: empty file", path);
    }
    uint8_t *p = malloc((size_t)sb.st_size);
    if (!p) {
        fclose(f);
        return sc_errorf("%s: out of memory reading %lld bytes", path, (long long)sb.st_size);
    }
    size_t got = fread(p, 1, (size_t)sb.st_size, f);
    int err = ferror(f);
    fclose(f);
    if (err || got != (size_t)sb.st_size) {
        free(p);
        return sc_errorf("%s: read failed after %zu of %lld bytes", path, got, (long long)sb.st_size);
    }
    *buf = p;
    *size = got;
    return SC_OK;
}

char *onnx_dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

sc_status sc_load_tensor_pb(const char *path, sc_tensor *t, char **name_out) {
    memset(t, 0, sizeof *t);
    if (name_out) *name_out = NULL;
    uint8_t *buf;
    size_t size;
    SC_TRY(onnx_read_file(path, &buf, &size));
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, size, buf);
    if (!tp) {
        free(buf);
        return sc_errorf("%s: not a valid serialized TensorProto (truncated or corrupt)", path);
    }
    char *dir = onnx_dir_of(path);
    char what[300];
    snprintf(what, sizeof what, "tensor '%.256s'", tp->name ? tp->name : "");
    sc_tensor_src src = {.dir = dir, .max_inline = size, .arena = NULL};
    sc_status st = dir ? onnx_tensor_decode(tp, what, &src, t) : sc_errorf("out of memory");
    if (!st && name_out) {
        *name_out = strdup(tp->name ? tp->name : "");
        if (!*name_out) st = sc_errorf("out of memory");
        if (st) {
            free(t->data);
            t->data = NULL;
        }
    }
    free(dir);
    onnx__tensor_proto__free_unpacked(tp, NULL);
    free(buf);
    return sc_status_prefix(st, "%s: ", path);
}
