/* Optimizer updates SGDUpdate and AdamWUpdate (graph/ops_train.def), f32 and f64, in place: out[0]
 * is W's storage, out[1] M's, out[2] V's (sc_op_inplace_input), so each element is read and written
 * once. The rules are PyTorch's (graph/attrs.h), with the same operation order in the element type,
 * so an f32 run follows torch.optim step for step:
 *   SGD (dampening 0):  g = grad * grad_scale + wd * w;  m = momentum * m + g;
 *                       d = nesterov ? g + momentum * m : m;  w = w - lr * d   (momentum 0: d = g)
 *   AdamW:  w = w * (1 - lr * wd);  m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g * g;
 *           w = w - (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 * Scalars that torch computes in Python (lr * wd, 1 - b1, the bias corrections) are computed in
 * double and rounded to the element type once, as torch does when it passes them to the tensor ops.
 * Inputs: lr f32 scalar, step i64 scalar (1-based), grad_scale f32 scalar (global-norm clipping
 * factor; omitted = 1). With f32 W, G may be bf16 or f16 (mixed precision, autodiff/optimizer.c):
 * each element is widened as it is read, which is exact, so the arithmetic is the f32 update's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/common/common.h"
#include "backends/cpu/cpu_kernels.h"
#include "core/half.h"

/* lr is a user's decimal (decimal_of); grad_scale is computed, so it is taken as it is. */
static sc_status read_f32_scalar(const sc_kernel_call *c, int i, const char *what, bool decimal, double *v) {
    if (c->in[i].desc.dtype != SC_F32 || sc_desc_numel(&c->in[i].desc) != 1)
        return cpu_errorf(c, "%s must be an f32 scalar", what);
    float f = *(const float *)c->in[i].data;
    *v = decimal ? sc_decimal_of(f) : (double)f;
    return SC_OK;
}

/* W, G and every present state share one float dtype and element count; G (input 1) may be bf16
 * or f16 with f32 W (sc_optim_tensors_match). */
static sc_status check_tensors(const sc_kernel_call *c, const int *idx, int n, int64_t *numel) {
    char why[128];
    *numel = sc_desc_numel(&c->in[0].desc);
    return sc_optim_tensors_match(c->in, idx, n, true, why, sizeof why) ? SC_OK : cpu_errorf(c, "%s", why);
}

#define SGD_IMPL(T, TG, LOAD, NAME)                                                                        \
    static void NAME(int64_t n, T *restrict w, const TG *restrict g, T *restrict m, T lr, T gs, T wd, T mom, \
                     bool nesterov) {                                                                      \
        if (!m) {                                                                                          \
            _Pragma("omp parallel for simd schedule(static)") for (int64_t i = 0; i < n; i++) {            \
                T gi = LOAD(g[i]) * gs + wd * w[i];                                                        \
                w[i] = w[i] - lr * gi;                                                                     \
            }                                                                                              \
            return;                                                                                        \
        }                                                                                                  \
        _Pragma("omp parallel for simd schedule(static)") for (int64_t i = 0; i < n; i++) {                \
            T gi = LOAD(g[i]) * gs + wd * w[i];                                                            \
            T mi = mom * m[i] + gi;                                                                        \
            T d = nesterov ? gi + mom * mi : mi;                                                           \
            m[i] = mi;                                                                                     \
            w[i] = w[i] - lr * d;                                                                          \
        }                                                                                                  \
    }
#define LOAD_SAME(x) (x)
SGD_IMPL(float, float, LOAD_SAME, sgd_f32)
SGD_IMPL(float, uint16_t, sc_bf16_to_f32, sgd_f32_gbf16)
SGD_IMPL(float, uint16_t, sc_f16_to_f32, sgd_f32_gf16)
SGD_IMPL(double, double, LOAD_SAME, sgd_f64)

/* (W, G, M, lr[, grad_scale]) -> (W', M'); M omitted (-1) when momentum is 0. */
sc_status cpu_sgd_update(const sc_kernel_call *c) {
    const sc_sgd_attrs *a = &c->node->attrs->sgd;
    int64_t n = 0;
    SC_TRY(check_tensors(c, (const int[]){1, 2}, 2, &n));
    double lr = 0, gs = 1.0;
    SC_TRY(read_f32_scalar(c, 3, "lr", true, &lr));
    if (c->n_in > 4 && c->in[4].data) SC_TRY(read_f32_scalar(c, 4, "grad_scale", false, &gs));
    void *m = c->in[2].data;
    if (a->momentum != 0 && !m) return cpu_errorf(c, "momentum %g needs the momentum buffer input", a->momentum);
    SC_ASSERT(c->out[0].data == c->in[0].data && (!m || c->n_out < 2 || !c->out[1].data || c->out[1].data == m));
    if (a->momentum == 0) m = NULL;
    sc_dtype gt = c->in[1].desc.dtype;
    if (gt == SC_BF16)
        sgd_f32_gbf16(n, c->in[0].data, c->in[1].data, m, (float)lr, (float)gs, a->weight_decay, a->momentum, a->nesterov);
    else if (gt == SC_F16)
        sgd_f32_gf16(n, c->in[0].data, c->in[1].data, m, (float)lr, (float)gs, a->weight_decay, a->momentum, a->nesterov);
    else if (c->in[0].desc.dtype == SC_F32)
        sgd_f32(n, c->in[0].data, c->in[1].data, m, (float)lr, (float)gs, a->weight_decay, a->momentum, a->nesterov);
    else
        sgd_f64(n, c->in[0].data, c->in[1].data, m, lr, gs, sc_decimal_of(a->weight_decay), sc_decimal_of(a->momentum),
                a->nesterov);
    return SC_OK;
}

