/* Bug: a second host thread of rank 0 all-reduces on a split communicator of
   the same device while the rank's own thread has an async all-reduce in
   flight (NCCL: one device's communicators from one thread at a time).
   Expected: nccl-threads. */
#include "neg.h"

static int rank(vs_world* w, void* arg)
{
    (void)arg;
    int me = vs_world_rank(w);
    vs_comm* c = vs_world_comm(w);
    vs_comm* sub = NULL;
    if (vs_comm_split(c, me, 0, &sub)) return 1; /* a communicator of one, on this device */
    float* d = (float*)vs_device_alloc(w, 64 * sizeof(float));
    float* e = (float*)vs_device_alloc(w, 16 * sizeof(float));
    cudaMemset(d, 0, 64 * sizeof(float));
    cudaMemset(e, 0, 16 * sizeof(float));
    if (me == 0) {
        vs_work* wk = NULL;
        vs_result r = vs_all_reduce(c, d, d, 64, VS_F32, VS_OP_SUM, &wk); /* in flight: rank 1 is late */
        int dev = 0;
        cudaGetDevice(&dev);
        vs_result sr = neg_side_all_reduce(sub, e, dev); /* the bug */
        if (!r) r = vs_wait(wk);
        printf("rank 0: %s, the side thread's: %s\n", vs_result_string(r), vs_result_string(sr));
    } else {
        neg_wait_violations(1);
        vs_result r = vs_all_reduce(c, d, d, 64, VS_F32, VS_OP_SUM, NULL);
        printf("rank 1: %s\n", vs_result_string(r));
    }
    vs_comm_free(sub);
    vs_device_free(w, d);
    vs_device_free(w, e);
    return 0;
}

int main(void)
{
    neg_launch(2, rank, NULL);
    return neg_done("nccl_threads");
}
