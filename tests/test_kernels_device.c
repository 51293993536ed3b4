/* test_kernels_device.c - the device meaning of the kernel texts, without a GPU.

   Every kernel text of the library and of examples/gpt_kernels.h: the mesh's
   10 (>>kernels), vescale_ddp.h's 9 (the optimizers, the casts, sumsq, the canary's two),
   vescale.h's 2 (the tied-gradient add, the step's loss) and gpt_kernels.h's
   16. Each is one text with two meanings: the host build (each kernel a
   loop, each "block" a loop over its threads) and the device build NVRTC
   compiles. The strict stand-in runs the host build, so a change that exists
   only in the device meaning (a VS_MKSEL whose device side sums in another
   order, a tree that reads a partial before the barrier that publishes it) is
   invisible there. Here the device build itself runs on the host: the text is
   expanded with VS_MK_DEVICE 1 (names vs_mk_*, as NVRTC gets them) over an
   emulation of CUDA's vocabulary: blockIdx / threadIdx / blockDim / gridDim
   per emulated thread, each block's VS_MKT threads as host threads that meet
   at a barrier for __syncthreads, __shared__ as one array per kernel (the
   blocks of a launch run one after another, so one block owns it at a time),
   and CUDA's bit-cast intrinsics. Each kernel runs over the launch grid the
   library uses (_vs_mk_run: one block per row for the row kernels, else
   ceil(work / VS_MKT)), and over a smaller grid (grid-stride loops doing the
   rest), and must give the host build's bits on the same inputs.

   Why here and not in the strict stand-in beside every launch: a block is
   VS_MKT host threads meeting at a barrier for each __syncthreads and
   between blocks, so a launch costs milliseconds on 2 cores, more with rows
   or blocks (this file's launches take about 20 s, mostly in the kernel's
   futex wakeups); the strict tests launch thousands of kernels each, and
   make test must fit 10 minutes. The kernels are the same
   text whatever the shapes, so their meanings are compared here, on shapes
   chosen to reach every branch and order (rows longer than a block, shards
   narrower than one, 1, 2, 3 blocks and the launchers' grids).

   What this cannot see: the GPU's own arithmetic (NVRTC's flags make it IEEE;
   the emulation uses the host's), warp-level behaviour (there is none in the
   texts), and races between threads of a block beyond what a barrier orders
   (the emulated threads do run concurrently, so a missing barrier may show as
   a wrong value, not surely). Written in C99 with POSIX threads. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "examples/gpt_kernels.h"
#include "vs_test.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- the declarations ----------------------------------------------------------- */

/* Each text's device build as NVRTC gets it (stringified before this file
   defines the vs_rtc_* qualifiers below for its emulation). */
#define VS_MK_DEVICE 1
static const char kd_src_mesh[] = VS_MKSTR(_VS_MESH_KERNELS);
static const char kd_src_ddp[] = VS_MKSTR(_VS_DDP_KERNELS);
static const char kd_src_hl[] = VS_MKSTR(_VS_HL_KERNELS);
static const char kd_src_gpt[] = VS_MKSTR(GPT__KERNELS);
#undef VS_MK_DEVICE

/* The letter vs_kernel_decl gives a parameter written as `p` in the text. */
static char kd_letter(const char* p, size_t n)
{
    char t[160];
    snprintf(t, sizeof t, "%.*s", (int)n, p);
    if (strchr(t, '*')) return strncmp(t, "const ", 6) ? 'w' : 'r';
    if (!strncmp(t, "unsigned long long ", 19)) return 'u';
    if (!strncmp(t, "long long ", 10)) return 'l';
    if (!strncmp(t, "int ", 4)) return 'i';
    if (!strncmp(t, "float ", 6)) return 'f';
    if (!strncmp(t, "double ", 7)) return 'd';
    return 's';
}

/* Every kernel of text src (each "vs_rtc_global void name(...)") has a
   declaration in decls[0, n) whose argument letters are its parameters', with a
   cost function that gives finite, non-negative flops and bytes (bytes > 0 for a
   kernel of no struct argument) on arguments of every size 64 and every code 1;
   and every declaration names a kernel of the text. */
