/* MatMul Y (M, N) = A (M, K) @ B (K, N) with a constant B (sc_matmul_attrs.b_const, and Gemm's
 * sc_gemm_attrs.b_const with B given as (N, K) under transB): oneDNN's matmul
 * primitive with B in the layout the primitive chooses, reordered once and kept (cpu_dnnl_weight),
 * where dnnl_sgemm repacks B on every call (ConvNeXt-T at 64², whose MLPs are such MatMuls, ran in
 * 0.84x of its time on this machine: bench/results/2026-11-29-prepacked-matmul.md).
 * The batch of A is already folded into M by the caller (cpu_nn_gemm.c). Primitives are cached per
 * (M, K, N, thread count): oneDNN fixes a primitive's thread count at creation.
 *
 * Without AVX-512 oneDNN 2.6 has no packing kernel for this: the primitive it offers is "gemm:jit",
 * sgemm on all threads with B as stored. On a 2-core AVX2 EPYC (single-MatMul models, best of 300
 * passes, alternating) it ran (197, 768) @ (768, 3072) in 12.0 ms and (64, 768) @ (768, 3072) in
 * 4.0 ms where the tiled sgemm (cpu_nn_sgemm.c), whose tiles copy such a B to a shorter stride,
 * takes 7.4 and 2.1 ms, and (197, 768) @ (768, 2304) in 5.4 against 4.6 ms; on products with M of
 * 1 to 64 and no such stride it was level or up to 1.7x faster (a GEMV: (1, 9216) @ (9216, 4096)
 * 3.5 against 6.0 ms), and ConvNeXt-T at 64², whose MLPs have M = 4 to 256, ran in 0.82x of the
 * tiles' time. Such a gemm:jit entry with M >= 128, or M >= 32 and B's stride a multiple of 512
 * floats, is marked plain and its products go to the tiled sgemm. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_dnnl.h"
#include "backends/cpu/cpu_kernels.h"

typedef struct {
    int64_t M, K, N;
    int trans_b; /* B stored (N, K): Gemm's transB */
    int threads;
} packed_key;

typedef struct {
    packed_key key;
    bool plain; /* the primitive would be gemm:jit and lose to cpu_sgemm_tiled */
    dnnl_primitive_t prim;
    dnnl_memory_desc_t b_user_md, b_md;
    dnnl_memory_t a, b_user, y;
} packed_entry;

static void packed_entry_free(void *entry) {
    packed_entry *e = entry;
    dnnl_memory_t mems[] = {e->a, e->b_user, e->y};
    cpu_dnnl_destroy(&e->prim, 1, mems, 3);
    free(e);
}

static sc_status packed_entry_build(const sc_kernel_call *call, dnnl_engine_t eng, void *entry);
static cpu_prim_list packed_entries = {.key_size = sizeof(packed_key), .entry_size = sizeof(packed_entry),
                                       .build = packed_entry_build, .release = packed_entry_free};
static void packed_cache_clear(void) { cpu_prim_list_clear(&packed_entries); }

/* cpu_prim_build_fn of the cache. */
static sc_status packed_entry_build(const sc_kernel_call *call, dnnl_engine_t eng, void *entry) {
    packed_entry *e = entry;
    const packed_key *k = &e->key;
    cpu_dnnl_register_cache(packed_cache_clear);
    dnnl_dims_t ad = {k->M, k->K}, bd = {k->K, k->N}, yd = {k->M, k->N};
    dnnl_memory_desc_t a_md, b_any, y_md;
    dnnl_memory_desc_init_by_tag(&a_md, 2, ad, dnnl_f32, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&e->b_user_md, 2, bd, dnnl_f32, k->trans_b ? dnnl_ba : dnnl_ab);
    dnnl_memory_desc_init_by_tag(&b_any, 2, bd, dnnl_f32, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&y_md, 2, yd, dnnl_f32, dnnl_ab);
    dnnl_matmul_desc_t desc;
    dnnl_status_t s = dnnl_matmul_desc_init(&desc, &a_md, &b_any, NULL, &y_md);
    if (s != dnnl_success) return cpu_dnnl_error(call, "matmul descriptor", s);
    dnnl_primitive_desc_t pd;
    s = dnnl_primitive_desc_create(&pd, &desc, NULL, eng, NULL);
    if (s != dnnl_success) return cpu_dnnl_error(call, "matmul primitive descriptor", s);
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    bool b_restrided = !k->trans_b && k->N % 512 == 0 && k->M >= 32;
    if (impl && strncmp(impl, "gemm:", 5) == 0 && (k->M >= 128 || b_restrided)) {
        e->plain = true;
        dnnl_primitive_desc_destroy(pd);
        return SC_OK;
    }
    e->b_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    s = dnnl_primitive_create(&e->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    if (s != dnnl_success) return cpu_dnnl_error(call, "matmul creation", s);
    SC_TRY(cpu_dnnl_memory_new(call, eng, &a_md, NULL, &e->a));
    SC_TRY(cpu_dnnl_memory_new(call, eng, &e->b_user_md, NULL, &e->b_user));
    SC_TRY(cpu_dnnl_memory_new(call, eng, &y_md, NULL, &e->y));
    return SC_OK;
}

static sc_status packed_run(const sc_kernel_call *call, const packed_key *k, const float *A, const float *B, float *Y) {
    cpu_prim_ready r;
    SC_TRY(cpu_prim_get(call, &packed_entries, k, &r));
    packed_entry *e = r.entry;
    if (e->plain) {
        cpu_sgemm t = {'N', k->trans_b ? 'T' : 'N', k->M, k->N, k->K, 1.0f, 0.0f, A, B, Y,
                       k->K, k->trans_b ? k->K : k->N, k->N, 0, 0};
        dnnl_status_t s = cpu_sgemm_tiled(t, 1, NULL, NULL);
        return s == dnnl_success ? SC_OK : cpu_dnnl_error(call, "sgemm", s);
    }
    dnnl_stream_t strm = r.strm;
    dnnl_memory_t b;
    SC_TRY(cpu_dnnl_weight(call, r.eng, strm, e->b_user, &e->b_user_md, &e->b_md, B, k->K * k->N, &b));
    dnnl_memory_set_data_handle(e->a, (void *)A);
    dnnl_memory_set_data_handle(e->y, Y);
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, e->a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, e->y}};
    dnnl_status_t s = dnnl_primitive_execute(e->prim, strm, 3, args);
    if (s == dnnl_success) s = dnnl_stream_wait(strm);
    return s == dnnl_success ? SC_OK : cpu_dnnl_error(call, "matmul", s);
}

sc_status cpu_matmul_packed_f32(const sc_kernel_call *call, int64_t M, int64_t K, int64_t N, bool trans_b,
                                const float *A, const float *B, float *Y) {
    packed_key k;
    memset(&k, 0, sizeof k);
    k.M = M, k.K = K, k.N = N, k.trans_b = trans_b, k.threads = omp_get_max_threads();
    cpu_dnnl_lock();
    sc_status st = packed_run(call, &k, A, B, Y);
    cpu_dnnl_unlock();
    return st;
}
