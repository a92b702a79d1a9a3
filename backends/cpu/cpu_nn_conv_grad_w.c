/* The weight gradient of a convolution, the same to the last bit for any thread count.
 *
 * oneDNN's backward-weights primitive splits its reduction (over samples and output positions)
 * between as many threads as it was created for, so dW differed in the last bits between 1 and 2
 * threads (ResNet-18 at 64x64: the 1x1 downsample convolutions at batch 4, every 3x3 one of layer1
 * at batch 16). A trainer that picks its thread count by load (backends/thread_governor.h) needs
 * results that do not depend on it, so the work is cut by the shapes alone into items
 *   (batch chunk b, output-channel slice s),
 * each computed by a primitive made for one thread. Threads take items as they come free (a thread
 * that a busy core slows down holds up one item, not a static share). Slices write disjoint rows
 * of dW; the chunks' partial sums are added in chunk order:
 *   dW[m] = sum_b P_b[m],   P_b[m, c, t] = sum_{n in chunk b, o} dY[n, m, o] X[n, g(m) + c, o*s - p + t*d].
 * A slice of a grouped convolution is a run of whole groups, and X's channels of those groups go
 * with it. An item reads its views of X and dY in place (strided memory descriptors); oneDNN
 * reorders them into the primitive's layout in per-thread buffers.
 *
 * The cut depends on the machine's core count, so that there are items for every core, and never
 * on the thread count in use. dB is not computed here (cpu_nn_conv_grad.c sums it per channel).
 *
 * bf16 X and dY (mixed precision, where the CPU has bf16 dot products) run oneDNN's bf16 kernels with
 * the items' dW and partial sums in f32, so the chunks are added in f32 and dW is rounded once, by
 * the reorder into the user's bf16 rows.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_dnnl.h"
#include "backends/cpu/cpu_kernels.h"

#define DW_MAX_THREADS 256
/* Below this many flops an item costs more in primitive calls than it computes. */
#define DW_MIN_ITEM_FLOPS 1e6
/* Partial sums of the batch chunks take at most this much memory. */
#define DW_PARTIAL_BYTES ((int64_t)64 << 20)
/* A batch chunk covers at least this many output positions (samples x spatial). */
#define DW_MIN_CHUNK_POSITIONS 32
/* Output channels per slice unit: one AVX-512 block of f32, so slices keep the kernels' blocking. */
#define DW_SLICE_UNIT 16

typedef struct {
    int nd;
    dnnl_dims_t src, dst, wei; /* the item's shapes */
    dnnl_dims_t src_strides, dst_strides; /* the views' strides in the full tensors */
    int64_t stride[3], dil[3], pl[3], pr[3];
    int grouped; /* wei leads with the item's groups */
    int plain;
    int dt, dw_dt; /* dnnl_data_type_t of X and dY, of the user's dW */
} dw_key;

/* A primitive and the layout it reads or writes, with the reorder from or to the user's view
 * (NULL when the layouts agree). */
typedef struct {
    dnnl_memory_desc_t user, prim;
    dnnl_primitive_t reorder;
    dnnl_memory_desc_t reorder_scratch;
} dw_side;

typedef struct {
    dw_key key;
    dnnl_primitive_t conv;
    dnnl_memory_desc_t conv_scratch;
    dw_side src, dst, wei;
} dw_entry;

/* Per-thread buffers, grown before the parallel region: the reordered src, dst and dW of one item
 * and a scratchpad that its primitives use one after another. */
typedef struct {
    void *buf[4];
    size_t size[4];
    dnnl_stream_t strm;
} dw_thread;

static sc_status dw_entry_build(const sc_kernel_call *call, dnnl_engine_t eng, void *entry);
static void dw_entry_free(void *p);
static cpu_prim_list dw_entries = {.key_size = sizeof(dw_key), .entry_size = sizeof(dw_entry),
                                   .build = dw_entry_build, .release = dw_entry_free};
