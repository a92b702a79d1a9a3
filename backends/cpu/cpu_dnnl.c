/* oneDNN engine, stream, lock and cache registry (contract in cpu_dnnl.h). */
#include "backends/cpu/cpu_dnnl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_kernels.h"

static pthread_mutex_t dnnl_mutex = PTHREAD_MUTEX_INITIALIZER;
static dnnl_engine_t dnnl_eng;
static dnnl_stream_t dnnl_strm;

#define MAX_CACHES 8
static cpu_dnnl_cache_clear_fn cache_clears[MAX_CACHES];
static int n_cache_clears;

static const char *dnnl_status_name(dnnl_status_t s) {
    switch (s) {
    case dnnl_success: return "success";
    case dnnl_out_of_memory: return "out of memory";
    case dnnl_invalid_arguments: return "invalid arguments";
    case dnnl_unimplemented: return "unimplemented";
    case dnnl_iterator_ends: return "iterator ends";
    case dnnl_runtime_error: return "runtime error";
    case dnnl_not_required: return "not required";
    default: return "unknown status";
    }
}

bool cpu_dnnl_optimised(const_dnnl_primitive_desc_t pd) {
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    return impl && strncmp(impl, "ref", 3) != 0;
}

sc_status cpu_dnnl_error(const sc_kernel_call *call, const char *what, dnnl_status_t s) {
    return cpu_errorf(call, "oneDNN %s failed: %s", what, dnnl_status_name(s));
}

dnnl_format_tag_t cpu_dnnl_plain_tag(int nd) {
    static const dnnl_format_tag_t tags[] = {dnnl_a, dnnl_a, dnnl_ab, dnnl_abc, dnnl_abcd, dnnl_abcde, dnnl_abcdef};
    return tags[nd];
}

cpu_dnnl_window cpu_dnnl_window_of(int n, const int64_t *stride, const int64_t *dil, const int64_t *pad_begin,
                                   const int64_t *pad_end) {
    cpu_dnnl_window w;
    memset(&w, 0, sizeof w);
    for (int i = 0; i < n; i++) {
        w.strides[i] = stride[i];
        w.dil[i] = dil[i] - 1;
        w.pl[i] = pad_begin[i];
        w.pr[i] = pad_end[i];
    }
    return w;
}

sc_status cpu_dnnl_context(dnnl_engine_t *eng, dnnl_stream_t *strm) {
    dnnl_status_t s;
    if (!dnnl_eng && (s = dnnl_engine_create(&dnnl_eng, dnnl_cpu, 0)) != dnnl_success) {
        dnnl_eng = NULL;
        return sc_errorf("oneDNN engine creation failed: %s", dnnl_status_name(s));
    }
    if (!dnnl_strm && (s = dnnl_stream_create(&dnnl_strm, dnnl_eng, dnnl_stream_default_flags)) != dnnl_success) {
        dnnl_strm = NULL;
        return sc_errorf("oneDNN stream creation failed: %s", dnnl_status_name(s));
    }
    *eng = dnnl_eng;
    *strm = dnnl_strm;
    return SC_OK;
}

/* Whether oneDNN runs a plain (NCHW) 1x1 forward convolution, unit-strided or strided, as a GEMM
 * kernel on this CPU (cpu_conv_plain_ok); on any failure to ask, assume it does. */
static bool plain_1x1_gemm[2];
static pthread_once_t plain_1x1_once = PTHREAD_ONCE_INIT;

static bool plain_1x1_is_gemm(dnnl_engine_t eng, int64_t stride) {
    dnnl_dims_t src = {4, 64, 16, 16}, wei = {128, 64, 1, 1}, dst = {4, 128, 16 / stride, 16 / stride};
    dnnl_dims_t strides = {stride, stride}, pad = {0, 0};
    dnnl_memory_desc_t s_md, w_md, d_md;
    dnnl_memory_desc_init_by_tag(&s_md, 4, src, dnnl_f32, dnnl_nchw);
    dnnl_memory_desc_init_by_tag(&w_md, 4, wei, dnnl_f32, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&d_md, 4, dst, dnnl_f32, dnnl_nchw);
    dnnl_convolution_desc_t cd;
    dnnl_primitive_desc_t pd;
    if (dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_direct, &s_md, &w_md, NULL,
                                           &d_md, strides, pad, pad) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &cd, NULL, eng, NULL) != dnnl_success)
        return true;
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    bool gemm = !impl || strstr(impl, "gemm") != NULL;
    dnnl_primitive_desc_destroy(pd);
    return gemm;
}

static void plain_1x1_probe(void) {
    dnnl_engine_t eng;
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success) {
        plain_1x1_gemm[0] = plain_1x1_gemm[1] = true;
        return;
    }
    plain_1x1_gemm[0] = plain_1x1_is_gemm(eng, 1);
    plain_1x1_gemm[1] = plain_1x1_is_gemm(eng, 2);
    dnnl_engine_destroy(eng);
}

