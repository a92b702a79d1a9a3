/* Unary element-wise kernels (ONNX Relu, LeakyRelu, Sigmoid, Tanh, Erf, Gelu, HardSigmoid, HardSwish, Clip, Sqrt,
 * Reciprocal, Neg, Exp, Log, Not) and Dropout at inference.
 *
 * Float math runs in f32 (libm's expf/tanhf/erff: exact to an ulp or two) and f64 (reference
 * precision for gradient checks). Loops are OpenMP `parallel for simd`, threaded only above
 * CPU_PAR_MIN elements so shape-sized tensors stay cheap.
 *   Gelu (opset 20): exact 0.5 x (1 + erf(x / sqrt 2)), f32 through cpu_erf_f32 (cpu_math.h,
 *   absolute erf error below 1.5e-7) so the loop vectorises; approximate="tanh":
 *   0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
 *   Clip (opset 13): y = min(max(x, lo), hi) with absent bounds ignored; lo > hi gives hi, NaN
 *   passes through.
 */
#include <math.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_math.h"
#include "backends/cpu/cpu_rng.h"
#include "core/half.h"

/* y[i] = EXPR(v) with v = x[i]; x, y, n come from the call. */
#define UNARY_LOOP(T, EXPR)                                                                        \
    do {                                                                                           \
        const T *x_ = c->in[0].data;                                                               \
        T *y_ = c->out[0].data;                                                                    \
        int64_t n_ = sc_desc_numel(&c->in[0].desc);                                                \
        CPU_SIMD_LOOP(i, n_, T v = x_[i]; y_[i] = (T)(EXPR));                                      \
    } while (0)

static sc_status dtype_error(const sc_kernel_call *c) {
    return cpu_errorf(c, "dtype %s not supported", sc_dtype_name(c->in[0].desc.dtype));
}

/* A float-only kernel: EF for f32, ED for f64. */
#define FLOAT_UNARY(NAME, EF, ED)                                                                  \
    sc_status NAME(const sc_kernel_call *c) {                                                      \
        switch (c->in[0].desc.dtype) {                                                            \
        case SC_F32: UNARY_LOOP(float, EF); return SC_OK;                                          \
        case SC_F64: UNARY_LOOP(double, ED); return SC_OK;                                         \
        default: return dtype_error(c);                                                            \
        }                                                                                          \
    }

/* f32 Sigmoid and Erf through cpu_math.h, which vectorise where expf / erff calls do not (Sigmoid was
 * 41% of EfficientNet-B0, Erf 18% of ConvNeXt). */
FLOAT_UNARY(cpu_sigmoid, 1.0f / (1.0f + cpu_exp_f32(-v)), 1.0 / (1.0 + exp(-v)))
FLOAT_UNARY(cpu_tanh, tanhf(v), tanh(v))
FLOAT_UNARY(cpu_erf, cpu_erf_rel_f32(v), erf(v))
FLOAT_UNARY(cpu_sqrt, sqrtf(v), sqrt(v))
FLOAT_UNARY(cpu_reciprocal, 1.0f / v, 1.0 / v)
FLOAT_UNARY(cpu_exp, expf(v), exp(v))
FLOAT_UNARY(cpu_log, logf(v), log(v))

/* Relu passes NaN through (as PyTorch and onnxruntime do: a NaN must reach the loss, where training
 * looks for it) and maps -0 to +0. */
sc_status cpu_relu(const sc_kernel_call *c) {
    switch (c->in[0].desc.dtype) {
    case SC_F32: UNARY_LOOP(float, (v < 0.0f ? 0.0f : v) + 0.0f); return SC_OK; /* -0 + 0 = +0 */
    case SC_F64: UNARY_LOOP(double, (v < 0.0 ? 0.0 : v) + 0.0); return SC_OK;
    case SC_I8: UNARY_LOOP(int8_t, v > 0 ? v : 0); return SC_OK;
    case SC_I16: UNARY_LOOP(int16_t, v > 0 ? v : 0); return SC_OK;
    case SC_I32: UNARY_LOOP(int32_t, v > 0 ? v : 0); return SC_OK;
    case SC_I64: UNARY_LOOP(int64_t, v > 0 ? v : 0); return SC_OK;
    default: return dtype_error(c);
    }
}

