/* test_nccl.c - the NCCL transport on a real GPU (make test-gpu; 1 rank per GPU
   present, up to 8). Device buffers, every collective and dtype against host
   references, async work, groups, split, and the explicit-world bootstrap; then
   DDP / ZeRO on device buffers (the kernels NVRTC compiles at run time) against
   the same training run on host buffers and thread ranks; then vs_redistribute,
   the vocab-parallel embedding and cross-entropy, vs_init_fill and
   vs_tp_reduce_forward_bias on device
   buffers (vescale_mesh.h's NVRTC kernels) against host buffers and thread ranks
   (tests/device_layout_cases.h: bit for bit up to 2 ranks; with more, the
   cross-entropy within 1e-6, as NCCL's sums may round apart).
   Written in the common subset of C and C++ (nvcc compiles it as CUDA C++). */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vescale_ddp.h"
#include "vescale_ckpt.h"
#include "vs_test.h"

#include <math.h>

#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#ifdef VS_STRICT /* built over the strict CUDA + NCCL stand-in (make test: build/test_nccl_strict) */
#include "strict/vs_strict.h"
#endif

static double tval(int rank, size_t i) { return (double)((rank * 7 + (int)i * 3) % 17) - 8.0; }

static void fill(vs_dtype dt, void* h, size_t n, int rank)
{
    for (size_t i = 0; i < n; i++) {
        double v = tval(rank, i);
        switch (dt) {
        case VS_F32: ((float*)h)[i] = (float)v; break;
        case VS_F64: ((double*)h)[i] = v; break;
        case VS_F16: ((uint16_t*)h)[i] = vs_f32_to_f16((float)v); break;
        case VS_BF16: ((uint16_t*)h)[i] = vs_f32_to_bf16((float)v); break;
        case VS_I32: ((int32_t*)h)[i] = (int32_t)v; break;
        case VS_I64: ((int64_t*)h)[i] = (int64_t)v; break;
        default: ((uint8_t*)h)[i] = (uint8_t)(v + 8); break;
        }
    }
}

static double get(vs_dtype dt, const void* h, size_t i)
{
    switch (dt) {
    case VS_F32: return ((const float*)h)[i];
    case VS_F64: return ((const double*)h)[i];
    case VS_F16: return vs_f16_to_f32(((const uint16_t*)h)[i]);
    case VS_BF16: return vs_bf16_to_f32(((const uint16_t*)h)[i]);
    case VS_I32: return ((const int32_t*)h)[i];
    case VS_I64: return (double)((const int64_t*)h)[i];
    default: return ((const uint8_t*)h)[i];
    }
}

static double ref_reduce(vs_dtype dt, vs_op op, int n, size_t i)
{
    double acc = 0;
    for (int r = 0; r < n; r++) {
        double v = dt == VS_U8 ? tval(r, i) + 8 : tval(r, i);
        if (r == 0) acc = v;
        else if (op == VS_OP_MAX) acc = v > acc ? v : acc;
        else if (op == VS_OP_MIN) acc = v < acc ? v : acc;
        else acc += v;
    }
    if (op == VS_OP_AVG) {
        acc /= n;
        if (dt == VS_I32 || dt == VS_I64 || dt == VS_U8) acc = (double)(long long)acc;
    }
    return acc;
}

