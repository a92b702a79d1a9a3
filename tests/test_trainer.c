/* Training session tests (train/trainer.h) on a tiny MLP written here as ONNX with protobuf-c:
 *   x [batch, 4] -> Gemm(W1 [8,4], b1, transB) -> BatchNormalization -> Relu -> Gemm(W2 [3,8], b2) -> logits [batch, 3]
 * Checks: resume bit-identity (10 steps == 5 + save + resume + 5, SGD with momentum and AdamW with a
 * cosine schedule), truncated and corrupted state files rejected without touching the weights, a
 * NaN run (lr 1e30) stopped with a message naming the step and a tensor and the weights restored,
 * frozen parameters unchanged, the schedule against values computed independently (Python, HF's
 * get_cosine_schedule_with_warmup formula), and bad labels in a .npy named by file and index.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/arena.h"
#include "core/npy.h"
#include "onnx/onnx.pb-c.h"
#include "train/trainer.h"
#include "tests/check.h"

static char dir[256];

/* ---- the tiny model ---- */

/* Every protobuf struct of the model under construction lives here; freed once it is written. */
static sc_arena model_arena;
#define MODEL_ALLOC(count, size) sc_arena_alloc_array(&model_arena, (count), (size))

static uint64_t rng = 12345;
static float urand(void) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng >> 40) * 0x1.0p-24) * 2.0f - 1.0f;
}

static Onnx__TensorProto *init_f32(const char *name, int rank, const int64_t *dims, float fill, float scale) {
    Onnx__TensorProto *t = MODEL_ALLOC(1, sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = (char *)name;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->n_dims = (size_t)rank;
    t->dims = (int64_t *)dims;
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    t->n_float_data = (size_t)n;
    t->float_data = MODEL_ALLOC((size_t)n, sizeof(float));
    for (int64_t i = 0; i < n; i++) t->float_data[i] = fill + scale * urand();
    return t;
}

static Onnx__ValueInfoProto *value_info(const char *name, int64_t dim1) {
    Onnx__ValueInfoProto *vi = MODEL_ALLOC(1, sizeof *vi);
    Onnx__TypeProto *tp = MODEL_ALLOC(1, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = MODEL_ALLOC(1, sizeof *tt);
    Onnx__TensorShapeProto *sh = MODEL_ALLOC(1, sizeof *sh);
    Onnx__TensorShapeProto__Dimension **d = MODEL_ALLOC(2, sizeof *d);
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sh);
    for (int i = 0; i < 2; i++) {
        d[i] = MODEL_ALLOC(1, sizeof **d);
        onnx__tensor_shape_proto__dimension__init(d[i]);
    }
    d[0]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
    d[0]->dim_param = "batch";
    d[1]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    d[1]->dim_value = dim1;
    sh->n_dim = 2;
    sh->dim = d;
    tt->has_elem_type = 1;
    tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt->shape = sh;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->name = (char *)name;
    vi->type = tp;
    return vi;
}

static Onnx__NodeProto *node(const char *op, const char *name, char **in, int n_in, char **out, bool transb) {
    Onnx__NodeProto *n = MODEL_ALLOC(1, sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = (char *)op;
    n->name = (char *)name;
    n->n_input = (size_t)n_in;
    n->input = in;
    n->n_output = 1;
    n->output = out;
    if (transb) {
        Onnx__AttributeProto *a = MODEL_ALLOC(1, sizeof *a);
        onnx__attribute_proto__init(a);
        a->name = "transB";
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        a->has_i = 1;
        a->i = 1;
        n->n_attribute = 1;
        n->attribute = MODEL_ALLOC(1, sizeof *n->attribute);
        n->attribute[0] = a;
    }
    return n;
}

static void write_model(const char *path) {
    static const int64_t d_w1[2] = {8, 4}, d_8[1] = {8}, d_w2[2] = {3, 8}, d_3[1] = {3};
    Onnx__TensorProto *inits[8] = {
        init_f32("W1", 2, d_w1, 0, 0.5f),  init_f32("b1", 1, d_8, 0, 0.1f),   init_f32("bn.scale", 1, d_8, 1, 0.1f),
        init_f32("bn.bias", 1, d_8, 0, 0.1f), init_f32("bn.mean", 1, d_8, 0, 0), init_f32("bn.var", 1, d_8, 1, 0),
        init_f32("W2", 2, d_w2, 0, 0.5f),  init_f32("b2", 1, d_3, 0, 0.1f)};
    static char *in1[] = {"x", "W1", "b1"}, *out1[] = {"h1"}, *in2[] = {"h1", "bn.scale", "bn.bias", "bn.mean", "bn.var"},
                *out2[] = {"h2"}, *in3[] = {"h2"}, *out3[] = {"h3"}, *in4[] = {"h3", "W2", "b2"}, *out4[] = {"logits"};
    Onnx__NodeProto *nodes[4] = {node("Gemm", "fc1", in1, 3, out1, true), node("BatchNormalization", "bn", in2, 5, out2, false),
                                 node("Relu", "relu", in3, 1, out3, false), node("Gemm", "fc2", in4, 3, out4, true)};
    Onnx__ValueInfoProto *inputs[1] = {value_info("x", 4)}, *outputs[1] = {value_info("logits", 3)};
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    g.name = "tiny_mlp";
    g.n_node = 4;
    g.node = nodes;
    g.n_initializer = 8;
    g.initializer = inits;
    g.n_input = 1;
    g.input = inputs;
    g.n_output = 1;
    g.output = outputs;
    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT, *opsets[1] = {&opset};
    opset.domain = "";
    opset.has_version = 1;
    opset.version = 17;
    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    m.has_ir_version = 1;
    m.ir_version = 8;
    m.n_opset_import = 1;
    m.opset_import = opsets;
    m.graph = &g;
    size_t size = onnx__model_proto__get_packed_size(&m);
    uint8_t *buf = malloc(size);
    onnx__model_proto__pack(&m, buf);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, size, f) != size) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fclose(f);
    free(buf);
    sc_arena_free_all(&model_arena);
}

