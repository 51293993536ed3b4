/* test_data.c - vescale.h's data loader (>>data: vs_data_*) on token shards
   this test writes (llm.c's format), against references it computes itself:
   - order: the global batches of one rank equal windows of T + 1 tokens cut
     from the files as this test reads them (sorted by name, per-file windows,
     epochs dropping the last partial batch), with and without the read-ahead
     thread, and the position after them;
   - DP-local rows: DP rank d of DP 2, 4, 8 gets rows [d B/DP, (d+1) B/DP) of
     the one-rank batch, shuffled or not, any read-ahead depth;
   - shuffle: each epoch's order is a permutation of every window (the rows'
     tokens are the files' at the places vs_data_window names), another for
     another epoch or seed, the same for every DP size;
   - seek and position: a second loader sought to the first's position
     continues it; a seek while reading ahead restarts there;
   - vs_train_step on a DP-local batch (vs_batch.dp_local) equals the global
     batch on every rank bit for bit (losses and parameters), on DP2 and
     PP2 x DP2, and its stats count the global batch's tokens (B x T);
   - resume across meshes: trained on DP2 with the loader attached, saved,
     resumed on DP4 and on one rank (the loader opened before the load, and
     after it); the rows every later step sees equal an uninterrupted one-rank
     run's token for token across an epoch boundary, and so do the losses;
     a resume with another seed is refused naming it;
   - bad input, each an error naming the file or pattern: wrong magic, an
     unknown version, a truncated shard, trailing bytes, a glob matching
     nothing, a sequence longer than a shard, fewer rows than a batch, a token
     beyond the vocabulary (at read time, with and without the thread);
   - a read-ahead thread that delivers nothing: vs_data_next times out;
   - vs_data_free after the training state and its world ended: VS_OK, every
     block it took from the world's allocator given back, nothing of the
     freed world read. */
#define VESCALE_IMPLEMENTATION
#include "../vescale.h"
#include "../examples/gpt.h"
#include "vs_test.h"

#include <math.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char DIR_[256];

/* A shard: header (magic, version, count; hdr_n < 0: n) then n tokens. */
static void write_shard(const char* name, int32_t magic, int32_t version, int32_t hdr_n, const uint16_t* tok, long n)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", DIR_, name);
    FILE* f = fopen(p, "wb");
    VT_CHECK(f != NULL, "cannot write %s", p);
    if (!f) return;
    int32_t h[256];
    memset(h, 0, sizeof h);
    h[0] = magic, h[1] = version, h[2] = hdr_n < 0 ? (int32_t)n : hdr_n;
    fwrite(h, sizeof h, 1, f); // (little-endian hosts: the format's byte order)
    fwrite(tok, sizeof(uint16_t), (size_t)n, f);
    fclose(f);
}

static uint32_t lcg(uint32_t* s) { return (*s = *s * 1664525u + 1013904223u) >> 8; }

/* Files named out of glob's and creation order; lengths that leave ragged tails. */
static void write_set(const char* prefix, const long* lens, int n, int vocab, uint32_t seed)
{
    static const char* order[] = {"c", "a", "d", "b", "e"};
    for (int i = 0; i < n; i++) {
        uint16_t* t = (uint16_t*)malloc((size_t)lens[i] * sizeof(uint16_t));
        for (long k = 0; k < lens[i]; k++) t[k] = (uint16_t)(lcg(&seed) % (uint32_t)vocab);
        char name[64];
        snprintf(name, sizeof name, "%s_%s.bin", prefix, order[i]);
        write_shard(name, VS_DATA_MAGIC, 1, -1, t, lens[i]);
        free(t);
    }
}

/* The reference: the files of a set read here, in name order. */
typedef struct ref {
    int nf;
    char name[8][512];
    long ntok[8];
    uint16_t* tok[8];
    long win0[9]; // first window of each file, then N
    int T;
} ref;

static int cmpstr(const void* a, const void* b) { return strcmp((const char*)a, (const char*)b); }

static void ref_load(ref* R, const char* prefix, int n, int T)
{
    static const char* order[] = {"c", "a", "d", "b", "e"};
    memset(R, 0, sizeof *R);
    R->nf = n, R->T = T;
    for (int i = 0; i < n; i++) snprintf(R->name[i], sizeof R->name[i], "%s/%s_%s.bin", DIR_, prefix, order[i]);
    qsort(R->name, (size_t)n, sizeof R->name[0], cmpstr);
    for (int i = 0; i < n; i++) {
        FILE* f = fopen(R->name[i], "rb");
        int32_t h[256] = {0};
        VT_CHECK(f && fread(h, sizeof h, 1, f) == 1, "read %s", R->name[i]);
        R->ntok[i] = h[2];
        R->tok[i] = (uint16_t*)malloc((size_t)h[2] * sizeof(uint16_t));
        VT_CHECK(f && fread(R->tok[i], sizeof(uint16_t), (size_t)h[2], f) == (size_t)h[2], "read %s", R->name[i]);
        if (f) fclose(f);
        R->win0[i + 1] = R->win0[i] + (R->ntok[i] - 1) / T;
    }
}

static void ref_free(ref* R)
{
    for (int i = 0; i < R->nf; i++) free(R->tok[i]);
}

/* Row = window x in file order (inputs, targets). */
static void ref_row(const ref* R, long x, int32_t* in, int32_t* tg)
{
    int f = 0;
    while (x >= R->win0[f + 1]) f++;
    const uint16_t* t = R->tok[f] + (x - R->win0[f]) * R->T;
    for (int i = 0; i < R->T; i++) in[i] = t[i], tg[i] = t[i + 1];
}

