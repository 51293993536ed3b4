/* The control: every bug of the suite's programs, done right, with its result
   checked. Expected: no violation at all (a checker that always fires fails). */
#include "neg.h"

static int bad;
#define NEG_CHECK(cond, ...) \
    do { \
        if (!(cond)) { \
            printf("control: " __VA_ARGS__); \
            printf("\n"); \
            __atomic_store_n(&bad, 1, __ATOMIC_SEQ_CST); \
        } \
    } while (0)

/* missing-wait (kernel): the mesh's stream waits for the caller's memset */
static void init_after_event(vs_world* w)
{
    vs_mesh* m = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = vs_world_size(w);
    NEG_CHECK(!vs_mesh_init(w, &md, &m), "mesh");
    cudaStream_t a, b;
    cudaEvent_t ev;
    cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    vs_comm_set_stream(vs_mesh_comm(m), (void*)b);
    vs_dtensor t;
    memset(&t, 0, sizeof t);
    t.layout.mesh = m, t.dtype = VS_F32, t.ndim = 1, t.shape[0] = 64;
    t.data = vs_device_alloc(w, 64 * sizeof(float));
    cudaMemsetAsync(t.data, 0, 64 * sizeof(float), a);
    cudaEventRecord(ev, a);
    cudaStreamWaitEvent(b, ev, 0);
    vs_init_desc id;
    memset(&id, 0, sizeof id);
    id.kind = VS_INIT_ONES;
    NEG_CHECK(!vs_init_fill(&t, &id), "vs_init_fill");
    float back[64];
    cudaStreamSynchronize(b);
    cudaMemcpy(back, t.data, sizeof back, cudaMemcpyDeviceToHost);
    for (int i = 0; i < 64; i++) NEG_CHECK(back[i] == 1.0f, "init [%d]: %g", i, back[i]);
    vs_comm_set_stream(vs_mesh_comm(m), NULL);
    vs_device_free(w, t.data);
    cudaEventDestroy(ev);
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
    vs_mesh_free(m);
}

static int rank(vs_world* w, void* arg)
{
    (void)arg;
    int me = vs_world_rank(w), n = vs_world_size(w), dev = 0;
    cudaGetDevice(&dev);
    vs_comm* c = vs_world_comm(w);
    float h[64], back[64];
    for (int i = 0; i < 64; i++) h[i] = (float)(i + me);
    /* host-pointer, host-access: device buffers, copies both ways */
    float* d = (float*)vs_device_alloc(w, sizeof h);
    float* other = (float*)vs_device_alloc(w, sizeof h);
    cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
    NEG_CHECK(!vs_all_reduce(c, d, d, 64, VS_F32, VS_OP_SUM, NULL), "all-reduce");
    cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost);
    for (int i = 0; i < 64; i++) NEG_CHECK(back[i] == (float)(n * i + n * (n - 1) / 2), "sum [%d]: %g", i, back[i]);
    /* cross-device: this rank's own stream, on its own device */
    cudaStream_t mine;
    cudaEvent_t ev;
    cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking);
    cudaEventCreate(&ev);
    NEG_CHECK(cudaEventRecord(ev, mine) == cudaSuccess, "event record");
    vs_comm_set_stream(c, (void*)mine);
    NEG_CHECK(!vs_all_reduce(c, d, d, 64, VS_F32, VS_OP_MAX, NULL), "all-reduce on the rank's stream");
    vs_comm_set_stream(c, NULL);
    /* free-during-collective: the free after the collective is done */
    vs_work* wk = NULL;
    NEG_CHECK(!vs_all_reduce(c, d, d, 64, VS_F32, VS_OP_SUM, &wk) && !vs_wait(wk), "async all-reduce");
    vs_device_free(w, other);
    /* nccl-threads: the side thread's NCCL once the rank's own is done */
    vs_comm* sub = NULL;
    NEG_CHECK(!vs_comm_split(c, me, 0, &sub), "split");
    float* e = (float*)vs_device_alloc(w, 16 * sizeof(float));
    cudaMemset(e, 0, 16 * sizeof(float));
    NEG_CHECK(!vs_all_reduce(c, d, d, 64, VS_F32, VS_OP_SUM, &wk) && !vs_wait(wk), "async all-reduce");
    vs_result sr = neg_side_all_reduce(sub, e, dev);
    NEG_CHECK(!sr, "the side thread's all-reduce: %s", vs_result_string(sr));
    vs_comm_free(sub);
    vs_device_free(w, e);
    vs_device_free(w, d);
    cudaEventDestroy(ev);
    cudaStreamDestroy(mine);
    init_after_event(w);
    return 0;
}

