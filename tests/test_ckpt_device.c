/* test_ckpt_device.c - vescale_ckpt.h's device buffers (entries with device = 1,
   what an NCCL build saves from and loads into on a GPU), run here without one.

   vescale_ckpt.h's CUDA copies are compiled against the stand-in runtime
   (tests/mock/cuda_runtime.h, _VS_CKPT_FORCE_CUDA): "device" memory is host
   memory from the world's device allocator hook, tracked by the mock
   (tests/mock/mock_device.h), and cudaMemcpy checks that one side of every copy
   lies inside one device allocation and the other is host memory. Checked:
   - save from device memory (sync and async) and load into device memory, on
     the same mesh and resharded (2 ranks -> 1 rank): bitwise equal to the
     values at the save call, for f32 / bf16 tensors, a ZeRO range and a host
     entry beside them;
   - an async save copies the device buffers at the call (they may change at once);
   - a load that fails (a corrupt shard) leaves the device buffer untouched;
   - the copies go through cudaMemcpy (device -> host on save, host -> device
     on load), and no device memory is leaked;
   - a sync save holds one device piece in host memory at a time (the world's
     host allocator hooks), not the rank's whole shard. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#define _VS_CKPT_FORCE_CUDA 1
#define _VS_CKPT_FORCE_STAGING 1 // the metadata collectives through device memory, as on NCCL
#define VESCALE_IMPLEMENTATION
#include "vescale_ckpt.h"
#include "tests/vs_test.h"
#include "mock/mock_device.h"

static long mock_h2d, mock_d2h, mock_d2h_pinned, mock_stage_in, mock_stage_out;

/* Page-locked host ranges (cudaHostRegister): an async save's copy block. */
static struct { char* p; size_t n; } mock_pins[16];
static pthread_mutex_t mock_pin_mu = PTHREAD_MUTEX_INITIALIZER;
static int mock_npins_live;

cudaError_t cudaHostRegister(void* p, size_t n, unsigned flags)
{
    (void)flags;
    pthread_mutex_lock(&mock_pin_mu);
    int at = -1;
    for (int i = 0; i < 16; i++)
        if (!mock_pins[i].p && at < 0) at = i;
    if (at >= 0) mock_pins[at].p = (char*)p, mock_pins[at].n = n, mock_npins_live++;
    pthread_mutex_unlock(&mock_pin_mu);
    return at >= 0 ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t cudaHostUnregister(void* p)
{
    pthread_mutex_lock(&mock_pin_mu);
    int found = 0;
    for (int i = 0; i < 16; i++)
        if (mock_pins[i].p == (char*)p) mock_pins[i].p = NULL, found = 1, mock_npins_live--;
    pthread_mutex_unlock(&mock_pin_mu);
    VT_CHECK(found, "mock: cudaHostUnregister of %p, which is not registered", p);
    return found ? cudaSuccess : cudaErrorInvalidValue;
}

static int mock_pinned(const void* p, size_t n)
{
    pthread_mutex_lock(&mock_pin_mu);
    int in = 0;
    for (int i = 0; i < 16; i++)
        if (mock_pins[i].p && (const char*)p >= mock_pins[i].p && (const char*)p + n <= mock_pins[i].p + mock_pins[i].n) in = 1;
    pthread_mutex_unlock(&mock_pin_mu);
    return in;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, enum cudaMemcpyKind k)
{
    int wd = mock_where(dst, n), ws = mock_where(src, n);
    if (ws == 1 && mock_pinned(dst, n)) __atomic_add_fetch(&mock_d2h_pinned, 1, __ATOMIC_SEQ_CST);
    VT_CHECK(k == cudaMemcpyDefault && wd >= 0 && ws >= 0 && wd != ws,
             "mock: copy %p <- %p, %zu bytes: dst %d src %d (1 device, 0 host, -1 out of bounds)", dst, src, n, wd, ws);
    if (wd < 0 || ws < 0 || wd == ws) return cudaErrorInvalidValue;
    __atomic_add_fetch(wd ? &mock_h2d : &mock_d2h, 1, __ATOMIC_SEQ_CST);
    memcpy(dst, src, n);
    return cudaSuccess;
}

/* The staged metadata collectives (NCCL takes only device memory): host ->
   device before, device -> host after, each side where its kind says. */
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, enum cudaMemcpyKind k, cudaStream_t st)
{
    (void)st;
    int wd = mock_where(dst, n), ws = mock_where(src, n);
    int ok = k == cudaMemcpyDefault && ((wd == 1 && ws == 0) || (wd == 0 && ws == 1));
    VT_CHECK(ok, "mock: async copy %p <- %p, %zu bytes, kind %d: dst %d src %d (1 device, 0 host)", dst, src, n, (int)k,
             wd, ws);
    if (!ok) return cudaErrorInvalidValue;
    __atomic_add_fetch(wd ? &mock_stage_in : &mock_stage_out, 1, __ATOMIC_SEQ_CST);
    memcpy(dst, src, n);
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t st)
{
    (void)st;
    return cudaSuccess;
}

