/* Training-state checkpoints (trainer.h): DIR/state.bin, written as DIR/state.bin.tmp, fsync'd and
 * renamed, then the folder fsync'd; a process killed at any moment leaves the previous state.bin
 * whole. All integers little-endian (the hosts we build for).
 *
 * Format, version 2:
 *   char  magic[8] = "SCORCHTS"
 *   u32   version = 2
 *   u32   n_tensors
 *   u64   step           steps done
 *   u64   sample         global sample number of the next batch (the data position)
 *   u64   seed           every random draw is counter-based on (seed, sample / step), so this and
 *                        the two counters are the whole RNG state
 *   u64   total          steps of the run that wrote it (informational)
 *   u64   body_bytes     bytes of the tensor records that follow
 *   u64   precision      the sc_dtype the run computed in (f32, bf16, f16); the records are the
 *                        f32 master weights and state whatever it was, so a run may resume at another
 *                        precision (with a warning)
 *   f64   loss_scale     fp16's dynamic loss scaler (loss_scale.c): the next step's scale, the good
 *   u64   growth_tracker steps since it changed, and the skipped steps (the optimizer's step count
 *   u64   skipped        is step - skipped); 0 0 0 when the run did not scale
 *   n_tensors records:   u32 name_len, name, u32 dtype, u32 rank, i64 dims[rank], u64 nbytes, data
 *   u64   checksum       of every byte before it (ck_* below)
 * Version 1 (still read) ends the header at body_bytes: an fp32 run without a scaler.
 * A file whose size is not the header's + body_bytes + 8, or whose checksum differs, is rejected as
 * truncated or corrupt and nothing is loaded. The records hold every parameter (trainable, frozen and the
 * BatchNormalization running statistics) and every optimizer state value, by graph value name.
 *
 * Data parallel: rank 0 writes the file. With a sharded optimizer each rank holds its own buckets'
 * optimizer state; the others send theirs to rank 0, which writes them after its own records, so the
 * file is the one an unsharded run writes (records in another order). Reading, a rank of a sharded
 * run skips the records of state it does not own.
 *
 * SCORCH_TEST_SAVE_SLEEP_US (environment): sleep that long after each record while writing, so the
 * kill-while-saving test can hit a save in progress.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/comm.h"
#include "core/free_all.h"
#include "train/trainer_internal.h"

static const char MAGIC[8] = {'S', 'C', 'O', 'R', 'C', 'H', 'T', 'S'};
#define STATE_VERSION 2u
#define HEADER_BYTES_V1 56
#define HEADER_BYTES 88
#define HEADER_WORDS 9 /* the u64/f64 fields after n_tensors */

/* ---- checksum: 64-bit words folded with rotate-multiply, bytes streamed through a carry ---- */

typedef struct {
    uint64_t h, len;
    uint8_t buf[8];
    int nbuf;
} ck_state;

static inline uint64_t ck_word(uint64_t h, uint64_t w) {
    h ^= w;
    h = (h << 27) | (h >> 37);
    return h * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL;
}

static void ck_update(ck_state *c, const void *data, size_t n) {
    const uint8_t *p = data;
    c->len += n;
    while (n && c->nbuf) {
        c->buf[c->nbuf++] = *p++;
        n--;
        if (c->nbuf == 8) {
            uint64_t w;
            memcpy(&w, c->buf, 8);
            c->h = ck_word(c->h, w);
            c->nbuf = 0;
        }
    }
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c->h = ck_word(c->h, w);
    }
    while (n--) c->buf[c->nbuf++] = *p++;
}

static uint64_t ck_final(const ck_state *c) {
    uint64_t w = 0;
    memcpy(&w, c->buf, (size_t)c->nbuf);
    return td_mix64(ck_word(ck_word(c->h, w), c->len));
}

/* ---- writing ---- */

typedef struct {
    FILE *f;
    ck_state ck;
    const char *path;
    bool failed;
} writer;

static void put(writer *w, const void *p, size_t n) {
    if (w->failed) return;
    ck_update(&w->ck, p, n);
    if (fwrite(p, 1, n, w->f) != n) w->failed = true;
}
static void put_u32(writer *w, uint32_t v) { put(w, &v, 4); }
static void put_u64(writer *w, uint64_t v) { put(w, &v, 8); }

