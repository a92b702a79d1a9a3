/* Data movement that only rearranges elements, dtype-agnostic (copies by element size):
 * Identity / Reshape / Flatten / Squeeze / Unsqueeze (a plain copy: the output desc already holds
 * the new shape), Transpose, Concat, Split and Expand (ONNX specs, opset 13+).
 *
 * Transpose first drops size-1 dims and merges runs of axes that stay adjacent and in order, so
 * NCHW->NHWC becomes a batched 2-D transpose [N, C, HW] -> [N, HW, C] and (0,2,1,3) on [B,T,H,D]
 * becomes contiguous rows of D. Rows that stay innermost are memcpy'd; otherwise the output's
 * innermost axis and the input's innermost axis are walked in 32x32 tiles so both the reads and
 * the writes stay within a few cache lines.
 */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_kernels.h"

sc_status cpu_copy_input(const sc_kernel_call *c) {
    int64_t nb = sc_desc_bytes(&c->in[0].desc);
    if (nb != sc_desc_bytes(&c->out[0].desc)) {
        char a[96], b[96];
        return cpu_errorf(c, "output %s has a different size from input %s", sc_desc_str(&c->out[0].desc, b, sizeof b),
                          sc_desc_str(&c->in[0].desc, a, sizeof a));
    }
    if (c->out[0].data != c->in[0].data) cpu_copy(c->out[0].data, c->in[0].data, nb); /* one block: sc_op_is_view */
    return SC_OK;
}

/* ---- Transpose ---- */

#define TILE 32

typedef struct {
    int rank;
    int64_t od[SC_MAX_RANK]; /* output dims */
    int64_t is[SC_MAX_RANK]; /* input stride (elements) of each output axis */
    int64_t os[SC_MAX_RANK]; /* output stride of each output axis */
} perm_plan;

static void perm_plan_build(perm_plan *p, const sc_desc *x, const int64_t *perm) {
    /* Input axes that survive (size > 1), renumbered. */
    int newid[SC_MAX_RANK], n = 0;
    int64_t dims[SC_MAX_RANK];
    for (int i = 0; i < x->rank; i++) {
        newid[i] = x->dims[i] == 1 ? -1 : n;
        if (x->dims[i] != 1) dims[n++] = x->dims[i];
    }
    int P[SC_MAX_RANK], m = 0;
    for (int i = 0; i < x->rank; i++)
        if (newid[perm[i]] >= 0) P[m++] = newid[perm[i]];
    /* Group output axes whose input axes are consecutive; the group's input start orders them. */
    int gstart[SC_MAX_RANK], glen[SC_MAX_RANK], ng = 0;
    for (int i = 0; i < m; i++) {
        if (ng > 0 && P[i] == gstart[ng - 1] + glen[ng - 1]) {
            glen[ng - 1]++;
        } else {
            gstart[ng] = P[i];
            glen[ng] = 1;
            ng++;
        }
    }
    int64_t gdim[SC_MAX_RANK], gin_stride[SC_MAX_RANK];
    for (int g = 0; g < ng; g++) {
        gdim[g] = 1;
        for (int k = 0; k < glen[g]; k++) gdim[g] *= dims[gstart[g] + k];
        int64_t s = 1;
        for (int k = gstart[g] + glen[g]; k < n; k++) s *= dims[k];
        gin_stride[g] = s;
    }
    p->rank = ng;
    int64_t s = 1;
    for (int g = ng - 1; g >= 0; g--) {
        p->od[g] = gdim[g];
        p->is[g] = gin_stride[g];
        p->os[g] = s;
        s *= gdim[g];
    }
}

/* Input and output offsets of the flat index f over the output axes listed in ax[0..na). */
static void outer_offsets(const perm_plan *p, const int *ax, int na, int64_t f, int64_t *in_off, int64_t *out_off) {
    int64_t io = 0, oo = 0;
    for (int k = na - 1; k >= 0; k--) {
        int a = ax[k];
        int64_t i = f % p->od[a];
        f /= p->od[a];
        io += i * p->is[a];
        oo += i * p->os[a];
    }
    *in_off = io;
    *out_off = oo;
}

