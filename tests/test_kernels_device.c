/* test_kernels_device.c - the device meaning of the kernel texts, without a GPU.

   vescale_mesh.h's >>kernels (and examples/gpt_kernels.h, in the same
   vocabulary) are one text with two meanings: the host build (each kernel a
   loop, each "block" a loop over its threads) and the device build NVRTC
   compiles. The strict stand-in runs the host build, so a change that exists
   only in the device meaning (a _VS_MKSEL whose device side sums in another
   order, a tree that reads a partial before the barrier that publishes it) is
   invisible there. Here the device build itself runs on the host: the text is
   expanded with _VS_MK_DEVICE 1 (names vs_mk_*, as NVRTC gets them) over an
   emulation of CUDA's vocabulary: blockIdx / threadIdx / blockDim / gridDim
   per emulated thread, each block's _VS_MKT threads as host threads that meet
   at a barrier for __syncthreads, __shared__ as one array per kernel (the
   blocks of a launch run one after another, so one block owns it at a time),
   and CUDA's bit-cast intrinsics. Each kernel runs over the launch grid the
   library uses (_vs_mk_run: one block per row for the row kernels, else
   ceil(work / _VS_MKT)), and over a smaller grid (grid-stride loops doing the
   rest), and must give the host build's bits on the same inputs.

   What this cannot see: the GPU's own arithmetic (NVRTC's flags make it IEEE;
   the emulation uses the host's), warp-level behaviour (there is none in the
   texts), and races between threads of a block beyond what a barrier orders
   (the emulated threads do run concurrently, so a missing barrier may show as
   a wrong value, not surely). Written in C99 with POSIX threads. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vs_test.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- CUDA's device vocabulary on the host -------------------------------------- */

typedef struct {
    unsigned x, y, z;
} kd_dim3;
static __thread kd_dim3 threadIdx, blockIdx; /* each emulated thread's */
static kd_dim3 blockDim, gridDim;            /* the launch's */
static pthread_barrier_t kd_bar;             /* the running block's __syncthreads */

#define vs_rtc_device __attribute__((unused))
#define vs_rtc_global static __attribute__((unused))
#define vs_rtc_shared static
#define vs_rtc_sync() pthread_barrier_wait(&kd_bar)
#define __threadfence_system() __atomic_thread_fence(__ATOMIC_SEQ_CST)

