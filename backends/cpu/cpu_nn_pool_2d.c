/* Separable f32 fast paths for 2-D MaxPool (values only) and AveragePool (cpu_nn_pool_geom.h).
 *
 * A 2-D window is a rectangle of rows x columns, so each plane is pooled in two passes:
 *   H pass: h[r][ow] = reduction over the column taps of window ow, for every input row r;
 *   V pass: y[oh][ow] = reduction over h[r][ow] for the row taps r of window oh.
 * Each input element is read once per column window instead of once per 2-D window, and both passes
 * run over contiguous (or constant-stride) columns that the compiler vectorises. The taps are those
 * of pool_taps_of, so pads, strides, dilations and ceil_mode behave exactly as in the generic loops.
 *
 * MaxPool keeps the generic result bit for bit: the generic scan is seeded with the window's first
 * tap f and replaces m only when a tap is strictly greater, so its value is NaN when f is NaN and
 * otherwise the first maximum (in scan order) of the non-NaN taps. The H pass seeds with -inf and
 * keeps the first non-NaN maximum of a row segment; the V pass starts from the first row's value,
 * or f when f is NaN, and takes a later row only when strictly greater, which is the same scan
 * split at row boundaries (ties between -0 and +0 resolve to the same element too).
 * AveragePool sums each row segment, then the rows: the same taps and divisor (pool_divisor) as the
 * generic loop, summed in another order (f32 rounding differs in the last bits).
 */
#include <math.h>
#include <stdlib.h>

#include "backends/cpu/cpu_nn_pool_geom.h"

bool pool_2d_fast_applies(const cpu_window *w) { return w->n_spatial == 2 && w->in[1] > 0 && w->out[1] > 0; }

/* The range [lo, hi) of output columns whose window lies wholly inside the row (all k taps read). */
static void interior_cols(const cpu_window *w, int64_t *lo, int64_t *hi) {
    int64_t s = w->stride[1], pb = w->pad_begin[1], ext = (w->k[1] - 1) * w->dil[1] + 1;
    int64_t a = pool_ceil_div(pb, s), b = w->in[1] - ext + pb >= 0 ? (w->in[1] - ext + pb) / s + 1 : 0;
    if (b > w->out[1]) b = w->out[1];
    if (a > b) a = b;
    *lo = a;
    *hi = b;
}

/* H pass of one input row: hr[ow] = first non-NaN maximum (or the sum) of the row's taps of column
 * window ow; -inf (or 0) for a window that reads nothing. */
static void hpass_row(const cpu_window *w, const pool_taps *ct, int64_t c_lo, int64_t c_hi, const float *row,
                      float *hr, bool is_max) {
    int64_t s = w->stride[1], d = w->dil[1], k = w->k[1], OW = w->out[1];
    for (int64_t ow = 0; ow < OW; ow++) {
        if (ow == c_lo) ow = c_hi;
        if (ow >= OW) break;
        float m = is_max ? -INFINITY : 0.0f;
        for (int64_t t = ct[ow].lo; t < ct[ow].hi; t++) {
            float v = row[ct[ow].start + t * d];
            m = is_max ? (v > m ? v : m) : m + v;
        }
        hr[ow] = m;
    }
    if (c_lo >= c_hi) return;
    const float *base = row + c_lo * s - w->pad_begin[1];
    float *restrict out = hr + c_lo;
    int64_t n = c_hi - c_lo;
    if (is_max) {
#pragma omp simd
        for (int64_t j = 0; j < n; j++) out[j] = -INFINITY;
        for (int64_t t = 0; t < k; t++)
#pragma omp simd
            for (int64_t j = 0; j < n; j++) {
                float v = base[j * s + t * d];
                out[j] = v > out[j] ? v : out[j];
            }
    } else {
#pragma omp simd
        for (int64_t j = 0; j < n; j++) out[j] = 0.0f;
        for (int64_t t = 0; t < k; t++)
#pragma omp simd
            for (int64_t j = 0; j < n; j++) out[j] += base[j * s + t * d];
    }
}

