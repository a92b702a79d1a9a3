/* ConvGrad (dY, X, W) -> (dX, dW, dB), each output optional (graph/ops_train.def): the adjoint of
 * Conv (cpu_nn_conv.c) with the same window (explicit pads, strides, dilations, groups incl.
 * depthwise, 1 to 3 spatial dims). With i = o * stride - pad_begin + t * dil:
 *   dX[n, c, i] = sum_{m in group(c), o, t} dY[n, m, o] W[m, c - group_start, t]
 *   dW[m, c, t] = sum_{n, o} dY[n, m, o] X[n, group_start(m) + c, i]
 *   dB[m]       = sum_{n, o} dY[n, m, o]
 * f32 runs oneDNN's backward-data primitive, created once per shape and cached here for the life
 * of the process (activations stay NCHW for 1x1 kernels and take the primitive's preferred layout
 * otherwise, as the forward does, cpu_dnnl.h), and computes dW in items of one thread each so that
 * its bits do not depend on the thread count (cpu_nn_conv_grad_w.c); dB is a per-channel sum.
 * Weights change every training step, so they are reordered on every call (by cpu_weight_reorder.c
 * where it covers the layout) and never cached: an
 * entry holds no pointer to user data between calls and stays valid when parameters change.
 * f64 runs plain reference loops (gradient checks).
 * bf16 dY, X and W (mixed precision) run oneDNN's bf16 kernels where the CPU has them
 * (cpu_bf16_native): dX and dW summed in f32 and rounded once, in oneDNN's blocked layouts (see
 * cpu_nn_conv.c); elsewhere, or with outputs of other types, the node runs widened (cpu_widen.c).
 */
#include <stdlib.h>
#include <omp.h>
#include <string.h>

#include "backends/cpu/cpu_dnnl.h"
#include "backends/cpu/cpu_kernels.h"
#include "core/half.h"

/* ---- f64 reference ---- */

typedef struct {
    int64_t N, C, M, G;
} conv_dims;

/* Visits every (output position o, tap t, input position i) of one spatial window set. */
#define FOR_WINDOW(w, BODY)                                                                              \
    for (int64_t o0 = 0; o0 < (w)->out[0]; o0++)                                                         \
        for (int64_t o1 = 0; o1 < (w)->out[1]; o1++)                                                     \
            for (int64_t o2 = 0; o2 < (w)->out[2]; o2++) {                                               \
                int64_t oi = (o0 * (w)->out[1] + o1) * (w)->out[2] + o2;                                 \
                for (int64_t t0 = 0; t0 < (w)->k[0]; t0++) {                                             \
                    int64_t i0 = o0 * (w)->stride[0] - (w)->pad_begin[0] + t0 * (w)->dil[0];             \
                    if (i0 < 0 || i0 >= (w)->in[0]) continue;                                            \
                    for (int64_t t1 = 0; t1 < (w)->k[1]; t1++) {                                         \
                        int64_t i1 = o1 * (w)->stride[1] - (w)->pad_begin[1] + t1 * (w)->dil[1];         \
                        if (i1 < 0 || i1 >= (w)->in[1]) continue;                                        \
                        for (int64_t t2 = 0; t2 < (w)->k[2]; t2++) {                                     \
                            int64_t i2 = o2 * (w)->stride[2] - (w)->pad_begin[2] + t2 * (w)->dil[2];     \
                            if (i2 < 0 || i2 >= (w)->in[2]) continue;                                    \
                            int64_t ii = (i0 * (w)->in[1] + i1) * (w)->in[2] + i2;                       \
                            int64_t ti = (t0 * (w)->k[1] + t1) * (w)->k[2] + t2;                         \
                            BODY                                                                         \
                        }                                                                                \
                    }                                                                                    \
                }                                                                                        \
            }

