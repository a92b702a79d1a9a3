/* Private to train/: the session struct shared by trainer.c, train_state.c and train_nan.c. */
#ifndef SC_TRAINER_INTERNAL_H
#define SC_TRAINER_INTERNAL_H

#include "backends/plan_exec.h"
#include "backends/thread_governor.h"
#include "schedule/cost.h"
#include "train/calibrate.h"
#include "train/cost_profile.h"
#include "train/train_data.h"
#include "train/train_prefetch.h"
#include "train/trainer.h"

struct sc_trainer {
    sc_trainer_config cfg; /* strings point into `strings` */
    char *strings[16];
    sc_model *model;
    sc_training_graph tg;
    train_data data;
    train_prefetch prefetch; /* the next batch, drawn while a step runs */
    int64_t step;    /* steps done */
    int64_t total;   /* steps of the run */
    uint64_t sample; /* global sample number of the next global batch (every rank's shard of it: the
                        rank's batch starts at train_shard_sample) */
    sc_tensor *feeds; /* one per graph input, owned */
    sc_tensor *outs;  /* one per graph output, from the last step (owned; NULL data before) */
    int loss_out;     /* index of the loss in outs */
    int *wb_out;      /* per writeback: index of wb_src in outs */
    /* State: every value a step may change or a checkpoint holds (PARAM, OPT_STATE and writeback
     * targets), with a copy taken before each step (the last good values) when rollback is on
     * (snapshot NULL when off). */
    int n_state;
    int *state_ids;
    void **snapshot;
    /* Set when a step or a state load failed without a snapshot to undo it: the host state is not
     * one any step produced, so steps and saves refuse (the message names what happened). */
    char *spent;
    /* Host bytes left for a plan's copies of moved values (sc_plan_options.host_budget) after the
     * optimizer state, the rollback copy and, on the CPU, the device arena; 0 when unknown. */
    int64_t host_room;
    /* With cfg.use_plan (train_plan.c): the plan, its modelled device and the executing session.
     * The session's device copy of parameters and optimizer state is the truth. With rollback it is
     * copied back to the graph's host data after every step, for the snapshot. Without, the host
     * data lags (host_stale) until something reads it: checkpoints, saving and a re-plan call
     * train_host_sync first, and the per-step finite check runs on the device copies. A GPU so
     * skips copying every resident parameter and state tensor over the link each step. */
    sc_plan plan;
    sc_backend *backend;
    sc_plan_session *session;
    bool host_stale;
    /* The feed buffers (the session's and the prefetch worker's) the device backend pinned, unpinned
     * before it goes (train_plan.c). */
    void **pinned;
    int n_pinned;
    /* The host's own backend (CPU): folding while binding, the store-everything executor's
     * kernels, the NaN locator's replay. train/ sets threads, seeds and parameter changes through
     * its vtable and the device backend's, never by calling a backend directly. */
    sc_backend *host;
    sc_calibration cal; /* with cfg.calibrate: measured before planning (n_nodes 0 until then) */
    /* Without calibration, on the CPU: node times from this machine's cost profile
     * (train/cost_profile.h), and where it came from, for reports. */
    double *profile_time;
    char cost_source[2400];
    /* fp16 dynamic loss scaling (loss_scale.c): the scale of the next step, good steps since it last
     * changed, and skipped steps over the run and in a row. The optimizer's step count (AdamW's bias
     * correction) is t->step - skipped, as a skipped optimizer.step() does not count in PyTorch. */
    double loss_scale;
    int64_t growth_tracker, skipped, skip_run;
    double step_loss; /* the last step's loss (data parallel: the mean over the ranks) */
    /* Without a configured thread count, on the CPU and alone: each step runs with all cores or one
     * thread, whichever the governor measures faster now (a core kept busy by another process makes
     * every barrier wait). Every kernel's bits are the same for any thread count, so the weights do
     * not depend on the choice. */
    bool adapt_threads;
    sc_thread_governor gov;
};

/* Measures t->cal once (cfg.calibrate), before the plan is built (calibrate.c). */
sc_status train_calibrate_once(sc_trainer *t);

/* params_changed and set_seed on the host backend and the device backend (when there is one). */
void train_backends_step_begin(sc_trainer *t, uint64_t step);
void train_backends_params_changed(sc_trainer *t);

/* loss_scale.c: the scalar inputs of a step (lr, the optimizer's step, the loss scale and its inverse)
 * into feeds; and what a step whose state went non-finite means under loss scaling: SC_OK with
 * *skipped when the update overflowed and was undone (the scale halves), or the error naming the
 * step and the tensor when the scaler cannot recover. */
