/* Plans (issue 24): plan the contributions of a finite-element mesh once
 * (COO, CSR, CSC; from arrays of int64 and int32, and from element dofs),
 * refill with two sets of values, and check that every refill is bit for
 * bit the values coo_assemble_arrays writes for the same contributions,
 * that the plan's structure is the file's, that a saved and loaded plan
 * refills the same, that refills from several threads at once on one
 * plan agree, and that each error gives its documented status and
 * message; and plans a builder records, refilled by pushing values.
 * Usage: plan DIR (an empty directory).
 * Prints one line per check ("ok ..." or "FAIL ..."), `name: key=value`
 * lines for tests/programs.rs, and "N failed" at the end; exits 1 if a
 * check failed. tests/programs.rs replays the mesh and the values. */
/* pthreads are POSIX, beyond -std=c11. */
#define _POSIX_C_SOURCE 200809L
#include <coo_assembler.h>
#include "check.h"
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An NX x NX grid of bilinear quadrilaterals: 4 dofs per element, 16
 * contributions each, every interior coupling given by up to 4 elements. */
#define NX 80
#define NODES ((NX + 1) * (NX + 1))
#define ELEMENTS (NX * NX)
#define K 4
#define N ((size_t)ELEMENTS * K * K)
#define REFILLERS 4

static char dir[4096];

static int64_t dofs[ELEMENTS * K];
static int32_t dofs32[ELEMENTS * K];
static int64_t rows[N], cols[N];
static int32_t rows32[N], cols32[N];
static double vals[2][N];
static const int64_t shape[2] = {NODES, NODES};

/* A handle call that returns NULL on error: its status. */
static int made(const void *handle) { return handle != NULL ? COO_OK : coo_last_status(); }

