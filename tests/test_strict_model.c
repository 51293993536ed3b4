/* test_strict_model.c - what the strict stand-in's clock (tests/strict/
   vs_strict_clock.h) shows about vescale's own device paths (make test:
   build/test_strict_model, no GPU; issue 35, section 2). Each bound is checked
   on the library and failed on purpose by a control that breaks the property
   it measures, so a pass means the property holds, not that the test is blind.

   - DDP overlaps (vescale_ddp.h, ZeRO 0, 1 and 2; 2 thread ranks on two
     simulated H100 nodes): 16 layers of 1024 x 1024 f32 weights, a bucket a
     layer, whose backward kernel costs what its bucket's reduction costs on
     the spec (all-reduce, or reduce-scatter) and whose forward kernel half
     that (ZeRO 0) or what its all-gather costs (ZeRO 1 and 2). The steady
     step (the period of the device's last end between two readings, 2 steps
     apart, after 2 warm-up steps) <= 1.10 x max(compute busy, communication
     busy). Controls that must fail it: the reductions deferred to
     vs_ddp_finish_grad_sync (no_overlap; ZeRO-2 with as many staging buffers
     as buckets, since with fewer it reduces early by design), the DP
     communicator on the compute stream (vs_comm_set_stream), and a host wait
     for each bucket's reduction.
   - The pipeline engine is as good as its simulator (vescale_pipe.h): every
     vs_pipe_kind on 2 stages, a unit a chunk whose forward, input-backward
     and weight-backward kernels have declared costs, activations whose send
     costs the spec's p2p time; the device run's makespan (every rank's
     device, the second run) within 5% of vs_pipe_simulate fed the same unit
     costs and that p2p time. The control runs each stage's sends on its
     compute stream (a test-only change of the engine's links): it must miss.
   - Host-bound detection: a step of many tiny kernels, whose host calls take
     longer than their GPU work, is reported host-bound
     (vs_strict_clock_host_bound), and a step of large kernels is not. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vescale_ddp.h"
#include "vescale_pipe.h"
#include "vs_test.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "strict/vs_strict.h"

static vs_strict_spec S; /* the H100's, a GPU a node (two ranks: two nodes, the 50 GB/s NIC between) */

/* ---- the test's kernels, each with its cost declared -------------------------------------
   mdl_fwd(w, act, n, flops): act[i] += w[i] for i < n (a layer's forward)
   mdl_bwd(g, n, flops, seed): g[i] = a value of i and seed (a layer's weight gradient)
   mdl_tiny(x): x[0] += 1 (a kernel with next to no work)
   Costs: flops at bf16 peak, and the bytes they touch. */

