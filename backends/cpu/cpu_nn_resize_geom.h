/* Resize geometry (opset 19 semantics), shared by the forward Resize (cpu_nn_resize.c) and its adjoint
 * ResizeGrad (cpu_nn_resize_grad.c), so that the two read X through exactly the same taps.
 *
 * Per axis, output coordinate x maps to input coordinate x_orig by the coordinate transform of
 * graph/resize_geom.h (one definition for the kernels and the cubic lowering).
 * nearest rounds x_orig by nearest_mode (an integral x_orig is taken as is) and clamps to the edge;
 * linear interpolates between floor(x_orig) and floor + 1, both clamped to the edge (the
 * reference's edge padding). Cubic mode and antialias never reach the kernels: graph_prepare
 * lowers them to MatMuls (graph/pass_resize.c); a node given to a kernel directly is refused.
 *
 * The result is a per-axis tap table: output element e (multi-index idx) reads
 *   sum over the 2^m corners of the two-tap axes of  prod (1 - w1 | w1) * X[sum off0|off1],
 * or the extrapolation value when some axis has off0 = -1.
 */
#ifndef SC_CPU_RESIZE_GEOM_H
#define SC_CPU_RESIZE_GEOM_H

#include "backends/cpu/cpu_kernels.h"

/* Where the call keeps each operand: the forward has X = in[0] and Y = out[0], the gradient
 * X = in[1] and Y = dY = in[0]. roi, scales and sizes are NULL when absent. */
typedef struct {
    const sc_desc *x, *y;
    const sc_tensor *roi, *scales, *sizes;
} resize_operands;

/* Per axis i and output index o: element offsets in X of the two taps (-1: extrapolated) and the
 * weight of the second tap (0 for nearest; floor's fraction for linear, kept even where both taps
 * clamp to one edge element). Laid out as [axis][output index] in one block. */
typedef struct {
    int rank;
    int64_t *off0[SC_MAX_RANK], *off1[SC_MAX_RANK];
    double *w1[SC_MAX_RANK];
    bool active[SC_MAX_RANK];   /* some output index reads two distinct taps with weight != 0 */
    bool identity[SC_MAX_RANK]; /* the axis is left unchanged: output index o reads input o alone */
    void *block;
} resize_tables;

/* Fails naming the node for the modes graph_prepare lowers instead (cubic, antialias). */
sc_status resize_mode_check(const sc_kernel_call *c);

/* Reads scales / sizes / roi and the node's attributes, then fills *t (free with
 * resize_tables_free). X must have no empty axis. */
sc_status resize_tables_build(const sc_kernel_call *c, const resize_operands *op, bool linear, resize_tables *t);

void resize_tables_free(resize_tables *t);

/* Output index o of axis i reads two distinct taps with a non-zero weight on the second. */
static inline bool resize_two_taps(const resize_tables *t, int i, int64_t o) {
    return t->w1[i][o] != 0 && t->off0[i][o] != t->off1[i][o];
}

/* Corner cn of output multi-index idx over the two-tap axes act[0..m) (bit k set: the second tap
 * on axis act[k]): returns its weight, the product of 1 - w1 or w1, and sets *off to base plus the
 * corner's tap offsets. */
static inline double resize_corner(const resize_tables *t, const int *act, int m, const int64_t *idx, int cn,
                                   int64_t base, int64_t *off) {
    double w = 1;
    for (int k = 0; k < m; k++) {
        int i = act[k];
        double w1 = t->w1[i][idx[i]];
        if (cn >> k & 1) {
            w *= w1;
            base += t->off1[i][idx[i]];
        } else {
            w *= 1 - w1;
            base += t->off0[i][idx[i]];
        }
    }
    *off = base;
    return w;
}

#endif
