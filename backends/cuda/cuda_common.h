/* Shared by every file of the CUDA backend (plain C header, included from C and from .cu files).
 *
 * cu_ctx is the backend's device state: the compute stream every kernel runs on, the cuBLAS and
 * (when built with it) cuDNN handles bound to that stream, a scratch workspace grown on demand
 * (reductions, im2col columns, cuDNN workspaces; never part of the plan's arena) and a small pinned
 * buffer for reading scalar / index inputs (Slice starts, Pad pads, lr) back to the host.
 *
 * cu_call is one node's kernel call: the same tensors as the CPU's sc_kernel_call, with device data.
 * Kernels (cu_<family>.cu and the cuBLAS / cuDNN wrappers) enqueue work on ctx->stream and return;
 * they never synchronise except to read a small input back (cu_read_i64 / cu_read_f64).
 *
 * Error checking (docs/STYLE.md habit 7): every CUDA, cuBLAS and cuDNN call goes through CU_CHECK /
 * CUBLAS_CHECK / CUDNN_CHECK, which return an sc_status naming the node, file, line and the
 * library's error text; every launch is followed by CU_LAUNCH_CHECK (in the launcher, after the
 * helper that picked a template instance). Not checked, on purpose: calls in teardown paths
 * (cudaFree, cudaFreeHost, *Destroy*), whose failure nothing can repair and which report an earlier
 * asynchronous error that a checked call already returned.
 */
#ifndef SC_CUDA_COMMON_H
#define SC_CUDA_COMMON_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdint.h>
#ifdef SC_HAVE_CUDNN
#include <cudnn.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#include "backends/common/common.h"
#include "graph/graph.h"

typedef struct {
    int device;
    cudaStream_t stream;      /* compute */
    cublasHandle_t cublas;
#ifdef SC_HAVE_CUDNN
    cudnnHandle_t cudnn;
#endif
    bool tf32;                /* cuBLAS / cuDNN may use TF32 tensor cores for f32 */
    void *scratch;            /* device workspace, scratch_bytes long */
    int64_t scratch_bytes;
    int64_t scratch_limit;    /* the most scratch (and widen) may grow to (0 = the device's free memory) */
    void *widen;              /* f32 copies of a node's 16-bit tensors (cu_widen.cu), widen_bytes long */
    int64_t widen_bytes;
    void *pinned_small;       /* 4 KiB of pinned host memory for cu_read_* */
    int64_t step;             /* the plan step being run, for messages (-1 unknown) */
    /* collectives on NCCL (cu_collective.c): their own stream and scratch, and the device ranges
     * their work still reads or writes, each with the event after which it is done */
    cudaStream_t comm_stream;
    void *comm_scratch;
    int64_t comm_scratch_bytes;
    struct cu_pending {
        const char *lo, *hi;
        cudaEvent_t done;
    } *comm_pend;
    int n_comm_pend, cap_comm_pend;
} cu_ctx;

typedef struct {
    cu_ctx *ctx;
    SC_KERNEL_CALL_FIELDS
} cu_call;

typedef sc_status (*cu_kernel)(const cu_call *c);

/* Indexed by op; NULL = the CUDA backend does not run that op (sc_kernel_missing_reason). */
extern const cu_kernel cu_kernels[SC_OP_COUNT];

