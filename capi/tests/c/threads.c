/* Several threads push into one builder at once, each through its own
 * coo_pusher (created concurrently), with push, push_many and
 * push_element. Usage: threads OUT.hrry THREADS PER_THREAD BUDGET_BYTES TEMP_DIR
 * The contributions come from a per-thread LCG that tests/programs.rs
 * replays to check the file. */
#include <coo_assembler.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define EXTENT 300
#define BATCH 64

static coo_builder *builder;
static long per_thread;

static uint64_t next(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s;
}

typedef struct {
    int id;
    int status;
    char message[512];
} job;

static void fail(job *j, int status) {
    j->status = status;
    snprintf(j->message, sizeof j->message, "%s", coo_last_error());
}

static void *work(void *arg) {
    job *j = arg;
    coo_pusher *p = coo_pusher_new(builder);
    if (p == NULL) {
        fail(j, coo_last_status());
        return NULL;
    }
    uint64_t s = 1000 + (uint64_t)j->id;
    int64_t batch_idx[2 * BATCH];
    double batch_val[BATCH];
    size_t in_batch = 0;
    int status = COO_OK;
    for (long i = 0; i < per_thread && status == COO_OK; i++) {
        uint64_t x = next(&s);
        int64_t r = (int64_t)((x >> 33) % EXTENT), c = (int64_t)((x >> 13) % EXTENT);
        double v = (double)((int64_t)((x >> 50) % 17) - 8) / 8.0;
        if (i % 3 == 0) {
            int64_t idx[2] = {r, c};
            status = coo_pusher_push(p, idx, v);
        } else if (i % 3 == 1) {
            batch_idx[2 * in_batch] = r;
            batch_idx[2 * in_batch + 1] = c;
            batch_val[in_batch++] = v;
            if (in_batch == BATCH) {
                status = coo_pusher_push_many(p, in_batch, batch_idx, batch_val);
                in_batch = 0;
            }
        } else {
            int64_t dofs[2] = {r, c};
            double ke[4] = {v, 1.0, -1.0, v};
            status = coo_pusher_push_element(p, 2, dofs, ke);
        }
    }
    if (status == COO_OK && in_batch > 0)
        status = coo_pusher_push_many(p, in_batch, batch_idx, batch_val);
    if (status != COO_OK)
        fail(j, status);
    coo_pusher_free(p);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: threads OUT THREADS PER_THREAD BUDGET TEMP_DIR\n");
        return 2;
    }
    int n = atoi(argv[2]);
    per_thread = atol(argv[3]);
    int64_t shape[2] = {EXTENT, EXTENT};
    coo_options opts;
    coo_options_default(&opts);
    opts.threads = (uint32_t)n;
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
    for (int t = 0; t < n; t++) {
        jobs[t].id = t;
        if (pthread_create(&tids[t], NULL, work, &jobs[t]) != 0)
            return 1;
    }
    int failed = 0;
    for (int t = 0; t < n; t++) {
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
    printf("contributions=%llu nnz=%llu runs_spilled=%llu merge_passes=%llu\n",
           (unsigned long long)s.contributions, (unsigned long long)s.nnz,
           (unsigned long long)s.runs_spilled, (unsigned long long)s.merge_passes);
    return 0;
}
