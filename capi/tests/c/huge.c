/* Never abort (issue 22): a CSR of a 2^40 x 2^40 matrix needs 8 TiB of row
 * pointers. In memory (a plan holds the structure) that is COO_ERR_MEMORY;
 * in a file, written in bounded memory, it is refused up front for want of
 * disk space (nothing written): COO_ERR_IO through coo_assemble_arrays, a
 * refusal (COO_ERR_REFUSED, the builder kept) from coo_builder_finish,
 * before any merge. The process goes on, and nothing is left behind
 * (the test checks the folders).
 * Usage: huge DIR (DIR/spill exists and is empty). Exits 1 if a check failed. */
#include <coo_assembler.h>
#include "check.h"
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 2)
        return 2;
    char spill[4096], out[4200];
    snprintf(spill, sizeof spill, "%s/spill", argv[1]);
    int64_t shape[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
    int64_t rows[1] = {0}, cols[1] = {0};
    const int64_t *indices[2] = {rows, cols};
    double values[1] = {1.0};
    coo_options o;
    coo_options_default(&o);
    o.temp_dir = spill;
    o.layout = COO_LAYOUT_CSR;

    /* A plan packs an index in 64 bits: 2^40 x 2^20, the same 8 TiB of
     * row pointers. Within the default budget it is refused with the
     * budget it needs; given that budget, the allocation itself fails,
     * cleanly. */
    int64_t tall[2] = {(int64_t)1 << 40, (int64_t)1 << 20};
    coo_plan *plan = coo_plan_new(2, tall, COO_F64, &o, 1, indices);
    expect(plan ? COO_OK : coo_last_status(), COO_ERR_BUDGET, "coo_plan_new of a 2^40 x 2^40 CSR");
    expect_true(strstr(coo_last_error(), "at least 8 TiB") != NULL, "the message gives the budget needed");
    coo_plan_free(plan);
    o.memory_budget = (uint64_t)16 << 40;
    plan = coo_plan_new(2, tall, COO_F64, &o, 1, indices);
    expect(plan ? COO_OK : coo_last_status(), COO_ERR_MEMORY,
           "coo_plan_new of it within a 16 TiB budget");
    expect_true(strstr(coo_last_error(), "out of memory") != NULL &&
                    strstr(coo_last_error(), "8 TiB") != NULL,
                "the message says what could not be allocated, and its size");
    coo_plan_free(plan);
    coo_options_default(&o);
    o.temp_dir = spill;
    o.layout = COO_LAYOUT_CSR;

    snprintf(out, sizeof out, "%s/arrays.hrry", argv[1]);
    expect(coo_assemble_arrays(2, shape, COO_F64, &o, 1, indices, values, COO_F64, out, NULL),
           COO_ERR_IO, "coo_assemble_arrays of a 2^40 x 2^40 CSR into a file");
    expect_true(strstr(coo_last_error(), "the output needs 8.0 TiB") != NULL &&
                    strstr(coo_last_error(), "nothing was written") != NULL,
                "the message gives the size the file needs");

    coo_builder *b = coo_builder_new(2, shape, COO_F64, &o);
    expect(b ? COO_OK : coo_last_status(), COO_OK, "a builder of a 2^40 x 2^40 CSR");
    int64_t at[2] = {(int64_t)1 << 39, 7};
    expect(coo_builder_push(b, at, 2.5), COO_OK, "push into it");
    snprintf(out, sizeof out, "%s/builder.hrry", argv[1]);
    /* Refused before the merge (the pointers cannot fit the disk): the
     * builder is still the caller's, as after any refusal. */
    expect(coo_builder_finish(b, out, NULL), COO_ERR_REFUSED, "coo_builder_finish of it");
    expect_true(strstr(coo_last_error(), "nothing was written") != NULL,
                "the message says nothing was written");
    expect(coo_builder_push(b, at, 1.0), COO_OK, "push after the refused finish");
    coo_builder_free(b);

    /* COO needs no pointers: the same matrix is written. */
    o.layout = COO_LAYOUT_COO;
    snprintf(out, sizeof out, "%s/coo.hrry", argv[1]);
    expect(coo_assemble_arrays(2, shape, COO_F64, &o, 1, indices, values, COO_F64, out, NULL),
           COO_OK, "the same in COO");

    printf("%d failed\n", failures);
    return failures == 0 ? 0 : 1;
}
