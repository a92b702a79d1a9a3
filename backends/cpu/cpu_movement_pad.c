/* Pad (opset 18: pads, constant_value and axes are inputs) and Trilu (opset 14).
 *
 * Pad: pads = [x1_begin, x2_begin, ..., x1_end, x2_end, ...] over `axes` (all axes when absent);
 * negative pads crop. Output index i on an axis reads input index j = i - begin; outside [0, dim)
 * the mode decides: constant -> constant_value (default 0), edge -> clamp, reflect -> mirror
 * without repeating the edge (period 2 (dim - 1)), wrap -> j mod dim.
 * Trilu: keeps the upper (j - i >= k) or lower (j - i <= k) triangle of the last two dims, zeroing
 * the rest; k is optional input 1 (default 0).
 */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/common/common.h"
#include "backends/cpu/cpu_kernels.h"

sc_status cpu_pad(const sc_kernel_call *c) {
    const sc_desc *x = &c->in[0].desc, *y = &c->out[0].desc;
    sc_pad_mode mode = c->node->attrs->pad.mode;
    int r = x->rank;
    if (c->n_in < 2 || !c->in[1].data) return cpu_errorf(c, "pads input is missing");
    int64_t npads = sc_desc_numel(&c->in[1].desc), axes[SC_MAX_RANK], pads[2 * SC_MAX_RANK];
    int64_t naxes = r;
    if (c->n_in > 3 && c->in[3].data) {
        naxes = sc_desc_numel(&c->in[3].desc);
        if (naxes > r || (c->in[3].desc.dtype != SC_I64 && c->in[3].desc.dtype != SC_I32))
            return cpu_errorf(c, "axes must be an i32/i64 tensor of at most %d entries", r);
        cpu_convert(axes, SC_I64, c->in[3].data, c->in[3].desc.dtype, naxes);
    } else {
        for (int i = 0; i < r; i++) axes[i] = i;
    }
    if (npads != 2 * naxes || (c->in[1].desc.dtype != SC_I64 && c->in[1].desc.dtype != SC_I32))
        return cpu_errorf(c, "pads must be %lld i64 values, got %lld", (long long)(2 * naxes), (long long)npads);
    cpu_convert(pads, SC_I64, c->in[1].data, c->in[1].desc.dtype, npads);
    int64_t begin[SC_MAX_RANK] = {0};
    for (int64_t k = 0; k < naxes; k++) {
        int64_t a = axes[k] < 0 ? axes[k] + r : axes[k];
        if (a < 0 || a >= r) return cpu_errorf(c, "axis %lld out of range for rank %d", (long long)axes[k], r);
        begin[a] = pads[k];
        if (x->dims[a] + pads[k] + pads[k + naxes] != y->dims[a])
            return cpu_errorf(c, "axis %lld: %lld + pads %lld, %lld does not give the output size %lld", (long long)a,
                              (long long)x->dims[a], (long long)pads[k], (long long)pads[k + naxes],
                              (long long)y->dims[a]);
        if (mode != SC_PAD_CONSTANT && x->dims[a] == 0 && y->dims[a] > 0)
            return cpu_errorf(c, "cannot pad an empty axis %lld in this mode", (long long)a);
    }
    size_t es = sc_dtype_size(x->dtype);
    unsigned char value[16] = {0};
    if (c->n_in > 2 && c->in[2].data && sc_desc_numel(&c->in[2].desc) > 0) {
        if (c->in[2].desc.dtype != x->dtype) return cpu_errorf(c, "constant_value dtype differs from data");
        memcpy(value, c->in[2].data, es);
    }
    int64_t outer = 1, inner = r ? y->dims[r - 1] : 1;
    for (int i = 0; i + 1 < r; i++) outer *= y->dims[i];
    int64_t xs[SC_MAX_RANK], s = 1;
    for (int i = r - 1; i >= 0; i--) {
        xs[i] = s;
        s *= x->dims[i];
    }
    const char *src = c->in[0].data;
    char *dst = c->out[0].data;
    int par = outer * inner >= CPU_PAR_MIN && outer > 1;
#pragma omp parallel for if (par)
    for (int64_t row = 0; row < outer; row++) {
        int64_t f = row, off = 0;
        bool constant_row = false;
        for (int i = r - 2; i >= 0; i--) {
            int64_t j = sc_pad_source(f % y->dims[i], begin[i], x->dims[i], mode);
            f /= y->dims[i];
            if (j < 0) constant_row = true;
            else off += j * xs[i];
        }
        char *o = dst + row * inner * (int64_t)es;
        int64_t b0 = r ? begin[r - 1] : 0, xd = r ? x->dims[r - 1] : 1;
        /* output [lo, hi) reads input [lo - b0, hi - b0) in one run; only the edges need the mode */
        int64_t lo = constant_row ? inner : b0 < 0 ? 0 : b0 > inner ? inner : b0;
        int64_t hi = constant_row ? inner : b0 + xd < lo ? lo : b0 + xd > inner ? inner : b0 + xd;
        if (hi > lo) memcpy(o + lo * (int64_t)es, src + (off + lo - b0) * (int64_t)es, (size_t)((hi - lo) * (int64_t)es));
        for (int64_t i = 0; i < inner; i++) {
            if (i == lo) i = hi; /* past the run */
            if (i >= inner) break;
            int64_t j = r ? sc_pad_source(i, b0, xd, mode) : 0;
            const void *from = constant_row || j < 0 ? (const void *)value : (const void *)(src + (off + j) * (int64_t)es);
            memcpy(o + i * (int64_t)es, from, es);
        }
    }
    return SC_OK;
}

sc_status cpu_trilu(const sc_kernel_call *c) {
    const sc_desc *x = &c->in[0].desc;
    if (x->rank < 2) return cpu_errorf(c, "input rank %d, need at least 2", x->rank);
    int64_t k = 0;
    if (c->n_in > 1 && c->in[1].data) {
        if (sc_desc_numel(&c->in[1].desc) != 1 || !cpu_convert(&k, SC_I64, c->in[1].data, c->in[1].desc.dtype, 1))
            return cpu_errorf(c, "k must be an integer scalar");
    }
    bool upper = c->node->attrs->trilu.upper;
    int64_t N = x->dims[x->rank - 2], M = x->dims[x->rank - 1];
    if (N == 0 || M == 0) return SC_OK;
    int64_t batch = sc_desc_numel(x) / (N * M);
    size_t es = sc_dtype_size(x->dtype);
    const char *src = c->in[0].data;
    char *dst = c->out[0].data;
    int64_t rows = batch * N;
    int par = rows * M >= CPU_PAR_MIN && rows > 1;
#pragma omp parallel for if (par)
    for (int64_t rI = 0; rI < rows; rI++) {
        int64_t i = rI % N;
        const char *xr = src + rI * M * (int64_t)es;
        char *yr = dst + rI * M * (int64_t)es;
        /* The kept columns form one interval: [i + k, M) for upper, [0, i + k] for lower. */
        int64_t lo = upper ? i + k : 0, hi = upper ? M : i + k + 1;
        lo = lo < 0 ? 0 : lo > M ? M : lo;
        hi = hi < 0 ? 0 : hi > M ? M : hi;
        if (hi < lo) hi = lo;
        memset(yr, 0, (size_t)(lo * (int64_t)es));
        if (hi > lo) memmove(yr + lo * (int64_t)es, xr + lo * (int64_t)es, (size_t)((hi - lo) * (int64_t)es));
        memset(yr + hi * (int64_t)es, 0, (size_t)((M - hi) * (int64_t)es));
    }
    return SC_OK;
}
