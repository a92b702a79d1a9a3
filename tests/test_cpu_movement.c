/* CPU data-movement kernels (Transpose, Concat, Split, Slice, Gather, Expand, Pad, Trilu, Shape,
 * ConstantOfShape, Range, Resize, Reshape-as-copy) against naive index arithmetic written here and
 * values from the ONNX operator spec's examples (Resize cases beyond the spec's examples come from
 * onnx.reference, cross-checked with onnxruntime 1.31 when the test was written). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "tests/check.h"

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define F32S(...) ((const float[]){__VA_ARGS__})
#define I64S(...) ((const int64_t[]){__VA_ARGS__})
#define NONE ((sc_tensor){{0}, NULL})

static void *allocs[4096];
static int n_allocs;
static void *talloc(size_t n) {
    void *p = calloc(n ? n : 1, 1);
    if (!p || n_allocs == 4096) abort();
    allocs[n_allocs++] = p;
    return p;
}

static sc_tensor tmake(sc_dtype t, int rank, const int64_t *dims, const void *data) {
    sc_tensor x;
    x.desc = sc_desc_make(t, rank, dims);
    size_t nb = (size_t)sc_desc_bytes(&x.desc);
    x.data = talloc(nb);
    if (data) memcpy(x.data, data, nb);
    return x;
}

static sc_tensor ints(int n, const int64_t *v) { return tmake(SC_I64, 1, DIMS(n), v); }

/* Elements 0, 1, 2, ... of any dtype (stored through the dtype's own width). */
static sc_tensor tarange(sc_dtype t, int rank, const int64_t *dims) {
    sc_tensor x = tmake(t, rank, dims, NULL);
    int64_t n = sc_desc_numel(&x.desc);
    for (int64_t i = 0; i < n; i++) {
        switch (sc_dtype_size(t)) {
        case 1: ((uint8_t *)x.data)[i] = (uint8_t)i; break;
        case 2: ((uint16_t *)x.data)[i] = (uint16_t)i; break;
        case 4:
            if (t == SC_F32) ((float *)x.data)[i] = (float)i;
            else ((uint32_t *)x.data)[i] = (uint32_t)i;
            break;
        default: ((uint64_t *)x.data)[i] = (uint64_t)i * 0x100000001ull; break;
        }
    }
    return x;
}

static bool run_ok(const char *what, sc_op op, const sc_attrs *attrs, sc_tensor *in, int n_in, sc_tensor *out, int n_out) {
    sc_node n;
    memset(&n, 0, sizeof n);
    n.op = op;
    n.name = "test_node";
    n.attrs = attrs ? attrs : &sc_attrs_none;
    sc_status st = cpu_run_node(&n, in, n_in, out, n_out);
    CHECK(!st, "%s: %s", what, st ? sc_status_message(st) : "");
    bool ok = !st;
    sc_status_free(st);
    return ok;
}

static void run_fails(const char *what, sc_op op, const sc_attrs *attrs, sc_tensor *in, int n_in, sc_tensor *out,
                      int n_out, const char *needle) {
    sc_node n;
    memset(&n, 0, sizeof n);
    n.op = op;
    n.name = "test_node";
    n.attrs = attrs ? attrs : &sc_attrs_none;
    sc_status st = cpu_run_node(&n, in, n_in, out, n_out);
    CHECK(st && strstr(sc_status_message(st), needle) && strstr(sc_status_message(st), "test_node"),
          "%s: expected an error naming the node and containing '%s', got '%s'", what, needle,
          st ? sc_status_message(st) : "success");
    sc_status_free(st);
}

static void check_f32(const char *what, const sc_tensor *t, const float *want, double tol) {
    const float *g = t->data;
    for (int64_t i = 0; i < sc_desc_numel(&t->desc); i++)
        if (!(g[i] == want[i] || fabs((double)g[i] - want[i]) <= tol)) {
            CHECK(0, "%s: element %lld is %.9g, want %.9g", what, (long long)i, g[i], want[i]);
            return;
        }
}

static void check_bytes(const char *what, const sc_tensor *t, const void *want) {
    CHECK(!memcmp(t->data, want, (size_t)sc_desc_bytes(&t->desc)), "%s: output differs from the expected values", what);
}

static sc_attrs attrs0(void) {
    sc_attrs a;
    memset(&a, 0, sizeof a);
    return a;
}