static void k_fwd(void** a, dim3 g, dim3 b)
{
    (void)g, (void)b;
    const float* w = *(const float**)a[0];
    float* act = *(float**)a[1];
    long long n = *(long long*)a[2];
    for (long long i = 0; i < n; i++) act[i] += w[i];
}
static void k_bwd(void** a, dim3 g, dim3 b)
{
    (void)g, (void)b;
    float* gr = *(float**)a[0];
    long long n = *(long long*)a[1];
    int seed = *(int*)a[3];
    for (long long i = 0; i < n; i++) gr[i] = (float)((i * 7 + seed) % 13) * 0.01f - 0.06f;
}
static void k_tiny(void** a, dim3 g, dim3 b)
{
    (void)g, (void)b;
    (*(float**)a[0])[0] += 1;
}
static void r_fwd(void** a, dim3 g, size_t* off, size_t* n)
{
    (void)g;
    off[0] = off[1] = 0, n[0] = n[1] = (size_t)*(long long*)a[2] * sizeof(float);
}
static void r_bwd(void** a, dim3 g, size_t* off, size_t* n)
{
    (void)g;
    off[0] = 0, n[0] = (size_t)*(long long*)a[1] * sizeof(float);
}
static void r_tiny(void** a, dim3 g, size_t* off, size_t* n)
{
    (void)a, (void)g;
    off[0] = 0, n[0] = sizeof(float);
}
static void c_fwd(void** a, dim3 g, dim3 b, vs_strict_kcost* k)
{
    (void)g, (void)b;
    k->flops = (double)*(long long*)a[3], k->bytes = 3.0 * sizeof(float) * (double)*(long long*)a[2], k->dtype = VS_STRICT_BF16;
}
static void c_bwd(void** a, dim3 g, dim3 b, vs_strict_kcost* k)
{
    (void)g, (void)b;
    k->flops = (double)*(long long*)a[2], k->bytes = sizeof(float) * (double)*(long long*)a[1], k->dtype = VS_STRICT_BF16;
}
static void c_tiny(void** a, dim3 g, dim3 b, vs_strict_kcost* k)
{
    (void)a, (void)g, (void)b;
    k->flops = 64, k->bytes = 8, k->dtype = VS_STRICT_F32;
}
static const st_ksig ksigs[] = {{"mdl_fwd", 4, {ST_P, ST_P, ST_LL, ST_LL}, 3u, k_fwd, 2u, r_fwd},
                                {"mdl_bwd", 4, {ST_P, ST_LL, ST_LL, ST_I}, 1u, k_bwd, 1u, r_bwd},
                                {"mdl_tiny", 1, {ST_P}, 1u, k_tiny, 1u, r_tiny},
                                {NULL, 0, {0}, 0, NULL, 0, NULL}};
static cudaKernel_t KFWD, KBWD, KTINY;
static const dim3 ONE = {1, 1, 1};

static void kernels_load(void)
{
    static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n";
    cudaLibrary_t lib;
    vs_strict_add_kernels(ksigs);
    vs_strict_kernel_cost("mdl_fwd", c_fwd);
    vs_strict_kernel_cost("mdl_bwd", c_bwd);
    vs_strict_kernel_cost("mdl_tiny", c_tiny);
    VT_CHECK(cudaLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0) == cudaSuccess, "load the test's library");
    VT_CHECK(cudaLibraryGetKernel(&KFWD, lib, "mdl_fwd") == cudaSuccess, "mdl_fwd");
    VT_CHECK(cudaLibraryGetKernel(&KBWD, lib, "mdl_bwd") == cudaSuccess, "mdl_bwd");
    VT_CHECK(cudaLibraryGetKernel(&KTINY, lib, "mdl_tiny") == cudaSuccess, "mdl_tiny");
}

/* the flops at bf16 peak that make a kernel of `bytes` touched cost `seconds` in all */
static long long flops_for(double seconds)
{
    double s = seconds - S.launch_s;
    return (long long)(s > 0 ? s * S.flops_bf16 : 0);
}

static cudaError_t launch_fwd(const float* w, float* act, long long n, long long flops, cudaStream_t st)
{
    void* args[4] = {(void*)&w, (void*)&act, &n, &flops};
    return cudaLaunchKernel((const void*)KFWD, ONE, ONE, args, 0, st);
}
static cudaError_t launch_bwd(float* g, long long n, long long flops, int seed, cudaStream_t st)
{
    void* args[4] = {(void*)&g, &n, &flops, &seed};
    return cudaLaunchKernel((const void*)KBWD, ONE, ONE, args, 0, st);
}

