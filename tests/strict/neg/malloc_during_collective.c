/* Bug: rank 0 allocates device memory while its all-reduce waits for rank 1,
   who calls late: cudaMalloc synchronises the device, so with a peer doing the
   same this is NCCL's documented deadlock (a run finds it only when both meet:
   a hang). Here the peer joins once the stand-in has reported the allocation.
   Expected: malloc-during-collective. */
#include "neg.h"

static int rank(vs_world* w, void* arg)
{
    (void)arg;
    int me = vs_world_rank(w), dev = 0;
    cudaGetDevice(&dev);
    vs_comm* c = vs_world_comm(w);
    float* d = (float*)vs_device_alloc(w, 64 * sizeof(float));
    cudaMemset(d, 0, 64 * sizeof(float));
    if (me == 0) {
        vs_work* wk = NULL;
        vs_result r = vs_all_reduce(c, d, d, 64, VS_F32, VS_OP_SUM, &wk);
        neg_wait_collective_blocked(dev);
        float* more = (float*)vs_device_alloc(w, 64 * sizeof(float)); /* the bug */
        if (!r) r = vs_wait(wk);
        printf("rank 0: %s\n", vs_result_string(r));
        vs_device_free(w, more);
    } else {
        neg_wait_violations(1);
        vs_result r = vs_all_reduce(c, d, d, 64, VS_F32, VS_OP_SUM, NULL);
        printf("rank 1: %s\n", vs_result_string(r));
    }
    vs_device_free(w, d);
    return 0;
}

int main(void)
{
    neg_launch(2, rank, NULL);
    return neg_done("malloc_during_collective");
}
