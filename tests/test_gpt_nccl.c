/* test_gpt_nccl.c - the example GPT (examples/gpt.h) on GPUs, over the strict
   CUDA + NCCL stand-in (tests/strict/: 8 simulated GPUs, device memory the host
   cannot read, asynchronous streams, a stand-in NCCL that rejects host
   pointers). gpt.h's units on a device run examples/gpt_kernels.h's kernels on
   the compute stream vescale gives them (vs_pipe_call.stream), NVRTC-compiled;
   the stand-in runs each kernel as its host build in the device's block order
   (registered below). Checked, on a small GPT (V 32, T 8, D 32, 4 heads, 2
   layers, 8 rows a step):
   - PP2 x DP2 x TP2 (1F1B) on 8 simulated GPUs, f32: the losses of the same
     model on one host rank (gpt.h's f32 loops) within 1e-5 relative for every
     step, and every final parameter within 1e-5 of its tensor's largest value;
   - DP2 x TP2 with sequence parallelism on 4 simulated GPUs, the same;
   - bf16 parameters (f32 masters and gradients): PP2 x DP2 x TP2 on the GPUs
     against bf16 on one host rank (the kernels' host build) and against the
     f32 run, within the bounds measured below;
   - ZeRO-1 on PP2 x DP2 x TP2 freed right after a step (vs_train_free's fix);
   - bf16 on the host: out-of-range tokens and targets are errors naming them;
   - no device allocation in a steady-state step; no stand-in violation. */
#define VESCALE_IMPLEMENTATION
#include "../vescale.h"
#include "../examples/gpt.h"
#include "vs_test.h"

#include <math.h>
#include <stdlib.h>

#include "strict/vs_strict.h"
#include "gpt_strict_kernels.h" // the stand-in runs gpt_kernels.h's kernels: their device-order host build

enum { ROWS = 8, STEPS = 4, MAXP = 2 + 2 * 16, MAXEL = 32 * 32 * 4 };

static const gpt_config CFG = {32, 8, 32, 4, 2, 99};
static gpt_model_storage STORE;
static vs_model_desc MODEL;

/* --- runs ------------------------------------------------------------------ */
typedef struct run {
    vs_plan plan;
    vs_dtype dtype;
    double loss[STEPS];
    int np;                         // parameters (the tied wte once)
    const char* pname[MAXP];
    int64_t psize[MAXP];
    float params[MAXP][MAXEL];      // after the run, as f32
    int no_read;                    // 1: vs_train_free right after the last step (no parameter read)
    long steady_allocs;             // device allocations in the last step (every rank)
    long steady_launches;           // kernel launches in the last step (every rank)
    double steady_syncs;            // host syncs in the last step, per rank
} run;

static pthread_barrier_t bar;

