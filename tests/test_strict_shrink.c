/* test_strict_shrink.c - NCCL 2.28's ncclCommRevoke and ncclCommShrink as the
   strict stand-in models them (tests/strict/vs_strict_nccl.h; make test:
   build/test_strict_shrink, no GPU), driven directly with plain threads as
   ranks, one simulated GPU each: the recovery a job makes when ranks die.

   A rank "dies" by returning: it never calls again, while the others' streams
   block in an all-reduce it never joins. The survivors revoke the world
   communicator (or shrink with NCCL_SHRINK_ABORT) and shrink it without the
   dead; the child has the survivors in their old order (an all-gather of old
   ranks shows it) and reduces exactly (integers in floats: the sum is exact in
   any order). Blocking and non-blocking communicators, one and two failures.
   Then the misuses, each with its violation count or NCCL's error code:
   mismatched exclude lists (no hang), an excluded rank calling, collectives,
   finalize and a second revoke on a revoked communicator, bad flags and lists,
   a default shrink with operations in flight, a shrink before a non-blocking
   revoke settled, and the parent's async error (NCCL 2.28 returns it from a
   shrink, NCCL_SHRINK_ABORT or not, until a revoke resets it). */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vs_test.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "strict/vs_strict.h"

#define NV 64        /* elements of each buffer */
#define SENTINEL -7.0f /* a receive buffer's contents before a collective that must not write it */

enum { M_REVOKE, M_ABORT, M_BUSY }; /* how the survivors recover */

typedef struct scen {
    int n;                 /* ranks */
    unsigned dead;         /* bit r: rank r dies before the second all-reduce */
    int mode;              /* M_* */
    int blocking;          /* the world communicator's mode */
    int reverse_odd;       /* odd ranks pass the exclude list in descending order */
    int p2p;               /* what the dead rank leaves blocked: a send to it and a receive from it */
    ncclUniqueId id;
} scen;

typedef struct rank_arg {
    scen* s;
    int rank;
    void* (*fn)(struct rank_arg*);
} rank_arg;

static void* rank_main(void* p)
{
    rank_arg* a = (rank_arg*)p;
    cudaSetDevice(a->rank);
    return a->fn(a);
}

/* n threads, rank r on device r, each running fn. */
static void run_ranks(scen* s, void* (*fn)(rank_arg*))
{
    pthread_t t[8];
    rank_arg a[8];
    ncclGetUniqueId(&s->id);
    for (int r = 0; r < s->n; r++) {
        a[r].s = s, a[r].rank = r, a[r].fn = fn;
        pthread_create(&t[r], NULL, rank_main, &a[r]);
    }
    for (int r = 0; r < s->n; r++) pthread_join(t[r], NULL);
}

/* Polls a non-blocking communicator until its state settles (the stand-in's
   deadline bounds every wait behind it). */
static ncclResult_t settle(ncclComm_t c)
{
    ncclResult_t r = ncclInProgress;
    while (ncclCommGetAsyncError(c, &r) == ncclSuccess && r == ncclInProgress) sched_yield();
    return r;
}

static ncclComm_t init_comm(scen* s, int rank, int blocking)
{
    ncclComm_t c = NULL;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = blocking;
    ncclResult_t r = ncclCommInitRankConfig(&c, s->n, s->id, rank, &cfg);
    VT_CHECK(r == ncclSuccess || (!blocking && r == ncclInProgress), "rank %d: ncclCommInitRankConfig: %d", rank, (int)r);
    if (!blocking) VT_CHECK(settle(c) == ncclSuccess, "rank %d: the init did not settle to ncclSuccess", rank);
    return c;
}

/* Rank `old`'s contribution: exact in floats, distinct per rank. */
static float val(int old, int i) { return (float)((old + 1) * 100 + i); }

/* A rank's device buffers, made before any stream can block (cudaMalloc and
   cudaFree synchronise the device) and filled in stream order on the stream
   that uses them (pageable copies: staged at the call, or returning when done). */
typedef struct bufs {
    float *sb, *rb;
    int32_t *mine, *gb;
} bufs;

