/* conformance_runner: runs one ONNX backend node test (onnx/backend/test/data/node/test_xxx) on the
 * CPU executor and compares with the reference outputs stored next to the model.
 *
 *   conformance_runner CASE_DIR [--rtol R] [--atol A]
 *
 * For every test_data_set_<k>/ the model is loaded afresh (each data set may bind different dims),
 * symbolic input dims are bound from the input_<i>.pb shapes, graph_prepare runs, and the outputs
 * of sc_forward_cpu are compared with output_<i>.pb: dtype and shape exactly; floating point with
 * numpy.testing.assert_allclose's rule |got - exp| <= atol + rtol * |exp| at onnx's backend-test
 * defaults (onnx/backend/test/loader: rtol 1e-3, atol 1e-7), NaN equal to NaN, infinities equal only
 * to themselves; everything else bit-exact.
 *
 * Scorch needs static shapes (docs/DESIGN.md): inputs that determine an output's shape (Reshape's shape,
 * Slice's starts, Resize's scales, ... and whatever those are computed from) must be constants known
 * at load. Many node tests feed them as graph inputs, with the value in input_<i>.pb; the runner
 * binds those as constants before graph_prepare, as a user binds a symbolic dim at load. All other
 * inputs are fed at run time.
 *
 * Exit 0 when every data set matches; 1 on a mismatch or any error, with one line on stderr naming
 * the data set, the output, the worst element, got and expected.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/cpu/cpu.h"
#include "tests/ref_executor.h"
#include "graph/passes.h"
#include "import/onnx.h"

#define MAX_IO 64

typedef struct {
    double rtol, atol;
} tolerance;

typedef struct {
    sc_tensor t[MAX_IO];
    char *name[MAX_IO];
    int n;
} pb_set;

static int path_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

static void pb_set_free(pb_set *s) {
    for (int i = 0; i < s->n; i++) {
        free(s->t[i].data);
        free(s->name[i]);
    }
    s->n = 0;
}

/* Reads <dir>/<prefix>_0.pb, _1.pb, ... until the first missing index. */
static sc_status pb_set_load(const char *dir, const char *prefix, pb_set *s) {
    char path[4096];
    memset(s, 0, sizeof *s);
    for (int i = 0;; i++) {
        snprintf(path, sizeof path, "%s/%s_%d.pb", dir, prefix, i);
        if (!path_exists(path)) break;
        if (i >= MAX_IO) return sc_errorf("%s: more than %d %s files", dir, MAX_IO, prefix);
        SC_TRY(sc_load_tensor_pb(path, &s->t[i], &s->name[i]));
        s->n = i + 1;
    }
    return SC_OK;
}

/* numpy has no bfloat16, so onnx's test data stores bf16 tensors as uint16 with the same bits
 * (e.g. test_cast_BFLOAT16_to_FLOAT's input_0.pb). Where the model declares bf16, read them so. */
static void bf16_quirk_fix(sc_tensor *t, sc_dtype declared) {
    if (t->desc.dtype == SC_U16 && declared == SC_BF16) t->desc.dtype = SC_BF16;
}

/* IEEE half and bfloat16 to float, for comparing f16/bf16 outputs as numbers. */
static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    float v;
    if (exp == 0) v = ldexpf((float)man, -24);
    else if (exp == 31) v = man ? NAN : INFINITY;
    else v = ldexpf((float)(man | 0x400), (int)exp - 25);
    return sign ? -v : v;
}

