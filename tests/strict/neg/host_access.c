/* Bug: host code reads device memory (a vs_device_alloc'd pointer
   dereferenced). Expected: host-access, and the process ends with status 86. */
#include "neg.h"

int main(void)
{
    vs_world_desc wd;
    memset(&wd, 0, sizeof wd);
    wd.transport = VS_TRANSPORT_NCCL;
    wd.world_size = 1;
    vs_world* w = NULL;
    if (vs_world_init(&wd, &w)) return 1;
    float* d = (float*)vs_device_alloc(w, 16 * sizeof(float));
    cudaMemset(d, 0, 16 * sizeof(float));
    cudaDeviceSynchronize();
    volatile float x = d[3]; /* the bug */
    printf("host_access: read %g from device memory\n", (double)x);
    vs_device_free(w, d);
    vs_world_free(w);
    return neg_done("host_access");
}
