/* test_train_zero3.c - vescale.h's high-level API with ZeRO-3 (vs_plan.zero 3)
   and HSDP (vs_plan.dp_shard): tests/train_model.h's MLP (a tied projection
   used by the first and the last layer) trained by vs_parallelize +
   vs_train_step on thread ranks, against the same model on one rank:
   - meshes DP4, DPR2 x DPS2, DPR2 x DPS2 x TP2 (8 ranks), PP2 x DPS2 x TP2 under
     1F1B, GPipe, interleaved, ZB-H1, ZB-V and DualPipeV, PP2 x DPR2 x DPS2
     under 1F1B and ZB-V; reshard_after_forward
     1 and 0; losses and final parameters within 1e-6 relative of one rank
     (of the tensor's largest element), and bit for bit equal to ZeRO-1 on the
     same mesh (the same reduce-scatter of the same buckets: the ready groups
     give other bucket edges, but each element is summed over the same ranks in
     the same order);
   - recompute (a recomputed forward keeps its groups for the backward),
     accumulation over calls (an evaluation between them), vs_train_eval (bit
     for bit the step's loss), vs_train_stats' gather counts, save after 3
     steps and resume on a fresh state, on HSDP with PP, on ZeRO-1;
   - HSDP against plain DP is compared within 1e-6 only: its reduction is
     another (a reduce-scatter over DPS, then an all-reduce over DPR);
   - refusals: dp_shard not dividing dp, ZeRO-3 with trainer-owned storage;
     vs_train_reconfigure of a ZeRO-3 or HSDP state onto a (PP, DP, TP) mesh
     of the same ranks moves it in memory. A parameter group held
     past its backward (a recompute's gather not given back) cannot happen
     here: the hooks release after every part, and the "sharded at rest" check
     below sees no group gathered after the last step (vs_ddp_step itself
     refuses a held group, tests/test_ddp_zero3.c). */
#define VESCALE_IMPLEMENTATION
#include "../vescale.h"
#include "vs_test.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

enum { ROWS = 16, STEPS = 6 };

#include "train_model.h"

#define NPARAM 9
static const char* PNAMES[NPARAM] = {"proj", "b0.fc1.w", "b0.fc1.b", "b0.fc2.w", "b0.fc2.b",
                                     "b1.fc1.w", "b1.fc1.b", "b1.fc2.w", "b1.fc2.b"};
static const int PSIZE[NPARAM] = {D * D, D * H, H, H * D, D, D * H, H, H * D, D};

typedef struct run {
    vs_plan plan;
    int steps, accumulate, eval;
    const char* save; // after `steps` steps
    const char* load; // before them
    double loss[STEPS];
    int stats_bad;    // calls whose vs_train_stats gathers or t_gather broke the rule in rank_fn
    int eval_bad;     // steps whose evaluation of the same batch was not the step's loss, bit for bit
    int zero3_bad;    // ranks whose DDP was not ZeRO-3 with the plan's reshard_after_forward, or held a
                      // parameter gathered between steps
    float params[NPARAM][D * H];
} run;

