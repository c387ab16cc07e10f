/* Distributed assembly from C, run under mpirun by capi/tests/mpi.rs:
 * a chain of 2-node elements (element e joins nodes e and e+1 with weight
 * e+1) spread over the ranks round-robin. Checks each rank's band in
 * memory (finish_csr with PETSc-style local row counts), a plan recorded
 * from the pushes and its refill, a refill of the wrong length (every
 * rank errs), an int64 plan refilled exactly from int64 values, one
 * file per rank, and a builder freed unfinished on the last rank (every
 * other rank's finish returns COO_ERR_REMOTE). */
#define COO_ASSEMBLER_MPI
#include "check.h"
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define N 1000 /* nodes; N - 1 elements */

/* The exact matrix: K[i][i] = w(i-1) + w(i), K[i][i+1] = K[i+1][i] = -w(i). */
static double weight(int64_t e) { return (double)(e + 1); }
/* Element e's weight as an int64 no double holds (odd, beyond 2^53). */
static int64_t big(int64_t e) { return ((int64_t)1 << 53) + 1 + 2 * e; }
static double exact(int64_t i, int64_t j) {
    if (i == j)
        return (i > 0 ? weight(i - 1) : 0) + (i < N - 1 ? weight(i) : 0);
    return j == i + 1 ? -weight(i) : -weight(j);
}

static void push_chain(coo_dist_builder *b, int rank, int size, double scale) {
    for (int64_t e = rank; e < N - 1; e += size) {
        int64_t dofs[2] = {e, e + 1};
        double w = weight(e) * scale;
        double ke[4] = {w, -w, -w, w};
        expect(coo_dist_builder_push_element(b, 2, dofs, ke), COO_OK, "push_element");
    }
}

