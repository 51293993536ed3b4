/* test_device_layout.c - the device path of vescale_mesh.h's layouts, TP and init
   (what an NCCL build runs on a GPU), run here without one.

   The test builds vescale_mesh.h's CUDA path against a stand-in CUDA runtime
   (tests/mock/cuda_runtime.h, defined below) over the threads transport:
   "device" memory is host memory from the world's device allocator hook, tracked
   by the mock, and cudaLaunchKernel runs the host build of the kernel
   (_vs_mk_host) by the handle the mesh got from cudaLibraryGetKernel. NVRTC is
   the real one: the first device call compiles >>kernels' text for sm_90 as it
   would on an H100. The collectives are the threads transport's, on the same
   device pointers (NCCL would run them on the GPU).

   Each case runs twice, once on host buffers (the host path) and once on device
   buffers (_VS_MESH_FORCE_DEVICE), and every rank's outputs must be the same bits:
   vs_redistribute for layout pairs on a 2x2 and a 1-D mesh in f32, bf16 and i32
   (gathers, all-to-alls and reduce-scatters of strided blocks, so packing and
   unpacking, and contiguous ones), vs_vocab_embedding_forward/backward,
   vs_vocab_cross_entropy (loss and gradient, and loss alone), vs_init_fill
   (every kind, every dtype it accepts) and vs_tp_reduce_forward_bias; and every
   kernel of the text ran on the device path. What it checks that the host tests cannot:
   every kernel argument of the device path (device pointers in bounds of their
   allocations, host pointers never handed to a kernel, the argument list as the
   kernels declare it), every copy with a device side, the kernels launched on
   the communicator's stream, the text compiling under NVRTC, the host path
   launching nothing, and no device memory leaked. What it cannot check: the GPU's
   own arithmetic and real asynchrony (tests/test_nccl.c compares device with host
   runs on a GPU).

   Built with -DVESCALE_NVRTC -Itests/mock (Makefile); without NVRTC it skips. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#ifdef VESCALE_NVRTC
static int mock_force_device; /* the run's mode: 1 device path, 0 host path */
#define _VS_MESH_CUDA 1
#define _VS_MESH_FORCE_DEVICE mock_force_device
#endif
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "tests/vs_test.h"

#ifdef VESCALE_NVRTC

/* ---- the stand-in runtime --------------------------------------------------- */

#define MOCK_KERNEL_NAMES _vs_mk_decls
#define MOCK_KERNEL_NAME(i) (_vs_mk_decls[i].name)
#define MOCK_NKERNELS _VS_MK_N
#include "mock/mock_device.h"

static long mock_launches[_VS_MK_N], mock_copies;

#define MOCK_STREAM_IS(st, what) VT_CHECK((st) == NULL, "mock: %s on stream %p, not the comm's", (what), (void*)(st))

static size_t mock_esz(int dt) { return vs_dtype_size((vs_dtype)dt); }

/* The extent of one side of a box copy: its last element's offset + 1, in bytes. */
static size_t mock_box_bytes(const _vs_mk_geo* g, int src)
{
    long long hi = src ? g->soff : g->doff;
    for (int d = 0; d < g->nd; d++) hi += (g->dim[d] - 1) * (src ? g->sstr[d] : g->dstr[d]);
    return (size_t)(hi + 1) * (size_t)g->esz;
}

