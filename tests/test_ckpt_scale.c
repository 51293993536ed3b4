/* test_ckpt_scale.c - a checkpoint save's and load's metadata does not grow
   on a rank other than 0 with the world's size (issue 35 §3).

   The library's host bytes during vs_ckpt_save and vs_ckpt_load, through the
   allocator hooks, each block charged to the rank thread that allocated it
   (its peak over the call, above what it held before): at 16 and 64 thread
   ranks, with the same entries a rank (replicated tensors, as a DDP's, sharded
   ones, a blob). A rank other than 0 holds its own records (save) or its part
   of the index (load: its entries, the pieces it reads, their files) and O(1)
   more, so its bytes are the same at 64 ranks as at 16; rank 0 gathers every
   rank's records (it writes the index) and reads the whole index back, so its
   bytes grow with the ranks, no faster. Before, every rank all-gathered every
   rank's records (~660 B each) and planned all of them, and every rank
   all-gathered every rank's CRC lists: ~10 x 660 B x n a rank here; and every
   rank parsed the whole index on a load (~1.7 KB and a file a rank saving).
   The saved checkpoint is loaded back on every rank and checked; a bad index
   (a file's size made wrong, the index removed) then fails the load on every
   rank with rank 0's message word for word. Built with
   -DVESCALE_MPI (tests/run.sh runs it on 4 processes): the same round trip
   over MPI. */
#define VESCALE_IMPLEMENTATION
#include "../vescale_ckpt.h"
#include "../bench/rank_bytes.h"
#include "vs_test.h"

#include <stdlib.h>
#include <unistd.h>

enum { MAXR = 64, NREP = 4, NSH = 3, NZ = NREP + NSH, N2 = NZ + 1, NE = N2 + 2 };
static rb_account accts[MAXR];

static char root[256];
static size_t save_bytes[MAXR], load_bytes[MAXR]; // each rank's peak over the call, above what it held before
static int loaded_ok[MAXR];

static float value(int e, int64_t i) { return (float)(e * 1000 + i) * 0.25f; }

/* Entry e's 16 or 4 elements on rank `me` of n: their global flat indices. */
static int64_t global_of(int e, int n, int me, int64_t j)
{
    if (e < NREP) return j;
    if (e == N2) return j / 4 * 4 * n + 4 * me + j % 4; // f32[4, 4 n], Shard(1): a 4 x 4 box
    return 4 * (int64_t)me + j;                         // Shard(0), or the range of a replicated box
}

/* This rank's entries: NREP replicated f32[16], NSH f32[4 n] sharded on the
   ranks, a ZeRO-style range (a replicated f32[4 n] whose ranks hold 4
   elements each), an f32[4, 4 n] sharded on its columns, and a blob every rank
   gives alike. */
static void make(vs_mesh* m, vs_ckpt_entry* en, float (*buf)[16], uint64_t* blob, int fill)
{
    const int n = vs_mesh_size(m, vs_mesh_dim_name(m, 0)), me = vs_mesh_rank(m);
    static const char* names[NE] = {"rep0", "rep1", "rep2", "rep3", "sh0", "sh1", "sh2", "zr", "cols", "step"};
    memset(en, 0, sizeof(vs_ckpt_entry) * NE);
    for (int e = 0; e < NE - 1; e++) {
        en[e].name = names[e];
        en[e].t.dtype = VS_F32;
        en[e].t.ndim = e == N2 ? 2 : 1;
        en[e].t.shape[0] = e < NREP ? 16 : e == N2 ? 4 : 4 * (int64_t)n;
        en[e].t.shape[1] = 4 * (int64_t)n;
        const char* lt = e < NREP || e == NZ ? "[Replicate]" : e == N2 ? "[Shard(1)]" : "[Shard(0)]";
        VT_OK(vs_layout_parse(m, lt, &en[e].t.layout));
        en[e].t.data = buf[e];
        if (e == NZ) // (its ranks' ranges cover the box once: nothing replicated is written twice)
            en[e].kind = VS_CKPT_RANGE, en[e].range_begin = 4 * (int64_t)me, en[e].range_end = 4 * (int64_t)me + 4;
        const int64_t cnt = e < NREP || e == N2 ? 16 : 4;
        for (int64_t i = 0; i < cnt; i++) buf[e][i] = fill ? value(e, global_of(e, n, me, i)) : -1.0f;
    }
    en[NE - 1].name = names[NE - 1];
    en[NE - 1].kind = VS_CKPT_BLOB;
    en[NE - 1].blob = blob;
    en[NE - 1].blob_bytes = sizeof *blob;
    *blob = fill ? 0x5ca1eull : 0;
}