static int nccl_rank(vs_world* w, void* arg)
{
    (void)arg;
    vs_comm* c = vs_world_comm(w);
    int me = vs_world_rank(w), n = vs_world_size(w);
    VT_CHECK(vs_comm_device(c) == 1, "vs_comm_device of an NCCL communicator: %d", vs_comm_device(c));
    const size_t N = 1031;
    const vs_dtype dts[] = {VS_F32, VS_F16, VS_BF16, VS_F64, VS_I32, VS_I64, VS_U8};
    void* hs = malloc(8 * N * 8);
    void* hr = malloc(8 * N * 8);
    void* ds = vs_device_alloc(w, 8 * N * 8);
    void* dr = vs_device_alloc(w, 8 * N * 8);
    VT_CHECK(ds && dr, "device alloc");
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        vs_dtype dt = dts[d];
        size_t es = vs_dtype_size(dt);
        for (int op = VS_OP_SUM; op <= VS_OP_MIN; op++) {
            fill(dt, hs, N, me);
            cudaMemcpy(ds, hs, N * es, cudaMemcpyHostToDevice);
            vs_work* wk = NULL;
            VT_OK(vs_all_reduce(c, ds, dr, N, dt, (vs_op)op, op == VS_OP_AVG ? &wk : NULL));
            if (wk) VT_OK(vs_wait(wk));
            cudaMemcpy(hr, dr, N * es, cudaMemcpyDeviceToHost);
            for (size_t i = 0; i < N; i++)
                VT_CHECK(get(dt, hr, i) == ref_reduce(dt, (vs_op)op, n, i), "all_reduce %s %s [%zu]: %g vs %g",
                         vs_dtype_name(dt), vs_op_name((vs_op)op), i, get(dt, hr, i), ref_reduce(dt, (vs_op)op, n, i));
        }
        // all-gather, then reduce-scatter of the gathered rows, broadcast, all-to-all
        fill(dt, hs, N, me);
        cudaMemcpy(ds, hs, N * es, cudaMemcpyHostToDevice);
        VT_OK(vs_all_gather(c, ds, dr, N, dt, NULL));
        cudaMemcpy(hr, dr, (size_t)n * N * es, cudaMemcpyDeviceToHost);
        for (int r = 0; r < n; r++)
            for (size_t i = 0; i < N; i += 97)
                VT_CHECK(get(dt, hr, (size_t)r * N + i) == (dt == VS_U8 ? tval(r, i) + 8 : tval(r, i)), "all_gather");
        VT_OK(vs_reduce_scatter(c, dr, ds, N, dt, VS_OP_MAX, NULL));
        cudaMemcpy(hr, ds, N * es, cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < N; i += 13) {
            double ex = dt == VS_U8 ? tval(me, i) + 8 : tval(me, i);
            VT_CHECK(get(dt, hr, i) == ex, "reduce_scatter max of identical rows");
        }
        fill(dt, hs, N, 0);
        cudaMemcpy(ds, hs, N * es, cudaMemcpyHostToDevice);
        VT_OK(vs_broadcast(c, ds, dr, N, dt, 0, NULL));
        cudaMemcpy(hr, dr, N * es, cudaMemcpyDeviceToHost);
        VT_CHECK(memcmp(hr, hs, N * es) == 0, "broadcast %s", vs_dtype_name(dt));
    }
    // grouped send/recv ring and an uneven all-gatherv
    float* h = (float*)hs;
    for (int i = 0; i < 64; i++) h[i] = (float)(me * 100 + i);
    cudaMemcpy(ds, h, 64 * 4, cudaMemcpyHostToDevice);
    VT_OK(vs_group_start(c));
    VT_OK(vs_send(c, ds, 64, VS_F32, (me + 1) % n, NULL));
    VT_OK(vs_recv(c, dr, 64, VS_F32, (me + n - 1) % n, NULL));
    VT_OK(vs_group_end(c, NULL));
    cudaMemcpy(hr, dr, 64 * 4, cudaMemcpyDeviceToHost);
    VT_CHECK(((float*)hr)[3] == (float)(((me + n - 1) % n) * 100 + 3), "ring");
    size_t counts[8] = {0}, total = 0;
    for (int r = 0; r < n; r++) total += counts[r] = (size_t)(r * 5 + 1);
    VT_OK(vs_all_gatherv(c, ds, dr, counts, NULL, VS_F32, NULL));
    cudaMemcpy(hr, dr, total * 4, cudaMemcpyDeviceToHost);
    size_t off = 0;
    for (int r = 0; r < n; r++) {
        for (size_t i = 0; i < counts[r]; i++)
            VT_CHECK(((float*)hr)[off + i] == (float)(r * 100 + (int)i), "all_gatherv");
        off += counts[r];
    }
    /* an uneven reduce-scatterv, rank 1 without a block, twice in one group (each
       its own padded scratch), then an all-gatherv in place: exact sums */
    size_t rc[8], rtotal = 0, roff = 0;
    for (int r = 0; r < n; r++) rtotal += rc[r] = (size_t)(r == 1 ? 0 : r * 3 + 2);
    for (int r = 0; r < me; r++) roff += rc[r];
    for (size_t i = 0; i < rtotal; i++) h[i] = (float)(me * 1000 + (int)i);
    cudaMemcpy(ds, h, rtotal * 4, cudaMemcpyHostToDevice);
    VT_OK(vs_group_start(c));
    VT_OK(vs_reduce_scatterv(c, ds, dr, rc, VS_F32, VS_OP_SUM, NULL));
    VT_OK(vs_reduce_scatterv(c, ds, (float*)dr + 64, rc, VS_F32, VS_OP_MAX, NULL));
    VT_OK(vs_group_end(c, NULL));
    cudaMemcpy(hr, dr, (64 + rc[me]) * 4, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < rc[me]; i++) {
        double sum = 1000.0 * n * (n - 1) / 2 + (double)n * (double)(roff + i), mx = 1000.0 * (n - 1) + (double)(roff + i);
        VT_CHECK(((float*)hr)[i] == (float)sum && ((float*)hr)[64 + i] == (float)mx,
                 "reduce_scatterv [%zu]: sum %g (want %g), max %g (want %g)", i, ((float*)hr)[i], sum,
                 ((float*)hr)[64 + i], mx);
    }
    size_t rd[8] = {0};
    for (int r = 0, o = 0; r < n; o += (int)rc[r], r++) rd[r] = (size_t)o;
    cudaMemcpy(dr, h, rtotal * 4, cudaMemcpyHostToDevice);
    VT_OK(vs_all_gatherv(c, (float*)dr + roff, dr, rc, rd, VS_F32, NULL));
    cudaMemcpy(hr, dr, rtotal * 4, cudaMemcpyDeviceToHost);
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < rc[r]; i++)
            VT_CHECK(((float*)hr)[rd[r] + i] == (float)(r * 1000 + (int)(rd[r] + i)), "all_gatherv in place");
    vs_comm* sub = NULL;
    VT_OK(vs_comm_split(c, me % 2, me, &sub));
    VT_CHECK(sub && vs_comm_size(sub) == (n + 1 - me % 2) / 2, "split size");
    VT_OK(vs_barrier(sub, NULL));
    // a caller's stream: used, then NULL gives the comm's own back; freeing the comm
    // leaves the caller's stream alive (issue 8, point 9)
    void* own = vs_comm_stream(sub);
    cudaStream_t mine;
    VT_CHECK(cudaStreamCreate(&mine) == cudaSuccess, "cudaStreamCreate");
    VT_OK(vs_comm_set_stream(sub, (void*)mine));
    VT_CHECK(vs_comm_stream(sub) == (void*)mine, "set_stream");
    VT_OK(vs_barrier(sub, NULL));
    VT_OK(vs_comm_set_stream(sub, NULL));
    VT_CHECK(vs_comm_stream(sub) == own, "NULL gives the communicator's own stream back");
    VT_OK(vs_comm_set_stream(sub, (void*)mine));
    vs_comm_free(sub);
    VT_CHECK(cudaStreamSynchronize(mine) == cudaSuccess, "the caller's stream survives vs_comm_free");
    VT_CHECK(cudaStreamDestroy(mine) == cudaSuccess, "the caller destroys its own stream");
    VT_OK(vs_barrier(c, NULL));
    vs_device_free(w, ds);
    vs_device_free(w, dr);
    free(hs);
    free(hr);
    return 0;
}


/* ---- DDP on device buffers vs host buffers ------------------------------ */

#include "ddp_model.h"

/* Each rank makes its own stream, on its own GPU (vs_launch set the device):
   a stream of device 0 given to a rank on device 1 fails its first launch. */
static int ddp_rank(vs_world* w, void* arg)
{
    dm_run* c = (dm_run*)arg;
    int nccl = vs_world_transport(w) == VS_TRANSPORT_NCCL, me = vs_world_rank(w);
    cudaStream_t st = NULL;
    if (nccl) VT_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess, "rank %d: stream", me);
    c->rank_stream[me] = (void*)st;
    int r = dm_rank(w, c, nccl);
    if (st) cudaStreamDestroy(st);
    return r;
}

/* The device run (NCCL, n ranks, a stream each) against the host run (threads). */
static void case_ddp_device(int n, dm_run* cfg)
{
    static dm_run host, devr;
    host = *cfg;
    devr = *cfg;
    host.dp = devr.dp = n;
    VT_OK(vs_launch(n, ddp_rank, &host));
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = n;
    ld.transport = VS_TRANSPORT_NCCL;
    ld.timeout_s = 60;
    VT_OK(vs_launch_ex(&ld, ddp_rank, &devr));
    /* one rank: the parameters are the same bits (NVRTC without FMA contraction,
       IEEE div/sqrt); the norm is not: the device sums its squares as a 64 x 256
       tree, the host in order (seen on an H200: 0.9e-15 to 1.3e-15 apart,
       relative), so 1e-14. More ranks: NCCL's sums round apart from the threads
       transport's, bf16 gradients after every addition (8 ranks over the strict
       stand-in: the norm 1.2e-4 apart, relative). */
    dm_compare(&devr, &host, n == 1 ? 0 : cfg->grad_fp32 ? 1e-6 : 8e-3, n == 1 ? 1e-14 : cfg->grad_fp32 ? 1e-6 : 8e-3);
}

/* ---- layouts, TP and init on device buffers vs host buffers -------------- */

#define DL_CHECK_DEVICE(p, bytes) ((void)(p), (void)(bytes))
#include "device_layout_cases.h"

static int dl_gpu_redist(vs_world* w, void* arg)
{
    int dev = *(int*)arg, n = vs_world_size(w);
    int s2[2], s1[1];
    s2[0] = n >= 4 && n % 2 == 0 ? 2 : 1;
    s2[1] = n / s2[0];
    s1[0] = n;
    if (dl_run_redistribute(w, dev, s2, 2, pairs2d, (int)(sizeof pairs2d / sizeof pairs2d[0]))) return 1;
    return dl_run_redistribute(w, dev, s1, 1, pairs1d, (int)(sizeof pairs1d / sizeof pairs1d[0]));
}

