/* Shape functions of the shape and data-movement ops. Shape-carrying inputs (Reshape's shape,
 * Slice's starts/ends/axes/steps, Squeeze/Unsqueeze axes, Split sizes, Pad pads, Expand's shape,
 * ConstantOfShape's shape, Range's scalars) must be constants by the time they are read: the folding
 * in graph_infer_shapes turns PyTorch's Shape->Gather->Concat chains into constants first. */
#include <math.h>
#include <string.h>

#include "graph/shape_fns.h"

/* A constant 1-D integer input of at most SC_MAX_RANK values: a shape, axes, repeats. */
typedef struct {
    int64_t v[SC_MAX_RANK];
    int n;
} int_list;

static sc_status read_list(const sc_graph *g, const sc_node *n, int input, int_list *l) {
    return shape_const_ints(g, n, input, l->v, SC_MAX_RANK, &l->n);
}

/* read_list for an output shape (Expand, ConstantOfShape): every entry must be >= 0. */
static sc_status read_shape(const sc_graph *g, const sc_node *n, int input, int_list *l) {
    SC_TRY(read_list(g, n, input, l));
    for (int i = 0; i < l->n; i++)
        if (l->v[i] < 0) return shape_fail(g, n, "shape[%d] = %lld is negative", i, (long long)l->v[i]);
    return SC_OK;
}

/* Reshape: 0 copies the input dim at that position (a literal 0 with allowzero), one -1 takes what
 * is left. */
sc_status shape_reshape(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 0);
    int_list shape;
    SC_TRY(read_list(g, n, 1, &shape));
    bool allowzero = n->attrs->reshape.allowzero;
    sc_desc out = *x;
    out.rank = shape.n;
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < shape.n; i++) {
        int64_t d = shape.v[i];
        if (d == -1) {
            if (infer >= 0) return shape_fail(g, n, "shape has more than one -1");
            infer = i;
            continue;
        }
        if (d == 0 && !allowzero) {
            if (i >= x->rank) return shape_fail(g, n, "shape[%d] = 0 copies a dim the input does not have", i);
            d = x->dims[i];
        }
        if (d < 0 || d > SC_SHAPE_MAX_DIM) return shape_fail(g, n, "shape[%d] = %lld is invalid", i, (long long)d);
        out.dims[i] = d;
        if (d && known > SC_SHAPE_MAX_DIM / d) return shape_fail(g, n, "shape has more than 2^40 elements");
        known *= d;
    }
    int64_t total = sc_desc_numel(x);
    if (infer >= 0) {
        if (allowzero && known == 0) return shape_fail(g, n, "shape has both 0 and -1 with allowzero");
        if (known == 0 || total % known) return shape_fail(g, n, "cannot infer the -1 dim (%lld elements)", (long long)total);
        out.dims[infer] = total / known;
        known = total;
    }
    if (known != total) {
        char buf[160];
        return shape_fail(g, n, "cannot reshape %lld elements to %s", (long long)total, sc_desc_str(&out, buf, sizeof buf));
    }
    return shape_out(g, n, &out);
}

/* Flatten: [prod(dims[:axis]), prod(dims[axis:])], axis in [-r, r]. */
sc_status shape_flatten(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 0);
    int64_t axis = n->attrs->axis.axis;
    if (axis < -x->rank || axis > x->rank) return shape_fail(g, n, "axis %lld is out of range", (long long)axis);
    if (axis < 0) axis += x->rank;
    int64_t dims[2] = {1, 1};
    for (int i = 0; i < x->rank; i++) dims[i >= axis] *= x->dims[i];
    sc_desc out = sc_desc_make(x->dtype, 2, dims);
    return shape_out(g, n, &out);
}

sc_status shape_transpose(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 0);
    const sc_transpose_attrs *t = &n->attrs->transpose;
    if (t->n_perm == 0) { /* ONNX default: reverse the dims; made explicit for kernels */
        sc_attrs a = *n->attrs;
        a.transpose.n_perm = x->rank;
        for (int i = 0; i < x->rank; i++) a.transpose.perm[i] = x->rank - 1 - i;
        SC_TRY(graph_node_set_attrs(g, n, &a));
        t = &n->attrs->transpose;
    }
    if (t->n_perm != x->rank) return shape_fail(g, n, "perm has %d entries for rank %d", t->n_perm, x->rank);
    bool seen[SC_MAX_RANK] = {false};
    sc_desc out = *x;
    for (int i = 0; i < x->rank; i++) {
        int64_t p = t->perm[i];
        if (p < 0 || p >= x->rank || seen[p]) return shape_fail(g, n, "perm is not a permutation of 0..%d", x->rank - 1);
        seen[p] = true;
        out.dims[i] = x->dims[p];
    }
    return shape_out(g, n, &out);
}

