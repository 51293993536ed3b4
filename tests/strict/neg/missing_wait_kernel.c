/* Bug: the caller zeroes a tensor on its stream A, then vs_init_fill runs its
   kernel (vs_mk_init) on the mesh's stream B, with no event wait between:
   the kernel's writes race the memset. Expected: missing-wait (naming the
   kernel: the check follows kernel arguments too). */
#include "neg.h"

static int rank(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh* m = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = 1;
    if (vs_mesh_init(w, &md, &m)) return 1;
    cudaStream_t a, b;
    cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
    vs_comm_set_stream(vs_mesh_comm(m), (void*)b);
    vs_dtensor t;
    memset(&t, 0, sizeof t);
    t.layout.mesh = m, t.dtype = VS_F32, t.ndim = 1, t.shape[0] = 64;
    t.data = vs_device_alloc(w, 64 * sizeof(float));
    cudaMemsetAsync(t.data, 0, 64 * sizeof(float), a); /* A writes */
    vs_init_desc id;
    memset(&id, 0, sizeof id);
    id.kind = VS_INIT_ONES;
    vs_result r = vs_init_fill(&t, &id); /* B's kernel writes: the bug */
    printf("vs_init_fill: %s\n", vs_result_string(r));
    cudaStreamSynchronize(a);
    vs_comm_set_stream(vs_mesh_comm(m), NULL);
    vs_device_free(w, t.data);
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
    vs_mesh_free(m);
    return 0;
}

int main(void)
{
    neg_launch(1, rank, NULL);
    return neg_done("missing_wait_kernel");
}
