/* test_ckpt.c - vescale_ckpt.h's save and resharding load on thread ranks.

   Every tensor's value is a formula of its entry and global element index, so
   each rank checks what it loaded against the formula, independently of the
   saving mesh:
   - round trip on the same mesh, every dtype, every layout kind (Shard on each
     dim, nested shards, Replicate, uneven and empty shards), ZeRO ranges, blobs;
   - the resharding matrix: save on (8), (2,4), (4,2) and (2,2,2), load on each
     of them and on 1 rank; a copy with one bit of a shard flipped fails to
     load on each, every rank alike (not only those that read the piece);
   - A -> B -> A: what comes back equals the first save byte for byte;
   - commit: an existing path is refused, overwrite replaces it, latest/retain;
   - bad input: unknown names, shape and dtype mismatches, overlapping ranges,
     mismatched blobs; corrupt and truncated files (checksums): every rank
     fails alike. */
#define VESCALE_IMPLEMENTATION
#define _VS_CKPT_RA_MIN 1 // the load's read-ahead thread runs on these small files too
#define _VS_CKPT_RA_SPAN_MIN 1
#include "../vescale_ckpt.h"
#include "vs_test.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define NE 6
static const char* NAMES[NE] = {"a", "b", "c", "d", "z", "step"};

typedef struct spec {
    vs_dtype dt;
    int ndim;
    int64_t shape[3];
} spec;
static const spec SPECS[NE - 1] = {
    {VS_F32, 2, {10, 7, 0}}, {VS_BF16, 1, {13, 0, 0}}, {VS_I32, 3, {5, 3, 4}}, {VS_F64, 2, {9, 4, 0}}, {VS_F32, 2, {12, 5, 0}},
};

/* The value of element i of entry e, as bytes of its dtype. */
static void value(int e, int64_t i, vs_dtype dt, void* out)
{
    double v = (double)(e * 1000 + i) * 0.5 - 3.0;
    switch (dt) {
    case VS_F32: { float f = (float)v; memcpy(out, &f, 4); break; }
    case VS_F64: memcpy(out, &v, 8); break;
    case VS_I32: { int32_t k = (int32_t)(e * 1000 + i) * 7 - 11; memcpy(out, &k, 4); break; }
    default: { uint16_t h = vs_f32_to_bf16((float)v); memcpy(out, &h, 2); }
    }
}

/* Layouts by entry for a mesh of k dims (the rule is the same on every mesh). */
static void layout_text(int e, int k, char* buf, size_t cap)
{
    const char* p[3] = {"Replicate", "Replicate", "Replicate"};
    if (e == 0) p[0] = "Shard(0)", p[1] = "Shard(1)";
    if (e == 1) p[k - 1] = "Shard(0)";
    if (e == 3) p[0] = "Shard(1)", p[1] = k > 1 ? "Shard(0)" : "Replicate";
    if (e == 4 && k > 1) p[k - 1] = "Shard(0)";
    if (k == 1) snprintf(buf, cap, "[%s]", p[0]);
    if (k == 2) snprintf(buf, cap, "[%s, %s]", p[0], p[1]);
    if (k == 3) snprintf(buf, cap, "[%s, %s, %s]", p[0], p[1], p[2]);
}

typedef struct job {
    int shape[3];
    const char* path;
    int save;       // 1 save, 0 load and check
    int overwrite;
    int zero_dim;   // the mesh dim whose ranks split "z" into ranges
    vs_result want; // the expected result of the save or load
    const char* want_msg;
    int any;        // corrupt files: only the ranks that read the bad bytes see them; every rank returns the error
    const char* resave; // load: then save what was loaded here (from this mesh)
    const char* want_msg2; // the error names this too
} job;

static int hits; // ranks that got the expected result (any jobs: each must)

