/* Inference through the plan executor (backends/plan_exec.h): the graph's forward pass as the
 * store-everything plan of a forward-only "training graph" (autodiff_inference_graph), on any
 * backend. One executor serves `run`, the library's scorch_model_run and training, so inference
 * runs on the GPU as training does.
 *
 * The session copies parameters and constants into the device arena once, when it is created; the
 * graph's host data is then not read again, so a change to it needs a new session. */
#ifndef SC_INFER_H
#define SC_INFER_H

#include "backends/backend.h"

typedef struct sc_infer_session sc_infer_session;

/* g must be prepared (static shapes) and outlive the session. c->capacity 0 on the CPU: the plan's
 * own arena. c->adapt_threads: passes choose their thread count (thread_governor.h), starting from
 * the count OpenMP gives the calling thread now. */
sc_status infer_session_create(sc_graph *g, const sc_backend_config *c, sc_infer_session **out);
/* inputs[i] feeds g->inputs[i]; outputs[i] receives g->outputs[i], malloc'd for the caller (free
 * with sc_tensor_free_data). */
sc_status infer_session_run(sc_infer_session *s, const sc_tensor *inputs, sc_tensor *outputs);
/* With c->adapt_threads: passes run so far with the host's thread count ([0]) and with fewer
 * threads ([1]: one, or one fewer, thread_governor.h); false when the session does not adapt. */
bool infer_session_thread_runs(const sc_infer_session *s, int64_t runs[2]);
/* Device bytes of the session's arena (the plan's peak). */
int64_t infer_session_arena_bytes(const sc_infer_session *s);
void infer_session_free(sc_infer_session *s);

#endif