/* "node 'x' (Op): <message>" */
sc_status cu_errorf(const cu_call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A failed library call: names the node (c may be NULL), the call, file:line and the error text. */
sc_status cu_fail(const cu_call *c, const char *lib, const char *expr, const char *file, int line, const char *text);

/* Device scratch of at least `bytes`, grown (cudaFree + cudaMalloc after synchronising the stream)
 * when smaller; fails with the bytes asked and free. The pointer is valid until the next call. */
sc_status cu_scratch(const cu_call *c, int64_t bytes, void **p);
/* The same for the f32 copies of a node's 16-bit tensors (a buffer of its own: the kernel that runs
 * on them may take the scratch). */
sc_status cu_widen_buffer(const cu_call *c, int64_t bytes, void **p);
/* Reads input i (i32 or i64, at most 512 values) into host int64s; synchronises the stream. */
sc_status cu_read_i64(const cu_call *c, int i, int64_t *dst, int64_t *n, int64_t max);
/* Reads input i's first element (any float or integer dtype) as a double; synchronises. */
sc_status cu_read_f64(const cu_call *c, int i, double *v);
/* Copies input i (at most max_bytes, and at most 4 KiB) into host memory dst; synchronises. */
sc_status cu_read_bytes(const cu_call *c, int i, void *dst, int64_t max_bytes);

/* Cast helper shared by the element-wise and movement kernels: dst[i] = (dst dtype) src[i]. */
sc_status cu_cast_launch(cudaStream_t s, void *dst, sc_dtype dt, const void *src, sc_dtype st, int64_t n);
/* The same when dt or st is bf16 or f16 (cu_widen.cu): through float, rounding to nearest even. */
sc_status cu_half_cast_launch(cudaStream_t s, void *dst, sc_dtype dt, const void *src, sc_dtype st, int64_t n);
/* 16-bit floats through the f32 kernels (cu_widen.cu): whether the call has a bf16 or f16 tensor its
 * op's kernel does not take as it is, and the call run on f32 copies, outputs rounded once. */
bool cu_needs_widening(const cu_call *c);
sc_status cu_run_widened(cu_kernel k, const cu_call *c);
/* How many calls this process has run through cu_run_widened (tests check a native path stays so). */
int64_t cu_widened_runs(void);
/* Fills n elements of dtype t with v. */
sc_status cu_fill_launch(cudaStream_t s, void *dst, sc_dtype t, double v, int64_t n);
/* NCCL (cu_collective.c): whether a communicator exists, and the backend's synchronize of stream s
 * then, which fails after the process group's timeout instead of waiting forever on a dead rank. */
bool cu_nccl_active(void);
sc_status cu_nccl_synchronize(cudaStream_t s);
/* Device range [p, p + bytes) is about to be read or written on the compute stream (a kernel, or a
 * copy ordered after it): the compute stream waits for the collectives still using it. bytes < 0:
 * every pending collective (the end of a step). */
sc_status cu_collective_settle(cu_ctx *x, const void *p, int64_t bytes);
/* Frees the collectives' stream, scratch and events (the backend's destroy). */
void cu_collective_release(cu_ctx *x);
/* Sets *flag (device memory) to 1 when one of the n elements of float type t at x is Inf or NaN;
 * leaves it otherwise (cu_finite.cu). Integer types: nothing to do. */
sc_status cu_nonfinite_launch(cudaStream_t s, const void *x, sc_dtype t, int64_t n, unsigned *flag);
/* x[i] = x[i] / d for n elements of f32 or f64 (cu_collective_scale.cu). */
sc_status cu_divide_launch(cudaStream_t s, void *x, sc_dtype t, double d, int64_t n);

#ifdef __cplusplus
}
#endif

#define CU_CHECK(c, expr)                                                                                  \
    do {                                                                                                   \
        cudaError_t cu_e_ = (expr);                                                                        \
        if (cu_e_ != cudaSuccess) return cu_fail((c), "CUDA", #expr, __FILE__, __LINE__, cudaGetErrorString(cu_e_)); \
    } while (0)

/* After every <<<>>>: launch-configuration errors now, asynchronous faults at the next check. */
#define CU_LAUNCH_CHECK(c)                                                                                 \
    do {                                                                                                   \
        cudaError_t cu_e_ = cudaGetLastError();                                                            \
        if (cu_e_ != cudaSuccess) return cu_fail((c), "CUDA", "kernel launch", __FILE__, __LINE__, cudaGetErrorString(cu_e_)); \
    } while (0)

/* A library call whose status (of type Status, `ok` on success) is not ok returns cu_fail naming the
 * library, the call (text) and the status's message (message_of). */
#define CU_LIB_CHECK(c, lib, Status, ok, message_of, expr, text)                                           \
    do {                                                                                                   \
        Status lib_e_ = (expr);                                                                            \
        if (lib_e_ != (ok)) return cu_fail((c), lib, text, __FILE__, __LINE__, message_of(lib_e_));        \
    } while (0)
#define CUBLAS_CHECK(c, expr) \
    CU_LIB_CHECK(c, "cuBLAS", cublasStatus_t, CUBLAS_STATUS_SUCCESS, cublasGetStatusString, expr, #expr)
#ifdef SC_HAVE_CUDNN
#define CUDNN_CHECK(c, expr) CU_LIB_CHECK(c, "cuDNN", cudnnStatus_t, CUDNN_STATUS_SUCCESS, cudnnGetErrorString, expr, #expr)
#endif

/* Threads per block of the simple one-thread-per-element kernels, and their grid size. */
#define CU_BLOCK 256
static inline unsigned cu_grid(int64_t n) {
    int64_t g = (n + CU_BLOCK - 1) / CU_BLOCK;
    if (g < 1) g = 1;
    return (unsigned)(g > 1048576 ? 1048576 : g); /* kernels loop grid-stride beyond this */
}

static inline int64_t cu_prod(const int64_t *d, int from, int to) {
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= d[i];
    return p;
}

#endif
