/* Conv (ONNX opset 1..22): X (N, C, D1..Dn), W (M, C/group, k1..kn), optional B (M) -> Y (N, M, ...).
 *
 *   Y[n, m, o] = B[m] + sum_{c in group(m), t} X[n, c, o * stride - pad_begin + t * dil] * W[m, c, t]
 *
 * Inference fusions (graph/pass_fuse.c, never from import): with fused_sum, input 3 S (Y's shape) is
 * added, Y = conv + S; with fused_act, an activation last (relu or a clip to [0, fused_relu_max],
 * sigmoid, swish, hard swish). Both are oneDNN post-ops (sum, then eltwise), so the sum reads S from
 * the destination: S is copied into Y first unless the
 * executor already gave Y S's buffer (backends/executor.c, when this node is S's last reader).
 * With nhwc_in / nhwc_out, X / Y (and S, which always shares Y's layout) are stored channels-last,
 * (N, D1.., C), between Convs that pass them on without a reorder (pass_fuse.c); f32 only.
 *
 * n = 1, 2 or 3 spatial dims; group covers depthwise (group == C). auto_pad is resolved here from the
 * input, kernel, stride and dilation (cpu_window_resolve). f32 runs on oneDNN convolution primitives
 * (cached per shape, weights reordered once and cached per weight pointer, see cpu_dnnl.h); f64 runs
 * plain reference loops for the gradient checks. bf16 X and W run on oneDNN's bf16 kernels where
 * the CPU has them (cpu_bf16_native: AVX512_BF16, AMX): f32 sums, Y rounded once when bf16, in
 * oneDNN's blocked layouts (its NCHW 1x1 path is a GEMM whose sums may follow the thread count),
 * W reordered on every call; elsewhere they run widened to f32 (cpu_widen.c).
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_dnnl.h"
#include "backends/cpu/cpu_kernels.h"

/* ---- window geometry (shared with cpu_nn_pool.c) ---- */

sc_status cpu_window_resolve(const sc_kernel_call *call, const sc_window_attrs *w, const sc_desc *x,
                             const int64_t *kernel, const sc_desc *y, cpu_window *win) {
    int ns = x->rank - 2;
    if (ns < 1 || ns > SC_MAX_SPATIAL || y->rank != x->rank)
        return cpu_errorf(call, "input rank %d / output rank %d: need 1 to %d spatial dims", x->rank,
                          y->rank, SC_MAX_SPATIAL);
    memset(win, 0, sizeof *win);
    win->n_spatial = ns;
    for (int i = 0; i < SC_MAX_SPATIAL; i++) {
        win->in[i] = win->out[i] = win->k[i] = win->stride[i] = win->dil[i] = 1;
    }
    for (int i = 0; i < ns; i++) {
        int64_t in = x->dims[2 + i], k = kernel[i];
        int64_t s = w->strides[i] > 0 ? w->strides[i] : 1, d = w->dilations[i] > 0 ? w->dilations[i] : 1;
        if (k < 1) return cpu_errorf(call, "kernel dim %d is %lld", i, (long long)k);
        int64_t ext = (k - 1) * d + 1, pb = w->pads[i], pe = w->pads[ns + i];
        switch (w->auto_pad) {
        case SC_AUTO_PAD_NOTSET: break;
        case SC_AUTO_PAD_VALID: pb = pe = 0; break;
        case SC_AUTO_PAD_SAME_UPPER:
        case SC_AUTO_PAD_SAME_LOWER: {
            /* ONNX: output = ceil(in / stride); the total pad makes the last window end at the
             * padded edge; SAME_UPPER puts the odd unit at the end, SAME_LOWER at the start. */
            int64_t o = (in + s - 1) / s, total = (o - 1) * s + ext - in;
            if (total < 0) total = 0;
            pb = w->auto_pad == SC_AUTO_PAD_SAME_UPPER ? total / 2 : total - total / 2;
            pe = total - pb;
            break;
        }
        }
        if (pb < 0 || pe < 0) return cpu_errorf(call, "negative pads on spatial dim %d", i);
        win->in[i] = in;
        win->out[i] = y->dims[2 + i];
        win->k[i] = k;
        win->stride[i] = s;
        win->dil[i] = d;
        win->pad_begin[i] = pb;
        win->pad_end[i] = pe;
    }
    return SC_OK;
}

