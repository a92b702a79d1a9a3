/* The CUDA runtime of the emulator: device memory, streams, events and copies on the CPU.
 *
 * Why it is strict where a GPU is lenient, so that the backend's mistakes show on a CPU:
 * - Work is lazy. Enqueued work runs only when a call must wait for it (a stream or event
 *   synchronisation, a copy into pageable memory, cudaFree), and then only what that wait needs:
 *   the stream's items up to the target and, for each event wait among them, the record it waits
 *   for (with what precedes it on its stream), nothing else. So a kernel that should wait for a
 *   copy but does not runs before it, and a copy that should wait for a kernel but does not runs
 *   first: a missing event wait between the compute and copy streams gives wrong values, where a
 *   GPU would usually be lucky. SCORCH_CUDA_EMU_SCHED=random interleaves the streams at random
 *   instead (seeded by SCORCH_CUDA_EMU_SEED), =eager runs everything as soon as it can run.
 * - Fresh device memory is filled with 0xff bytes (NaN in f32 / f64, -1 in integers), so reading
 *   what nothing wrote shows.
 * - Every pointer is classified (device: cudaMalloc; pinned: cudaHostAlloc or cudaHostRegister;
 *   else pageable host):
 *   a copy whose direction does not match its pointers, a range that leaves its allocation, or a
 *   kernel argument in pageable memory is an error, with a message (SCORCH_CUDA_EMU_VERBOSE=1
 *   prints argument errors too).
 * - Device memory is SCORCH_CUDA_EMU_MEMORY bytes (K/M/G suffixes; default 16G): cudaMalloc fails
 *   beyond it and cudaMemGetInfo reports what is left, so out-of-memory paths can be tested.
 * Semantics kept from CUDA: copies from pageable memory are staged at the call; copies into
 *   pageable memory return when done; cudaFree, cudaFreeHost and cudaHostUnregister synchronise the
 *   device; cudaHostRegister pins whole pages, so a range sharing a page with a pinned one is
 *   refused (cudaErrorHostMemoryAlreadyRegistered), as the driver does; a fault
 *   during a kernel is sticky (later work is dropped, every call returns the error).
 * Not emulated: the legacy default stream's implicit synchronisation (streams created without
 *   cudaStreamNonBlocking behave as non-blocking ones, which is stricter), timing, multiple devices.
 * CUDA_VISIBLE_DEVICES set to "" or "-1" hides the device, as with the real driver.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "emu_internal.h"

struct emu_event_state {
    uint64_t recorded = 0; /* generation of the latest cudaEventRecord */
    uint64_t done = 0;     /* latest generation whose record ran */
    std::map<uint64_t, std::pair<struct CUstream_st *, uint64_t>> pending; /* generation -> its record item */
};

struct CUevent_st {
    std::shared_ptr<emu_event_state> st = std::make_shared<emu_event_state>();
};

namespace {

enum item_kind { WORK, RECORD, WAIT };

struct item {
    item_kind kind;
    const char *what;
    std::function<void()> fn;
    std::shared_ptr<emu_event_state> ev;
    uint64_t gen;
    uint64_t seq;
};

} // namespace

struct CUstream_st {
    std::deque<item> q;
    uint64_t ran = 0; /* seq of the last item run */
};

