/* A small command-line parser shared by the scorch-run commands.
 *
 * Options are "--name VALUE" or "--name=VALUE" (flags take no value); anything else is positional.
 * `--help`/`-h` is handled here. Repeatable options (ARG_LIST) collect every value in order.
 * Integers accept an optional decimal k/M/G suffix (1k = 1000). Usage errors print "scorch-run: <message>" plus the usage line.
 */
#ifndef SC_ARGS_H
#define SC_ARGS_H

#include <stdbool.h>
#include <stdint.h>

typedef enum { ARG_FLAG, ARG_INT, ARG_FLOAT, ARG_STR, ARG_LIST } arg_kind;

typedef struct {
    const char *name; /* without the leading "--" */
    char short_name;  /* "-o" style alias, 0 for none */
    arg_kind kind;
    const char *metavar;
    const char *help;
    /* results */
    bool set;
    int64_t i;
    double f;
    const char *s;
    const char **list;
    int n_list;
} arg_opt;

typedef struct {
    const char *usage;   /* "scorch-run info MODEL.onnx [options]": the positional part; --help lists
                            the options, so the line does not (where it did, it fell out of date) */
    const char *summary; /* one paragraph printed under the usage by --help */
    arg_opt *opts;
    int n_opts;
    int min_pos, max_pos;
    const char **pos; /* filled: positional arguments (points into argv) */
    int n_pos;
} arg_spec;

/* The spec of a command on one model file (its one positional) with the options array opts_. */
#define ARGS_MODEL_SPEC(usage_, summary_, opts_)                                                             \
    {.usage = (usage_), .summary = (summary_), .opts = (opts_), .n_opts = (int)(sizeof(opts_) / sizeof(opts_)[0]), \
     .min_pos = 1, .max_pos = 1}

typedef enum { ARGS_OK = 0, ARGS_HELP = 1, ARGS_ERROR = 2 } args_result;

/* Parses argv[0..argc) (argv[0] is the first argument, not the program). On ARGS_HELP the help was
 * printed to stdout; on ARGS_ERROR the message to stderr. Free with args_free. */
args_result args_parse(arg_spec *spec, int argc, char **argv);
void args_free(arg_spec *spec);
/* args_parse at a command's start: true when the command is to return *exit_code at once (0 after
 * --help, 2 after a usage error), the spec freed. */
bool args_done(arg_spec *spec, int argc, char **argv, int *exit_code);
arg_opt *args_get(arg_spec *spec, const char *name);
void args_print_help(const arg_spec *spec);
/* "scorch-run: <fmt>" to stderr. */
void args_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
