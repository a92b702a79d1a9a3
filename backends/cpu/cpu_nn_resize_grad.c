/* ResizeGrad (dY, X[, roi, scales, sizes]) -> dX (graph/ops_train.def), modes nearest and linear,
 * f32 and f64: the adjoint (transpose) of the forward Resize of cpu_nn_resize.c. The forward is
 * linear in X: every output element is sum_k w_k X[src_k] (one source with weight 1 for nearest,
 * the 2^m corners with products of (1 - f) / f for n-linear), or the constant extrapolation value
 * outside a tf_crop_and_resize roi. So
 *   dX[src_k] += w_k dY[e]     for every output element e that is not extrapolated.
 * The taps and weights come from cpu_nn_resize_geom.h, the tables the forward reads through. Like the
 * forward, cubic mode and antialias are not supported.
 * Leading axes that the resize leaves untouched (N, C of an image) split the work across threads:
 * their slices of dX are disjoint.
 */
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_nn_resize_geom.h"

enum { RG_DY, RG_X, RG_ROI, RG_SCALES, RG_SIZES };

/* Input i when given and non-empty. */
static const sc_tensor *rg_input(const sc_kernel_call *c, int i) {
    return c->n_in > i && c->in[i].data && sc_desc_numel(&c->in[i].desc) > 0 ? &c->in[i] : NULL;
}

/* Scatters dY over dX for the output elements [e0, e1). */
#define RESIZE_GRAD_IMPL(T, NAME)                                                                        \
    static void NAME(const resize_tables *t, const sc_desc *y, const T *dy, T *dx, int64_t e0, int64_t e1) { \
        int r = y->rank;                                                                                 \
        for (int64_t e = e0; e < e1; e++) {                                                              \
            int64_t idx[SC_MAX_RANK], f = e, base = 0;                                                   \
            int act[SC_MAX_RANK], m = 0;                                                                 \
            bool ext = false;                                                                            \
            for (int i = r - 1; i >= 0; i--) {                                                           \
                idx[i] = f % y->dims[i];                                                                 \
                f /= y->dims[i];                                                                         \
                int64_t o = t->off0[i][idx[i]];                                                          \
                if (o < 0) ext = true;                                                                   \
                if (resize_two_taps(t, i, idx[i])) act[m++] = i;                                         \
                else base += o;                                                                          \
            }                                                                                            \
            if (ext) continue;                                                                           \
            for (int cn = 0; cn < (1 << m); cn++) {                                                      \
                int64_t off;                                                                             \
                double w = resize_corner(t, act, m, idx, cn, base, &off);                                \
                dx[off] += (T)(w * (double)dy[e]);                                                       \
            }                                                                                            \
        }                                                                                                \
    }
RESIZE_GRAD_IMPL(float, resize_grad_f32)
RESIZE_GRAD_IMPL(double, resize_grad_f64)

sc_status cpu_resize_grad(const sc_kernel_call *c) {
    const sc_resize_attrs *a = &c->node->attrs->resize;
    const sc_desc *dy = &c->in[RG_DY].desc, *x = &c->in[RG_X].desc;
    SC_TRY(resize_mode_check(c));
    if (x->dtype != SC_F32 && x->dtype != SC_F64) return cpu_errorf(c, "dtype %s not supported", sc_dtype_name(x->dtype));
    if (dy->dtype != x->dtype || dy->rank != x->rank) return cpu_errorf(c, "dY must have X's dtype and rank");
    memset(c->out[0].data, 0, (size_t)sc_desc_bytes(x));
    if (sc_desc_numel(dy) == 0) return SC_OK;
    for (int i = 0; i < x->rank; i++)
        if (x->dims[i] == 0) return cpu_errorf(c, "cannot resize an empty input");
    resize_operands op = {.x = x,
                          .y = dy,
                          .roi = rg_input(c, RG_ROI),
                          .scales = rg_input(c, RG_SCALES),
                          .sizes = rg_input(c, RG_SIZES)};
    resize_tables t;
    SC_TRY(resize_tables_build(c, &op, a->mode == SC_RESIZE_LINEAR, &t));
    /* Output elements of one slice of the untouched leading axes only touch that slice of dX. */
    int lead = 0;
    int64_t slices = 1;
    while (lead < x->rank - 1 && t.identity[lead]) slices *= x->dims[lead++];
    int64_t per = sc_desc_numel(dy) / slices;
    int par = slices > 1 && sc_desc_numel(dy) >= CPU_PAR_MIN;
#pragma omp parallel for if (par)
    for (int64_t s = 0; s < slices; s++) {
        if (x->dtype == SC_F32) resize_grad_f32(&t, dy, c->in[RG_DY].data, c->out[0].data, s * per, (s + 1) * per);
        else resize_grad_f64(&t, dy, c->in[RG_DY].data, c->out[0].data, s * per, (s + 1) * per);
    }
    resize_tables_free(&t);
    return SC_OK;
}
