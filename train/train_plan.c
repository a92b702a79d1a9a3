/* Training steps through a plan (trainer.h, cfg.use_plan). The plan is built under the
 * configured budget for the session's training graph, run by the plan executor
 * (backends/plan_exec.h) on the CPU backend whose device arena is capped at the budget (or at the
 * plan's own size without one), so a plan that needed more than it claims could not run.
 *
 * State ownership: the session copies parameters and optimizer state into its arena when it starts
 * and updates them there. With rollback they are copied back to the graph's host data after every
 * successful step (the snapshot reads host data); without, only when something reads the host data
 * (train_host_sync: checkpoints, saving, a re-plan), and the per-step finite check runs on the
 * device copies (plan_session_state_finite). Writebacks are applied on both sides. Whenever host
 * data changes (a restore after a failed step, a loaded state), train_plan_reload copies it to the
 * device again.
 *
 * Devices: with cfg.device CUDA the backend is the CUDA one (backend_open, backends/device.c). The
 * plan is built once, by one plan_build given the device's free memory (backend_device_free_bytes)
 * and, with cfg.calibrate, the measured node times: a budget above the free memory is lowered to it,
 * and without a budget a plan that does not fit the free memory less the kernels' workspace is
 * re-planned for that room with strategy and streaming auto, so `train model.onnx` on a GPU too small
 * for the model still trains.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/comm.h"
#include "train/cost_bench.h"
#include "train/cost_profile.h"
#include "train/trainer_internal.h"

sc_device sc_trainer_device(const sc_trainer *t) { return t->cfg.device; }

/* The device's backend: capacity the budget (CPU without one: the plan's own size; CUDA without one:
 * 0, the GPU's free memory, which also leaves the kernels' scratch unbounded). */
static sc_status device_open(const sc_trainer *t, const sc_plan *p, int64_t budget, sc_backend **be) {
    bool cpu = t->cfg.device == SC_DEVICE_CPU;
    sc_backend_config c = {.device = t->cfg.device,
                           .capacity = budget > 0 ? budget : cpu ? p->arena_bytes : 0,
                           .inline_copies = SC_CPU_INLINE_COPY_DEFAULT,
                           .link_bandwidth = t->cfg.link_bandwidth,
                           .tf32 = t->cfg.tf32};
    SC_TRY(backend_open(&c, be));
    if (t->cfg.threads > 0) (*be)->iface->set_threads(*be, t->cfg.threads);
    return SC_OK;
}

/* Pins every feed buffer (train_feed_buffer: whole pages each) with the device backend, so the
 * batch goes over the link from where it was drawn; a buffer the backend cannot pin is staged, as
 * before. On the CPU (no host_pin) nothing changes. */
static void feeds_pin(sc_trainer *t) {
    sc_backend *be = t->backend;
    int n = t->model->graph.n_inputs;
    if (!be || !be->iface->host_pin || t->pinned) return;
    t->pinned = calloc((size_t)(2 * n) + 1, sizeof *t->pinned);
    if (!t->pinned) return;
    for (int k = 0; k < 2; k++) {
        const sc_tensor *f = k == 0 ? t->feeds : t->prefetch.feeds;
        for (int i = 0; f && i < n; i++)
            if (be->iface->host_pin(be, f[i].data, sc_desc_bytes(&f[i].desc))) t->pinned[t->n_pinned++] = f[i].data;
    }
}

static void feeds_unpin(sc_trainer *t) {
    for (int i = 0; i < t->n_pinned; i++) t->backend->iface->host_unpin(t->backend, t->pinned[i]);
    free(t->pinned);
    t->pinned = NULL;
    t->n_pinned = 0;
}

/* The backend's staging bytes so far (sc_backend_memory.staged); 0 without a backend. */
static int64_t backend_staged(sc_backend *be) {
    sc_backend_memory m = {0};
    if (be && be->iface->memory) be->iface->memory(be, &m);
    return m.staged;
}