static void conv_grad_ref_f64(const cpu_window *w, conv_dims d, const double *dy, const double *x,
                              const double *wt, double *dx, double *dw, double *db) {
    int64_t cg = d.C / d.G, mg = d.M / d.G;
    int64_t in_sp = w->in[0] * w->in[1] * w->in[2], out_sp = w->out[0] * w->out[1] * w->out[2];
    int64_t k_sp = w->k[0] * w->k[1] * w->k[2];
    if (dx) {
        memset(dx, 0, sizeof(double) * (size_t)(d.N * d.C * in_sp));
        /* Groups write disjoint channels of dX, samples disjoint planes. */
#pragma omp parallel for collapse(2)
        for (int64_t n = 0; n < d.N; n++)
            for (int64_t g = 0; g < d.G; g++)
                for (int64_t m = g * mg; m < (g + 1) * mg; m++) {
                    const double *gp = dy + (n * d.M + m) * out_sp;
                    for (int64_t c = 0; c < cg; c++) {
                        double *xp = dx + (n * d.C + g * cg + c) * in_sp;
                        const double *wp = wt + (m * cg + c) * k_sp;
                        FOR_WINDOW(w, xp[ii] += gp[oi] * wp[ti];)
                    }
                }
    }
    if (dw) {
#pragma omp parallel for
        for (int64_t m = 0; m < d.M; m++) {
            int64_t g = m / mg;
            double *wp = dw + m * cg * k_sp;
            memset(wp, 0, sizeof(double) * (size_t)(cg * k_sp));
            for (int64_t n = 0; n < d.N; n++) {
                const double *gp = dy + (n * d.M + m) * out_sp;
                for (int64_t c = 0; c < cg; c++) {
                    const double *xp = x + (n * d.C + g * cg + c) * in_sp;
                    double *wc = wp + c * k_sp;
                    FOR_WINDOW(w, wc[ti] += gp[oi] * xp[ii];)
                }
            }
        }
    }
    if (db) {
        for (int64_t m = 0; m < d.M; m++) {
            double s = 0;
            for (int64_t n = 0; n < d.N; n++)
                for (int64_t o = 0; o < out_sp; o++) s += dy[(n * d.M + m) * out_sp + o];
            db[m] = s;
        }
    }
}

/* ---- oneDNN f32 path ---- */

typedef struct {
    int nd;
    dnnl_dims_t src, wei, dst; /* full dnnl_dims_t: oneDNN reads all DNNL_MAX_NDIMS entries */
    int64_t stride[3], dil[3], pl[3], pr[3];
    int64_t group;
    int plain;
    int threads; /* omp_get_max_threads() at creation (see conv_key in cpu_nn_conv.c) */
    int dt, dx_dt; /* dnnl_data_type_t of dY and W, of dX */
} bwd_key;

/* A tensor in the user's plain layout and, when the primitive prefers another, its own copy in
 * that layout with the reorder between them (user -> prim for inputs, prim -> user for outputs). */
typedef struct {
    dnnl_memory_t user, prim;
    dnnl_primitive_t reorder;
    cpu_weight_reorder *fast; /* W's reorder by our loops, where they cover the layout */
} bwd_mem;

typedef struct {
    bwd_key key;
    dnnl_primitive_t prim;
    bwd_mem a, b, c; /* diff_dst, weights, diff_src */
    bool native;     /* a bf16 key has a oneDNN kernel, not only its reference loops */
} bwd_entry;

static void bwd_entry_free(void *entry) {
    bwd_entry *e = entry;
    dnnl_primitive_t prims[] = {e->prim, e->a.reorder, e->b.reorder, e->c.reorder};
    dnnl_memory_t mems[] = {e->a.user, e->a.prim, e->b.user, e->b.prim, e->c.user, e->c.prim};
    cpu_dnnl_destroy(prims, 4, mems, 6);
    cpu_weight_reorder_free(e->b.fast);
    free(e);
}

static sc_status bwd_mem_init(const sc_kernel_call *call, dnnl_engine_t eng, const dnnl_memory_desc_t *user,
                              const dnnl_memory_desc_t *prim, bool input, bwd_mem *m) {
    if (dnnl_memory_create(&m->user, user, eng, NULL) != dnnl_success)
        return cpu_errorf(call, "oneDNN memory creation failed");
    if (dnnl_memory_desc_equal(user, prim)) return SC_OK;
    if (dnnl_memory_create(&m->prim, prim, eng, DNNL_MEMORY_ALLOCATE) != dnnl_success)
        return cpu_errorf(call, "oneDNN memory creation failed");
    dnnl_primitive_desc_t pd;
    dnnl_status_t s = input ? dnnl_reorder_primitive_desc_create(&pd, user, eng, prim, eng, NULL)
                            : dnnl_reorder_primitive_desc_create(&pd, prim, eng, user, eng, NULL);
    if (s != dnnl_success) return cpu_dnnl_error(call, "reorder descriptor", s);
    s = dnnl_primitive_create(&m->reorder, pd);
    dnnl_primitive_desc_destroy(pd);
    return s == dnnl_success ? SC_OK : cpu_dnnl_error(call, "reorder creation", s);
}

/* Binds user data; for an input runs the reorder into the primitive's layout. Returns the memory
 * the primitive reads or writes. */
