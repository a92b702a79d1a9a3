/* Emulated cuDNN (tests/cuda_emu): handles, descriptors, convolutions and cudnnAddTensor on the CPU.
 *
 * What it emulates, per the cuDNN documentation of the legacy API:
 *   - tensor descriptors (2 to 8 dims, any strides), filter descriptors (KCRS... packed, format
 *     CUDNN_TENSOR_NCHW), convolution descriptors (pads, strides, dilations, groups, math type;
 *     CUDNN_CONVOLUTION applies the filter rotated by 180 degrees, CUDNN_CROSS_CORRELATION as is).
 *     The descriptor setters validate like libcudnn 9 does (checked against the real library's
 *     host-side descriptor code: which arguments give BAD_PARAM and which NOT_SUPPORTED).
 *   - forward y = alpha conv(x, w) + beta y, backward data dx = alpha conv^T(dy, w) + beta dx,
 *     backward filter dw = alpha sum_n corr(x, dy) + beta dw, and cudnnAddTensor
 *     C = alpha A + beta C with A broadcast over the dims where it is 1; 4-D and 5-D (2-D and 3-D
 *     convolutions), float and double. Alpha and beta are host scalars (float for FLOAT data,
 *     double for DOUBLE), read at the call; beta == 0 means the output is only written (its old
 *     contents, maybe NaN, never leak in). The work is queued on the handle's stream and computed
 *     directly (no im2col), accumulating in double and rounding once. Float data with a math type
 *     that lets cuDNN use TF32 tensor cores (DEFAULT, TENSOR_OP, TENSOR_OP_ALLOW_CONVERSION; only
 *     CUDNN_FMA_MATH forbids it) has its inputs rounded to TF32 first, the worst the docs allow.
 *   - the _v7 heuristics return several algorithms, best first, every field filled: one needing
 *     an im2col-sized workspace first, then one cuDNN reports CUDNN_STATUS_NOT_SUPPORTED (with 0
 *     bytes, so a caller that ignores status picks it and then fails), then ones needing little or
 *     no workspace; the GEMM-based forward algorithms are NOT_SUPPORTED with dilation > 1, as in
 *     cuDNN's table. The computations accept exactly those: an algorithm reported NOT_SUPPORTED is
 *     NOT_SUPPORTED, and a workspace smaller than the algorithm reported is BAD_PARAM.
 *
 * What it checks (status + an emu::note saying why): NULL / destroyed / never-set handles and
 * descriptors; descriptors that do not agree (ranks, data types, channels with groups, output
 * dims against out = (in + 2 pad - dil (k - 1) - 1) / stride + 1, BAD_PARAM; for the computations
 * a wrong output size is NOT_SUPPORTED, as the docs list it); alpha / beta NULL or in device
 * memory; data, filter and workspace pointers not inside one device allocation over what the
 * descriptor spans; an output that overlaps itself (strides) or an input or the workspace.
 * 16-bit data (HALF, BFLOAT16) with FLOAT compute, cuDNN's PSEUDO_HALF_CONFIG and
 * PSEUDO_BFLOAT16_CONFIG: products of the widened values accumulate in double and the result is
 * rounded through float to the 16-bit type once; alpha and beta are float.
 * Not emulated (NOT_SUPPORTED with a note): TRUE_HALF_CONFIG (HALF compute), int types, NHWC
 * filters, negative strides.
 * The workspace is overwritten with NaN bytes by every computation that asks for one, since a real
 * algorithm leaves garbage there.
 */
#include <cudnn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmath>
#include <limits>

#include <mutex>

#include "emu_internal.h"

/* ---- live objects: every handle and descriptor starts with this header ---- */

enum obj_kind { OBJ_HANDLE, OBJ_TENSOR, OBJ_FILTER, OBJ_CONV };

struct obj_hdr {
    obj_hdr *next;
    obj_kind kind;
};

static std::mutex g_live_mu;
static obj_hdr *g_live;

/* Zeroed storage for an object of `size` bytes, registered as live. */
static void *obj_new(size_t size, obj_kind kind) {
    obj_hdr *h = (obj_hdr *)calloc(1, size);
    if (!h) return NULL;
    h->kind = kind;
    std::lock_guard<std::mutex> lock(g_live_mu);
    h->next = g_live;
    g_live = h;
    return h;
}

/* Objects are looked up rather than trusted, so destroyed or foreign pointers are reported. */
static bool obj_live(const void *p, obj_kind kind) {
    if (!p) return false;
    std::lock_guard<std::mutex> lock(g_live_mu);
    for (obj_hdr *h = g_live; h; h = h->next)
        if (h == p) return h->kind == kind;
    return false;
}

static bool obj_free(void *p, obj_kind kind) {
    std::lock_guard<std::mutex> lock(g_live_mu);
    for (obj_hdr **pp = &g_live; *pp; pp = &(*pp)->next)
        if (*pp == p && (*pp)->kind == kind) {
            *pp = (*pp)->next;
            free(p);
            return true;
        }
    return false;
}

struct cudnnContext {
    obj_hdr hdr;
    cudaStream_t stream; /* NULL = the legacy default stream */
};

struct cudnnTensorStruct {
    obj_hdr hdr;
    bool set;
    cudnnDataType_t dt;
    int nd;
    int dims[CUDNN_DIM_MAX], strides[CUDNN_DIM_MAX];
};

struct cudnnFilterStruct {
    obj_hdr hdr;
    bool set;
    cudnnDataType_t dt;
    cudnnTensorFormat_t format;
    int nd;
    int dims[CUDNN_DIM_MAX];
};

struct cudnnConvolutionStruct {
    obj_hdr hdr;
    bool set;
    int n; /* spatial dims */
    int pad[CUDNN_DIM_MAX - 2], stride[CUDNN_DIM_MAX - 2], dil[CUDNN_DIM_MAX - 2];
    cudnnConvolutionMode_t mode;
    cudnnDataType_t compute;
    int groups;           /* 1 until set */
    cudnnMathType_t math; /* CUDNN_DEFAULT_MATH until set */
};

/* ---- status text (the strings libcudnn 9 returns) ---- */