void train_plan_close(sc_trainer *t) {
    plan_session_free(t->session);
    t->session = NULL;
    if (t->backend) feeds_unpin(t);
    backend_destroy(t->backend);
    t->backend = NULL;
    plan_free(&t->plan);
}

/* A session for plan p (not yet t->plan) on the device's backend (device_open). */
static sc_status session_open(sc_trainer *t, const sc_plan *p, int64_t budget, sc_backend **be, sc_plan_session **s) {
    *be = NULL;
    *s = NULL;
    SC_TRY(device_open(t, p, budget, be));
    /* Without a plan asked for, the CPU step is the store-everything plan with parameters and state
     * used where they live: one executor, and no second copy of the state. */
    bool in_place = !t->cfg.use_plan && t->cfg.device == SC_DEVICE_CPU;
    sc_status st = plan_session_create_in_place(*be, &t->model->graph, p, in_place, s);
    if (st) {
        backend_destroy(*be);
        *be = NULL;
    }
    return st;
}

/* The session's plan options: the configured ones, with the device's free memory (plan_build caps a
 * budget to it, or re-plans a plan that does not fit without one), the host's room for the plan's
 * copies and, with cfg.calibrate, the node times and link measured before planning. */
/* sc_plan_options.capacity: the device's free bytes, 0 when unlimited or unknown. */
static int64_t device_capacity(const sc_trainer *t) {
    int64_t fr = backend_device_free_bytes(t->cfg.device);
    return fr > 0 ? fr : 0;
}

/* The op-family rates the node times start from: this machine's cost profile on the CPU; on a GPU
 * its constant profile, every node whose shape can be timed alone then measured on the device. */
static sc_status family_profile(sc_trainer *t, sc_cost_profile *p, char *from, size_t size) {
    memset(p, 0, sizeof *p);
    if (t->cfg.device == SC_DEVICE_CPU) return sc_cost_profile_get(t->cfg.threads, p, from, size);
    if (sc_cost_profile_off()) snprintf(from, size, "off (SCORCH_COST_PROFILE=off: the built-in constants)");
    else sc_cost_profile_gpu(p), snprintf(from, size, "the GPU's op-family constants for what is not timed");
    return SC_OK;
}

/* Node times from this machine's cost profile and kernel shapes (plans without calibration): the
 * default cost model's constants are another machine's. */
static sc_status profile_times(sc_trainer *t, sc_plan_options *o) {
    snprintf(t->cost_source, sizeof t->cost_source, "the built-in constants");
    if (!t->cfg.use_plan) return SC_OK;
    free(t->profile_time);
    t->profile_time = NULL;
    /* data parallel: rank 0's profile for every rank (measured once, not by N ranks at a time) */
    sc_cost_profile p = {0};
    char from[1024] = "", shapes[1024] = "";
    const sc_graph *g = &t->model->graph;
    sc_status st = sc_comm_rank() == 0 ? family_profile(t, &p, from, sizeof from) : SC_OK;
    SC_TRY(train_dist_share_profile(st, &p, from, sizeof from));
    if (!(p.conv_flops > 0)) {
        snprintf(t->cost_source, sizeof t->cost_source, "the built-in constants (%s)", from);
        return SC_OK;
    }
    sc_shape_table shape = {0};
    st = sc_comm_rank() == 0
             ? sc_shape_table_get(t->cfg.device, t->cfg.threads, &p, g, &shape, shapes, sizeof shapes)
             : SC_OK;
    st = train_dist_share_shapes(st, &shape, shapes, sizeof shapes);
    t->profile_time = st ? NULL : malloc(sizeof(double) * ((size_t)g->n_nodes + 1));
    if (!st && !t->profile_time) st = sc_errorf("out of memory");
    if (!st) {
        cost_profile_node_times(&p, g, t->profile_time);
        st = sc_shape_table_apply(&shape, g, t->profile_time);
    }
    if (!st) {
        snprintf(t->cost_source, sizeof t->cost_source, "this machine's cost profile (%s%s%s)", from,
                 shapes[0] ? "; " : "", shapes);
        o->node_time = t->profile_time;
    }
    sc_shape_table_free(&shape);
    return st;
}

