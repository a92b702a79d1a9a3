/* Training steps through a plan (trainer.h, cfg.use_plan). The plan is built under the
 * configured budget for the session's training graph, run by the plan executor
 * (backends/plan_exec.h) on the CPU backend whose device arena is capped at the budget (or at the
 * plan's own size without one), so a plan that needed more than it claims could not run.
 *
 * State ownership: the session copies parameters and optimizer state into its arena when it starts
 * and updates them there. After every successful step they are copied back to the graph's host data
 * (the trainer's snapshot, NaN check, checkpoints and saving all read host data), and writebacks are
 * applied on both sides. Whenever host data changes (a restore after a failed step, a loaded state),
 * train_plan_reload copies it to the device again.
 *
 * Devices: with cfg.device CUDA the backend is the CUDA one (built only with
 * SCORCH_HAVE_CUDA, backends/cuda/cuda.cmake), its plan budget capped at the GPU's free memory
 * (cudaMemGetInfo) before planning, so the plan fits the device it runs on. Without a budget the
 * plan is the configured one (none by default) when it fits the free memory less a reserve for the
 * kernels' workspace (gpu_fit); when it does not, the step is re-planned for that room with
 * strategy and streaming auto, so `train model.onnx` on a GPU too small for the model still trains.
 */
#include <string.h>

#include "train/trainer_internal.h"

#ifdef SCORCH_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "backends/cuda/backend_cuda.h"
#endif

const char *sc_device_name(sc_device d) {
    return d == SC_DEVICE_CUDA ? "cuda" : d == SC_DEVICE_AUTO ? "auto" : "cpu";
}

sc_status sc_device_resolve(sc_device requested, sc_device *out) {
    *out = SC_DEVICE_CPU;
    if (requested == SC_DEVICE_CPU) return SC_OK;
#ifdef SCORCH_HAVE_CUDA
    char why[256] = "";
    if (backend_cuda_available(why, sizeof why)) {
        *out = SC_DEVICE_CUDA;
        return SC_OK;
    }
    if (requested == SC_DEVICE_CUDA) return sc_errorf("--device cuda: no usable CUDA device (%s)", why);
    sc_log(SC_LOG_INFO, "device auto: no CUDA device (%s); training on the CPU", why);
#else
    if (requested == SC_DEVICE_CUDA)
        return sc_errorf("--device cuda: this build has no CUDA support (nvcc was not found when it was configured)");
#endif
    return SC_OK;
}

sc_device sc_trainer_device(const sc_trainer *t) { return t->cfg.device; }

#ifdef SCORCH_HAVE_CUDA
/* The GPU's free bytes, or -1 when the runtime cannot say (the backend reports that error when it
 * is created). */