static void bufs_init(bufs* b)
{
    cudaMalloc((void**)&b->sb, NV * sizeof(float));
    cudaMalloc((void**)&b->rb, NV * sizeof(float));
    cudaMalloc((void**)&b->mine, sizeof(int32_t));
    cudaMalloc((void**)&b->gb, 8 * sizeof(int32_t));
}
static void bufs_free(bufs* b) { cudaFree(b->sb), cudaFree(b->rb), cudaFree(b->mine), cudaFree(b->gb); }

/* sb: rank old's values; rb: the sentinel. */
static void bufs_fill(bufs* b, int old, cudaStream_t st)
{
    float h[NV], z[NV];
    int32_t o = old;
    for (int i = 0; i < NV; i++) h[i] = val(old, i), z[i] = SENTINEL;
    cudaMemcpyAsync(b->sb, h, sizeof h, cudaMemcpyHostToDevice, st);
    cudaMemcpyAsync(b->rb, z, sizeof z, cudaMemcpyHostToDevice, st);
    cudaMemcpyAsync(b->mine, &o, sizeof o, cudaMemcpyHostToDevice, st);
}

/* How many elements of rb differ from the sentinel (read on st, in order). */
static int written(bufs* b, cudaStream_t st)
{
    float h[NV];
    cudaMemcpyAsync(h, b->rb, sizeof h, cudaMemcpyDeviceToHost, st);
    int k = 0;
    for (int i = 0; i < NV; i++) k += h[i] != SENTINEL;
    return k;
}

/* Blocks the host until this rank's stream on device dev waits in a collective
   for its peers: the failure has happened "mid all-reduce". */
static void wait_blocked(int dev)
{
    pthread_mutex_lock(&st_mu);
    ST_WAIT_UNTIL(st_nccl_waiting_locked(dev) != NULL, "test: an all-reduce waiting for a dead peer");
    pthread_mutex_unlock(&st_mu);
}

/* An all-reduce and an all-gather of old ranks on comm c (rank `old` of the
   world; the members: the world's ranks not in `gone`), checked exactly. */
static void check_comm(ncclComm_t c, int old, int nworld, unsigned gone, cudaStream_t st, bufs* b)
{
    int members[8], m = 0, me = -1;
    for (int r = 0; r < nworld; r++)
        if (!(gone >> r & 1)) {
            if (r == old) me = m;
            members[m++] = r;
        }
    int cnt = -1, ur = -1, dev = -1;
    ncclCommCount(c, &cnt);
    ncclCommUserRank(c, &ur);
    ncclCommCuDevice(c, &dev);
    VT_CHECK(cnt == m && ur == me && dev == old, "old rank %d: count %d rank %d device %d, want %d %d %d", old, cnt, ur,
             dev, m, me, old);
    bufs_fill(b, old, st);
    ncclResult_t r1 = ncclAllReduce(b->sb, b->rb, NV, ncclFloat32, ncclSum, c, st);
    ncclResult_t r2 = ncclAllGather(b->mine, b->gb, 1, ncclInt32, c, st);
    VT_CHECK(r1 == ncclSuccess && r2 == ncclSuccess, "old rank %d: collectives: %d %d", old, (int)r1, (int)r2);
    float h[NV];
    int32_t g[8];
    cudaMemcpyAsync(h, b->rb, sizeof h, cudaMemcpyDeviceToHost, st);
    cudaMemcpyAsync(g, b->gb, (size_t)m * sizeof(int32_t), cudaMemcpyDeviceToHost, st);
    int bad = 0;
    for (int i = 0; i < NV; i++) {
        float want = 0;
        for (int k = 0; k < m; k++) want += val(members[k], i);
        bad += h[i] != want;
    }
    VT_CHECK(!bad, "old rank %d: %d of %d sums differ from the survivors' (element 0: %g)", old, bad, NV, (double)h[0]);
    for (int k = 0; k < m; k++)
        VT_CHECK(g[k] == members[k], "old rank %d: child rank %d is old rank %d, want %d", old, k, (int)g[k], members[k]);
}

/* The violations a case makes: of up to two classes, and no others. */
typedef struct vsnap {
    const char *ca, *cb;
    long total, a, b;
} vsnap;