const char *sc_trainer_cost_source(const sc_trainer *t) { return t->cost_source; }

/* A GPU plan's link without --link-bandwidth: measured (sc_link_measure_device), or the PCIe
 * constant when profiles are off or ranks must plan alike (each would measure its own link). The
 * CPU's default (its memcpy lanes) is not a GPU's. */
static sc_status gpu_link(sc_trainer *t, sc_plan_options *o) {
    if (t->cfg.device == SC_DEVICE_CPU || o->link_bandwidth > 0) return SC_OK;
    double bw = SC_COST_LINK_GPU;
    const char *how = "the PCIe constant";
    if (!sc_cost_profile_off() && sc_comm_size() == 1) {
        SC_TRY(sc_link_measure_device(t->cfg.device, &bw));
        how = "measured with pinned copies";
    }
    o->link_bandwidth = bw;
    size_t k = strlen(t->cost_source);
    snprintf(t->cost_source + k, sizeof t->cost_source - k, "; link %.3g GB/s each way (%s)", bw * 1e-9, how);
    return SC_OK;
}

static sc_status plan_inputs(sc_trainer *t, sc_plan_options *o) {
    *o = t->cfg.plan;
    o->capacity = device_capacity(t);
    if (!o->host_budget) o->host_budget = t->host_room; /* copies must fit the host too */
    if (!t->cfg.calibrate) {
        if (!o->node_time) SC_TRY(profile_times(t, o));
        return gpu_link(t, o);
    }
    snprintf(t->cost_source, sizeof t->cost_source, "calibrated node times");
    SC_TRY(train_calibrate_once(t));
    o->node_time = t->cal.node_time;
    if (!(o->link_bandwidth > 0)) o->link_bandwidth = t->cal.link_bandwidth; /* a --link-bandwidth stays */
    return SC_OK;
}

/* Keeps what the plan was built under as the session's options (sc_trainer_plan_options). */
static void plan_adopt(sc_trainer *t, const sc_plan_options *o, sc_plan *p) {
    plan_free(&t->plan);
    t->plan = *p;
    t->cfg.plan = *o;
    t->cfg.plan.budget = p->budget;
    if (p->refit && t->cfg.plan.strategy == SC_STRATEGY_NONE) t->cfg.plan.strategy = SC_STRATEGY_AUTO;
    if (p->refit && t->cfg.plan.offload == SC_OFFLOAD_NONE) t->cfg.plan.offload = SC_OFFLOAD_AUTO;
}

/* Data parallel: every rank plans with rank 0's measured node times (calibration, or the caller's),
 * in an array of the session's own; the profile's are shared by profile_times. */
static sc_status times_share(sc_trainer *t, sc_plan_options *o) {
    if (sc_comm_size() == 1 || (o->node_time && o->node_time == t->profile_time && !t->cfg.calibrate)) return SC_OK;
    if (o->node_time && o->node_time != t->profile_time) {
        size_t bytes = sizeof(double) * (size_t)t->model->graph.n_nodes;
        double *own = malloc(bytes + 1);
        if (!own) return sc_errorf("out of memory");
        memcpy(own, o->node_time, bytes);
        free(t->profile_time);
        t->profile_time = own;
        o->node_time = own;
    }
    return train_dist_share_times(t, o);
}

sc_status train_plan_open(sc_trainer *t) {
    sc_plan_options o;
    sc_plan p;
    char link[160] = "";
    SC_TRY(train_dist_measure_link(link, sizeof link)); /* data parallel: before the node times use it */
    SC_TRY(plan_inputs(t, &o));
    if (link[0]) {
        size_t k = strlen(t->cost_source);
        snprintf(t->cost_source + k, sizeof t->cost_source - k, "; %s", link);
    }
    SC_TRY(times_share(t, &o));
    SC_TRY(plan_build(&t->model->graph, &t->tg, &o, &p));
    plan_adopt(t, &o, &p);
    sc_status st = SC_OK;
    if (t->cfg.train.shard_optimizer && t->cfg.train.ranks > 1 &&
        (t->plan.offload == SC_OFFLOAD_WEIGHTS || t->plan.offload == SC_OFFLOAD_BOTH))
        st = sc_errorf("--shard-optimizer with streamed weights (the plan streams them: offload %s) is not supported "
                       "yet: the owners' broadcast of the updated parameters would race the host updates; give a "
                       "budget that holds the weights, or train unsharded",
                       plan_offload_name(t->plan.offload));
    if (!st) st = train_dist_check_plan(t);
    if (!st) st = session_open(t, &t->plan, t->cfg.plan.budget, &t->backend, &t->session);
    if (st) plan_free(&t->plan);
    else feeds_pin(t);
    return st;
}