/* This rank's entries for the job's mesh; data filled from the formula when fill. */
static int make_entries(vs_mesh* m, const job* j, vs_ckpt_entry* en, void** bufs, int fill, uint64_t* blob)
{
    int k = vs_mesh_ndims(m);
    int coord[VS_MESH_MAX_DIMS];
    vs_mesh_coord(m, coord);
    memset(en, 0, sizeof(vs_ckpt_entry) * NE);
    for (int e = 0; e < NE - 1; e++) {
        char lt[96];
        layout_text(e, k, lt, sizeof lt);
        en[e].name = NAMES[e];
        en[e].t.dtype = SPECS[e].dt;
        en[e].t.ndim = SPECS[e].ndim;
        for (int d = 0; d < SPECS[e].ndim; d++) en[e].t.shape[d] = SPECS[e].shape[d];
        if (vs_layout_parse(m, lt, &en[e].t.layout)) return -1;
        int64_t box[3] = {1, 1, 1}, off[3] = {0, 0, 0};
        if (vs_layout_local(&en[e].t.layout, en[e].t.ndim, en[e].t.shape, vs_mesh_rank(m), box, off)) return -1;
        int64_t n = 1;
        for (int d = 0; d < SPECS[e].ndim; d++) n *= box[d];
        int64_t rb = 0, re = n;
        if (e == 4) { // ZeRO: the ranks along zero_dim split the box
            int S = m ? vs_mesh_size(m, vs_mesh_dim_name(m, j->zero_dim)) : 1, c = coord[j->zero_dim];
            rb = n * c / S;
            re = n * (c + 1) / S;
            en[e].kind = VS_CKPT_RANGE;
            en[e].range_begin = rb;
            en[e].range_end = re;
        }
        size_t es = vs_dtype_size(SPECS[e].dt);
        bufs[e] = calloc((size_t)(re - rb) + 1, es);
        en[e].t.data = bufs[e];
        if (!fill) continue;
        for (int64_t f = rb; f < re; f++) { // flat f of the box -> global index
            int64_t rem = f, g = 0, idx[3];
            for (int d = SPECS[e].ndim - 1; d >= 0; d--) idx[d] = off[d] + rem % box[d], rem /= box[d];
            for (int d = 0; d < SPECS[e].ndim; d++) g = g * SPECS[e].shape[d] + idx[d];
            value(e, g, SPECS[e].dt, (char*)bufs[e] + (size_t)(f - rb) * es);
        }
    }
    en[NE - 1].name = NAMES[NE - 1];
    en[NE - 1].kind = VS_CKPT_BLOB;
    en[NE - 1].blob = blob;
    en[NE - 1].blob_bytes = sizeof *blob;
    if (fill) *blob = 0x1122334455667788ull;
    return 0;
}

/* What this rank loaded equals the formula, element by element. */
static void check_entries(vs_mesh* m, const job* j, vs_ckpt_entry* en, const uint64_t* blob)
{
    vs_ckpt_entry want[NE];
    void* wb[NE];
    uint64_t wblob;
    VT_CHECK(make_entries(m, j, want, wb, 1, &wblob) == 0, "entries");
    for (int e = 0; e < NE - 1; e++) {
        size_t bytes = (size_t)(want[e].kind == VS_CKPT_RANGE ? want[e].range_end - want[e].range_begin : 0);
        if (want[e].kind != VS_CKPT_RANGE) {
            int64_t n;
            vs_dtensor_local_numel(&want[e].t, &n);
            bytes = (size_t)n;
        }
        bytes *= vs_dtype_size(SPECS[e].dt);
        VT_CHECK(!memcmp(en[e].t.data, wb[e], bytes), "entry %s on rank %d of (%d,%d,%d) from %s", NAMES[e],
                 vs_mesh_rank(m), j->shape[0], j->shape[1], j->shape[2], j->path);
        free(wb[e]);
    }
    VT_CHECK(*blob == 0x1122334455667788ull, "blob");
}

