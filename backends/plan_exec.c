/* Executes plans verbatim on a backend (contract in plan_exec.h): the device side here, the host
 * side (host copies, pinning, HOST_RUN and the host worker) in plan_exec_host.c.
 *
 * Streamed persistent values (a plan with weights offload: no fixed interval, moved by PREFETCH /
 * OFFLOAD) have the graph's host data as their home: PREFETCH copies from it, OFFLOAD writes the
 * updated value back into it, so after a step the host data is already current for them.
 * Activations offloaded by the plan get a host buffer owned by the session. A graph output the plan
 * offloaded and freed (streaming plans do that with every computed output, e.g. BatchNorm running
 * statistics) is read from that host copy at the end of the step (outputs, writebacks); the copy
 * counts only when it was made in the current step.
 *
 * The host copy of a gradient (or clip scale) that only host updates read goes back to a pool after
 * the last HOST_RUN reading it, and the next OFFLOAD of a value of the same size takes it from
 * there: gradients live on the host only until their update, instead of one buffer per parameter
 * for the whole session (1.4 GB for GPT-2 medium).
 *
 * HOST_RUN runs an optimizer update with the CPU kernels on host memory. On a device backend (CUDA)
 * it runs on the session's host worker thread, so it overlaps the device steps that follow (the rest
 * of backward): the executor resolves the operands and queues the update; the worker runs the queue
 * in plan order and then gives the update's dead gradient copies back to the pool; the step ends by
 * draining the queue, since the next step's prefetches read what the updates wrote. On the CPU
 * backend (compute_on_host) it runs inline: its "device" is the same cores, and a second thread team
 * only contended with it (GPT-2 medium, AdamW: 3.09 s a step on the worker, 2.63 s inline). Operands: the parameter and
 * its state in the graph's host data (their home), a gradient or clip scale from
 * this step's OFFLOAD of it (its WAIT precedes the HOST_RUN in the plan), lr and step from the
 * feeds. On the CPU backend that is the very kernel a device update would run, so the bits agree.
 *
 * Debug builds (no NDEBUG) track the device bytes of every transfer in flight and assert that no
 * RUN writes (or reads, for a host -> device copy) them, and that no interval under a copy is freed
 * or reopened, until a WAIT covers the transfer: the lowering's guarantee, checked where it matters.
 */
#include "backends/plan_exec_internal.h"
#include "core/alloc_fail.h"
#include "core/clock.h"
#include "core/free_all.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>



void plan_session_free(sc_plan_session *s) {
    if (!s) return;
    worker_stop(s);
    comm_stop(s);
    if (s->be) {
        s->be->iface->synchronize(s->be);
        if (s->base) s->be->iface->arena_destroy(s->be);
        homes_unpin(s);
    }
    if (s->host)
        for (int v = 0; v < s->g->n_values; v++) host_copy_free(s, s->host[v]);
    SC_FREE_ALL(s->host, s->pinned, s->host_step, s->root, s->fixed_iv, s->iv_home, s->cur, s->xfer, s->streamed,
                s->feed_of, s->last_xfer, s->last_in, s->waited, s->release_at, s->taken);
    for (int i = 0; i < s->n_pool; i++) host_copy_free(s, s->pool[i].p);
    free(s->pool);
    free(s->jobs);
    sc_status_free(s->worker_err);
    if (s->pool_mu_ready) pthread_mutex_destroy(&s->pool_mu);
#ifndef NDEBUG
    free(s->fly);
#endif
    free(s->step_time);
    free(s);
}

static sc_status copy_sync(sc_plan_session *s, bool to_device, void *dev, void *host, int64_t bytes) {
    int64_t t;
    SC_TRY(host_copy_sync(s, to_device, dev, host, bytes, &t));
#ifndef NDEBUG
    int k = 0; /* every transfer up to t finished (backend contract) */
    for (int i = 0; i < s->n_fly; i++)
        if (s->fly[i].id > t) s->fly[k++] = s->fly[i];
    s->n_fly = k;
#endif
    return SC_OK;
}

