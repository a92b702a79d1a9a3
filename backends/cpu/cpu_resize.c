/* Resize (opset 19 semantics; inputs X, roi, scales, sizes), modes nearest and linear (n-linear).
 *
 * Per axis, an output coordinate x maps to an input coordinate x_orig (ONNX spec, computed in
 * double like the reference implementation):
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
 * nearest rounds x_orig by nearest_mode (an integral x_orig is taken as is) and clamps to the edge;
 * linear interpolates between floor(x_orig) and floor + 1, both clamped to the edge (the
 * reference's edge padding). cubic and antialias are not supported yet (clear error).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_kernels.h"

typedef struct {
    double scale[SC_MAX_RANK];
    double length[SC_MAX_RANK]; /* L: scale * in, or the output length when sizes stretch */
    double roi_start[SC_MAX_RANK], roi_end[SC_MAX_RANK];
} resize_geom;

static sc_status geom_read(const sc_kernel_call *c, resize_geom *g) {
    const sc_resize_attrs *a = &c->node->attrs.resize;
    const sc_desc *x = &c->in[0].desc, *y = &c->out[0].desc;
    int r = x->rank, ax[SC_MAX_RANK], na = a->n_axes ? a->n_axes : r;
    if (y->rank != r) return cpu_errorf(c, "output rank %d differs from input rank %d", y->rank, r);
    for (int i = 0; i < na; i++) {
        int64_t v = a->n_axes ? a->axes[i] : i;
        if (v < 0) v += r;
        if (v < 0 || v >= r) return cpu_errorf(c, "axis %lld out of range for rank %d", (long long)a->axes[i], r);
        ax[i] = (int)v;
    }
    for (int i = 0; i < r; i++) {
        g->scale[i] = 1.0;
        g->roi_start[i] = 0.0;
        g->roi_end[i] = 1.0;
    }
    double v[2 * SC_MAX_RANK];
    const sc_tensor *roi = c->n_in > 1 && c->in[1].data ? &c->in[1] : NULL;
    if (a->coord == SC_CT_TF_CROP_AND_RESIZE && roi) {
        if (sc_desc_numel(&roi->desc) != 2 * na || !cpu_convert(v, SC_F64, roi->data, roi->desc.dtype, 2 * na))
            return cpu_errorf(c, "roi must hold %d floats", 2 * na);
        for (int i = 0; i < na; i++) {
            g->roi_start[ax[i]] = v[i];
            g->roi_end[ax[i]] = v[na + i];
        }
    }
    const sc_tensor *sc = c->n_in > 2 && c->in[2].data && sc_desc_numel(&c->in[2].desc) > 0 ? &c->in[2] : NULL;
    const sc_tensor *sz = c->n_in > 3 && c->in[3].data && sc_desc_numel(&c->in[3].desc) > 0 ? &c->in[3] : NULL;
    if (!!sc == !!sz) return cpu_errorf(c, "exactly one of scales and sizes must be given");
    const sc_tensor *t = sc ? sc : sz;
    if (sc_desc_numel(&t->desc) != na || !cpu_convert(v, SC_F64, t->data, t->desc.dtype, na))
        return cpu_errorf(c, "%s must hold %d values", sc ? "scales" : "sizes", na);
    if (sc) {
        for (int i = 0; i < na; i++) {
            if (!(v[i] > 0)) return cpu_errorf(c, "scale %g must be positive", v[i]);
            g->scale[ax[i]] = v[i];
        }
        for (int i = 0; i < r; i++) g->length[i] = g->scale[i] * (double)x->dims[i];
        return SC_OK;
    }
    double common = a->keep_aspect_ratio_policy == SC_KEEP_ASPECT_NOT_LARGER ? INFINITY : 0.0;
    for (int i = 0; i < na; i++) {
        if (x->dims[ax[i]] == 0) return cpu_errorf(c, "cannot resize an empty axis %d", ax[i]);
        double s = v[i] / (double)x->dims[ax[i]];
        g->scale[ax[i]] = s;
        if (a->keep_aspect_ratio_policy == SC_KEEP_ASPECT_NOT_LARGER && s < common) common = s;
        if (a->keep_aspect_ratio_policy == SC_KEEP_ASPECT_NOT_SMALLER && s > common) common = s;
    }
    if (a->keep_aspect_ratio_policy != SC_KEEP_ASPECT_STRETCH)
        for (int i = 0; i < na; i++) g->scale[ax[i]] = common;
    for (int i = 0; i < r; i++)
        g->length[i] = a->keep_aspect_ratio_policy != SC_KEEP_ASPECT_STRETCH ? g->scale[i] * (double)x->dims[i]
                                                                             : (double)y->dims[i];
    return SC_OK;
}

