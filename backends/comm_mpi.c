/* The process group over MPI point-to-point calls (contract and the reasons in comm.h).
 *
 * Launch detection reads the launcher's environment before touching MPI, so a plain `scorch-run`
 * never initialises it (Open MPI's singleton start forks a runtime daemon): Open MPI's mpirun sets
 * OMPI_COMM_WORLD_SIZE, MPICH/Intel's Hydra PMI_SIZE.
 *
 * Every collective is a set of nonblocking sends and receives completed by wait_all, which polls
 * (MPI progresses shared-memory transfers inside its calls) with a growing sleep between polls,
 * so a rank waiting on a slower one leaves the cores to the ranks that compute; at the deadline it
 * names the first peer whose message has not arrived. Messages over 1 GiB go in pieces (MPI counts
 * are ints). Tags carry the collective's sequence number, so a mismatch between ranks shows up as a
 * timeout naming the collective rather than as data landing in the wrong buffer.
 */
#include "backends/comm.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"

#ifdef SC_HAVE_MPI
#include <mpi.h>
#endif

static struct {
    bool ready, mpi;
    int rank, size, local_rank, local_size;
    double timeout;
    int64_t seq;        /* collectives started, for tags and messages */
    void *scratch;      /* reduce-scatter receive space, grown on demand */
    size_t scratch_bytes;
    char name[160];
} G = {.size = 1, .local_size = 1, .timeout = 600};

static _Thread_local bool local_only;

static int env_int(const char *name, int fallback) {
    const char *s = getenv(name);
    if (!s || !*s) return fallback;
    char *end;
    long v = strtol(s, &end, 10);
    return *end || v < 0 || v > 1 << 24 ? fallback : (int)v;
}

/* (size, rank) the launcher announced, or size 1. */
static void launcher_env(int *size, int *rank, const char **var) {
    *var = "OMPI_COMM_WORLD_SIZE";
    *size = env_int("OMPI_COMM_WORLD_SIZE", 0);
    *rank = env_int("OMPI_COMM_WORLD_RANK", 0);
    if (*size <= 0) {
        *var = "PMI_SIZE";
        *size = env_int("PMI_SIZE", 1);
        *rank = env_int("PMI_RANK", 0);
    }
    if (*size < 1) *size = 1;
}

int sc_comm_rank(void) { return G.rank; }
int sc_comm_size(void) { return G.size; }
int sc_comm_local_rank(void) { return G.local_rank; }
int sc_comm_local_size(void) { return G.local_size; }
const char *sc_comm_backend_name(void) { return G.mpi ? G.name : "none"; }
void sc_comm_set_local_only(bool on) { local_only = on; }
double sc_comm_timeout(void) { return G.timeout; }
void sc_comm_set_timeout(double seconds) {
    if (seconds > 0 && isfinite(seconds)) G.timeout = seconds;
}

/* Collectives with nothing to exchange: one rank, or a replay on this rank alone. */
static bool alone(void) { return G.size == 1 || local_only; }

#ifdef SC_HAVE_MPI

bool sc_comm_has_mpi(void) { return true; }

static sc_status mpi_fail(int code, const char *call) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(code, msg, &len);
    return sc_errorf("%s failed: %s", call, msg);
}

sc_status sc_comm_init(void) {
    if (G.ready) return SC_OK;
    const char *timeout = getenv("SCORCH_COMM_TIMEOUT");
    if (timeout) sc_comm_set_timeout(strtod(timeout, NULL));
    int size, rank;
    const char *var;
    launcher_env(&size, &rank, &var);
    G.ready = true;
    if (size == 1) return SC_OK;
    int provided = 0;
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) return sc_errorf("rank %d of %d: MPI_Init_thread failed (code %d)", rank, size, rc);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    G.mpi = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &G.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &G.size);
    MPI_Comm node;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, G.rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &G.local_rank);
        MPI_Comm_size(node, &G.local_size);
        MPI_Comm_free(&node);
    }
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, ",\n")] = 0;
    snprintf(G.name, sizeof G.name, "MPI (%s)", lib);
    if (provided < MPI_THREAD_SERIALIZED)
        sc_log(SC_LOG_WARN, "rank %d: MPI gives thread level %d, below MPI_THREAD_SERIALIZED", G.rank, provided);
    return SC_OK;
}

