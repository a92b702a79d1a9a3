/* The collective side of the plan executor (plan_exec.c has the contract): data-parallel AllReduce,
 * Reduce and Broadcast RUNs (graph/ops_train.def) overlapped with the steps that follow them.
 *
 * A collective RUN is split in three. At the RUN, on the executor's thread, its inputs are copied
 * into one host buffer (the backend's device-to-host copies: a memcpy on the CPU, the PCIe link on a
 * GPU) and the job is queued. The session's comm thread runs the queued collectives in plan order,
 * which is the same on every rank (train_dist.c checks), on those host buffers (backends/comm.h).
 * The results are copied into the RUN's outputs when a later step first needs one of them: a RUN
 * reading it (the optimizer update), an OFFLOAD of it, its FREE, or the end of the step. So the
 * collective of one bucket runs while backward computes the next ones, as PyTorch DDP's do; the
 * outputs' device blocks are the RUN's (opened there, static until their FREE), so nothing else
 * writes them meanwhile, and the inputs were copied out before the RUN returned, so their blocks
 * may be reused at once.
 *
 * Only the comm thread calls the process group during a step; the trainer's own collectives (the
 * step's outcome, the loss) come after the step has drained the queue (MPI_THREAD_SERIALIZED).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/common/common.h"
#include "backends/plan_exec_internal.h"

static sc_status comm_copy(sc_plan_session *s, bool to_device, void *dev, void *host, int64_t bytes) {
    int64_t t;
    return host_copy_sync(s, to_device, dev, host, bytes, &t);
}

static void *comm_main(void *arg) {
    sc_plan_session *s = arg;
    pthread_mutex_lock(&s->cmu);
    for (;;) {
        while (!s->comm_stop && s->cj_run == s->cj_issued) pthread_cond_wait(&s->c_has, &s->cmu);
        if (s->cj_run == s->cj_issued) break;
        struct comm_job *j = &s->cjobs[s->cj_run];
        pthread_mutex_unlock(&s->cmu);
        sc_status st = sc_collective_host(&s->g->nodes[j->node], j->flat, j->n, j->t);
        pthread_mutex_lock(&s->cmu);
        j->st = st;
        s->cj_run++;
        pthread_cond_broadcast(&s->c_done);
    }
    pthread_mutex_unlock(&s->cmu);
    return NULL;
}

sc_status comm_start(sc_plan_session *s, const sc_backend *be) {
    if (be->iface->device_collectives) return SC_OK; /* run_node enqueues them on the device */
    int n = 0;
    for (int i = 0; i < s->plan->n_steps; i++)
        n += s->plan->steps[i].kind == SC_STEP_RUN && sc_op_is_collective(s->g->nodes[s->plan->steps[i].node].op);
    if (n == 0) return SC_OK;
    s->cjobs = calloc((size_t)n, sizeof *s->cjobs);
    s->pending = calloc((size_t)s->g->n_values + 1, sizeof(int));
    if (!s->cjobs || !s->pending) return sc_errorf("out of memory for %d collectives", n);
    s->n_cjobs = n;
    pthread_mutex_init(&s->cmu, NULL);
    pthread_cond_init(&s->c_has, NULL);
    pthread_cond_init(&s->c_done, NULL);
    if (pthread_create(&s->comm_thread, NULL, comm_main, s) != 0) {
        pthread_cond_destroy(&s->c_done);
        pthread_cond_destroy(&s->c_has);
        pthread_mutex_destroy(&s->cmu);
        return sc_errorf("cannot start the collectives' thread");
    }
    s->comm_started = true;
    return SC_OK;
}

void comm_stop(sc_plan_session *s) {
    if (s->comm_started) {
        pthread_mutex_lock(&s->cmu);
        s->comm_stop = true;
        pthread_cond_broadcast(&s->c_has);
        pthread_mutex_unlock(&s->cmu);
        pthread_join(s->comm_thread, NULL);
        pthread_cond_destroy(&s->c_done);
        pthread_cond_destroy(&s->c_has);
        pthread_mutex_destroy(&s->cmu);
        s->comm_started = false;
    }
    for (int i = 0; s->cjobs && i < s->n_cjobs; i++) {
        free(s->cjobs[i].flat);
        free(s->cjobs[i].out);
        sc_status_free(s->cjobs[i].st);
    }
    free(s->cjobs);
    free(s->pending);
    s->cjobs = NULL;
    s->pending = NULL;
}

/* The RUN of collective node n: its inputs (at in[k]) into the job's buffer, its outputs' places
 * (out[k]) kept for the results; queued for the comm thread. */
