/* Broadcast stride computation and the row-walking driver (contract in cpu_broadcast.h). */
#include "backends/cpu/cpu_broadcast.h"
#include "core/half.h"

#include <omp.h>
#include <string.h>

bool cpu_bcast_init(cpu_bcast *b, const sc_desc *out, const sc_desc *const *in, int n_in) {
    memset(b, 0, sizeof *b);
    b->n_in = n_in;
    int64_t dims[SC_MAX_RANK], st[CPU_BCAST_MAX_IN][SC_MAX_RANK];
    int r = out->rank;
    for (int k = 0; k < n_in; k++) {
        const sc_desc *d = in[k];
        if (d->rank > r) return false;
        int64_t stride = 1;
        for (int i = r - 1; i >= 0; i--) {
            int j = i - (r - d->rank);
            int64_t dim = j >= 0 ? d->dims[j] : 1;
            if (dim != 1 && dim != out->dims[i]) return false;
            st[k][i] = dim == 1 ? 0 : stride;
            stride *= dim;
        }
    }
    /* Drop size-1 output dims, then merge dims contiguous in every input. */
    int m = 0;
    for (int i = 0; i < r; i++) {
        if (out->dims[i] == 1) continue;
        bool merge = m > 0;
        for (int k = 0; k < n_in && merge; k++)
            merge = st[k][m - 1] == st[k][i] * out->dims[i];
        if (merge) {
            dims[m - 1] *= out->dims[i];
            for (int k = 0; k < n_in; k++) st[k][m - 1] = st[k][i];
        } else {
            dims[m] = out->dims[i];
            for (int k = 0; k < n_in; k++) st[k][m] = st[k][i];
            m++;
        }
    }
    if (m == 0) {
        dims[0] = 1;
        for (int k = 0; k < n_in; k++) st[k][0] = 0;
        m = 1;
    }
    b->rank = m;
    b->numel = 1;
    for (int i = 0; i < m; i++) {
        b->dims[i] = dims[i];
        b->numel *= dims[i];
        for (int k = 0; k < n_in; k++) b->strides[k][i] = st[k][i];
    }
    return true;
}

/* Output elements [lo, hi): position an odometer at lo, then hand out innermost-dim runs. */
static void bcast_range(const cpu_bcast *b, cpu_bcast_row_fn fn, const void *ctx, char *out, size_t oes,
                        const void *const *in, const size_t *ies, int64_t lo, int64_t hi) {
    int r = b->rank;
    int64_t idx[SC_MAX_RANK], off[CPU_BCAST_MAX_IN] = {0};
    int64_t rem = lo;
    for (int i = r - 1; i >= 0; i--) {
        idx[i] = rem % b->dims[i];
        rem /= b->dims[i];
        for (int k = 0; k < b->n_in; k++) off[k] += idx[i] * b->strides[k][i];
    }
    int64_t inner = b->dims[r - 1], s[CPU_BCAST_MAX_IN];
    for (int k = 0; k < b->n_in; k++) s[k] = b->strides[k][r - 1];
    const void *p[CPU_BCAST_MAX_IN];
    int64_t pos = lo;
    while (pos < hi) {
        int64_t n = inner - idx[r - 1];
        if (n > hi - pos) n = hi - pos;
        for (int k = 0; k < b->n_in; k++) p[k] = (const char *)in[k] + off[k] * (int64_t)ies[k];
        fn(ctx, out + pos * (int64_t)oes, p, s, n);
        pos += n;
        if (pos >= hi) break;
        /* The run ended at the end of the innermost dim: carry into the outer dims. */
        for (int k = 0; k < b->n_in; k++) off[k] -= idx[r - 1] * s[k];
        idx[r - 1] = 0;
        for (int i = r - 2; i >= 0; i--) {
            idx[i]++;
            for (int k = 0; k < b->n_in; k++) off[k] += b->strides[k][i];
            if (idx[i] < b->dims[i]) break;
            for (int k = 0; k < b->n_in; k++) off[k] -= idx[i] * b->strides[k][i];
            idx[i] = 0;
        }
    }
}

#define CPU_BCAST_BLOCK 16384

void cpu_bcast_run(const cpu_bcast *b, cpu_bcast_row_fn fn, const void *ctx, void *out, size_t out_esize,
                   const void *const *in, const size_t *in_esize) {
    int64_t n = b->numel;
    if (n == 0) return;
    if (n < CPU_PAR_MIN || omp_get_max_threads() == 1) {
        bcast_range(b, fn, ctx, out, out_esize, in, in_esize, 0, n);
        return;
    }
    /* Threads take blocks of CPU_BCAST_BLOCK elements (a multiple of 64, so writes stay off shared
     * lines). A row function's vector body and scalar tail then cover the same elements for any
     * thread count, so the bits do not depend on it. */
#pragma omp parallel for schedule(static)
    for (int64_t lo = 0; lo < n; lo += CPU_BCAST_BLOCK)
        bcast_range(b, fn, ctx, out, out_esize, in, in_esize, lo, lo + CPU_BCAST_BLOCK < n ? lo + CPU_BCAST_BLOCK : n);
}

/* Values per block: three float buffers of this size live on the calling thread's stack. */
#define HALF_ROW_BLOCK 512

static void half_widen(sc_dtype t, float *dst, const uint16_t *src, int64_t n) {
    if (t == SC_F16) sc_f16_to_f32_n(dst, src, n);
    else sc_bf16_to_f32_n(dst, src, n);
}

void cpu_half_arith_row(sc_dtype t, cpu_bcast_row_fn f32_row, const void *ctx, void *o, const void *const *in,
                        const int64_t *s, int64_t n, int n_in) {
    float buf[CPU_BCAST_MAX_IN][HALF_ROW_BLOCK], out[HALF_ROW_BLOCK];
    const void *fin[CPU_BCAST_MAX_IN];
    for (int k = 0; k < n_in; k++) {
        fin[k] = buf[k];
        if (!s[k]) half_widen(t, buf[k], in[k], 1); /* a broadcast scalar: once for the row */
    }
    for (int64_t lo = 0; lo < n; lo += HALF_ROW_BLOCK) {
        int64_t len = n - lo < HALF_ROW_BLOCK ? n - lo : HALF_ROW_BLOCK;
        for (int k = 0; k < n_in; k++)
            if (s[k]) half_widen(t, buf[k], (const uint16_t *)in[k] + lo, len);
        f32_row(ctx, out, fin, s, len);
        uint16_t *dst = (uint16_t *)o + lo;
        if (t == SC_F16) sc_f32_to_f16_n(dst, out, len);
        else sc_f32_to_bf16_n(dst, out, len);
    }
}