static dw_thread dw_threads[DW_MAX_THREADS];
static dnnl_engine_t dw_eng; /* the process's engine, set before the items run */
static float *dw_partial;
static size_t dw_partial_size;

static void dw_entry_free(void *p) {
    dw_entry *e = p;
    dnnl_primitive_t prims[] = {e->conv, e->src.reorder, e->dst.reorder, e->wei.reorder};
    cpu_dnnl_destroy(prims, 4, NULL, 0);
    free(e);
}

static void dw_cache_clear(void) {
    cpu_prim_list_clear(&dw_entries);
    for (int t = 0; t < DW_MAX_THREADS; t++) {
        for (int b = 0; b < 4; b++) free(dw_threads[t].buf[b]);
        if (dw_threads[t].strm) dnnl_stream_destroy(dw_threads[t].strm);
        memset(&dw_threads[t], 0, sizeof dw_threads[t]);
    }
    free(dw_partial);
    dw_partial = NULL;
    dw_partial_size = 0;
}

static sc_status dw_user_scratch_attr(const sc_kernel_call *call, dnnl_primitive_attr_t *attr) {
    if (dnnl_primitive_attr_create(attr) != dnnl_success ||
        dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user) != dnnl_success)
        return cpu_errorf(call, "oneDNN attribute creation failed");
    return SC_OK;
}

/* The side's reorder, input (user -> prim) or output (prim -> user), with a user scratchpad. */
static sc_status dw_side_init(const sc_kernel_call *call, dnnl_engine_t eng, const dnnl_memory_desc_t *user,
                              const dnnl_memory_desc_t *prim, bool input, dw_side *side) {
    side->user = *user;
    side->prim = *prim;
    if (dnnl_memory_desc_equal(user, prim)) return SC_OK;
    dnnl_primitive_attr_t attr;
    SC_TRY(dw_user_scratch_attr(call, &attr));
    dnnl_primitive_desc_t pd;
    dnnl_status_t s = input ? dnnl_reorder_primitive_desc_create(&pd, user, eng, prim, eng, attr)
                            : dnnl_reorder_primitive_desc_create(&pd, prim, eng, user, eng, attr);
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) return cpu_dnnl_error(call, "reorder descriptor", s);
    side->reorder_scratch = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    s = dnnl_primitive_create(&side->reorder, pd);
    dnnl_primitive_desc_destroy(pd);
    return s == dnnl_success ? SC_OK : cpu_dnnl_error(call, "reorder creation", s);
}

/* cpu_prim_build_fn: the one-thread backward-weights primitive of an item shape. Called with the
 * OpenMP thread count set to 1, which oneDNN reads when it divides the work. */
