/* pipe_models.h - the models of tests/test_pipe.c (and any later pipeline test):
   unit lists with small deterministic parameters, their callbacks, the data
   callback, and a single-device reference written without the engine.

   Units are of three kinds, all with plain f32 math in a fixed order:
     MIX   n_in inputs (rows x wi[i]) -> n_out outputs (rows x wo[j]):
           out_j = act(b_j + sum_i in_i W_ji^T), act = tanh or identity.
           Parameters: every W_ji [wo_j][wi_i] (j outer, i inner), then every b_j.
     MSE   (y, target) -> loss = sum 0.5 (y - t)^2 / (rows * width)
     CE    (y, target) -> loss = -sum_r sum_k t_rk log softmax(y_r)_k / rows
   Activations are stored as f32 or bf16 (round to nearest even, this file's own
   conversion); the loss is always an f32 scalar; parameters and their gradients
   are f32. A unit's callbacks get their output and scratch memory through
   pm_output / pm_save: vs_pipe_output / vs_pipe_save under the engine
   (call->_rt != NULL), calloc under the reference (which frees them).

   The reference (pm_ref_run) is the contract's single-device loop: for each mb in
   order, every unit's forward in model order, the loss = the last unit's first
   output; then activation gradients zeroed, the loss gradient seeded with
   (mean ? 1.0f / M : 1.0f), every unit's backward in reverse model order (adding
   into in[].grad and the unit's own parameter gradients, never zeroed between
   microbatches); minibatch loss = sum of (double)loss_m, / M for mean. */
#ifndef PIPE_MODELS_H
#define PIPE_MODELS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PM_MAXU = 16, PM_MAXT = 40, PM_MAXM = 32 };
enum { PM_MIX = 0, PM_MSE, PM_CE };
enum { PM_BK_FULL = 1, PM_BK_SPLIT = 2, PM_BK_BOTH = 3 }; // which backward callbacks a unit list gives
enum { PM_A = 0, PM_B, PM_C, PM_D, PM_NMODELS };          // mlp, skip, two-in-two-out, varlen

static const char* const pm_model_name[PM_NMODELS] = {"mlp", "skip", "2in2out", "varlen"};

/* ---- numbers ------------------------------------------------------------- */

static float pm_hash(uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t h = a * 0x9E3779B1u ^ (b + 0x7F4A7C15u) * 0x85EBCA77u ^ (c + 0x165667B1u) * 0xC2B2AE3Du;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    return (float)((double)(h >> 8) / 16777216.0 * 2.0 - 1.0); // [-1, 1)
}

