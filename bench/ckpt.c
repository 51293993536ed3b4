/* bench/ckpt.c - vescale_ckpt.h against the disk it writes to.

   MiB (1024) of i32 tensors [4096, 4096] (64 MiB each), Shard(0) on 4 thread
   ranks (each rank 1/4), saved into DIR with fsync and loaded back; in the same
   run, on the same disk, the raw bounds: one write()+fsync of a file of the same
   size, and one read() of it. Page cache: every file read (the raw file and the
   checkpoints' shards, all fsynced and clean) is dropped with
   posix_fadvise(DONTNEED) right before it is read, so reads come from the disk.
   Per repetition (medians over --reps):
     raw_write   one 1 GiB write + fsync
     save        vs_ckpt_save, checksums on (4 ranks, 4 shard files, index, commit)
     save_nocrc  the same without checksums
     raw_read    one read of the raw file
     load        vs_ckpt_load on the saving mesh (4), checksums verified
     load_nocrc  the same from the checkpoint saved without checksums
     load_resh   load on (4) [Shard(0)] of a checkpoint saved once on an 8-rank
                 (PP=2, DP=2, TP=2) mesh as [Shard(0), Replicate, Shard(1)]
     async       the time vs_ckpt_save(async) blocks its caller (its copies)
     memcpy      each rank copying its shards into a warm buffer (all 4 at once)
   Every load is checked byte for byte against the source (exit 1 when wrong).

     bench_ckpt [--mib 1024] [--reps 5] [--dir build/ckbench] [--strict] */
/* sync() is XSI (the bench settles the disk between timed reads). */
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700
#endif
#define VESCALE_IMPLEMENTATION
#include "../vescale_ckpt.h"
#include "bench_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>

#define ROWS 4096
#define COLS 4096
#define NR 4
#define MAXREP 32

static int NT;          // tensors
static size_t TB;       // bytes of one tensor
static char* src;       // NT global tensors, row-major, one after the other
static char* quad[4];   // the 8-rank save's boxes: quad[pp*2+tp] holds NT boxes [ROWS/2, COLS/2]
static char* dst;       // NT global tensors: what the loads write
static char* warm[NR];  // memcpy targets
static char dir[1024];
static int reps = 5, strict;
static double t_raw_w[MAXREP], t_raw_r[MAXREP], t_save[MAXREP], t_save_nc[MAXREP], t_load[MAXREP],
    t_load_nc[MAXREP], t_resh[MAXREP], t_async[MAXREP], t_async_total[MAXREP], t_memcpy[MAXREP];
/* CPU seconds of the whole process (every rank is a thread of it) during the reads:
   what the checksums cost in work, apart from where the disk leaves a core idle */
static double c_raw_r[MAXREP], c_load[MAXREP], c_load_nc[MAXREP], c_resh[MAXREP];

static double cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_sec +
           1e-6 * (double)u.ru_stime.tv_usec;
}
static long wrong; // bytes that differ after loads

static void path(char* out, size_t cap, const char* name) { snprintf(out, cap, "%s/%s", dir, name); }

static void rm_ckpt(const char* name) // (untimed) a checkpoint directory and its files
{
    char p[1200], f[1500];
    path(p, sizeof p, name);
    DIR* d = opendir(p);
    if (!d) return;
    struct dirent* de;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.') snprintf(f, sizeof f, "%s/%s", p, de->d_name), unlink(f);
    closedir(d);
    rmdir(p);
}

