/* test_ddp_solo.c - DDP at DP 1 (one GPU, or a DP-1 slice of a TP/PP mesh):
   the gradients' reduction over a group of one rank is the identity, and a
   step issues no call for it (vs_ddp's solo path, _vs_ddp_launch), over the
   strict CUDA + NCCL stand-in (no GPU) with device buffers on a non-blocking
   stream, so every use of a gradient is checked to be ordered after its writes.

   Per configuration (ZeRO-0/1/2/3; f32 and bf16; the trainer's own storage,
   in place and staged; HSDP DPR1 x DPS1; clipped or not), one rank runs 3
   steps twice: as the library runs it, and with the solo path turned off (the
   struct's flag: the old code's calls over a communicator of one). Checked:
   - the NCCL collective calls of steps 2 and 3: none for ZeRO-0, 1 and 2,
     clipped or not (the norm's sum over a mesh of one rank: no call either);
     for every run, the reductions' and ZeRO-1/2's gathers' calls
     fewer than the old path's by exactly their number (a reduction a bucket, a
     piece in place, HSDP's replicate all-reduce as well; a gather a bucket,
     staged or not, none for a bucket gathered in place piece by piece, an
     empty group at DP 1): what remains is ZeRO-3's gathers;
   - the parameters after the 3 steps bit-equal between the two (the average
     over one rank is exact, so the copy or cast that replaces it gives the
     same bits), and different from their initial values;
   - no stand-in violation (a missing wait, a race, an unordered read). */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vescale_ddp.h"
#include "vs_test.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strict/vs_strict.h"

enum { NP = 5, STEPS = 3 };
static const int64_t numel[NP] = {700, 33, 1200, 64, 301};

typedef struct solo_cfg {
    vs_zero_stage zero;
    vs_dtype dt;
    int ext;    /* 1: the trainer's storage, reduced in place; 2: staged (vs_ddp_desc.staged) */
    int hsdp;   /* a DPR1 x DPS1 mesh */
    double clip;
} solo_cfg;

typedef struct solo_run {
    const solo_cfg* cfg;
    int off;            /* the solo path turned off */
    long colls, ops;    /* NCCL collective calls and stream operations, steps 2 and 3 */
    long saved;         /* the calls the solo path saves a step: reductions, ZeRO-1/2's gathers */
    unsigned char* out; /* the parameters after the steps, concatenated */
    size_t nout;
    char err[256];
} solo_run;

