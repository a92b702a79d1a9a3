/* Allocation-failure injection (alloc_fail.h). Atomics because kernels may allocate from OpenMP
 * threads; the n-th allocation is then "some" allocation, still exactly one. */
#include "core/alloc_fail.h"

#include <stdatomic.h>
#include <stdlib.h>

static atomic_llong target;  /* 0: disarmed */
static atomic_llong counter; /* counted allocations since arming */
static atomic_bool fired;
static atomic_int env_read;  /* 0: SCORCH_ALLOC_FAIL not looked at yet */

void sc_alloc_fail_arm(int64_t n) {
    atomic_store(&env_read, 1);
    atomic_store(&counter, 0);
    atomic_store(&fired, false);
    atomic_store(&target, n > 0 ? n : 0);
}

int64_t sc_alloc_fail_count(void) { return atomic_load(&counter); }
bool sc_alloc_fail_fired(void) { return atomic_load(&fired); }

static void env_arm(void) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&env_read, &expected, 1)) return;
    const char *e = getenv("SCORCH_ALLOC_FAIL");
    if (e && *e) atomic_store(&target, strtoll(e, NULL, 10));
}

bool sc_alloc_fail_now(void) {
    if (!atomic_load_explicit(&env_read, memory_order_relaxed)) env_arm();
    long long c = atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed) + 1;
    long long t = atomic_load_explicit(&target, memory_order_relaxed);
    if (t <= 0 || c != t) return false;
    atomic_store(&fired, true);
    return true;
}
