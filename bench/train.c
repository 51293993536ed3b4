/* bench/train.c - the example GPT (examples/gpt.h) through vescale.h's high-level
   API: throughput on thread ranks, the library's own overhead per step, and the
   planner's predicted step time against the measured one on 8 ranks.

       cc -std=c99 -O2 -D_POSIX_C_SOURCE=200809L -I. -o build/bench_train bench/train.c -lpthread -lm
       build/bench_train [--reps 7] [--steps-model-ms 400] [--profile-rows 16] [--skip-real] [--skip-plan]
                         [--strict]
   (bench/run_train.sh builds and runs it; make bench-train.)

   Model: vocab 64, seq 32, dim 64, 8 heads, 4 blocks (10 units: embed, 4 x
   attention + MLP, head), 16 rows (512 tokens) per global batch, AdamW, no clip.

   (a) tokens/s: the real model (f32 math on the CPU) through vs_train_step on 1,
       2 and 4 thread ranks: DP (1x2x1, 1x4x1), TP (1x1x2, 1x1x4), PP (2x1x1,
       4x1x1; 1f1b, 4 x pp microbatches), ZeRO-0. One warm-up step, then the median
       of --reps steps (barrier, step, barrier, on rank 0's clock). The machine has 2
       cores: 4 thread ranks share them, so 4-rank figures measure the library on an
       oversubscribed CPU, not a 4-device speed-up.
   (b) overhead, on the same runs. Each rank splits every step (wall time of its
       vs_train_step) into:
         compute  the model's callbacks: the copy of the model's layer table given
                  to vs_parallelize has each forward/backward/backward_input/
                  backward_weight wrapped by a timer; minus the TP calls below;
         tp       time inside the vs_tp_* and vs_vocab_* calls the callbacks make
                  (gpt.h's calls are redirected by macro to timing wrappers): the
                  TP transport (the vocab calls' small gathers and softmax count
                  here too);
         p2p      the pipe engine's SEND and RECV instructions, from
                  vs_pipe_last_timeline (the instruction list regenerated with
                  vs_pipe_generate): the PP transport, waits included;
         post     from the end of the pipeline run (its last instruction) to the
                  return of vs_train_step: DP gradient-sync wait, the loss's
                  all-reduce and the AdamW step, i.e. the DP transport and the
                  optimizer (the training step's own arithmetic); shown apart;
         hwait    time inside the SYNC and STEP hooks when the rank's thread was
                  not on a CPU (vs_pipe_last_hooks: wall less thread CPU time):
                  waiting on the transport a hook starts or joins, i.e. DDP's
                  bucket reductions (their progress threads take the core when
                  ranks outnumber cores) and vs_pipe_tie_grads' exchange with the
                  other stage;
         overhead the rest: before the pipeline's first instruction (zero_grad,
                  parameter views), and inside the run everything outside the
                  callbacks and SEND/RECV: the engine's dispatch between
                  instructions, the data callback slicing the batch, the SYNC and
                  STEP hooks' own CPU time (vs_ddp_grad_ready launching the
                  bucket reductions, the tied gradients' sums).
       The run's start on the absolute clock is the first callback's start minus
       its F instruction's start in the timeline (the data callback's few us before
       it fall into post's side: an under-count of at most that). The share
       reported: sum of overhead / sum of step over the ranks and timed steps.
       Target: under 2%.
   (c) modelled device time, 8 thread ranks: every unit's callbacks are replaced
       by ones that sleep (absolute deadline, no core held) for the cost the
       planner assumes, flops x rows x FLOP_S / tp (sharded layers; backward twice
       forward, a split backward's two parts once each), give outputs of the right
       shapes (their contents unwritten: that is the device's work, which takes
       no host core; the loss is ln V) and make the same TP calls as gpt.h's
       (vocab embedding and cross-entropy, reduce_forward / copy_backward on
       [n, D]); so 8 ranks behave like 8 devices whose only shared resource is the
       transport. vs_profile_measure calibrates on the same model once (a
       microbatch of --profile-rows rows, 16; its tp_s runs the layers on TP2,
       TP4 and TP8 in place); then for
       every mesh PPxDPxTP of 8 ranks, vs_generate_plan with the mesh fixed gives
       the best configuration (schedule, microbatches, ZeRO) and its predicted
       step; vs_train_step runs it (1 warm-up, --reps timed, barrier to barrier,
       median). Reported: the table, the median |predicted/measured - 1| (target
       10%), Kendall's tau between the rankings (target 0.8), and the measured
       time of the planner's first choice against the measured best (target 5%).
       The batch there is 64 rows, FLOP_S such that one device takes
       --steps-model-ms for the whole step.

   Summary lines: "summary train <metric>=<x> target... PASS|FAIL". Exit 1 when a
   loss is not finite or a run fails; with --strict also when a target is missed. */
