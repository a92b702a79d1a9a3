/* CPU neural-network kernels (cpu_nn_conv.c, cpu_nn_gemm.c, cpu_nn_pool.c, cpu_nn_norm.c) against naive reference
 * loops written independently here, in double precision.
 *
 * Every case runs twice: in f32 (oneDNN / vectorised path; relative tolerance 1e-4) and in f64
 * (reference path; 1e-9), so the f64 path is also checked to agree with the f32 one. Nodes are built
 * directly with their typed attributes; no importer is involved. Fails through the exit code.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_dnnl.h"
#include "backends/cpu/cpu_kernels.h"

static int failures;

/* ---- random data ---- */

static uint64_t rng = 88172645463325252ull;
static double urand(void) { /* xorshift64, uniform in [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / (double)(1ull << 52) - 1.0;
}
static int64_t numel(const int64_t *d, int r) {
    int64_t n = 1;
    for (int i = 0; i < r; i++) n *= d[i];
    return n;
}
static double *rand_arr(int64_t n) {
    double *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    for (int64_t i = 0; i < n; i++) p[i] = urand();
    return p;
}
static double *zeros(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(double)); }

/* ---- one case: inputs and reference outputs in double ---- */

typedef struct {
    const char *name;
    sc_node node;       /* its attrs point at attrs when the case runs */
    sc_attrs attrs;
    int n_in, n_out;
    sc_desc in[6];
    double *in_data[6]; /* NULL: omitted optional input */
    sc_desc out[3];     /* dtype SC_I64 for index outputs, else ignored (follows the run's dtype) */
    double *ref[3];     /* NULL: omitted optional output */
} nn_case;

static nn_case case_new(const char *name, sc_op op) {
    nn_case c;
    memset(&c, 0, sizeof c);
    c.name = name;
    c.node.op = op;
    c.node.name = name;
    return c;
}
static double *case_in(nn_case *c, int rank, const int64_t *dims) {
    int i = c->n_in++;
    c->in[i] = sc_desc_make(SC_F32, rank, dims);
    c->in_data[i] = rand_arr(numel(dims, rank));
    return c->in_data[i];
}
static double *case_out(nn_case *c, int rank, const int64_t *dims) {
    int i = c->n_out++;
    c->out[i] = sc_desc_make(SC_F32, rank, dims);
    c->ref[i] = zeros(numel(dims, rank));
    return c->ref[i];
}

static void case_run(nn_case *c, sc_dtype t, double tol) {
    sc_tensor in[6], out[3];
    int ids[8] = {0};
    c->node.in = ids;
    c->node.out = ids;
    c->node.n_in = c->n_in;
    c->node.n_out = c->n_out;
    c->node.attrs = &c->attrs;
    for (int i = 0; i < c->n_in; i++) {
        in[i].desc = c->in[i];
        in[i].desc.dtype = t;
        in[i].data = NULL;
        if (!c->in_data[i]) continue;
        int64_t n = sc_desc_numel(&c->in[i]);
        in[i].data = malloc((size_t)(n > 0 ? n : 1) * sc_dtype_size(t));
        for (int64_t k = 0; k < n; k++) {
            if (t == SC_F32) ((float *)in[i].data)[k] = (float)c->in_data[i][k];
            else ((double *)in[i].data)[k] = c->in_data[i][k];
        }
    }
    for (int i = 0; i < c->n_out; i++) {
        out[i].desc = c->out[i];
        if (out[i].desc.dtype != SC_I64) out[i].desc.dtype = t;
        int64_t n = sc_desc_numel(&out[i].desc);
        out[i].data = c->ref[i] ? calloc((size_t)(n > 0 ? n : 1), sc_dtype_size(out[i].desc.dtype)) : NULL;
    }
    sc_status st = cpu_run_node(&c->node, in, c->n_in, out, c->n_out);
    if (st) {
        printf("FAIL %s (%s): %s\n", c->name, sc_dtype_name(t), sc_status_message(st));
        sc_status_free(st);
        failures++;
    } else {
        for (int i = 0; i < c->n_out; i++) {
            if (!c->ref[i]) continue;
            int64_t n = sc_desc_numel(&out[i].desc), worst = -1;
            double worst_err = 0;
            for (int64_t k = 0; k < n; k++) {
                double v = out[i].desc.dtype == SC_I64 ? (double)((int64_t *)out[i].data)[k]
                           : t == SC_F32               ? ((float *)out[i].data)[k]
                                                       : ((double *)out[i].data)[k];
                double err = fabs(v - c->ref[i][k]) / (1.0 + fabs(c->ref[i][k]));
                if (!(err <= worst_err)) worst_err = err, worst = k;
            }
            if (!(worst_err <= tol)) {
                printf("FAIL %s (%s) output %d: element %lld differs by %.3g (ref %.6g)\n", c->name, sc_dtype_name(t), i,
                       (long long)worst, worst_err, c->ref[i][worst]);
                failures++;
            }
        }
    }
    for (int i = 0; i < c->n_in; i++) free(in[i].data);
    for (int i = 0; i < c->n_out; i++) free(out[i].data);
}

/* f32 against the reference, then f64 against the same reference (so f64 agrees with f32). */
static void case_check(nn_case *c) {
    int before = failures;
    case_run(c, SC_F32, 1e-4);
    case_run(c, SC_F64, 1e-9);
    if (failures == before) printf("ok   %s\n", c->name);
    for (int i = 0; i < c->n_in; i++) free(c->in_data[i]);
    for (int i = 0; i < c->n_out; i++) free(c->ref[i]);
}

/* ---- Conv ---- */

typedef struct {
    int ns;
    int64_t N, C, M, G, in[3], k[3], s[3], d[3], pads[6];
    sc_auto_pad auto_pad;
    bool bias;
} conv_spec;

/* Output size and effective begin pad per ONNX (auto_pad computed independently of the kernel). */
static void conv_dims(const conv_spec *p, int64_t *out, int64_t *pb) {
    for (int i = 0; i < p->ns; i++) {
        int64_t ext = p->d[i] * (p->k[i] - 1) + 1;
        if (p->auto_pad == SC_AUTO_PAD_SAME_UPPER || p->auto_pad == SC_AUTO_PAD_SAME_LOWER) {
            out[i] = (p->in[i] + p->s[i] - 1) / p->s[i];
            int64_t need = (out[i] - 1) * p->s[i] + ext - p->in[i];
            if (need < 0) need = 0;
            pb[i] = p->auto_pad == SC_AUTO_PAD_SAME_UPPER ? need / 2 : (need + 1) / 2;
        } else if (p->auto_pad == SC_AUTO_PAD_VALID) {
            out[i] = (p->in[i] - ext) / p->s[i] + 1;
            pb[i] = 0;
        } else {
            out[i] = (p->in[i] + p->pads[i] + p->pads[p->ns + i] - ext) / p->s[i] + 1;
            pb[i] = p->pads[i];
        }
    }
}

/* sum, relu: the inference fusions, Y = relu?(conv + S) with S as input 3 (fused_sum, fused_act). */
static void conv_case_fused(const char *name, const conv_spec *p, bool with_sum, bool relu) {
    nn_case c = case_new(name, SC_OP_CONV);
    sc_window_attrs *w = &c.attrs.window;
    w->n_spatial = p->ns;
    w->group = p->G;
    w->auto_pad = p->auto_pad;
    for (int i = 0; i < p->ns; i++) {
        w->strides[i] = p->s[i];
        w->dilations[i] = p->d[i];
        w->pads[i] = p->pads[i];
        w->pads[p->ns + i] = p->pads[p->ns + i];
    }
    int64_t xd[5] = {p->N, p->C}, wd[5] = {p->M, p->C / p->G}, yd[5] = {p->N, p->M}, out[3], pb[3];
    conv_dims(p, out, pb);
    for (int i = 0; i < p->ns; i++) xd[2 + i] = p->in[i], wd[2 + i] = p->k[i], yd[2 + i] = out[i];
    int r = p->ns + 2;
    double *x = case_in(&c, r, xd), *wt = case_in(&c, r, wd), *b = NULL, *sum = NULL;
    if (p->bias) b = case_in(&c, 1, &p->M);
    if (with_sum) {
        if (!p->bias) c.n_in++; /* input 2 omitted (in_data NULL) */
        sum = case_in(&c, r, yd);
    }
    w->fused_sum = with_sum;
    w->fused_act = relu ? SC_FUSED_RELU : SC_FUSED_NONE;
    double *y = case_out(&c, r, yd);
    int64_t I[3] = {1, 1, 1}, O[3] = {1, 1, 1}, K[3] = {1, 1, 1}, S[3] = {1, 1, 1}, D[3] = {1, 1, 1}, P[3] = {0, 0, 0};
    for (int i = 0; i < p->ns; i++) I[i] = p->in[i], O[i] = out[i], K[i] = p->k[i], S[i] = p->s[i], D[i] = p->d[i], P[i] = pb[i];
    int64_t cg = p->C / p->G, mg = p->M / p->G;
    for (int64_t n = 0; n < p->N; n++)
        for (int64_t m = 0; m < p->M; m++)
            for (int64_t a = 0; a < O[0]; a++)
                for (int64_t bb = 0; bb < O[1]; bb++)
                    for (int64_t e = 0; e < O[2]; e++) {
                        double acc = b ? b[m] : 0;
                        for (int64_t ci = 0; ci < cg; ci++) {
                            int64_t ch = (m / mg) * cg + ci;
                            for (int64_t u = 0; u < K[0]; u++)
                                for (int64_t v = 0; v < K[1]; v++)
                                    for (int64_t q = 0; q < K[2]; q++) {
                                        int64_t i0 = a * S[0] + u * D[0] - P[0], i1 = bb * S[1] + v * D[1] - P[1],
                                                i2 = e * S[2] + q * D[2] - P[2];
                                        if (i0 < 0 || i1 < 0 || i2 < 0 || i0 >= I[0] || i1 >= I[1] || i2 >= I[2]) continue;
                                        acc += x[((n * p->C + ch) * I[0] + i0) * I[1] * I[2] + i1 * I[2] + i2] *
                                               wt[((m * cg + ci) * K[0] + u) * K[1] * K[2] + v * K[2] + q];
                                    }
                        }
                        int64_t yi = (((n * p->M + m) * O[0] + a) * O[1] + bb) * O[2] + e;
                        if (sum) acc += sum[yi];
                        y[yi] = relu && acc < 0 ? 0 : acc;
                    }
    case_check(&c);
}

static void conv_case(const char *name, const conv_spec *p) { conv_case_fused(name, p, false, false); }

static void test_conv(void) {
    conv_spec grouped = {2, 2, 4, 6, 2, {9, 8}, {3, 3}, {2, 1}, {1, 2}, {1, 0, 2, 1}, SC_AUTO_PAD_NOTSET, true};
    conv_case("conv 2d groups=2 stride/dilation/asymmetric pads", &grouped);
    conv_spec dw = {2, 1, 8, 8, 8, {10, 11}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, SC_AUTO_PAD_NOTSET, true};
    conv_case("conv 2d depthwise", &dw);
    conv_spec dw2 = {2, 1, 8, 16, 8, {10, 11}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, SC_AUTO_PAD_NOTSET, false};
    conv_case("conv 2d depthwise multiplier 2, stride 2", &dw2);
    conv_spec su = {2, 1, 3, 5, 1, {7, 6}, {4, 3}, {2, 2}, {1, 1}, {0}, SC_AUTO_PAD_SAME_UPPER, true};
    conv_case("conv 2d SAME_UPPER even kernel", &su);
    conv_spec sl = {2, 2, 3, 5, 1, {7, 6}, {4, 3}, {2, 2}, {1, 1}, {0}, SC_AUTO_PAD_SAME_LOWER, false};
    conv_case("conv 2d SAME_LOWER even kernel", &sl);
    conv_spec valid = {2, 1, 3, 4, 1, {7, 6}, {3, 2}, {2, 1}, {1, 1}, {5, 5, 5, 5}, SC_AUTO_PAD_VALID, true};
    conv_case("conv 2d VALID ignores pads", &valid);
    conv_spec c1 = {1, 2, 5, 7, 1, {20}, {5}, {3}, {2}, {2, 1}, SC_AUTO_PAD_NOTSET, true};
    conv_case("conv 1d stride 3 dilation 2", &c1);
    conv_spec c3 = {3, 1, 3, 4, 1, {5, 6, 4}, {3, 2, 3}, {1, 2, 1}, {1, 1, 1}, {1, 0, 1, 1, 1, 0}, SC_AUTO_PAD_NOTSET, true};
    conv_case("conv 3d", &c3);
    conv_spec big = {2, 1, 64, 64, 1, {14, 14}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, SC_AUTO_PAD_NOTSET, true};
    conv_case("conv 2d 64->64 3x3 (blocked kernels)", &big);
    conv_spec pw = {2, 1, 64, 128, 1, {14, 14}, {1, 1}, {2, 2}, {1, 1}, {0}, SC_AUTO_PAD_NOTSET, false};
    conv_case("conv 2d 1x1 stride 2", &pw);
    conv_spec stem = {2, 1, 3, 16, 1, {32, 32}, {7, 7}, {2, 2}, {1, 1}, {3, 3, 3, 3}, SC_AUTO_PAD_NOTSET, false};
    conv_case("conv 2d 7x7 stem", &stem);
    conv_spec pw1 = {2, 1, 64, 32, 1, {14, 14}, {1, 1}, {1, 1}, {1, 1}, {0}, SC_AUTO_PAD_NOTSET, true};
    conv_case_fused("conv 2d 1x1 + summand + relu (fused residual)", &pw1, true, true);
    conv_case_fused("conv 2d 3x3 + summand + relu (summand reordered into the blocked dst)", &big, true, true);
    conv_spec grouped_nobias = grouped;
    grouped_nobias.bias = false;
    conv_case_fused("conv 2d groups=2 + summand, no bias", &grouped_nobias, true, false);

    /* Every activation layout must give the same answers (the default is AUTO). */
    cpu_conv_layout keep = cpu_conv_get_layout();
    const char *names[2] = {"PLAIN", "BLOCKED"};
    for (int l = 0; l < 2; l++) {
        char name[96];
        cpu_conv_set_layout(l == 0 ? CPU_CONV_LAYOUT_PLAIN : CPU_CONV_LAYOUT_BLOCKED);
        snprintf(name, sizeof name, "conv 2d groups=2 (%s)", names[l]);
        conv_case(name, &grouped);
        snprintf(name, sizeof name, "conv 2d 64->64 3x3 (%s)", names[l]);
        conv_case(name, &big);
        snprintf(name, sizeof name, "conv 2d 1x1 stride 2 (%s)", names[l]);
        conv_case(name, &pw);
        snprintf(name, sizeof name, "conv 2d depthwise (%s)", names[l]);
        conv_case(name, &dw);
        snprintf(name, sizeof name, "conv 1d (%s)", names[l]);
        conv_case(name, &c1);
        snprintf(name, sizeof name, "conv 2d 3x3 + summand + relu (%s)", names[l]);
        conv_case_fused(name, &big, true, true);
    }
    cpu_conv_set_layout(keep);
}

/* The fused residual Conv with Y sharing the summand's buffer (what the executor does when the
 * Conv is the summand's last reader) gives what it gives with separate buffers; f32 on both
 * activation layouts (1x1 plain, 3x3 blocked with the summand reordered in) and the f64 loops. */
static void conv_sum_in_place(const char *name, sc_dtype t, int64_t k) {
    int64_t xd[4] = {1, 16, 6, 7}, wd[4] = {16, 16, k, k}, n = 16 * 42, nw = 16 * 16 * k * k;
    size_t es = sc_dtype_size(t);
    sc_node node;
    sc_attrs node_attrs;
    int ids[4] = {0};
    memset(&node, 0, sizeof node);
    memset(&node_attrs, 0, sizeof node_attrs);
    node.attrs = &node_attrs;
    node.op = SC_OP_CONV;
    node.name = name;
    node.in = node.out = ids;
    node.n_in = 4;
    node.n_out = 1;
    node_attrs.window = (sc_window_attrs){.n_spatial = 2, .strides = {1, 1}, .dilations = {1, 1},
                                          .pads = {k / 2, k / 2, k / 2, k / 2}, .group = 1, .fused_sum = true,
                                          .fused_act = SC_FUSED_RELU};
    char *x = malloc((size_t)n * es), *w = malloc((size_t)nw * es), *s = malloc((size_t)n * es);
    char *y = malloc((size_t)n * es);
    for (int64_t i = 0; i < n + nw + n; i++) {
        double v = urand();
        char *p = i < n ? x + i * es : i < n + nw ? w + (i - n) * es : s + (i - n - nw) * es;
        if (t == SC_F32) *(float *)p = (float)v;
        else *(double *)p = v;
    }
    sc_tensor in[4] = {{sc_desc_make(t, 4, xd), x}, {sc_desc_make(t, 4, wd), w}, {{0}, NULL}, {sc_desc_make(t, 4, xd), s}};
    sc_tensor sep = {sc_desc_make(t, 4, xd), y}, shared = {sc_desc_make(t, 4, xd), s};
    sc_status st = cpu_run_node(&node, in, 4, &sep, 1);
    if (!st) st = cpu_run_node(&node, in, 4, &shared, 1);
    bool ok = !st && !memcmp(y, s, (size_t)n * es);
    printf("%s %s\n", ok ? "ok  " : "FAIL", name);
    if (st) printf("  %s\n", sc_status_message(st)), sc_status_free(st);
    failures += !ok;
    free(x), free(w), free(s), free(y);
}

static void test_conv_sum_in_place(void) {
    conv_sum_in_place("conv 1x1 + summand in place (f32)", SC_F32, 1);
    conv_sum_in_place("conv 3x3 + summand in place (f32, blocked)", SC_F32, 3);
    conv_sum_in_place("conv 3x3 + summand in place (f64)", SC_F64, 3);
}

/* ---- channels-last activations (sc_window_attrs.nhwc_in / nhwc_out, inference only) ---- */

/* (N, C, S) <-> (N, S, C) for S spatial positions; to_cl picks the direction. */
static void cl_permute(const float *from, float *to, int64_t N, int64_t C, int64_t S, bool to_cl) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < S; p++) {
                int64_t plain = (n * C + c) * S + p, cl = (n * S + p) * C + c;
                if (to_cl) to[cl] = from[plain];
                else to[plain] = from[cl];
            }
}

