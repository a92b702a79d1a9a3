/* ResizeGrad (dY, X[, roi, scales, sizes]) -> dX (graph/ops_train.def), modes nearest and linear,
 * f32 and f64: the adjoint (transpose) of the forward Resize of cpu_resize.c. The forward is
 * linear in X: every output element is sum_k w_k X[src_k] (one source with weight 1 for nearest,
 * the 2^m corners with products of (1 - f) / f for n-linear), or the constant extrapolation value
 * outside a tf_crop_and_resize roi. So
 *   dX[src_k] += w_k dY[e]     for every output element e that is not extrapolated.
 * The coordinate maths (coordinate_transformation_mode, nearest_mode, scales or sizes with
 * keep_aspect_ratio_policy, edge clamping) is re-derived here from cpu_resize.c's comment and code,
 * because its helpers are private to that file (owned by another module); the two must change
 * together. Like the forward, cubic mode and antialias are not supported.
 * Leading axes that the resize leaves untouched (N, C of an image) split the work across threads:
 * their slices of dX are disjoint.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_kernels.h"

enum { RG_DY, RG_X, RG_ROI, RG_SCALES, RG_SIZES };

typedef struct {
    double scale[SC_MAX_RANK], length[SC_MAX_RANK], roi_start[SC_MAX_RANK], roi_end[SC_MAX_RANK];
} rg_geom;

static const sc_tensor *rg_input(const sc_kernel_call *c, int i) {
    return c->n_in > i && c->in[i].data && sc_desc_numel(&c->in[i].desc) > 0 ? &c->in[i] : NULL;
}

/* scale and resized length L per axis (cpu_resize.c geom_read, with X = input 1, Y = dY). */
static sc_status rg_geom_read(const sc_kernel_call *c, rg_geom *g) {
    const sc_resize_attrs *a = &c->node->attrs.resize;
    const sc_desc *x = &c->in[RG_X].desc, *y = &c->in[RG_DY].desc;
    int r = x->rank, ax[SC_MAX_RANK], na = a->n_axes ? a->n_axes : r;
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
    const sc_tensor *roi = rg_input(c, RG_ROI);
    if (a->coord == SC_CT_TF_CROP_AND_RESIZE && roi) {
        if (sc_desc_numel(&roi->desc) != 2 * na || !cpu_convert(v, SC_F64, roi->data, roi->desc.dtype, 2 * na))
            return cpu_errorf(c, "roi must hold %d floats", 2 * na);
        for (int i = 0; i < na; i++) {
            g->roi_start[ax[i]] = v[i];
            g->roi_end[ax[i]] = v[na + i];
        }
    }
    const sc_tensor *sc = rg_input(c, RG_SCALES), *sz = rg_input(c, RG_SIZES);
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

/* Input coordinate of output coordinate xo on one axis (ONNX Resize coordinate_transformation_mode). */
static double rg_coord(const sc_resize_attrs *a, double xo, double scale, int64_t in, int64_t out, double len,
                       double rs, double re, bool *outside) {
    *outside = false;
    switch (a->coord) {
    case SC_CT_HALF_PIXEL: return (xo + 0.5) / scale - 0.5;
    case SC_CT_HALF_PIXEL_SYMMETRIC: {
        double offset = (double)in / 2.0 * (1.0 - (double)out / (scale * (double)in));
        return offset + (xo + 0.5) / scale - 0.5;
    }
    case SC_CT_PYTORCH_HALF_PIXEL: return len > 1 ? (xo + 0.5) / scale - 0.5 : 0.0;
    case SC_CT_ALIGN_CORNERS: return len > 1 ? xo * (double)(in - 1) / (len - 1) : 0.0;
    case SC_CT_ASYMMETRIC: return xo / scale;
    case SC_CT_TF_CROP_AND_RESIZE: {
        double xi = out > 1 ? rs * (double)(in - 1) + xo * (re - rs) * (double)(in - 1) / (double)(out - 1)
                            : 0.5 * (rs + re) * (double)(in - 1);
        *outside = xi < 0 || xi > (double)(in - 1);
        return xi;
    }
    default: return xo / scale;
    }
}

static int64_t rg_clamp(int64_t v, int64_t n) { return v < 0 ? 0 : v >= n ? n - 1 : v; }

/* nearest_mode rounding; an integral coordinate is taken as is. */
static int64_t rg_round(double xi, sc_nearest_mode m) {
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

/* Per axis and output index: element offsets of the two taps (-1: extrapolated) and the weight
 * of the second; identity marks an axis the resize leaves unchanged. */
typedef struct {
    int64_t *off0[SC_MAX_RANK], *off1[SC_MAX_RANK];
    double *w1[SC_MAX_RANK];
    bool identity[SC_MAX_RANK];
    void *block;
} rg_tables;

static sc_status rg_tables_build(const sc_kernel_call *c, const rg_geom *g, bool linear, rg_tables *t) {
    const sc_resize_attrs *a = &c->node->attrs.resize;
    const sc_desc *x = &c->in[RG_X].desc, *y = &c->in[RG_DY].desc;
    int64_t total = 0;
    for (int i = 0; i < x->rank; i++) total += y->dims[i];
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
        t->identity[i] = in == out;
        for (int64_t o = 0; o < out; o++) {
            bool outside;
            double xi = rg_coord(a, (double)o, g->scale[i], in, out, g->length[i], g->roi_start[i], g->roi_end[i], &outside);
            int64_t i0, i1;
            double f1 = 0;
            if (outside) {
                t->off0[i][o] = t->off1[i][o] = -1;
                t->w1[i][o] = 0;
                t->identity[i] = false;
                continue;
            }
            if (linear) {
                double f = floor(xi);
                i0 = rg_clamp((int64_t)f, in);
                i1 = rg_clamp((int64_t)f + 1, in);
                f1 = xi - f;
                if (i0 == i1) f1 = 0; /* both taps clamp to one edge element */
            } else {
                i0 = i1 = rg_clamp(rg_round(xi, a->nearest_mode), in);
            }
            t->off0[i][o] = i0 * stride;
            t->off1[i][o] = i1 * stride;
            t->w1[i][o] = f1;
            if (i0 != o || f1 != 0) t->identity[i] = false;
        }
        stride *= in;
    }
    return SC_OK;
}

/* Scatters dY over dX for the output elements [e0, e1). */
#define RESIZE_GRAD_IMPL(T, NAME)                                                                        \
    static void NAME(const rg_tables *t, const sc_desc *y, const T *dy, T *dx, int64_t e0, int64_t e1) { \
        int r = y->rank;                                                                                 \
        for (int64_t e = e0; e < e1; e++) {                                                              \
            int64_t idx[SC_MAX_RANK], f = e, base = 0;                                                   \
            int act[SC_MAX_RANK], m = 0;                                                                 \
            bool ext = false;                                                                            \
            for (int i = r - 1; i >= 0; i--) {                                                           \
                idx[i] = f % y->dims[i];                                                                 \
                f /= y->dims[i];                                                                         \
                int64_t o = t->off0[i][idx[i]];                                                          \
                if (o < 0) ext = true;                                                                   \
                if (t->w1[i][idx[i]] != 0) act[m++] = i;                                                 \
                else base += o;                                                                          \
            }                                                                                            \
            if (ext) continue;                                                                           \
            for (int cn = 0; cn < (1 << m); cn++) {                                                      \
                double w = 1;                                                                            \
                int64_t off = base;                                                                      \
                for (int k = 0; k < m; k++) {                                                            \
                    int i = act[k];                                                                      \
                    double w1 = t->w1[i][idx[i]];                                                        \
                    if (cn >> k & 1) {                                                                   \
                        w *= w1;                                                                         \
                        off += t->off1[i][idx[i]];                                                       \
                    } else {                                                                             \
                        w *= 1 - w1;                                                                     \
                        off += t->off0[i][idx[i]];                                                       \
                    }                                                                                    \
                }                                                                                        \
                dx[off] += (T)(w * (double)dy[e]);                                                       \
            }                                                                                            \
        }                                                                                                \
    }
RESIZE_GRAD_IMPL(float, resize_grad_f32)
RESIZE_GRAD_IMPL(double, resize_grad_f64)

sc_status cpu_resize_grad(const sc_kernel_call *c) {
    const sc_resize_attrs *a = &c->node->attrs.resize;
    const sc_desc *dy = &c->in[RG_DY].desc, *x = &c->in[RG_X].desc;
    if (a->mode == SC_RESIZE_CUBIC) return cpu_errorf(c, "mode 'cubic' is not supported yet (nearest, linear are)");
    if (a->antialias && a->mode != SC_RESIZE_NEAREST) return cpu_errorf(c, "antialias is not supported yet");
    if (x->dtype != SC_F32 && x->dtype != SC_F64) return cpu_errorf(c, "dtype %s not supported", sc_dtype_name(x->dtype));
    if (dy->dtype != x->dtype || dy->rank != x->rank) return cpu_errorf(c, "dY must have X's dtype and rank");
    memset(c->out[0].data, 0, (size_t)sc_desc_bytes(x));
    if (sc_desc_numel(dy) == 0) return SC_OK;
    for (int i = 0; i < x->rank; i++)
        if (x->dims[i] == 0) return cpu_errorf(c, "cannot resize an empty input");
    rg_geom g;
    SC_TRY(rg_geom_read(c, &g));
    rg_tables t;
    SC_TRY(rg_tables_build(c, &g, a->mode == SC_RESIZE_LINEAR, &t));
    /* Output elements of one slice of the untouched leading axes only touch that slice of dX. */
    int lead = 0;
    int64_t slices = 1;
    while (lead < x->rank - 1 && t.identity[lead]) slices *= x->dims[lead++];
    int64_t per = sc_desc_numel(dy) / slices;
    int par = slices > 1 && sc_desc_numel(dy) >= CPU_PAR_MIN;
#pragma omp parallel for if (par)
    for (int64_t s = 0; s < slices; s++) {
        if (x->dtype == SC_F32) resize_grad_f32(&t, dy, c->in[RG_DY].data, c->out[0].data, s * per, (s + 1) * per);
        else resize_grad_f64(&t, dy, c->in[RG_DY].data, c->out[0].data, s * per, (s + 1) * per);
    }
    free(t.block);
    return SC_OK;
}