/* Marks the listed axes of a rank-`rank` shape in mask (negative axes count from the back); ONNX
 * requires them distinct. */
static sc_status mark_axes(sc_graph *g, sc_node *n, const int_list *axes, int rank, bool *mask) {
    for (int i = 0; i < axes->n; i++) {
        int a;
        SC_TRY(shape_axis(g, n, axes->v[i], rank, &a));
        if (mask[a]) return shape_fail(g, n, "axis %d repeats in axes", a);
        mask[a] = true;
    }
    return SC_OK;
}

/* Squeeze: listed axes must be 1; without axes every 1 dim goes. */
sc_status shape_squeeze(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 0);
    int_list axes = {.n = 0};
    if (node_has_input(n, 1)) SC_TRY(read_list(g, n, 1, &axes));
    bool drop[SC_MAX_RANK] = {false};
    SC_TRY(mark_axes(g, n, &axes, x->rank, drop));
    sc_desc out = *x;
    out.rank = 0;
    for (int i = 0; i < x->rank; i++) {
        if (axes.n == 0) drop[i] = x->dims[i] == 1;
        if (drop[i] && x->dims[i] != 1) return shape_fail(g, n, "cannot squeeze axis %d of size %lld", i, (long long)x->dims[i]);
        if (!drop[i]) out.dims[out.rank++] = x->dims[i];
    }
    return shape_out(g, n, &out);
}

/* Unsqueeze: axes index the output (rank r + len(axes)). */
sc_status shape_unsqueeze(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 0);
    int_list axes;
    SC_TRY(read_list(g, n, 1, &axes));
    sc_desc out = *x;
    out.rank = x->rank + axes.n;
    if (out.rank > SC_MAX_RANK) return shape_fail(g, n, "result rank %d exceeds %d", out.rank, SC_MAX_RANK);
    bool ins[SC_MAX_RANK] = {false};
    SC_TRY(mark_axes(g, n, &axes, out.rank, ins));
    for (int i = 0, j = 0; i < out.rank; i++) out.dims[i] = ins[i] ? 1 : x->dims[j++];
    return shape_out(g, n, &out);
}

sc_status shape_concat(sc_graph *g, sc_node *n) {
    sc_desc out = *shape_in(g, n, 0);
    int axis;
    SC_TRY(shape_axis(g, n, n->attrs->axis.axis, out.rank, &axis));
    for (int i = 1; i < n->n_in; i++) {
        if (!node_has_input(n, i)) return shape_fail(g, n, "input %d is missing (variadic inputs cannot be omitted)", i);
        const sc_desc *b = shape_in(g, n, i);
        if (b->rank != out.rank || b->dtype != out.dtype)
            return shape_fail(g, n, "input %d differs from input 0 in rank or dtype", i);
        for (int d = 0; d < out.rank; d++)
            if (d != axis && b->dims[d] != out.dims[d])
                return shape_fail(g, n, "input %d differs from input 0 in dim %d (concat axis %d)", i, d, axis);
        out.dims[axis] += b->dims[axis];
    }
    return shape_out(g, n, &out);
}

/* Split: sizes from input 1; else opset 18's num_outputs with chunks of ceil(dim / num_outputs)
 * (the last one smaller); else equal parts, one per output. */
sc_status shape_split(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 0);
    int axis;
    SC_TRY(shape_axis(g, n, n->attrs->axis.axis, x->rank, &axis));
    int64_t dim = x->dims[axis];
    int64_t *sizes = sc_arena_alloc_array(&g->arena, (size_t)n->n_out, sizeof(int64_t));
    if (!sizes) return shape_errorf(n, "out of memory");
    int64_t num = n->attrs->axis.num_outputs;
    if (node_has_input(n, 1) && sc_desc_numel(shape_in(g, n, 1)) > 0) {
        int cnt;
        SC_TRY(shape_const_ints(g, n, 1, sizes, n->n_out, &cnt));
        if (cnt != n->n_out) return shape_fail(g, n, "split has %d sizes for %d outputs", cnt, n->n_out);
        int64_t sum = 0;
        for (int i = 0; i < cnt; i++) {
            if (sizes[i] < 0 || sizes[i] > dim)
                return shape_fail(g, n, "split[%d] = %lld is outside [0, %lld]", i, (long long)sizes[i], (long long)dim);
            sum += sizes[i];
        }
        if (sum != dim) return shape_fail(g, n, "split sizes sum to %lld, axis %d has %lld", (long long)sum, axis, (long long)dim);
    } else if (num > 0) {
        if (num != n->n_out) return shape_fail(g, n, "num_outputs = %lld but the node has %d outputs", (long long)num, n->n_out);
        int64_t chunk = (dim + num - 1) / num;
        for (int i = 0; i < n->n_out; i++) {
            int64_t left = dim - chunk * i;
            sizes[i] = left < 0 ? 0 : left < chunk ? left : chunk;
        }
    } else {
        if (dim % n->n_out) return shape_fail(g, n, "axis %d (%lld) does not split evenly into %d outputs", axis, (long long)dim, n->n_out);
        for (int i = 0; i < n->n_out; i++) sizes[i] = dim / n->n_out;
    }
    for (int i = 0; i < n->n_out; i++) {
        sc_desc out = *x;
        out.dims[axis] = sizes[i];
        shape_set_out(g, n, i, &out);
    }
    return SC_OK;
}

