/* test_ddp_step.c - vs_ddp_step as a trainer's whole step: vs_ddp_desc.finish_in_step
   (the step ends the backward pass's gradient sync) and max_grad_norm (it also
   clips, the norm read back with vs_ddp_grad_norm).

   The reference is the same training with the explicit calls
   (vs_ddp_finish_grad_sync, vs_ddp_clip_grad_norm, vs_ddp_step): parameters and
   norms must agree bit for bit, on trainer-owned flat buffers (ZeRO-0/1) and on
   DDP's own memory (ZeRO-0/1/2), over two thread ranks. The gradients are large
   enough that the clip scales them at every step.

   Built twice: thread ranks with host memory (build/test_ddp_step), and over the
   strict CUDA + NCCL stand-in with device memory (build/test_ddp_step_strict:
   the clip's norm then comes back through the device path's one host read). */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vescale_ddp.h"
#include "vs_test.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef VS_STRICT
#include <cuda_runtime.h>
#include "strict/vs_strict.h"
#define DEV 1
#else
#define DEV 0
#endif
#include "ddp_common.h"

static vs_result launch(int n, int (*fn)(vs_world*, void*), void* arg)
{
    vs_launch_desc ld = dc_launch_desc(n);
    return vs_launch_ex(&ld, fn, arg);
}

#define L 4      /* layers, a ready group each */
#define N 600    /* elements a layer's tensor */
#define STEPS 4
#define MAX_NORM 0.5

/* how a step is taken: the explicit calls (with a clip or without), or by vs_ddp_step */
enum { EXPLICIT_CLIP, EXPLICIT, FINISH_IN_STEP, CLIP_IN_STEP, CLIP_IN_STEP_AND_OWN };

typedef struct cfg {
    int zero, ext, mode;
    int nan_step;        /* >= 0: rank 1's gradient holds a NaN at this step */
    float* out;          /* [L * N]: the final parameters (rank 0 writes) */
    double norm[STEPS];  /* each step's norm (rank 0 writes; explicit: the clip's *norm) */
    int64_t skipped;
} cfg;

static float init_val(int64_t i) { return (float)(0.05 * sin(0.013 * (double)i + 0.4)); }
static float grad_val(int64_t i, int r, int t, float p) { return (float)(0.3 * sin(0.37 * (double)i + 1.3 * r + 0.7 * t)) + 0.01f * p; }