/* V pass of one output row oh of plane xp, reading the H rows h (in[0] x out[1]). first_col[ow] is
 * the input column of window ow's first tap, -1 when the column window is empty. */
static void vpass_max(const cpu_window *w, const pool_taps *a, const float *h, const float *xp,
                      const int64_t *first_col, float *restrict y) {
    int64_t OW = w->out[1];
    if (a->lo >= a->hi) {
        for (int64_t ow = 0; ow < OW; ow++) y[ow] = -INFINITY;
        return;
    }
    int64_t r0 = a->start + a->lo * w->dil[0];
    const float *h0 = h + r0 * OW, *x0 = xp + r0 * w->in[1];
    for (int64_t ow = 0; ow < OW; ow++) {
        float f = first_col[ow] >= 0 ? x0[first_col[ow]] : 0.0f;
        y[ow] = f != f ? f : h0[ow];
    }
    for (int64_t t = a->lo + 1; t < a->hi; t++) {
        const float *hr = h + (a->start + t * w->dil[0]) * OW;
#pragma omp simd
        for (int64_t ow = 0; ow < OW; ow++) y[ow] = hr[ow] > y[ow] ? hr[ow] : y[ow];
    }
}

static void vpass_avg(const cpu_window *w, const pool_taps *a, const pool_taps *ct, const pool_taps *one,
                      const float *h, bool include_pad, float *restrict y) {
    int64_t OW = w->out[1];
    for (int64_t ow = 0; ow < OW; ow++) y[ow] = 0.0f;
    for (int64_t t = a->lo; t < a->hi; t++) {
        const float *hr = h + (a->start + t * w->dil[0]) * OW;
#pragma omp simd
        for (int64_t ow = 0; ow < OW; ow++) y[ow] += hr[ow];
    }
    for (int64_t ow = 0; ow < OW; ow++) {
        int64_t n = pool_divisor(a, &ct[ow], one, include_pad);
        y[ow] = n > 0 ? y[ow] / (float)n : NAN;
    }
}

/* Pools NC planes; false when out of memory (nothing written then is relied upon). */
bool pool_2d_f32(const cpu_window *w, int64_t NC, const float *x, float *y, bool is_max, bool include_pad) {
    int64_t H = w->in[0], W = w->in[1], OH = w->out[0], OW = w->out[1];
    pool_taps *ct = malloc(sizeof *ct * (size_t)OW);
    int64_t *first_col = malloc(sizeof *first_col * (size_t)OW);
    bool ok = ct && first_col;
    if (ok) {
        for (int64_t ow = 0; ow < OW; ow++) {
            ct[ow] = pool_taps_of(w, 1, ow);
            first_col[ow] = ct[ow].lo < ct[ow].hi ? ct[ow].start + ct[ow].lo * w->dil[1] : -1;
        }
        pool_taps one = pool_taps_of(w, 2, 0);
        int64_t c_lo, c_hi;
        interior_cols(w, &c_lo, &c_hi);
#pragma omp parallel
        {
            float *h = malloc(sizeof *h * (size_t)(H * OW > 0 ? H * OW : 1));
            if (!h) {
#pragma omp atomic write
                ok = false;
            }
#pragma omp for
            for (int64_t nc = 0; nc < NC; nc++) {
                if (!h) continue;
                const float *xp = x + nc * H * W;
                for (int64_t r = 0; r < H; r++) hpass_row(w, ct, c_lo, c_hi, xp + r * W, h + r * OW, is_max);
                for (int64_t oh = 0; oh < OH; oh++) {
                    pool_taps a = pool_taps_of(w, 0, oh);
                    float *yr = y + (nc * OH + oh) * OW;
                    if (is_max) vpass_max(w, &a, h, xp, first_col, yr);
                    else vpass_avg(w, &a, ct, &one, h, include_pad, yr);
                }
            }
            free(h);
        }
    }
    free(ct);
    free(first_col);
    return ok;
}
