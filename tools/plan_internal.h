/* Private to the plan reporting files of tools/ (plan_report.c, plan_files.c, plan_args.c). */
#ifndef SC_PLAN_INTERNAL_H
#define SC_PLAN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "tools/plan_report.h"

/* A growable text buffer whose first failure is sticky (plan_files.c). */
typedef struct {
    char *s;
    size_t n, cap;
    bool oom;
} strbuf;
void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Writes the buffer to path atomically and frees it; out of memory while building is reported here. */
sc_status sb_write(strbuf *b, const char *path);
/* XML/JSON-safe copy of a name: quotes, angle brackets, ampersands and control characters become '_'. */
const char *sb_safe(const char *s, char *buf, size_t n); /* plan_files.c */

/* Interval i's last step for memory figures: an interval whose block a later one took over
 * (plan->iv_from) stops counting when the taker opens, since the two share one block there. NULL
 * when out of memory (plan_report.c). */
int *plan_effective_ends(const sc_plan *p);
/* Seconds of every node under m, evaluated once (plan_report.c). */
double *plan_node_times(const sc_graph *g, const sc_cost_model *m);

#endif
