/* Private to the plan executor's files (plan_exec.c, the device side; plan_exec_host.c, the host
 * side): the session and the calls between the two halves. */
#ifndef SC_PLAN_EXEC_INTERNAL_H
#define SC_PLAN_EXEC_INTERNAL_H

#include <pthread.h>

#include "backends/plan_exec.h"

struct sc_plan_session {
    sc_backend *be;
    sc_graph *g;
    const sc_plan *plan;
    char *base;          /* device arena */
    int *root;           /* per value: storage root (in-place outputs resolved to their input) */
    int *fixed_iv;       /* per value: its fixed interval, -1 if none */
    void **iv_home;      /* per interval: with params in place, a persistent value's own host data
                            used as its device copy (NULL: the arena at the interval's offset) */
    int *cur;            /* per value (root): interval resident now, -1 when not resident */
    void **host;         /* per value: host copy made by OFFLOAD (or streamed home), NULL if none */
    int64_t *host_step;  /* per value: the step (n_step) whose OFFLOAD made host[v], 0 if none */
    int64_t n_step;      /* steps started */
    bool writes_params;  /* weights may change between steps (plan_exec.c weights_change_per_step):
                            backend caches keyed by weight values go stale every step */
    int64_t *xfer;       /* plan transfer id -> backend transfer id */
    int n_xfer;
    bool *streamed;      /* per value: persistent, home in host memory (no fixed interval) */
    bool *pinned;        /* per value: its home was pinned by the backend (host_pin), to unpin */
    int *feed_of;        /* per value: its index among the graph inputs, -1 */
    int *last_xfer;      /* per value: plan transfer id of its latest OFFLOAD or PREFETCH this step, -1 */
    bool *last_in;       /* per value: that transfer is a PREFETCH (it reads the host copy) */
    int *release_at;     /* per value: the HOST_RUN step after which its host copy returns to the pool, -1 */
    struct pooled {
        void *p;
        size_t bytes;
    } *pool;             /* released host copies */
    int n_pool, cap_pool;
    int64_t host_made;   /* bytes of host copies allocated (sc_plan_stats.host_bytes) */
    int64_t synced;      /* bytes plan_exec_sync_params_to_host copied (sc_plan_stats.bytes_synced) */
    pthread_mutex_t pool_mu; /* the pool: the executor takes, the host worker gives back */
    /* host worker (HOST_RUN): a FIFO of queued updates, drained at the end of every step */
    struct host_job {
        int step;             /* the HOST_RUN's plan step */
        sc_tensor in[8], out[4];
    } *jobs;
    int n_jobs_cap, job_head, job_tail; /* [head, tail) waiting or running */
    pthread_t worker;
    pthread_mutex_t mu;
    pthread_cond_t has_job, idle;
    bool worker_started, worker_stop, pool_mu_ready;
    sc_status worker_err; /* the first failed update of the step */
    bool *waited;        /* per plan transfer id: its WAIT ran this step */
    bool *taken;         /* per interval: a later interval took over its block (plan->iv_from) */
    const sc_tensor *feeds; /* the inputs of the step in progress (HOST_RUN reads lr and step there) */
#ifndef NDEBUG
    struct inflight {
        int64_t id, lo, hi; /* backend transfer id, device byte range [lo, hi) */
        bool h2d;
    } *fly;
    int n_fly;
#endif
    double *step_time;
    sc_plan_stats stats;
    /* collectives (plan_exec_comm.c): this step's queue, run in order by the comm thread */
    struct comm_job {
        int node;
        char *flat;      /* the inputs packed, then the result */
        int64_t n;       /* elements of dtype t */
        sc_dtype t;
        void **out;      /* device places of the outputs */
        int n_out;
        sc_status st;    /* the collective's outcome */
        bool finished;   /* results copied out this step */
    } *cjobs;
    int n_cjobs, cj_issued, cj_run; /* capacity, queued this step, done (cj_run under cmu) */
    int *pending;        /* per value (root): 1 + the job whose results it waits for, 0 none */
    pthread_t comm_thread;
    pthread_mutex_t cmu;
    pthread_cond_t c_has, c_done;
    bool comm_started, comm_stop;
};

static inline int64_t value_bytes(const sc_graph *g, int v) {
    int64_t b = sc_desc_bytes(&g->values[v].desc);
    return b < 0 ? 0 : b;
}

static inline size_t host_bytes(int64_t bytes) { return (size_t)plan_host_buffer_bytes(bytes); }

/* plan_exec_comm.c */
sc_status comm_start(sc_plan_session *s, const sc_backend *be); /* the comm thread, when the plan has collectives
                                                                   and be runs none on the device */
void comm_stop(sc_plan_session *s);
sc_status comm_issue(sc_plan_session *s, const sc_node *n, void *const *in, void *const *out);
sc_status comm_settle(sc_plan_session *s, int v);
sc_status comm_settle_step(sc_plan_session *s, const sc_step *sp);
sc_status comm_drain(sc_plan_session *s);

/* plan_exec_host.c */
/* A copy between a device place and host memory, waited for (transfer id *t), counted in the step's
 * bytes moved. */
sc_status host_copy_sync(sc_plan_session *s, bool to_device, void *dev, void *host, int64_t bytes, int64_t *t);
void *host_copy_alloc(const sc_plan_session *s, size_t bytes);
void host_copy_free(const sc_plan_session *s, void *p);
void homes_pin(sc_plan_session *s);   /* the streamed homes, through the backend's host_pin */
void homes_unpin(sc_plan_session *s);
/* Host side of a transferred value: its home, or a session buffer (pooled) made at its first transfer. */
void *host_of(sc_plan_session *s, int v, int64_t bytes, sc_status *st);
/* The host copy of computed value v made by this step's OFFLOAD, or NULL. */
const void *host_current(const sc_plan_session *s, int v);
sc_status worker_start(sc_plan_session *s, int n_host_runs);
sc_status worker_drain(sc_plan_session *s); /* waits for the queued updates; the first failure */
void worker_stop(sc_plan_session *s);
sc_status step_host_run(sc_plan_session *s, int i);        /* HOST_RUN step i, queued for the worker */
sc_status step_host_run_inline(sc_plan_session *s, int i); /* HOST_RUN step i, run now */
bool plan_exec_host_worker_forced(void);

#endif
