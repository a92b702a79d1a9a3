/* The training session (trainer.h): setup, the learning-rate schedule, one step, saving the model
 * and the gradients. Checkpoints are in train_state.c, the non-finite diagnosis in train_nan.c. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/big_alloc.h"
#include "core/clock.h"
#include "backends/comm.h"
#include "core/free_all.h"
#include "core/npy.h"
#include "graph/passes.h"
#include "train/trainer_internal.h"


void sc_trainer_config_default(sc_trainer_config *c) {
    memset(c, 0, sizeof *c);
    c->batch = 1;
    c->lr = 0.01f;
    c->schedule = SC_LR_CONSTANT;
    c->token_dtype = SC_U16;
    c->loss_scale_init = 65536.0;
    c->loss_scale_interval = 2000;
    sc_train_options_default(&c->train);
}

float sc_trainer_lr_at(const sc_trainer_config *cfg, int64_t total_steps, int64_t step) {
    double t = (double)(step - 1), w = (double)cfg->warmup;
    if (cfg->warmup > 0 && t < w) return (float)(cfg->lr * t / w);
    if (cfg->schedule == SC_LR_CONSTANT) return cfg->lr;
    double span = (double)(total_steps - cfg->warmup);
    if (span < 1) span = 1;
    return (float)(cfg->lr * 0.5 * (1.0 + cos(M_PI * (t - w) / span)));
}

/* ---- setup ---- */

/* The scalar loss as a double, whatever float dtype the model trains in. */
static double train_loss_value(const sc_tensor *t) {
    return t->desc.dtype == SC_F64 ? *(const double *)t->data : (double)*(const float *)t->data;
}

static sc_status strings_copy(sc_trainer *t) {
    const char **fields[] = {&t->cfg.model_path,   &t->cfg.data_path,    &t->cfg.labels_path,  &t->cfg.tokens_path,
                             &t->cfg.resume_dir,   &t->cfg.train.freeze_regex, &t->cfg.more_data[0], &t->cfg.more_data[1],
                             &t->cfg.more_data[2], &t->cfg.more_data[3], &t->cfg.more_data[4], &t->cfg.more_data[5],
                             &t->cfg.more_data[6]};
    if (t->cfg.n_more_data < 0 || t->cfg.n_more_data > 7) return sc_errorf("at most 8 --data files");
    for (int i = t->cfg.n_more_data; i < 7; i++) t->cfg.more_data[i] = NULL;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (!*fields[i]) continue;
        t->strings[i] = strdup(*fields[i]);
        if (!t->strings[i]) return sc_errorf("out of memory");
        *fields[i] = t->strings[i];
    }
    return SC_OK;
}

static int output_index(const sc_graph *g, int value) {
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == value) return i;
    return -1;
}

static sc_status feeds_alloc(sc_trainer *t) {
    sc_graph *g = &t->model->graph;
    t->feeds = calloc((size_t)g->n_inputs + 1, sizeof *t->feeds);
    t->outs = calloc((size_t)g->n_outputs + 1, sizeof *t->outs);
    t->wb_out = calloc((size_t)t->tg.n_writebacks + 1, sizeof *t->wb_out);
    if (!t->feeds || !t->outs || !t->wb_out) return sc_errorf("out of memory");
    for (int i = 0; i < g->n_inputs; i++) {
        const sc_value *v = &g->values[g->inputs[i]];
        int64_t bytes = sc_desc_bytes(&v->desc);
        if (bytes < 0) return sc_errorf("input '%s' has no static shape after binding", v->name);
        t->feeds[i].desc = v->desc;
        t->feeds[i].data = train_feed_buffer(bytes);
        if (!t->feeds[i].data) return sc_errorf("out of memory for input '%s'", v->name);
    }
    t->loss_out = output_index(g, t->tg.loss);
    if (t->loss_out < 0) return sc_errorf("internal: the loss is not a graph output");
    /* value -> output index once: a 250,000-block ResNet has 1M writebacks and 1M outputs */
    int *out_of = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    if (!out_of) return sc_errorf("out of memory");
    for (int v = 0; v < g->n_values; v++) out_of[v] = -1;
    for (int i = g->n_outputs - 1; i >= 0; i--) out_of[g->outputs[i]] = i; /* the first, as output_index */
    for (int i = 0; i < t->tg.n_writebacks; i++) {
        t->wb_out[i] = out_of[t->tg.wb_src[i]];
        if (t->wb_out[i] < 0) {
            free(out_of);
            return sc_errorf("internal: writeback source '%s' is not a graph output", g->values[t->tg.wb_src[i]].name);
        }
    }
    free(out_of);
    return SC_OK;
}