static uint64_t record_bytes(const sc_value *v) {
    return 4 + strlen(v->name) + 4 + 4 + 8 * (uint64_t)v->desc.rank + 8 + (uint64_t)sc_desc_bytes(&v->desc);
}

static void put_record(writer *w, const sc_value *v) {
    uint32_t len = (uint32_t)strlen(v->name);
    put_u32(w, len);
    put(w, v->name, len);
    put_u32(w, (uint32_t)v->desc.dtype);
    put_u32(w, (uint32_t)v->desc.rank);
    put(w, v->desc.dims, 8 * (size_t)v->desc.rank);
    put_u64(w, (uint64_t)sc_desc_bytes(&v->desc));
    put(w, v->data, (size_t)sc_desc_bytes(&v->desc));
}

static char *path_join(const char *dir, const char *file) {
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, file);
    return p;
}

static void fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* Records the file holds beside the session's own: the other ranks' optimizer state under a sharded
 * optimizer (shard_records), already serialised. */
typedef struct {
    const char *bytes;
    uint64_t size;
    uint32_t count;
} extra_records;

static sc_status state_write_file(sc_trainer *t, const char *tmp, const extra_records *extra) {
    const sc_graph *g = &t->model->graph;
    writer w = {.f = fopen(tmp, "wb"), .path = tmp};
    if (!w.f) return sc_errorf("%s: cannot create: %s", tmp, strerror(errno));
    const char *sleep_env = getenv("SCORCH_TEST_SAVE_SLEEP_US");
    useconds_t pause = sleep_env ? (useconds_t)strtoul(sleep_env, NULL, 10) : 0;
    uint64_t body = extra->size;
    for (int i = 0; i < t->n_state; i++) body += record_bytes(&g->values[t->state_ids[i]]);
    put(&w, MAGIC, 8);
    put_u32(&w, STATE_VERSION);
    put_u32(&w, (uint32_t)t->n_state + extra->count);
    put_u64(&w, (uint64_t)t->step);
    put_u64(&w, t->sample);
    put_u64(&w, t->cfg.seed);
    put_u64(&w, (uint64_t)t->total);
    put_u64(&w, body);
    bool scaled = t->tg.loss_scale >= 0;
    double scale = scaled ? t->loss_scale : 0;
    uint64_t scale_bits;
    memcpy(&scale_bits, &scale, 8);
    put_u64(&w, (uint64_t)(t->cfg.precision ? t->cfg.precision : SC_F32));
    put_u64(&w, scale_bits);
    put_u64(&w, scaled ? (uint64_t)t->growth_tracker : 0);
    put_u64(&w, scaled ? (uint64_t)t->skipped : 0);
    for (int i = 0; i < t->n_state; i++) {
        put_record(&w, &g->values[t->state_ids[i]]);
        if (pause) {
            fflush(w.f);
            usleep(pause);
        }
    }
    if (extra->size) put(&w, extra->bytes, (size_t)extra->size);
    uint64_t sum = ck_final(&w.ck);
    if (!w.failed && fwrite(&sum, 1, 8, w.f) != 8) w.failed = true;
    if (!w.failed && (fflush(w.f) != 0 || fsync(fileno(w.f)) != 0)) w.failed = true;
    int saved_errno = errno;
    if (fclose(w.f) != 0) w.failed = true;
    if (w.failed)
        return sc_errorf("%s: write failed: %s; the previous state.bin, if any, is left as it was", tmp,
                         strerror(saved_errno ? saved_errno : errno));
    return SC_OK;
}

