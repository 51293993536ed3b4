/* tests/strict/neg/neg.h - what the negative suite's programs share: the
   library for NCCL over the strict stand-in, and a launch of n NCCL thread
   ranks (each on its own simulated GPU). Each program has one deliberate GPU
   bug (control.c: none); tests/strict/neg.sh runs them and checks that the
   stand-in names the class ("vs_strict: VIOLATION <class>"). */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../vs_strict.h"

/* n NCCL ranks running fn; its result (a rank's error is part of some bugs). */
static __attribute__((unused)) vs_result neg_launch(int n, vs_rank_fn fn, void* arg)
{
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = n;
    d.transport = VS_TRANSPORT_NCCL;
    d.timeout_s = 30;
    return vs_launch_ex(&d, fn, arg);
}

/* Waits (bounded by the stand-in's hang deadline) until device dev has an NCCL
   operation blocked on its peers: the state a bug needs, reached without sleeps. */
static __attribute__((unused)) void neg_wait_collective_blocked(int dev)
{
    pthread_mutex_lock(&st_mu);
    ST_WAIT_UNTIL(st_nccl_waiting_locked(dev) != NULL, "neg: a collective waiting for its peer");
    pthread_mutex_unlock(&st_mu);
}

/* Waits until the stand-in has reported n violations. */
static __attribute__((unused)) void neg_wait_violations(long n)
{
    pthread_mutex_lock(&st_mu);
    ST_WAIT_UNTIL(__atomic_load_n(&st_nviol, __ATOMIC_SEQ_CST) >= n, "neg: the violation");
    pthread_mutex_unlock(&st_mu);
}

/* A second host thread of this rank (on device dev) all-reduces 16 floats of d
   on comm; its result. */
typedef struct {
    vs_comm* comm;
    float* d;
    int dev;
    vs_result r;
} neg_side_job;

static __attribute__((unused)) void* neg_side(void* arg)
{
    neg_side_job* j = (neg_side_job*)arg;
    cudaSetDevice(j->dev);
    j->r = vs_all_reduce(j->comm, j->d, j->d, 16, VS_F32, VS_OP_SUM, NULL);
    return NULL;
}

static __attribute__((unused)) vs_result neg_side_all_reduce(vs_comm* comm, float* d, int dev)
{
    neg_side_job j = {comm, d, dev, VS_OK};
    pthread_t t;
    pthread_create(&t, NULL, neg_side, &j);
    pthread_join(t, NULL);
    return j.r;
}

/* A raw NCCL job of n plain threads (rank r on device r), each running fn(r). */
static ncclUniqueId neg_id;
typedef struct {
    int rank;
    void (*fn)(int);
} neg_raw_arg;

static void* neg_raw_main(void* p)
{
    neg_raw_arg* a = (neg_raw_arg*)p;
    cudaSetDevice(a->rank);
    a->fn(a->rank);
    return NULL;
}

static __attribute__((unused)) void neg_raw_launch(int n, void (*fn)(int))
{
    pthread_t t[8];
    neg_raw_arg a[8];
    ncclGetUniqueId(&neg_id);
    for (int r = 0; r < n; r++) {
        a[r].rank = r, a[r].fn = fn;
        pthread_create(&t[r], NULL, neg_raw_main, &a[r]);
    }
    for (int r = 0; r < n; r++) pthread_join(t[r], NULL);
}

/* Where the recovery programs start: rank me of n joins the world *c; rank
   `dead` then dies (returns 0: it never calls again), the others enqueue an
   all-reduce of 64 floats of *d on *st, which waits for the dead rank, and
   return 1 once it does. */
static __attribute__((unused)) int neg_dead_peer(int me, int n, int dead, ncclComm_t* c, cudaStream_t* st, float** d)
{
    ncclCommInitRank(c, n, neg_id, me);
    if (me == dead) return 0;
    cudaStreamCreateWithFlags(st, cudaStreamNonBlocking);
    cudaMalloc((void**)d, 64 * sizeof(float));
    cudaMemsetAsync(*d, 0, 64 * sizeof(float), *st);
    ncclAllReduce(*d, *d, 64, ncclFloat32, ncclSum, *c, *st);
    neg_wait_collective_blocked(me);
    return 1;
}

/* The last line of every program. */
static int neg_done(const char* name)
{
    printf("%s: %ld violations\n", name, vs_strict_violations());
    return 0;
}
