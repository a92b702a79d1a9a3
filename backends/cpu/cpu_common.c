/* State and helpers every CPU kernel file shares (cpu.h, cpu_kernels.h): the parameter epoch that
 * caches of weights check, the thread count, kernel errors naming the node and the channels-last
 * view of a desc. Apart from the
 * kernel table (kernels.c), so that kernel files depend on these and the table on them, not both
 * ways. */
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_kernels.h"

static _Atomic uint64_t params_epoch;

void cpu_params_changed(void) { params_epoch++; }

uint64_t cpu_params_epoch(void) { return params_epoch; }

void cpu_set_num_threads(int n) {
    if (n > 0) omp_set_num_threads(n);
}

int cpu_num_threads(void) { return omp_get_max_threads(); }

sc_status cpu_errorf(const sc_kernel_call *call, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sc_status st = sc_op_verrorf("node", call->node->name, call->node->op, fmt, ap);
    va_end(ap);
    return st;
}

bool cpu_channels_last_view(sc_desc *d, int r) {
    if (d->rank > r || r < 3) return false;
    int64_t dims[SC_MAX_RANK];
    int lead = r - d->rank;
    for (int i = 0; i < r; i++) dims[i] = i < lead ? 1 : d->dims[i - lead];
    d->dims[0] = dims[0];
    for (int i = 1; i + 1 < r; i++) d->dims[i] = dims[i + 1];
    d->dims[r - 1] = dims[1];
    d->rank = r;
    return true;
}
