/* test_train_scale.c - vs_train_load's metadata does not grow on a rank other
   than 0 with the world's size (issue 35 §3), and its errors reach every rank.

   - nonroot_flat: the example GPT (one block) on DP 16 and DP 64 thread ranks
     with ZeRO-1 (each optimizer state a range a rank: the index grows with the
     world), vs_train_save, then vs_train_load into a state of another init
     seed. The library's host bytes during the load, through the allocator
     hooks, each block charged to the rank thread that allocated it (its peak
     over the call, above what it held before): a rank other than 0 holds the
     same bytes at 64 ranks as at 16; rank 0 no more than 4 x (it reads the whole
     index). Every rank's parameters then equal the saved ones. Before, every
     rank parsed the whole index to look up three blobs and the tensors the
     model lacks (~1.7 KB a rank of the world).
   - errors_every_rank: on 4 ranks, a checkpoint of a two-block model loaded
     into the one-block one (tensors it lacks: VS_ERR_MISMATCH), and a
     checkpoint without its index (VS_ERR_IO): every rank returns rank 0's
     message word for word (before, the others said only "rank 0's error says
     why" for the missing index). */
#define VESCALE_IMPLEMENTATION
#include "../vescale.h"
#include "../examples/gpt.h"
#include "../bench/rank_bytes.h"
#include "vs_test.h"

#include <stdlib.h>
#include <unistd.h>

enum { MAXR = 64, NW = 32 * 16 };
static gpt_config CFG[3] = {{32, 8, 16, 2, 1, 77}, {32, 8, 16, 2, 1, 78}, {32, 8, 16, 2, 2, 77}};
static gpt_model_storage STORE[3];
static vs_model_desc MODEL[3]; // the saved model, the one loaded into (another seed), a two-block one

static rb_account accts[MAXR];
static char root[256];
static size_t load_bytes[MAXR];
static int loaded_ok[MAXR];
static vs_result load_rc[MAXR];
static char load_msg[MAXR][1024];

typedef struct job {
    int save_model, load_model; // MODEL[] indices
    const char* save;           // NULL: no save
    const char* load;
} job;

static vs_train* open_train(vs_world* w, int model)
{
    vs_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.dp = vs_world_size(w), plan.pp = 1, plan.tp = 1;
    plan.zero = VS_ZERO_1;
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &MODEL[model];
    d.plan = &plan;
    d.optim.kind = VS_OPTIM_ADAMW;
    d.lr.lr = 1e-3;
    vs_train* t = NULL;
    VT_OK(vs_parallelize(w, &d, &t));
    return t;
}

static int rank_main(vs_world* w, void* arg)
{
    const job* J = (const job*)arg;
    const int me = vs_world_rank(w);
    if (me < 0 || me >= MAXR) return 1;
    rb_acct = &accts[me];
    float saved[NW], got[NW];
    if (J->save) {
        vs_train* s = open_train(w, J->save_model);
        VT_OK(vs_train_get_param(s, "wte", saved, sizeof saved));
        VT_OK(vs_train_save(s, J->save, NULL, 0, 0));
        VT_OK(vs_train_free(s));
    }
    vs_train* t = open_train(w, J->load_model);
    VT_OK(vs_barrier(vs_world_comm(w), NULL)); // (every rank's setup done: its bytes now are the base)
    size_t base = rb_mark();
    load_rc[me] = vs_train_load(t, J->load, NULL, 0);
    load_bytes[me] = rb_since(base);
    snprintf(load_msg[me], sizeof load_msg[me], "%s", vs_last_error());
    if (!load_rc[me] && J->save) {
        VT_OK(vs_train_get_param(t, "wte", got, sizeof got));
        loaded_ok[me] = !memcmp(saved, got, sizeof got);
    }
    VT_OK(vs_train_free(t));
    return 0;
}