static uint16_t pm_bf16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float pm_bf16_val(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static float pm_ld(vs_dtype dt, const void* p, int64_t i)
{
    return dt == VS_BF16 ? pm_bf16_val(((const uint16_t*)p)[i]) : ((const float*)p)[i];
}
static void pm_st(vs_dtype dt, void* p, int64_t i, float v)
{
    if (dt == VS_BF16)
        ((uint16_t*)p)[i] = pm_bf16_of(v);
    else
        ((float*)p)[i] = v;
}

/* ---- memory through the engine or the reference ------------------------ */

static vs_result pm_output(vs_pipe_call* c, int i, vs_dtype dt, int nd, const int64_t* sh, void** data)
{
    if (c->_rt) return vs_pipe_output(c, i, dt, nd, sh, data);
    size_t n = 1;
    for (int d = 0; d < nd; d++) n *= (size_t)sh[d];
    void* p = calloc(n ? n : 1, vs_dtype_size(dt));
    if (!p) return VS_ERR_NOMEM;
    vs_pipe_tensor* t = &c->out[i];
    t->dtype = dt;
    t->ndim = nd;
    for (int d = 0; d < nd; d++) t->shape[d] = sh[d];
    t->data = p;
    *data = p;
    return VS_OK;
}

static vs_result pm_save(vs_pipe_call* c, size_t bytes, void** data)
{
    if (c->_rt) return vs_pipe_save(c, bytes, data);
    void* p = calloc(bytes ? bytes : 1, 1);
    if (!p) return VS_ERR_NOMEM;
    c->saved = p;
    c->saved_bytes = bytes;
    *data = p;
    return VS_OK;
}

/* ---- models ---------------------------------------------------------------- */

typedef struct pm_uspec {
    const char *name, *in, *out; // '$' is replaced by the activation dtype's name
    int kind, act;
    int wi[2], wo[2];
} pm_uspec;

#define PM_T 1 // tanh
#define PM_I 0 // identity

static const pm_uspec pm_spec_a[] = {
    {"embed", "x:$[*,8]", "h0:$[*,16]", PM_MIX, PM_T, {8}, {16}},
    {"l1", "h0", "h1:$[*,16]", PM_MIX, PM_T, {16}, {16}},
    {"l2", "h1:$[*,16]", "h2", PM_MIX, PM_T, {16}, {12}},
    {"l3", "h2", "h3:$[*,12]", PM_MIX, PM_T, {12}, {12}},
    {"l4", "h3", "h4", PM_MIX, PM_T, {12}, {16}},
    {"l5", "h4", "h5", PM_MIX, PM_T, {16}, {16}},
    {"l6", "h5", "h6", PM_MIX, PM_T, {16}, {16}},
    {"l7", "h6:$[*,16]", "h7", PM_MIX, PM_T, {16}, {16}},
    {"head", "h7", "y:$[*,8]", PM_MIX, PM_I, {16}, {8}},
    {"loss", "y,target:$[*,8]", "loss:f32[]", PM_MSE, 0, {8, 8}, {1}},
};
/* skip connections: h1 (unit 1) feeds l6 (unit 6) as well, h0 (unit 0) the head */
static const pm_uspec pm_spec_b[] = {
    {"embed", "x:$[*,8]", "h0:$[*,16]", PM_MIX, PM_T, {8}, {16}},
    {"l1", "h0", "h1:$[*,16]", PM_MIX, PM_T, {16}, {16}},
    {"l2", "h1", "h2", PM_MIX, PM_T, {16}, {12}},
    {"l3", "h2", "h3", PM_MIX, PM_T, {12}, {12}},
    {"l4", "h3", "h4", PM_MIX, PM_T, {12}, {16}},
    {"l5", "h4", "h5", PM_MIX, PM_T, {16}, {16}},
    {"l6", "h5,h1:$[*,16]", "h6", PM_MIX, PM_T, {16, 16}, {16}},
    {"l7", "h6", "h7", PM_MIX, PM_T, {16}, {16}},
    {"head", "h7, h0", "y:$[*,8]", PM_MIX, PM_I, {16, 16}, {8}},
    {"loss", "y,target", "loss:f32[]", PM_MSE, 0, {8, 8}, {1}},
};
/* two streams: l1 splits, l4 and l6 take two and give two, l7 merges */
static const pm_uspec pm_spec_c[] = {
    {"embed", "x:$[*,8]", "h0:$[*,16]", PM_MIX, PM_T, {8}, {16}},
    {"l1", "h0", "a1:$[*,12],b1:$[*,8]", PM_MIX, PM_T, {16}, {12, 8}},
    {"l2", "a1", "a2", PM_MIX, PM_T, {12}, {12}},
    {"l3", "b1:$[*,8]", "b2", PM_MIX, PM_T, {8}, {8}},
    {"l4", "a2,b2", "a4,b4", PM_MIX, PM_T, {12, 8}, {16, 8}},
    {"l5", "a4", "a5", PM_MIX, PM_T, {16}, {16}},
    {"l6", "b4:$[*,8],a5", "c6,d6", PM_MIX, PM_T, {8, 16}, {8, 8}},
    {"l7", "c6,d6", "h7", PM_MIX, PM_T, {8, 8}, {16}},
    {"head", "h7", "y:$[*,8]", PM_MIX, PM_I, {16}, {8}},
    {"loss", "y,target", "loss:f32[]", PM_MSE, 0, {8, 8}, {1}},
};
/* variable rows per microbatch, softmax cross-entropy */
static const pm_uspec pm_spec_d[] = {
    {"embed", "x:$[*,8]", "h0:$[*,12]", PM_MIX, PM_T, {8}, {12}},
    {"l1", "h0", "h1", PM_MIX, PM_T, {12}, {16}},
    {"l2", "h1", "h2", PM_MIX, PM_T, {16}, {16}},
    {"l3", "h2", "h3:$[*,8]", PM_MIX, PM_T, {16}, {8}},
    {"l4", "h3", "h4", PM_MIX, PM_T, {8}, {12}},
    {"l5", "h4", "h5", PM_MIX, PM_T, {12}, {16}},
    {"l6", "h5", "h6", PM_MIX, PM_T, {16}, {12}},
    {"l7", "h6", "h7", PM_MIX, PM_T, {12}, {16}},
    {"head", "h7", "y:$[*,8]", PM_MIX, PM_I, {16}, {8}},
    {"loss", "y,target:$[*,8]", "loss:f32[]", PM_CE, 0, {8, 8}, {1}},
};

static const pm_uspec* pm_spec(int model, int* n)
{
    *n = 10;
    return model == PM_A ? pm_spec_a : model == PM_B ? pm_spec_b : model == PM_C ? pm_spec_c : pm_spec_d;
}

struct pm_inst;

typedef struct pm_layer {
    int kind, act, n_in, n_out, wi[2], wo[2];
    vs_dtype dt;
    int idx, npar;
    float *p, *g;
    struct pm_inst* inst;
} pm_layer;

/* One copy of a model: its units, parameters and gradients. */
typedef struct pm_inst {
    int model, nu;
    vs_dtype dt;
    pm_layer L[PM_MAXU];
    vs_pipe_unit U[PM_MAXU];
    char in[PM_MAXU][160], out[PM_MAXU][160];
    /* test hooks (engine side) */
    const vs_pipe_plan* plan; // when set, callbacks check call->chunk against it
    int sleep_unit, sleep_mb; // forward of this unit and mb sleeps sleep_s (sleep_unit -1: none)
    double sleep_s;
    int nfwd, nbwd;           // callbacks run (atomics)
    int bad;                  // contract violations seen in callbacks (atomics)
} pm_inst;

/* The data callback's user: which model (rows, target kind) and dtype. */
typedef struct pm_data {
    int model;
    vs_dtype dt;
    int ncalls; // atomics
} pm_data;

static int pm_rows(int model, int mb) { return model == PM_D ? 2 + (mb * 3) % 5 : 3; }

static int pm_woff(const pm_layer* L, int j, int i)
{
    int off = 0;
    for (int jj = 0; jj < L->n_out; jj++)
        for (int ii = 0; ii < L->n_in; ii++) {
            if (jj == j && ii == i) return off;
            off += L->wo[jj] * L->wi[ii];
        }
    return off;
}
static int pm_boff(const pm_layer* L, int j)
{
    int off = pm_woff(L, L->n_out, 0);
    for (int jj = 0; jj < j; jj++) off += L->wo[jj];
    return off;
}

static void pm_bad(pm_layer* L, const char* what, const vs_pipe_call* c)
{
    int n = __atomic_add_fetch(&L->inst->bad, 1, __ATOMIC_SEQ_CST);
    if (n <= 5) fprintf(stderr, "    unit %d (mb %d, chunk %d): %s\n", L->idx, c->mb, c->chunk, what);
}

static void pm_check_call(pm_layer* L, const vs_pipe_call* c, int bwd)
{
    if (c->unit != L->idx) pm_bad(L, "call->unit is not the unit", c);
    if (c->user != (void*)L) pm_bad(L, "call->user is not the unit's user", c);
    if (c->n_in != L->n_in || c->n_out != L->n_out) pm_bad(L, "n_in / n_out differ from the unit's lists", c);
    const vs_pipe_plan* pl = L->inst->plan;
    if (c->_rt && pl) {
        int k = c->chunk;
        if (k < 0 || k >= pl->nchunks || L->idx < pl->first_unit[k] || L->idx >= pl->first_unit[k + 1])
            pm_bad(L, "call->chunk does not hold the unit", c);
    }
    int rows = pm_rows(L->inst->model, c->mb);
    for (int i = 0; i < c->n_in && i < 2; i++) {
        const vs_pipe_tensor* t = &c->in[i];
        if (!t->data || t->ndim != 2 || t->shape[0] != rows || t->shape[1] != L->wi[i] || t->dtype != L->dt)
            pm_bad(L, "an input's data, dtype or shape is wrong", c);
    }
    if (bwd) {
        for (int j = 0; j < c->n_out && j < 2; j++)
            if (!c->out[j].grad || !c->out[j].data) pm_bad(L, "an output's data or grad is NULL in backward", c);
    }
}

static void pm_sleep(double s)
{
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static vs_result pm_fwd(vs_pipe_call* c)
{
    pm_layer* L = (pm_layer*)c->user;
    pm_check_call(L, c, 0);
    if (L->inst->bad) return VS_ERR_INVALID;
    __atomic_add_fetch(&L->inst->nfwd, 1, __ATOMIC_SEQ_CST);
    if (c->_rt && L->inst->sleep_unit == L->idx && L->inst->sleep_mb == c->mb) pm_sleep(L->inst->sleep_s);
    const vs_dtype dt = L->dt;
    const int64_t rows = c->in[0].shape[0];
    if (L->kind == PM_MIX) {
        int64_t tot = 0;
        for (int j = 0; j < L->n_out; j++) tot += rows * L->wo[j];
        float* dact;
        vs_result r = pm_save(c, (size_t)tot * sizeof(float), (void**)&dact);
        if (r) return r;
        for (int j = 0; j < L->n_out; j++) {
            int64_t sh[2] = {rows, L->wo[j]};
            void* y;
            r = pm_output(c, j, dt, 2, sh, &y);
            if (r) return r;
            const float* b = L->p + pm_boff(L, j);
            for (int64_t row = 0; row < rows; row++)
                for (int o = 0; o < L->wo[j]; o++) {
                    float acc = b[o];
                    for (int i = 0; i < L->n_in; i++) {
                        const float* W = L->p + pm_woff(L, j, i) + o * L->wi[i];
                        for (int k = 0; k < L->wi[i]; k++) acc += W[k] * pm_ld(dt, c->in[i].data, row * L->wi[i] + k);
                    }
                    float v = L->act ? tanhf(acc) : acc;
                    pm_st(dt, y, row * L->wo[j] + o, v);
                    float q = pm_ld(dt, y, row * L->wo[j] + o);
                    *dact++ = L->act ? 1.0f - q * q : 1.0f;
                }
        }
        return VS_OK;
    }
    const int64_t w = c->in[0].shape[1];
    float* loss;
    vs_result r = pm_output(c, 0, VS_F32, 0, NULL, (void**)&loss);
    if (r) return r;
    if (L->kind == PM_MSE) {
        float acc = 0;
        for (int64_t e = 0; e < rows * w; e++) {
            float d = pm_ld(dt, c->in[0].data, e) - pm_ld(dt, c->in[1].data, e);
            acc += 0.5f * d * d;
        }
        *loss = acc / (float)(rows * w);
        return VS_OK;
    }
    float* prob;
    r = pm_save(c, (size_t)(rows * w) * sizeof(float), (void**)&prob);
    if (r) return r;
    float acc = 0;
    for (int64_t row = 0; row < rows; row++) {
        float m = -INFINITY, s = 0;
        for (int64_t k = 0; k < w; k++) m = fmaxf(m, pm_ld(dt, c->in[0].data, row * w + k));
        for (int64_t k = 0; k < w; k++) s += expf(pm_ld(dt, c->in[0].data, row * w + k) - m);
        float ls = logf(s);
        for (int64_t k = 0; k < w; k++) {
            float lp = pm_ld(dt, c->in[0].data, row * w + k) - m - ls;
            acc += -pm_ld(dt, c->in[1].data, row * w + k) * lp;
            prob[row * w + k] = expf(lp);
        }
    }
    *loss = acc / (float)rows;
    return VS_OK;
}

/* dpre_j[row][o] = gout_j * act' (act' kept by forward) */
static float pm_dpre(const pm_layer* L, const vs_pipe_call* c, const float* dact, int j, int64_t row, int o)
{
    int64_t rows = c->in[0].shape[0], off = 0;
    for (int jj = 0; jj < j; jj++) off += rows * L->wo[jj];
    return pm_ld(L->dt, c->out[j].grad, row * L->wo[j] + o) * dact[off + row * L->wo[j] + o];
}

static vs_result pm_bwd_in(vs_pipe_call* c)
{
    pm_layer* L = (pm_layer*)c->user;
    pm_check_call(L, c, 1);
    if (L->inst->bad) return VS_ERR_INVALID;
    const vs_dtype dt = L->dt;
    const int64_t rows = c->in[0].shape[0];
    if (L->kind == PM_MIX) {
        const float* dact = (const float*)c->saved;
        int64_t tot = 0;
        for (int j = 0; j < L->n_out; j++) tot += rows * L->wo[j];
        if (!dact || c->saved_bytes != (size_t)tot * sizeof(float)) {
            pm_bad(L, "saved scratch missing or of the wrong size", c);
            return VS_ERR_INVALID;
        }
        for (int i = 0; i < L->n_in; i++) {
            if (!c->in[i].grad) continue; // a data input
            for (int64_t row = 0; row < rows; row++)
                for (int k = 0; k < L->wi[i]; k++) {
                    float acc = 0;
                    for (int j = 0; j < L->n_out; j++) {
                        const float* W = L->p + pm_woff(L, j, i);
                        for (int o = 0; o < L->wo[j]; o++) acc += pm_dpre(L, c, dact, j, row, o) * W[o * L->wi[i] + k];
                    }
                    int64_t e = row * L->wi[i] + k;
                    pm_st(dt, c->in[i].grad, e, pm_ld(dt, c->in[i].grad, e) + acc);
                }
        }
        return VS_OK;
    }
    if (c->in[1].grad) pm_bad(L, "the data input target has a gradient buffer", c);
    const int64_t w = c->in[0].shape[1];
    const float gl = *(const float*)c->out[0].grad;
    if (!c->in[0].grad) return VS_OK;
    if (L->kind == PM_MSE) {
        for (int64_t e = 0; e < rows * w; e++) {
            float d = pm_ld(dt, c->in[0].data, e) - pm_ld(dt, c->in[1].data, e);
            pm_st(dt, c->in[0].grad, e, pm_ld(dt, c->in[0].grad, e) + gl * d / (float)(rows * w));
        }
        return VS_OK;
    }
    const float* prob = (const float*)c->saved;
    if (!prob || c->saved_bytes != (size_t)(rows * w) * sizeof(float)) {
        pm_bad(L, "saved scratch missing or of the wrong size", c);
        return VS_ERR_INVALID;
    }
    for (int64_t row = 0; row < rows; row++) {
        float T = 0;
        for (int64_t k = 0; k < w; k++) T += pm_ld(dt, c->in[1].data, row * w + k);
        for (int64_t k = 0; k < w; k++) {
            int64_t e = row * w + k;
            float d = prob[e] * T - pm_ld(dt, c->in[1].data, e);
            pm_st(dt, c->in[0].grad, e, pm_ld(dt, c->in[0].grad, e) + gl * d / (float)rows);
        }
    }
    return VS_OK;
}

static vs_result pm_bwd_w(vs_pipe_call* c)
{
    pm_layer* L = (pm_layer*)c->user;
    pm_check_call(L, c, 1);
    if (L->inst->bad) return VS_ERR_INVALID;
    __atomic_add_fetch(&L->inst->nbwd, 1, __ATOMIC_SEQ_CST);
    if (L->kind != PM_MIX) return VS_OK;
    const vs_dtype dt = L->dt;
    const int64_t rows = c->in[0].shape[0];
    const float* dact = (const float*)c->saved;
    if (!dact) {
        pm_bad(L, "saved scratch missing in backward_weight", c);
        return VS_ERR_INVALID;
    }
    for (int j = 0; j < L->n_out; j++) {
        for (int i = 0; i < L->n_in; i++) {
            float* gW = L->g + pm_woff(L, j, i);
            for (int o = 0; o < L->wo[j]; o++)
                for (int k = 0; k < L->wi[i]; k++) {
                    float acc = 0;
                    for (int64_t row = 0; row < rows; row++)
                        acc += pm_dpre(L, c, dact, j, row, o) * pm_ld(dt, c->in[i].data, row * L->wi[i] + k);
                    gW[o * L->wi[i] + k] += acc;
                }
        }
        float* gb = L->g + pm_boff(L, j);
        for (int o = 0; o < L->wo[j]; o++) {
            float acc = 0;
            for (int64_t row = 0; row < rows; row++) acc += pm_dpre(L, c, dact, j, row, o);
            gb[o] += acc;
        }
    }
    return VS_OK;
}

/* The full backward, written on its own (one pass that computes dpre once into a
   table and uses it for both parts, in the same order of sums as B and W), so
   comparing it with B then W means something. */
static vs_result pm_bwd_full(vs_pipe_call* c)
{
    pm_layer* L = (pm_layer*)c->user;
    if (L->kind != PM_MIX) {
        vs_result r = pm_bwd_in(c);
        if (r) return r;
        __atomic_add_fetch(&L->inst->nbwd, 1, __ATOMIC_SEQ_CST);
        return VS_OK;
    }
    pm_check_call(L, c, 1);
    if (L->inst->bad) return VS_ERR_INVALID;
    __atomic_add_fetch(&L->inst->nbwd, 1, __ATOMIC_SEQ_CST);
    const vs_dtype dt = L->dt;
    const int64_t rows = c->in[0].shape[0];
    const float* dact = (const float*)c->saved;
    if (!dact) {
        pm_bad(L, "saved scratch missing in backward", c);
        return VS_ERR_INVALID;
    }
    float dp[2][8 * 16]; // rows <= 8, widths <= 16
    for (int j = 0; j < L->n_out; j++) {
        int64_t off = 0;
        for (int jj = 0; jj < j; jj++) off += rows * L->wo[jj];
        for (int64_t e = 0; e < rows * L->wo[j]; e++) dp[j][e] = pm_ld(dt, c->out[j].grad, e) * dact[off + e];
    }
    for (int i = 0; i < L->n_in; i++) {
        if (!c->in[i].grad) continue;
        for (int64_t row = 0; row < rows; row++)
            for (int k = 0; k < L->wi[i]; k++) {
                float acc = 0;
                for (int j = 0; j < L->n_out; j++) {
                    const float* W = L->p + pm_woff(L, j, i);
                    for (int o = 0; o < L->wo[j]; o++) acc += dp[j][row * L->wo[j] + o] * W[o * L->wi[i] + k];
                }
                int64_t e = row * L->wi[i] + k;
                pm_st(dt, c->in[i].grad, e, pm_ld(dt, c->in[i].grad, e) + acc);
            }
    }
    for (int j = 0; j < L->n_out; j++) {
        for (int i = 0; i < L->n_in; i++) {
            float* gW = L->g + pm_woff(L, j, i);
            for (int o = 0; o < L->wo[j]; o++)
                for (int k = 0; k < L->wi[i]; k++) {
                    float acc = 0;
                    for (int64_t row = 0; row < rows; row++)
                        acc += dp[j][row * L->wo[j] + o] * pm_ld(dt, c->in[i].data, row * L->wi[i] + k);
                    gW[o * L->wi[i] + k] += acc;
                }
        }
        float* gb = L->g + pm_boff(L, j);
        for (int o = 0; o < L->wo[j]; o++) {
            float acc = 0;
            for (int64_t row = 0; row < rows; row++) acc += dp[j][row * L->wo[j] + o];
            gb[o] += acc;
        }
    }
    return VS_OK;
}

/* The data callback: "x" (rows x 8) and "target" (rows x 8; for CE each row a
   distribution). */
static vs_result pm_data_fn(vs_pipe_call* c)
{
    pm_data* d = (pm_data*)c->user;
    __atomic_add_fetch(&d->ncalls, 1, __ATOMIC_SEQ_CST);
    if (c->unit != -1 || c->n_out != 1 || !c->out || !c->out[0].name) return VS_ERR_INVALID;
    const char* nm = c->out[0].name;
    int which = !strcmp(nm, "x") ? 1 : !strcmp(nm, "target") ? 2 : 0;
    if (!which) return vs_set_error(VS_ERR_INVALID, "pm_data_fn: unknown data input '%s'", nm);
    int64_t rows = pm_rows(d->model, c->mb), sh[2] = {rows, 8};
    void* p;
    vs_result r = pm_output(c, 0, d->dt, 2, sh, &p);
    if (r) return r;
    for (int64_t row = 0; row < rows; row++) {
        float tot = 0, v[8];
        for (int k = 0; k < 8; k++) {
            float h = pm_hash((uint32_t)which, (uint32_t)(c->mb * 64 + row), (uint32_t)k);
            v[k] = which == 1 ? 0.9f * h : d->model == PM_D ? h + 1.5f : 0.5f * h;
            tot += v[k];
        }
        for (int k = 0; k < 8; k++) pm_st(d->dt, p, row * 8 + k, which == 2 && d->model == PM_D ? v[k] / tot : v[k]);
    }
    return VS_OK;
}

static void pm_subst(char* dst, size_t cap, const char* src, const char* dt)
{
    size_t n = 0;
    for (; *src && n + 8 < cap; src++) {
        if (*src == '$') {
            size_t l = strlen(dt);
            memcpy(dst + n, dt, l);
            n += l;
        } else
            dst[n++] = *src;
    }
    dst[n] = 0;
}

/* Builds model `model` with activations of `dt`; bk: which backward callbacks. */
static pm_inst* pm_new(int model, vs_dtype dt, int bk)
{
    pm_inst* mi = (pm_inst*)calloc(1, sizeof *mi);
    int n;
    const pm_uspec* sp = pm_spec(model, &n);
    mi->model = model;
    mi->nu = n;
    mi->dt = dt;
    mi->sleep_unit = -1;
    for (int u = 0; u < n; u++) {
        pm_layer* L = &mi->L[u];
        L->kind = sp[u].kind;
        L->act = sp[u].act;
        L->dt = dt;
        L->idx = u;
        L->inst = mi;
        L->n_in = sp[u].wi[1] ? 2 : 1;
        L->n_out = sp[u].wo[1] ? 2 : 1;
        if (L->kind != PM_MIX) L->n_in = 2, L->n_out = 1;
        for (int i = 0; i < 2; i++) L->wi[i] = sp[u].wi[i], L->wo[i] = sp[u].wo[i];
        L->npar = L->kind == PM_MIX ? pm_boff(L, L->n_out) : 0;
        L->p = (float*)calloc((size_t)L->npar + 1, sizeof(float));
        L->g = (float*)calloc((size_t)L->npar + 1, sizeof(float));
        int fan = 0;
        for (int i = 0; i < L->n_in; i++) fan += L->wi[i];
        for (int e = 0; e < L->npar; e++)
            L->p[e] = pm_hash(7u + (uint32_t)model, (uint32_t)u, (uint32_t)e) *
                      (e < pm_boff(L, 0) ? 1.3f / sqrtf((float)fan) : 0.1f);
        pm_subst(mi->in[u], sizeof mi->in[u], sp[u].in, vs_dtype_name(dt));
        pm_subst(mi->out[u], sizeof mi->out[u], sp[u].out, vs_dtype_name(dt));
        vs_pipe_unit* U = &mi->U[u];
        U->name = sp[u].name;
        U->inputs = mi->in[u];
        U->outputs = mi->out[u];
        U->forward = pm_fwd;
        if (bk & PM_BK_FULL) U->backward = pm_bwd_full;
        if (bk & PM_BK_SPLIT) U->backward_input = pm_bwd_in, U->backward_weight = pm_bwd_w;
        U->user = L;
        U->params = L->npar;
        U->flops = 2.0 * L->npar + 1;
    }
    return mi;
}

static void pm_free(pm_inst* mi)
{
    if (!mi) return;
    for (int u = 0; u < mi->nu; u++) free(mi->L[u].p), free(mi->L[u].g);
    free(mi);
}

static void pm_zero_grads(pm_inst* mi)
{
    for (int u = 0; u < mi->nu; u++) memset(mi->L[u].g, 0, (size_t)mi->L[u].npar * sizeof(float));
}

/* ---- the single-device reference ------------------------------------------ */

typedef struct pm_tens {
    char name[VS_PIPE_NAME_MAX];
    int producer; // unit, or -1: a data input
} pm_tens;

/* Names of a list ("a:f32[*,8], b") into idx[] (added to the table). */
static int pm_names(const char* list, pm_tens* T, int* nt, int producer, int* idx)
{
    int n = 0;
    const char* s = list;
    while (*s) {
        while (*s == ' ' || *s == ',') s++;
        if (!*s) break;
        char nm[VS_PIPE_NAME_MAX];
        int l = 0;
        int depth = 0;
        while (*s && (depth || *s != ',')) {
            if (*s == '[') depth++;
            if (*s == ']') depth--;
            if (l < VS_PIPE_NAME_MAX - 1) nm[l++] = *s;
            s++;
        }
        nm[l] = 0;
        char* colon = strchr(nm, ':');
        if (colon) *colon = 0;
        while (l > 0 && nm[strlen(nm) - 1] == ' ') nm[strlen(nm) - 1] = 0;
        int t = -1;
        for (int k = 0; k < *nt; k++)
            if (!strcmp(T[k].name, nm)) t = k;
        if (t < 0) {
            t = (*nt)++;
            snprintf(T[t].name, sizeof T[t].name, "%s", nm);
            T[t].producer = producer;
        }
        idx[n++] = t;
    }
    return n;
}

/* split: 0 full backward, 1 B then W per unit, 2 all units' B then all W (per mb). */
static int pm_ref_run(pm_inst* mi, int M, int sum, int split, double* loss, float* mb_loss)
{
    pm_tens T[PM_MAXT];
    int nt = 0, in_idx[PM_MAXU][VS_PIPE_MAX_IO], out_idx[PM_MAXU][VS_PIPE_MAX_IO], nin[PM_MAXU], nout[PM_MAXU];
    for (int u = 0; u < mi->nu; u++) {
        nin[u] = pm_names(mi->U[u].inputs, T, &nt, -1, in_idx[u]);
        nout[u] = pm_names(mi->U[u].outputs, T, &nt, u, out_idx[u]);
    }
    pm_data dd = {mi->model, mi->dt, 0};
    double tot = 0;
    int err = 0;
    for (int mb = 0; mb < M && !err; mb++) {
        vs_pipe_tensor V[PM_MAXT];
        void* saved[PM_MAXU];
        size_t sbytes[PM_MAXU];
        memset(V, 0, sizeof V);
        memset(saved, 0, sizeof saved);
        memset(sbytes, 0, sizeof sbytes);
        for (int t = 0; t < nt; t++) V[t].name = T[t].name;
        for (int u = 0; u < mi->nu && !err; u++) {
            vs_pipe_tensor in[VS_PIPE_MAX_IO], out[VS_PIPE_MAX_IO];
            for (int i = 0; i < nin[u]; i++) {
                int t = in_idx[u][i];
                if (T[t].producer < 0 && !V[t].data) {
                    vs_pipe_call dc;
                    memset(&dc, 0, sizeof dc);
                    dc.user = &dd, dc.unit = -1, dc.mb = mb, dc.chunk = -1, dc.out = &V[t], dc.n_out = 1;
                    if (pm_data_fn(&dc)) err = 1;
                }
                in[i] = V[t];
                in[i].grad = NULL;
            }
            for (int j = 0; j < nout[u]; j++) {
                memset(&out[j], 0, sizeof out[j]);
                out[j].name = T[out_idx[u][j]].name;
            }
            vs_pipe_call c;
            memset(&c, 0, sizeof c);
            c.user = mi->U[u].user, c.unit = u, c.mb = mb, c.chunk = -1;
            c.in = in, c.n_in = nin[u], c.out = out, c.n_out = nout[u];
            if (mi->U[u].forward(&c)) err = 1;
            for (int j = 0; j < nout[u]; j++) V[out_idx[u][j]] = out[j];
            saved[u] = c.saved;
            sbytes[u] = c.saved_bytes;
        }
        int lt = out_idx[mi->nu - 1][0];
        float lm = err ? 0 : *(const float*)V[lt].data;
        if (mb_loss) mb_loss[mb] = lm;
        tot += (double)lm;
        for (int t = 0; t < nt && !err; t++)
            if (T[t].producer >= 0) {
                size_t n = 1;
                for (int d = 0; d < V[t].ndim; d++) n *= (size_t)V[t].shape[d];
                V[t].grad = calloc(n ? n : 1, vs_dtype_size(V[t].dtype));
            }
        if (!err) *(float*)V[lt].grad = sum ? 1.0f : 1.0f / (float)M;
        int order[2 * PM_MAXU], no = 0; // (unit, part) pairs: part 0 full, 1 B, 2 W
        int part[2 * PM_MAXU];
        for (int u = mi->nu - 1; u >= 0; u--) {
            if (split == 0) order[no] = u, part[no++] = 0;
            else {
                order[no] = u, part[no++] = 1;
                if (split == 1) order[no] = u, part[no++] = 2;
            }
        }
        if (split == 2)
            for (int u = mi->nu - 1; u >= 0; u--) order[no] = u, part[no++] = 2;
        for (int q = 0; q < no && !err; q++) {
            int u = order[q];
            vs_pipe_tensor in[VS_PIPE_MAX_IO], out[VS_PIPE_MAX_IO];
            for (int i = 0; i < nin[u]; i++) in[i] = V[in_idx[u][i]];
            for (int j = 0; j < nout[u]; j++) out[j] = V[out_idx[u][j]];
            vs_pipe_call c;
            memset(&c, 0, sizeof c);
            c.user = mi->U[u].user, c.unit = u, c.mb = mb, c.chunk = -1;
            c.in = in, c.n_in = nin[u], c.out = out, c.n_out = nout[u];
            c.saved = saved[u], c.saved_bytes = sbytes[u];
            vs_pipe_fn f = part[q] == 0 ? mi->U[u].backward : part[q] == 1 ? mi->U[u].backward_input
                                                                           : mi->U[u].backward_weight;
            if (!f || f(&c)) err = 1;
        }
        for (int t = 0; t < nt; t++) free(V[t].data), free(V[t].grad);
        for (int u = 0; u < mi->nu; u++) free(saved[u]);
    }
    *loss = sum ? tot : tot / (double)M;
    return err ? -1 : 0;
}

#endif
