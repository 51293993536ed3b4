/* test_strict_clock.c - the strict stand-in's virtual time (tests/strict/
   vs_strict_clock.h; make test: build/test_strict_clock, no GPU): the spec
   (built-ins, the file form and its errors), each cost formula against values
   worked by hand, then timelines on simulated H100s whose every time the test
   works out again from the spec's numbers: one kernel, two streams
   overlapping, an event wait, host syncs and queries, the legacy stream's
   implicit wait, copies, all-reduces of 2 and 8 thread ranks on a node and of
   2 and 16 across two nodes, a collective whose last rank comes late, the
   communication an all-reduce leaves exposed when compute hides half of it
   (and all of it when it runs on the compute stream), and the Chrome trace.
   Kernels declared in the vocabulary (vescale_ddp.h's AdamW and sum of squares,
   vescale.h's tied-gradient add, examples/gpt_kernels.h's matmul) cost what
   their declarations state, checked against the formulas worked out here.
   Times are compared to a picosecond (the formulas in another order of
   additions differ by rounding only). */
#define VESCALE_IMPLEMENTATION
#include "vescale.h"
#include "examples/gpt_kernels.h"
#include "vs_test.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "strict/vs_strict.h"

#define TOL 1e-12 /* seconds */
#define NEAR(a, b) ((a) - (b) < TOL && (b) - (a) < TOL)
#define CHECK_T(got, want, what)                                                                                     \
    VT_CHECK(NEAR(got, want), "%s: %.9f us, want %.9f us", what, (double)(got) * 1e6, (double)(want) * 1e6)

static vs_strict_spec S; /* the H100's, as the timelines run */
static char trace_path[64];

/* ---- the test's kernels: clk_k(buf, flops, bytes, dtype) states its cost; clk_plain(buf)
   and clk_noptr(n) take the stand-in's defaults ---------------------------------------- */

static void k_none(void** a, dim3 g, dim3 b) { (void)a, (void)g, (void)b; }
static void k_range(void** a, dim3 g, size_t* off, size_t* n)
{
    (void)a, (void)g, (void)off;
    n[0] = 4;
}
static void k_cost(void** a, dim3 g, dim3 b, vs_strict_kcost* k)
{
    (void)g, (void)b;
    k->flops = (double)*(long long*)a[1], k->bytes = (double)*(long long*)a[2], k->dtype = *(int*)a[3];
}
static const st_ksig ksigs[] = {{"clk_k", 4, {ST_P, ST_LL, ST_LL, ST_I}, 1u, k_none, 1u, k_range},
                                {"clk_plain", 1, {ST_P}, 1u, k_none, 1u, NULL},
                                {"clk_noptr", 1, {ST_LL}, 0u, k_none, 0u, NULL},
                                {NULL, 0, {0}, 0, NULL, 0, NULL}};
static cudaKernel_t KK, KPLAIN, KNOPTR;
static const dim3 ONE = {1, 1, 1};

static void kernels_load(void)
{
    static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n";
    cudaLibrary_t lib;
    vs_strict_add_kernels(ksigs);
    vs_strict_kernel_cost("clk_k", k_cost);
    VT_CHECK(cudaLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0) == cudaSuccess, "load the test's library");
    VT_CHECK(cudaLibraryGetKernel(&KK, lib, "clk_k") == cudaSuccess, "clk_k");
    VT_CHECK(cudaLibraryGetKernel(&KPLAIN, lib, "clk_plain") == cudaSuccess, "clk_plain");
    VT_CHECK(cudaLibraryGetKernel(&KNOPTR, lib, "clk_noptr") == cudaSuccess, "clk_noptr");
}

/* clk_k of flops at dtype's peak and bytes; its cost by the formula, worked here */
static double launch_k(float* buf, double flops, double bytes, int dtype, cudaStream_t st)
{
    long long f = (long long)flops, b = (long long)bytes;
    void* args[4] = {&buf, &f, &b, &dtype};
    VT_CHECK(cudaLaunchKernel((const void*)KK, ONE, ONE, args, 0, st) == cudaSuccess, "launch clk_k");
    double peak = dtype == VS_STRICT_BF16 ? S.flops_bf16 : dtype == VS_STRICT_F16 ? S.flops_f16
                : dtype == VS_STRICT_TF32 ? S.flops_tf32 : S.flops_f32;
    double tc = (double)f / peak, tm = (double)b / S.mem_bw;
    return (tc > tm ? tc : tm) + S.launch_s;
}

/* a fresh start on the current device: its work done, its busy times forgotten;
   the host's time then */
static double fresh(void)
{
    int dev;
    cudaGetDevice(&dev);
    cudaDeviceSynchronize();
    vs_strict_clock_reset(dev);
    return vs_strict_clock_host();
}

/* ---- the spec -------------------------------------------------------------------------- */

