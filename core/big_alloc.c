/* Large host buffers on transparent huge pages (contract in big_alloc.h). */
#include "core/big_alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

void *sc_big_alloc(size_t bytes) {
    if (bytes < SC_BIG_ALLOC_MIN) return aligned_alloc(64, (bytes + 63) / 64 * 64);
    size_t size = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    void *p = aligned_alloc(HUGE_PAGE, size);
    sc_big_advise(p, size);
    return p;
}

void sc_big_advise(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
    if (!p || bytes < SC_BIG_ALLOC_MIN) return;
    uintptr_t lo = ((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    uintptr_t hi = ((uintptr_t)p + bytes) & ~(uintptr_t)(HUGE_PAGE - 1);
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE); /* a hint: failure leaves plain pages */
#else
    (void)p, (void)bytes;
#endif
}
