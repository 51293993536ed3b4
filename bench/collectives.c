/* bench/collectives.c - vescale threads transport vs Open MPI, nccl-tests style.

   One run per rank count N (bench/run_collectives.sh does N = 2, 4, 8):

       mpirun -np N build/bench_collectives [--max-mib M] [--min-kib K]
              [--budget S] [--min-iters I] [--max-iters I] [--no-mpi] [--no-threads]

   1. MPI part, all N processes: MPI_Allreduce (float sum), MPI_Allgather and
      MPI_Reduce_scatter_block on sizes 1 KiB, 4 KiB, ... 256 MiB (powers of 4).
      size = the full buffer, as nccl-tests: all-reduce buffer bytes, all-gather
      total recv bytes, reduce-scatter total send bytes.
   2. Threads part, rank 0 alone: vs_launch_ex with N thread ranks running
      vs_all_reduce (f32 sum, out-of-place), vs_all_gather, vs_reduce_scatter on
      the same sizes. The other MPI processes sleep meanwhile (MPI_Ibarrier +
      MPI_Test + 1 ms nanosleep), so they burn no core. Before it, rank 0
      measures single-thread memcpy bandwidth on 256 MiB buffers.
   Each point: one checked run (every element verified, both parts), 5 warm-up
   runs below 16 MiB (from 16 MiB the checked run is the warm-up), then timed
   iterations, a barrier before each; an iteration's time is the max over ranks;
   the point reports the median iteration. The number of
   iterations is what fits in --budget seconds (default 0.25), clamped to
   [--min-iters (default 5; at least 10 below 16 MiB), --max-iters (default 200)].

   Columns: size = full buffer bytes, count = its float elements, time = median
   (us), algbw = size/time (GB/s), busbw: all-reduce algbw*2(N-1)/N, all-gather /
   reduce-scatter algbw*(N-1)/N; ours/MPI = busbw ratio (> 1: vescale faster).
   Summary lines start with "summary N=" (grep them). Exit status: non-zero when a
   result was wrong or a call failed; missed performance targets only print FAIL.

   The machine is shared: "summary N= other_load" gives the CPU (in cores) that
   other programs used during each part (the sleeping MPI ranks of the threads part
   count as other, a few hundredths of a core). With 2 CPUs and another program on
   one, the thread ranks take turns on the other core and the big all-gathers run
   ~1.5-2x slower; compare ratios only between runs where this is near 0. Even then
   the VM's memory bandwidth with both cores streaming flips between phases of
   seconds to minutes (2-thread streaming writes 1.2x or 1.9x one thread's; compute
   scales 2x in both): the N=2 all-gather of 256 MiB takes ~15 or ~24 ms, while
   MPI_Allgather stays ~40 ms. That is invisible from inside the guest; repeat runs.

   Rank 0 widens its CPU affinity to every online CPU before launching the thread
   ranks: mpirun binds each process to one core when it does not oversubscribe
   (N=2 on 2 cores), which would put all thread ranks on one core. */
#define _GNU_SOURCE
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "bench/bench_util.h"

#include <mpi.h>

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { C_AR, C_AG, C_RS, NCOLL };
static const char* const coll_name[NCOLL] = {"all_reduce", "all_gather", "reduce_scatter"};
static const char* const mpi_name[NCOLL] = {"MPI_Allreduce", "MPI_Allgather",
                                            "MPI_Reduce_scatter_block"};

#define MAXSIZES 32
#define KIB ((size_t)1024)
#define MIB (KIB * KIB)
#define BIG_SIZE (16 * MIB) /* summary medians and the 3-iteration minimum start here */
#define MEMCPY_BYTES (256 * MIB)

typedef struct point {
    size_t bytes;       /* full buffer bytes actually moved (0: skipped) */
    size_t count;       /* elements in the full buffer */
    double thr_us, mpi_us; /* median iteration time; < 0: not measured */
    int thr_iters, mpi_iters;
    int thr_bad, mpi_bad; /* wrong elements in the checked run (summed over ranks) */
} point;

