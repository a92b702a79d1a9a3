/* bf16 GEMM on the CPU's own bf16 dot products (cpu_bgemm_tiled, contract in cpu_dnnl.h).
 *
 * Mixed precision runs MatMul and Gemm on bf16 operands (graph/pass_precision.c). Widened to f32
 * (cpu_widen.c) they cost what f32 costs, plus two conversions. A CPU with AVX512_BF16 or AMX
 * computes sum_k a_k b_k from bf16 pairs (VDPBF16PS: two products per f32 lane per instruction) at
 * about twice the f32 rate: on a 2-core Zen 4 EPYC, PyTorch's autocast matmul (oneDNN 2.6) ran
 * (1024, 768) @ (768, 3072) at 410 GFLOP/s against 172 in f32.
 *
 * The arithmetic is the widened path's: the products of two bf16 numbers are exact in f32, they are
 * summed in f32, and the result y = alpha * acc + beta * c is rounded once when Y is bf16. Only the
 * order of the f32 sums differs (oneDNN's kernels pair adjacent k), and VDPBF16PS reads subnormal
 * bf16 inputs as zero. Like cpu_sgemm_tiled, the tiles of Y are fixed by the shapes and the core
 * count, and each is one oneDNN matmul on one thread with K whole, so the bits do not depend on the
 * thread count (backends/thread_governor.h).
 *
 * Each tile's primitive is cached per (tile shape, K, strides, transposes), created for one thread
 * with a user scratchpad, so that the tiles of a product run it concurrently, each thread with its
 * own memory objects (entry->thr), accumulator and scratchpad (tile_threads, shared by every entry).
 * Tiles hold at most BGEMM_MAX_TILE outputs, so a thread's accumulator stays within its L2 and the
 * buffers stay small beside the product (a 50257-wide LM head would otherwise make tiles of
 * hundreds of MB on a 2-core machine). Where oneDNN has no kernel for bf16
 * but its reference loops (a CPU without AVX-512), cpu_bf16_native is false and MatMul and Gemm
 * keep the widened path. SCORCH_CPU_BF16=widen forces that path, for Conv too (for comparisons). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_dnnl.h"
#include "core/half.h"

/* Outputs per tile at most (f32: 512 KiB of accumulator). */
#define BGEMM_MAX_TILE ((int64_t)1 << 17)

typedef struct {
    int64_t m, n, K, lda, ldb;
    char ta, tb;
} bgemm_key;

/* One thread's memory objects for one primitive: A and B over the caller's data, the f32 accumulator
 * tile and the scratchpad over the thread's buffers (tile_thread). */
typedef struct {
    dnnl_memory_t a, b, acc, pad;
} bgemm_thread;

typedef struct {
    bgemm_key key;
    bool native; /* oneDNN runs it with a bf16 kernel (not its reference loops) */
    dnnl_primitive_t prim;
    dnnl_memory_desc_t a_md, b_md, acc_md, pad_md;
    size_t pad_bytes;
    bgemm_thread *thr;
    int n_thr;
} bgemm_entry;

static void bgemm_entry_free(void *entry) {
    bgemm_entry *e = entry;
    for (int i = 0; i < e->n_thr; i++) {
        dnnl_memory_t mems[] = {e->thr[i].a, e->thr[i].b, e->thr[i].acc, e->thr[i].pad};
        cpu_dnnl_destroy(NULL, 0, mems, 4);
    }
    cpu_dnnl_destroy(&e->prim, 1, NULL, 0);
    free(e->thr);
    free(e);
}

static sc_status bgemm_entry_build(const sc_kernel_call *call, dnnl_engine_t eng, void *entry);
static cpu_prim_list bgemm_entries = {.key_size = sizeof(bgemm_key), .entry_size = sizeof(bgemm_entry),
                                      .build = bgemm_entry_build, .release = bgemm_entry_free};

/* Per tile thread: its stream (a stream is not shared between concurrent executions), its f32
 * accumulator and its scratchpad, grown before the parallel region. */
typedef struct {
    dnnl_stream_t strm;
    void *acc, *pad;
    size_t acc_size, pad_size;
} tile_thread;
static tile_thread *tile_threads;
static int n_tile_threads;

static void bgemm_cache_clear(void) {
    cpu_prim_list_clear(&bgemm_entries);
    for (int i = 0; i < n_tile_threads; i++) {
        dnnl_stream_destroy(tile_threads[i].strm);
        free(tile_threads[i].acc);
        free(tile_threads[i].pad);
    }
    free(tile_threads);
    tile_threads = NULL;
    n_tile_threads = 0;
}

