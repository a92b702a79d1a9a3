/* Pool window geometry shared by MaxPool / AveragePool (cpu_nn_pool.c) and their adjoints
 * (cpu_nn_pool_grad.c), so that a gradient walks exactly the windows its forward read.
 *
 * Window o of spatial dim i covers input positions p = o * stride - pad_begin + t * dil, t < k
 * (pads after auto_pad, from cpu_window_resolve). Only the taps inside the input [0, D) are read;
 * ceil_mode shows only in the output size, and windows are clamped, so any output size is safe.
 * The count_include_pad divisor counts the taps inside the explicitly padded extent
 * [-pad_begin, D + pad_end): with ceil_mode the part of the last window beyond that extent is never
 * counted (as onnxruntime and PyTorch do); without it, the divisor is the taps inside the input.
 * MaxPool picks the FIRST maximum of a window in scan order (dims 0, 1, 2 outermost first), a NaN
 * sticks. Dims are padded to 3 (size 1) as in cpu_window; input positions are row-major indices
 * within one (D0, D1, D2) plane.
 * The hot helpers are static inline so that the kernels keep them inlined.
 */
#ifndef SC_CPU_POOL_GEOM_H
#define SC_CPU_POOL_GEOM_H

#include <math.h>

#include "backends/cpu/cpu_kernels.h"

/* The taps [lo, hi) of window o along dim i that fall inside the input, the first input position
 * `start` (tap 0), and how many taps fall inside the padded extent. */
typedef struct {
    int64_t start, lo, hi, n_padded;
} pool_taps;

/* Checks that x (N, C, spatial...) and y (the pooled tensor, named y_name in errors) fit a pool of
 * the node's kernel_shape, then resolves the window (cpu_window_resolve). */
sc_status pool_geom_resolve(const sc_kernel_call *call, const sc_desc *x, const char *x_name, const sc_desc *y,
                            const char *y_name, cpu_window *w);

static inline int64_t pool_ceil_div(int64_t a, int64_t b) { return a <= 0 ? 0 : (a + b - 1) / b; }

static inline pool_taps pool_taps_of(const cpu_window *w, int i, int64_t o) {
    pool_taps t;
    int64_t d = w->dil[i], k = w->k[i], in = w->in[i];
    t.start = o * w->stride[i] - w->pad_begin[i];
    t.lo = pool_ceil_div(-t.start, d);
    t.hi = pool_ceil_div(in - t.start, d);
    if (t.hi > k) t.hi = k;
    if (t.lo > t.hi) t.lo = t.hi;
    int64_t plo = pool_ceil_div(-w->pad_begin[i] - t.start, d), phi = pool_ceil_div(in + w->pad_end[i] - t.start, d);
    if (phi > k) phi = k;
    t.n_padded = phi > plo ? phi - plo : 0;
    return t;
}

/* AveragePool's divisor for the window with taps a, b, c (0 when the window reads nothing). */
static inline int64_t pool_divisor(const pool_taps *a, const pool_taps *b, const pool_taps *c, bool include_pad) {
    return include_pad ? a->n_padded * b->n_padded * c->n_padded : (a->hi - a->lo) * (b->hi - b->lo) * (c->hi - c->lo);
}

/* The windows of one plane in output order (row-major): t[i] holds the taps of o[i]; a dim's taps
 * are recomputed only when its index changes. Call pool_walk_next once per output element. */
typedef struct {
    int64_t o[3];
    pool_taps t[3];
} pool_walk;

static inline void pool_walk_start(pool_walk *it, const cpu_window *w) {
    for (int i = 0; i < 3; i++) {
        it->o[i] = 0;
        it->t[i] = pool_taps_of(w, i, 0);
    }
}

static inline void pool_walk_next(pool_walk *it, const cpu_window *w) {
    for (int i = 2; i >= 0; i--) {
        if (++it->o[i] < w->out[i] || i == 0) {
            it->t[i] = pool_taps_of(w, i, it->o[i]);
            return;
        }
        it->o[i] = 0;
        it->t[i] = pool_taps_of(w, i, 0);
    }
}

/* Runs the statement that follows once per tap of the window (a, b, c) inside the input, in scan
 * order, with int64_t P the tap's row-major position in the plane. */
