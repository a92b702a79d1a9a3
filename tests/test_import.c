/* ONNX import/export unit tests (import/onnx.h). Fails through the exit code.
 *
 * Models are built here with the protobuf-c bindings, packed into a temp folder and loaded back:
 * a tiny valid model (X f32[2,3] + W -> Add -> Relu -> Y) must load with the exact values and nodes
 * written, and each malformed variant must be rejected with a one-line message that names the file
 * and contains the expected words. Round trips change a parameter, save (inline and external data),
 * reload and compare with the bytes written, independently of the importer's own output.
 */
#define _GNU_SOURCE /* nftw */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "import/attrs.h"
#include "import/onnx.h"
#include "onnx/onnx.pb-c.h"
#include "tests/check.h"

static char tmpdir[256];

/* ---- a tiny model, every part in one struct so a test can break any field ---- */

typedef struct {
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset, *opsets[1];
    Onnx__ValueInfoProto x, y, *inputs[1], *outputs[1];
    Onnx__TypeProto x_type, y_type;
    Onnx__TypeProto__Tensor x_tt, y_tt;
    Onnx__TensorShapeProto x_shape;
    Onnx__TensorShapeProto__Dimension x_dims[2], *x_dim_ptrs[2];
    Onnx__TensorProto w, *inits[2];
    int64_t w_dims[2];
    float w_data[6];
    Onnx__NodeProto nodes[3], *node_ptrs[3];
    char *add_in[2], *add_out[1], *relu_in[1], *relu_out[1];
    Onnx__StringStringEntryProto ext[3], *ext_ptrs[3];
} tiny_model;

static const float W_INIT[6] = {1, -2, 3, -4, 5, -6};

static void tiny_init(tiny_model *t, int64_t opset) {
    memset(t, 0, sizeof *t);
    Onnx__ModelProto mi = ONNX__MODEL_PROTO__INIT;
    Onnx__GraphProto gi = ONNX__GRAPH_PROTO__INIT;
    Onnx__OperatorSetIdProto oi = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    Onnx__ValueInfoProto vi = ONNX__VALUE_INFO_PROTO__INIT;
    Onnx__TypeProto ti = ONNX__TYPE_PROTO__INIT;
    Onnx__TypeProto__Tensor tti = ONNX__TYPE_PROTO__TENSOR__INIT;
    Onnx__TensorShapeProto si = ONNX__TENSOR_SHAPE_PROTO__INIT;
    Onnx__TensorShapeProto__Dimension di = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
    Onnx__TensorProto tpi = ONNX__TENSOR_PROTO__INIT;
    Onnx__NodeProto ni = ONNX__NODE_PROTO__INIT;
    t->model = mi;
    t->graph = gi;
    t->opset = oi;
    t->x = t->y = vi;
    t->x_type = t->y_type = ti;
    t->x_tt = t->y_tt = tti;
    t->x_shape = si;
    t->w = tpi;

    t->model.has_ir_version = 1;
    t->model.ir_version = 8;
    t->model.producer_name = "test_import";
    t->opset.domain = "";
    t->opset.has_version = 1;
    t->opset.version = opset;
    t->opsets[0] = &t->opset;
    t->model.n_opset_import = 1;
    t->model.opset_import = t->opsets;
    t->model.graph = &t->graph;
    t->graph.name = "tiny";

    for (int i = 0; i < 2; i++) {
        t->x_dims[i] = di;
        t->x_dims[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        t->x_dims[i].dim_value = i == 0 ? 2 : 3;
        t->x_dim_ptrs[i] = &t->x_dims[i];
    }
    t->x_shape.n_dim = 2;
    t->x_shape.dim = t->x_dim_ptrs;
    t->x_tt.has_elem_type = t->y_tt.has_elem_type = 1;
    t->x_tt.elem_type = t->y_tt.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->x_tt.shape = &t->x_shape;
    t->x_type.value_case = t->y_type.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    t->x_type.tensor_type = &t->x_tt;
    t->y_type.tensor_type = &t->y_tt;
    t->x.name = "X";
    t->x.type = &t->x_type;
    t->y.name = "Y";
    t->y.type = &t->y_type;
    t->inputs[0] = &t->x;
    t->outputs[0] = &t->y;
    t->graph.n_input = 1;
    t->graph.input = t->inputs;
    t->graph.n_output = 1;
    t->graph.output = t->outputs;

    t->w.name = "W";
    t->w.has_data_type = 1;
    t->w.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->w_dims[0] = 2;
    t->w_dims[1] = 3;
    t->w.n_dims = 2;
    t->w.dims = t->w_dims;
    memcpy(t->w_data, W_INIT, sizeof W_INIT);
    t->w.has_raw_data = 1;
    t->w.raw_data.len = sizeof t->w_data;
    t->w.raw_data.data = (uint8_t *)t->w_data;
    t->inits[0] = &t->w;
    t->graph.n_initializer = 1;
    t->graph.initializer = t->inits;

    t->add_in[0] = "X";
    t->add_in[1] = "W";
    t->add_out[0] = "S";
    t->relu_in[0] = "S";
    t->relu_out[0] = "Y";
    for (int i = 0; i < 3; i++) {
        t->nodes[i] = ni;
        t->node_ptrs[i] = &t->nodes[i];
    }
    t->nodes[0].name = "add0";
    t->nodes[0].op_type = "Add";
    t->nodes[0].n_input = 2;
    t->nodes[0].input = t->add_in;
    t->nodes[0].n_output = 1;
    t->nodes[0].output = t->add_out;
    t->nodes[1].name = "relu0";
    t->nodes[1].op_type = "Relu";
    t->nodes[1].n_input = 1;
    t->nodes[1].input = t->relu_in;
    t->nodes[1].n_output = 1;
    t->nodes[1].output = t->relu_out;
    t->graph.n_node = 2;
    t->graph.node = t->node_ptrs;
}

/* W's data moves to an external file at `location` (not written here). */
static void tiny_external(tiny_model *t, const char *location) {
    const char *keys[3] = {"location", "offset", "length"};
    const char *vals[3] = {location, "0", "24"};
    for (int i = 0; i < 3; i++) {
        Onnx__StringStringEntryProto e = ONNX__STRING_STRING_ENTRY_PROTO__INIT;
        t->ext[i] = e;
        t->ext[i].key = (char *)keys[i];
        t->ext[i].value = (char *)vals[i];
        t->ext_ptrs[i] = &t->ext[i];
    }
    t->w.has_raw_data = 0;
    t->w.has_data_location = 1;
    t->w.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    t->w.n_external_data = 3;
    t->w.external_data = t->ext_ptrs;
}

/* ---- files ---- */

static void path_in_tmp(char *buf, size_t size, const char *name) { snprintf(buf, size, "%s/%s", tmpdir, name); }

static void write_bytes(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        printf("FAIL cannot write %s\n", path);
        exit(1);
    }
    if (size) fwrite(data, 1, size, f);
    fclose(f);
}

