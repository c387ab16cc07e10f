/* coo_assemble_arrays and coo_assemble_arrays_i32 (issue 23): every file
 * they write is byte for byte the one coo_builder_push_many +
 * coo_builder_finish write for the same contributions, and reads back
 * entry for entry the same; each error gives its documented status, and
 * leaves no output behind.
 * Usage: arrays DIR (an empty directory; DIR/spill for spill files).
 * Prints one line per check, the summaries as `name: key=value ...`, and
 * "N failed" at the end; exits 1 if a check failed. The contributions of
 * "lcg" come from an LCG that tests/programs.rs replays. */
#include <coo_assembler.h>
#include "check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXTENT 300
#define N 100000

static char dir[4096], spill[4096];

static const char *in_dir(const char *name) {
    static char buf[8][4200];
    static int next = 0;
    char *b = buf[next++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", dir, name);
    return b;
}

static int exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f)
        fclose(f);
    return f != NULL;
}

/* The whole file, malloc'd; *len its size. NULL if it cannot be read. */
static unsigned char *slurp(const char *path, long *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*len > 0 ? (size_t)*len : 1);
    if (b && fread(b, 1, (size_t)*len, f) != (size_t)*len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

static int same_bytes(const char *a, const char *b) {
    long la = -1, lb = -2;
    unsigned char *x = slurp(a, &la), *y = slurp(b, &lb);
    int same = x && y && la == lb && memcmp(x, y, (size_t)la) == 0;
    free(x);
    free(y);
    return same;
}

/* Every entry of two files equal: same count, indices and values (==). */
static int same_entries(const char *a, const char *b, uint32_t rank) {
    coo_file *f = coo_file_open(a), *g = coo_file_open(b);
    int same = f != NULL && g != NULL;
    coo_info fi, gi;
    if (same)
        same = coo_file_info(f, &fi) == COO_OK && coo_file_info(g, &gi) == COO_OK &&
               fi.nnz == gi.nnz && fi.rank == rank && gi.rank == rank;
    enum { CHUNK = 4096 };
    int64_t *fx = malloc(sizeof(int64_t) * CHUNK * rank), *gx = malloc(sizeof(int64_t) * CHUNK * rank);
    double *fv = malloc(sizeof(double) * CHUNK), *gv = malloc(sizeof(double) * CHUNK);
    for (uint64_t first = 0; same && first < fi.nnz; first += CHUNK) {
        size_t want = fi.nnz - first < CHUNK ? (size_t)(fi.nnz - first) : CHUNK, fn = 0, gn = 0;
        same = coo_file_read_entries(f, first, want, fx, fv, &fn) == COO_OK &&
               coo_file_read_entries(g, first, want, gx, gv, &gn) == COO_OK && fn == want &&
               gn == want && memcmp(fx, gx, sizeof(int64_t) * want * rank) == 0;
        for (size_t i = 0; same && i < want; i++)
            same = fv[i] == gv[i] || (isnan(fv[i]) && isnan(gv[i]));
    }
    free(fx);
    free(gx);
    free(fv);
    free(gv);
    coo_file_close(f);
    coo_file_close(g);
    return same;
}

/* merge_passes is 0 when the in-memory kernel took the work, at least 1
 * when the builder did (tests/programs.rs checks which). */
static void print_summary(const char *name, const coo_summary *s) {
    printf("%s: contributions=%llu nnz=%llu merge_passes=%llu\n", name,
           (unsigned long long)s->contributions, (unsigned long long)s->nnz,
           (unsigned long long)s->merge_passes);
}

static coo_options options(void) {
    coo_options o;
    coo_options_default(&o);
    o.temp_dir = spill;
    o.threads = 2;
    return o;
}

/* The builder's file for the same contributions: index i of contribution
 * j is dims[i][j] (int64_t), pushed in batches of `batch` through
 * coo_builder_push_many. */
static int builder_file(uint32_t rank, const int64_t *shape, coo_dtype t, const coo_options *o,
                        size_t n, const int64_t *const *dims, const double *vals, size_t batch,
                        const char *path, coo_summary *s) {
    coo_builder *b = coo_builder_new(rank, shape, t, o);
    if (b == NULL)
        return coo_last_status();
    int64_t *idx = malloc(sizeof(int64_t) * rank * batch);
    int status = COO_OK;
    for (size_t j = 0; j < n && status == COO_OK; j += batch) {
        size_t m = n - j < batch ? n - j : batch;
        for (size_t k = 0; k < m; k++)
            for (uint32_t d = 0; d < rank; d++)
                idx[k * rank + d] = dims[d][j + k];
        status = coo_builder_push_many(b, m, idx, vals + j);
    }
    free(idx);
    if (status != COO_OK) {
        coo_builder_free(b);
        return status;
    }
    return coo_builder_finish(b, path, s);
}

/* Both entry points and the builder on the same contributions: the three
 * files are the same bytes and the same entries. */
static void three_ways(const char *name, uint32_t rank, const int64_t *shape, coo_dtype t,
                       const coo_options *o, size_t n, int64_t *const *dims, const double *vals) {
    char label[256], a[4200], b[4200], c[4200];
    snprintf(a, sizeof a, "%s", in_dir(name));
    strncat(a, ".arrays.hrry", sizeof a - strlen(a) - 1);
    snprintf(b, sizeof b, "%s", in_dir(name));
    strncat(b, ".i32.hrry", sizeof b - strlen(b) - 1);
    snprintf(c, sizeof c, "%s", in_dir(name));
    strncat(c, ".builder.hrry", sizeof c - strlen(c) - 1);

    coo_summary sa, sb, sc;
    memset(&sa, 0xff, sizeof sa);
    snprintf(label, sizeof label, "%s: coo_assemble_arrays", name);
    expect(coo_assemble_arrays(rank, shape, t, o, n, (const int64_t *const *)dims, vals, COO_F64,
                               a, &sa),
           COO_OK, label);
    print_summary(name, &sa);

    int32_t *d32[COO_MAX_RANK];
    const int32_t *c32[COO_MAX_RANK];
    for (uint32_t d = 0; d < rank; d++) {
        d32[d] = malloc(sizeof(int32_t) * (n ? n : 1));
        for (size_t j = 0; j < n; j++)
            d32[d][j] = (int32_t)dims[d][j];
        c32[d] = d32[d];
    }
    snprintf(label, sizeof label, "%s: coo_assemble_arrays_i32", name);
    expect(coo_assemble_arrays_i32(rank, shape, t, o, n, c32, vals, COO_F64, b, &sb), COO_OK,
           label);
    for (uint32_t d = 0; d < rank; d++)
        free(d32[d]);

    snprintf(label, sizeof label, "%s: builder push_many + finish", name);
    expect(builder_file(rank, shape, t, o, n, (const int64_t *const *)dims, vals, 777, c, &sc),
           COO_OK, label);

    snprintf(label, sizeof label, "%s: int64 arrays' file is the builder's, byte for byte", name);
    expect_true(same_bytes(a, c), label);
    snprintf(label, sizeof label, "%s: int32 arrays' file is the builder's, byte for byte", name);
    expect_true(same_bytes(b, c), label);
    snprintf(label, sizeof label, "%s: every entry read back equals the builder's", name);
    expect_true(same_entries(a, c, rank) && same_entries(b, c, rank), label);
    snprintf(label, sizeof label, "%s: the summaries agree (contributions %zu, nnz %llu)", name,
             n, (unsigned long long)sc.nnz);
    expect_true(sa.contributions == n && sb.contributions == n && sc.contributions == n &&
                    sa.nnz == sc.nnz && sb.nnz == sc.nnz && sa.seconds >= 0 &&
                    sa.merge_passes == sb.merge_passes,
                label);
    snprintf(label, sizeof label, "%s: the file holds nnz entries", name);
    coo_file *f = coo_file_open(a);
    coo_info info;
    expect_true(f != NULL && coo_file_info(f, &info) == COO_OK && info.nnz == sa.nnz &&
                    coo_file_verify(f) == COO_OK,
                label);
    coo_file_close(f);
}

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s;
}

