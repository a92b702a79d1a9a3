/* AllReduce on the CUDA backend (graph/ops_train.def): the bucket goes to host memory, is averaged
 * over the ranks by the process group (backends/comm.h, MPI) and comes back. Correct on any number
 * of GPUs and hosts, but it crosses the PCIe link twice and holds the compute stream meanwhile:
 * NCCL, device to device and on a stream of its own, is the fast path still to be built (issue 17).
 * The host sums in rank order, so the bits are those of the CPU backend's AllReduce. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/comm.h"
#include "backends/cuda/cu_kernels.h"
#include "backends/cuda/cuda_common.h"

sc_status cu_all_reduce(const cu_call *c) {
    sc_dtype t = c->in[0].desc.dtype;
    int64_t total = 0;
    for (int k = 0; k < c->n_in; k++) {
        if (c->in[k].desc.dtype != t)
            return cu_errorf(c, "the bucket mixes %s and %s gradients", sc_dtype_name(t), sc_dtype_name(c->in[k].desc.dtype));
        total += sc_desc_numel(&c->in[k].desc);
    }
    size_t es = sc_dtype_size(t);
    char *flat = malloc((size_t)total * es + 1);
    if (!flat) return cu_errorf(c, "out of memory packing %lld gradient elements on the host", (long long)total);
    sc_status st = SC_OK;
    int64_t at = 0;
    for (int k = 0; k < c->n_in && !st; k++) {
        size_t bytes = (size_t)sc_desc_numel(&c->in[k].desc) * es;
        cudaError_t e = cudaMemcpyAsync(flat + at, c->in[k].data, bytes, cudaMemcpyDeviceToHost, c->ctx->stream);
        if (e != cudaSuccess) st = cu_fail(c, "CUDA", "cudaMemcpyAsync", __FILE__, __LINE__, cudaGetErrorString(e));
        at += (int64_t)bytes;
    }
    cudaError_t e = cudaStreamSynchronize(c->ctx->stream);
    if (!st && e != cudaSuccess) st = cu_fail(c, "CUDA", "cudaStreamSynchronize", __FILE__, __LINE__, cudaGetErrorString(e));
    char what[600];
    snprintf(what, sizeof what, "all-reduce '%s' (bucket %d, %lld bytes)", c->node->name,
             c->node->attrs->all_reduce.bucket, (long long)at);
    if (!st) st = sc_comm_allreduce_mean(flat, total, t, what);
    at = 0;
    for (int k = 0; k < c->n_out && !st; k++) {
        size_t bytes = (size_t)sc_desc_numel(&c->out[k].desc) * es;
        e = cudaMemcpyAsync(c->out[k].data, flat + at, bytes, cudaMemcpyHostToDevice, c->ctx->stream);
        if (e != cudaSuccess) st = cu_fail(c, "CUDA", "cudaMemcpyAsync", __FILE__, __LINE__, cudaGetErrorString(e));
        at += (int64_t)bytes;
    }
    e = cudaStreamSynchronize(c->ctx->stream); /* flat is read by the copies until they finish */
    if (!st && e != cudaSuccess) st = cu_fail(c, "CUDA", "cudaStreamSynchronize", __FILE__, __LINE__, cudaGetErrorString(e));
    free(flat);
    return st;
}
