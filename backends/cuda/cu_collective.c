/* The collectives on the CUDA backend (graph/ops_train.def; the CPU's cpu_collective.c has their
 * semantics): the bucket goes to host memory, through the process group (backends/comm.h, MPI) and
 * comes back. Correct on any number of GPUs and hosts, and the bits of the CPU backend's (the host
 * sums in rank order), but it crosses the PCIe link twice and holds the compute stream meanwhile:
 * NCCL, device to device on a stream of its own, is the fast path still to be built (issue 17). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/comm.h"
#include "backends/cuda/cu_kernels.h"
#include "backends/cuda/cuda_common.h"

#define CU_TRY_CALL(c, expr, st)                                                                              \
    do {                                                                                                      \
        cudaError_t e_ = (expr);                                                                              \
        if (!(st) && e_ != cudaSuccess) (st) = cu_fail((c), "CUDA", #expr, __FILE__, __LINE__, cudaGetErrorString(e_)); \
    } while (0)

typedef enum { ALL_REDUCE, REDUCE, BROADCAST } collective;

static sc_status run(const cu_call *c, collective kind) {
    sc_dtype t = c->in[0].desc.dtype;
    int64_t total = 0;
    for (int k = 0; k < c->n_in; k++) {
        if (c->in[k].desc.dtype != t)
            return cu_errorf(c, "the bucket mixes %s and %s tensors", sc_dtype_name(t), sc_dtype_name(c->in[k].desc.dtype));
        total += sc_desc_numel(&c->in[k].desc);
    }
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
    const sc_all_reduce_attrs *a = &c->node->attrs->all_reduce;
    char what[600];
    snprintf(what, sizeof what, "%s '%s' (bucket %d, %lld bytes)", sc_op_name(c->node->op), c->node->name, a->bucket,
             (long long)at);
    if (!st)
        st = kind == ALL_REDUCE ? sc_comm_allreduce_mean(flat, total, t, what)
             : kind == REDUCE   ? sc_comm_reduce_mean(flat, total, t, a->owner, what)
                                : sc_comm_bcast(flat, at, a->owner, what);
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

sc_status cu_all_reduce(const cu_call *c) { return run(c, ALL_REDUCE); }
sc_status cu_reduce_to_owner(const cu_call *c) { return run(c, REDUCE); }
sc_status cu_broadcast_from_owner(const cu_call *c) { return run(c, BROADCAST); }
