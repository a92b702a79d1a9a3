/* Emulated cuBLAS (tests/cuda_emu): handles and cublasGemmStridedBatchedEx on the CPU.
 *
 * What it emulates, per the cuBLAS documentation (cublasGemmStridedBatchedEx, cublasGemmEx):
 *   C_i = alpha op(A_i) op(B_i) + beta C_i, i < batchCount, column-major, X_i = X + i * strideX
 *   elements (a stride may be 0, a broadcast, or negative), op(A) m x k, op(B) k x n, C m x n.
 * The product is queued on the handle's stream (emu::enqueue) and runs later, so alpha and beta
 * (host scalars: pointer mode HOST, the only mode emulated) are read when the call is made.
 * f32 products accumulate in float in k order with fused multiply-adds, like a simple GPU kernel;
 * f64 in double. CUBLAS_COMPUTE_32F_FAST_TF32 rounds every A and B element to TF32 (10 mantissa
 * bits, round to nearest even, as the docs say for input conversions) before multiplying, so its
 * precision loss shows. The handle's math mode is kept but changes no result: the docs define
 * CUBLAS_COMPUTE_32F as "compute and intermediate storage precisions of at least 32-bits", and
 * the math mode's TF32 setting as one for "single-precision routines"; a compute type given
 * explicitly decides (which is also what the backend does: it passes _FAST_TF32 itself).
 *
 * What it checks, returning the documented status, with an emu::note saying why:
 *   NOT_INITIALIZED  a NULL, destroyed or never-created handle;
 *   INVALID_VALUE    m, n, k or batchCount < 0; transa / transb not N, T or C; lda < max(1, m)
 *                    (transa N) or max(1, k); ldb < max(1, k) (transb N) or max(1, n);
 *                    ldc < max(1, m); alpha or beta NULL; an unknown algo or compute type;
 *                    and, beyond what cuBLAS reports synchronously (on a GPU these would fault
 *                    or corrupt results later): alpha / beta in device memory (pointer mode is
 *                    HOST), A, B or C not lying inside one device allocation over the extent
 *                    the batch touches, and C matrices of different batch entries overlapping
 *                    (the docs call that undefined);
 *   NOT_SUPPORTED    type / compute-type combinations other than all-R_32F with COMPUTE_32F,
 *                    _PEDANTIC or _FAST_TF32, all-R_16BF or all-R_16F with COMPUTE_32F or
 *                    _PEDANTIC, and all-R_64F with COMPUTE_64F or _PEDANTIC.
 * 16-bit operands are widened on load and the f32 result is rounded once on store (to nearest
 * even; core/half.h, the backends' conversions).
 * Operands that are not read are not checked: A and B when k == 0 or alpha == 0, and C's old
 * values when beta == 0 (C is then only written, so fresh NaN-filled memory never leaks in).
 */
#include <cublas_v2.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <mutex>

#include "core/half.h"
#include "emu_internal.h"

static const char *const kGemm = "cublasGemmStridedBatchedEx";

/* ---- handles ---- */

struct cublasContext {
    cublasContext *next; /* the list of live handles */
    cudaStream_t stream; /* NULL = the legacy default stream, as in cuBLAS */
    cublasMath_t math;
};

static std::mutex g_handles_mu;
static cublasContext *g_handles;

/* Handles are looked up rather than trusted, so a destroyed or garbage handle is reported. */
static bool handle_live(cublasHandle_t h) {
    if (!h) return false;
    std::lock_guard<std::mutex> lock(g_handles_mu);
    for (cublasContext *p = g_handles; p; p = p->next)
        if (p == h) return true;
    return false;
}

static cublasStatus_t bad_handle(const char *fn, cublasHandle_t h) {
    emu::note("%s: handle %p was not made by cublasCreate or was destroyed", fn, (void *)h);
    return CUBLAS_STATUS_NOT_INITIALIZED;
}