static sc_status dw_entry_build(const sc_kernel_call *call, dnnl_engine_t eng, void *entry) {
    dw_entry *e = entry;
    const dw_key *k = &e->key;
    int nd = k->nd, wnd = k->grouped ? nd + 1 : nd;
    dnnl_format_tag_t act = k->plain ? cpu_dnnl_plain_tag(nd) : dnnl_format_tag_any;
    dnnl_data_type_t dt = (dnnl_data_type_t)k->dt;
    dnnl_memory_desc_t src_user, dst_user, wei_user, src_any, dst_any, wei_any, wei_hint;
    dnnl_memory_desc_init_by_strides(&src_user, nd, k->src, dt, k->src_strides);
    dnnl_memory_desc_init_by_strides(&dst_user, nd, k->dst, dt, k->dst_strides);
    dnnl_memory_desc_init_by_tag(&wei_user, wnd, k->wei, (dnnl_data_type_t)k->dw_dt, cpu_dnnl_plain_tag(wnd));
    dnnl_memory_desc_init_by_tag(&src_any, nd, k->src, dt, act);
    dnnl_memory_desc_init_by_tag(&dst_any, nd, k->dst, dt, act);
    dnnl_memory_desc_init_by_tag(&wei_any, wnd, k->wei, dnnl_f32, dnnl_format_tag_any); /* f32 sums */
    dnnl_memory_desc_init_by_tag(&wei_hint, wnd, k->wei, dt, dnnl_format_tag_any);
    cpu_dnnl_window win = cpu_dnnl_window_of(nd - 2, k->stride, k->dil, k->pl, k->pr);
    dnnl_convolution_desc_t bd;
    dnnl_status_t s = dnnl_dilated_convolution_backward_weights_desc_init(
        &bd, dnnl_convolution_direct, &src_any, &wei_any, NULL, &dst_any, win.strides, win.dil, win.pl, win.pr);
    if (s != dnnl_success) return cpu_dnnl_error(call, "backward convolution descriptor", s);
    dnnl_primitive_desc_t hint, pd;
    SC_TRY(cpu_dnnl_conv_hint(call, eng, &src_any, &wei_hint, &dst_any, &win, &hint));
    dnnl_primitive_attr_t attr;
    sc_status st = dw_user_scratch_attr(call, &attr);
    if (st) {
        dnnl_primitive_desc_destroy(hint);
        return st;
    }
    s = dnnl_primitive_desc_create(&pd, &bd, attr, eng, hint);
    dnnl_primitive_desc_destroy(hint);
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) return cpu_dnnl_error(call, "backward convolution primitive descriptor", s);
    e->conv_scratch = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    st = dw_side_init(call, eng, &src_user, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), true, &e->src);
    if (!st) st = dw_side_init(call, eng, &dst_user, dnnl_primitive_desc_query_md(pd, dnnl_query_diff_dst_md, 0), true, &e->dst);
    if (!st)
        st = dw_side_init(call, eng, &wei_user, dnnl_primitive_desc_query_md(pd, dnnl_query_diff_weights_md, 0), false,
                          &e->wei);
    if (!st && (s = dnnl_primitive_create(&e->conv, pd)) != dnnl_success)
        st = cpu_dnnl_error(call, "backward convolution creation", s);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

/* ---- the cut ---- */

typedef struct {
    int64_t chunks, slices; /* batch chunks, output-channel slices */
    int64_t units, unit;    /* slices are runs of units of `unit` output channels */
} dw_cut;

/* Items enough for 4 per core when the work allows. Batch chunks come first (an item then reads
 * its X once), as long as each chunk has at least DW_MIN_CHUNK_POSITIONS output positions per
 * weight (its partial dW costs a read and an add per weight) and the partial sums fit in
 * DW_PARTIAL_BYTES; chunks divide N, so every chunk of a slice runs one primitive and writes one
 * layout. Output-channel slices make up the rest. */
static dw_cut dw_cut_for(int64_t N, int64_t M, int64_t G, int64_t out_sp, double flops, int64_t w_bytes) {
    dw_cut c;
    c.unit = G > 1 ? M / G : DW_SLICE_UNIT;
    c.units = (M + c.unit - 1) / c.unit;
    int64_t want = 4 * (int64_t)omp_get_num_procs();
    if (flops / DW_MIN_ITEM_FLOPS < (double)want) want = (int64_t)(flops / DW_MIN_ITEM_FLOPS);
    if (want < 1) want = 1;
    int64_t cap = want;
    int64_t by_memory = DW_PARTIAL_BYTES / (w_bytes > 0 ? w_bytes : 1);
    int64_t by_work = N * out_sp / DW_MIN_CHUNK_POSITIONS;
    if (cap > by_memory) cap = by_memory;
    if (cap > by_work) cap = by_work;
    c.chunks = 1;
    for (int64_t k = cap < N ? cap : N; k > 1; k--)
        if (N % k == 0) {
            c.chunks = k;
            break;
        }
    c.slices = (want + c.chunks - 1) / c.chunks;
    if (c.slices > c.units) c.slices = c.units;
    return c;
}

