/* Importer limits and external-data confinement. Fails through the exit code.
 *
 * Hostile models, built here with the protobuf-c bindings or as raw wire bytes, must be refused with
 * a status naming the thing at fault, before anything large is allocated:
 *   - dims whose product passes 2^40 or a single dim of 2^62; a data-less tensor of 10^12 elements
 *     (allowed by the dim limit, but its bytes cannot be in a small file); graph inputs and shape
 *     inputs that make shape inference overflow;
 *   - GRAPH attributes (subgraphs) on any node; 100k-deep nesting of GraphProto attributes (would
 *     overflow the stack inside protobuf-c's recursive unpack); a string declaring 2^62 bytes;
 *   - external data outside the model's folder: absolute, '..', 'a/../../x', symlinked parent
 *     folders, hard links (the rule: any external file with st_nlink > 1 is refused), FIFOs.
 * Saving never reuses a location string from the input model and never writes outside the output's
 * folder (symlinks planted at the temp name, the target or its data file are replaced, not followed).
 * Positive controls (a normal external file loads; a save writes its data file) keep the tests able
 * to fail.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backends/cpu/cpu.h"
#include "import/onnx.h"
#include "onnx/onnx.pb-c.h"
#include "tools/stages.h"
#include "tests/check.h"

static char tmpdir[256];

/* ---- a small model: X f32[2,3] -> Relu -> Y, plus one initializer W and one optional extra node ---- */

typedef struct {
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset, *opsets[1];
    Onnx__ValueInfoProto x, y, *inputs[1], *outputs[1];
    Onnx__TypeProto x_type, y_type;
    Onnx__TypeProto__Tensor x_tt, y_tt;
    Onnx__TensorShapeProto x_shape;
    Onnx__TensorShapeProto__Dimension x_dims[3], *x_dim_ptrs[3];
    Onnx__TensorProto w, *inits[1];
    int64_t w_dims[4];
    float w_data[6];
    Onnx__NodeProto nodes[2], *node_ptrs[2];
    char *relu_in[1], *relu_out[1];
    Onnx__AttributeProto attr, *attr_ptrs[1];
    Onnx__GraphProto sub;
    Onnx__StringStringEntryProto ext[3], *ext_ptrs[3];
} mini;

