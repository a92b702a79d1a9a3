/* CPU element-wise kernels (unary, Cast, binary with broadcasting, Where, reductions, Dropout)
 * against naive reference loops written here and hand-computed values from the ONNX operator spec.
 * Each kernel is called through cpu_run_node with a hand-built sc_node; failures are counted and
 * turned into the exit code. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "tests/check.h"

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define F32S(...) ((const float[]){__VA_ARGS__})

/* Every test buffer, freed at exit so leak checkers stay quiet. */
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

static sc_node nmake(sc_op op) {
    sc_node n;
    memset(&n, 0, sizeof n);
    n.op = op;
    n.name = "test_node";
    return n;
}

static float frand(void) { return (float)rand() / (float)RAND_MAX * 4.0f - 2.0f; }
static sc_tensor trand(int rank, const int64_t *dims) {
    sc_tensor x = tmake(SC_F32, rank, dims, NULL);
    float *p = x.data;
    for (int64_t i = 0; i < sc_desc_numel(&x.desc); i++) p[i] = frand();
    return x;
}

/* Runs a node; returns true on success, records a failure (with the message) otherwise. */
static bool run_ok(const char *what, sc_op op, const sc_attrs *attrs, sc_tensor *in, int n_in, sc_tensor *out, int n_out) {
    sc_node n = nmake(op);
    n.attrs = attrs ? attrs : &sc_attrs_none;
    sc_status st = cpu_run_node(&n, in, n_in, out, n_out);
    CHECK(!st, "%s: %s", what, st ? sc_status_message(st) : "");
    bool ok = !st;
    sc_status_free(st);
    return ok;
}

/* Expects an error whose message contains `needle`. */
static void run_fails(const char *what, sc_op op, const sc_attrs *attrs, sc_tensor *in, int n_in, sc_tensor *out,
                      int n_out, const char *needle) {
    sc_node n = nmake(op);
    n.attrs = attrs ? attrs : &sc_attrs_none;
    sc_status st = cpu_run_node(&n, in, n_in, out, n_out);
    CHECK(st && strstr(sc_status_message(st), needle) && strstr(sc_status_message(st), "test_node"),
          "%s: expected an error naming the node and containing '%s', got '%s'", what, needle,
          st ? sc_status_message(st) : "success");
    sc_status_free(st);
}

static void check_f32(const char *what, const sc_tensor *t, const float *want, double tol) {
    const float *g = t->data;
    int64_t n = sc_desc_numel(&t->desc);
    for (int64_t i = 0; i < n; i++) {
        bool same = g[i] == want[i] || (isnan(want[i]) && isnan(g[i])) || fabs((double)g[i] - want[i]) <= tol * (1 + fabs(want[i]));
        if (!same) {
            CHECK(0, "%s: element %lld is %.9g, want %.9g", what, (long long)i, g[i], want[i]);
            return;
        }
    }
}

static void check_bytes(const char *what, const sc_tensor *t, const void *want) {
    CHECK(!memcmp(t->data, want, (size_t)sc_desc_bytes(&t->desc)), "%s: output differs from the expected values", what);
}

/* Naive broadcast reference: the element of x (rank rx) read by output index idx (rank r). */
static float bget(const sc_tensor *x, const int64_t *idx, int r) {
    int64_t off = 0;
    for (int i = 0; i < x->desc.rank; i++) {
        int64_t d = x->desc.dims[i], j = idx[i + r - x->desc.rank];
        off = off * d + (d == 1 ? 0 : j);
    }
    return ((const float *)x->data)[off];
}

static void unravel(int64_t f, const sc_desc *d, int64_t *idx) {
    for (int i = d->rank - 1; i >= 0; i--) {
        idx[i] = f % d->dims[i];
        f /= d->dims[i];
    }
}

typedef enum { B_ADD, B_SUB, B_MUL, B_DIV } bop;
static float bref(bop o, float a, float b) { return o == B_ADD ? a + b : o == B_SUB ? a - b : o == B_MUL ? a * b : a / b; }

