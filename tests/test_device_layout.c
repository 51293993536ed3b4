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
   vs_vocab_cross_entropy (loss and gradient, and loss alone) and vs_init_fill
   (every kind, every dtype it accepts). What it checks that the host tests cannot:
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

#define MOCK_MAXA 4096
static pthread_mutex_t mock_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char* p;
    size_t n;
} mock_alloc[MOCK_MAXA];
static int mock_nalloc, mock_live;
static long mock_launches[_VS_MK_N], mock_loads, mock_copies;

static void* mock_dalloc(size_t n, void* user)
{
    (void)user;
    char* p = (char*)malloc(n ? n : 1);
    memset(p, 0xA5, n ? n : 1); /* cudaMalloc gives garbage */
    pthread_mutex_lock(&mock_mu);
    int i = 0;
    while (i < mock_nalloc && mock_alloc[i].p) i++;
    VT_CHECK(i < MOCK_MAXA, "mock: too many device allocations");
    if (i < MOCK_MAXA) {
        mock_alloc[i].p = p, mock_alloc[i].n = n;
        if (i == mock_nalloc) mock_nalloc++;
        mock_live++;
    }
    pthread_mutex_unlock(&mock_mu);
    return p;
}

static void mock_dfree(void* p, void* user)
{
    (void)user;
    int found = 0;
    pthread_mutex_lock(&mock_mu);
    for (int i = 0; i < mock_nalloc; i++)
        if (mock_alloc[i].p == (char*)p) {
            mock_alloc[i].p = NULL;
            mock_live--;
            found = 1;
            break;
        }
    pthread_mutex_unlock(&mock_mu);
    VT_CHECK(found, "mock: device_free of %p, not a device allocation", p);
    free(p);
}

/* 1: [p, p+n) lies in one device allocation; 0: p is host memory; -1: p is in a
   device allocation but the range runs past its end. */
static int mock_where(const void* p, size_t n)
{
    const char* c = (const char*)p;
    int r = 0;
    pthread_mutex_lock(&mock_mu);
    for (int i = 0; i < mock_nalloc; i++) {
        const char* a = mock_alloc[i].p;
        if (a && c >= a && c < a + mock_alloc[i].n + (mock_alloc[i].n == 0)) {
            r = c + n <= a + mock_alloc[i].n ? 1 : -1;
            break;
        }
    }
    pthread_mutex_unlock(&mock_mu);
    return r;
}

#define MOCK_DEV(p, n, what)                                                                                     \
    do {                                                                                                         \
        int w_ = mock_where((p), (n));                                                                           \
        VT_CHECK(w_ == 1, "mock: %s: %p + %zu bytes is %s", (what), (const void*)(p), (size_t)(n),              \
                 w_ < 0 ? "past the end of its device allocation" : "host memory, not device memory");          \
        if (w_ != 1) return cudaErrorInvalidValue;                                                               \
    } while (0)

/* The threads transport has no streams: vs_comm_stream is NULL, the default stream. */
#define MOCK_STREAM_IS(st, what) VT_CHECK((st) == NULL, "mock: %s on stream %p, not the comm's", (what), (void*)(st))

const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "mock error"; }
cudaError_t cudaGetDevice(int* dev)
{
    *dev = 0;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* v, enum cudaDeviceAttr a, int dev)
{
    (void)dev;
    *v = a == cudaDevAttrComputeCapabilityMajor ? 9 : 0; /* an H100: sm_90 */
    return cudaSuccess;
}