static void mini_init(mini *t) {
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
    Onnx__AttributeProto ai = ONNX__ATTRIBUTE_PROTO__INIT;
    t->model = mi;
    t->graph = t->sub = gi;
    t->opset = oi;
    t->x = t->y = vi;
    t->x_type = t->y_type = ti;
    t->x_tt = t->y_tt = tti;
    t->x_shape = si;
    t->w = tpi;
    t->attr = ai;
    t->model.has_ir_version = 1;
    t->model.ir_version = 8;
    t->opset.has_version = 1;
    t->opset.version = 17;
    t->opsets[0] = &t->opset;
    t->model.n_opset_import = 1;
    t->model.opset_import = t->opsets;
    t->model.graph = &t->graph;
    for (int i = 0; i < 3; i++) {
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
    t->graph.n_input = t->graph.n_output = 1;
    t->graph.input = t->inputs;
    t->graph.output = t->outputs;

    t->w.name = "W";
    t->w.has_data_type = 1;
    t->w.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->w_dims[0] = 2;
    t->w_dims[1] = 3;
    t->w.n_dims = 2;
    t->w.dims = t->w_dims;
    for (int i = 0; i < 6; i++) t->w_data[i] = (float)i - 2.5f;
    t->w.has_raw_data = 1;
    t->w.raw_data.len = sizeof t->w_data;
    t->w.raw_data.data = (uint8_t *)t->w_data;
    t->inits[0] = &t->w;
    t->graph.n_initializer = 1;
    t->graph.initializer = t->inits;

    t->relu_in[0] = "X";
    t->relu_out[0] = "Y";
    for (int i = 0; i < 2; i++) {
        t->nodes[i] = ni;
        t->node_ptrs[i] = &t->nodes[i];
    }
    t->nodes[0].name = "relu0";
    t->nodes[0].op_type = "Relu";
    t->nodes[0].n_input = t->nodes[0].n_output = 1;
    t->nodes[0].input = t->relu_in;
    t->nodes[0].output = t->relu_out;
    t->graph.n_node = 1;
    t->graph.node = t->node_ptrs;
}

static void mini_external(mini *t, const char *location) {
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

static void tmp_path(char *buf, size_t size, const char *name) { snprintf(buf, size, "%s/%s", tmpdir, name); }

static void write_bytes(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size)) {
        printf("FAIL cannot write %s\n", path);
        exit(1);
    }
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

static void mini_write(const mini *t, const char *path) {
    size_t n = onnx__model_proto__get_packed_size(&t->model);
    uint8_t *data = malloc(n);
    onnx__model_proto__pack(&t->model, data);
    write_bytes(path, data, n);
    free(data);
}

/* Expects status st to be an error containing both words (word2 may be NULL); frees it. */
static void expect_error(sc_status st, const char *label, const char *word1, const char *word2) {
    if (!st) {
        printf("FAIL %s: accepted, expected an error containing '%s'\n", label, word1);
        failures++;
        return;
    }
    const char *msg = sc_status_message(st);
    if (!strstr(msg, word1) || (word2 && !strstr(msg, word2))) {
        printf("FAIL %s: message lacks '%s'%s%s%s: %s\n", label, word1, word2 ? " and '" : "", word2 ? word2 : "",
               word2 ? "'" : "", msg);
        failures++;
    } else {
        printf("ok   %s: %s\n", label, msg);
    }
    sc_status_free(st);
}

/* Writes t under tmpdir/name, loads it and expects refusal at load. */
static void expect_load_fail(const mini *t, const char *name, const char *word1, const char *word2) {
    char path[512];
    tmp_path(path, sizeof path, name);
    mini_write(t, path);
    sc_model *m = NULL;
    sc_status st = sc_model_load(path, &m);
    EXPECT(m == NULL);
    sc_model_free(m);
    expect_error(st, name, word1, word2);
}

/* Loads t (must succeed) and expects graph_prepare to refuse it. */
static void expect_prepare_fail(const mini *t, const char *name, const char *word1, const char *word2) {
    char path[512];
    tmp_path(path, sizeof path, name);
    mini_write(t, path);
    sc_model *m = NULL;
    sc_status st = sc_model_load(path, &m);
    if (st) {
        printf("FAIL %s: load refused (%s), expected graph_prepare to refuse\n", name, sc_status_message(st));
        failures++;
        sc_status_free(st);
        return;
    }
    sc_bind_options opt = {.batch = 1, .seq = 4, .eval = cpu_evaluator()};
    expect_error(graph_prepare(&m->graph, &opt), name, word1, word2);
    sc_model_free(m);
}

static sc_status load_path(const char *path) {
    sc_model *m = NULL;
    sc_status st = sc_model_load(path, &m);
    sc_model_free(m);
    return st;
}

/* ---- size limits ---- */

static void test_huge_dims(void) {
    mini t;
    mini_init(&t);
    t.w.has_raw_data = 0;
    t.w.n_dims = 1;
    t.w_dims[0] = (int64_t)1 << 62;
    expect_load_fail(&t, "dim_2_62.onnx", "'W'", "2^40");

    t.w.n_dims = 2;
    t.w_dims[0] = t.w_dims[1] = (int64_t)1 << 21; /* 2^42 elements */
    expect_load_fail(&t, "dims_2_42.onnx", "'W'", "2^40");

    t.w.n_dims = 4;
    t.w_dims[0] = t.w_dims[1] = t.w_dims[2] = t.w_dims[3] = (int64_t)1 << 16; /* 2^64: int64 overflow */
    expect_load_fail(&t, "dims_2_64.onnx", "'W'", "2^40");

    /* 10^12 f32 elements (under 2^40) with no data field: 4 TB that a small file cannot hold. */
    t.w.n_dims = 2;
    t.w_dims[0] = t.w_dims[1] = 1000000;
    expect_load_fail(&t, "numel_1e12.onnx", "'W'", "cannot fit in a file");
    t.w.has_raw_data = 1;
    t.w.raw_data.len = 0;
    expect_load_fail(&t, "numel_1e12_raw.onnx", "'W'", "raw_data has 0 bytes");
}

static void test_huge_constant_node(void) {
    mini t;
    mini_init(&t);
    Onnx__TensorProto v = ONNX__TENSOR_PROTO__INIT;
    int64_t dims[2] = {1000000, 1000000};
    v.has_data_type = 1;
    v.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    v.n_dims = 2;
    v.dims = dims;
    t.attr.name = "value";
    t.attr.has_type = 1;
    t.attr.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    t.attr.t = &v;
    t.attr_ptrs[0] = &t.attr;
    char *c_out[1] = {"C"};
    t.nodes[1].name = "big_const";
    t.nodes[1].op_type = "Constant";
    t.nodes[1].n_output = 1;
    t.nodes[1].output = c_out;
    t.nodes[1].n_attribute = 1;
    t.nodes[1].attribute = t.attr_ptrs;
    t.graph.n_node = 2;
    expect_load_fail(&t, "const_1e12.onnx", "big_const", "cannot fit in a file");
}

/* Inputs and shape inputs that pass the importer but would overflow in shape inference. */
static void test_shape_overflow(void) {
    mini t;
    mini_init(&t);
    t.x_shape.n_dim = 3;
    for (int i = 0; i < 3; i++) t.x_dims[i].dim_value = (int64_t)1 << 30; /* 2^90 elements */
    expect_prepare_fail(&t, "input_2_90.onnx", "'X'", "2^40");

    /* Reshape(X, shape = W) with W = [2^62, 2^62] (i64 initializer): the fuzzer's first finding. */
    mini_init(&t);
    int64_t shape[2] = {(int64_t)1 << 62, (int64_t)1 << 62};
    t.w.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    t.w.n_dims = 1;
    t.w_dims[0] = 2;
    t.w.raw_data.len = sizeof shape;
    t.w.raw_data.data = (uint8_t *)shape;
    char *r_in[2] = {"X", "W"};
    t.nodes[0].name = "reshape0";
    t.nodes[0].op_type = "Reshape";
    t.nodes[0].n_input = 2;
    t.nodes[0].input = r_in;
    expect_prepare_fail(&t, "reshape_2_62.onnx", "reshape0", "shape[0]");

    /* ConstantOfShape(W) with W = [2^21, 2^21]: 2^42 elements. */
    shape[0] = shape[1] = (int64_t)1 << 21;
    char *c_in[1] = {"W"};
    t.nodes[0].name = "cos0";
    t.nodes[0].op_type = "ConstantOfShape";
    t.nodes[0].n_input = 1;
    t.nodes[0].input = c_in;
    expect_prepare_fail(&t, "constant_of_shape_2_42.onnx", "cos0", "2^40");
}

/* Empty names inside a variadic input list (fuzzer finding: Max read values[-1]), and the NUL byte
 * that protobuf-c would otherwise turn into such an empty name. */
static void test_missing_variadic_inputs(void) {
    mini t;
    mini_init(&t);
    char *in[3] = {"X", "", "X"};
    t.nodes[0].n_input = 3;
    t.nodes[0].input = in;
    t.nodes[0].name = "max0";
    t.nodes[0].op_type = "Max";
    expect_prepare_fail(&t, "max_gap.onnx", "max0", "input 1 is missing");
    t.nodes[0].name = "concat0";
    t.nodes[0].op_type = "Concat";
    Onnx__AttributeProto axis = ONNX__ATTRIBUTE_PROTO__INIT, *axis_ptr[1] = {&axis};
    axis.name = "axis";
    axis.has_type = axis.has_i = 1;
    axis.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    t.nodes[0].n_attribute = 1;
    t.nodes[0].attribute = axis_ptr;
    expect_prepare_fail(&t, "concat_gap.onnx", "concat0", "input 1 is missing");

    mini_init(&t);
    size_t n = onnx__model_proto__get_packed_size(&t.model);
    uint8_t *buf = malloc(n);
    onnx__model_proto__pack(&t.model, buf);
    uint8_t *at = memmem(buf, n, "relu0", 5); /* the node's name, as wire bytes */
    EXPECT(at != NULL);
    if (at) at[2] = 0;
    sc_model *m = NULL;
    expect_error(sc_model_load_buffer(buf, n, "nul.onnx", NULL, &m), "nul_in_name", "NodeProto.name", "NUL byte");
    EXPECT(m == NULL);
    free(buf);
}

/* ---- nesting and strings ---- */

static void test_graph_attribute(void) {
    mini t;
    mini_init(&t);
    t.sub.name = "body";
    t.attr.name = "body";
    t.attr.has_type = 1;
    t.attr.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
    t.attr.g = &t.sub;
    t.attr_ptrs[0] = &t.attr;
    t.nodes[0].n_attribute = 1;
    t.nodes[0].attribute = t.attr_ptrs;
    expect_load_fail(&t, "relu_graph_attr.onnx", "'body'", "subgraph");
    t.attr.has_type = 0; /* IR v1 style: no declared type, the populated field decides */
    expect_load_fail(&t, "relu_graph_attr_untyped.onnx", "'body'", "subgraph");
    t.nodes[0].op_type = "If"; /* read now (import/onnx_graph.c), but a branch is missing */
    t.attr.name = "then_branch";
    expect_load_fail(&t, "if.onnx", "'else_branch'", "missing");
}

/* Wire-format writers for hand-made messages. */
typedef struct {
    uint8_t *p;
    size_t n, cap;
} wbuf;

static void wb_byte(wbuf *b, uint8_t v) {
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 4096;
        b->p = realloc(b->p, b->cap);
    }
    b->p[b->n++] = v;
}
static void wb_varint(wbuf *b, uint64_t v) {
    do {
        wb_byte(b, (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0)));
        v >>= 7;
    } while (v);
}
static size_t varint_len(uint64_t v) {
    size_t n = 1;
    while (v > 0x7f) v >>= 7, n++;
    return n;
}
static void wb_len_field(wbuf *b, int field, uint64_t len) {
    wb_varint(b, (uint64_t)field << 3 | 2);
    wb_varint(b, len);
}

