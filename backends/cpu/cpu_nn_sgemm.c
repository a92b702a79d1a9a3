/* f32 GEMM on tiles of C fixed by the shapes (cpu_sgemm_tiled): each tile is one dnnl_sgemm call on
 * one thread. sgemm run on all threads splits K between them when M and N are small, and then its
 * sums, so a GPT's gradients, differed in the last bits between 1 and 2 threads. With fixed tiles
 * the bits do not depend on the thread count, which lets a trainer pick the count by load
 * (backends/thread_governor.h).
 *
 * Strided panels. For small tiles (1/m + 1/n >= 0.0038 on AVX2) sgemm runs copy-free kernels that
 * read each operand as stored. An operand stored across K (B untransposed, A transposed) is then
 * read one row per k; when that row stride is a multiple of 512 floats (2 KiB) the rows fall into
 * the same few cache sets and the kernel runs at half speed. Measured on a 2-core AVX2 EPYC,
 * interleaved best-of-25, 8 tiles: (197, 768) @ (768, 3072) at 75 GFLOP/s with ldb 3072 and
 * 153-160 with ldb 3080 or with B transposed; the weight gradient (768, 256)^T @ (256, 3072) of a
 * GPT MLP at 65 against 147 with ldb 3000. Such a panel is copied first into a buffer whose row
 * stride is not a multiple of 512 floats: K rows of one tile's width, a memcpy per row, which cost
 * nothing measurable against the product at M = 64 to 256. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_dnnl.h"

/* A tile costs at least this many flops (an sgemm call packs its panels), and its edges are at
 * least SGEMM_MIN_EDGE unless the matrix is smaller. */
#define SGEMM_MIN_TILE_FLOPS 1e6
#define SGEMM_MIN_EDGE 32

/* A strided panel is copied when its stride is a multiple of this many floats, the product's other
 * edge is at least SGEMM_COPY_MIN_EDGE (a GEMV would read the panel twice for nothing) and the copy
 * fits in SGEMM_COPY_MAX_BYTES. */
#define SGEMM_BAD_LD 512
#define SGEMM_COPY_MIN_EDGE 16
#define SGEMM_COPY_MAX_BYTES ((size_t)16 << 20)

void cpu_gemm_cut(int64_t M, int64_t N, int64_t K, int64_t *mt, int64_t *nt) {
    double flops = 2.0 * (double)M * (double)N * (double)K;
    int64_t want = 4 * (int64_t)omp_get_num_procs();
    if (flops / SGEMM_MIN_TILE_FLOPS < (double)want) want = (int64_t)(flops / SGEMM_MIN_TILE_FLOPS);
    *mt = *nt = 1;
    while (*mt * *nt < want) {
        bool m_ok = M / (*mt + 1) >= SGEMM_MIN_EDGE, n_ok = N / (*nt + 1) >= SGEMM_MIN_EDGE;
        if (m_ok && (!n_ok || M / *mt >= N / *nt)) (*mt)++;
        else if (n_ok) (*nt)++;
        else break;
    }
}

/* The K rows of `width` floats at p (stride *ld) copied to a new buffer with a stride that is no
 * multiple of SGEMM_BAD_LD, *ld updated; NULL (read p as it is) when no copy is due or memory is
 * short. */
static float *panel_restride(const float *p, int64_t *ld, int64_t K, int64_t width, int64_t other_edge) {
    if (*ld % SGEMM_BAD_LD != 0 || other_edge < SGEMM_COPY_MIN_EDGE) return NULL;
    int64_t ld2 = (width + 15) / 16 * 16 + 16;
    if (ld2 % SGEMM_BAD_LD == 0) ld2 += 16;
    if ((size_t)(K * ld2) * sizeof(float) > SGEMM_COPY_MAX_BYTES) return NULL;
    float *q = malloc((size_t)(K * ld2) * sizeof(float));
    if (!q) return NULL;
    for (int64_t k = 0; k < K; k++) memcpy(q + k * ld2, p + k * *ld, (size_t)width * sizeof(float));
    *ld = ld2;
    return q;
}

/* Tile i of t on this thread alone. */
static dnnl_status_t sgemm_tile(const cpu_sgemm *t, int64_t i) {
    int64_t bi = i / t->nt, bj = i % t->nt;
    int64_t m0 = t->M * bi / t->mt, m1 = t->M * (bi + 1) / t->mt;
    int64_t n0 = t->N * bj / t->nt, n1 = t->N * (bj + 1) / t->nt;
    const float *a = t->ta == 'N' ? t->A + m0 * t->lda : t->A + m0;
    const float *b = t->tb == 'N' ? t->B + n0 : t->B + n0 * t->ldb;
    int64_t lda = t->lda, ldb = t->ldb;
    float *a_copy = t->ta == 'T' ? panel_restride(a, &lda, t->K, m1 - m0, n1 - n0) : NULL;
    float *b_copy = t->tb == 'N' ? panel_restride(b, &ldb, t->K, n1 - n0, m1 - m0) : NULL;
    dnnl_status_t s = dnnl_sgemm(t->ta, t->tb, m1 - m0, n1 - n0, t->K, t->alpha, a_copy ? a_copy : a, lda,
                                 b_copy ? b_copy : b, ldb, t->beta, t->C + m0 * t->ldc + n0, t->ldc);
    free(a_copy);
    free(b_copy);
    return s;
}

dnnl_status_t cpu_sgemm_tiled(cpu_sgemm t, int64_t batch, const int64_t *ao, const int64_t *bo) {
    cpu_gemm_cut(t.M, t.N, t.K, &t.mt, &t.nt);
    int64_t per = t.mt * t.nt, items = batch * per;
    int nthr = omp_get_max_threads();
    if ((int64_t)nthr > items) nthr = (int)items;
    dnnl_status_t err = dnnl_success;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthr)
    for (int64_t i = 0; i < items; i++) {
        omp_set_num_threads(1); /* a region of one thread is not nested: sgemm would read this */
        cpu_sgemm p = t;
        int64_t k = i / per;
        p.A += ao ? ao[k] : 0;
        p.B += bo ? bo[k] : 0;
        p.C += k * t.M * t.N;
        dnnl_status_t s = sgemm_tile(&p, i % per);
        if (s != dnnl_success) {
#pragma omp atomic write
            err = s;
        }
    }
    return err;
}
