/* Fused gradient kernels of activations and softmax (graph/ops_train.def); f32 fast path and f64
 * reference. Math, with dY the incoming gradient:
 *   ReluGrad (dY, Y):        dX = Y > 0 ? dY : 0                     (PyTorch: Relu'(0) = 0)
 *   GeluGrad (dY, X):        exact  d/dx [x Phi(x)] = Phi(x) + x phi(x),
 *                                   Phi(x) = (1 + erf(x / sqrt 2)) / 2, phi(x) = exp(-x^2 / 2) / sqrt(2 pi);
 *                            tanh   y = x (1 + tanh u) / 2, u = sqrt(2/pi) (x + 0.044715 x^3):
 *                                   dy/dx = (1 + t) / 2 + x (1 - t^2) / 2 * sqrt(2/pi) (1 + 3 * 0.044715 x^2)
 *   SoftmaxGrad (dY, Y):     dX = Y * (dY - sum_axis(dY * Y))
 *   LogSoftmaxGrad (dY, Y):  dX = dY - exp(Y) * sum_axis(dY)
 * Softmax sums run along `axis`, or for legacy_2d (opset < 13) over the flattened dims [axis:],
 * exactly the groups the forward kernel normalised (cpu_norm.c).
 * The f32 Gelu path uses polynomial exp / erf so `omp simd` vectorises (glibc's expf, erff do not):
 * exp as in cpu_norm.c (relative error ~2e-7), erf by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_math.h"



static sc_status check_pair(const sc_kernel_call *call) {
    const sc_desc *a = &call->in[0].desc, *b = &call->in[1].desc;
    if (a->dtype != b->dtype || !sc_desc_same_shape(a, b) || a->rank != b->rank)
        return cpu_errorf(call, "dY and the second input must have the same dtype and shape");
    if (a->dtype != SC_F32 && a->dtype != SC_F64) return cpu_errorf(call, "dtype %s not supported", sc_dtype_name(a->dtype));
    return SC_OK;
}

/* ---- ReluGrad, GeluGrad ---- */

#define RELU_GRAD_IMPL(T, NAME)                                                                          \
    static void NAME(const T *dy, const T *y, T *dx, int64_t n) {                                        \
        int par = n >= CPU_PAR_MIN;                                                                      \
        _Pragma("omp parallel for simd if(par)") for (int64_t i = 0; i < n; i++) dx[i] = y[i] > 0 ? dy[i] : (T)0; \
    }
RELU_GRAD_IMPL(float, relu_grad_f32)
RELU_GRAD_IMPL(double, relu_grad_f64)

sc_status cpu_relu_grad(const sc_kernel_call *call) {
    SC_TRY(check_pair(call));
    int64_t n = sc_desc_numel(&call->in[0].desc);
    if (call->in[0].desc.dtype == SC_F32) relu_grad_f32(call->in[0].data, call->in[1].data, call->out[0].data, n);
    else relu_grad_f64(call->in[0].data, call->in[1].data, call->out[0].data, n);
    return SC_OK;
}

#define GELU_K 0.7978845608028654 /* sqrt(2 / pi) */
#define GELU_C 0.044715

static void gelu_grad_f32(const float *dy, const float *x, float *dx, int64_t n, bool tanh_approx) {
    int par = n >= CPU_PAR_MIN;
    if (tanh_approx) {
#pragma omp parallel for simd if (par)
        for (int64_t i = 0; i < n; i++) {
            float v = x[i], u = (float)GELU_K * (v + (float)GELU_C * v * v * v);
            float t = 1.0f - 2.0f / (cpu_exp_f32(2.0f * u) + 1.0f);
            float d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * (float)GELU_K * (1.0f + 3.0f * (float)GELU_C * v * v);
            dx[i] = dy[i] * d;
        }
    } else {
#pragma omp parallel for simd if (par)
        for (int64_t i = 0; i < n; i++) {
            float v = x[i];
            float d = 0.5f * (1.0f + cpu_erf_f32(v * 0.70710678f)) + v * 0.39894228f * cpu_exp_f32(-0.5f * v * v);
            dx[i] = dy[i] * d;
        }
    }
}

static void gelu_grad_f64(const double *dy, const double *x, double *dx, int64_t n, bool tanh_approx) {
    int par = n >= CPU_PAR_MIN;
#pragma omp parallel for if (par)
    for (int64_t i = 0; i < n; i++) {
        double v = x[i], d;
        if (tanh_approx) {
            double t = tanh(GELU_K * (v + GELU_C * v * v * v));
            d = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * GELU_K * (1 + 3 * GELU_C * v * v);
        } else {
            d = 0.5 * (1 + erf(v / sqrt(2.0))) + v * exp(-0.5 * v * v) / sqrt(2 * M_PI);
        }
        dx[i] = dy[i] * d;
    }
}

