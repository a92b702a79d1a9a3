/* 16-bit floats on the CUDA backend, as the CPU backend runs them (backends/cpu/cpu_widen.c): a node
 * with a bf16 or f16 input or output runs its op's f32 kernel on widened copies (bf16 -> f32 and
 * f16 -> f32 are exact), and each 16-bit output is rounded once to nearest even. The conversions are
 * core/half.h's scalar functions compiled for the device, so both backends round to the same bits;
 * the f32 kernels then differ from the CPU's only in summation order, as they do in f32.
 *
 * Cast and ConstantOfShape take 16-bit types as they are (the type is their attribute), and so does
 * Shape (it reads no data). Gemm and MatMul in one 16-bit type run on cuBLAS's 16-bit tensor-core
 * paths with f32 accumulation (cu_nn_blas.c): the same arithmetic up to summation order.
 * Conversions from and to a 16-bit type go through float, as on the CPU, except f64 -> f16, which
 * rounds once from the double.
 *
 * The widened copies live in one device buffer of the backend (cu_widen_buffer), outside the plan's
 * arena, like the kernels' workspace: a node needs 4 bytes per element of its 16-bit tensors there.
 * An output that aliases an input (an in-place op) shares the input's widened copy, so the f32
 * kernel sees the aliasing it was written for.
 *
 * Conv and ConvGrad in one 16-bit type go to cu_nn_conv.c as they are: cuDNN's 16-bit convolutions
 * and the bias gradient's own 16-bit reads; only a fused inference epilogue and pads cuDNN cannot
 * take come back here. The rest is the correct path, not the fast one: element-moving ops convert
 * twice. */
#include <stdint.h>
#include <stdlib.h>

#include "backends/cuda/cu_kernels.h"
#include "core/half.h"

#define GRID_STRIDE(i, n) for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

__device__ __forceinline__ float half_to_float(uint16_t h, bool f16) { return f16 ? sc_f16_to_f32(h) : sc_bf16_to_f32(h); }

template <typename S> __device__ __forceinline__ uint16_t to_half(S v, bool f16) {
    float x = (float)v;
    return f16 ? sc_f32_to_f16(x) : sc_f32_to_bf16(x);
}
/* f64 -> f16 rounds once from the double; f64 -> bf16 goes through f32, as on the CPU */
template <> __device__ __forceinline__ uint16_t to_half<double>(double v, bool f16) {
    return f16 ? sc_f64_to_f16(v) : sc_f32_to_bf16((float)v);
}

template <typename S> __global__ void k_to_half(uint16_t *d, const S *s, int64_t n, bool f16) {
    GRID_STRIDE(i, n) d[i] = to_half<S>(s[i], f16);
}
template <typename D> __global__ void k_from_half(D *d, const uint16_t *s, int64_t n, bool f16) {
    GRID_STRIDE(i, n) d[i] = (D)half_to_float(s[i], f16);
}
__global__ void k_half_to_bool(uint8_t *d, const uint16_t *s, int64_t n, bool f16) {
    GRID_STRIDE(i, n) d[i] = half_to_float(s[i], f16) != 0.0f;
}
__global__ void k_half_to_half(uint16_t *d, const uint16_t *s, int64_t n, bool from_f16, bool to_f16) {
    GRID_STRIDE(i, n) d[i] = to_half<float>(half_to_float(s[i], from_f16), to_f16);
}

#define HALF_DISPATCH(t, CASE, what)                                                                     \
    switch (t) {                                                                                         \
    case SC_F32: { typedef float T; CASE; break; }                                                       \
    case SC_F64: { typedef double T; CASE; break; }                                                      \
    case SC_I8: { typedef int8_t T; CASE; break; }                                                       \
    case SC_U8: { typedef uint8_t T; CASE; break; }                                                      \
    case SC_I16: { typedef int16_t T; CASE; break; }                                                     \
    case SC_U16: { typedef uint16_t T; CASE; break; }                                                    \
    case SC_I32: { typedef int32_t T; CASE; break; }                                                     \
    case SC_U32: { typedef uint32_t T; CASE; break; }                                                    \
    case SC_I64: { typedef int64_t T; CASE; break; }                                                     \
    case SC_U64: { typedef uint64_t T; CASE; break; }                                                    \
    default: return cu_errorf(NULL, "cast %s %s not supported", what, sc_dtype_name(t));                 \
    }