/* Draws nb batches; out + 2 B T b: rows x T inputs then rows x T targets. */
static int draw(const char* pattern, int B, int T, int dp, int dprank, int shuffle, uint64_t seed, int prefetch, int nb,
                int32_t* out, vs_data_info* info)
{
    vs_data_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.files = pattern, dd.batch = B, dd.seq_len = T, dd.dp_size = dp, dd.dp_rank = dprank;
    dd.shuffle = shuffle, dd.seed = seed, dd.prefetch = prefetch;
    vs_data* d;
    vs_result r = vs_data_open(&dd, &d);
    VT_OK(r);
    if (r) return 1;
    int rows = B / dp;
    for (int b = 0; b < nb; b++) {
        vs_batch x;
        r = vs_data_next(d, &x);
        VT_OK(r);
        if (r) break;
        VT_CHECK(x.n == 2 && x.dp_local == dp && x.shape[0][0] == rows && x.shape[0][1] == T && x.dtype[0] == VS_I32 &&
                 !strcmp(x.name[0], "tokens") && !strcmp(x.name[1], "targets"), "batch %d's shape", b);
        memcpy(out + (size_t)b * 2 * B * T, x.data[0], (size_t)rows * T * 4); // (a batch's place: 2 B T)
        memcpy(out + (size_t)b * 2 * B * T + rows * T, x.data[1], (size_t)rows * T * 4);
    }
    if (info) VT_OK(vs_data_query(d, info));
    VT_OK(vs_data_free(d));
    return r != VS_OK;
}

enum { OB = 8, OT = 16, ONB = 60 }; // the order cases: 8 rows of 16, 60 batches (over two epochs)
static const long OLENS[] = {1000, 537, 2049};

static void order_case(int prefetch)
{
    ref R;
    ref_load(&R, "o", 3, OT);
    long N = R.win0[3];
    char pat[512];
    snprintf(pat, sizeof pat, "%s/o_*.bin", DIR_);
    static int32_t got[ONB][2 * OB * OT];
    vs_data_info info;
    if (draw(pat, OB, OT, 1, 0, 0, 0, prefetch, ONB, &got[0][0], &info)) return;
    long e = 0, w = 0;
    int bad = 0;
    for (int b = 0; b < ONB; b++) {
        if (w + OB > N) e++, w = 0;
        for (int r = 0; r < OB && !bad; r++) {
            int32_t in[OT], tg[OT];
            ref_row(&R, w + r, in, tg);
            if (memcmp(in, &got[b][r * OT], sizeof in) || memcmp(tg, &got[b][OB * OT + r * OT], sizeof tg)) {
                VT_CHECK(0, "batch %d row %d (epoch %ld, window %ld) differs from the files", b, r, e, w + r);
                bad = 1;
            }
        }
        w += OB;
    }
    if (w + OB > N) e++, w = 0;
    VT_CHECK(info.windows == N && info.nshards == 3 && info.tokens == 1000 + 537 + 2049 &&
             info.batches_per_epoch == N / OB && info.batches == ONB, "info: %lld windows, %d files, %lld tokens",
             (long long)info.windows, info.nshards, (long long)info.tokens);
    VT_CHECK(info.epoch == e && info.window == w && e == 2, "position (%lld, %lld), reference (%ld, %ld)",
             (long long)info.epoch, (long long)info.window, e, w);
    ref_free(&R);
}

/* DP rank d's rows = rows [d B/DP, ...) of the one-rank batch. */
static void dp_rows_case(int shuffle, int prefetch)
{
    char pat[512];
    snprintf(pat, sizeof pat, "%s/o_*.bin", DIR_);
    static int32_t one[ONB][2 * OB * OT], part[ONB][2 * OB * OT];
    if (draw(pat, OB, OT, 1, 0, shuffle, 5, -1, ONB, &one[0][0], NULL)) return;
    for (int dp = 2; dp <= 8; dp *= 2)
        for (int d = 0; d < dp; d++) {
            if (draw(pat, OB, OT, dp, d, shuffle, 5, prefetch, ONB, &part[0][0], NULL)) return;
            int rows = OB / dp;
            for (int b = 0; b < ONB; b++) {
                const int32_t* p = part[b];
                VT_CHECK(!memcmp(p, &one[b][d * rows * OT], (size_t)rows * OT * 4) &&
                         !memcmp(p + rows * OT, &one[b][OB * OT + d * rows * OT], (size_t)rows * OT * 4),
                         "DP %d rank %d batch %d differs from the one-rank batch's rows", dp, d, b);
            }
        }
}

