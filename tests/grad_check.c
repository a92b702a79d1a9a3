/* Finite-difference gradient checker (contract in tests/grad_check.h).
 *
 * The graph holds forward, loss and backward; one sc_forward_cpu run gives the loss and every
 * analytic gradient, and each perturbed run reads the loss only (the backward part is recomputed
 * but small graphs make that cheap). Checked inputs are graph INPUT values, so a perturbation is a
 * write into the buffer we feed.
 */
#include "tests/grad_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "core/half.h"
#include "tests/ref_executor.h"
#include "graph/shape.h"

/* splitmix64: a tiny seeded generator, so every check sees the same numbers on every machine. */
static uint64_t gc_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double gc_uniform(uint64_t *s, double lo, double hi) {
    return lo + (hi - lo) * ((double)(gc_next(s) >> 11) / 9007199254740992.0);
}

gc_input gc_rand(sc_dtype dtype, int rank, const int64_t *dims) { return gc_rand_range(dtype, rank, dims, -1, 1); }

gc_input gc_rand_range(sc_dtype dtype, int rank, const int64_t *dims, double lo, double hi) {
    gc_input in;
    memset(&in, 0, sizeof in);
    in.desc = sc_desc_make(dtype, rank, dims);
    in.check = true;
    in.lo = lo;
    in.hi = hi;
    return in;
}

gc_input gc_const(sc_dtype dtype, int rank, const int64_t *dims, const void *data) {
    gc_input in;
    memset(&in, 0, sizeof in);
    in.desc = sc_desc_make(dtype, rank, dims);
    in.data = data;
    in.is_const = true;
    return in;
}

gc_input gc_data(sc_dtype dtype, int rank, const int64_t *dims, const void *data) {
    gc_input in = gc_rand(dtype, rank, dims);
    in.data = data;
    return in;
}

gc_input gc_const_i64(int n, const int64_t *vals) {
    int64_t d = n;
    return gc_const(SC_I64, 1, &d, vals);
}

gc_input gc_const_scalar(sc_dtype dtype, double v) {
    /* The value must outlive the call: keep a small ring of scalars. */
    static double store_f64[64];
    static float store_f32[64];
    static int next;
    int k = next++ % 64;
    store_f64[k] = v;
    store_f32[k] = (float)v;
    return gc_const(dtype, 0, NULL, dtype == SC_F32 ? (const void *)&store_f32[k] : (const void *)&store_f64[k]);
}

gc_input gc_omitted(void) {
    gc_input in;
    memset(&in, 0, sizeof in);
    in.omitted = true;
    return in;
}

gc_input gc_nocheck(gc_input in) {
    in.check = false;
    return in;
}

int gc_add_node(sc_graph *g, sc_op op, const sc_attrs *attrs, const int *in, int n_in, int n_out, int *out,
                sc_status *st) {
    int ids[GC_MAX_OUT];
    if (n_out > GC_MAX_OUT) {
        *st = sc_errorf("gc_add_node: too many outputs");
        return -1;
    }
    const char *node_name = graph_unique_name(g, sc_op_name(op));
    for (int k = 0; k < n_out; k++) {
        char base[128];
        snprintf(base, sizeof base, "%s_out%d", node_name, k);
        ids[k] = graph_add_value(g, graph_unique_name(g, base), SC_VALUE_ACT, NULL, st);
        if (ids[k] < 0) return -1;
    }
    int nid = graph_add_node(g, op, node_name, in, n_in, ids, n_out, st);
    if (nid < 0) return -1;
    if (attrs && (*st = graph_node_set_attrs(g, &g->nodes[nid], attrs))) return -1;
    if (!sc_shape_fns[op]) {
        *st = sc_errorf("gc_add_node: op %s has no shape function", sc_op_name(op));
        return -1;
    }
    *st = sc_shape_fns[op](g, &g->nodes[nid]);
    if (*st) return -1;
    for (int k = 0; k < n_out; k++)
        if (out) out[k] = ids[k];
    return ids[0];
}

static void fill_random(void *dst, const sc_desc *d, uint64_t *rng, double lo, double hi) {
    if (lo == 0 && hi == 0) lo = -1, hi = 1;
    int64_t n = sc_desc_numel(d);
    for (int64_t i = 0; i < n; i++) {
        double v = gc_uniform(rng, lo, hi);
        if (d->dtype == SC_F64) ((double *)dst)[i] = v;
        else if (d->dtype == SC_F32) ((float *)dst)[i] = (float)v;
    }
}

