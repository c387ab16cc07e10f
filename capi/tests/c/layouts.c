/* Read one Hurray file of any layout (COO, CSR, CSC) through the C API:
 * print its layout and info, every entry read in chunks of 7 (chunks cross
 * row/column boundaries), check coo_file_get on each entry and on one
 * absent coordinate, and print the prefix range of row 3 (or the status
 * when the layout has none). capi/tests/programs.rs checks the output. */
#include <stdio.h>
#include <stdlib.h>

#include "coo_assembler.h"

#define CHUNK 7

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: layouts FILE\n");
        return 2;
    }
    coo_file *f = coo_file_open(argv[1]);
    if (!f) {
        fprintf(stderr, "open: %s\n", coo_last_error());
        return 1;
    }
    coo_info info;
    coo_layout layout;
    if (coo_file_info(f, &info) != COO_OK || coo_file_layout(f, &layout) != COO_OK) {
        fprintf(stderr, "info: %s\n", coo_last_error());
        return 1;
    }
    printf("layout=%d sorted=%d nnz=%llu rank=%u\n", (int)layout, (int)info.sorted,
           (unsigned long long)info.nnz, info.rank);
    int64_t idx[2 * CHUNK];
    double val[CHUNK];
    uint64_t first = 0;
    long bad_get = 0;
    for (;;) {
        size_t n = 0;
        if (coo_file_read_entries(f, first, CHUNK, idx, val, &n) != COO_OK) {
            fprintf(stderr, "read: %s\n", coo_last_error());
            return 1;
        }
        if (n == 0) break;
        for (size_t k = 0; k < n; k++) {
            double v = -1.0;
            if (coo_file_get(f, &idx[2 * k], &v) != COO_OK || v != val[k]) bad_get++;
            printf("e %lld %lld %.17g\n", (long long)idx[2 * k], (long long)idx[2 * k + 1], val[k]);
        }
        first += n;
    }
    /* Row 0 column shape[1]-1 is never stored by the test's matrices. */
    int64_t absent[2] = {0, info.shape[1] - 1};
    double z = -1.0;
    if (coo_file_get(f, absent, &z) != COO_OK || z != 0.0) bad_get++;
    printf("bad_get=%ld\n", bad_get);
    int64_t row = 3;
    uint64_t b = 0, e = 0;
    int st = coo_file_prefix_range(f, 1, &row, &b, &e);
    printf("prefix_status=%d begin=%llu end=%llu\n", st, (unsigned long long)b,
           (unsigned long long)e);
    coo_file_close(f);
    return 0;
}