/* n NCCL ranks running fn. */
static vs_result dl_launch_nccl(int n, int (*fn)(vs_world*, void*), void* arg)
{
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = n;
    ld.transport = VS_TRANSPORT_NCCL;
    ld.timeout_s = 60;
    return vs_launch_ex(&ld, fn, arg);
}

/* The host run (threads, host buffers), then the device run (NCCL, device buffers). */
static void case_dl(int n, int (*fn)(vs_world*, void*))
{
    static int modes[2] = {0, 1};
    dl_reset();
    VT_OK(vs_launch(n, fn, &modes[0]));
    VT_OK(dl_launch_nccl(n, fn, &modes[1]));
    dl_all_exact = n <= 2;
    dl_compare(n);
}

/* vs_redistribute with the mesh's communicator on a caller's stream (its
   submeshes keep their own streams): the input copied in on that stream just
   before the call, the result copied out on it right after, no host sync
   between; only the library orders its steps' streams with the caller's (the
   stand-in reports a missing wait, and its random delays give wrong values,
   without it). Three rounds with different values. */
static int dl_caller_stream(vs_world* w, void* arg)
{
    (void)arg;
    int n = vs_world_size(w), two = n >= 4 && n % 2 == 0;
    cudaStream_t st;
    VT_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess, "cudaStreamCreateWithFlags");
    vs_mesh* mesh = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = two ? 2 : n;
    if (two) md.shape[1] = n / 2;
    VT_OK(vs_mesh_init(w, &md, &mesh));
    if (!mesh) return 1;
    VT_OK(vs_comm_set_stream(vs_mesh_comm(mesh), (void*)st));
    vs_dtensor t[2]; /* source, destination */
    memset(&t[0], 0, sizeof t[0]);
    t[0].dtype = VS_F32, t[0].ndim = 3, t[0].shape[0] = 6, t[0].shape[1] = 8, t[0].shape[2] = 3;
    t[1] = t[0];
    VT_OK(vs_layout_parse(mesh, two ? "[S(0), S(1)]" : "[S(0)]", &t[0].layout));
    VT_OK(vs_layout_parse(mesh, two ? "[S(1), S(0)]" : "[S(1)]", &t[1].layout));
    int64_t ne[2], ls[2][3], off[2][3];
    float* h[3]; /* the source's values, the destination's as they should come, as they came */
    for (int k = 0; k < 2; k++) {
        VT_OK(vs_dtensor_local_numel(&t[k], &ne[k]));
        VT_OK(vs_layout_local(&t[k].layout, 3, t[k].shape, vs_mesh_rank(mesh), ls[k], off[k]));
        t[k].data = vs_device_alloc(w, (size_t)ne[k] * 4 + 4);
        VT_CHECK(cudaMallocHost((void**)&h[k], (size_t)ne[k] * 4 + 4) == cudaSuccess, "cudaMallocHost");
    }
    VT_CHECK(cudaMallocHost((void**)&h[2], (size_t)ne[1] * 4 + 4) == cudaSuccess, "cudaMallocHost");
    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < 2; k++) {
            int64_t i = 0;
            for (int64_t x = 0; x < ls[k][0]; x++)
                for (int64_t y = 0; y < ls[k][1]; y++)
                    for (int64_t z = 0; z < ls[k][2]; z++, i++)
                        h[k][i] = (float)val((uint64_t)(((off[k][0] + x) * 8 + off[k][1] + y) * 3 + off[k][2] + z), round);
        }
        VT_CHECK(cudaMemcpyAsync(t[0].data, h[0], (size_t)ne[0] * 4, cudaMemcpyHostToDevice, st) == cudaSuccess, "in");
        VT_OK(vs_redistribute(&t[0], &t[1]));
        VT_CHECK(cudaMemcpyAsync(h[2], t[1].data, (size_t)ne[1] * 4, cudaMemcpyDeviceToHost, st) == cudaSuccess, "out");
        VT_CHECK(cudaStreamSynchronize(st) == cudaSuccess, "cudaStreamSynchronize");
        for (int64_t i = 0; i < ne[1]; i++)
            if (h[2][i] != h[1][i]) {
                VT_CHECK(0, "round %d: element %lld is %g, want %g", round, (long long)i, h[2][i], h[1][i]);
                break;
            }
    }
    VT_OK(vs_comm_set_stream(vs_mesh_comm(mesh), NULL));
    for (int k = 0; k < 2; k++) vs_device_free(w, t[k].data), cudaFreeHost(h[k]);
    cudaFreeHost(h[2]);
    VT_OK(vs_mesh_free(mesh));
    VT_CHECK(cudaStreamDestroy(st) == cudaSuccess, "cudaStreamDestroy");
    return 0;
}

/* ---- checkpoints and a mesh on a split communicator, over NCCL ------------ */

/* A device tensor (Shard(0) over the ranks), a host tensor and a blob saved,
   sync then async, and loaded back into fresh buffers: the checkpointer's own
   metadata collectives must hand NCCL device memory (NCCL_CHECK_POINTERS=1,
   set in main, refuses a host pointer). Then a mesh on a split communicator,
   whose world ranks are all-gathered the same way. */