/* Each epoch's order: every window once, tokens from the files at the places named. */
static void shuffle_case(void)
{
    ref R;
    ref_load(&R, "o", 3, OT);
    long N = R.win0[3];
    char pat[512];
    snprintf(pat, sizeof pat, "%s/o_*.bin", DIR_);
    vs_data_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.files = pat, dd.batch = OB, dd.seq_len = OT, dd.shuffle = 1, dd.seed = 5, dd.prefetch = -1;
    vs_data *d, *d2;
    VT_OK(vs_data_open(&dd, &d));
    dd.seed = 6;
    VT_OK(vs_data_open(&dd, &d2));
    long* x0 = (long*)malloc((size_t)N * sizeof(long));
    int* seen = (int*)calloc((size_t)N, sizeof(int));
    int diff_epoch = 0, diff_seed = 0, moved = 0;
    for (int e = 0; e < 3; e++) {
        memset(seen, 0, (size_t)N * sizeof(int));
        for (long k = 0; k < N; k++) {
            int f = -1, f2 = -1;
            int64_t first = -1, first2 = -1;
            VT_OK(vs_data_window(d, e, k, &f, &first));
            VT_OK(vs_data_window(d2, e, k, &f2, &first2));
            VT_CHECK(f >= 0 && f < 3 && !strcmp(vs_data_file(d, f), R.name[f]) && first % OT == 0 &&
                     first + OT + 1 <= R.ntok[f], "epoch %d entry %ld: file %d, token %lld", e, k, f, (long long)first);
            if (f < 0 || f >= 3) continue;
            long x = R.win0[f] + (long)(first / OT);
            seen[x]++;
            if (e == 0) x0[k] = x, moved += x != k;
            else diff_epoch += x != x0[k];
            if (f2 != f || first2 != first) diff_seed++;
        }
        long once = 0;
        for (long x = 0; x < N; x++) once += seen[x] == 1;
        VT_CHECK(once == N, "epoch %d: %ld of %ld windows taken once", e, once, N);
    }
    VT_CHECK(moved > N / 2 && diff_epoch > N && diff_seed > N, "orders: %d of %ld moved, %d differ between epochs, %d "
             "between seeds", moved, N, diff_epoch, diff_seed);
    // the batches' rows are the windows the order names
    static int32_t got[ONB][2 * OB * OT];
    if (!draw(pat, OB, OT, 1, 0, 1, 5, 2, ONB, &got[0][0], NULL)) {
        long e = 0, w = 0;
        for (int b = 0; b < ONB; b++) {
            if (w + OB > N) e++, w = 0;
            for (int r = 0; r < OB; r++) {
                int f;
                int64_t first;
                VT_OK(vs_data_window(d, e, w + r, &f, &first));
                int32_t in[OT], tg[OT];
                ref_row(&R, R.win0[f] + (long)(first / OT), in, tg);
                VT_CHECK(!memcmp(in, &got[b][r * OT], sizeof in) && !memcmp(tg, &got[b][OB * OT + r * OT], sizeof tg),
                         "shuffled batch %d row %d differs from its window's tokens", b, r);
            }
            w += OB;
        }
    }
    free(x0), free(seen);
    VT_OK(vs_data_free(d));
    VT_OK(vs_data_free(d2));
    ref_free(&R);
}

/* A second loader sought to the first's position continues it; a seek mid read-ahead restarts. */
static void seek_case(void)
{
    char pat[512];
    snprintf(pat, sizeof pat, "%s/o_*.bin", DIR_);
    static int32_t all[ONB][2 * OB * OT];
    if (draw(pat, OB, OT, 2, 1, 1, 9, 3, ONB, &all[0][0], NULL)) return;
    vs_data_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.files = pat, dd.batch = OB, dd.seq_len = OT, dd.dp_size = 2, dd.dp_rank = 1, dd.shuffle = 1, dd.seed = 9;
    dd.prefetch = 3;
    vs_data *a, *b;
    VT_OK(vs_data_open(&dd, &a));
    dd.prefetch = 1;
    VT_OK(vs_data_open(&dd, &b));
    vs_batch x;
    for (int i = 0; i < 33; i++) VT_OK(vs_data_next(a, &x));
    vs_data_info ia;
    VT_OK(vs_data_query(a, &ia));
    VT_OK(vs_data_seek(b, ia.epoch, ia.window));
    size_t half = (size_t)(OB / 2) * OT * 4;
    for (int i = 33; i < ONB; i++) {
        VT_OK(vs_data_next(b, &x));
        VT_CHECK(!memcmp(x.data[0], all[i], half) && !memcmp(x.data[1], &all[i][OB / 2 * OT], half),
                 "batch %d after the seek differs", i);
    }
    VT_OK(vs_data_seek(a, 0, 0)); // (the thread had read ahead of batch 33)
    for (int i = 0; i < 5; i++) {
        VT_OK(vs_data_next(a, &x));
        VT_CHECK(!memcmp(x.data[0], all[i], half), "batch %d after seeking back to 0 differs", i);
    }
    VT_CHECK(vs_data_seek(a, 0, ia.windows) == VS_ERR_INVALID && vs_data_seek(a, -1, 0) == VS_ERR_INVALID,
             "a seek past the windows is refused");
    VT_OK(vs_data_free(a));
    VT_OK(vs_data_free(b));
}

/* ---- training: the example GPT (vocab 32, seq 8) on shards of tokens below 32 ---- */
enum { TB = 8, TT = 8, MAXS = 16 };
static gpt_config CFG = {32, TT, 32, 4, 2, 77};
static gpt_model_storage STORE;
static vs_model_desc MODEL;

typedef struct trun {
    vs_plan plan;
    int steps;
    const char* save;    // after the steps
    const char* load;    // before them
    int open_after_load; // the loader opens after vs_train_load (the position waits in the training state)
    int global;          // every rank passes the whole batch (its own one-rank loader), not its DP rows
    int free_data_last;  // vs_train_free before vs_data_free
    uint64_t seed;
    const char* files;
    double loss[MAXS];
    int32_t seen[MAXS][2 * TB * TT]; // the global batch of each step, assembled from the DP ranks' rows
    float wte[32 * 32];
    vs_result load_r;
    char load_msg[512];
    int tokens_bad;      // steps whose stats.tokens was not the global batch's B x T (any rank)
} trun;