typedef struct opts {
    size_t max_bytes, min_bytes;
    double budget;
    int min_iters, max_iters;
    int no_mpi, no_threads;
} opts;

typedef struct tctx { /* shared by the thread ranks */
    int n, nsizes;
    size_t sizes[MAXSIZES];
    const opts* o;
    point (*pts)[MAXSIZES];
    double* times; /* n * max_iters: this point's iteration times, per rank */
    double* warm;  /* n: warm-up time per iteration, per rank */
    long* bad;     /* n: wrong elements of this point, per rank */
    int* err;      /* n: vescale error per rank */
} tctx;

/* Elements per rank of collective `coll` for a full buffer of `size` bytes. */
static size_t rank_count(int coll, size_t size, int n)
{
    return coll == C_AR ? size / sizeof(float) : size / sizeof(float) / (size_t)n;
}
static size_t send_count(int coll, size_t cr, int n) { return coll == C_RS ? cr * (size_t)n : cr; }
static size_t recv_count(int coll, size_t cr, int n) { return coll == C_AG ? cr * (size_t)n : cr; }

/* Send pattern of rank r: small integers, so every sum is exact in any order.
   AR/RS: (r+1)*(j%13+1); AG: r*8192 + j%8191. */
static void fill_send(int coll, float* s, int r, size_t ns)
{
    size_t j;
    if (coll == C_AG) {
        unsigned k = 0;
        for (j = 0; j < ns; j++) {
            s[j] = (float)(r * 8192 + (int)k);
            if (++k == 8191) k = 0;
        }
    } else {
        unsigned k = 0;
        for (j = 0; j < ns; j++) {
            s[j] = (float)((r + 1) * (int)(k + 1));
            if (++k == 13) k = 0;
        }
    }
}

/* Wrong elements in rank r's result; reports the first one on stderr. */
static long check_recv(int coll, const float* rb, int r, int n, size_t cr, const char* who)
{
    long bad = 0;
    size_t j, first = 0;
    float got = 0, want0 = 0;
    const int tri = n * (n + 1) / 2;
    if (coll == C_AG) {
        int b;
        for (b = 0; b < n; b++) {
            unsigned k = 0;
            const float* p = rb + (size_t)b * cr;
            for (j = 0; j < cr; j++) {
                float want = (float)(b * 8192 + (int)k);
                if (p[j] != want) {
                    if (!bad++) first = (size_t)b * cr + j, got = p[j], want0 = want;
                }
                if (++k == 8191) k = 0;
            }
        }
    } else {
        size_t base = coll == C_RS ? (size_t)r * cr : 0;
        unsigned k = (unsigned)(base % 13);
        for (j = 0; j < cr; j++) {
            float want = (float)(tri * (int)(k + 1));
            if (rb[j] != want) {
                if (!bad++) first = j, got = rb[j], want0 = want;
            }
            if (++k == 13) k = 0;
        }
    }
    if (bad)
        fprintf(stderr,
                "bench: %s %s N=%d count=%zu rank %d: %ld wrong elements, first at %zu: "
                "got %g want %g\n",
                who, coll_name[coll], n, cr, r, bad, first, (double)got, (double)want0);
    return bad;
}

static int choose_iters(const opts* o, size_t size, double est)
{
    int lo = size >= BIG_SIZE ? o->min_iters : (o->min_iters > 10 ? o->min_iters : 10);
    double want = est > 0 ? o->budget / est : (double)o->max_iters;
    int it = want > (double)o->max_iters ? o->max_iters : (int)want;
    if (it < lo) it = lo;
    if (it > o->max_iters) it = o->max_iters;
    return it;
}

/* Untimed runs before the timed ones, besides the checked run (which also gives the
   time estimate for big sizes). */
static int warm_iters(size_t size) { return size >= BIG_SIZE ? 0 : 5; }

/* ---------------------------------------------------------------- MPI part */

