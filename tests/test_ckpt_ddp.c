/* test_ckpt_ddp.c - vs_ckpt_save_ddp / vs_ckpt_load_ddp across meshes and ZeRO stages.

   A small model on a (DP, TP) mesh: w0 f32 [8,6] Shard(0) over TP, w1 f32 [6,9]
   Shard(1) over TP (uneven: 5 + 4), b f32 [7] Replicate (no decay), h bf16 [6,4]
   Shard(1) over TP (so fp32 master weights exist). AdamW with weight decay, a
   cosine schedule, gradient clipping that bites on some steps, small buckets.

   The uninterrupted run trains S + T steps at DP=4 (ZeRO-1, mesh (4,1)) on 4
   thread ranks and saves its whole state after step S with an extra blob (the
   trainer's RNG state). The checkpoint is then loaded
     - at DP=2 under ZeRO-2 (mesh (2,1), 2 ranks),
     - at DP=1 under ZeRO-0 (mesh (1,1), 1 rank),
     - at DP=2 x TP=2 under ZeRO-1 (mesh (2,2), 4 ranks),
     - at DP=4 under ZeRO-1 again (the same mesh),
   each run goes on for T steps, and its parameters and optimizer states (fp32
   masters, exp_avg, exp_avg_sq), mapped to global indices, must equal the
   uninterrupted run's BITWISE; the step count and the RNG blob come back.

   Why bitwise holds although DP averaging order changes: the global batch is 4
   virtual samples; a DP rank's gradient is the mean of its samples. Every
   per-sample gradient is k/64 with |k| <= 7, so every partial sum, the mean over
   1, 2 or 4 samples and DDP's average over DP are exact in f32 (and the squares
   summed for the clip norm are exact in double), whatever the order. From the
   averaged gradient on, the arithmetic (clip scale, AdamW) is elementwise and the
   same on every mesh. Gradients are kept in f32 (grad_fp32 = 1) for the bf16
   parameter: with bf16 gradient buckets ZeRO-1 rounds the clipped gradient to
   bf16 while ZeRO-2 keeps it in its f32 accumulator, which is different
   arithmetic (not a checkpoint matter).

   `test_ckpt_ddp --make DIR` writes a checkpoint for tests/ckpt_tool.sh (the
   Hugging Face export): S steps at DP=2 x TP=2 under ZeRO-1 saved with the
   prefix "model.", the extra blob and an unprefixed extra tensor "head.w"
   (f32 [4, 3], Shard(0) over TP); DIR/expect/<name>.bin holds each parameter's
   and head.w's full tensor as saved (row-major, little-endian; h as bf16).
   moments_by_name_*: the optimizer moments read back by name with a plain
   vs_ckpt_load after one AdamW step, against values by hand (see there). */
#define VESCALE_IMPLEMENTATION
#include "../vescale_ddp.h"
#include "../vescale_ckpt.h"
#include "vs_test.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

enum { NP = 4, MAXE = 64, NSTATE = 3, MAXR = 4, S = 3, T = 3, NSAMPLE = 4 };
static const char* const PNAME[NP] = {"w0", "w1", "b", "h"};
static const int PNDIM[NP] = {2, 2, 1, 2};
static const int64_t PSHAPE[NP][2] = {{8, 6}, {6, 9}, {7, 0}, {6, 4}};
static const int PSHARD[NP] = {0, 1, -1, 1}; // tensor dim sharded over TP (-1: Replicate)
static const vs_ddp_state STATES[NSTATE] = {VS_DDP_STATE_MASTER, VS_DDP_STATE_EXP_AVG, VS_DDP_STATE_EXP_AVG_SQ};

static int64_t pnumel(int p) { return PSHAPE[p][0] * (PNDIM[p] > 1 ? PSHAPE[p][1] : 1); }

