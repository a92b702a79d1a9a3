/* Regression runner for the importer fuzzer (tests/fuzz.cmake, test_fuzz_regressions).
 *
 * Every file in the folder given as argv[1] is an input that once crashed, leaked or hung
 * fuzz_import (minimised by libFuzzer) or a hand-made hostile model. Each must go through
 * sc_model_load and, when it loads, graph_prepare (batch 1, seq 4, as the fuzzer does) and end with
 * either success or a status that has a message. A crash, sanitizer report or leak fails the test
 * (the ASan/UBSan stage of scripts/run_tests.sh runs it); so does an empty or unreadable folder, so
 * that a moved folder cannot turn the test into a silent pass. Files named *.refuse.* must be refused.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "tools/stages.h"

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Returns 0 when the file behaved (loaded, or refused with a message), 1 otherwise. */
static int check_file(const char *path, const char *name) {
    sc_model *m = NULL;
    const char *stage = "load";
    sc_status st = sc_model_load(path, &m);
    if (!st) {
        stage = "prepare";
        sc_bind_options opt = {.batch = 1, .seq = 4, .eval = cpu_evaluator()};
        st = graph_prepare(&m->graph, &opt);
    }
    int bad = 0;
    if (st) {
        const char *msg = sc_status_message(st);
        if (!msg || !*msg) {
            printf("FAIL %s: %s returned a status without a message\n", name, stage);
            bad = 1;
        } else {
            printf("ok   %s: refused at %s: %.300s\n", name, stage, msg);
        }
    } else if (strstr(name, ".refuse.")) {
        printf("FAIL %s: loaded and prepared, but it must be refused\n", name);
        bad = 1;
    } else {
        printf("ok   %s: loaded and prepared\n", name);
    }
    sc_status_free(st);
    sc_model_free(m);
    return bad;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s REGRESSIONS_DIR\n", argv[0]);
        return 2;
    }
    sc_log_set_level(SC_LOG_ERROR);
    DIR *d = opendir(argv[1]);
    if (!d) {
        perror(argv[1]);
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "README.md") == 0) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **p = realloc(names, cap * sizeof *names);
            if (!p) return 1;
            names = p;
        }
        names[n] = strdup(e->d_name);
        if (!names[n]) return 1;
        n++;
    }
    closedir(d);
    if (!n) {
        fprintf(stderr, "%s: no regression inputs\n", argv[1]);
        return 1;
    }
    qsort(names, n, sizeof *names, name_cmp);
    int failures = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(argv[1]) + strlen(names[i]) + 2;
        char *path = malloc(len);
        if (!path) return 1;
        snprintf(path, len, "%s/%s", argv[1], names[i]);
        failures += check_file(path, names[i]);
        free(path);
        free(names[i]);
    }
    free(names);
    printf("%zu inputs, %d failures\n", n, failures);
    return failures ? 1 : 0;
}