/* A (m, K) and B (K, n) as stored: row-major with leading dimension lda / ldb, or transposed. */
static void operand_mds(const bgemm_key *k, dnnl_memory_desc_t *a, dnnl_memory_desc_t *b) {
    dnnl_dims_t ad = {k->m, k->K}, bd = {k->K, k->n};
    dnnl_dims_t as = {k->ta == 'N' ? k->lda : 1, k->ta == 'N' ? 1 : k->lda};
    dnnl_dims_t bs = {k->tb == 'N' ? k->ldb : 1, k->tb == 'N' ? 1 : k->ldb};
    dnnl_memory_desc_init_by_strides(a, 2, ad, dnnl_bf16, as);
    dnnl_memory_desc_init_by_strides(b, 2, bd, dnnl_bf16, bs);
}

/* cpu_prim_build_fn of the cache; called with one OpenMP thread as the count (cpu_bgemm_prepare), so
 * that oneDNN plans the primitive for one thread. */
static sc_status bgemm_entry_build(const sc_kernel_call *call, dnnl_engine_t eng, void *entry) {
    bgemm_entry *e = entry;
    cpu_dnnl_register_cache(bgemm_cache_clear);
    operand_mds(&e->key, &e->a_md, &e->b_md);
    dnnl_dims_t yd = {e->key.m, e->key.n};
    dnnl_memory_desc_init_by_tag(&e->acc_md, 2, yd, dnnl_f32, dnnl_ab);
    dnnl_matmul_desc_t desc;
    dnnl_status_t s = dnnl_matmul_desc_init(&desc, &e->a_md, &e->b_md, NULL, &e->acc_md);
    if (s != dnnl_success) return cpu_dnnl_error(call, "bf16 matmul descriptor", s);
    dnnl_primitive_attr_t attr;
    s = dnnl_primitive_attr_create(&attr);
    if (s == dnnl_success) s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    dnnl_primitive_desc_t pd = NULL;
    if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &desc, attr, eng, NULL);
    dnnl_primitive_attr_destroy(attr);
    if (s == dnnl_unimplemented) return SC_OK; /* not native */
    if (s != dnnl_success) return cpu_dnnl_error(call, "bf16 matmul primitive descriptor", s);
    e->native = cpu_dnnl_optimised(pd);
    e->pad_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    e->pad_bytes = dnnl_memory_desc_get_size(&e->pad_md);
    s = e->native ? dnnl_primitive_create(&e->prim, pd) : dnnl_success;
    dnnl_primitive_desc_destroy(pd);
    return s == dnnl_success ? SC_OK : cpu_dnnl_error(call, "bf16 matmul creation", s);
}

static bool grow(void **p, size_t *size, size_t bytes) {
    if (*size >= bytes) return true;
    void *q = NULL;
    if (posix_memalign(&q, 64, bytes ? bytes : 64)) return false;
    free(*p);
    *p = q;
    *size = bytes;
    return true;
}

/* e's per-thread objects, and the tile threads' streams and buffers big enough for e, for nthr
 * threads. */
static sc_status entry_threads(const sc_kernel_call *call, dnnl_engine_t eng, bgemm_entry *e, int nthr) {
    if (n_tile_threads < nthr) {
        tile_thread *p = realloc(tile_threads, sizeof *p * (size_t)nthr);
        if (!p) return cpu_errorf(call, "out of memory for the bf16 GEMM threads");
        tile_threads = p;
        for (; n_tile_threads < nthr; n_tile_threads++) {
            tile_thread *t = &tile_threads[n_tile_threads];
            memset(t, 0, sizeof *t);
            dnnl_status_t s = dnnl_stream_create(&t->strm, eng, dnnl_stream_default_flags);
            if (s != dnnl_success) return cpu_dnnl_error(call, "stream creation", s);
        }
    }
    for (int i = 0; i < nthr; i++)
        if (!grow(&tile_threads[i].acc, &tile_threads[i].acc_size, dnnl_memory_desc_get_size(&e->acc_md)) ||
            !grow(&tile_threads[i].pad, &tile_threads[i].pad_size, e->pad_bytes))
            return cpu_errorf(call, "out of memory for the bf16 GEMM buffers");
    if (e->n_thr >= nthr) return SC_OK;
    bgemm_thread *t = realloc(e->thr, sizeof *t * (size_t)nthr);
    if (!t) return cpu_errorf(call, "out of memory for the bf16 GEMM cache");
    e->thr = t;
    for (; e->n_thr < nthr; e->n_thr++) {
        bgemm_thread *x = &e->thr[e->n_thr];
        memset(x, 0, sizeof *x);
        SC_TRY(cpu_dnnl_memory_new(call, eng, &e->a_md, NULL, &x->a));
        SC_TRY(cpu_dnnl_memory_new(call, eng, &e->b_md, NULL, &x->b));
        SC_TRY(cpu_dnnl_memory_new(call, eng, &e->acc_md, NULL, &x->acc));
        if (e->pad_bytes) SC_TRY(cpu_dnnl_memory_new(call, eng, &e->pad_md, NULL, &x->pad));
    }
    return SC_OK;
}

