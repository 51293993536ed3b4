/* test_gpt.c - examples/gpt.h's model driven unit by unit without vs_parallelize:
   finite-difference gradients of every parameter and of the units' inputs, TP=2
   and TP=4 (thread ranks holding shards) against one rank, the loss falling on
   gpt_batch's task, and one run through vescale_pipe.h's engine on a 1-stage
   mesh equal to the hand-driven loop. */
#define VESCALE_IMPLEMENTATION
#include "vescale.h"
#include "examples/gpt.h"
#include "tests/vs_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---- the parameters, once each (wte is tied) -------------------------------------

#define MAXP 256

typedef struct tparam {
    const vs_param_decl* d;
    float* full;  // global values
    float* fgrad; // global gradient (one-rank run)
    int64_t numel;
} tparam;

typedef struct tmodel {
    gpt_model_storage* st;
    vs_model_desc m;
    tparam p[MAXP];
    int np;
    int idx[GPT_MAX_UNITS][VS_LAYER_MAX_PARAMS]; // layer param -> p[]
} tmodel;

static int64_t decl_numel(const vs_param_decl* d)
{
    int64_t n = 1;
    for (int i = 0; i < d->ndim; i++) n *= d->shape[i];
    return n;
}

static void tm_init(tmodel* t, const gpt_config* cfg)
{
    memset(t, 0, sizeof *t);
    t->st = (gpt_model_storage*)calloc(1, sizeof *t->st);
    VT_OK(gpt_model(cfg, t->st, &t->m));
    for (int l = 0; l < t->m.nlayers; l++)
        for (int i = 0; i < t->m.layers[l].nparams; i++) {
            const vs_param_decl* d = &t->m.layers[l].params[i];
            int k = 0;
            while (k < t->np && strcmp(t->p[k].d->name, d->name)) k++;
            if (k == t->np) {
                t->p[k].d = d;
                t->p[k].numel = decl_numel(d);
                t->p[k].full = (float*)calloc((size_t)t->p[k].numel, sizeof(float));
                t->p[k].fgrad = (float*)calloc((size_t)t->p[k].numel, sizeof(float));
                t->np++;
            }
            t->idx[l][i] = k;
        }
}

static void tm_free(tmodel* t)
{
    for (int k = 0; k < t->np; k++) free(t->p[k].full), free(t->p[k].fgrad);
    free(t->st);
}

/* The model's own init (what vescale's sharded init gives: seed, the param's name). */
static void tm_fill_init(tmodel* t)
{
    for (int k = 0; k < t->np; k++) {
        vs_init_desc d = t->p[k].d->init;
        d.seed = t->m.seed, d.name = t->p[k].d->name;
        for (int64_t i = 0; i < t->p[k].numel; i++) t->p[k].full[i] = (float)vs_init_value(&d, (uint64_t)i);
    }
}

/* Random values big enough that every path carries gradient (for the checks). */
static uint64_t rng_state = 12345;
static double urand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}
static void tm_fill_random(tmodel* t, double scale)
{
    for (int k = 0; k < t->np; k++) {
        int norm_g = t->p[k].d->init.kind == VS_INIT_ONES;
        for (int64_t i = 0; i < t->p[k].numel; i++)
            t->p[k].full[i] = (float)((norm_g ? 1.0 : 0.0) + scale * (2 * urand() - 1));
    }
}

// ---- a rank's view: shards, a hand-driven loop over the units ---------------------

/* Placement along TP by role (megatron): -1 replicated, else the sharded dim. */
static int shard_dim(const vs_param_decl* d)
{
    switch (d->role) {
    case VS_ROLE_EMBEDDING: return 0;
    case VS_ROLE_COLUMN: return d->ndim == 2 ? 1 : 0;
    case VS_ROLE_ROW: return d->ndim == 2 ? 0 : -1;
    default: return -1;
    }
}

