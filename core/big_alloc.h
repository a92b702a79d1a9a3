/* Large host buffers backed by transparent huge pages where the kernel offers them.
 *
 * Debian's default THP mode is "madvise": without the advice every 4 KiB page of an arena faults in
 * on its own. A GPT-2 small training run (batch 1, seq 1024) took 1.17M minor faults, 12 s of system
 * time in its first step, for the 2.4 GB plan arena, the parameters, the optimizer state and the
 * rollback copy. sc_big_alloc aligns a buffer of at least SC_BIG_ALLOC_MIN bytes to 2 MiB and advises
 * MADV_HUGEPAGE on it (a hint: where THP is off or the advice unknown, plain pages); smaller buffers
 * are a 64-byte-aligned aligned_alloc. Free with free(). */
#ifndef SC_BIG_ALLOC_H
#define SC_BIG_ALLOC_H

#include <stddef.h>

#define SC_BIG_ALLOC_MIN ((size_t)4 << 20)

void *sc_big_alloc(size_t bytes);
/* The same advice for a buffer allocated elsewhere (calloc's fresh pages included), on the 2 MiB
 * pages that lie wholly inside it; nothing for one under SC_BIG_ALLOC_MIN. Pages not yet touched
 * stay untouched: the advice changes what a first touch faults in, not when. */
void sc_big_advise(void *p, size_t bytes);

#endif