static int ckpt_rank(vs_world* w, void* arg)
{
    const char* dir = (const char*)arg;
    int me = vs_world_rank(w), n = vs_world_size(w);
    vs_mesh* m = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = n;
    VT_OK(vs_mesh_init(w, &md, &m));
    vs_ckpt* ck = NULL;
    vs_ckpt_desc cd;
    memset(&cd, 0, sizeof cd);
    cd.mesh = m;
    VT_OK(vs_ckpt_init(&cd, &ck));
    if (!ck) return 1;
    enum { ROWS = 4, COLS = 33 };
    float h[ROWS * COLS], back[ROWS * COLS], host[7], host2[7];
    for (int i = 0; i < ROWS * COLS; i++) h[i] = (float)(me * 1000 + i) * 0.5f;
    for (int i = 0; i < 7; i++) host[i] = (float)i - 3.0f + (float)me, host2[i] = 0;
    unsigned char blob[5] = {1, 2, 3, 4, 5}, blob2[8] = {0};
    void* d = vs_device_alloc(w, sizeof h);
    void* d2 = vs_device_alloc(w, sizeof h);
    cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
    cudaMemset(d2, 0, sizeof h);
    vs_ckpt_entry e[3];
    memset(e, 0, sizeof e);
    e[0].name = "w", e[0].t.dtype = VS_F32, e[0].t.ndim = 2;
    e[0].t.shape[0] = (int64_t)ROWS * n, e[0].t.shape[1] = COLS;
    e[0].t.layout.mesh = m, e[0].t.layout.p[0] = vs_shard(0), e[0].t.data = d, e[0].device = 1;
    e[1].name = "host", e[1].t.dtype = VS_F32, e[1].t.ndim = 1, e[1].t.shape[0] = 7 * n;
    e[1].t.layout.mesh = m, e[1].t.layout.p[0] = vs_shard(0), e[1].t.data = host;
    e[2].name = "blob", e[2].kind = VS_CKPT_BLOB, e[2].blob = blob, e[2].blob_bytes = sizeof blob;
    char path[512];
    for (int async = 0; async < 2; async++) {
        snprintf(path, sizeof path, "%s/step-%d", dir, async);
        vs_ckpt_save_opts so;
        memset(&so, 0, sizeof so);
        so.async = async;
        VT_OK(vs_ckpt_save(ck, path, e, 3, &so));
        VT_OK(vs_ckpt_wait(ck));
        vs_ckpt_entry l[3];
        memcpy(l, e, sizeof l);
        l[0].t.data = d2, l[1].t.data = host2, l[2].blob = blob2, l[2].blob_bytes = sizeof blob2;
        int loaded[3] = {0, 0, 0};
        VT_OK(vs_ckpt_load(ck, path, l, 3, loaded));
        cudaMemcpy(back, d2, sizeof back, cudaMemcpyDeviceToHost);
        VT_CHECK(loaded[0] && loaded[1] && loaded[2] && !memcmp(back, h, sizeof h) && !memcmp(host, host2, sizeof host) &&
                     l[2].blob_bytes == sizeof blob && !memcmp(blob, blob2, sizeof blob),
                 "ckpt on NCCL (async %d): loaded %d %d %d, the values differ", async, loaded[0], loaded[1], loaded[2]);
        cudaMemset(d2, 0, sizeof h);
        memset(host2, 0, sizeof host2);
    }
    char latest[512];
    VT_OK(vs_ckpt_latest(dir, latest, sizeof latest));
    VT_OK(vs_ckpt_free(ck));
    vs_device_free(w, d);
    vs_device_free(w, d2);
    // a mesh on a split communicator (its ranks' world ranks gathered over NCCL)
    vs_comm* sub = NULL;
    VT_OK(vs_comm_split(vs_world_comm(w), 0, n - 1 - me, &sub));
    vs_mesh* sm = NULL;
    vs_mesh_desc sd;
    memset(&sd, 0, sizeof sd);
    sd.shape[0] = n;
    sd.comm = sub;
    VT_OK(vs_mesh_init(w, &sd, &sm));
    VT_CHECK(sm && vs_mesh_rank(sm) == n - 1 - me, "mesh on a split communicator: rank %d, want %d",
             sm ? vs_mesh_rank(sm) : -1, n - 1 - me);
    VT_OK(vs_mesh_free(sm));
    VT_OK(vs_comm_free(sub));
    VT_OK(vs_mesh_free(m));
    return 0;
}

#ifdef VS_STRICT
/* ---- faults over NCCL (the strict stand-in: a peer can fail, hang or abort) ---- */

#include <unistd.h>

typedef struct fault_run {
    int kind;              /* 0 peer fails, 1 peer hangs, 2 unwaited work on a hung peer, 3 peer aborts during vs_test,
                              4 peer hangs under stream-ordered work, 5 peer fails under stream-ordered work */
    vs_result got[2];      /* what each rank's call returned */
    int waited_ok;         /* 4, 5: vs_wait_stream returned VS_OK (it does not wait) */
    char msg[2][512];
} fault_run;

static int fault_rank(vs_world* w, void* arg)
{
    fault_run* f = (fault_run*)arg;
    int me = vs_world_rank(w);
    vs_comm* c = vs_world_comm(w);
    float* d = (float*)vs_device_alloc(w, 64 * sizeof(float));
    if (!d) return vs_set_error(VS_ERR_NOMEM, "fault_rank: no device memory");
    cudaMemset(d, 0, 64 * sizeof(float));
    vs_result r = VS_OK;
    if (me == 1) {
        if (f->kind == 0 || f->kind == 5) {
            if (f->kind == 5) usleep(300 * 1000); /* after rank 0's stream waits on the all-reduce */
            vs_device_free(w, d);
            return vs_set_error(VS_ERR_INVALID, "rank 1 gives up before the all-reduce");
        }
        if (f->kind == 3) {
            usleep(200 * 1000);
            r = vs_comm_abort(c);
            f->got[1] = r;
            vs_device_free(w, d);
            return VS_ERR_ABORTED;
        }
        vs_comm* sub = NULL;
        if (f->kind == 2 && vs_comm_split(c, 0, me, &sub)) return 1;
        usleep(2500 * 1000); /* hangs past rank 0's 1 s deadline, never joins */
        if (sub) vs_comm_free(sub);
        vs_device_free(w, d);
        return VS_OK;
    }
    if (f->kind == 0 || f->kind == 1) {
        r = vs_all_reduce(c, d, d, 64, VS_F32, VS_OP_SUM, NULL);
    } else if (f->kind == 4 || f->kind == 5) {
        /* stream-ordered: the host does not wait, the legacy stream does; the
           trainer's own cudaStreamSynchronize has no deadline, so only the
           watchdog (4: the timeout; 5: the failed job) releases it, and the
           next call of the communicator reports why */
        vs_work* wk = NULL;
        r = vs_all_reduce(c, d, d, 64, VS_F32, VS_OP_SUM, &wk);
        if (!r) r = vs_wait_stream(wk, NULL);
        if (!r) {
            f->waited_ok = 1;
            cudaStreamSynchronize(cudaStreamLegacy);
            r = vs_sync_stream(c, NULL);
        }
    } else if (f->kind == 2) {
        vs_comm* sub = NULL;
        r = vs_comm_split(c, 0, me, &sub);
        if (!r) {
            vs_work* wk = NULL;
            r = vs_all_reduce(sub, d, d, 64, VS_F32, VS_OP_SUM, &wk); /* rank 1 never joins */
            vs_result fr = vs_comm_free(sub); /* the work is not waited: freeing completes it, with the deadline */
            if (!r) r = fr ? fr : vs_wait(wk); /* then the work tells how it ended */
        }
    } else {
        vs_work* wk = NULL;
        r = vs_all_reduce(c, d, d, 64, VS_F32, VS_OP_SUM, &wk);
        int done = 0;
        while (!r && !done) {
            r = vs_test(wk, &done);
            usleep(1000);
        }
        if (r) vs_wait(wk); /* (releases it) */
    }
    f->got[0] = r;
    snprintf(f->msg[0], sizeof f->msg[0], "%s", r ? vs_last_error() : "");
    vs_device_free(w, d);
    return r;
}

/* A DDP job of 2 NCCL ranks whose rank 1 stalls (kind 0: sleeps past rank 0's
   deadline, never joining step 2's all-reduce) or fails (kind 1: returns an
   error there). Rank 0's second step is stream-ordered up to its one host wait,
   vs_ddp_synchronize's (_vs_ddp_sync): that wait must end in VS_ERR_TIMEOUT /
   VS_ERR_ABORTED within the communicator's deadline (a plain
   cudaStreamSynchronize there waits until the watchdog aborts the
   communicator, then reports success over an all-reduce that never ran). */
typedef struct ddp_fault_run {
    int kind;
    vs_result got;   /* rank 0: vs_ddp_step's error, else vs_ddp_synchronize's */
    double secs;     /* from step 2's start to that error */
    float before[4]; /* rank 0's parameter after step 1, and after the failed step */
    float after[4];
    char msg[512];
} ddp_fault_run;