static char root[128];

enum { NE = 4 };
static const char* const ENAME[NE] = {"w", "h", "m", "host"};

static float w_v(int64_t g) { return (float)g * 0.75f - 11.0f; }
static uint16_t h_v(int64_t g) { return vs_f32_to_bf16((float)g * -0.5f + 3.0f); }
static float m_v(int64_t g) { return (float)g * 0.125f + 1.0f; }

typedef struct bufs {
    vs_ckpt_entry e[NE];
    void* dev[3];     // w, h, m in device memory
    size_t bytes[3];
    float host[30];   // "host": f32 [30] Shard(0), host memory
    int64_t n_host;
} bufs;

/* This rank's entries on a 1-D mesh: w f32 [24, 5] Shard(0), h bf16 [37]
   Replicate, m f32 [50] as ZeRO ranges, host f32 [30] Shard(0) (host memory).
   fill: the formula (copied in through cudaMemcpy), else as allocated. */
static void make(vs_world* w, vs_mesh* m, bufs* b, int fill)
{
    int P = vs_mesh_size(m, vs_mesh_dim_name(m, 0)), r = vs_mesh_rank(m);
    memset(b, 0, sizeof *b);
    static const vs_dtype dt[NE] = {VS_F32, VS_BF16, VS_F32, VS_F32};
    static const int64_t rows[NE] = {24, 37, 50, 30};
    for (int i = 0; i < NE; i++) {
        vs_ckpt_entry* e = &b->e[i];
        e->name = ENAME[i];
        e->t.dtype = dt[i];
        e->t.ndim = i == 0 ? 2 : 1;
        e->t.shape[0] = rows[i];
        e->t.shape[1] = 5;
        e->t.layout.mesh = m;
        e->t.layout.p[0] = i == 0 || i == 3 ? vs_shard(0) : vs_replicate();
        int64_t box[2] = {1, 1}, off[2] = {0, 0};
        VT_OK(vs_layout_local(&e->t.layout, e->t.ndim, e->t.shape, r, box, off));
        int64_t n = box[0] * (e->t.ndim > 1 ? box[1] : 1), rb = 0, re = n;
        if (i == 2) {
            e->kind = VS_CKPT_RANGE;
            rb = e->range_begin = n * r / P;
            re = e->range_end = n * (r + 1) / P;
        }
        size_t es = vs_dtype_size(dt[i]), bytes = (size_t)(re - rb) * es;
        unsigned char tmp[1024];
        for (int64_t k = rb; k < re; k++) {
            int64_t g = off[0] * (e->t.ndim > 1 ? 5 : 1) + k;
            if (i == 0) { float v = w_v(g); memcpy(tmp + (k - rb) * 4, &v, 4); }
            if (i == 1) { uint16_t v = h_v(g); memcpy(tmp + (k - rb) * 2, &v, 2); }
            if (i == 2) { float v = m_v(g); memcpy(tmp + (k - rb) * 4, &v, 4); }
            if (i == 3) { float v = w_v(g) + 0.5f; memcpy(tmp + (k - rb) * 4, &v, 4); }
        }
        if (i < 3) {
            b->dev[i] = vs_device_alloc(w, bytes);
            b->bytes[i] = bytes;
            e->device = 1;
            e->t.data = b->dev[i];
            if (fill && bytes) VT_CHECK(cudaMemcpy(b->dev[i], tmp, bytes, cudaMemcpyDefault) == cudaSuccess, "fill");
            if (fill) continue;
        } else {
            b->n_host = n;
            e->t.data = b->host;
            memset(b->host, 0xEE, sizeof b->host);
            if (fill) memcpy(b->host, tmp, bytes);
        }
    }
}

