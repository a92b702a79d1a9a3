/* Tile, GatherElements and GatherElementsGrad on the CUDA backend (semantics: cpu_movement_tile.c):
 * one thread per output element, element-size agnostic (the gradient: f32 and f64, each element
 * summing the dY elements that read it in ascending order along the axis, as the CPU does). Difference from the CPU: an out-of-range GatherElements
 * index gives 0 here (as Gather does on this backend) instead of failing the node. */
#include <stdint.h>
#include <string.h>

#include "backends/cuda/cu_block.cuh"
#include "backends/cuda/cu_kernels.h"

struct elem_geom {
    int rank, axis;
    int64_t xd[SC_MAX_RANK], yd[SC_MAX_RANK], xs[SC_MAX_RANK];
};

static elem_geom geom_of(const sc_desc *x, const sc_desc *y, int axis) {
    elem_geom g;
    memset(&g, 0, sizeof g);
    g.rank = x->rank;
    g.axis = axis;
    int64_t acc = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        g.xd[d] = x->dims[d];
        g.yd[d] = y->dims[d];
        g.xs[d] = acc;
        acc *= x->dims[d];
    }
    return g;
}

template <typename T> __global__ void k_tile(elem_geom g, const T *x, T *y, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t q = i, off = 0;
        for (int d = g.rank - 1; d >= 0; d--) {
            off += (q % g.yd[d]) % g.xd[d] * g.xs[d];
            q /= g.yd[d];
        }
        y[i] = x[off];
    }
}

template <typename T> __global__ void k_gather_elements(elem_geom g, const T *x, const void *idx, bool i64, T *y, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t v = i64 ? ((const int64_t *)idx)[i] : ((const int32_t *)idx)[i];
        if (v < 0) v += g.xd[g.axis];
        if (v < 0 || v >= g.xd[g.axis]) {
            y[i] = (T)0;
            continue;
        }
        int64_t q = i, off = 0;
        for (int d = g.rank - 1; d >= 0; d--) {
            int64_t k = q % g.yd[d];
            q /= g.yd[d];
            off += (d == g.axis ? v : k) * g.xs[d];
        }
        y[i] = x[off];
    }
}

extern "C" sc_status cu_tile(const cu_call *c) {
    const sc_desc *x = &c->in[0].desc, *y = &c->out[0].desc;
    int64_t n = sc_desc_numel(y);
    if (n == 0) return SC_OK;
    elem_geom g = geom_of(x, y, 0);
    size_t es = sc_dtype_size(x->dtype);
    cudaStream_t s = c->ctx->stream;
    CU_BY_SIZE(c, es, (k_tile<T><<<cu_grid(n), CU_BLOCK, 0, s>>>(g, (const T *)c->in[0].data, (T *)c->out[0].data, n)));
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

extern "C" sc_status cu_gather_elements(const cu_call *c) {
    const sc_desc *x = &c->in[0].desc, *id = &c->in[1].desc;
    int64_t axis = c->node->attrs->axis.axis < 0 ? c->node->attrs->axis.axis + x->rank : c->node->attrs->axis.axis;
    if (axis < 0 || axis >= x->rank) return cu_errorf(c, "axis %lld is out of range for rank %d", (long long)c->node->attrs->axis.axis, x->rank);
    int64_t n = sc_desc_numel(id);
    if (n == 0) return SC_OK;
    elem_geom g = geom_of(x, id, (int)axis);
    size_t es = sc_dtype_size(x->dtype);
    cudaStream_t s = c->ctx->stream;
    bool i64 = id->dtype == SC_I64;
    CU_BY_SIZE(c, es, (k_gather_elements<T><<<cu_grid(n), CU_BLOCK, 0, s>>>(g, (const T *)c->in[0].data, c->in[1].data, i64, (T *)c->out[0].data, n)));
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

/* g: geom_of(dData, indices). */
template <typename T> __global__ void k_gather_elements_grad(elem_geom g, const T *dy, const void *idx, bool i64, T *dx, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t q = i, base = 0, stride = 1, step = 0, k = 0;
        bool inside = true;
        for (int d = g.rank - 1; d >= 0; d--) { /* i's coordinates in data; base: their offset in indices */
            int64_t c = q % g.xd[d];
            q /= g.xd[d];
            if (d == g.axis) k = c, step = stride;
            else inside = inside && c < g.yd[d], base += c * stride;
            stride *= g.yd[d];
        }
        T sum = (T)0;
        for (int64_t m = 0; inside && m < g.yd[g.axis]; m++) {
            int64_t j = base + m * step, v = i64 ? ((const int64_t *)idx)[j] : ((const int32_t *)idx)[j];
            if (v < 0) v += g.xd[g.axis];
            if (v == k) sum += dy[j];
        }
        dx[i] = sum;
    }
}

extern "C" sc_status cu_gather_elements_grad(const cu_call *c) {
    const sc_desc *x = &c->out[0].desc, *id = &c->in[1].desc;
    if (x->dtype != SC_F32 && x->dtype != SC_F64) return cu_errorf(c, "dtype %s not supported (f32, f64)", sc_dtype_name(x->dtype));
    int64_t axis = c->node->attrs->axis.axis < 0 ? c->node->attrs->axis.axis + x->rank : c->node->attrs->axis.axis;
    if (axis < 0 || axis >= x->rank) return cu_errorf(c, "axis %lld is out of range for rank %d", (long long)c->node->attrs->axis.axis, x->rank);
    int64_t n = sc_desc_numel(x);
    if (n == 0) return SC_OK;
    elem_geom g = geom_of(x, id, (int)axis);
    cudaStream_t s = c->ctx->stream;
    bool i64 = id->dtype == SC_I64;
    if (x->dtype == SC_F32)
        k_gather_elements_grad<float><<<cu_grid(n), CU_BLOCK, 0, s>>>(g, (const float *)c->in[0].data, c->in[1].data, i64, (float *)c->out[0].data, n);
    else
        k_gather_elements_grad<double><<<cu_grid(n), CU_BLOCK, 0, s>>>(g, (const double *)c->in[0].data, c->in[1].data, i64, (double *)c->out[0].data, n);
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}
