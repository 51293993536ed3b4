/* bench/ckpt_meta.c - a checkpoint's metadata at 64 to 1,024 thread ranks
   (issue 35 §3): what a save and a load of small tensors cost a rank in host
   time and memory, so the world's size is all that changes.

   Each rank saves ENTRIES entries (a replicated f32[16], as a DDP's; a
   Shard(0) f32[4 n], 4 elements a rank; a blob every rank gives alike; more
   replicated tensors after those), sync, host buffers, threads transport, into
   DIR (a tmpfs by default: the files are a few bytes a rank, the metadata is
   the cost), then loads it back and checks it. Per save and load:
     wall      rank 0's time for the call (every rank enters after a barrier)
     cpu/rank  the process's CPU time over the call divided by the ranks
     bytes     the library's host bytes at their peak during the call, above
               what the rank held before, charged to the rank thread that
               allocated them (allocator hooks): rank 0, and the median and
               the largest of the other ranks
   Medians over --reps. Threads' stacks 256 KiB.

     bench_ckpt_meta [--ranks 64,256,1024] [--reps 3] [--entries 4] [--dir /dev/shm] */
#define VESCALE_IMPLEMENTATION
#include "../vescale_ckpt.h"
#include "rank_bytes.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

enum { MAXR = 4096, MAXREP = 15, MAXE = 64 };
static rb_account accts[MAXR];

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec * 1e-6 + (double)u.ru_stime.tv_sec +
           (double)u.ru_stime.tv_usec * 1e-6;
}

static int g_reps = 3, g_entries = 4, g_failed;
static char g_dir[512];
/* per call (0 save, 1 load) and repetition */
static double t_wall[2][MAXREP], t_cpu[2][MAXREP];
static size_t bytes[2][MAXREP][MAXR];

static float value(int e, int64_t i) { return (float)(e * 1000 + i) * 0.25f; }

static void make(vs_mesh* m, vs_ckpt_entry* en, float (*buf)[16], uint64_t* blob, char (*names)[16], int fill)
{
    const int n = vs_mesh_size(m, vs_mesh_dim_name(m, 0)), me = vs_mesh_rank(m);
    memset(en, 0, sizeof(vs_ckpt_entry) * (size_t)g_entries);
    for (int e = 0; e < g_entries; e++) {
        snprintf(names[e], 16, "entry%02d", e);
        en[e].name = names[e];
        if (e == 2) {
            en[e].kind = VS_CKPT_BLOB;
            en[e].blob = blob;
            en[e].blob_bytes = sizeof *blob;
            *blob = fill ? 0x5ca1eull : 0;
            continue;
        }
        int sh = e == 1;
        en[e].t.dtype = VS_F32;
        en[e].t.ndim = 1;
        en[e].t.shape[0] = sh ? 4 * (int64_t)n : 16;
        if (vs_layout_parse(m, sh ? "[Shard(0)]" : "[Replicate]", &en[e].t.layout)) g_failed = 1;
        en[e].t.data = buf[e];
        int64_t off = sh ? 4 * (int64_t)me : 0, cnt = sh ? 4 : 16;
        for (int64_t i = 0; i < cnt; i++) buf[e][i] = fill ? value(e, off + i) : -1.0f;
    }
}

static int check(vs_mesh* m, float (*buf)[16], uint64_t blob)
{
    const int me = vs_mesh_rank(m);
    int ok = blob == 0x5ca1eull;
    for (int e = 0; e < g_entries; e++) {
        if (e == 2) continue;
        int sh = e == 1;
        int64_t off = sh ? 4 * (int64_t)me : 0, cnt = sh ? 4 : 16;
        for (int64_t i = 0; i < cnt; i++) ok &= buf[e][i] == value(e, off + i);
    }
    return ok;
}