/* ModelProto{opset_import{version 17}, graph = G1} where G_i = GraphProto{node{attribute{name "g",
 * type GRAPH, g = G_{i+1}}}} and G_depth is empty: 3 messages per level, written outside-in from the
 * sizes computed inside-out. */
static wbuf deep_model(int depth) {
    size_t *graph = malloc(sizeof(size_t) * (size_t)(depth + 2)), *attr = malloc(sizeof(size_t) * (size_t)(depth + 2)),
           *node = malloc(sizeof(size_t) * (size_t)(depth + 2));
    graph[depth] = 0;
    for (int i = depth - 1; i >= 0; i--) {
        attr[i] = 3 /* name "g" */ + 3 /* type: 2-byte tag, value */ + 1 + varint_len(graph[i + 1]) + graph[i + 1];
        node[i] = 1 + varint_len(attr[i]) + attr[i];
        graph[i] = 1 + varint_len(node[i]) + node[i];
    }
    wbuf b = {0};
    wb_len_field(&b, 8, 2); /* opset_import */
    wb_byte(&b, 2 << 3 | 0);
    wb_byte(&b, 17);
    wb_len_field(&b, 7, graph[0]);
    for (int i = 0; i < depth; i++) {
        wb_len_field(&b, 1, node[i]); /* GraphProto.node */
        wb_len_field(&b, 5, attr[i]); /* NodeProto.attribute */
        wb_len_field(&b, 1, 1);       /* AttributeProto.name = "g" */
        wb_byte(&b, 'g');
        wb_varint(&b, 20 << 3 | 0); /* AttributeProto.type = GRAPH (5), field 20: two-byte tag */
        wb_byte(&b, 5);
        wb_len_field(&b, 6, graph[i + 1]); /* AttributeProto.g */
    }
    free(graph);
    free(attr);
    free(node);
    return b;
}

