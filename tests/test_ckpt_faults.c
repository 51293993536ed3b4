/* test_ckpt_faults.c - vescale_ckpt.h when things go wrong.

   - async save: the call returns before the checkpoint is committed (no rank
     sees it before vs_ckpt_wait, which commits it), the caller's buffers can
     be changed at once and the checkpoint holds the values at the call;
     vs_ckpt_wait gives the result; an async save that cannot start (the path's
     parent is missing) fails at the call on every rank; one that fails later
     (the path taken before the commit) surfaces on vs_ckpt_wait, or on the next
     save when not waited for (that save is not made; the one after it is);
     vs_ckpt_async_memory reports the bytes copied and the bound; a save over
     async_max_bytes is made synchronously (committed when the call returns)
     and copies nothing.
   - disk full: a forked child with RLIMIT_FSIZE (SIGXFSZ ignored) saves, sync
     and async, one rank's shard over the limit: VS_ERR_IO on every rank naming
     that shard file and the entry being written; the checkpoint
     saved before in the same folder still loads and is still the latest; no
     partial directory is left.
   - corruption of each kind of file (index.json truncated, bit-flipped in a
     number, in a name, in its syntax; a shard's header length and header JSON
     flipped, its data flipped, missing, truncated): every load fails with the
     right error naming the file and, where it applies, the entry; `loaded`
     says which entries came in; the failing entry's buffer is untouched or
     (a host tensor, a later block failing) holds verified values only, the
     ones after it are untouched, and no buffer ever gets a wrong value. With
     no_checksum a data flip is not detected (the flipped value comes back), a
     truncation still is.
   - bad input on load: an unknown name, a dtype or shape mismatch, a blob
     buffer too small, a NULL data pointer: each names the entry; `loaded` says
     exactly which entries were loaded before the failure.
   - bad input on save: a name twice on one rank, ranks disagreeing on a shape or
     a dtype, overlapping ZeRO ranges, a Partial placement on one rank, blobs
     that differ: an error on every rank naming the entry, nothing left on disk. */
#define VESCALE_IMPLEMENTATION
#define _VS_CKPT_RA_MIN 1 // the load's read-ahead thread runs on these small files too
#define _VS_CKPT_RA_SPAN_MIN 1
#include "../vescale_ckpt.h"
#include "vs_test.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char root[128];

/* ---- the entries: alpha f32 [rows, 8] Shard(0); beta i32 [100] Replicate;
   gamma f32 [40] Replicate as ZeRO ranges split over the ranks; blob 16 bytes. */
enum { NE = 4, ALPHA = 0, BETA = 1, GAMMA = 2, BLOB = 3 };
static const char* const ENAME[NE] = {"alpha", "beta", "gamma", "blob"};

typedef struct ents {
    vs_ckpt_entry e[NE];
    float* alpha;
    int32_t beta[100];
    float gamma[40];
    unsigned char blob[32];
    int64_t alpha_n;
} ents;

static float alpha_v(int64_t g) { return (float)g * 0.25f - 7.0f; }
static int32_t beta_v(int64_t g) { return (int32_t)(g * 31 - 500); }
static float gamma_v(int64_t g) { return (float)g * -1.5f + 0.125f; }
static unsigned char blob_v(int i) { return (unsigned char)(0xA0 + i); }

/* This rank's entries on mesh m (1-D, P ranks); fill: the formula, else 0xEE bytes. */
static void make(vs_mesh* m, ents* x, int64_t rows, int fill)
{
    int P = vs_mesh_size(m, vs_mesh_dim_name(m, 0)), r = vs_mesh_rank(m);
    memset(x->e, 0, sizeof x->e);
    for (int i = 0; i < NE; i++) x->e[i].name = ENAME[i];
    vs_ckpt_entry* a = &x->e[ALPHA];
    a->t.dtype = VS_F32;
    a->t.ndim = 2;
    a->t.shape[0] = rows;
    a->t.shape[1] = 8;
    a->t.layout.mesh = m;
    a->t.layout.p[0] = vs_shard(0);
    int64_t box[2], off[2];
    VT_OK(vs_layout_local(&a->t.layout, 2, a->t.shape, r, box, off));
    x->alpha_n = box[0] * box[1];
    x->alpha = (float*)malloc(sizeof(float) * (size_t)(x->alpha_n + 1));
    a->t.data = x->alpha;
    vs_ckpt_entry* b = &x->e[BETA];
    b->t.dtype = VS_I32;
    b->t.ndim = 1;
    b->t.shape[0] = 100;
    b->t.layout.mesh = m;
    b->t.layout.p[0] = vs_replicate();
    b->t.data = x->beta;
    vs_ckpt_entry* c = &x->e[GAMMA];
    c->kind = VS_CKPT_RANGE;
    c->t.dtype = VS_F32;
    c->t.ndim = 1;
    c->t.shape[0] = 40;
    c->t.layout.mesh = m;
    c->t.layout.p[0] = vs_replicate();
    c->range_begin = 40 * r / P;
    c->range_end = 40 * (r + 1) / P;
    c->t.data = x->gamma;
    vs_ckpt_entry* d = &x->e[BLOB];
    d->kind = VS_CKPT_BLOB;
    d->blob = x->blob;
    d->blob_bytes = 16;
    memset(x->alpha, 0xEE, sizeof(float) * (size_t)x->alpha_n);
    memset(x->beta, 0xEE, sizeof x->beta);
    memset(x->gamma, 0xEE, sizeof x->gamma);
    memset(x->blob, 0xEE, sizeof x->blob);
    if (!fill) return;
    for (int64_t i = 0; i < x->alpha_n; i++) x->alpha[i] = alpha_v(off[0] * 8 + i);
    for (int i = 0; i < 100; i++) x->beta[i] = beta_v(i);
    for (int64_t i = c->range_begin; i < c->range_end; i++) x->gamma[i - c->range_begin] = gamma_v(i);
    for (int i = 0; i < 16; i++) x->blob[i] = blob_v(i);
}