static uint8_t *read_bytes(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc((size_t)n + 1);
    *size = fread(p, 1, (size_t)n, f);
    fclose(f);
    return p;
}

/* Packs the model into tmpdir/name; returns the full path in buf. */
static void tiny_write(const tiny_model *t, const char *name, char *buf, size_t size) {
    path_in_tmp(buf, size, name);
    size_t n = onnx__model_proto__get_packed_size(&t->model);
    uint8_t *data = malloc(n);
    onnx__model_proto__pack(&t->model, data);
    write_bytes(buf, data, n);
    free(data);
}

static sc_model *load_ok(const char *path) {
    sc_model *m = NULL;
    sc_status st = sc_model_load(path, &m);
    if (st) {
        printf("FAIL %s: unexpected error: %s\n", path, sc_status_message(st));
        failures++;
        sc_status_free(st);
        return NULL;
    }
    return m;
}

/* The load must fail with one line that starts with the path and contains every `want`. */
static void expect_fail_path(const char *path, const char *want1, const char *want2) {
    sc_model *m = (sc_model *)1;
    sc_status st = sc_model_load(path, &m);
    if (!st) {
        printf("FAIL %s: loaded, expected an error containing '%s'\n", path, want1);
        failures++;
        sc_model_free(m);
        return;
    }
    const char *msg = sc_status_message(st);
    bool ok = m == NULL && strncmp(msg, path, strlen(path)) == 0 && !strchr(msg, '\n') && strstr(msg, want1) &&
              (!want2 || strstr(msg, want2));
    if (!ok) {
        printf("FAIL %s: message '%s' lacks '%s'%s%s\n", path, msg, want1, want2 ? " / " : "", want2 ? want2 : "");
        failures++;
    } else {
        printf("ok   rejected: %s\n", msg);
    }
    sc_status_free(st);
}

static void expect_fail(const tiny_model *t, const char *name, const char *want1, const char *want2) {
    char path[512];
    tiny_write(t, name, path, sizeof path);
    expect_fail_path(path, want1, want2);
}

/* ---- cases ---- */

