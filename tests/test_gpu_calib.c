/* test_gpu_calib.c - bench/gpu_calib.c's stand-in half (issue 35 §4), at the
   test's small shapes over the strict stand-in in cost-only mode:
   - the table is complete (every class, every GPT kernel, the step) and its
     raw form reads back as written;
   - its modelled times are the clock's formulas, for rows worked by hand
     (a memory-bound kernel, a compute-bound GEMM, a copy, a launch, the host's
     call, a one-rank all-reduce): so the gate holds the stream as intended and
     the stand-in's cudaEventElapsedTime is the clock's;
   - the fit: the set run under a made-up spec, taken as "measured" against the
     H100's, gives back that spec's constants, and its file loads;
   - cudaEventElapsedTime on the stand-in: not ready while the stream is held,
     then the interval; an event made without timing is refused.
   tests/gpu/run.sh runs the same program at the bench's shapes on a GPU. */
#define GPU_CALIB_NO_MAIN
#include "bench/gpu_calib.c"
#include "tests/vs_test.h"
#include "strict/vs_strict.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static vs_strict_spec H100;
static cal_side A; /* the set on the H100 spec, with the step */

#define REL(got, want) (fabs((got) - (want)) <= 1e-4 * fabs(want))
#define CHECK_S(row, want)                                                                                           \
    do {                                                                                                             \
        const cal_row* r_ = cal_find(&A, row);                                                                       \
        VT_CHECK(r_ && REL(r_->s, want), "%s: %.6f us, want %.6f us", row, r_ ? r_->s * 1e6 : -1., (want) * 1e6);    \
    } while (0)

static void case_complete(void)
{
    VT_CHECK(cal_run_all(&CAL_SMALL, 1, &A) == 0, "the set ran");
    int per[CL_N] = {0};
    for (int i = 0; i < A.n; i++) {
        VT_CHECK(A.r[i].s > 0 && A.r[i].reps >= 3, "%s: %g s over %d", A.r[i].name, A.r[i].s, A.r[i].reps);
        per[A.r[i].cls]++;
    }
    for (int c = 0; c < CL_N; c++) VT_CHECK(per[c] > 0, "no row of class %s", cal_class_names[c]);
    VT_CHECK(A.n == 42, "%d rows, want 42", A.n);
    for (int k = 0; k < GPT_KI_N; k++) { /* each of examples/gpt_kernels.h's kernels is a row */
        int found = 0;
        size_t len = strlen(gpt_kernel_decls[k].name);
        for (int i = 0; i < A.n; i++)
            found |= !strncmp(A.r[i].name, gpt_kernel_decls[k].name, len) &&
                     (A.r[i].name[len] == 0 || A.r[i].name[len] == ' ');
        VT_CHECK(found, "no row of %s", gpt_kernel_decls[k].name);
    }
    VT_CHECK(A.step > 0 && A.step_compute > 0 && A.step_compute <= A.step * 1.0001, "the step: %g s, compute %g s",
             A.step, A.step_compute);
    VT_CHECK(A.have_spec && !strcmp(A.spec_name, "h100") && A.spec[SP_MEM] == 3.35e12, "the side's spec");
    /* the raw form reads back */
    char path[64];
    snprintf(path, sizeof path, "/tmp/vs_gpu_calib_%d.txt", (int)getpid());
    FILE* f = fopen(path, "w");
    VT_CHECK(f != NULL, "%s", path);
    if (!f) return;
    cal_write(f, &A, 1);
    fclose(f);
    static cal_side B;
    VT_CHECK(cal_read(path, &B) == 0 && B.complete && B.n == A.n && B.step == A.step && B.have_spec, "read back");
    for (int i = 0; i < A.n && i < B.n; i++)
        VT_CHECK(!strcmp(A.r[i].name, B.r[i].name) && A.r[i].cls == B.r[i].cls && A.r[i].s == B.r[i].s &&
                     A.r[i].flops == B.r[i].flops && A.r[i].bytes == B.r[i].bytes && A.r[i].dtype == B.r[i].dtype,
                 "row %d (%s) read back differs", i, A.r[i].name);
    /* ... and without its end line it is incomplete */
    f = fopen(path, "w");
    cal_write(f, &A, 0);
    fclose(f);
    VT_CHECK(cal_read(path, &B) == 0 && !B.complete, "no end line: incomplete");
    unlink(path);
}

/* H100 (tests/strict/vs_strict_clock.h): f32 67e12 FLOP/s, memory 3.35e12 B/s, launch 2 us,
   host <-> device 64e9 B/s, host call 2 us, NCCL within a node 5 us; the test's shapes: n =
   4 rows x T 32 = 128 tokens, D 64, the square GEMM's side 512, copies of 1 MiB. */