/* Rounds f64 values to the nearest of a 16-bit type (exactly representable there afterwards). */
static void round_to(double *x, int64_t n, sc_dtype low) {
    for (int64_t i = 0; i < n; i++)
        x[i] = low == SC_F16 ? sc_f16_to_f32(sc_f64_to_f16(x[i])) : sc_bf16_to_f32(sc_f32_to_bf16((float)x[i]));
}

typedef struct {
    sc_graph g;
    int n_in;
    int *ids;          /* per harness input: value id or -1 */
    void **feed;       /* per graph input: buffer we own */
    sc_tensor *feeds;  /* per graph input */
    int *feed_of;      /* per harness input: index into feeds or -1 */
    int loss;
    int n_wrt;
    int *wrt_input;    /* per wrt: harness input index */
    int *grads;        /* per wrt: gradient value id or -1 */
    int *grad_out;     /* per wrt: index in g.outputs or -1 */
    uint64_t rng;
} gc_ctx;

static sc_status gc_add_inputs(gc_ctx *c, const gc_input *in, sc_dtype low) {
    sc_graph *g = &c->g;
    int n_feed = 0;
    for (int i = 0; i < c->n_in; i++) n_feed += !in[i].omitted && !in[i].is_const;
    g->inputs = sc_arena_alloc_array(&g->arena, (size_t)(n_feed ? n_feed : 1), sizeof(int));
    c->feed = calloc((size_t)n_feed + 1, sizeof(void *));
    c->feeds = calloc((size_t)n_feed + 1, sizeof(sc_tensor));
    if (!g->inputs || !c->feed || !c->feeds) return sc_errorf("out of memory");
    for (int i = 0; i < c->n_in; i++) {
        c->ids[i] = -1;
        c->feed_of[i] = -1;
        if (in[i].omitted) continue;
        char name[32];
        snprintf(name, sizeof name, "in%d", i);
        sc_status st = SC_OK;
        int v = graph_add_value(g, name, in[i].is_const ? SC_VALUE_CONST : SC_VALUE_INPUT, &in[i].desc, &st);
        if (v < 0) return st;
        c->ids[i] = v;
        int64_t bytes = sc_desc_bytes(&in[i].desc);
        void *buf;
        if (in[i].is_const) {
            SC_TRY(graph_alloc_data(g, v));
            buf = g->values[v].data;
        } else {
            buf = calloc(1, (size_t)(bytes > 0 ? bytes : 1));
            if (!buf) return sc_errorf("out of memory");
            int f = g->n_inputs++;
            g->inputs[f] = v;
            c->feed[f] = buf;
            c->feeds[f].desc = in[i].desc;
            c->feeds[f].data = buf;
            c->feed_of[i] = f;
        }
        if (bytes == 0)
            continue; /* empty tensors (e.g. empty axes) carry no data */
        if (in[i].data)
            memcpy(buf, in[i].data, (size_t)bytes);
        else if (sc_dtype_is_float(in[i].desc.dtype))
            fill_random(buf, &in[i].desc, &c->rng, in[i].lo, in[i].hi);
        else
            return sc_errorf("input %d: non-float inputs need data", i);
        if (low && in[i].desc.dtype == SC_F64) round_to(buf, sc_desc_numel(&in[i].desc), low);
    }
    return SC_OK;
}

/* L = sum_k ReduceSum(Y_k * R_k) over the float outputs; R_k are constants uniform in [0.5, 1.5]
 * with random signs, so no output's gradient is near zero by accident. */