static void test_broadcast_case(bop o, int ra, const int64_t *da, int rb, const int64_t *db, int ro, const int64_t *dout) {
    static const sc_op ops[] = {SC_OP_ADD, SC_OP_SUB, SC_OP_MUL, SC_OP_DIV};
    sc_tensor in[2] = {trand(ra, da), trand(rb, db)};
    sc_tensor out = tmake(SC_F32, ro, dout, NULL);
    char what[128];
    snprintf(what, sizeof what, "%s broadcast rank %d x rank %d -> %lld elements", sc_op_name(ops[o]), ra, rb,
             (long long)sc_desc_numel(&out.desc));
    if (!run_ok(what, ops[o], NULL, in, 2, &out, 1)) return;
    int64_t n = sc_desc_numel(&out.desc), idx[SC_MAX_RANK];
    float *want = talloc((size_t)n * sizeof(float));
    for (int64_t f = 0; f < n; f++) {
        unravel(f, &out.desc, idx);
        want[f] = bref(o, bget(&in[0], idx, ro), bget(&in[1], idx, ro));
    }
    check_f32(what, &out, want, 1e-6);
}

static void test_binary_broadcast(void) {
    test_broadcast_case(B_ADD, 3, DIMS(2, 3, 4), 2, DIMS(3, 1), 3, DIMS(2, 3, 4));
    test_broadcast_case(B_SUB, 2, DIMS(3, 1), 2, DIMS(1, 4), 2, DIMS(3, 4));
    test_broadcast_case(B_MUL, 0, DIMS(0), 1, DIMS(5), 1, DIMS(5));             /* scalar * vector */
    test_broadcast_case(B_DIV, 1, DIMS(5), 0, DIMS(0), 1, DIMS(5));             /* vector / scalar */
    test_broadcast_case(B_ADD, 4, DIMS(2, 3, 5, 7), 4, DIMS(1, 3, 1, 1), 4, DIMS(2, 3, 5, 7));
    /* Large enough for the threaded path: ResNet bias add and GPT [B,T,C] + [C]. */
    test_broadcast_case(B_ADD, 4, DIMS(2, 16, 40, 40), 4, DIMS(1, 16, 1, 1), 4, DIMS(2, 16, 40, 40));
    test_broadcast_case(B_MUL, 3, DIMS(4, 64, 200), 1, DIMS(200), 3, DIMS(4, 64, 200));
    test_broadcast_case(B_SUB, 3, DIMS(4, 64, 200), 3, DIMS(4, 64, 200), 3, DIMS(4, 64, 200));
    test_broadcast_case(B_DIV, 3, DIMS(3, 1, 5), 3, DIMS(1, 4, 1), 3, DIMS(3, 4, 5));
    test_broadcast_case(B_ADD, 5, DIMS(2, 1, 3, 1, 2), 4, DIMS(4, 1, 1, 2), 5, DIMS(2, 4, 3, 1, 2));
    test_broadcast_case(B_ADD, 3, DIMS(2, 1, 40000), 2, DIMS(3, 40000), 3, DIMS(2, 3, 40000));
    /* Incompatible shapes fail with a message. */
    sc_tensor in[2] = {trand(1, DIMS(3)), trand(1, DIMS(4))};
    sc_tensor out = tmake(SC_F32, 1, DIMS(4), NULL);
    run_fails("Add [3]+[4]", SC_OP_ADD, NULL, in, 2, &out, 1, "broadcast");
}

