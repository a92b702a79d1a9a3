/* bf16 MatMul, Gemm and Conv on the CPU's bf16 dot products (backends/cpu/cpu_nn_bgemm.c,
 * cpu_nn_conv.c), against a float64 reference of the same bf16 inputs, and against the widened f32
 * path of the same node.
 *   - where /proc/cpuinfo lists avx512_bf16 or amx_bf16 the native path must be taken (a build that
 *     silently widened would pass every other check here);
 *   - MatMul from 1x1x1 to (197, 768) @ (768, 256), tiles of unequal edges, batched with B's batch
 *     (attention's Q @ K^T) and with A broadcast; Y in bf16 and in f32;
 *   - Gemm with every transpose, alpha and beta, and C as a row, a column, a full matrix, f32 or bf16;
 *   - Conv 3x3, strided 1x1, the 7x7 stem, grouped and depthwise, with B in f32, in bf16 or none,
 *     and its ConvGrad (dX, dW, dB; dW and dB in bf16 or f32);
 *     and W changed in place at the same address (a bf16 W is a Cast's output in the arena, so a
 *     cached reorder of it would be stale);
 *   - the same bits on 1, 2 and 3 threads (backends/thread_governor.h).
 * Tolerance: a product of two bf16 numbers is exact in f32, so the f32 sum's error is at most about
 * K * 2^-24 * sum_k |a_k b_k|; a bf16 Y adds its rounding, 2^-8 |y| (8 significant bits). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_dnnl.h"
#include "core/half.h"
#include "tests/check.h"

static uint64_t rng = 3;

static float urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) * 0x1.0p-24) * 2.0f - 1.0f;
}

static uint16_t *bf16_random(int64_t n) {
    uint16_t *p = malloc(sizeof *p * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) p[i] = sc_f32_to_bf16(urand());
    return p;
}

static double bf(const uint16_t *p, int64_t i) { return sc_bf16_to_f32(p[i]); }

static bool cpu_has_bf16_dot(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[8192];
    bool has = false;
    while (f && !has && fgets(line, sizeof line, f))
        if (!strncmp(line, "flags", 5)) has = strstr(line, " avx512_bf16") || strstr(line, " amx_bf16");
    if (f) fclose(f);
    return has;
}

/* A problem and its reference: ref[i] the exact sum, mag[i] the sum of |terms| (the error scale). */
typedef struct {
    double *ref, *mag;
    int64_t n;
    sc_dtype y_type;
} expected;

/* Every element of y within the tolerance of the reference. */
static double worst_ratio(const void *y, const expected *e, int64_t K) {
    double worst = 0;
    for (int64_t i = 0; i < e->n; i++) {
        double got = e->y_type == SC_BF16 ? bf(y, i) : ((const float *)y)[i];
        double tol = (double)(K + 2) * 0x1.0p-24 * e->mag[i] + 1e-30;
        if (e->y_type == SC_BF16) tol += 0x1.0p-8 * fabs(e->ref[i]);
        double r = fabs(got - e->ref[i]) / tol;
        if (!(r <= worst)) worst = r; /* NaN counts as the worst */
    }
    return worst;
}

/* Runs the node on 1, 2 and 3 threads (the same bits) and widened; every output within the
 * tolerance of its reference. The outputs' descs follow the inputs in `in`. */
static void run_checks_n(const char *label, sc_node *node, sc_tensor *in, int n_in, const expected *e,
                         const int64_t *K, int n_out) {
    sc_tensor out[3];
    void *first[3];
    size_t bytes[3];
    for (int o = 0; o < n_out; o++) {
        bytes[o] = (size_t)e[o].n * (e[o].y_type == SC_BF16 ? 2 : 4);
        out[o] = (sc_tensor){in[n_in + o].desc, malloc(bytes[o] + 1)};
        first[o] = malloc(bytes[o] + 1);
    }
    for (int t = 0; t <= 3; t++) { /* t = 0: widened */
        cpu_set_num_threads(t ? t : 2);
        for (int o = 0; o < n_out; o++) memset(out[o].data, 0xff, bytes[o]);
        sc_kernel_call call = {node, in, n_in, out, n_out};
        sc_status st = t ? cpu_run_node(node, in, n_in, out, n_out) : cpu_run_widened(sc_cpu_kernels[node->op], &call);
        char how[32];
        snprintf(how, sizeof how, t ? "%d threads" : "widened", t);
        CHECK(!st, "%s, %s: %s", label, how, sc_status_message(st));
        sc_status_free(st);
        for (int o = 0; o < n_out; o++) {
            double w = worst_ratio(out[o].data, &e[o], K[o]);
            CHECK(w <= 1.0, "%s, %s: an element of output %d is %.3g times the tolerance off the float64 reference",
                  label, how, o, w);
            if (t == 1) memcpy(first[o], out[o].data, bytes[o]);
            else if (t > 1) CHECK(!memcmp(first[o], out[o].data, bytes[o]), "%s: output %d on %d threads has other bits "
                                  "than on 1 thread", label, o, t);
        }
    }
    for (int o = 0; o < n_out; o++) {
        free(out[o].data);
        free(first[o]);
    }
}

