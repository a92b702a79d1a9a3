/* The plan executor (docs/DESIGN.md, backends/): runs an sc_plan (schedule/plan.h) verbatim on any
 * backend (backends/backend.h). Shared by every backend; today's training step is the `none` plan.
 *
 * A session lives across training steps: the device arena (plan->arena_bytes) is allocated once,
 * and persistent values (parameters, optimizer state, constants) are copied into the fixed region
 * when the session starts; from then on the device copy is the truth (optimizer updates run in
 * place there). plan_session_sync_params_to_host copies parameters and optimizer state back into the
 * graph's host data (before saving weights or comparing); plan_session_load_params copies the host
 * data in again (after loading a checkpoint or restoring a snapshot).
 *
 * Each step feeds the graph inputs into their fixed intervals, then walks the steps: RUN gives the
 * kernel tensors at arena base + interval offset (outputs of in-place ops share their input's
 * place), FREE ends the value's interval (a later read of it is an internal error: SC_ASSERT),
 * OFFLOAD / PREFETCH / WAIT go through the backend's asynchronous copies. Graph outputs are copied
 * out at the end, malloc'd and owned by the caller (free with sc_tensor_free_data), as the tests'
 * reference executor (tests/ref_executor.h) hands them out.
 *
 * Measurements per step: the arena high-water mark actually used (max offset + bytes over every
 * interval opened, the fixed region included), which tests compare with plan->arena_bytes, and the
 * wall time of every plan step.
 */
#ifndef SC_PLAN_EXEC_H
#define SC_PLAN_EXEC_H

#include "autodiff/autodiff.h"
#include "backends/backend.h"
#include "schedule/plan.h"

typedef struct sc_plan_session sc_plan_session;

typedef struct {
    int64_t peak_bytes;      /* high-water mark of the last step (fixed region included) */
    double step_seconds;     /* wall time of the last step */
    const double *step_time; /* [plan->n_steps] seconds of each plan step in the last step */
    int64_t bytes_h2d, bytes_d2h; /* moved by the last step (inputs and outputs included) */
    int64_t host_bytes;      /* host copies the session has made since it was created (pooled ones
                                reused): the plan's host_bytes with inline host updates */
    int64_t bytes_synced;    /* copied device -> host by plan_exec_sync_params_to_host since the
                                session was created (not part of any step's bytes_d2h) */
} sc_plan_stats;

/* g and plan must outlive the session; the backend too (the session does not own it). */
sc_status plan_session_create(sc_backend *be, sc_graph *g, const sc_plan *plan, sc_plan_session **out);
/* As plan_session_create; with params_in_place, on a backend that computes in host memory (the CPU),
 * the persistent values that have a place in the fixed region (parameters, optimizer state,
 * constants) are used at their host data instead of being copied into the arena: the updates land in
 * the graph's data directly, loading and syncing copy nothing, and the arena's fixed region is never
 * touched. The CPU training step without a budget runs so, with no second copy of its state. */
sc_status plan_session_create_in_place(sc_backend *be, sc_graph *g, const sc_plan *plan, bool params_in_place,
                                       sc_plan_session **out);
void plan_session_free(sc_plan_session *s);

/* inputs[i] feeds g->inputs[i] (desc must match); outputs[i] receives g->outputs[i]. */
sc_status plan_session_step(sc_plan_session *s, const sc_tensor *inputs, sc_tensor *outputs);

/* Whether value v's device copy is its truth, ahead of its host data between steps: a PARAM or
 * OPT_STATE value with host data and a place in the fixed region that is not that host data. */
bool plan_session_state_on_device(const sc_plan_session *s, int v);
/* Device -> host for every such value (the graph's value->data). */
sc_status plan_exec_sync_params_to_host(sc_plan_session *s);
/* Whether every such value holds finite numbers (between steps), checked in place by the backend's
 * all_finite, or through a host buffer on a backend without one: a GPU reads back one flag instead
 * of the whole state. */
sc_status plan_session_state_finite(sc_plan_session *s, bool *finite);
/* Host -> device for every persistent value with host data (after changing them on the host). */
sc_status plan_session_load_params(sc_plan_session *s);
/* Copies device value src (resident at the end of a step, e.g. a writeback source) over the device
 * copy of persistent value dst (its writeback target), as the trainer does after a step. */
sc_status plan_session_copy_value(sc_plan_session *s, int src, int dst);
/* Device address of a value resident now (between steps: persistent values and graph outputs),
 * NULL otherwise. */
void *plan_session_value(sc_plan_session *s, int value);

void plan_session_stats(const sc_plan_session *s, sc_plan_stats *st);

/* Tests: sessions created from now on run host updates on the worker thread even on a backend whose
 * compute is on the host (the CPU backend runs them inline), so that path is exercised without a GPU. */
void plan_exec_force_host_worker(bool on);

#endif