static double ddp_fault_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int ddp_fault_rank(vs_world* w, void* arg)
{
    ddp_fault_run* f = (ddp_fault_run*)arg;
    int me = vs_world_rank(w);
    enum { N = 64 };
    vs_mesh* mesh = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = 2;
    VT_OK(vs_mesh_init(w, &md, &mesh));
    if (!mesh) return 1;
    cudaStream_t st = NULL;
    VT_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess, "cudaStreamCreate");
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = mesh;
    dd.zero = VS_ZERO_0;
    dd.optim.kind = VS_OPTIM_SGD; /* plain: no momentum, no decay */
    dd.optim.momentum = 0, dd.optim.weight_decay = 0;
    dd.stream = st;
    vs_ddp* d = NULL;
    VT_OK(vs_ddp_init(&dd, &d));
    if (!d) return 1;
    float p0[N];
    for (int e = 0; e < N; e++) p0[e] = (float)e;
    vs_ddp_param_desc pd;
    memset(&pd, 0, sizeof pd);
    pd.name = "w", pd.dtype = VS_F32, pd.ndim = 1, pd.shape[0] = N, pd.data = p0;
    VT_OK(vs_ddp_add_param(d, &pd, NULL));
    VT_OK(vs_ddp_finalize(d));
    vs_result r = VS_OK;
    for (int step = 0; step < 2 && !r; step++) {
        if (step == 1 && me == 0 && f->kind == 0) { /* the deadline short only now: step 1 waited for the */
            vs_mesh* dpm = NULL;                     /* slower rank's start (NVRTC's first compile) */
            r = vs_mesh_submesh(mesh, vs_mesh_dim_name(mesh, 0), &dpm);
            if (!r) r = vs_comm_set_timeout(vs_mesh_comm(dpm), 1);
            if (r) break;
        }
        if (step == 1 && me == 1) {
            if (f->kind == 1) {
                usleep(300 * 1000); /* after rank 0's host waits in vs_ddp_synchronize */
                vs_ddp_free(d), vs_mesh_free(mesh), cudaStreamDestroy(st);
                return vs_set_error(VS_ERR_INVALID, "rank 1 gives up in step 2");
            }
            usleep(2500 * 1000); /* past rank 0's 1 s deadline */
            break;
        }
        double t0 = ddp_fault_now();
        float g[N];
        for (int e = 0; e < N; e++) g[e] = (float)(me + 1);
        r = vs_ddp_zero_grad(d);
        void* dg = r ? NULL : vs_ddp_grad(d, 0);
        if (!r && !dg) r = VS_ERR_STATE;
        /* pageable H2D on the DDP's stream: returns once staged, no host wait */
        if (!r && cudaMemcpyAsync(dg, g, sizeof g, cudaMemcpyHostToDevice, st) != cudaSuccess) r = VS_ERR_BACKEND;
        if (!r) r = vs_ddp_grad_ready(d, 0);
        if (!r) r = vs_ddp_finish_grad_sync(d);
        if (!r) r = vs_ddp_step(d, 0.5);
        if (!r) r = vs_ddp_synchronize(d);
        if (me == 0 && step == 1) {
            f->got = r, f->secs = ddp_fault_now() - t0;
            snprintf(f->msg, sizeof f->msg, "%s", r ? vs_last_error() : "");
        }
        const void* pp = vs_ddp_param(d, 0);
        if (me == 0 && step == 0 && pp) /* 0.5 * the mean gradient 1.5 off each element; on DDP's stream */
            if (cudaMemcpyAsync(f->before, pp, sizeof f->before, cudaMemcpyDeviceToHost, st) != cudaSuccess ||
                cudaStreamSynchronize(st) != cudaSuccess)
                r = VS_ERR_BACKEND;
        if (me == 0 && step == 0 && r) snprintf(f->msg, sizeof f->msg, "step 1: %s", vs_last_error());
    }
    vs_ddp_free(d);
    vs_mesh_free(mesh);
    cudaStreamDestroy(st);
    return r;
}

static void case_ddp_fault(int kind)
{
    static ddp_fault_run f;
    memset(&f, 0, sizeof f);
    f.kind = kind;
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = 2;
    d.transport = VS_TRANSPORT_NCCL;
    d.timeout_s = 30; /* stall: rank 0's DP communicator's 1 s from step 2 on; the stand-in's hang deadline is 60 s */
    vs_result r = vs_launch_ex(&d, ddp_fault_rank, &f);
    VT_CHECK(r != VS_OK, "ddp fault %d: vs_launch succeeded", kind);
    for (int e = 0; e < 4; e++)
        VT_CHECK(f.before[e] == (float)e - 0.75f, "ddp fault %d: step 1 gave w[%d] = %g, want %g", kind, e,
                 (double)f.before[e], (double)e - 0.75);
    if (kind == 0)
        VT_CHECK(f.got == VS_ERR_TIMEOUT && strstr(f.msg, "timed out") && f.secs < 20,
                 "DDP peer stalls: rank 0's step/synchronize gave %s after %.1f s (%s), want VS_ERR_TIMEOUT within the "
                 "1 s deadline", vs_result_string(f.got), f.secs, f.msg);
    else
        VT_CHECK(f.got == VS_ERR_ABORTED && strstr(f.msg, "world rank 1 failed") && f.secs < 20,
                 "DDP peer fails: rank 0's step/synchronize gave %s after %.1f s (%s), want VS_ERR_ABORTED naming rank "
                 "1, well within the 30 s deadline", vs_result_string(f.got), f.secs, f.msg);
}

/* The mesh's own device waits under a stalled peer: rank 0 of a TP mesh of 2
   enqueues two vocab-parallel embeddings (device ids: each call's id check
   records an event on the TP stream, the second's behind the first's
   all-reduce, which waits for rank 1, who stalls past the 1 s deadline), then
   frees the mesh, which waits for the checks (_vs_ids_reclaim) and drains the
   scratch (_vs_dev_drain): with the deadline, ending in an error naming the
   fault (a cudaEventSynchronize there returned success once the watchdog had
   aborted the communicator, or never without it). */
typedef struct tp_fault_run {
    vs_result fwd[2], got;
    double secs;
    char msg[512];
} tp_fault_run;

static int tp_fault_rank(vs_world* w, void* arg)
{
    tp_fault_run* f = (tp_fault_run*)arg;
    int me = vs_world_rank(w);
    vs_mesh* tp = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = 2;
    md.dim_names[0] = "TP";
    VT_OK(vs_mesh_init(w, &md, &tp));
    if (!tp) return 1;
    int32_t hids[4] = {0, 9, 2, 15};
    float* dtab = (float*)vs_device_alloc(w, 8 * 4 * sizeof(float));
    float* dout = (float*)vs_device_alloc(w, 4 * 4 * sizeof(float));
    int32_t* dids = (int32_t*)vs_device_alloc(w, sizeof hids);
    cudaMemset(dtab, 0, 8 * 4 * sizeof(float));
    cudaMemcpy(dids, hids, sizeof hids, cudaMemcpyHostToDevice);
    vs_result r = VS_OK;
    if (me == 1) {
        usleep(2500 * 1000); /* past rank 0's 1 s deadline, never joining */
    } else {
        r = vs_comm_set_timeout(vs_mesh_comm(tp), 1); /* (short only now: the mesh's making waited for rank 1) */
        for (int i = 0; i < 2 && !r; i++) f->fwd[i] = vs_vocab_embedding_forward(tp, dtab, 16, 4, dids, 4, dout);
        double t0 = ddp_fault_now();
        r = f->got = vs_mesh_free(tp);
        f->secs = ddp_fault_now() - t0;
        snprintf(f->msg, sizeof f->msg, "%s", r ? vs_last_error() : "");
        tp = NULL;
    }
    if (tp) vs_mesh_free(tp);
    vs_device_free(w, dtab), vs_device_free(w, dout), vs_device_free(w, dids);
    return r;
}

