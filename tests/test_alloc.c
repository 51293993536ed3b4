/* test_alloc.c - every allocation of the library goes through the allocator hooks
   (issue 9, point 2). Linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,
   --wrap=free,--wrap=posix_memalign (see the Makefile): a call to the C allocator
   from this translation unit, which holds the whole library, lands in a __wrap_
   function below and is counted as a bypass. The counting allocator handed to
   vs_launch calls the real allocator itself. A workload that touches every part
   (mesh, submeshes, collectives sync and async, split and free, groups, p2p,
   redistribute with scratch, vocab-parallel loss, sharded init, DDP with ZeRO-1
   and ZeRO-2, a job that fails fast) must see allocations, as many frees, and no
   bypass. The test code itself allocates nothing. */
#define VESCALE_IMPLEMENTATION
#include "vescale.h"
#include "vs_test.h"

#include <string.h>

void* __real_malloc(size_t n);
void* __real_calloc(size_t n, size_t s);
void* __real_realloc(void* p, size_t n);
void __real_free(void* p);
int __real_posix_memalign(void** p, size_t a, size_t n);
void* __wrap_malloc(size_t n);
void* __wrap_calloc(size_t n, size_t s);
void* __wrap_realloc(void* p, size_t n);
void __wrap_free(void* p);
int __wrap_posix_memalign(void** p, size_t a, size_t n);

static int bypass; /* atomic: calls of the C allocator from this TU */
static const char* bypass_what;

#define BYPASS(name)                                                                    \
    do {                                                                                \
        __atomic_add_fetch(&bypass, 1, __ATOMIC_SEQ_CST);                               \
        bypass_what = name;                                                             \
    } while (0)

void* __wrap_malloc(size_t n)
{
    BYPASS("malloc");
    return __real_malloc(n);
}
void* __wrap_calloc(size_t n, size_t s)
{
    BYPASS("calloc");
    return __real_calloc(n, s);
}
void* __wrap_realloc(void* p, size_t n)
{
    BYPASS("realloc");
    return __real_realloc(p, n);
}
void __wrap_free(void* p)
{
    if (p) BYPASS("free");
    __real_free(p);
}
int __wrap_posix_memalign(void** p, size_t a, size_t n)
{
    BYPASS("posix_memalign");
    return __real_posix_memalign(p, a, n);
}

typedef struct {
    long allocs, frees;
    long live, peak; /* bytes are not tracked by the hooks; blocks are */
} counts;

