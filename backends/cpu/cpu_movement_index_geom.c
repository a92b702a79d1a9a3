/* Slice and Gather geometry shared by cpu_movement_index.c and cpu_movement_grad.c: the rules are in
 * cpu_movement_index_geom.h. Errors name the node, the offending value and its axis.
 */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_movement_index_geom.h"

/* Reads a 1-D integer input (i32/i64) of at most SC_MAX_RANK entries; *n = -1 when absent. */
static sc_status ints_read(const sc_kernel_call *c, int k, const char *what, int64_t *dst, int *n) {
    *n = -1;
    if (k >= c->n_in || !c->in[k].data) return SC_OK;
    const sc_tensor *t = &c->in[k];
    int64_t cnt = sc_desc_numel(&t->desc);
    if ((t->desc.dtype != SC_I32 && t->desc.dtype != SC_I64) || cnt > SC_MAX_RANK || t->desc.rank > 1)
        return cpu_errorf(c, "%s must be a 1-D i32/i64 tensor of at most %d entries", what, SC_MAX_RANK);
    cpu_convert(dst, SC_I64, t->data, t->desc.dtype, cnt);
    *n = (int)cnt;
    return SC_OK;
}

/* Clamps start b and end e of an axis of length d for step s; returns the element count. */
static int64_t slice_clamp(int64_t d, int64_t s, int64_t *b, int64_t *e) {
    if (d == 0) { /* an empty axis stays empty whatever the steps (and nothing may be read) */
        *b = *e = 0;
        return 0;
    }
    if (*b < 0) *b += d;
    if (*e < 0) *e += d;
    if (s > 0) {
        *b = *b < 0 ? 0 : *b > d ? d : *b;
        *e = *e < 0 ? 0 : *e > d ? d : *e;
        return *e > *b ? (*e - *b + s - 1) / s : 0;
    }
    *b = *b < 0 ? 0 : *b > d - 1 ? d - 1 : *b;
    *e = *e < -1 ? -1 : *e > d - 1 ? d - 1 : *e;
    return *b > *e ? (*b - *e + (-s) - 1) / (-s) : 0;
}

