/* test_nccl_vendor.c - vescale inside a trainer that has its own NCCL code (issue
   22, points 4-6), over the strict CUDA + NCCL stand-in (tests/strict/; 8
   simulated GPUs, a random delay before every stream operation, no violation
   allowed):
     - raw handles: the trainer takes the ncclComm_t (vs_comm_nccl_begin) and
       calls ncclAllReduce itself between vescale collectives on the same
       communicator, on its own streams (one handed in with vs_comm_set_stream,
       one more), with vescale's stream-ordered work and its watchdog running;
       every result against its formula; the calls that must not interleave
       are VS_ERR_STATE; an abort from another thread inside begin/end;
     - a non-blocking call returns without waiting: its stream is held shut by
       a host function while vs_all_reduce(..., &work) and the trainer's own
       NCCL call return, and vs_test says not done;
     - the file rendezvous: NCCL worlds of 4 processes' ranks (threads here)
       bootstrapped through init_file and VESCALE_INIT_FILE, nothing left in the
       directory; bad input naming the value;
     - vs_tp_reduce_forward_bias on device buffers (TP4, DP2 x TP2) against
       y = x W^T + b computed whole, exactly (small integers). */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vs_test.h"

#include <cuda_runtime.h>
#include <errno.h>
#include <sys/stat.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strict/vs_strict.h"

enum { N = 1000 };

/* cudaMemcpy from pageable memory returns before its copy lands; the host waits
   for it here, so every stream's later work is ordered after it (the stand-in
   sees the legacy stream's implicit order with a blocking stream only while the
   legacy stream still has work queued; a stream whose first use comes later,
   the trainer's second stream here, would otherwise be reported) */
static void upload(void* d, const float* h, size_t n)
{
    VT_CHECK(cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice) == cudaSuccess, "upload");
    VT_CHECK(cudaStreamSynchronize(cudaStreamLegacy) == cudaSuccess, "upload's sync");
}
static void download(float* h, const void* d, size_t n) { VT_CHECK(cudaMemcpy(h, d, n * 4, cudaMemcpyDeviceToHost) == cudaSuccess, "download"); }

static vs_result launch(int n, vs_rank_fn fn, void* arg)
{
    return vs_launch_ex(&(vs_launch_desc){.nranks = n, .transport = VS_TRANSPORT_NCCL, .timeout_s = 60}, fn, arg);
}

/* ---- raw handles ------------------------------------------------------------ */

