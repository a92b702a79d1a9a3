/* The emulator's runtime API (tests/cuda_emu/README.md): everything is in its cuda_runtime.h. This
 * header exists so that code including <cuda_runtime_api.h> gets the emulator's declarations, not
 * the toolkit's. */
#ifndef SC_EMU_CUDA_RUNTIME_API_H
#define SC_EMU_CUDA_RUNTIME_API_H
#include <cuda_runtime.h>
#endif
