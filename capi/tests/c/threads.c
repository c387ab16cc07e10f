/* Several threads push into one builder at once, each through its own
 * coo_pusher (created concurrently), with push, push_many and
 * push_element.
 * Usage: threads OUT.hrry THREADS PER_THREAD BUDGET_BYTES TEMP_DIR [PUSHERS]
 * With PUSHERS (any number, more than THREADS too) the main thread pushes
 * share 0 through the builder's own pusher and PUSHERS - 1 workers the
 * others, and all meet at a barrier halfway, holding what they pushed.
 * The contributions come from a per-thread LCG that tests/programs.rs
 * replays to check the file. */
/* pthread_barrier_t is POSIX, beyond -std=c11. */
#define _POSIX_C_SOURCE 200809L
#include <coo_assembler.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define EXTENT 300
#define BATCH 64

static coo_builder *builder;
static long per_thread;
static int use_barrier;
static pthread_barrier_t halfway;

static uint64_t next(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s;
}

typedef struct {
    int id;
    /* Push through the builder's own pusher (coo_builder_push*). */
    int own;
    int status;
    char message[512];
} job;

static void fail(job *j, int status) {
    j->status = status;
    snprintf(j->message, sizeof j->message, "%s", coo_last_error());
}

static int push1(job *j, coo_pusher *p, const int64_t *idx, double v) {
    return j->own ? coo_builder_push(builder, idx, v) : coo_pusher_push(p, idx, v);
}

static int push_n(job *j, coo_pusher *p, size_t n, const int64_t *idx, const double *v) {
    return j->own ? coo_builder_push_many(builder, n, idx, v) : coo_pusher_push_many(p, n, idx, v);
}

static int push_el(job *j, coo_pusher *p, size_t k, const int64_t *dofs, const double *ke) {
    return j->own ? coo_builder_push_element(builder, k, dofs, ke)
                  : coo_pusher_push_element(p, k, dofs, ke);
}

static void *work(void *arg) {
    job *j = arg;
    coo_pusher *p = NULL;
    if (!j->own && (p = coo_pusher_new(builder)) == NULL) {
        fail(j, coo_last_status());
        if (use_barrier)
            pthread_barrier_wait(&halfway);
        return NULL;
    }
    uint64_t s = 1000 + (uint64_t)j->id;
    int64_t batch_idx[2 * BATCH];
    double batch_val[BATCH];
    size_t in_batch = 0;
    int status = COO_OK;
    int waited = 0;
    for (long i = 0; i < per_thread && status == COO_OK; i++) {
        if (use_barrier && i == per_thread / 2) {
            /* Idle with a partial chunk while the others go on. */
            pthread_barrier_wait(&halfway);
            waited = 1;
        }
        uint64_t x = next(&s);
        int64_t r = (int64_t)((x >> 33) % EXTENT), c = (int64_t)((x >> 13) % EXTENT);
        double v = (double)((int64_t)((x >> 50) % 17) - 8) / 8.0;
        if (i % 3 == 0) {
            int64_t idx[2] = {r, c};
            status = push1(j, p, idx, v);
        } else if (i % 3 == 1) {
            batch_idx[2 * in_batch] = r;
            batch_idx[2 * in_batch + 1] = c;
            batch_val[in_batch++] = v;
            if (in_batch == BATCH) {
                status = push_n(j, p, in_batch, batch_idx, batch_val);
                in_batch = 0;
            }
        } else {
            int64_t dofs[2] = {r, c};
            double ke[4] = {v, 1.0, -1.0, v};
            status = push_el(j, p, 2, dofs, ke);
        }
    }
    if (use_barrier && !waited)
        pthread_barrier_wait(&halfway); /* an error before halfway: still meet */
    if (status == COO_OK && in_batch > 0)
        status = push_n(j, p, in_batch, batch_idx, batch_val);
    if (status != COO_OK)
        fail(j, status);
    coo_pusher_free(p);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: threads OUT THREADS PER_THREAD BUDGET TEMP_DIR [PUSHERS]\n");
        return 2;
    }
    int threads = atoi(argv[2]);
    /* Pushing threads: THREADS workers, or PUSHERS with the main thread. */
    int n = argc == 7 ? atoi(argv[6]) : threads;
    use_barrier = argc == 7;
    per_thread = atol(argv[3]);
    int64_t shape[2] = {EXTENT, EXTENT};
    coo_options opts;
    coo_options_default(&opts);
    opts.threads = (uint32_t)threads;
    opts.memory_budget = (uint64_t)atoll(argv[4]);
    opts.temp_dir = argv[5];
    builder = coo_builder_new(2, shape, COO_F64, &opts);
    if (builder == NULL) {
        fprintf(stderr, "coo_builder_new: %s\n", coo_last_error());
        return 1;
    }
    pthread_t tids[64];
    job jobs[64] = {{0}};
    if (n < 1 || n > 64)
        return 2;
    if (use_barrier && pthread_barrier_init(&halfway, NULL, (unsigned)n) != 0)
        return 1;
    int first = use_barrier ? 1 : 0; /* share 0 is the main thread's */
    for (int t = 0; t < n; t++) {
        jobs[t].id = t;
        jobs[t].own = t < first;
        if (t >= first && pthread_create(&tids[t], NULL, work, &jobs[t]) != 0)
            return 1;
    }
    if (first)
        work(&jobs[0]);
    int failed = 0;
    for (int t = 0; t < n; t++) {
        if (t >= first)
            pthread_join(tids[t], NULL);
        if (jobs[t].status != COO_OK) {
            fprintf(stderr, "thread %d: %s: %s\n", t, coo_status_name(jobs[t].status),
                    jobs[t].message);
            failed = 1;
        }
    }
    if (failed) {
        coo_builder_free(builder);
        return 1;
    }
    coo_summary s;
    if (coo_builder_finish(builder, argv[1], &s) != COO_OK) {
        fprintf(stderr, "coo_builder_finish: %s\n", coo_last_error());
        return 1;
    }
    printf("contributions=%llu nnz=%llu runs_spilled=%llu merge_passes=%llu "
           "peak_buffer_bytes=%llu\n",
           (unsigned long long)s.contributions, (unsigned long long)s.nnz,
           (unsigned long long)s.runs_spilled, (unsigned long long)s.merge_passes,
           (unsigned long long)s.peak_buffer_bytes);
    return 0;
}