sc_status slice_geom_read(const sc_kernel_call *c, int first_input, const sc_desc *x, const sc_desc *y,
                          const char *y_name, slice_geom *g) {
    int64_t starts[SC_MAX_RANK], ends[SC_MAX_RANK], axes[SC_MAX_RANK], steps[SC_MAX_RANK];
    int ns, ne, na, nst;
    SC_TRY(ints_read(c, first_input, "starts", starts, &ns));
    SC_TRY(ints_read(c, first_input + 1, "ends", ends, &ne));
    SC_TRY(ints_read(c, first_input + 2, "axes", axes, &na));
    SC_TRY(ints_read(c, first_input + 3, "steps", steps, &nst));
    if (ns < 0 || ne != ns || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
        return cpu_errorf(c, "starts, ends, axes and steps must have the same length");
    int64_t first[SC_MAX_RANK], step[SC_MAX_RANK], count[SC_MAX_RANK];
    bool seen[SC_MAX_RANK] = {false};
    for (int i = 0; i < x->rank; i++) {
        first[i] = 0;
        step[i] = 1;
        count[i] = x->dims[i];
    }
    for (int k = 0; k < ns; k++) {
        int64_t a = na >= 0 ? axes[k] : k;
        if (a < 0) a += x->rank;
        if (a < 0 || a >= x->rank || seen[a])
            return cpu_errorf(c, "axis %lld invalid or repeated for rank %d", (long long)(na >= 0 ? axes[k] : k), x->rank);
        seen[a] = true;
        int64_t s = nst >= 0 ? steps[k] : 1, b = starts[k], e = ends[k];
        if (s == 0) return cpu_errorf(c, "step is 0 on axis %lld", (long long)a);
        count[a] = slice_clamp(x->dims[a], s, &b, &e);
        first[a] = b;
        step[a] = s;
    }
    if (y->rank != x->rank) return cpu_errorf(c, "output rank %d differs from input rank %d", y->rank, x->rank);
    int64_t stride = 1, y_stride = 1;
    g->base = 0;
    g->empty = false;
    for (int i = x->rank - 1; i >= 0; i--) {
        if (count[i] != y->dims[i])
            return cpu_errorf(c, "axis %d: slice has %lld elements, %s has %lld", i, (long long)count[i], y_name,
                              (long long)y->dims[i]);
        g->empty |= count[i] == 0;
        if (count[i] > 0) g->base += first[i] * stride;
        g->x_stride[i] = step[i] * stride;
        g->y_stride[i] = y_stride;
        stride *= x->dims[i];
        y_stride *= y->dims[i];
    }
    return SC_OK;
}

/* n elements of es bytes, byte steps dsb / ssb; constant sizes let the compiler emit plain moves. */
static void row_copy(char *d, int64_t dsb, const char *s, int64_t ssb, int64_t n, size_t es) {
    switch (es) {
    case 4:
        for (int64_t j = 0; j < n; j++) memcpy(d + j * dsb, s + j * ssb, 4);
        break;
    case 8:
        for (int64_t j = 0; j < n; j++) memcpy(d + j * dsb, s + j * ssb, 8);
        break;
    default:
        for (int64_t j = 0; j < n; j++) memcpy(d + j * dsb, s + j * ssb, es);
        break;
    }
}

/* Merges each axis into the next where both sides are contiguous across the pair (stride[i] =
 * dims[i+1] * stride[i+1]), so a slice of whole rows or planes (a channel split of NCHW, as
 * ShuffleNet's chunks) copies one long run per outer index instead of one per innermost row:
 * 26 such Slices of 8x8 planes cost 10 us each as 32-byte memcpys. Returns the merged rank. */
static int axes_merge(int rank, const int64_t *dims, const int64_t *ds, const int64_t *ss, int64_t *md, int64_t *mds,
                      int64_t *mss) {
    int r = 0;
    for (int i = 0; i < rank; i++) {
        if (dims[i] == 1) continue; /* its stride is never used */
        if (r > 0 && mds[r - 1] == dims[i] * ds[i] && mss[r - 1] == dims[i] * ss[i]) {
            md[r - 1] *= dims[i];
            mds[r - 1] = ds[i], mss[r - 1] = ss[i];
            continue;
        }
        md[r] = dims[i], mds[r] = ds[i], mss[r] = ss[i];
        r++;
    }
    if (r == 0) md[0] = mds[0] = mss[0] = 1, r = 1; /* every axis of size 1: one element */
    return r;
}

void slice_geom_copy(char *dst, const int64_t *dst_stride, const char *src, const int64_t *src_stride, int rank,
                     const int64_t *full_dims, size_t es) {
    if (rank == 0) {
        memcpy(dst, src, es);
        return;
    }
    int64_t dims[SC_MAX_RANK], dmerged[SC_MAX_RANK], smerged[SC_MAX_RANK];
    rank = axes_merge(rank, full_dims, dst_stride, src_stride, dims, dmerged, smerged);
    dst_stride = dmerged, src_stride = smerged;
    int a = rank - 1;
    int64_t outer = 1, inner = dims[a], ds = dst_stride[a], ss = src_stride[a], e = (int64_t)es;
    int64_t dsb = ds * e, ssb = ss * e; /* byte steps along the innermost axis */
    for (int i = 0; i < a; i++) outer *= dims[i];
    if (outer * inner == 0) return;
    int par = outer * inner >= CPU_PAR_MIN && outer > 1;
#pragma omp parallel for if (par)
    for (int64_t r = 0; r < outer; r++) {
        int64_t f = r, doff = 0, soff = 0;
        for (int i = a - 1; i >= 0; i--) {
            int64_t q = f % dims[i];
            doff += q * dst_stride[i];
            soff += q * src_stride[i];
            f /= dims[i];
        }
        char *d = dst + doff * e;
        const char *s = src + soff * e;
        if (ds == 1 && ss == 1) {
            memcpy(d, s, (size_t)(inner * e));
        } else {
            row_copy(d, dsb, s, ssb, inner, es);
        }
    }
}

sc_status gather_geom_read(const sc_kernel_call *c, const sc_desc *data, const sc_tensor *indices,
                           const sc_desc *gathered, const char *gathered_name, gather_geom *g) {
    const sc_desc *id = &indices->desc;
    g->idx = NULL;
    g->axis = c->node->attrs->axis.axis;
    if (g->axis < 0) g->axis += data->rank;
    if (g->axis < 0 || g->axis >= data->rank)
        return cpu_errorf(c, "axis %lld out of range for rank %d", (long long)c->node->attrs->axis.axis, data->rank);
    if (id->dtype != SC_I32 && id->dtype != SC_I64)
        return cpu_errorf(c, "indices dtype %s not supported (i32/i64)", sc_dtype_name(id->dtype));
    g->nidx = sc_desc_numel(id);
    g->n = data->dims[g->axis];
    g->outer = 1;
    g->inner = 1;
    for (int i = 0; i < g->axis; i++) g->outer *= data->dims[i];
    for (int i = (int)g->axis + 1; i < data->rank; i++) g->inner *= data->dims[i];
    if (sc_desc_numel(gathered) != g->outer * g->nidx * g->inner)
        return cpu_errorf(c, "%s does not match data and indices shapes", gathered_name);
    int64_t *idx = malloc((size_t)(g->nidx ? g->nidx : 1) * sizeof *idx);
    if (!idx) return cpu_errorf(c, "out of memory");
    cpu_convert(idx, SC_I64, indices->data, id->dtype, g->nidx);
    for (int64_t k = 0; k < g->nidx; k++) {
        int64_t v = idx[k] < 0 ? idx[k] + g->n : idx[k];
        if (v < 0 || v >= g->n) {
            sc_status st = cpu_errorf(c, "index %lld (indices element %lld) out of range for axis %lld of size %lld",
                                      (long long)idx[k], (long long)k, (long long)g->axis, (long long)g->n);
            free(idx);
            return st;
        }
        idx[k] = v;
    }
    g->idx = idx;
    return SC_OK;
}

void gather_geom_free(gather_geom *g) {
    free(g->idx);
    g->idx = NULL;
}
