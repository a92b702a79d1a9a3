/* Vectorisable float math for the f32 fast paths (glibc's expf/erff calls stop `omp simd`).
 *
 * cpu_exp_f32: range reduction x = n ln2 + r with |r| <= ln2/2 (ln2 split in two parts for
 * accuracy), degree-6 polynomial for e^r, then scaling by 2^n through the exponent bits; relative
 * error about 2e-7. Inputs are clamped to [-87.3, 88.7] (results stay normal floats); NaN stays NaN,
 * which the trainer's NaN detection relies on.
 * cpu_erf_f32: Abramowitz & Stegun 7.1.26, absolute error below 1.5e-7.
 */
#ifndef SC_CPU_MATH_H
#define SC_CPU_MATH_H

#include <math.h>
#include <stdint.h>

static inline float cpu_exp_f32(float x) {
    x = x < -87.3f ? -87.3f : (x > 88.7f ? 88.7f : x);
    float n = floorf(x * 1.44269504f + 0.5f);
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* n is in [-126, 128] after the clamp; NaN maps to 0 so the conversion is defined (p is NaN). */
    int32_t ni = n == n ? (int32_t)n : 0;
    union { float f; uint32_t u; } v = {.f = p};
    v.u += (uint32_t)ni << 23; /* unsigned arithmetic: wraps for negative n, no undefined shift */
    return v.f;
}

static inline float cpu_erf_f32(float x) {
    float a = fabsf(x);
    float t = 1.0f / (1.0f + 0.3275911f * a);
    float p = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t + 0.254829592f) * t;
    float r = 1.0f - p * cpu_exp_f32(-a * a);
    return x < 0 ? -r : r;
}

#endif
