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
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static void insert_slot(const char **keys, int *vals, size_t cap, const char *key, int val) {
    size_t i = hash_str(key) & (cap - 1);
    while (keys[i] && strcmp(keys[i], key) != 0) i = (i + 1) & (cap - 1);
    keys[i] = key;
    vals[i] = val;
}

static bool grow(sc_strmap *m) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    const char **keys = calloc(cap, sizeof *keys);
    int *vals = calloc(cap, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i]) insert_slot(keys, vals, cap, m->keys[i], m->vals[i]);
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return true;
}

bool sc_strmap_put(sc_strmap *m, const char *key, int val) {
    if ((m->count + 1) * 2 > m->cap && !grow(m)) return false;
    size_t i = hash_str(key) & (m->cap - 1);
    while (m->keys[i] && strcmp(m->keys[i], key) != 0) i = (i + 1) & (m->cap - 1);
    if (!m->keys[i]) m->count++;
    m->keys[i] = key;
    m->vals[i] = val;
    return true;
}

int sc_strmap_get(const sc_strmap *m, const char *key) {
    if (!m->cap) return -1;
    size_t i = hash_str(key) & (m->cap - 1);
    while (m->keys[i]) {
        if (strcmp(m->keys[i], key) == 0) return m->vals[i];
        i = (i + 1) & (m->cap - 1);
    }
    return -1;
}
