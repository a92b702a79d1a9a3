/* Resize (opset 19; X, roi, scales, sizes -> Y) and ResizeGrad (dY, X, roi, scales, sizes -> dX) on
 * the CUDA backend, modes nearest and linear (n-linear); the semantics are cpu_nn_resize.c's and
 * cpu_nn_resize_grad.c's, the tap tables the same (cu_nn_resize.h). The forward runs one thread per
 * output element e, with multi-index idx over Y's dims:
 *   nearest   Y[e] = X[sum_i off0[i][idx_i]]            (any dtype, moved by element size)
 *   linear    Y[e] = sum over the 2^m corners of the m active axes of
 *                    prod_k (1 - w1 | w1) X[base + sum_k (off0 | off1)],  accumulated in double
 * and the extrapolation value wherever some axis has off0 = -1 (tf_crop_and_resize outside the
 * roi). Corners are visited in the CPU's order, so it matches the CPU to double rounding.
 * The gradient is the transpose, dX[corner] += weight * dY[e] over the outputs not extrapolated,
 * branching only on axes with two distinct weighted taps (as on the CPU). It gathers rather than
 * scatters with atomics: one thread per element of dX sums its terms in a fixed order, so its bits
 * do not depend on thread timing (a node recomputed by a checkpointing plan repeats them), and that
 * order and the terms are the CPU's, so it matches the CPU bit for bit (f64: see cu_nn_resize.h).
 * Index maths runs in 32 bits when the element counts allow (64-bit division is slow on the GPU).
 */
#include <stdint.h>
#include <string.h>

#include "backends/cuda/cu_block.cuh"
#include "backends/cuda/cu_kernels.h"
#include "backends/cuda/cu_nn_resize.h"

#define RZ_LOOP(I, e, n) for (I e = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; e < (n); e += (I)gridDim.x * (I)blockDim.x)

/* The multi-index idx of flat element e over dims[0..rank) (the last dim fastest). */
template <typename I> __device__ __forceinline__ void rz_index(I e, const int64_t *dims, int rank, int64_t *idx) {
#pragma unroll
    for (int k = 0; k < SC_MAX_RANK; k++) {
        int i = SC_MAX_RANK - 1 - k;
        if (i >= rank) continue;
        I d = (I)dims[i];
        idx[i] = (int64_t)(e % d);
        e /= d;
    }
}

template <typename E, typename I> __global__ void k_resize_nearest(cu_resize_taps t, const E *x, E *y, E ext, I n) {
    RZ_LOOP(I, e, n) {
        int64_t idx[SC_MAX_RANK], off = 0;
        bool outside = false;
        rz_index(e, t.ydims, t.rank, idx);
#pragma unroll
        for (int i = 0; i < SC_MAX_RANK; i++) {
            if (i >= t.rank) continue;
            int64_t o = t.off0[i][idx[i]];
            outside |= o < 0;
            off += o;
        }
        y[e] = outside ? ext : x[off];
    }
}

/* The taps of output element e: base (sum of the single-tap axes), the m active axes' taps and
 * second weights in increasing axis order (the order of cpu_nn_resize.c's corners). Returns false when
 * e is extrapolated. */
template <typename I>
__device__ __forceinline__ bool rz_taps(const cu_resize_taps &t, I e, int64_t *base, int *m, int64_t *a0,
                                        int64_t *a1, double *aw) {
    int64_t idx[SC_MAX_RANK];
    rz_index(e, t.ydims, t.rank, idx);
    bool inside = true;
    int64_t b = 0;
    int cnt = 0;
#pragma unroll
    for (int i = 0; i < SC_MAX_RANK; i++) {
        if (i >= t.rank) continue;
        int64_t o0 = t.off0[i][idx[i]], o1 = t.off1[i][idx[i]];
        inside &= o0 >= 0;
        if (t.active >> i & 1u) {
            a0[cnt] = o0, a1[cnt] = o1, aw[cnt] = t.w1[i][idx[i]];
            cnt++;
        } else {
            b += o0;
        }
    }
    *base = b;
    *m = cnt;
    return inside;
}