static void run_checks(const char *label, sc_node *node, sc_tensor *in, int n_in, const expected *e, int64_t K) {
    run_checks_n(label, node, in, n_in, e, &K, 1);
}

/* MatMul A (ab..., M, K) @ B (bb..., K, N) with 2-D batch dims a0 x a1 and b0 x b1 (1: broadcast). */
static void check_matmul(int64_t a0, int64_t a1, int64_t b0, int64_t b1, int64_t M, int64_t K, int64_t N,
                         sc_dtype y_type) {
    int64_t y0 = a0 > b0 ? a0 : b0, y1 = a1 > b1 ? a1 : b1, batch = y0 * y1;
    uint16_t *A = bf16_random(a0 * a1 * M * K), *B = bf16_random(b0 * b1 * K * N);
    expected e = {malloc(sizeof(double) * (size_t)(batch * M * N)), malloc(sizeof(double) * (size_t)(batch * M * N)),
                  batch * M * N, y_type};
    for (int64_t i0 = 0; i0 < y0; i0++)
        for (int64_t i1 = 0; i1 < y1; i1++) {
            int64_t ao = ((a0 > 1 ? i0 : 0) * a1 + (a1 > 1 ? i1 : 0)) * M * K;
            int64_t bo = ((b0 > 1 ? i0 : 0) * b1 + (b1 > 1 ? i1 : 0)) * K * N, yo = (i0 * y1 + i1) * M * N;
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    double s = 0, m = 0;
                    for (int64_t k = 0; k < K; k++) {
                        double p = bf(A, ao + i * K + k) * bf(B, bo + k * N + j);
                        s += p;
                        m += fabs(p);
                    }
                    e.ref[yo + i * N + j] = s;
                    e.mag[yo + i * N + j] = m;
                }
        }
    int ids[3] = {0, 1, 2};
    sc_node node = {.op = SC_OP_MATMUL, .name = "bf16 matmul", .in = ids, .n_in = 2, .out = ids + 2, .n_out = 1,
                    .attrs = &sc_attrs_none};
    int64_t ad[4] = {a0, a1, M, K}, bd[4] = {b0, b1, K, N}, yd[4] = {y0, y1, M, N};
    sc_tensor t[3] = {{sc_desc_make(SC_BF16, 4, ad), A}, {sc_desc_make(SC_BF16, 4, bd), B},
                      {sc_desc_make(y_type, 4, yd), NULL}};
    char label[160];
    snprintf(label, sizeof label, "MatMul (%lld, %lld, %lld, %lld) @ (%lld, %lld, %lld, %lld) -> %s", (long long)a0,
             (long long)a1, (long long)M, (long long)K, (long long)b0, (long long)b1, (long long)K, (long long)N,
             sc_dtype_name(y_type));
    run_checks(label, &node, t, 2, &e, K);
    free(A);
    free(B);
    free(e.ref);
    free(e.mag);
}

