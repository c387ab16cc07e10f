/* skip_negative (issue 22): with the option, every int64_t push, pusher
 * push and coo_assemble_arrays(_i32) skips contributions with a negative
 * index and coo_summary.skipped_negative counts them; the files equal the
 * ones written without those contributions, byte for byte. Without it, a
 * negative index is COO_ERR_INDEX with today's message.
 * Usage: skip_negative DIR. Prints one line per check and "N failed". */
#include <coo_assembler.h>
#include "check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[4096];

static const char *in_dir(const char *name) {
    static char buf[8][4200];
    static int next = 0;
    char *b = buf[next++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", dir, name);
    return b;
}

/* The whole file, malloc'd; its length in *len. */
static char *slurp(const char *path, long *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)*len + 1);
    if (b && fread(b, 1, (size_t)*len, f) != (size_t)*len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

static int same_bytes(const char *a, const char *b) {
    long la = 0, lb = 0;
    char *x = slurp(a, &la), *y = slurp(b, &lb);
    int same = x && y && la == lb && memcmp(x, y, (size_t)la) == 0;
    free(x);
    free(y);
    return same;
}

static const int64_t shape[2] = {6, 6};

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: skip_negative DIR\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    coo_options o;
    coo_options_default(&o);
    expect_true(!o.skip_negative, "skip_negative is off by default");
    expect(coo_options_set(&o, "skip_negative", "true"), COO_OK, "set skip_negative");
    expect_true(o.skip_negative, "coo_options_set sets the field");

    /* Every push with a negative index somewhere, through the builder and a pusher. */
    coo_builder *b = coo_builder_new(2, shape, COO_F64, &o);
    expect_true(b != NULL, "builder with skip_negative");
    const int64_t i0[2] = {1, 2}, i1[2] = {-1, 2};
    expect(coo_builder_push(b, i0, 1.0), COO_OK, "push kept");
    expect(coo_builder_push(b, i1, 9.0), COO_OK, "push skipped");
    const int64_t many[6] = {0, 0, 3, -4, 4, 4};
    const double mv[3] = {2.0, 9.0, 3.0};
    expect(coo_builder_push_many(b, 3, many, mv), COO_OK, "push_many");
    /* sfepy's Dirichlet dofs: -1 in an element's dof list. */
    const int64_t dofs[3] = {3, -1, 5};
    const double ke[9] = {1, 9, 2, 9, 9, 9, 3, 9, 4};
    expect(coo_builder_push_element(b, 3, dofs, ke), COO_OK, "push_element");
    coo_pusher *p = coo_pusher_new(b);
    expect_true(p != NULL, "pusher");
    const int64_t i2[2] = {2, -2};
    expect(coo_pusher_push(p, i2, 9.0), COO_OK, "pusher push skipped");
    expect(coo_pusher_push_element(p, 3, dofs, ke), COO_OK, "pusher push_element");
    coo_pusher_free(p);
    coo_summary s;
    expect(coo_builder_finish(b, in_dir("got.hrry"), &s), COO_OK, "finish");
    printf("got: contributions=%llu skipped=%llu nnz=%llu\n", (unsigned long long)s.contributions,
           (unsigned long long)s.skipped_negative, (unsigned long long)s.nnz);
    expect_true(s.contributions == 24 && s.skipped_negative == 13 && s.nnz == 7,
                "24 contributions, 13 skipped, 7 entries");

    /* The same without the skipped ones, and without the option. */
    coo_options d;
    coo_options_default(&d);
    b = coo_builder_new(2, shape, COO_F64, &d);
    expect(coo_builder_push(b, i0, 1.0), COO_OK, "want push");
    const int64_t kept_many[4] = {0, 0, 4, 4};
    const double kept_mv[2] = {2.0, 3.0};
    expect(coo_builder_push_many(b, 2, kept_many, kept_mv), COO_OK, "want push_many");
    const int64_t kept_dofs[2] = {3, 5};
    const double kept_ke[4] = {1, 2, 3, 4};
    expect(coo_builder_push_element(b, 2, kept_dofs, kept_ke), COO_OK, "want element");
    expect(coo_builder_push_element(b, 2, kept_dofs, kept_ke), COO_OK, "want element again");
    /* Without the option a negative index is the error it was. */
    expect(coo_builder_push(b, i1, 9.0), COO_ERR_INDEX, "negative refused without the option");
    expect_true(strstr(coo_last_error(), "contribution 11: index -1 in dimension 0 is negative; to skip the contributions of negative (removed) indices") == coo_last_error(),
                "today's message");
    expect(coo_builder_push_element(b, 3, dofs, ke), COO_ERR_INDEX, "negative dof refused");
    expect(coo_builder_finish(b, in_dir("want.hrry"), &s), COO_OK, "finish want");
    expect_true(s.skipped_negative == 0 && s.contributions == 11, "nothing skipped");
    expect_true(same_bytes(in_dir("got.hrry"), in_dir("want.hrry")), "the same bytes");

    /* coo_assemble_arrays and _i32: skipped through the library's arrays path. */
    const int64_t r64[5] = {0, -1, 2, 5, 2}, c64[5] = {1, 1, -3, 5, 2};
    const int32_t r32[5] = {0, -1, 2, 5, 2}, c32[5] = {1, 1, -3, 5, 2};
    const double v5[5] = {1, 9, 9, 2, 3};
    const int64_t *ix64[2] = {r64, c64};
    const int32_t *ix32[2] = {r32, c32};
    expect(coo_assemble_arrays(2, shape, COO_F64, &o, 5, ix64, v5, COO_F64, in_dir("a64.hrry"), &s),
           COO_OK, "arrays");
    expect_true(s.contributions == 5 && s.skipped_negative == 2 && s.nnz == 3, "arrays summary");
    expect(coo_assemble_arrays_i32(2, shape, COO_F64, &o, 5, ix32, v5, COO_F64,
                                   in_dir("a32.hrry"), &s),
           COO_OK, "arrays_i32");
    expect_true(s.skipped_negative == 2, "arrays_i32 summary");
    const int64_t kr[3] = {0, 5, 2}, kc[3] = {1, 5, 2};
    const double kv[3] = {1, 2, 3};
    const int64_t *kix[2] = {kr, kc};
    expect(coo_assemble_arrays(2, shape, COO_F64, &d, 3, kix, kv, COO_F64, in_dir("ak.hrry"), &s),
           COO_OK, "arrays kept");
    expect_true(same_bytes(in_dir("a64.hrry"), in_dir("ak.hrry")), "arrays: the same bytes");
    expect_true(same_bytes(in_dir("a32.hrry"), in_dir("ak.hrry")), "arrays_i32: the same bytes");
    expect(coo_assemble_arrays(2, shape, COO_F64, &d, 5, ix64, v5, COO_F64, in_dir("bad.hrry"), &s),
           COO_ERR_INDEX, "arrays without the option");
    expect_true(strstr(coo_last_error(), "contribution 1: index -1 in dimension 0 is negative; to skip the contributions of negative (removed) indices") == coo_last_error(),
                "arrays: today's message");

    /* Plans take the option: one value per contribution, those with a
       negative index ignored, the values of coo_assemble_arrays. */
    coo_plan *pl = coo_plan_new(2, shape, COO_F64, &o, 5, ix64);
    expect_true(pl != NULL, "plan with skip_negative");
    uint64_t pn = 0, pnnz = 0;
    expect(coo_plan_contributions(pl, &pn), COO_OK, "plan contributions");
    expect(coo_plan_nnz(pl, &pnnz), COO_OK, "plan nnz");
    expect_true(pn == 5 && pnnz == 3, "plan sizes");
    coo_plan *pk = coo_plan_new(2, shape, COO_F64, &d, 3, kix);
    double got3[3], want3[3];
    expect(coo_plan_assemble(pl, v5, 5, got3, 3), COO_OK, "refill with skipped values");
    expect(coo_plan_assemble(pk, kv, 3, want3, 3), COO_OK, "refill of the kept");
    expect_true(memcmp(got3, want3, sizeof got3) == 0, "plan: the kept values");
    expect(coo_plan_assemble(pl, kv, 3, got3, 3), COO_ERR_ARGUMENT, "a value per contribution");
    coo_plan_free(pl);
    coo_plan_free(pk);
    expect_true(coo_plan_new(2, shape, COO_F64, &d, 5, ix64) == NULL, "plan without the option");

    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