extern "C" const char *cudnnGetErrorString(cudnnStatus_t status) {
    switch ((int)status) {
#define S(x) \
    case x: return #x;
        S(CUDNN_STATUS_SUCCESS)
        S(CUDNN_STATUS_NOT_INITIALIZED)
        S(CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH)
        S(CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH)
        S(CUDNN_STATUS_DEPRECATED)
        S(CUDNN_STATUS_LICENSE_ERROR)
        S(CUDNN_STATUS_RUNTIME_IN_PROGRESS)
        S(CUDNN_STATUS_RUNTIME_FP_OVERFLOW)
        S(CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED)
        S(CUDNN_STATUS_BAD_PARAM)
        S(CUDNN_STATUS_INVALID_VALUE)
        S(CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
        S(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER)
        S(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED)
        S(CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND)
        S(CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
        S(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH)
        S(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH)
        S(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES)
        S(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE)
        S(CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH)
        S(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE)
        S(CUDNN_STATUS_NOT_SUPPORTED)
        S(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN)
        S(CUDNN_STATUS_NOT_SUPPORTED_SHAPE)
        S(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE)
        S(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT)
        S(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER)
        S(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART)
        S(CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH)
        S(CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING)
        S(CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE)
        S(CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT)
        S(CUDNN_STATUS_NOT_SUPPORTED_PADDING)
        S(CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM)
        S(CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API)
        S(CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE)
        S(CUDNN_STATUS_INTERNAL_ERROR)
        S(CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED)
        S(CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE)
        S(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
        S(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
        S(CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM)
        S(CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED)
        S(CUDNN_STATUS_EXECUTION_FAILED)
        S(CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER)
        S(CUDNN_STATUS_EXECUTION_FAILED_CUBLAS)
        S(CUDNN_STATUS_EXECUTION_FAILED_CUDART)
        S(CUDNN_STATUS_EXECUTION_FAILED_CURAND)
#undef S
    }
    return "CUDNN_UNKNOWN_STATUS";
}

/* ---- handle ---- */

static cudnnStatus_t bad(const char *fn, const char *why) {
    emu::note("%s: %s", fn, why);
    return CUDNN_STATUS_BAD_PARAM;
}

static bool handle_ok(const char *fn, cudnnHandle_t h) {
    if (obj_live(h, OBJ_HANDLE)) return true;
    emu::note("%s: handle %p was not made by cudnnCreate or was destroyed", fn, (void *)h);
    return false;
}

extern "C" cudnnStatus_t cudnnCreate(cudnnHandle_t *handle) {
    if (!handle) return bad("cudnnCreate", "handle is NULL");
    cudnnContext *h = (cudnnContext *)obj_new(sizeof(cudnnContext), OBJ_HANDLE);
    if (!h) return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    *handle = h;
    return CUDNN_STATUS_SUCCESS;
}

/* Queued work holds copies of everything it needs, so the handle can go at once. */
extern "C" cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
    if (!obj_free(handle, OBJ_HANDLE)) return bad("cudnnDestroy", "not a live handle");
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId) {
    if (!handle_ok("cudnnSetStream", handle)) return CUDNN_STATUS_BAD_PARAM;
    handle->stream = streamId;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- descriptors ---- */

static bool dtype_valid(cudnnDataType_t t) { return (int)t >= CUDNN_DATA_FLOAT && (int)t <= CUDNN_DATA_COMPLEX_FP64; }

static const char *dtype_name(cudnnDataType_t t) {
    switch (t) {
    case CUDNN_DATA_FLOAT: return "FLOAT";
    case CUDNN_DATA_DOUBLE: return "DOUBLE";
    case CUDNN_DATA_HALF: return "HALF";
    case CUDNN_DATA_BFLOAT16: return "BFLOAT16";
    default: return "a non-float type";
    }
}

template <typename T>
static cudnnStatus_t create_obj(const char *fn, T **out, obj_kind kind) {
    if (!out) return bad(fn, "the descriptor pointer is NULL");
    *out = (T *)obj_new(sizeof(T), kind);
    return *out ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
}

/* Destroying NULL is a no-op, like free(); anything else must be live. */
static cudnnStatus_t destroy_obj(const char *fn, void *p, obj_kind kind) {
    if (!p || obj_free(p, kind)) return CUDNN_STATUS_SUCCESS;
    return bad(fn, "not a live descriptor of this kind");
}

extern "C" cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *tensorDesc) {
    return create_obj("cudnnCreateTensorDescriptor", tensorDesc, OBJ_TENSOR);
}
extern "C" cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t tensorDesc) {
    return destroy_obj("cudnnDestroyTensorDescriptor", tensorDesc, OBJ_TENSOR);
}
extern "C" cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *filterDesc) {
    return create_obj("cudnnCreateFilterDescriptor", filterDesc, OBJ_FILTER);
}
extern "C" cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t filterDesc) {
    return destroy_obj("cudnnDestroyFilterDescriptor", filterDesc, OBJ_FILTER);
}
extern "C" cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *convDesc) {
    cudnnStatus_t st = create_obj("cudnnCreateConvolutionDescriptor", convDesc, OBJ_CONV);
    if (st == CUDNN_STATUS_SUCCESS) (*convDesc)->groups = 1, (*convDesc)->math = CUDNN_DEFAULT_MATH;
    return st;
}
extern "C" cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t convDesc) {
    return destroy_obj("cudnnDestroyConvolutionDescriptor", convDesc, OBJ_CONV);
}

/* libcudnn 9: 2 <= nbDims <= 8 (fewer BAD_PARAM, more NOT_SUPPORTED), every dim >= 1, stride 0
 * only on a dim of 1 (negative strides are accepted here, refused by the computations), fewer
 * than 2^31 elements (else NOT_SUPPORTED). */
extern "C" cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t tensorDesc, cudnnDataType_t dataType,
                                                    int nbDims, const int dimA[], const int strideA[]) {
    const char *fn = "cudnnSetTensorNdDescriptor";
    if (!obj_live(tensorDesc, OBJ_TENSOR)) return bad(fn, "not a live tensor descriptor");
    if (!dtype_valid(dataType)) return bad(fn, "dataType is not a cudnnDataType_t");
    if (nbDims < 2) return bad(fn, "nbDims < 2");
    if (nbDims > CUDNN_DIM_MAX) {
        emu::note("%s: nbDims %d > CUDNN_DIM_MAX", fn, nbDims);
        return CUDNN_STATUS_NOT_SUPPORTED;
    }
    if (!dimA || !strideA) return bad(fn, "dimA or strideA is NULL");
    int64_t numel = 1;
    for (int i = 0; i < nbDims; i++) {
        if (dimA[i] < 1) return bad(fn, "a dim is < 1");
        if (strideA[i] == 0 && dimA[i] > 1) return bad(fn, "a stride is 0 on a dim larger than 1");
        numel *= dimA[i];
    }
    if (numel >= (int64_t)1 << 31) {
        emu::note("%s: %lld elements, cuDNN takes fewer than 2^31", fn, (long long)numel);
        return CUDNN_STATUS_NOT_SUPPORTED;
    }
    cudnnTensorStruct *t = tensorDesc;
    t->dt = dataType, t->nd = nbDims;
    for (int i = 0; i < nbDims; i++) t->dims[i] = dimA[i], t->strides[i] = strideA[i];
    t->set = true;
    return CUDNN_STATUS_SUCCESS;
}

