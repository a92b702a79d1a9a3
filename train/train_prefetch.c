/* The next batch drawn on a worker thread while the step runs (train_prefetch.h). */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "train/train_prefetch.h"

/* A quarter of the step's own thread count (the caller's OpenMP count: the cores, or cores / ranks
 * on a host shared by data-parallel ranks), so the worker never takes more than its share. */
static int worker_threads(void) {
#ifdef _OPENMP
    int n = omp_get_max_threads() / 4;
    return n < 1 ? 1 : n > 8 ? 8 : n;
#else
    return 1;
#endif
}

void *train_feed_buffer(int64_t bytes) {
    size_t page = 4096, n = ((size_t)(bytes > 0 ? bytes : 1) + page - 1) / page * page;
    return aligned_alloc(page, n);
}

sc_status train_prefetch_open(train_prefetch *p, bool on, train_data *d, const sc_graph *g, const sc_tensor *feeds,
                              int n) {
    memset(p, 0, sizeof *p);
    if (!on) return SC_OK;
    p->feeds = calloc((size_t)n + 1, sizeof *p->feeds);
    if (!p->feeds) return sc_errorf("out of memory for the prefetched batch");
    p->n = n;
    for (int i = 0; i < n; i++) {
        int64_t bytes = sc_desc_bytes(&feeds[i].desc);
        p->feeds[i].desc = feeds[i].desc;
        p->feeds[i].data = train_feed_buffer(bytes);
        if (!p->feeds[i].data) {
            train_prefetch_close(p);
            return sc_errorf("out of memory for the prefetched batch (input %d, %lld bytes)", i, (long long)bytes);
        }
    }
    p->on = true;
    p->data = d;
    p->g = g;
    p->threads = worker_threads();
    return SC_OK;
}

static void *worker_main(void *arg) {
    train_prefetch *p = arg;
#ifdef _OPENMP
    omp_set_num_threads(p->threads); /* this thread's own team; the step's count is the main thread's */
#endif
    p->st = train_data_fill(p->data, p->g, p->sample, p->feeds);
    return NULL;
}

void train_prefetch_wait(train_prefetch *p) {
    if (!p->running) return;
    pthread_join(p->worker, NULL);
    p->running = false;
    p->ready = p->st == SC_OK;
    sc_status_free(p->st);
    p->st = SC_OK;
}

void train_prefetch_drop(train_prefetch *p) {
    train_prefetch_wait(p);
    p->ready = false;
}

void train_prefetch_start(train_prefetch *p, uint64_t sample) {
    if (!p->on) return;
    train_prefetch_wait(p);
    p->ready = false;
    p->sample = sample;
    p->st = SC_OK;
    /* without a worker the step draws its own batch, as with prefetch off */
    p->running = pthread_create(&p->worker, NULL, worker_main, p) == 0;
}

bool train_prefetch_take(train_prefetch *p, uint64_t sample, sc_tensor *feeds) {
    if (!p->on) return false;
    train_prefetch_wait(p);
    if (!p->ready || p->sample != sample) return false;
    for (int i = 0; i < p->n; i++) {
        void *x = feeds[i].data;
        feeds[i].data = p->feeds[i].data;
        p->feeds[i].data = x;
    }
    p->ready = false;
    p->hits++;
    return true;
}

void train_prefetch_close(train_prefetch *p) {
    train_prefetch_wait(p);
    for (int i = 0; p->feeds && i < p->n; i++) free(p->feeds[i].data);
    free(p->feeds);
    memset(p, 0, sizeof *p);
}
