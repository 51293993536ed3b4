/* gpt.h - a small GPT in plain C, written for vescale as a model of
   layers (vescale.h's vs_model_desc): token and position embedding, pre-norm
   causal attention and GELU MLP blocks, a final norm and an LM head tied to the
   token embedding, trained against a cross-entropy loss. The same declaration
   runs on one device and on any PP x DP x TP mesh (Megatron TP: heads and MLP
   columns split over TP, vocab-parallel embedding and head; with the plan's
   sequence_parallel, the activations between units split over TP along the
   sequence: see gpt_sp_move).

   Include after vescale.h (no implementation needed here: the functions are
   static inline):
       static gpt_model_storage st;              // ~150 KB: static or malloc'd
       vs_model_desc model;
       gpt_model(&(gpt_config){ .vocab = 64, .seq = 16, .dim = 64, .heads = 4, .layers = 2 }, &st, &model);
       ...
       gpt_batch(&cfg, step, rows, tokens, targets);   // the global batch of a step
       vs_batch b = gpt_batch_view(rows, cfg.seq, tokens, targets);   // as vs_train_step takes it

   A 105k-parameter model (V 64, seq 16, dim 64, 4 heads, 2 layers) on gpt_batch
   with 16 rows, AdamW lr 1e-3 on one rank: loss 4.18 at step 1, 2.06 at step 50,
   1.33 at step 100; ~14 ms a step on one core (-O2).

   Units (vescale_pipe.h), in model order, with their tensors:
       "embed"      tokens:i32[*,T]        -> x0:f32[*,T,D]
       "h.i.attn"   x(2i)                  -> x(2i+1)   pre-LN causal self-attention + residual
       "h.i.mlp"    x(2i+1)                -> x(2i+2)   pre-LN MLP (D -> 4D -> D, GELU tanh) + residual
       "head"       x(2L), targets:i32[*,T] -> loss:f32[]  final LN, logits = h wte^T, mean cross-entropy
   T may be any length up to cfg.seq (wpe's rows); rows come from the inputs.

   Parameters (weights [in, out], y = x W) and their roles:
       wte [V, D] EMBEDDING (Shard(0) over TP; also the head's, tied)   wpe [T, D] OTHER
       h.i.ln1.g/.b, h.i.ln2.g/.b, lnf.g/.b [D] NORM
       h.i.attn.wq/wk/wv [D, D] COLUMN, bq/bv [D] COLUMN (bias: Shard(0)); no key bias:
         softmax ignores what it adds to a query's scores, so its gradient is
         round-off only, which AdamW would blow up into lr-sized steps that differ
         from mesh to mesh
       h.i.attn.proj [D, D] ROW, bproj [D] ROW (bias: replicated)
       h.i.mlp.fc [D, 4D] COLUMN, bfc [4D] COLUMN, fc2 [4D, D] ROW, bfc2 [D] ROW
   Under TP size t a rank holds heads [r H/t, (r+1) H/t) (the COLUMN shards are
   whole heads when t divides H) and 4D/t of the MLP's hidden units; the layer
   reads its shards from vs_layer(call)->param[i] (local_shape gives the sizes)
   and adds gradients into ->grad[i]. Replicated parameters get the same
   gradient on every TP rank: every such gradient is computed from tensors that
   are whole (after the all-reduce) on each rank. Under sequence parallelism
   they get their rank's rows' part instead, which vescale sums over TP.

   Where the units run (>>device): f32 parameters on the host run the loops
   below (blocked, vectorized: the f32 CPU model); on a GPU (a rank on the NCCL
   transport, VESCALE_NCCL: call->stream non-NULL) every tensor is device memory
   and the units run examples/gpt_kernels.h's kernels on call->stream, the
   engine's compute stream, which the vs_tp_* / vs_sp_* / vs_vocab_* calls use
   too; bf16/f16 parameters (gpt_model_dtype) run those kernels' host build on
   the host. Parameters and gradients are in vs_layer_ctx.dtype / grad_dtype;
   activations stay f32. The kernels' scratch is the engine's saved memory: no
   allocation in a step. The host build of the kernels gives the loops' bits in
   f32; a device's block-ordered reductions differ by rounding
   (tests/test_gpt_nccl.c: PP2 x DP2 x TP2 within 1e-5 of one host rank).

   Outside vescale's engine (call->_rt NULL: a test driving the units by hand)
   forward writes each output into call->out[i].data, which the caller sized,
   and keeps its scratch in malloc'd memory at call->saved that the caller
   frees after the backward. */
#ifndef GPT_H
#define GPT_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vescale.h"
#include "gpt_kernels.h"

#ifndef GPT_MAX_LAYERS // (a program may ask for more: bench/gpu_model.c's published shapes)
#define GPT_MAX_LAYERS 24
#endif
#define GPT_MAX_UNITS (2 + 2 * GPT_MAX_LAYERS)

typedef struct gpt_config {
    int vocab;  // V
    int seq;    // T: positions (wpe rows)
    int dim;    // D
    int heads;  // H (divides D)
    int layers; // L blocks (1..GPT_MAX_LAYERS)
    uint64_t seed; // the model's init seed (vs_model_desc.seed)
} gpt_config;

enum { GPT_EMBED = 0, GPT_ATTN, GPT_MLP, GPT_HEAD };

/* A layer's own pointer (vs_layer_decl.user, vs_layer_ctx.user). */
typedef struct gpt_unit {
    const gpt_config* cfg;
    int kind;  // GPT_EMBED ...
    int block; // i of h.i.*; -1 for embed and head
} gpt_unit;

/* Everything a model description points at. Keep it alive while the model is used. */
typedef struct gpt_model_storage {
    gpt_config cfg;
    vs_layer_decl layers[GPT_MAX_UNITS];
    gpt_unit units[GPT_MAX_UNITS];
    char unit_name[GPT_MAX_UNITS][24];
    char inputs[GPT_MAX_UNITS][64];
    char outputs[GPT_MAX_UNITS][64];
    char param_name[GPT_MAX_UNITS][VS_LAYER_MAX_PARAMS][32];
} gpt_model_storage;

#define GPT__FN static inline
#ifdef __cplusplus
#define GPT__RESTRICT __restrict
#else
#define GPT__RESTRICT restrict
#endif

// >>matmul ---------------------------------------------------------------------
/* y[0..n) += a0 x0 + a1 x1 + a2 x2 + a3 x3, added in that order (the same bits
   as four axpys one after the other). Written 8 wide so that -O2's straight-line
   vectorizer packs it (-O2 does not vectorize loops of unknown trip counts). */
GPT__FN void gpt__axpy4(int64_t n, const float* a, const float* GPT__RESTRICT x0, const float* GPT__RESTRICT x1,
                        const float* GPT__RESTRICT x2, const float* GPT__RESTRICT x3, float* GPT__RESTRICT y)
{
    const float a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
    int64_t j = 0;
#define GPT__AX(o) y[j + o] = y[j + o] + a0 * x0[j + o] + a1 * x1[j + o] + a2 * x2[j + o] + a3 * x3[j + o]
    for (; j + 8 <= n; j += 8) {
        GPT__AX(0); GPT__AX(1); GPT__AX(2); GPT__AX(3); GPT__AX(4); GPT__AX(5); GPT__AX(6); GPT__AX(7);
    }
    for (; j < n; j++) GPT__AX(0);
#undef GPT__AX
}

GPT__FN void gpt__axpy(int64_t n, float a, const float* GPT__RESTRICT x, float* GPT__RESTRICT y)
{
    int64_t j = 0;
#define GPT__AX(o) y[j + o] += a * x[j + o]
    for (; j + 8 <= n; j += 8) {
        GPT__AX(0); GPT__AX(1); GPT__AX(2); GPT__AX(3); GPT__AX(4); GPT__AX(5); GPT__AX(6); GPT__AX(7);
    }
    for (; j < n; j++) GPT__AX(0);
#undef GPT__AX
}

/* c[0..n) += sum over k in [0, kn) of a[k * as] * b[k * ldb + 0..n), k in order. */
GPT__FN void gpt__rowblock(int64_t kn, int64_t n, const float* a, int64_t as, const float* b, int64_t ldb, float* c)
{
    int64_t k = 0;
    for (; k + 4 <= kn; k += 4) {
        float av[4] = {a[k * as], a[(k + 1) * as], a[(k + 2) * as], a[(k + 3) * as]};
        gpt__axpy4(n, av, b + k * ldb, b + (k + 1) * ldb, b + (k + 2) * ldb, b + (k + 3) * ldb, c);
    }
    for (; k < kn; k++) gpt__axpy(n, a[k * as], b + k * ldb, c);
}

/* C[M,N] += A[M,K] B[K,N], cache-blocked (rows of C stay in L1 across a K
   block; B's block is reused by every row of the M block). */
GPT__FN void gpt_mm_nn(int64_t M, int64_t K, int64_t N, const float* GPT__RESTRICT A, const float* GPT__RESTRICT B,
                       float* GPT__RESTRICT C)
{
    const int64_t MB = 32, KB = 128, NB = 512;
    for (int64_t i0 = 0; i0 < M; i0 += MB)
        for (int64_t k0 = 0; k0 < K; k0 += KB)
            for (int64_t j0 = 0; j0 < N; j0 += NB) {
                int64_t i1 = i0 + MB < M ? i0 + MB : M, k1 = k0 + KB < K ? k0 + KB : K;
                int64_t j1 = j0 + NB < N ? j0 + NB : N;
                for (int64_t i = i0; i < i1; i++)
                    gpt__rowblock(k1 - k0, j1 - j0, A + i * K + k0, 1, B + k0 * N + j0, N, C + i * N + j0);
            }
}

/* C[M,N] += A[M,K] B[N,K]^T: B transposed a block of columns at a time, then
   the row-times-block loop of gpt_mm_nn (dot products would not vectorize
   without reassociating their sums). */
GPT__FN void gpt_mm_nt(int64_t M, int64_t K, int64_t N, const float* GPT__RESTRICT A, const float* GPT__RESTRICT B,
                       float* GPT__RESTRICT C)
{
    enum { NB = 128, KB = 64 };
    float bt[KB * NB]; // B^T block: [kb, nb], 32 KiB of stack
    for (int64_t j0 = 0; j0 < N; j0 += NB)
        for (int64_t k0 = 0; k0 < K; k0 += KB) {
            int64_t j1 = j0 + NB < N ? j0 + NB : N, k1 = k0 + KB < K ? k0 + KB : K, nb = j1 - j0;
            for (int64_t j = j0; j < j1; j++)
                for (int64_t k = k0; k < k1; k++) bt[(k - k0) * nb + (j - j0)] = B[j * K + k];
            for (int64_t i = 0; i < M; i++) gpt__rowblock(k1 - k0, nb, A + i * K + k0, 1, bt, nb, C + i * N + j0);
        }
}

/* C[M,N] += A[K,M]^T B[K,N] (weight gradients: x^T dy). */
GPT__FN void gpt_mm_tn(int64_t M, int64_t K, int64_t N, const float* GPT__RESTRICT A, const float* GPT__RESTRICT B,
                       float* GPT__RESTRICT C)
{
    const int64_t MB = 64, KB = 64, NB = 512;
    for (int64_t m0 = 0; m0 < M; m0 += MB)
        for (int64_t j0 = 0; j0 < N; j0 += NB)
            for (int64_t k0 = 0; k0 < K; k0 += KB) {
                int64_t m1 = m0 + MB < M ? m0 + MB : M, k1 = k0 + KB < K ? k0 + KB : K;
                int64_t j1 = j0 + NB < N ? j0 + NB : N;
                for (int64_t m = m0; m < m1; m++)
                    gpt__rowblock(k1 - k0, j1 - j0, A + k0 * M + m, M, B + k0 * N + j0, N, C + m * N + j0);
            }
}