static void test_valid(void) {
    tiny_model t;
    tiny_init(&t, 13);
    char path[512];
    tiny_write(&t, "valid.onnx", path, sizeof path);
    sc_model *m = load_ok(path);
    if (!m) return;
    sc_graph *g = &m->graph;
    EXPECT(g->opset == 13);
    EXPECT(g->n_nodes == 2);
    EXPECT(g->n_nodes == 2 && g->nodes[0].op == SC_OP_ADD && g->nodes[1].op == SC_OP_RELU);
    EXPECT(g->n_nodes == 2 && strcmp(g->nodes[1].name, "relu0") == 0);
    int x = graph_find_value(g, "X"), w = graph_find_value(g, "W"), s = graph_find_value(g, "S"),
        y = graph_find_value(g, "Y");
    EXPECT(x >= 0 && w >= 0 && s >= 0 && y >= 0);
    if (x < 0 || w < 0 || s < 0 || y < 0) goto out;
    EXPECT(g->values[x].kind == SC_VALUE_INPUT && g->values[x].desc.rank == 2 && g->values[x].desc.dims[0] == 2 &&
          g->values[x].desc.dims[1] == 3 && g->values[x].desc.dtype == SC_F32);
    EXPECT(g->values[w].kind == SC_VALUE_PARAM && g->values[w].data &&
          memcmp(g->values[w].data, W_INIT, sizeof W_INIT) == 0);
    EXPECT(g->values[s].kind == SC_VALUE_ACT && g->values[s].producer == 0 && g->values[s].n_consumers == 1);
    EXPECT(g->values[y].is_output && g->n_outputs == 1 && g->outputs[0] == y);
    EXPECT(g->n_inputs == 1 && g->inputs[0] == x);
    EXPECT(g->nodes[0].n_in == 2 && g->nodes[0].in[0] == x && g->nodes[0].in[1] == w && g->nodes[0].out[0] == s);
out:
    sc_model_free(m);
}

static void test_file_errors(void) {
    char path[512];
    path_in_tmp(path, sizeof path, "empty.onnx");
    write_bytes(path, "", 0);
    expect_fail_path(path, "empty file", NULL);

    tiny_model t;
    tiny_init(&t, 13);
    size_t n = onnx__model_proto__get_packed_size(&t.model);
    uint8_t *data = malloc(n);
    onnx__model_proto__pack(&t.model, data);
    path_in_tmp(path, sizeof path, "truncated.onnx");
    write_bytes(path, data, n / 2);
    expect_fail_path(path, "not a valid ONNX model", NULL);
    free(data);

    uint8_t junk[256];
    uint32_t seed = 12345;
    for (size_t i = 0; i < sizeof junk; i++) {
        seed = seed * 1103515245u + 12345u;
        junk[i] = (uint8_t)(seed >> 16);
    }
    path_in_tmp(path, sizeof path, "random.onnx");
    write_bytes(path, junk, sizeof junk);
    expect_fail_path(path, "not a valid ONNX model", NULL);

    path_in_tmp(path, sizeof path, "does_not_exist.onnx");
    expect_fail_path(path, "cannot open", NULL);
}

static void test_tensor_errors(void) {
    tiny_model t;
    tiny_init(&t, 13);
    t.w_dims[0] = -2;
    expect_fail(&t, "negative_dim.onnx", "negative dim", "initializer 'W'");

    tiny_init(&t, 13);
    t.w_dims[0] = (int64_t)1 << 40;
    t.w_dims[1] = (int64_t)1 << 40;
    expect_fail(&t, "overflow_dims.onnx", "overflow", "initializer 'W'");

    tiny_init(&t, 13);
    t.w.raw_data.len = 20;
    expect_fail(&t, "raw_len.onnx", "raw_data has 20 bytes, expected 24", "initializer 'W'");

    tiny_init(&t, 13);
    t.w.data_type = 0;
    expect_fail(&t, "undefined_dtype.onnx", "undefined data type", "initializer 'W'");

    tiny_init(&t, 13);
    t.w.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__STRING;
    expect_fail(&t, "string_dtype.onnx", "unsupported data type", "'W'");

    tiny_init(&t, 13);
    t.w.has_raw_data = 0;
    t.w.n_float_data = 5;
    t.w.float_data = t.w_data;
    expect_fail(&t, "typed_count.onnx", "float_data has 5 values, expected 6", "'W'");

    int64_t big[9] = {1, 1, 1, 1, 1, 1, 1, 1, 6};
    tiny_init(&t, 13);
    t.w.n_dims = 9;
    t.w.dims = big;
    expect_fail(&t, "rank.onnx", "rank 9 exceeds", "'W'");
}

/* A FLOAT attribute. */
static Onnx__AttributeProto float_attr(const char *name, float f) {
    Onnx__AttributeProto a = ONNX__ATTRIBUTE_PROTO__INIT;
    a.name = (char *)name;
    a.has_type = 1;
    a.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    a.has_f = 1;
    a.f = f;
    return a;
}

