/* Shape functions of the neural-network ops (ONNX operator specs, opsets 11..21).
 *
 * Conv and the pools canonicalise their window attributes while inferring: n_spatial and
 * kernel_shape are filled in, and auto_pad SAME_UPPER / SAME_LOWER / VALID is resolved into explicit
 * pads with auto_pad set to NOTSET, so kernels and gradient rules see one form only.
 */
#include <math.h>
#include <string.h>

#include "graph/shape_fns.h"

/* Unidirectional broadcast (ONNX Broadcasting.md): p's trailing dims equal to or 1 against target. */
static bool broadcasts_to(const sc_desc *p, const sc_desc *target) {
    if (p->rank > target->rank) return false;
    for (int i = 0; i < p->rank; i++) {
        int64_t dp = p->dims[p->rank - 1 - i], dt = target->dims[target->rank - 1 - i];
        if (dp != dt && dp != 1) return false;
    }
    return true;
}

/* Resolves auto_pad into explicit pads (onnx/defs/nn/defs.cc convPoolShapeInference): SAME pads
 * the total (out-1)*stride + effective_kernel - in with the odd pixel at the end (UPPER) or the
 * beginning (LOWER), so out = ceil(in / stride); VALID pads nothing. */
static void window_resolve_pads(sc_window_attrs *w, const int64_t *in_sp) {
    int ns = w->n_spatial;
    for (int i = 0; i < ns; i++) {
        int64_t eff_k = (w->kernel_shape[i] - 1) * w->dilations[i] + 1;
        if (w->auto_pad == SC_AUTO_PAD_VALID) {
            w->pads[i] = w->pads[i + ns] = 0;
        } else if (w->auto_pad == SC_AUTO_PAD_SAME_UPPER || w->auto_pad == SC_AUTO_PAD_SAME_LOWER) {
            int64_t out = (in_sp[i] + w->strides[i] - 1) / w->strides[i];
            int64_t total = (out - 1) * w->strides[i] + eff_k - in_sp[i];
            if (total < 0) total = 0;
            int64_t small = total / 2, big = total - small;
            w->pads[i] = w->auto_pad == SC_AUTO_PAD_SAME_UPPER ? small : big;
            w->pads[i + ns] = w->auto_pad == SC_AUTO_PAD_SAME_UPPER ? big : small;
        }
    }
    w->auto_pad = SC_AUTO_PAD_NOTSET;
}

/* out = floor or ceil((in + pad_begin + pad_end - eff_k) / stride) + 1. With ceil_mode the last
 * window must start inside the input or its begin padding (PyTorch and onnxruntime; ONNX test
 * maxpool_2d_ceil_output_size_reduce_by_one). */
static sc_status window_out_dims(const sc_graph *g, const sc_node *n, const sc_window_attrs *w, const int64_t *in_sp,
                                 int64_t *out_sp) {
    for (int i = 0; i < w->n_spatial; i++) {
        int64_t eff_k = (w->kernel_shape[i] - 1) * w->dilations[i] + 1;
        int64_t span = in_sp[i] + w->pads[i] + w->pads[i + w->n_spatial] - eff_k;
        if (span < 0)
            return shape_fail(g, n, "window %lld (dilated) is larger than padded spatial dim %d (%lld)", (long long)eff_k,
                              i, (long long)(in_sp[i] + w->pads[i] + w->pads[i + w->n_spatial]));
        int64_t s = w->strides[i];
        int64_t out = (w->ceil_mode ? (span + s - 1) / s : span / s) + 1;
        if (w->ceil_mode && (out - 1) * s >= in_sp[i] + w->pads[i]) out--;
        out_sp[i] = out;
    }
    return SC_OK;
}

static sc_status window_check(const sc_graph *g, const sc_node *n, const sc_window_attrs *w) {
    for (int i = 0; i < w->n_spatial; i++) {
        if (w->kernel_shape[i] <= 0 || w->strides[i] <= 0 || w->dilations[i] <= 0)
            return shape_fail(g, n, "kernel_shape, strides and dilations must be positive (spatial dim %d: %lld, %lld, %lld)",
                              i, (long long)w->kernel_shape[i], (long long)w->strides[i], (long long)w->dilations[i]);
        if (w->pads[i] < 0 || w->pads[i + w->n_spatial] < 0) return shape_fail(g, n, "pads must not be negative");
        if (w->kernel_shape[i] > SC_SHAPE_MAX_DIM || w->strides[i] > SC_SHAPE_MAX_DIM ||
            w->dilations[i] > SC_SHAPE_MAX_DIM / w->kernel_shape[i] || w->pads[i] > SC_SHAPE_MAX_DIM ||
            w->pads[i + w->n_spatial] > SC_SHAPE_MAX_DIM)
            return shape_fail(g, n, "kernel_shape, strides, dilations or pads of spatial dim %d exceed 2^40", i);
    }
    return SC_OK;
}