/* ---- Transpose: random shapes and permutations against the index definition ---- */
static void test_transpose(void) {
    static const sc_dtype types[] = {SC_F32, SC_U8, SC_F16, SC_I64};
    for (int trial = 0; trial < 60; trial++) {
        int rank = 1 + rand() % 5;
        int64_t dims[SC_MAX_RANK], perm[SC_MAX_RANK], od[SC_MAX_RANK];
        for (int i = 0; i < rank; i++) {
            dims[i] = 1 + rand() % (trial < 50 ? 7 : 70);
            perm[i] = i;
        }
        for (int i = rank - 1; i > 0; i--) {
            int j = rand() % (i + 1);
            int64_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        for (int i = 0; i < rank; i++) od[i] = dims[perm[i]];
        sc_dtype t = types[trial % 4];
        sc_tensor x = tarange(t, rank, dims), y = tmake(t, rank, od, NULL);
        sc_attrs a = attrs0();
        a.transpose.n_perm = rank;
        memcpy(a.transpose.perm, perm, sizeof perm);
        if (!run_ok("Transpose", SC_OP_TRANSPOSE, &a, &x, 1, &y, 1)) continue;
        size_t es = sc_dtype_size(t);
        int64_t n = sc_desc_numel(&y.desc), idx[SC_MAX_RANK], xs[SC_MAX_RANK], s = 1;
        for (int i = rank - 1; i >= 0; i--) {
            xs[i] = s;
            s *= dims[i];
        }
        for (int64_t f = 0; f < n; f++) {
            int64_t r = f, off = 0;
            for (int i = rank - 1; i >= 0; i--) {
                idx[i] = r % od[i];
                r /= od[i];
                off += idx[i] * xs[perm[i]];
            }
            if (memcmp((char *)y.data + f * (int64_t)es, (char *)x.data + off * (int64_t)es, es)) {
                CHECK(0, "Transpose trial %d (rank %d, %s): element %lld wrong", trial, rank, sc_dtype_name(t), (long long)f);
                break;
            }
        }
    }
    /* Default perm reverses the dims. */
    sc_tensor x = tarange(SC_F32, 2, DIMS(2, 3)), y = tmake(SC_F32, 2, DIMS(3, 2), NULL);
    if (run_ok("Transpose default", SC_OP_TRANSPOSE, NULL, &x, 1, &y, 1))
        check_f32("Transpose default", &y, F32S(0, 3, 1, 4, 2, 5), 0);
}

static void test_concat_split(void) {
    sc_tensor in[2] = {tarange(SC_F32, 2, DIMS(2, 2)), tmake(SC_F32, 2, DIMS(2, 1), F32S(10, 11))};
    sc_tensor out = tmake(SC_F32, 2, DIMS(2, 3), NULL);
    sc_attrs a = attrs0();
    a.axis.axis = -1;
    if (run_ok("Concat", SC_OP_CONCAT, &a, in, 2, &out, 1)) check_f32("Concat axis -1", &out, F32S(0, 1, 10, 2, 3, 11), 0);
    sc_tensor parts[2] = {tmake(SC_F32, 2, DIMS(2, 1), NULL), tmake(SC_F32, 2, DIMS(2, 2), NULL)};
    a.axis.axis = 1;
    if (run_ok("Split", SC_OP_SPLIT, &a, &out, 1, parts, 2)) {
        check_f32("Split part 0", &parts[0], F32S(0, 2), 0);
        check_f32("Split part 1", &parts[1], F32S(1, 10, 3, 11), 0);
    }
    a.axis.axis = 0;
    sc_tensor rows[2] = {tmake(SC_F32, 2, DIMS(1, 3), NULL), tmake(SC_F32, 2, DIMS(1, 3), NULL)};
    if (run_ok("Split axis 0", SC_OP_SPLIT, &a, &out, 1, rows, 2)) check_f32("Split axis 0", &rows[1], F32S(2, 3, 11), 0);
    sc_tensor bad = tmake(SC_F32, 2, DIMS(2, 4), NULL);
    a.axis.axis = 1;
    run_fails("Concat wrong size", SC_OP_CONCAT, &a, in, 2, &bad, 1, "add up");
}

static void test_slice(void) {
    /* ONNX spec examples on data [[1,2,3,4],[5,6,7,8]]. */
    sc_tensor d = tmake(SC_F32, 2, DIMS(2, 4), F32S(1, 2, 3, 4, 5, 6, 7, 8));
    sc_tensor in[5] = {d, ints(2, I64S(1, 0)), ints(2, I64S(2, 3)), ints(2, I64S(0, 1)), ints(2, I64S(1, 2))};
    sc_tensor y = tmake(SC_F32, 2, DIMS(1, 2), NULL);
    if (run_ok("Slice example 1", SC_OP_SLICE, NULL, in, 5, &y, 1)) check_f32("Slice example 1", &y, F32S(5, 7), 0);
    sc_tensor in2[3] = {d, ints(2, I64S(0, 1)), ints(2, I64S(-1, 1000))};
    sc_tensor y2 = tmake(SC_F32, 2, DIMS(1, 3), NULL);
    if (run_ok("Slice example 2", SC_OP_SLICE, NULL, in2, 3, &y2, 1)) check_f32("Slice example 2", &y2, F32S(2, 3, 4), 0);
    /* Negative steps: reverse all with INT64_MIN end; start clamped to dim - 1 with step -3. */
    sc_tensor r = tarange(SC_F32, 1, DIMS(10));
    sc_tensor in3[5] = {r, ints(1, I64S(-1)), ints(1, I64S(INT64_MIN)), ints(1, I64S(0)), ints(1, I64S(-1))};
    sc_tensor y3 = tmake(SC_F32, 1, DIMS(10), NULL);
    if (run_ok("Slice reverse", SC_OP_SLICE, NULL, in3, 5, &y3, 1)) check_f32("Slice reverse", &y3, F32S(9, 8, 7, 6, 5, 4, 3, 2, 1, 0), 0);
    sc_tensor in4[5] = {r, ints(1, I64S(20)), ints(1, I64S(0)), ints(1, I64S(0)), ints(1, I64S(-3))};
    sc_tensor y4 = tmake(SC_F32, 1, DIMS(3), NULL);
    if (run_ok("Slice step -3", SC_OP_SLICE, NULL, in4, 5, &y4, 1)) check_f32("Slice step -3", &y4, F32S(9, 6, 3), 0);
    /* 3-D: x[:, ::-1, 1:3] on i64 data, checked against index arithmetic. */
    sc_tensor x = tarange(SC_I64, 3, DIMS(2, 3, 4));
    sc_tensor in5[5] = {x, ints(2, I64S(-1, 1)), ints(2, I64S(INT64_MIN, 3)), ints(2, I64S(1, -1)), ints(2, I64S(-1, 1))};
    sc_tensor y5 = tmake(SC_I64, 3, DIMS(2, 3, 2), NULL);
    if (run_ok("Slice 3-D", SC_OP_SLICE, NULL, in5, 5, &y5, 1)) {
        uint64_t want[12];
        int k = 0;
        for (int i = 0; i < 2; i++)
            for (int j = 2; j >= 0; j--)
                for (int l = 1; l < 3; l++) want[k++] = (uint64_t)(i * 12 + j * 4 + l) * 0x100000001ull;
        check_bytes("Slice 3-D", &y5, want);
    }
    sc_tensor in6[5] = {r, ints(1, I64S(0)), ints(1, I64S(5)), ints(1, I64S(0)), ints(1, I64S(0))};
    run_fails("Slice step 0", SC_OP_SLICE, NULL, in6, 5, &y4, 1, "step is 0");
}

/* Slices whose axes slice_geom_copy merges into long runs (whole planes, a channel range, both axes
 * reversed) or must not merge (one axis reversed, a step of 2, a partial inner range), on a
 * (2, 6, 3, 4) arange against index arithmetic (an end of INT64_MIN runs a reversed axis to 0). */
static void slice_merge_case(const char *what, const int64_t *st, const int64_t *en, const int64_t *sp) {
    const int64_t dims[4] = {2, 6, 3, 4};
    sc_tensor x = tarange(SC_F32, 4, dims);
    int64_t idx[4][8], n[4], out[4];
    for (int a = 0; a < 4; a++) {
        n[a] = 0;
        int64_t end = en[a] == INT64_MIN ? -1 : en[a]; /* INT64_MIN: past index 0, going down */
        for (int64_t i = st[a]; sp[a] > 0 ? i < end : i > end; i += sp[a]) idx[a][n[a]++] = i;
        out[a] = n[a];
    }
    float want[2 * 6 * 3 * 4];
    int k = 0;
    for (int a = 0; a < n[0]; a++)
        for (int b = 0; b < n[1]; b++)
            for (int c = 0; c < n[2]; c++)
                for (int d = 0; d < n[3]; d++) want[k++] = (float)(((idx[0][a] * 6 + idx[1][b]) * 3 + idx[2][c]) * 4 + idx[3][d]);
    sc_tensor in[5] = {x, ints(4, st), ints(4, en), ints(4, I64S(0, 1, 2, 3)), ints(4, sp)};
    sc_tensor y = tmake(SC_F32, 4, out, NULL);
    if (run_ok(what, SC_OP_SLICE, NULL, in, 5, &y, 1)) check_f32(what, &y, want, 0);
}

static void test_slice_merged_axes(void) {
    const int64_t whole[4] = {0, 0, 0, 0}, ends[4] = {2, 6, 3, 4}, ones[4] = {1, 1, 1, 1};
    slice_merge_case("Slice whole", whole, ends, ones);
    slice_merge_case("Slice channels 2:5", I64S(0, 2, 0, 0), I64S(2, 5, 3, 4), ones);
    slice_merge_case("Slice one sample, channels", I64S(1, 1, 0, 0), I64S(2, 4, 3, 4), ones);
    slice_merge_case("Slice H and W reversed", I64S(0, 0, 2, 3), I64S(2, 6, INT64_MIN, INT64_MIN), I64S(1, 1, -1, -1));
    slice_merge_case("Slice H reversed", I64S(0, 1, 2, 0), I64S(2, 4, INT64_MIN, 4), I64S(1, 1, -1, 1));
    slice_merge_case("Slice W step 2", I64S(0, 0, 0, 0), I64S(2, 6, 3, 4), I64S(1, 1, 1, 2));
    slice_merge_case("Slice W 1:3", I64S(0, 3, 0, 1), I64S(2, 6, 3, 3), ones);
    slice_merge_case("Slice all reversed", I64S(1, 5, 2, 3), I64S(INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN), I64S(-1, -1, -1, -1));
    slice_merge_case("Slice single element", I64S(1, 4, 2, 3), I64S(2, 5, 3, 4), ones);
}

static void test_gather(void) {
    /* ONNX spec example (axis 0) with a negative index, and axis 1 on a 3x3. */
    sc_tensor d = tmake(SC_F32, 2, DIMS(3, 2), F32S(1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f));
    int64_t idx[] = {0, 1, -2, 2};
    sc_tensor in[2] = {d, tmake(SC_I64, 2, DIMS(2, 2), idx)};
    sc_tensor y = tmake(SC_F32, 3, DIMS(2, 2, 2), NULL);
    if (run_ok("Gather axis 0", SC_OP_GATHER, NULL, in, 2, &y, 1))
        check_f32("Gather axis 0", &y, F32S(1.0f, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f, 4.5f, 5.7f), 0);
    sc_tensor d2 = tmake(SC_F32, 2, DIMS(3, 3), F32S(1, 2, 3, 4, 5, 6, 7, 8, 9));
    int32_t i2[] = {0, -1};
    sc_tensor in2[2] = {d2, tmake(SC_I32, 2, DIMS(1, 2), i2)};
    sc_tensor y2 = tmake(SC_F32, 3, DIMS(3, 1, 2), NULL);
    sc_attrs a = attrs0();
    a.axis.axis = 1;
    if (run_ok("Gather axis 1", SC_OP_GATHER, &a, in2, 2, &y2, 1)) check_f32("Gather axis 1", &y2, F32S(1, 3, 4, 6, 7, 9), 0);
    int64_t oob[] = {0, 3};
    sc_tensor in3[2] = {d2, tmake(SC_I64, 1, DIMS(2), oob)};
    sc_tensor y3 = tmake(SC_F32, 2, DIMS(3, 2), NULL);
    run_fails("Gather out of range", SC_OP_GATHER, &a, in3, 2, &y3, 1, "index 3");
}

static void test_expand_reshape(void) {
    sc_tensor in[2] = {tmake(SC_F32, 2, DIMS(3, 1), F32S(1, 2, 3)), ints(3, I64S(2, 1, 6))};
    sc_tensor y = tmake(SC_F32, 3, DIMS(2, 3, 6), NULL);
    if (run_ok("Expand", SC_OP_EXPAND, NULL, in, 2, &y, 1)) {
        float want[36];
        for (int i = 0; i < 36; i++) want[i] = (float)((i / 6) % 3 + 1);
        check_f32("Expand [3,1]->[2,3,6]", &y, want, 0);
    }
    sc_tensor x = tarange(SC_F32, 2, DIMS(2, 3));
    sc_tensor rin[2] = {x, ints(1, I64S(6))};
    sc_tensor r = tmake(SC_F32, 1, DIMS(6), NULL);
    if (run_ok("Reshape", SC_OP_RESHAPE, NULL, rin, 2, &r, 1)) check_f32("Reshape", &r, F32S(0, 1, 2, 3, 4, 5), 0);
    sc_tensor wrong = tmake(SC_F32, 1, DIMS(5), NULL);
    run_fails("Reshape size mismatch", SC_OP_RESHAPE, NULL, rin, 2, &wrong, 1, "different size");
}

/* Tile with constant repeats (numpy.tile's values): [[0,1,2],[3,4,5]] by [2, 2], and by [1, 0]. */
static void test_tile(void) {
    sc_tensor x = tarange(SC_F32, 2, DIMS(2, 3));
    sc_tensor in[2] = {x, ints(2, I64S(2, 2))};
    sc_tensor y = tmake(SC_F32, 2, DIMS(4, 6), NULL);
    sc_attrs a = attrs0();
    if (run_ok("Tile", SC_OP_TILE, &a, in, 2, &y, 1))
        check_f32("Tile", &y, F32S(0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5, 0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5), 0);
    sc_tensor in0[2] = {x, ints(2, I64S(1, 0))};
    sc_tensor y0 = tmake(SC_F32, 2, DIMS(2, 0), NULL);
    run_ok("Tile by zero", SC_OP_TILE, &a, in0, 2, &y0, 1);
}

static void test_pad_trilu(void) {
    /* ONNX spec examples: pads [0, 2, 0, 0] on a 3x2. */
    sc_tensor d = tmake(SC_F32, 2, DIMS(3, 2), F32S(1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f));
    sc_tensor in[3] = {d, ints(4, I64S(0, 2, 0, 0)), tmake(SC_F32, 0, DIMS(0), F32S(0))};
    sc_tensor y = tmake(SC_F32, 2, DIMS(3, 4), NULL);
    sc_attrs a = attrs0();
    a.pad.mode = SC_PAD_CONSTANT;
    if (run_ok("Pad constant", SC_OP_PAD, &a, in, 3, &y, 1))
        check_f32("Pad constant", &y, F32S(0, 0, 1.0f, 1.2f, 0, 0, 2.3f, 3.4f, 0, 0, 4.5f, 5.7f), 0);
    a.pad.mode = SC_PAD_REFLECT;
    if (run_ok("Pad reflect", SC_OP_PAD, &a, in, 3, &y, 1))
        check_f32("Pad reflect", &y, F32S(1.0f, 1.2f, 1.0f, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f, 4.5f, 5.7f, 4.5f, 5.7f), 0);
    a.pad.mode = SC_PAD_EDGE;
    if (run_ok("Pad edge", SC_OP_PAD, &a, in, 3, &y, 1))
        check_f32("Pad edge", &y, F32S(1.0f, 1.0f, 1.0f, 1.2f, 2.3f, 2.3f, 2.3f, 3.4f, 4.5f, 4.5f, 4.5f, 5.7f), 0);
    /* Constant 9 on both axes with a crop: pads [1, -1, 0, 1] on [[0,1,2],[3,4,5]] -> 3x3. */
    sc_tensor x = tarange(SC_F32, 2, DIMS(2, 3));
    sc_tensor in2[3] = {x, ints(4, I64S(1, -1, 0, 1)), tmake(SC_F32, 0, DIMS(0), F32S(9))};
    sc_tensor y2 = tmake(SC_F32, 2, DIMS(3, 3), NULL);
    a.pad.mode = SC_PAD_CONSTANT;
    if (run_ok("Pad crop", SC_OP_PAD, &a, in2, 3, &y2, 1)) check_f32("Pad crop", &y2, F32S(9, 9, 9, 1, 2, 9, 4, 5, 9), 0);
    /* wrap: pads [0, 2, 0, 1] on [[0,1,2]] -> [1,2,0,1,2,0]. */
    sc_tensor x3 = tarange(SC_F32, 2, DIMS(1, 3));
    sc_tensor in3[2] = {x3, ints(4, I64S(0, 2, 0, 1))};
    sc_tensor y3 = tmake(SC_F32, 2, DIMS(1, 6), NULL);
    a.pad.mode = SC_PAD_WRAP;
    if (run_ok("Pad wrap", SC_OP_PAD, &a, in3, 2, &y3, 1)) check_f32("Pad wrap", &y3, F32S(1, 2, 0, 1, 2, 0), 0);
    /* Trilu (spec: triu_one_row / tril with k). */
    sc_tensor t = tmake(SC_F32, 2, DIMS(3, 4), F32S(4, 7, 3, 7, 9, 1, 2, 2, 8, 6, 9, 3));
    sc_tensor tin[2] = {t, tmake(SC_I64, 0, DIMS(0), I64S(1))};
    sc_tensor ty = tmake(SC_F32, 2, DIMS(3, 4), NULL);
    a = attrs0();
    a.trilu.upper = true;
    if (run_ok("Trilu upper k=1", SC_OP_TRILU, &a, tin, 2, &ty, 1))
        check_f32("Trilu upper k=1", &ty, F32S(0, 7, 3, 7, 0, 0, 2, 2, 0, 0, 0, 3), 0);
    a.trilu.upper = false;
    tin[1] = tmake(SC_I64, 0, DIMS(0), I64S(-1));
    if (run_ok("Trilu lower k=-1", SC_OP_TRILU, &a, tin, 2, &ty, 1))
        check_f32("Trilu lower k=-1", &ty, F32S(0, 0, 0, 0, 9, 0, 0, 0, 8, 6, 0, 0), 0);
}

static void test_fill(void) {
    sc_tensor x = tmake(SC_F32, 4, DIMS(2, 3, 4, 5), NULL);
    sc_tensor y = tmake(SC_I64, 1, DIMS(2), NULL);
    sc_attrs a = attrs0();
    a.shape.start = 1;
    a.shape.end = -1;
    a.shape.has_end = true;
    if (run_ok("Shape", SC_OP_SHAPE, &a, &x, 1, &y, 1)) check_bytes("Shape start 1 end -1", &y, I64S(3, 4));
    a = attrs0();
    a.fill.dtype = SC_I32;
    a.fill.value = 7;
    sc_tensor s = ints(2, I64S(2, 2)), c = tmake(SC_I32, 2, DIMS(2, 2), NULL);
    int32_t sevens[] = {7, 7, 7, 7};
    if (run_ok("ConstantOfShape", SC_OP_CONSTANT_OF_SHAPE, &a, &s, 1, &c, 1)) check_bytes("ConstantOfShape", &c, sevens);
    /* Range spec examples: (3, 9, 3) -> [3, 6]; (10, 4, -2) -> [10, 8, 6]. */
    sc_tensor rin[3] = {tmake(SC_F32, 0, DIMS(0), F32S(3)), tmake(SC_F32, 0, DIMS(0), F32S(9)), tmake(SC_F32, 0, DIMS(0), F32S(3))};
    sc_tensor r = tmake(SC_F32, 1, DIMS(2), NULL);
    if (run_ok("Range f32", SC_OP_RANGE, NULL, rin, 3, &r, 1)) check_f32("Range f32", &r, F32S(3, 6), 0);
    sc_tensor rin2[3] = {tmake(SC_I64, 0, DIMS(0), I64S(10)), tmake(SC_I64, 0, DIMS(0), I64S(4)), tmake(SC_I64, 0, DIMS(0), I64S(-2))};
    sc_tensor r2 = tmake(SC_I64, 1, DIMS(3), NULL);
    if (run_ok("Range i64", SC_OP_RANGE, NULL, rin2, 3, &r2, 1)) check_bytes("Range i64", &r2, I64S(10, 8, 6));
}

/* ---- Resize ---- */
static void resize_case(const char *what, sc_resize_mode mode, sc_coord_transform ct, sc_nearest_mode nm,
                        const sc_tensor *x, const float *scales, const int64_t *sizes, const float *roi, int rank,
                        const int64_t *out_dims, const float *want) {
    sc_attrs a = attrs0();
    a.resize.mode = mode;
    a.resize.coord = ct;
    a.resize.nearest_mode = nm;
    a.resize.cubic_coeff_a = -0.75f;
    a.resize.extrapolation_value = 10.0f;
    sc_tensor in[4] = {*x, roi ? tmake(SC_F32, 1, DIMS(2 * rank), roi) : NONE,
                       scales ? tmake(SC_F32, 1, DIMS(rank), scales) : NONE, sizes ? ints(rank, sizes) : NONE};
    sc_tensor y = tmake(SC_F32, rank, out_dims, NULL);
    if (run_ok(what, SC_OP_RESIZE, &a, in, 4, &y, 1)) check_f32(what, &y, want, 2e-5);
}

static void test_resize(void) {
    sc_tensor x22 = tmake(SC_F32, 4, DIMS(1, 1, 2, 2), F32S(1, 2, 3, 4));
    sc_tensor x24 = tmake(SC_F32, 4, DIMS(1, 1, 2, 4), F32S(1, 2, 3, 4, 5, 6, 7, 8));
    sc_tensor x44 = tarange(SC_F32, 4, DIMS(1, 1, 4, 4));
    float *p = x44.data;
    for (int i = 0; i < 16; i++) p[i] += 1; /* 1..16 as in the spec's 4x4 examples */
    const sc_nearest_mode RPF = SC_NEAREST_ROUND_PREFER_FLOOR;
    /* ONNX spec: resize_upsample_scales_nearest / resize_downsample_scales_nearest. */
    resize_case("nearest up x(2,3)", SC_RESIZE_NEAREST, SC_CT_HALF_PIXEL, RPF, &x22, F32S(1, 1, 2, 3), NULL, NULL, 4,
                DIMS(1, 1, 4, 6), F32S(1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4));
    resize_case("nearest down 0.6", SC_RESIZE_NEAREST, SC_CT_HALF_PIXEL, RPF, &x24, F32S(1, 1, 0.6f, 0.6f), NULL, NULL, 4,
                DIMS(1, 1, 1, 2), F32S(1, 3));
    /* ONNX spec: resize_upsample_scales_linear, ..._align_corners, resize_downsample_scales_linear(_align_corners). */
    resize_case("linear up half_pixel", SC_RESIZE_LINEAR, SC_CT_HALF_PIXEL, RPF, &x22, F32S(1, 1, 2, 2), NULL, NULL, 4,
                DIMS(1, 1, 4, 4),
                F32S(1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f, 3.25f, 3.5f, 3, 3.25f, 3.75f, 4));
    resize_case("linear up align_corners", SC_RESIZE_LINEAR, SC_CT_ALIGN_CORNERS, RPF, &x22, F32S(1, 1, 2, 2), NULL, NULL, 4,
                DIMS(1, 1, 4, 4),
                F32S(1, 1.33333333f, 1.66666667f, 2, 1.66666667f, 2, 2.33333333f, 2.66666667f, 2.33333333f, 2.66666667f,
                     3, 3.33333333f, 3, 3.33333333f, 3.66666667f, 4));
    resize_case("linear down half_pixel", SC_RESIZE_LINEAR, SC_CT_HALF_PIXEL, RPF, &x24, F32S(1, 1, 0.6f, 0.6f), NULL, NULL, 4,
                DIMS(1, 1, 1, 2), F32S(2.6666665f, 4.3333331f));
    resize_case("linear down align_corners", SC_RESIZE_LINEAR, SC_CT_ALIGN_CORNERS, RPF, &x24, F32S(1, 1, 0.6f, 0.6f), NULL,
                NULL, 4, DIMS(1, 1, 1, 2), F32S(1, 3.142857f));
    resize_case("linear down pytorch_half_pixel", SC_RESIZE_LINEAR, SC_CT_PYTORCH_HALF_PIXEL, RPF, &x44, NULL,
                I64S(1, 1, 3, 1), NULL, 4, DIMS(1, 1, 3, 1), F32S(1.666667f, 7, 12.33333f));
    /* From onnx.reference (matches onnxruntime): every nearest_mode and the remaining transforms. */
    resize_case("nearest asymmetric round_prefer_ceil", SC_RESIZE_NEAREST, SC_CT_ASYMMETRIC, SC_NEAREST_ROUND_PREFER_CEIL,
                &x44, NULL, I64S(1, 1, 7, 8), NULL, 4, DIMS(1, 1, 7, 8),
                F32S(1, 2, 2, 3, 3, 4, 4, 4, 5, 6, 6, 7, 7, 8, 8, 8, 5, 6, 6, 7, 7, 8, 8, 8, 9, 10, 10, 11, 11, 12, 12, 12,
                     9, 10, 10, 11, 11, 12, 12, 12, 13, 14, 14, 15, 15, 16, 16, 16, 13, 14, 14, 15, 15, 16, 16, 16));
    resize_case("nearest align_corners floor", SC_RESIZE_NEAREST, SC_CT_ALIGN_CORNERS, SC_NEAREST_FLOOR, &x44, NULL,
                I64S(1, 1, 7, 8), NULL, 4, DIMS(1, 1, 7, 8),
                F32S(1, 1, 1, 2, 2, 3, 3, 4, 1, 1, 1, 2, 2, 3, 3, 4, 5, 5, 5, 6, 6, 7, 7, 8, 5, 5, 5, 6, 6, 7, 7, 8, 9, 9, 9,
                     10, 10, 11, 11, 12, 9, 9, 9, 10, 10, 11, 11, 12, 13, 13, 13, 14, 14, 15, 15, 16));
    resize_case("nearest half_pixel ceil", SC_RESIZE_NEAREST, SC_CT_HALF_PIXEL, SC_NEAREST_CEIL, &x44, NULL,
                I64S(1, 1, 3, 3), NULL, 4, DIMS(1, 1, 3, 3), F32S(6, 7, 8, 10, 11, 12, 14, 15, 16));
    resize_case("linear asymmetric", SC_RESIZE_LINEAR, SC_CT_ASYMMETRIC, RPF, &x44, F32S(1, 1, 1.5f, 0.75f), NULL, NULL, 4,
                DIMS(1, 1, 6, 3),
                F32S(1, 2.333333f, 3.666667f, 3.666667f, 5, 6.333333f, 6.333333f, 7.666667f, 9, 9, 10.33333f, 11.66667f,
                     11.66667f, 13, 14.33333f, 13, 14.33333f, 15.66667f));
    resize_case("linear half_pixel_symmetric", SC_RESIZE_LINEAR, SC_CT_HALF_PIXEL_SYMMETRIC, RPF, &x44,
                F32S(1, 1, 2.3f, 0.6f), NULL, NULL, 4, DIMS(1, 1, 9, 2),
                F32S(1.666667f, 3.333333f, 2.449275f, 4.115942f, 4.188406f, 5.855072f, 5.927536f, 7.594203f, 7.666667f,
                     9.333333f, 9.405797f, 11.07246f, 11.14493f, 12.81159f, 12.88406f, 14.55072f, 13.66667f, 15.33333f));
    resize_case("linear tf_crop_and_resize", SC_RESIZE_LINEAR, SC_CT_TF_CROP_AND_RESIZE, RPF, &x44, NULL, I64S(1, 1, 3, 3),
                F32S(0, 0, 0.4f, 0.6f, 1, 1, 1.2f, 1.7f), 4, DIMS(1, 1, 3, 3), F32S(7.6f, 10, 10, 12.4f, 10, 10, 10, 10, 10));
    /* An inf read with weight 0 must not turn into NaN (0 x inf): asymmetric x2 reads row 1 and
     * column 1 with weight 0 for the even outputs, so row 0 and column 0 stay finite. */
    sc_tensor x22inf = tmake(SC_F32, 4, DIMS(1, 1, 2, 2), F32S(1, 2, 3, INFINITY));
    resize_case("linear asymmetric x2, an inf behind zero weights", SC_RESIZE_LINEAR, SC_CT_ASYMMETRIC, RPF, &x22inf,
                F32S(1, 1, 2, 2), NULL, NULL, 4, DIMS(1, 1, 4, 4),
                F32S(1, 1.5f, 2, 2, 2, INFINITY, INFINITY, INFINITY, 3, INFINITY, INFINITY, INFINITY, 3, INFINITY, INFINITY,
                     INFINITY));
    sc_attrs a = attrs0();
    a.resize.mode = SC_RESIZE_CUBIC;
    sc_tensor in[4] = {x22, NONE, tmake(SC_F32, 1, DIMS(4), F32S(1, 1, 2, 2)), NONE};
    sc_tensor y = tmake(SC_F32, 4, DIMS(1, 1, 4, 4), NULL);
    run_fails("Resize cubic", SC_OP_RESIZE, &a, in, 4, &y, 1, "cubic");
}

int main(void) {
    srand(99);
    test_transpose();
    test_concat_split();
    test_slice();
    test_slice_merged_axes();
    test_gather();
    test_expand_reshape();
    test_pad_trilu();
    test_tile();
    test_fill();
    test_resize();
    for (int i = 0; i < n_allocs; i++) free(allocs[i]);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_cpu_movement: all checks passed\n");
    return 0;
}
