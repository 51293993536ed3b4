/* bench/strict_counts.c - what a steady-state step costs the host on the NCCL
   path, counted (not timed) over the strict CUDA + NCCL stand-in
   (tests/strict/): no GPU, libcudart or libnccl; n thread ranks, each on its own
   simulated GPU (make bench-strict; bench/run_strict_counts.sh).

   Each path runs WARMUP steps, then STEPS steps between two snapshots of
   vs_strict_get_counts(); the table gives the differences per step and rank:
     allocs   device allocations (cudaMalloc; target 0)
     frees    device frees (cudaFree; target 0)
     syncs    host-blocking synchronisations: synchronize calls, copies that
              return when done and polled waits, counted whether or not they
              had to wait (target: at most one per training step, the one value
              the host reads: the loss or the norm; DDP steps read a loss,
              after the clip's read or after vs_sync_stream)
     h2d d2h  copies between host and device made by the library (the bench's
              own batch copies are device to device and left out; target 0, the
              one read above aside)
     libs     NVRTC libraries loaded (cudaLibraryLoadData; target 0 after the
              first step)
     kernels  kernels launched
     nccl     NCCL operations the streams ran (a group counts once)
     colls    NCCL collective calls; p2p: ncclSend/ncclRecv calls
     events   CUDA events created (target 0)
   The bench's own work (the gradient copies of a modelled backward, a device
   synchronisation before each snapshot) is subtracted.

   Paths: (a) DDP on device buffers: ZeRO-0/1/2/3 and HSDP (ZeRO-3 over DPR2 x
   DPS(n/2)), AdamW, clipped or not (4 parameters, several buckets; the
   parameters read back as a forward would, vs_ddp_param; ZeRO-3: a group a
   parameter, gathered around its forward and its backward, prefetch 1, so a
   steady step's gathers are all prefetched but the first, which the previous
   vs_ddp_step issued, and the backward's first, which the forward's last group
   kept needs none: none waited for by the host); (b) TP: vs_vocab_embedding_forward + backward +
   vs_vocab_cross_entropy (with its gradient), then the loss read to the host
   (cudaMemcpy) as a trainer makes it each step: counted, the step's one sync
   (its d2h copy is the bench's own); (c) vs_redistribute, one call per layout pair (its syncs: none, the
   snapshot's device sync is the bench's own), and the TP/SP regions
   (vs_tp_reduce_forward, vs_tp_copy_backward, vs_sp_gather_forward,
   vs_sp_scatter_forward) with vs_init_fill, per call; (d) uneven collectives: vs_all_gatherv and vs_reduce_scatterv
   with a different count on every rank (one NCCL collective at most per call;
   they were one per rank). Arguments: [steps] [warmup] (default 8 4). Exit status 1 when a
   call failed or the stand-in reported a violation; the targets are printed
   (MISS), not enforced; tests/test_strict_counts.c enforces those met. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vescale_ddp.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/strict/vs_strict.h"

/* (4 warm-up steps: the first ones fill each communicator's event pool, the
   handles in flight plus the watchdog's 4 entries of stream-ordered work) */
static int STEPS = 8, WARMUP = 4;
/* The TP, redistribute and TP/SP paths warm up at least this many steps: the
   TP/SP path makes 2 stream-ordered collectives a step on each of two
   communicators, whose pools fill over their first 9. */
enum { SC_WARM = 6 };
static pthread_barrier_t bar;
static vs_strict_counts snap0, snap1;
static long own_d2d, own_d2h, own_syncs; /* the bench's own operations in the window */
static int failed;

#define CK(x)                                                                                                          \
    do {                                                                                                               \
        vs_result r_ = (x);                                                                                            \
        if (r_) {                                                                                                      \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, vs_last_error());                             \
            __atomic_store_n(&failed, 1, __ATOMIC_SEQ_CST);                                                            \
            return 1;                                                                                                  \
        }                                                                                                              \
    } while (0)

/* Every rank calls it: all ranks here (every collective's sides enqueued, so
   the device sync below cannot deadlock beside one: the stand-in's
   device-sync-during-collective), the device drained, then the snapshot. */
