/* bench/redistribute.c - vs_redistribute against the plain collective it stands on,
   threads transport only (no MPI).

       build/bench_redistribute [--ranks 2,4,8] [--max-mib M] [--min-mib M] [--cols C]
                                [--budget S] [--min-iters I] [--max-iters I]
                                [--cases S0->R,P->R,P->S0,S0->S1,S1->R,P->S1]

   For every rank count N (one vs_launch_ex each; bench/run_redistribute.sh runs one
   process per N) a 1-D mesh of N thread ranks (vs_mesh_init, shape {N}) moves a 2-D
   f32 tensor [rows, cols] (cols = --cols, default 1024; rows = size / (4 cols)) of
   1, 4, 16, 64, 256 MiB (powers of 4 from --min-mib to --max-mib) between layouts:

       case     layouts         redistribute uses             baseline (same run)
       S0->R    [S(0)] -> [R]   all-gatherv into dst          vs_all_gather, numel/N each
       P->R     [P] -> [R]      all-reduce                    vs_all_reduce, numel
       P->S0    [P] -> [S(0)]   reduce-scatterv               vs_reduce_scatter, numel/N
       S0->S1   [S(0)] -> [S(1)] pack, all-to-allv            vs_all_to_all, numel/N^2 blocks
       S1->R    [S(1)] -> [R]   all-gatherv to scratch, reorder   vs_all_gather
       P->S1    [P] -> [S(1)]   pack, reduce-scatterv         vs_reduce_scatter

   The baseline is the collective moving the same bytes between the same
   (pre-faulted, nonzero) buffers, on the same communicator (the mesh's 1-D submesh,
   which is what vs_redistribute uses). Every point: one checked redistribute (a
   sample of each rank's shard - its first and last rows and ~4096 spread elements
   - against the full-tensor formula), one baseline run, 5 warm-up pairs below 16
   MiB, then timed iterations of both, interleaved (redistribute first on even
   iterations, baseline first on odd ones), a barrier before each call. An
   iteration's time is the max over ranks; a point reports the median iteration of
   each. Iterations: what fits in --budget seconds (default 0.4) per point, clamped
   to [--min-iters (default 7; at least 10 below 16 MiB), --max-iters (default 200)].

   Columns: size = full tensor bytes; time = median (us); GB/s = full tensor bytes /
   time; ratio = baseline time / redistribute time (= redistribute bandwidth /
   baseline bandwidth; 1.00: no overhead). Summary lines start with "summary N="
   (grep them): ratio_median>=16MiB is the median ratio over sizes >= 16 MiB,
   target >= 0.9 for the dim-0 cases (no reordering: S0->R, P->R, P->S0) and >= 0.7
   for the cases that must reorder (S0->S1, S1->R, P->S1). Exit status: non-zero
   when a result was wrong or a call failed; a missed target only prints FAIL. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "bench/bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { B_AG, B_AR, B_RS, B_A2A };
static const char* const base_name[] = {"vs_all_gather", "vs_all_reduce", "vs_reduce_scatter",
                                        "vs_all_to_all"};

typedef struct casedef {
    const char* name;     /* summary label */
    const char* src;      /* vs_layout_parse text */
    const char* dst;
    int base;             /* B_* */
    const char* via;      /* what vs_redistribute does */
    double target;        /* ratio target */
} casedef;

#define NCASE 6
static const casedef cases[NCASE] = {
    {"S0->R", "[S(0)]", "[R]", B_AG, "all-gatherv straight into dst", 0.9},
    {"P->R", "[P(sum)]", "[R]", B_AR, "all-reduce", 0.9},
    {"P->S0", "[P(sum)]", "[S(0)]", B_RS, "reduce-scatterv", 0.9},
    {"S0->S1", "[S(0)]", "[S(1)]", B_A2A, "pack column blocks, all-to-allv", 0.7},
    {"S1->R", "[S(1)]", "[R]", B_AG, "all-gatherv to scratch, reorder into dst", 0.7},
    {"P->S1", "[P(sum)]", "[S(1)]", B_RS, "pack column blocks, reduce-scatterv", 0.7},
};

