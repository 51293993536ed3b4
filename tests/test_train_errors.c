/* test_train_errors.c - vescale.h's training state when things go wrong
   (issue 19, points 3 and 4):
   - a NaN or inf gradient, injected by a layer callback on one rank, with
     clipping on and off, under both vs_train_desc.nonfinite policies, on one
     rank, DP2 x TP2 and PP2 x DP2 (ZeRO-1 and -2) thread ranks: every rank's
     parameters and optimizer state are bit-identical before and after the step;
     skip: VS_OK, counted on every rank, logged at warn, and the rest of the run
     bit for bit equal to a run that never saw the batch; error:
     VS_ERR_NONFINITE naming the step and the policy, nothing counted;
   - a NaN in one copy of a TP-replicated gradient (one TP rank only) is seen;
   - save after a skipped step, load into a fresh state: the step and skipped
     counts, the data position and (through a warmup + decay LR schedule) every
     later step equal the uninterrupted run;
   - vs_ddp_free, vs_pipe_free and vs_mesh_free on a training state's handles
     are VS_ERR_STATE and training goes on unchanged; a second free and a call
     on a freed schedule, pipe, checkpointer and training state are
     VS_ERR_STATE. */
#define VESCALE_IMPLEMENTATION
#include "../vescale.h"
#include "vs_test.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

enum { D = 4, H = 8, ROWS = 8, NB = 6, MAXR = 4 };

/* --- the model: fc1 (column-parallel) - tanh - fc2 (row-parallel) - MSE ------ */

/* Which gradient a backward poisons: at batch `batch`, on world rank `rank`
   (-1: every rank), in layer `layer`'s parameter `param`. */
typedef struct inject {
    int batch, rank;
    const char* layer;
    int param;
    float value;
} inject;
static inject INJ = {-1, -1, NULL, 0, 0};
static __thread int tl_rank, tl_batch; // the rank thread's world rank and batch

static void poison(vs_pipe_call* c, const char* layer, int i)
{
    if (tl_batch != INJ.batch || (INJ.rank >= 0 && tl_rank != INJ.rank)) return;
    if (strcmp(INJ.layer, layer) || INJ.param != i) return;
    float* g = (float*)vs_layer(c)->grad[i];
    g[0] += INJ.value;
}

static vs_result out2(vs_pipe_call* c, int64_t rows, int64_t cols, float** y)
{
    int64_t sh[2] = {rows, cols};
    return vs_pipe_output(c, 0, VS_F32, 2, sh, (void**)y);
}

static vs_result fc1_fwd(vs_pipe_call* c)
{
    vs_layer_ctx* L = vs_layer(c);
    const float* x = (const float*)c->in[0].data;
    const float *W = (const float*)L->param[0], *b = (const float*)L->param[1];
    int64_t R = c->in[0].shape[0], h = L->local_shape[0][1];
    float* y;
    vs_result r = out2(c, R, h, &y);
    for (int64_t i = 0; !r && i < R; i++)
        for (int64_t j = 0; j < h; j++) {
            float a = b[j];
            for (int k = 0; k < D; k++) a += x[i * D + k] * W[k * h + j];
            y[i * h + j] = a;
        }
    return r;
}

static vs_result fc1_bwd(vs_pipe_call* c) // (x is data: no input gradient)
{
    vs_layer_ctx* L = vs_layer(c);
    const float* x = (const float*)c->in[0].data;
    const float* gy = (const float*)c->out[0].grad;
    float *gW = (float*)L->grad[0], *gb = (float*)L->grad[1];
    int64_t R = c->in[0].shape[0], h = L->local_shape[0][1];
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < h; j++) {
            gb[j] += gy[i * h + j];
            for (int k = 0; k < D; k++) gW[k * h + j] += x[i * D + k] * gy[i * h + j];
        }
    poison(c, "fc1", 0);
    poison(c, "fc1", 1);
    return VS_OK;
}

static vs_result act_fwd(vs_pipe_call* c)
{
    const float* a = (const float*)c->in[0].data;
    int64_t R = c->in[0].shape[0], h = c->in[0].shape[1];
    float* z;
    vs_result r = out2(c, R, h, &z);
    for (int64_t e = 0; !r && e < R * h; e++) z[e] = tanhf(a[e]);
    return r;
}

static vs_result act_bwd(vs_pipe_call* c)
{
    const float* z = (const float*)c->out[0].data;
    const float* gz = (const float*)c->out[0].grad;
    float* ga = (float*)c->in[0].grad;
    for (int64_t e = 0; e < c->in[0].shape[0] * c->in[0].shape[1]; e++) ga[e] += gz[e] * (1 - z[e] * z[e]);
    return VS_OK;
}

static vs_result fc2_fwd(vs_pipe_call* c)
{
    vs_layer_ctx* L = vs_layer(c);
    const float* z = (const float*)c->in[0].data;
    const float *W = (const float*)L->param[0], *b = (const float*)L->param[1];
    int64_t R = c->in[0].shape[0], h = L->local_shape[0][0];
    float* y;
    vs_result r = out2(c, R, D, &y);
    for (int64_t i = 0; !r && i < R; i++)
        for (int k = 0; k < D; k++) {
            float a = 0;
            for (int64_t j = 0; j < h; j++) a += z[i * h + j] * W[j * D + k];
            y[i * D + k] = a;
        }
    if (!r && L->tp) r = vs_tp_reduce_forward(L->tp, y, (size_t)(R * D), VS_F32);
    for (int64_t i = 0; !r && i < R; i++)
        for (int k = 0; k < D; k++) y[i * D + k] += b[k];
    return r;
}