void sc_comm_finalize(void) {
    if (G.mpi) MPI_Finalize();
    G.mpi = false;
    free(G.scratch);
    G.scratch = NULL;
    G.scratch_bytes = 0;
}

void sc_comm_abort(int code) {
    if (G.mpi) MPI_Abort(MPI_COMM_WORLD, code ? code : 1);
}

/* Completes req[0..n); peer[i] is the rank request i talks to, recv[i] whether it receives. Fails at
 * the deadline naming the first peer whose message has not arrived (or, when every receive
 * completed, the first that has not taken ours). */
static sc_status wait_all(MPI_Request *req, const int *peer, const bool *recv, int n, const char *what) {
    double t0 = sc_clock_seconds();
    long sleep_ns = 0;
    int *idx = malloc(sizeof(int) * (size_t)n);
    bool *done = calloc((size_t)n, 1);
    if (!idx || !done) {
        free(idx);
        free(done);
        return sc_errorf("%s: out of memory", what);
    }
    int left = n;
    sc_status st = SC_OK;
    while (left > 0) {
        int got = 0;
        int rc = MPI_Testsome(n, req, &got, idx, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) {
            st = sc_status_prefix(mpi_fail(rc, "MPI_Testsome"), "%s: ", what);
            break;
        }
        for (int i = 0; got != MPI_UNDEFINED && i < got; i++) done[idx[i]] = true, left--;
        if (left == 0) break;
        if (got > 0 && got != MPI_UNDEFINED) sleep_ns = 0;
        if (sc_clock_seconds() - t0 > G.timeout) {
            int silent = -1;
            for (int pass = 0; pass < 2 && silent < 0; pass++)
                for (int i = 0; i < n && silent < 0; i++)
                    if (!done[i] && recv[i] == (pass == 0)) silent = peer[i];
            st = sc_errorf("%s: no answer from rank %d within %g s (it died, hangs, or runs a different collective; "
                           "--comm-timeout sets the limit)",
                           what, silent, G.timeout);
            break;
        }
        if (sleep_ns) nanosleep(&(struct timespec){0, sleep_ns}, NULL);
        sleep_ns = sleep_ns < 1000 ? sleep_ns + 100 : sleep_ns < 200000 ? sleep_ns * 2 : 200000;
    }
    free(idx);
    free(done);
    return st;
}

#define PIECE ((int64_t)1 << 30) /* bytes per message: MPI counts are ints */

typedef struct {
    MPI_Request *req;
    int *peer;
    bool *recv;
    int n, cap;
    int tag;
    sc_status st;
} xfer;

static void xfer_add(xfer *x, bool recv, void *buf, int64_t bytes, int peer) {
    for (int64_t off = 0; !x->st && (off < bytes || (bytes == 0 && off == 0)); off += PIECE) {
        if (x->n == x->cap) {
            int cap = x->cap ? 2 * x->cap : 16;
            MPI_Request *r = realloc(x->req, sizeof *r * (size_t)cap);
            if (r) x->req = r;
            int *p = realloc(x->peer, sizeof *p * (size_t)cap);
            if (p) x->peer = p;
            bool *v = realloc(x->recv, sizeof *v * (size_t)cap);
            if (v) x->recv = v;
            if (!r || !p || !v) {
                x->st = sc_errorf("out of memory starting a collective");
                return;
            }
            x->cap = cap;
        }
        int count = (int)(bytes - off < PIECE ? bytes - off : PIECE);
        char *at = (char *)buf + off;
        int rc = recv ? MPI_Irecv(at, count, MPI_BYTE, peer, x->tag, MPI_COMM_WORLD, &x->req[x->n])
                      : MPI_Isend(at, count, MPI_BYTE, peer, x->tag, MPI_COMM_WORLD, &x->req[x->n]);
        if (rc != MPI_SUCCESS) {
            x->st = mpi_fail(rc, recv ? "MPI_Irecv" : "MPI_Isend");
            return;
        }
        x->peer[x->n] = peer;
        x->recv[x->n] = recv;
        x->n++;
        if (bytes == 0) break;
    }
}

