/* Device side of the CUDA emulator: what a translated kernel file (cu2cpp.py turns `k<<<g, b, s,
 * st>>>(args)` into `emu::launch("k", k, g, b, s, st)(args)`) needs to compile as C++ and run on
 * the CPU.
 *
 * Execution model. A launch is queued on its stream like any other work (emu_runtime.cpp). When it
 * runs, blocks run one after another; within a block every thread is a fiber (emu_kernel.cpp) that
 * runs until it finishes or reaches a barrier: __syncthreads (all threads of the block) or a warp
 * shuffle (the lanes of its warp). A barrier releases when every thread it names has arrived; a
 * thread that exits while others wait at a barrier, or a shuffle whose mask names lanes that are
 * not there, is a fault (real hardware hangs or returns garbage). Threads run in increasing order
 * on even launches and decreasing order on odd ones, so a missing barrier between a write and a
 * read of shared memory fails in one of the two orders. __shared__ variables are function statics:
 * one copy per kernel, shared by the block's threads (blocks never run at the same time).
 * Fresh device memory holds NaN bytes (0xff), so a read of memory nothing wrote shows in results.
 */
#ifndef SC_EMU_DEVICE_H
#define SC_EMU_DEVICE_H

#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

#include "emu_internal.h"

struct uint3 {
    unsigned int x, y, z;
};

namespace emu {

struct fiber; /* emu_kernel.cpp */

/* The thread being run and its block's geometry (valid inside a kernel only). */
extern uint3 cur_thread_idx;
extern uint3 cur_block_idx;
extern dim3 cur_block_dim, cur_grid_dim;

/* Checks a launch configuration like the runtime does (threads per block <= 1024, grid.y/z <=
 * 65535, block.z <= 64, static + dynamic shared memory <= 48 KiB); on failure records
 * cudaErrorInvalidConfiguration as the last error and returns false. */
bool launch_config_ok(const char *name, dim3 g, dim3 b, size_t shmem);

/* Runs body once per thread of the grid g x b (see the execution model above). */
void run_grid(const char *name, dim3 g, dim3 b, void (*body)(void *), void *arg);

void syncthreads(void);
/* Warp shuffle: every lane of mask publishes `bits`; returns lane src's. */
uint64_t shfl(unsigned mask, uint64_t bits, int src_lane);
int lane_id(void);

template <class T> bool arg_is_device(const char *name, int i, const T &v) {
    if constexpr (std::is_pointer_v<T>) {
        if (v && !is_device((const void *)v, 1) && !is_pinned((const void *)v, 1)) {
            fault(name, "kernel argument %d (%p) is not device memory", i, (const void *)v);
            return false;
        }
    }
    return true;
}

template <class Tuple, size_t... I> bool args_are_device(const char *name, const Tuple &t, std::index_sequence<I...>) {
    return (arg_is_device(name, (int)I, std::get<I>(t)) && ...);
}

template <class... P> struct launcher {
    const char *name;
    void (*k)(P...);
    dim3 g, b;
    size_t shmem;
    cudaStream_t s;

    template <class... A> void operator()(A &&...a) const {
        static_assert(sizeof...(A) == sizeof...(P), "kernel called with the wrong number of arguments");
        if (!launch_config_ok(name, g, b, shmem)) return;
        struct frame {
            const char *name;
            void (*k)(P...);
            dim3 g, b;
            std::tuple<std::decay_t<P>...> args;
        };
        /* Arguments are converted and copied now, as <<<>>> does. */
        frame f{name, k, g, b, std::tuple<std::decay_t<P>...>(static_cast<P>(std::forward<A>(a))...)};
        enqueue(s, name, [f]() {
            if (!args_are_device(f.name, f.args, std::index_sequence_for<P...>{})) return;
            run_grid(f.name, f.g, f.b, [](void *p) {
                const frame *fr = (const frame *)p;
                std::apply(fr->k, fr->args);
            }, (void *)&f);
        });
    }
};

template <class... P>
launcher<P...> launch(const char *name, void (*k)(P...), dim3 g, dim3 b, size_t shmem = 0, cudaStream_t s = 0) {
    return launcher<P...>{name, k, g, b, shmem, s};
}

} // namespace emu

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define threadIdx (emu::cur_thread_idx)
#define blockIdx (emu::cur_block_idx)
#define blockDim (emu::cur_block_dim)
#define gridDim (emu::cur_grid_dim)
#define warpSize 32

static inline void __syncthreads(void) { emu::syncthreads(); }

template <class T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    static_assert(sizeof(T) <= 8, "shuffle of more than 8 bytes");
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof v);
    int lane = emu::lane_id();
    int src = (lane & ~(width - 1)) | ((lane ^ lane_mask) & (width - 1));
    bits = emu::shfl(mask, bits, src);
    T r;
    memcpy(&r, &bits, sizeof r);
    return r;
}

/* Blocks never run concurrently and a thread is never interrupted, so an atomic is a
 * read-modify-write; under ThreadSanitizer it is also a synchronisation point, as on a GPU. */
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif
template <class T> static inline T atomicAdd(T *p, T v) {
#if defined(__SANITIZE_THREAD__)
    __tsan_acquire(p);
#endif
    T old = *p;
    *p = old + v;
#if defined(__SANITIZE_THREAD__)
    __tsan_release(p);
#endif
    return old;
}

#endif