static int raw_rank(vs_world* w, void* arg)
{
    (void)arg;
    vs_comm* c = vs_world_comm(w);
    int me = vs_world_rank(w), n = vs_world_size(w), dev = -1;
    cudaGetDevice(&dev);
    float *a = (float*)vs_device_alloc(w, N * 4), *b = (float*)vs_device_alloc(w, N * 4);
    float *d = (float*)vs_device_alloc(w, N * 4), *z = (float*)vs_device_alloc(w, N * 4);
    static __thread float h[N]; /* (per rank thread) */
    for (int i = 0; i < N; i++) h[i] = (float)(me + i);
    upload(a, h, N);
    for (int i = 0; i < N; i++) h[i] = (float)(2 * me + i);
    upload(b, h, N);
    for (int i = 0; i < N; i++) h[i] = (float)(me * i);
    upload(d, h, N);
    for (int i = 0; i < N; i++) h[i] = 1.0f;
    upload(z, h, N);
    /* the trainer's two streams: communication (handed in) and a second one */
    cudaStream_t mine, second;
    VT_CHECK(cudaStreamCreate(&mine) == cudaSuccess && cudaStreamCreate(&second) == cudaSuccess, "streams");
    VT_OK(vs_comm_set_stream(c, (void*)mine));
    VT_CHECK(vs_comm_stream(c) == (void*)mine, "vs_comm_stream is the trainer's stream");
    void* nc0 = vs_comm_nccl(c);
    VT_CHECK(nc0 != NULL, "vs_comm_nccl: %s", vs_last_error());
    int cnt = 0, ur = -1, cd = -1;
    if (nc0) {
        ncclCommCount((ncclComm_t)nc0, &cnt);
        ncclCommUserRank((ncclComm_t)nc0, &ur);
        ncclCommCuDevice((ncclComm_t)nc0, &cd);
    }
    VT_CHECK(cnt == n && ur == me && cd == dev, "the ncclComm_t: %d ranks, rank %d, device %d", cnt, ur, cd);
    VT_CHECK(vs_comm_mpi(c) == NULL && strstr(vs_last_error(), "nccl communicator"), "vs_comm_mpi on NCCL: %s",
             vs_last_error());

    VT_OK(vs_all_reduce(c, a, a, N, VS_F32, VS_OP_SUM, NULL)); /* vescale's */
    void* nc = NULL;
    VT_OK(vs_comm_nccl_begin(c, &nc));
    VT_CHECK(nc == nc0, "begin gives the same ncclComm_t");
    void* nc2 = NULL;
    VT_ERR(vs_comm_nccl_begin(c, &nc2), VS_ERR_STATE, "already begun");
    VT_ERR(vs_all_reduce(c, d, d, N, VS_F32, VS_OP_MAX, NULL), VS_ERR_STATE, "between vs_comm_nccl_begin");
    VT_CHECK(vs_comm_nccl(c) == nc, "vs_comm_nccl inside begin/end");
    ncclResult_t nr = ncclAllReduce(b, b, N, ncclFloat32, ncclSum, (ncclComm_t)nc, mine); /* the trainer's own */
    VT_CHECK(nr == ncclSuccess || nr == ncclInProgress, "ncclAllReduce: %d", (int)nr);
    VT_OK(vs_comm_nccl_end(c));
    VT_ERR(vs_comm_nccl_end(c), VS_ERR_STATE, "no vs_comm_nccl_begin");

    vs_work* wk = NULL; /* vescale's, stream-ordered: the second stream waits, the watchdog watches */
    VT_OK(vs_all_reduce(c, d, d, N, VS_F32, VS_OP_MAX, &wk));
    if (wk) VT_OK(vs_wait_stream(wk, (void*)second));
    VT_OK(vs_comm_nccl_begin(c, &nc)); /* the trainer's own, grouped, on its second stream */
    ncclGroupStart();
    nr = ncclAllReduce(z, z, N, ncclFloat32, ncclSum, (ncclComm_t)nc, second);
    ncclResult_t ge = ncclGroupEnd();
    VT_CHECK((nr == ncclSuccess || nr == ncclInProgress) && (ge == ncclSuccess || ge == ncclInProgress), "group %d %d",
             (int)nr, (int)ge);
    VT_OK(vs_comm_nccl_end(c));
    VT_OK(vs_all_reduce(c, a, a, N, VS_F32, VS_OP_SUM, NULL)); /* vescale's again, after both of ours */
    VT_OK(vs_sync_stream(c, (void*)second));
    VT_OK(vs_sync_stream(c, (void*)mine));
    long s = (long)n * (n - 1) / 2;
    download(h, a, N);
    for (int i = 0; i < N; i += 7) VT_CHECK(h[i] == (float)(n * (s + (long)n * i)), "a[%d] = %g", i, h[i]);
    download(h, b, N);
    for (int i = 0; i < N; i += 7) VT_CHECK(h[i] == (float)(2 * s + (long)n * i), "b[%d] = %g (the trainer's sum)", i, h[i]);
    download(h, d, N);
    for (int i = 0; i < N; i += 7) VT_CHECK(h[i] == (float)((n - 1) * i), "d[%d] = %g", i, h[i]);
    download(h, z, N);
    for (int i = 0; i < N; i += 7) VT_CHECK(h[i] == (float)n, "z[%d] = %g (the trainer's on its second stream)", i, h[i]);

    /* a split communicator has its own ncclComm_t; freeing it ends an open begin */
    vs_comm* sub = NULL;
    VT_OK(vs_comm_split(c, me % 2, me, &sub));
    if (sub) {
        void* ns = vs_comm_nccl(sub);
        int ssz = vs_comm_size(sub);
        VT_CHECK(ns && ns != nc0, "the split's ncclComm_t %p (the world's %p)", ns, nc0);
        for (int i = 0; i < N; i++) h[i] = 1.0f;
        upload(z, h, N);
        VT_OK(vs_comm_nccl_begin(sub, &ns));
        nr = ncclAllReduce(z, z, N, ncclFloat32, ncclSum, (ncclComm_t)ns, mine); /* (blocking: after the upload) */
        VT_CHECK(nr == ncclSuccess || nr == ncclInProgress, "ncclAllReduce on the split: %d", (int)nr);
        VT_OK(vs_comm_free(sub)); /* (no vs_comm_nccl_end: the free ends it) */
        download(h, z, N);
        VT_CHECK(h[0] == (float)ssz && ssz == (n + 1 - me % 2) / 2, "z on the split of %d ranks: %g", ssz, h[0]);
    }
    VT_OK(vs_comm_set_stream(c, NULL));
    VT_OK(vs_barrier(c, NULL));
    cudaStreamDestroy(mine);
    cudaStreamDestroy(second);
    vs_device_free(w, a);
    vs_device_free(w, b);
    vs_device_free(w, d);
    vs_device_free(w, z);
    return 0;
}