static int rank_train(vs_world* w, void* arg)
{
    cfg* c = (cfg*)arg;
    int me = vs_world_rank(w);
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.world = w;
    dd.zero = (vs_zero_stage)c->zero;
    dd.optim.kind = VS_OPTIM_ADAMW;
    dd.optim.weight_decay = 0.1;
    dd.trainer_zero_grad = c->ext;
    if (c->mode == FINISH_IN_STEP) dd.finish_in_step = 1;
    if (c->mode >= CLIP_IN_STEP) dd.max_grad_norm = MAX_NORM;
    vs_ddp* d = NULL;
    VT_OK(vs_ddp_init(&dd, &d));
    if (!d) return 1;
    float* P = (float*)calloc(L * N, sizeof(float)); // host: the initial values, then a layer read back
    float* g = (float*)calloc(N, sizeof(float));     // host: a layer's gradient, copied in
    for (int64_t i = 0; i < L * N; i++) P[i] = init_val(i);
    float* Pm = c->ext ? (float*)dc_mem_alloc(sizeof(float) * L * N) : NULL; // the trainer's own (device on the stand-in)
    float* Gm = c->ext ? (float*)dc_mem_alloc(sizeof(float) * L * N) : NULL;
    if (c->ext) dc_to_mem(Pm, P, sizeof(float) * L * N);
    vs_ddp_param_desc pd;
    memset(&pd, 0, sizeof pd);
    pd.name = "h.%d.w", pd.dtype = VS_F32, pd.ndim = 1, pd.shape[0] = N, pd.layers = L, pd.ready_group = 1;
    if (c->ext)
        pd.storage = Pm, pd.grad_storage = Gm;
    else
        pd.data = P;
    VT_OK(vs_ddp_add_param(d, &pd, NULL));
    VT_OK(vs_ddp_finalize(d));
    VT_CHECK(vs_ddp_grad_norm(d) == -1, "before any clip vs_ddp_grad_norm is %g, want -1", vs_ddp_grad_norm(d));
    for (int t = 0; t < STEPS; t++) {
        VT_OK(vs_ddp_zero_grad(d)); // (the trainer's own are overwritten below: its zeroing)
        VT_OK(vs_ddp_wait_params(d));
        for (int l = L - 1; l >= 0; l--) { // backward: the last layer's gradient first
            float* gm = c->ext ? Gm + l * N : (float*)vs_ddp_grad(d, l);
            const float* pm = c->ext ? Pm + l * N : (const float*)vs_ddp_param(d, l);
            VT_CHECK(gm && pm, "step %d layer %d: no gradient or parameter (%s)", t, l, vs_last_error());
            if (!gm || !pm) break;
            dc_from_mem(P, pm, sizeof(float) * N);
            for (int64_t i = 0; i < N; i++) g[i] = grad_val(l * N + i, me, t, P[i]);
            if (t == c->nan_step && me == 1 && l == 1) g[7] = NAN;
            dc_to_mem(gm, g, sizeof(float) * N);
            VT_OK(vs_ddp_group_ready(d, 1 + l));
        }
        double norm = -2;
        if (c->mode <= EXPLICIT || c->mode == CLIP_IN_STEP_AND_OWN) VT_OK(vs_ddp_finish_grad_sync(d));
        if (c->mode == EXPLICIT_CLIP || c->mode == CLIP_IN_STEP_AND_OWN) VT_OK(vs_ddp_clip_grad_norm(d, MAX_NORM, &norm));
        VT_OK(vs_ddp_step(d, 1e-2));
        if (c->mode == CLIP_IN_STEP || c->mode == CLIP_IN_STEP_AND_OWN) {
            double q = vs_ddp_grad_norm(d);
            VT_CHECK(c->mode == CLIP_IN_STEP || memcmp(&q, &norm, sizeof q) == 0,
                     "step %d: the trainer's clip gave %.17g, vs_ddp_grad_norm %.17g (clipped twice?)", t, norm, q);
            norm = q;
        }
        if (me == 0) c->norm[t] = norm;
    }
    VT_OK(vs_ddp_wait_params(d));
    if (me == 0)
        for (int l = 0; l < L; l++) dc_from_mem(c->out + l * N, vs_ddp_param(d, l), sizeof(float) * N);
    if (me == 0) c->skipped = vs_ddp_skipped_steps(d);
    VT_OK(vs_ddp_free(d));
    dc_mem_free(Pm), dc_mem_free(Gm);
    free(P), free(g);
    return 0;
}

/* mode's run against the explicit calls' run: parameters and norms bit for bit */
static void case_equal(int zero, int ext, int mode, int nan_step)
{
    cfg a, b;
    memset(&a, 0, sizeof a);
    int clip = mode != FINISH_IN_STEP;
    a.zero = zero, a.ext = ext, a.mode = clip ? EXPLICIT_CLIP : EXPLICIT, a.nan_step = nan_step;
    b = a;
    b.mode = mode;
    a.out = (float*)calloc(L * N, sizeof(float));
    b.out = (float*)calloc(L * N, sizeof(float));
    VT_OK(launch(2, rank_train, &a));
    VT_OK(launch(2, rank_train, &b));
    int differ = 0, moved = 0;
    for (int64_t i = 0; i < L * N; i++) {
        differ += memcmp(&a.out[i], &b.out[i], sizeof(float)) != 0;
        moved += a.out[i] != init_val(i);
    }
    VT_CHECK(differ == 0, "ZeRO-%d %s, mode %d: %d of %d parameters differ from the explicit calls' run", zero,
             ext ? "trainer-owned" : "DDP-owned", mode, differ, L * N);
    VT_CHECK(moved > L * N / 2, "the parameters did not move (%d moved)", moved);
    for (int t = 0; t < STEPS; t++) {
        VT_CHECK(memcmp(&a.norm[t], &b.norm[t], sizeof(double)) == 0 || (isnan(a.norm[t]) && isnan(b.norm[t])),
                 "step %d: norm %.17g, explicit %.17g", t, b.norm[t], a.norm[t]);
        VT_CHECK(!clip || t == nan_step || a.norm[t] > MAX_NORM, "step %d: norm %g: the clip must scale (> %g)", t, a.norm[t],
                 MAX_NORM);
    }
    VT_CHECK(a.skipped == (nan_step >= 0) && b.skipped == a.skipped, "skipped steps %lld, explicit %lld (want %d)",
             (long long)b.skipped, (long long)a.skipped, nan_step >= 0);
    free(a.out);
    free(b.out);
}

