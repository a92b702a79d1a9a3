/* Synthetic training data (train/train_data.c) on graphs built here with only the values the data
 * side reads: the inputs, the labels and the model output. Checks, for a classifier, a per-pixel
 * (segmentation) model and an MSE regressor:
 *   - the float inputs are noise + prototype: mean 0 and variance 2 over a batch, and two samples
 *     of one class correlate by 1/2 (the shared prototype) while two of different classes do not,
 *     so the data is learnable and a sample's noise is its own;
 *   - per-pixel labels are constant on a 4x4 grid of blocks, and a pixel's input follows its
 *     block's class, not the sample's;
 *   - MSE labels are the class's target: equal for one class, at most K = 8 distinct rows;
 *   - a batch is a pure function of (seed, sample): the same bytes on refill, for 1 and 4 threads,
 *     and with batch 1 row by row; another seed gives other bytes;
 *   - the prefetch worker (train_prefetch.h) hands over the batch it drew only for its own sample,
 *     with the bytes of a direct fill, and never after a drop.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "graph/graph.h"
#include "train/train_data.h"
#include "train/train_prefetch.h"
#include "tests/check.h"

typedef struct {
    sc_graph g;
    sc_training_graph tg;
    sc_tensor feeds[2]; /* x, labels (g.inputs order) */
} model;

static int add(sc_graph *g, const char *name, sc_value_kind kind, sc_dtype t, int rank, const int64_t *dims) {
    sc_desc d = sc_desc_make(t, rank, dims);
    sc_status st = SC_OK;
    int id = graph_add_value(g, name, kind, &d, &st);
    SC_ASSERT(!st && id >= 0);
    return id;
}

/* x [xdims] f32 and labels [ldims] (ltype) are the graph's inputs; the output's shape [odims]
 * says what the loss is (classes, per pixel, or MSE). */
static void model_make(model *m, int xr, const int64_t *xdims, sc_dtype ltype, int lr, const int64_t *ldims, int orank,
                       const int64_t *odims) {
    memset(m, 0, sizeof *m);
    graph_init(&m->g);
    int x = add(&m->g, "x", SC_VALUE_INPUT, SC_F32, xr, xdims);
    int y = add(&m->g, "labels", SC_VALUE_INPUT, ltype, lr, ldims);
    m->tg.output = add(&m->g, "out", SC_VALUE_ACT, SC_F32, orank, odims);
    m->g.inputs = sc_arena_alloc_array(&m->g.arena, 2, sizeof(int));
    m->g.inputs[0] = x;
    m->g.inputs[1] = y;
    m->g.n_inputs = 2;
    m->tg.labels = y;
    m->tg.lr = m->tg.step = m->tg.loss_scale = m->tg.inv_loss_scale = -1;
    for (int i = 0; i < 2; i++) {
        m->feeds[i].desc = m->g.values[m->g.inputs[i]].desc;
        m->feeds[i].data = calloc((size_t)sc_desc_numel(&m->feeds[i].desc), sc_dtype_size(m->feeds[i].desc.dtype));
    }
}

static void model_free(model *m) {
    for (int i = 0; i < 2; i++) free(m->feeds[i].data);
    graph_free(&m->g);
}

static size_t bytes_of(const sc_tensor *t) { return (size_t)sc_desc_numel(&t->desc) * sc_dtype_size(t->desc.dtype); }

static train_data open_data(model *m, uint64_t seed) {
    sc_trainer_config cfg;
    sc_trainer_config_default(&cfg);
    cfg.batch = m->feeds[0].desc.dims[0];
    cfg.seed = seed;
    train_data d;
    sc_status st = train_data_open(&d, &m->g, &m->tg, &cfg);
    CHECK(!st, "train_data_open: %s", st ? sc_status_message(st) : "");
    CHECK(d.kind == TD_SYNTHETIC, "kind %d, expected synthetic", (int)d.kind);
    return d;
}

static void fill(train_data *d, model *m, uint64_t sample) {
    sc_status st = train_data_fill(d, &m->g, sample, m->feeds);
    CHECK(!st, "train_data_fill: %s", st ? sc_status_message(st) : "");
}

