/* `scorch-run run MODEL.onnx`: one forward pass on the CPU or the GPU, through the plan executor with
 * the store-everything plan (backends/infer.h), as training runs.
 *
 * Inputs come from --input NAME=FILE.npy (dtype and shape must equal the prepared graph input's) or
 * are drawn with --seed: float inputs normal(0, 1); integer inputs uniform in [0, V) where V is dim 0
 * of the table of the first Gather that indexes with the input (token ids into an embedding), else
 * [0, 10); bool inputs 0/1; integer masks and positions (graph_input_role: attention_mask,
 * position_ids) all ones and 0..T-1, as `train` gives them. Outputs are summarised (shape, mean, std, min, max) and, with
 * --output-dir, saved as DIR/<name>.npy (characters other than [A-Za-z0-9._-] become '_').
 * --repeat N times N more forward passes after the first (the warm-up) and prints median and min.
 * --device cpu|cuda|auto (default cpu): auto is the GPU when this build has the CUDA backend and a
 * device is present. Parameters are copied to the device arena once, before the first pass. */
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/clock.h"
#include "backends/profile.h"
#include "core/npy.h"
#include "backends/infer.h"
#include "tools/cmd.h"
#include "tools/gen_common.h"
#include "tools/model_load.h"
#include "tools/plan_report.h"


/* Token ids for a random input: the embedding rows it indexes, or 10 without a Gather. */
static int64_t vocab_or_ten(const sc_graph *g, int v) {
    int64_t rows = graph_gather_rows(g, v);
    return rows ? rows : 10;
}

/* A mask gets all ones (attend everywhere) and positions 0..T-1 along the last dim, as in `train`. */
static sc_status input_role_fill(const sc_value *v, sc_input_role role, sc_tensor *t) {
    int64_t n = sc_desc_numel(&v->desc), last = v->desc.dims[v->desc.rank - 1];
    if (v->desc.dtype != SC_I64 && v->desc.dtype != SC_I32)
        return sc_errorf("input '%s': a %s mask or position input is not supported; give --input %s=FILE.npy", v->name,
                         sc_dtype_name(v->desc.dtype), v->name);
    for (int64_t i = 0; i < n; i++) {
        int64_t x = role == SC_INPUT_MASK ? 1 : i % last;
        if (v->desc.dtype == SC_I64) ((int64_t *)t->data)[i] = x;
        else ((int32_t *)t->data)[i] = (int32_t)x;
    }
    return SC_OK;
}

static sc_status input_random(const sc_graph *g, int value_id, gen_rng *r, sc_tensor *t) {
    const sc_value *v = &g->values[value_id];
    t->desc = v->desc;
    int64_t n = sc_desc_numel(&v->desc), bytes = sc_desc_bytes(&v->desc);
    if (n < 0 || bytes < 0) return sc_errorf("input '%s' has no static shape after binding", v->name);
    t->data = malloc(bytes ? (size_t)bytes : 1);
    if (!t->data) return sc_errorf("out of memory for input '%s' (%lld bytes)", v->name, (long long)bytes);
    sc_input_role role = graph_input_role(v);
    if (role != SC_INPUT_DATA) return input_role_fill(v, role, t);
    int64_t hi = vocab_or_ten(g, value_id);
    switch (v->desc.dtype) {
    case SC_F32:
        for (int64_t i = 0; i < n; i++) ((float *)t->data)[i] = (float)gen_rng_normal(r);
        break;
    case SC_F64:
        for (int64_t i = 0; i < n; i++) ((double *)t->data)[i] = gen_rng_normal(r);
        break;
    case SC_I64:
        for (int64_t i = 0; i < n; i++) ((int64_t *)t->data)[i] = (int64_t)(gen_rng_next(r) % (uint64_t)hi);
        break;
    case SC_I32:
        for (int64_t i = 0; i < n; i++) ((int32_t *)t->data)[i] = (int32_t)(gen_rng_next(r) % (uint64_t)hi);
        break;
    case SC_BOOL:
        for (int64_t i = 0; i < n; i++) ((uint8_t *)t->data)[i] = (uint8_t)(gen_rng_next(r) >> 63);
        break;
    default:
        return sc_errorf("input '%s': random %s values are not supported; give --input %s=FILE.npy", v->name,
                         sc_dtype_name(v->desc.dtype), v->name);
    }
    return SC_OK;
}

static sc_status input_from_file(const sc_graph *g, int value_id, const char *file, sc_tensor *t) {
    const sc_value *v = &g->values[value_id];
    SC_TRY(sc_npy_read(file, t));
    if (t->desc.dtype != v->desc.dtype || !sc_desc_same_shape(&t->desc, &v->desc)) {
        char want[160], have[160];
        sc_status st = sc_errorf("%s: input '%s' expects %s but the file holds %s", file, v->name,
                                 sc_desc_str(&v->desc, want, sizeof want), sc_desc_str(&t->desc, have, sizeof have));
        free(t->data);
        t->data = NULL;
        return st;
    }
    return SC_OK;
}