static void test_int_div(void) {
    int32_t a[] = {7, -7, 7, -7, INT32_MIN, 0}, b[] = {2, 2, -2, -2, -1, 5}, want[] = {3, -3, -3, 3, INT32_MIN, 0};
    sc_tensor in[2] = {tmake(SC_I32, 1, DIMS(6), a), tmake(SC_I32, 1, DIMS(6), b)};
    sc_tensor out = tmake(SC_I32, 1, DIMS(6), NULL);
    if (run_ok("Div i32", SC_OP_DIV, NULL, in, 2, &out, 1)) check_bytes("Div i32 truncates toward zero", &out, want);
    int64_t a64[] = {-9, 9}, b64[] = {4, 4}, w64[] = {-2, 2};
    sc_tensor in64[2] = {tmake(SC_I64, 1, DIMS(2), a64), tmake(SC_I64, 1, DIMS(2), b64)};
    sc_tensor out64 = tmake(SC_I64, 1, DIMS(2), NULL);
    if (run_ok("Div i64", SC_OP_DIV, NULL, in64, 2, &out64, 1)) check_bytes("Div i64", &out64, w64);
    uint8_t ua[] = {200, 7}, ub[] = {3, 2}, uw[] = {66, 3};
    sc_tensor inu[2] = {tmake(SC_U8, 1, DIMS(2), ua), tmake(SC_U8, 1, DIMS(2), ub)};
    sc_tensor outu = tmake(SC_U8, 1, DIMS(2), NULL);
    if (run_ok("Div u8", SC_OP_DIV, NULL, inu, 2, &outu, 1)) check_bytes("Div u8", &outu, uw);
    int32_t z[] = {1, 0, 1, 1, 1, 1};
    sc_tensor inz[2] = {in[0], tmake(SC_I32, 1, DIMS(6), z)};
    run_fails("Div i32 by zero", SC_OP_DIV, NULL, inz, 2, &out, 1, "division by zero");
    /* Add on int64 and uint8 (wrapping) through the same broadcasting path. */
    uint8_t x8[] = {250, 1}, y8[] = {10}, w8[] = {4, 11};
    sc_tensor i8[2] = {tmake(SC_U8, 1, DIMS(2), x8), tmake(SC_U8, 1, DIMS(1), y8)};
    sc_tensor o8 = tmake(SC_U8, 1, DIMS(2), NULL);
    if (run_ok("Add u8", SC_OP_ADD, NULL, i8, 2, &o8, 1)) check_bytes("Add u8 wraps", &o8, w8);
}

static void test_pow(void) {
    /* Float base, int64 exponent (ONNX pow_types_float32_int64: [1,2,3]^[4,5,6] = [1,32,729]). */
    int64_t e[] = {4, 5, 6};
    sc_tensor in[2] = {tmake(SC_F32, 1, DIMS(3), F32S(1, 2, 3)), tmake(SC_I64, 1, DIMS(3), e)};
    sc_tensor out = tmake(SC_F32, 1, DIMS(3), NULL);
    if (run_ok("Pow f32^i64", SC_OP_POW, NULL, in, 2, &out, 1)) check_f32("Pow f32^i64", &out, F32S(1, 32, 729), 0);
    /* Scalar exponent 2 (the square fast path) and a fractional one. */
    sc_tensor in2[2] = {tmake(SC_F32, 1, DIMS(3), F32S(-3, 0.5f, 4)), tmake(SC_F32, 0, DIMS(0), F32S(2))};
    if (run_ok("Pow x^2", SC_OP_POW, NULL, in2, 2, &out, 1)) check_f32("Pow x^2", &out, F32S(9, 0.25f, 16), 0);
    in2[1] = tmake(SC_F32, 0, DIMS(0), F32S(0.5f));
    if (run_ok("Pow x^0.5", SC_OP_POW, NULL, in2, 2, &out, 1)) check_f32("Pow x^0.5", &out, F32S(NAN, 0.70710678f, 2), 1e-6);
    /* Integer base with a float exponent truncates (pow_types_int32_float32: [1,2,3]^[4,5,6]). */
    int32_t b[] = {1, 2, 3}, w[] = {1, 32, 729}, wf[] = {1, 1, 1};
    sc_tensor in3[2] = {tmake(SC_I32, 1, DIMS(3), b), tmake(SC_F32, 1, DIMS(3), F32S(4, 5, 6))};
    sc_tensor out3 = tmake(SC_I32, 1, DIMS(3), NULL);
    if (run_ok("Pow i32^f32", SC_OP_POW, NULL, in3, 2, &out3, 1)) check_bytes("Pow i32^f32", &out3, w);
    in3[1] = tmake(SC_F32, 1, DIMS(3), F32S(0.5f, 0.5f, 0.5f)); /* sqrt(2) = 1.41 -> 1 */
    if (run_ok("Pow i32^0.5", SC_OP_POW, NULL, in3, 2, &out3, 1)) check_bytes("Pow i32^0.5 truncates", &out3, wf);
}

