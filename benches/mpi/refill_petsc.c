/* Issue 42's harness: distributed refill against PETSc's MatSetValuesCOO
 * and against a fresh distributed assembly, on the contributions of a 3D
 * Q1 Laplace problem (m^3 hexahedra, 64 contributions each, a coefficient
 * per element) split by elements: rank r computes the elements of its
 * contiguous block (z-slabs) and owns a contiguous block of rows, as a
 * domain-decomposed FE code does. One mode per process (benches/mpi/run.sh
 * alternates them):
 *
 *   fresh   coo_dist_builder_new + push_element per element + finish_csr
 *   ours    coo_dist_plan_new from the index arrays (planning), then REPS
 *           refills (coo_dist_plan_refill), checked bit for bit against a
 *           fresh assembly made after the clock stops
 *   petsc   MatSetPreallocationCOO (planning), then REPS MatSetValuesCOO
 *           (INSERT_VALUES), checked against a fresh assembly to 1e-12
 *
 * Prints one JSON line per rank: wall seconds (between barriers) and this
 * process's CPU seconds per phase, VmHWM, and the bytes of the arrays.
 *
 *   refill_petsc MODE M REPS BUDGET_MIB */
#define COO_ASSEMBLER_MPI
#include <coo_assembler.h>
#include <mpi.h>
#include <petscmat.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static long hwm_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

/* The Q1 Laplacian of a cube of side h: h/3 on the diagonal, 0 along an
 * edge, -h/12 across a face or the body. Corner a = (x, y, z) bits. */
static double kref(int a, int b) {
    int d = __builtin_popcount(a ^ b);
    return d == 0 ? 1.0 / 3.0 : d == 1 ? 0.0 : -1.0 / 12.0;
}

/* A coefficient per element and step: varies over orders of magnitude
 * so that inexact sums would show. */
static double coef(int64_t e, int step) {
    uint64_t x = (uint64_t)e * 0x9E3779B97F4A7C15ull + (uint64_t)step * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    return (1.0 + (double)(x % 1000) / 7.0) * (x & 1 ? 1e-3 : 1.0);
}

/* A fresh distributed assembly of contributions (rows, cols, v), one push
 * each: what the refills are checked against, after the clock stops. */
