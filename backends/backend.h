/* The backend vtable (docs/DESIGN.md, backends/; after ggml's ggml_backend_i): what the plan executor
 * (backends/plan_exec.h) needs from a device. One device arena per backend, allocated once; copies
 * between host and device are asynchronous and identified by transfer ids; run_node computes one
 * node with tensors that already point into the arena.
 *
 * A CPU backend (backend_cpu.c) models a device with a capped arena (one malloc, the cap checked)
 * and a copy thread per link direction, so budgets and copy/compute overlap are exercised without a GPU.
 */
#ifndef SC_BACKEND_H
#define SC_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "graph/graph.h"
#include "graph/passes.h"

typedef struct sc_backend sc_backend;

/* Where steps run. CPU: the CPU backend. CUDA: the CUDA backend (backends/cuda/backend_cuda.h,
 * built when nvcc was found). AUTO: CUDA when this build has the CUDA backend and a device is
 * present, else CPU. */
typedef enum { SC_DEVICE_CPU, SC_DEVICE_CUDA, SC_DEVICE_AUTO } sc_device;

/* AUTO -> CPU or CUDA; CUDA -> CUDA when usable, else a status naming why (no CUDA support in this
 * build, or the CUDA runtime's error text); CPU -> CPU (backends/device.c). */
sc_status sc_device_resolve(sc_device requested, sc_device *out);
const char *sc_device_name(sc_device d); /* "cpu", "cuda", "auto" */

typedef struct {
    int64_t capacity;   /* device bytes the backend may hand out (the budget); 0 = unlimited */
    int64_t arena_bytes;/* size of the current arena, 0 when none */
    int64_t copied_h2d, copied_d2h; /* bytes moved since creation */
    int64_t staged;     /* of those, bytes that went through the backend's own staging buffers
                           (host memory it could not copy from or to directly) */
} sc_backend_memory;

typedef struct {
    const char *name;
    /* Its compute runs on the host's own cores (the CPU backend): work the executor could hand to
     * another host thread (host optimizer updates) would only compete with it, so it runs inline. */
    bool compute_on_host;
    /* Its collectives (AllReduce, Reduce, Broadcast) run on the device, enqueued by run_node (CUDA with
     * NCCL). Otherwise the executor overlaps them itself: it copies a bucket to host memory and a
     * thread of its own runs the process group's collective (backends/plan_exec_comm.c). */
    bool device_collectives;
    /* Allocates the device arena (64-byte aligned); fails naming the cap when bytes exceed it. */
    sc_status (*arena_create)(sc_backend *b, int64_t bytes, void **base);
    void (*arena_destroy)(sc_backend *b);
    /* Starts a copy; *transfer receives its id (ids increase from 1). */
    sc_status (*copy_h2d)(sc_backend *b, void *dev, const void *host, int64_t bytes, int64_t *transfer);
    sc_status (*copy_d2h)(sc_backend *b, void *host, const void *dev, int64_t bytes, int64_t *transfer);
    /* The same for n f32 elements that cross the link in the 16-bit type `wire` (SC_BF16, SC_F16):
     * rounded to it (nearest even, core/half.h) before the link, 2 bytes each on it, widened after,
     * so dst[i] = widen(round(src[i])). to_device picks the direction. Streaming plans use it in
     * mixed precision (schedule/wire.c); the executor refuses them on a backend where it is NULL. */
    sc_status (*copy_wire)(sc_backend *b, bool to_device, void *dst, const void *src, int64_t n, sc_dtype wire,
                           int64_t *transfer);
    /* Blocks until the transfer finished (and every transfer started before it). */
    sc_status (*wait)(sc_backend *b, int64_t transfer);
    sc_status (*run_node)(sc_backend *b, const sc_node *n, const sc_tensor *in, int n_in, sc_tensor *out, int n_out);
    /* Blocks until every started copy and computation finished. */
    sc_status (*synchronize)(sc_backend *b);
    void (*memory)(sc_backend *b, sc_backend_memory *m);
    /* *finite = every element of the n device tensors t (float dtypes) is finite, after the work
     * started so far; blocks until it knows. May be NULL: the executor then copies them to the host
     * to scan there (plan_session_state_finite). */
    sc_status (*all_finite)(sc_backend *b, const sc_tensor *t, int n, bool *finite);
    /* Parameter data changed in place (an optimizer step, weights loaded): caches keyed by weight
     * pointers (oneDNN's reordered weights) must not be trusted any more. May be NULL. */
    void (*params_changed)(sc_backend *b);
    /* Dropout masks are a function of (seed, step) (backends/cpu/cpu_rng.h): sets them for the
     * nodes run from now on. */
    void (*set_seed)(sc_backend *b, uint64_t seed, uint64_t step);
    /* Host threads the backend's kernels may use (n > 0). */
    void (*set_threads)(sc_backend *b, int n);
    /* Kernels constant folding may run on the host while a model is bound (graph/passes.h), or
     * NULL when the backend has none. */
    const sc_node_evaluator *(*evaluator)(sc_backend *b);
    /* Host memory the link copies to and from directly (pinned, on CUDA), all four may be NULL.
     * host_pin: the executor's session pins a streamed value's home (its graph data) for its
     * lifetime; false when that range cannot be pinned (it shares a page with a pinned one, or the
     * system refuses), and copies of it are then staged. host_alloc: the session's own host copies
     * (NULL when out of memory); host_free gives one back. */
    bool (*host_pin)(sc_backend *b, void *host, int64_t bytes);
    void (*host_unpin)(sc_backend *b, void *host);
    void *(*host_alloc)(sc_backend *b, int64_t bytes);
    void (*host_free)(sc_backend *b, void *p);
    void (*destroy)(sc_backend *b);
} sc_backend_i;