static void test_deep_nesting(void) {
    /* The tag of field 20 is two bytes; fix up the hand count above if this fails. */
    EXPECT(varint_len(20 << 3) == 2);
    wbuf b = deep_model(100000);
    sc_model *m = NULL;
    sc_status st = sc_model_load_buffer(b.p, b.n, "deep.onnx", NULL, &m);
    EXPECT(m == NULL);
    expect_error(st, "deep_100k", "deep.onnx", "nested more than");
    free(b.p);
    /* Shallow nesting parses and reaches the subgraph rule, showing the bytes are well formed. */
    b = deep_model(3);
    st = sc_model_load_buffer(b.p, b.n, "deep3.onnx", NULL, &m);
    EXPECT(m == NULL);
    expect_error(st, "deep_3", "attribute 'g'", "subgraph");
    free(b.p);
}

static void test_huge_string(void) {
    /* ModelProto{opset_import{17}, graph{name: declares 2^62 bytes, holds 4}}. */
    wbuf b = {0};
    wb_len_field(&b, 8, 2);
    wb_byte(&b, 2 << 3 | 0);
    wb_byte(&b, 17);
    uint64_t huge = (uint64_t)1 << 62;
    wb_len_field(&b, 7, 1 + varint_len(huge) + 4);
    wb_len_field(&b, 2, huge);
    for (int i = 0; i < 4; i++) wb_byte(&b, 'x');
    sc_model *m = NULL;
    sc_status st = sc_model_load_buffer(b.p, b.n, "string.onnx", NULL, &m);
    EXPECT(m == NULL);
    expect_error(st, "huge_string", "GraphProto.name", "4611686018427387904 bytes");
    free(b.p);
}