static int rank_fn(vs_world* w, void* arg)
{
    run* R = (run*)arg;
    int dev = vs_comm_device(vs_world_comm(w)) == 1;
    int32_t *tok = NULL, *tgt = NULL;
    size_t bytes = sizeof(int32_t) * ROWS * 8;
    if (dev) { // pinned: the batch's copies are asynchronous
        VT_CHECK(cudaMallocHost((void**)&tok, bytes) == cudaSuccess && cudaMallocHost((void**)&tgt, bytes) == cudaSuccess,
                 "cudaMallocHost");
    } else
        tok = (int32_t*)malloc(bytes), tgt = (int32_t*)malloc(bytes);
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &MODEL;
    d.plan = &R->plan;
    d.optim.kind = VS_OPTIM_ADAMW;
    d.optim.weight_decay = 0.01;
    d.lr.lr = 3e-3;
    d.clip = 1.0;
    d.grad_fp32 = R->dtype != VS_F32;
    vs_train* t = NULL;
    vs_result r = vs_parallelize(w, &d, &t);
    VT_CHECK(r == VS_OK, "parallelize: %s", vs_last_error());
    if (r) return 1;
    vs_batch b = gpt_batch_view(ROWS, CFG.seq, tok, tgt);
    for (int s = 0; s < STEPS; s++) {
        gpt_batch(&CFG, s, ROWS, tok, tgt);
        int last = s == STEPS - 1;
        vs_strict_counts c0;
        memset(&c0, 0, sizeof c0);
        if (last && dev) {
            pthread_barrier_wait(&bar);
            c0 = vs_strict_get_counts();
            pthread_barrier_wait(&bar);
        }
        double l = 0;
        r = vs_train_step(t, &b, &l);
        VT_CHECK(r == VS_OK, "step %d: %s", s, vs_last_error());
        if (r) return 1;
        if (last && dev) {
            pthread_barrier_wait(&bar);
            if (vs_world_rank(w) == 0) {
                vs_strict_counts c1 = vs_strict_get_counts();
                R->steady_allocs = c1.device_allocs - c0.device_allocs;
                R->steady_launches = c1.launches - c0.launches;
                R->steady_syncs = (double)(c1.host_syncs - c0.host_syncs) / vs_world_size(w);
            }
            pthread_barrier_wait(&bar);
        }
        if (vs_world_rank(w) == 0) R->loss[s] = l;
    }
    static float buf[MAXEL]; // (every rank reads; rank 0 keeps: its copy is whole)
    uint16_t* h = (uint16_t*)malloc(sizeof(float) * MAXEL);
    int np = 0;
    for (int u = 0; u < MODEL.nlayers && !R->no_read; u++)
        for (int i = 0; i < MODEL.layers[u].nparams; i++) {
            const vs_param_decl* p = &MODEL.layers[u].params[i];
            if (u == MODEL.nlayers - 1 && !strcmp(p->name, "wte")) continue; // tied: the embedding's
            int64_t n = p->shape[0] * (p->ndim > 1 ? p->shape[1] : 1);
            VT_OK(vs_train_get_param(t, p->name, h, sizeof(float) * MAXEL));
            if (vs_world_rank(w) == 0 && np < MAXP) {
                for (int64_t e = 0; e < n; e++)
                    buf[e] = R->dtype == VS_BF16 ? vs_bf16_to_f32(h[e]) : ((const float*)h)[e];
                memcpy(R->params[np], buf, sizeof(float) * (size_t)n);
                R->pname[np] = p->name, R->psize[np] = n;
                np++;
            }
        }
    if (vs_world_rank(w) == 0) R->np = np;
    free(h);
    VT_OK(vs_train_free(t));
    if (dev) cudaFreeHost(tok), cudaFreeHost(tgt);
    else free(tok), free(tgt);
    return 0;
}

static void go(run* R, int nranks, vs_transport tr)
{
    VT_OK(gpt_model(&CFG, &STORE, &MODEL));
    VT_OK(gpt_model_dtype(&STORE, R->dtype ? R->dtype : VS_F32));
    if (!R->plan.microbatches) R->plan.microbatches = 2;
    pthread_barrier_init(&bar, NULL, (unsigned)nranks);
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = nranks;
    ld.transport = tr;
    ld.timeout_s = 60;
    VT_OK(vs_launch_ex(&ld, rank_fn, R));
    pthread_barrier_destroy(&bar);
}

/* a's losses within tol relative of ref's, its parameters within ptol of each
   tensor's largest value (ptol < 0: within -ptol absolute); prints both figures
   (the parameters' relative to the largest value, or absolute). */
static void compare_p(const char* what, const run* a, const run* ref, double tol, double ptol, const char* refname)
{
    double wl = 0, wp = 0;
    for (int s = 0; s < STEPS; s++) {
        double e = fabs(a->loss[s] - ref->loss[s]) / fabs(ref->loss[s]);
        VT_CHECK(e <= tol, "%s: step %d loss %.9g, %s %.9g (relative %.2e, at most %.0e)", what, s, a->loss[s],
                 refname, ref->loss[s], e, tol);
        wl = e > wl ? e : wl;
    }
    VT_CHECK(a->np == ref->np && a->np > 0, "%s: %d parameters, %s %d", what, a->np, refname, ref->np);
    for (int p = 0; p < a->np && p < ref->np; p++) {
        double scale = 0, diff = 0;
        int64_t at = 0;
        for (int64_t i = 0; i < ref->psize[p]; i++) scale = fmax(scale, fabs(ref->params[p][i]));
        for (int64_t i = 0; i < ref->psize[p]; i++) {
            double e = fabs((double)a->params[p][i] - ref->params[p][i]);
            if (e > diff || e != e) diff = e != e ? INFINITY : e, at = i;
        }
        VT_CHECK(ptol < 0 ? diff <= -ptol : diff <= ptol * scale, "%s: %s[%lld] = %.9g, %s %.9g (max |diff| %.3g, max |value| %.3g)", what,
                 ref->pname[p], (long long)at, (double)a->params[p][at], refname, (double)ref->params[p][at], diff,
                 scale);
        if (ptol < 0 && diff > wp) wp = diff;
        if (ptol >= 0 && scale > 0 && diff / scale > wp) wp = diff / scale;
    }
    printf("    %s: largest difference from %s: losses %.2e relative, parameters %.2e %s\n", what, refname, wl, wp,
           ptol < 0 ? "absolute" : "of the tensor's largest value");
}
static void compare(const char* what, const run* a, const run* ref, double tol, const char* refname)
{
    compare_p(what, a, ref, tol, tol, refname);
}