/* ---- helpers ---- */

static char model_path[300];

static sc_trainer_config base_config(void) {
    sc_trainer_config c;
    sc_trainer_config_default(&c);
    c.model_path = model_path;
    c.batch = 4;
    c.steps = 10;
    c.lr = 0.05f;
    c.train.momentum = 0.9f;
    c.seed = 7;
    return c;
}

static sc_trainer *create(const sc_trainer_config *c) {
    sc_trainer *t = NULL;
    sc_status st = sc_trainer_create(c, &t);
    if (st) {
        fprintf(stderr, "FAIL: sc_trainer_create: %s\n", sc_status_message(st));
        sc_status_free(st);
        exit(1);
    }
    return t;
}

static bool run_steps(sc_trainer *t, int n) {
    for (int i = 0; i < n; i++) {
        sc_status st = sc_trainer_step(t, NULL);
        if (st) {
            fprintf(stderr, "FAIL: step: %s\n", sc_status_message(st));
            sc_status_free(st);
            failures++;
            return false;
        }
    }
    return true;
}

/* Every PARAM and OPT_STATE value's bytes, concatenated with their names, for exact comparison. */
typedef struct {
    size_t size;
    char *bytes;
} blob;

static blob state_blob(sc_trainer *t) {
    const sc_graph *g = &sc_trainer_model(t)->graph;
    blob b = {0, NULL};
    for (int v = 0; v < g->n_values; v++) {
        const sc_value *val = &g->values[v];
        if ((val->kind != SC_VALUE_PARAM && val->kind != SC_VALUE_OPT_STATE && val->kind != SC_VALUE_CONST) || !val->data)
            continue;
        size_t n = strlen(val->name) + 1, bytes = (size_t)sc_desc_bytes(&val->desc);
        b.bytes = realloc(b.bytes, b.size + n + bytes);
        memcpy(b.bytes + b.size, val->name, n);
        memcpy(b.bytes + b.size + n, val->data, bytes);
        b.size += n + bytes;
    }
    return b;
}