static float bf16_to_float(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static double float_at(const sc_tensor *t, int64_t i) {
    switch (t->desc.dtype) {
    case SC_F32: return ((const float *)t->data)[i];
    case SC_F64: return ((const double *)t->data)[i];
    case SC_F16: return half_to_float(((const uint16_t *)t->data)[i]);
    case SC_BF16: return bf16_to_float(((const uint16_t *)t->data)[i]);
    default: return NAN;
    }
}

/* Violation of assert_allclose's bound for one element: <= 0 means within tolerance. */
static double float_excess(double got, double exp, const tolerance *tol) {
    if (isnan(exp) || isnan(got)) return (isnan(exp) && isnan(got)) ? 0.0 : INFINITY;
    if (isinf(exp) || isinf(got)) return got == exp ? 0.0 : INFINITY;
    return fabs(got - exp) - (tol->atol + tol->rtol * fabs(exp));
}

static void value_str(const sc_tensor *t, int64_t i, char *buf, size_t size) {
    const void *p = (const char *)t->data + (size_t)i * sc_dtype_size(t->desc.dtype);
    switch (t->desc.dtype) {
    case SC_F32: case SC_F64: case SC_F16: case SC_BF16:
        snprintf(buf, size, "%.9g", float_at(t, i)); break;
    case SC_I8: snprintf(buf, size, "%d", *(const int8_t *)p); break;
    case SC_U8: snprintf(buf, size, "%u", *(const uint8_t *)p); break;
    case SC_BOOL: snprintf(buf, size, "%s", *(const uint8_t *)p ? "true" : "false"); break;
    case SC_I16: snprintf(buf, size, "%d", *(const int16_t *)p); break;
    case SC_U16: snprintf(buf, size, "%u", *(const uint16_t *)p); break;
    case SC_I32: snprintf(buf, size, "%d", *(const int32_t *)p); break;
    case SC_U32: snprintf(buf, size, "%u", *(const uint32_t *)p); break;
    case SC_I64: snprintf(buf, size, "%lld", (long long)*(const int64_t *)p); break;
    case SC_U64: snprintf(buf, size, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    default: snprintf(buf, size, "?"); break;
    }
}

/* Compares one output; on mismatch returns a status naming the worst element. */
static sc_status output_compare(const char *what, const sc_tensor *got, const sc_tensor *exp,
                                const tolerance *tol) {
    char gd[256], ed[256];
    sc_desc_str(&got->desc, gd, sizeof gd);
    sc_desc_str(&exp->desc, ed, sizeof ed);
    if (got->desc.dtype != exp->desc.dtype || !sc_desc_same_shape(&got->desc, &exp->desc))
        return sc_errorf("%s: got %s, expected %s", what, gd, ed);
    int64_t n = sc_desc_numel(&exp->desc);
    if (n > 0 && !got->data) return sc_errorf("%s: output %s has no data", what, gd);
    size_t es = sc_dtype_size(exp->desc.dtype);
    if (es == 0) return sc_errorf("%s: cannot compare dtype %s", what, sc_dtype_name(exp->desc.dtype));
    int64_t worst = -1, bad = 0;
    double worst_excess = 0.0;
    bool is_float = exp->desc.dtype == SC_F32 || exp->desc.dtype == SC_F64 ||
                    exp->desc.dtype == SC_F16 || exp->desc.dtype == SC_BF16;
    for (int64_t i = 0; i < n; i++) {
        double excess;
        if (is_float) {
            excess = float_excess(float_at(got, i), float_at(exp, i), tol);
        } else {
            const char *a = (const char *)got->data + (size_t)i * es;
            const char *b = (const char *)exp->data + (size_t)i * es;
            excess = memcmp(a, b, es) ? 1.0 : 0.0;
        }
        if (excess > 0) {
            bad++;
            if (worst < 0 || excess > worst_excess) worst = i, worst_excess = excess;
        }
    }
    if (worst < 0) return SC_OK;
    char gv[64], ev[64];
    value_str(got, worst, gv, sizeof gv);
    value_str(exp, worst, ev, sizeof ev);
    return sc_errorf("%s %s: %lld of %lld elements differ; worst at flat index %lld: got %s, expected %s "
                     "(rtol %g, atol %g)",
                     what, ed, (long long)bad, (long long)n, (long long)worst, gv, ev, tol->rtol, tol->atol);
}

/* Binds every symbolic dim of the graph inputs to the shape of the tensor fed to it. */
static sc_status dims_bind_from(sc_graph *g, const pb_set *in, const int *feed, sc_dim_binding *b,
                                int *n_b) {
    *n_b = 0;
    for (int i = 0; i < g->n_inputs; i++) {
        const sc_value *v = &g->values[g->inputs[i]];
        const sc_tensor *t = &in->t[feed[i]];
        if (v->desc.rank != t->desc.rank)
            return sc_errorf("input '%s': the model declares rank %d, the data set has rank %d", v->name,
                             v->desc.rank, t->desc.rank);
        for (int d = 0; d < v->desc.rank; d++) {
            if (v->desc.dims[d] >= 0 || !value_dim_name(v, d)) continue;
            if (*n_b >= MAX_IO * SC_MAX_RANK) return sc_errorf("too many symbolic dims");
            b[(*n_b)++] = (sc_dim_binding){value_dim_name(v, d), t->desc.dims[d]};
        }
    }
    return SC_OK;
}

/* Inputs that determine output shapes, by the ONNX operator spec (opset 21). */
typedef struct {
    int n;
    int slot[4];
} shape_slot_list;

static const shape_slot_list shape_slots[SC_OP_COUNT] = {
    [SC_OP_RESHAPE] = {1, {1}},
    [SC_OP_EXPAND] = {1, {1}},
    [SC_OP_SQUEEZE] = {1, {1}},
    [SC_OP_UNSQUEEZE] = {1, {1}},
    [SC_OP_SPLIT] = {1, {1}},
    [SC_OP_SLICE] = {4, {1, 2, 3, 4}},
    [SC_OP_PAD] = {2, {1, 3}},
    [SC_OP_REDUCE_MEAN] = {1, {1}},
    [SC_OP_REDUCE_SUM] = {1, {1}},
    [SC_OP_CONSTANT_OF_SHAPE] = {1, {0}},
    [SC_OP_RANGE] = {3, {0, 1, 2}},
    [SC_OP_RESIZE] = {3, {1, 2, 3}},
};

/* Marks in shape_dep[] every value a shape slot's value is computed from, walking producers up
 * to graph inputs (CenterCropPad's expanded function computes Pad's pads from its 'shape' input).
 * The walk stops at Shape, whose output depends on its input's dims only, not its data. */
static sc_status shape_deps_mark(const sc_graph *g, bool *shape_dep) {
    int *producer = malloc(sizeof(int) * (size_t)(g->n_values > 0 ? g->n_values : 1));
    int *stack = malloc(sizeof(int) * (size_t)(g->n_values > 0 ? g->n_values : 1));
    if (!producer || !stack) {
        free(producer);
        free(stack);
        return sc_errorf("out of memory");
    }
    for (int v = 0; v < g->n_values; v++) producer[v] = -1, shape_dep[v] = false;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_out; k++)
            if (g->nodes[i].out[k] >= 0) producer[g->nodes[i].out[k]] = i;
    int top = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const sc_node *n = &g->nodes[i];
        const shape_slot_list *sl = &shape_slots[n->op];
        for (int k = 0; k < sl->n; k++) {
            int v = sl->slot[k] < n->n_in ? n->in[sl->slot[k]] : -1;
            if (v >= 0 && !shape_dep[v]) shape_dep[v] = true, stack[top++] = v;
        }
    }
    while (top > 0) {
        int v = stack[--top];
        if (producer[v] < 0) continue;
        const sc_node *p = &g->nodes[producer[v]];
        if (p->op == SC_OP_SHAPE) continue;
        for (int k = 0; k < p->n_in; k++) {
            int u = p->in[k];
            if (u >= 0 && !shape_dep[u]) shape_dep[u] = true, stack[top++] = u;
        }
    }
    free(producer);
    free(stack);
    return SC_OK;
}

