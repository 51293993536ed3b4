/* test_train.c - vescale.h's high-level API: a model declared once (an MLP of
   two column- then row-parallel blocks with a tied input/output projection),
   trained by vs_parallelize + vs_train_step on every mesh of up to 8 thread ranks
   and every schedule, against the same model on one rank:
   - losses and final parameters within 1e-5 relative of one rank, and bit for
     bit where only PP differs (PP2 x DP2 x TP2 against DP2 x TP2);
   - save on one mesh, load on another, and the next steps equal the
     uninterrupted run;
   - plans print and parse back (text and JSON); bad plans and batches get
     clear errors; deferred init allocates only the rank's shards. */
#define VESCALE_IMPLEMENTATION
#include "../vescale.h"
#include "vs_test.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

enum { ROWS = 16, STEPS = 6 };

#include "train_model.h"

/* The global batch of a step: every rank makes the same, in its own buffers. */
static vs_batch batch_of(int step, float* X, float* T) { return tm_batch(step, X, T, ROWS); }

/* --- runs ----------------------------------------------------------------- */

#define NPARAM 9
static const char* PNAMES[NPARAM] = {"proj", "b0.fc1.w", "b0.fc1.b", "b0.fc2.w", "b0.fc2.b",
                                     "b1.fc1.w", "b1.fc1.b", "b1.fc2.w", "b1.fc2.b"};
static const int PSIZE[NPARAM] = {D * D, D * H, H, H * D, D, D * H, H, H * D, D};

typedef struct run {
    vs_plan plan;
    int steps;
    const char* save;  // save after `steps` steps
    const char* load;  // load before training
    double loss[STEPS];
    int accumulate;     // vs_train_desc.accumulate: a step's batch split over that many calls
    vs_train_stats st[STEPS]; // the stats of each step's last call (rank 0)
    int stats_bad;      // calls whose stats broke a rule checked in rank_fn
    int eval;           // vs_train_eval before every step on its batch, and after the steps on a new one
    int eval_mid;       // accumulating: vs_train_eval of another batch, of another row count, between a step's calls
    int eval_bad;       // steps whose loss was not the evaluation's of the same batch, bit for bit
    double eval_loss;   // the evaluation after the steps (rank 0)
    size_t eval_peak, train_peak; // the engine's activation memory at its peak: evaluations, steps (rank 0, max)
    int storage;        // vs_train_desc.storage: the parameters in one flat arena per rank (the trainer's)
    int storage_bad;    // ranks where DDP held parameter memory of its own, or the arena was not used
    float params[NPARAM][D * H];
    int64_t init_peak, model_bytes;
} run;

/* vs_train_desc.storage: a rank's parameters and gradients as views into two
   flat arenas, as a trainer with its own buffers keeps them. */
typedef struct arena {
    float p[4096], g[4096];
    int64_t used;
} arena;
static vs_result arena_take(const char* name, vs_dtype dt, vs_dtype gdt, int64_t n, void** param, void** grad, void* user)
{
    arena* a = (arena*)user;
    if (dt != VS_F32 || gdt != VS_F32 || a->used + n > 4096)
        return vs_set_error(VS_ERR_NOMEM, "arena: %s: %lld %s elements", name, (long long)n, vs_dtype_name(dt));
    *param = a->p + a->used, *grad = a->g + a->used;
    a->used += n;
    return VS_OK;
}

/* vs_train_query_desc: every documented default of a zero desc, the given
   values kept, the checks; and vs_parallelize trains with the resolved values
   (its DDP's optimizer, its loss scale, the step's lr and accumulation). */
