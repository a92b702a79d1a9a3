#include "core/arena.h"

#include "core/alloc_fail.h"
#include "core/big_alloc.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SC_ARENA_ALIGN 64

struct sc_arena_chunk {
    sc_arena_chunk *next;
    size_t size, used;
    unsigned char *base; /* aligned start of the usable area */
    void *mem;           /* what was allocated (base rounded down) */
};

void sc_arena_init(sc_arena *a) {
    a->head = NULL;
    a->chunk_size = 1u << 20;
    a->total = 0;
}

/* zeroed: a chunk of its own for one big allocation comes from calloc, which hands out fresh pages
 * from the kernel (already zero) without writing them, so a zeroed block nobody touches (optimizer
 * state while only planning: 320 MB at depth 250000) is never faulted in. */
static sc_arena_chunk *chunk_new(size_t size, bool zeroed) {
    sc_arena_chunk *c = malloc(sizeof *c);
    if (!c) return NULL;
    void *mem = NULL;
    if (zeroed ? !(mem = calloc(1, size + SC_ARENA_ALIGN - 1)) : posix_memalign(&mem, SC_ARENA_ALIGN, size) != 0) {
        free(c);
        return NULL;
    }
    c->mem = mem;
    sc_big_advise(mem, size); /* parameters and optimizer state of hundreds of MB: core/big_alloc.h */
    c->base = (unsigned char *)(((uintptr_t)mem + SC_ARENA_ALIGN - 1) & ~(uintptr_t)(SC_ARENA_ALIGN - 1));
    c->size = size;
    c->used = 0;
    c->next = NULL;
    return c;
}

void *sc_arena_alloc(sc_arena *a, size_t size) { return sc_arena_alloc_aligned(a, size, SC_ARENA_ALIGN); }

/* Chunks start 64-byte aligned, so aligning the offset within the chunk aligns the address. */
void *sc_arena_alloc_aligned(sc_arena *a, size_t size, size_t align) {
    if (!a->chunk_size) a->chunk_size = 1u << 20; /* a zero-initialised (static) arena works too */
    if (align == 0 || align > SC_ARENA_ALIGN || (align & (align - 1))) align = SC_ARENA_ALIGN;
    if (size == 0) size = 1;
    if (size > SIZE_MAX - SC_ARENA_ALIGN) return NULL;
    if (sc_alloc_fail_now()) return NULL; /* tests: injected out-of-memory (core/alloc_fail.h) */
    size_t rounded = (size + align - 1) & ~(align - 1);
    sc_arena_chunk *c = a->head;
    size_t start = c ? (c->used + align - 1) & ~(align - 1) : 0;
    if (!c || start > c->size || c->size - start < rounded) {
        if (rounded > a->chunk_size / 4) {
            /* Big allocation: its own chunk, linked behind the head so the head keeps filling. */
            sc_arena_chunk *big = chunk_new(rounded, true);
            if (!big) return NULL;
            big->used = rounded;
            if (c) {
                big->next = c->next;
                c->next = big;
            } else {
                a->head = big;
            }
            a->total += rounded;
            return big->base;
        }
        sc_arena_chunk *fresh = chunk_new(a->chunk_size, false);
        if (!fresh) return NULL;
        fresh->next = c;
        a->head = c = fresh;
        start = 0;
    }
    void *p = c->base + start;
    c->used = start + rounded;
    a->total += rounded;
    memset(p, 0, rounded);
    return p;
}

void *sc_arena_alloc_array(sc_arena *a, size_t count, size_t elem_size) {
    if (elem_size && count > SIZE_MAX / elem_size) return NULL;
    return sc_arena_alloc(a, count * elem_size);
}

char *sc_arena_strndup(sc_arena *a, const char *s, size_t n) {
    char *d = sc_arena_alloc_aligned(a, n + 1, 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

char *sc_arena_strdup(sc_arena *a, const char *s) { return sc_arena_strndup(a, s, strlen(s)); }

void sc_arena_free_all(sc_arena *a) {
    sc_arena_chunk *c = a->head;
    while (c) {
        sc_arena_chunk *next = c->next;
        free(c->mem);
        free(c);
        c = next;
    }
    a->head = NULL;
    a->total = 0;
}
