/* The CPU backend of the plan executor (contract in backend.h).
 *
 * The "device" is one aligned malloc of the plan's arena, refused when it exceeds the capacity.
 * The link has two directions, as a PCIe link (full duplex, a copy engine each way on a GPU) and
 * the planner's timeline model (schedule/timeline.c) have: host-to-device copies go through one
 * FIFO served by one copy thread and device-to-host copies through another (pthreads, one mutex,
 * condition variables), so an OFFLOAD and a PREFETCH proceed side by side and both overlap the RUN
 * steps that follow them until their WAIT. Transfer ids increase over both directions; each FIFO
 * completes in order, so "every transfer <= t finished" is "no queued job with id <= t" in either.
 * A small copy with nothing pending in its direction may be done at once by the caller
 * (backend_cpu_set_inline_copies). With a modelled link (backend_cpu_set_link_bandwidth) every copy
 * lasts at least bytes / bandwidth on its lane, from when the lane starts it: the lane sleeps out
 * what the memcpy did not take, so a plan meets a PCIe-like link, and the timeline model's FIFO per
 * direction, without a GPU. A copy through a 16-bit wire type (copy_wire) rounds and widens on its
 * lane, and counts and paces the 2 bytes per element a 16-bit link would carry. run_node is
 * cpu_run_node.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/backend.h"
#include "core/alloc_fail.h"
#include "core/big_alloc.h"
#include "core/clock.h"
#include "core/half.h"
#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_rng.h"

typedef struct {
    void *dst;
    const void *src;
    int64_t bytes, id;  /* bytes on the link */
    double seconds;     /* the modelled link's time for it; 0 = as fast as memcpy */
    sc_dtype wire;      /* copy_wire: f32 elements through this 16-bit type (bytes / 2 of them), else 0 */
} copy_job;

struct cpu_ctx;

/* One direction of the link: a ring of pending jobs [head, tail) and the thread that serves it. */
typedef struct {
    struct cpu_ctx *c;
    pthread_t thread;
    pthread_cond_t cv_work;
    copy_job *q;
    int64_t q_cap, q_head, q_tail;
    bool started;
} copy_lane;

typedef struct cpu_ctx {
    int64_t capacity;
    void *arena;
    int64_t arena_bytes;
    pthread_mutex_t mu; /* both lanes' rings, issued, stop */
    pthread_cond_t cv_done;
    copy_lane lane[2];  /* 0 host to device, 1 device to host */
    int64_t issued;
    int64_t h2d, d2h;
    int64_t inline_max; /* backend_cpu_set_inline_copies */
    double link_bandwidth; /* backend_cpu_set_link_bandwidth: bytes/s each way; 0 = memcpy speed */
    bool stop;
} cpu_ctx;