#define SK(x)                                                                                                          \
    do {                                                                                                               \
        vs_result r_ = (x);                                                                                            \
        if (r_) {                                                                                                      \
            snprintf(o->err, sizeof o->err, "%s:%d: %s: %s", __FILE__, __LINE__, #x, vs_last_error());               \
            return 1;                                                                                                  \
        }                                                                                                              \
    } while (0)

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

/* element e of parameter p: its initial value (s < 0) or its gradient in step s */
static float val(int p, int64_t e, int s)
{
    if (s < 0) return (float)(0.02 * (double)((e * 5 + p) % 17) - 0.15);
    return (float)(0.01 * (double)((e * 7 + p * 3 + s * 11) % 13) - 0.06);
}

static void* to_device(vs_world* w, vs_dtype dt, int p, int s)
{
    size_t n = (size_t)numel[p], z = vs_dtype_size(dt);
    unsigned char* h = (unsigned char*)malloc(n * z);
    for (size_t e = 0; e < n; e++) {
        float f = val(p, (int64_t)e, s);
        if (dt == VS_BF16) {
            uint16_t b = to_bf16(f);
            memcpy(h + e * 2, &b, 2);
        } else {
            memcpy(h + e * 4, &f, 4);
        }
    }
    void* dv = vs_device_alloc(w, n * z);
    if (dv) cudaMemcpy(dv, h, n * z, cudaMemcpyHostToDevice);
    free(h);
    return dv;
}

static int solo_rank(vs_world* w, void* arg)
{
    solo_run* o = (solo_run*)arg;
    const solo_cfg* c = o->cfg;
    cudaStream_t st;
    if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess) return 1;
    vs_mesh* mesh = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = 1;
    if (c->hsdp) md.shape[1] = 1, md.dim_names[0] = "DPR", md.dim_names[1] = "DPS";
    SK(vs_mesh_init(w, &md, &mesh));
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = mesh;
    dd.zero = c->zero;
    if (c->hsdp) dd.dp_replicate_dim = "DPR", dd.dp_dim = "DPS";
    dd.staged = c->ext == 2;
    dd.bucket_bytes = 2048; /* several buckets */
    dd.optim.kind = VS_OPTIM_ADAMW;
    dd.optim.weight_decay = 0.01;
    dd.stream = (void*)st;
    int z3 = c->zero == VS_ZERO_3;
    vs_ddp* d = NULL;
    SK(vs_ddp_init(&dd, &d));
    size_t z = vs_dtype_size(c->dt);
    void *pst[NP] = {0}, *gst[NP] = {0}, *gsrc[STEPS][NP];
    for (int p = 0; p < NP; p++) {
        vs_ddp_param_desc pd;
        memset(&pd, 0, sizeof pd);
        char name[16];
        snprintf(name, sizeof name, "p%d", p);
        pd.name = name;
        pd.dtype = c->dt;
        pd.ndim = 1;
        pd.shape[0] = numel[p];
        pd.ready_group = z3 ? p + 1 : 0;
        void* host = NULL;
        if (c->ext) {
            pst[p] = to_device(w, c->dt, p, -1);
            gst[p] = vs_device_alloc(w, (size_t)numel[p] * z);
            if (!pst[p] || !gst[p]) SK(VS_ERR_NOMEM);
            cudaMemset(gst[p], 0, (size_t)numel[p] * z);
            pd.storage = pst[p], pd.grad_storage = gst[p];
        } else {
            host = malloc((size_t)numel[p] * z);
            void* dv = to_device(w, c->dt, p, -1);
            cudaMemcpy(host, dv, (size_t)numel[p] * z, cudaMemcpyDeviceToHost);
            vs_device_free(w, dv);
            pd.data = host;
        }
        SK(vs_ddp_add_param(d, &pd, NULL));
        free(host);
    }
    SK(vs_ddp_finalize(d));
    size_t gz = vs_dtype_size(vs_ddp_grad_dtype(d, 0));
    for (int p = 0; p < NP; p++)
        for (int s = 0; s < STEPS; s++)
            if (!(gsrc[s][p] = to_device(w, vs_ddp_grad_dtype(d, p), p, s))) SK(VS_ERR_NOMEM);
    if (o->off) d->solo = 0;
    o->saved = 0;
    for (int b = 0; b < d->nbuckets; b++) {
        const _vs_dbucket* k = &d->buckets[b];
        long calls = k->grouped ? k->last - k->first : 1; /* (in place: a call a piece; one piece each at DP 1) */
        o->saved += calls * (c->hsdp && c->zero != VS_ZERO_0 ? 2 : 1);
        /* ZeRO-1/2's gather after the update: a call a bucket, none for one in
           place piece by piece (point-to-point: no peer at DP 1) */
        if ((c->zero == VS_ZERO_1 || c->zero == VS_ZERO_2) && (!k->ext || _vs_ddp_staged_gather(d, k))) o->saved++;
    }
    cudaDeviceSynchronize();
    vs_strict_counts c0 = vs_strict_get_counts(), c1 = c0;
    for (int s = 0; s < STEPS; s++) {
        if (s == 1) {
            cudaDeviceSynchronize();
            c0 = vs_strict_get_counts();
        }
        for (int p = 0; p < NP; p++) { /* the forward reads the parameters */
            if (z3) SK(vs_ddp_gather(d, p + 1));
            if (!vs_ddp_param(d, p)) SK(VS_ERR_STATE);
            if (z3) SK(vs_ddp_release(d, p + 1));
        }
        SK(vs_ddp_zero_grad(d));
        for (int p = NP - 1; p >= 0; p--) {
            if (z3) SK(vs_ddp_gather(d, p + 1));
            void* g = vs_ddp_grad(d, p);
            if (!g) SK(VS_ERR_STATE);
            cudaMemcpyAsync(g, gsrc[s][p], (size_t)numel[p] * gz, cudaMemcpyDeviceToDevice, st);
            if (z3) {
                SK(vs_ddp_group_ready(d, p + 1));
                SK(vs_ddp_release(d, p + 1));
            } else {
                SK(vs_ddp_grad_ready(d, p));
            }
        }
        SK(vs_ddp_finish_grad_sync(d));
        double norm = 0;
        if (c->clip > 0) SK(vs_ddp_clip_grad_norm(d, c->clip, &norm));
        SK(vs_ddp_step(d, 1e-2));
    }
    SK(vs_ddp_wait_params(d));
    if (cudaStreamSynchronize(st) != cudaSuccess) SK(VS_ERR_STATE);
    cudaDeviceSynchronize();
    c1 = vs_strict_get_counts();
    o->colls = c1.nccl_colls - c0.nccl_colls;
    o->ops = c1.nccl_ops - c0.nccl_ops;
    size_t at = 0;
    for (int p = 0; p < NP; p++) at += (size_t)numel[p] * z;
    o->nout = at;
    o->out = (unsigned char*)malloc(at);
    at = 0;
    for (int p = 0; p < NP; p++) {
        if (z3) SK(vs_ddp_gather(d, p + 1));
        const void* pv = vs_ddp_param(d, p);
        if (!pv) SK(VS_ERR_STATE);
        if (cudaStreamSynchronize(st) != cudaSuccess) SK(VS_ERR_STATE);
        cudaMemcpy(o->out + at, pv, (size_t)numel[p] * z, cudaMemcpyDeviceToHost);
        at += (size_t)numel[p] * z;
        if (z3) SK(vs_ddp_release(d, p + 1));
    }
    SK(vs_ddp_free(d));
    for (int p = 0; p < NP; p++) {
        for (int s = 0; s < STEPS; s++) vs_device_free(w, gsrc[s][p]);
        if (pst[p]) vs_device_free(w, pst[p]);
        if (gst[p]) vs_device_free(w, gst[p]);
    }
    SK(vs_mesh_free(mesh));
    cudaStreamDestroy(st);
    return 0;
}

