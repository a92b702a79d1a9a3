/* The collectives on the CUDA backend (graph/ops_train.def; the CPU's cpu_collective.c has their
 * semantics).
 *
 * With NCCL (SC_HAVE_NCCL: nccl.h and libnccl found beside the toolkit, backends/cuda/cuda.cmake) the
 * bucket stays on the device and off the compute stream: on a stream of the collectives' own, after
 * the compute work that made the gradients (an event), its tensors are packed into a scratch of
 * their own, NCCL sums them over the ranks (ncclAllReduce / ncclReduce to the owner / ncclBroadcast
 * from it), the sum is divided by the number of ranks (cu_divide_launch) and unpacked. The compute
 * stream goes on with backward meanwhile; the device ranges the collective reads and writes stay
 * pending, and the backend makes the compute stream wait for them (cu_collective_settle) before a
 * kernel or a copy touches one of them: the optimizer update reading the mean, a later node whose
 * output reuses an input's block, the end of the step. The communicator is made at the first
 * collective: rank 0's ncclUniqueId reaches the others over the process group (backends/comm.h,
 * MPI). A rank that dies or hangs would leave the stream waiting forever: cu_nccl_synchronize,
 * which the backend's synchronize uses once a communicator exists, polls the stream and NCCL's
 * asynchronous error, and after the process group's timeout aborts the communicator and fails.
 * Bits: NCCL sums two ranks' values with one add, as the CPU's rank-order sum does; with more ranks
 * its ring order differs from rank order (deterministic for a given N and topology).
 *
 * Without NCCL the bucket goes through host memory and the process group's MPI collectives: correct
 * on any number of GPUs and hosts, the bits of the CPU backend's, but it crosses the PCIe link twice
 * and holds the compute stream meanwhile.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/comm.h"
#include "backends/common/common.h"
#include "backends/cuda/cu_kernels.h"
#include "backends/cuda/cuda_common.h"
#include "core/clock.h"

#ifdef SC_HAVE_NCCL
#include <nccl.h>
#endif

#define CU_TRY_CALL(c, expr, st)                                                                              \
    do {                                                                                                      \
        cudaError_t e_ = (expr);                                                                              \
        if (!(st) && e_ != cudaSuccess) (st) = cu_fail((c), "CUDA", #expr, __FILE__, __LINE__, cudaGetErrorString(e_)); \
    } while (0)

typedef enum { ALL_REDUCE, REDUCE, BROADCAST } collective;

static sc_status bucket_size(const cu_call *c, sc_dtype *t, int64_t *total) {
    *t = c->in[0].desc.dtype;
    *total = 0;
    for (int k = 0; k < c->n_in; k++) {
        if (c->in[k].desc.dtype != *t)
            return cu_errorf(c, "the bucket mixes %s and %s tensors", sc_dtype_name(*t), sc_dtype_name(c->in[k].desc.dtype));
        *total += sc_desc_numel(&c->in[k].desc);
    }
    return SC_OK;
}

#ifdef SC_HAVE_NCCL

static ncclComm_t nccl_comm;
static bool nccl_made;

static sc_status nccl_fail(const cu_call *c, const char *call, ncclResult_t r) {
    return cu_errorf(c, "%s failed: %s", call, ncclGetErrorString(r));
}

/* The job's communicator, made by every rank at its first collective (the same point in every rank's
 * plan). */
static sc_status nccl_get(const cu_call *c) {
    if (nccl_made) return SC_OK;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (sc_comm_rank() == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess) return nccl_fail(c, "ncclGetUniqueId", r);
    }
    SC_TRY(sc_comm_bcast(&id, sizeof id, 0, "sharing the NCCL id"));
    ncclResult_t r = ncclCommInitRank(&nccl_comm, sc_comm_size(), id, sc_comm_rank());
    if (r != ncclSuccess) return nccl_fail(c, "ncclCommInitRank", r);
    nccl_made = true;
    return SC_OK;
}

bool cu_nccl_active(void) { return nccl_made; }

