/* Gradient rules of the shape and data-movement ops (contract in autodiff/grad.h). Each moves dY
 * back to where its elements came from:
 *   Reshape, Flatten, Squeeze, Unsqueeze: reshape dY to X's shape.
 *   Transpose: transpose dY by the inverse permutation.
 *   Concat: slice each input's range of the axis out of dY.
 *   Split: concatenate the output gradients (zeros for outputs that got none).
 *   Slice: SliceGrad (scatter dY into zeros at the sliced positions).
 *   Gather: GatherGrad (scatter-add dY rows at the indices: repeated indices accumulate).
 *   Expand: sum dY over the broadcast dims.
 *   Pad (constant mode): slice the padded border off dY (and zero-pad where the forward cropped);
 *     the pad value gets the sum of dY over the border.
 *   Trilu: the same triangle mask applied to dY.
 */
#include <stdlib.h>
#include <string.h>

#include "autodiff/grad_rules.h"

void grad_reshape_like(sc_grad_ctx *c) { set_GI(c, 0, ad_reshape(c, GO(c, 0), ad_desc(c, I(c, 0)))); }

void grad_transpose(sc_grad_ctx *c) {
    const sc_transpose_attrs *t = &c->fwd.attrs->transpose;
    int r = ad_desc(c, I(c, 0))->rank;
    int64_t inv[SC_MAX_RANK];
    for (int i = 0; i < r; i++) {
        int64_t p = t->n_perm ? t->perm[i] : r - 1 - i; /* perm[i]: output dim i reads input dim p */
        if (p < 0) p += r;
        inv[p] = i;
    }
    set_GI(c, 0, ad_transpose(c, GO(c, 0), inv, r));
}

/* Slice of x along one axis, [start, end). */
static int slice_axis(sc_grad_ctx *c, int x, int64_t axis, int64_t start, int64_t end) {
    int in[4] = {x, ad_const_i64(c, &start, 1), ad_const_i64(c, &end, 1), ad_const_i64(c, &axis, 1)};
    return ad_emit(c, SC_OP_SLICE, in, 4, 1, NULL, NULL);
}

void grad_concat(sc_grad_ctx *c) {
    int r = ad_desc(c, O(c, 0))->rank;
    int64_t axis = c->fwd.attrs->axis.axis < 0 ? c->fwd.attrs->axis.axis + r : c->fwd.attrs->axis.axis;
    int64_t off = 0;
    for (int i = 0; i < c->fwd.n_in; i++) {
        if (I(c, i) < 0) continue;
        const sc_desc *d = ad_desc(c, I(c, i));
        int64_t len = d->dims[axis];
        if (NEED_GI(c, i)) set_GI(c, i, slice_axis(c, GO(c, 0), axis, off, off + len));
        off += len;
    }
}

void grad_split(sc_grad_ctx *c) {
    int n = c->fwd.n_out;
    int parts[64];
    if (n > 64) {
        ad_fail(c, "more than 64 outputs are not supported");
        return;
    }
    int m = 0;
    for (int k = 0; k < n; k++) {
        if (O(c, k) < 0) continue; /* an omitted output still has its size in the split */
        parts[m++] = GO(c, k) >= 0 ? GO(c, k) : ad_zeros(c, ad_desc(c, O(c, k)));
    }
    if (m != n) {
        ad_fail(c, "omitted Split outputs are not supported by the gradient");
        return;
    }
    if (m == 1) {
        set_GI(c, 0, parts[0]);
        return;
    }
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.axis.axis = c->fwd.attrs->axis.axis;
    set_GI(c, 0, ad_emit(c, SC_OP_CONCAT, parts, m, 1, NULL, &a));
}

void grad_slice(sc_grad_ctx *c) {
    int in[6] = {GO(c, 0), I(c, 0), I(c, 1), I(c, 2), I(c, 3), I(c, 4)};
    int n_in = c->fwd.n_in + 1;
    while (n_in > 4 && in[n_in - 1] < 0) n_in--;
    set_GI(c, 0, ad_emit(c, SC_OP_SLICE_GRAD, in, n_in, 1, NULL, NULL));
}

