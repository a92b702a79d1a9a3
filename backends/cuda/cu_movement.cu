/* Data movement on the CUDA backend, dtype-agnostic (moved by element size): Transpose, Concat,
 * Split, Slice and SliceGrad, Gather and GatherGrad, Pad, Trilu, and the shape-made tensors Shape,
 * ConstantOfShape, Range. Semantics are the CPU's (cpu_movement.c, cpu_movement_index.c, cpu_movement_pad.c,
 * cpu_movement_grad.c, cpu_movement_fill.c):
 *   Slice: negative starts / ends add the dim; step > 0 clamps both to [0, dim], step < 0 clamps
 *     start to [0, dim - 1] and end to [-1, dim - 1]; output dims come from shape inference.
 *   Pad: out index i reads i - begin, outside the input by mode (constant, edge, reflect, wrap).
 *   Trilu keeps j - i >= k (upper) or j - i <= k (lower) of the last two dims.
 *   Gather: out = data[:axis] ++ indices.shape ++ data[axis+1:], negative indices count from the end.
 * Transpose and Slice share one strided-gather kernel: out element i reads base + sum_d q_d st_d for
 * the coordinates q of i over the output dims. Concat and Split are 2-D strided copies
 * (cudaMemcpy2DAsync), one per piece.
 * Differences from the CPU: an out-of-range Gather index reads / adds nothing (its output is 0)
 * instead of failing with a status, because checking would need a read-back per node; GatherGrad
 * adds repeated indices with atomics, so their order (and the last bits) may differ.
 */
#include <stdint.h>
#include <string.h>

#include "backends/common/common.h"
#include "backends/cuda/cu_block.cuh"
#include "backends/cuda/cu_kernels.h"

typedef struct {
    int rank;
    int64_t dims[SC_MAX_RANK]; /* output dims */
    int64_t st[SC_MAX_RANK];   /* input strides per output dim (elements, may be negative) */
    int64_t base;
} strided_geom;

__device__ __forceinline__ int64_t sg_off(const strided_geom &g, int64_t i) {
    int64_t off = g.base;
    for (int d = g.rank - 1; d >= 0; d--) {
        off += (i % g.dims[d]) * g.st[d];
        i /= g.dims[d];
    }
    return off;
}

template <typename T> __global__ void k_strided_gather(strided_geom g, const T *x, T *y, int64_t n) {
    GRID_STRIDE(i, n) y[i] = x[sg_off(g, i)];
}
/* SliceGrad: the slice's positions are distinct, so a plain scatter into the zeroed dX. */
template <typename T> __global__ void k_strided_scatter(strided_geom g, const T *dy, T *dx, int64_t n) {
    GRID_STRIDE(i, n) dx[sg_off(g, i)] = dy[i];
}

