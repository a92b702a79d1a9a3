/* Shared finite-difference gradient checker for every gradient rule (docs/STYLE.md "tests in
 * layers"; ggml's test-backend-ops is the model).
 *
 * A check builds a small graph in double precision: the inputs (random values from a seeded RNG, or
 * data the test gives), the op (grad_check_op) or any small graph (grad_check_graph), and the loss
 *     L = sum_k ReduceSum(Y_k * R_k)
 * over the float outputs Y_k with fixed random R_k, so every output element gets a distinct weight.
 * autodiff_build_backward appends the backward graph, sc_forward_cpu runs it, and each checked
 * input's gradient is compared with central differences
 *     dL/dx_i ~ (L(x + h e_i) - L(x - h e_i)) / (2h),   h = 1e-6 * max(1, |x_i|)
 * element by element: |analytic - numeric| <= atol + rtol * |numeric| (defaults rtol 1e-3,
 * atol 1e-5). A failure prints the check's label, the input and its worst element.
 *
 * Usage (one line per case):
 *     gc_input in[2] = {gc_rand(SC_F64, 2, DIMS(2, 3)), gc_rand(SC_F64, 1, DIMS(3))};
 *     failures += !grad_check_op("add_bcast", SC_OP_ADD, NULL, 2, in, 1, NULL);
 * Integer or shape-carrying inputs (axes, indices, shapes) are constants: gc_const_i64(...).
 * Random values avoid kinks in practice (uniform in [lo, hi]); pick ranges that keep an op smooth
 * (e.g. Log, Sqrt: positive; Pow base: positive).
 */
#ifndef SC_GRAD_CHECK_H
#define SC_GRAD_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "graph/graph.h"

#define GC_DIMS(...) ((const int64_t[]){__VA_ARGS__})

typedef struct {
    sc_desc desc;
    const void *data; /* NULL: random uniform in [lo, hi] (float dtypes only); else copied (desc's dtype) */
    bool is_const;    /* a CONST graph value (shape-carrying inputs must be); else a graph INPUT */
    bool check;       /* compare its gradient with finite differences (f64 inputs only) */
    bool omitted;     /* an omitted optional input (-1) */
    double lo, hi;    /* random range; [-1, 1] when both are 0 */
} gc_input;

/* Random f64/f32 input, gradient checked. */
gc_input gc_rand(sc_dtype dtype, int rank, const int64_t *dims);
/* Random input in [lo, hi], gradient checked. */
gc_input gc_rand_range(sc_dtype dtype, int rank, const int64_t *dims, double lo, double hi);
/* Input with the given data (copied), gradient checked (ties, kinks chosen on purpose). */
gc_input gc_data(sc_dtype dtype, int rank, const int64_t *dims, const void *data);
/* Constant input with the given data (copied), not checked. */
gc_input gc_const(sc_dtype dtype, int rank, const int64_t *dims, const void *data);
/* 1-D i64 constant (axes, starts, shapes, ...). */
gc_input gc_const_i64(int n, const int64_t *vals);
/* Scalar (rank 0) constant of a float dtype. */
gc_input gc_const_scalar(sc_dtype dtype, double v);
/* An omitted optional input. */
gc_input gc_omitted(void);
/* Marks an input as not checked (returns a copy). */
gc_input gc_nocheck(gc_input in);

typedef struct {
    double rtol, atol;   /* 0: defaults 1e-3, 1e-5 */
    uint64_t seed;       /* 0: a fixed default */
    const bool *use_out; /* which outputs feed the loss; NULL: every float output */
    bool verbose;        /* print a line for passing checks too */
    /* Mixed precision (graph/pass_precision.c): SC_BF16 or SC_F16 runs the graph on its float inputs
     * cast to this type and casts its float outputs back to f64, as the precision pass does for a
     * `low` op; the analytic gradients (through the casts, so computed by the low-precision kernels)
     * are compared with the finite differences of the same graph in f64 at the same inputs, which
     * are rounded to the low type first so both see the same point. 0: f64 as usual. */
    sc_dtype low;
    double atol_of_max;  /* adds this times the input's largest |numeric gradient| to atol */
} gc_options;

/* Builds the forward part of a small graph: adds nodes reading in_ids (-1 for omitted inputs),
 * writes the ids of the values the loss reads into out_ids and their number into *n_out (at most
 * GC_MAX_OUT). Use gc_add_node for each node. Return a status on failure. */
#define GC_MAX_OUT 16
typedef sc_status (*gc_build_fn)(sc_graph *g, const int *in_ids, int *out_ids, int *n_out, void *ctx);

/* Adds a node with n_out fresh activation outputs (descs inferred by the op's shape function) and
 * returns the first output id (ids of all outputs in out when not NULL), or -1 with *st set. */
int gc_add_node(sc_graph *g, sc_op op, const sc_attrs *attrs, const int *in, int n_in, int n_out, int *out,
                sc_status *st);

/* Checks the gradients of one op with n_out outputs. Returns true when every checked input passes
 * (prints FAIL lines otherwise). label names the case in messages. */
bool grad_check_op(const char *label, sc_op op, const sc_attrs *attrs, int n_in, const gc_input *in, int n_out,
                   const gc_options *opt);
/* Same for a small graph built by build(ctx). */
bool grad_check_graph(const char *label, int n_in, const gc_input *in, gc_build_fn build, void *ctx,
                      const gc_options *opt);

#endif
