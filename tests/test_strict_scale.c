/* test_strict_scale.c - vescale's own control code at the scale users train at,
   on the strict stand-in in cost-only mode (VS_STRICT_COST_ONLY=1: kernels,
   copies and collectives timed by tests/strict/vs_strict_clock.h, not run;
   device memory address space only). N thread ranks (64 in make test; 256 and
   1,024 in make test-long: VS_SCALE_RANKS), each on its own simulated H100,
   8 a node, vs_launch'ed with 256 KiB stacks, run:
   - vs_mesh_init of a PP x DP x TP mesh (TP = 8, innermost: one node) and its
     DP, TP and PP submeshes (each rank's communicators split from the world's);
   - a DDP (vescale_ddp.h, ZeRO-0, AdamW) over the DP groups: one step whose
     modelled communication time equals the ring formula for the DP group,
     worked here from the spec (the DP group spans nodes: the network), and
     whose reserved device memory is exactly what vs_ddp_memory_usage reports:
     the state, and its scratch (f32 space of the largest bucket and the clip
     norm's partial sums, which the report used to leave out);
   - each rank's watchdog (vescale_mesh.h, looking while work is in flight)
     wakes at most once in 20 ms x ranks / cores, up to 1 s, in the step: every
     20 ms, 1,024 ranks' watchdogs were 16% of a run's samples on 2 cores;
   - nothing touches device memory (a host access would fault: the
     reservation is PROT_NONE): no page of the parameters and gradients is in
     memory after the step (mincore), and the stand-in reports no violation;
   - the threads transport (no stand-in) on N and N / 2 ranks: the same mesh
     and groups, a barrier, a DP all-reduce checked against its sum, a ring of
     send/recv; the library's largest host allocation (its allocator hook)
     grows no faster than the ranks (its point-to-point queues were n x n),
     and its host memory a rank by less than 8 B a rank added (each rank's
     communicators held 24 B x n of pointer tables).
   It prints the host's wall and CPU time and the resident memory per rank of
   each phase (the figures of issue 35's section 3): totals over all ranks
   divided by N, the stand-in's own work included (on 2 cores it is most of it). */
#define VESCALE_IMPLEMENTATION
#include "vescale.h"
#include "examples/gpt.h"
#include "vs_test.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "strict/vs_strict.h"
#include "gpt_strict_kernels.h"
#include "../bench/rank_bytes.h"

enum { TP = 8, NP = 4 };
/* each parameter: NUMEL f32 (VS_SCALE_NUMEL, default 1 Mi), a bucket each. The DDP
   holds a host copy of every parameter from vs_ddp_add_param to vs_ddp_finalize:
   NP x 4 x NUMEL bytes a rank at once (make test-long's 1,024 ranks take 256 Ki) */
static int64_t NUMEL = (int64_t)1 << 20;

static int N, PP, DP;
static pthread_barrier_t bar;
static int failed;

/* the host's figures at a phase's ends, taken by rank 0 between barriers */
typedef struct snap {
    double wall, cpu;
    long rss_kb, maxrss_kb; /* resident now, and at most so far */
    long device_bytes, libraries;
} snap;
static snap s_pre, s_start, s_mesh, s_ddp, s_step, s_end, s_post;
static void report(const char* what, const snap* a, const snap* b);
static double comm_s[1024], want_comm_s; /* each rank's modelled communication time of the step */
static size_t ddp_bytes[1024];           /* each rank's vs_ddp_memory_usage total of the state */
static size_t ddp_scratch[1024];         /* and of its scratch */
static long resident_pages, checked_pages; /* of the parameters' and gradients' device memory */
static long wd_timed[1024];                /* each rank's watchdog's periodic wake-ups in the step */
static double step_s[1024];                /* and the step's wall time */

/* Pages of [p, p + bytes) in memory (mincore: whatever their protection) */
static void count_resident(const void* p, size_t bytes)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    char* a = (char*)((uintptr_t)p / pg * pg);
    size_t len = (size_t)((const char*)p + bytes - a), np = (len + pg - 1) / pg, in = 0;
    unsigned char* v = (unsigned char*)malloc(np);
    if (!v || mincore(a, len, v) != 0) {
        in = np; /* (counted as touched: the check cannot say otherwise) */
    } else {
        for (size_t i = 0; i < np; i++) in += v[i] & 1;
    }
    free(v);
    __atomic_add_fetch(&resident_pages, (long)in, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&checked_pages, (long)np, __ATOMIC_SEQ_CST);
}