/* Per-sample gradient of global element g of parameter p at step t: k/64, |k| <= 7. */
static float sample_grad(int s, int t, int p, int64_t g)
{
    uint32_t x = ((uint32_t)s * 7919u + (uint32_t)t * 104729u + (uint32_t)p * 1299709u + (uint32_t)g * 15485863u) ^ 0x9E3779B9u;
    x ^= x >> 13, x *= 0x5bd1e995u, x ^= x >> 15;
    int k = (int)(x % 15u) - 7;
    if (t % 3 == 1) k *= 4; // larger on some steps, so the clip bites there (|g| <= 28/64)
    return (float)k / 64.0f;
}

static float init_value(int p, int64_t g) { return (float)(0.25 * sin(0.37 * (double)g + p)); }

/* The trainer's own state that travels as an extra blob. */
typedef struct rng { uint64_t s[4]; } rng;
static void rng_next(rng* r)
{
    for (int i = 0; i < 4; i++) r->s[i] = r->s[i] * 6364136223846793005ull + 1442695040888963407ull + (uint64_t)i;
}

typedef struct result {
    float par[MAXR][NP][MAXE];
    unsigned char par_held[MAXR][NP][MAXE];
    float st[MAXR][NP][NSTATE][MAXE];
    unsigned char st_held[MAXR][NP][NSTATE][MAXE];
    int64_t steps[MAXR];
    rng rng_at_load[MAXR];
    size_t rng_bytes[MAXR];
} result;

typedef struct cfg {
    const char* label;
    int dp, tp;
    vs_zero_stage zero;
    int first, nsteps;     // steps [first, first + nsteps)
    const char* save_path; // save after step S (the uninterrupted run)
    const char* load_path; // load before the first step
    result* out;
} cfg;

/* --make only: the saved names' prefix, and the extra tensor "head.w" saved too */
static const char* make_prefix;

static float head_value(int64_t g) { return (float)g * 0.5f - 2.0f; }

static vs_lr_schedule sched = {VS_LR_COSINE, 0.02, 0.002, 2, S + T + 2, 0, 0};

/* Global flat index of flat element i of a local box (shape, offset). */
static int64_t to_global(int p, const int64_t* lshape, const int64_t* off, int64_t i)
{
    int64_t idx[2] = {0, 0}, rem = i;
    for (int d = PNDIM[p] - 1; d >= 0; d--) idx[d] = off[d] + rem % lshape[d], rem /= lshape[d];
    int64_t g = 0;
    for (int d = 0; d < PNDIM[p]; d++) g = g * PSHAPE[p][d] + idx[d];
    return g;
}

