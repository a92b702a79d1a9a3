/* Gemm and MatMul.
 *
 * Gemm (ONNX opset 13): Y (M, N) = alpha * op(A) @ op(B) + beta * C, op = transpose when trans_a /
 * trans_b; C optional and unidirectionally broadcast to (M, N) (scalar, (N), (1, N), (M, 1), (M, N)).
 * MatMul: numpy matmul. A 1-D A is a row (1, K) whose M dim is dropped from Y, a 1-D B a column
 * (K, 1) whose N dim is dropped; the leading batch dims broadcast.
 *
 * f32 calls oneDNN's row-major sgemm, one thread per call, on tiles of Y that the shapes alone fix
 * (cpu_sgemm_tiled, cpu_nn_sgemm.c), so the bits do not depend on the thread count. A constant B
 * goes to the prepacked matmul where oneDNN has a packing kernel for it (cpu_nn_matmul_packed.c).
 * A batched MatMul whose B carries no batch folds the batch into M
 * (one large GEMM); otherwise its batches are further items. bf16 A and B run on the CPU's bf16 dot
 * products, cut the same way (cpu_nn_bgemm.c), where it has them. f64 runs reference loops.
 */
#include <dnnl.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_dnnl.h"
#include "backends/cpu/cpu_kernels.h"

static sc_status sgemm_status(const sc_kernel_call *call, dnnl_status_t s) {
    return s == dnnl_success ? SC_OK : cpu_dnnl_error(call, "sgemm", s);
}

/* ---- Gemm ---- */

/* Element (i, j) of C broadcast to (M, N): row and column strides are 0 along broadcast dims. */
static sc_status gemm_c_strides(const sc_kernel_call *call, const sc_desc *c, int64_t M, int64_t N,
                                int64_t *rs, int64_t *cs) {
    int64_t d0 = c->rank >= 2 ? c->dims[c->rank - 2] : 1, d1 = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
    if (c->rank > 2 || (d0 != 1 && d0 != M) || (d1 != 1 && d1 != N))
        return cpu_errorf(call, "C of rank %d with dims (%lld, %lld) does not broadcast to (%lld, %lld)", c->rank,
                          (long long)d0, (long long)d1, (long long)M, (long long)N);
    *rs = d0 == 1 ? 0 : d1;
    *cs = d1 == 1 ? 0 : 1;
    return SC_OK;
}

static void gemm_ref_f64(int64_t M, int64_t N, int64_t K, bool ta, bool tb, double alpha, double beta,
                         const double *A, const double *B, const double *C, int64_t rs, int64_t cs, double *Y) {
#pragma omp parallel for
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++) acc += (ta ? A[k * M + i] : A[i * K + k]) * (tb ? B[j * K + k] : B[k * N + j]);
            Y[i * N + j] = alpha * acc + (C ? beta * C[i * rs + j * cs] : 0.0);
        }
}

/* Y = A @ op(B) + beta C with a constant B, alpha 1 and A as stored: the prepacked matmul, then C
 * (strides rs, cs) added in a second pass over Y. */
static sc_status gemm_packed_f32(const sc_kernel_call *call, int64_t M, int64_t K, int64_t N, const float *C,
                                 int64_t rs, int64_t cs, float *Y) {
    const sc_gemm_attrs *ga = &call->node->attrs->gemm;
    SC_TRY(cpu_matmul_packed_f32(call, M, K, N, ga->trans_b, call->in[0].data, call->in[1].data, Y));
    if (!C || ga->beta == 0.0f) return SC_OK;
    float bt = ga->beta;
#pragma omp parallel for if (M * N > 4096)
    for (int64_t i = 0; i < M; i++)
#pragma omp simd
        for (int64_t j = 0; j < N; j++) Y[i * N + j] += bt * C[i * rs + j * cs];
    return SC_OK;
}

/* bf16 A (cpu_widen.c leaves it as it is where cpu_bf16_native): on the bf16 dot products with B
 * bf16, Y and C f32 or bf16; widened to f32 for other types or where oneDNN has no bf16 kernel for a
 * tile's strides. */
