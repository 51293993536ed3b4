/* flat_trainer.c - a small GPT trained in plain C the way single-file trainers are
   written (llm.c's train_gpt2.c is the best known): every parameter in ONE flat
   float buffer and every gradient in another of the same layout, tensors grouped by
   kind across layers (all layers' ln_1 weights, then all layers' ln_1 biases, then
   all layers' qkv weights, ...), an array of pointers into the flat buffer, forward
   and backward as plain loops, and its own AdamW over the flat buffers.

   It is also a manual for porting such a trainer to vescale, in two steps. Built
   with -DDP the same file is its data-parallel port, with -DDP_TP the DP x TP one
   (DP_TP defines DP: the DP form and TP's lines). Everything a port changes is
   inside `#ifdef DP ...` / `#ifdef DP_TP ...` (`#else`, `#endif`), so the three
   forms are this file read three ways (tests/flat_trainer_diff.sh prints the diffs
   from the single-device form; README.md gives their sizes).

   Single device (no vescale at all):
       cc -std=c99 -O2 examples/flat_trainer.c -o flat_trainer -lm
       ./flat_trainer --steps 20              a loss per step
   Data parallel (vescale_mesh.h + vescale_ddp.h; ranks are threads of this process):
       cc -std=c99 -O2 -I. -DDP examples/flat_trainer.c -o flat_trainer_dp -lpthread -lm
       ./flat_trainer_dp --dp 2 --steps 20    the same losses (within 1e-6)
   DP x TP:
       cc -std=c99 -O2 -I. -DDP_TP examples/flat_trainer.c -o flat_trainer_dp_tp -lpthread -lm
       ./flat_trainer_dp_tp --dp 2 --tp 2 --steps 20
   trains on one rank, then on DP x TP thread ranks, prints both losses per step and
   their largest relative difference, and exits 1 when it is above 1e-6.
   FSDP (ZeRO-3: -DFSDP, which defines DP: the DP form and ZeRO-3's lines):
       cc -std=c99 -O2 -I. -DFSDP examples/flat_trainer.c -o flat_trainer_fsdp -lpthread -lm
       ./flat_trainer_fsdp --dp 2 --steps 20  the same losses (within 1e-6)
   DDP keeps the parameters (copied in at registration), gradients and AdamW state
   sharded; the layer loop gathers a layer before its forward and its backward
   (vs_ddp_gather: the next one is prefetched) and releases it after, and reads the
   gathered views and DDP's gradients instead of the flat buffers (PL, GL).

   What the port does:
   - parameters and gradients stay in the trainer's flat buffers (DP x TP: each
     rank's hold its TP shards). Every tensor of every layer is registered with vescale's
     DDP as a view into them (`storage`, `grad_storage`: used in place) under its own name
     ("h.1.attn.qkv.weight"), layer by layer, one bucket per layer (`ready_group`):
     a layer's gradients start their DP reduction as soon as its backward ends
     (vs_ddp_group_ready, one call a layer), although they lie all over the
     gradient buffer. The trainer still zeroes its gradients itself, once a step
     (vs_ddp_desc.trainer_zero_grad: DDP writes no zeros into them).
   - its clip and AdamW loop become one vs_ddp_step: it ends the gradient sync,
     clips (vs_ddp_desc.max_grad_norm; vs_ddp_grad_norm reads the norm) and steps
     vescale's ZeRO-1 (each DP rank steps 1/DP of every
     bucket and keeps the moments of that part only; the rest of the parameters
     arrive by all-gathers straight into the flat buffer, first layer first, which
     run on while the next batch loads: vs_ddp_wait_params waits for them before
     the next forward reads them).
   - DP x TP: tensor parallel (Megatron): qkv and fc are column-parallel (a TP rank
     holds NH/TP heads and 4C/TP hidden units), the attention and MLP projections
     row-parallel (partial sums added up by vs_tp_reduce_forward); the gradients of
     the column-parallel layers' inputs are summed by vs_tp_copy_backward.
   - init: every rank builds the whole model as the single-device trainer does (a
     checkpoint would be loaded the same way); DP x TP keeps its shards
     (vs_redistribute).

   Why the runs agree to ~1e-7 and not bit for bit: TP and DP sum the same numbers in
   another order (two partial sums over heads or hidden units, two half-batch means). */
#ifdef DP_TP
#define DP /* the DP x TP form is the DP form and TP's lines (a switch, in no form) */
#endif
#ifdef FSDP
#define DP /* the FSDP form is the DP form with ZeRO-3's lines (a switch, in no form) */
#endif
#ifdef DP
#define VESCALE_IMPLEMENTATION
#include "vescale_ddp.h" /* first: it sets _POSIX_C_SOURCE for the system headers */
#define vsCheck(call) ((call) == VS_OK ? (void)0 : (fprintf(stderr, "%s: %s\n", #call, vs_last_error()), exit(1)))
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SEQ 64
#define MAX_STEPS 1000

// ----------------------------------------------------------------------------
// the layers, forward and backward, on plain float arrays

static void encoder_forward(float* out, const int* inp, const float* wte, const float* wpe, int B, int T, int C)
{
    for (int bt = 0; bt < B * T; bt++) {
        const float* w = wte + (size_t)inp[bt] * C;
        const float* p = wpe + (size_t)(bt % T) * C;
        for (int i = 0; i < C; i++) out[(size_t)bt * C + i] = w[i] + p[i];
    }
}

static void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* inp, int B, int T, int C)
{
    for (int bt = 0; bt < B * T; bt++)
        for (int i = 0; i < C; i++) {
            dwte[(size_t)inp[bt] * C + i] += dout[(size_t)bt * C + i];
            dwpe[(size_t)(bt % T) * C + i] += dout[(size_t)bt * C + i];
        }
}