#define VESCALE_IMPLEMENTATION
#include "vescale.h"
#include "bench_util.h"

#include <math.h>
#include <malloc.h>
#include <sys/prctl.h>

/* Per thread rank: what its callbacks and TP calls took. */
typedef struct bt_tl {
    double cb, tp, first_cb;
    int modelled;
} bt_tl;
static __thread bt_tl TL;

static vs_result bt_tp_reduce_forward(vs_mesh* m, void* x, size_t n, vs_dtype dt)
{
    double t0 = now();
    vs_result r = vs_tp_reduce_forward(m, x, n, dt);
    TL.tp += now() - t0;
    return r;
}
static vs_result bt_tp_copy_backward(vs_mesh* m, void* x, size_t n, vs_dtype dt)
{
    double t0 = now();
    vs_result r = vs_tp_copy_backward(m, x, n, dt);
    TL.tp += now() - t0;
    return r;
}
static vs_result bt_vocab_embedding_forward(vs_mesh* m, const float* tab, int64_t V, int64_t D, const int32_t* ids,
                                            int64_t n, float* out)
{
    double t0 = now();
    vs_result r = vs_vocab_embedding_forward(m, tab, V, D, ids, n, out);
    TL.tp += now() - t0;
    return r;
}
static vs_result bt_vocab_embedding_backward(vs_mesh* m, const float* g, const int32_t* ids, int64_t n, int64_t V,
                                             int64_t D, float* gt)
{
    double t0 = now();
    vs_result r = vs_vocab_embedding_backward(m, g, ids, n, V, D, gt);
    TL.tp += now() - t0;
    return r;
}
static vs_result bt_vocab_cross_entropy(vs_mesh* m, const float* lg, int64_t n, int64_t V, const int32_t* tg,
                                        float* loss, float* g)
{
    double t0 = now();
    vs_result r = vs_vocab_cross_entropy(m, lg, n, V, tg, loss, g);
    TL.tp += now() - t0;
    return r;
}
#define vs_tp_reduce_forward bt_tp_reduce_forward
#define vs_tp_copy_backward bt_tp_copy_backward
#define vs_vocab_embedding_forward bt_vocab_embedding_forward
#define vs_vocab_embedding_backward bt_vocab_embedding_backward
#define vs_vocab_cross_entropy bt_vocab_cross_entropy
#include "../examples/gpt.h"

static gpt_config CFG = {64, 32, 64, 8, 4, 1234};
static gpt_model_storage STORE;
static vs_model_desc MODEL;   // gpt.h's
static vs_layer_decl WRAPPED[GPT_MAX_UNITS]; // the copy vs_parallelize gets
static vs_model_desc WMODEL;
static int NU;
static int reps = 7;
static double model_ms = 400, FLOP_S = 1e-10;
static int prof_rows = 16; // (c): the profile's microbatch
static int failed; // wrong data

// >>wrappers: time the model's own callbacks (real mode) or model them (modelled mode)

static double bt_flops(int u) { return MODEL.layers[u].unit.flops; }

static void sleep_until(double t)
{
    double f = floor(t);
    struct timespec dl;
    dl.tv_sec = (time_t)f;
    dl.tv_nsec = (long)((t - f) * 1e9);
    if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &dl, NULL) == EINTR) {
    }
}