typedef struct {
    int64_t n0, nb;       /* samples */
    int64_t m0, mb;       /* output channels */
    int64_t c0, cb;       /* input channels read */
    int64_t g;            /* groups in the slice */
} dw_item;

static dw_item dw_item_at(const dw_cut *c, int64_t N, int64_t M, int64_t C, int64_t G, int64_t i) {
    dw_item it;
    int64_t b = i / c->slices, s = i % c->slices;
    it.n0 = N * b / c->chunks;
    it.nb = N * (b + 1) / c->chunks - it.n0;
    int64_t u0 = c->units * s / c->slices, u1 = c->units * (s + 1) / c->slices;
    it.m0 = u0 * c->unit;
    it.mb = (u1 * c->unit < M ? u1 * c->unit : M) - it.m0;
    if (G > 1) {
        it.g = u1 - u0;
        it.c0 = u0 * (C / G);
        it.cb = it.g * (C / G);
    } else {
        it.g = 1;
        it.c0 = 0;
        it.cb = C;
    }
    return it;
}

typedef struct {
    const cpu_window *w;
    int64_t N, C, M, G;
    int nd;
    bool plain;
    int dt, dw_dt; /* as in dw_key */
} dw_conv;

static dw_key dw_key_for(const dw_conv *cv, const dw_item *it) {
    dw_key k;
    memset(&k, 0, sizeof k);
    k.nd = cv->nd;
    k.dt = cv->dt;
    k.dw_dt = cv->dw_dt;
    int ns = cv->nd - 2;
    int64_t in_sp = 1, out_sp = 1;
    for (int i = 0; i < ns; i++) {
        in_sp *= cv->w->in[i];
        out_sp *= cv->w->out[i];
    }
    k.src[0] = it->nb;
    k.src[1] = it->cb;
    k.dst[0] = it->nb;
    k.dst[1] = it->mb;
    k.src_strides[0] = cv->C * in_sp;
    k.src_strides[1] = in_sp;
    k.dst_strides[0] = cv->M * out_sp;
    k.dst_strides[1] = out_sp;
    int64_t si = in_sp, so = out_sp;
    for (int i = 0; i < ns; i++) {
        k.src[2 + i] = cv->w->in[i];
        k.dst[2 + i] = cv->w->out[i];
        si /= cv->w->in[i];
        so /= cv->w->out[i];
        k.src_strides[2 + i] = si;
        k.dst_strides[2 + i] = so;
        k.stride[i] = cv->w->stride[i];
        k.dil[i] = cv->w->dil[i];
        k.pl[i] = cv->w->pad_begin[i];
        k.pr[i] = cv->w->pad_end[i];
    }
    int wi = 0;
    if (cv->G > 1) k.wei[wi++] = it->g;
    k.wei[wi++] = it->mb / it->g;
    k.wei[wi++] = cv->C / cv->G;
    for (int i = 0; i < ns; i++) k.wei[wi++] = cv->w->k[i];
    k.grouped = cv->G > 1;
    k.plain = cv->plain;
    return k;
}

/* ---- running the items ---- */

static bool dw_grow(dw_thread *t, int b, size_t bytes) {
    if (t->size[b] >= bytes) return true;
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64)) return false;
    free(t->buf[b]);
    t->buf[b] = p;
    t->size[b] = bytes;
    return true;
}

static size_t dw_scratch_bytes(const dw_entry *e) {
    size_t m = dnnl_memory_desc_get_size(&e->conv_scratch);
    const dw_side *sides[] = {&e->src, &e->dst, &e->wei};
    for (int i = 0; i < 3; i++)
        if (sides[i]->reorder) {
            size_t r = dnnl_memory_desc_get_size(&sides[i]->reorder_scratch);
            if (r > m) m = r;
        }
    return m;
}