static sc_status gemm_bf16(const sc_kernel_call *call, int64_t M, int64_t N, int64_t K, const void *c, int64_t rs,
                           int64_t cs) {
    const sc_gemm_attrs *ga = &call->node->attrs->gemm;
    sc_dtype b = call->in[1].desc.dtype, y = call->out[0].desc.dtype, ct = c ? call->in[2].desc.dtype : SC_F32;
    if (b != SC_BF16 || (y != SC_BF16 && y != SC_F32) || (ct != SC_BF16 && ct != SC_F32))
        return cpu_run_widened(cpu_gemm, call);
    if (M == 0 || N == 0) return SC_OK;
    bool native = false;
    if (K > 0) {
        cpu_bgemm t = {ga->trans_a ? 'T' : 'N', ga->trans_b ? 'T' : 'N', M, N, K, ga->alpha, ga->beta,
                       call->in[0].data, call->in[1].data, ga->trans_a ? M : K, ga->trans_b ? K : N,
                       c && ga->beta != 0.0f ? c : NULL, c ? call->in[2].desc.dtype : SC_F32, rs, cs,
                       call->out[0].data, call->out[0].desc.dtype};
        SC_TRY(cpu_bgemm_tiled(call, &t, 1, NULL, NULL, &native));
    }
    return native ? SC_OK : cpu_run_widened(cpu_gemm, call);
}

sc_status cpu_gemm(const sc_kernel_call *call) {
    const sc_gemm_attrs *ga = &call->node->attrs->gemm;
    const sc_desc *a = &call->in[0].desc, *b = &call->in[1].desc, *y = &call->out[0].desc;
    const void *c = call->n_in > 2 ? call->in[2].data : NULL;
    if (a->rank != 2 || b->rank != 2 || y->rank != 2)
        return cpu_errorf(call, "A, B and Y must be 2-D (ranks %d, %d, %d)", a->rank, b->rank, y->rank);
    int64_t M = ga->trans_a ? a->dims[1] : a->dims[0], K = ga->trans_a ? a->dims[0] : a->dims[1];
    int64_t KB = ga->trans_b ? b->dims[1] : b->dims[0], N = ga->trans_b ? b->dims[0] : b->dims[1];
    if (K != KB || y->dims[0] != M || y->dims[1] != N)
        return cpu_errorf(call, "op(A) is (%lld, %lld), op(B) is (%lld, %lld), Y is (%lld, %lld)", (long long)M,
                          (long long)K, (long long)KB, (long long)N, (long long)y->dims[0], (long long)y->dims[1]);
    int64_t rs = 0, cs = 0;
    if (c) SC_TRY(gemm_c_strides(call, &call->in[2].desc, M, N, &rs, &cs));
    if (a->dtype == SC_F64) {
        gemm_ref_f64(M, N, K, ga->trans_a, ga->trans_b, ga->alpha, ga->beta, call->in[0].data, call->in[1].data,
                        c, rs, cs, call->out[0].data);
        return SC_OK;
    }
    if (a->dtype == SC_BF16) return gemm_bf16(call, M, N, K, c, rs, cs);
    if (a->dtype != SC_F32) return cpu_errorf(call, "dtype %s not supported", sc_dtype_name(a->dtype));
    float *Y = call->out[0].data;
    const float *C = c;
    if (ga->b_const && !ga->trans_a && ga->alpha == 1.0f && M > 0 && N > 0 && K > 0)
        return gemm_packed_f32(call, M, K, N, C, rs, cs, Y);
    float beta = 0.0f;
    if (C && ga->beta != 0.0f) {
        float bt = ga->beta;
#pragma omp parallel for
        for (int64_t i = 0; i < M; i++)
#pragma omp simd
            for (int64_t j = 0; j < N; j++) Y[i * N + j] = bt * C[i * rs + j * cs];
        beta = 1.0f;
    }
    if (M == 0 || N == 0) return SC_OK;
    if (K == 0) {
        if (beta == 0.0f) memset(Y, 0, (size_t)(M * N) * sizeof(float));
        return SC_OK;
    }
    cpu_sgemm t = {ga->trans_a ? 'T' : 'N', ga->trans_b ? 'T' : 'N', M, N, K, ga->alpha, beta, call->in[0].data,
                     call->in[1].data, Y, ga->trans_a ? M : K, ga->trans_b ? K : N, N, 0, 0};
    return sgemm_status(call, cpu_sgemm_tiled(t, 1, NULL, NULL));
}