static sc_status input_freeze(sc_graph *g, int id, const sc_tensor *t) {
    sc_value *v = &g->values[id];
    if (v->desc.dtype != t->desc.dtype)
        return sc_errorf("input '%s': the model declares %s, the data set has %s", v->name,
                         sc_dtype_name(v->desc.dtype), sc_dtype_name(t->desc.dtype));
    v->kind = SC_VALUE_CONST;
    v->desc = t->desc;
    v->dim_names = NULL;
    SC_TRY(graph_alloc_data(g, id));
    int64_t bytes = sc_desc_bytes(&t->desc);
    if (bytes > 0) memcpy(g->values[id].data, t->data, (size_t)bytes);
    return SC_OK;
}

/* Turns graph inputs that shape slots depend on into constants holding the data set's values. */
static sc_status shape_inputs_freeze(sc_graph *g, const pb_set *in, const int *feed) {
    bool *shape_dep = malloc(sizeof(bool) * (size_t)(g->n_values > 0 ? g->n_values : 1));
    if (!shape_dep) return sc_errorf("out of memory");
    sc_status st = shape_deps_mark(g, shape_dep);
    int kept = 0;
    for (int i = 0; i < g->n_inputs && !st; i++) {
        int id = g->inputs[i];
        if (shape_dep[id]) st = input_freeze(g, id, &in->t[feed[i]]);
        else g->inputs[kept++] = id;
    }
    free(shape_dep);
    if (!st) g->n_inputs = kept;
    return st;
}