static snap take(void)
{
    snap s;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    s.wall = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    s.cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
            (double)ru.ru_stime.tv_usec * 1e-6;
    s.maxrss_kb = ru.ru_maxrss;
    long pages = 0, res = 0;
    FILE* f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
    if (f) fclose(f);
    s.rss_kb = res * (sysconf(_SC_PAGESIZE) / 1024);
    vs_strict_counts c = vs_strict_get_counts();
    s.device_bytes = c.device_bytes, s.libraries = c.libraries;
    return s;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The watchdogs (vescale_mesh.h, one a rank, looking while work is in flight)
   wake every 20 ms x ranks / cores (at most 1 s) when the ranks outnumber the
   cores: at most secs / period + 1 times in a span of secs. Every 20 ms,
   1,024 ranks' watchdogs were 16% of a GPT run's samples on 2 cores. */
static void wd_bound(const char* what, int n, const long* timed, const double* secs)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN), over = 0, most = 0;
    double period = n > cpus ? 0.02 * n / (double)cpus : 0.02;
    if (period > 1) period = 1;
    for (int r = 0; r < n; r++) {
        over += timed[r] > (long)(secs[r] / period) + 1;
        if (timed[r] > timed[most]) most = r;
    }
    VT_CHECK(!over, "%ld of %d ranks' watchdogs woke more often than every %.3f s in %s (rank %ld: %ld times in %.3f "
             "s)", over, n, period, what, most, timed[most], secs[most]);
}

/* every rank: all here, then rank 0 takes the figures, then all go on */
static void phase(int me, snap* at)
{
    pthread_barrier_wait(&bar);
    if (me == 0) *at = take();
    pthread_barrier_wait(&bar);
}

#define CK(x)                                                                                                          \
    do {                                                                                                               \
        vs_result r_ = (x);                                                                                            \
        if (r_) {                                                                                                      \
            VT_CHECK(0, "rank %d: %s: %s", me, #x, vs_last_error());                                                  \
            __atomic_store_n(&failed, 1, __ATOMIC_SEQ_CST);                                                            \
            return 1;                                                                                                  \
        }                                                                                                              \
    } while (0)

static int rank_main(vs_world* w, void* arg)
{
    (void)arg;
    int me = vs_world_rank(w), dev = -1;
    cudaGetDevice(&dev);
    VT_CHECK(dev == me, "rank %d on device %d (one simulated GPU a rank)", me, dev);
    cudaStream_t st;
    if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess) return 1;
    phase(me, &s_start);

    /* the mesh and its submeshes */
    vs_mesh *mesh = NULL, *dp = NULL, *tp = NULL, *pp = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = PP, md.shape[1] = DP, md.shape[2] = TP;
    md.dim_names[0] = "PP", md.dim_names[1] = "DP", md.dim_names[2] = "TP";
    CK(vs_mesh_init(w, &md, &mesh));
    CK(vs_mesh_submesh(mesh, "DP", &dp));
    CK(vs_mesh_submesh(mesh, "TP", &tp));
    CK(vs_mesh_submesh(mesh, "PP", &pp));
    /* (and the group the DDP's finalize compares replicas over: its communicator's
       4 device bytes are the mesh's, so the DDP phase below reserves only the DDP's) */
    vs_mesh* dptp = NULL;
    CK(vs_mesh_submesh(mesh, "DP,TP", &dptp));
    VT_CHECK(vs_comm_size(vs_mesh_comm(dp)) == DP && vs_comm_size(vs_mesh_comm(tp)) == TP &&
                 vs_comm_size(vs_mesh_comm(pp)) == PP,
             "rank %d: the groups' sizes", me);
    phase(me, &s_mesh);

    /* the DDP: NP parameters of NUMEL f32, replicated over TP, distinct per PP stage */
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = mesh;
    dd.bucket_bytes = NUMEL * (int64_t)sizeof(float);
    dd.optim.kind = VS_OPTIM_ADAMW;
    dd.stream = (void*)st;
    vs_ddp* d = NULL;
    CK(vs_ddp_init(&dd, &d));
    for (int p = 0; p < NP; p++) {
        vs_ddp_param_desc pd;
        memset(&pd, 0, sizeof pd);
        char name[16];
        snprintf(name, sizeof name, "p%d", p);
        pd.name = name;
        pd.dtype = VS_F32;
        pd.ndim = 1;
        pd.shape[0] = NUMEL;
        CK(vs_ddp_add_param(d, &pd, NULL));
    }
    CK(vs_ddp_finalize(d));
    vs_ddp_memory mu;
    CK(vs_ddp_memory_usage(d, &mu));
    ddp_bytes[me] = mu.params + mu.grads + mu.optim_state + mu.master + mu.gathered;
    ddp_scratch[me] = mu.scratch;
    phase(me, &s_ddp);

    /* one step from a fresh clock: the backward's gradients ready last to first */
    cudaDeviceSynchronize();
    pthread_barrier_wait(&bar); /* (every device drained before any clock restarts) */
    vs_strict_clock_reset(dev);
    pthread_barrier_wait(&bar);
    double w0 = now_s();
    long k0 = __atomic_load_n(&w->wd_timed, __ATOMIC_RELAXED);
    CK(vs_ddp_zero_grad(d));
    for (int p = NP - 1; p >= 0; p--) {
        if (!vs_ddp_grad(d, p)) CK(VS_ERR_STATE);
        CK(vs_ddp_grad_ready(d, p));
    }
    CK(vs_ddp_finish_grad_sync(d));
    CK(vs_sync_stream(vs_mesh_comm(mesh), st));
    comm_s[me] = vs_strict_clock_device(dev).comm;
    CK(vs_ddp_step(d, 1e-3));
    CK(vs_sync_stream(vs_mesh_comm(mesh), st));
    wd_timed[me] = __atomic_load_n(&w->wd_timed, __ATOMIC_RELAXED) - k0;
    step_s[me] = now_s() - w0;
    phase(me, &s_step);
    for (int p = 0; p < NP; p++) { /* written by the init's memsets, the step's kernels and collectives */
        count_resident(vs_ddp_param(d, p), (size_t)NUMEL * sizeof(float));
        count_resident(vs_ddp_grad(d, p), (size_t)NUMEL * sizeof(float));
    }

    CK(vs_ddp_free(d));
    CK(vs_mesh_free(mesh));
    cudaStreamDestroy(st);
    phase(me, &s_end);
    return 0;
}

