/* tests/ddp_model.h - the small DDP training run that test_nccl.c (on a GPU) and
   test_ddp_device.c (stand-in CUDA runtime) run twice, on device buffers and on
   host buffers, to compare the two paths. Include after vescale_ddp.h, vs_test.h
   and a cuda_runtime.h (the real one or tests/mock's); C and C++ alike.

   Three parameters, w [185] f32, b [19] f32 (no decay), h [45] bf16, several
   buckets (bucket_bytes 256); each rank adds its own gradient, a function of
   (rank, step, micro-batch, element), into vs_ddp_grad, as a backward would; then
   sync, clip (or measure) and step, STEPS times. Results per rank: the final
   parameters, the norms, and ZeRO-0's synchronized gradient of w. On the device
   path every access is a copy on the run's stream, and w's initial value comes
   from device memory. */
#ifndef VS_TEST_DDP_MODEL_H
#define VS_TEST_DDP_MODEL_H
#include <math.h>
#include <string.h>

enum { DM_MAXR = 8, DM_NP = 3, DM_MAXE = 200, DM_STEPS = 3 };
static const int64_t dm_numel[DM_NP] = {185, 19, 45};

/* Called on every pointer DDP hands out on the device path (a check; may be empty). */
#ifndef DM_CHECK_DEVICE
#define DM_CHECK_DEVICE(p, bytes) ((void)(p), (void)(bytes))
#endif

typedef struct dm_run {
    const char* label;
    int dp; /* ranks (test_nccl: the GPUs present) */
    vs_zero_stage zero;
    vs_optim_kind kind;
    int grad_fp32, micro, no_overlap;
    double clip; /* > 0 clip; < 0 measure only */
    void* stream; /* device path: vs_ddp_desc.stream, one for every rank (one device) */
    void* rank_stream[DM_MAXR]; /* else each rank's own (a stream belongs to its rank's GPU) */
    float out[DM_MAXR][DM_NP][DM_MAXE];
    double norm[DM_MAXR][DM_STEPS];
    float synced[DM_MAXR][DM_MAXE];
} dm_run;

/* Device path: a copy on the run's stream, the one DDP works on, as a trainer's
   kernels would be (a plain cudaMemcpy would not wait for DDP's work there). */
static void* dm_stream(const dm_run* c, int me) { return c->rank_stream[me] ? c->rank_stream[me] : c->stream; }

static void dm_put(const dm_run* c, int me, int dev, void* dst, const void* src, size_t bytes)
{
    if (dev) {
        cudaStream_t st = (cudaStream_t)dm_stream(c, me);
        VT_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, st) == cudaSuccess &&
                     cudaStreamSynchronize(st) == cudaSuccess,
                 "copy of %zu bytes on the stream", bytes);
    } else {
        memcpy(dst, src, bytes);
    }
}

