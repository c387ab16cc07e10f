/* A complex matrix from the C API into PETSc built with complex scalars
 * (issue 22): one program linked against libcoo_assembler and Debian's
 * libpetsc_complex (PETSc 3.18, 32-bit PetscInt).
 *
 *   petsc_complex assemble K.hrry N   the 1D Helmholtz matrix of N linear
 *                                      elements on [0, 1] with our builder
 *   petsc_complex export K.hrry K.petsc   coo_file_export to PETSc binary
 *   petsc_complex check K.petsc N     MatLoad it, check every entry and
 *                                      a MatMult with a complex vector
 *
 * The problem: -u'' - k^2 c(x) u = f on [0, 1] with a lossy medium (c has
 * a positive imaginary part, a different value in every element) and the
 * absorbing (impedance) condition u' = i k u at x = 1, whose boundary term
 * -i k u v lands on the last diagonal entry. Element e (nodes e, e+1) gives
 *   diag = 1/h - k^2 c_e h/3,   off = -1/h - k^2 c_e h/6,
 * pushed as a 2x2 complex element matrix, so every interior diagonal entry
 * is the sum of two elements' contributions; the impedance term is one
 * more push. `check` computes what each entry must be from the node's
 * neighbouring elements (not by replaying the pushes): every entry is a
 * sum of at most two terms, so C's complex addition (each part rounded
 * once) is exactly the library's exact-then-rounded sum, and entries are
 * compared bit for bit. Prints one line per check and "N failed". */
#include <coo_assembler.h>
#include "check.h"
#include <petscmat.h>
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double WAVENUMBER = 7.0;

/* The medium's coefficient in element e: lossy, a new value per element. */
static double _Complex medium(int e) {
    return (1.0 + 0.03 * e) + 0.2 * I;
}

static double _Complex element_diag(int e, int n) {
    double h = 1.0 / n;
    return 1.0 / h - WAVENUMBER * WAVENUMBER * medium(e) * (h / 3.0);
}

static double _Complex element_off(int e, int n) {
    double h = 1.0 / n;
    return -1.0 / h - WAVENUMBER * WAVENUMBER * medium(e) * (h / 6.0);
}

/* Entry (i, j) of the assembled matrix; *stored says whether the pattern
 * has it (the tridiagonal band). */
static double _Complex expected(int i, int j, int n, int *stored) {
    *stored = abs(i - j) <= 1;
    if (!*stored)
        return 0.0;
    if (i != j)
        return element_off(i < j ? i : j, n);
    double _Complex sum = 0.0;
    if (i > 0)
        sum += element_diag(i - 1, n); /* the element on the left */
    if (i < n)
        sum += element_diag(i, n); /* the element on the right */
    if (i == n)
        sum += -WAVENUMBER * I; /* the impedance term at x = 1 */
    return sum;
}

static int assemble(const char *path, int n) {
    coo_options o;
    coo_options_default(&o);
    int64_t shape[2] = {n + 1, n + 1};
    coo_builder *b = coo_builder_new(2, shape, COO_C128, &o);
    if (!b) {
        printf("FAIL builder_new: %s\n", coo_last_error());
        return 1;
    }
    int status = COO_OK;
    for (int e = 0; e < n && status == COO_OK; e++) {
        int64_t dofs[2] = {e, e + 1};
        double _Complex ke[4] = {element_diag(e, n), element_off(e, n), element_off(e, n),
                                 element_diag(e, n)};
        status = coo_builder_push_element_complex(b, 2, dofs, (const double *)ke);
    }
    int64_t last[2] = {n, n};
    if (status == COO_OK)
        status = coo_builder_push_complex(b, last, 0.0, -WAVENUMBER);
    if (status != COO_OK) {
        printf("FAIL push: %s %s\n", coo_status_name(status), coo_last_error());
        coo_builder_free(b);
        return 1;
    }
    coo_summary s;
    status = coo_builder_finish(b, path, &s);
    if (status != COO_OK) {
        printf("FAIL finish: %s %s\n", coo_status_name(status), coo_last_error());
        return 1;
    }
    printf("contributions=%llu nnz=%llu\n", (unsigned long long)s.contributions,
           (unsigned long long)s.nnz);
    return 0;
}

/* The vector MatMult is checked with: complex, no two entries alike. */
static PetscScalar x_entry(int j, int n) {
    return (1.0 + j) + (0.5 - (double)j / n) * I;
}