/* ---- external data ---- */

static void test_external_paths(void) {
    char path[512], outside_dir[300], outside_file[512], lnk[512];
    float w[6] = {1, 2, 3, 4, 5, 6};
    mini t;
    mini_init(&t);
    /* model folder tmpdir/model, sensitive files in tmpdir/outside */
    snprintf(path, sizeof path, "%s/model", tmpdir);
    mkdir(path, 0755);
    snprintf(outside_dir, sizeof outside_dir, "%s/outside", tmpdir);
    mkdir(outside_dir, 0755);
    snprintf(outside_file, sizeof outside_file, "%s/w.bin", outside_dir);
    write_bytes(outside_file, w, sizeof w);

    mini_external(&t, "ok.bin");
    snprintf(path, sizeof path, "%s/model/ok.bin", tmpdir);
    write_bytes(path, w, sizeof w);
    EXPECT(!load_path((snprintf(lnk, sizeof lnk, "%s/model/ok.onnx", tmpdir), mini_write(&t, lnk), lnk)));

    struct {
        const char *loc, *name, *word;
    } bad[] = {
        {NULL, "abs.onnx", "absolute path"},
        {"../outside/w.bin", "dotdot.onnx", "'..'"},
        {"a/../../outside/w.bin", "nested_dotdot.onnx", "'..'"},
        {"a/b/../../../outside/w.bin", "nested_dotdot2.onnx", "'..'"},
        {"..\\outside\\w.bin", "backslash.onnx", "'..'"},
        {"sub/w.bin", "symlinked_parent.onnx", "outside the model folder"},
        {"hard.bin", "hardlink_out.onnx", "hard links"},
        {"inside_twice.bin", "hardlink_in.onnx", "hard links"},
        {"fifo.bin", "fifo.onnx", "not a regular file"},
    };
    snprintf(lnk, sizeof lnk, "%s/model/sub", tmpdir);
    EXPECT(symlink(outside_dir, lnk) == 0); /* model/sub -> outside: a symlinked parent folder */
    snprintf(lnk, sizeof lnk, "%s/model/hard.bin", tmpdir);
    EXPECT(link(outside_file, lnk) == 0); /* a hard link inside the folder to a file outside */
    snprintf(lnk, sizeof lnk, "%s/model/inside_twice.bin", tmpdir);
    EXPECT(link(path, lnk) == 0); /* ok.bin now has two links: refused by the nlink rule too */
    snprintf(lnk, sizeof lnk, "%s/model/fifo.bin", tmpdir);
    EXPECT(mkfifo(lnk, 0644) == 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mini_external(&t, bad[i].loc ? bad[i].loc : outside_file);
        char model[512];
        snprintf(model, sizeof model, "%s/model/%s", tmpdir, bad[i].name);
        mini_write(&t, model);
        expect_error(load_path(model), bad[i].name, bad[i].word, "'W'");
    }
}

