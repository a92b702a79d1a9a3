/* Host helpers shared by the CPU and CUDA kernels (backends/common/common.h). */
#include <stdio.h>
#include <stdlib.h>

#include "backends/common/common.h"

double sc_decimal_of(float f) {
    char buf[32];
    for (int digits = 6; digits < 9; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, (double)f);
        double d = strtod(buf, NULL);
        if ((float)d == f) return d;
    }
    return (double)f;
}
