/* test_ddp_device.c - the device path of vescale_ddp.h (what an NCCL build runs on
   a GPU), run here without one.

   The test builds vescale_ddp.h's CUDA path against a stand-in CUDA runtime
   (tests/mock/cuda_runtime.h, defined below): "device" memory is host memory
   from the world's device allocator hook, tracked by the mock, and
   cudaLaunchKernel runs the host build of the kernel by the handle DDP got from
   cudaLibraryGetKernel. NVRTC is the real one: vs_ddp_finalize compiles the
   kernels for sm_90 as it would on an H100. What this checks, that the kernel
   tests and the host DDP tests cannot: every copy, memset and kernel argument of
   the device path (device pointers in bounds of their allocations, host pointers
   never handed to a kernel, argument order and types as the kernels declare
   them), every async call on the trainer's stream, each bucket collective ordered
   after that stream (an event recorded on it and waited for), no device memory
   leaked, and results bit-identical to the same run on the host path (the same
   transport and kernel text, so any difference is a plumbing bug). What it
   cannot check: real asynchrony on a GPU (tests/test_nccl.c does, on one).

   Built with -DVESCALE_NVRTC -Itests/mock (Makefile); without NVRTC it skips. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#ifdef VESCALE_NVRTC
static int mock_force_device; /* the run's mode: 1 device path, 0 host path */
#define _VS_DDP_CUDA 1
#define _VS_MESH_CUDA 1 /* vs_kernels_get: the kernel loader DDP shares with the mesh */
#define _VS_DDP_FORCE_DEVICE mock_force_device
#endif
#define VESCALE_IMPLEMENTATION
#include "vescale_ddp.h"
#include "tests/vs_test.h"

#ifdef VESCALE_NVRTC
#include <math.h>

/* ---- the stand-in runtime --------------------------------------------------- */

#define MOCK_STREAM ((cudaStream_t)(uintptr_t)0x5151)
static const char* const mock_knames[_VS_KI_N] = {"vs_k_adamw", "vs_k_sgd",   "vs_k_to_f32", "vs_k_from_f32",
                                                  "vs_k_add_f32", "vs_k_scale", "vs_k_sumsq", "vs_k_canary",
                                                  "vs_k_canary_check"};
#define MOCK_KERNEL_NAMES mock_knames
#define MOCK_NKERNELS _VS_KI_N
#include "mock/mock_device.h"

static long mock_launches[_VS_KI_N], mock_recorded, mock_waited;
static int mock_fail_launch;

#define MOCK_STREAM_IS(st, what) VT_CHECK((st) == MOCK_STREAM, "mock: %s on stream %p, not the trainer's", (what), (void*)(st))

static size_t mock_dsz(int t) { return t == 0 ? 4 : 2; }

