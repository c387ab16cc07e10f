/* Assemble the 1D Poisson stiffness matrix (linear elements on [0, 1]),
 * write it to a Hurray file, then read it back.
 *
 *   cargo build --release -p coo-assembler-capi
 *   cc -std=c11 -Iinclude capi/examples/assemble.c -Ltarget/release -lcoo_assembler \
 *      -Wl,-rpath,$PWD/target/release -o assemble
 *   ./assemble K.hrry 1000
 */
#include <coo_assembler.h>
#include <stdio.h>
#include <stdlib.h>

/* Print the failed call and this thread's last error, then exit. */
static void check(int status, const char *what) {
    if (status != COO_OK) {
        fprintf(stderr, "%s: %s: %s\n", what, coo_status_name(status), coo_last_error());
        exit(1);
    }
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "K.hrry";
    int64_t n = argc > 2 ? atoll(argv[2]) : 10; /* elements */
    int64_t shape[2] = {n + 1, n + 1};
    double h = 1.0 / (double)n;

    coo_options opts;
    coo_options_default(&opts);
    opts.memory_budget = 64u << 20; /* bytes, for every buffer of the assembly */

    coo_builder *b = coo_builder_new(2, shape, COO_F64, &opts);
    if (b == NULL) {
        fprintf(stderr, "coo_builder_new: %s\n", coo_last_error());
        return 1;
    }
    double ke[4] = {1.0 / h, -1.0 / h, -1.0 / h, 1.0 / h}; /* row-major 2x2 */
    for (int64_t e = 0; e < n; e++) {
        int64_t dofs[2] = {e, e + 1};
        int status = coo_builder_push_element(b, 2, dofs, ke);
        if (status != COO_OK) {
            coo_builder_free(b); /* abandon: nothing is written */
            check(status, "coo_builder_push_element");
        }
    }
    coo_summary s;
    check(coo_builder_finish(b, path, &s), "coo_builder_finish"); /* b is gone now */
    printf("contributions=%llu nnz=%llu runs_spilled=%llu seconds=%.3f\n",
           (unsigned long long)s.contributions, (unsigned long long)s.nnz,
           (unsigned long long)s.runs_spilled, s.seconds);

    coo_file *f = coo_file_open(path);
    if (f == NULL) {
        fprintf(stderr, "coo_file_open: %s\n", coo_last_error());
        return 1;
    }
    coo_info info;
    check(coo_file_info(f, &info), "coo_file_info");
    printf("rank=%u shape=%lldx%lld nnz=%llu sorted=%d\n", info.rank,
           (long long)info.shape[0], (long long)info.shape[1],
           (unsigned long long)info.nnz, (int)info.sorted);

    int64_t idx[2] = {1, 1};
    double v;
    check(coo_file_get(f, idx, &v), "coo_file_get");
    printf("K[1,1]=%g\n", v);

    /* Row 1: its entries are begin..end in storage order. */
    int64_t row = 1;
    uint64_t begin, end;
    check(coo_file_prefix_range(f, 1, &row, &begin, &end), "coo_file_prefix_range");
    int64_t cols[2 * 8];
    double vals[8];
    size_t want = end - begin < 8 ? (size_t)(end - begin) : 8, got;
    check(coo_file_read_entries(f, begin, want, cols, vals, &got),
          "coo_file_read_entries");
    for (size_t i = 0; i < got; i++)
        printf("K[%lld,%lld]=%g\n", (long long)cols[2 * i], (long long)cols[2 * i + 1], vals[i]);

    check(coo_file_verify(f), "coo_file_verify");
    coo_file_close(f);
    return 0;
}
