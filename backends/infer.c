/* Inference sessions (infer.h): plan_build with strategy none over the forward-only training graph,
 * then the plan executor. */
#include "backends/infer.h"

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>

#include "backends/plan_exec.h"
#include "backends/thread_governor.h"
#include "core/clock.h"

struct sc_infer_session {
    sc_plan plan;
    sc_backend *be;
    sc_plan_session *session;
    bool adapt;               /* c->adapt_threads on a backend that computes on the host */
    sc_thread_governor gov;
};

sc_status infer_session_create(sc_graph *g, const sc_backend_config *c, sc_infer_session **out) {
    *out = NULL;
    sc_infer_session *s = calloc(1, sizeof *s);
    if (!s) return sc_errorf("out of memory");
    sc_training_graph tg;
    autodiff_inference_graph(g, &tg);
    sc_plan_options o = {.strategy = SC_STRATEGY_NONE, .offload = SC_OFFLOAD_NONE};
    sc_status st = plan_build(g, &tg, &o, &s->plan);
    if (st) {
        free(s);
        return st;
    }
    sc_backend_config bc = *c;
    if (bc.device == SC_DEVICE_CPU && bc.capacity <= 0) bc.capacity = s->plan.arena_bytes;
    /* A store-everything forward plan has nothing for a copy to overlap: its inputs are needed
     * before the first node, its outputs after the last. A handoff to the copy thread would only
     * add a wake-up each way to every pass (a fifth of mobilenet-size passes). */
    if (bc.device == SC_DEVICE_CPU && bc.inline_copies <= 0) bc.inline_copies = INT64_MAX;
    st = backend_open(&bc, &s->be);
    if (!st) st = plan_session_create(s->be, g, &s->plan, &s->session);
    if (st) {
        infer_session_free(s);
        return st;
    }
    s->adapt = c->adapt_threads && s->be->iface->compute_on_host && s->be->iface->set_threads;
    if (s->adapt) thread_governor_init(&s->gov, omp_get_max_threads());
    *out = s;
    return SC_OK;
}

sc_status infer_session_run(sc_infer_session *s, const sc_tensor *inputs, sc_tensor *outputs) {
    if (!s->adapt) return plan_session_step(s->session, inputs, outputs);
    s->be->iface->set_threads(s->be, thread_governor_next(&s->gov));
    double t0 = sc_clock_seconds();
    sc_status st = plan_session_step(s->session, inputs, outputs);
    thread_governor_record(&s->gov, sc_clock_seconds() - t0);
    s->be->iface->set_threads(s->be, s->gov.arms[0]); /* the caller's count outside the session */
    return st;
}

bool infer_session_thread_runs(const sc_infer_session *s, int64_t runs[2]) {
    runs[0] = runs[1] = 0;
    if (s->adapt) thread_governor_runs(&s->gov, runs);
    return s->adapt && s->gov.enabled;
}

int64_t infer_session_arena_bytes(const sc_infer_session *s) { return s->plan.arena_bytes; }

void infer_session_free(sc_infer_session *s) {
    if (!s) return;
    plan_session_free(s->session);
    backend_destroy(s->be);
    plan_free(&s->plan);
    free(s);
}