#define A(T, i) (*(T*)a[i])
/* Checks kernel ki's pointers against its sizes, then runs its host build. */
cudaError_t cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void** a, size_t shmem, cudaStream_t st)
{
    int ki = (int)((uintptr_t)func - 0x1000);
    VT_CHECK(ki >= 0 && ki < _VS_MK_N, "mock: launch of an unknown kernel %p", func);
    if (ki < 0 || ki >= _VS_MK_N) return cudaErrorInvalidValue;
    MOCK_STREAM_IS(st, _vs_mk_decls[ki].name);
    VT_CHECK(shmem == 0 && block.x == VS_MKT && block.y == 1 && block.z == 1 && grid.y == 1 && grid.z == 1 &&
                 grid.x >= 1 && grid.x <= 65535,
             "mock: %s launched with grid %u block %u shmem %zu", _vs_mk_decls[ki].name, grid.x, block.x, shmem);
    __atomic_add_fetch(&mock_launches[ki], 1, __ATOMIC_SEQ_CST);
    switch (ki) {
    case _VS_MK_INIT: MOCK_DEV(A(void*, 0), A(long long, 2) * mock_esz(A(int, 1)), "init out"); break;
    case _VS_MK_BOX: {
        const _vs_mk_geo* g = &A(_vs_mk_geo, 3);
        long long n = 1;
        for (int d = 0; d < g->nd; d++) n *= g->dim[d];
        VT_CHECK(n == A(long long, 2), "mock: box of %lld elements launched for %lld", n, A(long long, 2));
        MOCK_DEV(A(char*, 0), mock_box_bytes(g, 0), "box dst");
        MOCK_DEV(A(const char*, 1), mock_box_bytes(g, 1), "box src");
        break;
    }
    case _VS_MK_EMBED_FWD: {
        long long n = A(long long, 3), dim = A(long long, 4), rows = A(long long, 6);
        MOCK_DEV(A(float*, 0), (size_t)(n * dim) * 4, "embed out");
        if (rows) MOCK_DEV(A(const float*, 1), (size_t)(rows * dim) * 4, "embed table");
        MOCK_DEV(A(const int*, 2), (size_t)n * 4, "embed ids");
        break;
    }
    case _VS_MK_EMBED_BWD: {
        long long n = A(long long, 3), dim = A(long long, 4), rows = A(long long, 6);
        MOCK_DEV(A(float*, 0), (size_t)(rows * dim) * 4, "embed grad table");
        MOCK_DEV(A(const float*, 1), (size_t)(n * dim) * 4, "embed grad out");
        MOCK_DEV(A(const int*, 2), (size_t)n * 4, "embed ids");
        break;
    }
    case _VS_MK_CE_MAX: {
        long long n = A(long long, 2), rows = A(long long, 3);
        MOCK_DEV(A(float*, 0), (size_t)n * 4, "ce max");
        if (rows) MOCK_DEV(A(const float*, 1), (size_t)(n * rows) * 4, "ce logits");
        break;
    }
    case _VS_MK_CE_SUM: {
        long long n = A(long long, 5), rows = A(long long, 6);
        MOCK_DEV(A(float*, 0), (size_t)n * 4, "ce sum");
        MOCK_DEV(A(float*, 1), (size_t)n * 4, "ce target logit");
        if (rows) MOCK_DEV(A(const float*, 2), (size_t)(n * rows) * 4, "ce logits");
        MOCK_DEV(A(const float*, 3), (size_t)n * 4, "ce max");
        MOCK_DEV(A(const int*, 4), (size_t)n * 4, "ce targets");
        break;
    }
    case _VS_MK_CE_LOSS: {
        long long n = A(long long, 4);
        for (int i = 0; i < 4; i++) MOCK_DEV(A(const float*, i), (size_t)n * 4, "ce loss arrays");
        break;
    }
    case _VS_MK_BIAS_ADD: {
        long long n = A(long long, 2) * A(long long, 3);
        MOCK_DEV(A(void*, 0), (size_t)n * mock_esz(A(int, 4)), "bias_add y");
        MOCK_DEV(A(const void*, 1), (size_t)A(long long, 3) * mock_esz(A(int, 5)), "bias_add bias");
        break;
    }
    case _VS_MK_IDS_CHECK: /* the flag is pinned host memory */
        MOCK_DEV(A(const int*, 1), (size_t)A(long long, 2) * 4, "checked ids");
        break;
    default: {
        long long n = A(long long, 5), rows = A(long long, 6);
        MOCK_DEV(A(float*, 0), (size_t)(n * rows) * 4, "ce grad");
        MOCK_DEV(A(const float*, 1), (size_t)(n * rows) * 4, "ce logits");
        MOCK_DEV(A(const float*, 2), (size_t)n * 4, "ce max");
        MOCK_DEV(A(const float*, 3), (size_t)n * 4, "ce sum");
        MOCK_DEV(A(const int*, 4), (size_t)n * 4, "ce targets");
        break;
    }
    }
    _vs_mk_host(ki, a);
    return cudaSuccess;
}
#undef A

cudaError_t cudaStreamSynchronize(cudaStream_t st)
{
    MOCK_STREAM_IS(st, "cudaStreamSynchronize");
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t st)
{
    MOCK_STREAM_IS(st, "cudaMemsetAsync");
    MOCK_DEV(p, n, "cudaMemsetAsync");
    memset(p, v, n);
    return cudaSuccess;
}
/* cudaMemcpyDefault, at least one side device memory (the test's own copies too). */
cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, enum cudaMemcpyKind k)
{
    int wd = mock_where(dst, n), ws = mock_where(src, n);
    VT_CHECK(k == cudaMemcpyDefault && wd >= 0 && ws >= 0 && (wd || ws),
             "mock: copy %p <- %p, %zu bytes: dst %d src %d (1 device, 0 host, -1 out of bounds)", dst, src, n, wd,
             ws);
    if (wd < 0 || ws < 0) return cudaErrorInvalidValue;
    memcpy(dst, src, n);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, enum cudaMemcpyKind k, cudaStream_t st)
{
    MOCK_STREAM_IS(st, "cudaMemcpyAsync");
    __atomic_add_fetch(&mock_copies, 1, __ATOMIC_SEQ_CST);
    return cudaMemcpy(dst, src, n, k);
}
/* Events: only the vocab functions' id checks make them (16 per TP mesh, once),
   recorded on the comm's stream; every one is complete at once here (the mock's
   cudaEventQuery). Live ones counted: none may leak. */
