/* The host side of the plan executor (plan_exec.c has the contract): host copies of moved values
 * and their pool, the pinning of streamed homes, and HOST_RUN updates, inline or on the session's
 * host worker thread. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "backends/plan_exec_internal.h"
#include "core/big_alloc.h"
#include "core/alloc_fail.h"

static bool force_host_worker; /* plan_exec_force_host_worker */

bool plan_exec_host_worker_forced(void) { return force_host_worker; }

sc_status host_copy_sync(sc_plan_session *s, bool to_device, void *dev, void *host, int64_t bytes, int64_t *t) {
    if (to_device) {
        SC_TRY(s->be->iface->copy_h2d(s->be, dev, host, bytes, t));
        s->stats.bytes_h2d += bytes;
    } else {
        SC_TRY(s->be->iface->copy_d2h(s->be, host, dev, bytes, t));
        s->stats.bytes_d2h += bytes;
    }
    return s->be->iface->wait(s->be, *t);
}

/* The session's host copies: pinned by the backend when it can (CUDA copies them directly, without
 * staging), else plain memory (core/big_alloc.h: huge pages for large copies). */
void *host_copy_alloc(const sc_plan_session *s, size_t bytes) {
    if (sc_alloc_fail_now()) return NULL;
    return s->be && s->be->iface->host_alloc ? s->be->iface->host_alloc(s->be, (int64_t)bytes) : sc_big_alloc(bytes);
}

void host_copy_free(const sc_plan_session *s, void *p) {
    if (p && s->be && s->be->iface->host_free) s->be->iface->host_free(s->be, p);
    else free(p);
}

/* Pins every streamed home (the parameters and state the link reads and writes every step). */
void homes_pin(sc_plan_session *s) {
    if (!s->be->iface->host_pin) return;
    for (int v = 0; v < s->g->n_values; v++)
        if (s->streamed[v] && s->g->values[v].data)
            s->pinned[v] = s->be->iface->host_pin(s->be, s->g->values[v].data, value_bytes(s->g, v));
}

void homes_unpin(sc_plan_session *s) {
    for (int v = 0; s->pinned && v < s->g->n_values; v++)
        if (s->pinned[v]) s->be->iface->host_unpin(s->be, s->g->values[v].data);
}

/* Host side of a transferred value: the graph's data for a streamed persistent value, else a
 * session buffer made at its first OFFLOAD. */
void *host_of(sc_plan_session *s, int v, int64_t bytes, sc_status *st) {
    if (s->streamed[v]) return s->g->values[v].data;
    if (s->worker_started) pthread_mutex_lock(&s->pool_mu);
    for (int i = 0; !s->host[v] && i < s->n_pool; i++)
        if (s->pool[i].bytes == host_bytes(bytes)) s->host[v] = s->pool[i].p, s->pool[i] = s->pool[--s->n_pool];
    if (s->worker_started) pthread_mutex_unlock(&s->pool_mu);
    if (!s->host[v]) {
        s->host[v] = host_copy_alloc(s, host_bytes(bytes));
        if (!s->host[v]) *st = sc_errorf("out of memory for the host copy of '%s'", s->g->values[v].name);
        else s->host_made += (int64_t)host_bytes(bytes);
    }
    return s->host[v];
}

/* The host copy of computed value v made by this step's OFFLOAD (current once the step synchronised),
 * or NULL. */
const void *host_current(const sc_plan_session *s, int v) {
    return !s->streamed[v] && s->host[v] && s->host_step[v] == s->n_step ? s->host[v] : NULL;
}

/* Whether the latest transfer of v this step (if any) has been waited for. A HOST_RUN reads its
 * inputs' OFFLOADed copies and rewrites the homes of its outputs, which a PREFETCH may be reading:
 * both must be complete, which the plan guarantees by its WAITs (checked here, every step). */
static bool settled(const sc_plan_session *s, int v) { return s->last_xfer[v] < 0 || s->waited[s->last_xfer[v]]; }

/* Host address of value v's current content for a HOST_RUN (contract at the top). A computed input
 * (a gradient) may be on its way back to the device meanwhile (PREFETCHed for a device node that
 * reads it later): that copy only reads the host copy the HOST_RUN reads, and a prefetched value's
 * copy is never pooled (plan_host_release_steps), so only an OFFLOAD still writing it is a race. */
static void *host_input(sc_plan_session *s, int v) {
    const sc_value *x = &s->g->values[v];
    /* a host update must not race a copy of its operands */
    SC_ASSERT(settled(s, v) || (x->producer >= 0 && s->last_in[v]));
    if (x->producer >= 0) return (void *)host_current(s, v); /* offloaded by this step */
    if (s->feed_of[v] >= 0) return s->feeds[s->feed_of[v]].data;
    /* a parameter or state with a device home would be stale here: the plan never does that */
    SC_ASSERT(s->fixed_iv[v] < 0 || (x->kind != SC_VALUE_PARAM && x->kind != SC_VALUE_OPT_STATE));
    return x->data;
}

/* After HOST_RUN step i: host copies read for the last time go back to the pool (on the worker,
 * under pool_mu; the executor only takes buffers of other values meanwhile). */