extern "C" cublasStatus_t cublasCreate_v2(cublasHandle_t *handle) {
    if (!handle) {
        emu::note("cublasCreate: handle is NULL");
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    cublasContext *h = (cublasContext *)calloc(1, sizeof *h);
    if (!h) return CUBLAS_STATUS_ALLOC_FAILED;
    h->stream = NULL;
    h->math = CUBLAS_DEFAULT_MATH;
    std::lock_guard<std::mutex> lock(g_handles_mu);
    h->next = g_handles;
    g_handles = h;
    *handle = h;
    return CUBLAS_STATUS_SUCCESS;
}

/* Work already queued holds copies of everything it needs, so the handle can go at once. */
extern "C" cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
    std::lock_guard<std::mutex> lock(g_handles_mu);
    for (cublasContext **pp = &g_handles; *pp; pp = &(*pp)->next)
        if (*pp == handle) {
            *pp = handle->next;
            free(handle);
            return CUBLAS_STATUS_SUCCESS;
        }
    emu::note("cublasDestroy: handle %p was not made by cublasCreate or was destroyed", (void *)handle);
    return CUBLAS_STATUS_NOT_INITIALIZED;
}

extern "C" cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId) {
    if (!handle_live(handle)) return bad_handle("cublasSetStream", handle);
    handle->stream = streamId;
    return CUBLAS_STATUS_SUCCESS;
}

/* One base mode, optionally or-ed with CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION. */
static bool math_mode_valid(int mode) {
    int base = mode & ~(int)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    return base == CUBLAS_DEFAULT_MATH || base == CUBLAS_TENSOR_OP_MATH || base == CUBLAS_PEDANTIC_MATH ||
           base == CUBLAS_TF32_TENSOR_OP_MATH || base == CUBLAS_FP32_EMULATED_BF16X9_MATH ||
           base == CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH;
}

extern "C" cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    if (!handle_live(handle)) return bad_handle("cublasSetMathMode", handle);
    if (!math_mode_valid((int)mode)) {
        emu::note("cublasSetMathMode: %d is not a cublasMath_t mode", (int)mode);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    handle->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- status texts (the strings libcublas 13 returns) ---- */

extern "C" const char *cublasGetStatusString(cublasStatus_t status) {
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an unsupported value or parameter was passed to the function";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "the function requires an architectural feature absent from the device";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the function failed to launch on the GPU";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the requested functionality is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "the license check failed";
    }
    return "unrecognized status";
}

extern "C" const char *cublasGetStatusName(cublasStatus_t status) {
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "unrecognized status";
}

/* ---- argument checks ---- */

static const char *op_name(cublasOperation_t op) {
    switch (op) {
    case CUBLAS_OP_N: return "N";
    case CUBLAS_OP_T: return "T";
    case CUBLAS_OP_C: return "C";
    default: return "?";
    }
}

/* CUBLAS_OP_CONJG is a placeholder the docs exclude ("not one of N, C, T"). */
static bool op_valid(cublasOperation_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C; }

static bool algo_valid(cublasGemmAlgo_t a) {
    int v = (int)a;
    return v == CUBLAS_GEMM_DEFAULT || (v >= CUBLAS_GEMM_ALGO0 && v <= CUBLAS_GEMM_ALGO23) ||
           (v >= CUBLAS_GEMM_DEFAULT_TENSOR_OP && v <= CUBLAS_GEMM_ALGO15_TENSOR_OP) || v == CUBLAS_GEMM_AUTOTUNE;
}

static bool compute_type_valid(cublasComputeType_t c) {
    switch (c) {
    case CUBLAS_COMPUTE_16F: case CUBLAS_COMPUTE_16F_PEDANTIC: case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC: case CUBLAS_COMPUTE_32F_FAST_16F: case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32: case CUBLAS_COMPUTE_32F_EMULATED_16BFX9: case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC: case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT: case CUBLAS_COMPUTE_32I:
    case CUBLAS_COMPUTE_32I_PEDANTIC: return true;
    }
    return false;
}

static const char *dtype_name(cudaDataType t) {
    switch (t) {
    case CUDA_R_32F: return "CUDA_R_32F";
    case CUDA_R_64F: return "CUDA_R_64F";
    case CUDA_R_16F: return "CUDA_R_16F";
    case CUDA_R_16BF: return "CUDA_R_16BF";
    case CUDA_R_8I: return "CUDA_R_8I";
    case CUDA_R_32I: return "CUDA_R_32I";
    case CUDA_C_32F: return "CUDA_C_32F";
    case CUDA_C_64F: return "CUDA_C_64F";
    default: return "another cudaDataType";
    }
}