static int rank_fn(vs_world* w, void* arg)
{
    const cfg* c = (const cfg*)arg;
    const int me = vs_world_rank(w);
    vs_mesh* m = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = c->dp;
    md.shape[1] = c->tp;
    md.ndims = 2;
    VT_OK(vs_mesh_init(w, &md, &m));
    if (!m) return 1;
    int coord[VS_MESH_MAX_DIMS];
    vs_mesh_coord(m, coord);
    const int dpr = coord[0];
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = m;
    dd.zero = c->zero;
    dd.bucket_bytes = 96; // several buckets, parameters split across DP ranges
    dd.grad_fp32 = 1;
    dd.optim.kind = VS_OPTIM_ADAMW;
    dd.optim.weight_decay = 0.1;
    vs_ddp* d = NULL;
    VT_OK(vs_ddp_init(&dd, &d));
    if (!d) return 1;
    for (int p = 0; p < NP; p++) {
        vs_ddp_param_desc pd;
        memset(&pd, 0, sizeof pd);
        pd.name = PNAME[p];
        pd.dtype = p == 3 ? VS_BF16 : VS_F32;
        pd.ndim = PNDIM[p];
        for (int k = 0; k < PNDIM[p]; k++) pd.shape[k] = PSHAPE[p][k];
        pd.placements[0] = vs_replicate();
        pd.placements[1] = PSHARD[p] < 0 ? vs_replicate() : vs_shard(PSHARD[p]);
        pd.no_decay = p == 2;
        vs_layout L;
        memset(&L, 0, sizeof L);
        L.mesh = m;
        L.p[0] = pd.placements[0];
        L.p[1] = pd.placements[1];
        int64_t box[2] = {1, 1}, off[2] = {0, 0};
        VT_OK(vs_layout_local(&L, pd.ndim, pd.shape, vs_mesh_rank(m), box, off));
        float f[MAXE];
        uint16_t h[MAXE];
        for (int64_t i = 0; i < box[0] * (pd.ndim > 1 ? box[1] : 1); i++) {
            f[i] = init_value(p, to_global(p, box, off, i));
            h[i] = vs_f32_to_bf16(f[i]);
        }
        pd.data = p == 3 ? (const void*)h : (const void*)f;
        VT_OK(vs_ddp_add_param(d, &pd, NULL));
    }
    VT_OK(vs_ddp_finalize(d));
    vs_ckpt* ck = NULL;
    vs_ckpt_desc cd;
    memset(&cd, 0, sizeof cd);
    cd.mesh = m;
    VT_OK(vs_ckpt_init(&cd, &ck));
    if (!ck) return 1;

    rng r = {{1, 2, 3, 4}};
    if (c->load_path) {
        rng got;
        memset(&got, 0xee, sizeof got);
        char spare[64]; // the blob's capacity is larger than the blob: its stored size comes back
        vs_ckpt_entry x;
        memset(&x, 0, sizeof x);
        x.name = "trainer.rng";
        x.kind = VS_CKPT_BLOB;
        x.blob = spare;
        x.blob_bytes = sizeof spare;
        VT_CHECK(vs_ddp_step_count(d) == 0, "fresh step count");
        VT_OK(vs_ckpt_load_ddp(ck, c->load_path, d, "", &x, 1));
        memcpy(&got, spare, sizeof got);
        c->out->rng_at_load[me] = got;
        c->out->rng_bytes[me] = x.blob_bytes;
        r = got;
        VT_CHECK(vs_ddp_step_count(d) == c->first, "%s: step count %lld after load, want %d", c->label,
                 (long long)vs_ddp_step_count(d), c->first);
    }
    for (int t = c->first; t < c->first + c->nsteps; t++) {
        rng_next(&r);
        VT_OK(vs_ddp_zero_grad(d));
        for (int p = NP - 1; p >= 0; p--) {
            vs_ddp_param_info pi;
            VT_OK(vs_ddp_query_param_info(d, p, &pi));
            float* g = (float*)vs_ddp_grad(d, p);
            VT_CHECK(g != NULL && vs_ddp_grad_dtype(d, p) == VS_F32, "grad %d: %s", p, vs_last_error());
            if (!g) return 1;
            int per = NSAMPLE / c->dp; // this DP rank's samples: [dpr * per, (dpr + 1) * per)
            for (int64_t i = 0; i < pi.local_numel; i++) {
                int64_t gi = to_global(p, pi.local_shape, pi.offset, i);
                float sum = 0;
                for (int s = dpr * per; s < (dpr + 1) * per; s++) sum += sample_grad(s, t, p, gi);
                g[i] += sum / (float)per;
            }
            VT_OK(vs_ddp_grad_ready(d, p));
        }
        VT_OK(vs_ddp_finish_grad_sync(d));
        double norm = 0;
        VT_OK(vs_ddp_clip_grad_norm(d, 0.5, &norm));
        if (t % 3 == 1) VT_CHECK(norm > 0.5, "%s: step %d: norm %g does not reach the clip", c->label, t, norm);
        VT_OK(vs_ddp_step(d, vs_lr_at(&sched, t)));
        if (c->save_path && t + 1 == S) {
            vs_ckpt_entry x;
            memset(&x, 0, sizeof x);
            x.name = "trainer.rng";
            x.kind = VS_CKPT_BLOB;
            x.blob = &r;
            x.blob_bytes = sizeof r;
            vs_ckpt_entry ex[2] = {x, x};
            float head[12];
            memset(&ex[1], 0, sizeof ex[1]);
            ex[1].name = "head.w";
            ex[1].t.dtype = VS_F32;
            ex[1].t.ndim = 2, ex[1].t.shape[0] = 4, ex[1].t.shape[1] = 3;
            ex[1].t.layout.mesh = m;
            ex[1].t.layout.p[0] = vs_replicate();
            ex[1].t.layout.p[1] = vs_shard(0);
            int64_t hbox[2], hoff[2];
            VT_OK(vs_layout_local(&ex[1].t.layout, 2, ex[1].t.shape, vs_mesh_rank(m), hbox, hoff));
            for (int64_t i = 0; i < hbox[0] * hbox[1]; i++) head[i] = head_value(hoff[0] * 3 + i);
            ex[1].t.data = head;
            VT_OK(vs_ckpt_save_ddp(ck, c->save_path, d, make_prefix ? make_prefix : "", ex, make_prefix ? 2 : 1, NULL));
            c->out->rng_at_load[me] = r;
            c->out->rng_bytes[me] = sizeof r;
        }
    }
    c->out->steps[me] = vs_ddp_step_count(d);
    for (int p = 0; p < NP; p++) {
        vs_ddp_param_info pi;
        VT_OK(vs_ddp_query_param_info(d, p, &pi));
        const void* v = vs_ddp_param(d, p);
        VT_CHECK(v != NULL, "param %d: %s", p, vs_last_error());
        for (int64_t i = 0; v && i < pi.local_numel; i++) {
            int64_t gi = to_global(p, pi.local_shape, pi.offset, i);
            c->out->par[me][p][gi] = p == 3 ? vs_bf16_to_f32(((const uint16_t*)v)[i]) : ((const float*)v)[i];
            c->out->par_held[me][p][gi] = 1;
        }
        for (int s = 0; s < NSTATE; s++) {
            vs_ddp_span sp;
            vs_result rs = vs_ddp_optim_state(d, p, STATES[s], &sp);
            if (s == 0 && p != 3) {
                VT_CHECK(rs == VS_ERR_INVALID, "an f32 parameter has no master");
                continue;
            }
            VT_OK(rs);
            if (rs) continue;
            for (int64_t i = sp.begin; i < sp.end; i++) {
                int64_t gi = to_global(p, pi.local_shape, pi.offset, i);
                c->out->st[me][p][s][gi] = ((const float*)sp.data)[i - sp.begin];
                c->out->st_held[me][p][s][gi] = 1;
            }
        }
    }
    VT_OK(vs_ckpt_free(ck));
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(m));
    return 0;
}

