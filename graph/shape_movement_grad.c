/* Shape functions of the internal gradient ops of data movement (graph/ops_train.def):
 *   SliceGrad  (dY, X, starts, ends[, axes, steps]) -> dX like X
 *   GatherGrad (dY, indices, data[, base]) -> dData like data      attrs.axis (data_dims when
 *              data is absent)
 * Both check that dY has the shape the forward op gave its output (ONNX Slice / Gather rules), so
 * a wrongly wired gradient fails at build time, naming the node, not in the kernel. */
#include <string.h>

#include "graph/shape_fns.h"

sc_status shape_slice_grad(sc_graph *g, sc_node *n) {
    const sc_desc *dy = shape_in(g, n, 0), *x = shape_in(g, n, 1);
    int64_t starts[SC_MAX_RANK], ends[SC_MAX_RANK], axes[SC_MAX_RANK], steps[SC_MAX_RANK];
    int ns = 0, ne = 0, na = -1, nst = -1;
    SC_TRY(shape_const_ints(g, n, 2, starts, SC_MAX_RANK, &ns));
    SC_TRY(shape_const_ints(g, n, 3, ends, SC_MAX_RANK, &ne));
    if (node_has_input(n, 4)) SC_TRY(shape_const_ints(g, n, 4, axes, SC_MAX_RANK, &na));
    if (node_has_input(n, 5)) SC_TRY(shape_const_ints(g, n, 5, steps, SC_MAX_RANK, &nst));
    if (ne != ns || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
        return shape_fail(g, n, "starts, ends, axes and steps must have the same length");
    if (dy->rank != x->rank || dy->dtype != x->dtype) return shape_fail(g, n, "dY must have X's rank and dtype");
    int64_t want[SC_MAX_RANK];
    bool seen[SC_MAX_RANK] = {false};
    for (int i = 0; i < x->rank; i++) want[i] = x->dims[i];
    for (int k = 0; k < ns; k++) {
        int a;
        SC_TRY(shape_axis(g, n, na >= 0 ? axes[k] : k, x->rank, &a));
        if (seen[a]) return shape_fail(g, n, "axis %d repeats", a);
        seen[a] = true;
        int64_t s = nst >= 0 ? steps[k] : 1;
        if (s == 0) return shape_fail(g, n, "step is 0 on axis %d", a);
        want[a] = shape_slice_len(x->dims[a], starts[k], ends[k], s);
    }
    for (int i = 0; i < x->rank; i++)
        if (dy->dims[i] != want[i])
            return shape_fail(g, n, "dY dim %d is %lld but the slice has %lld", i, (long long)dy->dims[i], (long long)want[i]);
    return shape_out(g, n, x);
}

/* GatherGrad's output shape: data's, else base's, else the shape autodiff recorded in its attributes
 * (then the data, often a streamed embedding table, is not an input at all). */
static sc_status gather_grad_data_desc(sc_graph *g, sc_node *n, sc_desc *out) {
    const sc_axis_attrs *a = &n->attrs->axis;
    if (n->in[2] >= 0) *out = *shape_in(g, n, 2);
    else if (n->n_in > 3 && n->in[3] >= 0) *out = *shape_in(g, n, 3);
    else if (a->data_rank > 0 && a->data_rank <= SC_MAX_RANK) {
        memset(out, 0, sizeof *out);
        out->dtype = shape_in(g, n, 0)->dtype;
        out->rank = a->data_rank;
        for (int i = 0; i < a->data_rank; i++) out->dims[i] = a->data_dims[i];
    } else {
        return shape_fail(g, n, "data (for its shape), base or a recorded data shape is required");
    }
    return SC_OK;
}

sc_status shape_gather_grad(sc_graph *g, sc_node *n) {
    bool has_base = n->n_in > 3 && n->in[3] >= 0;
    sc_desc data_desc;
    SC_TRY(gather_grad_data_desc(g, n, &data_desc));
    const sc_desc *dy = shape_in(g, n, 0), *idx = shape_in(g, n, 1), *data = &data_desc;
    int axis;
    SC_TRY(shape_axis(g, n, n->attrs->axis.axis, data->rank, &axis));
    if (idx->dtype != SC_I64 && idx->dtype != SC_I32) return shape_fail(g, n, "indices must be i32 or i64");
    if (dy->dtype != data->dtype) return shape_fail(g, n, "dY must have data's dtype");
    sc_desc want = *data;
    want.rank = 0;
    for (int i = 0; i < axis; i++) want.dims[want.rank++] = data->dims[i];
    for (int i = 0; i < idx->rank; i++) want.dims[want.rank++] = idx->dims[i];
    for (int i = axis + 1; i < data->rank; i++) want.dims[want.rank++] = data->dims[i];
    if (want.rank > SC_MAX_RANK || dy->rank != want.rank || !sc_desc_same_shape(dy, &want))
        return shape_fail(g, n, "dY must be data[:axis] ++ indices ++ data[axis+1:]");
    if (has_base) {
        const sc_desc *base = shape_in(g, n, 3);
        if (base->dtype != data->dtype || !sc_desc_same_shape(base, data)) return shape_fail(g, n, "base must have data's dtype and shape");
    }
    return shape_out(g, n, data);
}

/* GatherElementsGrad: dData of the recorded data shape; dY and indices have one shape, no larger
 * than data's off the axis. */
sc_status shape_gather_elements_grad(sc_graph *g, sc_node *n) {
    const sc_axis_attrs *a = &n->attrs->axis;
    const sc_desc *dy = shape_in(g, n, 0), *idx = shape_in(g, n, 1);
    if (a->data_rank <= 0 || a->data_rank > SC_MAX_RANK) return shape_fail(g, n, "no recorded data shape");
    sc_desc data = {.dtype = dy->dtype, .rank = a->data_rank};
    for (int i = 0; i < a->data_rank; i++) data.dims[i] = a->data_dims[i];
    int axis;
    SC_TRY(shape_axis(g, n, a->axis, data.rank, &axis));
    if (idx->dtype != SC_I64 && idx->dtype != SC_I32) return shape_fail(g, n, "indices must be i32 or i64");
    if (dy->rank != data.rank || !sc_desc_same_shape(dy, idx)) return shape_fail(g, n, "dY must have the shape of indices and data's rank");
    for (int i = 0; i < data.rank; i++)
        if (i != axis && idx->dims[i] > data.dims[i])
            return shape_fail(g, n, "indices dim %d is %lld, data's %lld", i, (long long)idx->dims[i], (long long)data.dims[i]);
    return shape_out(g, n, &data);
}
