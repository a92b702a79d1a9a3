/* core/half.h: the scalar conversions against hand-worked values from IEEE 754's binary16 and
 * bfloat16 encodings, and the array conversions (F16C / AVX-512 where the build has them) against
 * the scalar ones on every f16 pattern and on a sweep of float patterns. numpy is the peer in
 * tests/half_check.py; this test pins the rules a reader finds in core/half.h. Fails through the
 * exit code. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/half.h"
#include "tests/check.h"

static void check_f32_to_f16(float f, uint16_t want) {
    uint16_t got = sc_f32_to_f16(f);
    CHECK(got == want, "f32 %a -> f16 0x%04x, want 0x%04x", (double)f, got, want);
}

static void check_f64_to_f16(double d, uint16_t want) {
    uint16_t got = sc_f64_to_f16(d);
    CHECK(got == want, "f64 %a -> f16 0x%04x, want 0x%04x", d, got, want);
}

static void test_hand_values(void) {
    check_f32_to_f16(1.0f, 0x3c00);
    check_f32_to_f16(-2.0f, 0xc000);
    check_f32_to_f16(0.1f, 0x2e66);                 /* 0.0999755859375 */
    check_f32_to_f16(65504.0f, 0x7bff);             /* largest half */
    check_f32_to_f16(65519.996f, 0x7bff);           /* just below the overflow tie */
    check_f32_to_f16(65520.0f, 0x7c00);             /* tie with odd 0x7bff: rounds to infinity */
    check_f32_to_f16(1.0f + 0x1p-11f, 0x3c00);      /* tie, even stays */
    check_f32_to_f16(1.0f + 3 * 0x1p-11f, 0x3c02);  /* tie, odd rounds up */
    check_f32_to_f16(0x1p-14f, 0x0400);             /* smallest normal */
    check_f32_to_f16(0x1p-24f, 0x0001);             /* smallest subnormal */
    check_f32_to_f16(0x1p-25f, 0x0000);             /* tie between 0 and 2^-24: even 0 */
    check_f32_to_f16(0x1.000002p-25f, 0x0001);      /* just above the tie */
    check_f32_to_f16(-0x1p-26f, 0x8000);            /* signed zero */
    check_f32_to_f16(3 * 0x1p-25f, 0x0002);         /* subnormal tie 1.5 units: even 2 */
    check_f32_to_f16(0x1.ff8p-15f, 0x03ff);         /* largest subnormal */
    check_f32_to_f16(0x1.ffcp-15f, 0x0400);         /* tie above it: even 0x400 */
    check_f32_to_f16(0x1.ffep-15f, 0x0400);         /* rounds up into the normals */
    check_f32_to_f16(INFINITY, 0x7c00);
    check_f32_to_f16(-INFINITY, 0xfc00);
    check_f32_to_f16(sc_f32_from_bits(0x7f800001u), 0x7e00); /* signalling NaN comes back quiet */
    check_f32_to_f16(sc_f32_from_bits(0xffc02000u), 0xfe01); /* payload's top bits kept, sign too */
    /* f64: one rounding, where f32 in between would round twice */
    check_f64_to_f16(1.0 + 0x1p-11 + 0x1p-40, 0x3c01);
    check_f64_to_f16((double)(1.0f + 0x1p-11f), 0x3c00);
    check_f64_to_f16(65520.0, 0x7c00);
    check_f64_to_f16(65519.99999, 0x7bff);
    check_f64_to_f16(0x1p-25, 0x0000);
    check_f64_to_f16(0x1p-25 + 0x1p-60, 0x0001);
    check_f64_to_f16(-0x1.ffep-15, 0x8400);
    check_f64_to_f16(NAN, 0x7e00);
    /* widening */
    CHECK(sc_f16_to_f32(0x0001) == 0x1p-24f, "f16 0x0001 -> %a", (double)sc_f16_to_f32(0x0001));
    CHECK(sc_f16_to_f32(0x83ff) == -0x1.ff8p-15f, "f16 0x83ff -> %a", (double)sc_f16_to_f32(0x83ff));
    CHECK(sc_f32_bits(sc_f16_to_f32(0x7c01)) == 0x7fc02000u, "f16 sNaN 0x7c01 -> 0x%08x", sc_f32_bits(sc_f16_to_f32(0x7c01)));
    CHECK(sc_f32_bits(sc_f16_to_f32(0x8000)) == 0x80000000u, "f16 -0 keeps its sign");
    /* bf16 */
    CHECK(sc_f32_to_bf16(1.00390625f) == 0x3f80, "bf16 tie to even");
    CHECK(sc_f32_to_bf16(1.01171875f) == 0x3f82, "bf16 tie, odd rounds up");
    CHECK(sc_f32_to_bf16(sc_f32_from_bits(0x7f7fffffu)) == 0x7f80, "bf16 overflow to infinity");
    CHECK(sc_f32_to_bf16(sc_f32_from_bits(0x7f800001u)) == 0x7fc0, "bf16 NaN stays NaN, quiet");
    CHECK(sc_bf16_to_f32(0xc040) == -3.0f, "bf16 0xc040 -> -3");
}

