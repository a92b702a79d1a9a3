/* Resize (opset 19; inputs X, roi, scales, sizes), modes nearest and linear (n-linear), forward.
 *
 * The coordinate mapping, rounding and edge clamping live in cpu_nn_resize_geom.h (shared with the
 * adjoint in cpu_nn_resize_grad.c); this file only walks its tap tables. Nearest copies one element
 * (any dtype); linear sums the 2^m corners of the axes that have two taps, in double.
 */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_nn_resize_geom.h"

/* Nearest: each output element copies one input element (any dtype). */
static void resize_nearest(const resize_tables *t, const sc_desc *y, const char *x, char *out, size_t es,
                           const void *extrap) {
    int r = t->rank;
    int64_t inner = r ? y->dims[r - 1] : 1, outer = sc_desc_numel(y) / (inner ? inner : 1);
    if (inner == 0) return;
    int par = outer * inner >= CPU_PAR_MIN && outer > 1;
#pragma omp parallel for if (par)
    for (int64_t row = 0; row < outer; row++) {
        int64_t f = row, off = 0;
        bool ext = false;
        for (int i = r - 2; i >= 0; i--) {
            int64_t o = t->off0[i][f % y->dims[i]];
            f /= y->dims[i];
            if (o < 0) ext = true;
            off += o;
        }
        char *orow = out + row * inner * (int64_t)es;
        const int64_t *last = r ? t->off0[r - 1] : NULL;
        for (int64_t j = 0; j < inner; j++) {
            int64_t o = last ? last[j] : 0;
            const void *src = ext || o < 0 ? extrap : (const void *)(x + (off + o) * (int64_t)es);
            memcpy(orow + j * (int64_t)es, src, es);
        }
    }
}

/* n-linear: sum over the 2^m corners of the active axes, weights the product of 1-w / w. */
#define RESIZE_LINEAR(NAME, T)                                                                     \
    static void NAME(const resize_tables *t, const sc_desc *y, const T *x, T *out, T extrap) {      \
        int r = t->rank, act[SC_MAX_RANK], m = 0;                                                  \
        for (int i = 0; i < r; i++)                                                                \
            if (t->active[i]) act[m++] = i;                                                        \
        int64_t n = sc_desc_numel(y);                                                              \
        int par = n >= CPU_PAR_MIN;                                                                \
        _Pragma("omp parallel for if(par)") for (int64_t e = 0; e < n; e++) {                      \
            int64_t idx[SC_MAX_RANK], f = e, base = 0;                                             \
            bool ext = false;                                                                      \
            for (int i = r - 1; i >= 0; i--) {                                                     \
                idx[i] = f % y->dims[i];                                                           \
                f /= y->dims[i];                                                                   \
                int64_t o = t->off0[i][idx[i]];                                                    \
                if (o < 0) ext = true;                                                             \
                if (!t->active[i]) base += o;                                                      \
            }                                                                                      \
            if (ext) {                                                                             \
                out[e] = extrap;                                                                   \
                continue;                                                                          \
            }                                                                                      \
            double acc = 0;                                                                        \
            for (int cn = 0; cn < (1 << m); cn++) {                                                \
                int64_t off;                                                                       \
                double w = resize_corner(t, act, m, idx, cn, base, &off);                          \
                if (w != 0) acc += w * (double)x[off];                                             \
            }                                                                                      \
            out[e] = (T)acc;                                                                       \
        }                                                                                          \
    }
RESIZE_LINEAR(resize_linear_f32, float)
RESIZE_LINEAR(resize_linear_f64, double)

sc_status cpu_resize(const sc_kernel_call *c) {
    const sc_resize_attrs *a = &c->node->attrs->resize;
    const sc_desc *x = &c->in[0].desc, *y = &c->out[0].desc;
    SC_TRY(resize_mode_check(c));
    bool linear = a->mode == SC_RESIZE_LINEAR;
    if (linear && x->dtype != SC_F32 && x->dtype != SC_F64)
        return cpu_errorf(c, "linear mode supports f32 and f64, not %s", sc_dtype_name(x->dtype));
    if (sc_desc_numel(y) == 0) return SC_OK;
    for (int i = 0; i < x->rank; i++)
        if (x->dims[i] == 0) return cpu_errorf(c, "cannot resize an empty input");
    /* An empty roi tensor counts as given (tf_crop_and_resize then rejects it); empty scales or
     * sizes count as absent. */
    resize_operands op = {
        .x = x,
        .y = y,
        .roi = c->n_in > 1 && c->in[1].data ? &c->in[1] : NULL,
        .scales = c->n_in > 2 && c->in[2].data && sc_desc_numel(&c->in[2].desc) > 0 ? &c->in[2] : NULL,
        .sizes = c->n_in > 3 && c->in[3].data && sc_desc_numel(&c->in[3].desc) > 0 ? &c->in[3] : NULL,
    };
    resize_tables t;
    SC_TRY(resize_tables_build(c, &op, linear, &t));
    double ev = a->extrapolation_value;
    if (!linear) {
        unsigned char extrap[16] = {0};
        cpu_convert(extrap, x->dtype, &ev, SC_F64, 1);
        resize_nearest(&t, y, c->in[0].data, c->out[0].data, sc_dtype_size(x->dtype), extrap);
    } else if (x->dtype == SC_F32) {
        resize_linear_f32(&t, y, c->in[0].data, c->out[0].data, (float)ev);
    } else {
        resize_linear_f64(&t, y, c->in[0].data, c->out[0].data, ev);
    }
    resize_tables_free(&t);
    return SC_OK;
}