static int mock_events_live;
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* ev, unsigned flags)
{
    (void)flags;
    *ev = (cudaEvent_t)malloc(1);
    __atomic_add_fetch(&mock_events_live, 1, __ATOMIC_SEQ_CST);
    return *ev ? cudaSuccess : cudaErrorInvalidValue;
}
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t st)
{
    MOCK_STREAM_IS(st, "cudaEventRecord");
    return ev ? cudaSuccess : cudaErrorInvalidValue;
}
cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    free(ev);
    __atomic_sub_fetch(&mock_events_live, 1, __ATOMIC_SEQ_CST);
    return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t ev, unsigned flags)
{
    (void)st, (void)ev, (void)flags;
    return cudaErrorInvalidValue;
}
cudaError_t cudaMemset(void* p, int v, size_t n)
{
    MOCK_DEV(p, n, "cudaMemset");
    memset(p, v, n);
    return cudaSuccess;
}

/* ---- the runs --------------------------------------------------------------- */

#define DL_CHECK_DEVICE(p, bytes) \
    VT_CHECK(mock_where((p), (bytes)) == 1, "vs_device_alloc did not give device memory")
#include "tests/device_layout_cases.h"

static int dl_rank_redist2d(vs_world* w, void* arg)
{
    static const int s[2] = {2, 2};
    return dl_run_redistribute(w, *(int*)arg, s, 2, pairs2d, (int)(sizeof pairs2d / sizeof pairs2d[0]));
}
static int dl_rank_redist1d(vs_world* w, void* arg)
{
    static const int s[1] = {3};
    return dl_run_redistribute(w, *(int*)arg, s, 1, pairs1d, (int)(sizeof pairs1d / sizeof pairs1d[0]));
}

static vs_result launch(int n, int (*fn)(vs_world*, void*), int* dev)
{
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = n;
    ld.timeout_s = 60;
    ld.allocator.device_alloc = mock_dalloc;
    ld.allocator.device_free = mock_dfree;
    return vs_launch_ex(&ld, fn, dev);
}

/* host run, device run, the same bits from every rank */
static void case_same(int nranks, int (*fn)(vs_world*, void*), int want_kernel)
{
    static int modes[2] = {0, 1};
    dl_reset();
    long before[_VS_MK_N], copies0 = mock_copies;
    memcpy(before, mock_launches, sizeof before);
    mock_force_device = 0;
    VT_OK(launch(nranks, fn, &modes[0]));
    for (int k = 0; k < _VS_MK_N; k++)
        VT_CHECK(mock_launches[k] == before[k], "the host path launched %s", _vs_mk_decls[k].name);
    VT_CHECK(mock_copies == copies0, "the host path made a device copy");
    mock_force_device = 1;
    VT_OK(launch(nranks, fn, &modes[1]));
    mock_force_device = 0;
    VT_CHECK(mock_live == 0, "%d device allocations leaked", mock_live);
    VT_CHECK(mock_events_live == 0, "%d events leaked", mock_events_live);
    VT_CHECK(mock_launches[want_kernel] > before[want_kernel], "the device path never launched %s",
             _vs_mk_decls[want_kernel].name);
    dl_all_exact = 1;
    dl_compare(nranks); /* exact: the threads transport sums the same way in both runs */
}

/* vs_kernels_get from 8 threads at once, for a text not compiled yet: one
   compile and one load, the same kernel for everyone. */
static const vs_kernel_decl kt_names[1] = {{"vs_mk_box", "w", "p", NULL, 0}}; /* a name the mock resolves */
static const vs_kernel_text kt_text = {"kt.cu", "extern \"C\" __global__ void vs_mk_box(int* p) { if (p) *p = 1; }\n", 1,
                                       kt_names, NULL};
static void* kt_got[8];
static void* kt_thread(void* arg)
{
    VT_OK(vs_kernels_get(&kt_text, "kt", (void**)arg));
    return NULL;
}

