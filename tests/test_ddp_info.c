/* test_ddp_info.c - DDP introspection of vescale_ddp.h (threads transport):
   vs_ddp_query_param_info, vs_ddp_grad_synced_owned, vs_ddp_optim_state and
   vs_ddp_query_desc.

   The model: seven parameters of several dtypes, shapes and TP placements on a
   DP2 x TP2 mesh, most with sizes the mesh does not divide (one has an empty
   shard on TP rank 1):
       "emb"   f32  [7, 5]     Shard(0)       rows 4 | 3
       "norm"  f32  [6]        Partial(sum)   gradient summed over TP
       "proj"  bf16 [3, 9]     Shard(1)       columns 5 | 4
       "tiny"  bf16 [1, 3]     Shard(0)       rows 1 | 0 (empty)
       "cube"  bf16 [2, 3, 5]  Shard(2)       3 | 2, optimizer group 1
       "bias"  f32  [5]        Replicate      no_decay
       "big"   f32  [37]       Shard(0)       19 | 18
   registered in this order, so the reverse (bucket) order shares buckets:
   big + bias, cube + tiny + proj; 40-byte buckets split them again.
   Global values are functions of (parameter, global flat index): the test cuts
   its own shards (torch.chunk arithmetic written here) and checks the library's
   local shapes and offsets against them and against vs_layout_local.

   Gradients: in step s, DP rank r, TP rank t adds G(s, p, e, r) (partial "norm":
   G(s, p, e, r, t)) to global element e, each a multiple of 1/16 in [-1, 1].
   Every sum and half of such numbers is exact in f32 and bf16, so the DP average
       avg(e) = (sum over r of G, and over t for "norm") / 2
   computed here is the exact expected value, whatever the reduction order.

   Reference: the same model on one rank (mesh 1x1), adding avg(e) as its
   gradient, stepped by the same AdamW. Its master weights, moments and
   parameters are global tensors; the distributed run's owned ranges, mapped to
   global indices through the offsets of vs_ddp_param_info by the ranks marked
   primary, must cover each element exactly once and reproduce them bit for bit. */
#define VESCALE_IMPLEMENTATION
#include "vescale_ddp.h"
#include "tests/vs_test.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NP = 7, MAXE = 64, NSTEPS = 2 };

typedef struct pspec {
    const char* name;
    vs_dtype dt;
    int ndim;
    int64_t shape[3];
    vs_placement tp; /* along TP */
    int group, no_decay;
} pspec;

static const pspec PS[NP] = {
    {"emb", VS_F32, 2, {7, 5, 0}, {VS_PLACE_SHARD, 0, VS_OP_DEFAULT}, 0, 0},
    {"norm", VS_F32, 1, {6, 0, 0}, {VS_PLACE_PARTIAL, 0, VS_OP_SUM}, 0, 0},
    {"proj", VS_BF16, 2, {3, 9, 0}, {VS_PLACE_SHARD, 1, VS_OP_DEFAULT}, 0, 0},
    {"tiny", VS_BF16, 2, {1, 3, 0}, {VS_PLACE_SHARD, 0, VS_OP_DEFAULT}, 0, 0},
    {"cube", VS_BF16, 3, {2, 3, 5}, {VS_PLACE_SHARD, 2, VS_OP_DEFAULT}, 1, 0},
    {"bias", VS_F32, 1, {5, 0, 0}, {VS_PLACE_REPLICATE, 0, VS_OP_DEFAULT}, 0, 1},
    {"big", VS_F32, 1, {37, 0, 0}, {VS_PLACE_SHARD, 0, VS_OP_DEFAULT}, 0, 0},
};

/* AdamW settings (none of them the defaults) */
#define B1 0.8
#define B2 0.95
#define EPS 1e-7
#define WD 0.1
#define G1_SCALE 0.5
#define G1_WD 0.01
static const double LR[NSTEPS] = {0.01, 0.02};

/* ------------------------------------------------------------------------- */
/* Independent helpers                                                       */

static uint32_t hashu(uint32_t a, uint32_t b, uint32_t c, uint32_t d)
{
    uint32_t h = a * 0x9E3779B1u ^ (b + 0x7F4A7C15u) * 0x85EBCA77u ^ (c + 0x165667B1u) * 0xC2B2AE3Du ^
                 (d + 0x27D4EB2Fu) * 0x165667B1u;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    return h;
}