/* ---- f64 reference ---- */

static void conv_ref_f64(const cpu_window *w, int64_t N, int64_t C, int64_t M, int64_t G, const double *x,
                         const double *wt, const double *b, double *y) {
    int64_t cg = C / G, mg = M / G;
    int64_t in_sp = w->in[0] * w->in[1] * w->in[2], out_sp = w->out[0] * w->out[1] * w->out[2];
    int64_t k_sp = w->k[0] * w->k[1] * w->k[2];
#pragma omp parallel for collapse(2)
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++) {
            int64_t g = m / mg;
            double *yp = y + (n * M + m) * out_sp;
            for (int64_t o0 = 0; o0 < w->out[0]; o0++)
                for (int64_t o1 = 0; o1 < w->out[1]; o1++)
                    for (int64_t o2 = 0; o2 < w->out[2]; o2++) {
                        double acc = b ? b[m] : 0.0;
                        for (int64_t c = 0; c < cg; c++) {
                            const double *xp = x + (n * C + g * cg + c) * in_sp;
                            const double *wp = wt + (m * cg + c) * k_sp;
                            for (int64_t t0 = 0; t0 < w->k[0]; t0++) {
                                int64_t i0 = o0 * w->stride[0] - w->pad_begin[0] + t0 * w->dil[0];
                                if (i0 < 0 || i0 >= w->in[0]) continue;
                                for (int64_t t1 = 0; t1 < w->k[1]; t1++) {
                                    int64_t i1 = o1 * w->stride[1] - w->pad_begin[1] + t1 * w->dil[1];
                                    if (i1 < 0 || i1 >= w->in[1]) continue;
                                    for (int64_t t2 = 0; t2 < w->k[2]; t2++) {
                                        int64_t i2 = o2 * w->stride[2] - w->pad_begin[2] + t2 * w->dil[2];
                                        if (i2 < 0 || i2 >= w->in[2]) continue;
                                        acc += xp[(i0 * w->in[1] + i1) * w->in[2] + i2] *
                                               wp[(t0 * w->k[1] + t1) * w->k[2] + t2];
                                    }
                                }
                            }
                        }
                        yp[(o0 * w->out[1] + o1) * w->out[2] + o2] = acc;
                    }
        }
}

/* ---- oneDNN f32 path ---- */

/* Measured on this machine (Xeon with AVX-512, 2 threads, batch 1, minimum of 20 runs per conv over
 * ResNet-50's 53 convs), NCHW values everywhere: PLAIN 38.2 ms, BLOCKED 39.5 ms in total. BLOCKED
 * wins every 3x3 and the 7x7 stem (e.g. 64->64 3x3 @56: 0.75 vs 1.25 ms) since the brgconv kernels
 * beat im2col + GEMM, while PLAIN wins the 1x1 convs (e.g. 64->256 @56: 0.66 vs 0.97 ms): in NCHW a
 * 1x1 conv is a single GEMM and needs no per-call reorders. AUTO takes each side where it wins,
 * and for `scorch-run run` the values between Convs are channels-last anyway (nhwc_in/nhwc_out),
 * so most Convs run brgconv without any reorder. */
static cpu_conv_layout conv_layout = CPU_CONV_LAYOUT_AUTO;

/* The activation layout a primitive is created with: the caller's (USER), oneDNN's choice (ANY,
 * reordered per call from and to the caller's), or channels-last on both sides (CL), the layout of
 * AVX-512 brgconv (1x1 kernels included), reordering only a side whose value is NCHW.
 * AUTO: CL when either side is channels-last or the Conv has a summand (oneDNN 2.6's NCHW GEMM
 * convolution with a sum post-op ran about 5x slower than without it, e.g. ResNet-50's 64->256 1x1
 * @56, far more than the reorders cost), else USER for 1x1 and ANY for larger kernels. */
