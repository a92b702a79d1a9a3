/* Training data sources (train_data.h): synthetic, .npy arrays, token files; batches by global sample
 * number through a per-epoch permutation. */
#include "train/train_data.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/free_all.h"
#include "core/npy.h"

uint64_t td_mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* A SplitMix64 stream; streams for different purposes start from different mixed keys. */
typedef struct { uint64_t s; } td_rng;

static td_rng rng_for(uint64_t seed, uint64_t purpose, uint64_t index) {
    return (td_rng){td_mix64(td_mix64(seed ^ td_mix64(purpose)) ^ index)};
}
static uint64_t rng_next(td_rng *r) { return td_mix64(r->s += 0x9e3779b97f4a7c15ULL); }
static uint64_t rng_below(td_rng *r, uint64_t n) { return n ? rng_next(r) % n : 0; }

enum { PURPOSE_SAMPLE = 1, PURPOSE_PERM = 2, PURPOSE_PROTO = 3, PURPOSE_TARGET = 4, PURPOSE_SUCC = 5 };

/* ---- element access by dtype ---- */

static bool dtype_is_int(sc_dtype t) {
    return t == SC_I8 || t == SC_I16 || t == SC_I32 || t == SC_I64 || t == SC_U8 || t == SC_U16 || t == SC_U32 ||
           t == SC_U64 || t == SC_BOOL;
}

static double elem_get(const void *p, sc_dtype t, int64_t i) {
    switch (t) {
    case SC_F32: return ((const float *)p)[i];
    case SC_F64: return ((const double *)p)[i];
    case SC_I8: return ((const int8_t *)p)[i];
    case SC_I16: return ((const int16_t *)p)[i];
    case SC_I32: return ((const int32_t *)p)[i];
    case SC_I64: return (double)((const int64_t *)p)[i];
    case SC_U8:
    case SC_BOOL: return ((const uint8_t *)p)[i];
    case SC_U16: return ((const uint16_t *)p)[i];
    case SC_U32: return ((const uint32_t *)p)[i];
    case SC_U64: return (double)((const uint64_t *)p)[i];
    default: return NAN;
    }
}

static void elem_set(void *p, sc_dtype t, int64_t i, double v) {
    switch (t) {
    case SC_F32: ((float *)p)[i] = (float)v; break;
    case SC_F64: ((double *)p)[i] = v; break;
    case SC_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    case SC_I16: ((int16_t *)p)[i] = (int16_t)v; break;
    case SC_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case SC_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case SC_U8:
    case SC_BOOL: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case SC_U16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case SC_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case SC_U64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    default: SC_ASSERT(!"unsupported dtype");
    }
}

static bool dtype_supported(sc_dtype t) { return t == SC_F32 || t == SC_F64 || dtype_is_int(t); }


static int64_t sample_numel(const sc_desc *d) {
    int64_t n = 1;
    for (int i = 1; i < d->rank; i++) n *= d->dims[i];
    return n;
}

/* ---- model side: which inputs are data, what the labels mean ---- */

/* Integer inputs named as masks or positions (attention_mask, position_ids) are not data to draw. */
static td_role input_role(const sc_value *v) {
    switch (graph_input_role(v)) {
    case SC_INPUT_MASK: return TD_ROLE_MASK;
    case SC_INPUT_POSITIONS: return TD_ROLE_POSITIONS;
    default: return TD_ROLE_DATA;
    }
}

/* Row `row` of a mask (all ones) or position input (0..T-1 along its last dim). */
static void role_default(const train_data *d, int j, sc_tensor *x, int64_t row) {
    int64_t n = sample_numel(&x->desc), last = x->desc.dims[x->desc.rank - 1];
    for (int64_t e = 0; e < n; e++)
        elem_set(x->data, x->desc.dtype, row * n + e, d->role[j] == TD_ROLE_MASK ? 1.0 : (double)(e % last));
}