static void kd_declared(const char* what, const char* src, const vs_kernel_decl* decls, int n)
{
    int found = 0;
    for (const char* q = strstr(src, "vs_rtc_global void "); q; q = strstr(q + 1, "vs_rtc_global void ")) {
        const char* name = q + strlen("vs_rtc_global void ");
        const char* open = strchr(name, '(');
        char nm[64], args[32];
        snprintf(nm, sizeof nm, "%.*s", (int)(open - name), name);
        int na = 0;
        for (const char* p = open + 1; *p && *p != ')' && na < 31;) {
            while (*p == ' ') p++;
            const char* e = p;
            while (*e && *e != ',' && *e != ')') e++;
            args[na++] = kd_letter(p, (size_t)(e - p));
            p = *e == ',' ? e + 1 : e;
        }
        args[na] = 0;
        found++;
        const vs_kernel_decl* d = NULL;
        for (int i = 0; i < n; i++)
            if (!strcmp(decls[i].name, nm)) d = &decls[i];
        VT_CHECK(d != NULL, "%s: kernel %s has no declaration", what, nm);
        if (!d) continue;
        VT_CHECK(!strcmp(d->args, args), "%s: %s declares arguments %s, its text has %s", what, nm, d->args, args);
        int words = 1;
        for (const char* w = d->argnames; *w; w++) words += *w == ' ';
        VT_CHECK(words == (int)strlen(d->args), "%s: %s: %d names for %d arguments", what, nm, words,
                 (int)strlen(d->args));
        VT_CHECK((strchr(d->args, 's') != NULL) == (d->struct_size > 0), "%s: %s: struct size %d", what, nm,
                 d->struct_size);
        VT_CHECK(d->cost != NULL, "%s: %s declares no cost", what, nm);
        if (!d->cost) continue;
        static char ptrs[16][64];
        unsigned char slot[16][256];
        void* a[16];
        for (int i = 0; i < na && i < 16; i++) {
            void* p = ptrs[i];
            int one = 1;
            long long sz = 64;
            memset(slot[i], 0, sizeof slot[i]);
            if (args[i] == 'w' || args[i] == 'r') memcpy(slot[i], &p, sizeof p);
            else if (args[i] == 'i') memcpy(slot[i], &one, sizeof one);
            else if (args[i] == 'l' || args[i] == 'u') memcpy(slot[i], &sz, sizeof sz);
            a[i] = slot[i];
        }
        vs_kernel_cost c;
        VT_OK(vs_kernel_cost_get(d, a, &c));
        VT_CHECK(isfinite(c.flops) && isfinite(c.bytes) && c.flops >= 0 && c.bytes >= 0 &&
                     (c.bytes > 0 || d->struct_size > 0),
                 "%s: %s: flops %g, bytes %g", what, nm, c.flops, c.bytes);
    }
    VT_CHECK(found == n, "%s: %d kernels in the text, %d declared", what, found, n);
}

static void case_declared(void)
{
    kd_declared("vescale_mesh.h", kd_src_mesh, _vs_mk_decls, _VS_MK_N);
    kd_declared("vescale_ddp.h", kd_src_ddp, _vs_ddp_kdecls, _VS_KI_N);
    kd_declared("vescale.h", kd_src_hl, _vs_hl_kdecls, 2);
    kd_declared("gpt_kernels.h", kd_src_gpt, gpt_kernel_decls, GPT_KI_N);
    /* a declaration without a cost is refused, naming the kernel */
    vs_kernel_decl none = {"k_none", "wl", "p n", NULL, 0};
    vs_kernel_cost c;
    VT_CHECK(vs_kernel_cost_get(&none, NULL, &c) == VS_ERR_INVALID && strstr(vs_last_error(), "k_none"),
             "no cost: %s", vs_last_error());
    /* the counts: 10 + 7 + 2 + 16 */
    VT_CHECK(_VS_MK_N == 10 && _VS_KI_N == 9 && GPT_KI_N == 16, "the texts' kernel counts");
}

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
static long kd_fence; /* (an atomic read-modify-write: ThreadSanitizer refuses a bare fence) */
#define __threadfence_system() ((void)__atomic_fetch_add(&kd_fence, 0, __ATOMIC_SEQ_CST))

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

/* The device builds of the mesh's kernel text and of gpt_kernels.h's, as NVRTC
   compiles them (after the prelude's dtype helpers). */
#define VS_MK_DEVICE 1
VS_MK_DTYPES
_VS_MESH_KERNELS
GPT__KERNELS
_VS_DDP_KERNELS
_VS_HL_KERNELS
#undef VS_MK_DEVICE

/* ---- launches ----------------------------------------------------------------- */

/* VS_MKT host threads made once, each one CUDA thread of every block: a launch
   hands them the kernel (go), each runs the grid's blocks in order with a
   barrier between blocks (the next block's shared memory is the same array),
   and the launch returns when all are done. */
static pthread_t kd_pool[VS_MKT];
static pthread_barrier_t kd_go, kd_done;
static void (*kd_run)(int, void**);
static int kd_ki, kd_quit, kd_made;
static void** kd_args;

static void* kd_worker(void* p)
{
    unsigned t = (unsigned)(size_t)p;
    for (;;) {
        pthread_barrier_wait(&kd_go);
        if (kd_quit) return NULL;
        threadIdx.x = t, threadIdx.y = threadIdx.z = 0;
        for (unsigned b = 0; b < gridDim.x; b++) {
            blockIdx.x = b, blockIdx.y = blockIdx.z = 0;
            kd_run(kd_ki, kd_args);
            pthread_barrier_wait(&kd_bar);
        }
        pthread_barrier_wait(&kd_done);
    }
}

/* Runs kernel ki's device meaning (run: its call) over `blocks` blocks of
   VS_MKT threads, one block after another. */
