/* Host half of Resize / ResizeGrad on the CUDA backend (contract in cu_nn_resize.h): reads roi,
 * scales and sizes back from the device, builds the CPU's tap tables (cpu_nn_resize_geom.c, so the
 * coordinate maths exists once), for the gradient inverts them per axis (X index -> the outputs
 * reading it), and copies the tables into the scratch workspace on the compute stream.
 * The copy is from pageable memory: cudaMemcpyAsync stages it before returning, so the host tables
 * can be freed at once.
 */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_nn_resize_geom.h"
#include "backends/cuda/cu_nn_resize.h"

/* Host copy of one small input: roi, scales or sizes (at most 2 values per axis). */
typedef struct {
    sc_tensor t;
    unsigned char buf[2 * SC_MAX_RANK * sizeof(double)];
} host_input;

/* Input i read back when given (non-NULL data) and, unless empty_ok, non-empty; else *p = NULL.
 * The forward counts an empty roi as given (tf_crop_and_resize then rejects it), like cpu_resize. */
static sc_status input_read(const cu_call *c, int i, bool empty_ok, host_input *h, const sc_tensor **p) {
    *p = NULL;
    if (i >= c->n_in || !c->in[i].data) return SC_OK;
    int64_t n = sc_desc_numel(&c->in[i].desc);
    if (n == 0 && !empty_ok) return SC_OK;
    h->t.desc = c->in[i].desc;
    h->t.data = h->buf;
    SC_TRY(cu_read_bytes(c, i, h->buf, (int64_t)sizeof h->buf));
    *p = &h->t;
    return SC_OK;
}

/* Device address of host pointer p into block hb, uploaded at db. */
static const void *rebase(const void *p, const void *hb, void *db) {
    return (const char *)db + ((const char *)p - (const char *)hb);
}

/* Copies the host block hb (bytes long) into the scratch workspace, at *db. */
static sc_status block_upload(const cu_call *c, const void *hb, int64_t bytes, void **db) {
    SC_TRY(cu_scratch(c, bytes > 0 ? bytes : 1, db));
    if (bytes > 0) CU_CHECK(c, cudaMemcpyAsync(*db, hb, (size_t)bytes, cudaMemcpyHostToDevice, c->ctx->stream));
    return SC_OK;
}

/* Forward: the tables as resize_tables_build laid them out. */
static sc_status forward_upload(const cu_call *c, const resize_tables *tb, const sc_desc *y, cu_resize_taps *t) {
    int64_t total = 0;
    for (int i = 0; i < y->rank; i++) total += y->dims[i];
    void *db = NULL;
    SC_TRY(block_upload(c, tb->block, total * (int64_t)(2 * sizeof(int64_t) + sizeof(double)), &db));
    for (int i = 0; i < y->rank; i++) {
        t->off0[i] = rebase(tb->off0[i], tb->block, db);
        t->off1[i] = rebase(tb->off1[i], tb->block, db);
        t->w1[i] = rebase(tb->w1[i], tb->block, db);
    }
    return SC_OK;
}

/* The X indices along axis i (element stride `stride` in X) that output index o passes gradient
 * to, and their factors; returns how many. None where o is extrapolated; both taps where they
 * differ and w1 != 0 (resize_two_taps: cpu_nn_resize_grad.c branches exactly there), with 1 - w1 and
 * w1 computed as resize_corner does; else off0 alone, factor 1 (the CPU leaves the axis out of
 * the product; multiplying by 1 is exact). */
static int grad_taps(const resize_tables *tb, int i, int64_t o, int64_t stride, int64_t p[2], double w[2]) {
    if (tb->off0[i][o] < 0) return 0;
    p[0] = tb->off0[i][o] / stride;
    if (!resize_two_taps(tb, i, o)) {
        w[0] = 1;
        return 1;
    }
    p[1] = tb->off1[i][o] / stride;
    w[0] = 1 - tb->w1[i][o];
    w[1] = tb->w1[i][o];
    return 2;
}

/* Axis i inverted (out outputs, in X indices): for X index p, entries beg[p] .. beg[p + 1] - 1 of
 * os / ws, in increasing o. A counting sort: beg[p + 1] counts p's entries, the prefix sums make
 * beg[p] p's start, the fill (o increasing, so each list comes out sorted) advances beg[p] to p's
 * end, which is p + 1's start, so beg moves back up one place after it. */