/* A constant the importer makes from an attribute (Dropout-11's ratio -> "drop_ratio") is named
 * before later node outputs are known: a later node output of that name keeps it, and the constant
 * is renamed. */
static void test_importer_constant_renamed(void) {
    tiny_model t;
    tiny_init(&t, 11);
    Onnx__AttributeProto a = float_attr("ratio", 0.25f), *ap[1] = {&a};
    t.nodes[1].name = "drop";
    t.nodes[1].op_type = "Dropout";
    t.nodes[1].n_attribute = 1;
    t.nodes[1].attribute = ap;
    char *r_in[1] = {"Y"}, *r_out[1] = {"drop_ratio"};
    t.nodes[2].name = "r2";
    t.nodes[2].op_type = "Relu";
    t.nodes[2].n_input = 1;
    t.nodes[2].input = r_in;
    t.nodes[2].n_output = 1;
    t.nodes[2].output = r_out;
    t.graph.n_node = 3;
    t.y.name = "drop_ratio";
    char path[512];
    tiny_write(&t, "constant_renamed.onnx", path, sizeof path);
    sc_model *m = load_ok(path);
    if (!m) return;
    sc_graph *g = &m->graph;
    int out = graph_find_value(g, "drop_ratio"), ratio = graph_find_value(g, "drop_ratio_1");
    EXPECT(out >= 0 && g->values[out].kind == SC_VALUE_ACT && g->values[out].is_output);
    EXPECT(ratio >= 0 && g->values[ratio].kind == SC_VALUE_CONST && *(float *)g->values[ratio].data == 0.25f);
    EXPECT(g->n_nodes == 3 && g->nodes[1].op == SC_OP_DROPOUT && g->nodes[1].n_in >= 2 && g->nodes[1].in[1] == ratio);
    sc_model_free(m);
}

static void test_graph_errors(void) {
    tiny_model t;
    tiny_init(&t, 13);
    t.relu_out[0] = "S"; /* relu0 writes S, which add0 already produces */
    t.y.name = "S";
    expect_fail(&t, "dup_output.onnx", "produced twice", "'add0' and by node 'relu0'");

    tiny_init(&t, 13);
    t.node_ptrs[0] = &t.nodes[1];
    t.node_ptrs[1] = &t.nodes[0];
    expect_fail(&t, "unsorted.onnx", "not topologically sorted", "node 'relu0' uses 'S' produced later by node 'add0'");

    tiny_init(&t, 13);
    t.nodes[0].name = NULL; /* unnamed: labelled "Add#0" */
    t.relu_out[0] = "S";
    t.y.name = "S";
    expect_fail(&t, "dup_output_unnamed.onnx", "produced twice", "'Add#0' and by node 'relu0'");

    tiny_init(&t, 13);
    t.relu_out[0] = "W"; /* the initializer's name */
    t.y.name = "W";
    expect_fail(&t, "output_is_initializer.onnx", "node 'relu0': output 'W' is already an initializer or graph input", NULL);

    tiny_init(&t, 13);
    t.add_out[0] = "X"; /* the graph input's name */
    t.relu_in[0] = "X";
    expect_fail(&t, "output_is_input.onnx", "node 'add0': output 'X' is already an initializer or graph input", NULL);

    tiny_init(&t, 13);
    t.inits[1] = &t.w;
    t.graph.n_initializer = 2;
    expect_fail(&t, "init_twice.onnx", "initializer 'W': defined twice", NULL);

    tiny_init(&t, 13);
    t.node_ptrs[0] = &t.nodes[1];
    t.node_ptrs[1] = &t.nodes[0];
    t.nodes[0].name = NULL;
    expect_fail(&t, "unsorted_unnamed.onnx", "not topologically sorted", "node 'relu0' uses 'S' produced later by node 'Add#1'");

    tiny_init(&t, 13);
    t.relu_in[0] = "nowhere";
    expect_fail(&t, "dangling.onnx", "node 'relu0': input 'nowhere' is not produced", NULL);

    tiny_init(&t, 13);
    t.nodes[1].op_type = "FancyOp";
    expect_fail(&t, "unknown_op.onnx", "unknown op 'FancyOp'", "node 'relu0'");

    tiny_init(&t, 13);
    t.nodes[1].domain = "com.example";
    expect_fail(&t, "unknown_domain.onnx", "unknown op 'Relu'", "com.example");

    tiny_init(&t, 9);
    expect_fail(&t, "opset9.onnx", "unsupported opset 9 (supported 11..21)", NULL);
    tiny_init(&t, 22);
    expect_fail(&t, "opset22.onnx", "unsupported opset 22 (supported 11..21)", NULL);

    tiny_init(&t, 13);
    t.nodes[1].n_input = 2;
    t.nodes[1].input = t.add_in;
    expect_fail(&t, "arity.onnx", "has 2 inputs, expected 1..1", "relu0");

    tiny_init(&t, 13);
    t.y.name = "Z";
    expect_fail(&t, "output_missing.onnx", "graph output 'Z' is not produced", NULL);

    tiny_init(&t, 13);
    t.model.graph = NULL;
    expect_fail(&t, "no_graph.onnx", "no graph", NULL);

    /* Softmax's axis as a FLOAT attribute. */
    tiny_init(&t, 13);
    Onnx__AttributeProto a = float_attr("axis", 1.0f), *ap[1] = {&a};
    t.nodes[1].op_type = "Softmax";
    t.nodes[1].n_attribute = 1;
    t.nodes[1].attribute = ap;
    expect_fail(&t, "attr_type.onnx", "attribute 'axis': has type FLOAT, expected INT", "relu0");
}