#define MAXSIZES 16
#define KIB ((size_t)1024)
#define MIB (KIB * KIB)
#define BIG_SIZE (16 * MIB) /* summary medians and the warm-up-free regime start here */
#define MEMCPY_BYTES (256 * MIB)
#define PERIOD 65521        /* value pattern period (prime): v(g) = g % PERIOD + 1 */
#define NSAMPLE 4096

typedef struct point {
    size_t bytes;           /* full tensor bytes (0: skipped) */
    int64_t rows, cols;
    double red_us, base_us; /* median iteration time; < 0: not measured */
    int iters;
    long bad;               /* wrong sampled elements, summed over ranks */
    long checked;           /* sampled elements, summed over ranks */
} point;

typedef struct opts {
    int ranks[16], nranks;
    size_t min_bytes, max_bytes;
    int64_t cols;
    double budget;
    int min_iters, max_iters;
    int want[NCASE]; /* cases to run (--cases) */
} opts;

typedef struct tctx { /* shared by the thread ranks of one launch */
    int n, nsizes;
    size_t sizes[MAXSIZES];
    const opts* o;
    point (*pts)[MAXSIZES];
    double* tr;  /* n * max_iters: redistribute iteration times, per rank */
    double* tb;  /* same, baseline */
    double* est; /* n: warm-up pair time, per rank */
    long* bad;   /* n */
    long* chk;   /* n */
    int* err;    /* n: vescale error per rank */
} tctx;
/* Writes the box [r0, r0+nr) x [c0, c0+nc) of the full tensor (cols columns) into p
   (row-major, nc per row): mul * v(i*cols + j). */
static void fill_box(float* p, int64_t r0, int64_t nr, int64_t c0, int64_t nc, int64_t cols,
                     float mul)
{
    int64_t i, j;
    for (i = 0; i < nr; i++) {
        unsigned k = (unsigned)(((r0 + i) * cols + c0) % PERIOD);
        float* row = p + i * nc;
        for (j = 0; j < nc; j++) {
            row[j] = mul * (float)(k + 1);
            if (++k == PERIOD) k = 0;
        }
    }
}

static void fill_const(float* p, size_t n, float v)
{
    size_t i;
    for (i = 0; i < n; i++) p[i] = v;
}

/* Checks element (i, j) of a local box at global offset (r0, c0). */
static int check_one(const float* p, int64_t i, int64_t j, int64_t r0, int64_t c0, int64_t nc,
                     int64_t cols, float mul, long* bad, const char* what, int n, int r)
{
    float want = mul * (float)(((r0 + i) * cols + c0 + j) % PERIOD + 1);
    float got = p[i * nc + j];
    if (got == want) return 0;
    if (!(*bad)++)
        fprintf(stderr,
                "bench: %s N=%d rank %d: local (%lld, %lld) = global (%lld, %lld): got %g want %g\n",
                what, n, r, (long long)i, (long long)j, (long long)(r0 + i), (long long)(c0 + j),
                (double)got, (double)want);
    return 1;
}

/* Samples a rank's result: its first and last rows whole, and NSAMPLE elements
   spread over the shard. Returns the number checked; *bad gets the wrong ones. */