static run REF, BREF; // one host rank: f32 (gpt.h's loops), bf16 (the kernels' host build)

static void case_mesh(const char* what, int pp, int dp, int tp, int sp)
{
    static run R;
    memset(&R, 0, sizeof R);
    R.plan.pp = pp, R.plan.dp = dp, R.plan.tp = tp, R.plan.sequence_parallel = sp;
    R.plan.microbatches = 4 / dp;
    go(&R, pp * dp * tp, VS_TRANSPORT_NCCL);
    compare(what, &R, &REF, 1e-5, "one host rank");
    VT_CHECK(R.steady_allocs == 0, "%s: %ld device allocations in a steady step", what, R.steady_allocs);
    // the units ran as kernels (the host loops on device memory would be host-access violations)
    VT_CHECK(R.steady_launches >= 20 * pp * dp * tp, "%s: %ld kernel launches in a steady step", what,
             R.steady_launches);
    printf("    %s: %.2f host syncs per rank, %ld kernel launches in all in a steady step\n", what, R.steady_syncs,
           R.steady_launches);
    /* issue 21's count: one host wait a step (the norm's read, which brings the loss) */
    VT_CHECK(R.steady_syncs <= 1 + 1e-9, "%s: %.2f host syncs per rank in a steady step (at most 1)", what,
             R.steady_syncs);
}

/* bf16 parameters, f32 masters and gradients. Measured (4 steps, lr 3e-3):
     bf16 on one host rank vs f32:              losses 3.2e-4, parameters 9.5e-3 absolute
     bf16 on PP2 x DP2 x TP2 GPUs vs f32:       the same
     bf16 on the GPUs vs bf16 on one host rank: losses 1.3e-7, parameters 5.3e-3 of the
                                                tensor's largest value (one bf16 step)
   The bounds: the losses' with headroom; against f32 the parameters within 2 lr a
   step (AdamW moves an element about lr a step, whatever its gradient, so an
   element whose gradient is near zero may move either way: relative measures
   mean nothing there); against bf16 on one rank one bf16 step of the tensor's
   largest value (2^-7 of it at most: an f32 master a few ulps off rounds to the
   neighbouring bf16). */
#define BF16_VS_F32_LOSS 2e-3
#define BF16_VS_F32_PARAM (2 * 3e-3 * STEPS)
#define BF16_MESH_LOSS 1e-5
#define BF16_MESH_PARAM 7.8125e-3
static void case_bf16(void)
{
    static run R;
    memset(&R, 0, sizeof R);
    R.dtype = VS_BF16;
    R.plan.pp = 2, R.plan.dp = 2, R.plan.tp = 2, R.plan.microbatches = 2;
    go(&R, 8, VS_TRANSPORT_NCCL);
    compare_p("bf16, one host rank", &BREF, &REF, BF16_VS_F32_LOSS, -BF16_VS_F32_PARAM, "the f32 run");
    compare_p("bf16, PP2 x DP2 x TP2 GPUs", &R, &REF, BF16_VS_F32_LOSS, -BF16_VS_F32_PARAM, "the f32 run");
    compare_p("bf16, PP2 x DP2 x TP2 GPUs", &R, &BREF, BF16_MESH_LOSS, BF16_MESH_PARAM, "bf16 on one host rank");
    VT_CHECK(R.steady_allocs == 0, "bf16: %ld device allocations in a steady step", R.steady_allocs);
}

/* ZeRO-1 on PP2 x DP2 x TP2 GPUs, freed right after the last step: its parameter
   all-gathers are still in flight on DDP's stream; vs_train_free finishes them
   before it frees a communicator (it freed the pipe's first, whose cudaFree
   synchronised the device under them: the stand-in's free-during-collective). */
