/* Resize (opset 19; X, roi, scales, sizes -> Y) and ResizeGrad (dY, X, roi, scales, sizes -> dX) on
 * the CUDA backend, modes nearest and linear (n-linear); the semantics are cpu_resize.c's and
 * cpu_grad_resize.c's, the tap tables the same (cu_resize.h). One thread per output element e, with
 * multi-index idx over Y's dims:
 *   nearest   Y[e] = X[sum_i off0[i][idx_i]]            (any dtype, moved by element size)
 *   linear    Y[e] = sum over the 2^m corners of the m active axes of
 *                    prod_k (1 - w1 | w1) X[base + sum_k (off0 | off1)],  accumulated in double
 *   gradient  dX[corner] += weight * dY[e]   (atomics; only axes with two distinct weighted taps
 *             branch, as on the CPU), dX zeroed first
 * and the extrapolation value wherever some axis has off0 = -1 (tf_crop_and_resize outside the roi;
 * the gradient skips those elements). Corners are visited in the CPU's order, so the forward matches
 * it to double rounding; the gradient's atomics add in any order.
 * Index maths runs in 32 bits when the element count allows (64-bit division is slow on the GPU).
 */
#include <stdint.h>
#include <string.h>

#include "backends/cuda/cu_block.cuh"
#include "backends/cuda/cu_kernels.h"
#include "backends/cuda/cu_resize.h"

#define RZ_LOOP(I, e, n) for (I e = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; e < (n); e += (I)gridDim.x * (I)blockDim.x)

template <typename E, typename I> __global__ void k_resize_nearest(cu_resize_taps t, const E *x, E *y, E ext, I n) {
    RZ_LOOP(I, e, n) {
        I f = e;
        int64_t off = 0;
        bool outside = false;
#pragma unroll
        for (int k = 0; k < SC_MAX_RANK; k++) {
            int i = SC_MAX_RANK - 1 - k;
            if (i >= t.rank) continue;
            I d = (I)t.ydims[i];
            int64_t o = t.off0[i][f % d];
            f /= d;
            outside |= o < 0;
            off += o;
        }
        y[e] = outside ? ext : x[off];
    }
}

/* The taps of element e: base (sum of the single-tap axes), the m branching axes' taps and second
 * weights in increasing axis order. `all_active`: the forward branches on every active axis (as
 * cpu_resize.c), the gradient only where the two taps differ and w1 != 0 (as cpu_grad_resize.c).
 * Returns false when e is extrapolated. */
template <typename I>
__device__ __forceinline__ bool rz_taps(const cu_resize_taps &t, I e, bool all_active, int64_t *base, int *m,
                                        int64_t *a0, int64_t *a1, double *aw) {
    I f = e;
    int64_t idx[SC_MAX_RANK];
#pragma unroll
    for (int k = 0; k < SC_MAX_RANK; k++) {
        int i = SC_MAX_RANK - 1 - k;
        if (i >= t.rank) continue;
        I d = (I)t.ydims[i];
        idx[i] = (int64_t)(f % d);
        f /= d;
    }
    bool inside = true;
    int64_t b = 0;
    int cnt = 0;
#pragma unroll
    for (int i = 0; i < SC_MAX_RANK; i++) {
        if (i >= t.rank) continue;
        int64_t o0 = t.off0[i][idx[i]], o1 = t.off1[i][idx[i]];
        double w = t.w1[i][idx[i]];
        inside &= o0 >= 0;
        bool branch = all_active ? (t.active >> i & 1u) != 0 : (w != 0 && o0 != o1);
        if (branch) {
            a0[cnt] = o0, a1[cnt] = o1, aw[cnt] = w;
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
        if (!rz_taps(t, e, true, &base, &m, a0, a1, aw)) {
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

template <typename T, typename I> __global__ void k_resize_grad(cu_resize_taps t, const T *dy, T *dx, I n) {
    RZ_LOOP(I, e, n) {
        int64_t base, a0[SC_MAX_RANK], a1[SC_MAX_RANK];
        double aw[SC_MAX_RANK];
        int m;
        if (!rz_taps(t, e, false, &base, &m, a0, a1, aw)) continue;
        double g = (double)dy[e];
        for (int cn = 0; cn < (1 << m); cn++) {
            int64_t off;
            double w = rz_corner(m, a0, a1, aw, cn, base, &off);
            atomicAdd(&dx[off], (T)(w * g));
        }
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

template <typename T> static void grad_launch(cudaStream_t s, const cu_resize_taps &t, const void *dy, void *dx, int64_t n) {
    if (idx32(n)) k_resize_grad<T, uint32_t><<<cu_grid(n), CU_BLOCK, 0, s>>>(t, (const T *)dy, (T *)dx, (uint32_t)n);
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
        switch (sc_dtype_size(x->dtype)) {
        case 1: nearest_launch<uint8_t>(s, t, xp, yp, n); break;
        case 2: nearest_launch<uint16_t>(s, t, xp, yp, n); break;
        case 4: nearest_launch<uint32_t>(s, t, xp, yp, n); break;
        case 8: nearest_launch<uint64_t>(s, t, xp, yp, n); break;
        default: return cu_errorf(c, "dtype %s not supported", sc_dtype_name(x->dtype));
        }
    }
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

sc_status cu_resize_grad(const cu_call *c) {
    const sc_desc *dy = &c->in[0].desc, *x = &c->in[1].desc;
    if (x->dtype != SC_F32 && x->dtype != SC_F64) return cu_errorf(c, "dtype %s not supported", sc_dtype_name(x->dtype));
    if (dy->dtype != x->dtype || dy->rank != x->rank) return cu_errorf(c, "dY must have X's dtype and rank");
    if (c->n_out < 1 || !c->out[0].data) return SC_OK; /* dX not wanted */
    CU_CHECK(c, cudaMemsetAsync(c->out[0].data, 0, (size_t)sc_desc_bytes(x), c->ctx->stream));
    int64_t n = sc_desc_numel(dy);
    if (n == 0) return SC_OK;
    cu_resize_taps t;
    SC_TRY(cu_resize_taps_get(c, true, c->node->attrs->resize.mode == SC_RESIZE_LINEAR, &t));
    if (x->dtype == SC_F32) grad_launch<float>(c->ctx->stream, t, c->in[0].data, c->out[0].data, n);
    else grad_launch<double>(c->ctx->stream, t, c->in[0].data, c->out[0].data, n);
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}