static sc_status gc_add_loss(gc_ctx *c, const int *outs, int n_out, const bool *use_out) {
    sc_graph *g = &c->g;
    sc_status st = SC_OK;
    int loss = -1;
    for (int k = 0; k < n_out; k++) {
        if (outs[k] < 0 || (use_out && !use_out[k])) continue;
        sc_desc d = g->values[outs[k]].desc;
        if (!sc_dtype_is_float(d.dtype)) continue;
        char name[32];
        snprintf(name, sizeof name, "R%d", k);
        int r = graph_add_value(g, name, SC_VALUE_CONST, &d, &st);
        if (r < 0) return st;
        SC_TRY(graph_alloc_data(g, r));
        int64_t n = sc_desc_numel(&d);
        for (int64_t i = 0; i < n; i++) {
            double v = gc_uniform(&c->rng, 0.5, 1.5) * (gc_next(&c->rng) & 1 ? -1 : 1);
            if (d.dtype == SC_F64) ((double *)g->values[r].data)[i] = v;
            else ((float *)g->values[r].data)[i] = (float)v;
        }
        int mul = gc_add_node(g, SC_OP_MUL, NULL, (int[]){outs[k], r}, 2, 1, NULL, &st);
        if (mul < 0) return st;
        sc_attrs ra;
        memset(&ra, 0, sizeof ra);
        ra.reduce.keepdims = false;
        int sum = gc_add_node(g, SC_OP_REDUCE_SUM, &ra, &mul, 1, 1, NULL, &st);
        if (sum < 0) return st;
        if (loss >= 0) {
            loss = gc_add_node(g, SC_OP_ADD, NULL, (int[]){loss, sum}, 2, 1, NULL, &st);
            if (loss < 0) return st;
        } else {
            loss = sum;
        }
    }
    if (loss < 0) return sc_errorf("no float output to build a loss from");
    c->loss = loss;
    return SC_OK;
}

static sc_status gc_set_outputs(gc_ctx *c) {
    sc_graph *g = &c->g;
    g->outputs = sc_arena_alloc_array(&g->arena, (size_t)c->n_wrt + 1, sizeof(int));
    if (!g->outputs) return sc_errorf("out of memory");
    g->n_outputs = 0;
    g->outputs[g->n_outputs++] = c->loss;
    g->values[c->loss].is_output = true;
    for (int w = 0; w < c->n_wrt; w++) {
        c->grad_out[w] = -1;
        if (c->grads[w] < 0) continue;
        /* Two inputs may share one gradient value (Add's dA and dB are both dY): list it once. */
        for (int o = 0; o < g->n_outputs; o++)
            if (g->outputs[o] == c->grads[w]) c->grad_out[w] = o;
        if (c->grad_out[w] >= 0) continue;
        c->grad_out[w] = g->n_outputs;
        g->outputs[g->n_outputs++] = c->grads[w];
        g->values[c->grads[w]].is_output = true;
    }
    return SC_OK;
}

static sc_status gc_run(gc_ctx *c, sc_tensor *outs) {
    memset(outs, 0, sizeof(sc_tensor) * (size_t)c->g.n_outputs);
    return sc_forward_cpu(&c->g, c->feeds, outs);
}

static void gc_free_outs(gc_ctx *c, sc_tensor *outs) {
    for (int i = 0; i < c->g.n_outputs; i++) sc_tensor_free_data(&outs[i]);
}

static sc_status gc_loss_at(gc_ctx *c, sc_tensor *outs, double *loss) {
    SC_TRY(gc_run(c, outs));
    const sc_tensor *l = &outs[0];
    *loss = l->desc.dtype == SC_F64 ? *(const double *)l->data : *(const float *)l->data;
    gc_free_outs(c, outs);
    return SC_OK;
}

/* Central differences of the loss in input w's elements, into num[n]. */
static sc_status gc_numeric(gc_ctx *c, int w, double *num) {
    int f = c->feed_of[c->wrt_input[w]];
    double *x = c->feed[f];
    int64_t n = sc_desc_numel(&c->feeds[f].desc);
    sc_tensor *outs = calloc((size_t)c->g.n_outputs, sizeof(sc_tensor));
    if (!outs) return sc_errorf("out of memory");
    sc_status st = SC_OK;
    for (int64_t e = 0; e < n && !st; e++) {
        double x0 = x[e], h = 1e-6 * (fabs(x0) > 1 ? fabs(x0) : 1), lp = 0, lm = 0;
        x[e] = x0 + h;
        st = gc_loss_at(c, outs, &lp);
        x[e] = x0 - h;
        if (!st) st = gc_loss_at(c, outs, &lm);
        x[e] = x0;
        num[e] = (lp - lm) / (2 * h);
    }
    free(outs);
    return st;
}

/* Compares one input's analytic gradient (NULL: no gradient, i.e. zero) with central differences
 * taken on fd (the same graph, or its f64 twin for a low-precision check). */