static void* cnt_alloc(size_t n, void* user)
{
    counts* c = (counts*)user;
    __atomic_add_fetch(&c->allocs, 1, __ATOMIC_SEQ_CST);
    long live = __atomic_add_fetch(&c->live, 1, __ATOMIC_SEQ_CST);
    long peak = __atomic_load_n(&c->peak, __ATOMIC_SEQ_CST);
    while (live > peak && !__atomic_compare_exchange_n(&c->peak, &peak, live, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return __real_malloc(n ? n : 1);
}

static void cnt_free(void* p, void* user)
{
    counts* c = (counts*)user;
    __atomic_add_fetch(&c->frees, 1, __ATOMIC_SEQ_CST);
    __atomic_sub_fetch(&c->live, 1, __ATOMIC_SEQ_CST);
    __real_free(p);
}

#define N 4
static float xs[N][4096], ys[N][4096]; /* the test's buffers: static, no allocation */

static int work_rank(vs_world* w, void* arg)
{
    (void)arg;
    int me = vs_world_rank(w);
    vs_mesh* mesh = NULL;
    vs_mesh *dp = NULL, *tp = NULL, *both = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {2, 2}}, &mesh));
    VT_OK(vs_mesh_submesh(mesh, "DP", &dp));
    VT_OK(vs_mesh_submesh(mesh, "TP", &tp));
    VT_OK(vs_mesh_submesh(mesh, "DP, TP", &both));
    float* x = xs[me];
    float* y = ys[me];
    for (int i = 0; i < 4096; i++) x[i] = (float)(me + i);
    // collectives, blocking and async, a group with p2p
    vs_comm* c = vs_world_comm(w);
    VT_OK(vs_all_reduce(c, x, y, 4096, VS_F32, VS_OP_SUM, NULL));
    VT_CHECK(y[7] == (float)(0 + 1 + 2 + 3 + 4 * 7), "all-reduce %g", (double)y[7]);
    vs_work* wk = NULL;
    VT_OK(vs_all_gather(vs_mesh_comm(dp), x, y, 64, VS_F32, &wk));
    VT_OK(vs_wait(wk));
    size_t counts[2] = {3, 5};
    VT_OK(vs_all_gatherv(vs_mesh_comm(tp), x, y, counts, NULL, VS_F32, NULL));
    VT_OK(vs_group_start(c));
    VT_OK(vs_send(c, x, 16, VS_F32, (me + 1) % N, NULL));
    VT_OK(vs_recv(c, y, 16, VS_F32, (me + N - 1) % N, NULL));
    VT_OK(vs_group_end(c, NULL));
    VT_CHECK(y[0] == (float)((me + N - 1) % N), "p2p got %g", (double)y[0]);
    vs_comm* sc = NULL;
    VT_OK(vs_comm_split(c, me % 2, me, &sc));
    VT_OK(vs_all_reduce(sc, x, y, 8, VS_F32, VS_OP_MAX, &wk));
    VT_OK(vs_comm_free(sc)); // the handle outlives its communicator
    VT_OK(vs_wait(wk));
    // redistribute: a strided step (scratch) and an all-to-all
    vs_dtensor a;
    memset(&a, 0, sizeof a);
    a.dtype = VS_F32;
    a.ndim = 2;
    a.shape[0] = 16;
    a.shape[1] = 24;
    VT_OK(vs_layout_parse(mesh, "[Shard(1), Shard(0)]", &a.layout));
    a.data = x;
    vs_init_desc id = {VS_INIT_NORMAL, 7, "w", 0, 0.02, 0};
    VT_OK(vs_init_fill(&a, &id));
    vs_dtensor b = a;
    VT_OK(vs_layout_parse(mesh, "[Shard(0), Replicate]", &b.layout));
    b.data = y;
    VT_OK(vs_redistribute(&a, &b));
    // vocab-parallel loss over TP
    int64_t start, rows;
    VT_OK(vs_vocab_range(tp, 10, &start, &rows));
    int32_t targets[3] = {1, 7, 9};
    float loss[3];
    VT_OK(vs_vocab_cross_entropy(tp, x, 3, 10, targets, loss, y));
    // DDP, ZeRO-1 and ZeRO-2 with a step
    for (int z = 1; z <= 2; z++) {
        vs_ddp* d = NULL;
        vs_ddp_desc dd;
        memset(&dd, 0, sizeof dd);
        dd.mesh = mesh;
        dd.zero = z == 1 ? VS_ZERO_1 : VS_ZERO_2;
        dd.optim.kind = VS_OPTIM_ADAMW;
        VT_OK(vs_ddp_init(&dd, &d));
        vs_ddp_param_desc pd;
        memset(&pd, 0, sizeof pd);
        pd.name = "w";
        pd.data = x;
        pd.dtype = VS_F32;
        pd.ndim = 2;
        pd.shape[0] = 8;
        pd.shape[1] = 6;
        pd.placements[1] = vs_shard(1);
        int idx;
        VT_OK(vs_ddp_add_param(d, &pd, &idx));
        VT_OK(vs_ddp_finalize(d));
        float* g = (float*)vs_ddp_grad(d, idx);
        VT_CHECK(g != NULL, "grad view: %s", vs_last_error());
        for (int64_t i = 0; g && i < vs_ddp_local_numel(d, idx); i++) g[i] = 0.01f * (float)i;
        VT_OK(vs_ddp_grad_ready(d, idx));
        VT_OK(vs_ddp_finish_grad_sync(d));
        VT_OK(vs_ddp_step(d, 1e-3));
        VT_OK(vs_ddp_free(d));
    }
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

/* A job that fails fast: rank 1 returns an error while the others wait. */
static int fail_rank(vs_world* w, void* arg)
{
    (void)arg;
    if (vs_world_rank(w) == 1) return vs_set_error(VS_ERR_IO, "disk full");
    return vs_barrier(vs_world_comm(w), NULL);
}

static void run(vs_rank_fn fn, vs_result want, const char* what)
{
    counts c;
    memset(&c, 0, sizeof c);
    __atomic_store_n(&bypass, 0, __ATOMIC_SEQ_CST);
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = N;
    d.timeout_s = 60;
    d.allocator.alloc = cnt_alloc;
    d.allocator.free = cnt_free;
    d.allocator.user = &c;
    vs_result r = vs_launch_ex(&d, fn, NULL);
    VT_CHECK(r == want, "%s: launch gave %s (%s)", what, vs_result_string(r), vs_last_error());
    int b = __atomic_load_n(&bypass, __ATOMIC_SEQ_CST);
    printf("    %s: %ld allocations through the hooks, %ld frees, at most %ld blocks live; %d C allocator calls\n",
           what, c.allocs, c.frees, c.peak, b);
    VT_CHECK(b == 0, "%s: %d calls bypassed the hooks (last: %s)", what, b, bypass_what ? bypass_what : "?");
    VT_CHECK(c.allocs > 0 && c.allocs == c.frees, "%s: %ld allocations, %ld frees", what, c.allocs, c.frees);
}

int main(void)
{
    VT_CASE("alloc/every_allocation_through_the_hooks", run(work_rank, VS_OK, "workload"));
    VT_CASE("alloc/fail_fast_path_too", run(fail_rank, VS_ERR_IO, "failing job"));
    return vt_summary();
}