static void drop_file(const char* f)
{
    int fd = open(f, O_RDONLY);
    if (fd < 0) return;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

static void drop_ckpt(const char* name)
{
    char p[1200], f[1500];
    path(p, sizeof p, name);
    DIR* d = opendir(p);
    if (!d) return;
    struct dirent* de;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.') snprintf(f, sizeof f, "%s/%s", p, de->d_name), drop_file(f);
    closedir(d);
}

static void unlink_raw(void) // (untimed)
{
    char f[1200];
    path(f, sizeof f, "raw.bin");
    unlink(f);
}

static double raw_write(void)
{
    char f[1200];
    path(f, sizeof f, "raw.bin");
    double t0 = now();
    int fd = open(f, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    size_t n = TB * (size_t)NT, at = 0;
    while (fd >= 0 && at < n) {
        ssize_t k = write(fd, src + at, n - at > ((size_t)1 << 30) ? ((size_t)1 << 30) : n - at);
        if (k <= 0) break;
        at += (size_t)k;
    }
    if (fd < 0 || at != n || fsync(fd)) fprintf(stderr, "raw write failed: %s\n", strerror(errno)), exit(1);
    close(fd);
    return now() - t0;
}

static double raw_read(void)
{
    char f[1200];
    path(f, sizeof f, "raw.bin");
    drop_file(f);
    double t0 = now();
    int fd = open(f, O_RDONLY);
    size_t n = TB * (size_t)NT, at = 0;
    while (fd >= 0 && at < n) {
        ssize_t k = read(fd, dst + at, n - at > ((size_t)1 << 30) ? ((size_t)1 << 30) : n - at);
        if (k <= 0) break;
        at += (size_t)k;
    }
    double t = now() - t0;
    if (fd < 0 || at != n) fprintf(stderr, "raw read failed\n"), exit(1);
    close(fd);
    if (memcmp(dst, src, n)) wrong++, fprintf(stderr, "raw read: wrong bytes\n");
    return t;
}

static void check_dst(const char* what)
{
    size_t n = TB * (size_t)NT;
    if (memcmp(dst, src, n)) {
        size_t i = 0;
        while (i < n && dst[i] == src[i]) i++;
        fprintf(stderr, "%s: loaded bytes differ from the source (first at byte %zu)\n", what, i);
        wrong++;
    }
}

static char names[256][24];

/* This rank's entries for a mesh of 1 dim ((4), [Shard(0)]) or 3 dims ((2,2,2),
   [Shard(0), Replicate, Shard(1)]); data: base (src or dst) or the quadrants. */
static int entries(vs_mesh* m, vs_ckpt_entry* en, char* base)
{
    int k = vs_mesh_ndims(m), c[VS_MESH_MAX_DIMS];
    vs_mesh_coord(m, c);
    memset(en, 0, sizeof(vs_ckpt_entry) * (size_t)NT);
    for (int t = 0; t < NT; t++) {
        en[t].name = names[t];
        en[t].t.dtype = VS_I32;
        en[t].t.ndim = 2;
        en[t].t.shape[0] = ROWS, en[t].t.shape[1] = COLS;
        if (vs_layout_parse(m, k == 1 ? "[Shard(0)]" : "[Shard(0), Replicate, Shard(1)]", &en[t].t.layout)) return -1;
        if (k == 1) en[t].t.data = base + (size_t)t * TB + (size_t)c[0] * (TB / NR);
        else en[t].t.data = quad[c[0] * 2 + c[2]] + (size_t)t * (TB / 4);
    }
    return 0;
}

#define CHK(expr)                                                                                  \
    do {                                                                                           \
        vs_result r_ = (expr);                                                                     \
        if (r_) {                                                                                  \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, vs_last_error());        \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static int resh_save_rank(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh* m;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = md.shape[1] = md.shape[2] = 2;
    CHK(vs_mesh_init(w, &md, &m));
    vs_ckpt* ck;
    CHK(vs_ckpt_init(&(vs_ckpt_desc){.mesh = m}, &ck));
    vs_ckpt_entry* en = (vs_ckpt_entry*)calloc((size_t)NT, sizeof *en);
    if (entries(m, en, NULL)) exit(1);
    char p[1200];
    path(p, sizeof p, "resh");
    CHK(vs_ckpt_save(ck, p, en, NT, NULL));
    free(en);
    vs_ckpt_free(ck);
    vs_mesh_free(m);
    return 0;
}

static int bench_rank(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh* m;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = NR;
    CHK(vs_mesh_init(w, &md, &m));
    vs_comm* cm = vs_mesh_comm(m);
    const int R = vs_mesh_rank(m);
    vs_ckpt *ck, *ckn;
    CHK(vs_ckpt_init(&(vs_ckpt_desc){.mesh = m}, &ck));
    CHK(vs_ckpt_init(&(vs_ckpt_desc){.mesh = m, .no_checksum = 1}, &ckn));
    vs_ckpt_entry* es = (vs_ckpt_entry*)calloc((size_t)NT, sizeof *es);
    vs_ckpt_entry* ed = (vs_ckpt_entry*)calloc((size_t)NT, sizeof *ed);
    if (entries(m, es, src) || entries(m, ed, dst)) exit(1);
    char same[1200], nocrc[1200], resh[1200], asy[1200];
    path(same, sizeof same, "same");
    path(nocrc, sizeof nocrc, "nocrc");
    path(resh, sizeof resh, "resh");
    path(asy, sizeof asy, "async");
    double t0;
#define TIMED(slot, body)                                                                          \
    do {                                                                                           \
        vs_barrier(cm, NULL);                                                                      \
        t0 = now();                                                                                \
        body;                                                                                      \
        vs_barrier(cm, NULL);                                                                      \
        if (R == 0) slot = now() - t0;                                                             \
    } while (0)
#define TIMEDC(slot, cslot, body)                                                                  \
    do {                                                                                           \
        double c0_ = cpu_s();                                                                      \
        TIMED(slot, body);                                                                         \
        if (R == 0) cslot = cpu_s() - c0_;                                                         \
    } while (0)
#define ZERO_DST()                                                                                 \
    do {                                                                                           \
        if (R == 0) memset(dst, 0, TB * (size_t)NT);                                               \
    } while (0)
    for (int rep = 0; rep < reps; rep++) {
        /* The deletions, then sync(): on a file system mounted with `discard`
           (this VM's ext4, commit=5) the freed blocks are trimmed at the next
           journal commit, which stalled whatever read ran then by 0.6-0.9 s (the
           last of the four, about 8 s into a repetition: seen in every column) */
        if (R == 0) rm_ckpt("same"), rm_ckpt("nocrc"), rm_ckpt("async"), unlink_raw(), sync();
        vs_barrier(cm, NULL);
        if (R == 0) t_raw_w[rep] = raw_write();
        TIMED(t_save[rep], CHK(vs_ckpt_save(ck, same, es, NT, NULL)));
        TIMED(t_save_nc[rep], CHK(vs_ckpt_save(ckn, nocrc, es, NT, NULL)));
        /* The four timed reads, each after sync() and a drop of its files, in an
           order that rotates every repetition: the first read after the saves
           was measured 0.3-0.4 s slower whatever it read (the disk still
           settling the writes), which a fixed order charged to one of them. */
        for (int k = 0; k < 4; k++) {
            int which = (k + rep) % 4;
            vs_barrier(cm, NULL);
            if (R == 0) sync();
            ZERO_DST();
            if (which == 0) {
                if (R == 0) {
                    double c0 = cpu_s();
                    t_raw_r[rep] = raw_read();
                    c_raw_r[rep] = cpu_s() - c0;
                }
            } else if (which == 1) {
                if (R == 0) drop_ckpt("same");
                TIMEDC(t_load[rep], c_load[rep], CHK(vs_ckpt_load(ck, same, ed, NT, NULL)));
                if (R == 0) check_dst("load");
            } else if (which == 2) {
                if (R == 0) drop_ckpt("nocrc");
                TIMEDC(t_load_nc[rep], c_load_nc[rep], CHK(vs_ckpt_load(ckn, nocrc, ed, NT, NULL)));
                if (R == 0) check_dst("load (no checksums)");
            } else {
                if (R == 0) drop_ckpt("resh");
                TIMEDC(t_resh[rep], c_resh[rep], CHK(vs_ckpt_load(ck, resh, ed, NT, NULL)));
                if (R == 0) check_dst("load resharded (2,2,2) -> (4)");
            }
        }
        // the memcpy bound: every rank copies its shards into a warm buffer at once
        TIMED(t_memcpy[rep], for (int t = 0; t < NT; t++) memcpy(warm[R] + (size_t)t * (TB / NR), es[t].t.data, TB / NR));
        vs_ckpt_save_opts ao = {1, 0};
        double ta = 0;
        TIMED(ta, CHK(vs_ckpt_save(ck, asy, es, NT, &ao)));
        if (R == 0) t_async[rep] = ta;
        TIMED(t_async_total[rep], CHK(vs_ckpt_wait(ck)));
        if (R == 0) t_async_total[rep] += ta;
        if (R == 0 && rep == reps - 1) { // the async checkpoint holds the data too
            ZERO_DST();
        }
        if (rep == reps - 1) {
            ZERO_DST();
            vs_barrier(cm, NULL);
            CHK(vs_ckpt_load(ck, asy, ed, NT, NULL));
            vs_barrier(cm, NULL);
            if (R == 0) check_dst("load of the async save");
        }
        if (R == 0) {
            printf("rep %d: raw_write %.3f save %.3f save_nocrc %.3f raw_read %.3f load %.3f load_nocrc %.3f "
                   "load_resh %.3f memcpy %.3f async_blocked %.3f async_total %.3f s\n",
                   rep, t_raw_w[rep], t_save[rep], t_save_nc[rep], t_raw_r[rep], t_load[rep], t_load_nc[rep],
                   t_resh[rep], t_memcpy[rep], t_async[rep], t_async_total[rep]);
            printf("rep %d: cpu raw_read %.3f load %.3f load_nocrc %.3f load_resh %.3f s\n", rep, c_raw_r[rep], c_load[rep],
                   c_load_nc[rep], c_resh[rep]);
            fflush(stdout);
        }
    }
    free(es);
    free(ed);
    vs_ckpt_free(ckn);
    vs_ckpt_free(ck);
    vs_mesh_free(m);
    return 0;
}

static int line(const char* metric, double x, double target, int at_least)
{
    int ok = at_least ? x >= target : x <= target;
    printf("summary ckpt %s=%.3f target%s%.2f %s\n", metric, x, at_least ? ">=" : "<=", target, ok ? "PASS" : "FAIL");
    return ok;
}

int main(int argc, char** argv)
{
    int mib = 1024;
    snprintf(dir, sizeof dir, "build/ckbench");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mib") && i + 1 < argc) mib = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc) snprintf(dir, sizeof dir, "%s", argv[++i]);
        else if (!strcmp(argv[i], "--strict")) strict = 1;
        else {
            fprintf(stderr, "usage: bench_ckpt [--mib 1024] [--reps 5] [--dir build/ckbench] [--strict]\n");
            return 2;
        }
    }
    NT = mib / 64;
    if (NT < 1 || NT > 256 || reps < 1 || reps > MAXREP) return fprintf(stderr, "bad --mib or --reps\n"), 2;
    TB = (size_t)ROWS * COLS * 4;
    mkdir(dir, 0755);
    for (int t = 0; t < NT; t++) snprintf(names[t], sizeof names[t], "layer%03d.w", t);
    size_t total = TB * (size_t)NT;
    src = (char*)balloc(total);
    dst = (char*)balloc(total);
    for (int q = 0; q < 4; q++) quad[q] = (char*)balloc(total / 4);
    for (int r = 0; r < NR; r++) warm[r] = (char*)balloc(total / NR);
    if (!src || !dst || !quad[0] || !quad[1] || !quad[2] || !quad[3] || !warm[0] || !warm[1] || !warm[2] || !warm[3])
        return fprintf(stderr, "out of memory\n"), 1;
    uint32_t* s32 = (uint32_t*)src; // element values: distinct everywhere
    for (size_t i = 0; i < total / 4; i++) s32[i] = (uint32_t)(i * 2654435761u) ^ (uint32_t)(i >> 20);
    for (int t = 0; t < NT; t++) // the (2,2,2) mesh's boxes: quad[pp*2+tp] = rows pp half, cols tp half
        for (int q = 0; q < 4; q++)
            for (int r = 0; r < ROWS / 2; r++)
                memcpy(quad[q] + (size_t)t * (TB / 4) + (size_t)r * (COLS / 2) * 4,
                       src + (size_t)t * TB + ((size_t)(q / 2) * (ROWS / 2) + (size_t)r) * COLS * 4 + (size_t)(q % 2) * (COLS / 2) * 4,
                       (size_t)(COLS / 2) * 4);
    char la[64];
    printf("# bench_ckpt: %d MiB (%d x i32[%d, %d]), %d thread ranks, dir %s, %d reps, load %s\n", mib, NT, ROWS,
           COLS, NR, dir, reps, loadavg(la, sizeof la));
    printf("# reads: every file dropped from the page cache (posix_fadvise DONTNEED, after fsync) right before it is read\n");
    rm_ckpt("resh");
    if (vs_launch(8, resh_save_rank, NULL)) return fprintf(stderr, "resharding save: %s\n", vs_last_error()), 1;
    if (vs_launch(NR, bench_rank, NULL)) return fprintf(stderr, "bench: %s\n", vs_last_error()), 1;
    double gib = (double)total / (1 << 30);
    double rw = median(t_raw_w, reps), rr = median(t_raw_r, reps), sv = median(t_save, reps),
           svn = median(t_save_nc, reps), ld = median(t_load, reps), ldn = median(t_load_nc, reps),
           rs = median(t_resh, reps), mc = median(t_memcpy, reps), as = median(t_async, reps),
           at = median(t_async_total, reps);
    printf("#\n# %-34s %9s %9s\n", "median over reps", "seconds", "GiB/s");
    printf("# %-34s %9.3f %9.2f\n", "raw write + fsync", rw, gib / rw);
    printf("# %-34s %9.3f %9.2f\n", "save (checksums)", sv, gib / sv);
    printf("# %-34s %9.3f %9.2f\n", "save (no checksums)", svn, gib / svn);
    printf("# %-34s %9.3f %9.2f\n", "raw read", rr, gib / rr);
    printf("# %-34s %9.3f %9.2f\n", "load same mesh (checksums)", ld, gib / ld);
    printf("# %-34s %9.3f %9.2f\n", "load same mesh (no checksums)", ldn, gib / ldn);
    printf("# %-34s %9.3f %9.2f\n", "load (2,2,2) -> (4) (checksums)", rs, gib / rs);
    printf("# %-34s %9.3f %9.2f\n", "memcpy of the shards (4 ranks)", mc, gib / mc);
    printf("# %-34s %9.3f %9.2f\n", "async save: caller blocked", as, gib / as);
    printf("# %-34s %9.3f %9.2f\n", "async save: until written", at, gib / at);
    double crr = median(c_raw_r, reps), cld = median(c_load, reps), cldn = median(c_load_nc, reps),
           crs = median(c_resh, reps);
    printf("#\n# %-34s %9s %9s\n", "CPU during the reads (all ranks)", "seconds", "s/GiB");
    printf("# %-34s %9.3f %9.3f\n", "raw read", crr, crr / gib);
    printf("# %-34s %9.3f %9.3f\n", "load same mesh (checksums)", cld, cld / gib);
    printf("# %-34s %9.3f %9.3f\n", "load same mesh (no checksums)", cldn, cldn / gib);
    printf("# %-34s %9.3f %9.3f\n", "load (2,2,2) -> (4) (checksums)", crs, crs / gib);
    printf("#\nsummary ckpt correctness %s (%ld wrong loads)\n", wrong ? "FAIL" : "PASS", wrong);
    int ok = 1;
    ok &= line("save_over_raw_write", rw / sv, 0.8, 1);
    ok &= line("load_over_raw_read", rr / ld, 0.9, 1);
    ok &= line("load_resharded_over_raw_read", rr / rs, 0.7, 1);
    ok &= line("checksum_cost", (ld - ldn) / ld, 0.10, 0);
    ok &= line("async_blocked_over_memcpy", as / mc, 1.5, 0);
    if (wrong) return 1;
    return strict && !ok ? 1 : 0;
}