/* libcudnn 9: 3 <= nbDims <= 8 (fewer BAD_PARAM, more NOT_SUPPORTED), every dim >= 1. */
extern "C" cudnnStatus_t cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t filterDesc, cudnnDataType_t dataType,
                                                    cudnnTensorFormat_t format, int nbDims, const int filterDimA[]) {
    const char *fn = "cudnnSetFilterNdDescriptor";
    if (!obj_live(filterDesc, OBJ_FILTER)) return bad(fn, "not a live filter descriptor");
    if (!dtype_valid(dataType)) return bad(fn, "dataType is not a cudnnDataType_t");
    if ((int)format < CUDNN_TENSOR_NCHW || (int)format > CUDNN_TENSOR_NCHW_VECT_C)
        return bad(fn, "format is not a cudnnTensorFormat_t");
    if (nbDims < 3) return bad(fn, "nbDims < 3");
    if (nbDims > CUDNN_DIM_MAX) {
        emu::note("%s: nbDims %d > CUDNN_DIM_MAX", fn, nbDims);
        return CUDNN_STATUS_NOT_SUPPORTED;
    }
    if (!filterDimA) return bad(fn, "filterDimA is NULL");
    for (int i = 0; i < nbDims; i++)
        if (filterDimA[i] < 1) return bad(fn, "a dim is < 1");
    cudnnFilterStruct *f = filterDesc;
    f->dt = dataType, f->format = format, f->nd = nbDims;
    for (int i = 0; i < nbDims; i++) f->dims[i] = filterDimA[i];
    f->set = true;
    return CUDNN_STATUS_SUCCESS;
}

/* libcudnn 9: arrayLength <= CUDNN_DIM_MAX - 2 (more is NOT_SUPPORTED), pads >= 0, strides and
 * dilations >= 1. */
