/* Vectorisable float math for the f32 fast paths (glibc's expf/erff calls stop `omp simd`).
 *
 * cpu_exp_f32: range reduction x = n ln2 + r with |r| <= ln2/2 (ln2 split in two parts for
 * accuracy), degree-6 polynomial for e^r, then scaling by 2^n through the exponent bits; relative
 * error about 2e-7. Inputs above 88.7 are clamped (no overflow to a wrong sign bit); inputs below
 * -87.3 give exactly 0: the true value is below FLT_MIN, and a clamped 1.2e-38 would make every
 * product with it a denormal. Denormal operands cost ~100 cycles each on x86; a softmax over a causal
 * mask (-FLT_MAX) made the probabilities denormal and the attention-times-V GEMM ran 90x slower
 * (7.3 ms instead of 0.08 ms per GPT-2 layer). NaN stays NaN, which the trainer's NaN detection
 * relies on.
 * cpu_erf_f32: Abramowitz & Stegun 7.1.26, absolute error below 1.5e-7. cpu_erf_rel_f32: the same with
 * a series near 0, for a small relative error.
 */
#ifndef SC_CPU_MATH_H
#define SC_CPU_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float cpu_exp_f32(float x) {
    float xc = x < -87.3f ? -87.3f : x;
    xc = xc > 88.7f ? 88.7f : xc;
    /* n = round(x / ln2) by the 1.5 * 2^23 trick: adding it leaves n in the low mantissa bits of t
     * (two's complement for negative n). floorf and float-to-int conversions stop gcc 12 from
     * vectorising the loop ("no vectype" / "control flow in loop"); this form is pure arithmetic. */
    float t = xc * 1.44269504f + 12582912.0f;
    float n = t - 12582912.0f;
    uint32_t tb;
    memcpy(&tb, &t, sizeof tb);
    float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    uint32_t u;
    memcpy(&u, &p, sizeof u);
    u += tb << 23; /* adds n to the exponent: n's low 9 bits are all that reach it, n in [-126, 128] */
    float o;
    memcpy(&o, &u, sizeof o);
    o = x < -87.3f ? 0.0f : o;
    return x != x ? x : o;
}

static inline float cpu_erf_f32(float x) {
    float a = fabsf(x);
    float t = 1.0f / (1.0f + 0.3275911f * a);
    float p = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t + 0.254829592f) * t;
    float r = 1.0f - p * cpu_exp_f32(-a * a);
    return x < 0 ? -r : r;
}

/* erf with a small relative error everywhere, for the Erf op itself (whose outputs are compared
 * relatively, unlike Gelu's x * erf): below |x| = 0.5 the Maclaurin series
 *   erf x = 2/sqrt(pi) (x - x^3/3 + x^5/10 - x^7/42 + x^9/216 - x^11/1320 + x^13/9360)
 * (next term below 2e-9 relative there), above it cpu_erf_f32 (absolute 1.5e-7 on values >= 0.52).
 * Both are computed and one selected, so the loop stays branch-free. */
static inline float cpu_erf_rel_f32(float x) {
    float z = x * x;
    float s = ((((((1.0f / 9360) * -z + 1.0f / 1320) * -z + 1.0f / 216) * -z + 1.0f / 42) * -z + 0.1f) * -z + 1.0f / 3) * -z + 1.0f;
    float small = 1.1283791671f * x * s;
    return fabsf(x) < 0.5f ? small : cpu_erf_f32(x);
}

#endif