static float __uint_as_float(unsigned int u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static unsigned int __float_as_uint(float f)
{
    unsigned int u;
    memcpy(&u, &f, 4);
    return u;
}
static double __longlong_as_double(long long u)
{
    double d;
    memcpy(&d, &u, 8);
    return d;
}
static long long __double_as_longlong(double d)
{
    long long u;
    memcpy(&u, &d, 8);
    return u;
}

/* The device build of the mesh's kernel text, as NVRTC compiles it (after the
   prelude's dtype helpers). */
#define _VS_MK_DEVICE 1
_VS_MK_DTYPES
_VS_MESH_KERNELS
#undef _VS_MK_DEVICE

/* ---- launches ----------------------------------------------------------------- */

typedef struct {
    void (*run)(int ki, void** a);
    int ki;
    void** a;
    unsigned bx, tx;
} kd_thread;

static void* kd_thread_main(void* p)
{
    kd_thread* t = (kd_thread*)p;
    blockIdx.x = t->bx, blockIdx.y = blockIdx.z = 0;
    threadIdx.x = t->tx, threadIdx.y = threadIdx.z = 0;
    t->run(t->ki, t->a);
    return NULL;
}

/* Runs kernel ki's device meaning (run: its call) over `blocks` blocks of
   _VS_MKT threads, one block after another. */
static void kd_launch(void (*run)(int, void**), int ki, void** a, unsigned blocks)
{
    static pthread_t th[_VS_MKT];
    static kd_thread arg[_VS_MKT];
    gridDim.x = blocks, gridDim.y = gridDim.z = 1;
    blockDim.x = _VS_MKT, blockDim.y = blockDim.z = 1;
    pthread_barrier_init(&kd_bar, NULL, _VS_MKT);
    for (unsigned b = 0; b < blocks; b++) {
        for (int t = 0; t < _VS_MKT; t++) {
            arg[t].run = run, arg[t].ki = ki, arg[t].a = a, arg[t].bx = b, arg[t].tx = (unsigned)t;
            if (pthread_create(&th[t], NULL, kd_thread_main, &arg[t]) != 0) {
                fprintf(stderr, "kd_launch: pthread_create failed\n");
                exit(2);
            }
        }
        for (int t = 0; t < _VS_MKT; t++) pthread_join(th[t], NULL);
    }
    pthread_barrier_destroy(&kd_bar);
}

/* The device build's kernel ki with the arguments as a launch passes them (as
   _vs_mk_host does for the host build). */
static void kd_mesh_call(int ki, void** a)
{
#define A_(T, i) (*(T*)a[i])
    switch (ki) {
    case _VS_MK_INIT:
        vs_mk_init(A_(void*, 0), A_(int, 1), A_(long long, 2), *(vs_mk_ibox*)a[3], A_(unsigned long long, 4), A_(int, 5),
                   A_(double, 6), A_(double, 7), A_(double, 8));
        break;
    case _VS_MK_BOX: vs_mk_box(A_(char*, 0), A_(const char*, 1), A_(long long, 2), *(vs_mk_geo*)a[3]); break;
    case _VS_MK_EMBED_FWD:
        vs_mk_embed_fwd(A_(float*, 0), A_(const float*, 1), A_(const int*, 2), A_(long long, 3), A_(long long, 4),
                        A_(long long, 5), A_(long long, 6));
        break;
    case _VS_MK_EMBED_BWD:
        vs_mk_embed_bwd(A_(float*, 0), A_(const float*, 1), A_(const int*, 2), A_(long long, 3), A_(long long, 4),
                        A_(long long, 5), A_(long long, 6), A_(long long, 7));
        break;
    case _VS_MK_CE_MAX: vs_mk_ce_max(A_(float*, 0), A_(const float*, 1), A_(long long, 2), A_(long long, 3)); break;
    case _VS_MK_CE_SUM:
        vs_mk_ce_sum(A_(float*, 0), A_(float*, 1), A_(const float*, 2), A_(const float*, 3), A_(const int*, 4),
                     A_(long long, 5), A_(long long, 6), A_(long long, 7));
        break;
    case _VS_MK_CE_LOSS:
        vs_mk_ce_loss(A_(float*, 0), A_(const float*, 1), A_(const float*, 2), A_(const float*, 3), A_(long long, 4));
        break;
    case _VS_MK_IDS_CHECK:
        vs_mk_ids_check(A_(long long*, 0), A_(const int*, 1), A_(long long, 2), A_(long long, 3));
        break;
    case _VS_MK_BIAS_ADD:
        vs_mk_bias_add(A_(void*, 0), A_(const void*, 1), A_(long long, 2), A_(long long, 3), A_(int, 4), A_(int, 5));
        break;
    default:
        vs_mk_ce_grad(A_(float*, 0), A_(const float*, 1), A_(const float*, 2), A_(const float*, 3), A_(const int*, 4),
                      A_(long long, 5), A_(long long, 6), A_(long long, 7));
        break;
    }
#undef A_
}

/* ---- the comparison ------------------------------------------------------------- */

/* A kernel's buffers: each outs[i] (bytes[i]) is written by the kernel; the
   device meaning runs on copies, from the same starting bytes. */
enum { KD_MAXB = 4 };
typedef struct {
    int n;
    void* p[KD_MAXB];
    size_t bytes[KD_MAXB];
} kd_outs;

static unsigned long long kd_seed = 0x9e3779b97f4a7c15ull;
static double kd_rand(void) /* [-1, 1) */
{
    kd_seed = kd_seed * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(kd_seed >> 11) / 4503599627370496.0 - 1.0;
}

/* Runs kernel ki (a: its arguments, pointing into o's buffers where it writes)
   as the host build and as the device meaning over `blocks` (0: the library's
   grid for `work`) and compares every written byte. */
static void kd_compare(const char* what, int ki, void** a, kd_outs* o, long long work, unsigned blocks)
{
    void* start[KD_MAXB];
    void* host[KD_MAXB];
    for (int i = 0; i < o->n; i++) {
        start[i] = malloc(o->bytes[i]), host[i] = malloc(o->bytes[i]);
        memcpy(start[i], o->p[i], o->bytes[i]);
    }
    _vs_mk_host(ki, a);
    for (int i = 0; i < o->n; i++) memcpy(host[i], o->p[i], o->bytes[i]), memcpy(o->p[i], start[i], o->bytes[i]);
    long long lib = _VS_MK_ROWKERNEL(ki) ? work : (work + _VS_MKT - 1) / _VS_MKT;
    if (lib > 65535) lib = 65535;
    unsigned g = blocks ? blocks : (unsigned)(lib > 0 ? lib : 1);
    kd_launch(kd_mesh_call, ki, a, g);
    for (int i = 0; i < o->n; i++) {
        const unsigned char *h = (const unsigned char*)host[i], *d = (const unsigned char*)o->p[i];
        size_t bad = 0, first = 0;
        for (size_t k = 0; k < o->bytes[i]; k++)
            if (h[k] != d[k] && !bad++) first = k;
        VT_CHECK(bad == 0, "%s (%s, grid %u): output %d: %zu of %zu bytes differ, the first at byte %zu", what,
                 _vs_mk_names[ki], g, i, bad, o->bytes[i], first);
        memcpy(o->p[i], start[i], o->bytes[i]);
        free(start[i]), free(host[i]);
    }
}

/* Every kernel of the mesh's text on inputs of several shapes, over the
   library's grid and over 1 and 2 blocks. */
static void case_mesh(unsigned blocks)
{
    enum { N = 37, V = 700, D = 5 }; /* tokens, a vocab shard of 3 columns a thread (some), embedding width */
    float* lg = (float*)malloc(sizeof(float) * N * V);
    float *mx = (float*)malloc(sizeof(float) * N), *se = (float*)malloc(sizeof(float) * N);
    float *tl = (float*)malloc(sizeof(float) * N), *loss = (float*)malloc(sizeof(float) * N);
    float* g = (float*)malloc(sizeof(float) * N * V);
    static int tga[N], idsa[N];
    int *tg = tga, *ids = idsa;
    for (int i = 0; i < N * V; i++) lg[i] = (float)(8 * kd_rand());
    for (int i = 0; i < N; i++) tg[i] = (int)((unsigned)(kd_rand() * 1e6 + 1e6) % (2 * V)), ids[i] = tg[i] % 64;
    long long n = N, rows = V, start = 300;
    for (int w = 0; w < 2; w++) { /* a shard of 700 columns, and of 3 (fewer than a block's threads) */
        long long r = w ? 3 : rows;
        const char* what = w ? "3-column shard" : "700-column shard";
        kd_outs o = {1, {mx}, {sizeof(float) * N}};
        void* amax[] = {&mx, &lg, &n, &r};
        kd_compare(what, _VS_MK_CE_MAX, amax, &o, n, blocks);
        _vs_mk_host(_VS_MK_CE_MAX, amax);
        kd_outs o2 = {2, {se, tl}, {sizeof(float) * N, sizeof(float) * N}};
        void* asum[] = {&se, &tl, &lg, &mx, &tg, &n, &r, &start};
        kd_compare(what, _VS_MK_CE_SUM, asum, &o2, n, blocks);
        _vs_mk_host(_VS_MK_CE_SUM, asum);
        kd_outs o3 = {1, {loss}, {sizeof(float) * N}};
        void* aloss[] = {&loss, &mx, &se, &tl, &n};
        kd_compare(what, _VS_MK_CE_LOSS, aloss, &o3, n, blocks);
        kd_outs o4 = {1, {g}, {sizeof(float) * N * (size_t)r}};
        void* agrad[] = {&g, &lg, &mx, &se, &tg, &n, &r, &start};
        kd_compare(what, _VS_MK_CE_GRAD, agrad, &o4, n * r, blocks);
    }
    /* the embedding, forward and backward (table rows 10..73 of this shard) */
    float* tab = (float*)malloc(sizeof(float) * 64 * D);
    float* out = (float*)malloc(sizeof(float) * N * D);
    float* gt = (float*)malloc(sizeof(float) * 64 * D);
    for (int i = 0; i < 64 * D; i++) tab[i] = (float)kd_rand(), gt[i] = (float)kd_rand();
    long long dim = D, est = 10, erows = 64, nb = 3;
    kd_outs oe = {1, {out}, {sizeof(float) * N * D}};
    void* afwd[] = {&out, &tab, &ids, &n, &dim, &est, &erows};
    kd_compare("embedding", _VS_MK_EMBED_FWD, afwd, &oe, n * dim, blocks);
    _vs_mk_host(_VS_MK_EMBED_FWD, afwd);
    kd_outs ob = {1, {gt}, {sizeof(float) * 64 * D}};
    void* abwd[] = {&gt, &out, &ids, &n, &dim, &est, &erows, &nb};
    kd_compare("embedding backward", _VS_MK_EMBED_BWD, abwd, &ob, dim * nb, blocks);
    /* the id check: one id out of range late, two, none */
    int big[700];
    for (int i = 0; i < 700; i++) big[i] = i % 50;
    long long flag[2] = {-1, -1}, *fp = flag, nbig = 700, voc = 50;
    const int* bp = big;
    kd_outs of = {1, {flag}, {sizeof flag}};
    void* aids[] = {&fp, &bp, &nbig, &voc};
    kd_compare("ids all in range", _VS_MK_IDS_CHECK, aids, &of, 1, blocks);
    big[613] = 77, big[650] = -3;
    kd_compare("ids out of range at 613 and 650", _VS_MK_IDS_CHECK, aids, &of, 1, blocks);
    /* the box copy: a 3-D box out of a strided source, 4-byte and 2-byte elements */
    unsigned char src[4096], dst[4096];
    for (int i = 0; i < 4096; i++) src[i] = (unsigned char)(kd_rand() * 128 + 128), dst[i] = 0;
    vs_mk_geo geo;
    memset(&geo, 0, sizeof geo);
    geo.nd = 3, geo.dim[0] = 3, geo.dim[1] = 4, geo.dim[2] = 5;
    geo.sstr[0] = 60, geo.sstr[1] = 12, geo.sstr[2] = 2, geo.dstr[0] = 20, geo.dstr[1] = 5, geo.dstr[2] = 1;
    geo.soff = 7, geo.doff = 3;
    for (int esz = 2; esz <= 4; esz += 2) {
        geo.esz = esz;
        long long nbox = 60;
        char *dp = (char*)dst;
        const char* sp = (const char*)src;
        kd_outs ox = {1, {dst}, {sizeof dst}};
        void* abox[] = {&dp, &sp, &nbox, &geo};
        kd_compare(esz == 2 ? "box, 2-byte elements" : "box, 4-byte elements", _VS_MK_BOX, abox, &ox, nbox, blocks);
    }
    /* init: every kind into f32, bf16 and f64, of a shard at an offset in its tensor */
    vs_mk_ibox ib;
    memset(&ib, 0, sizeof ib);
    ib.nd = 2, ib.ls[0] = 7, ib.ls[1] = 9, ib.off[0] = 3, ib.off[1] = 9, ib.shape[0] = 20, ib.shape[1] = 18;
    static double buf[63];
    for (int kind = 0; kind <= 5; kind++)
        for (int dt = 1; dt <= 4; dt++) {
            if (dt == 2) continue;
            void* bp2 = buf;
            long long ni = 63;
            unsigned long long key = 0x1234abcdull + (unsigned long long)kind;
            double a0 = -0.5, b0 = 0.75, sd = 0.02;
            char what[64];
            snprintf(what, sizeof what, "init kind %d dtype %d", kind, dt);
            kd_outs oi = {1, {buf}, {sizeof buf}};
            void* ai[] = {&bp2, &dt, &ni, &ib, &key, &kind, &a0, &b0, &sd};
            kd_compare(what, _VS_MK_INIT, ai, &oi, ni, blocks);
        }
    /* the row-parallel bias: f32, bf16 with an f32 bias, f64 */
    static double y[3 * 70], bias[70];
    for (int i = 0; i < 3 * 70; i++) y[i] = kd_rand();
    for (int i = 0; i < 70; i++) bias[i] = kd_rand();
    int dts[3][2] = {{1, 1}, {3, 1}, {4, 4}};
    for (int k = 0; k < 3; k++) {
        void *yp = y, *bb = bias;
        long long br = 3, bc = 70;
        kd_outs oy = {1, {y}, {sizeof y}};
        void* ab[] = {&yp, &bb, &br, &bc, &dts[k][0], &dts[k][1]};
        kd_compare(k == 0 ? "bias f32" : k == 1 ? "bias bf16" : "bias f64", _VS_MK_BIAS_ADD, ab, &oy, br * bc, blocks);
    }
    free(lg), free(mx), free(se), free(tl), free(loss), free(g), free(tab), free(out), free(gt);
}

int main(void)
{
    VT_CASE("kernels/device meaning: the mesh's kernels over the library's grid equal the host build bit for bit",
            case_mesh(0));
    VT_CASE("kernels/device meaning: the mesh's kernels over 1 block (grid-stride loops) equal the host build",
            case_mesh(1));
    VT_CASE("kernels/device meaning: the mesh's kernels over 2 blocks equal the host build", case_mesh(2));
    return vt_summary();
}