/* Bytes the machine can still give this process: MemAvailable of /proc/meminfo, or the test hook
 * SCORCH_TEST_MEMAVAILABLE (a byte count); -1 when neither says. */
static int64_t host_available(void) {
    const char *hook = getenv("SCORCH_TEST_MEMAVAILABLE");
    if (hook && *hook) return strtoll(hook, NULL, 10);
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    long long kb = -1;
    while (kb < 0 && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) != 1) kb = -1;
    fclose(f);
    return kb < 0 ? -1 : (int64_t)kb * 1024;
}

const char *sc_rollback_name(sc_rollback r) { return r == SC_ROLLBACK_ON ? "on" : r == SC_ROLLBACK_OFF ? "off" : "auto"; }

/* Resolves cfg.rollback and fails before training when the host memory the run is about to touch
 * does not fit what the machine has available, instead of being killed by the kernel some steps
 * in: the optimizer state, whose zeroed pages are not touched until the first update, and the
 * rollback copy of every parameter and state value (train_nan.c). AUTO keeps the copy when both
 * take at most half of what is available, so the rest is left to activations, transfers and the
 * system (a model whose state fills the machine trains without it), and not on a GPU (trainer.h). */
static sc_status host_memory_check(sc_trainer *t) {
    const sc_graph *g = &t->model->graph;
    int64_t snapshot = 0, state = 0;
    for (int v = 0; v < g->n_values; v++) {
        const sc_value *x = &g->values[v];
        int64_t b = sc_desc_bytes(&x->desc);
        if (!x->data || b <= 0) continue;
        if (x->kind == SC_VALUE_PARAM || x->kind == SC_VALUE_OPT_STATE) snapshot += b;
        if (x->kind == SC_VALUE_OPT_STATE) state += b;
    }
    int64_t avail = host_available();
    /* On a GPU the copy is taken from the host data, so every step would copy all the state the GPU
     * holds across the link (GPT-2 small with momentum: 1 GB a step); PyTorch keeps no copy either.
     * fp16 keeps it: a step whose gradients overflowed is skipped by restoring it (loss_scale.c). */
    bool device_state = t->cfg.device != SC_DEVICE_CPU && !t->cfg.train.loss_scaling;
    if (t->cfg.rollback == SC_ROLLBACK_AUTO)
        t->cfg.rollback = !device_state && (avail < 0 || state + snapshot <= avail / 2) ? SC_ROLLBACK_ON : SC_ROLLBACK_OFF;
    bool copy = t->cfg.rollback == SC_ROLLBACK_ON;
    int64_t need = state + (copy ? snapshot : 0);
    if (avail >= 0 && need <= avail) {
        /* what a plan's host copies may take (train_plan.c): on the CPU the device arena is host memory too */
        int64_t arena = t->cfg.device == SC_DEVICE_CPU && t->cfg.use_plan ? t->cfg.plan.budget : 0;
        t->host_room = avail - need - arena > 0 ? avail - need - arena : 1;
    }
    if (avail < 0 || need <= avail) return SC_OK;
    if (copy && state <= avail)
        return sc_errorf("host memory: training needs about %lld bytes more (%.1f MiB: optimizer state %lld bytes and "
                         "the rollback copy of parameters and state %lld bytes) but %lld bytes (%.1f MiB) are "
                         "available (MemAvailable); --rollback off trains without the copy",
                         (long long)need, (double)need / 1048576.0, (long long)state, (long long)snapshot,
                         (long long)avail, (double)avail / 1048576.0);
    return sc_errorf("host memory: training needs about %lld bytes more (%.1f MiB: optimizer state %lld bytes%s) but "
                     "%lld bytes (%.1f MiB) are available (MemAvailable); use a smaller model or batch, or free memory",
                     (long long)need, (double)need / 1048576.0, (long long)state,
                     copy ? " and the rollback copy of parameters and state" : "", (long long)avail,
                     (double)avail / 1048576.0);
}