/* Pearson correlation of rows a and b of an [N, n] f32 batch. */
static double row_corr(const float *x, int64_t n, int64_t a, int64_t b) {
    double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
    for (int64_t e = 0; e < n; e++) {
        double u = x[a * n + e], v = x[b * n + e];
        sa += u, sb += v, saa += u * u, sbb += v * v, sab += u * v;
    }
    double cov = sab / n - sa / n * sb / n;
    return cov / sqrt((saa / n - sa / n * sa / n) * (sbb / n - sb / n * sb / n));
}

static void check_moments(const sc_tensor *x, const char *what) {
    const float *p = x->data;
    int64_t n = sc_desc_numel(&x->desc);
    double s = 0, ss = 0, amax = 0;
    for (int64_t i = 0; i < n; i++) s += p[i], ss += (double)p[i] * p[i], amax = fmax(amax, fabs(p[i]));
    double mean = s / n, var = ss / n - mean * mean;
    CHECK(fabs(mean) < 0.05, "%s: mean %.4f, expected 0", what, mean);
    CHECK(fabs(var - 2.0) < 0.1, "%s: variance %.4f, expected 2 (noise 1 + prototype 1)", what, var);
    /* each term is a centred sum of four uniforms: |v| <= 2 sqrt 3 */
    CHECK(amax <= 4.0 * sqrt(3.0) + 1e-5, "%s: |x| up to %.3f, beyond 4 sqrt 3", what, amax);
}

/* The same bytes for (seed, sample) on refill, on 1 and 4 threads, and one sample at a time. */
static void check_pure(model *m, uint64_t seed, const char *what) {
    train_data d = open_data(m, seed);
    fill(&d, m, 100);
    size_t nx = bytes_of(&m->feeds[0]), ny = bytes_of(&m->feeds[1]);
    void *x0 = malloc(nx), *y0 = malloc(ny);
    memcpy(x0, m->feeds[0].data, nx);
    memcpy(y0, m->feeds[1].data, ny);
#ifdef _OPENMP
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    fill(&d, m, 100);
    CHECK(!memcmp(x0, m->feeds[0].data, nx) && !memcmp(y0, m->feeds[1].data, ny), "%s: 1 thread differs", what);
    omp_set_num_threads(4);
    fill(&d, m, 100);
    CHECK(!memcmp(x0, m->feeds[0].data, nx) && !memcmp(y0, m->feeds[1].data, ny), "%s: 4 threads differ", what);
    omp_set_num_threads(threads);
#else
    fill(&d, m, 100);
    CHECK(!memcmp(x0, m->feeds[0].data, nx) && !memcmp(y0, m->feeds[1].data, ny), "%s: refill differs", what);
#endif
    fill(&d, m, 101);
    CHECK(memcmp(x0, m->feeds[0].data, nx) != 0, "%s: samples 100 and 101 start the same batch", what);
    train_data_close(&d);

    /* batch 1, row by row: row b of the batch at 100 is sample 100 + b */
    int64_t batch = m->feeds[0].desc.dims[0];
    model one;
    int64_t xd[SC_MAX_RANK], ld[SC_MAX_RANK], od[SC_MAX_RANK];
    memcpy(xd, m->feeds[0].desc.dims, sizeof xd);
    memcpy(ld, m->feeds[1].desc.dims, sizeof ld);
    memcpy(od, m->g.values[m->tg.output].desc.dims, sizeof od);
    xd[0] = ld[0] = od[0] = 1;
    model_make(&one, m->feeds[0].desc.rank, xd, m->feeds[1].desc.dtype, m->feeds[1].desc.rank, ld,
               m->g.values[m->tg.output].desc.rank, od);
    train_data d1 = open_data(&one, seed);
    size_t rx = nx / (size_t)batch, ry = ny / (size_t)batch;
    bool same = true;
    for (int64_t b = 0; b < batch; b++) {
        fill(&d1, &one, 100 + (uint64_t)b);
        same = same && !memcmp((char *)x0 + b * rx, one.feeds[0].data, rx) &&
               !memcmp((char *)y0 + b * ry, one.feeds[1].data, ry);
    }
    CHECK(same, "%s: batch 1 row by row differs from the batch", what);
    train_data_close(&d1);
    model_free(&one);

    train_data d2 = open_data(m, seed + 1);
    fill(&d2, m, 100);
    CHECK(memcmp(x0, m->feeds[0].data, nx) != 0, "%s: seeds %llu and %llu give the same batch", what,
          (unsigned long long)seed, (unsigned long long)seed + 1);
    train_data_close(&d2);
    free(x0);
    free(y0);
}

