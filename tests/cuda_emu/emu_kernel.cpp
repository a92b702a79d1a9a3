/* The kernel engine of the CUDA emulator: blocks run one after another, a block's threads are
 * fibers scheduled at barriers (execution model in emu_device.h).
 *
 * Fibers switch with a few instructions of assembly on x86-64 (callee-saved registers, the stack
 * pointer, MXCSR and the x87 control word: the System V ABI's preserved state), because glibc's
 * swapcontext makes a system call per switch and a grid is hundreds of thousands of threads.
 * Other architectures use ucontext. Stacks are 64 KiB with a guard page below, kept for reuse.
 *
 * Under ThreadSanitizer (an emulator build with -fsanitize=thread) every thread slot of a block is
 * a TSan fiber, switched without implicit synchronisation, and the happens-before edges are exactly
 * CUDA's: a barrier orders everything before it in the block (warp: in the warp) before everything
 * after it, blocks and launches are ordered by the stream, and atomics synchronise. So two threads
 * of a block touching the same shared or global memory, one writing, with no barrier between, is a
 * TSan report: compute-sanitizer's racecheck, for the threads of one block (blocks run one after
 * another here, ordered, so races between blocks are not seen). The emulator's own bookkeeping is
 * not instrumented.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "emu_device.h"

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define EMU_TSAN 1
#define EMU_QUIET __attribute__((no_sanitize_thread))
/* ordering points: blocks start after the scheduler's release and end before its acquire */
static char tsan_block_start, tsan_block_done, tsan_barrier, tsan_warp[32];
#else
#define EMU_TSAN 0
#define EMU_QUIET
#endif