/* The state set: PARAM and OPT_STATE values with data, and the writeback targets (BatchNormalization
 * running statistics, which may be constants). */
static sc_status state_collect(sc_trainer *t) {
    sc_graph *g = &t->model->graph;
    bool *in = calloc((size_t)g->n_values + 1, 1);
    t->state_ids = calloc((size_t)g->n_values + 1, sizeof *t->state_ids);
    if (!in || !t->state_ids) {
        free(in);
        return sc_errorf("out of memory");
    }
    for (int i = 0; i < t->tg.n_writebacks; i++) in[t->tg.wb_dst[i]] = true;
    for (int v = 0; v < g->n_values; v++) {
        const sc_value *val = &g->values[v];
        if ((val->kind == SC_VALUE_PARAM || val->kind == SC_VALUE_OPT_STATE || in[v]) && val->data)
            t->state_ids[t->n_state++] = v;
    }
    free(in);
    if (t->cfg.rollback != SC_ROLLBACK_ON) return SC_OK;
    t->snapshot = calloc((size_t)t->n_state + 1, sizeof *t->snapshot);
    if (!t->snapshot) return sc_errorf("out of memory");
    for (int i = 0; i < t->n_state; i++) {
        int64_t bytes = sc_desc_bytes(&g->values[t->state_ids[i]].desc);
        t->snapshot[i] = sc_big_alloc((size_t)(bytes > 0 ? bytes : 1));
        if (!t->snapshot[i]) return sc_errorf("out of memory copying '%s'", g->values[t->state_ids[i]].name);
    }
    train_snapshot_take(t);
    return SC_OK;
}

static sc_status total_steps(sc_trainer *t) {
    if (t->cfg.steps > 0) {
        t->total = t->cfg.steps;
    } else if (t->cfg.epochs > 0) {
        int64_t b = t->data.batch * sc_comm_size(); /* the global batch */
        t->total = (t->cfg.epochs * t->data.n + b - 1) / b;
    } else {
        return sc_errorf("give the number of steps or epochs (both are 0)");
    }
    return SC_OK;
}

/* Data parallel (backends/comm.h): the job this process is a rank of; each rank's kernels share the
 * host's cores with the other ranks on it unless told otherwise. */
static sc_status ranks_join(sc_trainer *t) {
    SC_TRY(sc_comm_init());
    t->cfg.train.ranks = sc_comm_size();
    t->cfg.train.rank = sc_comm_rank();
    if (t->cfg.threads == 0 && sc_comm_local_size() > 1) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        t->cfg.threads = cores > sc_comm_local_size() ? (int)(cores / sc_comm_local_size()) : 1;
    }
    return SC_OK;
}

static sc_status trainer_build(sc_trainer *t) {
    SC_TRY(strings_copy(t));
    SC_TRY(ranks_join(t));
    SC_TRY(sc_device_resolve(t->cfg.device, &t->cfg.device));
    if (t->cfg.device == SC_DEVICE_CUDA) t->cfg.use_plan = true; /* the GPU runs plans only (train_plan.c) */
    t->cfg.train.loss_scaling = t->cfg.precision == SC_F16;
    t->loss_scale = t->cfg.loss_scale_init;
    sc_backend_config host = {.device = SC_DEVICE_CPU};
    SC_TRY(backend_open(&host, &t->host));
    if (t->cfg.threads > 0) t->host->iface->set_threads(t->host, t->cfg.threads);
    t->adapt_threads = t->cfg.threads == 0 && t->cfg.device == SC_DEVICE_CPU && sc_comm_size() == 1 &&
                       t->host->iface->set_threads;
    if (t->adapt_threads) thread_governor_init(&t->gov, backend_host_threads());
    SC_TRY(sc_model_load(t->cfg.model_path, &t->model));
    sc_graph *g = &t->model->graph;
    sc_bind_options bo = {.batch = t->cfg.batch, .seq = t->cfg.seq, .eval = t->host->iface->evaluator(t->host),
                          .precision = t->cfg.precision};
    SC_TRY(sc_status_prefix(graph_prepare(g, &bo), "%s: ", t->cfg.model_path));
    SC_TRY(sc_status_prefix(autodiff_build_training(g, &t->cfg.train, &t->tg), "%s: ", t->cfg.model_path));
    if (t->tg.n_params == 0) sc_log(SC_LOG_WARN, "%s: no trainable parameters (all frozen?)", t->cfg.model_path);
    SC_TRY(train_data_open(&t->data, g, &t->tg, &t->cfg));
    SC_TRY(total_steps(t));
    SC_TRY(feeds_alloc(t));
    SC_TRY(sc_status_prefix(host_memory_check(t), "%s: ", t->cfg.model_path));
    SC_TRY(state_collect(t));
    if (t->cfg.resume_dir) SC_TRY(train_state_read(t, t->cfg.resume_dir));
    bool prefetch = t->cfg.prefetch == SC_PREFETCH_AUTO ? t->cfg.device != SC_DEVICE_CPU : t->cfg.prefetch == SC_PREFETCH_ON;
    SC_TRY(train_prefetch_open(&t->prefetch, prefetch, &t->data, g, t->feeds, g->n_inputs));
    SC_TRY(sc_status_prefix(train_plan_open(t), "%s: ", t->cfg.model_path)); /* without use_plan: the none plan */
    return SC_OK;
}