static int train_rank(vs_world* w, void* arg)
{
    trun* R = (trun*)arg;
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &MODEL;
    d.plan = &R->plan;
    d.optim.kind = VS_OPTIM_ADAMW;
    d.lr.lr = 3e-3;
    vs_train* t;
    VT_OK(vs_parallelize(w, &d, &t));
    vs_data_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.files = R->files, dd.batch = TB, dd.seq_len = TT, dd.shuffle = 1, dd.seed = R->seed, dd.vocab = CFG.vocab;
    if (!R->global) dd.train = t;
    vs_data* data = NULL;
    if (!R->load || !R->open_after_load) VT_OK(vs_data_open(&dd, &data));
    if (R->load) {
        vs_result r = vs_train_load(t, R->load, NULL, 0);
        if (vs_world_rank(w) == 0) R->load_r = r, snprintf(R->load_msg, sizeof R->load_msg, "%s", vs_last_error());
        if (r) {
            vs_data_free(data);
            vs_train_free(t);
            return 0;
        }
    }
    if (!data) VT_OK(vs_data_open(&dd, &data));
    vs_data_info info;
    VT_OK(vs_data_query(data, &info));
    int s0 = (int)(vs_train_steps(t) + vs_train_skipped_steps(t));
    int tp0 = vs_mesh_coord_along(vs_train_mesh(t), "PP") <= 0; // (one PP coordinate records)
    for (int s = s0; s < s0 + R->steps && s < MAXS; s++) {
        vs_batch b;
        VT_OK(vs_data_next(data, &b));
        int64_t rows = b.shape[0][0], off = R->global ? 0 : info.dp_rank * rows;
        if (tp0 && (!R->global || vs_world_rank(w) == 0)) {
            memcpy(&R->seen[s][off * TT], b.data[0], (size_t)(rows * TT) * 4);
            memcpy(&R->seen[s][TB * TT + off * TT], b.data[1], (size_t)(rows * TT) * 4);
        }
        double loss = 0;
        if (s == s0 && !R->global && info.dp_size > 1) { // rows of another DP size: refused, nothing changed
            vs_batch x = b;
            x.dp_local = info.dp_size + 1;
            VT_CHECK(vs_train_step(t, &x, &loss) == VS_ERR_MISMATCH && strstr(vs_last_error(), "dp_local"), "%s",
                     vs_last_error());
        }
        vs_train_stats st;
        VT_OK(vs_train_step_ex(t, &b, &st));
        loss = st.loss;
        if (st.tokens != (int64_t)TB * TT) __atomic_add_fetch(&R->tokens_bad, 1, __ATOMIC_SEQ_CST); // (the global batch's)
        if (vs_world_rank(w) == 0) R->loss[s] = loss;
    }
    if (R->save) VT_OK(vs_train_save(t, R->save, NULL, 0, 0));
    float wte[32 * 32];
    VT_OK(vs_train_get_param(t, "wte", wte, sizeof wte));
    if (vs_world_rank(w) == 0) memcpy(R->wte, wte, sizeof wte);
    if (R->free_data_last) {
        VT_OK(vs_train_free(t));
        VT_OK(vs_data_free(data));
    } else {
        VT_OK(vs_data_free(data));
        VT_OK(vs_train_free(t));
    }
    return 0;
}

static void mesh(trun* R, int pp, int dp, int mb)
{
    memset(&R->plan, 0, sizeof R->plan);
    R->plan.pp = pp, R->plan.dp = dp, R->plan.tp = 1, R->plan.microbatches = mb;
    R->plan.schedule = VS_PIPE_1F1B;
}

/* The DP ranks' rows given as dp_local batches train exactly as the global batch on every rank. */
static void dp_local_case(int pp, int dp, int mb)
{
    static trun a, b;
    char pat[512];
    snprintf(pat, sizeof pat, "%s/t_*.bin", DIR_);
    memset(&a, 0, sizeof a), memset(&b, 0, sizeof b);
    mesh(&a, pp, dp, mb), mesh(&b, pp, dp, mb);
    a.steps = b.steps = 6, a.files = b.files = pat, a.seed = b.seed = 3;
    b.global = 1, b.free_data_last = 1;
    VT_OK(vs_launch(pp * dp, train_rank, &a));
    VT_OK(vs_launch(pp * dp, train_rank, &b));
    for (int s = 0; s < 6; s++) {
        VT_CHECK(a.loss[s] == b.loss[s] && a.loss[s] > 0, "PP%d x DP%d step %d: loss %.9g (DP-local) vs %.9g (global)", pp,
                 dp, s, a.loss[s], b.loss[s]);
        VT_CHECK(!memcmp(a.seen[s], b.seen[s], sizeof a.seen[s]), "step %d: the DP ranks' rows are not the global batch", s);
    }
    VT_CHECK(!memcmp(a.wte, b.wte, sizeof a.wte), "PP%d x DP%d: wte after 6 steps differs", pp, dp);
    VT_CHECK(a.tokens_bad == 0 && b.tokens_bad == 0, "PP%d x DP%d: %d steps (DP-local), %d (global) reported "
             "stats.tokens other than B x T = %d", pp, dp, a.tokens_bad, b.tokens_bad, TB * TT);
}