/* The entry of key, built with one thread as OpenMP's count. Lock held. */
static sc_status entry_get(const sc_kernel_call *call, const bgemm_key *key, dnnl_engine_t *eng, bgemm_entry **out) {
    dnnl_stream_t strm;
    SC_TRY(cpu_dnnl_context(eng, &strm));
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    void *e = NULL;
    sc_status st = cpu_prim_list_get(call, *eng, &bgemm_entries, key, &e);
    omp_set_num_threads(threads);
    *out = e;
    return st;
}

static bool forced_widen(void) {
    const char *v = getenv("SCORCH_CPU_BF16");
    return v && !strcmp(v, "widen");
}

bool cpu_bf16_native(void) {
    static int native = -1; /* decided once per process: the CPU does not change */
    if (native >= 0) return native;
    if (forced_widen()) return (native = 0);
    bgemm_key probe;
    memset(&probe, 0, sizeof probe);
    probe.m = probe.n = probe.K = probe.lda = probe.ldb = 64;
    probe.ta = probe.tb = 'N';
    sc_node node = {.name = "bf16 GEMM probe", .op = SC_OP_MATMUL};
    sc_kernel_call call = {.node = &node};
    cpu_dnnl_lock();
    dnnl_engine_t eng;
    bgemm_entry *e = NULL;
    sc_status st = entry_get(&call, &probe, &eng, &e);
    cpu_dnnl_unlock();
    native = !st && e && e->native;
    sc_status_free(st);
    return native;
}

/* ---- the tiles ---- */

typedef struct {
    const cpu_bgemm *t;
    int64_t mt, nt, per;
    const int64_t *ao, *bo;
    bgemm_entry *entry[2][2]; /* by (short or long along M, along N) */
} bgemm_run;

static int64_t tile_edge(int64_t len, int64_t parts, int64_t i) { return len * (i + 1) / parts - len * i / parts; }

static bgemm_key tile_key(const cpu_bgemm *t, int64_t m, int64_t n) {
    bgemm_key k;
    memset(&k, 0, sizeof k);
    k.m = m, k.n = n, k.K = t->K, k.lda = t->lda, k.ldb = t->ldb, k.ta = t->ta, k.tb = t->tb;
    return k;
}

/* The entries of every tile shape (at most 2 edge lengths each way) with objects for nthr threads;
 * *native false when one of them has no bf16 kernel. Lock held. */
static sc_status bgemm_prepare(const sc_kernel_call *call, bgemm_run *r, int nthr, bool *native) {
    *native = true;
    int64_t m_short = r->t->M / r->mt, n_short = r->t->N / r->nt;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            int64_t m = m_short + i, n = n_short + j;
            r->entry[i][j] = NULL;
            if (m == 0 || n == 0 || (i && r->t->M % r->mt == 0) || (j && r->t->N % r->nt == 0)) continue;
            bgemm_key k = tile_key(r->t, m, n);
            dnnl_engine_t eng;
            SC_TRY(entry_get(call, &k, &eng, &r->entry[i][j]));
            if (!r->entry[i][j]->native) *native = false;
            else SC_TRY(entry_threads(call, eng, r->entry[i][j], nthr));
        }
    return SC_OK;
}

/* y = alpha acc + beta c over one tile at (m0, n0) of problem `problem`, rounded once for bf16; acc
 * (the thread's own) is overwritten. A row at a time in loops without branches, which the compiler
 * vectorises: Y has as many elements as the product has sums of K, so a scalar pass here cost a
 * GPT step more than the bf16 products saved. */