/* Entry i as this rank holds it: 1 the formula, 0 not. */
static int holds(vs_world* w, vs_mesh* m, bufs* b, int i)
{
    bufs want;
    make(w, m, &want, 1);
    unsigned char got[1024], exp[1024];
    size_t n = i < 3 ? b->bytes[i] : sizeof(float) * (size_t)b->n_host;
    if (i < 3) {
        if (n) cudaMemcpy(got, b->dev[i], n, cudaMemcpyDefault);
        if (n) cudaMemcpy(exp, want.dev[i], n, cudaMemcpyDefault);
    } else {
        memcpy(got, b->host, n);
        memcpy(exp, want.host, n);
    }
    for (int k = 0; k < 3; k++) vs_device_free(w, want.dev[k]);
    return !memcmp(got, exp, n);
}

static void drop(vs_world* w, bufs* b)
{
    for (int k = 0; k < 3; k++) vs_device_free(w, b->dev[k]);
}

typedef struct job {
    int save, async, fail;
    const char* path;
} job;

static int rank_fn(vs_world* w, void* arg)
{
    const job* j = (const job*)arg;
    vs_mesh* m = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = vs_world_size(w);
    VT_OK(vs_mesh_init(w, &md, &m));
    vs_ckpt* ck = NULL;
    vs_ckpt_desc cd;
    memset(&cd, 0, sizeof cd);
    cd.mesh = m;
    VT_OK(vs_ckpt_init(&cd, &ck));
    bufs b;
    if (j->save) {
        make(w, m, &b, 1);
        vs_ckpt_save_opts o = {j->async, 0};
        long d2h = __atomic_load_n(&mock_d2h, __ATOMIC_SEQ_CST);
        VT_OK(vs_ckpt_save(ck, j->path, b.e, NE, &o));
        VT_CHECK(__atomic_load_n(&mock_d2h, __ATOMIC_SEQ_CST) > d2h, "no device -> host copy on save");
        if (j->async) { // the device buffers are free again at once
            unsigned char junk[1024];
            memset(junk, 0x3C, sizeof junk);
            for (int k = 0; k < 3; k++)
                if (b.bytes[k]) cudaMemcpy(b.dev[k], junk, b.bytes[k], cudaMemcpyDefault);
            VT_OK(vs_ckpt_wait(ck));
        }
    } else {
        make(w, m, &b, 0);
        unsigned char before[1024];
        if (b.bytes[0]) cudaMemcpy(before, b.dev[0], b.bytes[0], cudaMemcpyDefault);
        int loaded[NE];
        long h2d = __atomic_load_n(&mock_h2d, __ATOMIC_SEQ_CST);
        vs_result r = vs_ckpt_load(ck, j->path, b.e, NE, loaded);
        if (j->fail) { // w's data is corrupt: w untouched, nothing after it loaded
            VT_CHECK(r == VS_ERR_IO && strstr(vs_last_error(), "\"w\""), "corrupt load: %s: %s", vs_result_string(r),
                     vs_last_error());
            unsigned char after[1024];
            if (b.bytes[0]) cudaMemcpy(after, b.dev[0], b.bytes[0], cudaMemcpyDefault);
            VT_CHECK(!memcmp(before, after, b.bytes[0]), "a failed load wrote into the device buffer");
            VT_CHECK(!loaded[0] && !loaded[1] && !loaded[2] && !loaded[3], "loaded flags after a failure");
        } else {
            VT_OK(r);
            VT_CHECK(__atomic_load_n(&mock_h2d, __ATOMIC_SEQ_CST) > h2d, "no host -> device copy on load");
            for (int i = 0; i < NE; i++)
                VT_CHECK(loaded[i] && holds(w, m, &b, i), "%s on rank %d of %d from %s", ENAME[i], vs_mesh_rank(m),
                         vs_world_size(w), j->path);
        }
    }
    drop(w, &b);
    VT_OK(vs_ckpt_free(ck));
    VT_OK(vs_mesh_free(m));
    return 0;
}