static void test_max_min(void) {
    /* Variadic with broadcasting and NaN propagation. */
    sc_tensor in[3] = {tmake(SC_F32, 1, DIMS(3), F32S(3, 2, 1)), tmake(SC_F32, 1, DIMS(3), F32S(1, NAN, 3)),
                       tmake(SC_F32, 2, DIMS(2, 1), F32S(2, 4))};
    sc_tensor out = tmake(SC_F32, 2, DIMS(2, 3), NULL);
    if (run_ok("Max x3", SC_OP_MAX, NULL, in, 3, &out, 1)) check_f32("Max x3", &out, F32S(3, NAN, 3, 4, NAN, 4), 0);
    if (run_ok("Min x3", SC_OP_MIN, NULL, in, 3, &out, 1)) check_f32("Min x3", &out, F32S(1, NAN, 1, 1, NAN, 1), 0);
    sc_tensor o1 = tmake(SC_F32, 1, DIMS(3), NULL);
    if (run_ok("Max x1", SC_OP_MAX, NULL, in, 1, &o1, 1)) check_f32("Max x1", &o1, F32S(3, 2, 1), 0);
    int64_t a[] = {5, -7}, b[] = {-1, 3}, w[] = {5, 3};
    sc_tensor ii[2] = {tmake(SC_I64, 1, DIMS(2), a), tmake(SC_I64, 1, DIMS(2), b)};
    sc_tensor oi = tmake(SC_I64, 1, DIMS(2), NULL);
    if (run_ok("Max i64", SC_OP_MAX, NULL, ii, 2, &oi, 1)) check_bytes("Max i64", &oi, w);
}

static void test_compare_logic_where(void) {
    sc_tensor in[2] = {tmake(SC_F32, 2, DIMS(2, 2), F32S(1, 2, 3, 4)), tmake(SC_F32, 1, DIMS(2), F32S(2, 2))};
    sc_tensor out = tmake(SC_BOOL, 2, DIMS(2, 2), NULL);
    uint8_t eq[] = {0, 1, 0, 0}, lt[] = {1, 0, 0, 0}, gt[] = {0, 0, 1, 1};
    if (run_ok("Equal", SC_OP_EQUAL, NULL, in, 2, &out, 1)) check_bytes("Equal", &out, eq);
    if (run_ok("Less", SC_OP_LESS, NULL, in, 2, &out, 1)) check_bytes("Less", &out, lt);
    if (run_ok("Greater", SC_OP_GREATER, NULL, in, 2, &out, 1)) check_bytes("Greater", &out, gt);
    uint8_t a[] = {0, 0, 1, 1}, b[] = {0, 1, 0, 1}, wand[] = {0, 0, 0, 1}, wor[] = {0, 1, 1, 1}, wnot[] = {1, 1, 0, 0};
    sc_tensor lb[2] = {tmake(SC_BOOL, 1, DIMS(4), a), tmake(SC_BOOL, 1, DIMS(4), b)};
    sc_tensor ob = tmake(SC_BOOL, 1, DIMS(4), NULL);
    if (run_ok("And", SC_OP_AND, NULL, lb, 2, &ob, 1)) check_bytes("And", &ob, wand);
    if (run_ok("Or", SC_OP_OR, NULL, lb, 2, &ob, 1)) check_bytes("Or", &ob, wor);
    if (run_ok("Not", SC_OP_NOT, NULL, lb, 1, &ob, 1)) check_bytes("Not", &ob, wnot);
    /* Where: cond [2,1], X [1,3], Y scalar -> [2,3]; and an i64 case with every input full size. */
    uint8_t cnd[] = {1, 0};
    sc_tensor w[3] = {tmake(SC_BOOL, 2, DIMS(2, 1), cnd), tmake(SC_F32, 2, DIMS(1, 3), F32S(1, 2, 3)),
                      tmake(SC_F32, 0, DIMS(0), F32S(-1))};
    sc_tensor ow = tmake(SC_F32, 2, DIMS(2, 3), NULL);
    if (run_ok("Where", SC_OP_WHERE, NULL, w, 3, &ow, 1)) check_f32("Where broadcast", &ow, F32S(1, 2, 3, -1, -1, -1), 0);
    uint8_t c2[] = {1, 0, 1};
    int64_t x2[] = {1, 2, 3}, y2[] = {10, 20, 30}, w2[] = {1, 20, 3};
    sc_tensor wi[3] = {tmake(SC_BOOL, 1, DIMS(3), c2), tmake(SC_I64, 1, DIMS(3), x2), tmake(SC_I64, 1, DIMS(3), y2)};
    sc_tensor owi = tmake(SC_I64, 1, DIMS(3), NULL);
    if (run_ok("Where i64", SC_OP_WHERE, NULL, wi, 3, &owi, 1)) check_bytes("Where i64", &owi, w2);
}

