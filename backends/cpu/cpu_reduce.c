/* ReduceSum and ReduceMean (opset 18 form: axes is optional input 1, attributes keepdims and
 * noop_with_empty_axes; the importer canonicalises older opsets to it).
 *
 * Empty or absent axes reduce every axis, or copy the input when noop_with_empty_axes is set.
 * Floats accumulate in double, integers in int64 (an int32 sum wraps on the final conversion as in
 * onnxruntime); the integer mean truncates toward zero. Reducing zero elements gives 0 for the sum
 * and NaN (float) or 0 (integer) for the mean.
 *
 * Plan: size-1 dims are dropped and neighbouring dims with the same role (kept / reduced) merged.
 * If the innermost group is reduced, each output element sums contiguous runs (case A: mean over C
 * of [B,T,C], over H*W of NCHW). If it is kept, each output row accumulates whole input rows into a
 * stack block of partial sums (case B: sum over the batch of [N,C]). keepdims changes only the
 * output desc, which the caller already computed.
 */
#include <math.h>
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_kernels.h"

typedef struct {
    int n;
    int64_t size[SC_MAX_RANK], stride[SC_MAX_RANK];
} nest;

typedef struct {
    nest kept;          /* output units: kept groups, minus the innermost when it is kept */
    nest red;           /* reduced groups, minus the innermost when it is reduced */
    bool inner_reduced; /* case A */
    int64_t inner;      /* length of the innermost group */
    int64_t count;      /* reduced elements per output */
    int64_t units;
} reduce_plan;

#define REDUCE_BLOCK 256

/* Input offset of the flat index f of a loop nest (row-major over size[]). */
static int64_t nest_offset(const nest *l, int64_t f) {
    int64_t off = 0;
    for (int i = l->n - 1; i >= 0; i--) {
        off += (f % l->size[i]) * l->stride[i];
        f /= l->size[i];
    }
    return off;
}

static int64_t nest_count(const nest *l) {
    int64_t c = 1;
    for (int i = 0; i < l->n; i++) c *= l->size[i];
    return c;
}

static void plan_build(reduce_plan *p, const sc_desc *x, const bool *reduced) {
    int64_t gsize[SC_MAX_RANK];
    bool gred[SC_MAX_RANK];
    int m = 0;
    for (int i = 0; i < x->rank; i++) {
        if (x->dims[i] == 1) continue;
        if (m > 0 && gred[m - 1] == reduced[i]) {
            gsize[m - 1] *= x->dims[i];
        } else {
            gsize[m] = x->dims[i];
            gred[m] = reduced[i];
            m++;
        }
    }
    if (m == 0) { /* a single element: treat as one reduced group of size 1 */
        gsize[0] = 1;
        gred[0] = true;
        m = 1;
    }
    int64_t gstride[SC_MAX_RANK], s = 1;
    for (int i = m - 1; i >= 0; i--) {
        gstride[i] = s;
        s *= gsize[i];
    }
    memset(p, 0, sizeof *p);
    p->inner_reduced = gred[m - 1];
    p->inner = gsize[m - 1];
    for (int i = 0; i < m - 1; i++) {
        nest *l = gred[i] ? &p->red : &p->kept;
        l->size[l->n] = gsize[i];
        l->stride[l->n] = gstride[i];
        l->n++;
    }
    p->count = nest_count(&p->red) * (p->inner_reduced ? p->inner : 1);
    p->units = nest_count(&p->kept);
}

/* Accumulate with ACC, divide for the mean with DIV(sum, count). */
#define REDUCE_IMPL(tn, T, ACC)                                                                    \
    static void reduce_##tn(const reduce_plan *p, const T *x, T *y, bool mean) {                   \
        int64_t nred = nest_count(&p->red), R = p->inner;                                          \
        if (p->inner_reduced) {                                                                    \
            int par = p->units * p->count >= CPU_PAR_MIN && p->units > 1;                          \
            _Pragma("omp parallel for if(par)") for (int64_t u = 0; u < p->units; u++) {           \
                const T *xu = x + nest_offset(&p->kept, u);                                        \
                ACC s = 0;                                                                         \
                for (int64_t r = 0; r < nred; r++) {                                               \
                    const T *row = xu + nest_offset(&p->red, r);                                   \
                    ACC t = 0;                                                                     \
                    _Pragma("omp simd reduction(+ : t)") for (int64_t j = 0; j < R; j++) t += row[j]; \
                    s += t;                                                                        \
                }                                                                                  \
                y[u] = (T)(mean ? s / (ACC)p->count : s);                                          \
            }                                                                                      \
        } else {                                                                                   \
            int64_t nblk = (R + REDUCE_BLOCK - 1) / REDUCE_BLOCK;                                  \
            int par = p->units * p->count * R >= CPU_PAR_MIN && p->units * nblk > 1;               \
            _Pragma("omp parallel for if(par)") for (int64_t ub = 0; ub < p->units * nblk; ub++) { \
                int64_t u = ub / nblk, j0 = (ub % nblk) * REDUCE_BLOCK;                            \
                int64_t len = R - j0 < REDUCE_BLOCK ? R - j0 : REDUCE_BLOCK;                       \
                const T *xu = x + nest_offset(&p->kept, u) + j0;                                   \
                ACC acc[REDUCE_BLOCK] = {0};                                                       \
                for (int64_t r = 0; r < nred; r++) {                                               \
                    const T *row = xu + nest_offset(&p->red, r);                                   \
                    _Pragma("omp simd") for (int64_t j = 0; j < len; j++) acc[j] += row[j];        \
                }                                                                                  \
                T *yu = y + u * R + j0;                                                            \
                for (int64_t j = 0; j < len; j++) yu[j] = (T)(mean ? acc[j] / (ACC)p->count : acc[j]); \
            }                                                                                      \
        }                                                                                          \
    }