static int rank_fn(vs_world* w, void* arg)
{
    run* R = (run*)arg;
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &MODEL;
    d.plan = &R->plan;
    d.optim.kind = VS_OPTIM_ADAMW;
    d.optim.weight_decay = 0.01;
    d.lr.lr = 0.02;
    d.lr.warmup_steps = 2;
    d.clip = 1.0;
    d.accumulate = R->accumulate;
    vs_train* t = NULL;
    vs_result r = vs_parallelize(w, &d, &t);
    VT_CHECK(r == VS_OK, "parallelize: %s", vs_last_error());
    if (r) return 1;
    vs_ddp_desc dd;
    VT_OK(vs_ddp_query_desc(vs_train_ddp(t), &dd));
    int pf = R->plan.prefetch_set ? R->plan.prefetch : 1;
    if (R->plan.zero == VS_ZERO_3 &&
        (dd.zero != VS_ZERO_3 || dd.reshard_after_forward != R->plan.reshard_after_forward || dd.prefetch != pf))
        __atomic_add_fetch(&R->zero3_bad, 1, __ATOMIC_SEQ_CST);
    if (R->load) VT_OK(vs_train_load(t, R->load, NULL, 0));
    int64_t s0 = vs_train_steps(t);
    int nacc = R->accumulate > 1 ? R->accumulate : 1;
    for (int s = 0; s < R->steps; s++) {
        float X[ROWS * D], T[ROWS * D];
        vs_batch b = tm_batch((int)s0 + s, X, T, ROWS);
        double ev = NAN;
        if (R->eval && nacc == 1) VT_OK(vs_train_eval(t, &b, &ev));
        vs_train_stats st;
        for (int c = 0; c < nacc; c++) { // the step's rows in nacc calls, in order
            vs_batch bc = b;
            for (int i = 0; i < b.n; i++) {
                bc.shape[i][0] = ROWS / nacc;
                bc.data[i] = (const float*)b.data[i] + (size_t)c * (ROWS / nacc) * D;
            }
            VT_OK(vs_train_step_ex(t, &bc, &st));
            if (R->eval && c + 1 < nacc) { // between a step's calls: another batch, the step goes on unchanged
                float EX[ROWS * D], ET[ROWS * D];
                vs_batch eb = tm_batch(50 + s, EX, ET, ROWS);
                VT_OK(vs_train_eval(t, &eb, &ev));
                VT_CHECK(isfinite(ev), "an evaluation between a step's calls: loss %g", ev);
                ev = NAN;
            }
        }
        if (R->eval && nacc == 1 && memcmp(&ev, &st.loss, sizeof ev)) R->eval_bad++;
        /* the stats' gathers: one rank, 6 layers with parameters, a gather each before every microbatch's
           forward and backward (the tied projection's at "loss" is the group of "in"), and before each recomputed
           forward; other meshes: some */
        int64_t want = R->plan.zero != VS_ZERO_3              ? 0
                       : R->plan.pp < 2 && nacc == 1 ? (R->plan.recompute[0] ? 18 : 12) * R->plan.microbatches
                                                     : -1;
        if ((want >= 0 ? st.gathers != want : st.gathers < 1) || st.t_gather < 0 || st.t_gather > st.t_compute ||
            (R->plan.zero != VS_ZERO_3 && st.t_gather != 0))
            __atomic_add_fetch(&R->stats_bad, 1, __ATOMIC_SEQ_CST);
        if (vs_world_rank(w) == 0) R->loss[s] = st.loss;
    }
    if (R->save) VT_OK(vs_train_save(t, R->save, NULL, 0, 0));
    float buf[D * H];
    for (int p = 0; p < NPARAM; p++) {
        VT_OK(vs_train_get_param(t, PNAMES[p], buf, sizeof buf));
        if (vs_world_rank(w) == 0) memcpy(R->params[p], buf, sizeof(float) * (size_t)PSIZE[p]);
    }
    for (int i = 0; R->plan.zero == VS_ZERO_3 && i < vs_ddp_num_params(vs_train_ddp(t)); i++)
        if (vs_ddp_param(vs_train_ddp(t), i)) // (sharded at rest: nothing gathered between steps)
            __atomic_add_fetch(&R->zero3_bad, 1, __ATOMIC_SEQ_CST);
    VT_OK(vs_train_free(t));
    return 0;
}

static void go(run* R)
{
    int n = (R->plan.pp ? R->plan.pp : 1) * (R->plan.dp ? R->plan.dp : 1) * (R->plan.tp ? R->plan.tp : 1);
    VT_CHECK(vs_launch(n, rank_fn, R) == VS_OK, "launch: %s", vs_last_error());
    VT_CHECK(R->zero3_bad == 0, "%d ranks' DDP not ZeRO-3 with reshard_after_forward %d", R->zero3_bad,
             R->plan.reshard_after_forward);
    VT_CHECK(R->stats_bad == 0, "%d calls' stats: gathers or t_gather wrong", R->stats_bad);
    VT_CHECK(R->eval_bad == 0, "%d evaluations differ from their step's loss", R->eval_bad);
}

/* Losses and parameters: bit for bit, or within 1e-6 relative (parameters of
   the tensor's largest element: elementwise is ill-posed near 0). */