/* The emulated combinations: -1 = not emulated. bf16 and f16 (A, B and C of one type) compute in
 * f32, with alpha and beta f32 and C rounded once, to nearest even, as cuBLAS's 32F compute type
 * does for them. */
enum { GEMM_F32, GEMM_F64, GEMM_BF16, GEMM_F16 };
static int gemm_kind(cudaDataType at, cudaDataType bt, cudaDataType ct, cublasComputeType_t comp) {
    bool all32 = at == CUDA_R_32F && bt == CUDA_R_32F && ct == CUDA_R_32F;
    bool all64 = at == CUDA_R_64F && bt == CUDA_R_64F && ct == CUDA_R_64F;
    bool all16bf = at == CUDA_R_16BF && bt == CUDA_R_16BF && ct == CUDA_R_16BF;
    bool all16 = at == CUDA_R_16F && bt == CUDA_R_16F && ct == CUDA_R_16F;
    if (all32 && (comp == CUBLAS_COMPUTE_32F || comp == CUBLAS_COMPUTE_32F_PEDANTIC || comp == CUBLAS_COMPUTE_32F_FAST_TF32))
        return GEMM_F32;
    if (all64 && (comp == CUBLAS_COMPUTE_64F || comp == CUBLAS_COMPUTE_64F_PEDANTIC)) return GEMM_F64;
    if ((all16bf || all16) && (comp == CUBLAS_COMPUTE_32F || comp == CUBLAS_COMPUTE_32F_PEDANTIC))
        return all16 ? GEMM_F16 : GEMM_BF16;
    return -1;
}

/* The element offsets [lo, hi] a batch of column-major rows x cols matrices (rows, cols >= 1)
 * touches: the last element of one matrix is (cols - 1) * ld + rows - 1, and the batch entries
 * start at i * stride for i < batch (stride may be 0 or negative). False on overflow. */
static bool batch_extent(int64_t rows, int64_t cols, int64_t ld, int64_t stride, int64_t batch, int64_t *lo,
                         int64_t *hi) {
    int64_t last = (cols - 1) * ld + (rows - 1); /* < 2^62: all factors are ints */
    int64_t shift;
    if (__builtin_mul_overflow(stride, batch - 1, &shift)) return false;
    *lo = shift < 0 ? shift : 0;
    return !__builtin_add_overflow(shift > 0 ? shift : 0, last, hi);
}

/* Whether operand `name` (stored rows x cols, leading dimension ld) lies inside one device
 * allocation over all batch entries; notes why not. */
static bool operand_on_device(const char *name, const void *p, size_t es, int64_t rows, int64_t cols, int64_t ld,
                              int64_t stride, int64_t batch) {
    int64_t lo = 0, hi = 0, bytes = 0;
    if (!batch_extent(rows, cols, ld, stride, batch, &lo, &hi) ||
        __builtin_mul_overflow(hi - lo + 1, (int64_t)es, &bytes)) {
        emu::note("%s: %s's extent (%lld x %lld, ld %lld, stride %lld, batch %lld) overflows", kGemm, name,
                  (long long)rows, (long long)cols, (long long)ld, (long long)stride, (long long)batch);
        return false;
    }
    const void *start = (const void *)((uintptr_t)p + (uintptr_t)(lo * (int64_t)es));
    if (p && emu::is_device(start, (size_t)bytes)) return true;
    emu::note("%s: %s = %p is not device memory over the %lld bytes from element %lld that the batch reads or writes "
              "(%lld x %lld column-major, ld %lld, stride %lld, batch %lld)",
              kGemm, name, p, (long long)bytes, (long long)lo, (long long)rows, (long long)cols, (long long)ld,
              (long long)stride, (long long)batch);
    return false;
}

/* The first batch distance d (1 <= d < batch) at which the m x n matrices C_i and C_{i+d}
 * (leading dimension ldc >= m) share an element, or 0 when none do. They do when
 * d * |stride| = dr + dc * ldc for some |dr| < m, |dc| < n; as ldc >= m, only dc = D / ldc and
 * D / ldc + 1 can give a small enough dr, and no d with d * |stride| past one matrix's span can. */