static sc_status model_describe(train_data *d, const sc_graph *g, const sc_training_graph *tg,
                                const sc_trainer_config *cfg) {
    d->labels = tg->labels;
    d->ignore_index = cfg->train.ignore_index;
    for (int i = 0; i < g->n_inputs; i++) {
        int v = g->inputs[i];
        if (v == tg->labels || v == tg->lr || v == tg->step || v == tg->loss_scale || v == tg->inv_loss_scale) continue;
        const sc_value *val = &g->values[v];
        if (d->n_data == 8) return sc_errorf("the model has more than 8 data inputs; not supported");
        if (val->desc.rank < 1 || val->desc.dims[0] != d->batch || !dtype_supported(val->desc.dtype)) {
            char s[160];
            return sc_errorf("input '%s' is %s: training feeds inputs of a numeric dtype whose dim 0 is the batch (%lld)",
                             val->name, sc_desc_str(&val->desc, s, sizeof s), (long long)d->batch);
        }
        d->vocab[d->n_data] = dtype_is_int(val->desc.dtype) ? graph_gather_rows(g, v) : 0;
        d->role[d->n_data] = input_role(val);
        d->data_inputs[d->n_data++] = v;
    }
    const sc_desc *ld = &g->values[tg->labels].desc, *od = &g->values[tg->output].desc;
    if (ld->rank < 1 || ld->dims[0] != d->batch || !dtype_supported(ld->dtype)) {
        char s[160];
        return sc_errorf("labels input is %s; expected dim 0 = batch %lld", sc_desc_str(ld, s, sizeof s),
                         (long long)d->batch);
    }
    if (dtype_is_int(ld->dtype)) {
        d->lm = od->rank == 3 && ld->rank == 2 && ld->dims[1] == od->dims[1];
        d->classes = d->lm ? od->dims[2] : od->dims[1];
        d->per_pixel = !d->lm && ld->rank >= 2;
        d->k = d->classes;
        d->lm_input = -1;
        for (int j = 0; d->lm && j < d->n_data; j++) {
            const sc_desc *xd = &g->values[d->data_inputs[j]].desc;
            if (d->vocab[j] > 0 && xd->rank == 2 && xd->dims[1] == ld->dims[1] && d->lm_input < 0) d->lm_input = j;
        }
        if (d->lm && d->lm_input < 0) d->lm = false; /* [N,C,L] scores of a 1-d task, not a language model */
        if (d->lm) d->seq = ld->dims[1];
        if (d->lm && d->vocab[d->lm_input] != d->classes)
            sc_log(SC_LOG_WARN, "input '%s' indexes %lld embedding rows but the logits have %lld classes",
                   g->values[d->data_inputs[d->lm_input]].name, (long long)d->vocab[d->lm_input], (long long)d->classes);
    } else {
        d->classes = 0;
        d->k = 8;
    }
    if (d->k < 1) return sc_errorf("the model output has no classes (%lld)", (long long)d->k);
    return SC_OK;
}

/* ---- synthetic ---- */

/* Float data are noise + proto and MSE labels target, each value a pure function of (seed, what,
 * element) with no table behind it: a table of K class prototypes the size of an input sample took
 * 602 MB and 4.5 s to draw for a 1000-class model at 224x224, and drawing the noise one Box-Muller
 * normal after another in a sample's stream took 300 ms per ResNet-50 batch of 64 on one thread,
 * several times a GPU's step. Each value is the centred sum of four 16-bit uniforms from one
 * SplitMix64 hash (Irwin-Hall: mean 0, variance 1, within +-2 sqrt 3), so a batch's elements are
 * drawn independently, in any order, on every thread, with the same bits for any thread count. */
enum { PURPOSE_NOISE = 6 };

/* The stream key of (purpose, index). */
static uint64_t key_for(uint64_t seed, uint64_t purpose, uint64_t index) { return rng_for(seed, purpose, index).s; }

static inline float value_at(uint64_t key, int64_t e) {
    uint64_t h = td_mix64(key + (uint64_t)e * 0x9e3779b97f4a7c15ULL);
    uint32_t s = (uint32_t)(h & 0xffff) + (uint32_t)((h >> 16) & 0xffff) + (uint32_t)((h >> 32) & 0xffff) +
                 (uint32_t)(h >> 48);
    /* four uniforms on {0..65535}: mean 4 * 32767.5, variance 4 * (65536^2 - 1) / 12 */
    return (float)(((double)s - 131070.0) * (1.0 / 37837.23));
}