/* Saved on DP2 after 5 steps, resumed on DP4 and one rank: the same rows and losses as one uninterrupted rank. */
static void resume_case(void)
{
    static trun u, a, r4, r1, bad;
    char pat[512], ck[512];
    snprintf(pat, sizeof pat, "%s/t_*.bin", DIR_);
    snprintf(ck, sizeof ck, "%s/ckpt/step-5", DIR_);
    memset(&u, 0, sizeof u), memset(&a, 0, sizeof a), memset(&r4, 0, sizeof r4), memset(&r1, 0, sizeof r1);
    u.files = a.files = r4.files = r1.files = pat;
    u.seed = a.seed = r4.seed = r1.seed = 11;
    mesh(&u, 1, 1, 1), u.steps = 12;
    mesh(&a, 1, 2, 1), a.steps = 5, a.save = ck;
    mesh(&r4, 1, 4, 1), r4.steps = 7, r4.load = ck;
    mesh(&r1, 1, 1, 2), r1.steps = 7, r1.load = ck, r1.open_after_load = 1, r1.free_data_last = 1;
    VT_OK(vs_launch(1, train_rank, &u));
    VT_OK(vs_launch(2, train_rank, &a));
    VT_OK(vs_launch(4, train_rank, &r4));
    VT_OK(vs_launch(1, train_rank, &r1));
    VT_CHECK(r4.load_r == VS_OK && r1.load_r == VS_OK, "loads: %s / %s", r4.load_msg, r1.load_msg);
    for (int s = 0; s < 12; s++) {
        const trun* x = s < 5 ? &a : &r4;
        VT_CHECK(!memcmp(x->seen[s], u.seen[s], sizeof u.seen[s]), "step %d: DP%d's rows differ from the one-rank run's",
                 s, s < 5 ? 2 : 4);
        VT_CHECK(fabs(x->loss[s] - u.loss[s]) <= 1e-5 * fabs(u.loss[s]), "step %d: loss %.9g vs %.9g", s, x->loss[s],
                 u.loss[s]);
        if (s >= 5) {
            VT_CHECK(!memcmp(r1.seen[s], u.seen[s], sizeof u.seen[s]), "step %d: resumed on one rank, rows differ", s);
            VT_CHECK(fabs(r1.loss[s] - u.loss[s]) <= 1e-5 * fabs(u.loss[s]), "step %d: one rank resumed: loss %.9g vs "
                     "%.9g", s, r1.loss[s], u.loss[s]);
        }
    }
    // the 12 steps crossed an epoch (8 batches of 8 in the 68 windows), and the batches were not all alike
    VT_CHECK(memcmp(u.seen[0], u.seen[7], sizeof u.seen[0]) && memcmp(u.seen[5], u.seen[6], sizeof u.seen[0]),
             "the stream repeats");
    memset(&bad, 0, sizeof bad); // another seed: the stream would not continue
    bad.files = pat, bad.seed = 12;
    mesh(&bad, 1, 2, 1), bad.steps = 1, bad.load = ck;
    VT_OK(vs_launch(2, train_rank, &bad));
    VT_CHECK(bad.load_r == VS_ERR_MISMATCH && strstr(bad.load_msg, "seed 11") && strstr(bad.load_msg, "seed 12"),
             "a resume with another seed: %d %s", (int)bad.load_r, bad.load_msg);
}

/* ---- bad input ---- */
/* The loader outlives its training state and its world (issue 33): DP2 ranks
   open attached loaders, take a step, free their training states and end; after
   vs_launch returned (the worlds freed, their memory overwritten by this
   allocator), vs_data_free of each loader is VS_OK and gives back everything
   it allocated through the world's allocator (nothing of the world is read). */
static long PZ_LIVE; // blocks allocated through pz_alloc and not freed
static void* pz_alloc(size_t n, void* user)
{
    (void)user;
    size_t* p = (size_t*)malloc(n + 16);
    if (!p) return NULL;
    p[0] = n;
    __atomic_add_fetch(&PZ_LIVE, 1, __ATOMIC_SEQ_CST);
    return (char*)p + 16;
}
static void pz_free(void* q, void* user)
{
    (void)user;
    if (!q) return;
    size_t* p = (size_t*)((char*)q - 16);
    memset(p, 0x5a, p[0] + 16); // a later read of a freed world sees garbage, not its old values
    free(p);
    __atomic_sub_fetch(&PZ_LIVE, 1, __ATOMIC_SEQ_CST);
}
static int outlive_rank(vs_world* w, void* arg)
{
    vs_data** out = (vs_data**)arg;
    vs_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.pp = 1, plan.dp = 2, plan.tp = 1, plan.microbatches = 1;
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &MODEL;
    d.plan = &plan;
    vs_train* t;
    VT_OK(vs_parallelize(w, &d, &t));
    char pat[512];
    snprintf(pat, sizeof pat, "%s/t_*.bin", DIR_);
    vs_data_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.files = pat, dd.batch = TB, dd.seq_len = TT, dd.vocab = CFG.vocab, dd.train = t;
    vs_data* data = NULL;
    VT_OK(vs_data_open(&dd, &data));
    vs_batch b;
    double loss;
    VT_OK(vs_data_next(data, &b));
    VT_OK(vs_train_step(t, &b, &loss));
    VT_OK(vs_train_free(t)); // (the loader is detached and lives on)
    out[vs_world_rank(w)] = data;
    return 0;
}
static void outlive_case(void)
{
    vs_data* data[2] = {NULL, NULL};
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = 2;
    ld.allocator.alloc = pz_alloc, ld.allocator.free = pz_free;
    VT_OK(vs_launch_ex(&ld, outlive_rank, data));
    long before = __atomic_load_n(&PZ_LIVE, __ATOMIC_SEQ_CST);
    VT_CHECK(data[0] && data[1] && before > 0, "loaders %p %p, %ld blocks live after the job", (void*)data[0],
             (void*)data[1], before);
    for (int r = 0; r < 2; r++)
        if (data[r]) VT_OK(vs_data_free(data[r]));
    long after = __atomic_load_n(&PZ_LIVE, __ATOMIC_SEQ_CST);
    VT_CHECK(after == 0, "%ld blocks of the world's allocator still live after vs_data_free (%ld before)", after, before);
}