extern "C" sc_status cu_half_cast_launch(cudaStream_t s, void *dst, sc_dtype dt, const void *src, sc_dtype st, int64_t n) {
    const cu_call *c = NULL;
    if (n == 0) return SC_OK;
    unsigned g = cu_grid(n);
    if (st == dt) {
        CU_CHECK(c, cudaMemcpyAsync(dst, src, (size_t)n * 2, cudaMemcpyDeviceToDevice, s));
        return SC_OK;
    }
    if (sc_dtype_is_half(st) && sc_dtype_is_half(dt)) {
        k_half_to_half<<<g, CU_BLOCK, 0, s>>>((uint16_t *)dst, (const uint16_t *)src, n, st == SC_F16, dt == SC_F16);
    } else if (sc_dtype_is_half(st) && dt == SC_BOOL) {
        k_half_to_bool<<<g, CU_BLOCK, 0, s>>>((uint8_t *)dst, (const uint16_t *)src, n, st == SC_F16);
    } else if (sc_dtype_is_half(st)) {
        HALF_DISPATCH(dt, (k_from_half<T><<<g, CU_BLOCK, 0, s>>>((T *)dst, (const uint16_t *)src, n, st == SC_F16)), "to");
    } else {
        sc_dtype from = st == SC_BOOL ? SC_U8 : st; /* bool is 0 or 1 */
        HALF_DISPATCH(from, (k_to_half<T><<<g, CU_BLOCK, 0, s>>>((uint16_t *)dst, (const T *)src, n, dt == SC_F16)), "from");
    }
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

/* Ops whose kernels take 16-bit tensors as they are. */
static bool takes_16bit(sc_op op) { return op == SC_OP_CAST || op == SC_OP_CONSTANT_OF_SHAPE || op == SC_OP_SHAPE; }

/* Gemm and MatMul whose tensors are all of one 16-bit type run on cuBLAS's 16-bit paths
 * (cu_nn_blas.c). */
static bool native_product(const cu_call *c) {
    if (c->node->op != SC_OP_GEMM && c->node->op != SC_OP_MATMUL) return false;
    sc_dtype t = c->out[0].desc.dtype;
    for (int i = 0; i < c->n_in; i++)
        if (c->in[i].data && c->in[i].desc.dtype != t) return false;
    return sc_dtype_is_half(t);
}

/* Conv and ConvGrad whose tensors are all of one 16-bit type go to their kernels as they are:
 * cu_nn_conv.c runs cuDNN's 16-bit convolution where it applies and widens the rest itself. */
static bool native_conv(const cu_call *c) {
#ifdef SC_HAVE_CUDNN
    if (c->node->op != SC_OP_CONV && c->node->op != SC_OP_CONV_GRAD) return false;
    sc_dtype t = c->in[0].desc.dtype;
    for (int i = 0; i < c->n_in + c->n_out; i++) {
        const sc_tensor *x = i < c->n_in ? &c->in[i] : &c->out[i - c->n_in];
        if (x->data && x->desc.dtype != t) return false;
    }
    return sc_dtype_is_half(t);
#else
    (void)c;
    return false;
#endif
}

extern "C" bool cu_needs_widening(const cu_call *c) {
    if (takes_16bit(c->node->op) || native_product(c) || native_conv(c)) return false;
    for (int i = 0; i < c->n_in; i++)
        if (c->in[i].data && sc_dtype_is_half(c->in[i].desc.dtype)) return true;
    for (int i = 0; i < c->n_out; i++)
        if (c->out[i].data && sc_dtype_is_half(c->out[i].desc.dtype)) return true;
    return false;
}

static int64_t widened_bytes(const sc_tensor *t) { return (sc_desc_numel(&t->desc) * 4 + 255) / 256 * 256; }

/* Offsets of the widened copies in the buffer (-1: not widened); returns the buffer's size. */
static int64_t widen_layout(const cu_call *c, int64_t *off) {
    int64_t total = 0;
    for (int k = 0; k < c->n_in + c->n_out; k++) {
        const sc_tensor *t = k < c->n_in ? &c->in[k] : &c->out[k - c->n_in];
        off[k] = -1;
        if (!t->data || !sc_dtype_is_half(t->desc.dtype)) continue;
        for (int j = 0; k >= c->n_in && j < c->n_in; j++) /* an in-place output shares its input's copy */
            if (off[j] >= 0 && c->in[j].data == t->data && sc_desc_numel(&c->in[j].desc) == sc_desc_numel(&t->desc))
                off[k] = off[j];
        if (off[k] >= 0) continue;
        off[k] = total;
        total += widened_bytes(t);
    }
    return total;
}

static int64_t widened_runs; /* calls run on widened copies, for the tests: cu_widened_runs */

extern "C" int64_t cu_widened_runs(void) { return __atomic_load_n(&widened_runs, __ATOMIC_RELAXED); }

extern "C" sc_status cu_run_widened(cu_kernel k, const cu_call *c) {
    __atomic_fetch_add(&widened_runs, 1, __ATOMIC_RELAXED);
    int n = c->n_in + c->n_out;
    int64_t *off = (int64_t *)malloc(sizeof(int64_t) * (size_t)(n + 1));
    sc_tensor *wide = (sc_tensor *)malloc(sizeof(sc_tensor) * (size_t)(n + 1));
    sc_status st = off && wide ? SC_OK : cu_errorf(c, "out of memory widening 16-bit tensors");
    char *buf = NULL;
    if (!st) st = cu_widen_buffer(c, widen_layout(c, off), (void **)&buf);
    cudaStream_t s = c->ctx->stream;
    for (int i = 0; !st && i < n; i++) {
        const sc_tensor *t = i < c->n_in ? &c->in[i] : &c->out[i - c->n_in];
        wide[i] = *t;
        if (off[i] < 0) continue;
        wide[i].desc.dtype = SC_F32;
        wide[i].data = buf + off[i];
        if (i < c->n_in) st = cu_half_cast_launch(s, wide[i].data, SC_F32, t->data, t->desc.dtype, sc_desc_numel(&t->desc));
    }
    if (!st) {
        cu_call w = {c->ctx, c->node, wide, c->n_in, wide + c->n_in, c->n_out};
        st = k(&w);
    }
    for (int i = c->n_in; !st && i < n; i++) {
        const sc_tensor *t = &c->out[i - c->n_in];
        if (off[i] >= 0) st = cu_half_cast_launch(s, t->data, t->desc.dtype, wide[i].data, SC_F32, sc_desc_numel(&t->desc));
    }
    free(off);
    free(wide);
    return st;
}