/* Runs node (inputs/outputs f32, given NCHW) with its nhwc flags: inputs 0 and 3 are permuted in
 * when flagged, output 0 permuted back, so the result compares with the NCHW run. */
static sc_status run_channels_last(sc_node *node, sc_tensor *in, int n_in, sc_tensor *out, bool cl_in, bool cl_out) {
    sc_tensor tin[4], tout = out[0];
    float *bufs[3] = {NULL, NULL, NULL};
    for (int i = 0; i < n_in; i++) {
        tin[i] = in[i];
        bool flip = (i == 0 && cl_in) || (i == 3 && cl_out);
        if (!flip || !in[i].data) continue;
        int64_t n = sc_desc_numel(&in[i].desc), sp = n / (in[i].desc.dims[0] * in[i].desc.dims[1]);
        bufs[i == 0 ? 0 : 1] = tin[i].data = malloc(sizeof(float) * (size_t)n);
        cl_permute(in[i].data, tin[i].data, in[i].desc.dims[0], in[i].desc.dims[1], sp, true);
    }
    int64_t ny = sc_desc_numel(&out[0].desc), sp = ny / (out[0].desc.dims[0] * out[0].desc.dims[1]);
    if (cl_out) bufs[2] = tout.data = malloc(sizeof(float) * (size_t)ny);
    const sc_attrs *plain = node->attrs;
    sc_attrs a = *plain;
    a.window.nhwc_in = cl_in;
    a.window.nhwc_out = cl_out;
    node->attrs = &a;
    sc_status st = cpu_run_node(node, tin, n_in, &tout, 1);
    node->attrs = plain;
    if (cl_out) cl_permute(tout.data, out[0].data, out[0].desc.dims[0], out[0].desc.dims[1], sp, false);
    for (int i = 0; i < 3; i++) free(bufs[i]);
    return st;
}