/* A sync save of four device entries of 64 KiB a rank: the host memory it holds
   at once (the world's host allocator hooks, each rank thread apart) stays
   under one entry's piece plus the bookkeeping, never the rank's 256 KiB. */
enum { BIG_E = 4, BIG_N = 16384 };
static __thread int big_rank = -1;
static long big_live[2], big_peak[2];
static void* big_alloc(size_t n, void* user)
{
    (void)user;
    char* p = (char*)malloc(n + 16);
    if (!p) return NULL;
    int r = big_rank;
    memcpy(p, &n, sizeof n);
    memcpy(p + 8, &r, sizeof r);
    if (r >= 0 && r < 2) {
        long v = __atomic_add_fetch(&big_live[r], (long)n, __ATOMIC_SEQ_CST);
        if (v > big_peak[r]) big_peak[r] = v;
    }
    return p + 16;
}
static void big_free(void* q, void* user)
{
    (void)user;
    if (!q) return;
    char* p = (char*)q - 16;
    size_t n;
    int r;
    memcpy(&n, p, sizeof n);
    memcpy(&r, p + 8, sizeof r);
    if (r >= 0 && r < 2) __atomic_sub_fetch(&big_live[r], (long)n, __ATOMIC_SEQ_CST);
    free(p);
}
static int big_rank_fn(vs_world* w, void* arg)
{
    const char* path = (const char*)arg;
    big_rank = vs_world_rank(w);
    vs_mesh* m = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = vs_world_size(w);
    VT_OK(vs_mesh_init(w, &md, &m));
    vs_ckpt* ck = NULL;
    vs_ckpt_desc cd;
    memset(&cd, 0, sizeof cd);
    cd.mesh = m;
    VT_OK(vs_ckpt_init(&cd, &ck));
    vs_ckpt_entry e[BIG_E];
    char names[BIG_E][8];
    float* host = (float*)malloc(sizeof(float) * BIG_N);
    memset(e, 0, sizeof e);
    for (int i = 0; i < BIG_E; i++) {
        snprintf(names[i], sizeof names[i], "big%d", i);
        for (int k = 0; k < BIG_N; k++) host[k] = (float)(k + i + big_rank);
        e[i].name = names[i];
        e[i].kind = VS_CKPT_TENSOR;
        e[i].device = 1;
        e[i].t.layout.mesh = m;
        e[i].t.layout.p[0] = vs_shard(0);
        e[i].t.dtype = VS_F32;
        e[i].t.ndim = 1;
        e[i].t.shape[0] = (int64_t)BIG_N * vs_world_size(w);
        e[i].t.data = vs_device_alloc(w, sizeof(float) * BIG_N);
        VT_CHECK(e[i].t.data && cudaMemcpy(e[i].t.data, host, sizeof(float) * BIG_N, cudaMemcpyDefault) == cudaSuccess,
                 "device buffer %d", i);
    }
    long l0 = big_live[big_rank];
    big_peak[big_rank] = l0;
    VT_OK(vs_ckpt_save(ck, path, e, BIG_E, NULL));
    long extra = big_peak[big_rank] - l0, piece = (long)sizeof(float) * BIG_N;
    VT_CHECK(extra <= piece + 32768, "rank %d: a sync save of %d device pieces of %ld bytes held %ld host bytes at once",
             big_rank, BIG_E, piece, extra);
    if (big_rank == 0)
        printf("# sync save of %d device pieces of %ld bytes: %ld host bytes at peak\n", BIG_E, piece, extra);
    for (int i = 0; i < BIG_E; i++) vs_device_free(w, e[i].t.data);
    free(host);
    VT_OK(vs_ckpt_free(ck));
    VT_OK(vs_mesh_free(m));
    return 0;
}