static uint16_t bf16_of(float f) /* round to nearest even */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float bf16_val(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static int64_t gnumel(int p)
{
    int64_t n = 1;
    for (int k = 0; k < PS[p].ndim; k++) n *= PS[p].shape[k];
    return n;
}

/* Initial global value (bf16 parameters: already rounded). */
static float init_val(int p, int64_t e)
{
    float v = (float)((double)(hashu(11, (uint32_t)p, (uint32_t)e, 0) >> 8) / 16777216.0 - 0.5);
    return PS[p].dt == VS_BF16 ? bf16_val(bf16_of(v)) : v;
}

/* Gradient contribution of DP rank r, TP rank t (ignored but for the partial
   parameter) in step s: k/16, k in [-16, 16]. */
static float grad_of(int s, int p, int64_t e, int r, int t)
{
    int tt = PS[p].tp.kind == VS_PLACE_PARTIAL ? t : 0;
    uint32_t h = hashu(100 + (uint32_t)s, (uint32_t)p, (uint32_t)e, (uint32_t)(r * 8 + tt));
    return (float)((int)(h % 33u) - 16) / 16.0f;
}

/* The DP average of the reduced gradient (exact: see the top comment). */
static float grad_avg(int s, int p, int64_t e)
{
    int nt = PS[p].tp.kind == VS_PLACE_PARTIAL ? 2 : 1;
    float sum = 0;
    for (int r = 0; r < 2; r++)
        for (int t = 0; t < nt; t++) sum += grad_of(s, p, e, r, t);
    return sum / 2;
}

/* This TP rank's shard (of tp ranks), torch.chunk style: ceil-sized chunks,
   trailing ones short or empty; an empty shard's offset is the dim's size. */
static void my_local(int p, int tp, int t, int64_t* ls, int64_t* off)
{
    for (int k = 0; k < PS[p].ndim; k++) {
        ls[k] = PS[p].shape[k];
        off[k] = 0;
    }
    if (PS[p].tp.kind != VS_PLACE_SHARD) return;
    int k = PS[p].tp.dim;
    int64_t n = PS[p].shape[k], chunk = (n + tp - 1) / tp, start = (int64_t)t * chunk;
    if (start > n) start = n;
    int64_t len = n - start < chunk ? n - start : chunk;
    ls[k] = len;
    off[k] = start;
}

/* Global flat index of local flat index i (an index outside the local shard
   fails the case and maps to 0). */
static int64_t to_global(const vs_ddp_param_info* in, int64_t i)
{
    int64_t g = 0, stride = 1, n = 1;
    for (int k = 0; k < in->ndim; k++) n *= in->local_shape[k];
    if (i < 0 || i >= n) {
        VT_CHECK(0, "'%s': flat index %lld outside the local shard of %lld elements", in->name ? in->name : "?",
                 (long long)i, (long long)n);
        return 0;
    }
    for (int k = in->ndim - 1; k >= 0; k--) {
        int64_t l = i % in->local_shape[k];
        i /= in->local_shape[k];
        g += (in->offset[k] + l) * stride;
        stride *= in->shape[k];
    }
    return g;
}

static float load(const void* p, vs_dtype dt, int64_t i)
{
    return dt == VS_F32 ? ((const float*)p)[i] : bf16_val(((const uint16_t*)p)[i]);
}

static void launch(int n, vs_rank_fn fn, void* arg)
{
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = n;
    d.transport = VS_TRANSPORT_THREADS;
    d.timeout_s = 60;
    VT_OK(vs_launch_ex(&d, fn, arg));
}

/* ------------------------------------------------------------------------- */
/* One run: the model on DP x TP ranks (or 1), two AdamW steps               */

enum { K_PARAM, K_MASTER, K_M1, K_M2, NK };
static const char* const kname[NK] = {"param", "master", "exp_avg", "exp_avg_sq"};

typedef struct run {
    int nranks;           /* 4 (DP2 x TP2) or 1 (reference) */
    vs_zero_stage zero;
    int64_t bucket_bytes; /* 0: the default */
    /* results, global tensors (written under mu) */
    pthread_mutex_t mu;
    float res[NK][NP][MAXE];
    int count[NK][NP][MAXE];
} run;

/* Adds rank (r, t)'s gradients of step s, in reverse registration order. */
static void backward(vs_ddp* d, const vs_ddp_param_info* info, int s, int r, int t, int ref)
{
    VT_OK(vs_ddp_zero_grad(d));
    for (int p = NP - 1; p >= 0; p--) {
        void* g = vs_ddp_grad(d, p);
        VT_CHECK(g != NULL || info[p].local_numel == 0, "vs_ddp_grad(%d): %s", p, vs_last_error());
        vs_dtype gd = vs_ddp_grad_dtype(d, p);
        for (int64_t i = 0; g && i < info[p].local_numel; i++) {
            int64_t e = to_global(&info[p], i);
            float add = ref ? grad_avg(s, p, e) : grad_of(s, p, e, r, t);
            if (gd == VS_F32)
                ((float*)g)[i] += add;
            else
                ((uint16_t*)g)[i] = bf16_of(bf16_val(((uint16_t*)g)[i]) + add);
        }
        VT_OK(vs_ddp_grad_ready(d, p));
    }
    VT_OK(vs_ddp_finish_grad_sync(d));
}

/* The owned synced gradient equals the DP average; vs_ddp_grad_synced gives the
   whole shard (ZeRO-0), the owned range valid (ZeRO-1), or names the rule (ZeRO-2). */
static void check_grads(run* R, vs_ddp* d, const vs_ddp_param_info* info, int s, int me)
{
    for (int p = 0; p < NP; p++) {
        vs_ddp_span sp;
        VT_OK(vs_ddp_grad_synced_owned(d, p, &sp));
        VT_CHECK(sp.begin == info[p].owned_begin && sp.end == info[p].owned_end,
                 "rank %d '%s': grad span [%lld, %lld), owned [%lld, %lld)", me, PS[p].name, (long long)sp.begin,
                 (long long)sp.end, (long long)info[p].owned_begin, (long long)info[p].owned_end);
        VT_CHECK((sp.data != NULL) == (sp.begin < sp.end), "rank %d '%s': data %p for [%lld, %lld)", me, PS[p].name,
                 sp.data, (long long)sp.begin, (long long)sp.end);
        VT_CHECK(sp.dtype == VS_F32 || sp.dtype == info[p].grad_dtype, "'%s': span dtype %s", PS[p].name,
                 vs_dtype_name(sp.dtype));
        int bad = 0;
        for (int64_t i = sp.begin; sp.data && i < sp.end; i++) {
            float got = load(sp.data, sp.dtype, i - sp.begin), want = grad_avg(s, p, to_global(&info[p], i));
            if (bits(got) != bits(want) && bad++ < 3)
                VT_CHECK(0, "ZeRO-%d rank %d step %d '%s' owned grad[%lld] = %g, want %g", (int)R->zero, me, s,
                         PS[p].name, (long long)i, (double)got, (double)want);
        }
        vs_clear_error();
        const void* full = vs_ddp_grad_synced(d, p);
        if (R->zero == VS_ZERO_2) {
            VT_CHECK(full == NULL && strstr(vs_last_error(), "vs_ddp_grad_synced_owned") &&
                         strstr(vs_last_error(), PS[p].name),
                     "ZeRO-2 vs_ddp_grad_synced: %p, '%s'", full, vs_last_error());
            continue;
        }
        VT_CHECK(full != NULL || info[p].local_numel == 0, "ZeRO-%d vs_ddp_grad_synced '%s': %s", (int)R->zero,
                 PS[p].name, vs_last_error());
        /* valid: ZeRO-0 everything, ZeRO-1 the owned range (as documented) */
        int64_t lo = R->zero == VS_ZERO_0 ? 0 : info[p].owned_begin, hi = R->zero == VS_ZERO_0 ? info[p].local_numel : info[p].owned_end;
        VT_CHECK(R->zero != VS_ZERO_0 || (lo == info[p].owned_begin && hi == info[p].owned_end),
                 "ZeRO-0 owns all of '%s'", PS[p].name);
        for (int64_t i = lo; full && i < hi; i++) {
            float got = load(full, info[p].grad_dtype, i), want = grad_avg(s, p, to_global(&info[p], i));
            if (bits(got) != bits(want) && bad++ < 3)
                VT_CHECK(0, "ZeRO-%d rank %d '%s' grad_synced[%lld] = %g, want %g", (int)R->zero, me, PS[p].name,
                         (long long)i, (double)got, (double)want);
        }
    }
}

/* After the first step: moments and updated values of the owned range equal
   AdamW written out here (from p0 and the average gradient). */
static void check_adamw(run* R, vs_ddp* d, const vs_ddp_param_info* info, int me)
{
    for (int p = 0; p < NP; p++) { /* the quiet probe agrees with what optim_state gives */
        VT_CHECK(vs_ddp_has_optim_state(d, p, VS_DDP_STATE_EXP_AVG) == 1 &&
                     vs_ddp_has_optim_state(d, p, VS_DDP_STATE_EXP_AVG_SQ) == 1 &&
                     vs_ddp_has_optim_state(d, p, VS_DDP_STATE_MASTER) == info[p].has_master &&
                     vs_ddp_has_optim_state(d, p, VS_DDP_STATE_MOMENTUM) == 0 &&
                     vs_ddp_has_optim_state(d, p, VS_DDP_STATE_CUSTOM0) == 0,
                 "'%s': vs_ddp_has_optim_state disagrees with AdamW's states", PS[p].name);
        vs_ddp_span none;
        if (!info[p].has_master)
            VT_ERR(vs_ddp_optim_state(d, p, VS_DDP_STATE_MASTER, &none), VS_ERR_INVALID, "MASTER state");
    }
    VT_CHECK(vs_ddp_has_optim_state(d, NP, VS_DDP_STATE_MASTER) == VS_ERR_INVALID, "index out of range not refused");
    VT_CHECK(vs_ddp_has_optim_state(d, 0, VS_DDP_STATE_NONE) == VS_ERR_INVALID, "state NONE not refused");
    VT_CHECK(vs_ddp_has_optim_state(NULL, 0, VS_DDP_STATE_MASTER) == VS_ERR_NULL, "NULL ddp not refused");
    for (int p = 0; p < NP; p++) {
        vs_ddp_span m1, m2, pv;
        VT_OK(vs_ddp_optim_state(d, p, VS_DDP_STATE_EXP_AVG, &m1));
        VT_OK(vs_ddp_optim_state(d, p, VS_DDP_STATE_EXP_AVG_SQ, &m2));
        if (info[p].has_master) {
            VT_OK(vs_ddp_optim_state(d, p, VS_DDP_STATE_MASTER, &pv));
        } else {
            pv.data = vs_ddp_param(d, p);
            pv.begin = 0;
            pv.end = info[p].local_numel;
        }
        VT_CHECK(m1.dtype == VS_F32 && m2.dtype == VS_F32, "states are f32");
        VT_CHECK(m1.begin == info[p].owned_begin && m1.end == info[p].owned_end && m2.begin == m1.begin &&
                     m2.end == m1.end,
                 "'%s': state spans [%lld, %lld) [%lld, %lld), owned [%lld, %lld)", PS[p].name, (long long)m1.begin,
                 (long long)m1.end, (long long)m2.begin, (long long)m2.end, (long long)info[p].owned_begin,
                 (long long)info[p].owned_end);
        double glr = LR[0] * (PS[p].group ? G1_SCALE : 1.0);
        double wd = PS[p].no_decay ? 0 : PS[p].group ? G1_WD : WD;
        int bad = 0;
        for (int64_t i = m1.begin; m1.data && i < m1.end; i++) {
            int64_t e = to_global(&info[p], i);
            double g = grad_avg(0, p, e), p0 = init_val(p, e);
            double wm = (1 - B1) * g, wv = (1 - B2) * g * g;
            double wp = p0 * (1 - glr * wd) - glr * (wm / (1 - B1)) / (sqrt(wv / (1 - B2)) + EPS);
            double gm = ((const float*)m1.data)[i - m1.begin], gv = ((const float*)m2.data)[i - m1.begin];
            double gp = ((const float*)pv.data)[i - pv.begin];
            if ((fabs(gm - wm) > 1e-6 * fabs(wm) || fabs(gv - wv) > 1e-6 * fabs(wv) || fabs(gp - wp) > 1e-6 * fmax(fabs(wp), 1e-3)) &&
                bad++ < 3)
                VT_CHECK(0, "ZeRO-%d rank %d '%s'[%lld]: m %.9g v %.9g p %.9g, formula %.9g %.9g %.9g", (int)R->zero,
                         me, PS[p].name, (long long)i, gm, gv, gp, wm, wv, wp);
        }
    }
}

/* Writes global element e of kind k (under R->mu); counts owned-state writes. */
static void put(run* R, int k, int p, int64_t e, float v, int count)
{
    pthread_mutex_lock(&R->mu);
    if (k == K_PARAM && R->count[k][p][e] && bits(R->res[k][p][e]) != bits(v))
        VT_CHECK(0, "replicas of '%s'[%lld] differ: %g and %g", PS[p].name, (long long)e, (double)R->res[k][p][e],
                 (double)v);
    R->res[k][p][e] = v;
    R->count[k][p][e] += count;
    pthread_mutex_unlock(&R->mu);
}

/* Every primary rank writes its owned master weights and moments, every rank
   its parameters, into global tensors. */
static void gather_state(run* R, vs_ddp* d, const vs_ddp_param_info* info)
{
    for (int p = 0; p < NP; p++) {
        const void* v = vs_ddp_param(d, p);
        VT_CHECK(v != NULL || info[p].local_numel == 0, "vs_ddp_param: %s", vs_last_error());
        for (int64_t i = 0; v && i < info[p].local_numel; i++)
            put(R, K_PARAM, p, to_global(&info[p], i), load(v, PS[p].dt, i), 1);
        if (!info[p].primary) continue;
        for (int k = K_MASTER; k < NK; k++) {
            if (k == K_MASTER && !info[p].has_master) continue;
            vs_ddp_state which = k == K_MASTER ? VS_DDP_STATE_MASTER : k == K_M1 ? VS_DDP_STATE_EXP_AVG : VS_DDP_STATE_EXP_AVG_SQ;
            vs_ddp_span sp;
            VT_OK(vs_ddp_optim_state(d, p, which, &sp));
            for (int64_t i = sp.begin; sp.data && i < sp.end; i++)
                put(R, k, p, to_global(&info[p], i), ((const float*)sp.data)[i - sp.begin], 1);
        }
    }
}

/* Layout fields against the test's own chunking and vs_layout_local. */
static void check_layout(vs_mesh* mesh, const vs_ddp_param_info* in, int p, int tp, int t)
{
    int64_t ls[3], off[3], lls[VS_TENSOR_MAX_DIMS], loff[VS_TENSOR_MAX_DIMS];
    my_local(p, tp, t, ls, off);
    vs_layout L;
    memset(&L, 0, sizeof L);
    L.mesh = mesh;
    memcpy(L.p, in->placements, sizeof L.p);
    VT_OK(vs_layout_local(&L, in->ndim, in->shape, vs_mesh_rank(mesh), lls, loff));
    VT_CHECK(!strcmp(in->name, PS[p].name) && in->index == p && in->dtype == PS[p].dt && in->ndim == PS[p].ndim,
             "'%s': name/index/dtype/ndim", PS[p].name);
    VT_CHECK(in->grad_dtype == PS[p].dt, "'%s': grad dtype %s", PS[p].name, vs_dtype_name(in->grad_dtype));
    VT_CHECK(in->group == PS[p].group && in->no_decay == PS[p].no_decay && in->has_master == (PS[p].dt != VS_F32),
             "'%s': group/no_decay/has_master", PS[p].name);
    VT_CHECK(in->placements[0].kind == VS_PLACE_REPLICATE && in->placements[1].kind == PS[p].tp.kind &&
                 (PS[p].tp.kind != VS_PLACE_SHARD || in->placements[1].dim == PS[p].tp.dim),
             "'%s': placements", PS[p].name);
    int64_t n = 1;
    for (int k = 0; k < PS[p].ndim; k++) {
        VT_CHECK(in->shape[k] == PS[p].shape[k], "'%s' shape[%d] %lld", PS[p].name, k, (long long)in->shape[k]);
        VT_CHECK(in->local_shape[k] == ls[k] && in->local_shape[k] == lls[k],
                 "'%s' TP rank %d local_shape[%d] %lld, want %lld (vs_layout_local %lld)", PS[p].name, t, k,
                 (long long)in->local_shape[k], (long long)ls[k], (long long)lls[k]);
        VT_CHECK(in->offset[k] == off[k] && in->offset[k] == loff[k],
                 "'%s' TP rank %d offset[%d] %lld, want %lld (vs_layout_local %lld)", PS[p].name, t, k,
                 (long long)in->offset[k], (long long)off[k], (long long)loff[k]);
        n *= ls[k];
    }
    for (int k = PS[p].ndim; k < VS_TENSOR_MAX_DIMS; k++)
        VT_CHECK(in->shape[k] == 0 && in->local_shape[k] == 0 && in->offset[k] == 0, "'%s': entries past ndim",
                 PS[p].name);
    VT_CHECK(in->numel == gnumel(p) && in->local_numel == n,
             "'%s': numel %lld local %lld, want %lld %lld", PS[p].name, (long long)in->numel,
             (long long)in->local_numel, (long long)gnumel(p), (long long)n);
}

static int rank_run(vs_world* w, void* arg)
{
    run* R = (run*)arg;
    int me = vs_world_rank(w), tp = R->nranks == 4 ? 2 : 1;
    vs_mesh* mesh = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {R->nranks == 4 ? 2 : 1, tp}}, &mesh));
    if (!mesh) return 1;
    int r = vs_mesh_coord_along(mesh, "DP"), t = vs_mesh_coord_along(mesh, "TP");
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = mesh;
    dd.zero = R->zero;
    dd.bucket_bytes = R->bucket_bytes;
    dd.optim.kind = VS_OPTIM_ADAMW;
    dd.optim.beta1 = B1;
    dd.optim.beta2 = B2;
    dd.optim.eps = EPS;
    dd.optim.weight_decay = WD;
    dd.optim.ngroups = 2;
    dd.optim.groups[1].lr_scale = G1_SCALE;
    dd.optim.groups[1].weight_decay = G1_WD;
    vs_ddp* d = NULL;
    VT_OK(vs_ddp_init(&dd, &d));
    if (!d) return 1;
    vs_ddp_param_info info[NP];
    for (int p = 0; p < NP; p++) {
        int64_t ls[3], off[3], n = 1;
        my_local(p, tp, t, ls, off);
        for (int k = 0; k < PS[p].ndim; k++) n *= ls[k];
        float f[MAXE];
        uint16_t h[MAXE];
        vs_ddp_param_info tmp;
        memset(&tmp, 0, sizeof tmp);
        tmp.ndim = PS[p].ndim;
        for (int k = 0; k < PS[p].ndim; k++) tmp.shape[k] = PS[p].shape[k], tmp.local_shape[k] = ls[k], tmp.offset[k] = off[k];
        for (int64_t i = 0; i < n; i++) {
            f[i] = init_val(p, to_global(&tmp, i));
            h[i] = bf16_of(f[i]);
        }
        vs_ddp_param_desc pd;
        memset(&pd, 0, sizeof pd);
        pd.name = PS[p].name;
        pd.data = PS[p].dt == VS_F32 ? (const void*)f : (const void*)h;
        pd.dtype = PS[p].dt;
        pd.ndim = PS[p].ndim;
        memcpy(pd.shape, PS[p].shape, sizeof(int64_t) * 3);
        pd.placements[1] = PS[p].tp;
        pd.group = PS[p].group;
        pd.no_decay = PS[p].no_decay;
        int idx = -1;
        VT_OK(vs_ddp_add_param(d, &pd, &idx));
        VT_CHECK(idx == p, "index %d", idx);
        /* before finalize: the layout is known, the owned range not yet */
        VT_OK(vs_ddp_query_param_info(d, p, &info[p]));
        check_layout(mesh, &info[p], p, tp, t);
        VT_CHECK(info[p].bucket == -1 && info[p].bucket_offset == -1 && info[p].owned_begin == -1 &&
                     info[p].owned_end == -1 && info[p].owned_offset == -1,
                 "'%s' before finalize: bucket %d owned [%lld, %lld)", PS[p].name, info[p].bucket,
                 (long long)info[p].owned_begin, (long long)info[p].owned_end);
    }
    VT_OK(vs_ddp_finalize(d));
    vs_ddp_span sp;
    VT_EXPECT_ERR(vs_ddp_grad_synced_owned(d, 0, &sp), VS_ERR_STATE, "no synchronized gradients", "'emb'");
    for (int p = 0; p < NP; p++) {
        VT_OK(vs_ddp_query_param_info(d, p, &info[p]));
        check_layout(mesh, &info[p], p, tp, t);
        const vs_ddp_param_info* in = &info[p];
        VT_CHECK(in->local_numel == vs_ddp_local_numel(d, p), "'%s': local_numel", in->name);
        VT_CHECK(in->bucket >= 0 && in->bucket_offset >= 0 && 0 <= in->owned_begin && in->owned_begin <= in->owned_end &&
                     in->owned_end <= in->local_numel,
                 "'%s': bucket %d at %lld, owned [%lld, %lld) of %lld", in->name, in->bucket, (long long)in->bucket_offset,
                 (long long)in->owned_begin, (long long)in->owned_end, (long long)in->local_numel);
        /* the primary copy: DP coordinate 0 under ZeRO-0, TP coordinate 0 where not sharded */
        int want = (R->zero != VS_ZERO_0 || r == 0) && (PS[p].tp.kind == VS_PLACE_SHARD || t == 0);
        VT_CHECK(in->primary == want, "'%s' rank (%d, %d): primary %d, want %d", in->name, r, t, in->primary, want);
    }
    /* the DP ranks' owned ranges partition each local shard: gathered over DP */
    if (R->nranks == 4) {
        vs_mesh* dpm = NULL;
        VT_OK(vs_mesh_submesh(mesh, "DP", &dpm));
        int64_t mine[NP][3], all[2][NP][3];
        for (int p = 0; p < NP; p++)
            mine[p][0] = info[p].owned_begin, mine[p][1] = info[p].owned_end, mine[p][2] = info[p].local_numel;
        VT_OK(vs_all_gather(vs_mesh_comm(dpm), mine, all, NP * 3, VS_I64, NULL));
        for (int p = 0; p < NP; p++) {
            int64_t n = info[p].local_numel;
            VT_CHECK(all[0][p][2] == n && all[1][p][2] == n, "'%s': local_numel differs over DP", PS[p].name);
            if (R->zero == VS_ZERO_0) {
                for (int q = 0; q < 2; q++)
                    VT_CHECK(all[q][p][0] == 0 && all[q][p][1] == n, "ZeRO-0 '%s': DP rank %d owns [%lld, %lld) of %lld",
                             PS[p].name, q, (long long)all[q][p][0], (long long)all[q][p][1], (long long)n);
            } else {
                VT_CHECK(all[0][p][0] == 0 && all[0][p][1] == all[1][p][0] && all[1][p][1] == n,
                         "ZeRO-%d '%s' (TP rank %d): DP ranks own [%lld, %lld) and [%lld, %lld) of %lld", (int)R->zero,
                         PS[p].name, t, (long long)all[0][p][0], (long long)all[0][p][1], (long long)all[1][p][0],
                         (long long)all[1][p][1], (long long)n);
            }
        }
    }
    /* state spans: at owned_offset from one base per bucket */
    for (int p = 0; p < NP; p++)
        for (int q = 0; q < p; q++) {
            if (info[p].bucket != info[q].bucket || info[p].owned_begin == info[p].owned_end ||
                info[q].owned_begin == info[q].owned_end)
                continue;
            vs_ddp_span a, b;
            VT_OK(vs_ddp_optim_state(d, p, VS_DDP_STATE_EXP_AVG, &a));
            VT_OK(vs_ddp_optim_state(d, q, VS_DDP_STATE_EXP_AVG, &b));
            VT_CHECK((const float*)a.data - info[p].owned_offset == (const float*)b.data - info[q].owned_offset,
                     "'%s' and '%s' (bucket %d): owned_offset %lld and %lld do not match their states",
                     PS[p].name, PS[q].name, info[p].bucket, (long long)info[p].owned_offset,
                     (long long)info[q].owned_offset);
        }
    for (int s = 0; s < NSTEPS; s++) {
        backward(d, info, s, r, t, R->nranks == 1);
        check_grads(R, d, info, s, me);
        VT_OK(vs_ddp_step(d, LR[s]));
        if (s == 0) check_adamw(R, d, info, me);
        /* the gradient the step used stays readable */
        VT_OK(vs_ddp_grad_synced_owned(d, 0, &sp));
    }
    gather_state(R, d, info);
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