/* The threads transport (vescale's own, no stand-in): the same mesh and its
   groups, a world barrier, an all-reduce over each DP group and a ring of
   send/recv over the world (its point-to-point queues). */
static snap t_pre, t_start, t_mesh, t_coll;
static int threads_main(vs_world* w, void* arg)
{
    (void)arg;
    int me = vs_world_rank(w);
    phase(me, &t_start);
    vs_mesh *mesh = NULL, *dp = NULL, *tp = NULL, *pp = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = PP, md.shape[1] = DP, md.shape[2] = TP;
    CK(vs_mesh_init(w, &md, &mesh));
    CK(vs_mesh_submesh(mesh, "DP", &dp));
    CK(vs_mesh_submesh(mesh, "TP", &tp));
    CK(vs_mesh_submesh(mesh, "PP", &pp));
    phase(me, &t_mesh);
    vs_comm* world = vs_world_comm(w);
    CK(vs_barrier(world, NULL));
    float x[256], y[256];
    for (int i = 0; i < 256; i++) x[i] = (float)(me + i);
    CK(vs_all_reduce(vs_mesh_comm(dp), x, y, 256, VS_F32, VS_OP_SUM, NULL));
    /* the DP group's ranks are me's row: TP apart, DP of them */
    int base = me - (me / TP % DP) * TP;
    for (int i = 0; i < 256; i++) {
        float want = 0;
        for (int k = 0; k < DP; k++) want += (float)(base + k * TP + i);
        if (y[i] != want) CK(vs_set_error(VS_ERR_STATE, "rank %d: DP all-reduce [%d] = %g, want %g", me, i, y[i], want));
    }
    int n = vs_world_size(w), got = -1;
    CK(vs_group_start(world));
    CK(vs_send(world, &me, 1, VS_I32, (me + 1) % n, NULL));
    CK(vs_recv(world, &got, 1, VS_I32, (me + n - 1) % n, NULL));
    CK(vs_group_end(world, NULL));
    if (got != (me + n - 1) % n) CK(vs_set_error(VS_ERR_STATE, "rank %d: ring got %d", me, got));
    phase(me, &t_coll);
    CK(vs_mesh_free(mesh));
    return 0;
}

/* the library's host allocations, every thread's in one account (its allocator
   hook, bench/rank_bytes.h: no rank sets rb_acct): the largest, the bytes live now
   and at most */
static rb_account host_bytes;
static rb_opts host_opts = {0, 0, &host_bytes};

