/* The public API (include/scorch.h) over the library's stages: import and graph passes for
 * models, the training session (train/trainer.h) for trainers. Only the scorch_* symbols leave the
 * shared library (api/scorch.map); everything else stays internal. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "scorch.h"

#include "backends/infer.h"
#include "core/units.h"
#include "graph/passes.h"
#include "import/onnx.h"
#include "train/trainer.h"

/* An error is the library's status under the public name (one pointer, one allocation). */
static scorch_error *err(sc_status s) { return (scorch_error *)s; }

/* A constructor's last step: on failure the half-made handle h goes (its parts are freed by then). */
static scorch_error *free_on_error(sc_status st, void *h) {
    if (st) free(h);
    return err(st);
}

const char *scorch_version(void) { return SCORCH_VERSION; }
const char *scorch_error_message(const scorch_error *e) { return e ? sc_status_message((sc_status)e) : ""; }
void scorch_error_free(scorch_error *e) { sc_status_free((sc_status)e); }

/* ---- tensors ---- */

void scorch_tensor_free(scorch_tensor *t) {
    if (!t) return;
    free(t->data);
    t->data = NULL;
}

static void tensor_from_desc(const sc_desc *d, void *data, scorch_tensor *t) {
    memset(t, 0, sizeof *t);
    t->dtype = (scorch_dtype)d->dtype;
    t->rank = d->rank;
    for (int k = 0; k < d->rank; k++) t->dims[k] = d->dims[k];
    t->data = data;
}

/* ---- models ---- */

#define MAX_DIMS 16

struct scorch_model {
    sc_model *m;
    bool prepared;
    sc_bind_options bind;
    sc_dim_binding dims[MAX_DIMS];
    char *dim_names[MAX_DIMS];
    sc_infer_session *infer; /* made by the first run (the dims are fixed by then) */
};

scorch_error *scorch_model_load(const char *path, scorch_model **out) {
    *out = NULL;
    if (!path) return err(sc_errorf("scorch_model_load: no path"));
    scorch_model *h = calloc(1, sizeof *h);
    if (!h) return err(sc_errorf("out of memory"));
    sc_status st = sc_model_load(path, &h->m);
    if (!st) *out = h;
    return free_on_error(st, h);
}

void scorch_model_free(scorch_model *m) {
    if (!m) return;
    infer_session_free(m->infer);
    sc_model_free(m->m);
    for (int i = 0; i < m->bind.n_dims; i++) free(m->dim_names[i]);
    free(m);
}

scorch_error *scorch_model_set_dim(scorch_model *m, const char *name, int64_t value) {
    if (!name || !*name) return err(sc_errorf("scorch_model_set_dim: no dim name"));
    if (value < 1) return err(sc_errorf("dim '%s': %lld is not a positive size", name, (long long)value));
    if (m->prepared) return err(sc_errorf("dim '%s': the model's dims are fixed once it has been used", name));
    if (!strcmp(name, "batch")) m->bind.batch = value;
    else if (!strcmp(name, "seq")) m->bind.seq = value;
    else if (m->bind.n_dims == MAX_DIMS) return err(sc_errorf("dim '%s': more than %d named dims", name, MAX_DIMS));
    else {
        char *copy = strdup(name);
        if (!copy) return err(sc_errorf("out of memory"));
        m->dim_names[m->bind.n_dims] = copy;
        m->dims[m->bind.n_dims] = (sc_dim_binding){copy, value};
        m->bind.n_dims++;
        m->bind.dims = m->dims;
    }
    return NULL;
}

/* Binds the dims and runs the graph passes once, with the inference-only fusions, as `scorch-run
 * run` does. Saving still finds the weights as loaded: the fusions add new constants and leave the
 * parameters alone (graph/pass_fuse.c). */
static sc_status model_ready(scorch_model *m) {
    if (m->prepared) return SC_OK;
    m->bind.inference = true;
    m->bind.eval = cpu_evaluator();
    SC_TRY(sc_status_prefix(graph_prepare(&m->m->graph, &m->bind), "%s: ", m->m->path));
    m->prepared = true;
    return SC_OK;
}