/* ---- constant folding must not run unbounded work while loading ---- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ConstantOfShape(S1) -> A, ConstantOfShape(S2) -> B, op(A[, B]) -> C, Relu(C) -> Y: every input of
 * op is a constant and C is no graph output, so op is a folding candidate. */
static void fold_model(const char *name, const char *op, const int64_t *s1, int r1, const int64_t *s2, int r2,
                       Onnx__AttributeProto **attrs, size_t n_attrs) {
    mini t;
    mini_init(&t);
    Onnx__TensorProto shp[2] = {ONNX__TENSOR_PROTO__INIT, ONNX__TENSOR_PROTO__INIT}, *inits[2] = {&shp[0], &shp[1]};
    int64_t dims[2] = {r1, r2};
    const int64_t *vals[2] = {s1, s2};
    char *names[2] = {"S1", "S2"}, *outs[2] = {"A", "B"}, *op_in[2] = {"A", "B"}, *op_out[1] = {"C"}, *relu_in[1] = {"C"};
    Onnx__NodeProto nodes[4], *node_ptrs[4];
    for (int i = 0; i < 2; i++) {
        shp[i].name = names[i];
        shp[i].has_data_type = 1;
        shp[i].data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
        shp[i].n_dims = 1;
        shp[i].dims = &dims[i];
        shp[i].has_raw_data = 1;
        shp[i].raw_data.len = sizeof(int64_t) * (size_t)dims[i];
        shp[i].raw_data.data = (uint8_t *)vals[i];
    }
    for (int i = 0; i < 4; i++) {
        Onnx__NodeProto ni = ONNX__NODE_PROTO__INIT;
        nodes[i] = ni;
        node_ptrs[i] = &nodes[i];
    }
    for (int i = 0; i < 2; i++) {
        nodes[i].op_type = "ConstantOfShape";
        nodes[i].n_input = nodes[i].n_output = 1;
        nodes[i].input = &names[i];
        nodes[i].output = &outs[i];
    }
    nodes[2].name = "folded_op";
    nodes[2].op_type = (char *)op;
    nodes[2].n_input = s2 ? 2 : 1;
    nodes[2].input = op_in;
    nodes[2].n_output = 1;
    nodes[2].output = op_out;
    nodes[2].n_attribute = n_attrs;
    nodes[2].attribute = attrs;
    nodes[3].op_type = "Relu";
    nodes[3].n_input = nodes[3].n_output = 1;
    nodes[3].input = relu_in;
    nodes[3].output = t.relu_out;
    t.graph.n_initializer = s2 ? 2 : 1;
    t.graph.initializer = inits;
    t.graph.n_node = 4;
    t.graph.node = node_ptrs;
    if (!s2) { /* single-input op: drop the second ConstantOfShape */
        node_ptrs[1] = node_ptrs[2];
        node_ptrs[2] = node_ptrs[3];
        t.graph.n_node = 3;
    }
    char path[512];
    tmp_path(path, sizeof path, name);
    mini_write(&t, path);
    sc_model *m = NULL;
    sc_status st = sc_model_load(path, &m);
    EXPECT(!st);
    sc_status_free(st);
    if (!m) return;
    double t0 = now_s();
    sc_bind_options opt = {.batch = 1, .seq = 4, .eval = cpu_evaluator()};
    st = graph_prepare(&m->graph, &opt);
    double dt = now_s() - t0;
    printf("%s   %s: graph_prepare took %.2f s (%s)\n", dt < 5 ? "ok  " : "FAIL", name, dt,
           st ? sc_status_message(st) : "prepared");
    if (dt >= 5) failures++;
    sc_status_free(st);
    sc_model_free(m);
}