static size_t threads_run(int n, const char* label, size_t* peak)
{
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = n;
    ld.stack_bytes = (size_t)256 << 10;
    ld.allocator.alloc = rb_alloc, ld.allocator.free = rb_free, ld.allocator.user = &host_opts;
    memset(&host_bytes, 0, sizeof host_bytes);
    int n0 = N, dp0 = DP;
    N = n, DP = n / TP / PP; /* (the job's shape: DP scales) */
    pthread_barrier_destroy(&bar);
    pthread_barrier_init(&bar, NULL, (unsigned)n);
    t_pre = take();
    VT_OK(vs_launch_ex(&ld, threads_main, NULL));
    if (label && !__atomic_load_n(&failed, __ATOMIC_SEQ_CST)) {
        report("threads: vs_launch", &t_pre, &t_start);
        report("threads: mesh + 3 groups", &t_start, &t_mesh);
        report("threads: barrier, DP, ring", &t_mesh, &t_coll);
    }
    N = n0, DP = dp0;
    pthread_barrier_destroy(&bar);
    pthread_barrier_init(&bar, NULL, (unsigned)N);
    *peak = host_bytes.peak;
    return host_bytes.max;
}

/* The same at N and N / 2 ranks: the largest allocation grows no faster than
   the ranks (the point-to-point queues were n x n), and the library's host
   memory a rank (its peak over the run: launch, mesh, groups, collectives,
   divided by the ranks) grows by less than 8 B for each rank added: each
   rank's communicators held 24 B x n of pointer tables (a rank's mesh still
   keeps the world rank of each of its ranks, 4 B x n: >>mesh) */
static void case_threads(void)
{
    vs_launch_desc bad;
    memset(&bad, 0, sizeof bad);
    bad.nranks = 2, bad.stack_bytes = 4096;
    VT_ERR(vs_launch_ex(&bad, threads_main, NULL), VS_ERR_INVALID, "stack_bytes 4096");
    size_t pf = 0, ph = 0;
    size_t full = threads_run(N, "threads", &pf), half = threads_run(N / 2, NULL, &ph);
    printf("# threads transport: largest host allocation %zu bytes at %d ranks, %zu at %d\n", full, N, half, N / 2);
    VT_CHECK(full <= half * 2 + 64, "the largest allocation grows faster than the ranks: %zu bytes at %d, %zu at %d",
             full, N, half, N / 2);
    printf("# threads transport: the library's host memory at its peak %zu bytes a rank at %d ranks, %zu at %d\n",
           pf / (size_t)N, N, ph / (size_t)(N / 2), N / 2);
    VT_CHECK(pf / (size_t)N <= ph / (size_t)(N / 2) + 8 * (size_t)(N - N / 2) + 64,
             "the library's host memory a rank grows by 8 B or more for each rank added: %zu bytes a rank at %d, %zu "
             "at %d", pf / (size_t)N, N, ph / (size_t)(N / 2), N / 2);
}

static void report(const char* what, const snap* a, const snap* b)
{
    printf("# %-24s %5d ranks: wall %8.3f ms, cpu %8.3f ms, resident +%8.1f KiB a rank (%ld MiB now, %ld at "
           "most); NVRTC libraries %ld\n", what, N, (b->wall - a->wall) * 1e3 / N, (b->cpu - a->cpu) * 1e3 / N,
           (double)(b->rss_kb - a->rss_kb) / N, b->rss_kb >> 10, b->maxrss_kb >> 10, b->libraries - a->libraries);
}

