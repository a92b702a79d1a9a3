/* Per-op profile: see profile.h. Totals are indexed by sc_op, so every op of ops.def and
 * ops_train.def has a slot and nothing is allocated while timing. */
#include "backends/profile.h"

#include <stdlib.h>
#include <time.h>

typedef struct {
    int64_t calls;
    double ms;
    int64_t out_bytes;
} profile_slot;

static bool profile_on, profile_cpu_clock;
static profile_slot profile_slots[SC_OP_COUNT];
static const sc_graph *profile_graph;
static double *profile_node_ms;

void sc_profile_enable(bool on) { profile_on = on; }
bool sc_profile_enabled(void) { return profile_on; }

void sc_profile_reset(void) {
    for (int i = 0; i < SC_OP_COUNT; i++) profile_slots[i] = (profile_slot){0};
}

void sc_profile_nodes(const sc_graph *g, double *ms) {
    profile_graph = ms ? g : NULL;
    profile_node_ms = g ? ms : NULL;
}

void sc_profile_clock_cpu(bool on) { profile_cpu_clock = on; }

double sc_profile_now_ms(void) {
    struct timespec t;
    clock_gettime(profile_cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

void sc_profile_add(const sc_node *n, double ms, int64_t out_bytes) {
    profile_slot *p = &profile_slots[n->op];
    p->calls++;
    p->ms += ms;
    p->out_bytes += out_bytes;
    const sc_graph *g = profile_graph;
    if (g && n >= g->nodes && n < g->nodes + g->n_nodes) profile_node_ms[n - g->nodes] += ms;
}

double sc_profile_total_ms(void) {
    double t = 0;
    for (int i = 0; i < SC_OP_COUNT; i++) t += profile_slots[i].ms;
    return t;
}

static int slot_cmp(const void *a, const void *b) {
    double x = profile_slots[*(const int *)a].ms, y = profile_slots[*(const int *)b].ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

void sc_profile_report(FILE *f, int passes) {
    int order[SC_OP_COUNT], n = 0;
    double total = 0.0;
    for (int i = 0; i < SC_OP_COUNT; i++)
        if (profile_slots[i].calls) {
            order[n++] = i;
            total += profile_slots[i].ms;
        }
    qsort(order, (size_t)n, sizeof *order, slot_cmp);
    if (passes < 1) passes = 1;
    fprintf(f, "%-28s %8s %11s %7s %11s %11s\n", "op", "calls", "ms/pass", "share", "us/call", "MB out/pass");
    for (int i = 0; i < n; i++) {
        const profile_slot *p = &profile_slots[order[i]];
        fprintf(f, "%-28s %8lld %11.3f %6.1f%% %11.1f %11.2f\n", sc_op_name((sc_op)order[i]),
                (long long)(p->calls / passes), p->ms / passes, total > 0 ? 100.0 * p->ms / total : 0.0,
                1e3 * p->ms / (double)p->calls, (double)p->out_bytes / passes / (1 << 20));
    }
    fprintf(f, "%-28s %8s %11.3f\n", "total (kernels only)", "", total / passes);
}