static void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                              const float* b, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float* x = inp + (size_t)n * C;
        float m = 0, v = 0;
        for (int i = 0; i < C; i++) m += x[i];
        m /= C;
        for (int i = 0; i < C; i++) v += (x[i] - m) * (x[i] - m);
        float s = 1.0f / sqrtf(v / C + 1e-5f);
        for (int i = 0; i < C; i++) out[(size_t)n * C + i] = (x[i] - m) * s * w[i] + b[i];
        mean[n] = m, rstd[n] = s;
    }
}

static void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                               const float* w, const float* mean, const float* rstd, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *d = dout + (size_t)n * C;
        float dmean = 0, dmean_norm = 0; // means over i of dnorm and dnorm * norm
        for (int i = 0; i < C; i++) {
            float norm = (x[i] - mean[n]) * rstd[n];
            dmean += w[i] * d[i];
            dmean_norm += w[i] * d[i] * norm;
        }
        dmean /= C, dmean_norm /= C;
        for (int i = 0; i < C; i++) {
            float norm = (x[i] - mean[n]) * rstd[n];
            db[i] += d[i];
            dw[i] += norm * d[i];
            dinp[(size_t)n * C + i] += (w[i] * d[i] - dmean - norm * dmean_norm) * rstd[n];
        }
    }
}

/* out[N, OC] = inp[N, IC] times w[OC, IC] transposed, plus bias[OC] (bias may be NULL). */
static void matmul_forward(float* out, const float* inp, const float* w, const float* bias, int N, int IC, int OC)
{
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            float s = bias ? bias[o] : 0.0f;
            for (int i = 0; i < IC; i++) s += inp[(size_t)n * IC + i] * w[(size_t)o * IC + i];
            out[(size_t)n * OC + o] = s;
        }
}

/* Adds the gradients of matmul_forward's input, weight and bias (db may be NULL). */
static void matmul_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                            int N, int IC, int OC)
{
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            float d = dout[(size_t)n * OC + o];
            for (int i = 0; i < IC; i++) dinp[(size_t)n * IC + i] += w[(size_t)o * IC + i] * d;
        }
    for (int o = 0; o < OC; o++)
        for (int n = 0; n < N; n++) {
            float d = dout[(size_t)n * OC + o];
            if (db) db[o] += d;
            for (int i = 0; i < IC; i++) dw[(size_t)o * IC + i] += inp[(size_t)n * IC + i] * d;
        }
}

/* Causal self-attention of NH heads of size hs. qkv [B, T, 3, NH * hs] (q, k, v);
   att [B, NH, T, T] keeps the softmax weights for the backward; out [B, T, NH * hs]. */
static void attention_forward(float* out, float* att, const float* qkv, int B, int T, int NH, int hs)
{
    const int AC = NH * hs;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH; h++) {
                const float* q = qkv + ((size_t)b * T + t) * 3 * AC + h * hs;
                float* a = att + (((size_t)b * NH + h) * T + t) * T;
                float* o = out + ((size_t)b * T + t) * AC + h * hs;
                float mx = -INFINITY, sum = 0;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float* k = qkv + ((size_t)b * T + t2) * 3 * AC + AC + h * hs;
                    float s = 0;
                    for (int i = 0; i < hs; i++) s += q[i] * k[i];
                    a[t2] = s * scale;
                    if (a[t2] > mx) mx = a[t2];
                }
                for (int t2 = 0; t2 <= t; t2++) sum += a[t2] = expf(a[t2] - mx);
                for (int t2 = 0; t2 < T; t2++) a[t2] = t2 <= t ? a[t2] / sum : 0.0f;
                for (int i = 0; i < hs; i++) o[i] = 0;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float* v = qkv + ((size_t)b * T + t2) * 3 * AC + 2 * AC + h * hs;
                    for (int i = 0; i < hs; i++) o[i] += a[t2] * v[i];
                }
            }
}

static void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T,
                               int NH, int hs)
{
    const int AC = NH * hs;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH; h++) {
                const size_t qrow = ((size_t)b * T + t) * 3 * AC + h * hs;
                const float* a = att + (((size_t)b * NH + h) * T + t) * T;
                const float* d = dout + ((size_t)b * T + t) * AC + h * hs;
                float da[MAX_SEQ], dot = 0; // d loss / d a[t2], and its mean under a
                for (int t2 = 0; t2 <= t; t2++) {
                    const size_t vrow = ((size_t)b * T + t2) * 3 * AC + 2 * AC + h * hs;
                    da[t2] = 0;
                    for (int i = 0; i < hs; i++) {
                        da[t2] += d[i] * qkv[vrow + i];
                        dqkv[vrow + i] += a[t2] * d[i];
                    }
                    dot += a[t2] * da[t2];
                }
                for (int t2 = 0; t2 <= t; t2++) {
                    const size_t krow = ((size_t)b * T + t2) * 3 * AC + AC + h * hs;
                    float ds = a[t2] * (da[t2] - dot) * scale; // through the softmax and the scale
                    for (int i = 0; i < hs; i++) {
                        dqkv[qrow + i] += ds * qkv[krow + i];
                        dqkv[krow + i] += ds * qkv[qrow + i];
                    }
                }
            }
}

#define GELU_SCALE 0.7978845608f /* sqrt(2 / pi) */
static void gelu_forward(float* out, const float* inp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + 0.044715f * x * x * x)));
    }
}

static void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i], th = tanhf(GELU_SCALE * (x + 0.044715f * x * x * x));
        float du = GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du) * dout[i];
    }
}