/* The resumed run equals the uninterrupted one, bitwise, for every element some
   rank holds (and every element is held by some rank). */
static void compare(const result* ref, int nref, const result* got, int ngot, const char* label)
{
    int bad = 0;
    for (int p = 0; p < NP; p++)
        for (int64_t g = 0; g < pnumel(p); g++) {
            int rr = -1;
            for (int k = 0; k < nref; k++)
                if (ref->par_held[k][p][g]) rr = k;
            int seen = 0;
            for (int k = 0; k < ngot; k++) {
                if (!got->par_held[k][p][g]) continue;
                seen = 1;
                if (rr >= 0 && memcmp(&ref->par[rr][p][g], &got->par[k][p][g], 4) && bad++ < 8)
                    VT_CHECK(0, "%s: %s[%lld] on rank %d is %.9g, the uninterrupted run has %.9g", label, PNAME[p],
                             (long long)g, k, got->par[k][p][g], ref->par[rr][p][g]);
            }
            VT_CHECK(rr >= 0 && seen, "%s: %s[%lld] held by no rank", label, PNAME[p], (long long)g);
            for (int s = 0; s < NSTATE; s++) {
                if (s == 0 && p != 3) continue;
                int rs = -1, ss = 0;
                for (int k = 0; k < nref; k++)
                    if (ref->st_held[k][p][s][g]) rs = k;
                for (int k = 0; k < ngot; k++) {
                    if (!got->st_held[k][p][s][g]) continue;
                    ss = 1;
                    if (rs >= 0 && memcmp(&ref->st[rs][p][s][g], &got->st[k][p][s][g], 4) && bad++ < 8)
                        VT_CHECK(0, "%s: state %d of %s[%lld] on rank %d is %.9g, the uninterrupted run has %.9g",
                                 label, s, PNAME[p], (long long)g, k, got->st[k][p][s][g], ref->st[rs][p][s][g]);
                }
                VT_CHECK(rs >= 0 && ss, "%s: state %d of %s[%lld] owned by no rank", label, s, PNAME[p], (long long)g);
            }
        }
    VT_CHECK(!bad, "%s: %d elements differ", label, bad);
    for (int k = 0; k < ngot; k++) {
        VT_CHECK(got->steps[k] == S + T, "%s: rank %d's step count %lld, want %d", label, k, (long long)got->steps[k],
                 S + T);
        VT_CHECK(got->rng_bytes[k] == sizeof(rng) && !memcmp(&got->rng_at_load[k], &ref->rng_at_load[0], sizeof(rng)),
                 "%s: rank %d's RNG blob (%zu bytes) is not the saved one", label, k, got->rng_bytes[k]);
    }
}

