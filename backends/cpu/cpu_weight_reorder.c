/* Convolution weights from their plain rows into oneDNN's blocked layouts, by our own loops.
 *
 * A bf16 Conv reorders W on every call (it is a Cast's output in the arena, never cached). Into
 * the layouts of oneDNN's AVX-512 bf16 brgconv kernels (AcdB32a2b and kin: pairs of input channels
 * innermost, the spatial dims outside them), oneDNN 2.6's "jit:uni" reorder moves it at about
 * 3.5 GB/s on this Zen 4 VM: ResNet-18's 512x512x3x3 W takes 1.3 ms on 2 threads, and PyTorch,
 * on the same oneDNN, pays the same. The loops here take 0.24-0.6x of that (bench/weight_reorder.c);
 * elsewhere oneDNN's reorder is faster, and callers keep it (beats_onednn).
 *
 * The loops cover any blocked layout that splits at most two adjacent dims, p and q = p + 1 (O and
 * I, or O/G and I/G after a group dim, or G alone for a depthwise W), into blocks of ob and ib with
 * any inner order (AcdB32a2b, ABcd8a16b2a, ABcd16b16a, Acdb16a, Goihw16g, ...), every other dim
 * whole, from a row-major dense plain side. For one element
 *   plain   = g P_g + p P_p + q P_q + r                    (r: the trailing dims' index, a run)
 *   blocked = g B_g + (p / ob) B_p + (q / ib) B_q + inner(p % ob, q % ib) + rest[r]
 * and the loops walk one (g, p / ob, q / ib) block at a time, in the blocked side's order: for each
 * trailing index, the block's ob ib inner positions are one contiguous run of stores, gathered from
 * ob rows of the plain side. Both sides of a block stay in L1 (a 32x2 block of a 3x3 W: 9 runs of
 * 64 elements, gathered from 32 rows of 18).
 *
 * Tried and slower: GCC's AVX-512 gathers for the inner loop (2x the time on Zen 4, so the file is
 * built with -fno-tree-vectorize); walking the plain side in order (streamed loads, scattered
 * stores); the reverse direction for dW (f32 blocked -> bf16 rows: 1.4-8x oneDNN's time).
 *
 * A permutation with one conversion per element: the same bits as oneDNN's reorder, for every
 * layout the loops cover (tests/test_cpu_weight_reorder.c), for any thread count.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_dnnl.h"
#include "core/half.h"

/* Inner-block positions and trailing-dim runs beyond these are left to oneDNN. */
#define WR_MAX_INNER 4096
#define WR_MAX_REST 65536

struct cpu_weight_reorder {
    dnnl_data_type_t plain_dt, blocked_dt;
    int64_t G, P, Q, R;       /* the group dim (1 when none), the split dims, the run length */
    int64_t ob, ib;           /* block sizes of p and q */
    int64_t pg, pp, pq;       /* plain strides of g, p, q (r has stride 1) */
    int64_t bg, bp, bq;       /* blocked strides of g and of p's and q's outer blocks */
    bool padded;              /* the blocked layout pads p or q up to whole blocks (zeroed) */
    size_t blocked_bytes;
    int64_t *plain_off;       /* [F = ob ib]: plain offset of inner position f from its block's start */
    int32_t *fp, *fq;         /* [F]: the (p % ob, q % ib) of inner position f */
    int64_t *rest;            /* [R]: blocked offset of the trailing dims' index r */
};

static bool dense_row_major(const dnnl_memory_desc_t *md) {
    if (md->format_kind != dnnl_blocked || md->format_desc.blocking.inner_nblks || md->offset0 || md->extra.flags)
        return false;
    int64_t s = 1;
    for (int d = md->ndims - 1; d >= 0; d--) {
        if (md->padded_dims[d] != md->dims[d] || md->padded_offsets[d] || md->format_desc.blocking.strides[d] != s)
            return false;
        s *= md->dims[d];
    }
    return true;
}

static bool supported_type(dnnl_data_type_t t) { return t == dnnl_f32 || t == dnnl_bf16; }

/* The first blocked dim of b, or -1 when its inner blocks are not on one dim or two adjacent ones. */
static int split_dim(const dnnl_memory_desc_t *b) {
    const dnnl_blocking_desc_t *bk = &b->format_desc.blocking;
    if (bk->inner_nblks < 1) return -1;
    int lo = DNNL_MAX_NDIMS, hi = -1;
    for (int k = 0; k < bk->inner_nblks; k++) {
        int d = (int)bk->inner_idxs[k];
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
    }
    return hi - lo <= 1 && lo <= 1 && lo + 1 < b->ndims ? lo : -1;
}

/* For each physical offset f within an inner block, whose digits (the inner blocks, last fastest)
 * give pi and qi (each dim's digits read most significant first): pi, qi and their plain offset. */
