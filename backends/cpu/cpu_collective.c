/* The collectives on the CPU (graph/ops_train.def): a bucket's tensors are packed into one buffer, so
 * one collective of the process group (backends/comm.h) carries them all, then unpacked into the
 * outputs. An output may share its input's block (the planner hands a dying gradient's block to the
 * reduced one; Broadcast writes its parameters in place): packing reads every input before
 * anything is written.
 *   AllReduce  every rank gets the bucket's mean over the ranks
 *   Reduce     the bucket's owner gets the mean (its outputs); the others send theirs (no outputs)
 *   Broadcast  every rank gets the owner's values */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/common/common.h"
#include "backends/cpu/cpu_kernels.h"

/* The inputs packed in order into one malloc'd buffer (*n elements of *t). */
static sc_status pack(const sc_kernel_call *c, char **flat, int64_t *n, sc_dtype *t) {
    *t = c->in[0].desc.dtype;
    *n = 0;
    for (int k = 0; k < c->n_in; k++) {
        if (c->in[k].desc.dtype != *t)
            return cpu_errorf(c, "the bucket mixes %s and %s tensors", sc_dtype_name(*t), sc_dtype_name(c->in[k].desc.dtype));
        *n += sc_desc_numel(&c->in[k].desc);
    }
    size_t es = sc_dtype_size(*t);
    *flat = malloc((size_t)*n * es + 1);
    if (!*flat) return cpu_errorf(c, "out of memory packing %lld elements", (long long)*n);
    int64_t at = 0;
    for (int k = 0; k < c->n_in; k++) {
        size_t bytes = (size_t)sc_desc_numel(&c->in[k].desc) * es;
        memcpy(*flat + at, c->in[k].data, bytes);
        at += (int64_t)bytes;
    }
    return SC_OK;
}

static void unpack(const sc_kernel_call *c, const char *flat, sc_dtype t) {
    int64_t at = 0;
    for (int k = 0; k < c->n_out; k++) {
        size_t bytes = (size_t)sc_desc_numel(&c->out[k].desc) * sc_dtype_size(t);
        memcpy(c->out[k].data, flat + at, bytes);
        at += (int64_t)bytes;
    }
}

static sc_status run(const sc_kernel_call *c) {
    char *flat;
    int64_t n;
    sc_dtype t;
    SC_TRY(pack(c, &flat, &n, &t));
    sc_status st = sc_collective_host(c->node, flat, n, t);
    if (!st) unpack(c, flat, t);
    free(flat);
    return st;
}

sc_status cpu_all_reduce(const sc_kernel_call *c) { return run(c); }
sc_status cpu_reduce_to_owner(const sc_kernel_call *c) { return run(c); }
sc_status cpu_broadcast_from_owner(const sc_kernel_call *c) { return run(c); }