// >>kernels --------------------------------------------------------------------

#define GPT_LN_EPS 1e-5f

/* y = (x - mean) * rstd * g + b per row of D; keeps mean and rstd. */
GPT__FN void gpt_ln_forward(int64_t n, int64_t D, const float* x, const float* g, const float* b, float* y,
                            float* mean, float* rstd)
{
    for (int64_t i = 0; i < n; i++) {
        const float* r = x + i * D;
        float m = 0, v = 0;
        for (int64_t d = 0; d < D; d++) m += r[d];
        m /= (float)D;
        for (int64_t d = 0; d < D; d++) v += (r[d] - m) * (r[d] - m);
        v /= (float)D;
        float s = 1.0f / sqrtf(v + GPT_LN_EPS);
        for (int64_t d = 0; d < D; d++) y[i * D + d] = (r[d] - m) * s * g[d] + b[d];
        mean[i] = m, rstd[i] = s;
    }
}

/* dx += d/dx of the norm, given dy. */
GPT__FN void gpt_ln_backward_input(int64_t n, int64_t D, const float* x, const float* g, const float* mean,
                                   const float* rstd, const float* dy, float* dx)
{
    for (int64_t i = 0; i < n; i++) {
        const float *r = x + i * D, *d_ = dy + i * D;
        float m = mean[i], s = rstd[i], a = 0, c = 0;
        for (int64_t d = 0; d < D; d++) {
            float xh = (r[d] - m) * s, dxh = d_[d] * g[d];
            a += dxh, c += dxh * xh;
        }
        a /= (float)D, c /= (float)D;
        for (int64_t d = 0; d < D; d++) {
            float xh = (r[d] - m) * s, dxh = d_[d] * g[d];
            dx[i * D + d] += s * (dxh - a - xh * c);
        }
    }
}

GPT__FN void gpt_ln_backward_weight(int64_t n, int64_t D, const float* x, const float* mean, const float* rstd,
                                    const float* dy, float* dg, float* db)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t d = 0; d < D; d++) {
            float xh = (x[i * D + d] - mean[i]) * rstd[i];
            dg[d] += dy[i * D + d] * xh;
            db[d] += dy[i * D + d];
        }
}

/* y[i, :] += b */
GPT__FN void gpt_add_bias(int64_t n, int64_t N, const float* b, float* y)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < N; j++) y[i * N + j] += b[j];
}

/* db += sum over rows of dy */
GPT__FN void gpt_bias_grad(int64_t n, int64_t N, const float* dy, float* db)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < N; j++) db[j] += dy[i * N + j];
}

#define GPT_GELU_C 0.7978845608028654f // sqrt(2 / pi)

GPT__FN float gpt_gelu(float a)
{
    return 0.5f * a * (1.0f + tanhf(GPT_GELU_C * (a + 0.044715f * a * a * a)));
}

GPT__FN float gpt_gelu_grad(float a)
{
    float t = tanhf(GPT_GELU_C * (a + 0.044715f * a * a * a));
    return 0.5f * (1.0f + t) + 0.5f * a * (1.0f - t * t) * GPT_GELU_C * (1.0f + 3.0f * 0.044715f * a * a);
}

/* Causal attention of Hl heads of hd dims over B rows of T positions. q, k, v, y:
   [B*T, Hl*hd]; P: [B, Hl, T, T] the probabilities (upper triangle zero). */
GPT__FN void gpt_attention_forward(int64_t B, int64_t T, int64_t Hl, int64_t hd, const float* q, const float* k,
                              const float* v, float* P, float* y)
{
    int64_t W = Hl * hd;
    float sc = 1.0f / sqrtf((float)hd);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hl; h++)
            for (int64_t t = 0; t < T; t++) {
                const float* qt = q + (b * T + t) * W + h * hd;
                float* p = P + ((b * Hl + h) * T + t) * T;
                float mx = -INFINITY;
                for (int64_t s = 0; s <= t; s++) {
                    const float* ks = k + (b * T + s) * W + h * hd;
                    float a = 0;
                    for (int64_t j = 0; j < hd; j++) a += qt[j] * ks[j];
                    p[s] = a * sc;
                    if (p[s] > mx) mx = p[s];
                }
                float sum = 0;
                for (int64_t s = 0; s <= t; s++) sum += (p[s] = expf(p[s] - mx));
                for (int64_t s = 0; s <= t; s++) p[s] /= sum;
                for (int64_t s = t + 1; s < T; s++) p[s] = 0;
                float* yt = y + (b * T + t) * W + h * hd;
                for (int64_t j = 0; j < hd; j++) yt[j] = 0;
                for (int64_t s = 0; s <= t; s++) {
                    const float* vs = v + (b * T + s) * W + h * hd;
                    for (int64_t j = 0; j < hd; j++) yt[j] += p[s] * vs[j];
                }
            }
}

/* dq, dk, dv (zeroed by the caller) from dy. */
GPT__FN void gpt_attention_backward(int64_t B, int64_t T, int64_t Hl, int64_t hd, const float* q, const float* k,
                               const float* v, const float* P, const float* dy, float* dq, float* dk, float* dv,
                               float* dp /* T scratch */)
{
    int64_t W = Hl * hd;
    float sc = 1.0f / sqrtf((float)hd);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hl; h++)
            for (int64_t t = 0; t < T; t++) {
                const float* p = P + ((b * Hl + h) * T + t) * T;
                const float* dyt = dy + (b * T + t) * W + h * hd;
                float dot = 0;
                for (int64_t s = 0; s <= t; s++) {
                    const float* vs = v + (b * T + s) * W + h * hd;
                    float* dvs = dv + (b * T + s) * W + h * hd;
                    float a = 0;
                    for (int64_t j = 0; j < hd; j++) a += dyt[j] * vs[j], dvs[j] += p[s] * dyt[j];
                    dp[s] = a;
                    dot += p[s] * a;
                }
                const float* qt = q + (b * T + t) * W + h * hd;
                float* dqt = dq + (b * T + t) * W + h * hd;
                for (int64_t s = 0; s <= t; s++) {
                    float ds = p[s] * (dp[s] - dot) * sc;
                    const float* ks = k + (b * T + s) * W + h * hd;
                    float* dks = dk + (b * T + s) * W + h * hd;
                    for (int64_t j = 0; j < hd; j++) dqt[j] += ds * ks[j], dks[j] += ds * qt[j];
                }
            }
}

/* The units as kernel sequences (>>device, below): a device, or bf16/f16 parameters. */
GPT__FN int gpt__kmode(const vs_pipe_call* c);
GPT__FN vs_result gpt__kembed_forward(vs_pipe_call* c, int mode);
GPT__FN vs_result gpt__kembed_backward(vs_pipe_call* c, int mode);
GPT__FN vs_result gpt__kattn_forward(vs_pipe_call* c, int mode);
GPT__FN vs_result gpt__kattn_backward_input(vs_pipe_call* c, int mode);
GPT__FN vs_result gpt__kattn_backward_weight(vs_pipe_call* c, int mode);
GPT__FN vs_result gpt__kmlp_forward(vs_pipe_call* c, int mode);
GPT__FN vs_result gpt__kmlp_backward_input(vs_pipe_call* c, int mode);
GPT__FN vs_result gpt__kmlp_backward_weight(vs_pipe_call* c, int mode);
GPT__FN vs_result gpt__khead_forward(vs_pipe_call* c, int mode);
GPT__FN vs_result gpt__khead_backward(vs_pipe_call* c, int mode);

// >>units ----------------------------------------------------------------------

/* An output: the engine's memory, or (driven by hand) the caller's. */
GPT__FN vs_result gpt_output(vs_pipe_call* c, int i, vs_dtype dt, int ndim, const int64_t* shape, void** data)
{
    if (c->_rt) return vs_pipe_output(c, i, dt, ndim, shape, data);
    if (i >= c->n_out || !c->out[i].data) return vs_set_error(VS_ERR_NULL, "gpt: output %d has no memory", i);
    c->out[i].dtype = dt, c->out[i].ndim = ndim;
    for (int d = 0; d < ndim; d++) c->out[i].shape[d] = shape[d];
    *data = c->out[i].data;
    return VS_OK;
}

/* Forward's scratch for backward: the engine's, or malloc'd (the caller frees call->saved). */
GPT__FN vs_result gpt_save(vs_pipe_call* c, size_t bytes, float** data)
{
    void* p = NULL;
    *data = NULL;
    if (c->_rt) {
        vs_result r = vs_pipe_save(c, bytes, &p);
        if (r) return r;
    } else {
        p = calloc(1, bytes ? bytes : 1);
        if (!p) return vs_set_error(VS_ERR_NOMEM, "gpt: %zu bytes of scratch", bytes);
        c->saved = p, c->saved_bytes = bytes;
    }
    *data = (float*)p;
    return VS_OK;
}

/* The activation input: f32 [rows, T, D]. */
GPT__FN vs_result gpt_check_act(const char* who, const vs_pipe_tensor* t, int64_t D)
{
    if (t->dtype != VS_F32 || t->ndim != 3 || t->shape[2] != D)
        return vs_set_error(VS_ERR_MISMATCH, "gpt %s: input \"%s\" must be f32 [rows, T, %lld]", who, t->name,
                            (long long)D);
    return VS_OK;
}

GPT__FN vs_result gpt_check_ids(const char* who, const vs_pipe_tensor* t, int64_t maxT)
{
    if (t->dtype != VS_I32 || t->ndim != 2 || t->shape[1] > maxT)
        return vs_set_error(VS_ERR_MISMATCH, "gpt %s: input \"%s\" must be i32 [rows, T <= %lld]", who, t->name,
                            (long long)maxT);
    return VS_OK;
}

/* Local widths from the shards: wq's columns (D/t) and fc's columns (4D/t). */
GPT__FN vs_result gpt_local_width(const vs_layer_ctx* L, int pi, int64_t full, int64_t unit, int64_t* out)
{
    int64_t w = L->local_shape[pi][1];
    if (w <= 0 || w > full || w % unit)
        return vs_set_error(VS_ERR_MISMATCH, "gpt: a shard of %lld columns of %lld (whole units of %lld needed)",
                            (long long)w, (long long)full, (long long)unit);
    *out = w;
    return VS_OK;
}

/* Sequence parallelism (vs_layer_ctx.sp): the activations between units are
   this TP rank's T/t positions of each sample ([B, T/t, D], dim 1 split). A
   block norms its own rows, gathers them whole for its column-parallel part and
   reduce-scatters its row-parallel part's partial sums back to its rows; the
   backward does the reverse. The TP-replicated parameters (norms, wpe, the
   row-parallel biases) take gradients from this rank's rows only: vescale sums
   them over TP. These move [B, T, D] f32 between the two forms. */
GPT__FN vs_result gpt_sp_move(const vs_layer_ctx* L, int k, int64_t B, int64_t T, int64_t D, const float* in,
                              float* out)
{
    int64_t sh[3] = {B, T, D};
    switch (k) {
    case 0: return vs_sp_gather_forward(L->tp, VS_F32, 3, sh, 1, in, out);    // rows -> whole
    case 1: return vs_sp_scatter_forward(L->tp, VS_F32, 3, sh, 1, in, out);   // partial whole -> summed rows
    case 2: return vs_sp_scatter_backward(L->tp, VS_F32, 3, sh, 1, in, out);  // a gradient's rows -> whole
    default: return vs_sp_gather_backward(L->tp, VS_F32, 3, sh, 1, in, out);  // a partial whole gradient -> summed rows
    }
}