namespace {

struct state {
    std::recursive_mutex mu;
    std::map<uintptr_t, size_t> device, pinned; /* base -> bytes */
    std::set<uintptr_t> registered;             /* the pinned bases that cudaHostRegister made */
    size_t capacity = 0, used = 0;
    std::set<CUstream_st *> streams;
    std::set<CUevent_st *> events;
    CUstream_st legacy; /* stream 0 */
    uint64_t seq = 0;
    uint64_t rng = 0;
    bool eager = false, random = false, verbose = false, inited = false;
    cudaError_t last = cudaSuccess, sticky = cudaSuccess;
};

state &S() {
    static state s;
    return s;
}

size_t parse_bytes(const char *v, size_t dflt) {
    if (!v || !*v) return dflt;
    char *end = NULL;
    double x = strtod(v, &end);
    if (end == v || x < 0) return dflt;
    switch (*end) {
    case 'k': case 'K': x *= 1024.0; break;
    case 'm': case 'M': x *= 1048576.0; break;
    case 'g': case 'G': x *= 1073741824.0; break;
    default: break;
    }
    return (size_t)x;
}

void init_once(state &s) {
    if (s.inited) return;
    s.inited = true;
    s.capacity = parse_bytes(getenv("SCORCH_CUDA_EMU_MEMORY"), (size_t)16 << 30);
    const char *seed = getenv("SCORCH_CUDA_EMU_SEED");
    s.rng = seed && *seed ? strtoull(seed, NULL, 10) : 1;
    s.rng = s.rng * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    const char *sched = getenv("SCORCH_CUDA_EMU_SCHED");
    s.eager = sched && strcmp(sched, "eager") == 0;
    s.random = sched && strcmp(sched, "random") == 0;
    const char *verbose = getenv("SCORCH_CUDA_EMU_VERBOSE");
    s.verbose = verbose && verbose[0] == '1';
}

uint64_t next_random(state &s) { /* xorshift64* */
    s.rng ^= s.rng >> 12;
    s.rng ^= s.rng << 25;
    s.rng ^= s.rng >> 27;
    return s.rng * 2685821657736338717ull;
}

/* Locks the emulator and applies the context's sticky error to the call. */
struct guard {
    std::lock_guard<std::recursive_mutex> lock;
    state &s;
    guard() : lock(S().mu), s(S()) { init_once(s); }
};

cudaError_t fail(state &s, cudaError_t e) {
    s.last = e;
    return e;
}

bool in_map(const std::map<uintptr_t, size_t> &m, const void *p, size_t bytes) {
    uintptr_t a = (uintptr_t)p;
    auto it = m.upper_bound(a);
    if (it == m.begin()) return false;
    --it;
    return a >= it->first && a - it->first <= it->second && bytes <= it->second - (a - it->first);
}

CUstream_st *stream_of(state &s, cudaStream_t st) { return st ? st : &s.legacy; }

bool stream_valid(state &s, cudaStream_t st) { return !st || s.streams.count(st); }

bool runnable(const CUstream_st *st) {
    if (st->q.empty()) return false;
    const item &h = st->q.front();
    return h.kind != WAIT || h.ev->done >= h.gen;
}

void run_front(state &s, CUstream_st *st) {
    item it = std::move(st->q.front());
    st->q.pop_front();
    st->ran = it.seq;
    if (it.kind == RECORD) it.ev->pending.erase(it.gen);
    if (s.sticky != cudaSuccess) return; /* the context is lost: work is dropped */
    if (it.kind == WORK) it.fn();
    else if (it.kind == RECORD && it.ev->done < it.gen) it.ev->done = it.gen;
}

std::vector<CUstream_st *> all_streams(state &s) {
    std::vector<CUstream_st *> v(s.streams.begin(), s.streams.end());
    v.push_back(&s.legacy);
    return v;
}

/* Runs queued work, one item at a time from a stream chosen at random among those that may run,
 * until done() holds. Returns false (after a fault naming the waits) when nothing can run. */
template <class Done> bool drain(state &s, Done done, const char *who) {
    std::vector<CUstream_st *> ready;
    while (!done()) {
        ready.clear();
        for (CUstream_st *st : all_streams(s))
            if (runnable(st)) ready.push_back(st);
        if (ready.empty()) {
            emu::fault(who, "deadlock: every stream with work waits for an event that is never reached");
            return false;
        }
        run_front(s, ready[next_random(s) % ready.size()]);
    }
    return true;
}

/* Runs st's items up to sequence number seq and only what they wait for (the default schedule). */
bool run_until(state &s, CUstream_st *st, uint64_t seq, const char *who, int depth = 0) {
    while (st->ran < seq && !st->q.empty()) {
        const item &h = st->q.front();
        if (h.kind == WAIT && h.ev->done < h.gen) {
            auto rec = h.ev->pending.find(h.gen);
            if (rec == h.ev->pending.end() || depth > 256) {
                emu::fault(who, "deadlock: a stream waits for an event record that never runs");
                return false;
            }
            if (!run_until(s, rec->second.first, rec->second.second, who, depth + 1)) return false;
            continue;
        }
        run_front(s, st);
    }
    return true;
}

/* Completes the item `seq` of stream st (and everything before it on st). */
void complete(state &s, CUstream_st *st, uint64_t seq, const char *who) {
    if (s.random) drain(s, [&] { return st->ran >= seq || st->q.empty(); }, who);
    else run_until(s, st, seq, who);
}

uint64_t last_seq(const CUstream_st *st) { return st->q.empty() ? st->ran : st->q.back().seq; }

cudaError_t sync_all(state &s, const char *who) {
    for (CUstream_st *st : all_streams(s)) complete(s, st, last_seq(st), who);
    return s.sticky;
}

/* Enqueues an item; in eager mode runs everything that can run right away. */
void push(state &s, CUstream_st *st, item it) {
    it.seq = ++s.seq;
    st->q.push_back(std::move(it));
    if (s.eager)
        for (;;) {
            bool any = false;
            for (CUstream_st *x : all_streams(s))
                while (runnable(x)) run_front(s, x), any = true;
            if (!any) break;
        }
}


enum ptr_class { P_DEVICE, P_PINNED, P_PAGEABLE };

ptr_class classify(state &s, const void *p, size_t bytes) {
    if (in_map(s.device, p, bytes ? bytes : 1)) return P_DEVICE;
    if (in_map(s.pinned, p, bytes ? bytes : 1)) return P_PINNED;
    return P_PAGEABLE;
}

bool touches_device(state &s, const void *p) { return in_map(s.device, p, 1); }

const char *class_name(ptr_class c) { return c == P_DEVICE ? "device" : c == P_PINNED ? "pinned host" : "pageable host"; }

/* Checks one side of a copy: `want_device` says which memory the direction names. */
bool side_ok(state &s, const char *call, const char *side, const void *p, size_t span, bool want_device) {
    ptr_class c = classify(s, p, span);
    if (want_device ? c == P_DEVICE : c != P_DEVICE) return true;
    if (want_device && touches_device(s, p))
        emu::note("%s: %s %p + %zu bytes runs past the end of its device allocation", call, side, p, span);
    else
        emu::note("%s: %s %p is %s memory, but the copy direction says %s", call, side, p, class_name(c),
                  want_device ? "device" : "host");
    return false;
}

cudaError_t copy_2d(const char *call, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                    cudaMemcpyKind kind, cudaStream_t st) {
    guard g;
    state &s = g.s;
    if (s.sticky) return s.sticky;
    if (!stream_valid(s, st)) return fail(s, cudaErrorInvalidResourceHandle);
    if (width == 0 || height == 0) return cudaSuccess;
    if (dpitch < width || spitch < width) {
        emu::note("%s: pitch (%zu, %zu) below the width %zu", call, dpitch, spitch, width);
        return fail(s, cudaErrorInvalidValue);
    }
    size_t dspan = (height - 1) * dpitch + width, sspan = (height - 1) * spitch + width;
    if (kind == cudaMemcpyDefault)
        kind = classify(s, dst, dspan) == P_DEVICE
                   ? (classify(s, src, sspan) == P_DEVICE ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                   : (classify(s, src, sspan) == P_DEVICE ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDeviceToDevice) return fail(s, cudaErrorInvalidMemcpyDirection);
    bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (!side_ok(s, call, "destination", dst, dspan, dst_dev) || !side_ok(s, call, "source", src, sspan, src_dev))
        return fail(s, cudaErrorInvalidValue);
    /* Pageable sources are staged now (the caller may reuse them on return); pageable
     * destinations make the call wait for the copy. */
    std::shared_ptr<std::vector<char>> staged;
    const char *from = (const char *)src;
    if (classify(s, src, sspan) == P_PAGEABLE) {
        staged = std::make_shared<std::vector<char>>((const char *)src, (const char *)src + sspan);
        from = staged->data();
    }
    char *to = (char *)dst;
    CUstream_st *q = stream_of(s, st);
    push(s, q, item{WORK, call, [=]() {
                        for (size_t r = 0; r < height; r++) memmove(to + r * dpitch, from + r * spitch, width);
                        (void)staged;
                    }, nullptr, 0, 0});
    if (classify(s, dst, dspan) == P_PAGEABLE) complete(s, q, last_seq(q), call);
    return s.sticky;
}

} // namespace

namespace emu {

void enqueue(cudaStream_t st, const char *what, std::function<void()> fn) {
    guard g;
    push(g.s, stream_of(g.s, st), item{WORK, what, std::move(fn), nullptr, 0, 0});
}

bool is_device(const void *p, size_t bytes) {
    guard g;
    return in_map(g.s.device, p, bytes);
}

bool is_pinned(const void *p, size_t bytes) {
    guard g;
    return in_map(g.s.pinned, p, bytes);
}

void fault(const char *what, const char *fmt, ...) {
    guard g;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cuda-emu: fault in %s: ", what);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    if (g.s.sticky == cudaSuccess) g.s.sticky = cudaErrorIllegalAddress;
}

bool has_fault(void) { return S().sticky != cudaSuccess; }

bool read_host_scalar(const char *fn, const char *name, const void *p, bool f64, const char *host_why, double *v) {
    if (!p) {
        note("%s: %s is NULL", fn, name);
        return false;
    }
    if (is_device(p, f64 ? sizeof(double) : sizeof(float))) {
        note("%s: %s = %p is device memory; %s", fn, name, p, host_why);
        return false;
    }
    if (f64) {
        memcpy(v, p, sizeof(double));
    } else {
        float f;
        memcpy(&f, p, sizeof f);
        *v = f;
    }
    return true;
}

void set_last_error(cudaError_t e) {
    guard g;
    g.s.last = e;
}

void note(const char *fmt, ...) {
    guard g;
    if (!g.s.verbose) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cuda-emu: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

} // namespace emu

extern "C" {

const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorHostMemoryAlreadyRegistered: return "part or all of the requested memory range is already mapped";
    case cudaErrorHostMemoryNotRegistered: return "pointer does not correspond to a registered memory region";
    }
    return "unrecognized error code";
}

cudaError_t cudaGetLastError(void) {
    guard g;
    cudaError_t e = g.s.sticky ? g.s.sticky : g.s.last;
    g.s.last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) {
    guard g;
    return g.s.sticky ? g.s.sticky : g.s.last;
}

static bool device_hidden(void) {
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    return v && (v[0] == 0 || v[0] == '-');
}

cudaError_t cudaGetDeviceCount(int *n) {
    guard g;
    if (device_hidden()) {
        *n = 0;
        return fail(g.s, cudaErrorNoDevice);
    }
    *n = 1;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int d) {
    guard g;
    if (device_hidden()) return fail(g.s, cudaErrorNoDevice);
    return d == 0 ? cudaSuccess : fail(g.s, cudaErrorInvalidDevice);
}

cudaError_t cudaDeviceSynchronize(void) {
    guard g;
    return sync_all(g.s, "cudaDeviceSynchronize");
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    guard g;
    if (g.s.sticky) return g.s.sticky;
    *free_bytes = g.s.capacity - g.s.used;
    *total_bytes = g.s.capacity;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
    guard g;
    if (device_hidden()) return fail(g.s, cudaErrorNoDevice);
    if (device != 0) return fail(g.s, cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "Scorch CUDA emulator");
    prop->totalGlobalMem = g.s.capacity;
    prop->major = 9;
    prop->minor = 0;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version) {
    *version = 12000;
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t bytes) {
    guard g;
    state &s = g.s;
    if (s.sticky) return s.sticky;
    *p = NULL;
    if (bytes == 0) return cudaSuccess;
    size_t rounded = (bytes + 255) / 256 * 256; /* the runtime's allocation granule */
    if (rounded > s.capacity - s.used) {
        emu::note("cudaMalloc of %zu bytes: %zu of %zu bytes free", bytes, s.capacity - s.used, s.capacity);
        return fail(s, cudaErrorMemoryAllocation);
    }
    void *m = aligned_alloc(256, rounded);
    if (!m) return fail(s, cudaErrorMemoryAllocation);
    memset(m, 0xff, rounded);
    s.device[(uintptr_t)m] = bytes;
    s.used += rounded;
    *p = m;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
    guard g;
    state &s = g.s;
    if (!p) return cudaSuccess;
    sync_all(s, "cudaFree"); /* cudaFree synchronises the device */
    auto it = s.device.find((uintptr_t)p);
    if (it == s.device.end()) {
        emu::note("cudaFree(%p): not the start of a device allocation", p);
        return fail(s, cudaErrorInvalidValue);
    }
    s.used -= (it->second + 255) / 256 * 256;
    s.device.erase(it);
    free(p);
    return s.sticky;
}

cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned int flags) {
    guard g;
    if (g.s.sticky) return g.s.sticky;
    *p = NULL;
    if (flags != cudaHostAllocDefault) return fail(g.s, cudaErrorInvalidValue);
    void *m = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096 + 4096);
    if (!m) return fail(g.s, cudaErrorMemoryAllocation);
    memset(m, 0xff, bytes);
    g.s.pinned[(uintptr_t)m] = bytes;
    *p = m;
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p) {
    guard g;
    state &s = g.s;
    if (!p) return cudaSuccess;
    sync_all(s, "cudaFreeHost");
    auto it = s.pinned.find((uintptr_t)p);
    if (it == s.pinned.end() || s.registered.count((uintptr_t)p)) {
        emu::note("cudaFreeHost(%p): not a pinned allocation", p);
        return fail(s, cudaErrorInvalidValue);
    }
    s.pinned.erase(it);
    free(p);
    return s.sticky;
}

