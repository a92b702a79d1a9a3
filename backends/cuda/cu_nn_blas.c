/* cuBLAS wrapper and the products on it: Gemm and MatMul (semantics of cpu_nn_gemm.c).
 *
 * Row-major products on column-major cuBLAS: C = op(A) op(B) in row-major is C^T = op(B)^T op(A)^T
 * in column-major, so every call swaps the operands and M / N (cu_gemm_rm). One
 * cublasGemmStridedBatchedEx call serves single, batched and batch-broadcast (stride 0) products;
 * f32 computes in CUBLAS_COMPUTE_32F, or 32F_FAST_TF32 when the backend's tf32 flag is on (--tf32);
 * f64 in CUBLAS_COMPUTE_64F (the gradient checks); bf16 and f16 (A, B and C of one type: mixed
 * precision) on the tensor cores in CUBLAS_COMPUTE_32F, f32 accumulation and one rounding of the
 * result, which is what the CPU's widened f32 product gives (cpu_widen.c), up to summation order.
 *
 * Gemm: Y = alpha op(A) op(B) + beta C with C broadcast to (M, N) first (cu_expand into Y).
 * MatMul: numpy matmul; a 1-D A is a row (1, K), a 1-D B a column (K, 1). Batch dims broadcast:
 * when each operand's batch is either the full output batch or a single matrix, one strided call
 * (and a B without batch folds the batch into M); otherwise one call per output batch.
 */
#include <string.h>

#include "backends/cuda/cu_kernels.h"