static scorch_error *port(scorch_model *m, bool input, int i, const char **name, scorch_tensor *shape) {
    sc_status st = model_ready(m);
    if (st) return err(st);
    const sc_graph *g = &m->m->graph;
    int n = input ? g->n_inputs : g->n_outputs;
    if (i < 0 || i >= n) return err(sc_errorf("%s %d: the model has %d", input ? "input" : "output", i, n));
    const sc_value *v = &g->values[input ? g->inputs[i] : g->outputs[i]];
    if (name) *name = v->name;
    if (shape) tensor_from_desc(&v->desc, NULL, shape);
    return NULL;
}

static scorch_error *port_count(scorch_model *m, bool input, int *n) {
    sc_status st = model_ready(m);
    if (st) return err(st);
    *n = input ? m->m->graph.n_inputs : m->m->graph.n_outputs;
    return NULL;
}

scorch_error *scorch_model_input_count(scorch_model *m, int *n) { return port_count(m, true, n); }
scorch_error *scorch_model_output_count(scorch_model *m, int *n) { return port_count(m, false, n); }
scorch_error *scorch_model_input(scorch_model *m, int i, const char **name, scorch_tensor *shape) {
    return port(m, true, i, name, shape);
}
scorch_error *scorch_model_output(scorch_model *m, int i, const char **name, scorch_tensor *shape) {
    return port(m, false, i, name, shape);
}

scorch_error *scorch_model_run(scorch_model *m, const scorch_tensor *inputs, scorch_tensor *outputs) {
    sc_status st = model_ready(m);
    if (st) return err(st);
    sc_graph *g = &m->m->graph;
    sc_tensor *in = calloc((size_t)g->n_inputs + 1, sizeof *in), *out = calloc((size_t)g->n_outputs + 1, sizeof *out);
    if (!in || !out) st = sc_errorf("out of memory");
    for (int i = 0; !st && i < g->n_inputs; i++) {
        const scorch_tensor *x = &inputs[i];
        if (x->rank < 0 || x->rank > SCORCH_MAX_RANK) st = sc_errorf("input %d: rank %d", i, x->rank);
        else in[i] = (sc_tensor){sc_desc_make((sc_dtype)x->dtype, x->rank, x->dims), x->data};
    }
    sc_backend_config cpu = {.device = SC_DEVICE_CPU};
    if (!st && !m->infer) st = infer_session_create(g, &cpu, &m->infer);
    if (!st) st = infer_session_run(m->infer, in, out);
    for (int i = 0; !st && i < g->n_outputs; i++) tensor_from_desc(&out[i].desc, out[i].data, &outputs[i]);
    free(in);
    free(out);
    return err(st);
}

scorch_error *scorch_model_save(scorch_model *m, const char *path) {
    if (!path) return err(sc_errorf("scorch_model_save: no path"));
    return err(sc_model_save(m->m, path, sc_model_external_threshold(m->m)));
}

/* ---- training options ---- */

struct scorch_options {
    sc_trainer_config c;
    char *strings[8]; /* copies of path and regex values */
    bool lr_set, momentum_set, wd_set, steps_or_epochs, strategy_set;
};

scorch_error *scorch_options_new(scorch_options **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return err(sc_errorf("out of memory"));
    sc_trainer_config_default(&(*out)->c);
    (*out)->c.steps = 100;
    (*out)->c.device = SC_DEVICE_CPU;
    return NULL;
}

void scorch_options_free(scorch_options *o) {
    if (!o) return;
    for (size_t i = 0; i < sizeof o->strings / sizeof o->strings[0]; i++) free(o->strings[i]);
    free(o);
}

static sc_status int_value(const char *key, const char *v, int64_t lo, int64_t *out) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno || x < lo) return sc_errorf("option %s: '%s' is not an integer >= %lld", key, v, (long long)lo);
    *out = x;
    return SC_OK;
}

static sc_status float_value(const char *key, const char *v, float *out) {
    char *end;
    double x = strtod(v, &end);
    if (!*v || *end || !(x >= 0) || !isfinite(x)) return sc_errorf("option %s: '%s' is not a finite number >= 0", key, v);
    *out = (float)x;
    return SC_OK;
}

