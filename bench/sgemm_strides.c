/* oneDNN's sgemm against the row stride of an operand read across K (bench/results/2026-12-02-sgemm-strides.md).
 *
 *     cc -O2 -fopenmp bench/sgemm_strides.c -o sgemm_strides -ldnnl && OMP_NUM_THREADS=2 ./sgemm_strides
 *
 * For each shape, C (M, N) = A (M, K) @ B (K, N) on 8 column tiles, one single-threaded dnnl_sgemm
 * each (as backends/cpu/cpu_nn_sgemm.c runs them), with B stored three ways: (K, N) with ldb = N,
 * (K, N) with ldb = N + 16, and transposed (N, K). The variants are timed in turn, 25 rounds,
 * best time each, so a slow phase of a shared machine hits all of them. */
#include <dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

enum { PLAIN, PADDED, TRANSPOSED, N_VARIANTS };

static void product(int variant, int M, int K, int N, const float *A, const float *B, float *C) {
    int ldb = variant == PADDED ? N + 16 : variant == TRANSPOSED ? K : N;
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < 8; i++) {
        omp_set_num_threads(1);
        int n0 = N * i / 8, n1 = N * (i + 1) / 8;
        const float *b = variant == TRANSPOSED ? B + (long)n0 * K : B + n0;
        dnnl_sgemm('N', variant == TRANSPOSED ? 'T' : 'N', M, n1 - n0, K, 1.0f, A, K, b, ldb, 0.0f, C + n0, N);
    }
}

int main(void) {
    const int shapes[][3] = {{197, 768, 3072}, {197, 768, 3000}, {197, 768, 2304}, {197, 3072, 768},
                             {64, 768, 3072},  {256, 1024, 4096}, {256, 1024, 1000}, {1576, 768, 3072}};
    printf("| M | K | N | ldb = N | ldb = N + 16 | B transposed |\n|---:|---:|---:|---:|---:|---:|\n");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
        float *A = aligned_alloc(4096, 4096 + 4L * M * K), *C = aligned_alloc(4096, 4096 + 4L * M * N);
        float *B = aligned_alloc(4096, 4096 + 4L * K * (N + 16));
        for (long i = 0; i < (long)M * K; i++) A[i] = (float)(i % 7) * 0.1f;
        for (long i = 0; i < (long)K * (N + 16); i++) B[i] = (float)(i % 5) * 0.1f;
        double best[N_VARIANTS] = {1e9, 1e9, 1e9};
        for (int r = 0; r < 25; r++)
            for (int v = 0; v < N_VARIANTS; v++) {
                product(v, M, K, N, A, B, C);
                double t = now();
                product(v, M, K, N, A, B, C);
                t = now() - t;
                if (t < best[v]) best[v] = t;
            }
        double flops = 2.0 * M * K * N;
        printf("| %d | %d | %d | %.0f | %.0f | %.0f |\n", M, K, N, flops / best[PLAIN] / 1e9,
               flops / best[PADDED] / 1e9, flops / best[TRANSPOSED] / 1e9);
        free(A), free(B), free(C);
    }
    printf("\nGFLOP/s, %d threads\n", omp_get_max_threads());
    return 0;
}