sc_status train_plan_run(sc_trainer *t, int64_t *peak_bytes, double *seconds, int64_t *h2d, int64_t *d2h,
                         int64_t *staged, int64_t *host_bytes) {
    int64_t staged0 = backend_staged(t->backend);
    SC_TRY(plan_session_step(t->session, t->feeds, t->outs));
    for (int i = 0; i < t->tg.n_writebacks; i++)
        SC_TRY(plan_session_copy_value(t->session, t->tg.wb_src[i], t->tg.wb_dst[i]));
    if (t->snapshot) SC_TRY(plan_exec_sync_params_to_host(t->session)); /* the snapshot reads it */
    else t->host_stale = true;
    sc_plan_stats ps;
    plan_session_stats(t->session, &ps);
    *peak_bytes = ps.peak_bytes;
    *h2d = ps.bytes_h2d, *d2h = ps.bytes_d2h;
    *staged = backend_staged(t->backend) - staged0;
    *host_bytes = ps.host_bytes;
    *seconds = ps.step_seconds; /* the plan alone: writebacks and the copy to the host excluded */
    return SC_OK;
}

sc_status train_plan_reload(sc_trainer *t) {
    if (!t->session) return SC_OK;
    t->host_stale = false; /* the host data is the truth again and the device takes it */
    return plan_session_load_params(t->session);
}

sc_status train_state_finite(sc_trainer *t, bool *finite, int *bad) {
    *finite = train_host_state_finite(t, bad);
    if (!*finite || !t->host_stale) return SC_OK;
    SC_TRY(plan_session_state_finite(t->session, finite));
    if (*finite) return SC_OK;
    SC_TRY(train_host_sync(t)); /* rare: to name the offender */
    *finite = train_host_state_finite(t, bad);
    if (*finite) return sc_errorf("internal: the device copy of the state holds a non-finite value that its host copy does not");
    return SC_OK;
}

sc_status train_host_sync(sc_trainer *t) {
    if (!t->host_stale || !t->session) return SC_OK;
    SC_TRY(plan_exec_sync_params_to_host(t->session));
    t->host_stale = false;
    return SC_OK;
}

const sc_plan *sc_trainer_plan(const sc_trainer *t) { return t->cfg.use_plan && t->session ? &t->plan : NULL; }

const sc_plan_options *sc_trainer_plan_options(const sc_trainer *t) { return &t->cfg.plan; }

sc_status sc_trainer_replan(sc_trainer *t, const sc_plan_options *o) {
    if (!t->cfg.use_plan || !t->session) return sc_errorf("the session runs without a plan (use_plan is off)");
    sc_plan_options capped = *o;
    capped.capacity = device_capacity(t);
    o = &capped;
    sc_plan p;
    SC_TRY(plan_build(&t->model->graph, &t->tg, o, &p));
    sc_status synced = train_host_sync(t); /* the new session starts from the host data */
    if (synced) {
        plan_free(&p);
        return synced;
    }
    plan_session_free(t->session);
    t->session = NULL;
    feeds_unpin(t);
    backend_destroy(t->backend);
    t->backend = NULL;
    plan_adopt(t, o, &p);
    sc_status st = session_open(t, &t->plan, t->cfg.plan.budget, &t->backend, &t->session);
    if (st) plan_free(&t->plan);
    else feeds_pin(t);
    return st;
}