static int rank_fn(vs_world* w, void* arg)
{
    const job* j = (const job*)arg;
    vs_mesh* m;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    for (int d = 0; d < 3; d++) md.shape[d] = j->shape[d];
    VT_OK(vs_mesh_init(w, &md, &m));
    vs_ckpt* ck;
    VT_OK(vs_ckpt_init(&(vs_ckpt_desc){.mesh = m}, &ck));
    vs_ckpt_entry en[NE];
    void* bufs[NE];
    uint64_t blob = 0;
    VT_CHECK(make_entries(m, j, en, bufs, j->save, &blob) == 0, "entries: %s", vs_last_error());
    vs_result r;
    int loaded[NE] = {0};
    if (j->save) {
        vs_ckpt_save_opts o = {0, j->overwrite};
        r = vs_ckpt_save(ck, j->path, en, NE, &o);
    } else {
        r = vs_ckpt_load(ck, j->path, en, NE, loaded);
        if (!r) {
            for (int e = 0; e < NE; e++) VT_CHECK(loaded[e] == 1, "loaded[%d]", e);
            check_entries(m, j, en, &blob);
            if (j->resave) VT_OK(vs_ckpt_save(ck, j->resave, en, NE, NULL)); // B saves what it loaded
        }
    }
    if (r == j->want) __atomic_add_fetch(&hits, 1, __ATOMIC_SEQ_CST);
    VT_CHECK(r == j->want, "%s %s on rank %d of (%d,%d,%d): %s (want %s): %s", j->save ? "save" : "load", j->path,
             vs_world_rank(w), j->shape[0], j->shape[1], j->shape[2], vs_result_string(r), vs_result_string(j->want),
             vs_last_error());
    if (j->want_msg && r) VT_CHECK(strstr(vs_last_error(), j->want_msg) != NULL, "message \"%s\" lacks \"%s\"",
                                   vs_last_error(), j->want_msg);
    if (j->want_msg2 && r) VT_CHECK(strstr(vs_last_error(), j->want_msg2) != NULL, "message \"%s\" lacks \"%s\"",
                                    vs_last_error(), j->want_msg2);
    for (int e = 0; e < NE - 1; e++) free(bufs[e]);
    VT_OK(vs_ckpt_free(ck));
    VT_OK(vs_mesh_free(m));
    return 0;
}

static int nranks(const job* j)
{
    int n = 1;
    for (int d = 0; d < 3; d++) n *= j->shape[d] ? j->shape[d] : 1;
    return n;
}

static void run(job j) { VT_CHECK(vs_launch(nranks(&j), rank_fn, &j) == VS_OK, "launch: %s", vs_last_error()); }

static char root[256];

/* Flips one bit of the last tensor bytes of a file (3 bytes before its end). */
static void flip_tail(const char* file)
{
    FILE* f = fopen(file, "r+b");
    VT_CHECK(f != NULL, "open %s", file);
    if (!f) return;
    fseek(f, -3, SEEK_END);
    int c = fgetc(f);
    fseek(f, -3, SEEK_END);
    fputc(c ^ 0x10, f);
    fclose(f);
}

/* Each saved checkpoint loads on every mesh; and a copy of it with one bit of
   shard-00001's data flipped fails on every mesh, on every rank alike
   (VS_ERR_IO naming the file), though only the ranks whose boxes need that
   piece read it. */
static void case_matrix(void)
{
    static const int shapes[5][3] = {{8, 0, 0}, {2, 4, 0}, {4, 2, 0}, {2, 2, 2}, {1, 0, 0}};
    for (int s = 0; s < 4; s++) {
        char path[512], bad[560], cmd[1200], file[600];
        snprintf(path, sizeof path, "%s/m%d", root, s);
        job j = {{shapes[s][0], shapes[s][1], shapes[s][2]}, path, 1, 0, 0, VS_OK, NULL, 0, NULL, NULL};
        run(j);
        for (int l = 0; l < 5; l++) {
            job k = {{shapes[l][0], shapes[l][1], shapes[l][2]}, path, 0, 0, l == 3 ? 1 : 0, VS_OK, NULL, 0, NULL, NULL};
            run(k);
        }
        snprintf(bad, sizeof bad, "%s/bad-m%d", root, s);
        snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", path, bad);
        VT_CHECK(system(cmd) == 0, "%s", cmd);
        snprintf(file, sizeof file, "%s/shard-00001.safetensors", bad);
        flip_tail(file);
        for (int l = 0; l < 5; l++) {
            job k = {{shapes[l][0], shapes[l][1], shapes[l][2]}, bad, 0, 0, l == 3 ? 1 : 0, VS_ERR_IO,
                     "shard-00001.safetensors", 1, NULL, "checksum mismatch"};
            hits = 0;
            run(k);
            VT_CHECK(hits == nranks(&k), "saved on (%d,%d,%d), loaded on (%d,%d,%d): %d of %d ranks failed the load of "
                     "a flipped bit", shapes[s][0], shapes[s][1], shapes[s][2], shapes[l][0], shapes[l][1],
                     shapes[l][2], hits, nranks(&k));
        }
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", bad);
        VT_CHECK(system(cmd) == 0, "%s", cmd);
    }
}