static void *dev_ptr(const sc_plan_session *s, int interval) {
    if (s->iv_home && s->iv_home[interval]) return s->iv_home[interval];
    return s->base + s->plan->intervals[interval].offset;
}

/* Whether value v's device copy is its host data (params in place): nothing to copy either way. */
static bool at_home(const sc_plan_session *s, int v) {
    return s->iv_home && s->fixed_iv[v] >= 0 && s->iv_home[s->fixed_iv[v]] == s->g->values[v].data;
}

#ifndef NDEBUG
static void fly_add(sc_plan_session *s, int64_t id, int iv, bool h2d) {
    const sc_interval *x = &s->plan->intervals[iv];
    SC_ASSERT(s->n_fly < s->n_xfer + 1);
    s->fly[s->n_fly++] = (struct inflight){id, x->offset, x->offset + x->bytes, h2d};
}

/* A WAIT retires its own transfer only: the backend may finish earlier ones too (the CPU copy
 * thread is FIFO), but a plan must not rely on that, since a device with separate copy engines
 * would not order them. */
static void fly_done(sc_plan_session *s, int64_t id) {
    int k = 0;
    for (int i = 0; i < s->n_fly; i++)
        if (s->fly[i].id != id) s->fly[k++] = s->fly[i];
    s->n_fly = k;
}

/* Interval iv is written (or freed, or reopened) now: no copy may touch its bytes; or only read:
 * no host -> device copy may still be writing them. */
static void fly_check(const sc_plan_session *s, int iv, bool write) {
    const sc_interval *x = &s->plan->intervals[iv];
    for (int i = 0; i < s->n_fly; i++)
        if ((write || s->fly[i].h2d) && s->fly[i].lo < x->offset + x->bytes && x->offset < s->fly[i].hi)
            sc_assert_fail("device bytes under a transfer in flight are used before its WAIT", __FILE__, __LINE__);
}
#define FLY_ADD(s, id, iv, h2d) fly_add(s, id, iv, h2d)
#define FLY_DONE(s, id) fly_done(s, id)
#define FLY_CHECK(s, iv, write) fly_check(s, iv, write)
#else
#define FLY_ADD(s, id, iv, h2d) ((void)0)
#define FLY_DONE(s, id) ((void)0)
#define FLY_CHECK(s, iv, write) ((void)0)
#endif

sc_status plan_session_load_params(sc_plan_session *s) {
    for (int v = 0; v < s->g->n_values; v++)
        if (s->fixed_iv[v] >= 0 && s->g->values[v].data && !at_home(s, v))
            SC_TRY(copy_sync(s, true, dev_ptr(s, s->fixed_iv[v]), s->g->values[v].data, value_bytes(s->g, v)));
    if (s->be->iface->params_changed) s->be->iface->params_changed(s->be);
    return SC_OK;
}

bool plan_session_state_on_device(const sc_plan_session *s, int v) {
    sc_value_kind k = s->g->values[v].kind;
    return s->fixed_iv[v] >= 0 && s->g->values[v].data && (k == SC_VALUE_PARAM || k == SC_VALUE_OPT_STATE) &&
           !at_home(s, v);
}

sc_status plan_exec_sync_params_to_host(sc_plan_session *s) {
    for (int v = 0; v < s->g->n_values; v++)
        if (plan_session_state_on_device(s, v)) {
            SC_TRY(copy_sync(s, false, dev_ptr(s, s->fixed_iv[v]), s->g->values[v].data, value_bytes(s->g, v)));
            s->synced += value_bytes(s->g, v);
        }
    return SC_OK;
}

/* Without the backend's all_finite: each device copy through one host buffer, scanned there. */
static sc_status finite_through_host(sc_plan_session *s, const sc_tensor *t, int n, bool *finite) {
    int64_t most = 0;
    for (int i = 0; i < n; i++) most = sc_desc_bytes(&t[i].desc) > most ? sc_desc_bytes(&t[i].desc) : most;
    void *tmp = malloc((size_t)most + 1);
    if (!tmp) return sc_errorf("out of memory checking the state for non-finite values (%lld bytes)", (long long)most);
    sc_status st = SC_OK;
    *finite = true;
    for (int i = 0; i < n && *finite && !st; i++) {
        st = copy_sync(s, false, t[i].data, tmp, sc_desc_bytes(&t[i].desc));
        if (!st) *finite = sc_data_all_finite(&t[i].desc, tmp);
    }
    free(tmp);
    return st;
}

