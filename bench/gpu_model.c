/* bench/gpu_model.c - the example GPT's steady step on GPUs that are not there:
   examples/gpt.h through vs_parallelize and vs_train_step, device buffers over
   the strict CUDA + NCCL stand-in (tests/strict/) in cost-only mode
   (VS_STRICT_COST_ONLY=1: kernels, copies and collectives are timed by the
   stand-in's clock, tests/strict/vs_strict_clock.h, and not run), on the H100
   spec (VS_STRICT_SPEC to change it). make bench-gpu-model runs it.

     gpu_model                 the table: the bench GPT on one GPU, DP8, TP8,
                               TP8 with sequence parallelism, PP2 x DP2 x TP2
                               (1F1B, interleaved, ZB-V; and 1F1B with SP)
     gpu_model --ranks         ... and every rank's row
     gpu_model --tensor        the table with GEMMs and attention on tensor cores
                               (below: "Kernel costs"; --published and --plan1024
                               always price so: they stand beside production runs)
     gpu_model --only NAME     one row of the table (its mesh's name)
     gpu_model --published N   one published shape (N: 1.3b, 13b, 5b, 20b, 175b) on its
                               published mesh, the planner's prediction beside it
     gpu_model --plan1024 [--top K] [--skip J] [--flop-scale X]
                               the planner's K best plans (5; after its first J) for
                               GPT-3 13B on 1,024 GPUs (its flop_s x X: the
                               stand-in's compute rate, from --published 13b) in the
                               stand-in; then the planner calibrated on the first
                               plan run's mesh (its compute there), its estimate of
                               each plan run and its own new first choices
       [--tp-cal]              first the planner's profile calibrated on PP1 x TP
                               1, 2, 4, 8 plans: flop_s from TP1's compute, tp_s
                               from the rest's (the layers' work TP does not split)
       [--tp-s 2=S,4=S,8=S]    the planner's tp_s (s a byte of TP all-reduce), as
                               --tp-cal prints it with its --flop-scale
       [--w-share W]           the planner's w_share (a split layer's W part of
                               its backward; vs_profile_measure's figure)
       [--w-cal]               first w_share from the stand-in: the PP1 x TP1
                               plan with B and W timed apart on the stream clock
       [--list N]              list the planner's first N plans (10); with
                               --top 0 nothing runs (the planner alone)

   Per rank, over one steady step (the 3rd; the clock's busy times are reset
   after the 2nd), from the clock's outputs (vs_strict_clock_device) and the
   rank's host clock (vs_strict_clock_host):
     step      the host's time for vs_train_step (it ends with the host's one
               wait, the loss and norm: the step as the trainer sees it)
     compute   busy with kernels, memsets and copies within the device
     comm      busy with NCCL operations; exposed: of it, what no compute overlaps
     bubble    step - busy - host idle: the device waits for another rank (a
               pipeline stage's input, a collective's late peer)
     host      host-bound idle: the device had work ready but for its host's
               call (the clock's host_idle)
   Exposed communication by kind: each NCCL operation is tagged when enqueued
   (vs_strict_clock_tagger): a send/recv is PP; a collective whose ranks differ
   only in their DP coordinate is DP; one within a TP group is TP all-reduce or
   SP all-gather / reduce-scatter when a transformer block enqueued it,
   vocab-parallel when the embedding or the head did (the bench wraps the
   layers' functions to set the thread's tag), else "step" (the loss, the
   gradient norm: the step's own collectives over TP or the world); under HSDP
   a DP collective of other than the shard group's size is "HSDP replicas";
   a DP all-gather (ZeRO's parameters) is "DP gather", so "DP" is the
   gradients' reduction.

   Kernel costs: every kernel's as its declaration states it, beside its text
   (examples/gpt_kernels.h's gpt_kernel_decls, the library's own in its
   headers): flops and bytes from the launch's arguments, arithmetic at the
   f32 CUDA-core peak, because the example's kernels are plain tiled loops.
   --tensor models what a production trainer runs instead, as one stated
   transformation of those declared costs, not a second formula: the launches
   of the kernels a real trainer hands to cuBLAS and flash attention (gptk_mm,
   gptk_attn_fwd, gptk_attn_bwd_rows, gptk_attn_bwd) get their declared flops
   priced at the tensor-core peak of the model's dtype (bf16 for a bf16 model,
   tf32 for f32), their declared bytes unchanged (the example's f32
   activations, its attention's f32 probabilities written and read back: a
   flash kernel keeps those on chip, so --tensor's attention is still
   memory-bound where flash attention is not). Every other kernel, and the
   library's, keeps its declared cost. */
#define VESCALE_IMPLEMENTATION
#include "vescale.h"
#define GPT_MAX_LAYERS 96 /* GPT-3 175B's */
#include "examples/gpt.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/strict/vs_strict.h"
#include "tests/gpt_strict_kernels.h"

/* ---- kernel costs: --tensor ---------------------------------------------------------- */

static int tensor_on;                     /* --tensor */
static int tensor_dtype = VS_STRICT_BF16; /* the run's tensor-core dtype: its parameters' */

/* kernel ki's declared cost, its flops at tensor_dtype's peak (--tensor) */
static void tensor_cost(int ki, void** a, vs_strict_kcost* k)
{
    vs_kernel_cost c;
    if (vs_kernel_cost_get(&gpt_kernel_decls[ki], a, &c)) return; /* (every gptk_ kernel declares one) */
    k->flops = c.flops, k->bytes = c.bytes, k->dtype = tensor_dtype;
}
#define TENSOR_FN(ki) \
    static void tc_##ki(void** a, dim3 g, dim3 b, vs_strict_kcost* k) \
    { \
        (void)g, (void)b; \
        tensor_cost(ki, a, k); \
    }
TENSOR_FN(GPT_KI_MM)
TENSOR_FN(GPT_KI_ATTN_FWD)
TENSOR_FN(GPT_KI_ATTN_BWD_ROWS)
TENSOR_FN(GPT_KI_ATTN_BWD)
#undef TENSOR_FN

static void register_tensor_costs(void)
{
    vs_strict_kernel_cost(gpt_kernel_decls[GPT_KI_MM].name, tc_GPT_KI_MM);
    vs_strict_kernel_cost(gpt_kernel_decls[GPT_KI_ATTN_FWD].name, tc_GPT_KI_ATTN_FWD);
    vs_strict_kernel_cost(gpt_kernel_decls[GPT_KI_ATTN_BWD_ROWS].name, tc_GPT_KI_ATTN_BWD_ROWS);
    vs_strict_kernel_cost(gpt_kernel_decls[GPT_KI_ATTN_BWD].name, tc_GPT_KI_ATTN_BWD);
}

/* ---- communication by kind ------------------------------------------------------------ */

enum { TAG_STEP, TAG_TP, TAG_SP, TAG_VOCAB, TAG_DP, TAG_PP, TAG_DPR, TAG_DPG, NTAG };
static const char* const tag_names[NTAG] = {"step", "TP all-reduce", "SP gather/scatter", "vocab", "DP", "PP send/recv",
                                            "HSDP replicas", "DP gather"};
enum { THR_NONE, THR_BLOCK, THR_VOCAB }; /* the thread's tag: which layer enqueues */

typedef struct mesh {
    int pp, dp, tp;
    int dps; /* HSDP's shard group (0: none): a DP collective of other sizes is over the replicas */
} mesh;