static int rank_query_desc(vs_world* w, void* arg)
{
    (void)arg;
    vs_plan plan;
    memset(&plan, 0, sizeof plan);
    vs_train_desc d, q;
    memset(&d, 0, sizeof d);
    d.model = &MODEL;
    d.plan = &plan;
    VT_OK(vs_train_query_desc(&d, &q));
    VT_CHECK(q.lr.kind == VS_LR_CONSTANT && q.lr.lr == 1e-3, "lr %g (kind %d), documented 1e-3 constant", q.lr.lr,
             (int)q.lr.kind);
    VT_CHECK(q.accumulate == 1, "accumulate %d, documented 0: 1", q.accumulate);
    VT_CHECK(q.optim.kind == VS_OPTIM_ADAMW && q.optim.beta1 == 0.9 && q.optim.beta2 == 0.999 && q.optim.eps == 1e-8 &&
                 q.optim.beta1_set == 1 && q.optim.beta2_set == 1 && q.optim.eps_set == 1 && q.optim.ngroups == 1,
             "optim: kind %d beta1 %g beta2 %g eps %g ngroups %d", (int)q.optim.kind, q.optim.beta1, q.optim.beta2,
             q.optim.eps, q.optim.ngroups);
    VT_CHECK(q.loss_scale.init == 65536 && q.loss_scale.growth == 2 && q.loss_scale.backoff == 0.5 &&
                 q.loss_scale.interval == 2000,
             "loss_scale: init %g growth %g backoff %g interval %d", q.loss_scale.init, q.loss_scale.growth,
             q.loss_scale.backoff, q.loss_scale.interval);
    VT_CHECK(q.loss_scale.enable == -1, "an f32 model's loss_scale.enable resolves to %d, documented -1",
             q.loss_scale.enable);
    VT_CHECK(q.model == &MODEL && q.plan == &plan && q.clip == 0 && q.nonfinite == VS_NONFINITE_SKIP &&
                 q.stream == NULL && q.storage == NULL && q.grad_fp32 == 0 && q.variable_shapes == 0 &&
                 q.load_partial == 0,
             "the rest stays as given");
    /* an f16 parameter turns scaling on */
    vs_layer_decl half[NL];
    memcpy(half, LAYERS, sizeof half);
    half[1].params[0].dtype = VS_F16;
    vs_model_desc hm = MODEL;
    hm.layers = half;
    d.model = &hm;
    VT_OK(vs_train_query_desc(&d, &q));
    VT_CHECK(q.loss_scale.enable == 1, "an f16 model's loss_scale.enable resolves to %d, documented 1",
             q.loss_scale.enable);
    /* given values stay, resolving twice changes nothing */
    d.model = &MODEL;
    d.lr.lr = 0.5, d.accumulate = 3, d.optim.eps = 1e-6, d.optim.beta1_set = 1;
    d.loss_scale.enable = 1, d.loss_scale.init = 8, d.loss_scale.interval = 7;
    vs_train_desc q2;
    VT_OK(vs_train_query_desc(&d, &q));
    VT_OK(vs_train_query_desc(&q, &q2));
    VT_CHECK(q.lr.lr == 0.5 && q.accumulate == 3 && q.optim.eps == 1e-6 && q.optim.beta1 == 0 &&
                 q.loss_scale.enable == 1 && q.loss_scale.init == 8 && q.loss_scale.interval == 7 &&
                 q.loss_scale.growth == 2,
             "given values: lr %g accumulate %d eps %g beta1 %g scale %g/%d", q.lr.lr, q.accumulate, q.optim.eps,
             q.optim.beta1, q.loss_scale.init, q.loss_scale.interval);
    VT_CHECK(!memcmp(&q, &q2, sizeof q), "resolving a resolved desc changed it");
    VT_OK(vs_train_query_desc(NULL, &q));
    VT_CHECK(q.lr.lr == 1e-3 && q.accumulate == 1 && q.loss_scale.enable == -1 && !q.model, "NULL: the defaults");
    d.clip = -1;
    VT_EXPECT_ERR(vs_train_query_desc(&d, &q), VS_ERR_INVALID, "vs_train_query_desc", "desc.clip");
    d.clip = 0, d.loss_scale.backoff = 2;
    VT_EXPECT_ERR(vs_train_query_desc(&d, &q), VS_ERR_INVALID, "vs_train_query_desc", "backoff 2");
    VT_EXPECT_ERR(vs_train_query_desc(&d, NULL), VS_ERR_NULL, "vs_train_query_desc", "out");
    /* the optimizer's numbers as vs_parallelize's DDP checks them: a desc the
       query passed used to fail only inside vs_parallelize */
    d.loss_scale.backoff = 0, d.optim.beta1 = 2, d.optim.beta1_set = 1;
    VT_EXPECT_ERR(vs_train_query_desc(&d, &q), VS_ERR_INVALID, "vs_train_query_desc: desc.optim.beta1 2", "[0, 1)");
    d.optim.beta1 = 0, d.optim.weight_decay = NAN;
    VT_EXPECT_ERR(vs_train_query_desc(&d, &q), VS_ERR_INVALID, "vs_train_query_desc", "optim.weight_decay nan");

    /* vs_parallelize uses them: a zero desc trains at lr 1e-3, one call a step,
       no loss scale, with DDP's resolved optimizer */
    memset(&d, 0, sizeof d);
    d.model = &MODEL;
    d.plan = &plan;
    VT_OK(vs_train_query_desc(&d, &q));
    vs_train* t = NULL;
    VT_OK(vs_parallelize(w, &d, &t));
    if (!t) return 1;
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    VT_OK(vs_ddp_query_desc(vs_train_ddp(t), &dd));
    VT_CHECK(dd.optim.beta1 == q.optim.beta1 && dd.optim.beta2 == q.optim.beta2 && dd.optim.eps == q.optim.eps &&
                 dd.optim.ngroups == q.optim.ngroups && dd.optim.kind == q.optim.kind,
             "the DDP's optimizer is not the resolved one");
    VT_CHECK(vs_train_loss_scale(t) == 1, "loss scale %g with enable resolved to -1", vs_train_loss_scale(t));
    float X[ROWS * D], T[ROWS * D];
    vs_batch b = batch_of(0, X, T);
    vs_train_stats st;
    VT_OK(vs_train_step_ex(t, &b, &st));
    VT_CHECK(st.lr == q.lr.lr && st.stepped == 1 && st.loss_scale == 1 && vs_train_steps(t) == 1,
             "step: lr %g stepped %d loss scale %g steps %lld", st.lr, st.stepped, st.loss_scale,
             (long long)vs_train_steps(t));
    VT_OK(vs_train_free(t));
    /* ... and the resolved loss scale when scaling is on */
    d.loss_scale.enable = 1;
    VT_OK(vs_train_query_desc(&d, &q));
    VT_OK(vs_parallelize(w, &d, &t));
    if (!t) return 1;
    VT_CHECK(vs_train_loss_scale(t) == q.loss_scale.init && q.loss_scale.init == 65536, "loss scale %g, resolved %g",
             vs_train_loss_scale(t), q.loss_scale.init);
    VT_OK(vs_train_free(t));
    return 0;
}

/* Data inputs (vs_model_check's doc): a spec is optional and checked where
   given; takers whose specs disagree, and a data input a later layer makes,
   are refused by vs_model_check (and so vs_plan_check, vs_parallelize) naming
   the input and the layers; before, both passed it (the first failed only in
   the middle of a step, the second only at vs_parallelize). */
static vs_layer_decl DL[NL];
static int rank_data_inputs(vs_world* w, void* arg)
{
    (void)arg;
    vs_model_desc m = MODEL;
    m.layers = DL;
    vs_plan plan;
    memset(&plan, 0, sizeof plan);
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &m, d.plan = &plan;
    vs_train* t = NULL;
    VT_OK(vs_parallelize(w, &d, &t)); // with specs on both data inputs: trains
    if (!t) return 1;
    float X[ROWS * D], T[ROWS * D];
    vs_batch b = batch_of(0, X, T);
    double loss = NAN;
    VT_OK(vs_train_step(t, &b, &loss));
    VT_CHECK(isfinite(loss), "loss %g", loss);
    b.dtype[0] = VS_I32; // (the same bytes, another dtype: the spec says f32)
    VT_EXPECT_ERR(vs_train_step(t, &b, &loss), VS_ERR_MISMATCH, "input \"x\"", "spec x:f32[*,8]");
    VT_OK(vs_train_free(t));
    return 0;
}

