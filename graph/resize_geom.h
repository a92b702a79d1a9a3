/* Resize geometry (ONNX opset 19 semantics) shared by the kernels' tap tables
 * (backends/cpu/cpu_nn_resize_geom.c, which the CUDA backend uses too) and the lowering of cubic
 * and antialiased Resize to MatMuls (graph/pass_resize.c), so every path maps coordinates alike.
 *
 * Per axis, an output coordinate x maps to an input coordinate x_orig (in double, like the ONNX
 * reference implementation):
 *   half_pixel            (x + 0.5) / scale - 0.5
 *   half_pixel_symmetric  offset + (x + 0.5) / scale - 0.5, offset = in/2 (1 - out / (scale in))
 *   pytorch_half_pixel    L > 1 ? (x + 0.5) / scale - 0.5 : 0
 *   align_corners         L > 1 ? x (in - 1) / (L - 1) : 0
 *   asymmetric            x / scale
 *   tf_crop_and_resize    out > 1 ? s (in - 1) + x (e - s)(in - 1) / (out - 1) : (s + e)(in - 1) / 2,
 *                         with roi (s, e); outside [0, in - 1] gives extrapolation_value.
 * L, the resized length, is scale * in as in the ONNX reference implementation and node tests
 * (resize_downsample_scales_linear_align_corners expects 3.142857 from L = 2.4), which is the
 * integer output length whenever sizes are given without an aspect-ratio policy. onnxruntime uses
 * the integer length everywhere and so differs from the node tests for fractional scale * in.
 * scale is the scales input, or out/in from sizes (one common scale over the resized axes under
 * keep_aspect_ratio_policy not_larger / not_smaller). Axes not in `axes` keep scale 1.
 */
#ifndef SC_RESIZE_GEOM_H
#define SC_RESIZE_GEOM_H

#include <stdbool.h>
#include <stddef.h>

#include "graph/attrs.h"
#include "core/tensor.h"

typedef struct {
    double scale[SC_MAX_RANK];
    double length[SC_MAX_RANK]; /* L: scale * in, or the output length when sizes stretch */
    double roi_start[SC_MAX_RANK], roi_end[SC_MAX_RANK];
} sc_resize_geom;

/* The resized axes of a (its axes attribute normalised, or all n of rank r) into ax; false with
 * why when one is out of range. */
bool sc_resize_axes(const sc_resize_attrs *a, int r, int *ax, int *n, char *why, size_t wn);

/* scale, L and roi per axis of x resized to y. roi (2 n values, tf_crop_and_resize only) may be
 * NULL; exactly one of scales and sizes (n values each, n the resized axes) is given. False with
 * why (a sentence) when a scale is not positive or a sized axis is empty. */
bool sc_resize_geom_make(const sc_resize_attrs *a, const sc_desc *x, const sc_desc *y, const double *roi,
                         const double *scales, const double *sizes, sc_resize_geom *g, char *why, size_t wn);

/* x_orig for output coordinate xo of axis i; *outside for tf_crop_and_resize extrapolation. */
double sc_resize_coord(const sc_resize_attrs *a, const sc_resize_geom *g, int i, double xo, int64_t in, int64_t out,
                       bool *outside);

#endif