#define CK(x)                                                                                                          \
    do {                                                                                                               \
        vs_result r_ = (x);                                                                                            \
        if (r_) {                                                                                                      \
            VT_CHECK(r_ == VS_OK, "%s: %s", #x, vs_last_error());                                                      \
            return 1;                                                                                                  \
        }                                                                                                              \
    } while (0)

/* ---- DDP ------------------------------------------------------------------------------------- */

enum { D_OVERLAP, D_NO_OVERLAP, D_COMPUTE_STREAM, D_HOST_WAIT, D_NCTL };
static const char* const dctl_name[] = {"DDP", "no_overlap", "reductions on the compute stream",
                                        "a host wait per bucket"};
enum { DL = 16, DWARM = 2, DSTEPS = 3 };
#define DN ((long long)1024 * 1024) /* a layer's weights */

typedef struct djob {
    vs_zero_stage zero;
    int ctl;
    pthread_barrier_t bar;
    double step[2], compute[2], comm[2]; /* per rank, per steady step */
} djob;

static int ddp_rank(vs_world* w, void* arg)
{
    djob* J = (djob*)arg;
    int me = vs_world_rank(w), dev = 0;
    cudaGetDevice(&dev);
    cudaStream_t st;
    if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess) CK(VS_ERR_BACKEND);
    vs_mesh* mesh = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = vs_world_size(w);
    CK(vs_mesh_init(w, &md, &mesh));
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = mesh, dd.zero = J->zero, dd.stream = (void*)st;
    dd.bucket_bytes = DN * (long long)sizeof(float); /* a bucket a layer */
    dd.optim.kind = VS_OPTIM_ADAMW;
    dd.no_overlap = J->ctl == D_NO_OVERLAP;
    if (J->ctl == D_NO_OVERLAP && J->zero == VS_ZERO_2) dd.zero2_buffers = DL; /* (else it reduces when out of them) */
    vs_ddp* d = NULL;
    CK(vs_ddp_init(&dd, &d));
    for (int i = 0; i < DL; i++) {
        vs_ddp_param_desc pd;
        memset(&pd, 0, sizeof pd);
        char name[16];
        snprintf(name, sizeof name, "l%d.w", i);
        pd.name = name, pd.dtype = VS_F32, pd.ndim = 2, pd.shape[0] = pd.shape[1] = 1024;
        CK(vs_ddp_add_param(d, &pd, NULL));
    }
    CK(vs_ddp_finalize(d));
    if (J->ctl == D_COMPUTE_STREAM) CK(vs_comm_set_stream(vs_mesh_comm(d->dp), (void*)st));
    /* the costs: backward = the bucket's reduction, forward = half of it (ZeRO 0: the
       forward has no communication to hide) or the bucket's all-gather */
    double bytes = (double)DN * sizeof(float);
    double red = vs_strict_cost_nccl(&S, J->zero == VS_ZERO_0 ? VS_STRICT_ALLREDUCE : VS_STRICT_REDSCAT, 2, 1, bytes);
    double fwd = J->zero == VS_ZERO_0 ? red / 2 : vs_strict_cost_nccl(&S, VS_STRICT_ALLGATHER, 2, 1, bytes);
    long long fb = flops_for(red), ff = flops_for(fwd);
    float* act = (float*)vs_device_alloc(w, (size_t)DN * sizeof(float));
    if (!act) CK(VS_ERR_NOMEM);
    cudaMemsetAsync(act, 0, (size_t)DN * sizeof(float), st);
    vs_strict_clock_stats a, b;
    memset(&a, 0, sizeof a);
    for (int s = 0; s < DWARM + DSTEPS; s++) {
        if (s == DWARM) { /* every rank's work of the warm-up enqueued, then forgotten */
            pthread_barrier_wait(&J->bar);
            vs_strict_clock_reset(dev);
        }
        for (int i = 0; i < DL; i++) {
            const float* p = (const float*)vs_ddp_param(d, i);
            if (!p || launch_fwd(p, act, DN, ff, st) != cudaSuccess) CK(VS_ERR_BACKEND);
        }
        CK(vs_ddp_zero_grad(d));
        for (int i = DL - 1; i >= 0; i--) {
            float* g = (float*)vs_ddp_grad(d, i);
            if (!g || launch_bwd(g, DN, fb, me + i, st) != cudaSuccess) CK(VS_ERR_BACKEND);
            CK(vs_ddp_grad_ready(d, i));
            if (J->ctl == D_HOST_WAIT && cudaStreamSynchronize((cudaStream_t)vs_comm_stream(vs_mesh_comm(d->dp))))
                CK(VS_ERR_BACKEND);
        }
        CK(vs_ddp_finish_grad_sync(d));
        CK(vs_sync_stream(vs_mesh_comm(mesh), st)); /* the step's one host wait (its loss) */
        CK(vs_ddp_step(d, 1e-3));
        /* readings a whole number of steps apart, each when the device's work is
           done (no host wait: the timeline is as if not read) */
        if (s == DWARM) a = vs_strict_clock_device(dev);
        if (s == DWARM + DSTEPS - 1) b = vs_strict_clock_device(dev);
    }
    int k = DSTEPS - 1;
    J->step[me] = (b.last - a.last) / k, J->compute[me] = (b.compute - a.compute) / k, J->comm[me] = (b.comm - a.comm) / k;
    CK(vs_sync_stream(vs_mesh_comm(mesh), st));
    vs_device_free(w, act);
    CK(vs_ddp_free(d));
    CK(vs_mesh_free(mesh));
    cudaStreamDestroy(st);
    return 0;
}

