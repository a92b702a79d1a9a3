/* SGDUpdate and AdamWUpdate on the CUDA backend: PyTorch's rules with the host-side scalars (bias
 * corrections, lr * wd) computed in double from the shortest decimal of the f32 attributes, as
 * cpu_optim.c does (see there for the derivations). Built with -fmad=false (cuda.cmake) so every
 * product and sum rounds apart, as the CPU's -ffp-contract=off does: host and device updates agree.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/common/common.h"
#include "backends/cuda/cu_block.cuh"
#include "backends/cuda/cu_kernels.h"

/* ---- optimizers ---- */

template <typename T> __global__ void k_sgd(int64_t n, T *w, const T *g, T *m, T lr, T gs, T wd, T mom, bool nesterov) {
    GRID_STRIDE(i, n) {
        T gi = g[i] * gs + wd * w[i];
        if (!m) {
            w[i] = w[i] - lr * gi;
            continue;
        }
        T mi = mom * m[i] + gi;
        T d = nesterov ? gi + mom * mi : mi;
        m[i] = mi;
        w[i] = w[i] - lr * d;
    }
}

template <typename T>
__global__ void k_adamw(int64_t n, T *w, const T *g, T *m, T *v, T decay, T gs, T b1, T one_b1, T b2, T one_b2, T step_size, T bc2_sqrt, T eps) {
    GRID_STRIDE(i, n) {
        T gi = g[i] * gs;
        T wi = w[i] * decay;
        T mi = m[i] * b1 + gi * one_b1;
        T vi = v[i] * b2 + gi * gi * one_b2;
        T denom = sqrt(vi) / bc2_sqrt + eps;
        m[i] = mi;
        v[i] = vi;
        w[i] = wi + -step_size * (mi / denom);
    }
}

static sc_status f32_scalar(const cu_call *c, int i, const char *what, bool decimal, double *v) {
    if (c->in[i].desc.dtype != SC_F32 || sc_desc_numel(&c->in[i].desc) != 1) return cu_errorf(c, "%s must be an f32 scalar", what);
    SC_TRY(cu_read_f64(c, i, v));
    if (decimal) *v = sc_decimal_of((float)*v);
    return SC_OK;
}

/* G in W's dtype: the CUDA kernels read no 16-bit gradients. */
static sc_status optim_check(const cu_call *c, const int *idx, int n, int64_t *numel) {
    char why[128];
    *numel = sc_desc_numel(&c->in[0].desc);
    return sc_optim_tensors_match(c->in, idx, n, false, why, sizeof why) ? SC_OK : cu_errorf(c, "%s", why);
}

extern "C" {

/* (W, G, M, lr[, grad_scale]) -> (W', M') in place */
sc_status cu_sgd_update(const cu_call *c) {
    const sc_sgd_attrs *a = &c->node->attrs->sgd;
    int64_t n = 0;
    const int idx[2] = {1, 2};
    SC_TRY(optim_check(c, idx, 2, &n));
    double lr = 0, gs = 1.0;
    SC_TRY(f32_scalar(c, 3, "lr", true, &lr));
    if (c->n_in > 4 && c->in[4].data) SC_TRY(f32_scalar(c, 4, "grad_scale", false, &gs));
    void *m = c->in[2].data;
    if (a->momentum != 0 && !m) return cu_errorf(c, "momentum %g needs the momentum buffer input", a->momentum);
    if (a->momentum == 0) m = NULL;
    if (n == 0) return SC_OK;
    cudaStream_t s = c->ctx->stream;
    if (c->in[0].desc.dtype == SC_F32)
        k_sgd<float><<<cu_grid(n), CU_BLOCK, 0, s>>>(n, (float *)c->in[0].data, (const float *)c->in[1].data, (float *)m, (float)lr,
                                                    (float)gs, a->weight_decay, a->momentum, a->nesterov);
    else
        k_sgd<double><<<cu_grid(n), CU_BLOCK, 0, s>>>(n, (double *)c->in[0].data, (const double *)c->in[1].data, (double *)m, lr, gs,
                                                     sc_decimal_of(a->weight_decay), sc_decimal_of(a->momentum), a->nesterov);
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

/* (W, G, M, V, lr, step[, grad_scale]) -> (W', M', V') in place */
sc_status cu_adamw_update(const cu_call *c) {
    const sc_adamw_attrs *a = &c->node->attrs->adamw;
    int64_t n = 0;
    const int idx[3] = {1, 2, 3};
    SC_TRY(optim_check(c, idx, 3, &n));
    if (!c->in[2].data || !c->in[3].data) return cu_errorf(c, "the moment buffers M and V are required");
    double lr = 0, gs = 1.0, td = 0;
    SC_TRY(f32_scalar(c, 4, "lr", true, &lr));
    if (c->in[5].desc.dtype != SC_I64 || sc_desc_numel(&c->in[5].desc) != 1) return cu_errorf(c, "step must be an i64 scalar");
    SC_TRY(cu_read_f64(c, 5, &td));
    if (td < 1) return cu_errorf(c, "step %g must be >= 1 (1-based)", td);
    if (c->n_in > 6 && c->in[6].data) SC_TRY(f32_scalar(c, 6, "grad_scale", false, &gs));
    double b1 = sc_decimal_of(a->beta1), b2 = sc_decimal_of(a->beta2), wd = sc_decimal_of(a->weight_decay);
    double decay = 1.0 - lr * wd, bc1 = 1.0 - pow(b1, td), bc2 = 1.0 - pow(b2, td);
    double step_size = lr / bc1, bc2_sqrt = sqrt(bc2);
    if (n == 0) return SC_OK;
    cudaStream_t s = c->ctx->stream;
    if (c->in[0].desc.dtype == SC_F32)
        k_adamw<float><<<cu_grid(n), CU_BLOCK, 0, s>>>(n, (float *)c->in[0].data, (const float *)c->in[1].data, (float *)c->in[2].data,
            (float *)c->in[3].data, (float)decay, (float)gs, (float)b1, (float)(1 - b1), (float)b2, (float)(1 - b2), (float)step_size,
            (float)bc2_sqrt, a->eps);
    else
        k_adamw<double><<<cu_grid(n), CU_BLOCK, 0, s>>>(n, (double *)c->in[0].data, (const double *)c->in[1].data, (double *)c->in[2].data,
            (double *)c->in[3].data, decay, gs, b1, 1 - b1, b2, 1 - b2, step_size, bc2_sqrt, sc_decimal_of(a->eps));
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

} /* extern "C" */