/* The whole sequence T of an activation holding Tl positions; T % t checked where
   the tokens come in (embed). */
GPT__FN int64_t gpt_full_T(const vs_layer_ctx* L, int64_t Tl) { return L->sp ? Tl * L->tp_size : Tl; }

// embed: x0 = wte[tokens] + wpe[pos]   params: 0 wte [V, D] (Shard(0) under TP), 1 wpe [T, D]

GPT__FN vs_result gpt_embed_forward(vs_pipe_call* c)
{
    int km = gpt__kmode(c);
    if (km >= 0) return gpt__kembed_forward(c, km);
    vs_layer_ctx* L = vs_layer(c);
    const gpt_unit* u = (const gpt_unit*)L->user;
    int64_t V = u->cfg->vocab, D = u->cfg->dim;
    vs_result r = gpt_check_ids("embed", &c->in[0], u->cfg->seq);
    if (r) return r;
    int64_t B = c->in[0].shape[0], T = c->in[0].shape[1], n = B * T, sh[3] = {B, T, D};
    const int32_t* ids = (const int32_t*)c->in[0].data;
    const float *wte = (const float*)L->param[0], *wpe = (const float*)L->param[1];
    float* x;
    if (L->sp) {
        if (T % L->tp_size)
            return vs_set_error(VS_ERR_INVALID, "gpt embed: sequence parallelism splits T = %lld over TP = %d unevenly",
                                (long long)T, L->tp_size);
        int64_t Tl = T / L->tp_size, v0 = 0, Vl = 0, p0 = L->tp_rank * Tl;
        sh[1] = Tl;
        if ((r = gpt_output(c, 0, VS_F32, 3, sh, (void**)&x))) return r;
        if ((r = vs_vocab_range(L->tp, V, &v0, &Vl))) return r;
        float* part = (float*)calloc((size_t)(n * D), sizeof(float)); // this rank's vocab rows, every position
        if (!part) return vs_set_error(VS_ERR_NOMEM, "gpt embed: scratch");
        for (int64_t i = 0; i < n && !r; i++) {
            if (ids[i] < 0 || ids[i] >= V)
                r = vs_set_error(VS_ERR_INVALID, "gpt embed: token %d at %lld outside [0, %lld)", ids[i], (long long)i,
                                 (long long)V);
            else if (ids[i] >= v0 && ids[i] < v0 + Vl)
                memcpy(part + i * D, wte + (ids[i] - v0) * D, sizeof(float) * (size_t)D);
        }
        if (!r) r = gpt_sp_move(L, 1, B, T, D, part, x);
        free(part);
        for (int64_t b = 0; b < B && !r; b++)
            for (int64_t t = 0; t < Tl; t++)
                for (int64_t d = 0; d < D; d++) x[(b * Tl + t) * D + d] += wpe[(p0 + t) * D + d];
        return r;
    }
    if ((r = gpt_output(c, 0, VS_F32, 3, sh, (void**)&x))) return r;
    if (L->tp) {
        if ((r = vs_vocab_embedding_forward(L->tp, wte, V, D, ids, n, x))) return r;
    } else {
        for (int64_t i = 0; i < n; i++) {
            if (ids[i] < 0 || ids[i] >= V)
                return vs_set_error(VS_ERR_INVALID, "gpt embed: token %d at %lld outside [0, %lld)", ids[i],
                                    (long long)i, (long long)V);
            memcpy(x + i * D, wte + ids[i] * D, sizeof(float) * (size_t)D);
        }
    }
    for (int64_t i = 0; i < n; i++)
        for (int64_t d = 0; d < D; d++) x[i * D + d] += wpe[(i % T) * D + d];
    return VS_OK;
}

GPT__FN vs_result gpt_embed_backward(vs_pipe_call* c)
{
    int km = gpt__kmode(c);
    if (km >= 0) return gpt__kembed_backward(c, km);
    vs_layer_ctx* L = vs_layer(c);
    const gpt_unit* u = (const gpt_unit*)L->user;
    int64_t V = u->cfg->vocab, D = u->cfg->dim;
    int64_t B = c->in[0].shape[0], T = c->in[0].shape[1], n = B * T;
    const int32_t* ids = (const int32_t*)c->in[0].data;
    const float* dx = (const float*)c->out[0].grad;
    float *gwte = (float*)L->grad[0], *gwpe = (float*)L->grad[1];
    if (L->sp) { // dx: this rank's positions; wte's rows want every position's, wpe's its own
        int64_t Tl = T / L->tp_size, p0 = L->tp_rank * Tl;
        float* full = (float*)malloc(sizeof(float) * (size_t)(n * D));
        if (!full) return vs_set_error(VS_ERR_NOMEM, "gpt embed: backward scratch");
        vs_result r = gpt_sp_move(L, 2, B, T, D, dx, full);
        if (!r) r = vs_vocab_embedding_backward(L->tp, full, ids, n, V, D, gwte);
        free(full);
        for (int64_t b = 0; b < B && !r; b++)
            for (int64_t t = 0; t < Tl; t++)
                for (int64_t d = 0; d < D; d++) gwpe[(p0 + t) * D + d] += dx[(b * Tl + t) * D + d];
        return r;
    }
    if (L->tp) {
        vs_result r = vs_vocab_embedding_backward(L->tp, dx, ids, n, V, D, gwte);
        if (r) return r;
    } else {
        for (int64_t i = 0; i < n; i++)
            for (int64_t d = 0; d < D; d++) gwte[ids[i] * D + d] += dx[i * D + d];
    }
    for (int64_t i = 0; i < n; i++)
        for (int64_t d = 0; d < D; d++) gwpe[(i % T) * D + d] += dx[i * D + d];
    return VS_OK;
}

/* attention block: params 0 ln1.g 1 ln1.b 2 wq 3 wk 4 wv 5 bq 6 bv 7 proj 8 bproj.
   Saved: ln [n,D] mean [n] rstd [n] q k v [n,W] P [B,Hl,T,T] y [n,W], then what B
   leaves for W: dq dk dv [n,W], dln [n,D] (whole: after the TP sum). Under
   sequence parallelism also lnl [n,D] (this rank's rows of ln, then of dln
   summed) and dof [n,D] (the output's gradient, whole); n counts the whole
   sequence, mean/rstd this rank's rows. */
typedef struct gpt_attn_buf {
    float *ln, *mean, *rstd, *q, *k, *v, *P, *y, *dq, *dk, *dv, *dln, *lnl, *dof;
} gpt_attn_buf;

GPT__FN size_t gpt_attn_layout(float* base, int64_t B, int64_t T, int64_t D, int64_t Hl, int64_t W, int sp,
                               gpt_attn_buf* s)
{
    int64_t n = B * T, at = 0;
    float* p = base;
#define GPT__TAKE(f, cnt) (s->f = p ? p + at : NULL, at += (cnt))
    GPT__TAKE(ln, n * D), GPT__TAKE(mean, n), GPT__TAKE(rstd, n);
    GPT__TAKE(q, n * W), GPT__TAKE(k, n * W), GPT__TAKE(v, n * W);
    GPT__TAKE(P, B * Hl * T * T), GPT__TAKE(y, n * W);
    GPT__TAKE(dq, n * W), GPT__TAKE(dk, n * W), GPT__TAKE(dv, n * W), GPT__TAKE(dln, n * D);
    GPT__TAKE(lnl, sp ? n * D : 0), GPT__TAKE(dof, sp ? n * D : 0);
#undef GPT__TAKE
    return sizeof(float) * (size_t)at;
}

typedef struct gpt_attn_dims {
    int64_t B, T, n, D, W, Hl, hd, Tl, nl; // T, n: the whole sequence; Tl, nl: this rank's rows (sp)
} gpt_attn_dims;

GPT__FN vs_result gpt_attn_dims_of(vs_pipe_call* c, gpt_attn_dims* d)
{
    vs_layer_ctx* L = vs_layer(c);
    const gpt_unit* u = (const gpt_unit*)L->user;
    d->D = u->cfg->dim, d->hd = u->cfg->dim / u->cfg->heads;
    vs_result r = gpt_check_act("attn", &c->in[0], d->D);
    if (r) return r;
    if ((r = gpt_local_width(L, 2, d->D, d->hd, &d->W))) return r;
    d->B = c->in[0].shape[0], d->Tl = c->in[0].shape[1], d->T = gpt_full_T(L, d->Tl);
    d->n = d->B * d->T, d->nl = d->B * d->Tl, d->Hl = d->W / d->hd;
    if (d->T > u->cfg->seq)
        return vs_set_error(VS_ERR_MISMATCH, "gpt attn: T %lld > seq %d", (long long)d->T, u->cfg->seq);
    return VS_OK;
}

GPT__FN vs_result gpt_attn_forward(vs_pipe_call* c)
{
    int km = gpt__kmode(c);
    if (km >= 0) return gpt__kattn_forward(c, km);
    vs_layer_ctx* L = vs_layer(c);
    gpt_attn_dims d;
    memset(&d, 0, sizeof d);
    vs_result r = gpt_attn_dims_of(c, &d);
    if (r) return r;
    int64_t sh[3] = {d.B, d.Tl, d.D}, n = d.n, nl = d.nl, D = d.D, W = d.W;
    gpt_attn_buf s;
    float *base = NULL, *out = NULL;
    if ((r = gpt_save(c, gpt_attn_layout(NULL, d.B, d.T, D, d.Hl, W, L->sp, &s), &base))) return r;
    gpt_attn_layout(base, d.B, d.T, D, d.Hl, W, L->sp, &s);
    const float* x = (const float*)c->in[0].data;
    float* const* P = (float* const*)L->param;
    gpt_ln_forward(nl, D, x, P[0], P[1], L->sp ? s.lnl : s.ln, s.mean, s.rstd);
    if (L->sp && (r = gpt_sp_move(L, 0, d.B, d.T, D, s.lnl, s.ln))) return r;
    float* qkv[3] = {s.q, s.k, s.v};
    for (int j = 0; j < 3; j++) {
        memset(qkv[j], 0, sizeof(float) * (size_t)(n * W));
        gpt_mm_nn(n, D, W, s.ln, P[2 + j], qkv[j]);
        if (j != 1) gpt_add_bias(n, W, P[j ? 6 : 5], qkv[j]);
    }
    gpt_attention_forward(d.B, d.T, d.Hl, d.hd, s.q, s.k, s.v, s.P, s.y);
    if ((r = gpt_output(c, 0, VS_F32, 3, sh, (void**)&out))) return r;
    if (L->sp) { // the partial sums whole, then this rank's rows of their sum
        memset(s.dof, 0, sizeof(float) * (size_t)(n * D)); // (its room until the backward)
        gpt_mm_nn(n, W, D, s.y, P[7], s.dof);
        if ((r = gpt_sp_move(L, 1, d.B, d.T, D, s.dof, out))) return r;
    } else {
        memset(out, 0, sizeof(float) * (size_t)(n * D));
        gpt_mm_nn(n, W, D, s.y, P[7], out); // partial over TP
        if (L->tp && (r = vs_tp_reduce_forward(L->tp, out, (size_t)(n * D), VS_F32))) return r;
    }
    gpt_add_bias(nl, D, P[8], out); // once, after the sum
    for (int64_t i = 0; i < nl * D; i++) out[i] += x[i];
    return VS_OK;
}

