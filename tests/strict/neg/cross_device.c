/* Bug: one stream, created on device 0, used by the rank on device 1 (make
   test-gpu's old bug): an event of device 1 recorded on it, and a collective
   of device 1's communicator enqueued on it. Expected: cross-device. */
#include "neg.h"

static int rank(vs_world* w, void* arg)
{
    cudaStream_t s0 = (cudaStream_t)arg;
    if (vs_world_rank(w) != 1) return 0;
    cudaEvent_t ev;
    cudaEventCreate(&ev);
    cudaError_t e = cudaEventRecord(ev, s0); /* the bug, once */
    printf("rank 1: cudaEventRecord on device 0's stream: %s\n", cudaGetErrorString(e));
    float* d = (float*)vs_device_alloc(w, 64 * sizeof(float));
    cudaMemset(d, 0, 64 * sizeof(float));
    vs_comm* c = vs_world_comm(w);
    vs_comm_set_stream(c, (void*)s0);
    vs_result r = vs_all_reduce(c, d, d, 64, VS_F32, VS_OP_SUM, NULL); /* twice */
    printf("rank 1: vs_all_reduce on device 0's stream: %s\n", vs_result_string(r));
    vs_comm_set_stream(c, NULL);
    vs_device_free(w, d);
    cudaEventDestroy(ev);
    return 0;
}

int main(void)
{
    cudaSetDevice(0);
    cudaStream_t s0;
    cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking);
    neg_launch(2, rank, (void*)s0);
    cudaStreamDestroy(s0);
    return neg_done("cross_device");
}