static void case_scale(void)
{
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = N;
    ld.transport = VS_TRANSPORT_NCCL;
    ld.stack_bytes = (size_t)256 << 10;
    s_pre = take();
    VT_OK(vs_launch_ex(&ld, rank_main, NULL));
    s_post = take();
    if (__atomic_load_n(&failed, __ATOMIC_SEQ_CST)) return;
    report("launch, NCCL world, stream", &s_pre, &s_start);
    report("mesh init + 3 submeshes", &s_start, &s_mesh);
    report("DDP init (4 parameters)", &s_mesh, &s_ddp);
    report("one DDP step", &s_ddp, &s_step);
    report("DDP, mesh, stream freed", &s_step, &s_end);
    report("ranks' exit (world freed)", &s_end, &s_post);

    /* the ring formula for one all-reduce over the DP group: its ranks are TP = 8
       devices apart, one a node, so every ring edge crosses the network */
    vs_strict_spec S = vs_strict_clock_spec();
    double bytes = (double)NUMEL * sizeof(float);
    int cross = DP > 1 && TP >= S.gpus_per_node;
    double one = DP == 1 ? 0 : (cross ? S.net_latency_s : S.nvlink_latency_s) +
                                  2.0 * (DP - 1) / DP * bytes / (cross ? S.net_bw : S.nvlink_bw);
    want_comm_s = NP * one;
    int bad = 0;
    for (int r = 0; r < N; r++)
        if (comm_s[r] - want_comm_s > 1e-12 || want_comm_s - comm_s[r] > 1e-12) bad++;
    VT_CHECK(!bad, "%d ranks' step communication differs from %d all-reduces of %.0f bytes over %d ranks (%.3f us; "
             "rank 0: %.3f us)", bad, NP, bytes, DP, want_comm_s * 1e6, comm_s[0] * 1e6);
    wd_bound("the DDP step", N, wd_timed, step_s);
    printf("# modelled step communication %.3f us a rank (%d ring all-reduces of %.0f bytes over DP %d, across nodes)\n",
           comm_s[0] * 1e6, NP, bytes, DP);

    /* memory: the DDP's reservations are what it reports, none of it resident */
    long reported = 0;
    for (int r = 0; r < N; r++) reported += (long)ddp_bytes[r];
    VT_CHECK(reported == (long)N * NP * NUMEL * 4 * (long)sizeof(float), "DDP reports %ld bytes, want %ld", reported,
             (long)N * NP * NUMEL * 4 * (long)sizeof(float));
    /* and its scratch: f32 space of the largest bucket (NUMEL), and the clip
       norm's partial sums (a few doubles); the reservation is exactly the report */
    long scratch = 0, odd = 0;
    for (int r = 0; r < N; r++) {
        long x = (long)ddp_scratch[r] - NUMEL * (long)sizeof(float);
        scratch += (long)ddp_scratch[r];
        odd += x <= 0 || x > 4096 || x % (long)sizeof(double);
    }
    VT_CHECK(!odd, "%ld ranks report a scratch other than %ld f32 bytes + the norm's partial sums (rank 0: %zu)", odd,
             NUMEL * (long)sizeof(float), ddp_scratch[0]);
    VT_CHECK(s_ddp.device_bytes - s_mesh.device_bytes == reported + scratch,
             "the DDP's init reserved %ld bytes of device memory, it reports %ld (state %ld + scratch %ld)",
             s_ddp.device_bytes - s_mesh.device_bytes, reported + scratch, reported, scratch);
    printf("# device memory reserved %ld MiB (%ld a rank: as vs_ddp_memory_usage reports, %ld state + %ld scratch)\n",
           (s_ddp.device_bytes - s_mesh.device_bytes) >> 20, (s_ddp.device_bytes - s_mesh.device_bytes) / N,
           reported / N, scratch / N);
    VT_CHECK(checked_pages >= 2L * N * NP * NUMEL * (long)sizeof(float) / sysconf(_SC_PAGESIZE) && !resident_pages,
             "%ld of the %ld pages of the parameters and gradients are in memory (device memory was backed)",
             resident_pages, checked_pages);
}

/* The high-level path: the example GPT (examples/gpt.h: V 64, T 16, D 64, 8
   heads, 4 blocks) through vs_parallelize on PP 4 x DP x TP 8 (1F1B, 4
   microbatches of a row each a replica), two vs_train_steps, vs_train_free.
   Checked: every rank succeeds and takes both steps; ranks that differ only in
   their DP coordinate reserve the same DDP state; every device works in the
   second step (the stand-in's clock); the
   device memory vs_parallelize reserved is all returned by vs_train_free; the
   library's host memory a rank (its allocator hook) grows by less than 8 B for
   each rank added (N against N / 2 ranks); each rank's watchdog wakes at most
   once in 20 ms x ranks / cores (up to 1 s) in the second step. make test runs ZeRO-1 on 64 ranks
   alone; make test-long ZeRO-0 on N and N / 2 and ZeRO-1 on N (256, 1,024). */
enum { G_PP = 4, G_M = 4 };
static const gpt_config G_CFG = {.vocab = 64, .seq = 16, .dim = 64, .heads = 8, .layers = 4, .seed = 7};
static gpt_model_storage g_store;
static vs_model_desc g_model;
static int g_zero, g_steps[1024];
static double g_compute[1024]; /* the second step's compute busy time (the clip norm's partial sums differ by DP rank) */
static size_t g_ddp_bytes[1024];
static snap g_start, g_par, g_step1, g_step2, g_freed;
static long g_wd_timed[1024];   /* the rank's watchdog's periodic wake-ups in the second step */
static double g_step2_s[1024];  /* and that step's wall time (its call) */