static run* new_run(int nranks, vs_zero_stage zero, int64_t bb)
{
    run* R = (run*)calloc(1, sizeof *R);
    if (!R) abort();
    R->nranks = nranks;
    R->zero = zero;
    R->bucket_bytes = bb;
    pthread_mutex_init(&R->mu, NULL);
    return R;
}

static void free_run(run* R)
{
    pthread_mutex_destroy(&R->mu);
    free(R);
}

/* DP2 x TP2 against the single-rank run: every owned state element written once
   by a primary rank, and all of them (and the parameters) bit for bit equal. */
static void case_run(vs_zero_stage zero, int64_t bb)
{
    run* ref = new_run(1, zero, bb);
    run* R = new_run(4, zero, bb);
    launch(1, rank_run, ref);
    launch(4, rank_run, R);
    for (int k = 0; k < NK; k++)
        for (int p = 0; p < NP; p++) {
            if (k == K_MASTER && PS[p].dt == VS_F32) continue;
            int bad = 0;
            for (int64_t e = 0; e < gnumel(p); e++) {
                int want = k == K_PARAM ? -1 : 1; /* parameters: every replica writes */
                VT_CHECK(ref->count[k][p][e] == 1, "reference %s '%s'[%lld] written %d times",
                         kname[k], PS[p].name, (long long)e, ref->count[k][p][e]);
                if (want == 1 && R->count[k][p][e] != 1 && bad++ < 3)
                    VT_CHECK(0, "ZeRO-%d %s '%s'[%lld]: saved by %d primary ranks, want 1", (int)zero, kname[k],
                             PS[p].name, (long long)e, R->count[k][p][e]);
                if (want == -1 && R->count[k][p][e] < 1 && bad++ < 3)
                    VT_CHECK(0, "ZeRO-%d '%s'[%lld]: no rank holds it", (int)zero, PS[p].name, (long long)e);
                if (bits(R->res[k][p][e]) != bits(ref->res[k][p][e]) && bad++ < 3)
                    VT_CHECK(0, "ZeRO-%d bucket_bytes %lld %s '%s'[%lld] = %.9g, single rank %.9g", (int)zero,
                             (long long)bb, kname[k], PS[p].name, (long long)e, (double)R->res[k][p][e],
                             (double)ref->res[k][p][e]);
            }
        }
    /* the state moved: not a comparison of zeros */
    VT_CHECK(ref->res[K_M2][0][0] > 0 || ref->res[K_M2][0][1] > 0, "exp_avg_sq of 'emb' is zero");
    free_run(ref);
    free_run(R);
}

