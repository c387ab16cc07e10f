/* Folders this process may not write in (issue 22): a temp_dir of mode
 * 0555 is refused by coo_builder_new, an output folder of mode 0555 by
 * coo_builder_finish with COO_ERR_REFUSED, the builder and its
 * contributions kept. Root passes every permission check, so as root this
 * prints SKIP and the test runs it as another user.
 * Usage: unwritable DIR (an empty folder this user may write in). */
#define _POSIX_C_SOURCE 200809L
#include <coo_assembler.h>
#include "check.h"
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 2)
        return 2;
    if (geteuid() == 0) {
        printf("SKIP running as root: every permission check passes\n");
        return 0;
    }
    char ro[4096], spill[4096], out[4200];
    snprintf(ro, sizeof ro, "%s/read-only", argv[1]);
    snprintf(spill, sizeof spill, "%s/spill", argv[1]);
    if (mkdir(ro, 0755) != 0 || chmod(ro, 0555) != 0 || mkdir(spill, 0755) != 0) {
        printf("FAIL cannot make the folders\n");
        return 1;
    }
    int64_t shape[2] = {3, 3}, at[2] = {1, 2};
    coo_options o;
    coo_options_default(&o);

    o.temp_dir = ro;
    coo_builder *b = coo_builder_new(2, shape, COO_F64, &o);
    expect(b ? COO_OK : coo_last_status(), COO_ERR_IO, "a read-only temp_dir at coo_builder_new");
    expect_true(strstr(coo_last_error(), "temp_dir") != NULL &&
                    strstr(coo_last_error(), "read-only") != NULL,
                "the message names the temp_dir");

    o.temp_dir = spill;
    b = coo_builder_new(2, shape, COO_F64, &o);
    expect(b ? COO_OK : coo_last_status(), COO_OK, "a builder spilling to a writable folder");
    expect(coo_builder_push(b, at, 1.5), COO_OK, "push");
    snprintf(out, sizeof out, "%s/K.hrry", ro);
    expect(coo_builder_finish(b, out, NULL), COO_ERR_REFUSED, "finish into a read-only folder");
    expect_true(strstr(coo_last_error(), "output directory") != NULL &&
                    strstr(coo_last_error(), "Permission denied") != NULL,
                "the message names the folder and the cause");
    expect(coo_builder_push(b, at, 1.0), COO_OK, "the builder is kept");
    snprintf(out, sizeof out, "%s/K.hrry", argv[1]);
    coo_summary s;
    expect(coo_builder_finish(b, out, &s), COO_OK, "finish into a writable folder");
    expect_true(s.contributions == 2 && s.nnz == 1, "every contribution is in the file");
    chmod(ro, 0755);

    printf("%d failed\n", failures);
    return failures == 0 ? 0 : 1;
}