/* Input j's prototype of class c, and the MSE target of class c. */
static uint64_t proto_key(const train_data *d, int j, int64_t c) {
    return key_for(d->seed, PURPOSE_PROTO + 16 * (uint64_t)j, (uint64_t)c);
}
static uint64_t noise_key(const train_data *d, int j, int64_t idx) {
    return key_for(d->seed, PURPOSE_NOISE + 16 * (uint64_t)j, (uint64_t)idx);
}

static sc_status synthetic_open(train_data *d, const sc_graph *g) {
    (void)g;
    d->n = TD_SYNTHETIC_N;
    if (d->lm) {
        int64_t v = d->vocab[d->lm_input];
        d->succ = malloc(sizeof(int64_t) * (size_t)v);
        if (!d->succ) return sc_errorf("out of memory for synthetic data");
        td_rng r = rng_for(d->seed, PURPOSE_SUCC, 0);
        for (int64_t i = 0; i < v; i++) d->succ[i] = (int64_t)rng_below(&r, (uint64_t)v);
    }
    snprintf(d->desc, sizeof d->desc, "synthetic (%s, %d samples, seed %llu)",
             d->lm ? "Markov-chain tokens" : d->classes ? (d->per_pixel ? "per-pixel classes" : "classes") : "regression",
             TD_SYNTHETIC_N, (unsigned long long)d->seed);
    return SC_OK;
}

#define GRID 4

/* A sample's latent class and, for per-pixel labels, its grid of block classes. */
typedef struct {
    int64_t idx, c, blocks[GRID * GRID];
} sample_head;

/* The grid block of element e of a per-pixel sample with spatial dims (h, w) last. */
static int block_of(const sc_desc *desc, int64_t e) {
    int64_t H = desc->dims[desc->rank - 2], W = desc->dims[desc->rank - 1];
    int64_t pix = e % (H * W), y = pix / W, x = pix % W;
    return (int)((y * GRID / H) * GRID + x * GRID / W);
}

static int64_t block_class(const int64_t *blocks, const sc_desc *desc, int64_t e) { return blocks[block_of(desc, e)]; }

/* Everything of sample `row` but its float data: the class, labels, tokens, integer inputs and role
 * defaults, from the sample's own stream (seed, sample index). */
static void synthetic_head(train_data *d, int64_t idx, int64_t row, sc_tensor *feeds, const int *pos, int labels_pos,
                           sample_head *h) {
    td_rng r = rng_for(d->seed, PURPOSE_SAMPLE, (uint64_t)idx);
    h->idx = idx;
    h->c = (int64_t)rng_below(&r, (uint64_t)d->k);
    for (int i = 0; i < GRID * GRID; i++) h->blocks[i] = (int64_t)rng_below(&r, (uint64_t)d->k);
    sc_tensor *lab = &feeds[labels_pos];
    int64_t ln = sample_numel(&lab->desc);
    bool pix_ok = d->per_pixel && lab->desc.rank >= 3;
    if (d->lm) {
        sc_tensor *ids = &feeds[pos[d->lm_input]];
        int64_t T = ln, V = d->vocab[d->lm_input], cur = (int64_t)rng_below(&r, (uint64_t)V);
        for (int64_t t = 0; t < T; t++) {
            int64_t next = rng_below(&r, 4) ? d->succ[cur] : (int64_t)rng_below(&r, (uint64_t)V);
            elem_set(ids->data, ids->desc.dtype, row * T + t, (double)cur);
            elem_set(lab->data, lab->desc.dtype, row * ln + t, (double)next);
            cur = next;
        }
    } else {
        uint64_t target = key_for(d->seed, PURPOSE_TARGET, (uint64_t)h->c);
        for (int64_t e = 0; e < ln; e++) {
            double v = d->classes ? (double)(pix_ok ? block_class(h->blocks, &lab->desc, e) : h->c) : value_at(target, e);
            elem_set(lab->data, lab->desc.dtype, row * ln + e, v);
        }
    }
    for (int j = 0; j < d->n_data; j++) {
        if (d->lm && j == d->lm_input) continue;
        sc_tensor *x = &feeds[pos[j]];
        int64_t xn = sample_numel(&x->desc);
        if (d->role[j] != TD_ROLE_DATA) {
            role_default(d, j, x, row);
        } else if (!sc_dtype_is_float(x->desc.dtype)) {
            uint64_t hi = d->vocab[j] > 0 ? (uint64_t)d->vocab[j] : 10;
            for (int64_t e = 0; e < xn; e++) elem_set(x->data, x->desc.dtype, row * xn + e, (double)rng_below(&r, hi));
        }
    }
}

