/* Fused gradient kernels of activations (graph/ops_train.def); f32 fast path and f64 reference.
 * Math, with dY the incoming gradient:
 *   ReluGrad (dY, Y):        dX = Y > 0 ? dY : 0                     (PyTorch: Relu'(0) = 0)
 *   GeluGrad (dY, X):        exact  d/dx [x Phi(x)] = Phi(x) + x phi(x),
 *                                   Phi(x) = (1 + erf(x / sqrt 2)) / 2, phi(x) = exp(-x^2 / 2) / sqrt(2 pi);
 *                            tanh   y = x (1 + tanh u) / 2, u = sqrt(2/pi) (x + 0.044715 x^3):
 *                                   dy/dx = (1 + t) / 2 + x (1 - t^2) / 2 * sqrt(2/pi) (1 + 3 * 0.044715 x^2)
 * The f32 Gelu path uses polynomial exp / erf so `omp simd` vectorises (glibc's expf, erff do not):
 * exp as in cpu_nn_norm.c (relative error ~2e-7), erf by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_math.h"

sc_status cpu_check_grad_pair(const sc_kernel_call *call) {
    const sc_desc *a = &call->in[0].desc, *b = &call->in[1].desc;
    if (a->dtype != b->dtype || !sc_desc_same_shape(a, b) || a->rank != b->rank)
        return cpu_errorf(call, "dY and the second input must have the same dtype and shape");
    if (a->dtype != SC_F32 && a->dtype != SC_F64) return cpu_errorf(call, "dtype %s not supported", sc_dtype_name(a->dtype));
    return SC_OK;
}

/* ---- ReluGrad, GeluGrad ---- */

#define RELU_GRAD_IMPL(T, NAME)                                                                          \
    static void NAME(const T *dy, const T *y, T *dx, int64_t n) {                                        \
        CPU_SIMD_LOOP(i, n, dx[i] = y[i] > 0 ? dy[i] : (T)0);                                            \
    }
RELU_GRAD_IMPL(float, relu_grad_f32)
RELU_GRAD_IMPL(double, relu_grad_f64)

sc_status cpu_relu_grad(const sc_kernel_call *call) {
    SC_TRY(cpu_check_grad_pair(call));
    int64_t n = sc_desc_numel(&call->in[0].desc);
    if (call->in[0].desc.dtype == SC_F32) relu_grad_f32(call->in[0].data, call->in[1].data, call->out[0].data, n);
    else relu_grad_f64(call->in[0].data, call->in[1].data, call->out[0].data, n);
    return SC_OK;
}

#define GELU_K 0.7978845608028654 /* sqrt(2 / pi) */
#define GELU_C 0.044715

static void gelu_grad_f32(const float *dy, const float *x, float *dx, int64_t n, bool tanh_approx) {
    if (tanh_approx) {
        CPU_SIMD_LOOP(i, n, float v = x[i]; float u = (float)GELU_K * (v + (float)GELU_C * v * v * v);
                      float t = 1.0f - 2.0f / (cpu_exp_f32(2.0f * u) + 1.0f);
                      float d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * (float)GELU_K * (1.0f + 3.0f * (float)GELU_C * v * v);
                      dx[i] = dy[i] * d);
    } else {
        CPU_SIMD_LOOP(i, n, float v = x[i];
                      float d = 0.5f * (1.0f + cpu_erf_f32(v * 0.70710678f)) + v * 0.39894228f * cpu_exp_f32(-0.5f * v * v);
                      dx[i] = dy[i] * d);
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
    SC_TRY(cpu_check_grad_pair(call));
    int64_t n = sc_desc_numel(&call->in[0].desc);
    bool ta = call->node->attrs->gelu.tanh_approx;
    if (call->in[0].desc.dtype == SC_F32) gelu_grad_f32(call->in[0].data, call->in[1].data, call->out[0].data, n, ta);
    else gelu_grad_f64(call->in[0].data, call->in[1].data, call->out[0].data, n, ta);
    return SC_OK;
}