#define POOL_FOR_TAPS(w, a, b, c, P)                                                                      \
    for (int64_t t0_ = (a)->lo; t0_ < (a)->hi; t0_++)                                                     \
        for (int64_t t1_ = (b)->lo; t1_ < (b)->hi; t1_++)                                                 \
            for (int64_t P = (((a)->start + t0_ * (w)->dil[0]) * (w)->in[1] + (b)->start + t1_ * (w)->dil[1]) * \
                                 (w)->in[2] +                                                             \
                             (c)->start + (c)->lo * (w)->dil[2],                                          \
                         P##_end_ = P + ((c)->hi - (c)->lo) * (w)->dil[2];                                \
                 P < P##_end_; P += (w)->dil[2])

/* Position of the first maximum of window (a, b, c) of plane xp, -1 when the window reads nothing;
 * *best gets the maximum (-inf for an empty window). */
#define POOL_ARGMAX_IMPL(T, NAME)                                                                         \
    static inline int64_t NAME(const cpu_window *w, const pool_taps *a, const pool_taps *b, const pool_taps *c, \
                               const T *xp, T *best) {                                                    \
        T m = -INFINITY;                                                                                  \
        int64_t at = -1;                                                                                  \
        POOL_FOR_TAPS(w, a, b, c, p) {                                                                    \
            if (xp[p] > m || at < 0) {                                                                    \
                m = xp[p];                                                                                \
                at = p;                                                                                   \
            }                                                                                             \
        }                                                                                                 \
        *best = m;                                                                                        \
        return at;                                                                                        \
    }
POOL_ARGMAX_IMPL(float, pool_argmax_f32)
POOL_ARGMAX_IMPL(double, pool_argmax_f64)

/* Defined in cpu_nn_pool.c (the branch-free forward search), shared with cpu_nn_pool_grad.c.
 * pool_last_dim_taps: pool_taps_of(w, 2, o) for every o < out[2] (malloc'd; NULL when out of memory).
 * pool_first_max_*: the first maximum in scan order, as pool_argmax_* (NaN counts only as the first tap). */
pool_taps *pool_last_dim_taps(const cpu_window *w);
int64_t pool_first_max_f32(const cpu_window *w, const pool_taps *a, const pool_taps *b, const pool_taps *c,
                           const float *xp, float *best);
int64_t pool_first_max_f64(const cpu_window *w, const pool_taps *a, const pool_taps *b, const pool_taps *c,
                           const double *xp, double *best);

/* cpu_nn_pool_2d.c: separable f32 paths for 2-D windows (MaxPool without Indices, AveragePool), the
 * same values as the generic loops (MaxPool exactly, AveragePool up to summation order).
 * pool_2d_f32 returns false when out of memory. */
bool pool_2d_fast_applies(const cpu_window *w);
bool pool_2d_f32(const cpu_window *w, int64_t NC, const float *x, float *y, bool is_max, bool include_pad);

/* cpu_nn_pool_cl.c: channels-last f32 (x (N, D.., C), y likewise; sc_window_attrs.nhwc_in / nhwc_out).
 * pool_max_channels_last_f32: MaxPool values, bit for bit the generic scan's per channel.
 * pool_global_avg_channels_last_f32: y (N, C) = mean over the sp positions of each channel. */
void pool_max_channels_last_f32(const cpu_window *w, int64_t N, int64_t C, const float *x, float *y);
/* pool_avg_channels_last_f32: AveragePool, bit for bit the generic loop's (avg_pool_f32). */
void pool_avg_channels_last_f32(const cpu_window *w, int64_t N, int64_t C, const float *x, float *y, bool include_pad);
/* MaxPool values of NC NCHW planes through the channels-last loop, 16 planes at a time (the same
 * bits); false when out of memory. For planes whose rows are narrow (pool_planes_applies). */
bool pool_max_planes_f32(const cpu_window *w, int64_t NC, const float *x, float *y);
#define POOL_PLANES_MAX_OW 16
void pool_global_avg_channels_last_f32(int64_t N, int64_t C, int64_t sp, const float *x, float *y);

#endif