static vs_result open_one(const char* pattern, int T, int B, vs_data** out)
{
    vs_data_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.files = pattern, dd.batch = B, dd.seq_len = T, dd.prefetch = -1;
    *out = NULL;
    return vs_data_open(&dd, out);
}

static void expect_open(const char* file, int T, int B, vs_result want, const char* what)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", DIR_, file);
    vs_data* d;
    vs_result r = open_one(p, T, B, &d);
    const char* base = strrchr(p, '/') + 1;
    VT_CHECK(r == want && strstr(vs_last_error(), base) && strstr(vs_last_error(), what) && !d,
             "%s: %d %s (want %d, \"%s\")", file, (int)r, vs_last_error(), (int)want, what);
    if (!r) vs_data_free(d);
}

static void bad_input_case(void)
{
    uint16_t t[100];
    for (int i = 0; i < 100; i++) t[i] = (uint16_t)(i % 30);
    write_shard("bad_magic.bin", 20240521, 1, -1, t, 100);
    write_shard("bad_version.bin", VS_DATA_MAGIC, 2, -1, t, 100);
    write_shard("bad_trunc.bin", VS_DATA_MAGIC, 1, 200, t, 100);
    write_shard("bad_long.bin", VS_DATA_MAGIC, 1, 90, t, 100);
    write_shard("bad_short.bin", VS_DATA_MAGIC, 1, -1, t, 10);
    t[57] = 40;
    write_shard("bad_vocab.bin", VS_DATA_MAGIC, 1, -1, t, 100);
    char p[512];
    snprintf(p, sizeof p, "%s/bad_hdr.bin", DIR_);
    FILE* f = fopen(p, "wb");
    if (f) fwrite(t, 1, 100, f), fclose(f);
    expect_open("bad_magic.bin", 8, 2, VS_ERR_INVALID, "magic number 20240521, not 20240520");
    expect_open("bad_version.bin", 8, 2, VS_ERR_UNSUPPORTED, "version 2; this reader knows version 1");
    expect_open("bad_trunc.bin", 8, 2, VS_ERR_INVALID, "truncated: its header says 200 tokens");
    expect_open("bad_long.bin", 8, 2, VS_ERR_INVALID, "more than the 1204 its header's 90 tokens take");
    expect_open("bad_short.bin", 16, 1, VS_ERR_INVALID, "sequence length is longer than this shard");
    expect_open("bad_hdr.bin", 8, 2, VS_ERR_INVALID, "less than a token shard's 1024-byte header");
    expect_open("nothing_*.bin", 8, 2, VS_ERR_IO, "no file matches");
    /* what a glob may also match: a folder (said to be one, not "4096 bytes"),
       and a FIFO, whose open blocked forever: a child, so a hang fails the case */
    snprintf(p, sizeof p, "%s/bad_dir.bin", DIR_);
    mkdir(p, 0700);
    expect_open("bad_dir.bin", 8, 2, VS_ERR_INVALID, "not a regular file");
    snprintf(p, sizeof p, "%s/bad_fifo.bin", DIR_);
    VT_CHECK(mkfifo(p, 0600) == 0, "mkfifo %s", p);
    fflush(stdout);
    pid_t kid = fork();
    if (kid == 0) {
        alarm(10);
        int before = vt_failures;
        expect_open("bad_fifo.bin", 8, 2, VS_ERR_INVALID, "not a regular file");
        _exit(vt_failures == before ? 0 : 1);
    }
    int st = -1;
    waitpid(kid, &st, 0);
    VT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "vs_data_open on a FIFO: child status %d (%s)", st,
             WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM ? "it hung" : "refused wrongly");
    unlink(p);
    snprintf(p, sizeof p, "%s/bad_dir.bin", DIR_);
    rmdir(p);
    expect_open("bad_vocab.bin", 8, 13, VS_ERR_INVALID, "fewer than a batch of 13"); // 99 / 8 = 12 rows
    vs_data* d;
    snprintf(p, sizeof p, "%s/bad_vocab.bin", DIR_);
    vs_data_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.files = p, dd.batch = 2, dd.seq_len = 8, dd.dp_size = 3;
    VT_CHECK(vs_data_open(&dd, &d) == VS_ERR_INVALID && strstr(vs_last_error(), "DP=3 does not divide"), "%s",
             vs_last_error());
    dd.dp_size = 0, dd.seq_len = 0;
    VT_CHECK(vs_data_open(&dd, &d) == VS_ERR_INVALID && strstr(vs_last_error(), "seq_len = 0"), "%s", vs_last_error());
    dd.seq_len = 8, dd.files = NULL;
    VT_CHECK(vs_data_open(&dd, &d) == VS_ERR_INVALID && strstr(vs_last_error(), "desc.files"), "%s", vs_last_error());
    dd.files = p;
    for (int prefetch = -1; prefetch <= 2; prefetch += 3) { // token 40 in batch 3 (window 7: tokens 56..64)
        dd.vocab = 32, dd.prefetch = prefetch;
        VT_OK(vs_data_open(&dd, &d));
        vs_batch b;
        for (int i = 0; i < 3; i++) VT_OK(vs_data_next(d, &b));
        for (int again = 0; again < 2; again++) {
            vs_result r = vs_data_next(d, &b);
            VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "bad_vocab.bin: token 40 at token 57") &&
                     strstr(vs_last_error(), "vocabulary's 32"), "prefetch %d: %d %s", prefetch, (int)r, vs_last_error());
        }
        VT_OK(vs_data_seek(d, 0, 0)); // (a seek clears it)
        VT_OK(vs_data_next(d, &b));
        VT_OK(vs_data_free(d));
    }
    VT_CHECK(vs_data_free(NULL) == VS_OK && vs_data_next(NULL, NULL) == VS_ERR_NULL, "NULL handling");
}