static vs_result fc2_bwd(vs_pipe_call* c)
{
    vs_layer_ctx* L = vs_layer(c);
    const float* z = (const float*)c->in[0].data;
    const float* gy = (const float*)c->out[0].grad;
    const float* W = (const float*)L->param[0];
    float *gW = (float*)L->grad[0], *gb = (float*)L->grad[1], *gz = (float*)c->in[0].grad;
    int64_t R = c->in[0].shape[0], h = L->local_shape[0][0];
    for (int64_t i = 0; i < R; i++)
        for (int k = 0; k < D; k++) {
            gb[k] += gy[i * D + k];
            for (int64_t j = 0; j < h; j++) {
                gW[j * D + k] += z[i * h + j] * gy[i * D + k];
                gz[i * h + j] += gy[i * D + k] * W[j * D + k];
            }
        }
    poison(c, "fc2", 0);
    poison(c, "fc2", 1);
    return VS_OK;
}

static vs_result loss_fwd(vs_pipe_call* c)
{
    const float *y = (const float*)c->in[0].data, *t = (const float*)c->in[1].data;
    int64_t R = c->in[0].shape[0];
    float* loss;
    vs_result r = vs_pipe_output(c, 0, VS_F32, 0, NULL, (void**)&loss);
    float s = 0;
    for (int64_t e = 0; !r && e < R * D; e++) s += (y[e] - t[e]) * (y[e] - t[e]);
    if (!r) *loss = s / (float)(R * D);
    return r;
}

static vs_result loss_bwd(vs_pipe_call* c)
{
    const float *y = (const float*)c->in[0].data, *t = (const float*)c->in[1].data;
    float* gy = (float*)c->in[0].grad;
    float g0 = *(const float*)c->out[0].grad;
    int64_t R = c->in[0].shape[0];
    for (int64_t e = 0; e < R * D; e++) gy[e] += g0 * 2 * (y[e] - t[e]) / (float)(R * D);
    return VS_OK;
}

enum { NL = 4, NPARAM = 4 };
static vs_layer_decl LAYERS[NL];
static vs_model_desc MODEL;
static const char* PNAMES[NPARAM] = {"fc1.w", "fc1.b", "fc2.w", "fc2.b"};
static const int PSIZE[NPARAM] = {D * H, H, H * D, D};

static void param(vs_layer_decl* l, const char* name, int ndim, int64_t a, int64_t b, vs_role role)
{
    vs_param_decl* p = &l->params[l->nparams++];
    p->name = name;
    p->ndim = ndim;
    p->shape[0] = a;
    p->shape[1] = b;
    p->role = role;
    p->init.kind = VS_INIT_NORMAL;
    p->init.b = 0.3;
}

static void unit(vs_layer_decl* l, const char* name, const char* in, const char* out, vs_pipe_fn f, vs_pipe_fn b)
{
    memset(l, 0, sizeof *l);
    l->unit.name = name;
    l->unit.inputs = in;
    l->unit.outputs = out;
    l->unit.forward = f;
    l->unit.backward = b;
    l->unit.flops = 1;
}

static void build_model(void)
{
    unit(&LAYERS[0], "fc1", "x", "a", fc1_fwd, fc1_bwd);
    param(&LAYERS[0], "fc1.w", 2, D, H, VS_ROLE_COLUMN);
    param(&LAYERS[0], "fc1.b", 1, H, 0, VS_ROLE_COLUMN);
    unit(&LAYERS[1], "act", "a", "z", act_fwd, act_bwd);
    unit(&LAYERS[2], "fc2", "z", "y", fc2_fwd, fc2_bwd);
    param(&LAYERS[2], "fc2.w", 2, H, D, VS_ROLE_ROW);
    param(&LAYERS[2], "fc2.b", 1, D, 0, VS_ROLE_ROW); // replicated over TP
    unit(&LAYERS[3], "loss", "y,t", "loss:f32[]", loss_fwd, loss_bwd);
    MODEL.layers = LAYERS;
    MODEL.nlayers = NL;
    MODEL.seed = 11;
}

static vs_batch batch_of(int step, float* X, float* T)
{
    for (int i = 0; i < ROWS * D; i++) {
        X[i] = sinf(0.37f * (float)(step * 53 + i));
        T[i] = 0.5f * cosf(0.61f * (float)(step * 29 + i));
    }
    vs_batch b;
    memset(&b, 0, sizeof b);
    b.n = 2;
    b.name[0] = "x", b.name[1] = "t";
    b.dtype[0] = b.dtype[1] = VS_F32;
    b.ndim[0] = b.ndim[1] = 2;
    b.shape[0][0] = b.shape[1][0] = ROWS;
    b.shape[0][1] = b.shape[1][1] = D;
    b.data[0] = X, b.data[1] = T;
    return b;
}

/* --- a run ------------------------------------------------------------------- */