/* The index of v in names (n of them), or a status listing them. */
static sc_status choice(const char *key, const char *v, const char *const *names, int n, int *out) {
    for (int i = 0; i < n; i++)
        if (!strcmp(v, names[i])) {
            *out = i;
            return SC_OK;
        }
    char list[256] = "";
    for (int i = 0; i < n; i++) {
        strncat(list, names[i], sizeof list - strlen(list) - 1);
        if (i + 1 < n) strncat(list, "|", sizeof list - strlen(list) - 1);
    }
    return sc_errorf("option %s: '%s' is not one of %s", key, v, list);
}

static sc_status string_value(scorch_options *o, int slot, const char *v, const char **field) {
    char *copy = strdup(v);
    if (!copy) return sc_errorf("out of memory");
    free(o->strings[slot]);
    o->strings[slot] = copy;
    *field = copy;
    return SC_OK;
}

static sc_status plan_option(scorch_options *o, const char *key, const char *v) {
    sc_trainer_config *c = &o->c;
    int k;
    c->use_plan = true;
    if (!strcmp(key, "memory")) {
        if ((c->plan.budget = sc_parse_size(v)) <= 0)
            return sc_errorf("option memory: '%s' is not a positive size such as 512MiB, 2GiB or a byte count", v);
    } else if (!strcmp(key, "strategy")) {
        if ((k = plan_strategy_parse(v)) < 0) return sc_errorf("option strategy: '%s' is not one of none|sqrt|dc|optimal|evict|auto", v);
        c->plan.strategy = (sc_strategy)k;
        o->strategy_set = true;
    } else if (!strcmp(key, "offload")) {
        if ((k = plan_offload_parse(v)) < 0)
            return sc_errorf("option offload: '%s' is not one of none|weights|activations|both|auto", v);
        c->plan.offload = (sc_offload)k;
    } else {
        if ((k = plan_update_parse(v)) < 0) return sc_errorf("option optimizer-on: '%s' is not one of auto|device|host", v);
        c->plan.update_on = (sc_update_place)k;
    }
    return SC_OK;
}

