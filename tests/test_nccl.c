/* test_nccl.c - the NCCL transport on a real GPU (make test-gpu; 1 rank per GPU
   present, up to 8). Device buffers, every collective and dtype against host
   references, async work, groups, split, and the explicit-world bootstrap; then
   DDP / ZeRO on device buffers (the kernels NVRTC compiles at run time) against
   the same training run on host buffers and thread ranks.
   Written in the common subset of C and C++ (nvcc compiles it as CUDA C++). */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vescale_ddp.h"
#include "vs_test.h"

#include <math.h>

#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

static double val(int rank, size_t i) { return (double)((rank * 7 + (int)i * 3) % 17) - 8.0; }

static void fill(vs_dtype dt, void* h, size_t n, int rank)
{
    for (size_t i = 0; i < n; i++) {
        double v = val(rank, i);
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
        double v = dt == VS_U8 ? val(r, i) + 8 : val(r, i);
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
                VT_CHECK(get(dt, hr, (size_t)r * N + i) == (dt == VS_U8 ? val(r, i) + 8 : val(r, i)), "all_gather");
        VT_OK(vs_reduce_scatter(c, dr, ds, N, dt, VS_OP_MAX, NULL));
        cudaMemcpy(hr, ds, N * es, cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < N; i += 13) {
            double ex = dt == VS_U8 ? val(me, i) + 8 : val(me, i);
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
    vs_comm* sub = NULL;
    VT_OK(vs_comm_split(c, me % 2, me, &sub));
    VT_CHECK(sub && vs_comm_size(sub) == (n + 1 - me % 2) / 2, "split size");
    VT_OK(vs_barrier(sub, NULL));
    vs_comm_free(sub);
    VT_OK(vs_barrier(c, NULL));
    vs_device_free(w, ds);
    vs_device_free(w, dr);
    free(hs);
    free(hr);
    return 0;
}


/* ---- DDP on device buffers vs host buffers ------------------------------ */

enum { DP_MAXR = 8, DP_NP = 3, DP_MAXE = 200, DP_STEPS = 3 };
static const int64_t dp_numel[DP_NP] = {185, 19, 45}; /* w [37x5] f32, b [19] f32, h [45] bf16 */

typedef struct ddp_run {
    vs_zero_stage zero;
    vs_optim_kind kind;
    int grad_fp32;   /* bf16 parameter: f32 gradients (else bf16) */
    double clip;     /* max_norm (> 0: clip) */
    float out[DP_MAXR][DP_NP][DP_MAXE];
    double norm[DP_MAXR][DP_STEPS];
} ddp_run;

static void put(int dev, void* dst, const void* src, size_t bytes)
{
    if (dev) cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
    else memcpy(dst, src, bytes);
}

static int ddp_rank(vs_world* w, void* arg)
{
    ddp_run* R = (ddp_run*)arg;
    int me = vs_world_rank(w), n = vs_world_size(w);
    int dev = vs_world_transport(w) == VS_TRANSPORT_NCCL;
    vs_mesh* mesh = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = n;
    VT_OK(vs_mesh_init(w, &md, &mesh));
    if (!mesh) return 1;
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = mesh;
    dd.zero = R->zero;
    dd.bucket_bytes = 256; /* several buckets */
    dd.grad_fp32 = R->grad_fp32;
    dd.optim.kind = R->kind;
    dd.optim.weight_decay = 0.05;
    dd.optim.momentum = 0.9;
    dd.optim.nesterov = 1;
    vs_ddp* d = NULL;
    VT_OK(vs_ddp_init(&dd, &d));
    if (!d) return 1;
    static const char* const names[DP_NP] = {"w", "b", "h"};
    for (int p = 0; p < DP_NP; p++) {
        float f[DP_MAXE];
        uint16_t h[DP_MAXE];
        for (int e = 0; e < dp_numel[p]; e++) f[e] = (float)sin(0.37 * e + p), h[e] = vs_f32_to_bf16(f[e]);
        vs_ddp_param_desc pd;
        memset(&pd, 0, sizeof pd);
        pd.name = names[p];
        pd.dtype = p == 2 ? VS_BF16 : VS_F32;
        pd.ndim = 1;
        pd.shape[0] = dp_numel[p];
        pd.data = p == 2 ? (const void*)h : (const void*)f;
        pd.no_decay = p == 1;
        VT_OK(vs_ddp_add_param(d, &pd, NULL));
    }
    VT_OK(vs_ddp_finalize(d));
    for (int st = 0; st < DP_STEPS; st++) {
        VT_OK(vs_ddp_zero_grad(d));
        for (int p = DP_NP - 1; p >= 0; p--) {
            void* g = vs_ddp_grad(d, p);
            VT_CHECK(g != NULL, "grad %d: %s", p, vs_last_error());
            if (!g) break;
            float f[DP_MAXE];
            uint16_t h[DP_MAXE];
            for (int e = 0; e < dp_numel[p]; e++)
                f[e] = (float)(0.3 * cos(0.7 * me + 1.3 * st + 0.11 * e + p)), h[e] = vs_f32_to_bf16(f[e]);
            int half = vs_ddp_grad_dtype(d, p) != VS_F32;
            put(dev, g, half ? (const void*)h : (const void*)f, (size_t)dp_numel[p] * (half ? 2 : 4));
            VT_OK(vs_ddp_grad_ready(d, p));
        }
        VT_OK(vs_ddp_finish_grad_sync(d));
        VT_OK(vs_ddp_clip_grad_norm(d, R->clip, &R->norm[me][st]));
        VT_OK(vs_ddp_step(d, 0.01));
    }
    for (int p = 0; p < DP_NP; p++) {
        const void* v = vs_ddp_param(d, p);
        VT_CHECK(v != NULL, "param %d: %s", p, vs_last_error());
        if (!v) continue;
        uint16_t h[DP_MAXE];
        if (p == 2) {
            put(dev, h, v, (size_t)dp_numel[p] * 2);
            for (int e = 0; e < dp_numel[p]; e++) R->out[me][p][e] = vs_bf16_to_f32(h[e]);
        } else {
            put(dev, R->out[me][p], v, (size_t)dp_numel[p] * 4);
        }
    }
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

/* The device run (NCCL, n ranks) against the host run (threads, n ranks). */
static void case_ddp_device(int n, ddp_run* cfg)
{
    static ddp_run host, devr;
    host = *cfg;
    devr = *cfg;
    VT_OK(vs_launch(n, ddp_rank, &host));
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = n;
    ld.transport = VS_TRANSPORT_NCCL;
    ld.timeout_s = 60;
    VT_OK(vs_launch_ex(&ld, ddp_rank, &devr));
    double tol = cfg->grad_fp32 ? 1e-6 : 8e-3; /* bf16 gradients: NCCL and threads round their sums apart */
    for (int r = 0; r < n; r++) {
        for (int st = 0; st < DP_STEPS; st++)
            VT_CHECK(fabs(devr.norm[r][st] - host.norm[r][st]) <= 1e-6 * host.norm[r][st] + 1e-12,
                     "rank %d step %d: norm %.12g on the device, %.12g on the host", r, st, devr.norm[r][st],
                     host.norm[r][st]);
        for (int p = 0; p < DP_NP; p++)
            for (int e = 0; e < dp_numel[p]; e++) {
                double a = devr.out[r][p][e], b = host.out[r][p][e];
                double lim = p == 2 ? fabs(b) / 128 + tol : tol * (fabs(b) + 1e-3); /* bf16: 1 ulp */
                VT_CHECK(fabs(a - b) <= lim, "rank %d param %d [%d]: %.9g on the device, %.9g on the host", r, p, e,
                         a, b);
            }
    }
}

int main(void)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        vt_skip("nccl/all", "no CUDA device");
        return vt_summary();
    }
    int n = ndev > 8 ? 8 : ndev;
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
    static ddp_run cfgs[4];
    memset(cfgs, 0, sizeof cfgs);
    cfgs[0].zero = VS_ZERO_0, cfgs[0].kind = VS_OPTIM_ADAMW, cfgs[0].grad_fp32 = 1, cfgs[0].clip = 0.5;
    cfgs[1].zero = VS_ZERO_1, cfgs[1].kind = VS_OPTIM_ADAMW, cfgs[1].grad_fp32 = 1, cfgs[1].clip = 0.5;
    cfgs[2].zero = VS_ZERO_2, cfgs[2].kind = VS_OPTIM_SGD, cfgs[2].grad_fp32 = 1, cfgs[2].clip = 100;
    cfgs[3].zero = VS_ZERO_0, cfgs[3].kind = VS_OPTIM_SGD, cfgs[3].grad_fp32 = 0, cfgs[3].clip = 0.5;
    static const char* const cnames[4] = {"ZeRO-0 AdamW, clipped", "ZeRO-1 AdamW, clipped",
                                          "ZeRO-2 SGD Nesterov", "ZeRO-0 SGD, bf16 gradients, clipped"};
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "ddp/device = host, n=%d: %s", n, cnames[i]);
        VT_CASE(name, case_ddp_device(n, &cfgs[i]));
    }
    return vt_summary();
}