static void compare(const run* a, const run* ref, int from, int bitwise, const char* what)
{
    for (int s = 0; s < a->steps; s++) {
        double x = a->loss[s], y = ref->loss[from + s];
        if (bitwise) VT_CHECK(!memcmp(&x, &y, sizeof x), "%s: step %d loss %.17g vs %.17g", what, s, x, y);
        else VT_CHECK(fabs(x - y) <= 1e-6 * fabs(y), "%s: step %d loss %.9g vs %.9g", what, s, x, y);
    }
    for (int p = 0; p < NPARAM; p++) {
        double scale = 0, worst = 0;
        int at = 0, diff = 0;
        for (int e = 0; e < PSIZE[p]; e++) scale = fmax(scale, fabs(ref->params[p][e]));
        for (int e = 0; e < PSIZE[p]; e++) {
            diff += memcmp(&a->params[p][e], &ref->params[p][e], 4) != 0;
            double dd = fabs((double)a->params[p][e] - ref->params[p][e]);
            if (dd > worst) worst = dd, at = e;
        }
        if (bitwise) VT_CHECK(diff == 0, "%s: %s: %d elements differ (at %d: %.9g vs %.9g)", what, PNAMES[p], diff, at,
                              a->params[p][at], ref->params[p][at]);
        else VT_CHECK(worst <= 1e-6 * scale, "%s: %s[%d] %.9g vs %.9g (max |diff| %.3g, max |value| %.3g)", what,
                      PNAMES[p], at, a->params[p][at], ref->params[p][at], worst, scale);
    }
}

static run* mk(int pp, int dp, int shard, int tp, vs_pipe_kind k, int mbs, vs_zero_stage z, int reshard)
{
    run* R = (run*)calloc(1, sizeof *R);
    R->plan.pp = pp, R->plan.dp = dp, R->plan.tp = tp;
    R->plan.dp_shard = shard;
    R->plan.schedule = k;
    R->plan.microbatches = mbs;
    R->plan.zero = z;
    R->plan.split = VS_PIPE_SPLIT_UNIFORM;
    if (z == VS_ZERO_3) R->plan.reshard_after_forward = reshard, R->plan.reshard_after_forward_set = 1;
    R->steps = STEPS;
    return R;
}

/* One mesh and schedule: ZeRO-3 with reshard_after_forward 1 and 0 against
   one rank (1e-6) and against ZeRO-1 on the same mesh (bit for bit). */
static void case_mesh(const run* ref, int pp, int dp, int shard, int tp, vs_pipe_kind k)
{
    char name[160];
    char dps[16] = "";
    if (shard) snprintf(dps, sizeof dps, "_DPS%d", shard);
    snprintf(name, sizeof name, "train_zero3/PP%d_%s%d%s_TP%d_%s", pp, shard ? "DPR" : "DP", shard ? dp / shard : dp,
             dps, tp, vs_pipe_kind_name(k));
    vt_begin(name);
    int mbs = pp > 1 ? 4 : 4 / dp; // (one rank's 4 microbatches: the same rows a microbatch)
    run* z1 = mk(pp, dp, shard, tp, k, mbs, VS_ZERO_1, 0);
    go(z1);
    compare(z1, ref, 0, 0, "ZeRO-1 vs one rank");
    for (int raf = 1; raf >= 0; raf--) {
        run* z3 = mk(pp, dp, shard, tp, k, mbs, VS_ZERO_3, raf);
        z3->eval = 1; // (an evaluation before each step: its loss is the step's, and the step unchanged)
        go(z3);
        char what[200];
        snprintf(what, sizeof what, "ZeRO-3 reshard_after_forward %d vs one rank", raf);
        compare(z3, ref, 0, 0, what);
        snprintf(what, sizeof what, "ZeRO-3 reshard_after_forward %d vs ZeRO-1", raf);
        compare(z3, z1, 0, 1, what);
        free(z3);
    }
    free(z1);
    vt_end(name);
}

static int refuse_rank(vs_world* w, void* arg)
{
    (void)arg;
    vs_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.dp = 4, plan.dp_shard = 3;
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &MODEL;
    d.plan = &plan;
    vs_train* t = NULL;
    VT_EXPECT_ERR(vs_parallelize(w, &d, &t), VS_ERR_INVALID, "dp_shard 3", "does not divide DP=4");
    VT_CHECK(!t, "a state made");
    return 0;
}

static vs_result one_arena(const char* name, vs_dtype dt, vs_dtype gdt, int64_t n, void** p, void** g, void* user)
{
    (void)name, (void)dt, (void)gdt, (void)n, (void)user;
    *p = *g = NULL; // (never reached: refused before)
    return VS_OK;
}

static int refuse_storage_rank(vs_world* w, void* arg)
{
    (void)arg;
    vs_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.dp = 2, plan.zero = VS_ZERO_3;
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &MODEL;
    d.plan = &plan;
    d.storage = one_arena;
    vs_train* t = NULL;
    VT_EXPECT_ERR(vs_parallelize(w, &d, &t), VS_ERR_UNSUPPORTED, "zero 3 with desc.storage", "owned shard");
    VT_CHECK(!t, "a state made");
    return 0;
}