/* Buffers and a stream for threads [0, nthr) big enough for entry e. */
static sc_status dw_prepare_threads(const sc_kernel_call *call, dnnl_engine_t eng, const dw_entry *e, int nthr) {
    size_t need[4] = {e->src.reorder ? dnnl_memory_desc_get_size(&e->src.prim) : 0,
                      e->dst.reorder ? dnnl_memory_desc_get_size(&e->dst.prim) : 0,
                      e->wei.reorder ? dnnl_memory_desc_get_size(&e->wei.prim) : 0, dw_scratch_bytes(e)};
    for (int t = 0; t < nthr; t++) {
        for (int b = 0; b < 4; b++)
            if (!dw_grow(&dw_threads[t], b, need[b])) return cpu_errorf(call, "out of memory for dW buffers");
        if (!dw_threads[t].strm && dnnl_stream_create(&dw_threads[t].strm, eng, dnnl_stream_default_flags) != dnnl_success)
            return cpu_errorf(call, "oneDNN stream creation failed");
    }
    return SC_OK;
}

/* Runs p (a reorder or the convolution) with its scratchpad in t's buffer 3. */
static dnnl_status_t dw_exec(dnnl_primitive_t p, const dnnl_memory_desc_t *scratch_md, dw_thread *t, int nargs,
                             dnnl_exec_arg_t *args) {
    dnnl_memory_t scratch;
    dnnl_status_t s = dnnl_memory_create(&scratch, scratch_md, dw_eng, t->buf[3]);
    if (s != dnnl_success) return s;
    args[nargs].arg = DNNL_ARG_SCRATCHPAD;
    args[nargs].memory = scratch;
    s = dnnl_primitive_execute(p, t->strm, nargs + 1, args);
    dnnl_memory_destroy(scratch);
    return s;
}

/* The memory the convolution uses for a side: the user's view (data), or t's buffer b after the
 * input reorder (the caller destroys both). */
static dnnl_status_t dw_side_memory(const dw_side *side, void *data, bool input, dw_thread *t, int b,
                                    dnnl_memory_t *user, dnnl_memory_t *prim) {
    dnnl_status_t s = dnnl_memory_create(user, &side->user, dw_eng, data);
    if (s != dnnl_success || !side->reorder) {
        *prim = *user;
        return s;
    }
    s = dnnl_memory_create(prim, &side->prim, dw_eng, t->buf[b]);
    if (s != dnnl_success || !input) return s;
    dnnl_exec_arg_t a[3] = {{DNNL_ARG_FROM, *user}, {DNNL_ARG_TO, *prim}};
    return dw_exec(side->reorder, &side->reorder_scratch, t, 2, a);
}

/* One item: dW of its samples and channels into dw (the user's layout, rows of its slice) or, when
 * partial is set, into partial in the primitive's layout (a batch chunk's share, summed later). */
static dnnl_status_t dw_run_item(const dw_entry *e, dw_thread *t, const void *x, const void *dy, void *dw,
                                 float *partial) {
    dnnl_memory_t mem[6] = {0};
    dnnl_status_t s = dw_side_memory(&e->src, (void *)x, true, t, 0, &mem[0], &mem[1]);
    if (s == dnnl_success) s = dw_side_memory(&e->dst, (void *)dy, true, t, 1, &mem[2], &mem[3]);
    if (s == dnnl_success) {
        if (partial) s = dnnl_memory_create(&mem[5], &e->wei.prim, dw_eng, partial);
        else s = dw_side_memory(&e->wei, dw, false, t, 2, &mem[4], &mem[5]);
    }
    if (s == dnnl_success) {
        dnnl_exec_arg_t a[4] = {{DNNL_ARG_SRC, mem[1]}, {DNNL_ARG_DIFF_DST, mem[3]}, {DNNL_ARG_DIFF_WEIGHTS, mem[5]}};
        s = dw_exec(e->conv, &e->conv_scratch, t, 3, a);
    }
    if (s == dnnl_success && !partial && e->wei.reorder) {
        dnnl_exec_arg_t a[3] = {{DNNL_ARG_FROM, mem[5]}, {DNNL_ARG_TO, mem[4]}};
        s = dw_exec(e->wei.reorder, &e->wei.reorder_scratch, t, 2, a);
    }
    for (int i = 0; i < 6; i += 2) {
        if (mem[i + 1] && mem[i + 1] != mem[i]) dnnl_memory_destroy(mem[i + 1]);
        if (mem[i]) dnnl_memory_destroy(mem[i]);
    }
    return s;
}

