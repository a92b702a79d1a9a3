/* libscorch: train and run ONNX models in C, on the CPU or a GPU, under a device memory budget.
 *
 * The public, installed API: opaque handles, plain C types, nothing else included. Build against
 * the installed library with `pkg-config --cflags --libs scorch`, or `find_package(Scorch)` and
 * the target Scorch::scorch in CMake. examples/train.c is a whole program.
 *
 *   scorch_model    a loaded ONNX model: bind its symbolic dims, run it, save it
 *   scorch_options  training settings as key/value strings (the `scorch-run train` options)
 *   scorch_trainer  a training session: step it, read each step's metrics, save the model
 *
 * Errors: every call that can fail returns a scorch_error *, NULL on success. A non-NULL error
 * owns a one-line message naming the file, node, value or option at fault; free it with
 * scorch_error_free. The library never prints (except through its log level, SCORCH_LOG) and
 * never exits. Handles are not thread-safe: use one from one thread at a time.
 *
 * Versioning: the soname changes with SCORCH_VERSION_MAJOR; within a major version symbols are
 * only added and the structs below only grow at their end.
 */
#ifndef SCORCH_H
#define SCORCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SCORCH_VERSION_MAJOR 0
#define SCORCH_VERSION_MINOR 2
#define SCORCH_VERSION_PATCH 0
#define SCORCH_VERSION "0.2.0"

/* The version of the library linked at run time ("0.2.0"). */
const char *scorch_version(void);

typedef struct scorch_error scorch_error;
const char *scorch_error_message(const scorch_error *e);
void scorch_error_free(scorch_error *e);

/* Element types, numbered as ONNX's TensorProto.DataType. */
typedef enum {
    SCORCH_FLOAT32 = 1,
    SCORCH_UINT8 = 2,
    SCORCH_INT8 = 3,
    SCORCH_UINT16 = 4,
    SCORCH_INT16 = 5,
    SCORCH_INT32 = 6,
    SCORCH_INT64 = 7,
    SCORCH_BOOL = 9,
    SCORCH_FLOAT16 = 10,
    SCORCH_FLOAT64 = 11,
    SCORCH_BFLOAT16 = 16
} scorch_dtype;

#define SCORCH_MAX_RANK 8

/* A dense row-major tensor. Inputs are the caller's; outputs of scorch_model_run are allocated by
 * the library and freed with scorch_tensor_free. */
typedef struct {
    scorch_dtype dtype;
    int rank;
    int64_t dims[SCORCH_MAX_RANK];
    void *data;
} scorch_tensor;

void scorch_tensor_free(scorch_tensor *t); /* frees t->data and sets it to NULL */

/* ---- models ---- */

typedef struct scorch_model scorch_model;

scorch_error *scorch_model_load(const char *path, scorch_model **out);
void scorch_model_free(scorch_model *m);
/* Binds a symbolic input dim before the model is first used: "batch" (dim 0 of every input), "seq"
 * (dim 1 of token-id inputs) or a dim's own name. */
scorch_error *scorch_model_set_dim(scorch_model *m, const char *name, int64_t value);
/* Inputs and outputs, in the graph's order, with their static shapes (data NULL). The first of
 * these calls, or scorch_model_run, fixes the dims: an unbound symbolic dim is an error then. */
scorch_error *scorch_model_input_count(scorch_model *m, int *n);
scorch_error *scorch_model_input(scorch_model *m, int i, const char **name, scorch_tensor *shape);
scorch_error *scorch_model_output_count(scorch_model *m, int *n);
scorch_error *scorch_model_output(scorch_model *m, int i, const char **name, scorch_tensor *shape);
/* Runs the model on the CPU, as `scorch-run run` does (the graph prepared for inference once, with
 * parameter folding and fusions): inputs[i] must match input i's dtype and shape; outputs[0..n)
 * receive the outputs (their data allocated here). */
scorch_error *scorch_model_run(scorch_model *m, const scorch_tensor *inputs, scorch_tensor *outputs);
/* Writes the model (original fields kept, weights as they are now) to path: a temp file, then a rename. */
scorch_error *scorch_model_save(scorch_model *m, const char *path);

/* ---- training ---- */

typedef struct scorch_options scorch_options;

scorch_error *scorch_options_new(scorch_options **out);
void scorch_options_free(scorch_options *o);
/* Sets one option; the key names and values are those of `scorch-run train --help` without the
 * dashes: batch, seq, steps, epochs, lr, optimizer (sgd|adamw), momentum, weight-decay, nesterov
 * (1|0), schedule (constant|cosine), warmup, clip, seed, freeze (a regex), loss (auto|ce|mse),
 * data ([NAME=]x.npy: one model input) and labels (.npy files), tokens (a token file), token-dtype
 * (uint16|int32), threads, device (cpu|cuda|auto), tf32 (1|0), precision (fp32|bf16|fp16), loss-scale and
 * loss-scale-interval (fp16's dynamic loss scaling), save-precision (fp32|bf16: the trained
 * model's weights), memory (a size: 512MiB, 2GiB, bytes), strategy (none|sqrt|dc|optimal|auto),
 * offload (none|weights|activations|both|auto), optimizer-on (host|device|auto), link-bandwidth
 * (a rate in bytes/s: 25GB; the CPU backend then models such a link), rollback (auto|on|off),
 * prefetch (auto|on|off: the next batch drawn while a step runs; auto: on for a GPU),
 * param-block (a size, or off: large tables read by whole rows train as row blocks of that size),
 * resume (a state folder). An unknown key or a bad value is an error naming both. Defaults: those
 * of `scorch-run train`, except device (cpu). */
scorch_error *scorch_options_set(scorch_options *o, const char *key, const char *value);

typedef struct scorch_trainer scorch_trainer;

/* What one step did. */
typedef struct {
    int64_t step;          /* 1-based index of the step just done */
    double loss;
    double lr;             /* the learning rate it used */
    double seconds;        /* time of the step's graph execution */
    int64_t tokens;        /* label positions of the batch (samples for non-language models) */
    int64_t peak_bytes;    /* with a memory budget: device bytes used at the peak; else -1 */
    int64_t bytes_h2d, bytes_d2h; /* with a budget: bytes moved to and from the device */
    int64_t host_bytes;    /* with a budget: host memory of the plan's copies of moved values */
} scorch_metrics;

/* Loads the model, builds its training graph and, with a budget, its plan; o may be NULL (defaults). */
scorch_error *scorch_trainer_create(const char *model_path, const scorch_options *o, scorch_trainer **out);
void scorch_trainer_free(scorch_trainer *t);
/* Runs the next step; m may be NULL. A NaN or Inf names the step and the first tensor where it
 * appeared. */
scorch_error *scorch_trainer_step(scorch_trainer *t, scorch_metrics *m);
int scorch_trainer_done(const scorch_trainer *t); /* 1 when every step of the run has been done */
int64_t scorch_trainer_total_steps(const scorch_trainer *t);
/* Writes the trained model as ONNX (external data past 1.5 GiB of weights). */
scorch_error *scorch_trainer_save_model(scorch_trainer *t, const char *path);
/* A checkpoint in folder dir (created when missing); the "resume" option continues from it. */
scorch_error *scorch_trainer_save_state(scorch_trainer *t, const char *dir);

#ifdef __cplusplus
}
#endif

#endif