REDUCE_IMPL(f32, float, double)
REDUCE_IMPL(f64, double, double)
REDUCE_IMPL(i32, int32_t, int64_t)
REDUCE_IMPL(i64, int64_t, int64_t)
REDUCE_IMPL(u32, uint32_t, uint64_t)
REDUCE_IMPL(u64, uint64_t, uint64_t)

/* Fills reduced[] from the axes input; *all_empty when axes is absent or empty. */
static sc_status axes_read(const sc_kernel_call *c, bool *reduced, bool *empty) {
    const sc_desc *x = &c->in[0].desc;
    memset(reduced, 0, SC_MAX_RANK * sizeof *reduced);
    *empty = true;
    if (c->n_in < 2 || !c->in[1].data) return SC_OK;
    const sc_tensor *a = &c->in[1];
    int64_t n = sc_desc_numel(&a->desc);
    if (n == 0) return SC_OK;
    if ((a->desc.dtype != SC_I64 && a->desc.dtype != SC_I32) || n > SC_MAX_RANK)
        return cpu_errorf(c, "axes must be a 1-D i64 tensor of at most %d entries", SC_MAX_RANK);
    int64_t ax[SC_MAX_RANK];
    cpu_convert(ax, SC_I64, a->data, a->desc.dtype, n);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = ax[i] < 0 ? ax[i] + x->rank : ax[i];
        if (v < 0 || v >= x->rank)
            return cpu_errorf(c, "axis %lld out of range for rank %d", (long long)ax[i], x->rank);
        reduced[v] = true;
    }
    *empty = false;
    return SC_OK;
}

static sc_status reduce_run(const sc_kernel_call *c, bool mean) {
    const sc_tensor *x = &c->in[0];
    sc_tensor *y = &c->out[0];
    sc_dtype t = x->desc.dtype;
    bool reduced[SC_MAX_RANK], empty;
    SC_TRY(axes_read(c, reduced, &empty));
    if (empty && c->node->attrs->reduce.noop_with_empty_axes) {
        if (sc_desc_bytes(&y->desc) != sc_desc_bytes(&x->desc))
            return cpu_errorf(c, "noop_with_empty_axes: output size differs from the input");
        cpu_copy(y->data, x->data, sc_desc_bytes(&x->desc));
        return SC_OK;
    }
    if (empty)
        for (int i = 0; i < x->desc.rank; i++) reduced[i] = true;
    if (t != SC_F32 && t != SC_F64 && t != SC_I32 && t != SC_I64 && t != SC_U32 && t != SC_U64)
        return cpu_errorf(c, "dtype %s not supported", sc_dtype_name(t));
    if (y->desc.dtype != t) return cpu_errorf(c, "output dtype %s differs from input", sc_dtype_name(y->desc.dtype));
    int64_t out_n = sc_desc_numel(&y->desc);
    if (sc_desc_numel(&x->desc) == 0) {
        /* Nothing to sum: 0, or 0/0 for a float mean. */
        double fill = mean && sc_dtype_is_float(t) ? NAN : 0.0;
        for (int64_t i = 0; i < out_n; i++) cpu_convert((char *)y->data + i * (int64_t)sc_dtype_size(t), t, &fill, SC_F64, 1);
        return SC_OK;
    }
    reduce_plan p;
    plan_build(&p, &x->desc, reduced);
    int64_t expect = p.inner_reduced ? p.units : p.units * p.inner;
    if (expect != out_n) {
        char bx[96], by[96];
        return cpu_errorf(c, "output %s does not match reducing %s", sc_desc_str(&y->desc, by, sizeof by),
                          sc_desc_str(&x->desc, bx, sizeof bx));
    }
    switch (t) {
    case SC_F32: reduce_f32(&p, x->data, y->data, mean); break;
    case SC_F64: reduce_f64(&p, x->data, y->data, mean); break;
    case SC_I32: reduce_i32(&p, x->data, y->data, mean); break;
    case SC_I64: reduce_i64(&p, x->data, y->data, mean); break;
    case SC_U32: reduce_u32(&p, x->data, y->data, mean); break;
    case SC_U64: reduce_u64(&p, x->data, y->data, mean); break;
    default: break;
    }
    return SC_OK;
}

sc_status cpu_reduce_sum(const sc_kernel_call *c) { return reduce_run(c, false); }
sc_status cpu_reduce_mean(const sc_kernel_call *c) { return reduce_run(c, true); }