static coo_band *fresh(int comm, const int64_t *shape, const coo_options *o, int64_t local,
                       size_t n, const int64_t *rows, const int64_t *cols, const double *v) {
    coo_dist_builder *b = coo_dist_builder_new(comm, 2, shape, COO_F64, o, local);
    for (size_t q = 0; q < n; q++) {
        int64_t idx[2] = {rows[q], cols[q]};
        coo_dist_builder_push(b, idx, v[q]);
    }
    coo_band *band = NULL;
    if (coo_dist_builder_finish_csr(b, 32, &band) != COO_OK) {
        fprintf(stderr, "fresh: %s\n", coo_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return band;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    PetscInitializeNoArguments();
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 5) {
        if (rank == 0)
            fprintf(stderr, "usage: refill_petsc fresh|ours|petsc M REPS BUDGET_MIB\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *mode = argv[1];
    int64_t m = atoll(argv[2]);
    int reps = atoi(argv[3]);
    uint64_t budget = (uint64_t)atoll(argv[4]) << 20;
    int64_t np = m + 1, nodes = np * np * np, elems = m * m * m;
    int64_t e0 = elems * rank / size, e1 = elems * (rank + 1) / size;
    int64_t r0 = nodes * rank / size, r1 = nodes * (rank + 1) / size, local = r1 - r0;
    size_t n = (size_t)(e1 - e0) * 64;
    /* This rank's contributions, element by element (a, then b): rows RI,
     * columns CJ (not I and J: complex.h, which PETSc includes, defines I). */
    int64_t *RI = malloc(n * 8), *CJ = malloc(n * 8);
    double *V = malloc(n * 8), *V2 = malloc(n * 8);
    size_t k = 0;
    for (int64_t e = e0; e < e1; e++) {
        int64_t x = e % m, y = e / m % m, z = e / (m * m);
        int64_t dof[8];
        for (int a = 0; a < 8; a++)
            dof[a] = (x + (a & 1)) + np * ((y + (a >> 1 & 1)) + np * (z + (a >> 2)));
        double c1 = coef(e, 1), c2 = coef(e, 2);
        for (int a = 0; a < 8; a++)
            for (int b = 0; b < 8; b++, k++) {
                RI[k] = dof[a], CJ[k] = dof[b];
                V[k] = c1 * kref(a, b), V2[k] = c2 * kref(a, b);
            }
    }
    coo_options o;
    coo_options_default(&o);
    o.memory_budget = budget;
    o.threads = 1;
    /* FAST_SUMS=1: sums in arrival order, as PETSc sums (not exact). */
    const char *fast = getenv("FAST_SUMS");
    o.exact_sums = !(fast && fast[0] == '1');
    int comm = (int)MPI_Comm_c2f(MPI_COMM_WORLD);
    int64_t shape[2] = {nodes, nodes};
    double t_plan = 0, c_plan = 0, t_first = 0, c_first = 0, t_warm = 0, c_warm = 0;
    long hwm_plan = 0, hwm_end = 0;
    int exact = -1;
    double maxrel = -1;
    uint64_t plan_bytes = 0, nnz = 0;
    long base = hwm_kib();

#define CLOCK_START() MPI_Barrier(MPI_COMM_WORLD); double w_ = MPI_Wtime(), c_ = cpu()
#define CLOCK_STOP(tw, tc) tc = cpu() - c_; MPI_Barrier(MPI_COMM_WORLD); tw = MPI_Wtime() - w_

    if (!strcmp(mode, "fresh")) {
        coo_band *band = NULL;
        {
            CLOCK_START();
            coo_dist_builder *b = coo_dist_builder_new(comm, 2, shape, COO_F64, &o, local);
            double ke[64];
            int64_t dof[8];
            for (int64_t e = e0; e < e1; e++) {
                for (int q = 0; q < 64; q++)
                    ke[q] = V[(e - e0) * 64 + q];
                for (int a = 0; a < 8; a++)
                    dof[a] = RI[(e - e0) * 64 + a * 8];
                if (coo_dist_builder_push_element(b, 8, dof, ke) != COO_OK) {
                    fprintf(stderr, "push: %s\n", coo_last_error());
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
            }
            if (coo_dist_builder_finish_csr(b, 32, &band) != COO_OK) {
                fprintf(stderr, "finish: %s\n", coo_last_error());
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            CLOCK_STOP(t_first, c_first);
        }
        nnz = band->nnz;
        hwm_end = hwm_kib();
        coo_band_free(band);
    } else if (!strcmp(mode, "ours")) {
        const int64_t *ix[2] = {RI, CJ};
        coo_dist_plan *plan;
        {
            CLOCK_START();
            plan = coo_dist_plan_new(comm, 2, shape, COO_F64, &o, local, n, ix);
            if (!plan) {
                fprintf(stderr, "plan: %s\n", coo_last_error());
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            CLOCK_STOP(t_plan, c_plan);
        }
        hwm_plan = hwm_kib();
        coo_dist_plan_info(plan, NULL, NULL, &nnz, NULL, &plan_bytes);
        double *out = malloc(nnz * 8);
        for (int r = 0; r < reps; r++) {
            double tw, tc;
            CLOCK_START();
            coo_dist_plan_refill(plan, n, r % 2 ? V2 : V, out, nnz);
            CLOCK_STOP(tw, tc);
            if (r == 0)
                t_first = tw, c_first = tc;
            else
                t_warm += tw / (reps - 1), c_warm += tc / (reps - 1);
        }
        hwm_end = hwm_kib();
        /* Bit for bit a fresh assembly of the last values. */
        coo_band *band = fresh(comm, shape, &o, local, n, RI, CJ, (reps - 1) % 2 ? V2 : V);
        exact = band->nnz == nnz && !memcmp(band->values, out, nnz * 8);
        coo_band_free(band);
        free(out);
        coo_dist_plan_free(plan);
    } else {
        Mat A;
        PetscInt *Ip = malloc(n * sizeof(PetscInt)), *Jp = malloc(n * sizeof(PetscInt));
        for (size_t q = 0; q < n; q++)
            Ip[q] = (PetscInt)RI[q], Jp[q] = (PetscInt)CJ[q];
        MatCreate(PETSC_COMM_WORLD, &A);
        MatSetSizes(A, local, local, nodes, nodes);
        MatSetType(A, MATMPIAIJ);
        {
            CLOCK_START();
            MatSetPreallocationCOO(A, (PetscCount)n, Ip, Jp);
            CLOCK_STOP(t_plan, c_plan);
        }
        hwm_plan = hwm_kib();
        for (int r = 0; r < reps; r++) {
            double tw, tc;
            CLOCK_START();
            MatSetValuesCOO(A, r % 2 ? V2 : V, INSERT_VALUES);
            CLOCK_STOP(tw, tc);
            if (r == 0)
                t_first = tw, c_first = tc;
            else
                t_warm += tw / (reps - 1), c_warm += tc / (reps - 1);
        }
        hwm_end = hwm_kib();
        /* Against our fresh assembly of the last values, to 1e-12. */
        coo_band *band = fresh(comm, shape, &o, local, n, RI, CJ, (reps - 1) % 2 ? V2 : V);
        const int32_t *bp = band->row_ptr, *bc = band->cols;
        const double *bv = band->values;
        maxrel = 0;
        nnz = band->nnz;
        for (int64_t r = r0; r < r1; r++) {
            PetscInt ncols;
            const PetscInt *cols;
            const PetscScalar *vals;
            MatGetRow(A, (PetscInt)r, &ncols, &cols, &vals);
            int32_t p0 = bp[r - r0], p1 = bp[r - r0 + 1];
            if (ncols != p1 - p0)
                maxrel = 1e300;
            for (PetscInt c = 0; c < ncols && c < p1 - p0; c++) {
                double d = fabs(vals[c] - bv[p0 + c]), s = fabs(bv[p0 + c]) + 1e-300;
                if (cols[c] != bc[p0 + c])
                    maxrel = 1e300;
                else if (d / s > maxrel && fabs(bv[p0 + c]) > 1e-9)
                    maxrel = d / s;
            }
            MatRestoreRow(A, (PetscInt)r, &ncols, &cols, &vals);
        }
        coo_band_free(band);
        MatDestroy(&A);
        free(Ip), free(Jp);
    }
    printf("{\"mode\":\"%s\",\"ranks\":%d,\"rank\":%d,\"m\":%lld,\"contributions\":%zu,\"nnz\":%llu,"
           "\"plan_wall\":%.4f,\"plan_cpu\":%.4f,\"first_wall\":%.4f,\"first_cpu\":%.4f,"
           "\"warm_wall\":%.4f,\"warm_cpu\":%.4f,\"hwm_start_mib\":%.1f,\"hwm_plan_mib\":%.1f,"
           "\"hwm_end_mib\":%.1f,\"plan_bytes\":%llu,\"input_mib\":%.1f,\"exact\":%d,\"maxrel\":%.3g,"
           "\"exact_sums\":%d}\n",
           mode, size, rank, (long long)m, n, (unsigned long long)nnz, t_plan, c_plan, t_first,
           c_first, t_warm, c_warm, base / 1024.0, hwm_plan / 1024.0, hwm_end / 1024.0,
           (unsigned long long)plan_bytes, n * 32.0 / 1048576.0, exact, maxrel, (int)o.exact_sums);
    fflush(stdout);
    free(RI), free(CJ), free(V), free(V2);
    PetscFinalize();
    MPI_Finalize();
    return 0;
}
