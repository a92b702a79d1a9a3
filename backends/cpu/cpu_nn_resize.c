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

/* n-linear: sum over the 2^m corners of the active axes, weights the product of 1-w / w, in the
 * order of resize_corner (corner cn takes axis act[k]'s second tap when bit k is set; weights
 * multiplied in k order from 1; zero weights skipped), so each output is the same double sum.
 * The walk is by rows of the last axis: the leading axes' offsets, extrapolation and corner
 * weights are worked out once per row (dividing the flat index per element cost 10 ns each, 0.9 ms
 * for DeepLabV3's 21x64x64 upsample), then only the last axis' taps change along the row. The 2-D
 * bilinear case is separable: each output row first blends its two input rows, tmp[k] = p0 x0[k] +
 * p1 x1[k] (p0, p1 the row's weights), then each output element blends two entries of tmp; a zero
 * weight skips its term, so an inf where the weight is 0 gives no NaN. In double, as the general
 * sum, it differs from it only by the order of the four products (2.6x faster on LR-ASPP's 21x8x8
 * -> 21x64x64 upsample, where the corner sum cost 4.5 ns per output). Rows wider than
 * RESIZE_ROW_MAX take the general walk. */
enum { RESIZE_ROW_MAX = 2048 };
#define RESIZE_LINEAR(NAME, T)                                                                     \
    static void NAME(const resize_tables *t, const sc_desc *y, const T *x, int64_t in_last, T *out, T extrap) { \
        int r = t->rank, act[SC_MAX_RANK], m = 0, last = r - 1;                                    \
        for (int i = 0; i < r; i++)                                                                \
            if (t->active[i]) act[m++] = i;                                                        \
        bool last_act = m > 0 && act[m - 1] == last;                                               \
        int ml = last_act ? m - 1 : m; /* active axes before the last */                           \
        int64_t inner = y->dims[last], outer = sc_desc_numel(y) / inner;                           \
        int par = outer * inner >= CPU_PAR_MIN && outer > 1;                                       \
        _Pragma("omp parallel for if(par)") for (int64_t row = 0; row < outer; row++) {            \
            int64_t idx[SC_MAX_RANK], f = row, base = 0;                                           \
            bool ext = false;                                                                      \
            for (int i = r - 2; i >= 0; i--) {                                                     \
                idx[i] = f % y->dims[i];                                                           \
                f /= y->dims[i];                                                                   \
                int64_t o = t->off0[i][idx[i]];                                                    \
                if (o < 0) ext = true;                                                             \
                if (!t->active[i]) base += o;                                                      \
            }                                                                                      \
            T *orow = out + row * inner;                                                           \
            if (ext) {                                                                             \
                for (int64_t j = 0; j < inner; j++) orow[j] = extrap;                              \
                continue;                                                                          \
            }                                                                                      \
            double pw[1 << (SC_MAX_RANK - 1)];                                                     \
            int64_t po[1 << (SC_MAX_RANK - 1)];                                                    \
            for (int lc = 0; lc < (1 << ml); lc++)                                                 \
                pw[lc] = resize_corner(t, act, ml, idx, lc, base, &po[lc]);                        \
            const int64_t *o0 = t->off0[last], *o1 = t->off1[last];                                \
            const double *w1 = t->w1[last];                                                        \
            if (last_act && ml == 1 && in_last <= RESIZE_ROW_MAX) { /* bilinear, separable */    \
                double tmp[RESIZE_ROW_MAX], p0 = pw[0], p1 = pw[1];                                \
                const T *r0 = x + po[0], *r1 = x + po[1];                                          \
                for (int64_t k = 0; k < in_last; k++)                                              \
                    tmp[k] = (p0 != 0 ? p0 * (double)r0[k] : 0) + (p1 != 0 ? p1 * (double)r1[k] : 0); \
                for (int64_t j = 0; j < inner; j++) {                                              \
                    double wl = w1[j], wf = 1 - wl;                                                \
                    int64_t a = o0[j] < 0 ? 0 : o0[j], b = o1[j];                                  \
                    double acc = (wf != 0 ? wf * tmp[a] : 0) + (wl != 0 ? wl * tmp[b] : 0);        \
                    orow[j] = o0[j] < 0 ? extrap : (T)acc;                                         \
                }                                                                                  \
                continue;                                                                          \
            }                                                                                      \
            for (int64_t j = 0; j < inner; j++) {                                                  \
                if (o0[j] < 0) {                                                                   \
                    orow[j] = extrap;                                                              \
                    continue;                                                                      \
                }                                                                                  \
                double acc = 0;                                                                    \
                for (int cn = 0; cn < (1 << m); cn++) {                                            \
                    int lc = cn & ((1 << ml) - 1);                                                 \
                    bool second = last_act && (cn >> ml & 1);                                      \
                    double w = last_act ? pw[lc] * (second ? w1[j] : 1 - w1[j]) : pw[lc];          \
                    int64_t off = po[lc] + (second ? o1[j] : o0[j]);                               \
                    if (w != 0) acc += w * (double)x[off];                                         \
                }                                                                                  \
                orow[j] = (T)acc;                                                                  \
            }                                                                                      \
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
        resize_linear_f32(&t, y, c->in[0].data, x->dims[x->rank - 1], c->out[0].data, (float)ev);
    } else {
        resize_linear_f64(&t, y, c->in[0].data, x->dims[x->rank - 1], c->out[0].data, ev);
    }
    resize_tables_free(&t);
    return SC_OK;
}