/* Corner cn (bit k: the second tap of branching axis k): its weight, and *off. */
__device__ __forceinline__ double rz_corner(int m, const int64_t *a0, const int64_t *a1, const double *aw, int cn,
                                            int64_t base, int64_t *off) {
    double w = 1;
    for (int k = 0; k < m; k++) {
        if (cn >> k & 1) w *= aw[k], base += a1[k];
        else w *= 1 - aw[k], base += a0[k];
    }
    *off = base;
    return w;
}

template <typename T, typename I> __global__ void k_resize_linear(cu_resize_taps t, const T *x, T *y, I n) {
    RZ_LOOP(I, e, n) {
        int64_t base, a0[SC_MAX_RANK], a1[SC_MAX_RANK];
        double aw[SC_MAX_RANK];
        int m;
        if (!rz_taps(t, e, &base, &m, a0, a1, aw)) {
            y[e] = (T)t.extrap;
            continue;
        }
        double acc = 0;
        for (int cn = 0; cn < (1 << m); cn++) {
            int64_t off;
            double w = rz_corner(m, a0, a1, aw, cn, base, &off);
            if (w != 0) acc += w * (double)x[off];
        }
        y[e] = (T)acc;
    }
}

/* The gradient's term from the dY element at positions j of the inverted lists (cu_nn_resize.h):
 * (T)(w * dY[q]) as cpu_nn_resize_grad.c computes it, q the element's flat index and w the product of
 * the per-axis factors from the last axis to the first. That is the CPU's order (it lists its
 * branching axes from the last one, and resize_corner multiplies in list order; an axis that does
 * not branch has factor 1 here, exact), so w has the CPU's bits for any number of branching axes. */
template <typename T, typename I>
__device__ __forceinline__ T rz_grad_term(const cu_resize_taps &t, const T *dy, const int64_t *j) {
    I q = 0;
#pragma unroll
    for (int i = 0; i < SC_MAX_RANK; i++) {
        if (i >= t.rank) continue;
        q = q * (I)t.ydims[i] + (I)t.inv_o[i][j[i]];
    }
    double w = 1;
#pragma unroll
    for (int k = 0; k < SC_MAX_RANK; k++) {
        int i = SC_MAX_RANK - 1 - k;
        if (i >= t.rank) continue;
        w *= t.inv_w[i][j[i]];
    }
    return (T)(w * (double)dy[q]);
}

/* Steps the odometer j over the per-axis ranges [lo, hi), last axis fastest: as every list is
 * increasing, the dY elements come in increasing flat order. False once it has wrapped around. */
__device__ __forceinline__ bool rz_grad_next(const cu_resize_taps &t, const int64_t *lo, const int64_t *hi,
                                             int64_t *j) {
#pragma unroll
    for (int k = 0; k < SC_MAX_RANK; k++) {
        int i = SC_MAX_RANK - 1 - k;
        if (i >= t.rank) continue;
        if (++j[i] < hi[i]) return true;
        j[i] = lo[i];
    }
    return false;
}

/* One thread per element e of dX, X index p_i along axis i: the dY elements whose taps include e
 * are those with every index in p_i's list of axis i, taken in increasing flat order, the order in
 * which the CPU's scatter adds them into dX (in T, from 0). An element that no output reads (an
 * empty list: downsampling, or only extrapolated outputs) gets 0, so dX needs no clearing. */
template <typename T, typename I> __global__ void k_resize_grad(cu_resize_taps t, const T *dy, T *dx, I n) {
    RZ_LOOP(I, e, n) {
        int64_t lo[SC_MAX_RANK], hi[SC_MAX_RANK], j[SC_MAX_RANK], p[SC_MAX_RANK];
        bool more = true;
        rz_index(e, t.xdims, t.rank, p);
#pragma unroll
        for (int i = 0; i < SC_MAX_RANK; i++) {
            if (i >= t.rank) continue;
            lo[i] = j[i] = t.inv_beg[i][p[i]];
            hi[i] = t.inv_beg[i][p[i] + 1];
            more &= lo[i] < hi[i];
        }
        T acc = 0;
        for (; more; more = rz_grad_next(t, lo, hi, j)) acc += rz_grad_term<T, I>(t, dy, j);
        dx[e] = acc;
    }
}

static bool idx32(int64_t n) { return n < (1ll << 31); }