/* Modelled compute of unit u on `rows` rows, x parts (1: forward, B or W; 2: full backward). */
static void bt_model_compute(const vs_pipe_call* c, int64_t rows, double parts)
{
    vs_layer_ctx* L = vs_layer(c);
    double t = parts * bt_flops(c->unit) * (double)rows * FLOP_S / (L->tp_size > 0 ? L->tp_size : 1);
    sleep_until(now() + t);
}

static vs_result bt_m_forward(vs_pipe_call* c)
{
    vs_layer_ctx* L = vs_layer(c);
    const gpt_unit* gu = (const gpt_unit*)L->user;
    int64_t B = c->in[0].shape[0], T = c->in[0].shape[1], D = CFG.dim, V = CFG.vocab, n = B * T;
    vs_result r;
    if (gu->kind == GPT_HEAD) {
        bt_model_compute(c, B, 1);
        float* loss;
        if ((r = vs_pipe_output(c, 0, VS_F32, 0, NULL, (void**)&loss))) return r;
        *loss = (float)log((double)V);
        if (!L->tp) return VS_OK;
        int64_t Vl = L->local_shape[2][0];
        float* buf = (float*)calloc((size_t)(n * Vl + n), sizeof(float));
        if (!buf) return vs_set_error(VS_ERR_NOMEM, "bench head");
        r = vs_vocab_cross_entropy(L->tp, buf, n, V, (const int32_t*)c->in[1].data, buf + n * Vl, NULL);
        free(buf);
        return r;
    }
    int64_t sh[3] = {B, T, D};
    float* x;
    if ((r = vs_pipe_output(c, 0, VS_F32, 3, sh, (void**)&x))) return r;
    bt_model_compute(c, B, 1);
    if (gu->kind == GPT_EMBED) {
        if (L->tp) return vs_vocab_embedding_forward(L->tp, (const float*)L->param[0], V, D,
                                                     (const int32_t*)c->in[0].data, n, x);
        return VS_OK;
    }
    /* The output's contents are left as the engine's buffer has them: writing
       them is the modelled device's work, which must not take a host core (a
       512 KiB copy per layer and rank on 2 cores showed as 5-10% of a TP8 step). */
    return L->tp ? vs_tp_reduce_forward(L->tp, x, (size_t)(n * D), VS_F32) : VS_OK;
}

static vs_result bt_m_back(vs_pipe_call* c, double parts, int input_grad)
{
    vs_layer_ctx* L = vs_layer(c);
    const gpt_unit* gu = (const gpt_unit*)L->user;
    int64_t B = c->in[0].shape[0], n = B * CFG.seq, D = CFG.dim;
    bt_model_compute(c, B, parts);
    if (!input_grad || gu->kind == GPT_EMBED || !c->in[0].grad) return VS_OK;
    // the input's gradient: as the forward's output, its contents are the device's
    return L->tp ? vs_tp_copy_backward(L->tp, c->in[0].grad, (size_t)(n * D), VS_F32) : VS_OK;
}
static vs_result bt_m_backward(vs_pipe_call* c) { return bt_m_back(c, 2, 1); }
static vs_result bt_m_backward_input(vs_pipe_call* c) { return bt_m_back(c, 1, 1); }
static vs_result bt_m_backward_weight(vs_pipe_call* c) { return bt_m_back(c, 1, 0); }

#define BT_WRAP(name, field, mfn)                                   \
    static vs_result name(vs_pipe_call* c)                          \
    {                                                               \
        double t0 = now();                                          \
        if (TL.first_cb < 0) TL.first_cb = t0;                      \
        vs_result r = TL.modelled ? mfn(c) : MODEL.layers[c->unit].unit.field(c); \
        TL.cb += now() - t0;                                        \
        return r;                                                   \
    }