static void case_tp_fault(void)
{
    static tp_fault_run f;
    memset(&f, 0, sizeof f);
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = 2;
    d.transport = VS_TRANSPORT_NCCL;
    d.timeout_s = 30; /* rank 0's TP communicator: 1 s once made; the stand-in's hang deadline is 60 s */
    VT_CHECK(vs_launch_ex(&d, tp_fault_rank, &f) != VS_OK, "tp fault: vs_launch succeeded");
    VT_CHECK(f.fwd[0] == VS_OK && f.fwd[1] == VS_OK, "the embeddings (enqueued, no host wait) gave %s, %s",
             vs_result_string(f.fwd[0]), vs_result_string(f.fwd[1]));
    VT_CHECK((f.got == VS_ERR_TIMEOUT || f.got == VS_ERR_ABORTED) && strstr(f.msg, "vs_mesh_free") && f.secs < 20,
             "TP peer stalls: rank 0's vs_mesh_free gave %s after %.1f s (%s), want VS_ERR_TIMEOUT / VS_ERR_ABORTED "
             "within the 1 s deadline", vs_result_string(f.got), f.secs, f.msg);
}

/* NCCL takes device or pinned memory only: a malloc'd buffer is VS_ERR_INVALID
   naming it (no work starts, so the stand-in sees no host pointer); pinned
   memory all-reduces as device memory does. */
static int host_buf_rank(vs_world* w, void* arg)
{
    (void)arg;
    vs_comm* c = vs_world_comm(w);
    float* h = (float*)malloc(16 * sizeof(float));
    float* pin = NULL;
    VT_CHECK(cudaMallocHost((void**)&pin, 16 * sizeof(float)) == cudaSuccess, "cudaMallocHost");
    for (int i = 0; i < 16; i++) h[i] = 1, pin[i] = (float)(i + vs_world_rank(w));
    VT_ERR(vs_all_reduce(c, h, h, 16, VS_F32, VS_OP_SUM, NULL), VS_ERR_INVALID, "send buffer");
    VT_CHECK(strstr(vs_last_error(), "host memory") != NULL, "the message: %s", vs_last_error());
    float* d = (float*)vs_device_alloc(w, 16 * sizeof(float));
    VT_ERR(vs_broadcast(c, d, h, 16, VS_F32, 0, NULL), VS_ERR_INVALID, "receive buffer");
    VT_OK(vs_all_reduce(c, pin, pin, 16, VS_F32, VS_OP_SUM, NULL));
    for (int i = 0; i < 16; i++) VT_CHECK(pin[i] == (float)(2 * i + 1), "pinned all-reduce [%d] = %g", i, (double)pin[i]);
    /* the device entry points' arguments too, each named: a kernel would fault on them */
    vs_mesh* tp = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = 2;
    md.dim_names[0] = "TP";
    VT_OK(vs_mesh_init(w, &md, &tp));
    int32_t hids[4] = {0, 1, 2, 3};
    float* dtab = (float*)vs_device_alloc(w, 8 * 4 * sizeof(float));
    float* dout = (float*)vs_device_alloc(w, 4 * 4 * sizeof(float));
    int32_t* dids = (int32_t*)vs_device_alloc(w, sizeof hids);
    VT_ERR(vs_vocab_embedding_forward(tp, dtab, 16, 4, hids, 4, dout), VS_ERR_INVALID, "ids");
    VT_ERR(vs_vocab_embedding_forward(tp, dtab, 16, 4, dids, 4, h), VS_ERR_INVALID, "out");
    vs_dtensor t;
    memset(&t, 0, sizeof t);
    t.layout.mesh = tp, t.dtype = VS_F32, t.ndim = 1, t.shape[0] = 16, t.data = h;
    vs_init_desc id;
    memset(&id, 0, sizeof id);
    id.kind = VS_INIT_ONES, id.name = "x";
    VT_ERR(vs_init_fill(&t, &id), VS_ERR_INVALID, "data");
    VT_CHECK(strstr(vs_last_error(), "host memory") != NULL, "the message: %s", vs_last_error());
    vs_device_free(w, dtab), vs_device_free(w, dout), vs_device_free(w, dids);
    VT_OK(vs_mesh_free(tp));
    vs_device_free(w, d);
    cudaFreeHost(pin);
    free(h);
    return 0;
}

/* Every device allocation of the library goes through the allocator hooks: a
   DDP run (ZeRO-1, clipped) and a checkpoint save and load on 4 NCCL ranks
   with counting hooks make exactly the stand-in's count of cudaMalloc calls,
   and free them all. */
static long hk_allocs, hk_frees;
static void* hk_dalloc(size_t n, void* user)
{
    (void)user;
    void* p = NULL;
    if (cudaMalloc(&p, n ? n : 1) != cudaSuccess) return NULL;
    __atomic_add_fetch(&hk_allocs, 1, __ATOMIC_SEQ_CST);
    return p;
}
static void hk_dfree(void* p, void* user)
{
    (void)user;
    __atomic_add_fetch(&hk_frees, 1, __ATOMIC_SEQ_CST);
    cudaFree(p);
}

static void case_device_hooks(const char* dir)
{
    static dm_run cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.label = "hooks", cfg.zero = VS_ZERO_1, cfg.kind = VS_OPTIM_ADAMW, cfg.grad_fp32 = 1, cfg.micro = 1, cfg.clip = 0.5;
    cfg.dp = 4;
    vs_strict_counts before = vs_strict_get_counts();
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = 4;
    ld.transport = VS_TRANSPORT_NCCL;
    ld.timeout_s = 60;
    ld.allocator.device_alloc = hk_dalloc, ld.allocator.device_free = hk_dfree;
    hk_allocs = hk_frees = 0;
    VT_OK(vs_launch_ex(&ld, ddp_rank, &cfg));
    VT_OK(vs_launch_ex(&ld, ckpt_rank, (void*)dir));
    vs_strict_counts after = vs_strict_get_counts();
    VT_CHECK(hk_allocs > 0 && hk_allocs == after.device_allocs - before.device_allocs,
             "%ld device allocations through the hooks, %ld cudaMalloc calls", hk_allocs,
             after.device_allocs - before.device_allocs);
    VT_CHECK(hk_frees == hk_allocs, "%ld device allocations through the hooks, %ld freed", hk_allocs, hk_frees);
}

/* Each fault on 2 NCCL ranks: the surviving rank returns promptly with an error
   that names the cause (fail-fast in a vs_launch job: NCCL's abort reaches only
   the caller), a hung peer ends in VS_ERR_TIMEOUT at the deadline, and freeing
   a communicator with unwaited work on a hung peer returns (it never did:
   cudaEventSynchronize). */