static bool blob_eq(blob a, blob b) { return a.size == b.size && !memcmp(a.bytes, b.bytes, a.size); }

static const void *param_data(sc_trainer *t, const char *name) {
    sc_graph *g = &sc_trainer_model(t)->graph;
    int v = graph_find_value(g, name);
    return v >= 0 ? g->values[v].data : NULL;
}

/* ---- tests ---- */

/* rollback: of the resumed session (without its copy the state is checked in a first pass and then
 * read into the live values: the same weights either way). */
static void test_resume(sc_optim_kind optim, sc_lr_schedule sched, sc_rollback rollback) {
    sc_trainer_config c = base_config();
    c.train.optim = optim;
    c.schedule = sched;
    c.warmup = 2;
    if (optim == SC_OPTIM_ADAMW) {
        c.lr = 0.01f;
        c.train.momentum = 0;
        c.train.weight_decay = 0.01f;
    }
    char sdir[300];
    snprintf(sdir, sizeof sdir, "%s/state_%d_%d_%d", dir, (int)optim, (int)sched, (int)rollback);
    sc_trainer *a = create(&c);
    run_steps(a, 10);
    blob ba = state_blob(a);

    sc_trainer *b = create(&c);
    run_steps(b, 5);
    sc_status st = sc_trainer_save_state(b, sdir);
    CHECK(!st, "save: %s", st ? sc_status_message(st) : "");
    sc_trainer_free(b);

    sc_trainer_config cr = c;
    cr.resume_dir = sdir;
    cr.rollback = rollback;
    sc_trainer *r = create(&cr);
    CHECK(sc_trainer_rollback(r) == (rollback != SC_ROLLBACK_OFF), "rollback %s not honoured",
          sc_rollback_name(rollback));
    CHECK(sc_trainer_step_count(r) == 5, "resumed at step %lld, not 5", (long long)sc_trainer_step_count(r));
    run_steps(r, 5);
    CHECK(sc_trainer_done(r), "resumed run not done after 5 more steps");
    blob br = state_blob(r);
    CHECK(blob_eq(ba, br), "optim %d schedule %d: 10 steps differ from 5 + resume + 5", (int)optim, (int)sched);
    /* and training changed the weights at all */
    sc_trainer *fresh = create(&c);
    blob bf = state_blob(fresh);
    CHECK(!blob_eq(ba, bf), "training left every weight unchanged");
    free(ba.bytes);
    free(br.bytes);
    free(bf.bytes);
    sc_trainer_free(fresh);
    sc_trainer_free(a);
    sc_trainer_free(r);
}

/* Through a plan whose arena holds the state (use_plan on the CPU: not in place, as on a GPU),
 * without rollback the host data lags the device copy until something reads it: steps leave the
 * host's W1 as it was; a checkpoint taken then holds the trained state (a run resumed from it ends
 * bit-identical to a rollback run, which syncs every step), and so does the host data after
 * sc_trainer_sync_host, from which training goes on. */