/* ---- the moments by name ---------------------------------------------------------

   The cases above load through vs_ckpt_load_ddp, i.e. through the same name
   table as the save: "exp_avg" and "exp_avg_sq" swapped on both sides would
   pass them. Here one AdamW step (beta1 0.5, beta2 0.75, no decay) on a
   (DP, TP) mesh, then vs_ckpt_save_ddp, then a plain vs_ckpt_load of
   "<prefix><param>.exp_avg" and ".exp_avg_sq" as whole tensors, compared with
   the moments by hand. The gradient on DP rank r of global element i of
   parameter p is k/8, k = (3i + 5p + 7r) % 11 - 5; DDP averages the DP ranks,
   so the step sees g = (k0 + k1)/16 and leaves exp_avg = (1 - 0.5) g and
   exp_avg_sq = (1 - 0.75) g^2, exact in f32. Under ZeRO each rank owns a range
   of every state: the whole tensors read back come from the owners' ranges,
   and each rank's own range, loaded as a RANGE entry, equals what it holds. */
enum { MP = 2 };
static const char* const MNAME[MP] = {"enc.w", "enc.b"};
static const int MNDIM[MP] = {2, 1};
static const int64_t MSHAPE[MP][2] = {{10, 6}, {9, 1}};
static const int MSHARD[MP] = {0, -1}; // sharded over TP along this dim (-1: Replicate)

typedef struct mcfg {
    int dp, tp;
    vs_zero_stage zero;
    const char* path;
} mcfg;

static float mgrad(int r, int p, int64_t i) { return (float)((3 * i + 5 * p + 7 * r) % 11 - 5) / 8.0f; }
static float mg(int p, int64_t i) { return (mgrad(0, p, i) + mgrad(1, p, i)) / 2.0f; } // the DP mean (DP = 2)
static float m_exp_avg(int p, int64_t i) { return 0.5f * mg(p, i); }
static float m_exp_avg_sq(int p, int64_t i) { return 0.25f * mg(p, i) * mg(p, i); }

static int64_t m_global(int p, const int64_t* lshape, const int64_t* off, int64_t i)
{
    if (MNDIM[p] == 1) return off[0] + i;
    return (off[0] + i / lshape[1]) * MSHAPE[p][1] + off[1] + i % lshape[1];
}