/* Float data input j of the whole batch: element e of row b is noise(b, e) + proto(class, e), the
 * class being the sample's, or its pixel's block's for per-pixel labels. */
static void synthetic_floats(const train_data *d, int j, sc_tensor *x, const sc_tensor *lab, const sample_head *heads) {
    int64_t xn = sample_numel(&x->desc), total = d->batch * xn;
    bool pix = d->per_pixel && lab->desc.rank >= 3 && x->desc.rank >= 3;
#pragma omp parallel for schedule(static) if (total >= (1 << 15))
    for (int64_t b = 0; b < d->batch; b++) {
        const sample_head *h = &heads[b];
        uint64_t noise = noise_key(d, j, h->idx), proto = proto_key(d, j, h->c), block_proto[GRID * GRID];
        for (int i = 0; pix && i < GRID * GRID; i++) block_proto[i] = proto_key(d, j, h->blocks[i]);
        for (int64_t e = 0; e < xn; e++) {
            float v = value_at(noise, e) + value_at(pix ? block_proto[block_of(&x->desc, e)] : proto, e);
            if (x->desc.dtype == SC_F32) ((float *)x->data)[b * xn + e] = v;
            else elem_set(x->data, x->desc.dtype, b * xn + e, v);
        }
    }
}

/* ---- .npy arrays ---- */

/* Converts t in place to dtype `to` (through double; exact for the integers token ids and labels use). */
static sc_status tensor_convert(sc_tensor *t, sc_dtype to, const char *file) {
    if (t->desc.dtype == to) return SC_OK;
    if (!dtype_supported(t->desc.dtype))
        return sc_errorf("%s: dtype %s is not supported for training data", file, sc_dtype_name(t->desc.dtype));
    int64_t n = sc_desc_numel(&t->desc);
    void *p = malloc(sc_dtype_size(to) * (size_t)(n ? n : 1));
    if (!p) return sc_errorf("%s: out of memory converting to %s", file, sc_dtype_name(to));
    for (int64_t i = 0; i < n; i++) elem_set(p, to, i, elem_get(t->data, t->desc.dtype, i));
    free(t->data);
    t->data = p;
    t->desc.dtype = to;
    return SC_OK;
}

/* Integer values of t (before conversion) must be whole and in [0, hi), or equal `ignore` when allowed. */
static sc_status check_ids(const sc_tensor *t, const char *file, const char *what, int64_t hi, bool has_ignore,
                           int64_t ignore) {
    int64_t n = sc_desc_numel(&t->desc);
    for (int64_t i = 0; i < n; i++) {
        double v = elem_get(t->data, t->desc.dtype, i);
        if (has_ignore && v == (double)ignore) continue;
        if (!(v >= 0 && v < (double)hi) || v != floor(v))
            return sc_errorf("%s: %s at flat index %lld is %g, outside [0, %lld)%s", file, what, (long long)i, v,
                             (long long)hi, has_ignore ? " and not the ignore index" : "");
    }
    return SC_OK;
}

static sc_status npy_check_rows(const sc_tensor *t, const sc_desc *want, const char *file, const char *what) {
    bool ok = t->desc.rank == want->rank;
    for (int i = 1; ok && i < want->rank; i++) ok = t->desc.dims[i] == want->dims[i];
    if (!ok || t->desc.dims[0] < 1) {
        char a[160], b[160];
        return sc_errorf("%s: %s must be [N%s] with N >= 1 (the model's is %s); the file holds %s", file, what,
                         want->rank > 1 ? ", <dims after the batch>" : "", sc_desc_str(want, a, sizeof a),
                         sc_desc_str(&t->desc, b, sizeof b));
    }
    return SC_OK;
}