scorch_error *scorch_options_set(scorch_options *o, const char *key, const char *value) {
    static const char *const optims[] = {"sgd", "adamw"}, *const scheds[] = {"constant", "cosine"},
                             *const losses[] = {"auto", "ce", "mse"}, *const tdt[] = {"uint16", "int32"},
                             *const devices[] = {"cpu", "cuda", "auto"}, *const rollbacks[] = {"auto", "on", "off"},
                             *const flags[] = {"0", "1"};
    if (!key || !value) return err(sc_errorf("scorch_options_set: key and value are required"));
    sc_trainer_config *c = &o->c;
    sc_status st = SC_OK;
    int64_t i = 0;
    int k = 0;
    if (!strcmp(key, "batch")) {
        if (!(st = int_value(key, value, 1, &i))) c->batch = i;
    } else if (!strcmp(key, "seq")) {
        if (!(st = int_value(key, value, 1, &i))) c->seq = i;
    } else if (!strcmp(key, "steps") || !strcmp(key, "epochs")) {
        if (o->steps_or_epochs) st = sc_errorf("option %s: give steps or epochs, not both", key);
        else if (!(st = int_value(key, value, 1, &i))) {
            bool steps = !strcmp(key, "steps");
            c->steps = steps ? i : 0;
            c->epochs = steps ? 0 : i;
            o->steps_or_epochs = true;
        }
    } else if (!strcmp(key, "lr")) {
        if (!(st = float_value(key, value, &c->lr))) o->lr_set = true;
    } else if (!strcmp(key, "optimizer")) {
        if (!(st = choice(key, value, optims, 2, &k))) c->train.optim = k ? SC_OPTIM_ADAMW : SC_OPTIM_SGD;
    } else if (!strcmp(key, "momentum")) {
        if (!(st = float_value(key, value, &c->train.momentum))) o->momentum_set = true;
    } else if (!strcmp(key, "weight-decay")) {
        if (!(st = float_value(key, value, &c->train.weight_decay))) o->wd_set = true;
    } else if (!strcmp(key, "precision")) {
        static const char *const precisions[] = {"fp32", "bf16", "fp16"};
        static const sc_dtype types[] = {SC_F32, SC_BF16, SC_F16};
        if (!(st = choice(key, value, precisions, 3, &k))) c->precision = types[k];
    } else if (!strcmp(key, "save-precision")) {
        static const char *const saves[] = {"fp32", "bf16"};
        if (!(st = choice(key, value, saves, 2, &k))) c->save_precision = k ? SC_BF16 : SC_F32;
    } else if (!strcmp(key, "loss-scale")) {
        float f = 0;
        if (!(st = float_value(key, value, &f)) && !(f > 0 && isfinite(f)))
            st = sc_errorf("option loss-scale: '%s' is not a finite value > 0", value);
        if (!st) c->loss_scale_init = f;
    } else if (!strcmp(key, "loss-scale-interval")) {
        if (!(st = int_value(key, value, 1, &i))) c->loss_scale_interval = i;
    } else if (!strcmp(key, "nesterov") || !strcmp(key, "tf32")) {
        if (!(st = choice(key, value, flags, 2, &k))) *(!strcmp(key, "tf32") ? &c->tf32 : &c->train.nesterov) = k;
    } else if (!strcmp(key, "schedule")) {
        if (!(st = choice(key, value, scheds, 2, &k))) c->schedule = k ? SC_LR_COSINE : SC_LR_CONSTANT;
    } else if (!strcmp(key, "warmup")) {
        if (!(st = int_value(key, value, 0, &i))) c->warmup = i;
    } else if (!strcmp(key, "clip")) {
        if (!(st = float_value(key, value, &c->train.clip_norm)) && !(c->train.clip_norm > 0))
            st = sc_errorf("option clip: '%s' is not > 0", value);
    } else if (!strcmp(key, "param-block")) {
        if (!(c->train.param_block = sc_param_block_parse(value)))
            st = sc_errorf("option param-block: '%s' is not a size such as 16MiB, or off", value);
    } else if (!strcmp(key, "seed")) {
        if (!(st = int_value(key, value, 0, &i))) c->seed = (uint64_t)i;
    } else if (!strcmp(key, "loss")) {
        if (!(st = choice(key, value, losses, 3, &k)))
            c->train.loss = k == 0 ? SC_LOSS_AUTO : k == 1 ? SC_LOSS_CROSS_ENTROPY : SC_LOSS_MSE;
    } else if (!strcmp(key, "token-dtype")) {
        if (!(st = choice(key, value, tdt, 2, &k))) c->token_dtype = k ? SC_I32 : SC_U16;
    } else if (!strcmp(key, "threads")) {
        if (!(st = int_value(key, value, 1, &i))) c->threads = (int)i;
    } else if (!strcmp(key, "device")) {
        if (!(st = choice(key, value, devices, 3, &k))) c->device = (sc_device)k;
    } else if (!strcmp(key, "rollback")) {
        if (!(st = choice(key, value, rollbacks, 3, &k))) c->rollback = (sc_rollback)k;
    } else if (!strcmp(key, "prefetch")) {
        if (!(st = choice(key, value, rollbacks, 3, &k))) c->prefetch = (sc_prefetch)k;
    } else if (!strcmp(key, "data")) {
        st = string_value(o, 0, value, &c->data_path);
    } else if (!strcmp(key, "labels")) {
        st = string_value(o, 1, value, &c->labels_path);
    } else if (!strcmp(key, "tokens")) {
        st = string_value(o, 2, value, &c->tokens_path);
    } else if (!strcmp(key, "freeze")) {
        st = string_value(o, 3, value, &c->train.freeze_regex);
    } else if (!strcmp(key, "resume")) {
        st = string_value(o, 4, value, &c->resume_dir);
    } else if (!strcmp(key, "link-bandwidth")) {
        double bw = (double)sc_parse_size(value);
        if (!(bw > 0)) st = sc_errorf("option link-bandwidth: '%s' is not a positive rate such as 25GB", value);
        else c->link_bandwidth = c->plan.link_bandwidth = bw;
    } else if (!strcmp(key, "memory") || !strcmp(key, "strategy") || !strcmp(key, "offload") ||
               !strcmp(key, "optimizer-on")) {
        st = plan_option(o, key, value);
    } else {
        st = sc_errorf("unknown option '%s' (the keys are scorch-run train's options without the dashes)", key);
    }
    return err(st);
}