extern "C" cudnnStatus_t cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t convDesc, int arrayLength,
                                                         const int padA[], const int filterStrideA[],
                                                         const int dilationA[], cudnnConvolutionMode_t mode,
                                                         cudnnDataType_t computeType) {
    const char *fn = "cudnnSetConvolutionNdDescriptor";
    if (!obj_live(convDesc, OBJ_CONV)) return bad(fn, "not a live convolution descriptor");
    if (arrayLength < 0) return bad(fn, "arrayLength < 0");
    if (arrayLength > CUDNN_DIM_MAX - 2) {
        emu::note("%s: arrayLength %d > CUDNN_DIM_MAX - 2", fn, arrayLength);
        return CUDNN_STATUS_NOT_SUPPORTED;
    }
    if (arrayLength > 0 && (!padA || !filterStrideA || !dilationA)) return bad(fn, "an array is NULL");
    if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION) return bad(fn, "mode is not a cudnnConvolutionMode_t");
    if (!dtype_valid(computeType)) return bad(fn, "computeType is not a cudnnDataType_t");
    for (int i = 0; i < arrayLength; i++)
        if (padA[i] < 0 || filterStrideA[i] < 1 || dilationA[i] < 1)
            return bad(fn, "pads must be >= 0, strides and dilations >= 1");
    cudnnConvolutionStruct *c = convDesc;
    c->n = arrayLength, c->mode = mode, c->compute = computeType;
    for (int i = 0; i < arrayLength; i++) c->pad[i] = padA[i], c->stride[i] = filterStrideA[i], c->dil[i] = dilationA[i];
    c->set = true;
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t convDesc, int groupCount) {
    const char *fn = "cudnnSetConvolutionGroupCount";
    if (!obj_live(convDesc, OBJ_CONV)) return bad(fn, "not a live convolution descriptor");
    if (groupCount < 1) return bad(fn, "groupCount < 1");
    convDesc->groups = groupCount;
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc, cudnnMathType_t mathType) {
    const char *fn = "cudnnSetConvolutionMathType";
    if (!obj_live(convDesc, OBJ_CONV)) return bad(fn, "not a live convolution descriptor");
    if ((int)mathType < CUDNN_DEFAULT_MATH || (int)mathType > CUDNN_FMA_MATH) return bad(fn, "not a cudnnMathType_t");
    convDesc->math = mathType;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- descriptor lookups for the computations ---- */

static const cudnnTensorStruct *tensor_get(const char *fn, const char *name, cudnnTensorDescriptor_t d) {
    if (obj_live(d, OBJ_TENSOR) && d->set) return d;
    emu::note("%s: %s (%p) is not a live tensor descriptor set by cudnnSetTensorNdDescriptor", fn, name, (void *)d);
    return NULL;
}

static const cudnnFilterStruct *filter_get(const char *fn, const char *name, cudnnFilterDescriptor_t d) {
    if (obj_live(d, OBJ_FILTER) && d->set) return d;
    emu::note("%s: %s (%p) is not a live filter descriptor set by cudnnSetFilterNdDescriptor", fn, name, (void *)d);
    return NULL;
}

static const cudnnConvolutionStruct *conv_get(const char *fn, cudnnConvolutionDescriptor_t d) {
    if (obj_live(d, OBJ_CONV) && d->set) return d;
    emu::note("%s: convDesc (%p) is not a live convolution descriptor set by cudnnSetConvolutionNdDescriptor", fn,
              (void *)d);
    return NULL;
}

/* Elements from a tensor's first to its last (strides >= 0). */
static int64_t tensor_span(const cudnnTensorStruct *t) {
    int64_t last = 0;
    for (int i = 0; i < t->nd; i++) last += (int64_t)(t->dims[i] - 1) * t->strides[i];
    return last + 1;
}

static bool strides_negative(const cudnnTensorStruct *t) {
    for (int i = 0; i < t->nd; i++)
        if (t->strides[i] < 0) return true;
    return false;
}

/* Whether two elements of an output tensor may share memory: with the dims (of extent > 1)
 * ordered by stride, each stride must clear the span of the smaller ones. (Exotic layouts that
 * interleave without overlapping are refused too.) */
static bool tensor_self_overlaps(const cudnnTensorStruct *t) {
    int64_t st[CUDNN_DIM_MAX], ex[CUDNN_DIM_MAX];
    int n = 0;
    for (int i = 0; i < t->nd; i++)
        if (t->dims[i] > 1) st[n] = t->strides[i], ex[n] = t->dims[i], n++;
    for (int i = 1; i < n; i++) /* insertion sort by stride */
        for (int j = i; j > 0 && st[j] < st[j - 1]; j--) {
            int64_t a = st[j], b = ex[j];
            st[j] = st[j - 1], ex[j] = ex[j - 1], st[j - 1] = a, ex[j - 1] = b;
        }
    int64_t span = 1;
    for (int i = 0; i < n; i++) {
        if (st[i] < span) return true;
        span += st[i] * (ex[i] - 1);
    }
    return false;
}

/* ---- convolution geometry ---- */

/* A convolution normalised to 3 spatial dims (2-D ones get a leading unit dim). */
struct conv_geom {
    bool f64, tf32, flip;
    cudnnDataType_t dt;      /* the data's type: FLOAT, DOUBLE, or HALF / BFLOAT16 computed in FLOAT */
    int64_t es;              /* its element size */
    int nd;                  /* 4 or 5 */
    int64_t N, C, K, G;      /* images, input channels, filters (output channels), groups */
    int64_t in[3], out[3], k[3], pad[3], str[3], dil[3];
    int64_t xs[5], ys[5];    /* element strides of x and y: N, C, then the 3 spatial dims */
    int64_t x_span, y_span, w_numel;
    cudnnMathType_t math;
};

/* The documented checks of x / w / conv / y against each other. `exec`: a computation, which
 * reports a wrong output size as NOT_SUPPORTED (the _v7 heuristics: BAD_PARAM). */
static cudnnStatus_t conv_problem(const char *fn, cudnnTensorDescriptor_t xd, cudnnFilterDescriptor_t wd,
                                  cudnnConvolutionDescriptor_t cd, cudnnTensorDescriptor_t yd, bool exec,
                                  conv_geom *g) {
    const cudnnTensorStruct *x = tensor_get(fn, "the input (x / dx) descriptor", xd);
    const cudnnTensorStruct *y = tensor_get(fn, "the output (y / dy) descriptor", yd);
    const cudnnFilterStruct *w = filter_get(fn, "the filter descriptor", wd);
    const cudnnConvolutionStruct *c = conv_get(fn, cd);
    if (!x || !y || !w || !c) return CUDNN_STATUS_BAD_PARAM;
    if (x->nd != y->nd || x->nd != w->nd || x->nd != c->n + 2 || x->nd < 3) {
        emu::note("%s: ranks differ or are < 3: x %d, y %d, w %d, conv %d spatial", fn, x->nd, y->nd, w->nd, c->n);
        return CUDNN_STATUS_BAD_PARAM;
    }
    if (x->dt != y->dt || x->dt != w->dt) {
        emu::note("%s: data types differ: x %s, y %s, w %s", fn, dtype_name(x->dt), dtype_name(y->dt), dtype_name(w->dt));
        return CUDNN_STATUS_BAD_PARAM;
    }
    int64_t G = c->groups, C = x->dims[1], K = w->dims[0];
    if (w->dims[1] * G != C || K % G != 0 || y->dims[1] != K || y->dims[0] != x->dims[0]) {
        emu::note("%s: x [%d, %lld, ...], w [%lld, %d, ...], y [%d, %d, ...] with %lld groups: need w[1] * groups == "
                  "x[1], groups | w[0], y[1] == w[0], y[0] == x[0]",
                  fn, x->dims[0], (long long)C, (long long)K, w->dims[1], y->dims[0], y->dims[1], (long long)G);
        return CUDNN_STATUS_BAD_PARAM;
    }
    if (x->nd != 4 && x->nd != 5) {
        emu::note("%s: %d-D tensors; convolutions take 4-D and 5-D", fn, x->nd);
        return CUDNN_STATUS_NOT_SUPPORTED;
    }
    bool half = x->dt == CUDNN_DATA_HALF || x->dt == CUDNN_DATA_BFLOAT16;
    if ((x->dt != CUDNN_DATA_FLOAT && x->dt != CUDNN_DATA_DOUBLE && !half) ||
        c->compute != (half ? CUDNN_DATA_FLOAT : x->dt)) {
        emu::note("%s: data %s with compute type %s: the emulator runs FLOAT_CONFIG, DOUBLE_CONFIG, "
                  "PSEUDO_HALF_CONFIG and PSEUDO_BFLOAT16_CONFIG (16-bit data, FLOAT compute)",
                  fn, dtype_name(x->dt), dtype_name(c->compute));
        return CUDNN_STATUS_NOT_SUPPORTED;
    }
    if (w->format != CUDNN_TENSOR_NCHW) {
        emu::note("%s: the emulator takes CUDNN_TENSOR_NCHW (KCRS) filters only", fn);
        return CUDNN_STATUS_NOT_SUPPORTED;
    }
    if (strides_negative(x) || strides_negative(y)) {
        emu::note("%s: negative tensor strides are not supported", fn);
        return CUDNN_STATUS_NOT_SUPPORTED;
    }
    int ns = x->nd - 2, lead = 3 - ns; /* spatial dims, and the unit dims put before them */
    for (int i = 0; i < 3; i++) g->in[i] = g->out[i] = g->k[i] = g->str[i] = g->dil[i] = 1, g->pad[i] = 0;
    for (int i = 0; i < 5; i++) g->xs[i] = g->ys[i] = 0;
    for (int i = 0; i < ns; i++) {
        int64_t in = x->dims[2 + i], k = w->dims[2 + i], p = c->pad[i], s = c->stride[i], d = c->dil[i];
        int64_t ext = d * (k - 1) + 1;
        if (in + 2 * p < ext) {
            emu::note("%s: spatial dim %d: the filter's extent %lld exceeds the padded input %lld", fn, i,
                      (long long)ext, (long long)(in + 2 * p));
            return CUDNN_STATUS_BAD_PARAM;
        }
        int64_t out = (in + 2 * p - ext) / s + 1;
        if (y->dims[2 + i] != out) {
            emu::note("%s: spatial dim %d: y has %d, (in %lld + 2 pad %lld - dil %lld (k %lld - 1) - 1) / stride %lld "
                      "+ 1 = %lld",
                      fn, i, y->dims[2 + i], (long long)in, (long long)p, (long long)d, (long long)k, (long long)s,
                      (long long)out);
            return exec ? CUDNN_STATUS_NOT_SUPPORTED : CUDNN_STATUS_BAD_PARAM;
        }
        int j = lead + i;
        g->in[j] = in, g->out[j] = out, g->k[j] = k, g->pad[j] = p, g->str[j] = s, g->dil[j] = d;
        g->xs[2 + j] = x->strides[2 + i], g->ys[2 + j] = y->strides[2 + i];
    }
    g->xs[0] = x->strides[0], g->xs[1] = x->strides[1], g->ys[0] = y->strides[0], g->ys[1] = y->strides[1];
    g->f64 = x->dt == CUDNN_DATA_DOUBLE;
    g->dt = x->dt;
    g->es = half ? 2 : g->f64 ? 8 : 4;
    /* DEFAULT and TENSOR_OP* let cuDNN use TF32 on float data (16-bit values are exact in TF32) */
    g->tf32 = x->dt == CUDNN_DATA_FLOAT && c->math != CUDNN_FMA_MATH;
    g->flip = c->mode == CUDNN_CONVOLUTION;
    g->math = c->math;
    g->nd = x->nd;
    g->N = x->dims[0], g->C = C, g->K = K, g->G = G;
    g->x_span = tensor_span(x), g->y_span = tensor_span(y);
    g->w_numel = 1;
    for (int i = 0; i < w->nd; i++) g->w_numel *= w->dims[i];
    return CUDNN_STATUS_SUCCESS;
}

/* ---- algorithms ---- */

enum conv_dir { DIR_FWD, DIR_BWD_DATA, DIR_BWD_FILTER };

struct algo_info {
    int algo;
    bool supported;
    int64_t ws; /* bytes */
    cudnnDeterminism_t det;
};

static bool dilated(const conv_geom &g) { return g.dil[0] > 1 || g.dil[1] > 1 || g.dil[2] > 1; }

/* One image's im2col matrix: (C * prod k) x prod out elements. */
static int64_t im2col_bytes(const conv_geom &g) {
    return g.C * g.k[0] * g.k[1] * g.k[2] * g.out[0] * g.out[1] * g.out[2] * g.es;
}

/* The heuristic's list for a direction, best first (see the file comment); returns its length. */
static int algo_list(conv_dir dir, const conv_geom &g, algo_info *a) {
    int64_t col = im2col_bytes(g), es = g.es;
    int64_t filt = g.K * (g.C / g.G) * g.k[0] * g.k[1] * g.k[2];
    const cudnnDeterminism_t D = CUDNN_DETERMINISTIC, ND = CUDNN_NON_DETERMINISTIC;
    switch (dir) {
    case DIR_FWD:
        a[0] = {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, !dilated(g), col, D};
        a[1] = {CUDNN_CONVOLUTION_FWD_ALGO_FFT, false, 0, D};
        a[2] = {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, !dilated(g), (filt / g.K) * 4 + 256, D};
        a[3] = {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, true, 0, D};
        return 4;
    case DIR_BWD_DATA: /* the atomics-based algorithms first, as cuDNN often ranks them */
        a[0] = {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, true, 0, ND};
        a[1] = {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, true, col, D};
        a[2] = {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING, false, 0, D};
        return 3;
    case DIR_BWD_FILTER:
        a[0] = {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, true, filt * es, ND};
        a[1] = {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, true, col, D};
        a[2] = {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, false, 0, D};
        a[3] = {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, true, 0, ND};
        return 4;
    }
    return 0;
}

static int algo_count(conv_dir dir) {
    switch (dir) {
    case DIR_FWD: return CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
    case DIR_BWD_DATA: return CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
    case DIR_BWD_FILTER: return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
    }
    return 0;
}

/* Fills any of the three perf structs (same layout, different enum types) from the list. */
template <typename Perf, typename Algo>
static void fill_perf(const algo_info *a, int n, cudnnMathType_t math, Perf *out) {
    for (int i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].algo = (Algo)a[i].algo;
        out[i].status = a[i].supported ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_SUPPORTED;
        out[i].time = a[i].supported ? 0.05f * (float)(i + 1) : -1.0f; /* an estimate, in ms */
        out[i].memory = a[i].supported ? (size_t)a[i].ws : 0;
        out[i].determinism = a[i].det;
        out[i].mathType = math;
    }
}