/* 1 when entry i holds the formula's values (this rank's part), 0 when it is
   still all 0xEE (untouched), 2 when each element is one or the other (partly
   written, with verified values only), -1 otherwise (a wrong value). */
static int state_of(vs_mesh* m, ents* x, int i)
{
    ents want;
    make(m, &want, x->e[ALPHA].t.shape[0], 1);
    const void *p = NULL, *q = NULL;
    size_t n = 0;
    if (i == ALPHA) p = x->alpha, q = want.alpha, n = sizeof(float) * (size_t)x->alpha_n;
    if (i == BETA) p = x->beta, q = want.beta, n = sizeof x->beta;
    if (i == GAMMA)
        p = x->gamma, q = want.gamma, n = sizeof(float) * (size_t)(want.e[GAMMA].range_end - want.e[GAMMA].range_begin);
    if (i == BLOB) p = x->blob, q = want.blob, n = 16;
    int st = !memcmp(p, q, n) ? 1 : -1;
    if (st < 0) {
        const size_t es = i == BLOB ? 1 : 4;
        int right = 0, sentinel = 0;
        st = 0;
        for (size_t k = 0; k < n && st == 0; k += es) {
            const unsigned char *a = (const unsigned char*)p + k, *b = (const unsigned char*)q + k;
            int ee = 1;
            for (size_t t = 0; t < es; t++) ee &= a[t] == 0xEE;
            if (ee) sentinel++;
            else if (!memcmp(a, b, es)) right++;
            else st = -1;
        }
        if (st == 0 && right) st = 2;
        (void)sentinel;
    }
    free(want.alpha);
    return st;
}

static vs_mesh* mesh1d(vs_world* w)
{
    vs_mesh* m = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = vs_world_size(w);
    VT_OK(vs_mesh_init(w, &md, &m));
    return m;
}

static vs_ckpt* ckpt(vs_mesh* m, size_t async_max, int no_checksum)
{
    vs_ckpt* ck = NULL;
    vs_ckpt_desc cd;
    memset(&cd, 0, sizeof cd);
    cd.mesh = m;
    cd.async_max_bytes = async_max;
    cd.no_checksum = no_checksum;
    VT_OK(vs_ckpt_init(&cd, &ck));
    return ck;
}

static int exists(const char* p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* No leftover of an interrupted or failed save in folder. */
static int leftovers(const char* folder)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "ls -a %s | grep -q -e '\\.tmp-' -e '\\.old-'", folder);
    return system(cmd) == 0;
}

static void sh(const char* fmt, const char* a, const char* b)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, fmt, a, b);
    VT_CHECK(system(cmd) == 0, "%s", cmd);
}

/* Saves the standard entries on vs_launch(P) ranks (a helper job). */
typedef struct save_job {
    const char* path;
    int64_t rows;
    int no_checksum;
} save_job;

static int save_rank(vs_world* w, void* arg)
{
    const save_job* j = (const save_job*)arg;
    vs_mesh* m = mesh1d(w);
    vs_ckpt* ck = ckpt(m, 0, j->no_checksum);
    ents x;
    make(m, &x, j->rows, 1);
    VT_OK(vs_ckpt_save(ck, j->path, x.e, NE, NULL));
    free(x.alpha);
    VT_OK(vs_ckpt_free(ck));
    VT_OK(vs_mesh_free(m));
    return 0;
}

static void save_std(const char* path, int P, int64_t rows, int no_checksum)
{
    save_job j = {path, rows, no_checksum};
    VT_CHECK(vs_launch(P, save_rank, &j) == VS_OK, "launch: %s", vs_last_error());
}

/* Loads every entry on vs_launch(P) ranks and checks them (a helper job). */
static int verify_rank(vs_world* w, void* arg)
{
    const save_job* j = (const save_job*)arg;
    vs_mesh* m = mesh1d(w);
    vs_ckpt* ck = ckpt(m, 0, 0);
    ents x;
    make(m, &x, j->rows, 0);
    int loaded[NE];
    VT_OK(vs_ckpt_load(ck, j->path, x.e, NE, loaded));
    for (int i = 0; i < NE; i++)
        VT_CHECK(loaded[i] == 1 && state_of(m, &x, i) == 1, "%s: entry %s not loaded right", j->path, ENAME[i]);
    free(x.alpha);
    VT_OK(vs_ckpt_free(ck));
    VT_OK(vs_mesh_free(m));
    return 0;
}

static void verify_std(const char* path, int P, int64_t rows)
{
    save_job j = {path, rows, 0};
    VT_CHECK(vs_launch(P, verify_rank, &j) == VS_OK, "launch: %s", vs_last_error());
}

/* ---- async ------------------------------------------------------------------ */

static size_t round64(size_t b) { return (b + 63) / 64 * 64; }