sc_status sc_trainer_create(const sc_trainer_config *cfg, sc_trainer **out) {
    *out = NULL;
    if (!cfg->model_path) return sc_errorf("no model given");
    if (cfg->batch < 0 || cfg->steps < 0 || cfg->epochs < 0 || cfg->warmup < 0)
        return sc_errorf("batch, steps, epochs and warmup must not be negative");
    if (!(cfg->lr >= 0) || !isfinite(cfg->lr)) return sc_errorf("learning rate %g is not a finite value >= 0", cfg->lr);
    if (!(cfg->loss_scale_init > 0) || !isfinite(cfg->loss_scale_init) || cfg->loss_scale_interval < 1)
        return sc_errorf("the loss scale must be a finite value > 0 (got %g) and its growth interval at least 1 "
                         "(got %lld)", cfg->loss_scale_init, (long long)cfg->loss_scale_interval);
    sc_trainer *t = calloc(1, sizeof *t);
    if (!t) return sc_errorf("out of memory");
    t->cfg = *cfg;
    if (t->cfg.batch == 0) t->cfg.batch = 1;
    sc_status st = trainer_build(t);
    if (st) {
        sc_trainer_free(t);
        return st;
    }
    *out = t;
    return SC_OK;
}

static void outs_release(sc_trainer *t) {
    if (!t->outs || !t->model) return;
    for (int i = 0; i < t->model->graph.n_outputs; i++) sc_tensor_free_data(&t->outs[i]);
}

void sc_trainer_free(sc_trainer *t) {
    if (!t) return;
    train_prefetch_wait(&t->prefetch); /* its worker reads the data and the graph */
    train_plan_close(t);                /* unpins the feeds before they are freed */
    train_prefetch_close(&t->prefetch);
    outs_release(t);
    if (t->feeds && t->model)
        for (int i = 0; i < t->model->graph.n_inputs; i++) free(t->feeds[i].data);
    for (int i = 0; t->snapshot && i < t->n_state; i++) free(t->snapshot[i]);
    SC_FREE_ALL(t->snapshot, t->spent, t->state_ids, t->feeds, t->outs, t->wb_out);
    train_data_close(&t->data);
    sc_model_free(t->model);
    backend_destroy(t->host);
    sc_calibration_free(&t->cal);
    free(t->profile_time);
    for (size_t i = 0; i < sizeof t->strings / sizeof t->strings[0]; i++) free(t->strings[i]);
    free(t);
}

/* ---- one step ---- */

/* This step's batch (drawn ahead during the last step when prefetch is on), then the next step's
 * started on the worker while this one runs. */
static sc_status feeds_fill(sc_trainer *t, int64_t step, float lr) {
    uint64_t sample = train_shard_sample(t);
    if (!train_prefetch_take(&t->prefetch, sample, t->feeds))
        SC_TRY(train_data_fill(&t->data, &t->model->graph, sample, t->feeds));
    train_scalars_fill(t, t->feeds, lr, step);
    train_prefetch_start(&t->prefetch, train_shard_sample_at(t, t->sample + (uint64_t)(t->data.batch * sc_comm_size())));
    return SC_OK;
}