/* Runs the host build of kernel `func` with the arguments as the kernel declares them. */
cudaError_t cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void** a, size_t shmem, cudaStream_t st)
{
    int ki = (int)((uintptr_t)func - 0x1000);
    VT_CHECK(ki >= 0 && ki < _VS_KI_N, "mock: launch of an unknown kernel %p", func);
    if (ki < 0 || ki >= _VS_KI_N) return cudaErrorInvalidValue;
    MOCK_STREAM_IS(st, mock_knames[ki]);
    VT_CHECK(shmem == 0 && block.x == _VS_KTHREADS && block.y == 1 && block.z == 1 && grid.y == 1 && grid.z == 1 &&
                 grid.x >= 1,
             "mock: %s launched with grid %u block %u shmem %zu", mock_knames[ki], grid.x, block.x, shmem);
    if (mock_fail_launch) return cudaErrorInvalidValue;
    __atomic_add_fetch(&mock_launches[ki], 1, __ATOMIC_SEQ_CST);
    switch (ki) {
    case _VS_KI_ADAMW: {
        float *p = *(float**)a[0], *m1 = *(float**)a[2], *m2 = *(float**)a[3];
        const float* g = *(const float**)a[1];
        long long n = *(long long*)a[4];
        MOCK_DEV(p, n * 4, "adamw p");
        MOCK_DEV(g, n * 4, "adamw g");
        MOCK_DEV(m1, n * 4, "adamw m1");
        MOCK_DEV(m2, n * 4, "adamw m2");
        _vs_hk_adamw(p, g, m1, m2, n, *(float*)a[5], *(float*)a[6], *(float*)a[7], *(float*)a[8], *(float*)a[9],
                     *(float*)a[10], *(float*)a[11], *(float*)a[12]);
        break;
    }
    case _VS_KI_SGD: {
        float *p = *(float**)a[0], *m1 = *(float**)a[2];
        const float* g = *(const float**)a[1];
        long long n = *(long long*)a[3];
        MOCK_DEV(p, n * 4, "sgd p");
        MOCK_DEV(g, n * 4, "sgd g");
        if (m1) MOCK_DEV(m1, n * 4, "sgd m1");
        _vs_hk_sgd(p, g, m1, n, *(float*)a[4], *(float*)a[5], *(float*)a[6], *(int*)a[7]);
        break;
    }
    case _VS_KI_TO_F32: {
        float* dst = *(float**)a[0];
        const void* src = *(const void**)a[1];
        int t = *(int*)a[2];
        long long n = *(long long*)a[3];
        MOCK_DEV(dst, n * 4, "to_f32 dst");
        MOCK_DEV(src, n * mock_dsz(t), "to_f32 src");
        _vs_hk_to_f32(dst, src, t, n);
        break;
    }
    case _VS_KI_FROM_F32: {
        void* dst = *(void**)a[0];
        int t = *(int*)a[1];
        const float* src = *(const float**)a[2];
        long long n = *(long long*)a[3];
        MOCK_DEV(dst, n * mock_dsz(t), "from_f32 dst");
        MOCK_DEV(src, n * 4, "from_f32 src");
        _vs_hk_from_f32(dst, t, src, n);
        break;
    }
    case _VS_KI_ADD_F32: {
        float* acc = *(float**)a[0];
        const void* src = *(const void**)a[1];
        int t = *(int*)a[2];
        long long n = *(long long*)a[3];
        MOCK_DEV(acc, n * 4, "add_f32 acc");
        MOCK_DEV(src, n * mock_dsz(t), "add_f32 src");
        _vs_hk_add_f32(acc, src, t, n);
        break;
    }
    case _VS_KI_SCALE: {
        void* x = *(void**)a[0];
        int t = *(int*)a[1];
        long long n = *(long long*)a[2];
        MOCK_DEV(x, n * mock_dsz(t), "scale");
        _vs_hk_scale(x, t, n, *(float*)a[3]);
        break;
    }
    default: { /* sumsq: fixed blocks, each adding into its slot; the host path's order, all in slot 0 */
        const float* g = *(const float**)a[0];
        long long n = *(long long*)a[1];
        double* part = *(double**)a[2];
        VT_CHECK(grid.x == _VS_KPARTS, "mock: sumsq on %u blocks, not %d", grid.x, _VS_KPARTS);
        MOCK_DEV(g, n * 4, "sumsq g");
        MOCK_DEV(part, sizeof(double) * _VS_KPARTS, "sumsq part");
        for (long long x = 0; x < n; x++) part[0] += (double)g[x] * (double)g[x];
        break;
    }
    }
    return cudaSuccess;
}

static char mock_event_token;
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* ev, unsigned flags)
{
    (void)flags;
    *ev = (cudaEvent_t)(void*)&mock_event_token;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t st)
{
    MOCK_STREAM_IS(st, "cudaEventRecord");
    VT_CHECK(ev == (cudaEvent_t)(void*)&mock_event_token, "mock: record of an unknown event");
    __atomic_add_fetch(&mock_recorded, 1, __ATOMIC_SEQ_CST);
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    (void)ev;
    return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t ev, unsigned flags)
{
    (void)st, (void)flags; /* st: the comm's (the threads transport has none) */
    VT_CHECK(ev == (cudaEvent_t)(void*)&mock_event_token, "mock: wait on an unknown event");
    __atomic_add_fetch(&mock_waited, 1, __ATOMIC_SEQ_CST);
    return cudaSuccess;
}
static long mock_stream_syncs;
cudaError_t cudaStreamSynchronize(cudaStream_t st)
{
    MOCK_STREAM_IS(st, "cudaStreamSynchronize");
    __atomic_add_fetch(&mock_stream_syncs, 1, __ATOMIC_SEQ_CST);
    return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int v, size_t n)
{
    MOCK_DEV(p, n, "cudaMemset");
    memset(p, v, n);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t st)
{
    MOCK_STREAM_IS(st, "cudaMemsetAsync");
    return cudaMemset(p, v, n);
}
/* cudaMemcpyDefault: either side host or device (host to host too, as with UVA);
   the async copies DDP makes on its stream always have a device side. */
