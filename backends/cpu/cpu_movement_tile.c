/* Tile and GatherElements (ONNX opset 13), forward, and GatherElementsGrad.
 *
 * Tile: y[i_0, .., i_k] = x[i_0 mod d_0, .., i_k mod d_k]. The innermost axis is copied as whole input
 * rows repeated r_k times; each output row (all but the innermost index) reads the input row its
 * indices map to.
 * GatherElements: y[i] = data[i with the axis index replaced by indices[i]] (negative indices count
 * from the end; one out of range is an error naming it). Any element type.
 * GatherElementsGrad: dData = 0, then dData[i with the axis index replaced by indices[i]] += dY[i],
 * column by column (all indices but the axis'), in ascending order along the axis: each column
 * writes its own elements, so any thread count gives the same bits, and the CUDA kernel sums the
 * same terms in the same order.
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

#define GATHER_ELEMENTS_GRAD_LOOP(T)                                                                          \
    do {                                                                                                   \
        const T *dy = c->in[0].data;                                                                       \
        T *dx = c->out[0].data;                                                                            \
        _Pragma("omp parallel for if (par) reduction(max : bad)") for (int64_t col = 0; col < cols; col++) {\
            int64_t o = col / inner, e = col % inner, xo = 0, q = e;                                       \
            for (int d = r - 1; d > axis; d--) xo += (q % id->dims[d]) * xs[d], q /= id->dims[d];          \
            q = o;                                                                                         \
            for (int d = axis - 1; d >= 0; d--) xo += (q % id->dims[d]) * xs[d], q /= id->dims[d];         \
            for (int64_t m = 0; m < len; m++) {                                                            \
                int64_t i = (o * len + m) * inner + e, v = i64 ? ((const int64_t *)ix)[i] : ((const int32_t *)ix)[i]; \
                if (v < 0) v += x->dims[axis];                                                             \
                if (v >= 0 && v < x->dims[axis]) dx[xo + v * xs[axis]] += dy[i];                           \
                else bad = i;                                                                              \
            }                                                                                              \
        }                                                                                                  \
    } while (0)

sc_status cpu_gather_elements_grad(const sc_kernel_call *c) {
    const sc_desc *x = &c->out[0].desc, *id = &c->in[1].desc;
    if (x->dtype != SC_F32 && x->dtype != SC_F64) return cpu_errorf(c, "dtype %s not supported (f32, f64)", sc_dtype_name(x->dtype));
    int r = x->rank;
    int axis = (int)(c->node->attrs->axis.axis < 0 ? c->node->attrs->axis.axis + r : c->node->attrs->axis.axis);
    if (axis < 0 || axis >= r) return cpu_errorf(c, "axis %lld is out of range for rank %d", (long long)c->node->attrs->axis.axis, r);
    int64_t xs[SC_MAX_RANK], acc = 1, inner = 1, outer = 1, len = id->dims[axis];
    for (int d = r - 1; d >= 0; d--) xs[d] = acc, acc *= x->dims[d];
    for (int d = axis + 1; d < r; d++) inner *= id->dims[d];
    for (int d = 0; d < axis; d++) outer *= id->dims[d];
    memset(c->out[0].data, 0, (size_t)sc_desc_bytes(x));
    int64_t cols = outer * inner, bad = -1;
    bool i64 = id->dtype == SC_I64;
    const void *ix = c->in[1].data;
    int par = cols * len >= CPU_PAR_MIN && cols > 1;
    if (x->dtype == SC_F32) GATHER_ELEMENTS_GRAD_LOOP(float);
    else GATHER_ELEMENTS_GRAD_LOOP(double);
    if (bad >= 0)
        return cpu_errorf(c, "indices element %lld is out of range for axis %d of size %lld", (long long)bad, axis,
                          (long long)x->dims[axis]);
    return SC_OK;
}
