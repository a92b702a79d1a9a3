/* Dropout in training mode with a counter-based, seeded mask (contract in cpu_rng.h).
 *
 * The mask is a pure function of (seed, step, node name, optional seed attribute, element index):
 * splitmix64's finaliser (Steele, Lea & Flood 2014, a bijection on 64 bits with full avalanche)
 * mixes a per-node key with the element counter, so elements, nodes and steps get independent
 * streams, any thread can compute any element, and recomputing the node gives the same mask. The
 * top 32 bits u of the hash give keep = u >= ratio * 2^32, i.e. P(keep) = 1 - ratio to 2^-32.
 * Y = X * keep / (1 - ratio) as in PyTorch and the ONNX spec; ratio 1 drops everything (Y = 0).
 */
#include <math.h>
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_rng.h"

static uint64_t rng_seed, rng_step;

void cpu_set_dropout_rng(uint64_t seed, uint64_t step) {
    rng_seed = seed;
    rng_step = step;
}

void cpu_get_dropout_rng(uint64_t *seed, uint64_t *step) {
    *seed = rng_seed;
    *step = rng_step;
}

static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#define GOLDEN 0x9e3779b97f4a7c15ull

/* FNV-1a of the node name: masks differ between Dropout nodes of one step. */
static uint64_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static uint64_t node_key(const sc_kernel_call *call) {
    const sc_dropout_attrs *da = &call->node->attrs->dropout;
    uint64_t k = mix64(rng_seed + GOLDEN);
    k = mix64(k ^ (rng_step + 2 * GOLDEN));
    k = mix64(k ^ name_hash(call->node->name));
    if (da->has_seed) k = mix64(k ^ (uint64_t)da->seed);
    return k;
}

#define DROPOUT_IMPL(T, NAME)                                                                            \
    static void NAME(const T *x, T *y, uint8_t *mask, int64_t n, uint64_t key, uint64_t thr, T scale) {  \
        int par = n >= CPU_PAR_MIN;                                                                      \
        _Pragma("omp parallel for simd if(par)") for (int64_t i = 0; i < n; i++) {                       \
            uint64_t u = mix64(key + (uint64_t)i * GOLDEN) >> 32;                                        \
            bool keep = u >= thr;                                                                        \
            y[i] = keep ? x[i] * scale : (T)0;                                                           \
            if (mask) mask[i] = keep;                                                                    \
        }                                                                                                \
    }
DROPOUT_IMPL(float, dropout_f32)
DROPOUT_IMPL(double, dropout_f64)

sc_status cpu_dropout_train(const sc_kernel_call *call) {
    const sc_desc *x = &call->in[0].desc;
    double ratio = 0.5;
    if (call->n_in > 1 && call->in[1].data &&
        !cpu_convert(&ratio, SC_F64, call->in[1].data, call->in[1].desc.dtype, 1))
        return cpu_errorf(call, "ratio dtype %s not supported", sc_dtype_name(call->in[1].desc.dtype));
    if (!(ratio >= 0 && ratio <= 1)) return cpu_errorf(call, "ratio %g must lie in [0, 1]", ratio);
    uint8_t *mask = call->n_out > 1 ? call->out[1].data : NULL;
    if (mask && call->out[1].desc.dtype != SC_BOOL) return cpu_errorf(call, "mask output must be bool");
    int64_t n = sc_desc_numel(x);
    double t = ratio * 4294967296.0;
    uint64_t thr = t >= 4294967296.0 ? (1ull << 32) : (uint64_t)ceil(t);
    double scale = ratio < 1 ? 1.0 / (1.0 - ratio) : 0.0;
    uint64_t key = node_key(call);
    if (x->dtype == SC_F32) dropout_f32(call->in[0].data, call->out[0].data, mask, n, key, thr, (float)scale);
    else if (x->dtype == SC_F64) dropout_f64(call->in[0].data, call->out[0].data, mask, n, key, thr, scale);
    else return cpu_errorf(call, "training-mode Dropout supports f32 and f64, not %s", sc_dtype_name(x->dtype));
    return SC_OK;
}
