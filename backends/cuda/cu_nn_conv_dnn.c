/* cuDNN convolutions (built only with SC_HAVE_CUDNN; cu_nn_conv.c decides when they apply).
 *
 * Descriptors are made per call (NCHW / NCDHW, packed; 1-D convolutions get a unit second spatial
 * dim, as cuDNN wants at least 2). The algorithm is the first of cuDNN's heuristic list
 * (cudnnGet*Algorithm_v7, best first) that is deterministic and whose workspace fits
 * CU_DNN_WORKSPACE_MAX; the workspace is the backend's scratch. Both conditions keep the plan
 * invariant on the GPU: the choice depends on the convolution alone, not on the memory a plan
 * leaves free, and the algorithm repeats its bits (cuDNN's BWD_DATA_ALGO_0 and BWD_FILTER_ALGO_0 /
 * _3 add with atomics), so a recomputed convolution equals the first run and every plan gives the
 * weights of `none`. The fixed cap is within the 256 MiB of scratch the backend always allows.
 * f32 runs with CUDNN_FMA_MATH unless TF32 is enabled (CUDNN_TENSOR_OP_MATH); f64 for checks; bf16
 * and f16 data (mixed precision) compute in f32 on the tensor cores; their bias is put in y first and
 * the convolution accumulates onto it (beta = 1), and their bias gradient is left to cu_nn_conv.c.
 * Every descriptor is destroyed on every path, failures included.
 */
#ifdef SC_HAVE_CUDNN
#include <string.h>

#include "backends/cuda/cu_kernels.h"

typedef struct {
    cudnnTensorDescriptor_t x, y, b;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
} dnn_descs;

static void descs_free(dnn_descs *d) {
    if (d->x) cudnnDestroyTensorDescriptor(d->x);
    if (d->y) cudnnDestroyTensorDescriptor(d->y);
    if (d->b) cudnnDestroyTensorDescriptor(d->b);
    if (d->w) cudnnDestroyFilterDescriptor(d->w);
    if (d->conv) cudnnDestroyConvolutionDescriptor(d->conv);
}

static void packed(int nd, const int *dims, int *st) {
    int s = 1;
    for (int i = nd - 1; i >= 0; i--) st[i] = s, s *= dims[i];
}

