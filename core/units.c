/* Byte sizes written by people (core/units.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/units.h"

int64_t sc_parse_size(const char *s) {
    if (!s || !*s) return -1;
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v >= 0) || !isfinite(v)) return -1;
    while (*end == ' ') end++;
    static const struct {
        const char *suffix;
        double mul;
    } units[] = {{"", 1},         {"B", 1},           {"K", 1024.0},         {"KiB", 1024.0},     {"kB", 1e3},
                 {"KB", 1e3},     {"M", 1048576.0},   {"MiB", 1048576.0},   {"MB", 1e6},         {"G", 1073741824.0},
                 {"GiB", 1073741824.0}, {"GB", 1e9},  {"T", 1099511627776.0}, {"TiB", 1099511627776.0}, {"TB", 1e12}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(end, units[i].suffix)) {
            double b = v * units[i].mul;
            if (b >= 9.2e18) return -1;
            return (int64_t)(b + 0.5);
        }
    return -1;
}