static cudaError_t mock_copy(void* dst, const void* src, size_t n, enum cudaMemcpyKind k, int need_device)
{
    int wd = mock_where(dst, n), ws = mock_where(src, n);
    VT_CHECK(k == cudaMemcpyDefault && wd >= 0 && ws >= 0 && (wd || ws || !need_device),
             "mock: copy %p <- %p, %zu bytes: dst %d src %d (1 device, 0 host, -1 out of bounds)", dst, src, n, wd,
             ws);
    if (wd < 0 || ws < 0) return cudaErrorInvalidValue;
    memcpy(dst, src, n);
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, enum cudaMemcpyKind k) { return mock_copy(dst, src, n, k, 0); }
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, enum cudaMemcpyKind k, cudaStream_t st)
{
    MOCK_STREAM_IS(st, "cudaMemcpyAsync");
    return mock_copy(dst, src, n, k, 1);
}

/* ---- the runs --------------------------------------------------------------- */

#define DM_CHECK_DEVICE(p, bytes) VT_CHECK(mock_where((p), (bytes)) == 1, "DDP handed out host memory on the device path")
#include "tests/ddp_model.h"

static int rank_run(vs_world* w, void* arg) { return dm_rank(w, (dm_run*)arg, mock_force_device); }

static vs_result launch(int n, dm_run* c)
{
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = n;
    ld.timeout_s = 60;
    ld.allocator.device_alloc = mock_dalloc;
    ld.allocator.device_free = mock_dfree;
    return vs_launch_ex(&ld, rank_run, c);
}

static void case_same(dm_run* c)
{
    static dm_run host, dev;
    host = *c;
    dev = *c;
    host.stream = dev.stream = (void*)MOCK_STREAM;
    mock_force_device = 0;
    long before[_VS_KI_N], rec0 = mock_recorded;
    memcpy(before, mock_launches, sizeof before);
    VT_OK(launch(c->dp, &host));
    for (int k = 0; k < _VS_KI_N; k++) VT_CHECK(mock_launches[k] == before[k], "the host path launched kernel %d", k);
    long waits_host = mock_waited;
    mock_force_device = 1;
    VT_OK(launch(c->dp, &dev));
    mock_force_device = 0;
    VT_CHECK(mock_live == 0, "%d device allocations leaked", mock_live);
    long opt = c->kind == VS_OPTIM_ADAMW ? _VS_KI_ADAMW : _VS_KI_SGD;
    VT_CHECK(mock_launches[opt] > before[opt], "the device path never launched the optimizer kernel");
    VT_CHECK(mock_launches[_VS_KI_SUMSQ] > before[_VS_KI_SUMSQ], "the device path never launched sumsq");
    VT_CHECK(mock_recorded > rec0, "no event was recorded on the trainer's stream");
    /* each rank, each step: at least 3 buckets (w; b; h in bf16) each ordered after
       the stream before it reduces, and the norm's all-reduce */
    VT_CHECK(mock_waited - waits_host >= (long)c->dp * DM_STEPS * 4,
             "%ld collectives waited for the trainer's stream, want >= %d", mock_waited - waits_host,
             c->dp * DM_STEPS * 4);
    dm_compare(&dev, &host, 0, 0); /* the same transport and kernel text: the same bits */
}