static int gpt_main(vs_world* w, void* arg)
{
    (void)arg;
    int me = vs_world_rank(w), n = vs_world_size(w), dev = -1, dp = n / G_PP / TP, rows = dp * G_M;
    cudaGetDevice(&dev);
    int32_t *tok = NULL, *tgt = NULL;
    size_t bytes = sizeof(int32_t) * (size_t)rows * (size_t)G_CFG.seq;
    if (cudaMallocHost((void**)&tok, bytes) != cudaSuccess || cudaMallocHost((void**)&tgt, bytes) != cudaSuccess)
        return 1;
    gpt_batch(&G_CFG, 0, rows, tok, tgt);
    vs_batch b = gpt_batch_view(rows, G_CFG.seq, tok, tgt);
    vs_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.pp = G_PP, plan.dp = dp, plan.tp = TP, plan.schedule = VS_PIPE_1F1B, plan.microbatches = G_M;
    plan.zero = (vs_zero_stage)g_zero;
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &g_model, d.plan = &plan;
    d.optim.kind = VS_OPTIM_ADAMW, d.lr.lr = 1e-3, d.clip = 1.0;
    phase(me, &g_start);
    vs_train* t = NULL;
    CK(vs_parallelize(w, &d, &t));
    vs_ddp_memory mu;
    CK(vs_ddp_memory_usage(vs_train_ddp(t), &mu));
    g_ddp_bytes[me] = mu.params + mu.grads + mu.optim_state + mu.master + mu.gathered + mu.scratch;
    phase(me, &g_par);
    vs_train_stats st;
    CK(vs_train_step_ex(t, &b, &st));
    phase(me, &g_step1);
    CK(vs_ddp_synchronize(vs_train_ddp(t))); /* (the first step's work done: the second's device work alone) */
    double c0 = vs_strict_clock_device(dev).compute, w0 = now_s();
    long k0 = __atomic_load_n(&w->wd_timed, __ATOMIC_RELAXED);
    CK(vs_train_step_ex(t, &b, &st));
    g_wd_timed[me] = __atomic_load_n(&w->wd_timed, __ATOMIC_RELAXED) - k0;
    g_step2_s[me] = now_s() - w0;
    g_steps[me] = (int)(st.steps + st.skipped);
    phase(me, &g_step2);
    CK(vs_ddp_synchronize(vs_train_ddp(t)));
    g_compute[me] = vs_strict_clock_device(dev).compute - c0;
    CK(vs_train_free(t));
    cudaFreeHost(tok), cudaFreeHost(tgt);
    phase(me, &g_freed);
    return 0;
}

/* one run on n ranks: the library's host memory at its peak, a rank */
static size_t gpt_run(int n, int zero, int print)
{
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = n;
    ld.transport = VS_TRANSPORT_NCCL;
    ld.stack_bytes = (size_t)256 << 10;
    ld.allocator.alloc = rb_alloc, ld.allocator.free = rb_free, ld.allocator.user = &host_opts;
    memset(&host_bytes, 0, sizeof host_bytes);
    int n0 = N;
    N = n, g_zero = zero;
    pthread_barrier_destroy(&bar);
    pthread_barrier_init(&bar, NULL, (unsigned)n);
    memset(g_steps, 0, sizeof g_steps);
    snap pre = take();
    VT_OK(vs_launch_ex(&ld, gpt_main, NULL));
    snap post = take();
    size_t peak = host_bytes.peak / (size_t)n;
    if (print && !__atomic_load_n(&failed, __ATOMIC_SEQ_CST)) {
        report("GPT: launch", &pre, &g_start);
        report("GPT: vs_parallelize", &g_start, &g_par);
        report("GPT: first step", &g_par, &g_step1);
        report("GPT: second step", &g_step1, &g_step2);
        report("GPT: vs_train_free", &g_step2, &g_freed);
        report("GPT: ranks' exit", &g_freed, &post);
        printf("# GPT ZeRO-%d: the library's host memory at its peak %zu bytes a rank; vs_parallelize reserved %ld "
               "device bytes a rank\n", zero, peak, (g_par.device_bytes - g_start.device_bytes) / n);
    }
    /* the same work on every DP replica; the two steps taken; nothing left reserved */
    int dp = n / G_PP / TP, bad_steps = 0, bad_same = 0;
    for (int r = 0; r < n; r++) {
        int ref = r % TP + r / (TP * dp) * TP * dp; /* DP coordinate 0 of r's (PP, TP) */
        bad_steps += g_steps[r] != 2;
        bad_same += !(g_compute[r] > 0) || g_ddp_bytes[r] != g_ddp_bytes[ref];
    }
    VT_CHECK(!bad_steps, "%d of %d ranks did not take 2 steps (rank 0: %d)", bad_steps, n, g_steps[0]);
    wd_bound("the second step", n, g_wd_timed, g_step2_s);
    VT_CHECK(!bad_same, "%d of %d ranks' DDP memory differs from their DP replica 0's, or their device did no work in "
             "the second step", bad_same, n);
    VT_CHECK(g_freed.device_bytes == g_start.device_bytes, "vs_train_free left %ld device bytes reserved",
             g_freed.device_bytes - g_start.device_bytes);
    N = n0;
    pthread_barrier_destroy(&bar);
    pthread_barrier_init(&bar, NULL, (unsigned)N);
    return peak;
}