static void test_external_errors(void) {
    tiny_model t;
    char target[512], link[512];
    tiny_init(&t, 13);
    tiny_external(&t, "/etc/passwd");
    expect_fail(&t, "ext_abs.onnx", "absolute path", "'W'");

    tiny_init(&t, 13);
    tiny_external(&t, "sub/../../w.bin");
    expect_fail(&t, "ext_dotdot.onnx", "'..'", "'W'");

    /* A symlink inside the folder that points outside it. */
    char outside[] = "/tmp/scorch_test_outside_XXXXXX";
    int fd = mkstemp(outside);
    EXPECT(fd >= 0);
    if (fd >= 0) {
        EXPECT(write(fd, W_INIT, sizeof W_INIT) == (ssize_t)sizeof W_INIT);
        close(fd);
        path_in_tmp(link, sizeof link, "escape.bin");
        EXPECT(symlink(outside, link) == 0);
        tiny_init(&t, 13);
        tiny_external(&t, "escape.bin");
        expect_fail(&t, "ext_symlink.onnx", "outside the model folder", "'W'");
        unlink(outside);
    }

    tiny_init(&t, 13);
    tiny_external(&t, "missing.bin");
    expect_fail(&t, "ext_missing.onnx", "missing.bin", "'W'");

    path_in_tmp(target, sizeof target, "short.bin");
    write_bytes(target, W_INIT, 10);
    tiny_init(&t, 13);
    tiny_external(&t, "short.bin");
    t.ext[2].value = "0"; /* no length check: the file itself is too short */
    t.w.n_external_data = 1;
    expect_fail(&t, "ext_short.onnx", "short read", "'W'");
}

static void test_external_ok(void) {
    char path[512], bin[512];
    float other[6] = {0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f};
    path_in_tmp(bin, sizeof bin, "w_ok.bin");
    uint8_t file[64] = {0};
    memcpy(file + 8, other, sizeof other); /* at offset 8 */
    write_bytes(bin, file, 8 + sizeof other);
    tiny_model t;
    tiny_init(&t, 13);
    tiny_external(&t, "w_ok.bin");
    t.ext[1].value = "8";
    tiny_write(&t, "ext_ok.onnx", path, sizeof path);
    sc_model *m = load_ok(path);
    if (!m) return;
    int w = graph_find_value(&m->graph, "W");
    EXPECT(w >= 0 && memcmp(m->graph.values[w].data, other, sizeof other) == 0);
    sc_model_free(m);
}

