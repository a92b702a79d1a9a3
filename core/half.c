/* Array conversions between float and the 16-bit formats (core/half.h). With F16C the f16 loops
 * use VCVTPH2PS / VCVTPS2PH, 8 or 16 values at a time; the scalar functions finish the tail and are
 * the whole path on targets without F16C. Both give the same bits (tests/half_check.py). */
#include "core/half.h"

#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

void sc_f16_to_f32_n(float *dst, const uint16_t *src, int64_t n) {
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const void *)(src + i))));
#endif
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const void *)(src + i))));
#endif
    for (; i < n; i++) dst[i] = sc_f16_to_f32(src[i]);
}

void sc_f32_to_f16_n(uint16_t *dst, const float *src, int64_t n) {
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((void *)(dst + i), _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((void *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
    for (; i < n; i++) dst[i] = sc_f32_to_f16(src[i]);
}

/* bf16 is the top half of a float: the compiler vectorises these loops on any target. */
void sc_bf16_to_f32_n(float *dst, const uint16_t *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = sc_bf16_to_f32(src[i]);
}

void sc_f32_to_bf16_n(uint16_t *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = sc_f32_to_bf16(src[i]);
}