/* The step's skip decision reads the gradient norm back from the device: a
   cost-only stand-in that leaves a read-back of bytes nobody carried as the host
   buffer held gives each rank its own decision (a hang); one that reads them as
   zeros gives every rank the same. */
static int readback_agrees(void)
{
    double h = NAN, *d = NULL;
    cudaSetDevice(0);
    if (cudaMalloc((void**)&d, sizeof h) != cudaSuccess) return 0;
    cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
    cudaFree(d);
    return h == 0;
}

static void case_gpt(int zero)
{
    if (gpt_model(&G_CFG, &g_store, &g_model)) {
        VT_CHECK(0, "gpt_model: %s", vs_last_error());
        return;
    }
    size_t pf = gpt_run(N, zero, 1);
    if (zero || N < 256) return; /* (the memory's growth: ZeRO-0's runs in make test-long) */
    size_t ph = gpt_run(N / 2, zero, 0);
    printf("# GPT ZeRO-%d: the library's host memory at its peak %zu bytes a rank at %d ranks, %zu at %d\n", zero, pf,
           N, ph, N / 2);
    VT_CHECK(pf <= ph + 8 * (size_t)(N - N / 2) + 64,
             "the library's host memory a rank grows by 8 B or more for each rank added: %zu bytes a rank at %d, %zu "
             "at %d", pf, N, ph, N / 2);
}

/* Cost-only mode carries small copies' and send/recvs' bytes (a pipeline stage's
   header, which the receiving host reads back): rank 0 copies 256 bytes to its
   device and sends them, rank 1 receives and copies them back; 128 KiB (more
   than the 64 KiB carried) is timed only and leaves the host buffer as it was. */
static ncclUniqueId carry_id;
/* Both sides are enqueued before either synchronises its device: a
   cudaDeviceSynchronize while the peer has not enqueued its side is NCCL's
   deadlock (the stand-in's device-sync-during-collective; CI saw it once when
   rank 0 got there before rank 1 posted its receive) */
static pthread_barrier_t carry_bar;
static void* carry_rank(void* p)
{
    int r = (int)(intptr_t)p;
    cudaSetDevice(r);
    ncclComm_t c;
    VT_CHECK(ncclCommInitRank(&c, 2, carry_id, r) == ncclSuccess, "rank %d: init", r);
    size_t sizes[2] = {256, (size_t)128 << 10};
    for (int k = 0; k < 2; k++) {
        size_t n = sizes[k];
        unsigned char *h = (unsigned char*)malloc(n), *d = NULL;
        cudaMalloc((void**)&d, n);
        for (size_t i = 0; i < n; i++) h[i] = (unsigned char)(r ? 0xEE : (i * 7 + k) & 0xFF);
        if (r == 0) {
            cudaMemcpy(d, h, n, cudaMemcpyHostToDevice);
            VT_CHECK(ncclSend(d, n, ncclUint8, 1, c, 0) == ncclSuccess, "send");
            pthread_barrier_wait(&carry_bar);
        } else {
            VT_CHECK(ncclRecv(d, n, ncclUint8, 0, c, 0) == ncclSuccess, "recv");
            pthread_barrier_wait(&carry_bar);
            cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost);
            size_t bad = 0;
            for (size_t i = 0; i < n; i++) bad += h[i] != (k ? 0xEE : ((i * 7 + k) & 0xFF));
            VT_CHECK(!bad, "%zu bytes sent and read back: %zu of them not %s", n, bad, k ? "as the host held them" : "as sent");
        }
        cudaDeviceSynchronize();
        cudaFree(d);
        free(h);
    }
    ncclCommDestroy(c);
    return NULL;
}
static void case_carry(void)
{
    ncclGetUniqueId(&carry_id);
    pthread_barrier_init(&carry_bar, NULL, 2);
    pthread_t t[2];
    for (int r = 0; r < 2; r++) pthread_create(&t[r], NULL, carry_rank, (void*)(intptr_t)r);
    for (int r = 0; r < 2; r++) pthread_join(t[r], NULL);
    pthread_barrier_destroy(&carry_bar);
}