/* Unary float kernels against double-precision references on random inputs. */
static void test_unary(void) {
    const int64_t n = 70000; /* above the threading threshold */
    sc_tensor x = trand(1, DIMS(n));
    float *xp = x.data;
    xp[0] = 0.0f;
    xp[1] = -0.0f;
    sc_tensor y = tmake(SC_F32, 1, DIMS(n), NULL);
    float *want = talloc((size_t)n * sizeof(float));
    struct {
        sc_op op;
        bool tanh_approx;
    } cases[] = {{SC_OP_RELU, 0}, {SC_OP_LEAKY_RELU, 0}, {SC_OP_SIGMOID, 0}, {SC_OP_TANH, 0}, {SC_OP_ERF, 0},
                 {SC_OP_GELU, 0}, {SC_OP_GELU, 1}, {SC_OP_EXP, 0}, {SC_OP_NEG, 0}, {SC_OP_RECIPROCAL, 0}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        sc_attrs at;
        memset(&at, 0, sizeof at);
        at.leaky_relu.alpha = 0.1f;
        if (cases[k].op == SC_OP_GELU) at.gelu.tanh_approx = cases[k].tanh_approx;
        for (int64_t i = 0; i < n; i++) {
            double v = xp[i], r;
            switch (cases[k].op) {
            case SC_OP_RELU: r = v > 0 ? v : 0; break;
            case SC_OP_LEAKY_RELU: r = v >= 0 ? v : 0.1f * v; break;
            case SC_OP_SIGMOID: r = 1 / (1 + exp(-v)); break;
            case SC_OP_TANH: r = tanh(v); break;
            case SC_OP_ERF: r = erf(v); break;
            case SC_OP_GELU:
                r = cases[k].tanh_approx ? 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)))
                                         : 0.5 * v * (1 + erf(v / sqrt(2)));
                break;
            case SC_OP_EXP: r = exp(v); break;
            case SC_OP_NEG: r = -v; break;
            default: r = 1 / v; break;
            }
            want[i] = (float)r;
        }
        char what[64];
        snprintf(what, sizeof what, "%s%s", sc_op_name(cases[k].op), cases[k].tanh_approx ? "(tanh)" : "");
        if (run_ok(what, cases[k].op, &at, &x, 1, &y, 1)) check_f32(what, &y, want, 2e-6);
    }
    sc_tensor sq = tmake(SC_F32, 1, DIMS(4), F32S(4, 0.25f, 2, -1));
    sc_tensor sqo = tmake(SC_F32, 1, DIMS(4), NULL);
    if (run_ok("Sqrt", SC_OP_SQRT, NULL, &sq, 1, &sqo, 1)) check_f32("Sqrt", &sqo, F32S(2, 0.5f, 1.41421356f, NAN), 1e-7);
    if (run_ok("Log", SC_OP_LOG, NULL, &sq, 1, &sqo, 1)) check_f32("Log", &sqo, F32S(1.38629436f, -1.38629436f, 0.69314718f, NAN), 1e-7);
    /* Clip (ONNX spec example): [-2, 0, 2] clipped to [-1, 1]; min only; int32 with max only. */
    sc_tensor cin[3] = {tmake(SC_F32, 1, DIMS(3), F32S(-2, 0, 2)), tmake(SC_F32, 0, DIMS(0), F32S(-1)),
                        tmake(SC_F32, 0, DIMS(0), F32S(1))};
    sc_tensor co = tmake(SC_F32, 1, DIMS(3), NULL);
    if (run_ok("Clip", SC_OP_CLIP, NULL, cin, 3, &co, 1)) check_f32("Clip", &co, F32S(-1, 0, 1), 0);
    cin[2].data = NULL;
    if (run_ok("Clip min only", SC_OP_CLIP, NULL, cin, 3, &co, 1)) check_f32("Clip min only", &co, F32S(-1, 0, 2), 0);
    int32_t ci[] = {-5, 3, 9}, cmax[] = {4}, cw[] = {-5, 3, 4};
    sc_tensor cii[3] = {tmake(SC_I32, 1, DIMS(3), ci), {{0}, NULL}, tmake(SC_I32, 0, DIMS(0), cmax)};
    sc_tensor cio = tmake(SC_I32, 1, DIMS(3), NULL);
    if (run_ok("Clip i32", SC_OP_CLIP, NULL, cii, 3, &cio, 1)) check_bytes("Clip i32 max only", &cio, cw);
    int64_t ni[] = {5, -3, INT64_MIN}, nw[] = {-5, 3, INT64_MIN};
    sc_tensor nin = tmake(SC_I64, 1, DIMS(3), ni), nout = tmake(SC_I64, 1, DIMS(3), NULL);
    if (run_ok("Neg i64", SC_OP_NEG, NULL, &nin, 1, &nout, 1)) check_bytes("Neg i64", &nout, nw);
    sc_tensor s = tmake(SC_STRING, 1, DIMS(1), NULL);
    run_fails("Relu on string", SC_OP_RELU, NULL, &s, 1, &s, 1, "not supported");
}

