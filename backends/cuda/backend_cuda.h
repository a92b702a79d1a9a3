/* The CUDA backend of the plan executor (contract in backends/backend.h), built only when nvcc is
 * found (CMakeLists.txt: target scorch_cuda). Callers check backend_cuda_available first, so a
 * machine without a GPU (or without a driver) skips instead of failing.
 */
#ifndef SC_BACKEND_CUDA_H
#define SC_BACKEND_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* True when cudaGetDeviceCount reports at least one device. Otherwise false, and `why` (when not
 * NULL) receives the reason, e.g. "cudaGetDeviceCount: no CUDA-capable device is detected". */
bool backend_cuda_available(char *why, size_t why_size);

/* capacity: device bytes the plan may use (0 = the GPU's free memory); a capacity above the free
 * memory is capped to it when the arena is created. Uses device 0 (CUDA_VISIBLE_DEVICES selects). */
sc_status backend_cuda_create(int64_t capacity, sc_backend **out);
/* The GPU this process uses: its local rank among the data-parallel ranks on this host (backends/comm.h)
 * modulo the visible devices, so `mpirun -np N` on a host with N GPUs gives each rank its own; 0
 * without a launcher. */
int backend_cuda_device(void);

/* Lets cuBLAS / cuDNN use TF32 tensor cores for f32 products and convolutions (--tf32). */
void backend_cuda_set_tf32(sc_backend *b, bool on);

/* True when this build runs convolutions on cuDNN (else im2col + cuBLAS). */
bool backend_cuda_has_cudnn(void);

#ifdef __cplusplus
}
#endif

#endif