template <typename Perf, typename Algo>
static cudnnStatus_t get_algos(const char *fn, conv_dir dir, cudnnHandle_t handle, cudnnTensorDescriptor_t x,
                               cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t y,
                               int requested, int *returned, Perf *perf) {
    if (!handle_ok(fn, handle)) return CUDNN_STATUS_BAD_PARAM;
    if (!returned || !perf) return bad(fn, "returnedAlgoCount or perfResults is NULL");
    if (requested <= 0) return bad(fn, "requestedAlgoCount <= 0");
    conv_geom g;
    cudnnStatus_t st = conv_problem(fn, x, w, c, y, false, &g);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    algo_info a[8];
    int n = algo_list(dir, g, a);
    if (n > requested) n = requested;
    fill_perf<Perf, Algo>(a, n, g.math, perf);
    *returned = n;
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc, const cudnnFilterDescriptor_t filterDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t destDesc, const int requestedAlgoCount,
    int *returnedAlgoCount, cudnnConvolutionFwdAlgoPerf_t *perfResults) {
    return get_algos<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
        "cudnnGetConvolutionForwardAlgorithm_v7", DIR_FWD, handle, srcDesc, filterDesc, convDesc, destDesc,
        requestedAlgoCount, returnedAlgoCount, perfResults);
}

extern "C" cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t filterDesc, const cudnnTensorDescriptor_t diffDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t gradDesc, const int requestedAlgoCount,
    int *returnedAlgoCount, cudnnConvolutionBwdDataAlgoPerf_t *perfResults) {
    return get_algos<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
        "cudnnGetConvolutionBackwardDataAlgorithm_v7", DIR_BWD_DATA, handle, gradDesc, filterDesc, convDesc, diffDesc,
        requestedAlgoCount, returnedAlgoCount, perfResults);
}

extern "C" cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc, const cudnnTensorDescriptor_t diffDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t gradDesc, const int requestedAlgoCount,
    int *returnedAlgoCount, cudnnConvolutionBwdFilterAlgoPerf_t *perfResults) {
    return get_algos<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
        "cudnnGetConvolutionBackwardFilterAlgorithm_v7", DIR_BWD_FILTER, handle, srcDesc, gradDesc, convDesc, diffDesc,
        requestedAlgoCount, returnedAlgoCount, perfResults);
}

/* The workspace an algorithm needs; BAD_PARAM for an unknown enumerator, NOT_SUPPORTED for one the
 * heuristic did not offer for this problem. */
static cudnnStatus_t algo_workspace(const char *fn, conv_dir dir, int algo, const conv_geom &g, int64_t *ws) {
    if (algo < 0 || algo >= algo_count(dir)) return bad(fn, "algo is not an enumerator of its type");
    algo_info a[8];
    int n = algo_list(dir, g, a);
    for (int i = 0; i < n; i++)
        if (a[i].algo == algo && a[i].supported) {
            *ws = a[i].ws;
            return CUDNN_STATUS_SUCCESS;
        }
    emu::note("%s: algo %d is not supported for this problem (the _v7 heuristic reports which are)", fn, algo);
    return CUDNN_STATUS_NOT_SUPPORTED;
}

/* ---- argument checks shared by the computations ---- */

/* Reads a host scalar of the data's precision. */
static bool read_scalar(const char *fn, const char *name, const void *p, bool f64, double *v) {
    return emu::read_host_scalar(fn, name, p, f64, "cuDNN reads scaling factors from host memory", v);
}

/* A byte range some computation reads or writes. */
struct mem_range {
    const char *name;
    const void *p;
    int64_t bytes;
};

static bool on_device(const char *fn, const mem_range &r) {
    if (r.p && emu::is_device(r.p, (size_t)r.bytes)) return true;
    emu::note("%s: %s = %p is not device memory over the %lld bytes its descriptor spans", fn, r.name, r.p,
              (long long)r.bytes);
    return false;
}

static bool ranges_overlap(const mem_range &a, const mem_range &b) {
    uintptr_t a0 = (uintptr_t)a.p, b0 = (uintptr_t)b.p;
    return a.bytes > 0 && b.bytes > 0 && a0 < b0 + (uintptr_t)b.bytes && b0 < a0 + (uintptr_t)a.bytes;
}

/* Every range on the device, and the written one (r[0]) apart from all others. */
static bool ranges_ok(const char *fn, const mem_range *r, int n) {
    for (int i = 0; i < n; i++)
        if (!on_device(fn, r[i])) return false;
    for (int i = 1; i < n; i++)
        if (ranges_overlap(r[0], r[i])) {
            emu::note("%s: the output %s overlaps %s; cuDNN does not compute in place", fn, r[0].name, r[i].name);
            return false;
        }
    return true;
}

/* The workspace must be at least what the algorithm reported (its memory is checked with the rest). */
static bool workspace_ok(const char *fn, int64_t need, size_t size) {
    if (size < (size_t)need) { /* need >= 0 */
        emu::note("%s: workSpaceSizeInBytes %zu is less than the %lld bytes the algorithm needs", fn, size,
                  (long long)need);
        return false;
    }
    return true;
}

