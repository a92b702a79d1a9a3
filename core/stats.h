/* Small statistics shared by the timing code (calibration, plan --measure, bench, train reports). */
#ifndef SC_STATS_H
#define SC_STATS_H

#include <stddef.h>

/* Median of x[0..n) (mean of the two middle values for even n); sorts x in place. 0 when n is 0. */
double sc_median(double *x, size_t n);

#endif