/* vs_comm_abort from another thread while the trainer is inside begin/end:
   end aborts the communicator and says so; the handle is gone afterwards. */
static void* abort_thread(void* p)
{
    vs_comm_abort((vs_comm*)p);
    return NULL;
}

static int abort_rank(vs_world* w, void* arg)
{
    (void)arg;
    vs_comm* c = vs_world_comm(w);
    void* nc = NULL;
    VT_OK(vs_comm_nccl_begin(c, &nc));
    pthread_t th;
    pthread_create(&th, NULL, abort_thread, c);
    pthread_join(th, NULL);
    VT_ERR(vs_comm_nccl_end(c), VS_ERR_ABORTED, "vs_comm_abort");
    VT_ERR(vs_comm_nccl(c) == NULL ? VS_ERR_ABORTED : VS_OK, VS_ERR_ABORTED, "aborted");
    VT_ERR(vs_comm_nccl_begin(c, &nc), VS_ERR_ABORTED, "vs_comm_nccl_begin");
    return 0;
}

/* ---- a non-blocking call returns without waiting ---------------------------- */

typedef struct {
    int open; /* atomic */
} gate;

static void gate_fn(void* p) /* on the stream's worker: holds the stream until the gate opens */
{
    gate* g = (gate*)p;
    double t0 = _vs_now();
    while (!__atomic_load_n(&g->open, __ATOMIC_ACQUIRE) && _vs_now() - t0 < 60) _vs_sleep_us(200);
}

static int nonblocking_rank(vs_world* w, void* arg)
{
    (void)arg;
    vs_comm* c = vs_world_comm(w);
    int n = vs_world_size(w);
    float *x = (float*)vs_device_alloc(w, N * 4), *y = (float*)vs_device_alloc(w, N * 4);
    static __thread float h[N];
    for (int i = 0; i < N; i++) h[i] = (float)i;
    upload(x, h, N);
    upload(y, h, N);
    cudaStream_t mine;
    VT_CHECK(cudaStreamCreate(&mine) == cudaSuccess, "stream");
    VT_OK(vs_comm_set_stream(c, (void*)mine));
    gate g;
    g.open = 0;
    VT_CHECK(cudaLaunchHostFunc(mine, gate_fn, &g) == cudaSuccess, "cudaLaunchHostFunc");
    vs_work* wk = NULL;
    VT_OK(vs_all_reduce(c, x, x, N, VS_F32, VS_OP_SUM, &wk)); /* returns: the stream is shut */
    int done = -1;
    if (wk) VT_OK(vs_test(wk, &done));
    VT_CHECK(done == 0, "vs_test says %d while the stream is held shut", done);
    void* nc = NULL;
    VT_OK(vs_comm_nccl_begin(c, &nc));
    ncclResult_t nr = ncclAllReduce(y, y, N, ncclFloat32, ncclSum, (ncclComm_t)nc, mine);
    VT_CHECK(nr == ncclSuccess || nr == ncclInProgress, "ncclAllReduce: %d", (int)nr);
    VT_OK(vs_comm_nccl_end(c)); /* returns too: NCCL has it, the GPU runs it later */
    __atomic_store_n(&g.open, 1, __ATOMIC_RELEASE);
    if (wk) VT_OK(vs_wait(wk));
    VT_OK(vs_sync_stream(c, (void*)mine));
    download(h, x, N);
    VT_CHECK(h[5] == (float)(5 * n), "x[5] = %g", h[5]);
    download(h, y, N);
    VT_CHECK(h[5] == (float)(5 * n), "y[5] = %g", h[5]);
    VT_OK(vs_comm_set_stream(c, NULL));
    cudaStreamDestroy(mine);
    vs_device_free(w, x);
    vs_device_free(w, y);
    return 0;
}