sc_status plan_session_state_finite(sc_plan_session *s, bool *finite) {
    *finite = true;
    sc_tensor *t = malloc(((size_t)s->g->n_values + 1) * sizeof *t);
    if (!t) return sc_errorf("out of memory checking the state for non-finite values");
    int n = 0;
    for (int v = 0; v < s->g->n_values; v++)
        if (plan_session_state_on_device(s, v) && sc_dtype_is_float(s->g->values[v].desc.dtype))
            t[n++] = (sc_tensor){s->g->values[v].desc, dev_ptr(s, s->fixed_iv[v])};
    sc_status st = SC_OK;
    if (n > 0)
        st = s->be->iface->all_finite ? s->be->iface->all_finite(s->be, t, n, finite) : finite_through_host(s, t, n, finite);
    free(t);
    return st;
}

/* Whether weight values can differ from one step to the next at the same address, so that backend
 * caches derived from them (the CPU backend's reordered Conv weights, cpu_dnnl.h) must be dropped
 * before each step: a node updates state in place (an optimizer update, a Broadcast), or a Conv's
 * weight is computed in the step rather than a parameter or constant the session loaded. */
static bool weights_change_per_step(const sc_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const sc_node *n = &g->nodes[i];
        for (int o = 0; o < n->n_out; o++)
            if (sc_op_inplace_input(n->op, o) >= 0) return true;
        if (n->op == SC_OP_CONV && n->n_in > 1 && n->in[1] >= 0) {
            const sc_value *w = &g->values[n->in[1]];
            if (!w->data || (w->kind != SC_VALUE_PARAM && w->kind != SC_VALUE_CONST)) return true;
        }
    }
    return false;
}

sc_status plan_session_create(sc_backend *be, sc_graph *g, const sc_plan *plan, sc_plan_session **out) {
    return plan_session_create_in_place(be, g, plan, false, out);
}

/* Persistent values with host data (parameters, optimizer state, constants) that have a fixed
 * interval use their host data as their device copy. */
static sc_status homes_in_place(sc_plan_session *s) {
    s->iv_home = calloc((size_t)s->plan->n_intervals + 1, sizeof(void *));
    if (!s->iv_home) return sc_errorf("out of memory creating a plan session");
    for (int i = 0; i < s->plan->n_fixed_intervals; i++) {
        const sc_value *x = &s->g->values[s->plan->intervals[i].value];
        if (x->data && (x->kind == SC_VALUE_PARAM || x->kind == SC_VALUE_OPT_STATE || x->kind == SC_VALUE_CONST))
            s->iv_home[i] = x->data;
    }
    return SC_OK;
}