bool cpu_conv_plain_ok(int n_spatial, const int64_t *strides) {
    bool strided = false;
    for (int i = 0; i < n_spatial; i++) strided = strided || strides[i] != 1;
    pthread_once(&plain_1x1_once, plain_1x1_probe);
    return !plain_1x1_gemm[strided];
}

void cpu_dnnl_lock(void) { pthread_mutex_lock(&dnnl_mutex); }
void cpu_dnnl_unlock(void) { pthread_mutex_unlock(&dnnl_mutex); }

void cpu_dnnl_register_cache(cpu_dnnl_cache_clear_fn fn) {
    for (int i = 0; i < n_cache_clears; i++)
        if (cache_clears[i] == fn) return;
    SC_ASSERT(n_cache_clears < MAX_CACHES);
    cache_clears[n_cache_clears++] = fn;
}

void cpu_dnnl_cache_clear(void) {
    cpu_dnnl_lock();
    for (int i = 0; i < n_cache_clears; i++) cache_clears[i]();
    cpu_dnnl_unlock();
}

static void *prim_list_find(const cpu_prim_list *l, const void *key) {
    for (int i = 0; i < l->n; i++)
        if (!memcmp(l->items[i], key, l->key_size)) return l->items[i];
    return NULL;
}

static bool prim_list_add(cpu_prim_list *l, void *item) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 32;
        void **p = realloc(l->items, (size_t)cap * sizeof *p);
        if (!p) return false;
        l->items = p;
        l->cap = cap;
    }
    l->items[l->n++] = item;
    return true;
}

sc_status cpu_dnnl_conv_hint(const sc_kernel_call *call, dnnl_engine_t eng, const dnnl_memory_desc_t *src,
                             const dnnl_memory_desc_t *wei, const dnnl_memory_desc_t *dst, const cpu_dnnl_window *w,
                             dnnl_primitive_desc_t *hint) {
    dnnl_convolution_desc_t fd;
    dnnl_status_t s = dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, src,
                                                                wei, NULL, dst, w->strides, w->dil, w->pl, w->pr);
    if (s != dnnl_success) return cpu_dnnl_error(call, "convolution descriptor", s);
    s = dnnl_primitive_desc_create(hint, &fd, NULL, eng, NULL);
    return s == dnnl_success ? SC_OK : cpu_dnnl_error(call, "forward-training primitive descriptor", s);
}

sc_status cpu_dnnl_reorder_create(const sc_kernel_call *call, dnnl_engine_t eng, const dnnl_memory_desc_t *from,
                                  const dnnl_memory_desc_t *to, dnnl_primitive_t *out) {
    dnnl_primitive_desc_t pd;
    dnnl_status_t s = dnnl_reorder_primitive_desc_create(&pd, from, eng, to, eng, NULL);
    if (s != dnnl_success) return cpu_dnnl_error(call, "reorder descriptor", s);
    s = dnnl_primitive_create(out, pd);
    dnnl_primitive_desc_destroy(pd);
    return s == dnnl_success ? SC_OK : cpu_dnnl_error(call, "reorder creation", s);
}

sc_status cpu_dnnl_memory_new(const sc_kernel_call *call, dnnl_engine_t eng, const dnnl_memory_desc_t *md, void *handle,
                              dnnl_memory_t *out) {
    dnnl_status_t s = dnnl_memory_create(out, md, eng, handle);
    return s == dnnl_success ? SC_OK : cpu_dnnl_error(call, "memory creation", s);
}

sc_status cpu_prim_list_get(const sc_kernel_call *call, dnnl_engine_t eng, cpu_prim_list *l, const void *key,
                            void **out) {
    *out = prim_list_find(l, key);
    if (*out) return SC_OK;
    void *e = calloc(1, l->entry_size);
    if (!e) return cpu_errorf(call, "out of memory for the primitive cache");
    memcpy(e, key, l->key_size);
    sc_status st = l->build(call, eng, e);
    if (!st && !prim_list_add(l, e)) st = cpu_errorf(call, "out of memory for the primitive cache");
    if (st) {
        l->release(e);
        return st;
    }
    *out = e;
    return SC_OK;
}

void cpu_dnnl_destroy(const dnnl_primitive_t *prims, int n_prims, const dnnl_memory_t *mems, int n_mems) {
    for (int i = 0; i < n_prims; i++)
        if (prims[i]) dnnl_primitive_destroy(prims[i]);
    for (int i = 0; i < n_mems; i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
}

void cpu_prim_list_clear(cpu_prim_list *l) {
    for (int i = 0; i < l->n; i++) l->release(l->items[i]);
    l->n = 0;
}

sc_status cpu_prim_get(const sc_kernel_call *call, cpu_prim_list *l, const void *key, cpu_prim_ready *out) {
    SC_TRY(cpu_dnnl_context(&out->eng, &out->strm));
    return cpu_prim_list_get(call, out->eng, l, key, &out->entry);
}
