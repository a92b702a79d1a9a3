/* CumSum on the CUDA backend, with the CPU's semantics and order (cpu_reduce_cum.c): one thread per
 * line of [outer, n, inner], summing sequentially in the element type, so results are bit-identical
 * to the CPU's. Lines are few and long only for odd shapes (a cumsum over the whole of a 1-D
 * tensor); the language-model use is [batch, seq] integer masks. */
#include <stdint.h>

#include "backends/cuda/cu_kernels.h"

template <typename T>
__global__ void k_cum_sum(const T *x, T *y, int64_t outer, int64_t n, int64_t inner, bool exclusive, bool reverse) {
    int64_t lines = outer * inner;
    for (int64_t l = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; l < lines; l += (int64_t)gridDim.x * blockDim.x) {
        int64_t base = (l / inner) * n * inner + l % inner;
        T acc = 0;
        for (int64_t k = 0; k < n; k++) {
            int64_t j = base + (reverse ? n - 1 - k : k) * inner;
            T v = x[j];
            if (!exclusive) acc += v;
            y[j] = acc;
            if (exclusive) acc += v;
        }
    }
}

extern "C" sc_status cu_cum_sum(const cu_call *c) {
    const sc_desc *d = &c->in[0].desc;
    double a;
    SC_TRY(cu_read_f64(c, 1, &a));
    int64_t axis = (int64_t)a;
    if (axis < -d->rank || axis >= d->rank) return cu_errorf(c, "axis %lld is out of range for rank %d", (long long)axis, d->rank);
    if (axis < 0) axis += d->rank;
    int64_t outer = 1, n = d->dims[axis], inner = 1;
    for (int i = 0; i < axis; i++) outer *= d->dims[i];
    for (int i = (int)axis + 1; i < d->rank; i++) inner *= d->dims[i];
    if (outer * n * inner == 0) return SC_OK;
    bool ex = c->node->attrs->cum_sum.exclusive, rev = c->node->attrs->cum_sum.reverse;
    cudaStream_t s = c->ctx->stream;
    int64_t lines = outer * inner;
    switch (d->dtype) {
    case SC_F32: k_cum_sum<float><<<cu_grid(lines), CU_BLOCK, 0, s>>>((const float *)c->in[0].data, (float *)c->out[0].data, outer, n, inner, ex, rev); break;
    case SC_F64: k_cum_sum<double><<<cu_grid(lines), CU_BLOCK, 0, s>>>((const double *)c->in[0].data, (double *)c->out[0].data, outer, n, inner, ex, rev); break;
    case SC_I32: k_cum_sum<int32_t><<<cu_grid(lines), CU_BLOCK, 0, s>>>((const int32_t *)c->in[0].data, (int32_t *)c->out[0].data, outer, n, inner, ex, rev); break;
    case SC_I64: k_cum_sum<int64_t><<<cu_grid(lines), CU_BLOCK, 0, s>>>((const int64_t *)c->in[0].data, (int64_t *)c->out[0].data, outer, n, inner, ex, rev); break;
    default: return cu_errorf(c, "type %s is not supported (f32, f64, i32, i64)", sc_dtype_name(d->dtype));
    }
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}
