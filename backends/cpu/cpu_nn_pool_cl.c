/* MaxPool (values only), AveragePool and GlobalAveragePool on channels-last f32 activations, (N, D1.., C) in
 * memory while the desc stays (N, C, D1..): the layout graph/pass_fuse.c gives values passed
 * between Convs (sc_window_attrs.nhwc_in / nhwc_out), so ResNet's stem pool and head read the
 * Convs' buffers without a reorder.
 *
 * MaxPool walks the same windows as the generic loop (pool_taps_of, POOL_FOR_TAPS) with the same
 * rule per channel: seeded with the window's first tap, replaced only by a strictly greater tap,
 * so the result is bit for bit the NCHW kernel's; C contiguous channels are one vector per tap.
 * Input and output share the layout. AveragePool does the same with sums, again bit for bit the
 * generic loop's (not the separable 2-D path's, which adds in another order). GlobalAveragePool sums each channel over the positions in
 * order and writes (N, C) means, identical in both layouts since its spatial dims are all 1.
 */
#include <math.h>
#include <stdlib.h>

#include "backends/cpu/cpu_nn_pool_geom.h"

/* Output row (o0, o1) of one image xn, C channels contiguous per position. */
static void max_cl_row(const cpu_window *w, int64_t C, const float *xn, int64_t o0, int64_t o1, float *restrict yr) {
    pool_taps a = pool_taps_of(w, 0, o0), b = pool_taps_of(w, 1, o1);
    for (int64_t o2 = 0; o2 < w->out[2]; o2++) {
        pool_taps c = pool_taps_of(w, 2, o2);
        float *restrict yp = yr + o2 * C;
        bool seeded = false;
        POOL_FOR_TAPS(w, &a, &b, &c, p) {
            const float *xp = xn + p * C;
            if (!seeded) {
                for (int64_t ch = 0; ch < C; ch++) yp[ch] = xp[ch];
                seeded = true;
                continue;
            }
#pragma omp simd
            for (int64_t ch = 0; ch < C; ch++) yp[ch] = xp[ch] > yp[ch] ? xp[ch] : yp[ch];
        }
        if (!seeded)
            for (int64_t ch = 0; ch < C; ch++) yp[ch] = -INFINITY;
    }
}

void pool_max_channels_last_f32(const cpu_window *w, int64_t N, int64_t C, const float *x, float *y) {
    int64_t in_sp = w->in[0] * w->in[1] * w->in[2], O0 = w->out[0], O1 = w->out[1], O2 = w->out[2];
#pragma omp parallel for collapse(2)
    for (int64_t n = 0; n < N; n++)
        for (int64_t o0 = 0; o0 < O0; o0++)
            for (int64_t o1 = 0; o1 < O1; o1++)
                max_cl_row(w, C, x + n * in_sp * C, o0, o1, y + (((n * O0 + o0) * O1 + o1) * O2) * C);
}

bool pool_max_planes_f32(const cpu_window *w, int64_t NC, const float *x, float *y) {
    enum { CB = 16 }; /* planes per block: one AVX-512 vector of floats */
    int64_t in_sp = w->in[0] * w->in[1] * w->in[2], out_sp = w->out[0] * w->out[1] * w->out[2];
    bool ok = true;
#pragma omp parallel
    {
        float *xs = malloc(sizeof(float) * (size_t)((in_sp + out_sp) * CB + 1)), *ys = xs ? xs + in_sp * CB : NULL;
        if (!xs) {
#pragma omp atomic write
            ok = false;
        }
#pragma omp for
        for (int64_t c0 = 0; c0 < NC; c0 += CB) {
            if (!xs) continue;
            int64_t cb = NC - c0 < CB ? NC - c0 : CB;
            for (int64_t ch = 0; ch < cb; ch++)
                for (int64_t p = 0; p < in_sp; p++) xs[p * cb + ch] = x[(c0 + ch) * in_sp + p];
            for (int64_t o0 = 0; o0 < w->out[0]; o0++)
                for (int64_t o1 = 0; o1 < w->out[1]; o1++)
                    max_cl_row(w, cb, xs, o0, o1, ys + (o0 * w->out[1] + o1) * w->out[2] * cb);
            for (int64_t ch = 0; ch < cb; ch++)
                for (int64_t q = 0; q < out_sp; q++) y[(c0 + ch) * out_sp + q] = ys[q * cb + ch];
        }
        free(xs);
    }
    return ok;
}

/* Output row (o0, o1) of an AveragePool: each channel sums its taps in the generic loop's order
 * from +0 and divides by the same divisor, so the bits are avg_pool_f32's. */
static void avg_cl_row(const cpu_window *w, int64_t C, const float *xn, int64_t o0, int64_t o1, bool include_pad,
                       float *restrict yr) {
    pool_taps a = pool_taps_of(w, 0, o0), b = pool_taps_of(w, 1, o1);
    for (int64_t o2 = 0; o2 < w->out[2]; o2++) {
        pool_taps c = pool_taps_of(w, 2, o2);
        float *restrict yp = yr + o2 * C;
        for (int64_t ch = 0; ch < C; ch++) yp[ch] = 0.0f;
        POOL_FOR_TAPS(w, &a, &b, &c, p) {
            const float *xp = xn + p * C;
#pragma omp simd
            for (int64_t ch = 0; ch < C; ch++) yp[ch] += xp[ch];
        }
        int64_t n = pool_divisor(&a, &b, &c, include_pad);
        float d = (float)n;
        for (int64_t ch = 0; ch < C; ch++) yp[ch] = n > 0 ? yp[ch] / d : NAN;
    }
}

void pool_avg_channels_last_f32(const cpu_window *w, int64_t N, int64_t C, const float *x, float *y, bool include_pad) {
    int64_t in_sp = w->in[0] * w->in[1] * w->in[2], O0 = w->out[0], O1 = w->out[1], O2 = w->out[2];
#pragma omp parallel for collapse(2)
    for (int64_t n = 0; n < N; n++)
        for (int64_t o0 = 0; o0 < O0; o0++)
            for (int64_t o1 = 0; o1 < O1; o1++)
                avg_cl_row(w, C, x + n * in_sp * C, o0, o1, include_pad, y + (((n * O0 + o0) * O1 + o1) * O2) * C);
}

void pool_global_avg_channels_last_f32(int64_t N, int64_t C, int64_t sp, const float *x, float *y) {
#pragma omp parallel for
    for (int64_t n = 0; n < N; n++) {
        float *restrict yn = y + n * C;
        const float *xn = x + n * sp * C;
        for (int64_t ch = 0; ch < C; ch++) yn[ch] = 0.0f;
        for (int64_t j = 0; j < sp; j++)
#pragma omp simd
            for (int64_t ch = 0; ch < C; ch++) yn[ch] += xn[j * C + ch];
        for (int64_t ch = 0; ch < C; ch++) yn[ch] /= (float)sp;
    }
}