static int async_rank(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh* m = mesh1d(w);
    const int me = vs_mesh_rank(m);
    vs_ckpt* ck = ckpt(m, (size_t)1 << 20, 0);
    ents x;
    char path[256], bad[256], later[256];
    snprintf(path, sizeof path, "%s/async/step-1", root);

    // 1. the async save returns before the commit (vs_ckpt_wait commits): no rank sees it
    make(m, &x, 64, 1);
    vs_ckpt_save_opts o = {1, 0};
    VT_OK(vs_ckpt_save(ck, path, x.e, NE, &o));
    VT_CHECK(!exists(path), "the async save committed %s before vs_ckpt_wait", path);
    memset(x.alpha, 0x55, sizeof(float) * (size_t)x.alpha_n); // the caller's buffers are free again
    memset(x.beta, 0x55, sizeof x.beta);
    memset(x.gamma, 0x55, sizeof x.gamma);
    memset(x.blob, 0x55, sizeof x.blob);
    VT_OK(vs_barrier(vs_world_comm(w), NULL));
    VT_CHECK(!exists(path), "the async save committed %s before vs_ckpt_wait", path);
    size_t used = 0, bound = 0;
    VT_OK(vs_ckpt_async_memory(ck, &used, &bound));
    size_t want = round64(sizeof(float) * (size_t)x.alpha_n) + round64(sizeof x.beta) +
                  round64(sizeof(float) * (size_t)(x.e[GAMMA].range_end - x.e[GAMMA].range_begin)) + round64(16);
    VT_CHECK(used == want && bound == (size_t)1 << 20, "async memory %zu of %zu, want %zu of %zu", used, bound, want,
             (size_t)1 << 20);
    VT_OK(vs_ckpt_wait(ck));
    VT_CHECK(exists(path), "%s after vs_ckpt_wait", path);
    VT_OK(vs_ckpt_wait(ck)); // nothing in flight: OK
    // an async save onto an existing path without overwrite: refused at the call, not at a later one
    vs_result rx = vs_ckpt_save(ck, path, x.e, NE, &o);
    VT_CHECK(rx == VS_ERR_STATE && strstr(vs_last_error(), "exists"), "async save onto %s: %s: %s", path,
             vs_result_string(rx), vs_last_error());
    VT_OK(vs_ckpt_wait(ck));
    vs_ckpt_save_opts o7 = {7, 1};
    rx = vs_ckpt_save(ck, path, x.e, NE, &o7);
    VT_CHECK(rx == VS_ERR_INVALID && strstr(vs_last_error(), "async = 7"), "async = 7: %s: %s", vs_result_string(rx),
             vs_last_error());
    free(x.alpha);
    make(m, &x, 64, 0);
    int loaded[NE];
    VT_OK(vs_ckpt_load(ck, path, x.e, NE, loaded));
    for (int i = 0; i < NE; i++) VT_CHECK(state_of(m, &x, i) == 1, "async save: %s is not the value at the call", ENAME[i]);
    free(x.alpha);

    // 2. an async save that cannot start (the parent folder is missing): the call fails on every rank
    snprintf(bad, sizeof bad, "%s/async/no-such-folder/step-2", root);
    make(m, &x, 64, 1);
    vs_result r = vs_ckpt_save(ck, bad, x.e, NE, &o);
    VT_CHECK(r == VS_ERR_IO && strstr(vs_last_error(), "no-such-folder"), "save: %s: %s", vs_result_string(r),
             vs_last_error());
    VT_OK(vs_ckpt_wait(ck)); // reported once

    // 3. failing after the call (the path taken before the commit): vs_ckpt_wait reports it, on every rank
    snprintf(bad, sizeof bad, "%s/async/taken", root);
    VT_OK(vs_ckpt_save(ck, bad, x.e, NE, &o));
    VT_OK(vs_barrier(vs_world_comm(w), NULL));
    if (me == 0) VT_CHECK(mkdir(bad, 0755) == 0, "mkdir %s", bad);
    VT_OK(vs_barrier(vs_world_comm(w), NULL));
    r = vs_ckpt_wait(ck);
    VT_CHECK(r == VS_ERR_STATE && strstr(vs_last_error(), "taken") && strstr(vs_last_error(), "exists"),
             "wait: %s: %s", vs_result_string(r), vs_last_error());
    VT_OK(vs_ckpt_wait(ck)); // reported once
    // not waited for: the next save reports it (and is not made); the one after is
    snprintf(later, sizeof later, "%s/async/step-3", root);
    if (me == 0) VT_CHECK(rmdir(bad) == 0, "rmdir %s", bad);
    VT_OK(vs_barrier(vs_world_comm(w), NULL));
    VT_OK(vs_ckpt_save(ck, bad, x.e, NE, &o));
    VT_OK(vs_barrier(vs_world_comm(w), NULL));
    if (me == 0) VT_CHECK(mkdir(bad, 0755) == 0, "mkdir %s", bad);
    VT_OK(vs_barrier(vs_world_comm(w), NULL));
    r = vs_ckpt_save(ck, later, x.e, NE, NULL);
    VT_CHECK(r == VS_ERR_STATE && strstr(vs_last_error(), "async save before it failed") &&
                 strstr(vs_last_error(), "exists"),
             "next save: %s: %s", vs_result_string(r), vs_last_error());
    VT_OK(vs_barrier(vs_world_comm(w), NULL));
    VT_CHECK(!exists(later), "the save that reported the async failure was made");
    VT_OK(vs_barrier(vs_world_comm(w), NULL));
    if (me == 0) VT_CHECK(rmdir(bad) == 0, "rmdir %s", bad);
    VT_OK(vs_ckpt_save(ck, later, x.e, NE, NULL));
    VT_CHECK(exists(later), "%s", later);
    free(x.alpha);
    VT_OK(vs_ckpt_free(ck));

    // 4. over async_max_bytes: saved synchronously, committed on return; nothing copied
    vs_ckpt* small = ckpt(m, 1024, 0);
    snprintf(path, sizeof path, "%s/async/step-4", root);
    snprintf(later, sizeof later, "%s/async/step-5", root);
    make(m, &x, 64, 1);
    VT_OK(vs_ckpt_save(small, path, &x.e[BLOB], 1, &o)); // 64 bytes: async
    VT_OK(vs_ckpt_async_memory(small, &used, &bound));
    VT_CHECK(used == 64 && bound == 1024, "async memory %zu of %zu, want 64 of 1024", used, bound);
    VT_OK(vs_ckpt_wait(small));
    VT_OK(vs_ckpt_save(small, later, x.e, NE, &o)); // > 1024 bytes: synchronous
    VT_CHECK(exists(later), "a save over the bound is not committed when the call returns");
    VT_OK(vs_ckpt_async_memory(small, &used, &bound));
    VT_CHECK(used == 0 && bound == 1024, "after a save over the bound: async memory %zu of %zu, want 0 of 1024", used,
             bound);
    VT_OK(vs_ckpt_wait(small));
    free(x.alpha);
    VT_OK(vs_ckpt_free(small));

    // 5. the default bound is 4 GiB
    vs_ckpt* dflt = ckpt(m, 0, 0);
    VT_OK(vs_ckpt_async_memory(dflt, &used, &bound));
    VT_CHECK(used == 0 && bound == (size_t)4 << 30, "default async memory %zu of %zu", used, bound);
    VT_OK(vs_ckpt_free(dflt));
    VT_OK(vs_mesh_free(m));
    return 0;
}

