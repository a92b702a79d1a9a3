/* Declarations of every CPU kernel, grouped by the file that defines it. */
#ifndef SC_CPU_KERNELS_H
#define SC_CPU_KERNELS_H

#include "backends/cpu/cpu.h"

/* cpu_conv.c, cpu_gemm.c, cpu_pool.c, cpu_norm.c */
sc_status cpu_conv(const sc_kernel_call *call);
sc_status cpu_gemm(const sc_kernel_call *call);
sc_status cpu_matmul(const sc_kernel_call *call);
sc_status cpu_max_pool(const sc_kernel_call *call);
sc_status cpu_average_pool(const sc_kernel_call *call);
sc_status cpu_global_average_pool(const sc_kernel_call *call);
sc_status cpu_batch_norm(const sc_kernel_call *call);
sc_status cpu_layer_norm(const sc_kernel_call *call);
sc_status cpu_softmax(const sc_kernel_call *call);
sc_status cpu_log_softmax(const sc_kernel_call *call);

/* Drops oneDNN's cached convolution primitives and reordered weights (cpu_dnnl.h). Must be called
 * whenever parameter values change in place (training steps, reloading weights). */
void cpu_dnnl_cache_clear(void);

/* Resolved geometry of a Conv/pool window, padded to 3 spatial dims (missing dims: size 1, no pad).
 * pads are the effective ones after auto_pad (ONNX: SAME_UPPER puts the odd pad at the end,
 * SAME_LOWER at the beginning, VALID pads nothing). ext = (k - 1) * dil + 1. */
typedef struct {
    int n_spatial;
    int64_t in[SC_MAX_SPATIAL], out[SC_MAX_SPATIAL], k[SC_MAX_SPATIAL];
    int64_t stride[SC_MAX_SPATIAL], dil[SC_MAX_SPATIAL];
    int64_t pad_begin[SC_MAX_SPATIAL], pad_end[SC_MAX_SPATIAL];
} cpu_window;

/* Fills *win from x's and y's spatial dims (after the first two), the kernel extent and the node's
 * window attributes; fails naming the node when they are inconsistent. */
sc_status cpu_window_resolve(const sc_kernel_call *call, const sc_window_attrs *w, const sc_desc *x,
                             const int64_t *kernel, const sc_desc *y, cpu_window *win);

/* cpu_unary.c, cpu_binary.c, cpu_reduce.c, cpu_movement.c, cpu_resize.c */
/* cpu_unary.c: Relu .. Log, Not, Identity, Dropout (inference) */
sc_status cpu_relu(const sc_kernel_call *call);
sc_status cpu_leaky_relu(const sc_kernel_call *call);
sc_status cpu_sigmoid(const sc_kernel_call *call);
sc_status cpu_tanh(const sc_kernel_call *call);
sc_status cpu_erf(const sc_kernel_call *call);
sc_status cpu_gelu(const sc_kernel_call *call);
sc_status cpu_clip(const sc_kernel_call *call);
sc_status cpu_sqrt(const sc_kernel_call *call);
sc_status cpu_reciprocal(const sc_kernel_call *call);
sc_status cpu_neg(const sc_kernel_call *call);
sc_status cpu_exp(const sc_kernel_call *call);
sc_status cpu_log(const sc_kernel_call *call);
sc_status cpu_not(const sc_kernel_call *call);
sc_status cpu_dropout(const sc_kernel_call *call);
/* cpu_cast.c */
sc_status cpu_cast(const sc_kernel_call *call);
/* cpu_binary.c: numpy broadcasting (cpu_broadcast.h) */
sc_status cpu_add(const sc_kernel_call *call);
sc_status cpu_sub(const sc_kernel_call *call);
sc_status cpu_mul(const sc_kernel_call *call);
sc_status cpu_div(const sc_kernel_call *call);
sc_status cpu_pow(const sc_kernel_call *call);
sc_status cpu_max(const sc_kernel_call *call);
sc_status cpu_min(const sc_kernel_call *call);
sc_status cpu_equal(const sc_kernel_call *call);
sc_status cpu_less(const sc_kernel_call *call);
sc_status cpu_greater(const sc_kernel_call *call);
sc_status cpu_and(const sc_kernel_call *call);
sc_status cpu_or(const sc_kernel_call *call);
sc_status cpu_where(const sc_kernel_call *call);
/* cpu_reduce.c */
sc_status cpu_reduce_mean(const sc_kernel_call *call);
sc_status cpu_reduce_sum(const sc_kernel_call *call);
/* cpu_movement.c: a plain copy of input 0 serves Identity, Reshape, Flatten, Squeeze, Unsqueeze */
sc_status cpu_copy_input(const sc_kernel_call *call);
sc_status cpu_transpose(const sc_kernel_call *call);
sc_status cpu_concat(const sc_kernel_call *call);
sc_status cpu_split(const sc_kernel_call *call);
sc_status cpu_expand(const sc_kernel_call *call);
/* cpu_index.c */
sc_status cpu_slice(const sc_kernel_call *call);
sc_status cpu_gather(const sc_kernel_call *call);
/* cpu_pad.c */
sc_status cpu_pad(const sc_kernel_call *call);
sc_status cpu_trilu(const sc_kernel_call *call);
/* cpu_fill.c */
sc_status cpu_shape(const sc_kernel_call *call);
sc_status cpu_constant_of_shape(const sc_kernel_call *call);
sc_status cpu_range(const sc_kernel_call *call);
/* cpu_resize.c */
sc_status cpu_resize(const sc_kernel_call *call);

/* cpu_grad_movement.c */
sc_status cpu_slice_grad(const sc_kernel_call *call);  /* SliceGrad */
sc_status cpu_gather_grad(const sc_kernel_call *call); /* GatherGrad */

/* cpu_grad_nn.c, cpu_grad_conv.c, ... */
/* cpu_grad_nn.c: activations, softmax */
sc_status cpu_relu_grad(const sc_kernel_call *call);
sc_status cpu_gelu_grad(const sc_kernel_call *call);
sc_status cpu_softmax_grad(const sc_kernel_call *call);
sc_status cpu_log_softmax_grad(const sc_kernel_call *call);
/* cpu_grad_norm.c */
sc_status cpu_batch_norm_grad(const sc_kernel_call *call);
sc_status cpu_layer_norm_grad(const sc_kernel_call *call);
/* cpu_grad_conv.c, cpu_grad_pool.c, cpu_grad_resize.c */
sc_status cpu_conv_grad(const sc_kernel_call *call);
sc_status cpu_max_pool_grad(const sc_kernel_call *call);
sc_status cpu_average_pool_grad(const sc_kernel_call *call);
sc_status cpu_resize_grad(const sc_kernel_call *call);
/* cpu_dropout_train.c: training-mode Dropout, declared with its RNG setting in cpu_rng.h */

/* cpu_loss.c, cpu_optim.c */
sc_status cpu_sce_loss(const sc_kernel_call *call);      /* SoftmaxCrossEntropyLoss */
sc_status cpu_sce_loss_grad(const sc_kernel_call *call); /* SoftmaxCrossEntropyLossGrad */
sc_status cpu_sgd_update(const sc_kernel_call *call);
sc_status cpu_adamw_update(const sc_kernel_call *call);

#endif
