/* Resize geometry: graph/resize_geom.h has the math and the contract. */
#include <math.h>
#include <stdio.h>

#include "graph/resize_geom.h"

bool sc_resize_axes(const sc_resize_attrs *a, int r, int *ax, int *n, char *why, size_t wn) {
    *n = a->n_axes ? a->n_axes : r;
    for (int i = 0; i < *n; i++) {
        int64_t v = a->n_axes ? a->axes[i] : i;
        if (v < 0) v += r;
        if (v < 0 || v >= r) {
            snprintf(why, wn, "axis %lld out of range for rank %d", (long long)a->axes[i], r);
            return false;
        }
        ax[i] = (int)v;
    }
    return true;
}

bool sc_resize_geom_make(const sc_resize_attrs *a, const sc_desc *x, const sc_desc *y, const double *roi,
                         const double *scales, const double *sizes, sc_resize_geom *g, char *why, size_t wn) {
    int r = x->rank, ax[SC_MAX_RANK], na;
    if (!sc_resize_axes(a, r, ax, &na, why, wn)) return false;
    for (int i = 0; i < r; i++) {
        g->scale[i] = 1.0;
        g->roi_start[i] = 0.0;
        g->roi_end[i] = 1.0;
    }
    if (a->coord == SC_CT_TF_CROP_AND_RESIZE && roi)
        for (int i = 0; i < na; i++) {
            g->roi_start[ax[i]] = roi[i];
            g->roi_end[ax[i]] = roi[na + i];
        }
    if (scales) {
        for (int i = 0; i < na; i++) {
            if (!(scales[i] > 0)) {
                snprintf(why, wn, "scale %g must be positive", scales[i]);
                return false;
            }
            g->scale[ax[i]] = scales[i];
        }
        for (int i = 0; i < r; i++) g->length[i] = g->scale[i] * (double)x->dims[i];
        return true;
    }
    bool stretch = a->keep_aspect_ratio_policy == SC_KEEP_ASPECT_STRETCH;
    double common = a->keep_aspect_ratio_policy == SC_KEEP_ASPECT_NOT_LARGER ? INFINITY : 0.0;
    for (int i = 0; i < na; i++) {
        if (x->dims[ax[i]] == 0) {
            snprintf(why, wn, "cannot resize an empty axis %d", ax[i]);
            return false;
        }
        double s = sizes[i] / (double)x->dims[ax[i]];
        g->scale[ax[i]] = s;
        if (a->keep_aspect_ratio_policy == SC_KEEP_ASPECT_NOT_LARGER && s < common) common = s;
        if (a->keep_aspect_ratio_policy == SC_KEEP_ASPECT_NOT_SMALLER && s > common) common = s;
    }
    if (!stretch)
        for (int i = 0; i < na; i++) g->scale[ax[i]] = common;
    for (int i = 0; i < r; i++) g->length[i] = stretch ? (double)y->dims[i] : g->scale[i] * (double)x->dims[i];
    return true;
}

double sc_resize_coord(const sc_resize_attrs *a, const sc_resize_geom *g, int i, double xo, int64_t in, int64_t out,
                       bool *outside) {
    double scale = g->scale[i], len = g->length[i], rs = g->roi_start[i], re = g->roi_end[i], xi;
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