static void kd_launch(void (*run)(int, void**), int ki, void** a, unsigned blocks)
{
    if (!kd_made) {
        pthread_barrier_init(&kd_bar, NULL, VS_MKT);
        pthread_barrier_init(&kd_go, NULL, VS_MKT + 1);
        pthread_barrier_init(&kd_done, NULL, VS_MKT + 1);
        for (int t = 0; t < VS_MKT; t++)
            if (pthread_create(&kd_pool[t], NULL, kd_worker, (void*)(size_t)t) != 0) {
                fprintf(stderr, "kd_launch: pthread_create failed\n");
                exit(2);
            }
        kd_made = 1;
    }
    gridDim.x = blocks, gridDim.y = gridDim.z = 1;
    blockDim.x = VS_MKT, blockDim.y = blockDim.z = 1;
    kd_run = run, kd_ki = ki, kd_args = a;
    pthread_barrier_wait(&kd_go);
    pthread_barrier_wait(&kd_done);
}

/* The pool's end (before the summary). */
static void kd_pool_end(void)
{
    if (!kd_made) return;
    kd_quit = 1;
    pthread_barrier_wait(&kd_go);
    for (int t = 0; t < VS_MKT; t++) pthread_join(kd_pool[t], NULL);
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
   as the host build (host) and as the device meaning (dev) over g blocks and
   compares every written byte. */
static void kd_compare_with(const char* what, const char* name, void (*host)(int, void**), void (*dev)(int, void**),
                            int ki, void** a, kd_outs* o, unsigned g)
{
    void* start[KD_MAXB];
    void* hout[KD_MAXB];
    for (int i = 0; i < o->n; i++) {
        start[i] = malloc(o->bytes[i]), hout[i] = malloc(o->bytes[i]);
        memcpy(start[i], o->p[i], o->bytes[i]);
    }
    host(ki, a);
    for (int i = 0; i < o->n; i++) memcpy(hout[i], o->p[i], o->bytes[i]), memcpy(o->p[i], start[i], o->bytes[i]);
    kd_launch(dev, ki, a, g);
    for (int i = 0; i < o->n; i++) {
        const unsigned char *h = (const unsigned char*)hout[i], *d = (const unsigned char*)o->p[i];
        size_t bad = 0, first = 0;
        for (size_t k = 0; k < o->bytes[i]; k++)
            if (h[k] != d[k] && !bad++) first = k;
        VT_CHECK(bad == 0, "%s (%s, grid %u): output %d: %zu of %zu bytes differ, the first at byte %zu", what, name, g,
                 i, bad, o->bytes[i], first);
        memcpy(o->p[i], start[i], o->bytes[i]);
        free(start[i]), free(hout[i]);
    }
}

/* The library's grid for a launch of `work` (one block per row for the row
   kernels, else a block per VS_MKT elements, at most cap), or `blocks`. */
static unsigned kd_grid(long long work, int rowkernel, long long cap, unsigned blocks)
{
    long long lib = rowkernel ? work : (work + VS_MKT - 1) / VS_MKT;
    if (lib > cap) lib = cap;
    return blocks ? blocks : (unsigned)(lib > 0 ? lib : 1);
}

/* A mesh kernel (_vs_mk_host / the device build) over `blocks` (0: the
   library's grid for `work`, _vs_mk_run's). */
static void kd_compare(const char* what, int ki, void** a, kd_outs* o, long long work, unsigned blocks)
{
    kd_compare_with(what, _vs_mk_decls[ki].name, _vs_mk_host, kd_mesh_call, ki, a, o,
                    kd_grid(work, _VS_MK_ROWKERNEL(ki), 65535, blocks));
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


/* ---- examples/gpt_kernels.h --------------------------------------------------------- */

/* gpt_kernel_host's dispatch, onto the device build (gptk_*). */
static void kd_gpt_call(int ki, void** a)
{
#define A_(T, i) (*(T*)a[i])
#define V_(i) A_(void*, i)
#define C_(i) A_(const void*, i)
#define F_(i) A_(float*, i)
#define CF_(i) A_(const float*, i)
#define I_(i) A_(int, i)
#define L_(i) A_(long long, i)
    switch (ki) {
    case GPT_KI_EMBED: gptk_embed(V_(0), I_(1), C_(2), C_(3), I_(4), A_(const int*, 5), L_(6), L_(7), L_(8), L_(9), L_(10)); break;
    case GPT_KI_EMBED_BWD: gptk_embed_bwd(V_(0), I_(1), C_(2), I_(3), A_(const int*, 4), L_(5), L_(6), L_(7), L_(8), L_(9)); break;
    case GPT_KI_ADD_ROWS: gptk_add_rows(V_(0), I_(1), C_(2), I_(3), L_(4), L_(5), L_(6), L_(7)); break;
    case GPT_KI_SUM_ROWS: gptk_sum_rows(V_(0), I_(1), C_(2), I_(3), L_(4), L_(5), L_(6), L_(7)); break;
    case GPT_KI_LN_FWD: gptk_ln_fwd(V_(0), I_(1), F_(2), F_(3), C_(4), I_(5), C_(6), C_(7), I_(8), L_(9), L_(10)); break;
    case GPT_KI_LN_BWD:
        gptk_ln_bwd(V_(0), I_(1), C_(2), I_(3), C_(4), I_(5), C_(6), I_(7), CF_(8), CF_(9), L_(10), L_(11));
        break;
    case GPT_KI_LN_BWD_W: gptk_ln_bwd_w(V_(0), V_(1), I_(2), C_(3), I_(4), C_(5), I_(6), CF_(7), CF_(8), L_(9), L_(10)); break;
    case GPT_KI_MM: gptk_mm(V_(0), I_(1), C_(2), I_(3), C_(4), I_(5), C_(6), I_(7), L_(8), L_(9), L_(10), I_(11), I_(12)); break;
    case GPT_KI_GELU_FWD: gptk_gelu_fwd(V_(0), I_(1), C_(2), I_(3), L_(4)); break;
    case GPT_KI_GELU_BWD: gptk_gelu_bwd(V_(0), I_(1), C_(2), I_(3), C_(4), I_(5), L_(6)); break;
    case GPT_KI_ATTN_FWD: gptk_attn_fwd(F_(0), V_(1), I_(2), C_(3), C_(4), C_(5), I_(6), L_(7), L_(8), L_(9), L_(10)); break;
    case GPT_KI_ATTN_BWD_ROWS: gptk_attn_bwd_rows(F_(0), CF_(1), C_(2), C_(3), I_(4), L_(5), L_(6), L_(7), L_(8)); break;
    case GPT_KI_ATTN_BWD:
        gptk_attn_bwd(V_(0), V_(1), V_(2), I_(3), CF_(4), CF_(5), C_(6), C_(7), C_(8), I_(9), L_(10), L_(11), L_(12), L_(13));
        break;
    case GPT_KI_CE: gptk_ce(F_(0), F_(1), C_(2), I_(3), A_(const int*, 4), L_(5), L_(6)); break;
    case GPT_KI_MEAN: gptk_mean(F_(0), CF_(1), L_(2)); break;
    default: gptk_scale(V_(0), I_(1), CF_(2), CF_(3), L_(4), L_(5)); break;
    }
#undef A_
#undef V_
#undef C_
#undef F_
#undef CF_
#undef I_
#undef L_
}

/* Every pointer argument is a buffer of KD_GB floats (ids: ints in range); the
   ones gpt_kernel_decls marks written are compared whole: the host build in the
   device's order (gpt_kernel_host(.., 1), what the strict stand-in runs)
   against the device meaning over `blocks`. */
enum { KD_GB = 1 << 15 };
static void kd_gpt_compare(const char* what, int ki, void** a, long long blocks)
{
    const char* sig = gpt_kernel_decls[ki].args;
    int nw = 0, wi[16];
    for (int i = 0; sig[i]; i++)
        if (sig[i] == 'w') wi[nw++] = i;
    void *start[16], *host[16];
    size_t nb = sizeof(float) * KD_GB;
    for (int k = 0; k < nw; k++) {
        void* p = *(void**)a[wi[k]];
        start[k] = malloc(nb), host[k] = malloc(nb);
        memcpy(start[k], p, nb);
    }
    gpt_kernel_host(ki, a, 1);
    for (int k = 0; k < nw; k++) {
        void* p = *(void**)a[wi[k]];
        memcpy(host[k], p, nb), memcpy(p, start[k], nb);
    }
    unsigned g = (unsigned)(blocks < 1 ? 1 : blocks > 16384 ? 16384 : blocks);
    kd_launch(kd_gpt_call, ki, a, g);
    for (int k = 0; k < nw; k++) {
        const unsigned char *h = (const unsigned char*)host[k], *d = (const unsigned char*)*(void**)a[wi[k]];
        size_t bad = 0, first = 0;
        for (size_t b = 0; b < nb; b++)
            if (h[b] != d[b] && !bad++) first = b;
        VT_CHECK(bad == 0, "%s (%s, grid %u): argument %d: %zu bytes differ, the first at byte %zu", what,
                 gpt_kernel_decls[ki].name, g, wi[k], bad, first);
        memcpy(*(void**)a[wi[k]], start[k], nb);
        free(start[k]), free(host[k]);
    }
}

/* Every kernel of gpt_kernels.h in f32 (and bf16 storage for a few), rows long
   enough that a block's threads each sum 3 or more terms, over the grid
   gpt_kernels.h's launchers use (blocks 0) or over `blocks`. */
static void case_gpt(long long blocks)
{
    static float buf[14][KD_GB];
    static int ids[KD_GB];
    for (int b = 0; b < 14; b++)
        for (int i = 0; i < KD_GB; i++) buf[b][i] = (float)kd_rand();
    float *x = buf[0], *y = buf[1], *z = buf[2], *u = buf[3], *v = buf[4], *w = buf[5], *m1 = buf[6], *m2 = buf[7];
    float *o1 = buf[8], *o2 = buf[9], *o3 = buf[10], *o4 = buf[11];
    for (int i = 0; i < KD_GB; i++) m2[i] = 0.5f + 0.25f * (float)kd_rand(); /* rstd-like, positive */
    const int* ip = ids;
    int f32 = GPT_KF32, bf16 = GPT_KBF16;
    char what[96];
#define KD_B(nblk) (blocks ? blocks : (long long)(nblk))
#define KD_BLK(n) (((n) + GPT_KBLOCK - 1) / GPT_KBLOCK)
    for (int pass = 0; pass < 2; pass++) { /* f32 storage, then bf16 (reductions in f32 alike) */
        int t = pass ? bf16 : f32;
        const char* tn = pass ? "bf16" : "f32";
        if (pass) /* bf16 values in every half (no NaN, whose payload may take either operand's: not a meaning) */
            for (int b = 0; b < 14; b++)
                for (int i = 0; i < 2 * KD_GB; i++)
                    ((uint16_t*)buf[b])[i] = vs_f32_to_bf16(b == 7 ? 0.5f + 0.25f * (float)kd_rand() : (float)kd_rand());
        long long n = 6, T = 3, D = 530, V = 40, v0 = 5, Vl = 30, p0 = 1;
        for (int i = 0; i < KD_GB; i++) ids[i] = (int)((unsigned)(i * 7 + 3) % (unsigned)V);
        snprintf(what, sizeof what, "embed %s", tn);
        void* ae[] = {&o1, &t, &x, &y, &t, &ip, &n, &T, &D, &v0, &Vl};
        kd_gpt_compare(what, GPT_KI_EMBED, ae, KD_B(KD_BLK(n * D)));
        long long nb = 65536 / D;
        if (nb > Vl) nb = Vl;
        snprintf(what, sizeof what, "embed backward %s", tn);
        void* aeb[] = {&o1, &t, &x, &t, &ip, &n, &D, &v0, &Vl, &nb};
        kd_gpt_compare(what, GPT_KI_EMBED_BWD, aeb, KD_B(KD_BLK(D * nb)));
        snprintf(what, sizeof what, "add_rows %s", tn);
        void* aar[] = {&o1, &t, &x, &t, &n, &T, &D, &p0};
        kd_gpt_compare(what, GPT_KI_ADD_ROWS, aar, KD_B(KD_BLK(n * D)));
        snprintf(what, sizeof what, "sum_rows %s", tn);
        void* asr[] = {&o1, &t, &x, &t, &n, &T, &D, &p0};
        kd_gpt_compare(what, GPT_KI_SUM_ROWS, asr, KD_B(KD_BLK(T * D)));
        snprintf(what, sizeof what, "layernorm %s", tn);
        void* aln[] = {&o1, &t, &o2, &o3, &x, &t, &y, &z, &t, &n, &D};
        kd_gpt_compare(what, GPT_KI_LN_FWD, aln, KD_B(n));
        snprintf(what, sizeof what, "layernorm backward %s", tn);
        void* alb[] = {&o1, &t, &x, &t, &y, &t, &z, &t, &m1, &m2, &n, &D};
        kd_gpt_compare(what, GPT_KI_LN_BWD, alb, KD_B(n));
        snprintf(what, sizeof what, "layernorm weight backward %s", tn);
        void* alw[] = {&o1, &o2, &t, &x, &t, &y, &t, &m1, &m2, &n, &D};
        kd_gpt_compare(what, GPT_KI_LN_BWD_W, alw, KD_B(KD_BLK(D)));
        for (int tr = 0; tr < 3; tr++)
            for (int beta = 0; beta < 2; beta++) {
                long long M = 37, K = 45, N = 33;
                snprintf(what, sizeof what, "matmul %s trans %d beta %d", tn, tr, beta);
                void* amm[] = {&o1, &t, &x, &t, &y, &t, &z, &t, &M, &K, &N, &tr, &beta};
                kd_gpt_compare(what, GPT_KI_MM, amm, KD_B((M + 31) / 32 * ((N + 31) / 32)));
            }
        long long ng = 700;
        snprintf(what, sizeof what, "gelu %s", tn);
        void* agf[] = {&o1, &t, &x, &t, &ng};
        kd_gpt_compare(what, GPT_KI_GELU_FWD, agf, KD_B(KD_BLK(ng)));
        snprintf(what, sizeof what, "gelu backward %s", tn);
        void* agb[] = {&o1, &t, &x, &t, &y, &t, &ng};
        kd_gpt_compare(what, GPT_KI_GELU_BWD, agb, KD_B(KD_BLK(ng)));
        long long B = 2, TT = 7, H = 2, hd = 520;
        snprintf(what, sizeof what, "attention %s", tn);
        void* aat[] = {&o1, &o2, &t, &x, &y, &z, &t, &B, &TT, &H, &hd};
        kd_gpt_compare(what, GPT_KI_ATTN_FWD, aat, KD_B(B * H * TT));
        snprintf(what, sizeof what, "attention backward rows %s", tn);
        void* abr[] = {&o1, &u, &x, &y, &t, &B, &TT, &H, &hd};
        kd_gpt_compare(what, GPT_KI_ATTN_BWD_ROWS, abr, KD_B(B * H * TT));
        snprintf(what, sizeof what, "attention backward %s", tn);
        void* aab[] = {&o1, &o2, &o3, &t, &u, &v, &x, &y, &z, &t, &B, &TT, &H, &hd};
        kd_gpt_compare(what, GPT_KI_ATTN_BWD, aab, KD_B(KD_BLK(B * TT * H * hd)));
        long long nc = 5, VV = 700;
        for (int i = 0; i < KD_GB; i++) ids[i] = (int)((unsigned)(i * 131 + 17) % (unsigned)VV);
        snprintf(what, sizeof what, "cross-entropy %s", tn);
        void* ace[] = {&o1, &o2, &x, &t, &ip, &nc, &VV};
        kd_gpt_compare(what, GPT_KI_CE, ace, KD_B(nc));
        long long nm = 900, den = 7;
        /* small losses, and big ones that cancel within one thread's strided
           terms (i + 256 is -i's): what rounding leaves of the small ones
           depends on the order of the sum (values in [-1, 1) add exactly in
           double, and the float result would hide any order) */
        float* wide = buf[12];
        for (int i = 0; i < nm; i++)
            wide[i] = i >= 256 && i < 512 ? ldexpf((float)kd_rand(), 50) : i >= 512 && i < 768 ? -wide[i - 256]
                                                                                               : (float)kd_rand();
        void* amn[] = {&o4, &wide, &nm};
        kd_gpt_compare("mean", GPT_KI_MEAN, amn, KD_B(1));
        snprintf(what, sizeof what, "scale %s", tn);
        void* asc[] = {&o1, &t, &x, &w, &nm, &den};
        kd_gpt_compare(what, GPT_KI_SCALE, asc, KD_B(KD_BLK(nm)));
    }
#undef KD_B
#undef KD_BLK
}


/* ---- vescale_ddp.h and vescale.h ------------------------------------------------ */

/* The DDP's kernels: the host build (_vs_hk_*) and the device build (vs_k_*)
   with a launch's arguments. */
#define A_(T, i) (*(T*)a[i])
#define KD_DDP_CALL(P)                                                                                                 \
    switch (ki) {                                                                                                      \
    case _VS_KI_ADAMW:                                                                                                 \
        P##adamw(A_(float*, 0), A_(const float*, 1), A_(float*, 2), A_(float*, 3), A_(long long, 4), A_(float, 5),     \
                 A_(float, 6), A_(float, 7), A_(float, 8), A_(float, 9), A_(float, 10), A_(float, 11), A_(float, 12)); \
        break;                                                                                                         \
    case _VS_KI_SGD:                                                                                                   \
        P##sgd(A_(float*, 0), A_(const float*, 1), A_(float*, 2), A_(long long, 3), A_(float, 4), A_(float, 5),        \
               A_(float, 6), A_(int, 7));                                                                              \
        break;                                                                                                         \
    case _VS_KI_TO_F32: P##to_f32(A_(float*, 0), A_(const void*, 1), A_(int, 2), A_(long long, 3)); break;             \
    case _VS_KI_FROM_F32: P##from_f32(A_(void*, 0), A_(int, 1), A_(const float*, 2), A_(long long, 3)); break;         \
    case _VS_KI_ADD_F32: P##add_f32(A_(float*, 0), A_(const void*, 1), A_(int, 2), A_(long long, 3)); break;           \
    case _VS_KI_SCALE: P##scale(A_(void*, 0), A_(int, 1), A_(long long, 2), A_(float, 3)); break;                      \
    case _VS_KI_CANARY:                                                                                                \
        P##canary(A_(unsigned short*, 0), A_(long long, 1), A_(int, 2), A_(int, 3));                                   \
        break;                                                                                                         \
    case _VS_KI_CANARY_CHECK:                                                                                          \
        P##canary_check(A_(const unsigned short*, 0), A_(long long, 1), A_(int, 2), A_(int, 3),                        \
                        A_(double*, 4), A_(double, 5));                                                                \
        break;                                                                                                         \
    default: P##sumsq(A_(const float*, 0), A_(long long, 1), A_(double*, 2)); break;                                   \
    }
