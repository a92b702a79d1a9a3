/* graph_lower_resize (graph/passes.h): a Resize in cubic mode, or with antialias in linear or cubic
 * mode, becomes one MatMul per resized axis with a constant interpolation matrix, so both backends
 * run it with their tuned kernels and autodiff differentiates it with MatMul's rule.
 *
 * Both modes are separable: along axis i, output index o is sum_j c_j X[clamp(t_j)], with the taps
 * t_j and weights c_j of the ONNX reference implementation (onnx/reference/ops/op_resize.py):
 *   - x_orig from the coordinate transform (graph/resize_geom.h); ratio = x_orig - floor(x_orig),
 *     or 1 when x_orig is an integer (the tap on the left is preferred);
 *   - cubic: 4 weights of Keys' kernel with a = cubic_coeff_a at distances 1 + r, r, 1 - r, 2 - r;
 *     cubic antialias (scale s = min(scale, 1)): the kernel at s (k - ratio) for k from
 *     floor(-2/s) + 1 to 1 - floor(-2/s), normalised; linear antialias: the hat function
 *     max(0, 1 - |s (k - ratio)|) for k from floor(-1/s) + 1 over 2 - 2 (floor(-1/s) + 1) taps,
 *     normalised;
 *   - the taps are the n integers closest to x_orig (ties to the smaller) within the edge-padded
 *     range [-ceil(n/2), in - 1 + ceil(n/2)], clamped to [0, in - 1] (edge padding); with
 *     exclude_outside, taps outside [0, in - 1] get weight 0 and the rest is renormalised.
 * So W_i [out_i, in_i] holds the summed weights and Y = X x_i W_i over the resized axes: the last
 * axis as MatMul(X, W^T), another by a Transpose to last and back. A dense matrix costs in_i flops
 * per output element instead of n; fine for the feature-map and position-embedding sizes exports
 * resize. tf_crop_and_resize outputs outside the roi (the extrapolation value) are refused. Needs
 * static shapes and constant scales / sizes / roi (after graph_infer_shapes).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "graph/pass_internal.h"
#include "graph/resize_geom.h"
#include "graph/shape.h"
#include "graph/shape_fns.h"

#define RESIZE_MAX_TAPS 4096

/* Weights of one output index for ratio r at scale s (the reference's get_coeffs); returns n. */
static int coeffs(const sc_resize_attrs *a, double r, double s, double *c) {
    double A = a->cubic_coeff_a;
    if (!a->antialias) {
        c[0] = ((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A;
        c[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
        c[2] = ((A + 2) * (1 - r) - (A + 3)) * (1 - r) * (1 - r) + 1;
        c[3] = ((A * ((1 - r) + 1) - 5 * A) * ((1 - r) + 1) + 8 * A) * ((1 - r) + 1) - 4 * A;
        return 4;
    }
    s = s < 1 ? s : 1;
    int start, n;
    if (a->mode == SC_RESIZE_CUBIC) {
        start = (int)(floor(-2 / s) + 1);
        n = 2 - 2 * start;
    } else {
        start = (int)(floor(-1 / s) + 1);
        n = 2 - 2 * start;
    }
    if (n > RESIZE_MAX_TAPS) return -1;
    double sum = 0;
    for (int k = 0; k < n; k++) {
        double x = fabs(s * ((double)(start + k) - r));
        if (a->mode == SC_RESIZE_CUBIC)
            c[k] = x <= 1 ? (A + 2) * x * x * x - (A + 3) * x * x + 1
                 : x < 2  ? A * x * x * x - 5 * A * x * x + 8 * A * x - 4 * A
                          : 0.0;
        else
            c[k] = x < 1 ? 1 - x : 0.0;
        sum += c[k];
    }
    for (int k = 0; k < n; k++) c[k] /= sum;
    return n;
}

/* The n integers closest to x in [lo, hi] (ties to the smaller), ascending, into t. */
static void nearest_taps(double x, int n, int64_t lo, int64_t hi, int64_t *t) {
    int64_t a = (int64_t)floor(x), b = a + 1; /* next candidates on the left and the right */
    int got = 0;
    while (got < n) {
        bool left_ok = a >= lo, right_ok = b <= hi;
        if (!left_ok && !right_ok) break;
        if (left_ok && (!right_ok || x - (double)a <= (double)b - x)) t[got++] = a--;
        else t[got++] = b++;
    }
    for (int i = 1; i < got; i++) /* insertion sort: got is small */
        for (int j = i; j > 0 && t[j - 1] > t[j]; j--) {
            int64_t v = t[j];
            t[j] = t[j - 1];
            t[j - 1] = v;
        }
}

/* Row o of W_i (in entries, zeroed by the caller). False with why when o falls outside the roi. */
static bool weights_row(const sc_resize_attrs *a, const sc_resize_geom *gm, int i, int64_t o, int64_t in, int64_t out,
                        double *row, double *c, int64_t *t, char *why, size_t wn) {
    bool outside;
    double x = sc_resize_coord(a, gm, i, (double)o, in, out, &outside);
    if (outside) {
        snprintf(why, wn, "output %lld of axis %d falls outside the roi (extrapolation); cubic and antialiased "
                          "tf_crop_and_resize support only outputs inside it", (long long)o, i);
        return false;
    }
    double f = floor(x), r = x == f ? 1.0 : x - f;
    int n = coeffs(a, r, gm->scale[i], c);
    if (n < 0) {
        snprintf(why, wn, "axis %d: scale %g needs more than %d taps", i, gm->scale[i], RESIZE_MAX_TAPS);
        return false;
    }
    int64_t pad = (n + 1) / 2;
    nearest_taps(x, n, -pad, in - 1 + pad, t);
    if (a->exclude_outside) {
        double sum = 0;
        for (int k = 0; k < n; k++) {
            if (t[k] < 0 || t[k] >= in) c[k] = 0;
            sum += c[k];
        }
        for (int k = 0; k < n; k++) c[k] /= sum;
    }
    for (int k = 0; k < n; k++) row[t[k] < 0 ? 0 : t[k] >= in ? in - 1 : t[k]] += c[k];
    return true;
}

/* The weights w (n doubles) into dst in dtype t: f64, f32, or a 16-bit float rounded from f32. */
static bool weights_store(void *dst, sc_dtype t, const double *w, int64_t n) {
    if (t == SC_F64) {
        memcpy(dst, w, sizeof(double) * (size_t)n);
        return true;
    }
    float *f = t == SC_F32 ? dst : malloc(sizeof(float) * (size_t)n + 1);
    if (!f) return false;
    for (int64_t k = 0; k < n; k++) f[k] = (float)w[k];
    if (t == SC_BF16) sc_f32_to_bf16_n(dst, f, n);
    else if (t != SC_F32) sc_f32_to_f16_n(dst, f, n);
    if (f != dst) free(f);
    return true;
}

/* y x_i W_i, with W_i^T [in, out] as a constant of y's dtype. */
static int resize_axis(sc_lowering *x, int y, int i, const double *w, int64_t in, int64_t out) {
    if (x->st) return -1;
    sc_desc d = x->g->values[y].desc;
    int r = d.rank;
    int64_t dims[2] = {in, out};
    sc_desc wd = sc_desc_make(d.dtype, 2, dims);
    void *buf = malloc((size_t)sc_desc_bytes(&wd) + 1);
    double *wt = malloc(sizeof(double) * (size_t)(in * out) + 1);
    if (buf && wt)
        for (int64_t o = 0; o < out; o++)
            for (int64_t p = 0; p < in; p++) wt[p * out + o] = w[o * in + p];
    int wv = -1;
    if (!buf || !wt || !weights_store(buf, d.dtype, wt, in * out)) {
        x->st = sc_errorf("node '%s': out of memory for a %lldx%lld interpolation matrix", x->base, (long long)out,
                          (long long)in);
    } else {
        char what[32];
        snprintf(what, sizeof what, "weights%d", i);
        wv = lowering_const(x, what, &wd, buf);
    }
    free(buf), free(wt);
    if (x->st) return -1;
    sc_attrs ta, tb;
    memset(&ta, 0, sizeof ta);
    ta.transpose.n_perm = r;
    for (int k = 0; k < r; k++) ta.transpose.perm[k] = k == i ? r - 1 : k == r - 1 ? i : k;
    tb = ta; /* swapping axes i and r - 1 is its own inverse */
    int v = i == r - 1 ? y : lowering_emit(x, SC_OP_TRANSPOSE, "to_last", &y, 1, &ta);
    int mm[2] = {v, wv};
    v = lowering_emit(x, SC_OP_MATMUL, "interpolate", mm, 2, NULL);
    return i == r - 1 ? v : lowering_emit(x, SC_OP_TRANSPOSE, "back", &v, 1, &tb);
}

static bool lowered_here(const sc_resize_attrs *a) {
    return a->mode == SC_RESIZE_CUBIC || (a->antialias && a->mode == SC_RESIZE_LINEAR);
}

/* Reads the constant roi / scales / sizes of node n into the geometry. */
static sc_status node_geom(sc_graph *g, sc_node *n, sc_resize_geom *gm) {
    const sc_resize_attrs *a = &n->attrs->resize;
    const sc_desc *xd = &g->values[n->in[0]].desc, *yd = &g->values[n->out[0]].desc;
    double roi[2 * SC_MAX_RANK], v[SC_MAX_RANK];
    int n_roi = 0, nv = 0;
    bool crop = a->coord == SC_CT_TF_CROP_AND_RESIZE && node_has_input(n, 1);
    if (crop) SC_TRY(shape_const_floats(g, n, 1, roi, 2 * SC_MAX_RANK, &n_roi));
    bool has_scales = node_has_input(n, 2) && sc_desc_numel(&g->values[n->in[2]].desc) > 0;
    if (has_scales) {
        SC_TRY(shape_const_floats(g, n, 2, v, SC_MAX_RANK, &nv));
    } else {
        int64_t sz[SC_MAX_RANK];
        SC_TRY(shape_const_ints(g, n, 3, sz, SC_MAX_RANK, &nv));
        for (int k = 0; k < nv; k++) v[k] = (double)sz[k];
    }
    char why[200];
    if (!sc_resize_geom_make(a, xd, yd, crop && n_roi ? roi : NULL, has_scales ? v : NULL, has_scales ? NULL : v, gm,
                             why, sizeof why))
        return sc_errorf("node '%s' (Resize): %s", n->name, why);
    return SC_OK;
}

/* Lowers node i (appending); returns the value the last new node writes, or -1. */
static int lower_node(sc_lowering *x, int i) {
    sc_node *n = &x->g->nodes[i];
    const sc_resize_attrs a = n->attrs->resize;
    const sc_desc xd = x->g->values[n->in[0]].desc, yd = x->g->values[n->out[0]].desc;
    if (xd.dtype != SC_F32 && xd.dtype != SC_F64 && !sc_dtype_is_half(xd.dtype)) {
        x->st = sc_errorf("node '%s' (Resize): %s mode%s needs a float input, not %s", n->name,
                          a.mode == SC_RESIZE_CUBIC ? "cubic" : "linear", a.antialias ? " with antialias" : "",
                          sc_dtype_name(xd.dtype));
        return -1;
    }
    sc_resize_geom gm;
    if ((x->st = node_geom(x->g, n, &gm))) return -1;
    int y = n->in[0]; /* n is not read below: the node array grows as nodes are emitted */
    for (int ax = xd.rank - 1; ax >= 0 && !x->st; ax--) {
        int64_t in = xd.dims[ax], out = yd.dims[ax];
        if (in == out && gm.scale[ax] == 1 && a.coord != SC_CT_TF_CROP_AND_RESIZE) continue; /* the identity */
        if (!in || !out) {
            x->st = sc_errorf("node '%s' (Resize): axis %d is empty", x->base, ax);
            break;
        }
        double *w = calloc((size_t)(in * out), sizeof(double)), *c = malloc(sizeof(double) * RESIZE_MAX_TAPS);
        int64_t *t = malloc(sizeof(int64_t) * RESIZE_MAX_TAPS);
        char why[240] = "";
        bool ok = w && c && t;
        for (int64_t o = 0; ok && o < out; o++) ok = weights_row(&a, &gm, ax, o, in, out, w + o * in, c, t, why, sizeof why);
        if (!ok) x->st = sc_errorf("node '%s' (Resize): %s", x->base, why[0] ? why : "out of memory");
        else y = resize_axis(x, y, ax, w, in, out);
        free(w), free(c), free(t);
    }
    return x->st ? -1 : y;
}

sc_status graph_lower_resize(sc_graph *g, int *count) {
    int done = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        sc_node *n = &g->nodes[i];
        if (n->op != SC_OP_RESIZE || !lowered_here(&n->attrs->resize)) continue;
        char base[256];
        snprintf(base, sizeof base, "%s", n->name);
        sc_lowering x = {g, base, SC_OK};
        int n0 = g->n_nodes, y = lower_node(&x, i);
        if (x.st) return x.st;
        if (g->n_nodes == n0) lowering_emit(&x, SC_OP_IDENTITY, "copy", &y, 1, NULL); /* every axis unchanged */
        if (x.st) return x.st;
        SC_TRY(graph_splice_lowered(g, &i, n0));
        done++;
    }
    if (count) *count = done;
    return SC_OK;
}