/* ---- the file rendezvous ---------------------------------------------------- */

typedef struct {
    const char* path; /* NULL: VESCALE_INIT_FILE */
    int rank, size;
    double timeout;
    vs_result res, ar;
    char msg[600];
    float got;
    char qfile[600];
} wrank;

static void* world_thread(void* p)
{
    wrank* a = (wrank*)p;
    vs_world_desc wd;
    memset(&wd, 0, sizeof wd);
    wd.transport = VS_TRANSPORT_NCCL;
    wd.world_size = a->size;
    wd.rank = a->rank;
    wd.local_rank = a->rank;
    wd.device_select = VS_DEVICE_EXPLICIT;
    wd.cuda_device = a->rank;
    wd.init_file = a->path;
    wd.timeout_s = a->timeout;
    vs_world* w = NULL;
    a->res = vs_world_init(&wd, &w);
    snprintf(a->msg, sizeof a->msg, "%s", a->res ? vs_last_error() : "");
    if (a->res) return NULL;
    vs_world_desc q;
    memset(&q, 0, sizeof q);
    if (vs_world_query_desc(w, &q) == VS_OK && q.init_file) snprintf(a->qfile, sizeof a->qfile, "%s", q.init_file);
    float* x = (float*)vs_device_alloc(w, 4);
    float v = (float)(a->rank + 1);
    cudaMemcpy(x, &v, 4, cudaMemcpyHostToDevice);
    a->ar = vs_all_reduce(vs_world_comm(w), x, x, 1, VS_F32, VS_OP_SUM, NULL);
    cudaMemcpy(&a->got, x, 4, cudaMemcpyDeviceToHost);
    vs_device_free(w, x);
    vs_world_free(w);
    return NULL;
}

static void run_worlds(wrank* a, int lo, int hi)
{
    pthread_t th[8];
    for (int i = lo; i < hi; i++) pthread_create(&th[i], NULL, world_thread, &a[i]);
    for (int i = lo; i < hi; i++) pthread_join(th[i], NULL);
}

/* Files left in dir (rmdir fails on a directory that is not empty). */
static int left_in(const char* dir)
{
    if (rmdir(dir) == 0) return mkdir(dir, 0700) != 0;
    return errno == ENOTEMPTY || errno == EEXIST;
}