/* ---- the computations ---- */


static inline double in_v(float v, bool tf32) { return tf32 ? emu::tf32_round(v) : v; }
static inline double in_v(double v, bool) { return v; }
static inline double in_v(bf16_t v, bool) { return load_t(v); }
static inline double in_v(f16_t v, bool) { return load_t(v); }

/* r rounded to the storage type, one ulp of the compute type toward r first when `nudge`: float
 * and double round r directly; 16-bit storage (FLOAT compute) rounds r to float, nudges that, then
 * rounds to 16 bits, so a summation order that moves the f32 result by an ulp changes the 16-bit
 * result only where the f32 value sits at a 16-bit rounding boundary, as on the hardware. */
template <typename F> static inline F nudged(F v, double r, bool nudge) {
    if (!nudge || !std::isfinite(v)) return v;
    return std::nextafter(v, r >= (double)v ? std::numeric_limits<F>::infinity() : -std::numeric_limits<F>::infinity());
}
static inline float round_to(float *, double r, bool nudge) { return nudged((float)r, r, nudge); }
static inline double round_to(double *, double r, bool nudge) { return nudged(r, r, nudge); }
template <typename H> static inline H round_to(H *, double r, bool nudge) {
    H v;
    store_t(&v, nudged((float)r, r, nudge));
    return v;
}

/* out = alpha acc + beta out, rounded once; beta == 0 does not read out.
 * Real algorithms sum in different orders, so their results differ in the last bits, and the
 * atomics-based ones differ from call to call. Modelled by rounding the other way (one ulp of the
 * compute type) for the elements a hash of (salt, element index) picks: each deterministic
 * algorithm has its own fixed salt, a non-deterministic one a new salt per call, cudnnAddTensor
 * none (salt 0). So a caller whose algorithm choice varies between plans, or that runs a
 * non-deterministic one, sees its plans disagree here as they would on a GPU. */
template <typename T>
static inline void blend(T *out, double acc, double alpha, double beta, uint64_t salt = 0, int64_t e = 0) {
    double r = alpha * acc;
    if (beta != 0) r += beta * (double)load_t(*out);
    uint64_t h = (salt ^ (uint64_t)e) * 0x9E3779B97F4A7C15ull;
    *out = round_to(out, r, salt && ((h ^ (h >> 29)) >> 63));
}

/* Everything a convolution needs, by value: the closure runs after the call returns. */
struct conv_job {
    conv_geom g;
    const void *x, *w, *y; /* the three operands; the direction decides which one is written */
    void *ws;
    int64_t ws_bytes;
    double alpha, beta;
    uint64_t salt; /* rounding of the algorithm that runs it (blend) */
};

static inline int64_t filt_tap(const conv_geom &g, int64_t r, int d) { return g.flip ? g.k[d] - 1 - r : r; }

/* Packed KCRS offset of filter (k, c) at spatial taps r0..r2 (flipped for CUDNN_CONVOLUTION). */
static inline int64_t w_off(const conv_geom &g, int64_t kk, int64_t c, int64_t r0, int64_t r1, int64_t r2) {
    int64_t cg = g.C / g.G;
    return (((kk * cg + c) * g.k[0] + filt_tap(g, r0, 0)) * g.k[1] + filt_tap(g, r1, 1)) * g.k[2] + filt_tap(g, r2, 2);
}

/* The output index along dim d that tap r of input position i comes from, or -1. */
static inline int64_t out_of(const conv_geom &g, int d, int64_t i, int64_t r) {
    int64_t t = i + g.pad[d] - r * g.dil[d];
    if (t < 0 || t % g.str[d]) return -1;
    t /= g.str[d];
    return t < g.out[d] ? t : -1;
}

/* y[n, kk, o] = alpha sum_{c, r} x[n, group c, o s - p + r d] w[kk, c, r] + beta y. */
template <typename T>
static void conv_fwd_run(const conv_job &j) {
    const conv_geom &g = j.g;
    const T *x = (const T *)j.x, *w = (const T *)j.w;
    T *y = (T *)j.y;
    int64_t cg = g.C / g.G, kg = g.K / g.G, e = 0;
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t kk = 0; kk < g.K; kk++)
            for (int64_t o0 = 0; o0 < g.out[0]; o0++)
                for (int64_t o1 = 0; o1 < g.out[1]; o1++)
                    for (int64_t o2 = 0; o2 < g.out[2]; o2++) {
                        double acc = 0;
                        for (int64_t c = 0; c < cg; c++) {
                            const T *xc = x + n * g.xs[0] + ((kk / kg) * cg + c) * g.xs[1];
                            for (int64_t r0 = 0; r0 < g.k[0]; r0++) {
                                int64_t i0 = o0 * g.str[0] - g.pad[0] + r0 * g.dil[0];
                                if (i0 < 0 || i0 >= g.in[0]) continue;
                                for (int64_t r1 = 0; r1 < g.k[1]; r1++) {
                                    int64_t i1 = o1 * g.str[1] - g.pad[1] + r1 * g.dil[1];
                                    if (i1 < 0 || i1 >= g.in[1]) continue;
                                    for (int64_t r2 = 0; r2 < g.k[2]; r2++) {
                                        int64_t i2 = o2 * g.str[2] - g.pad[2] + r2 * g.dil[2];
                                        if (i2 < 0 || i2 >= g.in[2]) continue;
                                        acc += in_v(xc[i0 * g.xs[2] + i1 * g.xs[3] + i2 * g.xs[4]], g.tf32) *
                                               in_v(w[w_off(g, kk, c, r0, r1, r2)], g.tf32);
                                    }
                                }
                            }
                        }
                        blend(y + n * g.ys[0] + kk * g.ys[1] + o0 * g.ys[2] + o1 * g.ys[3] + o2 * g.ys[4], acc,
                              j.alpha, j.beta, j.salt, e++);
                    }
}

/* dx[n, c, i] = alpha sum_{kk in c's group, r, o: o s - p + r d = i} dy[n, kk, o] w[kk, c, r] + beta dx:
 * the adjoint of the forward map. Here x is dx (written) and y is dy. */