#if !DEV /* (their storage is host memory) */
/* the refusals, the query and the defaults, on one rank */
static int rank_bad(vs_world* w, void* arg)
{
    (void)arg;
    vs_clear_error();
    VT_CHECK(vs_ddp_grad_norm(NULL) == -1 && strstr(vs_last_error(), "ddp is NULL"), "vs_ddp_grad_norm(NULL): %s",
             vs_last_error());
    static const double bad[3] = {-1, NAN, INFINITY};
    static const char* said[3] = {"max_grad_norm -1", "max_grad_norm nan", "max_grad_norm inf"};
    for (int i = 0; i < 3; i++) {
        vs_ddp_desc dd;
        memset(&dd, 0, sizeof dd);
        dd.world = w;
        dd.max_grad_norm = bad[i];
        vs_ddp* d = NULL;
        vs_result r = vs_ddp_init(&dd, &d);
        VT_CHECK(r == VS_ERR_INVALID && d == NULL && strstr(vs_last_error(), said[i]), "%s: %d %s", said[i], r,
                 vs_last_error());
    }
    vs_ddp_desc dd, q;
    memset(&dd, 0, sizeof dd);
    dd.world = w;
    dd.max_grad_norm = MAX_NORM;
    vs_ddp* d = NULL;
    VT_OK(vs_ddp_init(&dd, &d));
    VT_OK(vs_ddp_query_desc(d, &q));
    VT_CHECK(q.max_grad_norm == MAX_NORM && q.finish_in_step == 1, "query_desc: max_grad_norm %g, finish_in_step %d",
             q.max_grad_norm, q.finish_in_step);
    static float P[8], G[8];
    vs_ddp_param_desc pd;
    memset(&pd, 0, sizeof pd);
    pd.name = "w", pd.dtype = VS_F32, pd.ndim = 1, pd.shape[0] = 8, pd.storage = P, pd.grad_storage = G;
    VT_OK(vs_ddp_add_param(d, &pd, NULL));
    VT_OK(vs_ddp_finalize(d));
    /* a bad lr changes nothing: the pass stays open, nothing is clipped */
    for (int i = 0; i < 8; i++) G[i] = 3.0f;
    VT_OK(vs_ddp_grad_ready(d, 0));
    vs_result r = vs_ddp_step(d, NAN);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "lr nan"), "lr NaN: %d %s", r, vs_last_error());
    VT_CHECK(vs_ddp_grad_norm(d) == -1 && G[0] == 3.0f, "a refused step clipped (norm %g, gradient %g)",
             vs_ddp_grad_norm(d), G[0]);
    r = vs_ddp_clip_grad_norm(d, 1.0, NULL);
    VT_CHECK(r == VS_ERR_STATE, "the pass was ended by the refused step (clip: %d %s)", r, vs_last_error());
    /* the step after the trainer ended the pass itself is no error (nothing to end) */
    VT_OK(vs_ddp_finish_grad_sync(d));
    VT_OK(vs_ddp_step(d, 0.1));
    VT_CHECK(fabs(vs_ddp_grad_norm(d) - sqrt(8 * 9.0)) < 1e-9, "norm %g, want %g", vs_ddp_grad_norm(d), sqrt(72.0));
    VT_OK(vs_ddp_free(d));
    return 0;
}