static vsnap vsnap_take(const char* ca, const char* cb)
{
    vsnap v = {ca, cb, vs_strict_violations(), ca ? vs_strict_violations_of(ca) : 0, cb ? vs_strict_violations_of(cb) : 0};
    return v;
}

static void vsnap_check(vsnap v, long na, long nb)
{
    long a = v.ca ? vs_strict_violations_of(v.ca) - v.a : 0, b = v.cb ? vs_strict_violations_of(v.cb) - v.b : 0;
    long all = vs_strict_violations() - v.total;
    VT_CHECK(a == na && b == nb && all == na + nb, "%ld %s and %ld %s violations (%ld in all), want %ld and %ld",
             a, v.ca ? v.ca : "-", b, v.cb ? v.cb : "-", all, na, nb);
}

static int sorted_list(unsigned gone, int* out)
{
    int k = 0;
    for (int r = 0; r < 8; r++)
        if (gone >> r & 1) out[k++] = r;
    return k;
}

/* A rank's world communicator, stream and buffers. */
typedef struct renv {
    ncclComm_t c;
    cudaStream_t st;
    bufs b;
} renv;

static void renv_open(renv* e, scen* s, int rank, int blocking)
{
    e->c = init_comm(s, rank, blocking);
    cudaStreamCreateWithFlags(&e->st, cudaStreamNonBlocking);
    bufs_init(&e->b);
    bufs_fill(&e->b, rank, e->st);
}

static ncclComm_t rank_open(rank_arg* a, renv* e, int blocking)
{
    renv_open(e, a->s, a->rank, blocking);
    return e->c;
}

static void renv_close(renv* e)
{
    if (e->c) VT_CHECK(ncclCommDestroy(e->c) == ncclSuccess, "destroy the world communicator");
    bufs_free(&e->b);
    cudaStreamDestroy(e->st);
}

/* ---- the recovery: ranks die mid all-reduce, the survivors shrink ------------ */

static void* recover_rank(rank_arg* a)
{
    scen* s = a->s;
    int me = a->rank;
    renv e;
    renv_open(&e, s, me, s->blocking);
    ncclComm_t c = e.c;
    cudaStream_t st = e.st, st2;
    cudaStreamCreateWithFlags(&st2, cudaStreamNonBlocking);
    bufs stuck;
    bufs_init(&stuck);
    check_comm(c, me, s->n, 0, st, &e.b); /* the world works */
    if (s->dead >> me & 1) return NULL; /* dies: never calls again */

    int excl[8], nexcl = sorted_list(s->dead, excl);
    bufs_fill(&stuck, me, st);
    if (s->p2p) {
        ncclGroupStart();
        ncclSend(stuck.sb, NV, ncclFloat32, excl[0], c, st);
        ncclRecv(stuck.rb, NV, ncclFloat32, excl[0], c, st);
        VT_CHECK(ncclGroupEnd() == (s->blocking ? ncclSuccess : ncclInProgress), "rank %d: send/recv", me);
    } else {
        VT_CHECK(ncclAllReduce(stuck.sb, stuck.rb, NV, ncclFloat32, ncclSum, c, st) == ncclSuccess, "rank %d: all-reduce",
                 me);
    }
    wait_blocked(me);

    if (s->reverse_odd && me % 2)
        for (int i = 0; i < nexcl / 2; i++) {
            int t = excl[i];
            excl[i] = excl[nexcl - 1 - i], excl[nexcl - 1 - i] = t;
        }
    ncclComm_t nc = NULL;
    ncclResult_t r;
    long v0 = vs_strict_violations();
    if (s->mode == M_REVOKE) {
        r = ncclCommRevoke(c, NCCL_REVOKE_DEFAULT);
        /* non-blocking: the all-reduce can only end once the revoke stops it */
        VT_CHECK(r == (s->blocking ? ncclSuccess : ncclInProgress), "rank %d: ncclCommRevoke: %d", me, (int)r);
        VT_CHECK(settle(c) == ncclSuccess, "rank %d: the revoked communicator did not settle to ncclSuccess", me);
        r = ncclCommShrink(c, excl, nexcl, &nc, NULL, NCCL_SHRINK_DEFAULT);
    } else {
        r = ncclCommShrink(c, excl, nexcl, &nc, NULL, s->mode == M_ABORT ? NCCL_SHRINK_ABORT : NCCL_SHRINK_DEFAULT);
    }
    VT_CHECK(r == ncclSuccess, "rank %d: ncclCommShrink: %d", me, (int)r);
    if (!s->blocking) VT_CHECK(settle(c) == ncclSuccess, "rank %d: the shrink did not settle", me);
    for (int i = 1; i < nexcl; i++) VT_CHECK(excl[i - 1] < excl[i], "rank %d: the exclude list not sorted in place", me);
    VT_CHECK(nc != NULL, "rank %d: no child communicator", me);
    if (!nc) return NULL;
    VT_CHECK(nc->blocking == s->blocking, "rank %d: the child's blocking mode %d, not its parent's", me, nc->blocking);
    if (s->mode == M_BUSY) {
        VT_CHECK(vs_strict_violations() - v0 >= 1, "rank %d: no nccl-shrink-busy report", me);
        check_comm(nc, me, s->n, s->dead, st2, &e.b); /* st still waits in the parent's all-reduce */
        VT_CHECK(ncclCommAbort(c) == ncclSuccess, "rank %d: abort", me); /* which ends it */
        e.c = NULL;
    } else {
        VT_CHECK(vs_strict_violations() == v0, "rank %d: %ld violations", me, vs_strict_violations() - v0);
        ncclResult_t ae = ncclInternalError;
        ncclCommGetAsyncError(c, &ae);
        VT_CHECK(ae == ncclSuccess, "rank %d: the parent's state %d after the recovery", me, (int)ae);
    }
    VT_CHECK(cudaStreamSynchronize(st) == cudaSuccess, "rank %d: the stopped all-reduce's stream", me);
    int w = written(&stuck, st);
    VT_CHECK(!w, "rank %d: the stopped all-reduce wrote %d elements", me, w);
    check_comm(nc, me, s->n, s->dead, st, &e.b);
    VT_CHECK(ncclCommDestroy(nc) == ncclSuccess, "rank %d: destroy the child", me);
    renv_close(&e);
    bufs_free(&stuck);
    cudaStreamDestroy(st2);
    return NULL;
}

