/* SC_FREE_ALL(a, b, ...): free() of each pointer, in order: the body of most destructors, which
 * give back a list of separately allocated arrays. */
#ifndef SC_FREE_ALL_H
#define SC_FREE_ALL_H

#include <stddef.h>
#include <stdlib.h>

static inline void sc_free_array(void *const *p, size_t n) {
    for (size_t i = 0; i < n; i++) free(p[i]);
}

#define SC_FREE_ALL(...) \
    sc_free_array((void *const[]){__VA_ARGS__}, sizeof((void *const[]){__VA_ARGS__}) / sizeof(void *))

#endif
