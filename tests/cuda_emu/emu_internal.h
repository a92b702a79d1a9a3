/* Internals shared by the pieces of the CUDA emulator (tests/cuda_emu): the runtime
 * (emu_runtime.cpp), the kernel engine (emu_device.h), cuBLAS (emu_cublas.cpp) and cuDNN
 * (emu_cudnn.cpp). C++ only.
 *
 * Work enqueued on a stream (kernels, copies, library calls) is a closure that runs later, when a
 * synchronising call needs it, in an order the scheduler picks among the streams whose next item
 * may run (emu_runtime.cpp). Closures must therefore capture everything by value: pointers to
 * device memory are fine, host scalars (alpha, beta) must be copied at enqueue time.
 */
#ifndef SC_EMU_INTERNAL_H
#define SC_EMU_INTERNAL_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <functional>

#include "core/half.h"

/* Storage of an operand: float or double as such, or 16-bit floats widened on load and rounded to
 * nearest even on store (core/half.h, the backends' own conversions). */
struct bf16_t {
    uint16_t bits;
};
struct f16_t {
    uint16_t bits;
};
static inline float load_t(float v) { return v; }
static inline double load_t(double v) { return v; }
static inline float load_t(bf16_t v) { return sc_bf16_to_f32(v.bits); }
static inline float load_t(f16_t v) { return sc_f16_to_f32(v.bits); }
static inline void store_t(float *p, float v) { *p = v; }
static inline void store_t(double *p, double v) { *p = v; }
static inline void store_t(bf16_t *p, float v) { p->bits = sc_f32_to_bf16(v); }
static inline void store_t(f16_t *p, float v) { p->bits = sc_f32_to_f16(v); }

namespace emu {

/* Queues fn on stream s (NULL = the legacy default stream); `what` names it in messages. */
void enqueue(cudaStream_t s, const char *what, std::function<void()> fn);

/* True when [p, p + bytes) lies inside one cudaMalloc allocation. */
bool is_device(const void *p, size_t bytes);
/* True when [p, p + bytes) lies inside one cudaHostAlloc allocation. */
bool is_pinned(const void *p, size_t bytes);

/* A fault found while running enqueued work (a kernel's bad access pattern, a library misuse that
 * real hardware would only report asynchronously): printed to stderr with `what` and made the
 * sticky error that the next synchronising call returns, like a device-side fault. */
void fault(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reads a host scalar (alpha, beta) of the given precision into *v at the call, as the libraries'
 * host pointer mode does; NULL or a device pointer is an argument error, noted with fn, name and
 * `host_why` (the library's rule). */
bool read_host_scalar(const char *fn, const char *name, const void *p, bool f64, const char *host_why, double *v);

/* True once a fault happened: the context is lost, later work is dropped and every call fails. */
bool has_fault(void);

/* Records e as the error cudaGetLastError / cudaPeekAtLastError return next. */
void set_last_error(cudaError_t e);

/* Reports a misuse found when a call is made (argument errors): printed to stderr when
 * SCORCH_CUDA_EMU_VERBOSE=1, so tests that provoke errors on purpose stay quiet. */
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* TF32 keeps float's 8 exponent bits and the top 10 of the 23 mantissa bits: round the low 13
 * bits away to nearest even (a carry may run into the exponent, rounding up to the next binade or
 * to infinity, as it should). NaN and infinity pass through. */
static inline float tf32_round(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u) return x;
    u += 0x0fffu + ((u >> 13) & 1u);
    u &= ~0x1fffu;
    memcpy(&x, &u, sizeof x);
    return x;
}

} // namespace emu

#endif
