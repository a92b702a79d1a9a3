/* Private to train/: the next batch drawn while the current step runs, as a data loader's worker
 * does beside PyTorch's training loop. A step on a GPU leaves the host's cores waiting for the
 * device; drawing the next batch meanwhile (a ResNet-50 batch of 64 at 224x224 is 9.6M values,
 * about 60 ms of one core) takes it off the step's critical path. The data is a pure function of
 * (seed, sample) (train_data.h), so a batch drawn ahead is the batch the step would draw itself:
 * the weights are bit-identical with and without. A prefetched batch whose sample is not the one
 * the step needs (a failed step that did not advance, a resume, a re-plan) is dropped and the
 * step draws its own.
 *
 * Off on the CPU backend by default (the step's own threads use every core) and on for a device;
 * cfg.prefetch (--prefetch on|off) overrides. The worker draws with a team of
 * a quarter of the step's threads (at least 1, at most 8), leaving the rest to the step's host work
 * (host-side optimizer updates, streaming copies). */
#ifndef SC_TRAIN_PREFETCH_H
#define SC_TRAIN_PREFETCH_H

#include <pthread.h>

#include "train/train_data.h"

typedef struct {
    bool on;
    int threads;       /* the worker's team */
    int n;             /* feed tensors (the graph's inputs) */
    sc_tensor *feeds;  /* the batch being drawn or drawn; descs as the session's feeds */
    train_data *data;
    const sc_graph *g;
    pthread_t worker;
    bool running;      /* worker started and not joined */
    bool ready;        /* feeds hold sample `sample` */
    uint64_t sample;
    sc_status st;      /* the worker's outcome */
    int64_t hits;      /* batches handed over (steps that did not draw their own) */
} train_prefetch;

/* A feed buffer of whole pages at a page boundary (free() frees it): a device backend pins each
 * feed alone (host_pin registers whole pages, and two pins may not share one), so the batch goes
 * over the link directly instead of through a staging copy on the step's thread. */
void *train_feed_buffer(int64_t bytes);

/* Sets p up for the session's feeds (their descs and sizes); on false p stays off and costs
 * nothing. */
sc_status train_prefetch_open(train_prefetch *p, bool on, train_data *d, const sc_graph *g, const sc_tensor *feeds,
                              int n);
/* Starts drawing the batch at `sample` into p's buffers (no-op when off). */
void train_prefetch_start(train_prefetch *p, uint64_t sample);
/* Waits for the worker; when it drew `sample` without error, swaps its buffers with feeds' and
 * returns true (feeds then hold the batch; scalars are the caller's to fill). A batch of another
 * sample stays until the next start or drop. */
bool train_prefetch_take(train_prefetch *p, uint64_t sample, sc_tensor *feeds);
/* Waits for the worker (before anything else uses the train_data). */
void train_prefetch_wait(train_prefetch *p);
/* Waits and forgets the batch (the data was reopened: another seed draws other values). */
void train_prefetch_drop(train_prefetch *p);
void train_prefetch_close(train_prefetch *p);

#endif
