/* coo_file_export (API 5): a stored matrix to the formats other programs
 * read, through the library's export table.
 *
 *   export IN.hrry OUTDIR    writes OUTDIR/K.mtx, K.npz, K.petsc, K64.petsc
 *                            and K-csc.npz, and checks the refusals.
 *
 * The test compares every file with the library's own export of IN.hrry,
 * byte for byte. Prints one line per check and "N failed". */
#include <coo_assembler.h>
#include "check.h"
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: export IN.hrry OUTDIR\n");
        return 2;
    }
    coo_file *f = coo_file_open(argv[1]);
    if (!f) {
        printf("FAIL open: %s\n", coo_last_error());
        return 1;
    }
    char path[4096];
    coo_export_summary s;

    snprintf(path, sizeof path, "%s/K.mtx", argv[2]);
    expect(coo_file_export(f, path, "mtx", NULL, &s), COO_OK, "mtx with default options");
    printf("mtx entries=%llu bytes=%llu\n", (unsigned long long)s.entries,
           (unsigned long long)s.bytes);

    snprintf(path, sizeof path, "%s/K.npz", argv[2]);
    expect(coo_file_export(f, path, "scipy", NULL, &s), COO_OK, "npz by its other name");

    coo_export_options o;
    coo_export_options_default(&o);
    o.npz_layout = "csc";
    snprintf(path, sizeof path, "%s/K-csc.npz", argv[2]);
    expect(coo_file_export(f, path, "npz", &o, NULL), COO_OK, "npz as csc");

    coo_export_options_default(&o);
    snprintf(path, sizeof path, "%s/K.petsc", argv[2]);
    expect(coo_file_export(f, path, "petsc", &o, &s), COO_OK, "petsc");
    o.petsc_int64 = true;
    snprintf(path, sizeof path, "%s/K64.petsc", argv[2]);
    expect(coo_file_export(f, path, "petsc", &o, NULL), COO_OK, "petsc with 64-bit indices");

    /* Refusals, each naming what is wrong, nothing written. */
    coo_export_options_default(&o);
    o.symmetric = true;
    snprintf(path, sizeof path, "%s/sym.mtx", argv[2]);
    expect(coo_file_export(f, path, "mtx", &o, NULL), COO_ERR_VALUE, "a non-symmetric matrix");
    FILE *left = fopen(path, "r");
    expect_true(left == NULL, "nothing written for the refused symmetric export");
    if (left)
        fclose(left);
    snprintf(path, sizeof path, "%s/K.npy", argv[2]);
    expect(coo_file_export(f, path, "npy", NULL, NULL), COO_ERR_RANK, "npy of a matrix");
    expect(coo_file_export(f, path, "hb", NULL, NULL), COO_ERR_ARGUMENT, "unknown format");
    expect_message("hb", "the message names the format");
    coo_export_options_default(&o);
    o.paging = "sometimes";
    expect(coo_file_export(f, path, "npz", &o, NULL), COO_ERR_ARGUMENT, "unknown paging");
    expect(coo_file_export(f, argv[1], "npz", NULL, NULL), COO_ERR_ARGUMENT,
           "the matrix's own file as output");
    expect_message("input", "the message says it is the input");
    o.size = 4;
    expect(coo_file_export(f, path, "npz", &o, NULL), COO_ERR_ARGUMENT, "a struct too small");
    expect(coo_file_export(NULL, path, "npz", NULL, NULL), COO_ERR_NULL, "NULL file");
    expect(coo_file_export(f, NULL, "npz", NULL, NULL), COO_ERR_NULL, "NULL path");
    coo_file_close(f);
    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