static dnnl_memory_t bwd_mem_bind(bwd_mem *m, void *data, bool input, dnnl_stream_t strm, dnnl_status_t *s) {
    dnnl_memory_set_data_handle(m->user, data);
    if (!m->prim) return m->user;
    void *to = NULL;
    if (input && *s == dnnl_success && m->fast && dnnl_memory_get_data_handle(m->prim, &to) == dnnl_success) {
        cpu_weight_reorder_to_blocked(m->fast, data, to, true);
    } else if (input && *s == dnnl_success) {
        dnnl_exec_arg_t a[] = {{DNNL_ARG_FROM, m->user}, {DNNL_ARG_TO, m->prim}};
        *s = dnnl_primitive_execute(m->reorder, strm, 2, a);
    }
    return m->prim;
}

static void bwd_mem_finish(bwd_mem *m, dnnl_stream_t strm, dnnl_status_t *s) {
    if (!m->prim || *s != dnnl_success) return;
    dnnl_exec_arg_t a[] = {{DNNL_ARG_FROM, m->prim}, {DNNL_ARG_TO, m->user}};
    *s = dnnl_primitive_execute(m->reorder, strm, 2, a);
}

/* cpu_prim_build_fn of the backward cache. */
static sc_status bwd_entry_build(const sc_kernel_call *call, dnnl_engine_t eng, void *entry) {
    bwd_entry *e = entry;
    const bwd_key *k = &e->key;
    int nd = k->nd, wnd = k->group > 1 ? nd + 1 : nd;
    dnnl_format_tag_t act = k->plain ? cpu_dnnl_plain_tag(nd) : dnnl_format_tag_any;
    dnnl_data_type_t dt = (dnnl_data_type_t)k->dt, dx_dt = (dnnl_data_type_t)k->dx_dt;
    dnnl_memory_desc_t src_user, dst_user, wei_user, src_any, dst_any, wei_any, src_hint;
    dnnl_memory_desc_init_by_tag(&src_user, nd, k->src, dx_dt, cpu_dnnl_plain_tag(nd));
    dnnl_memory_desc_init_by_tag(&dst_user, nd, k->dst, dt, cpu_dnnl_plain_tag(nd));
    dnnl_memory_desc_init_by_tag(&wei_user, wnd, k->wei, dt, cpu_dnnl_plain_tag(wnd));
    dnnl_memory_desc_init_by_tag(&src_any, nd, k->src, dx_dt, act);
    dnnl_memory_desc_init_by_tag(&src_hint, nd, k->src, dt, act); /* the forward reads X in W's type */
    dnnl_memory_desc_init_by_tag(&dst_any, nd, k->dst, dt, act);
    dnnl_memory_desc_init_by_tag(&wei_any, wnd, k->wei, dt, dnnl_format_tag_any);
    cpu_dnnl_window win = cpu_dnnl_window_of(nd - 2, k->stride, k->dil, k->pl, k->pr);
    dnnl_primitive_desc_t hint, pd;
    SC_TRY(cpu_dnnl_conv_hint(call, eng, &src_hint, &wei_any, &dst_any, &win, &hint));
    dnnl_convolution_desc_t bd;
    dnnl_status_t s = dnnl_dilated_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &src_any, &wei_any, &dst_any,
                                                         win.strides, win.dil, win.pl, win.pr);
    if (s != dnnl_success) {
        dnnl_primitive_desc_destroy(hint);
        return cpu_dnnl_error(call, "backward convolution descriptor", s);
    }
    s = dnnl_primitive_desc_create(&pd, &bd, NULL, eng, hint);
    dnnl_primitive_desc_destroy(hint);
    if (s != dnnl_success && dt == dnnl_bf16) return SC_OK; /* not native: the caller widens */
    if (s != dnnl_success) return cpu_dnnl_error(call, "backward convolution primitive descriptor", s);
    e->native = dt != dnnl_bf16 || cpu_dnnl_optimised(pd);
    if (!e->native) {
        dnnl_primitive_desc_destroy(pd);
        return SC_OK;
    }
    sc_status st = bwd_mem_init(call, eng, &dst_user, dnnl_primitive_desc_query_md(pd, dnnl_query_diff_dst_md, 0), true, &e->a);
    if (!st) st = bwd_mem_init(call, eng, &wei_user, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), true, &e->b);
    if (!st && e->b.prim) e->b.fast = cpu_weight_reorder_new(&wei_user, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), true);
    if (!st) st = bwd_mem_init(call, eng, &src_user, dnnl_primitive_desc_query_md(pd, dnnl_query_diff_src_md, 0), false, &e->c);
    if (!st) {
        s = dnnl_primitive_create(&e->prim, pd);
        if (s != dnnl_success) st = cpu_dnnl_error(call, "backward convolution creation", s);
    }
    dnnl_primitive_desc_destroy(pd);
    return st;
}