static void case_framework(void)
{
    /* the target: the device's own sm_XY when NVRTC knows it, else PTX for the
       newest compute_XY it knows below the device (reference: NVRTC's own list) */
    int n = 0, archs[256], newest = 0;
    VT_CHECK(nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0 && n <= 256, "NVRTC lists %d archs", n);
    if (n <= 0 || n > 256 || nvrtcGetSupportedArchs(archs) != NVRTC_SUCCESS) return;
    for (int i = 0; i < n; i++) newest = archs[i] > newest ? archs[i] : newest;
    char t[24], want[24];
    VT_OK(_vs_k_target(9, 0, t, sizeof t));
    VT_CHECK(!strcmp(t, "sm_90"), "9.0: %s", t);
    VT_OK(_vs_k_target(99, 9, t, sizeof t));
    snprintf(want, sizeof want, "compute_%d", newest);
    VT_CHECK(!strcmp(t, want), "99.9: %s, want %s", t, want);
    VT_ERR(_vs_k_target(1, 0, t, sizeof t), VS_ERR_UNSUPPORTED, "compute capability 1.0");
    /* one compile for many threads asking at once */
    long c0 = _vs_kc.compiles, l0 = _vs_kc.loads;
    pthread_t th[8];
    for (int i = 0; i < 8; i++) pthread_create(&th[i], NULL, kt_thread, &kt_got[i]);
    for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
    VT_CHECK(_vs_kc.compiles == c0 + 1 && _vs_kc.loads == l0 + 1, "%ld compiles, %ld loads for 8 threads",
             _vs_kc.compiles - c0, _vs_kc.loads - l0);
    for (int i = 0; i < 8; i++) VT_CHECK(kt_got[i] && kt_got[i] == kt_got[0], "thread %d got kernel %p", i, kt_got[i]);
    /* arguments and errors */
    void* k[1];
    VT_ERR(vs_kernels_get(NULL, NULL, k), VS_ERR_NULL, "t is NULL");
    VT_ERR(vs_kernels_get(&kt_text, NULL, NULL), VS_ERR_NULL, "kernels is NULL");
    vs_kernel_text none = {"none.cu", "", 0, kt_names, NULL};
    VT_ERR(vs_kernels_get(&none, "f", k), VS_ERR_INVALID, "f: kernel text none.cu");
    vs_kernel_text bad = {"bad.cu", "this is not CUDA", 1, kt_names, NULL};
    VT_ERR(vs_kernels_get(&bad, "f", k), VS_ERR_BACKEND, "f: NVRTC cannot compile bad.cu for sm_90");
    VT_ERR(vs_cuda_error((int)cudaErrorInvalidValue, "f", "w"), VS_ERR_BACKEND, "f: w: mock error");
    VT_CHECK(vs_last_backend_code() == (int)cudaErrorInvalidValue, "backend code %d", vs_last_backend_code());
}

int main(void)
{
    VT_CASE("device = host: vs_redistribute, 12 layout pairs x 3 shapes x f32/bf16/i32 on a 2x2 mesh",
            case_same(4, dl_rank_redist2d, _VS_MK_BOX));
    VT_CASE("device = host: vs_redistribute, 8 layout pairs x 3 shapes x f32/bf16/i32 on a 1-D mesh of 3",
            case_same(3, dl_rank_redist1d, _VS_MK_BOX));
    VT_CASE("device = host: vocab embedding forward/backward, cross-entropy loss and grad (TP=4, 3 vocabs)",
            case_same(4, dl_rank_vocab, _VS_MK_CE_GRAD));
    VT_CASE("device = host: vs_init_fill, every kind and dtype, 3 layouts on a 2x2 mesh",
            case_same(4, dl_rank_init, _VS_MK_INIT));
    VT_CASE("device = host: vs_tp_reduce_forward_bias, y f32/f64/f16/bf16, bias of y's dtype or f32 (TP=3)",
            case_same(3, dl_rank_bias, _VS_MK_BIAS_ADD));
    /* the device runs: 4 + 3 + 4 + 4 + 3 rank worlds, all sharing the process's
       compiled kernels (>>kernels: one NVRTC compile and one load per process
       and architecture, kept until the process exits) */
    VT_CASE("device path: NVRTC compiled the kernels once in the process (an sm_90 cubin), loaded once",
            VT_CHECK(_vs_kc.compiles == 1 && _vs_kc.loads == 1 && mock_loads == 1 && mock_unloads == 0,
                     "%ld compiles, %ld loads (the mock saw %ld loads, %ld unloads) for 18 rank worlds",
                     _vs_kc.compiles, _vs_kc.loads, mock_loads, mock_unloads));
    VT_CASE("kernel framework: the target (sm_XY, or PTX for a device newer than NVRTC), one compile for 8 threads, "
            "errors", case_framework());
    long total = 0;
    for (int k = 0; k < _VS_MK_N; k++) total += mock_launches[k];
    printf("# %ld kernel launches, %ld device copies\n", total, mock_copies);
    VT_CASE("device path: every kernel of the text ran", {
        for (int k = 0; k < _VS_MK_N; k++) VT_CHECK(mock_launches[k] > 0, "kernel %s never ran", _vs_mk_decls[k].name);
    });
    dl_release();
    return vt_summary();
}

#else
int main(void)
{
    vt_skip("layouts/TP/init device path (stand-in CUDA runtime)", "built without VESCALE_NVRTC (no nvrtc.h)");
    return vt_summary();
}
#endif
