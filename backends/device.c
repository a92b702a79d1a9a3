/* Devices and opening their backends: the one place above the backends that knows which backends
 * exist, so that train/ and the tools reach a device only through sc_backend (backend.h). */
#include "backends/backend.h"

#include <stdio.h>

#ifdef SCORCH_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "backends/cuda/backend_cuda.h"
#endif

const char *sc_device_name(sc_device d) {
    return d == SC_DEVICE_CUDA ? "cuda" : d == SC_DEVICE_AUTO ? "auto" : "cpu";
}

sc_status sc_device_resolve(sc_device requested, sc_device *out) {
    *out = SC_DEVICE_CPU;
    if (requested == SC_DEVICE_CPU) return SC_OK;
#ifdef SCORCH_HAVE_CUDA
    char why[256] = "";
    if (backend_cuda_available(why, sizeof why)) {
        *out = SC_DEVICE_CUDA;
        return SC_OK;
    }
    if (requested == SC_DEVICE_CUDA) return sc_errorf("--device cuda: no usable CUDA device (%s)", why);
    sc_log(SC_LOG_INFO, "device auto: no CUDA device (%s); training on the CPU", why);
#else
    if (requested == SC_DEVICE_CUDA)
        return sc_errorf("--device cuda: this build has no CUDA support (nvcc was not found when it was configured)");
#endif
    return SC_OK;
}

int64_t backend_device_free_bytes(sc_device d) {
#ifdef SCORCH_HAVE_CUDA
    if (d == SC_DEVICE_CUDA) {
        size_t fr = 0, total = 0;
        if (cudaSetDevice(backend_cuda_device()) != cudaSuccess || cudaMemGetInfo(&fr, &total) != cudaSuccess) {
            cudaGetLastError();
            return -1;
        }
        return (int64_t)fr;
    }
#else
    (void)d;
#endif
    return -1;
}

/* Letters and digits kept, the rest '-': the model names a cache file. */
static void model_clean(char *s) {
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9'))) *s = '-';
}

bool backend_device_model(sc_device d, char *out, size_t size) {
    if (size) out[0] = 0;
#ifdef SCORCH_HAVE_CUDA
    struct cudaDeviceProp prop;
    int rt = 0;
    if (d == SC_DEVICE_CUDA && cudaGetDeviceProperties(&prop, backend_cuda_device()) == cudaSuccess &&
        cudaRuntimeGetVersion(&rt) == cudaSuccess) {
        snprintf(out, size, "%s-sm%d%d-cudart%d", prop.name, prop.major, prop.minor, rt);
        model_clean(out);
        return true;
    }
    cudaGetLastError();
#else
    (void)d;
#endif
    return false;
}

sc_status backend_open(const sc_backend_config *c, sc_backend **out) {
    *out = NULL;
#ifdef SCORCH_HAVE_CUDA
    if (c->device == SC_DEVICE_CUDA) {
        SC_TRY(backend_cuda_create(c->capacity, out));
        backend_cuda_set_tf32(*out, c->tf32);
        return SC_OK;
    }
#endif
    if (c->device != SC_DEVICE_CPU)
        return sc_errorf("internal: device %s is not resolved or not built", sc_device_name(c->device));
    SC_TRY(backend_cpu_create(c->capacity, out));
    backend_cpu_set_inline_copies(*out, c->inline_copies);
    backend_cpu_set_link_bandwidth(*out, c->link_bandwidth);
    return SC_OK;
}