/* vs_data_query_desc: every documented default, the given values kept, the
   checks; and vs_data_open keeps the resolved values (read from the loader's
   struct: timeout, read-ahead slots, names, DP). */
static int query_train_rank(vs_world* w, void* arg)
{
    const char* pat = (const char*)arg;
    vs_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.dp = 2, plan.microbatches = 1;
    vs_train_desc td;
    memset(&td, 0, sizeof td);
    td.model = &MODEL, td.plan = &plan;
    vs_train* t = NULL;
    VT_OK(vs_parallelize(w, &td, &t));
    if (!t) return 1;
    vs_data_desc dd, q;
    memset(&dd, 0, sizeof dd);
    dd.files = pat, dd.batch = 4, dd.seq_len = 8, dd.train = t;
    dd.dp_size = 5, dd.dp_rank = 9; // (ignored with train)
    VT_OK(vs_data_query_desc(&dd, &q));
    VT_CHECK(q.dp_size == 2 && q.dp_rank == vs_mesh_coord_along(vs_train_mesh(t), "DP") && q.train == t,
             "with train: dp_size %d dp_rank %d, want the mesh's 2 and %d", q.dp_size, q.dp_rank,
             vs_mesh_coord_along(vs_train_mesh(t), "DP"));
    vs_data* d = NULL;
    VT_OK(vs_data_open(&dd, &d));
    VT_CHECK(d && d->dp == q.dp_size && d->dprank == q.dp_rank && d->rows == 2, "the loader's DP %d/%d rows %lld",
             d ? d->dprank : -1, d ? d->dp : -1, d ? (long long)d->rows : -1);
    VT_EXPECT_ERR(vs_data_query_desc(&dd, &q), VS_ERR_STATE, "vs_data_query_desc", "attached already");
    VT_OK(vs_data_free(d));
    VT_OK(vs_train_free(t));
    return 0;
}

static void query_desc_case(void)
{
    char pat[512];
    snprintf(pat, sizeof pat, "%s/t_*.bin", DIR_);
    vs_data_desc dd, q, q2;
    memset(&dd, 0, sizeof dd);
    dd.files = pat, dd.batch = 8, dd.seq_len = 8;
    VT_OK(vs_data_query_desc(&dd, &q));
    VT_CHECK(q.prefetch == 2, "prefetch %d, documented 0: 2", q.prefetch);
    VT_CHECK(q.timeout == 60, "timeout %g, documented 0: 60 s", q.timeout);
    VT_CHECK(q.input_name && !strcmp(q.input_name, "tokens") && q.target_name && !strcmp(q.target_name, "targets"),
             "names \"%s\" \"%s\", documented \"tokens\" \"targets\"", q.input_name ? q.input_name : "(null)",
             q.target_name ? q.target_name : "(null)");
    VT_CHECK(q.dp_size == 1 && q.dp_rank == 0, "dp %d/%d, documented 0: 1 rank", q.dp_rank, q.dp_size);
    VT_CHECK(q.files == pat && q.batch == 8 && q.seq_len == 8 && !q.train && !q.shuffle && !q.seed && !q.vocab &&
                 !q.not_saved,
             "the rest stays as given");
    VT_OK(vs_data_query_desc(&q, &q2));
    VT_CHECK(!memcmp(&q, &q2, sizeof q), "resolving a resolved desc changed it");
    vs_data* d = NULL;
    VT_OK(vs_data_open(&dd, &d));
    if (d) {
        VT_CHECK(d->timeout == q.timeout && d->nslots == q.prefetch + 1 && d->has_thread && d->dp == 1 &&
                     d->rows == 8 && !strcmp(d->names[0], q.input_name) && !strcmp(d->names[1], q.target_name),
                 "the loader: timeout %g, %d slots, thread %d, dp %d, rows %lld, names %s %s", d->timeout, d->nslots,
                 d->has_thread, d->dp, (long long)d->rows, d->names[0], d->names[1]);
        VT_OK(vs_data_free(d));
    }
    /* given values stay */
    dd.prefetch = -1, dd.timeout = 0.5, dd.input_name = "in", dd.target_name = "out", dd.dp_size = 4, dd.dp_rank = 3;
    VT_OK(vs_data_query_desc(&dd, &q));
    VT_CHECK(q.prefetch == -1 && q.timeout == 0.5 && !strcmp(q.input_name, "in") && !strcmp(q.target_name, "out") &&
                 q.dp_size == 4 && q.dp_rank == 3,
             "given: prefetch %d timeout %g dp %d/%d", q.prefetch, q.timeout, q.dp_rank, q.dp_size);
    VT_OK(vs_data_open(&dd, &d));
    if (d) {
        VT_CHECK(d->timeout == 0.5 && d->nslots == 1 && !d->has_thread && d->dp == 4 && d->dprank == 3 && d->rows == 2,
                 "the loader: timeout %g, %d slots, thread %d, dp %d/%d", d->timeout, d->nslots, d->has_thread,
                 d->dprank, d->dp);
        vs_batch b;
        VT_OK(vs_data_next(d, &b));
        VT_CHECK(!strcmp(b.name[0], "in") && !strcmp(b.name[1], "out"), "batch names %s %s", b.name[0], b.name[1]);
        VT_OK(vs_data_free(d));
    }
    /* the checks, named after the caller */
    dd.dp_size = 0, dd.dp_rank = 0, dd.timeout = -1;
    VT_EXPECT_ERR(vs_data_query_desc(&dd, &q), VS_ERR_INVALID, "vs_data_query_desc", "desc.timeout");
    dd.timeout = 0, dd.prefetch = 65;
    VT_EXPECT_ERR(vs_data_query_desc(&dd, &q), VS_ERR_INVALID, "vs_data_query_desc", "desc.prefetch = 65");
    dd.prefetch = 0, dd.dp_size = 3;
    VT_EXPECT_ERR(vs_data_query_desc(&dd, &q), VS_ERR_INVALID, "vs_data_query_desc", "DP=3 does not divide");
    VT_EXPECT_ERR(vs_data_query_desc(NULL, &q), VS_ERR_NULL, "vs_data_query_desc", "desc");
    VT_EXPECT_ERR(vs_data_query_desc(&dd, NULL), VS_ERR_NULL, "vs_data_query_desc", "out");
    /* a new user's misuse: one name for inputs and targets (a batch vs_train_step
       then refuses, far from the cause), a negative dp_size (said as a bad dp_rank) */
    dd.dp_size = 0, dd.input_name = "x", dd.target_name = "x";
    VT_EXPECT_ERR(vs_data_query_desc(&dd, &q), VS_ERR_INVALID, "vs_data_query_desc: desc.input_name and target_name",
                  "\"x\"");
    dd.target_name = NULL, dd.input_name = "targets";
    VT_EXPECT_ERR(vs_data_query_desc(&dd, &q), VS_ERR_INVALID, "desc.input_name and target_name", "\"targets\"");
    dd.input_name = "";
    VT_EXPECT_ERR(vs_data_query_desc(&dd, &q), VS_ERR_INVALID, "vs_data_query_desc: desc.input_name", "empty");
    dd.input_name = NULL, dd.dp_size = -1;
    VT_EXPECT_ERR(vs_data_query_desc(&dd, &q), VS_ERR_INVALID, "vs_data_query_desc: desc.dp_size = -1", NULL);
    dd.dp_size = 0;
    VT_OK(vs_launch(2, query_train_rank, pat));
}