static void case_async(void)
{
    sh("mkdir -p %s/async%s", root, "");
    VT_CHECK(vs_launch(2, async_rank, NULL) == VS_OK, "launch: %s", vs_last_error());
    char path[256];
    snprintf(path, sizeof path, "%s/async/step-5", root);
    verify_std(path, 1, 64);
    snprintf(path, sizeof path, "%s/async", root);
    VT_CHECK(!leftovers(path), "leftovers in %s", path);
}

/* ---- disk full ------------------------------------------------------------- */

static int full_rank(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh* m = mesh1d(w);
    vs_ckpt* ck = ckpt(m, 0, 0);
    ents x;
    make(m, &x, 64, 1);
    // rank 1 alone also saves a 32 KiB blob: its shard goes over the 16 KiB limit, rank 0's does not
    vs_ckpt_entry e[NE + 1];
    memcpy(e, x.e, sizeof x.e);
    static unsigned char big[32768];
    memset(&e[NE], 0, sizeof e[NE]);
    e[NE].name = "big";
    e[NE].kind = VS_CKPT_BLOB;
    e[NE].blob = big;
    e[NE].blob_bytes = sizeof big;
    int n = vs_mesh_rank(m) == 1 ? NE + 1 : NE;
    char path[256];
    snprintf(path, sizeof path, "%s/full/step-2", root);
    for (int async = 0; async < 2; async++) {
        vs_ckpt_save_opts o = {async, 0};
        vs_result r = vs_ckpt_save(ck, path, e, n, &o);
        if (async) {
            VT_OK(r); // (copies only)
            r = vs_ckpt_wait(ck);
        }
        const char* msg = vs_last_error();
        VT_CHECK(r == VS_ERR_IO && strstr(msg, "shard-00001.safetensors") && strstr(msg, "too large") &&
                     strstr(msg, "\"big\""),
                 "rank %d: %s save on a full disk: %s: %s", vs_mesh_rank(m), async ? "async" : "sync",
                 vs_result_string(r), msg);
    }
    free(x.alpha);
    VT_OK(vs_ckpt_free(ck));
    VT_OK(vs_mesh_free(m));
    return 0;
}

static void case_disk_full(void)
{
    char folder[256], first[256], latest[300];
    snprintf(folder, sizeof folder, "%s/full", root);
    snprintf(first, sizeof first, "%s/full/step-1", root);
    sh("mkdir -p %s%s", folder, "");
    save_std(first, 2, 2048, 0); // before the disk fills (no limit yet)
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {16384, 16384};
        if (setrlimit(RLIMIT_FSIZE, &rl)) _exit(100);
        int before = vt_failures;
        if (vs_launch(2, full_rank, NULL) != VS_OK) _exit(101);
        _exit(vt_failures != before ? 1 : 0);
    }
    int st = 0;
    VT_CHECK(pid > 0 && waitpid(pid, &st, 0) == pid, "fork/wait");
    VT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the saving child: status %d", st);
    VT_OK(vs_ckpt_latest(folder, latest, sizeof latest));
    VT_CHECK(!strcmp(latest, first), "latest is %s, want %s", latest, first);
    VT_CHECK(!leftovers(folder), "a failed save left a partial directory in %s", folder);
    verify_std(first, 1, 2048); // the earlier checkpoint still loads and verifies
    verify_std(first, 2, 2048);
}

/* ---- corruption ------------------------------------------------------------- */