static void test_cast(void) {
    /* float -> int truncates toward zero. */
    sc_tensor x = tmake(SC_F32, 1, DIMS(6), F32S(-1.7f, 1.7f, 2.5f, -2.5f, 0.0f, 1e9f));
    int32_t w32[] = {-1, 1, 2, -2, 0, 1000000000};
    sc_tensor y = tmake(SC_I32, 1, DIMS(6), NULL);
    sc_attrs at;
    memset(&at, 0, sizeof at);
    at.cast.to = SC_I32;
    if (run_ok("Cast f32->i32", SC_OP_CAST, &at, &x, 1, &y, 1)) check_bytes("Cast f32->i32", &y, w32);
    uint8_t wb[] = {1, 1, 1, 1, 0, 1};
    sc_tensor yb = tmake(SC_BOOL, 1, DIMS(6), NULL);
    if (run_ok("Cast f32->bool", SC_OP_CAST, &at, &x, 1, &yb, 1)) check_bytes("Cast f32->bool", &yb, wb);
    /* int64 2^24 + 1 rounds to nearest even in f32; f64 0.1 rounds to the f32 nearest. */
    int64_t big[] = {16777217, -3};
    sc_tensor xi = tmake(SC_I64, 1, DIMS(2), big), yf = tmake(SC_F32, 1, DIMS(2), NULL);
    if (run_ok("Cast i64->f32", SC_OP_CAST, &at, &xi, 1, &yf, 1)) check_f32("Cast i64->f32", &yf, F32S(16777216.0f, -3), 0);
    double d[] = {0.1, -1e300};
    sc_tensor xd = tmake(SC_F64, 1, DIMS(2), d);
    if (run_ok("Cast f64->f32", SC_OP_CAST, &at, &xd, 1, &yf, 1)) check_f32("Cast f64->f32", &yf, F32S(0.1f, -INFINITY), 0);
    /* bool -> f32 and f32 -> u8. */
    uint8_t bb[] = {1, 0};
    sc_tensor xb = tmake(SC_BOOL, 1, DIMS(2), bb);
    if (run_ok("Cast bool->f32", SC_OP_CAST, &at, &xb, 1, &yf, 1)) check_f32("Cast bool->f32", &yf, F32S(1, 0), 0);
    /* f16: 0.1 -> 0.0999755859375 (nearest half), 65504 is the largest half. */
    sc_tensor xh = tmake(SC_F32, 1, DIMS(2), F32S(0.1f, 65504.0f)), h = tmake(SC_F16, 1, DIMS(2), NULL);
    sc_tensor back = tmake(SC_F32, 1, DIMS(2), NULL);
    if (run_ok("Cast f32->f16", SC_OP_CAST, &at, &xh, 1, &h, 1) && run_ok("Cast f16->f32", SC_OP_CAST, &at, &h, 1, &back, 1))
        check_f32("Cast f32->f16->f32", &back, F32S(0.0999755859375f, 65504.0f), 0);
    /* bf16 rounds to nearest even: 1 + 2^-8 -> 1, 1 + 3 * 2^-8 -> 1 + 2^-6. */
    sc_tensor xbf = tmake(SC_F32, 1, DIMS(2), F32S(1.00390625f, 1.01171875f)), bf = tmake(SC_BF16, 1, DIMS(2), NULL);
    if (run_ok("Cast f32->bf16", SC_OP_CAST, &at, &xbf, 1, &bf, 1) && run_ok("Cast bf16->f32", SC_OP_CAST, &at, &bf, 1, &back, 1))
        check_f32("Cast f32->bf16->f32", &back, F32S(1.0f, 1.015625f), 0);
}

