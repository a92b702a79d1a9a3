/* Non-finite values in training (trainer.h): the per-step check of the state, the snapshot of the
 * last good state, and the diagnosis that re-runs a failed step node by node.
 *
 * The diagnosis is a small executor of its own (backends/executor.c has no per-node hook): it runs
 * the graph in order through cpu_run_node, keeps each activation until its last reader, and after
 * every node checks the float outputs. A tensor is the origin when it holds a NaN, or an Inf while
 * none of its node's inputs holds a non-finite value (so an Inf that an input already carried, like
 * a -inf attention mask, is not blamed on the node that passes it on). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "backends/comm.h"
#include "core/free_all.h"
#include "train/trainer_internal.h"

typedef enum { FIN_OK = 0, FIN_INF = 1, FIN_NAN = 2 } fin_kind;

static fin_kind tensor_finite(const sc_desc *d, const void *data) {
    int64_t n = sc_desc_numel(d);
    fin_kind k = FIN_OK;
    if (d->dtype == SC_F32) {
        const float *p = data;
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(p[i])) {
                if (isnan(p[i])) return FIN_NAN;
                k = FIN_INF;
            }
    } else if (d->dtype == SC_F16 || d->dtype == SC_BF16) { /* exponent all ones: Inf (mantissa 0) or NaN */
        const uint16_t *p = data;
        uint16_t exp = d->dtype == SC_F16 ? 0x7c00u : 0x7f80u;
        for (int64_t i = 0; i < n; i++)
            if ((p[i] & exp) == exp) {
                if (p[i] & (uint16_t)(~exp & 0x7fffu)) return FIN_NAN;
                k = FIN_INF;
            }
    } else if (d->dtype == SC_F64) {
        const double *p = data;
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(p[i])) {
                if (isnan(p[i])) return FIN_NAN;
                k = FIN_INF;
            }
    }
    return k;
}

/* memcpy with non-temporal stores where the target has them: the snapshot is read back only when a
 * step fails, so its lines need not be fetched into the cache before they are overwritten (a third
 * of a plain copy's memory traffic), nor evict the weights the next step reads. */
static void copy_streaming(char *dst, const char *src, size_t len) {
#if defined(__SSE2__)
    if (((uintptr_t)dst & 15) == 0) {
        size_t i = 0;
        for (; i + 64 <= len; i += 64)
            for (int k = 0; k < 64; k += 16)
                _mm_stream_si128((__m128i *)(dst + i + k), _mm_loadu_si128((const __m128i *)(src + i + k)));
        memcpy(dst + i, src + i, len - i);
        _mm_sfence();
        return;
    }
#endif
    memcpy(dst, src, len);
}

/* memcpy split across threads: the per-step snapshot copies every parameter and state value
 * (streaming into the snapshot; the rare restore copies plainly). */
static void copy_parallel(void *dst, const void *src, size_t bytes, bool streaming) {
    const size_t chunk = (size_t)1 << 20;
    int64_t n_chunks = (int64_t)((bytes + chunk - 1) / chunk);
#pragma omp parallel for if (n_chunks > 4)
    for (int64_t c = 0; c < n_chunks; c++) {
        size_t at = (size_t)c * chunk, len = bytes - at < chunk ? bytes - at : chunk;
        if (streaming) copy_streaming((char *)dst + at, (const char *)src + at, len);
        else memcpy((char *)dst + at, (const char *)src + at, len);
    }
}

bool train_host_state_finite(const sc_trainer *t, int *bad) {
    const sc_graph *g = &t->model->graph;
    *bad = -1;
    for (int i = 0; i < t->n_state; i++) {
        const sc_value *v = &g->values[t->state_ids[i]];
        bool on_device = t->host_stale && plan_session_state_on_device(t->session, t->state_ids[i]);
        if (!on_device && !sc_data_all_finite(&v->desc, v->data)) {
            *bad = t->state_ids[i];
            return false;
        }
    }
    return true;
}

void train_snapshot_take(sc_trainer *t) {
    const sc_graph *g = &t->model->graph;
    if (!t->snapshot) return;
    for (int i = 0; i < t->n_state; i++) {
        const sc_value *v = &g->values[t->state_ids[i]];
        copy_parallel(t->snapshot[i], v->data, (size_t)sc_desc_bytes(&v->desc), true);
    }
}

void train_snapshot_restore(sc_trainer *t) {
    sc_graph *g = &t->model->graph;
    if (!t->snapshot) return;
    for (int i = 0; i < t->n_state; i++) {
        sc_value *v = &g->values[t->state_ids[i]];
        copy_parallel(v->data, t->snapshot[i], (size_t)sc_desc_bytes(&v->desc), false);
    }
}

/* ---- the node-by-node re-run ---- */

typedef struct {
    sc_graph *g;
    sc_backend *host; /* runs the nodes */
    void **data;
    bool *owned;
    fin_kind *fin; /* per value, once known */
    int *last_use;
} nan_run;

static void run_free(nan_run *r) {
    for (int v = 0; r->owned && v < r->g->n_values; v++)
        if (r->owned[v]) free(r->data[v]);
    SC_FREE_ALL(r->data, r->owned, r->fin, r->last_use);
}

