/* Wall and kernel times of training steps, from separate steps (tools/step_time.h). */
#include "tools/step_time.h"

#include <stdlib.h>

#include "backends/profile.h"
#include "core/stats.h"

/* The kernels' thread CPU seconds of one step, through the profile hook. */
static sc_status step_hooked(sc_trainer *t, sc_step_result *r, double *kernel_s) {
    sc_profile_reset();
    sc_profile_clock_cpu(true);
    sc_profile_enable(true);
    sc_status st = sc_trainer_step(t, r);
    sc_profile_enable(false);
    sc_profile_clock_cpu(false);
    *kernel_s = 1e-3 * sc_profile_total_ms();
    sc_profile_reset();
    return st;
}

sc_status step_times_measure(sc_trainer *t, int n, bool kernels, step_times *out) {
    *out = (step_times){0};
    double *x = calloc((size_t)n + 1, sizeof *x);
    if (!x) return sc_errorf("out of memory");
    sc_step_result r;
    sc_status st = sc_trainer_step(t, &r); /* warm-up: first-touch pages, caches, algorithm choice */
    for (int i = 0; i < n && !st; i++) {
        st = sc_trainer_step(t, &r);
        if (!st) x[i] = r.exec_time;
        if (!st && r.peak_bytes > out->peak) out->peak = r.peak_bytes;
    }
    if (!st) out->wall = sc_median(x, (size_t)n);
    for (int i = 0; kernels && i < n && !st; i++) {
        st = step_hooked(t, &r, &x[i]);
        if (!st && r.peak_bytes > out->peak) out->peak = r.peak_bytes;
    }
    if (!st && kernels) out->kernels = sc_median(x, (size_t)n);
    free(x);
    return st;
}
