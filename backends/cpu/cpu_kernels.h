/* Declarations of every CPU kernel, generated from the ops.def rows (cpu_<kernel>, defined in
 * cpu_<family>*.c), and the helpers kernels of several files share. */
#ifndef SC_CPU_KERNELS_H
#define SC_CPU_KERNELS_H

#include "backends/cpu/cpu.h"

#define SC_OP(id, name, min_in, max_in, min_out, max_out, family, attrs, since, shape, kernel, ...) \
    sc_status cpu_##kernel(const sc_kernel_call *call);
#include "graph/ops.def"
#include "graph/ops_train.def"
#undef SC_OP

/* bf16 tensors through the f32 kernels (cpu_widen.c): whether the node has any, and running k on
 * widened copies with each bf16 output rounded once. */
bool cpu_needs_widening(sc_op op, const sc_tensor *in, int n_in, const sc_tensor *out, int n_out);
sc_status cpu_run_widened(sc_cpu_kernel k, const sc_kernel_call *call);

/* Checks a fused gradient's (dY, Y or X) pair: same dtype and shape, f32 or f64 (cpu_elementwise_grad.c). */
sc_status cpu_check_grad_pair(const sc_kernel_call *call);

/* Drops oneDNN's cached convolution primitives and reordered weights (cpu_dnnl.h). Must be called
 * whenever parameter values change in place (training steps, reloading weights). */
void cpu_dnnl_cache_clear(void);

/* The buffer shape of a channels-last value (graph/pass_layout.c): d right-aligned to rank r with
 * leading 1s, then dim 1 (C) moved last, (N, D1.., C). An operand with C == 1 or every spatial dim
 * 1 has the same bytes in both layouts, so its view describes it either way. False when d has more
 * than r dims or r < 3 (cpu_common.c). */
bool cpu_channels_last_view(sc_desc *d, int r);

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

#endif