static long check_box(const float* p, int64_t r0, int64_t nr, int64_t c0, int64_t nc,
                      int64_t cols, float mul, long* bad, const char* what, int n, int r)
{
    long cnt = 0;
    int64_t j, k, numel = nr * nc;
    if (numel == 0) return 0;
    for (j = 0; j < nc; j++) {
        check_one(p, 0, j, r0, c0, nc, cols, mul, bad, what, n, r);
        check_one(p, nr - 1, j, r0, c0, nc, cols, mul, bad, what, n, r);
        cnt += 2;
    }
    for (k = 0; k < NSAMPLE; k++) {
        int64_t g = (k * (numel / NSAMPLE) + (k * 7919) % (numel / NSAMPLE + 1)) % numel;
        check_one(p, g / nc, g % nc, r0, c0, nc, cols, mul, bad, what, n, r);
        cnt++;
    }
    return cnt;
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

static int warm_iters(size_t size) { return size >= BIG_SIZE ? 0 : 5; }

static vs_result base_op(int base, vs_comm* c, const float* s, float* d, int64_t numel, int n)
{
    size_t cnt = (size_t)numel;
    switch (base) {
    case B_AG: return vs_all_gather(c, s, d, cnt / (size_t)n, VS_F32, NULL);
    case B_AR: return vs_all_reduce(c, s, d, cnt, VS_F32, VS_OP_SUM, NULL);
    case B_RS: return vs_reduce_scatter(c, s, d, cnt / (size_t)n, VS_F32, VS_OP_SUM, NULL);
    default: return vs_all_to_all(c, s, d, cnt / (size_t)n / (size_t)n, VS_F32, NULL);
    }
}
/* Times one call (after a barrier); *t gets this rank's seconds. */
#define TIMED(T, c, r, expr, what, t)                                                 \
    do {                                                                              \
        double t0_;                                                                   \
        THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");                          \
        t0_ = now();                                                                  \
        THR_CHK(T, c, r, (expr), (what));                                             \
        (t) = now() - t0_;                                                            \
    } while (0)

static int rank_fn(vs_world* w, void* arg)
{
    tctx* T = arg;
    const opts* o = T->o;
    vs_mesh* mesh = NULL;
    vs_mesh* sub = NULL;
    vs_comm* c = NULL;
    int r = vs_comm_rank(vs_world_comm(w)), n = T->n;
    size_t maxb = T->sizes[T->nsizes - 1];
    size_t mi = (size_t)o->max_iters;
    float* src = NULL;
    float* dst = NULL;
    int ci, si;

    THR_CHK(T, c, r, vs_mesh_init(w, &(vs_mesh_desc){.shape = {n}}, &mesh), "vs_mesh_init");
    /* The 1-D submesh vs_redistribute runs its collectives on (made here, outside
       any timing: the first call is a collective comm split). */
    THR_CHK(T, c, r, vs_mesh_submesh(mesh, vs_mesh_dim_name(mesh, 0), &sub), "vs_mesh_submesh");
    c = vs_mesh_comm(sub);
    if (vs_comm_size(c) != n || vs_mesh_rank(mesh) != r) {
        fprintf(stderr, "bench: thread rank %d: submesh has %d ranks, expected %d\n", r,
                vs_comm_size(c), n);
        T->err[r] = VS_ERR_STATE;
        vs_comm_abort(c);
        goto out;
    }
    src = balloc(maxb);
    dst = balloc(maxb);
    if (!src || !dst) {
        fprintf(stderr, "bench: thread rank %d: out of memory for 2 x %zu bytes\n", r, maxb);
        T->err[r] = VS_ERR_NOMEM;
        vs_comm_abort(c);
        goto out;
    }
    THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");

    for (ci = 0; ci < NCASE; ci++) {
        const casedef* cd = &cases[ci];
        for (si = 0; si < T->nsizes; si++) {
            point* p = &T->pts[ci][si];
            vs_dtensor S, D;
            int64_t ls[2], lo[2], ds[2], dof[2], numel;
            int64_t nin, nout;
            double tr = 0, tb = 0, tw = 0, est = 0;
            int k, nw, iters, src_partial;
            if (!p->bytes) continue;
            numel = p->rows * p->cols;
            memset(&S, 0, sizeof S);
            memset(&D, 0, sizeof D);
            THR_CHK(T, c, r, vs_layout_parse(mesh, cd->src, &S.layout), "vs_layout_parse");
            THR_CHK(T, c, r, vs_layout_parse(mesh, cd->dst, &D.layout), "vs_layout_parse");
            S.dtype = D.dtype = VS_F32;
            S.ndim = D.ndim = 2;
            S.shape[0] = D.shape[0] = p->rows;
            S.shape[1] = D.shape[1] = p->cols;
            S.data = src;
            D.data = dst;
            THR_CHK(T, c, r, vs_layout_local(&S.layout, 2, S.shape, r, ls, lo), "vs_layout_local");
            THR_CHK(T, c, r, vs_layout_local(&D.layout, 2, D.shape, r, ds, dof), "vs_layout_local");
            THR_CHK(T, c, r, vs_dtensor_local_numel(&S, &nin), "vs_dtensor_local_numel");
            THR_CHK(T, c, r, vs_dtensor_local_numel(&D, &nout), "vs_dtensor_local_numel");
            src_partial = S.layout.p[0].kind == VS_PLACE_PARTIAL;
            /* Partial: rank r holds (r+1) * v, the sum is N(N+1)/2 * v (exact in f32). */
            fill_box(src, lo[0], ls[0], lo[1], ls[1], p->cols, src_partial ? (float)(r + 1) : 1.0f);
            fill_const(dst, (size_t)nout, -1.0f);

            /* checked run (also the first warm-up), then one baseline */
            TIMED(T, c, r, vs_redistribute(&S, &D), "vs_redistribute", tr);
            T->bad[r] = 0;
            T->chk[r] = check_box(dst, dof[0], ds[0], dof[1], ds[1], p->cols,
                                  src_partial ? (float)(n * (n + 1) / 2) : 1.0f, &T->bad[r],
                                  cd->name, n, r);
            TIMED(T, c, r, base_op(cd->base, c, src, dst, numel, n), base_name[cd->base], tb);
            nw = warm_iters(p->bytes);
            for (k = 0; k < nw; k++) {
                TIMED(T, c, r, vs_redistribute(&S, &D), "vs_redistribute", tr);
                tw += tr;
                TIMED(T, c, r, base_op(cd->base, c, src, dst, numel, n), base_name[cd->base], tb);
                tw += tb;
            }
            T->est[r] = nw ? tw / nw : tr + tb;
            THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");
            for (k = 0; k < n; k++)
                if (T->est[k] > est) est = T->est[k];
            iters = choose_iters(o, p->bytes, est);
            for (k = 0; k < iters; k++) {
                double* a = &T->tr[(size_t)r * mi + (size_t)k];
                double* b = &T->tb[(size_t)r * mi + (size_t)k];
                if (k % 2 == 0) {
                    TIMED(T, c, r, vs_redistribute(&S, &D), "vs_redistribute", *a);
                    TIMED(T, c, r, base_op(cd->base, c, src, dst, numel, n), base_name[cd->base], *b);
                } else {
                    TIMED(T, c, r, base_op(cd->base, c, src, dst, numel, n), base_name[cd->base], *b);
                    TIMED(T, c, r, vs_redistribute(&S, &D), "vs_redistribute", *a);
                }
            }
            /* everyone's times and counts are written */
            THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");
            if (r == 0) {
                double* ma = malloc((size_t)iters * sizeof *ma);
                double* mb = malloc((size_t)iters * sizeof *mb);
                int q;
                p->bad = p->checked = 0;
                for (q = 0; q < n; q++) p->bad += T->bad[q], p->checked += T->chk[q];
                if (ma && mb) {
                    for (k = 0; k < iters; k++) {
                        ma[k] = mb[k] = 0;
                        for (q = 0; q < n; q++) {
                            double x = T->tr[(size_t)q * mi + (size_t)k];
                            double y = T->tb[(size_t)q * mi + (size_t)k];
                            if (x > ma[k]) ma[k] = x;
                            if (y > mb[k]) mb[k] = y;
                        }
                    }
                    p->red_us = 1e6 * median(ma, iters);
                    p->base_us = 1e6 * median(mb, iters);
                }
                free(ma);
                free(mb);
                p->iters = iters;
            }
            /* nobody overwrites times/bad/est before rank 0 has read them */
            THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");
        }
    }
out:
    free(src);
    free(dst);
    if (mesh) vs_mesh_free(mesh);
    return T->err[r] != 0;
}

/* ------------------------------------------------------------------ output */


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

static void fmt_num(char* buf, size_t cap, double v, const char* f)
{
    if (v < 0)
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, f, v);
}

static void print_tables(int n, int nsizes, point pts[NCASE][MAXSIZES])
{
    int ci, si;
    for (ci = 0; ci < NCASE; ci++) {
        const casedef* cd = &cases[ci];
        int any = 0;
        for (si = 0; si < nsizes; si++) any |= pts[ci][si].bytes != 0;
        if (!any) continue; /* not run (--cases) */
        printf("#\n# %s  N=%d  %s -> %s  f32  redistribute: %s; baseline: %s\n", cd->name, n,
               cd->src, cd->dst, cd->via, base_name[cd->base]);
        printf("# %7s %16s | %-34s | %-20s | %6s\n", "", "", "vs_redistribute", "baseline",
               "");
        printf("# %7s %16s | %10s %5s %8s %8s | %10s %9s | %6s\n", "size", "shape", "time(us)",
               "iters", "GB/s", "check", "time(us)", "GB/s", "ratio");
        for (si = 0; si < nsizes; si++) {
            const point* p = &pts[ci][si];
            char sl[32], sh[48], s1[32], s2[32], s3[32], s4[32], s5[32];
            double ra = -1, ba = -1;
            if (!p->bytes) continue;
            if (p->red_us > 0) ra = (double)p->bytes / (p->red_us * 1e-6) / 1e9;
            if (p->base_us > 0) ba = (double)p->bytes / (p->base_us * 1e-6) / 1e9;
            snprintf(sh, sizeof sh, "[%lld,%lld]", (long long)p->rows, (long long)p->cols);
            fmt_num(s1, sizeof s1, p->red_us, "%.1f");
            fmt_num(s2, sizeof s2, ra, "%.3f");
            fmt_num(s3, sizeof s3, p->base_us, "%.1f");
            fmt_num(s4, sizeof s4, ba, "%.3f");
            fmt_num(s5, sizeof s5, (p->red_us > 0 && p->base_us > 0) ? p->base_us / p->red_us : -1,
                    "%.2f");
            printf("  %7s %16s | %10s %5d %8s %8s | %10s %9s | %6s\n",
                   size_label(p->bytes, sl, sizeof sl), sh, s1, p->iters, s2,
                   p->red_us < 0 ? "-" : (p->bad ? "WRONG" : "ok"), s3, s4, s5);
        }
    }
}

/* Returns 1 when every checked result was right. */
static int print_summary(int n, int nsizes, point pts[NCASE][MAXSIZES], double mcpy)
{
    int ci, si, all_ok = 1;
    printf("#\n# summary N=%d: ratio = baseline time / redistribute time, median over sizes >= "
           "16 MiB; memcpy %.2f GB/s (1 thread, 256 MiB)\n",
           n, mcpy);
    for (ci = 0; ci < NCASE; ci++) {
        const casedef* cd = &cases[ci];
        double rt[MAXSIZES];
        int nr = 0, ok = 1, have = 0, planned = 0;
        long checked = 0;
        for (si = 0; si < nsizes; si++) {
            const point* p = &pts[ci][si];
            planned |= p->bytes != 0;
            if (!p->bytes || p->red_us < 0) continue;
            have = 1;
            checked += p->checked;
            if (p->bad) ok = 0;
            if (p->bytes >= BIG_SIZE && p->base_us > 0) rt[nr++] = p->base_us / p->red_us;
        }
        if (!planned) continue; /* not asked for (--cases) */
        if (!have) {
            printf("summary N=%d %s correctness=n/a SKIP\n", n, cd->name);
            all_ok = 0;
            continue;
        }
        if (!ok) all_ok = 0;
        printf("summary N=%d %s correctness sampled=%ld %s\n", n, cd->name, checked,
               ok ? "PASS" : "FAIL");
        if (nr) {
            double m = median(rt, nr);
            printf("summary N=%d %s ratio_median>=16MiB=%.2f target>=%.1f %s\n", n, cd->name, m,
                   cd->target, ok && m >= cd->target ? "PASS" : "FAIL");
        } else {
            printf("summary N=%d %s ratio_median>=16MiB=n/a target>=%.1f SKIP\n", n, cd->name,
                   cd->target);
        }
    }
    return all_ok;
}

/* ------------------------------------------------------------------- main */

static void usage(void)
{
    fprintf(stderr, "usage: bench_redistribute [--ranks 2,4,8] [--max-mib M] [--min-mib M] "
                    "[--cols C]\n"
                    "       [--budget S] [--min-iters I] [--max-iters I] [--cases S0->R,P->S1,...]\n");
}

static int parse_ranks(const char* s, opts* o)
{
    o->nranks = 0;
    while (*s) {
        char* end = NULL;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 256 || o->nranks == 16) return -1;
        o->ranks[o->nranks++] = (int)v;
        s = end;
        while (*s == ',' || *s == ' ') s++;
    }
    return o->nranks ? 0 : -1;
}