static void case_data_inputs(void)
{
    vs_plan plan;
    memset(&plan, 0, sizeof plan);
    vs_model_desc m = MODEL;
    m.layers = DL;
    /* the documented default: no spec, any taker's spec agrees with it */
    memcpy(DL, LAYERS, sizeof DL);
    DL[7].unit.inputs = "h2,t,x:f32[*,8]";
    VT_OK(vs_model_check(&m));
    /* takers that disagree */
    memcpy(DL, LAYERS, sizeof DL);
    DL[0].unit.inputs = "x:f32";
    DL[7].unit.inputs = "h2,t,x:i32";
    VT_EXPECT_ERR(vs_model_check(&m), VS_ERR_MISMATCH, "data input \"x\"",
                  "layer \"in\" takes x:f32 but layer \"loss\" takes x:i32");
    VT_EXPECT_ERR(vs_plan_check(&plan, &m), VS_ERR_MISMATCH, "data input \"x\"", "layer \"loss\" takes x:i32");
    DL[1].unit.inputs = "h0,x:[*,8]"; // (what a later taker adds is kept too)
    DL[7].unit.inputs = "h2,t,x:f32[*,9]";
    VT_EXPECT_ERR(vs_model_check(&m), VS_ERR_MISMATCH, "data input \"x\"",
                  "layer \"b0.fc1\" takes x:f32[*,8] but layer \"loss\" takes x:f32[*,9]");
    /* a data input a later layer makes */
    memcpy(DL, LAYERS, sizeof DL);
    DL[7].unit.outputs = "loss:f32[],x";
    VT_EXPECT_ERR(vs_model_check(&m), VS_ERR_INVALID, "layer \"loss\" makes \"x\"",
                  "layer \"in\" before it takes as a data input");
    /* with specs, each microbatch is checked against them */
    memcpy(DL, LAYERS, sizeof DL);
    DL[0].unit.inputs = "x:f32[*,8]";
    DL[7].unit.inputs = "h2,t:f32[*,8]";
    VT_OK(vs_model_check(&m));
    VT_OK(vs_launch(1, rank_data_inputs, NULL));
}

/* ZeRO-2 with trainer-owned memory: refused by vs_parallelize on every rank, named. */
static int storage_zero2_rank(vs_world* w, void* arg)
{
    run* R = (run*)arg;
    arena* ar = (arena*)calloc(1, sizeof(arena));
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &MODEL;
    d.plan = &R->plan;
    d.storage = arena_take, d.storage_user = ar;
    vs_train* t = NULL;
    vs_result r = vs_parallelize(w, &d, &t);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "ZeRO-2") && !t, "rank %d: %s", vs_world_rank(w),
             vs_last_error());
    if (t) vs_train_free(t);
    free(ar);
    return 0;
}

static int rank_fn(vs_world* w, void* arg)
{
    run* R = (run*)arg;
    arena* ar = R->storage ? (arena*)calloc(1, sizeof(arena)) : NULL;
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &MODEL;
    d.plan = &R->plan;
    d.optim.kind = VS_OPTIM_ADAMW;
    d.optim.weight_decay = 0.01;
    d.lr.lr = 0.02;
    d.clip = 1.0;
    d.accumulate = R->accumulate;
    if (ar) d.storage = arena_take, d.storage_user = ar;
    d.lr.warmup_steps = 2; // (a schedule: the stats' lr is checked against vs_lr_at)
    vs_train* t;
    vs_result r = vs_parallelize(w, &d, &t);
    VT_CHECK(r == VS_OK, "parallelize: %s", vs_last_error());
    if (r) return 1;
    if (R->load) VT_OK(vs_train_load(t, R->load, NULL, 0));
    int64_t s0 = vs_train_steps(t);
    int nacc = R->accumulate > 1 ? R->accumulate : 1;
    for (int s = 0; s < R->steps; s++) {
        float X[ROWS * D], T[ROWS * D];
        vs_batch b = batch_of((int)s0 + s, X, T);
        double l;
        if (nacc == 1) {
            vs_train_stats st;
            double ev = NAN;
            int64_t n0 = vs_train_steps(t);
            size_t ep = 0;
            if (R->eval) VT_OK(vs_train_eval(t, &b, &ev)); // (forward only: changes nothing)
            if (R->eval) VT_OK(vs_pipe_last_memory(vs_train_pipe(t), &ep));
            VT_CHECK(vs_train_steps(t) == n0, "an evaluation took a step");
            VT_OK(vs_train_step_ex(t, &b, &st));
            if (R->eval && memcmp(&ev, &st.loss, sizeof ev)) R->eval_bad++;
            if (vs_world_rank(w) == 0 && ep > R->eval_peak) R->eval_peak = ep;
            if (vs_world_rank(w) == 0 && st.act_peak > R->train_peak) R->train_peak = st.act_peak;
            if (vs_world_rank(w) == 0) R->loss[s] = st.loss, R->st[s] = st;
            (void)l;
            continue;
        }
        for (int c = 0; c < nacc; c++) { // the step's rows in nacc calls, in order
            vs_batch bc = b;
            for (int i = 0; i < b.n; i++) {
                bc.shape[i][0] = ROWS / nacc;
                bc.data[i] = (const float*)b.data[i] + (size_t)c * (ROWS / nacc) * D;
            }
            vs_train_stats st;
            int64_t before = vs_train_steps(t);
            VT_OK(vs_train_step_ex(t, &bc, &st));
            int last = c == nacc - 1;
            // what a call reports, from what is known independently of the stats
            int ok = st.stepped == last && st.accumulated == c + 1 && st.tokens == (int64_t)(ROWS / nacc) * D &&
                     (last ? isfinite(st.loss) && st.loss > 0 : isnan(st.loss) && isnan(st.grad_norm)) &&
                     vs_train_steps(t) == before + last && st.t_compute >= 0 && st.t_comm >= 0 && st.t_optim >= 0 &&
                     st.t_compute + st.t_comm + st.t_optim <= st.t_total + 1e-6;
            if (last && ok)
                ok = st.lr == vs_lr_at(&d.lr, before) && st.grad_norm == vs_train_grad_norm(t) &&
                     st.clipped == (st.grad_norm > d.clip) && st.steps == before + 1 && st.skipped == 0 &&
                     st.loss_scale == 1.0;
            if (!ok) R->stats_bad++;
            if (last && vs_world_rank(w) == 0) R->loss[s] = st.loss, R->st[s] = st;
            if (R->eval_mid && !last) { // the whole batch of another step (ROWS rows, the calls ROWS / nacc)
                float EX[ROWS * D], ET[ROWS * D];
                vs_batch eb = batch_of(50 + s, EX, ET);
                double ev = NAN;
                VT_OK(vs_train_eval(t, &eb, &ev));
                VT_CHECK(isfinite(ev) && vs_train_steps(t) == before, "an evaluation between a step's calls: loss %g, "
                         "%lld steps (want %lld)", ev, (long long)vs_train_steps(t), (long long)before);
            }
            if (c == 0 && s == 0) { // a save between a step's calls is refused
                vs_result r = vs_train_save(t, "/tmp/vs_train_never_written", NULL, 0, 0);
                VT_CHECK(r == VS_ERR_STATE && strstr(vs_last_error(), "middle of a step"), "save mid-step: %s",
                         vs_last_error());
            }
        }
    }
    if (R->eval) {
        float X[ROWS * D], T[ROWS * D];
        vs_batch b = batch_of(99, X, T);
        double ev = NAN;
        VT_OK(vs_train_eval(t, &b, &ev));
        if (vs_world_rank(w) == 0) R->eval_loss = ev;
    }
    if (R->save) VT_OK(vs_train_save(t, R->save, NULL, 0, 0));
    float buf[D * H];
    for (int p = 0; p < NPARAM; p++) {
        VT_OK(vs_train_get_param(t, PNAMES[p], buf, sizeof buf));
        if (vs_world_rank(w) == 0) memcpy(R->params[p], buf, sizeof(float) * (size_t)PSIZE[p]);
    }
    if (vs_world_rank(w) == 0) vs_train_memory(t, &R->init_peak, &R->model_bytes);
    if (ar) {
        vs_ddp_memory mu;
        VT_OK(vs_ddp_memory_usage(vs_train_ddp(t), &mu));
        if (mu.params != 0 || ar->used == 0) __atomic_add_fetch(&R->storage_bad, 1, __ATOMIC_SEQ_CST);
    }
    VT_OK(vs_train_free(t));
    free(ar);
    return 0;
}