static void case_specs(void)
{
    vs_strict_spec h, g, f;
    char err[400];
    VT_CHECK(vs_strict_spec_builtin("h100", &h) == 0 && vs_strict_spec_builtin("h200", &g) == 0, "the built-ins");
    /* the datasheets' figures (sparse ones halved, both directions' halved) */
    VT_CHECK(h.flops_bf16 == 989.5e12 && h.flops_f16 == 989.5e12 && h.flops_tf32 == 494.5e12 && h.flops_f32 == 67e12,
             "H100 peaks");
    VT_CHECK(h.mem_bw == 3.35e12 && g.mem_bw == 4.8e12 && h.nvlink_bw == 450e9 && h.host_bw == 64e9 &&
                 h.net_bw == 50e9 && h.gpus_per_node == 8,
             "H100/H200 bandwidths");
    VT_CHECK(g.flops_bf16 == h.flops_bf16 && !strcmp(g.name, "h200"), "H200: the H100's compute");
    VT_CHECK(vs_strict_spec_builtin("a100", &f) == -1, "an unknown built-in");

    const char* text = "# a round machine\nname = round\nbf16_tflops = 100\nf16_tflops = 100\ntf32_tflops = 50\n"
                       "f32_tflops = 10\nmem_gbps = 1000  # 1 TB/s\nlaunch_us = 1\nhost_gbps = 10\nnvlink_gbps = 100\n"
                       "net_gbps = 10\ngpus_per_node = 4\nnvlink_latency_us = 5\nnet_latency_us = 20\nhost_call_us = 1\n"
                       "host_factor = 0\nkernel_default_us = 3\n";
    VT_CHECK(vs_strict_spec_parse(text, "round.txt", &f, err, sizeof err) == 0, "a full file: %s", err);
    VT_CHECK(f.flops_bf16 == 100e12 && f.mem_bw == 1000e9 && f.launch_s == 1e-6 && f.gpus_per_node == 4 &&
                 f.net_latency_s == 20e-6 && f.kernel_default_s == 3e-6 && !strcmp(f.name, "round"),
             "the file's values in SI units");
    VT_CHECK(vs_strict_spec_parse("base = h200\nmem_gbps = 5000\n", "x", &f, err, sizeof err) == 0 &&
                 f.mem_bw == 5000e9 && f.flops_bf16 == g.flops_bf16 && !strcmp(f.name, "h200"),
             "base = h200 and an override: %s", err);
    static const struct {
        const char* text;
        const char* want;
    } bad[] = {{"base = h100\nlaunch_us = 1\nwarp_gbps = 3\n", "bad.txt:3: unknown key 'warp_gbps'"},
               {"base = h100\nmem_gbps = fast\n", "bad.txt:2: 'fast': not a number"},
               {"base = h100\n\nmem_gbps 5\n", "bad.txt:3: 'mem_gbps 5': want key = value"},
               {"base = h100\nnet_gbps = 0\n", "bad.txt:2: 'net_gbps' must be positive"},
               {"base = h100\nlaunch_us = -1\n", "bad.txt:2: 'launch_us' must not be negative"},
               {"base = h100\ngpus_per_node = 2.5\n", "bad.txt:2: gpus_per_node 2.5: want a whole number >= 1"},
               {"base = b200\n", "bad.txt:1: base 'b200': not h100 or h200"},
               {"bf16_tflops = 1\n", "bad.txt: no 'f16_tflops' (or a 'base = h100|h200' line)"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        VT_CHECK(vs_strict_spec_parse(bad[i].text, "bad.txt", &f, err, sizeof err) == -1 && !strcmp(err, bad[i].want),
                 "bad file %zu: '%s', want '%s'", i, err, bad[i].want);
    }
    VT_CHECK(vs_strict_spec_load("/nonexistent/spec", &f, err, sizeof err) == -1 && strstr(err, "/nonexistent/spec: cannot open"),
             "a missing file: %s", err);
}

/* VS_STRICT_SPEC naming a bad file stops the program at its first CUDA call,
   naming the line (a child process: before this one's stand-in starts). */
static void case_spec_env(void)
{
    char path[] = "/tmp/vs_clock_specXXXXXX";
    int fd = mkstemp(path);
    const char* text = "base = h100\nmem_gbps = lots\n";
    VT_CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write the spec file");
    close(fd);
    int pfd[2];
    VT_CHECK(pipe(pfd) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 2);
        setenv("VS_STRICT_SPEC", path, 1);
        int n;
        cudaGetDeviceCount(&n);
        _exit(0);
    }
    close(pfd[1]);
    char out[600] = {0};
    size_t k = 0;
    for (ssize_t r; k < sizeof out - 1 && (r = read(pfd[0], out + k, sizeof out - 1 - k)) > 0;) k += (size_t)r;
    close(pfd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    char want[200];
    snprintf(want, sizeof want, "vs_strict: VS_STRICT_SPEC=%s: %s:2: 'lots': not a number", path, path);
    VT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 85 && strstr(out, want), "status %d, stderr '%s'", st, out);
    unlink(path);
}

/* ---- the formulas, by hand on a round machine ------------------------------------------ */