typedef struct trank {
    tmodel* t;
    int tp_size, tp_rank;
    vs_mesh* tp;
    float* lp[MAXP]; // local shards
    float* lg[MAXP]; // local grads
    int64_t lshape[MAXP][2], loff[MAXP][2];
    vs_layer_ctx ctx[GPT_MAX_UNITS];
    float* apart[GPT_MAX_UNITS][VS_LAYER_MAX_PARAMS]; // per-layer gradients (tr_grads_apart)
    // activations
    int rows, T;
    int64_t n, D;
    float* x[2 * GPT_MAX_LAYERS + 1];
    float* gx[2 * GPT_MAX_LAYERS + 1];
    float loss, gloss;
    int32_t *tokens, *targets;
    vs_pipe_tensor tin[GPT_MAX_UNITS][2], tout[GPT_MAX_UNITS][1];
    vs_pipe_call call[GPT_MAX_UNITS];
} trank;

static void slice(const tparam* p, int sd, int tp, int r, const float* src, float* dst, int64_t* lshape,
                  int64_t* loff, int back)
{
    int64_t s0 = p->d->shape[0], s1 = p->d->ndim > 1 ? p->d->shape[1] : 1;
    int64_t r0 = s0, c0 = s1, o0 = 0, o1 = 0;
    if (sd == 0) r0 = s0 / tp, o0 = r * r0;
    if (sd == 1) c0 = s1 / tp, o1 = r * c0;
    lshape[0] = r0, lshape[1] = p->d->ndim > 1 ? c0 : 0;
    loff[0] = o0, loff[1] = o1;
    if (!src) return;
    for (int64_t i = 0; i < r0; i++)
        for (int64_t j = 0; j < c0; j++) {
            if (back)
                dst[(o0 + i) * s1 + o1 + j] = src[i * c0 + j];
            else
                dst[i * c0 + j] = src[(o0 + i) * s1 + o1 + j];
        }
}

static void tr_init(trank* R, tmodel* t, int tp_size, int tp_rank, vs_mesh* tp, int rows)
{
    memset(R, 0, sizeof *R);
    R->t = t, R->tp_size = tp_size, R->tp_rank = tp_rank, R->tp = tp;
    for (int k = 0; k < t->np; k++) {
        int64_t ln = t->p[k].numel / (shard_dim(t->p[k].d) >= 0 ? tp_size : 1);
        R->lp[k] = (float*)calloc((size_t)ln, sizeof(float));
        R->lg[k] = (float*)calloc((size_t)ln, sizeof(float));
        slice(&t->p[k], shard_dim(t->p[k].d), tp_size, tp_rank, t->p[k].full, R->lp[k], R->lshape[k], R->loff[k], 0);
    }
    for (int l = 0; l < t->m.nlayers; l++) {
        vs_layer_ctx* c = &R->ctx[l];
        c->user = t->m.layers[l].user;
        for (int i = 0; i < t->m.layers[l].nparams; i++) {
            int k = t->idx[l][i];
            c->param[i] = R->lp[k], c->grad[i] = R->lg[k];
            c->local_shape[i][0] = R->lshape[k][0], c->local_shape[i][1] = R->lshape[k][1];
            c->offset[i][0] = R->loff[k][0], c->offset[i][1] = R->loff[k][1];
        }
        c->tp = tp, c->tp_size = tp_size, c->tp_rank = tp_rank;
    }
    const gpt_config* cfg = &t->st->cfg;
    R->rows = rows, R->T = cfg->seq, R->D = cfg->dim, R->n = (int64_t)rows * cfg->seq;
    for (int k = 0; k <= 2 * cfg->layers; k++) {
        R->x[k] = (float*)calloc((size_t)(R->n * R->D), sizeof(float));
        R->gx[k] = (float*)calloc((size_t)(R->n * R->D), sizeof(float));
    }
    R->tokens = (int32_t*)calloc((size_t)R->n, sizeof(int32_t));
    R->targets = (int32_t*)calloc((size_t)R->n, sizeof(int32_t));
}

/* One gradient buffer per (layer, parameter): a tied parameter's uses apart, as on
   separate pipeline stages. */
