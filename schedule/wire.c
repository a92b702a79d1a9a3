/* Wire types of a streaming plan's transfers (plan.h, sc_step.wire): which OFFLOADs and PREFETCHes
 * of f32 values cross the link in 16 bits, losing nothing that any reader sees.
 *
 * Mixed precision (graph/pass_precision.c) keeps f32 master weights and computes in bf16 / f16
 * through Casts, so two kinds of f32 transfer carry only 16 bits of information:
 *   - an OFFLOAD of a gradient that a Cast widened from the low type (dW = Cast(dW_low), read by a
 *     host update): every value of it is exact in 16 bits, so round -> copy -> widen returns it bit
 *     for bit;
 *   - a PREFETCH of a weight whose every device reader is a Cast to one low type T (the streamed
 *     parameter of a Conv, Gemm or MatMul; its update runs on the host, on the host's f32 copy).
 *     The device copy is then round_T(W) widened, not W, but Cast_T of it is round_T(W), so each
 *     reader computes the same bits.
 * Anything else keeps its own type: a value other nodes alias (an in-place write may have changed
 * what the OFFLOAD reads; a view may be read by non-Casts), a graph output, a weight a device
 * update or an f32 op reads (LayerNorm's scale, an embedding's Gather, which autocast runs in f32).
 * Per streamed low-precision parameter that is 2 bytes per crossing instead of 4. A gradient that
 * autodiff hands to its update in 16 bits (autodiff/optimizer.c, grads_narrow) is a bf16/f16 value
 * and crosses in its own type. */
#include <stdlib.h>

#include "graph/ops.h"
#include "schedule/sched_internal.h"

int64_t plan_step_bytes(const sc_graph *g, const sc_step *st) {
    if (st->wire == SC_DTYPE_UNDEFINED) return sched_data_bytes(g, st->value);
    int64_t n = sc_desc_numel(&g->values[st->value].desc);
    return n > 0 ? n * (int64_t)sc_dtype_size(st->wire) : 0;
}

/* The low type a Cast node converts to, or 0. */
static sc_dtype cast_to_half(const sc_node *n) {
    return n->op == SC_OP_CAST && n->attrs && sc_dtype_is_half(n->attrs->cast.to) ? n->attrs->cast.to : SC_DTYPE_UNDEFINED;
}

/* reads[v]: the low type every device reader of v casts it to; 0 when none or another reader.
 * n_alias[v]: the values a device node makes that share v's storage (an in-place write or a view;
 * a host update writes the host copy, not the one on the device). */
enum { NO_READER = -1 };

static sc_status device_uses(const sc_graph *g, const sc_plan *p, int *reads, int *n_alias) {
    bool *host = calloc((size_t)g->n_nodes + 1, 1);
    int *root = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    if (!host || !root) {
        free(host), free(root);
        return sc_errorf("out of memory choosing the link's types");
    }
    for (int i = 0; i < p->n_steps; i++)
        if (p->steps[i].kind == SC_STEP_HOST_RUN) host[p->steps[i].node] = true;
    plan_value_roots(g, root);
    for (int v = 0; v < g->n_values; v++) reads[v] = NO_READER, n_alias[v] = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const sc_node *n = &g->nodes[i];
        if (host[i]) continue;
        int t = (int)cast_to_half(n);
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k];
            if (v >= 0) reads[v] = reads[v] == NO_READER || reads[v] == t ? t : 0;
        }
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0 && root[n->out[k]] != n->out[k]) n_alias[root[n->out[k]]]++;
    }
    free(host), free(root);
    return SC_OK;
}

/* The 16-bit type the f32 value v of step st may cross in, or 0. */
static sc_dtype wire_of(const sc_graph *g, const sc_step *st, const int *reads, const int *n_alias) {
    int v = st->value;
    const sc_value *x = &g->values[v];
    if (x->desc.dtype != SC_F32 || x->is_output || n_alias[v] > 0) return SC_DTYPE_UNDEFINED;
    if (st->kind == SC_STEP_PREFETCH) return reads[v] > 0 ? (sc_dtype)reads[v] : SC_DTYPE_UNDEFINED;
    if (x->producer < 0) return SC_DTYPE_UNDEFINED;
    const sc_node *n = &g->nodes[x->producer];
    int from = n->op == SC_OP_CAST && n->in[0] >= 0 ? n->in[0] : -1;
    return from >= 0 && sc_dtype_is_half(g->values[from].desc.dtype) ? g->values[from].desc.dtype : SC_DTYPE_UNDEFINED;
}

sc_status plan_wire_assign(const sc_graph *g, sc_plan *p) {
    size_t nv = (size_t)g->n_values + 1;
    int *reads = malloc(sizeof(int) * nv), *n_alias = malloc(sizeof(int) * nv);
    sc_status st = reads && n_alias ? device_uses(g, p, reads, n_alias) : sc_errorf("out of memory choosing the link's types");
    for (int i = 0; !st && i < p->n_steps; i++) {
        sc_step *s = &p->steps[i];
        if (s->kind == SC_STEP_PREFETCH || s->kind == SC_STEP_OFFLOAD) s->wire = wire_of(g, s, reads, n_alias);
    }
    free(reads), free(n_alias);
    return st;
}

void plan_wire_bytes(const sc_graph *g, const sc_plan *p, int64_t bytes[2]) {
    bytes[0] = bytes[1] = 0;
    for (int i = 0; i < p->n_steps; i++) {
        const sc_step *s = &p->steps[i];
        if ((s->kind == SC_STEP_PREFETCH || s->kind == SC_STEP_OFFLOAD) &&
            (s->wire != SC_DTYPE_UNDEFINED || (s->value >= 0 && sc_dtype_is_half(g->values[s->value].desc.dtype))))
            bytes[s->kind == SC_STEP_OFFLOAD] += plan_step_bytes(g, s);
    }
}