sc_status cpu_leaky_relu(const sc_kernel_call *c) {
    float a = c->node->attrs->leaky_relu.alpha;
    double ad = a;
    switch (c->in[0].desc.dtype) {
    case SC_F32: UNARY_LOOP(float, v >= 0.0f ? v : a * v); return SC_OK;
    case SC_F64: UNARY_LOOP(double, v >= 0.0 ? v : ad * v); return SC_OK;
    default: return dtype_error(c);
    }
}

sc_status cpu_gelu(const sc_kernel_call *c) {
    const double k = 0.7978845608028654; /* sqrt(2 / pi) */
    const double r = 0.7071067811865476; /* 1 / sqrt(2) */
    const float kf = (float)k, rf = (float)r;
    bool t = c->node->attrs->gelu.tanh_approx;
    switch (c->in[0].desc.dtype) {
    case SC_F32:
        /* tanh form as x * sigmoid(2u): (1 + tanh u) / 2 = 1 / (1 + e^(-2u)), no cancellation near
         * tanh u = -1, and cpu_exp_f32 vectorises where tanhf does not (1.2 ms -> 0.1 ms per GPT-2 MLP). */
        if (t) UNARY_LOOP(float, v / (1.0f + cpu_exp_f32(-2.0f * kf * (v + 0.044715f * v * v * v))));
        else UNARY_LOOP(float, 0.5f * v * (1.0f + cpu_erf_f32(v * rf))); /* vectorises; error below 1e-7 * |v| */
        return SC_OK;
    case SC_F64:
        if (t) UNARY_LOOP(double, 0.5 * v * (1.0 + tanh(k * (v + 0.044715 * v * v * v))));
        else UNARY_LOOP(double, 0.5 * v * (1.0 + erf(v * r)));
        return SC_OK;
    default: return dtype_error(c);
    }
}

/* max(0, min(1, t)) as compares, which vectorise to branch-free max/min where fmaxf/fminf (whose
 * NaN rules differ from the instructions') stayed scalar: HardSwish took 23 us per MobileNetV3 call
 * for about 13k floats. A NaN compares false and passes through, as in PyTorch. */
#define UNIT_CLAMP(t) (((t) > 1 ? 1 : (t)) < 0 ? 0 : ((t) > 1 ? 1 : (t)))

/* HardSigmoid: y = max(0, min(1, alpha x + beta)). */
sc_status cpu_hard_sigmoid(const sc_kernel_call *c) {
    float a = c->node->attrs->hard_sigmoid.alpha, b = c->node->attrs->hard_sigmoid.beta;
    double ad = a, bd = b;
    switch (c->in[0].desc.dtype) {
    case SC_F32: UNARY_LOOP(float, UNIT_CLAMP(a * v + b)); return SC_OK;
    case SC_F64: UNARY_LOOP(double, UNIT_CLAMP(ad * v + bd)); return SC_OK;
    default: return dtype_error(c);
    }
}

/* HardSwish: y = x max(0, min(1, x / 6 + 1 / 2)) (ONNX: alpha 1/6, beta 0.5). */
sc_status cpu_hard_swish(const sc_kernel_call *c) {
    const float a = 1.0f / 6.0f;
    switch (c->in[0].desc.dtype) {
    case SC_F32: UNARY_LOOP(float, v * (UNIT_CLAMP(a * v + 0.5f))); return SC_OK;
    case SC_F64: UNARY_LOOP(double, v * (UNIT_CLAMP(v / 6.0 + 0.5))); return SC_OK;
    default: return dtype_error(c);
    }
}

sc_status cpu_neg(const sc_kernel_call *c) {
    switch (c->in[0].desc.dtype) {
    case SC_F32: UNARY_LOOP(float, -v); return SC_OK;
    case SC_F64: UNARY_LOOP(double, -v); return SC_OK;
    case SC_I8: UNARY_LOOP(int8_t, -v); return SC_OK;
    case SC_I16: UNARY_LOOP(int16_t, -v); return SC_OK;
    /* Through unsigned arithmetic so that -INT_MIN wraps as onnxruntime's does. */
    case SC_I32: UNARY_LOOP(int32_t, 0u - (uint32_t)v); return SC_OK;
    case SC_I64: UNARY_LOOP(int64_t, 0 - (uint64_t)v); return SC_OK;
    default: return dtype_error(c);
    }
}

sc_status cpu_not(const sc_kernel_call *c) {
    if (c->in[0].desc.dtype != SC_BOOL) return dtype_error(c);
    UNARY_LOOP(uint8_t, v == 0);
    return SC_OK;
}