/* A rank's checkpointer over a 1-D mesh of the world, and its entries. */
typedef struct rank_ck {
    vs_mesh* m;
    vs_ckpt* ck;
    vs_ckpt_entry en[NE];
    float buf[NE][16];
    uint64_t blob;
} rank_ck;

static void open_ck(vs_world* w, rank_ck* x, int fill)
{
    memset(x, 0, sizeof *x);
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = vs_world_size(w);
    VT_OK(vs_mesh_init(w, &md, &x->m));
    vs_ckpt_desc cd;
    memset(&cd, 0, sizeof cd);
    cd.mesh = x->m;
    VT_OK(vs_ckpt_init(&cd, &x->ck));
    make(x->m, x->en, x->buf, &x->blob, fill);
}

static void close_ck(rank_ck* x)
{
    VT_OK(vs_ckpt_free(x->ck));
    VT_OK(vs_mesh_free(x->m));
}

static int rank_main(vs_world* w, void* arg)
{
    const char* path = (const char*)arg;
    const int me = vs_world_rank(w);
    if (me < 0 || me >= MAXR) return 1;
    rb_acct = &accts[me];
    rank_ck x;
    open_ck(w, &x, 1);
    VT_OK(vs_barrier(vs_mesh_comm(x.m), NULL)); // (every rank's setup done: its bytes now are the base)
    size_t base = rb_mark();
    vs_result r = vs_ckpt_save(x.ck, path, x.en, NE, NULL);
    save_bytes[me] = rb_since(base);
    VT_CHECK(r == VS_OK, "rank %d: save: %s", me, vs_last_error());
    make(x.m, x.en, x.buf, &x.blob, 0);
    int loaded[NE];
    VT_OK(vs_barrier(vs_mesh_comm(x.m), NULL));
    base = rb_mark();
    r = vs_ckpt_load(x.ck, path, x.en, NE, loaded);
    load_bytes[me] = rb_since(base);
    VT_CHECK(r == VS_OK, "rank %d: load: %s", me, vs_last_error());
    int ok = r == VS_OK && x.blob == 0x5ca1eull;
    const int n = vs_world_size(w);
    for (int e = 0; e < NE - 1; e++)
        for (int64_t i = 0; i < (e < NREP || e == N2 ? 16 : 4); i++)
            ok &= x.buf[e][i] == value(e, global_of(e, n, me, i));
    loaded_ok[me] = ok;
    close_ck(&x);
    return 0;
}

#ifndef VESCALE_MPI
/* One save and load on n thread ranks: rank 0's bytes, and the largest of the
   other ranks', for each (0 save, 1 load). */
static void run(int n, size_t* b0, size_t* bmax)
{
    char path[300];
    snprintf(path, sizeof path, "%s/n%d", root, n);
    memset(accts, 0, sizeof accts);
    memset(save_bytes, 0, sizeof save_bytes);
    memset(load_bytes, 0, sizeof load_bytes);
    memset(loaded_ok, 0, sizeof loaded_ok);
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = n;
    ld.stack_bytes = (size_t)256 << 10;
    ld.allocator.alloc = rb_alloc, ld.allocator.free = rb_free;
    VT_OK(vs_launch_ex(&ld, rank_main, path));
    int good = 0;
    for (int k = 0; k < n; k++) good += loaded_ok[k];
    VT_CHECK(good == n, "%d ranks: %d loaded back what they saved", n, good);
    const size_t* by[2] = {save_bytes, load_bytes};
    for (int c = 0; c < 2; c++) {
        b0[c] = by[c][0], bmax[c] = 0;
        for (int k = 1; k < n; k++)
            if (by[c][k] > bmax[c]) bmax[c] = by[c][k];
        printf("# %2d ranks: a %s's host bytes on rank 0 %zu, on the other ranks at most %zu\n", n,
               c ? "load" : "save", b0[c], bmax[c]);
    }
}

static void case_nonroot_flat(void)
{
    size_t r16[2], o16[2], r64[2], o64[2];
    run(16, r16, o16);
    run(64, r64, o64);
    for (int c = 0; c < 2; c++) {
        const char* what = c ? "load" : "save";
        /* the other ranks: the same entries, the same bytes (a little slack for
           the transport's per-call scratch) */
        VT_CHECK(o64[c] <= o16[c] + 512,
                 "a rank other than 0 holds %zu bytes during a %s at 64 ranks, %zu at 16: it grows with the world",
                 o64[c], what, o16[c]);
        /* rank 0: linear (every rank's records, their plan and offsets; the
           whole index and every rank's part of it), never more than 4 x from 16
           to 64 ranks (+ its constant part) */
        VT_CHECK(r64[c] <= 4 * r16[c] + 4096, "rank 0 holds %zu bytes during a %s at 64 ranks, %zu at 16", r64[c],
                 what, r16[c]);
    }
}