GPT__FN vs_result gpt_attn_backward_input(vs_pipe_call* c)
{
    int km = gpt__kmode(c);
    if (km >= 0) return gpt__kattn_backward_input(c, km);
    vs_layer_ctx* L = vs_layer(c);
    gpt_attn_dims d;
    memset(&d, 0, sizeof d);
    vs_result r = gpt_attn_dims_of(c, &d);
    if (r) return r;
    int64_t n = d.n, nl = d.nl, D = d.D, W = d.W;
    gpt_attn_buf s;
    gpt_attn_layout((float*)c->saved, d.B, d.T, D, d.Hl, W, L->sp, &s);
    float* const* P = (float* const*)L->param;
    const float* x = (const float*)c->in[0].data;
    const float* dout = (const float*)c->out[0].grad;
    float* dx = (float*)c->in[0].grad;
    if (L->sp && (r = gpt_sp_move(L, 2, d.B, d.T, D, dout, s.dof))) return r;
    const float* dfull = L->sp ? s.dof : dout;
    float* dy = (float*)calloc((size_t)(n * W + d.T), sizeof(float));
    if (!dy) return vs_set_error(VS_ERR_NOMEM, "gpt attn: backward scratch");
    gpt_mm_nt(n, D, W, dfull, P[7], dy); // dy = dout proj^T
    memset(s.dq, 0, sizeof(float) * (size_t)(3 * n * W));
    gpt_attention_backward(d.B, d.T, d.Hl, d.hd, s.q, s.k, s.v, s.P, dy, s.dq, s.dk, s.dv, dy + n * W);
    free(dy);
    memset(s.dln, 0, sizeof(float) * (size_t)(n * D));
    const float* g3[3] = {s.dq, s.dk, s.dv};
    for (int j = 0; j < 3; j++) gpt_mm_nt(n, W, D, g3[j], P[2 + j], s.dln);
    if (L->sp) r = gpt_sp_move(L, 3, d.B, d.T, D, s.dln, s.lnl); // this rank's rows, summed
    else if (L->tp) r = vs_tp_copy_backward(L->tp, s.dln, (size_t)(n * D), VS_F32);
    if (r) return r;
    for (int64_t i = 0; i < nl * D; i++) dx[i] += dout[i]; // the residual
    gpt_ln_backward_input(nl, D, x, P[0], s.mean, s.rstd, L->sp ? s.lnl : s.dln, dx);
    return VS_OK;
}

GPT__FN vs_result gpt_attn_backward_weight(vs_pipe_call* c)
{
    int km = gpt__kmode(c);
    if (km >= 0) return gpt__kattn_backward_weight(c, km);
    vs_layer_ctx* L = vs_layer(c);
    gpt_attn_dims d;
    memset(&d, 0, sizeof d);
    vs_result r = gpt_attn_dims_of(c, &d);
    if (r) return r;
    int64_t n = d.n, nl = d.nl, D = d.D, W = d.W;
    gpt_attn_buf s;
    gpt_attn_layout((float*)c->saved, d.B, d.T, D, d.Hl, W, L->sp, &s);
    float* const* G = (float* const*)L->grad;
    const float* x = (const float*)c->in[0].data;
    const float* dout = (const float*)c->out[0].grad;
    gpt_ln_backward_weight(nl, D, x, s.mean, s.rstd, L->sp ? s.lnl : s.dln, G[0], G[1]);
    const float* g3[3] = {s.dq, s.dk, s.dv};
    for (int j = 0; j < 3; j++) {
        gpt_mm_tn(D, n, W, s.ln, g3[j], G[2 + j]);
        if (j != 1) gpt_bias_grad(n, W, g3[j], G[j ? 6 : 5]);
    }
    gpt_mm_tn(W, n, D, s.y, L->sp ? s.dof : dout, G[7]);
    gpt_bias_grad(nl, D, dout, G[8]);
    return VS_OK;
}

GPT__FN vs_result gpt_attn_backward(vs_pipe_call* c)
{
    vs_result r = gpt_attn_backward_input(c);
    return r ? r : gpt_attn_backward_weight(c);
}

/* MLP block: params 0 ln2.g 1 ln2.b 2 fc 3 bfc 4 fc2 5 bfc2. Saved: ln [n,D] mean
   rstd [n] a z [n,F] then da [n,F] dln [n,D] for W; under sequence parallelism
   also lnl and dof [n,D] as the attention block's. */
typedef struct gpt_mlp_buf {
    float *ln, *mean, *rstd, *a, *z, *da, *dln, *lnl, *dof;
} gpt_mlp_buf;

GPT__FN size_t gpt_mlp_layout(float* base, int64_t n, int64_t D, int64_t F, int sp, gpt_mlp_buf* s)
{
    int64_t at = 0;
    float* p = base;
#define GPT__TAKE(f, cnt) (s->f = p ? p + at : NULL, at += (cnt))
    GPT__TAKE(ln, n * D), GPT__TAKE(mean, n), GPT__TAKE(rstd, n);
    GPT__TAKE(a, n * F), GPT__TAKE(z, n * F), GPT__TAKE(da, n * F), GPT__TAKE(dln, n * D);
    GPT__TAKE(lnl, sp ? n * D : 0), GPT__TAKE(dof, sp ? n * D : 0);
#undef GPT__TAKE
    return sizeof(float) * (size_t)at;
}

/* n: rows of the whole sequence, nl: this rank's (sp), B and T whole. */
GPT__FN vs_result gpt_mlp_dims(vs_pipe_call* c, int64_t* n, int64_t* nl, int64_t* B, int64_t* T, int64_t* D, int64_t* F)
{
    vs_layer_ctx* L = vs_layer(c);
    const gpt_unit* u = (const gpt_unit*)L->user;
    *D = u->cfg->dim;
    vs_result r = gpt_check_act("mlp", &c->in[0], *D);
    if (r) return r;
    if ((r = gpt_local_width(L, 2, 4 * *D, 1, F))) return r;
    *B = c->in[0].shape[0], *T = gpt_full_T(L, c->in[0].shape[1]);
    *n = *B * *T, *nl = *B * c->in[0].shape[1];
    return VS_OK;
}

GPT__FN vs_result gpt_mlp_forward(vs_pipe_call* c)
{
    int km = gpt__kmode(c);
    if (km >= 0) return gpt__kmlp_forward(c, km);
    vs_layer_ctx* L = vs_layer(c);
    int64_t n = 0, nl = 0, B = 0, T = 0, D = 0, F = 0;
    vs_result r = gpt_mlp_dims(c, &n, &nl, &B, &T, &D, &F);
    if (r) return r;
    gpt_mlp_buf s;
    float *base = NULL, *out = NULL;
    if ((r = gpt_save(c, gpt_mlp_layout(NULL, n, D, F, L->sp, &s), &base))) return r;
    gpt_mlp_layout(base, n, D, F, L->sp, &s);
    float* const* P = (float* const*)L->param;
    const float* x = (const float*)c->in[0].data;
    gpt_ln_forward(nl, D, x, P[0], P[1], L->sp ? s.lnl : s.ln, s.mean, s.rstd);
    if (L->sp && (r = gpt_sp_move(L, 0, B, T, D, s.lnl, s.ln))) return r;
    memset(s.a, 0, sizeof(float) * (size_t)(n * F));
    gpt_mm_nn(n, D, F, s.ln, P[2], s.a);
    gpt_add_bias(n, F, P[3], s.a);
    for (int64_t i = 0; i < n * F; i++) s.z[i] = gpt_gelu(s.a[i]);
    int64_t sh[3] = {c->in[0].shape[0], c->in[0].shape[1], D};
    if ((r = gpt_output(c, 0, VS_F32, 3, sh, (void**)&out))) return r;
    if (L->sp) {
        memset(s.dof, 0, sizeof(float) * (size_t)(n * D));
        gpt_mm_nn(n, F, D, s.z, P[4], s.dof);
        if ((r = gpt_sp_move(L, 1, B, T, D, s.dof, out))) return r;
    } else {
        memset(out, 0, sizeof(float) * (size_t)(n * D));
        gpt_mm_nn(n, F, D, s.z, P[4], out);
        if (L->tp && (r = vs_tp_reduce_forward(L->tp, out, (size_t)(n * D), VS_F32))) return r;
    }
    gpt_add_bias(nl, D, P[5], out);
    for (int64_t i = 0; i < nl * D; i++) out[i] += x[i];
    return VS_OK;
}

GPT__FN vs_result gpt_mlp_backward_input(vs_pipe_call* c)
{
    int km = gpt__kmode(c);
    if (km >= 0) return gpt__kmlp_backward_input(c, km);
    vs_layer_ctx* L = vs_layer(c);
    int64_t n = 0, nl = 0, B = 0, T = 0, D = 0, F = 0;
    vs_result r = gpt_mlp_dims(c, &n, &nl, &B, &T, &D, &F);
    if (r) return r;
    gpt_mlp_buf s;
    gpt_mlp_layout((float*)c->saved, n, D, F, L->sp, &s);
    float* const* P = (float* const*)L->param;
    const float* x = (const float*)c->in[0].data;
    const float* dout = (const float*)c->out[0].grad;
    float* dx = (float*)c->in[0].grad;
    if (L->sp && (r = gpt_sp_move(L, 2, B, T, D, dout, s.dof))) return r;
    memset(s.da, 0, sizeof(float) * (size_t)(n * F));
    gpt_mm_nt(n, D, F, L->sp ? s.dof : dout, P[4], s.da); // dz
    for (int64_t i = 0; i < n * F; i++) s.da[i] *= gpt_gelu_grad(s.a[i]);
    memset(s.dln, 0, sizeof(float) * (size_t)(n * D));
    gpt_mm_nt(n, F, D, s.da, P[2], s.dln);
    if (L->sp) r = gpt_sp_move(L, 3, B, T, D, s.dln, s.lnl);
    else if (L->tp) r = vs_tp_copy_backward(L->tp, s.dln, (size_t)(n * D), VS_F32);
    if (r) return r;
    for (int64_t i = 0; i < nl * D; i++) dx[i] += dout[i];
    gpt_ln_backward_input(nl, D, x, P[0], s.mean, s.rstd, L->sp ? s.lnl : s.dln, dx);
    return VS_OK;
}

GPT__FN vs_result gpt_mlp_backward_weight(vs_pipe_call* c)
{
    int km = gpt__kmode(c);
    if (km >= 0) return gpt__kmlp_backward_weight(c, km);
    vs_layer_ctx* L = vs_layer(c);
    int64_t n = 0, nl = 0, B = 0, T = 0, D = 0, F = 0;
    vs_result r = gpt_mlp_dims(c, &n, &nl, &B, &T, &D, &F);
    if (r) return r;
    gpt_mlp_buf s;
    gpt_mlp_layout((float*)c->saved, n, D, F, L->sp, &s);
    float* const* G = (float* const*)L->grad;
    const float* x = (const float*)c->in[0].data;
    const float* dout = (const float*)c->out[0].grad;
    gpt_ln_backward_weight(nl, D, x, s.mean, s.rstd, L->sp ? s.lnl : s.dln, G[0], G[1]);
    gpt_mm_tn(D, n, F, s.ln, s.da, G[2]);
    gpt_bias_grad(n, F, s.da, G[3]);
    gpt_mm_tn(F, n, D, s.z, L->sp ? s.dof : dout, G[4]);
    gpt_bias_grad(nl, D, dout, G[5]);
    return VS_OK;
}

GPT__FN vs_result gpt_mlp_backward(vs_pipe_call* c)
{
    vs_result r = gpt_mlp_backward_input(c);
    return r ? r : gpt_mlp_backward_weight(c);
}