typedef struct job {
    vs_plan plan;
    double clip;
    vs_nonfinite_policy policy;
    int nbatches;     // batches 0..nbatches-1 are offered
    int drop;         // a batch the caller leaves out (-1: none): what a skipped step must equal
    const char* save; // save after the last batch
    int save_async; // vs_train_save async, then vs_train_wait
    const char* load; // load first, then go on from the data position it gives
    int try_frees;    // vs_ddp_free / vs_pipe_free / vs_mesh_free on the state's handles first
    // what each rank saw
    vs_result poisoned_r[MAXR]; // the poisoned step's result
    char poisoned_msg[MAXR][600];
    int same_params[MAXR], same_state[MAXR]; // bit-identical over the poisoned step
    double poisoned_norm[MAXR];
    int64_t steps[MAXR], skipped[MAXR];
    int64_t loaded_pos[MAXR]; // steps + skipped right after the load
    int warn_lines;           // warn lines of vs_train_step that name the skipped step
    int default_log;          // launch at VS_LOG_DEFAULT with VESCALE_LOG unset (else at VS_LOG_WARN)
    float params[NPARAM][D * H];
} job;

/* This rank's parameters and AdamW moments, bit for bit. */
static size_t snapshot(vs_ddp* d, float* p, float* st, size_t cap)
{
    size_t n = 0, m = 0;
    for (int i = 0; i < vs_ddp_num_params(d); i++) {
        int64_t k = vs_ddp_local_numel(d, i);
        const float* x = (const float*)vs_ddp_param(d, i);
        for (int64_t e = 0; x && e < k && n < cap; e++) p[n++] = x[e];
        for (int s = 0; s < 2; s++) {
            vs_ddp_span sp;
            if (vs_ddp_optim_state(d, i, s ? VS_DDP_STATE_EXP_AVG_SQ : VS_DDP_STATE_EXP_AVG, &sp)) continue;
            for (int64_t e = 0; e < sp.end - sp.begin && m < cap; e++) st[m++] = ((const float*)sp.data)[e];
        }
    }
    return n + m;
}

static void on_log(vs_log_level level, const char* msg, void* user)
{
    job* J = (job*)user;
    char want[64];
    snprintf(want, sizeof want, "vs_train_step (step %d)", INJ.batch);
    if (level == VS_LOG_WARN && strstr(msg, want) && strstr(msg, "step skipped"))
        __atomic_add_fetch(&J->warn_lines, 1, __ATOMIC_SEQ_CST);
}

static void train_desc(const job* J, vs_train_desc* d)
{
    memset(d, 0, sizeof *d);
    d->model = &MODEL;
    d->plan = &J->plan;
    d->optim.kind = VS_OPTIM_ADAMW;
    d->optim.weight_decay = 0.01;
    d->lr.kind = VS_LR_COSINE; // every step at another rate: a step counter off by one shows
    d->lr.lr = 0.05;
    d->lr.min_lr = 0.005;
    d->lr.warmup_steps = 2;
    d->lr.total_steps = NB;
    d->clip = J->clip;
    d->nonfinite = J->policy;
}

static int rank_train(vs_world* w, void* arg)
{
    job* J = (job*)arg;
    int r = vs_world_rank(w);
    tl_rank = r;
    vs_train_desc d;
    train_desc(J, &d);
    vs_train* t;
    vs_result rp = vs_parallelize(w, &d, &t);
    VT_CHECK(rp == VS_OK, "parallelize: %s", vs_last_error());
    if (rp) return 1;
    if (J->try_frees) {
        VT_ERR(vs_ddp_free(vs_train_ddp(t)), VS_ERR_STATE, "training state");
        VT_ERR(vs_pipe_free(vs_train_pipe(t)), VS_ERR_STATE, "training state");
        VT_ERR(vs_mesh_free(vs_train_mesh(t)), VS_ERR_STATE, "free them first");
        // (issue 33: the mesh's refusal names vs_train_free, whose handles cannot be freed alone; "frees it" once)
        VT_ERR(vs_mesh_free(vs_train_mesh(t)), VS_ERR_STATE, "vs_train_free frees it with them");
        vs_ddp_free(vs_train_ddp(t));
        const char* m = vs_last_error();
        const char* once = strstr(m, "frees it");
        VT_CHECK(once && !strstr(once + 1, "frees it") && strstr(m, "vs_train_free"), "vs_ddp_free: %s", m);
        vs_pipe_free(vs_train_pipe(t));
        m = vs_last_error();
        once = strstr(m, "frees it");
        VT_CHECK(once && !strstr(once + 1, "frees it") && strstr(m, "vs_train_free"), "vs_pipe_free: %s", m);
    }
    int b0 = 0;
    if (J->load) {
        VT_OK(vs_train_load(t, J->load, NULL, 0));
        J->loaded_pos[r] = vs_train_steps(t) + vs_train_skipped_steps(t);
        b0 = (int)J->loaded_pos[r]; // the data position
    }
    enum { CAP = 4 * D * H };
    float p0[CAP], s0[CAP], p1[CAP], s1[CAP];
    for (int b = b0; b < J->nbatches; b++) {
        if (b == J->drop) continue;
        float X[ROWS * D], T[ROWS * D];
        vs_batch bt = batch_of(b, X, T);
        double l;
        tl_batch = b;
        if (b != INJ.batch) {
            VT_OK(vs_train_step(t, &bt, &l));
            VT_CHECK(isfinite(l) && isfinite(vs_train_grad_norm(t)), "batch %d: loss %g, norm %g", b, l,
                     vs_train_grad_norm(t));
            continue;
        }
        memset(p0, 0, sizeof p0), memset(s0, 0, sizeof s0), memset(p1, 0, sizeof p1), memset(s1, 0, sizeof s1);
        snapshot(vs_train_ddp(t), p0, s0, CAP);
        vs_clear_error();
        J->poisoned_r[r] = vs_train_step(t, &bt, &l);
        snprintf(J->poisoned_msg[r], sizeof J->poisoned_msg[r], "%s", vs_last_error());
        J->poisoned_norm[r] = vs_train_grad_norm(t);
        snapshot(vs_train_ddp(t), p1, s1, CAP);
        J->same_params[r] = !memcmp(p0, p1, sizeof p0);
        J->same_state[r] = !memcmp(s0, s1, sizeof s0);
    }
    if (J->save) {
        VT_OK(vs_train_save(t, J->save, NULL, 0, J->save_async));
        if (J->save_async) { // the write's result, then nothing in flight: OK again
            VT_OK(vs_train_wait(t));
            VT_OK(vs_train_wait(t));
        }
    }
    J->steps[r] = vs_train_steps(t);
    J->skipped[r] = vs_train_skipped_steps(t);
    VT_CHECK(J->steps[r] == vs_ddp_step_count(vs_train_ddp(t)), "rank %d: %lld steps, DDP's %lld", r,
             (long long)J->steps[r], (long long)vs_ddp_step_count(vs_train_ddp(t)));
    float buf[D * H];
    for (int p = 0; p < NPARAM; p++) {
        VT_OK(vs_train_get_param(t, PNAMES[p], buf, sizeof buf));
        if (r == 0) memcpy(J->params[p], buf, sizeof(float) * (size_t)PSIZE[p]);
    }
    VT_OK(vs_train_free(t));
    return 0;
}