/* One sliced axis (ONNX Slice): negative start/end count from the end, then clamp to [0, dim]
 * for positive steps and [-1, dim - 1] for negative ones; length ceil((end - start) / step). */
int64_t shape_slice_len(int64_t dim, int64_t start, int64_t end, int64_t step) {
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    if (step > 0) {
        start = start < 0 ? 0 : start > dim ? dim : start;
        end = end < 0 ? 0 : end > dim ? dim : end;
        return end > start ? 1 + (end - start - 1) / step : 0;
    }
    /* ONNX Slice: for negative steps the adjusted start clamps to [0, dim-1] and the end to
     * [-1, dim-1] (numpy differs for starts before the beginning; the kernel follows ONNX). */
    if (dim == 0) return 0;
    start = start < 0 ? 0 : start > dim - 1 ? dim - 1 : start;
    end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
    /* -step overflows for INT64_MIN; any step below -dim takes one element anyway */
    return start > end ? (step < -dim ? 1 : 1 + (start - end - 1) / (-step)) : 0;
}

sc_status shape_slice(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 0);
    int64_t starts[SC_MAX_RANK], ends[SC_MAX_RANK], axes[SC_MAX_RANK], steps[SC_MAX_RANK];
    int ns, ne, na, nst;
    SC_TRY(shape_const_ints(g, n, 1, starts, SC_MAX_RANK, &ns));
    SC_TRY(shape_const_ints(g, n, 2, ends, SC_MAX_RANK, &ne));
    if (ne != ns) return shape_fail(g, n, "starts has %d values, ends %d", ns, ne);
    if (node_has_input(n, 3)) {
        SC_TRY(shape_const_ints(g, n, 3, axes, SC_MAX_RANK, &na));
        if (na != ns) return shape_fail(g, n, "axes has %d values, starts %d", na, ns);
    } else {
        for (int i = 0; i < ns; i++) axes[i] = i;
    }
    if (node_has_input(n, 4)) {
        SC_TRY(shape_const_ints(g, n, 4, steps, SC_MAX_RANK, &nst));
        if (nst != ns) return shape_fail(g, n, "steps has %d values, starts %d", nst, ns);
    } else {
        for (int i = 0; i < ns; i++) steps[i] = 1;
    }
    sc_desc out = *x;
    bool seen[SC_MAX_RANK] = {false};
    for (int i = 0; i < ns; i++) {
        int a;
        SC_TRY(shape_axis(g, n, axes[i], x->rank, &a));
        if (seen[a]) return shape_fail(g, n, "axis %d repeats in axes", a);
        seen[a] = true;
        if (steps[i] == 0) return shape_fail(g, n, "steps[%d] is 0", i);
        out.dims[a] = shape_slice_len(x->dims[a], starts[i], ends[i], steps[i]);
    }
    return shape_out(g, n, &out);
}

/* Gather's and GatherElements' inputs: data x, i32 or i64 indices idx, and the axis attribute
 * normalised to x's rank. */
static sc_status gather_inputs(sc_graph *g, sc_node *n, const sc_desc **x, const sc_desc **idx, int *axis) {
    *x = shape_in(g, n, 0), *idx = shape_in(g, n, 1);
    SC_TRY(shape_axis(g, n, n->attrs->axis.axis, (*x)->rank, axis));
    if ((*idx)->dtype != SC_I64 && (*idx)->dtype != SC_I32) return shape_fail(g, n, "indices must be i32 or i64");
    return SC_OK;
}

