/* Element-wise kernels of the CUDA backend: unary activations, binary / variadic ops with numpy
 * broadcasting, Where, Expand, Cast, the copies behind Identity / Reshape / Flatten / Squeeze /
 * Unsqueeze, and the activation gradients ReluGrad / GeluGrad. Semantics are the CPU kernels'
 * (cpu_elementwise.c, cpu_elementwise_binary.c, cpu_elementwise_cast.c, cpu_nn_grad.c):
 *   Gelu exact 0.5 x (1 + erf(x / sqrt 2)); tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 *   Clip: x < lo ? lo : x, then > hi ? hi (NaN passes, lo > hi gives hi)
 *   Max / Min propagate NaN; integer Div truncates; Pow keeps the base's type.
 * Broadcasting reuses the CPU's stride plan (cpu_bcast_init: size-1 dims dropped, contiguous runs
 * merged), so the kernel decomposes a flat output index over at most 8 merged dims.
 * Differences from the CPU: integer division by zero gives 0 here instead of an error (checking
 * would need a read-back per node).
 */
#include <math.h>
#include <stdint.h>

#include "backends/cuda/cu_block.cuh"
#include "backends/cuda/cu_kernels.h"
#include "core/half.h"

extern "C" {
#include "backends/cpu/cpu_broadcast.h"
}

#define GRID_STRIDE(i, n) for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* ---- unary ---- */

enum { U_RELU, U_LEAKY, U_SIGMOID, U_TANH, U_ERF, U_GELU, U_GELU_TANH, U_SQRT, U_RECIP, U_NEG, U_EXP, U_LOG, U_CLIP, U_HARD_SIGMOID, U_HARD_SWISH };

template <int OP, typename T> __device__ __forceinline__ T unary_op(T v, double a, double b) {
    if (OP == U_RELU) return v > (T)0 || v != v ? v : (T)0; /* NaN passes, as on the CPU */
    if (OP == U_LEAKY) return v >= (T)0 ? v : (T)(v * (T)a);
    if (OP == U_SIGMOID) return (T)1 / ((T)1 + exp(-v));
    if (OP == U_TANH) return tanh(v);
    if (OP == U_ERF) return erf(v);
    if (OP == U_GELU) return (T)0.5 * v * ((T)1 + erf(v * (T)0.70710678118654752440));
    if (OP == U_GELU_TANH) {
        T u = (T)0.79788456080286535588 * (v + (T)0.044715 * v * v * v);
        return (T)0.5 * v * ((T)1 + tanh(u));
    }
    if (OP == U_SQRT) return sqrt(v);
    if (OP == U_RECIP) return (T)1 / v;
    if (OP == U_NEG) return -v;
    if (OP == U_EXP) return exp(v);
    if (OP == U_LOG) return log(v);
    if (OP == U_CLIP) {
        T r = v < (T)a ? (T)a : v;
        return r > (T)b ? (T)b : r;
    }
    if (OP == U_HARD_SIGMOID) return fmax((T)0, fmin((T)1, (T)a * v + (T)b));
    if (OP == U_HARD_SWISH) return v * fmax((T)0, fmin((T)1, (T)a * v + (T)b));
    return v;
}

template <int OP, typename T> __global__ void k_unary(const T *x, T *y, int64_t n, double a, double b) {
    GRID_STRIDE(i, n) y[i] = unary_op<OP, T>(x[i], a, b);
}

/* Integer negation and relu without float math (wraps like the CPU's unsigned negation). */
template <typename T> __global__ void k_neg_int(const T *x, T *y, int64_t n) {
    GRID_STRIDE(i, n) y[i] = (T)(0 - (typename std::make_unsigned<T>::type)x[i]);
}
template <typename T> __global__ void k_relu_int(const T *x, T *y, int64_t n) {
    GRID_STRIDE(i, n) y[i] = x[i] > 0 ? x[i] : 0;
}
template <typename T> __global__ void k_clip_int(const T *x, T *y, int64_t n, T lo, T hi) {
    GRID_STRIDE(i, n) {
        T r = x[i] < lo ? lo : x[i];
        y[i] = r > hi ? hi : r;
    }
}

__global__ void k_not(const uint8_t *x, uint8_t *y, int64_t n) {
    GRID_STRIDE(i, n) y[i] = !x[i];
}