/* The file and the byte span [begin, end) of piece `key`, from the index text. */
static int find_piece(const char* dir, const char* key, int* file, long* begin, long* end)
{
    char p[300], text[65536], pat[96];
    snprintf(p, sizeof p, "%s/index.json", dir);
    FILE* f = fopen(p, "rb");
    if (!f) return -1;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    snprintf(pat, sizeof pat, "\"key\": \"%s\"", key);
    char* k = strstr(text, pat);
    if (!k) return -1;
    char* fl = k;
    while (fl > text && strncmp(fl, "\"file\": ", 8)) fl--;
    char* d = strstr(k, "\"data\": [");
    if (!d || sscanf(fl + 8, "%d", file) != 1 || sscanf(d + 9, "%ld, %ld", begin, end) != 2) return -1;
    return 0;
}

static void flip_at(const char* file, long at, int bit)
{
    FILE* f = fopen(file, "r+b");
    VT_CHECK(f != NULL, "open %s", file);
    if (!f) return;
    fseek(f, at, SEEK_SET);
    int c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ (1 << bit), f);
    fclose(f);
}

/* Flips a bit of the first byte after `pat` (+ skip) in a text file. */
static void flip_text(const char* file, const char* pat, int skip, int bit)
{
    char text[65536];
    FILE* f = fopen(file, "rb");
    VT_CHECK(f != NULL, "open %s", file);
    if (!f) return;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    char* k = NULL; // (binary files too: a shard starts with NUL bytes)
    for (size_t i = 0; !k && i + strlen(pat) <= n; i++)
        if (!memcmp(text + i, pat, strlen(pat))) k = text + i;
    VT_CHECK(k != NULL, "%s lacks %s", file, pat);
    if (k) flip_at(file, (long)(k - text) + (long)strlen(pat) + skip, bit);
}

typedef struct load_job {
    const char* path;
    int order[NE]; // the request's entries, in this order
    vs_result want;
    const char* n1;
    const char* n2;
    const char* n3;
    int want_loaded[NE]; // by request position; -1: don't care
    int no_checksum_flip; // the data flip went unnoticed: alpha[flip_elem] differs, the rest is right
    long flip_elem;
    int untouched; // desc.untouched_on_error: the failing entry must be untouched
} load_job;

static int load_rank(vs_world* w, void* arg)
{
    const load_job* j = (const load_job*)arg;
    vs_mesh* m = mesh1d(w);
    vs_ckpt* ck = NULL;
    vs_ckpt_desc cd;
    memset(&cd, 0, sizeof cd);
    cd.mesh = m;
    cd.untouched_on_error = j->untouched;
    VT_OK(vs_ckpt_init(&cd, &ck));
    ents x;
    make(m, &x, 64, 0);
    vs_ckpt_entry req[NE];
    for (int i = 0; i < NE; i++) req[i] = x.e[j->order[i]];
    int loaded[NE];
    vs_clear_error();
    vs_result r = vs_ckpt_load(ck, j->path, req, NE, loaded);
    const char* msg = vs_last_error();
    if (getenv("VS_TEST_VERBOSE")) printf("# %s: %s: %s\n", strrchr(j->path, '/') + 1, vs_result_string(r), msg);
    VT_CHECK(r == j->want, "load %s: %s (want %s): %s", j->path, vs_result_string(r), vs_result_string(j->want), msg);
    const char* n[3] = {j->n1, j->n2, j->n3};
    for (int k = 0; k < 3 && r; k++)
        VT_CHECK(!n[k] || strstr(msg, n[k]), "load %s: message \"%s\" lacks \"%s\"", j->path, msg, n[k]);
    int first_failed = -1; // the entry the load stopped at: the one that may be partly written
    for (int i = 0; i < NE && r && first_failed < 0; i++)
        if (!loaded[i]) first_failed = i;
    for (int i = 0; i < NE; i++) {
        int e = j->order[i], s = state_of(m, &x, e);
        if (j->no_checksum_flip && e == ALPHA) {
            VT_CHECK(s == -1 && x.alpha[j->flip_elem] != alpha_v(j->flip_elem), "no_checksum: the flip is not visible");
            x.alpha[j->flip_elem] = alpha_v(j->flip_elem);
            s = state_of(m, &x, e);
        }
        if (j->want_loaded[i] >= 0)
            VT_CHECK(loaded[i] == j->want_loaded[i], "load %s: loaded[%d] (%s) = %d, want %d", j->path, i, ENAME[e],
                 loaded[i], j->want_loaded[i]);
        /* loaded: all of it; the entry that failed: untouched, or (a host tensor
           whose later block fails its checksum) partly written with verified
           values only; the entries after it: untouched; a wrong value: never */
        int partial_ok = i == first_failed && e != BLOB && !j->untouched;
        VT_CHECK(s == (loaded[i] ? 1 : 0) || (partial_ok && s == 2), "load %s: entry %s is %s with loaded[%d] = %d",
                 j->path, ENAME[e],
                 s == 1 ? "loaded" : s == 0 ? "untouched" : s == 2 ? "partly written (right values)" : "wrong", i,
                 loaded[i]);
    }
    free(x.alpha);
    VT_OK(vs_ckpt_free(ck));
    VT_OK(vs_mesh_free(m));
    return 0;
}

static void load_case(const char* path, vs_result want, const char* n1, const char* n2, const char* n3,
                      const int* want_loaded)
{
    load_job j = {path, {BETA, ALPHA, GAMMA, BLOB}, want, n1, n2, n3, {-1, -1, -1, -1}, 0, 0, 0};
    if (want_loaded) memcpy(j.want_loaded, want_loaded, sizeof j.want_loaded);
    VT_CHECK(vs_launch(1, load_rank, &j) == VS_OK, "launch: %s", vs_last_error());
}

