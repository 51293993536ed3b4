/* probe.c - one-GPU checks of the review's NCCL findings (tests/gpu/run_probe.sh).
   argv[1] picks one: ckpt (save + load of a device tensor on an NCCL mesh),
   ckpt_async, submesh (vs_mesh_init on a split communicator). Each prints
   PROBE <name> OK / FAIL <message>; a crash is seen by the script. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vescale_ckpt.h"
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char* which;

#define P_OK(x) do { vs_result r_ = (x); if (r_ != VS_OK) { printf("PROBE %s FAIL %s: %d %s\n", which, #x, (int)r_, vs_last_error()); fflush(stdout); return 1; } } while (0)

static int ckpt_rank(vs_world* w, int async)
{
    vs_mesh* m = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = 1;
    P_OK(vs_mesh_init(w, &md, &m));
    vs_ckpt* ck = NULL;
    vs_ckpt_desc cd;
    memset(&cd, 0, sizeof cd);
    cd.mesh = m;
    P_OK(vs_ckpt_init(&cd, &ck));
    const int N = 4096;
    float* h = (float*)malloc(N * 4);
    for (int i = 0; i < N; i++) h[i] = (float)i * 0.25f - 3.0f;
    void* d = vs_device_alloc(w, N * 4);
    void* d2 = vs_device_alloc(w, N * 4);
    cudaMemcpy(d, h, N * 4, cudaMemcpyHostToDevice);
    cudaMemset(d2, 0, N * 4);
    vs_ckpt_entry e;
    memset(&e, 0, sizeof e);
    e.name = "w";
    e.t.dtype = VS_F32;
    e.t.ndim = 1;
    e.t.shape[0] = N;
    e.t.layout.mesh = m;
    e.t.layout.p[0] = vs_replicate();
    e.t.data = d;
    e.device = 1;
    if (system("rm -rf /tmp/vs_probe_ck")) return 1;
    vs_ckpt_save_opts so;
    memset(&so, 0, sizeof so);
    so.async = async;
    P_OK(vs_ckpt_save(ck, "/tmp/vs_probe_ck", &e, 1, &so));
    if (async) P_OK(vs_ckpt_wait(ck));
    e.t.data = d2;
    int loaded = 0;
    P_OK(vs_ckpt_load(ck, "/tmp/vs_probe_ck", &e, 1, &loaded));
    float* h2 = (float*)calloc(N, 4);
    cudaMemcpy(h2, d2, N * 4, cudaMemcpyDeviceToHost);
    int bad = memcmp(h, h2, N * 4) != 0 || !loaded;
    printf("PROBE %s %s (loaded %d, cuda %s)\n", which, bad ? "FAIL values differ" : "OK", loaded, cudaGetErrorString(cudaGetLastError()));
    vs_ckpt_free(ck);
    vs_device_free(w, d);
    vs_device_free(w, d2);
    vs_mesh_free(m);
    free(h), free(h2);
    return bad;
}

static int submesh_rank(vs_world* w)
{
    vs_comm* sub = NULL;
    P_OK(vs_comm_split(vs_world_comm(w), 0, 0, &sub));
    vs_mesh* m = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = 1;
    md.comm = sub;
    P_OK(vs_mesh_init(w, &md, &m));
    printf("PROBE %s OK (cuda %s)\n", which, cudaGetErrorString(cudaGetLastError()));
    vs_mesh_free(m);
    vs_comm_free(sub);
    return 0;
}

static int rank_fn(vs_world* w, void* arg)
{
    (void)arg;
    if (!strcmp(which, "ckpt")) return ckpt_rank(w, 0);
    if (!strcmp(which, "ckpt_async")) return ckpt_rank(w, 1);
    if (!strcmp(which, "submesh")) return submesh_rank(w);
    return 1;
}

int main(int argc, char** argv)
{
    which = argc > 1 ? argv[1] : "ckpt";
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = 1;
    d.transport = VS_TRANSPORT_NCCL;
    d.timeout_s = 30;
    vs_result r = vs_launch_ex(&d, rank_fn, NULL);
    printf("PROBE %s launch -> %d %s\n", which, (int)r, r ? vs_last_error() : "");
    return r != VS_OK;
}