/* The band against the exact matrix, values times `scale`. */
static void check_band(const coo_band *band, double scale, const char *label) {
    const int32_t *ptr = band->row_ptr, *cols = band->cols;
    const double *v = band->values;
    int good = band->index_bits == 32 && ptr[0] == 0;
    for (uint64_t r = band->row_lo; good && r < band->row_hi; r++) {
        int64_t i = (int64_t)r, k = ptr[r - band->row_lo], end = ptr[r - band->row_lo + 1];
        int64_t want = (i > 0) + 1 + (i < N - 1);
        good = end - k == want;
        for (int64_t j = i > 0 ? i - 1 : i; good && k < end; k++, j++)
            good = cols[k] == j && v[k] == exact(i, j) * scale;
    }
    expect_true(good && (uint64_t)ptr[band->row_hi - band->row_lo] == band->nnz, label);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int comm = (int)MPI_Comm_c2f(MPI_COMM_WORLD);
    int64_t shape[2] = {N, N};
    coo_options o;
    coo_options_default(&o);
    o.memory_budget = 8u << 20;

    /* Bands by local row counts, as PETSc's MatSetSizes gives them. */
    int64_t local = N / size + (rank == size - 1 ? N % size : 0);
    coo_dist_builder *b = coo_dist_builder_new(comm, 2, shape, COO_F64, &o, local);
    expect_true(b != NULL, "coo_dist_builder_new");
    push_chain(b, rank, size, 1.0);
    coo_band *band = NULL;
    expect(coo_dist_builder_finish_csr(b, 32, &band), COO_OK, "finish_csr");
    expect_true(band->row_lo == (uint64_t)(rank * (N / size)) &&
                    band->row_hi - band->row_lo == (uint64_t)local,
                "finish_csr: the rows asked for");
    check_band(band, 1.0, "finish_csr: the exact band");
    coo_band_free(band);

    /* A plan recorded from the pushes; its refill with other values. */
    b = coo_dist_builder_new(comm, 2, shape, COO_F64, &o, -1);
    push_chain(b, rank, size, 1.0);
    coo_dist_plan *plan = NULL;
    expect(coo_dist_builder_finish_planned(b, 32, &band, &plan), COO_OK, "finish_planned");
    check_band(band, 1.0, "finish_planned: the exact band");
    uint64_t n = 0, nnz = 0, bytes = 0;
    expect(coo_dist_plan_info(plan, NULL, NULL, &nnz, &n, &bytes), COO_OK, "plan_info");
    expect_true(nnz == band->nnz && n == 4 * (uint64_t)((N - 1 - rank + size - 1) / size),
                "plan_info: entries and contributions");
    double *values = malloc(n * sizeof(double));
    uint64_t k = 0;
    for (int64_t e = rank; e < N - 1; e += size) {
        double w = weight(e) * 3.0;
        values[k++] = w, values[k++] = -w, values[k++] = -w, values[k++] = w;
    }
    expect(coo_dist_plan_refill(plan, n, values, band->values, band->nnz), COO_OK, "refill");
    check_band(band, 3.0, "refill: three times the band");
    /* The wrong count on the last rank: every rank errs. */
    size_t count = rank == size - 1 ? n - 1 : n;
    int st = coo_dist_plan_refill(plan, count, values, band->values, band->nnz);
    if (rank == size - 1) {
        expect(st, COO_ERR_ARGUMENT, "refill: short on this rank");
        expect_message("values for a plan of", "refill: names the counts");
    } else {
        expect(st, COO_ERR_REMOTE, "refill: short on another rank");
    }
    free(values);
    coo_band_free(band);
    coo_dist_plan_free(plan);

    /* An int64 plan refilled with int64 values beyond 2^53: exact, where
     * doubles would round them. Then a value type that is neither the
     * plan's nor COO_F64 on the last rank: every rank errs, none waits. */
    {
        uint64_t m = 4 * (uint64_t)((N - 1 - rank + size - 1) / size);
        int64_t *ri = malloc(m * 8), *ci = malloc(m * 8), *iv = malloc(m * 8);
        k = 0;
        for (int64_t e = rank; e < N - 1; e += size) {
            int64_t w = big(e);
            int64_t at[4][3] = {{e, e, w}, {e, e + 1, -w}, {e + 1, e, -w}, {e + 1, e + 1, w}};
            for (int q = 0; q < 4; q++, k++)
                ri[k] = at[q][0], ci[k] = at[q][1], iv[k] = at[q][2];
        }
        const int64_t *ix[2] = {ri, ci};
        coo_dist_plan *ip = coo_dist_plan_new(comm, 2, shape, COO_I64, &o, local, m, ix);
        expect_true(ip != NULL, "coo_dist_plan_new (int64)");
        uint64_t lo = 0, hi = 0, innz = 0;
        expect(coo_dist_plan_info(ip, &lo, &hi, &innz, NULL, NULL), COO_OK, "plan_info (int64)");
        int64_t *out = malloc(innz * 8);
        expect(coo_dist_plan_refill_typed(ip, m, iv, COO_I64, out, innz), COO_OK, "refill_typed");
        int good = 1;
        uint64_t q = 0;
        for (int64_t i = (int64_t)lo; good && i < (int64_t)hi; i++)
            for (int64_t j = i > 0 ? i - 1 : i; good && j <= i + 1 && j < N; j++, q++) {
                int64_t want = i == j ? (i > 0 ? big(i - 1) : 0) + (i < N - 1 ? big(i) : 0)
                                      : -big(i < j ? i : j);
                good = q < innz && out[q] == want;
            }
        expect_true(good && q == innz, "refill_typed: int64 sums exact beyond 2^53");
        st = coo_dist_plan_refill_typed(ip, m, iv, rank == size - 1 ? COO_F32 : COO_I64, out, innz);
        if (rank == size - 1) {
            expect(st, COO_ERR_ARGUMENT, "refill_typed: a value type the plan does not take");
            expect_message("COO_F64", "refill_typed: names the types it takes");
        } else {
            expect(st, COO_ERR_REMOTE, "refill_typed: a bad value type on another rank");
        }
        free(ri), free(ci), free(iv), free(out);
        coo_dist_plan_free(ip);
    }

    /* One plain file per rank at a path of its own: the band, its rows
     * numbered from the band's first. */
    {
        char path[64];
        snprintf(path, sizeof path, "part%d_of%d.hrry", rank, size);
        b = coo_dist_builder_new(comm, 2, shape, COO_F64, &o, local);
        push_chain(b, rank, size, 1.0);
        expect(coo_dist_builder_finish_per_rank(b, path), COO_OK, "finish_per_rank");
        int64_t lo = rank * (N / size), want = 0;
        for (int64_t i = lo; i < lo + local; i++)
            want += (i > 0) + 1 + (i < N - 1);
        coo_file *f = coo_file_open(path);
        coo_info info;
        expect_true(f != NULL && coo_file_info(f, &info) == COO_OK && info.rank == 2 &&
                        info.shape[0] == local && info.shape[1] == N && info.nnz == want,
                    "finish_per_rank: this rank's band in its file");
        if (f)
            coo_file_close(f);
        remove(path);
    }

    /* An error path on the last rank frees its builder unfinished. */
    b = coo_dist_builder_new(comm, 2, shape, COO_F64, &o, -1);
    push_chain(b, rank, size, 1.0);
    if (rank == size - 1) {
        coo_dist_builder_free(b);
    } else {
        expect(coo_dist_builder_finish(b, "never.hrry"), COO_ERR_REMOTE, "finish after a free elsewhere");
        expect_message("freed before finish", "names why");
    }
    /* A negative index: refused at the push, reported to every rank. */
    b = coo_dist_builder_new(comm, 2, shape, COO_F64, &o, -1);
    int64_t bad[2] = {-1, 0};
    if (rank == 0)
        expect(coo_dist_builder_push(b, bad, 1.0), COO_ERR_INDEX, "a negative index");
    st = coo_dist_builder_finish_csr(b, 64, &band);
    expect_true(st != COO_OK, "finish after a bad push fails on every rank");

    MPI_Finalize();
    if (failures == 0)
        printf("dist rank %d OK\n", rank);
    return failures != 0;
}
