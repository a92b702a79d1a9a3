/* Command-line parsing for scorch-run (see args.h). */
#include "tools/args.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void args_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("scorch-run: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void args_print_help(const arg_spec *spec) {
    printf("usage: %s\n", spec->usage);
    if (spec->summary) printf("\n%s\n", spec->summary);
    printf("\noptions:\n");
    for (int i = 0; i < spec->n_opts; i++) {
        const arg_opt *o = &spec->opts[i];
        char left[64];
        char alias[8] = "";
        if (o->short_name) snprintf(alias, sizeof alias, "-%c, ", o->short_name);
        snprintf(left, sizeof left, "%s--%s%s%s", alias, o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
        printf("  %-28s %s\n", left, o->help);
    }
    printf("  %-28s %s\n", "--help, -h", "show this help");
}

bool args_done(arg_spec *spec, int argc, char **argv, int *exit_code) {
    args_result ar = args_parse(spec, argc, argv);
    if (ar == ARGS_OK) return false;
    args_free(spec);
    *exit_code = ar == ARGS_HELP ? 0 : 2;
    return true;
}

arg_opt *args_get(arg_spec *spec, const char *name) {
    for (int i = 0; i < spec->n_opts; i++)
        if (!strcmp(spec->opts[i].name, name)) return &spec->opts[i];
    return NULL;
}

static bool parse_int(const char *s, int64_t *out) {
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || errno) return false;
    int64_t mul = 1;
    if (*end == 'k' || *end == 'K') mul = 1000, end++;
    else if (*end == 'M') mul = 1000000, end++;
    else if (*end == 'G') mul = 1000000000, end++;
    if (*end) return false;
    if (v > INT64_MAX / mul || v < INT64_MIN / mul) return false;
    *out = (int64_t)v * mul;
    return true;
}

static args_result set_value(arg_opt *o, const char *v) {
    switch (o->kind) {
    case ARG_INT:
        if (!parse_int(v, &o->i)) {
            args_error("--%s: '%s' is not an integer", o->name, v);
            return ARGS_ERROR;
        }
        break;
    case ARG_FLOAT: {
        char *end;
        errno = 0;
        o->f = strtod(v, &end);
        if (end == v || *end || errno) {
            args_error("--%s: '%s' is not a number", o->name, v);
            return ARGS_ERROR;
        }
        break;
    }
    case ARG_STR: o->s = v; break;
    case ARG_LIST: {
        const char **l = realloc(o->list, sizeof *l * (size_t)(o->n_list + 1));
        if (!l) {
            args_error("out of memory parsing arguments");
            return ARGS_ERROR;
        }
        l[o->n_list++] = v;
        o->list = l;
        break;
    }
    case ARG_FLAG: break;
    }
    o->set = true;
    return ARGS_OK;
}

static args_result usage_error(const arg_spec *spec) {
    fprintf(stderr, "usage: %s (see --help)\n", spec->usage);
    return ARGS_ERROR;
}

args_result args_parse(arg_spec *spec, int argc, char **argv) {
    spec->n_pos = 0;
    spec->pos = calloc((size_t)argc + 1, sizeof *spec->pos);
    if (!spec->pos) return ARGS_ERROR;
    bool only_pos = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!only_pos && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
            args_print_help(spec);
            return ARGS_HELP;
        }
        if (!only_pos && !strcmp(a, "--")) {
            only_pos = true;
            continue;
        }
        if (only_pos || a[0] != '-' || a[1] == '\0') {
            spec->pos[spec->n_pos++] = a;
            continue;
        }
        const char *name = a[1] == '-' ? a + 2 : a + 1;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        arg_opt *o = NULL;
        bool is_short = a[1] != '-';
        for (int k = 0; k < spec->n_opts; k++) {
            const arg_opt *c = &spec->opts[k];
            if (is_short ? (len == 1 && c->short_name == name[0])
                         : (strlen(c->name) == len && !strncmp(c->name, name, len)))
                o = &spec->opts[k];
        }
        if (!o) {
            args_error("unknown option '%s'", a);
            return usage_error(spec);
        }
        if (o->kind == ARG_FLAG) {
            if (eq) {
                args_error("--%s takes no value", o->name);
                return usage_error(spec);
            }
            o->set = true;
            continue;
        }
        const char *v = eq ? eq + 1 : NULL;
        if (!v) {
            if (i + 1 >= argc) {
                args_error("--%s needs a value (%s)", o->name, o->metavar ? o->metavar : "value");
                return usage_error(spec);
            }
            v = argv[++i];
        }
        if (set_value(o, v) != ARGS_OK) return usage_error(spec);
    }
    if (spec->n_pos < spec->min_pos || spec->n_pos > spec->max_pos) {
        if (spec->n_pos < spec->min_pos)
            args_error("missing argument");
        else
            args_error("unexpected argument '%s'", spec->pos[spec->max_pos]);
        return usage_error(spec);
    }
    return ARGS_OK;
}

void args_free(arg_spec *spec) {
    for (int i = 0; i < spec->n_opts; i++) {
        free(spec->opts[i].list);
        spec->opts[i].list = NULL;
    }
    free(spec->pos);
    spec->pos = NULL;
}