enum { CONV_PRIM_USER, CONV_PRIM_ANY, CONV_PRIM_CL };

typedef struct {
    int nd; /* 3..5 */
    dnnl_dims_t src, wei, dst; /* full dnnl_dims_t: oneDNN reads all DNNL_MAX_NDIMS entries */
    int64_t stride[3], dil[3], pl[3], pr[3];
    int64_t group;
    int has_bias;
    int layout;         /* CONV_PRIM_* */
    int src_cl, dst_cl; /* user X / Y (and S) channels-last */
    int act;  /* sc_window_attrs.fused_act: eltwise post-op (after the sum) */
    int sum;  /* sc_window_attrs.fused_sum: sum post-op, dst holds S when the primitive starts */
    float relu_max; /* sc_window_attrs.fused_relu_max: > 0 makes a relu a clip to [0, relu_max] */
    int threads;    /* omp_get_max_threads() at creation: oneDNN fixes a primitive's thread count
                       then, so a primitive made for 2 threads would run on 2 after a switch to 1 */
    int dt, dst_dt, bias_dt; /* dnnl_data_type_t of X and W, of Y, of B: f32, or bf16 (conv_bf16) */
} conv_key;

typedef struct {
    conv_key key;
    dnnl_primitive_t conv;
    dnnl_memory_desc_t user_wei_md, wei_md;
    dnnl_primitive_t src_reorder, dst_reorder; /* NULL when the primitive takes the user layout */
    dnnl_primitive_t dst_in_reorder;           /* user dst -> primitive dst (S for the sum post-op) */
    dnnl_memory_t src_user, src_prim, dst_user, dst_prim, wei_user, bias;
    bool native;                  /* a bf16 key has a oneDNN kernel, not only its reference loops */
    dnnl_primitive_t wei_reorder; /* bf16: W reordered on every call (it is a cast, not a parameter) */
    cpu_weight_reorder *wei_fast; /* the same by our loops, where they cover the layout */
    dnnl_memory_t wei_prim;
} conv_entry;

static void conv_entry_free(void *entry) {
    conv_entry *e = entry;
    dnnl_primitive_t prims[] = {e->conv, e->src_reorder, e->dst_reorder, e->dst_in_reorder, e->wei_reorder};
    dnnl_memory_t mems[] = {e->src_user, e->src_prim, e->dst_user, e->dst_prim, e->wei_user, e->bias, e->wei_prim};
    cpu_dnnl_destroy(prims, 5, mems, 7);
    cpu_weight_reorder_free(e->wei_fast);
    free(e);
}

static sc_status conv_entry_build(const sc_kernel_call *call, dnnl_engine_t eng, void *entry);
static cpu_prim_list conv_entries = {.key_size = sizeof(conv_key), .entry_size = sizeof(conv_entry),
                                     .build = conv_entry_build, .release = conv_entry_free};
static void conv_cache_clear(void) { cpu_prim_list_clear(&conv_entries); }

void cpu_conv_set_layout(cpu_conv_layout layout) {
    cpu_dnnl_cache_clear();
    conv_layout = layout;
}

cpu_conv_layout cpu_conv_get_layout(void) { return conv_layout; }

/* (N, C, D1..Dn) stored as (N, D1..Dn, C); nd is 3..5. */
static dnnl_format_tag_t channels_last_tag(int nd) { return nd == 3 ? dnnl_acb : nd == 4 ? dnnl_acdb : dnnl_acdeb; }

static dnnl_format_tag_t prim_tag(const conv_key *k, dnnl_format_tag_t user) {
    return k->layout == CONV_PRIM_USER ? user : k->layout == CONV_PRIM_CL ? channels_last_tag(k->nd) : dnnl_format_tag_any;
}

/* The eltwise post-op of k->act: relu, or clip to [0, relu_max]; logistic; swish with alpha 1,
 * y sigmoid(y); hardswish, y relu6(y + 3) / 6 (oneDNN 2.x has no alpha/beta for it; ONNX HardSwish's
 * y max(0, min(1, y / 6 + 1/2)) is the same function). */
