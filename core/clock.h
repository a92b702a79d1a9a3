/* The monotonic wall clock in seconds, for step times, timings and progress lines. */
#ifndef SC_CLOCK_H
#define SC_CLOCK_H

#include <time.h>

static inline double sc_clock_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
