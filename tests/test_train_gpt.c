/* test_train_gpt.c - "Every mode matches one rank" on the example GPT
   (examples/gpt.h: vocab 32, seq 8, dim 32, 4 heads, 2 blocks = 6 units),
   trained by vs_parallelize + vs_train_step with examples/train_gpt.c's recipe
   (AdamW, cosine LR with warmup, clip 1.0) on 16 rows a step:
   - meshes 1, PP2, DP2, TP2, PP2xDP2, DP2xTP2, PP2xTP2, PP2xDP2xTP2; ZeRO 0/1/2
     where DP > 1; every built-in schedule where PP > 1. Each step's loss and the
     final parameters (vs_train_get_param) equal the one-rank run's within 1e-5
     relative (the one-rank run takes the same 8 microbatches: dp x M);
   - ZeRO-3 on PP2xDP2xTP2, every schedule (the zero-bubble ones gather for
     W too), bit for bit ZeRO-1 on DP2xTP2; HSDP DPR2xDPS2xTP2 ZeRO-1 and 3;
   - bit for bit where only PP differs: each PP2 run against the same mesh,
     ZeRO stage and M without PP (PP2 against one rank, PP2xDP2xTP2 against
     DP2xTP2, ...);
   - resume on another mesh: saved on PP2xDP2xTP2 after 5 steps, loaded on
     DP4, TP4, PP4xDP2, one rank, PP2xTP2 (zbv) and DP2xTP2 with sequence
     parallelism; the next 5 steps equal the uninterrupted one-rank run's
     within 1e-5, and so do the parameters;
   - sequence parallelism (plan.sequence_parallel): TP2, TP4, DP2xTP2 (ZeRO
     0/1/2), PP2xTP2 (1f1b, zbv) and PP2xDP2xTP2 (zbh1, ZeRO 2) within 1e-5 of
     one rank, PP2xTP2 bit for bit equal to TP2; saved on PP2xDP2xTP2 with it
     and resumed on one rank; a sequence TP does not divide is refused;
   - a checkpoint of it loaded into a 1-block GPT: an error listing the
     tensors it lacks, or with vs_train_desc.load_partial its values;
   - recompute of every block lowers the activation peak on one rank, DP2 x
     TP2 and PP2 (zbh1), losses and parameters bit for bit the same. */
#define VESCALE_IMPLEMENTATION
#include "../vescale.h"
#include "../examples/gpt.h"
#include "vs_test.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

enum { ROWS = 16, STEPS = 10, SAVE_AT = 5, MB = 8, MAXP = 64 };

static gpt_config CFG = {32, 8, 32, 4, 2, 99};
static gpt_model_storage STORE;
static vs_model_desc MODEL;

/* The model's parameters, unique by name (the tied wte once). */
static const char* PNAME[MAXP];
static int64_t PSIZE[MAXP], POFF[MAXP], PTOTAL;
static int NP;

static void list_params(void)
{
    for (int l = 0; l < MODEL.nlayers; l++)
        for (int i = 0; i < MODEL.layers[l].nparams; i++) {
            const vs_param_decl* d = &MODEL.layers[l].params[i];
            int seen = 0;
            for (int p = 0; p < NP && !seen; p++) seen = !strcmp(PNAME[p], d->name);
            if (seen || NP == MAXP) continue;
            PNAME[NP] = d->name;
            PSIZE[NP] = d->shape[0] * (d->ndim > 1 ? d->shape[1] : 1);
            POFF[NP] = PTOTAL;
            PTOTAL += PSIZE[NP++];
        }
}

typedef struct run {
    vs_plan plan;
    int steps;
    const char* save; // save after `steps` steps
    const char* load; // load before training
    int first;        // the first step's number (after a load)
    int T;            // > 0: only try one step of T positions (a bad input)
    double loss[STEPS];
    float* params;    // PTOTAL floats, in PNAME order
    size_t act_peak;  // the engine's activation memory at its peak, the most over steps (rank 0)
} run;

/* vs_parallelize refuses the run's plan on every rank, naming h.0.mlp. */
static int no_sp_rank(vs_world* w, void* arg)
{
    run* R = (run*)arg;
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &MODEL;
    d.plan = &R->plan;
    vs_train* t = NULL;
    vs_result r = vs_parallelize(w, &d, &t);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "layer \"h.0.mlp\" does not declare") && !t,
             "rank %d: %d %s", vs_world_rank(w), (int)r, vs_last_error());
    if (!r) vs_train_free(t);
    return 0;
}