/* Maps graph input i to the data set's tensor feeding it: by the TensorProto's name when it has one,
 * else by position among the model's inputs (names_at_load holds the order before any pass ran). */
static sc_status feed_map(const sc_graph *g, const pb_set *in, char **names_at_load, int n_at_load,
                          int *feed) {
    for (int i = 0; i < g->n_inputs; i++) {
        const char *name = g->values[g->inputs[i]].name;
        feed[i] = -1;
        for (int k = 0; k < in->n && feed[i] < 0; k++)
            if (in->name[k] && in->name[k][0] && strcmp(in->name[k], name) == 0) feed[i] = k;
        for (int k = 0; k < n_at_load && k < in->n && feed[i] < 0; k++)
            if ((!in->name[k] || !in->name[k][0]) && strcmp(names_at_load[k], name) == 0) feed[i] = k;
        if (feed[i] < 0) return sc_errorf("graph input '%s' has no input_<i>.pb", name);
    }
    return SC_OK;
}

static sc_status data_set_run(const char *case_dir, const char *set_dir, const tolerance *tol) {
    char model_path[4096];
    snprintf(model_path, sizeof model_path, "%s/model.onnx", case_dir);
    sc_model *m = NULL;
    pb_set in = {0}, ref = {0};
    sc_tensor outs[MAX_IO];
    char *in_names[MAX_IO] = {0}, *out_names[MAX_IO] = {0};
    int n_in_names = 0, n_out_names = 0, n_outs = 0;
    int feed[MAX_IO];
    sc_dim_binding binds[MAX_IO * SC_MAX_RANK];
    int n_binds = 0;
    memset(outs, 0, sizeof outs);

    sc_status st = sc_model_load(model_path, &m);
    if (st) goto done;
    sc_graph *g = &m->graph;
    if (g->n_inputs > MAX_IO || g->n_outputs > MAX_IO) {
        st = sc_errorf("more than %d graph inputs or outputs", MAX_IO);
        goto done;
    }
    for (int i = 0; i < g->n_inputs; i++) in_names[n_in_names++] = strdup(g->values[g->inputs[i]].name);
    for (int i = 0; i < g->n_outputs; i++) out_names[n_out_names++] = strdup(g->values[g->outputs[i]].name);
    if ((st = pb_set_load(set_dir, "input", &in))) goto done;
    if ((st = pb_set_load(set_dir, "output", &ref))) goto done;
    if (ref.n != n_out_names) {
        st = sc_errorf("the model has %d outputs, the data set %d", n_out_names, ref.n);
        goto done;
    }
    if ((st = feed_map(g, &in, in_names, n_in_names, feed))) goto done;
    if ((st = shape_inputs_freeze(g, &in, feed))) goto done;
    if ((st = feed_map(g, &in, in_names, n_in_names, feed))) goto done;
    if ((st = dims_bind_from(g, &in, feed, binds, &n_binds))) goto done;
    sc_bind_options opt = {.batch = 0, .seq = 0, .dims = binds, .n_dims = n_binds, .eval = cpu_evaluator()};
    if ((st = graph_prepare(g, &opt))) goto done;

    /* graph_prepare may drop inputs no output depends on: map again against the prepared graph. */
    sc_tensor feeds[MAX_IO];
    if ((st = feed_map(g, &in, in_names, n_in_names, feed))) goto done;
    for (int i = 0; i < g->n_inputs; i++) {
        feeds[i] = in.t[feed[i]];
        bf16_quirk_fix(&feeds[i], g->values[g->inputs[i]].desc.dtype);
    }
    if (g->n_outputs != n_out_names) {
        st = sc_errorf("graph_prepare changed the number of outputs from %d to %d", n_out_names, g->n_outputs);
        goto done;
    }
    if ((st = sc_forward_cpu(g, feeds, outs))) goto done;
    n_outs = g->n_outputs;
    for (int i = 0; i < n_outs && !st; i++) {
        const char *name = g->values[g->outputs[i]].name;
        int k = i;
        for (int j = 0; j < ref.n; j++)
            if (ref.name[j] && strcmp(ref.name[j], name) == 0) k = j;
        char what[512];
        snprintf(what, sizeof what, "output %d '%s'", i, name);
        bf16_quirk_fix(&ref.t[k], outs[i].desc.dtype);
        st = output_compare(what, &outs[i], &ref.t[k], tol);
    }

done:
    for (int i = 0; i < n_outs; i++) sc_tensor_free_data(&outs[i]);
    for (int i = 0; i < n_in_names; i++) free(in_names[i]);
    for (int i = 0; i < n_out_names; i++) free(out_names[i]);
    pb_set_free(&in);
    pb_set_free(&ref);
    if (m) sc_model_free(m);
    return st;
}