static void tr_grads_apart(trank* R)
{
    for (int l = 0; l < R->t->m.nlayers; l++)
        for (int i = 0; i < R->t->m.layers[l].nparams; i++) {
            int64_t ln = R->lshape[R->t->idx[l][i]][0] * (R->lshape[R->t->idx[l][i]][1] ? R->lshape[R->t->idx[l][i]][1] : 1);
            R->apart[l][i] = (float*)calloc((size_t)ln, sizeof(float));
            R->ctx[l].grad[i] = R->apart[l][i];
        }
}

static void tr_free(trank* R)
{
    const gpt_config* cfg = &R->t->st->cfg;
    for (int l = 0; l < R->t->m.nlayers; l++)
        for (int i = 0; i < R->t->m.layers[l].nparams; i++) free(R->apart[l][i]);
    for (int k = 0; k < R->t->np; k++) free(R->lp[k]), free(R->lg[k]);
    for (int k = 0; k <= 2 * cfg->layers; k++) free(R->x[k]), free(R->gx[k]);
    for (int l = 0; l < R->t->m.nlayers; l++) free(R->call[l].saved);
    free(R->tokens), free(R->targets);
}

static void act(vs_pipe_tensor* t, const char* name, float* data, float* grad, int rows, int T, int64_t D)
{
    t->name = name, t->dtype = VS_F32, t->ndim = 3;
    t->shape[0] = rows, t->shape[1] = T, t->shape[2] = D;
    t->data = data, t->grad = grad;
}

static void ids(vs_pipe_tensor* t, const char* name, int32_t* data, int rows, int T)
{
    t->name = name, t->dtype = VS_I32, t->ndim = 2;
    t->shape[0] = rows, t->shape[1] = T;
    t->data = data, t->grad = NULL;
}

/* Forward of units [from, end): the units before keep their outputs. */
static vs_result tr_forward(trank* R, int from)
{
    int L = R->t->st->cfg.layers, nl = R->t->m.nlayers;
    for (int u = from; u < nl; u++) {
        vs_pipe_call* c = &R->call[u];
        free(c->saved);
        memset(c, 0, sizeof *c);
        c->user = &R->ctx[u], c->unit = u, c->in = R->tin[u], c->out = R->tout[u], c->n_out = 1;
        if (u == 0) {
            ids(&R->tin[u][0], "tokens", R->tokens, R->rows, R->T), c->n_in = 1;
            act(&R->tout[u][0], "x0", R->x[0], R->gx[0], 0, 0, 0);
        } else if (u == nl - 1) {
            act(&R->tin[u][0], "xL", R->x[2 * L], R->gx[2 * L], R->rows, R->T, R->D);
            ids(&R->tin[u][1], "targets", R->targets, R->rows, R->T), c->n_in = 2;
            memset(&R->tout[u][0], 0, sizeof(vs_pipe_tensor));
            R->tout[u][0].name = "loss", R->tout[u][0].data = &R->loss, R->tout[u][0].grad = &R->gloss;
        } else {
            act(&R->tin[u][0], "x", R->x[u - 1], R->gx[u - 1], R->rows, R->T, R->D), c->n_in = 1;
            act(&R->tout[u][0], "y", R->x[u], R->gx[u], 0, 0, 0);
        }
        vs_result r = R->t->m.layers[u].unit.forward(c);
        if (r) return r;
    }
    return VS_OK;
}

/* Backward of every unit (gradients of activations zeroed, the loss seeded 1);
   split: B then W for the block units. Parameter gradients add up. */
static vs_result tr_backward_seed(trank* R, int split, float seed)
{
    int L = R->t->st->cfg.layers, nl = R->t->m.nlayers;
    for (int k = 0; k <= 2 * L; k++) memset(R->gx[k], 0, sizeof(float) * (size_t)(R->n * R->D));
    R->gloss = seed;
    for (int u = nl - 1; u >= 0; u--) {
        const vs_pipe_unit* un = &R->t->m.layers[u].unit;
        vs_result r;
        if (split && un->backward_input) {
            r = un->backward_input(&R->call[u]);
            if (!r) r = un->backward_weight(&R->call[u]);
        } else {
            r = un->backward(&R->call[u]);
        }
        if (r) return r;
    }
    return VS_OK;
}