/* x_orig for output coordinate xo on one axis; *outside for tf_crop_and_resize extrapolation. */
static double coord_map(const sc_resize_attrs *a, double xo, double scale, int64_t in, int64_t out, double len,
                        double rs, double re, bool *outside) {
    double xi;
    *outside = false;
    switch (a->coord) {
    case SC_CT_HALF_PIXEL: xi = (xo + 0.5) / scale - 0.5; break;
    case SC_CT_HALF_PIXEL_SYMMETRIC: {
        double adjustment = (double)out / (scale * (double)in);
        double offset = (double)in / 2.0 * (1.0 - adjustment);
        xi = offset + (xo + 0.5) / scale - 0.5;
        break;
    }
    case SC_CT_PYTORCH_HALF_PIXEL: xi = len > 1 ? (xo + 0.5) / scale - 0.5 : 0.0; break;
    case SC_CT_ALIGN_CORNERS: xi = len > 1 ? xo * (double)(in - 1) / (len - 1) : 0.0; break;
    case SC_CT_ASYMMETRIC: xi = xo / scale; break;
    case SC_CT_TF_CROP_AND_RESIZE:
        xi = out > 1 ? rs * (double)(in - 1) + xo * (re - rs) * (double)(in - 1) / (double)(out - 1)
                     : 0.5 * (rs + re) * (double)(in - 1);
        *outside = xi < 0 || xi > (double)(in - 1);
        break;
    default: xi = xo / scale; break;
    }
    return xi;
}

static int64_t clampi(int64_t v, int64_t n) { return v < 0 ? 0 : v >= n ? n - 1 : v; }

static int64_t nearest_round(double xi, sc_nearest_mode m) {
    double f = floor(xi);
    if (xi == f) return (int64_t)f;
    double frac = xi - f;
    switch (m) {
    case SC_NEAREST_ROUND_PREFER_FLOOR: return (int64_t)(frac <= 0.5 ? f : f + 1);
    case SC_NEAREST_ROUND_PREFER_CEIL: return (int64_t)(frac < 0.5 ? f : f + 1);
    case SC_NEAREST_FLOOR: return (int64_t)f;
    default: return (int64_t)f + 1;
    }
}

/* Per-axis tables: input offsets (elements) of the two neighbours, weight of the second, and -1
 * offsets marking extrapolated coordinates. Laid out as [axis][output index]. */
typedef struct {
    int rank;
    int64_t *off0[SC_MAX_RANK], *off1[SC_MAX_RANK];
    double *w1[SC_MAX_RANK];
    bool active[SC_MAX_RANK]; /* some weight is non-zero: the axis needs two taps */
    void *block;
} resize_tables;

static sc_status tables_build(const sc_kernel_call *c, const resize_geom *g, bool linear, resize_tables *t) {
    const sc_resize_attrs *a = &c->node->attrs.resize;
    const sc_desc *x = &c->in[0].desc, *y = &c->out[0].desc;
    int64_t total = 0;
    for (int i = 0; i < x->rank; i++) total += y->dims[i];
    t->rank = x->rank;
    t->block = malloc((size_t)(total ? total : 1) * (2 * sizeof(int64_t) + sizeof(double)));
    if (!t->block) return cpu_errorf(c, "out of memory");
    int64_t *ip = t->block;
    double *wp = (double *)(ip + 2 * total);
    int64_t stride = 1;
    for (int i = x->rank - 1; i >= 0; i--) {
        int64_t in = x->dims[i], out = y->dims[i];
        t->off0[i] = ip;
        t->off1[i] = ip + out;
        t->w1[i] = wp;
        ip += 2 * out;
        wp += out;
        t->active[i] = false;
        for (int64_t o = 0; o < out; o++) {
            bool outside;
            double xi = coord_map(a, (double)o, g->scale[i], in, out, g->length[i], g->roi_start[i], g->roi_end[i], &outside);
            if (outside) {
                t->off0[i][o] = t->off1[i][o] = -1;
                t->w1[i][o] = 0;
                continue;
            }
            if (linear) {
                double f = floor(xi);
                t->off0[i][o] = clampi((int64_t)f, in) * stride;
                t->off1[i][o] = clampi((int64_t)f + 1, in) * stride;
                t->w1[i][o] = xi - f;
                if (t->w1[i][o] != 0 && t->off0[i][o] != t->off1[i][o]) t->active[i] = true;
            } else {
                t->off0[i][o] = t->off1[i][o] = clampi(nearest_round(xi, a->nearest_mode), in) * stride;
                t->w1[i][o] = 0;
            }
        }
        stride *= in;
    }
    return SC_OK;
}