/* missing-wait: B reads what A wrote after an event wait */
static void streams(void)
{
    cudaStream_t a, b;
    cudaEvent_t ev;
    cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    unsigned char *d = NULL, *h = NULL;
    cudaMalloc((void**)&d, 4096);
    cudaMallocHost((void**)&h, 4096);
    for (int round = 0; round < 20; round++) {
        cudaMemsetAsync(d, round, 4096, a);
        cudaEventRecord(ev, a);
        cudaStreamWaitEvent(b, ev, 0);
        cudaMemcpyAsync(h, d, 4096, cudaMemcpyDeviceToHost, b);
        cudaStreamSynchronize(b); /* the host and A's next memset come after B's copy */
        NEG_CHECK(h[100] == round && h[4095] == round, "round %d: read %d", round, h[100]);
    }
    /* disjoint halves of one allocation on two streams at once: no order needed */
    cudaMemsetAsync(d, 1, 2048, a);
    cudaMemsetAsync(d + 2048, 2, 2048, b);
    cudaMemcpyAsync(h, d, 2048, cudaMemcpyDeviceToHost, a);
    cudaMemcpyAsync(h + 2048, d + 2048, 2048, cudaMemcpyDeviceToHost, b);
    cudaDeviceSynchronize();
    NEG_CHECK(h[0] == 1 && h[2047] == 1 && h[2048] == 2 && h[4095] == 2, "halves: %d %d", h[0], h[4095]);
    cudaFree(d);
    cudaFreeHost(h);
    cudaEventDestroy(ev);
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
}

/* use-after-revoke, hang/revoke-is-local: rank 2 dies mid all-reduce; every
   survivor revokes the world, shrinks it, and all-reduces on the shrunk one */
static void recovery_rank(int me)
{
    ncclComm_t c = NULL, nc = NULL;
    cudaStream_t st;
    float* d = NULL;
    if (!neg_dead_peer(me, 3, 2, &c, &st, &d)) return;
    NEG_CHECK(ncclCommRevoke(c, NCCL_REVOKE_DEFAULT) == ncclSuccess, "rank %d: revoke", me);
    int excl[1] = {2};
    NEG_CHECK(ncclCommShrink(c, excl, 1, &nc, NULL, NCCL_SHRINK_DEFAULT) == ncclSuccess, "rank %d: shrink", me);
    float h[64];
    for (int i = 0; i < 64; i++) h[i] = (float)(me + i);
    cudaMemcpyAsync(d, h, sizeof h, cudaMemcpyHostToDevice, st);
    NEG_CHECK(ncclAllReduce(d, d, 64, ncclFloat32, ncclSum, nc, st) == ncclSuccess, "rank %d: all-reduce", me);
    cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, st);
    NEG_CHECK(h[0] == 1 && h[63] == 127, "rank %d: the survivors' sum %g %g, want 1 127", me, h[0], h[63]);
    ncclCommDestroy(nc);
    ncclCommDestroy(c);
    cudaFree(d);
    cudaStreamDestroy(st);
}

int main(void)
{
    streams();
    neg_raw_launch(3, recovery_rank);
    NEG_CHECK(!neg_launch(2, rank, NULL), "launch");
    neg_done("control");
    return bad;
}
