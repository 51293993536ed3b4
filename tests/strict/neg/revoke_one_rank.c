/* Bug: rank 2 dies mid all-reduce and only rank 0 revokes the world. NCCL's
   revoke is local: it stops rank 0's operations, not rank 1's, whose stream
   waits for the dead rank forever (every survivor must revoke). Expected: hang
   (the stand-in's deadline, shortened here; exit status 87), its report saying
   a peer revoked the communicator. */
#include "neg.h"

static void rank(int me)
{
    ncclComm_t c = NULL;
    cudaStream_t st;
    float* d = NULL;
    if (!neg_dead_peer(me, 3, 2, &c, &st, &d)) return;
    if (me == 0) ncclCommRevoke(c, NCCL_REVOKE_DEFAULT);
    cudaStreamSynchronize(st); /* rank 1: the bug, it never revoked */
    printf("rank %d: stream done\n", me);
}

int main(void)
{
    setenv("VS_STRICT_HANG_S", "5", 1);
    neg_raw_launch(3, rank);
    return neg_done("revoke_one_rank");
}