static void recover(int n, unsigned dead, int mode, int blocking, int reverse_odd, int p2p)
{
    scen s;
    memset(&s, 0, sizeof s);
    s.n = n, s.dead = dead, s.mode = mode, s.blocking = blocking, s.reverse_odd = reverse_odd, s.p2p = p2p;
    vsnap v = vsnap_take("nccl-shrink-busy", NULL);
    run_ranks(&s, recover_rank);
    vsnap_check(v, mode == M_BUSY ? n - __builtin_popcount(dead) : 0, 0); /* one per survivor */
}

/* ---- a non-blocking parent, a child configured blocking ---------------------- */

static void* nonblocking_config_rank(rank_arg* a)
{
    renv e;
    ncclComm_t c = rank_open(a, &e, 0);
    int me = a->rank;
    /* rank 0 stays alive but is left out: it simply does not call */
    if (me != 0) {
        int excl[1] = {0};
        ncclComm_t nc = NULL;
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 1;
        VT_CHECK(ncclCommShrink(c, excl, 1, &nc, &cfg, NCCL_SHRINK_DEFAULT) == ncclSuccess, "rank %d: shrink", me);
        VT_CHECK(settle(c) == ncclSuccess, "rank %d: the shrink did not settle", me);
        VT_CHECK(nc && nc->blocking == 1, "rank %d: the child is not blocking as its config says", me);
        if (nc) {
            check_comm(nc, me, a->s->n, 1u, e.st, &e.b);
            ncclCommDestroy(nc);
        }
    }
    renv_close(&e);
    return NULL;
}

/* ---- the parent's async error ------------------------------------------------ */