/* ------------------------------------------------------------------------- */
/* SGD momentum, accumulation, and the error paths (DP=2)                    */

static int rank_sgd(vs_world* w, void* arg)
{
    vs_zero_stage zero = (vs_zero_stage)(intptr_t)arg;
    int me = vs_world_rank(w);
    vs_mesh* mesh = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {2}}, &mesh));
    if (!mesh) return 1;
    vs_ddp* d = NULL;
    VT_OK(vs_ddp_init(&(vs_ddp_desc){.mesh = mesh, .zero = zero, .bucket_bytes = 64,
                                     .optim = {.kind = VS_OPTIM_SGD, .momentum = 0.9}},
                      &d));
    if (!d) return 1;
    enum { N = 45 };
    VT_OK(vs_ddp_add_param(d, &(vs_ddp_param_desc){.name = "w", .dtype = VS_F32, .ndim = 1, .shape = {N}}, NULL));
    VT_OK(vs_ddp_add_param(d, &(vs_ddp_param_desc){.name = "h", .dtype = VS_BF16, .ndim = 2, .shape = {3, 7}}, NULL));
    VT_OK(vs_ddp_finalize(d));
    vs_ddp_span sp;
    vs_ddp_param_info in;
    /* bad input */
    VT_EXPECT_ERR(vs_ddp_optim_state(d, 0, VS_DDP_STATE_EXP_AVG, &sp), VS_ERR_INVALID, "EXP_AVG", "SGD");
    VT_EXPECT_ERR(vs_ddp_optim_state(d, 0, VS_DDP_STATE_MASTER, &sp), VS_ERR_INVALID, "'w'", "MASTER");
    VT_EXPECT_ERR(vs_ddp_optim_state(d, 1, VS_DDP_STATE_CUSTOM0, &sp), VS_ERR_INVALID, "CUSTOM0", "'h'");
    VT_EXPECT_ERR(vs_ddp_optim_state(d, 0, VS_DDP_STATE_NONE, &sp), VS_ERR_INVALID, "unknown state 0", NULL);
    VT_EXPECT_ERR(vs_ddp_optim_state(d, 0, (vs_ddp_state)77, &sp), VS_ERR_INVALID, "unknown state 77", NULL);
    VT_EXPECT_ERR(vs_ddp_optim_state(d, 2, VS_DDP_STATE_MOMENTUM, &sp), VS_ERR_INVALID, "index 2", NULL);
    VT_EXPECT_ERR(vs_ddp_optim_state(d, 0, VS_DDP_STATE_MOMENTUM, NULL), VS_ERR_NULL, "out", NULL);
    VT_EXPECT_ERR(vs_ddp_optim_state(NULL, 0, VS_DDP_STATE_MOMENTUM, &sp), VS_ERR_NULL, "ddp", NULL);
    VT_EXPECT_ERR(vs_ddp_grad_synced_owned(d, -1, &sp), VS_ERR_INVALID, "index -1", NULL);
    VT_EXPECT_ERR(vs_ddp_grad_synced_owned(d, 0, NULL), VS_ERR_NULL, "out", NULL);
    VT_EXPECT_ERR(vs_ddp_grad_synced_owned(NULL, 0, &sp), VS_ERR_NULL, "ddp", NULL);
    VT_EXPECT_ERR(vs_ddp_query_param_info(d, 2, &in), VS_ERR_INVALID, "index 2", NULL);
    VT_EXPECT_ERR(vs_ddp_query_param_info(d, 0, NULL), VS_ERR_NULL, "out", NULL);
    VT_EXPECT_ERR(vs_ddp_query_param_info(NULL, 0, &in), VS_ERR_NULL, "ddp", NULL);
    VT_OK(vs_ddp_optim_state(d, 1, VS_DDP_STATE_MASTER, &sp)); /* bf16: kept */

    /* two synced passes before a step add up (ZeRO-1: into the f32 accumulator
       from the second on); then a pass without sync has nothing to read */
    float want[N];
    for (int pass = 0; pass < 3; pass++) {
        if (pass == 0) VT_OK(vs_ddp_zero_grad(d));
        if (pass == 2 && zero == VS_ZERO_2) break; /* ZeRO-2 always reduces */
        if (pass == 2) VT_OK(vs_ddp_set_sync(d, 0));
        for (int p = 1; p >= 0; p--) {
            void* g = vs_ddp_grad(d, p);
            VT_CHECK(g != NULL, "grad: %s", vs_last_error());
            if (!g) return 1;
            if (p == 0) {
                for (int i = 0; i < N; i++) ((float*)g)[i] += (float)((i % 5) + me + pass) / 4.0f;
                if (pass == 0) VT_EXPECT_ERR(vs_ddp_grad_synced_owned(d, 0, &sp), VS_ERR_STATE, "backward pass", "'w'");
            }
            VT_OK(vs_ddp_grad_ready(d, p));
        }
        VT_OK(vs_ddp_finish_grad_sync(d));
        if (pass == 2) {
            VT_EXPECT_ERR(vs_ddp_grad_synced_owned(d, 0, &sp), VS_ERR_STATE, "set_sync", "'w'");
            VT_OK(vs_ddp_set_sync(d, 1));
            break;
        }
        /* average over the ranks 0, 1, summed over passes */
        for (int i = 0; i < N; i++) want[i] = 0;
        for (int q = 0; q <= pass; q++)
            for (int i = 0; i < N; i++) want[i] += (float)((i % 5) + 0 + q) / 4.0f / 2 + (float)((i % 5) + 1 + q) / 4.0f / 2;
        VT_OK(vs_ddp_grad_synced_owned(d, 0, &sp));
        VT_OK(vs_ddp_query_param_info(d, 0, &in));
        VT_CHECK(sp.begin == in.owned_begin && sp.end == in.owned_end, "span = owned range");
        VT_CHECK(pass == 0 || zero == VS_ZERO_0 || sp.dtype == VS_F32, "accumulated: f32");
        for (int64_t i = sp.begin; sp.data && i < sp.end; i++)
            VT_CHECK(load(sp.data, sp.dtype, i - sp.begin) == want[i], "ZeRO-%d pass %d: owned grad[%lld] = %g, want %g",
                     (int)zero, pass, (long long)i, (double)load(sp.data, sp.dtype, i - sp.begin), (double)want[i]);
    }
    /* one clean synced pass for the step */
    VT_OK(vs_ddp_zero_grad(d));
    VT_EXPECT_ERR(vs_ddp_grad_synced_owned(d, 0, &sp), VS_ERR_STATE, "zero_grad", NULL);
    for (int p = 1; p >= 0; p--) {
        void* g = vs_ddp_grad(d, p);
        if (!g) return 1;
        if (p == 0)
            for (int i = 0; i < N; i++) ((float*)g)[i] += (float)((i % 5) + me) / 4.0f;
        VT_OK(vs_ddp_grad_ready(d, p));
    }
    VT_OK(vs_ddp_finish_grad_sync(d));
    VT_OK(vs_ddp_step(d, 0.1));
    /* momentum after one step, no weight decay: the averaged gradient */
    VT_OK(vs_ddp_optim_state(d, 0, VS_DDP_STATE_MOMENTUM, &sp));
    VT_OK(vs_ddp_query_param_info(d, 0, &in));
    VT_CHECK(sp.dtype == VS_F32 && sp.begin == in.owned_begin && sp.end == in.owned_end, "momentum span");
    VT_CHECK(zero != VS_ZERO_0 || (sp.begin == 0 && sp.end == N), "ZeRO-0 owns all");
    for (int64_t i = sp.begin; sp.data && i < sp.end; i++) {
        float g = (float)((i % 5) + 0) / 4.0f / 2 + (float)((i % 5) + 1) / 4.0f / 2;
        VT_CHECK(((const float*)sp.data)[i - sp.begin] == g, "ZeRO-%d momentum[%lld] = %g, want %g", (int)zero,
                 (long long)i, (double)((const float*)sp.data)[i - sp.begin], (double)g);
    }
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

