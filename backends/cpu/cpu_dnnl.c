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

sc_status cpu_dnnl_error(const sc_kernel_call *call, const char *what, dnnl_status_t s) {
    return cpu_errorf(call, "oneDNN %s failed: %s", what, dnnl_status_name(s));
}

dnnl_engine_t cpu_dnnl_engine(sc_status *st) {
    if (!dnnl_eng) {
        dnnl_status_t s = dnnl_engine_create(&dnnl_eng, dnnl_cpu, 0);
        if (s != dnnl_success) {
            dnnl_eng = NULL;
            *st = sc_errorf("oneDNN engine creation failed: %s", dnnl_status_name(s));
        }
    }
    return dnnl_eng;
}

dnnl_stream_t cpu_dnnl_stream(sc_status *st) {
    if (!dnnl_strm) {
        dnnl_engine_t e = cpu_dnnl_engine(st);
        if (!e) return NULL;
        dnnl_status_t s = dnnl_stream_create(&dnnl_strm, e, dnnl_stream_default_flags);
        if (s != dnnl_success) {
            dnnl_strm = NULL;
            *st = sc_errorf("oneDNN stream creation failed: %s", dnnl_status_name(s));
        }
    }
    return dnnl_strm;
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

void *cpu_prim_list_find(const cpu_prim_list *l, const void *key, size_t key_size) {
    for (int i = 0; i < l->n; i++)
        if (!memcmp(l->items[i], key, key_size)) return l->items[i];
    return NULL;
}

bool cpu_prim_list_add(cpu_prim_list *l, void *item) {
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
