/* Conv and ConvGrad on the CUDA backend: geometry from the CPU's resolver (cpu_window_resolve, so
 * auto_pad and the checks are the same), then cuDNN when this build has it and the pads are
 * symmetric (cuDNN takes one pad per dim), else im2col + cuBLAS (cu_nn_conv_gemm.cu).
 *   Conv (X [N, C, D...], W [M, C/group, k...][, B [M][, S]]) -> Y [N, M, O...]; with the inference
 *     fusions (graph/pass_fuse.c) Y += S (fused_sum), then the activation (fused_act), as on the CPU.
 *   ConvGrad (dY, X, W) -> (dX, dW, dB), each optional.
 */
#include "backends/cpu/cpu_kernels.h"
#include "backends/cuda/cu_kernels.h"

sc_status cu_window_get(const cu_call *c, const sc_window_attrs *wa, const sc_desc *x, const int64_t *kernel,
                        const sc_desc *y, cu_window *win) {
    sc_kernel_call kc = {c->node, c->in, c->n_in, c->out, c->n_out};
    cpu_window w;
    SC_TRY(cpu_window_resolve(&kc, wa, x, kernel, y, &w));
    win->ns = w.n_spatial;
    for (int i = 0; i < 3; i++) {
        win->in[i] = w.in[i], win->out[i] = w.out[i], win->k[i] = w.k[i], win->stride[i] = w.stride[i];
        win->dil[i] = w.dil[i], win->pb[i] = w.pad_begin[i], win->pe[i] = w.pad_end[i];
    }
    return SC_OK;
}

static bool use_cudnn(const cu_window *w) {
#ifdef SC_HAVE_CUDNN
    for (int i = 0; i < 3; i++)
        if (w->pb[i] != w->pe[i]) return false;
    return true;
#else
    (void)w;
    return false;
#endif
}

static sc_status conv_geom(const cu_call *c, const sc_desc *x, const sc_desc *wd, const sc_desc *y, cu_window *w, int64_t *G) {
    const sc_window_attrs *wa = &c->node->attrs->window;
    if (wd->rank != x->rank) return cu_errorf(c, "W rank %d differs from X rank %d", wd->rank, x->rank);
    SC_TRY(cu_window_get(c, wa, x, &wd->dims[2], y, w));
    *G = wa->group > 0 ? wa->group : 1;
    if (x->dims[1] % *G || wd->dims[0] % *G || wd->dims[1] * *G != x->dims[1])
        return cu_errorf(c, "channels %lld / filters %lld do not split into %lld groups", (long long)x->dims[1], (long long)wd->dims[0], (long long)*G);
    for (int i = 0; i < w->ns; i++) {
        int64_t expect = (w->in[i] + w->pb[i] + w->pe[i] - ((w->k[i] - 1) * w->dil[i] + 1)) / w->stride[i] + 1;
        if (expect != w->out[i]) return cu_errorf(c, "output spatial dim %d is %lld, the window gives %lld", i, (long long)w->out[i], (long long)expect);
    }
    return SC_OK;
}

/* Input 3 of a fused_sum Conv: present exactly when the flag is set, with Y's dtype and shape (as the
 * CPU's check). */
static sc_status fused_sum_check(const cu_call *c, const void **s) {
    bool fused = c->node->attrs->window.fused_sum, has = c->n_in > 3 && c->in[3].data;
    *s = has ? c->in[3].data : NULL;
    if (fused != has)
        return cu_errorf(c, fused ? "fused_sum is set but the summand (input 3) is missing"
                                  : "input 3 is given without fused_sum (an inference fusion)");
    if (has && (c->in[3].desc.dtype != c->out[0].desc.dtype || !sc_desc_same_shape(&c->in[3].desc, &c->out[0].desc)))
        return cu_errorf(c, "the fused summand (input 3) must have Y's dtype and shape");
    return SC_OK;
}

sc_status cu_conv(const cu_call *c) {
    const sc_desc *x = &c->in[0].desc, *wd = &c->in[1].desc, *y = &c->out[0].desc;
    cu_window w;
    int64_t G = 1;
    SC_TRY(conv_geom(c, x, wd, y, &w, &G));
    const void *b = c->n_in > 2 ? c->in[2].data : NULL, *sum;
    if (wd->dtype != x->dtype || (b && c->in[2].desc.dtype != x->dtype)) return cu_errorf(c, "mixed dtypes not supported");
    SC_TRY(fused_sum_check(c, &sum));
    /* 16-bit tensors reach here only where cu_widen.cu found them all one type: cuDNN runs the
     * convolution and its bias in 16 bits; with a fused epilogue or pads cuDNN cannot take, the
     * f32 path runs on widened copies */
    if (sc_dtype_is_half(x->dtype) && (!use_cudnn(&w) || sum || c->node->attrs->window.fused_act != SC_FUSED_NONE))
        return cu_run_widened(cu_conv, c);
    sc_status st;
#ifdef SC_HAVE_CUDNN
    if (use_cudnn(&w))
        st = cu_conv_dnn_fwd(c, &w, x->dims[0], x->dims[1], wd->dims[0], G, x->dtype, c->in[0].data, c->in[1].data, b, c->out[0].data);
    else
#endif
        st = cu_conv_gemm_fwd(c, &w, x->dims[0], x->dims[1], wd->dims[0], G, x->dtype, c->in[0].data, c->in[1].data, b, c->out[0].data);
    (void)use_cudnn;
    SC_TRY(st);
    return cu_conv_epilogue(c, x->dtype, c->out[0].data, sum, sc_desc_numel(y), c->node->attrs->window.fused_act,
                            c->node->attrs->window.fused_relu_max);
}

sc_status cu_conv_grad(const cu_call *c) {
    const sc_desc *dy = &c->in[0].desc, *x = &c->in[1].desc, *wd = &c->in[2].desc;
    cu_window w;
    int64_t G = 1;
    SC_TRY(conv_geom(c, x, wd, dy, &w, &G));
    if (dy->dtype != x->dtype || wd->dtype != x->dtype) return cu_errorf(c, "mixed dtypes not supported");
    void *dx = c->n_out > 0 ? c->out[0].data : NULL, *dw = c->n_out > 1 ? c->out[1].data : NULL;
    void *db = c->n_out > 2 ? c->out[2].data : NULL;
    /* 16-bit: cuDNN's 16-bit path for dX and dW, our bias-gradient kernel for dB (it reads 16 bits
     * itself); pads cuDNN cannot take widen */
    if (sc_dtype_is_half(x->dtype) && !use_cudnn(&w)) return cu_run_widened(cu_conv_grad, c);
#ifdef SC_HAVE_CUDNN
    if (use_cudnn(&w))
        return cu_conv_dnn_bwd(c, &w, x->dims[0], x->dims[1], wd->dims[0], G, x->dtype, c->in[0].data, c->in[1].data,
                               c->in[2].data, dx, dw, db);
#endif
    return cu_conv_gemm_bwd(c, &w, x->dims[0], x->dims[1], wd->dims[0], G, x->dtype, c->in[0].data, c->in[1].data,
                            c->in[2].data, dx, dw, db);
}