static int mpi_op(int coll, const float* s, float* r, size_t cr)
{
    int c = (int)cr;
    switch (coll) {
    case C_AR: return MPI_Allreduce(s, r, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    case C_AG: return MPI_Allgather(s, c, MPI_FLOAT, r, c, MPI_FLOAT, MPI_COMM_WORLD);
    default: return MPI_Reduce_scatter_block(s, r, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
}

static int run_mpi(const opts* o, int rank, int n, const size_t* sizes, int nsizes,
                   point pts[NCOLL][MAXSIZES])
{
    size_t maxb = sizes[nsizes - 1];
    float* s = balloc(maxb);
    float* rb = balloc(maxb);
    double* t = malloc((size_t)o->max_iters * sizeof *t);
    double* tmax = malloc((size_t)o->max_iters * sizeof *tmax);
    int coll, si, failed = 0;
    if (!s || !rb || !t || !tmax) {
        fprintf(stderr, "bench: rank %d: out of memory for MPI buffers\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (coll = 0; coll < NCOLL; coll++) {
        for (si = 0; si < nsizes; si++) {
            size_t cr = rank_count(coll, sizes[si], n);
            point* p = &pts[coll][si];
            long bad, allbad;
            double tw = 0, tc, est, t0;
            int k, nw, iters;
            if (cr == 0 || cr > 0x7fffffff) continue;
            fill_send(coll, s, rank, send_count(coll, cr, n));
            memset(rb, 0xff, recv_count(coll, cr, n) * sizeof(float));
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = now();
            if (mpi_op(coll, s, rb, cr) != MPI_SUCCESS) failed = 1;
            tc = now() - t0;
            bad = check_recv(coll, rb, rank, n, cr, "MPI");
            MPI_Reduce(&bad, &allbad, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
            nw = warm_iters(sizes[si]);
            for (k = 0; k < nw; k++) {
                MPI_Barrier(MPI_COMM_WORLD);
                t0 = now();
                mpi_op(coll, s, rb, cr);
                tw += now() - t0;
            }
            tw = nw ? tw / nw : tc;
            MPI_Allreduce(&tw, &est, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            iters = choose_iters(o, sizes[si], est);
            for (k = 0; k < iters; k++) {
                MPI_Barrier(MPI_COMM_WORLD);
                t0 = now();
                mpi_op(coll, s, rb, cr);
                t[k] = now() - t0;
            }
            MPI_Reduce(t, tmax, iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            if (rank == 0) {
                p->mpi_us = 1e6 * median(tmax, iters);
                p->mpi_iters = iters;
                p->mpi_bad = (int)(allbad > 0x7fffffff ? 0x7fffffff : allbad);
            }
        }
    }
    free(s);
    free(rb);
    free(t);
    free(tmax);
    return failed;
}

/* ------------------------------------------------------------ threads part */

static vs_result thr_op(int coll, vs_comm* c, const float* s, float* r, size_t cr)
{
    switch (coll) {
    case C_AR: return vs_all_reduce(c, s, r, cr, VS_F32, VS_OP_SUM, NULL);
    case C_AG: return vs_all_gather(c, s, r, cr, VS_F32, NULL);
    default: return vs_reduce_scatter(c, s, r, cr, VS_F32, VS_OP_SUM, NULL);
    }
}

static int rank_fn(vs_world* w, void* arg)
{
    tctx* T = arg;
    vs_comm* c = vs_world_comm(w);
    const opts* o = T->o;
    int r = vs_comm_rank(c), n = vs_comm_size(c);
    size_t maxb = T->sizes[T->nsizes - 1];
    float* s = NULL;
    float* rb = NULL;
    int coll, si;
    if (n != T->n || r < 0 || r >= n) {
        fprintf(stderr, "bench: thread rank %d: comm size %d, expected %d\n", r, n, T->n);
        return 1;
    }
    s = balloc(maxb);
    rb = balloc(maxb);
    if (!s || !rb) {
        fprintf(stderr, "bench: thread rank %d: out of memory\n", r);
        T->err[r] = VS_ERR_NOMEM;
        goto out;
    }
    for (coll = 0; coll < NCOLL; coll++) {
        for (si = 0; si < T->nsizes; si++) {
            size_t size = T->sizes[si];
            size_t cr = rank_count(coll, size, n);
            double tw = 0, tc, est = 0, t0;
            int k, nw, iters;
            if (cr == 0 || cr > 0x7fffffff) continue;
            fill_send(coll, s, r, send_count(coll, cr, n));
            memset(rb, 0xff, recv_count(coll, cr, n) * sizeof(float));
            THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");
            t0 = now();
            THR_CHK(T, c, r, thr_op(coll, c, s, rb, cr), coll_name[coll]);
            tc = now() - t0;
            T->bad[r] = check_recv(coll, rb, r, n, cr, "vescale threads");
            nw = warm_iters(size);
            for (k = 0; k < nw; k++) {
                THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");
                t0 = now();
                THR_CHK(T, c, r, thr_op(coll, c, s, rb, cr), coll_name[coll]);
                tw += now() - t0;
            }
            T->warm[r] = nw ? tw / nw : tc;
            THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");
            for (k = 0; k < n; k++)
                if (T->warm[k] > est) est = T->warm[k];
            iters = choose_iters(o, size, est);
            for (k = 0; k < iters; k++) {
                THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");
                t0 = now();
                THR_CHK(T, c, r, thr_op(coll, c, s, rb, cr), coll_name[coll]);
                T->times[(size_t)r * (size_t)o->max_iters + (size_t)k] = now() - t0;
            }
            /* Everyone's times and bad counts are written; warm[] is read by all. */
            THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");
            if (r == 0) {
                point* p = &T->pts[coll][si];
                double* m = malloc((size_t)iters * sizeof *m);
                long bad = 0;
                int q;
                for (q = 0; q < n; q++) bad += T->bad[q];
                if (m) {
                    for (k = 0; k < iters; k++) {
                        m[k] = 0;
                        for (q = 0; q < n; q++) {
                            double x = T->times[(size_t)q * (size_t)o->max_iters + (size_t)k];
                            if (x > m[k]) m[k] = x;
                        }
                    }
                    p->thr_us = 1e6 * median(m, iters);
                    free(m);
                }
                p->thr_iters = iters;
                p->thr_bad = (int)(bad > 0x7fffffff ? 0x7fffffff : bad);
            }
            /* Nobody may overwrite times/bad/warm before rank 0 has read them. */
            THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");
        }
    }
out:
    free(s);
    free(rb);
    return T->err[r] != 0;
}

/* All online CPUs for this thread (and the threads it creates). */
static int widen_affinity(void)
{
    cpu_set_t set;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN), i;
    CPU_ZERO(&set);
    for (i = 0; i < ncpu && i < CPU_SETSIZE; i++) CPU_SET((int)i, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) return -1;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    return CPU_COUNT(&set);
}


/* ------------------------------------------------------------------ output */

static double busbw_factor(int coll, int n)
{
    return coll == C_AR ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
}

static void fmt_num(char* buf, size_t cap, double v, const char* f)
{
    if (v < 0)
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, f, v);
}

static void print_tables(int n, int nsizes, point pts[NCOLL][MAXSIZES])
{
    int coll, si;
    for (coll = 0; coll < NCOLL; coll++) {
        double bf = busbw_factor(coll, n);
        printf("#\n# %s  N=%d  float%s  vescale threads (%d threads, 1 process) vs %s (%d "
               "processes)\n",
               coll_name[coll], n, coll == C_AG ? "" : " sum", n, mpi_name[coll], n);
        printf("# %12s %11s | %-44s | %-37s | %s\n", "", "", "vescale threads", "Open MPI",
               "ours/MPI");
        printf("# %12s %11s | %10s %5s %8s %8s %5s | %10s %5s %8s %8s | %8s\n", "size(B)",
               "count", "time(us)", "iters", "algbw", "busbw", "check", "time(us)", "iters",
               "algbw", "busbw", "busbw");
        for (si = 0; si < nsizes; si++) {
            const point* p = &pts[coll][si];
            double ta = -1, tb = -1, ba = -1, bb = -1;
            char s1[32], s2[32], s3[32], s4[32], s5[32], s6[32], s7[32];
            if (!p->bytes) continue;
            if (p->thr_us > 0) ta = (double)p->bytes / (p->thr_us * 1e-6) / 1e9, tb = ta * bf;
            if (p->mpi_us > 0) ba = (double)p->bytes / (p->mpi_us * 1e-6) / 1e9, bb = ba * bf;
            fmt_num(s1, sizeof s1, p->thr_us, "%.1f");
            fmt_num(s2, sizeof s2, ta, "%.3f");
            fmt_num(s3, sizeof s3, tb, "%.3f");
            fmt_num(s4, sizeof s4, p->mpi_us, "%.1f");
            fmt_num(s5, sizeof s5, ba, "%.3f");
            fmt_num(s6, sizeof s6, bb, "%.3f");
            fmt_num(s7, sizeof s7, (tb > 0 && bb > 0) ? tb / bb : -1, "%.2f");
            printf("  %12zu %11zu | %10s %5d %8s %8s %5s | %10s %5d %8s %8s | %8s\n", p->bytes,
                   p->count, s1, p->thr_iters, s2, s3,
                   p->thr_us < 0 ? "-" : (p->thr_bad ? "WRONG" : "ok"), s4, p->mpi_iters, s5,
                   s6, s7);
        }
    }
}

static const char* size_label(size_t b, char* buf, size_t cap)
{
    if (b >= MIB && b % MIB == 0)
        snprintf(buf, cap, "%zuMiB", b / MIB);
    else if (b >= KIB && b % KIB == 0)
        snprintf(buf, cap, "%zuKiB", b / KIB);
    else
        snprintf(buf, cap, "%zuB", b);
    return buf;
}

/* Returns 1 when every checked result was right. */
static int print_summary(int n, int nsizes, point pts[NCOLL][MAXSIZES], double mcpy)
{
    int coll, si, all_ok = 1;
    printf("#\n# summary N=%d: busbw ratios are medians over sizes >= 16 MiB; memcpy "
           "%.2f GB/s (1 thread, 256 MiB)\n",
           n, mcpy);
    for (coll = 0; coll < NCOLL; coll++) {
        double bf = busbw_factor(coll, n), r[MAXSIZES], m[MAXSIZES];
        int nr = 0, nm = 0, ok = 1, have_thr = 0;
        const point* last = NULL;
        for (si = 0; si < nsizes; si++) {
            const point* p = &pts[coll][si];
            if (!p->bytes || p->thr_us < 0) continue;
            have_thr = 1;
            if (p->thr_bad || p->mpi_bad) ok = 0;
            last = p;
            if (p->bytes < BIG_SIZE) continue;
            if (p->mpi_us > 0) r[nr++] = p->mpi_us / p->thr_us; /* busbw ratio */
            if (mcpy > 0) m[nm++] = (double)p->bytes / (p->thr_us * 1e-6) / 1e9 * bf / mcpy;
        }
        if (!have_thr) {
            printf("summary N=%d %s correctness=n/a SKIP\n", n, coll_name[coll]);
            all_ok = 0;
            continue;
        }
        if (!ok) all_ok = 0;
        printf("summary N=%d %s correctness %s\n", n, coll_name[coll], ok ? "PASS" : "FAIL");
        if (nr)
            printf("summary N=%d %s busbw_ratio_vs_mpi=%.2f target>=2 %s\n", n,
                   coll_name[coll], median(r, nr), ok && median(r, nr) >= 2.0 ? "PASS" : "FAIL");
        else
            printf("summary N=%d %s busbw_ratio_vs_mpi=n/a target>=2 SKIP\n", n,
                   coll_name[coll]);
        if (coll == C_AR) {
            char lb[32];
            if (last && last->bytes >= BIG_SIZE && mcpy > 0) {
                double v = (double)last->bytes / (last->thr_us * 1e-6) / 1e9 * bf / mcpy;
                printf("summary N=%d all_reduce busbw_vs_memcpy@%s=%.2f target>=0.4 %s\n", n,
                       size_label(last->bytes, lb, sizeof lb), v,
                       ok && v >= 0.4 ? "PASS" : "FAIL");
            } else {
                printf("summary N=%d all_reduce busbw_vs_memcpy@%s=n/a target>=0.4 SKIP\n", n,
                       last ? size_label(last->bytes, lb, sizeof lb) : "-");
            }
            if (nm)
                printf("summary N=%d all_reduce busbw_vs_memcpy_median>=16MiB=%.2f target>=0.4 "
                       "%s\n",
                       n, median(m, nm), ok && median(m, nm) >= 0.4 ? "PASS" : "FAIL");
            else
                printf("summary N=%d all_reduce busbw_vs_memcpy_median>=16MiB=n/a target>=0.4 "
                       "SKIP\n",
                       n);
        }
    }
    return all_ok;
}

/* ------------------------------------------------------------------- main */

static void usage(void)
{
    fprintf(stderr,
            "usage: mpirun -np N bench_collectives [--max-mib M] [--min-kib K] [--budget S]\n"
            "       [--min-iters I] [--max-iters I] [--no-mpi] [--no-threads]\n");
}

static int parse_opts(int argc, char** argv, opts* o)
{
    int i;
    o->max_bytes = 256 * MIB;
    o->min_bytes = KIB;
    o->budget = 0.25;
    o->min_iters = 5;
    o->max_iters = 200;
    o->no_mpi = o->no_threads = 0;
    for (i = 1; i < argc; i++) {
        const char* a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-mpi")) {
            o->no_mpi = 1;
        } else if (!strcmp(a, "--no-threads")) {
            o->no_threads = 1;
        } else if (v && !strcmp(a, "--max-mib")) {
            o->max_bytes = (size_t)(atof(v) * (double)MIB), i++;
        } else if (v && !strcmp(a, "--min-kib")) {
            o->min_bytes = (size_t)(atof(v) * (double)KIB), i++;
        } else if (v && !strcmp(a, "--budget")) {
            o->budget = atof(v), i++;
        } else if (v && !strcmp(a, "--min-iters")) {
            o->min_iters = atoi(v), i++;
        } else if (v && !strcmp(a, "--max-iters")) {
            o->max_iters = atoi(v), i++;
        } else {
            return -1;
        }
    }
    if (o->min_iters < 1) o->min_iters = 1;
    if (o->max_iters < o->min_iters) o->max_iters = o->min_iters;
    if (o->max_iters < 10) o->max_iters = 10;
    if (o->min_bytes < 4) o->min_bytes = 4;
    if (o->max_bytes < o->min_bytes) return -1;
    return 0;
}

/* Non-zero ranks while rank 0 runs the threads part: no spinning. */
static void sleep_until_rank0(void)
{
    MPI_Request req;
    int done = 0;
    struct timespec ms = {0, 1000000};
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    for (;;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) break;
        nanosleep(&ms, NULL);
    }
}

int main(int argc, char** argv)
{
    static point pts[NCOLL][MAXSIZES];
    opts o;
    int rank, n, nsizes = 0, coll, si, rc = 0, ncpu = -1;
    size_t sizes[MAXSIZES], sz;
    double mcpy = -1, t_start, t_mpi = 0, t_thr = 0, load_mpi = -1, load_thr = -1;

    MPI_Init(&argc, &argv);
    t_start = now();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (parse_opts(argc, argv, &o) != 0) {
        if (rank == 0) usage();
        MPI_Finalize();
        return 2;
    }
    for (sz = o.min_bytes; sz <= o.max_bytes && nsizes < MAXSIZES; sz *= 4) sizes[nsizes++] = sz;
    if (nsizes == 0) {
        if (rank == 0) usage();
        MPI_Finalize();
        return 2;
    }
    for (coll = 0; coll < NCOLL; coll++)
        for (si = 0; si < nsizes; si++) {
            point* p = &pts[coll][si];
            size_t cr = rank_count(coll, sizes[si], n);
            p->bytes = coll == C_AR ? cr * sizeof(float) : cr * sizeof(float) * (size_t)n;
            p->count = p->bytes / sizeof(float);
            p->thr_us = p->mpi_us = -1;
        }

    if (rank == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING], la[64];
        int len = 0;
        MPI_Get_library_version(lib, &len);
        lib[strcspn(lib, "\n,")] = 0;
        printf("# bench_collectives N=%d: vescale %s threads transport vs %s; sizes %zu B .. "
               "%zu B; budget %.2f s/point, iters [%d, %d]; online CPUs %ld; loadavg %s\n",
               n, vs_version_string(), lib, sizes[0], sizes[nsizes - 1], o.budget, o.min_iters,
               o.max_iters, sysconf(_SC_NPROCESSORS_ONLN), loadavg(la, sizeof la));
        fflush(stdout);
    }

    /* 1. Open MPI, N processes. */
    if (!o.no_mpi) {
        double t0 = now(), mine, ours = 0;
        cpu_snap a = snap_now(), b;
        if (run_mpi(&o, rank, n, sizes, nsizes, pts)) rc = 1;
        b = snap_now();
        t_mpi = now() - t0;
        mine = b.self - a.self;
        MPI_Reduce(&mine, &ours, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) load_mpi = other_cores(a, b, ours);
    }
    MPI_Barrier(MPI_COMM_WORLD); /* MPI buffers are freed everywhere */

    /* 2. vescale threads, rank 0 alone; the others sleep. */
    if (rank != 0) {
        sleep_until_rank0();
    } else {
        MPI_Request req;
        char la[64];
        double t0 = now();
        cpu_snap a = snap_now(), b;
        ncpu = widen_affinity();
        mcpy = memcpy_bw(MEMCPY_BYTES);
        if (!o.no_threads) {
            tctx T;
            vs_result r;
            memset(&T, 0, sizeof T);
            T.n = n;
            T.nsizes = nsizes;
            memcpy(T.sizes, sizes, sizeof sizes);
            T.o = &o;
            T.pts = pts;
            T.times = calloc((size_t)n * (size_t)o.max_iters, sizeof *T.times);
            T.warm = calloc((size_t)n, sizeof *T.warm);
            T.bad = calloc((size_t)n, sizeof *T.bad);
            T.err = calloc((size_t)n, sizeof *T.err);
            if (!T.times || !T.warm || !T.bad || !T.err) {
                fprintf(stderr, "bench: out of memory\n");
                rc = 1;
            } else {
                r = vs_launch_ex(&(vs_launch_desc){.nranks = n, .timeout_s = 120}, rank_fn, &T);
                if (r != VS_OK) {
                    fprintf(stderr, "bench: vs_launch_ex(N=%d): %d %s: %s\n", n, r,
                            r < 0 ? vs_result_string(r) : "a rank failed", vs_last_error());
                    rc = 1;
                }
            }
            free(T.times);
            free(T.warm);
            free(T.bad);
            free(T.err);
        }
        b = snap_now();
        load_thr = other_cores(a, b, b.self - a.self);
        t_thr = now() - t0;

        printf("# memcpy bandwidth (1 thread, 256 MiB, median of 7): %.2f GB/s; rank 0 affinity "
               "widened to %d CPUs for the thread ranks\n",
               mcpy, ncpu);
        print_tables(n, nsizes, pts);
        if (!print_summary(n, nsizes, pts, mcpy) && !o.no_threads) rc = 1;
        printf("summary N=%d other_load cores used by other programs: MPI part %.2f, threads "
               "part %.2f (of %ld CPUs; -1: unknown)\n",
               n, load_mpi, load_thr, sysconf(_SC_NPROCESSORS_ONLN));
        for (coll = 0; coll < NCOLL; coll++)
            for (si = 0; si < nsizes; si++)
                if (pts[coll][si].mpi_bad) rc = 1;
        printf("# N=%d done: MPI part %.1f s, memcpy + threads part %.1f s, total %.1f s; "
               "loadavg %s%s\n",
               n, t_mpi, t_thr, now() - t_start, loadavg(la, sizeof la),
               rc ? "; ERRORS (see stderr)" : "");
        fflush(stdout);
        MPI_Ibarrier(MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    MPI_Finalize();
    return rc;
}
