/* Resize and ResizeGrad on the CUDA backend: the tap tables that the kernels of cu_resize.cu read
 * (plain C header, shared by cu_resize_geom.c and cu_resize.cu).
 *
 * The geometry is the CPU's, computed on the host by resize_tables_build (cpu_resize_geom.h: the
 * coordinate transforms, nearest rounding, edge clamping and the tf_crop_and_resize extrapolation)
 * from roi / scales / sizes read back from the device, then copied into the scratch workspace. So
 * both backends read X through exactly the same taps; only the summation order of the gradient's
 * atomics differs. Per axis i and output index o (elements of X):
 *   off0[i][o], off1[i][o]   the two taps (-1: outside the roi, the output is the extrapolation value)
 *   w1[i][o]                 the second tap's weight (0 for nearest)
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
    const int64_t *off0[SC_MAX_RANK];      /* device pointers into the scratch workspace */
    const int64_t *off1[SC_MAX_RANK];
    const double *w1[SC_MAX_RANK];
    unsigned active;                       /* bit i: axis i has an output index with two weighted taps */
    uint64_t extrap_bits;                  /* nearest: the extrapolation value in X's dtype, as bytes */
    double extrap;                         /* linear: the extrapolation value */
} cu_resize_taps;

/* Forward (grad = false: X = in[0], roi/scales/sizes = in[1..3], Y = out[0]) or gradient (grad =
 * true: dY = in[0], X = in[1], roi/scales/sizes = in[2..4]): checks the mode (cubic and antialias
 * are refused, as on the CPU), reads the small inputs back, builds the CPU's tables and uploads them.
 * The tables stay valid in the scratch workspace until the next cu_scratch call. */
sc_status cu_resize_taps_get(const cu_call *c, bool grad, bool linear, cu_resize_taps *t);

#ifdef __cplusplus
}
#endif

#endif