/* A fresh copy of the base checkpoint to corrupt. */
static void copy_base(const char* base, char* out, size_t cap, const char* name)
{
    snprintf(out, cap, "%s/corrupt/%s", root, name);
    sh("cp -r %s %s", base, out);
}

static void case_corrupt(void)
{
    char base[256], nock[256], d[256], f[320];
    snprintf(base, sizeof base, "%s/corrupt/base", root);
    snprintf(nock, sizeof nock, "%s/corrupt/base-nock", root);
    sh("mkdir -p %s/corrupt%s", root, "");
    save_std(base, 2, 64, 0);
    save_std(nock, 2, 64, 1);
    int fa;
    long ab, ae;
    VT_CHECK(find_piece(base, "alpha#1", &fa, &ab, &ae) == 0 && ae - ab == 32 * 8 * 4, "alpha#1 in the index");
    char afile[32];
    snprintf(afile, sizeof afile, "shard-%05d.safetensors", fa);
    static const int beta_only[NE] = {1, 0, 0, 0}, none[NE] = {0, 0, 0, 0};
    int fb;
    long bb, be;
    VT_CHECK(find_piece(base, "beta#0", &fb, &bb, &be) == 0, "beta#0 in the index");
    const char* first_in_fa = fb == fa ? "\"beta\"" : "\"alpha\""; // (the request asks for beta, then alpha)

    vt_begin("ckpt_faults/corrupt_index_truncated");
    copy_base(base, d, sizeof d, "ix-trunc");
    snprintf(f, sizeof f, "%s/index.json", d);
    struct stat st;
    stat(f, &st);
    VT_CHECK(truncate(f, st.st_size / 2) == 0, "truncate");
    load_case(d, VS_ERR_INVALID, "index.json", NULL, NULL, none);
    VT_CHECK(truncate(f, 0) == 0, "truncate");
    load_case(d, VS_ERR_INVALID, "index.json", NULL, NULL, none);
    vt_end("ckpt_faults/corrupt_index_truncated");

    vt_begin("ckpt_faults/corrupt_index_number");
    copy_base(base, d, sizeof d, "ix-shape");
    snprintf(f, sizeof f, "%s/index.json", d);
    flip_text(f, "\"name\": \"beta\", \"kind\": \"tensor\", \"dtype\": \"i32\", \"shape\": [", 2, 3); // [100] -> [108]
    load_case(d, VS_ERR_MISMATCH, "\"beta\"", "108", NULL, none);
    copy_base(base, d, sizeof d, "ix-data");
    snprintf(f, sizeof f, "%s/index.json", d);
    flip_text(f, "\"key\": \"alpha#1\"", (int)strlen(", \"offset\": [32, 0], \"box\": [32, 8], \"data\": ["), 0);
    load_case(d, VS_ERR_INVALID, "index.json", "\"alpha\"", NULL, none);
    copy_base(base, d, sizeof d, "ix-bytes");
    snprintf(f, sizeof f, "%s/index.json", d);
    flip_text(f, "\"bytes\": ", 0, 0); // shard-00000's size
    load_case(d, VS_ERR_INVALID, "index.json", NULL, NULL, none);
    {
        copy_base(base, d, sizeof d, "ix-crc2");
        snprintf(f, sizeof f, "%s/index.json", d);
        char text[65536];
        FILE* h = fopen(f, "rb");
        size_t n = h ? fread(text, 1, sizeof text - 1, h) : 0;
        if (h) fclose(h);
        text[n] = 0;
        char* k = strstr(text, "\"key\": \"alpha#1\"");
        char* c = k ? strstr(k, "\"crc32c\": [\"") : NULL;
        VT_CHECK(c != NULL, "alpha#1's CRC");
        if (c) { // a hex digit to another hex digit: still parses, no longer matches
            long at = (long)(c - text) + 12;
            FILE* g = fopen(f, "r+b");
            fseek(g, at, SEEK_SET);
            fputc(text[at] == '0' ? '1' : '0', g);
            fclose(g);
        }
        int al[NE] = {1, 0, 0, 0};
        load_case(d, VS_ERR_IO, "checksum mismatch", afile, "\"alpha\"", al);
    }
    vt_end("ckpt_faults/corrupt_index_number");

    vt_begin("ckpt_faults/corrupt_index_name");
    copy_base(base, d, sizeof d, "ix-name");
    snprintf(f, sizeof f, "%s/index.json", d);
    flip_text(f, "\"name\": \"al", 0, 1); // "alpha" -> "alrha"
    load_case(d, VS_ERR_INVALID, "no entry \"alpha\"", NULL, NULL, beta_only);
    copy_base(base, d, sizeof d, "ix-file");
    snprintf(f, sizeof f, "%s/index.json", d);
    flip_text(f, "\"name\": \"shard-0000", 0, 3); // shard-00000 -> shard-00008
    load_case(d, VS_ERR_IO, "shard-00008.safetensors", NULL, NULL, NULL);
    copy_base(base, d, sizeof d, "ix-syntax");
    snprintf(f, sizeof f, "%s/index.json", d);
    flip_text(f, "\"entries\": ", 0, 2); // '[' -> '_'
    load_case(d, VS_ERR_INVALID, "index.json", NULL, NULL, none);
    vt_end("ckpt_faults/corrupt_index_name");

    vt_begin("ckpt_faults/corrupt_shard_header");
    copy_base(base, d, sizeof d, "hdr-len");
    snprintf(f, sizeof f, "%s/shard-00000.safetensors", d);
    flip_at(f, 1, 4); // the 8-byte header length
    load_case(d, VS_ERR_IO, "shard-00000.safetensors", "header", NULL, NULL);
    copy_base(base, d, sizeof d, "hdr-json");
    snprintf(f, sizeof f, "%s/shard-00000.safetensors", d);
    flip_text(f, "\"data_offsets\":[", 0, 0); // the first tensor's begin: 0 -> 1
    load_case(d, VS_ERR_IO, "shard-00000.safetensors", "header", NULL, NULL);
    vt_end("ckpt_faults/corrupt_shard_header");

    vt_begin("ckpt_faults/corrupt_shard_data");
    copy_base(base, d, sizeof d, "data");
    snprintf(f, sizeof f, "%s/%s", d, afile);
    flip_at(f, ab + 4 * 37 + 2, 5); // alpha element 32 * 8 + 37 (the second piece, read after the first)
    {
        int al[NE] = {1, 0, 0, 0};
        load_case(d, VS_ERR_IO, "checksum mismatch", afile, "\"alpha\"", al);
    }
    { // desc.untouched_on_error: alpha's first piece is good, its second is not: alpha stays untouched
        load_job j = {d, {BETA, ALPHA, GAMMA, BLOB}, VS_ERR_IO, "checksum mismatch", afile, "\"alpha\"", {1, 0, 0, 0},
                      0, 0, 1};
        VT_CHECK(vs_launch(1, load_rank, &j) == VS_OK, "launch: %s", vs_last_error());
    }
    { // two ranks: only rank 1 reads the flipped piece (alpha#1); both fail alike, naming it
        load_job j = {d, {BETA, ALPHA, GAMMA, BLOB}, VS_ERR_IO, "checksum mismatch", afile, "\"alpha\"", {-1, -1, -1, -1},
                      0, 0, 0};
        VT_CHECK(vs_launch(2, load_rank, &j) == VS_OK, "launch: %s", vs_last_error());
    }
    copy_base(nock, d, sizeof d, "data-nock");
    snprintf(f, sizeof f, "%s/%s", d, afile);
    int fn_;
    long nb, ne_;
    VT_CHECK(find_piece(d, "alpha#1", &fn_, &nb, &ne_) == 0 && fn_ == fa, "alpha#1 in the no-checksum index");
    flip_at(f, nb + 4 * 37 + 2, 5);
    {
        load_job j = {d, {BETA, ALPHA, GAMMA, BLOB}, VS_OK, NULL, NULL, NULL, {1, 1, 1, 1}, 1, 32 * 8 + 37, 0};
        VT_CHECK(vs_launch(1, load_rank, &j) == VS_OK, "launch: %s", vs_last_error());
    }
    vt_end("ckpt_faults/corrupt_shard_data");

    vt_begin("ckpt_faults/corrupt_shard_missing");
    copy_base(base, d, sizeof d, "missing");
    snprintf(f, sizeof f, "%s/%s", d, afile);
    VT_CHECK(unlink(f) == 0, "unlink");
    load_case(d, VS_ERR_IO, afile, first_in_fa, NULL, NULL);
    vt_end("ckpt_faults/corrupt_shard_missing");

    vt_begin("ckpt_faults/corrupt_shard_truncated");
    for (int k = 0; k < 2; k++) {
        copy_base(k ? nock : base, d, sizeof d, k ? "trunc-nock" : "trunc");
        snprintf(f, sizeof f, "%s/%s", d, afile);
        stat(f, &st);
        VT_CHECK(truncate(f, st.st_size - 5) == 0, "truncate");
        load_case(d, VS_ERR_IO, afile, "truncated", first_in_fa, NULL);
        VT_CHECK(truncate(f, 4) == 0, "truncate");
        load_case(d, VS_ERR_IO, afile, NULL, NULL, NULL);
    }
    vt_end("ckpt_faults/corrupt_shard_truncated");
}

