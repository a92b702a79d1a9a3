/* Training steps through a plan (trainer.h, cfg.use_plan; issue 4). The plan is built under the
 * configured budget for the session's training graph, run by the plan executor
 * (backends/plan_exec.h) on the CPU backend whose device arena is capped at the budget (or at the
 * plan's own size without one), so a plan that needed more than it claims could not run.
 *
 * State ownership: the session copies parameters and optimizer state into its arena when it starts
 * and updates them there. After every successful step they are copied back to the graph's host data
 * (the trainer's snapshot, NaN check, checkpoints and saving all read host data), and writebacks are
 * applied on both sides. Whenever host data changes (a restore after a failed step, a loaded state),
 * train_plan_reload copies it to the device again.
 */
#include <string.h>

#include "train/trainer_internal.h"

void train_plan_close(sc_trainer *t) {
    plan_session_free(t->session);
    t->session = NULL;
    backend_destroy(t->backend);
    t->backend = NULL;
    plan_free(&t->plan);
}

/* A session for plan p (not yet t->plan): a backend capped at the budget, or at the plan's size. */
static sc_status session_open(sc_trainer *t, const sc_plan *p, int64_t budget, sc_backend **be, sc_plan_session **s) {
    *be = NULL;
    *s = NULL;
    SC_TRY(backend_cpu_create(budget > 0 ? budget : p->arena_bytes, be));
    sc_status st = plan_session_create(*be, &t->model->graph, p, s);
    if (st) {
        backend_destroy(*be);
        *be = NULL;
    }
    return st;
}

sc_status train_plan_open(sc_trainer *t) {
    SC_TRY(plan_build(&t->model->graph, &t->tg, &t->cfg.plan, &t->plan));
    sc_status st = session_open(t, &t->plan, t->cfg.plan.budget, &t->backend, &t->session);
    if (st) plan_free(&t->plan);
    return st;
}

sc_status train_plan_run(sc_trainer *t, int64_t *peak_bytes, double *seconds) {
    SC_TRY(plan_session_step(t->session, t->feeds, t->outs));
    for (int i = 0; i < t->tg.n_writebacks; i++)
        SC_TRY(plan_session_copy_value(t->session, t->tg.wb_src[i], t->tg.wb_dst[i]));
    SC_TRY(plan_exec_sync_params_to_host(t->session));
    sc_plan_stats ps;
    plan_session_stats(t->session, &ps);
    *peak_bytes = ps.peak_bytes;
    *seconds = ps.step_seconds; /* the plan alone: writebacks and the copy to the host excluded */
    return SC_OK;
}

sc_status train_plan_reload(sc_trainer *t) { return t->session ? plan_session_load_params(t->session) : SC_OK; }

const sc_plan *sc_trainer_plan(const sc_trainer *t) { return t->session ? &t->plan : NULL; }

sc_status sc_trainer_replan(sc_trainer *t, const sc_plan_options *o) {
    if (!t->session) return sc_errorf("the session runs without a plan (use_plan is off)");
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