static dnnl_status_t act_post_op(dnnl_post_ops_t po, const conv_key *k) {
    switch ((sc_fused_act)k->act) {
    case SC_FUSED_RELU:
        return k->relu_max > 0 ? dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip, 0.0f, k->relu_max)
                               : dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f);
    case SC_FUSED_SIGMOID: return dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_logistic, 0.0f, 0.0f);
    case SC_FUSED_SWISH: return dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_swish, 1.0f, 0.0f);
    case SC_FUSED_HARD_SWISH: return dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_hardswish, 0.0f, 0.0f);
    case SC_FUSED_NONE: break;
    }
    return dnnl_invalid_arguments;
}

/* cpu_prim_build_fn of the forward cache. */
static sc_status conv_entry_build(const sc_kernel_call *call, dnnl_engine_t eng, void *entry) {
    conv_entry *e = entry;
    const conv_key *k = &e->key;
    int nd = k->nd, wnd = k->group > 1 ? nd + 1 : nd;
    dnnl_memory_desc_t src_user, dst_user, src_any, dst_any, wei_any, bias_md;
    dnnl_format_tag_t src_tag = k->src_cl ? channels_last_tag(nd) : cpu_dnnl_plain_tag(nd);
    dnnl_format_tag_t dst_tag = k->dst_cl ? channels_last_tag(nd) : cpu_dnnl_plain_tag(nd);
    dnnl_data_type_t dt = (dnnl_data_type_t)k->dt, dst_dt = (dnnl_data_type_t)k->dst_dt;
    dnnl_memory_desc_init_by_tag(&src_user, nd, k->src, dt, src_tag);
    dnnl_memory_desc_init_by_tag(&dst_user, nd, k->dst, dst_dt, dst_tag);
    dnnl_memory_desc_init_by_tag(&src_any, nd, k->src, dt, prim_tag(k, src_tag));
    dnnl_memory_desc_init_by_tag(&dst_any, nd, k->dst, dst_dt, prim_tag(k, dst_tag));
    dnnl_memory_desc_init_by_tag(&e->user_wei_md, wnd, k->wei, dt, cpu_dnnl_plain_tag(wnd));
    dnnl_memory_desc_init_by_tag(&wei_any, wnd, k->wei, dt, dnnl_format_tag_any);
    dnnl_dims_t bias_dims = {k->dst[1]};
    dnnl_memory_desc_init_by_tag(&bias_md, 1, bias_dims, (dnnl_data_type_t)k->bias_dt, dnnl_a);

    dnnl_convolution_desc_t cd;
    cpu_dnnl_window win = cpu_dnnl_window_of(nd - 2, k->stride, k->dil, k->pl, k->pr);
    dnnl_status_t s = dnnl_dilated_convolution_forward_desc_init(
        &cd, dnnl_forward_inference, dnnl_convolution_direct, &src_any, &wei_any, k->has_bias ? &bias_md : NULL,
        &dst_any, win.strides, win.dil, win.pl, win.pr);
    if (s != dnnl_success) return cpu_dnnl_error(call, "convolution descriptor", s);
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    if (k->act || k->sum) {
        s = dnnl_primitive_attr_create(&attr);
        if (s == dnnl_success) s = dnnl_post_ops_create(&po);
        if (s == dnnl_success && k->sum) s = dnnl_post_ops_append_sum(po, 1.0f);
        if (s == dnnl_success && k->act) s = act_post_op(po, k);
        if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(attr, po);
        if (po) dnnl_post_ops_destroy(po);
        if (s != dnnl_success) {
            if (attr) dnnl_primitive_attr_destroy(attr);
            return cpu_dnnl_error(call, "sum/activation post-ops", s);
        }
    }
    dnnl_primitive_desc_t pd;
    s = dnnl_primitive_desc_create(&pd, &cd, attr, eng, NULL);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success && dt == dnnl_bf16) return SC_OK; /* not native: the caller widens */
    if (s != dnnl_success) return cpu_dnnl_error(call, "convolution primitive descriptor", s);
    e->native = dt != dnnl_bf16 || cpu_dnnl_optimised(pd);
    if (!e->native) {
        dnnl_primitive_desc_destroy(pd);
        return SC_OK;
    }
    const dnnl_memory_desc_t *src_md = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    e->wei_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    s = dnnl_primitive_create(&e->conv, pd);
    sc_status st = s == dnnl_success ? SC_OK : cpu_dnnl_error(call, "convolution creation", s);
    if (!st) st = cpu_dnnl_memory_new(call, eng, &src_user, NULL, &e->src_user);
    if (!st) st = cpu_dnnl_memory_new(call, eng, &dst_user, NULL, &e->dst_user);
    if (!st) st = cpu_dnnl_memory_new(call, eng, &e->user_wei_md, NULL, &e->wei_user);
    if (!st && k->has_bias) st = cpu_dnnl_memory_new(call, eng, &bias_md, NULL, &e->bias);
    if (!st && dt == dnnl_bf16 && !dnnl_memory_desc_equal(&e->wei_md, &e->user_wei_md)) {
        st = cpu_dnnl_memory_new(call, eng, &e->wei_md, DNNL_MEMORY_ALLOCATE, &e->wei_prim);
        if (!st) st = cpu_dnnl_reorder_create(call, eng, &e->user_wei_md, &e->wei_md, &e->wei_reorder);
        if (!st) e->wei_fast = cpu_weight_reorder_new(&e->user_wei_md, &e->wei_md, true);
    }
    if (!st && !dnnl_memory_desc_equal(src_md, &src_user)) {
        st = cpu_dnnl_memory_new(call, eng, src_md, DNNL_MEMORY_ALLOCATE, &e->src_prim);
        if (!st) st = cpu_dnnl_reorder_create(call, eng, &src_user, src_md, &e->src_reorder);
    }
    if (!st && !dnnl_memory_desc_equal(dst_md, &dst_user)) {
        st = cpu_dnnl_memory_new(call, eng, dst_md, DNNL_MEMORY_ALLOCATE, &e->dst_prim);
        if (!st) st = cpu_dnnl_reorder_create(call, eng, dst_md, &dst_user, &e->dst_reorder);
        if (!st && k->sum) st = cpu_dnnl_reorder_create(call, eng, &dst_user, dst_md, &e->dst_in_reorder);
    }
    dnnl_primitive_desc_destroy(pd);
    if (!st) cpu_dnnl_register_cache(conv_cache_clear);
    return st;
}