/* A -> B -> A: saved on (2,2,2), loaded on (4,2) and saved from there, loaded
   back on (2,2,2) and on 1 rank: every byte as the first save wrote it (the
   formula), though B's shards and ranges are cut differently. */
static void case_aba(void)
{
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/m3", root);
    snprintf(b, sizeof b, "%s/aba", root);
    job toB = {{4, 2, 0}, a, 0, 0, 0, VS_OK, NULL, 0, b, NULL};
    run(toB);
    job backA = {{2, 2, 2}, b, 0, 0, 0, VS_OK, NULL, 0, NULL, NULL};
    run(backA);
    job one = {{1, 0, 0}, b, 0, 0, 0, VS_OK, NULL, 0, NULL, NULL};
    run(one);
}

static void case_commit(void)
{
    char path[512], latest[600];
    snprintf(path, sizeof path, "%s/m0", root);
    job again = {{2, 4, 0}, path, 1, 0, 0, VS_ERR_STATE, "exists", 0, NULL, NULL};
    run(again); // an existing checkpoint is refused...
    job over = {{2, 4, 0}, path, 1, 1, 0, VS_OK, NULL, 0, NULL, NULL};
    run(over);  // ...or replaced on request, and still loads
    job back = {{4, 2, 0}, path, 0, 0, 0, VS_OK, NULL, 0, NULL, NULL};
    run(back);
    VT_OK(vs_ckpt_latest(root, latest, sizeof latest));
    VT_CHECK(strstr(latest, "/m3") != NULL, "latest %s", latest);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s/m9.tmp-0001", root); // an interrupted save is never the latest
    mkdir(tmp, 0755);
    VT_OK(vs_ckpt_latest(root, latest, sizeof latest));
    VT_CHECK(strstr(latest, "/m3") != NULL, "latest %s", latest);
    VT_OK(vs_ckpt_retain(root, 2));
    struct stat st;
    VT_CHECK(stat(tmp, &st) != 0, "leftover kept");
    snprintf(tmp, sizeof tmp, "%s/m0", root);
    VT_CHECK(stat(tmp, &st) != 0, "m0 kept by retain(2)");
    snprintf(tmp, sizeof tmp, "%s/m2", root);
    VT_CHECK(stat(tmp, &st) == 0, "m2 deleted by retain(2)");
}

static void case_corrupt(void)
{
    char path[512], file[600];
    snprintf(path, sizeof path, "%s/m3", root);
    snprintf(file, sizeof file, "%s/shard-00001.safetensors", path);
    flip_tail(file); // one flipped bit
    job k = {{2, 2, 2}, path, 0, 0, 1, VS_ERR_IO, "checksum mismatch", 1, NULL, NULL};
    hits = 0;
    run(k);
    VT_CHECK(hits == 8, "%d of 8 ranks failed with the flipped bit", hits);
    VT_CHECK(truncate(file, 100) == 0, "truncate");
    job t = {{2, 2, 2}, path, 0, 0, 1, VS_ERR_IO, "shard-00001.safetensors", 1, NULL, NULL};
    hits = 0;
    run(t);
    VT_CHECK(hits == 8, "%d of 8 ranks failed with the truncation", hits);
}

/* vs_ckpt_query_desc: the default resolved (async_max_bytes 0: 4 GiB), the
   checkpointer uses it (vs_ckpt_async_memory's bound), given values kept, and
   the resolved desc gives the same settings. */