static char mock_lib_token;
cudaError_t cudaLibraryLoadData(cudaLibrary_t* lib, const void* code, enum cudaJitOption* jo, void** jv, unsigned njo,
                                enum cudaLibraryOption* lo, void** lv, unsigned nlo)
{
    (void)jo, (void)jv, (void)njo, (void)lo, (void)lv, (void)nlo;
    VT_CHECK(code && memcmp(code, "\177ELF", 4) == 0, "mock: cudaLibraryLoadData got no cubin");
    __atomic_add_fetch(&mock_loads, 1, __ATOMIC_SEQ_CST);
    *lib = (cudaLibrary_t)(void*)&mock_lib_token;
    return cudaSuccess;
}
cudaError_t cudaLibraryGetKernel(cudaKernel_t* k, cudaLibrary_t lib, const char* name)
{
    VT_CHECK(lib == (cudaLibrary_t)(void*)&mock_lib_token, "mock: unknown library");
    for (int i = 0; i < _VS_MK_N; i++)
        if (!strcmp(name, _vs_mk_names[i])) {
            *k = (cudaKernel_t)(uintptr_t)(0x1000 + i);
            return cudaSuccess;
        }
    VT_CHECK(0, "mock: no kernel named %s", name);
    return cudaErrorInvalidValue;
}
cudaError_t cudaLibraryUnload(cudaLibrary_t lib)
{
    (void)lib;
    return cudaSuccess;
}

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
    MOCK_STREAM_IS(st, _vs_mk_names[ki]);
    VT_CHECK(shmem == 0 && block.x == _VS_MKT && block.y == 1 && block.z == 1 && grid.y == 1 && grid.z == 1 &&
                 grid.x >= 1 && grid.x <= 65535,
             "mock: %s launched with grid %u block %u shmem %zu", _vs_mk_names[ki], grid.x, block.x, shmem);
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
/* declared by the mock header; the mesh makes no events */
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* ev, unsigned flags)
{
    (void)ev, (void)flags;
    VT_CHECK(0, "mock: the mesh created an event");
    return cudaErrorInvalidValue;
}
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t st)
{
    (void)ev, (void)st;
    return cudaErrorInvalidValue;
}
cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    (void)ev;
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

/* Each rank logs every output (copied to the host) into its own log; the host run
   and the device run must log the same bytes. */
#define MAXR 8
typedef struct {
    unsigned char* p;
    size_t n, cap;
} tlog;
static tlog logs[2][MAXR];

static void log_put(int dev, int rank, const void* data, size_t bytes)
{
    tlog* l = &logs[dev][rank];
    if (l->n + bytes + 8 > l->cap) {
        l->cap = (l->n + bytes + 8) * 2;
        l->p = (unsigned char*)realloc(l->p, l->cap);
    }
    uint64_t len = bytes;
    memcpy(l->p + l->n, &len, 8); /* the length too: a missing output shifts nothing */
    l->n += 8;
    if (bytes) {
        if (dev)
            VT_CHECK(cudaMemcpy(l->p + l->n, data, bytes, cudaMemcpyDefault) == cudaSuccess, "log copy");
        else
            memcpy(l->p + l->n, data, bytes);
    }
    l->n += bytes;
}

/* A buffer of the run's kind: device memory (through the world's hook) or host. */
static void* buf_new(vs_world* w, int dev, size_t bytes)
{
    void* p = dev ? vs_device_alloc(w, bytes ? bytes : 1) : malloc(bytes ? bytes : 1);
    VT_CHECK(p != NULL, "alloc");
    if (dev) VT_CHECK(mock_where(p, bytes) == 1, "vs_device_alloc did not give device memory");
    return p;
}
static void buf_free(vs_world* w, int dev, void* p)
{
    if (dev)
        vs_device_free(w, p);
    else
        free(p);
}
static void buf_put(int dev, void* dst, const void* src, size_t bytes)
{
    if (!bytes) return;
    if (dev)
        VT_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault) == cudaSuccess, "upload");
    else
        memcpy(dst, src, bytes);
}

/* small integers: exact in every dtype, sums of a few too */
static double val(uint64_t g, int salt) { return (double)((int64_t)((g * 7 + (uint64_t)salt * 13) % 23) - 11); }

static void put_val(vs_dtype dt, void* p, int64_t i, double v)
{
    switch (dt) {
    case VS_F32: ((float*)p)[i] = (float)v; break;
    case VS_BF16: ((uint16_t*)p)[i] = vs_f32_to_bf16((float)v); break;
    default: ((int32_t*)p)[i] = (int32_t)v; break;
    }
}

typedef struct {
    const char* mesh; /* "2x2" or "1x3" etc: dims */
    int shape[2], ndims;
} meshspec;

static const char* const pairs2d[][2] = {
    {"[S(0), R]", "[R, R]"},          {"[R, S(1)]", "[S(1), R]"},       {"[S(0), S(1)]", "[S(1), S(0)]"},
    {"[P, S(2)]", "[S(1), R]"},       {"[P, P]", "[S(0), S(0)]"},       {"[S(2), R]", "[S(0), S(2)]"},
    {"[R, R]", "[P, S(1)]"},          {"[S(1), S(1)]", "[R, S(0)]"},    {"[S(0), R]", "[S(0), R]"},
    {"[P(max), R]", "[R, S(2)]"},     {"[S(2), S(2)]", "[S(1), S(0)]"}, {"[P, S(1)]", "[S(2), S(1)]"},
};
static const char* const pairs1d[][2] = {
    {"[S(0)]", "[S(1)]"}, {"[P]", "[S(1)]"}, {"[S(1)]", "[R]"}, {"[R]", "[S(2)]"},
    {"[P]", "[R]"},       {"[S(2)]", "[S(0)]"}, {"[P]", "[S(2)]"}, {"[S(1)]", "[S(2)]"},
};