static const char *in_dir(const char *name) {
    static char buf[8][4200];
    static int next = 0;
    char *b = buf[next++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", dir, name);
    return b;
}

static uint64_t next(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s;
}

/* A double of either sign, 53 random bits scaled by 2^-73 .. 2^-33: the
 * plain sums of these round (in an order of their own), the exact sums
 * the library makes do not. */
static double value(uint64_t *s) {
    uint64_t r = next(s);
    int e = (int)((r >> 3) % 41) - 20;
    double v = ldexp((double)(r >> 11), e - 53);
    return (r & 1) ? -v : v;
}

static void make_mesh(void) {
    for (int j = 0; j < NX; j++)
        for (int i = 0; i < NX; i++) {
            int e = j * NX + i;
            int64_t n0 = (int64_t)j * (NX + 1) + i;
            int64_t quad[K] = {n0, n0 + 1, n0 + NX + 2, n0 + NX + 1};
            for (int a = 0; a < K; a++) {
                dofs[e * K + a] = quad[a];
                dofs32[e * K + a] = (int32_t)quad[a];
            }
        }
    for (size_t c = 0; c < N; c++) {
        size_t e = c / (K * K), a = (c % (K * K)) / K, b = c % K;
        rows[c] = dofs[e * K + a];
        cols[c] = dofs[e * K + b];
        rows32[c] = (int32_t)rows[c];
        cols32[c] = (int32_t)cols[c];
    }
    for (int r = 0; r < 2; r++) {
        uint64_t s = 1000 + (uint64_t)r;
        for (size_t c = 0; c < N; c++)
            vals[r][c] = value(&s);
    }
}

/* Every entry of a file's tensor in storage order: (row, column) pairs
 * and values, malloc'd. 0 if the file cannot be read. */
static int read_file(const char *path, uint64_t *nnz, int64_t **idx, double **v) {
    coo_file *f = coo_file_open(path);
    coo_info info;
    if (f == NULL || coo_file_info(f, &info) != COO_OK || info.rank != 2) {
        coo_file_close(f);
        return 0;
    }
    *nnz = info.nnz;
    *idx = malloc(sizeof(int64_t) * 2 * (info.nnz + 1));
    *v = malloc(sizeof(double) * (info.nnz + 1));
    size_t got = 0;
    int ok = coo_file_read_entries(f, 0, (size_t)info.nnz, *idx, *v, &got) == COO_OK &&
             got == info.nnz;
    coo_file_close(f);
    return ok;
}

/* A plan's structure as (row, column) pairs in storage order, malloc'd. */
static int64_t *plan_coords(const coo_plan *p, const coo_plan_details *info) {
    int64_t *ind = malloc(sizeof(int64_t) * (info->indices_len + 1));
    int64_t *ptr = malloc(sizeof(int64_t) * (info->pointers_len + 1));
    int64_t *out = malloc(sizeof(int64_t) * 2 * (info->nnz + 1));
    int status = coo_plan_structure(p, ind, (size_t)info->indices_len,
                                    info->layout == COO_LAYOUT_COO ? NULL : ptr,
                                    (size_t)info->pointers_len);
    if (status != COO_OK) {
        free(out);
        out = NULL;
    } else if (info->layout == COO_LAYOUT_COO) {
        memcpy(out, ind, sizeof(int64_t) * 2 * info->nnz);
    } else {
        int major = info->layout == COO_LAYOUT_CSC;
        for (uint64_t m = 0; m + 1 < info->pointers_len; m++)
            for (int64_t e = ptr[m]; e < ptr[m + 1]; e++) {
                out[2 * e + major] = (int64_t)m;
                out[2 * e + 1 - major] = ind[e];
            }
    }
    free(ind);
    free(ptr);
    return out;
}

static coo_options options(int layout) {
    coo_options o;
    coo_options_default(&o);
    o.threads = 2;
    o.layout = layout;
    return o;
}

/* The file coo_assemble_arrays writes for round r's values, read back. */
static int arrays_file(const char *name, int layout, int r, uint64_t *nnz, int64_t **idx,
                       double **v) {
    char label[256];
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.%d.hrry", dir, name, r);
    coo_options o = options(layout);
    const int64_t *dims[2] = {rows, cols};
    snprintf(label, sizeof label, "%s: coo_assemble_arrays, values %d", name, r);
    expect(coo_assemble_arrays(2, shape, COO_F64, &o, N, dims, vals[r], COO_F64, path, NULL),
           COO_OK, label);
    return read_file(path, nnz, idx, v);
}

/* Refill round r's values with `p` into a new array (NULL on error). */
static double *refill(const coo_plan *p, uint64_t nnz, int r, const char *label) {
    double *out = malloc(sizeof(double) * (nnz + 1));
    int status = coo_plan_assemble(p, vals[r], N, out, (size_t)nnz);
    expect(status, COO_OK, label);
    if (status != COO_OK) {
        free(out);
        return NULL;
    }
    return out;
}

typedef struct {
    const coo_plan *plan;
    uint64_t nnz;
    int round;
    double *out;
    int status;
} refiller;

static void *refill_thread(void *arg) {
    refiller *j = arg;
    for (int rep = 0; rep < 3 && j->status == COO_OK; rep++)
        j->status = coo_plan_assemble(j->plan, vals[j->round], N, j->out, (size_t)j->nnz);
    return NULL;
}

/* One layout: plan, two refills against coo_assemble_arrays, the
 * structure against the file's, refill in place, several threads at
 * once, save and load. */
static void layout_checks(const char *name, int layout) {
    char label[256];
    coo_options o = options(layout);
    const int64_t *dims[2] = {rows, cols};
    coo_plan *p = coo_plan_new(2, shape, COO_F64, &o, N, dims);
    snprintf(label, sizeof label, "%s: coo_plan_new", name);
    expect(made(p), COO_OK, label);
    if (p == NULL)
        return;
    coo_plan_details info;
    snprintf(label, sizeof label, "%s: coo_plan_info", name);
    expect(coo_plan_info(p, &info), COO_OK, label);
    uint64_t nnz = 0, contributions = 0;
    snprintf(label, sizeof label, "%s: coo_plan_nnz", name);
    expect(coo_plan_nnz(p, &nnz), COO_OK, label);
    snprintf(label, sizeof label, "%s: coo_plan_contributions", name);
    expect(coo_plan_contributions(p, &contributions), COO_OK, label);
    snprintf(label, sizeof label, "%s: the info agrees with the queries and the arguments", name);
    expect_true(info.nnz == nnz && info.contributions == N && contributions == N &&
                    info.rank == 2 && info.shape[0] == NODES && info.shape[1] == NODES &&
                    info.shape[2] == 0 && info.dtype == COO_F64 && (int)info.layout == layout &&
                    info.memory_bytes > 0,
                label);
    snprintf(label, sizeof label, "%s: the structure's lengths", name);
    expect_true(layout == COO_LAYOUT_COO
                    ? info.indices_len == 2 * nnz && info.pointers_len == 0
                    : info.indices_len == nnz && info.pointers_len == NODES + 1,
                label);
    printf("%s: nnz=%llu contributions=%llu memory_bytes=%llu digest=%llu\n", name,
           (unsigned long long)nnz, (unsigned long long)contributions,
           (unsigned long long)info.memory_bytes, (unsigned long long)info.digest);

    int64_t *coords = plan_coords(p, &info);
    snprintf(label, sizeof label, "%s: coo_plan_structure", name);
    expect_true(coords != NULL, label);
    double *out[2] = {NULL, NULL}, *want[2] = {NULL, NULL};
    for (int r = 0; r < 2; r++) {
        uint64_t fnnz = 0;
        int64_t *fidx = NULL;
        snprintf(label, sizeof label, "%s: refill %d", name, r);
        out[r] = refill(p, nnz, r, label);
        snprintf(label, sizeof label, "%s: the file of values %d reads back", name, r);
        expect_true(arrays_file(name, layout, r, &fnnz, &fidx, &want[r]), label);
        snprintf(label, sizeof label, "%s: refill %d has the file's %llu entries", name, r,
                 (unsigned long long)fnnz);
        expect_true(fnnz == nnz, label);
        if (out[r] == NULL || fnnz != nnz || coords == NULL) {
            free(fidx);
            continue;
        }
        snprintf(label, sizeof label,
                 "%s: refill %d is bit for bit what coo_assemble_arrays wrote", name, r);
        expect_true(memcmp(out[r], want[r], sizeof(double) * nnz) == 0, label);
        snprintf(label, sizeof label, "%s: the plan's structure is the file's (values %d)", name,
                 r);
        expect_true(memcmp(coords, fidx, sizeof(int64_t) * 2 * nnz) == 0, label);
        free(fidx);
    }
    if (out[0] != NULL && out[1] != NULL && want[0] != NULL && want[1] != NULL) {
        snprintf(label, sizeof label, "%s: the two refills differ", name);
        expect_true(memcmp(out[0], out[1], sizeof(double) * nnz) != 0, label);
        /* Refill in place: values 0 over the result of values 1. */
        snprintf(label, sizeof label, "%s: refill 0 in place over refill 1", name);
        expect(coo_plan_assemble(p, vals[0], N, out[1], (size_t)nnz), COO_OK, label);
        snprintf(label, sizeof label, "%s: ... overwrites every entry", name);
        expect_true(memcmp(out[1], want[0], sizeof(double) * nnz) == 0, label);

        /* Several threads refill from the one plan at once. */
        pthread_t th[REFILLERS];
        refiller jobs[REFILLERS];
        for (int t = 0; t < REFILLERS; t++) {
            jobs[t] = (refiller){p, nnz, t % 2, malloc(sizeof(double) * (nnz + 1)), COO_OK};
            pthread_create(&th[t], NULL, refill_thread, &jobs[t]);
        }
        int all = 1;
        for (int t = 0; t < REFILLERS; t++) {
            pthread_join(th[t], NULL);
            all = all && jobs[t].status == COO_OK &&
                  memcmp(jobs[t].out, want[t % 2], sizeof(double) * nnz) == 0;
            free(jobs[t].out);
        }
        snprintf(label, sizeof label, "%s: %d threads refilling at once get the same bits", name,
                 REFILLERS);
        expect_true(all, label);

        /* Save, load, refill: the same. */
        char path[4200];
        snprintf(path, sizeof path, "%s/%s.plan.hrry", dir, name);
        snprintf(label, sizeof label, "%s: coo_plan_save", name);
        expect(coo_plan_save(p, path), COO_OK, label);
        coo_plan *q = coo_plan_load(path);
        snprintf(label, sizeof label, "%s: coo_plan_load", name);
        expect(made(q), COO_OK, label);
        if (q != NULL) {
            coo_plan_details qi;
            expect(coo_plan_info(q, &qi), COO_OK, "loaded: coo_plan_info");
            snprintf(label, sizeof label, "%s: the loaded plan's info is the saved one's", name);
            expect_true(qi.nnz == info.nnz && qi.contributions == info.contributions &&
                            qi.digest == info.digest && qi.layout == info.layout &&
                            qi.dtype == info.dtype && qi.rank == 2 &&
                            qi.shape[0] == NODES && qi.shape[1] == NODES &&
                            qi.indices_len == info.indices_len &&
                            qi.pointers_len == info.pointers_len,
                        label);
            int64_t *qc = plan_coords(q, &qi);
            snprintf(label, sizeof label, "%s: the loaded plan's structure is the saved one's",
                     name);
            expect_true(qc != NULL && coords != NULL &&
                            memcmp(qc, coords, sizeof(int64_t) * 2 * nnz) == 0,
                        label);
            free(qc);
            snprintf(label, sizeof label, "%s: refill 1 with the loaded plan", name);
            double *qo = refill(q, nnz, 1, label);
            snprintf(label, sizeof label, "%s: ... is bit for bit the file's", name);
            expect_true(qo != NULL && memcmp(qo, want[1], sizeof(double) * nnz) == 0, label);
            free(qo);
            coo_plan_free(q);
        }
    }
    for (int r = 0; r < 2; r++) {
        free(out[r]);
        free(want[r]);
    }
    free(coords);
    coo_plan_free(p);
}

/* The other ways to plan the same coordinates give the same plan: int32
 * arrays, element dofs (int64 and int32), one thread. */
static void other_ways(void) {
    coo_options o = options(COO_LAYOUT_CSR);
    const int64_t *dims[2] = {rows, cols};
    const int32_t *dims32[2] = {rows32, cols32};
    coo_plan *ref = coo_plan_new(2, shape, COO_F64, &o, N, dims);
    expect(made(ref), COO_OK, "csr reference plan");
    if (ref == NULL)
        return;
    coo_plan_details ri;
    coo_plan_info(ref, &ri);
    double *want = refill(ref, ri.nnz, 0, "csr reference refill");
    coo_options one = o;
    one.threads = 1;
    struct {
        const char *name;
        coo_plan *plan;
        int same_digest;
    } ways[5] = {
        {"coo_plan_new_i32", coo_plan_new_i32(2, shape, COO_F64, &o, N, dims32), 1},
        {"coo_plan_elements", coo_plan_elements(shape, COO_F64, &o, ELEMENTS, K, dofs), 1},
        {"coo_plan_elements_i32", coo_plan_elements_i32(shape, COO_F64, &o, ELEMENTS, K, dofs32),
         1},
        {"coo_plan_elements, one thread", coo_plan_elements(shape, COO_F64, &one, ELEMENTS, K, dofs),
         0},
        {"coo_plan_new, one thread", coo_plan_new(2, shape, COO_F64, &one, N, dims), 0},
    };
    for (int w = 0; w < 5; w++) {
        char label[256];
        snprintf(label, sizeof label, "%s: planned", ways[w].name);
        expect(made(ways[w].plan), COO_OK, label);
        if (ways[w].plan == NULL)
            continue;
        coo_plan_details wi;
        coo_plan_info(ways[w].plan, &wi);
        snprintf(label, sizeof label, "%s: the reference's nnz, contributions, structure sizes",
                 ways[w].name);
        expect_true(wi.nnz == ri.nnz && wi.contributions == ri.contributions &&
                        wi.indices_len == ri.indices_len && wi.pointers_len == ri.pointers_len &&
                        wi.layout == COO_LAYOUT_CSR,
                    label);
        if (ways[w].same_digest) {
            snprintf(label, sizeof label, "%s: the reference's digest", ways[w].name);
            expect_true(wi.digest == ri.digest, label);
        }
        int64_t *a = plan_coords(ref, &ri), *b = plan_coords(ways[w].plan, &wi);
        snprintf(label, sizeof label, "%s: the reference's structure", ways[w].name);
        expect_true(a != NULL && b != NULL && memcmp(a, b, sizeof(int64_t) * 2 * ri.nnz) == 0,
                    label);
        free(a);
        free(b);
        snprintf(label, sizeof label, "%s: refill", ways[w].name);
        double *got = refill(ways[w].plan, wi.nnz, 0, label);
        snprintf(label, sizeof label, "%s: the reference's refill, bit for bit", ways[w].name);
        expect_true(got != NULL && want != NULL &&
                        memcmp(got, want, sizeof(double) * ri.nnz) == 0,
                    label);
        free(got);
        coo_plan_free(ways[w].plan);
    }
    free(want);
    coo_plan_free(ref);
}

/* Plans of other element types: coo_plan_assemble refuses them,
 * coo_plan_assemble_typed refills them from doubles (bit for bit
 * coo_assemble_arrays' file) or from values of their own type. */
static void typed_checks(void) {
    coo_options o = options(COO_LAYOUT_CSR);
    const int64_t *dims[2] = {rows, cols};
    uint64_t fnnz = 0;
    int64_t *fidx = NULL;
    double *fv = NULL;

    coo_plan *p = coo_plan_new(2, shape, COO_F32, &o, N, dims);
    expect(made(p), COO_OK, "f32: coo_plan_new");
    if (p != NULL) {
        coo_plan_details info;
        coo_plan_info(p, &info);
        expect_true(info.dtype == COO_F32, "f32: the plan's dtype");
        double *d = malloc(sizeof(double) * (info.nnz + 1));
        expect(coo_plan_assemble(p, vals[0], N, d, (size_t)info.nnz), COO_ERR_ARGUMENT,
               "f32: coo_plan_assemble refuses a plan that is not f64");
        expect_message("coo_plan_assemble_typed", "f32: the message names the typed refill");
        free(d);
        float *out = malloc(sizeof(float) * (info.nnz + 1));
        expect(coo_plan_assemble_typed(p, vals[0], COO_F64, N, out, (size_t)info.nnz), COO_OK,
               "f32: typed refill from doubles");
        char path[4200];
        snprintf(path, sizeof path, "%s/f32.hrry", dir);
        expect(coo_assemble_arrays(2, shape, COO_F32, &o, N, dims, vals[0], COO_F64, path, NULL),
               COO_OK, "f32: coo_assemble_arrays");
        int same = read_file(path, &fnnz, &fidx, &fv) && fnnz == info.nnz;
        for (uint64_t e = 0; same && e < fnnz; e++)
            same = (double)out[e] == fv[e];
        expect_true(same, "f32: the refill from doubles is the file's values");
        /* floats of their own: the refill of the same numbers as doubles. */
        float *fl = malloc(sizeof(float) * N);
        double *as_d = malloc(sizeof(double) * N);
        for (size_t c = 0; c < N; c++) {
            fl[c] = (float)vals[1][c];
            as_d[c] = (double)fl[c];
        }
        float *o1 = malloc(sizeof(float) * (info.nnz + 1));
        float *o2 = malloc(sizeof(float) * (info.nnz + 1));
        expect(coo_plan_assemble_typed(p, fl, COO_F32, N, o1, (size_t)info.nnz), COO_OK,
               "f32: typed refill from floats");
        expect(coo_plan_assemble_typed(p, as_d, COO_F64, N, o2, (size_t)info.nnz), COO_OK,
               "f32: typed refill from the same numbers as doubles");
        expect_true(memcmp(o1, o2, sizeof(float) * info.nnz) == 0,
                    "f32: floats and doubles of the same numbers refill the same bits");
        expect(coo_plan_assemble_typed(p, vals[0], COO_I64, N, out, (size_t)info.nnz),
               COO_ERR_ARGUMENT, "f32: a value type neither f64 nor the plan's");
        expect_message("value_type i64", "f32: the message names the value type");
        expect(coo_plan_assemble_typed(p, vals[0], (coo_dtype)99, N, out, (size_t)info.nnz),
               COO_ERR_ARGUMENT, "f32: value type 99");
        free(fl);
        free(as_d);
        free(o1);
        free(o2);
        free(out);
        free(fidx);
        free(fv);
        coo_plan_free(p);
    }

    /* An i32 plan: integral doubles, their file; 0.5 refused. */
    double *ints = malloc(sizeof(double) * N);
    for (size_t c = 0; c < N; c++)
        ints[c] = (double)((int64_t)(c * 7 % 23) - 11);
    p = coo_plan_new(2, shape, COO_I32, &o, N, dims);
    expect(made(p), COO_OK, "i32: coo_plan_new");
    if (p != NULL) {
        coo_plan_details info;
        coo_plan_info(p, &info);
        int32_t *out = malloc(sizeof(int32_t) * (info.nnz + 1));
        expect(coo_plan_assemble_typed(p, ints, COO_F64, N, out, (size_t)info.nnz), COO_OK,
               "i32: typed refill from doubles");
        char path[4200];
        snprintf(path, sizeof path, "%s/i32.hrry", dir);
        expect(coo_assemble_arrays(2, shape, COO_I32, &o, N, dims, ints, COO_F64, path, NULL),
               COO_OK, "i32: coo_assemble_arrays");
        fidx = NULL;
        fv = NULL;
        int same = read_file(path, &fnnz, &fidx, &fv) && fnnz == info.nnz;
        for (uint64_t e = 0; same && e < fnnz; e++)
            same = (double)out[e] == fv[e];
        expect_true(same, "i32: the refill is the file's values");
        int32_t *native = malloc(sizeof(int32_t) * N);
        for (size_t c = 0; c < N; c++)
            native[c] = (int32_t)ints[c];
        int32_t *o2 = malloc(sizeof(int32_t) * (info.nnz + 1));
        expect(coo_plan_assemble_typed(p, native, COO_I32, N, o2, (size_t)info.nnz), COO_OK,
               "i32: typed refill from int32_t");
        expect_true(memcmp(out, o2, sizeof(int32_t) * info.nnz) == 0,
                    "i32: int32_t values refill what the same doubles do");
        ints[77] = 0.5;
        expect(coo_plan_assemble_typed(p, ints, COO_F64, N, out, (size_t)info.nnz), COO_ERR_VALUE,
               "i32: 0.5 is refused");
        expect_message("contribution 77", "i32: the message names the contribution");
        free(native);
        free(o2);
        free(out);
        free(fidx);
        free(fv);
        coo_plan_free(p);
    }
    free(ints);

    /* An i8 plan whose sum does not fit: COO_ERR_OVERFLOW. */
    int64_t r8[3] = {0, 1, 1}, c8[3] = {0, 1, 1};
    const int64_t *d8[2] = {r8, c8};
    int64_t s8[2] = {2, 2};
    p = coo_plan_new(2, s8, COO_I8, NULL, 3, d8);
    expect(made(p), COO_OK, "i8: coo_plan_new");
    if (p != NULL) {
        int8_t out[2];
        double big[3] = {1, 100, 100};
        expect(coo_plan_assemble_typed(p, big, COO_F64, 3, out, 2), COO_ERR_OVERFLOW,
               "i8: 100 + 100 overflows");
        expect_message("coordinate [1, 1]", "i8: the message names the coordinate");
        double fine[3] = {-128, 27, 100};
        expect(coo_plan_assemble_typed(p, fine, COO_F64, 3, out, 2), COO_OK, "i8: 27 + 100");
        expect_true(out[0] == -128 && out[1] == 127, "i8: the sums");
        coo_plan_free(p);
    }

    /* A bool plan: (0,0) twice, (1,0) twice, (1,1) once; any true makes a
     * true, from bytes or from doubles that are 0 or 1. */
    int64_t rb[5] = {0, 1, 0, 1, 1}, cb[5] = {0, 1, 0, 0, 0};
    const int64_t *db[2] = {rb, cb};
    p = coo_plan_new(2, s8, COO_BOOL, NULL, 5, db);
    expect(made(p), COO_OK, "bool: coo_plan_new");
    if (p != NULL) {
        uint8_t out[3] = {7, 7, 7};
        uint8_t bytes[5] = {0, 1, 1, 0, 0};
        expect(coo_plan_assemble_typed(p, bytes, COO_BOOL, 5, out, 3), COO_OK, "bool: from bytes");
        expect_true(out[0] == 1 && out[1] == 0 && out[2] == 1, "bool: any true is true");
        double doubles[5] = {0, 0, 0, 1, 0};
        expect(coo_plan_assemble_typed(p, doubles, COO_F64, 5, out, 3), COO_OK,
               "bool: from doubles");
        expect_true(out[0] == 0 && out[1] == 1 && out[2] == 0, "bool: the doubles' entries");
        doubles[1] = 0.5;
        expect(coo_plan_assemble_typed(p, doubles, COO_F64, 5, out, 3), COO_ERR_VALUE,
               "bool: 0.5 is no bool");
        coo_plan_free(p);
    }
}

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

static void spit(const char *path, const unsigned char *b, long len) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(b, 1, (size_t)len, f);
        fclose(f);
    }
}