static int same_ckpt_desc(const vs_ckpt_desc* a, const vs_ckpt_desc* b)
{
    return a->mesh == b->mesh && a->no_checksum == b->no_checksum && a->async_max_bytes == b->async_max_bytes &&
           a->keep_last == b->keep_last && a->no_readahead == b->no_readahead &&
           a->untouched_on_error == b->untouched_on_error;
}

static int query_rank(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh* m = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {2}}, &m));
    if (!m) return 1;
    vs_ckpt *ck = NULL, *again = NULL;
    vs_ckpt_desc q, q2;
    size_t used = 1, bound = 0;
    VT_OK(vs_ckpt_init(&(vs_ckpt_desc){.mesh = m}, &ck));
    if (!ck) return 1;
    VT_OK(vs_ckpt_query_desc(ck, &q));
    VT_CHECK(q.mesh == m && q.async_max_bytes == (size_t)4 << 30 && q.async_max_bytes == VS_CKPT_DEFAULT_ASYNC_MAX_BYTES,
             "async_max_bytes %zu, documented 4 GiB", q.async_max_bytes);
    VT_CHECK(q.keep_last == 0 && q.no_checksum == 0 && q.no_readahead == 0 && q.untouched_on_error == 0,
             "unset fields stay zero");
    VT_OK(vs_ckpt_async_memory(ck, &used, &bound));
    VT_CHECK(used == 0 && bound == q.async_max_bytes, "the bound used %zu, resolved %zu", bound, q.async_max_bytes);
    VT_ERR(vs_ckpt_query_desc(NULL, &q2), VS_ERR_NULL, "ck is NULL");
    VT_ERR(vs_ckpt_query_desc(ck, NULL), VS_ERR_NULL, "out is NULL");
    VT_OK(vs_ckpt_free(ck));
    VT_ERR(vs_ckpt_query_desc(ck, &q2), VS_ERR_STATE, "already freed");
    vs_ckpt* bad = NULL; // a refused desc names the field and its range (keep_last said only "keep_last = -3")
    VT_EXPECT_ERR(vs_ckpt_init(&(vs_ckpt_desc){.mesh = m, .keep_last = -3}, &bad), VS_ERR_INVALID,
                  "vs_ckpt_init: desc.keep_last = -3", "0: keep all");
    VT_CHECK(!bad, "a refused desc gave a checkpointer");
    vs_ckpt_desc in = {.mesh = m, .no_checksum = 1, .async_max_bytes = 1024, .keep_last = 3, .no_readahead = 1,
                       .untouched_on_error = 1};
    VT_OK(vs_ckpt_init(&in, &ck));
    if (!ck) return 1;
    VT_OK(vs_ckpt_query_desc(ck, &q));
    VT_CHECK(same_ckpt_desc(&q, &in), "given values: async_max_bytes %zu keep_last %d", q.async_max_bytes, q.keep_last);
    VT_OK(vs_ckpt_init(&q, &again)); // round trip
    if (again) {
        VT_OK(vs_ckpt_query_desc(again, &q2));
        VT_CHECK(same_ckpt_desc(&q, &q2), "round trip differs");
        VT_OK(vs_ckpt_async_memory(again, &used, &bound));
        VT_CHECK(bound == 1024, "round trip: bound %zu", bound);
        VT_OK(vs_ckpt_free(again));
    }
    VT_OK(vs_ckpt_free(ck));
    VT_OK(vs_mesh_free(m));
    return 0;
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/vs_ckpt_XXXXXX");
    if (!mkdtemp(root)) return 1;
    vt_begin("ckpt/matrix");
    case_matrix();
    vt_end("ckpt/matrix");
    vt_begin("ckpt/round_trip_A_B_A");
    case_aba();
    vt_end("ckpt/round_trip_A_B_A");
    vt_begin("ckpt/commit");
    case_commit();
    vt_end("ckpt/commit");
    vt_begin("ckpt/corrupt");
    case_corrupt();
    vt_end("ckpt/corrupt");
    VT_CASE("ckpt/query_desc", VT_CHECK(vs_launch(2, query_rank, NULL) == VS_OK, "launch: %s", vs_last_error()));
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd)) return 1;
    return vt_summary();
}