/* One rank of the run; dev: the device path (buffers through cudaMemcpy). */
static int dm_rank(vs_world* w, dm_run* c, int dev)
{
    int me = vs_world_rank(w);
    vs_mesh* mesh = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = vs_world_size(w);
    VT_OK(vs_mesh_init(w, &md, &mesh));
    if (!mesh) return 1;
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = mesh;
    dd.zero = c->zero;
    dd.bucket_bytes = 256; /* several buckets */
    dd.grad_fp32 = c->grad_fp32;
    dd.no_overlap = c->no_overlap;
    dd.optim.kind = c->kind;
    dd.optim.weight_decay = 0.05;
    dd.optim.momentum = 0.9;
    dd.optim.nesterov = 1;
    dd.stream = dev ? dm_stream(c, me) : NULL;
    vs_ddp* d = NULL;
    VT_OK(vs_ddp_init(&dd, &d));
    if (!d) return 1;
    static const char* const names[DM_NP] = {"w", "b", "h"};
    for (int p = 0; p < DM_NP; p++) {
        float f[DM_MAXE];
        uint16_t h[DM_MAXE];
        for (int e = 0; e < dm_numel[p]; e++) f[e] = (float)sin(0.37 * e + p), h[e] = vs_f32_to_bf16(f[e]);
        vs_ddp_param_desc pd;
        memset(&pd, 0, sizeof pd);
        pd.name = names[p];
        pd.dtype = p == 2 ? VS_BF16 : VS_F32;
        pd.ndim = 1;
        pd.shape[0] = dm_numel[p];
        pd.data = p == 2 ? (const void*)h : (const void*)f;
        pd.no_decay = p == 1;
        void* init = dev && p == 0 ? vs_device_alloc(w, (size_t)dm_numel[p] * 4) : NULL;
        if (init) { /* initial values may come from device memory too */
            dm_put(c, me, 1, init, f, (size_t)dm_numel[p] * 4);
            pd.data = init;
        }
        VT_OK(vs_ddp_add_param(d, &pd, NULL));
        vs_device_free(w, init);
    }
    VT_OK(vs_ddp_finalize(d));
    for (int st = 0; st < DM_STEPS; st++) {
        VT_OK(vs_ddp_zero_grad(d));
        for (int mb = 0; mb < c->micro; mb++) {
            if (c->micro > 1) VT_OK(vs_ddp_set_sync(d, mb == c->micro - 1));
            for (int p = DM_NP - 1; p >= 0; p--) {
                void* g = vs_ddp_grad(d, p);
                VT_CHECK(g != NULL, "grad %d: %s", p, vs_last_error());
                if (!g) return 1;
                float f[DM_MAXE], cur[DM_MAXE];
                uint16_t h[DM_MAXE];
                int half = vs_ddp_grad_dtype(d, p) != VS_F32;
                size_t bytes = (size_t)dm_numel[p] * (half ? 2 : 4);
                if (dev) DM_CHECK_DEVICE(g, bytes);
                dm_put(c, me, dev, half ? (void*)h : (void*)cur, g, bytes); /* add to it, as a backward would */
                for (int e = 0; e < dm_numel[p]; e++) {
                    float add = (float)(0.3 * cos(0.7 * me + 1.3 * st + 0.5 * mb + 0.11 * e + p));
                    f[e] = (half ? vs_bf16_to_f32(h[e]) : cur[e]) + add;
                    h[e] = vs_f32_to_bf16(f[e]);
                }
                dm_put(c, me, dev, g, half ? (const void*)h : (const void*)f, bytes);
                VT_OK(vs_ddp_grad_ready(d, p));
            }
            VT_OK(vs_ddp_finish_grad_sync(d));
        }
        if (c->zero == VS_ZERO_0 && c->micro == 1) {
            const void* s = vs_ddp_grad_synced(d, 0);
            VT_CHECK(s != NULL, "grad_synced: %s", vs_last_error());
            if (s) dm_put(c, me, dev, c->synced[me], s, (size_t)dm_numel[0] * 4);
        }
        VT_OK(vs_ddp_clip_grad_norm(d, c->clip, &c->norm[me][st]));
        VT_OK(vs_ddp_step(d, 0.01));
    }
    for (int p = 0; p < DM_NP; p++) {
        const void* v = vs_ddp_param(d, p);
        VT_CHECK(v != NULL, "param %d: %s", p, vs_last_error());
        if (!v) continue;
        if (dev) DM_CHECK_DEVICE(v, (size_t)dm_numel[p] * (p == 2 ? 2 : 4));
        uint16_t h[DM_MAXE];
        if (p == 2) {
            dm_put(c, me, dev, h, v, (size_t)dm_numel[p] * 2);
            for (int e = 0; e < dm_numel[p]; e++) c->out[me][p][e] = vs_bf16_to_f32(h[e]);
        } else {
            dm_put(c, me, dev, c->out[me][p], v, (size_t)dm_numel[p] * 4);
        }
    }
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

/* Compares the device run with the host run: f32 within rel (0: bit-identical),
   bf16 within 1 ulp + rel (0: bit-identical), norms within nrel. */
static void dm_compare(const dm_run* dev, const dm_run* host, double rel, double nrel)
{
    for (int r = 0; r < host->dp; r++) {
        for (int st = 0; st < DM_STEPS; st++) {
            double a = dev->norm[r][st], b = host->norm[r][st];
            VT_CHECK(nrel == 0 ? memcmp(&a, &b, sizeof a) == 0 : fabs(a - b) <= nrel * fabs(b) + 1e-12,
                     "%s: rank %d step %d: norm %.17g on the device path, %.17g on the host path", host->label, r, st,
                     a, b);
        }
        int bad = 0;
        for (int p = 0; p < DM_NP; p++)
            for (int e = 0; e < dm_numel[p]; e++) {
                float a = dev->out[r][p][e], b = host->out[r][p][e];
                int ok = rel == 0 ? memcmp(&a, &b, 4) == 0
                                  : fabs((double)a - b) <= (p == 2 ? fabs((double)b) / 128 + rel : rel * (fabs((double)b) + 1e-3));
                if (!ok && bad++ < 3)
                    VT_CHECK(0, "%s: rank %d param %d [%d]: %.9g on the device path, %.9g on the host path", host->label,
                             r, p, e, (double)a, (double)b);
            }
        VT_CHECK(bad == 0, "%s: rank %d: %d parameter elements differ", host->label, r, bad);
        int sbad = 0;
        for (int e = 0; e < dm_numel[0]; e++) {
            float a = dev->synced[r][e], b = host->synced[r][e];
            sbad += !(rel == 0 ? memcmp(&a, &b, 4) == 0 : fabs((double)a - b) <= rel * (fabs((double)b) + 1e-3));
        }
        VT_CHECK(sbad == 0, "%s: rank %d: %d elements of grad_synced differ", host->label, r, sbad);
    }
    VT_CHECK(fabs(host->out[0][0][3] - sin(0.37 * 3)) > 1e-5, "%s: the parameters never changed", host->label);
}
#endif
