/* Declarations of every CPU kernel, grouped by the file that defines it. */
#ifndef SC_CPU_KERNELS_H
#define SC_CPU_KERNELS_H

#include "backends/cpu/cpu.h"

#endif
