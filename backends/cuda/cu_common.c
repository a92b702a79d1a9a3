/* Errors and helpers the CUDA kernels share (cuda_common.h): kernel errors naming the node, the
 * per-backend workspace, and small reads of inputs back to the host. Apart from the backend and its
 * kernel table, so that kernel files depend on these and not on the backend that calls them. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backends/cuda/cuda_common.h"

sc_status cu_errorf(const cu_call *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sc_status st;
    if (c && c->node) {
        st = sc_op_verrorf("node", c->node->name, c->node->op, fmt, ap);
    } else {
        char msg[1024];
        vsnprintf(msg, sizeof msg, fmt, ap);
        st = sc_errorf("cuda backend: %s", msg);
    }
    va_end(ap);
    return st;
}

sc_status cu_fail(const cu_call *c, const char *lib, const char *expr, const char *file, int line, const char *text) {
    return cu_errorf(c, "%s error '%s' in %s (%s:%d)", lib, text, expr, file, line);
}

static int64_t device_free_bytes(void) {
    size_t fr = 0, total = 0;
    if (cudaMemGetInfo(&fr, &total) != cudaSuccess) return -1;
    return (int64_t)fr;
}

/* *buf grown to at least `bytes` (what: for the message). */
static sc_status device_buffer(const cu_call *c, void **buf, int64_t *have, int64_t bytes, const char *what, void **p) {
    cu_ctx *x = c->ctx;
    if (bytes <= *have) {
        *p = *buf;
        return SC_OK;
    }
    if (x->scratch_limit > 0 && bytes > x->scratch_limit)
        return cu_errorf(c, "needs %lld bytes of %s, over the %lld the memory cap leaves", (long long)bytes, what,
                         (long long)x->scratch_limit);
    CU_CHECK(c, cudaStreamSynchronize(x->stream)); /* kernels may still use the old buffer */
    if (*buf) CU_CHECK(c, cudaFree(*buf));
    *buf = NULL;
    *have = 0;
    int64_t want = bytes + bytes / 4; /* some headroom so growth is rare */
    if (cudaMalloc(buf, (size_t)want) != cudaSuccess) {
        cudaGetLastError();
        if (cudaMalloc(buf, (size_t)bytes) != cudaSuccess) {
            cudaError_t e = cudaGetLastError();
            *buf = NULL;
            return cu_errorf(c, "cudaMalloc of %lld bytes of %s failed (%s); %lld bytes free", (long long)bytes, what,
                             cudaGetErrorString(e), (long long)device_free_bytes());
        }
        want = bytes;
    }
    *have = want;
    *p = *buf;
    return SC_OK;
}

sc_status cu_scratch(const cu_call *c, int64_t bytes, void **p) {
    return device_buffer(c, &c->ctx->scratch, &c->ctx->scratch_bytes, bytes, "workspace", p);
}

sc_status cu_widen_buffer(const cu_call *c, int64_t bytes, void **p) {
    return device_buffer(c, &c->ctx->widen, &c->ctx->widen_bytes, bytes, "f32 copies of 16-bit tensors", p);
}

static sc_status read_small(const cu_call *c, int i, int64_t max_bytes) {
    const sc_tensor *t = &c->in[i];
    if (i >= c->n_in || !t->data) return cu_errorf(c, "input %d is missing", i);
    int64_t b = sc_desc_bytes(&t->desc);
    if (b < 0 || b > max_bytes) return cu_errorf(c, "input %d is too large to read back (%lld bytes)", i, (long long)b);
    CU_CHECK(c, cudaMemcpyAsync(c->ctx->pinned_small, t->data, (size_t)b, cudaMemcpyDeviceToHost, c->ctx->stream));
    CU_CHECK(c, cudaStreamSynchronize(c->ctx->stream));
    return SC_OK;
}

sc_status cu_read_i64(const cu_call *c, int i, int64_t *dst, int64_t *n, int64_t max) {
    sc_dtype t = c->in[i].desc.dtype;
    if (t != SC_I32 && t != SC_I64) return cu_errorf(c, "input %d must be i32 or i64, not %s", i, sc_dtype_name(t));
    int64_t k = sc_desc_numel(&c->in[i].desc);
    if (k > max || k > 512) return cu_errorf(c, "input %d has %lld values, at most %lld expected", i, (long long)k, (long long)max);
    SC_TRY(read_small(c, i, 4096));
    for (int64_t j = 0; j < k; j++)
        dst[j] = t == SC_I64 ? ((const int64_t *)c->ctx->pinned_small)[j] : ((const int32_t *)c->ctx->pinned_small)[j];
    *n = k;
    return SC_OK;
}

sc_status cu_read_bytes(const cu_call *c, int i, void *dst, int64_t max_bytes) {
    SC_TRY(read_small(c, i, max_bytes < 4096 ? max_bytes : 4096));
    memcpy(dst, c->ctx->pinned_small, (size_t)sc_desc_bytes(&c->in[i].desc));
    return SC_OK;
}

sc_status cu_read_f64(const cu_call *c, int i, double *v) {
    if (sc_desc_numel(&c->in[i].desc) < 1) return cu_errorf(c, "input %d is empty", i);
    sc_desc one = c->in[i].desc;
    one.rank = 0;
    size_t es = sc_dtype_size(one.dtype);
    if (es == 0) return cu_errorf(c, "input %d has dtype %s", i, sc_dtype_name(one.dtype));
    CU_CHECK(c, cudaMemcpyAsync(c->ctx->pinned_small, c->in[i].data, es, cudaMemcpyDeviceToHost, c->ctx->stream));
    CU_CHECK(c, cudaStreamSynchronize(c->ctx->stream));
    const void *p = c->ctx->pinned_small;
    switch (one.dtype) {
    case SC_F32: *v = *(const float *)p; break;
    case SC_F64: *v = *(const double *)p; break;
    case SC_I32: *v = *(const int32_t *)p; break;
    case SC_I64: *v = (double)*(const int64_t *)p; break;
    case SC_BOOL:
    case SC_U8: *v = *(const uint8_t *)p; break;
    case SC_I8: *v = *(const int8_t *)p; break;
    default: return cu_errorf(c, "input %d: dtype %s not supported as a scalar", i, sc_dtype_name(one.dtype));
    }
    return SC_OK;
}