static sc_status run_init(nan_run *r, sc_trainer *t) {
    sc_graph *g = r->g = &t->model->graph;
    r->host = t->host;
    size_t n = (size_t)g->n_values + 1;
    r->data = calloc(n, sizeof *r->data);
    r->owned = calloc(n, sizeof *r->owned);
    r->fin = calloc(n, sizeof *r->fin);
    r->last_use = malloc(n * sizeof *r->last_use);
    if (!r->data || !r->owned || !r->fin || !r->last_use) return sc_errorf("out of memory");
    for (int v = 0; v < g->n_values; v++) {
        r->data[v] = g->values[v].data;
        r->last_use[v] = -1;
        if (r->data[v]) r->fin[v] = tensor_finite(&g->values[v].desc, r->data[v]);
    }
    for (int i = 0; i < g->n_inputs; i++) {
        r->data[g->inputs[i]] = t->feeds[i].data;
        r->fin[g->inputs[i]] = tensor_finite(&t->feeds[i].desc, t->feeds[i].data);
    }
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] >= 0) r->last_use[g->nodes[i].in[k]] = i;
    return SC_OK;
}

/* Runs node i; *origin = the output value where a non-finite value originated, or -1. */
static sc_status run_node_checked(nan_run *r, int i, int *origin) {
    sc_graph *g = r->g;
    const sc_node *n = &g->nodes[i];
    sc_tensor *in = calloc((size_t)n->n_in + 1, sizeof *in), *out = calloc((size_t)n->n_out + 1, sizeof *out);
    sc_status st = in && out ? SC_OK : sc_errorf("out of memory");
    bool inputs_finite = true;
    for (int k = 0; !st && k < n->n_in; k++) {
        int v = n->in[k];
        if (v < 0) continue;
        in[k] = (sc_tensor){g->values[v].desc, r->data[v]};
        if (r->fin[v] != FIN_OK) inputs_finite = false;
    }
    for (int k = 0; !st && k < n->n_out; k++) {
        int v = n->out[k];
        if (v < 0) continue;
        out[k].desc = g->values[v].desc;
        int alias = sc_op_inplace_input(n->op, k);
        if (alias >= 0) {
            out[k].data = r->data[v] = in[alias].data;
            continue;
        }
        int64_t bytes = sc_desc_bytes(&out[k].desc);
        out[k].data = r->data[v] = aligned_alloc(64, (size_t)(bytes + 63) / 64 * 64 + 64);
        if (!out[k].data) st = sc_errorf("out of memory re-running node '%s'", n->name);
        else r->owned[v] = true;
    }
    if (!st) st = r->host->iface->run_node(r->host, n, in, n->n_in, out, n->n_out);
    for (int k = 0; !st && k < n->n_out; k++) {
        int v = n->out[k];
        if (v < 0) continue;
        r->fin[v] = tensor_finite(&out[k].desc, out[k].data);
        if (*origin < 0 && (r->fin[v] == FIN_NAN || (r->fin[v] == FIN_INF && inputs_finite))) *origin = v;
    }
    for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k];
        if (v >= 0 && r->owned[v] && r->last_use[v] == i) {
            free(r->data[v]);
            r->data[v] = NULL;
            r->owned[v] = false;
        }
    }
    free(in);
    free(out);
    return st;
}

static const char *fin_name(fin_kind k) { return k == FIN_NAN ? "NaN" : "Inf"; }

static sc_status locate(sc_trainer *t, int64_t step, const char *trigger) {
    sc_graph *g = &t->model->graph;
    nan_run r = {0};
    sc_status st = run_init(&r, t);
    for (int i = 0; !st && i < g->n_inputs; i++)
        if (r.fin[g->inputs[i]] != FIN_OK)
            st = sc_errorf("step %lld: %s; input '%s' holds %s", (long long)step, trigger, g->values[g->inputs[i]].name,
                           fin_name(r.fin[g->inputs[i]]));
    for (int i = 0; !st && i < t->n_state; i++) {
        int v = t->state_ids[i];
        if (r.fin[v] != FIN_OK)
            st = sc_errorf("step %lld: %s; '%s' already held %s before the step", (long long)step, trigger,
                           g->values[v].name, fin_name(r.fin[v]));
    }
    int origin = -1, node = -1;
    for (int i = 0; !st && origin < 0 && i < g->n_nodes; i++) {
        st = run_node_checked(&r, i, &origin);
        node = i;
    }
    if (!st && origin >= 0) {
        const sc_node *n = &g->nodes[node];
        st = sc_errorf("step %lld: %s; the first non-finite value (%s) appeared in '%s', output of node '%s' (%s)",
                       (long long)step, trigger, fin_name(r.fin[origin]), g->values[origin].name, n->name,
                       sc_op_name(n->op));
    } else if (!st) {
        st = sc_errorf("step %lld: %s; re-running the step node by node found no non-finite tensor", (long long)step,
                       trigger);
    }
    run_free(&r);
    return st;
}

sc_status train_spent(sc_trainer *t, sc_status st) {
    if (!t->spent) t->spent = strdup(sc_status_message(st));
    return st;
}

sc_status train_nan_locate(sc_trainer *t, int64_t step, const char *trigger) {
    if (!t->snapshot)
        return train_spent(t, sc_errorf("step %lld: %s; rollback is off (no copy of the state before the step), so "
                                        "the weights were not restored and the step was not re-run to find where "
                                        "the value first appeared; nothing was written: resume from the last "
                                        "checkpoint (--save-every), with --rollback on to name the origin",
                                        (long long)step, trigger));
    train_snapshot_restore(t);
    train_backends_params_changed(t);
    /* Data parallel: the re-run is this rank's alone, so its all-reduces keep the local gradients (a
     * NaN in them shows there as well as in the mean) instead of waiting for ranks that do not re-run. */
    sc_comm_set_local_only(true);
    sc_status st = locate(t, step, trigger);
    sc_comm_set_local_only(false);
    train_snapshot_restore(t); /* the re-run's updates are discarded too */
    train_backends_params_changed(t);
    return st;
}