static void launch(int n, job* J)
{
    memset(accts, 0, sizeof accts);
    memset(load_bytes, 0, sizeof load_bytes), memset(loaded_ok, 0, sizeof loaded_ok), memset(load_rc, 0, sizeof load_rc);
    vs_launch_desc ld = {.nranks = n, .stack_bytes = (size_t)512 << 10, .allocator = {.alloc = rb_alloc, .free = rb_free}};
    VT_OK(vs_launch_ex(&ld, rank_main, J));
}

/* One save and load on n thread ranks: rank 0's load bytes, and the largest of
   the other ranks'. */
static void run(int n, size_t* b0, size_t* bmax)
{
    char path[300];
    snprintf(path, sizeof path, "%s/n%d", root, n);
    job J = {0, 1, path, path};
    launch(n, &J);
    int good = 0;
    for (int k = 0; k < n; k++) good += load_rc[k] == VS_OK && loaded_ok[k];
    VT_CHECK(good == n, "%d ranks: %d loaded back what they saved (rank 0: %s)", n, good, load_msg[0]);
    *b0 = load_bytes[0], *bmax = 0;
    for (int k = 1; k < n; k++)
        if (load_bytes[k] > *bmax) *bmax = load_bytes[k];
    printf("# %2d ranks: vs_train_load's host bytes on rank 0 %zu, on the other ranks at most %zu\n", n, *b0, *bmax);
}

static void case_nonroot_flat(void)
{
    size_t r16, o16, r64, o64;
    run(16, &r16, &o16);
    run(64, &r64, &o64);
    // the other ranks: the same entries, the same bytes (a little slack for the transport's per-call scratch)
    VT_CHECK(o64 <= o16 + 512, "a rank other than 0 holds %zu bytes during vs_train_load at 64 ranks, %zu at 16", o64,
             o16);
    VT_CHECK(r64 <= 4 * r16 + 4096, "rank 0 holds %zu bytes during vs_train_load at 64 ranks, %zu at 16", r64, r16);
}

/* Every one of n ranks returned `want` with rank 0's message, which holds frag. */
static void same_error(int n, vs_result want, const char* frag)
{
    int same = 0;
    for (int k = 0; k < n; k++) same += load_rc[k] == want && !strcmp(load_msg[k], load_msg[0]);
    VT_CHECK(same == n && strstr(load_msg[0], frag), "%d of %d ranks return %d with rank 0's message \"%s\" (rank %d: "
             "%d \"%s\")", same, n, (int)want, load_msg[0], n - 1, (int)load_rc[n - 1], load_msg[n - 1]);
}

static void case_errors_every_rank(void)
{
    enum { N = 4 };
    char path[300], file[340];
    snprintf(path, sizeof path, "%s/two_blocks", root);
    job J = {2, 0, path, path}; // (saved by the two-block model, loaded into the one-block one)
    launch(N, &J);
    same_error(N, VS_ERR_MISMATCH, "this model lacks");
    VT_CHECK(strstr(load_msg[0], "\"h.1."), "names a tensor of the second block: %s", load_msg[0]);
    snprintf(file, sizeof file, "%s/index.json", path);
    VT_CHECK(remove(file) == 0, "remove %s", file);
    job K = {0, 0, NULL, path};
    launch(N, &K);
    same_error(N, VS_ERR_IO, "not a complete checkpoint");
}

int main(void)
{
    for (int m = 0; m < 3; m++)
        if (gpt_model(&CFG[m], &STORE[m], &MODEL[m]) != VS_OK) return fprintf(stderr, "gpt_model: %s\n", vs_last_error()), 1;
    snprintf(root, sizeof root, "/tmp/vs_train_scale_XXXXXX");
    if (!mkdtemp(root)) return 1;
    VT_CASE("train_scale/nonroot_flat", case_nonroot_flat());
    VT_CASE("train_scale/errors_every_rank", case_errors_every_rank());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd)) return 1;
    return vt_summary();
}