static void case_formulas(void)
{
    vs_strict_spec r;
    char err[300];
    const char* text = "bf16_tflops = 100\nf16_tflops = 100\ntf32_tflops = 50\nf32_tflops = 10\nmem_gbps = 1000\n"
                       "launch_us = 1\nhost_gbps = 10\nnvlink_gbps = 100\nnet_gbps = 10\ngpus_per_node = 4\n"
                       "nvlink_latency_us = 5\nnet_latency_us = 20\nhost_call_us = 1\nhost_factor = 0\nkernel_default_us = 3\n";
    VT_CHECK(vs_strict_spec_parse(text, "round", &r, err, sizeof err) == 0, "%s", err);
    struct {
        double got, want;
        const char* what;
    } c[] = {
        /* 1e9 flops at 100 TFLOP/s: 10 us; 1e6 B at 1 TB/s: 1 us; + 1 us launch */
        {vs_strict_cost_kernel(&r, &(vs_strict_kcost){1e9, 1e6, VS_STRICT_BF16, 0}), 11e-6, "compute-bound kernel"},
        /* 1e6 f32 flops: 0.1 us; 8e6 B: 8 us; + 1 */
        {vs_strict_cost_kernel(&r, &(vs_strict_kcost){1e6, 8e6, VS_STRICT_F32, 0}), 9e-6, "memory-bound kernel"},
        {vs_strict_cost_kernel(&r, &(vs_strict_kcost){1e9, 0, VS_STRICT_TF32, 0}), 21e-6, "tf32: 20 us + 1"},
        {vs_strict_cost_kernel(&r, &(vs_strict_kcost){0, 0, VS_STRICT_F32, 3e-6}), 4e-6, "a fixed 3 us + 1"},
        {vs_strict_cost_copy(&r, VS_STRICT_H2D, 1e6, 0), 101e-6, "H2D 1 MB at 10 GB/s: 100 us + 1"},
        {vs_strict_cost_copy(&r, VS_STRICT_D2H, 1e6, 0), 101e-6, "D2H the same"},
        {vs_strict_cost_copy(&r, VS_STRICT_D2D, 1e6, 0), 3e-6, "D2D 1 MB read and written at 1 TB/s: 2 us + 1"},
        {vs_strict_cost_copy(&r, VS_STRICT_MEMSET, 1e6, 0), 2e-6, "memset 1 MB: 1 us + 1"},
        {vs_strict_cost_copy(&r, VS_STRICT_PEER, 1e6, 0), 11e-6, "peer copy over NVLink: 10 us + 1"},
        {vs_strict_cost_copy(&r, VS_STRICT_PEER, 1e6, 1), 101e-6, "peer copy across nodes: 100 us + 1"},
        /* 2 * 7/8 * 1e6 B / 100 GB/s = 17.5 us, + 5 */
        {vs_strict_cost_nccl(&r, VS_STRICT_ALLREDUCE, 8, 0, 1e6), 22.5e-6, "all-reduce of 8 on a node"},
        {vs_strict_cost_nccl(&r, VS_STRICT_ALLREDUCE, 8, 1, 1e6), 195e-6, "all-reduce of 8 across nodes: 175 + 20"},
        {vs_strict_cost_nccl(&r, VS_STRICT_ALLREDUCE, 2, 0, 1e6), 15e-6, "all-reduce of 2: 10 + 5"},
        {vs_strict_cost_nccl(&r, VS_STRICT_ALLREDUCE, 1, 0, 1e6), 5e-6, "all-reduce of 1: the latency"},
        /* 3/4 * 4e6 B (the output) / 100 GB/s = 30 us, + 5 */
        {vs_strict_cost_nccl(&r, VS_STRICT_ALLGATHER, 4, 0, 4e6), 35e-6, "all-gather of 4"},
        {vs_strict_cost_nccl(&r, VS_STRICT_REDSCAT, 4, 0, 4e6), 35e-6, "reduce-scatter of 4"},
        {vs_strict_cost_nccl(&r, VS_STRICT_BCAST, 4, 0, 1e6), 15e-6, "broadcast: 10 + 5"},
        {vs_strict_cost_nccl(&r, VS_STRICT_REDUCE, 4, 0, 1e6), 15e-6, "reduce: 10 + 5"},
        {vs_strict_cost_nccl(&r, VS_STRICT_SEND, 2, 0, 1e6), 15e-6, "send on a node"},
        {vs_strict_cost_nccl(&r, VS_STRICT_RECV, 2, 1, 1e6), 120e-6, "recv across nodes: 100 + 20"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) CHECK_T(c[i].got, c[i].want, c[i].what);
}

/* ---- one device's timelines (the main thread, device 0) ---------------------------------- */

static float *B1, *B2, *B3, *BBIG;
static void *PIN;
#define NB ((size_t)1 << 20)

static void case_one_kernel(void)
{
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    double t0 = fresh(), h = S.host_call_s;
    double c = launch_k(B1, 4e12, 1e9, VS_STRICT_BF16, s); /* 4e12 / 989.5e12 s > 1e9 / 3.35e12 s */
    CHECK_T(vs_strict_clock_host(), t0 + h, "the host after the launch");
    CHECK_T(vs_strict_clock_stream(s), t0 + h + c, "the kernel's end");
    CHECK_T(vs_strict_clock_host(), t0 + h, "the host: reading the stream's clock is no host wait");
    cudaStreamSynchronize(s);
    CHECK_T(vs_strict_clock_host(), t0 + h + c, "the host after cudaStreamSynchronize");
    vs_strict_clock_stats st = vs_strict_clock_device(0);
    CHECK_T(st.compute, c, "compute busy");
    CHECK_T(st.first, t0 + h, "first");
    CHECK_T(st.last, t0 + h + c, "last");
    VT_CHECK(st.comm == 0 && st.copy == 0 && st.exposed_comm == 0 && st.ops == 1, "nothing else (%ld operations)", st.ops);
    /* memory-bound, and the defaults: bytes = the pointer's allocation left, or a fixed time */
    t0 = fresh();
    double cm = launch_k(B1, 1e9, 8e9, VS_STRICT_F32, s);
    void* a1[1] = {&BBIG};
    long long nn = 5;
    void* a2[1] = {&nn};
    cudaLaunchKernel((const void*)KPLAIN, ONE, ONE, a1, 0, s);
    cudaLaunchKernel((const void*)KNOPTR, ONE, ONE, a2, 0, s);
    double cp = S.launch_s + (double)(NB * sizeof(float)) / S.mem_bw, cn = S.launch_s + S.kernel_default_s;
    CHECK_T(cm, 8e9 / S.mem_bw + S.launch_s, "memory-bound: bytes / bandwidth");
    CHECK_T(vs_strict_clock_stream(s), t0 + h + cm + cp + cn, "back to back: the three kernels' costs");
    cudaStreamDestroy(s);
}

/* ---- kernels of the vocabulary: their declared costs --------------------------------- */

/* One launch of kernel k (a launch's arguments a, a grid of `blocks`) on s from
   a fresh start: its time on the stream. */
static double declared_one(cudaKernel_t k, void** a, unsigned blocks, cudaStream_t s)
{
    double t0 = fresh();
    dim3 g = {blocks, 1, 1}, b = {256, 1, 1};
    VT_CHECK(cudaLaunchKernel((const void*)k, g, b, a, 0, s) == cudaSuccess, "launch");
    return vs_strict_clock_stream(s) - t0 - S.host_call_s;
}

static void case_declared(void)
{
    void *kd[16], *kh[2], *kg[GPT_KI_N];
    VT_OK(vs_kernels_get(&_vs_ddp_text, "test_strict_clock", kd));
    VT_OK(vs_kernels_get(&_vs_hl_text, "test_strict_clock", kh));
    vs_strict_add_text(&gpt_kernel_text);
    VT_OK(vs_kernels_get(&gpt_kernel_text, "test_strict_clock", kg));
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    enum { N = 1 << 20 };
    float *p, *g, *m1, *m2;
    double* part;
    cudaMalloc((void**)&p, 4 * N), cudaMalloc((void**)&g, 4 * N), cudaMalloc((void**)&m1, 4 * N);
    cudaMalloc((void**)&m2, 4 * N), cudaMalloc((void**)&part, 64 * sizeof(double));
    cudaMemset(p, 0, 4 * N), cudaMemset(g, 0, 4 * N), cudaMemset(m1, 0, 4 * N), cudaMemset(m2, 0, 4 * N);
    cudaMemset(part, 0, 64 * sizeof(double));

    /* AdamW over n = 2^20 f32 elements: p, g, m1, m2 read and p, m1, m2 written,
       28 bytes an element = 29,360,128 bytes; 14 flops an element (m1 3, m2 4,
       p 7) = 14,680,064 flops. On the H100: 29,360,128 / 3.35e12 s = 8.7642 us
       beats 14,680,064 / 67e12 s = 0.2191 us; plus the 2 us launch. */
    long long n = N;
    float b1 = 0.9f, b2 = 0.999f, o1 = 0.1f, o2 = 0.001f, st = 1e-3f, c2 = 1, eps = 1e-8f, dec = 1;
    void* aa[] = {&p, &g, &m1, &m2, &n, &b1, &b2, &o1, &o2, &st, &c2, &eps, &dec};
    CHECK_T(declared_one((cudaKernel_t)kd[_VS_KI_ADAMW], aa, 4096, s), 29360128.0 / 3.35e12 + 2e-6, "AdamW of 2^20");

    /* The sum of squares of n = 100,000 f32: g read (400,000 bytes) and the 64
       partial sums read and written (1,024 bytes): 401,024 bytes, 2 flops an
       element; 401,024 / 3.35e12 s = 0.1197 us + 2 us. */
    n = 100000;
    void* as[] = {&g, &n, &part};
    CHECK_T(declared_one((cudaKernel_t)kd[_VS_KI_SUMSQ], as, 64, s), 401024.0 / 3.35e12 + 2e-6, "sumsq of 100,000");

    /* vescale.h's tied-gradient add of n = 1,000 bf16: g and s read and
       written, 2 bytes each: 8,000 bytes; 8,000 / 3.35e12 s + 2 us. */
    int t = 1;
    n = 1000;
    void* at[] = {&p, &g, &t, &n};
    CHECK_T(declared_one((cudaKernel_t)kh[0], at, 4, s), 8000.0 / 3.35e12 + 2e-6, "tied add of 1,000 bf16");

    /* gpt_kernels.h's matmul C = A B, 256 x 256 x 256 in f32, no bias, beta 0:
       2 * 256^3 = 33,554,432 flops at the f32 peak, 67e12/s: 0.5008 us,
       beats its bytes, A, B and C once, 3 * 256^2 * 4 = 786,432: 0.2348 us;
       + 2 us: compute-bound. */
    int tc = 0, ta = 0, tb = 0, tbias = 0, tr = 0, beta = 0;
    long long M = 256, K = 256, Nn = 256;
    void* nob = NULL;
    void* am[] = {&p, &tc, &g, &ta, &m1, &tb, &nob, &tbias, &M, &K, &Nn, &tr, &beta};
    CHECK_T(declared_one((cudaKernel_t)kg[GPT_KI_MM], am, 64, s), 33554432.0 / 67e12 + 2e-6, "gpt matmul 256^3");
    cudaStreamSynchronize(s);
    cudaFree(p), cudaFree(g), cudaFree(m1), cudaFree(m2), cudaFree(part);
    cudaStreamDestroy(s);
}

static void case_two_streams(void)
{
    cudaStream_t s1, s2;
    cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
    double t0 = fresh(), h = S.host_call_s;
    double c1 = launch_k(B1, 2e12, 0, VS_STRICT_BF16, s1), c2 = launch_k(B2, 1e12, 0, VS_STRICT_F16, s2);
    double e1 = t0 + h + c1, e2 = t0 + 2 * h + c2;
    CHECK_T(vs_strict_clock_stream(s1), e1, "stream 1's kernel from the first launch");
    CHECK_T(vs_strict_clock_stream(s2), e2, "stream 2's from the second: they overlap");
    vs_strict_clock_stats st = vs_strict_clock_device(0);
    CHECK_T(st.compute, (e1 > e2 ? e1 : e2) - (t0 + h), "compute busy: the union, not the sum");
    cudaDeviceSynchronize();
    CHECK_T(vs_strict_clock_host(), e1 > e2 ? e1 : e2, "cudaDeviceSynchronize: the later end");
    cudaStreamDestroy(s1), cudaStreamDestroy(s2);
}

static void case_event_wait(void)
{
    cudaStream_t s1, s2;
    cudaEvent_t ev;
    cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    double t0 = fresh(), h = S.host_call_s;
    double c1 = launch_k(B1, 3e12, 0, VS_STRICT_BF16, s1);  /* at t0 + h */
    cudaEventRecord(ev, s1);                               /* t0 + 2h: the event at c1's end */
    cudaStreamWaitEvent(s2, ev, 0);                        /* t0 + 3h */
    double c2 = launch_k(B2, 1e12, 0, VS_STRICT_BF16, s2); /* t0 + 4h, runs after the event */
    double e1 = t0 + h + c1;
    CHECK_T(vs_strict_clock_stream(s2), e1 + c2, "the waiting stream's kernel starts at the event");
    cudaEventSynchronize(ev);
    CHECK_T(vs_strict_clock_host(), e1, "cudaEventSynchronize: the host at the event");
    while (cudaStreamQuery(s2) == cudaErrorNotReady) {
    }
    CHECK_T(vs_strict_clock_host(), e1 + c2, "a query that answered cudaSuccess: the host at the stream's end");
    VT_CHECK(cudaEventQuery(ev) == cudaSuccess, "the event done");
    CHECK_T(vs_strict_clock_host(), e1 + c2 + h, "a query of what the host saw done: one call's time");
    /* an event recorded on an idle stream is at the stream's clock or the host's, the later */
    cudaEventRecord(ev, s1);
    cudaStreamWaitEvent(s2, ev, 0);
    double c3 = launch_k(B2, 1e12, 0, VS_STRICT_BF16, s2);
    CHECK_T(vs_strict_clock_stream(s2), e1 + c2 + 4 * h + c3, "after an event of an idle stream: the host's time");
    cudaEventDestroy(ev);
    cudaStreamDestroy(s1), cudaStreamDestroy(s2);
}

/* Blocking streams wait for the legacy stream's work and it for theirs, by
   clock: whether or not that work already ran on the stand-in's threads. */
static void case_legacy(void)
{
    cudaStream_t sb;
    cudaStreamCreate(&sb); /* blocking */
    double t0 = fresh(), h = S.host_call_s;
    double c = launch_k(B1, 3e12, 0, VS_STRICT_BF16, sb);
    usleep(20000); /* the kernel has run on the host: the wait is by clock, not by what is pending */
    cudaMemsetAsync(B3, 0, 4096, 0);
    double m = S.launch_s + 4096 / S.mem_bw;
    CHECK_T(vs_strict_clock_stream(0), t0 + h + c + m, "the legacy stream's memset after the blocking stream's kernel");
    double c2 = launch_k(B2, 1e12, 0, VS_STRICT_BF16, sb);
    CHECK_T(vs_strict_clock_stream(sb), t0 + h + c + m + c2, "and the blocking stream's next kernel after the memset");
    (void)h;
    cudaStreamDestroy(sb);
}

static void case_copies(void)
{
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    double t0 = fresh(), h = S.host_call_s, n = (double)(NB * sizeof(float));
    cudaMemcpyAsync(BBIG, PIN, NB * sizeof(float), cudaMemcpyHostToDevice, s); /* t0 + h */
    double up = S.launch_s + n / S.host_bw;
    CHECK_T(vs_strict_clock_stream(s), t0 + h + up, "H2D: bytes over the host link");
    cudaMemcpyAsync(B3, B2, 4096, cudaMemcpyDeviceToDevice, s); /* t0 + 2h, after the upload */
    double dd = S.launch_s + 2 * 4096 / S.mem_bw;
    CHECK_T(vs_strict_clock_stream(s), t0 + h + up + dd, "D2D: read and written at memory bandwidth");
    /* a blocking copy to pageable memory on the legacy stream (which waits for
       no non-blocking stream): the host returns when it ends */
    static char back[4096];
    cudaMemcpy(back, B1, sizeof back, cudaMemcpyDeviceToHost); /* t0 + 3h */
    double down = S.launch_s + 4096 / S.host_bw;
    CHECK_T(vs_strict_clock_host(), t0 + 3 * h + down, "cudaMemcpy D2H: the host at its end");
    vs_strict_clock_stats st = vs_strict_clock_device(0);
    double a = t0 + h, b = t0 + h + up, c = t0 + 3 * h, d = c + down; /* the copies' busy union */
    CHECK_T(st.copy, (b < c ? (b - a) + (d - c) : (d > b ? d : b) - a), "copy busy: the two transfers");
    CHECK_T(st.compute, dd, "the D2D copy is the device's own work");
    cudaStreamDestroy(s);
}

/* host_factor: the host's own CPU time between two calls, scaled, moves its clock
   (the one figure here that depends on the machine: a lower bound) */
static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static void case_host_factor(void)
{
    vs_strict_spec f = S;
    f.host_factor = 2;
    vs_strict_clock_set_spec(&f);
    double t0 = fresh(), c0 = thread_cpu(), spun;
    volatile double sink = 0;
    while ((spun = thread_cpu() - c0) < 0.01) sink += 1; /* 10 ms of the host's own work */
    cudaMemsetAsync(B3, 0, 16, 0);
    double dt = vs_strict_clock_host() - t0;
    VT_CHECK(dt >= 2 * spun + S.host_call_s && dt < 2 * (spun + 1) + S.host_call_s,
             "the host moved %.3f ms for %.3f ms of its own CPU time at factor 2", dt * 1e3, spun * 1e3);
    vs_strict_clock_set_spec(&S);
    cudaDeviceSynchronize();
    double t1 = vs_strict_clock_host();
    cudaMemsetAsync(B3, 0, 16, 0);
    CHECK_T(vs_strict_clock_host(), t1 + S.host_call_s, "factor 0: the call's cost only");
    (void)sink;
}

/* ---- collectives: thread ranks, one device each ------------------------------------------- */

enum { J_PLAIN, J_LATE, J_OVERLAP, J_SERIAL };
typedef struct job {
    int n, mode, late, devs[16];
    int tagger; /* a tagger names the all-reduce: tag 5 when it sees this job's kind, ranks and devices */
    int as_n, as_cross; /* vs_strict_clock_tag_as of the all-reduce's tag (as_n 0: none) */
    size_t count; /* floats */
    double late_s;
    ncclUniqueId id;
    pthread_barrier_t bar;
    double t0[16];
} job;
typedef struct rarg {
    job* j;
    int rank;
} rarg;

static double ar_cost(const job* j)
{
    int cross = 0, n = j->as_n ? j->as_n : j->n;
    for (int r = 1; r < j->n; r++) cross |= j->devs[r] / S.gpus_per_node != j->devs[0] / S.gpus_per_node;
    if (j->as_n) cross = j->as_cross;
    double bw = cross ? S.net_bw : S.nvlink_bw, lat = cross ? S.net_latency_s : S.nvlink_latency_s;
    return lat + 2.0 * (n - 1) / n * (double)(j->count * sizeof(float)) / bw;
}

static void host_nop(void* p) { (void)p; }

/* Rank r: an all-reduce of j->count floats after what j->mode puts before it;
   every time checked against the formulas, from every rank's start (t0). */
static void* rank_main(void* p)
{
    rarg* a = (rarg*)p;
    job* j = a->j;
    int r = a->rank, n = j->n;
    cudaSetDevice(j->devs[r]);
    ncclComm_t c;
    VT_CHECK(ncclCommInitRank(&c, n, j->id, r) == ncclSuccess, "rank %d: init", r);
    cudaStream_t sc, sm;
    float* buf;
    cudaStreamCreateWithFlags(&sc, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&sm, cudaStreamNonBlocking);
    cudaMalloc((void**)&buf, j->count * sizeof(float));
    cudaMemset(buf, 0, j->count * sizeof(float));
    j->t0[r] = fresh();
    pthread_barrier_wait(&j->bar);
    double h = S.host_call_s, L = S.launch_s, cost = ar_cost(j), ready[16], start = 0, end, exposed = cost;
    int compute_first = j->mode == J_OVERLAP || j->mode == J_SERIAL;
    for (int q = 0; q < n; q++) ready[q] = j->t0[q] + (compute_first ? 2 : 1) * h;
    if (j->mode == J_LATE) ready[j->late] = j->t0[j->late] + h + L + j->late_s; /* its host function's end */
    for (int q = 0; q < n; q++) start = ready[q] > start ? ready[q] : start;
    end = start + cost;
    cudaStream_t ars = j->mode == J_SERIAL ? sc : sm;
    if (j->mode == J_LATE && r == j->late) {
        vs_strict_clock_host_fn_cost(j->late_s);
        cudaLaunchHostFunc(sm, host_nop, NULL);
    }
    if (compute_first) { /* compute on sc that ends half way through the all-reduce if that starts at `start` */
        double x = start + cost / 2 - (j->t0[r] + h) - L;
        vs_strict_clock_host_fn_cost(x);
        cudaLaunchHostFunc(sc, host_nop, NULL);
        double cend = j->t0[r] + h + L + x;
        if (j->mode == J_OVERLAP) { /* the all-reduce less its overlap with the compute */
            exposed = cost - ((cend < end ? cend : end) - start);
            CHECK_T(exposed, cost / 2, "half the all-reduce hidden");
        } else { /* on the compute stream: after it, all exposed */
            start = cend, end = cend + cost;
        }
    }
    if (j->mode == J_OVERLAP) vs_strict_clock_tag(3); /* the thread's tag: its NCCL operations' */
    VT_CHECK(ncclAllReduce(buf, buf, j->count, ncclFloat32, ncclSum, c, ars) == ncclSuccess, "rank %d: all-reduce", r);
    vs_strict_clock_tag(0);
    char what[120];
    snprintf(what, sizeof what, "rank %d of %d (device %d): the all-reduce's end", r, n, j->devs[r]);
    CHECK_T(vs_strict_clock_stream(ars), end, what);
    vs_strict_clock_stats st = vs_strict_clock_device(j->devs[r]);
    snprintf(what, sizeof what, "rank %d of %d: communication busy", r, n);
    CHECK_T(st.comm, cost, what);
    snprintf(what, sizeof what, "rank %d of %d: communication exposed", r, n);
    CHECK_T(st.exposed_comm, exposed, what);
    int tag = j->mode == J_OVERLAP ? 3 : j->tagger ? 5 : 0; /* by tag: all of it under its own */
    for (int g = 0; g < VS_STRICT_CLOCK_TAGS; g++) {
        snprintf(what, sizeof what, "rank %d of %d: communication of tag %d (the all-reduce's: %d)", r, n, g, tag);
        CHECK_T(st.comm_tag[g], g == tag ? cost : 0, what);
        snprintf(what, sizeof what, "rank %d of %d: exposed communication of tag %d (the all-reduce's: %d)", r, n, g, tag);
        CHECK_T(st.exposed_tag[g], g == tag ? exposed : 0, what);
    }
    cudaStreamSynchronize(ars);
    snprintf(what, sizeof what, "rank %d of %d: the host after its sync", r, n);
    CHECK_T(vs_strict_clock_host(), end, what);
    pthread_barrier_wait(&j->bar);
    ncclCommDestroy(c);
    cudaFree(buf);
    cudaStreamDestroy(sc), cudaStreamDestroy(sm);
    vs_strict_clock_host_fn_cost(-1);
    return NULL;
}

/* n ranks on devices first..first+n-1 (or the devs given) */
static void run_job(int n, const int* devs, int mode, int late, double late_s, size_t count)
{
    job j;
    memset(&j, 0, sizeof j);
    j.n = n, j.mode = mode, j.late = late, j.late_s = late_s, j.count = count;
    for (int r = 0; r < n; r++) j.devs[r] = devs ? devs[r] : r;
    ncclGetUniqueId(&j.id);
    pthread_barrier_init(&j.bar, NULL, (unsigned)n);
    pthread_t t[16];
    rarg a[16];
    for (int r = 0; r < n; r++) {
        a[r].j = &j, a[r].rank = r;
        pthread_create(&t[r], NULL, rank_main, &a[r]);
    }
    for (int r = 0; r < n; r++) pthread_join(t[r], NULL);
    pthread_barrier_destroy(&j.bar);
}

#define NAR ((size_t)1 << 18) /* floats: 1 MiB */

static void case_allreduce_node(void)
{
    run_job(2, NULL, J_PLAIN, 0, 0, NAR);
    run_job(8, NULL, J_PLAIN, 0, 0, NAR);
}

static void case_allreduce_nodes(void)
{
    int across[2] = {7, 8}; /* the last GPU of node 0 and the first of node 1 */
    run_job(2, across, J_PLAIN, 0, 0, NAR);
    run_job(16, NULL, J_PLAIN, 0, 0, NAR);
    /* the network's bandwidth, not NVLink's */
    job a, b;
    memset(&a, 0, sizeof a), memset(&b, 0, sizeof b);
    a.n = b.n = 2, a.count = b.count = (size_t)1 << 22, /* 16 MiB: bandwidth-bound */ a.devs[1] = 1, b.devs[0] = 7, b.devs[1] = 8;
    VT_CHECK(ar_cost(&b) > 5 * ar_cost(&a), "across nodes %.1f us, on a node %.1f us", ar_cost(&b) * 1e6, ar_cost(&a) * 1e6);
}

/* the tagger sees the all-reduce's kind, its communicator's devices in rank
   order and the thread's tag (0) */
static job* tag_job;
static int tagger(int kind, int n, const int* devs, int thread_tag, void* user)
{
    const job* j = (const job*)user;
    int ok = j == tag_job && kind == VS_STRICT_ALLREDUCE && n == j->n && thread_tag == 0;
    for (int r = 0; ok && r < n; r++) ok = devs[r] == j->devs[r];
    return ok ? 5 : 7;
}
static void case_tagger(void)
{
    job j;
    memset(&j, 0, sizeof j);
    j.n = 3, j.mode = J_PLAIN, j.tagger = 1, j.count = NAR;
    j.devs[0] = 2, j.devs[1] = 9, j.devs[2] = 4; /* across two nodes, out of order */
    tag_job = &j;
    vs_strict_clock_tagger(tagger, &j);
    ncclGetUniqueId(&j.id);
    pthread_barrier_init(&j.bar, NULL, 3);
    pthread_t t[3];
    rarg a[3];
    for (int r = 0; r < 3; r++) a[r].j = &j, a[r].rank = r, pthread_create(&t[r], NULL, rank_main, &a[r]);
    for (int r = 0; r < 3; r++) pthread_join(t[r], NULL);
    pthread_barrier_destroy(&j.bar);
    vs_strict_clock_tagger(NULL, NULL);
}

/* vs_strict_clock_tag_as: 2 ranks on one node, their all-reduce (tag 3, half
   of it under compute) timed as 32 ranks across nodes: its end, busy and
   exposed time the larger one's (rank_main checks them against ar_cost) */
static void case_tag_as(void)
{
    job j;
    memset(&j, 0, sizeof j);
    j.n = 2, j.mode = J_OVERLAP, j.count = (size_t)1 << 22, j.as_n = 32, j.as_cross = 1;
    j.devs[0] = 0, j.devs[1] = 1;
    job on_node = j;
    on_node.as_n = 0;
    VT_CHECK(ar_cost(&j) > 10 * ar_cost(&on_node), "as 32 across nodes %.1f us, as run %.1f us", ar_cost(&j) * 1e6,
             ar_cost(&on_node) * 1e6);
    vs_strict_clock_tag_as(3, 32, 1);
    vs_strict_clock_tag_as(5, 4, 0); /* another tag's: no effect on tag 3 */
    ncclGetUniqueId(&j.id);
    pthread_barrier_init(&j.bar, NULL, 2);
    pthread_t t[2];
    rarg a[2];
    for (int r = 0; r < 2; r++) a[r].j = &j, a[r].rank = r, pthread_create(&t[r], NULL, rank_main, &a[r]);
    for (int r = 0; r < 2; r++) pthread_join(t[r], NULL);
    pthread_barrier_destroy(&j.bar);
    vs_strict_clock_tag_as(3, 0, 0), vs_strict_clock_tag_as(5, 0, 0);
    run_job(2, NULL, J_OVERLAP, 0, 0, (size_t)1 << 22); /* reset: as run again */
}

static void case_late_rank(void)
{
    run_job(4, NULL, J_LATE, 2, 1e-3, NAR); /* rank 2's stream is busy 1 ms first */
}

static void case_exposed(void)
{
    run_job(2, NULL, J_OVERLAP, 0, 0, (size_t)1 << 22); /* 16 MiB: 70 us on NVLink */
    run_job(2, NULL, J_SERIAL, 0, 0, (size_t)1 << 22);
}

/* ---- the trace ------------------------------------------------------------------------------- */

static void case_trace(void)
{
    vs_strict_clock_trace_close();
    FILE* f = fopen(trace_path, "r");
    VT_CHECK(f != NULL, "the trace %s", trace_path);
    if (!f) return;
    static char text[1 << 22];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    long open = 0, close = 0, x = 0;
    for (size_t i = 0; i < n; i++) open += text[i] == '{', close += text[i] == '}';
    for (const char* p = text; (p = strstr(p, "\"ph\":\"X\"")); p++) x++;
    VT_CHECK(n > 2 && text[0] == '[' && !strcmp(text + n - 3, "\n]\n") && open == close, "a JSON array of objects");
    VT_CHECK(strstr(text, "\"name\":\"process_name\",\"ph\":\"M\",\"pid\":15,\"args\":{\"name\":\"device 15\"}") != NULL,
             "a process per device");
    VT_CHECK(strstr(text, "\"args\":{\"name\":\"stream ") != NULL, "a row per stream");
    VT_CHECK(strstr(text, "{\"name\":\"clk_k\",\"cat\":\"compute\",\"ph\":\"X\",\"pid\":0,") != NULL, "the kernels");
    VT_CHECK(strstr(text, "{\"name\":\"ncclAllReduce\",\"cat\":\"comm\",\"ph\":\"X\",\"pid\":15,") != NULL, "the collectives");
    VT_CHECK(strstr(text, "{\"name\":\"host wait\",\"cat\":\"host\",\"ph\":\"X\",\"pid\":0,\"tid\":0,") != NULL,
             "the host's waits");
    VT_CHECK(x > 50, "%ld operations traced", x);
    unlink(trace_path);
}

int main(void)
{
    VT_CASE("clock/spec: H100 and H200 from the datasheets, the file form, its errors by line", case_specs());
    /* a child process, before this one's stand-in starts (below) */
    VT_CASE("clock/spec: VS_STRICT_SPEC naming a bad file stops at the first call, naming the line", case_spec_env());
    setenv("VS_STRICT_DEVICES", "16", 1);
    snprintf(trace_path, sizeof trace_path, "/tmp/vs_clock_trace_%d.json", (int)getpid());
    setenv("VS_STRICT_TRACE", trace_path, 1);
    VT_CHECK(vs_strict_spec_builtin("h100", &S) == 0, "h100");
    vs_strict_clock_set_spec(&S);
    VT_CHECK(!strcmp(vs_strict_clock_spec().name, "h100"), "the spec in use");
    cudaSetDevice(0);
    cudaMalloc((void**)&B1, 4096), cudaMalloc((void**)&B2, 4096), cudaMalloc((void**)&B3, 4096);
    cudaMalloc((void**)&BBIG, NB * sizeof(float));
    cudaMallocHost(&PIN, NB * sizeof(float));
    cudaMemset(B1, 0, 4096), cudaMemset(B2, 0, 4096), cudaMemset(B3, 0, 4096);
    kernels_load();
    VT_CASE("clock/formulas: kernels, copies, collectives against hand-worked values", case_formulas());
    VT_CASE("clock/one kernel: launch, its end, the host's sync; defaults for kernels without a cost", case_one_kernel());
    VT_CASE("clock/declared kernels: AdamW, sumsq, the tied add and the GPT matmul cost their declarations", case_declared());
    VT_CASE("clock/two streams: two kernels overlap, busy is their union", case_two_streams());
    VT_CASE("clock/event: a stream waits for another's event; event sync and queries move the host", case_event_wait());
    VT_CASE("clock/legacy stream: implicit waits by clock, whatever already ran", case_legacy());
    VT_CASE("clock/copies: H2D, D2D, a blocking D2H", case_copies());
    VT_CASE("clock/host factor: the host's own CPU time, scaled, moves its clock", case_host_factor());
    VT_CASE("clock/all-reduce of 2 and 8 ranks on one node (NVLink)", case_allreduce_node());
    VT_CASE("clock/all-reduce of 2 and 16 ranks across two nodes (the network)", case_allreduce_nodes());
    VT_CASE("clock/a collective whose last rank arrives late starts late on all", case_late_rank());
    VT_CASE("clock/tags: a tagger's tag from the kind and the communicator's devices", case_tagger());
    VT_CASE("clock/tag_as: a tag's collectives timed as 32 ranks across nodes", case_tag_as());
    VT_CASE("clock/exposed communication: half hidden beside compute, all on the compute stream; by the thread's tag",
            case_exposed());
    VT_CASE("clock/the same times with a random delay before every stream operation", {
        st_delay_us = 300; /* the stand-in's threads run in another order; virtual time does not change */
        case_event_wait();
        case_legacy();
        case_late_rank();
        case_exposed();
        st_delay_us = 0;
    });
    VT_CASE("clock/trace: VS_STRICT_TRACE's Chrome trace", case_trace());
    VT_CASE("strict/no violations", VT_CHECK(vs_strict_violations() == 0, "%ld violations, the first: %s",
                                             vs_strict_violations(), vs_strict_first_violation()));
    return vt_summary();
}