sc_status plan_session_create_in_place(sc_backend *be, sc_graph *g, const sc_plan *plan, bool params_in_place,
                                       sc_plan_session **out) {
    *out = NULL;
    if (params_in_place && !be->iface->compute_on_host)
        return sc_errorf("plan: parameters can stay in place only on a backend that computes in host memory (not %s)",
                         be->iface->name);
    sc_plan_session *s = calloc(1, sizeof *s);
    if (!s) return sc_errorf("out of memory creating a plan session");
    s->g = g;
    s->plan = plan;
    size_t nv = (size_t)g->n_values + 1;
    s->root = malloc(sizeof(int) * nv);
    s->fixed_iv = malloc(sizeof(int) * nv);
    s->cur = malloc(sizeof(int) * nv);
    s->host = calloc(nv, sizeof(void *));
    s->host_step = calloc(nv, sizeof(int64_t));
    s->step_time = calloc((size_t)plan->n_steps + 1, sizeof(double));
    int max_xfer = 0;
    for (int i = 0; i < plan->n_steps; i++)
        if (plan->steps[i].transfer + 1 > max_xfer) max_xfer = plan->steps[i].transfer + 1;
    s->n_xfer = max_xfer;
    s->xfer = calloc((size_t)max_xfer + 1, sizeof(int64_t));
    s->streamed = calloc(nv, 1);
    s->pinned = calloc(nv, 1);
    s->feed_of = malloc(sizeof(int) * nv);
    s->last_xfer = malloc(sizeof(int) * nv);
    s->last_in = calloc(nv, sizeof(bool));
    s->release_at = malloc(sizeof(int) * nv);
    s->taken = calloc((size_t)plan->n_intervals + 1, sizeof(bool));
    s->waited = calloc((size_t)max_xfer + 1, sizeof(bool));
    bool fly_ok = true;
#ifndef NDEBUG
    s->fly = calloc((size_t)max_xfer + 2, sizeof *s->fly);
    fly_ok = s->fly != NULL;
#endif
    if (!s->root || !s->fixed_iv || !s->cur || !s->host || !s->host_step || !s->step_time || !s->xfer || !s->streamed || !s->pinned ||
        !s->feed_of || !s->last_xfer || !s->last_in || !s->waited || !s->release_at || !s->taken || !fly_ok) {
        plan_session_free(s);
        return sc_errorf("out of memory creating a plan session");
    }
    for (int v = 0; v < g->n_values; v++) s->fixed_iv[v] = -1, s->cur[v] = -1, s->feed_of[v] = -1;
    s->writes_params = weights_change_per_step(g);
    for (int i = 0; i < g->n_inputs; i++) s->feed_of[g->inputs[i]] = i;
    plan_value_roots(g, s->root);
    plan_host_release_steps(g, plan, s->root, s->release_at); /* schedule/host_copies.c: the policy */
    for (int i = 0; plan->iv_from && i < plan->n_intervals; i++)
        if (plan->iv_from[i] >= 0) s->taken[plan->iv_from[i]] = true;
    for (int i = 0; i < plan->n_fixed_intervals; i++) s->fixed_iv[plan->intervals[i].value] = i;
    /* streamed persistent values (no fixed interval) live in their host data */
    if (!plan_host_homes(g, plan, s->streamed)) {
        plan_session_free(s);
        return sc_errorf("out of memory creating a plan session");
    }
    for (int v = 0; v < g->n_values; v++)
        if (s->streamed[v] && !g->values[v].data) {
            plan_session_free(s);
            return sc_errorf("plan: streamed value '%s' has no host data", g->values[v].name);
        }
    int n_host_runs = 0;
    for (int i = 0; i < plan->n_steps; i++) n_host_runs += plan->steps[i].kind == SC_STEP_HOST_RUN;
    pthread_mutex_init(&s->pool_mu, NULL);
    s->pool_mu_ready = true;
    sc_status cst = comm_start(s, be);
    if (cst) {
        plan_session_free(s);
        return cst;
    }
    if (n_host_runs && (!be->iface->compute_on_host || plan_exec_host_worker_forced())) {
        sc_status wst = worker_start(s, n_host_runs);
        if (wst) {
            plan_session_free(s);
            return wst;
        }
    }
    sc_status st = be->iface->arena_create(be, plan->arena_bytes, (void **)&s->base);
    s->be = be;
    if (st) {
        s->base = NULL;
        plan_session_free(s);
        return st;
    }
    homes_pin(s);
    if (params_in_place) st = homes_in_place(s);
    if (!st) st = plan_session_load_params(s);
    if (st) {
        plan_session_free(s);
        return st;
    }
    *out = s;
    return SC_OK;
}

static sc_status feeds_put(sc_plan_session *s, const sc_tensor *inputs) {
    sc_graph *g = s->g;
    for (int i = 0; i < g->n_inputs; i++) {
        int v = g->inputs[i];
        const sc_desc *want = &g->values[v].desc, *got = &inputs[i].desc;
        if (got->dtype != want->dtype || !sc_desc_same_shape(got, want)) {
            char a[128], b[128];
            return sc_errorf("input '%s' expects %s but was given %s", g->values[v].name, sc_desc_str(want, a, sizeof a),
                             sc_desc_str(got, b, sizeof b));
        }
        if (!inputs[i].data) return sc_errorf("input '%s' was given no data", g->values[v].name);
        if (s->fixed_iv[v] < 0) continue; /* read by no node */
        SC_TRY(copy_sync(s, true, dev_ptr(s, s->fixed_iv[v]), inputs[i].data, value_bytes(g, v)));
    }
    return SC_OK;
}

