/* What the C test programs share: each check prints "ok LABEL ..." or
 * "FAIL LABEL ...", and a program exits 1 when `failures` is not 0. */
#ifndef COO_TEST_CHECK_H
#define COO_TEST_CHECK_H

#include <coo_assembler.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;

/* `got` must be `want`; an error must come with a message. */
static inline void expect(int got, int want, const char *label) {
    const char *msg = got == COO_OK ? "" : coo_last_error();
    if (got != want || (want != COO_OK && msg[0] == '\0')) {
        printf("FAIL %s: got %s, want %s (%s)\n", label, coo_status_name(got),
               coo_status_name(want), msg);
        failures++;
    } else {
        printf("ok %s: %s %s\n", label, coo_status_name(got), msg);
    }
}

static inline void expect_true(int cond, const char *label) {
    printf("%s %s\n", cond ? "ok" : "FAIL", label);
    if (!cond)
        failures++;
}

/* The last error names `what`. */
static inline void expect_message(const char *what, const char *label) {
    int has = strstr(coo_last_error(), what) != NULL;
    printf("%s %s: \"%s\" in \"%s\"\n", has ? "ok" : "FAIL", label, what, coo_last_error());
    if (!has)
        failures++;
}

#endif