/* Sleeps out what a copy started at t0 has left of its modelled time. */
static void link_pace(double t0, double seconds) {
    double left = seconds - (sc_clock_seconds() - t0);
    if (left <= 0) return;
    struct timespec ts = {.tv_sec = (time_t)left, .tv_nsec = (long)((left - (double)(time_t)left) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* A copy_job's data movement: a memcpy, or f32 -> wire type -> f32 by blocks (the rounding a
 * 16-bit link applies, and the widening after it). */
static void job_copy(const copy_job *j) {
    if (j->wire == SC_DTYPE_UNDEFINED) {
        memcpy(j->dst, j->src, (size_t)j->bytes);
        return;
    }
    enum { BLOCK = 4096 };
    uint16_t h[BLOCK];
    int64_t n = j->bytes / 2;
    for (int64_t at = 0; at < n; at += BLOCK) {
        int64_t len = n - at < BLOCK ? n - at : BLOCK;
        const float *src = (const float *)j->src + at;
        float *dst = (float *)j->dst + at;
        if (j->wire == SC_F16) {
            sc_f32_to_f16_n(h, src, len);
            sc_f16_to_f32_n(dst, h, len);
        } else {
            sc_f32_to_bf16_n(h, src, len);
            sc_bf16_to_f32_n(dst, h, len);
        }
    }
}

static void *copy_thread(void *arg) {
    copy_lane *l = arg;
    cpu_ctx *c = l->c;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (l->q_head == l->q_tail && !c->stop) pthread_cond_wait(&l->cv_work, &c->mu);
        if (l->q_head == l->q_tail && c->stop) break;
        copy_job j = l->q[l->q_head % l->q_cap];
        pthread_mutex_unlock(&c->mu);
        double t0 = sc_clock_seconds();
        job_copy(&j);
        if (j.seconds > 0) link_pace(t0, j.seconds);
        pthread_mutex_lock(&c->mu);
        l->q_head++;
        pthread_cond_broadcast(&c->cv_done);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* Every transfer with id <= t has finished: no lane still holds one (each lane is in id order). */
static bool finished_upto(const cpu_ctx *c, int64_t t) {
    for (int d = 0; d < 2; d++) {
        const copy_lane *l = &c->lane[d];
        if (l->q_head != l->q_tail && l->q[l->q_head % l->q_cap].id <= t) return false;
    }
    return true;
}

static sc_status cpu_arena_create(sc_backend *b, int64_t bytes, void **base) {
    cpu_ctx *c = b->ctx;
    SC_TRY(backend_arena_admits("cpu", c->arena != NULL, c->arena_bytes, c->capacity, bytes));
    size_t size = (size_t)(bytes < 64 ? 64 : (bytes + 63) / 64 * 64);
    c->arena = sc_alloc_fail_now() ? NULL : sc_big_alloc(size); /* tests: core/alloc_fail.h */
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

static sc_status copy_start(cpu_ctx *c, int d, void *dst, const void *src, int64_t bytes, sc_dtype wire,
                            int64_t *transfer) {
    copy_lane *l = &c->lane[d];
    copy_job job = {dst, src, bytes, 0, c->link_bandwidth > 0 ? (double)bytes / c->link_bandwidth : 0, wire};
    pthread_mutex_lock(&c->mu);
    if (bytes <= c->inline_max && l->q_head == l->q_tail && c->link_bandwidth <= 0) { /* idle lane: no handoff */
        job_copy(&job);
        *transfer = ++c->issued;
        pthread_mutex_unlock(&c->mu);
        return SC_OK;
    }
    if (l->q_tail - l->q_head == l->q_cap) {
        int64_t cap = l->q_cap * 2;
        copy_job *q = malloc(sizeof *q * (size_t)cap);
        if (!q) {
            pthread_mutex_unlock(&c->mu);
            return sc_errorf("cpu backend: out of memory queueing a copy");
        }
        for (int64_t i = l->q_head; i < l->q_tail; i++) q[i % cap] = l->q[i % l->q_cap];
        free(l->q);
        l->q = q;
        l->q_cap = cap;
    }
    *transfer = job.id = ++c->issued;
    l->q[l->q_tail % l->q_cap] = job;
    l->q_tail++;
    pthread_cond_signal(&l->cv_work);
    pthread_mutex_unlock(&c->mu);
    return SC_OK;
}

static sc_status cpu_copy_h2d(sc_backend *b, void *dev, const void *host, int64_t bytes, int64_t *transfer) {
    cpu_ctx *c = b->ctx;
    c->h2d += bytes;
    return copy_start(c, 0, dev, host, bytes, SC_DTYPE_UNDEFINED, transfer);
}

static sc_status cpu_copy_d2h(sc_backend *b, void *host, const void *dev, int64_t bytes, int64_t *transfer) {
    cpu_ctx *c = b->ctx;
    c->d2h += bytes;
    return copy_start(c, 1, host, dev, bytes, SC_DTYPE_UNDEFINED, transfer);
}

static sc_status cpu_copy_wire(sc_backend *b, bool to_device, void *dst, const void *src, int64_t n, sc_dtype wire,
                               int64_t *transfer) {
    cpu_ctx *c = b->ctx;
    if (wire != SC_BF16 && wire != SC_F16)
        return sc_errorf("cpu backend: a copy through %s (bf16 and f16 only)", sc_dtype_name(wire));
    int64_t bytes = n * 2;
    if (to_device) c->h2d += bytes;
    else c->d2h += bytes;
    return copy_start(c, to_device ? 0 : 1, dst, src, bytes, wire, transfer);
}

static sc_status cpu_wait(sc_backend *b, int64_t transfer) {
    cpu_ctx *c = b->ctx;
    pthread_mutex_lock(&c->mu);
    if (transfer > c->issued) {
        pthread_mutex_unlock(&c->mu);
        return sc_errorf("cpu backend: wait for transfer %lld, which was never started", (long long)transfer);
    }
    while (!finished_upto(c, transfer)) pthread_cond_wait(&c->cv_done, &c->mu);
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

/* The arena is host memory: scanned where it is, after the copies in flight land. */
static sc_status cpu_all_finite(sc_backend *b, const sc_tensor *t, int n, bool *finite) {
    SC_TRY(cpu_synchronize(b));
    *finite = true;
    for (int i = 0; i < n && *finite; i++) *finite = sc_data_all_finite(&t[i].desc, t[i].data);
    return SC_OK;
}

static void cpu_memory(sc_backend *b, sc_backend_memory *m) {
    cpu_ctx *c = b->ctx;
    /* host memory is the device's own: nothing is staged */
    *m = (sc_backend_memory){.capacity = c->capacity, .arena_bytes = c->arena_bytes, .copied_h2d = c->h2d, .copied_d2h = c->d2h};
}

static void cpu_params_changed_hook(sc_backend *b) {
    (void)b;
    cpu_params_changed();
}

sc_status backend_alloc(const char *name, size_t ctx_size, sc_backend **b, void **ctx) {
    *b = calloc(1, sizeof **b);
    *ctx = calloc(1, ctx_size);
    if (*b && *ctx) return SC_OK;
    free(*b);
    free(*ctx);
    *b = NULL, *ctx = NULL;
    return sc_errorf("%s backend: out of host memory", name);
}

sc_status backend_arena_admits(const char *backend, bool exists, int64_t arena_bytes, int64_t capacity, int64_t bytes) {
    if (exists) return sc_errorf("%s backend: an arena already exists (%lld bytes)", backend, (long long)arena_bytes);
    if (capacity > 0 && bytes > capacity)
        return sc_errorf("%s backend: the plan needs an arena of %lld bytes, over the device capacity of %lld", backend,
                         (long long)bytes, (long long)capacity);
    return SC_OK;
}

void backend_host_set_seed(sc_backend *b, uint64_t seed, uint64_t step) {
    (void)b;
    cpu_set_dropout_rng(seed, step);
}

void backend_host_set_threads(sc_backend *b, int n) {
    (void)b;
    cpu_set_num_threads(n);
}

int backend_host_threads(void) { return cpu_num_threads(); }

static const sc_node_evaluator *cpu_backend_evaluator(sc_backend *b) {
    (void)b;
    return cpu_evaluator();
}

/* Stops and joins the lanes' threads (those started) and frees the context. */
static void ctx_free(cpu_ctx *c) {
    pthread_mutex_lock(&c->mu);
    c->stop = true;
    for (int d = 0; d < 2; d++) pthread_cond_signal(&c->lane[d].cv_work);
    pthread_mutex_unlock(&c->mu);
    for (int d = 0; d < 2; d++) {
        if (c->lane[d].started) pthread_join(c->lane[d].thread, NULL);
        pthread_cond_destroy(&c->lane[d].cv_work);
        free(c->lane[d].q);
    }
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv_done);
    free(c->arena);
    free(c);
}

static void cpu_destroy(sc_backend *b) {
    cpu_synchronize(b);
    ctx_free(b->ctx);
    free(b);
}

static const sc_backend_i cpu_iface = {
    SC_BACKEND_ENTRIES(cpu),
    .name = "cpu",
    .compute_on_host = true,
    .all_finite = cpu_all_finite,
    .params_changed = cpu_params_changed_hook,
    .evaluator = cpu_backend_evaluator,
};

void backend_cpu_set_link_bandwidth(sc_backend *b, double bytes_per_second) {
    cpu_ctx *c = b->ctx;
    pthread_mutex_lock(&c->mu);
    c->link_bandwidth = bytes_per_second > 0 ? bytes_per_second : 0;
    pthread_mutex_unlock(&c->mu);
}

void backend_cpu_set_inline_copies(sc_backend *b, int64_t max_bytes) {
    cpu_ctx *c = b->ctx;
    pthread_mutex_lock(&c->mu);
    c->inline_max = max_bytes;
    pthread_mutex_unlock(&c->mu);
}

sc_status backend_cpu_create(int64_t capacity, sc_backend **out) {
    *out = NULL;
    sc_backend *b;
    void *ctx;
    SC_TRY(backend_alloc("cpu", sizeof(cpu_ctx), &b, &ctx));
    cpu_ctx *c = ctx;
    c->capacity = capacity;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv_done, NULL);
    sc_status st = SC_OK;
    for (int d = 0; d < 2; d++) {
        copy_lane *l = &c->lane[d];
        l->c = c;
        l->q_cap = 64;
        pthread_cond_init(&l->cv_work, NULL);
        l->q = malloc(sizeof *l->q * (size_t)l->q_cap);
        if (!l->q && !st) st = sc_errorf("cpu backend: out of memory");
        if (!st) l->started = pthread_create(&l->thread, NULL, copy_thread, l) == 0;
        if (!st && !l->started) st = sc_errorf("cpu backend: cannot start a copy thread");
    }
    if (st) {
        ctx_free(c);
        free(b);
        return st;
    }
    b->iface = &cpu_iface;
    b->ctx = c;
    *out = b;
    return SC_OK;
}
