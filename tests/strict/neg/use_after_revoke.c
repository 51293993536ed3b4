/* Bug: rank 2 dies mid all-reduce; the survivors revoke the world and shrink it,
   then all-reduce on the revoked world instead of the shrunk communicator (a
   recovery that misses one of its communicators; NCCL refuses the call with
   ncclInvalidUsage). Expected: use-after-revoke. */
#include "neg.h"

static void rank(int me)
{
    ncclComm_t c = NULL, nc = NULL;
    cudaStream_t st;
    float* d = NULL;
    if (!neg_dead_peer(me, 3, 2, &c, &st, &d)) return;
    ncclCommRevoke(c, NCCL_REVOKE_DEFAULT);
    int excl[1] = {2};
    ncclCommShrink(c, excl, 1, &nc, NULL, NCCL_SHRINK_DEFAULT);
    ncclResult_t r = ncclAllReduce(d, d, 64, ncclFloat32, ncclSum, c, st); /* the bug: c, not nc */
    printf("rank %d: %s\n", me, ncclGetErrorString(r));
    cudaStreamSynchronize(st);
    ncclCommDestroy(nc);
    ncclCommDestroy(c);
    cudaFree(d);
    cudaStreamDestroy(st);
}

int main(void)
{
    neg_raw_launch(3, rank);
    return neg_done("use_after_revoke");
}