static void fill_inner(cpu_weight_reorder *r, const dnnl_blocking_desc_t *bk, int p) {
    int64_t total = r->ob * r->ib;
    for (int64_t f = 0; f < total; f++) {
        int64_t rem = f, pi = 0, qi = 0, pm = 1, qm = 1;
        for (int k = bk->inner_nblks - 1; k >= 0; k--) {
            int64_t digit = rem % bk->inner_blks[k];
            rem /= bk->inner_blks[k];
            if (bk->inner_idxs[k] == p) {
                pi += digit * pm;
                pm *= bk->inner_blks[k];
            } else {
                qi += digit * qm;
                qm *= bk->inner_blks[k];
            }
        }
        r->fp[f] = (int32_t)pi;
        r->fq[f] = (int32_t)qi;
        r->plain_off[f] = pi * r->pp + qi * r->pq;
    }
}

/* rest[r]: the blocked offset of the trailing dims (after q) at row-major index r. */
static void fill_rest(cpu_weight_reorder *r, const dnnl_memory_desc_t *b, int first) {
    for (int64_t i = 0; i < r->R; i++) {
        int64_t rem = i, off = 0;
        for (int d = b->ndims - 1; d >= first; d--) {
            off += (rem % b->dims[d]) * b->format_desc.blocking.strides[d];
            rem /= b->dims[d];
        }
        r->rest[i] = off;
    }
}

/* Where the loops beat oneDNN's reorder (bench/weight_reorder.c on Zen 4, 2 threads, two runs):
 * bf16 into VNNI pairs of input channels (ib 2) with the spatial dims outside the pairs, as
 * brgconv's AcdB32a2b, on 3x3 kernels: 0.24-0.6x oneDNN's time. Not taken: 1x1 kernels (0.8-1.7x),
 * a padded layout (the 7x7 stem's 3 input channels: 0.7-1.4x, a few microseconds), bf16
 * ABcd8a16b2a for backward data (1.4-2.7x) and every f32 layout (1.1-3.3x), where oneDNN's
 * reorder runs at 5-20 GB/s against 3.5 GB/s into AcdB32a2b. */
static bool beats_onednn(const cpu_weight_reorder *r) {
    return r->plain_dt == dnnl_bf16 && r->blocked_dt == dnnl_bf16 && r->ib == 2 && r->R > 1 && r->rest[1] > r->bq &&
           !r->padded;
}

cpu_weight_reorder *cpu_weight_reorder_new(const dnnl_memory_desc_t *plain, const dnnl_memory_desc_t *blocked,
                                           bool only_faster) {
    const char *env = getenv("SCORCH_CPU_WEIGHT_REORDER");
    if (only_faster && env && !strcmp(env, "dnnl")) return NULL;
    if (!dense_row_major(plain) || blocked->format_kind != dnnl_blocked || plain->ndims != blocked->ndims ||
        blocked->offset0 || blocked->extra.flags || !supported_type(plain->data_type) ||
        !supported_type(blocked->data_type))
        return NULL;
    for (int d = 0; d < plain->ndims; d++)
        if (plain->dims[d] != blocked->dims[d] || blocked->padded_offsets[d]) return NULL;
    int p = split_dim(blocked);
    if (p < 0) return NULL;
    const dnnl_blocking_desc_t *bk = &blocked->format_desc.blocking;
    cpu_weight_reorder *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->plain_dt = plain->data_type;
    r->blocked_dt = blocked->data_type;
    r->ob = r->ib = 1;
    for (int k = 0; k < bk->inner_nblks; k++) {
        if (bk->inner_idxs[k] == p) r->ob *= bk->inner_blks[k];
        else r->ib *= bk->inner_blks[k];
    }
    const int64_t *ps = plain->format_desc.blocking.strides;
    r->G = p == 1 ? plain->dims[0] : 1;
    r->pg = p == 1 ? ps[0] : 0;
    r->bg = p == 1 ? bk->strides[0] : 0;
    r->P = plain->dims[p];
    r->Q = plain->dims[p + 1];
    r->pp = ps[p];
    r->pq = ps[p + 1];
    r->bp = bk->strides[p];
    r->bq = bk->strides[p + 1];
    r->R = 1;
    for (int d = p + 2; d < plain->ndims; d++) r->R *= plain->dims[d];
    r->padded = blocked->padded_dims[p] != r->P || blocked->padded_dims[p + 1] != r->Q;
    r->blocked_bytes = dnnl_memory_desc_get_size(blocked);
    bool fits = r->ob * r->ib <= WR_MAX_INNER && r->R <= WR_MAX_REST;
    size_t F = (size_t)(r->ob * r->ib);
    r->plain_off = fits ? malloc(sizeof *r->plain_off * F) : NULL;
    r->fp = fits ? malloc(sizeof *r->fp * F) : NULL;
    r->fq = fits ? malloc(sizeof *r->fq * F) : NULL;
    r->rest = fits ? malloc(sizeof *r->rest * (size_t)r->R) : NULL;
    if (!r->plain_off || !r->fp || !r->fq || !r->rest) {
        cpu_weight_reorder_free(r);
        return NULL;
    }
    fill_inner(r, bk, p);
    fill_rest(r, blocked, p + 2);
    if (only_faster && !beats_onednn(r)) {
        cpu_weight_reorder_free(r);
        return NULL;
    }
    return r;
}

