/* CPU kernels of the data-movement gradient ops (graph/ops_train.def).
 *
 * SliceGrad (dY, X, starts, ends[, axes, steps]) -> dX: zeros of X's shape with dY written at the
 *   positions Slice read (cpu_movement_index_geom.h, shared with cpu_movement_index.c): offset = base + sum over axes
 *   (start + i * step) * stride. Slice positions are distinct, so this is a plain scatter.
 * GatherGrad (dY, indices, data[, base]) -> dData: zeros of data's shape (or base, which dData may
 *   share storage with), then for every outer index o and index position k:
 *   dData[o, idx[k], :] += dY[o, k, :]. Repeated indices accumulate in index order; threads split the rows of the trailing dims (columns), never the index loop, so the sum
 *   order, and so the result, does not depend on the thread count. f32 and f64.
 */
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_movement_index_geom.h"

sc_status cpu_slice_grad(const sc_kernel_call *c) {
    const sc_desc *dy = &c->in[0].desc, *x = &c->out[0].desc;
    if (dy->rank != x->rank || dy->dtype != x->dtype) return cpu_errorf(c, "dY must have dX's rank and dtype");
    slice_geom g;
    SC_TRY(slice_geom_read(c, 2, x, dy, "dY", &g));
    size_t es = sc_dtype_size(x->dtype);
    memset(c->out[0].data, 0, (size_t)sc_desc_bytes(x));
    if (!g.empty)
        slice_geom_copy((char *)c->out[0].data + g.base * (int64_t)es, g.x_stride, c->in[0].data, g.y_stride, dy->rank,
                        dy->dims, es);
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
    const sc_desc *x = &c->out[0].desc;
    if (x->dtype != SC_F32 && x->dtype != SC_F64) return cpu_errorf(c, "dtype %s not supported (f32, f64)", sc_dtype_name(x->dtype));
    gather_geom g;
    SC_TRY(gather_geom_read(c, x, &c->in[1], &c->in[0].desc, "dY", &g));
    int64_t nidx = g.nidx, n = g.n, outer = g.outer, inner = g.inner;
    const int64_t *idx = g.idx;
    const sc_tensor *base = c->n_in > 3 && c->in[3].data ? &c->in[3] : NULL;
    if (base && (base->desc.dtype != x->dtype || !sc_desc_same_shape(&base->desc, x))) {
        gather_geom_free(&g);
        return cpu_errorf(c, "base must have dData's dtype and shape");
    }
    if (base) cpu_copy(c->out[0].data, base->data, sc_desc_bytes(x)); /* a no-op in place */
    else memset(c->out[0].data, 0, (size_t)sc_desc_bytes(x));
    /* Column blocks of 64 elements keep each thread on its own cache lines. */
    int64_t block = 64, n_blocks = inner ? (inner + block - 1) / block : 0;
    int par = outer * nidx * inner >= CPU_PAR_MIN && outer * n_blocks > 1;
    if (x->dtype == SC_F32) GATHER_GRAD_LOOP(float);
    else GATHER_GRAD_LOOP(double);
    gather_geom_free(&g);
    return SC_OK;
}