/* Whether [lo, hi) (page-rounded) meets a pinned range's pages. Pinned ranges never share a page,
 * so walking down from hi stops at the first range that ends at or below lo. */
static bool pages_pinned(state &s, uintptr_t lo, uintptr_t hi) {
    auto it = s.pinned.lower_bound(hi);
    while (it != s.pinned.begin()) {
        --it;
        uintptr_t a = it->first & ~(uintptr_t)4095, b = (it->first + it->second + 4095) & ~(uintptr_t)4095;
        if (b <= lo) break;
        if (a < hi) return true;
    }
    return false;
}

cudaError_t cudaHostRegister(void *p, size_t bytes, unsigned int flags) {
    guard g;
    if (g.s.sticky) return g.s.sticky;
    if (flags != cudaHostRegisterDefault || !p || !bytes) return fail(g.s, cudaErrorInvalidValue);
    uintptr_t lo = (uintptr_t)p & ~(uintptr_t)4095, hi = ((uintptr_t)p + bytes + 4095) & ~(uintptr_t)4095;
    if (pages_pinned(g.s, lo, hi)) return fail(g.s, cudaErrorHostMemoryAlreadyRegistered);
    if (in_map(g.s.device, p, 1)) return fail(g.s, cudaErrorInvalidValue);
    g.s.pinned[(uintptr_t)p] = bytes;
    g.s.registered.insert((uintptr_t)p);
    return cudaSuccess;
}

