/* Error paths of the C API: each call gives its documented status code and
 * a message. Usage: errors DIR (an empty directory for outputs and spills).
 * Prints one line per check; exits 1 if any check failed. */
#include <coo_assembler.h>
#include "check.h"
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* For functions returning a handle: NULL means coo_last_status(). */
static int status_of(const void *handle) { return handle ? COO_OK : coo_last_status(); }

static char dir[4096], spill[4096];

static const char *in_dir(const char *name) {
    static char buf[8][4200];
    static int next = 0;
    char *b = buf[next++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", dir, name);
    return b;
}

static coo_builder *new_builder(uint32_t rank, const int64_t *shape, coo_dtype t,
                                coo_duplicates dup, uint32_t threads) {
    coo_options o;
    coo_options_default(&o);
    o.temp_dir = spill;
    o.duplicates = dup;
    o.threads = threads;
    coo_builder *b = coo_builder_new(rank, shape, t, &o);
    if (b == NULL) {
        printf("FAIL new_builder: %s\n", coo_last_error());
        failures++;
    }
    return b;
}

static void *other_thread(void *arg) {
    (void)arg;
    /* A fresh thread has no error; its errors do not touch main's. */
    expect_true(coo_last_error()[0] == '\0' && coo_last_status() == COO_OK,
                "a new thread starts without an error");
    int64_t idx[2] = {0, 0};
    expect(coo_builder_push(NULL, idx, 1.0), COO_ERR_NULL, "push on NULL (other thread)");
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2)
        return 2;
    snprintf(dir, sizeof dir, "%s", argv[1]);
    snprintf(spill, sizeof spill, "%s/spill", argv[1]);
    expect_true(coo_last_error()[0] == '\0' && coo_last_status() == COO_OK,
                "no error before any call");
    expect_true(strlen(coo_version()) > 0, "coo_version");

    int64_t shape[2] = {3, 4};
    int64_t idx[2] = {0, 0};
    double v = 0;
    coo_options o;
    coo_options_default(&o);

    /* Bad builder arguments. */
    expect(status_of(coo_builder_new(0, shape, COO_F64, NULL)), COO_ERR_ARGUMENT, "rank 0");
    int64_t big[65] = {0};
    expect(status_of(coo_builder_new(65, big, COO_F64, NULL)), COO_ERR_ARGUMENT, "rank 65");
    expect(status_of(coo_builder_new(2, NULL, COO_F64, NULL)), COO_ERR_NULL, "NULL shape");
    int64_t negative_shape[2] = {3, -4};
    expect(status_of(coo_builder_new(2, negative_shape, COO_F64, NULL)), COO_ERR_ARGUMENT,
           "negative extent");
    expect(status_of(coo_builder_new(2, shape, (coo_dtype)99, NULL)), COO_ERR_ARGUMENT,
           "unknown dtype");
    o.duplicates = (coo_duplicates)7;
    expect(status_of(coo_builder_new(2, shape, COO_F64, &o)), COO_ERR_ARGUMENT,
           "unknown duplicates policy");
    coo_options_default(&o);
    o.memory_budget = 1;
    expect(status_of(coo_builder_new(2, shape, COO_F64, &o)), COO_ERR_BUDGET, "budget of 1 byte");
    expect_true(strstr(coo_last_error(), "at least") != NULL, "budget message names the minimum");

    /* NULL handles and pointers. */
    expect(coo_builder_push(NULL, idx, 1.0), COO_ERR_NULL, "push on NULL builder");
    expect(coo_pusher_push(NULL, idx, 1.0), COO_ERR_NULL, "push on NULL pusher");
    expect(status_of(coo_pusher_new(NULL)), COO_ERR_NULL, "pusher of NULL builder");
    expect(coo_builder_finish(NULL, in_dir("x.hrry"), NULL), COO_ERR_NULL, "finish NULL");
    expect(coo_file_info(NULL, NULL), COO_ERR_NULL, "info on NULL file");
    expect(status_of(coo_file_open(NULL)), COO_ERR_NULL, "open NULL path");
    coo_builder_free(NULL);
    coo_pusher_free(NULL);
    coo_file_close(NULL);
    coo_options_default(NULL);
    expect_true(1, "free/close/default accept NULL");

    /* Per-thread messages. */
    expect(coo_builder_push(NULL, idx, 1.0), COO_ERR_NULL, "push on NULL (main)");
    char before[256];
    snprintf(before, sizeof before, "%s", coo_last_error());
    pthread_t t;
    pthread_create(&t, NULL, other_thread, NULL);
    pthread_join(t, NULL);
    expect_true(strcmp(before, coo_last_error()) == 0, "main's message survives the other thread");

    /* Indices. */
    coo_builder *b = new_builder(2, shape, COO_F64, COO_DUP_SUM, 2);
    expect(coo_builder_push(b, NULL, 1.0), COO_ERR_NULL, "NULL idx");
    int64_t neg[2] = {-1, 0}, row_out[2] = {3, 0}, col_out[2] = {0, 4};
    expect(coo_builder_push(b, neg, 1.0), COO_ERR_INDEX, "negative index");
    expect_true(strstr(coo_last_error(), "negative") != NULL, "message says negative");
    expect(coo_builder_push(b, row_out, 1.0), COO_ERR_INDEX, "row out of range");
    expect(coo_builder_push(b, col_out, 1.0), COO_ERR_INDEX, "column out of range");
    int64_t many[6] = {0, 0, 1, 1, 2, -3};
    double many_v[3] = {1, 2, 3};
    expect(coo_builder_push_many(b, 3, many, many_v), COO_ERR_INDEX, "negative in push_many");
    expect(coo_builder_push_many(b, 2, NULL, many_v), COO_ERR_NULL, "push_many NULL idx");
    expect(coo_builder_push_many(b, 0, NULL, NULL), COO_OK, "push_many of nothing");
    int64_t dofs_neg[2] = {0, -2}, dofs_out[2] = {0, 3};
    double ke[4] = {1, 2, 3, 4};
    expect(coo_builder_push_element(b, 2, dofs_neg, ke), COO_ERR_INDEX, "negative dof");
    expect(coo_builder_push_element(b, 2, dofs_out, ke), COO_ERR_INDEX, "dof out of range");
    int64_t good[2] = {2, 3};
    expect(coo_builder_push(b, good, 1.5), COO_OK, "a good push");
    expect(coo_builder_push(b, good, NAN), COO_OK, "NaN kept by default in a float tensor");
    coo_builder_free(b);

    /* Wrong rank. */
    int64_t shape3[3] = {2, 2, 2};
    b = new_builder(3, shape3, COO_F64, COO_DUP_SUM, 2);
    int64_t dofs[2] = {0, 1};
    expect(coo_builder_push_element(b, 2, dofs, ke), COO_ERR_RANK, "element into a rank-3 tensor");
    coo_builder_free(b);

    /* Values for integer tensors. */
    b = new_builder(2, shape, COO_I8, COO_DUP_SUM, 2);
    expect(coo_builder_push(b, idx, 1.5), COO_ERR_VALUE, "1.5 into i8");
    expect(coo_builder_push(b, idx, 300), COO_ERR_VALUE, "300 into i8");
    expect(coo_builder_push(b, idx, NAN), COO_ERR_VALUE, "NaN into i8");
    expect(coo_builder_push(b, idx, -128), COO_OK, "-128 into i8");
    double ke_bad[4] = {1, 2, 3, 0.25};
    expect(coo_builder_push_element(b, 2, dofs, ke_bad), COO_ERR_VALUE, "element with 0.25 into i8");
    expect(coo_builder_finish(b, in_dir("i8.hrry"), NULL), COO_OK, "finish i8");
    coo_file *f = coo_file_open(in_dir("i8.hrry"));
    expect(status_of(f), COO_OK, "open i8");
    coo_info info;
    expect(coo_file_info(f, &info), COO_OK, "info i8");
    expect_true(info.dtype == COO_I8 && info.nnz == 1, "i8 tensor holds one entry");
    expect(coo_file_get(f, idx, &v), COO_OK, "get i8");
    expect_true(v == -128.0, "value -128 read back (nothing of the refused element)");
    coo_file_close(f);

    b = new_builder(1, shape, COO_U64, COO_DUP_SUM, 2);
    expect(coo_builder_push(b, idx, -1), COO_ERR_VALUE, "-1 into u64");
    expect(coo_builder_push(b, idx, 9223372036854775808.0), COO_OK, "2^63 into u64");
    expect(coo_builder_finish(b, in_dir("u64.hrry"), NULL), COO_OK, "finish u64");
    f = coo_file_open(in_dir("u64.hrry"));
    expect(coo_file_get(f, idx, &v), COO_OK, "get u64");
    expect_true(v == 9223372036854775808.0, "2^63 read back");
    coo_file_close(f);

    /* Integer overflow and duplicates are found at finish. */
    b = new_builder(2, shape, COO_I8, COO_DUP_SUM, 2);
    coo_builder_push(b, idx, 100);
    coo_builder_push(b, idx, 100);
    expect(coo_builder_finish(b, in_dir("overflow.hrry"), NULL), COO_ERR_OVERFLOW, "100 + 100 in i8");
    b = new_builder(2, shape, COO_F64, COO_DUP_ERROR, 2);
    coo_builder_push(b, idx, 1);
    coo_builder_push(b, idx, 2);
    expect(coo_builder_finish(b, in_dir("dup.hrry"), NULL), COO_ERR_DUPLICATE, "COO_DUP_ERROR");
    /* A failure while merging is not a refusal: the handle is gone. */
    expect(coo_builder_push(b, idx, 1), COO_ERR_STATE, "push after a failed finish");

    /* Options reach the library. */
    coo_options_default(&o);
    o.temp_dir = spill;
    o.drop_zeros = true;
    o.duplicates = COO_DUP_MIN;
    b = coo_builder_new(2, shape, COO_F64, &o);
    int64_t one[2] = {1, 1};
    coo_builder_push(b, idx, 0.0);
    coo_builder_push(b, one, 5.0);
    coo_builder_push(b, one, -2.0);
    coo_summary s;
    expect(coo_builder_finish(b, in_dir("min.hrry"), &s), COO_OK, "finish min/drop_zeros");
    expect_true(s.nnz == 1 && s.contributions == 3, "zero dropped, min kept");
    f = coo_file_open(in_dir("min.hrry"));
    coo_file_get(f, one, &v);
    expect_true(v == -2.0, "min of 5 and -2");
    coo_file_close(f);

    /* No pusher limit (issue 22): with threads = 1 a second pusher and the
     * builder's own push while the first lives; nothing is lost. */
    b = new_builder(2, shape, COO_F64, COO_DUP_SUM, 1);
    coo_pusher *p = coo_pusher_new(b);
    expect(status_of(p), COO_OK, "first pusher");
    coo_pusher *q = coo_pusher_new(b);
    expect(status_of(q), COO_OK, "second pusher with threads = 1");
    expect(coo_builder_push(b, idx, 1.0), COO_OK, "builder push while pushers live");
    expect(coo_pusher_push(p, idx, 1.0), COO_OK, "pusher push");
    expect(coo_pusher_push(q, idx, 1.0), COO_OK, "second pusher push");
    coo_pusher_free(q);
    coo_pusher_free(p);
    expect(coo_builder_push(b, idx, 1.0), COO_OK, "builder push after the pushers are freed");
    expect(coo_builder_finish(b, in_dir("three.hrry"), &s), COO_OK, "finish with three pushers");
    expect_true(s.contributions == 4, "four contributions from three pushers");
    f = coo_file_open(in_dir("three.hrry"));
    coo_file_get(f, idx, &v);
    expect_true(v == 4.0, "every push of the three pushers summed");
    coo_file_close(f);

    /* A refused finish keeps the builder and every contribution. */
    b = new_builder(2, shape, COO_F64, COO_DUP_SUM, 2);
    p = coo_pusher_new(b);
    expect(coo_pusher_push(p, idx, 2.0), COO_OK, "push through the pusher");
    expect(coo_builder_finish(b, in_dir("alive.hrry"), NULL), COO_ERR_REFUSED, "finish with a live pusher");
    f = coo_file_open(in_dir("alive.hrry"));
    expect(status_of(f), COO_ERR_IO, "nothing written by the refused finish");
    expect(coo_pusher_push(p, idx, 3.0), COO_OK, "the pusher still works after the refusal");
    coo_pusher_free(p);
    coo_pusher_free(p); /* a second free is a no-op */
    expect(coo_builder_push(b, idx, 1.0), COO_OK, "the builder still works after the refusal");
    expect(coo_builder_finish(b, in_dir("no/such/dir/K.hrry"), NULL), COO_ERR_REFUSED,
           "finish into a missing directory");
    expect(coo_builder_finish(b, "", NULL), COO_ERR_REFUSED, "finish to an empty path");
    expect(coo_builder_finish(b, NULL, NULL), COO_ERR_REFUSED, "finish to a NULL path");
    coo_summary rs;
    expect(coo_builder_finish(b, in_dir("kept.hrry"), &rs), COO_OK, "finish after the refusals");
    expect(rs.contributions == 3 && rs.nnz == 1 ? COO_OK : -1, COO_OK,
           "every contribution made before the refusals is in the file");
    /* The handle is gone now: the library tells. */
    expect(coo_builder_push(b, idx, 1.0), COO_ERR_STATE, "push after finish");
    expect(coo_builder_finish(b, in_dir("again.hrry"), NULL), COO_ERR_STATE, "double finish");
    expect(status_of(coo_pusher_new(b)), COO_ERR_STATE, "a pusher of a finished builder");
    coo_builder_free(b); /* no-op */
    b = new_builder(2, shape, COO_F64, COO_DUP_SUM, 2);
    coo_builder_free(b);
    expect(coo_builder_push(b, idx, 1.0), COO_ERR_STATE, "push after free");
    expect(coo_builder_finish(b, in_dir("freed.hrry"), NULL), COO_ERR_STATE, "finish after free");
    coo_builder_free(b); /* double free: no-op */

    /* An output the rename could not replace is refused before the merge
     * (issue 22), not found after it with every contribution lost: the
     * builder is kept. */
    b = new_builder(2, shape, COO_F64, COO_DUP_SUM, 2);
    expect(coo_builder_push(b, idx, 1.0), COO_OK, "push before the refusals");
    expect(coo_builder_finish(b, dir, NULL), COO_ERR_REFUSED, "finish onto an existing directory");
    expect_true(strstr(coo_last_error(), "a directory, not a file") != NULL,
                "the message says the output is a directory");
    expect_true(strstr(coo_last_error(), "the builder is still yours") != NULL,
                "the message says the builder is kept");
    expect(coo_builder_finish(b, in_dir("newdir/"), NULL), COO_ERR_REFUSED,
           "finish onto a path ending in /");
    expect(coo_builder_finish(b, in_dir("i8.hrry/K.hrry"), NULL), COO_ERR_REFUSED,
           "finish under a regular file");
    expect(coo_builder_push(b, idx, 2.0), COO_OK, "push after the refusals");
    expect(coo_builder_finish(b, in_dir("after_dir.hrry"), &s), COO_OK, "finish after the refusals");
    expect_true(s.contributions == 2 && s.nnz == 1, "both contributions are in the file");

    /* A missing temp_dir is refused when the builder is made, not at the
     * first spill. */
    coo_options_default(&o);
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/no-such-spill", dir);
    o.temp_dir = missing;
    expect(status_of(coo_builder_new(2, shape, COO_F64, &o)), COO_ERR_IO,
           "a missing temp_dir at coo_builder_new");
    expect_true(strstr(coo_last_error(), "no-such-spill") != NULL, "the message names the temp_dir");

    /* A pusher that outlives its builder refuses pushes (they would go nowhere). */
    b = new_builder(2, shape, COO_F64, COO_DUP_SUM, 2);
    p = coo_pusher_new(b);
    coo_builder_free(b);
    expect(coo_pusher_push(p, idx, 1.0), COO_ERR_STATE, "an orphaned pusher refuses pushes");
    coo_pusher_free(p); /* the abandoned builder goes with it */

    /* Reading. */
    expect(status_of(coo_file_open(in_dir("missing.hrry"))), COO_ERR_IO, "open a missing file");
    FILE *junk = fopen(in_dir("junk.hrry"), "w");
    fputs("this is not a Hurray file, just some text that is long enough to be read\n", junk);
    fclose(junk);
    expect(status_of(coo_file_open(in_dir("junk.hrry"))), COO_ERR_INVALID_FILE, "open a text file");
    expect(status_of(coo_file_open_tensor(in_dir("min.hrry"), "nope")), COO_ERR_NOT_FOUND,
           "open a tensor that is not there");
    f = coo_file_open_tensor(in_dir("min.hrry"), "coo");
    expect(status_of(f), COO_OK, "open the tensor by name");
    expect(coo_file_get(f, neg, &v), COO_ERR_INDEX, "get at a negative index");
    expect(coo_file_get(f, row_out, &v), COO_ERR_INDEX, "get out of range");
    expect(coo_file_get(f, idx, NULL), COO_ERR_NULL, "get into NULL");
    expect(coo_file_get(f, idx, &v), COO_OK, "get an absent entry");
    expect_true(v == 0.0, "absent entries read as 0");
    size_t got = 99;
    expect(coo_file_read_entries(f, 2, 1, NULL, NULL, &got), COO_ERR_INDEX, "read past the end");
    expect(coo_file_read_entries(f, 1, 5, NULL, NULL, &got), COO_OK, "read at the end");
    expect_true(got == 0, "nothing read at the end");
    uint64_t lo, hi;
    int64_t prefix3[3] = {0, 0, 0};
    expect(coo_file_prefix_range(f, 3, prefix3, &lo, &hi), COO_ERR_RANK, "prefix longer than the rank");
    expect(coo_file_prefix_range(f, (size_t)-1, prefix3, &lo, &hi), COO_ERR_RANK,
           "a huge prefix_len is refused before the array is read");
    expect(coo_file_prefix_range(f, 0, prefix3, &lo, &hi), COO_ERR_ARGUMENT, "an empty prefix");
    /* A row outside the shape: the error get gives, not an empty range. */
    expect(coo_file_prefix_range(f, 1, row_out, &lo, &hi), COO_ERR_INDEX,
           "prefix_range of a row out of range, as get");
    expect(coo_file_verify(f), COO_OK, "verify a good file");
    uint64_t notes = 9, warnings = 9;
    char report[512] = "unchanged";
    expect(coo_file_verify_report(f, &notes, &warnings, report, sizeof report), COO_OK,
           "verify_report of our file");
    expect_true(notes == 0 && warnings == 0 && report[0] == '\0',
                "our file: no notes, no warnings, no text");
    coo_file_close(f);

    /* A file without our checksums (the test writes it as another writer
     * would): valid, and verify_report says its bytes were not checked. */
    f = coo_file_open(in_dir("nosums.hrry"));
    expect(status_of(f), COO_OK, "open a file without checksums");
    expect(coo_file_verify(f), COO_OK, "verify a file without checksums");
    expect(coo_file_verify_report(f, &notes, &warnings, report, sizeof report), COO_OK,
           "verify_report of a file without checksums");
    printf("report: %s", report);
    expect_true(notes == 1 && warnings == 0, "one note, no warning");
    expect_true(strstr(report, "note: tensor \"coo\" carries no stored checksums") != NULL,
                "the note says the tensor carries no checksums");
    char tiny[8];
    expect(coo_file_verify_report(f, NULL, NULL, tiny, sizeof tiny), COO_OK,
           "verify_report into a short buffer");
    expect_true(strcmp(tiny, "...") == 0, "a report that does not fit is cut to \"...\"");
    expect(coo_file_verify_report(f, NULL, NULL, NULL, 0), COO_OK, "verify_report with no outputs");
    coo_file_close(f);

    /* Options by name, with the library's tables and size grammar. */
    expect_true(coo_api_version() == COO_API_VERSION, "the library's API is the header's");
    coo_options o2;
    coo_options_default(&o2);
    expect_true(o2.size == sizeof(coo_options), "coo_options_default sets size");
    expect(coo_options_set(&o2, "memory_budget", "1.5 GiB"), COO_OK, "memory_budget 1.5 GiB");
    expect_true(o2.memory_budget == 3ull << 29, "1.5 GiB is 3 << 29 bytes");
    expect(coo_options_set(&o2, "memory_budget", "8 parsecs"), COO_ERR_ARGUMENT, "a bad size");
    expect_true(strstr(coo_last_error(), "unknown unit") != NULL, "the size message is the library's");
    expect(coo_options_set(&o2, "duplicates", "MAX"), COO_OK, "duplicates MAX");
    expect_true(o2.duplicates == COO_DUP_MAX, "MAX is COO_DUP_MAX");
    expect(coo_options_set(&o2, "non_finite", "reject_nan"), COO_OK, "non_finite reject_nan");
    expect_true(o2.non_finite == COO_REJECT_NAN, "reject_nan is COO_REJECT_NAN");
    expect(coo_options_set(&o2, "layout", "csr"), COO_OK, "layout csr");
    expect(coo_options_set(&o2, "duplicates", "mean"), COO_ERR_ARGUMENT, "an unknown policy");
    expect_true(strstr(coo_last_error(), "use one of sum, min, max, last, error") != NULL,
                "the policy message lists the table");
    expect(coo_options_set(&o2, "colour", "red"), COO_ERR_ARGUMENT, "an unknown option");
    int code = -1;
    expect(coo_parse_name("dtype", "float32", &code), COO_OK, "parse dtype float32");
    expect_true(code == COO_F32, "float32 is COO_F32");
    expect(coo_parse_name("dtype", "f128", &code), COO_ERR_ARGUMENT, "parse an unknown dtype");
    coo_options bad = o2;
    bad.size = 8;
    expect(status_of(coo_builder_new(2, shape, COO_F64, &bad)), COO_ERR_ARGUMENT,
           "options of an older header (size 8)");

    /* An input file through the library's reader, as the CLI reads it. */
    FILE *mtx = fopen(in_dir("in.mtx"), "w");
    fputs("%%MatrixMarket matrix coordinate real general\n3 4 3\n1 1 1.5\n3 9 -2\n1 1 1\n", mtx);
    fclose(mtx);
    int64_t shape34[2] = {3, 4};
    coo_options_default(&o2);
    o2.temp_dir = spill;
    coo_builder *fb = coo_builder_new(2, shape34, COO_F64, &o2);
    uint64_t pushed = 0;
    expect(coo_builder_push_file(fb, in_dir("in.mtx"), NULL, &pushed), COO_ERR_INPUT,
           "an out-of-range entry in the file");
    expect_true(strstr(coo_last_error(), "in.mtx:line 4") != NULL, "the error names the line");
    coo_builder_free(fb);
    mtx = fopen(in_dir("in.mtx"), "w");
    fputs("%%MatrixMarket matrix coordinate real general\n3 4 3\n1 1 1.5\n3 4 -2\n1 1 1\n", mtx);
    fclose(mtx);
    fb = coo_builder_new(2, shape34, COO_F64, &o2);
    expect(coo_builder_push_file(fb, in_dir("in.mtx"), "mtx", &pushed), COO_OK, "push a mtx file");
    expect_true(pushed == 3, "three contributions pushed");
    expect(coo_builder_push_file(fb, in_dir("in.mtx"), "csv", NULL), COO_ERR_ARGUMENT,
           "an unknown format");
    /* The output rule: the pushed input as output is refused, the builder
     * and the input kept. */
    expect(coo_builder_finish(fb, in_dir("in.mtx"), NULL), COO_ERR_REFUSED,
           "finish onto the pushed input");
    expect_true(strstr(coo_last_error(), "would destroy the input") != NULL,
                "the message says the input would be destroyed");
    char line[64] = "";
    mtx = fopen(in_dir("in.mtx"), "r");
    expect_true(mtx != NULL && fgets(line, sizeof line, mtx) != NULL &&
                    strcmp(line, "%%MatrixMarket matrix coordinate real general\n") == 0,
                "the input is untouched");
    if (mtx)
        fclose(mtx);
    expect(coo_builder_finish(fb, in_dir("from_mtx.hrry"), NULL), COO_OK, "finish the file input");
    f = coo_file_open(in_dir("from_mtx.hrry"));
    int64_t at00[2] = {0, 0};
    expect(coo_file_get(f, at00, &v), COO_OK, "get (0, 0)");
    expect_true(v == 2.5, "(0, 0) sums the two lines");
    coo_file_close(f);

    /* Status names, and errors recorded by a binding. */
    int named = 1;
    for (int c = COO_ERR_REMOTE; c <= COO_OK; c++)
        named &= strncmp(coo_status_name(c), "COO_", 4) == 0;
    expect_true(named, "every status from COO_ERR_REMOTE to COO_OK has a COO_ name");
    expect_true(strcmp(coo_status_name(7), "unknown status") == 0, "7 is no status");
    coo_set_last_error(COO_ERR_RANK, "index has 3 components");
    expect_true(coo_last_status() == COO_ERR_RANK &&
                    strcmp(coo_last_error(), "index has 3 components") == 0,
                "a binding records its own error");
    coo_set_last_error(COO_ERR_INDEX, NULL);
    expect_true(coo_last_status() == COO_ERR_INDEX && coo_last_error()[0] == '\0',
                "a binding's NULL message is the empty one");

    /* Codes: an unknown one lists the table; the first negative index is
     * found by contribution, then dimension. */
    expect(status_of(coo_builder_new(2, shape, (coo_dtype)-1, NULL)), COO_ERR_ARGUMENT,
           "dtype -1");
    expect_message("3 = f64", "the message lists the dtype codes");
    b = new_builder(2, shape, COO_F64, COO_DUP_SUM, 2);
    int64_t negs[8] = {0, 0, 1, -1, 2, 3, -4, -9};
    double negs_v[4] = {1, 2, 3, 4};
    expect(coo_builder_push_many(b, 4, negs, negs_v), COO_ERR_INDEX, "negatives in push_many");
    expect_message("contribution 1: index -1 in dimension 1 is negative; to skip",
                   "the first negative by contribution, then dimension");

    /* Doubles for 64-bit integer tensors: exact bounds. */
    coo_builder_free(b);
    b = new_builder(1, shape, COO_I64, COO_DUP_SUM, 2);
    expect(coo_builder_push(b, idx, -9223372036854775808.0), COO_OK, "-2^63 into i64");
    expect(coo_builder_push(b, idx, 9223372036854775808.0), COO_ERR_VALUE, "2^63 into i64");
    expect(coo_builder_push(b, idx, 0.5), COO_ERR_VALUE, "0.5 into i64");
    expect_message("an integer tensor takes integral values", "the message says integral");
    expect(coo_builder_push(b, idx, INFINITY), COO_ERR_VALUE, "inf into i64");
    coo_builder_free(b);
    b = new_builder(1, shape, COO_U64, COO_DUP_SUM, 2);
    expect(coo_builder_push(b, idx, -1.0), COO_ERR_VALUE, "-1 into u64");
    expect_message("value -1 refused: the integer does not fit the tensor's element type",
                   "the message says it does not fit");
    expect(coo_builder_push(b, idx, 18446744073709551616.0), COO_ERR_VALUE, "2^64 into u64");
    expect(coo_builder_push(b, idx, -0.0), COO_OK, "-0.0 into u64");
    coo_builder_free(b);

    printf("%d failed\n", failures);
    return failures == 0 ? 0 : 1;
}
