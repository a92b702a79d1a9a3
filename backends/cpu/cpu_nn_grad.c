/* Fused gradient kernels of softmax (graph/ops_train.def); f32 fast path and f64 reference. Math,
 * with dY the incoming gradient:
 *   SoftmaxGrad (dY, Y):     dX = Y * (dY - sum_axis(dY * Y))
 *   LogSoftmaxGrad (dY, Y):  dX = dY - exp(Y) * sum_axis(dY)
 * Softmax sums run along `axis`, or for legacy_2d (opset < 13) over the flattened dims [axis:],
 * exactly the groups the forward kernel normalised (cpu_nn_norm.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_math.h"

/* ---- SoftmaxGrad, LogSoftmaxGrad ---- */

/* The groups the forward normalised: outer x n x inner, sums over n (stride inner). */
static sc_status softmax_groups(const sc_kernel_call *call, int64_t *outer, int64_t *n, int64_t *inner) {
    const sc_axis_attrs *aa = &call->node->attrs->axis;
    if (!sc_softmax_groups(&call->in[1].desc, aa, outer, n, inner))
        return cpu_errorf(call, "axis %lld out of range for rank %d", (long long)aa->axis, call->in[1].desc.rank);
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
    SC_TRY(cpu_check_grad_pair(call));
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
