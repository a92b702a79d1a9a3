/* The CUDA backend (contract in backend_cuda.h and backends/backend.h).
 *
 * Streams: kernels run on one compute stream; host-to-device copies on an H2D stream and
 * device-to-host copies on a D2H stream, so OFFLOAD and PREFETCH overlap the RUN steps that follow
 * them. Ordering with events: a copy first waits (on its own stream) for an event recorded on the
 * compute stream when the copy is started, so it sees every kernel enqueued before it (the value it
 * offloads is computed; the memory it prefetches into is no longer read). wait(t) makes the compute
 * stream wait for transfers <= t and blocks the host until they finished, as the contract says.
 *
 * Pinned memory: the driver copies pageable memory only synchronously, through its own bounce
 * buffers. The executor therefore pins what it streams: each streamed parameter's and state's home
 * is registered (host_pin: cudaHostRegister) for the session's life, and its own host copies are
 * cudaHostAlloc'd (host_alloc). A copy whose host range lies inside a pinned range is one
 * cudaMemcpyAsync, host to device or back, overlapping compute. Anything else (feeds, outputs, a
 * small tensor sharing a page with a pinned one, which the driver refuses to register twice) goes
 * through pinned staging buffers (cudaHostAlloc, pooled): H2D copies the host data into staging
 * before the async copy; D2H copies from staging into the host buffer when the transfer is waited
 * for (or at synchronize). sc_backend_memory.staged counts those bytes.
 *
 * Copies through a 16-bit wire type (copy_wire, schedule/wire.c) always stage: host to device, the
 * host rounds the f32 data into pinned staging (core/half.h), 2 bytes an element cross into a
 * device staging buffer (pooled, outside the arena: the transfers in flight hold one each), and a
 * kernel on the copy stream widens them into the destination (cu_widen.cu); device to host, a kernel
 * rounds into device staging, the copy brings it into pinned staging, and the wait widens it into
 * the caller's buffer.
 *
 * Memory: one cudaMalloc per plan arena, refused with the bytes asked and free when it exceeds the
 * capacity or the device's free memory (cudaMemGetInfo). Kernels' scratch (cu_scratch) is separate,
 * grown on demand and bounded by what the arena leaves of the capacity (at least 256 MiB).
 * SCORCH_CUDA_SYNC=1 synchronises after every node, so an asynchronous fault names its node.
 */
#include "backends/comm.h"
#include "backends/cuda/backend_cuda.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_common.h"
#include "core/free_all.h"
#include "core/half.h"

typedef struct {
    void *p;
    int64_t cap;
    bool busy;
} pinned_buf;

typedef struct {
    int64_t id;
    cudaEvent_t done;
    bool d2h;
    void *host_dst;   /* D2H: the caller's buffer, filled from staging on completion */
    int staging;      /* index into the pinned pool; -1 for a direct copy */
    int64_t bytes;    /* on the link */
    sc_dtype wire;    /* copy_wire: the 16-bit type crossing (bytes / 2 f32 elements), else 0 */
    int dev_staging;  /* copy_wire: index into the device staging pool, else -1 */
} transfer;

/* A pinned host range: registered (host_pin) or allocated (host_alloc). */
typedef struct {
    uintptr_t base;
    int64_t bytes;
    bool allocated;
} pinned_range;

typedef struct {
    cu_ctx cu;
    int64_t capacity;
    void *arena;
    int64_t arena_bytes;
    cudaStream_t h2d_stream, d2h_stream;
    cudaEvent_t compute_mark;
    pinned_buf *pool;
    int n_pool, cap_pool;
    pinned_buf *dpool; /* device staging of copy_wire */
    int n_dpool, cap_dpool;
    transfer *pend; /* started and not yet completed, in id order */
    int n_pend, cap_pend;
    int64_t issued;
    int64_t h2d, d2h, staged;
    pinned_range *pins; /* sorted by base */
    int n_pins, cap_pins;
    bool sync_each_node;
    bool math_tf32; /* the math mode cuBLAS was last set to (cu.tf32 is the wanted one) */
    unsigned *finite_flag; /* device word of cuda_all_finite */
} cuda_backend;

