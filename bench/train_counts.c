/* bench/train_counts.c - what a steady-state training step of the example GPT
   costs the host on GPUs, counted (not timed) over the strict CUDA + NCCL
   stand-in (tests/strict/: no GPU, libcudart or libnccl; n thread ranks, each on
   its own simulated GPU). bench/run_train.sh runs it after bench/train's host
   figures when the CUDA toolkit's headers and NVRTC are there (make
   bench-train).

   bench/train's model (examples/gpt.h: vocab 64, seq 32, dim 64, 8 heads, 4
   blocks, 16 rows a step), AdamW, clip 1.0, through vs_train_step, f32 and bf16
   parameters, on 1 GPU, DP2, TP2, PP2 and PP2 x DP2 x TP2 (1F1B, 2 x PP
   microbatches). After 5 warm-up steps, 2 steps are counted; per step and rank:
     allocs  device allocations (cudaMalloc; target 0)
     syncs   host-blocking synchronisations (target: 1, the gradient norm's
             read, which brings the loss)
     h2d     host-to-device copies: the batch's only (tokens and targets of
             each microbatch on the stages that take them; the loss gradient's
             seed stays in device memory)
     d2h     device-to-host copies (target 1: the norm's partial sums, with
             the step's loss carried in the same all-reduce and read)
     libs    NVRTC libraries loaded (target 0 after the first step)
     kernels kernels launched; nccl: NCCL operations the streams ran
     events  CUDA events created (target 0)
   Exit status 1 when a step failed, a target was missed or the stand-in
   reported a violation. */
#define VESCALE_IMPLEMENTATION
#include "vescale.h"
#include "examples/gpt.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/strict/vs_strict.h"
#include "tests/gpt_strict_kernels.h"

enum { ROWS = 16, WARM = 5, COUNTED = 2 }; /* (5: a mesh with one DDP bucket fills the watchdog's ring of 4 events) */
static const gpt_config CFG = {64, 32, 64, 8, 4, 1234};
static gpt_model_storage STORE;
static vs_model_desc MODEL;
static pthread_barrier_t bar;
static vs_strict_counts c0, c1;
static int failed;

typedef struct cfg {
    const char* name;
    int pp, dp, tp;
    vs_dtype dt;
} cfg;

static int rank_fn(vs_world* w, void* arg)
{
    const cfg* C = (const cfg*)arg;
    int32_t *tok = NULL, *tgt = NULL;
    size_t bytes = sizeof(int32_t) * ROWS * (size_t)CFG.seq;
    if (cudaMallocHost((void**)&tok, bytes) != cudaSuccess || cudaMallocHost((void**)&tgt, bytes) != cudaSuccess)
        return 1;
    vs_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.pp = C->pp, plan.dp = C->dp, plan.tp = C->tp, plan.microbatches = 2 * C->pp;
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &MODEL, d.plan = &plan;
    d.optim.kind = VS_OPTIM_ADAMW, d.optim.weight_decay = 0.01;
    d.lr.lr = 3e-3, d.clip = 1.0, d.grad_fp32 = C->dt != VS_F32;
    vs_train* t = NULL;
    vs_result r = vs_parallelize(w, &d, &t);
    vs_batch b = gpt_batch_view(ROWS, CFG.seq, tok, tgt);
    for (int s = 0; !r && s < WARM + COUNTED; s++) {
        gpt_batch(&CFG, s, ROWS, tok, tgt);
        if (s == WARM) {
            pthread_barrier_wait(&bar);
            if (vs_world_rank(w) == 0) c0 = vs_strict_get_counts();
            pthread_barrier_wait(&bar);
        }
        double l = 0;
        r = vs_train_step(t, &b, &l);
    }
    pthread_barrier_wait(&bar); // (every rank: a failed one too, so none waits forever)
    if (vs_world_rank(w) == 0) c1 = vs_strict_get_counts();
    pthread_barrier_wait(&bar);
    if (r) {
        fprintf(stderr, "%s: %s\n", C->name, vs_last_error());
        __atomic_store_n(&failed, 1, __ATOMIC_SEQ_CST);
    }
    vs_train_free(t);
    cudaFreeHost(tok), cudaFreeHost(tgt);
    return r ? 1 : 0;
}

int main(void)
{
    gpt_strict_register();
    static const cfg cfgs[] = {
        {"1 GPU", 1, 1, 1, VS_F32},          {"DP2", 1, 2, 1, VS_F32},       {"TP2", 1, 1, 2, VS_F32},
        {"PP2", 2, 1, 1, VS_F32},            {"PP2 x DP2 x TP2", 2, 2, 2, VS_F32},
        {"1 GPU, bf16", 1, 1, 1, VS_BF16},   {"PP2 x DP2 x TP2, bf16", 2, 2, 2, VS_BF16},
    };
    int miss = 0;
    printf("the example GPT through vs_train_step on simulated GPUs: per steady step and rank (%d counted after %d)\n\n",
           COUNTED, WARM);
    printf("| mesh | allocs | syncs | h2d | d2h | libs | kernels | nccl | events |\n|---|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        const cfg* C = &cfgs[i];
        int n = C->pp * C->dp * C->tp;
        if (gpt_model(&CFG, &STORE, &MODEL) || gpt_model_dtype(&STORE, C->dt)) return 1;
        pthread_barrier_init(&bar, NULL, (unsigned)n);
        vs_launch_desc ld;
        memset(&ld, 0, sizeof ld);
        ld.nranks = n, ld.transport = VS_TRANSPORT_NCCL, ld.timeout_s = 120;
        vs_result r = vs_launch_ex(&ld, rank_fn, (void*)C);
        pthread_barrier_destroy(&bar);
        double k = (double)COUNTED * n;
#define D(f) ((double)(c1.f - c0.f) / k)
        int m = r || D(device_allocs) != 0 || D(host_syncs) > 1 + 1e-9 || D(d2h) > 1 + 1e-9 || D(libraries) != 0 ||
                D(events) != 0;
        miss |= m;
        printf("| %-22s | %5.2f | %5.2f | %5.2f | %5.2f | %4.2f | %7.1f | %5.1f | %5.2f |%s\n", C->name,
               D(device_allocs), D(host_syncs), D(h2d), D(d2h), D(libraries), D(launches), D(nccl_ops), D(events),
               r ? " FAILED" : m ? " MISS" : "");
#undef D
    }
    long v = vs_strict_violations();
    if (v) printf("\n%ld stand-in violations, the first: %s\n", v, vs_strict_first_violation());
    return failed || miss || v ? 1 : 0;
}