static sc_status xfer_finish(xfer *x, const char *what) {
    sc_status st = x->st;
    if (!st && x->n) st = wait_all(x->req, x->peer, x->recv, x->n, what);
    if (st && x->st == NULL)
        for (int i = 0; i < x->n; i++)
            if (x->req[i] != MPI_REQUEST_NULL) MPI_Request_free(&x->req[i]); /* abandoned: the job ends */
    free(x->req);
    free(x->peer);
    free(x->recv);
    return st;
}

static int next_tag(void) { return (int)(G.seq++ % 32767); }

static sc_status scratch_get(size_t bytes) {
    if (bytes <= G.scratch_bytes) return SC_OK;
    void *p = realloc(G.scratch, bytes);
    if (!p) return sc_errorf("out of memory (%zu bytes) for a collective's receive buffer", bytes);
    G.scratch = p;
    G.scratch_bytes = bytes;
    return SC_OK;
}

sc_status sc_comm_allgather(const void *mine, void *all, int64_t bytes, const char *what) {
    char *out = all;
    if (out + (int64_t)G.rank * bytes != mine) memmove(out + (int64_t)G.rank * bytes, mine, (size_t)bytes);
    if (alone()) return SC_OK;
    xfer x = {.tag = next_tag()};
    for (int p = 0; p < G.size; p++)
        if (p != G.rank) xfer_add(&x, true, out + (int64_t)p * bytes, bytes, p);
    for (int p = 0; p < G.size; p++)
        if (p != G.rank) xfer_add(&x, false, out + (int64_t)G.rank * bytes, bytes, p);
    return xfer_finish(&x, what);
}

sc_status sc_comm_bcast(void *buf, int64_t bytes, int root, const char *what) {
    if (alone()) return SC_OK;
    xfer x = {.tag = next_tag()};
    if (G.rank == root) {
        for (int p = 0; p < G.size; p++)
            if (p != root) xfer_add(&x, false, buf, bytes, p);
    } else {
        xfer_add(&x, true, buf, bytes, root);
    }
    return xfer_finish(&x, what);
}

/* Chunk j of n elements: [chunk_lo(j), chunk_lo(j + 1)). */
static int64_t chunk_lo(int64_t n, int j) { return n / G.size * j + (j < n % G.size ? j : n % G.size); }

#define SUM_CHUNK(T)                                                                                           \
    static void sum_chunk_##T(T *mine, const T *others, int64_t len, int me, int size) {                       \
        for (int64_t i = 0; i < len; i++) {                                                                    \
            T acc = me == 0 ? mine[i] : others[i];                                                             \
            for (int p = 1; p < size; p++) {                                                                   \
                int slot = p < me ? p : p - 1; /* others holds every rank but me, in rank order */             \
                acc += p == me ? mine[i] : others[(int64_t)slot * len + i];                                    \
            }                                                                                                  \
            mine[i] = acc / (T)size;                                                                           \
        }                                                                                                      \
    }
SUM_CHUNK(float)
SUM_CHUNK(double)