static void snapshot(int me, vs_strict_counts* at, int in_window)
{
    pthread_barrier_wait(&bar);
    cudaDeviceSynchronize();
    if (in_window) __atomic_add_fetch(&own_syncs, 1, __ATOMIC_SEQ_CST);
    pthread_barrier_wait(&bar);
    if (me == 0) *at = vs_strict_get_counts();
    pthread_barrier_wait(&bar);
}

static void own_copy(void* dst, const void* src, size_t bytes, cudaStream_t st, int in_window)
{
    cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st);
    if (in_window) __atomic_add_fetch(&own_d2d, 1, __ATOMIC_SEQ_CST);
}

/* ---- (a) DDP ---------------------------------------------------------------- */

typedef struct ddp_cfg {
    vs_zero_stage zero;
    double clip; /* > 0: vs_ddp_clip_grad_norm every step; 0: none */
    int hsdp;    /* ZeRO-3 over a DPR2 x DPS(n/2) mesh (issue 34) */
} ddp_cfg;

enum { NP = 4 };
static const int64_t numel[NP] = {3000, 257, 1200, 64};

static int ddp_rank(vs_world* w, void* arg)
{
    const ddp_cfg* cfg = (const ddp_cfg*)arg;
    int me = vs_world_rank(w);
    cudaStream_t st;
    if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess) return 1;
    vs_mesh* mesh = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = vs_world_size(w);
    if (cfg->hsdp) md.shape[0] = 2, md.shape[1] = vs_world_size(w) / 2, md.dim_names[0] = "DPR", md.dim_names[1] = "DPS";
    CK(vs_mesh_init(w, &md, &mesh));
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = mesh;
    dd.zero = cfg->zero;
    if (cfg->hsdp) dd.dp_replicate_dim = "DPR", dd.dp_dim = "DPS";
    int z3 = cfg->zero == VS_ZERO_3; /* a group a parameter, gathered around its use, prefetched (the default 1) */
    dd.bucket_bytes = 4096; /* several buckets */
    dd.optim.kind = VS_OPTIM_ADAMW;
    dd.optim.weight_decay = 0.01;
    dd.stream = (void*)st;
    vs_ddp* d = NULL;
    CK(vs_ddp_init(&dd, &d));
    void* gsrc[NP];
    for (int p = 0; p < NP; p++) {
        float* f = (float*)malloc(sizeof(float) * (size_t)numel[p]);
        for (int64_t e = 0; e < numel[p]; e++) f[e] = (float)(0.01 * (double)((e * 7 + p + me) % 13) - 0.06);
        vs_ddp_param_desc pd;
        memset(&pd, 0, sizeof pd);
        char name[16];
        snprintf(name, sizeof name, "p%d", p);
        pd.name = name;
        pd.dtype = VS_F32;
        pd.ndim = 1;
        pd.shape[0] = numel[p];
        pd.data = f;
        pd.ready_group = z3 ? p + 1 : 0;
        CK(vs_ddp_add_param(d, &pd, NULL));
        gsrc[p] = vs_device_alloc(w, sizeof(float) * (size_t)numel[p]); /* the "backward's" gradients */
        cudaMemcpy(gsrc[p], f, sizeof(float) * (size_t)numel[p], cudaMemcpyHostToDevice);
        free(f);
    }
    CK(vs_ddp_finalize(d));
    /* the step's loss: a device scalar the forward writes (here a parameter
       element), copied to pinned memory on the stream and read by the host once
       a step; its copy is the bench's (not counted), its wait is the step's */
    float* dloss = (float*)vs_device_alloc(w, sizeof(float));
    float* hloss = NULL;
    if (cudaMallocHost((void**)&hloss, sizeof(float)) != cudaSuccess || !dloss) CK(VS_ERR_NOMEM);
    for (int s = 0; s < WARMUP + STEPS; s++) {
        if (s == WARMUP) snapshot(me, &snap0, 0);
        *hloss = NAN;
        for (int p = 0; p < NP; p++) { /* the forward reads the parameters (ZeRO-3: each group gathered) */
            if (z3) CK(vs_ddp_gather(d, p + 1));
            if (!vs_ddp_param(d, p)) CK(VS_ERR_STATE);
            if (p == 0) {
                own_copy(dloss, vs_ddp_param(d, 0), sizeof(float), st, s >= WARMUP);
                cudaMemcpyAsync(hloss, dloss, sizeof(float), cudaMemcpyDeviceToHost, st);
                if (s >= WARMUP) __atomic_add_fetch(&own_d2h, 1, __ATOMIC_SEQ_CST);
            }
            if (z3) CK(vs_ddp_release(d, p + 1));
        }
        CK(vs_ddp_zero_grad(d));
        for (int p = NP - 1; p >= 0; p--) {
            if (z3) CK(vs_ddp_gather(d, p + 1)); /* (the backward reads the parameters too) */
            void* g = vs_ddp_grad(d, p);
            if (!g) CK(VS_ERR_STATE);
            own_copy(g, gsrc[p], sizeof(float) * (size_t)numel[p], st, s >= WARMUP);
            if (z3) {
                CK(vs_ddp_group_ready(d, p + 1));
                CK(vs_ddp_release(d, p + 1));
            } else {
                CK(vs_ddp_grad_ready(d, p));
            }
        }
        CK(vs_ddp_finish_grad_sync(d));
        double norm = 0;
        /* the one host wait of the step: a clip's read (the loss's copy was
           queued on the stream before the clip's collective, so it is done
           when the clip returns), else vs_sync_stream */
        if (cfg->clip > 0)
            CK(vs_ddp_clip_grad_norm(d, cfg->clip, &norm));
        else
            CK(vs_sync_stream(vs_mesh_comm(mesh), st));
        if (!(*hloss == *hloss)) CK(vs_set_error(VS_ERR_STATE, "step %d: the loss was read before its copy landed", s));
        CK(vs_ddp_step(d, 1e-3));
    }
    snapshot(me, &snap1, 1);
    cudaFreeHost(hloss);
    vs_device_free(w, dloss);
    CK(vs_ddp_free(d));
    for (int p = 0; p < NP; p++) vs_device_free(w, gsrc[p]);
    CK(vs_mesh_free(mesh));
    cudaStreamDestroy(st);
    return 0;
}