static void case_free_after_step(void)
{
    static run R;
    memset(&R, 0, sizeof R);
    R.plan.pp = 2, R.plan.dp = 2, R.plan.tp = 2, R.plan.zero = VS_ZERO_1, R.plan.microbatches = 2, R.no_read = 1;
    long v0 = vs_strict_violations();
    go(&R, 8, VS_TRANSPORT_NCCL);
    for (int s = 0; s < STEPS; s++)
        VT_CHECK(fabs(R.loss[s] - REF.loss[s]) <= 1e-5 * fabs(REF.loss[s]), "ZeRO-1: step %d loss %.9g, one rank %.9g", s,
                 R.loss[s], REF.loss[s]);
    VT_CHECK(vs_strict_violations() == v0, "%ld violations, the first: %s", vs_strict_violations() - v0,
             vs_strict_first_violation());
}

/* bf16 on the host (the kernels' host build): a token or target outside the
   vocabulary is an error naming it, as gpt.h's f32 loops report it. */
static int bad_ids_rank(vs_world* w, void* arg)
{
    (void)arg;
    vs_plan p;
    memset(&p, 0, sizeof p);
    p.microbatches = 1;
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &MODEL, d.plan = &p, d.optim.kind = VS_OPTIM_ADAMW, d.lr.lr = 1e-3, d.grad_fp32 = 1;
    vs_train* t = NULL;
    VT_OK(vs_parallelize(w, &d, &t));
    if (!t) return 1;
    int32_t tok[ROWS * 8], tg[ROWS * 8];
    gpt_batch(&CFG, 0, ROWS, tok, tg);
    vs_batch b = gpt_batch_view(ROWS, CFG.seq, tok, tg);
    double l = 0;
    tok[5] = CFG.vocab;
    VT_EXPECT_ERR(vs_train_step(t, &b, &l), VS_ERR_INVALID, "gpt embed: token 32 at 5", "outside [0, 32)");
    tok[5] = 1, tg[3] = -1;
    VT_EXPECT_ERR(vs_train_step(t, &b, &l), VS_ERR_INVALID, "gpt head: target -1 at 3", "outside [0, 32)");
    VT_OK(vs_train_free(t));
    return 0;
}
static void case_bad_ids(void)
{
    VT_OK(gpt_model(&CFG, &STORE, &MODEL));
    VT_OK(gpt_model_dtype(&STORE, VS_BF16));
    VT_OK(vs_launch(1, bad_ids_rank, NULL));
}

int main(void)
{
    setenv("VS_STRICT_DELAY_US", "20", 0); // a random delay before every stream operation
    gpt_strict_register();
    memset(&REF, 0, sizeof REF);
    REF.plan.microbatches = 4;
    VT_CASE("gpt/host: one rank, f32 (the reference)", go(&REF, 1, VS_TRANSPORT_THREADS));
    memset(&BREF, 0, sizeof BREF);
    BREF.dtype = VS_BF16, BREF.plan.microbatches = 4;
    VT_CASE("gpt/host: one rank, bf16 parameters (the kernels' host build)", go(&BREF, 1, VS_TRANSPORT_THREADS));
    VT_CASE("gpt/nccl: PP2 x DP2 x TP2 on 8 simulated GPUs equals one host rank within 1e-5; no device allocation in "
            "a steady step", case_mesh("PP2 x DP2 x TP2", 2, 2, 2, 0));
    VT_CASE("gpt/nccl: DP2 x TP2 with sequence parallelism on 4 simulated GPUs equals one host rank within 1e-5",
            case_mesh("DP2 x TP2, sequence parallel", 1, 2, 2, 1));
    VT_CASE("gpt/bf16: bf16 parameters on PP2 x DP2 x TP2 GPUs track bf16 on one host rank and the f32 run within "
            "the measured bounds", case_bf16());
    VT_CASE("gpt/nccl: ZeRO-1 on PP2 x DP2 x TP2 GPUs freed right after a step: no communicator freed under its "
            "all-gathers", case_free_after_step());
    VT_CASE("gpt/bf16 on the host: a token or target outside the vocabulary is an error naming it", case_bad_ids());
    VT_CASE("strict/no violations", VT_CHECK(vs_strict_violations() == 0, "%ld violations, the first: %s",
                                             vs_strict_violations(), vs_strict_first_violation()));
    return vt_summary();
}
