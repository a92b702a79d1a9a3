/* Tile and GatherElements (ONNX opset 13), forward.
 *
 * Tile: y[i_0, .., i_k] = x[i_0 mod d_0, .., i_k mod d_k]. The innermost axis is copied as whole input
 * rows repeated r_k times; each output row (all but the innermost index) reads the input row its
 * indices map to.
 * GatherElements: y[i] = data[i with the axis index replaced by indices[i]] (negative indices count
 * from the end; one out of range is an error naming it). Any element type.
 */
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_kernels.h"

sc_status cpu_tile(const sc_kernel_call *c) {
    const sc_desc *x = &c->in[0].desc, *y = &c->out[0].desc;
    int r = x->rank;
    size_t es = sc_dtype_size(x->dtype);
    if (sc_desc_numel(y) == 0) return SC_OK;
    if (r == 0) {
        memcpy(c->out[0].data, c->in[0].data, es);
        return SC_OK;
    }
    int64_t in_row = x->dims[r - 1], out_row = y->dims[r - 1], rows = sc_desc_numel(y) / out_row;
    const char *src = c->in[0].data;
    char *dst = c->out[0].data;
    int par = rows * out_row >= CPU_PAR_MIN && rows > 1;
#pragma omp parallel for if (par)
    for (int64_t row = 0; row < rows; row++) {
        int64_t q = row, off = 0, stride = in_row;
        for (int d = r - 2; d >= 0; d--) { /* the input row this output row repeats */
            off += (q % y->dims[d]) % x->dims[d] * stride;
            q /= y->dims[d];
            stride *= x->dims[d];
        }
        char *o = dst + row * out_row * (int64_t)es;
        for (int64_t k = 0; k < out_row; k += in_row) memcpy(o + k * (int64_t)es, src + off * (int64_t)es, (size_t)in_row * es);
    }
    return SC_OK;
}

sc_status cpu_gather_elements(const sc_kernel_call *c) {
    const sc_desc *x = &c->in[0].desc, *id = &c->in[1].desc;
    int r = x->rank;
    int64_t axis = c->node->attrs->axis.axis < 0 ? c->node->attrs->axis.axis + r : c->node->attrs->axis.axis;
    if (axis < 0 || axis >= r) return cpu_errorf(c, "axis %lld is out of range for rank %d", (long long)c->node->attrs->axis.axis, r);
    int64_t n = sc_desc_numel(id), xs[SC_MAX_RANK];
    int64_t acc = 1;
    for (int d = r - 1; d >= 0; d--) xs[d] = acc, acc *= x->dims[d];
    size_t es = sc_dtype_size(x->dtype);
    bool i64 = id->dtype == SC_I64;
    const char *src = c->in[0].data;
    char *dst = c->out[0].data;
    for (int64_t i = 0; i < n; i++) {
        int64_t v = i64 ? ((const int64_t *)c->in[1].data)[i] : ((const int32_t *)c->in[1].data)[i];
        if (v < 0) v += x->dims[axis];
        if (v < 0 || v >= x->dims[axis])
            return cpu_errorf(c, "index %lld (indices element %lld) is out of range for axis %lld of size %lld",
                              (long long)(i64 ? ((const int64_t *)c->in[1].data)[i] : ((const int32_t *)c->in[1].data)[i]),
                              (long long)i, (long long)axis, (long long)x->dims[axis]);
        int64_t q = i, off = 0;
        for (int d = r - 1; d >= 0; d--) {
            int64_t k = q % id->dims[d];
            q /= id->dims[d];
            off += (d == axis ? v : k) * xs[d];
        }
        memcpy(dst + i * (int64_t)es, src + off * (int64_t)es, es);
    }
    return SC_OK;
}
