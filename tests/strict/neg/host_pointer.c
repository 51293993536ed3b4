/* Bug: a host (malloc) buffer handed to an NCCL collective (NCCL takes only
   GPU-reachable memory). The library refuses it before NCCL sees it
   (VS_ERR_INVALID naming the buffer), so the bug is made the way a trainer with
   its own NCCL calls would make it: ncclAllReduce on the world's communicator.
   Expected: host-pointer. */
#include "neg.h"

static int rank(vs_world* w, void* arg)
{
    (void)arg;
    float* h = (float*)malloc(64 * sizeof(float));
    for (int i = 0; i < 64; i++) h[i] = (float)i;
    vs_comm* c = vs_world_comm(w);
    vs_result r = vs_all_reduce(c, h, h, 64, VS_F32, VS_OP_SUM, NULL);
    printf("rank %d: vs_all_reduce of a host buffer: %s\n", vs_world_rank(w), vs_result_string(r));
    ncclResult_t nr = ncclAllReduce(h, h, 64, ncclFloat32, ncclSum, c->nc, c->stream); // (the library's internals: this TU)
    printf("rank %d: ncclAllReduce of a host buffer: %s\n", vs_world_rank(w), ncclGetErrorString(nr));
    cudaStreamSynchronize(c->stream);
    free(h);
    return 0;
}

int main(void)
{
    neg_launch(2, rank, NULL);
    return neg_done("host_pointer");
}
