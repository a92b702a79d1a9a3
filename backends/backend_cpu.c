/* The CPU backend of the plan executor (contract in backend.h).
 *
 * The "device" is one aligned malloc of the plan's arena, refused when it exceeds the capacity.
 * Copies go through a FIFO served by one copy thread (pthread, mutex + condition variable), so an
 * OFFLOAD or PREFETCH overlaps the RUN steps that follow it until its WAIT. Transfers complete in
 * the order they were started, so "transfer t finished" is "done >= t". A small copy with nothing
 * pending may be done at once by the caller (backend_cpu_set_inline_copies); it completes in order
 * too. run_node is cpu_run_node.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "core/alloc_fail.h"
#include "backends/cpu/cpu.h"

typedef struct {
    void *dst;
    const void *src;
    int64_t bytes;
} copy_job;

typedef struct {
    int64_t capacity;
    void *arena;
    int64_t arena_bytes;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    copy_job *q;
    int64_t q_cap, q_head, q_tail; /* ring buffer of pending jobs: [head, tail) */
    int64_t issued, done;
    int64_t h2d, d2h;
    int64_t inline_max; /* backend_cpu_set_inline_copies */
    bool stop;
} cpu_ctx;

static void *copy_thread(void *arg) {
    cpu_ctx *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (c->q_head == c->q_tail && !c->stop) pthread_cond_wait(&c->cv_work, &c->mu);
        if (c->q_head == c->q_tail && c->stop) break;
        copy_job j = c->q[c->q_head % c->q_cap];
        pthread_mutex_unlock(&c->mu);
        memcpy(j.dst, j.src, (size_t)j.bytes);
        pthread_mutex_lock(&c->mu);
        c->q_head++;
        c->done++;
        pthread_cond_broadcast(&c->cv_done);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static sc_status cpu_arena_create(sc_backend *b, int64_t bytes, void **base) {
    cpu_ctx *c = b->ctx;
    if (c->arena) return sc_errorf("cpu backend: an arena already exists (%lld bytes)", (long long)c->arena_bytes);
    if (c->capacity > 0 && bytes > c->capacity)
        return sc_errorf("cpu backend: the plan needs an arena of %lld bytes, over the device capacity of %lld",
                         (long long)bytes, (long long)c->capacity);
    size_t size = (size_t)(bytes < 64 ? 64 : (bytes + 63) / 64 * 64);
    c->arena = sc_alloc_fail_now() ? NULL : aligned_alloc(64, size); /* tests: core/alloc_fail.h */
    if (!c->arena) return sc_errorf("cpu backend: out of memory allocating an arena of %lld bytes", (long long)bytes);
    c->arena_bytes = bytes;
    *base = c->arena;
    return SC_OK;
}

static void cpu_arena_destroy(sc_backend *b) {
    cpu_ctx *c = b->ctx;
    free(c->arena);
    c->arena = NULL;
    c->arena_bytes = 0;
}

static sc_status copy_start(cpu_ctx *c, void *dst, const void *src, int64_t bytes, int64_t *transfer) {
    pthread_mutex_lock(&c->mu);
    if (bytes <= c->inline_max && c->q_head == c->q_tail) { /* the thread is idle: no handoff */
        memcpy(dst, src, (size_t)bytes);
        *transfer = ++c->issued;
        c->done++;
        pthread_mutex_unlock(&c->mu);
        return SC_OK;
    }
    if (c->q_tail - c->q_head == c->q_cap) {
        int64_t cap = c->q_cap * 2;
        copy_job *q = malloc(sizeof *q * (size_t)cap);
        if (!q) {
            pthread_mutex_unlock(&c->mu);
            return sc_errorf("cpu backend: out of memory queueing a copy");
        }
        for (int64_t i = c->q_head; i < c->q_tail; i++) q[i % cap] = c->q[i % c->q_cap];
        free(c->q);
        c->q = q;
        c->q_cap = cap;
    }
    c->q[c->q_tail % c->q_cap] = (copy_job){dst, src, bytes};
    c->q_tail++;
    *transfer = ++c->issued;
    pthread_cond_signal(&c->cv_work);
    pthread_mutex_unlock(&c->mu);
    return SC_OK;
}

static sc_status cpu_copy_h2d(sc_backend *b, void *dev, const void *host, int64_t bytes, int64_t *transfer) {
    cpu_ctx *c = b->ctx;
    c->h2d += bytes;
    return copy_start(c, dev, host, bytes, transfer);
}

static sc_status cpu_copy_d2h(sc_backend *b, void *host, const void *dev, int64_t bytes, int64_t *transfer) {
    cpu_ctx *c = b->ctx;
    c->d2h += bytes;
    return copy_start(c, host, dev, bytes, transfer);
}

static sc_status cpu_wait(sc_backend *b, int64_t transfer) {
    cpu_ctx *c = b->ctx;
    pthread_mutex_lock(&c->mu);
    if (transfer > c->issued) {
        pthread_mutex_unlock(&c->mu);
        return sc_errorf("cpu backend: wait for transfer %lld, which was never started", (long long)transfer);
    }
    while (c->done < transfer) pthread_cond_wait(&c->cv_done, &c->mu);
    pthread_mutex_unlock(&c->mu);
    return SC_OK;
}

static sc_status cpu_synchronize(sc_backend *b) {
    cpu_ctx *c = b->ctx;
    pthread_mutex_lock(&c->mu);
    int64_t t = c->issued;
    pthread_mutex_unlock(&c->mu);
    return cpu_wait(b, t);
}

static sc_status cpu_run(sc_backend *b, const sc_node *n, const sc_tensor *in, int n_in, sc_tensor *out, int n_out) {
    (void)b;
    return cpu_run_node(n, in, n_in, out, n_out);
}

static void cpu_memory(sc_backend *b, sc_backend_memory *m) {
    cpu_ctx *c = b->ctx;
    m->capacity = c->capacity;
    m->arena_bytes = c->arena_bytes;
    m->copied_h2d = c->h2d;
    m->copied_d2h = c->d2h;
    m->staged = 0; /* host memory is the device's own: nothing to stage */
}

static void cpu_params_changed_hook(sc_backend *b) {
    (void)b;
    cpu_params_changed();
}

static void cpu_destroy(sc_backend *b) {
    cpu_ctx *c = b->ctx;
    cpu_synchronize(b);
    pthread_mutex_lock(&c->mu);
    c->stop = true;
    pthread_cond_signal(&c->cv_work);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv_work);
    pthread_cond_destroy(&c->cv_done);
    free(c->arena);
    free(c->q);
    free(c);
    free(b);
}