static void test_features(void) {
    /* dim_param, unnamed dims, typed float_data, an int64 initializer, a Constant node. */
    tiny_model t;
    tiny_init(&t, 13);
    t.x_dims[0].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
    t.x_dims[0].dim_param = "batch";
    t.x_dims[1].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE__NOT_SET;
    t.w.has_raw_data = 0;
    t.w.n_float_data = 6;
    t.w.float_data = t.w_data;
    Onnx__TensorProto shape = ONNX__TENSOR_PROTO__INIT;
    int64_t shape_dims[1] = {2}, shape_vals[2] = {3, 2};
    shape.name = "shape";
    shape.has_data_type = 1;
    shape.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    shape.n_dims = 1;
    shape.dims = shape_dims;
    shape.n_int64_data = 2;
    shape.int64_data = shape_vals;
    t.inits[1] = &shape;
    t.graph.n_initializer = 2;
    /* Constant "C" = value_floats [7, 8] feeding nothing but listed as an output too. */
    Onnx__AttributeProto a = ONNX__ATTRIBUTE_PROTO__INIT, *ap[1] = {&a};
    float cvals[2] = {7, 8};
    a.name = "value_floats";
    a.has_type = 1;
    a.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
    a.n_floats = 2;
    a.floats = cvals;
    char *c_out[1] = {"C"};
    t.nodes[2].name = "const0";
    t.nodes[2].op_type = "Constant";
    t.nodes[2].n_output = 1;
    t.nodes[2].output = c_out;
    t.nodes[2].n_attribute = 1;
    t.nodes[2].attribute = ap;
    t.graph.n_node = 3;
    Onnx__ValueInfoProto c_vi = ONNX__VALUE_INFO_PROTO__INIT;
    c_vi.name = "C";
    Onnx__ValueInfoProto *outs[2] = {&t.y, &c_vi};
    t.graph.n_output = 2;
    t.graph.output = outs;
    char path[512];
    tiny_write(&t, "features.onnx", path, sizeof path);
    sc_model *m = load_ok(path);
    if (!m) return;
    sc_graph *g = &m->graph;
    int x = graph_find_value(g, "X"), w = graph_find_value(g, "W"), s = graph_find_value(g, "shape"),
        c = graph_find_value(g, "C");
    EXPECT(x >= 0 && w >= 0 && s >= 0 && c >= 0);
    if (x >= 0 && w >= 0 && s >= 0 && c >= 0) {
        const sc_value *xv = &g->values[x];
        EXPECT(xv->desc.dims[0] == -1 && value_dim_name(xv, 0) && strcmp(value_dim_name(xv, 0), "batch") == 0);
        EXPECT(xv->desc.dims[1] == -1 && value_dim_name(xv, 1) && strcmp(value_dim_name(xv, 1), "?") == 0);
        EXPECT(memcmp(g->values[w].data, W_INIT, sizeof W_INIT) == 0);
        EXPECT(g->values[s].kind == SC_VALUE_CONST && g->values[s].desc.dtype == SC_I64 &&
              ((int64_t *)g->values[s].data)[0] == 3 && ((int64_t *)g->values[s].data)[1] == 2);
        EXPECT(g->values[c].kind == SC_VALUE_CONST && g->values[c].desc.rank == 1 && g->values[c].desc.dims[0] == 2 &&
              ((float *)g->values[c].data)[1] == 8.0f && g->values[c].is_output);
        EXPECT(g->n_nodes == 2);
    }
    sc_model_free(m);
}

/* Opset 11: Softmax defaults to axis 1 (2-D coercion) and Unsqueeze's axes attribute becomes input 1;
 * opset 13: axis -1. */
static void test_opset_forms(void) {
    for (int opset = 11; opset <= 13; opset += 2) {
        tiny_model t;
        tiny_init(&t, opset);
        t.nodes[1].op_type = "Softmax";
        char *u_in[1] = {"Y"}, *u_out[1] = {"U"};
        Onnx__AttributeProto a = ONNX__ATTRIBUTE_PROTO__INIT, *ap[1] = {&a};
        int64_t axes[2] = {0, 3};
        a.name = "axes";
        a.has_type = 1;
        a.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        a.n_ints = 2;
        a.ints = axes;
        t.nodes[2].name = "unsq";
        t.nodes[2].op_type = "Unsqueeze";
        t.nodes[2].n_input = 1;
        t.nodes[2].input = u_in;
        t.nodes[2].n_output = 1;
        t.nodes[2].output = u_out;
        if (opset < 13) {
            t.nodes[2].n_attribute = 1;
            t.nodes[2].attribute = ap;
        } else {
            t.nodes[2].n_input = 0; /* replaced below with an axes initializer input */
        }
        char *u_in13[2] = {"Y", "axes_init"};
        Onnx__TensorProto ax = ONNX__TENSOR_PROTO__INIT;
        int64_t ax_dims[1] = {2};
        if (opset >= 13) {
            ax.name = "axes_init";
            ax.has_data_type = 1;
            ax.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
            ax.n_dims = 1;
            ax.dims = ax_dims;
            ax.n_int64_data = 2;
            ax.int64_data = axes;
            t.inits[1] = &ax;
            t.graph.n_initializer = 2;
            t.nodes[2].n_input = 2;
            t.nodes[2].input = u_in13;
        }
        t.graph.n_node = 3;
        t.y.name = "U";
        char path[512], name[64];
        snprintf(name, sizeof name, "forms%d.onnx", opset);
        tiny_write(&t, name, path, sizeof path);
        sc_model *m = load_ok(path);
        if (!m) continue;
        sc_graph *g = &m->graph;
        EXPECT(g->n_nodes == 3);
        if (g->n_nodes == 3) {
            const sc_node *sm = &g->nodes[1], *un = &g->nodes[2];
            EXPECT(sm->op == SC_OP_SOFTMAX && sm->attrs->axis.axis == (opset < 13 ? 1 : -1) &&
                  sm->attrs->axis.legacy_2d == (opset < 13));
            EXPECT(un->op == SC_OP_UNSQUEEZE && un->n_in == 2 && un->in[1] >= 0);
            if (un->n_in == 2 && un->in[1] >= 0) {
                const sc_value *v = &g->values[un->in[1]];
                EXPECT(v->kind == SC_VALUE_CONST && v->desc.dtype == SC_I64 && v->desc.rank == 1 &&
                      v->desc.dims[0] == 2 && ((int64_t *)v->data)[0] == 0 && ((int64_t *)v->data)[1] == 3);
            }
        }
        sc_model_free(m);
    }
}