static int64_t c_overlap(int64_t m, int64_t n, int64_t ldc, int64_t stride, int64_t batch) {
    int64_t a = stride < 0 ? -stride : stride, span = (n - 1) * ldc + m;
    for (int64_t d = 1; d < batch; d++) {
        int64_t D;
        if (__builtin_mul_overflow(d, a, &D) || D >= span) return 0;
        for (int64_t dc = D / ldc; dc <= D / ldc + 1; dc++) {
            int64_t dr = D - dc * ldc;
            if (dc < n && dr > -m && dr < m) return d;
        }
    }
    return 0;
}

/* ---- the product ---- */

/* One strided-batched product, everything by value: the closure runs after the call returns. */
struct gemm_job {
    int64_t m, n, k, batch;
    const void *A, *B;
    void *C;
    int64_t a_row, a_col; /* element steps of op(A)(i, p): i * a_row + p * a_col */
    int64_t b_row, b_col; /* op(B)(p, j): p * b_row + j * b_col */
    int64_t ldc, sa, sb, sc;
    double alpha, beta; /* f32 scalars widen exactly and narrow back exactly */
    bool f64, tf32, read_ab;
    int kind;
};



static inline float fma_t(float a, float b, float c) { return fmaf(a, b, c); }
static inline double fma_t(double a, double b, double c) { return fma(a, b, c); }
static inline float in_t(float v, bool tf32) { return tf32 ? emu::tf32_round(v) : v; }
static inline double in_t(double v, bool) { return v; }

/* C_b = alpha op(A_b) op(B_b) + beta C_b with one accumulator per element, summed in k order; T is
 * the compute type, S the storage type. */
template <typename T, typename S = T>
static void gemm_run(const gemm_job &g) {
    const T alpha = (T)g.alpha, beta = (T)g.beta;
    for (int64_t b = 0; b < g.batch; b++) {
        const S *a = (const S *)g.A + b * g.sa, *bm = (const S *)g.B + b * g.sb;
        S *c = (S *)g.C + b * g.sc;
        for (int64_t j = 0; j < g.n; j++)
            for (int64_t i = 0; i < g.m; i++) {
                T r = 0;
                if (g.read_ab) {
                    T acc = 0;
                    const S *ap = a + i * g.a_row, *bp = bm + j * g.b_col;
                    for (int64_t p = 0; p < g.k; p++)
                        acc = fma_t(in_t(load_t(ap[p * g.a_col]), g.tf32), in_t(load_t(bp[p * g.b_row]), g.tf32), acc);
                    r = alpha * acc;
                }
                S *cp = c + i + j * g.ldc;
                if (beta != 0) r = fma_t(beta, (T)load_t(*cp), r); /* beta == 0: C is not read */
                store_t(cp, r);
            }
    }
}

/* Reads a host scalar of the compute precision (pointer mode HOST reads it at the call). */
static bool read_scalar(const char *name, const void *p, bool f64, double *v) {
    return emu::read_host_scalar(kGemm, name, p, f64, "the pointer mode is CUBLAS_POINTER_MODE_HOST", v);
}

/* The documented INVALID_VALUE checks on sizes, operations and leading dimensions. */
static bool shape_valid(cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, int lda, int ldb,
                        int ldc, int batchCount) {
    if (m < 0 || n < 0 || k < 0 || batchCount < 0) {
        emu::note("%s: m %d, n %d, k %d, batchCount %d: none may be negative", kGemm, m, n, k, batchCount);
        return false;
    }
    if (!op_valid(transa) || !op_valid(transb)) {
        emu::note("%s: transa %d / transb %d must be CUBLAS_OP_N, _T or _C", kGemm, (int)transa, (int)transb);
        return false;
    }
    int need_a = transa == CUBLAS_OP_N ? m : k, need_b = transb == CUBLAS_OP_N ? k : n;
    if (need_a < 1) need_a = 1;
    if (need_b < 1) need_b = 1;
    if (lda < need_a || ldb < need_b || ldc < (m > 1 ? m : 1)) {
        emu::note("%s: transa %s, transb %s, m %d, n %d, k %d need lda >= %d, ldb >= %d, ldc >= %d; got %d, %d, %d",
                  kGemm, op_name(transa), op_name(transb), m, n, k, need_a, need_b, m > 1 ? m : 1, lda, ldb, ldc);
        return false;
    }
    return true;
}