static sc_status gc_compare(gc_ctx *fd, const char *label, int w, const double *analytic, const gc_options *opt,
                            bool *ok) {
    int i = fd->wrt_input[w];
    int f = fd->feed_of[i];
    int64_t n = sc_desc_numel(&fd->feeds[f].desc);
    double *num = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!num) return sc_errorf("out of memory");
    sc_status st = gc_numeric(fd, w, num);
    if (st) {
        free(num);
        return st;
    }
    double rtol = opt && opt->rtol > 0 ? opt->rtol : 1e-3, atol = opt && opt->atol > 0 ? opt->atol : 1e-5;
    double max_num = 0;
    for (int64_t e = 0; e < n; e++) max_num = fabs(num[e]) > max_num ? fabs(num[e]) : max_num;
    if (opt) atol += opt->atol_of_max * max_num;
    double worst = -1, worst_a = 0, worst_n = 0;
    int64_t worst_i = -1, bad = 0;
    for (int64_t e = 0; e < n; e++) {
        double ana = analytic ? analytic[e] : 0;
        double err = fabs(ana - num[e]), tol = atol + rtol * fabs(num[e]);
        if (err > tol) bad++;
        if (err / tol > worst) {
            worst = err / tol;
            worst_a = ana;
            worst_n = num[e];
            worst_i = e;
        }
    }
    free(num);
    if (bad) {
        char d[128];
        printf("FAIL %s: d/d(input %d) %s: %lld of %lld elements off; worst element %lld: analytic %.10g, "
               "numeric %.10g (err/tol %.3g)%s\n",
               label, i, sc_desc_str(&fd->feeds[f].desc, d, sizeof d), (long long)bad, (long long)n,
               (long long)worst_i, worst_a, worst_n, worst, analytic ? "" : " (no gradient was built)");
        *ok = false;
    } else if (opt && opt->verbose) {
        printf("ok   %s: d/d(input %d), worst err/tol %.3g\n", label, i, worst);
    }
    return SC_OK;
}

/* Inputs, the graph, its loss and backward, and the outputs (loss, then each checked gradient). */
static sc_status gc_prepare(gc_ctx *c, const gc_input *in, gc_build_fn build, void *ctx, const gc_options *opt) {
    SC_TRY(gc_add_inputs(c, in, opt ? opt->low : 0));
    int outs_ids[GC_MAX_OUT], n_out = 0;
    SC_TRY(build(&c->g, c->ids, outs_ids, &n_out, ctx));
    SC_TRY(gc_add_loss(c, outs_ids, n_out, opt ? opt->use_out : NULL));
    int *wrt = calloc((size_t)c->n_in + 1, sizeof(int));
    if (!wrt) return sc_errorf("out of memory");
    c->n_wrt = 0;
    for (int i = 0; i < c->n_in; i++) {
        if (!in[i].check || in[i].omitted || in[i].is_const) continue;
        if (in[i].desc.dtype != SC_F64) {
            free(wrt);
            return sc_errorf("input %d: only f64 inputs can be checked", i);
        }
        c->wrt_input[c->n_wrt] = i;
        wrt[c->n_wrt++] = c->ids[i];
    }
    sc_status st = autodiff_build_backward(&c->g, c->loss, wrt, c->n_wrt, c->grads);
    free(wrt);
    SC_TRY(st);
    return gc_set_outputs(c);
}

/* Analytic gradients from c, finite differences from fd (c itself, or its f64 twin). */
static sc_status gc_check(gc_ctx *c, gc_ctx *fd, const char *label, const gc_input *in, const gc_options *opt,
                          bool *ok) {
    sc_tensor *outs = calloc((size_t)c->g.n_outputs, sizeof(sc_tensor));
    if (!outs) return sc_errorf("out of memory");
    sc_status st = gc_run(c, outs);
    for (int w = 0; w < c->n_wrt && !st; w++) {
        const double *ana = c->grad_out[w] >= 0 ? outs[c->grad_out[w]].data : NULL;
        /* Copy: the perturbed runs below reuse the executor. */
        int64_t n = sc_desc_numel(&in[c->wrt_input[w]].desc);
        double *copy = ana ? malloc(sizeof(double) * (size_t)(n ? n : 1)) : NULL;
        if (ana && copy) memcpy(copy, ana, sizeof(double) * (size_t)n);
        if (ana && !copy) st = sc_errorf("out of memory");
        if (!st) st = gc_compare(fd, label, w, copy, opt, ok);
        free(copy);
    }
    gc_free_outs(c, outs);
    free(outs);
    return st;
}

/* The low-precision form of a build (gc_options.low): float inputs cast to low, float outputs cast
 * back to f64. */
typedef struct {
    gc_build_fn build;
    void *ctx;
    int n_in;
    sc_dtype low;
} gc_low_ctx;