static void kd_ddp_host(int ki, void** a) { KD_DDP_CALL(_vs_hk_) }
static void kd_ddp_dev(int ki, void** a) { KD_DDP_CALL(vs_k_) }
/* vescale.h's: 0 the tied-gradient add, 1 the step's loss */
static void kd_hl_host(int ki, void** a)
{
    if (ki == 0) _vs_hlk_tied_add(A_(void*, 0), A_(void*, 1), A_(int, 2), A_(long long, 3));
    else _vs_hlk_loss_mean(A_(double*, 0), A_(const float*, 1), A_(long long, 2), A_(int, 3));
}
static void kd_hl_dev(int ki, void** a)
{
    if (ki == 0) vs_hl_tied_add(A_(void*, 0), A_(void*, 1), A_(int, 2), A_(long long, 3));
    else vs_hl_loss_mean(A_(double*, 0), A_(const float*, 1), A_(long long, 2), A_(int, 3));
}
#undef A_
#undef KD_DDP_CALL

/* n values of dtype t (0 f32, 1 bf16, 2 f16: the kernels' codes) into p. */
static void kd_fill(void* p, int t, long long n, double scale)
{
    for (long long i = 0; i < n; i++) {
        float v = (float)(scale * kd_rand());
        if (t == 0) ((float*)p)[i] = v;
        else ((uint16_t*)p)[i] = t == 1 ? vs_f32_to_bf16(v) : vs_f32_to_f16(v);
    }
}