/* ---- (b) TP: vocab-parallel embedding and cross-entropy --------------------- */

static int vocab_rank(vs_world* w, void* arg)
{
    (void)arg;
    int me = vs_world_rank(w);
    vs_mesh* tp = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = vs_world_size(w);
    md.dim_names[0] = "TP";
    CK(vs_mesh_init(w, &md, &tp));
    const int64_t V = 301, D = 16, n = 64;
    int64_t start = 0, rows = 0;
    CK(vs_vocab_range(tp, V, &start, &rows));
    int32_t ids[64];
    for (int i = 0; i < n; i++) ids[i] = (int32_t)((i * 37 + 5) % V);
    size_t tb = sizeof(float) * (size_t)(rows * D), lb = sizeof(float) * (size_t)(n * rows);
    float* h = (float*)calloc(1, tb + lb + 4);
    for (size_t i = 0; i < (tb + lb) / 4; i++) h[i] = (float)(0.01 * (double)((i * 13 + (size_t)me) % 29));
    void* dids = vs_device_alloc(w, sizeof ids);
    float* dtab = (float*)vs_device_alloc(w, tb + 4);
    float* dgtab = (float*)vs_device_alloc(w, tb + 4);
    float* dout = (float*)vs_device_alloc(w, sizeof(float) * (size_t)(n * D));
    float* dlg = (float*)vs_device_alloc(w, lb + 4);
    float* dgrad = (float*)vs_device_alloc(w, lb + 4);
    float* dloss = (float*)vs_device_alloc(w, sizeof(float) * (size_t)n);
    cudaMemcpy(dids, ids, sizeof ids, cudaMemcpyHostToDevice);
    cudaMemcpy(dtab, h, tb, cudaMemcpyHostToDevice);
    cudaMemcpy(dlg, (char*)h + tb, lb, cudaMemcpyHostToDevice);
    cudaMemset(dgtab, 0, tb + 4);
    float lh[64];
    int warm = WARMUP < SC_WARM ? SC_WARM : WARMUP;
    for (int s = 0; s < warm + STEPS; s++) {
        if (s == warm) snapshot(me, &snap0, 0);
        CK(vs_vocab_embedding_forward(tp, dtab, V, D, (const int32_t*)dids, n, dout));
        CK(vs_vocab_cross_entropy(tp, dlg, n, V, (const int32_t*)dids, dloss, dgrad));
        /* the backward's gradient of the embedding output: dout stands for it */
        CK(vs_vocab_embedding_backward(tp, dout, (const int32_t*)dids, n, V, D, dgtab));
        /* the loss read, as a trainer makes it each step (counted: the step's one sync; its copy is the bench's) */
        if (s >= warm) __atomic_add_fetch(&own_d2h, 1, __ATOMIC_SEQ_CST);
        if (cudaMemcpy(lh, dloss, sizeof lh, cudaMemcpyDeviceToHost) != cudaSuccess || !(lh[0] == lh[0])) {
            fprintf(stderr, "vocab: the loss read failed or is NaN\n");
            __atomic_store_n(&failed, 1, __ATOMIC_SEQ_CST);
            return 1;
        }
    }
    snapshot(me, &snap1, 1);
    void* bufs[] = {dids, dtab, dgtab, dout, dlg, dgrad, dloss};
    for (int i = 0; i < 7; i++) vs_device_free(w, bufs[i]);
    free(h);
    CK(vs_mesh_free(tp));
    return 0;
}