static void error_checks(void) {
    int64_t r[5] = {0, 1, 2, 2, 0}, c[5] = {0, 1, 2, 2, 0};
    const int64_t *d[2] = {r, c};
    int64_t s[2] = {3, 3};
    coo_options o = options(COO_LAYOUT_CSR);
    coo_plan *p;

    /* Negative and out-of-range indices, dofs. */
    r[3] = -3;
    expect(made(coo_plan_new(2, s, COO_F64, &o, 5, d)), COO_ERR_INDEX, "negative index");
    expect_message("contribution 3: index -3 in dimension 0 is negative",
                   "the message names the contribution and the dimension");
    int32_t r32[5] = {0, 1, 2, 2, 0}, c32[5] = {0, 1, 2, -1, 0};
    const int32_t *d32[2] = {r32, c32};
    r32[1] = 7; /* out of range, before the negative one: the negative is named */
    expect(made(coo_plan_new_i32(2, s, COO_F64, &o, 5, d32)), COO_ERR_INDEX,
           "negative int32 index");
    expect_message("contribution 3: index -1 in dimension 1 is negative",
                   "the int32 message names the contribution and the dimension");
    r[3] = 3;
    expect(made(coo_plan_new(2, s, COO_F64, &o, 5, d)), COO_ERR_INDEX, "index past its extent");
    expect_message("contribution 3: index 3 in dimension 0 is out of range",
                   "the message names the contribution");
    r[3] = 2;
    int64_t bad_dofs[6] = {0, 1, 2, 1, -5, 0};
    expect(made(coo_plan_elements(s, COO_F64, &o, 2, 3, bad_dofs)), COO_ERR_INDEX,
           "negative dof");
    expect_message("dofs[1, 1] = -5 is negative; to skip", "the message names element and dof");
    bad_dofs[4] = 9;
    expect(made(coo_plan_elements(s, COO_F64, &o, 2, 3, bad_dofs)), COO_ERR_INDEX,
           "dof past its extent");
    expect_message("dofs[1, 1] = 9 is out of range (extent", "the message names the dof");
    expect(made(coo_plan_elements(s, COO_F64, &o, 2, 0, bad_dofs)), COO_ERR_ARGUMENT, "k = 0");

    /* Arguments, options, budget. */
    expect(made(coo_plan_new(2, NULL, COO_F64, &o, 5, d)), COO_ERR_NULL, "NULL shape");
    expect(made(coo_plan_new(2, s, COO_F64, &o, 5, NULL)), COO_ERR_NULL, "NULL indices");
    const int64_t *half_null[2] = {r, NULL};
    expect(made(coo_plan_new(2, s, COO_F64, &o, 5, half_null)), COO_ERR_NULL, "NULL indices[1]");
    expect_message("indices[1]", "the message names the array");
    expect(made(coo_plan_new(0, s, COO_F64, &o, 5, d)), COO_ERR_ARGUMENT, "rank 0");
    expect(made(coo_plan_new(2, s, (coo_dtype)42, &o, 5, d)), COO_ERR_ARGUMENT, "dtype 42");
    coo_options dz = o;
    dz.drop_zeros = true;
    expect(made(coo_plan_new(2, s, COO_F64, &dz, 5, d)), COO_ERR_ARGUMENT, "drop_zeros");
    expect_message("drop_zeros", "the message gives the reason");
    coo_options tiny = o;
    tiny.memory_budget = 100;
    expect(made(coo_plan_new(2, s, COO_F64, &tiny, 5, d)), COO_ERR_BUDGET, "a 100-byte budget");
    tiny.memory_budget = 1 << 20;
    const int64_t *big[2] = {rows, cols};
    expect(made(coo_plan_new(2, shape, COO_F64, &tiny, N, big)), COO_ERR_BUDGET,
           "the mesh under 1 MiB");
    expect_message("budget", "the message speaks of the budget");
    coo_options dup = o;
    dup.duplicates = COO_DUP_ERROR;
    expect(made(coo_plan_new(2, s, COO_F64, &dup, 5, d)), COO_ERR_DUPLICATE,
           "a duplicate under COO_DUP_ERROR");
    coo_options rank3 = o; /* CSR of a rank-3 tensor */
    int64_t s3[3] = {3, 3, 3};
    const int64_t *d3[3] = {r, c, c};
    expect(made(coo_plan_new(3, s3, COO_F64, &rank3, 5, d3)), COO_ERR_ARGUMENT, "CSR of rank 3");

    /* An empty plan is a plan. */
    p = coo_plan_new(2, s, COO_F64, &o, 0, NULL);
    expect(made(p), COO_OK, "an empty plan");
    if (p != NULL) {
        uint64_t nnz = 99;
        coo_plan_nnz(p, &nnz);
        expect_true(nnz == 0, "an empty plan has no entries");
        int64_t ptr[4] = {9, 9, 9, 9};
        expect(coo_plan_structure(p, NULL, 0, ptr, 4), COO_OK, "an empty plan's structure");
        expect_true(ptr[0] == 0 && ptr[3] == 0, "... its pointers are 0");
        expect(coo_plan_assemble(p, NULL, 0, NULL, 0), COO_OK, "an empty refill");
        coo_plan_free(p);
    }

    /* Refills: lengths, NULL, overlap, the non-finite policy. */
    p = coo_plan_new(2, s, COO_F64, &o, 5, d);
    expect(made(p), COO_OK, "a small plan");
    if (p == NULL)
        return;
    double v[5] = {1, 2, 3, 4, 5}, out[3];
    expect(coo_plan_assemble(p, v, 5, out, 3), COO_OK, "small refill");
    expect_true(out[0] == 6 && out[1] == 2 && out[2] == 7, "small refill's sums");
    expect(coo_plan_assemble(p, v, 4, out, 3), COO_ERR_ARGUMENT, "wrong n");
    expect_message("values: n = 4, the plan takes 5 contributions", "the message names n");
    expect(coo_plan_assemble(p, v, 5, out, 4), COO_ERR_ARGUMENT, "wrong nnz");
    expect_message("out: nnz = 4, the plan's result has 3 entries", "the message names nnz");
    expect(coo_plan_assemble(p, NULL, 5, out, 3), COO_ERR_NULL, "NULL values");
    expect(coo_plan_assemble(p, v, 5, NULL, 3), COO_ERR_NULL, "NULL out");
    expect(coo_plan_assemble(NULL, v, 5, out, 3), COO_ERR_NULL, "NULL plan");
    expect_message("plan is NULL", "the message names the plan");
    double both[8] = {1, 2, 3, 4, 5, 0, 0, 0};
    expect(coo_plan_assemble(p, both, 5, both + 4, 3), COO_ERR_ARGUMENT, "out overlaps values");
    int64_t ind[3], ptr[4];
    expect(coo_plan_structure(p, ind, 2, ptr, 4), COO_ERR_ARGUMENT, "wrong indices_len");
    expect_message("indices_len = 2", "the message names the indices");
    expect(coo_plan_structure(p, ind, 3, ptr, 3), COO_ERR_ARGUMENT, "wrong pointers_len");
    expect_message("pointers_len = 3", "the message names the pointers");
    expect(coo_plan_structure(p, ind, 3, ptr, 4), COO_OK, "small structure");
    expect_true(ptr[0] == 0 && ptr[1] == 1 && ptr[2] == 2 && ptr[3] == 3 && ind[0] == 0 &&
                    ind[1] == 1 && ind[2] == 2,
                "small structure's CSR arrays");
    expect(coo_plan_nnz(p, NULL), COO_ERR_NULL, "NULL out of coo_plan_nnz");
    coo_plan_free(p);
    coo_options nan = o;
    nan.non_finite = COO_REJECT_NAN;
    p = coo_plan_new(2, s, COO_F64, &nan, 5, d);
    expect(made(p), COO_OK, "a plan refusing NaN");
    if (p != NULL) {
        v[2] = NAN;
        expect(coo_plan_assemble(p, v, 5, out, 3), COO_ERR_VALUE, "NaN under COO_REJECT_NAN");
        expect_message("contribution 2", "the message names the contribution");
        coo_plan_free(p);
    }

    /* Freed handles: COO_ERR_STATE; a second free is a no-op. */
    p = coo_plan_new(2, s, COO_F64, &o, 5, d);
    coo_plan_free(p);
    v[2] = 3;
    expect(coo_plan_assemble(p, v, 5, out, 3), COO_ERR_STATE, "refill of a freed plan");
    expect_message("not a live plan", "the message says why");
    uint64_t n;
    expect(coo_plan_nnz(p, &n), COO_ERR_STATE, "nnz of a freed plan");
    expect(coo_plan_save(p, in_dir("freed.plan.hrry")), COO_ERR_STATE, "save of a freed plan");
    coo_plan_free(p);
    coo_plan_free(NULL);
    expect_true(1, "a second free and a NULL free are no-ops");

    /* Files: save errors, damaged, truncated, foreign and missing files. */
    p = coo_plan_new(2, s, COO_F64, &o, 5, d);
    expect(coo_plan_save(p, in_dir("no/such/dir/p.hrry")), COO_ERR_IO, "save into a missing folder");
    expect(coo_plan_save(p, NULL), COO_ERR_NULL, "save to a NULL path");
    expect(coo_plan_save(NULL, in_dir("x.hrry")), COO_ERR_NULL, "save of a NULL plan");
    char good[4200];
    snprintf(good, sizeof good, "%s", in_dir("small.plan.hrry"));
    expect(coo_plan_save(p, good), COO_OK, "save the small plan");
    coo_plan_free(p);
    long len = 0;
    unsigned char *bytes = slurp(good, &len);
    expect_true(bytes != NULL && len > 64, "the plan file reads");
    if (bytes != NULL && len > 64) {
        /* The structure is a CSR tensor of its own; the positions are a
         * dense vector, which the sparse reader refuses by name. */
        coo_file *f = coo_file_open_tensor(good, "pattern");
        coo_info fi;
        expect(made(f), COO_OK, "the plan file opens as a Hurray file");
        expect(coo_file_info(f, &fi), COO_OK, "its pattern tensor");
        expect_true(fi.nnz == 3, "the pattern holds one entry per entry of the result");
        coo_file_close(f);
        expect(made(coo_file_open_tensor(good, "order")), COO_ERR_UNSUPPORTED,
               "the order vector is dense, not served as sparse");
        /* Damage anywhere: the load refuses the file (COO_ERR_INVALID_FILE,
         * or COO_ERR_UNSUPPORTED for a version field that now reads as a
         * later one), or, where the bytes changed carry nothing the plan
         * is made of (statistics, padding, names), gives the same plan:
         * the same refill, structure, shape, type and layout. Never
         * another plan. (The digest is the exception: the plan's KV
         * entries have no checksum of their own, so a changed digest
         * loads; such loads are counted, not failed.) */
        coo_plan *orig = coo_plan_load(good);
        coo_plan_details od;
        memset(&od, 0, sizeof od);
        expect(coo_plan_info(orig, &od), COO_OK, "the saved plan's details");
        coo_plan_free(orig);
        unsigned char *copy = malloc((size_t)len);
        int flips = 0, refused = 0, unsupported = 0, same = 0, digest = 0, wrong = 0;
        for (long at = 0; at < len; at += 13) {
            memcpy(copy, bytes, (size_t)len);
            copy[at] ^= 0x5a;
            spit(in_dir("damaged.plan.hrry"), copy, len);
            coo_plan *q = coo_plan_load(in_dir("damaged.plan.hrry"));
            flips++;
            if (q == NULL && coo_last_status() == COO_ERR_INVALID_FILE) {
                refused++;
            } else if (q == NULL && coo_last_status() == COO_ERR_UNSUPPORTED) {
                unsupported++;
            } else {
                double w[5] = {1, 2, 3, 4, 5}, got[3] = {0, 0, 0};
                int64_t gi[3] = {-1, -1, -1}, gp[4] = {-1, -1, -1, -1};
                coo_plan_details qd;
                memset(&qd, 0, sizeof qd);
                if (q != NULL && coo_plan_info(q, &qd) == COO_OK && qd.nnz == od.nnz &&
                    qd.contributions == od.contributions && qd.dtype == od.dtype &&
                    qd.layout == od.layout && qd.shape[0] == od.shape[0] &&
                    qd.shape[1] == od.shape[1] && coo_plan_assemble(q, w, 5, got, 3) == COO_OK &&
                    coo_plan_structure(q, gi, 3, gp, 4) == COO_OK && got[0] == 6 &&
                    got[1] == 2 && got[2] == 7 && gi[0] == 0 && gi[1] == 1 && gi[2] == 2 &&
                    gp[0] == 0 && gp[1] == 1 && gp[2] == 2 && gp[3] == 3) {
                    if (qd.digest == od.digest) {
                        same++;
                    } else {
                        digest++;
                        printf("note: flip at byte %ld: the same plan with another digest\n", at);
                    }
                } else {
                    wrong++;
                    printf("FAIL flip at byte %ld: %s %s\n", at, coo_status_name(made(q)),
                           q ? "(another plan)" : coo_last_error());
                }
            }
            coo_plan_free(q);
        }
        printf("damaged: flips=%d invalid_file=%d unsupported=%d same_plan=%d other_digest=%d "
               "wrong=%d\n",
               flips, refused, unsupported, same, digest, wrong);
        expect_true(wrong == 0, "no damaged plan file loads as another plan");
        expect_true(refused > flips / 2, "most damage is refused as COO_ERR_INVALID_FILE");
        memcpy(copy, bytes, (size_t)len);
        copy[len / 2] ^= 0xff;
        spit(in_dir("damaged.plan.hrry"), copy, len);
        expect(made(coo_plan_load(in_dir("damaged.plan.hrry"))), COO_ERR_INVALID_FILE,
               "a damaged plan file");
        spit(in_dir("truncated.plan.hrry"), bytes, len / 2);
        expect(made(coo_plan_load(in_dir("truncated.plan.hrry"))), COO_ERR_INVALID_FILE,
               "a truncated plan file");
        free(copy);
    }
    free(bytes);
    spit(in_dir("text.plan.hrry"), (const unsigned char *)"not a plan\n", 11);
    expect(made(coo_plan_load(in_dir("text.plan.hrry"))), COO_ERR_INVALID_FILE, "a text file");
    expect(coo_assemble_arrays(2, s, COO_F64, &o, 5, d, v, COO_F64, in_dir("matrix.hrry"), NULL),
           COO_OK, "a matrix file");
    expect(made(coo_plan_load(in_dir("matrix.hrry"))), COO_ERR_INVALID_FILE,
           "a matrix file is not a plan");
    expect_message("not a plan file", "the message says so");
    expect(made(coo_plan_load(in_dir("missing.plan.hrry"))), COO_ERR_IO, "a missing file");
    expect(made(coo_plan_load(NULL)), COO_ERR_NULL, "a NULL path");
    p = coo_plan_load(good);
    expect(made(p), COO_OK, "the good file still loads");
    if (p != NULL) {
        expect(coo_plan_assemble(p, v, 5, out, 3), COO_OK, "its refill");
        expect_true(out[0] == 6 && out[1] == 2 && out[2] == 7, "its sums");
        coo_plan_free(p);
    }
}

