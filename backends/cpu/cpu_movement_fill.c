/* Ops that make tensors from shapes and scalars: Shape (opset 15 start/end), ConstantOfShape
 * (value attribute, default f32 0), Range (start + i * delta, count from the output desc, which shape
 * inference sized as max(ceil((limit - start) / delta), 0)).
 */
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/common/common.h"
#include "backends/cpu/cpu_kernels.h"

sc_status cpu_shape(const sc_kernel_call *c) {
    const sc_desc *x = &c->in[0].desc;
    int64_t start, n = sc_shape_range(x, &c->node->attrs->shape, &start);
    if (c->out[0].desc.dtype != SC_I64 || sc_desc_numel(&c->out[0].desc) != n)
        return cpu_errorf(c, "output must be i64[%lld]", (long long)n);
    int64_t *y = c->out[0].data;
    for (int64_t i = 0; i < n; i++) y[i] = x->dims[start + i];
    return SC_OK;
}

sc_status cpu_constant_of_shape(const sc_kernel_call *c) {
    sc_tensor *y = &c->out[0];
    unsigned char v[16];
    double val = c->node->attrs->fill.value;
    if (!cpu_convert(v, y->desc.dtype, &val, SC_F64, 1))
        return cpu_errorf(c, "dtype %s not supported", sc_dtype_name(y->desc.dtype));
    size_t es = sc_dtype_size(y->desc.dtype);
    int64_t n = sc_desc_numel(&y->desc);
    char *d = y->data;
    for (int64_t i = 0; i < n; i++) memcpy(d + i * (int64_t)es, v, es);
    return SC_OK;
}

#define RANGE_CASE(code, T, tn, ...)                                                               \
    case code: {                                                                                   \
        T s = *(const T *)c->in[0].data, dl = *(const T *)c->in[2].data;                           \
        T *y = c->out[0].data;                                                                     \
        for (int64_t i = 0; i < n; i++) y[i] = (T)(s + (T)i * dl);                                 \
        return SC_OK;                                                                              \
    }

sc_status cpu_range(const sc_kernel_call *c) {
    sc_dtype t = c->in[0].desc.dtype;
    for (int k = 0; k < 3; k++)
        if (c->in[k].desc.dtype != t || sc_desc_numel(&c->in[k].desc) != 1)
            return cpu_errorf(c, "start, limit and delta must be scalars of one dtype");
    if (c->out[0].desc.dtype != t) return cpu_errorf(c, "output dtype differs from the inputs");
    int64_t n = sc_desc_numel(&c->out[0].desc);
    switch (t) {
        CPU_FLOAT_TYPES(RANGE_CASE, 0)
        RANGE_CASE(SC_I16, int16_t, i16, 0)
        RANGE_CASE(SC_I32, int32_t, i32, 0)
        RANGE_CASE(SC_I64, int64_t, i64, 0)
    default: return cpu_errorf(c, "dtype %s not supported", sc_dtype_name(t));
    }
}