/* ---- (c) vs_redistribute ------------------------------------------------------ */

static const char* const pairs2d[][2] = {
    {"[S(0), R]", "[R, R]"}, {"[P, S(1)]", "[S(1), R]"}, {"[S(0), S(1)]", "[S(1), S(0)]"}, {"[P, P]", "[R, S(0)]"}};
static const char* const pairs1d[][2] = {{"[S(0)]", "[S(1)]"}, {"[P]", "[S(1)]"}, {"[S(1)]", "[R]"}, {"[P]", "[R]"}};
enum { NPAIRS = 4 };

static int redist_rank(vs_world* w, void* arg)
{
    (void)arg;
    int me = vs_world_rank(w), n = vs_world_size(w);
    vs_mesh* mesh = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    int two = n >= 4 && n % 2 == 0;
    md.shape[0] = two ? 2 : n;
    if (two) md.shape[1] = n / 2;
    CK(vs_mesh_init(w, &md, &mesh));
    const char* const(*pairs)[2] = two ? pairs2d : pairs1d;
    vs_dtensor a[NPAIRS], b[NPAIRS];
    for (int p = 0; p < NPAIRS; p++) {
        memset(&a[p], 0, sizeof a[p]);
        a[p].dtype = VS_F32;
        a[p].ndim = 3;
        a[p].shape[0] = 12, a[p].shape[1] = 10, a[p].shape[2] = 6;
        b[p] = a[p];
        CK(vs_layout_parse(mesh, pairs[p][0], &a[p].layout));
        CK(vs_layout_parse(mesh, pairs[p][1], &b[p].layout));
        int64_t na = 0, nb = 0;
        CK(vs_dtensor_local_numel(&a[p], &na));
        CK(vs_dtensor_local_numel(&b[p], &nb));
        a[p].data = vs_device_alloc(w, (size_t)na * 4 + 4);
        b[p].data = vs_device_alloc(w, (size_t)nb * 4 + 4);
        cudaMemset(a[p].data, 0, (size_t)na * 4 + 4);
    }
    int warm = WARMUP < SC_WARM ? SC_WARM : WARMUP;
    for (int s = 0; s < warm + STEPS; s++) {
        if (s == warm) snapshot(me, &snap0, 0);
        for (int p = 0; p < NPAIRS; p++) CK(vs_redistribute(&a[p], &b[p]));
    }
    snapshot(me, &snap1, 1);
    for (int p = 0; p < NPAIRS; p++) vs_device_free(w, a[p].data), vs_device_free(w, b[p].data);
    CK(vs_mesh_free(mesh));
    return 0;
}

/* ---- (c') the TP/SP regions and vs_init_fill -------------------------------------- */

enum { NTPSP = 5 }; /* calls a step */