sc_status cu_nccl_synchronize(cudaStream_t s) {
    double t0 = sc_clock_seconds();
    for (;;) {
        cudaError_t e = cudaStreamQuery(s);
        if (e == cudaSuccess) return SC_OK;
        if (e != cudaErrorNotReady) return sc_errorf("cuda backend: a kernel failed: %s", cudaGetErrorString(e));
        ncclResult_t async = ncclSuccess;
        if (ncclCommGetAsyncError(nccl_comm, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress) {
            ncclCommAbort(nccl_comm);
            nccl_made = false;
            return sc_errorf("NCCL failed while the step ran: %s", ncclGetErrorString(async));
        }
        if (sc_clock_seconds() - t0 > sc_comm_timeout()) {
            ncclCommAbort(nccl_comm);
            nccl_made = false;
            return sc_errorf("the GPU's work (NCCL collectives included) did not finish within %g s: a rank died or hangs "
                             "(--comm-timeout sets the limit)",
                             sc_comm_timeout());
        }
        nanosleep(&(struct timespec){0, 100000}, NULL);
    }
}

static ncclDataType_t nccl_type(sc_dtype t) { return t == SC_F64 ? ncclFloat64 : ncclFloat32; }

/* The collectives' stream and scratch (made at the first collective; the scratch grows after the
 * stream's earlier collectives are done with it). */
static sc_status comm_space(const cu_call *c, int64_t bytes, char **flat) {
    cu_ctx *x = c->ctx;
    if (!x->comm_stream) CU_CHECK(c, cudaStreamCreateWithFlags(&x->comm_stream, cudaStreamNonBlocking));
    if (bytes > x->comm_scratch_bytes) {
        CU_CHECK(c, cudaStreamSynchronize(x->comm_stream));
        if (x->comm_scratch) cudaFree(x->comm_scratch);
        x->comm_scratch = NULL;
        x->comm_scratch_bytes = 0;
        CU_CHECK(c, cudaMalloc(&x->comm_scratch, (size_t)bytes));
        x->comm_scratch_bytes = bytes;
    }
    *flat = x->comm_scratch;
    return SC_OK;
}

/* [p, p + bytes) is in use by the collectives' stream until its work issued so far is done. */
static sc_status pending_add(const cu_call *c, const void *p, int64_t bytes) {
    cu_ctx *x = c->ctx;
    if (x->n_comm_pend == x->cap_comm_pend) {
        int cap = x->cap_comm_pend ? 2 * x->cap_comm_pend : 64;
        struct cu_pending *q = realloc(x->comm_pend, sizeof *q * (size_t)cap);
        if (!q) return cu_errorf(c, "out of host memory tracking a collective");
        x->comm_pend = q;
        x->cap_comm_pend = cap;
    }
    struct cu_pending *e = &x->comm_pend[x->n_comm_pend];
    CU_CHECK(c, cudaEventCreateWithFlags(&e->done, cudaEventDisableTiming));
    CU_CHECK(c, cudaEventRecord(e->done, x->comm_stream));
    e->lo = p;
    e->hi = (const char *)p + bytes;
    x->n_comm_pend++;
    return SC_OK;
}

/* Entries [0, k) are done once the compute stream has waited for entry k - 1 (the collectives' stream
 * is a FIFO): their events go. */
static void pending_drop(cu_ctx *x, int k) {
    if (k <= 0) return;
    for (int i = 0; i < k; i++) cudaEventDestroy(x->comm_pend[i].done);
    memmove(x->comm_pend, x->comm_pend + k, sizeof *x->comm_pend * (size_t)(x->n_comm_pend - k));
    x->n_comm_pend -= k;
}

sc_status cu_collective_settle(cu_ctx *x, const void *p, int64_t bytes) {
    int last = -1;
    for (int i = 0; i < x->n_comm_pend; i++)
        if (bytes < 0 || (x->comm_pend[i].lo < (const char *)p + bytes && (const char *)p < x->comm_pend[i].hi)) last = i;
    if (last < 0) return SC_OK;
    cudaError_t e = cudaStreamWaitEvent(x->stream, x->comm_pend[last].done, 0);
    if (e != cudaSuccess) return sc_errorf("cuda backend: waiting for a collective failed: %s", cudaGetErrorString(e));
    pending_drop(x, last + 1);
    return SC_OK;
}

void cu_collective_release(cu_ctx *x) {
    if (x->comm_stream) cudaStreamSynchronize(x->comm_stream);
    pending_drop(x, x->n_comm_pend);
    free(x->comm_pend);
    x->comm_pend = NULL;
    x->cap_comm_pend = 0;
    if (x->comm_scratch) cudaFree(x->comm_scratch);
    x->comm_scratch = NULL;
    x->comm_scratch_bytes = 0;
    if (x->comm_stream) cudaStreamDestroy(x->comm_stream);
    x->comm_stream = NULL;
}

/* On the collectives' stream, after the compute stream's work so far (which produced the inputs):
 * pack, NCCL, divide, unpack; the inputs' and outputs' ranges stay pending until a compute-stream
 * user of one of them waits (cu_collective_settle, called by the backend for every node and copy). */
static sc_status run(const cu_call *c, collective kind) {
    sc_dtype t;
    int64_t total;
    SC_TRY(bucket_size(c, &t, &total));
    if (t != SC_F32 && t != SC_F64 && kind != BROADCAST)
        return cu_errorf(c, "%s of %s is not supported (f32, f64)", sc_op_name(c->node->op), sc_dtype_name(t));
    SC_TRY(nccl_get(c));
    size_t es = sc_dtype_size(t);
    char *flat = NULL;
    SC_TRY(comm_space(c, total * (int64_t)es, &flat));
    cudaStream_t s = c->ctx->comm_stream;
    cudaEvent_t ready;
    CU_CHECK(c, cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    sc_status st = SC_OK;
    CU_TRY_CALL(c, cudaEventRecord(ready, c->ctx->stream), st);
    CU_TRY_CALL(c, cudaStreamWaitEvent(s, ready, 0), st);
    cudaEventDestroy(ready);
    int64_t at = 0;
    for (int k = 0; k < c->n_in; k++) {
        size_t bytes = (size_t)sc_desc_numel(&c->in[k].desc) * es;
        CU_TRY_CALL(c, cudaMemcpyAsync(flat + at, c->in[k].data, bytes, cudaMemcpyDeviceToDevice, s), st);
        at += (int64_t)bytes;
    }
    int owner = c->node->attrs->all_reduce.owner;
    ncclResult_t r = ncclSuccess;
    if (!st) {
        if (kind == ALL_REDUCE) r = ncclAllReduce(flat, flat, (size_t)total, nccl_type(t), ncclSum, nccl_comm, s);
        else if (kind == REDUCE) r = ncclReduce(flat, flat, (size_t)total, nccl_type(t), ncclSum, owner, nccl_comm, s);
        else r = ncclBroadcast(flat, flat, (size_t)at, ncclUint8, owner, nccl_comm, s);
        if (r != ncclSuccess) st = nccl_fail(c, kind == ALL_REDUCE ? "ncclAllReduce" : kind == REDUCE ? "ncclReduce" : "ncclBroadcast", r);
    }
    if (!st && kind != BROADCAST && c->n_out > 0) st = cu_divide_launch(s, flat, t, (double)sc_comm_size(), total);
    at = 0;
    for (int k = 0; k < c->n_out; k++) {
        size_t bytes = (size_t)sc_desc_numel(&c->out[k].desc) * es;
        CU_TRY_CALL(c, cudaMemcpyAsync(c->out[k].data, flat + at, bytes, cudaMemcpyDeviceToDevice, s), st);
        at += (int64_t)bytes;
    }
    for (int k = 0; !st && k < c->n_in + c->n_out; k++) {
        const sc_tensor *x = k < c->n_in ? &c->in[k] : &c->out[k - c->n_in];
        if (x->data) st = pending_add(c, x->data, sc_desc_bytes(&x->desc));
    }
    return st;
}

#else /* without NCCL: through host memory and MPI */

bool cu_nccl_active(void) { return false; }
sc_status cu_nccl_synchronize(cudaStream_t s) {
    (void)s;
    return SC_OK;
}
sc_status cu_collective_settle(cu_ctx *x, const void *p, int64_t bytes) {
    (void)x, (void)p, (void)bytes;
    return SC_OK;
}
void cu_collective_release(cu_ctx *x) { (void)x; }

static sc_status run(const cu_call *c, collective kind) {
    sc_dtype t;
    int64_t total;
    SC_TRY(bucket_size(c, &t, &total));
    size_t es = sc_dtype_size(t);
    char *flat = malloc((size_t)total * es + 1);
    if (!flat) return cu_errorf(c, "out of memory packing %lld elements on the host", (long long)total);
    sc_status st = SC_OK;
    int64_t at = 0;
    for (int k = 0; k < c->n_in; k++) {
        size_t bytes = (size_t)sc_desc_numel(&c->in[k].desc) * es;
        CU_TRY_CALL(c, cudaMemcpyAsync(flat + at, c->in[k].data, bytes, cudaMemcpyDeviceToHost, c->ctx->stream), st);
        at += (int64_t)bytes;
    }
    CU_TRY_CALL(c, cudaStreamSynchronize(c->ctx->stream), st);
    (void)kind;
    if (!st) st = sc_collective_host(c->node, flat, total, t);
    at = 0;
    for (int k = 0; k < c->n_out; k++) {
        size_t bytes = (size_t)sc_desc_numel(&c->out[k].desc) * es;
        CU_TRY_CALL(c, cudaMemcpyAsync(c->out[k].data, flat + at, bytes, cudaMemcpyHostToDevice, c->ctx->stream), st);
        at += (int64_t)bytes;
    }
    cudaError_t e = cudaStreamSynchronize(c->ctx->stream); /* flat is read by the copies until they finish */
    if (!st && e != cudaSuccess) st = cu_fail(c, "CUDA", "cudaStreamSynchronize", __FILE__, __LINE__, cudaGetErrorString(e));
    free(flat);
    return st;
}

#endif

sc_status cu_all_reduce(const cu_call *c) { return run(c, ALL_REDUCE); }
sc_status cu_reduce_to_owner(const cu_call *c) { return run(c, REDUCE); }
sc_status cu_broadcast_from_owner(const cu_call *c) { return run(c, BROADCAST); }
