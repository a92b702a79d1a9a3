/* Channels-last kernels of the ops graph/pass_layout.c lets pass such values on: Concat
 * (sc_axis_attrs.nhwc), BatchNormalization in inference form (sc_batch_norm_attrs.nhwc),
 * AveragePool (sc_window_attrs.nhwc_in / nhwc_out) and Add, Sub, Mul (sc_binary_attrs.nhwc). Each runs twice on the CPU backend: on NCHW
 * buffers, and on the same values permuted to (N, D.., C) with its flag set, the output permuted
 * back. Concat, BatchNormalization and the binary ops must give the NCHW bits exactly; AveragePool the generic
 * loop's bits, which the NCHW run takes for 3-D windows, and within rounding of the separable 2-D
 * path otherwise. The NCHW kernels themselves are checked against references in test_cpu_nn.c and
 * test_cpu_movement.c, and the whole rewrite against the unfused graph in test_pass_fuse.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "tests/check.h"

static uint64_t rng_state = 0x1234567887654321ull;

static float urand(void) { /* xorshift64, uniform in [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *random_buffer(const sc_desc *d) {
    int64_t n = sc_desc_numel(d);
    float *p = malloc(sizeof(float) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++) p[i] = urand();
    return p;
}

/* (N, C, S) <-> (N, S, C) for a desc (N, C, D..); to_cl picks the direction. */
static void permute(const sc_desc *d, const float *from, float *to, bool to_cl) {
    int64_t N = d->dims[0], C = d->dims[1], S = sc_desc_numel(d) / (N * C > 0 ? N * C : 1);
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < S; p++) {
                int64_t plain = (n * C + c) * S + p, cl = (n * S + p) * C + c;
                if (to_cl) to[cl] = from[plain];
                else to[plain] = from[cl];
            }
}

typedef struct {
    sc_node node;
    sc_attrs plain, cl; /* the node's attributes without and with the layout flag */
    int ids[8];
    sc_tensor in[8], out;
    bool layout_in[8]; /* inputs stored channels-last in the flagged run */
} layout_case;

static void case_init(layout_case *t, sc_op op, const char *name, int n_in) {
    memset(t, 0, sizeof *t);
    t->node.op = op;
    t->node.name = name;
    t->node.in = t->node.out = t->ids;
    t->node.n_in = n_in;
    t->node.n_out = 1;
}

/* Runs the case both ways; *worst gets the largest difference relative to the largest output,
 * *same whether the bits agree. */
static void case_run(layout_case *t, const char *what, double *worst, bool *same) {
    int64_t ny = sc_desc_numel(&t->out.desc);
    float *ref = malloc(sizeof(float) * (size_t)(ny + 1)), *got = malloc(sizeof(float) * (size_t)(ny + 1));
    float *ycl = malloc(sizeof(float) * (size_t)(ny + 1)), *xcl[8] = {NULL};
    sc_tensor in[8], out = t->out;
    t->node.attrs = &t->plain;
    out.data = ref;
    sc_status st = cpu_run_node(&t->node, t->in, t->node.n_in, &out, 1);
    for (int i = 0; i < t->node.n_in; i++) {
        in[i] = t->in[i];
        if (!t->layout_in[i]) continue;
        xcl[i] = malloc(sizeof(float) * (size_t)(sc_desc_numel(&in[i].desc) + 1));
        permute(&in[i].desc, in[i].data, xcl[i], true);
        in[i].data = xcl[i];
    }
    t->node.attrs = &t->cl;
    out.data = ycl;
    if (!st) st = cpu_run_node(&t->node, in, t->node.n_in, &out, 1);
    CHECK(!st, "%s: %s", what, st ? sc_status_message(st) : "");
    sc_status_free(st);
    permute(&t->out.desc, ycl, got, false);
    double scale = 0;
    for (int64_t i = 0; i < ny; i++) scale = fmax(scale, fabs((double)ref[i]));
    *worst = 0;
    *same = !memcmp(got, ref, sizeof(float) * (size_t)ny);
    for (int64_t i = 0; i < ny; i++) *worst = fmax(*worst, fabs((double)got[i] - ref[i]) / (scale > 0 ? scale : 1));
    for (int i = 0; i < 8; i++) free(xcl[i]);
    free(ref), free(got), free(ycl);
}

