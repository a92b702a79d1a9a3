/* A training session (`scorch-run train`): one model, its training graph, a data source,
 * the learning-rate schedule and the saved training state. Library code: it never prints (progress
 * is the caller's business, per step through sc_trainer_step's result) and reports every failure as
 * an sc_status.
 *
 * Lifecycle: sc_trainer_create (load, bind dims, build the training graph, open the data, optionally
 * resume) -> sc_trainer_step until sc_trainer_done -> sc_trainer_save_model; sc_trainer_save_state
 * whenever the caller wants a checkpoint. All randomness is counter-based (see train_data.h), so the
 * whole run is a pure function of (model, config, seed) and a resumed run is bit-identical to an
 * uninterrupted one: 10 steps == 5 steps, save, resume, 5 steps (same thread count).
 *
 * Learning-rate schedule, with t = step - 1 the 0-based index of the optimizer step and T the total
 * number of steps (the formula of torch LambdaLR as in HF transformers' get_cosine_schedule_with_warmup,
 * where the scheduler advances after each optimizer step):
 *   constant: lr_t = lr                                  (warm-up applies to it too when warmup > 0)
 *   warm-up : lr_t = lr * t / warmup                      for t < warmup   (so step 1 has lr 0)
 *   cosine  : lr_t = lr * 0.5 * (1 + cos(pi * (t - warmup) / max(1, T - warmup)))   for t >= warmup
 *
 * Non-finite values: after every step the loss and every updated parameter and optimizer state are
 * checked. With rollback (cfg.rollback, see sc_rollback) the session keeps a copy of the parameters
 * and states taken before each step, so on a failure it restores them and re-runs the step node by
 * node to name the first tensor where a NaN appeared, or an Inf appeared from finite inputs. The
 * status names the step and that tensor; the parameters are left as they were before the failing
 * step, and nothing is written. Without rollback the status names the step and the first non-finite
 * value, and the session refuses further steps and saves (its weights are those the failed step left).
 */
#ifndef SC_TRAINER_H
#define SC_TRAINER_H

#include <stdbool.h>
#include <stdint.h>

#include "autodiff/autodiff.h"
#include "backends/backend.h"
#include "import/onnx.h"
#include "schedule/plan.h"

typedef enum { SC_LR_CONSTANT, SC_LR_COSINE } sc_lr_schedule;

/* The copy of parameters and optimizer state kept to undo a failed step (one more byte per byte of
 * state: a 1.4B-parameter AdamW model's 17 GB would need 17 GB more). AUTO keeps it when the state
 * plus that copy take at most half the host memory available at setup, and not on a GPU (unless in
 * fp16, whose skipped steps restore it): the copy is taken from host data, which would have to be
 * brought up to the GPU's state over the link every step. OFF is what lets a model whose state fills
 * the machine train at all. A failed step then cannot be undone: resume from the last checkpoint. */
typedef enum { SC_ROLLBACK_AUTO, SC_ROLLBACK_ON, SC_ROLLBACK_OFF } sc_rollback;
const char *sc_rollback_name(sc_rollback r); /* "auto", "on", "off" */
/* Whether the next batch is drawn on a worker thread while a step runs (train/train_prefetch.h):
 * AUTO is on for a device and off on the CPU, whose step uses every core itself. The weights are
 * the same either way. */
typedef enum { SC_PREFETCH_AUTO, SC_PREFETCH_ON, SC_PREFETCH_OFF } sc_prefetch;