/* The data input entry "NAME=x.npy" or "x.npy" feeds (index into d->data_inputs), *path its file. */
static sc_status npy_target(const train_data *d, const sc_graph *g, const char *entry, int *j, const char **path) {
    const char *eq = strchr(entry, '=');
    *path = eq ? eq + 1 : entry;
    *j = -1;
    if (eq) {
        for (int k = 0; k < d->n_data; k++)
            if (strlen(g->values[d->data_inputs[k]].name) == (size_t)(eq - entry) &&
                !strncmp(g->values[d->data_inputs[k]].name, entry, (size_t)(eq - entry)))
                *j = k;
        if (*j < 0) return sc_errorf("--data %s: the model has no data input '%.*s'", entry, (int)(eq - entry), entry);
        return SC_OK;
    }
    for (int k = 0; k < d->n_data; k++) {
        if (d->role[k] != TD_ROLE_DATA) continue;
        if (*j >= 0)
            return sc_errorf("--data %s: the model has several data inputs ('%s', '%s', ...): give --data NAME=FILE.npy "
                             "for each", entry, g->values[d->data_inputs[*j]].name, g->values[d->data_inputs[k]].name);
        *j = k;
    }
    if (*j < 0) return sc_errorf("--data %s: the model has no data input to feed", entry);
    return SC_OK;
}

static sc_status npy_input(train_data *d, const sc_graph *g, int j, const char *path, const char *labels_path) {
    const sc_desc *xd = &g->values[d->data_inputs[j]].desc;
    if (d->xs[j].data) return sc_errorf("%s: input '%s' is given twice", path, g->values[d->data_inputs[j]].name);
    SC_TRY(sc_npy_read(path, &d->xs[j]));
    SC_TRY(npy_check_rows(&d->xs[j], xd, path, "data"));
    if (d->xs[j].desc.dims[0] != d->y.desc.dims[0])
        return sc_errorf("%s holds %lld samples but %s holds %lld", path, (long long)d->xs[j].desc.dims[0], labels_path,
                         (long long)d->y.desc.dims[0]);
    if (dtype_is_int(xd->dtype) && d->vocab[j] > 0) SC_TRY(check_ids(&d->xs[j], path, "token id", d->vocab[j], false, 0));
    if (d->role[j] == TD_ROLE_MASK) SC_TRY(check_ids(&d->xs[j], path, "mask value", 2, false, 0));
    return tensor_convert(&d->xs[j], xd->dtype, path);
}

static sc_status npy_open(train_data *d, const sc_graph *g, const sc_trainer_config *cfg) {
    if (!cfg->labels_path) return sc_errorf("--data %s needs --labels with the loss targets", cfg->data_path);
    const sc_desc *ld = &g->values[d->labels].desc;
    SC_TRY(sc_npy_read(cfg->labels_path, &d->y));
    SC_TRY(npy_check_rows(&d->y, ld, cfg->labels_path, "labels"));
    if (d->classes) SC_TRY(check_ids(&d->y, cfg->labels_path, "class id", d->classes, true, d->ignore_index));
    SC_TRY(tensor_convert(&d->y, ld->dtype, cfg->labels_path));
    const char *entries[8] = {cfg->data_path};
    int n = 1;
    for (int i = 0; i < cfg->n_more_data && n < 8; i++) entries[n++] = cfg->more_data[i];
    for (int i = 0; i < n; i++) {
        int j;
        const char *path;
        SC_TRY(npy_target(d, g, entries[i], &j, &path));
        SC_TRY(npy_input(d, g, j, path, cfg->labels_path));
    }
    for (int j = 0; j < d->n_data; j++)
        if (!d->xs[j].data && d->role[j] == TD_ROLE_DATA)
            return sc_errorf("input '%s' has no data: give --data %s=FILE.npy", g->values[d->data_inputs[j]].name,
                             g->values[d->data_inputs[j]].name);
    d->n = d->y.desc.dims[0];
    snprintf(d->desc, sizeof d->desc, "%s%s + %s (%lld samples)", cfg->data_path, n > 1 ? " and more" : "",
             cfg->labels_path, (long long)d->n);
    return SC_OK;
}