/* vs_train_reconfigure of a ZeRO-3 state, or of an HSDP one (DPR2 x DPS1),
   onto a (PP, DP, TP) mesh of the same ranks: moved in memory (nothing lost),
   the state is the plain one that plan makes, and its next step equals a
   state made there bit for bit (tests/test_train_elastic_z3.c: ranks that
   die). */
static int reconfig_rank(vs_world* w, void* arg)
{
    int hsdp = *(int*)arg;
    vs_plan plan, plain;
    memset(&plan, 0, sizeof plan);
    plan.dp = 2, plan.zero = hsdp ? VS_ZERO_1 : VS_ZERO_3, plan.dp_shard = hsdp;
    plain = plan;
    plain.dp_shard = 0;
    vs_train_desc d, dp;
    memset(&d, 0, sizeof d);
    d.model = &MODEL;
    d.plan = &plan;
    dp = d;
    dp.plan = &plain;
    vs_train *t = NULL, *ref = NULL;
    VT_OK(vs_parallelize(w, &d, &t));
    VT_OK(vs_parallelize(w, &dp, &ref));
    if (!t || !ref) return 1;
    vs_mesh* m = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = 1, md.shape[1] = 2, md.shape[2] = 1;
    VT_OK(vs_mesh_init(w, &md, &m));
    vs_train* old = t;
    vs_reconfig_info info;
    memset(&info, 0, sizeof info);
    info.lost = -1;
    VT_OK(vs_train_reconfigure(&t, &d, m, NULL, &info));
    VT_CHECK(t != old && vs_train_mesh(t) == m && info.lost == 0, "state %p (was %p), lost %lld", (void*)t, (void*)old,
             (long long)info.lost);
    float X[ROWS * D], T[ROWS * D];
    vs_batch b = tm_batch(0, X, T, ROWS);
    double l = NAN, lr = NAN;
    VT_OK(vs_train_step(t, &b, &l));
    VT_OK(vs_train_step(ref, &b, &lr));
    VT_CHECK(isfinite(l) && !memcmp(&l, &lr, sizeof l), "loss %.17g, a state made on the mesh %.17g", l, lr);
    VT_OK(vs_train_free(t)); // (and m)
    VT_OK(vs_train_free(ref));
    return 0;
}