BT_WRAP(bt_forward, forward, bt_m_forward)
BT_WRAP(bt_backward, backward, bt_m_backward)
BT_WRAP(bt_backward_input, backward_input, bt_m_backward_input)
BT_WRAP(bt_backward_weight, backward_weight, bt_m_backward_weight)
#undef BT_WRAP

static void build_wrapped(void)
{
    NU = MODEL.nlayers;
    for (int u = 0; u < NU; u++) {
        WRAPPED[u] = MODEL.layers[u];
        vs_pipe_unit* x = &WRAPPED[u].unit;
        const vs_pipe_unit* o = &MODEL.layers[u].unit;
        x->forward = o->forward ? bt_forward : NULL;
        x->backward = o->backward ? bt_backward : NULL;
        x->backward_input = o->backward_input ? bt_backward_input : NULL;
        x->backward_weight = o->backward_weight ? bt_backward_weight : NULL;
    }
    WMODEL = MODEL;
    WMODEL.layers = WRAPPED;
}

// >>runs ----------------------------------------------------------------------

typedef struct run {
    vs_plan plan;
    int rows, modelled, steps;
    double step_med;            // rank 0: median barrier-to-barrier step
    double loss0, loss_last;
    // (b), summed over ranks and timed steps
    double s_step, s_comp, s_tp, s_p2p, s_post, s_over, s_hooks, s_pre, s_hwait;
    pthread_mutex_t mu;
    int err;
} run;

static void bt_fill_batch(int rows, int64_t step, int32_t* tok, int32_t* tgt, vs_batch* b)
{
    gpt_batch(&CFG, step, rows, tok, tgt);
    *b = gpt_batch_view(rows, CFG.seq, tok, tgt);
}