/* Gather: data[:axis] + indices.shape + data[axis+1:]. */
sc_status shape_gather(sc_graph *g, sc_node *n) {
    const sc_desc *x, *idx;
    int axis;
    SC_TRY(gather_inputs(g, n, &x, &idx, &axis));
    int rank = x->rank - 1 + idx->rank;
    if (rank > SC_MAX_RANK) return shape_fail(g, n, "result rank %d exceeds %d", rank, SC_MAX_RANK);
    sc_desc out = *x;
    out.rank = 0;
    for (int i = 0; i < axis; i++) out.dims[out.rank++] = x->dims[i];
    for (int i = 0; i < idx->rank; i++) out.dims[out.rank++] = idx->dims[i];
    for (int i = axis + 1; i < x->rank; i++) out.dims[out.rank++] = x->dims[i];
    return shape_out(g, n, &out);
}

/* Expand: bidirectional broadcast of the input with the shape input. */
sc_status shape_expand(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 0);
    int_list shape;
    SC_TRY(read_shape(g, n, 1, &shape));
    sc_desc target = sc_desc_make(x->dtype, shape.n, shape.v), out;
    SC_TRY(shape_broadcast(n, x, &target, &out));
    out.dtype = x->dtype;
    return shape_out(g, n, &out);
}

/* Pad: pads input is [x1_begin, x2_begin, ..., x1_end, x2_end, ...] over the axes of input 3 (all
 * axes when omitted); negative pads crop. */
sc_status shape_pad(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 0);
    int64_t pads[2 * SC_MAX_RANK], axes[SC_MAX_RANK];
    int np, na = x->rank;
    SC_TRY(shape_const_ints(g, n, 1, pads, 2 * SC_MAX_RANK, &np));
    if (node_has_input(n, 3))
        SC_TRY(shape_const_ints(g, n, 3, axes, SC_MAX_RANK, &na));
    else
        for (int i = 0; i < na; i++) axes[i] = i;
    if (np != 2 * na) return shape_fail(g, n, "pads has %d values for %d axes", np, na);
    sc_desc out = *x;
    for (int i = 0; i < na; i++) {
        int a;
        SC_TRY(shape_axis(g, n, axes[i], x->rank, &a));
        if (pads[i] < -SC_SHAPE_MAX_DIM || pads[i] > SC_SHAPE_MAX_DIM || pads[i + na] < -SC_SHAPE_MAX_DIM ||
            pads[i + na] > SC_SHAPE_MAX_DIM)
            return shape_fail(g, n, "pads for axis %d exceed 2^40", a);
        out.dims[a] = x->dims[a] + pads[i] + pads[i + na];
        if (out.dims[a] < 0) return shape_fail(g, n, "pads make axis %d negative", a);
    }
    return shape_out(g, n, &out);
}

sc_status shape_trilu(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 0);
    if (x->rank < 2) return shape_fail(g, n, "input must have rank >= 2");
    if (node_has_input(n, 1) && sc_desc_numel(shape_in(g, n, 1)) != 1) return shape_fail(g, n, "k must be a scalar");
    return shape_out(g, n, x);
}

/* Shape (opset 15): i64 [end - start] after clamping start and end to [0, rank]. */
sc_status shape_shape(sc_graph *g, sc_node *n) {
    int rank = shape_in(g, n, 0)->rank;
    int64_t start = n->attrs->shape.start, end = n->attrs->shape.has_end ? n->attrs->shape.end : rank;
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = start < 0 ? 0 : start > rank ? rank : start;
    end = end < 0 ? 0 : end > rank ? rank : end;
    int64_t len = end > start ? end - start : 0;
    sc_desc out = sc_desc_make(SC_I64, 1, &len);
    return shape_out(g, n, &out);
}

sc_status shape_constant_of_shape(sc_graph *g, sc_node *n) {
    int_list shape;
    SC_TRY(read_shape(g, n, 0, &shape));
    sc_dtype t = n->attrs->fill.dtype ? n->attrs->fill.dtype : SC_F32;
    sc_desc out = sc_desc_make(t, shape.n, shape.v);
    return shape_out(g, n, &out);
}

/* Range: max(ceil((limit - start) / delta), 0) elements of start's dtype. */
sc_status shape_range(sc_graph *g, sc_node *n) {
    double v[3];
    sc_dtype t = shape_in(g, n, 0)->dtype;
    for (int i = 0; i < 3; i++) {
        if (shape_in(g, n, i)->dtype != t) return shape_fail(g, n, "start, limit and delta must share a dtype");
        SC_TRY(shape_const_scalar(g, n, i, &v[i]));
    }
    if (v[2] == 0) return shape_fail(g, n, "delta is 0");
    double len = ceil((v[1] - v[0]) / v[2]);
    if (len < 0) len = 0;
    if (!(len <= (double)SC_SHAPE_MAX_DIM)) return shape_fail(g, n, "range has more than 2^40 elements (or is NaN)");
    int64_t dim = (int64_t)len;
    sc_desc out = sc_desc_make(t, 1, &dim);
    return shape_out(g, n, &out);
}

