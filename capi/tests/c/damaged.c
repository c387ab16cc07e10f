/* coo_file_read_entries on damaged files (issue 22): a flipped byte in a
 * buffer our writer checksummed is COO_ERR_INVALID_FILE naming the buffer,
 * nothing is copied, and a second call gives the same verdict.
 * Usage: damaged CLEAN VALUES_FLIPPED INDICES_FLIPPED (files of a 2-D f64
 * COO tensor with at least 4 entries). Prints one line per check; exits 1
 * if any check failed. */
#include <coo_assembler.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;

static void check(int cond, const char *label, const char *detail) {
    printf("%s %s%s%s\n", cond ? "ok" : "FAIL", label, detail[0] ? ": " : "", detail);
    if (!cond)
        failures++;
}

#define N 4

/* Read the first N entries twice; `buffer` is NULL for a clean file, else
 * the name the message must give. */
static void read_twice(const char *path, const char *buffer) {
    char label[256];
    coo_file *f = coo_file_open(path);
    snprintf(label, sizeof label, "open %s", path);
    /* Open checks structure only: a flipped data byte opens. */
    check(f != NULL, label, f ? "" : coo_last_error());
    if (f == NULL)
        return;
    for (int call = 1; call <= 2; call++) {
        int64_t idx[2 * N];
        double values[N];
        size_t n_read = 12345;
        for (int k = 0; k < 2 * N; k++)
            idx[k] = -7;
        for (int k = 0; k < N; k++)
            values[k] = -7.5;
        int s = coo_file_read_entries(f, 0, N, idx, values, &n_read);
        const char *msg = s == COO_OK ? "" : coo_last_error();
        if (buffer == NULL) {
            snprintf(label, sizeof label, "clean read %d: %s, %zu entries", call,
                     coo_status_name(s), n_read);
            check(s == COO_OK && n_read == N && idx[0] >= 0 && values[0] != -7.5, label, msg);
            continue;
        }
        snprintf(label, sizeof label, "%s flipped, read %d: %s", buffer, call,
                 coo_status_name(s));
        check(s == COO_ERR_INVALID_FILE, label, msg);
        snprintf(label, sizeof label, "%s flipped, read %d names the buffer", buffer, call);
        char want[64];
        snprintf(want, sizeof want, "%s buffer", buffer);
        check(strstr(msg, want) != NULL && strstr(msg, "damaged") != NULL, label, msg);
        int untouched = n_read == 12345;
        for (int k = 0; k < 2 * N; k++)
            untouched &= idx[k] == -7;
        for (int k = 0; k < N; k++)
            untouched &= values[k] == -7.5;
        snprintf(label, sizeof label, "%s flipped, read %d copies nothing", buffer, call);
        check(untouched, label, "");
    }
    /* The verdict holds for the other whole-tensor reads too. */
    if (buffer != NULL) {
        double v = 0;
        int s = coo_file_read_entries(f, 1, 1, NULL, &v, NULL);
        snprintf(label, sizeof label, "%s flipped, read from entry 1: %s", buffer,
                 coo_status_name(s));
        check(s == COO_ERR_INVALID_FILE, label, s == COO_OK ? "" : coo_last_error());
    }
    coo_file_close(f);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: damaged CLEAN VALUES_FLIPPED INDICES_FLIPPED\n");
        return 2;
    }
    read_twice(argv[1], NULL);
    read_twice(argv[2], "values");
    read_twice(argv[3], "indices");
    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