static int rank_fn(vs_world* w, void* arg)
{
    run* R = (run*)arg;
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &MODEL;
    d.plan = &R->plan;
    d.optim.kind = VS_OPTIM_ADAMW;
    d.optim.weight_decay = 0.01;
    d.lr = (vs_lr_schedule){VS_LR_COSINE, 3e-3, 3e-4, 3, 20, 0, 0};
    d.clip = 1.0;
    vs_train* t;
    vs_result r = vs_parallelize(w, &d, &t);
    VT_CHECK(r == VS_OK, "parallelize: %s", vs_last_error());
    if (r) return 1;
    if (R->T) { // a batch of T positions that TP does not divide: refused on every rank
        int32_t tok[ROWS * 8] = {0}, tgt[ROWS * 8] = {0};
        vs_batch b = gpt_batch_view(ROWS, R->T, tok, tgt);
        double l = 0;
        r = vs_train_step(t, &b, &l);
        VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "splits T = 6 over TP = 4 unevenly"), "rank %d: %d %s",
                 vs_world_rank(w), (int)r, vs_last_error());
        vs_train_free(t);
        return 0;
    }
    if (R->load) VT_OK(vs_train_load(t, R->load, NULL, 0));
    int s0 = (int)vs_train_steps(t);
    int32_t tokens[ROWS * 8], targets[ROWS * 8];
    vs_batch b = gpt_batch_view(ROWS, CFG.seq, tokens, targets);
    for (int s = 0; s < R->steps; s++) {
        gpt_batch(&CFG, s0 + s, ROWS, tokens, targets);
        vs_train_stats st;
        VT_OK(vs_train_step_ex(t, &b, &st));
        if (vs_world_rank(w) == 0) R->loss[s] = st.loss;
        if (vs_world_rank(w) == 0 && st.act_peak > R->act_peak) R->act_peak = st.act_peak;
    }
    if (vs_world_rank(w) == 0) R->first = s0;
    if (R->save) VT_OK(vs_train_save(t, R->save, NULL, 0, 0));
    float* buf = (float*)malloc(sizeof(float) * 4096);
    for (int p = 0; p < NP; p++) {
        VT_OK(vs_train_get_param(t, PNAME[p], buf, sizeof(float) * 4096));
        if (vs_world_rank(w) == 0) memcpy(R->params + POFF[p], buf, sizeof(float) * (size_t)PSIZE[p]);
    }
    free(buf);
    VT_OK(vs_train_free(t));
    return 0;
}

/* A checkpoint of this 2-block GPT loaded into a 1-block one (issue 33): without
   desc.load_partial, VS_ERR_MISMATCH listing block 1's tensors (nothing loaded
   silently); with it, VS_OK, and block 0's and the shared tensors' values and the
   step count are the checkpoint's. */
static gpt_config CFG1 = {32, 8, 32, 4, 1, 99};
static gpt_model_storage STORE1;
static vs_model_desc MODEL1;
typedef struct small_load {
    const char* path;
    const run* saved; // the run that saved it (its parameters, PNAME order)
} small_load;

static int small_rank(vs_world* w, void* arg)
{
    const small_load* S = (const small_load*)arg;
    vs_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.pp = plan.dp = plan.tp = 1;
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &MODEL1;
    d.plan = &plan;
    for (int partial = 0; partial < 2; partial++) {
        d.load_partial = partial;
        vs_train* t;
        VT_OK(vs_parallelize(w, &d, &t));
        vs_result r = vs_train_load(t, S->path, NULL, 0);
        if (!partial) {
            const char* m = vs_last_error();
            VT_CHECK(r == VS_ERR_MISMATCH && strstr(m, "this model lacks") && strstr(m, "\"h.1.attn.") &&
                         strstr(m, "load_partial") && !strstr(m, "\"h.0."),
                     "a 2-block checkpoint into a 1-block model: %s: %s", vs_result_string(r), m);
        } else {
            VT_CHECK(r == VS_OK, "load_partial: %s", vs_last_error());
            VT_CHECK(vs_train_steps(t) == SAVE_AT, "load_partial: %lld steps", (long long)vs_train_steps(t));
            static float buf[4096];
            int checked = 0;
            for (int p = 0; p < NP && !r; p++) {
                if (!strncmp(PNAME[p], "h.1.", 4)) continue; // (the block the small model lacks)
                VT_OK(vs_train_get_param(t, PNAME[p], buf, sizeof buf));
                VT_CHECK(!memcmp(buf, S->saved->params + POFF[p], sizeof(float) * (size_t)PSIZE[p]),
                         "load_partial: %s is not the checkpoint's", PNAME[p]);
                checked++;
            }
            VT_CHECK(checked == NP - 15, "%d parameters compared", checked);
        }
        VT_OK(vs_train_free(t));
    }
    return 0;
}