static void test_host_lags_device(void) {
    sc_trainer_config c = base_config();
    c.use_plan = true;
    c.rollback = SC_ROLLBACK_ON;
    sc_trainer *a = create(&c);
    run_steps(a, 6);
    blob ba = state_blob(a);

    c.rollback = SC_ROLLBACK_OFF;
    sc_trainer *b = create(&c);
    size_t w1_bytes = 8 * 4 * sizeof(float);
    float w1[32];
    memcpy(w1, param_data(b, "W1"), w1_bytes);
    run_steps(b, 4);
    CHECK(!memcmp(w1, param_data(b, "W1"), w1_bytes), "without rollback the host copy of W1 was synced every step");
    char sdir[300];
    snprintf(sdir, sizeof sdir, "%s/state_lagging", dir);
    sc_status st = sc_trainer_save_state(b, sdir);
    CHECK(!st, "save while the host lags: %s", st ? sc_status_message(st) : "");
    sc_status_free(st);
    CHECK(memcmp(w1, param_data(b, "W1"), w1_bytes), "saving the state did not bring the host data up to date");
    run_steps(b, 2);
    st = sc_trainer_sync_host(b);
    CHECK(!st, "sync: %s", st ? sc_status_message(st) : "");
    sc_status_free(st);
    blob bb = state_blob(b);
    CHECK(blob_eq(ba, bb), "6 steps without rollback (host synced at steps 4 and 6) differ from 6 with it");

    sc_trainer_config cr = c;
    cr.resume_dir = sdir;
    sc_trainer *r = create(&cr);
    run_steps(r, 2);
    st = sc_trainer_sync_host(r);
    sc_status_free(st);
    blob br = state_blob(r);
    CHECK(blob_eq(ba, br), "4 steps, a checkpoint taken while the host lagged, resume, 2 steps: differ from 6");
    free(ba.bytes);
    free(bb.bytes);
    free(br.bytes);
    sc_trainer_free(a);
    sc_trainer_free(b);
    sc_trainer_free(r);
}