static void opened(sc_plan_session *s, int iv) {
    const sc_interval *x = &s->plan->intervals[iv];
    if (x->offset + x->bytes > s->stats.peak_bytes) s->stats.peak_bytes = x->offset + x->bytes;
    s->cur[x->value] = iv;
}

static sc_status step_run(sc_plan_session *s, const sc_step *sp) {
    sc_graph *g = s->g;
    const sc_node *n = &g->nodes[sp->node];
    sc_tensor stack_in[8], stack_out[4];
    sc_tensor *in = n->n_in <= 8 ? stack_in : calloc((size_t)n->n_in, sizeof(sc_tensor));
    sc_tensor *out = n->n_out <= 4 ? stack_out : calloc((size_t)n->n_out, sizeof(sc_tensor));
    if (!in || !out) {
        if (in != stack_in) free(in);
        return sc_errorf("node '%s': out of memory", n->name);
    }
    for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k];
        in[k].desc = v >= 0 ? g->values[v].desc : (sc_desc){0};
        in[k].data = NULL;
        if (v < 0) continue;
        int iv = s->cur[s->root[v]];
        SC_ASSERT(iv >= 0); /* the plan read a value it had freed or never produced */
        FLY_CHECK(s, iv, false);
        in[k].data = dev_ptr(s, iv);
    }
    int next = sp->interval;
    for (int k = 0; k < n->n_out; k++) {
        int v = n->out[k];
        out[k].desc = v >= 0 ? g->values[v].desc : (sc_desc){0};
        out[k].data = NULL;
        if (v < 0) continue;
        if (s->root[v] != v) { /* in place: the input's storage */
            SC_ASSERT(s->cur[s->root[v]] >= 0);
            FLY_CHECK(s, s->cur[s->root[v]], true);
            out[k].data = dev_ptr(s, s->cur[s->root[v]]);
            continue;
        }
        SC_ASSERT(next >= 0 && next < s->plan->n_intervals && s->plan->intervals[next].value == v);
        FLY_CHECK(s, next, true);
        opened(s, next);
        out[k].data = dev_ptr(s, next++);
    }
    sc_status st;
    if (sc_op_is_collective(n->op) && s->comm_started) { /* overlapped with the steps after it */
        void **ip = malloc(sizeof(void *) * ((size_t)n->n_in + (size_t)n->n_out + 1));
        st = ip ? SC_OK : sc_errorf("node '%s': out of memory", n->name);
        for (int k = 0; !st && k < n->n_in; k++) ip[k] = in[k].data;
        for (int k = 0; !st && k < n->n_out; k++) ip[n->n_in + k] = out[k].data;
        if (!st) st = comm_issue(s, n, ip, ip + n->n_in);
        free(ip);
    } else {
        st = s->be->iface->run_node(s->be, n, in, n->n_in, out, n->n_out);
    }
    if (in != stack_in) free(in);
    if (out != stack_out) free(out);
    return st;
}