/* The entries every backend defines, as functions named <prefix>_<entry> (run_node: <prefix>_run),
 * with the host's seed and thread state (below): a backend's interface table starts with these. */
#define SC_BACKEND_ENTRIES(prefix)                                                                      \
    .arena_create = prefix##_arena_create, .arena_destroy = prefix##_arena_destroy,                     \
    .copy_h2d = prefix##_copy_h2d, .copy_d2h = prefix##_copy_d2h, .copy_wire = prefix##_copy_wire,     \
    .wait = prefix##_wait, .run_node = prefix##_run, .synchronize = prefix##_synchronize,              \
    .memory = prefix##_memory, .destroy = prefix##_destroy, .set_seed = backend_host_set_seed,          \
    .set_threads = backend_host_set_threads

struct sc_backend {
    const sc_backend_i *iface;
    void *ctx;
};

/* A backend's handle *b and its zeroed context *ctx of ctx_size bytes; when host memory runs out,
 * neither and a status naming the backend. */
sc_status backend_alloc(const char *name, size_t ctx_size, sc_backend **b, void **ctx);
/* arena_create's first checks, the same on every backend: no arena exists yet (exists, with its
 * arena_bytes) and bytes fit the capacity (0: none); the message names the backend. */
sc_status backend_arena_admits(const char *backend, bool exists, int64_t arena_bytes, int64_t capacity, int64_t bytes);

/* The host's Dropout (seed, step) state and thread count (backends/cpu/cpu_rng.h, OpenMP): the CPU
 * backend's set_seed and set_threads, and the CUDA backend's, whose Dropout keys are computed on
 * the host from the same state so both draw the same masks. */
void backend_host_set_seed(sc_backend *b, uint64_t seed, uint64_t step);
void backend_host_set_threads(sc_backend *b, int n);
/* The host threads kernels use now (the last set_threads, or the OpenMP default). */
int backend_host_threads(void);

/* capacity: the modelled device memory in bytes (0 = unlimited). */
sc_status backend_cpu_create(int64_t capacity, sc_backend **out);
/* Copies of at most max_bytes started while no other transfer is pending are done at once by the
 * caller instead of the copy thread (default 0: every copy goes through the thread). Handing a
 * few-hundred-byte copy to another core costs two thread wake-ups, 20-30 us on this VM, against
 * 50 ns of memcpy: a depth-10000 ResNet step streaming its weights makes 880k transfers and took
 * 30.5 s instead of 1 s. Tests keep 0 (or alternate) so that transfers are asynchronous and a plan
 * that reads data before its WAIT is caught. */
#define SC_CPU_INLINE_COPY_DEFAULT (64 << 10)
void backend_cpu_set_inline_copies(sc_backend *b, int64_t max_bytes);
/* A modelled link: every copy takes at least bytes / bytes_per_second on its direction's copy
 * thread (each direction its own FIFO, as a GPU's copy engines), and none is done inline; 0 (the
 * default) copies at memcpy speed. For studying offload on the CPU as it would behave over PCIe. */
void backend_cpu_set_link_bandwidth(sc_backend *b, double bytes_per_second);


/* What backend_open makes (backends/device.c). */
typedef struct {
    sc_device device;      /* CPU or CUDA (resolved) */
    int64_t capacity;      /* device bytes the arena may take; 0 = unlimited (CUDA: its free memory) */
    int64_t inline_copies; /* CPU: backend_cpu_set_inline_copies */
    double link_bandwidth; /* CPU: backend_cpu_set_link_bandwidth */
    bool tf32;             /* CUDA: TF32 tensor cores for f32 GEMM and convolutions */
    bool adapt_threads;    /* inference on the CPU: each pass runs with the host's thread count or
                              with 1, whichever measured faster (backends/thread_governor.h) */
} sc_backend_config;

sc_status backend_open(const sc_backend_config *c, sc_backend **out);
/* The device's free memory in bytes, or -1 when unlimited or unknown (the CPU's model has no
 * fixed size; a CUDA runtime that cannot say reports its error when the backend is opened). */
int64_t backend_device_free_bytes(sc_device d);
/* A device's model for cache keys ("NVIDIA-H100-80GB-HBM3-sm90-cudart12040": name, compute
 * capability, CUDA runtime), letters and digits only; false (out "") for the CPU or when it cannot
 * be read. */
bool backend_device_model(sc_device d, char *out, size_t size);

static inline void backend_destroy(sc_backend *b) {
    if (b) b->iface->destroy(b);
}

#endif
