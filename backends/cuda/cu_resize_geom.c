/* Host half of Resize / ResizeGrad on the CUDA backend (contract in cu_resize.h): reads roi,
 * scales and sizes back from the device, builds the CPU's tap tables (cpu_resize_geom.c, so the
 * coordinate maths exists once) and copies them into the scratch workspace on the compute stream.
 * The copy is from pageable memory: cudaMemcpyAsync stages it before returning, so the host tables
 * can be freed at once.
 */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_broadcast.h"
#include "backends/cpu/cpu_resize_geom.h"
#include "backends/cuda/cu_resize.h"

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

/* Copies the table block to the device and points t at it. */
static sc_status tables_upload(const cu_call *c, const resize_tables *tb, const sc_desc *y, cu_resize_taps *t) {
    int64_t total = 0;
    for (int i = 0; i < y->rank; i++) total += y->dims[i];
    int64_t bytes = total * (int64_t)(2 * sizeof(int64_t) + sizeof(double));
    void *dev = NULL;
    SC_TRY(cu_scratch(c, bytes > 0 ? bytes : 1, &dev));
    if (bytes > 0) CU_CHECK(c, cudaMemcpyAsync(dev, tb->block, (size_t)bytes, cudaMemcpyHostToDevice, c->ctx->stream));
    const char *hb = tb->block;
    char *db = dev;
    for (int i = 0; i < y->rank; i++) {
        t->off0[i] = (const int64_t *)(db + ((const char *)tb->off0[i] - hb));
        t->off1[i] = (const int64_t *)(db + ((const char *)tb->off1[i] - hb));
        t->w1[i] = (const double *)(db + ((const char *)tb->w1[i] - hb));
        if (tb->active[i]) t->active |= 1u << i;
    }
    return SC_OK;
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
    for (int i = 0; i < y->rank; i++) t->ydims[i] = y->dims[i];
    double ev = c->node->attrs->resize.extrapolation_value;
    t->extrap = ev;
    /* as cpu_resize: a dtype cpu_convert does not know extrapolates with zero bytes */
    if (!linear) cpu_convert(&t->extrap_bits, x->dtype, &ev, SC_F64, 1);
    sc_status st = tables_upload(c, &tb, y, t);
    resize_tables_free(&tb);
    return st;
}