/* Clip's bounds are optional scalar inputs of the data's type. */
#define CLIP_CASE(code, T, tn, ...)                                                                \
    case code: {                                                                                   \
        T lo = has_lo ? *(const T *)c->in[1].data : (T)0;                                          \
        T hi = has_hi ? *(const T *)c->in[2].data : (T)0;                                          \
        UNARY_LOOP(T, (has_hi && (has_lo && v < lo ? lo : v) > hi) ? hi : (has_lo && v < lo ? lo : v)); \
        return SC_OK;                                                                              \
    }
/* Floats: absent bounds are -inf / +inf, so the loop is two selects with no flags in it, which the
 * compiler turns into branch-free vector max/min (ReLU6 on random-sign data mispredicted a branch
 * per element: 28 us per MobileNet call for 14k floats). NaN compares false and passes through. */
#define CLIP_FLOAT_CASE(code, T, tn, ...)                                                          \
    case code: {                                                                                   \
        const T lo = has_lo ? *(const T *)c->in[1].data : (T)-INFINITY;                            \
        const T hi = has_hi ? *(const T *)c->in[2].data : (T)INFINITY;                             \
        UNARY_LOOP(T, (v < lo ? lo : v) > hi ? hi : (v < lo ? lo : v));                           \
        return SC_OK;                                                                              \
    }

/* f16/bf16: bounds compared as floats; the output is the chosen value's bits (NaN passes through). */
#define HALF_CLIP_CASE(code, WIDEN)                                                                \
    case code: {                                                                                   \
        uint16_t lo = has_lo ? *(const uint16_t *)c->in[1].data : 0;                               \
        uint16_t hi = has_hi ? *(const uint16_t *)c->in[2].data : 0;                               \
        float flo = WIDEN(lo), fhi = WIDEN(hi);                                                    \
        UNARY_LOOP(uint16_t, (has_hi && (has_lo && WIDEN(v) < flo ? flo : WIDEN(v)) > fhi) ? hi    \
                                                                  : (has_lo && WIDEN(v) < flo ? lo : v)); \
        return SC_OK;                                                                              \
    }

sc_status cpu_clip(const sc_kernel_call *c) {
    bool has_lo = c->n_in > 1 && c->in[1].data, has_hi = c->n_in > 2 && c->in[2].data;
    for (int k = 1; k <= 2; k++) {
        if (k >= c->n_in || !c->in[k].data) continue;
        if (c->in[k].desc.dtype != c->in[0].desc.dtype || sc_desc_numel(&c->in[k].desc) != 1)
            return cpu_errorf(c, "%s must be a scalar of the input's dtype %s", k == 1 ? "min" : "max",
                              sc_dtype_name(c->in[0].desc.dtype));
    }
    switch (c->in[0].desc.dtype) {
        CPU_FLOAT_TYPES(CLIP_FLOAT_CASE, 0)
        CPU_INT_TYPES(CLIP_CASE, 0)
        HALF_CLIP_CASE(SC_F16, sc_f16_to_f32)
        HALF_CLIP_CASE(SC_BF16, sc_bf16_to_f32)
    default: return dtype_error(c);
    }
}

/* Dropout (opset 13) at inference is the identity; the optional mask output is all true. Training
 * mode with a positive ratio would need a random mask, which inference does not do. */
sc_status cpu_dropout(const sc_kernel_call *c) {
    double ratio = 0.5;
    bool training = false;
    if (c->n_in > 1 && c->in[1].data && !cpu_convert(&ratio, SC_F64, c->in[1].data, c->in[1].desc.dtype, 1))
        return cpu_errorf(c, "ratio dtype %s not supported", sc_dtype_name(c->in[1].desc.dtype));
    if (c->n_in > 2 && c->in[2].data) training = *(const uint8_t *)c->in[2].data != 0;
    if (training && ratio > 0) return cpu_dropout_train(c); /* seeded mask: cpu_elementwise_dropout.c */
    cpu_copy(c->out[0].data, c->in[0].data, sc_desc_bytes(&c->in[0].desc));
    if (c->n_out > 1 && c->out[1].data) {
        uint8_t *m = c->out[1].data;
        int64_t n = sc_desc_numel(&c->out[1].desc);
        for (int64_t i = 0; i < n; i++) m[i] = 1;
    }
    return SC_OK;
}
