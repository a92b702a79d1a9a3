/* Reductions of the CUDA backend: ReduceSum / ReduceMean, and the mean over trailing dims that
 * GlobalAveragePool (cu_nn.cu) is. Semantics are the CPU's (cpu_reduce.c, cpu_nn_pool.c): empty / absent
 * axes reduce everything (copy with noop_with_empty_axes); floats sum in double, integers in int64; the
 * integer mean truncates; the mean of nothing is NaN (float).
 * One block per output element with block reductions (cu_block.cuh) when the reduction is long; the
 * order of additions differs from the CPU's, hence the tolerances of tests/cuda/test_cuda_ops.c.
 */
#include <math.h>
#include <stdint.h>

#include "backends/cuda/cu_block.cuh"
#include "backends/cuda/cu_kernels.h"

/* ---- ReduceSum / ReduceMean ---- */

typedef struct {
    int nk, nr;                 /* kept and reduced dims (input order) */
    int64_t kd[SC_MAX_RANK], ks[SC_MAX_RANK]; /* kept dims and their input strides */
    int64_t rd[SC_MAX_RANK], rs[SC_MAX_RANK]; /* reduced dims and strides */
    int64_t R;                  /* reduced elements per output */
} red_geom;

__device__ __forceinline__ int64_t red_off(const int64_t *d, const int64_t *s, int n, int64_t i) {
    int64_t off = 0;
    for (int k = n - 1; k >= 0; k--) {
        off += (i % d[k]) * s[k];
        i /= d[k];
    }
    return off;
}

template <typename T, typename A> __global__ void k_reduce_block(red_geom g, const T *x, T *y, int64_t n_out, bool mean) {
    for (int64_t o = blockIdx.x; o < n_out; o += gridDim.x) {
        int64_t base = red_off(g.kd, g.ks, g.nk, o);
        A s = 0;
        for (int64_t r = threadIdx.x; r < g.R; r += blockDim.x) s += (A)x[base + red_off(g.rd, g.rs, g.nr, r)];
        s = block_sum<A>(s);
        if (threadIdx.x == 0) {
            if (!mean) y[o] = (T)s;
            else if (g.R == 0) y[o] = std::is_floating_point<T>::value ? (T)NAN : (T)0;
            else y[o] = (T)(s / (A)g.R);
        }
    }
}

template <typename T, typename A> __global__ void k_reduce_thread(red_geom g, const T *x, T *y, int64_t n_out, bool mean) {
    GRID_STRIDE(o, n_out) {
        int64_t base = red_off(g.kd, g.ks, g.nk, o);
        A s = 0;
        for (int64_t r = 0; r < g.R; r++) s += (A)x[base + red_off(g.rd, g.rs, g.nr, r)];
        if (!mean) y[o] = (T)s;
        else if (g.R == 0) y[o] = std::is_floating_point<T>::value ? (T)NAN : (T)0;
        else y[o] = (T)(s / (A)g.R);
    }
}

template <typename T, typename A> static void reduce_launch(const red_geom &g, const T *x, T *y, int64_t n_out, bool mean, cudaStream_t s) {
    if (g.R >= 128) {
        int th = cu_row_threads(g.R > 256 ? 256 : g.R);
        unsigned blocks = (unsigned)(n_out < 65535 * 16 ? (n_out > 0 ? n_out : 1) : 65535 * 16);
        k_reduce_block<T, A><<<blocks, th, 0, s>>>(g, x, y, n_out, mean);
    } else {
        k_reduce_thread<T, A><<<cu_grid(n_out), CU_BLOCK, 0, s>>>(g, x, y, n_out, mean);
    }
}

static sc_status reduce_run(const cu_call *c, bool mean) {
    const sc_desc *x = &c->in[0].desc;
    int64_t axes[SC_MAX_RANK] = {0}, n_axes = 0;
    if (c->n_in > 1 && c->in[1].data && sc_desc_numel(&c->in[1].desc) > 0)
        SC_TRY(cu_read_i64(c, 1, axes, &n_axes, SC_MAX_RANK));
    bool reduced[SC_MAX_RANK] = {false};
    if (n_axes == 0) {
        if (c->node->attrs->reduce.noop_with_empty_axes) return cu_copy_input(c);
        for (int d = 0; d < x->rank; d++) reduced[d] = true;
    }
    for (int64_t k = 0; k < n_axes; k++) {
        int64_t a = axes[k] < 0 ? axes[k] + x->rank : axes[k];
        if (a < 0 || a >= x->rank) return cu_errorf(c, "axis %lld out of range for rank %d", (long long)axes[k], x->rank);
        reduced[a] = true;
    }
    red_geom g = {};
    g.R = 1;
    int64_t stride = 1, st[SC_MAX_RANK];
    for (int d = x->rank - 1; d >= 0; d--) st[d] = stride, stride *= x->dims[d];
    for (int d = 0; d < x->rank; d++) {
        if (reduced[d]) g.rd[g.nr] = x->dims[d], g.rs[g.nr++] = st[d], g.R *= x->dims[d];
        else g.kd[g.nk] = x->dims[d], g.ks[g.nk++] = st[d];
    }
    int64_t n_out = sc_desc_numel(&c->out[0].desc);
    cudaStream_t s = c->ctx->stream;
    switch (x->dtype) {
    case SC_F32: reduce_launch<float, double>(g, (const float *)c->in[0].data, (float *)c->out[0].data, n_out, mean, s); break;
    case SC_F64: reduce_launch<double, double>(g, (const double *)c->in[0].data, (double *)c->out[0].data, n_out, mean, s); break;
    case SC_I32: reduce_launch<int32_t, long long>(g, (const int32_t *)c->in[0].data, (int32_t *)c->out[0].data, n_out, mean, s); break;
    case SC_I64: reduce_launch<int64_t, long long>(g, (const int64_t *)c->in[0].data, (int64_t *)c->out[0].data, n_out, mean, s); break;
    default: return cu_errorf(c, "dtype %s not supported", sc_dtype_name(x->dtype));
    }
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

extern "C" {

sc_status cu_reduce_sum(const cu_call *c) { return reduce_run(c, false); }
sc_status cu_reduce_mean(const cu_call *c) { return reduce_run(c, true); }

sc_status cu_mean_planes(const cu_call *c, sc_dtype t, const void *x, void *y, int64_t planes, int64_t plane) {
    red_geom g = {};
    g.nk = 1, g.kd[0] = planes, g.ks[0] = plane;
    g.nr = 1, g.rd[0] = plane, g.rs[0] = 1, g.R = plane;
    switch (t) {
    case SC_F32: reduce_launch<float, double>(g, (const float *)x, (float *)y, planes, true, c->ctx->stream); break;
    case SC_F64: reduce_launch<double, double>(g, (const double *)x, (double *)y, planes, true, c->ctx->stream); break;
    default: return cu_errorf(c, "dtype %s not supported", sc_dtype_name(t));
    }
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

} /* extern "C" */
