/* Resize and ResizeGrad on the CUDA backend: the tap tables that the kernels of cu_nn_resize.cu read
 * (plain C header, shared by cu_nn_resize_geom.c and cu_nn_resize.cu).
 *
 * The geometry is the CPU's, computed on the host by resize_tables_build (cpu_nn_resize_geom.h: the
 * coordinate transforms, nearest rounding, edge clamping and the tf_crop_and_resize extrapolation)
 * from roi / scales / sizes read back from the device, then copied into the scratch workspace. So
 * both backends read X through exactly the same taps. The forward reads, per axis i and output
 * index o (elements of X):
 *   off0[i][o], off1[i][o]   the two taps (-1: outside the roi, the output is the extrapolation value)
 *   w1[i][o]                 the second tap's weight (0 for nearest)
 * The gradient gathers instead of scattering (one thread per element of dX, so its bits do not
 * depend on thread timing), through the same taps inverted per axis: for X index p along axis i,
 * the entries j in [inv_beg[i][p], inv_beg[i][p + 1]) give
 *   inv_o[i][j]   an output index whose taps include p, increasing in j (outputs extrapolated on
 *                 axis i have no entries, so an output outside the roi on any axis reaches no dX)
 *   inv_w[i][j]   p's factor in that output's weight: 1 - w1 or w1 where o branches (two distinct
 *                 taps and w1 != 0: the rule of cpu_nn_resize_grad.c), else 1
 * dX[p] = sum over the dY elements e whose every index e_i appears in p_i's list, in increasing
 * flat order, of (T)(prod_i w_i * dY[e]) with the product in decreasing axis order: the CPU's
 * terms, added in the CPU's order from 0 in T, so the two agree bit for bit (in f64 where both
 * compilers fuse the multiply-add alike: nvcc does by default, the CPU build with -march=native
 * on an FMA machine too; else to an ulp per term).
 */
#ifndef SC_CU_RESIZE_H
#define SC_CU_RESIZE_H

#include "backends/cuda/cuda_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int rank;
    int64_t ydims[SC_MAX_RANK];            /* output (forward) / dY (gradient) dims */
    int64_t xdims[SC_MAX_RANK];            /* X's dims */
    /* device pointers into the scratch workspace: the forward's tables (NULL in the gradient) */
    const int64_t *off0[SC_MAX_RANK];
    const int64_t *off1[SC_MAX_RANK];
    const double *w1[SC_MAX_RANK];
    /* and the gradient's inverted ones (NULL in the forward); inv_beg[i] has xdims[i] + 1 entries */
    const int64_t *inv_beg[SC_MAX_RANK];
    const int64_t *inv_o[SC_MAX_RANK];
    const double *inv_w[SC_MAX_RANK];
    unsigned active;                       /* bit i: axis i has an output index with two weighted taps */
    uint64_t extrap_bits;                  /* nearest: the extrapolation value in X's dtype, as bytes */
    double extrap;                         /* linear: the extrapolation value */
} cu_resize_taps;

/* Forward (grad = false: X = in[0], roi/scales/sizes = in[1..3], Y = out[0]) or gradient (grad =
 * true: dY = in[0], X = in[1], roi/scales/sizes = in[2..4]): checks the mode (cubic and antialias,
 * which graph/pass_resize.c lowers, are refused, as on the CPU), reads the small inputs back, builds the CPU's tables and uploads them
 * (the forward's, or for the gradient their inverse) in one scratch block. The tables stay valid in
 * the scratch workspace until the next cu_scratch call. */
sc_status cu_resize_taps_get(const cu_call *c, bool grad, bool linear, cu_resize_taps *t);

#ifdef __cplusplus
}
#endif

#endif
