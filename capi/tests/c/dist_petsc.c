/* The bands of a distributed assembly handed to PETSc, run under mpirun
 * by capi/tests/mpi.rs when PETSc is installed (pkg-config petsc): the
 * chain of 2-node elements of dist.c, assembled with PETSc's own row
 * ownership (PETSC_DECIDE's split, given as local_rows), each rank's band
 * given to MatCreateMPIAIJWithArrays; then MatMult of x = (1, 2, ..., N)
 * and every entry (MatGetRow) against the exact matrix. */
#define COO_ASSEMBLER_MPI
#include "check.h"
#include <petscmat.h>
#include <stdint.h>

#define N 1000

static double weight(int64_t e) { return (double)(e + 1); }
static double exact(int64_t i, int64_t j) {
    if (i == j)
        return (i > 0 ? weight(i - 1) : 0) + (i < N - 1 ? weight(i) : 0);
    if (j == i + 1 || i == j + 1)
        return -weight(i < j ? i : j);
    return 0;
}

int main(int argc, char **argv) {
    PetscInitialize(&argc, &argv, NULL, NULL);
    PetscMPIInt rank, size;
    MPI_Comm_rank(PETSC_COMM_WORLD, &rank);
    MPI_Comm_size(PETSC_COMM_WORLD, &size);
    if (sizeof(PetscInt) != 4 && sizeof(PetscInt) != 8)
        return 1;
    /* PETSc's own split of the rows. */
    PetscInt local = PETSC_DECIDE, global = N;
    PetscSplitOwnership(PETSC_COMM_WORLD, &local, &global);
    coo_options o;
    coo_options_default(&o);
    int64_t shape[2] = {N, N};
    coo_dist_builder *b =
        coo_dist_builder_new((int)MPI_Comm_c2f(PETSC_COMM_WORLD), 2, shape, COO_F64, &o, local);
    for (int64_t e = rank; e < N - 1; e += size) {
        int64_t dofs[2] = {e, e + 1};
        double w = weight(e), ke[4] = {w, -w, -w, w};
        coo_dist_builder_push_element(b, 2, dofs, ke);
    }
    coo_band *band = NULL;
    expect(coo_dist_builder_finish_csr(b, (int)sizeof(PetscInt) * 8, &band), COO_OK, "finish_csr");
    Mat A;
    MatCreateMPIAIJWithArrays(PETSC_COMM_WORLD, (PetscInt)(band->row_hi - band->row_lo),
                              PETSC_DECIDE, N, N, band->row_ptr, band->cols, band->values, &A);
    PetscInt lo, hi;
    MatGetOwnershipRange(A, &lo, &hi);
    expect_true(lo == (PetscInt)band->row_lo && hi == (PetscInt)band->row_hi,
                "PETSc's ownership is the band's");
    Vec x, y;
    MatCreateVecs(A, &x, &y);
    for (PetscInt i = lo; i < hi; i++)
        VecSetValue(x, i, (PetscScalar)(i + 1), INSERT_VALUES);
    VecAssemblyBegin(x);
    VecAssemblyEnd(x);
    MatMult(A, x, y);
    const PetscScalar *yv;
    VecGetArrayRead(y, &yv);
    int good = 1;
    for (PetscInt i = lo; i < hi; i++) {
        double want = 0;
        for (int64_t j = i > 0 ? i - 1 : 0; j <= i + 1 && j < N; j++)
            want += exact(i, j) * (double)(j + 1);
        good = good && yv[i - lo] == want;
    }
    VecRestoreArrayRead(y, &yv);
    expect_true(good, "MatMult of the bands is the exact product");
    good = 1;
    for (PetscInt i = lo; i < hi; i++) {
        PetscInt nc;
        const PetscInt *cols;
        const PetscScalar *vals;
        MatGetRow(A, i, &nc, &cols, &vals);
        good = good && nc == (i > 0) + 1 + (i < N - 1);
        for (PetscInt c = 0; c < nc; c++)
            good = good && vals[c] == exact(i, cols[c]);
        MatRestoreRow(A, i, &nc, &cols, &vals);
    }
    expect_true(good, "every entry PETSc holds is the exact matrix's");
    coo_band_free(band);
    VecDestroy(&x);
    VecDestroy(&y);
    MatDestroy(&A);
    PetscFinalize();
    if (failures == 0)
        printf("dist rank %d OK\n", rank);
    return failures != 0;
}