cudaError_t cudaHostUnregister(void *p) {
    guard g;
    state &s = g.s;
    if (!s.registered.count((uintptr_t)p)) {
        emu::note("cudaHostUnregister(%p): not a registered range", p);
        return fail(s, cudaErrorHostMemoryNotRegistered);
    }
    sync_all(s, "cudaHostUnregister");
    s.pinned.erase((uintptr_t)p);
    s.registered.erase((uintptr_t)p);
    return s.sticky;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *st, unsigned int flags) {
    guard g;
    if (g.s.sticky) return g.s.sticky;
    if (flags & ~(unsigned)cudaStreamNonBlocking) return fail(g.s, cudaErrorInvalidValue);
    *st = new CUstream_st;
    g.s.streams.insert(*st);
    return cudaSuccess;
}

/* Like CUDA, destroying a stream with pending work lets the work finish first. */
cudaError_t cudaStreamDestroy(cudaStream_t st) {
    guard g;
    state &s = g.s;
    if (!st || !s.streams.count(st)) return fail(s, cudaErrorInvalidResourceHandle);
    complete(s, st, last_seq(st), "cudaStreamDestroy");
    s.streams.erase(st);
    delete st;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t st) {
    guard g;
    state &s = g.s;
    if (!stream_valid(s, st)) return fail(s, cudaErrorInvalidResourceHandle);
    CUstream_st *q = stream_of(s, st);
    complete(s, q, last_seq(q), "cudaStreamSynchronize");
    return s.sticky;
}