static int nranks(const vs_plan* p)
{
    return (p->pp ? p->pp : 1) * (p->dp ? p->dp : 1) * (p->tp ? p->tp : 1);
}

static void go(job* J)
{
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = nranks(&J->plan);
    ld.logger.fn = on_log;
    ld.logger.user = J;
    ld.log_level = J->default_log ? VS_LOG_DEFAULT : VS_LOG_WARN;
    if (J->default_log) unsetenv("VESCALE_LOG");
    VT_CHECK(vs_launch_ex(&ld, rank_train, J) == VS_OK, "launch: %s", vs_last_error());
}

static job* mk(int pp, int dp, int tp, vs_zero_stage z)
{
    job* J = (job*)calloc(1, sizeof *J);
    J->plan.pp = pp, J->plan.dp = dp, J->plan.tp = tp;
    J->plan.zero = z;
    J->plan.microbatches = 2;
    J->plan.split = VS_PIPE_SPLIT_UNIFORM;
    J->nbatches = NB;
    J->drop = -1;
    return J;
}

static void same_params(const job* a, const job* ref, const char* what)
{
    for (int p = 0; p < NPARAM; p++)
        for (int e = 0; e < PSIZE[p]; e++)
            if (memcmp(&a->params[p][e], &ref->params[p][e], sizeof(float))) {
                VT_CHECK(0, "%s: %s[%d] = %.9g, the reference %.9g", what, PNAMES[p], e, (double)a->params[p][e],
                         (double)ref->params[p][e]);
                return;
            }
}

/* --- non-finite gradients ------------------------------------------------------- */

typedef struct nf_case {
    const char* name;
    int pp, dp, tp;
    vs_zero_stage zero;
    double clip;
    vs_nonfinite_policy policy;
    inject inj;
} nf_case;

static void t_nonfinite(const nf_case* c)
{
    const int n = c->pp * c->dp * c->tp;
    // the reference: the same mesh, the caller leaves the poisoned batch out
    INJ = (inject){-1, -1, NULL, 0, 0};
    job* ref = mk(c->pp, c->dp, c->tp, c->zero);
    ref->clip = c->clip;
    ref->drop = c->inj.batch;
    go(ref);
    INJ = c->inj;
    job* J = mk(c->pp, c->dp, c->tp, c->zero);
    J->clip = c->clip;
    J->policy = c->policy;
    go(J);
    INJ = (inject){-1, -1, NULL, 0, 0};
    char step[32];
    snprintf(step, sizeof step, "(step %d)", c->inj.batch);
    for (int r = 0; r < n; r++) {
        VT_CHECK(J->same_params[r] && J->same_state[r], "rank %d: the poisoned step changed %s", r,
                 J->same_params[r] ? "the optimizer state" : "the parameters");
        VT_CHECK(!isfinite(J->poisoned_norm[r]), "rank %d: norm %g after a %g gradient", r, J->poisoned_norm[r],
                 (double)c->inj.value);
        VT_CHECK(J->steps[r] == NB - 1, "rank %d: %lld steps (want %d)", r, (long long)J->steps[r], NB - 1);
        if (c->policy == VS_NONFINITE_SKIP) {
            VT_CHECK(J->poisoned_r[r] == VS_OK, "rank %d: skip policy gave %s: %s", r, vs_result_string(J->poisoned_r[r]),
                     J->poisoned_msg[r]);
            VT_CHECK(J->skipped[r] == 1, "rank %d: %lld skipped", r, (long long)J->skipped[r]);
        } else {
            VT_CHECK(J->poisoned_r[r] == VS_ERR_NONFINITE, "rank %d: error policy gave %s", r,
                     vs_result_string(J->poisoned_r[r]));
            VT_CHECK(strstr(J->poisoned_msg[r], step) && strstr(J->poisoned_msg[r], "not finite") &&
                         strstr(J->poisoned_msg[r], "policy error"),
                     "rank %d: message \"%s\" does not name %s, \"not finite\" and the policy", r, J->poisoned_msg[r], step);
            VT_CHECK(J->skipped[r] == 0, "rank %d: a failed step counted as skipped (%lld)", r, (long long)J->skipped[r]);
        }
    }
    VT_CHECK(J->warn_lines == (c->policy == VS_NONFINITE_SKIP ? n : 0), "%d warn lines naming the skipped step %s",
             J->warn_lines, step);
    same_params(J, ref, "the run after the poisoned batch vs a run without it");
    free(ref);
    free(J);
}