template <int OP> static sc_status unary_float(const cu_call *c, double a, double b) {
    int64_t n = sc_desc_numel(&c->in[0].desc);
    cudaStream_t s = c->ctx->stream;
    switch (c->in[0].desc.dtype) {
    case SC_F32: k_unary<OP, float><<<cu_grid(n), CU_BLOCK, 0, s>>>((const float *)c->in[0].data, (float *)c->out[0].data, n, a, b); break;
    case SC_F64: k_unary<OP, double><<<cu_grid(n), CU_BLOCK, 0, s>>>((const double *)c->in[0].data, (double *)c->out[0].data, n, a, b); break;
    default: return cu_errorf(c, "dtype %s not supported", sc_dtype_name(c->in[0].desc.dtype));
    }
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

#define INT_UNARY(KERNEL, ...)                                                                             \
    do {                                                                                                   \
        int64_t n_ = sc_desc_numel(&c->in[0].desc);                                                        \
        cudaStream_t s_ = c->ctx->stream;                                                                  \
        switch (c->in[0].desc.dtype) {                                                                     \
        case SC_I8: KERNEL<int8_t><<<cu_grid(n_), CU_BLOCK, 0, s_>>>((const int8_t *)c->in[0].data, (int8_t *)c->out[0].data, n_ __VA_ARGS__); break; \
        case SC_I16: KERNEL<int16_t><<<cu_grid(n_), CU_BLOCK, 0, s_>>>((const int16_t *)c->in[0].data, (int16_t *)c->out[0].data, n_ __VA_ARGS__); break; \
        case SC_I32: KERNEL<int32_t><<<cu_grid(n_), CU_BLOCK, 0, s_>>>((const int32_t *)c->in[0].data, (int32_t *)c->out[0].data, n_ __VA_ARGS__); break; \
        case SC_I64: KERNEL<int64_t><<<cu_grid(n_), CU_BLOCK, 0, s_>>>((const int64_t *)c->in[0].data, (int64_t *)c->out[0].data, n_ __VA_ARGS__); break; \
        default: return cu_errorf(c, "dtype %s not supported", sc_dtype_name(c->in[0].desc.dtype));        \
        }                                                                                                  \
        CU_LAUNCH_CHECK(c);                                                                                \
        return SC_OK;                                                                                      \
    } while (0)

extern "C" {

sc_status cu_relu(const cu_call *c) {
    if (sc_dtype_is_float(c->in[0].desc.dtype)) return unary_float<U_RELU>(c, 0, 0);
    INT_UNARY(k_relu_int);
}
sc_status cu_leaky_relu(const cu_call *c) { return unary_float<U_LEAKY>(c, c->node->attrs->leaky_relu.alpha, 0); }
sc_status cu_sigmoid(const cu_call *c) { return unary_float<U_SIGMOID>(c, 0, 0); }
sc_status cu_tanh(const cu_call *c) { return unary_float<U_TANH>(c, 0, 0); }
sc_status cu_erf(const cu_call *c) { return unary_float<U_ERF>(c, 0, 0); }
sc_status cu_gelu(const cu_call *c) {
    return c->node->attrs->gelu.tanh_approx ? unary_float<U_GELU_TANH>(c, 0, 0) : unary_float<U_GELU>(c, 0, 0);
}
sc_status cu_hard_sigmoid(const cu_call *c) {
    const sc_hard_sigmoid_attrs *h = &c->node->attrs->hard_sigmoid;
    return unary_float<U_HARD_SIGMOID>(c, h->alpha, h->beta);
}
/* alpha 1/6 as the CPU rounds it: (float)(1/6) for f32, 1/6 for f64 */
sc_status cu_hard_swish(const cu_call *c) {
    double a = c->in[0].desc.dtype == SC_F32 ? (double)(1.0f / 6.0f) : 1.0 / 6.0;
    return unary_float<U_HARD_SWISH>(c, a, 0.5);
}
sc_status cu_sqrt(const cu_call *c) { return unary_float<U_SQRT>(c, 0, 0); }
sc_status cu_reciprocal(const cu_call *c) { return unary_float<U_RECIP>(c, 0, 0); }
sc_status cu_exp(const cu_call *c) { return unary_float<U_EXP>(c, 0, 0); }
sc_status cu_log(const cu_call *c) { return unary_float<U_LOG>(c, 0, 0); }
sc_status cu_neg(const cu_call *c) {
    if (sc_dtype_is_float(c->in[0].desc.dtype)) return unary_float<U_NEG>(c, 0, 0);
    INT_UNARY(k_neg_int);
}

/* Clip bounds are optional scalar inputs of X's dtype, read back to the host. */
sc_status cu_clip(const cu_call *c) {
    double lo = -INFINITY, hi = INFINITY;
    for (int k = 1; k < 3; k++) {
        if (k >= c->n_in || !c->in[k].data) continue;
        if (c->in[k].desc.dtype != c->in[0].desc.dtype || sc_desc_numel(&c->in[k].desc) != 1)
            return cu_errorf(c, "%s must be a scalar of the input's dtype", k == 1 ? "min" : "max");
        SC_TRY(cu_read_f64(c, k, k == 1 ? &lo : &hi));
    }
    if (sc_dtype_is_float(c->in[0].desc.dtype)) return unary_float<U_CLIP>(c, lo, hi);
    /* integer bounds beyond the type saturate to its range (absent bounds are +-inf) */
    switch (c->in[0].desc.dtype) {
    case SC_I32: {
        int32_t l = lo < INT32_MIN ? INT32_MIN : (int32_t)lo, h = hi > INT32_MAX ? INT32_MAX : (int32_t)hi;
        int64_t n = sc_desc_numel(&c->in[0].desc);
        k_clip_int<int32_t><<<cu_grid(n), CU_BLOCK, 0, c->ctx->stream>>>((const int32_t *)c->in[0].data, (int32_t *)c->out[0].data, n, l, h);
        break;
    }
    case SC_I64: {
        int64_t l = lo < -9.2e18 ? INT64_MIN : (int64_t)lo, h = hi > 9.2e18 ? INT64_MAX : (int64_t)hi;
        int64_t n = sc_desc_numel(&c->in[0].desc);
        k_clip_int<int64_t><<<cu_grid(n), CU_BLOCK, 0, c->ctx->stream>>>((const int64_t *)c->in[0].data, (int64_t *)c->out[0].data, n, l, h);
        break;
    }
    default: return cu_errorf(c, "dtype %s not supported", sc_dtype_name(c->in[0].desc.dtype));
    }
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

sc_status cu_not(const cu_call *c) {
    if (c->in[0].desc.dtype != SC_BOOL) return cu_errorf(c, "dtype %s not supported", sc_dtype_name(c->in[0].desc.dtype));
    int64_t n = sc_desc_numel(&c->in[0].desc);
    k_not<<<cu_grid(n), CU_BLOCK, 0, c->ctx->stream>>>((const uint8_t *)c->in[0].data, (uint8_t *)c->out[0].data, n);
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

/* Identity, Reshape, Flatten, Squeeze, Unsqueeze: the output desc already has the new shape. */
sc_status cu_copy_input(const cu_call *c) {
    int64_t b = sc_desc_bytes(&c->in[0].desc);
    if (b > 0 && c->out[0].data != c->in[0].data)
        CU_CHECK(c, cudaMemcpyAsync(c->out[0].data, c->in[0].data, (size_t)b, cudaMemcpyDeviceToDevice, c->ctx->stream));
    return SC_OK;
}

} /* extern "C" */

/* ---- binary with broadcasting ---- */

typedef struct {
    int rank;
    int64_t dims[SC_MAX_RANK];
    int64_t st[CPU_BCAST_MAX_IN][SC_MAX_RANK];
} bc_geom;

template <int NIN> __device__ __forceinline__ void bc_offsets(const bc_geom &g, int64_t i, int64_t *off) {
    for (int k = 0; k < NIN; k++) off[k] = 0;
    for (int d = g.rank - 1; d >= 0; d--) {
        int64_t q = i % g.dims[d];
        i /= g.dims[d];
        for (int k = 0; k < NIN; k++) off[k] += q * g.st[k][d];
    }
}

enum { B_ADD, B_SUB, B_MUL, B_DIV, B_MAX, B_MIN, B_EQ, B_LT, B_GT, B_AND, B_OR, B_FMOD, B_PYMOD };

/* Mod (cpu_elementwise_binary.c): integers through int64 (every dispatched type fits), C's % for
 * fmod, Python's sign rule otherwise; a zero divisor gives 0 (as integer Div here). Floats: fmod. */
template <typename T> __device__ __forceinline__ T mod_op(T a, T b, bool py) {
    int64_t x = (int64_t)a, y = (int64_t)b;
    if (y == 0) return 0;
    int64_t r = y == -1 ? 0 : x % y;
    if (py && r != 0 && ((r < 0) != (y < 0))) r += y;
    return (T)r;
}
__device__ __forceinline__ float mod_op(float a, float b, bool) { return fmodf(a, b); }
__device__ __forceinline__ double mod_op(double a, double b, bool) { return fmod(a, b); }

template <typename T> __device__ __forceinline__ bool is_nan(T v) { return v != v; }

template <int OP, typename T> __device__ __forceinline__ T bin_op(T a, T b) {
    if (OP == B_ADD) return a + b;
    if (OP == B_SUB) return a - b;
    if (OP == B_MUL) return a * b;
    if (OP == B_DIV) {
        if (std::is_integral<T>::value && b == 0) return 0;
        return a / b;
    }
    if (OP == B_FMOD || OP == B_PYMOD) return mod_op(a, b, OP == B_PYMOD);
    if (OP == B_MAX) return is_nan(a) ? a : is_nan(b) ? b : (a > b ? a : b);
    if (OP == B_MIN) return is_nan(a) ? a : is_nan(b) ? b : (a < b ? a : b);
    return a;
}

template <int OP, typename T> __device__ __forceinline__ uint8_t cmp_op(T a, T b) {
    if (OP == B_EQ) return a == b;
    if (OP == B_LT) return a < b;
    if (OP == B_GT) return a > b;
    if (OP == B_AND) return a && b;
    if (OP == B_OR) return a || b;
    return 0;
}

template <int OP, typename T> __global__ void k_binary(bc_geom g, const T *a, const T *b, T *y, int64_t n) {
    GRID_STRIDE(i, n) {
        int64_t o[2];
        bc_offsets<2>(g, i, o);
        y[i] = bin_op<OP, T>(a[o[0]], b[o[1]]);
    }
}

template <int OP, typename T> __global__ void k_compare(bc_geom g, const T *a, const T *b, uint8_t *y, int64_t n) {
    GRID_STRIDE(i, n) {
        int64_t o[2];
        bc_offsets<2>(g, i, o);
        y[i] = cmp_op<OP, T>(a[o[0]], b[o[1]]);
    }
}

template <typename T, typename E> __global__ void k_pow(bc_geom g, const T *a, const E *b, T *y, int64_t n) {
    GRID_STRIDE(i, n) {
        int64_t o[2];
        bc_offsets<2>(g, i, o);
        if (std::is_same<T, float>::value) y[i] = (T)powf((float)a[o[0]], (float)b[o[1]]);
        else y[i] = (T)pow((double)a[o[0]], (double)b[o[1]]);
    }
}

/* Element size agnostic: Where picks by a bool condition, Expand copies with broadcasting. */
template <typename T> __global__ void k_where(bc_geom g, const uint8_t *cnd, const T *a, const T *b, T *y, int64_t n) {
    GRID_STRIDE(i, n) {
        int64_t o[3];
        bc_offsets<3>(g, i, o);
        y[i] = cnd[o[0]] ? a[o[1]] : b[o[2]];
    }
}
template <typename T> __global__ void k_bcast_copy(bc_geom g, const T *a, T *y, int64_t n) {
    GRID_STRIDE(i, n) {
        int64_t o[1];
        bc_offsets<1>(g, i, o);
        y[i] = a[o[0]];
    }
}

static sc_status geom_make(const cu_call *c, const sc_desc *out, const sc_desc *const *in, int n_in, bc_geom *g) {
    cpu_bcast b;
    if (!cpu_bcast_init(&b, out, in, n_in)) return cu_errorf(c, "inputs do not broadcast to the output shape");
    g->rank = b.rank;
    for (int d = 0; d < b.rank; d++) {
        g->dims[d] = b.dims[d];
        for (int k = 0; k < n_in; k++) g->st[k][d] = b.strides[k][d];
    }
    return SC_OK;
}

#define DISPATCH_NUM(t, CASE)                                                                              \
    switch (t) {                                                                                           \
    case SC_F32: { typedef float T; CASE; break; }                                                         \
    case SC_F64: { typedef double T; CASE; break; }                                                        \
    case SC_I32: { typedef int32_t T; CASE; break; }                                                       \
    case SC_I64: { typedef int64_t T; CASE; break; }                                                       \
    case SC_I8: { typedef int8_t T; CASE; break; }                                                         \
    case SC_U8: { typedef uint8_t T; CASE; break; }                                                        \
    default: return cu_errorf(c, "dtype %s not supported", sc_dtype_name(t));                              \
    }

/* out = in[k0] op in[k1], for the binary and the folded variadic forms. */
template <int OP> static sc_status binary_pair(const cu_call *c, const sc_tensor *a, const sc_tensor *b, sc_tensor *y) {
    sc_dtype t = a->desc.dtype;
    if (b->desc.dtype != t) return cu_errorf(c, "input dtypes differ (%s and %s)", sc_dtype_name(t), sc_dtype_name(b->desc.dtype));
    const sc_desc *ins[2] = {&a->desc, &b->desc};
    bc_geom g;
    SC_TRY(geom_make(c, &y->desc, ins, 2, &g));
    int64_t n = sc_desc_numel(&y->desc);
    cudaStream_t s = c->ctx->stream;
    DISPATCH_NUM(t, (k_binary<OP, T><<<cu_grid(n), CU_BLOCK, 0, s>>>(g, (const T *)a->data, (const T *)b->data, (T *)y->data, n)));
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

template <int OP> static sc_status compare_run(const cu_call *c, bool bool_only) {
    const sc_tensor *a = &c->in[0], *b = &c->in[1];
    sc_dtype t = a->desc.dtype;
    if (b->desc.dtype != t) return cu_errorf(c, "input dtypes differ (%s and %s)", sc_dtype_name(t), sc_dtype_name(b->desc.dtype));
    if (bool_only && t != SC_BOOL) return cu_errorf(c, "dtype %s not supported (bool)", sc_dtype_name(t));
    const sc_desc *ins[2] = {&a->desc, &b->desc};
    bc_geom g;
    SC_TRY(geom_make(c, &c->out[0].desc, ins, 2, &g));
    int64_t n = sc_desc_numel(&c->out[0].desc);
    cudaStream_t s = c->ctx->stream;
    uint8_t *y = (uint8_t *)c->out[0].data;
    if (t == SC_BOOL) {
        k_compare<OP, uint8_t><<<cu_grid(n), CU_BLOCK, 0, s>>>(g, (const uint8_t *)a->data, (const uint8_t *)b->data, y, n);
    } else {
        DISPATCH_NUM(t, (k_compare<OP, T><<<cu_grid(n), CU_BLOCK, 0, s>>>(g, (const T *)a->data, (const T *)b->data, y, n)));
    }
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

/* Max / Min over 1..n inputs: fold left into the output (element-wise, so reading and writing the
 * same output element in one thread is safe). */
template <int OP> static sc_status variadic_run(const cu_call *c) {
    if (c->n_in == 1) {
        if (sc_desc_same_shape(&c->in[0].desc, &c->out[0].desc)) return cu_copy_input(c);
        if (!sc_desc_same_shape(&c->in[0].desc, &c->out[0].desc)) {
            const sc_desc *ins[1] = {&c->in[0].desc};
            bc_geom g;
            SC_TRY(geom_make(c, &c->out[0].desc, ins, 1, &g));
            int64_t n = sc_desc_numel(&c->out[0].desc);
            sc_dtype t = c->in[0].desc.dtype;
            DISPATCH_NUM(t, (k_bcast_copy<T><<<cu_grid(n), CU_BLOCK, 0, c->ctx->stream>>>(g, (const T *)c->in[0].data, (T *)c->out[0].data, n)));
            CU_LAUNCH_CHECK(c);
        }
        return SC_OK;
    }
    SC_TRY(binary_pair<OP>(c, &c->in[0], &c->in[1], &c->out[0]));
    for (int k = 2; k < c->n_in; k++) SC_TRY(binary_pair<OP>(c, &c->out[0], &c->in[k], &c->out[0]));
    return SC_OK;
}

template <int OP, typename T> __global__ void k_act_grad(const T *dy, const T *x, T *dx, int64_t n) {
    GRID_STRIDE(i, n) {
        T v = x[i], g;
        if (OP == 0) g = v > (T)0 ? dy[i] : (T)0; /* ReluGrad: x is Y */
        else if (OP == 1) {                      /* exact Gelu: Phi(x) + x phi(x) */
            T cdf = (T)0.5 * ((T)1 + erf(v * (T)0.70710678118654752440));
            T pdf = exp((T)-0.5 * v * v) * (T)0.39894228040143267794;
            g = dy[i] * (cdf + v * pdf);
        } else { /* tanh Gelu */
            T k = (T)0.79788456080286535588, u = k * (v + (T)0.044715 * v * v * v), t = tanh(u);
            g = dy[i] * ((T)0.5 * ((T)1 + t) + (T)0.5 * v * ((T)1 - t * t) * k * ((T)1 + (T)3 * (T)0.044715 * v * v));
        }
        dx[i] = g;
    }
}

template <int OP> static sc_status act_grad(const cu_call *c) {
    sc_dtype t = c->in[1].desc.dtype;
    int64_t n = sc_desc_numel(&c->in[1].desc);
    if (c->in[0].desc.dtype != t || sc_desc_numel(&c->in[0].desc) != n) return cu_errorf(c, "dY must match the second input");
    cudaStream_t s = c->ctx->stream;
    switch (t) {
    case SC_F32: k_act_grad<OP, float><<<cu_grid(n), CU_BLOCK, 0, s>>>((const float *)c->in[0].data, (const float *)c->in[1].data, (float *)c->out[0].data, n); break;
    case SC_F64: k_act_grad<OP, double><<<cu_grid(n), CU_BLOCK, 0, s>>>((const double *)c->in[0].data, (const double *)c->in[1].data, (double *)c->out[0].data, n); break;
    default: return cu_errorf(c, "dtype %s not supported", sc_dtype_name(t));
    }
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

/* ---- Cast and fill ---- */

template <typename D, typename S> __global__ void k_cast(D *d, const S *s, int64_t n) {
    GRID_STRIDE(i, n) {
        d[i] = (D)s[i];
    }
}
template <typename S> __global__ void k_cast_bool(uint8_t *d, const S *s, int64_t n) {
    GRID_STRIDE(i, n) d[i] = s[i] != (S)0;
}
template <typename T> __global__ void k_fill(T *d, T v, int64_t n) {
    GRID_STRIDE(i, n) d[i] = v;
}

#define DISPATCH_CAST_SRC(st, CASE)                                                                        \
    switch (st) {                                                                                          \
    case SC_F32: { typedef float S; CASE; break; }                                                         \
    case SC_F64: { typedef double S; CASE; break; }                                                        \
    case SC_I32: { typedef int32_t S; CASE; break; }                                                       \
    case SC_I64: { typedef int64_t S; CASE; break; }                                                       \
    case SC_I8: { typedef int8_t S; CASE; break; }                                                         \
    case SC_I16: { typedef int16_t S; CASE; break; }                                                       \
    case SC_U8: case SC_BOOL: { typedef uint8_t S; CASE; break; }                                          \
    case SC_U16: { typedef uint16_t S; CASE; break; }                                                      \
    case SC_U32: { typedef uint32_t S; CASE; break; }                                                      \
    case SC_U64: { typedef uint64_t S; CASE; break; }                                                      \
    default: return cu_errorf(NULL, "cast from %s not supported", sc_dtype_name(st));                      \
    }

extern "C" sc_status cu_cast_launch(cudaStream_t s, void *dst, sc_dtype dt, const void *src, sc_dtype st, int64_t n) {
    const cu_call *c = NULL;
    if (n == 0) return SC_OK;
    if (sc_dtype_is_half(dt) || sc_dtype_is_half(st)) return cu_half_cast_launch(s, dst, dt, src, st, n);
    if (dt == SC_BOOL) {
        DISPATCH_CAST_SRC(st, (k_cast_bool<S><<<cu_grid(n), CU_BLOCK, 0, s>>>((uint8_t *)dst, (const S *)src, n)));
    } else {
        switch (dt) {
#define DST_CASE(CODE, D)                                                                                  \
    case CODE: DISPATCH_CAST_SRC(st, (k_cast<D, S><<<cu_grid(n), CU_BLOCK, 0, s>>>((D *)dst, (const S *)src, n))); break;
            DST_CASE(SC_F32, float)
            DST_CASE(SC_F64, double)
            DST_CASE(SC_I32, int32_t)
            DST_CASE(SC_I64, int64_t)
            DST_CASE(SC_I8, int8_t)
            DST_CASE(SC_I16, int16_t)
            DST_CASE(SC_U8, uint8_t)
            DST_CASE(SC_U16, uint16_t)
            DST_CASE(SC_U32, uint32_t)
            DST_CASE(SC_U64, uint64_t)
#undef DST_CASE
        default: return cu_errorf(c, "cast to %s not supported", sc_dtype_name(dt));
        }
    }
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

extern "C" sc_status cu_fill_launch(cudaStream_t s, void *dst, sc_dtype t, double v, int64_t n) {
    const cu_call *c = NULL;
    if (n == 0) return SC_OK;
    switch (t) {
    case SC_F32: k_fill<float><<<cu_grid(n), CU_BLOCK, 0, s>>>((float *)dst, (float)v, n); break;
    case SC_F64: k_fill<double><<<cu_grid(n), CU_BLOCK, 0, s>>>((double *)dst, v, n); break;
    case SC_I32: k_fill<int32_t><<<cu_grid(n), CU_BLOCK, 0, s>>>((int32_t *)dst, (int32_t)v, n); break;
    case SC_I64: k_fill<int64_t><<<cu_grid(n), CU_BLOCK, 0, s>>>((int64_t *)dst, (int64_t)v, n); break;
    case SC_I8: k_fill<int8_t><<<cu_grid(n), CU_BLOCK, 0, s>>>((int8_t *)dst, (int8_t)v, n); break;
    case SC_U8: k_fill<uint8_t><<<cu_grid(n), CU_BLOCK, 0, s>>>((uint8_t *)dst, (uint8_t)v, n); break;
    case SC_BOOL: k_fill<uint8_t><<<cu_grid(n), CU_BLOCK, 0, s>>>((uint8_t *)dst, (uint8_t)(v != 0), n); break;
    case SC_F16: k_fill<uint16_t><<<cu_grid(n), CU_BLOCK, 0, s>>>((uint16_t *)dst, sc_f64_to_f16(v), n); break;
    case SC_BF16: k_fill<uint16_t><<<cu_grid(n), CU_BLOCK, 0, s>>>((uint16_t *)dst, sc_f32_to_bf16((float)v), n); break;
    default: return cu_errorf(c, "fill of %s not supported", sc_dtype_name(t));
    }
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

extern "C" {

sc_status cu_add(const cu_call *c) { return binary_pair<B_ADD>(c, &c->in[0], &c->in[1], &c->out[0]); }
sc_status cu_sub(const cu_call *c) { return binary_pair<B_SUB>(c, &c->in[0], &c->in[1], &c->out[0]); }
sc_status cu_mul(const cu_call *c) { return binary_pair<B_MUL>(c, &c->in[0], &c->in[1], &c->out[0]); }
sc_status cu_div(const cu_call *c) { return binary_pair<B_DIV>(c, &c->in[0], &c->in[1], &c->out[0]); }
sc_status cu_mod(const cu_call *c) {
    sc_dtype t = c->in[0].desc.dtype;
    bool f = c->node->attrs->mod.fmod;
    if ((t == SC_F32 || t == SC_F64) && !f) return cu_errorf(c, "fmod must be 1 for floating-point inputs (%s)", sc_dtype_name(t));
    return f ? binary_pair<B_FMOD>(c, &c->in[0], &c->in[1], &c->out[0]) : binary_pair<B_PYMOD>(c, &c->in[0], &c->in[1], &c->out[0]);
}
sc_status cu_max(const cu_call *c) { return variadic_run<B_MAX>(c); }
sc_status cu_min(const cu_call *c) { return variadic_run<B_MIN>(c); }
sc_status cu_equal(const cu_call *c) { return compare_run<B_EQ>(c, false); }
sc_status cu_less(const cu_call *c) { return compare_run<B_LT>(c, false); }
sc_status cu_greater(const cu_call *c) { return compare_run<B_GT>(c, false); }
sc_status cu_and(const cu_call *c) { return compare_run<B_AND>(c, true); }
sc_status cu_or(const cu_call *c) { return compare_run<B_OR>(c, true); }
sc_status cu_relu_grad(const cu_call *c) { return act_grad<0>(c); }
sc_status cu_gelu_grad(const cu_call *c) { return c->node->attrs->gelu.tanh_approx ? act_grad<2>(c) : act_grad<1>(c); }

sc_status cu_pow(const cu_call *c) {
    const sc_tensor *a = &c->in[0], *b = &c->in[1];
    const sc_desc *ins[2] = {&a->desc, &b->desc};
    bc_geom g;
    SC_TRY(geom_make(c, &c->out[0].desc, ins, 2, &g));
    int64_t n = sc_desc_numel(&c->out[0].desc);
    cudaStream_t s = c->ctx->stream;
    sc_dtype bt = a->desc.dtype, et = b->desc.dtype;
#define POW_E(T)                                                                                           \
    switch (et) {                                                                                          \
    case SC_F32: k_pow<T, float><<<cu_grid(n), CU_BLOCK, 0, s>>>(g, (const T *)a->data, (const float *)b->data, (T *)c->out[0].data, n); break; \
    case SC_F64: k_pow<T, double><<<cu_grid(n), CU_BLOCK, 0, s>>>(g, (const T *)a->data, (const double *)b->data, (T *)c->out[0].data, n); break; \
    case SC_I32: k_pow<T, int32_t><<<cu_grid(n), CU_BLOCK, 0, s>>>(g, (const T *)a->data, (const int32_t *)b->data, (T *)c->out[0].data, n); break; \
    case SC_I64: k_pow<T, int64_t><<<cu_grid(n), CU_BLOCK, 0, s>>>(g, (const T *)a->data, (const int64_t *)b->data, (T *)c->out[0].data, n); break; \
    default: return cu_errorf(c, "exponent dtype %s not supported", sc_dtype_name(et));                   \
    }
    switch (bt) {
    case SC_F32: POW_E(float) break;
    case SC_F64: POW_E(double) break;
    case SC_I32: POW_E(int32_t) break;
    case SC_I64: POW_E(int64_t) break;
    default: return cu_errorf(c, "base dtype %s not supported", sc_dtype_name(bt));
    }
#undef POW_E
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

/* Copies by element size, so every dtype works. */
static sc_status by_size(const cu_call *c, size_t es, int which, const bc_geom *g, int64_t n) {
    cudaStream_t s = c->ctx->stream;
    const void *cnd = c->in[0].data, *a = c->in[which == 0 ? 1 : 0].data, *b = c->in[2 < c->n_in ? 2 : 0].data;
    void *y = c->out[0].data;
    CU_BY_SIZE(c, es, ({
        if (which == 0) k_where<T><<<cu_grid(n), CU_BLOCK, 0, s>>>(*g, (const uint8_t *)cnd, (const T *)a, (const T *)b, (T *)y, n);
        else k_bcast_copy<T><<<cu_grid(n), CU_BLOCK, 0, s>>>(*g, (const T *)a, (T *)y, n);
    }));
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

sc_status cu_where(const cu_call *c) {
    if (c->in[0].desc.dtype != SC_BOOL) return cu_errorf(c, "condition must be bool, got %s", sc_dtype_name(c->in[0].desc.dtype));
    if (c->in[1].desc.dtype != c->in[2].desc.dtype) return cu_errorf(c, "X and Y dtypes differ");
    const sc_desc *ins[3] = {&c->in[0].desc, &c->in[1].desc, &c->in[2].desc};
    bc_geom g;
    SC_TRY(geom_make(c, &c->out[0].desc, ins, 3, &g));
    return by_size(c, sc_dtype_size(c->in[1].desc.dtype), 0, &g, sc_desc_numel(&c->out[0].desc));
}

sc_status cu_broadcast_input(const cu_call *c) {
    const sc_desc *ins[1] = {&c->in[0].desc};
    bc_geom g;
    SC_TRY(geom_make(c, &c->out[0].desc, ins, 1, &g));
    return by_size(c, sc_dtype_size(c->in[0].desc.dtype), 1, &g, sc_desc_numel(&c->out[0].desc));
}

sc_status cu_cast(const cu_call *c) {
    sc_dtype st = c->in[0].desc.dtype, dt = c->out[0].desc.dtype;
    if (st == dt) return cu_copy_input(c);
    sc_status e = cu_cast_launch(c->ctx->stream, c->out[0].data, dt, c->in[0].data, st, sc_desc_numel(&c->in[0].desc));
    return e ? sc_status_prefix(e, "node '%s' (Cast): ", c->node->name) : SC_OK;
}

} /* extern "C" */
