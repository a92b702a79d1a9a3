/* A bump arena: many small allocations freed at once (docs/STYLE.md habit 4).
 * Allocations are zeroed and 64-byte aligned (so tensor data can be loaded with aligned vectors),
 * except where a smaller alignment is asked for: strings (1) and id lists (4) are most of a large
 * graph's arena, and padding each to 64 bytes tripled it (13M values at depth 250000). 
 * Large requests get a chunk of their own, so a 500 MB initializer does not waste a block. */
#ifndef SC_ARENA_H
#define SC_ARENA_H

#include <stddef.h>

typedef struct sc_arena_chunk sc_arena_chunk;

typedef struct {
    sc_arena_chunk *head; /* chunk being filled */
    size_t chunk_size;    /* default size of a new chunk */
    size_t total;         /* bytes handed out, for reporting */
} sc_arena;

void sc_arena_init(sc_arena *a);
/* Returns NULL only when the system is out of memory. */
void *sc_arena_alloc(sc_arena *a, size_t size);
/* align: a power of two up to 64 (anything else means 64). */
void *sc_arena_alloc_aligned(sc_arena *a, size_t size, size_t align);
void *sc_arena_alloc_array(sc_arena *a, size_t count, size_t elem_size); /* overflow-checked */
char *sc_arena_strdup(sc_arena *a, const char *s);
char *sc_arena_strndup(sc_arena *a, const char *s, size_t n);
void sc_arena_free_all(sc_arena *a);

#endif