static int run_redistribute(vs_world* w, int dev, const int* mshape, int mnd, const char* const (*pairs)[2], int np)
{
    int me = vs_world_rank(w);
    vs_mesh* mesh = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    for (int k = 0; k < mnd; k++) md.shape[k] = mshape[k];
    VT_OK(vs_mesh_init(w, &md, &mesh));
    if (!mesh) return 1;
    const vs_dtype dts[] = {VS_F32, VS_BF16, VS_I32};
    const int64_t shapes[][3] = {{5, 6, 3}, {4, 4, 2}, {7, 1, 5}};
    for (int s = 0; s < 3; s++)
        for (int di = 0; di < 3; di++)
            for (int p = 0; p < np; p++) {
                vs_dtype dt = dts[di];
                vs_dtensor a, b;
                memset(&a, 0, sizeof a);
                a.dtype = dt;
                a.ndim = 3;
                memcpy(a.shape, shapes[s], sizeof a.shape[0] * 3);
                b = a;
                VT_OK(vs_layout_parse(mesh, pairs[p][0], &a.layout));
                VT_OK(vs_layout_parse(mesh, pairs[p][1], &b.layout));
                int64_t na = 0, nb = 0, ls[3], off[3];
                VT_OK(vs_dtensor_local_numel(&a, &na));
                VT_OK(vs_dtensor_local_numel(&b, &nb));
                VT_OK(vs_layout_local(&a.layout, 3, a.shape, vs_mesh_rank(mesh), ls, off));
                size_t esz = vs_dtype_size(dt);
                unsigned char* h = (unsigned char*)malloc((size_t)na * esz + 1);
                int64_t i = 0;
                for (int64_t x = 0; x < ls[0]; x++)
                    for (int64_t y = 0; y < ls[1]; y++)
                        for (int64_t z = 0; z < ls[2]; z++, i++) {
                            uint64_t g = (uint64_t)(((off[0] + x) * a.shape[1] + off[1] + y) * a.shape[2] + off[2] + z);
                            put_val(dt, h, i, val(g, me)); /* Partial: rank-dependent parts */
                        }
                a.data = buf_new(w, dev, (size_t)na * esz);
                b.data = buf_new(w, dev, (size_t)nb * esz);
                buf_put(dev, a.data, h, (size_t)na * esz);
                vs_result r = vs_redistribute(&a, &b);
                VT_CHECK(r == VS_OK, "redistribute %s -> %s %s: %s", pairs[p][0], pairs[p][1], vs_dtype_name(dt),
                         vs_last_error());
                log_put(dev, me, b.data, (size_t)nb * esz);
                /* the source is left as it was */
                log_put(dev, me, a.data, (size_t)na * esz);
                buf_free(w, dev, a.data);
                buf_free(w, dev, b.data);
                free(h);
            }
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

static int rank_redist2d(vs_world* w, void* arg)
{
    static const int s[2] = {2, 2};
    return run_redistribute(w, *(int*)arg, s, 2, pairs2d, (int)(sizeof pairs2d / sizeof pairs2d[0]));
}
static int rank_redist1d(vs_world* w, void* arg)
{
    static const int s[1] = {3};
    return run_redistribute(w, *(int*)arg, s, 1, pairs1d, (int)(sizeof pairs1d / sizeof pairs1d[0]));
}

/* embedding forward and backward, cross-entropy with and without the gradient */
static int rank_vocab(vs_world* w, void* arg)
{
    int dev = *(int*)arg, me = vs_world_rank(w);
    vs_mesh* tp = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {vs_world_size(w)}, .dim_names = {"TP"}}, &tp));
    if (!tp) return 1;
    const int64_t vocabs[] = {37, 3, 300}; /* uneven; ranks without rows; > 256 columns a rank */
    for (int vi = 0; vi < 3; vi++) {
        int64_t V = vocabs[vi], D = 5, n = 13, start = 0, rows = 0;
        VT_OK(vs_vocab_range(tp, V, &start, &rows));
        int32_t ids[13];
        for (int i = 0; i < n; i++) ids[i] = (int32_t)((i * 11 + 3) % V);
        ids[n - 1] = ids[1]; /* a repeat */
        float* table = (float*)malloc(sizeof(float) * (size_t)(rows * D) + 4);
        for (int64_t i = 0; i < rows * D; i++) table[i] = (float)(0.25 * val((uint64_t)(start * D + i), 1));
        float* go = (float*)malloc(sizeof(float) * (size_t)(n * D));
        for (int64_t i = 0; i < n * D; i++) go[i] = (float)(0.1 * val((uint64_t)i, 2)) + 0.01f * (float)i;
        float* lg = (float*)malloc(sizeof(float) * (size_t)(n * rows) + 4);
        for (int64_t t = 0; t < n; t++)
            for (int64_t j = 0; j < rows; j++)
                lg[t * rows + j] = (float)(0.37 * val((uint64_t)(t * V + start + j), 3) + 0.001 * (double)(start + j));

        void* dids = buf_new(w, dev, sizeof ids);
        void* dtab = buf_new(w, dev, sizeof(float) * (size_t)(rows * D));
        void* dout = buf_new(w, dev, sizeof(float) * (size_t)(n * D));
        void* dgo = buf_new(w, dev, sizeof(float) * (size_t)(n * D));
        void* dlg = buf_new(w, dev, sizeof(float) * (size_t)(n * rows));
        void* dloss = buf_new(w, dev, sizeof(float) * (size_t)n);
        void* dgrad = buf_new(w, dev, sizeof(float) * (size_t)(n * rows));
        buf_put(dev, dids, ids, sizeof ids);
        buf_put(dev, dtab, table, sizeof(float) * (size_t)(rows * D));
        buf_put(dev, dgo, go, sizeof(float) * (size_t)(n * D));
        buf_put(dev, dlg, lg, sizeof(float) * (size_t)(n * rows));

        VT_OK(vs_vocab_embedding_forward(tp, rows ? (const float*)dtab : NULL, V, D, (const int32_t*)dids, n,
                                         (float*)dout));
        log_put(dev, me, dout, sizeof(float) * (size_t)(n * D));
        VT_OK(vs_vocab_embedding_backward(tp, (const float*)dgo, (const int32_t*)dids, n, V, D,
                                          rows ? (float*)dtab : NULL));
        log_put(dev, me, dtab, sizeof(float) * (size_t)(rows * D));
        VT_OK(vs_vocab_cross_entropy(tp, rows ? (const float*)dlg : NULL, n, V, (const int32_t*)dids, (float*)dloss,
                                     rows ? (float*)dgrad : NULL));
        log_put(dev, me, dloss, sizeof(float) * (size_t)n);
        log_put(dev, me, dgrad, sizeof(float) * (size_t)(n * rows));
        VT_OK(vs_vocab_cross_entropy(tp, rows ? (const float*)dlg : NULL, n, V, (const int32_t*)dids, (float*)dloss,
                                     NULL));
        log_put(dev, me, dloss, sizeof(float) * (size_t)n);
        /* a bad id is caught on the device path too, naming it, nothing written */
        int32_t bad[13];
        memcpy(bad, ids, sizeof bad);
        bad[5] = (int32_t)V;
        buf_put(dev, dids, bad, sizeof bad);
        vs_result r = vs_vocab_embedding_forward(tp, rows ? (const float*)dtab : NULL, V, D, (const int32_t*)dids, n,
                                                 (float*)dout);
        VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "position 5"), "bad id: %d %s", r, vs_last_error());
        void* bufs[] = {dids, dtab, dout, dgo, dlg, dloss, dgrad};
        for (int i = 0; i < 7; i++) buf_free(w, dev, bufs[i]);
        free(table), free(go), free(lg);
    }
    VT_OK(vs_mesh_free(tp));
    return 0;
}