static sc_status strided_run(const cu_call *c, const strided_geom *g, size_t es, const void *src, void *dst, int64_t n, bool scatter) {
    if (n == 0) return SC_OK;
    cudaStream_t s = c->ctx->stream;
    CU_BY_SIZE(c, es, ({
        if (scatter) k_strided_scatter<T><<<cu_grid(n), CU_BLOCK, 0, s>>>(*g, (const T *)src, (T *)dst, n);
        else k_strided_gather<T><<<cu_grid(n), CU_BLOCK, 0, s>>>(*g, (const T *)src, (T *)dst, n);
    }));
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

static void strides_of(const sc_desc *d, int64_t *st) {
    int64_t s = 1;
    for (int i = d->rank - 1; i >= 0; i--) st[i] = s, s *= d->dims[i];
}

/* Slice geometry from inputs (data, starts, ends[, axes, steps]) at positions first..first+3 and
 * the sliced tensor's dims `full` onto the output dims `part`. */
static sc_status slice_geom(const cu_call *c, int first, const sc_desc *full, const sc_desc *part, strided_geom *g) {
    int64_t starts[SC_MAX_RANK], ends[SC_MAX_RANK], axes[SC_MAX_RANK], steps[SC_MAX_RANK], n, ne, na = 0, ns = 0;
    SC_TRY(cu_read_i64(c, first, starts, &n, SC_MAX_RANK));
    SC_TRY(cu_read_i64(c, first + 1, ends, &ne, SC_MAX_RANK));
    if (ne != n) return cu_errorf(c, "starts has %lld values, ends %lld", (long long)n, (long long)ne);
    if (c->n_in > first + 2 && c->in[first + 2].data) SC_TRY(cu_read_i64(c, first + 2, axes, &na, SC_MAX_RANK));
    else for (int64_t k = 0; k < n; k++) axes[k] = k, na = n;
    if (c->n_in > first + 3 && c->in[first + 3].data) SC_TRY(cu_read_i64(c, first + 3, steps, &ns, SC_MAX_RANK));
    else for (int64_t k = 0; k < n; k++) steps[k] = 1, ns = n;
    if (na != n || ns != n) return cu_errorf(c, "starts, ends, axes and steps must have the same length");
    int64_t st[SC_MAX_RANK];
    strides_of(full, st);
    *g = strided_geom{};
    g->rank = part->rank;
    for (int d = 0; d < part->rank; d++) g->dims[d] = part->dims[d], g->st[d] = st[d];
    for (int64_t k = 0; k < n; k++) {
        int64_t a = axes[k] < 0 ? axes[k] + full->rank : axes[k];
        if (a < 0 || a >= full->rank) return cu_errorf(c, "axis %lld out of range for rank %d", (long long)axes[k], full->rank);
        int64_t dim = full->dims[a], s = starts[k], step = steps[k];
        if (step == 0) return cu_errorf(c, "step 0 on axis %lld", (long long)a);
        if (s < 0) s += dim;
        if (step > 0) s = s < 0 ? 0 : s > dim ? dim : s;
        else s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
        g->base += s * st[a];
        g->st[a] = step * st[a];
    }
    return SC_OK;
}

template <typename T> __global__ void k_gather(const T *x, const void *idx, bool i64, T *y, int64_t K, int64_t A, int64_t J, int64_t n) {
    GRID_STRIDE(i, n) {
        int64_t j = i % J, k = (i / J) % K, o = i / (J * K);
        int64_t ix = i64 ? ((const int64_t *)idx)[k] : ((const int32_t *)idx)[k];
        if (ix < 0) ix += A;
        y[i] = ix >= 0 && ix < A ? x[(o * A + ix) * J + j] : (T)0;
    }
}

/* GatherGrad without atomics, so its bits do not depend on thread timing (a float atomicAdd sums
 * repeated indices in any order; the plan invariant needs a recomputed or replayed step to repeat
 * its bits). The indices are bucketed by value with a counting sort whose buckets list k in
 * increasing order, then each dX element sums its bucket in that order: the CPU's order
 * (cpu_movement_grad.c walks k upwards), in T.
 *   1. norm[k]: the index made non-negative, -1 when out of range; cnt[a] += 1 (integer atomics:
 *      exact in any order)
 *   2. start[a]: exclusive prefix sum of cnt (one block)
 *   3. each k takes some slot of its bucket (atomics again, any order), then
 *   4. its rank, the number of bucket members below it, gives its sorted place
 *   5. dX[o, a, j] = sum over the bucket of dY[o, k, j]
 * Step 4 costs each index the size of its bucket: a token repeated m times costs m^2 in all, run
 * by m threads. */
__global__ void k_gg_count(const void *idx, bool i64, int64_t K, int64_t A, int64_t *norm, unsigned *cnt) {
    GRID_STRIDE(k, K) {
        int64_t ix = i64 ? ((const int64_t *)idx)[k] : ((const int32_t *)idx)[k];
        if (ix < 0) ix += A;
        norm[k] = ix >= 0 && ix < A ? ix : -1;
        if (norm[k] >= 0) atomicAdd(&cnt[norm[k]], 1u);
    }
}

/* start[a] = cnt[0] + ... + cnt[a - 1], a <= A: each thread scans a chunk, thread 0 the totals. */
__global__ void k_gg_scan(const unsigned *cnt, int64_t A, int64_t *start) {
    __shared__ int64_t total[1024];
    int64_t chunk = (A + blockDim.x - 1) / blockDim.x, lo = threadIdx.x * chunk;
    int64_t hi = lo + chunk < A ? lo + chunk : A, s = 0;
    for (int64_t a = lo; a < hi; a++) s += cnt[a];
    total[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        int64_t run = 0;
        for (unsigned t = 0; t < blockDim.x; t++) {
            int64_t v = total[t];
            total[t] = run;
            run += v;
        }
        start[A] = run;
    }
    __syncthreads();
    s = total[threadIdx.x];
    for (int64_t a = lo; a < hi; a++) {
        start[a] = s;
        s += cnt[a];
    }
}

__global__ void k_gg_fill(const int64_t *norm, int64_t K, const int64_t *start, unsigned *fill, int64_t *any) {
    GRID_STRIDE(k, K) {
        if (norm[k] >= 0) any[start[norm[k]] + atomicAdd(&fill[norm[k]], 1u)] = k;
    }
}

__global__ void k_gg_rank(const int64_t *norm, int64_t K, const int64_t *start, const int64_t *any, int64_t *sorted) {
    GRID_STRIDE(k, K) {
        int64_t a = norm[k];
        if (a < 0) continue;
        int64_t below = 0;
        for (int64_t m = start[a]; m < start[a + 1]; m++) below += any[m] < k;
        sorted[start[a] + below] = k;
    }
}

template <typename T>
__global__ void k_gather_grad(const T *dy, const int64_t *start, const int64_t *sorted, const T *base, T *dx, int64_t K,
                              int64_t A, int64_t J, int64_t n) {
    GRID_STRIDE(i, n) {
        int64_t j = i % J, a = (i / J) % A, o = i / (J * A);
        T acc = base ? base[i] : (T)0; /* base may be dx itself: read before the write below */
        for (int64_t m = start[a]; m < start[a + 1]; m++) acc += dy[(o * K + sorted[m]) * J + j];
        dx[i] = acc;
    }
}

typedef struct {
    int rank;
    int64_t ydims[SC_MAX_RANK], xdims[SC_MAX_RANK], xst[SC_MAX_RANK], begin[SC_MAX_RANK];
    int mode;
} pad_geom;

template <typename T> __global__ void k_pad(pad_geom g, const T *x, T *y, T value, int64_t n) {
    GRID_STRIDE(i, n) {
        int64_t f = i, off = 0;
        bool constant = false;
        for (int d = g.rank - 1; d >= 0; d--) {
            int64_t j = sc_pad_source(f % g.ydims[d], g.begin[d], g.xdims[d], g.mode);
            f /= g.ydims[d];
            if (j < 0) constant = true;
            else off += j * g.xst[d];
        }
        y[i] = constant ? value : x[off];
    }
}

template <typename T> __global__ void k_trilu(const T *x, T *y, int64_t N, int64_t M, int64_t k, bool upper, int64_t n) {
    GRID_STRIDE(e, n) {
        int64_t j = e % M, i = (e / M) % N;
        bool keep = upper ? j - i >= k : j - i <= k;
        y[e] = keep ? x[e] : (T)0;
    }
}

template <typename T> __global__ void k_range(T *y, T s, T dl, int64_t n) {
    GRID_STRIDE(i, n) y[i] = (T)(s + (T)i * dl);
}

/* Concat (to_whole) and Split: each piece is `outer` rows of dims[axis] * inner elements, placed at
 * a running offset along the axis of the whole tensor. */
static sc_status pieces_move(const cu_call *c, const sc_tensor *whole, const sc_tensor *pieces, int n, int64_t axis_raw, bool to_whole) {
    int rank = whole->desc.rank;
    int64_t a = axis_raw < 0 ? axis_raw + rank : axis_raw;
    if (a < 0 || a >= rank) return cu_errorf(c, "axis %lld out of range for rank %d", (long long)axis_raw, rank);
    size_t es = sc_dtype_size(whole->desc.dtype);
    int64_t outer = cu_prod(whole->desc.dims, 0, (int)a), inner = cu_prod(whole->desc.dims, (int)a + 1, rank) * (int64_t)es;
    int64_t wrow = whole->desc.dims[a] * inner, at = 0, sum = 0;
    for (int k = 0; k < n; k++) {
        const sc_desc *d = &pieces[k].desc;
        bool ok = d->rank == rank && d->dtype == whole->desc.dtype;
        for (int i = 0; ok && i < rank; i++) ok = i == a || d->dims[i] == whole->desc.dims[i];
        if (!ok) return cu_errorf(c, "piece %d does not fit the whole tensor along axis %lld", k, (long long)a);
        sum += d->dims[a];
    }
    if (sum != whole->desc.dims[a]) return cu_errorf(c, "sizes along axis %lld add up to %lld, expected %lld", (long long)a, (long long)sum, (long long)whole->desc.dims[a]);
    for (int k = 0; k < n; k++) {
        int64_t prow = pieces[k].desc.dims[a] * inner;
        char *w = (char *)whole->data + at;
        at += prow;
        if (prow == 0 || outer == 0 || !pieces[k].data) continue;
        if (to_whole)
            CU_CHECK(c, cudaMemcpy2DAsync(w, (size_t)wrow, pieces[k].data, (size_t)prow, (size_t)prow, (size_t)outer, cudaMemcpyDeviceToDevice, c->ctx->stream));
        else
            CU_CHECK(c, cudaMemcpy2DAsync(pieces[k].data, (size_t)prow, w, (size_t)wrow, (size_t)prow, (size_t)outer, cudaMemcpyDeviceToDevice, c->ctx->stream));
    }
    return SC_OK;
}

static sc_status read_raw(const cu_call *c, int i, void *dst, size_t bytes) {
    CU_CHECK(c, cudaMemcpyAsync(c->ctx->pinned_small, c->in[i].data, bytes, cudaMemcpyDeviceToHost, c->ctx->stream));
    CU_CHECK(c, cudaStreamSynchronize(c->ctx->stream));
    memcpy(dst, c->ctx->pinned_small, bytes);
    return SC_OK;
}

extern "C" {

sc_status cu_transpose(const cu_call *c) {
    const sc_desc *x = &c->in[0].desc, *y = &c->out[0].desc;
    const sc_transpose_attrs *ta = &c->node->attrs->transpose;
    int64_t st[SC_MAX_RANK];
    strides_of(x, st);
    strided_geom g = {};
    g.rank = x->rank;
    for (int d = 0; d < x->rank; d++) {
        int64_t p = ta->n_perm ? ta->perm[d] : x->rank - 1 - d;
        if (p < 0) p += x->rank;
        if (p < 0 || p >= x->rank) return cu_errorf(c, "perm[%d] = %lld out of range", d, (long long)ta->perm[d]);
        g.dims[d] = y->dims[d];
        g.st[d] = st[p];
    }
    return strided_run(c, &g, sc_dtype_size(x->dtype), c->in[0].data, c->out[0].data, sc_desc_numel(y), false);
}

sc_status cu_concat(const cu_call *c) { return pieces_move(c, &c->out[0], c->in, c->n_in, c->node->attrs->axis.axis, true); }
sc_status cu_split(const cu_call *c) { return pieces_move(c, &c->in[0], c->out, c->n_out, c->node->attrs->axis.axis, false); }

sc_status cu_slice(const cu_call *c) {
    strided_geom g;
    SC_TRY(slice_geom(c, 1, &c->in[0].desc, &c->out[0].desc, &g));
    return strided_run(c, &g, sc_dtype_size(c->in[0].desc.dtype), c->in[0].data, c->out[0].data, sc_desc_numel(&c->out[0].desc), false);
}

/* (dY, X, starts, ends[, axes, steps]) -> dX of X's shape. */
sc_status cu_slice_grad(const cu_call *c) {
    strided_geom g;
    SC_TRY(slice_geom(c, 2, &c->in[1].desc, &c->in[0].desc, &g));
    int64_t b = sc_desc_bytes(&c->out[0].desc);
    if (b > 0) CU_CHECK(c, cudaMemsetAsync(c->out[0].data, 0, (size_t)b, c->ctx->stream));
    return strided_run(c, &g, sc_dtype_size(c->in[0].desc.dtype), c->in[0].data, c->out[0].data, sc_desc_numel(&c->in[0].desc), true);
}

static sc_status gather_geom(const cu_call *c, const sc_desc *data, const sc_desc *idx, int64_t *K, int64_t *A, int64_t *J, int *axis) {
    int64_t a = c->node->attrs->axis.axis;
    if (a < 0) a += data->rank;
    if (a < 0 || a >= data->rank) return cu_errorf(c, "axis %lld out of range for rank %d", (long long)c->node->attrs->axis.axis, data->rank);
    if (idx->dtype != SC_I32 && idx->dtype != SC_I64) return cu_errorf(c, "indices must be i32 or i64");
    *K = sc_desc_numel(idx);
    *A = data->dims[a];
    *J = cu_prod(data->dims, (int)a + 1, data->rank);
    *axis = (int)a;
    return SC_OK;
}

sc_status cu_gather(const cu_call *c) {
    int64_t K = 0, A = 0, J = 0;
    int axis = 0;
    SC_TRY(gather_geom(c, &c->in[0].desc, &c->in[1].desc, &K, &A, &J, &axis));
    int64_t n = sc_desc_numel(&c->out[0].desc);
    if (n == 0) return SC_OK;
    bool i64 = c->in[1].desc.dtype == SC_I64;
    cudaStream_t s = c->ctx->stream;
    CU_BY_SIZE(c, sc_dtype_size(c->in[0].desc.dtype),
            (k_gather<T><<<cu_grid(n), CU_BLOCK, 0, s>>>((const T *)c->in[0].data, c->in[1].data, i64, (T *)c->out[0].data, K, A, J, n)));
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

/* (dY, indices, data) -> dData: dData[o, a, :] = sum of dY[o, k, :] over idx[k] = a. */
sc_status cu_gather_grad(const cu_call *c) {
    int64_t K = 0, A = 0, J = 0;
    int axis = 0;
    SC_TRY(gather_geom(c, &c->out[0].desc, &c->in[1].desc, &K, &A, &J, &axis)); /* dData has data's shape */
    sc_dtype t = c->in[0].desc.dtype;
    if (t != SC_F32 && t != SC_F64) return cu_errorf(c, "dtype %s not supported (f32, f64)", sc_dtype_name(t));
    int64_t n = sc_desc_numel(&c->out[0].desc);
    if (n == 0) return SC_OK;
    /* workspace: norm, any, sorted (K each), start (A + 1), then cnt and fill (A unsigned each) */
    int64_t Kp = K > 0 ? K : 1;
    void *ws = NULL;
    SC_TRY(cu_scratch(c, (3 * Kp + A + 1) * 8 + 2 * A * 4, &ws));
    int64_t *norm = (int64_t *)ws, *any = norm + Kp, *sorted = any + Kp, *start = sorted + Kp;
    unsigned *cnt = (unsigned *)(start + A + 1), *fill = cnt + A;
    cudaStream_t s = c->ctx->stream;
    CU_CHECK(c, cudaMemsetAsync(cnt, 0, (size_t)(2 * A) * sizeof(unsigned), s));
    bool i64 = c->in[1].desc.dtype == SC_I64;
    if (K > 0) k_gg_count<<<cu_grid(K), CU_BLOCK, 0, s>>>(c->in[1].data, i64, K, A, norm, cnt);
    CU_LAUNCH_CHECK(c);
    k_gg_scan<<<1, 1024, 0, s>>>(cnt, A, start);
    CU_LAUNCH_CHECK(c);
    if (K > 0) {
        k_gg_fill<<<cu_grid(K), CU_BLOCK, 0, s>>>(norm, K, start, fill, any);
        CU_LAUNCH_CHECK(c);
        k_gg_rank<<<cu_grid(K), CU_BLOCK, 0, s>>>(norm, K, start, any, sorted);
        CU_LAUNCH_CHECK(c);
    }
    const void *base = c->n_in > 3 ? c->in[3].data : NULL;
    if (base && (c->in[3].desc.dtype != t || !sc_desc_same_shape(&c->in[3].desc, &c->out[0].desc)))
        return cu_errorf(c, "base must have dData's dtype and shape");
    if (t == SC_F32)
        k_gather_grad<float><<<cu_grid(n), CU_BLOCK, 0, s>>>((const float *)c->in[0].data, start, sorted, (const float *)base,
                                                             (float *)c->out[0].data, K, A, J, n);
    else
        k_gather_grad<double><<<cu_grid(n), CU_BLOCK, 0, s>>>((const double *)c->in[0].data, start, sorted, (const double *)base,
                                                              (double *)c->out[0].data, K, A, J, n);
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

sc_status cu_pad(const cu_call *c) {
    const sc_desc *x = &c->in[0].desc, *y = &c->out[0].desc;
    int r = x->rank;
    if (c->n_in < 2 || !c->in[1].data) return cu_errorf(c, "pads input is missing");
    int64_t pads[2 * SC_MAX_RANK], axes[SC_MAX_RANK], npads, naxes = r;
    SC_TRY(cu_read_i64(c, 1, pads, &npads, 2 * SC_MAX_RANK));
    if (c->n_in > 3 && c->in[3].data) SC_TRY(cu_read_i64(c, 3, axes, &naxes, SC_MAX_RANK));
    else for (int i = 0; i < r; i++) axes[i] = i;
    if (npads != 2 * naxes) return cu_errorf(c, "pads must be %lld values, got %lld", (long long)(2 * naxes), (long long)npads);
    pad_geom g = {};
    g.rank = r;
    g.mode = (int)c->node->attrs->pad.mode;
    strides_of(x, g.xst);
    for (int d = 0; d < r; d++) g.xdims[d] = x->dims[d], g.ydims[d] = y->dims[d];
    for (int64_t k = 0; k < naxes; k++) {
        int64_t a = axes[k] < 0 ? axes[k] + r : axes[k];
        if (a < 0 || a >= r) return cu_errorf(c, "axis %lld out of range for rank %d", (long long)axes[k], r);
        g.begin[a] = pads[k];
        if (x->dims[a] + pads[k] + pads[k + naxes] != y->dims[a]) return cu_errorf(c, "axis %lld: pads do not give the output size", (long long)a);
        if (g.mode != SC_PAD_CONSTANT && x->dims[a] == 0 && y->dims[a] > 0) return cu_errorf(c, "cannot pad an empty axis %lld in this mode", (long long)a);
    }
    size_t es = sc_dtype_size(x->dtype);
    uint64_t value = 0;
    if (c->n_in > 2 && c->in[2].data && sc_desc_numel(&c->in[2].desc) > 0) {
        if (c->in[2].desc.dtype != x->dtype) return cu_errorf(c, "constant_value dtype differs from data");
        SC_TRY(read_raw(c, 2, &value, es));
    }
    int64_t n = sc_desc_numel(y);
    if (n == 0) return SC_OK;
    cudaStream_t s = c->ctx->stream;
    CU_BY_SIZE(c, es, ({
                T v;
                memcpy(&v, &value, sizeof v);
                k_pad<T><<<cu_grid(n), CU_BLOCK, 0, s>>>(g, (const T *)c->in[0].data, (T *)c->out[0].data, v, n);
            }));
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

sc_status cu_trilu(const cu_call *c) {
    const sc_desc *x = &c->in[0].desc;
    if (x->rank < 2) return cu_errorf(c, "input rank %d, need at least 2", x->rank);
    int64_t k = 0;
    if (c->n_in > 1 && c->in[1].data) {
        double kd;
        SC_TRY(cu_read_f64(c, 1, &kd));
        k = (int64_t)kd;
    }
    int64_t N = x->dims[x->rank - 2], M = x->dims[x->rank - 1], n = sc_desc_numel(x);
    if (n == 0) return SC_OK;
    bool upper = c->node->attrs->trilu.upper;
    cudaStream_t s = c->ctx->stream;
    CU_BY_SIZE(c, sc_dtype_size(x->dtype), (k_trilu<T><<<cu_grid(n), CU_BLOCK, 0, s>>>((const T *)c->in[0].data, (T *)c->out[0].data, N, M, k, upper, n)));
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

/* The dims are known on the host: a small pageable copy (staged by the driver before it returns). */
sc_status cu_shape(const cu_call *c) {
    const sc_desc *x = &c->in[0].desc;
    int64_t start, n = sc_shape_range(x, &c->node->attrs->shape, &start);
    if (c->out[0].desc.dtype != SC_I64 || sc_desc_numel(&c->out[0].desc) != n) return cu_errorf(c, "output must be i64[%lld]", (long long)n);
    if (n > 0) CU_CHECK(c, cudaMemcpyAsync(c->out[0].data, &x->dims[start], (size_t)n * sizeof(int64_t), cudaMemcpyHostToDevice, c->ctx->stream));
    return SC_OK;
}

sc_status cu_constant_of_shape(const cu_call *c) {
    const sc_fill_attrs *f = &c->node->attrs->fill;
    sc_status e = cu_fill_launch(c->ctx->stream, c->out[0].data, c->out[0].desc.dtype, f->value, sc_desc_numel(&c->out[0].desc));
    return e ? sc_status_prefix(e, "node '%s': ", c->node->name) : SC_OK;
}

sc_status cu_range(const cu_call *c) {
    sc_dtype t = c->in[0].desc.dtype;
    for (int k = 0; k < 3; k++)
        if (c->in[k].desc.dtype != t || sc_desc_numel(&c->in[k].desc) != 1) return cu_errorf(c, "start, limit and delta must be scalars of one dtype");
    double s, dl;
    SC_TRY(cu_read_f64(c, 0, &s));
    SC_TRY(cu_read_f64(c, 2, &dl));
    int64_t n = sc_desc_numel(&c->out[0].desc);
    if (n == 0) return SC_OK;
    cudaStream_t st = c->ctx->stream;
    switch (t) {
    case SC_F32: k_range<float><<<cu_grid(n), CU_BLOCK, 0, st>>>((float *)c->out[0].data, (float)s, (float)dl, n); break;
    case SC_F64: k_range<double><<<cu_grid(n), CU_BLOCK, 0, st>>>((double *)c->out[0].data, s, dl, n); break;
    case SC_I32: k_range<int32_t><<<cu_grid(n), CU_BLOCK, 0, st>>>((int32_t *)c->out[0].data, (int32_t)s, (int32_t)dl, n); break;
    case SC_I64: k_range<int64_t><<<cu_grid(n), CU_BLOCK, 0, st>>>((int64_t *)c->out[0].data, (int64_t)s, (int64_t)dl, n); break;
    default: return cu_errorf(c, "dtype %s not supported", sc_dtype_name(t));
    }
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

/* Expand: numpy broadcasting of input 0 to the output's shape. */
sc_status cu_expand(const cu_call *c) { return cu_broadcast_input(c); }

} /* extern "C" */