/* ---- trainers ---- */

struct scorch_trainer {
    sc_trainer *t;
};

/* The optimizer's defaults where the caller left them, as `scorch-run train` has them. */
static void optimizer_defaults(const scorch_options *o, sc_trainer_config *c) {
    bool adamw = c->train.optim == SC_OPTIM_ADAMW;
    if (!o->lr_set) c->lr = adamw ? 1e-3f : 0.01f;
    if (!o->momentum_set) c->train.momentum = adamw ? 0.0f : 0.9f;
    if (!o->wd_set) c->train.weight_decay = adamw ? 0.01f : 0.0f;
}

scorch_error *scorch_trainer_create(const char *model_path, const scorch_options *o, scorch_trainer **out) {
    *out = NULL;
    scorch_options *own = NULL;
    if (!o) {
        scorch_error *e = scorch_options_new(&own);
        if (e) return e;
        o = own;
    }
    sc_trainer_config c = o->c;
    c.model_path = model_path;
    optimizer_defaults(o, &c);
    if (c.plan.budget > 0 && !o->strategy_set) c.plan.strategy = SC_STRATEGY_AUTO; /* as --memory alone */
    sc_status st = SC_OK;
    if (c.plan.update_on != SC_UPDATE_AUTO && (c.plan.offload == SC_OFFLOAD_NONE || c.plan.offload == SC_OFFLOAD_ACTIVATIONS))
        st = sc_errorf("option optimizer-on applies to streamed parameters: set offload to weights, both or auto");
    if (!st && c.train.nesterov && (c.train.optim == SC_OPTIM_ADAMW || c.train.momentum <= 0))
        st = sc_errorf("option nesterov needs SGD with momentum > 0");
    if (!st && (c.labels_path != NULL) != (c.data_path != NULL)) st = sc_errorf("options data and labels go together");
    if (!st && c.tokens_path && c.data_path) st = sc_errorf("give data and labels, or tokens, not both");
    scorch_trainer *h = st ? NULL : calloc(1, sizeof *h);
    if (!st && !h) st = sc_errorf("out of memory");
    if (!st) st = sc_trainer_create(&c, &h->t);
    scorch_options_free(own);
    if (!st) *out = h;
    return free_on_error(st, h);
}

void scorch_trainer_free(scorch_trainer *t) {
    if (!t) return;
    sc_trainer_free(t->t);
    free(t);
}

scorch_error *scorch_trainer_step(scorch_trainer *t, scorch_metrics *m) {
    sc_step_result r;
    sc_status st = sc_trainer_step(t->t, &r);
    if (!st && m) {
        memset(m, 0, sizeof *m);
        m->step = r.step;
        m->loss = r.loss;
        m->lr = r.lr;
        m->seconds = r.exec_time;
        m->tokens = r.tokens;
        m->peak_bytes = r.peak_bytes;
        m->bytes_h2d = r.bytes_h2d;
        m->bytes_d2h = r.bytes_d2h;
        m->host_bytes = r.host_bytes;
    }
    return err(st);
}

int scorch_trainer_done(const scorch_trainer *t) { return sc_trainer_done(t->t); }
int64_t scorch_trainer_total_steps(const scorch_trainer *t) { return sc_trainer_total_steps(t->t); }
scorch_error *scorch_trainer_save_model(scorch_trainer *t, const char *path) {
    return err(path ? sc_trainer_save_model(t->t, path) : sc_errorf("scorch_trainer_save_model: no path"));
}
scorch_error *scorch_trainer_save_state(scorch_trainer *t, const char *dir) {
    return err(dir ? sc_trainer_save_state(t->t, dir) : sc_errorf("scorch_trainer_save_state: no folder"));
}