/* ---- token file ---- */

static sc_status file_read_all(const char *path, void **data, int64_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return sc_errorf("%s: cannot open: %s", path, strerror(errno));
    sc_status st = SC_OK;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) st = sc_errorf("%s: cannot determine its size", path);
    *data = st ? NULL : malloc((size_t)(n ? n : 1));
    if (!st && !*data) st = sc_errorf("%s: out of memory reading %ld bytes", path, n);
    if (!st && fread(*data, 1, (size_t)n, f) != (size_t)n) st = sc_errorf("%s: read failed", path);
    fclose(f);
    *size = n;
    return st;
}

static sc_status tokens_open(train_data *d, const sc_graph *g, const sc_trainer_config *cfg) {
    const char *path = cfg->tokens_path;
    if (!d->lm)
        return sc_errorf("--tokens needs a language model (integer ids [B,T] in, logits [B,T,V] out, "
                         "cross-entropy loss); this model is not one");
    for (int j = 0; j < d->n_data; j++)
        if (j != d->lm_input && d->role[j] == TD_ROLE_DATA)
            return sc_errorf("--tokens feeds the token ids; the model's input '%s' is neither an attention mask nor "
                             "position ids: train with --data NAME=FILE.npy for each input", g->values[d->data_inputs[j]].name);
    if (cfg->token_dtype != SC_U16 && cfg->token_dtype != SC_I32)
        return sc_errorf("token files hold uint16 or int32 ids, not %s", sc_dtype_name(cfg->token_dtype));
    int64_t bytes = 0;
    SC_TRY(file_read_all(path, &d->tokens, &bytes));
    size_t es = sc_dtype_size(cfg->token_dtype);
    if (bytes % (int64_t)es)
        return sc_errorf("%s: %lld bytes is not a whole number of %s token ids", path, (long long)bytes,
                         cfg->token_dtype == SC_U16 ? "uint16" : "int32");
    d->token_dtype = cfg->token_dtype;
    d->n_tokens = bytes / (int64_t)es;
    int64_t V = d->vocab[d->lm_input];
    for (int64_t i = 0; i < d->n_tokens; i++) {
        double v = elem_get(d->tokens, d->token_dtype, i);
        if (v < 0 || v >= (double)V)
            return sc_errorf("%s: token %lld is %.0f, outside the vocabulary [0, %lld)", path, (long long)i, v,
                             (long long)V);
    }
    int64_t T = d->seq;
    d->n = (d->n_tokens - 1) / T;
    if (d->n < 1)
        return sc_errorf("%s: %lld tokens are fewer than one window of seq + 1 = %lld", path, (long long)d->n_tokens,
                         (long long)(T + 1));
    snprintf(d->desc, sizeof d->desc, "%s (%lld tokens, %lld windows of %lld)", path, (long long)d->n_tokens,
             (long long)d->n, (long long)T + 1);
    return SC_OK;
}

static void token_window(train_data *d, int64_t idx, int64_t row, sc_tensor *ids, sc_tensor *lab) {
    int64_t T = d->seq, start = idx * T;
    for (int64_t t = 0; t < T; t++) {
        elem_set(ids->data, ids->desc.dtype, row * T + t, elem_get(d->tokens, d->token_dtype, start + t));
        elem_set(lab->data, lab->desc.dtype, row * T + t, elem_get(d->tokens, d->token_dtype, start + t + 1));
    }
}

static void npy_row(const sc_tensor *src, int64_t idx, sc_tensor *dst, int64_t row) {
    size_t bytes = (size_t)sample_numel(&src->desc) * sc_dtype_size(src->desc.dtype);
    memcpy((char *)dst->data + (size_t)row * bytes, (const char *)src->data + (size_t)idx * bytes, bytes);
}

/* ---- epochs ---- */