/* Gemm Y (M, N) = alpha op(A) op(B) + beta C, C of dims (c0, c1) in c_type, Y in bf16. */
static void check_gemm(int64_t M, int64_t K, int64_t N, bool ta, bool tb, float alpha, float beta, int64_t c0,
                       int64_t c1, sc_dtype c_type) {
    uint16_t *A = bf16_random(M * K), *B = bf16_random(K * N), *Cb = bf16_random(c0 * c1);
    float *Cf = malloc(sizeof(float) * (size_t)(c0 * c1));
    for (int64_t i = 0; i < c0 * c1; i++) Cf[i] = urand();
    expected e = {malloc(sizeof(double) * (size_t)(M * N)), malloc(sizeof(double) * (size_t)(M * N)), M * N, SC_BF16};
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0, m = 0;
            for (int64_t k = 0; k < K; k++) {
                double p = bf(A, ta ? k * M + i : i * K + k) * bf(B, tb ? j * K + k : k * N + j);
                s += p;
                m += fabs(p);
            }
            int64_t at = (c0 > 1 ? i : 0) * c1 + (c1 > 1 ? j : 0);
            double c = c_type == SC_BF16 ? bf(Cb, at) : Cf[at];
            e.ref[i * N + j] = alpha * s + beta * c;
            e.mag[i * N + j] = fabs(alpha) * m + fabs(beta * c);
        }
    int ids[4] = {0, 1, 2, 3};
    sc_attrs at = {0};
    at.gemm = (sc_gemm_attrs){.alpha = alpha, .beta = beta, .trans_a = ta, .trans_b = tb};
    sc_node node = {.op = SC_OP_GEMM, .name = "bf16 gemm", .in = ids, .n_in = 3, .out = ids + 3, .n_out = 1, .attrs = &at};
    int64_t ad[2] = {ta ? K : M, ta ? M : K}, bd[2] = {tb ? N : K, tb ? K : N}, cd[2] = {c0, c1}, yd[2] = {M, N};
    sc_tensor t[4] = {{sc_desc_make(SC_BF16, 2, ad), A}, {sc_desc_make(SC_BF16, 2, bd), B},
                      {sc_desc_make(c_type, 2, cd), c_type == SC_BF16 ? (void *)Cb : (void *)Cf},
                      {sc_desc_make(SC_BF16, 2, yd), NULL}};
    char label[160];
    snprintf(label, sizeof label, "Gemm (%lld, %lld, %lld) trans %d%d alpha %g beta %g C (%lld, %lld) %s", (long long)M,
             (long long)K, (long long)N, ta, tb, alpha, beta, (long long)c0, (long long)c1, sc_dtype_name(c_type));
    run_checks(label, &node, t, 3, &e, K);
    free(A);
    free(B);
    free(Cb);
    free(Cf);
    free(e.ref);
    free(e.mag);
}

/* A 2-D window: stride s, pad p on every side, group G. */
static sc_attrs conv_attrs(int64_t s, int64_t p, int64_t G) {
    sc_attrs a = {0};
    a.window.n_spatial = 2;
    a.window.group = G;
    for (int i = 0; i < 2; i++) {
        a.window.strides[i] = s;
        a.window.dilations[i] = 1;
        a.window.pads[i] = a.window.pads[2 + i] = p;
    }
    return a;
}

/* Conv X (N, C, H, W) * W (M, C/G, k, k), stride s, pad p, B of b_type (SC_DTYPE_UNDEFINED: none), Y in
 * y_type; then W changed in place and run again. */