static cpu_prim_list bwd_entries = {.key_size = sizeof(bwd_key), .entry_size = sizeof(bwd_entry),
                                    .build = bwd_entry_build, .release = bwd_entry_free};

/* Runs the cached backward-data primitive: dY, W -> dX; *native false (nothing run) when a bf16 key
 * has no oneDNN kernel. */
static sc_status bwd_data_run(const sc_kernel_call *call, const bwd_key *k, const void *dy, const void *w, void *dx,
                              bool *native) {
    cpu_prim_ready r;
    SC_TRY(cpu_prim_get(call, &bwd_entries, k, &r));
    bwd_entry *e = r.entry;
    *native = e->native;
    if (!e->native) return SC_OK;
    dnnl_stream_t strm = r.strm;
    dnnl_status_t s = dnnl_success;
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_DIFF_DST, bwd_mem_bind(&e->a, (void *)dy, true, strm, &s)},
                               {DNNL_ARG_WEIGHTS, bwd_mem_bind(&e->b, (void *)w, true, strm, &s)},
                               {DNNL_ARG_DIFF_SRC, bwd_mem_bind(&e->c, dx, false, strm, &s)}};
    if (s == dnnl_success) s = dnnl_primitive_execute(e->prim, strm, 3, args);
    bwd_mem_finish(&e->c, strm, &s);
    if (s == dnnl_success) s = dnnl_stream_wait(strm);
    return s == dnnl_success ? SC_OK : cpu_dnnl_error(call, "backward convolution", s);
}

/* dB[m] = sum_{n, o} dY[n, m, o]: one thread per channel, samples in order, so the same bits for
 * any thread count. dY f32 or bf16 (widened as read), dB f32 or bf16 (rounded once). */
static void conv_grad_bias(const void *g, sc_dtype g_type, conv_dims d, int64_t sp, void *db, sc_dtype db_type) {
#pragma omp parallel for
    for (int64_t m = 0; m < d.M; m++) {
        double s = 0;
        for (int64_t n = 0; n < d.N; n++) {
            int64_t at = (n * d.M + m) * sp;
            const float *p = (const float *)g + at;
            const uint16_t *h = (const uint16_t *)g + at;
            float ps = 0;
            if (g_type == SC_BF16) {
#pragma omp simd reduction(+ : ps)
                for (int64_t i = 0; i < sp; i++) ps += sc_bf16_to_f32(h[i]);
            } else {
#pragma omp simd reduction(+ : ps)
                for (int64_t i = 0; i < sp; i++) ps += p[i];
            }
            s += ps;
        }
        if (db_type == SC_BF16) ((uint16_t *)db)[m] = sc_f32_to_bf16((float)s);
        else ((float *)db)[m] = (float)s;
    }
}

/* Whether a bf16 ConvGrad runs on oneDNN's bf16 kernels as it is: dY, X and W bf16, dX bf16, dW and
 * dB bf16 or f32. */
static bool conv_grad_bf16(const sc_kernel_call *call) {
    for (int i = 0; i < 3; i++)
        if (call->in[i].desc.dtype != SC_BF16) return false;
    for (int i = 0; i < call->n_out && i < 3; i++) {
        sc_dtype t = call->out[i].desc.dtype;
        if (call->out[i].data && t != SC_BF16 && (i == 0 || t != SC_F32)) return false;
    }
    return true;
}

/* f32, or bf16 where conv_grad_bf16; *native false (nothing written) when oneDNN has no bf16
 * backward-data kernel for it. */