/* A slice's dW from its chunks' partial sums P_b (the primitive's layout, `stride` floats apart):
 * P_0 + P_1 + ... in chunk order, element by element, then reordered into the user's rows. */
static dnnl_status_t dw_reduce_slice(const dw_entry *e, dw_thread *t, float *p, int64_t chunks, int64_t stride,
                                     void *dw) {
    int64_t n = (int64_t)(dnnl_memory_desc_get_size(&e->wei.prim) / sizeof(float));
    float *sum = e->wei.reorder ? p : dw; /* no reorder: the user's dW is f32 in this layout */
    for (int64_t j = 0; j < n; j++) {
        float v = p[j];
        for (int64_t b = 1; b < chunks; b++) v += p[b * stride + j];
        sum[j] = v;
    }
    if (!e->wei.reorder) return dnnl_success;
    dnnl_memory_t from, to;
    dnnl_status_t s = dnnl_memory_create(&from, &e->wei.prim, dw_eng, p);
    if (s != dnnl_success) return s;
    if ((s = dnnl_memory_create(&to, &e->wei.user, dw_eng, dw)) == dnnl_success) {
        dnnl_exec_arg_t a[3] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
        s = dw_exec(e->wei.reorder, &e->wei.reorder_scratch, t, 2, a);
        dnnl_memory_destroy(to);
    }
    dnnl_memory_destroy(from);
    return s;
}

/* The entries of every item, made for one thread (the caller's OpenMP thread count is restored). */
static sc_status dw_entries_for(const sc_kernel_call *call, dnnl_engine_t eng, const dw_conv *cv, const dw_cut *c,
                                int64_t n_items, dw_entry **entries, int nthr) {
    static bool registered;
    if (!registered) {
        cpu_dnnl_register_cache(dw_cache_clear);
        registered = true;
    }
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    sc_status st = SC_OK;
    for (int64_t i = 0; i < n_items && !st; i++) {
        dw_item it = dw_item_at(c, cv->N, cv->M, cv->C, cv->G, i);
        dw_key k = dw_key_for(cv, &it);
        void *e = NULL;
        st = cpu_prim_list_get(call, eng, &dw_entries, &k, &e);
        entries[i] = e;
        if (!st && (i == 0 || entries[i] != entries[i - 1])) st = dw_prepare_threads(call, eng, e, nthr);
    }
    omp_set_num_threads(saved);
    return st;
}

/* Partial sums: chunk b's share of slice s at dw_partial + b * stride + off[s] (floats), in the
 * slice primitive's layout; NULL when there is one chunk. */
static float *dw_partials(const dw_cut *c, dw_entry *const *entries, int64_t *off, int64_t *stride) {
    *stride = 0;
    for (int64_t s = 0; s < c->slices; s++) {
        off[s] = *stride;
        *stride += (int64_t)(dnnl_memory_desc_get_size(&entries[s]->wei.prim) / sizeof(float));
    }
    size_t bytes = c->chunks > 1 ? (size_t)(c->chunks * *stride) * sizeof(float) : 0;
    if (bytes > dw_partial_size) {
        free(dw_partial);
        dw_partial_size = 0;
        if (posix_memalign((void **)&dw_partial, 64, bytes)) return dw_partial = NULL;
        dw_partial_size = bytes;
    }
    return c->chunks > 1 ? dw_partial : NULL;
}

