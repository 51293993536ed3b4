/* Bug: a host (malloc) buffer handed to a collective on an NCCL world
   (NCCL takes only GPU-reachable memory). Expected: host-pointer. */
#include "neg.h"

static int rank(vs_world* w, void* arg)
{
    (void)arg;
    float* h = (float*)malloc(64 * sizeof(float));
    for (int i = 0; i < 64; i++) h[i] = (float)i;
    vs_result r = vs_all_reduce(vs_world_comm(w), h, h, 64, VS_F32, VS_OP_SUM, NULL);
    printf("rank %d: vs_all_reduce of a host buffer: %s\n", vs_world_rank(w), vs_result_string(r));
    free(h);
    return 0;
}

int main(void)
{
    neg_launch(2, rank, NULL);
    return neg_done("host_pointer");
}