typedef struct {
    const char *model_path;
    int64_t batch;          /* binds the inputs' dim 0; default 1 when 0 */
    int64_t seq;            /* binds token inputs' dim 1; 0 = the model's own */
    int64_t steps;          /* total optimizer steps of the run (schedule length); see epochs */
    int64_t epochs;         /* when steps == 0: steps = ceil(epochs * dataset size / batch) */
    float lr;
    sc_lr_schedule schedule;
    int64_t warmup;         /* linear warm-up steps */
    uint64_t seed;          /* data, shuffling and dropout */
    sc_train_options train; /* loss, optimizer, clipping, freezing (autodiff/autodiff.h) */
    /* Data (train_data.h): all NULL = synthetic; data_path (+ labels_path) = .npy arrays;
     * tokens_path = a flat file of little-endian token ids of token_dtype (SC_U16 or SC_I32).
     * data_path is "x.npy" (the model's one data input) or "NAME=x.npy"; more_data holds further
     * "NAME=x.npy" entries, one per input (n_more_data of them). */
    const char *data_path, *labels_path;
    const char *more_data[7];
    int n_more_data;
    const char *tokens_path;
    sc_dtype token_dtype;
    const char *resume_dir; /* load DIR/state.bin after building the session */
    int threads;            /* 0 = library default */
    /* Memory-budgeted plans: with use_plan every step runs the plan built under `plan`
     * (schedule/plan.h) with the plan executor (backends/plan_exec.h) in an arena of exactly the
     * planned size. Without it the step is the store-everything plan on the CPU with parameters and
     * state used in place (plan_session_create_in_place). The weights are bit-identical either way. */
    bool use_plan;
    sc_plan_options plan;
    sc_dtype precision;     /* SC_F32 (or 0), SC_BF16 or SC_F16: mixed precision (graph_apply_precision);
                               SC_F16 turns on dynamic loss scaling (train.loss_scaling) */
    /* fp16 loss scaling, torch.cuda.amp.GradScaler's rules and defaults: the first step's scale
     * (default 65536), halved on a step whose update overflows (that step's update is skipped),
     * doubled after loss_scale_interval (default 2000) good steps in a row. */
    double loss_scale_init;
    int64_t loss_scale_interval;
    sc_dtype save_precision; /* the trained model's weights: SC_F32 (or 0), or SC_BF16 (sc_model_save_as) */
    bool calibrate;         /* with use_plan: measure the node times and the link on the CPU backend
                               (train/calibrate.h) before the one plan is built, and plan with them */
    sc_device device;       /* default CPU (the CLI's default is AUTO); resolved by sc_trainer_create.
                             * CPU: the store-everything executor, or with use_plan the plan on the
                             * CPU backend. CUDA: always the plan (strategy none when no budget is
                             * given), its budget capped at the GPU's free memory. */
    bool tf32;              /* CUDA: let cuBLAS/cuDNN use TF32 for f32 products (no effect on the CPU) */
    sc_rollback rollback;   /* default AUTO */
    sc_prefetch prefetch;   /* default AUTO */
    /* CPU backend with a plan: a modelled host<->device link of this many bytes/s each way
     * (backend_cpu_set_link_bandwidth); 0 = memcpy speed. The plan's cost model should use the
     * same figure (plan.link_bandwidth). */
    double link_bandwidth;
} sc_trainer_config;

/* Defaults: batch 1, lr 0.01, constant schedule, seed 0, sc_train_options_default, u16 tokens, CPU. */
void sc_trainer_config_default(sc_trainer_config *c);

typedef struct sc_trainer sc_trainer;

typedef struct {
    int64_t step;           /* 1-based index of the step just done */
    float loss;
    float lr;               /* the learning rate this step used */
    int64_t samples;        /* samples in the batch (sequences for language models) */
    int64_t tokens;         /* label positions in the batch (samples * seq for language models) */
    double exec_time;       /* seconds spent executing the graph or the plan (data and checks excluded) */
    int64_t peak_bytes;     /* with a plan: the arena high-water mark measured during the step; else -1 */
    int64_t bytes_h2d, bytes_d2h; /* with a plan: bytes the step moved each way (feeds and outputs included) */
    int64_t bytes_staged;   /* of those, bytes the device backend copied through its staging buffers
                               (host memory it could not pin: the feeds and the outputs are pinned or
                               small); 0 on the CPU */
    int64_t host_bytes;     /* with a plan: host memory of the session's copies of moved values (plan->host_bytes
                               with inline host updates); else 0 */
    double loss_scale;      /* fp16: the scale this step's backward ran with; 0 without loss scaling */
    bool skipped;           /* fp16: the gradients overflowed and the update was skipped (the weights
                               and optimizer state are those before the step) */
} sc_step_result;