static void writebacks_apply(sc_trainer *t) {
    sc_graph *g = &t->model->graph;
    for (int i = 0; i < t->tg.n_writebacks; i++) {
        sc_value *dst = &g->values[t->tg.wb_dst[i]];
        memcpy(dst->data, t->outs[t->wb_out[i]].data, (size_t)sc_desc_bytes(&dst->desc));
    }
}

/* The step's graph execution by the plan executor: the configured plan, or without use_plan the
 * store-everything plan with parameters and state in place (train_plan.c); *seconds is the time of
 * the execution itself. */
static sc_status step_execute(sc_trainer *t, int64_t *peak_bytes, double *seconds, int64_t *h2d, int64_t *d2h,
                              int64_t *staged, int64_t *host_bytes) {
    *peak_bytes = -1;
    *seconds = 0;
    *h2d = *d2h = *staged = *host_bytes = 0;
    if (!t->session) return sc_errorf("no plan to run (the last re-plan failed)");
    SC_TRY(train_plan_run(t, peak_bytes, seconds, h2d, d2h, staged, host_bytes));
    if (!t->cfg.use_plan) *peak_bytes = -1, *h2d = *d2h = *staged = *host_bytes = 0; /* figures of a plan nobody asked for */
    return SC_OK;
}

/* A session whose state a failed step left behind (no rollback copy) cannot go on or save it. */
static sc_status spent_check(const sc_trainer *t) {
    return t->spent ? sc_errorf("the session cannot continue: %s", t->spent) : SC_OK;
}

bool sc_trainer_rollback(const sc_trainer *t) { return t->snapshot != NULL; }

bool sc_trainer_thread_runs(const sc_trainer *t, int *threads, int64_t runs[2]) {
    bool on = t->adapt_threads && t->gov.enabled;
    *threads = t->gov.arms[0];
    runs[0] = runs[1] = 0;
    if (on) thread_governor_runs(&t->gov, runs);
    return on;
}

/* The step on this rank: on failure its state is restored (with rollback) or the session spent. */
typedef struct {
    double loss, exec_time, scale;
    int64_t peak_bytes, h2d, d2h, staged, host_bytes;
    bool skipped;
} step_outcome;

static sc_status step_local(sc_trainer *t, int64_t step, float lr, step_outcome *o) {
    sc_graph *g = &t->model->graph;
    SC_TRY(feeds_fill(t, step, lr));
    outs_release(t);
    train_backends_step_begin(t, (uint64_t)step);
    sc_status st = step_execute(t, &o->peak_bytes, &o->exec_time, &o->h2d, &o->d2h, &o->staged, &o->host_bytes);
    if (st) {
        st = sc_status_prefix(st, "step %lld: ", (long long)step);
        if (!t->snapshot) return train_spent(t, st); /* updates before the failing node ran in place */
        train_snapshot_restore(t);
        sc_status_free(train_plan_reload(t));
        return st;
    }
    writebacks_apply(t);
    double loss = train_loss_value(&t->outs[t->loss_out]);
    o->loss = loss;
    o->scale = t->tg.loss_scale >= 0 ? t->loss_scale : 0;
    int bad = -1;
    bool state_ok = true;
    if (isfinite(loss)) st = train_state_finite(t, &state_ok, &bad);
    if (st) return train_spent(t, sc_status_prefix(st, "step %lld: checking the state: ", (long long)step));
    if (t->tg.loss_scale >= 0 && (!isfinite(loss) || !state_ok)) {
        st = train_overflow_skip(t, step, loss, bad, &o->skipped);
        if (o->skipped) writebacks_apply(t); /* the running statistics stay, as in PyTorch */
        sc_status reload = train_plan_reload(t);
        if (st || reload) return st ? (sc_status_free(reload), st) : reload;
    } else if (!isfinite(loss) || !state_ok) {
        char trigger[512];
        if (!isfinite(loss)) snprintf(trigger, sizeof trigger, "the loss is %g", loss);
        else snprintf(trigger, sizeof trigger, "'%s' became non-finite in the update", g->values[bad].name);
        st = train_nan_locate(t, step, trigger);
        sc_status_free(train_plan_reload(t)); /* the device copy returns to the restored weights */
        return st;
    }
    return SC_OK;
}