static sc_status state_write(sc_trainer *t, const char *dir, const extra_records *extra) {
    if (t->spent) return sc_errorf("the session cannot continue: %s", t->spent);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return sc_errorf("%s: cannot create the state folder: %s", dir, strerror(errno));
    char *tmp = path_join(dir, "state.bin.tmp"), *path = path_join(dir, "state.bin");
    sc_status st = tmp && path ? SC_OK : sc_errorf("out of memory");
    if (!st) st = state_write_file(t, tmp, extra);
    if (!st && rename(tmp, path) != 0) st = sc_errorf("%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
    if (st && tmp) unlink(tmp);
    if (!st) fsync_dir(dir);
    free(tmp);
    free(path);
    return st;
}

sc_status train_state_write(sc_trainer *t, const char *dir) {
    extra_records none = {0};
    return state_write(t, dir, &none);
}

static bool sharded(const sc_trainer *t) { return t->cfg.train.shard_optimizer && t->cfg.train.ranks > 1; }

/* This rank's optimizer state serialised as records (*bytes malloc'd): what it sends rank 0. */
static sc_status shard_records(sc_trainer *t, char **bytes, size_t *size, uint32_t *count) {
    const sc_graph *g = &t->model->graph;
    *bytes = NULL;
    *size = 0;
    *count = 0;
    writer w = {.f = open_memstream(bytes, size), .path = "(memory)"};
    if (!w.f) return sc_errorf("out of memory serialising the optimizer state");
    for (int i = 0; i < t->n_state; i++) {
        const sc_value *v = &g->values[t->state_ids[i]];
        if (v->kind != SC_VALUE_OPT_STATE) continue;
        put_record(&w, v);
        (*count)++;
    }
    bool bad = w.failed;
    if (fclose(w.f) != 0) bad = true;
    if (bad) {
        free(*bytes);
        *bytes = NULL;
        return sc_errorf("out of memory serialising the optimizer state");
    }
    return SC_OK;
}

/* Sharded optimizer: the other ranks send their records of optimizer state, and rank 0 writes the
 * one state file an unsharded run would (parameters once: every rank holds the same). */
static sc_status state_write_sharded(sc_trainer *t, const char *dir) {
    int size = sc_comm_size();
    char *mine = NULL, *all = NULL;
    size_t len = 0;
    uint32_t count = 0;
    int64_t *sizes = calloc((size_t)size, sizeof(int64_t));
    uint32_t *counts = calloc((size_t)size, sizeof(uint32_t));
    sc_status st = sizes && counts ? SC_OK : sc_errorf("out of memory");
    if (!st && sc_comm_rank() != 0) st = shard_records(t, &mine, &len, &count);
    st = sc_comm_agree(st, "serialising the optimizer state");
    if (!st) st = sc_comm_allgather(&count, counts, sizeof count, "gathering the optimizer state");
    if (!st) st = sc_comm_gather(mine, (int64_t)len, 0, &all, sizes, "gathering the optimizer state");
    free(mine);
    if (!st && sc_comm_rank() == 0) {
        extra_records extra = {all + sizes[0], 0, 0};
        for (int r = 1; r < size; r++) extra.size += (uint64_t)sizes[r], extra.count += counts[r];
        st = state_write(t, dir, &extra);
    }
    SC_FREE_ALL(all, sizes, counts);
    return st;
}

/* ---- reading ---- */

typedef struct {
    FILE *f;
    ck_state ck;
    const char *path;
    uint64_t left; /* bytes of the body not read yet */
} reader;

static sc_status get(reader *r, void *p, size_t n) {
    if (fread(p, 1, n, r->f) != n) return sc_errorf("%s: truncated", r->path);
    ck_update(&r->ck, p, n);
    return SC_OK;
}

/* Reads and checksums n bytes without keeping them (the verifying pass). */
static sc_status skip(reader *r, size_t n) {
    uint8_t buf[1 << 16];
    while (n) {
        size_t k = n < sizeof buf ? n : sizeof buf;
        SC_TRY(get(r, buf, k));
        n -= k;
    }
    return SC_OK;
}

static sc_status header_read(reader *r, uint64_t file_size, uint32_t *n_tensors, uint64_t hdr[HEADER_WORDS]) {
    char magic[8];
    uint32_t version;
    if (file_size < HEADER_BYTES_V1 + 8) return sc_errorf("%s: truncated (%llu bytes)", r->path, (unsigned long long)file_size);
    SC_TRY(get(r, magic, 8));
    if (memcmp(magic, MAGIC, 8)) return sc_errorf("%s: not a scorch training state (bad magic)", r->path);
    SC_TRY(get(r, &version, 4));
    if (version != 1 && version != STATE_VERSION)
        return sc_errorf("%s: state format version %u; this build reads versions 1 and %u", r->path, version,
                         STATE_VERSION);
    uint64_t header = version == 1 ? HEADER_BYTES_V1 : HEADER_BYTES;
    if (file_size < header + 8) return sc_errorf("%s: truncated (%llu bytes)", r->path, (unsigned long long)file_size);
    SC_TRY(get(r, n_tensors, 4));
    memset(hdr, 0, HEADER_WORDS * 8);
    hdr[5] = SC_F32;
    SC_TRY(get(r, hdr, (header - 16) / 8 * 8));
    if (hdr[4] > file_size || file_size != header + hdr[4] + 8)
        return sc_errorf("%s: truncated or padded: %llu bytes, the header promises %llu", r->path,
                         (unsigned long long)file_size, (unsigned long long)(header + hdr[4] + 8));
    return SC_OK;
}

/* Reads one record into dst[k], k the state value of the same name, or only checks it when dst is
 * NULL. */
static sc_status record_read(sc_trainer *t, reader *r, bool *seen, void *const *dst) {
    const sc_graph *g = &t->model->graph;
    uint32_t len, dtype, rank;
    char name[4096];
    SC_TRY(get(r, &len, 4));
    if (len >= sizeof name) return sc_errorf("%s: corrupt record (name of %u bytes)", r->path, len);
    SC_TRY(get(r, name, len));
    name[len] = 0;
    SC_TRY(get(r, &dtype, 4));
    SC_TRY(get(r, &rank, 4));
    if (rank > SC_MAX_RANK) return sc_errorf("%s: corrupt record '%s' (rank %u)", r->path, name, rank);
    sc_desc d = {.dtype = (sc_dtype)dtype, .rank = (int)rank};
    SC_TRY(get(r, d.dims, 8 * (size_t)rank));
    uint64_t nbytes;
    SC_TRY(get(r, &nbytes, 8));
    int k = -1;
    for (int i = 0; i < t->n_state && k < 0; i++)
        if (!strcmp(g->values[t->state_ids[i]].name, name)) k = i;
    if (k < 0 && sharded(t)) return skip(r, (size_t)nbytes); /* another rank's optimizer state */
    if (k < 0) {
        /* a table trained as row blocks (autodiff/param_blocks.c) in one run and whole in the other */
        bool blocks = strstr(name, ".rows") || (t->tg.block_of && graph_find_value(g, name) >= 0 &&
                                                g->values[graph_find_value(g, name)].kind == SC_VALUE_CONST);
        return sc_errorf("%s: holds '%s', which this training graph does not have (%s)", r->path, name,
                         blocks ? "the state was saved with another --param-block: resume with the one it was saved with"
                                : "another model or optimizer?");
    }
    const sc_desc *want = &g->values[t->state_ids[k]].desc;
    if (seen[k]) return sc_errorf("%s: '%s' appears twice", r->path, name);
    if (d.dtype != want->dtype || !sc_desc_same_shape(&d, want) || nbytes != (uint64_t)sc_desc_bytes(want)) {
        char a[160], b[160];
        return sc_errorf("%s: '%s' is %s in the state but %s in the model", r->path, name, sc_desc_str(&d, a, sizeof a),
                         sc_desc_str(want, b, sizeof b));
    }
    SC_TRY(dst ? get(r, dst[k], (size_t)nbytes) : skip(r, (size_t)nbytes));
    seen[k] = true;
    return SC_OK;
}

static sc_status state_read_file(sc_trainer *t, reader *r, uint64_t file_size, uint64_t hdr[HEADER_WORDS], void *const *dst) {
    const sc_graph *g = &t->model->graph;
    uint32_t n_tensors;
    SC_TRY(header_read(r, file_size, &n_tensors, hdr));
    bool *seen = calloc((size_t)t->n_state + 1, 1);
    if (!seen) return sc_errorf("out of memory");
    sc_status st = SC_OK;
    for (uint32_t i = 0; !st && i < n_tensors; i++) st = record_read(t, r, seen, dst);
    uint64_t want = ck_final(&r->ck), got = 0;
    if (!st && fread(&got, 1, 8, r->f) != 8) st = sc_errorf("%s: truncated (no checksum)", r->path);
    if (!st && got != want) st = sc_errorf("%s: checksum mismatch: the file is corrupt or was cut short", r->path);
    for (int i = 0; !st && i < t->n_state; i++)
        if (!seen[i]) st = sc_errorf("%s: has no '%s' (saved by another model or optimizer?)", r->path,
                                     g->values[t->state_ids[i]].name);
    free(seen);
    return st;
}

/* One pass over DIR's state.bin: into dst (per state value), or a check only (dst NULL). */
static sc_status state_pass(sc_trainer *t, const char *path, void *const *dst, uint64_t hdr[HEADER_WORDS]) {
    reader r = {.f = fopen(path, "rb"), .path = path};
    if (!r.f) return sc_errorf("%s: cannot open the training state: %s", path, strerror(errno));
    struct stat sb;
    sc_status st = fstat(fileno(r.f), &sb) == 0 ? SC_OK : sc_errorf("%s: cannot stat: %s", path, strerror(errno));
    if (!st) st = state_read_file(t, &r, (uint64_t)sb.st_size, hdr, dst);
    fclose(r.f);
    return st;
}

/* With a rollback copy the state is read into it and restored from it only when the whole file
 * checked out. Without one a first pass checks the file (sizes, names, checksum) before the
 * second overwrites the live values; a file that changes between the two passes leaves the
 * session spent. */
static sc_status state_load(sc_trainer *t, const char *path, uint64_t hdr[HEADER_WORDS]) {
    if (t->snapshot) {
        sc_status st = state_pass(t, path, t->snapshot, hdr);
        if (st) train_snapshot_take(t); /* undo the partly overwritten snapshot */
        else train_snapshot_restore(t);
        return st;
    }
    SC_TRY(state_pass(t, path, NULL, hdr));
    void **live = malloc(sizeof(void *) * ((size_t)t->n_state + 1));
    if (!live) return sc_errorf("out of memory");
    for (int i = 0; i < t->n_state; i++) live[i] = t->model->graph.values[t->state_ids[i]].data;
    sc_status st = state_pass(t, path, live, hdr);
    free(live);
    return st ? train_spent(t, sc_status_prefix(st, "loading the state after checking it: ")) : SC_OK;
}

static const char *precision_word(uint64_t d) { return d == SC_BF16 ? "bf16" : d == SC_F16 ? "fp16" : "fp32"; }

/* The saved precision and loss scaler. A run resumed at another precision goes on from the same f32
 * master weights; fp16 resumed from a run that did not scale starts the scaler afresh. */
static void scaler_resume(sc_trainer *t, const char *path, const uint64_t hdr[HEADER_WORDS]) {
    uint64_t now = t->cfg.precision ? (uint64_t)t->cfg.precision : SC_F32;
    if (hdr[5] != now)
        sc_log(SC_LOG_WARN, "%s: the state was trained in %s; continuing in %s from its f32 master weights", path,
               precision_word(hdr[5]), precision_word(now));
    double scale;
    memcpy(&scale, &hdr[6], 8);
    if (t->tg.loss_scale < 0 || !(scale > 0)) return;
    t->loss_scale = scale;
    t->growth_tracker = (int64_t)hdr[7];
    t->skipped = (int64_t)hdr[8];
}

sc_status train_state_read(sc_trainer *t, const char *dir) {
    char *path = path_join(dir, "state.bin");
    if (!path) return sc_errorf("out of memory");
    uint64_t hdr[HEADER_WORDS] = {0};
    sc_status st = state_load(t, path, hdr);
    if (st) {
        free(path);
        return st;
    }
    t->step = (int64_t)hdr[0];
    t->sample = hdr[1];
    scaler_resume(t, path, hdr);
    if (hdr[2] != t->cfg.seed) {
        /* the synthetic data and every shuffle derive from the seed: reopen the data with the saved one */
        sc_log(SC_LOG_WARN, "%s: the state was trained with seed %llu; continuing with it (not %llu)", path,
               (unsigned long long)hdr[2], (unsigned long long)t->cfg.seed);
        t->cfg.seed = hdr[2];
        train_prefetch_drop(&t->prefetch);
        train_data_close(&t->data);
        st = train_data_open(&t->data, &t->model->graph, &t->tg, &t->cfg);
    }
    free(path);
    return st;
}

/* Data parallel: the ranks hold the same state, so rank 0 writes it; every rank learns the outcome. */
sc_status sc_trainer_save_state(sc_trainer *t, const char *dir) {
    sc_status st = train_host_sync(t);
    if (!st) st = sharded(t) ? state_write_sharded(t, dir) : sc_comm_rank() == 0 ? train_state_write(t, dir) : SC_OK;
    return sc_comm_agree(st, "saving the training state");
}
sc_status sc_trainer_load_state(sc_trainer *t, const char *dir) {
    SC_TRY(train_state_read(t, dir));
    return train_plan_reload(t); /* with a plan, its device copy takes the loaded state too */
}
