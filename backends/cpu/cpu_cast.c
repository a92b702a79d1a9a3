/* Cast and the dtype conversion helper shared by element-wise kernels.
 *
 * ONNX Cast: float -> integer truncates toward zero (C conversion; out-of-range values are
 * whatever the hardware gives, as in onnxruntime), anything -> bool is x != 0, bool -> number is
 * 0 or 1, f64 -> f32 / f16 round to nearest even. bf16 goes through f32 (round to nearest even on
 * the way down; NaN stays NaN). Strings are not supported.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_kernels.h"

void cpu_copy(void *dst, const void *src, int64_t n_bytes) {
    if (dst == src || n_bytes <= 0) return;
    if (n_bytes < 4 * CPU_PAR_MIN || omp_get_max_threads() == 1) {
        memcpy(dst, src, (size_t)n_bytes);
        return;
    }
#pragma omp parallel
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t chunk = ((n_bytes + nt - 1) / nt + 63) / 64 * 64;
        int64_t lo = (int64_t)t * chunk, hi = lo + chunk < n_bytes ? lo + chunk : n_bytes;
        if (lo < hi) memcpy((char *)dst + lo, (const char *)src + lo, (size_t)(hi - lo));
    }
}

/* Every dtype the typed conversion switch covers; bool is handled apart (x != 0). */
#define CAST_SRC(X, ...)                                                                           \
    X(SC_F32, float, __VA_ARGS__) X(SC_F64, double, __VA_ARGS__) X(SC_F16, _Float16, __VA_ARGS__)  \
    X(SC_I8, int8_t, __VA_ARGS__) X(SC_U8, uint8_t, __VA_ARGS__) X(SC_I16, int16_t, __VA_ARGS__)   \
    X(SC_U16, uint16_t, __VA_ARGS__) X(SC_I32, int32_t, __VA_ARGS__)                               \
    X(SC_U32, uint32_t, __VA_ARGS__) X(SC_I64, int64_t, __VA_ARGS__)                               \
    X(SC_U64, uint64_t, __VA_ARGS__) X(SC_BOOL, uint8_t, __VA_ARGS__)
#define CAST_DST(X, ...)                                                                           \
    X(SC_F32, float, __VA_ARGS__) X(SC_F64, double, __VA_ARGS__) X(SC_F16, _Float16, __VA_ARGS__)  \
    X(SC_I8, int8_t, __VA_ARGS__) X(SC_U8, uint8_t, __VA_ARGS__) X(SC_I16, int16_t, __VA_ARGS__)   \
    X(SC_U16, uint16_t, __VA_ARGS__) X(SC_I32, int32_t, __VA_ARGS__)                               \
    X(SC_U32, uint32_t, __VA_ARGS__) X(SC_I64, int64_t, __VA_ARGS__)                               \
    X(SC_U64, uint64_t, __VA_ARGS__)

#define PAIR_CASE(dcode, DT, scode, ST)                                                            \
    case (dcode) * 32 + (scode): {                                                                 \
        const ST *s = src;                                                                         \
        DT *d = dst;                                                                               \
        _Pragma("omp parallel for simd if(par)") for (int64_t i = 0; i < n; i++) d[i] = (DT)s[i];  \
        return true;                                                                               \
    }
#define TO_BOOL_CASE(scode, ST, ...)                                                               \
    case SC_BOOL * 32 + (scode): {                                                                 \
        const ST *s = src;                                                                         \
        uint8_t *d = dst;                                                                          \
        _Pragma("omp parallel for simd if(par)") for (int64_t i = 0; i < n; i++) d[i] = s[i] != 0; \
        return true;                                                                               \
    }
#define SRC_CASES(scode, ST, ...) CAST_DST(DST_CASE, scode, ST)
#define DST_CASE(dcode, DT, scode, ST) PAIR_CASE(dcode, DT, scode, ST)

static bool convert_typed(void *dst, sc_dtype dt, const void *src, sc_dtype st, int64_t n) {
    int par = n >= CPU_PAR_MIN;
    switch ((int)dt * 32 + (int)st) {
        CAST_SRC(SRC_CASES, 0)
        CAST_SRC(TO_BOOL_CASE, 0)
    default: return false;
    }
}

static float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

bool cpu_convert(void *dst, sc_dtype dt, const void *src, sc_dtype st, int64_t n) {
    if (dt == st) {
        size_t es = sc_dtype_size(dt);
        if (!es || dt == SC_STRING) return false;
        cpu_copy(dst, src, n * (int64_t)es);
        return true;
    }
    if (st != SC_BF16 && dt != SC_BF16) return convert_typed(dst, dt, src, st, n);
    float *tmp = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!tmp) return false;
    bool ok = true;
    if (st == SC_BF16) {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++) tmp[i] = bf16_to_f32(s[i]);
        ok = convert_typed(dst, dt, tmp, SC_F32, n) || dt == SC_F32;
        if (dt == SC_F32) memcpy(dst, tmp, (size_t)n * sizeof(float));
    } else {
        ok = st == SC_F32 ? (memcpy(tmp, src, (size_t)n * sizeof(float)), true)
                          : convert_typed(tmp, SC_F32, src, st, n);
        uint16_t *d = dst;
        if (ok)
            for (int64_t i = 0; i < n; i++) d[i] = f32_to_bf16(tmp[i]);
    }
    free(tmp);
    return ok;
}

sc_status cpu_cast(const sc_kernel_call *c) {
    const sc_tensor *x = &c->in[0];
    sc_tensor *y = &c->out[0];
    if (!cpu_convert(y->data, y->desc.dtype, x->data, x->desc.dtype, sc_desc_numel(&x->desc)))
        return cpu_errorf(c, "cast from %s to %s not supported", sc_dtype_name(x->desc.dtype),
                          sc_dtype_name(y->desc.dtype));
    return SC_OK;
}
