/* The data-parallel process group (docs/DESIGN.md, schedule/ 5 "Collectives"): the ranks of one
 * training job, launched by `mpirun -np N scorch-run train ...`, and the collectives they run.
 *
 * One group per process, as MPI_COMM_WORLD and torch.distributed's default group are: sc_comm_init
 * joins the job the environment describes (Open MPI's OMPI_COMM_WORLD_*, MPICH/Hydra's PMI_*), and
 * without a launcher the process is rank 0 of 1 and every collective is the identity. A build
 * without MPI still runs single-process jobs; launched as one of several ranks it fails, naming
 * what is missing.
 *
 * Collectives are built on MPI's point-to-point calls rather than MPI_Allreduce, for two reasons:
 *   - Reproducibility. A sum over ranks is taken in rank order 0, 1, ..., N-1 on every element, so
 *     two runs with the same N give the same bits whatever the message sizes or the MPI library's
 *     algorithm selection, and the result of N = 1 is the local value itself.
 *   - Faults. Every wait has a deadline (sc_comm_set_timeout, default 600 s): a rank that died or
 *     hangs makes the others fail within it, naming the rank they were waiting for, instead of
 *     hanging forever inside MPI.
 * The mean all-reduce is a reduce-scatter (rank j sums chunk j of every rank's buffer) followed by an
 * all-gather of the summed chunks: 2 (N-1)/N of the buffer's bytes sent and received per rank, as a
 * ring all-reduce.
 *
 * Only one thread calls the collectives at a time (MPI_THREAD_SERIALIZED).
 */
#ifndef SC_COMM_H
#define SC_COMM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"

/* Joins the job the environment describes (idempotent). Fails when launched as one of several
 * ranks by a build without MPI, or when MPI cannot start. */
sc_status sc_comm_init(void);
/* Ends the group after a run every rank finished (MPI_Finalize). */
void sc_comm_finalize(void);
/* Ends the whole job from one rank: the others may be blocked in a collective (MPI_Abort). Does not
 * return when several ranks run; returns at once without them. */
void sc_comm_abort(int code);

int sc_comm_rank(void);
int sc_comm_size(void);       /* 1 without a launcher */
int sc_comm_local_rank(void); /* among the ranks on this host: picks the GPU, shares the cores */
int sc_comm_local_size(void);
/* What carries the collectives: "MPI (<library version>)", or "none" when single-process. */
const char *sc_comm_backend_name(void);
/* Whether this build can join an MPI job. */
bool sc_comm_has_mpi(void);

/* Seconds any wait of a collective may take before it fails naming the silent rank (> 0). */
void sc_comm_set_timeout(double seconds);
double sc_comm_timeout(void);

/* buf[0..n) of dtype t (f32 or f64) becomes the mean over ranks, summed in rank order then divided by
 * N. `what` names the collective in errors ("the gradients of bucket 3"). */
sc_status sc_comm_allreduce_mean(void *buf, int64_t n, sc_dtype t, const char *what);

/* Rank root's buf[0..n) becomes the mean over ranks, summed in rank order exactly as
 * sc_comm_allreduce_mean sums (the same bits); the other ranks only send theirs. */
sc_status sc_comm_reduce_mean(void *buf, int64_t n, sc_dtype t, int root, const char *what);

typedef enum { SC_COMM_SUM, SC_COMM_MAX, SC_COMM_MIN } sc_comm_op;
/* A few doubles reduced over ranks (in rank order, so every rank gets the same bits). */
sc_status sc_comm_allreduce_f64(double *v, int n, sc_comm_op op, const char *what);
/* all[r * bytes .. (r+1) * bytes) receives rank r's `mine` (bytes each). */
sc_status sc_comm_allgather(const void *mine, void *all, int64_t bytes, const char *what);
/* Every rank's `mine` (bytes, different per rank) to root: *all (malloc'd, on root; NULL elsewhere)
 * holds them in rank order, sizes[r] rank r's bytes (every rank learns them). */
sc_status sc_comm_gather(const void *mine, int64_t bytes, int root, char **all, int64_t *sizes, const char *what);
/* root's buf[0..bytes) to every rank. */
sc_status sc_comm_bcast(void *buf, int64_t bytes, int root, const char *what);

/* Every rank's outcome of the same piece of work: returns SC_OK when all succeeded; else this rank's
 * own failure (st, passed through), or, on a rank that succeeded, an error naming the first rank that
 * failed and its message. Takes ownership of st. With one rank it returns st. */
sc_status sc_comm_agree(sc_status st, const char *what);

/* While set, collectives on this thread are local no-ops (the mean of one rank): for replays one rank
 * makes on its own (the NaN locator re-running a step node by node). */
void sc_comm_set_local_only(bool on);

#endif