static int bt_rank(vs_world* w, void* arg)
{
    run* R = (run*)arg;
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    memset(&TL, 0, sizeof TL);
    TL.modelled = R->modelled;
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &WMODEL;
    d.plan = &R->plan;
    d.optim.kind = VS_OPTIM_ADAMW;
    d.lr.lr = 1e-3;
    vs_train* t = NULL;
    vs_pipe_sched* s = NULL;
    int32_t* tok = (int32_t*)malloc(sizeof(int32_t) * (size_t)R->rows * (size_t)CFG.seq);
    int32_t* tgt = (int32_t*)malloc(sizeof(int32_t) * (size_t)R->rows * (size_t)CFG.seq);
    double* ts = (double*)calloc((size_t)R->steps + 1, sizeof(double));
    vs_result r = tok && tgt && ts ? VS_OK : VS_ERR_NOMEM;
    if (!r) r = vs_parallelize(w, &d, &t);
    vs_pipe* pipe = t ? vs_train_pipe(t) : NULL;
    const vs_plan* p = &R->plan;
    int V = p->chunks ? p->chunks : (p->schedule == VS_PIPE_ZBV || p->schedule == VS_PIPE_DUALPIPEV ? 2 : 1);
    if (!r) r = vs_pipe_generate(NULL, p->schedule ? p->schedule : VS_PIPE_1F1B, p->pp > 0 ? p->pp : 1, V,
                                 p->microbatches > 0 ? p->microbatches : 1, &s);
    int stage = pipe ? vs_pipe_stage(pipe) : 0;
    vs_comm* wc = vs_world_comm(w);
    double a_step = 0, a_comp = 0, a_tp = 0, a_p2p = 0, a_post = 0, a_over = 0, a_hooks = 0, a_pre = 0, a_hwait = 0;
    for (int i = 0; !r && i <= R->steps; i++) {
        vs_batch b;
        bt_fill_batch(R->rows, i, tok, tgt, &b);
        double loss = 0;
        r = vs_barrier(wc, NULL);
        TL.cb = TL.tp = 0, TL.first_cb = -1;
        double t0 = now();
        if (!r) r = vs_train_step(t, &b, &loss);
        double t1 = now();
        if (!r) r = vs_barrier(wc, NULL);
        ts[i] = now() - t0;
        if (r) break;
        if (!isfinite(loss)) {
            fprintf(stderr, "bench train: step %d loss %g is not finite\n", i, loss);
            r = VS_ERR_INVALID;
            break;
        }
        if (vs_world_rank(w) == 0) {
            if (i == 0) R->loss0 = loss;
            R->loss_last = loss;
        }
        if (i == 0) continue; // warm-up
        const double *s0, *s1;
        int n = 0;
        if ((r = vs_pipe_last_timeline(pipe, &s0, &s1, &n))) break;
        double p2p = 0, hooks = 0, start = -1, end = 0;
        for (int k = 0; k < n; k++) {
            vs_pipe_instr in;
            if (vs_pipe_sched_at(s, stage, k, &in)) break;
            double dt = s1[k] - s0[k];
            if (in.op == VS_PIPE_SEND_F || in.op == VS_PIPE_RECV_F || in.op == VS_PIPE_SEND_B || in.op == VS_PIPE_RECV_B)
                p2p += dt;
            if (in.op == VS_PIPE_SYNC || in.op == VS_PIPE_STEP) hooks += dt;
            if (start < 0 && in.op == VS_PIPE_F) start = s0[k];
            if (s1[k] > end) end = s1[k];
        }
        double run0 = TL.first_cb - (start > 0 ? start : 0); // the run's start, absolute
        double step = t1 - t0, post = t1 - (run0 + end), hw = 0, hc = 0;
        if (post < 0) post = 0;
        if ((r = vs_pipe_last_hooks(pipe, &hw, &hc))) break;
        double hwait = hw > hc ? hw - hc : 0;
        double over = step - TL.cb - p2p - post - hwait;
        a_step += step, a_comp += TL.cb - TL.tp, a_tp += TL.tp, a_p2p += p2p, a_post += post, a_over += over;
        a_hooks += hooks - hwait, a_hwait += hwait, a_pre += run0 - t0 > 0 ? run0 - t0 : 0;
    }
    if (r && r != VS_ERR_ABORTED) fprintf(stderr, "bench train: rank %d: %s\n", vs_world_rank(w), vs_last_error());
    if (r) vs_comm_abort(wc);
    pthread_mutex_lock(&R->mu);
    R->s_step += a_step, R->s_comp += a_comp, R->s_tp += a_tp, R->s_p2p += a_p2p, R->s_post += a_post;
    R->s_over += a_over, R->s_hooks += a_hooks, R->s_pre += a_pre, R->s_hwait += a_hwait;
    if (r) R->err = 1;
    pthread_mutex_unlock(&R->mu);
    if (!r && vs_world_rank(w) == 0) R->step_med = median(ts + 1, R->steps);
    vs_pipe_sched_free(s);
    if (t) vs_train_free(t);
    free(tok), free(tgt), free(ts);
    return r ? 1 : 0;
}

static int bt_launch(run* R)
{
    int n = (R->plan.pp > 0 ? R->plan.pp : 1) * (R->plan.dp > 0 ? R->plan.dp : 1) * (R->plan.tp > 0 ? R->plan.tp : 1);
    pthread_mutex_init(&R->mu, NULL);
    vs_result r = vs_launch(n, bt_rank, R);
    pthread_mutex_destroy(&R->mu);
    if (r || R->err) {
        fprintf(stderr, "bench train: PP%d x DP%d x TP%d failed: %s\n", R->plan.pp, R->plan.dp, R->plan.tp,
                vs_last_error());
        failed = 1;
        return -1;
    }
    if (!isfinite(R->loss_last) || !isfinite(R->loss0)) failed = 1;
    return 0;
}

static void summary(const char* metric, double x, const char* cmp, double target, int ok, int* miss)
{
    printf("summary train %s=%.3f target%s%g %s\n", metric, x, cmp, target, ok ? "PASS" : "FAIL");
    if (!ok) *miss = 1;
}

// >>real: (a) and (b) ----------------------------------------------------------

