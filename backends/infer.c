/* Inference sessions (infer.h): plan_build with strategy none over the forward-only training graph,
 * then the plan executor. */
#include "backends/infer.h"

#include <stdlib.h>

#include "backends/plan_exec.h"

struct sc_infer_session {
    sc_plan plan;
    sc_backend *be;
    sc_plan_session *session;
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
    st = backend_open(&bc, &s->be);
    if (!st) st = plan_session_create(s->be, g, &s->plan, &s->session);
    if (st) {
        infer_session_free(s);
        return st;
    }
    *out = s;
    return SC_OK;
}

sc_status infer_session_run(sc_infer_session *s, const sc_tensor *inputs, sc_tensor *outputs) {
    return plan_session_step(s->session, inputs, outputs);
}

int64_t infer_session_arena_bytes(const sc_infer_session *s) { return s->plan.arena_bytes; }

void infer_session_free(sc_infer_session *s) {
    if (!s) return;
    plan_session_free(s->session);
    backend_destroy(s->be);
    plan_free(&s->plan);
    free(s);
}