static int run_one(solo_run* o)
{
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = 1;
    ld.transport = VS_TRANSPORT_NCCL;
    ld.timeout_s = 60;
    vs_result r = vs_launch_ex(&ld, solo_rank, o);
    if (r && !o->err[0]) snprintf(o->err, sizeof o->err, "vs_launch_ex: %s", vs_last_error());
    return !r && !o->err[0];
}

static void check(const solo_cfg* c)
{
    solo_run on, off;
    memset(&on, 0, sizeof on);
    memset(&off, 0, sizeof off);
    on.cfg = off.cfg = c;
    off.off = 1;
    long v0 = vs_strict_violations();
    int ok = run_one(&on);
    VT_CHECK(ok, "the run failed: %s", on.err);
    int ok2 = run_one(&off);
    VT_CHECK(ok2, "the run with the solo path off failed: %s", off.err);
    VT_CHECK(vs_strict_violations() == v0, "%ld stand-in violations, the first: %s", vs_strict_violations() - v0,
             vs_strict_first_violation());
    if (!ok || !ok2) goto out;
    long want = off.colls - 2 * off.saved; /* (2 steps counted) */
    VT_CHECK(want >= 0, "the old path made %ld collective calls in 2 steps, fewer than its %ld reductions and gathers",
             off.colls, 2 * off.saved);
    VT_CHECK(on.colls == want,
             "%ld NCCL collective calls in 2 steps, want %ld (the old path's %ld less its %ld reductions and gathers)",
             on.colls, want, off.colls, 2 * off.saved);
    if (c->zero != VS_ZERO_3) /* (clipped too: the norm's sum over a mesh of one rank is its own) */
        VT_CHECK(on.colls == 0 && on.ops == 0, "ZeRO-%d: %ld NCCL collective calls, %ld operations in 2 steps, want 0",
                 (int)c->zero, on.colls, on.ops);
    VT_CHECK(on.nout == off.nout && memcmp(on.out, off.out, on.nout) == 0,
             "the parameters after %d steps differ from the old path's", STEPS);
    {
        int moved = 0;
        size_t z = vs_dtype_size(c->dt), at = 0;
        for (int p = 0; p < NP && !moved; p++)
            for (int64_t e = 0; e < numel[p] && !moved; e++, at += z) {
                float f = val(p, e, -1);
                uint16_t b = to_bf16(f);
                moved = memcmp(on.out + at, c->dt == VS_BF16 ? (const void*)&b : (const void*)&f, z) != 0;
            }
        VT_CHECK(moved, "the parameters did not move in %d steps", STEPS);
    }
out:
    free(on.out);
    free(off.out);
}

int main(void)
{
    static const solo_cfg cfgs[] = {
        {VS_ZERO_0, VS_F32, 0, 0, 0},    {VS_ZERO_0, VS_BF16, 0, 0, 0},   {VS_ZERO_0, VS_F32, 0, 0, 0.05},
        {VS_ZERO_0, VS_F32, 1, 0, 0},    {VS_ZERO_0, VS_F32, 2, 0, 0},    {VS_ZERO_1, VS_F32, 0, 0, 0},
        {VS_ZERO_1, VS_BF16, 0, 0, 0.05}, {VS_ZERO_1, VS_F32, 1, 0, 0},   {VS_ZERO_1, VS_BF16, 1, 0, 0},
        {VS_ZERO_1, VS_F32, 2, 0, 0},    {VS_ZERO_2, VS_F32, 0, 0, 0},    {VS_ZERO_2, VS_BF16, 0, 0, 0.05},
        {VS_ZERO_3, VS_F32, 0, 0, 0},    {VS_ZERO_3, VS_BF16, 0, 0, 0.05}, {VS_ZERO_0, VS_F32, 0, 1, 0},
        {VS_ZERO_1, VS_F32, 0, 1, 0},    {VS_ZERO_2, VS_BF16, 0, 1, 0},   {VS_ZERO_3, VS_F32, 0, 1, 0.05},
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        const solo_cfg* c = &cfgs[i];
        char name[200];
        snprintf(name, sizeof name, "solo/%sZeRO-%d %s%s%s, DP 1: no reduction or ZeRO-1/2 gather call, parameters bit-equal to the old path's",
                 c->hsdp ? "HSDP DPR1 x DPS1 " : "", (int)c->zero, c->dt == VS_BF16 ? "bf16" : "f32",
                 c->ext == 1 ? ", trainer's storage in place" : c->ext == 2 ? ", trainer's storage staged" : "",
                 c->clip > 0 ? ", clipped" : "");
        VT_CASE(name, check(c));
    }
    return vt_summary();
}
