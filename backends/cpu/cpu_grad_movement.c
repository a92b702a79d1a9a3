/* CPU kernels of the data-movement gradient ops (graph/ops_train.def).
 *
 * SliceGrad (dY, X, starts, ends[, axes, steps]) -> dX: zeros of X's shape with dY written at the
 *   positions Slice read (ONNX Slice rules, as in cpu_index.c): offset = sum over axes
 *   (start + i * step) * stride. Slice positions are distinct, so this is a plain scatter.
 * GatherGrad (dY, indices, data) -> dData: zeros of data's shape, then for every outer index o and
 *   index position k: dData[o, idx[k], :] += dY[o, k, :]. Repeated indices accumulate in index
 *   order; threads split the rows of the trailing dims (columns), never the index loop, so the sum
 *   order, and so the result, does not depend on the thread count. f32 and f64.
 */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_kernels.h"

static sc_status grad_ints_read(const sc_kernel_call *c, int k, const char *what, int64_t *dst, int *n) {
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

/* out[base + sum idx[a] * os[a]] = in[idx] over the dims id of `in` (elements of size es). */
static void strided_scatter(char *out, const char *in, int rank, const int64_t *id, const int64_t *os, size_t es) {
    if (rank == 0) {
        memcpy(out, in, es);
        return;
    }
    int a = rank - 1;
    int64_t outer = 1, inner = id[a];
    for (int i = 0; i < a; i++) outer *= id[i];
    if (outer * inner == 0) return;
    int par = outer * inner >= CPU_PAR_MIN && outer > 1;
#pragma omp parallel for if (par)
    for (int64_t r = 0; r < outer; r++) {
        int64_t f = r, off = 0;
        for (int i = a - 1; i >= 0; i--) {
            off += (f % id[i]) * os[i];
            f /= id[i];
        }
        const char *x = in + r * inner * (int64_t)es;
        char *o = out + off * (int64_t)es;
        if (os[a] == 1) {
            memcpy(o, x, (size_t)(inner * (int64_t)es));
        } else {
            for (int64_t j = 0; j < inner; j++) memcpy(o + j * os[a] * (int64_t)es, x + j * (int64_t)es, es);
        }
    }
}

sc_status cpu_slice_grad(const sc_kernel_call *c) {
    const sc_desc *dy = &c->in[0].desc, *x = &c->out[0].desc;
    int64_t starts[SC_MAX_RANK], ends[SC_MAX_RANK], axes[SC_MAX_RANK], steps[SC_MAX_RANK];
    int ns, ne, na, nst;
    SC_TRY(grad_ints_read(c, 2, "starts", starts, &ns));
    SC_TRY(grad_ints_read(c, 3, "ends", ends, &ne));
    SC_TRY(grad_ints_read(c, 4, "axes", axes, &na));
    SC_TRY(grad_ints_read(c, 5, "steps", steps, &nst));
    if (ns < 0 || ne != ns || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
        return cpu_errorf(c, "starts, ends, axes and steps must have the same length");
    if (dy->rank != x->rank || dy->dtype != x->dtype) return cpu_errorf(c, "dY must have dX's rank and dtype");
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
        if (a < 0 || a >= x->rank || seen[a]) return cpu_errorf(c, "axis %lld invalid or repeated", (long long)a);
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
    int64_t base = 0, os[SC_MAX_RANK], stride = 1;
    bool empty = false;
    for (int i = x->rank - 1; i >= 0; i--) {
        if (count[i] != dy->dims[i])
            return cpu_errorf(c, "axis %d: slice has %lld elements, dY has %lld", i, (long long)count[i], (long long)dy->dims[i]);
        empty |= count[i] == 0;
        if (count[i] > 0) base += first[i] * stride;
        os[i] = step[i] * stride;
        stride *= x->dims[i];
    }
    size_t es = sc_dtype_size(x->dtype);
    memset(c->out[0].data, 0, (size_t)sc_desc_bytes(x));
    if (!empty) strided_scatter((char *)c->out[0].data + base * (int64_t)es, c->in[0].data, dy->rank, dy->dims, os, es);
    return SC_OK;
}

#define GATHER_GRAD_LOOP(T)                                                                        \
    do {                                                                                           \
        const T *src = c->in[0].data;                                                              \
        T *dst = c->out[0].data;                                                                   \
        _Pragma("omp parallel for collapse(2) if (par)")                                           \
        for (int64_t o = 0; o < outer; o++)                                                        \
            for (int64_t cb = 0; cb < n_blocks; cb++) {                                            \
                int64_t j0 = cb * block, j1 = j0 + block < inner ? j0 + block : inner;             \
                for (int64_t k = 0; k < nidx; k++) {                                               \
                    const T *s = src + (o * nidx + k) * inner;                                     \
                    T *d = dst + (o * n + idx[k]) * inner;                                         \
                    for (int64_t j = j0; j < j1; j++) d[j] += s[j];                                \
                }                                                                                  \
            }                                                                                      \
    } while (0)

sc_status cpu_gather_grad(const sc_kernel_call *c) {
    const sc_desc *x = &c->out[0].desc, *id = &c->in[1].desc;
    int64_t axis = c->node->attrs.axis.axis;
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis >= x->rank)
        return cpu_errorf(c, "axis %lld out of range for rank %d", (long long)c->node->attrs.axis.axis, x->rank);
    if (id->dtype != SC_I32 && id->dtype != SC_I64)
        return cpu_errorf(c, "indices dtype %s not supported (i32/i64)", sc_dtype_name(id->dtype));
    if (x->dtype != SC_F32 && x->dtype != SC_F64) return cpu_errorf(c, "dtype %s not supported (f32, f64)", sc_dtype_name(x->dtype));
    int64_t nidx = sc_desc_numel(id), n = x->dims[axis];
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= x->dims[i];
    for (int i = (int)axis + 1; i < x->rank; i++) inner *= x->dims[i];
    if (sc_desc_numel(&c->in[0].desc) != outer * nidx * inner) return cpu_errorf(c, "dY does not match data and indices shapes");
    memset(c->out[0].data, 0, (size_t)sc_desc_bytes(x));
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
    /* Column blocks of 64 elements keep each thread on its own cache lines. */
    int64_t block = 64, n_blocks = inner ? (inner + block - 1) / block : 0;
    int par = outer * nidx * inner >= CPU_PAR_MIN && outer * n_blocks > 1;
    if (x->dtype == SC_F32) GATHER_GRAD_LOOP(float);
    else GATHER_GRAD_LOOP(double);
    free(idx);
    return SC_OK;
}
