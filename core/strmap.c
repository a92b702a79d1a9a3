#include "core/strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

void sc_strmap_init(sc_strmap *m) { memset(m, 0, sizeof *m); }

void sc_strmap_free(sc_strmap *m) {
    free(m->slots);
    memset(m, 0, sizeof *m);
}

/* The slot holding key (hash h), or the empty slot where it belongs. The keys of a 13M-value
 * training graph are scattered over a GB of arena: comparing the stored hash first saves a cache
 * miss per probe past another key. Slots are indexed by the 32-bit hash. */
static size_t slot_find(const sc_strmap *m, const char *key, unsigned h) {
    size_t i = h & (m->cap - 1);
    while (m->slots[i].key && (m->slots[i].hash != h || strcmp(m->slots[i].key, key) != 0)) i = (i + 1) & (m->cap - 1);
    return i;
}

unsigned sc_strmap_hash(const char *key) { return (unsigned)hash_str(key); }

/* Rehashes into cap slots (a power of two, at least twice the count: load factor <= 1/2). */
static bool rehash(sc_strmap *m, size_t cap) {
    sc_strmap_slot *slots = calloc(cap, sizeof *slots);
    if (!slots) return false;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].key) continue;
        size_t j = m->slots[i].hash & (cap - 1);
        while (slots[j].key) j = (j + 1) & (cap - 1);
        slots[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return true;
}

static bool grow(sc_strmap *m) { return rehash(m, m->cap ? m->cap * 2 : 64); }

bool sc_strmap_reserve(sc_strmap *m, size_t n) {
    size_t cap = m->cap ? m->cap : 64;
    while (cap < 2 * n) cap *= 2;
    return cap == m->cap || rehash(m, cap);
}

bool sc_strmap_put(sc_strmap *m, const char *key, int val) {
    if ((m->count + 1) * 2 > m->cap && !grow(m)) return false;
    unsigned h = (unsigned)hash_str(key);
    size_t i = slot_find(m, key, h);
    if (!m->slots[i].key) m->count++;
    m->slots[i] = (sc_strmap_slot){key, h, val};
    return true;
}

int sc_strmap_get(const sc_strmap *m, const char *key) {
    if (!m->cap) return -1;
    size_t i = slot_find(m, key, (unsigned)hash_str(key));
    return m->slots[i].key ? m->slots[i].val : -1;
}

int sc_strmap_put_new(sc_strmap *m, const char *key, int val) {
    return sc_strmap_put_new_hashed(m, key, (unsigned)hash_str(key), val);
}

int sc_strmap_put_new_hashed(sc_strmap *m, const char *key, unsigned h, int val) {
    if ((m->count + 1) * 2 > m->cap && !grow(m)) return -2;
    size_t i = slot_find(m, key, h);
    if (m->slots[i].key) return m->slots[i].val;
    m->count++;
    m->slots[i] = (sc_strmap_slot){key, h, val};
    return -1;
}

/* Backward-shift deletion: the entries after the hole that could live in it (their home is not in
 * the cyclic range (hole, their slot]) move back, so every probe still ends at the first empty slot. */
bool sc_strmap_remove(sc_strmap *m, const char *key) {
    if (!m->cap) return false;
    size_t mask = m->cap - 1, hole = slot_find(m, key, (unsigned)hash_str(key));
    if (!m->slots[hole].key) return false;
    for (size_t j = (hole + 1) & mask; m->slots[j].key; j = (j + 1) & mask) {
        size_t home = m->slots[j].hash & mask;
        bool stays = hole < j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (stays) continue;
        m->slots[hole] = m->slots[j];
        hole = j;
    }
    m->slots[hole] = (sc_strmap_slot){0};
    m->count--;
    return true;
}