/* ---- bad input on load ------------------------------------------------------- */

typedef struct bad_load {
    const char* path;
    int kind; // 0 unknown name, 1 dtype, 2 shape, 3 blob too small, 4 NULL data, 5 ndim
} bad_load;

static int bad_load_rank(vs_world* w, void* arg)
{
    const bad_load* j = (const bad_load*)arg;
    vs_mesh* m = mesh1d(w);
    vs_ckpt* ck = ckpt(m, 0, 0);
    ents x;
    make(m, &x, 64, 0);
    vs_ckpt_entry req[NE] = {x.e[BETA], x.e[ALPHA], x.e[GAMMA], x.e[BLOB]};
    int bad = 1; // the request position made bad (alpha), or 3 (the blob)
    vs_result want = VS_ERR_MISMATCH;
    const char *n1 = "\"alpha\"", *n2 = NULL;
    float spare[8];
    switch (j->kind) {
    case 0: req[1].name = "alpha.extra", want = VS_ERR_INVALID, n1 = "no entry \"alpha.extra\""; break;
    case 1: req[1].t.dtype = VS_F64, n2 = "f64"; break;
    case 2: req[1].t.shape[1] = 9, n2 = "asked for as"; break;
    case 3: bad = 3, req[3].blob_bytes = 15, want = VS_ERR_INVALID, n1 = "\"blob\"", n2 = "16 bytes"; break;
    case 4: req[1].t.data = NULL, want = VS_ERR_NULL, n2 = "NULL"; break;
    case 5: req[1].t.ndim = 1, req[1].t.shape[0] = 64 * 8, req[1].t.data = x.alpha, n2 = "asked for as"; break;
    }
    (void)spare;
    int loaded[NE];
    vs_clear_error();
    vs_result r = vs_ckpt_load(ck, j->path, req, NE, loaded);
    VT_CHECK(r == want, "bad load %d: %s (want %s): %s", j->kind, vs_result_string(r), vs_result_string(want),
             vs_last_error());
    VT_CHECK(strstr(vs_last_error(), n1) && (!n2 || strstr(vs_last_error(), n2)), "bad load %d: \"%s\" lacks %s / %s",
             j->kind, vs_last_error(), n1, n2 ? n2 : "");
    static const int order[NE] = {BETA, ALPHA, GAMMA, BLOB};
    for (int i = 0; i < NE; i++) {
        VT_CHECK(loaded[i] == (i < bad), "bad load %d: loaded[%d] = %d", j->kind, i, loaded[i]);
        if (j->kind == 5 && order[i] == ALPHA) continue; // (its buffer is the same either way)
        int s = state_of(m, &x, order[i]);
        VT_CHECK(s == (i < bad ? 1 : 0), "bad load %d: %s is %d", j->kind, ENAME[order[i]], s);
    }
    free(x.alpha);
    VT_OK(vs_ckpt_free(ck));
    VT_OK(vs_mesh_free(m));
    return 0;
}