static void tile_store(const cpu_bgemm *t, int64_t problem, int64_t m0, int64_t n0, int64_t m, int64_t n, float *acc) {
    float alpha = t->alpha, beta = t->beta;
    for (int64_t i = 0; i < m; i++) {
        float *r = acc + i * n;
        if (alpha != 1.0f)
            for (int64_t j = 0; j < n; j++) r[j] *= alpha;
        int64_t at = (m0 + i) * t->c_rs + n0 * t->c_cs, cs = t->c_cs;
        if (t->C && t->c_type == SC_BF16) {
            const uint16_t *c = (const uint16_t *)t->C + at;
            for (int64_t j = 0; j < n; j++) r[j] += beta * sc_bf16_to_f32(c[j * cs]);
        } else if (t->C) {
            const float *c = (const float *)t->C + at;
            for (int64_t j = 0; j < n; j++) r[j] += beta * c[j * cs];
        }
        int64_t row = problem * t->M * t->N + (m0 + i) * t->N + n0;
        if (t->y_type == SC_BF16) sc_f32_to_bf16_n((uint16_t *)t->Y + row, r, n);
        else memcpy((float *)t->Y + row, r, sizeof(float) * (size_t)n);
    }
}

/* Item i: tile i % per of problem i / per, on thread `thread`. */
static dnnl_status_t bgemm_tile(const bgemm_run *r, int64_t i, int thread) {
    const cpu_bgemm *t = r->t;
    int64_t problem = i / r->per, tile = i % r->per, bi = tile / r->nt, bj = tile % r->nt;
    int64_t m0 = t->M * bi / r->mt, n0 = t->N * bj / r->nt;
    int64_t m = tile_edge(t->M, r->mt, bi), n = tile_edge(t->N, r->nt, bj);
    bgemm_entry *e = r->entry[m != t->M / r->mt][n != t->N / r->nt];
    const uint16_t *a = t->A + (r->ao ? r->ao[problem] : 0) + (t->ta == 'N' ? m0 * t->lda : m0);
    const uint16_t *b = t->B + (r->bo ? r->bo[problem] : 0) + (t->tb == 'N' ? n0 : n0 * t->ldb);
    bgemm_thread *x = &e->thr[thread];
    tile_thread *tt = &tile_threads[thread];
    dnnl_memory_set_data_handle(x->a, (void *)a);
    dnnl_memory_set_data_handle(x->b, (void *)b);
    dnnl_memory_set_data_handle(x->acc, tt->acc);
    if (x->pad) dnnl_memory_set_data_handle(x->pad, tt->pad);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, x->a}, {DNNL_ARG_WEIGHTS, x->b}, {DNNL_ARG_DST, x->acc},
                               {DNNL_ARG_SCRATCHPAD, x->pad}};
    dnnl_status_t s = dnnl_primitive_execute(e->prim, tt->strm, x->pad ? 4 : 3, args);
    if (s == dnnl_success) s = dnnl_stream_wait(tt->strm);
    if (s == dnnl_success) tile_store(t, problem, m0, n0, m, n, tt->acc);
    return s;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* cpu_gemm_cut, then the longer tile edge split further until a tile holds at most BGEMM_MAX_TILE
 * outputs: still the shapes and the core count alone. */
static void bgemm_cut(const cpu_bgemm *t, int64_t *mt, int64_t *nt) {
    cpu_gemm_cut(t->M, t->N, t->K, mt, nt);
    while (ceil_div(t->M, *mt) * ceil_div(t->N, *nt) > BGEMM_MAX_TILE) {
        if (ceil_div(t->M, *mt) >= ceil_div(t->N, *nt)) (*mt)++;
        else (*nt)++;
    }
}

sc_status cpu_bgemm_tiled(const sc_kernel_call *call, const cpu_bgemm *t, int64_t batch, const int64_t *ao,
                          const int64_t *bo, bool *native) {
    bgemm_run r = {.t = t, .ao = ao, .bo = bo};
    bgemm_cut(t, &r.mt, &r.nt);
    r.per = r.mt * r.nt;
    int64_t items = batch * r.per;
    int nthr = omp_get_max_threads();
    if ((int64_t)nthr > items) nthr = (int)items;
    cpu_dnnl_lock();
    sc_status st = bgemm_prepare(call, &r, nthr, native);
    dnnl_status_t err = dnnl_success;
    if (!st && *native) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthr)
        for (int64_t i = 0; i < items; i++) {
            dnnl_status_t s = bgemm_tile(&r, i, omp_get_thread_num());
            if (s != dnnl_success) {
#pragma omp atomic write
                err = s;
            }
        }
    }
    cpu_dnnl_unlock();
    if (!st && err != dnnl_success) st = cpu_dnnl_error(call, "bf16 matmul", err);
    return st;
}