/* ------------------------------------------------------------------------- */
/* vs_ddp_query_desc: the documented defaults, resolved                      */

static void check_same_desc(const vs_ddp_desc* a, const vs_ddp_desc* b)
{
    VT_CHECK(a->mesh == b->mesh && a->bucket_bytes == b->bucket_bytes && a->zero == b->zero &&
                 a->zero2_buffers == b->zero2_buffers && a->no_overlap == b->no_overlap && a->grad_fp32 == b->grad_fp32 &&
                 a->stream == b->stream,
             "settings differ after a round trip");
    VT_CHECK(!strcmp(a->dp_dim, b->dp_dim) && (a->pp_dim == NULL) == (b->pp_dim == NULL) &&
                 (!a->pp_dim || !strcmp(a->pp_dim, b->pp_dim)),
             "dims differ after a round trip");
    const vs_optim_desc *x = &a->optim, *y = &b->optim;
    VT_CHECK(x->kind == y->kind && x->beta1 == y->beta1 && x->beta2 == y->beta2 && x->eps == y->eps &&
                 x->beta1_set == y->beta1_set && x->beta2_set == y->beta2_set && x->eps_set == y->eps_set &&
                 x->weight_decay == y->weight_decay && x->momentum == y->momentum && x->nesterov == y->nesterov &&
                 x->ngroups == y->ngroups,
             "optimizer differs after a round trip");
    for (int g = 1; g < x->ngroups && g < VS_DDP_MAX_GROUPS; g++)
        VT_CHECK(x->groups[g].lr_scale == y->groups[g].lr_scale && x->groups[g].weight_decay == y->groups[g].weight_decay &&
                     x->groups[g].lr_scale_set == y->groups[g].lr_scale_set,
                 "group %d differs after a round trip", g);
}