/* Writes `n` doubles to `path`; 0 on failure. */
static int write_values(const char *path, const double *v, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return 0;
    size_t w = fwrite(v, sizeof(double), n, f);
    return fclose(f) == 0 && w == n;
}

/* The entries of two files are the same, values bit for bit. */
static int same_entries(const char *a, const char *b) {
    uint64_t na = 0, nb = 0;
    int64_t *ia = NULL, *ib = NULL;
    double *va = NULL, *vb = NULL;
    int ok = read_file(a, &na, &ia, &va) && read_file(b, &nb, &ib, &vb) && na == nb && na > 0 &&
             memcmp(ia, ib, sizeof(int64_t) * 2 * na) == 0 &&
             memcmp(va, vb, sizeof(double) * na) == 0;
    free(ia);
    free(ib);
    free(va);
    free(vb);
    return ok;
}

/* Plans kept in parts on disk: coo_plan_file_new at a budget that cuts
 * the mesh's plan into parts, then coo_refill_file with a raw values
 * file: the entries coo_assemble_arrays writes, values bit for bit; and
 * the refusals. */
static void plan_file_checks(void) {
    coo_options o;
    coo_options_default(&o);
    o.layout = COO_LAYOUT_CSR;
    o.memory_budget = 8 << 20;
    const int64_t *dims[2] = {rows, cols};
    const int32_t *dims32[2] = {rows32, cols32};
    expect(coo_plan_file_new(2, shape, COO_F64, &o, N, dims, in_dir("parts.plan")), COO_OK,
           "plan file from int64 arrays");
    expect(coo_plan_file_new_i32(2, shape, COO_F64, &o, N, dims32, in_dir("parts32.plan")), COO_OK,
           "plan file from int32 arrays");
    for (int r = 0; r < 2; r++) {
        expect_true(write_values(in_dir("v.f64"), vals[r], N), "write the values file");
        expect(coo_assemble_arrays(2, shape, COO_F64, &o, N, dims, vals[r], COO_F64,
                                   in_dir("want.hrry"), NULL),
               COO_OK, "the assembly to compare with");
        const char *plans[2] = {"parts.plan", "parts32.plan"};
        for (int k = 0; k < 2; k++) {
            expect(coo_refill_file(in_dir(plans[k]), in_dir("v.f64"), in_dir("got.hrry"), &o),
                   COO_OK, "coo_refill_file");
            expect_true(same_entries(in_dir("got.hrry"), in_dir("want.hrry")),
                        "the refill's entries are the assembly's, bit for bit");
        }
    }
    /* An in-memory plan's file refills through the same call. */
    coo_plan *p = coo_plan_new(2, shape, COO_F64, &o, N, dims);
    expect(made(p), COO_OK, "an in-memory plan");
    expect(coo_plan_save(p, in_dir("mem.plan")), COO_OK, "saved");
    coo_plan_free(p);
    expect(coo_refill_file(in_dir("mem.plan"), in_dir("v.f64"), in_dir("got.hrry"), NULL), COO_OK,
           "coo_refill_file of a saved plan");
    expect_true(same_entries(in_dir("got.hrry"), in_dir("want.hrry")), "its entries too");

    expect_true(write_values(in_dir("short.f64"), vals[0], N - 1), "write a short values file");
    expect(coo_refill_file(in_dir("parts.plan"), in_dir("short.f64"), in_dir("bad.hrry"), &o),
           COO_ERR_ARGUMENT, "too few values");
    expect_message("values", "the message says what");
    expect(coo_refill_file(in_dir("parts.plan"), in_dir("v.f64"), in_dir("parts.plan"), &o),
           COO_ERR_ARGUMENT, "an output that is the plan");
    expect(coo_refill_file(in_dir("parts.plan"), in_dir("v.f64"), in_dir("v.f64"), &o),
           COO_ERR_ARGUMENT, "an output that is the values file");
    coo_options tiny = o;
    tiny.memory_budget = 1 << 20;
    expect(coo_refill_file(in_dir("parts.plan"), in_dir("v.f64"), in_dir("bad.hrry"), &tiny),
           COO_ERR_BUDGET, "a budget below the largest part's need");
    expect_message("at least", "the message gives the minimum");
    expect(coo_refill_file(NULL, in_dir("v.f64"), in_dir("bad.hrry"), &o), COO_ERR_NULL,
           "a NULL plan path");
    expect(coo_refill_file(in_dir("no-such.plan"), in_dir("v.f64"), in_dir("bad.hrry"), &o),
           COO_ERR_IO, "a missing plan file");
    FILE *f = fopen(in_dir("bad.hrry"), "rb");
    expect_true(f == NULL, "no output is left by a refused refill");
    if (f != NULL)
        fclose(f);
    const int64_t small[2] = {10, 10};
    expect(coo_plan_file_new(2, small, COO_F64, &o, N, dims, in_dir("small.plan")), COO_ERR_INDEX,
           "a coordinate past the shape");
    expect(coo_plan_file_new(2, shape, COO_F64, &o, N, dims, NULL), COO_ERR_NULL,
           "a NULL plan file path");
}