static bool close_or_same(const float *a, const float *b, int64_t n, double tol) {
    for (int64_t i = 0; i < n; i++)
        if (!(fabs((double)a[i] - b[i]) <= tol * (1.0 + fabs((double)b[i]))) && memcmp(&a[i], &b[i], 4)) return false;
    return true;
}

/* A Conv (k x k, + summand + relu) with every mix of channels-last sides under every activation
 * layout setting matches its NCHW run, itself checked against the naive loops above. */
static void conv_channels_last_case(int64_t k, bool with_sum) {
    int64_t xd[4] = {1, 16, 6, 7}, wd[4] = {24, 16, k, k}, bd[1] = {24}, yd[4] = {1, 24, 6, 7};
    int64_t nx = numel(xd, 4), nw = numel(wd, 4), ny = numel(yd, 4);
    float *x = malloc(sizeof(float) * (size_t)nx), *w = malloc(sizeof(float) * (size_t)nw), *b = malloc(sizeof(float) * 24);
    float *sum = malloc(sizeof(float) * (size_t)ny), *ref = malloc(sizeof(float) * (size_t)ny), *got = malloc(sizeof(float) * (size_t)ny);
    for (int64_t i = 0; i < nx; i++) x[i] = (float)urand();
    for (int64_t i = 0; i < nw; i++) w[i] = (float)urand();
    for (int64_t i = 0; i < 24; i++) b[i] = (float)urand();
    for (int64_t i = 0; i < ny; i++) sum[i] = (float)urand();
    sc_node node;
    sc_attrs node_attrs;
    int ids[4] = {0};
    memset(&node, 0, sizeof node);
    memset(&node_attrs, 0, sizeof node_attrs);
    node.attrs = &node_attrs;
    node.op = SC_OP_CONV;
    node.name = "conv channels-last";
    node.in = node.out = ids;
    node.n_in = with_sum ? 4 : 3;
    node.n_out = 1;
    node_attrs.window = (sc_window_attrs){.n_spatial = 2, .strides = {1, 1}, .dilations = {1, 1},
                                          .pads = {k / 2, k / 2, k / 2, k / 2}, .group = 1, .fused_sum = with_sum,
                                          .fused_act = SC_FUSED_RELU};
    sc_tensor in[4] = {{sc_desc_make(SC_F32, 4, xd), x}, {sc_desc_make(SC_F32, 4, wd), w}, {sc_desc_make(SC_F32, 1, bd), b},
                       {sc_desc_make(SC_F32, 4, yd), sum}};
    sc_tensor out = {sc_desc_make(SC_F32, 4, yd), ref};
    sc_status st = cpu_run_node(&node, in, node.n_in, &out, 1);
    bool ok = !st;
    cpu_conv_layout keep = cpu_conv_get_layout();
    const cpu_conv_layout layouts[3] = {CPU_CONV_LAYOUT_AUTO, CPU_CONV_LAYOUT_PLAIN, CPU_CONV_LAYOUT_BLOCKED};
    for (int l = 0; ok && l < 3; l++) {
        cpu_conv_set_layout(layouts[l]);
        for (int mix = 1; ok && mix < 4; mix++) {
            out.data = got;
            st = run_channels_last(&node, in, node.n_in, &out, mix & 1, mix & 2);
            ok = !st && close_or_same(got, ref, ny, 1e-5);
            if (!ok) printf("  layout setting %d, channels-last in %d out %d\n", l, mix & 1, (mix & 2) != 0);
        }
    }
    cpu_conv_set_layout(keep);
    printf("%s conv %lldx%lld%s, channels-last X and/or Y under every layout setting\n", ok ? "ok  " : "FAIL",
           (long long)k, (long long)k, with_sum ? " + summand + relu" : " + relu");
    if (st) printf("  %s\n", sc_status_message(st)), sc_status_free(st);
    failures += !ok;
    free(x), free(w), free(b), free(sum), free(ref), free(got);
}

