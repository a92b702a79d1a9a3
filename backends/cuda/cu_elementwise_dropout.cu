/* Training-mode Dropout on the CUDA backend; the math is the CPU's (cpu_elementwise_dropout.c,
 * cpu_rng.h): keep = (mix64(key + i * GOLDEN) >> 32) >= ceil(ratio 2^32), the key computed on the host
 * exactly as the CPU does from (seed, step, node name, seed attribute), so the mask is bit-identical to
 * the CPU's for the same seed / step / node / element.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/common/common.h"
#include "backends/cuda/cu_block.cuh"
#include "backends/cuda/cu_kernels.h"

extern "C" {
#include "backends/cpu/cpu_rng.h"
}

/* ---- Dropout ---- */

__device__ __forceinline__ uint64_t mix64_d(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
#define GOLDEN 0x9e3779b97f4a7c15ull

template <typename T> __global__ void k_dropout(const T *x, T *y, uint8_t *mask, int64_t n, uint64_t key, uint64_t thr, T scale) {
    GRID_STRIDE(i, n) {
        uint64_t u = mix64_d(key + (uint64_t)i * GOLDEN) >> 32;
        bool keep = u >= thr;
        y[i] = keep ? x[i] * scale : (T)0;
        if (mask) mask[i] = keep;
    }
}

/* The host half of the CPU's key (cpu_elementwise_dropout.c), copied so the two stay bit-identical. */
static uint64_t mix64_h(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static uint64_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}
static uint64_t dropout_key(const sc_node *node) {
    uint64_t seed, step;
    cpu_get_dropout_rng(&seed, &step);
    uint64_t k = mix64_h(seed + GOLDEN);
    k = mix64_h(k ^ (step + 2 * GOLDEN));
    k = mix64_h(k ^ name_hash(node->name));
    if (node->attrs->dropout.has_seed) k = mix64_h(k ^ (uint64_t)node->attrs->dropout.seed);
    return k;
}

extern "C" {

/* Dropout (X[, ratio[, training_mode]]) -> (Y[, mask]) */
sc_status cu_dropout(const cu_call *c) {
    double ratio = 0.5, tm = 0;
    if (c->n_in > 1 && c->in[1].data) SC_TRY(cu_read_f64(c, 1, &ratio));
    if (c->n_in > 2 && c->in[2].data) SC_TRY(cu_read_f64(c, 2, &tm));
    uint8_t *mask = c->n_out > 1 ? (uint8_t *)c->out[1].data : NULL;
    int64_t n = sc_desc_numel(&c->in[0].desc);
    if (!(tm != 0 && ratio > 0)) {
        SC_TRY(cu_copy_input(c));
        if (mask && n > 0) CU_CHECK(c, cudaMemsetAsync(mask, 1, (size_t)n, c->ctx->stream));
        return SC_OK;
    }
    if (!(ratio >= 0 && ratio <= 1)) return cu_errorf(c, "ratio %g must lie in [0, 1]", ratio);
    if (mask && c->out[1].desc.dtype != SC_BOOL) return cu_errorf(c, "mask output must be bool");
    double th = ratio * 4294967296.0;
    uint64_t thr = th >= 4294967296.0 ? (1ull << 32) : (uint64_t)ceil(th);
    double scale = ratio < 1 ? 1.0 / (1.0 - ratio) : 0.0;
    uint64_t key = dropout_key(c->node);
    if (n == 0) return SC_OK;
    cudaStream_t s = c->ctx->stream;
    switch (c->in[0].desc.dtype) {
    case SC_F32: k_dropout<float><<<cu_grid(n), CU_BLOCK, 0, s>>>((const float *)c->in[0].data, (float *)c->out[0].data, mask, n, key, thr, (float)scale); break;
    case SC_F64: k_dropout<double><<<cu_grid(n), CU_BLOCK, 0, s>>>((const double *)c->in[0].data, (double *)c->out[0].data, mask, n, key, thr, scale); break;
    default: return cu_errorf(c, "training-mode Dropout supports f32 and f64, not %s", sc_dtype_name(c->in[0].desc.dtype));
    }
    CU_LAUNCH_CHECK(c);
    return SC_OK;
}

} /* extern "C" */