static PetscErrorCode check(const char *path, int n) {
    Mat A;
    PetscViewer viewer;
    PetscCall(PetscViewerBinaryOpen(PETSC_COMM_SELF, path, FILE_MODE_READ, &viewer));
    PetscCall(MatCreate(PETSC_COMM_SELF, &A));
    PetscCall(MatSetType(A, MATSEQAIJ));
    PetscCall(MatLoad(A, viewer));
    PetscCall(PetscViewerDestroy(&viewer));

    PetscInt rows, cols;
    PetscCall(MatGetSize(A, &rows, &cols));
    printf("MatLoad: %d x %d\n", (int)rows, (int)cols);
    expect_true(rows == n + 1 && cols == n + 1, "size (N+1) x (N+1)");
    MatInfo info;
    PetscCall(MatGetInfo(A, MAT_LOCAL, &info));
    printf("nz_used=%.0f\n", info.nz_used);
    expect_true(info.nz_used == 3.0 * n + 1, "3N+1 stored entries");

    /* Every stored entry: in the band, in column order, bit for bit. */
    int wrong = 0, seen = 0;
    for (PetscInt i = 0; i < rows; i++) {
        PetscInt ncols;
        const PetscInt *c;
        const PetscScalar *v;
        PetscCall(MatGetRow(A, i, &ncols, &c, &v));
        int want_ncols = (i == 0 || i == n) ? 2 : 3;
        if (ncols != want_ncols) {
            printf("  row %d: %d entries, want %d\n", (int)i, (int)ncols, want_ncols);
            wrong++;
        }
        for (PetscInt k = 0; k < ncols; k++) {
            int stored;
            double _Complex want = expected((int)i, (int)c[k], n, &stored);
            int same = stored && PetscRealPart(v[k]) == creal(want) &&
                       PetscImaginaryPart(v[k]) == cimag(want) && (k == 0 || c[k] > c[k - 1]);
            if (!same) {
                printf("  (%d,%d) = %.17g%+.17gi, want %.17g%+.17gi%s\n", (int)i, (int)c[k],
                       PetscRealPart(v[k]), PetscImaginaryPart(v[k]), creal(want), cimag(want),
                       stored ? "" : " (not in the band)");
                wrong++;
            }
            seen++;
        }
        PetscCall(MatRestoreRow(A, i, &ncols, &c, &v));
    }
    printf("entries checked=%d wrong=%d\n", seen, wrong);
    expect_true(wrong == 0 && seen == 3 * n + 1, "every entry equals the expected sum bit for bit");
    PetscScalar corner;
    PetscInt ni = n;
    PetscCall(MatGetValues(A, 1, &ni, 1, &ni, &corner));
    printf("K[N,N]=%.17g%+.17gi\n", PetscRealPart(corner), PetscImaginaryPart(corner));
    expect_true(PetscImaginaryPart(corner) < -WAVENUMBER + 1e-12,
                "the impedance term is in the last diagonal entry");

    /* y = A x with a complex x, against the band product computed here.
     * Each y_i sums at most three complex products, so PETSc's result may
     * differ from ours only by the rounding of those few operations:
     * allowed 1e-14 times sum_j |A_ij| |x_j| (about 45 ulps of it). */
    Vec x, y;
    PetscCall(MatCreateVecs(A, &x, &y));
    for (PetscInt j = 0; j <= n; j++)
        PetscCall(VecSetValue(x, j, x_entry((int)j, n), INSERT_VALUES));
    PetscCall(VecAssemblyBegin(x));
    PetscCall(VecAssemblyEnd(x));
    PetscCall(MatMult(A, x, y));
    const PetscScalar *yv;
    PetscCall(VecGetArrayRead(y, &yv));
    double worst = 0.0;
    for (int i = 0; i <= n; i++) {
        double _Complex want = 0.0;
        double scale = 0.0;
        for (int j = i - 1; j <= i + 1; j++) {
            int stored;
            if (j < 0 || j > n)
                continue;
            double _Complex a = expected(i, j, n, &stored);
            want += a * x_entry(j, n);
            scale += cabs(a) * cabs(x_entry(j, n));
        }
        double err = cabs(yv[i] - want) / scale;
        if (err > worst)
            worst = err;
    }
    PetscCall(VecRestoreArrayRead(y, &yv));
    printf("MatMult: max |y - Ax| / (|A||x|) = %.3g\n", worst);
    expect_true(worst <= 1e-14, "MatMult with a complex x gives A x");
    PetscCall(VecDestroy(&x));
    PetscCall(VecDestroy(&y));
    PetscCall(MatDestroy(&A));
    return 0;
}

/* The C API's export: the open tensor to PETSc binary. */
static int export_petsc(const char *hrry, const char *petsc) {
    coo_file *f = coo_file_open(hrry);
    if (!f) {
        printf("FAIL open: %s\n", coo_last_error());
        return 1;
    }
    coo_export_options o;
    coo_export_options_default(&o);
    coo_export_summary s;
    expect(coo_file_export(f, petsc, "petsc", &o, &s), COO_OK, "export to petsc");
    printf("entries=%llu bytes=%llu\n", (unsigned long long)s.entries,
           (unsigned long long)s.bytes);
    /* A name outside the library's table is refused by name. */
    expect(coo_file_export(f, petsc, "harwell-boeing", NULL, NULL), COO_ERR_ARGUMENT,
           "unknown format");
    expect_message("harwell-boeing", "the message names the format");
    o.npz_layout = "diagonal";
    expect(coo_file_export(f, petsc, "npz", &o, NULL), COO_ERR_ARGUMENT, "unknown npz layout");
    coo_file_close(f);
    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "export") == 0)
        return export_petsc(argv[2], argv[3]);
    if (argc != 4 || (strcmp(argv[1], "assemble") != 0 && strcmp(argv[1], "check") != 0)) {
        fprintf(stderr, "usage: petsc_complex assemble K.hrry N | export K.hrry K.petsc | "
                        "check K.petsc N\n");
        return 2;
    }
    int n = atoi(argv[3]);
    if (n < 2) {
        fprintf(stderr, "N must be at least 2\n");
        return 2;
    }
    if (strcmp(argv[1], "assemble") == 0)
        return assemble(argv[2], n);

    /* PETSc's own arguments are not ours: initialise it with none. */
    int pargc = 1;
    char **pargv = argv;
    PetscCall(PetscInitialize(&pargc, &pargv, NULL, NULL));
    expect_true(sizeof(PetscScalar) == 2 * sizeof(double), "PetscScalar is complex double");
    PetscErrorCode ierr = check(argv[2], n);
    if (ierr) {
        printf("FAIL PETSc error %d\n", (int)ierr);
        failures++;
    }
    PetscCall(PetscFinalize());
    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