/* Fisher-Yates with the epoch's own stream. */
static sc_status perm_for_epoch(train_data *d, int64_t epoch) {
    if (d->perm && d->perm_epoch == epoch) return SC_OK;
    if (!d->perm) {
        d->perm = malloc(sizeof(int64_t) * (size_t)d->n);
        if (!d->perm) return sc_errorf("out of memory for the shuffle of %lld samples", (long long)d->n);
    }
    for (int64_t i = 0; i < d->n; i++) d->perm[i] = i;
    td_rng r = rng_for(d->seed, PURPOSE_PERM, (uint64_t)epoch);
    for (int64_t i = d->n - 1; i > 0; i--) {
        int64_t j = (int64_t)rng_below(&r, (uint64_t)i + 1), tmp = d->perm[i];
        d->perm[i] = d->perm[j];
        d->perm[j] = tmp;
    }
    d->perm_epoch = epoch;
    return SC_OK;
}

sc_status train_data_open(train_data *d, const sc_graph *g, const sc_training_graph *tg, const sc_trainer_config *cfg) {
    memset(d, 0, sizeof *d);
    d->seed = cfg->seed;
    d->batch = cfg->batch > 0 ? cfg->batch : 1;
    d->perm_epoch = -1;
    d->lm_input = -1;
    sc_status st = model_describe(d, g, tg, cfg);
    if (!st) {
        if (cfg->tokens_path) {
            d->kind = TD_TOKENS;
            st = tokens_open(d, g, cfg);
        } else if (cfg->data_path) {
            d->kind = TD_NPY;
            st = npy_open(d, g, cfg);
        } else {
            d->kind = TD_SYNTHETIC;
            st = synthetic_open(d, g);
        }
    }
    if (st) train_data_close(d);
    return st;
}

sc_status train_data_fill(train_data *d, const sc_graph *g, uint64_t sample, sc_tensor *feeds) {
    int pos[8], labels_pos = -1;
    for (int i = 0; i < g->n_inputs; i++) {
        if (g->inputs[i] == d->labels) labels_pos = i;
        for (int j = 0; j < d->n_data; j++)
            if (g->inputs[i] == d->data_inputs[j]) pos[j] = i;
    }
    SC_ASSERT(labels_pos >= 0);
    sample_head *heads = NULL;
    if (d->kind == TD_SYNTHETIC && !(heads = malloc(sizeof *heads * (size_t)d->batch)))
        return sc_errorf("out of memory for synthetic data");
    for (int64_t b = 0; b < d->batch; b++) {
        uint64_t s = sample + (uint64_t)b;
        sc_status st = perm_for_epoch(d, (int64_t)(s / (uint64_t)d->n));
        if (st) {
            free(heads);
            return st;
        }
        int64_t idx = d->perm[s % (uint64_t)d->n];
        switch (d->kind) {
        case TD_SYNTHETIC: synthetic_head(d, idx, b, feeds, pos, labels_pos, &heads[b]); break;
        case TD_NPY:
            for (int j = 0; j < d->n_data; j++) {
                if (d->xs[j].data) npy_row(&d->xs[j], idx, &feeds[pos[j]], b);
                else role_default(d, j, &feeds[pos[j]], b);
            }
            npy_row(&d->y, idx, &feeds[labels_pos], b);
            break;
        case TD_TOKENS:
            token_window(d, idx, b, &feeds[pos[d->lm_input]], &feeds[labels_pos]);
            for (int j = 0; j < d->n_data; j++)
                if (j != d->lm_input) role_default(d, j, &feeds[pos[j]], b);
            break;
        }
    }
    for (int j = 0; heads && j < d->n_data; j++)
        if (d->role[j] == TD_ROLE_DATA && !(d->lm && j == d->lm_input) &&
            sc_dtype_is_float(feeds[pos[j]].desc.dtype))
            synthetic_floats(d, j, &feeds[pos[j]], &feeds[labels_pos], heads);
    free(heads);
    return SC_OK;
}

void train_data_close(train_data *d) {
    free(d->succ);
    for (int j = 0; j < 8; j++) free(d->xs[j].data);
    SC_FREE_ALL(d->y.data, d->tokens, d->perm);
    memset(d, 0, sizeof *d);
}
