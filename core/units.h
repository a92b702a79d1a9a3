/* Byte sizes written by people: "256MiB", "1.5GiB", "500MB", "4096"; and the common unit of byte counts. */
#ifndef SC_UNITS_H
#define SC_UNITS_H

#include <stdint.h>

/* Bytes of s: a non-negative number with an optional suffix (B; K, KiB, M, MiB, G, GiB, T, TiB in
 * powers of 1024; kB, KB, MB, GB, TB in powers of 1000), rounded to the nearest byte; -1 when s is
 * not one or the value does not fit an int64_t. */
int64_t sc_parse_size(const char *s);

/* Greatest common divisor (a, b >= 0; gcd(a, 0) = a): the largest unit that divides byte counts. */
static inline int64_t sc_gcd64(int64_t a, int64_t b) {
    while (b) {
        int64_t t = a % b;
        a = b, b = t;
    }
    return a;
}

#endif