static run* mk(int pp, int dp, int tp, vs_pipe_kind k, vs_zero_stage z)
{
    run* R = (run*)calloc(1, sizeof *R);
    R->params = (float*)calloc((size_t)PTOTAL, sizeof(float));
    R->plan.pp = pp, R->plan.dp = dp, R->plan.tp = tp;
    R->plan.schedule = k;
    R->plan.microbatches = MB / dp; // the same 8 microbatches of 2 rows whatever the mesh
    R->plan.zero = z;
    R->steps = STEPS;
    return R;
}

static void drop(run* R)
{
    if (R) free(R->params);
    free(R);
}

static void go(run* R)
{
    int n = R->plan.pp * R->plan.dp * R->plan.tp;
    VT_CHECK(vs_launch(n, rank_fn, R) == VS_OK, "launch: %s", vs_last_error());
}

static double rel(double a, double b) { return fabs(a - b) / (fabs(b) > 1e-12 ? fabs(b) : 1e-12); }
static double WORST_LOSS, WORST_PARAM; // the largest differences the 1e-5 checks saw (printed at the end)

/* a's steps against ref's steps [off, off + a->steps); parameters relative to
   each tensor's largest element (elementwise is ill-posed near 0). */
static void compare(const run* a, const run* ref, int off, int bitwise, const char* what)
{
    for (int s = 0; s < a->steps; s++) {
        double x = a->loss[s], y = ref->loss[off + s];
        if (bitwise) {
            VT_CHECK(!memcmp(&x, &y, sizeof x), "%s: step %d loss %.17g vs %.17g", what, off + s, x, y);
            continue;
        }
        WORST_LOSS = fmax(WORST_LOSS, rel(x, y));
        VT_CHECK(rel(x, y) < 1e-5, "%s: step %d loss %.9g vs %.9g (rel %.2g)", what, off + s, x, y, rel(x, y));
    }
    for (int p = 0; p < NP; p++) {
        const float *pa = a->params + POFF[p], *pr = ref->params + POFF[p];
        double scale = 0, worst = 0;
        int64_t at = 0;
        for (int64_t e = 0; e < PSIZE[p]; e++) scale = fmax(scale, fabs(pr[e]));
        for (int64_t e = 0; e < PSIZE[p]; e++) {
            if (bitwise && memcmp(&pa[e], &pr[e], 4)) {
                VT_CHECK(0, "%s: %s[%lld] %.9g vs %.9g", what, PNAME[p], (long long)e, pa[e], pr[e]);
                break;
            }
            if (fabs(pa[e] - pr[e]) > worst) worst = fabs(pa[e] - pr[e]), at = e;
        }
        if (bitwise) continue;
        WORST_PARAM = fmax(WORST_PARAM, worst / scale);
        VT_CHECK(worst <= 1e-5 * scale, "%s: %s[%lld] %.9g vs %.9g (max |diff| %.3g, max |value| %.3g)", what, PNAME[p],
                 (long long)at, pa[at], pr[at], worst, scale);
    }
}