static sc_status inputs_make(const sc_graph *g, const arg_opt *in_opt, uint64_t seed, sc_tensor *inputs) {
    /* Every --input must name a graph input. */
    for (int k = 0; k < in_opt->n_list; k++) {
        const char *eq = strchr(in_opt->list[k], '=');
        if (!eq || eq == in_opt->list[k] || !eq[1])
            return sc_errorf("--input '%s': expected NAME=FILE.npy", in_opt->list[k]);
        int found = 0;
        for (int i = 0; i < g->n_inputs; i++)
            if (strlen(g->values[g->inputs[i]].name) == (size_t)(eq - in_opt->list[k]) &&
                !strncmp(g->values[g->inputs[i]].name, in_opt->list[k], (size_t)(eq - in_opt->list[k])))
                found = 1;
        if (!found) return sc_errorf("--input '%s': the model has no input of that name", in_opt->list[k]);
    }
    gen_rng r;
    gen_rng_seed(&r, seed);
    for (int i = 0; i < g->n_inputs; i++) {
        const char *name = g->values[g->inputs[i]].name, *file = NULL;
        for (int k = 0; k < in_opt->n_list; k++) {
            const char *eq = strchr(in_opt->list[k], '=');
            if (strlen(name) == (size_t)(eq - in_opt->list[k]) && !strncmp(name, in_opt->list[k], strlen(name)))
                file = eq + 1;
        }
        SC_TRY(file ? input_from_file(g, g->inputs[i], file, &inputs[i]) : input_random(g, g->inputs[i], &r, &inputs[i]));
    }
    return SC_OK;
}

static double tensor_at(const sc_tensor *t, int64_t i) {
    switch (t->desc.dtype) {
    case SC_F32: return ((const float *)t->data)[i];
    case SC_F64: return ((const double *)t->data)[i];
    case SC_I64: return (double)((const int64_t *)t->data)[i];
    case SC_I32: return ((const int32_t *)t->data)[i];
    case SC_U8:
    case SC_BOOL: return ((const uint8_t *)t->data)[i];
    case SC_I8: return ((const int8_t *)t->data)[i];
    default: return NAN;
    }
}

static void output_summary(const char *name, const sc_tensor *t) {
    char shape[160];
    int64_t n = sc_desc_numel(&t->desc);
    double sum = 0, sq = 0, lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        double x = tensor_at(t, i);
        sum += x;
        sq += x * x;
        if (x < lo) lo = x;
        if (x > hi) hi = x;
    }
    double mean = n ? sum / (double)n : NAN, var = n ? sq / (double)n - mean * mean : NAN;
    printf("%s %s mean %.6g std %.6g min %.6g max %.6g\n", name, sc_desc_str(&t->desc, shape, sizeof shape), mean,
           sqrt(var > 0 ? var : 0), lo, hi);
}

static sc_status output_save(const char *dir, const char *name, const sc_tensor *t) {
    size_t n = strlen(dir) + strlen(name) + 8;
    char *path = malloc(n);
    if (!path) return sc_errorf("out of memory");
    int k = snprintf(path, n, "%s/", dir);
    for (const char *c = name; *c; c++) {
        int ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' ||
                 *c == '_' || *c == '-';
        path[k++] = ok ? *c : '_';
    }
    if (!name[0] || name[0] == '.') path[k++] = '_'; /* never "", ".", ".." */
    snprintf(path + k, n - (size_t)k, ".npy");
    sc_status st = sc_npy_write(path, t);
    free(path);
    return st;
}

static int dbl_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static sc_status forward_timed(sc_infer_session *s, sc_graph *g, const sc_tensor *inputs, int64_t repeat, bool profile) {
    double *ms = malloc(sizeof *ms * (size_t)repeat);
    sc_tensor *outs = calloc((size_t)g->n_outputs + 1, sizeof *outs);
    sc_status st = ms && outs ? SC_OK : sc_errorf("out of memory");
    if (profile) {
        sc_profile_reset();
        sc_profile_enable(true);
    }
    for (int64_t r = 0; !st && r < repeat; r++) {
        double t0 = 1e3 * sc_clock_seconds();
        st = infer_session_run(s, inputs, outs);
        ms[r] = 1e3 * sc_clock_seconds() - t0;
        for (int i = 0; !st && i < g->n_outputs; i++) sc_tensor_free_data(&outs[i]);
    }
    if (!st) {
        qsort(ms, (size_t)repeat, sizeof *ms, dbl_cmp);
        double med = repeat % 2 ? ms[repeat / 2] : 0.5 * (ms[repeat / 2 - 1] + ms[repeat / 2]);
        int64_t runs[2];
        printf("latency median %.3f ms min %.3f ms over %lld runs (%d threads", med, ms[0], (long long)repeat,
               omp_get_max_threads());
        if (infer_session_thread_runs(s, runs))
            printf("; %lld of %lld passes chose fewer threads, which measured faster", (long long)runs[1],
                   (long long)(runs[0] + runs[1]));
        printf(")\n");
        if (profile) sc_profile_report(stdout, (int)repeat);
    }
    sc_profile_enable(false);
    free(ms);
    free(outs);
    return st;
}