/* vs_init_fill: every kind, on shards of a 2x2 mesh, every dtype it takes */
static int rank_init(vs_world* w, void* arg)
{
    int dev = *(int*)arg, me = vs_world_rank(w);
    vs_mesh* mesh = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {2, 2}}, &mesh));
    if (!mesh) return 1;
    const vs_dtype fl[] = {VS_F32, VS_F16, VS_BF16, VS_F64}, in[] = {VS_I32, VS_I64, VS_U8};
    const char* lays[] = {"[S(0), S(1)]", "[R, S(0)]", "[S(1), R]"};
    for (int kind = VS_INIT_ZEROS; kind <= VS_INIT_SCALED_NORMAL; kind++)
        for (int di = 0; di < 7; di++) {
            vs_dtype dt = di < 4 ? fl[di] : in[di - 4];
            if (kind >= VS_INIT_UNIFORM && di >= 4) continue;
            for (int li = 0; li < 3; li++) {
                vs_dtensor t;
                memset(&t, 0, sizeof t);
                t.dtype = dt;
                t.ndim = 2;
                t.shape[0] = 67, t.shape[1] = 45;
                VT_OK(vs_layout_parse(mesh, lays[li], &t.layout));
                int64_t n = 0;
                VT_OK(vs_dtensor_local_numel(&t, &n));
                size_t bytes = (size_t)n * vs_dtype_size(dt);
                t.data = buf_new(w, dev, bytes);
                vs_init_desc d;
                memset(&d, 0, sizeof d);
                d.kind = (vs_init_kind)kind;
                d.seed = 1234 + (uint64_t)kind;
                d.name = "layers.0.w";
                d.a = kind == VS_INIT_UNIFORM ? -0.5 : kind == VS_INIT_CONSTANT ? 3.0 : 0.1;
                d.b = kind == VS_INIT_UNIFORM ? 0.5 : 0.02;
                d.num_layers = 12;
                VT_OK(vs_init_fill(&t, &d));
                log_put(dev, me, t.data, bytes);
                buf_free(w, dev, t.data);
            }
        }
    VT_OK(vs_mesh_free(mesh));
    return 0;
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
    for (int r = 0; r < MAXR; r++) logs[0][r].n = logs[1][r].n = 0;
    long before[_VS_MK_N], copies0 = mock_copies;
    memcpy(before, mock_launches, sizeof before);
    mock_force_device = 0;
    VT_OK(launch(nranks, fn, &modes[0]));
    for (int k = 0; k < _VS_MK_N; k++)
        VT_CHECK(mock_launches[k] == before[k], "the host path launched %s", _vs_mk_names[k]);
    VT_CHECK(mock_copies == copies0, "the host path made a device copy");
    mock_force_device = 1;
    VT_OK(launch(nranks, fn, &modes[1]));
    mock_force_device = 0;
    VT_CHECK(mock_live == 0, "%d device allocations leaked", mock_live);
    VT_CHECK(mock_launches[want_kernel] > before[want_kernel], "the device path never launched %s",
             _vs_mk_names[want_kernel]);
    for (int r = 0; r < nranks; r++) {
        tlog *h = &logs[0][r], *d = &logs[1][r];
        size_t at = 0;
        while (at < h->n && at < d->n && h->p[at] == d->p[at]) at++;
        VT_CHECK(h->n == d->n && at == h->n, "rank %d: the device run's outputs differ from the host run's at byte %zu "
                 "of %zu (device %zu)", r, at, h->n, d->n);
        VT_CHECK(h->n > 0, "rank %d logged nothing", r);
    }
}