static int64_t gpu_free_bytes(void) {
    size_t fr = 0, total = 0;
    if (cudaSetDevice(0) != cudaSuccess || cudaMemGetInfo(&fr, &total) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return (int64_t)fr;
}
#endif

/* On the GPU a budget above its free memory could never be met: plan for the free memory instead. */
static void budget_cap(const sc_trainer *t, sc_plan_options *o) {
#ifdef SCORCH_HAVE_CUDA
    if (t->cfg.device != SC_DEVICE_CUDA || o->budget <= 0) return;
    int64_t fr = gpu_free_bytes();
    if (fr >= 0 && o->budget > fr) {
        sc_log(SC_LOG_WARN, "--memory %lld bytes is more than the GPU's %lld free bytes; planning for %lld",
               (long long)o->budget, (long long)fr, (long long)fr);
        o->budget = (int64_t)fr;
    }
#else
    (void)t, (void)o;
#endif
}

/* The device's backend: capacity the budget (CPU without one: the plan's own size; CUDA without one:
 * 0, the GPU's free memory, which also leaves the kernels' scratch unbounded). */
static sc_status backend_open(const sc_trainer *t, const sc_plan *p, int64_t budget, sc_backend **be) {
#ifdef SCORCH_HAVE_CUDA
    if (t->cfg.device == SC_DEVICE_CUDA) {
        SC_TRY(backend_cuda_create(budget > 0 ? budget : 0, be));
        backend_cuda_set_tf32(*be, t->cfg.tf32);
        return SC_OK;
    }
#endif
    if (t->cfg.device != SC_DEVICE_CPU)
        return sc_errorf("internal: device %s is not resolved or not built", sc_device_name(t->cfg.device));
    SC_TRY(backend_cpu_create(budget > 0 ? budget : p->arena_bytes, be));
    backend_cpu_set_inline_copies(*be, SC_CPU_INLINE_COPY_DEFAULT);
    backend_cpu_set_link_bandwidth(*be, t->cfg.link_bandwidth);
    return SC_OK;
}

void train_plan_close(sc_trainer *t) {
    plan_session_free(t->session);
    t->session = NULL;
    backend_destroy(t->backend);
    t->backend = NULL;
    plan_free(&t->plan);
}

/* A session for plan p (not yet t->plan) on the device's backend (backend_open). */
static sc_status session_open(sc_trainer *t, const sc_plan *p, int64_t budget, sc_backend **be, sc_plan_session **s) {
    *be = NULL;
    *s = NULL;
    SC_TRY(backend_open(t, p, budget, be));
    sc_status st = plan_session_create(*be, &t->model->graph, p, s);
    if (st) {
        backend_destroy(*be);
        *be = NULL;
    }
    return st;
}

/* The workspace the CUDA kernels may need outside the arena (cuDNN's is capped at 256 MiB), kept
 * free when the budget is the GPU's own memory; a quarter of it on a small device. */
#define GPU_WORKSPACE_RESERVE (256ll << 20)

/* On the GPU without --memory: when the plan does not fit the free memory less the reserve,
 * re-plan for that room with strategy and offload auto (the user's --strategy / --offload other
 * than none are kept). */
static sc_status gpu_fit(sc_trainer *t) {
#ifdef SCORCH_HAVE_CUDA
    if (t->cfg.device != SC_DEVICE_CUDA || t->cfg.plan.budget > 0) return SC_OK;
    int64_t fr = gpu_free_bytes();
    if (fr < 0) return SC_OK;
    int64_t reserve = fr / 4 < GPU_WORKSPACE_RESERVE ? fr / 4 : GPU_WORKSPACE_RESERVE;
    int64_t room = fr - reserve;
    if (t->plan.arena_bytes <= room) return SC_OK;
    sc_plan_options o = t->cfg.plan;
    o.budget = room;
    if (o.strategy == SC_STRATEGY_NONE) o.strategy = SC_STRATEGY_AUTO;
    if (o.offload == SC_OFFLOAD_NONE) o.offload = SC_OFFLOAD_AUTO;
    sc_log(SC_LOG_WARN, "the %s plan needs %lld bytes; the GPU has %lld free: planning for %lld bytes (%lld kept for "
           "workspace) with --strategy %s --offload %s", plan_strategy_name(t->plan.strategy),
           (long long)t->plan.arena_bytes, (long long)fr, (long long)room, (long long)reserve,
           plan_strategy_name(o.strategy), plan_offload_name(o.offload));
    sc_plan p;
    SC_TRY(plan_build(&t->model->graph, &t->tg, &o, &p));
    plan_free(&t->plan);
    t->plan = p;
    t->cfg.plan = o;
#else
    (void)t;
#endif
    return SC_OK;
}

sc_status train_plan_open(sc_trainer *t) {
    budget_cap(t, &t->cfg.plan);
    if (!t->cfg.plan.host_budget) t->cfg.plan.host_budget = t->host_room; /* copies must fit the host too */
    SC_TRY(plan_build(&t->model->graph, &t->tg, &t->cfg.plan, &t->plan));
    sc_status fit = gpu_fit(t);
    if (fit) {
        plan_free(&t->plan);
        return fit;
    }
    sc_status st = session_open(t, &t->plan, t->cfg.plan.budget, &t->backend, &t->session);
    if (st) plan_free(&t->plan);
    return st;
}

sc_status train_plan_run(sc_trainer *t, int64_t *peak_bytes, double *seconds, int64_t *h2d, int64_t *d2h,
                         int64_t *host_bytes) {
    SC_TRY(plan_session_step(t->session, t->feeds, t->outs));
    for (int i = 0; i < t->tg.n_writebacks; i++)
        SC_TRY(plan_session_copy_value(t->session, t->tg.wb_src[i], t->tg.wb_dst[i]));
    SC_TRY(plan_exec_sync_params_to_host(t->session));
    sc_plan_stats ps;
    plan_session_stats(t->session, &ps);
    *peak_bytes = ps.peak_bytes;
    *h2d = ps.bytes_h2d, *d2h = ps.bytes_d2h;
    *host_bytes = ps.host_bytes;
    *seconds = ps.step_seconds; /* the plan alone: writebacks and the copy to the host excluded */
    return SC_OK;
}

sc_status train_plan_reload(sc_trainer *t) { return t->session ? plan_session_load_params(t->session) : SC_OK; }

const sc_plan *sc_trainer_plan(const sc_trainer *t) { return t->session ? &t->plan : NULL; }

const sc_plan_options *sc_trainer_plan_options(const sc_trainer *t) { return &t->cfg.plan; }

sc_status sc_trainer_replan(sc_trainer *t, const sc_plan_options *o) {
    if (!t->session) return sc_errorf("the session runs without a plan (use_plan is off)");
    sc_plan_options capped = *o;
    budget_cap(t, &capped);
    o = &capped;
    sc_plan p;
    SC_TRY(plan_build(&t->model->graph, &t->tg, o, &p));
    /* the host data is current after every step; the new session starts from it */
    plan_session_free(t->session);
    t->session = NULL;
    backend_destroy(t->backend);
    t->backend = NULL;
    plan_free(&t->plan);
    t->plan = p;
    t->cfg.plan = *o;
    sc_status st = session_open(t, &t->plan, o->budget, &t->backend, &t->session);
    if (st) plan_free(&t->plan);
    return st;
}