/* Defaults for attributes the importer may have left zero (a graph built in C). */
static void window_defaults(sc_window_attrs *w) {
    for (int i = 0; i < w->n_spatial; i++) {
        if (!w->strides[i]) w->strides[i] = 1;
        if (!w->dilations[i]) w->dilations[i] = 1;
    }
    if (!w->group) w->group = 1;
}

/* Conv: X [N, C, D1..Dk], W [M, C/group, k1..kk], B [M] -> [N, M, O1..Ok]. */
sc_status shape_conv(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 0), *wd = shape_in(g, n, 1);
    sc_attrs a = *n->attrs; /* the defaults resolved here are set on the node at the end */
    sc_window_attrs *w = &a.window;
    int ns = x->rank - 2;
    if (x->rank < 3 || ns > SC_MAX_SPATIAL) return shape_fail(g, n, "X must have rank 3..%d", SC_MAX_SPATIAL + 2);
    if (wd->rank != x->rank) return shape_fail(g, n, "W must have the rank of X");
    if (w->n_spatial && w->n_spatial != ns) return shape_fail(g, n, "kernel_shape has %d dims, X has %d spatial dims", w->n_spatial, ns);
    w->n_spatial = ns;
    window_defaults(w);
    for (int i = 0; i < ns; i++) {
        if (w->has_kernel_shape && w->kernel_shape[i] != wd->dims[2 + i])
            return shape_fail(g, n, "kernel_shape[%d] = %lld does not match W", i, (long long)w->kernel_shape[i]);
        w->kernel_shape[i] = wd->dims[2 + i];
    }
    w->has_kernel_shape = true;
    if (w->group <= 0 || w->group > SC_SHAPE_MAX_DIM || x->dims[1] != wd->dims[1] * w->group)
        return shape_fail(g, n, "input channels %lld != W channels %lld x group %lld", (long long)x->dims[1],
                          (long long)wd->dims[1], (long long)w->group);
    if (wd->dims[0] % w->group) return shape_fail(g, n, "output channels %lld are not divisible by group %lld",
                                                  (long long)wd->dims[0], (long long)w->group);
    if (node_has_input(n, 2)) {
        const sc_desc *b = shape_in(g, n, 2);
        if (b->rank != 1 || b->dims[0] != wd->dims[0]) return shape_fail(g, n, "B must be 1-D with M = %lld values", (long long)wd->dims[0]);
    }
    SC_TRY(window_check(g, n, w));
    window_resolve_pads(w, x->dims + 2);
    sc_desc out = *x;
    out.dims[1] = wd->dims[0];
    SC_TRY(window_out_dims(g, n, w, x->dims + 2, out.dims + 2));
    /* Input 3 exists only after graph_fuse_inference's residual fusion (fused_sum): S has Y's desc. */
    if (node_has_input(n, 3) != w->fused_sum)
        return shape_fail(g, n, "has %d inputs: ONNX Conv takes 2..3 (a 4th is the summand of a fused residual Add)",
                          n->n_in);
    if (w->fused_sum && (shape_in(g, n, 3)->dtype != x->dtype || !sc_desc_same_shape(shape_in(g, n, 3), &out)))
        return shape_fail(g, n, "the fused summand (input 3) must have the output's dtype and shape");
    SC_TRY(graph_node_set_attrs(g, n, &a));
    return shape_out(g, n, &out);
}

/* MaxPool, AveragePool: X [N, C, D1..Dk] -> [N, C, O1..Ok]; MaxPool's Indices are i64 alike. */
sc_status shape_pool(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 0);
    sc_attrs a = *n->attrs; /* the defaults resolved here are set on the node at the end */
    sc_window_attrs *w = &a.window;
    int ns = x->rank - 2;
    if (x->rank < 3 || ns > SC_MAX_SPATIAL) return shape_fail(g, n, "X must have rank 3..%d", SC_MAX_SPATIAL + 2);
    if (w->n_spatial != ns) return shape_fail(g, n, "kernel_shape has %d dims, X has %d spatial dims", w->n_spatial, ns);
    window_defaults(w);
    SC_TRY(window_check(g, n, w));
    window_resolve_pads(w, x->dims + 2);
    sc_desc out = *x;
    SC_TRY(window_out_dims(g, n, w, x->dims + 2, out.dims + 2));
    SC_TRY(graph_node_set_attrs(g, n, &a));
    shape_set_out(g, n, 0, &out);
    out.dtype = SC_I64;
    shape_set_out(g, n, 1, &out);
    return SC_OK;
}

sc_status shape_global_pool(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 0);
    if (x->rank < 3) return shape_fail(g, n, "X must have rank >= 3");
    sc_desc out = *x;
    for (int i = 2; i < out.rank; i++) out.dims[i] = 1;
    return shape_out(g, n, &out);
}