/* W as the primitive reads it: f32 parameters through the reorder cache (cpu_dnnl_weight); a bf16 W,
 * a Cast's output that the arena may place elsewhere or overwrite within a step, reordered now. */
static sc_status conv_weight(const sc_kernel_call *call, const cpu_prim_ready *r, conv_entry *e, const void *w,
                             int64_t w_numel, dnnl_memory_t *wmem) {
    if (e->key.dt != dnnl_bf16)
        return cpu_dnnl_weight(call, r->eng, r->strm, e->wei_user, &e->user_wei_md, &e->wei_md, w, w_numel, wmem);
    dnnl_memory_set_data_handle(e->wei_user, (void *)w);
    *wmem = e->wei_user;
    if (!e->wei_reorder) return SC_OK;
    *wmem = e->wei_prim;
    void *to = NULL;
    if (e->wei_fast && dnnl_memory_get_data_handle(e->wei_prim, &to) == dnnl_success) {
        cpu_weight_reorder_to_blocked(e->wei_fast, w, to, true);
        return SC_OK;
    }
    dnnl_exec_arg_t a[] = {{DNNL_ARG_FROM, e->wei_user}, {DNNL_ARG_TO, e->wei_prim}};
    dnnl_status_t s = dnnl_primitive_execute(e->wei_reorder, r->strm, 2, a);
    return s == dnnl_success ? SC_OK : cpu_dnnl_error(call, "weight reorder", s);
}