static void check_conv(int64_t N, int64_t C, int64_t H, int64_t M, int64_t k, int64_t s, int64_t p, int64_t G,
                       sc_dtype b_type, sc_dtype y_type) {
    int64_t cg = C / G, mg = M / G, OH = (H + 2 * p - k) / s + 1;
    uint16_t *X = bf16_random(N * C * H * H), *Wt = bf16_random(M * cg * k * k), *Bb = bf16_random(M);
    float *Bf = malloc(sizeof(float) * (size_t)M);
    for (int64_t i = 0; i < M; i++) Bf[i] = urand();
    int64_t ny = N * M * OH * OH;
    expected e = {malloc(sizeof(double) * (size_t)ny), malloc(sizeof(double) * (size_t)ny), ny, y_type};
    int64_t terms = cg * k * k;
    for (int round = 0; round < 2; round++) {
        for (int64_t n = 0; n < N; n++)
            for (int64_t m = 0; m < M; m++)
                for (int64_t oh = 0; oh < OH; oh++)
                    for (int64_t ow = 0; ow < OH; ow++) {
                        double acc = 0, mag = 0;
                        for (int64_t c = 0; c < cg; c++)
                            for (int64_t th = 0; th < k; th++)
                                for (int64_t tw = 0; tw < k; tw++) {
                                    int64_t ih = oh * s - p + th, iw = ow * s - p + tw;
                                    if (ih < 0 || ih >= H || iw < 0 || iw >= H) continue;
                                    double t = bf(X, ((n * C + (m / mg) * cg + c) * H + ih) * H + iw) *
                                               bf(Wt, ((m * cg + c) * k + th) * k + tw);
                                    acc += t;
                                    mag += fabs(t);
                                }
                        double b = b_type == SC_BF16 ? bf(Bb, m) : b_type == SC_F32 ? Bf[m] : 0.0;
                        int64_t at = ((n * M + m) * OH + oh) * OH + ow;
                        e.ref[at] = acc + b;
                        e.mag[at] = mag + fabs(b);
                    }
        sc_attrs a = conv_attrs(s, p, G);
        int ids[4] = {0, 1, 2, 3};
        bool has_b = b_type != SC_DTYPE_UNDEFINED;
        sc_node node = {.op = SC_OP_CONV, .name = "bf16 conv", .in = ids, .n_in = has_b ? 3 : 2, .out = ids + 3,
                        .n_out = 1, .attrs = &a};
        int64_t xd[4] = {N, C, H, H}, wd[4] = {M, cg, k, k}, bd[1] = {M}, yd[4] = {N, M, OH, OH};
        sc_tensor t[4] = {{sc_desc_make(SC_BF16, 4, xd), X}, {sc_desc_make(SC_BF16, 4, wd), Wt},
                          {sc_desc_make(has_b ? b_type : SC_F32, 1, bd), b_type == SC_BF16 ? (void *)Bb : (void *)Bf},
                          {sc_desc_make(y_type, 4, yd), NULL}};
        if (!has_b) t[2] = t[3];
        char label[192];
        snprintf(label, sizeof label, "Conv X (%lld, %lld, %lld, %lld) W (%lld, %lld, %lld, %lld) stride %lld pad %lld "
                 "group %lld, B %s -> %s%s", (long long)N, (long long)C, (long long)H, (long long)H, (long long)M,
                 (long long)cg, (long long)k, (long long)k, (long long)s, (long long)p, (long long)G,
                 has_b ? sc_dtype_name(b_type) : "none", sc_dtype_name(y_type), round ? ", W changed in place" : "");
        run_checks(label, &node, t, has_b ? 3 : 2, &e, terms);
        for (int64_t i = 0; i < M * cg * k * k; i++) Wt[i] = sc_f32_to_bf16(urand()); /* same address, new W */
    }
    free(X);
    free(Wt);
    free(Bb);
    free(Bf);
    free(e.ref);
    free(e.mag);
}

static expected expected_new(int64_t n, sc_dtype t) {
    expected e = {calloc((size_t)n, sizeof(double)), calloc((size_t)n, sizeof(double)), n, t};
    return e;
}

/* ConvGrad (dY, X, W) -> (dX, dW, dB) of the Conv above, every output present, dX bf16, dW and dB
 * in wb_type. */
static void check_conv_grad(int64_t N, int64_t C, int64_t H, int64_t M, int64_t k, int64_t s, int64_t p, int64_t G,
                            sc_dtype wb_type) {
    int64_t cg = C / G, mg = M / G, OH = (H + 2 * p - k) / s + 1;
    uint16_t *X = bf16_random(N * C * H * H), *Wt = bf16_random(M * cg * k * k), *dY = bf16_random(N * M * OH * OH);
    expected e[3] = {expected_new(N * C * H * H, SC_BF16), expected_new(M * cg * k * k, wb_type), expected_new(M, wb_type)};
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OH; ow++) {
                    double g = bf(dY, ((n * M + m) * OH + oh) * OH + ow);
                    e[2].ref[m] += g;
                    e[2].mag[m] += fabs(g);
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t th = 0; th < k; th++)
                            for (int64_t tw = 0; tw < k; tw++) {
                                int64_t ih = oh * s - p + th, iw = ow * s - p + tw;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= H) continue;
                                int64_t xi = ((n * C + (m / mg) * cg + c) * H + ih) * H + iw;
                                int64_t wi = ((m * cg + c) * k + th) * k + tw;
                                double tx = g * bf(Wt, wi), tw_ = g * bf(X, xi);
                                e[0].ref[xi] += tx;
                                e[0].mag[xi] += fabs(tx);
                                e[1].ref[wi] += tw_;
                                e[1].mag[wi] += fabs(tw_);
                            }
                }
    sc_attrs a = conv_attrs(s, p, G);
    int ids[6] = {0, 1, 2, 3, 4, 5};
    sc_node node = {.op = SC_OP_CONV_GRAD, .name = "bf16 conv grad", .in = ids, .n_in = 3, .out = ids + 3, .n_out = 3,
                    .attrs = &a};
    int64_t xd[4] = {N, C, H, H}, wd[4] = {M, cg, k, k}, yd[4] = {N, M, OH, OH}, bd[1] = {M};
    sc_tensor t[6] = {{sc_desc_make(SC_BF16, 4, yd), dY}, {sc_desc_make(SC_BF16, 4, xd), X},
                      {sc_desc_make(SC_BF16, 4, wd), Wt},  {sc_desc_make(SC_BF16, 4, xd), NULL},
                      {sc_desc_make(wb_type, 4, wd), NULL}, {sc_desc_make(wb_type, 1, bd), NULL}};
    int64_t K[3] = {M / G * k * k, N * OH * OH, N * OH * OH};
    char label[192];
    snprintf(label, sizeof label, "ConvGrad X (%lld, %lld, %lld, %lld) W (%lld, %lld, %lld, %lld) stride %lld pad %lld "
             "group %lld, dW and dB %s", (long long)N, (long long)C, (long long)H, (long long)H, (long long)M,
             (long long)cg, (long long)k, (long long)k, (long long)s, (long long)p, (long long)G, sc_dtype_name(wb_type));
    run_checks_n(label, &node, t, 3, e, K, 3);
    free(X);
    free(Wt);
    free(dY);
    for (int i = 0; i < 3; i++) {
        free(e[i].ref);
        free(e[i].mag);
    }
}