static int tagger(int kind, int n, const int* devs, int thr, void* user)
{
    const mesh* m = (const mesh*)user;
    int vary_tp = 0, vary_dp = 0, vary_pp = 0;
    for (int i = 1; i < n; i++) {
        int a = devs[0], b = devs[i];
        vary_tp |= a % m->tp != b % m->tp;
        vary_dp |= a / m->tp % m->dp != b / m->tp % m->dp;
        vary_pp |= a / (m->tp * m->dp) != b / (m->tp * m->dp);
    }
    if (vary_pp && !vary_tp && !vary_dp) return TAG_PP;
    if (vary_dp && !vary_tp && !vary_pp)
        return m->dps > 0 && n != m->dps ? TAG_DPR : kind == VS_STRICT_ALLGATHER ? TAG_DPG : TAG_DP;
    if (vary_tp && !vary_dp && !vary_pp) {
        if (thr == THR_VOCAB) return TAG_VOCAB;
        if (thr == THR_BLOCK) return kind == VS_STRICT_ALLREDUCE ? TAG_TP : TAG_SP; /* (SP's send/recv too) */
    }
    return TAG_STEP;
}

/* the layers' functions, wrapped to tag what they enqueue (by gpt_unit.kind) */
static vs_pipe_fn orig_f[4], orig_b[4], orig_bi[4], orig_bw[4];
static vs_result tagged(vs_pipe_fn* tab, vs_pipe_call* c)
{
    const gpt_unit* u = (const gpt_unit*)vs_layer(c)->user;
    vs_strict_clock_tag(u->kind == GPT_EMBED || u->kind == GPT_HEAD ? THR_VOCAB : THR_BLOCK);
    vs_result r = tab[u->kind](c);
    vs_strict_clock_tag(THR_NONE);
    return r;
}
/* --w-cal (WCAL 1): a split layer's B and W parts timed on its compute
   stream's clock (the stream's end after the call less before it: the call's
   kernels), summed by unit kind; the layers' full backward left out, so that
   the engine's BW runs B then W, as vs_profile_measure times them */
static int WCAL;
static double wcal_t[4][2];
static pthread_mutex_t wcal_mu = PTHREAD_MUTEX_INITIALIZER;
static vs_result timed_part(vs_pipe_fn* tab, vs_pipe_call* c, int part)
{
    double t0 = WCAL ? vs_strict_clock_stream((cudaStream_t)c->stream) : 0;
    vs_result r = tagged(tab, c);
    if (WCAL) {
        double dt = vs_strict_clock_stream((cudaStream_t)c->stream) - t0;
        pthread_mutex_lock(&wcal_mu);
        wcal_t[((const gpt_unit*)vs_layer(c)->user)->kind][part] += dt;
        pthread_mutex_unlock(&wcal_mu);
    }
    return r;
}
static vs_result w_f(vs_pipe_call* c) { return tagged(orig_f, c); }
static vs_result w_b(vs_pipe_call* c) { return tagged(orig_b, c); }
static vs_result w_bi(vs_pipe_call* c) { return timed_part(orig_bi, c, 0); }
static vs_result w_bw(vs_pipe_call* c) { return timed_part(orig_bw, c, 1); }
static void wrap_layers(gpt_model_storage* st, vs_model_desc* m)
{
    (void)m;
    for (int i = 0; i < 2 + 2 * st->cfg.layers; i++) {
        vs_layer_decl* l = &st->layers[i];
        int k = st->units[i].kind;
        orig_f[k] = l->unit.forward, orig_b[k] = l->unit.backward;
        orig_bi[k] = l->unit.backward_input, orig_bw[k] = l->unit.backward_weight;
        l->unit.forward = w_f, l->unit.backward = WCAL && l->unit.backward_input && l->unit.backward_weight ? NULL : w_b;
        if (l->unit.backward_input) l->unit.backward_input = w_bi;
        if (l->unit.backward_weight) l->unit.backward_weight = w_bw;
    }
}

/* ---- one configuration's steady step -------------------------------------------------- */

static int WARM = 2; /* steps before the one measured */
/* 1: every device idle before the measured step, so its window holds no earlier step's
   work (tests/test_strict_train.c); 0 (the bench): the step as a loop runs it, the last
   step's optimizer kernels and ZeRO gathers still running when it starts */
static int idle_start;
typedef struct row {
    double step, compute, comm, exposed, bubble, host, comm_tag[NTAG], exposed_tag[NTAG];
} row;

typedef struct run {
    const char* name;
    gpt_config cfg;
    vs_dtype dt;
    mesh m;
    vs_pipe_kind sched;
    int sp, microbatches, rows; /* rows: the global batch */
    int zero, chunks;           /* the plan's (0: ZeRO-0, the schedule's chunks) */
    int recompute;              /* 1: every layer's activations recomputed ("*") */
    int dp_shard;               /* HSDP's shard group (0: none) */
    int dp_as;                  /* the DP collectives (tag DP) timed as over this many ranks across hosts (0: as run) */
    int dpr_as;                 /* HSDP's replicas' all-reduce (tag HSDP replicas) timed so too */
    /* out */
    row* r; /* a row per rank */
    int failed;
} run;

static gpt_model_storage STORE;
static vs_model_desc MODEL;
static pthread_barrier_t bar;

static int rank_fn(vs_world* w, void* arg)
{
    run* R = (run*)arg;
    int me = vs_world_rank(w), dev = 0;
    cudaGetDevice(&dev);
    int32_t *tok = NULL, *tgt = NULL;
    size_t bytes = sizeof(int32_t) * (size_t)R->rows * (size_t)R->cfg.seq;
    if (cudaMallocHost((void**)&tok, bytes) != cudaSuccess || cudaMallocHost((void**)&tgt, bytes) != cudaSuccess)
        return 1;
    gpt_batch(&R->cfg, 0, R->rows, tok, tgt);
    vs_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.pp = R->m.pp, plan.dp = R->m.dp, plan.tp = R->m.tp, plan.schedule = R->sched;
    plan.microbatches = R->microbatches, plan.sequence_parallel = R->sp;
    plan.zero = (vs_zero_stage)R->zero, plan.chunks = R->chunks;
    if (R->recompute) snprintf(plan.recompute, sizeof plan.recompute, "*");
    plan.dp_shard = R->dp_shard;
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &MODEL, d.plan = &plan;
    d.optim.kind = VS_OPTIM_ADAMW, d.optim.weight_decay = 0.01;
    d.lr.lr = 3e-4, d.clip = 1.0, d.grad_fp32 = R->dt != VS_F32;
    vs_train* t = NULL;
    vs_result r = vs_parallelize(w, &d, &t);
    vs_batch b = gpt_batch_view(R->rows, R->cfg.seq, tok, tgt);
    double h0 = 0;
    for (int s = 0; s <= WARM; s++) {
        if (s == WARM) { /* every rank idle: the busy times start here */
            if (idle_start) {
                pthread_barrier_wait(&bar); /* every rank's last step enqueued (its ZeRO gathers too) */
                cudaDeviceSynchronize();    /* and done: its optimizer's kernels come after its host wait */
            }
            pthread_barrier_wait(&bar);
            if (me == 0) vs_strict_clock_reset(-1);
            pthread_barrier_wait(&bar);
            h0 = vs_strict_clock_host();
        }
        double l = 0;
        if (!r) r = vs_train_step(t, &b, &l);
    }
    double h1 = vs_strict_clock_host();
    pthread_barrier_wait(&bar);
    vs_strict_clock_stats st = vs_strict_clock_device(dev);
    row* o = &R->r[me];
    o->step = h1 - h0, o->compute = st.compute, o->comm = st.comm, o->exposed = st.exposed_comm;
    o->host = st.host_idle, o->bubble = o->step - st.busy - st.host_idle;
    if (o->bubble < 0) o->bubble = 0;
    for (int k = 0; k < NTAG; k++) o->comm_tag[k] = st.comm_tag[k], o->exposed_tag[k] = st.exposed_tag[k];
    if (r) {
        fprintf(stderr, "%s: rank %d: %s\n", R->name, me, vs_last_error());
        __atomic_store_n(&R->failed, 1, __ATOMIC_SEQ_CST);
    }
    pthread_barrier_wait(&bar);
    vs_train_free(t);
    cudaFreeHost(tok), cudaFreeHost(tgt);
    return r ? 1 : 0;
}