#define ADAMW_IMPL(T, TG, LOAD, NAME, SQRT)                                                                \
    static void NAME(int64_t n, T *restrict w, const TG *restrict g, T *restrict m, T *restrict v, T decay,  \
                     T gs, T b1, T one_b1, T b2, T one_b2, T step_size, T bc2_sqrt, T eps) {               \
        _Pragma("omp parallel for simd schedule(static)") for (int64_t i = 0; i < n; i++) {                \
            T gi = LOAD(g[i]) * gs;                                                                        \
            T wi = w[i] * decay;                                                                           \
            T mi = m[i] * b1 + gi * one_b1;                                                                \
            T vi = v[i] * b2 + gi * gi * one_b2;                                                           \
            T denom = SQRT(vi) / bc2_sqrt + eps;                                                           \
            m[i] = mi;                                                                                     \
            v[i] = vi;                                                                                     \
            w[i] = wi + -step_size * (mi / denom);                                                         \
        }                                                                                                  \
    }
ADAMW_IMPL(float, float, LOAD_SAME, adamw_f32, sqrtf)
ADAMW_IMPL(float, uint16_t, sc_bf16_to_f32, adamw_f32_gbf16, sqrtf)
ADAMW_IMPL(float, uint16_t, sc_f16_to_f32, adamw_f32_gf16, sqrtf)
ADAMW_IMPL(double, double, LOAD_SAME, adamw_f64, sqrt)

/* (W, G, M, V, lr, step[, grad_scale]) -> (W', M', V'). */
sc_status cpu_adamw_update(const sc_kernel_call *c) {
    const sc_adamw_attrs *a = &c->node->attrs->adamw;
    int64_t n = 0;
    SC_TRY(check_tensors(c, (const int[]){1, 2, 3}, 3, &n));
    if (!c->in[2].data || !c->in[3].data) return cpu_errorf(c, "the moment buffers M and V are required");
    double lr = 0, gs = 1.0;
    SC_TRY(read_f32_scalar(c, 4, "lr", true, &lr));
    if (c->in[5].desc.dtype != SC_I64 || sc_desc_numel(&c->in[5].desc) != 1) return cpu_errorf(c, "step must be an i64 scalar");
    int64_t t = *(const int64_t *)c->in[5].data;
    if (t < 1) return cpu_errorf(c, "step %lld must be >= 1 (1-based)", (long long)t);
    if (c->n_in > 6 && c->in[6].data) SC_TRY(read_f32_scalar(c, 6, "grad_scale", false, &gs));
    /* torch rounds its attributes to Python floats (double) and the lr to the scalar passed in. */
    double b1 = sc_decimal_of(a->beta1), b2 = sc_decimal_of(a->beta2), wd = sc_decimal_of(a->weight_decay);
    double decay = 1.0 - lr * wd;
    double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
    double step_size = lr / bc1, bc2_sqrt = sqrt(bc2);
    sc_dtype gt = c->in[1].desc.dtype;
    float *w = c->in[0].data, *m = c->in[2].data, *v = c->in[3].data;
    float fd = (float)decay, fgs = (float)gs, fb1 = (float)b1, f1b1 = (float)(1 - b1), fb2 = (float)b2, f1b2 = (float)(1 - b2),
          fss = (float)step_size, fbc = (float)bc2_sqrt;
    if (gt == SC_BF16)
        adamw_f32_gbf16(n, w, c->in[1].data, m, v, fd, fgs, fb1, f1b1, fb2, f1b2, fss, fbc, a->eps);
    else if (gt == SC_F16)
        adamw_f32_gf16(n, w, c->in[1].data, m, v, fd, fgs, fb1, f1b1, fb2, f1b2, fss, fbc, a->eps);
    else if (c->in[0].desc.dtype == SC_F32)
        adamw_f32(n, w, c->in[1].data, m, v, fd, fgs, fb1, f1b1, fb2, f1b2, fss, fbc, a->eps);
    else
        adamw_f64(n, c->in[0].data, c->in[1].data, c->in[2].data, c->in[3].data, decay, gs, b1, 1 - b1, b2, 1 - b2, step_size,
                  bc2_sqrt, sc_decimal_of(a->eps));
    return SC_OK;
}