/* "S1->R,P->S1": the cases to run. */
static int parse_cases(const char* s, opts* o)
{
    int ci, any = 0;
    for (ci = 0; ci < NCASE; ci++) o->want[ci] = 0;
    while (*s) {
        size_t len = strcspn(s, ", ");
        for (ci = 0; ci < NCASE; ci++)
            if (len == strlen(cases[ci].name) && !strncmp(s, cases[ci].name, len)) break;
        if (ci == NCASE) return -1;
        o->want[ci] = any = 1;
        s += len;
        while (*s == ',' || *s == ' ') s++;
    }
    return any ? 0 : -1;
}

static int parse_opts(int argc, char** argv, opts* o)
{
    int i;
    for (i = 0; i < NCASE; i++) o->want[i] = 1;
    o->ranks[0] = 2, o->ranks[1] = 4, o->ranks[2] = 8, o->nranks = 3;
    o->min_bytes = MIB;
    o->max_bytes = 256 * MIB;
    o->cols = 1024;
    o->budget = 0.4;
    o->min_iters = 7;
    o->max_iters = 200;
    for (i = 1; i < argc; i++) {
        const char* a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && !strcmp(a, "--ranks")) {
            if (parse_ranks(v, o)) return -1;
            i++;
        } else if (v && !strcmp(a, "--cases")) {
            if (parse_cases(v, o)) return -1;
            i++;
        } else if (v && !strcmp(a, "--max-mib")) {
            o->max_bytes = (size_t)(atof(v) * (double)MIB), i++;
        } else if (v && !strcmp(a, "--min-mib")) {
            o->min_bytes = (size_t)(atof(v) * (double)MIB), i++;
        } else if (v && !strcmp(a, "--cols")) {
            o->cols = atol(v), i++;
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
    if (o->cols < 1) return -1;
    if (o->min_bytes < (size_t)o->cols * sizeof(float)) o->min_bytes = (size_t)o->cols * sizeof(float);
    if (o->max_bytes < o->min_bytes) return -1;
    return 0;
}

/* One launch of N thread ranks over every case and size. Returns non-zero on a
   failure or a wrong result. */
static int run_n(const opts* o, int n, double mcpy)
{
    static point pts[NCASE][MAXSIZES];
    size_t sizes[MAXSIZES] = {0}, sz;
    int nsizes = 0, ci, si, rc = 0, planned = 0;
    tctx T;
    char la[64];
    double t0 = now();
    for (sz = o->min_bytes; sz <= o->max_bytes && nsizes < MAXSIZES; sz *= 4) sizes[nsizes++] = sz;
    if (nsizes == 0) return 1; /* parse_opts makes min <= max: not reached */
    memset(pts, 0, sizeof pts);
    for (si = 0; si < nsizes; si++) {
        int64_t rows = (int64_t)(sizes[si] / sizeof(float)) / o->cols;
        int even = rows >= 1 && rows % n == 0 && o->cols % n == 0;
        if (!even)
            printf("# N=%d: size %zu B skipped: [%lld,%lld] does not split evenly in %d\n", n,
                   sizes[si], (long long)rows, (long long)o->cols, n);
        for (ci = 0; ci < NCASE; ci++) {
            point* p = &pts[ci][si];
            p->red_us = p->base_us = -1;
            if (!even || !o->want[ci]) continue; /* bytes 0: not run, not printed */
            p->rows = rows;
            p->cols = o->cols;
            p->bytes = (size_t)(rows * o->cols) * sizeof(float);
            planned++;
        }
    }
    printf("# bench_redistribute N=%d: vescale %s threads transport, 1-D mesh of %d thread "
           "ranks; f32 [rows, %lld]; sizes %zu B .. %zu B; budget %.2f s/point, iters [%d, %d]; "
           "online CPUs %ld; loadavg %s\n",
           n, vs_version_string(), n, (long long)o->cols, sizes[0], sizes[nsizes - 1], o->budget,
           o->min_iters, o->max_iters, sysconf(_SC_NPROCESSORS_ONLN), loadavg(la, sizeof la));
    fflush(stdout);

    if (!planned) {
        printf("# N=%d: nothing to run\n", n);
        return 1;
    }
    memset(&T, 0, sizeof T);
    T.n = n;
    T.nsizes = nsizes;
    memcpy(T.sizes, sizes, sizeof sizes);
    T.o = o;
    T.pts = pts;
    T.tr = calloc((size_t)n * (size_t)o->max_iters, sizeof *T.tr);
    T.tb = calloc((size_t)n * (size_t)o->max_iters, sizeof *T.tb);
    T.est = calloc((size_t)n, sizeof *T.est);
    T.bad = calloc((size_t)n, sizeof *T.bad);
    T.chk = calloc((size_t)n, sizeof *T.chk);
    T.err = calloc((size_t)n, sizeof *T.err);
    if (!T.tr || !T.tb || !T.est || !T.bad || !T.chk || !T.err) {
        fprintf(stderr, "bench: out of memory\n");
        rc = 1;
    } else {
        vs_result r = vs_launch_ex(&(vs_launch_desc){.nranks = n, .timeout_s = 120}, rank_fn, &T);
        if (r != VS_OK) {
            fprintf(stderr, "bench: vs_launch_ex(N=%d): %d %s: %s\n", n, r,
                    r < 0 ? vs_result_string(r) : "a rank failed", vs_last_error());
            rc = 1;
        }
    }
    free(T.tr);
    free(T.tb);
    free(T.est);
    free(T.bad);
    free(T.chk);
    free(T.err);

    print_tables(n, nsizes, pts);
    if (!print_summary(n, nsizes, pts, mcpy)) rc = 1;
    printf("# N=%d done: %.1f s; loadavg %s%s\n", n, now() - t0, loadavg(la, sizeof la),
           rc ? "; ERRORS (see stderr)" : "");
    fflush(stdout);
    return rc;
}

int main(int argc, char** argv)
{
    opts o;
    int i, rc = 0;
    double mcpy, t0 = now();
    if (parse_opts(argc, argv, &o) != 0) {
        usage();
        return 2;
    }
    mcpy = memcpy_bw(MEMCPY_BYTES);
    printf("# memcpy bandwidth (1 thread, 256 MiB, median of 7): %.2f GB/s\n", mcpy);
    for (i = 0; i < o.nranks; i++)
        if (run_n(&o, o.ranks[i], mcpy)) rc = 1;
    printf("# bench_redistribute done: %.1f s\n", now() - t0);
    return rc;
}