/* The data is not an input: its shape goes into the attributes. A data input would make the table
 * (a streamed embedding, or its 16-bit cast) come back to the device at the end of backward for
 * nothing but its shape. The fourth input (base) starts absent; backward.c sets it to the data's
 * running gradient sum when the data has other consumers (a tied embedding), so the rows are added
 * into that sum instead of into a new zeroed tensor summed by an Add: one [vocab, dim] buffer
 * instead of three. */
/* The forward node's attributes with the gathered data's shape recorded (sc_axis_attrs.data_dims), so
 * the gradient node need not read the data for its shape. */
static sc_attrs with_data_shape(const sc_grad_ctx *c) {
    sc_attrs a = *c->fwd.attrs;
    const sc_desc *data = ad_desc(c, I(c, 0));
    a.axis.data_rank = data->rank;
    for (int i = 0; i < data->rank; i++) a.axis.data_dims[i] = data->dims[i];
    return a;
}

void grad_gather(sc_grad_ctx *c) {
    int in[4] = {GO(c, 0), I(c, 1), -1, -1};
    sc_attrs a = with_data_shape(c);
    set_GI(c, 0, ad_emit(c, SC_OP_GATHER_GRAD, in, 4, 1, NULL, &a));
}

/* dData: dY scattered back to where each element was read, summed where indices repeat. */
void grad_gather_elements(sc_grad_ctx *c) {
    int in[2] = {GO(c, 0), I(c, 1)};
    sc_attrs a = with_data_shape(c);
    set_GI(c, 0, ad_emit(c, SC_OP_GATHER_ELEMENTS_GRAD, in, 2, 1, NULL, &a));
}

/* ScatterND, reduction max or min: Y[p] = max(data[p], the updates at p). dY[p] goes to the values
 * equal to Y[p], split evenly between ties as PyTorch's scatter_reduce amax/amin splits it:
 * n[p] = [data[p] == Y[p]] + #{t at p: u_t == Y[p]}, dData = dY / n * [data == Y],
 * dUpdates = GatherND(dY / n, indices) * [u == GatherND(Y, indices)]. */
static void scatter_nd_extremum(sc_grad_ctx *c) {
    sc_dtype t = ad_desc(c, I(c, 0))->dtype;
    sc_attrs g = {.gather_nd = {.batch_dims = 0}}, add = {.scatter_nd = {.reduction = SC_SCATTER_ADD}};
    int y_at = ad_emit(c, SC_OP_GATHER_ND, (const int[]){O(c, 0), I(c, 1)}, 2, 1, NULL, &g);
    int hit_u = ad_cast(c, ad_binary(c, SC_OP_EQUAL, I(c, 2), y_at), t);
    int hit_d = ad_cast(c, ad_binary(c, SC_OP_EQUAL, I(c, 0), O(c, 0)), t);
    int ties = ad_emit(c, SC_OP_SCATTER_ND, (const int[]){hit_d, I(c, 1), hit_u}, 3, 1, NULL, &add);
    int share = ad_binary(c, SC_OP_DIV, GO(c, 0), ties);
    if (NEED_GI(c, 0)) set_GI(c, 0, ad_binary(c, SC_OP_MUL, share, hit_d));
    if (NEED_GI(c, 2))
        set_GI(c, 2, ad_binary(c, SC_OP_MUL, ad_emit(c, SC_OP_GATHER_ND, (const int[]){share, I(c, 1)}, 2, 1, NULL, &g),
                               hit_u));
}

/* Whether the constant index tuples of a ScatterND reach distinct slices (false when they repeat
 * or are computed at run time). */
static bool scatter_tuples_distinct(sc_grad_ctx *c) {
    const sc_value *iv = &c->g->values[I(c, 1)];
    const sc_desc *xd = ad_desc(c, I(c, 0));
    if (!iv->data || iv->kind != SC_VALUE_CONST || iv->desc.dtype != SC_I64) return false;
    int k = (int)iv->desc.dims[iv->desc.rank - 1];
    int64_t n = sc_desc_numel(&iv->desc) / (k ? k : 1), slots = 1;
    for (int d = 0; d < k; d++) slots *= xd->dims[d];
    unsigned char *seen = calloc((size_t)(slots ? slots : 1), 1);
    if (!seen) return false;
    const int64_t *idx = iv->data;
    bool ok = true;
    for (int64_t j = 0; j < n && ok; j++) {
        int64_t at = 0;
        for (int d = 0; d < k; d++) {
            int64_t v = idx[j * k + d];
            at = at * xd->dims[d] + (v < 0 ? v + xd->dims[d] : v);
        }
        ok = at >= 0 && at < slots && !seen[at];
        if (ok) seen[at] = 1;
    }
    free(seen);
    return ok;
}