/* Mean correlation of the pairs of rows whose classes are equal (same = true) or differ. */
static double class_corr(const float *x, int64_t n, const int64_t *cls, int64_t batch, bool same, int *pairs) {
    double s = 0;
    *pairs = 0;
    for (int64_t a = 0; a < batch; a++)
        for (int64_t b = a + 1; b < batch; b++)
            if ((cls[a] == cls[b]) == same) s += row_corr(x, n, a, b), ++*pairs;
    return *pairs ? s / *pairs : 0;
}

static void test_classifier(void) {
    enum { B = 64, C = 5 };
    model m;
    model_make(&m, 4, (int64_t[]){B, 3, 16, 16}, SC_I64, 1, (int64_t[]){B}, 2, (int64_t[]){B, C});
    train_data d = open_data(&m, 7);
    fill(&d, &m, 0);
    const int64_t *lab = m.feeds[1].data;
    bool in_range = true;
    int seen[C] = {0};
    for (int b = 0; b < B; b++) in_range = in_range && lab[b] >= 0 && lab[b] < C, seen[in_range ? lab[b] : 0]++;
    CHECK(in_range, "classifier: a label outside [0, %d)", C);
    for (int c = 0; c < C; c++) CHECK(seen[c] > 0, "classifier: class %d absent from a batch of %d", c, B);
    check_moments(&m.feeds[0], "classifier x");
    int ps, pd;
    double same = class_corr(m.feeds[0].data, 3 * 16 * 16, lab, B, true, &ps);
    double diff = class_corr(m.feeds[0].data, 3 * 16 * 16, lab, B, false, &pd);
    CHECK(ps > 0 && fabs(same - 0.5) < 0.05, "classifier: same-class rows correlate %.3f over %d pairs, expected 0.5",
          same, ps);
    CHECK(pd > 0 && fabs(diff) < 0.03, "classifier: rows of different classes correlate %.3f, expected 0", diff);
    train_data_close(&d);
    check_pure(&m, 7, "classifier");
    model_free(&m);
}

static void test_per_pixel(void) {
    enum { B = 16, C = 4, H = 32, W = 32 };
    model m;
    model_make(&m, 4, (int64_t[]){B, 3, H, W}, SC_I64, 3, (int64_t[]){B, H, W}, 4, (int64_t[]){B, C, H, W});
    train_data d = open_data(&m, 3);
    fill(&d, &m, 5);
    const int64_t *lab = m.feeds[1].data;
    const float *x = m.feeds[0].data;
    bool blocky = true, varied = false;
    for (int b = 0; b < B; b++)
        for (int y = 0; y < H; y++)
            for (int xx = 0; xx < W; xx++) {
                int64_t v = lab[(b * H + y) * W + xx], corner = lab[(b * H + y / 8 * 8) * W + xx / 8 * 8];
                blocky = blocky && v == corner && v >= 0 && v < C;
                varied = varied || v != lab[b * H * W];
            }
    CHECK(blocky, "per-pixel: labels not constant on the 8x8 blocks of a 32x32 grid, or outside [0, %d)", C);
    CHECK(varied, "per-pixel: every pixel of every sample has one class");
    check_moments(&m.feeds[0], "per-pixel x");
    /* Block (0, 0) of samples a and b: channel 0's 64 pixels correlate by 1/2 when the blocks'
     * classes agree, by 0 otherwise, whatever the samples' own classes are. */
    double same = 0, diff = 0;
    int ns = 0, nd = 0;
    for (int a = 0; a < B; a++)
        for (int b = a + 1; b < B; b++) {
            double s = 0;
            for (int ch = 0; ch < 3; ch++)
                for (int y = 0; y < 8; y++)
                    for (int xx = 0; xx < 8; xx++) {
                        int64_t e = (ch * H + y) * W + xx;
                        s += x[a * 3 * H * W + e] * x[b * 3 * H * W + e];
                    }
            s /= 3 * 64 * 2.0; /* mean 0, variance 2 */
            if (lab[a * H * W] == lab[b * H * W]) same += s, ns++;
            else diff += s, nd++;
        }
    CHECK(ns > 0 && fabs(same / ns - 0.5) < 0.1, "per-pixel: blocks of one class correlate %.3f, expected 0.5",
          ns ? same / ns : 0);
    CHECK(nd > 0 && fabs(diff / nd) < 0.06, "per-pixel: blocks of different classes correlate %.3f, expected 0",
          nd ? diff / nd : 0);
    train_data_close(&d);
    check_pure(&m, 3, "per-pixel");
    model_free(&m);
}