/* A read-ahead thread that never delivers: vs_data_next gives up after desc.timeout
   (the thread is stopped by hand here, reaching into the loader, so nothing is timed). */
static void timeout_case(void)
{
    char pat[512];
    snprintf(pat, sizeof pat, "%s/o_*.bin", DIR_);
    vs_data_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.files = pat, dd.batch = OB, dd.seq_len = OT, dd.prefetch = 1, dd.timeout = 0.05;
    vs_data* d;
    VT_OK(vs_data_open(&dd, &d));
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    d->stop = 1;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->th, NULL);
    d->produced = d->consumed; // (what it read before it stopped: dropped)
    vs_batch b;
    vs_result r = vs_data_next(d, &b);
    VT_CHECK(r == VS_ERR_TIMEOUT && strstr(vs_last_error(), "within 0.05 s"), "%d %s", (int)r, vs_last_error());
    d->has_thread = 0; // (joined above)
    VT_OK(vs_data_free(d));
}

int main(void)
{
    char tmpl[] = "/tmp/vs_data_XXXXXX";
    if (!mkdtemp(tmpl)) return fprintf(stderr, "mkdtemp failed\n"), 1;
    snprintf(DIR_, sizeof DIR_, "%s", tmpl);
    write_set("o", OLENS, 3, 50000, 1);
    static const long tl[] = {200, 150, 97, 120}; // 24 + 18 + 12 + 14 = 68 windows of 8 + 1: 8 batches of 8 an epoch
    write_set("t", tl, 4, 32, 2);
    if (gpt_model(&CFG, &STORE, &MODEL) != VS_OK) return fprintf(stderr, "gpt_model: %s\n", vs_last_error()), 1;
    VT_CASE("order/no-thread", order_case(-1));
    VT_CASE("order/read-ahead", order_case(2));
    VT_CASE("dp-rows/in-order", dp_rows_case(0, 2));
    VT_CASE("dp-rows/shuffled", dp_rows_case(1, 1));
    VT_CASE("dp-rows/shuffled-no-thread", dp_rows_case(1, -1));
    VT_CASE("shuffle/permutation-by-epoch-and-seed", shuffle_case());
    VT_CASE("seek", seek_case());
    VT_CASE("train/dp-local=global/DP2", dp_local_case(1, 2, 1));
    VT_CASE("train/dp-local=global/PP2xDP2", dp_local_case(2, 2, 2));
    VT_CASE("train/resume-DP2-to-DP4-and-1", resume_case());
    VT_CASE("bad-input", bad_input_case());
    VT_CASE("lifetime/free-after-the-world-ended", outlive_case());
    VT_CASE("timeout", timeout_case());
    VT_CASE("query-desc: the documented defaults, resolved and kept by vs_data_open", query_desc_case());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", DIR_);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", DIR_);
    return vt_summary();
}