static void case_free(layout_case *t) {
    for (int i = 0; i < t->node.n_in; i++) free(t->in[i].data);
}

/* Concat of three pieces along axis (logical, may be negative) of rank-`rank` values. */
static void concat_case(int rank, int64_t axis) {
    static const int64_t base[5] = {2, 7, 5, 6, 3}, sizes[3] = {3, 16, 1};
    layout_case t;
    case_init(&t, SC_OP_CONCAT, "concat", 3);
    int a = (int)(axis < 0 ? axis + rank : axis);
    int64_t dims[5], total = 0;
    for (int k = 0; k < 3; k++) {
        memcpy(dims, base, sizeof dims);
        dims[a] = sizes[k];
        total += sizes[k];
        t.in[k].desc = sc_desc_make(SC_F32, rank, dims);
        t.in[k].data = random_buffer(&t.in[k].desc);
        t.layout_in[k] = true;
    }
    memcpy(dims, base, sizeof dims);
    dims[a] = total;
    t.out.desc = sc_desc_make(SC_F32, rank, dims);
    t.plain.axis.axis = axis;
    t.cl = t.plain;
    t.cl.axis.nhwc = true;
    double worst;
    bool same;
    case_run(&t, "concat", &worst, &same);
    CHECK(same, "channels-last Concat, rank %d, axis %lld: not the NCHW bits (worst %.3g)", rank, (long long)axis, worst);
    case_free(&t);
}

/* Inference BatchNormalization on rank-`rank` values, C = 19, with or without its fused Relu. */
static void batch_norm_case(int rank, bool relu) {
    int64_t dims[5] = {2, 19, 5, 6, 3}, c = 19;
    layout_case t;
    case_init(&t, SC_OP_BATCH_NORM, "batch norm", 5);
    t.in[0].desc = t.out.desc = sc_desc_make(SC_F32, rank, dims);
    t.in[0].data = random_buffer(&t.in[0].desc);
    t.layout_in[0] = true;
    for (int k = 1; k < 5; k++) {
        t.in[k].desc = sc_desc_make(SC_F32, 1, &c);
        t.in[k].data = random_buffer(&t.in[k].desc);
    }
    for (int64_t i = 0; i < c; i++) ((float *)t.in[4].data)[i] += 1.5f; /* variances > 0 */
    t.plain.batch_norm = (sc_batch_norm_attrs){.epsilon = 1e-5f, .momentum = 0.9f, .fused_relu = relu};
    t.cl = t.plain;
    t.cl.batch_norm.nhwc = true;
    double worst;
    bool same;
    case_run(&t, "batch norm", &worst, &same);
    CHECK(same, "channels-last BatchNormalization%s, rank %d: not the NCHW bits (worst %.3g)", relu ? " + Relu" : "", rank,
          worst);
    case_free(&t);
}