static sc_status run_model(sc_graph *g, sc_device device, arg_spec *spec) {
    arg_opt *dir = args_get(spec, "output-dir"), *seed = args_get(spec, "seed"), *repeat = args_get(spec, "repeat");
    sc_tensor *inputs = calloc((size_t)g->n_inputs + 1, sizeof *inputs);
    sc_tensor *outs = calloc((size_t)g->n_outputs + 1, sizeof *outs);
    sc_status st = inputs && outs ? SC_OK : sc_errorf("out of memory");
    sc_infer_session *s = NULL;
    /* Without --threads, passes pick the thread count that runs faster now (backends/thread_governor.h). */
    sc_backend_config bc = {.device = device, .adapt_threads = !args_get(spec, "threads")->set};
    if (!st) st = inputs_make(g, args_get(spec, "input"), (uint64_t)seed->i, inputs);
    if (!st) st = infer_session_create(g, &bc, &s);
    if (!st) st = infer_session_run(s, inputs, outs);
    if (!st && dir->set && mkdir(dir->s, 0777) != 0 && errno != EEXIST)
        st = sc_errorf("%s: cannot create output folder: %s", dir->s, strerror(errno));
    for (int i = 0; !st && i < g->n_outputs; i++) {
        const char *name = g->values[g->outputs[i]].name;
        output_summary(name, &outs[i]);
        if (dir->set) st = output_save(dir->s, name, &outs[i]);
    }
    if (!st && repeat->set && repeat->i > 0) st = forward_timed(s, g, inputs, repeat->i, args_get(spec, "profile")->set);
    infer_session_free(s);
    for (int i = 0; outs && i < g->n_outputs; i++) sc_tensor_free_data(&outs[i]);
    for (int i = 0; inputs && i < g->n_inputs; i++) free(inputs[i].data);
    free(inputs);
    free(outs);
    return st;
}

int cmd_run(int argc, char **argv) {
    arg_opt opts[] = {
        MODEL_LOAD_OPTS,
        {.name = "input", .kind = ARG_LIST, .metavar = "NAME=FILE.npy", .help = "feed an input from a .npy file (repeatable)"},
        {.name = "output-dir", .kind = ARG_STR, .metavar = "DIR", .help = "save every output as DIR/<name>.npy"},
        {.name = "seed", .kind = ARG_INT, .metavar = "N", .help = "seed for random inputs (default 0)"},
        {.name = "threads", .kind = ARG_INT, .metavar = "N", .help = "OpenMP threads, fixed (default: OMP_NUM_THREADS or all cores, or fewer on passes where that measured faster: one fewer or 1)"},
        {.name = "repeat", .kind = ARG_INT, .metavar = "N", .help = "time N more forward passes; print median/min ms"},
        {.name = "profile", .kind = ARG_FLAG, .help = "with --repeat: time per op over the timed passes"},
        {.name = "device", .kind = ARG_STR, .metavar = "cpu|cuda|auto", .help = "where the pass runs (default cpu; auto: the GPU when present)"},
    };
    arg_spec spec = ARGS_MODEL_SPEC(
        "scorch-run run MODEL.onnx [options]",
        "Runs the forward pass on the CPU or the GPU. Inputs not given are random (floats normal(0,1),\n"
        "token ids uniform below the embedding's rows). Prints one line per output.",
        opts);
    int exit_code;
    if (args_done(&spec, argc, argv, &exit_code)) return exit_code;
    arg_opt *threads = args_get(&spec, "threads"), *repeat = args_get(&spec, "repeat");
    if ((threads->set && threads->i < 1) || (repeat->set && repeat->i < 0)) {
        args_free(&spec);
        args_error("--threads must be at least 1 and --repeat at least 0");
        return 2;
    }
    arg_opt *device = args_get(&spec, "device");
    int dev = device->set ? device_parse(device->s) : SC_DEVICE_CPU;
    if (dev < 0) {
        args_error("--device must be cpu, cuda or auto");
        args_free(&spec);
        return 2;
    }
    if (threads->set) omp_set_num_threads((int)threads->i);
    sc_model *m;
    int usage = 0;
    sc_device resolved;
    sc_status st = sc_device_resolve((sc_device)dev, &resolved);
    if (!st) st = model_load_prepared_for(&spec, true, &m, &usage);
    if (!st) {
        st = run_model(&m->graph, resolved, &spec);
        sc_model_free(m);
    }
    args_free(&spec);
    int rc = cmd_report(st);
    return usage && rc ? 2 : rc;
}