/* *native false (nothing run) when a bf16 key has no oneDNN kernel. */
static sc_status conv_run_dnnl(const sc_kernel_call *call, const conv_key *k, const void *x, const void *w,
                               int64_t w_numel, const void *b, void *y, bool *native) {
    cpu_prim_ready r;
    SC_TRY(cpu_prim_get(call, &conv_entries, k, &r));
    conv_entry *e = r.entry;
    *native = e->native;
    if (!e->native) return SC_OK;
    dnnl_stream_t strm = r.strm;
    dnnl_memory_t wmem = NULL;
    SC_TRY(conv_weight(call, &r, e, w, w_numel, &wmem));
    dnnl_memory_set_data_handle(e->src_user, (void *)x);
    dnnl_memory_set_data_handle(e->dst_user, y);
    if (e->bias) dnnl_memory_set_data_handle(e->bias, (void *)b);
    dnnl_status_t s = dnnl_success;
    if (e->src_reorder) {
        dnnl_exec_arg_t a[] = {{DNNL_ARG_FROM, e->src_user}, {DNNL_ARG_TO, e->src_prim}};
        s = dnnl_primitive_execute(e->src_reorder, strm, 2, a);
    }
    if (s == dnnl_success && e->dst_in_reorder) {
        dnnl_exec_arg_t a[] = {{DNNL_ARG_FROM, e->dst_user}, {DNNL_ARG_TO, e->dst_prim}};
        s = dnnl_primitive_execute(e->dst_in_reorder, strm, 2, a);
    }
    dnnl_memory_t src = e->src_prim ? e->src_prim : e->src_user, dst = e->dst_prim ? e->dst_prim : e->dst_user;
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wmem}, {DNNL_ARG_DST, dst}, {DNNL_ARG_BIAS, e->bias}};
    if (s == dnnl_success) s = dnnl_primitive_execute(e->conv, strm, e->bias ? 4 : 3, args);
    if (s == dnnl_success && e->dst_reorder) {
        dnnl_exec_arg_t a[] = {{DNNL_ARG_FROM, e->dst_prim}, {DNNL_ARG_TO, e->dst_user}};
        s = dnnl_primitive_execute(e->dst_reorder, strm, 2, a);
    }
    if (s == dnnl_success) s = dnnl_stream_wait(strm);
    return s == dnnl_success ? SC_OK : cpu_dnnl_error(call, "convolution", s);
}

/* ---- the kernel ---- */

static sc_status conv_check(const sc_kernel_call *call, const sc_desc *x, const sc_desc *wd, const sc_desc *y,
                            int64_t G) {
    if (wd->rank != x->rank || y->rank != x->rank || G < 1 || x->dims[1] % G || wd->dims[0] % G ||
        wd->dims[1] * G != x->dims[1] || y->dims[0] != x->dims[0] || y->dims[1] != wd->dims[0]) {
        char a[96], b[96], c[96];
        return cpu_errorf(call, "inconsistent shapes X %s, W %s, Y %s for group %lld", sc_desc_str(x, a, sizeof a),
                          sc_desc_str(wd, b, sizeof b), sc_desc_str(y, c, sizeof c), (long long)G);
    }
    if (call->n_in > 2 && call->in[2].data && sc_desc_numel(&call->in[2].desc) != wd->dims[0])
        return cpu_errorf(call, "bias has %lld elements, expected %lld", (long long)sc_desc_numel(&call->in[2].desc),
                          (long long)wd->dims[0]);
    return SC_OK;
}