/* ... and a small read-back of device bytes nothing carried (what a kernel
   wrote: the step's norm, its loss) reads zeros, so every rank reads the same
   (it left the host buffer as it was: ranks read their own stale bytes, and
   a NaN norm skipped the optimizer on some ranks only, bench/gpu_model.c) */
static void case_uncarried(void)
{
    cudaSetDevice(0);
    size_t sizes[2] = {8, (size_t)64 << 10}; /* (a norm; the largest carried) */
    for (int k = 0; k < 2; k++) {
        size_t n = sizes[k], bad = 0;
        unsigned char *h = (unsigned char*)malloc(n), *d = NULL;
        VT_CHECK(cudaMalloc((void**)&d, n) == cudaSuccess, "cudaMalloc");
        memset(h, 0xEE, n);
        cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < n; i++) bad += h[i] != 0;
        VT_CHECK(!bad, "%zu bytes read back from device memory nothing carried: %zu of them not 0", n, bad);
        cudaFree(d);
        free(h);
    }
}

int main(void)
{
    const char* e = getenv("VS_SCALE_RANKS");
    N = e && atoi(e) > 0 ? atoi(e) : 64;
    if ((e = getenv("VS_SCALE_NUMEL")) && atol(e) > 0) NUMEL = atol(e);
    if (N % TP || N > 1024) {
        fprintf(stderr, "VS_SCALE_RANKS=%d: want a multiple of %d up to 1024\n", N, TP);
        return 2;
    }
    PP = N >= 256 ? N / 128 : 2;
    DP = N / TP / PP;
    if ((N / 2) % (TP * PP)) { /* (16 ran DP 0 at its half: a mesh that failed, its memory less than a job's) */
        fprintf(stderr, "VS_SCALE_RANKS=%d: want N / 2 a multiple of TP x PP = %d (the threads case runs N / 2 ranks "
                "too): 32, 64, ... \n", N, TP * PP);
        return 2;
    }
    char nd[16];
    snprintf(nd, sizeof nd, "%d", N);
    setenv("VS_STRICT_DEVICES", nd, 1); /* before the stand-in's first call */
    setenv("VS_STRICT_COST_ONLY", "1", 1);
    gpt_strict_register();
    pthread_barrier_init(&bar, NULL, (unsigned)N);
    char name[160];
    snprintf(name, sizeof name, "scale/%d simulated GPUs (PP %d x DP %d x TP %d): mesh, DDP step, cost only", N, PP,
             DP, TP);
    const char* only = getenv("VS_SCALE_ONLY"); /* "gpt": the GPT's cases alone (a profile of the high-level path) */
    int all = !only || strcmp(only, "gpt");
    if (all) VT_CASE(name, case_scale());
    snprintf(name, sizeof name, "scale/%d thread ranks (threads transport): mesh, groups, barrier, all-reduce, ring", N);
    if (all) VT_CASE(name, case_threads());
    snprintf(name, sizeof name, "scale/%d simulated GPUs: the example GPT through vs_parallelize (PP %d x DP %d x TP %d), "
             "2 steps, ZeRO-0", N, G_PP, N / G_PP / TP, TP);
    if (!readback_agrees()) {
        vt_skip(name, "this stand-in's cost-only read-backs differ by rank (the step's skip decision would too)");
    } else if (N > 256 && all) { /* (VS_SCALE_ONLY=gpt runs it) */
        vt_skip(name, "over 256 ranks the GPT's cases run alone (VS_SCALE_ONLY=gpt; make test-long: ~14 min and "
                "2.2 GiB at 1,024 on 2 cores, bench/RESULTS.md)");
    } else if (N % (2 * G_PP * TP) == 0) { /* (and on N / 2) */
        if (N >= 256) VT_CASE(name, case_gpt(0)); /* (make test: ZeRO-1's run alone, to keep it short) */
        snprintf(name, sizeof name, "scale/%d simulated GPUs: the example GPT through vs_parallelize, ZeRO-1", N);
        VT_CASE(name, case_gpt(1));
    }
    VT_CASE("scale/cost-only: small copies and send/recvs carry their bytes (a pipeline's headers), large ones not",
            case_carry());
    VT_CASE("scale/cost-only: a small read-back of what nothing carried (a kernel's output) reads zeros",
            case_uncarried());
    VT_CASE("strict/no violations", VT_CHECK(vs_strict_violations() == 0, "%ld violations, the first: %s",
                                             vs_strict_violations(), vs_strict_first_violation()));
    pthread_barrier_destroy(&bar);
    return vt_summary();
}