/* A skipped step says so by default (issue 33): a logger, the launch's level
   left at VS_LOG_DEFAULT and VESCALE_LOG unset (the default level is warn),
   DP2 x TP2: every rank logs one warn line naming the skipped step. */
static void t_skip_warns_by_default(void)
{
    INJ = (inject){3, 2, "fc1", 0, NAN};
    job* J = mk(1, 2, 2, VS_ZERO_1);
    J->default_log = 1;
    go(J);
    INJ = (inject){-1, -1, NULL, 0, 0};
    for (int r = 0; r < 4; r++) VT_CHECK(J->skipped[r] == 1, "rank %d: %lld skipped", r, (long long)J->skipped[r]);
    VT_CHECK(J->warn_lines == 4, "%d warn lines naming the skipped step (step 3) at the default level, want 4",
             J->warn_lines);
    free(J);
}

/* Bad descs: refused at vs_parallelize, naming the field. */
static int rank_bad_desc(vs_world* w, void* arg)
{
    (void)arg;
    job J;
    memset(&J, 0, sizeof J);
    vs_train_desc d;
    train_desc(&J, &d);
    vs_train* t = NULL;
    d.nonfinite = (vs_nonfinite_policy)7;
    VT_ERR(vs_parallelize(w, &d, &t), VS_ERR_INVALID, "desc.nonfinite = 7");
    VT_CHECK(t == NULL, "a refused desc gave a training state");
    train_desc(&J, &d);
    d.clip = NAN;
    VT_ERR(vs_parallelize(w, &d, &t), VS_ERR_INVALID, "desc.clip = nan");
    d.clip = -1;
    VT_ERR(vs_parallelize(w, &d, &t), VS_ERR_INVALID, "desc.clip = -1");
    /* loss scaling: each bad field named */
    train_desc(&J, &d);
    d.loss_scale.enable = 2;
    VT_ERR(vs_parallelize(w, &d, &t), VS_ERR_INVALID, "desc.loss_scale.enable = 2");
    train_desc(&J, &d);
    d.loss_scale.growth = 0.5;
    VT_ERR(vs_parallelize(w, &d, &t), VS_ERR_INVALID, "growth 0.5 (> 1)");
    train_desc(&J, &d);
    d.loss_scale.backoff = 1.5;
    VT_ERR(vs_parallelize(w, &d, &t), VS_ERR_INVALID, "backoff 1.5");
    train_desc(&J, &d);
    d.loss_scale.init = INFINITY;
    VT_ERR(vs_parallelize(w, &d, &t), VS_ERR_INVALID, "init inf");
    train_desc(&J, &d);
    d.loss_scale.interval = -3;
    VT_ERR(vs_parallelize(w, &d, &t), VS_ERR_INVALID, "interval -3");
    VT_CHECK(t == NULL, "a refused desc gave a training state");
    /* an f32 model scales nothing by default; asked for, it does */
    train_desc(&J, &d);
    VT_OK(vs_parallelize(w, &d, &t));
    VT_CHECK(vs_train_loss_scale(t) == 1.0, "an f32 model's loss scale is %g, want 1", vs_train_loss_scale(t));
    VT_ERR(vs_pipe_set_loss_scale(vs_train_pipe(t), 0), VS_ERR_INVALID, "scale 0");
    VT_ERR(vs_pipe_set_loss_scale(vs_train_pipe(t), NAN), VS_ERR_INVALID, "scale nan");
    vs_clip_desc cd;
    memset(&cd, 0, sizeof cd);
    cd.unscale = -2;
    VT_ERR(vs_ddp_clip_grad_norm_ex(vs_train_ddp(t), &cd, NULL), VS_ERR_INVALID, "unscale -2");
    { // an evaluation's batch without the targets: the error names vs_train_eval, not vs_train_step (issue 33)
        static float X[ROWS * D], T[ROWS * D];
        vs_batch b = batch_of(0, X, T);
        b.n = 1;
        double l;
        VT_ERR(vs_train_eval(t, &b, &l), VS_ERR_INVALID, "vs_train_eval: the batch has no \"t\"");
        VT_CHECK(!strstr(vs_last_error(), "vs_train_step"), "eval's error names vs_train_step: %s", vs_last_error());
    }
    VT_OK(vs_train_free(t));
    t = NULL;
    train_desc(&J, &d);
    d.loss_scale.enable = 1, d.loss_scale.init = 1024;
    VT_OK(vs_parallelize(w, &d, &t));
    VT_CHECK(vs_train_loss_scale(t) == 1024, "loss scale %g, want 1024", vs_train_loss_scale(t));
    VT_OK(vs_train_free(t));
    VT_CHECK(isnan(vs_train_loss_scale(NULL)), "vs_train_loss_scale(NULL) is not NaN");
    return 0;
}

/* Save right after a skipped step, load into a fresh state: the counts, the
   data position and every later step as the uninterrupted run. */
