/* The reference forward executor of the tests: runs a prepared graph node by node on the CPU
 * backend, independently of the plan executor (backends/plan_exec.c) that the library runs
 * everything with, so the tests can compare the two.
 *
 * Memory: parameters and constants are read in place; each activation gets a 64-byte aligned heap
 * buffer when its producer runs and is freed right after its last consumer, so peak memory is the
 * largest live set of the topological order.
 * Zero-element tensors still get a (tiny) buffer, because data == NULL means "omitted" to kernels.
 * Outputs of in-place ops (sc_op_inplace_input: optimizer updates) share their input's storage.
 * An output may also take over a dying input's buffer (donor_input): a Conv with a fused residual
 * sum (graph/pass_fuse.c) accumulates into its summand, so when this node is the summand's last
 * reader the output reuses that buffer and the kernel skips copying it.
 */
#include "tests/ref_executor.h"
#include "core/alloc_fail.h"

#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"

static void *buffer_alloc(int64_t bytes) {
    size_t size = (size_t)(bytes < 64 ? 64 : (bytes + 63) / 64 * 64);
    if (sc_alloc_fail_now()) return NULL; /* tests: injected out-of-memory (core/alloc_fail.h) */
    return aligned_alloc(64, size);
}

typedef struct {
    sc_graph *g;
    void **data;   /* per value: current storage, NULL when not live */
    bool *owned;   /* per value: data is an activation buffer we must free */
    int *last_use; /* per value: index of the last node reading it, -1 if none */
} exec_state;

static sc_status check_feeds(const sc_graph *g, const sc_tensor *inputs) {
    for (int i = 0; i < g->n_inputs; i++) {
        const sc_value *v = &g->values[g->inputs[i]];
        const sc_desc *got = &inputs[i].desc;
        if (got->dtype != v->desc.dtype || !sc_desc_same_shape(got, &v->desc)) {
            char a[128], b[128];
            return sc_errorf("input '%s' expects %s but was given %s", v->name, sc_desc_str(&v->desc, a, sizeof a),
                             sc_desc_str(got, b, sizeof b));
        }
        if (!inputs[i].data) return sc_errorf("input '%s' was given no data", v->name);
    }
    return SC_OK;
}

static sc_status state_init(exec_state *s, sc_graph *g, const sc_tensor *inputs) {
    s->g = g;
    s->data = calloc((size_t)g->n_values + 1, sizeof(void *));
    s->owned = calloc((size_t)g->n_values + 1, sizeof(bool));
    s->last_use = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    if (!s->data || !s->owned || !s->last_use) return sc_errorf("out of memory setting up the executor");
    for (int v = 0; v < g->n_values; v++) {
        s->last_use[v] = -1;
        s->data[v] = g->values[v].data;
    }
    for (int i = 0; i < g->n_inputs; i++) s->data[g->inputs[i]] = inputs[i].data;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] >= 0) s->last_use[g->nodes[i].in[k]] = i;
    return SC_OK;
}

static void state_free(exec_state *s) {
    if (s->data && s->owned)
        for (int v = 0; v < s->g->n_values; v++)
            if (s->owned[v]) free(s->data[v]);
    free(s->data);
    free(s->owned);
    free(s->last_use);
}

/* The input whose buffer output k may take over when this node is its last reader, or -1: input 3
 * (the summand, of the output's exact desc) of a fused-sum Conv. */
static int donor_input(const sc_node *n, int k) {
    return n->op == SC_OP_CONV && n->attrs->window.fused_sum && k == 0 && n->n_in > 3 ? 3 : -1;
}

/* True when node i's output v may reuse the buffer of its input at position j: an activation we own,
 * read for the last time here, at no other input position (the kernel reads those while writing v),
 * not a graph output, of the same size. */
static bool donor_ok(const exec_state *s, int i, int j, int v) {
    const sc_node *n = &s->g->nodes[i];
    int d = n->in[j];
    if (d < 0 || !s->owned[d] || s->last_use[d] != i || s->g->values[d].is_output) return false;
    for (int k = 0; k < n->n_in; k++)
        if (k != j && n->in[k] == d) return false;
    return sc_desc_bytes(&s->g->values[d].desc) == sc_desc_bytes(&s->g->values[v].desc);
}