static int gc_cast(sc_graph *g, int v, sc_dtype to, sc_status *st) {
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.cast.to = to;
    return gc_add_node(g, SC_OP_CAST, &a, &v, 1, 1, NULL, st);
}

static sc_status gc_build_low(sc_graph *g, const int *in_ids, int *out_ids, int *n_out, void *ctx) {
    const gc_low_ctx *l = ctx;
    int *low_in = malloc(sizeof(int) * ((size_t)l->n_in + 1));
    if (!low_in) return sc_errorf("out of memory");
    sc_status st = SC_OK;
    for (int i = 0; i < l->n_in && !st; i++) {
        low_in[i] = in_ids[i];
        if (in_ids[i] >= 0 && sc_dtype_is_float(g->values[in_ids[i]].desc.dtype)) low_in[i] = gc_cast(g, in_ids[i], l->low, &st);
    }
    if (!st) st = l->build(g, low_in, out_ids, n_out, l->ctx);
    for (int k = 0; k < *n_out && !st; k++)
        if (g->values[out_ids[k]].desc.dtype == l->low) out_ids[k] = gc_cast(g, out_ids[k], SC_F64, &st);
    free(low_in);
    return st;
}

static sc_status gc_ctx_init(gc_ctx *c, int n_in, const gc_options *opt) {
    memset(c, 0, sizeof *c);
    graph_init(&c->g);
    c->n_in = n_in;
    c->rng = opt && opt->seed ? opt->seed : 0x5eedULL;
    c->ids = calloc((size_t)n_in + 1, sizeof(int));
    c->feed_of = calloc((size_t)n_in + 1, sizeof(int));
    c->wrt_input = calloc((size_t)n_in + 1, sizeof(int));
    c->grads = calloc((size_t)n_in + 1, sizeof(int));
    c->grad_out = calloc((size_t)n_in + 1, sizeof(int));
    return (!c->ids || !c->feed_of || !c->wrt_input || !c->grads || !c->grad_out) ? sc_errorf("out of memory") : SC_OK;
}

static void gc_ctx_free(gc_ctx *c) {
    for (int f = 0; c->feed && f < c->g.n_inputs; f++) free(c->feed[f]);
    free(c->feed);
    free(c->feeds);
    free(c->ids);
    free(c->feed_of);
    free(c->wrt_input);
    free(c->grads);
    free(c->grad_out);
    graph_free(&c->g);
}

bool grad_check_graph(const char *label, int n_in, const gc_input *in, gc_build_fn build, void *ctx,
                      const gc_options *opt) {
    bool low = opt && opt->low;
    gc_ctx c, ref;
    gc_low_ctx l = {build, ctx, n_in, low ? opt->low : 0};
    sc_status st = gc_ctx_init(&c, n_in, opt);
    sc_status st2 = gc_ctx_init(&ref, n_in, opt);
    if (!st) st = st2;
    else sc_status_free(st2);
    /* Both contexts draw the same inputs and loss weights from the same seed. */
    if (!st) st = gc_prepare(&c, in, low ? gc_build_low : build, low ? (void *)&l : ctx, opt);
    if (!st && low) st = gc_prepare(&ref, in, build, ctx, opt);
    bool ok = true;
    if (!st) st = gc_check(&c, low ? &ref : &c, label, in, opt, &ok);
    if (st) {
        printf("FAIL %s: %s\n", label, sc_status_message(st));
        sc_status_free(st);
        ok = false;
    }
    gc_ctx_free(&c);
    gc_ctx_free(&ref);
    return ok;
}

typedef struct {
    sc_op op;
    const sc_attrs *attrs;
    int n_in, n_out;
} gc_op_ctx;

static sc_status gc_build_op(sc_graph *g, const int *in_ids, int *out_ids, int *n_out, void *ctx) {
    const gc_op_ctx *o = ctx;
    sc_status st = SC_OK;
    if (gc_add_node(g, o->op, o->attrs, in_ids, o->n_in, o->n_out, out_ids, &st) < 0) return st;
    *n_out = o->n_out;
    return SC_OK;
}

bool grad_check_op(const char *label, sc_op op, const sc_attrs *attrs, int n_in, const gc_input *in, int n_out,
                   const gc_options *opt) {
    gc_op_ctx o = {op, attrs, n_in, n_out};
    return grad_check_graph(label, n_in, in, gc_build_op, &o, opt);
}
