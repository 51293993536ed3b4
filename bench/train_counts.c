/* bench/train_counts.c - what a steady-state training step of the example GPT
   costs the host on GPUs, counted (not timed) over the strict CUDA + NCCL
   stand-in (tests/strict/: no GPU, libcudart or libnccl; n thread ranks, each on
   its own simulated GPU). bench/run_train.sh runs it after bench/train's host
   figures when the CUDA toolkit's headers and NVRTC are there (make
   bench-train).

   bench/train's model (examples/gpt.h: vocab 64, seq 32, dim 64, 8 heads, 4
   blocks, 16 rows a step), AdamW, clip 1.0, through vs_train_step, f32 and bf16
   parameters, on 1 GPU, DP2, TP2, PP2 and PP2 x DP2 x TP2 (1F1B, 2 x PP
   microbatches), and ZeRO-3 (issue 34: DP2, HSDP DPR2 x DPS2, PP2 x DP2 x
   TP2; the unit hooks gather a layer's group and the tied embedding's at once,
   plus one prefetched). After 5 warm-up steps, 2 steps are counted; per step and rank:
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
     from step 2: device allocations and host syncs a step over every step
             after the first (targets 0 and 1: the first step sizes the
             ZeRO-3 gathered pool, so the second allocates nothing either)
   tests/test_train_counts.c enforces the ZeRO-3 rows' targets. Exit status 1 when a step failed, a target was missed or the stand-in
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
static vs_strict_counts c0, c1, c_first; /* c_first: after the first step */
static int failed;

typedef struct cfg {
    const char* name;
    int pp, dp, tp;
    vs_dtype dt;
    int zero, dp_shard; /* plan.zero (0: ZeRO-0), plan.dp_shard (HSDP) */
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
    plan.zero = (vs_zero_stage)C->zero, plan.dp_shard = C->dp_shard;
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
        if (s == WARM || s == 1) {
            pthread_barrier_wait(&bar);
            if (vs_world_rank(w) == 0) *(s == 1 ? &c_first : &c0) = vs_strict_get_counts();
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

/* One mesh's counts per step and rank: after the warm-up (allocs .. events), and
   over every step after the first (first_allocs, first_syncs). */
typedef struct tc_row {
    int ok;
    double allocs, syncs, h2d, d2h, libs, kernels, nccl, events, first_allocs, first_syncs;
} tc_row;

static tc_row tc_run(const cfg* C)
{
    tc_row o;
    memset(&o, 0, sizeof o);
    int n = C->pp * C->dp * C->tp;
    if (gpt_model(&CFG, &STORE, &MODEL) || gpt_model_dtype(&STORE, C->dt)) return o;
    failed = 0;
    pthread_barrier_init(&bar, NULL, (unsigned)n);
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = n, ld.transport = VS_TRANSPORT_NCCL, ld.timeout_s = 120;
    vs_result r = vs_launch_ex(&ld, rank_fn, (void*)C);
    pthread_barrier_destroy(&bar);
    double k = (double)COUNTED * n, kf = (double)(WARM + COUNTED - 1) * n;
#define D(f) ((double)(c1.f - c0.f) / k)
    o.ok = !r && !failed;
    o.allocs = D(device_allocs), o.syncs = D(host_syncs), o.h2d = D(h2d), o.d2h = D(d2h), o.libs = D(libraries);
    o.kernels = D(launches), o.nccl = D(nccl_ops), o.events = D(events);
#undef D
    o.first_allocs = (double)(c1.device_allocs - c_first.device_allocs) / kf;
    o.first_syncs = (double)(c1.host_syncs - c_first.host_syncs) / kf;
    return o;
}

/* Prints the row; 1 when a target is missed or the run failed. */
static int tc_print(const cfg* C, const tc_row* o)
{
    int m = !o->ok || o->allocs != 0 || o->syncs > 1 + 1e-9 || o->d2h > 1 + 1e-9 || o->libs != 0 || o->events != 0 ||
            o->first_allocs != 0 || o->first_syncs > 1 + 1e-9;
    printf("| %-26s | %5.2f | %5.2f | %5.2f | %5.2f | %4.2f | %7.1f | %5.1f | %5.2f | %5.2f | %5.2f |%s\n", C->name,
           o->allocs, o->syncs, o->h2d, o->d2h, o->libs, o->kernels, o->nccl, o->events, o->first_allocs,
           o->first_syncs, !o->ok ? " FAILED" : m ? " MISS" : "");
    fflush(stdout);
    return m;
}

static void tc_header(void)
{
    printf("the example GPT through vs_train_step on simulated GPUs: per steady step and rank (%d counted after %d; "
           "from step 2: over the %d after the first)\n\n", COUNTED, WARM, WARM + COUNTED - 1);
    printf("| mesh | allocs | syncs | h2d | d2h | libs | kernels | nccl | events | allocs from step 2 | syncs from step 2 "
           "|\n|---|---|---|---|---|---|---|---|---|---|---|\n");
}

static const cfg tc_cfgs[] = {
    {"1 GPU", 1, 1, 1, VS_F32, 0, 0},
    {"DP2", 1, 2, 1, VS_F32, 0, 0},
    {"TP2", 1, 1, 2, VS_F32, 0, 0},
    {"PP2", 2, 1, 1, VS_F32, 0, 0},
    {"PP2 x DP2 x TP2", 2, 2, 2, VS_F32, 0, 0},
    {"1 GPU, bf16", 1, 1, 1, VS_BF16, 0, 0},
    {"PP2 x DP2 x TP2, bf16", 2, 2, 2, VS_BF16, 0, 0},
    {"DP2, ZeRO-3", 1, 2, 1, VS_F32, 3, 0},
    {"DPR2 x DPS2 (HSDP), ZeRO-3", 1, 4, 1, VS_F32, 3, 2},
    {"PP2 x DP2 x TP2, ZeRO-3", 2, 2, 2, VS_F32, 3, 0},
};
enum { TC_NCFGS = (int)(sizeof tc_cfgs / sizeof tc_cfgs[0]) };

#ifndef TC_NO_MAIN
int main(void)
{
    gpt_strict_register();
    int miss = 0;
    tc_header();
    for (int i = 0; i < TC_NCFGS; i++) {
        tc_row o = tc_run(&tc_cfgs[i]);
        miss |= tc_print(&tc_cfgs[i], &o);
    }
    long v = vs_strict_violations();
    if (v) printf("\n%ld stand-in violations, the first: %s\n", v, vs_strict_first_violation());
    return failed || miss || v ? 1 : 0;
}
#endif
