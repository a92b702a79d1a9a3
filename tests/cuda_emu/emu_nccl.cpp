/* Emulated NCCL (tests/cuda_emu): the collectives the CUDA backend uses (backends/cuda/cu_collective.c)
 * on the CPU, over the process group of backends/comm.h (MPI between the emulated devices of the
 * ranks of an `mpirun`).
 *
 * What it emulates, per NCCL's documentation: a communicator of nranks ranks made by
 * ncclCommInitRank with the same ncclUniqueId on every rank (rank 0's, shared out of band);
 * ncclAllReduce / ncclReduce with ncclSum of float32 or float64 (recvbuff on every rank / on root);
 * ncclBroadcast from root, any type. Each is queued on its stream (emu::enqueue) and runs when the
 * stream does, in stream order, so the ranks' collectives meet in the order they were issued. The sum
 * is taken in rank order (NCCL's ring order coincides with it for two ranks). In-place calls
 * (sendbuff == recvbuff) are allowed, as NCCL allows them.
 *
 * What it checks, returning ncclInvalidArgument with an emu::note: a NULL or aborted communicator, a
 * rank or nranks other than the process group's, buffers not inside one device allocation, an
 * unsupported type or operation, a root outside [0, nranks). A failure of the exchange itself (a rank
 * that died or hangs: the process group's deadline) is an emu::fault, the sticky error the next
 * synchronising call returns, as an asynchronous NCCL error surfaces through the stream.
 */
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "emu_internal.h"

extern "C" {
#include "backends/comm.h"
}

struct ncclComm {
    int nranks, rank;
    bool aborted;
};

static const char kAllReduce[] = "ncclAllReduce", kReduce[] = "ncclReduce", kBroadcast[] = "ncclBroadcast";

static size_t type_size(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

static bool comm_ok(const char *fn, ncclComm_t comm) {
    if (!comm || comm->aborted) {
        emu::note("%s: a NULL or aborted communicator", fn);
        return false;
    }
    return true;
}

static bool buffers_ok(const char *fn, const void *send, const void *recv, size_t bytes, bool need_recv) {
    if (bytes == 0) return true;
    if ((send && !emu::is_device(send, bytes)) || (need_recv && !emu::is_device(recv, bytes))) {
        emu::note("%s: a buffer of %zu bytes is not inside one device allocation", fn, bytes);
        return false;
    }
    return true;
}

/* Every rank's count elements of `mine` (copied at run time), summed in rank order into out. */
template <typename T> static sc_status sum_ranks(const T *mine, T *out, size_t count, bool write, const char *fn) {
    int n = sc_comm_size();
    std::vector<T> all(count * (size_t)n + 1);
    sc_status st = sc_comm_allgather(mine, all.data(), (int64_t)(count * sizeof(T)), fn);
    if (st || !write) return st;
    for (size_t i = 0; i < count; i++) {
        T acc = all[i];
        for (int p = 1; p < n; p++) acc += all[(size_t)p * count + i];
        out[i] = acc;
    }
    return SC_OK;
}

static void run_or_fault(const char *fn, sc_status st) {
    if (!st) return;
    emu::fault(fn, "%s", sc_status_message(st));
    sc_status_free(st);
}

extern "C" {

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    }
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    if (!id) return ncclInvalidArgument;
    memset(id, 0, sizeof *id);
    memcpy(id->internal, "scorch-emu-nccl", 15);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    if (!comm || memcmp(id.internal, "scorch-emu-nccl", 15) != 0) {
        emu::note("ncclCommInitRank: no communicator pointer, or an id not made by ncclGetUniqueId");
        return ncclInvalidArgument;
    }
    if (nranks != sc_comm_size() || rank != sc_comm_rank()) {
        emu::note("ncclCommInitRank: rank %d of %d, but the process group has rank %d of %d", rank, nranks,
                  sc_comm_rank(), sc_comm_size());
        return ncclInvalidArgument;
    }
    *comm = new ncclComm{nranks, rank, false};
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (comm) comm->aborted = true;
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err) {
    if (!comm || !err) return ncclInvalidArgument;
    *err = ncclSuccess;
    return ncclSuccess;
}

static ncclResult_t reduce(const char *fn, const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                           int root, ncclComm_t comm, cudaStream_t stream) {
    if (!comm_ok(fn, comm)) return ncclInvalidArgument;
    if (op != ncclSum || (t != ncclFloat32 && t != ncclFloat64) || (root >= 0 && root >= comm->nranks)) {
        emu::note("%s: only ncclSum of float32 / float64 is emulated (op %d, type %d), root %d", fn, (int)op, (int)t, root);
        return ncclInvalidArgument;
    }
    bool write = root < 0 || root == comm->rank;
    size_t bytes = count * type_size(t);
    if (!buffers_ok(fn, send, recv, bytes, write)) return ncclInvalidArgument;
    emu::enqueue(stream, fn, [=]() {
        if (t == ncclFloat32) run_or_fault(fn, sum_ranks((const float *)send, (float *)recv, count, write, fn));
        else run_or_fault(fn, sum_ranks((const double *)send, (double *)recv, count, write, fn));
    });
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
    return reduce(kAllReduce, send, recv, count, t, op, -1, comm, stream);
}

ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream) {
    if (root < 0) return ncclInvalidArgument;
    return reduce(kReduce, send, recv, count, t, op, root, comm, stream);
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t stream) {
    if (!comm_ok(kBroadcast, comm)) return ncclInvalidArgument;
    if (root < 0 || root >= comm->nranks) {
        emu::note("%s: root %d outside [0, %d)", kBroadcast, root, comm->nranks);
        return ncclInvalidArgument;
    }
    size_t bytes = count * type_size(t);
    if (!buffers_ok(kBroadcast, comm->rank == root ? send : NULL, recv, bytes, true)) return ncclInvalidArgument;
    bool is_root = comm->rank == root;
    emu::enqueue(stream, kBroadcast, [=]() {
        if (is_root && send != recv) memmove(recv, send, bytes);
        run_or_fault(kBroadcast, sc_comm_bcast(recv, (int64_t)bytes, root, kBroadcast));
    });
    return ncclSuccess;
}

} // extern "C"