/* Y like X; scale, B, mean, var are [C]. Opset 14+ training mode adds running_mean and
 * running_var outputs, shaped like the mean and var inputs. */
sc_status shape_batch_norm(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 0);
    if (x->rank < 2) return shape_fail(g, n, "X must have rank >= 2");
    for (int i = 1; i < 5; i++) {
        const sc_desc *p = shape_in(g, n, i);
        if (p->rank != 1 || p->dims[0] != x->dims[1])
            return shape_fail(g, n, "input %d must be 1-D with C = %lld values", i, (long long)x->dims[1]);
    }
    shape_set_out(g, n, 0, x);
    shape_set_out(g, n, 1, shape_in(g, n, 3));
    shape_set_out(g, n, 2, shape_in(g, n, 4));
    return SC_OK;
}

/* Y = alpha * A' B' + beta * C with A' [M, K], B' [K, N]; C broadcasts one way to [M, N]. */
sc_status shape_gemm(sc_graph *g, sc_node *n) {
    const sc_desc *a = shape_in(g, n, 0), *b = shape_in(g, n, 1);
    const sc_gemm_attrs *at = &n->attrs->gemm;
    if (a->rank != 2 || b->rank != 2) return shape_fail(g, n, "A and B must be 2-D");
    int64_t m = at->trans_a ? a->dims[1] : a->dims[0], ka = at->trans_a ? a->dims[0] : a->dims[1];
    int64_t kb = at->trans_b ? b->dims[1] : b->dims[0], nn = at->trans_b ? b->dims[0] : b->dims[1];
    if (ka != kb)
        return shape_fail(g, n, "inner dims differ (K = %lld vs %lld, transA=%d transB=%d)", (long long)ka, (long long)kb,
                          at->trans_a, at->trans_b);
    int64_t dims[2] = {m, nn};
    sc_desc out = sc_desc_make(a->dtype, 2, dims);
    if (node_has_input(n, 2)) {
        if (!broadcasts_to(shape_in(g, n, 2), &out)) return shape_fail(g, n, "C does not broadcast to [%lld,%lld]", (long long)m, (long long)nn);
    }
    return shape_out(g, n, &out);
}

/* numpy.matmul: a 1-D A gains a leading 1 and a 1-D B a trailing 1 (both removed from the result);
 * the batch dims broadcast. */
sc_status shape_matmul(sc_graph *g, sc_node *n) {
    sc_desc a = *shape_in(g, n, 0), b = *shape_in(g, n, 1);
    if (a.rank < 1 || b.rank < 1) return shape_fail(g, n, "operands must have rank >= 1");
    bool a1 = a.rank == 1, b1 = b.rank == 1;
    if (a1) { a.dims[1] = a.dims[0]; a.dims[0] = 1; a.rank = 2; }
    if (b1) { b.dims[1] = 1; b.rank = 2; }
    int64_t k_a = a.dims[a.rank - 1], k_b = b.dims[b.rank - 2];
    if (k_a != k_b) return shape_fail(g, n, "inner dims differ (%lld vs %lld)", (long long)k_a, (long long)k_b);
    sc_desc ba = a, bb = b, batch;
    ba.rank -= 2;
    bb.rank -= 2;
    sc_status st = shape_broadcast(n, &ba, &bb, &batch);
    if (st) {
        sc_status_free(st);
        return shape_fail(g, n, "batch dims cannot be broadcast");
    }
    sc_desc out = batch;
    out.dtype = a.dtype;
    if (!a1) out.dims[out.rank++] = a.dims[a.rank - 2];
    if (!b1) out.dims[out.rank++] = b.dims[b.rank - 1];
    if (out.rank > SC_MAX_RANK) return shape_fail(g, n, "result rank exceeds %d", SC_MAX_RANK);
    return shape_out(g, n, &out);
}

sc_status shape_softmax(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 0);
    int axis;
    SC_TRY(shape_axis(g, n, n->attrs->axis.axis, x->rank, &axis));
    return shape_out(g, n, x);
}

/* Y like X; Mean and InvStdDev keep dims[:axis] and set the normalised dims to 1, in stash_type. */
sc_status shape_layer_norm(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 0);
    int axis;
    SC_TRY(shape_axis(g, n, n->attrs->layer_norm.axis, x->rank, &axis));
    for (int i = 1; i < 3; i++) {
        if (!node_has_input(n, i)) continue;
        const sc_desc *p = shape_in(g, n, i);
        sc_desc norm = *x;
        norm.rank = x->rank - axis;
        memcpy(norm.dims, x->dims + axis, sizeof(int64_t) * (size_t)norm.rank);
        if (!broadcasts_to(p, &norm))
            return shape_fail(g, n, "%s must broadcast to the normalised dims (axis %d)", i == 1 ? "Scale" : "B", axis);
    }
    shape_set_out(g, n, 0, x);
    sc_desc stat = *x;
    stat.dtype = n->attrs->layer_norm.stash_type ? n->attrs->layer_norm.stash_type : SC_F32;
    for (int i = axis; i < stat.rank; i++) stat.dims[i] = 1;
    shape_set_out(g, n, 1, &stat);
    shape_set_out(g, n, 2, &stat);
    return SC_OK;
}