/* ---- MatMul ---- */

typedef struct {
    int64_t M, N, K;
    int nb;                       /* output batch rank */
    int64_t batch[SC_MAX_RANK];   /* output batch dims */
    int64_t a_str[SC_MAX_RANK];   /* element strides of A's / B's batch dims, 0 when broadcast */
    int64_t b_str[SC_MAX_RANK];
    int64_t n_batch;
    bool b_unbatched;             /* every B batch stride is 0 */
} matmul_geom;

/* "<what>: A <desc>, B <desc>", or with what NULL "output <desc> does not match A <desc> @ B <desc>".
 * The descs are formatted here, on the error path only: a MatMul runs once per attention head. */
static sc_status matmul_error(const sc_kernel_call *call, const char *what) {
    char sa[96], sb[96], sy[96];
    sc_desc_str(&call->in[0].desc, sa, sizeof sa);
    sc_desc_str(&call->in[1].desc, sb, sizeof sb);
    if (what) return cpu_errorf(call, "%s: A %s, B %s", what, sa, sb);
    return cpu_errorf(call, "output %s does not match A %s @ B %s", sc_desc_str(&call->out[0].desc, sy, sizeof sy), sa,
                      sb);
}

static sc_status matmul_geom_make(const sc_kernel_call *call, matmul_geom *g) {
    const sc_desc *a = &call->in[0].desc, *b = &call->in[1].desc, *y = &call->out[0].desc;
    if (a->rank < 1 || b->rank < 1) return matmul_error(call, "scalar operand");
    g->M = a->rank == 1 ? 1 : a->dims[a->rank - 2];
    g->K = a->dims[a->rank - 1];
    int64_t KB = b->rank == 1 ? b->dims[0] : b->dims[b->rank - 2];
    g->N = b->rank == 1 ? 1 : b->dims[b->rank - 1];
    if (KB != g->K) return matmul_error(call, "inner dims differ");
    int na = a->rank > 2 ? a->rank - 2 : 0, nbb = b->rank > 2 ? b->rank - 2 : 0;
    g->nb = na > nbb ? na : nbb;
    g->n_batch = 1;
    g->b_unbatched = true;
    int64_t as = g->M * g->K, bs = g->K * g->N;
    for (int i = g->nb - 1; i >= 0; i--) {
        int ia = i - (g->nb - na), ib = i - (g->nb - nbb);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) return matmul_error(call, "batch dims do not broadcast");
        g->batch[i] = da > db ? da : db;
        if (da == 0 || db == 0) g->batch[i] = 0;
        g->a_str[i] = da == 1 ? 0 : as;
        g->b_str[i] = db == 1 ? 0 : bs;
        if (db != 1) g->b_unbatched = false;
        as *= da;
        bs *= db;
        g->n_batch *= g->batch[i];
    }
    int64_t expect = g->n_batch * g->M * g->N;
    int yr = g->nb + (a->rank > 1) + (b->rank > 1);
    if (y->rank != yr || sc_desc_numel(y) != expect) return matmul_error(call, NULL);
    return SC_OK;
}

static void matmul_offsets(const matmul_geom *g, int64_t bi, int64_t *ao, int64_t *bo) {
    *ao = *bo = 0;
    for (int i = g->nb - 1; i >= 0; i--) {
        int64_t idx = bi % g->batch[i];
        bi /= g->batch[i];
        *ao += idx * g->a_str[i];
        *bo += idx * g->b_str[i];
    }
}

static void matmul_ref_f64(const matmul_geom *g, const double *A, const double *B, double *Y) {
    int64_t M = g->M, N = g->N, K = g->K;
#pragma omp parallel for
    for (int64_t bi = 0; bi < g->n_batch; bi++) {
        int64_t ao, bo;
        matmul_offsets(g, bi, &ao, &bo);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0;
                for (int64_t k = 0; k < K; k++) acc += A[ao + i * K + k] * B[bo + k * N + j];
                Y[(bi * M + i) * N + j] = acc;
            }
    }
}