static void real_part(int* miss, int tuned)
{
    static const int meshes[][3] = {{1, 1, 1}, {1, 2, 1}, {1, 4, 1}, {1, 1, 2}, {1, 1, 4}, {2, 1, 1}, {4, 1, 1}};
    const int rows = 16;
    double worst = 0, base = 0;
    char la[64];
    printf("# (a)+(b) GPT vocab %d seq %d dim %d heads %d blocks %d (%lld parameters), %d rows x %d tokens a step, "
           "AdamW, ZeRO-0; median of %d steps after 1 warm-up; load %s\n",
           CFG.vocab, CFG.seq, CFG.dim, CFG.heads, CFG.layers, (long long)gpt_param_count(&CFG), rows, CFG.seq, reps,
           loadavg(la, sizeof la));
    printf("# this machine has 2 cores: 4 thread ranks share them (2 ranks a core), so the 4-rank rows show the\n"
           "# library on an oversubscribed CPU, not a 4-device speed-up. Shares: of the step, summed over ranks.\n");
    printf("%-10s %-5s %3s %9s %9s %7s %7s %7s %7s %7s %9s %8s %8s %8s\n", "mesh", "kind", "M", "step", "tokens/s",
           "compute", "tp", "p2p", "post", "hwait", "overhead", "(hooks)", "(pre)", "loss");
    for (size_t i = 0; i < sizeof meshes / sizeof meshes[0]; i++) {
        run R;
        memset(&R, 0, sizeof R);
        R.plan.pp = meshes[i][0], R.plan.dp = meshes[i][1], R.plan.tp = meshes[i][2];
        R.plan.schedule = VS_PIPE_1F1B;
        R.plan.microbatches = R.plan.pp > 1 ? 4 * R.plan.pp : 1;
        R.rows = rows, R.steps = reps;
        if (bt_launch(&R)) continue;
        const char* kind = R.plan.pp > 1 ? "PP" : R.plan.dp > 1 ? "DP" : R.plan.tp > 1 ? "TP" : "1";
        double S = R.s_step;
        double over = R.s_over / S;
        if (over > worst) worst = over;
        if (i == 0) base = R.step_med;
        char mesh[32];
        snprintf(mesh, sizeof mesh, "%dx%dx%d", R.plan.pp, R.plan.dp, R.plan.tp);
        printf("%-10s %-5s %3d %7.2fms %9.0f %6.1f%% %6.1f%% %6.1f%% %6.1f%% %6.1f%% %8.2f%% %7.2f%% %7.2f%% %8.4f\n", mesh,
               kind, R.plan.microbatches, 1e3 * R.step_med, rows * CFG.seq / R.step_med, 100 * R.s_comp / S,
               100 * R.s_tp / S, 100 * R.s_p2p / S, 100 * R.s_post / S, 100 * R.s_hwait / S, 100 * over,
               100 * R.s_hooks / S, 100 * R.s_pre / S, R.loss_last);
        fflush(stdout);
    }
    printf("# 1 rank: %.2f ms a step. compute: the model's callbacks less their TP calls; tp: vs_tp_*/vs_vocab_* inside\n"
           "# them; p2p: SEND/RECV instructions (waits included); post: after the pipeline (DP sync wait, AdamW, loss\n"
           "# all-reduce); hwait: SYNC/STEP hooks off the CPU (waiting on the DDP reductions or the tied-gradient exchange\n"
           "# they start); overhead: the rest (engine dispatch, data slicing, hooks' CPU time, zero_grad); (hooks): the\n"
           "# hooks' CPU part of it\n",
           1e3 * base);
    if (tuned) printf("summary train overhead_max_share_malloc_tuned=%.3f (information: M_MMAP_THRESHOLD/M_TRIM_THRESHOLD raised)\n", 100 * worst);
    else summary("overhead_max_share", 100 * worst, "<", 2, worst < 0.02, miss);
}

// >>modelled: (c) -------------------------------------------------------------

typedef struct pjob {
    int pp, dp, tp;
    vs_plan_estimate est;
    double measured;
} pjob;

enum { PW = 8, PROWS = 64 };

typedef struct prof_arg {
    vs_profile prof;
    int err;
} prof_arg;

