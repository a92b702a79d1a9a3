/* Weights reordered into a primitive's layout, cached across calls (contract in cpu_dnnl.h):
 * keyed by (data pointer, target desc), stamped with cpu_params_epoch() and a sampled fingerprint.
 * Used by the convolutions (cpu_nn_conv.c) and by MatMul with a constant B (cpu_nn_matmul_packed.c). */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_dnnl.h"
#include "backends/cpu/cpu_kernels.h"

typedef struct {
    const void *ptr;
    dnnl_memory_desc_t md;
    uint64_t fingerprint;
    uint64_t epoch; /* cpu_params_epoch() when reordered */
    dnnl_memory_t mem;
} cached_weight;

static cached_weight *weights;
static int n_weights, cap_weights;
/* Weight pointer -> weights index + 1 (0: empty), open addressing. A deep model caches one reorder
 * per convolution weight (500k at depth 250000), and a scan per call was quadratic: a
 * store-everything step of that model ran for over ten minutes in the scan. */
static int *index_slots;
static size_t index_cap;

static void weights_clear(void) {
    for (int i = 0; i < n_weights; i++) dnnl_memory_destroy(weights[i].mem);
    n_weights = 0;
    if (index_slots) memset(index_slots, 0, index_cap * sizeof *index_slots);
}

static size_t ptr_hash(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    return (size_t)(x ^ (x >> 33));
}

/* Indexes weights[0, n_weights) into a table of cap slots (a power of two). */
static bool index_rebuild(size_t cap) {
    int *idx = calloc(cap, sizeof *idx);
    if (!idx) return false;
    for (int i = 0; i < n_weights; i++) {
        size_t j = ptr_hash(weights[i].ptr) & (cap - 1);
        while (idx[j]) j = (j + 1) & (cap - 1);
        idx[j] = i + 1;
    }
    free(index_slots);
    index_slots = idx;
    index_cap = cap;
    return true;
}

static cached_weight *weight_find(const float *w, const dnnl_memory_desc_t *md) {
    for (size_t j = index_cap ? ptr_hash(w) & (index_cap - 1) : 0; index_cap && index_slots[j];
         j = (j + 1) & (index_cap - 1)) {
        cached_weight *c = &weights[index_slots[j] - 1];
        if (c->ptr == w && dnnl_memory_desc_equal(&c->md, md)) return c;
    }
    return NULL;
}

/* A new entry for (w, md) with its buffer allocated, indexed. */
static sc_status weight_add(const sc_kernel_call *call, dnnl_engine_t eng, const float *w,
                            const dnnl_memory_desc_t *md, cached_weight **out) {
    if ((size_t)(n_weights + 1) * 2 > index_cap && !index_rebuild(index_cap ? 2 * index_cap : 128))
        return cpu_errorf(call, "out of memory for the weight cache");
    if (n_weights == cap_weights) {
        int cap = cap_weights ? 2 * cap_weights : 64;
        cached_weight *p = realloc(weights, (size_t)cap * sizeof *p);
        if (!p) return cpu_errorf(call, "out of memory for the weight cache");
        weights = p;
        cap_weights = cap;
    }
    cached_weight *c = &weights[n_weights];
    c->ptr = w;
    c->md = *md;
    SC_TRY(cpu_dnnl_memory_new(call, eng, md, DNNL_MEMORY_ALLOCATE, &c->mem));
    size_t j = ptr_hash(w) & (index_cap - 1);
    while (index_slots[j]) j = (j + 1) & (index_cap - 1);
    index_slots[j] = ++n_weights;
    cpu_dnnl_register_cache(weights_clear);
    *out = c;
    return SC_OK;
}

/* 32 sampled elements: catches most in-place updates of a cached weight (cpu_dnnl.h). */
static uint64_t weight_fingerprint(const float *w, int64_t n) {
    uint64_t h = 1469598103934665603ull;
    int64_t step = n / 32 > 0 ? n / 32 : 1;
    for (int64_t i = 0; i < n; i += step) {
        uint32_t bits;
        memcpy(&bits, &w[i], 4);
        h = (h ^ bits) * 1099511628211ull;
    }
    uint32_t last;
    memcpy(&last, &w[n - 1], 4);
    return (h ^ last) * 1099511628211ull;
}

sc_status cpu_dnnl_weight(const sc_kernel_call *call, dnnl_engine_t eng, dnnl_stream_t strm, dnnl_memory_t user,
                          const dnnl_memory_desc_t *user_md, const dnnl_memory_desc_t *prim_md, const float *w,
                          int64_t numel, dnnl_memory_t *out) {
    dnnl_memory_set_data_handle(user, (void *)w);
    if (dnnl_memory_desc_equal(prim_md, user_md)) {
        *out = user;
        return SC_OK;
    }
    uint64_t fp = weight_fingerprint(w, numel);
    cached_weight *c = weight_find(w, prim_md);
    if (c && c->fingerprint == fp && c->epoch == cpu_params_epoch()) {
        *out = c->mem;
        return SC_OK;
    }
    if (!c) SC_TRY(weight_add(call, eng, w, prim_md, &c));
    dnnl_primitive_t r;
    SC_TRY(cpu_dnnl_reorder_create(call, eng, user_md, prim_md, &r));
    dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, c->mem}};
    dnnl_status_t s = dnnl_primitive_execute(r, strm, 2, args);
    dnnl_primitive_destroy(r);
    if (s != dnnl_success) return cpu_dnnl_error(call, "weight reorder", s);
    c->fingerprint = fp;
    c->epoch = cpu_params_epoch();
    *out = c->mem;
    return SC_OK;
}