static void test_mse(void) {
    enum { B = 64, N = 6 };
    model m;
    model_make(&m, 2, (int64_t[]){B, 256}, SC_F32, 2, (int64_t[]){B, N}, 2, (int64_t[]){B, N});
    train_data d = open_data(&m, 11);
    fill(&d, &m, 0);
    const float *y = m.feeds[1].data;
    int distinct = 0;
    bool consistent = true;
    for (int b = 0; b < B; b++) {
        bool fresh = true;
        for (int a = 0; a < b && fresh; a++) {
            bool eq = !memcmp(&y[a * N], &y[b * N], N * sizeof(float));
            double r = row_corr(m.feeds[0].data, 256, a, b);
            /* equal targets mean one class: the inputs share the prototype */
            if (eq) fresh = false, consistent = consistent && r > 0.25;
        }
        distinct += fresh;
    }
    CHECK(distinct >= 2 && distinct <= 8, "MSE: %d distinct label rows in a batch of %d, expected 2..8 (K = 8)",
          distinct, B);
    CHECK(consistent, "MSE: rows with one target have uncorrelated inputs");
    check_moments(&m.feeds[0], "MSE x");
    train_data_close(&d);
    check_pure(&m, 11, "MSE");
    model_free(&m);
}

static void test_prefetch(void) {
    enum { B = 8 };
    model m;
    model_make(&m, 4, (int64_t[]){B, 3, 8, 8}, SC_I64, 1, (int64_t[]){B}, 2, (int64_t[]){B, 3});
    train_data d = open_data(&m, 5);
    size_t nx = bytes_of(&m.feeds[0]), ny = bytes_of(&m.feeds[1]);
    fill(&d, &m, 200);
    void *x200 = malloc(nx), *y200 = malloc(ny);
    memcpy(x200, m.feeds[0].data, nx);
    memcpy(y200, m.feeds[1].data, ny);
    train_prefetch p;
    sc_status st = train_prefetch_open(&p, true, &d, &m.g, m.feeds, 2);
    CHECK(!st, "train_prefetch_open: %s", st ? sc_status_message(st) : "");
    memset(m.feeds[0].data, 0, nx);
    train_prefetch_start(&p, 200);
    CHECK(!train_prefetch_take(&p, 192, m.feeds), "prefetch: the batch at 200 taken for sample 192");
    CHECK(train_prefetch_take(&p, 200, m.feeds), "prefetch: the batch at 200 not taken for sample 200");
    CHECK(!memcmp(x200, m.feeds[0].data, nx) && !memcmp(y200, m.feeds[1].data, ny),
          "prefetch: the batch drawn ahead differs from a direct fill");
    CHECK(!train_prefetch_take(&p, 200, m.feeds), "prefetch: a batch taken twice");
    train_prefetch_start(&p, 200);
    train_prefetch_drop(&p);
    CHECK(!train_prefetch_take(&p, 200, m.feeds), "prefetch: a dropped batch taken");
    train_prefetch_close(&p);
    train_prefetch off;
    st = train_prefetch_open(&off, false, &d, &m.g, m.feeds, 2);
    train_prefetch_start(&off, 200);
    CHECK(!st && !train_prefetch_take(&off, 200, m.feeds), "prefetch off took a batch");
    train_prefetch_close(&off);
    free(x200);
    free(y200);
    train_data_close(&d);
    model_free(&m);
}

int main(void) {
    test_classifier();
    test_per_pixel();
    test_mse();
    test_prefetch();
    if (failures) printf("%d check(s) failed\n", failures);
    else printf("train_data: all checks passed\n");
    return failures != 0;
}
