/* Status objects and the library's single logging function. */
#include "core/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sc_status_s {
    char *msg;
};

/* Returned when the error itself cannot be allocated: still an error, never a silent success. */
static struct sc_status_s sc_oom_status = {"out of memory while reporting an error"};

sc_status sc_verrorf(const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    sc_status s = malloc(sizeof *s);
    char *msg = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!s || !msg) {
        free(s);
        free(msg);
        return &sc_oom_status;
    }
    vsnprintf(msg, (size_t)n + 1, fmt, ap);
    s->msg = msg;
    return s;
}

sc_status sc_errorf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sc_status s = sc_verrorf(fmt, ap);
    va_end(ap);
    return s;
}

sc_status sc_status_prefix(sc_status inner, const char *fmt, ...) {
    if (!inner) return NULL;
    char prefix[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    sc_status s = sc_errorf("%s%s", prefix, sc_status_message(inner));
    sc_status_free(inner);
    return s;
}

const char *sc_status_message(sc_status s) { return s ? s->msg : "ok"; }

void sc_status_free(sc_status s) {
    if (!s || s == &sc_oom_status) return;
    free(s->msg);
    free(s);
}

void sc_assert_fail(const char *cond, const char *file, int line) {
    fprintf(stderr, "scorch: internal error: assertion '%s' failed at %s:%d\n", cond, file, line);
    abort();
}

static int sc_log_level_current = -1;

static int log_level_now(void) {
    if (sc_log_level_current < 0) {
        const char *env = getenv("SCORCH_LOG");
        sc_log_level_current = env ? atoi(env) : SC_LOG_WARN;
    }
    return sc_log_level_current;
}

void sc_log_set_level(sc_log_level level) { sc_log_level_current = (int)level; }

void sc_log(sc_log_level level, const char *fmt, ...) {
    if ((int)level > log_level_now()) return;
    static const char *tags[] = {"error", "warning", "info", "debug"};
    fprintf(stderr, "scorch: %s: ", tags[level]);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}