/* Runs node i: gathers input views, allocates outputs, calls the kernel, frees dead inputs. */
static sc_status run_node(exec_state *s, int i) {
    sc_graph *g = s->g;
    const sc_node *n = &g->nodes[i];
    sc_tensor stack_in[8], stack_out[4];
    sc_tensor *in = n->n_in <= 8 ? stack_in : calloc((size_t)n->n_in, sizeof(sc_tensor));
    sc_tensor *out = n->n_out <= 4 ? stack_out : calloc((size_t)n->n_out, sizeof(sc_tensor));
    sc_status st = SC_OK;
    if (!in || !out) {
        st = sc_errorf("node '%s': out of memory", n->name);
        goto done;
    }
    for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k];
        in[k].desc = v >= 0 ? g->values[v].desc : (sc_desc){0};
        in[k].data = v >= 0 ? s->data[v] : NULL;
        SC_ASSERT(v < 0 || in[k].data);
    }
    for (int k = 0; k < n->n_out; k++) {
        int v = n->out[k];
        out[k].desc = v >= 0 ? g->values[v].desc : (sc_desc){0};
        out[k].data = NULL;
        if (v < 0) continue;
        int alias = sc_op_inplace_input(n->op, k);
        if (alias >= 0) {
            /* In-place update (optimizer state): the output is the input's persistent storage. */
            SC_ASSERT(alias < n->n_in && n->in[alias] >= 0 && !s->owned[n->in[alias]]);
            out[k].data = s->data[v] = in[alias].data;
            continue;
        }
        int donor = donor_input(n, k);
        if (donor >= 0 && donor_ok(s, i, donor, v)) {
            /* Ownership moves to the output; the input is dead after this node. */
            out[k].data = s->data[v] = in[donor].data;
            s->owned[v] = true;
            s->owned[n->in[donor]] = false;
            s->data[n->in[donor]] = NULL;
            continue;
        }
        int64_t bytes = sc_desc_bytes(&g->values[v].desc);
        if (bytes < 0) {
            st = sc_errorf("node '%s': output '%s' has no static shape", n->name, g->values[v].name);
            goto done;
        }
        out[k].data = s->data[v] = buffer_alloc(bytes);
        if (!out[k].data) {
            st = sc_errorf("node '%s': out of memory allocating %lld bytes for '%s'", n->name, (long long)bytes,
                           g->values[v].name);
            goto done;
        }
        s->owned[v] = true;
    }
    st = cpu_run_node(n, in, n->n_in, out, n->n_out);
    for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k];
        if (v >= 0 && s->owned[v] && s->last_use[v] == i && !g->values[v].is_output) {
            free(s->data[v]);
            s->data[v] = NULL;
            s->owned[v] = false;
        }
    }
done:
    if (in != stack_in) free(in);
    if (out != stack_out) free(out);
    return st;
}

/* Hands each graph output to the caller: an owned buffer moves, anything else is copied. */
static sc_status collect_outputs(exec_state *s, sc_tensor *outputs) {
    sc_graph *g = s->g;
    for (int i = 0; i < g->n_outputs; i++) {
        int v = g->outputs[i];
        outputs[i].desc = g->values[v].desc;
        if (s->owned[v]) {
            outputs[i].data = s->data[v];
            s->owned[v] = false;
            s->data[v] = NULL;
            continue;
        }
        int64_t bytes = sc_desc_bytes(&g->values[v].desc);
        outputs[i].data = buffer_alloc(bytes);
        if (!outputs[i].data) return sc_errorf("out of memory copying output '%s'", g->values[v].name);
        SC_ASSERT(s->data[v]);
        memcpy(outputs[i].data, s->data[v], (size_t)bytes);
    }
    return SC_OK;
}

sc_status sc_forward_cpu(sc_graph *g, const sc_tensor *inputs, sc_tensor *outputs) {
    SC_TRY(check_feeds(g, inputs));
    for (int i = 0; i < g->n_outputs; i++) outputs[i].data = NULL;
    exec_state s = {0};
    sc_status st = state_init(&s, g, inputs);
    for (int i = 0; !st && i < g->n_nodes; i++) st = run_node(&s, i);
    if (!st) st = collect_outputs(&s, outputs);
    if (st)
        for (int i = 0; i < g->n_outputs; i++) sc_tensor_free_data(&outputs[i]);
    state_free(&s);
    return st;
}