static vs_result tr_backward(trank* R, int split) { return tr_backward_seed(R, split, 1.0f); }

static void tr_zero_grads(trank* R)
{
    for (int k = 0; k < R->t->np; k++) {
        int64_t ln = R->t->p[k].numel / (shard_dim(R->t->p[k].d) >= 0 ? R->tp_size : 1);
        memset(R->lg[k], 0, sizeof(float) * (size_t)ln);
    }
}

static const gpt_config tiny = {.vocab = 16, .seq = 6, .dim = 16, .heads = 2, .layers = 2, .seed = 7};

// ---- (1) finite differences ------------------------------------------------------

static double loss_now(trank* R, int from)
{
    VT_OK(tr_forward(R, from));
    return (double)R->loss;
}

/* Along a random unit direction u (+-1/sqrt(numel) per element): (L(p + eps u) - L(p - eps u)) / 2 eps
   against <grad, u>; and the element with the largest gradient alone. */
static void fd_check(trank* R, float* v, const float* g, int64_t numel, int from, const char* what)
{
    const double eps = 1e-2;
    float* u = (float*)malloc(sizeof(float) * (size_t)numel);
    float* keep = (float*)malloc(sizeof(float) * (size_t)numel);
    memcpy(keep, v, sizeof(float) * (size_t)numel);
    double an = 0;
    int64_t imax = 0;
    for (int64_t i = 0; i < numel; i++) {
        u[i] = (urand() < 0.5 ? -1.0f : 1.0f) / sqrtf((float)numel); // a unit direction
        an += (double)g[i] * u[i];
        if (fabsf(g[i]) > fabsf(g[imax])) imax = i;
    }
    for (int64_t i = 0; i < numel; i++) v[i] = keep[i] + (float)eps * u[i];
    double lp = loss_now(R, from);
    for (int64_t i = 0; i < numel; i++) v[i] = keep[i] - (float)eps * u[i];
    double lm = loss_now(R, from);
    memcpy(v, keep, sizeof(float) * (size_t)numel);
    double fd = (lp - lm) / (2 * eps);
    // f32 loss: its rounding (~3e-7) over 2 eps leaves ~2e-5 of noise in fd
    double rel = fabs(fd - an) / fmax(fabs(an), 1e-3);
    VT_CHECK(fabs(fd - an) <= 1e-2 * fabs(an) + 5e-5, "%s: direction: finite difference %.6g, analytic %.6g (rel %.2g)",
             what, fd, an, rel);
    // one element (the largest gradient)
    const double e1 = 1e-2;
    v[imax] = keep[imax] + (float)e1;
    lp = loss_now(R, from);
    v[imax] = keep[imax] - (float)e1;
    lm = loss_now(R, from);
    v[imax] = keep[imax];
    fd = (lp - lm) / (2 * e1);
    rel = fabs(fd - g[imax]) / fmax(fabs(g[imax]), 1e-3);
    VT_CHECK(rel < 1e-2, "%s[%lld]: finite difference %.6g, analytic %.6g (rel %.2g)", what, (long long)imax, fd,
             (double)g[imax], rel);
    VT_CHECK(fabsf(g[imax]) > 1e-3f, "%s: a zero gradient checks nothing (largest %.3g)", what, (double)g[imax]);
    loss_now(R, 0);
    free(u), free(keep);
}