/* ranks that disagree on the step's own clip would not meet in its all-reduce */
static int rank_disagree(vs_world* w, void* arg)
{
    (void)arg;
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.world = w;
    dd.max_grad_norm = vs_world_rank(w) == 1 ? 1.0 : 0.0;
    vs_ddp* d = NULL;
    VT_OK(vs_ddp_init(&dd, &d));
    static float P[2][8], G[2][8];
    vs_ddp_param_desc pd;
    memset(&pd, 0, sizeof pd);
    pd.name = "w", pd.dtype = VS_F32, pd.ndim = 1, pd.shape[0] = 8;
    pd.storage = P[vs_world_rank(w)], pd.grad_storage = G[vs_world_rank(w)];
    VT_OK(vs_ddp_add_param(d, &pd, NULL));
    vs_result r = vs_ddp_finalize(d);
    VT_CHECK(r == VS_ERR_MISMATCH && strstr(vs_last_error(), "max_grad_norm 0") && strstr(vs_last_error(), "has 1, 1"),
             "rank %d: %d %s", vs_world_rank(w), r, vs_last_error());
    VT_OK(vs_ddp_free(d));
    return 0;
}
#endif

int main(void)
{
    setenv("VESCALE_TIMEOUT", "60", 0);
    VT_CASE("max_grad_norm: vs_ddp_step ends the sync and clips; trainer-owned ZeRO-0 and ZeRO-1 DP2 equal the explicit "
            "calls bit for bit (parameters and norms)", {
                case_equal(0, 1, CLIP_IN_STEP, -1);
                case_equal(1, 1, CLIP_IN_STEP, -1);
            });
    VT_CASE("max_grad_norm on DDP-owned memory: ZeRO-0, ZeRO-1 and ZeRO-2 DP2 equal the explicit calls", {
        case_equal(0, 0, CLIP_IN_STEP, -1);
        case_equal(1, 0, CLIP_IN_STEP, -1);
        case_equal(2, 0, CLIP_IN_STEP, -1);
    });
    VT_CASE("max_grad_norm with the trainer's own finish and clip: not clipped twice, equal", {
        case_equal(0, 1, CLIP_IN_STEP_AND_OWN, -1);
        case_equal(1, 1, CLIP_IN_STEP_AND_OWN, -1);
    });
    VT_CASE("max_grad_norm and a NaN gradient on one rank: the step is skipped on both, as with the explicit calls", {
        case_equal(1, 1, CLIP_IN_STEP, 2);
        case_equal(0, 0, CLIP_IN_STEP, 1);
    });
    VT_CASE("finish_in_step: vs_ddp_step ends the sync (no clip); trainer-owned ZeRO-0 and ZeRO-1, DDP-owned ZeRO-2, "
            "equal to vs_ddp_finish_grad_sync and vs_ddp_step", {
                case_equal(0, 1, FINISH_IN_STEP, -1);
                case_equal(1, 1, FINISH_IN_STEP, -1);
                case_equal(2, 0, FINISH_IN_STEP, -1);
            });
#if !DEV
    VT_CASE("max_grad_norm refused: -1, NaN, inf (named); vs_ddp_grad_norm -1 before a clip and for NULL; query_desc "
            "resolves finish_in_step; a step refused for its lr ends no pass and clips nothing",
            VT_OK(vs_launch(1, rank_bad, NULL)));
    VT_CASE("ranks disagreeing on max_grad_norm: VS_ERR_MISMATCH on both, naming it",
            VT_OK(vs_launch(2, rank_disagree, NULL)));
#endif
#ifdef VS_STRICT
    VT_CASE("strict/no violations", VT_CHECK(vs_strict_violations() == 0, "%s", vs_strict_first_violation()));
#endif
    return vt_summary();
}