static vs_result bt_prof_data(vs_pipe_call* c)
{
    int64_t rows = *(const int64_t*)c->user, sh[2] = {0, CFG.seq};
    sh[0] = rows;
    int32_t* v;
    vs_result r = vs_pipe_output(c, 0, VS_I32, 2, sh, (void**)&v);
    if (r) return r;
    for (int64_t i = 0; i < rows * CFG.seq; i++) v[i] = (int32_t)(i % CFG.vocab);
    return VS_OK;
}

static int bt_prof_rank(vs_world* w, void* arg)
{
    prof_arg* a = (prof_arg*)arg;
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    memset(&TL, 0, sizeof TL);
    TL.modelled = 1, TL.first_cb = -1;
    int64_t rows = prof_rows;
    vs_profile pf;
    vs_result r = vs_profile_measure(w, &WMODEL, bt_prof_data, &rows, &pf);
    if (r) {
        fprintf(stderr, "bench train: vs_profile_measure: %s\n", vs_last_error());
        a->err = 1;
        return 1;
    }
    if (vs_world_rank(w) == 0) a->prof = pf;
    return 0;
}

static void plan_part(int* miss)
{
    double flops = 0;
    for (int u = 0; u < NU; u++) flops += bt_flops(u);
    FLOP_S = model_ms * 1e-3 / (3 * flops * PROWS);
    prof_arg pa;
    memset(&pa, 0, sizeof pa);
    if (vs_launch(PW, bt_prof_rank, &pa) || pa.err) {
        failed = 1;
        return;
    }
    char pb[2048], la[64];
    vs_profile_print(&pa.prof, pb, sizeof pb);
    printf("#\n# (c) modelled device time: %d thread ranks, %d rows a step, FLOP_S %.3g s/flop (one device: %.0f ms a "
           "step); load %s\n# profile (vs_profile_measure, same run): %s\n",
           PW, PROWS, FLOP_S, model_ms, loadavg(la, sizeof la), pb);
    pjob jobs[16];
    int nj = 0;
    for (int pp = 1; pp <= PW; pp *= 2)
        for (int tp = 1; tp <= PW / pp; tp *= 2) {
            pjob* j = &jobs[nj];
            memset(j, 0, sizeof *j);
            j->pp = pp, j->tp = tp, j->dp = PW / pp / tp;
            vs_constraints c;
            memset(&c, 0, sizeof c);
            c.world = PW, c.pp = pp, c.dp = j->dp, c.tp = tp, c.global_batch = PROWS;
            c.act_bytes_per_row = (int64_t)CFG.seq * CFG.dim * 4; // gpt.h's [*, T, D] activations
            static vs_plan_estimate est[1024];
            vs_plan plan;
            int n = 0;
            if (vs_generate_plan(&MODEL, &c, &pa.prof, &plan, est, 1024, &n) != VS_OK) {
                printf("# PP%d x DP%d x TP%d: not feasible: %s\n", pp, j->dp, tp, vs_last_error());
                continue;
            }
            j->est = est[0];
            nj++;
        }
    printf("%-14s %-11s %3s %4s %10s %10s %8s  %9s %9s %9s  | measured shares: %5s %5s %5s %5s %5s\n", "mesh",
           "schedule", "M", "zero", "predicted", "measured", "error", "compute", "comm", "bubble", "comp", "tp", "p2p",
           "post", "over");
    for (int i = 0; i < nj; i++) {
        pjob* j = &jobs[i];
        run R;
        memset(&R, 0, sizeof R);
        R.plan = j->est.plan;
        R.rows = PROWS, R.steps = reps, R.modelled = 1;
        if (bt_launch(&R)) {
            j->measured = NAN;
            continue;
        }
        j->measured = R.step_med;
        char mesh[32];
        snprintf(mesh, sizeof mesh, "PP%dxDP%dxTP%d", j->pp, j->dp, j->tp);
        double S = R.s_step;
        printf("%-14s %-11s %3d %4d %8.2fms %8.2fms %+7.1f%%  %7.2fms %7.2fms %7.2fms  | %16s %4.0f%% %4.0f%% %4.0f%% %4.0f%% "
               "%4.1f%%\n",
               mesh, vs_pipe_kind_name(R.plan.schedule), R.plan.microbatches, (int)R.plan.zero, 1e3 * j->est.step_s,
               1e3 * j->measured, 100 * (j->est.step_s / j->measured - 1), 1e3 * j->est.compute_s, 1e3 * j->est.comm_s,
               1e3 * j->est.bubble_s, "", 100 * R.s_comp / S, 100 * R.s_tp / S, 100 * R.s_p2p / S, 100 * R.s_post / S,
               100 * R.s_over / S);
        fflush(stdout);
    }
    double ae[16];
    int na = 0, bp = -1, bm = -1, conc = 0, disc = 0;
    for (int i = 0; i < nj; i++) {
        if (!(jobs[i].measured > 0)) continue;
        ae[na++] = fabs(jobs[i].est.step_s / jobs[i].measured - 1);
        if (bp < 0 || jobs[i].est.step_s < jobs[bp].est.step_s) bp = i;
        if (bm < 0 || jobs[i].measured < jobs[bm].measured) bm = i;
        for (int k = 0; k < i; k++) {
            if (!(jobs[k].measured > 0)) continue;
            double a = (jobs[i].est.step_s - jobs[k].est.step_s) * (jobs[i].measured - jobs[k].measured);
            conc += a > 0, disc += a < 0;
        }
    }
    if (na == 0) {
        failed = 1;
        return;
    }
    double med = median(ae, na), tau = conc + disc ? (double)(conc - disc) / (conc + disc) : 1;
    double first = jobs[bp].measured / jobs[bm].measured - 1;
    printf("# planner's first choice PP%dxDP%dxTP%d measures %.2f ms; measured best PP%dxDP%dxTP%d %.2f ms\n",
           jobs[bp].pp, jobs[bp].dp, jobs[bp].tp, 1e3 * jobs[bp].measured, jobs[bm].pp, jobs[bm].dp, jobs[bm].tp,
           1e3 * jobs[bm].measured);
    summary("plan_median_abs_error_pct", 100 * med, "<=", 10, med <= 0.10, miss);
    summary("plan_kendall_tau", tau, ">=", 0.8, tau >= 0.8, miss);
    summary("plan_first_choice_vs_best_pct", 100 * first, "<=", 5, first <= 0.05, miss);
}

