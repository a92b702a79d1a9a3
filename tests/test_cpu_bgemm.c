/* bf16 MatMul and Gemm on the CPU's bf16 dot products (backends/cpu/cpu_nn_bgemm.c), against a
 * float64 reference of the same bf16 inputs, and against the widened f32 path of the same node.
 *   - where /proc/cpuinfo lists avx512_bf16 or amx_bf16 the native path must be taken (a build that
 *     silently widened would pass every other check here);
 *   - MatMul from 1x1x1 to (197, 768) @ (768, 256), tiles of unequal edges, batched with B's batch
 *     (attention's Q @ K^T) and with A broadcast; Y in bf16 and in f32;
 *   - Gemm with every transpose, alpha and beta, and C as a row, a column, a full matrix, f32 or bf16;
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

/* Runs the node on 1, 2 and 3 threads (the same bits) and widened; both within the tolerance. */
static void run_checks(const char *label, sc_node *node, sc_tensor *in, int n_in, const expected *e, int64_t K) {
    size_t bytes = (size_t)e->n * (e->y_type == SC_BF16 ? 2 : 4);
    void *first = malloc(bytes + 1), *y = malloc(bytes + 1);
    sc_tensor out = {in[n_in].desc, y}; /* Y's desc follows the inputs */
    for (int t = 1; t <= 3; t++) {
        cpu_set_num_threads(t);
        memset(y, 0xff, bytes);
        sc_status st = cpu_run_node(node, in, n_in, &out, 1);
        CHECK(!st, "%s, %d threads: %s", label, t, sc_status_message(st));
        sc_status_free(st);
        double w = worst_ratio(y, e, K);
        CHECK(w <= 1.0, "%s, %d threads: an element is %.3g times the tolerance off the float64 reference", label, t, w);
        if (t == 1) memcpy(first, y, bytes);
        else CHECK(!memcmp(first, y, bytes), "%s: %d threads gave other bits than 1 thread", label, t);
    }
    memset(y, 0xff, bytes);
    sc_kernel_call call = {node, in, n_in, &out, 1};
    sc_status st = cpu_run_widened(sc_cpu_kernels[node->op], &call);
    CHECK(!st, "%s widened: %s", label, sc_status_message(st));
    sc_status_free(st);
    double w = worst_ratio(y, e, K);
    CHECK(w <= 1.0, "%s widened: an element is %.3g times the tolerance off the float64 reference", label, w);
    free(first);
    free(y);
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

int main(void) {
    const char *forced = getenv("SCORCH_CPU_BF16_GEMM");
    bool native = cpu_bgemm_native(), has = cpu_has_bf16_dot();
    printf("test_cpu_bgemm: this CPU %s bf16 dot products; MatMul and Gemm in bf16 run %s\n", has ? "has" : "has no",
           native ? "on them (oneDNN)" : "widened to f32");
    if (has && !(forced && !strcmp(forced, "widen")))
        CHECK(native, "/proc/cpuinfo lists avx512_bf16 or amx_bf16, yet bf16 MatMul and Gemm would be widened to f32");
    const int64_t mm[][3] = {{1, 1, 1}, {5, 7, 3}, {64, 64, 64}, {33, 100, 65}, {197, 768, 256}, {512, 64, 96}};
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
    printf(failures ? "test_cpu_bgemm: %d failure(s)\n" : "test_cpu_bgemm: all passed\n", failures);
    return failures ? 1 : 0;
}