static sc_status conv_grad_dnnl(const sc_kernel_call *call, const cpu_window *w, conv_dims d, void *dx, void *dw,
                                void *db, bool *native) {
    const sc_desc *dy = &call->in[0].desc, *x = &call->in[1].desc, *wd = &call->in[2].desc;
    bool bf16 = x->dtype == SC_BF16;
    bwd_key k;
    memset(&k, 0, sizeof k);
    k.threads = omp_get_max_threads();
    k.dt = bf16 ? dnnl_bf16 : dnnl_f32;
    k.dx_dt = dx && call->out[0].desc.dtype == SC_BF16 ? dnnl_bf16 : k.dt;
    k.nd = x->rank;
    for (int i = 0; i < x->rank; i++) {
        k.src[i] = x->dims[i];
        k.dst[i] = dy->dims[i];
    }
    int wi = 0;
    if (d.G > 1) k.wei[wi++] = d.G;
    k.wei[wi++] = d.M / d.G;
    for (int i = 1; i < wd->rank; i++) k.wei[wi++] = wd->dims[i];
    bool pointwise = true;
    for (int i = 0; i < w->n_spatial; i++) {
        k.stride[i] = w->stride[i];
        k.dil[i] = w->dil[i];
        k.pl[i] = w->pad_begin[i];
        k.pr[i] = w->pad_end[i];
        pointwise = pointwise && w->k[i] == 1;
    }
    k.group = d.G;
    cpu_conv_layout layout = cpu_conv_get_layout();
    k.plain = !bf16 && (layout == CPU_CONV_LAYOUT_PLAIN ||
                        (layout == CPU_CONV_LAYOUT_AUTO && pointwise && cpu_conv_plain_ok(w->n_spatial, w->stride)));
    sc_status st = SC_OK;
    *native = true;
    cpu_dnnl_lock();
    if (dx) st = bwd_data_run(call, &k, call->in[0].data, call->in[2].data, dx, native);
    if (!st && *native && dw)
        st = cpu_conv_grad_weights(call, w, d.N, d.C, d.M, d.G, k.plain, call->in[0].data, call->in[1].data, dw);
    cpu_dnnl_unlock();
    if (!st && *native && db)
        conv_grad_bias(call->in[0].data, dy->dtype, d, w->out[0] * w->out[1] * w->out[2], db, call->out[2].desc.dtype);
    return st;
}

/* ---- the kernel ---- */

sc_status cpu_conv_grad(const sc_kernel_call *call) {
    const sc_window_attrs *wa = &call->node->attrs->window;
    const sc_desc *dy = &call->in[0].desc, *x = &call->in[1].desc, *wd = &call->in[2].desc;
    int64_t G = wa->group > 0 ? wa->group : 1;
    char a[96], b[96], c[96];
    if (wd->rank != x->rank || dy->rank != x->rank || x->rank < 3 || x->dims[1] != wd->dims[1] * G ||
        wd->dims[0] % G || dy->dims[0] != x->dims[0] || dy->dims[1] != wd->dims[0])
        return cpu_errorf(call, "inconsistent shapes dY %s, X %s, W %s for group %lld", sc_desc_str(dy, a, sizeof a),
                          sc_desc_str(x, b, sizeof b), sc_desc_str(wd, c, sizeof c), (long long)G);
    if (dy->dtype == SC_BF16 && !conv_grad_bf16(call)) return cpu_run_widened(cpu_conv_grad, call);
    if (dy->dtype != x->dtype || wd->dtype != x->dtype) return cpu_errorf(call, "dY, X and W must share one dtype");
    cpu_window w;
    SC_TRY(cpu_window_resolve(call, wa, x, &wd->dims[2], dy, &w));
    for (int i = 0; i < w.n_spatial; i++) {
        int64_t expect = (w.in[i] + w.pad_begin[i] + w.pad_end[i] - ((w.k[i] - 1) * w.dil[i] + 1)) / w.stride[i] + 1;
        if (expect != w.out[i])
            return cpu_errorf(call, "dY spatial dim %d is %lld, the window gives %lld", i, (long long)w.out[i],
                              (long long)expect);
    }
    conv_dims d = {x->dims[0], x->dims[1], wd->dims[0], G};
    void *dx = call->n_out > 0 ? call->out[0].data : NULL;
    void *dw = call->n_out > 1 ? call->out[1].data : NULL;
    void *db = call->n_out > 2 ? call->out[2].data : NULL;
    if (sc_desc_numel(dy) == 0) {
        /* No output positions: every gradient is zero. */
        if (dx) memset(dx, 0, (size_t)sc_desc_bytes(x));
        if (dw) memset(dw, 0, (size_t)sc_desc_bytes(wd));
        if (db) memset(db, 0, (size_t)wd->dims[0] * sc_dtype_size(x->dtype));
        return SC_OK;
    }
    if (x->dtype == SC_F64) {
        conv_grad_ref_f64(&w, d, call->in[0].data, call->in[1].data, call->in[2].data, dx, dw, db);
        return SC_OK;
    }
    if (x->dtype != SC_F32 && x->dtype != SC_BF16) return cpu_errorf(call, "dtype %s not supported", sc_dtype_name(x->dtype));
    bool native = true;
    sc_status st = conv_grad_dnnl(call, &w, d, dx, dw, db, &native);
    return st || native ? st : cpu_run_widened(cpu_conv_grad, call);
}
