/* A small ONNX model builder over the protobuf-c bindings, used by the generators (tools/gen_*.c).
 *
 * Contract:
 * - Every proto object and string lives in the builder's own bump allocator, freed at once by
 *   onnxb_free; pointer lists grow by doubling, so building is O(nodes + initializers) in time and
 *   memory and never looks a name up (a 250,000-block ResNet costs the same per block as ResNet-18).
 * - Errors are sticky: the first failure (out of memory, a write error) is kept and every later call
 *   is a no-op; onnxb_save returns it. Generators therefore need not check each call.
 * - Initializer data is handed over (onnxb_param takes ownership of a malloc'd buffer). While the
 *   inline total stays under `inline_limit` it is kept for raw_data; past it (or always, with
 *   force_external) every tensor of at least `external_threshold` bytes is streamed to
 *   "<output>.data" beside the model (TensorProto.external_data: location = bare file name, offset
 *   aligned to 4096 as onnx.proto recommends, length) and its buffer freed, so multi-GB weights are
 *   never held twice. Peak memory is about twice the inline bytes (weights + the packed message,
 *   at most ~3 GiB) plus one tensor. The data file is written to a temp name and renamed into place by onnxb_save
 *   just before the model file itself (sc_write_file_atomic).
 * - Models are ir_version 8, default-domain opset 17, producer "scorch".
 */
#ifndef SC_ONNX_BUILDER_H
#define SC_ONNX_BUILDER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"
#include "onnx/onnx.pb-c.h"

#define ONNXB_IR_VERSION 8
#define ONNXB_OPSET 17

typedef struct {
    int64_t external_threshold; /* bytes; tensors at least this big may go external (default 1024) */
    int64_t inline_limit;       /* inline bytes allowed before switching to external (default 1.5 GiB) */
    bool force_external;        /* externalise from the first tensor (tests the external path) */
} onnxb_options;

typedef struct onnxb onnxb;

/* out_path is where onnxb_save will write; it fixes the data file's name. NULL on out of memory. */
onnxb *onnxb_new(const char *out_path, const char *graph_name, const onnxb_options *opt);
void onnxb_free(onnxb *b);
/* The sticky error so far (owned by the builder), NULL if none. */
sc_status onnxb_error(const onnxb *b);
/* Records an error (the first one wins; the builder takes ownership of st). */
void onnxb_fail(onnxb *b, sc_status st);

/* A string formatted into the builder's memory (value and node names). Never NULL: on failure the
 * error is recorded and "" returned. */
const char *onnxb_name(onnxb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Graph inputs/outputs. dims[i] < 0 takes its symbolic name from dim_params[i]. */
void onnxb_input(onnxb *b, const char *name, sc_dtype t, int rank, const int64_t *dims, const char *const *dim_params);
void onnxb_output(onnxb *b, const char *name, sc_dtype t, int rank, const int64_t *dims, const char *const *dim_params);

/* A node; name may be NULL (then "<op>_<k>"). Input "" marks an omitted optional input. Returns the
 * node for attribute calls (NULL after an error; attribute calls accept NULL). */
Onnx__NodeProto *onnxb_node(onnxb *b, const char *op, const char *name, const char *const *in, int n_in,
                            const char *const *out, int n_out);
void onnxb_attr_int(onnxb *b, Onnx__NodeProto *n, const char *name, int64_t v);
void onnxb_attr_ints(onnxb *b, Onnx__NodeProto *n, const char *name, const int64_t *v, int count);
void onnxb_attr_float(onnxb *b, Onnx__NodeProto *n, const char *name, float v);
void onnxb_attr_floats(onnxb *b, Onnx__NodeProto *n, const char *name, const float *v, int count);
void onnxb_attr_string(onnxb *b, Onnx__NodeProto *n, const char *name, const char *v);
/* Tensor attribute (Constant's `value`); data is copied. */
void onnxb_attr_tensor(onnxb *b, Onnx__NodeProto *n, const char *name, sc_dtype t, int rank, const int64_t *dims,
                       const void *data);

/* A Constant node producing `name` (not trainable, unlike initializers); data copied. Returns name. */
const char *onnxb_const(onnxb *b, const char *name, sc_dtype t, int rank, const int64_t *dims, const void *data);
const char *onnxb_const_i64(onnxb *b, const char *name, int count, const int64_t *v); /* 1-D */
const char *onnxb_const_f32_scalar(onnxb *b, const char *name, float v);             /* rank 0 */

/* An f32 initializer taking ownership of data (malloc'd, numel floats; freed by the builder even on
 * error). Returns name. */
const char *onnxb_param(onnxb *b, const char *name, int rank, const int64_t *dims, float *data);

/* Packs and writes the model (and renames the external data file into place). */
sc_status onnxb_save(onnxb *b);

/* Totals for reporting. */
int64_t onnxb_param_count(const onnxb *b);
int64_t onnxb_node_count(const onnxb *b);
bool onnxb_has_external(const onnxb *b);

#endif