void train_scalars_fill(const sc_trainer *t, sc_tensor *feeds, float lr, int64_t step);
sc_status train_overflow_skip(sc_trainer *t, int64_t step, double loss, int bad, bool *skipped);
void train_loss_scale_good_step(sc_trainer *t);

/* Global sample number of this rank's next batch: rank r takes [sample + r B, sample + r B + B) of
 * the global batch of N B samples that one process with batch N B would take (trainer.c). */
uint64_t train_shard_sample(const sc_trainer *t);
/* The same for the global batch starting at `global` (the next step's: t->sample + N B). */
uint64_t train_shard_sample_at(const sc_trainer *t, uint64_t global);

/* train_dist.c (data parallel, backends/comm.h; all no-ops with one rank): rank 0's node times and
 * link for every rank's planner; the check that every rank's plan runs the all-reduces in the same
 * order; and the end of a step on every rank: the ranks' outcomes combined (a failure anywhere fails
 * every rank, naming it) and *loss the mean of the ranks' losses. */
sc_status train_dist_share_times(sc_trainer *t, sc_plan_options *o);
/* The ranks' interconnect for the cost model (cost_set_comm_link): an 8-byte and a 16 MiB all-reduce
 * timed on every rank, the slowest rank's figures kept; desc says what was measured. */
sc_status train_dist_measure_link(char *desc, size_t desc_size);
/* Rank 0's cost profile (and where it came from) to every rank; st is rank 0's outcome of getting it. */
sc_status train_dist_share_profile(sc_status st, sc_cost_profile *p, char *from, size_t from_size);
/* Rank 0's kernel-shape table (and its description) to every rank: the shapes are the same on every
 * rank (a sharded optimizer changes only the updates), the measuring is done once. */
sc_status train_dist_share_shapes(sc_status st, sc_shape_table *t, char *where, size_t where_size);
sc_status train_dist_check_plan(const sc_trainer *t);
sc_status train_dist_step_end(sc_trainer *t, sc_status st, int64_t step, double *loss);

/* Sharded optimizer (--dump-grads): the other ranks' own averaged gradients (tg.grads, graph outputs
 * found by output_of) to rank 0 as records, *all (malloc'd, NULL elsewhere) of *total bytes; and the
 * next record of such a buffer, name and tensor (its data points into the buffer). */
sc_status train_dist_gather_grads(sc_trainer *t, int (*output_of)(const sc_graph *, int), char **all, int64_t *total);
sc_status train_dist_record_next(const char **p, const char *end, char *name, size_t name_size, sc_tensor *x);

/* train_state.c */
sc_status train_state_write(sc_trainer *t, const char *dir);
sc_status train_state_read(sc_trainer *t, const char *dir);

/* train_nan.c: every state value whose truth is its host data finite? (the first offender's id in
 * *bad, -1 when all are). With the host data behind the device (host_stale), the values the device
 * holds are left to train_state_finite (train_plan.c). */
bool train_host_state_finite(const sc_trainer *t, int *bad);
/* Restores the snapshot, re-runs the step's feeds node by node and returns the status naming the
 * step and the first tensor where a NaN (or an Inf from finite inputs) appeared; restores again. */
sc_status train_nan_locate(sc_trainer *t, int64_t step, const char *trigger);
void train_snapshot_restore(sc_trainer *t); /* both no-ops without a snapshot */
void train_snapshot_take(sc_trainer *t);
/* Marks the session spent (t->spent) with the reason why; returns st. */
sc_status train_spent(sc_trainer *t, sc_status st);

/* train_plan.c: builds cfg.plan's plan and its session (after the state is loaded); runs one step of
 * it into t->outs and applies the writebacks on the device; pushes host state to the device again
 * (after a restore or a loaded state). */
sc_status train_plan_open(sc_trainer *t);
void train_plan_close(sc_trainer *t);
sc_status train_plan_run(sc_trainer *t, int64_t *peak_bytes, double *seconds, int64_t *h2d, int64_t *d2h, int64_t *staged,
                         int64_t *host_bytes);
sc_status train_plan_reload(sc_trainer *t);
/* Brings the graph's host data up to the device copy when it lags (host_stale); a no-op otherwise. */
sc_status train_host_sync(sc_trainer *t);
/* Every state value finite? (*finite; the first offender's id in *bad, -1 when all are). With the
 * host data behind the device, the device copies are checked where they are, and only when one is
 * not finite is the state synced to the host to name it. Fails only when the device does. */
sc_status train_state_finite(sc_trainer *t, bool *finite, int *bad);

#endif