static void test_gradcheck(int split)
{
    tmodel t;
    tm_init(&t, &tiny);
    tm_fill_random(&t, 0.3);
    trank R;
    tr_init(&R, &t, 1, 0, NULL, 3);
    gpt_batch(&tiny, 0, 3, R.tokens, R.targets);
    VT_OK(tr_forward(&R, 0));
    VT_CHECK(isfinite(R.loss) && R.loss > 0, "loss %g", (double)R.loss);
    tr_zero_grads(&R);
    VT_OK(tr_backward(&R, split));
    // copies of the gradients (the checks run forwards only, but keep them safe)
    for (int k = 0; k < t.np; k++) {
        float* g = (float*)malloc(sizeof(float) * (size_t)t.p[k].numel);
        memcpy(g, R.lg[k], sizeof(float) * (size_t)t.p[k].numel);
        fd_check(&R, R.lp[k], g, t.p[k].numel, 0, t.p[k].d->name);
        free(g);
    }
    // the units' input gradients: x(k) feeds unit k+1
    int L = tiny.layers;
    for (int k = 0; k <= 2 * L; k++) {
        float* g = (float*)malloc(sizeof(float) * (size_t)(R.n * R.D));
        memcpy(g, R.gx[k], sizeof(float) * (size_t)(R.n * R.D));
        char what[32];
        snprintf(what, sizeof what, "x%d", k);
        fd_check(&R, R.x[k], g, R.n * R.D, k + 1, what);
        free(g);
    }
    tr_free(&R);
    tm_free(&t);
}

// ---- (2) TP = 1 vs TP = t -----------------------------------------------------------

static const gpt_config tpcfg = {.vocab = 16, .seq = 6, .dim = 16, .heads = 4, .layers = 2, .seed = 3};

typedef struct tp_job {
    tmodel* t;
    double ref_loss;
    int tp;
    int split;
} tp_job;

static double tensor_err(const float* a, const float* b, int64_t n)
{
    double mx = 0, d = 0;
    for (int64_t i = 0; i < n; i++) {
        mx = fmax(mx, fabs((double)b[i]));
        d = fmax(d, fabs((double)a[i] - (double)b[i]));
    }
    return d / fmax(mx, 1e-30);
}

