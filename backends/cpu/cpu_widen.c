/* 16-bit floats through the f32 kernels. A node with a bf16 or f16 input or output (mixed precision,
 * graph/pass_precision.c, or a model stored in 16 bits) runs its op's f32 kernel on widened copies:
 * bf16 -> f32 and f16 -> f32 are exact, the kernel computes and accumulates in f32, and each 16-bit
 * output is rounded once to nearest even (core/half.h). That is PyTorch's CPU arithmetic for the ops
 * it runs in 16 bits (f32 accumulation, one rounding of the result), and the bits equal those of
 * the native 16-bit element-wise kernels (cpu_elementwise_binary.c), which widen and round the same
 * way. Ops whose kernels take both types run as they are (takes_16bit), and so do MatMul, Gemm, Conv
 * and ConvGrad on bf16 where the CPU has bf16 dot products (cpu_nn_bgemm.c, cpu_nn_conv*.c). */
#include <pthread.h>
#include <stdlib.h>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_dnnl.h"
#include "backends/cpu/cpu_kernels.h"
#include "core/half.h"

/* Kernels that take bf16 and f16 as they are: the native 16-bit arithmetic, Cast and ConstantOfShape
 * (their output type is an attribute), the ops that only move elements by their size (no
 * arithmetic: widening them would only cost two conversions, and quiet signalling NaNs), and the
 * cross-entropy and its gradient, which widen one row at a time (cpu_loss.c): a whole-tensor copy of
 * a language model's logits in f32 is the largest buffer of its step; and the optimizer updates,
 * whose 16-bit gradient is widened element by element (cpu_optim.c). */
static bool takes_16bit(sc_op op) {
    switch (op) {
    case SC_OP_IDENTITY:
    case SC_OP_RESHAPE:
    case SC_OP_FLATTEN:
    case SC_OP_SQUEEZE:
    case SC_OP_UNSQUEEZE:
    case SC_OP_TRANSPOSE:
    case SC_OP_CONCAT:
    case SC_OP_SPLIT:
    case SC_OP_EXPAND:
    case SC_OP_SHAPE:
    case SC_OP_SLICE:
    case SC_OP_SLICE_GRAD:
    case SC_OP_GATHER:
    case SC_OP_PAD:
    case SC_OP_TRILU:
    case SC_OP_WHERE:
    case SC_OP_CAST:
    case SC_OP_CONSTANT_OF_SHAPE:
    case SC_OP_ADD:
    case SC_OP_SUB:
    case SC_OP_MUL:
    case SC_OP_DIV:
    case SC_OP_MAX:
    case SC_OP_MIN:
    case SC_OP_EQUAL:
    case SC_OP_LESS:
    case SC_OP_GREATER:
    case SC_OP_CLIP:
    case SC_OP_SOFTMAX_CROSS_ENTROPY_LOSS:
    case SC_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD:
    case SC_OP_SGD_UPDATE:
    case SC_OP_ADAMW_UPDATE: return true;
    default: return false;
    }
}

/* MatMul, Gemm, Conv and ConvGrad whose first input is bf16, where the CPU has bf16 dot products:
 * each kernel checks the rest of its types and widens itself when it cannot take them
 * (cpu_nn_bgemm.c, cpu_nn_gemm.c, cpu_nn_conv*.c). */
static bool bf16_native(sc_op op, const sc_tensor *in, int n_in) {
    bool op_ok = op == SC_OP_MATMUL || op == SC_OP_GEMM || op == SC_OP_CONV || op == SC_OP_CONV_GRAD;
    return op_ok && n_in > 0 && in[0].desc.dtype == SC_BF16 && cpu_bf16_native();
}

bool cpu_needs_widening(sc_op op, const sc_tensor *in, int n_in, const sc_tensor *out, int n_out) {
    if (takes_16bit(op) || bf16_native(op, in, n_in)) return false;
    for (int i = 0; i < n_in; i++)
        if (in[i].data && sc_dtype_is_half(in[i].desc.dtype)) return true;
    for (int i = 0; i < n_out; i++)
        if (out[i].data && sc_dtype_is_half(out[i].desc.dtype)) return true;
    return false;
}

/* Conversions in blocks over the cores: a bf16 model's every node converts its tensors. */
#define WIDEN_BLOCK ((int64_t)1 << 16)