/* Data parallel: every rank's step succeeded, or each fails; a rank whose own step succeeded undoes
 * it when another's failed, so the ranks keep equal weights (train_dist.c). */
static sc_status trainer_step(sc_trainer *t, sc_step_result *r) {
    SC_TRY(spent_check(t));
    if (t->step >= t->total) return sc_errorf("the run is complete (%lld steps)", (long long)t->total);
    int64_t step = t->step + 1;
    float lr = sc_trainer_lr_at(&t->cfg, t->total, step);
    step_outcome o = {0};
    sc_status st = step_local(t, step, lr, &o);
    bool own_ok = st == SC_OK;
    st = train_dist_step_end(t, st, step, &o.loss);
    if (st && own_ok) {
        if (!t->snapshot) return train_spent(t, st);
        train_snapshot_restore(t);
        sc_status_free(train_plan_reload(t));
    }
    if (st) return st;
    t->step_loss = o.loss;
    if (!o.skipped) train_loss_scale_good_step(t);
    train_snapshot_take(t);
    t->step = step;
    t->sample += (uint64_t)(t->data.batch * sc_comm_size()); /* the global batch: every rank's shard */
    if (r) {
        r->step = step;
        r->loss = (float)o.loss;
        r->lr = lr;
        r->samples = t->data.batch;
        r->tokens = t->data.lm ? t->data.batch * t->data.seq : t->data.batch;
        r->exec_time = o.exec_time;
        r->peak_bytes = o.peak_bytes;
        r->bytes_h2d = o.h2d, r->bytes_d2h = o.d2h;
        r->bytes_staged = o.staged;
        r->host_bytes = o.host_bytes;
        r->loss_scale = o.scale;
        r->skipped = o.skipped;
    }
    return SC_OK;
}

/* With adapt_threads the whole step (the graph, the checks and the rollback copy, whose parallel
 * copies also wait on a busy core) runs with the governor's count; the caller's count comes back
 * after it, for whatever else the process runs. */
sc_status sc_trainer_step(sc_trainer *t, sc_step_result *r) {
    bool adapt = t->adapt_threads && t->gov.enabled;
    if (adapt) t->host->iface->set_threads(t->host, thread_governor_next(&t->gov));
    double t0 = sc_clock_seconds();
    sc_status st = trainer_step(t, r);
    if (adapt) {
        if (!st) thread_governor_record(&t->gov, sc_clock_seconds() - t0);
        t->host->iface->set_threads(t->host, t->gov.arms[0]);
    }
    return st;
}

bool sc_trainer_done(const sc_trainer *t) { return t->step >= t->total; }
int64_t sc_trainer_prefetch_hits(const sc_trainer *t) { return t->prefetch.hits; }
int64_t sc_trainer_step_count(const sc_trainer *t) { return t->step; }
int64_t sc_trainer_total_steps(const sc_trainer *t) { return t->total; }
int64_t sc_trainer_dataset_size(const sc_trainer *t) { return t->data.n; }
const char *sc_trainer_data_desc(const sc_trainer *t) { return t->data.desc; }
sc_model *sc_trainer_model(sc_trainer *t) { return t->model; }
sc_status sc_trainer_sync_host(sc_trainer *t) { return train_host_sync(t); }
const sc_training_graph *sc_trainer_graph(const sc_trainer *t) { return &t->tg; }

/* ---- output files ---- */

/* Data parallel: every rank holds the same weights; rank 0 writes them and every rank learns the outcome. */
sc_status sc_trainer_save_model(sc_trainer *t, const char *path) {
    SC_TRY(spent_check(t));
    SC_TRY(train_host_sync(t));
    sc_status st = sc_comm_rank() == 0 ? sc_model_save_as(t->model, path, sc_model_external_threshold(t->model),
                                                          t->cfg.save_precision ? t->cfg.save_precision : SC_F32)
                                       : SC_OK;
    return sc_comm_agree(st, "writing the model");
}

static char *npy_path(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 8;
    char *path = malloc(n);
    if (!path) return NULL;
    int k = snprintf(path, n, "%s/", dir);
    for (const char *c = name; *c; c++) {
        int ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' ||
                 *c == '_' || *c == '-';
        path[k++] = ok ? *c : '_';
    }
    if (!name[0] || name[0] == '.') path[k++] = '_';
    snprintf(path + k, n - (size_t)k, ".npy");
    return path;
}