sc_status cpu_gelu_grad(const sc_kernel_call *call) {
    SC_TRY(check_pair(call));
    int64_t n = sc_desc_numel(&call->in[0].desc);
    bool ta = call->node->attrs->gelu.tanh_approx;
    if (call->in[0].desc.dtype == SC_F32) gelu_grad_f32(call->in[0].data, call->in[1].data, call->out[0].data, n, ta);
    else gelu_grad_f64(call->in[0].data, call->in[1].data, call->out[0].data, n, ta);
    return SC_OK;
}

/* ---- SoftmaxGrad, LogSoftmaxGrad ---- */

/* The groups the forward normalised: outer x n x inner, sums over n (stride inner). */
static sc_status softmax_groups(const sc_kernel_call *call, int64_t *outer, int64_t *n, int64_t *inner) {
    const sc_axis_attrs *aa = &call->node->attrs->axis;
    const sc_desc *y = &call->in[1].desc;
    int rank = y->rank > 0 ? y->rank : 1;
    int64_t one = 1;
    const int64_t *dims = y->rank > 0 ? y->dims : &one;
    int axis = (int)(aa->axis < 0 ? aa->axis + rank : aa->axis);
    if (axis < 0 || axis >= rank) return cpu_errorf(call, "axis %lld out of range for rank %d", (long long)aa->axis, y->rank);
    *outer = *n = *inner = 1;
    for (int i = 0; i < axis; i++) *outer *= dims[i];
    if (aa->legacy_2d) {
        for (int i = axis; i < rank; i++) *n *= dims[i];
    } else {
        *n = dims[axis];
        for (int i = axis + 1; i < rank; i++) *inner *= dims[i];
    }
    return SC_OK;
}

/* One group of n values at stride st. log: LogSoftmaxGrad, else SoftmaxGrad. */
#define SOFTMAX_GRAD_ROW(T, NAME, EXP)                                                                   \
    static void NAME(const T *dy, const T *y, T *dx, int64_t n, int64_t st, bool take_log) {             \
        T s = 0;                                                                                         \
        if (st == 1) {                                                                                   \
            if (take_log) {                                                                              \
                _Pragma("omp simd reduction(+ : s)") for (int64_t i = 0; i < n; i++) s += dy[i];         \
                _Pragma("omp simd") for (int64_t i = 0; i < n; i++) dx[i] = dy[i] - EXP(y[i]) * s;       \
            } else {                                                                                     \
                _Pragma("omp simd reduction(+ : s)") for (int64_t i = 0; i < n; i++) s += dy[i] * y[i];  \
                _Pragma("omp simd") for (int64_t i = 0; i < n; i++) dx[i] = y[i] * (dy[i] - s);          \
            }                                                                                            \
            return;                                                                                      \
        }                                                                                                \
        for (int64_t i = 0; i < n; i++) s += take_log ? dy[i * st] : dy[i * st] * y[i * st];             \
        for (int64_t i = 0; i < n; i++)                                                                  \
            dx[i * st] = take_log ? dy[i * st] - EXP(y[i * st]) * s : y[i * st] * (dy[i * st] - s);      \
    }
SOFTMAX_GRAD_ROW(float, softmax_grad_row_f32, cpu_exp_f32)
SOFTMAX_GRAD_ROW(double, softmax_grad_row_f64, exp)

static sc_status softmax_grad_run(const sc_kernel_call *call, bool take_log) {
    SC_TRY(check_pair(call));
    int64_t outer, n, inner;
    SC_TRY(softmax_groups(call, &outer, &n, &inner));
    if (n == 0 || outer == 0 || inner == 0) return SC_OK;
    bool f32 = call->in[0].desc.dtype == SC_F32;
    int par = outer * n * inner >= CPU_PAR_MIN;
#pragma omp parallel for collapse(2) if (par)
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < inner; j++) {
            int64_t off = o * n * inner + j;
            if (f32)
                softmax_grad_row_f32((const float *)call->in[0].data + off, (const float *)call->in[1].data + off,
                                     (float *)call->out[0].data + off, n, inner, take_log);
            else
                softmax_grad_row_f64((const double *)call->in[0].data + off, (const double *)call->in[1].data + off,
                                     (double *)call->out[0].data + off, n, inner, take_log);
        }
    return SC_OK;
}

sc_status cpu_softmax_grad(const sc_kernel_call *call) { return softmax_grad_run(call, false); }
sc_status cpu_log_softmax_grad(const sc_kernel_call *call) { return softmax_grad_run(call, true); }