namespace emu {

uint3 cur_thread_idx;
uint3 cur_block_idx;
dim3 cur_block_dim, cur_grid_dim;

enum fiber_state { F_READY, F_BLOCK_BARRIER, F_WARP_BARRIER, F_DONE };

struct fiber {
#if defined(__x86_64__)
    void *sp;
#else
    ucontext_t uc;
#endif
    void *stack;
    fiber_state state;
    uint3 idx;
    int lane, warp;
#if EMU_TSAN
    void *tsan; /* this slot's TSan fiber, kept across blocks */
#endif
};

enum { STACK_BYTES = 64 << 10, PAGE = 4096, MAX_THREADS = 1024 };

#if defined(__x86_64__)
/* emu_switch(&from_sp, to_sp): saves the preserved registers on the current stack, stores the
 * stack pointer in *from_sp, loads to_sp and restores what that stack saved. */
extern "C" void emu_switch(void **from_sp, void *to_sp);
__asm__(".text\n"
        ".globl emu_switch\n"
        ".type emu_switch,@function\n"
        "emu_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  subq $16, %rsp\n  stmxcsr 8(%rsp)\n  fnstcw (%rsp)\n"
        "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
        "  fldcw (%rsp)\n  ldmxcsr 8(%rsp)\n  addq $16, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size emu_switch, .-emu_switch\n");
#endif

static struct {
    fiber threads[MAX_THREADS];
    int n;
    const char *name;
    void (*body)(void *);
    void *arg;
    fiber *cur;
#if defined(__x86_64__)
    void *sched_sp;
#else
    ucontext_t sched;
#endif
    uint64_t slots[MAX_THREADS / 32][32]; /* shuffle exchange, per warp */
#if EMU_TSAN
    void *sched_tsan;
#endif
    unsigned long long launches;
} E;

static void *stack_of(int t) {
    static void *stacks[MAX_THREADS];
    if (!stacks[t]) {
        void *p = mmap(NULL, STACK_BYTES + PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            fprintf(stderr, "cuda-emu: cannot map a fiber stack\n");
            abort();
        }
        mprotect(p, PAGE, PROT_NONE); /* overflow faults instead of corrupting a neighbour */
        stacks[t] = p;
    }
    return stacks[t];
}

EMU_QUIET static void to_scheduler(void) {
#if EMU_TSAN
    __tsan_switch_to_fiber(E.sched_tsan, __tsan_switch_to_fiber_no_sync);
#endif
#if defined(__x86_64__)
    emu_switch(&E.cur->sp, E.sched_sp);
#else
    swapcontext(&E.cur->uc, &E.sched);
#endif
}

EMU_QUIET static void fiber_main(void) {
#if EMU_TSAN
    __tsan_acquire(&tsan_block_start);
#endif
    E.body(E.arg);
#if EMU_TSAN
    __tsan_release(&tsan_block_done);
#endif
    E.cur->state = F_DONE;
    to_scheduler();
    abort(); /* a finished fiber is never resumed */
}

EMU_QUIET static void fiber_init(fiber *f, int t) {
    char *base = (char *)stack_of(t);
    f->stack = base;
#if defined(__x86_64__)
    /* The frame emu_switch pops: x87 CW and MXCSR, r15..rbp, then the return address (fiber_main);
     * above it a zero slot so fiber_main starts with the stack aligned as after a call. */
    uint64_t *top = (uint64_t *)(base + PAGE + STACK_BYTES);
    uint64_t *sp = top - 10;
    uint32_t mxcsr;
    uint16_t fcw;
    __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
    __asm__ volatile("fnstcw %0" : "=m"(fcw));
    memset(sp, 0, 10 * sizeof *sp);
    memcpy(&sp[0], &fcw, sizeof fcw);
    memcpy(&sp[1], &mxcsr, sizeof mxcsr);
    sp[8] = (uint64_t)(uintptr_t)fiber_main;
    f->sp = sp;
#else
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = base + PAGE;
    f->uc.uc_stack.ss_size = STACK_BYTES;
    f->uc.uc_link = NULL;
    makecontext(&f->uc, fiber_main, 0);
#endif
    f->state = F_READY;
}

EMU_QUIET static void resume(fiber *f) {
    E.cur = f;
    cur_thread_idx = f->idx;
#if EMU_TSAN
    if (!f->tsan) f->tsan = __tsan_create_fiber(0);
    __tsan_switch_to_fiber(f->tsan, __tsan_switch_to_fiber_no_sync);
#endif
#if defined(__x86_64__)
    emu_switch(&E.sched_sp, f->sp);
#else
    swapcontext(&E.sched, &f->uc);
#endif
    E.cur = NULL;
}

static int warp_size_of(int w) {
    int left = E.n - 32 * w;
    return left < 32 ? left : 32;
}

static unsigned warp_mask_of(int w) {
    int k = warp_size_of(w);
    return k == 32 ? 0xffffffffu : ((1u << k) - 1);
}

/* After a sweep: open the barriers every named thread reached. Returns false on a fault. */
EMU_QUIET static bool release_barriers(void) {
    int at_block = 0, done = 0, at_warp = 0;
    for (int t = 0; t < E.n; t++) {
        at_block += E.threads[t].state == F_BLOCK_BARRIER;
        done += E.threads[t].state == F_DONE;
        at_warp += E.threads[t].state == F_WARP_BARRIER;
    }
    int nw = (E.n + 31) / 32;
    bool released = false;
    for (int w = 0; w < nw; w++) {
        int k = warp_size_of(w), waiting = 0;
        for (int l = 0; l < k; l++) waiting += E.threads[32 * w + l].state == F_WARP_BARRIER;
        if (waiting == 0) continue;
        if (waiting != k) {
            fault(E.name, "block (%u,%u,%u): %d of the %d lanes of warp %d reached a shuffle, the others %s",
                  cur_block_idx.x, cur_block_idx.y, cur_block_idx.z, waiting, k, w,
                  at_block ? "wait at __syncthreads" : "exited");
            return false;
        }
        for (int l = 0; l < k; l++) E.threads[32 * w + l].state = F_READY;
        released = true;
    }
    if (released || at_block == 0) return true;
    if (at_warp == 0 && at_block + done == E.n && done > 0) {
        fault(E.name, "block (%u,%u,%u): %d threads wait at __syncthreads while %d exited", cur_block_idx.x,
              cur_block_idx.y, cur_block_idx.z, at_block, done);
        return false;
    }
    for (int t = 0; t < E.n; t++)
        if (E.threads[t].state == F_BLOCK_BARRIER) E.threads[t].state = F_READY;
    return true;
}

EMU_QUIET static bool run_block(bool reverse) {
#if EMU_TSAN
    __tsan_release(&tsan_block_start);
    struct done_guard {
        ~done_guard() { __tsan_acquire(&tsan_block_done); }
    } acquire_at_end;
#endif
    for (int t = 0; t < E.n; t++) {
        fiber *f = &E.threads[t];
        fiber_init(f, t);
        f->idx = {(unsigned)t % cur_block_dim.x, ((unsigned)t / cur_block_dim.x) % cur_block_dim.y,
                  (unsigned)t / (cur_block_dim.x * cur_block_dim.y)};
        f->lane = t % 32;
        f->warp = t / 32;
    }
    for (;;) {
        int ran = 0;
        for (int i = 0; i < E.n; i++) {
            fiber *f = &E.threads[reverse ? E.n - 1 - i : i];
            if (f->state != F_READY) continue;
            resume(f);
            ran++;
            if (has_fault()) return false;
        }
        bool all_done = true;
        for (int t = 0; t < E.n && all_done; t++) all_done = E.threads[t].state == F_DONE;
        if (all_done) return true;
        if (!release_barriers()) return false;
        (void)ran;
    }
}

bool launch_config_ok(const char *name, dim3 g, dim3 b, size_t shmem) {
    unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    const char *why = NULL;
    if (g.x == 0 || g.y == 0 || g.z == 0 || b.x == 0 || b.y == 0 || b.z == 0) why = "a zero grid or block dimension";
    else if (threads > 1024) why = "more than 1024 threads per block";
    else if (b.x > 1024 || b.y > 1024 || b.z > 64) why = "a block dimension over its limit (1024, 1024, 64)";
    else if (g.x > 2147483647u || g.y > 65535 || g.z > 65535) why = "a grid dimension over its limit (2^31-1, 65535, 65535)";
    else if (shmem > 48 * 1024) why = "more than 48 KiB of dynamic shared memory";
    if (!why) return true;
    note("launch of %s <<<(%u,%u,%u), (%u,%u,%u), %zu>>> refused: %s", name, g.x, g.y, g.z, b.x, b.y, b.z, shmem, why);
    set_last_error(cudaErrorInvalidConfiguration);
    return false;
}

EMU_QUIET void run_grid(const char *name, dim3 g, dim3 b, void (*body)(void *), void *arg) {
#if EMU_TSAN
    E.sched_tsan = __tsan_get_current_fiber();
#endif
    E.n = (int)(b.x * b.y * b.z);
    E.name = name;
    E.body = body;
    E.arg = arg;
    cur_block_dim = b;
    cur_grid_dim = g;
    bool reverse = (E.launches++ & 1) != 0;
    for (unsigned z = 0; z < g.z; z++)
        for (unsigned y = 0; y < g.y; y++)
            for (unsigned x = 0; x < g.x; x++) {
                cur_block_idx = {x, y, z};
                if (!run_block(reverse)) return;
            }
}

EMU_QUIET void syncthreads(void) {
    if (!E.cur) {
        fault("__syncthreads", "called outside a kernel");
        return;
    }
#if EMU_TSAN
    __tsan_release(&tsan_barrier);
#endif
    E.cur->state = F_BLOCK_BARRIER;
    to_scheduler();
#if EMU_TSAN
    __tsan_acquire(&tsan_barrier);
#endif
}

EMU_QUIET static void warp_barrier(void) {
#if EMU_TSAN
    __tsan_release(&tsan_warp[E.cur->warp]);
#endif
    E.cur->state = F_WARP_BARRIER;
    to_scheduler();
#if EMU_TSAN
    __tsan_acquire(&tsan_warp[E.cur->warp]);
#endif
}

EMU_QUIET int lane_id(void) { return E.cur ? E.cur->lane : 0; }

EMU_QUIET uint64_t shfl(unsigned mask, uint64_t bits, int src_lane) {
    fiber *f = E.cur;
    if (!f) {
        fault("__shfl_sync", "called outside a kernel");
        return bits;
    }
    if (mask != warp_mask_of(f->warp)) {
        fault(E.name, "shuffle mask 0x%08x, but warp %d has lanes 0x%08x (partial masks are not emulated)", mask, f->warp,
              warp_mask_of(f->warp));
        to_scheduler(); /* the scheduler sees the fault and abandons the block */
    }
    uint64_t *slot = E.slots[f->warp];
    slot[f->lane] = bits;
    warp_barrier(); /* every lane has published */
    uint64_t r = src_lane >= 0 && src_lane < warp_size_of(f->warp) ? slot[src_lane] : bits;
    warp_barrier(); /* every lane has read before the next shuffle overwrites */
    return r;
}

} // namespace emu