template <typename T>
static void conv_bwd_data_run(const conv_job &j) {
    const conv_geom &g = j.g;
    T *dx = (T *)j.x;
    const T *w = (const T *)j.w, *dy = (const T *)j.y;
    int64_t cg = g.C / g.G, kg = g.K / g.G, e = 0;
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t cf = 0; cf < g.C; cf++)
            for (int64_t i0 = 0; i0 < g.in[0]; i0++)
                for (int64_t i1 = 0; i1 < g.in[1]; i1++)
                    for (int64_t i2 = 0; i2 < g.in[2]; i2++) {
                        double acc = 0;
                        int64_t grp = cf / cg, c = cf % cg;
                        for (int64_t kk = grp * kg; kk < (grp + 1) * kg; kk++) {
                            const T *dyk = dy + n * g.ys[0] + kk * g.ys[1];
                            for (int64_t r0 = 0; r0 < g.k[0]; r0++) {
                                int64_t o0 = out_of(g, 0, i0, r0);
                                if (o0 < 0) continue;
                                for (int64_t r1 = 0; r1 < g.k[1]; r1++) {
                                    int64_t o1 = out_of(g, 1, i1, r1);
                                    if (o1 < 0) continue;
                                    for (int64_t r2 = 0; r2 < g.k[2]; r2++) {
                                        int64_t o2 = out_of(g, 2, i2, r2);
                                        if (o2 < 0) continue;
                                        acc += in_v(dyk[o0 * g.ys[2] + o1 * g.ys[3] + o2 * g.ys[4]], g.tf32) *
                                               in_v(w[w_off(g, kk, c, r0, r1, r2)], g.tf32);
                                    }
                                }
                            }
                        }
                        blend(dx + n * g.xs[0] + cf * g.xs[1] + i0 * g.xs[2] + i1 * g.xs[3] + i2 * g.xs[4], acc,
                              j.alpha, j.beta, j.salt, e++);
                    }
}

/* dw[kk, c, q] = alpha sum_{n, o} x[n, group c, o s - p + r d] dy[n, kk, o] + beta dw, where r is the
 * tap that filter position q serves (q itself, or its mirror for CUDNN_CONVOLUTION). Here w is dw. */
template <typename T>
static void conv_bwd_filter_run(const conv_job &j) {
    const conv_geom &g = j.g;
    const T *x = (const T *)j.x, *dy = (const T *)j.y;
    T *dw = (T *)j.w;
    int64_t cg = g.C / g.G, kg = g.K / g.G, e = 0;
    for (int64_t kk = 0; kk < g.K; kk++)
        for (int64_t c = 0; c < cg; c++)
            for (int64_t r0 = 0; r0 < g.k[0]; r0++)
                for (int64_t r1 = 0; r1 < g.k[1]; r1++)
                    for (int64_t r2 = 0; r2 < g.k[2]; r2++) {
                        double acc = 0;
                        for (int64_t n = 0; n < g.N; n++) {
                            const T *xc = x + n * g.xs[0] + ((kk / kg) * cg + c) * g.xs[1];
                            const T *dyk = dy + n * g.ys[0] + kk * g.ys[1];
                            for (int64_t o0 = 0; o0 < g.out[0]; o0++) {
                                int64_t i0 = o0 * g.str[0] - g.pad[0] + r0 * g.dil[0];
                                if (i0 < 0 || i0 >= g.in[0]) continue;
                                for (int64_t o1 = 0; o1 < g.out[1]; o1++) {
                                    int64_t i1 = o1 * g.str[1] - g.pad[1] + r1 * g.dil[1];
                                    if (i1 < 0 || i1 >= g.in[1]) continue;
                                    for (int64_t o2 = 0; o2 < g.out[2]; o2++) {
                                        int64_t i2 = o2 * g.str[2] - g.pad[2] + r2 * g.dil[2];
                                        if (i2 < 0 || i2 >= g.in[2]) continue;
                                        acc += in_v(xc[i0 * g.xs[2] + i1 * g.xs[3] + i2 * g.xs[4]], g.tf32) *
                                               in_v(dyk[o0 * g.ys[2] + o1 * g.ys[3] + o2 * g.ys[4]], g.tf32);
                                    }
                                }
                            }
                        }
                        blend(dw + w_off(g, kk, c, r0, r1, r2), acc, j.alpha, j.beta, j.salt, e++);
                    }
}

/* blend's salt for an algorithm: fixed per (direction, algorithm) when deterministic, new on every
 * call otherwise. */
static uint64_t algo_salt(conv_dir dir, int algo, const conv_geom &g) {
    static uint64_t calls;
    algo_info a[8];
    int n = algo_list(dir, g, a);
    for (int i = 0; i < n; i++)
        if (a[i].algo == algo && a[i].det == CUDNN_NON_DETERMINISTIC) return 0x8000000000000000ull | ++calls;
    return 1 + (uint64_t)dir * 64 + (uint64_t)algo;
}

/* Common front half of the three computations: handle, geometry, scalars, algorithm, workspace
 * and memory. `ranges` gets the written operand first; returns the job ready to queue. */
static cudnnStatus_t conv_prepare(const char *fn, conv_dir dir, cudnnHandle_t handle, const void *alpha,
                                  const void *beta, cudnnTensorDescriptor_t xd, cudnnFilterDescriptor_t wd,
                                  cudnnConvolutionDescriptor_t cd, cudnnTensorDescriptor_t yd, int algo,
                                  void *workSpace, size_t workSpaceSizeInBytes, const void *x, const void *w,
                                  const void *y, conv_job *j) {
    if (!handle_ok(fn, handle)) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = conv_problem(fn, xd, wd, cd, yd, true, &j->g);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    const conv_geom &g = j->g;
    const cudnnTensorStruct *out_t = dir == DIR_FWD ? yd : dir == DIR_BWD_DATA ? xd : NULL;
    if (out_t && tensor_self_overlaps(out_t)) return bad(fn, "the output tensor's strides make elements overlap");
    if (!read_scalar(fn, "alpha", alpha, g.f64, &j->alpha) || !read_scalar(fn, "beta", beta, g.f64, &j->beta))
        return CUDNN_STATUS_BAD_PARAM;
    int64_t need = 0;
    st = algo_workspace(fn, dir, algo, g, &need);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!workspace_ok(fn, need, workSpaceSizeInBytes)) return CUDNN_STATUS_BAD_PARAM;
    int64_t es = g.es;
    mem_range xr = {dir == DIR_BWD_DATA ? "dx" : "x", x, g.x_span * es};
    mem_range wr = {dir == DIR_BWD_FILTER ? "dw" : "w", w, g.w_numel * es};
    mem_range yr = {dir == DIR_FWD ? "y" : "dy", y, g.y_span * es};
    mem_range wsr = {"workSpace", workSpace, need};
    mem_range r[4] = {dir == DIR_FWD ? yr : dir == DIR_BWD_DATA ? xr : wr, dir == DIR_FWD ? xr : yr,
                      dir == DIR_BWD_FILTER ? xr : wr, wsr};
    if (!ranges_ok(fn, r, need > 0 ? 4 : 3)) return CUDNN_STATUS_BAD_PARAM;
    if (need > 0 && (ranges_overlap(wsr, r[1]) || ranges_overlap(wsr, r[2])))
        return bad(fn, "the workspace overlaps an input");
    j->x = x, j->w = w, j->y = y, j->ws = workSpace, j->ws_bytes = need;
    j->salt = algo_salt(dir, algo, g);
    return CUDNN_STATUS_SUCCESS;
}

template <typename T> static void conv_run(conv_dir dir, const conv_job &j) {
    if (dir == DIR_FWD) conv_fwd_run<T>(j);
    else if (dir == DIR_BWD_DATA) conv_bwd_data_run<T>(j);
    else conv_bwd_filter_run<T>(j);
}

/* Queues direction `dir` of job j: scribbles over the workspace, as a real algorithm would, then
 * computes with the data's storage type (accumulating in double, rounding once). */