/* Input 3 of a fused_sum Conv: present exactly when the flag is set, with Y's dtype and shape. */
static sc_status conv_sum_check(const sc_kernel_call *call, const sc_desc *y, const sc_tensor **sum) {
    bool fused = call->node->attrs->window.fused_sum, has = call->n_in > 3 && call->in[3].data;
    *sum = has ? &call->in[3] : NULL;
    if (fused != has)
        return cpu_errorf(call, fused ? "fused_sum is set but the summand (input 3) is missing"
                                      : "input 3 is given without fused_sum (an inference fusion)");
    if (has && (call->in[3].desc.dtype != y->dtype || !sc_desc_same_shape(&call->in[3].desc, y))) {
        char a[96], b[96];
        return cpu_errorf(call, "summand %s does not match Y %s", sc_desc_str(&call->in[3].desc, a, sizeof a),
                          sc_desc_str(y, b, sizeof b));
    }
    return SC_OK;
}

/* f64: the reference loops, then + S and relu as the f32 post-ops do. S is copied first when it
 * shares Y's buffer, since the loops overwrite Y. */
/* The fused activation in f64 (sc_fused_act), for the reference path. */
static double act_f64(sc_fused_act act, double cap, double v) {
    switch (act) {
    case SC_FUSED_RELU: v = v > 0.0 ? v : 0.0; return cap > 0 && v > cap ? cap : v;
    case SC_FUSED_SIGMOID: return 1.0 / (1.0 + exp(-v));
    case SC_FUSED_SWISH: return v / (1.0 + exp(-v));
    case SC_FUSED_HARD_SWISH: return v * fmax(0.0, fmin(1.0, v / 6.0 + 0.5));
    case SC_FUSED_NONE: break;
    }
    return v;
}

static sc_status conv_f64(const sc_kernel_call *call, const cpu_window *w, int64_t G, const sc_tensor *sum) {
    const sc_desc *x = &call->in[0].desc, *y = &call->out[0].desc;
    int64_t n = sc_desc_numel(y);
    double *yd = call->out[0].data, *copy = NULL;
    const double *sd = sum ? sum->data : NULL;
    if (sd == yd && sd) {
        copy = malloc(sizeof *copy * (size_t)n);
        if (!copy) return cpu_errorf(call, "out of memory for the summand");
        memcpy(copy, sd, sizeof *copy * (size_t)n);
        sd = copy;
    }
    conv_ref_f64(w, x->dims[0], x->dims[1], call->in[1].desc.dims[0], G, call->in[0].data, call->in[1].data,
                 call->n_in > 2 ? call->in[2].data : NULL, yd);
    sc_fused_act act = call->node->attrs->window.fused_act;
    double cap = call->node->attrs->window.fused_relu_max;
    for (int64_t i = 0; i < n; i++) yd[i] = act_f64(act, cap, yd[i] + (sd ? sd[i] : 0.0));
    free(copy);
    return SC_OK;
}

/* Whether a bf16 Conv runs on oneDNN's bf16 kernels as it is (cpu_widen.c leaves such Convs
 * unwidened where cpu_bf16_native): X and W bf16, Y bf16 or f32, B absent, f32 or bf16, and none of
 * the inference fusions' channels-last values or summand (f32 only). The others run widened. */
static bool conv_bf16(const sc_kernel_call *call) {
    bool sum = call->n_in > 3 && call->in[3].data;
    const sc_window_attrs *wa = &call->node->attrs->window;
    sc_dtype y = call->out[0].desc.dtype, b = call->n_in > 2 && call->in[2].data ? call->in[2].desc.dtype : SC_F32;
    return call->in[1].desc.dtype == SC_BF16 && (y == SC_BF16 || y == SC_F32) && (b == SC_BF16 || b == SC_F32) &&
           !sum && !wa->nhwc_in && !wa->nhwc_out;
}

