/* CumSum (ONNX opset 11/14): along one axis, y[j] = x[0] + .. + x[j]; exclusive leaves x[j] out
 * (y[0] = 0) and reverse sums from the end (y[j] = x[j] + .. + x[n-1]).
 *
 * x is viewed as [outer, n, inner] around the axis. Every line runs sequentially in the element type,
 * as numpy's cumsum does and as the CUDA kernel (cu_reduce_cum.cu) does, so the two backends agree bit
 * for bit: exact for integers (position ids from a mask, the use in exported language models), and
 * for floats the rounding of a plain running sum. f32, f64, i32 and i64.
 */
#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_kernels.h"

#define CUM_LINES(T)                                                                                 \
    do {                                                                                             \
        const T *x = c->in[0].data;                                                                  \
        T *y = c->out[0].data;                                                                       \
        _Pragma("omp parallel for if (par)") for (int64_t l = 0; l < outer * inner; l++) {          \
            int64_t base = (l / inner) * n * inner + l % inner;                                      \
            T acc = 0;                                                                               \
            for (int64_t k = 0; k < n; k++) {                                                        \
                int64_t j = base + (reverse ? n - 1 - k : k) * inner;                                \
                T v = x[j];                                                                          \
                if (!exclusive) acc += v;                                                            \
                y[j] = acc;                                                                          \
                if (exclusive) acc += v;                                                             \
            }                                                                                        \
        }                                                                                            \
    } while (0)

sc_status cpu_cum_sum(const sc_kernel_call *c) {
    const sc_desc *d = &c->in[0].desc;
    int64_t axis;
    if (sc_desc_numel(&c->in[1].desc) != 1 || !cpu_convert(&axis, SC_I64, c->in[1].data, c->in[1].desc.dtype, 1))
        return cpu_errorf(c, "axis must be an integer scalar");
    if (axis < -d->rank || axis >= d->rank) return cpu_errorf(c, "axis %lld is out of range for rank %d", (long long)axis, d->rank);
    if (axis < 0) axis += d->rank;
    int64_t outer = 1, n = d->dims[axis], inner = 1;
    for (int i = 0; i < axis; i++) outer *= d->dims[i];
    for (int i = (int)axis + 1; i < d->rank; i++) inner *= d->dims[i];
    bool exclusive = c->node->attrs->cum_sum.exclusive, reverse = c->node->attrs->cum_sum.reverse;
    int par = outer * n * inner >= CPU_PAR_MIN && outer * inner > 1;
    switch (d->dtype) {
    case SC_F32: CUM_LINES(float); break;
    case SC_F64: CUM_LINES(double); break;
    case SC_I32: CUM_LINES(int32_t); break;
    case SC_I64: CUM_LINES(int64_t); break;
    default: return cpu_errorf(c, "type %s is not supported (f32, f64, i32, i64)", sc_dtype_name(d->dtype));
    }
    return SC_OK;
}
