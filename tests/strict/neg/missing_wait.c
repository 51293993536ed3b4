/* Bug: stream B copies out what stream A wrote, with no event wait between
   (both non-blocking, so nothing else orders them). Expected: missing-wait,
   whichever stream runs first (the check is by clock, not by timing). */
#include "neg.h"

int main(void)
{
    cudaStream_t a, b;
    cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
    unsigned char *d = NULL, *h = NULL;
    cudaMalloc((void**)&d, 4096);
    cudaMallocHost((void**)&h, 4096);
    cudaMemsetAsync(d, 7, 4096, a);                          /* A writes */
    cudaMemcpyAsync(h, d, 4096, cudaMemcpyDeviceToHost, b); /* B reads: the bug */
    cudaStreamSynchronize(a);
    cudaStreamSynchronize(b);
    printf("missing_wait: read %d (7 when A happened to run first)\n", h[100]);
    cudaFree(d);
    cudaFreeHost(h);
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
    return neg_done("missing_wait");
}