/* MaxPool (bit for bit, NaN and -0 included) and GlobalAveragePool on channels-last buffers. */
static void pools_channels_last(void) {
    int64_t xd[4] = {2, 19, 11, 12}, yd[4] = {2, 19, 6, 7}, gd[4] = {2, 19, 1, 1};
    int64_t nx = numel(xd, 4), ny = numel(yd, 4);
    float *x = malloc(sizeof(float) * (size_t)nx), *ref = malloc(sizeof(float) * (size_t)ny), *got = malloc(sizeof(float) * (size_t)ny);
    const float specials[] = {NAN, -INFINITY, 0.0f, -0.0f};
    for (int64_t i = 0; i < nx; i++) {
        double u = urand();
        x[i] = u > 0.8 ? specials[(int)(fabs(u * 1e6)) % 4] : (float)u;
    }
    sc_node node;
    sc_attrs node_attrs;
    int ids[2] = {0};
    memset(&node, 0, sizeof node);
    memset(&node_attrs, 0, sizeof node_attrs);
    node.attrs = &node_attrs;
    node.op = SC_OP_MAX_POOL;
    node.name = "maxpool channels-last";
    node.in = node.out = ids;
    node.n_in = node.n_out = 1;
    node_attrs.window = (sc_window_attrs){.n_spatial = 2, .has_kernel_shape = true, .kernel_shape = {3, 3},
                                          .strides = {2, 2}, .dilations = {1, 1}, .pads = {1, 1, 1, 1}, .ceil_mode = true};
    sc_tensor in = {sc_desc_make(SC_F32, 4, xd), x}, out = {sc_desc_make(SC_F32, 4, yd), ref};
    sc_status st = cpu_run_node(&node, &in, 1, &out, 1);
    out.data = got;
    if (!st) st = run_channels_last(&node, &in, 1, &out, true, true);
    bool ok = !st && !memcmp(got, ref, sizeof(float) * (size_t)ny);
    printf("%s maxpool channels-last == NCHW bit for bit\n", ok ? "ok  " : "FAIL");
    failures += !ok;
    if (st) printf("  %s\n", sc_status_message(st)), sc_status_free(st);

    for (int64_t i = 0; i < nx; i++) x[i] = (float)urand();
    memset(&node, 0, sizeof node);
    memset(&node_attrs, 0, sizeof node_attrs);
    node.attrs = &node_attrs;
    node.op = SC_OP_GLOBAL_AVERAGE_POOL;
    node.name = "global average pool channels-last";
    node.in = node.out = ids;
    node.n_in = node.n_out = 1;
    out = (sc_tensor){sc_desc_make(SC_F32, 4, gd), ref};
    st = cpu_run_node(&node, &in, 1, &out, 1);
    out.data = got;
    if (!st) st = run_channels_last(&node, &in, 1, &out, true, false);
    ok = !st && close_or_same(got, ref, 38, 1e-6);
    printf("%s global average pool channels-last\n", ok ? "ok  " : "FAIL");
    failures += !ok;
    if (st) printf("  %s\n", sc_status_message(st)), sc_status_free(st);
    free(x), free(ref), free(got);
}

static void test_channels_last(void) {
    conv_channels_last_case(1, true);
    conv_channels_last_case(3, true);
    conv_channels_last_case(3, false);
    pools_channels_last();
}