static void case_hand_worked(void)
{
    /* add_rows, f32, y [n, D] += a [n, D] (T = n): flops n D = 8,192; bytes n D x 2 x 4 +
       n D x 4 = 98,304; memory-bound: 98,304 / 3.35e12 = 29.3445 ns, + 2 us */
    CHECK_S("gptk_add_rows residual", 98304 / 3.35e12 + 2e-6);
    /* matmul 512 x 512 x 512, A f32, B bf16, C f32: flops 2 x 512^3 = 268,435,456 at f32's
       67e12: 4.00650 us; bytes 512^2 (4 + 2 + 4) = 2,621,440: 0.78 us; compute-bound, + 2 us */
    CHECK_S("gptk_mm square", 268435456 / 67e12 + 2e-6);
    /* a pinned H2D copy of 1 MiB: 2 us + 1,048,576 / 64e9 = 18.384 us */
    CHECK_S("H2D pinned", 2e-6 + 1048576 / 64e9);
    /* a kernel of one element (vs_k_scale: 1 f32 read and written, 8 bytes): 2 us + 2.4 ps */
    CHECK_S("launch: vs_k_scale 1 element", 2e-6 + 8 / 3.35e12);
    /* the host's time of a launch call: host_call_s */
    CHECK_S("host: cudaLaunchKernel", 2e-6);
    /* an all-reduce of one rank: the ring moves 2 (n - 1) / n = 0 of its bytes: the latency */
    CHECK_S("all-reduce 1 rank large", 5e-6);
}

/* a made-up GPU, run as if measured: the fit must give its constants back */
static const char* FAKE = "base = h100\nname = fake\nmem_gbps = 1000\nf32_tflops = 20\nlaunch_us = 5\n"
                          "host_gbps = 20\nhost_call_us = 4\nnvlink_latency_us = 7\n";
