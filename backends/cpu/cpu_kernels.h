/* Declarations of every CPU kernel, grouped by the file that defines it. */
#ifndef SC_CPU_KERNELS_H
#define SC_CPU_KERNELS_H

#include "backends/cpu/cpu.h"

/* cpu_conv.c, cpu_gemm.c, cpu_pool.c, cpu_norm.c */

/* cpu_unary.c, cpu_binary.c, cpu_reduce.c, cpu_movement.c, cpu_resize.c */

#endif