static int run_one(run* R)
{
    int n = R->m.pp * R->m.dp * R->m.tp;
    if (gpt_model(&R->cfg, &STORE, &MODEL) || gpt_model_dtype(&STORE, R->dt)) {
        fprintf(stderr, "%s: %s\n", R->name, vs_last_error());
        return 1;
    }
    wrap_layers(&STORE, &MODEL);
    tensor_dtype = R->dt == VS_F32 ? VS_STRICT_TF32 : R->dt == VS_F16 ? VS_STRICT_F16 : VS_STRICT_BF16;
    R->m.dps = R->dp_shard;
    vs_strict_clock_tagger(tagger, &R->m);
    vs_strict_clock_tag_as(TAG_DP, R->dp_as, 1);
    vs_strict_clock_tag_as(TAG_DPR, R->dpr_as, 1);
    R->r = (row*)calloc((size_t)n, sizeof(row));
    pthread_barrier_init(&bar, NULL, (unsigned)n);
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = n, ld.transport = VS_TRANSPORT_NCCL, ld.timeout_s = 600;
    ld.stack_bytes = (size_t)512 << 10;
    vs_result r = vs_launch_ex(&ld, rank_fn, R);
    pthread_barrier_destroy(&bar);
    vs_strict_clock_tagger(NULL, NULL);
    vs_strict_clock_tag_as(TAG_DP, 0, 0);
    vs_strict_clock_tag_as(TAG_DPR, 0, 0);
    return r || R->failed;
}

static int dcmp(const void* x, const void* y)
{
    double a = *(const double*)x, b = *(const double*)y;
    return a < b ? -1 : a > b;
}
/* the median and the max over n ranks of the field at byte offset off */
static void medmax(const row* r, int n, size_t off, double* med, double* max)
{
    double* v = (double*)malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n; i++) v[i] = *(const double*)(const void*)((const char*)&r[i] + off);
    qsort(v, (size_t)n, sizeof v[0], dcmp);
    *med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, *max = v[n - 1];
    free(v);
}

static void print_row(const char* name, const row* r, int n)
{
    double md, mx;
#define F(f) (medmax(r, n, offsetof(row, f), &md, &mx), printf(" %8.3f / %8.3f |", md * 1e3, mx * 1e3))
    printf("| %-34s |", name);
    F(step), F(compute), F(comm), F(exposed), F(bubble), F(host);
    printf("\n");
#undef F
}
static void print_kinds(const char* name, const row* r, int n)
{
    printf("| %-34s |", name);
    for (int k = 0; k < NTAG; k++) {
        double e = 0, c = 0; /* the median rank's figures would hide PP's two ends: the mean */
        for (int i = 0; i < n; i++) e += r[i].exposed_tag[k], c += r[i].comm_tag[k];
        printf(" %7.3f (%7.3f) |", e / n * 1e3, c / n * 1e3);
    }
    printf("\n");
}

/* ---- the table ------------------------------------------------------------------------ */

/* the bench's GPT: 8 blocks of D 1024, 16 heads, sequence 512, vocab 8,192
   (~110M parameters), bf16 parameters with f32 gradients, 32 rows a step */
static const gpt_config BENCH = {8192, 512, 1024, 16, 8, 1234};

static int table(int per_rank, const char* only)
{
    static run runs[] = {
        {.name = "1 GPU", .dt = VS_BF16, .m = {1, 1, 1, 0}, .sched = VS_PIPE_1F1B, .sp = 0, .microbatches = 1, .rows = 32},
        {.name = "DP8", .dt = VS_BF16, .m = {1, 8, 1, 0}, .sched = VS_PIPE_1F1B, .sp = 0, .microbatches = 1, .rows = 32},
        {.name = "TP8", .dt = VS_BF16, .m = {1, 1, 8, 0}, .sched = VS_PIPE_1F1B, .sp = 0, .microbatches = 1, .rows = 32},
        {.name = "TP8, SP", .dt = VS_BF16, .m = {1, 1, 8, 0}, .sched = VS_PIPE_1F1B, .sp = 1, .microbatches = 1, .rows = 32},
        {.name = "PP2 x DP2 x TP2, 1F1B", .dt = VS_BF16, .m = {2, 2, 2, 0}, .sched = VS_PIPE_1F1B, .sp = 0, .microbatches = 8, .rows = 32},
        {.name = "PP2 x DP2 x TP2, 1F1B, SP", .dt = VS_BF16, .m = {2, 2, 2, 0}, .sched = VS_PIPE_1F1B, .sp = 1, .microbatches = 8, .rows = 32},
        {.name = "PP2 x DP2 x TP2, interleaved", .dt = VS_BF16, .m = {2, 2, 2, 0}, .sched = VS_PIPE_INTERLEAVED, .sp = 0, .microbatches = 8, .rows = 32},
        {.name = "PP2 x DP2 x TP2, ZB-V", .dt = VS_BF16, .m = {2, 2, 2, 0}, .sched = VS_PIPE_ZBV, .sp = 0, .microbatches = 8, .rows = 32},
    };
    int nr = (int)(sizeof runs / sizeof runs[0]), bad = 0;
    vs_strict_spec sp = vs_strict_clock_spec();
    printf("the example GPT (V %d, T %d, D %d, %d heads, %d blocks; bf16 parameters, f32 gradients, AdamW) through "
           "vs_train_step, %d rows a step, on the stand-in's %s spec, cost-only; one steady step (after %d); kernels "
           "as declared%s\n\n",
           BENCH.vocab, BENCH.seq, BENCH.dim, BENCH.heads, BENCH.layers, 32, sp.name, WARM,
           tensor_on ? ", GEMMs and attention at the tensor-core peak (--tensor)" : " (f32 CUDA cores)");
    int k = 0;
    for (int i = 0; i < nr; i++)
        if (!only || !strcmp(only, runs[i].name)) runs[k++] = runs[i];
    nr = k;
    for (int i = 0; i < nr; i++) {
        runs[i].cfg = BENCH;
        if (run_one(&runs[i])) printf("%s: FAILED\n", runs[i].name), bad = 1;
    }
    printf("ms, median / max over ranks\n\n| mesh | step | compute | comm | comm exposed | bubble | host-bound idle |\n"
           "|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < nr; i++) {
        int n = runs[i].m.pp * runs[i].m.dp * runs[i].m.tp;
        print_row(runs[i].name, runs[i].r, n);
        if (per_rank)
            for (int k = 0; k < n; k++) {
                char nm[48];
                snprintf(nm, sizeof nm, "  rank %d", k);
                print_row(nm, &runs[i].r[k], 1);
            }
    }
    printf("\nexposed communication by kind, ms (all of it in parentheses), the mean over ranks\n\n| mesh |");
    for (int k = 0; k < NTAG; k++) printf(" %s |", tag_names[k]);
    printf("\n|---|");
    for (int k = 0; k < NTAG; k++) printf("---|");
    printf("\n");
    for (int i = 0; i < nr; i++) print_kinds(runs[i].name, runs[i].r, runs[i].m.pp * runs[i].m.dp * runs[i].m.tp);
    for (int i = 0; i < nr; i++) free(runs[i].r);
    return bad;
}

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- published shapes: the stand-in, the planner, the published figure ----------------- */