sc_status sc_comm_allreduce_mean(void *buf, int64_t n, sc_dtype t, const char *what) {
    if (t != SC_F32 && t != SC_F64) return sc_errorf("%s: all-reduce of %s is not supported (f32, f64)", what, sc_dtype_name(t));
    if (alone() || n == 0) return SC_OK;
    size_t es = sc_dtype_size(t);
    char *b = buf;
    int me = G.rank;
    int64_t lo = chunk_lo(n, me), len = chunk_lo(n, me + 1) - lo;
    SC_TRY(scratch_get((size_t)(G.size - 1) * (size_t)(n / G.size + 1) * es + 1));
    char *others = G.scratch;
    /* reduce-scatter: my chunk from every other rank, in rank order (slot = rank, less one past me) */
    xfer x = {.tag = next_tag()};
    for (int p = 0; p < G.size; p++)
        if (p != me) xfer_add(&x, true, others + (size_t)(p < me ? p : p - 1) * (size_t)len * es, len * (int64_t)es, p);
    for (int p = 0; p < G.size; p++)
        if (p != me) {
            int64_t plo = chunk_lo(n, p), plen = chunk_lo(n, p + 1) - plo;
            xfer_add(&x, false, b + plo * (int64_t)es, plen * (int64_t)es, p);
        }
    SC_TRY(xfer_finish(&x, what));
    if (t == SC_F32) sum_chunk_float((float *)(b + lo * (int64_t)es), (const float *)others, len, me, G.size);
    else sum_chunk_double((double *)(b + lo * (int64_t)es), (const double *)others, len, me, G.size);
    /* all-gather of the summed chunks, in place */
    xfer y = {.tag = next_tag()};
    for (int p = 0; p < G.size; p++)
        if (p != me) {
            int64_t plo = chunk_lo(n, p), plen = chunk_lo(n, p + 1) - plo;
            xfer_add(&y, true, b + plo * (int64_t)es, plen * (int64_t)es, p);
        }
    for (int p = 0; p < G.size; p++)
        if (p != me) xfer_add(&y, false, b + lo * (int64_t)es, len * (int64_t)es, p);
    return xfer_finish(&y, what);
}

sc_status sc_comm_reduce_mean(void *buf, int64_t n, sc_dtype t, int root, const char *what) {
    if (t != SC_F32 && t != SC_F64) return sc_errorf("%s: reduction of %s is not supported (f32, f64)", what, sc_dtype_name(t));
    if (alone() || n == 0) return SC_OK;
    size_t es = sc_dtype_size(t);
    int64_t bytes = n * (int64_t)es;
    xfer x = {.tag = next_tag()};
    if (G.rank != root) {
        xfer_add(&x, false, buf, bytes, root);
        return xfer_finish(&x, what);
    }
    SC_TRY(scratch_get((size_t)(G.size - 1) * (size_t)bytes + 1));
    char *others = G.scratch;
    for (int p = 0; p < G.size; p++)
        if (p != root) xfer_add(&x, true, others + (size_t)(p < root ? p : p - 1) * (size_t)bytes, bytes, p);
    SC_TRY(xfer_finish(&x, what));
    if (t == SC_F32) sum_chunk_float(buf, (const float *)others, n, root, G.size);
    else sum_chunk_double(buf, (const double *)others, n, root, G.size);
    return SC_OK;
}

#else /* no MPI in this build */

bool sc_comm_has_mpi(void) { return false; }

sc_status sc_comm_init(void) {
    if (G.ready) return SC_OK;
    int size, rank;
    const char *var;
    launcher_env(&size, &rank, &var);
    if (size > 1)
        return sc_errorf("launched as rank %d of %d (%s), but this build of Scorch has no MPI: install Open MPI "
                         "(Debian's libopenmpi-dev and openmpi-bin; scripts/install.sh does) and rebuild",
                         rank, size, var);
    G.ready = true;
    return SC_OK;
}

void sc_comm_finalize(void) {}
void sc_comm_abort(int code) { (void)code; }

sc_status sc_comm_allgather(const void *mine, void *all, int64_t bytes, const char *what) {
    (void)what;
    if (all != mine) memmove(all, mine, (size_t)bytes);
    return SC_OK;
}

sc_status sc_comm_bcast(void *buf, int64_t bytes, int root, const char *what) {
    (void)buf, (void)bytes, (void)root, (void)what;
    return SC_OK;
}

