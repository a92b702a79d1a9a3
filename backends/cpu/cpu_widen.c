/* bf16 through the f32 kernels. A node with a bf16 input or output (mixed precision,
 * graph/pass_precision.c) runs its op's f32 kernel on widened copies: bf16 -> f32 is exact, the
 * kernel computes and accumulates in f32, and each bf16 output is rounded once to nearest even
 * (core/half.h). That is PyTorch's CPU bf16 arithmetic for the ops it runs in bf16 (f32 accumulation,
 * one rounding of the result), and the bits equal those of the native bf16 element-wise kernels
 * (cpu_elementwise_binary.c), which widen and round the same way. Ops whose kernels take bf16 run as
 * they are: those (their NaN payloads pass through), and Cast and ConstantOfShape, which read their
 * output type from attributes. */
#include <stdlib.h>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_kernels.h"
#include "core/half.h"

static bool takes_bf16(sc_op op) {
    switch (op) {
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
    case SC_OP_CLIP: return true;
    default: return false;
    }
}

bool cpu_needs_widening(sc_op op, const sc_tensor *in, int n_in, const sc_tensor *out, int n_out) {
    if (takes_bf16(op)) return false;
    for (int i = 0; i < n_in; i++)
        if (in[i].data && in[i].desc.dtype == SC_BF16) return true;
    for (int i = 0; i < n_out; i++)
        if (out[i].data && out[i].desc.dtype == SC_BF16) return true;
    return false;
}

/* Conversions in blocks over the cores: a bf16 model's every node converts its tensors. */
#define WIDEN_BLOCK ((int64_t)1 << 16)

static void to_f32(float *dst, const uint16_t *src, int64_t n) {
    int64_t blocks = (n + WIDEN_BLOCK - 1) / WIDEN_BLOCK;
#pragma omp parallel for if (blocks > 1)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t at = b * WIDEN_BLOCK, len = n - at < WIDEN_BLOCK ? n - at : WIDEN_BLOCK;
        sc_bf16_to_f32_n(dst + at, src + at, len);
    }
}

static void to_bf16(uint16_t *dst, const float *src, int64_t n) {
    int64_t blocks = (n + WIDEN_BLOCK - 1) / WIDEN_BLOCK;
#pragma omp parallel for if (blocks > 1)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t at = b * WIDEN_BLOCK, len = n - at < WIDEN_BLOCK ? n - at : WIDEN_BLOCK;
        sc_f32_to_bf16_n(dst + at, src + at, len);
    }
}

/* t's f32 copy (data converted when `fill`), or t itself when it is not bf16. */
static sc_status widen(const sc_tensor *t, bool fill, sc_tensor *w) {
    *w = *t;
    if (!t->data || t->desc.dtype != SC_BF16) return SC_OK;
    int64_t n = sc_desc_numel(&t->desc);
    w->desc.dtype = SC_F32;
    w->data = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!w->data) return sc_errorf("out of memory widening a bf16 tensor of %lld elements", (long long)n);
    if (fill) to_f32(w->data, t->data, n);
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
            to_bf16(call->out[i].data, wout[i].data, sc_desc_numel(&call->out[i].desc));
    for (int i = 0; i < done_in; i++)
        if (win[i].data != call->in[i].data) free(win[i].data);
    for (int i = 0; i < done_out; i++)
        if (wout[i].data != call->out[i].data) free(wout[i].data);
    free(win);
    free(wout);
    return st;
}
