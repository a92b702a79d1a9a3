/* ScatterND and GatherND on the CUDA backend (semantics: cpu_movement_scatter.c). GatherND: one
 * thread per output element, element-size agnostic; an out-of-range tuple reads 0 here.
 * ScatterND: Y = data (a device copy when
 * not in place), then one thread per element of the slice walks the index tuples in order, so
 * repeated indices apply in the CPU's order and the bits match. The walk is serial over tuples:
 * exported models scatter a few tuples (Swin's mask) or whole rows (slice-wide parallelism).
 * Difference from the CPU: an out-of-range tuple is skipped here instead of failing the node. */
#include <stdint.h>
#include <string.h>

#include "backends/cuda/cu_block.cuh"
#include "backends/cuda/cu_kernels.h"

struct scatter_geom {
    int k;
    int64_t dims[SC_MAX_RANK], stride[SC_MAX_RANK];
};

/* Adds the offset of index tuple t (k indices, negative ones from the end) to *off; false when one
 * is out of range. */
__device__ static bool tuple_offset(const scatter_geom &g, const int64_t *t, int64_t *off) {
    bool ok = true;
    for (int i = 0; i < g.k; i++) {
        int64_t v = t[i] < 0 ? t[i] + g.dims[i] : t[i];
        ok = ok && v >= 0 && v < g.dims[i];
        *off += v * g.stride[i];
    }
    return ok;
}

template <typename T>
__global__ void k_scatter_nd(scatter_geom g, const int64_t *idx, const T *u, T *y, int64_t tuples, int64_t slice, int red) {
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < slice; e += (int64_t)gridDim.x * blockDim.x) {
        for (int64_t j = 0; j < tuples; j++) {
            int64_t off = 0;
            if (!tuple_offset(g, idx + j * g.k, &off)) continue;
            T a = y[off + e], b = u[j * slice + e];
            y[off + e] = red == SC_SCATTER_NONE ? b : red == SC_SCATTER_ADD ? a + b : red == SC_SCATTER_MUL ? a * b
                       : red == SC_SCATTER_MAX ? (a > b ? a : b) : (a < b ? a : b);
        }
    }
}

extern "C" sc_status cu_scatter_nd(const cu_call *c) {
    const sc_desc *x = &c->in[0].desc, *id = &c->in[1].desc;
    scatter_geom g;
    memset(&g, 0, sizeof g);
    g.k = (int)id->dims[id->rank - 1];
    int64_t slice = 1;
    for (int i = g.k; i < x->rank; i++) slice *= x->dims[i];
    int64_t acc = slice;
    for (int i = g.k - 1; i >= 0; i--) {
        g.dims[i] = x->dims[i];
        g.stride[i] = acc;
        acc *= x->dims[i];
    }
    int64_t tuples = g.k ? sc_desc_numel(id) / g.k : 0;
    cudaStream_t s = c->ctx->stream;
    int64_t bytes = sc_desc_bytes(x);
    if (bytes > 0 && c->out[0].data != c->in[0].data)
        CU_CHECK(c, cudaMemcpyAsync(c->out[0].data, c->in[0].data, (size_t)bytes, cudaMemcpyDeviceToDevice, s));
    if (tuples == 0 || slice == 0) return SC_OK;
    int red = (int)c->node->attrs->scatter_nd.reduction;
    const int64_t *idx = (const int64_t *)c->in[1].data;
#define SCATTER_LAUNCH(T) \
    k_scatter_nd<T><<<cu_grid(slice), CU_BLOCK, 0, s>>>(g, idx, (const T *)c->in[2].data, (T *)c->out[0].data, tuples, slice, red)
    switch (x->dtype) {
    case SC_F32: SCATTER_LAUNCH(float); break;
    case SC_F64: SCATTER_LAUNCH(double); break;
    case SC_I32: SCATTER_LAUNCH(int32_t); break;
    case SC_I64: SCATTER_LAUNCH(int64_t); break;
    case SC_U8:
    case SC_BOOL:
        if (red != SC_SCATTER_NONE) return cu_errorf(c, "reduction on %s is not supported", sc_dtype_name(x->dtype));
        SCATTER_LAUNCH(uint8_t);
        break;
    default: return cu_errorf(c, "type %s is not supported (f32, f64, i32, i64, u8, bool)", sc_dtype_name(x->dtype));
    }
#undef SCATTER_LAUNCH
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

/* GatherND: batch_dims b; dims/stride (scatter_geom) of the k indexed dims of data. */
template <typename T>
__global__ void k_gather_nd(scatter_geom g, const int64_t *idx, const T *x, T *y, int64_t n, int64_t slice, int64_t tuples,
                            int64_t batch_stride) {
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t j = e / slice, off = j / tuples * batch_stride;
        y[e] = tuple_offset(g, idx + j * g.k, &off) ? x[off + e % slice] : (T)0;
    }
}

extern "C" sc_status cu_gather_nd(const cu_call *c) {
    const sc_desc *x = &c->in[0].desc, *id = &c->in[1].desc;
    int b = (int)c->node->attrs->gather_nd.batch_dims;
    scatter_geom g;
    memset(&g, 0, sizeof g);
    g.k = (int)id->dims[id->rank - 1];
    int64_t slice = 1, tuples = 1;
    for (int i = b + g.k; i < x->rank; i++) slice *= x->dims[i];
    int64_t acc = slice;
    for (int i = g.k - 1; i >= 0; i--) {
        g.dims[i] = x->dims[b + i];
        g.stride[i] = acc;
        acc *= x->dims[b + i];
    }
    for (int i = b; i < id->rank - 1; i++) tuples *= id->dims[i];
    int64_t n = sc_desc_numel(&c->out[0].desc);
    if (n == 0) return SC_OK;
    size_t es = sc_dtype_size(x->dtype);
    cudaStream_t s = c->ctx->stream;
    const int64_t *idx = (const int64_t *)c->in[1].data;
    CU_BY_SIZE(c, es, (k_gather_nd<T><<<cu_grid(n), CU_BLOCK, 0, s>>>(g, idx, (const T *)c->in[0].data, (T *)c->out[0].data, n, slice,
                                                                      tuples, acc)));
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}