/* Weights changed in place between calls: the fingerprint (and cpu_dnnl_cache_clear) must notice. */
static void test_conv_weight_update(void) {
    int64_t xd[4] = {1, 32, 8, 8}, wd[4] = {32, 32, 3, 3}, yd[4] = {1, 32, 8, 8};
    sc_node node;
    sc_attrs node_attrs;
    int ids[3] = {0};
    memset(&node, 0, sizeof node);
    memset(&node_attrs, 0, sizeof node_attrs);
    node.attrs = &node_attrs;
    node.op = SC_OP_CONV;
    node.name = "conv weight update";
    node.in = node.out = ids;
    node.n_in = 2;
    node.n_out = 1;
    node_attrs.window = (sc_window_attrs){.n_spatial = 2, .strides = {1, 1}, .dilations = {1, 1}, .pads = {1, 1, 1, 1}, .group = 1};
    float *x = malloc(32 * 64 * sizeof(float)), *w = malloc(32 * 32 * 9 * sizeof(float));
    float *y1 = malloc(32 * 64 * sizeof(float)), *y2 = malloc(32 * 64 * sizeof(float));
    for (int i = 0; i < 32 * 64; i++) x[i] = (float)urand();
    for (int i = 0; i < 32 * 32 * 9; i++) w[i] = (float)urand();
    sc_tensor in[2] = {{sc_desc_make(SC_F32, 4, xd), x}, {sc_desc_make(SC_F32, 4, wd), w}};
    sc_tensor o1 = {sc_desc_make(SC_F32, 4, yd), y1}, o2 = {sc_desc_make(SC_F32, 4, yd), y2};
    sc_status st = cpu_run_node(&node, in, 2, &o1, 1);
    for (int i = 0; i < 32 * 32 * 9; i++) w[i] *= 2.0f;
    if (!st) st = cpu_run_node(&node, in, 2, &o2, 1);
    bool ok = !st;
    for (int i = 0; ok && i < 32 * 64; i++) ok = fabsf(y2[i] - 2 * y1[i]) <= 1e-4f * (1 + fabsf(y2[i]));
    for (int i = 0; i < 32 * 32 * 9; i++) w[i] *= 0.5f;
    cpu_dnnl_cache_clear();
    if (!st) st = cpu_run_node(&node, in, 2, &o2, 1);
    for (int i = 0; ok && i < 32 * 64; i++) ok = fabsf(y2[i] - y1[i]) <= 1e-5f * (1 + fabsf(y1[i]));
    printf("%s conv weight update\n", ok ? "ok  " : "FAIL");
    if (st) printf("  %s\n", sc_status_message(st)), sc_status_free(st);
    failures += !ok;
    free(x), free(w), free(y1), free(y2);
}

/* ---- Gemm / MatMul ---- */

static void gemm_case_sized(const char *name, int64_t M, int64_t N, int64_t K, bool ta, bool tb, int c_rank,
                            const int64_t *c_dims) {
    nn_case c = case_new(name, SC_OP_GEMM);
    c.attrs.gemm = (sc_gemm_attrs){.alpha = 0.7f, .beta = 1.3f, .trans_a = ta, .trans_b = tb};
    int64_t ad[2] = {ta ? K : M, ta ? M : K}, bd[2] = {tb ? N : K, tb ? K : N}, yd[2] = {M, N};
    double *A = case_in(&c, 2, ad), *B = case_in(&c, 2, bd), *C = NULL;
    if (c_rank >= 0) C = case_in(&c, c_rank, c_dims);
    double *Y = case_out(&c, 2, yd);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += (ta ? A[k * M + i] : A[i * K + k]) * (tb ? B[j * K + k] : B[k * N + j]);
            double cv = 0;
            if (C) {
                int64_t r0 = c_rank == 2 && c_dims[0] > 1 ? i : 0, c0 = c_rank >= 1 && c_dims[c_rank - 1] > 1 ? j : 0;
                int64_t cols = c_rank >= 1 ? c_dims[c_rank - 1] : 1;
                cv = C[r0 * cols + c0];
            }
            Y[i * N + j] = (double)0.7f * s + (double)1.3f * cv; /* the attributes are floats */
        }
    case_check(&c);
}

static void gemm_case(const char *name, bool ta, bool tb, int c_rank, const int64_t *c_dims) {
    gemm_case_sized(name, 5, 7, 6, ta, tb, c_rank, c_dims);
}

static void test_gemm(void) {
    int64_t cn[1] = {7}, cm1[2] = {5, 1}, cmn[2] = {5, 7}, c1n[2] = {1, 7};
    char name[64];
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        snprintf(name, sizeof name, "gemm transA=%d transB=%d C(N)", ta, tb);
        gemm_case(name, ta, tb, 1, cn);
        snprintf(name, sizeof name, "gemm transA=%d transB=%d C(M,1)", ta, tb);
        gemm_case(name, ta, tb, 2, cm1);
        snprintf(name, sizeof name, "gemm transA=%d transB=%d C(M,N)", ta, tb);
        gemm_case(name, ta, tb, 2, cmn);
    }
    gemm_case("gemm C(1,N)", false, true, 2, c1n);
    gemm_case("gemm scalar C", false, false, 0, NULL);
    gemm_case("gemm without C", true, false, -1, NULL);
    /* Operands read across K with a stride of 512 or 1024 floats: cpu_nn_sgemm.c copies those
     * panels to a shorter stride first (B untransposed, A transposed; both in the second case). */
    int64_t c1024[1] = {1024};
    gemm_case_sized("gemm B restrided (64, 40) @ (40, 1024)", 64, 1024, 40, false, false, 1, c1024);
    gemm_case_sized("gemm A and B restrided (40, 512)^T @ (40, 1024)", 512, 1024, 40, true, false, 1, c1024);
    gemm_case_sized("gemm transB, no copy (64, 40) @ (1024, 40)^T", 64, 1024, 40, false, true, 1, c1024);
}

static void matmul_case(const char *name, int ra, const int64_t *ad, int rb, const int64_t *bd) {
    nn_case c = case_new(name, SC_OP_MATMUL);
    double *A = case_in(&c, ra, ad), *B = case_in(&c, rb, bd);
    /* numpy: promote 1-D operands, broadcast the batch dims, drop the promoted dims again. */
    int64_t M = ra == 1 ? 1 : ad[ra - 2], K = ad[ra - 1], N = rb == 1 ? 1 : bd[rb - 1];
    int na = ra > 2 ? ra - 2 : 0, nb = rb > 2 ? rb - 2 : 0, nbat = na > nb ? na : nb;
    int64_t bat[8], yd[8];
    int yr = 0;
    for (int i = 0; i < nbat; i++) {
        int64_t da = i - (nbat - na) >= 0 ? ad[i - (nbat - na)] : 1, db = i - (nbat - nb) >= 0 ? bd[i - (nbat - nb)] : 1;
        bat[i] = da > db ? da : db;
        yd[yr++] = bat[i];
    }
    if (ra > 1) yd[yr++] = M;
    if (rb > 1) yd[yr++] = N;
    double *Y = case_out(&c, yr, yd);
    int64_t nbt = numel(bat, nbat);
    for (int64_t t = 0; t < nbt; t++) {
        int64_t rem = t, ao = 0, bo = 0, as = M * K, bs = K * N;
        for (int i = nbat - 1; i >= 0; i--) {
            int64_t idx = rem % bat[i];
            rem /= bat[i];
            int ia = i - (nbat - na), ib = i - (nbat - nb);
            int64_t da = ia >= 0 ? ad[ia] : 1, db = ib >= 0 ? bd[ib] : 1;
            ao += (da == 1 ? 0 : idx) * as;
            bo += (db == 1 ? 0 : idx) * bs;
            as *= da;
            bs *= db;
        }
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++) s += A[ao + i * K + k] * B[bo + k * N + j];
                Y[(t * M + i) * N + j] = s;
            }
    }
    case_check(&c);
}