static int rank_main(vs_world* w, void* arg)
{
    (void)arg;
    const int me = vs_world_rank(w);
    if (me < 0 || me >= MAXR) return 1;
    rb_acct = &accts[me];
    vs_mesh* m = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = vs_world_size(w);
    vs_ckpt* ck = NULL;
    vs_ckpt_desc cd;
    memset(&cd, 0, sizeof cd);
    vs_result r = vs_mesh_init(w, &md, &m);
    cd.mesh = m;
    if (!r) r = vs_ckpt_init(&cd, &ck);
    vs_ckpt_entry en[MAXE];
    float buf[MAXE][16];
    char names[MAXE][16];
    uint64_t blob = 0;
    vs_comm* c = m ? vs_mesh_comm(m) : NULL;
    for (int rep = 0; !r && rep < g_reps; rep++) {
        char path[700];
        snprintf(path, sizeof path, "%s/n%d-r%d", g_dir, vs_world_size(w), rep);
        for (int call = 0; !r && call < 2; call++) {
            make(m, en, buf, &blob, names, call == 0);
            r = vs_barrier(c, NULL);
            size_t base = rb_mark();
            if (!r) r = vs_barrier(c, NULL); // (every rank's base taken before any rank's call)
            double t0 = now_s(), c0 = cpu_s();
            if (!r) r = call == 0 ? vs_ckpt_save(ck, path, en, g_entries, NULL) : vs_ckpt_load(ck, path, en, g_entries, NULL);
            if (me == 0) t_wall[call][rep] = now_s() - t0;
            bytes[call][rep][me] = rb_since(base);
            vs_result rb = vs_barrier(c, NULL);
            if (me == 0) t_cpu[call][rep] = cpu_s() - c0;
            if (!r) r = rb;
            if (!r && call == 1 && !check(m, buf, blob)) r = vs_set_error(VS_ERR_STATE, "rank %d: wrong values loaded", me);
        }
    }
    if (r) {
        fprintf(stderr, "rank %d: %s\n", me, vs_last_error());
        __atomic_store_n(&g_failed, 1, __ATOMIC_RELAXED);
    }
    if (ck) vs_ckpt_free(ck);
    if (m) vs_mesh_free(m);
    return r ? 1 : 0;
}

static int cmp_d(const void* a, const void* b)
{
    double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}
static int cmp_z(const void* a, const void* b)
{
    size_t x = *(const size_t*)a, y = *(const size_t*)b;
    return x < y ? -1 : x > y;
}
static double med_d(double* v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int run(int n)
{
    memset(accts, 0, sizeof accts);
    memset(bytes, 0, sizeof bytes);
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = n;
    ld.stack_bytes = (size_t)256 << 10;
    ld.allocator.alloc = rb_alloc, ld.allocator.free = rb_free;
    vs_result r = vs_launch_ex(&ld, rank_main, NULL);
    if (r || g_failed) {
        fprintf(stderr, "bench_ckpt_meta: %d ranks: %s\n", n, r ? vs_last_error() : "a rank failed");
        return 1;
    }
    static const char* what[2] = {"save", "load"};
    for (int call = 0; call < 2; call++) {
        double wall[MAXREP], cpu[MAXREP], root[MAXREP], omed[MAXREP], omax[MAXREP];
        static size_t o[MAXR];
        for (int rep = 0; rep < g_reps; rep++) {
            wall[rep] = t_wall[call][rep] * 1e3;
            cpu[rep] = t_cpu[call][rep] * 1e3 / n;
            root[rep] = (double)bytes[call][rep][0];
            memcpy(o, &bytes[call][rep][1], sizeof(size_t) * (size_t)(n - 1));
            qsort(o, (size_t)(n - 1), sizeof *o, cmp_z);
            omed[rep] = (double)o[(n - 1) / 2];
            omax[rep] = (double)o[n - 2];
        }
        printf("%-4s %5d ranks: wall %9.2f ms, cpu %7.3f ms a rank; bytes a rank: rank 0 %9.0f, others median %7.0f, "
               "max %7.0f\n", what[call], n, med_d(wall, g_reps), med_d(cpu, g_reps), med_d(root, g_reps),
               med_d(omed, g_reps), med_d(omax, g_reps));
    }
    fflush(stdout);
    return 0;
}

int main(int argc, char** argv)
{
    const char* ranks = "64,256,1024";
    const char* dir = "/dev/shm";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--ranks")) ranks = argv[i + 1];
        else if (!strcmp(argv[i], "--reps")) g_reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--entries")) g_entries = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--dir")) dir = argv[i + 1];
        else {
            fprintf(stderr, "bench_ckpt_meta: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (g_reps < 1 || g_reps > MAXREP || g_entries < 3 || g_entries > MAXE) {
        fprintf(stderr, "bench_ckpt_meta: --reps 1..%d, --entries 3..%d\n", MAXREP, MAXE);
        return 2;
    }
    snprintf(g_dir, sizeof g_dir, "%s/vs_ckpt_meta_XXXXXX", dir);
    if (!mkdtemp(g_dir)) {
        perror(g_dir);
        return 2;
    }
    printf("# bench_ckpt_meta: %d entries a rank, %d reps, medians; in %s\n", g_entries, g_reps, g_dir);
    int rc = 0;
    for (const char* p = ranks; *p && !rc;) {
        int n = atoi(p);
        if (n < 2 || n > MAXR) {
            fprintf(stderr, "bench_ckpt_meta: ranks %d (2..%d)\n", n, MAXR);
            rc = 2;
            break;
        }
        rc = run(n);
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf %s/n%d-r*", g_dir, n);
        if (system(cmd)) rc = 1;
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    rmdir(g_dir);
    return rc;
}