/* A kernel launch that fails: the step says so, names it, and nothing hangs. */
static int rank_fail(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh* mesh = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {1}}, &mesh));
    if (!mesh) return 1;
    vs_ddp* d = NULL;
    VT_OK(vs_ddp_init(&(vs_ddp_desc){.mesh = mesh, .stream = (void*)MOCK_STREAM}, &d));
    if (!d) return 1;
    float f[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    VT_OK(vs_ddp_add_param(d, &(vs_ddp_param_desc){.name = "p", .data = f, .dtype = VS_F32, .ndim = 1, .shape = {8}},
                           NULL));
    VT_OK(vs_ddp_finalize(d));
    VT_OK(vs_ddp_zero_grad(d));
    void* g = vs_ddp_grad(d, 0);
    if (g) VT_CHECK(cudaMemcpy(g, f, sizeof f, cudaMemcpyDefault) == cudaSuccess, "copy");
    VT_OK(vs_ddp_grad_ready(d, 0));
    VT_OK(vs_ddp_finish_grad_sync(d));
    // vs_ddp_synchronize waits for the trainer's stream (what a checkpoint copies after)
    long syncs = __atomic_load_n(&mock_stream_syncs, __ATOMIC_SEQ_CST);
    VT_OK(vs_ddp_synchronize(d));
    VT_CHECK(__atomic_load_n(&mock_stream_syncs, __ATOMIC_SEQ_CST) > syncs, "vs_ddp_synchronize did not wait for the stream");
    VT_ERR(vs_ddp_synchronize(NULL), VS_ERR_NULL, "ddp is NULL");
    mock_fail_launch = 1;
    vs_clear_error();
    vs_result r = vs_ddp_step(d, 0.1);
    mock_fail_launch = 0;
    /* the mesh's CUDA error helper: the message names the kernel, and the raw CUDA code stays retrievable */
    VT_CHECK(r == VS_ERR_BACKEND && strstr(vs_last_error(), "kernel launch of vs_k_adamw") &&
                 vs_last_backend_code() == (int)cudaErrorInvalidValue,
             "failed launch: %d '%s', backend code %d", r, vs_last_error(), vs_last_backend_code());
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

/* A NaN in one copy of a replicated gradient: on a (DP=1, TP=2) mesh TP rank 1
   does not count its copy in the norm, yet its NaN must reach every rank's norm
   (the copies' partial sums, the second half of the device's, 0 x their sum);
   without it the norm is the counted copy's, bit for bit. */
static int rank_copy_nan(vs_world* w, void* arg)
{
    const int poison = *(const int*)arg;
    vs_mesh* mesh = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {1, 2}}, &mesh));
    if (!mesh) return 1;
    vs_ddp* d = NULL;
    VT_OK(vs_ddp_init(&(vs_ddp_desc){.mesh = mesh, .stream = (void*)MOCK_STREAM}, &d));
    if (!d) return 1;
    float f[8] = {1, -2, 3, 0.5f, 5, 6, -7, 8};
    VT_OK(vs_ddp_add_param(d, &(vs_ddp_param_desc){.name = "b", .data = f, .dtype = VS_F32, .ndim = 1, .shape = {8}},
                           NULL));
    VT_OK(vs_ddp_finalize(d));
    VT_OK(vs_ddp_zero_grad(d));
    float g[8];
    memcpy(g, f, sizeof g);
    if (poison && vs_world_rank(w) == 1) g[3] = NAN;
    void* dg = vs_ddp_grad(d, 0);
    if (dg) VT_CHECK(cudaMemcpy(dg, g, sizeof g, cudaMemcpyDefault) == cudaSuccess, "copy");
    VT_OK(vs_ddp_grad_ready(d, 0));
    VT_OK(vs_ddp_finish_grad_sync(d));
    double norm = 0, ref = 0;
    for (int e = 0; e < 8; e++) ref += (double)f[e] * (double)f[e];
    VT_OK(vs_ddp_clip_grad_norm(d, 0, &norm));
    if (poison)
        VT_CHECK(isnan(norm), "rank %d: norm %g with a NaN in TP rank 1's copy", vs_world_rank(w), norm);
    else
        VT_CHECK(norm == sqrt(ref), "rank %d: norm %.17g, want %.17g", vs_world_rank(w), norm, sqrt(ref));
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