static void test_fold_work(void) {
    /* Conv of a constant [1,1,1000,1000] image with a [1,1,500,500] kernel: 6.3e10 multiply-adds,
     * 38 s here when folded (before the SC_FOLD_MAX_WORK limit). */
    int64_t x[4] = {1, 1, 1000, 1000}, w[4] = {1, 1, 500, 500};
    fold_model("fold_conv.onnx", "Conv", x, 4, w, 4, NULL, 0);
    /* MatMul [1,1e6] x [1e6,1]: a 10^6-long reduction into one element, cheap, so it may fold. */
    int64_t a[2] = {1, 1000000}, b[2] = {1000000, 1};
    fold_model("fold_matmul_thin.onnx", "MatMul", a, 2, b, 2, NULL, 0);
    /* MaxPool of a 1x1 constant with a 10^6 x 1 window and 10^6 padding on each side: 10^6 outputs
     * of 10^6 elements each. */
    int64_t one[4] = {1, 1, 1, 1}, ks[2] = {1000000, 1}, pads[4] = {999999, 0, 999999, 0};
    Onnx__AttributeProto at[2] = {ONNX__ATTRIBUTE_PROTO__INIT, ONNX__ATTRIBUTE_PROTO__INIT}, *atp[2] = {&at[0], &at[1]};
    at[0].name = "kernel_shape";
    at[0].has_type = at[1].has_type = 1;
    at[0].type = at[1].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    at[0].n_ints = 2;
    at[0].ints = ks;
    at[1].name = "pads";
    at[1].n_ints = 4;
    at[1].ints = pads;
    fold_model("fold_maxpool.onnx", "MaxPool", one, 4, NULL, 0, atp, 2);
}

/* ---- saving ---- */

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Every location string in the saved model's initializers must be want (or there must be none when
 * want is NULL). */
static void check_locations(const char *path, const char *want) {
    size_t n;
    uint8_t *buf = read_bytes(path, &n);
    Onnx__ModelProto *mp = buf ? onnx__model_proto__unpack(NULL, n, buf) : NULL;
    EXPECT(mp && mp->graph);
    int found = 0;
    for (size_t i = 0; mp && mp->graph && i < mp->graph->n_initializer; i++) {
        const Onnx__TensorProto *tp = mp->graph->initializer[i];
        for (size_t k = 0; k < tp->n_external_data; k++) {
            if (strcmp(tp->external_data[k]->key, "location") != 0) continue;
            found++;
            if (!want || strcmp(tp->external_data[k]->value, want) != 0) {
                printf("FAIL %s: location '%s', expected %s\n", path, tp->external_data[k]->value, want ? want : "none");
                failures++;
            }
        }
    }
    EXPECT(want ? found == 1 : found == 0);
    if (mp) onnx__model_proto__free_unpacked(mp, NULL);
    free(buf);
}