/* Model FLOPs of a step (Narayanan et al. 2021, eq. (3) less recompute's
   forward, as MFU counts them: 72 B s l h^2 (1 + s / 6h + V / 12lh)) */
static double model_flops(const gpt_config* c, double rows)
{
    double s = c->seq, l = c->layers, h = c->dim, V = c->vocab;
    return 72 * rows * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
}

typedef struct pubcfg {
    const char* name;
    gpt_config cfg;
    int pp, dp, tp;
    vs_pipe_kind sched;
    int gbs, mbs;       /* the global batch (sequences) and the microbatch's */
    int m1, m2;         /* microbatches a DP rank runs in the stand-in (m2 0: the whole M) */
    int dp_run;         /* DP ranks the stand-in runs (0: dp; fewer: their DP collectives timed as dp's) */
    int recompute;      /* every layer recomputed (the activations would not fit the 80 GB) */
    double pub_tflops;  /* published per-GPU model TFLOP/s (0: none found) */
    double pub_peak;    /* the peak it was measured against, TFLOP/s */
    const char* source;
} pubcfg;

/* GPT-3's shapes (Brown et al. 2020, Table 2.1; 13B with D 5120: 5140 has no
   whole head size), vocab 51,200 and sequence 2,048 as Megatron-LM's runs */
static const pubcfg PUBS[] = {
    {"1.3b", {51200, 2048, 2048, 16, 24, 1}, 1, 64, 1, VS_PIPE_1F1B, 512, 4, 2, 0, 0, 0, 0, 0, "none found"},
    {"13b", {51200, 2048, 5120, 40, 40, 1}, 1, 32, 8, VS_PIPE_1F1B, 1024, 1, 2, 4, 2, 0, 0, 0, "none found"},
    /* NeMo's GPT3 5B and 20B (NeMo-Megatron-Launcher conf/training/gpt3/5b.yaml and
       20b.yaml: 24 layers of 4,096, 32 heads; 44 of 6,144, 48 heads; sequence 2,048)
       on the meshes and batches of NeMo 24.12's H100 table */
    {"5b", {51200, 2048, 4096, 32, 24, 1}, 1, 64, 1, VS_PIPE_1F1B, 2048, 4, 8, 0, 2, 0, 765, 1979,
     "NVIDIA NeMo 24.12 performance summary: GPT3-5B, 64 H100, GBS 2048, MBS 4, TP1 PP1, FP8"},
    {"20b", {51200, 2048, 6144, 48, 44, 1}, 1, 32, 2, VS_PIPE_1F1B, 256, 2, 4, 0, 2, 0, 750, 1979,
     "NVIDIA NeMo 24.12 performance summary: GPT3-20B, 64 H100, GBS 256, MBS 2, TP2 PP1, FP8"},
    {"175b", {51200, 2048, 12288, 96, 96, 1}, 8, 4, 4, VS_PIPE_INTERLEAVED, 256, 1, 8, 16, 2, 1, 771, 1979,
     "NVIDIA NeMo 24.12 performance summary: GPT3-175B, 128 H100, GBS 256, MBS 1, TP4 PP8 VP6, FP8"},
};

/* the planner's view of the spec: compute at the bf16 peak, NVLink within a
   node, the network across, AdamW's bytes a parameter */
static vs_profile spec_profile(const vs_strict_spec* sp, int pp_crosses)
{
    vs_profile p;
    memset(&p, 0, sizeof p);
    p.flop_s = 1 / sp->flops_bf16;
    p.bw_bytes_s = sp->nvlink_bw;
    p.latency_s = sp->nvlink_latency_s;
    p.p2p_bw_bytes_s = pp_crosses ? sp->net_bw : sp->nvlink_bw;
    p.opt_s = 32 / sp->mem_bw; /* f32 master, m, v, gradient: read and written */
    return p;
}

/* the planner's estimate of (pp, dp, tp, sched, M, ZeRO-0) for cfg: its step, or
   -1 (est: the planner's list, n entries) */