static void case_bad_load(void)
{
    char base[256];
    snprintf(base, sizeof base, "%s/corrupt/base", root); // (saved by case_corrupt)
    for (int k = 0; k <= 5; k++) {
        bad_load j = {base, k};
        VT_CHECK(vs_launch(1, bad_load_rank, &j) == VS_OK, "launch: %s", vs_last_error());
        VT_CHECK(vs_launch(2, bad_load_rank, &j) == VS_OK, "launch: %s", vs_last_error());
    }
}

/* ---- bad input on save --------------------------------------------------------- */

static int bad_save_rank(vs_world* w, void* arg)
{
    const int kind = *(const int*)arg;
    vs_mesh* m = mesh1d(w);
    const int me = vs_mesh_rank(m);
    vs_ckpt* ck = ckpt(m, 0, 0);
    ents x;
    make(m, &x, 64, 1);
    vs_ckpt_entry e[NE + 1];
    memcpy(e, x.e, sizeof x.e);
    int n = NE;
    vs_result want = VS_ERR_MISMATCH;
    const char* name = "\"beta\"";
    switch (kind) {
    case 0: // rank 1 gives gamma twice
        if (me == 1) e[n++] = x.e[GAMMA];
        want = VS_ERR_INVALID, name = "\"gamma\"";
        break;
    case 1: if (me == 1) e[BETA].t.shape[0] = 101; break; // (nothing is read: the plan refuses it first)
    case 2: if (me == 1) e[BETA].t.dtype = VS_F32; break;
    case 3: // gamma's ranges overlap: [0, 25) and [20, 40)
        if (me == 0) e[GAMMA].range_end = 25;
        if (me == 1) e[GAMMA].range_begin = 20, e[GAMMA].t.data = x.gamma;
        want = VS_ERR_INVALID, name = "\"gamma\"";
        break;
    case 4: // beta Partial on rank 1 only
        if (me == 1) e[BETA].t.layout.p[0] = vs_partial(VS_OP_SUM);
        want = VS_ERR_UNSUPPORTED;
        break;
    case 5: // the blob differs on rank 1
        if (me == 1) x.blob[3] ^= 1;
        name = "\"blob\"";
        break;
    case 6: // gamma misses elements: rank 1 skips its range
        if (me == 1) e[GAMMA].skip = 1;
        want = VS_ERR_INVALID, name = "\"gamma\"";
        break;
    }
    char path[256];
    snprintf(path, sizeof path, "%s/badsave/k%d", root, kind);
    vs_clear_error();
    vs_result r = vs_ckpt_save(ck, path, e, n, NULL);
    VT_CHECK(r == want && strstr(vs_last_error(), name), "bad save %d on rank %d: %s (want %s): \"%s\" lacks %s", kind,
             me, vs_result_string(r), vs_result_string(want), vs_last_error(), name);
    VT_CHECK(!exists(path), "bad save %d: %s exists", kind, path);
    free(x.alpha);
    VT_OK(vs_ckpt_free(ck));
    VT_OK(vs_mesh_free(m));
    return 0;
}

static void case_bad_save(void)
{
    char folder[256];
    snprintf(folder, sizeof folder, "%s/badsave", root);
    sh("mkdir -p %s%s", folder, "");
    for (int k = 0; k <= 6; k++) VT_CHECK(vs_launch(2, bad_save_rank, &k) == VS_OK, "launch: %s", vs_last_error());
    VT_CHECK(!leftovers(folder), "a refused save left a directory in %s", folder);
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/vs_ckpt_faults_XXXXXX");
    if (!mkdtemp(root)) return 1;
    VT_CASE("ckpt_faults/async", case_async());
    VT_CASE("ckpt_faults/disk_full", case_disk_full());
    case_corrupt();
    VT_CASE("ckpt_faults/bad_load", case_bad_load());
    VT_CASE("ckpt_faults/bad_save", case_bad_save());
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd)) return 1;
    return vt_summary();
}