/* The bytes of two files are the same. */
static int same_file(const char *a, const char *b) {
    long la = 0, lb = 0;
    unsigned char *x = slurp(a, &la), *y = slurp(b, &lb);
    int same = x && y && la == lb && memcmp(x, y, (size_t)la) == 0;
    free(x);
    free(y);
    return same;
}

/* Push the mesh's elements with the values of set `r` into `b`. */
static int push_mesh(coo_builder *b, int r) {
    for (size_t e = 0; e < ELEMENTS; e++) {
        int s = coo_builder_push_element(b, K, dofs + e * K, vals[r] + e * K * K);
        if (s != COO_OK)
            return s;
    }
    return COO_OK;
}

/* A plan the builder records while it assembles (coo_builder_record_plan,
 * coo_builder_finish_recorded), refilled by pushing the values alone
 * (coo_refill_*): the builder's bytes for the same pushes; and the plan
 * file it writes out of core, refilled from a values file. */
static void recorded_checks(void) {
    coo_options o;
    coo_options_default(&o);
    o.layout = COO_LAYOUT_CSR;
    o.memory_budget = 16 << 20;
    coo_builder *b = coo_builder_new(2, shape, COO_F64, &o);
    expect(made(b), COO_OK, "a builder to record");
    expect(coo_builder_record_plan(b), COO_OK, "coo_builder_record_plan");
    expect(push_mesh(b, 0), COO_OK, "push the elements");
    coo_plan *p = NULL;
    expect(coo_builder_finish_recorded(b, in_dir("rec0.hrry"), NULL, &p, in_dir("rec.plan")),
           COO_OK, "coo_builder_finish_recorded");
    expect_true(p != NULL, "the recorded plan is handed over");
    uint64_t n = 0, nnz = 0;
    expect(coo_plan_contributions(p, &n), COO_OK, "its contributions");
    expect(coo_plan_nnz(p, &nnz), COO_OK, "its entries");
    expect_true(n == N, "one value per contribution pushed");

    /* The next step: the builder's file for the new values, and the refill. */
    coo_builder *b1 = coo_builder_new(2, shape, COO_F64, &o);
    expect(push_mesh(b1, 1), COO_OK, "push the new values");
    expect(coo_builder_finish(b1, in_dir("rec1.hrry"), NULL), COO_OK, "assemble them again");
    coo_refill *r = coo_refill_new(p);
    expect(made(r), COO_OK, "coo_refill_new");
    for (int round = 0; round < 2; round++) {
        for (size_t e = 0; e < ELEMENTS; e++)
            coo_refill_push(r, vals[1] + e * K * K, K * K);
        expect(coo_refill_write(r, in_dir("got.hrry")), COO_OK, "coo_refill_write");
        expect_true(same_file(in_dir("got.hrry"), in_dir("rec1.hrry")),
                    "the refill's file is the builder's, byte for byte");
    }
    double *got = malloc(sizeof(double) * nnz), *want = malloc(sizeof(double) * nnz);
    expect(coo_refill_push(r, vals[0], N), COO_OK, "push one step's values at once");
    expect(coo_refill_assemble(r, got, nnz), COO_OK, "coo_refill_assemble");
    expect(coo_plan_assemble(p, vals[0], N, want, nnz), COO_OK, "coo_plan_assemble");
    expect_true(got && want && memcmp(got, want, sizeof(double) * nnz) == 0,
                "the pushed refill is the array refill");
    free(got);
    free(want);

    /* The plan file, refilled from a values file. */
    expect_true(write_values(in_dir("v.f64"), vals[1], N), "write the values file");
    expect(coo_refill_file(in_dir("rec.plan"), in_dir("v.f64"), in_dir("got.hrry"), &o), COO_OK,
           "coo_refill_file of the recorded plan file");
    expect_true(same_file(in_dir("got.hrry"), in_dir("rec1.hrry")), "the builder's bytes again");

    /* Refusals. */
    expect(coo_refill_push(r, vals[0], N - 1), COO_OK, "push too few");
    expect(coo_refill_write(r, in_dir("bad.hrry")), COO_ERR_ARGUMENT, "a refill missing values");
    expect_message("values for a plan", "the message says how many");
    expect(coo_refill_push(r, vals[0], N + 1), COO_ERR_ARGUMENT, "more values than the plan takes");
    coo_refill_free(r);
    coo_refill_free(r);
    coo_plan_free(p);
    coo_builder *late = coo_builder_new(2, shape, COO_F64, &o);
    expect(push_mesh(late, 0), COO_OK, "push first");
    expect(coo_builder_record_plan(late), COO_ERR_ARGUMENT, "record_plan after a push");
    expect_message("before the first push", "the message says when");
    coo_plan *none = NULL;
    expect(coo_builder_finish_recorded(late, in_dir("late.hrry"), NULL, &none, NULL),
           COO_ERR_ARGUMENT, "finish_recorded of a builder that did not record");
    expect_true(none == NULL, "no plan");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: plan DIR\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    make_mesh();
    layout_checks("coo", COO_LAYOUT_COO);
    layout_checks("csr", COO_LAYOUT_CSR);
    layout_checks("csc", COO_LAYOUT_CSC);
    other_ways();
    typed_checks();
    error_checks();
    plan_file_checks();
    recorded_checks();
    printf("%d failed\n", failures);
    return failures != 0;
}
