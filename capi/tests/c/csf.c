/* A rank-3 tensor assembled into CSF through the C API (layout and mode
 * order set by name, then a bad mode order refused), read back: its
 * layout code, every entry read in chunks with coo_file_get agreeing, a
 * fibre as a prefix range. capi/tests/programs.rs compares the entries
 * with the library's own assembly. Usage: csf OUT.hrry */
#include <stdint.h>
#include <stdio.h>

#include "check.h"

#define CHUNK 5

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: csf OUT\n");
        return 2;
    }
    coo_options o;
    coo_options_default(&o);
    expect(coo_options_set(&o, "layout", "csf"), COO_OK, "layout csf");
    expect(coo_options_set(&o, "mode_order", "2,0,1"), COO_OK, "mode order");
    expect(coo_options_set(&o, "mode_order", "2,x"), COO_ERR_ARGUMENT, "mode order text");
    int64_t shape[3] = {6, 5, 4};
    coo_builder *b = coo_builder_new(3, shape, COO_F64, &o);
    if (!b) {
        fprintf(stderr, "new: %s\n", coo_last_error());
        return 1;
    }
    for (int64_t k = 0; k < 400; k++) {
        int64_t idx[3] = {k % 6, (k * 7) % 5, (k * 3) % 4};
        expect_true(coo_builder_push(b, idx, (double)(k % 9) - 4.0) == COO_OK || (printf("%s\n", coo_last_error()), 0),
                    "push");
        if (failures) return 1;
    }
    coo_summary s;
    expect(coo_builder_finish(b, argv[1], &s), COO_OK, "finish");

    /* A mode order that is no permutation is refused when the builder is made. */
    coo_options bad;
    coo_options_default(&bad);
    bad.layout = COO_LAYOUT_CSF;
    bad.mode_order_len = 3;
    bad.mode_order[0] = 0;
    bad.mode_order[1] = 0;
    bad.mode_order[2] = 1;
    coo_builder *nb = coo_builder_new(3, shape, COO_F64, &bad);
    expect_true(nb == NULL, "a repeated level refused");
    expect(coo_last_status(), COO_ERR_ARGUMENT, "its status");

    coo_file *f = coo_file_open(argv[1]);
    if (!f) {
        fprintf(stderr, "open: %s\n", coo_last_error());
        return 1;
    }
    coo_info info;
    coo_layout layout;
    expect(coo_file_info(f, &info), COO_OK, "info");
    expect(coo_file_layout(f, &layout), COO_OK, "layout");
    printf("layout=%d sorted=%d nnz=%llu rank=%u\n", (int)layout, (int)info.sorted,
           (unsigned long long)info.nnz, info.rank);
    int64_t idx[3 * CHUNK];
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
            double v = -99.0;
            if (coo_file_get(f, &idx[3 * k], &v) != COO_OK || v != val[k]) bad_get++;
            printf("e %lld %lld %lld %.17g\n", (long long)idx[3 * k], (long long)idx[3 * k + 1],
                   (long long)idx[3 * k + 2], val[k]);
        }
        first += n;
    }
    printf("bad_get=%ld\n", bad_get);
    /* The fibre of level-0 coordinate 1 (dimension 2 = 1), then (1, 1). */
    int64_t prefix[2] = {1, 1};
    uint64_t pb = 0, pe = 0;
    expect(coo_file_prefix_range(f, 1, prefix, &pb, &pe), COO_OK, "prefix 1");
    printf("prefix1 begin=%llu end=%llu\n", (unsigned long long)pb, (unsigned long long)pe);
    expect(coo_file_prefix_range(f, 2, prefix, &pb, &pe), COO_OK, "prefix 2");
    printf("prefix2 begin=%llu end=%llu\n", (unsigned long long)pb, (unsigned long long)pe);
    expect(coo_file_verify(f), COO_OK, "verify");
    coo_file_close(f);
    return failures ? 1 : 0;
}