/* The progress line (vs_train_step_ex at VS_LOG_INFO): captured from a logger. */
static char progress[4][200];
static int nprogress;
static void capture(vs_log_level level, const char* msg, void* user)
{
    (void)user;
    if (level == VS_LOG_INFO && !strncmp(msg, "[rank 0] step ", 14)) { // (the logger's rank prefix)
        int i = __atomic_fetch_add(&nprogress, 1, __ATOMIC_SEQ_CST);
        if (i < 4) snprintf(progress[i], sizeof progress[i], "%s", msg + 9);
    }
}
static void case_progress(void)
{
    run* R = (run*)calloc(1, sizeof *R);
    R->plan.pp = 1, R->plan.dp = 2, R->plan.tp = 1;
    R->plan.microbatches = 2;
    R->steps = 2;
    nprogress = 0;
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = 2;
    ld.logger.fn = capture;
    ld.log_level = VS_LOG_INFO;
    VT_OK(vs_launch_ex(&ld, rank_fn, R));
    VT_CHECK(nprogress == 2, "%d progress lines for 2 steps on 2 ranks (rank 0 logs): %s", nprogress, progress[0]);
    for (int s = 0; s < 2 && s < nprogress; s++) {
        char want[64];
        snprintf(want, sizeof want, "step %d | loss %.4f | gnorm %.2f | lr %.1e | ", s + 1, R->st[s].loss,
                 R->st[s].grad_norm, R->st[s].lr);
        VT_CHECK(!strncmp(progress[s], want, strlen(want)) && strstr(progress[s], "k tok/s | ") &&
                     strstr(progress[s], " ms"), "progress line \"%s\", want it to start \"%s\"", progress[s], want);
    }
    free(R);
}

static void go(run* R)
{
    int n = (R->plan.pp ? R->plan.pp : 1) * (R->plan.dp ? R->plan.dp : 1) * (R->plan.tp ? R->plan.tp : 1);
    VT_CHECK(vs_launch(n, rank_fn, R) == VS_OK, "launch: %s", vs_last_error());
}

static double rel(double a, double b) { return fabs(a - b) / (fabs(b) > 1e-12 ? fabs(b) : 1e-12); }

static void compare(const run* a, const run* ref, int bitwise, const char* what)
{
    for (int s = 0; s < a->steps; s++) {
        if (bitwise) VT_CHECK(!memcmp(&a->loss[s], &ref->loss[s], sizeof(double)), "%s: step %d loss %.17g vs %.17g", what, s, a->loss[s], ref->loss[s]);
        else VT_CHECK(rel(a->loss[s], ref->loss[s]) < 1e-5, "%s: step %d loss %.9g vs %.9g", what, s, a->loss[s], ref->loss[s]);
    }
    for (int p = 0; p < NPARAM; p++) { // relative to the tensor's largest element (elementwise is ill-posed near 0)
        double scale = 0, worst = 0;
        int at = 0;
        for (int e = 0; e < PSIZE[p]; e++) scale = fmax(scale, fabs(ref->params[p][e]));
        for (int e = 0; e < PSIZE[p]; e++) {
            float x = a->params[p][e], y = ref->params[p][e];
            if (bitwise && memcmp(&x, &y, 4)) {
                VT_CHECK(0, "%s: %s[%d] %.9g vs %.9g", what, PNAMES[p], e, x, y);
                break;
            }
            if (fabs(x - y) > worst) worst = fabs(x - y), at = e;
        }
        if (!bitwise)
            VT_CHECK(worst <= 1e-5 * scale, "%s: %s[%d] %.9g vs %.9g (max |diff| %.3g, max |value| %.3g)", what, PNAMES[p], at,
                     a->params[p][at], ref->params[p][at], worst, scale);
    }
}