/* Nearest: each output element copies one input element (any dtype). */
static void resize_nearest(const resize_tables *t, const sc_desc *y, const char *x, char *out, size_t es,
                           const void *extrap) {
    int r = t->rank;
    int64_t inner = r ? y->dims[r - 1] : 1, outer = sc_desc_numel(y) / (inner ? inner : 1);
    if (inner == 0) return;
    int par = outer * inner >= CPU_PAR_MIN && outer > 1;
#pragma omp parallel for if (par)
    for (int64_t row = 0; row < outer; row++) {
        int64_t f = row, off = 0;
        bool ext = false;
        for (int i = r - 2; i >= 0; i--) {
            int64_t o = t->off0[i][f % y->dims[i]];
            f /= y->dims[i];
            if (o < 0) ext = true;
            off += o;
        }
        char *orow = out + row * inner * (int64_t)es;
        const int64_t *last = r ? t->off0[r - 1] : NULL;
        for (int64_t j = 0; j < inner; j++) {
            int64_t o = last ? last[j] : 0;
            const void *src = ext || o < 0 ? extrap : (const void *)(x + (off + o) * (int64_t)es);
            memcpy(orow + j * (int64_t)es, src, es);
        }
    }
}

/* n-linear: sum over the 2^m corners of the active axes, weights the product of 1-w / w. */
#define RESIZE_LINEAR(NAME, T)                                                                     \
    static void NAME(const resize_tables *t, const sc_desc *y, const T *x, T *out, T extrap) {      \
        int r = t->rank, act[SC_MAX_RANK], m = 0;                                                  \
        for (int i = 0; i < r; i++)                                                                \
            if (t->active[i]) act[m++] = i;                                                        \
        int64_t n = sc_desc_numel(y);                                                              \
        int par = n >= CPU_PAR_MIN;                                                                \
        _Pragma("omp parallel for if(par)") for (int64_t e = 0; e < n; e++) {                      \
            int64_t idx[SC_MAX_RANK], f = e, base = 0;                                             \
            bool ext = false;                                                                      \
            for (int i = r - 1; i >= 0; i--) {                                                     \
                idx[i] = f % y->dims[i];                                                           \
                f /= y->dims[i];                                                                   \
                int64_t o = t->off0[i][idx[i]];                                                    \
                if (o < 0) ext = true;                                                             \
                if (!t->active[i]) base += o;                                                      \
            }                                                                                      \
            if (ext) {                                                                             \
                out[e] = extrap;                                                                   \
                continue;                                                                          \
            }                                                                                      \
            double acc = 0;                                                                        \
            for (int cn = 0; cn < (1 << m); cn++) {                                                \
                double w = 1;                                                                      \
                int64_t off = base;                                                                \
                for (int k = 0; k < m; k++) {                                                      \
                    int i = act[k];                                                                \
                    double w1 = t->w1[i][idx[i]];                                                  \
                    if (cn >> k & 1) {                                                             \
                        w *= w1;                                                                   \
                        off += t->off1[i][idx[i]];                                                 \
                    } else {                                                                       \
                        w *= 1 - w1;                                                               \
                        off += t->off0[i][idx[i]];                                                 \
                    }                                                                              \
                }                                                                                  \
                if (w != 0) acc += w * (double)x[off];                                             \
            }                                                                                      \
            out[e] = (T)acc;                                                                       \
        }                                                                                          \
    }
RESIZE_LINEAR(resize_linear_f32, float)
RESIZE_LINEAR(resize_linear_f64, double)

sc_status cpu_resize(const sc_kernel_call *c) {
    const sc_resize_attrs *a = &c->node->attrs.resize;
    const sc_desc *x = &c->in[0].desc, *y = &c->out[0].desc;
    if (a->mode == SC_RESIZE_CUBIC) return cpu_errorf(c, "mode 'cubic' is not supported yet (nearest, linear are)");
    if (a->antialias && a->mode != SC_RESIZE_NEAREST) return cpu_errorf(c, "antialias is not supported yet");
    bool linear = a->mode == SC_RESIZE_LINEAR;
    if (linear && x->dtype != SC_F32 && x->dtype != SC_F64)
        return cpu_errorf(c, "linear mode supports f32 and f64, not %s", sc_dtype_name(x->dtype));
    if (sc_desc_numel(y) == 0) return SC_OK;
    for (int i = 0; i < x->rank; i++)
        if (x->dims[i] == 0) return cpu_errorf(c, "cannot resize an empty input");
    resize_geom g;
    SC_TRY(geom_read(c, &g));
    resize_tables t;
    SC_TRY(tables_build(c, &g, linear, &t));
    double ev = a->extrapolation_value;
    if (!linear) {
        unsigned char extrap[16] = {0};
        cpu_convert(extrap, x->dtype, &ev, SC_F64, 1);
        resize_nearest(&t, y, c->in[0].data, c->out[0].data, sc_dtype_size(x->dtype), extrap);
    } else if (x->dtype == SC_F32) {
        resize_linear_f32(&t, y, c->in[0].data, c->out[0].data, (float)ev);
    } else {
        resize_linear_f64(&t, y, c->in[0].data, c->out[0].data, ev);
    }
    free(t.block);
    return SC_OK;
}