static int moments_rank(vs_world* w, void* arg)
{
    const mcfg* c = (const mcfg*)arg;
    vs_mesh* m = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = c->dp, md.shape[1] = c->tp, md.ndims = 2;
    VT_OK(vs_mesh_init(w, &md, &m));
    if (!m) return 1;
    int coord[VS_MESH_MAX_DIMS];
    vs_mesh_coord(m, coord);
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = m;
    dd.zero = c->zero;
    // (one bucket of both: under ZeRO the DP ranks' ranges meet inside one parameter)
    dd.optim.kind = VS_OPTIM_ADAMW;
    dd.optim.beta1 = 0.5, dd.optim.beta1_set = 1;
    dd.optim.beta2 = 0.75, dd.optim.beta2_set = 1;
    vs_ddp* d = NULL;
    VT_OK(vs_ddp_init(&dd, &d));
    if (!d) return 1;
    for (int p = 0; p < MP; p++) {
        vs_ddp_param_desc pd;
        memset(&pd, 0, sizeof pd);
        pd.name = MNAME[p];
        pd.dtype = VS_F32;
        pd.ndim = MNDIM[p];
        for (int k = 0; k < MNDIM[p]; k++) pd.shape[k] = MSHAPE[p][k];
        pd.placements[0] = vs_replicate();
        pd.placements[1] = MSHARD[p] < 0 ? vs_replicate() : vs_shard(MSHARD[p]);
        float init[MAXE];
        for (int i = 0; i < MAXE; i++) init[i] = 0.125f;
        pd.data = init;
        VT_OK(vs_ddp_add_param(d, &pd, NULL));
    }
    VT_OK(vs_ddp_finalize(d));
    VT_OK(vs_ddp_zero_grad(d));
    for (int p = MP - 1; p >= 0; p--) {
        vs_ddp_param_info pi;
        VT_OK(vs_ddp_query_param_info(d, p, &pi));
        float* g = (float*)vs_ddp_grad(d, p);
        if (!g) return 1;
        for (int64_t i = 0; i < pi.local_numel; i++) g[i] += mgrad(coord[0], p, m_global(p, pi.local_shape, pi.offset, i));
        VT_OK(vs_ddp_grad_ready(d, p));
    }
    VT_OK(vs_ddp_finish_grad_sync(d));
    VT_OK(vs_ddp_step(d, 0.01));
    vs_ckpt* ck = NULL;
    vs_ckpt_desc cd;
    memset(&cd, 0, sizeof cd);
    cd.mesh = m;
    VT_OK(vs_ckpt_init(&cd, &ck));
    if (!ck) return 1;
    VT_OK(vs_ckpt_save_ddp(ck, c->path, d, "model.", NULL, 0, NULL));

    static const char* const moment[2] = {"exp_avg", "exp_avg_sq"};
    static const vs_ddp_state mstate[2] = {VS_DDP_STATE_EXP_AVG, VS_DDP_STATE_EXP_AVG_SQ};
    char names[2 * MP][64];
    float whole[MP][2][MAXE], part[MP][2][MAXE];
    vs_ddp_span sp[MP][2];
    vs_ddp_param_info pi[MP];
    vs_ckpt_entry ew[2 * MP], er[2 * MP]; // each moment whole (replicated), and this rank's owned range
    memset(ew, 0, sizeof ew);
    memset(whole, 0xff, sizeof whole);
    memset(part, 0xff, sizeof part);
    for (int p = 0; p < MP; p++) {
        VT_OK(vs_ddp_query_param_info(d, p, &pi[p]));
        for (int s = 0; s < 2; s++) {
            VT_OK(vs_ddp_optim_state(d, p, mstate[s], &sp[p][s]));
            vs_ckpt_entry* x = &ew[2 * p + s];
            snprintf(names[2 * p + s], sizeof names[0], "model.%s.%s", MNAME[p], moment[s]);
            x->name = names[2 * p + s];
            x->t.dtype = VS_F32;
            x->t.ndim = MNDIM[p];
            for (int k = 0; k < MNDIM[p]; k++) x->t.shape[k] = MSHAPE[p][k];
            x->t.data = whole[p][s];
            VT_OK(vs_layout_parse(m, "[Replicate, Replicate]", &x->t.layout));
            vs_ckpt_entry* y = &er[2 * p + s];
            *y = *x;
            y->kind = VS_CKPT_RANGE; // (of this rank's shard under the DDP layout)
            y->t.data = part[p][s];
            y->range_begin = sp[p][s].begin;
            y->range_end = sp[p][s].end;
            y->t.layout.p[1] = MSHARD[p] < 0 ? vs_replicate() : vs_shard(MSHARD[p]);
        }
    }
    if (c->zero != VS_ZERO_0) // (the case means it: the DP ranks' ranges meet inside enc.w)
        VT_CHECK(sp[0][0].begin < sp[0][0].end && sp[0][0].end - sp[0][0].begin < pi[0].local_numel,
                 "ZeRO-%d rank %d owns [%lld, %lld) of enc.w's %lld elements", (int)c->zero, vs_world_rank(w),
                 (long long)sp[0][0].begin, (long long)sp[0][0].end, (long long)pi[0].local_numel);
    int lw[2 * MP], lr[2 * MP];
    VT_OK(vs_ckpt_load(ck, c->path, ew, 2 * MP, lw));
    VT_OK(vs_ckpt_load(ck, c->path, er, 2 * MP, lr));
    int bad = 0;
    for (int p = 0; p < MP; p++)
        for (int s = 0; s < 2; s++) {
            VT_CHECK(lw[2 * p + s] && lr[2 * p + s], "%s: not loaded", ew[2 * p + s].name);
            float (*hand)(int, int64_t) = s ? m_exp_avg_sq : m_exp_avg;
            int64_t numel = MSHAPE[p][0] * MSHAPE[p][1];
            for (int64_t i = 0; i < numel; i++) {
                float want = hand(p, i);
                if (memcmp(&whole[p][s][i], &want, 4) && bad++ < 6)
                    VT_CHECK(0, "ZeRO-%d DP%d x TP%d rank %d: model.%s.%s[%lld] read back by name is %.9g, by hand %.9g",
                             (int)c->zero, c->dp, c->tp, vs_world_rank(w), MNAME[p], moment[s], (long long)i,
                             (double)whole[p][s][i], (double)want);
            }
            const float* held = (const float*)sp[p][s].data;
            for (int64_t f = sp[p][s].begin; f < sp[p][s].end; f++) {
                float want = hand(p, m_global(p, pi[p].local_shape, pi[p].offset, f));
                float got = part[p][s][f - sp[p][s].begin], own = held[f - sp[p][s].begin];
                if ((memcmp(&got, &want, 4) || memcmp(&own, &want, 4)) && bad++ < 6)
                    VT_CHECK(0, "ZeRO-%d rank %d: model.%s.%s, owned element %lld: loaded %.9g, held %.9g, by hand %.9g",
                             (int)c->zero, vs_world_rank(w), MNAME[p], moment[s], (long long)f, (double)got,
                             (double)own, (double)want);
            }
        }
    VT_CHECK(!bad, "ZeRO-%d DP%d x TP%d: %d moments differ from the hand values", (int)c->zero, c->dp, c->tp, bad);
    VT_OK(vs_ckpt_free(ck));
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(m));
    return 0;
}