/* Resize (opset 11+): inputs X, roi, scales, sizes; exactly one of scales and sizes is non-empty.
 * With scales: out = floor(in * scale) (times roi_end - roi_start for tf_crop_and_resize).
 * With sizes and keep_aspect_ratio_policy not_larger / not_smaller: one scale, the min / max of
 * sizes[i] / in[i] over the resized axes, then out = round(in * scale) (round half away from zero,
 * std::round in onnx's shape inference). */
sc_status shape_resize(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 0);
    const sc_resize_attrs *ra = &n->attrs->resize;
    int axes[SC_MAX_RANK], n_axes = ra->n_axes ? ra->n_axes : x->rank;
    bool seen[SC_MAX_RANK] = {false};
    for (int i = 0; i < n_axes; i++) {
        if (ra->n_axes)
            SC_TRY(shape_axis(g, n, ra->axes[i], x->rank, &axes[i]));
        else
            axes[i] = i;
        if (seen[axes[i]]) return shape_fail(g, n, "axis %d repeats in axes", axes[i]);
        seen[axes[i]] = true;
    }
    bool has_scales = node_has_input(n, 2) && sc_desc_numel(shape_in(g, n, 2)) > 0;
    bool has_sizes = node_has_input(n, 3) && sc_desc_numel(shape_in(g, n, 3)) > 0;
    if (has_scales == has_sizes) return shape_fail(g, n, "exactly one of scales and sizes must be given");
    sc_desc out = *x;
    if (has_scales) {
        double scales[SC_MAX_RANK], roi[2 * SC_MAX_RANK];
        int cnt, n_roi = 0;
        SC_TRY(shape_const_floats(g, n, 2, scales, SC_MAX_RANK, &cnt));
        if (cnt != n_axes) return shape_fail(g, n, "scales has %d values for %d axes", cnt, n_axes);
        bool crop = ra->coord == SC_CT_TF_CROP_AND_RESIZE;
        if (crop) {
            SC_TRY(shape_const_floats(g, n, 1, roi, 2 * SC_MAX_RANK, &n_roi));
            if (n_roi != 2 * n_axes) return shape_fail(g, n, "roi has %d values for %d axes", n_roi, n_axes);
        }
        for (int i = 0; i < n_axes; i++) {
            if (!(scales[i] > 0)) return shape_fail(g, n, "scales[%d] = %g must be positive", i, scales[i]);
            double extent = crop ? roi[n_axes + i] - roi[i] : 1.0;
            double d = floor((double)x->dims[axes[i]] * extent * scales[i]);
            if (!(d >= 0 && d <= (double)SC_SHAPE_MAX_DIM))
                return shape_fail(g, n, "scales[%d] = %g gives an output dim of %g", i, scales[i], d);
            out.dims[axes[i]] = (int64_t)d;
        }
    } else {
        int64_t sizes[SC_MAX_RANK];
        int cnt;
        SC_TRY(shape_const_ints(g, n, 3, sizes, SC_MAX_RANK, &cnt));
        if (cnt != n_axes) return shape_fail(g, n, "sizes has %d values for %d axes", cnt, n_axes);
        for (int i = 0; i < n_axes; i++)
            if (sizes[i] <= 0) return shape_fail(g, n, "sizes[%d] = %lld must be positive", i, (long long)sizes[i]);
        if (ra->keep_aspect_ratio_policy == SC_KEEP_ASPECT_STRETCH) {
            for (int i = 0; i < n_axes; i++) out.dims[axes[i]] = sizes[i];
        } else {
            bool not_larger = ra->keep_aspect_ratio_policy == SC_KEEP_ASPECT_NOT_LARGER;
            double scale = not_larger ? INFINITY : 0;
            for (int i = 0; i < n_axes; i++) {
                double s = (double)sizes[i] / (double)x->dims[axes[i]];
                scale = not_larger ? fmin(scale, s) : fmax(scale, s);
            }
            for (int i = 0; i < n_axes; i++) {
                double d = round(scale * (double)x->dims[axes[i]]);
                if (!(d >= 0 && d <= (double)SC_SHAPE_MAX_DIM))
                    return shape_fail(g, n, "sizes with keep_aspect_ratio_policy give an output dim of %g", d);
                out.dims[axes[i]] = (int64_t)d;
            }
        }
    }
    return shape_out(g, n, &out);
}