static void test_matmul(void) {
    int64_t a1[4] = {2, 3, 4, 5}, b1[2] = {5, 6};
    matmul_case("matmul (2,3,4,5)@(5,6) folded batch", 4, a1, 2, b1);
    int64_t a2[4] = {3, 1, 4, 5}, b2[3] = {2, 5, 6};
    matmul_case("matmul (3,1,4,5)@(2,5,6) broadcast batch", 4, a2, 3, b2);
    int64_t a3[3] = {8, 4, 5}, b3[3] = {8, 5, 3};
    matmul_case("matmul (8,4,5)@(8,5,3) parallel batches", 3, a3, 3, b3);
    int64_t a4[2] = {4, 5}, b4[3] = {3, 5, 2};
    matmul_case("matmul (4,5)@(3,5,2) broadcast A", 2, a4, 3, b4);
    int64_t v[1] = {5}, b5[3] = {2, 5, 3};
    matmul_case("matmul (5)@(2,5,3) 1-D A", 1, v, 3, b5);
    int64_t a6[3] = {2, 4, 5};
    matmul_case("matmul (2,4,5)@(5) 1-D B", 3, a6, 1, v);
    matmul_case("matmul (5)@(5) dot", 1, v, 1, v);
    int64_t a7[3] = {1, 128, 64}, b7[2] = {64, 96};
    matmul_case("matmul (1,128,64)@(64,96)", 3, a7, 2, b7);
    /* batches of a B whose stride is 512 floats: each tile copies its panel (cpu_nn_sgemm.c) */
    int64_t a8[3] = {3, 32, 20}, b8[3] = {3, 20, 512};
    matmul_case("matmul (3,32,20)@(3,20,512) restrided batches", 3, a8, 3, b8);
}

/* ---- pools ---- */

typedef struct {
    int ns;
    int64_t N, C, in[3], k[3], s[3], d[3], pads[6];
    bool ceil_mode, include_pad;
    int storage_order;
} pool_spec;

static void pool_case(const char *name, sc_op op, const pool_spec *p, bool indices) {
    nn_case c = case_new(name, op);
    sc_window_attrs *w = &c.attrs.window;
    w->n_spatial = p->ns;
    w->has_kernel_shape = true;
    w->ceil_mode = p->ceil_mode;
    w->count_include_pad = p->include_pad;
    w->storage_order = p->storage_order;
    int64_t xd[5] = {p->N, p->C}, yd[5] = {p->N, p->C};
    int64_t I[3] = {1, 1, 1}, O[3] = {1, 1, 1}, K[3] = {1, 1, 1}, S[3] = {1, 1, 1}, D[3] = {1, 1, 1}, PB[3] = {0}, PE[3] = {0};
    for (int i = 0; i < p->ns; i++) {
        w->kernel_shape[i] = p->k[i];
        w->strides[i] = p->s[i];
        w->dilations[i] = p->d[i];
        w->pads[i] = p->pads[i];
        w->pads[p->ns + i] = p->pads[p->ns + i];
        int64_t ext = (p->k[i] - 1) * p->d[i] + 1, span = p->in[i] + p->pads[i] + p->pads[p->ns + i] - ext;
        int64_t o = p->ceil_mode ? (span + p->s[i] - 1) / p->s[i] + 1 : span / p->s[i] + 1;
        if (p->ceil_mode && (o - 1) * p->s[i] >= p->in[i] + p->pads[i]) o--; /* no window starting in the end pad */
        xd[2 + i] = I[i] = p->in[i];
        yd[2 + i] = O[i] = o;
        K[i] = p->k[i], S[i] = p->s[i], D[i] = p->d[i], PB[i] = p->pads[i], PE[i] = p->pads[p->ns + i];
    }
    int r = p->ns + 2;
    double *x = case_in(&c, r, xd), *y = case_out(&c, r, yd), *ind = NULL;
    if (indices) {
        ind = case_out(&c, r, yd);
        c.out[1].dtype = SC_I64;
    }
    int64_t sp = I[0] * I[1] * I[2], yi = 0;
    for (int64_t nc = 0; nc < p->N * p->C; nc++)
        for (int64_t a = 0; a < O[0]; a++)
            for (int64_t b = 0; b < O[1]; b++)
                for (int64_t e = 0; e < O[2]; e++, yi++) {
                    double best = -INFINITY, sum = 0;
                    int64_t cnt = 0, cnt_pad = 0, arg = -1;
                    for (int64_t u = 0; u < K[0]; u++)
                        for (int64_t v = 0; v < K[1]; v++)
                            for (int64_t q = 0; q < K[2]; q++) {
                                int64_t i0 = a * S[0] - PB[0] + u * D[0], i1 = b * S[1] - PB[1] + v * D[1],
                                        i2 = e * S[2] - PB[2] + q * D[2];
                                if (i0 >= -PB[0] && i0 < I[0] + PE[0] && i1 >= -PB[1] && i1 < I[1] + PE[1] &&
                                    i2 >= -PB[2] && i2 < I[2] + PE[2])
                                    cnt_pad++;
                                if (i0 < 0 || i1 < 0 || i2 < 0 || i0 >= I[0] || i1 >= I[1] || i2 >= I[2]) continue;
                                double val = x[nc * sp + (i0 * I[1] + i1) * I[2] + i2];
                                sum += val, cnt++;
                                if (val > best) {
                                    best = val;
                                    arg = p->storage_order ? i0 + i1 * I[0] + i2 * I[0] * I[1] : (i0 * I[1] + i1) * I[2] + i2;
                                    arg += nc * sp;
                                }
                            }
                    if (op == SC_OP_MAX_POOL) y[yi] = best;
                    else y[yi] = sum / (double)(p->include_pad ? cnt_pad : cnt);
                    if (ind) ind[yi] = (double)arg;
                }
    case_check(&c);
}

/* 2-D f32 MaxPool without Indices takes the separable path (cpu_nn_pool_2d.c) on rows of at least
 * POOL_PLANES_MAX_OW outputs and blocks of 16 planes through the channels-last loop
 * (pool_max_planes_f32) on narrower ones, with Indices the generic scan; all must give the same
 * bits, including NaN (only a window's first tap's NaN propagates), -inf and the sign of tied
 * zeros. */