static int tpsp_rank(vs_world* w, void* arg)
{
    (void)arg;
    int me = vs_world_rank(w), n = vs_world_size(w);
    vs_mesh* tp = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = n;
    md.dim_names[0] = "TP";
    CK(vs_mesh_init(w, &md, &tp));
    const int64_t shape[2] = {8 * n, 12}; /* [seq, hidden]: sequence parallelism shards dim 0 */
    size_t full = (size_t)(shape[0] * shape[1]), local = full / (size_t)n;
    float* x = (float*)vs_device_alloc(w, full * 4);
    float* y = (float*)vs_device_alloc(w, local * 4);
    cudaMemset(x, 0, full * 4);
    cudaMemset(y, 0, local * 4);
    vs_dtensor t;
    memset(&t, 0, sizeof t);
    t.layout.mesh = tp;
    t.layout.p[0] = vs_shard(0);
    t.dtype = VS_F32;
    t.ndim = 2;
    t.shape[0] = shape[0], t.shape[1] = shape[1];
    t.data = y;
    vs_init_desc id;
    memset(&id, 0, sizeof id);
    id.kind = VS_INIT_NORMAL, id.seed = 7, id.name = "w", id.b = 0.02;
    int warm = WARMUP < SC_WARM ? SC_WARM : WARMUP;
    for (int s = 0; s < warm + STEPS; s++) {
        if (s == warm) snapshot(me, &snap0, 0);
        CK(vs_init_fill(&t, &id));
        CK(vs_sp_gather_forward(tp, VS_F32, 2, shape, 0, y, x));
        CK(vs_tp_reduce_forward(tp, x, full, VS_F32));
        CK(vs_tp_copy_backward(tp, x, full, VS_F32));
        CK(vs_sp_scatter_forward(tp, VS_F32, 2, shape, 0, x, y));
    }
    snapshot(me, &snap1, 1);
    vs_device_free(w, x);
    vs_device_free(w, y);
    CK(vs_mesh_free(tp));
    return 0;
}

/* ---- (d) uneven collectives ------------------------------------------------------ */

static int uneven_rank(vs_world* w, void* arg)
{
    (void)arg;
    int me = vs_world_rank(w), n = vs_world_size(w);
    vs_comm* c = vs_world_comm(w);
    size_t counts[8], total = 0;
    for (int r = 0; r < n; r++) total += counts[r] = (size_t)(r * 37 + 5);
    float* a = (float*)vs_device_alloc(w, total * 4);
    float* b = (float*)vs_device_alloc(w, total * 4);
    cudaMemset(a, 0, total * 4);
    for (int s = 0; s < WARMUP + STEPS; s++) {
        if (s == WARMUP) snapshot(me, &snap0, 0);
        CK(vs_reduce_scatterv(c, a, b, counts, VS_F32, VS_OP_SUM, NULL));
        CK(vs_all_gatherv(c, b, a, counts, NULL, VS_F32, NULL));
    }
    snapshot(me, &snap1, 1);
    vs_device_free(w, a);
    vs_device_free(w, b);
    return 0;
}

/* ---- the table ------------------------------------------------------------------ */

/* One path's counts per step and rank; ok 0 when the run failed. */
typedef struct sc_row {
    int ok;
    double al, fr, sy, h2d, d2h, d2d, lib, ker, nc, co, p2p, ev;
} sc_row;

static sc_row row(const char* path, int n, int (*fn)(vs_world*, void*), void* arg, int per, double sync_target)
{
    sc_row o;
    memset(&o, 0, sizeof o);
    own_d2d = own_d2h = own_syncs = 0;
    pthread_barrier_init(&bar, NULL, (unsigned)n);
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = n;
    ld.transport = VS_TRANSPORT_NCCL;
    ld.timeout_s = 60;
    vs_result r = vs_launch_ex(&ld, fn, arg);
    pthread_barrier_destroy(&bar);
    if (r) {
        fprintf(stderr, "%s, n=%d: %s\n", path, n, vs_last_error());
        failed = 1;
        return o;
    }
    double k = (double)n * STEPS * per; /* per step and rank (per call for redistribute) */
#define D(f) ((double)(snap1.f - snap0.f))
    double al = o.al = D(device_allocs) / k, fr = o.fr = D(device_frees) / k,
           sy = o.sy = (D(host_syncs) - (double)own_syncs) / k, h2d = o.h2d = D(h2d) / k, d2h = o.d2h = (D(d2h) - (double)own_d2h) / k,
           d2d = o.d2d = (D(d2d) - (double)own_d2d) / k, lib = o.lib = D(libraries) / k, ker = o.ker = D(launches) / k,
           nc = o.nc = D(nccl_ops) / k, ev = o.ev = D(events) / k, co = o.co = D(nccl_colls) / k,
           p2p = o.p2p = D(nccl_p2p) / k;
#undef D
    o.ok = 1;
    int miss = al > 0 || fr > 0 || sy > sync_target || lib > 0 || ev > 0 || h2d > 0 || d2h > sync_target;
    printf("| %-40s | %d | %5.2f | %5.2f | %5.2f | %4.2f | %4.2f | %4.2f | %4.2f | %5.2f | %5.2f | %5.2f | %5.2f | %5.2f |%s\n",
           path, n, al, fr, sy, h2d, d2h, d2d, lib, ker, nc, co, p2p, ev, miss ? " MISS" : "");
    fflush(stdout);
    return o;
}

