/* Bool values through the C API (issue 22): a pattern pushed as 1.0 / 0.0
 * through the double pushes (one value, many, an element matrix), a
 * duplicate true if any contribution is; read back as 1.0 / 0.0; any other
 * value refused with COO_ERR_VALUE.
 * Usage: bool DIR. Prints one line per check and "N failed". */
#include <coo_assembler.h>
#include "check.h"
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: bool DIR\n");
        return 2;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/g.hrry", argv[1]);
    coo_options o;
    coo_options_default(&o);
    int64_t shape[2] = {3, 3};
    coo_builder *b = coo_builder_new(2, shape, COO_BOOL, &o);
    expect_true(b != NULL, "builder_new bool");
    if (!b)
        return 1;
    int64_t i01[2] = {0, 1};
    expect(coo_builder_push(b, i01, 0.0), COO_OK, "push false");
    expect(coo_builder_push(b, i01, 1.0), COO_OK, "push true on the same entry");
    expect(coo_builder_push(b, i01, 2.0), COO_ERR_VALUE, "push 2.0 refused");
    expect_true(strstr(coo_last_error(), "bool") != NULL, "the refusal names bool");
    expect(coo_builder_push(b, i01, 0.5), COO_ERR_VALUE, "push 0.5 refused");
    int64_t idx[4] = {1, 1, 2, 0};
    double vals[2] = {0.0, 1.0};
    expect(coo_builder_push_many(b, 2, idx, vals), COO_OK, "push_many");
    int64_t dofs[2] = {0, 2};
    /* ke[a*k + b] at (dofs[a], dofs[b]): (0,0) (0,2) (2,0) (2,2). */
    double ke[4] = {1.0, 0.0, 0.0, 1.0};
    expect(coo_builder_push_element(b, 2, dofs, ke), COO_OK, "push_element");
    coo_summary s;
    expect(coo_builder_finish(b, path, &s), COO_OK, "finish");
    expect_true(s.contributions == 8 && s.nnz == 6, "summary: 8 contributions, 6 entries");

    coo_file *f = coo_file_open(path);
    expect_true(f != NULL, "open");
    if (!f)
        return 1;
    coo_info info;
    expect(coo_file_info(f, &info), COO_OK, "info");
    expect_true(info.dtype == COO_BOOL, "info: bool");
    double v = -1;
    expect(coo_file_get(f, i01, &v), COO_OK, "get (0,1)");
    expect_true(v == 1.0, "(0,1) is true: one of its contributions was");
    int64_t i11[2] = {1, 1};
    expect(coo_file_get(f, i11, &v), COO_OK, "get (1,1)");
    expect_true(v == 0.0, "(1,1) is a stored false");
    int64_t got_idx[12];
    double got[6];
    size_t n = 0;
    expect(coo_file_read_entries(f, 0, 6, got_idx, got, &n), COO_OK, "read_entries");
    const double want[6] = {1.0, 1.0, 0.0, 0.0, 1.0, 1.0};
    int same = n == 6;
    for (size_t k = 0; k < n && k < 6; k++)
        same &= got[k] == want[k];
    expect_true(same, "entries in storage order");
    coo_file_close(f);
    printf("%d failed\n", failures);
    return failures != 0;
}