static void case_fault(int kind)
{
    static fault_run f;
    memset(&f, 0, sizeof f);
    f.kind = kind;
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = 2;
    d.transport = VS_TRANSPORT_NCCL;
    d.timeout_s = kind == 0 || kind == 3 || kind == 5 ? 30 : 1;
    vs_result r = vs_launch_ex(&d, fault_rank, &f);
    VT_CHECK(r != VS_OK, "fault %d: vs_launch succeeded", kind);
    if (kind == 0) {
        VT_CHECK(f.got[0] == VS_ERR_ABORTED, "peer failed: rank 0 got %s (%s), want VS_ERR_ABORTED at once",
                 vs_result_string(f.got[0]), f.msg[0]);
        VT_CHECK(strstr(f.msg[0], "world rank 1 failed") && strstr(f.msg[0], "gives up"),
                 "peer failed: rank 0's error does not name the cause: %s", f.msg[0]);
        VT_CHECK(r == VS_ERR_INVALID, "peer failed: vs_launch gave %s, want the cause's VS_ERR_INVALID", vs_result_string(r));
    } else if (kind == 1) {
        /* worded as MPI's timeout (issue 33.2): the op and its number, the group, this rank */
        VT_CHECK(f.got[0] == VS_ERR_TIMEOUT && strstr(f.msg[0], "timed out") && strstr(f.msg[0], "all_reduce #1 on ") &&
                     strstr(f.msg[0], "of its 2 ranks within 1 s") &&
                     strstr(f.msg[0], "this is rank 0, world rank 0"),
                 "hung peer: rank 0 got %s (%s), want a timeout naming the all-reduce's number, the group and the rank",
                 vs_result_string(f.got[0]), f.msg[0]);
    } else if (kind == 4) {
        VT_CHECK(f.waited_ok, "stream-ordered: vs_wait_stream failed");
        VT_CHECK(f.got[0] == VS_ERR_TIMEOUT && strstr(f.msg[0], "all_reduce #") && strstr(f.msg[0], "watchdog") &&
                     strstr(f.msg[0], "vs_sync_stream"),
                 "hung peer under stream-ordered work: rank 0 got %s (%s), want the watchdog's VS_ERR_TIMEOUT naming "
                 "the all-reduce", vs_result_string(f.got[0]), f.msg[0]);
        VT_CHECK(r == VS_ERR_TIMEOUT, "hung peer under stream-ordered work: vs_launch gave %s", vs_result_string(r));
    } else if (kind == 5) {
        VT_CHECK(f.waited_ok, "stream-ordered: vs_wait_stream failed");
        VT_CHECK(f.got[0] == VS_ERR_ABORTED && strstr(f.msg[0], "world rank 1 failed") && strstr(f.msg[0], "gives up"),
                 "failed peer under stream-ordered work: rank 0 got %s (%s), want VS_ERR_ABORTED naming rank 1",
                 vs_result_string(f.got[0]), f.msg[0]);
        VT_CHECK(r == VS_ERR_INVALID, "failed peer: vs_launch gave %s, want the cause's VS_ERR_INVALID",
                 vs_result_string(r));
    } else if (kind == 2) {
        VT_CHECK(f.got[0] == VS_ERR_TIMEOUT && strstr(f.msg[0], "unwaited work"),
                 "unwaited work on a hung peer: vs_comm_free gave %s (%s)", vs_result_string(f.got[0]), f.msg[0]);
    } else {
        VT_CHECK(f.got[1] == VS_OK, "vs_comm_abort on rank 1: %s", vs_result_string(f.got[1]));
        /* the cause as the abort names it ("rank 1 (world 1) called vs_comm_abort"), or as rank 1's return does */
        VT_CHECK(f.got[0] == VS_ERR_ABORTED && strstr(f.msg[0], "vs_test") &&
                     (strstr(f.msg[0], "world rank 1") || strstr(f.msg[0], "(world 1) called vs_comm_abort")),
                 "peer aborted: rank 0's vs_test gave %s (%s)", vs_result_string(f.got[0]), f.msg[0]);
    }
}
#endif

int main(void)
{
#ifdef VS_STRICT
    setenv("VS_STRICT_DELAY_US", "100", 0); /* a random delay before every stream operation */
    setenv("VS_STRICT_HANG_S", "60", 0);    /* a stand-in wait that long is a hang: reported, then exit */
    /* even devices an H100 (sm_90: a cubin), odd ones newer than this NVRTC
       knows (12.9: PTX for its newest compute_XY) */
    setenv("VS_STRICT_CC", "9.0,12.9", 0);
#endif
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        vt_skip("nccl/all", "no CUDA device");
        return vt_summary();
    }
    int n = ndev > 8 ? 8 : ndev;
    /* NCCL checks every buffer it is given (a host pointer is ncclInvalidArgument):
       one rank on one GPU would otherwise copy host memory without complaint,
       hiding what faults across GPUs (seen on an H200 with the checkpointer). */
    setenv("NCCL_CHECK_POINTERS", "1", 0);
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = n;
    d.transport = VS_TRANSPORT_NCCL;
    d.timeout_s = 60;
    char name[64];
    snprintf(name, sizeof name, "nccl/launch/n=%d", n);
    VT_CASE(name, VT_OK(vs_launch_ex(&d, nccl_rank, NULL)));
    // the multi-process path with explicit values: a world of one
    vs_world_desc wd;
    memset(&wd, 0, sizeof wd);
    wd.transport = VS_TRANSPORT_NCCL;
    wd.world_size = 1;
    vs_world* w = NULL;
    VT_CASE("nccl/world_init/n=1", {
        VT_OK(vs_world_init(&wd, &w));
        if (w) nccl_rank(w, NULL);
        vs_world_free(w);
    });
    static dm_run cfgs[5];
    memset(cfgs, 0, sizeof cfgs);
    cfgs[0].label = "ZeRO-0 AdamW, f32 gradients for bf16, clipped";
    cfgs[0].zero = VS_ZERO_0, cfgs[0].kind = VS_OPTIM_ADAMW, cfgs[0].grad_fp32 = 1, cfgs[0].micro = 1, cfgs[0].clip = 0.5;
    cfgs[1].label = "ZeRO-1 AdamW, clipped";
    cfgs[1].zero = VS_ZERO_1, cfgs[1].kind = VS_OPTIM_ADAMW, cfgs[1].grad_fp32 = 1, cfgs[1].micro = 1, cfgs[1].clip = 0.5;
    cfgs[2].label = "ZeRO-2 SGD Nesterov";
    cfgs[2].zero = VS_ZERO_2, cfgs[2].kind = VS_OPTIM_SGD, cfgs[2].grad_fp32 = 1, cfgs[2].micro = 1, cfgs[2].clip = 100;
    cfgs[3].label = "ZeRO-0 SGD, bf16 gradients, clipped";
    cfgs[3].zero = VS_ZERO_0, cfgs[3].kind = VS_OPTIM_SGD, cfgs[3].grad_fp32 = 0, cfgs[3].micro = 1, cfgs[3].clip = 0.5;
    cfgs[4].label = "ZeRO-1 AdamW, 2 micro-batches";
    cfgs[4].zero = VS_ZERO_1, cfgs[4].kind = VS_OPTIM_ADAMW, cfgs[4].grad_fp32 = 1, cfgs[4].micro = 2, cfgs[4].clip = -1;
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "ddp/device = host, n=%d: %s", n, cfgs[i].label);
        VT_CASE(name, case_ddp_device(n, &cfgs[i]));
    }