static void* async_error_rank(rank_arg* a)
{
    renv e;
    ncclComm_t c = rank_open(a, &e, 1);
    int me = a->rank;
    /* rank 1 all-reduces half as much: a mismatch, every rank's state an error */
    ncclAllReduce(e.b.sb, e.b.rb, me == 1 ? NV / 2 : NV, ncclFloat32, ncclSum, c, e.st);
    cudaStreamSynchronize(e.st);
    ncclResult_t ae = ncclSuccess;
    ncclCommGetAsyncError(c, &ae);
    VT_CHECK(ae == ncclInvalidUsage, "rank %d: the state after a mismatched collective: %d", me, (int)ae);
    if (me != 3) { /* rank 3 is the one left out */
        int excl[1] = {3};
        ncclComm_t nc = NULL;
        ncclResult_t r = ncclCommShrink(c, excl, 1, &nc, NULL, NCCL_SHRINK_ABORT);
        VT_CHECK(r == ncclInvalidUsage && !nc, "rank %d: a shrink of a parent in error gave %d", me, (int)r);
        VT_CHECK(ncclCommRevoke(c, NCCL_REVOKE_DEFAULT) == ncclSuccess, "rank %d: revoke", me);
        ncclCommGetAsyncError(c, &ae);
        VT_CHECK(ae == ncclSuccess, "rank %d: the state after the revoke: %d", me, (int)ae);
        r = ncclCommShrink(c, excl, 1, &nc, NULL, NCCL_SHRINK_ABORT);
        VT_CHECK(r == ncclSuccess && nc, "rank %d: the shrink after the revoke gave %d", me, (int)r);
        if (nc) {
            check_comm(nc, me, a->s->n, 1u << 3, e.st, &e.b);
            ncclCommDestroy(nc);
        }
    }
    renv_close(&e);
    return NULL;
}

/* ---- misuse ----------------------------------------------------------------- */

typedef struct misuse {
    scen s;
    int what;
} misuse;
enum { U_MISMATCH, U_EXCLUDED, U_AFTER_REVOKE, U_FLAGS, U_NOT_READY };

static int hold_stream[8]; /* rank r's host function on its stream spins while hold_stream[r] is set */
static void CUDART_CB hold_fn(void* arg)
{
    while (__atomic_load_n((int*)arg, __ATOMIC_ACQUIRE)) sched_yield();
}