static result ref_run, res;

static void run(cfg* c)
{
    c->out = c->save_path ? &ref_run : &res;
    memset(c->out, 0, sizeof *c->out);
    VT_CHECK(vs_launch(c->dp * c->tp, rank_fn, c) == VS_OK, "%s: launch: %s", c->label, vs_last_error());
}

/* The checkpoint of --make (see the top) and its expected tensors. */
static int make_sample(const char* dir)
{
    cfg c = {"make", 2, 2, VS_ZERO_1, 0, S, dir, NULL, &ref_run};
    make_prefix = "model.";
    memset(&ref_run, 0, sizeof ref_run);
    if (vs_launch(4, rank_fn, &c) != VS_OK) {
        fprintf(stderr, "test_ckpt_ddp --make %s: %s\n", dir, vs_last_error());
        return 1;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/expect", dir);
    mkdir(path, 0777);
    int rc = 0;
    for (int p = 0; p <= NP && !rc; p++) { // the parameters, then head.w
        unsigned char b[MAXE * 4];
        int64_t n = p < NP ? pnumel(p) : 12;
        size_t es = p == 3 ? 2 : 4;
        for (int64_t g = 0; g < n; g++) {
            int k = 0;
            while (p < NP && k < 4 && !ref_run.par_held[k][p][g]) k++;
            if (k == 4) return 1; // held by no rank
            float v = p == NP ? head_value(g) : ref_run.par[k][p][g];
            uint16_t h = vs_f32_to_bf16(v); // exact: v came from a bf16
            memcpy(b + (size_t)g * es, p == 3 ? (const void*)&h : (const void*)&v, es);
        }
        snprintf(path, sizeof path, "%s/expect/%s%s.bin", dir, p < NP ? "model." : "", p < NP ? PNAME[p] : "head.w");
        FILE* f = fopen(path, "wb");
        rc = !f || fwrite(b, 1, (size_t)n * es, f) != (size_t)n * es;
        if (f && fclose(f)) rc = 1;
    }
    return rc;
}

int main(int argc, char** argv)
{
    if (argc == 3 && !strcmp(argv[1], "--make")) return make_sample(argv[2]);
    char root[] = "/tmp/vs_ckpt_ddp_XXXXXX";
    if (!mkdtemp(root)) return 1;
    char path[64];
    snprintf(path, sizeof path, "%s/step-%06d", root, S);

    vt_begin("ckpt_ddp/uninterrupted_dp4_zero1");
    cfg full = {"DP4 ZeRO-1, uninterrupted", 4, 1, VS_ZERO_1, 0, S + T, path, NULL, NULL};
    run(&full);
    VT_CHECK(ref_run.steps[0] == S + T, "steps %lld", (long long)ref_run.steps[0]);
    vt_end("ckpt_ddp/uninterrupted_dp4_zero1");

    static const cfg resumes[] = {
        {"DP4 ZeRO-1 (same mesh)", 4, 1, VS_ZERO_1, S, T, NULL, NULL, NULL},
        {"DP2 ZeRO-2", 2, 1, VS_ZERO_2, S, T, NULL, NULL, NULL},
        {"DP1 ZeRO-0", 1, 1, VS_ZERO_0, S, T, NULL, NULL, NULL},
        {"DP2 x TP2 ZeRO-1", 2, 2, VS_ZERO_1, S, T, NULL, NULL, NULL},
        {"DP2 x TP2 ZeRO-2", 2, 2, VS_ZERO_2, S, T, NULL, NULL, NULL},
    };
    static const char* const names[] = {"ckpt_ddp/resume_dp4_zero1", "ckpt_ddp/resume_dp2_zero2",
                                        "ckpt_ddp/resume_dp1_zero0", "ckpt_ddp/resume_dp2xtp2_zero1",
                                        "ckpt_ddp/resume_dp2xtp2_zero2"};
    for (int i = 0; i < (int)(sizeof resumes / sizeof resumes[0]); i++) {
        vt_begin(names[i]);
        cfg c = resumes[i];
        c.load_path = path;
        run(&c);
        compare(&ref_run, 4, &res, c.dp * c.tp, c.label);
        vt_end(names[i]);
    }

    /* The check has teeth: a run that starts fresh at step S (nothing loaded, only
       the step count) does not match. */
    vt_begin("ckpt_ddp/fresh_start_differs");
    {
        cfg c = {"fresh", 2, 1, VS_ZERO_2, S, T, NULL, NULL, NULL};
        run(&c);
        int differ = 0;
        for (int64_t g = 0; g < pnumel(0); g++) differ += memcmp(&res.par[0][0][g], &ref_run.par[0][0][g], 4) != 0;
        VT_CHECK(differ > 0, "a run without the checkpoint matches the uninterrupted one");
    }
    vt_end("ckpt_ddp/fresh_start_differs");

    static const mcfg mcs[] = {{2, 1, VS_ZERO_0, NULL}, {2, 1, VS_ZERO_1, NULL}, {2, 1, VS_ZERO_2, NULL}, {2, 2, VS_ZERO_1, NULL}};
    static const char* const mnames[] = {"ckpt_ddp/moments_by_name_dp2_zero0", "ckpt_ddp/moments_by_name_dp2_zero1",
                                         "ckpt_ddp/moments_by_name_dp2_zero2", "ckpt_ddp/moments_by_name_dp2xtp2_zero1"};
    for (int i = 0; i < (int)(sizeof mcs / sizeof mcs[0]); i++) {
        vt_begin(mnames[i]);
        char mp[96];
        snprintf(mp, sizeof mp, "%s/moments-%d", root, i);
        mcfg c = mcs[i];
        c.path = mp;
        VT_CHECK(vs_launch(c.dp * c.tp, moments_rank, &c) == VS_OK, "%s: launch: %s", mnames[i], vs_last_error());
        vt_end(mnames[i]);
    }

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd)) return 1;
    return vt_summary();
}