/* One node X -> op -> Y (and more outputs) with one attribute; checks input 1 became a constant
 * holding the attribute's values (i64 1-D, or an f32 scalar for Dropout's ratio). */
static void check_canonical(int64_t opset, const char *op_type, const char *attr, int n_out, bool is_float) {
    tiny_model t;
    tiny_init(&t, opset);
    Onnx__AttributeProto a = ONNX__ATTRIBUTE_PROTO__INIT, *ap[1] = {&a};
    int64_t ints[2] = {1, 2};
    a.name = (char *)attr;
    a.has_type = 1;
    if (is_float) {
        a.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
        a.has_f = 1;
        a.f = 0.25f;
    } else {
        a.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        a.n_ints = 2;
        a.ints = ints;
    }
    char *outs[2] = {"Y", "Y2"};
    t.nodes[1].op_type = (char *)op_type;
    t.nodes[1].n_output = (size_t)n_out;
    t.nodes[1].output = outs;
    t.nodes[1].n_attribute = 1;
    t.nodes[1].attribute = ap;
    char path[512], name[128];
    snprintf(name, sizeof name, "canon_%s_%lld.onnx", op_type, (long long)opset);
    tiny_write(&t, name, path, sizeof path);
    sc_model *m = load_ok(path);
    if (!m) return;
    const sc_graph *g = &m->graph;
    const sc_node *n = &g->nodes[1];
    bool ok = g->n_nodes == 2 && n->n_in == 2 && n->in[1] >= 0;
    if (ok) {
        const sc_value *v = &g->values[n->in[1]];
        if (is_float)
            ok = v->kind == SC_VALUE_CONST && v->desc.dtype == SC_F32 && v->desc.rank == 0 && *(float *)v->data == 0.25f;
        else
            ok = v->kind == SC_VALUE_CONST && v->desc.dtype == SC_I64 && v->desc.rank == 1 && v->desc.dims[0] == 2 &&
                 ((int64_t *)v->data)[0] == 1 && ((int64_t *)v->data)[1] == 2;
    }
    if (!ok) {
        printf("FAIL %s at opset %lld: attribute '%s' did not become constant input 1\n", op_type, (long long)opset, attr);
        failures++;
    }
    sc_model_free(m);
}

static void test_canonical(void) {
    check_canonical(11, "Squeeze", "axes", 1, false);
    check_canonical(12, "Unsqueeze", "axes", 1, false);
    check_canonical(12, "ReduceSum", "axes", 1, false);
    check_canonical(17, "ReduceMean", "axes", 1, false);
    check_canonical(11, "Split", "split", 2, false);
    check_canonical(11, "Dropout", "ratio", 1, true);
}

/* Every op has an attribute parser or a stated reason (docs/STYLE.md habit 1). */
static void test_parser_table(void) {
    for (int op = 0; op < SC_OP_COUNT; op++)
        if (!sc_attr_parsers[op] && !attrs_parser_missing_reason((sc_op)op)) {
            printf("FAIL %s: no attribute parser and no reason\n", sc_op_name((sc_op)op));
            failures++;
        }
}

static bool w_equals(const char *path, const float *want) {
    sc_model *m = load_ok(path);
    if (!m) return false;
    int w = graph_find_value(&m->graph, "W");
    bool ok = w >= 0 && memcmp(m->graph.values[w].data, want, 6 * sizeof(float)) == 0;
    sc_model_free(m);
    return ok;
}

static bool file_contains(const char *path, const uint8_t *needle, size_t n) {
    size_t size;
    uint8_t *p = read_bytes(path, &size);
    if (!p) return false;
    bool found = false;
    for (size_t i = 0; i + n <= size && !found; i++) found = memcmp(p + i, needle, n) == 0;
    free(p);
    return found;
}

