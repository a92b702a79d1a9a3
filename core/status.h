/* Two tiers of errors (docs/STYLE.md habit 5).
 *
 * sc_status: anything input can cause (malformed ONNX, unsupported op, out of memory). NULL means
 * success; a non-NULL status owns a heap message that the caller frees with sc_status_free.
 * Library code returns statuses and never prints or exits; only tools/ turns them into exit codes.
 *
 * SC_ASSERT: our own invariants. A failure is a bug in Scorch, so it reports file and line and aborts.
 */
#ifndef SC_STATUS_H
#define SC_STATUS_H

#include <stdarg.h>

typedef struct sc_status_s *sc_status;

#define SC_OK ((sc_status)0)

sc_status sc_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
sc_status sc_verrorf(const char *fmt, va_list ap);
/* Prefixes context ("file.onnx: ") to an error; returns NULL unchanged. Takes ownership of inner. */
sc_status sc_status_prefix(sc_status inner, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *sc_status_message(sc_status s);
void sc_status_free(sc_status s);

#define SC_TRY(expr)                                                                               \
    do {                                                                                           \
        sc_status sc_try_status_ = (expr);                                                         \
        if (sc_try_status_) return sc_try_status_;                                                 \
    } while (0)

void sc_assert_fail(const char *cond, const char *file, int line) __attribute__((noreturn));
#define SC_ASSERT(cond)                                                                            \
    do {                                                                                           \
        if (!(cond)) sc_assert_fail(#cond, __FILE__, __LINE__);                                    \
    } while (0)

/* The one logging function of the library; level filtered by sc_log_set_level or SCORCH_LOG. */
typedef enum { SC_LOG_ERROR = 0, SC_LOG_WARN = 1, SC_LOG_INFO = 2, SC_LOG_DEBUG = 3 } sc_log_level;
void sc_log(sc_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sc_log_set_level(sc_log_level level);

#endif