static void maxpool_paths_agree(const char *name, const pool_spec *p) {
    sc_node node;
    sc_attrs node_attrs;
    int ids[2] = {0};
    memset(&node, 0, sizeof node);
    memset(&node_attrs, 0, sizeof node_attrs);
    node.attrs = &node_attrs;
    node.op = SC_OP_MAX_POOL;
    node.name = name;
    node.in = node.out = ids;
    node.n_in = 1;
    sc_window_attrs *w = &node_attrs.window;
    *w = (sc_window_attrs){.n_spatial = 2, .has_kernel_shape = true, .ceil_mode = p->ceil_mode};
    int64_t xd[4] = {p->N, p->C, p->in[0], p->in[1]}, yd[4] = {p->N, p->C};
    for (int i = 0; i < 2; i++) {
        w->kernel_shape[i] = p->k[i], w->strides[i] = p->s[i], w->dilations[i] = p->d[i];
        w->pads[i] = p->pads[i], w->pads[2 + i] = p->pads[2 + i];
        int64_t span = p->in[i] + p->pads[i] + p->pads[2 + i] - ((p->k[i] - 1) * p->d[i] + 1);
        yd[2 + i] = p->ceil_mode ? (span + p->s[i] - 1) / p->s[i] + 1 : span / p->s[i] + 1;
        if (p->ceil_mode && (yd[2 + i] - 1) * p->s[i] >= p->in[i] + p->pads[i]) yd[2 + i]--;
    }
    int64_t n = numel(xd, 4), ny = numel(yd, 4);
    float *x = malloc(sizeof *x * (size_t)n), *fast = malloc(sizeof *x * (size_t)ny), *ref = malloc(sizeof *x * (size_t)ny);
    int64_t *ind = malloc(sizeof *ind * (size_t)ny);
    const float specials[] = {NAN, -INFINITY, 0.0f, -0.0f};
    for (int64_t i = 0; i < n; i++) {
        double u = urand();
        x[i] = u > 0.7 ? specials[(int)(fabs(u * 1e6)) % 4] : (float)u;
    }
    sc_tensor in = {sc_desc_make(SC_F32, 4, xd), x};
    sc_tensor one = {sc_desc_make(SC_F32, 4, yd), fast}, two[2] = {{sc_desc_make(SC_F32, 4, yd), ref}, {sc_desc_make(SC_I64, 4, yd), ind}};
    node.n_out = 1;
    sc_status st = cpu_run_node(&node, &in, 1, &one, 1);
    node.n_out = 2;
    if (!st) st = cpu_run_node(&node, &in, 1, two, 2);
    bool ok = !st && !memcmp(fast, ref, sizeof *x * (size_t)ny);
    printf("%s %s\n", ok ? "ok  " : "FAIL", name);
    if (st) printf("  %s\n", sc_status_message(st)), sc_status_free(st);
    failures += !ok;
    free(x), free(fast), free(ref), free(ind);
}

static void test_pools(void) {
    pool_spec p1 = {2, 2, 3, {9, 10}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, false, false, 0};
    pool_case("maxpool 3x3 s2 pad 1 + indices", SC_OP_MAX_POOL, &p1, true);
    pool_case("maxpool 3x3 s2 pad 1 (separable path)", SC_OP_MAX_POOL, &p1, false);
    pool_spec p2 = {2, 1, 2, {8, 9}, {3, 2}, {2, 3}, {1, 1}, {0, 1, 1, 0}, true, false, 1};
    pool_case("maxpool ceil_mode asymmetric pads + column-major indices", SC_OP_MAX_POOL, &p2, true);
    pool_case("maxpool ceil_mode asymmetric pads (separable path)", SC_OP_MAX_POOL, &p2, false);
    pool_spec stem = {2, 1, 4, {28, 30}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, false, false, 0};
    pool_case("maxpool ResNet stem shape (separable path)", SC_OP_MAX_POOL, &stem, false);
    pool_spec big_pad = {2, 1, 2, {5, 4}, {4, 5}, {3, 1}, {1, 2}, {3, 4, 3, 4}, true, false, 0};
    pool_case("maxpool pads past the input, ceil_mode, dilation (separable path)", SC_OP_MAX_POOL, &big_pad, false);
    maxpool_paths_agree("maxpool separable == generic scan bit for bit (NaN, -inf, +-0)", &stem);
    maxpool_paths_agree("maxpool separable == generic scan, ceil_mode asymmetric pads", &p2);
    maxpool_paths_agree("maxpool separable == generic scan, dilations and wide pads", &big_pad);
    pool_spec wide = {2, 1, 3, {9, 40}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, true, false, 0}; /* 20 outputs a row */
    maxpool_paths_agree("maxpool separable (wide rows) == generic scan", &wide);
    pool_spec planes = {2, 3, 7, {14, 14}, {3, 3}, {2, 2}, {1, 1}, {0, 0, 0, 0}, true, false, 0}; /* 21 planes: 16 + 5 */
    maxpool_paths_agree("maxpool 16-plane blocks (SqueezeNet's 14x14, ceil_mode) == generic scan", &planes);
    pool_spec p3 = {2, 1, 2, {11, 9}, {3, 2}, {1, 2}, {2, 3}, {2, 1, 2, 1}, false, false, 0};
    pool_case("maxpool dilations", SC_OP_MAX_POOL, &p3, false);
    pool_spec p4 = {1, 2, 3, {17}, {4}, {3}, {1}, {2, 1}, true, false, 0};
    pool_case("maxpool 1d ceil_mode", SC_OP_MAX_POOL, &p4, true);
    pool_spec a1 = {2, 2, 3, {9, 10}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, false, false, 0};
    pool_case("avgpool exclude pad", SC_OP_AVERAGE_POOL, &a1, false);
    a1.include_pad = true;
    pool_case("avgpool count_include_pad", SC_OP_AVERAGE_POOL, &a1, false);
    pool_spec a2 = {2, 1, 2, {8, 9}, {3, 2}, {2, 3}, {1, 1}, {1, 0, 1, 1}, true, true, 0};
    pool_case("avgpool ceil_mode count_include_pad", SC_OP_AVERAGE_POOL, &a2, false);
    a2.include_pad = false;
    pool_case("avgpool ceil_mode exclude pad", SC_OP_AVERAGE_POOL, &a2, false);
    pool_spec a4 = {2, 1, 4, {28, 30}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, false, true, 0};
    pool_case("avgpool 3x3 s2 count_include_pad, interior columns", SC_OP_AVERAGE_POOL, &a4, false);
    pool_case("avgpool dilations, wide pads, ceil_mode exclude pad", SC_OP_AVERAGE_POOL, &big_pad, false);
    pool_spec a3 = {3, 1, 2, {5, 6, 7}, {2, 3, 2}, {2, 2, 1}, {1, 1, 1}, {1, 0, 1, 0, 1, 1}, false, true, 0};
    pool_case("avgpool 3d", SC_OP_AVERAGE_POOL, &a3, false);

    nn_case c = case_new("global average pool", SC_OP_GLOBAL_AVERAGE_POOL);
    int64_t xd[4] = {2, 5, 7, 6}, yd[4] = {2, 5, 1, 1};
    double *x = case_in(&c, 4, xd), *y = case_out(&c, 4, yd);
    for (int i = 0; i < 10; i++) {
        for (int j = 0; j < 42; j++) y[i] += x[i * 42 + j];
        y[i] /= 42;
    }
    case_check(&c);
}

/* ---- normalisation ---- */

static void bn_case(const char *name, bool training) {
    nn_case c = case_new(name, SC_OP_BATCH_NORM);
    c.attrs.batch_norm = (sc_batch_norm_attrs){.epsilon = 1e-5f, .momentum = 0.9f, .training_mode = training};
    int64_t N = 3, C = 4, S = 15, xd[4] = {3, 4, 3, 5};
    double *x = case_in(&c, 4, xd), *sc = case_in(&c, 1, &C), *b = case_in(&c, 1, &C), *rm = case_in(&c, 1, &C),
           *rv = case_in(&c, 1, &C);
    for (int i = 0; i < C; i++) rv[i] = fabs(rv[i]) + 0.5;
    double *y = case_out(&c, 4, xd), *om = NULL, *ov = NULL;
    if (training) om = case_out(&c, 1, &C), ov = case_out(&c, 1, &C);
    for (int64_t ch = 0; ch < C; ch++) {
        double mean = rm[ch], var = rv[ch];
        if (training) {
            double s = 0, ss = 0;
            for (int64_t n = 0; n < N; n++)
                for (int64_t i = 0; i < S; i++) s += x[(n * C + ch) * S + i];
            mean = s / (N * S);
            for (int64_t n = 0; n < N; n++)
                for (int64_t i = 0; i < S; i++) ss += pow(x[(n * C + ch) * S + i] - mean, 2);
            var = ss / (N * S);
            double mom = 0.9f; /* the attribute is a float */
            om[ch] = rm[ch] * mom + mean * (1 - mom);
            ov[ch] = rv[ch] * mom + var * (1 - mom);
        }
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++) {
                int64_t k = (n * C + ch) * S + i;
                y[k] = (x[k] - mean) / sqrt(var + (double)1e-5f) * sc[ch] + b[ch];
            }
    }
    case_check(&c);
}