static void copy_truncated(const char *src, const char *dst_dir, long keep, long flip) {
    char dst[700];
    snprintf(dst, sizeof dst, "mkdir -p '%s'", dst_dir);
    if (system(dst) != 0) exit(1);
    FILE *f = fopen(src, "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) exit(1);
    fclose(f);
    if (flip >= 0) buf[flip] ^= 0x10;
    snprintf(dst, sizeof dst, "%s/state.bin", dst_dir);
    f = fopen(dst, "wb");
    fwrite(buf, 1, (size_t)(keep < 0 ? n : keep), f);
    fclose(f);
    free(buf);
}

/* A damaged state loads nothing, with or without the rollback copy (without it a first pass checks
 * the whole file before anything is overwritten). */
static void test_truncated_state(sc_rollback rollback) {
    sc_trainer_config c = base_config();
    c.rollback = rollback;
    char sdir[300], src[400], bad[400];
    snprintf(sdir, sizeof sdir, "%s/state_trunc_%d", dir, (int)rollback);
    sc_trainer *t = create(&c);
    run_steps(t, 3);
    sc_status st = sc_trainer_save_state(t, sdir);
    CHECK(!st, "save failed");
    snprintf(src, sizeof src, "%s/state.bin", sdir);
    FILE *f = fopen(src, "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    sc_trainer *u = create(&c);
    run_steps(u, 1);
    blob before = state_blob(u);
    long cuts[] = {0, 7, 56, n / 2, n - 9, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0] + 2; i++) {
        snprintf(bad, sizeof bad, "%s/bad%zu_%d", dir, i, (int)rollback);
        bool flip = i >= sizeof cuts / sizeof cuts[0];
        copy_truncated(src, bad, flip ? -1 : cuts[i], flip ? (i % 2 ? n / 3 : n - 20) : -1);
        st = sc_trainer_load_state(u, bad);
        CHECK(st, "a state cut to %ld of %ld bytes (or flipped) loaded", flip ? n : cuts[i], n);
        if (st) {
            const char *m = sc_status_message(st);
            CHECK(strstr(m, "truncated") || strstr(m, "checksum") || strstr(m, "magic") || strstr(m, "corrupt"),
                  "unexpected message for a damaged state: %s", m);
            sc_status_free(st);
        }
        blob after = state_blob(u);
        CHECK(blob_eq(before, after), "a failed load changed the weights");
        free(after.bytes);
        CHECK(sc_trainer_step_count(u) == 1, "a failed load changed the step");
    }
    /* the intact file still loads, and a temp file left by a killed save is ignored */
    snprintf(bad, sizeof bad, "%s/state.bin.tmp", sdir);
    f = fopen(bad, "wb");
    fputs("half a state", f);
    fclose(f);
    st = sc_trainer_load_state(u, sdir);
    CHECK(!st, "the intact state did not load: %s", st ? sc_status_message(st) : "");
    sc_status_free(st);
    CHECK(sc_trainer_step_count(u) == 3, "loaded step %lld, want 3", (long long)sc_trainer_step_count(u));
    free(before.bytes);
    sc_trainer_free(t);
    sc_trainer_free(u);
}

static void test_nan(void) {
    sc_trainer_config c = base_config();
    c.lr = 1e30f;
    c.train.momentum = 0;
    sc_trainer *t = create(&c);
    sc_status st = SC_OK;
    blob good = state_blob(t);
    int64_t failed_at = 0;
    for (int i = 0; i < 10 && !st; i++) {
        free(good.bytes);
        good = state_blob(t);
        st = sc_trainer_step(t, NULL);
        if (st) failed_at = i + 1;
    }
    CHECK(st, "lr 1e30 trained 10 steps without a non-finite value");
    if (st) {
        const char *m = sc_status_message(st);
        char want[64];
        snprintf(want, sizeof want, "step %lld:", (long long)failed_at);
        CHECK(strstr(m, want) != NULL, "message does not name step %lld: %s", (long long)failed_at, m);
        CHECK(strstr(m, "appeared in '") || strstr(m, "already held"), "message names no tensor: %s", m);
        fprintf(stderr, "nan message: %s\n", m);
        sc_status_free(st);
        blob after = state_blob(t);
        CHECK(blob_eq(good, after), "weights after the failed step are not the last good ones");
        free(after.bytes);
        CHECK(sc_trainer_step_count(t) == failed_at - 1, "step count moved past the failure");
    }
    free(good.bytes);
    sc_trainer_free(t);
}

/* The next batch drawn on a worker during the step (train_prefetch.h) is the batch the step would
 * draw: 10 steps with prefetch on give the weights of 10 without, through the store-everything
 * executor and a plan, and so do 5 + save + resume + 5 with it on (the resumed session has no
 * batch drawn ahead; one drawn with another seed would be wrong). */
static void test_prefetch(bool plan) {
    sc_trainer_config c = base_config();
    c.use_plan = plan;
    c.prefetch = SC_PREFETCH_OFF;
    sc_trainer *a = create(&c);
    run_steps(a, 10);
    blob ba = state_blob(a);
    c.prefetch = SC_PREFETCH_ON;
    sc_trainer *b = create(&c);
    run_steps(b, 10);
    blob bb = state_blob(b);
    CHECK(blob_eq(ba, bb), "plan %d: 10 steps with the next batch prefetched differ from 10 without", (int)plan);
    CHECK(sc_trainer_prefetch_hits(b) == 9 && sc_trainer_prefetch_hits(a) == 0,
          "plan %d: %lld of 10 steps took a prefetched batch (expected 9), %lld without prefetch", (int)plan,
          (long long)sc_trainer_prefetch_hits(b), (long long)sc_trainer_prefetch_hits(a));
    sc_trainer *h = create(&c);
    run_steps(h, 5);
    char sdir[300];
    snprintf(sdir, sizeof sdir, "%s/state_prefetch_%d", dir, (int)plan);
    sc_status st = sc_trainer_save_state(h, sdir);
    CHECK(!st, "save: %s", st ? sc_status_message(st) : "");
    sc_status_free(st);
    sc_trainer_free(h);
    sc_trainer_config cr = c;
    cr.resume_dir = sdir;
    sc_trainer *r = create(&cr);
    run_steps(r, 5);
    blob br = state_blob(r);
    CHECK(blob_eq(ba, br), "plan %d: 5 + resume + 5 with prefetch differ from 10 without", (int)plan);
    CHECK(sc_trainer_prefetch_hits(r) == 4, "plan %d: %lld of 5 resumed steps took a prefetched batch, expected 4",
          (int)plan, (long long)sc_trainer_prefetch_hits(r));
    free(ba.bytes);
    free(bb.bytes);
    free(br.bytes);
    sc_trainer_free(a);
    sc_trainer_free(b);
    sc_trainer_free(r);
}

/* Without the rollback copy a non-finite step cannot be undone: the status says so and names the
 * value, and the session refuses to step or save afterwards (its weights are the failed step's). */
static void test_nan_no_rollback(bool plan) {
    sc_trainer_config c = base_config();
    c.use_plan = plan; /* the state checked in the arena, the host data lagging */
    c.lr = 1e30f;
    c.train.momentum = 0;
    c.rollback = SC_ROLLBACK_OFF;
    sc_trainer *t = create(&c);
    CHECK(!sc_trainer_rollback(t), "rollback off kept a copy");
    sc_status st = SC_OK;
    for (int i = 0; i < 10 && !st; i++) st = sc_trainer_step(t, NULL);
    CHECK(st, "lr 1e30 trained 10 steps without a non-finite value");
    if (!st) {
        sc_trainer_free(t);
        return;
    }
    const char *m = sc_status_message(st);
    CHECK(strstr(m, "rollback is off") && (strstr(m, "non-finite") || strstr(m, "the loss is")),
          "message does not say the step could not be undone: %s", m);
    fprintf(stderr, "nan message without rollback: %s\n", m);
    sc_status_free(st);
    char path[400];
    snprintf(path, sizeof path, "%s/spent.onnx", dir);
    sc_status again[3] = {sc_trainer_step(t, NULL), sc_trainer_save_model(t, path), sc_trainer_save_state(t, path)};
    for (int i = 0; i < 3; i++) {
        CHECK(again[i] && strstr(sc_status_message(again[i]), "cannot continue"),
              "call %d after the unrecoverable step: %s", i, again[i] ? sc_status_message(again[i]) : "succeeded");
        sc_status_free(again[i]);
    }
    CHECK(access(path, F_OK) != 0, "a spent session wrote %s", path);
    sc_trainer_free(t);
}

static void test_freeze(void) {
    sc_trainer_config c = base_config();
    c.train.freeze_regex = "^(W1|bn\\.scale)$";
    c.train.weight_decay = 0.1f;
    sc_trainer *t = create(&c), *ref = create(&c);
    run_steps(t, 5);
    const char *frozen[] = {"W1", "bn.scale"}, *trained[] = {"W2", "b1", "bn.bias"};
    size_t sizes[] = {32 * 4, 8 * 4}, tsizes[] = {24 * 4, 8 * 4, 8 * 4};
    for (int i = 0; i < 2; i++)
        CHECK(!memcmp(param_data(t, frozen[i]), param_data(ref, frozen[i]), sizes[i]), "frozen '%s' changed", frozen[i]);
    for (int i = 0; i < 3; i++)
        CHECK(memcmp(param_data(t, trained[i]), param_data(ref, trained[i]), tsizes[i]), "'%s' did not change", trained[i]);
    /* BatchNormalization running statistics are written back */
    CHECK(memcmp(param_data(t, "bn.mean"), param_data(ref, "bn.mean"), 32), "running mean not updated");
    const sc_training_graph *tg = sc_trainer_graph(t);
    for (int i = 0; i < tg->n_params; i++) {
        const char *n = sc_trainer_model(t)->graph.values[tg->params[i]].name;
        CHECK(strcmp(n, "W1") && strcmp(n, "bn.scale"), "frozen '%s' is in the trainable list", n);
    }
    sc_trainer_free(t);
    sc_trainer_free(ref);
}

/* Expected values from Python: lr * t / w for t < w, else lr * 0.5 * (1 + cos(pi * (t - w) / (T - w))),
 * t = step - 1, lr = 0.1, w = 3, T = 10. */
static void test_schedule(void) {
    sc_trainer_config c = base_config();
    c.lr = 0.1f;
    c.warmup = 3;
    c.schedule = SC_LR_COSINE;
    const double want[10] = {0.0, 0.03333333333333333, 0.06666666666666667, 0.1, 0.09504844339512095,
                             0.08117449009293668, 0.06112604669781572, 0.03887395330218428, 0.01882550990706332,
                             0.004951556604879043};
    for (int s = 1; s <= 10; s++) {
        float got = sc_trainer_lr_at(&c, 10, s);
        CHECK(fabs(got - want[s - 1]) < 1e-7, "cosine lr at step %d: %.9g, want %.9g", s, got, want[s - 1]);
    }
    c.schedule = SC_LR_CONSTANT;
    c.warmup = 0;
    CHECK(sc_trainer_lr_at(&c, 10, 1) == 0.1f && sc_trainer_lr_at(&c, 10, 10) == 0.1f, "constant lr is not constant");
}

static void test_bad_labels(void) {
    char x[400], y[400];
    snprintf(x, sizeof x, "%s/x.npy", dir);
    snprintf(y, sizeof y, "%s/y.npy", dir);
    float xs[6 * 4];
    int64_t ys[6] = {0, 1, 2, 1, 3, 0}; /* 3 is outside [0, 3) at index 4 */
    for (int i = 0; i < 24; i++) xs[i] = urand();
    int64_t dx[2] = {6, 4}, dy[1] = {6};
    sc_tensor tx = {sc_desc_make(SC_F32, 2, dx), xs}, ty = {sc_desc_make(SC_I64, 1, dy), ys};
    sc_status st = sc_npy_write(x, &tx);
    if (!st) st = sc_npy_write(y, &ty);
    CHECK(!st, "npy write");
    sc_status_free(st);
    sc_trainer_config c = base_config();
    c.data_path = x;
    c.labels_path = y;
    sc_trainer *t = NULL;
    st = sc_trainer_create(&c, &t);
    CHECK(st && strstr(sc_status_message(st), "y.npy") && strstr(sc_status_message(st), "index 4"),
          "bad label not reported by file and index: %s", st ? sc_status_message(st) : "(loaded)");
    sc_status_free(st);
    sc_trainer_free(t);
    ys[4] = 2;
    st = sc_npy_write(y, &ty);
    sc_status_free(st);
    c.epochs = 2;
    c.steps = 0;
    t = create(&c);
    CHECK(sc_trainer_total_steps(t) == 3, "2 epochs of 6 samples at batch 4 should be 3 steps, got %lld",
          (long long)sc_trainer_total_steps(t));
    run_steps(t, 3);
    sc_trainer_free(t);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/scorch_test_trainer_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    snprintf(model_path, sizeof model_path, "%s/tiny.onnx", dir);
    write_model(model_path);
    test_schedule();
    test_resume(SC_OPTIM_SGD, SC_LR_CONSTANT, SC_ROLLBACK_AUTO);
    test_resume(SC_OPTIM_ADAMW, SC_LR_COSINE, SC_ROLLBACK_AUTO);
    test_resume(SC_OPTIM_ADAMW, SC_LR_COSINE, SC_ROLLBACK_OFF);
    test_truncated_state(SC_ROLLBACK_AUTO);
    test_truncated_state(SC_ROLLBACK_OFF);
    test_nan();
    test_nan_no_rollback(false);
    test_nan_no_rollback(true);
    test_host_lags_device();
    test_prefetch(false);
    test_prefetch(true);
    test_freeze();
    test_bad_labels();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (!failures && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    if (failures) fprintf(stderr, "%d failure(s); files kept in %s\n", failures, dir);
    else printf("test_trainer: all passed\n");
    return failures ? 1 : 0;
}
