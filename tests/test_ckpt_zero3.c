/* test_ckpt_zero3.c - DDP checkpoints (vs_ckpt_save_ddp / vs_ckpt_load_ddp)
   resharded between ZeRO-0/1/2/3 on DP2, DP4, DPR2 x DPS2 (HSDP), DP2 x TP2,
   DPR2 x DPS2 x TP2 and PP2 x DP2 meshes, both ways (issue 34, section 4).

   The model: four parameters in two ready groups (the pipeline's two stages
   under PP2): a.w bf16 [16, 24] Shard(0) over TP, a.b bf16 [40], b.w f32
   [24, 12] Shard(1) over TP, b.g bf16 [20]; AdamW with weight decay, so a
   checkpoint holds parameters, f32 masters of the bf16 ones, both moments and
   the step count. A step runs as a ZeRO-3 trainer's (gather, read, release per
   group; gather, gradient, vs_ddp_group_ready, release in reverse), the same
   calls under every stage.

   The gradient is exact whatever the mesh: a global batch of 4 virtual
   samples, a data rank's gradient the mean over its samples of (k + sign(f)
   + sign(v)) / 64 (|k| <= 7; f, v the parameter's value as the forward and
   the backward gathered it), so every sum and mean over
   1, 2 or 4 samples or DP ranks is exact in f32, and the rest (AdamW) is
   elementwise: any two meshes train bit for bit alike (grad_fp32: the
   reduced gradient is f32 on every stage).

   Every checkpoint is read back on one rank by a plain vs_ckpt_load of full
   tensors (the canonical form: each parameter, master, moment and the step).
   For each pair (A, B) of the matrix: A trains S steps and saves a, trains T
   more and saves a3; B loads a and saves b, trains T and saves b3; A loads b
   and saves a2; A trains a step on other data, loads b between steps, trains
   T and saves a4. Then a = b = a2 tensor by tensor, bit for bit, a2's files
   byte for byte a's, and a3 = b3 = a4. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vescale_ddp.h"
#include "vescale_ckpt.h"
#include "vs_test.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "ddp_common.h"

enum { NP = 4, MAXE = 16 * 24, NSAMPLE = 4, MAXR = 8, S = 2, T = 2 };
static const char* const pname[NP] = {"a.w", "a.b", "b.w", "b.g"};
static const int pndim[NP] = {2, 1, 2, 1};
static const int64_t pshape[NP][2] = {{16, 24}, {40, 0}, {24, 12}, {20, 0}};
static const int ptp[NP] = {0, -1, 1, -1}; // the tensor dim sharded over TP (-1: Replicate)
static const vs_dtype pdt[NP] = {VS_BF16, VS_BF16, VS_F32, VS_BF16};
static int pgroup(int p) { return p < 2 ? 1 : 2; }
static int64_t pnumel(int p) { return pshape[p][0] * (pndim[p] == 2 ? pshape[p][1] : 1); }

typedef struct mspec {
    int pp, dpr, dp, tp; // dp: the DP (HSDP: DPS) size; pp, dpr 0: no such dim; tp 1: none
} mspec;
static int mranks(mspec m) { return (m.pp ? m.pp : 1) * (m.dpr ? m.dpr : 1) * m.dp * m.tp; }
static const char* mname(mspec m, char* buf, size_t n)
{
    snprintf(buf, n, "%s%s%s%d%s", m.pp ? "PP2 x " : "", m.dpr ? "DPR2 x " : "", m.dpr ? "DPS" : "DP", m.dp,
             m.tp > 1 ? " x TP2" : "");
    return buf;
}

typedef struct run {
    mspec m;
    vs_zero_stage zero;
    int pre;          // steps on other data before the load (a load between steps)
    const char* load; // vs_ckpt_load_ddp (after pre)
    int s1;           // steps, then save1
    const char* save1;
    int s2; // more steps, then save2
    const char* save2;
    int hold; // > 0: group `hold` is gathered (held) at the load: it must be refused
    int probe; // the load may fail (load_rc, load_msg)
    vs_result load_rc; // (hold: what the load returned on rank 0)
    char load_msg[512];
} run;

static float init_of(int p, int64_t e) { return (float)((int)((e * 37 + p * 11) % 29) - 14) / 32.0f; }
static float sample_grad(int s, int64_t t, int p, int64_t e, float v, float f)
{
    uint32_t x = ((uint32_t)s * 7919u + (uint32_t)t * 104729u + (uint32_t)p * 1299709u + (uint32_t)e * 15485863u) ^
                 0x9E3779B9u;
    x ^= x >> 13, x *= 0x5bd1e995u, x ^= x >> 15;
    int k = (int)(x % 15u) - 7;
    return (float)(k + (v > 0 ? 1 : -1) + (f > 0 ? 1 : -1)) / 64.0f;
}
static vs_mesh* make_mesh(vs_world* w, mspec s) { return dc_mesh(w, s.pp, s.dpr, s.dp, s.tp); }

typedef struct rank_ctx {
    vs_ddp* d;
    int loc[NP]; // DDP index (-1: another stage's)
    vs_ddp_param_info pi[NP];
    int r, ndp; // data rank, data ranks
    float fwd[NP][MAXE]; // the values the forward read
} rank_ctx;

/* One training step as a ZeRO-3 trainer runs it (salt: other data). */
static void train_step(rank_ctx* x, int salt)
{
    vs_ddp* d = x->d;
    int64_t t = vs_ddp_step_count(d) + (salt ? 1000 : 0);
    VT_OK(vs_ddp_zero_grad(d));
    for (int g = 1; g <= 2; g++) { // forward
        if (x->loc[2 * g - 2] < 0) continue;
        VT_OK(vs_ddp_gather(d, g));
        for (int p = 2 * g - 2; p < 2 * g; p++) { // the "activations": the values the forward saw
            const void* v = vs_ddp_param(d, x->loc[p]);
            VT_CHECK(v != NULL, "%s", vs_last_error());
            for (int64_t i = 0; v && i < x->pi[p].local_numel; i++) x->fwd[p][i] = dc_ld(v, x->pi[p].dtype, i);
        }
        VT_OK(vs_ddp_release(d, g));
    }
    int s0 = x->r * NSAMPLE / x->ndp, s1 = (x->r + 1) * NSAMPLE / x->ndp;
    for (int g = 2; g >= 1; g--) { // backward
        if (x->loc[2 * g - 2] < 0) continue;
        VT_OK(vs_ddp_gather(d, g));
        for (int p = 2 * g - 1; p >= 2 * g - 2; p--) {
            const vs_ddp_param_info* pi = &x->pi[p];
            const void* v = vs_ddp_param(d, x->loc[p]);
            void* gr = vs_ddp_grad(d, x->loc[p]);
            VT_CHECK(v && gr, "%s: param %p grad %p: %s", pname[p], v, gr, vs_last_error());
            if (!v || !gr) return;
            for (int64_t i = 0; i < pi->local_numel; i++) {
                int64_t e = dc_global_of(pi, i);
                float val = dc_ld(v, pi->dtype, i), sum = 0;
                for (int s = s0; s < s1; s++) sum += sample_grad(s, t, p, e, val, x->fwd[p][i]);
                dc_st(gr, pi->grad_dtype, i, sum / (float)(s1 - s0));
            }
        }
        VT_OK(vs_ddp_group_ready(d, g));
        VT_OK(vs_ddp_release(d, g));
    }
    VT_OK(vs_ddp_finish_grad_sync(d));
    VT_OK(vs_ddp_step(d, 0.01));
}