sc_status cu_gemm_rm(const cu_call *c, sc_dtype t, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                     const void *A, int64_t lda, int64_t sa, const void *B, int64_t ldb, int64_t sb, double beta, void *C,
                     int64_t ldc, int64_t sc, int64_t batch) {
    if (M == 0 || N == 0 || batch == 0) return SC_OK;
    if (M > 2147483647 || N > 2147483647 || K > 2147483647 || batch > 2147483647)
        return cu_errorf(c, "GEMM dims (%lld, %lld, %lld) x %lld exceed cuBLAS's int range", (long long)M, (long long)N,
                         (long long)K, (long long)batch);
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    /* K == 0 (Y = beta C) makes a K-sized leading dimension 0; cuBLAS wants every one >= 1 even
     * when it reads nothing */
    lda = lda > 0 ? lda : 1, ldb = ldb > 0 ? ldb : 1;
    if (t == SC_F32) {
        float al = (float)alpha, be = (float)beta;
        cublasComputeType_t ct = c->ctx->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
        CUBLAS_CHECK(c, cublasGemmStridedBatchedEx(c->ctx->cublas, opb, opa, (int)N, (int)M, (int)K, &al, B, CUDA_R_32F,
                                                   (int)ldb, sb, A, CUDA_R_32F, (int)lda, sa, &be, C, CUDA_R_32F, (int)ldc, sc,
                                                   (int)batch, ct, CUBLAS_GEMM_DEFAULT));
    } else if (t == SC_F64) {
        CUBLAS_CHECK(c, cublasGemmStridedBatchedEx(c->ctx->cublas, opb, opa, (int)N, (int)M, (int)K, &alpha, B, CUDA_R_64F,
                                                   (int)ldb, sb, A, CUDA_R_64F, (int)lda, sa, &beta, C, CUDA_R_64F, (int)ldc, sc,
                                                   (int)batch, CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT));
    } else if (sc_dtype_is_half(t)) {
        float al = (float)alpha, be = (float)beta;
        cudaDataType dt = t == SC_BF16 ? CUDA_R_16BF : CUDA_R_16F;
        CUBLAS_CHECK(c, cublasGemmStridedBatchedEx(c->ctx->cublas, opb, opa, (int)N, (int)M, (int)K, &al, B, dt, (int)ldb, sb,
                                                   A, dt, (int)lda, sa, &be, C, dt, (int)ldc, sc, (int)batch,
                                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    } else {
        return cu_errorf(c, "dtype %s not supported (f32, f64, bf16, f16)", sc_dtype_name(t));
    }
    return SC_OK;
}

sc_status cu_gemm(const cu_call *c) {
    const sc_gemm_attrs *ga = &c->node->attrs->gemm;
    const sc_desc *a = &c->in[0].desc, *b = &c->in[1].desc, *y = &c->out[0].desc;
    if (a->rank != 2 || b->rank != 2 || y->rank != 2) return cu_errorf(c, "A, B and Y must be 2-D");
    int64_t M = ga->trans_a ? a->dims[1] : a->dims[0], K = ga->trans_a ? a->dims[0] : a->dims[1];
    int64_t KB = ga->trans_b ? b->dims[1] : b->dims[0], N = ga->trans_b ? b->dims[0] : b->dims[1];
    if (K != KB || y->dims[0] != M || y->dims[1] != N) return cu_errorf(c, "op(A) (%lld, %lld) and op(B) (%lld, %lld) do not give Y", (long long)M, (long long)K, (long long)KB, (long long)N);
    if (b->dtype != a->dtype) return cu_errorf(c, "A and B dtypes differ");
    double beta = 0;
    if (c->n_in > 2 && c->in[2].data && ga->beta != 0.0f) {
        cu_call e = {c->ctx, c->node, &c->in[2], 1, c->out, 1};
        SC_TRY(cu_expand(&e)); /* Y = C broadcast to (M, N) */
        beta = ga->beta;
    } else if (K == 0 && M * N > 0) {
        CU_CHECK(c, cudaMemsetAsync(c->out[0].data, 0, (size_t)sc_desc_bytes(y), c->ctx->stream));
        return SC_OK;
    }
    return cu_gemm_rm(c, a->dtype, ga->trans_a, ga->trans_b, M, N, K, ga->alpha, c->in[0].data, ga->trans_a ? M : K, 0,
                      c->in[1].data, ga->trans_b ? K : N, 0, beta, c->out[0].data, N, 0, 1);
}

/* Batch dims of one operand right-aligned onto the output's nb batch dims (missing = 1). */
static void batch_dims(const sc_desc *d, int core, int nb, int64_t *out) {
    int have = d->rank - core;
    for (int i = 0; i < nb; i++) {
        int j = i - (nb - have);
        out[i] = j >= 0 ? d->dims[j] : 1;
    }
}

sc_status cu_matmul(const cu_call *c) {
    const sc_desc *a = &c->in[0].desc, *b = &c->in[1].desc, *y = &c->out[0].desc;
    sc_dtype t = a->dtype;
    if (b->dtype != t) return cu_errorf(c, "A and B dtypes differ");
    if (a->rank < 1 || b->rank < 1) return cu_errorf(c, "MatMul of a scalar");
    int64_t M = a->rank == 1 ? 1 : a->dims[a->rank - 2], K = a->dims[a->rank - 1];
    int64_t KB = b->rank == 1 ? b->dims[0] : b->dims[b->rank - 2], N = b->rank == 1 ? 1 : b->dims[b->rank - 1];
    if (K != KB) return cu_errorf(c, "inner dims %lld and %lld differ", (long long)K, (long long)KB);
    int acore = a->rank == 1 ? 1 : 2, bcore = b->rank == 1 ? 1 : 2;
    int nb = (a->rank - acore) > (b->rank - bcore) ? a->rank - acore : b->rank - bcore;
    int64_t ab[SC_MAX_RANK], bb[SC_MAX_RANK], ob[SC_MAX_RANK];
    batch_dims(a, acore, nb, ab);
    batch_dims(b, bcore, nb, bb);
    int64_t na = 1, nbb = 1, no = 1;
    for (int i = 0; i < nb; i++) {
        ob[i] = ab[i] > bb[i] ? ab[i] : bb[i];
        if (ab[i] != ob[i] && ab[i] != 1) return cu_errorf(c, "batch dims do not broadcast");
        if (bb[i] != ob[i] && bb[i] != 1) return cu_errorf(c, "batch dims do not broadcast");
        na *= ab[i], nbb *= bb[i], no *= ob[i];
    }
    if (no * M * N != sc_desc_numel(y)) return cu_errorf(c, "output has %lld elements, expected %lld", (long long)sc_desc_numel(y), (long long)(no * M * N));
    if (no == 0 || M == 0 || N == 0) return SC_OK;
    if (K == 0) {
        CU_CHECK(c, cudaMemsetAsync(c->out[0].data, 0, (size_t)sc_desc_bytes(y), c->ctx->stream));
        return SC_OK;
    }
    if (nbb == 1 && na == no) /* B shared: fold A's batch into M */
        return cu_gemm_rm(c, t, false, false, no * M, N, K, 1.0, c->in[0].data, K, 0, c->in[1].data, N, 0, 0.0, c->out[0].data, N, 0, 1);
    if ((na == no || na == 1) && (nbb == no || nbb == 1))
        return cu_gemm_rm(c, t, false, false, M, N, K, 1.0, c->in[0].data, K, na == 1 ? 0 : M * K, c->in[1].data, N,
                          nbb == 1 ? 0 : K * N, 0.0, c->out[0].data, N, M * N, no);
    /* partial broadcasting: one product per output batch */
    size_t es = sc_dtype_size(t);
    for (int64_t o = 0; o < no; o++) {
        int64_t rem = o, ia = 0, ib = 0, sa = 1, sbb = 1;
        for (int i = nb - 1; i >= 0; i--) {
            int64_t q = rem % ob[i];
            rem /= ob[i];
            ia += (ab[i] == 1 ? 0 : q) * sa;
            ib += (bb[i] == 1 ? 0 : q) * sbb;
            sa *= ab[i];
            sbb *= bb[i];
        }
        SC_TRY(cu_gemm_rm(c, t, false, false, M, N, K, 1.0, (const char *)c->in[0].data + ia * M * K * (int64_t)es, K, 0,
                          (const char *)c->in[1].data + ib * K * N * (int64_t)es, N, 0, 0.0,
                          (char *)c->out[0].data + o * M * N * (int64_t)es, N, 0, 1));
    }
    return SC_OK;
}