static void test_save_confinement(void) {
    float w[6] = {1, 2, 3, 4, 5, 6};
    char in_dir[300], out_dir[300], victim[512], path[600], model[512], out[512];
    snprintf(in_dir, sizeof in_dir, "%s/save_in", tmpdir);
    snprintf(out_dir, sizeof out_dir, "%s/save_out", tmpdir);
    snprintf(victim, sizeof victim, "%s/victim.txt", tmpdir);
    mkdir(in_dir, 0755);
    mkdir(out_dir, 0755);
    write_bytes(victim, "precious", 8);
    mini t;
    mini_init(&t);
    mini_external(&t, "weights_from_input.bin");
    snprintf(path, sizeof path, "%s/weights_from_input.bin", in_dir);
    write_bytes(path, w, sizeof w);
    snprintf(model, sizeof model, "%s/in.onnx", in_dir);
    mini_write(&t, model);
    sc_model *m = NULL;
    sc_status st = sc_model_load(model, &m);
    EXPECT(!st);
    sc_status_free(st);
    if (!m) return;
    int in_before = count_entries(in_dir);

    /* External save: the location is the output's own data file, never the input's string. */
    snprintf(out, sizeof out, "%s/out.onnx", out_dir);
    EXPECT(!sc_model_save(m, out, 16));
    check_locations(out, "out.onnx.data");
    snprintf(path, sizeof path, "%s/out.onnx.data", out_dir);
    EXPECT(access(path, F_OK) == 0);
    /* Inline save: no location at all. */
    snprintf(out, sizeof out, "%s/inline.onnx", out_dir);
    EXPECT(!sc_model_save(m, out, 0));
    check_locations(out, NULL);

    /* Symlinks planted at the temp name, at the data file and at the target itself point outside the
     * folder: they must be replaced, never written through. */
    char tmp_link[600];
    snprintf(out, sizeof out, "%s/planted.onnx", out_dir);
    snprintf(tmp_link, sizeof tmp_link, "%s.tmp.%ld", out, (long)getpid());
    EXPECT(symlink(victim, tmp_link) == 0);
    snprintf(path, sizeof path, "%s.data", out);
    EXPECT(symlink(victim, path) == 0);
    EXPECT(!sc_model_save(m, out, 16));
    snprintf(tmp_link, sizeof tmp_link, "%s/target_link.onnx", out_dir);
    EXPECT(symlink(victim, tmp_link) == 0);
    EXPECT(!sc_model_save(m, tmp_link, 0));
    struct stat sb;
    EXPECT(lstat(tmp_link, &sb) == 0 && S_ISREG(sb.st_mode));
    EXPECT(lstat(path, &sb) == 0 && S_ISREG(sb.st_mode));
    size_t n = 0;
    uint8_t *v = read_bytes(victim, &n);
    EXPECT(v && n == 8 && memcmp(v, "precious", 8) == 0);
    free(v);
    EXPECT(!load_path(out)); /* the planted-over save is a good model */

    EXPECT(count_entries(in_dir) == in_before); /* nothing written beside the input */
    sc_model_free(m);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) { return remove(p); }

int main(void) {
    sc_log_set_level(SC_LOG_ERROR);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/scorch_limits_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_huge_dims();
    test_huge_constant_node();
    test_shape_overflow();
    test_fold_work();
    test_missing_variadic_inputs();
    test_graph_attribute();
    test_deep_nesting();
    test_huge_string();
    test_external_paths();
    test_save_confinement();
    nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    if (failures) {
        printf("%d failures\n", failures);
        return 1;
    }
    printf("all import limit tests passed\n");
    return 0;
}
