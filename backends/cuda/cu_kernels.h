/* Launchers of the CUDA backend, one group per file (plain C header; the table in cu_table.c).
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

#define CU_KERNEL(name) sc_status name(const cu_call *c);

/* cu_elementwise.cu: unary, binary with numpy broadcasting, Where, Cast, copies, activation grads */
CU_KERNEL(cu_relu) CU_KERNEL(cu_leaky_relu) CU_KERNEL(cu_sigmoid) CU_KERNEL(cu_tanh) CU_KERNEL(cu_erf)
CU_KERNEL(cu_gelu) CU_KERNEL(cu_clip) CU_KERNEL(cu_sqrt) CU_KERNEL(cu_reciprocal) CU_KERNEL(cu_neg)
CU_KERNEL(cu_exp) CU_KERNEL(cu_log) CU_KERNEL(cu_not) CU_KERNEL(cu_cast) CU_KERNEL(cu_copy_input)
CU_KERNEL(cu_add) CU_KERNEL(cu_sub) CU_KERNEL(cu_mul) CU_KERNEL(cu_div) CU_KERNEL(cu_pow)
CU_KERNEL(cu_max) CU_KERNEL(cu_min) CU_KERNEL(cu_equal) CU_KERNEL(cu_less) CU_KERNEL(cu_greater)
CU_KERNEL(cu_and) CU_KERNEL(cu_or) CU_KERNEL(cu_where) CU_KERNEL(cu_expand)
CU_KERNEL(cu_relu_grad) CU_KERNEL(cu_gelu_grad)

/* cu_reduce.cu: ReduceSum/Mean, Softmax/LogSoftmax (+Grad), LayerNorm (+Grad), GlobalAveragePool */
CU_KERNEL(cu_reduce_sum) CU_KERNEL(cu_reduce_mean) CU_KERNEL(cu_softmax) CU_KERNEL(cu_log_softmax)
CU_KERNEL(cu_softmax_grad) CU_KERNEL(cu_log_softmax_grad) CU_KERNEL(cu_layer_norm) CU_KERNEL(cu_layer_norm_grad)
CU_KERNEL(cu_global_average_pool)

/* cu_movement.cu: Transpose, Concat, Split, Slice(+Grad), Gather(+Grad), Pad, Trilu, Shape,
 * ConstantOfShape, Range */
CU_KERNEL(cu_transpose) CU_KERNEL(cu_concat) CU_KERNEL(cu_split) CU_KERNEL(cu_slice) CU_KERNEL(cu_slice_grad)
CU_KERNEL(cu_gather) CU_KERNEL(cu_gather_grad) CU_KERNEL(cu_pad) CU_KERNEL(cu_trilu) CU_KERNEL(cu_shape)
CU_KERNEL(cu_constant_of_shape) CU_KERNEL(cu_range)

/* cu_resize.cu: Resize and ResizeGrad, nearest and linear (cubic and antialias refused, as on the CPU) */
CU_KERNEL(cu_resize) CU_KERNEL(cu_resize_grad)

/* cu_nn.cu: pools and their gradients, BatchNormalization (+Grad) */
CU_KERNEL(cu_max_pool) CU_KERNEL(cu_average_pool) CU_KERNEL(cu_max_pool_grad) CU_KERNEL(cu_average_pool_grad)
CU_KERNEL(cu_batch_norm) CU_KERNEL(cu_batch_norm_grad)

/* cu_loss.cu: SoftmaxCrossEntropyLoss (+Grad), Dropout, SGDUpdate, AdamWUpdate */
CU_KERNEL(cu_sce_loss) CU_KERNEL(cu_sce_loss_grad) CU_KERNEL(cu_dropout) CU_KERNEL(cu_sgd_update)
CU_KERNEL(cu_adamw_update)

/* cu_blas.c (cuBLAS): Gemm, MatMul */
CU_KERNEL(cu_gemm) CU_KERNEL(cu_matmul)

/* cu_conv.c: Conv and ConvGrad, on cuDNN (cu_conv_dnn.c) or im2col + cuBLAS (cu_conv_gemm.cu) */
CU_KERNEL(cu_conv) CU_KERNEL(cu_conv_grad)

#undef CU_KERNEL

/* Row-major GEMM on the call's stream through cuBLAS (cu_blas.c), f32 or f64:
 *   C (M x N) = alpha * op(A) op(B) + beta * C, batched with element strides sa, sb, sc
 *   (0 = the same matrix for every batch). lda/ldb/ldc are row-major leading dims. */
sc_status cu_gemm_rm(const cu_call *c, sc_dtype t, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                     const void *A, int64_t lda, int64_t sa, const void *B, int64_t ldb, int64_t sb, double beta, void *C,
                     int64_t ldc, int64_t sc, int64_t batch);

/* Geometry of a Conv / pool window (cpu_window_resolve, padded to 3 spatial dims). */
typedef struct {
    int ns;
    int64_t in[3], out[3], k[3], stride[3], dil[3], pb[3], pe[3];
} cu_window;
sc_status cu_window_get(const cu_call *c, const sc_window_attrs *w, const sc_desc *x, const int64_t *kernel,
                        const sc_desc *y, cu_window *win);

/* im2col + cuBLAS convolution (cu_conv_gemm.cu), any pads; dX/dW/dB may be NULL. */
sc_status cu_conv_gemm_fwd(const cu_call *c, const cu_window *w, int64_t N, int64_t C, int64_t M, int64_t G,
                           sc_dtype t, const void *x, const void *wt, const void *b, void *y);
sc_status cu_conv_gemm_bwd(const cu_call *c, const cu_window *w, int64_t N, int64_t C, int64_t M, int64_t G,
                           sc_dtype t, const void *dy, const void *x, const void *wt, void *dx, void *dw, void *db);
/* db[m] = sum over n and spatial of dy[n, m, :]: shared by both convolution paths. */
sc_status cu_bias_grad(const cu_call *c, sc_dtype t, const void *dy, int64_t N, int64_t M, int64_t S, void *db);

#ifdef SC_HAVE_CUDNN
/* cuDNN convolution (cu_conv_dnn.c); needs symmetric pads (the caller falls back otherwise). */
sc_status cu_conv_dnn_fwd(const cu_call *c, const cu_window *w, int64_t N, int64_t C, int64_t M, int64_t G,
                          sc_dtype t, const void *x, const void *wt, const void *b, void *y);
sc_status cu_conv_dnn_bwd(const cu_call *c, const cu_window *w, int64_t N, int64_t C, int64_t M, int64_t G,
                          sc_dtype t, const void *dy, const void *x, const void *wt, void *dx, void *dw, void *db);
#endif

#ifdef __cplusplus
}
#endif

#endif