static void* misuse_rank(rank_arg* a)
{
    misuse* u = (misuse*)(void*)a->s;
    scen* s = &u->s;
    int me = a->rank;
    renv e;
    ncclComm_t c = rank_open(a, &e, u->what != U_NOT_READY), nc = NULL;
    cudaStream_t st = e.st;
    bufs* b = &e.b;
    ncclResult_t r;
    if (u->what == U_MISMATCH && me != 3) { /* rank 3 died; rank 2 also leaves out rank 1 */
        int e01[1] = {3}, e2[2] = {3, 1};
        r = me == 2 ? ncclCommShrink(c, e2, 2, &nc, NULL, NCCL_SHRINK_DEFAULT)
                    : ncclCommShrink(c, e01, 1, &nc, NULL, NCCL_SHRINK_DEFAULT);
        VT_CHECK(r == ncclInvalidUsage && !nc, "rank %d: a mismatched shrink gave %d", me, (int)r);
    } else if (u->what == U_EXCLUDED) {
        int excl[1] = {3};
        r = ncclCommShrink(c, excl, 1, &nc, NULL, NCCL_SHRINK_DEFAULT);
        if (me == 3) VT_CHECK(r == ncclInvalidArgument && !nc, "rank 3, excluded, calling: %d", (int)r);
        else {
            VT_CHECK(r == ncclSuccess && nc, "rank %d: shrink beside an excluded caller: %d", me, (int)r);
            if (nc) check_comm(nc, me, s->n, 1u << 3, st, b);
        }
    } else if (u->what == U_AFTER_REVOKE) {
        VT_CHECK(ncclCommRevoke(c, NCCL_REVOKE_DEFAULT) == ncclSuccess, "rank %d: revoke", me);
        long v0 = vs_strict_violations();
        r = ncclAllReduce(b->sb, b->rb, NV, ncclFloat32, ncclSum, c, st);
        VT_CHECK(r == ncclInvalidUsage, "rank %d: an all-reduce on a revoked communicator: %d", me, (int)r);
        r = ncclSend(b->sb, NV, ncclFloat32, 1 - me, c, st);
        VT_CHECK(r == ncclInvalidUsage, "rank %d: a send on a revoked communicator: %d", me, (int)r);
        r = ncclCommFinalize(c);
        VT_CHECK(r == ncclInvalidArgument, "rank %d: finalize after revoke: %d", me, (int)r);
        r = ncclCommRevoke(c, NCCL_REVOKE_DEFAULT);
        VT_CHECK(r == ncclInvalidArgument, "rank %d: a second revoke: %d", me, (int)r);
        /* each of the four reported on this rank (the other rank's may interleave) */
        VT_CHECK(vs_strict_violations() - v0 >= 4, "rank %d: %ld violations for 4 misuses", me,
                 vs_strict_violations() - v0);
    } else if (u->what == U_FLAGS) {
        r = ncclCommRevoke(c, 1);
        VT_CHECK(r == ncclInvalidArgument, "rank %d: revokeFlags 1: %d", me, (int)r);
        VT_CHECK(!c->revoked, "rank %d: revokeFlags 1 revoked the communicator", me);
        int e3[1] = {3}, far[1] = {9}, twice[2] = {3, 3};
        VT_CHECK(ncclCommShrink(c, NULL, 1, &nc, NULL, 0) == ncclInvalidArgument, "rank %d: NULL list", me);
        VT_CHECK(ncclCommShrink(c, e3, 0, &nc, NULL, 0) == ncclInvalidArgument, "rank %d: empty list", me);
        VT_CHECK(ncclCommShrink(c, e3, 1, NULL, NULL, 0) == ncclInvalidArgument, "rank %d: NULL newcomm", me);
        if (me != 3) {
            VT_CHECK(ncclCommShrink(c, far, 1, &nc, NULL, 0) == ncclInvalidArgument, "rank %d: rank 9 of 4", me);
            VT_CHECK(ncclCommShrink(c, twice, 2, &nc, NULL, 0) == ncclInvalidArgument, "rank %d: {3, 3}", me);
            r = ncclCommShrink(c, e3, 1, &nc, NULL, 0x10); /* an undefined bit: reported, ignored as NCCL does */
            VT_CHECK(r == ncclSuccess && nc, "rank %d: shrinkFlags 0x10: %d", me, (int)r);
            if (nc) check_comm(nc, me, s->n, 1u << 3, st, b);
        }
        check_comm(c, me, s->n, 0, st, b); /* not revoked: the world still works */
    } else if (u->what == U_NOT_READY && me != 2) { /* rank 2 died */
        /* the all-reduce queued behind a host function: the revoke cannot settle
           until the stream reaches it */
        __atomic_store_n(&hold_stream[me], 1, __ATOMIC_RELEASE);
        cudaLaunchHostFunc(st, hold_fn, &hold_stream[me]);
        VT_CHECK(ncclAllReduce(b->sb, b->rb, NV, ncclFloat32, ncclSum, c, st) == ncclSuccess, "rank %d: all-reduce", me);
        r = ncclCommRevoke(c, NCCL_REVOKE_DEFAULT);
        VT_CHECK(r == ncclInProgress, "rank %d: a non-blocking revoke of a busy communicator: %d", me, (int)r);
        int excl[1] = {2};
        r = ncclCommShrink(c, excl, 1, &nc, NULL, NCCL_SHRINK_DEFAULT);
        VT_CHECK(r == ncclInvalidArgument && !nc, "rank %d: a shrink before the revoke settled: %d", me, (int)r);
        __atomic_store_n(&hold_stream[me], 0, __ATOMIC_RELEASE);
        VT_CHECK(settle(c) == ncclSuccess, "rank %d: the revoke did not settle", me);
        r = ncclCommShrink(c, excl, 1, &nc, NULL, NCCL_SHRINK_DEFAULT);
        VT_CHECK(r == ncclSuccess, "rank %d: a shrink once settled: %d", me, (int)r);
        VT_CHECK(settle(c) == ncclSuccess && nc, "rank %d: the shrink did not settle", me);
        int w = written(b, st);
        VT_CHECK(!w, "rank %d: the revoked all-reduce wrote %d elements", me, w);
        if (nc) check_comm(nc, me, s->n, 1u << 2, st, b);
    }
    if (nc) ncclCommDestroy(nc);
    renv_close(&e);
    return NULL;
}