static sc_status npy_save(const char *dir, const char *name, const sc_tensor *tensor) {
    char *path = npy_path(dir, name);
    if (!path) return sc_errorf("out of memory");
    sc_status st = sc_npy_write(path, tensor);
    free(path);
    return st;
}

static sc_status grads_write(sc_trainer *t, const char *dir, const char *others, int64_t others_bytes);

/* The gradient of parameters [i, i + n) of tg.params, written as one file: one parameter, or the n
 * row blocks of one (tg.block_of), whose gradients stacked are the gradient of the whole table. */
static sc_status grad_write(sc_trainer *t, const char *dir, int i, int n) {
    const sc_graph *g = &t->model->graph;
    sc_tensor grad = {0};
    char *stacked = NULL;
    for (int k = 0; k < n; k++) {
        int o = output_index(g, t->tg.grads[i + k]);
        if (o < 0) return sc_errorf("internal: gradient of '%s' is not a graph output", g->values[t->tg.params[i + k]].name);
        if (n == 1) {
            grad = t->outs[o];
            grad.desc = g->values[t->tg.params[i]].desc; /* same shape; the parameter's name and dims */
            break;
        }
        const sc_value *whole = &g->values[t->tg.block_of[i]];
        int64_t bytes = sc_desc_bytes(&t->outs[o].desc);
        if (!stacked) {
            grad.desc = whole->desc;
            stacked = malloc((size_t)sc_desc_bytes(&whole->desc));
            if (!stacked) return sc_errorf("out of memory writing the gradient of '%s'", whole->name);
            grad.data = stacked;
        }
        memcpy(stacked + ((unsigned char *)g->values[t->tg.params[i + k]].data - (unsigned char *)whole->data),
               t->outs[o].data, (size_t)bytes);
    }
    sc_status st = npy_save(dir, g->values[n == 1 ? t->tg.params[i] : t->tg.block_of[i]].name, &grad);
    free(stacked);
    return st;
}

/* Data parallel: the gradients kept are the averaged ones, the same on every rank; rank 0 writes them.
 * With a sharded optimizer each rank keeps its own buckets' and sends them to rank 0. */
sc_status sc_trainer_dump_grads(sc_trainer *t, const char *dir) {
    char *others = NULL;
    int64_t bytes = 0;
    sc_status st = SC_OK;
    if (t->cfg.train.shard_optimizer && sc_comm_size() > 1) st = train_dist_gather_grads(t, output_index, &others, &bytes);
    if (!st && sc_comm_rank() == 0) st = grads_write(t, dir, others, bytes);
    free(others);
    return sc_comm_agree(st, "writing the gradients");
}

static sc_status grads_write(sc_trainer *t, const char *dir, const char *others, int64_t others_bytes) {
    SC_TRY(spent_check(t));
    if (!t->outs[t->loss_out].data) return sc_errorf("no step has run yet: no gradients to write");
    if (!t->cfg.train.keep_grads) return sc_errorf("gradients were not kept (set train.keep_grads)");
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) return sc_errorf("%s: cannot create folder: %s", dir, strerror(errno));
    for (int i = 0, n; i < t->tg.n_params; i += n) {
        n = 1;
        while (t->tg.block_of && t->tg.block_of[i] >= 0 && i + n < t->tg.n_params &&
               t->tg.block_of[i + n] == t->tg.block_of[i])
            n++;
        SC_TRY(grad_write(t, dir, i, n));
    }
    for (const char *p = others, *end = others ? others + others_bytes : NULL; p && p < end;) {
        char name[4096];
        sc_tensor grad;
        SC_TRY(train_dist_record_next(&p, end, name, sizeof name, &grad));
        SC_TRY(npy_save(dir, name, &grad));
    }
    sc_tensor loss = t->outs[t->loss_out]; /* the loss's own dtype: f32, or f64 for f64 models */
    double mean = t->step_loss; /* data parallel: the mean over the ranks, the loss the gradients are of */
    float mean32 = (float)mean;
    if (sc_comm_size() > 1) loss.data = loss.desc.dtype == SC_F64 ? (void *)&mean : (void *)&mean32;
    return npy_save(dir, "loss", &loss);
}