static void test_round_trip(void) {
    tiny_model t;
    tiny_init(&t, 13);
    char path[512];
    path_in_tmp(path, sizeof path, "rt_in.onnx");
    /* An unknown ModelProto field (number 99, varint 42) appended: it must survive the round trip. */
    size_t n = onnx__model_proto__get_packed_size(&t.model);
    uint8_t *data = malloc(n + 3);
    onnx__model_proto__pack(&t.model, data);
    const uint8_t unknown[3] = {0x98, 0x06, 0x2a};
    memcpy(data + n, unknown, 3);
    write_bytes(path, data, n + 3);
    free(data);
    sc_model *m = load_ok(path);
    if (!m) return;
    int w = graph_find_value(&m->graph, "W");
    EXPECT(w >= 0);
    if (w < 0) goto out;
    float updated[6] = {10, 20, 30, 40, 50, 60};
    memcpy(m->graph.values[w].data, updated, sizeof updated);

    char out1[512], out2[512], out3[512], data2[600];
    path_in_tmp(out1, sizeof out1, "rt_inline.onnx");
    path_in_tmp(out2, sizeof out2, "rt_external.onnx");
    path_in_tmp(out3, sizeof out3, "rt_again.onnx");
    snprintf(data2, sizeof data2, "%s.data", out2);
    sc_status st = sc_model_save(m, out1, 0);
    EXPECT(!st);
    sc_status_free(st);
    EXPECT(w_equals(out1, updated));
    EXPECT(file_contains(out1, unknown, 3));
    EXPECT(access(data2, F_OK) != 0);

    st = sc_model_save(m, out2, 16); /* W is 24 bytes: external */
    EXPECT(!st);
    sc_status_free(st);
    EXPECT(access(data2, F_OK) == 0);
    EXPECT(w_equals(out2, updated));
    EXPECT(file_contains(out2, (const uint8_t *)"rt_external.onnx.data", 21));
    EXPECT(!file_contains(out2, (const uint8_t *)updated, sizeof updated));
    EXPECT(file_contains(data2, (const uint8_t *)updated, sizeof updated));

    /* Saving a third time, after an external save, must again give a self-contained file. */
    updated[0] = -1;
    memcpy(m->graph.values[w].data, updated, sizeof updated);
    st = sc_model_save(m, out3, 0);
    EXPECT(!st);
    sc_status_free(st);
    EXPECT(w_equals(out3, updated));
    EXPECT(file_contains(out3, (const uint8_t *)updated, sizeof updated));

    /* A saved external model loads its data back from its own folder. */
    sc_model *m2 = load_ok(out2);
    if (m2) {
        char out4[512];
        path_in_tmp(out4, sizeof out4, "rt_from_external.onnx");
        st = sc_model_save(m2, out4, 0);
        EXPECT(!st);
        sc_status_free(st);
        float first[6] = {10, 20, 30, 40, 50, 60};
        EXPECT(w_equals(out4, first));
        sc_model_free(m2);
    }
out:
    sc_model_free(m);
}

static void test_tensor_pb(void) {
    Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
    int64_t dims[2] = {3, 2};
    int32_t vals[6] = {1, 0, 1, 1, 0, 0};
    tp.name = "input_0";
    tp.has_data_type = 1;
    tp.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    tp.n_dims = 2;
    tp.dims = dims;
    tp.n_int32_data = 6;
    tp.int32_data = vals;
    size_t n = onnx__tensor_proto__get_packed_size(&tp);
    uint8_t *buf = malloc(n);
    onnx__tensor_proto__pack(&tp, buf);
    char path[512];
    path_in_tmp(path, sizeof path, "input_0.pb");
    write_bytes(path, buf, n);
    sc_tensor t;
    char *name = NULL;
    sc_status st = sc_load_tensor_pb(path, &t, &name);
    EXPECT(!st);
    if (!st) {
        EXPECT(name && strcmp(name, "input_0") == 0);
        EXPECT(t.desc.dtype == SC_BOOL && t.desc.rank == 2 && t.desc.dims[0] == 3 && t.desc.dims[1] == 2);
        const uint8_t want[6] = {1, 0, 1, 1, 0, 0};
        EXPECT(memcmp(t.data, want, 6) == 0);
        free(t.data);
        free(name);
    }
    sc_status_free(st);
    /* Truncated: a clear error naming the file. */
    path_in_tmp(path, sizeof path, "input_bad.pb");
    write_bytes(path, buf, n - 3);
    st = sc_load_tensor_pb(path, &t, &name);
    EXPECT(st && strstr(sc_status_message(st), path));
    sc_status_free(st);
    free(buf);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) { return remove(p); }

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/scorch_test_import_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        printf("FAIL cannot create a temp folder\n");
        return 1;
    }
    test_valid();
    test_file_errors();
    test_tensor_errors();
    test_graph_errors();
    test_importer_constant_renamed();
    test_external_errors();
    test_external_ok();
    test_features();
    test_opset_forms();
    test_canonical();
    test_parser_table();
    test_round_trip();
    test_tensor_pb();
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