static sc_status step_transfer(sc_plan_session *s, const sc_step *sp) {
    SC_ASSERT(sp->transfer >= 0 && sp->transfer < s->n_xfer);
    if (sp->kind == SC_STEP_WAIT) {
        s->waited[sp->transfer] = true;
        SC_TRY(s->be->iface->wait(s->be, s->xfer[sp->transfer]));
        FLY_DONE(s, s->xfer[sp->transfer]);
        return SC_OK;
    }
    int v = sp->value;
    int64_t bytes = value_bytes(s->g, v), link = plan_step_bytes(s->g, sp);
    sc_status st = SC_OK;
    if (sp->wire && !s->be->iface->copy_wire)
        return sc_errorf("the plan moves '%s' in %s, which the %s backend cannot (it has no copy_wire)",
                         s->g->values[v].name, sc_dtype_name(sp->wire), s->be->iface->name);
    s->last_xfer[v] = sp->transfer;
    s->last_in[v] = sp->kind == SC_STEP_PREFETCH;
    void *host = host_of(s, v, bytes, &st);
    if (st) return st;
    if (sp->kind == SC_STEP_OFFLOAD) {
        int iv = s->cur[v];
        SC_ASSERT(iv >= 0); /* offloading a value that is not resident */
        FLY_CHECK(s, iv, false);
        s->host_step[v] = s->n_step;
        s->stats.bytes_d2h += link;
        if (sp->wire)
            SC_TRY(s->be->iface->copy_wire(s->be, false, host, dev_ptr(s, iv), sc_desc_numel(&s->g->values[v].desc), sp->wire,
                                           &s->xfer[sp->transfer]));
        else
            SC_TRY(s->be->iface->copy_d2h(s->be, host, dev_ptr(s, iv), bytes, &s->xfer[sp->transfer]));
        FLY_ADD(s, s->xfer[sp->transfer], iv, false);
        return SC_OK;
    }
    SC_ASSERT(sp->interval >= 0 && s->plan->intervals[sp->interval].value == v);
    SC_ASSERT(s->cur[v] < 0); /* one resident instance at a time */
    FLY_CHECK(s, sp->interval, true);
    opened(s, sp->interval);
    s->stats.bytes_h2d += link;
    if (sp->wire)
        SC_TRY(s->be->iface->copy_wire(s->be, true, dev_ptr(s, sp->interval), host, sc_desc_numel(&s->g->values[v].desc),
                                       sp->wire, &s->xfer[sp->transfer]));
    else
        SC_TRY(s->be->iface->copy_h2d(s->be, dev_ptr(s, sp->interval), host, bytes, &s->xfer[sp->transfer]));
    FLY_ADD(s, s->xfer[sp->transfer], sp->interval, true);
    return SC_OK;
}

static sc_status outputs_collect(sc_plan_session *s, sc_tensor *outputs) {
    sc_graph *g = s->g;
    for (int i = 0; i < g->n_outputs; i++) {
        int v = g->outputs[i];
        int64_t bytes = value_bytes(g, v);
        outputs[i].desc = g->values[v].desc;
        outputs[i].data = (sc_alloc_fail_now() ? NULL : aligned_alloc(64, (size_t)(bytes < 64 ? 64 : (bytes + 63) / 64 * 64)));
        if (!outputs[i].data) return sc_errorf("out of memory copying output '%s'", g->values[v].name);
        int iv = s->cur[s->root[v]];
        const void *h = iv < 0 ? host_current(s, s->root[v]) : NULL;
        if (iv < 0 && !h) return sc_errorf("plan: graph output '%s' is not resident at the end", g->values[v].name);
        if (h) memcpy(outputs[i].data, h, (size_t)bytes);
        else SC_TRY(copy_sync(s, false, dev_ptr(s, iv), outputs[i].data, bytes));
    }
    return SC_OK;
}