int main(void)
{
    if (gpt_model(&CFG, &STORE, &MODEL) != VS_OK) return fprintf(stderr, "gpt_model: %s\n", vs_last_error()), 1;
    list_params();
    char name[160];

    /* The reference: one rank, 8 microbatches a step. */
    run* ref = mk(1, 1, 1, VS_PIPE_GPIPE, VS_ZERO_0);
    vt_begin("train_gpt/one_rank");
    VT_CHECK(NP == 2 + 15 * CFG.layers + 2, "%d parameters", NP);
    go(ref);
    VT_CHECK(ref->loss[STEPS - 1] < ref->loss[0] - 0.1, "the loss falls: %g -> %g", ref->loss[0], ref->loss[STEPS - 1]);
    vt_end("train_gpt/one_rank");

    /* Recompute saves memory on every mesh, one rank too (issue 33): every
       block recomputed ("h.*"), the engine's activation peak (vs_train_stats
       .act_peak, what train_gpt prints) falls below the run's without recompute
       by at least a third (what a unit saves is let go after its backward, not
       at the end of the stage's), and losses and parameters are those without
       recompute bit for bit. One rank and DP2 x TP2 with 1F1B, train_gpt's
       schedule (one microbatch in flight: only the release after each unit's
       backward can lower the peak); PP2 with zbh1 splits the backward (what a
       unit saves is kept until its W), there the peak only has to fall. */
    static const int rcm[][4] = {{1, 1, 1, VS_PIPE_1F1B}, {1, 2, 2, VS_PIPE_1F1B}, {2, 1, 1, VS_PIPE_ZBH1}};
    for (size_t m = 0; m < sizeof rcm / sizeof rcm[0]; m++) {
        run* base = mk(rcm[m][0], rcm[m][1], rcm[m][2], (vs_pipe_kind)rcm[m][3], VS_ZERO_0);
        run* rc = mk(rcm[m][0], rcm[m][1], rcm[m][2], (vs_pipe_kind)rcm[m][3], VS_ZERO_0);
        snprintf(rc->plan.recompute, sizeof rc->plan.recompute, "h.*");
        snprintf(name, sizeof name, "train_gpt/recompute_memory_PP%d_DP%d_TP%d_%s", rcm[m][0], rcm[m][1], rcm[m][2],
                 vs_pipe_kind_name((vs_pipe_kind)rcm[m][3]));
        vt_begin(name);
        go(base);
        go(rc);
        compare(rc, base, 0, 1, name);
        printf("    %s: activation peak %zu B with recompute, %zu B without\n", name, rc->act_peak, base->act_peak);
        VT_CHECK(base->act_peak > 0 && (rcm[m][0] > 1 ? rc->act_peak < base->act_peak : rc->act_peak * 3 <= base->act_peak * 2),
                 "%s: activation peak %zu B with recompute, %zu B without", name, rc->act_peak, base->act_peak);
        vt_end(name);
        drop(base);
        drop(rc);
    }

    /* Meshes without PP (the bitwise references of the PP runs below), each
       ZeRO stage where DP > 1. */
    static const int flat[][2] = {{1, 1}, {2, 1}, {1, 2}, {2, 2}}; // DP, TP
    run* nopp[4][3] = {{NULL}};
    for (int m = 0; m < 4; m++)
        for (int z = 0; z <= 2; z++) {
            int dp = flat[m][0], tp = flat[m][1];
            if (z && dp == 1) continue;
            if (dp == 1 && tp == 1) { // one rank: the reference itself
                nopp[m][0] = ref;
                continue;
            }
            run* R = mk(1, dp, tp, VS_PIPE_1F1B, (vs_zero_stage)z);
            snprintf(name, sizeof name, "train_gpt/DP%d_TP%d_zero%d", dp, tp, z);
            vt_begin(name);
            go(R);
            compare(R, ref, 0, 0, name);
            vt_end(name);
            nopp[m][z] = R;
        }

    /* PP2 on each of those, every schedule and ZeRO stage: within 1e-5 of one rank, and bit for bit equal to
       the same mesh without PP. */
    static const vs_pipe_kind kinds[] = {VS_PIPE_1F1B, VS_PIPE_GPIPE, VS_PIPE_INTERLEAVED, VS_PIPE_ZBH1, VS_PIPE_ZBV, VS_PIPE_DUALPIPEV};
    for (int m = 0; m < 4; m++)
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
            for (int z = 0; z <= 2; z++) {
                int dp = flat[m][0], tp = flat[m][1];
                if (dp == 1 && z) continue;
                run* R = mk(2, dp, tp, kinds[k], (vs_zero_stage)z);
                snprintf(name, sizeof name, "train_gpt/PP2_DP%d_TP%d_%s_zero%d", dp, tp, vs_pipe_kind_name(kinds[k]), z);
                vt_begin(name);
                go(R);
                compare(R, ref, 0, 0, name);
                char what[200];
                snprintf(what, sizeof what, "%s vs DP%d_TP%d (bitwise)", name, dp, tp);
                compare(R, nopp[m][z], 0, 1, what);
                vt_end(name);
                drop(R);
            }
    /* ZeRO-3 (issue 34) on the GPT, whose blocks split their backward (B, W):
       the unit hooks gather before W too. PP2 x DP2 x TP2 with every schedule
       and reshard_after_forward 1 and 0: bit for bit the ZeRO-1 run without PP
       (the same reduce-scatters); HSDP (DPR2 x DPS2 x TP2) with ZeRO-3 and
       ZeRO-1: within 1e-5 of one rank, and the two bit for bit. */
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (int raf = 1; raf >= 0; raf--) {
            run* R = mk(2, 2, 2, kinds[k], VS_ZERO_3);
            R->plan.reshard_after_forward = raf, R->plan.reshard_after_forward_set = 1;
            snprintf(name, sizeof name, "train_gpt/PP2_DP2_TP2_%s_zero3_reshard%d", vs_pipe_kind_name(kinds[k]), raf);
            vt_begin(name);
            go(R);
            compare(R, ref, 0, 0, name);
            char what[200];
            snprintf(what, sizeof what, "%s vs DP2_TP2 ZeRO-1 (bitwise)", name);
            compare(R, nopp[3][1], 0, 1, what);
            vt_end(name);
            drop(R);
        }
    {
        vt_begin("train_gpt/HSDP_DPR2_DPS2_TP2_zero3");
        run* h1 = mk(1, 4, 2, VS_PIPE_1F1B, VS_ZERO_1);
        run* h3 = mk(1, 4, 2, VS_PIPE_1F1B, VS_ZERO_3);
        h1->plan.dp_shard = h3->plan.dp_shard = 2;
        go(h1);
        go(h3);
        compare(h1, ref, 0, 0, "HSDP ZeRO-1");
        compare(h3, ref, 0, 0, "HSDP ZeRO-3");
        compare(h3, h1, 0, 1, "HSDP ZeRO-3 vs ZeRO-1 (bitwise)");
        drop(h1);
        drop(h3);
        vt_end("train_gpt/HSDP_DPR2_DPS2_TP2_zero3");
    }
    for (int m = 1; m < 4; m++)
        for (int z = 0; z <= 2; z++) drop(nopp[m][z]);

    /* TP must divide the heads (4), not only the dim (32): gpt.h's shard_unit. */
    {
        vt_begin("train_gpt/tp_must_divide_heads");
        vs_plan p8;
        memset(&p8, 0, sizeof p8);
        p8.tp = 8;
        VT_ERR(vs_plan_check(&p8, &MODEL), VS_ERR_INVALID,
               "TP=8 cuts dim 1 of \"h.0.attn.wq\" (32) into 4, not whole blocks of 8 (shard_unit: a head's width; TP must "
               "divide the 4 heads)");
        vs_constraints c;
        memset(&c, 0, sizeof c);
        c.world = 8, c.tp = 8, c.global_batch = ROWS;
        vs_plan out;
        static vs_plan_estimate est[64];
        int n = 0;
        VT_ERR(vs_generate_plan(&MODEL, &c, NULL, &out, est, 64, &n), VS_ERR_INVALID,
               "tp=8 does not divide h.0.attn.wq's 4 heads (blocks of 8)");
        p8.tp = 4; // 4 heads over 4: fine
        VT_OK(vs_plan_check(&p8, &MODEL));
        vt_end("train_gpt/tp_must_divide_heads");
    }

    /* Sequence parallelism: each mesh against one rank; PP2 x TP2 also bit for
       bit against TP2 (only PP differs). */
    {
        static const int spm[][5] = {{1, 1, 2, VS_PIPE_1F1B, 0}, {1, 1, 4, VS_PIPE_1F1B, 0}, {1, 2, 2, VS_PIPE_1F1B, 0},
                                     {1, 2, 2, VS_PIPE_1F1B, 1}, {1, 2, 2, VS_PIPE_1F1B, 2}, {2, 1, 2, VS_PIPE_1F1B, 0},
                                     {2, 1, 2, VS_PIPE_ZBV, 0},  {2, 2, 2, VS_PIPE_ZBH1, 2}};
        run* tp2 = NULL;
        for (size_t i = 0; i < sizeof spm / sizeof spm[0]; i++) {
            run* R = mk(spm[i][0], spm[i][1], spm[i][2], (vs_pipe_kind)spm[i][3], (vs_zero_stage)spm[i][4]);
            R->plan.sequence_parallel = 1;
            snprintf(name, sizeof name, "train_gpt/SP_PP%d_DP%d_TP%d_%s_zero%d", spm[i][0], spm[i][1], spm[i][2],
                     vs_pipe_kind_name((vs_pipe_kind)spm[i][3]), spm[i][4]);
            vt_begin(name);
            go(R);
            compare(R, ref, 0, 0, name);
            if (i == 5) compare(R, tp2, 0, 1, "SP PP2_TP2 vs SP TP2 (bitwise)");
            vt_end(name);
            if (i == 0) tp2 = R;
            else drop(R);
        }
        drop(tp2);
        run* bad = mk(1, 1, 4, VS_PIPE_1F1B, VS_ZERO_0);
        bad->plan.sequence_parallel = 1, bad->T = 6;
        vt_begin("train_gpt/SP_uneven_sequence_refused");
        go(bad);
        vt_end("train_gpt/SP_uneven_sequence_refused");
        drop(bad);
        /* A layer that does not declare sp_ok would run on its rank's part of
           the sequence as if it were the whole (issue 19.5: 1.8e-3 off after 3
           steps, silently): refused, naming it, on every path to a plan. */
        vt_begin("train_gpt/SP_needs_every_layer");
        vs_plan sp;
        memset(&sp, 0, sizeof sp);
        sp.tp = 2, sp.sequence_parallel = 1;
        VT_OK(vs_plan_check(&sp, &MODEL));
        STORE.layers[2].sp_ok = 0; // h.0.mlp
        VT_ERR(vs_plan_check(&sp, &MODEL), VS_ERR_INVALID, "layer \"h.0.mlp\" does not declare");
        run* no = mk(1, 1, 2, VS_PIPE_1F1B, VS_ZERO_0);
        no->plan.sequence_parallel = 1;
        VT_OK(vs_launch(2, no_sp_rank, no));
        drop(no);
        sp.sequence_parallel = 0; // without sequence parallelism the layer is fine
        VT_OK(vs_plan_check(&sp, &MODEL));
        STORE.layers[2].sp_ok = 1;
        vt_end("train_gpt/SP_needs_every_layer");
    }

    /* Resume on another mesh: saved on PP2 x DP2 x TP2 after SAVE_AT steps (its
       parameters then equal one rank's after SAVE_AT steps). */
    run* ref5 = mk(1, 1, 1, VS_PIPE_GPIPE, VS_ZERO_0);
    ref5->steps = SAVE_AT;
    char dir[] = "/tmp/vs_train_gpt_XXXXXX", path[64];
    VT_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/step-%06d", dir, SAVE_AT);
    run* s = mk(2, 2, 2, VS_PIPE_1F1B, VS_ZERO_1);
    s->steps = SAVE_AT;
    s->save = path;
    /* Activation recompute of every block (plan.recompute "h.*"): bit for bit
       the run without it, on make run's mesh (1F1B: stage 0 holds two
       microbatches' activations) and on one rank with GPipe (all 8 forwards
       before the backwards; one rank's 1F1B, one microbatch at a time, is in
       train_gpt/recompute_memory_* above), and the activation memory at its
       peak (the engine's accounting, rank 0) drops. */
    static const int rc_mesh[][4] = {{2, 2, 2, VS_PIPE_1F1B}, {1, 1, 1, VS_PIPE_GPIPE}};
    for (int i = 0; i < 2; i++) {
        run* base = mk(rc_mesh[i][0], rc_mesh[i][1], rc_mesh[i][2], (vs_pipe_kind)rc_mesh[i][3], VS_ZERO_1);
        run* rc = mk(rc_mesh[i][0], rc_mesh[i][1], rc_mesh[i][2], (vs_pipe_kind)rc_mesh[i][3], VS_ZERO_1);
        base->steps = rc->steps = 3;
        snprintf(rc->plan.recompute, sizeof rc->plan.recompute, "h.*");
        char name[96];
        snprintf(name, sizeof name, "train_gpt/recompute_every_block_PP%d_DP%d_TP%d_%s", rc_mesh[i][0], rc_mesh[i][1],
                 rc_mesh[i][2], vs_pipe_kind_name((vs_pipe_kind)rc_mesh[i][3]));
        vt_begin(name);
        go(base);
        go(rc);
        compare(rc, base, 0, 1, name);
        printf("    %s: activation memory at its peak %zu bytes without recompute, %zu with (%.2fx less)\n", name,
               base->act_peak, rc->act_peak, rc->act_peak ? (double)base->act_peak / (double)rc->act_peak : 0.0);
        VT_CHECK(rc->act_peak > 0 && rc->act_peak < base->act_peak, "%s: %zu bytes with recompute, %zu without", name,
                 rc->act_peak, base->act_peak);
        vt_end(name);
        drop(base);
        drop(rc);
    }

    vt_begin("train_gpt/save_PP2_DP2_TP2");
    go(s);
    go(ref5);
    compare(s, ref5, 0, 0, "PP2_DP2_TP2 before the save");
    vs_plan saved;
    VT_OK(vs_train_saved_plan(path, &saved));
    VT_CHECK(saved.pp == 2 && saved.dp == 2 && saved.tp == 2 && saved.zero == VS_ZERO_1 && saved.microbatches == MB / 2,
             "saved plan PP%d DP%d TP%d zero %d M %d", saved.pp, saved.dp, saved.tp, (int)saved.zero, saved.microbatches);
    vt_end("train_gpt/save_PP2_DP2_TP2");
    vt_begin("train_gpt/load_into_a_smaller_model");
    {
        VT_CHECK(gpt_model(&CFG1, &STORE1, &MODEL1) == VS_OK, "gpt_model: %s", vs_last_error());
        small_load S = {path, s};
        VT_CHECK(vs_launch(1, small_rank, &S) == VS_OK, "launch: %s", vs_last_error());
    }
    vt_end("train_gpt/load_into_a_smaller_model");
    drop(s);
    drop(ref5);
    // (and PP2 x TP2 on zbv with ZeRO 2: a V places embed and the tied head on one stage)
    // (and DP2 x TP2 with sequence parallelism)
    static const int rmesh[][3] = {{1, 4, 1}, {1, 1, 4}, {4, 2, 1}, {1, 1, 1}, {2, 1, 2}, {1, 2, 2}};
    for (int i = 0; i < 6; i++) {
        run* c = mk(rmesh[i][0], rmesh[i][1], rmesh[i][2], i == 4 ? VS_PIPE_ZBV : VS_PIPE_1F1B, i == 4 ? VS_ZERO_2 : VS_ZERO_1);
        c->plan.sequence_parallel = i == 5;
        c->steps = STEPS - SAVE_AT;
        c->load = path;
        snprintf(name, sizeof name, "train_gpt/resume_on_PP%d_DP%d_TP%d%s", rmesh[i][0], rmesh[i][1], rmesh[i][2],
                 i == 5 ? "_SP" : "");
        vt_begin(name);
        go(c);
        VT_CHECK(c->first == SAVE_AT, "resumed at step %d", c->first);
        compare(c, ref, SAVE_AT, 0, name);
        vt_end(name);
        drop(c);
    }
    /* Saved with sequence parallelism (its norms' values are replicated, only
       their gradients were partial), resumed on one rank. */
    snprintf(path, sizeof path, "%s/sp-%06d", dir, SAVE_AT);
    s = mk(2, 2, 2, VS_PIPE_1F1B, VS_ZERO_2);
    s->plan.sequence_parallel = 1;
    s->steps = SAVE_AT;
    s->save = path;
    vt_begin("train_gpt/SP_save_resume_on_one_rank");
    go(s);
    VT_OK(vs_train_saved_plan(path, &saved));
    VT_CHECK(saved.sequence_parallel == 1, "the saved plan keeps sequence_parallel: %d", saved.sequence_parallel);
    run* c1 = mk(1, 1, 1, VS_PIPE_1F1B, VS_ZERO_0);
    c1->steps = STEPS - SAVE_AT;
    c1->load = path;
    go(c1);
    VT_CHECK(c1->first == SAVE_AT, "resumed at step %d", c1->first);
    compare(c1, ref, SAVE_AT, 0, "SP save, resumed on one rank");
    vt_end("train_gpt/SP_save_resume_on_one_rank");
    drop(s);
    drop(c1);
    snprintf(name, sizeof name, "rm -rf %s", dir);
    VT_CHECK(system(name) == 0, "rm");
    drop(ref);
    printf("# largest differences from one rank: loss %.2g relative, parameters %.2g of the tensor's largest element\n",
           WORST_LOSS, WORST_PARAM);
    return vt_summary();
}
