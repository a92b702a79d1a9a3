/* 16-bit floats, portably: IEEE binary16 ("f16") and bfloat16 ("bf16") are stored as their bit
 * patterns in uint16_t and converted explicitly. No compiler half type is used: clang 14 accepts
 * _Float16 on x86 only when the target has avx512fp16, so a kernel written with it builds on one
 * CPU and not on the next. Arithmetic on 16-bit values widens to float, computes, and narrows.
 *
 * Rounding is to nearest, ties to even, everywhere:
 * - f32 -> f16: |x| >= 65520 (the largest half plus half an ulp) overflows to infinity; values
 *   below 2^-14 become subnormals (unit 2^-24), and |x| <= 2^-25 becomes a signed zero.
 * - f64 -> f16 rounds once from the double (through float would round twice: 1 + 2^-11 + 2^-40
 *   would become 1 + 2^-11, a tie, then 1 instead of 1 + 2^-10).
 * - NaN stays NaN with its sign: the quiet bit is set and the top payload bits are kept, which is
 *   what the F16C instruction VCVTPS2PH does, so the scalar and vector paths agree bit for bit.
 * - f16 -> f32 and bf16 -> f32 are exact (a signalling NaN comes back quiet, as VCVTPH2PS does).
 *
 * Why float arithmetic then one rounding gives the f16 result of +, -, *, / exactly: float's
 * significand has 24 bits, at least 2 * 11 + 2, so rounding the float result to f16 equals rounding
 * the exact result (Figueroa, "When is double rounding innocuous?", 1995). The same holds for bf16
 * (8 bits) and sqrt.
 *
 * The _n functions convert arrays; with F16C (x86-64-v3 and later) they use the conversion
 * instructions, with the same bits as the scalar functions (tests/half_check.py checks both
 * against numpy on all 65536 halves).
 *
 * The scalar functions are also the CUDA backend's (SC_HALF_FN is __host__ __device__ under nvcc;
 * backends/cuda/cu_widen.cu), so a 16-bit value rounds to the same bits on both backends. */
#ifndef SC_HALF_H
#define SC_HALF_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define SC_HALF_FN static inline __host__ __device__
#else
#define SC_HALF_FN static inline
#endif

SC_HALF_FN uint32_t sc_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

SC_HALF_FN float sc_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Rounds the top bits of a significand m right by `shift` bits, to nearest even. */
SC_HALF_FN uint64_t sc_round_shift_rne(uint64_t m, int shift) {
    uint64_t q = m >> shift, rem = m & ((UINT64_C(1) << shift) - 1), half = UINT64_C(1) << (shift - 1);
    return q + (rem > half || (rem == half && (q & 1)));
}

SC_HALF_FN float sc_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return sc_f32_from_bits(sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0));
    if (e) return sc_f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
    /* zero or subnormal: m * 2^-24, exact in float */
    return sc_f32_from_bits(sign | sc_f32_bits((float)m * 0x1p-24f));
}

SC_HALF_FN uint16_t sc_f32_to_f16(float f) {
    uint32_t x = sc_f32_bits(f), ax = x & 0x7fffffffu;
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    if (ax > 0x7f800000u) return sign | 0x7e00u | (uint16_t)((ax >> 13) & 0x3ffu);
    if (ax >= 0x477ff000u) return sign | 0x7c00u; /* >= 65520, and infinity */
    if (ax >= 0x38800000u) /* normal half: rebias the exponent by 127 - 15, round 13 bits off */
        return sign | (uint16_t)sc_round_shift_rne(ax - 0x38000000u, 13);
    if (ax <= 0x33000000u) return sign; /* |x| <= 2^-25 (a tie at 2^-25 rounds to the even 0) */
    /* subnormal half: x = m * 2^(e - 150) = (m >> (126 - e)) units of 2^-24 */
    int e = (int)(ax >> 23);
    return sign | (uint16_t)sc_round_shift_rne((ax & 0x7fffffu) | 0x800000u, 126 - e);
}

SC_HALF_FN uint16_t sc_f64_to_f16(double d) {
    uint64_t x, ax;
    memcpy(&x, &d, 8);
    ax = x & UINT64_C(0x7fffffffffffffff);
    uint16_t sign = (uint16_t)((x >> 48) & 0x8000u);
    if (ax > UINT64_C(0x7ff0000000000000)) return sign | 0x7e00u | (uint16_t)((ax >> 42) & 0x3ffu);
    if (ax >= UINT64_C(0x40effe0000000000)) return sign | 0x7c00u; /* >= 65520 */
    if (ax >= UINT64_C(0x3f10000000000000))                       /* >= 2^-14: rebias by 1023 - 15 */
        return sign | (uint16_t)sc_round_shift_rne(ax - (UINT64_C(1008) << 52), 42);
    if (ax <= UINT64_C(0x3e60000000000000)) return sign; /* <= 2^-25 */
    int e = (int)(ax >> 52);
    return sign | (uint16_t)sc_round_shift_rne((ax & ((UINT64_C(1) << 52) - 1)) | (UINT64_C(1) << 52), 1051 - e);
}

SC_HALF_FN float sc_bf16_to_f32(uint16_t h) { return sc_f32_from_bits((uint32_t)h << 16); }

/* Nearest even in 32-bit arithmetic without branches, so that array loops vectorise: adding 0x7fff
 * plus the kept part's low bit carries into it exactly when the dropped half is above 0x8000, or
 * equal to it with the kept part odd (sc_round_shift_rne(u, 16); the two agree on all 2^32 inputs).
 * No finite or infinite u overflows; NaN takes the other side of the select. */
SC_HALF_FN uint16_t sc_f32_to_bf16(float f) {
    uint32_t u = sc_f32_bits(f);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((u >> 16) | 0x40u) : (uint16_t)rounded; /* quiet NaN */
}

/* Array conversions (n elements; dst and src do not overlap). */
#ifdef __cplusplus
extern "C" {
#endif
void sc_f16_to_f32_n(float *dst, const uint16_t *src, int64_t n);
void sc_f32_to_f16_n(uint16_t *dst, const float *src, int64_t n);
void sc_bf16_to_f32_n(float *dst, const uint16_t *src, int64_t n);
void sc_f32_to_bf16_n(uint16_t *dst, const float *src, int64_t n);
#ifdef __cplusplus
}
#endif

#endif