#ifdef VS_STRICT
    /* one rank: the norm's sum of squares in the GPU's order (a 64 x 256 tree)
       against the host's sequential sum, within 1e-14 (memcmp fails here) */
    snprintf(name, sizeof name, "ddp/device = host, n=1: %s", cfgs[1].label);
    VT_CASE(name, case_ddp_device(1, &cfgs[1]));
#endif
    snprintf(name, sizeof name, "layout/device = host, n=%d: vs_redistribute", n);
    VT_CASE(name, case_dl(n, dl_gpu_redist));
    snprintf(name, sizeof name, "tp/device = host, n=%d: embedding, cross-entropy", n);
    VT_CASE(name, case_dl(n, dl_rank_vocab));
    snprintf(name, sizeof name, "tp/device = host, n=%d: vs_tp_reduce_forward_bias", n);
    VT_CASE(name, case_dl(n, dl_rank_bias));
    snprintf(name, sizeof name, "init/device = host, n=%d: vs_init_fill", n);
    VT_CASE(name, case_dl(n, dl_rank_init));
    snprintf(name, sizeof name, "layout/nccl, n=%d: redistribute on a caller's stream", n);
    VT_CASE(name, VT_OK(dl_launch_nccl(n, dl_caller_stream, NULL)));
    dl_release();
    char dir[] = "/tmp/vs_nccl_ckpt_XXXXXX";
    snprintf(name, sizeof name, "ckpt/nccl, n=%d: save, load; mesh on a split", n);
    VT_CASE(name, {
        VT_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
        vs_launch_desc cl;
        memset(&cl, 0, sizeof cl);
        cl.nranks = n;
        cl.transport = VS_TRANSPORT_NCCL;
        cl.timeout_s = 60;
        VT_OK(vs_launch_ex(&cl, ckpt_rank, dir));
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        VT_CHECK(system(cmd) == 0, "%s", cmd);
    });
#ifdef VS_STRICT
    char hdir[] = "/tmp/vs_nccl_hooks_XXXXXX";
    VT_CASE("hooks/nccl: every device allocation goes through the allocator hooks", {
        VT_CHECK(mkdtemp(hdir) != NULL, "mkdtemp");
        case_device_hooks(hdir);
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", hdir);
        VT_CHECK(system(cmd) == 0, "%s", cmd);
    });
    VT_CASE("fault/nccl: a failing peer aborts the job at once, naming it", case_fault(0));
    VT_CASE("fault/nccl: a hung peer ends at the deadline", case_fault(1));
    VT_CASE("fault/nccl: freeing unwaited work on a hung peer ends at the deadline", case_fault(2));
    VT_CASE("bad input/nccl: a plain host buffer is refused naming it, before NCCL sees it; pinned memory works",
            VT_OK(vs_launch_ex(&(vs_launch_desc){.nranks = 2, .transport = VS_TRANSPORT_NCCL}, host_buf_rank, NULL)));
    VT_CASE("launch/nccl: more ranks than GPUs is a clear error before NCCL starts", {
        vs_launch_desc d;
        memset(&d, 0, sizeof d);
        int ndev = 0;
        cudaGetDeviceCount(&ndev);
        d.nranks = ndev + 1;
        d.transport = VS_TRANSPORT_NCCL;
        vs_result r = vs_launch_ex(&d, nccl_rank, NULL);
        VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "needs its own GPU"),
                 "%d ranks on %d GPUs: %s (%s)", ndev + 1, ndev, vs_result_string(r), vs_last_error());
    });
    VT_CASE("fault/nccl: vs_test sees a peer's abort", case_fault(3));
    VT_CASE("fault/nccl: a hung peer under stream-ordered work (vs_wait_stream): the watchdog aborts at the deadline, "
            "releasing the trainer's own stream sync", case_fault(4));
    VT_CASE("fault/nccl: a failing peer under stream-ordered work: the watchdog ends it at once, naming the cause",
            case_fault(5));
    VT_CASE("fault/nccl ddp: a DDP peer that stalls in a step: vs_ddp_synchronize ends at the deadline",
            case_ddp_fault(0));
    VT_CASE("fault/nccl ddp: a DDP peer that fails in a step: vs_ddp_synchronize ends at once, naming it",
            case_ddp_fault(1));
    VT_CASE("fault/nccl tp: a TP peer that stalls: vs_mesh_free's waits for the id checks end at the deadline",
            case_tp_fault());
    vs_strict_counts sc = vs_strict_get_counts();
    printf("strict stand-in: %d devices; %ld device allocations, %ld frees, %ld host syncs, "
           "%ld/%ld/%ld H2D/D2H/D2D copies, %ld libraries loaded, %ld kernels, %ld NCCL operations\n",
           ndev, sc.device_allocs, sc.device_frees, sc.host_syncs, sc.h2d, sc.d2h, sc.d2d, sc.libraries, sc.launches,
           sc.nccl_ops);
    /* >>kernels: NVRTC compiles each kernel text (the mesh's, DDP's) once per
       process and architecture, and each image is loaded once: not per world,
       rank or vs_ddp (64 loads before the process-wide cache) */
    char targets[ST_MAXDEV][24];
    int ntargets = 0, nptx = 0;
    for (int dv = 0; dv < n; dv++) {
        int maj = 0, mnr = 0;
        char t[24] = "";
        cudaDeviceGetAttribute(&maj, cudaDevAttrComputeCapabilityMajor, dv);
        cudaDeviceGetAttribute(&mnr, cudaDevAttrComputeCapabilityMinor, dv);
        VT_OK(_vs_k_target(maj, mnr, t, sizeof t));
        int k = 0;
        while (k < ntargets && strcmp(targets[k], t)) k++;
        if (k == ntargets) snprintf(targets[ntargets++], sizeof targets[0], "%s", t), nptx += !strncmp(t, "compute_", 8);
    }
    printf("strict stand-in: %ld NVRTC compiles, %ld libraries loaded (%ld from PTX) for %d target(s):", _vs_kc.compiles,
           sc.libraries, sc.ptx_libraries, ntargets);
    for (int k = 0; k < ntargets; k++) printf(" %s", targets[k]);
    printf("\n");
    VT_CASE("strict/kernels: 2 texts compiled and loaded once per process and target",
            VT_CHECK(_vs_kc.compiles == 2 * ntargets && _vs_kc.loads == 2 * ntargets && sc.libraries == 2 * ntargets &&
                         sc.ptx_libraries == 2 * nptx,
                     "%ld compiles, %ld loads (the stand-in saw %ld, %ld from PTX) for %d targets (%d PTX)",
                     _vs_kc.compiles, _vs_kc.loads, sc.libraries, sc.ptx_libraries, ntargets, nptx));
    VT_CASE("strict/no violations", VT_CHECK(vs_strict_violations() == 0, "%ld violations, the first: %s",
                                             vs_strict_violations(), vs_strict_first_violation()));
#endif
    return vt_summary();
}