sc_status cpu_conv_grad_weights(const sc_kernel_call *call, const cpu_window *w, int64_t N, int64_t C, int64_t M,
                                int64_t G, bool plain, const void *dy, const void *x, void *dw) {
    sc_dtype in_type = call->in[1].desc.dtype, dw_type = call->out[1].desc.dtype;
    dw_conv cv = {w, N, C, M, G, call->in[1].desc.rank, plain, in_type == SC_BF16 ? dnnl_bf16 : dnnl_f32,
                  dw_type == SC_BF16 ? dnnl_bf16 : dnnl_f32};
    size_t esz = sc_dtype_size(in_type), dw_esz = sc_dtype_size(dw_type);
    int64_t w_numel = M * (C / G) * w->k[0] * w->k[1] * w->k[2], row = w_numel / M;
    int64_t in_sp = w->in[0] * w->in[1] * w->in[2], out_sp = w->out[0] * w->out[1] * w->out[2];
    double flops = 2.0 * (double)N * (double)w_numel * (double)out_sp;
    dw_cut c = dw_cut_for(N, M, G, out_sp, flops, w_numel * (int64_t)sizeof(float));
    int64_t n_items = c.chunks * c.slices;
    int nthr = omp_get_max_threads();
    if (nthr > DW_MAX_THREADS) nthr = DW_MAX_THREADS;
    if ((int64_t)nthr > n_items) nthr = (int)n_items;
    dw_entry **entries = malloc(sizeof *entries * (size_t)n_items);
    int64_t *off = malloc(sizeof *off * (size_t)c.slices), stride = 0;
    sc_status st = entries && off ? SC_OK : cpu_errorf(call, "out of memory");
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    if (!st) st = cpu_dnnl_context(&eng, &strm);
    if (!st) {
        dw_eng = eng;
        st = dw_entries_for(call, eng, &cv, &c, n_items, entries, nthr);
    }
    float *partial = st ? NULL : dw_partials(&c, entries, off, &stride);
    if (!st && c.chunks > 1 && !partial) st = cpu_errorf(call, "out of memory for dW partial sums");
    dnnl_status_t failed = dnnl_success;
    if (!st) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthr)
        for (int64_t i = 0; i < n_items; i++) {
            omp_set_num_threads(1); /* oneDNN reads it when called inside this region */
            dw_item it = dw_item_at(&c, N, M, C, G, i);
            int64_t b = i / c.slices, sl = i % c.slices;
            dnnl_status_t s = dw_run_item(entries[i], &dw_threads[omp_get_thread_num()],
                                          (const char *)x + (size_t)((it.n0 * C + it.c0) * in_sp) * esz,
                                          (const char *)dy + (size_t)((it.n0 * M + it.m0) * out_sp) * esz,
                                          (char *)dw + (size_t)(it.m0 * row) * dw_esz,
                                          partial ? partial + b * stride + off[sl] : NULL);
            if (s != dnnl_success) {
#pragma omp critical(dw_failed)
                failed = s;
            }
        }
    }
    if (!st && partial && failed == dnnl_success) {
        /* Slices reduce independently; within one, the chunk order is fixed. */
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthr < c.slices ? nthr : (int)c.slices)
        for (int64_t sl = 0; sl < c.slices; sl++) {
            omp_set_num_threads(1);
            dw_item it = dw_item_at(&c, N, M, C, G, sl);
            dnnl_status_t s = dw_reduce_slice(entries[sl], &dw_threads[omp_get_thread_num()], partial + off[sl], c.chunks,
                                              stride, (char *)dw + (size_t)(it.m0 * row) * dw_esz);
            if (s != dnnl_success) {
#pragma omp critical(dw_failed)
                failed = s;
            }
        }
    }
    if (!st && failed != dnnl_success) st = cpu_dnnl_error(call, "backward convolution (weights)", failed);
    free(entries);
    free(off);
    return st;
}