template <typename E> static void nearest_launch(cudaStream_t s, const cu_resize_taps &t, const void *x, void *y, int64_t n) {
    E ext;
    memcpy(&ext, &t.extrap_bits, sizeof ext); /* the value's first bytes (little-endian) */
    if (idx32(n)) k_resize_nearest<E, uint32_t><<<cu_grid(n), CU_BLOCK, 0, s>>>(t, (const E *)x, (E *)y, ext, (uint32_t)n);
    else k_resize_nearest<E, int64_t><<<cu_grid(n), CU_BLOCK, 0, s>>>(t, (const E *)x, (E *)y, ext, n);
}

template <typename T> static void linear_launch(cudaStream_t s, const cu_resize_taps &t, const void *x, void *y, int64_t n) {
    if (idx32(n)) k_resize_linear<T, uint32_t><<<cu_grid(n), CU_BLOCK, 0, s>>>(t, (const T *)x, (T *)y, (uint32_t)n);
    else k_resize_linear<T, int64_t><<<cu_grid(n), CU_BLOCK, 0, s>>>(t, (const T *)x, (T *)y, n);
}

/* n elements of dX, ny of dY (32-bit index maths needs both small). */
template <typename T>
static void grad_launch(cudaStream_t s, const cu_resize_taps &t, const void *dy, void *dx, int64_t n, int64_t ny) {
    if (idx32(n) && idx32(ny)) k_resize_grad<T, uint32_t><<<cu_grid(n), CU_BLOCK, 0, s>>>(t, (const T *)dy, (T *)dx, (uint32_t)n);
    else k_resize_grad<T, int64_t><<<cu_grid(n), CU_BLOCK, 0, s>>>(t, (const T *)dy, (T *)dx, n);
}

sc_status cu_resize(const cu_call *c) {
    const sc_desc *x = &c->in[0].desc, *y = &c->out[0].desc;
    bool linear = c->node->attrs->resize.mode == SC_RESIZE_LINEAR;
    if (linear && x->dtype != SC_F32 && x->dtype != SC_F64)
        return cu_errorf(c, "linear mode supports f32 and f64, not %s", sc_dtype_name(x->dtype));
    if (y->dtype != x->dtype) return cu_errorf(c, "Y's dtype %s differs from X's %s", sc_dtype_name(y->dtype), sc_dtype_name(x->dtype));
    int64_t n = sc_desc_numel(y);
    if (n == 0) return SC_OK;
    cu_resize_taps t;
    SC_TRY(cu_resize_taps_get(c, false, linear, &t));
    cudaStream_t s = c->ctx->stream;
    const void *xp = c->in[0].data;
    void *yp = c->out[0].data;
    if (linear) {
        if (x->dtype == SC_F32) linear_launch<float>(s, t, xp, yp, n);
        else linear_launch<double>(s, t, xp, yp, n);
    } else {
        CU_BY_SIZE(c, sc_dtype_size(x->dtype), nearest_launch<T>(s, t, xp, yp, n));
    }
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

sc_status cu_resize_grad(const cu_call *c) {
    const sc_desc *dy = &c->in[0].desc, *x = &c->in[1].desc;
    if (x->dtype != SC_F32 && x->dtype != SC_F64) return cu_errorf(c, "dtype %s not supported", sc_dtype_name(x->dtype));
    if (dy->dtype != x->dtype || dy->rank != x->rank) return cu_errorf(c, "dY must have X's dtype and rank");
    if (c->n_out < 1 || !c->out[0].data) return SC_OK; /* dX not wanted */
    int64_t n = sc_desc_numel(x), ny = sc_desc_numel(dy);
    if (ny == 0) { /* no output: dX = 0, whatever the geometry (as on the CPU) */
        CU_CHECK(c, cudaMemsetAsync(c->out[0].data, 0, (size_t)sc_desc_bytes(x), c->ctx->stream));
        return SC_OK;
    }
    cu_resize_taps t;
    SC_TRY(cu_resize_taps_get(c, true, c->node->attrs->resize.mode == SC_RESIZE_LINEAR, &t)); /* X not empty */
    if (x->dtype == SC_F32) grad_launch<float>(c->ctx->stream, t, c->in[0].data, c->out[0].data, n, ny);
    else grad_launch<double>(c->ctx->stream, t, c->in[0].data, c->out[0].data, n, ny);
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}