static int rank_fn(vs_world* w, void* arg)
{
    run* c = (run*)arg;
    vs_mesh* mesh = make_mesh(w, c->m);
    if (!mesh) return 1;
    rank_ctx x;
    memset(&x, 0, sizeof x);
    x.ndp = (c->m.dpr ? c->m.dpr : 1) * c->m.dp;
    x.r = c->m.dpr ? vs_mesh_coord_along(mesh, "DPR") * c->m.dp + vs_mesh_coord_along(mesh, "DPS")
                   : vs_mesh_coord_along(mesh, "DP");
    int stage = c->m.pp ? vs_mesh_coord_along(mesh, "PP") : -1;
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = mesh;
    dd.zero = c->zero;
    dd.grad_fp32 = 1;
    dd.optim.kind = VS_OPTIM_ADAMW;
    dd.optim.weight_decay = 0.05;
    VT_OK(vs_ddp_init(&dd, &x.d));
    if (!x.d) return 1;
    for (int p = 0; p < NP; p++) {
        x.loc[p] = -1;
        if (stage >= 0 && pgroup(p) != stage + 1) continue;
        vs_ddp_param_desc pd;
        memset(&pd, 0, sizeof pd);
        pd.name = pname[p];
        pd.dtype = pdt[p];
        pd.ndim = pndim[p];
        pd.shape[0] = pshape[p][0], pd.shape[1] = pshape[p][1];
        pd.no_decay = pndim[p] == 1;
        pd.ready_group = pgroup(p);
        if (c->m.tp > 1 && ptp[p] >= 0) pd.placements[vs_mesh_dim_index(mesh, "TP")] = vs_shard(ptp[p]);
        vs_ddp_param_info q;
        void* init = dc_shard_init(&dd, &pd, init_of, p, &q);
        pd.data = init;
        VT_OK(vs_ddp_add_param(x.d, &pd, &x.loc[p]));
        free(init);
    }
    VT_OK(vs_ddp_finalize(x.d));
    for (int p = 0; p < NP; p++)
        if (x.loc[p] >= 0) VT_OK(vs_ddp_query_param_info(x.d, x.loc[p], &x.pi[p]));
    for (int s = 0; s < c->pre; s++) train_step(&x, 1);
    if (c->load) {
        if (c->hold) VT_OK(vs_ddp_gather(x.d, c->hold));
        vs_result r = dc_ckpt_ddp(mesh, x.d, c->load, 0);
        if (vs_world_rank(w) == 0) {
            c->load_rc = r;
            snprintf(c->load_msg, sizeof c->load_msg, "%s", r ? vs_last_error() : "");
        }
        if (c->hold) {
            VT_OK(vs_ddp_release(x.d, c->hold));
            VT_ERR(vs_ddp_owned_rewrite(x.d, 2), VS_ERR_INVALID, "drop 2");
            VT_ERR(vs_ddp_owned_rewrite(NULL, 1), VS_ERR_NULL, "ddp is NULL");
        }
        VT_CHECK(r == VS_OK || c->hold || c->probe, "load %s: %s", c->load, vs_last_error());
    }
    for (int s = 0; s < c->s1; s++) train_step(&x, 0);
    if (c->save1) VT_OK(dc_ckpt_ddp(mesh, x.d, c->save1, 1));
    for (int s = 0; s < c->s2; s++) train_step(&x, 0);
    if (c->save2) VT_OK(dc_ckpt_ddp(mesh, x.d, c->save2, 1));
    VT_OK(vs_ddp_free(x.d));
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

static vs_result launch(int n, vs_rank_fn fn, void* arg)
{
    vs_launch_desc ld_;
    memset(&ld_, 0, sizeof ld_);
    ld_.nranks = n;
    ld_.timeout_s = 60;
    return vs_launch_ex(&ld_, fn, arg);
}
static void go(run c) { VT_OK(launch(mranks(c.m), rank_fn, &c)); }

/* ---- the canonical form: every tensor of a checkpoint, whole, on one rank ---- */
typedef struct canon {
    float p[NP][MAXE], master[NP][MAXE], m[NP][MAXE], v[NP][MAXE];
    int64_t step;
} canon;
typedef struct canon_job {
    const char* path;
    canon* out;
} canon_job;

static int canon_rank(vs_world* w, void* arg)
{
    canon_job* j = (canon_job*)arg;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = 1;
    vs_mesh* mesh = NULL;
    VT_OK(vs_mesh_init(w, &md, &mesh));
    if (!mesh) return 1;
    enum { NE = NP * 4 + 1 };
    vs_ckpt_entry e[NE];
    char names[NE][64];
    static uint16_t half[NP][MAXE];
    memset(e, 0, sizeof e);
    int n = 0;
    for (int p = 0; p < NP; p++)
        for (int s = 0; s < 4; s++) {
            if (s == 1 && pdt[p] == VS_F32) continue; // (f32 parameters have no master)
            vs_ckpt_entry* x = &e[n];
            snprintf(names[n], sizeof names[n], "%s%s", pname[p], (const char*[]){"", ".master", ".exp_avg", ".exp_avg_sq"}[s]);
            x->name = names[n];
            x->kind = VS_CKPT_TENSOR;
            x->t.layout.mesh = mesh;
            x->t.layout.p[0] = vs_replicate();
            x->t.ndim = pndim[p];
            x->t.shape[0] = pshape[p][0], x->t.shape[1] = pshape[p][1];
            x->t.dtype = s == 0 ? pdt[p] : VS_F32;
            x->t.data = s == 0 ? (pdt[p] == VS_F32 ? (void*)j->out->p[p] : (void*)half[p])
                               : (void*)(s == 1 ? j->out->master[p] : s == 2 ? j->out->m[p] : j->out->v[p]);
            n++;
        }
    e[n].name = "__step", e[n].kind = VS_CKPT_BLOB, e[n].blob = &j->out->step, e[n].blob_bytes = sizeof j->out->step;
    n++;
    vs_ckpt_desc cd;
    memset(&cd, 0, sizeof cd);
    cd.mesh = mesh;
    vs_ckpt* ck = NULL;
    VT_OK(vs_ckpt_init(&cd, &ck));
    VT_OK(vs_ckpt_load(ck, j->path, e, n, NULL));
    VT_OK(vs_ckpt_free(ck));
    for (int p = 0; p < NP; p++)
        for (int64_t i = 0; pdt[p] != VS_F32 && i < pnumel(p); i++) j->out->p[p][i] = vs_bf16_to_f32(half[p][i]);
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

static canon* canon_of(const char* path)
{
    canon* c = (canon*)calloc(1, sizeof *c);
    canon_job j = {path, c};
    VT_OK(launch(1, canon_rank, &j));
    return c;
}

/* a and b bit for bit; else one line naming the first difference */
static int same_canon(const canon* a, const canon* b, const char* what)
{
    if (a->step != b->step) {
        VT_CHECK(0, "%s: step %lld vs %lld", what, (long long)a->step, (long long)b->step);
        return 0;
    }
    const char* kn[4] = {"", ".master", ".exp_avg", ".exp_avg_sq"};
    for (int p = 0; p < NP; p++)
        for (int s = 0; s < 4; s++) {
            const float* x = s == 0 ? a->p[p] : s == 1 ? a->master[p] : s == 2 ? a->m[p] : a->v[p];
            const float* y = s == 0 ? b->p[p] : s == 1 ? b->master[p] : s == 2 ? b->m[p] : b->v[p];
            for (int64_t i = 0; i < pnumel(p); i++)
                if (memcmp(&x[i], &y[i], sizeof(float))) {
                    VT_CHECK(0, "%s: %s%s[%lld] %.9g vs %.9g", what, pname[p], kn[s], (long long)i, x[i], y[i]);
                    return 0;
                }
        }
    return 1;
}

/* the files of checkpoint folders a and b, byte for byte */
static int same_files(const char* a, const char* b)
{
    DIR* d = opendir(a);
    int ok = d != NULL, nfiles = 0;
    struct dirent* de;
    while (ok && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char pa[600], pb[600];
        snprintf(pa, sizeof pa, "%s/%s", a, de->d_name);
        snprintf(pb, sizeof pb, "%s/%s", b, de->d_name);
        FILE *fa = fopen(pa, "rb"), *fb = fopen(pb, "rb");
        ok = fa && fb;
        int ca = 0, cb = 0;
        while (ok && (ca = fgetc(fa)) == (cb = fgetc(fb)) && ca != EOF) {
        }
        if (ok && ca != cb) ok = 0;
        VT_CHECK(ok, "%s and %s differ", pa, pb);
        if (fa) fclose(fa);
        if (fb) fclose(fb);
        nfiles++;
    }
    if (d) closedir(d);
    VT_CHECK(nfiles > 1, "%s: %d files", a, nfiles);
    return ok && nfiles > 1;
}

static char tmpdir[64];
static void path_of(char* buf, size_t n, const char* tag, int i)
{
    snprintf(buf, n, "%s/%s%d", tmpdir, tag, i);
}

/* One pair of the matrix: A -> B -> A (see the top). */
static void pair(int id, mspec am, vs_zero_stage az, mspec bm, vs_zero_stage bz)
{
    char a[128], a2[128], a3[128], a4[128], b[128], b3[128], an[48], bn[48], what[256];
    path_of(a, sizeof a, "a", id), path_of(a2, sizeof a2, "a2_", id), path_of(a3, sizeof a3, "a3_", id);
    path_of(a4, sizeof a4, "a4_", id), path_of(b, sizeof b, "b", id), path_of(b3, sizeof b3, "b3_", id);
    mname(am, an, sizeof an), mname(bm, bn, sizeof bn);
    go((run){.m = am, .zero = az, .s1 = S, .save1 = a, .s2 = T, .save2 = a3});
    go((run){.m = bm, .zero = bz, .load = a, .save1 = b, .s2 = T, .save2 = b3});
    go((run){.m = am, .zero = az, .load = b, .save1 = a2});
    go((run){.m = am, .zero = az, .pre = 1, .load = b, .s1 = T, .save1 = a4});
    canon *ca = canon_of(a), *cb = canon_of(b), *ca2 = canon_of(a2), *ca3 = canon_of(a3), *cb3 = canon_of(b3),
          *ca4 = canon_of(a4);
    VT_CHECK(ca->step == S, "%s: step %lld saved", a, (long long)ca->step);
    snprintf(what, sizeof what, "ZeRO-%d %s -> ZeRO-%d %s", (int)az, an, (int)bz, bn);
    same_canon(ca, cb, what);
    snprintf(what, sizeof what, "ZeRO-%d %s -> ZeRO-%d %s -> back", (int)az, an, (int)bz, bn);
    same_canon(ca, ca2, what);
    same_files(a, a2);
    snprintf(what, sizeof what, "ZeRO-%d %s trained on from its file, vs ZeRO-%d %s", (int)bz, bn, (int)az, an);
    same_canon(ca3, cb3, what);
    snprintf(what, sizeof what, "ZeRO-%d %s loaded between steps", (int)az, an);
    same_canon(ca3, ca4, what);
    free(ca), free(cb), free(ca2), free(ca3), free(cb3), free(ca4);
}

static const mspec DP2 = {0, 0, 2, 1}, DP4 = {0, 0, 4, 1}, HSDP = {0, 2, 2, 1}, DP2TP2 = {0, 0, 2, 2},
                   HSDPTP = {0, 2, 2, 2}, PP2DP2 = {2, 0, 2, 1};

static void case_matrix(void)
{
    pair(0, DP2, VS_ZERO_3, DP4, VS_ZERO_0);
    pair(1, DP4, VS_ZERO_3, HSDP, VS_ZERO_1);
    pair(2, HSDP, VS_ZERO_2, DP2TP2, VS_ZERO_3);
    pair(3, DP2TP2, VS_ZERO_3, PP2DP2, VS_ZERO_3);
    pair(4, HSDPTP, VS_ZERO_1, DP2, VS_ZERO_3);
    pair(5, PP2DP2, VS_ZERO_2, DP4, VS_ZERO_3);
    pair(6, DP2, VS_ZERO_1, HSDPTP, VS_ZERO_3);
    pair(7, HSDPTP, VS_ZERO_0, DP2, VS_ZERO_2);
    pair(8, HSDP, VS_ZERO_3, PP2DP2, VS_ZERO_1);
    pair(9, PP2DP2, VS_ZERO_3, HSDPTP, VS_ZERO_2);
}

/* make test-long (VS_CKPT_ZERO3_ALL=1): every (mesh, stage) to every other, both ways */
static void case_all(void)
{
    const mspec ms[6] = {DP2, DP4, HSDP, DP2TP2, HSDPTP, PP2DP2};
    int id = 100;
    for (int a = 0; a < 24; a++)
        for (int b = a + 1; b < 24; b++) pair(id++, ms[a / 4], (vs_zero_stage)(a % 4), ms[b / 4], (vs_zero_stage)(b % 4));
}

/* --make DIR (tests/ckpt_tool.sh): DIR/z3, ZeRO-3 DP2 after S steps; DIR/hsdp, HSDP
   ZeRO-1 DPR2 x DPS2 x TP2 loaded from it and saved; DIR/z3b, ZeRO-3 DP2 loaded
   from that and saved; DIR/z3t, DIR/hsdpt: each of the first two trained T more steps. */
static int make_sample(const char* dir)
{
    char z3[600], hs[600], z3b[600], z3t[600], hst[600];
    snprintf(z3, sizeof z3, "%s/z3", dir), snprintf(hs, sizeof hs, "%s/hsdp", dir);
    snprintf(z3b, sizeof z3b, "%s/z3b", dir), snprintf(z3t, sizeof z3t, "%s/z3t", dir);
    snprintf(hst, sizeof hst, "%s/hsdpt", dir);
    if (mkdir(dir, 0755) && errno != EEXIST) {
        fprintf(stderr, "test_ckpt_zero3 --make %s: %s\n", dir, strerror(errno));
        return 1;
    }
    go((run){.m = DP2, .zero = VS_ZERO_3, .s1 = S, .save1 = z3, .s2 = T, .save2 = z3t});
    go((run){.m = HSDPTP, .zero = VS_ZERO_1, .load = z3, .save1 = hs, .s2 = T, .save2 = hst});
    go((run){.m = DP2, .zero = VS_ZERO_3, .load = hs, .save1 = z3b});
    return vt_summary();
}

/* A held group at the load: VS_ERR_STATE naming it, the DDP trains on as before
   (the load changed nothing). */
static void case_held(void)
{
    char a[128], h[128];
    path_of(a, sizeof a, "held", 0), path_of(h, sizeof h, "held", 1);
    go((run){.m = DP2, .zero = VS_ZERO_3, .s1 = S, .save1 = a});
    run c = {.m = DP2, .zero = VS_ZERO_3, .pre = 1, .load = a, .hold = 1, .s1 = T, .save1 = h};
    VT_OK(launch(mranks(c.m), rank_fn, &c));
    VT_CHECK(c.load_rc == VS_ERR_STATE && strstr(c.load_msg, "group 1 is gathered"),
             "a load with group 1 gathered: %d \"%s\"", (int)c.load_rc, c.load_msg);
    canon* x = canon_of(h);
    VT_CHECK(x->step == 1 + T, "after the refused load: step %lld", (long long)x->step);
    free(x);
}

/* Replaces the first `from` after `after` in checkpoint dir's index.json by `to`. */
static int edit_index(const char* dir, const char* after, const char* from, const char* to)
{
    char p[600];
    snprintf(p, sizeof p, "%s/index.json", dir);
    FILE* f = fopen(p, "rb");
    static char buf[1 << 16], out[1 << 16];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    char* a = strstr(buf, after);
    char* at = a ? strstr(a, from) : NULL;
    VT_CHECK(at != NULL, "%s: no %s after %s", p, from, after);
    if (!at) return 0;
    snprintf(out, sizeof out, "%.*s%s%s", (int)(at - buf), buf, to, at + strlen(from));
    f = fopen(p, "wb");
    int ok = f && fwrite(out, 1, strlen(out), f) == strlen(out);
    if (f) fclose(f);
    return ok;
}

/* A hostile checkpoint: an owned-range entry whose recorded size is wrong (the
   entry's shape; a piece's range, longer or shorter than its bytes): the ZeRO-3
   load fails on every rank with an error naming the entry. */
static void case_hostile(void)
{
    char a[128], h[128], cmd[400];
    path_of(a, sizeof a, "host", 0);
    go((run){.m = DP2, .zero = VS_ZERO_3, .s1 = 1, .save1 = a});
    const char* edits[][3] = {{"\"name\": \"a.b.exp_avg\"", "\"shape\": [40]", "\"shape\": [41]"},
                              {"\"key\": \"a.b.exp_avg#0\"", "\"range\": [0, 40]", "\"range\": [0, 41]"},
                              {"\"key\": \"a.b.exp_avg#0\"", "\"range\": [0, 40]", "\"range\": [0, 39]"},
                              {"\"key\": \"a.b.exp_avg#0\"", "\"range\": [0, 40]", "\"range\": [1, 41]"}};
    for (int i = 0; i < 4; i++) {
        path_of(h, sizeof h, "hostile", i);
        snprintf(cmd, sizeof cmd, "rm -rf %s && cp -r %s %s", h, a, h);
        VT_CHECK(system(cmd) == 0, "%s", cmd);
        if (!edit_index(h, edits[i][0], edits[i][1], edits[i][2])) continue;
        run c = {.m = DP2, .zero = VS_ZERO_3, .load = h, .probe = 1};
        VT_OK(launch(mranks(c.m), rank_fn, &c));
        VT_CHECK(c.load_rc != VS_OK && strstr(c.load_msg, "a.b.exp_avg"), "%s -> %s: %d \"%s\"", edits[i][1],
                 edits[i][2], (int)c.load_rc, c.load_msg);
        printf("# %s -> %s: %s\n", edits[i][1], edits[i][2], c.load_msg);
    }
}

/* ---- memory: the world's allocator hooks, each rank thread's live bytes and peak ---- */
enum { BIGN = 1 << 18 }; // one f32 parameter of 1 MiB; 256 KiB a rank at DP4
typedef struct mrun {
    const char* path;
    int save; // 1: train a step and save; 0: load before the first step
    dc_acct acct;
    long extra[MAXR], piece[MAXR], shard[MAXR];
    uint64_t sent[MAXR];
    int rest[MAXR]; // groups at rest after the load
} mrun;

static int mem_rank(vs_world* w, void* arg)
{
    mrun* c = (mrun*)arg;
    int me = vs_world_rank(w);
    dc_acct_enter(&c->acct, me);
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = 4, md.dim_names[0] = "DP";
    vs_mesh* mesh = NULL;
    VT_OK(vs_mesh_init(w, &md, &mesh));
    vs_mesh* dp = NULL;
    VT_OK(vs_mesh_submesh(mesh, "DP", &dp));
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = mesh;
    dd.zero = VS_ZERO_3;
    dd.optim.kind = VS_OPTIM_ADAMW;
    vs_ddp* d = NULL;
    VT_OK(vs_ddp_init(&dd, &d));
    if (!d || !dp) return 1;
    float* init = (float*)malloc(sizeof(float) * BIGN);
    for (int i = 0; i < BIGN; i++) init[i] = (float)(i % 13) / 16.0f;
    vs_ddp_param_desc pd;
    memset(&pd, 0, sizeof pd);
    pd.name = "big";
    pd.dtype = VS_F32;
    pd.ndim = 1;
    pd.shape[0] = BIGN;
    pd.ready_group = 1;
    pd.data = init;
    VT_OK(vs_ddp_add_param(d, &pd, NULL));
    VT_OK(vs_ddp_finalize(d));
    free(init);
    vs_ddp_span own;
    VT_OK(vs_ddp_param_owned(d, 0, &own));
    c->piece[me] = (long)(own.end - own.begin) * 4;
    vs_ddp_memory mu;
    VT_OK(vs_ddp_memory_usage(d, &mu));
    c->shard[me] = (long)(mu.params + mu.optim_state + mu.master);
    if (c->save) {
        VT_OK(vs_ddp_zero_grad(d));
        VT_OK(vs_ddp_gather(d, 1));
        float* g = (float*)vs_ddp_grad(d, 0);
        for (int i = 0; g && i < BIGN; i++) g[i] = (float)((i + me) % 5) / 64.0f;
        VT_OK(vs_ddp_group_ready(d, 1));
        VT_OK(vs_ddp_release(d, 1));
        VT_OK(vs_ddp_finish_grad_sync(d));
        VT_OK(vs_ddp_step(d, 0.01));
        VT_OK(vs_ddp_synchronize(d));
    }
    VT_OK(vs_barrier(vs_mesh_comm(mesh), NULL));
    size_t l0 = rb_mark();
    uint64_t s0 = vs_mesh_comm(dp)->sent;
    VT_OK(dc_ckpt_ddp(mesh, d, c->path, c->save));
    c->extra[me] = (long)rb_since(l0);
    c->sent[me] = vs_mesh_comm(dp)->sent - s0;
    c->rest[me] = 1;
    for (int b = 0; b < d->nbuckets; b++) c->rest[me] &= d->buckets[b].zstate == _VS_Z3_REST;
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

/* A ZeRO-3 DP4 save and load hold at most one entry's piece beyond the shards
   (the piece: the owned range of the 1 MiB parameter, 256 KiB; the slack: the
   index and the checkpointer's own bookkeeping, 64 KiB); the load gathers
   nothing over DP and leaves every group at rest. */
static void case_memory(void)
{
    char a[128];
    path_of(a, sizeof a, "mem", 0);
    for (int save = 1; save >= 0; save--) {
        mrun* c = (mrun*)calloc(1, sizeof *c);
        c->path = a, c->save = save;
        vs_launch_desc ld_;
        memset(&ld_, 0, sizeof ld_);
        ld_.nranks = 4;
        ld_.timeout_s = 60;
        ld_.allocator = dc_acct_hooks(&c->acct);
        VT_OK(vs_launch_ex(&ld_, mem_rank, c));
        for (int r = 0; r < 4; r++) {
            VT_CHECK(c->extra[r] <= c->piece[r] + 65536 && c->piece[r] == BIGN,
                     "%s on rank %d: %ld bytes held beyond the shards (%ld), the piece %ld", save ? "save" : "load", r,
                     c->extra[r], c->shard[r], c->piece[r]);
            VT_CHECK(save || (c->sent[r] == 0 && c->rest[r]), "load on rank %d: %llu bytes sent over DP, groups %s", r,
                     (unsigned long long)c->sent[r], c->rest[r] ? "at rest" : "gathered");
        }
        printf("# ZeRO-3 DP4 %s: %ld bytes beyond the shards (%ld bytes) at peak on rank 0; the piece %ld, the "
               "parameter %d\n", save ? "save" : "load", c->extra[0], c->shard[0], c->piece[0], BIGN * 4);
        free(c);
    }
}

int main(int argc, char** argv)
{
    setenv("VESCALE_TIMEOUT", "60", 0);
    if (argc == 3 && !strcmp(argv[1], "--make")) return make_sample(argv[2]);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/vs_ckz3_XXXXXX");
    VT_CHECK(mkdtemp(tmpdir) != NULL, "mkdtemp");
    VT_CASE("DDP checkpoints A -> B -> A over ZeRO-0/1/2/3 x DP2, DP4, DPR2 x DPS2, DP2 x TP2, DPR2 x DPS2 x TP2, "
            "PP2 x DP2: every tensor and state bit for bit, the files byte for byte, training on equal, a load "
            "between steps too",
            case_matrix());
    if (getenv("VS_CKPT_ZERO3_ALL"))
        VT_CASE("DDP checkpoints A -> B -> A, every pair of (mesh, ZeRO stage) of the six meshes and four stages",
                case_all());
    VT_CASE("a ZeRO-3 load with a group still gathered: VS_ERR_STATE naming it, nothing changed; "
            "vs_ddp_owned_rewrite's bad input",
            case_held());
    VT_CASE("a hostile ZeRO-3 checkpoint (an owned-range entry's size wrong): a clear error naming it", case_hostile());
    VT_CASE("a ZeRO-3 DP4 save and load hold at most one entry's piece beyond the shards; the load gathers nothing",
            case_memory());
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    VT_CHECK(system(cmd) == 0, "%s", cmd);
    return vt_summary();
}
