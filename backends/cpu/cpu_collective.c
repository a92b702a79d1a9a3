/* AllReduce on the CPU (graph/ops_train.def): the bucket's gradients are packed into one buffer, so
 * one collective of the process group (backends/comm.h) averages them all, then unpacked into the
 * outputs. An output may share its input's block (the planner hands the dying gradient's block to
 * the reduced one): packing reads every input before anything is written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/comm.h"
#include "backends/cpu/cpu_kernels.h"

sc_status cpu_all_reduce(const sc_kernel_call *c) {
    sc_dtype t = c->in[0].desc.dtype;
    int64_t total = 0;
    for (int k = 0; k < c->n_in; k++) {
        if (c->in[k].desc.dtype != t) return cpu_errorf(c, "the bucket mixes %s and %s gradients", sc_dtype_name(t), sc_dtype_name(c->in[k].desc.dtype));
        total += sc_desc_numel(&c->in[k].desc);
    }
    size_t es = sc_dtype_size(t);
    char *flat = malloc((size_t)total * es + 1);
    if (!flat) return cpu_errorf(c, "out of memory packing %lld gradient elements", (long long)total);
    int64_t at = 0;
    for (int k = 0; k < c->n_in; k++) {
        size_t bytes = (size_t)sc_desc_numel(&c->in[k].desc) * es;
        memcpy(flat + at, c->in[k].data, bytes);
        at += (int64_t)bytes;
    }
    char what[600];
    snprintf(what, sizeof what, "all-reduce '%s' (bucket %d, %lld bytes)", c->node->name,
             c->node->attrs->all_reduce.bucket, (long long)at);
    sc_status st = sc_comm_allreduce_mean(flat, total, t, what);
    at = 0;
    for (int k = 0; !st && k < c->n_out; k++) {
        size_t bytes = (size_t)sc_desc_numel(&c->out[k].desc) * es;
        memcpy(c->out[k].data, flat + at, bytes);
        at += (int64_t)bytes;
    }
    free(flat);
    return st;
}