static void axis_invert(const resize_tables *tb, int i, int64_t out, int64_t in, int64_t stride, int64_t *beg,
                        int64_t *os, double *ws) {
    int64_t p[2];
    double w[2];
    memset(beg, 0, (size_t)(in + 1) * sizeof *beg);
    for (int64_t o = 0; o < out; o++) {
        int n = grad_taps(tb, i, o, stride, p, w);
        for (int k = 0; k < n; k++) beg[p[k] + 1]++;
    }
    for (int64_t q = 0; q < in; q++) beg[q + 1] += beg[q];
    for (int64_t o = 0; o < out; o++) {
        int n = grad_taps(tb, i, o, stride, p, w);
        for (int k = 0; k < n; k++) {
            int64_t j = beg[p[k]]++;
            os[j] = o;
            ws[j] = w[k];
        }
    }
    memmove(beg + 1, beg, (size_t)in * sizeof *beg);
    beg[0] = 0;
}

/* Gradient: the inverted tables, per axis beg (in + 1), o and w (one entry per (output, tap)),
 * built in one host block and uploaded as one. */
static sc_status inverse_upload(const cu_call *c, const resize_tables *tb, const sc_desc *x, const sc_desc *y,
                                cu_resize_taps *t) {
    int r = x->rank;
    int64_t stride[SC_MAX_RANK], cnt[SC_MAX_RANK], words = 0, s = 1;
    for (int i = r - 1; i >= 0; i--) {
        int64_t p[2];
        double w[2];
        stride[i] = s;
        s *= x->dims[i];
        cnt[i] = 0;
        for (int64_t o = 0; o < y->dims[i]; o++) cnt[i] += grad_taps(tb, i, o, stride[i], p, w);
        words += x->dims[i] + 1 + 2 * cnt[i];
    }
    /* int64_t and double words alike: 8 bytes, so every array stays aligned */
    char *hb = malloc((size_t)(words > 0 ? words : 1) * sizeof(int64_t)), *q = hb;
    if (!hb) return cu_errorf(c, "out of memory for the resize tables");
    int64_t *beg[SC_MAX_RANK], *os[SC_MAX_RANK];
    double *ws[SC_MAX_RANK];
    for (int i = 0; i < r; i++) {
        beg[i] = (int64_t *)q;
        q += (x->dims[i] + 1) * (int64_t)sizeof(int64_t);
        os[i] = (int64_t *)q;
        q += cnt[i] * (int64_t)sizeof(int64_t);
        ws[i] = (double *)q;
        q += cnt[i] * (int64_t)sizeof(double);
        axis_invert(tb, i, y->dims[i], x->dims[i], stride[i], beg[i], os[i], ws[i]);
    }
    void *db = NULL;
    sc_status st = block_upload(c, hb, words * (int64_t)sizeof(int64_t), &db);
    for (int i = 0; i < r && !st; i++) {
        t->inv_beg[i] = rebase(beg[i], hb, db);
        t->inv_o[i] = rebase(os[i], hb, db);
        t->inv_w[i] = rebase(ws[i], hb, db);
    }
    free(hb);
    return st;
}

sc_status cu_resize_taps_get(const cu_call *c, bool grad, bool linear, cu_resize_taps *t) {
    memset(t, 0, sizeof *t);
    int first = grad ? 2 : 1; /* position of roi */
    const sc_desc *x = &c->in[grad ? 1 : 0].desc, *y = grad ? &c->in[0].desc : &c->out[0].desc;
    sc_kernel_call kc = {c->node, c->in, c->n_in, c->out, c->n_out};
    SC_TRY(resize_mode_check(&kc));
    if (y->rank != x->rank) return cu_errorf(c, "rank %d differs from X's rank %d", y->rank, x->rank);
    for (int i = 0; i < x->rank; i++)
        if (x->dims[i] == 0) return cu_errorf(c, "cannot resize an empty input");
    host_input h[3];
    resize_operands op = {.x = x, .y = y};
    SC_TRY(input_read(c, first, !grad, &h[0], &op.roi));
    SC_TRY(input_read(c, first + 1, false, &h[1], &op.scales));
    SC_TRY(input_read(c, first + 2, false, &h[2], &op.sizes));
    resize_tables tb;
    SC_TRY(resize_tables_build(&kc, &op, linear, &tb));
    t->rank = y->rank;
    for (int i = 0; i < y->rank; i++) {
        t->ydims[i] = y->dims[i];
        t->xdims[i] = x->dims[i];
        if (tb.active[i]) t->active |= 1u << i;
    }
    double ev = c->node->attrs->resize.extrapolation_value;
    t->extrap = ev;
    /* as cpu_resize: a dtype cpu_convert does not know extrapolates with zero bytes */
    if (!linear) cpu_convert(&t->extrap_bits, x->dtype, &ev, SC_F64, 1);
    sc_status st = grad ? inverse_upload(c, &tb, x, y, t) : forward_upload(c, &tb, y, t);
    resize_tables_free(&tb);
    return st;
}