static double flop_scale = 1; /* the planner's flop_s x this (calibrated: the stand-in's compute) */
static double W_SHARE = 0;     /* --w-share: the planner's profile.w_share (0: not measured, 1/2) */
static int LIST = 10;          /* --list: the planner's plans listed */
static double planner_step(const gpt_config* cfg, int pp, int dp, int tp, vs_pipe_kind sched, int M, int gbs, int rc,
                           vs_plan_estimate* out)
{
    static vs_plan_estimate est[4096];
    gpt_model_storage st;
    vs_model_desc m;
    if (gpt_model(cfg, &st, &m) || gpt_model_dtype(&st, VS_BF16)) return -1;
    vs_strict_spec sp = vs_strict_clock_spec();
    vs_constraints c;
    memset(&c, 0, sizeof c);
    c.world = pp * dp * tp, c.pp = pp, c.dp = dp, c.tp = tp, c.microbatches = M, c.global_batch = gbs;
    c.recompute = rc ? 1 : -1;
    c.act_bytes_per_row = (int64_t)cfg->seq * cfg->dim * 4;
    c.node_ranks = sp.gpus_per_node, c.inter_bw_bytes_s = sp.net_bw, c.grad_fp32 = 1; /* (as the runs: vs_train_desc.grad_fp32) */
    vs_profile pf = spec_profile(&sp, dp * tp >= sp.gpus_per_node);
    pf.flop_s *= flop_scale;
    vs_plan plan;
    int n = 0;
    if (vs_generate_plan(&m, &c, &pf, &plan, est, 4096, &n)) {
        fprintf(stderr, "planner: %s\n", vs_last_error());
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (est[i].feasible && est[i].plan.schedule == sched && est[i].plan.zero == VS_ZERO_0 &&
            est[i].plan.microbatches == M) {
            if (out) *out = est[i];
            return est[i].step_s;
        }
    return -1;
}

/* the stand-in's step for m microbatches a DP rank: the max over ranks */
static int standin_step(const char* name, const gpt_config* cfg, int pp, int dp, int tp, vs_pipe_kind sched, int mbs,
                        int m, int recompute, int dp_as, row* worst)
{
    run R;
    memset(&R, 0, sizeof R);
    R.name = name, R.cfg = *cfg, R.dt = VS_BF16, R.m.pp = pp, R.m.dp = dp, R.m.tp = tp, R.sched = sched;
    R.recompute = recompute, R.dp_as = dp_as;
    R.microbatches = m, R.rows = dp * m * mbs;
    int n = pp * dp * tp;
    if (run_one(&R)) return 1;
    memset(worst, 0, sizeof *worst);
    for (int i = 0; i < n; i++)
        if (R.r[i].step > worst->step) *worst = R.r[i];
    free(R.r);
    return 0;
}

static int published(const char* which)
{
    const pubcfg* P = NULL;
    for (size_t i = 0; i < sizeof PUBS / sizeof PUBS[0]; i++)
        if (!strcmp(which, PUBS[i].name)) P = &PUBS[i];
    if (!P) return fprintf(stderr, "gpu_model: --published %s: 1.3b, 13b, 5b, 20b or 175b\n", which), 2;
    vs_strict_spec sp = vs_strict_clock_spec();
    int n = P->pp * P->dp * P->tp, M = P->gbs / P->dp / P->mbs;
    WARM = 1;
    printf("%s: V %d, T %d, D %d, %d heads, %d layers; PP %d x DP %d x TP %d = %d GPUs (%s), %s, global batch %d, "
           "microbatch %d (M %d a DP rank), bf16; spec %s\n",
           P->name, P->cfg.vocab, P->cfg.seq, P->cfg.dim, P->cfg.heads, P->cfg.layers, P->pp, P->dp, P->tp, n,
           "simulated", vs_pipe_kind_name(P->sched), P->gbs, P->mbs, M, sp.name);
    fflush(stdout);
    double t0 = wall();
    row a, b;
    int dpr = P->dp_run ? P->dp_run : P->dp, das = dpr < P->dp ? P->dp : 0;
    if (standin_step(P->name, &P->cfg, P->pp, dpr, P->tp, P->sched, P->mbs, P->m1, P->recompute, das, &a)) return 1;
    double step = a.step, comp = a.compute;
    if (P->m2 && P->m2 != P->m1) { /* the step for M from two shorter ones: each microbatch more adds the same */
        if (standin_step(P->name, &P->cfg, P->pp, dpr, P->tp, P->sched, P->mbs, P->m2, P->recompute, das, &b)) return 1;
        step = b.step + (b.step - a.step) / (P->m2 - P->m1) * (M - P->m2);
        comp = b.compute + (b.compute - a.compute) / (P->m2 - P->m1) * (M - P->m2);
        printf("  stand-in: M %d step %.4f s, M %d step %.4f s; M %d by the line through them: %.4f s\n", P->m1, a.step,
               P->m2, b.step, M, step);
    } else {
        printf("  stand-in: M %d step %.4f s (compute %.4f, comm %.4f, exposed %.4f, bubble %.4f)\n", P->m1, a.step,
               a.compute, a.comm, a.exposed, a.bubble);
    }
    /* The engine reduces gradients under the backward, so the 2-rank run's
       exposed DP time scaled to dp misses what a longer reduction no
       longer hides: the stand-in times the DP collectives at the full DP size
       across hosts instead (vs_strict_clock_tag_as), and their exposed part is
       in the step as measured. */
    if (dpr < P->dp)
        printf("  stand-in ran DP %d, its DP collectives timed as DP %d across hosts: %.4f s, %.4f exposed (M %d)\n", dpr,
               P->dp, a.comm_tag[TAG_DP], a.exposed_tag[TAG_DP], P->m1);
    printf("  stand-in's host time %.1f s\n", wall() - t0);
    vs_plan_estimate e;
    double plan = planner_step(&P->cfg, P->pp, P->dp, P->tp, P->sched, M, P->gbs, P->recompute, &e);
    double F = model_flops(&P->cfg, P->gbs), peak = sp.flops_bf16 / 1e12;
    double mfu_s = F / n / step / 1e12, mfu_p = plan > 0 ? F / n / plan / 1e12 : 0;
    printf("  planner: step %.4f s (compute %.4f, comm %.4f, bubble %.4f)\n", plan, e.compute_s, e.comm_s, e.bubble_s);
    /* the planner fed the stand-in's compute instead of the peak (its profile's
       flop_s as vs_profile_measure would find it: memory-bound kernels
       included): what is left to disagree on is communication and bubble */
    vs_plan_estimate ec = e;
    double cal = plan;
    for (int it = 0; it < 3 && cal > 0 && ec.compute_s > 0; it++) {
        flop_scale *= comp / ec.compute_s;
        cal = planner_step(&P->cfg, P->pp, P->dp, P->tp, P->sched, M, P->gbs, P->recompute, &ec);
    }
    printf("  planner, flop_s x %.3f (the stand-in's compute %.4f s): step %.4f s (compute %.4f, comm %.4f, bubble "
           "%.4f): %.2f of the stand-in's\n",
           flop_scale, comp, cal, ec.compute_s, ec.comm_s, ec.bubble_s, cal / step);
    flop_scale = 1;
    printf("| %s | PP%d x DP%d x TP%d = %d, %s, GBS %d, MBS %d | %.3f s, %.0f TFLOP/s (%.1f%%) | %.3f s, %.0f TFLOP/s "
           "(%.1f%%) | ",
           P->name, P->pp, P->dp, P->tp, n, vs_pipe_kind_name(P->sched), P->gbs, P->mbs, step, mfu_s,
           100 * mfu_s / peak, plan, mfu_p, 100 * mfu_p / peak);
    /* the published step: the same model flops at its TFLOP/s a GPU */
    if (P->pub_tflops > 0)
        printf("%.2f s, %.0f TFLOP/s of %.0f (%.1f%%) | %.2f | %.2f | %.2f (%.2f) | %.2f | %s |\n",
               F / n / (P->pub_tflops * 1e12), P->pub_tflops, P->pub_peak, 100 * P->pub_tflops / P->pub_peak,
               plan / step, cal / step, mfu_s / P->pub_tflops, (mfu_s / peak) / (P->pub_tflops / P->pub_peak),
               mfu_p / P->pub_tflops, P->source);
    else
        printf("— | %.2f | %.2f | — | — | %s |\n", plan / step, cal / step, P->source);
    return 0;
}

/* ---- the planner at scale: 13B on 1,024 GPUs --------------------------------------------- */

/* The planner's K best plans for GPT-3 13B on 1,024 GPUs (global batch 1,024
   sequences; hosts of 8; f32 gradients; 80 GB a GPU; every layer recomputed;
   no ZeRO-3), each modelled in the stand-in.
   The stand-in runs a plan with DP 2 in place of its dp (the same work a rank:
   rows and microbatches a DP rank as the plan's), M from two shorter runs, and
   the DP collectives timed as over dp ranks across hosts (vs_strict_clock_tag_as;
   scaling the 2-rank run's exposed part under-counts once they run under the
   backward: a longer reduction shows more than in proportion). */
/* One of the planner's plans at 1,024 GPUs in the stand-in (its HSDP shard group
   whole and 2 replicas, M as the plan's: 1-2 runs, extrapolated in M), the DP
   collectives (plain DP's, or the replicas' all-reduce) timed as over dp or dp / S
   ranks across hosts: *step; *w the worst rank's row of the run of
   M microbatches (or the longer one), *mw its M; nm its name (128). 0 or 1 (failed). */
static int run_plan(const vs_plan* p, const gpt_config* cfg, int GBS, char* nm, double* stepp, row* w, int* mw)
{
    int dp = p->dp, M = p->microbatches, mbs = GBS / dp / M, S = p->dp_shard;
    int dpr = S > 1 && S < dp ? 2 * S : dp > 1 ? 2 : 1; /* HSDP: its shard group whole, 2 replicas */
    int m1 = p->pp > 1 ? p->pp : 1, m2 = 2 * m1;
    if (m1 >= M) m1 = M, m2 = 0;
    else if (m2 > M) m2 = M;
    snprintf(nm, 128, "PP%d x DP%d x TP%d %s M%d ZeRO-%d%s%s", p->pp, dp, p->tp, vs_pipe_kind_name(p->schedule), M,
             (int)p->zero, S > 1 && S < dp ? " HSDP" : "", p->recompute[0] ? " recompute" : "");
    run R;
    row a, b;
    memset(&R, 0, sizeof R);
    R.name = nm, R.cfg = *cfg, R.dt = VS_BF16, R.m.pp = p->pp, R.m.dp = dpr, R.m.tp = p->tp;
    R.sched = p->schedule, R.zero = (int)p->zero, R.chunks = p->chunks, R.recompute = p->recompute[0] != 0;
    R.dp_shard = S > 1 && S < dp ? S : 0;
    R.microbatches = m1, R.rows = dpr * m1 * mbs;
    if (R.dp_shard && dp / S > 2) R.dpr_as = dp / S; /* the replicas' all-reduce over dp / S of them, not 2 */
    else if (!R.dp_shard && dp > dpr) R.dp_as = dp;  /* the DP collectives of dp ranks, not 2 */
    int nr = p->pp * dpr * p->tp, bad = run_one(&R);
    memset(&a, 0, sizeof a), b = a;
    for (int k = 0; !bad && k < nr; k++)
        if (R.r[k].step > a.step) a = R.r[k];
    free(R.r), R.r = NULL;
    double step = a.step;
    if (!bad && m2) {
        R.microbatches = m2, R.rows = dpr * m2 * mbs, R.failed = 0;
        bad = run_one(&R);
        for (int k = 0; !bad && k < nr; k++)
            if (R.r[k].step > b.step) b = R.r[k];
        free(R.r);
        step = b.step + (b.step - a.step) / (m2 - m1) * (M - m2);
    }
    if (bad) return 1;
    *stepp = step, *w = m2 ? b : a, *mw = m2 ? m2 : m1;
    return 0;
}

/* tp_s as vs_profile_measure would find it, from the stand-in (issue 35 §3): the
   layers' compute at TP g beyond the planner's (flop_s / g on a sharded unit),
   per byte of the TP all-reduces the planner counts for them
   (_vs_gp_tp_calls: forward output, backward input, the recomputed forward's
   again; msg_bytes_per_row a row). It holds the example's layernorms,
   residual adds and other unsplit work, repeated on every TP rank. Runs the
   planner's first PP1 x TP g plan, M 1, ZeRO-2 (g rows a rank) for g = 1, 2,
   4, 8; TP1's compute calibrates flop_s (*fscale), the others tp_s. 0 or 1. */
/* the planner's first PP1 x TP tp ZeRO-2 plan, M 1, under pf (NULL, said on
   stderr, when there is none); what both calibrations run */
static const vs_plan_estimate* pp1_plan(const vs_model_desc* m, const vs_constraints* c0, const vs_profile* pf, int tp,
                                        const char* who)
{
    static vs_plan_estimate est[1024];
    vs_constraints c = *c0;
    c.pp = 1, c.tp = tp, c.microbatches = 1;
    vs_plan plan;
    int n = 0, i = 0;
    if (vs_generate_plan(m, &c, pf, &plan, est, 1024, &n)) return fprintf(stderr, "planner: %s\n", vs_last_error()), NULL;
    while (i < n && (!est[i].feasible || est[i].plan.zero != VS_ZERO_2)) i++;
    if (i == n) return fprintf(stderr, "%s: no PP1 x TP%d ZeRO-2 plan\n", who, tp), NULL;
    return &est[i];
}

static int NTPCAL = 0; /* tp_s for the planner (--tp-s, or calibrated) */
static int TPCAL_N[VS_PROFILE_AR_GROUPS];
static double TPCAL_S[VS_PROFILE_AR_GROUPS];
static int tp_calibrate(const gpt_config* cfg, const vs_model_desc* m, const vs_constraints* c0, double* fscale)
{
    static vs_plan_estimate est[1024];
    static const int G[] = {1, 2, 4, 8};
    double comp[4] = {0}, pcomp[4] = {0}, bytes[4] = {0};
    const double row_b = (double)c0->msg_bytes_per_row;
    int nar = 0;
    for (int l = 0; l < m->nlayers; l++) /* the TP all-reduces a row, recompute's forward counted again */
        for (int i = 0; i < m->layers[l].nparams; i++) {
            int f = 0, b = 0;
            _vs_gp_tp_calls(&m->layers[l].params[i], &f, &b);
            nar += 2 * f + b;
        }
    vs_strict_spec sp = vs_strict_clock_spec();
    vs_profile pf = spec_profile(&sp, 1);
    pf.flop_s *= *fscale;
    printf("## tp_s calibration: the planner's first PP1 x TP g plan, M 1 (g rows a rank); %d TP all-reduces of %.0f "
           "B a row a step\n\n| TP | plan | stand-in compute | planner compute (flop_s x %.4f) |\n|---|---|---|---|\n",
           nar, row_b, *fscale);
    vs_plan ran[4];
    WARM = 1;
    for (int j = 0; j < 4; j++) {
        const vs_plan_estimate* e = pp1_plan(m, c0, &pf, G[j], "tp_calibrate");
        if (!e) return 1;
        char nm[128];
        row w;
        int mw;
        double step;
        if (run_plan(&e->plan, cfg, c0->global_batch, nm, &step, &w, &mw))
            return fprintf(stderr, "tp_calibrate: %s failed\n", nm), 1;
        comp[j] = w.compute, pcomp[j] = e->compute_s, ran[j] = e->plan;
        bytes[j] = G[j] > 1 ? (double)nar * row_b * c0->global_batch / e->plan.dp : 0;
        printf("| %d | %s | %.4f s | %.4f s |\n", G[j], nm, comp[j], pcomp[j]);
        fflush(stdout);
    }
    /* flop_s x the stand-in's TP1 compute / the planner's (twice: the optimizer's
       part of compute_s does not scale with flop_s), then each plan's estimate again */
    for (int it = 0; it < 2; it++) {
        double cal = comp[0] / pcomp[0];
        *fscale *= cal, pf.flop_s *= cal;
        for (int j = 0; j < 4; j++) {
            vs_constraints c = *c0;
            c.pp = 1, c.tp = G[j], c.microbatches = 1;
            vs_plan plan;
            int n = 0;
            if (vs_generate_plan(m, &c, &pf, &plan, est, 1024, &n))
                return fprintf(stderr, "planner: %s\n", vs_last_error()), 1;
            for (int i = 0; i < n; i++)
                if (est[i].feasible && est[i].plan.dp == ran[j].dp && est[i].plan.zero == ran[j].zero &&
                    est[i].plan.dp_shard == ran[j].dp_shard && est[i].plan.schedule == ran[j].schedule) {
                    pcomp[j] = est[i].compute_s;
                    break;
                }
        }
    }
    printf("\nflop_s x %.4f: the planner's compute at TP 1, 2, 4, 8 %.4f, %.4f, %.4f, %.4f s; the layers' extra "
           "at TP 2, 4, 8: %.4f, %.4f, %.4f s\n",
           *fscale, pcomp[0], pcomp[1], pcomp[2], pcomp[3], comp[1] - pcomp[1], comp[2] - pcomp[2], comp[3] - pcomp[3]);
    NTPCAL = 0;
    for (int j = 1; j < 4; j++, NTPCAL++)
        TPCAL_N[NTPCAL] = G[j], TPCAL_S[NTPCAL] = (comp[j] - pcomp[j]) / bytes[j];
    printf("--flop-scale %.6g --tp-s 2=%.6g,4=%.6g,8=%.6g (s a byte of TP all-reduce)\n\n", *fscale, TPCAL_S[0],
           TPCAL_S[1], TPCAL_S[2]);
    fflush(stdout);
    return 0;
}

/* w_share as vs_profile_measure would find it, from the stand-in: the planner's
   first PP1 x TP1 ZeRO-2 plan, M 1, run with its split layers' B and W timed
   apart on the stream clock (WCAL); W's share of their sum. 0 or 1. */
static int w_calibrate(const gpt_config* cfg, const vs_model_desc* m, const vs_constraints* c0, double fscale)
{
    vs_strict_spec sp = vs_strict_clock_spec();
    vs_profile pf = spec_profile(&sp, 1);
    pf.flop_s *= fscale;
    const vs_plan_estimate* e = pp1_plan(m, c0, &pf, 1, "w_calibrate");
    if (!e) return 1;
    char nm[128];
    row w;
    int mw;
    double step;
    memset(wcal_t, 0, sizeof wcal_t);
    WCAL = 1, WARM = 1;
    int bad = run_plan(&e->plan, cfg, c0->global_batch, nm, &step, &w, &mw);
    WCAL = 0;
    if (bad) return fprintf(stderr, "w_calibrate: %s failed\n", nm), 1;
    double b = wcal_t[GPT_ATTN][0] + wcal_t[GPT_MLP][0], x = wcal_t[GPT_ATTN][1] + wcal_t[GPT_MLP][1];
    W_SHARE = b + x > 0 ? x / (b + x) : 0;
    printf("## w_share calibration: %s, the split layers' B and W on the stream clock (every rank, every step run)\n\n"
           "attention: B %.4f s, W %.4f s (W %.3f); MLP: B %.4f s, W %.4f s (W %.3f); step %.4f s, compute %.4f s\n"
           "--w-share %.4g\n\n",
           nm, wcal_t[GPT_ATTN][0], wcal_t[GPT_ATTN][1], wcal_t[GPT_ATTN][1] / (wcal_t[GPT_ATTN][0] + wcal_t[GPT_ATTN][1]),
           wcal_t[GPT_MLP][0], wcal_t[GPT_MLP][1], wcal_t[GPT_MLP][1] / (wcal_t[GPT_MLP][0] + wcal_t[GPT_MLP][1]), step,
           w.compute, W_SHARE);
    fflush(stdout);
    return 0;
}

static int plan1024(int K, double fscale, int skip, int tpcal, int wcal)
{
    static vs_plan_estimate est[8192];
    const gpt_config* cfg = &PUBS[1].cfg;
    const int W = 1024, GBS = 1024;
    gpt_model_storage st;
    vs_model_desc m;
    if (gpt_model(cfg, &st, &m) || gpt_model_dtype(&st, VS_BF16)) return 1;
    vs_strict_spec sp = vs_strict_clock_spec();
    vs_constraints c;
    memset(&c, 0, sizeof c);
    c.world = W, c.global_batch = GBS, c.node_ranks = sp.gpus_per_node, c.inter_bw_bytes_s = sp.net_bw;
    /* recompute every layer: the example's f32 attention probabilities (and
       their gradients' scratch, 1.76 GB an attention unit and microbatch at
       TP1) do not fit otherwise, in 80 GB or in the stand-in's address space */
    c.grad_fp32 = 1, c.zero3 = -1, c.mem_limit_bytes = 80e9, c.recompute = 1;
    /* what a unit of the example keeps a row (an attention unit its f32
       probabilities, H T^2, and about 16 T D f32 besides, an MLP unit less):
       the average of the two */
    c.act_bytes_per_row = ((int64_t)cfg->heads * cfg->seq * cfg->seq * 4 + (int64_t)16 * cfg->seq * cfg->dim * 4) / 2;
    /* and what crosses a stage's cut (the units' specs leave T free): T x D f32
       a row. Without it the planner sent act_bytes_per_row (16x more at 13B)
       between stages, 13 ms a message over the network: PP4's bubble 2x the
       stand-in's, and PP2 chosen where PP4 was 14% faster */
    c.msg_bytes_per_row = (int64_t)cfg->seq * cfg->dim * 4;
    if (tpcal && tp_calibrate(cfg, &m, &c, &fscale)) return 1;
    if (wcal && w_calibrate(cfg, &m, &c, fscale)) return 1;
    vs_profile pf = spec_profile(&sp, 1);
    pf.flop_s *= fscale;
    pf.w_share = W_SHARE;
    for (int g = 0; g < NTPCAL && g < VS_PROFILE_AR_GROUPS; g++) /* no table: the ring formula, plus tp_s */
        pf.ar_n[g] = TPCAL_N[g], pf.tp_s[g] = TPCAL_S[g];
    vs_plan plan;
    int n = 0;
    if (vs_generate_plan(&m, &c, &pf, &plan, est, 8192, &n)) return fprintf(stderr, "planner: %s\n", vs_last_error()), 1;
    printf("GPT-3 13B on %d simulated H100s, global batch %d, f32 gradients; planner flop_s = %.3g x 1/peak, w_share "
           "%g; %d estimates\n\n| rank | plan | planner step | stand-in step (DP 2 run, M from M %s) | stand-in / planner "
           "|\n|---|---|---|---|---|\n",
           W, GBS, fscale, W_SHARE, n, "1-2 runs");
    for (int i = 0, k = 0; i < n && k < LIST; i++)
        if (est[i].feasible && est[i].plan.zero != VS_ZERO_1) { /* (ZeRO-1 ties with 2: 2's run stands for both) */
            char t[1024];
            vs_plan_print(&est[i].plan, t, sizeof t);
            for (char* q = t; *q; q++)
                if (*q == '\n') *q = ' ';
            printf("# planner's #%d: %s: %.4f s\n", ++k, t, est[i].step_s);
        }
    fflush(stdout);
    double best = 0, first = 0;
    int got = 0, ibest = -1, seen = 0;
    vs_plan ran[64]; /* the plans run: the stand-in's step and compute, the planner's compute */
    double ran_step[64], ran_comp[64], ran_pcomp[64];
    int nrun = 0;
    WARM = 1;
    for (int i = 0; i < n && got < K; i++) {
        const vs_plan_estimate* e = &est[i];
        /* ZeRO-1 and 2 tie in the planner's model (the same traffic): ZeRO-2's run stands for both */
        if (!e->feasible || e->plan.zero == VS_ZERO_1 || seen++ < skip) continue;
        const vs_plan* p = &e->plan;
        char nm[128];
        row wr;
        int mw = 0;
        double step = 0;
        if (run_plan(p, cfg, GBS, nm, &step, &wr, &mw)) {
            printf("| %d | %s | %.4f s | FAILED | |\n", seen, nm, e->step_s);
            got++;
            continue;
        }
        printf("| %d | %s | %.4f s | %.4f s | %.3f |\n", seen, nm, e->step_s, step, step / e->step_s);
        const row* w = &wr; /* (the run of M microbatches, or the longer one) */
        printf("#   stand-in's worst rank (M %d): compute %.4f, comm %.4f (exposed %.4f), bubble %.4f, host-bound %.4f s; "
               "planner: compute %.4f, comm %.4f, bubble %.4f s\n",
               mw, w->compute, w->comm, w->exposed, w->bubble, w->host, e->compute_s, e->comm_s, e->bubble_s);
        printf("#   stand-in's exposed / busy communication by tag (M %d, DP timed at full size):", mw);
        for (int k = 0; k < NTAG; k++)
            if (w->comm_tag[k] > 0) printf(" %s %.4f / %.4f;", tag_names[k], w->exposed_tag[k], w->comm_tag[k]);
        printf("\n");
        fflush(stdout);
        if (nrun < 64) ran[nrun] = *p, ran_step[nrun] = step, ran_comp[nrun] = w->compute,
                       ran_pcomp[nrun++] = e->compute_s;
        if (!got) first = step;
        if (ibest < 0 || step < best) best = step, ibest = seen;
        got++;
    }
    if (!skip && got)
        printf("\nthe planner's first choice in the stand-in: %.4f s; the best the stand-in found among its %d: #%d, %.4f "
               "s: first / best = %.3f (target <= 1.05)\n",
               first, got, ibest, best, first / best);
    /* the planner calibrated on the mesh it chose (what vs_profile_measure
       there would give it): flop_s x the stand-in's compute / the planner's for
       the first plan run; each plan run estimated again, and its new rank */
    if (nrun && ran_pcomp[0] > 0 && ran_comp[0] > 0) {
        double cal = ran_comp[0] / ran_pcomp[0];
        pf.flop_s *= cal;
        if (vs_generate_plan(&m, &c, &pf, &plan, est, 8192, &n))
            return fprintf(stderr, "planner: %s\n", vs_last_error()), 1;
        printf("\nthe planner calibrated on the first plan run's mesh: flop_s x %.4f (%.3g x 1/peak)\n\n| plan | "
               "calibrated planner's rank | its step | stand-in step | stand-in / planner |\n|---|---|---|---|---|\n",
               cal, fscale * cal);
        for (int j = 0; j < nrun; j++) {
            int at = -1, k = 0;
            for (int i = 0; i < n && at < 0; i++)
                if (est[i].feasible && est[i].plan.zero != VS_ZERO_1 && (++k, 1) && est[i].plan.pp == ran[j].pp &&
                    est[i].plan.dp == ran[j].dp && est[i].plan.tp == ran[j].tp &&
                    est[i].plan.schedule == ran[j].schedule && est[i].plan.chunks == ran[j].chunks &&
                    est[i].plan.microbatches == ran[j].microbatches && est[i].plan.zero == ran[j].zero &&
                    est[i].plan.dp_shard == ran[j].dp_shard && !strcmp(est[i].plan.recompute, ran[j].recompute))
                    at = i;
            char t[1024];
            vs_plan_print(&ran[j], t, sizeof t);
            for (char* q = t; *q; q++)
                if (*q == '\n') *q = ' ';
            if (at < 0) printf("| %s | not ranked | | %.4f s | |\n", t, ran_step[j]);
            else printf("| %s | %d | %.4f s | %.4f s | %.3f |\n", t, k, est[at].step_s, ran_step[j],
                        ran_step[j] / est[at].step_s);
        }
        for (int i = 0, k = 0; i < n && k < 6; i++)
            if (est[i].feasible && est[i].plan.zero != VS_ZERO_1) {
                char t[1024];
                vs_plan_print(&est[i].plan, t, sizeof t);
                for (char* q = t; *q; q++)
                    if (*q == '\n') *q = ' ';
                printf("# calibrated planner's #%d: %s: %.4f s (compute %.4f, comm %.4f, bubble %.4f)\n", ++k, t,
                       est[i].step_s, est[i].compute_s, est[i].comm_s, est[i].bubble_s);
            }
    }
    return 0;
}

#ifndef GM_NO_MAIN /* tests/test_strict_train.c includes this file for its runs */
int main(int argc, char** argv)
{
    int per_rank = 0;
    const char *only = NULL, *pub = NULL;
    int p1024 = 0, top = 5, skip = 0, tensor = 0, tpcal = 0, wcal = 0;
    double fscale = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ranks")) per_rank = 1;
        else if (!strcmp(argv[i], "--tensor")) tensor = 1;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--published") && i + 1 < argc) pub = argv[++i];
        else if (!strcmp(argv[i], "--plan1024")) p1024 = 1;
        else if (!strcmp(argv[i], "--top") && i + 1 < argc) top = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--skip") && i + 1 < argc) skip = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--flop-scale") && i + 1 < argc) fscale = atof(argv[++i]);
        else if (!strcmp(argv[i], "--tp-cal")) tpcal = 1;
        else if (!strcmp(argv[i], "--w-cal")) wcal = 1;
        else if (!strcmp(argv[i], "--w-share") && i + 1 < argc) W_SHARE = atof(argv[++i]);
        else if (!strcmp(argv[i], "--list") && i + 1 < argc) LIST = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tp-s") && i + 1 < argc) { /* g=s[,g=s...]: the planner's tp_s */
            for (char* q = argv[++i]; q && *q && NTPCAL < VS_PROFILE_AR_GROUPS; NTPCAL++) {
                TPCAL_N[NTPCAL] = (int)strtol(q, &q, 10);
                if (*q++ != '=') return fprintf(stderr, "gpu_model: --tp-s wants g=s[,g=s]\n"), 2;
                TPCAL_S[NTPCAL] = strtod(q, &q);
                if (*q == ',') q++;
            }
        }
        else return fprintf(stderr, "gpu_model: unknown argument '%s'\n", argv[i]), 2;
    }
    setenv("VS_STRICT_COST_ONLY", "1", 0); /* before the stand-in's first call */
    for (size_t i = 0; pub && i < sizeof PUBS / sizeof PUBS[0]; i++)
        if (!strcmp(pub, PUBS[i].name)) {
            char nd[16];
            snprintf(nd, sizeof nd, "%d", PUBS[i].pp * (PUBS[i].dp_run ? PUBS[i].dp_run : PUBS[i].dp) * PUBS[i].tp);
            setenv("VS_STRICT_DEVICES", nd, 1);
        }
    gpt_strict_register();
    /* the published shapes and the 1,024-GPU plans stand beside production runs: --tensor */
    if (tensor || pub || p1024) register_tensor_costs(), tensor_on = 1;
    if (p1024) setenv("VS_STRICT_DEVICES", "64", 0); /* (each device gets 1/n of the 32 TiB: the largest run's ranks) */
    int bad = p1024 ? plan1024(top, fscale, skip, tpcal, wcal) : pub ? published(pub) : table(per_rank, only);
    long v = vs_strict_violations();
    if (v) printf("\n%ld stand-in violations, the first: %s\n", v, vs_strict_first_violation());
    return bad || v ? 1 : 0;
}
#endif
