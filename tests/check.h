/* The failure count and checks of the C unit tests. A failed check prints where and why and counts;
 * the test's main returns non-zero when `failures` is (ctest reads the exit code).
 *   CHECK(cond, fmt, ...)  the message says what was expected and what came;
 *   EXPECT(cond)           the condition's own text is the message. */
#ifndef SC_TESTS_CHECK_H
#define SC_TESTS_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                                                                   \
    do {                                                                                                   \
        if (!(cond)) {                                                                                     \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                    \
            printf(__VA_ARGS__);                                                                           \
            printf("\n");                                                                                  \
            failures++;                                                                                    \
        }                                                                                                  \
    } while (0)

#define EXPECT(cond) CHECK(cond, "%s", #cond)

#endif
