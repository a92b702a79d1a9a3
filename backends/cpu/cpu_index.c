/* Slice and Gather (ONNX opset 13).
 *
 * Slice: starts/ends/axes/steps are inputs (i32 or i64). Per the spec, negative starts/ends add the
 * axis size, then for step > 0 start and end clamp to [0, dim], for step < 0 start clamps to
 * [0, dim-1] and end to [-1, dim-1]; the count is ceil((end - start) / step), at least 0. The copy
 * is a strided walk: input offset = sum over axes (start + i * step) * stride, rows memcpy'd when
 * the innermost step is 1.
 * Gather: out = data[:axis] ++ indices.shape ++ data[axis+1:]; negative indices count from the
 * end; an index outside [-n, n-1] is an error naming the node, the index and its position.
 */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_kernels.h"

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

/* Copies out[idx] = in[base + sum idx[a] * is[a]] over the output dims od (elements of size es). */
static void strided_copy(char *out, const char *in, int rank, const int64_t *od, const int64_t *is, size_t es) {
    if (rank == 0) {
        memcpy(out, in, es);
        return;
    }
    int a = rank - 1;
    int64_t outer = 1, inner = od[a];
    for (int i = 0; i < a; i++) outer *= od[i];
    if (outer * inner == 0) return;
    int par = outer * inner >= CPU_PAR_MIN && outer > 1;
#pragma omp parallel for if (par)
    for (int64_t r = 0; r < outer; r++) {
        int64_t f = r, off = 0;
        for (int i = a - 1; i >= 0; i--) {
            off += (f % od[i]) * is[i];
            f /= od[i];
        }
        char *o = out + r * inner * (int64_t)es;
        const char *x = in + off * (int64_t)es;
        if (is[a] == 1) {
            memcpy(o, x, (size_t)(inner * (int64_t)es));
        } else {
            for (int64_t j = 0; j < inner; j++) memcpy(o + j * (int64_t)es, x + j * is[a] * (int64_t)es, es);
        }
    }
}

sc_status cpu_slice(const sc_kernel_call *c) {
    const sc_desc *x = &c->in[0].desc;
    const sc_desc *y = &c->out[0].desc;
    int64_t starts[SC_MAX_RANK], ends[SC_MAX_RANK], axes[SC_MAX_RANK], steps[SC_MAX_RANK];
    int ns, ne, na, nst;
    SC_TRY(ints_read(c, 1, "starts", starts, &ns));
    SC_TRY(ints_read(c, 2, "ends", ends, &ne));
    SC_TRY(ints_read(c, 3, "axes", axes, &na));
    SC_TRY(ints_read(c, 4, "steps", steps, &nst));
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
        int64_t d = x->dims[a], s = nst >= 0 ? steps[k] : 1, b = starts[k], e = ends[k];
        if (s == 0) return cpu_errorf(c, "step is 0 on axis %lld", (long long)a);
        if (b < 0) b += d;
        if (e < 0) e += d;
        if (s > 0) {
            b = b < 0 ? 0 : b > d ? d : b;
            e = e < 0 ? 0 : e > d ? d : e;
            count[a] = e > b ? (e - b + s - 1) / s : 0;
        } else {
            b = b < 0 ? 0 : b > d - 1 ? d - 1 : b;
            e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
            count[a] = b > e ? (b - e + (-s) - 1) / (-s) : 0;
        }
        first[a] = b;
        step[a] = s;
    }
    if (y->rank != x->rank) return cpu_errorf(c, "output rank %d differs from input rank %d", y->rank, x->rank);
    int64_t base = 0, is[SC_MAX_RANK], stride = 1;
    for (int i = x->rank - 1; i >= 0; i--) {
        if (count[i] != y->dims[i])
            return cpu_errorf(c, "axis %d: slice has %lld elements, output desc has %lld", i, (long long)count[i],
                              (long long)y->dims[i]);
        if (count[i] > 0) base += first[i] * stride;
        is[i] = step[i] * stride;
        stride *= x->dims[i];
    }
    size_t es = sc_dtype_size(x->dtype);
    strided_copy(c->out[0].data, (const char *)c->in[0].data + base * (int64_t)es, y->rank, y->dims, is, es);
    return SC_OK;
}

sc_status cpu_gather(const sc_kernel_call *c) {
    const sc_desc *x = &c->in[0].desc, *id = &c->in[1].desc;
    int64_t axis = c->node->attrs.axis.axis;
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis >= x->rank)
        return cpu_errorf(c, "axis %lld out of range for rank %d", (long long)c->node->attrs.axis.axis, x->rank);
    if (id->dtype != SC_I32 && id->dtype != SC_I64)
        return cpu_errorf(c, "indices dtype %s not supported (i32/i64)", sc_dtype_name(id->dtype));
    int64_t nidx = sc_desc_numel(id), n = x->dims[axis];
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= x->dims[i];
    for (int i = (int)axis + 1; i < x->rank; i++) inner *= x->dims[i];
    if (sc_desc_numel(&c->out[0].desc) != outer * nidx * inner)
        return cpu_errorf(c, "output desc does not match data and indices shapes");
    int64_t *idx = malloc((size_t)(nidx ? nidx : 1) * sizeof *idx);
    if (!idx) return cpu_errorf(c, "out of memory");
    cpu_convert(idx, SC_I64, c->in[1].data, id->dtype, nidx);
    for (int64_t k = 0; k < nidx; k++) {
        int64_t v = idx[k] < 0 ? idx[k] + n : idx[k];
        if (v < 0 || v >= n) {
            sc_status st = cpu_errorf(c, "index %lld (indices element %lld) out of range for axis %lld of size %lld",
                                      (long long)idx[k], (long long)k, (long long)axis, (long long)n);
            free(idx);
            return st;
        }
        idx[k] = v;
    }
    size_t row = (size_t)inner * sc_dtype_size(x->dtype);
    const char *src = c->in[0].data;
    char *dst = c->out[0].data;
    int64_t items = outer * nidx;
    int par = items * inner >= CPU_PAR_MIN && items > 1;
#pragma omp parallel for if (par)
    for (int64_t it = 0; it < items; it++) {
        int64_t o = it / nidx, k = it % nidx;
        memcpy(dst + it * (int64_t)row, src + (o * n + idx[k]) * (int64_t)row, row);
    }
    free(idx);
    return SC_OK;
}