/* ScatterND: Y has data's desc. indices (i64) is [..., k] with 1 <= k <= rank(data); updates must be
 * indices.shape[:-1] + data.shape[k:] in data's type. */
sc_status shape_scatter_nd(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 0), *idx = shape_in(g, n, 1), *u = shape_in(g, n, 2);
    if (idx->dtype != SC_I64) return shape_fail(g, n, "indices must be i64");
    if (idx->rank < 1) return shape_fail(g, n, "indices must have rank >= 1");
    int64_t k = idx->dims[idx->rank - 1];
    if (k < 1 || k > x->rank) return shape_fail(g, n, "indices' last dim %lld must be in [1, %d]", (long long)k, x->rank);
    if (u->dtype != x->dtype) return shape_fail(g, n, "updates are %s, data is %s", sc_dtype_name(u->dtype), sc_dtype_name(x->dtype));
    int want = idx->rank - 1 + x->rank - (int)k;
    bool ok = u->rank == want;
    for (int i = 0; ok && i < idx->rank - 1; i++) ok = u->dims[i] == idx->dims[i];
    for (int i = 0; ok && i < x->rank - (int)k; i++) ok = u->dims[idx->rank - 1 + i] == x->dims[k + i];
    if (!ok) {
        char a[128];
        return shape_fail(g, n, "updates %s must be indices.shape[:-1] + data.shape[%lld:]", sc_desc_str(u, a, sizeof a), (long long)k);
    }
    return shape_out(g, n, x);
}

/* GatherND: indices (i64) [..., k] with batch_dims b: Y = indices.shape[:-1] + data.shape[b + k:], the
 * first b dims of data and indices equal. */
sc_status shape_gather_nd(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 0), *idx = shape_in(g, n, 1);
    int64_t b = n->attrs->gather_nd.batch_dims;
    if (idx->dtype != SC_I64) return shape_fail(g, n, "indices must be i64");
    if (idx->rank < 1 || b >= idx->rank || b >= x->rank) return shape_fail(g, n, "batch_dims %lld needs indices and data of higher rank", (long long)b);
    int64_t k = idx->dims[idx->rank - 1];
    if (k < 1 || b + k > x->rank) return shape_fail(g, n, "indices' last dim %lld must be in [1, %lld]", (long long)k, (long long)(x->rank - b));
    for (int i = 0; i < b; i++)
        if (idx->dims[i] != x->dims[i]) return shape_fail(g, n, "batch dim %d differs between data and indices", i);
    sc_desc out = {.dtype = x->dtype, .rank = idx->rank - 1 + x->rank - (int)(b + k)};
    if (out.rank > SC_MAX_RANK) return shape_fail(g, n, "the output would have rank %d", out.rank);
    for (int i = 0; i < idx->rank - 1; i++) out.dims[i] = idx->dims[i];
    for (int i = (int)(b + k); i < x->rank; i++) out.dims[idx->rank - 1 + i - (int)(b + k)] = x->dims[i];
    return shape_out(g, n, &out);
}

/* Tile: output dim i = input dim i * repeats[i]; repeats (i64, one per dim, >= 0) must be constant. */
sc_status shape_tile(sc_graph *g, sc_node *n) {
    const sc_desc *x = shape_in(g, n, 0);
    int_list r;
    SC_TRY(read_list(g, n, 1, &r));
    if (r.n != x->rank) return shape_fail(g, n, "repeats has %d values for rank %d", r.n, x->rank);
    sc_desc out = *x;
    for (int i = 0; i < r.n; i++) {
        int64_t k = r.v[i];
        if (k < 0 || (k && x->dims[i] > SC_SHAPE_MAX_DIM / k))
            return shape_fail(g, n, "repeats[%d] = %lld is negative or too large", i, (long long)k);
        out.dims[i] = x->dims[i] * k;
    }
    return shape_out(g, n, &out);
}

/* GatherElements: Y has indices' shape and data's type; indices (i32/i64) have data's rank. */
sc_status shape_gather_elements(sc_graph *g, sc_node *n) {
    const sc_desc *x, *idx;
    int axis;
    SC_TRY(gather_inputs(g, n, &x, &idx, &axis));
    if (idx->rank != x->rank) return shape_fail(g, n, "indices have rank %d, data %d", idx->rank, x->rank);
    sc_desc out = *idx;
    out.dtype = x->dtype;
    return shape_out(g, n, &out);
}