static void misuse_case(int n, int what, const char* ca, long na, const char* cb, long nb)
{
    misuse u;
    memset(&u, 0, sizeof u);
    u.s.n = n, u.what = what;
    vsnap v = vsnap_take(ca, cb);
    run_ranks(&u.s, misuse_rank);
    vsnap_check(v, na, nb);
}

static void async_error_case(void)
{
    scen s;
    memset(&s, 0, sizeof s);
    s.n = 4;
    vsnap v = vsnap_take("nccl-mismatch", NULL);
    run_ranks(&s, async_error_rank);
    vsnap_check(v, 1, 0); /* the mismatched collective's */
}

static void nonblocking_config_case(void)
{
    scen s;
    memset(&s, 0, sizeof s);
    s.n = 4;
    vsnap v = vsnap_take(NULL, NULL);
    run_ranks(&s, nonblocking_config_rank);
    vsnap_check(v, 0, 0);
}

int main(void)
{
    setenv("VS_STRICT_DELAY_US", "50", 0); /* a random delay before every stream operation */
    setenv("VS_STRICT_HANG_S", "60", 0);   /* a stand-in wait that long is a hang: reported, then exit */
    VT_CASE("shrink/revoke: 8 ranks, rank 5 dies mid all-reduce; the 7 revoke, shrink, and reduce exactly",
            recover(8, 1u << 5, M_REVOKE, 1, 0, 0));
    VT_CASE("shrink/abort: 8 ranks, rank 5 dies mid all-reduce; NCCL_SHRINK_ABORT stops it, no revoke",
            recover(8, 1u << 5, M_ABORT, 1, 0, 0));
    VT_CASE("shrink/two failures: ranks 2 and 6 die; lists in either order, sorted in place",
            recover(8, 1u << 2 | 1u << 6, M_REVOKE, 1, 1, 0));
    VT_CASE("shrink/non-blocking: revoke answers ncclInProgress, settles; the child inherits non-blocking",
            recover(8, 1u << 3, M_REVOKE, 0, 0, 0));
    VT_CASE("shrink/non-blocking abort: NCCL_SHRINK_ABORT on non-blocking communicators, two failures",
            recover(8, 1u << 0 | 1u << 7, M_ABORT, 0, 1, 0));
    VT_CASE("shrink/p2p: a send to and a receive from the dead rank stop on revoke, nothing received",
            recover(4, 1u << 1, M_REVOKE, 1, 0, 1));
    VT_CASE("shrink/p2p abort: the same on non-blocking communicators, stopped by NCCL_SHRINK_ABORT",
            recover(4, 1u << 2, M_ABORT, 0, 0, 1));
    VT_CASE("shrink/config: a non-blocking parent, a child configured blocking; a live rank left out",
            nonblocking_config_case());
    VT_CASE("shrink/async error: the parent's error returned by the shrink until a revoke resets it",
            async_error_case());
    VT_CASE("misuse/default shrink with the parent's all-reduce in flight: nccl-shrink-busy on each of 3",
            recover(4, 1u << 3, M_BUSY, 1, 0, 0));
    VT_CASE("misuse/mismatched exclude lists: nccl-mismatch once, every caller fails, no hang",
            misuse_case(4, U_MISMATCH, "nccl-mismatch", 1, NULL, 0));
    VT_CASE("misuse/an excluded rank calls ncclCommShrink: nccl-shrink-excluded, the others' child works",
            misuse_case(4, U_EXCLUDED, "nccl-shrink-excluded", 1, NULL, 0));
    VT_CASE("misuse/collective, send, finalize and a second revoke on a revoked communicator: use-after-revoke",
            misuse_case(2, U_AFTER_REVOKE, "use-after-revoke", 8, NULL, 0));
    VT_CASE("misuse/bad flags and lists: ncclInvalidArgument; rank 9 of 4 and {3, 3} reported; 0x10 reported",
            misuse_case(4, U_FLAGS, "nccl-shrink-list", 6, "nccl-flags", 3));
    VT_CASE("misuse/a shrink before a non-blocking revoke settled: nccl-not-ready, ncclInvalidArgument",
            misuse_case(3, U_NOT_READY, "nccl-not-ready", 2, NULL, 0));
    return vt_summary();
}