/* Every f16 pattern through both widening paths; each widened value and the float patterns of a
 * sweep through both narrowing paths. The array path must equal the scalar one bit for bit. */
static void test_array_paths(void) {
    enum { N = 65536, SWEEP = 1 << 20 };
    uint16_t *h = malloc(N * sizeof *h), *a16 = malloc(SWEEP * sizeof *a16);
    float *f = malloc(SWEEP * sizeof *f);
    if (!h || !a16 || !f) abort();
    for (int i = 0; i < N; i++) h[i] = (uint16_t)i;
    sc_f16_to_f32_n(f, h, N);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += sc_f32_bits(f[i]) != sc_f32_bits(sc_f16_to_f32(h[i]));
    CHECK(bad == 0, "sc_f16_to_f32_n differs from sc_f16_to_f32 on %d of 65536 halves", bad);
    for (int i = 0; i < N; i++) h[i] = (uint16_t)(i * 40503u); /* a permutation: odd multiplier */
    sc_f16_to_f32_n(f, h, N);
    sc_f32_to_f16_n(a16, f, N);
    bad = 0;
    for (int i = 0; i < N; i++) bad += a16[i] != sc_f32_to_f16(f[i]);
    CHECK(bad == 0, "sc_f32_to_f16_n differs from sc_f32_to_f16 on %d widened halves", bad);
    /* a stride through all 2^32 float patterns, plus each pattern's neighbour (ties and their ulps) */
    for (uint32_t i = 0; i < SWEEP; i++) f[i] = sc_f32_from_bits(i * 4099u + (i & 1) * 0x1000u);
    sc_f32_to_f16_n(a16, f, SWEEP);
    bad = 0;
    for (int i = 0; i < SWEEP; i++) bad += a16[i] != sc_f32_to_f16(f[i]);
    CHECK(bad == 0, "sc_f32_to_f16_n differs from sc_f32_to_f16 on %d of %d float patterns", bad, SWEEP);
    sc_f32_to_bf16_n(a16, f, SWEEP);
    bad = 0;
    for (int i = 0; i < SWEEP; i++) bad += a16[i] != sc_f32_to_bf16(f[i]);
    CHECK(bad == 0, "sc_f32_to_bf16_n differs from sc_f32_to_bf16 on %d float patterns", bad);
    free(h);
    free(a16);
    free(f);
}

int main(void) {
    test_hand_values();
    test_array_paths();
#if defined(__F16C__)
    const char *path = "F16C";
#else
    const char *path = "scalar";
#endif
    if (failures) {
        fprintf(stderr, "test_half: %d failures\n", failures);
        return 1;
    }
    printf("test_half: ok (array conversions: %s path)\n", path);
    return 0;
}