int main(int argc, char** argv)
{
    int strict = 0, do_real = 1, do_plan = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps-model-ms") && i + 1 < argc) model_ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--profile-rows") && i + 1 < argc) prof_rows = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--skip-real")) do_real = 0;
        else if (!strcmp(argv[i], "--skip-plan")) do_plan = 0;
        else if (!strcmp(argv[i], "--strict")) strict = 1;
        else {
            fprintf(stderr, "usage: bench_train [--reps N] [--steps-model-ms MS] [--profile-rows N] [--skip-real] [--skip-plan] "
                            "[--strict]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 100) reps = 7;
    if (prof_rows < 1 || prof_rows > 1024) prof_rows = 16;
    if (gpt_model(&CFG, &STORE, &MODEL) != VS_OK) return fprintf(stderr, "gpt_model: %s\n", vs_last_error()), 1;
    build_wrapped();
    int miss = 0;
    if (do_real) real_part(&miss, 0);
    if (do_real) { // the same with the C allocator keeping freed memory: what per-step page faults cost
        mallopt(M_MMAP_THRESHOLD, 256 << 20);
        mallopt(M_TRIM_THRESHOLD, 1 << 30);
        printf("#\n# again with the C allocator keeping freed memory (mallopt M_MMAP_THRESHOLD 256 MiB, M_TRIM_THRESHOLD 1 GiB)\n");
        real_part(&miss, 1);
    }
    if (do_plan) plan_part(&miss);
    printf("summary train correctness %s\n", failed ? "FAIL" : "PASS");
    return failed || (strict && miss) ? 1 : 0;
}