/* Naive reduction: out[o] = sum over reduced axes, with keepdims only changing the desc. */
static void test_reduce_case(sc_op op, int rank, const int64_t *dims, const int64_t *axes, int naxes, bool keepdims) {
    sc_tensor x = trand(rank, dims);
    bool red[SC_MAX_RANK] = {false};
    for (int i = 0; i < naxes; i++) red[axes[i] < 0 ? axes[i] + rank : axes[i]] = true;
    if (naxes == 0)
        for (int i = 0; i < rank; i++) red[i] = true;
    int64_t od[SC_MAX_RANK], kd[SC_MAX_RANK];
    int orank = 0;
    for (int i = 0; i < rank; i++) {
        kd[i] = red[i] ? 1 : dims[i];
        if (keepdims) od[orank++] = kd[i];
        else if (!red[i]) od[orank++] = dims[i];
    }
    sc_tensor in[2] = {x, naxes ? tmake(SC_I64, 1, DIMS(naxes), axes) : (sc_tensor){{0}, NULL}};
    sc_tensor y = tmake(SC_F32, orank, od, NULL);
    sc_attrs at;
    memset(&at, 0, sizeof at);
    at.reduce.keepdims = keepdims;
    char what[96];
    snprintf(what, sizeof what, "%s rank %d naxes %d keepdims %d", sc_op_name(op), rank, naxes, keepdims);
    if (!run_ok(what, op, &at, in, 2, &y, 1)) return;
    sc_desc kdesc = sc_desc_make(SC_F32, rank, kd);
    int64_t on = sc_desc_numel(&kdesc), cnt = sc_desc_numel(&x.desc) / on, idx[SC_MAX_RANK];
    double *acc = talloc((size_t)on * sizeof(double));
    for (int64_t f = 0; f < sc_desc_numel(&x.desc); f++) {
        unravel(f, &x.desc, idx);
        int64_t o = 0;
        for (int i = 0; i < rank; i++) o = o * kd[i] + (red[i] ? 0 : idx[i]);
        acc[o] += ((float *)x.data)[f];
    }
    float *want = talloc((size_t)on * sizeof(float));
    for (int64_t o = 0; o < on; o++) want[o] = (float)(op == SC_OP_REDUCE_MEAN ? acc[o] / (double)cnt : acc[o]);
    check_f32(what, &y, want, 1e-5);
}