/* head: params 0 lnf.g 1 lnf.b 2 wte (tied; this rank's Vl rows). loss = mean over
   tokens of the cross-entropy of logits = lnf(x) wte^T. Saved: ln [n,D] mean rstd
   [n], dlogits [n,Vl] (softmax - one_hot, per token), per-token loss [n], and
   under sequence parallelism lnl [n,D] (this rank's rows of ln). n counts the
   whole sequence (the targets'); nl the input's rows. */
GPT__FN vs_result gpt_head_dims(vs_pipe_call* c, int64_t* n, int64_t* nl, int64_t* D, int64_t* Vl)
{
    vs_layer_ctx* L = vs_layer(c);
    const gpt_unit* u = (const gpt_unit*)L->user;
    *D = u->cfg->dim;
    vs_result r = gpt_check_act("head", &c->in[0], *D);
    if (r) return r;
    if ((r = gpt_check_ids("head", &c->in[1], u->cfg->seq))) return r;
    *nl = c->in[0].shape[0] * c->in[0].shape[1];
    *n = c->in[0].shape[0] * gpt_full_T(L, c->in[0].shape[1]);
    if (c->in[1].shape[0] * c->in[1].shape[1] != *n)
        return vs_set_error(VS_ERR_MISMATCH, "gpt head: %lld targets for %lld positions",
                            (long long)(c->in[1].shape[0] * c->in[1].shape[1]), (long long)*n);
    *Vl = L->local_shape[2][0];
    if (*Vl < 0 || *Vl > u->cfg->vocab || L->local_shape[2][1] != *D)
        return vs_set_error(VS_ERR_MISMATCH, "gpt head: wte shard [%lld, %lld] of [%d, %d]",
                            (long long)L->local_shape[2][0], (long long)L->local_shape[2][1], u->cfg->vocab,
                            u->cfg->dim);
    return VS_OK;
}

GPT__FN vs_result gpt_head_forward(vs_pipe_call* c)
{
    int km = gpt__kmode(c);
    if (km >= 0) return gpt__khead_forward(c, km);
    vs_layer_ctx* L = vs_layer(c);
    const gpt_unit* u = (const gpt_unit*)L->user;
    int64_t n = 0, nl = 0, D = 0, Vl = 0, V = u->cfg->vocab;
    vs_result r = gpt_head_dims(c, &n, &nl, &D, &Vl);
    if (r) return r;
    float *s = NULL, *loss = NULL;
    if ((r = gpt_save(c, sizeof(float) * (size_t)(n * D + 3 * n + n * Vl + (L->sp ? n * D : 0)), &s))) return r;
    float *ln = s, *mean = ln + n * D, *rstd = mean + n, *G = rstd + n, *tl = G + n * Vl, *lnl = tl + n;
    float* const* P = (float* const*)L->param;
    const int32_t* tg = (const int32_t*)c->in[1].data;
    gpt_ln_forward(nl, D, (const float*)c->in[0].data, P[0], P[1], L->sp ? lnl : ln, mean, rstd);
    if (L->sp && (r = gpt_sp_move(L, 0, c->in[0].shape[0], n / c->in[0].shape[0], D, lnl, ln))) return r;
    gpt_mm_nt(n, D, Vl, ln, P[2], G); // logits, this rank's columns
    if (!L->tp && Vl != V)
        return vs_set_error(VS_ERR_MISMATCH, "gpt head: wte has %lld rows of %lld and no TP mesh", (long long)Vl,
                            (long long)V);
    if (L->tp) {
        if ((r = vs_vocab_cross_entropy(L->tp, G, n, V, tg, tl, G))) return r;
    } else {
        for (int64_t i = 0; i < n; i++) {
            float* g = G + i * V;
            if (tg[i] < 0 || tg[i] >= V)
                return vs_set_error(VS_ERR_INVALID, "gpt head: target %d at %lld outside [0, %lld)", tg[i],
                                    (long long)i, (long long)V);
            float mx = g[0], se = 0;
            for (int64_t j = 1; j < V; j++) mx = g[j] > mx ? g[j] : mx;
            for (int64_t j = 0; j < V; j++) se += expf(g[j] - mx);
            tl[i] = logf(se) + mx - g[tg[i]];
            for (int64_t j = 0; j < V; j++) g[j] = expf(g[j] - mx) / se;
            g[tg[i]] -= 1.0f;
        }
    }
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += tl[i];
    if ((r = gpt_output(c, 0, VS_F32, 0, NULL, (void**)&loss))) return r;
    *loss = n ? (float)(sum / (double)n) : 0.0f;
    return VS_OK;
}

GPT__FN vs_result gpt_head_backward(vs_pipe_call* c)
{
    int km = gpt__kmode(c);
    if (km >= 0) return gpt__khead_backward(c, km);
    vs_layer_ctx* L = vs_layer(c);
    int64_t n = 0, nl = 0, D = 0, Vl = 0;
    vs_result r = gpt_head_dims(c, &n, &nl, &D, &Vl);
    if (r) return r;
    float* s = (float*)c->saved;
    float *ln = s, *mean = ln + n * D, *rstd = mean + n, *G = rstd + n, *lnl = G + n * Vl + n;
    float* const* P = (float* const*)L->param;
    float* const* Gr = (float* const*)L->grad;
    float scale = n ? *(const float*)c->out[0].grad / (float)n : 0.0f;
    float* dlog = (float*)malloc(sizeof(float) * (size_t)(n * Vl + n * D + 1));
    if (!dlog) return vs_set_error(VS_ERR_NOMEM, "gpt head: backward scratch");
    float* dln = dlog + n * Vl;
    for (int64_t i = 0; i < n * Vl; i++) dlog[i] = G[i] * scale;
    memset(dln, 0, sizeof(float) * (size_t)(n * D));
    gpt_mm_nn(n, Vl, D, dlog, P[2], dln); // partial over TP (vocab shards)
    gpt_mm_tn(Vl, n, D, dlog, ln, Gr[2]);
    if (L->sp) r = gpt_sp_move(L, 3, c->in[0].shape[0], n / c->in[0].shape[0], D, dln, lnl); // (ln's rows: done with)
    else if (L->tp) r = vs_tp_copy_backward(L->tp, dln, (size_t)(n * D), VS_F32);
    if (r) {
        free(dlog);
        return r;
    }
    const float* dl = L->sp ? lnl : dln;
    gpt_ln_backward_input(nl, D, (const float*)c->in[0].data, P[0], mean, rstd, dl, (float*)c->in[0].grad);
    gpt_ln_backward_weight(nl, D, (const float*)c->in[0].data, mean, rstd, dl, Gr[0], Gr[1]);
    free(dlog);
    return VS_OK;
}

// >>device ---------------------------------------------------------------------
/* The units as examples/gpt_kernels.h's kernel sequences (the same math, the
   sequences tests/test_gpt_kernels.c checks against the loops above): on a
   device (a rank on the NCCL transport: call->stream non-NULL, VESCALE_NCCL)
   every buffer is device memory and the kernels go on call->stream, the
   engine's compute stream, which the TP communicator's collectives use too;
   on the host they run when a parameter is bf16 or f16 (the host build of the
   kernels: in f32 it gives the loops' bits). Parameters and their gradients
   are in vs_layer_ctx.dtype / grad_dtype; activations, saved statistics,
   attention probabilities and logits are f32. Scratch is the engine's saved
   memory (vs_pipe_save), sized for the backward too: nothing is allocated. */

/* The kernels' mode of a call: GPT_K_DEVICE on a device, GPT_K_HOST for a host
   rank with a bf16/f16 parameter or gradient, -1 for the f32 loops. */
GPT__FN int gpt__kmode(const vs_pipe_call* c)
{
#ifdef VESCALE_NCCL
    if (c->stream) return GPT_K_DEVICE;
#endif
    const vs_layer_ctx* L = vs_layer(c);
    for (int i = 0; i < VS_LAYER_MAX_PARAMS; i++)
        if (L->dtype[i] == VS_BF16 || L->dtype[i] == VS_F16 || L->grad_dtype[i] == VS_BF16 ||
            L->grad_dtype[i] == VS_F16)
            return GPT_K_HOST;
    return -1;
}

GPT__FN int gpt__kdt(vs_dtype t) { return t == VS_BF16 ? GPT_KBF16 : t == VS_F16 ? GPT_KF16 : GPT_KF32; }
#define GPT__TW(L, i) gpt__kdt((L)->dtype[i])
#define GPT__TG(L, i) gpt__kdt((L)->grad_dtype[i])
#define GPT__F GPT_KF32

/* bytes of p zeroed in the context's stream order */
GPT__FN vs_result gpt__kzero(const gpt_kctx* k, void* p, size_t bytes)
{
#ifdef VESCALE_NCCL
    if (k->mode == GPT_K_DEVICE) {
        cudaError_t e = cudaMemsetAsync(p, 0, bytes, (cudaStream_t)k->stream);
        return e == cudaSuccess ? VS_OK : vs_cuda_error((int)e, "gpt", "cudaMemsetAsync");
    }
#endif
    (void)k;
    memset(p, 0, bytes);
    return VS_OK;
}

#define GPT__K(call) \
    do { \
        vs_result gpt__kr = (call); \
        if (gpt__kr) return gpt__kr; \
    } while (0)

/* Token ids or targets in [0, V), checked where the host can read them (the host
   build; on a device the kernels take an id outside as another rank's row: a
   zero embedding, a NaN loss). */
