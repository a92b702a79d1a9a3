/* Slice and Gather (ONNX opset 13), forward. The geometry (starts/ends/axes/steps normalisation
 * and clamping, Gather's axis and index checks) is in cpu_movement_index_geom.h, shared with the adjoints
 * in cpu_movement_grad.c. Slice is a strided walk over X (rows memcpy'd when the innermost step is
 * 1); Gather copies data[o, idx[k], :] rows.
 */
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_movement_index_geom.h"

sc_status cpu_slice(const sc_kernel_call *c) {
    const sc_desc *x = &c->in[0].desc;
    const sc_desc *y = &c->out[0].desc;
    slice_geom g;
    SC_TRY(slice_geom_read(c, 1, x, y, "output desc", &g));
    size_t es = sc_dtype_size(x->dtype);
    slice_geom_copy(c->out[0].data, g.y_stride, (const char *)c->in[0].data + g.base * (int64_t)es, g.x_stride,
                    y->rank, y->dims, es);
    return SC_OK;
}

sc_status cpu_gather(const sc_kernel_call *c) {
    const sc_desc *x = &c->in[0].desc;
    gather_geom g;
    SC_TRY(gather_geom_read(c, x, &c->in[1], &c->out[0].desc, "output desc", &g));
    int64_t nidx = g.nidx, n = g.n, inner = g.inner;
    const int64_t *idx = g.idx;
    size_t row = (size_t)inner * sc_dtype_size(x->dtype);
    const char *src = c->in[0].data;
    char *dst = c->out[0].data;
    int64_t items = g.outer * nidx;
    int par = items * inner >= CPU_PAR_MIN && items > 1;
#pragma omp parallel for if (par)
    for (int64_t it = 0; it < items; it++) {
        int64_t o = it / nidx, k = it % nidx;
        memcpy(dst + it * (int64_t)row, src + (o * n + idx[k]) * (int64_t)row, row);
    }
    gather_geom_free(&g);
    return SC_OK;
}
