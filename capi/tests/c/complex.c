/* Complex values through the C API (issue 22): a complex128 tensor pushed
 * with every complex push call (builder and pusher, one value, many, an
 * element matrix; a real double too), each part summed exactly; read back
 * with coo_file_get_complex and coo_file_read_entries_complex, while the
 * real-only readers refuse to drop the imaginary part; a plan of the same
 * contributions refills them bit for bit; and a complex value
 * into a real tensor refused. C99 `double _Complex` arrays are the layout
 * the _many_ and _element_ calls read.
 * Usage: complex DIR. Prints one line per check and "N failed". */
#include <coo_assembler.h>
#include "check.h"
#include <complex.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: complex DIR\n");
        return 2;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/z.hrry", argv[1]);
    coo_options o;
    coo_options_default(&o);
    int64_t shape[2] = {3, 3};
    coo_builder *b = coo_builder_new(2, shape, COO_C128, &o);
    expect_true(b != NULL, "builder_new complex128");
    if (!b)
        return 1;
    int64_t i01[2] = {0, 1};
    /* Real part 1e16 + 1 - 1e16: 1 only when summed exactly. */
    expect(coo_builder_push_complex(b, i01, 1e16, 0.5), COO_OK, "push_complex");
    expect(coo_builder_push_complex(b, i01, 1.0, 0.25), COO_OK, "push_complex again");
    expect(coo_builder_push(b, i01, -1e16), COO_OK, "push a real double");
    double _Complex many[2] = {2.0 + 3.0 * I, -1.0 * I};
    int64_t idx[4] = {1, 1, 2, 0};
    expect(coo_builder_push_many_complex(b, 2, idx, (const double *)many), COO_OK,
           "push_many_complex");
    coo_pusher *p = coo_pusher_new(b);
    expect_true(p != NULL, "pusher_new");
    int64_t dofs[2] = {0, 2};
    /* Row-major: ke[a*k + b] goes to (dofs[a], dofs[b]). */
    double _Complex ke[4] = {1.0 + 1.0 * I, 2.0, 3.0 * I, 4.0 - 4.0 * I};
    expect(coo_pusher_push_element_complex(p, 2, dofs, (const double *)ke), COO_OK,
           "pusher_push_element_complex");
    int64_t i22[2] = {2, 2};
    expect(coo_pusher_push_complex(p, i22, 0.0, 1.0), COO_OK, "pusher_push_complex");
    expect(coo_pusher_push_many_complex(p, 1, i22, (const double *)many), COO_OK,
           "pusher_push_many_complex");
    coo_pusher_free(p);
    coo_summary s;
    expect(coo_builder_finish(b, path, &s), COO_OK, "finish");
    expect_true(s.contributions == 11 && s.nnz == 6, "summary: 11 contributions, 6 entries");

    coo_file *f = coo_file_open(path);
    expect_true(f != NULL, "open");
    if (!f)
        return 1;
    coo_info info;
    expect(coo_file_info(f, &info), COO_OK, "info");
    expect_true(info.dtype == COO_C128, "info: complex128");
    double re = -1, im = -1;
    expect(coo_file_get_complex(f, i01, &re, &im), COO_OK, "get_complex (0,1)");
    expect_true(re == 1.0 && im == 0.75, "(0,1) = 1 + 0.75i");
    double v;
    expect(coo_file_get(f, i01, &v), COO_ERR_UNSUPPORTED, "get refuses a complex tensor");
    expect_true(strstr(coo_last_error(), "coo_file_get_complex") != NULL,
                "the refusal names coo_file_get_complex");
    double one[1];
    size_t n = 0;
    expect(coo_file_read_entries(f, 0, 1, NULL, one, &n), COO_ERR_UNSUPPORTED,
           "read_entries refuses complex values");
    int64_t got_idx[12];
    double _Complex got[6];
    expect(coo_file_read_entries_complex(f, 0, 6, got_idx, (double *)got, &n), COO_OK,
           "read_entries_complex");
    expect_true(n == 6, "six entries");
    /* Storage order (row, column), the expected sums part by part. */
    const int64_t want_idx[12] = {0, 0, 0, 1, 0, 2, 1, 1, 2, 0, 2, 2};
    const double _Complex want[6] = {1.0 + 1.0 * I, 1.0 + 0.75 * I, 2.0,
                                     2.0 + 3.0 * I, 3.0 * I - 1.0 * I,
                                     4.0 - 4.0 * I + 1.0 * I + 2.0 + 3.0 * I};
    int same = 1;
    for (size_t k = 0; k < n && k < 6; k++) {
        same &= got_idx[2 * k] == want_idx[2 * k] && got_idx[2 * k + 1] == want_idx[2 * k + 1];
        same &= creal(got[k]) == creal(want[k]) && cimag(got[k]) == cimag(want[k]);
        printf("  (%lld,%lld) = %g%+gi\n", (long long)got_idx[2 * k],
               (long long)got_idx[2 * k + 1], creal(got[k]), cimag(got[k]));
    }
    expect_true(same, "entries are the exact sums of each part");
    coo_file_close(f);

    /* A plan of the same eleven contributions, in push order, refilled
     * with coo_plan_assemble_typed: the builder's values bit for bit. */
    const int64_t prow[11] = {0, 0, 0, 1, 2, 0, 0, 2, 2, 2, 2};
    const int64_t pcol[11] = {1, 1, 1, 1, 0, 0, 2, 0, 2, 2, 2};
    const double _Complex pv[11] = {1e16 + 0.5 * I, 1.0 + 0.25 * I, -1e16, 2.0 + 3.0 * I,
                                    -1.0 * I, 1.0 + 1.0 * I, 2.0, 3.0 * I, 4.0 - 4.0 * I,
                                    1.0 * I, 2.0 + 3.0 * I};
    const int64_t *pidx[2] = {prow, pcol};
    coo_options_default(&o);
    coo_plan *plan = coo_plan_new(2, shape, COO_C128, &o, 11, pidx);
    expect_true(plan != NULL, "plan_new complex128");
    if (plan) {
        uint64_t pnnz = 0;
        expect(coo_plan_nnz(plan, &pnnz), COO_OK, "plan_nnz");
        expect_true(pnnz == 6, "the plan has six entries");
        double _Complex refilled[6];
        expect(coo_plan_assemble_typed(plan, (const double *)pv, COO_C128, 11, (double *)refilled,
                                       6),
               COO_OK, "plan_assemble_typed complex128");
        expect_true(memcmp(refilled, got, sizeof refilled) == 0,
                    "the refill is the builder's values, bit for bit");
        /* Doubles go in as complex values with zero imaginary parts. */
        double reals[11];
        for (int k = 0; k < 11; k++)
            reals[k] = creal(pv[k]);
        expect(coo_plan_assemble_typed(plan, reals, COO_F64, 11, (double *)refilled, 6), COO_OK,
               "plan_assemble_typed from doubles");
        expect_true(creal(refilled[1]) == 1.0 && cimag(refilled[1]) == 0.0,
                    "(0,1) from doubles = 1 + 0i, summed exactly");
        expect(coo_plan_assemble(plan, reals, 11, reals, 6), COO_ERR_ARGUMENT,
               "plan_assemble (doubles out) refuses a complex plan");
        coo_plan_free(plan);
    }
    /* The same eleven contributions in one call, from double _Complex
     * arrays: the builder's entries. */
    char path2[4200];
    snprintf(path2, sizeof path2, "%s/z2.hrry", argv[1]);
    coo_summary s2;
    expect(coo_assemble_arrays(2, shape, COO_C128, &o, 11, pidx, pv, COO_C128, path2, &s2), COO_OK,
           "assemble_arrays complex128");
    coo_file *f2 = coo_file_open(path2);
    expect_true(f2 != NULL && s2.nnz == 6, "assemble_arrays: six entries");
    if (f2) {
        int64_t idx2[12];
        double _Complex got2[6];
        size_t n2 = 0;
        expect(coo_file_read_entries_complex(f2, 0, 6, idx2, (double *)got2, &n2), COO_OK,
               "read_entries_complex of assemble_arrays");
        expect_true(n2 == 6 && memcmp(idx2, got_idx, sizeof idx2) == 0 &&
                        memcmp(got2, got, sizeof got2) == 0,
                    "assemble_arrays gives the builder's entries, bit for bit");
        coo_file_close(f2);
    }
    expect(coo_assemble_arrays(2, shape, COO_F64, &o, 11, pidx, pv, COO_C128, path2, NULL),
           COO_ERR_ARGUMENT, "complex values into a float64 tensor are refused");
    o.duplicates = COO_DUP_MIN;
    expect_true(coo_plan_new(2, shape, COO_C128, &o, 11, pidx) == NULL,
                "a complex plan with duplicates=min is refused");
    coo_options_default(&o);

    /* The same eleven pushes through the one push of each handle,
     * coo_builder_push_values and coo_pusher_push_values (what the twelve
     * push functions call): the same entries. */
    coo_builder *u = coo_builder_new(2, shape, COO_C128, &o);
    expect_true(u != NULL, "builder_new for push_values");
    if (u) {
        double one_c[2] = {1e16, 0.5};
        expect(coo_builder_push_values(u, COO_PUSH_ONE, COO_VALUES_COMPLEX, 1, i01, one_c), COO_OK,
               "push_values one complex");
        double one_c2[2] = {1.0, 0.25};
        expect(coo_builder_push_values(u, COO_PUSH_ONE, COO_VALUES_COMPLEX, 1, i01, one_c2),
               COO_OK, "push_values one complex again");
        double one_r = -1e16;
        expect(coo_builder_push_values(u, COO_PUSH_ONE, COO_VALUES_REAL, 1, i01, &one_r), COO_OK,
               "push_values one real");
        expect(coo_builder_push_values(u, COO_PUSH_MANY, COO_VALUES_COMPLEX, 2, idx,
                                       (const double *)many),
               COO_OK, "push_values many complex");
        coo_pusher *q = coo_pusher_new(u);
        expect(coo_pusher_push_values(q, COO_PUSH_ELEMENT, COO_VALUES_COMPLEX, 2, dofs,
                                      (const double *)ke),
               COO_OK, "pusher_push_values element complex");
        double im1[2] = {0.0, 1.0};
        expect(coo_pusher_push_values(q, COO_PUSH_ONE, COO_VALUES_COMPLEX, 1, i22, im1), COO_OK,
               "pusher_push_values one complex");
        expect(coo_pusher_push_values(q, COO_PUSH_MANY, COO_VALUES_COMPLEX, 1, i22,
                                      (const double *)many),
               COO_OK, "pusher_push_values many complex");
        /* Misuse: unknown codes, n other than 1 for one contribution. */
        expect(coo_pusher_push_values(q, 7, COO_VALUES_REAL, 1, i22, &one_r), COO_ERR_ARGUMENT,
               "an unknown push form");
        expect_message("COO_PUSH_ELEMENT", "the message lists the forms");
        expect(coo_pusher_push_values(q, COO_PUSH_ONE, 9, 1, i22, &one_r), COO_ERR_ARGUMENT,
               "an unknown value kind");
        expect_message("COO_VALUES_COMPLEX", "the message lists the kinds");
        expect(coo_pusher_push_values(q, COO_PUSH_ONE, COO_VALUES_REAL, 2, i22, &one_r),
               COO_ERR_ARGUMENT, "COO_PUSH_ONE with n = 2");
        coo_pusher_free(q);
        char path3[4200];
        snprintf(path3, sizeof path3, "%s/z3.hrry", argv[1]);
        coo_summary s3;
        expect(coo_builder_finish(u, path3, &s3), COO_OK, "finish push_values");
        coo_file *f3 = coo_file_open(path3);
        expect_true(f3 != NULL && s3.contributions == 11 && s3.nnz == 6,
                    "push_values: 11 contributions, 6 entries");
        if (f3) {
            int64_t idx3[12];
            double _Complex got3[6];
            size_t n3 = 0;
            expect(coo_file_read_entries_complex(f3, 0, 6, idx3, (double *)got3, &n3), COO_OK,
                   "read_entries_complex of push_values");
            expect_true(n3 == 6 && memcmp(idx3, got_idx, sizeof idx3) == 0 &&
                            memcmp(got3, got, sizeof got3) == 0,
                        "push_values gives the twelve pushes' entries, bit for bit");
            coo_file_close(f3);
        }
    }

    /* A complex value into a real tensor. */
    coo_builder *r = coo_builder_new(2, shape, COO_F64, &o);
    expect(coo_builder_push_complex(r, i01, 1.0, 2.0), COO_ERR_VALUE,
           "push_complex into float64");
    coo_builder_free(r);
    /* min/max have no order on complex values. */
    o.duplicates = COO_DUP_MAX;
    expect_true(coo_builder_new(2, shape, COO_C64, &o) == NULL, "duplicates=max refused");
    printf("%d failed\n", failures);
    return failures != 0;
}