/* ScatterND, reduction mul, tuples distinct: Y[p] = data[p] * u_t where tuple t reaches p, so
 * dData = dY * ScatterND(1, indices, u) and dUpdates = GatherND(dY * data, indices). */
static void scatter_nd_product(sc_grad_ctx *c) {
    if (!scatter_tuples_distinct(c)) {
        ad_fail(c, "not supported: the gradient of ScatterND with reduction mul needs constant index tuples that "
                   "reach distinct slices (each update's gradient would be the product of the others at its place)");
        return;
    }
    sc_attrs g = {.gather_nd = {.batch_dims = 0}};
    if (NEED_GI(c, 2)) {
        int dy_x = ad_binary(c, SC_OP_MUL, GO(c, 0), I(c, 0));
        set_GI(c, 2, ad_emit(c, SC_OP_GATHER_ND, (const int[]){dy_x, I(c, 1)}, 2, 1, NULL, &g));
    }
    if (!NEED_GI(c, 0)) return;
    int ones = ad_fill(c, ad_desc(c, I(c, 0)), 1);
    int factor = ad_emit(c, SC_OP_SCATTER_ND, (const int[]){ones, I(c, 1), I(c, 2)}, 3, 1, NULL, NULL);
    set_GI(c, 0, ad_binary(c, SC_OP_MUL, GO(c, 0), factor));
}

/* ScatterND: dUpdates = GatherND(dY, indices), what each update reached; dData = dY where no
 * update replaced the data (reduction none: ScatterND(dY, indices, 0)), all of dY for add. With
 * repeated indices under none only the last update reaches Y; its earlier ones still get dY here
 * (ONNX leaves their order to the runtime; Scorch applies tuples in order). Mul, max and min above. */
void grad_scatter_nd(sc_grad_ctx *c) {
    sc_scatter_reduction red = c->fwd.attrs->scatter_nd.reduction;
    if (red == SC_SCATTER_MAX || red == SC_SCATTER_MIN) {
        scatter_nd_extremum(c);
        return;
    }
    if (red == SC_SCATTER_MUL) {
        scatter_nd_product(c);
        return;
    }
    sc_attrs g = {.gather_nd = {.batch_dims = 0}};
    if (NEED_GI(c, 2)) set_GI(c, 2, ad_emit(c, SC_OP_GATHER_ND, (const int[]){GO(c, 0), I(c, 1)}, 2, 1, NULL, &g));
    if (!NEED_GI(c, 0)) return;
    if (red == SC_SCATTER_ADD) {
        set_GI(c, 0, GO(c, 0));
        return;
    }
    int zeros = ad_zeros(c, ad_desc(c, I(c, 2)));
    set_GI(c, 0, ad_emit(c, SC_OP_SCATTER_ND, (const int[]){GO(c, 0), I(c, 1), zeros}, 3, 1, NULL, NULL));
}

/* GatherND with batch_dims b: data [B.., R..], indices [B.., I.., k], dY [B.., I.., R[k:]..]. The
 * batch dims flatten to one of Bt = prod(B) and the indices gain that dim's coordinate in front
 * (a constant: tuple t of batch row j becomes (j, idx..)), so batch_dims 0 applies to the
 * flattened data [Bt, R..]. */