GPT__FN vs_result gpt__kids(int mode, const char* who, const int32_t* ids, int64_t n, int64_t V)
{
    for (int64_t i = 0; mode != GPT_K_DEVICE && i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return vs_set_error(VS_ERR_INVALID, "gpt %s: %s %d at %lld outside [0, %lld)", who,
                                who[0] == 'e' ? "token" : "target", ids[i], (long long)i, (long long)V);
    return VS_OK;
}

/* embed: saved (TP) n*D floats: this rank's vocab rows before the TP sum (forward),
   the whole gradient under sequence parallelism (backward). */
GPT__FN vs_result gpt__kembed_forward(vs_pipe_call* c, int mode)
{
    vs_layer_ctx* L = vs_layer(c);
    const gpt_unit* u = (const gpt_unit*)L->user;
    int64_t V = u->cfg->vocab, D = u->cfg->dim;
    GPT__K(gpt_check_ids("embed", &c->in[0], u->cfg->seq));
    int64_t B = c->in[0].shape[0], T = c->in[0].shape[1], n = B * T, sh[3] = {B, T, D}, v0 = 0, Vl = V;
    const int32_t* ids = (const int32_t*)c->in[0].data;
    int tw = GPT__TW(L, 0);
    GPT__K(gpt__kids(mode, "embed", ids, n, V));
    gpt_kctx k;
    GPT__K(gpt_kctx_init(&k, mode, c->stream));
    float *x = NULL, *part = NULL;
    if (L->tp) GPT__K(vs_vocab_range(L->tp, V, &v0, &Vl));
    if (L->sp) {
        if (T % L->tp_size)
            return vs_set_error(VS_ERR_INVALID, "gpt embed: sequence parallelism splits T = %lld over TP = %d unevenly",
                                (long long)T, L->tp_size);
        int64_t Tl = T / L->tp_size;
        sh[1] = Tl;
        GPT__K(gpt_save(c, sizeof(float) * (size_t)(n * D), &part));
        GPT__K(gpt_output(c, 0, VS_F32, 3, sh, (void**)&x));
        GPT__K(gpt_k_embed(&k, n, T, D, ids, L->param[0], v0, Vl, NULL, part, GPT__F, tw));
        GPT__K(gpt_sp_move(L, 1, B, T, D, part, x));
        return gpt_k_add_rows(&k, B * Tl, Tl, D, L->tp_rank * Tl, L->param[1], tw, x, GPT__F);
    }
    GPT__K(gpt_output(c, 0, VS_F32, 3, sh, (void**)&x));
    if (!L->tp) return gpt_k_embed(&k, n, T, D, ids, L->param[0], 0, V, L->param[1], x, GPT__F, tw);
    GPT__K(gpt_k_embed(&k, n, T, D, ids, L->param[0], v0, Vl, NULL, x, GPT__F, tw)); // zeros outside this rank's rows
    GPT__K(vs_tp_reduce_forward(L->tp, x, (size_t)(n * D), VS_F32));
    return gpt_k_add_rows(&k, n, T, D, 0, L->param[1], tw, x, GPT__F);
}

GPT__FN vs_result gpt__kembed_backward(vs_pipe_call* c, int mode)
{
    vs_layer_ctx* L = vs_layer(c);
    const gpt_unit* u = (const gpt_unit*)L->user;
    int64_t V = u->cfg->vocab, D = u->cfg->dim, v0 = 0, Vl = V;
    int64_t B = c->in[0].shape[0], T = c->in[0].shape[1], n = B * T;
    const int32_t* ids = (const int32_t*)c->in[0].data;
    const float* dx = (const float*)c->out[0].grad;
    gpt_kctx k;
    GPT__K(gpt_kctx_init(&k, mode, c->stream));
    if (L->tp) GPT__K(vs_vocab_range(L->tp, V, &v0, &Vl));
    if (L->sp) {
        int64_t Tl = T / L->tp_size;
        float* full = (float*)c->saved;
        GPT__K(gpt_sp_move(L, 2, B, T, D, dx, full));
        GPT__K(gpt_k_embed_backward(&k, n, D, ids, full, v0, Vl, L->grad[0], GPT__F, GPT__TG(L, 0)));
        return gpt_k_sum_rows(&k, B * Tl, Tl, D, L->tp_rank * Tl, dx, GPT__F, L->grad[1], GPT__TG(L, 1));
    }
    GPT__K(gpt_k_embed_backward(&k, n, D, ids, dx, v0, Vl, L->grad[0], GPT__F, GPT__TG(L, 0)));
    return gpt_k_sum_rows(&k, n, T, D, 0, dx, GPT__F, L->grad[1], GPT__TG(L, 1));
}

/* attention: gpt_attn_layout's buffers, then dy [n,W] and dS [B,Hl,T,T] (backward scratch) */
GPT__FN size_t gpt__kattn_layout(float* base, const gpt_attn_dims* d, int sp, gpt_attn_buf* s, float** dy, float** dS)
{
    size_t at = gpt_attn_layout(base, d->B, d->T, d->D, d->Hl, d->W, sp, s) / sizeof(float);
    *dy = base ? base + at : NULL;
    at += (size_t)(d->n * d->W);
    *dS = base ? base + at : NULL;
    at += (size_t)(d->B * d->Hl * d->T * d->T);
    return sizeof(float) * at;
}

/* A backward part's start: the dims, forward's saved buffers and the kernels. */
typedef struct gpt__kattn {
    gpt_attn_dims d;
    gpt_attn_buf s;
    float *dy, *dS;
    gpt_kctx k;
} gpt__kattn;

GPT__FN vs_result gpt__kattn_begin(vs_pipe_call* c, int mode, gpt__kattn* a)
{
    memset(a, 0, sizeof *a);
    GPT__K(gpt_attn_dims_of(c, &a->d));
    gpt__kattn_layout((float*)c->saved, &a->d, vs_layer(c)->sp, &a->s, &a->dy, &a->dS);
    return gpt_kctx_init(&a->k, mode, c->stream);
}

GPT__FN vs_result gpt__kattn_forward(vs_pipe_call* c, int mode)
{
    vs_layer_ctx* L = vs_layer(c);
    gpt_attn_dims d;
    memset(&d, 0, sizeof d);
    GPT__K(gpt_attn_dims_of(c, &d));
    int64_t sh[3] = {d.B, d.Tl, d.D}, n = d.n, nl = d.nl, D = d.D, W = d.W;
    gpt_attn_buf s;
    float *base = NULL, *out = NULL, *dy = NULL, *dS = NULL;
    GPT__K(gpt_save(c, gpt__kattn_layout(NULL, &d, L->sp, &s, &dy, &dS), &base));
    gpt__kattn_layout(base, &d, L->sp, &s, &dy, &dS);
    gpt_kctx k;
    GPT__K(gpt_kctx_init(&k, mode, c->stream));
    const float* x = (const float*)c->in[0].data;
    void* const* P = L->param;
    GPT__K(gpt_k_layernorm(&k, nl, D, x, P[0], P[1], L->sp ? s.lnl : s.ln, s.mean, s.rstd, GPT__F, GPT__TW(L, 0)));
    if (L->sp) GPT__K(gpt_sp_move(L, 0, d.B, d.T, D, s.lnl, s.ln));
    float* qkv[3] = {s.q, s.k, s.v};
    for (int j = 0; j < 3; j++) // (no key bias)
        GPT__K(gpt_k_matmul(&k, GPT_KMM_NN, n, D, W, s.ln, GPT__F, P[2 + j], GPT__TW(L, 2 + j),
                            j == 1 ? NULL : P[j ? 6 : 5], GPT__TW(L, j ? 6 : 5), qkv[j], GPT__F, 0));
    GPT__K(gpt_k_attention(&k, d.B, d.T, d.Hl, d.hd, s.q, s.k, s.v, s.P, s.y, GPT__F));
    GPT__K(gpt_output(c, 0, VS_F32, 3, sh, (void**)&out));
    if (L->sp) {
        GPT__K(gpt_k_matmul(&k, GPT_KMM_NN, n, W, D, s.y, GPT__F, P[7], GPT__TW(L, 7), NULL, GPT__F, s.dof, GPT__F, 0));
        GPT__K(gpt_sp_move(L, 1, d.B, d.T, D, s.dof, out));
    } else {
        GPT__K(gpt_k_matmul(&k, GPT_KMM_NN, n, W, D, s.y, GPT__F, P[7], GPT__TW(L, 7), NULL, GPT__F, out, GPT__F, 0));
        if (L->tp) GPT__K(vs_tp_reduce_forward(L->tp, out, (size_t)(n * D), VS_F32));
    }
    GPT__K(gpt_k_add_rows(&k, nl, 1, D, 0, P[8], GPT__TW(L, 8), out, GPT__F)); // once, after the sum
    return gpt_k_add_rows(&k, nl, nl, D, 0, x, GPT__F, out, GPT__F);           // the residual
}

GPT__FN vs_result gpt__kattn_backward_input(vs_pipe_call* c, int mode)
{
    vs_layer_ctx* L = vs_layer(c);
    gpt__kattn a;
    GPT__K(gpt__kattn_begin(c, mode, &a));
    const gpt_attn_dims d = a.d;
    const gpt_attn_buf s = a.s;
    const gpt_kctx* k = &a.k;
    int64_t n = d.n, nl = d.nl, D = d.D, W = d.W;
    void* const* P = L->param;
    const float* x = (const float*)c->in[0].data;
    const float* dout = (const float*)c->out[0].grad;
    float* dx = (float*)c->in[0].grad;
    if (L->sp) GPT__K(gpt_sp_move(L, 2, d.B, d.T, D, dout, s.dof));
    const float* dfull = L->sp ? s.dof : dout;
    GPT__K(gpt_k_matmul(k, GPT_KMM_NT, n, D, W, dfull, GPT__F, P[7], GPT__TW(L, 7), NULL, GPT__F, a.dy, GPT__F, 0));
    GPT__K(gpt__kzero(k, s.dq, sizeof(float) * (size_t)(3 * n * W))); // dq dk dv: contiguous
    GPT__K(gpt_k_attention_backward(k, d.B, d.T, d.Hl, d.hd, s.q, s.k, s.v, s.P, a.dy, a.dS, s.dq, s.dk, s.dv, GPT__F,
                                    GPT__F));
    const float* g3[3] = {s.dq, s.dk, s.dv};
    for (int j = 0; j < 3; j++)
        GPT__K(gpt_k_matmul(k, GPT_KMM_NT, n, W, D, g3[j], GPT__F, P[2 + j], GPT__TW(L, 2 + j), NULL, GPT__F, s.dln,
                            GPT__F, j));
    if (L->sp) GPT__K(gpt_sp_move(L, 3, d.B, d.T, D, s.dln, s.lnl));
    else if (L->tp) GPT__K(vs_tp_copy_backward(L->tp, s.dln, (size_t)(n * D), VS_F32));
    GPT__K(gpt_k_add_rows(k, nl, nl, D, 0, dout, GPT__F, dx, GPT__F)); // the residual
    return gpt_k_layernorm_backward(k, nl, D, x, P[0], s.mean, s.rstd, L->sp ? s.lnl : s.dln, dx, GPT__F,
                                    GPT__TW(L, 0));
}

GPT__FN vs_result gpt__kattn_backward_weight(vs_pipe_call* c, int mode)
{
    vs_layer_ctx* L = vs_layer(c);
    gpt__kattn a;
    GPT__K(gpt__kattn_begin(c, mode, &a));
    const gpt_attn_dims d = a.d;
    const gpt_attn_buf s = a.s;
    const gpt_kctx* k = &a.k;
    int64_t n = d.n, nl = d.nl, D = d.D, W = d.W;
    void* const* G = L->grad;
    const float* x = (const float*)c->in[0].data;
    const float* dout = (const float*)c->out[0].grad;
    GPT__K(gpt_k_layernorm_backward_weight(k, nl, D, x, s.mean, s.rstd, L->sp ? s.lnl : s.dln, G[0], G[1], GPT__F,
                                           GPT__TG(L, 0)));
    const float* g3[3] = {s.dq, s.dk, s.dv};
    for (int j = 0; j < 3; j++) {
        GPT__K(gpt_k_matmul(k, GPT_KMM_TN, D, n, W, s.ln, GPT__F, g3[j], GPT__F, NULL, GPT__F, G[2 + j],
                            GPT__TG(L, 2 + j), 1));
        if (j != 1) GPT__K(gpt_k_sum_rows(k, n, 1, W, 0, g3[j], GPT__F, G[j ? 6 : 5], GPT__TG(L, j ? 6 : 5)));
    }
    GPT__K(gpt_k_matmul(k, GPT_KMM_TN, W, n, D, s.y, GPT__F, L->sp ? s.dof : dout, GPT__F, NULL, GPT__F, G[7],
                        GPT__TG(L, 7), 1));
    return gpt_k_sum_rows(k, nl, 1, D, 0, dout, GPT__F, G[8], GPT__TG(L, 8));
}

/* A backward part's start: the dims, forward's saved buffers and the kernels. */
typedef struct gpt__kmlp {
    int64_t n, nl, B, T, D, F;
    gpt_mlp_buf s;
    gpt_kctx k;
} gpt__kmlp;

GPT__FN vs_result gpt__kmlp_begin(vs_pipe_call* c, int mode, gpt__kmlp* m)
{
    memset(m, 0, sizeof *m);
    GPT__K(gpt_mlp_dims(c, &m->n, &m->nl, &m->B, &m->T, &m->D, &m->F));
    gpt_mlp_layout((float*)c->saved, m->n, m->D, m->F, vs_layer(c)->sp, &m->s);
    return gpt_kctx_init(&m->k, mode, c->stream);
}

GPT__FN vs_result gpt__kmlp_forward(vs_pipe_call* c, int mode)
{
    vs_layer_ctx* L = vs_layer(c);
    int64_t n = 0, nl = 0, B = 0, T = 0, D = 0, F = 0;
    GPT__K(gpt_mlp_dims(c, &n, &nl, &B, &T, &D, &F));
    gpt_mlp_buf s;
    float *base = NULL, *out = NULL;
    GPT__K(gpt_save(c, gpt_mlp_layout(NULL, n, D, F, L->sp, &s), &base));
    gpt_mlp_layout(base, n, D, F, L->sp, &s);
    gpt_kctx k;
    GPT__K(gpt_kctx_init(&k, mode, c->stream));
    void* const* P = L->param;
    const float* x = (const float*)c->in[0].data;
    GPT__K(gpt_k_layernorm(&k, nl, D, x, P[0], P[1], L->sp ? s.lnl : s.ln, s.mean, s.rstd, GPT__F, GPT__TW(L, 0)));
    if (L->sp) GPT__K(gpt_sp_move(L, 0, B, T, D, s.lnl, s.ln));
    GPT__K(gpt_k_matmul(&k, GPT_KMM_NN, n, D, F, s.ln, GPT__F, P[2], GPT__TW(L, 2), P[3], GPT__TW(L, 3), s.a, GPT__F, 0));
    GPT__K(gpt_k_gelu(&k, n * F, s.a, GPT__F, s.z, GPT__F));
    int64_t sh[3] = {c->in[0].shape[0], c->in[0].shape[1], D};
    GPT__K(gpt_output(c, 0, VS_F32, 3, sh, (void**)&out));
    if (L->sp) {
        GPT__K(gpt_k_matmul(&k, GPT_KMM_NN, n, F, D, s.z, GPT__F, P[4], GPT__TW(L, 4), NULL, GPT__F, s.dof, GPT__F, 0));
        GPT__K(gpt_sp_move(L, 1, B, T, D, s.dof, out));
    } else {
        GPT__K(gpt_k_matmul(&k, GPT_KMM_NN, n, F, D, s.z, GPT__F, P[4], GPT__TW(L, 4), NULL, GPT__F, out, GPT__F, 0));
        if (L->tp) GPT__K(vs_tp_reduce_forward(L->tp, out, (size_t)(n * D), VS_F32));
    }
    GPT__K(gpt_k_add_rows(&k, nl, 1, D, 0, P[5], GPT__TW(L, 5), out, GPT__F));
    return gpt_k_add_rows(&k, nl, nl, D, 0, x, GPT__F, out, GPT__F);
}

GPT__FN vs_result gpt__kmlp_backward_input(vs_pipe_call* c, int mode)
{
    vs_layer_ctx* L = vs_layer(c);
    gpt__kmlp m;
    GPT__K(gpt__kmlp_begin(c, mode, &m));
    const gpt_mlp_buf s = m.s;
    const gpt_kctx* k = &m.k;
    int64_t n = m.n, nl = m.nl, B = m.B, T = m.T, D = m.D, F = m.F;
    void* const* P = L->param;
    const float* x = (const float*)c->in[0].data;
    const float* dout = (const float*)c->out[0].grad;
    float* dx = (float*)c->in[0].grad;
    if (L->sp) GPT__K(gpt_sp_move(L, 2, B, T, D, dout, s.dof));
    GPT__K(gpt_k_matmul(k, GPT_KMM_NT, n, D, F, L->sp ? s.dof : dout, GPT__F, P[4], GPT__TW(L, 4), NULL, GPT__F, s.da,
                        GPT__F, 0)); // dz
    GPT__K(gpt_k_gelu_backward(k, n * F, s.a, GPT__F, s.da, GPT__F, s.da, GPT__F));
    GPT__K(gpt_k_matmul(k, GPT_KMM_NT, n, F, D, s.da, GPT__F, P[2], GPT__TW(L, 2), NULL, GPT__F, s.dln, GPT__F, 0));
    if (L->sp) GPT__K(gpt_sp_move(L, 3, B, T, D, s.dln, s.lnl));
    else if (L->tp) GPT__K(vs_tp_copy_backward(L->tp, s.dln, (size_t)(n * D), VS_F32));
    GPT__K(gpt_k_add_rows(k, nl, nl, D, 0, dout, GPT__F, dx, GPT__F));
    return gpt_k_layernorm_backward(k, nl, D, x, P[0], s.mean, s.rstd, L->sp ? s.lnl : s.dln, dx, GPT__F,
                                    GPT__TW(L, 0));
}

GPT__FN vs_result gpt__kmlp_backward_weight(vs_pipe_call* c, int mode)
{
    vs_layer_ctx* L = vs_layer(c);
    gpt__kmlp m;
    GPT__K(gpt__kmlp_begin(c, mode, &m));
    const gpt_mlp_buf s = m.s;
    const gpt_kctx* k = &m.k;
    int64_t n = m.n, nl = m.nl, D = m.D, F = m.F;
    void* const* G = L->grad;
    const float* x = (const float*)c->in[0].data;
    const float* dout = (const float*)c->out[0].grad;
    GPT__K(gpt_k_layernorm_backward_weight(k, nl, D, x, s.mean, s.rstd, L->sp ? s.lnl : s.dln, G[0], G[1], GPT__F,
                                           GPT__TG(L, 0)));
    GPT__K(gpt_k_matmul(k, GPT_KMM_TN, D, n, F, s.ln, GPT__F, s.da, GPT__F, NULL, GPT__F, G[2], GPT__TG(L, 2), 1));
    GPT__K(gpt_k_sum_rows(k, n, 1, F, 0, s.da, GPT__F, G[3], GPT__TG(L, 3)));
    GPT__K(gpt_k_matmul(k, GPT_KMM_TN, F, n, D, s.z, GPT__F, L->sp ? s.dof : dout, GPT__F, NULL, GPT__F, G[4],
                        GPT__TG(L, 4), 1));
    return gpt_k_sum_rows(k, nl, 1, D, 0, dout, GPT__F, G[5], GPT__TG(L, 5));
}

/* head: saved ln [n,D] mean rstd [n] G [n,Vl] tl [n] lnl [n,D] (sp), then the
   backward's dlog [n,Vl] and dln [n,D]. */
typedef struct gpt__khead_buf {
    float *ln, *mean, *rstd, *G, *tl, *lnl, *dlog, *dln;
} gpt__khead_buf;

GPT__FN size_t gpt__khead_layout(float* base, int64_t n, int64_t D, int64_t Vl, int sp, gpt__khead_buf* s)
{
    int64_t at = 0;
    float* p = base;
#define GPT__TAKE(f, cnt) (s->f = p ? p + at : NULL, at += (cnt))
    GPT__TAKE(ln, n * D), GPT__TAKE(mean, n), GPT__TAKE(rstd, n), GPT__TAKE(G, n * Vl), GPT__TAKE(tl, n);
    GPT__TAKE(lnl, sp ? n * D : 0), GPT__TAKE(dlog, n * Vl), GPT__TAKE(dln, n * D);
#undef GPT__TAKE
    return sizeof(float) * (size_t)at;
}

GPT__FN vs_result gpt__khead_forward(vs_pipe_call* c, int mode)
{
    vs_layer_ctx* L = vs_layer(c);
    const gpt_unit* u = (const gpt_unit*)L->user;
    int64_t n = 0, nl = 0, D = 0, Vl = 0, V = u->cfg->vocab;
    GPT__K(gpt_head_dims(c, &n, &nl, &D, &Vl));
    if (!L->tp && Vl != V)
        return vs_set_error(VS_ERR_MISMATCH, "gpt head: wte has %lld rows of %lld and no TP mesh", (long long)Vl,
                            (long long)V);
    gpt__khead_buf s;
    float *base = NULL, *loss = NULL;
    GPT__K(gpt_save(c, gpt__khead_layout(NULL, n, D, Vl, L->sp, &s), &base));
    gpt__khead_layout(base, n, D, Vl, L->sp, &s);
    gpt_kctx k;
    GPT__K(gpt_kctx_init(&k, mode, c->stream));
    void* const* P = L->param;
    const int32_t* tg = (const int32_t*)c->in[1].data;
    GPT__K(gpt__kids(mode, "head", tg, n, V));
    GPT__K(gpt_k_layernorm(&k, nl, D, c->in[0].data, P[0], P[1], L->sp ? s.lnl : s.ln, s.mean, s.rstd, GPT__F,
                           GPT__TW(L, 0)));
    if (L->sp) GPT__K(gpt_sp_move(L, 0, c->in[0].shape[0], n / c->in[0].shape[0], D, s.lnl, s.ln));
    GPT__K(gpt_k_matmul(&k, GPT_KMM_NT, n, D, Vl, s.ln, GPT__F, P[2], GPT__TW(L, 2), NULL, GPT__F, s.G, GPT__F, 0));
    if (L->tp) GPT__K(vs_vocab_cross_entropy(L->tp, s.G, n, V, tg, s.tl, s.G));
    else GPT__K(gpt_k_cross_entropy(&k, n, V, s.G, GPT__F, tg, s.tl, s.G));
    GPT__K(gpt_output(c, 0, VS_F32, 0, NULL, (void**)&loss));
    return gpt_k_mean(&k, n, s.tl, loss);
}

GPT__FN vs_result gpt__khead_backward(vs_pipe_call* c, int mode)
{
    vs_layer_ctx* L = vs_layer(c);
    int64_t n = 0, nl = 0, D = 0, Vl = 0;
    GPT__K(gpt_head_dims(c, &n, &nl, &D, &Vl));
    gpt__khead_buf s;
    gpt__khead_layout((float*)c->saved, n, D, Vl, L->sp, &s);
    gpt_kctx k;
    GPT__K(gpt_kctx_init(&k, mode, c->stream));
    void* const* P = L->param;
    void* const* G = L->grad;
    GPT__K(gpt_k_scale(&k, n * Vl, s.G, (const float*)c->out[0].grad, n, s.dlog, GPT__F));
    GPT__K(gpt_k_matmul(&k, GPT_KMM_NN, n, Vl, D, s.dlog, GPT__F, P[2], GPT__TW(L, 2), NULL, GPT__F, s.dln, GPT__F, 0));
    GPT__K(gpt_k_matmul(&k, GPT_KMM_TN, Vl, n, D, s.dlog, GPT__F, s.ln, GPT__F, NULL, GPT__F, G[2], GPT__TG(L, 2), 1));
    if (L->sp) GPT__K(gpt_sp_move(L, 3, c->in[0].shape[0], n / c->in[0].shape[0], D, s.dln, s.lnl));
    else if (L->tp) GPT__K(vs_tp_copy_backward(L->tp, s.dln, (size_t)(n * D), VS_F32));
    const float* dl = L->sp ? s.lnl : s.dln;
    const void* x = c->in[0].data;
    GPT__K(gpt_k_layernorm_backward(&k, nl, D, x, P[0], s.mean, s.rstd, dl, c->in[0].grad, GPT__F, GPT__TW(L, 0)));
    return gpt_k_layernorm_backward_weight(&k, nl, D, x, s.mean, s.rstd, dl, G[0], G[1], GPT__F, GPT__TG(L, 0));
}
#undef GPT__K
// >>device end

// >>model ----------------------------------------------------------------------

GPT__FN void gpt__param(vs_layer_decl* l, char* name_buf, const char* name, int ndim, int64_t d0, int64_t d1,
                        vs_role role, vs_init_kind init, double stdv, int layers, int no_decay)
{
    vs_param_decl* p = &l->params[l->nparams++];
    snprintf(name_buf, 32, "%s", name);
    memset(p, 0, sizeof *p);
    p->name = name_buf;
    p->dtype = VS_F32;
    p->ndim = ndim;
    p->shape[0] = d0;
    p->shape[1] = ndim > 1 ? d1 : 0;
    p->role = role;
    p->init.kind = init;
    p->init.a = 0;
    p->init.b = stdv;
    p->init.num_layers = layers;
    p->no_decay = no_decay;
}

/* Fills *out (layers in `st`) from cfg (copied into st). Errors name the bad value. */
GPT__FN vs_result gpt_model(const gpt_config* cfg, gpt_model_storage* st, vs_model_desc* out)
{
    if (!cfg || !st || !out) return vs_set_error(VS_ERR_NULL, "gpt_model: a NULL argument");
    if (cfg->vocab < 2 || cfg->seq < 1 || cfg->dim < 1 || cfg->heads < 1 || cfg->layers < 1 ||
        cfg->layers > GPT_MAX_LAYERS)
        return vs_set_error(VS_ERR_INVALID, "gpt_model: vocab %d, seq %d, dim %d, heads %d, layers %d (1..%d)",
                            cfg->vocab, cfg->seq, cfg->dim, cfg->heads, cfg->layers, GPT_MAX_LAYERS);
    if (cfg->dim % cfg->heads)
        return vs_set_error(VS_ERR_INVALID, "gpt_model: heads %d do not divide dim %d", cfg->heads, cfg->dim);
    memset(st, 0, sizeof *st);
    st->cfg = *cfg;
    const gpt_config* c = &st->cfg;
    int64_t V = c->vocab, T = c->seq, D = c->dim, F = 4 * D, Lz = c->layers;
    int nl = 0;
    const double sd = 0.02;
    // flops are per row (one sequence of T tokens), forward only
    for (int u = 0; u < 2 + 2 * c->layers; u++) {
        vs_layer_decl* l = &st->layers[nl];
        gpt_unit* gu = &st->units[nl];
        char(*pn)[32] = st->param_name[nl];
        gu->cfg = c;
        l->user = gu;
        l->sp_ok = 1; // every unit moves its activations with gpt_sp_move under sequence parallelism
        l->unit.name = st->unit_name[nl];
        l->unit.inputs = st->inputs[nl];
        l->unit.outputs = st->outputs[nl];
        if (u == 0) {
            gu->kind = GPT_EMBED, gu->block = -1;
            snprintf(st->unit_name[nl], 24, "embed");
            snprintf(st->inputs[nl], 64, "tokens:i32[*,*]");
            snprintf(st->outputs[nl], 64, "x0:f32[*,*,%lld]", (long long)D);
            gpt__param(l, pn[0], "wte", 2, V, D, VS_ROLE_EMBEDDING, VS_INIT_NORMAL, sd, 0, 0);
            gpt__param(l, pn[1], "wpe", 2, T, D, VS_ROLE_OTHER, VS_INIT_NORMAL, sd / 2, 0, 0);
            l->unit.forward = gpt_embed_forward;
            l->unit.backward = gpt_embed_backward;
            l->unit.flops = (double)(T * D);
        } else if (u == 1 + 2 * c->layers) {
            gu->kind = GPT_HEAD, gu->block = -1;
            snprintf(st->unit_name[nl], 24, "head");
            snprintf(st->inputs[nl], 64, "x%lld:f32[*,*,%lld],targets:i32[*,*]", (long long)(2 * Lz),
                     (long long)D);
            snprintf(st->outputs[nl], 64, "loss:f32[]");
            gpt__param(l, pn[0], "lnf.g", 1, D, 0, VS_ROLE_NORM, VS_INIT_ONES, 0, 0, 1);
            gpt__param(l, pn[1], "lnf.b", 1, D, 0, VS_ROLE_NORM, VS_INIT_ZEROS, 0, 0, 1);
            gpt__param(l, pn[2], "wte", 2, V, D, VS_ROLE_EMBEDDING, VS_INIT_NORMAL, sd, 0, 0);
            l->unit.forward = gpt_head_forward;
            l->unit.backward = gpt_head_backward;
            l->unit.flops = (double)(2 * T * D * V + 10 * T * D + 5 * T * V);
        } else {
            int b = (u - 1) / 2, attn = (u - 1) % 2 == 0;
            int64_t x_in = u - 1;
            char nm[32];
            gu->kind = attn ? GPT_ATTN : GPT_MLP, gu->block = b;
            snprintf(st->unit_name[nl], 24, "h.%d.%s", b, attn ? "attn" : "mlp");
            snprintf(st->inputs[nl], 64, "x%lld:f32[*,*,%lld]", (long long)x_in, (long long)D);
            snprintf(st->outputs[nl], 64, "x%lld:f32[*,*,%lld]", (long long)(x_in + 1), (long long)D);
#define GPT__P(suffix, ...) (snprintf(nm, sizeof nm, "h.%d.%s", b, suffix), gpt__param(l, pn[l->nparams], nm, __VA_ARGS__))
            if (attn) {
                GPT__P("ln1.g", 1, D, 0, VS_ROLE_NORM, VS_INIT_ONES, 0, 0, 1);
                GPT__P("ln1.b", 1, D, 0, VS_ROLE_NORM, VS_INIT_ZEROS, 0, 0, 1);
                GPT__P("attn.wq", 2, D, D, VS_ROLE_COLUMN, VS_INIT_NORMAL, sd, 0, 0);
                GPT__P("attn.wk", 2, D, D, VS_ROLE_COLUMN, VS_INIT_NORMAL, sd, 0, 0);
                GPT__P("attn.wv", 2, D, D, VS_ROLE_COLUMN, VS_INIT_NORMAL, sd, 0, 0);
                GPT__P("attn.bq", 1, D, 0, VS_ROLE_COLUMN, VS_INIT_ZEROS, 0, 0, 1);
                GPT__P("attn.bv", 1, D, 0, VS_ROLE_COLUMN, VS_INIT_ZEROS, 0, 0, 1);
                GPT__P("attn.proj", 2, D, D, VS_ROLE_ROW, VS_INIT_SCALED_NORMAL, sd, (int)Lz, 0);
                for (int j = 2; j <= 7; j++) l->params[j].shard_unit = D / c->heads; // wq..proj: whole heads over TP
                GPT__P("attn.bproj", 1, D, 0, VS_ROLE_ROW, VS_INIT_ZEROS, 0, 0, 1);
                l->unit.forward = gpt_attn_forward;
                l->unit.backward = gpt_attn_backward;
                l->unit.backward_input = gpt_attn_backward_input;
                l->unit.backward_weight = gpt_attn_backward_weight;
                l->unit.flops = (double)(2 * T * D * 4 * D + 2 * T * T * D + 10 * T * D);
            } else {
                GPT__P("ln2.g", 1, D, 0, VS_ROLE_NORM, VS_INIT_ONES, 0, 0, 1);
                GPT__P("ln2.b", 1, D, 0, VS_ROLE_NORM, VS_INIT_ZEROS, 0, 0, 1);
                GPT__P("mlp.fc", 2, D, F, VS_ROLE_COLUMN, VS_INIT_NORMAL, sd, 0, 0);
                GPT__P("mlp.bfc", 1, F, 0, VS_ROLE_COLUMN, VS_INIT_ZEROS, 0, 0, 1);
                GPT__P("mlp.fc2", 2, F, D, VS_ROLE_ROW, VS_INIT_SCALED_NORMAL, sd, (int)Lz, 0);
                GPT__P("mlp.bfc2", 1, D, 0, VS_ROLE_ROW, VS_INIT_ZEROS, 0, 0, 1);
                l->unit.forward = gpt_mlp_forward;
                l->unit.backward = gpt_mlp_backward;
                l->unit.backward_input = gpt_mlp_backward_input;
                l->unit.backward_weight = gpt_mlp_backward_weight;
                l->unit.flops = (double)(2 * T * D * F * 2 + 10 * T * D + 20 * T * F);
            }
#undef GPT__P
        }
        int64_t np = 0;
        for (int i = 0; i < l->nparams; i++)
            np += l->params[i].shape[0] * (l->params[i].ndim > 1 ? l->params[i].shape[1] : 1);
        l->unit.params = np;
        nl++;
    }
    out->layers = st->layers;
    out->nlayers = nl;
    out->seed = c->seed;
    return VS_OK;
}

/* Every parameter of a model gpt_model filled in st stored in dt: VS_F32 (the
   default), VS_BF16 or VS_F16 (the units then run gpt_kernels.h's kernels, on
   the host too; vs_train_desc.grad_fp32 keeps the gradients in f32). */
GPT__FN vs_result gpt_model_dtype(gpt_model_storage* st, vs_dtype dt)
{
    if (!st) return vs_set_error(VS_ERR_NULL, "gpt_model_dtype: st is NULL");
    if (dt != VS_F32 && dt != VS_BF16 && dt != VS_F16)
        return vs_set_error(VS_ERR_INVALID, "gpt_model_dtype: dtype %s (f32, bf16 or f16)", vs_dtype_name(dt));
    for (int u = 0; u < 2 + 2 * st->cfg.layers; u++)
        for (int i = 0; i < st->layers[u].nparams; i++) st->layers[u].params[i].dtype = dt;
    return VS_OK;
}

/* Parameters of the model (wte once). */
GPT__FN int64_t gpt_param_count(const gpt_config* c)
{
    int64_t V = c->vocab, T = c->seq, D = c->dim;
    return V * D + T * D + 2 * D + c->layers * (12 * D * D + 12 * D);
}

// >>data -----------------------------------------------------------------------

GPT__FN uint64_t gpt__mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* The global batch of a step (the same on every rank): rows x seq tokens and
   their targets, the next token. Each row counts from a random start by a
   random stride s in {1, 2, 3} modulo V, so a token's successor depends on the
   stride: seen from one token alone the next one is one of three (loss ln 3);
   the previous token tells the stride (attention), which leaves only the first
   position uncertain. The loss falls from ln V quickly. */
GPT__FN void gpt_batch(const gpt_config* c, int64_t step, int rows, int32_t* tokens, int32_t* targets)
{
    int64_t V = c->vocab, T = c->seq;
    for (int r = 0; r < rows; r++) {
        uint64_t h = gpt__mix(gpt__mix((uint64_t)step * 0x100000001B3ull + 17) ^ (uint64_t)r);
        int64_t start = (int64_t)(h % (uint64_t)V), stride = 1 + (int64_t)((h >> 32) % 3);
        for (int64_t t = 0; t < T; t++) {
            tokens[r * T + t] = (int32_t)((start + t * stride) % V);
            targets[r * T + t] = (int32_t)((start + (t + 1) * stride) % V);
        }
    }
}

/* The model's data inputs as vescale's global batch (vs_train_step): "tokens"
   and "targets", i32 [rows, T], in the caller's buffers (gpt_batch fills them
   with T = cfg.seq; a shorter T is fine). */
GPT__FN vs_batch gpt_batch_view(int64_t rows, int64_t T, int32_t* tokens, int32_t* targets)
{
    vs_batch b;
    memset(&b, 0, sizeof b);
    b.n = 2;
    b.name[0] = "tokens", b.name[1] = "targets";
    b.dtype[0] = b.dtype[1] = VS_I32;
    b.ndim[0] = b.ndim[1] = 2;
    b.shape[0][0] = b.shape[1][0] = rows;
    b.shape[0][1] = b.shape[1][1] = T;
    b.data[0] = tokens, b.data[1] = targets;
    return b;
}

#endif // GPT_H
