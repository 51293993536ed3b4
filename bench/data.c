/* bench/data.c - is vescale.h's data loader (vs_data_*) on the critical path?

   Writes token shards (8 files of 2^22 tokens, 64 MiB, into a temporary folder),
   then for DP 1 and DP 8 (8 rank threads, each with its own loader reading its
   rows, as 8 ranks of a node would) draws batches of B = 512 rows x T = 1024
   tokens (shuffled: every row a random window of a random file) behind a
   modelled step: each rank sleeps S ms a step (the step's compute and
   communication), then asks for the next batch. Reported per configuration, over
   every rank's steps:
     read    the median time to read one rank's rows of a batch with no thread
             (vs_data_desc.prefetch -1: vs_data_next reads, all on the critical path)
     wait    the median time vs_data_next waited with the read-ahead thread
             (prefetch 2) behind a step of S ms, and wait / S
   The loader is off the critical path when wait / S is near 0 (the read is
   hidden behind the step). Files come from the page cache here (just written);
   a cold disk makes the reads slower, which the thread hides as long as they
   fit in S.

   bench_data [--steps N] [--step-ms S]...  (default 100 steps, S = 5 and 20) */
#define VESCALE_IMPLEMENTATION
#include "../vescale.h"
#include "bench_util.h"

#include <pthread.h>

enum { NFILES = 8, FILE_TOKENS = 1 << 22, B = 512, T = 1024, MAXSTEPS = 1000, MAXDP = 8 };

static char DIR_[256], PATTERN[300];
static int STEPS = 100;

typedef struct rank_arg {
    int dp, rank, prefetch;
    double step_ms;
    double wait[MAXSTEPS]; // per step, seconds
    int failed;
} rank_arg;

static void* rank_main(void* p)
{
    rank_arg* a = (rank_arg*)p;
    vs_data_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.files = PATTERN, dd.batch = B, dd.seq_len = T, dd.dp_size = a->dp, dd.dp_rank = a->rank;
    dd.shuffle = 1, dd.seed = 1, dd.prefetch = a->prefetch, dd.vocab = 50257;
    vs_data* d;
    if (vs_data_open(&dd, &d) != VS_OK) {
        fprintf(stderr, "rank %d: %s\n", a->rank, vs_last_error());
        a->failed = 1;
        return NULL;
    }
    struct timespec step = {0, (long)(a->step_ms * 1e6)};
    for (int s = 0; s < STEPS && !a->failed; s++) {
        if (a->step_ms > 0 && s > 0) nanosleep(&step, NULL); // the modelled step on the batch before
        vs_batch b;
        double t0 = now();
        if (vs_data_next(d, &b) != VS_OK) {
            fprintf(stderr, "rank %d: %s\n", a->rank, vs_last_error());
            a->failed = 1;
        }
        a->wait[s] = now() - t0;
    }
    vs_data_free(d);
    return NULL;
}

/* Median wait (ms) over every rank's steps after the first (the first has nothing to hide behind). */
static double run(int dp, int prefetch, double step_ms, int* failed)
{
    static rank_arg a[MAXDP];
    pthread_t th[MAXDP];
    for (int r = 0; r < dp; r++) {
        memset(&a[r], 0, sizeof a[r]);
        a[r].dp = dp, a[r].rank = r, a[r].prefetch = prefetch, a[r].step_ms = step_ms;
        pthread_create(&th[r], NULL, rank_main, &a[r]);
    }
    static double all[MAXDP * MAXSTEPS];
    int n = 0;
    for (int r = 0; r < dp; r++) {
        pthread_join(th[r], NULL);
        *failed |= a[r].failed;
        for (int s = 1; s < STEPS; s++) all[n++] = a[r].wait[s] * 1e3;
    }
    return median(all, n);
}

static int write_shards(void)
{
    uint16_t* tok = (uint16_t*)malloc((size_t)FILE_TOKENS * 2);
    uint32_t x = 12345;
    for (int f = 0; f < NFILES && tok; f++) {
        for (int i = 0; i < FILE_TOKENS; i++) tok[i] = (uint16_t)((x = x * 1664525u + 1013904223u) >> 16) % 50257;
        char p[400];
        snprintf(p, sizeof p, "%s/shard_%03d.bin", DIR_, f);
        FILE* o = fopen(p, "wb");
        int32_t h[256] = {VS_DATA_MAGIC, VS_DATA_VERSION, FILE_TOKENS};
        if (!o || fwrite(h, sizeof h, 1, o) != 1 || fwrite(tok, 2, FILE_TOKENS, o) != FILE_TOKENS) {
            if (o) fclose(o);
            free(tok);
            return 1;
        }
        fclose(o);
    }
    free(tok);
    return 0;
}

int main(int argc, char** argv)
{
    double steps_ms[8] = {5, 20};
    int nsteps_ms = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc) STEPS = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--step-ms") && i + 1 < argc && nsteps_ms < 8) steps_ms[nsteps_ms++] = atof(argv[++i]);
        else return fprintf(stderr, "usage: bench_data [--steps N] [--step-ms S]...\n"), 2;
    }
    if (!nsteps_ms) nsteps_ms = 2;
    if (STEPS < 2 || STEPS > MAXSTEPS) return fprintf(stderr, "--steps 2..%d\n", MAXSTEPS), 2;
    char tmpl[] = "/tmp/vs_bench_data_XXXXXX";
    if (!mkdtemp(tmpl)) return fprintf(stderr, "mkdtemp failed\n"), 1;
    snprintf(DIR_, sizeof DIR_, "%s", tmpl);
    snprintf(PATTERN, sizeof PATTERN, "%s/shard_*.bin", DIR_);
    if (write_shards()) return fprintf(stderr, "cannot write the shards in %s\n", DIR_), 1;
    char load[64];
    printf("bench_data: %d shards of %d tokens, global batch %d x %d (+1), shuffled, %d steps; load %s\n", NFILES,
           FILE_TOKENS, B, T, STEPS, loadavg(load, sizeof load));
    printf("| DP | rows/rank | read, no thread (ms) | step (ms) | wait, read-ahead (ms) | wait / step |\n");
    printf("|---|---|---|---|---|---|\n");
    int failed = 0;
    for (int dp = 1; dp <= MAXDP; dp *= 8) {
        double read = run(dp, -1, 0, &failed);
        for (int k = 0; k < nsteps_ms; k++) {
            double wait = run(dp, 2, steps_ms[k], &failed);
            printf("| %d | %d | %.3f | %g | %.4f | %.4f |\n", dp, B / dp, read, steps_ms[k], wait, wait / steps_ms[k]);
            fflush(stdout);
        }
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", DIR_);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", DIR_);
    return failed;
}