int main(int argc, char **argv) {
    tolerance tol = {1e-3, 1e-7};
    const char *case_dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rtol") == 0 && i + 1 < argc) tol.rtol = atof(argv[++i]);
        else if (strcmp(argv[i], "--atol") == 0 && i + 1 < argc) tol.atol = atof(argv[++i]);
        else if (!case_dir && argv[i][0] != '-') case_dir = argv[i];
        else {
            fprintf(stderr, "usage: %s CASE_DIR [--rtol R] [--atol A]\n", argv[0]);
            return 2;
        }
    }
    if (!case_dir) {
        fprintf(stderr, "usage: %s CASE_DIR [--rtol R] [--atol A]\n", argv[0]);
        return 2;
    }
    int n_sets = 0, failed = 0;
    for (int k = 0;; k++) {
        char set_dir[4096];
        snprintf(set_dir, sizeof set_dir, "%s/test_data_set_%d", case_dir, k);
        if (!path_exists(set_dir)) break;
        n_sets++;
        sc_status st = data_set_run(case_dir, set_dir, &tol);
        if (st) {
            fprintf(stderr, "FAIL %s test_data_set_%d: %s\n", case_dir, k, sc_status_message(st));
            sc_status_free(st);
            failed++;
        }
    }
    if (n_sets == 0) {
        fprintf(stderr, "FAIL %s: no test_data_set_* folder\n", case_dir);
        return 1;
    }
    if (failed) return 1;
    printf("ok %s (%d data set%s)\n", case_dir, n_sets, n_sets == 1 ? "" : "s");
    return 0;
}