static void test_reduce(void) {
    test_reduce_case(SC_OP_REDUCE_SUM, 3, DIMS(2, 3, 4), DIMS(1), 1, true);
    test_reduce_case(SC_OP_REDUCE_SUM, 3, DIMS(2, 3, 4), DIMS(1), 1, false);
    test_reduce_case(SC_OP_REDUCE_MEAN, 3, DIMS(2, 3, 4), DIMS(0, 2), 2, true);
    test_reduce_case(SC_OP_REDUCE_MEAN, 3, DIMS(2, 3, 4), DIMS(0, 2), 2, false);
    test_reduce_case(SC_OP_REDUCE_MEAN, 3, DIMS(2, 3, 4), DIMS(0), 0, true); /* no axes: everything */
    test_reduce_case(SC_OP_REDUCE_SUM, 3, DIMS(2, 3, 4), DIMS(0), 0, false);
    test_reduce_case(SC_OP_REDUCE_MEAN, 3, DIMS(8, 128, 96), DIMS(-1), 1, true);   /* LayerNorm-style */
    test_reduce_case(SC_OP_REDUCE_MEAN, 4, DIMS(4, 32, 17, 19), DIMS(2, 3), 2, true); /* spatial mean */
    test_reduce_case(SC_OP_REDUCE_SUM, 2, DIMS(300, 600), DIMS(0), 1, false);     /* kept innermost, > block */
    test_reduce_case(SC_OP_REDUCE_SUM, 4, DIMS(3, 5, 2, 7), DIMS(0, 2), 2, true);  /* alternating */
    test_reduce_case(SC_OP_REDUCE_SUM, 4, DIMS(3, 1, 2, 7), DIMS(1), 1, false);   /* size-1 axis */
    /* noop_with_empty_axes copies; integer sums and means (mean truncates). */
    sc_tensor x = tmake(SC_F32, 1, DIMS(3), F32S(1, 2, 3)), y = tmake(SC_F32, 1, DIMS(3), NULL);
    sc_attrs at;
    memset(&at, 0, sizeof at);
    at.reduce.noop_with_empty_axes = true;
    at.reduce.keepdims = true;
    if (run_ok("ReduceSum noop", SC_OP_REDUCE_SUM, &at, &x, 1, &y, 1)) check_f32("ReduceSum noop", &y, F32S(1, 2, 3), 0);
    int32_t xi[] = {1, 2, 4, -3, -5, -6}, ws[] = {7, -14}, wm[] = {2, -4};
    int64_t ax[] = {1};
    sc_tensor ii[2] = {tmake(SC_I32, 2, DIMS(2, 3), xi), tmake(SC_I64, 1, DIMS(1), ax)};
    sc_tensor oi = tmake(SC_I32, 1, DIMS(2), NULL);
    at.reduce.noop_with_empty_axes = false;
    at.reduce.keepdims = false;
    if (run_ok("ReduceSum i32", SC_OP_REDUCE_SUM, &at, ii, 2, &oi, 1)) check_bytes("ReduceSum i32", &oi, ws);
    if (run_ok("ReduceMean i32", SC_OP_REDUCE_MEAN, &at, ii, 2, &oi, 1)) check_bytes("ReduceMean i32", &oi, wm);
    int64_t bad[] = {3};
    ii[1] = tmake(SC_I64, 1, DIMS(1), bad);
    run_fails("ReduceSum bad axis", SC_OP_REDUCE_SUM, &at, ii, 2, &oi, 1, "out of range");
}

static void test_dropout(void) {
    sc_tensor in[3] = {tmake(SC_F32, 1, DIMS(3), F32S(1, 2, 3)), tmake(SC_F32, 0, DIMS(0), F32S(0.3f)),
                       tmake(SC_BOOL, 0, DIMS(0), NULL)};
    sc_tensor out[2] = {tmake(SC_F32, 1, DIMS(3), NULL), tmake(SC_BOOL, 1, DIMS(3), NULL)};
    uint8_t ones[] = {1, 1, 1};
    if (run_ok("Dropout", SC_OP_DROPOUT, NULL, in, 3, out, 2)) {
        check_f32("Dropout output", &out[0], F32S(1, 2, 3), 0);
        check_bytes("Dropout mask", &out[1], ones);
    }
    /* Training mode: every element is either dropped (0, mask false) or scaled by 1/(1-ratio)
     * (mask true). The mask's statistics and reproducibility are tested in test_grad_nn.c. */
    *(uint8_t *)in[2].data = 1;
    if (run_ok("Dropout training", SC_OP_DROPOUT, NULL, in, 3, out, 2)) {
        const float *y = out[0].data;
        const uint8_t *m = out[1].data;
        for (int i = 0; i < 3; i++) {
            float kept = (float)(i + 1) / 0.7f;
            CHECK(m[i] ? fabsf(y[i] - kept) <= 1e-6f * kept : y[i] == 0.0f,
                  "Dropout training element %d: %g with mask %d", i, y[i], m[i]);
        }
    }
}

int main(void) {
    srand(1234);
    test_binary_broadcast();
    test_int_div();
    test_pow();
    test_max_min();
    test_compare_logic_where();
    test_unary();
    test_cast();
    test_reduce();
    test_dropout();
    for (int i = 0; i < n_allocs; i++) free(allocs[i]);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_cpu_elementwise: all checks passed\n");
    return 0;
}
