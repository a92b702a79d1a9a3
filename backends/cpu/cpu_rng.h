/* The process-wide training RNG of the CPU backend: Dropout in training mode draws its mask from a
 * counter-based hash of (seed, step, node name, element index), so a mask is reproducible across
 * runs and identical when a plan recomputes the node within one step. The trainer sets the seed
 * and the step before each step; nothing else reads or advances state.
 */
#ifndef SC_CPU_RNG_H
#define SC_CPU_RNG_H

#include <stdint.h>

#include "backends/cpu/cpu.h"

/* Seed and 0- or 1-based step (any counter that changes per step) for the masks that follow. */
void cpu_set_dropout_rng(uint64_t seed, uint64_t step);
void cpu_get_dropout_rng(uint64_t *seed, uint64_t *step);

/* Dropout (X, ratio, training_mode) in training mode with ratio > 0 (cpu_dropout delegates here):
 *   keep[i] = hash(seed, step, hash(node name), i) >= ratio * 2^32,
 *   Y = X * keep / (1 - ratio) (zeros when ratio == 1), mask output (bool) = keep. */
sc_status cpu_dropout_train(const sc_kernel_call *call);

#endif