static void residual_forward(float* out, const float* a, const float* b, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

static void residual_backward(float* da, float* db, const float* dout, size_t n)
{
    for (size_t i = 0; i < n; i++) da[i] += dout[i], db[i] += dout[i];
}

/* Softmax of each row of logits [N, V] into probs, -log probs[target] into losses;
   returns the mean loss. */
static double crossentropy_forward(float* probs, float* losses, const float* logits, const int* targets, int N, int V)
{
    double sum = 0;
    for (int n = 0; n < N; n++) {
        const float* x = logits + (size_t)n * V;
        float* p = probs + (size_t)n * V;
        float mx = x[0], z = 0;
        for (int i = 1; i < V; i++) mx = x[i] > mx ? x[i] : mx;
        for (int i = 0; i < V; i++) z += p[i] = expf(x[i] - mx);
        for (int i = 0; i < V; i++) p[i] /= z;
        losses[n] = -logf(p[targets[n]]);
        sum += losses[n];
    }
    return sum / N;
}

static void crossentropy_backward(float* dlogits, const float* probs, const int* targets, int N, int V, float dloss)
{
    for (int n = 0; n < N; n++)
        for (int i = 0; i < V; i++)
            dlogits[(size_t)n * V + i] += (probs[(size_t)n * V + i] - (i == targets[n] ? 1.0f : 0.0f)) * dloss;
}

// ----------------------------------------------------------------------------
// the model: parameters and activations in flat buffers, grouped by kind

typedef struct {
    int vocab_size;  // V
    int max_seq_len; // maxT
    int num_layers;  // L
    int num_heads;   // NH
    int channels;    // C
} GPTConfig;

/* Parameter kinds, in the order of the flat buffer. A per-layer kind holds its L
   tensors back to back: layer l's is the l-th of L equal parts. */
enum {
    WTE, WPE,                                  // token embedding [V, C] (also the LM head), positions [maxT, C]
    LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, // per layer: attention
    LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB,     // per layer: MLP
    LNFW, LNFB,                                // final layernorm [C]
    NUM_PARAMETER_TENSORS
};
static int per_layer(int k) { return k >= LN1W && k <= FCPROJB; }
static int decays(int k) { return k == WTE || k == WPE || k == QKVW || k == ATTPROJW || k == FCW || k == FCPROJW; }

/* The shape of one tensor of kind k (one layer's); returns its number of dims. */
static int param_shape(const GPTConfig* c, int k, int64_t shape[3])
{
    const int C = c->channels;
    switch (k) {
    case WTE: shape[0] = c->vocab_size, shape[1] = C; return 2;
    case WPE: shape[0] = c->max_seq_len, shape[1] = C; return 2;
    case QKVW: shape[0] = 3, shape[1] = C, shape[2] = C; return 3; // q, k, v: [C out, C in] each
    case QKVB: shape[0] = 3, shape[1] = C; return 2;
    case ATTPROJW: shape[0] = C, shape[1] = C; return 2;
    case FCW: shape[0] = 4 * C, shape[1] = C; return 2;
    case FCB: shape[0] = 4 * C; return 1;
    case FCPROJW: shape[0] = C, shape[1] = 4 * C; return 2;
    default: shape[0] = C; return 1; // layernorms, the projections' biases
    }
}
#ifdef DP

/* What vescale needs besides: each kind's name (checkpoints and messages use it; %d: the layer). */
static const char* names[NUM_PARAMETER_TENSORS] = {
    "wte", "wpe", "h.%d.ln_1.weight", "h.%d.ln_1.bias", "h.%d.attn.qkv.weight", "h.%d.attn.qkv.bias",
    "h.%d.attn.proj.weight", "h.%d.attn.proj.bias", "h.%d.ln_2.weight", "h.%d.ln_2.bias", "h.%d.mlp.fc.weight",
    "h.%d.mlp.fc.bias", "h.%d.mlp.proj.weight", "h.%d.mlp.proj.bias", "ln_f.weight", "ln_f.bias"};
#ifdef DP_TP
/* The dim TP shards (-1: none): qkv and fc column-parallel (this rank's heads of q, k
   and v; its hidden units), the projections' weights row-parallel (their columns). */
static const int tp_dim[NUM_PARAMETER_TENSORS] = {-1, -1, -1, -1, 1, 1, 1, -1, -1, -1, 0, 0, 1, -1, -1, -1};
#endif
#endif

/* Activation kinds; the per-layer ones hold L tensors back to back as well. */
enum {
    ENCODED, LN1, LN1_MEAN, LN1_RSTD, QKV, ATT, ATTY, ATTPROJ, RESIDUAL2, LN2, LN2_MEAN, LN2_RSTD,
    FCH, FCH_GELU, FCPROJ, RESIDUAL3, LNF, LNF_MEAN, LNF_RSTD, LOGITS, PROBS, LOSSES, NUM_ACTIVATION_TENSORS
};

typedef struct {
    GPTConfig config;
    size_t param_sizes[NUM_PARAMETER_TENSORS];
    size_t num_parameters;
    float* params_memory; // every parameter: one flat buffer
    float* grads_memory;  // every gradient: the same layout
    float* params[NUM_PARAMETER_TENSORS]; // kind k (all layers) in params_memory
    float* grads[NUM_PARAMETER_TENSORS];
#ifndef DP
    float* m_memory; // AdamW moments, the same layout again
    float* v_memory;
#endif
    int B, T; // the batch the activations are sized for
    size_t act_sizes[NUM_ACTIVATION_TENSORS];
    float* acts_memory;
    float* grads_acts_memory;
    float* acts[NUM_ACTIVATION_TENSORS];
    float* grads_acts[NUM_ACTIVATION_TENSORS];
    const int *inputs, *targets; // of the last forward
    double mean_loss;
#ifdef DP
    vs_ddp* ddp;
#ifdef FSDP
    int first[NUM_PARAMETER_TENSORS]; // kind k's first parameter index in the DDP (layer l: + l)
#endif
#ifdef DP_TP
    int tp;           // this rank's TP group: tp ranks, holding a 1/tp shard of the sharded kinds
    vs_mesh *mesh, *tp_mesh;
#endif
#endif
} GPT;

/* Layer l's tensor of kind k in a buffer grouped by kind. */
static float* layer(float* const* kinds_of, const size_t* sizes, int k, int l, int L)
{
    return kinds_of[k] + (size_t)l * (sizes[k] / (size_t)L);
}
#ifdef FSDP
/* ZeRO-3: layer l's tensors are DDP's gathered views (vs_ddp_gather) and its
   gradients DDP's buffers, each its own parameter index. */
#define PL(k) ((float*)vs_ddp_param(m->ddp, m->first[k] + l))
#define GL(k) ((float*)vs_ddp_grad(m->ddp, m->first[k] + l))
#else
#define PL(k) layer(m->params, m->param_sizes, k, l, L)
#define GL(k) layer(m->grads, m->param_sizes, k, l, L)
#endif
#define AL(k) layer(m->acts, m->act_sizes, k, l, L)
#define DL(k) layer(m->grads_acts, m->act_sizes, k, l, L)

/* The sizes the layers work with. */
typedef struct {
    int C, NH, hs, AC, H; // channels, heads, head size, attention channels (NH * hs), MLP hidden units
} Dims;
static Dims dims(const GPT* m)
{
    Dims d;
    d.C = m->config.channels;
    d.NH = m->config.num_heads;
    d.hs = d.C / d.NH;
    d.H = 4 * d.C;
#ifdef DP_TP
    if (m->tp > 1) d.NH /= m->tp, d.H /= m->tp;
#endif
    d.AC = d.NH * d.hs;
    return d;
}

/* Points every kind into one calloc'd buffer of sizes[], in kind order. */
static float* point_into(float** kinds_of, const size_t* sizes, int n)
{
    size_t total = 0;
    for (int k = 0; k < n; k++) total += sizes[k];
    float* mem = (float*)calloc(total, sizeof(float));
    if (!mem) {
        fprintf(stderr, "out of memory (%zu floats)\n", total);
        exit(EXIT_FAILURE);
    }
    for (size_t k = 0, off = 0; k < (size_t)n; off += sizes[k], k++) kinds_of[k] = mem + off;
    return mem;
}

/* Allocates the parameters and gradients: each kind's L tensors (or one) of its shape. */
static void gpt_alloc(GPT* m, const GPTConfig* config)
{
    m->config = *config;
    m->num_parameters = 0;
    for (int k = 0; k < NUM_PARAMETER_TENSORS; k++) {
        int64_t shape[3];
        int nd = param_shape(config, k, shape);
        size_t n = per_layer(k) ? (size_t)config->num_layers : 1;
        for (int i = 0; i < nd; i++) n *= (size_t)shape[i];
#ifdef DP_TP
        if (tp_dim[k] >= 0 && m->tp > 1) n /= (size_t)m->tp; // this rank's shard
#endif
        m->param_sizes[k] = n;
        m->num_parameters += n;
    }
    m->params_memory = point_into(m->params, m->param_sizes, NUM_PARAMETER_TENSORS);
    m->grads_memory = point_into(m->grads, m->param_sizes, NUM_PARAMETER_TENSORS);
}

/* A small deterministic random number generator (splitmix64). */
static uint64_t rng_next(uint64_t* s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float rng_normal(uint64_t* s)
{
    float u1 = ((float)(rng_next(s) >> 40) + 0.5f) / 16777216.0f, u2 = (float)(rng_next(s) >> 40) / 16777216.0f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

/* GPT-2's init: weights N(0, 0.02), projections into the residual scaled down by
   sqrt(2L), layernorm weights 1, biases 0. */
static void gpt_init(GPT* m, uint64_t seed)
{
    const float proj_std = 0.02f / sqrtf(2.0f * (float)m->config.num_layers);
    for (int k = 0; k < NUM_PARAMETER_TENSORS; k++)
        for (size_t i = 0; i < m->param_sizes[k]; i++) {
            float* p = &m->params[k][i];
            if (k == LN1W || k == LN2W || k == LNFW)
                *p = 1.0f;
            else if (decays(k))
                *p = rng_normal(&seed) * (k == ATTPROJW || k == FCPROJW ? proj_std : 0.02f);
            else
                *p = 0.0f;
        }
}

/* Sizes the activations (and their gradients) for B x T. */
static void gpt_alloc_activations(GPT* m, int B, int T)
{
    const Dims d = dims(m);
    const size_t L = (size_t)m->config.num_layers, BT = (size_t)B * T, V = (size_t)m->config.vocab_size;
    const size_t C = (size_t)d.C;
    size_t* s = m->act_sizes;
    s[ENCODED] = BT * C;
    s[LN1] = s[ATTPROJ] = s[RESIDUAL2] = s[LN2] = s[FCPROJ] = s[RESIDUAL3] = L * BT * C;
    s[LN1_MEAN] = s[LN1_RSTD] = s[LN2_MEAN] = s[LN2_RSTD] = L * BT;
    s[QKV] = L * BT * 3 * (size_t)d.AC;
    s[ATT] = L * (size_t)B * (size_t)d.NH * (size_t)T * (size_t)T;
    s[ATTY] = L * BT * (size_t)d.AC;
    s[FCH] = s[FCH_GELU] = L * BT * (size_t)d.H;
    s[LNF] = BT * C;
    s[LNF_MEAN] = s[LNF_RSTD] = s[LOSSES] = BT;
    s[LOGITS] = s[PROBS] = BT * V;
    m->acts_memory = point_into(m->acts, m->act_sizes, NUM_ACTIVATION_TENSORS);
    m->grads_acts_memory = point_into(m->grads_acts, m->act_sizes, NUM_ACTIVATION_TENSORS);
    m->B = B, m->T = T;
}
#ifdef DP_TP

/* Row-parallel matmul_forward: w holds this TP rank's IC input columns, so out gets a
   partial sum; vescale adds it up over TP and then the replicated bias, once. */
static void matmul_forward_row_parallel(GPT* m, float* out, const float* inp, const float* w, const float* bias, int N,
                                        int IC, int OC)
{
    matmul_forward(out, inp, w, NULL, N, IC, OC);
    vsCheck(vs_tp_reduce_forward_bias(m->tp_mesh, out, N, OC, VS_F32, bias, VS_F32));
}
#endif

#ifdef FSDP

/* Gathers group g (1: the embeddings, 2 + l: layer l, 2 + L: ln_f; the next is
   prefetched) and points the whole-model kinds of g at their gathered views. */
static void fsdp_gather(GPT* m, int g)
{
    vsCheck(vs_ddp_gather(m->ddp, g));
    for (int k = 0; k < NUM_PARAMETER_TENSORS; k++)
        if (!per_layer(k) && (k < LN1W ? 1 : 2 + m->config.num_layers) == g)
            m->params[k] = (float*)vs_ddp_param(m->ddp, m->first[k]);
}
/* The whole-model kinds' gradients: DDP's buffers (asked once a backward). */
static void fsdp_grads(GPT* m)
{
    for (int k = 0; k < NUM_PARAMETER_TENSORS; k++)
        if (!per_layer(k)) m->grads[k] = (float*)vs_ddp_grad(m->ddp, m->first[k]);
}
#endif

static void gpt_forward(GPT* m, const int* inputs, const int* targets, int B, int T)
{
    if (!m->acts_memory) gpt_alloc_activations(m, B, T);
    const Dims d = dims(m);
    const int L = m->config.num_layers, V = m->config.vocab_size, C = d.C, BT = B * T;
#ifdef FSDP
    fsdp_gather(m, 1); // held until the backward's end: the LM head is wte
#endif
    encoder_forward(m->acts[ENCODED], inputs, m->params[WTE], m->params[WPE], B, T, C);
    for (int l = 0; l < L; l++) {
#ifdef FSDP
        fsdp_gather(m, 2 + l);
#endif
        float* residual = l == 0 ? m->acts[ENCODED] : layer(m->acts, m->act_sizes, RESIDUAL3, l - 1, L);
        layernorm_forward(AL(LN1), AL(LN1_MEAN), AL(LN1_RSTD), residual, PL(LN1W), PL(LN1B), BT, C);
        matmul_forward(AL(QKV), AL(LN1), PL(QKVW), PL(QKVB), BT, C, 3 * d.AC);
        attention_forward(AL(ATTY), AL(ATT), AL(QKV), B, T, d.NH, d.hs);
#ifdef DP_TP
        matmul_forward_row_parallel(m, AL(ATTPROJ), AL(ATTY), PL(ATTPROJW), PL(ATTPROJB), BT, d.AC, C);
#else
        matmul_forward(AL(ATTPROJ), AL(ATTY), PL(ATTPROJW), PL(ATTPROJB), BT, d.AC, C);
#endif
        residual_forward(AL(RESIDUAL2), residual, AL(ATTPROJ), (size_t)BT * C);
        layernorm_forward(AL(LN2), AL(LN2_MEAN), AL(LN2_RSTD), AL(RESIDUAL2), PL(LN2W), PL(LN2B), BT, C);
        matmul_forward(AL(FCH), AL(LN2), PL(FCW), PL(FCB), BT, C, d.H);
        gelu_forward(AL(FCH_GELU), AL(FCH), (size_t)BT * d.H);
#ifdef DP_TP
        matmul_forward_row_parallel(m, AL(FCPROJ), AL(FCH_GELU), PL(FCPROJW), PL(FCPROJB), BT, d.H, C);
#else
        matmul_forward(AL(FCPROJ), AL(FCH_GELU), PL(FCPROJW), PL(FCPROJB), BT, d.H, C);
#endif
        residual_forward(AL(RESIDUAL3), AL(RESIDUAL2), AL(FCPROJ), (size_t)BT * C);
#ifdef FSDP
        vsCheck(vs_ddp_release(m->ddp, 2 + l));
#endif
    }
#ifdef FSDP
    fsdp_gather(m, 2 + L); // held until its backward
#endif
    float* last = layer(m->acts, m->act_sizes, RESIDUAL3, L - 1, L);
    layernorm_forward(m->acts[LNF], m->acts[LNF_MEAN], m->acts[LNF_RSTD], last, m->params[LNFW], m->params[LNFB], BT,
                      C);
    matmul_forward(m->acts[LOGITS], m->acts[LNF], m->params[WTE], NULL, BT, C, V); // the LM head is wte
    m->mean_loss = crossentropy_forward(m->acts[PROBS], m->acts[LOSSES], m->acts[LOGITS], targets, BT, V);
    m->inputs = inputs, m->targets = targets;
}

/* The gradients of the last forward's mean loss, added into grads. */
static void gpt_backward(GPT* m)
{
    const Dims d = dims(m);
    const int L = m->config.num_layers, V = m->config.vocab_size, C = d.C, B = m->B, T = m->T, BT = B * T;
    size_t total = 0;
    for (int k = 0; k < NUM_ACTIVATION_TENSORS; k++) total += m->act_sizes[k];
    memset(m->grads_acts_memory, 0, total * sizeof(float));
#ifdef FSDP
    fsdp_grads(m);
#endif

    crossentropy_backward(m->grads_acts[LOGITS], m->acts[PROBS], m->targets, BT, V, 1.0f / (float)BT);
    matmul_backward(m->grads_acts[LNF], m->grads[WTE], NULL, m->grads_acts[LOGITS], m->acts[LNF], m->params[WTE], BT,
                    C, V);
    float* last = layer(m->acts, m->act_sizes, RESIDUAL3, L - 1, L);
    float* dlast = layer(m->grads_acts, m->act_sizes, RESIDUAL3, L - 1, L);
    layernorm_backward(dlast, m->grads[LNFW], m->grads[LNFB], m->grads_acts[LNF], last, m->params[LNFW],
                       m->acts[LNF_MEAN], m->acts[LNF_RSTD], BT, C);
#ifdef DP
    vsCheck(vs_ddp_group_ready(m->ddp, 2 + L)); // ln_f's group: its bucket starts its reduction
#endif
#ifdef FSDP
    vsCheck(vs_ddp_release(m->ddp, 2 + L));
#endif
    for (int l = L - 1; l >= 0; l--) {
#ifdef FSDP
        fsdp_gather(m, 2 + l);
#endif
        float* residual = l == 0 ? m->acts[ENCODED] : layer(m->acts, m->act_sizes, RESIDUAL3, l - 1, L);
        float* dresidual = l == 0 ? m->grads_acts[ENCODED] : layer(m->grads_acts, m->act_sizes, RESIDUAL3, l - 1, L);
        residual_backward(DL(RESIDUAL2), DL(FCPROJ), DL(RESIDUAL3), (size_t)BT * C);
        matmul_backward(DL(FCH_GELU), GL(FCPROJW), GL(FCPROJB), DL(FCPROJ), AL(FCH_GELU), PL(FCPROJW), BT, d.H, C);
        gelu_backward(DL(FCH), AL(FCH), DL(FCH_GELU), (size_t)BT * d.H);
        matmul_backward(DL(LN2), GL(FCW), GL(FCB), DL(FCH), AL(LN2), PL(FCW), BT, C, d.H);
#ifdef DP_TP
        vsCheck(vs_tp_copy_backward(m->tp_mesh, DL(LN2), (size_t)BT * C, VS_F32)); // column-parallel input
#endif
        layernorm_backward(DL(RESIDUAL2), GL(LN2W), GL(LN2B), DL(LN2), AL(RESIDUAL2), PL(LN2W), AL(LN2_MEAN),
                           AL(LN2_RSTD), BT, C);
        residual_backward(dresidual, DL(ATTPROJ), DL(RESIDUAL2), (size_t)BT * C);
        matmul_backward(DL(ATTY), GL(ATTPROJW), GL(ATTPROJB), DL(ATTPROJ), AL(ATTY), PL(ATTPROJW), BT, d.AC, C);
        attention_backward(DL(QKV), DL(ATTY), AL(QKV), AL(ATT), B, T, d.NH, d.hs);
        matmul_backward(DL(LN1), GL(QKVW), GL(QKVB), DL(QKV), AL(LN1), PL(QKVW), BT, C, 3 * d.AC);
#ifdef DP_TP
        vsCheck(vs_tp_copy_backward(m->tp_mesh, DL(LN1), (size_t)BT * C, VS_F32)); // column-parallel input
#endif
        layernorm_backward(dresidual, GL(LN1W), GL(LN1B), DL(LN1), residual, PL(LN1W), AL(LN1_MEAN), AL(LN1_RSTD), BT,
                           C);
#ifdef DP
        vsCheck(vs_ddp_group_ready(m->ddp, 2 + l)); // the layer's bucket reduces during the next layer's backward
#endif
#ifdef FSDP
        vsCheck(vs_ddp_release(m->ddp, 2 + l));
#endif
    }
    encoder_backward(m->grads[WTE], m->grads[WPE], m->grads_acts[ENCODED], m->inputs, B, T, C);
#ifdef DP
    vsCheck(vs_ddp_group_ready(m->ddp, 1)); // the embeddings (wte's gradient is complete only now)
#endif
#ifdef FSDP
    vsCheck(vs_ddp_release(m->ddp, 1));
#endif
}

/* Before each backward (the port keeps it: vescale is told, trainer_zero_grad). */
#ifdef FSDP
static void gpt_zero_grad(GPT* m) { vsCheck(vs_ddp_zero_grad(m->ddp)); } // DDP's gradients (owned, accumulated)
#else
static void gpt_zero_grad(GPT* m) { memset(m->grads_memory, 0, m->num_parameters * sizeof(float)); }
#endif
#ifndef DP

/* The trainer's own optimizer (the port hands it to vescale): the gradient clip
   and AdamW. */
/* Scales the gradients to a global L2 norm of at most max_norm; returns the norm. */
static float gpt_clip_grad_norm(GPT* m, float max_norm)
{
    double ss = 0;
    for (size_t i = 0; i < m->num_parameters; i++) ss += (double)m->grads_memory[i] * m->grads_memory[i];
    float norm = (float)sqrt(ss);
    if (norm > max_norm)
        for (size_t i = 0; i < m->num_parameters; i++) m->grads_memory[i] *= max_norm / (norm + 1e-6f);
    return norm;
}

/* AdamW over the flat buffers, step t (1 at the first); weight decay on the matrices only. */
static void gpt_update(GPT* m, float lr, float beta1, float beta2, float eps, float weight_decay, int t)
{
    if (!m->m_memory) {
        m->m_memory = (float*)calloc(m->num_parameters, sizeof(float));
        m->v_memory = (float*)calloc(m->num_parameters, sizeof(float));
        if (!m->m_memory || !m->v_memory) exit(EXIT_FAILURE);
    }
    for (int k = 0; k < NUM_PARAMETER_TENSORS; k++) {
        const float wd = decays(k) ? weight_decay : 0.0f;
        const size_t first = (size_t)(m->params[k] - m->params_memory);
        for (size_t i = first; i < first + m->param_sizes[k]; i++) {
            float g = m->grads_memory[i], p = m->params_memory[i];
            float mom = m->m_memory[i] = beta1 * m->m_memory[i] + (1.0f - beta1) * g;
            float var = m->v_memory[i] = beta2 * m->v_memory[i] + (1.0f - beta2) * g * g;
            float mhat = mom / (1.0f - powf(beta1, (float)t)), vhat = var / (1.0f - powf(beta2, (float)t));
            m->params_memory[i] = p - lr * (mhat / (sqrtf(vhat) + eps) + wd * p);
        }
    }
}
#endif

static void gpt_free(GPT* m)
{
#ifdef DP
    if (m->ddp) vsCheck(vs_ddp_free(m->ddp)); // it uses the flat buffers: first
#ifdef DP_TP
    if (m->mesh) vsCheck(vs_mesh_free(m->mesh));
#endif
#else
    free(m->m_memory);
    free(m->v_memory);
#endif
    free(m->params_memory);
    free(m->grads_memory);
    free(m->acts_memory);
    free(m->grads_acts_memory);
}
#ifdef DP
#ifdef DP_TP

/* Cuts kind k of layer l of `full` (the model as one device has it) to this rank's
   shard in m's flat buffer: Replicate -> Shard, a local slice, no communication. */
static void take_shard(GPT* m, const GPT* full, int k, int l)
{
    const int L = m->config.num_layers;
    vs_dtensor whole = {.layout = {.mesh = m->mesh}, .dtype = VS_F32}; // Replicate on (DP, TP)
    whole.ndim = param_shape(&m->config, k, whole.shape);
    vs_dtensor shard = whole;
    if (tp_dim[k] >= 0) shard.layout.p[1] = vs_shard(tp_dim[k]);
    whole.data = layer(full->params, full->param_sizes, k, l, L);
    shard.data = PL(k);
    vsCheck(vs_redistribute(&whole, &shard));
}
#endif

/* m on the world's ranks with vescale's DDP (ZeRO-1 AdamW). DP: all the world's
   ranks, no mesh. DP x TP: on a (DP, TP) mesh, m's flat buffers hold this rank's
   shards of `full`. */
#ifdef DP_TP
static void gpt_parallelize(GPT* m, const GPT* full, vs_world* w, int dp, int tp)
{
    vsCheck(vs_mesh_init(w, &(vs_mesh_desc){.shape = {dp, tp}}, &m->mesh)); // dims (DP, TP)
    vsCheck(vs_mesh_submesh(m->mesh, "TP", &m->tp_mesh));
    m->tp = tp;
    gpt_alloc(m, &full->config);
    for (int k = 0; k < NUM_PARAMETER_TENSORS; k++)
        for (int l = 0; l < (per_layer(k) ? m->config.num_layers : 1); l++) take_shard(m, full, k, l);
    vsCheck(vs_ddp_init(&(vs_ddp_desc){.mesh = m->mesh, .zero = VS_ZERO_1, .trainer_zero_grad = 1,
#else
#ifdef FSDP
static void gpt_parallelize(GPT* m, vs_world* w)
{
    vsCheck(vs_ddp_init(&(vs_ddp_desc){.world = w, .zero = VS_ZERO_3, // FSDP: DDP holds 1/DP of everything
#else
static void gpt_parallelize(GPT* m, vs_world* w)
{
    vsCheck(vs_ddp_init(&(vs_ddp_desc){.world = w, .zero = VS_ZERO_1, .trainer_zero_grad = 1, // DP, every rank
#endif
#endif
                                       .optim = {.kind = VS_OPTIM_ADAMW, .beta2 = 0.95, .weight_decay = 0.1},
                                       .max_grad_norm = 1.0}, // vs_ddp_step ends the gradient sync and clips
                        &m->ddp));
    const int L = m->config.num_layers;
    for (int k = 0; k < NUM_PARAMETER_TENSORS; k++) { // each kind for all its layers: views used in place
#ifdef FSDP
        vs_ddp_param_desc p = {.name = names[k], .dtype = VS_F32, .no_decay = !decays(k), .data = m->params[k],
                               .layers = per_layer(k) ? L : 1, // copied in: DDP keeps this rank's 1/DP
#else
        vs_ddp_param_desc p = {.name = names[k], .dtype = VS_F32, .no_decay = !decays(k), .storage = m->params[k],
                               .grad_storage = m->grads[k], .layers = per_layer(k) ? L : 1, // a bucket a layer:
#endif
                               .ready_group = k < LN1W ? 1 : per_layer(k) ? 2 : 2 + L};      // 1, 2 + l, 2 + L
        p.ndim = param_shape(&m->config, k, p.shape);
#ifdef DP_TP
        if (tp_dim[k] >= 0) p.placements[1] = vs_shard(tp_dim[k]);
#endif
#ifdef FSDP
        vsCheck(vs_ddp_add_param(m->ddp, &p, &m->first[k]));
#else
        vsCheck(vs_ddp_add_param(m->ddp, &p, NULL));
#endif
    }
    vsCheck(vs_ddp_finalize(m->ddp));
}
#endif

// ----------------------------------------------------------------------------
// data and training

/* The task: row r is x, x + k, x + 2k, ... (mod V) with x and k (1..4) drawn from r,
   so the next token follows from the last two. Rows are numbered over the whole run
   (step * batch + b): any slice of a batch reads the same rows. */
static void load_batch(int* inputs, int* targets, int B, int T, int V, int64_t first_row)
{
    for (int b = 0; b < B; b++) {
        uint64_t s = (uint64_t)(first_row + b), h = rng_next(&s);
        int x = (int)(h % (uint64_t)V), k = 1 + (int)((h >> 32) % 4);
        for (int t = 0; t < T; t++) {
            inputs[b * T + t] = (x + t * k) % V;
            targets[b * T + t] = (x + (t + 1) * k) % V;
        }
    }
}

static const GPTConfig config = {.vocab_size = 64, .max_seq_len = 16, .num_layers = 2, .num_heads = 4, .channels = 32};
enum { BATCH = 8, SEQ = 16 }; // the global batch: BATCH rows of SEQ tokens
#define LR 1e-2f

typedef struct {
    int steps;
    double loss[MAX_STEPS], norm[MAX_STEPS]; // per step
#ifdef DP
    int dp;
#endif
#ifdef DP_TP
    int tp;
#endif
} Run;

#ifdef DP
static int train(vs_world* w, void* arg)
{
    Run* run = (Run*)arg;
#ifdef DP_TP
    GPT full = {0}, model = {0};
    gpt_alloc(&full, &config); // the whole model, as on one device
    gpt_init(&full, 1234);
    gpt_parallelize(&model, &full, w, run->dp, run->tp);
    gpt_free(&full);
    const int B = BATCH / run->dp, dp_rank = vs_mesh_coord_along(model.mesh, "DP"); // this rank's rows
#else
    GPT model = {0};
    gpt_alloc(&model, &config);
    gpt_init(&model, 1234);
    gpt_parallelize(&model, w);
    const int B = BATCH / run->dp, dp_rank = vs_world_rank(w); // this rank's rows
#endif
#else
static int train(Run* run)
{
    GPT model = {0};
    gpt_alloc(&model, &config);
    gpt_init(&model, 1234);
    const int B = BATCH;
#endif
    int inputs[BATCH * SEQ], targets[BATCH * SEQ];
    for (int step = 0; step < run->steps; step++) {
#ifdef DP
        load_batch(inputs, targets, B, SEQ, config.vocab_size, (int64_t)step * BATCH + dp_rank * B);
        vsCheck(vs_ddp_wait_params(model.ddp)); // the last step's all-gathers land in the flat buffer
#else
        load_batch(inputs, targets, B, SEQ, config.vocab_size, (int64_t)step * BATCH);
#endif
        gpt_forward(&model, inputs, targets, B, SEQ);
        gpt_zero_grad(&model);
        gpt_backward(&model);
#ifdef DP
        vsCheck(vs_ddp_step(model.ddp, LR));
        vsCheck(vs_all_reduce(vs_world_comm(w), &model.mean_loss, &model.mean_loss, 1, VS_F64, VS_OP_AVG, NULL));
        if (vs_world_rank(w) == 0) run->loss[step] = model.mean_loss, run->norm[step] = vs_ddp_grad_norm(model.ddp);
#else
        float norm = gpt_clip_grad_norm(&model, 1.0f);
        gpt_update(&model, LR, 0.9f, 0.95f, 1e-8f, 0.1f, step + 1);
        run->loss[step] = model.mean_loss, run->norm[step] = norm;
#endif
    }
    gpt_free(&model);
    return 0;
}

int main(int argc, char** argv)
{
    Run run = {.steps = 20};
#ifdef DP
    run.dp = 2;
#endif
#ifdef DP_TP
    run.tp = 2;
#endif
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--steps"))
            run.steps = atoi(argv[++i]);
#ifdef DP
        else if (i + 1 < argc && !strcmp(argv[i], "--dp"))
            run.dp = atoi(argv[++i]);
#endif
#ifdef DP_TP
        else if (i + 1 < argc && !strcmp(argv[i], "--tp"))
            run.tp = atoi(argv[++i]);
#endif
        else
            run.steps = 0;
    }
#ifdef DP_TP
    if (run.steps < 1 || run.steps > MAX_STEPS || run.dp < 1 || BATCH % run.dp || run.tp < 1 ||
        config.num_heads % run.tp) {
        fprintf(stderr, "usage: %s [--steps 1..%d] [--dp D] [--tp T] (D divides %d, T divides %d)\n", argv[0],
                MAX_STEPS, BATCH, config.num_heads);
        return 2;
    }
    Run one = run; // the reference: the same trainer on one rank
    one.dp = one.tp = 1;
    if (vs_launch(1, train, &one) != VS_OK || vs_launch(run.dp * run.tp, train, &run) != VS_OK) {
        fprintf(stderr, "vs_launch: %s\n", vs_last_error());
        return 1;
    }
    double worst = 0;
    printf("step  loss 1 rank     loss DP%dxTP%d   grad norm   rel. diff\n", run.dp, run.tp);
    for (int s = 0; s < run.steps; s++) {
        double rel = fabs(run.loss[s] - one.loss[s]) / fabs(one.loss[s]);
        if (!(rel <= worst)) worst = rel; // NaN counts as the worst
        printf("%4d  %.9f  %.9f  %9.6f   %.2e\n", s, one.loss[s], run.loss[s], run.norm[s], rel);
    }
    printf("largest relative difference %.3g (bar 1e-6)\n", worst);
    return !(worst <= 1e-6);
#else
#ifdef DP
    if (run.steps < 1 || run.steps > MAX_STEPS || run.dp < 1 || BATCH % run.dp) {
        fprintf(stderr, "usage: %s [--steps 1..%d] [--dp D] (D divides %d)\n", argv[0], MAX_STEPS, BATCH);
        return 2;
    }
    vsCheck(vs_launch(run.dp, train, &run));
#else
    if (run.steps < 1 || run.steps > MAX_STEPS) {
        fprintf(stderr, "usage: %s [--steps 1..%d]\n", argv[0], MAX_STEPS);
        return 2;
    }
    train(&run);
#endif
    printf("step  loss         grad norm\n");
    for (int s = 0; s < run.steps; s++) printf("%4d  %.9f  %9.6f\n", s, run.loss[s], run.norm[s]);
    return 0;
#endif
}