sc_status cpu_conv(const sc_kernel_call *call) {
    const sc_window_attrs *wa = &call->node->attrs->window;
    const sc_desc *x = &call->in[0].desc, *wd = &call->in[1].desc, *y = &call->out[0].desc;
    const void *bias = call->n_in > 2 ? call->in[2].data : NULL;
    int64_t G = wa->group > 0 ? wa->group : 1;
    bool bf16 = x->dtype == SC_BF16;
    if (bf16 && !conv_bf16(call)) return cpu_run_widened(cpu_conv, call);
    SC_TRY(conv_check(call, x, wd, y, G));
    int ns = x->rank - 2;
    if (wa->has_kernel_shape)
        for (int i = 0; i < ns; i++)
            if (wa->kernel_shape[i] != wd->dims[2 + i])
                return cpu_errorf(call, "kernel_shape[%d] = %lld but W has %lld", i, (long long)wa->kernel_shape[i],
                                  (long long)wd->dims[2 + i]);
    cpu_window w;
    SC_TRY(cpu_window_resolve(call, wa, x, &wd->dims[2], y, &w));
    for (int i = 0; i < ns; i++) {
        int64_t expect = (w.in[i] + w.pad_begin[i] + w.pad_end[i] - ((w.k[i] - 1) * w.dil[i] + 1)) / w.stride[i] + 1;
        if (expect != w.out[i])
            return cpu_errorf(call, "output spatial dim %d is %lld, the window gives %lld", i, (long long)w.out[i],
                              (long long)expect);
    }
    const sc_tensor *sum = NULL;
    SC_TRY(conv_sum_check(call, y, &sum));
    if (sc_desc_numel(y) == 0) return SC_OK;
    if (x->dtype == SC_F64 && (wa->nhwc_in || wa->nhwc_out))
        return cpu_errorf(call, "channels-last activations are f32 only");
    if (x->dtype == SC_F64) return conv_f64(call, &w, G, sum);
    if (x->dtype != SC_F32 && !bf16) return cpu_errorf(call, "dtype %s not supported", sc_dtype_name(x->dtype));
    if (sum && sum->data != call->out[0].data) memcpy(call->out[0].data, sum->data, (size_t)sc_desc_bytes(y));

    conv_key k;
    memset(&k, 0, sizeof k);
    k.nd = x->rank;
    for (int i = 0; i < x->rank; i++) {
        k.src[i] = x->dims[i];
        k.dst[i] = y->dims[i];
    }
    int wi = 0;
    if (G > 1) k.wei[wi++] = G;
    k.wei[wi++] = wd->dims[0] / G;
    for (int i = 1; i < wd->rank; i++) k.wei[wi++] = wd->dims[i];
    for (int i = 0; i < ns; i++) {
        k.stride[i] = w.stride[i];
        k.dil[i] = w.dil[i];
        k.pl[i] = w.pad_begin[i];
        k.pr[i] = w.pad_end[i];
    }
    k.group = G;
    k.has_bias = bias != NULL;
    k.act = wa->fused_act;
    k.relu_max = wa->fused_act == SC_FUSED_RELU ? wa->fused_relu_max : 0;
    k.sum = sum != NULL;
    k.src_cl = wa->nhwc_in;
    k.dst_cl = wa->nhwc_out;
    k.threads = omp_get_max_threads();
    k.dt = bf16 ? dnnl_bf16 : dnnl_f32;
    k.dst_dt = y->dtype == SC_BF16 ? dnnl_bf16 : dnnl_f32;
    k.bias_dt = bias && call->in[2].desc.dtype == SC_BF16 ? dnnl_bf16 : dnnl_f32;
    bool pointwise = true;
    for (int i = 0; i < ns; i++) pointwise = pointwise && wd->dims[2 + i] == 1;
    k.layout = conv_layout == CPU_CONV_LAYOUT_PLAIN         ? CONV_PRIM_USER
               : conv_layout == CPU_CONV_LAYOUT_BLOCKED     ? CONV_PRIM_ANY
               : k.src_cl || k.dst_cl || k.sum              ? CONV_PRIM_CL
               : bf16                                       ? CONV_PRIM_ANY
               : pointwise && cpu_conv_plain_ok(ns, w.stride) ? CONV_PRIM_USER
                                                            : CONV_PRIM_ANY;
    bool native = true;
    cpu_dnnl_lock();
    sc_status st = conv_run_dnnl(call, &k, call->in[0].data, call->in[1].data, sc_desc_numel(wd), bias,
                                 call->out[0].data, &native);
    cpu_dnnl_unlock();
    return st || native ? st : cpu_run_widened(cpu_conv, call);
}
