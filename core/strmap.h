/* A string -> int map (open addressing, FNV-1a). Value names are looked up once per reference at
 * import, so a 250,000-layer model must not pay a linear scan per lookup. Keys are not copied: they
 * must outlive the map (they live in the graph arena). */
#ifndef SC_STRMAP_H
#define SC_STRMAP_H

#include <stdbool.h>
#include <stddef.h>

/* One slot: the key, its hash (low 32 bits: probes past other keys need no strcmp) and its value,
 * together so that a probe touches one cache line. */
typedef struct {
    const char *key;
    unsigned hash;
    int val;
} sc_strmap_slot;

typedef struct {
    sc_strmap_slot *slots;
    size_t cap, count;
} sc_strmap;

void sc_strmap_init(sc_strmap *m);
void sc_strmap_free(sc_strmap *m);
/* Returns false on allocation failure. Replaces an existing key's value. */
bool sc_strmap_put(sc_strmap *m, const char *key, int val);
/* Returns -1 when absent. */
int sc_strmap_get(const sc_strmap *m, const char *key);
/* Inserts key -> val unless key is present (one hash and probe, not get + put): returns the
 * present key's value, -1 after inserting, -2 on allocation failure. */
int sc_strmap_put_new(sc_strmap *m, const char *key, int val);

/* For bulk insertion in slot order (graph_names_resolve): the 32-bit hash the map uses, the home
 * slot of a hash, room for n entries without growing, and put_new with the hash given. Inserting
 * keys sorted by home slot walks the table once instead of missing the cache on every key. */
unsigned sc_strmap_hash(const char *key);
static inline size_t sc_strmap_home(const sc_strmap *m, unsigned h) { return h & (m->cap - 1); }
bool sc_strmap_reserve(sc_strmap *m, size_t n);
/* Removes key; false when it was absent. */
bool sc_strmap_remove(sc_strmap *m, const char *key);
int sc_strmap_put_new_hashed(sc_strmap *m, const char *key, unsigned h, int val);

#endif