static int rank_query(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh* mesh = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {1, 1}}, &mesh));
    if (!mesh) return 1;
    vs_ddp* d = NULL;
    vs_ddp_desc q, q2;
    /* everything zero */
    VT_OK(vs_ddp_init(&(vs_ddp_desc){.mesh = mesh}, &d));
    if (!d) return 1;
    VT_OK(vs_ddp_query_desc(d, &q));
    VT_CHECK(q.mesh == mesh && q.bucket_bytes == 32 * 1024 * 1024 && q.bucket_bytes == VS_DDP_DEFAULT_BUCKET_BYTES,
             "bucket_bytes %lld, documented 32 MiB", (long long)q.bucket_bytes);
    VT_CHECK(q.zero2_buffers == 2 && VS_DDP_DEFAULT_ZERO2_BUFFERS == 2, "zero2_buffers %d, documented 2", q.zero2_buffers);
    VT_CHECK(q.optim.beta1 == 0.9 && q.optim.beta2 == 0.999 && q.optim.eps == 1e-8, "AdamW defaults %g %g %g",
             q.optim.beta1, q.optim.beta2, q.optim.eps);
    VT_CHECK(q.optim.beta1_set == 1 && q.optim.beta2_set == 1 && q.optim.eps_set == 1, "resolved values are marked set");
    VT_CHECK(q.optim.ngroups == 1 && q.optim.kind == VS_OPTIM_ADAMW && q.zero == VS_ZERO_0, "ngroups %d",
             q.optim.ngroups);
    VT_CHECK(q.dp_dim && !strcmp(q.dp_dim, "DP") && q.pp_dim == NULL, "dims '%s' '%s'", q.dp_dim ? q.dp_dim : "(null)",
             q.pp_dim ? q.pp_dim : "(null)");
    VT_CHECK(q.stream == NULL && q.no_overlap == 0 && q.grad_fp32 == 0, "unset fields stay zero");
    /* vs_ddp_set_bucket_bytes shows */
    VT_OK(vs_ddp_set_bucket_bytes(d, 4096));
    VT_OK(vs_ddp_query_desc(d, &q));
    VT_CHECK(q.bucket_bytes == 4096, "after set_bucket_bytes: %lld", (long long)q.bucket_bytes);
    VT_OK(vs_ddp_free(d));

    /* zeros that are meant, groups, and the round trip */
    char dpname[8] = "DP";
    vs_ddp_desc in;
    memset(&in, 0, sizeof in);
    in.mesh = mesh;
    in.dp_dim = dpname;
    in.zero = VS_ZERO_2;
    in.optim.beta1_set = 1; /* beta1 = 0 */
    in.optim.eps = 1e-6;
    in.optim.ngroups = 3;
    in.optim.groups[1].weight_decay = 0.5; /* lr_scale 0, not set: 1 */
    in.optim.groups[2].lr_scale_set = 1;   /* lr_scale 0: frozen */
    VT_OK(vs_ddp_init(&in, &d));
    if (!d) return 1;
    memset(dpname, 0, sizeof dpname); /* the caller's string is not kept */
    VT_OK(vs_ddp_query_desc(d, &q));
    VT_CHECK(q.optim.beta1 == 0 && q.optim.beta2 == 0.999 && q.optim.eps == 1e-6, "beta1 %g beta2 %g eps %g",
             q.optim.beta1, q.optim.beta2, q.optim.eps);
    VT_CHECK(q.optim.ngroups == 3 && q.optim.groups[1].lr_scale == 1.0 && q.optim.groups[1].lr_scale_set == 1 &&
                 q.optim.groups[1].weight_decay == 0.5 && q.optim.groups[2].lr_scale == 0 &&
                 q.optim.groups[2].lr_scale_set == 1,
             "groups: %g %g", q.optim.groups[1].lr_scale, q.optim.groups[2].lr_scale);
    VT_CHECK(q.zero2_buffers == 2 && q.zero == VS_ZERO_2, "zero2_buffers %d", q.zero2_buffers);
    VT_CHECK(q.dp_dim && !strcmp(q.dp_dim, "DP") && q.dp_dim != dpname, "dp_dim is the mesh's name");
    vs_ddp* d2 = NULL;
    VT_OK(vs_ddp_init(&q, &d2));
    if (d2) {
        VT_OK(vs_ddp_query_desc(d2, &q2));
        check_same_desc(&q, &q2);
        VT_OK(vs_ddp_free(d2));
    }
    VT_EXPECT_ERR(vs_ddp_query_desc(NULL, &q), VS_ERR_NULL, "vs_ddp_query_desc", "ddp");
    VT_EXPECT_ERR(vs_ddp_query_desc(d, NULL), VS_ERR_NULL, "vs_ddp_query_desc", "out");
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));

    /* the dims: a 1-D mesh's only dim; PP found by name */
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {1}, .dim_names = {"X"}}, &mesh));
    if (!mesh) return 1;
    VT_OK(vs_ddp_init(&(vs_ddp_desc){.mesh = mesh}, &d));
    if (d) {
        VT_OK(vs_ddp_query_desc(d, &q));
        VT_CHECK(q.dp_dim && !strcmp(q.dp_dim, "X") && !q.pp_dim, "1-D mesh: dp_dim '%s'", q.dp_dim ? q.dp_dim : "");
        VT_OK(vs_ddp_free(d));
    }
    VT_OK(vs_mesh_free(mesh));
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {1, 1, 1}}, &mesh));
    if (!mesh) return 1;
    VT_OK(vs_ddp_init(&(vs_ddp_desc){.mesh = mesh}, &d));
    if (d) {
        VT_OK(vs_ddp_query_desc(d, &q));
        VT_CHECK(q.dp_dim && !strcmp(q.dp_dim, "DP") && q.pp_dim && !strcmp(q.pp_dim, "PP"), "PP x DP x TP: '%s' '%s'",
                 q.dp_dim ? q.dp_dim : "", q.pp_dim ? q.pp_dim : "");
        VT_OK(vs_ddp_free(d));
    }
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