/* AveragePool: kernel k, stride s, pad p on every spatial dim of a (2, 21, 9, 8[, 7]) input. */
static void average_pool_case(int ns, int64_t k, int64_t s, int64_t p, bool ceil_mode, bool include_pad) {
    int64_t xd[5] = {2, 21, 9, 8, 7}, yd[5] = {2, 21};
    layout_case t;
    case_init(&t, SC_OP_AVERAGE_POOL, "average pool", 1);
    sc_window_attrs *w = &t.plain.window;
    w->n_spatial = ns;
    w->has_kernel_shape = true;
    w->ceil_mode = ceil_mode;
    w->count_include_pad = include_pad;
    for (int i = 0; i < ns; i++) {
        w->kernel_shape[i] = k, w->strides[i] = s, w->dilations[i] = 1, w->pads[i] = w->pads[ns + i] = p;
        int64_t span = xd[2 + i] + 2 * p - k;
        yd[2 + i] = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
        if (ceil_mode && (yd[2 + i] - 1) * s >= xd[2 + i] + p) yd[2 + i]--; /* the last window starts inside */
    }
    t.in[0].desc = sc_desc_make(SC_F32, 2 + ns, xd);
    t.in[0].data = random_buffer(&t.in[0].desc);
    t.layout_in[0] = true;
    t.out.desc = sc_desc_make(SC_F32, 2 + ns, yd);
    t.cl = t.plain;
    t.cl.window.nhwc_in = t.cl.window.nhwc_out = true;
    double worst;
    bool same;
    case_run(&t, "average pool", &worst, &same);
    CHECK(ns == 3 ? same : worst <= 1e-6,
          "channels-last AveragePool %dd k%lld s%lld p%lld ceil %d include_pad %d: worst difference %.3g of the largest output%s", ns,
          (long long)k, (long long)s, (long long)p, ceil_mode, include_pad, worst, ns == 3 ? ", bits expected" : "");
    case_free(&t);
}

/* Add, Sub or Mul of a (2, 19, 5, 6) value and b: b of the same shape (both channels-last) or a
 * per-channel gate (2, 19, 1, 1) / (19, 1, 1), a per-position map (2, 1, 5, 6) or a scalar, which
 * read the same in either layout. */
static void binary_case(sc_op op, int b_rank, const int64_t *b_dims) {
    int64_t xd[4] = {2, 19, 5, 6};
    layout_case t;
    case_init(&t, op, "binary", 2);
    t.in[0].desc = t.out.desc = sc_desc_make(SC_F32, 4, xd);
    t.in[0].data = random_buffer(&t.in[0].desc);
    t.in[1].desc = sc_desc_make(SC_F32, b_rank, b_dims);
    t.in[1].data = random_buffer(&t.in[1].desc);
    t.layout_in[0] = true;
    t.layout_in[1] = sc_desc_numel(&t.in[1].desc) == sc_desc_numel(&t.in[0].desc);
    t.cl.binary.nhwc = true;
    double worst;
    bool same;
    case_run(&t, "binary", &worst, &same);
    char d[96];
    CHECK(same, "channels-last %s with %s: not the NCHW bits (worst %.3g)", sc_op_name(op),
          sc_desc_str(&t.in[1].desc, d, sizeof d), worst);
    case_free(&t);
}

int main(void) {
    for (int rank = 3; rank <= 5; rank++) {
        concat_case(rank, 1);
        concat_case(rank, 0);
        concat_case(rank, 2);
        concat_case(rank, -1);
        batch_norm_case(rank, false);
        batch_norm_case(rank, true);
    }
    concat_case(4, -3);
    binary_case(SC_OP_MUL, 4, (const int64_t[]){2, 19, 1, 1});
    binary_case(SC_OP_MUL, 3, (const int64_t[]){19, 1, 1});
    binary_case(SC_OP_ADD, 4, (const int64_t[]){2, 19, 5, 6});
    binary_case(SC_OP_SUB, 4, (const int64_t[]){2, 1, 5, 6});
    binary_case(SC_OP_MUL, 0, NULL);
    average_pool_case(2, 3, 1, 1, false, true);  /* Inception's fused Pad + AveragePool */
    average_pool_case(2, 2, 2, 0, false, false); /* DenseNet's transition */
    average_pool_case(2, 3, 2, 1, true, false);
    average_pool_case(2, 3, 2, 1, true, true);
    average_pool_case(3, 3, 2, 1, false, true);
    average_pool_case(3, 2, 1, 0, true, false);
    if (failures) printf("%d failure(s)\n", failures);
    else printf("test_cpu_layout: all passed\n");
    return failures ? 1 : 0;
}
