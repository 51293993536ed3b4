/* Bug: device memory of device 0 handed to the communicator of device 1.
   Expected: cross-device. */
#include "neg.h"

static int rank(vs_world* w, void* arg)
{
    if (vs_world_rank(w) != 1) return 0;
    vs_result r = vs_all_reduce(vs_world_comm(w), arg, arg, 64, VS_F32, VS_OP_SUM, NULL);
    printf("rank 1: vs_all_reduce of device 0's memory: %s\n", vs_result_string(r));
    return 0;
}

int main(void)
{
    cudaSetDevice(0);
    void* d0 = NULL;
    cudaMalloc(&d0, 64 * sizeof(float));
    cudaMemset(d0, 0, 64 * sizeof(float));
    neg_launch(2, rank, d0);
    cudaFree(d0);
    return neg_done("cross_device_mem");
}