static void conv_enqueue(cudnnHandle_t handle, const char *fn, conv_dir dir, const conv_job &j) {
    emu::enqueue(handle->stream, fn, [j, dir]() {
        if (j.ws_bytes > 0) memset(j.ws, 0xff, (size_t)j.ws_bytes);
        switch (j.g.dt) {
        case CUDNN_DATA_DOUBLE: conv_run<double>(dir, j); break;
        case CUDNN_DATA_BFLOAT16: conv_run<bf16_t>(dir, j); break;
        case CUDNN_DATA_HALF: conv_run<f16_t>(dir, j); break;
        default: conv_run<float>(dir, j); break;
        }
    });
}

extern "C" cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha,
                                                 const cudnnTensorDescriptor_t xDesc, const void *x,
                                                 const cudnnFilterDescriptor_t wDesc, const void *w,
                                                 const cudnnConvolutionDescriptor_t convDesc,
                                                 cudnnConvolutionFwdAlgo_t algo, void *workSpace,
                                                 size_t workSpaceSizeInBytes, const void *beta,
                                                 const cudnnTensorDescriptor_t yDesc, void *y) {
    const char *fn = "cudnnConvolutionForward";
    conv_job j;
    cudnnStatus_t st = conv_prepare(fn, DIR_FWD, handle, alpha, beta, xDesc, wDesc, convDesc, yDesc, (int)algo,
                                    workSpace, workSpaceSizeInBytes, x, w, y, &j);
    if (st == CUDNN_STATUS_SUCCESS) conv_enqueue(handle, fn, DIR_FWD, j);
    return st;
}

extern "C" cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha,
                                                      const cudnnFilterDescriptor_t wDesc, const void *w,
                                                      const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                                      const cudnnConvolutionDescriptor_t convDesc,
                                                      cudnnConvolutionBwdDataAlgo_t algo, void *workSpace,
                                                      size_t workSpaceSizeInBytes, const void *beta,
                                                      const cudnnTensorDescriptor_t dxDesc, void *dx) {
    const char *fn = "cudnnConvolutionBackwardData";
    conv_job j;
    cudnnStatus_t st = conv_prepare(fn, DIR_BWD_DATA, handle, alpha, beta, dxDesc, wDesc, convDesc, dyDesc, (int)algo,
                                    workSpace, workSpaceSizeInBytes, dx, w, dy, &j);
    if (st == CUDNN_STATUS_SUCCESS) conv_enqueue(handle, fn, DIR_BWD_DATA, j);
    return st;
}

extern "C" cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void *alpha,
                                                        const cudnnTensorDescriptor_t xDesc, const void *x,
                                                        const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                                        const cudnnConvolutionDescriptor_t convDesc,
                                                        cudnnConvolutionBwdFilterAlgo_t algo, void *workSpace,
                                                        size_t workSpaceSizeInBytes, const void *beta,
                                                        const cudnnFilterDescriptor_t dwDesc, void *dw) {
    const char *fn = "cudnnConvolutionBackwardFilter";
    conv_job j;
    cudnnStatus_t st = conv_prepare(fn, DIR_BWD_FILTER, handle, alpha, beta, xDesc, dwDesc, convDesc, dyDesc,
                                    (int)algo, workSpace, workSpaceSizeInBytes, x, dw, dy, &j);
    if (st == CUDNN_STATUS_SUCCESS) conv_enqueue(handle, fn, DIR_BWD_FILTER, j);
    return st;
}

/* ---- cudnnAddTensor ---- */

struct add_job {
    bool f64;
    int nd;
    int64_t dims[CUDNN_DIM_MAX], cs[CUDNN_DIM_MAX], as[CUDNN_DIM_MAX]; /* as = 0 where A broadcasts */
    const void *A;
    void *C;
    double alpha, beta;
};

/* C[i] = alpha A[i with broadcast dims at 0] + beta C[i], over C's dims with an odometer. */
template <typename T>
static void add_run(const add_job &j) {
    int64_t idx[CUDNN_DIM_MAX] = {0}, total = 1;
    for (int d = 0; d < j.nd; d++) total *= j.dims[d];
    for (int64_t e = 0; e < total; e++) {
        int64_t co = 0, ao = 0;
        for (int d = 0; d < j.nd; d++) co += idx[d] * j.cs[d], ao += idx[d] * j.as[d];
        blend((T *)j.C + co, (double)((const T *)j.A)[ao], j.alpha, j.beta);
        for (int d = j.nd - 1; d >= 0 && ++idx[d] == j.dims[d]; d--) idx[d] = 0;
    }
}

extern "C" cudnnStatus_t cudnnAddTensor(cudnnHandle_t handle, const void *alpha, const cudnnTensorDescriptor_t aDesc,
                                        const void *A, const void *beta, const cudnnTensorDescriptor_t cDesc, void *C) {
    const char *fn = "cudnnAddTensor";
    if (!handle_ok(fn, handle)) return CUDNN_STATUS_BAD_PARAM;
    const cudnnTensorStruct *a = tensor_get(fn, "aDesc", aDesc), *c = tensor_get(fn, "cDesc", cDesc);
    if (!a || !c) return CUDNN_STATUS_BAD_PARAM;
    if (a->dt != c->dt) return bad(fn, "A and C data types differ");
    if (a->nd != c->nd) return bad(fn, "A and C ranks differ");
    for (int d = 0; d < a->nd; d++)
        if (a->dims[d] != c->dims[d] && a->dims[d] != 1) return bad(fn, "a dim of A is neither C's nor 1");
    if (c->nd > 5 || (c->dt != CUDNN_DATA_FLOAT && c->dt != CUDNN_DATA_DOUBLE) || strides_negative(a) ||
        strides_negative(c)) {
        emu::note("%s: emulated for up to 5 dims, FLOAT or DOUBLE, non-negative strides", fn);
        return CUDNN_STATUS_NOT_SUPPORTED;
    }
    if (tensor_self_overlaps(c)) return bad(fn, "C's strides make elements overlap");
    add_job j;
    j.f64 = c->dt == CUDNN_DATA_DOUBLE;
    if (!read_scalar(fn, "alpha", alpha, j.f64, &j.alpha) || !read_scalar(fn, "beta", beta, j.f64, &j.beta))
        return CUDNN_STATUS_BAD_PARAM;
    int64_t es = j.f64 ? 8 : 4;
    mem_range r[2] = {{"C", C, tensor_span(c) * es}, {"A", A, tensor_span(a) * es}};
    for (int i = 0; i < 2; i++)
        if (!on_device(fn, r[i])) return CUDNN_STATUS_BAD_PARAM;
    j.nd = c->nd, j.A = A, j.C = C;
    for (int d = 0; d < c->nd; d++)
        j.dims[d] = c->dims[d], j.cs[d] = c->strides[d], j.as[d] = a->dims[d] == 1 ? 0 : a->strides[d];
    emu::enqueue(handle->stream, fn, [j]() { j.f64 ? add_run<double>(j) : add_run<float>(j); });
    return CUDNN_STATUS_SUCCESS;
}