static void gather_nd_batched(sc_grad_ctx *c) {
    const sc_desc xd_copy = *ad_desc(c, I(c, 0)), *xd = &xd_copy; /* g->values grows below */
    const sc_desc *id = ad_desc(c, I(c, 1));
    int b = (int)c->fwd.attrs->gather_nd.batch_dims, k = (int)id->dims[id->rank - 1];
    int64_t bt = 1, tuples = 1;
    for (int i = 0; i < b; i++) bt *= xd->dims[i];
    for (int i = b; i < id->rank - 1; i++) tuples *= id->dims[i];
    int64_t flat[SC_MAX_RANK] = {bt}, idx_dims[3] = {bt, tuples, k}, row_dims[3] = {bt, tuples, 1};
    int64_t up[SC_MAX_RANK] = {bt, tuples};
    for (int i = b; i < xd->rank; i++) flat[1 + i - b] = xd->dims[i];
    for (int i = b + k; i < xd->rank; i++) up[2 + i - b - k] = xd->dims[i];
    int64_t n_rows = bt * tuples;
    if (n_rows > INT32_MAX) {
        ad_fail(c, "%lld index tuples: more than the 2^31 the batch coordinates can hold", (long long)n_rows);
        return;
    }
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)(n_rows ? n_rows : 1));
    if (!rows) {
        ad_fail(c, "out of memory for the batch coordinates of %lld tuples", (long long)n_rows);
        return;
    }
    for (int64_t j = 0; j < n_rows; j++) rows[j] = j / tuples;
    sc_desc rd = sc_desc_make(SC_I64, 3, row_dims), idd = sc_desc_make(SC_I64, 3, idx_dims);
    sc_desc fd = sc_desc_make(xd->dtype, 1 + xd->rank - b, flat), ud = sc_desc_make(xd->dtype, 2 + xd->rank - b - k, up);
    int row = ad_reshape(c, ad_const_i64(c, rows, (int)n_rows), &rd);
    free(rows);
    int idx = ad_reshape(c, I(c, 1), &idd);
    sc_attrs cat = {.axis = {.axis = 2}};
    int tuples_v = ad_emit(c, SC_OP_CONCAT, (const int[]){row, idx}, 2, 1, NULL, &cat);
    sc_attrs a = {.scatter_nd = {.reduction = SC_SCATTER_ADD}};
    int in[3] = {ad_zeros(c, &fd), tuples_v, ad_reshape(c, GO(c, 0), &ud)};
    set_GI(c, 0, ad_reshape(c, ad_emit(c, SC_OP_SCATTER_ND, in, 3, 1, NULL, &a), xd));
}

/* GatherND: dData = ScatterND(0, indices, dY) with reduction add, summing where tuples repeat, in
 * tuple order. */
void grad_gather_nd(sc_grad_ctx *c) {
    if (c->fwd.attrs->gather_nd.batch_dims > 0) {
        gather_nd_batched(c);
        return;
    }
    sc_attrs a = {.scatter_nd = {.reduction = SC_SCATTER_ADD}};
    int zeros = ad_zeros(c, ad_desc(c, I(c, 0)));
    set_GI(c, 0, ad_emit(c, SC_OP_SCATTER_ND, (const int[]){zeros, I(c, 1), GO(c, 0)}, 3, 1, NULL, &a));
}

void grad_expand(sc_grad_ctx *c) { set_GI(c, 0, ad_reduce_to_shape(c, GO(c, 0), ad_desc(c, I(c, 0)))); }

/* ONNX Pad: pads = [x1_begin, x2_begin, ..., x1_end, x2_end, ...] over `axes` (default all);
 * negative pads crop. dX = dY with positive pads sliced off, then zero-padded where pads were
 * negative (those input elements never reached Y). */