static void case_file_worlds(void)
{
    enum { W = 4 };
    char dir[] = "/tmp/vs_nccl_file_XXXXXX", path[200];
    VT_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/nccl_id", dir);
    for (int via_env = 0; via_env < 2; via_env++) {
        if (via_env) setenv("VESCALE_INIT_FILE", path, 1);
        wrank a[W];
        memset(a, 0, sizeof a);
        for (int i = 0; i < W; i++) a[i].path = via_env ? NULL : path, a[i].rank = i, a[i].size = W, a[i].timeout = 60;
        run_worlds(a, 0, W);
        for (int i = 0; i < W; i++) {
            VT_CHECK(a[i].res == VS_OK && a[i].ar == VS_OK, "%s, rank %d: %s %s", via_env ? "VESCALE_INIT_FILE" : "init_file",
                     i, vs_result_string(a[i].res ? a[i].res : a[i].ar), a[i].msg);
            VT_CHECK(a[i].got == (float)(W * (W + 1) / 2), "rank %d: the world's all-reduce gave %g", i, a[i].got);
            VT_CHECK(!strcmp(a[i].qfile, path), "rank %d: vs_world_query_desc's init_file '%s'", i, a[i].qfile);
        }
        VT_CHECK(!left_in(dir), "files left in %s", dir);
        unsetenv("VESCALE_INIT_FILE");
    }
    /* bad input: each names the value */
    wrank b[2];
    memset(b, 0, sizeof b);
    b[0].path = "", b[0].size = 2, b[0].timeout = 5;
    run_worlds(b, 0, 1);
    VT_CHECK(b[0].res == VS_ERR_INVALID && strstr(b[0].msg, "init_file is empty"), "init_file \"\": %s", b[0].msg);
    static char longp[1200];
    memset(longp, 'x', sizeof longp - 1);
    setenv("VESCALE_INIT_FILE", longp, 1);
    memset(b, 0, sizeof b);
    b[0].size = 2, b[0].timeout = 5;
    run_worlds(b, 0, 1);
    VT_CHECK(b[0].res == VS_ERR_INVALID && strstr(b[0].msg, "VESCALE_INIT_FILE is longer"), "long VESCALE_INIT_FILE: %s",
             b[0].msg);
    unsetenv("VESCALE_INIT_FILE");
    char missing[300];
    snprintf(missing, sizeof missing, "%s/no/such/dir/id", dir);
    memset(b, 0, sizeof b);
    b[1].path = missing, b[1].rank = 1, b[1].size = 2, b[1].timeout = 60;
    run_worlds(b, 1, 2);
    VT_CHECK(b[1].res == VS_ERR_IO && strstr(b[1].msg, missing), "a missing directory: %s", b[1].msg);
    memset(b, 0, sizeof b); /* rank 0 alone: its timeout names the file and the missing rank */
    b[0].path = path, b[0].size = 2, b[0].timeout = 0.5;
    run_worlds(b, 0, 1);
    VT_CHECK(b[0].res == VS_ERR_TIMEOUT && strstr(b[0].msg, path) && strstr(b[0].msg, "rank(s) 1"), "rank 0 alone: %s",
             b[0].msg);
    VT_CHECK(!left_in(dir), "files left in %s after the errors", dir);
    rmdir(dir);
}

/* ---- the row-parallel bias on device buffers -------------------------------- */

typedef struct {
    int dp, tp;
    vs_dtype dt, bdt;
} bias_cfg;

static double ival(uint32_t seed, long i) { return (double)((int)((seed * 2654435761u ^ (uint32_t)i * 40503u) % 7u) - 3); }

static void put(vs_dtype dt, void* p, long i, double v)
{
    if (dt == VS_F32) ((float*)p)[i] = (float)v;
    else if (dt == VS_F64) ((double*)p)[i] = v;
    else if (dt == VS_BF16) ((uint16_t*)p)[i] = vs_f32_to_bf16((float)v);
    else ((uint16_t*)p)[i] = vs_f32_to_f16((float)v);
}
static double get(vs_dtype dt, const void* p, long i)
{
    if (dt == VS_F32) return ((const float*)p)[i];
    if (dt == VS_F64) return ((const double*)p)[i];
    if (dt == VS_BF16) return vs_bf16_to_f32(((const uint16_t*)p)[i]);
    return vs_f16_to_f32(((const uint16_t*)p)[i]);
}