/* n elements from `from` to `to`: one of them f32, the other bf16 or f16. */
static void convert(void *dst, const void *src, int64_t n, sc_dtype from, sc_dtype to) {
    int64_t blocks = (n + WIDEN_BLOCK - 1) / WIDEN_BLOCK;
#pragma omp parallel for if (blocks > 1)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t at = b * WIDEN_BLOCK, len = n - at < WIDEN_BLOCK ? n - at : WIDEN_BLOCK;
        float *f = to == SC_F32 ? (float *)dst + at : (float *)src + at;
        uint16_t *h = to == SC_F32 ? (uint16_t *)src + at : (uint16_t *)dst + at;
        if (from == SC_F16) sc_f16_to_f32_n(f, h, len);
        else if (from == SC_BF16) sc_bf16_to_f32_n(f, h, len);
        else if (to == SC_F16) sc_f32_to_f16_n(h, f, len);
        else sc_f32_to_bf16_n(h, f, len);
    }
}

/* The widened copies' buffers, kept between calls. A buffer of many MB from malloc is a fresh
 * mapping each time, and the kernel zeroes its (huge) pages on first touch: in a bf16 GPT step on
 * the CPU that was 8.6% of the time (`perf`, clear_page_erms under the conversions). Up to
 * POOL_SLOTS buffers of POOL_MAX_BYTES in all are kept; a copy that does not fit is malloc'd and
 * freed as before. One lock: a node takes a few slots, once. */
#define POOL_SLOTS 8
#define POOL_MAX_BYTES ((size_t)128 << 20)

typedef struct {
    void *p;
    size_t size;
    bool used;
} pool_slot;

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pool_slot pool[POOL_SLOTS];
static size_t pool_bytes;

/* The smallest free slot that holds `bytes`, else a free slot grown to it (within the cap). */
static pool_slot *pool_pick(size_t bytes) {
    pool_slot *fit = NULL, *grow = NULL;
    for (int i = 0; i < POOL_SLOTS; i++) {
        pool_slot *s = &pool[i];
        if (s->used) continue;
        if (s->size >= bytes && (!fit || s->size < fit->size)) fit = s;
        if (s->size < bytes && (!grow || s->size < grow->size)) grow = s;
    }
    if (fit) return fit;
    if (!grow || pool_bytes - grow->size + bytes > POOL_MAX_BYTES) return NULL;
    void *p = malloc(bytes);
    if (!p) return NULL;
    pool_bytes += bytes - grow->size;
    free(grow->p);
    grow->p = p;
    grow->size = bytes;
    return grow;
}

static void *widen_alloc(size_t bytes) {
    pthread_mutex_lock(&pool_mu);
    pool_slot *s = pool_pick(bytes);
    if (s) s->used = true;
    pthread_mutex_unlock(&pool_mu);
    return s ? s->p : malloc(bytes);
}

static void widen_free(void *p) {
    pthread_mutex_lock(&pool_mu);
    bool pooled = false;
    for (int i = 0; i < POOL_SLOTS && !pooled; i++)
        if (pool[i].used && pool[i].p == p) pool[i].used = false, pooled = true;
    pthread_mutex_unlock(&pool_mu);
    if (!pooled) free(p);
}

/* t's f32 copy (data converted when `fill`), or t itself when it is not a 16-bit float. */
static sc_status widen(const sc_tensor *t, bool fill, sc_tensor *w) {
    *w = *t;
    if (!t->data || !sc_dtype_is_half(t->desc.dtype)) return SC_OK;
    int64_t n = sc_desc_numel(&t->desc);
    w->desc.dtype = SC_F32;
    w->data = widen_alloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!w->data) return sc_errorf("out of memory widening a %s tensor of %lld elements", sc_dtype_name(t->desc.dtype),
                                   (long long)n);
    if (fill) convert(w->data, t->data, n, t->desc.dtype, SC_F32);
    return SC_OK;
}

sc_status cpu_run_widened(sc_cpu_kernel k, const sc_kernel_call *call) {
    int n_in = call->n_in, n_out = call->n_out;
    sc_tensor *win = calloc((size_t)n_in + 1, sizeof *win), *wout = calloc((size_t)n_out + 1, sizeof *wout);
    sc_status st = win && wout ? SC_OK : sc_errorf("out of memory widening node '%s'", call->node->name);
    int done_in = 0, done_out = 0;
    for (; !st && done_in < n_in; done_in++) st = widen(&call->in[done_in], true, &win[done_in]);
    for (; !st && done_out < n_out; done_out++) st = widen(&call->out[done_out], false, &wout[done_out]);
    if (!st) {
        sc_kernel_call wide = {call->node, win, n_in, wout, n_out};
        st = k(&wide);
    }
    for (int i = 0; !st && i < n_out; i++)
        if (wout[i].data != call->out[i].data)
            convert(call->out[i].data, wout[i].data, sc_desc_numel(&call->out[i].desc), SC_F32, call->out[i].desc.dtype);
    for (int i = 0; i < done_in; i++)
        if (win[i].data != call->in[i].data) widen_free(win[i].data);
    for (int i = 0; i < done_out; i++)
        if (wout[i].data != call->out[i].data) widen_free(wout[i].data);
    free(win);
    free(wout);
    return st;
}