int main(void)
{
    VT_CASE("device = host: vs_redistribute, 12 layout pairs x 3 shapes x f32/bf16/i32 on a 2x2 mesh",
            case_same(4, rank_redist2d, _VS_MK_BOX));
    VT_CASE("device = host: vs_redistribute, 8 layout pairs x 3 shapes x f32/bf16/i32 on a 1-D mesh of 3",
            case_same(3, rank_redist1d, _VS_MK_BOX));
    VT_CASE("device = host: vocab embedding forward/backward, cross-entropy loss and grad (TP=4, 3 vocabs)",
            case_same(4, rank_vocab, _VS_MK_CE_GRAD));
    VT_CASE("device = host: vs_init_fill, every kind and dtype, 3 layouts on a 2x2 mesh",
            case_same(4, rank_init, _VS_MK_INIT));
    VT_CASE("device path: NVRTC compiled the kernels once (an sm_90 cubin loaded)",
            VT_CHECK(mock_loads == 1, "%ld loads", mock_loads));
    long total = 0;
    for (int k = 0; k < _VS_MK_N; k++) {
        VT_CHECK(mock_launches[k] > 0, "kernel %s never ran", _vs_mk_names[k]);
        total += mock_launches[k];
    }
    printf("# %ld kernel launches, %ld device copies\n", total, mock_copies);
    for (int m = 0; m < 2; m++)
        for (int r = 0; r < MAXR; r++) free(logs[m][r].p);
    return vt_summary();
}

#else
int main(void)
{
    vt_skip("layouts/TP/init device path (stand-in CUDA runtime)", "built without VESCALE_NVRTC (no nvrtc.h)");
    return vt_summary();
}
#endif