static run* mk(int pp, int dp, int tp, vs_pipe_kind k, int mbs, vs_zero_stage z)
{
    run* R = (run*)calloc(1, sizeof *R);
    R->plan.pp = pp, R->plan.dp = dp, R->plan.tp = tp;
    R->plan.schedule = k;
    R->plan.microbatches = mbs;
    R->plan.zero = z;
    R->plan.split = VS_PIPE_SPLIT_UNIFORM;
    R->steps = STEPS;
    return R;
}

int main(void)
{
    build_model();
    /* The reference: one rank, the same 4 microbatches per step (the mean over
       microbatches then equals the DP runs' average of averages up to rounding). */
    run* ref = mk(1, 1, 1, VS_PIPE_GPIPE, 4, VS_ZERO_0);
    vt_begin("train/one_rank");
    go(ref);
    VT_CHECK(ref->loss[STEPS - 1] < ref->loss[0], "the loss falls: %g -> %g", ref->loss[0], ref->loss[STEPS - 1]);
    vt_end("train/one_rank");

    static const int meshes[][3] = {{2, 1, 1}, {1, 2, 1}, {1, 1, 2}, {2, 2, 1}, {1, 2, 2}, {2, 1, 2}, {2, 2, 2}};
    static const vs_pipe_kind kinds[] = {VS_PIPE_1F1B, VS_PIPE_GPIPE, VS_PIPE_INTERLEAVED, VS_PIPE_ZBH1, VS_PIPE_ZBV, VS_PIPE_DUALPIPEV};
    char name[128];
    for (size_t m = 0; m < sizeof meshes / sizeof meshes[0]; m++)
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            if (meshes[m][0] == 1 && k > 0) continue; // (schedules matter only with PP)
            for (int z = 0; z <= 2; z++) {
                if (z && (meshes[m][1] == 1 || k > 1)) continue; // ZeRO only with DP
                run* R = mk(meshes[m][0], meshes[m][1], meshes[m][2], kinds[k], 4 / meshes[m][1], (vs_zero_stage)z);
                snprintf(name, sizeof name, "train/PP%d_DP%d_TP%d_%s_zero%d", meshes[m][0], meshes[m][1], meshes[m][2],
                         vs_pipe_kind_name(kinds[k]), z);
                vt_begin(name);
                go(R);
                compare(R, ref, 0, name);
                vt_end(name);
                free(R);
            }
        }

    /* Only PP differs: PP2 x DP2 x TP2 against DP2 x TP2, bit for bit. */
    vt_begin("train/only_pp_differs_bitwise");
    run* a = mk(1, 2, 2, VS_PIPE_1F1B, 2, VS_ZERO_1);
    go(a);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        run* b = mk(2, 2, 2, kinds[k], 2, VS_ZERO_1);
        go(b);
        snprintf(name, sizeof name, "PP2xDP2xTP2 %s vs DP2xTP2", vs_pipe_kind_name(kinds[k]));
        compare(b, a, 1, name);
        free(b);
    }
    free(a);
    vt_end("train/only_pp_differs_bitwise");

    /* Resume on another mesh: save after 3 steps on PP2 x DP2 x TP2, load on
       DP4, TP4 (no: H=16 splits 4 ways too), PP4 x DP2 and 1 rank; 3 more steps
       equal the uninterrupted run. */
    vt_begin("train/resume_on_other_meshes");
    char dir[] = "/tmp/vs_train_XXXXXX", path[64];
    VT_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/step3", dir);
    run* s = mk(2, 2, 2, VS_PIPE_1F1B, 2, VS_ZERO_1);
    s->steps = 3;
    s->save = path;
    go(s);
    static const int rmesh[][3] = {{1, 4, 1}, {1, 1, 4}, {4, 2, 1}, {1, 1, 1}};
    for (int i = 0; i < 4; i++) {
        run* c = mk(rmesh[i][0], rmesh[i][1], rmesh[i][2], VS_PIPE_1F1B, 4 / rmesh[i][1], VS_ZERO_1);
        c->steps = STEPS - 3;
        c->load = path;
        go(c);
        run cmp = *ref; // the uninterrupted run's last steps
        memmove(cmp.loss, ref->loss + 3, sizeof(double) * (STEPS - 3));
        cmp.steps = STEPS - 3;
        c->steps = STEPS - 3;
        snprintf(name, sizeof name, "resume on PP%d_DP%d_TP%d", rmesh[i][0], rmesh[i][1], rmesh[i][2]);
        compare(c, &cmp, 0, name);
        free(c);
    }
    vs_plan saved;
    VT_OK(vs_train_saved_plan(path, &saved));
    VT_CHECK(saved.pp == 2 && saved.dp == 2 && saved.tp == 2 && saved.zero == VS_ZERO_1, "saved plan %d %d %d", saved.pp, saved.dp, saved.tp);
    free(s);
    snprintf(name, sizeof name, "rm -rf %s", dir);
    VT_CHECK(system(name) == 0, "rm");
    vt_end("train/resume_on_other_meshes");

    /* Plans round-trip through text and JSON. */
    vt_begin("train/plan_roundtrip");
    vs_plan p;
    memset(&p, 0, sizeof p);
    p.pp = 2, p.dp = 4, p.tp = 2;
    p.strict = 1;
    p.nrules = 2;
    snprintf(p.rules[0].pattern, sizeof p.rules[0].pattern, "b?.fc1.*");
    snprintf(p.rules[0].placement, sizeof p.rules[0].placement, "Shard(1)");
    snprintf(p.rules[1].pattern, sizeof p.rules[1].pattern, "proj");
    snprintf(p.rules[1].placement, sizeof p.rules[1].placement, "Replicate");
    p.split = VS_PIPE_SPLIT_MANUAL;
    snprintf(p.split_points, sizeof p.split_points, "b0.fc2,b1.fc1,b1.fc2");
    p.chunks = 2;
    p.schedule = VS_PIPE_ZBV;
    p.microbatches = 8;
    p.zero = VS_ZERO_2;
    p.sequence_parallel = 1;
    char t1[2048], t2[2048];
    for (int form = 0; form < 2; form++) {
        vs_plan q;
        if (form) vs_plan_print_json(&p, t1, sizeof t1);
        else vs_plan_print(&p, t1, sizeof t1);
        VT_OK(vs_plan_parse(t1, &q));
        if (form) vs_plan_print_json(&q, t2, sizeof t2);
        else vs_plan_print(&q, t2, sizeof t2);
        VT_CHECK(!strcmp(t1, t2), "round trip %d:\n%s\n%s", form, t1, t2);
        VT_CHECK(!memcmp(&p, &q, sizeof p), "form %d: the parsed plan differs from the printed one:\n%s", form, t1);
        VT_CHECK(strstr(t1, form ? "\"sequence_parallel\": 1" : "sequence_parallel: 1\n") != NULL, "%s", t1);
    }
    { // issue 19.5 (found by fuzzing): a blank split_points and a pattern's bytes >= 0x80
        vs_plan a, b, c;
        char ta[1024], tb[1024], ja[1024];
        VT_OK(vs_plan_parse("{\"split_points\": \" \", \"split\": \"manual\"}", &a));
        VT_CHECK(a.split_points[0] == 0, "blanks trimmed: '%s'", a.split_points);
        VT_CHECK(vs_plan_print(&a, ta, sizeof ta) > 0, "%s", vs_last_error());
        VT_OK(vs_plan_parse(ta, &b));
        VT_CHECK(!memcmp(&a, &b, sizeof a) || (vs_plan_print(&b, tb, sizeof tb) > 0 && !strcmp(ta, tb)), "text:\n%s", ta);
        VT_OK(vs_plan_parse("shard: caf\xc3\xa9.* Replicate\n", &a)); // UTF-8: printed as it is, valid JSON
        VT_CHECK(vs_plan_print_json(&a, ja, sizeof ja) > 0 && strstr(ja, "\"caf\xc3\xa9.*\""), "%s", ja);
        VT_OK(vs_plan_parse(ja, &c));
        VT_CHECK(!memcmp(&a, &c, sizeof a) || (vs_plan_print(&a, ta, sizeof ta) > 0 && vs_plan_print(&c, tb, sizeof tb) > 0 &&
                                               !strcmp(ta, tb)), "json:\n%s", ja);
        VT_ERR(vs_plan_parse("shard: caf\xe9.* Replicate\n", &a), VS_ERR_INVALID, "not UTF-8");
        snprintf(c.rules[0].pattern, sizeof c.rules[0].pattern, "caf\xe9.*"); // (built by hand: not printed)
        VT_ERR(vs_plan_print_json(&c, ja, sizeof ja), -1, "not UTF-8");
        VT_CHECK(ja[0] == 0, "nothing printed: %s", ja);
        /* (found by fuzz_plan) a PP the pipeline cannot have: parsed, it printed its
           default microbatch count (pp, 2417805) that parse then refused */
        VT_ERR(vs_plan_parse("mesh: PP=722 DP=2 TP=1\n", &a), VS_ERR_INVALID, "PP at most 256");
        memset(&c, 0, sizeof c);
        c.pp = 2417805, c.dp = 2, c.tp = 66;
        VT_ERR(vs_plan_print(&c, ta, sizeof ta), -1, "mesh PP=2417805: at most VS_PIPE_MAX_CHUNKS (256) stages");
        c.pp = 256;
        VT_CHECK(vs_plan_print(&c, ta, sizeof ta) > 0 && vs_plan_parse(ta, &b) == VS_OK && b.microbatches == 256,
                 "PP=256 round trip:\n%s", ta);
    }
    vt_end("train/plan_roundtrip");

    vt_begin("train/bad_input");
    vs_plan bad = p;
    snprintf(bad.rules[0].pattern, sizeof bad.rules[0].pattern, "nothing.*");
    vs_result r = vs_plan_check(&bad, &MODEL);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "nothing.*"), "strict rule: %s", vs_last_error());
    bad = p;
    bad.tp = 3;
    r = vs_plan_check(&bad, &MODEL);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "TP=3"), "tp 3: %s", vs_last_error());
    bad = p;
    bad.pp = 8;
    r = vs_plan_check(&bad, &MODEL);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "layers"), "pp 8 x 2: %s", vs_last_error());
    r = vs_plan_parse("mesh: PP=2 DP=x TP=1\n", &bad);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "line 1"), "parse: %s", vs_last_error());
    r = vs_plan_parse("schedule: zzz\n", &bad);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "zzz"), "parse: %s", vs_last_error());
    r = vs_plan_parse("sequence_parallel: 2\n", &bad);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "sequence_parallel = \"2\""), "parse: %s", vs_last_error());
    bad = p;
    bad.nrules = 0, bad.policy = VS_TP_NONE;
    r = vs_plan_check(&bad, &MODEL);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "sequence_parallel with policy none"), "sp, none: %s",
             vs_last_error());
    bad.sequence_parallel = 3, bad.policy = VS_TP_MEGATRON;
    r = vs_plan_check(&bad, &MODEL);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "sequence_parallel 3 (0 or 1)"), "sp 3: %s", vs_last_error());
    vt_end("train/bad_input");

    /* Gradient accumulation across calls: the reference's step batch in 2 and
       4 calls (microbatches per call halved or quartered, so the microbatches
       are the same rows), on several meshes: equal to one step on the whole
       batch within the usual tolerance; the stats of every call follow the
       rules rank_fn checks, and the norms, LR and clip flags match the one-rank
       reference's step for step. */
    int nclip = 0;
    for (int s = 0; s < STEPS; s++) nclip += ref->st[s].clipped;
    printf("    one rank: %d of %d steps clipped (grad norms %.3g .. %.3g)\n", nclip, STEPS, ref->st[0].grad_norm,
           ref->st[STEPS - 1].grad_norm);
    static const int acc_mesh[][5] = {{1, 1, 1, 2, 0}, {1, 2, 1, 2, 1}, {2, 2, 1, 2, 0}, {1, 2, 2, 2, 2},
                                      {2, 1, 2, 4, 0}, {2, 2, 2, 2, 1}, {2, 2, 1, 2, 2}};
    for (size_t m = 0; m < sizeof acc_mesh / sizeof acc_mesh[0]; m++) {
        const int* am = acc_mesh[m];
        run* R = mk(am[0], am[1], am[2], VS_PIPE_1F1B, 4 / am[1] / am[3] ? 4 / am[1] / am[3] : 1, (vs_zero_stage)am[4]);
        R->accumulate = am[3];
        snprintf(name, sizeof name, "train/accumulate%d_PP%d_DP%d_TP%d_zero%d", am[3], am[0], am[1], am[2], am[4]);
        vt_begin(name);
        go(R);
        compare(R, ref, 0, name);
        VT_CHECK(R->stats_bad == 0, "%s: %d calls reported stats that break the rules", name, R->stats_bad);
        for (int s = 0; s < STEPS; s++) { // the one-rank reference measured them on the whole gradients
            const vs_train_stats *a = &R->st[s], *b = &ref->st[s];
            VT_CHECK(rel(a->grad_norm, b->grad_norm) < 1e-5 && a->lr == b->lr && a->clipped == b->clipped,
                     "%s: step %d: grad norm %.9g lr %g clipped %d; one rank: %.9g %g %d", name, s, a->grad_norm, a->lr,
                     a->clipped, b->grad_norm, b->lr, b->clipped);
        }
        vt_end(name);
        free(R);
    }

    /* An evaluation between the calls of an accumulating step, on a batch of
       another row count (the whole batch, the calls half of it): the step is
       the run without it, bit for bit (it left the step's rows and gradients
       as they were). */
    static const int mid_mesh[][4] = {{1, 1, 1, 0}, {1, 2, 1, 1}, {2, 2, 1, 0}, {1, 2, 2, 2}, {2, 2, 2, 1}};
    for (size_t m = 0; m < sizeof mid_mesh / sizeof mid_mesh[0]; m++) {
        const int* mm = mid_mesh[m];
        int mbs = 4 / mm[1] / 2 ? 4 / mm[1] / 2 : 1;
        run* base = mk(mm[0], mm[1], mm[2], VS_PIPE_1F1B, mbs, (vs_zero_stage)mm[3]);
        run* mid = mk(mm[0], mm[1], mm[2], VS_PIPE_1F1B, mbs, (vs_zero_stage)mm[3]);
        base->accumulate = mid->accumulate = 2;
        mid->eval_mid = 1;
        snprintf(name, sizeof name, "train/accumulate2_eval_between_calls_PP%d_DP%d_TP%d_zero%d", mm[0], mm[1], mm[2],
                 mm[3]);
        vt_begin(name);
        go(base);
        go(mid);
        compare(mid, base, 1, name);
        VT_CHECK(base->stats_bad == 0 && mid->stats_bad == 0, "%s: %d, %d calls reported stats that break the rules",
                 name, base->stats_bad, mid->stats_bad);
        vt_end(name);
        free(base);
        free(mid);
    }

    VT_CASE("train/progress: one line a step from rank 0 at info, the step's stats in it", case_progress());

    /* Activation recompute (plan.recompute): every layer but the loss runs its
       forward again before its backward; on PP2 x DP2 x TP2, every schedule (the
       split backward of ZB-H1/ZB-V too) and ZeRO 0/1, losses and parameters
       equal the run without recompute bit for bit (the forwards' TP
       collectives run again, in step on every rank). */
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (int z = 0; z < 2; z++) {
            run* base = mk(2, 2, 2, kinds[k], 2, (vs_zero_stage)z);
            run* rc = mk(2, 2, 2, kinds[k], 2, (vs_zero_stage)z);
            snprintf(rc->plan.recompute, sizeof rc->plan.recompute, "in b?.* ");
            snprintf(name, sizeof name, "train/recompute_PP2_DP2_TP2_%s_zero%d", vs_pipe_kind_name(kinds[k]), z);
            vt_begin(name);
            long n0 = __atomic_load_n(&n_fc1_fwd, __ATOMIC_SEQ_CST);
            go(base);
            long n1 = __atomic_load_n(&n_fc1_fwd, __ATOMIC_SEQ_CST);
            go(rc);
            long n2 = __atomic_load_n(&n_fc1_fwd, __ATOMIC_SEQ_CST);
            compare(rc, base, 1, name);
            VT_CHECK(n2 - n1 == 2 * (n1 - n0), "%s: %ld fc1 forwards with recompute, %ld without", name, n2 - n1, n1 - n0);
            vt_end(name);
            free(base);
            free(rc);
        }
    /* Trainer-owned parameter memory through vescale.h (vs_train_desc.storage):
       bit for bit the run in DDP's memory, on every ZeRO stage it allows. */
    static const int st_mesh[][4] = {{1, 1, 1, 0}, {2, 2, 2, 0}, {2, 2, 2, 1}, {1, 2, 2, 1}};
    for (size_t m = 0; m < sizeof st_mesh / sizeof st_mesh[0]; m++) {
        const int* sm = st_mesh[m];
        run* base = mk(sm[0], sm[1], sm[2], VS_PIPE_1F1B, 4 / sm[1], (vs_zero_stage)sm[3]);
        run* own = mk(sm[0], sm[1], sm[2], VS_PIPE_1F1B, 4 / sm[1], (vs_zero_stage)sm[3]);
        own->storage = 1;
        snprintf(name, sizeof name, "train/storage_PP%d_DP%d_TP%d_zero%d", sm[0], sm[1], sm[2], sm[3]);
        vt_begin(name);
        go(base);
        go(own);
        compare(own, base, 1, name);
        VT_CHECK(own->storage_bad == 0, "%s: %d ranks kept parameters in DDP's memory", name, own->storage_bad);
        vt_end(name);
        free(base);
        free(own);
    }

    vt_begin("train/storage_zero2_refused");
    {
        run* z2 = mk(1, 2, 1, VS_PIPE_1F1B, 2, VS_ZERO_2);
        VT_OK(vs_launch(2, storage_zero2_rank, z2));
        free(z2);
    }
    vt_end("train/storage_zero2_refused");

    vt_begin("train/recompute_bad_input");
    {
        vs_plan bad;
        memset(&bad, 0, sizeof bad);
        snprintf(bad.recompute, sizeof bad.recompute, "b0.* nothing.*");
        vs_result r = vs_plan_check(&bad, &MODEL);
        VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "recompute \"nothing.*\" matches no layer"), "%s",
                 vs_last_error());
        char text[2048];
        snprintf(bad.recompute, sizeof bad.recompute, "b0.* b1.fc1");
        VT_CHECK(vs_plan_print(&bad, text, sizeof text) > 0 && strstr(text, "recompute: b0.* b1.fc1\n"), "%s", text);
        vs_plan back;
        VT_OK(vs_plan_parse(text, &back));
        VT_CHECK(!strcmp(back.recompute, "b0.* b1.fc1"), "parsed back \"%s\"", back.recompute);
        VT_CHECK(vs_plan_print_json(&bad, text, sizeof text) > 0 && strstr(text, "\"recompute\": \"b0.* b1.fc1\""), "%s",
                 text);
        memset(&back, 0, sizeof back);
        VT_OK(vs_plan_parse(text, &back));
        VT_CHECK(!strcmp(back.recompute, "b0.* b1.fc1"), "JSON parsed back \"%s\"", back.recompute);
    }
    vt_end("train/recompute_bad_input");

    /* Evaluation: forward only, on every schedule and some meshes. Before each
       step, on the step's batch: the step's loss is the evaluation's, bit for
       bit (the same forward), and the parameters after the steps equal the
       one-rank run's (the evaluations changed nothing); after them, on a new
       batch: the one-rank evaluation's loss within 1e-5. */
    run* eref = mk(1, 1, 1, VS_PIPE_GPIPE, 4, VS_ZERO_0);
    eref->eval = 1;
    vt_begin("train/eval_one_rank");
    go(eref);
    VT_CHECK(eref->eval_bad == 0 && isfinite(eref->eval_loss), "one rank: %d steps' losses differ from their evaluation",
             eref->eval_bad);
    compare(eref, ref, 1, "one rank with evaluations vs without");
    vt_end("train/eval_one_rank");
    /* GPipe holds all 4 microbatches' activations for the backward; an
       evaluation lets each go once the next layer has it */
    vt_begin("train/eval_peak_below_step");
    printf("    one rank, GPipe, 4 microbatches: activation memory at its peak %zu bytes in a step, %zu in an evaluation\n",
           eref->train_peak, eref->eval_peak);
    VT_CHECK(eref->eval_peak > 0 && 2 * eref->eval_peak < eref->train_peak,
             "an evaluation held %zu bytes of activations at its peak, a step %zu", eref->eval_peak, eref->train_peak);
    vt_end("train/eval_peak_below_step");
    static const int ev_mesh[][4] = {{2, 2, 2, 0}, {2, 2, 2, 1}, {1, 2, 2, 2}, {2, 1, 1, 0}, {2, 2, 1, 2}};
    for (size_t m = 0; m < sizeof ev_mesh / sizeof ev_mesh[0]; m++)
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            const int* em = ev_mesh[m];
            if (em[0] == 1 && k > 0) continue;
            run* R = mk(em[0], em[1], em[2], kinds[k], 4 / em[1], (vs_zero_stage)em[3]);
            R->eval = 1;
            snprintf(name, sizeof name, "train/eval_PP%d_DP%d_TP%d_%s_zero%d", em[0], em[1], em[2],
                     vs_pipe_kind_name(kinds[k]), em[3]);
            vt_begin(name);
            go(R);
            compare(R, ref, 0, name);
            VT_CHECK(R->eval_bad == 0, "%s: %d steps' losses differ from their evaluation", name, R->eval_bad);
            VT_CHECK(rel(R->eval_loss, eref->eval_loss) < 1e-5, "%s: evaluation %.9g, one rank %.9g", name, R->eval_loss,
                     eref->eval_loss);
            vt_end(name);
            free(R);
        }
    free(eref);

    VT_CASE("train/data_inputs: specs optional, checked where given; takers that disagree and a later maker refused",
            case_data_inputs());
    VT_CASE("train/query_desc: the documented defaults, resolved and used by vs_parallelize",
            VT_OK(vs_launch(1, rank_query_desc, NULL)));

    vt_begin("train/deferred_init_peak");
    run* big = mk(1, 1, 2, VS_PIPE_1F1B, 4, VS_ZERO_0);
    go(big);
    // the largest shard is 8x16/2 floats: the peak holds one shard at a time, never the model
    VT_CHECK(big->init_peak > 0 && big->init_peak <= (int64_t)(D * H / 2 * 4), "init peak %lld bytes (model %lld)",
             (long long)big->init_peak, (long long)big->model_bytes);
    free(big);
    vt_end("train/deferred_init_peak");
    free(ref);
    return vt_summary();
}