int main(void)
{
    setenv("VESCALE_TIMEOUT", "60", 0);
    static const char* const label[3][2] = {
        {"DP2xTP2 ZeRO-0, default buckets: info, owned grads, AdamW state = formula and = single rank",
         "DP2xTP2 ZeRO-0, 40-byte buckets: info, owned grads, AdamW state = formula and = single rank"},
        {"DP2xTP2 ZeRO-1, default buckets: info, owned grads, AdamW state = formula and = single rank",
         "DP2xTP2 ZeRO-1, 40-byte buckets: info, owned grads, AdamW state = formula and = single rank"},
        {"DP2xTP2 ZeRO-2, default buckets: info, owned grads, AdamW state = formula and = single rank",
         "DP2xTP2 ZeRO-2, 40-byte buckets: info, owned grads, AdamW state = formula and = single rank"},
    };
    for (int z = 0; z < 3; z++)
        for (int b = 0; b < 2; b++) VT_CASE(label[z][b], case_run((vs_zero_stage)z, b ? 40 : 0));
    VT_CASE("SGD momentum, accumulated owned grads, errors: ZeRO-0", launch(2, rank_sgd, (void*)(intptr_t)0));
    VT_CASE("SGD momentum, accumulated owned grads, errors: ZeRO-1", launch(2, rank_sgd, (void*)(intptr_t)1));
    VT_CASE("SGD momentum, accumulated owned grads, errors: ZeRO-2", launch(2, rank_sgd, (void*)(intptr_t)2));
    VT_CASE("vs_ddp_query_desc: documented defaults resolved, round trip", launch(1, rank_query, NULL));
    return vt_summary();
}