static sc_status descs_make(const cu_call *c, const cu_window *w, int64_t N, int64_t C, int64_t M, int64_t G, sc_dtype t, dnn_descs *d) {
    memset(d, 0, sizeof *d);
    bool half = sc_dtype_is_half(t);
    cudnnDataType_t dt = t == SC_F64 ? CUDNN_DATA_DOUBLE : t == SC_BF16 ? CUDNN_DATA_BFLOAT16 : t == SC_F16 ? CUDNN_DATA_HALF
                                                                                                             : CUDNN_DATA_FLOAT;
    int ns = w->ns < 2 ? 2 : w->ns, nd = ns + 2;
    int xd[5] = {(int)N, (int)C}, yd[5] = {(int)N, (int)M}, wd[5] = {(int)M, (int)(C / G)}, bd[5] = {1, (int)M};
    int pad[3], str[3], dil[3], st[5];
    for (int i = 0; i < ns; i++) {
        xd[2 + i] = (int)w->in[i], yd[2 + i] = (int)w->out[i], wd[2 + i] = (int)w->k[i], bd[2 + i] = 1;
        pad[i] = (int)w->pb[i], str[i] = (int)w->stride[i], dil[i] = (int)w->dil[i];
    }
    CUDNN_CHECK(c, cudnnCreateTensorDescriptor(&d->x));
    CUDNN_CHECK(c, cudnnCreateTensorDescriptor(&d->y));
    CUDNN_CHECK(c, cudnnCreateTensorDescriptor(&d->b));
    CUDNN_CHECK(c, cudnnCreateFilterDescriptor(&d->w));
    CUDNN_CHECK(c, cudnnCreateConvolutionDescriptor(&d->conv));
    packed(nd, xd, st);
    CUDNN_CHECK(c, cudnnSetTensorNdDescriptor(d->x, dt, nd, xd, st));
    packed(nd, yd, st);
    CUDNN_CHECK(c, cudnnSetTensorNdDescriptor(d->y, dt, nd, yd, st));
    packed(nd, bd, st);
    CUDNN_CHECK(c, cudnnSetTensorNdDescriptor(d->b, dt, nd, bd, st));
    CUDNN_CHECK(c, cudnnSetFilterNdDescriptor(d->w, dt, CUDNN_TENSOR_NCHW, nd, wd));
    /* 16-bit data computes in float (PSEUDO_HALF / PSEUDO_BFLOAT16_CONFIG) on the tensor cores */
    CUDNN_CHECK(c, cudnnSetConvolutionNdDescriptor(d->conv, ns, pad, str, dil, CUDNN_CROSS_CORRELATION,
                                                   half ? CUDNN_DATA_FLOAT : dt));
    CUDNN_CHECK(c, cudnnSetConvolutionGroupCount(d->conv, (int)G));
    bool tensor_op = half || (t == SC_F32 && c->ctx->tf32);
    CUDNN_CHECK(c, cudnnSetConvolutionMathType(d->conv, tensor_op ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
    return SC_OK;
}

#define CU_DNN_WORKSPACE_MAX (256ll << 20)

/* Asks cuDNN for its ranked algorithms of one direction (get_v7: cudnnGetConvolution*Algorithm_v7,
 * called with the direction's descriptors, the varargs; Perf and COUNT: its perf type and algorithm
 * count), picks the first usable deterministic one whose workspace fits into algo, and takes its
 * workspace (bytes long) from the call's scratch into work; returns an error status when none fits. */
#define FIND_ALGO(Perf, COUNT, get_v7, algo, work, bytes, ...)                                              \
    do {                                                                                                   \
        Perf perf_[COUNT];                                                                                 \
        int n_ = 0;                                                                                        \
        CUDNN_CHECK(c, get_v7(c->ctx->cudnn, __VA_ARGS__, COUNT, &n_, perf_));                             \
        int64_t ws_ = -1;                                                                                  \
        for (int i_ = 0; i_ < n_ && ws_ < 0; i_++)                                                         \
            if (perf_[i_].status == CUDNN_STATUS_SUCCESS && perf_[i_].determinism == CUDNN_DETERMINISTIC && \
                (int64_t)perf_[i_].memory <= CU_DNN_WORKSPACE_MAX) {                                       \
                (algo) = perf_[i_].algo;                                                                   \
                ws_ = (int64_t)perf_[i_].memory;                                                           \
            }                                                                                              \
        if (ws_ < 0)                                                                                       \
            return cu_errorf(c, "no deterministic cuDNN algorithm fits a workspace of %lld bytes", CU_DNN_WORKSPACE_MAX); \
        (work) = NULL;                                                                                     \
        if (ws_ > 0) SC_TRY(cu_scratch(c, ws_, &(work)));                                                  \
        (bytes) = (size_t)ws_;                                                                             \
    } while (0)

/* cuDNN's alpha = 1 and beta = 0, typed as the computation: double for f64, float otherwise (16-bit
 * data computes in float). */
static const double one_f64 = 1, zero_f64 = 0;
static const float one_f32 = 1, zero_f32 = 0;
static const void *dnn_one(sc_dtype t) { return t == SC_F64 ? (const void *)&one_f64 : (const void *)&one_f32; }
static const void *dnn_zero(sc_dtype t) { return t == SC_F64 ? (const void *)&zero_f64 : (const void *)&zero_f32; }

/* y = conv(x, w) (+ y when onto_y: y holds the bias) (+ b, added after by cudnnAddTensor). */
static sc_status fwd_run(const cu_call *c, dnn_descs *d, sc_dtype t, const void *x, const void *wt, const void *b, void *y,
                         bool onto_y) {
    cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    void *work;
    size_t work_bytes;
    FIND_ALGO(cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, cudnnGetConvolutionForwardAlgorithm_v7,
              algo, work, work_bytes, d->x, d->w, d->conv, d->y);
    const void *al = dnn_one(t);
    const void *be = onto_y ? al : dnn_zero(t);
    CUDNN_CHECK(c, cudnnConvolutionForward(c->ctx->cudnn, al, d->x, x, d->w, wt, d->conv, algo, work, work_bytes, be, d->y, y));
    if (b) CUDNN_CHECK(c, cudnnAddTensor(c->ctx->cudnn, al, d->b, b, al, d->y, y));
    return SC_OK;
}

static sc_status bwd_run(const cu_call *c, dnn_descs *d, sc_dtype t, const void *dy, const void *x, const void *wt, void *dx, void *dw) {
    const void *al = dnn_one(t), *be = dnn_zero(t);
    void *work;
    size_t work_bytes;
    if (dw) {
        cudnnConvolutionBwdFilterAlgo_t algo = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;
        FIND_ALGO(cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                  cudnnGetConvolutionBackwardFilterAlgorithm_v7, algo, work, work_bytes, d->x, d->y, d->conv, d->w);
        CUDNN_CHECK(c, cudnnConvolutionBackwardFilter(c->ctx->cudnn, al, d->x, x, d->y, dy, d->conv, algo, work, work_bytes, be, d->w, dw));
    }
    if (dx) {
        cudnnConvolutionBwdDataAlgo_t algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
        FIND_ALGO(cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                  cudnnGetConvolutionBackwardDataAlgorithm_v7, algo, work, work_bytes, d->w, d->y, d->conv, d->x);
        CUDNN_CHECK(c, cudnnConvolutionBackwardData(c->ctx->cudnn, al, d->w, wt, d->y, dy, d->conv, algo, work, work_bytes, be, d->x, dx));
    }
    return SC_OK;
}

/* The dtypes cuDNN runs here: f32, f64, and bf16 / f16 but for the bias gradient (cu_conv_grad
 * widens a 16-bit ConvGrad that asks for dB). */
static sc_status dtype_check(const cu_call *c, sc_dtype t) {
    if (t == SC_F32 || t == SC_F64 || sc_dtype_is_half(t)) return SC_OK;
    return cu_errorf(c, "dtype %s not supported (f32, f64, bf16, f16)", sc_dtype_name(t));
}

sc_status cu_conv_dnn_fwd(const cu_call *c, const cu_window *w, int64_t N, int64_t C, int64_t M, int64_t G, sc_dtype t,
                          const void *x, const void *wt, const void *b, void *y) {
    SC_TRY(dtype_check(c, t));
    /* 16-bit: y starts as the bias and the convolution accumulates onto it (beta = 1), so conv +
     * bias is rounded once, as on the f32 path */
    bool onto_y = sc_dtype_is_half(t) && b;
    dnn_descs d;
    sc_status st = descs_make(c, w, N, C, M, G, t, &d);
    if (!st && onto_y) st = cu_fill_channels(c, 2, y, b, N, M, w->out[0] * w->out[1] * w->out[2]);
    if (!st) st = fwd_run(c, &d, t, x, wt, onto_y ? NULL : b, y, onto_y);
    descs_free(&d);
    return st;
}

sc_status cu_conv_dnn_bwd(const cu_call *c, const cu_window *w, int64_t N, int64_t C, int64_t M, int64_t G, sc_dtype t,
                          const void *dy, const void *x, const void *wt, void *dx, void *dw, void *db) {
    SC_TRY(dtype_check(c, t));
    if (db) SC_TRY(cu_bias_grad(c, t, dy, N, M, w->out[0] * w->out[1] * w->out[2], db));
    if (!dx && !dw) return SC_OK;
    dnn_descs d;
    sc_status st = descs_make(c, w, N, C, M, G, t, &d);
    if (!st) st = bwd_run(c, &d, t, dy, x, wt, dx, dw);
    descs_free(&d);
    return st;
}
#endif