sc_status plan_session_step(sc_plan_session *s, const sc_tensor *inputs, sc_tensor *outputs) {
    sc_graph *g = s->g;
    const sc_plan *p = s->plan;
    double t0 = sc_clock_seconds();
    for (int i = 0; i < g->n_outputs; i++) outputs[i].data = NULL;
    s->n_step++;
    s->stats.peak_bytes = p->fixed_bytes;
    s->stats.bytes_h2d = s->stats.bytes_d2h = 0;
    for (int v = 0; v < g->n_values; v++) s->cur[v] = s->fixed_iv[v], s->last_xfer[v] = -1;
    memset(s->waited, 0, (size_t)s->n_xfer + 1);
    /* The last step updated weights. An inference plan leaves them as they are, and the CPU backend's
     * weight reorders (cpu_dnnl.h) then stay valid from one step to the next. */
    if (s->writes_params && s->be->iface->params_changed) s->be->iface->params_changed(s->be);
    s->feeds = inputs;
    sc_status st = feeds_put(s, inputs);
    for (int i = 0; !st && i < p->n_steps; i++) {
        const sc_step *sp = &p->steps[i];
        double ts = sc_clock_seconds();
        st = comm_settle_step(s, sp); /* collectives whose results this step needs */
        if (st) break;
        switch (sp->kind) {
        case SC_STEP_RUN: st = step_run(s, sp); break;
        case SC_STEP_FREE:
            SC_ASSERT(s->cur[sp->value] >= 0); /* freed twice or never opened */
            /* a block a later interval took over stays in use (plan->iv_from): a copy of the
               taker may be reading it already */
            if (!s->taken[s->cur[sp->value]]) FLY_CHECK(s, s->cur[sp->value], true);
            s->cur[sp->value] = -1;
            break;
        case SC_STEP_OFFLOAD:
        case SC_STEP_PREFETCH:
        case SC_STEP_WAIT: st = step_transfer(s, sp); break;
        case SC_STEP_HOST_RUN: st = s->worker_started ? step_host_run(s, i) : step_host_run_inline(s, i); break;
        }
        s->step_time[i] = sc_clock_seconds() - ts;
        if (st) st = sc_status_prefix(st, "plan step %d: ", i);
    }
    sc_status comm = s->comm_started ? comm_drain(s) : SC_OK; /* every collective done, results in place */
    if (st) sc_status_free(comm);
    else st = comm;
    sc_status drained = worker_drain(s); /* the next step's prefetches read what the updates wrote */
    if (st) sc_status_free(drained);
    else st = drained;
    if (!st) st = s->be->iface->synchronize(s->be);
#ifndef NDEBUG
    if (!st) s->n_fly = 0;
#endif
    if (!st) st = outputs_collect(s, outputs);
    if (st)
        for (int i = 0; i < g->n_outputs; i++) sc_tensor_free_data(&outputs[i]);
    s->stats.step_seconds = sc_clock_seconds() - t0;
    s->stats.step_time = s->step_time;
    return st;
}

sc_status plan_session_copy_value(sc_plan_session *s, int src, int dst) {
    int a = s->cur[s->root[src]], b = s->fixed_iv[dst];
    const void *h = a < 0 ? host_current(s, s->root[src]) : NULL; /* offloaded by the plan */
    if (a < 0 && !h) return sc_errorf("'%s' is not resident on the device", s->g->values[src].name);
    int64_t bytes = value_bytes(s->g, dst);
    if (bytes != value_bytes(s->g, src))
        return sc_errorf("copying '%s' into '%s': sizes differ", s->g->values[src].name, s->g->values[dst].name);
    if (h && b < 0 && s->streamed[dst]) {
        memcpy(s->g->values[dst].data, h, (size_t)bytes);
        return SC_OK;
    }
    if (h && b < 0) return sc_errorf("'%s' has no place in the fixed region", s->g->values[dst].name);
    if (h) return copy_sync(s, true, dev_ptr(s, b), (void *)h, bytes); /* copy_sync only reads host here */
    if (b < 0 && s->streamed[dst]) /* its home is the host data */
        return copy_sync(s, false, dev_ptr(s, a), s->g->values[dst].data, bytes);
    if (b < 0) return sc_errorf("'%s' has no place in the fixed region", s->g->values[dst].name);
    /* through the host, so it works on any backend (writebacks are small: BatchNorm statistics) */
    void *tmp = malloc((size_t)(bytes > 0 ? bytes : 1));
    if (!tmp) return sc_errorf("out of memory copying '%s'", s->g->values[src].name);
    sc_status st = copy_sync(s, false, dev_ptr(s, a), tmp, bytes);
    if (!st) st = copy_sync(s, true, dev_ptr(s, b), tmp, bytes);
    free(tmp);
    return st;
}

void *plan_session_value(sc_plan_session *s, int value) {
    int iv = s->cur[s->root[value]];
    return iv >= 0 ? dev_ptr(s, iv) : NULL;
}

void plan_session_stats(const sc_plan_session *s, sc_plan_stats *st) {
    *st = s->stats;
    st->host_bytes = s->host_made;
    st->bytes_synced = s->synced;
}