int main(int argc, char **argv) {
    if (argc != 2)
        return 2;
    snprintf(dir, sizeof dir, "%s", argv[1]);
    snprintf(spill, sizeof spill, "%s/spill", argv[1]);

    int64_t *rows = malloc(sizeof(int64_t) * N), *cols = malloc(sizeof(int64_t) * N);
    double *vals = malloc(sizeof(double) * N);
    int64_t *dims[2] = {rows, cols};
    const int64_t *cdims[2] = {rows, cols};
    int64_t shape[2] = {EXTENT, EXTENT};
    coo_options o = options();

    /* "lcg": a band of a 300 x 300 matrix, most coordinates hit many
     * times (tests/programs.rs replays it). */
    uint64_t s = 7;
    for (size_t j = 0; j < N; j++) {
        uint64_t x = lcg(&s);
        rows[j] = (int64_t)((x >> 33) % EXTENT);
        cols[j] = (int64_t)((rows[j] + (int64_t)((x >> 13) % 7)) % EXTENT);
        vals[j] = ((double)((x >> 50) % 17) - 8.0) / 8.0;
    }
    three_ways("lcg", 2, shape, COO_F64, &o, N, dims, vals);

    /* "cancel": sums that only exact summation gets right (1e16 + 1 - 1e16
     * at every coordinate, in varying orders), and NaN. */
    double *awkward = malloc(sizeof(double) * N);
    const double terms[4] = {1e16, 1.0, -1e16, 0.1};
    for (size_t j = 0; j < N; j++)
        awkward[j] = terms[(j + (size_t)rows[j]) % 4];
    awkward[17] = NAN;
    three_ways("cancel", 2, shape, COO_F64, &o, N, dims, awkward);
    coo_file *f = coo_file_open(in_dir("cancel.arrays.hrry"));
    int64_t at[2] = {rows[17], cols[17]};
    double v = 0;
    expect(coo_file_get(f, at, &v), COO_OK, "cancel: get the NaN coordinate");
    expect_true(isnan(v), "cancel: NaN propagates");
    coo_file_close(f);

    /* CSR and CSC files. */
    o.layout = COO_LAYOUT_CSR;
    three_ways("csr", 2, shape, COO_F64, &o, N, dims, vals);
    o.layout = COO_LAYOUT_CSC;
    three_ways("csc", 2, shape, COO_F64, &o, N, dims, vals);
    o = options();

    /* An f32 tensor (rounded once from the exact sum) and an i32 tensor
     * (integral doubles, exact integer sums). */
    three_ways("f32", 2, shape, COO_F32, &o, N, dims, awkward);
    double *ints = malloc(sizeof(double) * N);
    for (size_t j = 0; j < N; j++)
        ints[j] = (double)((int64_t)(j % 11) - 5);
    three_ways("i32", 2, shape, COO_I32, &o, N, dims, ints);

    /* Rank 3 whose index packs into more than 64 bits: the kernel cannot
     * take it, the builder does (tests/programs.rs checks which path). */
    int64_t wide[3] = {1LL << 30, 1LL << 30, 1LL << 30};
    int64_t *third = malloc(sizeof(int64_t) * N);
    for (size_t j = 0; j < N; j++)
        third[j] = (int64_t)(((uint64_t)rows[j] * 2654435761u) % (1u << 30));
    int64_t *dims3[3] = {third, rows, cols};
    three_ways("wide3", 3, wide, COO_F64, &o, N, dims3, vals);

    /* A matrix too tall for the kernel's counts under a small budget: the
     * builder again. */
    int64_t tall[2] = {1LL << 20, EXTENT};
    coo_options small = options();
    small.memory_budget = 12u << 20;
    int64_t *far = malloc(sizeof(int64_t) * N);
    for (size_t j = 0; j < N; j++)
        far[j] = rows[j] * 3000 + (int64_t)(j % 3);
    int64_t *dims_tall[2] = {far, cols};
    three_ways("tall", 2, tall, COO_F64, &small, N, dims_tall, vals);

    /* Nothing at all: every array may be NULL. */
    coo_summary es;
    expect(coo_assemble_arrays(2, shape, COO_F64, &o, 0, NULL, NULL, COO_F64, in_dir("empty.hrry"),
                               &es),
           COO_OK, "n = 0 with NULL arrays");
    expect(builder_file(2, shape, COO_F64, &o, 0, cdims, vals, 1, in_dir("empty.builder.hrry"),
                        NULL),
           COO_OK, "the builder with no contribution");
    expect_true(es.nnz == 0 && es.contributions == 0 &&
                    same_bytes(in_dir("empty.hrry"), in_dir("empty.builder.hrry")),
                "the empty tensor is the builder's, byte for byte");
    expect(coo_assemble_arrays(2, shape, COO_F64, NULL, 3, cdims, vals, COO_F64,
                               in_dir("defaults.hrry"), NULL),
           COO_OK, "NULL options and NULL summary");

    /* ---------------- errors: nothing is left behind ---------------- */
    const char *bad = in_dir("bad.hrry");
    /* A file already at the path stays as it was through every failure. */
    const char *kept = in_dir("kept.hrry");
    expect(coo_assemble_arrays(2, shape, COO_F64, &o, 5, cdims, vals, COO_F64, kept, NULL), COO_OK,
           "a file to keep");
    long kept_len = 0;
    unsigned char *kept_bytes = slurp(kept, &kept_len);

    int64_t r_save = rows[1234];
    rows[1234] = -3;
    expect(coo_assemble_arrays(2, shape, COO_F64, &o, N, cdims, vals, COO_F64, bad, NULL),
           COO_ERR_INDEX, "a negative row");
    expect_message("contribution 1234: index -3 in dimension 0 is negative",
                   "the message names the contribution and the dimension");
    expect(coo_assemble_arrays(2, shape, COO_F64, &o, N, cdims, vals, COO_F64, kept, NULL),
           COO_ERR_INDEX, "a negative row, over an existing file");
    int32_t *r32 = malloc(sizeof(int32_t) * N), *c32 = malloc(sizeof(int32_t) * N);
    for (size_t j = 0; j < N; j++) {
        r32[j] = (int32_t)rows[j];
        c32[j] = (int32_t)cols[j];
    }
    const int32_t *d32[2] = {r32, c32};
    expect(coo_assemble_arrays_i32(2, shape, COO_F64, &o, N, d32, vals, COO_F64, bad, NULL),
           COO_ERR_INDEX, "a negative int32 row");
    expect_message("contribution 1234: index -3 in dimension 0 is negative",
                   "the int32 message names it too");
    /* An index past its extent earlier than the negative one: the negative
     * one is named, as coo_builder_push_many checks them first. */
    int64_t c_save = cols[40];
    cols[40] = EXTENT;
    expect(coo_assemble_arrays(2, shape, COO_F64, &o, N, cdims, vals, COO_F64, bad, NULL),
           COO_ERR_INDEX, "a negative index after one out of range");
    expect_message("contribution 1234: index -3", "negatives come first");
    expect(builder_file(2, shape, COO_F64, &o, N, cdims, vals, N, bad, NULL), COO_ERR_INDEX,
           "the builder says the same");
    expect_message("contribution 1234: index -3", "the builder names the same contribution");
    rows[1234] = r_save;
    expect(coo_assemble_arrays(2, shape, COO_F64, &o, N, cdims, vals, COO_F64, bad, NULL),
           COO_ERR_INDEX, "a column past its extent");
    expect_message("contribution 40: index 300 in dimension 1 is out of range", "named");
    cols[40] = c_save;
    /* The negative one beats every other error met later too. */
    r_save = rows[9];
    rows[9] = -1;
    expect(coo_assemble_arrays(2, shape, COO_F64, &o, N, cdims, vals, COO_F64,
                               in_dir("no/such/dir/x.hrry"), NULL),
           COO_ERR_INDEX, "a negative index and a missing folder");
    /* ... but not the budget, which coo_builder_new refuses first. */
    coo_options tiny = options();
    tiny.memory_budget = 1;
    expect(coo_assemble_arrays(2, shape, COO_F64, &tiny, N, cdims, vals, COO_F64, bad, NULL),
           COO_ERR_BUDGET, "a budget of one byte, with a negative index");
    expect_message("at least", "the budget message gives the minimum");
    rows[9] = r_save;

    /* NULLs. */
    const int64_t *half_null[2] = {rows, NULL};
    expect(coo_assemble_arrays(2, NULL, COO_F64, &o, N, cdims, vals, COO_F64, bad, NULL),
           COO_ERR_NULL, "NULL shape");
    expect(coo_assemble_arrays(2, shape, COO_F64, &o, N, NULL, vals, COO_F64, bad, NULL),
           COO_ERR_NULL, "NULL indices");
    expect(coo_assemble_arrays(2, shape, COO_F64, &o, N, half_null, vals, COO_F64, bad, NULL),
           COO_ERR_NULL, "NULL indices[1]");
    expect_message("indices[1]", "the message names the array");
    expect(coo_assemble_arrays(2, shape, COO_F64, &o, N, cdims, NULL, COO_F64, bad, NULL),
           COO_ERR_NULL, "NULL values");
    expect(coo_assemble_arrays(2, shape, COO_F64, &o, N, cdims, vals, COO_F64, NULL, NULL),
           COO_ERR_NULL, "NULL path");
    expect(coo_assemble_arrays_i32(2, shape, COO_F64, &o, N, NULL, vals, COO_F64, bad, NULL),
           COO_ERR_NULL, "NULL int32 indices");

    /* Arguments. */
    int64_t big[65] = {0};
    expect(coo_assemble_arrays(0, shape, COO_F64, &o, N, cdims, vals, COO_F64, bad, NULL),
           COO_ERR_ARGUMENT, "rank 0");
    expect(coo_assemble_arrays(65, big, COO_F64, &o, N, cdims, vals, COO_F64, bad, NULL),
           COO_ERR_ARGUMENT, "rank 65");
    int64_t neg_shape[2] = {EXTENT, -1};
    expect(coo_assemble_arrays(2, neg_shape, COO_F64, &o, N, cdims, vals, COO_F64, bad, NULL),
           COO_ERR_ARGUMENT, "a negative extent");
    expect(coo_assemble_arrays(2, shape, (coo_dtype)99, &o, N, cdims, vals, COO_F64, bad, NULL),
           COO_ERR_ARGUMENT, "an unknown dtype");
    expect(coo_assemble_arrays(2, shape, COO_F64, &o, N, cdims, vals, COO_I64, bad, NULL),
           COO_ERR_ARGUMENT, "int64_t values (this version reads doubles)");
    expect_message("value_type", "the message names value_type");
    expect(coo_assemble_arrays(2, shape, COO_F64, &o, N, cdims, vals, (coo_dtype)-1, bad, NULL),
           COO_ERR_ARGUMENT, "an unknown value_type");
    coo_options csr3 = options();
    csr3.layout = COO_LAYOUT_CSR;
    int64_t shape3[3] = {EXTENT, EXTENT, 2};
    const int64_t *cdims3[3] = {rows, cols, cols};
    expect(coo_assemble_arrays(3, shape3, COO_F64, &csr3, 10, cdims3, vals, COO_F64, bad, NULL),
           COO_ERR_ARGUMENT, "a CSR file of rank 3");
    coo_options old = options();
    old.size = 8;
    expect(coo_assemble_arrays(2, shape, COO_F64, &old, N, cdims, vals, COO_F64, bad, NULL),
           COO_ERR_ARGUMENT, "options not filled by coo_options_default");
    expect(coo_assemble_arrays(2, shape, COO_F64, &o, N, cdims, vals, COO_F64, "", NULL),
           COO_ERR_ARGUMENT, "an empty path");
    expect(coo_assemble_arrays(2, shape, COO_F64, &o, N - 1, cdims,
                               (const void *)((const char *)vals + 1), COO_F64, bad, NULL),
           COO_ERR_ARGUMENT, "values not aligned for double");

    /* Values, duplicates, overflow, the output. */
    double save = ints[77];
    ints[77] = 0.5;
    expect(coo_assemble_arrays(2, shape, COO_I32, &o, N, cdims, ints, COO_F64, bad, NULL),
           COO_ERR_VALUE, "0.5 into an i32 tensor");
    expect_message("contribution 77: value 0.5 refused", "the message names it");
    ints[77] = save;
    /* The first negative index by contribution, then dimension. */
    int64_t nr[4] = {0, 1, 2, -4}, nc[4] = {0, -1, 3, -9};
    const int64_t *ndims[2] = {nr, nc};
    expect(coo_assemble_arrays(2, shape, COO_F64, &o, 4, ndims, vals, COO_F64, bad, NULL),
           COO_ERR_INDEX, "negatives in two dimensions");
    expect_message("contribution 1: index -1 in dimension 1 is negative; to skip",
                   "the first negative by contribution, then dimension");
    /* Doubles for a u64 tensor: 2^63 fits, -1 does not. */
    double big_u[4] = {9223372036854775808.0, 1, 2, 3};
    expect(coo_assemble_arrays(2, shape, COO_U64, &o, 4, cdims, big_u, COO_F64,
                               in_dir("u64.hrry"), NULL),
           COO_OK, "2^63 into a u64 tensor");
    big_u[2] = -1;
    expect(coo_assemble_arrays(2, shape, COO_U64, &o, 4, cdims, big_u, COO_F64, bad, NULL),
           COO_ERR_VALUE, "-1 into a u64 tensor");
    expect_message("contribution 2: value -1 refused", "the message names it");
    coo_options reject = options();
    reject.non_finite = COO_REJECT_NAN;
    expect(coo_assemble_arrays(2, shape, COO_F64, &reject, N, cdims, awkward, COO_F64, bad, NULL),
           COO_ERR_VALUE, "NaN under COO_REJECT_NAN");
    expect_message("contribution 17", "the NaN's contribution");
    coo_options dup = options();
    dup.duplicates = COO_DUP_ERROR;
    expect(coo_assemble_arrays(2, shape, COO_F64, &dup, N, cdims, vals, COO_F64, bad, NULL),
           COO_ERR_DUPLICATE, "duplicates under COO_DUP_ERROR");
    double *hundreds = malloc(sizeof(double) * N);
    for (size_t j = 0; j < N; j++)
        hundreds[j] = 100;
    expect(coo_assemble_arrays(2, shape, COO_I8, &o, N, cdims, hundreds, COO_F64, bad, NULL),
           COO_ERR_OVERFLOW, "100 + 100 in an i8 tensor");
    expect(coo_assemble_arrays(2, shape, COO_F64, &o, N, cdims, vals, COO_F64,
                               in_dir("no/such/dir/x.hrry"), NULL),
           COO_ERR_IO, "a missing folder");

    expect_true(!exists(bad), "no failed call published its output");
    long now_len = -1;
    unsigned char *now = slurp(kept, &now_len);
    expect_true(kept_bytes && now && now_len == kept_len &&
                    memcmp(now, kept_bytes, (size_t)kept_len) == 0,
                "the file already at the path is unchanged");
    free(now);
    free(kept_bytes);
    printf("%d failed\n", failures);
    return failures == 0 ? 0 : 1;
}