sc_status sc_comm_reduce_mean(void *buf, int64_t n, sc_dtype t, int root, const char *what) {
    (void)buf, (void)n, (void)root;
    if (t != SC_F32 && t != SC_F64) return sc_errorf("%s: reduction of %s is not supported (f32, f64)", what, sc_dtype_name(t));
    return SC_OK;
}

sc_status sc_comm_allreduce_mean(void *buf, int64_t n, sc_dtype t, const char *what) {
    (void)buf, (void)n;
    if (t != SC_F32 && t != SC_F64) return sc_errorf("%s: all-reduce of %s is not supported (f32, f64)", what, sc_dtype_name(t));
    return SC_OK;
}

#endif

sc_status sc_comm_allreduce_f64(double *v, int n, sc_comm_op op, const char *what) {
    if (alone() || n <= 0) return SC_OK;
    double *all = malloc(sizeof(double) * (size_t)n * (size_t)G.size);
    if (!all) return sc_errorf("out of memory in %s", what);
    sc_status st = sc_comm_allgather(v, all, (int64_t)sizeof(double) * n, what);
    for (int i = 0; !st && i < n; i++) {
        double acc = all[i];
        for (int p = 1; p < G.size; p++) {
            double x = all[(size_t)p * (size_t)n + (size_t)i];
            acc = op == SC_COMM_SUM ? acc + x : op == SC_COMM_MAX ? (x > acc ? x : acc) : (x < acc ? x : acc);
        }
        v[i] = acc;
    }
    free(all);
    return st;
}

sc_status sc_comm_gather(const void *mine, int64_t bytes, int root, char **all, int64_t *sizes, const char *what) {
    *all = NULL;
    SC_TRY(sc_comm_allgather(&bytes, sizes, sizeof bytes, what));
    if (alone()) sizes[0] = bytes;
    if (G.rank != root) {
#ifdef SC_HAVE_MPI
        if (alone()) return SC_OK;
        xfer x = {.tag = next_tag()};
        xfer_add(&x, false, (void *)mine, bytes, root);
        return xfer_finish(&x, what);
#else
        return SC_OK;
#endif
    }
    int64_t total = 0;
    int n = alone() ? 1 : G.size;
    for (int p = 0; p < n; p++) total += sizes[p];
    *all = malloc((size_t)total + 1);
    if (!*all) return sc_errorf("out of memory gathering %lld bytes in %s", (long long)total, what);
    int64_t at = 0;
#ifdef SC_HAVE_MPI
    xfer x = {.tag = alone() ? 0 : next_tag()};
#endif
    for (int p = 0; p < n; p++) {
        if (p == G.rank) {
            if (bytes) memcpy(*all + at, mine, (size_t)bytes);
        } else {
#ifdef SC_HAVE_MPI
            xfer_add(&x, true, *all + at, sizes[p], p);
#endif
        }
        at += sizes[p];
    }
#ifdef SC_HAVE_MPI
    if (!alone()) return xfer_finish(&x, what);
#endif
    return SC_OK;
}

#define AGREE_MSG 1024

sc_status sc_comm_agree(sc_status st, const char *what) {
    if (alone()) return st;
    char mine[AGREE_MSG] = {0};
    if (st) snprintf(mine, sizeof mine, "%s", sc_status_message(st));
    mine[AGREE_MSG - 2] = 0;
    mine[AGREE_MSG - 1] = st ? 1 : 0; /* failed */
    char *all = malloc((size_t)AGREE_MSG * (size_t)G.size);
    if (!all) {
        sc_status_free(st);
        return sc_errorf("out of memory in %s", what);
    }
    sc_status comm = sc_comm_allgather(mine, all, AGREE_MSG, what);
    if (comm) {
        free(all);
        if (st) sc_status_free(comm);
        return st ? st : comm;
    }
    if (!st)
        for (int p = 0; p < G.size && !st; p++)
            if (all[(size_t)p * AGREE_MSG + AGREE_MSG - 1])
                st = sc_errorf("%s failed on rank %d: %s", what, p, all + (size_t)p * AGREE_MSG);
    free(all);
    return st;
}