extern "C" cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                                     cublasOperation_t transb, int m, int n, int k, const void *alpha,
                                                     const void *A, cudaDataType Atype, int lda, long long int strideA,
                                                     const void *B, cudaDataType Btype, int ldb, long long int strideB,
                                                     const void *beta, void *C, cudaDataType Ctype, int ldc,
                                                     long long int strideC, int batchCount,
                                                     cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
    if (!handle_live(handle)) return bad_handle(kGemm, handle);
    if (!shape_valid(transa, transb, m, n, k, lda, ldb, ldc, batchCount)) return CUBLAS_STATUS_INVALID_VALUE;
    if (!alpha || !beta) {
        emu::note("%s: alpha (%p) and beta (%p) may not be NULL", kGemm, alpha, beta);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (!algo_valid(algo) || !compute_type_valid(computeType)) {
        emu::note("%s: algo %d / computeType %d is not a valid enumerator", kGemm, (int)algo, (int)computeType);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    int kind = gemm_kind(Atype, Btype, Ctype, computeType);
    if (kind < 0) {
        emu::note("%s: Atype %s, Btype %s, Ctype %s with computeType %d: the emulator runs all-CUDA_R_32F with "
                  "CUBLAS_COMPUTE_32F[_PEDANTIC|_FAST_TF32], all-CUDA_R_16BF or all-CUDA_R_16F with "
                  "CUBLAS_COMPUTE_32F[_PEDANTIC] and all-CUDA_R_64F with CUBLAS_COMPUTE_64F[_PEDANTIC]",
                  kGemm, dtype_name(Atype), dtype_name(Btype), dtype_name(Ctype), (int)computeType);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (m == 0 || n == 0 || batchCount == 0) return CUBLAS_STATUS_SUCCESS; /* nothing to compute */

    gemm_job g;
    g.f64 = kind == GEMM_F64;
    g.kind = kind;
    g.tf32 = computeType == CUBLAS_COMPUTE_32F_FAST_TF32;
    if (!read_scalar("alpha", alpha, g.f64, &g.alpha) || !read_scalar("beta", beta, g.f64, &g.beta))
        return CUBLAS_STATUS_INVALID_VALUE;
    g.read_ab = k > 0 && g.alpha != 0; /* NaN alpha reads them (and gives NaN) */
    size_t es = g.f64 ? sizeof(double) : kind == GEMM_F32 ? sizeof(float) : 2;
    bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N; /* OP_C is OP_T on real data */
    if (g.read_ab && (!operand_on_device("A", A, es, ta ? k : m, ta ? m : k, lda, strideA, batchCount) ||
                      !operand_on_device("B", B, es, tb ? n : k, tb ? k : n, ldb, strideB, batchCount)))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!operand_on_device("C", C, es, m, n, ldc, strideC, batchCount)) return CUBLAS_STATUS_INVALID_VALUE;
    int64_t d = c_overlap(m, n, ldc, strideC, batchCount);
    if (d) {
        emu::note("%s: C matrices overlap (m %d, n %d, ldc %d, strideC %lld: entries i and i + %lld share elements); "
                  "the docs leave that undefined",
                  kGemm, m, n, ldc, strideC, (long long)d);
        return CUBLAS_STATUS_INVALID_VALUE;
    }

    g.m = m, g.n = n, g.k = k, g.batch = batchCount;
    g.A = A, g.B = B, g.C = C;
    g.a_row = ta ? lda : 1, g.a_col = ta ? 1 : lda; /* op(A)(i, p) = A[i + p lda], or A[p + i lda] */
    g.b_row = tb ? ldb : 1, g.b_col = tb ? 1 : ldb; /* op(B)(p, j) = B[p + j ldb], or B[j + p ldb] */
    g.ldc = ldc, g.sa = strideA, g.sb = strideB, g.sc = strideC;
    emu::enqueue(handle->stream, kGemm, [g]() {
        if (g.kind == GEMM_F64)
            gemm_run<double>(g);
        else if (g.kind == GEMM_BF16)
            gemm_run<float, bf16_t>(g);
        else if (g.kind == GEMM_F16)
            gemm_run<float, f16_t>(g);
        else
            gemm_run<float>(g);
    });
    return CUBLAS_STATUS_SUCCESS;
}