static int bias_rank(vs_world* w, void* arg)
{
    const bias_cfg* c = (const bias_cfg*)arg;
    enum { B = 5, K = 8, NO = 6 };
    vs_mesh* mesh = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = c->dp, md.shape[1] = c->tp;
    md.dim_names[0] = "DP", md.dim_names[1] = "TP";
    VT_OK(vs_mesh_init(w, &md, &mesh));
    vs_mesh* tp = NULL;
    if (mesh) VT_OK(vs_mesh_submesh(mesh, "TP", &tp));
    if (!tp) return 1;
    int coord = vs_mesh_rank(tp), dpc = vs_mesh_coord_along(mesh, "DP");
    int kl = K / c->tp, k0 = coord * kl;
    size_t es = vs_dtype_size(c->dt), bes = vs_dtype_size(c->bdt);
    unsigned char hy[B * NO * 8], hb[NO * 8];
    double ref[B * NO];
    for (long j = 0; j < NO; j++) put(c->bdt, hb, j, ival(3, j));
    for (long i = 0; i < B; i++)
        for (long j = 0; j < NO; j++) {
            double part = 0, whole = 0;
            for (long k = 0; k < K; k++) {
                double p = ival(10 + (uint32_t)dpc, i * K + k) * ival(20, j * K + k);
                whole += p;
                if (k >= k0 && k < k0 + kl) part += p;
            }
            put(c->dt, hy, i * NO + j, part);
            ref[i * NO + j] = whole + ival(3, j);
        }
    void* y = vs_device_alloc(w, B * NO * es);
    void* b = vs_device_alloc(w, NO * bes);
    cudaMemcpy(y, hy, B * NO * es, cudaMemcpyHostToDevice);
    cudaMemcpy(b, hb, NO * bes, cudaMemcpyHostToDevice);
    VT_OK(vs_tp_reduce_forward_bias(tp, y, B, NO, c->dt, b, c->bdt));
    cudaMemcpy(hy, y, B * NO * es, cudaMemcpyDeviceToHost); /* the caller's (legacy) stream: after the call's work */
    for (long i = 0; i < B * NO; i++)
        VT_CHECK(get(c->dt, hy, i) == ref[i], "rank %d: y[%ld] = %g, want %g", vs_world_rank(w), i, get(c->dt, hy, i),
                 ref[i]);
    /* a host buffer is refused, naming it, before anything runs */
    VT_ERR(vs_tp_reduce_forward_bias(tp, hy, B, NO, c->dt, b, c->bdt), VS_ERR_INVALID, "y");
    VT_CHECK(strstr(vs_last_error(), "host memory") != NULL, "%s", vs_last_error());
    vs_device_free(w, y);
    vs_device_free(w, b);
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

int main(void)
{
    setenv("VS_STRICT_DELAY_US", "100", 0);
    setenv("VS_STRICT_HANG_S", "60", 0);
    setenv("NCCL_CHECK_POINTERS", "1", 0);
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 4) {
        vt_skip("vendor/all", "fewer than 4 devices");
        return vt_summary();
    }
    VT_CASE("raw/nccl n=4: the trainer's own ncclAllReduce between vescale's on one communicator, on its two streams",
            VT_OK(launch(4, raw_rank, NULL)));
    VT_CASE("raw/nccl n=1: vs_comm_abort from another thread inside begin/end: end aborts", {
        vs_result r = launch(1, abort_rank, NULL);
        VT_CHECK(r == VS_ERR_ABORTED && strstr(vs_last_error(), "vs_comm_abort"), "vs_launch: %s %s",
                 vs_result_string(r), vs_last_error());
    });
    VT_CASE("raw/nccl n=2: a non-blocking call returns while its stream is held shut",
            VT_OK(launch(2, nonblocking_rank, NULL)));
    VT_CASE("bootstrap/nccl n=4 through the init file (desc and VESCALE_INIT_FILE); bad input", case_file_worlds());
    static const bias_cfg biases[] = {
        {1, 4, VS_F32, VS_F32}, {2, 2, VS_F32, VS_F32}, {1, 4, VS_BF16, VS_F32},
        {2, 2, VS_BF16, VS_BF16}, {1, 2, VS_F16, VS_F16}, {1, 4, VS_F64, VS_F64},
    };
    for (int i = 0; i < (int)(sizeof biases / sizeof biases[0]); i++) {
        const bias_cfg* c = &biases[i];
        char name[128];
        snprintf(name, sizeof name, "tp/nccl DP%d x TP%d: vs_tp_reduce_forward_bias, %s y, %s bias = x W^T + b", c->dp,
                 c->tp, vs_dtype_name(c->dt), vs_dtype_name(c->bdt));
        VT_CASE(name, VT_OK(launch(c->dp * c->tp, bias_rank, (void*)c)));
    }
    VT_CASE("strict/no violations", VT_CHECK(vs_strict_violations() == 0, "%ld violations, the first: %s",
                                             vs_strict_violations(), vs_strict_first_violation()));
    return vt_summary();
}
