/* Resize tap tables shared by Resize and ResizeGrad: the math and contract are in cpu_nn_resize_geom.h.
 * Everything here is computed in double, like the ONNX reference implementation.
 */
#include <math.h>
#include <stdlib.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_nn_resize_geom.h"
#include "graph/resize_geom.h"

sc_status resize_mode_check(const sc_kernel_call *c) {
    const sc_resize_attrs *a = &c->node->attrs->resize;
    if (a->mode == SC_RESIZE_CUBIC)
        return cpu_errorf(c, "mode 'cubic' runs as MatMuls after graph_prepare (graph/pass_resize.c); the kernel "
                             "runs nearest and linear");
    if (a->antialias && a->mode != SC_RESIZE_NEAREST)
        return cpu_errorf(c, "antialias runs as MatMuls after graph_prepare (graph/pass_resize.c); the kernel "
                             "runs without it");
    return SC_OK;
}

/* scale, resized length L and roi per axis (graph/resize_geom.h), from the operands as doubles. */
static sc_status geom_read(const sc_kernel_call *c, const resize_operands *op, sc_resize_geom *g) {
    const sc_resize_attrs *a = &c->node->attrs->resize;
    const sc_desc *x = op->x, *y = op->y;
    int r = x->rank, ax[SC_MAX_RANK], na;
    char why[160];
    if (y->rank != r) return cpu_errorf(c, "output rank %d differs from input rank %d", y->rank, r);
    if (!sc_resize_axes(a, r, ax, &na, why, sizeof why)) return cpu_errorf(c, "%s", why);
    double roi[2 * SC_MAX_RANK], v[SC_MAX_RANK];
    bool crop = a->coord == SC_CT_TF_CROP_AND_RESIZE && op->roi;
    if (crop && (sc_desc_numel(&op->roi->desc) != 2 * na || !cpu_convert(roi, SC_F64, op->roi->data, op->roi->desc.dtype, 2 * na)))
        return cpu_errorf(c, "roi must hold %d floats", 2 * na);
    const sc_tensor *sc = op->scales, *sz = op->sizes;
    if (!!sc == !!sz) return cpu_errorf(c, "exactly one of scales and sizes must be given");
    const sc_tensor *t = sc ? sc : sz;
    if (sc_desc_numel(&t->desc) != na || !cpu_convert(v, SC_F64, t->data, t->desc.dtype, na))
        return cpu_errorf(c, "%s must hold %d values", sc ? "scales" : "sizes", na);
    if (!sc_resize_geom_make(a, x, y, crop ? roi : NULL, sc ? v : NULL, sc ? NULL : v, g, why, sizeof why))
        return cpu_errorf(c, "%s", why);
    return SC_OK;
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
static void taps_fill(const sc_resize_attrs *a, const sc_resize_geom *g, bool linear, int i, int64_t in, int64_t out,
                      int64_t stride, int64_t o, resize_tables *t) {
    bool outside;
    double xi = sc_resize_coord(a, g, i, (double)o, in, out, &outside);
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
    sc_resize_geom g;
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