static sc_status host_release(sc_plan_session *s, int i) {
    const sc_node *n = &s->g->nodes[s->plan->steps[i].node];
    sc_status st = SC_OK;
    pthread_mutex_lock(&s->pool_mu);
    for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k] >= 0 ? s->root[n->in[k]] : -1;
        if (v < 0 || s->release_at[v] != i || !s->host[v]) continue;
        if (s->n_pool == s->cap_pool) {
            int cap = s->cap_pool ? 2 * s->cap_pool : 16;
            struct pooled *q = realloc(s->pool, sizeof *q * (size_t)cap);
            if (!q) {
                st = sc_errorf("out of memory pooling host copies");
                break;
            }
            s->pool = q, s->cap_pool = cap;
        }
        s->pool[s->n_pool++] = (struct pooled){s->host[v], host_bytes(value_bytes(s->g, v))};
        s->host[v] = NULL;
        s->host_step[v] = 0;
    }
    pthread_mutex_unlock(&s->pool_mu);
    return st;
}

/* The host worker: runs queued updates in order until told to stop. The kernel is called without
 * the profiler (sc_profile is the executor thread's), and its OpenMP team is the worker's own. */
static void *worker_main(void *arg) {
    sc_plan_session *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->worker_stop && s->job_head == s->job_tail) pthread_cond_wait(&s->has_job, &s->mu);
        if (s->job_head == s->job_tail) break; /* stop, nothing left */
        struct host_job *j = &s->jobs[s->job_head];
        pthread_mutex_unlock(&s->mu);
        const sc_node *n = &s->g->nodes[s->plan->steps[j->step].node];
        sc_kernel_call call = {n, j->in, n->n_in, j->out, n->n_out};
        sc_status st = sc_cpu_kernels[n->op](&call);
        if (!st) st = host_release(s, j->step);
        pthread_mutex_lock(&s->mu);
        if (st && !s->worker_err) s->worker_err = st;
        else sc_status_free(st);
        s->job_head++;
        pthread_cond_broadcast(&s->idle);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

sc_status worker_start(sc_plan_session *s, int n_host_runs) {
    s->jobs = calloc((size_t)n_host_runs + 1, sizeof *s->jobs);
    if (!s->jobs) return sc_errorf("out of memory for %d host updates", n_host_runs);
    s->n_jobs_cap = n_host_runs;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->has_job, NULL);
    pthread_cond_init(&s->idle, NULL);
    if (pthread_create(&s->worker, NULL, worker_main, s) != 0) {
        free(s->jobs);
        s->jobs = NULL;
        return sc_errorf("cannot start the host update thread");
    }
    s->worker_started = true;
    return SC_OK;
}

/* Waits until every queued update ran; the first failure of the step, if any. */
sc_status worker_drain(sc_plan_session *s) {
    if (!s->worker_started) return SC_OK;
    pthread_mutex_lock(&s->mu);
    while (s->job_head != s->job_tail) pthread_cond_wait(&s->idle, &s->mu);
    sc_status st = s->worker_err;
    s->worker_err = SC_OK;
    s->job_head = s->job_tail = 0;
    pthread_mutex_unlock(&s->mu);
    return st;
}

void worker_stop(sc_plan_session *s) {
    if (!s->worker_started) return;
    pthread_mutex_lock(&s->mu);
    s->worker_stop = true;
    pthread_cond_broadcast(&s->has_job);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->worker, NULL);
    s->worker_started = false;
    pthread_cond_destroy(&s->has_job);
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->mu);
}

void plan_exec_force_host_worker(bool on) { force_host_worker = on; }

/* Resolves a HOST_RUN's host operands (their copies are settled: the plan's WAITs came first) into
 * job j; for the worker or for a run inline. */
static sc_status host_job_fill(sc_plan_session *s, int i, struct host_job *j) {
    const sc_node *n = &s->g->nodes[s->plan->steps[i].node];
    if (n->n_in > 8 || n->n_out > 4) return sc_errorf("node '%s': too many operands for a host update", n->name);
    if (!sc_cpu_kernels[n->op]) return sc_errorf("node '%s': op %s has no CPU kernel for a host update", n->name, sc_op_name(n->op));
    j->step = i;
    for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k];
        j->in[k].desc = v >= 0 ? s->g->values[v].desc : (sc_desc){0};
        j->in[k].data = v >= 0 ? host_input(s, s->root[v]) : NULL;
        if (v >= 0 && !j->in[k].data) return sc_errorf("node '%s': input '%s' has no host copy", n->name, s->g->values[v].name);
    }
    for (int k = 0; k < n->n_out; k++) {
        int v = n->out[k];
        j->out[k].desc = v >= 0 ? s->g->values[v].desc : (sc_desc){0};
        j->out[k].data = NULL;
        if (v < 0) continue;
        SC_ASSERT(s->root[v] != v); /* host updates write in place only */
        j->out[k].data = host_input(s, s->root[v]);
    }
    return SC_OK;
}

/* Inline: the update runs now in this thread (through cpu_run_node, so --profile sees it), then its
 * dead copies go back to the pool. */
sc_status step_host_run_inline(sc_plan_session *s, int i) {
    struct host_job j;
    SC_TRY(host_job_fill(s, i, &j));
    const sc_node *n = &s->g->nodes[s->plan->steps[i].node];
    SC_TRY(cpu_run_node(n, j.in, n->n_in, j.out, n->n_out));
    return host_release(s, i);
}

/* Queued for the worker. */
sc_status step_host_run(sc_plan_session *s, int i) {
    SC_ASSERT(s->jobs && s->job_tail < s->n_jobs_cap);
    SC_TRY(host_job_fill(s, i, &s->jobs[s->job_tail])); /* beyond the worker's reach until tail moves */
    pthread_mutex_lock(&s->mu);
    s->job_tail++;
    pthread_cond_signal(&s->has_job);
    pthread_mutex_unlock(&s->mu);
    return SC_OK;
}

