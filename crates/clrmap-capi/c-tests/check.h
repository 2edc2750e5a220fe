/* The C tests' one check macro: count a failed condition and say where, then go on (every check
 * of a run is reported, and main returns 1 if any failed). */
#ifndef CLRMAP_C_TESTS_CHECK_H
#define CLRMAP_C_TESTS_CHECK_H
#include <stdio.h>

static int failures = 0;
#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);    \
            failures++;                                                                  \
        }                                                                                \
    } while (0)
#endif