/* A's batch is contiguous when it is not broadcast, and B has none: (batch * M, K) @ (K, N) is then
 * one GEMM. */
static bool matmul_folds(const matmul_geom *g) {
    for (int i = 0; i < g->nb; i++)
        if (g->batch[i] > 1 && g->a_str[i] == 0) return false;
    return g->b_unbatched;
}

/* Each batch item's offset into A, then into B (2 * n_batch entries, malloc'd; NULL: out of memory). */
static int64_t *matmul_offsets_all(const matmul_geom *g) {
    int64_t *off = malloc(sizeof *off * (size_t)(2 * g->n_batch));
    for (int64_t bi = 0; off && bi < g->n_batch; bi++) matmul_offsets(g, bi, &off[bi], &off[g->n_batch + bi]);
    return off;
}

static sc_status matmul_f32(const sc_kernel_call *call, const matmul_geom *g, const float *A, const float *B, float *Y) {
    int64_t M = g->M, N = g->N, K = g->K;
    if (g->n_batch == 0 || M == 0 || N == 0) return SC_OK;
    if (K == 0) {
        memset(Y, 0, (size_t)(g->n_batch * M * N) * sizeof(float));
        return SC_OK;
    }
    if (matmul_folds(g)) {
        if (call->node->attrs->matmul.b_const) return cpu_matmul_packed_f32(call, g->n_batch * M, K, N, false, A, B, Y);
        cpu_sgemm t = {'N', 'N', g->n_batch * M, N, K, 1.0f, 0.0f, A, B, Y, K, N, N, 0, 0};
        return sgemm_status(call, cpu_sgemm_tiled(t, 1, NULL, NULL));
    }
    int64_t *off = matmul_offsets_all(g);
    if (!off) return cpu_errorf(call, "out of memory");
    cpu_sgemm t = {'N', 'N', M, N, K, 1.0f, 0.0f, A, B, Y, K, N, N, 0, 0};
    dnnl_status_t s = cpu_sgemm_tiled(t, g->n_batch, off, off + g->n_batch);
    free(off);
    return sgemm_status(call, s);
}

/* matmul_f32's cut on bf16 A and B (cpu_nn_bgemm.c), Y f32 or bf16; widened where the types differ
 * or oneDNN has no bf16 kernel for a tile. */
static sc_status matmul_bf16(const sc_kernel_call *call, const matmul_geom *g) {
    int64_t M = g->M, N = g->N, K = g->K;
    sc_dtype y = call->out[0].desc.dtype;
    if (call->in[1].desc.dtype != SC_BF16 || (y != SC_BF16 && y != SC_F32)) return cpu_run_widened(cpu_matmul, call);
    if (g->n_batch == 0 || M == 0 || N == 0) return SC_OK;
    bool folded = matmul_folds(g), native = false;
    cpu_bgemm t = {'N', 'N', folded ? g->n_batch * M : M, N, K, 1.0f, 0.0f, call->in[0].data, call->in[1].data, K, N,
                   NULL, SC_F32, 0, 0, call->out[0].data, call->out[0].desc.dtype};
    if (K > 0 && folded) SC_TRY(cpu_bgemm_tiled(call, &t, 1, NULL, NULL, &native));
    else if (K > 0) {
        int64_t *off = matmul_offsets_all(g);
        if (!off) return cpu_errorf(call, "out of memory");
        sc_status st = cpu_bgemm_tiled(call, &t, g->n_batch, off, off + g->n_batch, &native);
        free(off);
        SC_TRY(st);
    }
    return native ? SC_OK : cpu_run_widened(cpu_matmul, call);
}

sc_status cpu_matmul(const sc_kernel_call *call) {
    matmul_geom g;
    SC_TRY(matmul_geom_make(call, &g));
    sc_dtype t = call->in[0].desc.dtype;
    if (t == SC_F64) {
        matmul_ref_f64(&g, call->in[0].data, call->in[1].data, call->out[0].data);
        return SC_OK;
    }
    if (t == SC_BF16) return matmul_bf16(call, &g);
    if (t != SC_F32) return cpu_errorf(call, "dtype %s not supported", sc_dtype_name(t));
    return matmul_f32(call, &g, call->in[0].data, call->in[1].data, call->out[0].data);
}