/* Every DDP kernel (f32, bf16, f16 where it takes a dtype) over DDP's grid
   (_vs_ddp_kernel's: a block per _VS_KTHREADS elements up to 8192, sumsq on
   _VS_KPARTS) or over `blocks`; then vescale.h's two. */
static void case_ddp(unsigned blocks)
{
    enum { N = 1000, NS = 100003 }; /* NS: more than _VS_KPARTS x _VS_KTHREADS, so each thread sums several */
    static float p[N], g[N], m1[N], m2[N], f[N];
    static uint16_t h[N], h2[N];
    static float big[NS];
    kd_fill(p, 0, N, 1), kd_fill(g, 0, N, 1), kd_fill(m1, 0, N, 0.1);
    for (int i = 0; i < N; i++) m2[i] = (float)(0.01 * (kd_rand() + 1.0));
    long long n = N;
    unsigned grid = kd_grid(n, 0, 8192, blocks);
    float *pp = p, *gp = g, *m1p = m1, *m2p = m2, *fp = f;
    float b1 = 0.9f, b2 = 0.999f, o1 = 0.1f, o2 = 0.001f, step = 1e-3f, c2 = 0.97f, eps = 1e-8f, dec = 0.9999f;
    void* aa[] = {&pp, &gp, &m1p, &m2p, &n, &b1, &b2, &o1, &o2, &step, &c2, &eps, &dec};
    kd_outs oa = {3, {p, m1, m2}, {sizeof p, sizeof m1, sizeof m2}};
    kd_compare_with("adamw", "vs_k_adamw", kd_ddp_host, kd_ddp_dev, _VS_KI_ADAMW, aa, &oa, grid);
    for (int k = 0; k < 3; k++) { /* momentum, Nesterov, none */
        float mu = 0.9f, lr = 0.01f, wd = 0.001f;
        int nest = k == 1;
        float* mp = k == 2 ? NULL : m1;
        void* as[] = {&pp, &gp, &mp, &n, &mu, &lr, &wd, &nest};
        kd_outs os = {2, {p, m1}, {sizeof p, sizeof m1}};
        kd_compare_with(k == 0 ? "sgd momentum" : k == 1 ? "sgd nesterov" : "sgd plain", "vs_k_sgd", kd_ddp_host,
                        kd_ddp_dev, _VS_KI_SGD, as, &os, grid);
    }
    for (int t = 0; t < 3; t++) { /* src: g (f32) or h (dtype t's bits); dst: f or h */
        char what[48];
        void *sp = t ? (void*)h : (void*)g, *dp = t ? (void*)h : (void*)f;
        size_t sb = t ? sizeof h : sizeof g;
        if (t) kd_fill(h, t, N, 3);
        snprintf(what, sizeof what, "to_f32 dtype %d", t);
        void* at[] = {&fp, &sp, &t, &n};
        kd_outs ot = {1, {f}, {sizeof f}};
        kd_compare_with(what, "vs_k_to_f32", kd_ddp_host, kd_ddp_dev, _VS_KI_TO_F32, at, &ot, grid);
        snprintf(what, sizeof what, "from_f32 dtype %d", t);
        void* af[] = {&dp, &t, &gp, &n};
        kd_outs of = {1, {dp}, {sb}};
        kd_compare_with(what, "vs_k_from_f32", kd_ddp_host, kd_ddp_dev, _VS_KI_FROM_F32, af, &of, grid);
        snprintf(what, sizeof what, "add_f32 dtype %d", t);
        void* ad[] = {&fp, &sp, &t, &n};
        kd_outs od = {1, {f}, {sizeof f}};
        kd_compare_with(what, "vs_k_add_f32", kd_ddp_host, kd_ddp_dev, _VS_KI_ADD_F32, ad, &od, grid);
        snprintf(what, sizeof what, "scale dtype %d", t);
        float sc = 0.3f;
        void* ac[] = {&sp, &t, &n, &sc};
        kd_outs oc = {1, {sp}, {sb}};
        kd_compare_with(what, "vs_k_scale", kd_ddp_host, kd_ddp_dev, _VS_KI_SCALE, ac, &oc, grid);
    }
    /* the sum of squares, into parts that already hold sums (it adds) */
    static double part[_VS_KPARTS];
    double* pa = part;
    for (int i = 0; i < _VS_KPARTS; i++) part[i] = kd_rand();
    kd_fill(big, 0, NS, 4);
    for (int k = 0; k < 2; k++) {
        long long ns = k ? 300 : NS; /* many a thread, and fewer than one part's threads */
        const float* bp = big;
        void* aq[] = {&bp, &ns, &pa};
        kd_outs oq = {1, {part}, {sizeof part}};
        kd_compare_with(k ? "sumsq of 300" : "sumsq of 100003", "vs_k_sumsq", kd_ddp_host, kd_ddp_dev, _VS_KI_SUMSQ,
                        aq, &oq, blocks ? blocks : _VS_KPARTS);
    }
    /* VESCALE_DEBUG=params' canary: written (an odd count of halfwords), then compared: intact (the record
       stays 0), and with one halfword changed (the record gets the code) */
    {
        static uint16_t cv[N + 1];
        static double rec[1];
        uint16_t* cp = cv;
        double* rp = rec;
        long long nc = N + 1;
        int lo = 0x0b, hi = 0x7fec;
        void* af[] = {&cp, &nc, &lo, &hi};
        kd_outs of = {1, {cv}, {sizeof cv}};
        unsigned cg = kd_grid(nc, 0, 8192, blocks);
        kd_compare_with("canary", "vs_k_canary", kd_ddp_host, kd_ddp_dev, _VS_KI_CANARY, af, &of, cg);
        _vs_hk_canary(cv, nc, lo, hi); // (the comparison leaves its outputs as they were)
        VT_CHECK(cv[0] == 0x0b && cv[1] == 0x7fec && cv[N] == 0x0b, "canary %#x %#x %#x", cv[0], cv[1], cv[N]);
        for (int k = 0; k < 2; k++) {
            double code = 7;
            rec[0] = 0;
            if (k) cv[N / 2] ^= 1;
            void* ac[] = {&cp, &nc, &lo, &hi, &rp, &code};
            kd_outs oc = {1, {rec}, {sizeof rec}};
            kd_compare_with(k ? "canary_check, changed" : "canary_check, intact", "vs_k_canary_check", kd_ddp_host,
                            kd_ddp_dev, _VS_KI_CANARY_CHECK, ac, &oc, cg);
            _vs_hk_canary_check(cv, nc, lo, hi, rec, code);
            VT_CHECK(rec[0] == (k ? 7 : 0), "canary_check %s: record %g", k ? "changed" : "intact", rec[0]);
        }
    }
    /* vescale.h: the tied-gradient add in each dtype, the loss's mean (one thread's) */
    for (int t = 0; t < 3; t++) {
        char what[48];
        void *ga = t ? (void*)h : (void*)f, *sa = t ? (void*)h2 : (void*)m1;
        kd_fill(ga, t, N, 2), kd_fill(sa, t, N, 2);
        snprintf(what, sizeof what, "tied add dtype %d", t);
        void* at[] = {&ga, &sa, &t, &n};
        kd_outs ot = {2, {ga, sa}, {t ? sizeof h : sizeof f, t ? sizeof h2 : sizeof m1}};
        kd_compare_with(what, "vs_hl_tied_add", kd_hl_host, kd_hl_dev, 0, at, &ot, kd_grid(n, 0, 8192, blocks));
    }
    static double out[1];
    double* op = out;
    for (int add = 0; add < 2; add++) {
        long long m = 7;
        out[0] = kd_rand();
        const float* lp = g;
        void* al[] = {&op, &lp, &m, &add};
        kd_outs ol = {1, {out}, {sizeof out}};
        kd_compare_with(add ? "loss mean, added" : "loss mean", "vs_hl_loss_mean", kd_hl_host, kd_hl_dev, 1, al, &ol,
                        1);
    }
}