static void t_save_load(int pp, int dp, int tp)
{
    char dir[] = "/tmp/vs_train_nf_XXXXXX", path[96], cmd[96];
    VT_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/missing/parents/after_skip", dir); // vs_train_save makes the folders
    inject inj = {2, 0, "fc1", 0, NAN};
    INJ = inj;
    job* whole = mk(pp, dp, tp, VS_ZERO_1);
    go(whole);
    job* first = mk(pp, dp, tp, VS_ZERO_1);
    first->nbatches = 3; // 0, 1 and the skipped 2
    first->save = path;
    first->save_async = pp > 1; // one case each way
    go(first);
    INJ = (inject){-1, -1, NULL, 0, 0};
    job* rest = mk(pp, dp, tp, VS_ZERO_1);
    rest->load = path;
    go(rest);
    int n = pp * dp * tp;
    for (int r = 0; r < n; r++) {
        VT_CHECK(first->steps[r] == 2 && first->skipped[r] == 1, "rank %d saved %lld steps, %lld skipped", r,
                 (long long)first->steps[r], (long long)first->skipped[r]);
        VT_CHECK(rest->loaded_pos[r] == 3, "rank %d: data position %lld after the load (want 3)", r,
                 (long long)rest->loaded_pos[r]);
        VT_CHECK(rest->steps[r] == whole->steps[r] && rest->skipped[r] == whole->skipped[r],
                 "rank %d: resumed %lld steps / %lld skipped, uninterrupted %lld / %lld", r, (long long)rest->steps[r],
                 (long long)rest->skipped[r], (long long)whole->steps[r], (long long)whole->skipped[r]);
    }
    VT_CHECK(whole->steps[0] == NB - 1 && whole->skipped[0] == 1, "uninterrupted: %lld steps, %lld skipped",
             (long long)whole->steps[0], (long long)whole->skipped[0]);
    same_params(rest, whole, "resumed after a skipped step vs uninterrupted");
    if (pp > 1) { // vs_train_saved_plan refuses a FIFO in a file's place, never opens it blocking (issue 33)
        char sh[1024], pi[160], ps[160];
        vs_plan sp;
        VT_OK(vs_train_saved_plan(path, &sp));
        VT_CHECK(sp.pp == pp && sp.dp == dp && sp.tp == tp, "saved plan PP%d DP%d TP%d", sp.pp, sp.dp, sp.tp);
        snprintf(pi, sizeof pi, "%s/fifo-index", dir);
        snprintf(ps, sizeof ps, "%s/fifo-shards", dir);
        snprintf(sh, sizeof sh, "cp -r %s %s && cp -r %s %s && cd %s && rm index.json && mkfifo index.json && cd %s && "
                 "for f in *.safetensors; do rm $f && mkfifo $f; done", path, pi, path, ps, pi, ps);
        VT_CHECK(system(sh) == 0, "%s", sh);
        alarm(60); // a blocking open would hang here: the alarm ends the test with a failure
        VT_ERR(vs_train_saved_plan(pi, &sp), VS_ERR_IO, "not a regular file");
        VT_ERR(vs_train_saved_plan(ps, &sp), VS_ERR_IO, "not a regular file");
        alarm(0);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    VT_CHECK(system(cmd) == 0, "rm");
    free(whole);
    free(first);
    free(rest);
}

/* --- handles ---------------------------------------------------------------------- */

/* vs_ddp_free, vs_pipe_free and vs_mesh_free on the state's own handles are
   refused, and the run goes on bit for bit as one that never tried. */
static void t_owned(int pp, int dp, int tp)
{
    INJ = (inject){-1, -1, NULL, 0, 0};
    job* ref = mk(pp, dp, tp, VS_ZERO_1);
    go(ref);
    job* J = mk(pp, dp, tp, VS_ZERO_1);
    J->try_frees = 1;
    go(J);
    VT_CHECK(J->steps[0] == NB, "%lld steps after the refused frees", (long long)J->steps[0]);
    same_params(J, ref, "after refused frees vs untouched");
    free(ref);
    free(J);
}

static vs_result no_data(vs_pipe_call* c) // (the pipe below is made and freed, never run)
{
    (void)c;
    return vs_set_error(VS_ERR_STATE, "not run");
}

/* A training state of the test model on PP x DP, 2 microbatches (NULL: failed, checked). */
static vs_train* two_mb_state(vs_world* w, int pp, int dp)
{
    job J;
    memset(&J, 0, sizeof J);
    J.plan.pp = pp, J.plan.dp = dp;
    J.plan.microbatches = 2;
    vs_train_desc d;
    train_desc(&J, &d);
    vs_train* t = NULL;
    VT_OK(vs_parallelize(w, &d, &t));
    return t;
}

/* A batch that lacks a data input the model takes is refused on every rank
   before anything runs; on PP2 only the last stage takes "t", and it used to
   fail there alone, mid-schedule, aborting the job (every later call then
   VS_ERR_ABORTED). The state stays usable. */
static int rank_missing_input(vs_world* w, void* arg)
{
    vs_train* t = two_mb_state(w, 2, 1);
    if (!t) return 1;
    float X[ROWS * D], T[ROWS * D];
    vs_batch bt = batch_of(0, X, T);
    vs_batch no_t = bt;
    no_t.n = 1;
    double l;
    VT_EXPECT_ERR(vs_train_step(t, &no_t, &l), VS_ERR_INVALID, "vs_train_step: the batch has no \"t\"", "takes");
    VT_EXPECT_ERR(vs_train_eval(t, &no_t, &l), VS_ERR_INVALID, "vs_train_eval: the batch has no \"t\"", NULL);
    no_t = bt, no_t.name[0] = "X"; // (a misspelt one: both named)
    VT_EXPECT_ERR(vs_train_step(t, &no_t, &l), VS_ERR_INVALID, "the batch has no \"x\"", "\"X\"");
    VT_OK(vs_train_step(t, &bt, &l));
    VT_CHECK(isfinite(l) && vs_train_steps(t) == 1, "after the refusals: loss %g, %lld steps", l,
             (long long)vs_train_steps(t));
    /* saving over a checkpoint: vs_train_save's refusal, not vs_ckpt_save's advice
       to pass an overwrite flag that vs_train_save does not have */
    const char* dir = (const char*)arg;
    VT_EXPECT_ERR(vs_train_save(t, dir, NULL, 0, 0), VS_ERR_STATE, "vs_train_save: ", "exists");
    VT_CHECK(!strstr(vs_last_error(), "overwrite"), "advice vs_train_save cannot follow: %s", vs_last_error());
    VT_OK(vs_train_free(t));
    return 0;
}

/* A second free and a call on a freed schedule, pipe, checkpointer and training
   state: VS_ERR_STATE, "already freed". */
static int rank_freed(vs_world* w, void* arg)
{
    (void)arg;
    vs_train* t = two_mb_state(w, 1, 2);
    if (!t) return 1;
    vs_mesh* mesh = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {2}, .dim_names = {"DP"}}, &mesh));
    if (!mesh) return 1;

    vs_pipe_sched* s = NULL;
    VT_OK(vs_pipe_generate(w, VS_PIPE_1F1B, 1, 1, 2, &s));
    VT_CHECK(vs_pipe_sched_len(s, 0) > 0, "a live schedule has %d instructions", vs_pipe_sched_len(s, 0));
    VT_OK(vs_pipe_sched_free(s));
    VT_ERR(vs_pipe_sched_free(s), VS_ERR_STATE, "already freed");
    VT_ERR(vs_pipe_sched_len(s, 0), VS_ERR_STATE, "already freed");
    VT_ERR(vs_pipe_sched_stages(s), VS_ERR_STATE, "already freed");
    VT_ERR(vs_pipe_sched_push(s, 0, VS_PIPE_F, 0, 0), VS_ERR_STATE, "already freed");
    VT_ERR(vs_pipe_sched_check(s, NULL), VS_ERR_STATE, "already freed");
    vs_pipe_sim sim;
    VT_ERR(vs_pipe_simulate(s, NULL, &sim), VS_ERR_STATE, "already freed");
    char text[64];
    VT_ERR(vs_pipe_sched_print(s, text, sizeof text), -1, "already freed");

    vs_pipe_plan plan;
    vs_pipe_unit units[NL];
    for (int l = 0; l < NL; l++) units[l] = LAYERS[l].unit;
    VT_OK(vs_pipe_split(units, NL, &(vs_pipe_split_desc){.stages = 1, .chunks = 1, .kind = VS_PIPE_SPLIT_UNIFORM}, &plan));
    vs_pipe* p = NULL;
    VT_OK(vs_pipe_init(&(vs_pipe_desc){.mesh = mesh, .units = units, .nunits = NL, .plan = &plan, .data = no_data}, &p));
    VT_CHECK(vs_pipe_stage(p) == 0, "stage %d", vs_pipe_stage(p));
    VT_OK(vs_pipe_free(p));
    VT_ERR(vs_pipe_free(p), VS_ERR_STATE, "already freed");
    VT_ERR(vs_pipe_stage(p), VS_ERR_STATE, "already freed");
    VT_ERR(vs_pipe_run(p, NULL, NULL), VS_ERR_STATE, "already freed");
    double wall;
    VT_ERR(vs_pipe_last_hooks(p, &wall, NULL), VS_ERR_STATE, "already freed");

    vs_ckpt* ck = NULL;
    VT_OK(vs_ckpt_init(&(vs_ckpt_desc){.mesh = mesh}, &ck));
    VT_OK(vs_ckpt_wait(ck));
    VT_OK(vs_ckpt_free(ck));
    VT_ERR(vs_ckpt_free(ck), VS_ERR_STATE, "already freed");
    VT_ERR(vs_ckpt_wait(ck), VS_ERR_STATE, "already freed");
    VT_ERR(vs_ckpt_save(ck, "/nonexistent/x", NULL, 0, NULL), VS_ERR_STATE, "already freed");
    VT_ERR(vs_ckpt_load(ck, "/nonexistent/x", NULL, 0, NULL), VS_ERR_STATE, "already freed");

    float X[ROWS * D], T[ROWS * D];
    vs_batch bt = batch_of(0, X, T);
    double l;
    VT_OK(vs_train_step(t, &bt, &l));
    VT_OK(vs_train_free(t));
    VT_ERR(vs_train_free(t), VS_ERR_STATE, "already freed");
    VT_ERR(vs_train_step(t, &bt, &l), VS_ERR_STATE, "already freed");
    VT_ERR(vs_train_steps(t), VS_ERR_STATE, "already freed");
    VT_ERR(vs_train_skipped_steps(t), VS_ERR_STATE, "already freed");
    VT_ERR(vs_train_save(t, "/nonexistent/x", NULL, 0, 0), VS_ERR_STATE, "already freed");
    VT_ERR(vs_train_load(t, "/nonexistent/x", NULL, 0), VS_ERR_STATE, "already freed");
    VT_ERR(vs_train_get_param(t, "fc1.w", X, sizeof X), VS_ERR_STATE, "already freed");
    vs_clear_error();
    VT_CHECK(vs_train_ddp(t) == NULL && strstr(vs_last_error(), "already freed"), "vs_train_ddp on a freed state");
    vs_clear_error();
    VT_CHECK(vs_train_pipe(t) == NULL && strstr(vs_last_error(), "already freed"), "vs_train_pipe on a freed state");
    vs_clear_error();
    VT_CHECK(isnan(vs_train_grad_norm(t)) && strstr(vs_last_error(), "already freed"), "vs_train_grad_norm");
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

