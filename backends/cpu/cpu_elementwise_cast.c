/* Cast and the dtype conversion helper shared by element-wise kernels.
 *
 * ONNX Cast: float -> integer truncates toward zero (C conversion; out-of-range values are
 * whatever the hardware gives, as in onnxruntime), anything -> bool is x != 0, bool -> number is
 * 0 or 1, f64 -> f32 / f16 round to nearest even. Strings are not supported.
 *
 * f16 and bf16 are bit patterns (core/half.h). A conversion from or to one goes through float in
 * blocks: every value of f16, bf16, bool and the integers that fits an f16 is exact in float, so
 * widening loses nothing, and narrowing rounds once. Two exceptions round once from the source:
 * f64 -> f16 directly; f64 -> bf16 goes through f32 (it always has: rounds twice, as onnxruntime).
 * Integers beyond 2^24 become inexact in float but already overflow f16 to infinity.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_kernels.h"
#include "core/half.h"

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
    X(SC_F32, float, __VA_ARGS__) X(SC_F64, double, __VA_ARGS__)                                   \
    X(SC_I8, int8_t, __VA_ARGS__) X(SC_U8, uint8_t, __VA_ARGS__) X(SC_I16, int16_t, __VA_ARGS__)   \
    X(SC_U16, uint16_t, __VA_ARGS__) X(SC_I32, int32_t, __VA_ARGS__)                               \
    X(SC_U32, uint32_t, __VA_ARGS__) X(SC_I64, int64_t, __VA_ARGS__)                               \
    X(SC_U64, uint64_t, __VA_ARGS__) X(SC_BOOL, uint8_t, __VA_ARGS__)
#define CAST_DST(X, ...)                                                                           \
    X(SC_F32, float, __VA_ARGS__) X(SC_F64, double, __VA_ARGS__)                                   \
    X(SC_I8, int8_t, __VA_ARGS__) X(SC_U8, uint8_t, __VA_ARGS__) X(SC_I16, int16_t, __VA_ARGS__)   \
    X(SC_U16, uint16_t, __VA_ARGS__) X(SC_I32, int32_t, __VA_ARGS__)                               \
    X(SC_U32, uint32_t, __VA_ARGS__) X(SC_I64, int64_t, __VA_ARGS__)                               \
    X(SC_U64, uint64_t, __VA_ARGS__)

#define PAIR_CASE(dcode, DT, scode, ST)                                                            \
    case (dcode) * 32 + (scode): {                                                                 \
        const ST *s = src;                                                                         \
        DT *d = dst;                                                                               \
        CPU_SIMD_LOOP(i, n, d[i] = (DT)s[i]);                                                      \
        return true;                                                                               \
    }
#define TO_BOOL_CASE(scode, ST, ...)                                                               \
    case SC_BOOL * 32 + (scode): {                                                                 \
        const ST *s = src;                                                                         \
        uint8_t *d = dst;                                                                          \
        CPU_SIMD_LOOP(i, n, d[i] = s[i] != 0);                                                     \
        return true;                                                                               \
    }
#define SRC_CASES(scode, ST, ...) CAST_DST(DST_CASE, scode, ST)
#define DST_CASE(dcode, DT, scode, ST) PAIR_CASE(dcode, DT, scode, ST)

static bool convert_typed(void *dst, sc_dtype dt, const void *src, sc_dtype st, int64_t n) {
    switch ((int)dt * 32 + (int)st) {
        CAST_SRC(SRC_CASES, 0)
        CAST_SRC(TO_BOOL_CASE, 0)
    default: return false;
    }
}

/* Whether convert_typed handles the pair (a call with no elements touches no memory). */
static bool typed_known(sc_dtype dt, sc_dtype st) { return convert_typed(NULL, dt, NULL, st, 0); }

/* Block of values that one thread converts through a float buffer on its stack. */
#define HALF_BLOCK 1024

static void widen_block(float *tmp, const void *src, sc_dtype st, int64_t n) {
    if (st == SC_F16) sc_f16_to_f32_n(tmp, src, n);
    else if (st == SC_BF16) sc_bf16_to_f32_n(tmp, src, n);
    else convert_typed(tmp, SC_F32, src, st, n);
}

static void narrow_block(void *dst, sc_dtype dt, const float *tmp, int64_t n) {
    if (dt == SC_F16) sc_f32_to_f16_n(dst, tmp, n);
    else if (dt == SC_BF16) sc_f32_to_bf16_n(dst, tmp, n);
    else convert_typed(dst, dt, tmp, SC_F32, n);
}

/* A conversion with f16 or bf16 on one side (not both the same). */
static void convert_half(void *dst, sc_dtype dt, const void *src, sc_dtype st, int64_t n) {
    if (st == SC_F64 && dt == SC_F16) {
        const double *s = src;
        uint16_t *d = dst;
        _Pragma("omp parallel for if(n >= CPU_PAR_MIN)") for (int64_t i = 0; i < n; i++) d[i] = sc_f64_to_f16(s[i]);
        return;
    }
    size_t ses = sc_dtype_size(st), des = sc_dtype_size(dt);
    int64_t n_blocks = (n + HALF_BLOCK - 1) / HALF_BLOCK;
    _Pragma("omp parallel for if(n >= CPU_PAR_MIN)") for (int64_t b = 0; b < n_blocks; b++) {
        float tmp[HALF_BLOCK];
        int64_t lo = b * HALF_BLOCK, len = n - lo < HALF_BLOCK ? n - lo : HALF_BLOCK;
        const void *s = (const char *)src + lo * (int64_t)ses;
        void *d = (char *)dst + lo * (int64_t)des;
        if (st == SC_F32) narrow_block(d, dt, s, len);
        else if (dt == SC_F32) widen_block(d, s, st, len);
        else {
            widen_block(tmp, s, st, len);
            narrow_block(d, dt, tmp, len);
        }
    }
}

bool cpu_convert(void *dst, sc_dtype dt, const void *src, sc_dtype st, int64_t n) {
    if (dt == st) {
        size_t es = sc_dtype_size(dt);
        if (!es || dt == SC_STRING) return false;
        cpu_copy(dst, src, n * (int64_t)es);
        return true;
    }
    if (!sc_dtype_is_half(st) && !sc_dtype_is_half(dt)) return convert_typed(dst, dt, src, st, n);
    if (!(sc_dtype_is_half(st) || typed_known(SC_F32, st)) || !(sc_dtype_is_half(dt) || typed_known(dt, SC_F32))) return false;
    convert_half(dst, dt, src, st, n);
    return true;
}

sc_status cpu_cast(const sc_kernel_call *c) {
    const sc_tensor *x = &c->in[0];
    sc_tensor *y = &c->out[0];
    if (!cpu_convert(y->data, y->desc.dtype, x->data, x->desc.dtype, sc_desc_numel(&x->desc)))
        return cpu_errorf(c, "cast from %s to %s not supported", sc_dtype_name(x->desc.dtype),
                          sc_dtype_name(y->desc.dtype));
    return SC_OK;
}