static const ddp_cfg cfgs[] = {{VS_ZERO_0, 0, 0}, {VS_ZERO_0, 0.05, 0}, {VS_ZERO_1, 0, 0}, {VS_ZERO_1, 0.05, 0},
                               {VS_ZERO_2, 0, 0}, {VS_ZERO_2, 0.05, 0}, {VS_ZERO_3, 0, 0}, {VS_ZERO_3, 0.05, 0},
                               {VS_ZERO_3, 0, 1}, {VS_ZERO_3, 0.05, 1}};
enum { NCFGS = (int)(sizeof cfgs / sizeof cfgs[0]) };

static void header(void)
{
    printf("per step and rank (redistribute, TP/SP: per call), after %d warm-up steps (TP, redistribute, TP/SP: at "
           "least %d), over %d steps (test_strict_counts: TP vocab over 8)\n\n", WARMUP, (int)SC_WARM, STEPS);
    printf("| path | n | allocs | frees | syncs | h2d | d2h | d2d | libs | kernels | nccl | colls | p2p | events |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
}

static sc_row ddp_row(int n, int i)
{
    char path[64];
    snprintf(path, sizeof path, "DDP %s%d AdamW%s", cfgs[i].hsdp ? "HSDP (DPR2 x DPS) ZeRO-" : "ZeRO-", (int)cfgs[i].zero,
             cfgs[i].clip > 0 ? ", clipped" : "");
    return row(path, n, ddp_rank, (void*)&cfgs[i], 1, 1);
}
static sc_row vocab_row(int n) { return row("TP vocab: embed fwd+bwd, CE, loss read", n, vocab_rank, NULL, 1, 1); }
static sc_row redist_row(int n) { return row("vs_redistribute (per call)", n, redist_rank, NULL, NPAIRS, 0); }
static sc_row tpsp_row(int n)
{
    return row("vs_tp_*, vs_sp_*, vs_init_fill (per call)", n, tpsp_rank, NULL, NTPSP, 0);
}
static sc_row uneven_row(int n) { return row("all_gatherv, reduce_scatterv (per call)", n, uneven_rank, NULL, 2, 1); }

#ifndef SC_NO_MAIN

int main(int argc, char** argv)
{
    if (argc > 1) STEPS = atoi(argv[1]);
    if (argc > 2) WARMUP = atoi(argv[2]);
    if (STEPS < 1 || WARMUP < 1) {
        fprintf(stderr, "usage: %s [steps >= 1] [warmup >= 1]\n", argv[0]);
        return 2;
    }
    header();
    const int ns[] = {2, 4};
    for (int ni = 0; ni < 2; ni++) {
        for (int i = 0; i < NCFGS; i++)
            if (!cfgs[i].hsdp || ns[ni] >= 4) ddp_row(ns[ni], i); /* (HSDP: DPS 2 at least) */
        vocab_row(ns[ni]);
        redist_row(ns[ni]);
        tpsp_row(ns[ni]);
        uneven_row(ns[ni]);
    }
    long v = vs_strict_violations();
    if (v) printf("\nstrict stand-in: %ld violations, the first: %s\n", v, vs_strict_first_violation());
    return failed || v ? 1 : 0;
}
#endif