static void case_copy_nan(void)
{
    vs_launch_desc ld = {.nranks = 2, .allocator = {.device_alloc = mock_dalloc, .device_free = mock_dfree}};
    long before = mock_launches[_VS_KI_SUMSQ];
    mock_force_device = 1;
    for (int poison = 0; poison < 2; poison++) VT_OK(vs_launch_ex(&ld, rank_copy_nan, &poison));
    mock_force_device = 0;
    VT_CHECK(mock_launches[_VS_KI_SUMSQ] > before, "the device path never launched sumsq");
}

static dm_run c_z0 = {.label = "z0", .dp = 2, .zero = VS_ZERO_0, .kind = VS_OPTIM_ADAMW, .grad_fp32 = 1, .micro = 1, .clip = 0.5};
static dm_run c_z1 = {.label = "z1", .dp = 4, .zero = VS_ZERO_1, .kind = VS_OPTIM_ADAMW, .grad_fp32 = 1, .micro = 1, .clip = 0.5};
static dm_run c_z2 = {.label = "z2", .dp = 4, .zero = VS_ZERO_2, .kind = VS_OPTIM_SGD, .grad_fp32 = 1, .micro = 1, .clip = 100};
static dm_run c_bf = {.label = "bf16 grads", .dp = 2, .zero = VS_ZERO_0, .kind = VS_OPTIM_SGD, .grad_fp32 = 0, .micro = 1, .clip = 0.5};
static dm_run c_acc = {.label = "acc", .dp = 2, .zero = VS_ZERO_1, .kind = VS_OPTIM_ADAMW, .grad_fp32 = 1, .micro = 2, .clip = -1};
static dm_run c_z2no = {.label = "z2 no overlap", .dp = 2, .zero = VS_ZERO_2, .kind = VS_OPTIM_ADAMW, .grad_fp32 = 0, .micro = 1, .no_overlap = 1, .clip = 0.5};

int main(void)
{
    VT_CASE("device path = host path: ZeRO-0 AdamW, f32 grads for bf16, clipped, grad_synced (DP=2)", case_same(&c_z0));
    VT_CASE("device path = host path: ZeRO-1 AdamW, clipped (DP=4)", case_same(&c_z1));
    VT_CASE("device path = host path: ZeRO-2 SGD Nesterov (DP=4)", case_same(&c_z2));
    VT_CASE("device path = host path: ZeRO-0 SGD, bf16 gradients, clipped (DP=2)", case_same(&c_bf));
    VT_CASE("device path = host path: ZeRO-1 AdamW, 2 micro-batches, norm measured (DP=2)", case_same(&c_acc));
    VT_CASE("device path = host path: ZeRO-2 AdamW, bf16 gradients, no overlap, clipped (DP=2)", case_same(&c_z2no));
    long ranks = c_z0.dp + c_z1.dp + c_z2.dp + c_bf.dp + c_acc.dp + c_z2no.dp;
    /* every vs_ddp of every run shares the process's kernels (vescale_mesh.h's >>kernels) */
    VT_CASE("device path: NVRTC compiled once in the process (an sm_90 cubin), loaded once, never unloaded",
            VT_CHECK(_vs_kc.compiles == 1 && _vs_kc.loads == 1 && mock_loads == 1 && mock_unloads == 0,
                     "%ld compiles, %ld loads (the mock saw %ld loads, %ld unloads) for %ld device-path vs_ddp objects",
                     _vs_kc.compiles, _vs_kc.loads, mock_loads, mock_unloads, ranks));
    VT_CASE("device path: a NaN in one TP rank's copy of a replicated gradient makes every rank's norm NaN",
            case_copy_nan());
    mock_force_device = 1;
    VT_CASE("device path: a failed kernel launch is VS_ERR_BACKEND naming it", VT_OK(vs_launch_ex(&(vs_launch_desc){
        .nranks = 1, .allocator = {.device_alloc = mock_dalloc, .device_free = mock_dfree}}, rank_fail, NULL)));
    mock_force_device = 0;
    VT_CASE("device path: no device memory leaked", VT_CHECK(mock_live == 0, "%d allocations live", mock_live));
    return vt_summary();
}

#else
int main(void)
{
    vt_skip("DDP device path (stand-in CUDA runtime)", "built without VESCALE_NVRTC (no nvrtc.h)");
    return vt_summary();
}
#endif
