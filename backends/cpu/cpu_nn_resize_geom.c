/* Resize tap tables shared by Resize and ResizeGrad: the math and contract are in cpu_nn_resize_geom.h.
 * Everything here is computed in double, like the ONNX reference implementation.
 */
#include <math.h>
#include <stdlib.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_nn_resize_geom.h"

typedef struct {
    double scale[SC_MAX_RANK];
    double length[SC_MAX_RANK]; /* L: scale * in, or the output length when sizes stretch */
    double roi_start[SC_MAX_RANK], roi_end[SC_MAX_RANK];
} resize_geom;

sc_status resize_mode_check(const sc_kernel_call *c) {
    const sc_resize_attrs *a = &c->node->attrs->resize;
    if (a->mode == SC_RESIZE_CUBIC) return cpu_errorf(c, "mode 'cubic' is not supported yet (nearest, linear are)");
    if (a->antialias && a->mode != SC_RESIZE_NEAREST) return cpu_errorf(c, "antialias is not supported yet");
    return SC_OK;
}

/* scale, resized length L and roi per axis. */
static sc_status geom_read(const sc_kernel_call *c, const resize_operands *op, resize_geom *g) {
    const sc_resize_attrs *a = &c->node->attrs->resize;
    const sc_desc *x = op->x, *y = op->y;
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
    const sc_tensor *roi = op->roi;
    if (a->coord == SC_CT_TF_CROP_AND_RESIZE && roi) {
        if (sc_desc_numel(&roi->desc) != 2 * na || !cpu_convert(v, SC_F64, roi->data, roi->desc.dtype, 2 * na))
            return cpu_errorf(c, "roi must hold %d floats", 2 * na);
        for (int i = 0; i < na; i++) {
            g->roi_start[ax[i]] = v[i];
            g->roi_end[ax[i]] = v[na + i];
        }
    }
    const sc_tensor *sc = op->scales, *sz = op->sizes;
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
    bool stretch = a->keep_aspect_ratio_policy == SC_KEEP_ASPECT_STRETCH;
    double common = a->keep_aspect_ratio_policy == SC_KEEP_ASPECT_NOT_LARGER ? INFINITY : 0.0;
    for (int i = 0; i < na; i++) {
        if (x->dims[ax[i]] == 0) return cpu_errorf(c, "cannot resize an empty axis %d", ax[i]);
        double s = v[i] / (double)x->dims[ax[i]];
        g->scale[ax[i]] = s;
        if (a->keep_aspect_ratio_policy == SC_KEEP_ASPECT_NOT_LARGER && s < common) common = s;
        if (a->keep_aspect_ratio_policy == SC_KEEP_ASPECT_NOT_SMALLER && s > common) common = s;
    }
    if (!stretch)
        for (int i = 0; i < na; i++) g->scale[ax[i]] = common;
    for (int i = 0; i < r; i++) g->length[i] = stretch ? (double)y->dims[i] : g->scale[i] * (double)x->dims[i];
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

/* nearest_mode rounding; an integral coordinate is taken as is. */
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

/* Fills the taps of output index o on axis i (input length in, element stride `stride`). */
static void taps_fill(const sc_resize_attrs *a, const resize_geom *g, bool linear, int i, int64_t in, int64_t out,
                      int64_t stride, int64_t o, resize_tables *t) {
    bool outside;
    double xi = coord_map(a, (double)o, g->scale[i], in, out, g->length[i], g->roi_start[i], g->roi_end[i], &outside);
    if (outside) {
        t->off0[i][o] = t->off1[i][o] = -1;
        t->w1[i][o] = 0;
        t->identity[i] = false;
        return;
    }
    if (linear) {
        double f = floor(xi);
        t->off0[i][o] = clampi((int64_t)f, in) * stride;
        t->off1[i][o] = clampi((int64_t)f + 1, in) * stride;
        t->w1[i][o] = xi - f;
    } else {
        t->off0[i][o] = t->off1[i][o] = clampi(nearest_round(xi, a->nearest_mode), in) * stride;
        t->w1[i][o] = 0;
    }
    bool two = resize_two_taps(t, i, o);
    if (two) t->active[i] = true;
    if (two || t->off0[i][o] != o * stride) t->identity[i] = false;
}

sc_status resize_tables_build(const sc_kernel_call *c, const resize_operands *op, bool linear, resize_tables *t) {
    resize_geom g;
    SC_TRY(geom_read(c, op, &g));
    const sc_resize_attrs *a = &c->node->attrs->resize;
    const sc_desc *x = op->x, *y = op->y;
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
        t->identity[i] = in == out;
        for (int64_t o = 0; o < out; o++) taps_fill(a, &g, linear, i, in, out, stride, o, t);
        stride *= in;
    }
    return SC_OK;
}

void resize_tables_free(resize_tables *t) {
    free(t->block);
    t->block = NULL;
}