static const sc_backend_i cpu_iface = {
    .name = "cpu",
    .compute_on_host = true,
    .arena_create = cpu_arena_create,
    .arena_destroy = cpu_arena_destroy,
    .copy_h2d = cpu_copy_h2d,
    .copy_d2h = cpu_copy_d2h,
    .wait = cpu_wait,
    .run_node = cpu_run,
    .synchronize = cpu_synchronize,
    .memory = cpu_memory,
    .params_changed = cpu_params_changed_hook,
    .destroy = cpu_destroy,
};

void backend_cpu_set_inline_copies(sc_backend *b, int64_t max_bytes) {
    cpu_ctx *c = b->ctx;
    pthread_mutex_lock(&c->mu);
    c->inline_max = max_bytes;
    pthread_mutex_unlock(&c->mu);
}

sc_status backend_cpu_create(int64_t capacity, sc_backend **out) {
    *out = NULL;
    sc_backend *b = calloc(1, sizeof *b);
    cpu_ctx *c = calloc(1, sizeof *c);
    if (c) c->q = malloc(sizeof *c->q * 64);
    if (!b || !c || !c->q) {
        if (c) free(c->q);
        free(b);
        free(c);
        return sc_errorf("cpu backend: out of memory");
    }
    c->capacity = capacity;
    c->q_cap = 64;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv_work, NULL);
    pthread_cond_init(&c->cv_done, NULL);
    if (pthread_create(&c->thread, NULL, copy_thread, c) != 0) {
        free(c->q);
        free(c);
        free(b);
        return sc_errorf("cpu backend: cannot start the copy thread");
    }
    b->iface = &cpu_iface;
    b->ctx = c;
    *out = b;
    return SC_OK;
}