int main(void)
{
    VT_CASE("kernels/declared: every kernel of the mesh's, DDP's, vescale.h's and gpt_kernels.h's texts has a "
            "declaration whose arguments are its text's, with a cost", case_declared());
    VT_CASE("kernels/device meaning: the mesh's kernels over the library's grid equal the host build bit for bit",
            case_mesh(0));
    VT_CASE("kernels/device meaning: the mesh's kernels over 1 block (grid-stride loops) equal the host build",
            case_mesh(1));
    VT_CASE("kernels/device meaning: the mesh's kernels over 2 blocks equal the host build", case_mesh(2));
    VT_CASE("kernels/device meaning: gpt_kernels.h's kernels over their launchers' grids equal the host build in the "
            "device's order bit for bit", case_gpt(0));
    VT_CASE("kernels/device meaning: gpt_kernels.h's kernels over 1 block equal the host build", case_gpt(1));
    VT_CASE("kernels/device meaning: vescale_ddp.h's kernels (sumsq on its fixed parts) and vescale.h's over their "
            "launchers' grids equal the host build bit for bit", case_ddp(0));
    VT_CASE("kernels/device meaning: vescale_ddp.h's and vescale.h's kernels over 3 blocks (grid-stride loops, sumsq's "
            "parts shared unevenly) equal the host build", case_ddp(3));
    kd_pool_end();
    return vt_summary();
}