sc_status comm_issue(sc_plan_session *s, const sc_node *n, void *const *in, void *const *out) {
    SC_ASSERT(s->comm_started && s->cj_issued < s->n_cjobs);
    struct comm_job *j = &s->cjobs[s->cj_issued];
    j->node = (int)(n - s->g->nodes);
    j->t = s->g->values[n->in[0]].desc.dtype;
    j->n = 0;
    for (int k = 0; k < n->n_in; k++) {
        if (s->g->values[n->in[k]].desc.dtype != j->t)
            return sc_errorf("node '%s': the bucket mixes %s and %s tensors", n->name, sc_dtype_name(j->t),
                             sc_dtype_name(s->g->values[n->in[k]].desc.dtype));
        j->n += sc_desc_numel(&s->g->values[n->in[k]].desc);
    }
    size_t es = sc_dtype_size(j->t);
    free(j->flat);
    free(j->out);
    j->flat = malloc((size_t)j->n * es + 1);
    j->out = calloc((size_t)n->n_out + 1, sizeof(void *));
    j->n_out = n->n_out;
    if (!j->flat || !j->out) return sc_errorf("node '%s': out of memory for the collective's host buffer", n->name);
    int64_t at = 0;
    for (int k = 0; k < n->n_in; k++) {
        int64_t bytes = value_bytes(s->g, n->in[k]);
        SC_TRY(comm_copy(s, false, in[k], j->flat + at, bytes));
        at += bytes;
    }
    for (int k = 0; k < n->n_out; k++) {
        j->out[k] = out[k];
        if (n->out[k] >= 0) s->pending[s->root[n->out[k]]] = s->cj_issued + 1;
    }
    pthread_mutex_lock(&s->cmu);
    s->cj_issued++;
    pthread_cond_signal(&s->c_has);
    pthread_mutex_unlock(&s->cmu);
    return SC_OK;
}

/* Waits for job i and copies its results into its outputs (once). */
static sc_status job_finish(sc_plan_session *s, int i) {
    struct comm_job *j = &s->cjobs[i];
    if (j->finished) return SC_OK;
    pthread_mutex_lock(&s->cmu);
    while (s->cj_run <= i) pthread_cond_wait(&s->c_done, &s->cmu);
    pthread_mutex_unlock(&s->cmu);
    j->finished = true;
    const sc_node *n = &s->g->nodes[j->node];
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k] >= 0 && s->pending[s->root[n->out[k]]] == i + 1) s->pending[s->root[n->out[k]]] = 0;
    sc_status st = j->st;
    j->st = SC_OK;
    int64_t at = 0;
    for (int k = 0; !st && k < n->n_out; k++) {
        int64_t bytes = value_bytes(s->g, n->out[k]);
        st = comm_copy(s, true, j->out[k], j->flat + at, bytes);
        at += bytes;
    }
    return st;
}

sc_status comm_settle(sc_plan_session *s, int v) {
    if (!s->pending || v < 0) return SC_OK;
    int j = s->pending[s->root[v]];
    return j ? job_finish(s, j - 1) : SC_OK;
}

/* Before step sp: the collectives whose results it reads, overwrites or frees. */
sc_status comm_settle_step(sc_plan_session *s, const sc_step *sp) {
    if (!s->pending) return SC_OK;
    if (sp->kind == SC_STEP_RUN || sp->kind == SC_STEP_HOST_RUN) {
        const sc_node *n = &s->g->nodes[sp->node];
        for (int k = 0; k < n->n_in; k++) SC_TRY(comm_settle(s, n->in[k]));
        for (int k = 0; k < n->n_out; k++) SC_TRY(comm_settle(s, n->out[k]));
        return SC_OK;
    }
    if (sp->kind == SC_STEP_FREE || sp->kind == SC_STEP_OFFLOAD) return comm_settle(s, sp->value);
    return SC_OK;
}

/* The end of a step: every queued collective finished and its results in place; the first failure. */
sc_status comm_drain(sc_plan_session *s) {
    sc_status first = SC_OK;
    for (int i = 0; i < s->cj_issued; i++) {
        sc_status st = job_finish(s, i);
        if (st && !first) first = st;
        else sc_status_free(st);
    }
    for (int i = 0; i < s->cj_issued; i++) s->cjobs[i].finished = false;
    pthread_mutex_lock(&s->cmu);
    s->cj_issued = s->cj_run = 0;
    pthread_mutex_unlock(&s->cmu);
    return first;
}