static void ln_case(const char *name, int rank, const int64_t *xd, int axis, int srank, const int64_t *sd, bool bias,
                    bool stats) {
    nn_case c = case_new(name, SC_OP_LAYER_NORM);
    c.attrs.layer_norm = (sc_layer_norm_attrs){.axis = axis, .epsilon = 1e-5f, .stash_type = SC_F32};
    int ax = axis < 0 ? axis + rank : axis;
    int64_t outer = numel(xd, ax), inner = numel(xd + ax, rank - ax);
    double *x = case_in(&c, rank, xd), *g = case_in(&c, srank, sd), *b = bias ? case_in(&c, srank, sd) : NULL;
    double *y = case_out(&c, rank, xd), *mo = NULL, *io = NULL;
    if (stats) {
        int64_t md[8];
        for (int i = 0; i < rank; i++) md[i] = i < ax ? xd[i] : 1;
        mo = case_out(&c, rank, md), io = case_out(&c, rank, md);
    }
    int64_t sn = numel(sd, srank);
    for (int64_t r = 0; r < outer; r++) {
        double m = 0, v = 0;
        for (int64_t i = 0; i < inner; i++) m += x[r * inner + i] / inner;
        for (int64_t i = 0; i < inner; i++) v += pow(x[r * inner + i] - m, 2) / inner;
        double is = 1 / sqrt(v + (double)1e-5f);
        for (int64_t i = 0; i < inner; i++) /* scale broadcasts over the leading normalised dims here */
            y[r * inner + i] = (x[r * inner + i] - m) * is * g[i % sn] + (b ? b[i % sn] : 0);
        if (stats) mo[r] = m, io[r] = is;
    }
    case_check(&c);
}

static void softmax_case(const char *name, sc_op op, int rank, const int64_t *xd, int axis, bool legacy) {
    nn_case c = case_new(name, op);
    c.attrs.axis = (sc_axis_attrs){.axis = axis, .legacy_2d = legacy};
    int ax = axis < 0 ? axis + rank : axis;
    double *x = case_in(&c, rank, xd), *y = case_out(&c, rank, xd);
    for (int64_t i = 0; i < numel(xd, rank); i++) x[i] *= 4;
    int64_t outer = numel(xd, ax), n = legacy ? numel(xd + ax, rank - ax) : xd[ax];
    int64_t inner = legacy ? 1 : numel(xd + ax + 1, rank - ax - 1);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < inner; j++) {
            double s = 0;
            for (int64_t i = 0; i < n; i++) s += exp(x[(o * n + i) * inner + j]);
            for (int64_t i = 0; i < n; i++) {
                double v = x[(o * n + i) * inner + j];
                y[(o * n + i) * inner + j] = op == SC_OP_SOFTMAX ? exp(v) / s : v - log(s);
            }
        }
    case_check(&c);
}

static void test_norms(void) {
    bn_case("batchnorm inference", false);
    bn_case("batchnorm training (batch stats, running mean/var)", true);
    int64_t xd[3] = {2, 3, 4}, s34[2] = {3, 4}, s4[1] = {4}, g[3] = {1, 128, 768}, s768[1] = {768};
    ln_case("layernorm axis=1 scale (3,4) with Mean/InvStdDev", 3, xd, 1, 2, s34, true, true);
    ln_case("layernorm axis=-1 no bias", 3, xd, -1, 1, s4, false, false);
    ln_case("layernorm axis=1 scale (4) broadcast", 3, xd, 1, 1, s4, true, true);
    ln_case("layernorm GPT-2 shape", 3, g, -1, 1, s768, true, false);
    int64_t sd[4] = {2, 3, 4, 5}, att[4] = {1, 12, 16, 128};
    softmax_case("softmax axis=-1", SC_OP_SOFTMAX, 4, sd, -1, false);
    softmax_case("softmax axis=1 (strided)", SC_OP_SOFTMAX, 4, sd, 1, false);
    softmax_case("softmax legacy axis=1 (2-D coerced)", SC_OP_SOFTMAX, 4, sd, 1, true);
    softmax_case("softmax attention shape", SC_OP_SOFTMAX, 4, att, 3, false);
    softmax_case("logsoftmax axis=-1", SC_OP_LOG_SOFTMAX, 4, sd, -1, false);
    softmax_case("logsoftmax axis=2 (strided)", SC_OP_LOG_SOFTMAX, 4, sd, 2, false);
    softmax_case("logsoftmax legacy axis=2", SC_OP_LOG_SOFTMAX, 4, sd, 2, true);
}

static void test_errors(void) {
    /* Unsupported dtypes and inconsistent shapes come back as statuses naming the node. */
    int64_t d[2] = {2, 2};
    int32_t buf[4] = {0};
    sc_node node;
    sc_attrs node_attrs;
    int ids[2] = {0};
    memset(&node, 0, sizeof node);
    memset(&node_attrs, 0, sizeof node_attrs);
    node.attrs = &node_attrs;
    node.op = SC_OP_SOFTMAX;
    node.name = "int softmax";
    node.in = node.out = ids;
    node.n_in = node.n_out = 1;
    node_attrs.axis.axis = -1;
    sc_tensor in = {sc_desc_make(SC_I32, 2, d), buf}, out = {sc_desc_make(SC_I32, 2, d), buf};
    sc_status st = cpu_run_node(&node, &in, 1, &out, 1);
    bool ok = st && strstr(sc_status_message(st), "int softmax") && strstr(sc_status_message(st), "not supported");
    sc_status_free(st);
    int64_t ad[2] = {2, 3}, bd[2] = {4, 2};
    float fa[8] = {0}, fb[8] = {0}, fy[8];
    node.op = SC_OP_MATMUL;
    node.name = "bad matmul";
    node.n_in = 2;
    sc_tensor ins[2] = {{sc_desc_make(SC_F32, 2, ad), fa}, {sc_desc_make(SC_F32, 2, bd), fb}};
    sc_tensor y = {sc_desc_make(SC_F32, 2, d), fy};
    st = cpu_run_node(&node, ins, 2, &y, 1);
    ok = ok && st && strstr(sc_status_message(st), "bad matmul");
    sc_status_free(st);
    printf("%s error statuses\n", ok ? "ok  " : "FAIL");
    failures += !ok;
}

int main(void) {
    cpu_set_num_threads(2);
    test_conv();
    test_conv_weight_update();
    test_conv_sum_in_place();
    test_channels_last();
    test_gemm();
    test_matmul();
    test_pools();
    test_norms();
    test_errors();
    cpu_dnnl_cache_clear();
    if (failures) printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
