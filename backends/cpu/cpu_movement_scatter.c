/* ScatterND (ONNX opset 11-18): Y = data, then for every index tuple j of indices [..., k], the slice
 * Y[idx_j] (data.shape[k:]) is replaced by updates[j] (reduction none) or combined with it (add,
 * mul, max, min). Tuples apply in order, so repeated indices give the last update (none) or fold
 * in order: deterministic, and what the CUDA kernel (cu_movement_scatter.cu) does. Negative indices
 * count from the end; one out of range is an error naming the tuple.
 * GatherND (opset 11-13): with batch_dims b, for every batch (the first b dims, shared by data and
 * indices) and index tuple j of indices [..., k], Y[batch, j] = data[batch][idx_j] (data.shape[b+k:]);
 * the inverse of ScatterND's reads, hence its gradient's other half.
 */
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_kernels.h"

#define SCATTER_COMBINE(T)                                                                          \
    do {                                                                                            \
        T *y = (T *)dst;                                                                            \
        const T *u = (const T *)src;                                                                \
        for (int64_t e = 0; e < slice; e++) {                                                       \
            T a = y[e], b = u[e];                                                                   \
            y[e] = red == SC_SCATTER_ADD ? a + b : red == SC_SCATTER_MUL ? a * b                     \
                 : red == SC_SCATTER_MAX ? (a > b ? a : b) : (a < b ? a : b);                        \
        }                                                                                           \
    } while (0)

static sc_status combine(const sc_kernel_call *c, sc_scatter_reduction red, void *dst, const void *src, int64_t slice) {
    switch (c->in[0].desc.dtype) {
    case SC_F32: SCATTER_COMBINE(float); break;
    case SC_F64: SCATTER_COMBINE(double); break;
    case SC_I32: SCATTER_COMBINE(int32_t); break;
    case SC_I64: SCATTER_COMBINE(int64_t); break;
    default: return cpu_errorf(c, "reduction on %s is not supported (f32, f64, i32, i64)", sc_dtype_name(c->in[0].desc.dtype));
    }
    return SC_OK;
}

/* ScatterND's and GatherND's slice geometry: data = [batch, d_b .. d_(b+k-1), slice], its element
 * strides per index, and tuples per batch. */
typedef struct {
    int64_t k, slice, batches, tuples, batch_stride, stride[SC_MAX_RANK];
} nd_geom;

static nd_geom nd_geom_of(const sc_desc *x, const sc_desc *id, int b) {
    nd_geom g = {.k = id->dims[id->rank - 1], .slice = 1, .batches = 1, .tuples = 1};
    for (int i = b + (int)g.k; i < x->rank; i++) g.slice *= x->dims[i];
    int64_t acc = g.slice;
    for (int i = b + (int)g.k - 1; i >= b; i--) g.stride[i - b] = acc, acc *= x->dims[i];
    g.batch_stride = acc;
    for (int i = 0; i < b; i++) g.batches *= x->dims[i];
    for (int i = b; i < id->rank - 1; i++) g.tuples *= id->dims[i];
    return g;
}

sc_status cpu_scatter_nd(const sc_kernel_call *c) {
    const sc_desc *x = &c->in[0].desc, *id = &c->in[1].desc;
    nd_geom g = nd_geom_of(x, id, 0);
    int64_t k = g.k, slice = g.slice;
    const int64_t *stride = g.stride;
    size_t es = sc_dtype_size(x->dtype), row = (size_t)slice * es;
    int64_t tuples = k ? sc_desc_numel(id) / k : 0;
    if (sc_desc_numel(&c->in[2].desc) != tuples * slice) return cpu_errorf(c, "updates do not match indices and data");
    if (c->out[0].data != c->in[0].data) memcpy(c->out[0].data, c->in[0].data, (size_t)sc_desc_bytes(x));
    sc_scatter_reduction red = c->node->attrs->scatter_nd.reduction;
    const int64_t *idx = c->in[1].data;
    for (int64_t j = 0; j < tuples; j++) {
        int64_t off = 0;
        for (int i = 0; i < k; i++) {
            int64_t v = idx[j * k + i];
            if (v < 0) v += x->dims[i];
            if (v < 0 || v >= x->dims[i])
                return cpu_errorf(c, "index tuple %lld: index %lld is out of range for dim %d of size %lld", (long long)j,
                                  (long long)idx[j * k + i], i, (long long)x->dims[i]);
            off += v * stride[i];
        }
        char *dst = (char *)c->out[0].data + off * (int64_t)es;
        const char *src = (const char *)c->in[2].data + j * (int64_t)row;
        if (red == SC_SCATTER_NONE) memcpy(dst, src, row);
        else SC_TRY(combine(c, red, dst, src, slice));
    }
    return SC_OK;
}

sc_status cpu_gather_nd(const sc_kernel_call *c) {
    const sc_desc *x = &c->in[0].desc, *id = &c->in[1].desc;
    int b = (int)c->node->attrs->gather_nd.batch_dims;
    nd_geom g = nd_geom_of(x, id, b);
    size_t es = sc_dtype_size(x->dtype), row = (size_t)g.slice * es;
    const int64_t *idx = c->in[1].data;
    for (int64_t j = 0; j < g.batches * g.tuples; j++) {
        int64_t off = j / g.tuples * g.batch_stride;
        for (int i = 0; i < g.k; i++) {
            int64_t v = idx[j * g.k + i], dim = x->dims[b + i];
            if (v < 0) v += dim;
            if (v < 0 || v >= dim)
                return cpu_errorf(c, "index tuple %lld: index %lld is out of range for dim %d of size %lld", (long long)j,
                                  (long long)idx[j * g.k + i], b + i, (long long)dim);
            off += v * g.stride[i];
        }
        memcpy((char *)c->out[0].data + j * (int64_t)row, (const char *)c->in[0].data + off * (int64_t)es, row);
    }
    return SC_OK;
}