int main(void)
{
    build_model();
    run* ref = mk(1, 1, 0, 1, VS_PIPE_GPIPE, 4, VS_ZERO_0, 0);
    vt_begin("train_zero3/one_rank");
    go(ref);
    VT_CHECK(ref->loss[STEPS - 1] < ref->loss[0], "the loss falls: %g -> %g", ref->loss[0], ref->loss[STEPS - 1]);
    vt_end("train_zero3/one_rank");

    case_mesh(ref, 1, 4, 0, 1, VS_PIPE_1F1B); // DP4
    case_mesh(ref, 1, 4, 2, 1, VS_PIPE_1F1B); // DPR2 x DPS2
    case_mesh(ref, 1, 4, 2, 2, VS_PIPE_1F1B); // DPR2 x DPS2 x TP2
    static const vs_pipe_kind kinds[] = {VS_PIPE_1F1B, VS_PIPE_INTERLEAVED, VS_PIPE_ZBH1,
                                         VS_PIPE_GPIPE, VS_PIPE_ZBV, VS_PIPE_DUALPIPEV};
    for (int k = 0; k < 6; k++) case_mesh(ref, 2, 2, 0, 2, kinds[k]); // PP2 x DPS2 x TP2
    case_mesh(ref, 2, 4, 2, 1, VS_PIPE_1F1B); // PP2 x DPR2 x DPS2
    case_mesh(ref, 2, 4, 2, 1, VS_PIPE_ZBV);

    /* the plan's prefetch reaches the DDP (0: none, 2: two groups ahead); the same bits as ZeRO-1 */
    vt_begin("train_zero3/prefetch");
    run* z1 = mk(2, 2, 0, 2, VS_PIPE_1F1B, 4, VS_ZERO_1, 0);
    go(z1);
    for (int pf = 0; pf <= 2; pf += 2) {
        run* z3 = mk(2, 2, 0, 2, VS_PIPE_1F1B, 4, VS_ZERO_3, 1);
        z3->plan.prefetch = pf, z3->plan.prefetch_set = 1;
        go(z3);
        char what[64];
        snprintf(what, sizeof what, "PP2 x DP2 x TP2 prefetch %d vs ZeRO-1", pf);
        compare(z3, z1, 0, 1, what);
        free(z3);
    }
    free(z1);
    vt_end("train_zero3/prefetch");

    /* recompute every layer: a recomputed forward keeps its groups for the
       backward (reshard_after_forward 1: gathered again for the recompute) */
    vt_begin("train_zero3/recompute");
    for (int raf = 1; raf >= 0; raf--)
        for (int pp = 1; pp <= 2; pp++) {
            run* z3 = mk(pp, 2, 0, 1, VS_PIPE_1F1B, pp > 1 ? 4 : 2, VS_ZERO_3, raf);
            snprintf(z3->plan.recompute, sizeof z3->plan.recompute, "*");
            go(z3);
            char what[96];
            snprintf(what, sizeof what, "PP%d x DP2 recompute, reshard_after_forward %d", pp, raf);
            compare(z3, ref, 0, 0, what);
            free(z3);
        }
    vt_end("train_zero3/recompute");

    /* accumulation over 2 calls (ZeRO-3 reduce-scatters every call into the owned ranges) */
    vt_begin("train_zero3/accumulate");
    run* acc = mk(1, 4, 2, 1, VS_PIPE_1F1B, 2, VS_ZERO_3, 1);
    acc->accumulate = 2;
    go(acc);
    compare(acc, ref, 0, 0, "DPR2 x DPS2 accumulating over 2 calls");
    free(acc);
    acc = mk(2, 2, 0, 1, VS_PIPE_1F1B, 2, VS_ZERO_3, 0); // (the tied projection's stages sum every call)
    acc->accumulate = 2;
    acc->eval = 1; // (and an evaluation between the calls changes nothing)
    go(acc);
    compare(acc, ref, 0, 0, "PP2 x DP2 accumulating over 2 calls");
    free(acc);
    vt_end("train_zero3/accumulate");

    /* save after 3 steps, resume on a fresh ZeRO-3 state (and on HSDP): the
       last 3 steps as the uninterrupted run's, bit for bit */
    vt_begin("train_zero3/save_resume");
    char dir[] = "/tmp/vs_train_z3_XXXXXX", path[64], cmd[96];
    VT_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/step3", dir);
    run* whole = mk(1, 4, 0, 1, VS_PIPE_1F1B, 1, VS_ZERO_3, 1);
    go(whole);
    run* first = mk(1, 4, 0, 1, VS_PIPE_1F1B, 1, VS_ZERO_3, 1);
    first->steps = 3, first->save = path;
    go(first);
    run* rest = mk(1, 4, 0, 1, VS_PIPE_1F1B, 1, VS_ZERO_3, 1);
    rest->steps = STEPS - 3, rest->load = path;
    go(rest);
    compare(rest, whole, 3, 1, "ZeRO-3 DP4 resumed after 3 steps vs uninterrupted");
    /* the same file on other meshes and stages: HSDP ZeRO-3 with PP, ZeRO-1 on DP2 x TP2 (1e-6 of one rank) */
    static const int other[][5] = {{2, 4, 2, 1, 3}, {1, 2, 0, 2, 1}};
    for (int i = 0; i < 2; i++) {
        int mbs = other[i][0] > 1 ? 4 : 4 / other[i][1];
        const int* m = other[i];
        run* o = mk(m[0], m[1], m[2], m[3], VS_PIPE_1F1B, mbs, (vs_zero_stage)m[4], 1);
        o->steps = STEPS - 3, o->load = path;
        go(o);
        char what[96];
        snprintf(what, sizeof what, "resumed on PP%d x DP%d (dp_shard %d) x TP%d, ZeRO-%d", other[i][0], other[i][1],
                 other[i][2], other[i][3], other[i][4]);
        compare(o, ref, 3, 0, what);
        free(o);
    }
    free(whole), free(first), free(rest);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    VT_CHECK(system(cmd) == 0, "rm");
    vt_end("train_zero3/save_resume");

    vt_begin("train_zero3/refusals");
    VT_OK(vs_launch(1, refuse_rank, NULL));
    VT_OK(vs_launch(2, refuse_storage_rank, NULL));
    for (int hsdp = 0; hsdp <= 1; hsdp++) VT_OK(vs_launch(2, reconfig_rank, &hsdp));
    vt_end("train_zero3/refusals");
    free(ref);
    return vt_summary();
}