/* The steady step over max(compute, comm) of the worse rank; -1 when the run failed. */
static double ddp_ratio(vs_zero_stage zero, int ctl)
{
    djob J;
    memset(&J, 0, sizeof J);
    J.zero = zero, J.ctl = ctl;
    pthread_barrier_init(&J.bar, NULL, 2);
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = 2, ld.transport = VS_TRANSPORT_NCCL, ld.timeout_s = 120;
    vs_result r = vs_launch_ex(&ld, ddp_rank, &J);
    pthread_barrier_destroy(&J.bar);
    VT_CHECK(r == VS_OK, "ZeRO-%d, %s: %s", (int)zero, dctl_name[ctl], vs_last_error());
    if (r) return -1;
    double worst = 0;
    for (int q = 0; q < 2; q++) {
        double m = J.compute[q] > J.comm[q] ? J.compute[q] : J.comm[q], x = m > 0 ? J.step[q] / m : 1e9;
        printf("#   ZeRO-%d %-34s rank %d: step %8.1f us, compute %8.1f us, comm %8.1f us: %.3f x max\n", (int)zero,
               dctl_name[ctl], q, J.step[q] * 1e6, J.compute[q] * 1e6, J.comm[q] * 1e6, x);
        if (x > worst) worst = x;
    }
    return worst;
}

static void case_ddp(vs_zero_stage zero)
{
    double x = ddp_ratio(zero, D_OVERLAP);
    VT_CHECK(x > 0 && x <= 1.10, "ZeRO-%d: the steady step is %.3f x max(compute, comm), want <= 1.10", (int)zero, x);
    for (int c = D_NO_OVERLAP; c < D_NCTL; c++) {
        double y = ddp_ratio(zero, c);
        VT_CHECK(y > 1.10, "ZeRO-%d control (%s): %.3f x max(compute, comm), want > 1.10: the test does not see "
                 "overlap", (int)zero, dctl_name[c], y);
    }
}

int main(void)
{
    setenv("VS_STRICT_DEVICES", "8", 1);
    VT_CHECK(vs_strict_spec_builtin("h100", &S) == 0, "h100");
    S.gpus_per_node = 1;
    snprintf(S.name, sizeof S.name, "h100, 1 a node");
    vs_strict_clock_set_spec(&S);
    kernels_load();
    VT_CASE("model/DDP ZeRO-0 overlaps its all-reduces with the backward (step <= 1.10 x max(compute, comm)); "
            "no_overlap, the compute stream and a host wait a bucket miss it",
            case_ddp(VS_ZERO_0));
    VT_CASE("model/DDP ZeRO-1 overlaps reduce-scatters with the backward and all-gathers with the forward; "
            "the controls miss it",
            case_ddp(VS_ZERO_1));
    VT_CASE("model/DDP ZeRO-2 (2 staging buffers) overlaps as ZeRO-1; the controls miss it", case_ddp(VS_ZERO_2));
    VT_CASE("strict/no violations", VT_CHECK(vs_strict_violations() == 0, "%ld violations, the first: %s",
                                             vs_strict_violations(), vs_strict_first_violation()));
    return vt_summary();
}