int main(void) {
    const char *forced = getenv("SCORCH_CPU_BF16");
    bool native = cpu_bf16_native(), has = cpu_has_bf16_dot();
    printf("test_cpu_bf16: this CPU %s bf16 dot products; MatMul, Gemm and Conv in bf16 run %s\n", has ? "has" : "has no",
           native ? "on them (oneDNN)" : "widened to f32");
    if (has && !(forced && !strcmp(forced, "widen")))
        CHECK(native, "/proc/cpuinfo lists avx512_bf16 or amx_bf16, yet bf16 MatMul, Gemm and Conv would be widened to f32");
    const int64_t mm[][3] = {{1, 1, 1}, {5, 7, 3}, {64, 64, 64}, {33, 100, 65}, {197, 768, 256}, {512, 64, 96},
                             {1024, 32, 1200}}; /* the last: tiles over BGEMM_MAX_TILE outputs on 2 cores, split again */
    for (size_t i = 0; i < sizeof mm / sizeof mm[0]; i++) {
        check_matmul(1, 1, 1, 1, mm[i][0], mm[i][1], mm[i][2], SC_BF16);
        check_matmul(1, 1, 1, 1, mm[i][0], mm[i][1], mm[i][2], SC_F32);
    }
    check_matmul(2, 3, 2, 3, 33, 16, 40, SC_BF16); /* attention: every batch its own B */
    check_matmul(2, 3, 1, 1, 128, 64, 48, SC_BF16); /* B unbatched: the batch folds into M */
    check_matmul(1, 3, 2, 1, 16, 24, 8, SC_F32);    /* both broadcast */
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) check_gemm(70, 96, 130, ta, tb, 1.0f, 1.0f, 1, 130, SC_F32);
    check_gemm(64, 256, 768, false, true, 0.5f, 1.3f, 64, 1, SC_BF16);
    check_gemm(300, 40, 33, true, false, 1.0f, 0.7f, 300, 33, SC_F32);
    check_gemm(9, 9, 9, false, false, 2.0f, 0.0f, 1, 1, SC_BF16);
    check_conv(2, 16, 12, 32, 3, 1, 1, 1, SC_DTYPE_UNDEFINED, SC_BF16);
    check_conv(2, 32, 12, 64, 1, 2, 0, 1, SC_F32, SC_BF16);
    check_conv(1, 3, 20, 16, 7, 2, 3, 1, SC_BF16, SC_F32);
    check_conv(2, 16, 9, 32, 3, 1, 1, 4, SC_F32, SC_BF16);
    check_conv(1, 24, 10, 24, 3, 2, 1, 24, SC_DTYPE_UNDEFINED, SC_BF16);
    check_conv_grad(4, 16, 12, 32, 3, 1, 1, 1, SC_BF16);
    check_conv_grad(8, 32, 8, 64, 1, 2, 0, 1, SC_F32);
    check_conv_grad(2, 3, 20, 16, 7, 2, 3, 1, SC_BF16);
    check_conv_grad(4, 16, 9, 32, 3, 1, 1, 4, SC_BF16);
    check_conv_grad(2, 24, 10, 24, 3, 2, 1, 24, SC_F32);
    printf(failures ? "test_cpu_bf16: %d failure(s)\n" : "test_cpu_bf16: all passed\n", failures);
    return failures ? 1 : 0;
}