int backend_cuda_device(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        cudaGetLastError();
        return 0;
    }
    return sc_comm_local_rank() % n;
}

static int64_t device_free_bytes(void) {
    size_t fr = 0, total = 0;
    if (cudaMemGetInfo(&fr, &total) != cudaSuccess) return -1;
    return (int64_t)fr;
}

/* ---- arena ---- */

static sc_status cuda_arena_create(sc_backend *b, int64_t bytes, void **base) {
    cuda_backend *c = b->ctx;
    SC_TRY(backend_arena_admits("cuda", c->arena != NULL, c->arena_bytes, c->capacity, bytes));
    int64_t fr = device_free_bytes();
    if (fr >= 0 && bytes > fr)
        return sc_errorf("cuda backend: the plan needs an arena of %lld bytes; the GPU has %lld bytes free",
                         (long long)bytes, (long long)fr);
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, (size_t)(bytes < 256 ? 256 : bytes));
    if (e != cudaSuccess)
        return sc_errorf("cuda backend: cudaMalloc of the %lld-byte arena failed (%s); %lld bytes free", (long long)bytes,
                         cudaGetErrorString(e), (long long)fr);
    c->arena = p;
    c->arena_bytes = bytes;
    int64_t left = c->capacity > 0 ? c->capacity - bytes : 0;
    c->cu.scratch_limit = c->capacity > 0 ? (left > (256ll << 20) ? left : (256ll << 20)) : 0;
    *base = p;
    return SC_OK;
}

static void cuda_arena_destroy(sc_backend *b) {
    cuda_backend *c = b->ctx;
    if (!c->arena) return;
    cudaDeviceSynchronize();
    cudaFree(c->arena);
    c->arena = NULL;
    c->arena_bytes = 0;
}

/* ---- transfers ---- */

/* A free buffer of at least `bytes` from a pool (the smallest that fits), else a new one: pinned
 * host memory, or device memory for copy_wire's staging. */
static sc_status buf_get(pinned_buf **pool, int *n, int *cap_n, bool device, int64_t bytes, int *idx) {
    int best = -1;
    for (int i = 0; i < *n; i++)
        if (!(*pool)[i].busy && (*pool)[i].cap >= bytes && (best < 0 || (*pool)[i].cap < (*pool)[best].cap)) best = i;
    if (best < 0) {
        if (*n == *cap_n) {
            int cap = *cap_n ? 2 * *cap_n : 16;
            pinned_buf *p = realloc(*pool, sizeof *p * (size_t)cap);
            if (!p) return sc_errorf("cuda backend: out of host memory");
            *pool = p;
            *cap_n = cap;
        }
        void *h = NULL;
        int64_t cap = bytes < 4096 ? 4096 : bytes;
        cudaError_t e = device ? cudaMalloc(&h, (size_t)cap) : cudaHostAlloc(&h, (size_t)cap, cudaHostAllocDefault);
        if (e != cudaSuccess)
            return sc_errorf("cuda backend: %s of %lld staging bytes failed (%s)", device ? "cudaMalloc" : "cudaHostAlloc",
                             (long long)cap, cudaGetErrorString(e));
        (*pool)[*n] = (pinned_buf){h, cap, false};
        best = (*n)++;
    }
    (*pool)[best].busy = true;
    *idx = best;
    return SC_OK;
}

static sc_status pool_get(cuda_backend *c, int64_t bytes, int *idx) {
    return buf_get(&c->pool, &c->n_pool, &c->cap_pool, false, bytes, idx);
}