/* A bad index reaches every rank: rank 0 alone reads it, and every rank returns
   its error word for word (before, the other ranks said only "rank 0's error
   says why" when the file was missing). */
enum { NBAD = 8 };
static vs_result bad_rc[NBAD];
static char bad_msg[NBAD][1024];

static int bad_rank(vs_world* w, void* arg)
{
    const int me = vs_world_rank(w);
    rank_ck x;
    open_ck(w, &x, 0);
    bad_rc[me] = vs_ckpt_load(x.ck, (const char*)arg, x.en, NE, NULL);
    snprintf(bad_msg[me], sizeof bad_msg[me], "%s", vs_last_error());
    close_ck(&x);
    return 0;
}

static void bad_case(const char* path, vs_result want, const char* frag)
{
    memset(bad_rc, 0, sizeof bad_rc);
    VT_OK(vs_launch(NBAD, bad_rank, (void*)path));
    int same = 0;
    for (int k = 0; k < NBAD; k++) same += bad_rc[k] == want && !strcmp(bad_msg[k], bad_msg[0]);
    VT_CHECK(same == NBAD && strstr(bad_msg[0], "index.json") && strstr(bad_msg[0], frag),
             "%d of %d ranks return %d with rank 0's message \"%s\" (rank %d: %d \"%s\")", same, NBAD, (int)want,
             bad_msg[0], NBAD - 1, (int)bad_rc[NBAD - 1], bad_msg[NBAD - 1]);
}

static void case_bad_index(void)
{
    char path[300], file[340], text[1 << 16];
    snprintf(path, sizeof path, "%s/n%d", root, 16); // (case_nonroot_flat's)
    snprintf(file, sizeof file, "%s/index.json", path);
    FILE* f = fopen(file, "rb");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[n] = 0;
    char* b = strstr(text, "\"bytes\": "); // the first file's size, now 1 byte: its pieces lie past its end
    VT_CHECK(b != NULL, "%s: no file size", file);
    if (!b) return;
    b += strlen("\"bytes\": ");
    size_t digits = strspn(b, "0123456789");
    f = fopen(file, "wb");
    VT_CHECK(f && fprintf(f, "%.*s1%s", (int)(b - text), text, b + digits) > 0, "rewrite %s", file);
    if (f) fclose(f);
    bad_case(path, VS_ERR_INVALID, "past the end");
    VT_CHECK(remove(file) == 0, "remove %s", file);
    bad_case(path, VS_ERR_IO, "not a complete checkpoint");
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/vs_ckpt_scale_XXXXXX");
    if (!mkdtemp(root)) return 1;
    VT_CASE("ckpt_scale/nonroot_flat", case_nonroot_flat());
    VT_CASE("ckpt_scale/bad_index_every_rank", case_bad_index());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd)) return 1;
    return vt_summary();
}
#else
/* Ranks as MPI processes (tests/run.sh: np 4): the save's point-to-point
   transfers and agreements over MPI, a round trip checked on every rank. */
int main(void)
{
    vs_world* w = NULL;
    vs_world_desc wd;
    memset(&wd, 0, sizeof wd);
    wd.transport = VS_TRANSPORT_MPI;
    wd.allocator.alloc = rb_alloc, wd.allocator.free = rb_free;
    if (vs_world_init(&wd, &w)) {
        fprintf(stderr, "vs_world_init(MPI): %s\n", vs_last_error());
        return 1;
    }
    const int me = vs_world_rank(w);
    vt_begin("ckpt_scale/mpi");
    if (me == 0) {
        snprintf(root, sizeof root, "/tmp/vs_ckpt_scale_XXXXXX");
        if (!mkdtemp(root)) root[0] = 0;
    }
    VT_OK(vs_broadcast(vs_world_comm(w), root, root, sizeof root, VS_U8, 0, NULL));
    char path[300];
    snprintf(path, sizeof path, "%s/mpi", root);
    int rc = root[0] ? rank_main(w, path) : 1;
    VT_CHECK(rc == 0 && me >= 0 && me < MAXR && loaded_ok[me], "rank %d: the round trip failed", me);
    int32_t local = __atomic_load_n(&vt_failures, __ATOMIC_SEQ_CST) != vt_case_start, any = 1;
    VT_OK(vs_all_reduce(vs_world_comm(w), &local, &any, 1, VS_I32, VS_OP_MAX, NULL));
    if (me == 0) {
        VT_CHECK(!any || local, "ckpt_scale/mpi failed on another rank");
        printf("# %d MPI ranks: host bytes on rank 0: a save's %zu, a load's %zu\n", vs_world_size(w), save_bytes[0],
               load_bytes[0]);
        vt_end("ckpt_scale/mpi");
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", root);
        if (system(cmd)) any = 1;
    }
    VT_OK(vs_world_free(w));
    return me == 0 ? vt_summary() : any;
}
#endif