void grad_pad(sc_grad_ctx *c) {
    if (c->fwd.attrs->pad.mode != SC_PAD_CONSTANT) {
        ad_fail(c, "not supported: the gradient of Pad is implemented for constant mode only");
        return;
    }
    const sc_desc *xd = ad_desc(c, I(c, 0));
    int r = xd->rank;
    int64_t pads[2 * SC_MAX_RANK], axes[SC_MAX_RANK];
    int n_pads = 0, n_axes = 0;
    if (!ad_const_ints(c, I(c, 1), pads, 2 * SC_MAX_RANK, &n_pads)) return;
    if (!ad_const_ints(c, I(c, 3), axes, SC_MAX_RANK, &n_axes)) return;
    if (I(c, 3) < 0) {
        n_axes = r;
        for (int i = 0; i < r; i++) axes[i] = i;
    }
    if (n_pads != 2 * n_axes) {
        ad_fail(c, "%d pads for %d axes", n_pads, n_axes);
        return;
    }
    int64_t begin[SC_MAX_RANK] = {0}, end[SC_MAX_RANK] = {0};
    for (int i = 0; i < n_axes; i++) {
        int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
        if (a < 0 || a >= r) {
            ad_fail(c, "axis %lld out of range for rank %d", (long long)axes[i], r);
            return;
        }
        begin[a] = pads[i];
        end[a] = pads[n_axes + i];
    }
    const sc_desc *yd = ad_desc(c, O(c, 0));
    int64_t st[SC_MAX_RANK], en[SC_MAX_RANK], ax[SC_MAX_RANK], zp[2 * SC_MAX_RANK];
    bool crop = false, pad = false;
    for (int i = 0; i < r; i++) {
        st[i] = begin[i] > 0 ? begin[i] : 0;
        en[i] = yd->dims[i] - (end[i] > 0 ? end[i] : 0);
        ax[i] = i;
        zp[i] = begin[i] < 0 ? -begin[i] : 0;
        zp[r + i] = end[i] < 0 ? -end[i] : 0;
        crop |= begin[i] > 0 || end[i] > 0;
        pad |= begin[i] < 0 || end[i] < 0;
    }
    int dy = GO(c, 0), core = dy;
    if (crop) {
        int in[4] = {dy, ad_const_i64(c, st, r), ad_const_i64(c, en, r), ad_const_i64(c, ax, r)};
        core = ad_emit(c, SC_OP_SLICE, in, 4, 1, NULL, NULL);
    }
    int g = core;
    if (pad) {
        sc_attrs a;
        memset(&a, 0, sizeof a);
        a.pad.mode = SC_PAD_CONSTANT;
        int in[2] = {core, ad_const_i64(c, zp, 2 * r)};
        g = ad_emit(c, SC_OP_PAD, in, 2, 1, NULL, &a);
    }
    if (NEED_GI(c, 0)) set_GI(c, 0, g);
    if (NEED_GI(c, 2)) {
        /* Every border element of Y is the pad value: its gradient is dY summed over the border. */
        int border = ad_binary(c, SC_OP_SUB, ad_reduce_sum(c, dy, NULL, 0, false), ad_reduce_sum(c, core, NULL, 0, false));
        set_GI(c, 2, ad_reshape(c, border, ad_desc(c, I(c, 2))));
    }
}

void grad_trilu(sc_grad_ctx *c) {
    int in[2] = {GO(c, 0), I(c, 1)};
    set_GI(c, 0, ad_emit(c, SC_OP_TRILU, in, I(c, 1) >= 0 ? 2 : 1, 1, NULL, c->fwd.attrs));
}

/* Tile: output axis i is r_i copies of input axis i, the copy index outermost, so
 * dX = ReduceSum(Reshape(dY, [r_0, d_0, r_1, d_1, ...]), axes 0, 2, 4, ...). */
void grad_tile(sc_grad_ctx *c) {
    const sc_desc xd = *ad_desc(c, I(c, 0));
    int64_t r[SC_MAX_RANK];
    int n = 0;
    if (!ad_const_ints(c, I(c, 1), r, SC_MAX_RANK, &n)) return;
    if (2 * xd.rank > SC_MAX_RANK) {
        ad_fail(c, "the gradient of a rank-%d Tile needs rank %d (at most %d)", xd.rank, 2 * xd.rank, SC_MAX_RANK);
        return;
    }
    sc_desc split = xd;
    int64_t axes[SC_MAX_RANK];
    split.rank = 2 * xd.rank;
    for (int i = 0; i < xd.rank; i++) {
        split.dims[2 * i] = r[i];
        split.dims[2 * i + 1] = xd.dims[i];
        axes[i] = 2 * i;
    }
    split.dtype = ad_desc(c, GO(c, 0))->dtype;
    set_GI(c, 0, ad_reduce_sum(c, ad_reshape(c, GO(c, 0), &split), axes, xd.rank, false));
}