static void run(int nranks, job j)
{
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = nranks;
    ld.allocator.device_alloc = mock_dalloc;
    ld.allocator.device_free = mock_dfree;
    VT_CHECK(vs_launch_ex(&ld, rank_fn, &j) == VS_OK, "launch: %s", vs_last_error());
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/vs_ckpt_dev_XXXXXX");
    if (!mkdtemp(root)) return 1;
    char a[200], s[200];
    snprintf(a, sizeof a, "%s/sync", root);
    snprintf(s, sizeof s, "%s/async", root);

    vt_begin("ckpt_device/round_trip");
    run(2, (job){1, 0, 0, a});
    run(2, (job){0, 0, 0, a});
    run(1, (job){0, 0, 0, a}); // resharded onto one rank
    vt_end("ckpt_device/round_trip");

    vt_begin("ckpt_device/async");
    long d2h0 = mock_d2h, pinned0 = mock_d2h_pinned;
    run(2, (job){1, 1, 0, s});
    // the copies an async save makes of device memory go into page-locked host memory
    VT_CHECK(mock_d2h > d2h0 && mock_d2h_pinned - pinned0 == mock_d2h - d2h0,
             "async save: %ld device-to-host copies, %ld into pinned memory", mock_d2h - d2h0, mock_d2h_pinned - pinned0);
    VT_CHECK(mock_npins_live == 0, "%d host ranges still registered after vs_ckpt_free", mock_npins_live);
    run(2, (job){0, 0, 0, s});
    run(1, (job){0, 0, 0, s});
    vt_end("ckpt_device/async");

    vt_begin("ckpt_device/failed_load");
    { // flip a byte of w's first piece (found in the index)
        char f[300], text[16384];
        snprintf(f, sizeof f, "%s/index.json", a);
        FILE* h = fopen(f, "rb");
        size_t n = h ? fread(text, 1, sizeof text - 1, h) : 0;
        if (h) fclose(h);
        text[n] = 0;
        char* k = strstr(text, "\"key\": \"w#0\"");
        char* fl = k;
        while (fl && fl > text && strncmp(fl, "\"file\": ", 8)) fl--;
        char* d = k ? strstr(k, "\"data\": [") : NULL;
        int file = -1;
        long begin = -1;
        VT_CHECK(d && sscanf(fl + 8, "%d", &file) == 1 && sscanf(d + 9, "%ld", &begin) == 1, "w#0 in the index");
        snprintf(f, sizeof f, "%s/shard-%05d.safetensors", a, file);
        h = fopen(f, "r+b");
        VT_CHECK(h != NULL, "open %s", f);
        if (h) {
            fseek(h, begin + 5, SEEK_SET);
            int c = fgetc(h);
            fseek(h, begin + 5, SEEK_SET);
            fputc(c ^ 0x40, h);
            fclose(h);
        }
        run(1, (job){0, 0, 1, a});
    }
    vt_end("ckpt_device/failed_load");

    vt_begin("ckpt_device/sync_save_memory");
    {
        char bp[200];
        snprintf(bp, sizeof bp, "%s/big", root);
        vs_launch_desc ld;
        memset(&ld, 0, sizeof ld);
        ld.nranks = 2;
        ld.allocator.alloc = big_alloc;
        ld.allocator.free = big_free;
        ld.allocator.device_alloc = mock_dalloc;
        ld.allocator.device_free = mock_dfree;
        VT_CHECK(vs_launch_ex(&ld, big_rank_fn, bp) == VS_OK, "launch: %s", vs_last_error());
    }
    vt_end("ckpt_device/sync_save_memory");

    vt_begin("ckpt_device/no_leaks");
    VT_CHECK(mock_live == 0, "%d device allocations not freed", mock_live);
    VT_CHECK(mock_h2d > 0 && mock_d2h > 0, "copies: %ld host -> device, %ld device -> host", mock_h2d, mock_d2h);
    // every metadata collective went through device memory (a host pointer given
    // to NCCL faults on a GPU): the staging copies happened, in both directions
    VT_CHECK(mock_stage_in > 20 && mock_stage_out > 20, "staged metadata copies: %ld in, %ld out", mock_stage_in,
             mock_stage_out);
    vt_end("ckpt_device/no_leaks");

    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd)) return 1;
    return vt_summary();
}