void cpu_weight_reorder_free(cpu_weight_reorder *r) {
    if (!r) return;
    free(r->plain_off);
    free(r->fp);
    free(r->fq);
    free(r->rest);
    free(r);
}

/* One block (g, pb, qb): its plain and blocked offsets, and how many of its ob rows p and ib
 * columns q are inside the tensor (fewer at a padded edge). Blocks run in the blocked side's order,
 * and one block's two sides stay in L1: a 32x2 block of a 3x3 W is 9 runs of 64 elements on one
 * side, 32 rows of 18 on the other. */
typedef struct {
    int64_t plain, blocked;
    int64_t np, nq;
} wr_block;

static int64_t n_blocks(const cpu_weight_reorder *r) {
    return r->G * ((r->P + r->ob - 1) / r->ob) * ((r->Q + r->ib - 1) / r->ib);
}

static wr_block block_at(const cpu_weight_reorder *r, int64_t i) {
    int64_t nqb = (r->Q + r->ib - 1) / r->ib, npb = (r->P + r->ob - 1) / r->ob;
    int64_t qb = i % nqb, pb = i / nqb % npb, g = i / nqb / npb;
    wr_block b;
    b.plain = g * r->pg + pb * r->ob * r->pp + qb * r->ib * r->pq;
    b.blocked = g * r->bg + pb * r->bp + qb * r->bq;
    b.np = r->P - pb * r->ob < r->ob ? r->P - pb * r->ob : r->ob;
    b.nq = r->Q - qb * r->ib < r->ib ? r->Q - qb * r->ib : r->ib;
    return b;
}

static inline bool inside(const cpu_weight_reorder *r, const wr_block *b, int64_t f) {
    return r->fp[f] < b->np && r->fq[f] < b->nq;
}

/* plain -> blocked: for each trailing index k, the block's F = ob ib inner positions are one run of
 * the blocked side. A position outside the tensor is padding, left as zeroed. */
#define WR_TO_BLOCKED(name, S, D, cvt)                                                                            \
    static void name(const cpu_weight_reorder *r, const void *src, void *dst, const wr_block *b) {              \
        const S *s = (const S *)src + b->plain;                                                                 \
        D *d = (D *)dst + b->blocked;                                                                           \
        const int64_t F = r->ob * r->ib, *off = r->plain_off;                                                  \
        bool full = b->np == r->ob && b->nq == r->ib;                                                           \
        for (int64_t k = 0; k < r->R; k++) {                                                                    \
            D *dk = d + r->rest[k];                                                                             \
            const S *sk = s + k;                                                                                \
            if (full)                                                                                           \
                for (int64_t f = 0; f < F; f++) dk[f] = cvt(sk[off[f]]);                                        \
            else                                                                                                \
                for (int64_t f = 0; f < F; f++)                                                                 \
                    if (inside(r, b, f)) dk[f] = cvt(sk[off[f]]);                                               \
        }                                                                                                       \
    }
#define WR_SAME(x) (x)
WR_TO_BLOCKED(block_to_blocked_h, uint16_t, uint16_t, WR_SAME)
WR_TO_BLOCKED(block_to_blocked_f, float, float, WR_SAME)
WR_TO_BLOCKED(block_to_blocked_fh, float, uint16_t, sc_f32_to_bf16)
WR_TO_BLOCKED(block_to_blocked_hf, uint16_t, float, sc_bf16_to_f32)

void cpu_weight_reorder_to_blocked(const cpu_weight_reorder *r, const void *plain, void *blocked, bool parallel) {
    if (r->padded) memset(blocked, 0, r->blocked_bytes);
    void (*run)(const cpu_weight_reorder *, const void *, void *, const wr_block *) =
        r->plain_dt == dnnl_bf16 ? (r->blocked_dt == dnnl_bf16 ? block_to_blocked_h : block_to_blocked_hf)
                                 : (r->blocked_dt == dnnl_bf16 ? block_to_blocked_fh : block_to_blocked_f);
    int64_t nb = n_blocks(r);
#pragma omp parallel for schedule(static) if (parallel && nb > 1)
    for (int64_t i = 0; i < nb; i++) {
        wr_block b = block_at(r, i);
        run(r, plain, blocked, &b);
    }
}
