/* Launchers of the CUDA backend (plain C header; the table in cu_table.c).
 * Each takes the node's call, whose ctx carries the stream the work is enqueued on; semantics are
 * those of the CPU kernel of the same op (backends/cpu/cpu_*.c), which the cross-backend test
 * (tests/cuda/test_cuda_ops.c) compares against.
 */
#ifndef SC_CU_KERNELS_H
#define SC_CU_KERNELS_H

#include "backends/cuda/cuda_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every launcher, generated from the ops.def rows (cu_<kernel>, defined in cu_<family>*.{c,cu}). */
#define SC_OP(id, name, min_in, max_in, min_out, max_out, family, attrs, since, shape, kernel, ...) \
    sc_status cu_##kernel(const cu_call *c);
#include "graph/ops.def"
#include "graph/ops_train.def"
#undef SC_OP

/* Row-major GEMM on the call's stream through cuBLAS (cu_nn_blas.c), f32 or f64:
 *   C (M x N) = alpha * op(A) op(B) + beta * C, batched with element strides sa, sb, sc
 *   (0 = the same matrix for every batch). lda/ldb/ldc are row-major leading dims. */
sc_status cu_gemm_rm(const cu_call *c, sc_dtype t, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                     const void *A, int64_t lda, int64_t sa, const void *B, int64_t ldb, int64_t sb, double beta, void *C,
                     int64_t ldc, int64_t sc, int64_t batch);

/* Output 0 = input 0 broadcast to the output's shape (numpy rules; cu_elementwise.cu). */
sc_status cu_broadcast_input(const cu_call *c);

/* y[p] = mean of x[p * plane .. (p + 1) * plane) for p < planes, f32 or f64 (cu_reduce.cu). */
sc_status cu_mean_planes(const cu_call *c, sc_dtype t, const void *x, void *y, int64_t planes, int64_t plane);

/* Geometry of a Conv / pool window (cpu_window_resolve, padded to 3 spatial dims). */
typedef struct {
    int ns;
    int64_t in[3], out[3], k[3], stride[3], dil[3], pb[3], pe[3];
} cu_window;
sc_status cu_window_get(const cu_call *c, const sc_window_attrs *w, const sc_desc *x, const int64_t *kernel,
                        const sc_desc *y, cu_window *win);

/* im2col + cuBLAS convolution (cu_nn_conv_gemm.cu), any pads; dX/dW/dB may be NULL. */
sc_status cu_conv_gemm_fwd(const cu_call *c, const cu_window *w, int64_t N, int64_t C, int64_t M, int64_t G,
                           sc_dtype t, const void *x, const void *wt, const void *b, void *y);
sc_status cu_conv_gemm_bwd(const cu_call *c, const cu_window *w, int64_t N, int64_t C, int64_t M, int64_t G,
                           sc_dtype t, const void *dy, const void *x, const void *wt, void *dx, void *dw, void *db);
/* The inference fusions of a Conv (graph/pass_fuse.c), after the convolution wrote y (n elements):
 * y += s when s (fused_sum's input 3), then the activation act (fused_act: relu capped at cap when
 * cap > 0, sigmoid, swish, hard swish; graph/attrs.h) (cu_nn_conv_gemm.cu). */
sc_status cu_conv_epilogue(const cu_call *c, sc_dtype t, void *y, const void *s, int64_t n, sc_fused_act act,
                           double cap);
/* y[n, m, s] = b[m] over [N, M, S] elements of es bytes: the bias a 16-bit cuDNN convolution then
 * accumulates onto (beta = 1), so conv + bias is rounded once (cu_nn_conv_dnn.c). */
sc_status cu_fill_channels(const cu_call *c, size_t es, void *y, const void *b, int64_t N, int64_t M, int64_t S);
/* db[m] = sum over n and spatial of dy[n, m, :]: shared by both convolution paths. */
sc_status cu_bias_grad(const cu_call *c, sc_dtype t, const void *dy, int64_t N, int64_t M, int64_t S, void *db);

#ifdef SC_HAVE_CUDNN
/* cuDNN convolution (cu_nn_conv_dnn.c); needs symmetric pads (the caller falls back otherwise). */
sc_status cu_conv_dnn_fwd(const cu_call *c, const cu_window *w, int64_t N, int64_t C, int64_t M, int64_t G,
                          sc_dtype t, const void *x, const void *wt, const void *b, void *y);
sc_status cu_conv_dnn_bwd(const cu_call *c, const cu_window *w, int64_t N, int64_t C, int64_t M, int64_t G,
                          sc_dtype t, const void *dy, const void *x, const void *wt, void *dx, void *dw, void *db);
#endif

#ifdef __cplusplus
}
#endif

#endif