/* Index of the first pin whose base is above p. */
static int pin_upper(const cuda_backend *c, uintptr_t p) {
    int lo = 0, hi = c->n_pins;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (c->pins[mid].base <= p) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Whether [p, p + bytes) lies inside one pinned range. */
static bool host_pinned(const cuda_backend *c, const void *p, int64_t bytes) {
    int i = pin_upper(c, (uintptr_t)p) - 1;
    return i >= 0 && (uintptr_t)p + (uint64_t)bytes <= c->pins[i].base + (uint64_t)c->pins[i].bytes;
}

static bool pin_add(cuda_backend *c, void *p, int64_t bytes, bool allocated) {
    if (c->n_pins == c->cap_pins) {
        int cap = c->cap_pins ? 2 * c->cap_pins : 64;
        pinned_range *q = realloc(c->pins, sizeof *q * (size_t)cap);
        if (!q) return false;
        c->pins = q, c->cap_pins = cap;
    }
    int at = pin_upper(c, (uintptr_t)p);
    memmove(c->pins + at + 1, c->pins + at, sizeof *c->pins * (size_t)(c->n_pins - at));
    c->pins[at] = (pinned_range){(uintptr_t)p, bytes, allocated};
    c->n_pins++;
    return true;
}

/* Removes the pin at base p; its kind, or -1 when there is none. */
static int pin_remove(cuda_backend *c, const void *p) {
    int i = pin_upper(c, (uintptr_t)p) - 1;
    if (i < 0 || c->pins[i].base != (uintptr_t)p) return -1;
    int allocated = c->pins[i].allocated;
    memmove(c->pins + i, c->pins + i + 1, sizeof *c->pins * (size_t)(c->n_pins - i - 1));
    c->n_pins--;
    return allocated;
}

static bool cuda_host_pin(sc_backend *b, void *host, int64_t bytes) {
    cuda_backend *c = b->ctx;
    if (bytes <= 0) return false;
    if (cudaHostRegister(host, (size_t)bytes, cudaHostRegisterDefault) != cudaSuccess) {
        cudaGetLastError(); /* a page shared with a pinned range, or the system's limit: staged instead */
        return false;
    }
    if (pin_add(c, host, bytes, false)) return true;
    cudaHostUnregister(host);
    return false;
}

static void cuda_host_unpin(sc_backend *b, void *host) {
    if (pin_remove(b->ctx, host) == 0) cudaHostUnregister(host);
}

static void *cuda_host_alloc(sc_backend *b, int64_t bytes) {
    void *p = NULL;
    if (cudaHostAlloc(&p, (size_t)(bytes > 0 ? bytes : 1), cudaHostAllocDefault) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    if (pin_add(b->ctx, p, bytes, true)) return p;
    cudaFreeHost(p);
    return NULL;
}

static void cuda_host_free(sc_backend *b, void *p) {
    if (pin_remove(b->ctx, p) == 1) cudaFreeHost(p);
}

/* Room for one more pending transfer. */
static sc_status pend_reserve(cuda_backend *c) {
    if (c->n_pend < c->cap_pend) return SC_OK;
    int cap = c->cap_pend ? 2 * c->cap_pend : 64;
    transfer *p = realloc(c->pend, sizeof *p * (size_t)cap);
    if (!p) return sc_errorf("cuda backend: out of host memory queueing a copy");
    c->pend = p;
    c->cap_pend = cap;
    return SC_OK;
}

/* A copy's CUDA calls: the first failure is kept in st (and names the call), later ones skipped. */
#define XF_CHECK(expr)                                                                                     \
    do {                                                                                                   \
        cudaError_t e_ = (expr);                                                                           \
        if (e_ != cudaSuccess && !st) st = cu_fail(nc, "CUDA", #expr, __FILE__, __LINE__, cudaGetErrorString(e_)); \
    } while (0)

static sc_status copy_start(cuda_backend *c, bool d2h, void *dst, const void *src, int64_t bytes, int64_t *id) {
    SC_TRY(pend_reserve(c));
    int st_idx = -1;
    bool direct = host_pinned(c, d2h ? dst : src, bytes);
    if (!direct) SC_TRY(pool_get(c, bytes, &st_idx));
    void *staging = direct ? NULL : c->pool[st_idx].p;
    cudaStream_t s = d2h ? c->d2h_stream : c->h2d_stream;
    transfer t = {.id = c->issued + 1, .d2h = d2h, .host_dst = d2h && !direct ? dst : NULL, .staging = st_idx,
                  .bytes = bytes, .dev_staging = -1};
    const cu_call *nc = NULL;
    sc_status st = SC_OK;
    XF_CHECK(cudaEventCreateWithFlags(&t.done, cudaEventDisableTiming));
    if (!direct && !d2h && bytes > 0) memcpy(staging, src, (size_t)bytes);
    if (!st && c->cu.n_comm_pend) st = cu_collective_settle(&c->cu, d2h ? src : dst, bytes); /* ordered via the mark */
    XF_CHECK(cudaEventRecord(c->compute_mark, c->cu.stream));
    XF_CHECK(cudaStreamWaitEvent(s, c->compute_mark, 0));
    void *to = d2h && !direct ? staging : dst;
    const void *from = !d2h && !direct ? staging : src;
    if (bytes > 0) XF_CHECK(cudaMemcpyAsync(to, from, (size_t)bytes, d2h ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, s));
    XF_CHECK(cudaEventRecord(t.done, s));
    if (st) {
        if (st_idx >= 0) c->pool[st_idx].busy = false;
        if (t.done) cudaEventDestroy(t.done);
        return sc_status_prefix(st, "copy of %lld bytes: ", (long long)bytes);
    }
    c->pend[c->n_pend++] = t;
    *id = ++c->issued;
    if (d2h) c->d2h += bytes;
    else c->h2d += bytes;
    if (!direct) c->staged += bytes;
    return SC_OK;
}

/* copy_wire (the contract in backends/backend.h; how, at the top). */
static sc_status cuda_copy_wire(sc_backend *b, bool to_device, void *dst, const void *src, int64_t n, sc_dtype wire,
                                int64_t *id) {
    cuda_backend *c = b->ctx;
    if (wire != SC_BF16 && wire != SC_F16) return sc_errorf("cuda backend: a copy through %s (bf16 and f16 only)", sc_dtype_name(wire));
    SC_TRY(pend_reserve(c));
    int64_t bytes = 2 * n;
    int hs = -1, ds = -1;
    SC_TRY(pool_get(c, bytes, &hs));
    sc_status st = buf_get(&c->dpool, &c->n_dpool, &c->cap_dpool, true, bytes, &ds);
    transfer t = {.id = c->issued + 1, .d2h = !to_device, .host_dst = to_device ? NULL : dst, .staging = hs,
                  .bytes = bytes, .wire = wire, .dev_staging = ds};
    void *hbuf = c->pool[hs].p, *dbuf = ds >= 0 ? c->dpool[ds].p : NULL;
    cudaStream_t s = to_device ? c->h2d_stream : c->d2h_stream;
    const cu_call *nc = NULL;
    XF_CHECK(cudaEventCreateWithFlags(&t.done, cudaEventDisableTiming));
    if (!st && to_device) {
        if (wire == SC_F16) sc_f32_to_f16_n(hbuf, src, n);
        else sc_f32_to_bf16_n(hbuf, src, n);
    }
    if (!st && c->cu.n_comm_pend) st = cu_collective_settle(&c->cu, to_device ? dst : src, 4 * n);
    XF_CHECK(cudaEventRecord(c->compute_mark, c->cu.stream));
    XF_CHECK(cudaStreamWaitEvent(s, c->compute_mark, 0));
    if (to_device) {
        XF_CHECK(cudaMemcpyAsync(dbuf, hbuf, (size_t)bytes, cudaMemcpyHostToDevice, s));
        if (!st) st = cu_half_cast_launch(s, dst, SC_F32, dbuf, wire, n);
    } else {
        if (!st) st = cu_half_cast_launch(s, dbuf, wire, src, SC_F32, n);
        XF_CHECK(cudaMemcpyAsync(hbuf, dbuf, (size_t)bytes, cudaMemcpyDeviceToHost, s));
    }
    XF_CHECK(cudaEventRecord(t.done, s));
    if (st) {
        c->pool[hs].busy = false;
        if (ds >= 0) c->dpool[ds].busy = false;
        if (t.done) cudaEventDestroy(t.done);
        return sc_status_prefix(st, "copy of %lld elements through %s: ", (long long)n, sc_dtype_name(wire));
    }
    c->pend[c->n_pend++] = t;
    *id = ++c->issued;
    if (to_device) c->h2d += bytes;
    else c->d2h += bytes;
    c->staged += bytes;
    return SC_OK;
}

static sc_status cuda_copy_h2d(sc_backend *b, void *dev, const void *host, int64_t bytes, int64_t *transfer) {
    return copy_start(b->ctx, false, dev, host, bytes, transfer);
}

static sc_status cuda_copy_d2h(sc_backend *b, void *host, const void *dev, int64_t bytes, int64_t *transfer) {
    return copy_start(b->ctx, true, host, dev, bytes, transfer);
}

/* Completes every pending transfer with id <= t, oldest first. */
static sc_status cuda_wait(sc_backend *b, int64_t t) {
    cuda_backend *c = b->ctx;
    if (t > c->issued) return sc_errorf("cuda backend: wait for transfer %lld, which was never started", (long long)t);
    int k = 0;
    sc_status st = SC_OK;
    for (; k < c->n_pend && c->pend[k].id <= t; k++) {
        transfer *x = &c->pend[k];
        cudaError_t e = cudaStreamWaitEvent(c->cu.stream, x->done, 0);
        if (e == cudaSuccess) e = cudaEventSynchronize(x->done);
        if (e != cudaSuccess && !st)
            st = sc_errorf("cuda backend: transfer %lld of %lld bytes failed: %s", (long long)x->id, (long long)x->bytes,
                           cudaGetErrorString(e));
        const void *got = x->staging >= 0 ? c->pool[x->staging].p : NULL;
        if (!st && x->d2h && got && x->bytes > 0 && x->wire == SC_F16) sc_f16_to_f32_n(x->host_dst, got, x->bytes / 2);
        else if (!st && x->d2h && got && x->bytes > 0 && x->wire == SC_BF16) sc_bf16_to_f32_n(x->host_dst, got, x->bytes / 2);
        else if (!st && x->d2h && got && x->bytes > 0) memcpy(x->host_dst, got, (size_t)x->bytes);
        if (x->staging >= 0) c->pool[x->staging].busy = false;
        if (x->dev_staging >= 0) c->dpool[x->dev_staging].busy = false;
        cudaEventDestroy(x->done);
    }
    memmove(c->pend, c->pend + k, sizeof *c->pend * (size_t)(c->n_pend - k));
    c->n_pend -= k;
    return st;
}

static sc_status cuda_synchronize(sc_backend *b) {
    cuda_backend *c = b->ctx;
    sc_status st = cuda_wait(b, c->issued);
    sc_status pend = cu_collective_settle(&c->cu, NULL, -1); /* the compute stream waits for the collectives */
    if (st) sc_status_free(pend);
    else st = pend;
    if (cu_nccl_active()) { /* a dead or hung rank must not block this forever */
        sc_status nst = cu_nccl_synchronize(c->cu.stream);
        if (st) sc_status_free(nst);
        return st ? st : nst;
    }
    cudaError_t e = cudaStreamSynchronize(c->cu.stream);
    if (e != cudaSuccess && !st) st = sc_errorf("cuda backend: a kernel failed: %s", cudaGetErrorString(e));
    return st;
}

/* ---- nodes ---- */

static sc_status cuda_run(sc_backend *b, const sc_node *n, const sc_tensor *in, int n_in, sc_tensor *out, int n_out) {
    cuda_backend *c = b->ctx;
    cu_kernel k = cu_kernels[n->op];
    if (!k) {
        const char *why = sc_kernel_missing_reason(n->op);
        return sc_errorf("node '%s': op %s is not supported by the CUDA backend%s%s", n->name, sc_op_name(n->op),
                         why ? ": " : "", why ? why : "");
    }
    cu_call call = {&c->cu, n, in, n_in, out, n_out};
    if (c->cu.n_comm_pend) /* a collective still reading or writing one of these (cu_collective.c) */
        for (int k = 0; k < n_in + n_out; k++) {
            const sc_tensor *t = k < n_in ? &in[k] : &out[k - n_in];
            if (t->data) SC_TRY(cu_collective_settle(&c->cu, t->data, sc_desc_bytes(&t->desc)));
        }
    if (c->math_tf32 != c->cu.tf32) { /* set here, where a failure can be returned */
        CUBLAS_CHECK(&call, cublasSetMathMode(c->cu.cublas, c->cu.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
        c->math_tf32 = c->cu.tf32;
    }
    SC_TRY(cu_needs_widening(&call) ? cu_run_widened(k, &call) : k(&call));
    if (c->sync_each_node) {
        cudaError_t e = cudaStreamSynchronize(c->cu.stream);
        if (e != cudaSuccess) return cu_errorf(&call, "kernel failed: %s", cudaGetErrorString(e));
    }
    return SC_OK;
}

/* One flag for all the tensors, cleared, set by any non-finite element, read back once: the state's
 * check costs a launch per tensor and one 4-byte copy, not a copy of the state. Ordered on the
 * compute stream after the step's kernels; the copies in flight are waited for first. */
static sc_status cuda_all_finite(sc_backend *b, const sc_tensor *t, int n, bool *finite) {
    cuda_backend *c = b->ctx;
    const cu_call *none = NULL;
    *finite = true;
    SC_TRY(cuda_wait(b, c->issued));
    SC_TRY(cu_collective_settle(&c->cu, NULL, -1));
    if (!c->finite_flag) CU_CHECK(none, cudaMalloc((void **)&c->finite_flag, sizeof *c->finite_flag));
    CU_CHECK(none, cudaMemsetAsync(c->finite_flag, 0, sizeof *c->finite_flag, c->cu.stream));
    for (int i = 0; i < n; i++)
        SC_TRY(cu_nonfinite_launch(c->cu.stream, t[i].data, t[i].desc.dtype, sc_desc_numel(&t[i].desc), c->finite_flag));
    CU_CHECK(none, cudaMemcpyAsync(c->cu.pinned_small, c->finite_flag, sizeof *c->finite_flag, cudaMemcpyDeviceToHost,
                                   c->cu.stream));
    CU_CHECK(none, cudaStreamSynchronize(c->cu.stream));
    *finite = *(const unsigned *)c->cu.pinned_small == 0;
    return SC_OK;
}

static void cuda_memory(sc_backend *b, sc_backend_memory *m) {
    cuda_backend *c = b->ctx;
    *m = (sc_backend_memory){.capacity = c->capacity, .arena_bytes = c->arena_bytes, .copied_h2d = c->h2d,
                             .copied_d2h = c->d2h, .staged = c->staged};
}

static void cuda_destroy(sc_backend *b) {
    if (!b) return;
    cuda_backend *c = b->ctx;
    if (c) {
        sc_status_free(cuda_synchronize(b));
        cuda_arena_destroy(b);
        if (c->cu.scratch) cudaFree(c->cu.scratch);
        if (c->cu.widen) cudaFree(c->cu.widen);
        if (c->finite_flag) cudaFree(c->finite_flag);
        cu_collective_release(&c->cu);
        if (c->cu.pinned_small) cudaFreeHost(c->cu.pinned_small);
        for (int i = 0; i < c->n_pool; i++) cudaFreeHost(c->pool[i].p);
        for (int i = 0; i < c->n_dpool; i++) cudaFree(c->dpool[i].p);
        free(c->dpool);
        if (c->cu.cublas) cublasDestroy(c->cu.cublas);
#ifdef SC_HAVE_CUDNN
        if (c->cu.cudnn) cudnnDestroy(c->cu.cudnn);
#endif
        if (c->compute_mark) cudaEventDestroy(c->compute_mark);
        if (c->cu.stream) cudaStreamDestroy(c->cu.stream);
        if (c->h2d_stream) cudaStreamDestroy(c->h2d_stream);
        if (c->d2h_stream) cudaStreamDestroy(c->d2h_stream);
        for (int i = 0; i < c->n_pins; i++) /* the sessions give theirs back first; this is a backstop */
            if (c->pins[i].allocated) cudaFreeHost((void *)c->pins[i].base);
            else cudaHostUnregister((void *)c->pins[i].base);
        SC_FREE_ALL(c->pins, c->pool, c->pend, c);
    }
    free(b);
}

/* set_seed: Dropout keys come from the host's (seed, step) state; set_threads: the threads of the
 * session's host work (host updates). No cache depends on parameter values (params_changed) and
 * constant folding has no CUDA evaluator. */
static const sc_backend_i cuda_iface = {
    SC_BACKEND_ENTRIES(cuda),
    .name = "cuda",
    .all_finite = cuda_all_finite,
#ifdef SC_HAVE_NCCL
    .device_collectives = true, /* NCCL on the compute stream (cu_collective.c) */
#endif
    .host_pin = cuda_host_pin,
    .host_unpin = cuda_host_unpin,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
};

bool backend_cuda_available(char *why, size_t why_size) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        if (why && why_size)
            snprintf(why, why_size, "cudaGetDeviceCount: %s", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        cudaGetLastError(); /* clear the sticky-free error so later calls start clean */
        return false;
    }
    return true;
}

bool backend_cuda_has_cudnn(void) {
#ifdef SC_HAVE_CUDNN
    return true;
#else
    return false;
#endif
}

void backend_cuda_set_tf32(sc_backend *b, bool on) {
    cuda_backend *c = b->ctx;
    c->cu.tf32 = on; /* cuBLAS's math mode follows at the next node (cuda_run), cuDNN's per call */
}

/* Everything created in order; any failure destroys what exists (cuda_destroy copes with NULLs). */
sc_status backend_cuda_create(int64_t capacity, sc_backend **out) {
    *out = NULL;
    char why[256];
    if (!backend_cuda_available(why, sizeof why)) return sc_errorf("cuda backend: no CUDA device (%s)", why);
    sc_backend *b;
    void *ctx;
    SC_TRY(backend_alloc("cuda", sizeof(cuda_backend), &b, &ctx));
    cuda_backend *c = ctx;
    b->iface = &cuda_iface;
    b->ctx = c;
    c->capacity = capacity;
    c->cu.step = -1;
    const char *env = getenv("SCORCH_CUDA_SYNC");
    c->sync_each_node = env && env[0] == '1';
    sc_status st = SC_OK;
#define CREATE_CHECK(expr, text)                                                                           \
    do {                                                                                                   \
        if (!st && (expr)) st = sc_errorf("cuda backend: %s failed (%s:%d): %s", #expr, __FILE__, __LINE__, text); \
    } while (0)
    cudaError_t e;
    c->cu.device = backend_cuda_device();
    CREATE_CHECK((e = cudaSetDevice(c->cu.device)) != cudaSuccess, cudaGetErrorString(e));
    CREATE_CHECK((e = cudaStreamCreateWithFlags(&c->cu.stream, cudaStreamNonBlocking)) != cudaSuccess, cudaGetErrorString(e));
    CREATE_CHECK((e = cudaStreamCreateWithFlags(&c->h2d_stream, cudaStreamNonBlocking)) != cudaSuccess, cudaGetErrorString(e));
    CREATE_CHECK((e = cudaStreamCreateWithFlags(&c->d2h_stream, cudaStreamNonBlocking)) != cudaSuccess, cudaGetErrorString(e));
    CREATE_CHECK((e = cudaEventCreateWithFlags(&c->compute_mark, cudaEventDisableTiming)) != cudaSuccess, cudaGetErrorString(e));
    CREATE_CHECK((e = cudaHostAlloc(&c->cu.pinned_small, 4096, cudaHostAllocDefault)) != cudaSuccess, cudaGetErrorString(e));
    cublasStatus_t cs;
    CREATE_CHECK((cs = cublasCreate(&c->cu.cublas)) != CUBLAS_STATUS_SUCCESS, cublasGetStatusString(cs));
    CREATE_CHECK((cs = cublasSetStream(c->cu.cublas, c->cu.stream)) != CUBLAS_STATUS_SUCCESS, cublasGetStatusString(cs));
    CREATE_CHECK((cs = cublasSetMathMode(c->cu.cublas, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS, cublasGetStatusString(cs));
#ifdef SC_HAVE_CUDNN
    cudnnStatus_t ds;
    CREATE_CHECK((ds = cudnnCreate(&c->cu.cudnn)) != CUDNN_STATUS_SUCCESS, cudnnGetErrorString(ds));
    CREATE_CHECK((ds = cudnnSetStream(c->cu.cudnn, c->cu.stream)) != CUDNN_STATUS_SUCCESS, cudnnGetErrorString(ds));
#endif
#undef CREATE_CHECK
    if (st) {
        cuda_destroy(b);
        return st;
    }
    *out = b;
    return SC_OK;
}