#define TRANSPOSE_TILED(NAME, T)                                                                   \
    static void NAME(const perm_plan *p, const void *x_, void *y_, int b) {                        \
        const T *x = x_;                                                                           \
        T *y = y_;                                                                                 \
        int a = p->rank - 1, ax[SC_MAX_RANK], na = 0;                                              \
        for (int i = 0; i < a; i++)                                                                \
            if (i != b) ax[na++] = i;                                                              \
        int64_t outer = 1;                                                                         \
        for (int k = 0; k < na; k++) outer *= p->od[ax[k]];                                        \
        int64_t A = p->od[a], B = p->od[b], sa = p->is[a], ob = p->os[b];                          \
        int64_t nbb = (B + TILE - 1) / TILE, items = outer * nbb;                                  \
        int par = outer * A * B >= CPU_PAR_MIN && items > 1;                                       \
        _Pragma("omp parallel for if(par)") for (int64_t it = 0; it < items; it++) {               \
            int64_t io, oo;                                                                        \
            outer_offsets(p, ax, na, it / nbb, &io, &oo);                                          \
            int64_t i0 = (it % nbb) * TILE, i1 = i0 + TILE < B ? i0 + TILE : B;                    \
            for (int64_t j0 = 0; j0 < A; j0 += TILE) {                                             \
                int64_t j1 = j0 + TILE < A ? j0 + TILE : A;                                        \
                for (int64_t i = i0; i < i1; i++) {                                                \
                    const T *xr = x + io + i;                                                      \
                    T *yr = y + oo + i * ob;                                                       \
                    for (int64_t j = j0; j < j1; j++) yr[j] = xr[j * sa];                          \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
CPU_BY_SIZE(TRANSPOSE_TILED, transpose)

/* The innermost output axis is also innermost in the input: copy whole rows. */
static void transpose_rows(const perm_plan *p, const char *x, char *y, size_t es) {
    int a = p->rank - 1, ax[SC_MAX_RANK];
    for (int i = 0; i < a; i++) ax[i] = i;
    int64_t outer = 1;
    for (int i = 0; i < a; i++) outer *= p->od[i];
    int64_t row = p->od[a] * (int64_t)es;
    int par = outer * p->od[a] >= CPU_PAR_MIN && outer > 1;
#pragma omp parallel for if (par)
    for (int64_t r = 0; r < outer; r++) {
        int64_t io, oo;
        outer_offsets(p, ax, a, r, &io, &oo);
        memcpy(y + oo * (int64_t)es, x + io * (int64_t)es, (size_t)row);
    }
}

sc_status cpu_transpose(const sc_kernel_call *c) {
    const sc_desc *x = &c->in[0].desc;
    const sc_transpose_attrs *t = &c->node->attrs->transpose;
    int64_t perm[SC_MAX_RANK];
    bool seen[SC_MAX_RANK] = {false};
    if (t->n_perm && t->n_perm != x->rank)
        return cpu_errorf(c, "perm has %d entries for an input of rank %d", t->n_perm, x->rank);
    for (int i = 0; i < x->rank; i++) {
        perm[i] = t->n_perm ? t->perm[i] : x->rank - 1 - i;
        if (perm[i] < 0) perm[i] += x->rank;
        if (perm[i] < 0 || perm[i] >= x->rank || seen[perm[i]])
            return cpu_errorf(c, "perm is not a permutation of 0..%d", x->rank - 1);
        seen[perm[i]] = true;
    }
    size_t es = sc_dtype_size(x->dtype);
    int64_t n = sc_desc_numel(x);
    if (n == 0) return SC_OK;
    perm_plan p;
    perm_plan_build(&p, x, perm);
    if (p.rank <= 1) {
        cpu_copy(c->out[0].data, c->in[0].data, n * (int64_t)es);
        return SC_OK;
    }
    int a = p.rank - 1, b = -1;
    if (p.is[a] == 1) {
        transpose_rows(&p, c->in[0].data, c->out[0].data, es);
        return SC_OK;
    }
    for (int i = 0; i < p.rank; i++)
        if (p.is[i] == 1) b = i;
    SC_ASSERT(b >= 0 && b != a);
    void (*tiled)(const perm_plan *, const void *, void *, int) = CPU_BY_SIZE_PICK(transpose, es);
    if (!tiled) return cpu_errorf(c, "dtype %s not supported", sc_dtype_name(x->dtype));
    tiled(&p, c->in[0].data, c->out[0].data, b);
    return SC_OK;
}

/* ---- Concat / Split: rows of prod(dims[axis:]) elements per input, outer = prod(dims[:axis]) ---- */

static int64_t prod(const int64_t *d, int lo, int hi) {
    int64_t p = 1;
    for (int i = lo; i < hi; i++) p *= d[i];
    return p;
}

/* Shared by Concat (pieces are inputs, whole is the output) and Split (the reverse). */
static void pieces_move(const sc_tensor *whole, const sc_tensor *pieces, int n_pieces, int axis, bool gather) {
    size_t es = sc_dtype_size(whole->desc.dtype);
    int rank = whole->desc.rank;
    int64_t outer = prod(whole->desc.dims, 0, axis);
    int64_t wrow = prod(whole->desc.dims, axis, rank) * (int64_t)es;
    int par = outer * wrow >= 4 * CPU_PAR_MIN && outer > 1;
#pragma omp parallel for if (par)
    for (int64_t o = 0; o < outer; o++) {
        int64_t off = 0;
        for (int k = 0; k < n_pieces; k++) {
            int64_t prow = prod(pieces[k].desc.dims, axis, rank) * (int64_t)es;
            char *w = (char *)whole->data + o * wrow + off;
            if (prow && pieces[k].data) {
                char *pc = (char *)pieces[k].data + o * prow;
                if (gather) memcpy(w, pc, (size_t)prow);
                else memcpy(pc, w, (size_t)prow);
            }
            off += prow;
        }
    }
}

/* Every piece must match the whole except along axis, where the sizes must add up. */
static sc_status pieces_check(const sc_kernel_call *c, const sc_tensor *whole, const sc_tensor *pieces, int n,
                              int64_t axis_raw, int *axis) {
    int rank = whole->desc.rank;
    int64_t a = axis_raw < 0 ? axis_raw + rank : axis_raw;
    if (a < 0 || a >= rank) return cpu_errorf(c, "axis %lld out of range for rank %d", (long long)axis_raw, rank);
    int64_t sum = 0;
    for (int k = 0; k < n; k++) {
        const sc_desc *d = &pieces[k].desc;
        bool ok = d->rank == rank && d->dtype == whole->desc.dtype;
        for (int i = 0; ok && i < rank; i++) ok = i == a || d->dims[i] == whole->desc.dims[i];
        if (!ok) {
            char bw[96], bp[96];
            return cpu_errorf(c, "piece %d %s does not fit %s along axis %lld", k, sc_desc_str(d, bp, sizeof bp),
                              sc_desc_str(&whole->desc, bw, sizeof bw), (long long)a);
        }
        sum += d->dims[a];
    }
    if (sum != whole->desc.dims[a])
        return cpu_errorf(c, "sizes along axis %lld add up to %lld, expected %lld", (long long)a, (long long)sum,
                          (long long)whole->desc.dims[a]);
    *axis = (int)a;
    return SC_OK;
}

/* With attrs.axis.nhwc (graph/pass_layout.c) every buffer is channels-last, so the pieces join
 * along the buffer dim that holds the logical axis: the last one for the channels (axis 1). */
sc_status cpu_concat(const sc_kernel_call *c) {
    int axis;
    SC_TRY(pieces_check(c, &c->out[0], c->in, c->n_in, c->node->attrs->axis.axis, &axis));
    if (!c->node->attrs->axis.nhwc) {
        pieces_move(&c->out[0], c->in, c->n_in, axis, true);
        return SC_OK;
    }
    int rank = c->out[0].desc.rank;
    if (rank < 3) return cpu_errorf(c, "a channels-last Concat needs rank 3 to 5, got %d", rank);
    sc_tensor whole = c->out[0], *pieces = malloc(sizeof *pieces * (size_t)c->n_in);
    if (!pieces) return cpu_errorf(c, "out of memory for %d pieces", c->n_in);
    cpu_channels_last_view(&whole.desc, rank);
    for (int k = 0; k < c->n_in; k++) {
        pieces[k] = c->in[k];
        cpu_channels_last_view(&pieces[k].desc, rank);
    }
    pieces_move(&whole, pieces, c->n_in, axis == 0 ? 0 : axis == 1 ? rank - 1 : axis - 1, true);
    free(pieces);
    return SC_OK;
}

/* The output descs already hold the split sizes (from the split input or equal parts). */
sc_status cpu_split(const sc_kernel_call *c) {
    int axis;
    SC_TRY(pieces_check(c, &c->in[0], c->out, c->n_out, c->node->attrs->axis.axis, &axis));
    pieces_move(&c->in[0], c->out, c->n_out, axis, false);
    return SC_OK;
}

/* ---- Expand: broadcast the input to the output's shape ---- */

#define EXPAND_ROW(NAME, T)                                                                        \
    static void NAME(const void *ctx, void *o_, const void *const *in, const int64_t *s, int64_t n) { \
        (void)ctx;                                                                                 \
        T *o = o_;                                                                                 \
        const T *x = in[0];                                                                        \
        if (s[0]) {                                                                                \
            memcpy(o, x, (size_t)n * sizeof(T));                                                   \
        } else {                                                                                   \
            T v = x[0];                                                                            \
            for (int64_t i = 0; i < n; i++) o[i] = v;                                              \
        }                                                                                          \
    }
CPU_BY_SIZE(EXPAND_ROW, expand)

sc_status cpu_expand(const sc_kernel_call *c) {
    const sc_desc *d[1] = {&c->in[0].desc};
    cpu_bcast bc;
    if (!cpu_bcast_init(&bc, &c->out[0].desc, d, 1)) {
        char a[96], b[96];
        return cpu_errorf(c, "input %s cannot be expanded to %s", sc_desc_str(d[0], a, sizeof a),
                          sc_desc_str(&c->out[0].desc, b, sizeof b));
    }
    size_t es = sc_dtype_size(d[0]->dtype);
    cpu_bcast_row_fn fn = CPU_BY_SIZE_PICK(expand, es);
    if (!fn) return cpu_errorf(c, "dtype %s not supported", sc_dtype_name(d[0]->dtype));
    const void *p[1] = {c->in[0].data};
    cpu_bcast_run(&bc, fn, NULL, c->out[0].data, es, p, &es);
    return SC_OK;
}