int main(void)
{
    build_model();
    static const nf_case cases[] = {
        {"nonfinite/one_rank_clip_on_skip", 1, 1, 1, VS_ZERO_0, 1.0, VS_NONFINITE_SKIP, {2, -1, "fc1", 0, NAN}},
        {"nonfinite/one_rank_clip_off_skip", 1, 1, 1, VS_ZERO_0, 0, VS_NONFINITE_SKIP, {2, -1, "fc1", 0, NAN}},
        {"nonfinite/one_rank_clip_on_error", 1, 1, 1, VS_ZERO_0, 1.0, VS_NONFINITE_ERROR, {2, -1, "fc2", 0, NAN}},
        {"nonfinite/one_rank_clip_off_error", 1, 1, 1, VS_ZERO_0, 0, VS_NONFINITE_ERROR, {2, -1, "fc2", 0, NAN}},
        // DP2 x TP2: one rank's shard of a column-parallel weight
        {"nonfinite/dp2_tp2_clip_on_skip", 1, 2, 2, VS_ZERO_1, 1.0, VS_NONFINITE_SKIP, {3, 2, "fc1", 0, NAN}},
        {"nonfinite/dp2_tp2_clip_off_skip", 1, 2, 2, VS_ZERO_1, 0, VS_NONFINITE_SKIP, {3, 2, "fc1", 0, NAN}},
        {"nonfinite/dp2_tp2_clip_on_error_inf", 1, 2, 2, VS_ZERO_1, 1.0, VS_NONFINITE_ERROR, {3, 2, "fc1", 0, INFINITY}},
        {"nonfinite/dp2_tp2_clip_off_error", 1, 2, 2, VS_ZERO_0, 0, VS_NONFINITE_ERROR, {3, 1, "fc2", 0, NAN}},
        /* one copy of a TP-replicated gradient (fc2.b on TP rank 1 only, which
           the norm does not count): still seen by every rank */
        {"nonfinite/dp2_tp2_replicated_copy_skip", 1, 2, 2, VS_ZERO_0, 0, VS_NONFINITE_SKIP, {1, 1, "fc2", 1, NAN}},
        {"nonfinite/dp2_tp2_replicated_copy_error", 1, 2, 2, VS_ZERO_1, 1.0, VS_NONFINITE_ERROR, {1, 3, "fc2", 1, -INFINITY}},
        // PP2 x DP2: the last stage's rank 3 only; ZeRO-1 and ZeRO-2
        {"nonfinite/pp2_dp2_clip_on_skip", 2, 2, 1, VS_ZERO_1, 1.0, VS_NONFINITE_SKIP, {2, 3, "fc2", 0, NAN}},
        {"nonfinite/pp2_dp2_clip_off_skip_zero2", 2, 2, 1, VS_ZERO_2, 0, VS_NONFINITE_SKIP, {2, 3, "fc2", 0, NAN}},
        {"nonfinite/pp2_dp2_clip_on_error_zero2", 2, 2, 1, VS_ZERO_2, 1.0, VS_NONFINITE_ERROR, {2, 0, "fc1", 1, NAN}},
        {"nonfinite/pp2_dp2_clip_off_error", 2, 2, 1, VS_ZERO_1, 0, VS_NONFINITE_ERROR, {4, 3, "fc2", 0, INFINITY}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) VT_CASE(cases[i].name, t_nonfinite(&cases[i]));
    VT_CASE("nonfinite/skip_warns_at_the_default_level_dp2_tp2", t_skip_warns_by_default());
    VT_CASE("nonfinite/bad_desc", VT_OK(vs_launch(1, rank_bad_desc, NULL)));
    VT_CASE("nonfinite/save_load_after_skip_pp2_dp2", t_save_load(2, 2, 1));
    VT_CASE("nonfinite/save_load_after_skip_dp2_tp2", t_save_load(1, 2, 2));
    VT_CASE("handles/owned_frees_refused_dp2_tp2", t_owned(1, 2, 2));
    VT_CASE("handles/owned_frees_refused_pp2_dp2", t_owned(2, 2, 1));
    VT_CASE("handles/second_free_and_use_after_free", VT_OK(vs_launch(2, rank_freed, NULL)));
    char taken[] = "/tmp/vs_train_taken_XXXXXX"; // an existing path: vs_train_save refuses it
    VT_CHECK(mkdtemp(taken) != NULL, "mkdtemp");
    VT_CASE("misuse/missing_input_refused_on_every_rank_pp2_and_a_taken_path", VT_OK(vs_launch(2, rank_missing_input, taken)));
    rmdir(taken);
    return vt_summary();
}