/* The emulator runs a stream's work when asked about it: a query completes it, so it never answers
 * cudaErrorNotReady. */
cudaError_t cudaStreamQuery(cudaStream_t st) { return cudaStreamSynchronize(st); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) {
    guard g;
    if (g.s.sticky) return g.s.sticky;
    if (flags & ~(unsigned)cudaEventDisableTiming) return fail(g.s, cudaErrorInvalidValue);
    *e = new CUevent_st;
    g.s.events.insert(*e);
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
    guard g;
    if (!e || !g.s.events.count(e)) return fail(g.s, cudaErrorInvalidResourceHandle);
    g.s.events.erase(e);
    delete e; /* queued records and waits keep the state alive */
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t st) {
    guard g;
    state &s = g.s;
    if (s.sticky) return s.sticky;
    if (!e || !s.events.count(e) || !stream_valid(s, st)) return fail(s, cudaErrorInvalidResourceHandle);
    uint64_t gen = ++e->st->recorded;
    CUstream_st *q = stream_of(s, st);
    e->st->pending[gen] = {q, s.seq + 1}; /* the seq push gives it */
    push(s, q, item{RECORD, "cudaEventRecord", nullptr, e->st, gen, 0});
    return cudaSuccess;
}

/* Waits for the event's latest record at the time of this call; an event never recorded is
 * complete. */
cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t e, unsigned int flags) {
    guard g;
    state &s = g.s;
    if (s.sticky) return s.sticky;
    if (!e || !s.events.count(e) || !stream_valid(s, st)) return fail(s, cudaErrorInvalidResourceHandle);
    if (flags != 0) return fail(s, cudaErrorInvalidValue);
    if (e->st->recorded == 0) return cudaSuccess;
    push(s, stream_of(s, st), item{WAIT, "cudaStreamWaitEvent", nullptr, e->st, e->st->recorded, 0});
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    guard g;
    state &s = g.s;
    if (!e || !s.events.count(e)) return fail(s, cudaErrorInvalidResourceHandle);
    std::shared_ptr<emu_event_state> ev = e->st;
    auto rec = ev->pending.find(ev->recorded);
    if (ev->done < ev->recorded && rec != ev->pending.end())
        complete(s, rec->second.first, rec->second.second, "cudaEventSynchronize");
    return s.sticky;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t st) {
    return copy_2d("cudaMemcpyAsync", dst, bytes, src, bytes, bytes, 1, kind, st);
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                              enum cudaMemcpyKind kind, cudaStream_t st) {
    return copy_2d("cudaMemcpy2DAsync", dst, dpitch, src, spitch, width, height, kind, st);
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t st) {
    guard g;
    state &s = g.s;
    if (s.sticky) return s.sticky;
    if (!stream_valid(s, st)) return fail(s, cudaErrorInvalidResourceHandle);
    if (bytes == 0) return cudaSuccess;
    if (!in_map(s.device, p, bytes)) {
        emu::note("cudaMemsetAsync: %p + %zu bytes is not inside one device allocation", p, bytes);
        return fail(s, cudaErrorInvalidValue);
    }
    char *to = (char *)p;
    push(s, stream_of(s, st), item{WORK, "cudaMemsetAsync", [=]() { memset(to, value, bytes); }, nullptr, 0, 0});
    return cudaSuccess;
}

} // extern "C"