static int tp_rank_fn(vs_world* w, void* arg)
{
    tp_job* j = (tp_job*)arg;
    vs_mesh *mesh = NULL, *tp = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = j->tp, md.dim_names[0] = "TP";
    VT_OK(vs_mesh_init(w, &md, &mesh));
    VT_OK(vs_mesh_submesh(mesh, "TP", &tp));
    int r = vs_mesh_coord_along(mesh, "TP");
    trank R;
    tr_init(&R, j->t, j->tp, r, tp, 3);
    tr_zero_grads(&R);
    for (int mb = 0; mb < 2; mb++) { // two microbatches: gradients add up
        gpt_batch(&j->t->st->cfg, mb, 3, R.tokens, R.targets);
        VT_OK(tr_forward(&R, 0));
        VT_OK(tr_backward(&R, j->split));
    }
    VT_CHECK(fabs((double)R.loss - j->ref_loss) <= 1e-5 * fabs(j->ref_loss), "TP=%d rank %d: loss %.9g vs %.9g",
             j->tp, r, (double)R.loss, j->ref_loss);
    float* want = NULL;
    for (int k = 0; k < j->t->np; k++) {
        const tparam* p = &j->t->p[k];
        int64_t ln = p->numel / (shard_dim(p->d) >= 0 ? j->tp : 1);
        want = (float*)realloc(want, sizeof(float) * (size_t)ln);
        int64_t ls[2], lo[2];
        slice(p, shard_dim(p->d), j->tp, r, p->fgrad, want, ls, lo, 0);
        double e = tensor_err(R.lg[k], want, ln);
        VT_CHECK(e <= 1e-5, "TP=%d rank %d: grad %s differs by %.3g (relative to its largest)", j->tp, r, p->d->name,
                 e);
    }
    free(want);
    tr_free(&R);
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

static void test_tp(int tp, int split)
{
    tmodel t;
    tm_init(&t, &tpcfg);
    rng_state = 99;
    tm_fill_random(&t, 0.3);
    trank R;
    tr_init(&R, &t, 1, 0, NULL, 3);
    tr_zero_grads(&R);
    for (int mb = 0; mb < 2; mb++) {
        gpt_batch(&tpcfg, mb, 3, R.tokens, R.targets);
        VT_OK(tr_forward(&R, 0));
        VT_OK(tr_backward(&R, 0));
    }
    for (int k = 0; k < t.np; k++) memcpy(t.p[k].fgrad, R.lg[k], sizeof(float) * (size_t)t.p[k].numel);
    tp_job j = {&t, (double)R.loss, tp, split};
    tr_free(&R);
    VT_OK(vs_launch(tp, tp_rank_fn, &j));
    tm_free(&t);
}

// ---- (4) through vescale_pipe.h's engine: PP2 (bit for bit) and PP2 x TP2 -----------

enum { EROWS = 2, EMB = 4 };

typedef struct eng_job {
    tmodel* t;
    trank* ref; // the hand-driven loop, per-layer gradients
    double ref_loss;
    int pp, tp;
    vs_pipe_kind kind;
    int chunks;
    int step;
} eng_job;

static vs_result eng_data(vs_pipe_call* c)
{
    const eng_job* j = (const eng_job*)c->user;
    const gpt_config* cfg = &j->t->st->cfg;
    int64_t T = cfg->seq, shape[2] = {EROWS, T};
    int32_t tok[EROWS * EMB * 64], tg[EROWS * EMB * 64];
    gpt_batch(cfg, j->step, EROWS * EMB, tok, tg);
    int32_t* v;
    vs_result r = vs_pipe_output(c, 0, VS_I32, 2, shape, (void**)&v);
    if (r) return r;
    memcpy(v, (strcmp(c->out[0].name, "targets") ? tok : tg) + c->mb * EROWS * T, sizeof(int32_t) * EROWS * (size_t)T);
    return VS_OK;
}

static int eng_rank_fn(vs_world* w, void* arg)
{
    eng_job* j = (eng_job*)arg;
    tmodel* t = j->t;
    vs_mesh *mesh = NULL, *tp = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = j->pp, md.dim_names[0] = "PP";
    if (j->tp > 1) md.shape[1] = j->tp, md.dim_names[1] = "TP";
    VT_OK(vs_mesh_init(w, &md, &mesh));
    int tr = 0;
    if (j->tp > 1) {
        VT_OK(vs_mesh_submesh(mesh, "TP", &tp));
        tr = vs_mesh_coord_along(mesh, "TP");
    }
    int stage = vs_mesh_coord_along(mesh, "PP");
    trank R;
    tr_init(&R, t, j->tp, tr, tp, EROWS);
    tr_grads_apart(&R);
    vs_pipe_unit units[GPT_MAX_UNITS];
    for (int u = 0; u < t->m.nlayers; u++) units[u] = t->m.layers[u].unit, units[u].user = &R.ctx[u];
    vs_pipe_plan plan;
    vs_pipe_split_desc sd;
    memset(&sd, 0, sizeof sd);
    sd.stages = j->pp, sd.chunks = j->chunks, sd.kind = VS_PIPE_SPLIT_UNIFORM;
    sd.placement = j->chunks > 1 ? VS_PIPE_PLACE_V : VS_PIPE_PLACE_LOOP;
    VT_OK(vs_pipe_split(units, t->m.nlayers, &sd, &plan));
    vs_pipe_desc pd;
    memset(&pd, 0, sizeof pd);
    pd.mesh = mesh, pd.units = units, pd.nunits = t->m.nlayers, pd.plan = &plan, pd.data = eng_data, pd.data_user = j;
    vs_pipe* pipe = NULL;
    vs_pipe_sched* sched = NULL;
    VT_OK(vs_pipe_init(&pd, &pipe));
    VT_OK(vs_pipe_generate(w, j->kind, j->pp, j->chunks, EMB, &sched));
    double loss = 0;
    VT_OK(vs_pipe_run(pipe, sched, &loss));
    double tol = j->tp > 1 ? 1e-5 : 0; // PP alone: bit for bit
    VT_CHECK(fabs(loss - j->ref_loss) <= tol * fabs(j->ref_loss), "PP%d TP%d %s: loss %.9g vs %.9g", j->pp, j->tp,
             vs_pipe_kind_name(j->kind), loss, j->ref_loss);
    int checked = 0;
    float* want = NULL;
    for (int k = 0; k < plan.nchunks; k++) {
        if (plan.chunk_stage[k] != stage) continue;
        for (int u = plan.first_unit[k]; u < plan.first_unit[k + 1]; u++)
            for (int i = 0; i < t->m.layers[u].nparams; i++) {
                const tparam* p = &t->p[t->idx[u][i]];
                int64_t ls[2], lo[2];
                int64_t ln = p->numel / (shard_dim(p->d) >= 0 ? j->tp : 1);
                want = (float*)realloc(want, sizeof(float) * (size_t)ln);
                slice(p, shard_dim(p->d), j->tp, tr, j->ref->apart[u][i], want, ls, lo, 0);
                double e = tensor_err(R.apart[u][i], want, ln);
                if (j->tp == 1) e = memcmp(R.apart[u][i], want, sizeof(float) * (size_t)ln) ? 1 : 0;
                VT_CHECK(e <= tol, "PP%d TP%d %s: unit %s grad %s differs (%.3g)", j->pp, j->tp,
                         vs_pipe_kind_name(j->kind), t->m.layers[u].unit.name, p->d->name, e);
                checked++;
            }
    }
    VT_CHECK(checked > 0, "stage %d checked no gradient", stage);
    free(want);
    VT_OK(vs_pipe_sched_free(sched));
    VT_OK(vs_pipe_free(pipe));
    tr_free(&R);
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

static void test_engine(int pp, int tp, vs_pipe_kind kind, int chunks)
{
    tmodel t;
    tm_init(&t, &tpcfg);
    rng_state = 5;
    tm_fill_random(&t, 0.3);
    trank R;
    tr_init(&R, &t, 1, 0, NULL, EROWS);
    tr_grads_apart(&R);
    eng_job j = {&t, &R, 0, pp, tp, kind, chunks, 3};
    int32_t tok[EROWS * EMB * 64], tg[EROWS * EMB * 64];
    gpt_batch(&tpcfg, j.step, EROWS * EMB, tok, tg);
    double sum = 0;
    for (int mb = 0; mb < EMB; mb++) {
        memcpy(R.tokens, tok + mb * EROWS * tpcfg.seq, sizeof(int32_t) * EROWS * (size_t)tpcfg.seq);
        memcpy(R.targets, tg + mb * EROWS * tpcfg.seq, sizeof(int32_t) * EROWS * (size_t)tpcfg.seq);
        VT_OK(tr_forward(&R, 0));
        sum += (double)R.loss;
        VT_OK(tr_backward_seed(&R, 0, 1.0f / EMB)); // the engine's mean: each microbatch seeded 1/M
    }
    j.ref_loss = sum / EMB;
    VT_OK(vs_launch(pp * tp, eng_rank_fn, &j));
    tr_free(&R);
    tm_free(&t);
}

// ---- (3) the loss falls ---------------------------------------------------------------

static void test_learns(void)
{
    const gpt_config cfg = {.vocab = 32, .seq = 8, .dim = 32, .heads = 4, .layers = 2, .seed = 1};
    tmodel t;
    tm_init(&t, &cfg);
    tm_fill_init(&t);
    trank R;
    const int rows = 16;
    tr_init(&R, &t, 1, 0, NULL, rows);
    double first = 0, last = 0;
    const int steps = 60;
    for (int s = 0; s < steps; s++) {
        gpt_batch(&cfg, s, rows, R.tokens, R.targets);
        tr_zero_grads(&R);
        VT_OK(tr_forward(&R, 0));
        VT_OK(tr_backward(&R, 0));
        for (int k = 0; k < t.np; k++)
            for (int64_t i = 0; i < t.p[k].numel; i++) R.lp[k][i] -= 0.5f * R.lg[k][i];
        if (s < 5) first += R.loss / 5;
        if (s >= steps - 5) last += R.loss / 5;
    }
    printf("    loss %.3f (first 5 steps) -> %.3f (last 5 of %d), ln V = %.3f\n", first, last, steps,
           log((double)cfg.vocab));
    VT_CHECK(fabs(first - log((double)cfg.vocab)) < 0.2, "the first loss %.3f is not near ln V", first);
    VT_CHECK(last < 0.6 * first, "the loss fell only from %.3f to %.3f", first, last);
    tr_free(&R);
    tm_free(&t);
}

// ---- model and bad input ------------------------------------------------------------

static void test_model_decl(void)
{
    tmodel t;
    tm_init(&t, &tiny);
    VT_CHECK(t.m.nlayers == 2 + 2 * tiny.layers, "layers %d", t.m.nlayers);
    int64_t total = 0;
    for (int k = 0; k < t.np; k++) total += t.p[k].numel;
    VT_CHECK(total == gpt_param_count(&tiny), "params %lld vs gpt_param_count %lld", (long long)total,
             (long long)gpt_param_count(&tiny));
    VT_CHECK(!strcmp(t.m.layers[0].params[0].name, "wte") && !strcmp(t.m.layers[t.m.nlayers - 1].params[2].name, "wte"),
             "wte tied");
    VT_CHECK(!strcmp(t.m.layers[1].unit.name, "h.0.attn") && !strcmp(t.m.layers[4].unit.name, "h.1.mlp"), "names");
    VT_CHECK(!strcmp(t.m.layers[3].params[2].name, "h.1.attn.wq"), "%s", t.m.layers[3].params[2].name);
    tm_free(&t);
    gpt_model_storage* st = (gpt_model_storage*)calloc(1, sizeof *st);
    vs_model_desc m;
    gpt_config bad = tiny;
    bad.heads = 3;
    VT_ERR(gpt_model(&bad, st, &m), VS_ERR_INVALID, "heads 3");
    bad = tiny, bad.layers = GPT_MAX_LAYERS + 1;
    VT_ERR(gpt_model(&bad, st, &m), VS_ERR_INVALID, "layers");
    free(st);
    // the data: deterministic, targets are the next token
    int32_t a[2 * 6], b[2 * 6], c[2 * 6], d[2 * 6];
    gpt_batch(&tiny, 5, 2, a, b);
    gpt_batch(&tiny, 5, 2, c, d);
    VT_CHECK(!memcmp(a, c, sizeof a) && !memcmp(b, d, sizeof b), "gpt_batch is not deterministic");
    for (int i = 0; i < 2 * 6; i++) VT_CHECK(a[i] >= 0 && a[i] < 16 && b[i] >= 0 && b[i] < 16, "range");
    for (int r = 0; r < 2; r++)
        for (int i = 0; i + 1 < 6; i++) VT_CHECK(b[r * 6 + i] == a[r * 6 + i + 1], "targets are the next token");
}

int main(void)
{
    VT_CASE("gpt_model_declaration", test_model_decl());
    VT_CASE("gpt_gradcheck_full_backward", test_gradcheck(0));
    VT_CASE("gpt_gradcheck_split_backward", test_gradcheck(1));
    VT_CASE("gpt_tp2_equals_one_rank", test_tp(2, 0));
    VT_CASE("gpt_tp4_equals_one_rank_split", test_tp(4, 1));
    VT_CASE("gpt_engine_pp2_zbv_bit_for_bit", test_engine(2, 1, VS_PIPE_ZBV, 2));
    VT_CASE("gpt_engine_pp2_1f1b_bit_for_bit", test_engine(2, 1, VS_PIPE_1F1B, 1));
    VT_CASE("gpt_engine_pp2_tp2_zbh1", test_engine(2, 2, VS_PIPE_ZBH1, 1));
    VT_CASE("gpt_loss_falls", test_learns());
    return vt_summary();
}