sc_status sc_trainer_create(const sc_trainer_config *cfg, sc_trainer **out);
void sc_trainer_free(sc_trainer *t);

/* Runs the next step. On a non-finite loss or update the status names the step and the first
 * tensor where the value appeared, and the weights are restored to their state before the step
 * (with rollback; without it the session is spent: later steps and saves fail, naming the step). */
sc_status sc_trainer_step(sc_trainer *t, sc_step_result *r);
/* Whether this session keeps the rollback copy (cfg.rollback resolved at setup). */
bool sc_trainer_rollback(const sc_trainer *t);
/* Without a configured thread count on the CPU: steps run so far with all *threads cores ([0]) and
 * with fewer threads ([1]: one, or one fewer), chosen by measured step time
 * (backends/thread_governor.h); false when the count is fixed. */
bool sc_trainer_thread_runs(const sc_trainer *t, int *threads, int64_t runs[2]);
bool sc_trainer_done(const sc_trainer *t);
/* Steps so far whose batch was drawn ahead during the step before (cfg.prefetch); 0 when off. */
int64_t sc_trainer_prefetch_hits(const sc_trainer *t);
int64_t sc_trainer_step_count(const sc_trainer *t);  /* steps done so far (including resumed ones) */
int64_t sc_trainer_total_steps(const sc_trainer *t);
int64_t sc_trainer_dataset_size(const sc_trainer *t); /* samples per epoch */
const char *sc_trainer_data_desc(const sc_trainer *t); /* "synthetic ...", "x.npy + y.npy", ... */
float sc_trainer_lr_at(const sc_trainer_config *cfg, int64_t total_steps, int64_t step);

/* The device the steps run on (cfg.device resolved: CPU or CUDA). */
sc_device sc_trainer_device(const sc_trainer *t);

/* What the plan's node times came from: "calibrated node times", "this machine's cost profile (...)"
 * (train/cost_profile.h) or "the built-in constants". */
const char *sc_trainer_cost_source(const sc_trainer *t);

/* With use_plan: the plan every step runs (NULL otherwise). */
const sc_plan *sc_trainer_plan(const sc_trainer *t);
/* The options that plan was made with: on the GPU the budget may be its free memory (plan_build's
 * capacity) rather than the configured one; calibrated node times and link are included. */
const sc_plan_options *sc_trainer_plan_options(const sc_trainer *t);
/* Replaces the plan by one built under o (bench); with use_plan only. When o cannot be met the status
 * is the planner's (naming the smallest feasible budget) and the current plan stays. */
sc_status sc_trainer_replan(sc_trainer *t, const sc_plan_options *o);

/* The model (for its graph and parameters) and the training graph's bookkeeping. On a device whose
 * copy of the state runs ahead of the host (a GPU without rollback: the state is not copied back
 * every step), the graph's host data holds the weights after sc_trainer_sync_host; saving and
 * checkpoints sync by themselves. */
sc_model *sc_trainer_model(sc_trainer *t);
sc_status sc_trainer_sync_host(sc_trainer *t);
const sc_training_graph *sc_trainer_graph(const sc_trainer *t);

/* Checkpoint: DIR/state.bin (created with DIR when missing), written to DIR/state.bin.tmp, synced
 * and renamed, so a crash at any time leaves the previous state loadable. Format: train_state.c. */
sc_status sc_trainer_save_state(sc_trainer *t, const char *dir);
sc_status sc_trainer_load_state(sc_trainer *t, const char *dir);

/* Writes the model with its current weights (sc_model_save: temp file, then rename). */
sc_status sc_trainer_save_model(sc_trainer *t, const char *path);

/* After a step with cfg.train.keep_grads: every trainable parameter's gradient of that step as
 * DIR/<name>.npy (f32, the parameter's shape; characters of the name outside [A-Za-z0-9._-] become
 * '_', as `scorch-run run --output-dir` does) and the loss as DIR/loss.npy (a 0-d f32 array). */
sc_status sc_trainer_dump_grads(sc_trainer *t, const char *dir);

#endif