static void case_fit(void)
{
    vs_strict_spec fake;
    char err[200];
    VT_CHECK(vs_strict_spec_parse(FAKE, "fake", &fake, err, sizeof err) == 0, "%s", err);
    vs_strict_clock_set_spec(&fake);
    static cal_side M;
    VT_CHECK(cal_run_all(&CAL_SMALL, 0, &M) == 0, "the set on the fake spec");
    vs_strict_clock_set_spec(&H100);
    snprintf(M.side, sizeof M.side, "measured");
    char path[64], spath[64];
    snprintf(path, sizeof path, "/tmp/vs_gpu_calib_cmp_%d.txt", (int)getpid());
    snprintf(spath, sizeof spath, "/tmp/vs_gpu_calib_spec_%d.txt", (int)getpid());
    FILE* o = fopen(path, "w+");
    VT_CHECK(o != NULL, "%s", path);
    if (!o) return;
    cal_fit F;
    cal_compare(o, &A, &M, &F);
    /* the table names every class and the step (the step was not run on the fake side: '-') */
    char text[1 << 14];
    rewind(o);
    size_t len = fread(text, 1, sizeof text - 1, o);
    text[len] = 0;
    fclose(o);
    unlink(path);
    for (int c = 0; c < CL_N; c++) {
        char want[64];
        snprintf(want, sizeof want, "| %s | ", cal_class_names[c]);
        VT_CHECK(strstr(text, want) != NULL, "the table has no '%s'", want);
    }
    VT_CHECK(strstr(text, "| step (the example GPT, 1 GPU) | 0 | - |") != NULL, "the step's line");
    VT_CHECK(strstr(text, "every row within [0.67, 1.5] of the fitted formulas") != NULL, "the fit explains every row");
    /* GEMM's ratio: the square GEMM at 20 against 67 TFLOP/s, the others memory-bound at 1000 against
       3350 GB/s, each + 5 us against 2 us: the class's sums, independently */
    double mod = 0, mea = 0;
    for (int i = 0; i < A.n; i++)
        if (A.r[i].cls == CL_GEMM) mod += A.r[i].s, mea += cal_find(&M, A.r[i].name)->s;
    char want[96];
    snprintf(want, sizeof want, "| GEMM | 5 | %.4f | %.4f | %.3f |", mod * 1e3, mea * 1e3, mea / mod);
    VT_CHECK(strstr(text, want) != NULL, "GEMM's line, want '%s'", want);
    /* the fitted constants */
    struct {
        int key;
        double want;
    } k[] = {{SP_MEM, 1000e9}, {SP_F32, 20e12}, {SP_LAUNCH, 5e-6}, {SP_HOST, 20e9}, {SP_HOSTCALL, 4e-6}, {SP_NVLAT, 7e-6}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        VT_CHECK(F.fitted[k[i].key] > 0 && fabs(F.spec[k[i].key] / k[i].want - 1) < 1e-3, "%s: fitted %g, want %g",
                 cal_spec_keys[k[i].key], F.spec[k[i].key] / cal_spec_unit[k[i].key], k[i].want / cal_spec_unit[k[i].key]);
    VT_CHECK(!F.fitted[SP_BF16] && F.spec[SP_BF16] == H100.flops_bf16 && F.spec[SP_NVLINK] == H100.nvlink_bw,
             "not measured: kept");
    /* the file is a spec the stand-in loads, with the fitted values */
    VT_CHECK(cal_write_spec(spath, &F, &A, &M) == 0, "written");
    vs_strict_spec got;
    VT_CHECK(vs_strict_spec_load(spath, &got, err, sizeof err) == 0, "%s", err);
    VT_CHECK(fabs(got.mem_bw / 1000e9 - 1) < 1e-3 && fabs(got.flops_f32 / 20e12 - 1) < 1e-3 &&
                 fabs(got.launch_s / 5e-6 - 1) < 1e-3 && got.flops_bf16 == H100.flops_bf16 && got.gpus_per_node == 8 &&
                 !strcmp(got.name, "h100-fit"),
             "the file's spec: mem %g f32 %g launch %g '%s'", got.mem_bw, got.flops_f32, got.launch_s, got.name);
    unlink(spath);
}

static volatile int gate_open;
static void CUDART_CB hold(void* p)
{
    (void)p;
    for (int i = 0; i < 100000 && !__atomic_load_n(&gate_open, __ATOMIC_ACQUIRE); i++) usleep(100);
}
static void case_elapsed(void)
{
    cudaStream_t s;
    cudaEvent_t e0, e1, nt;
    VT_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "a stream");
    cudaEventCreate(&e0), cudaEventCreate(&e1), cudaEventCreateWithFlags(&nt, cudaEventDisableTiming);
    float ms = -1;
    VT_CHECK(cudaEventElapsedTime(&ms, e0, e1) == cudaErrorInvalidResourceHandle, "never recorded");
    cudaGetLastError();
    vs_strict_clock_host_fn_cost(1e-3);
    cudaEventRecord(e0, s);
    cudaLaunchHostFunc(s, hold, NULL);
    cudaEventRecord(e1, s);
    VT_CHECK(cudaEventElapsedTime(&ms, e0, e1) == cudaErrorNotReady, "not ready while the stream is held");
    __atomic_store_n(&gate_open, 1, __ATOMIC_RELEASE);
    cudaEventSynchronize(e1);
    /* e0 at the host's time of its record (the stream idle); the host function enqueued one call
       (host_call_s, 2 us) later, its stated 1 ms + launch_s 2 us: 1.004 ms */
    VT_CHECK(cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess && fabs(ms - 1.004) < 1e-5, "%.6f ms, want 1.004", ms);
    VT_CHECK(cudaEventElapsedTime(&ms, e1, e0) == cudaSuccess && fabs(ms + 1.004) < 1e-5, "backwards: %.6f ms", ms);
    cudaEventRecord(nt, s);
    cudaEventSynchronize(nt);
    VT_CHECK(cudaEventElapsedTime(&ms, e0, nt) == cudaErrorInvalidResourceHandle, "an event without timing");
    cudaGetLastError();
    vs_strict_clock_host_fn_cost(-1);
    cudaEventDestroy(e0), cudaEventDestroy(e1), cudaEventDestroy(nt), cudaStreamDestroy(s);
}

int main(void)
{
    setenv("VS_STRICT_COST_ONLY", "1", 1); /* timed, not run: before the stand-in's first call */
    VT_CHECK(vs_strict_spec_builtin("h100", &H100) == 0, "h100");
    vs_strict_clock_set_spec(&H100);
    VT_CASE("gpu_calib/stand-in: the set's table is complete, every class and GPT kernel, the step; read back", case_complete());
    VT_CASE("gpu_calib/stand-in: modelled times are the clock's formulas (rows worked by hand)", case_hand_worked());
    VT_CASE("gpu_calib/compare: a made-up GPU's constants fitted back from its times; its spec file loads", case_fit());
    VT_CASE("gpu_calib/stand-in: cudaEventElapsedTime is the clock's interval, not ready while held", case_elapsed());
    return vt_summary();
}
