/* test_ckpt_nccl.c - vescale_ckpt.h over NCCL while the trainer keeps
   communicating, on the strict CUDA + NCCL stand-in (tests/strict/; make test
   builds it as build/test_ckpt_nccl when the CUDA toolkit's headers and NVRTC
   are installed) or on real GPUs (one rank per GPU, up to 4).

   NCCL forbids issuing operations to communicators of one GPU from two host
   threads at once (its "Thread Safety" section); the stand-in reports it as
   "VIOLATION nccl-threads". Each case runs on 2 and on 4 ranks (a simulated GPU
   each, VS_STRICT_DELAY_US random stream delays) and ends with no violation:
   - save/train: a device tensor (Shard(0)), a host tensor and a blob saved,
     sync and async; right after the call the trainer runs all-reduces on the
     world's and on a split communicator (blocking and asynchronous, checked
     against their sums) and overwrites its buffers; the checkpoint loads back
     equal to the values at the call, on the saving mesh and, fully replicated,
     on a mesh of another shape (the whole tensor on every rank, against the
     formula that made it).
   - ddp: device DDP state (AdamW, ZeRO-0, a bf16 parameter with fp32 masters)
     saved with vs_ckpt_save_ddp right after vs_ddp_step returns, while the step's
     kernels may still run on the DDP's own non-blocking stream (ZeRO-0 has no
     parameter all-gather after the step that would wait for them): sync, then
     async with the next step's collectives beside the write. Each loads into a
     fresh DDP (ZeRO-0: parameters, masters, both moments and the step count
     bitwise; ZeRO-1: parameters and step count) equal to the state read after
     vs_ddp_synchronize. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vescale_ddp.h"
#include "vescale_ckpt.h"
#include "vs_test.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef VS_STRICT
#include "strict/vs_strict.h"
#endif

static char root[] = "/tmp/vs_ckpt_nccl_XXXXXX";

static vs_launch_desc nccl_launch(int n)
{
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = n;
    d.transport = VS_TRANSPORT_NCCL;
    d.timeout_s = 120;
    return d;
}

/* A mesh of shape (s0) or (s0, s1) over the world, and a checkpointer on it. */
static vs_mesh* mesh_of(vs_world* w, int s0, int s1)
{
    vs_mesh* m = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = s0, md.shape[1] = s1;
    VT_OK(vs_mesh_init(w, &md, &m));
    return m;
}

static vs_ckpt* ckpt_of(vs_mesh* m)
{
    vs_ckpt* ck = NULL;
    vs_ckpt_desc cd;
    memset(&cd, 0, sizeof cd);
    cd.mesh = m;
    if (m) VT_OK(vs_ckpt_init(&cd, &ck));
    return ck;
}

static void to_dev(void* d, const void* h, size_t bytes)
{
    VT_CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess,
             "upload of %zu bytes", bytes);
}

static void to_host(void* h, const void* d, size_t bytes)
{
    VT_CHECK(cudaDeviceSynchronize() == cudaSuccess && cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost) == cudaSuccess,
             "download of %zu bytes", bytes);
}

/* ---- save, train on, load ------------------------------------------------------ */

enum { ROWS = 4, COLS = 33, HN = 7, NAR = 6, ARN = 300 };

static float wval(int64_t i, int64_t j) { return (float)(i * 1000 + j) * 0.25f; } // global w[i][j]
static float hval(int64_t i) { return (float)i - 3.5f; }                          // global host[i]

/* The trainer's collectives right after a save returns: NAR rounds of a blocking
   all-reduce on the world and an asynchronous one on a split communicator (two
   in flight at once), each checked against its sum. */
static void train_on(vs_world* w, vs_comm* split, void* a, void* b, float* hbuf, int round)
{
    const int me = vs_world_rank(w), n = vs_world_size(w), sn = vs_comm_size(split);
    for (int k = 0; k < NAR; k++) {
        for (int i = 0; i < ARN; i++) hbuf[i] = (float)(me + 1 + k + round);
        to_dev(a, hbuf, sizeof(float) * ARN);
        to_dev(b, hbuf, sizeof(float) * ARN);
        vs_work *wa = NULL, *wb = NULL;
        VT_OK(vs_all_reduce(split, b, b, ARN, VS_F32, VS_OP_SUM, &wa));
        VT_OK(vs_all_reduce(vs_world_comm(w), a, a, ARN, VS_F32, VS_OP_SUM, NULL));
        VT_OK(vs_all_reduce(split, b, b, ARN, VS_F32, VS_OP_MAX, &wb));
        VT_OK(vs_wait(wa));
        VT_OK(vs_wait(wb));
        float want = 0, got[2];
        for (int r = 0; r < n; r++) want += (float)(r + 1 + k + round);
        to_host(&got[0], a, sizeof(float));
        VT_CHECK(got[0] == want, "rank %d round %d: world all-reduce %g, want %g", me, k, (double)got[0], (double)want);
        float mine_sum = 0; // the split's sum then max: every member holds the sum
        for (int r = me % 2; r < n; r += 2) mine_sum += (float)(r + 1 + k + round);
        to_host(&got[1], b, sizeof(float));
        VT_CHECK(sn == (n + 1 - me % 2) / 2 && got[1] == mine_sum, "rank %d round %d: split all-reduce %g, want %g", me,
                 k, (double)got[1], (double)mine_sum);
    }
}

static int save_rank(vs_world* w, void* arg)
{
    (void)arg;
    const int me = vs_world_rank(w), n = vs_world_size(w);
    vs_mesh* m = mesh_of(w, n, 0);
    vs_comm* split = NULL;
    VT_OK(vs_comm_split(vs_world_comm(w), me % 2, me, &split));
    vs_ckpt* ck = ckpt_of(m);
    if (!split || !ck) return 1;
    float h[ROWS * COLS], host[HN], back[ROWS * COLS], hbuf[ARN];
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < COLS; j++) h[i * COLS + j] = wval((int64_t)me * ROWS + i, j);
    unsigned char blob[5] = {1, 2, 3, 4, (unsigned char)n}, blob2[8];
    void* d = vs_device_alloc(w, sizeof h);
    void* d2 = vs_device_alloc(w, sizeof h);
    void* a = vs_device_alloc(w, sizeof(float) * ARN);
    void* b = vs_device_alloc(w, sizeof(float) * ARN);
    vs_ckpt_entry e[3];
    memset(e, 0, sizeof e);
    e[0].name = "w", e[0].t.dtype = VS_F32, e[0].t.ndim = 2;
    e[0].t.shape[0] = (int64_t)ROWS * n, e[0].t.shape[1] = COLS;
    e[0].t.layout.mesh = m, e[0].t.layout.p[0] = vs_shard(0), e[0].t.data = d, e[0].device = 1;
    e[1].name = "host", e[1].t.dtype = VS_F32, e[1].t.ndim = 1, e[1].t.shape[0] = (int64_t)HN * n;
    e[1].t.layout.mesh = m, e[1].t.layout.p[0] = vs_shard(0), e[1].t.data = host;
    e[2].name = "blob", e[2].kind = VS_CKPT_BLOB, e[2].blob = blob, e[2].blob_bytes = sizeof blob;
    for (int async = 0; async < 2; async++) {
        char path[512];
        snprintf(path, sizeof path, "%s/save-%d/step-%d", root, n, async);
        for (int i = 0; i < HN; i++) host[i] = hval((int64_t)me * HN + i);
        blob[0] = 1;
        to_dev(d, h, sizeof h);
        vs_ckpt_save_opts so;
        memset(&so, 0, sizeof so);
        so.async = async;
        VT_OK(vs_ckpt_save(ck, path, e, 3, &so));
        // the trainer goes on at once: its buffers change, its collectives run beside the write
        memset(host, 0x7f, sizeof host);
        blob[0] = 99;
        VT_CHECK(cudaMemset(d, 0x7f, sizeof h) == cudaSuccess, "cudaMemset");
        train_on(w, split, a, b, hbuf, async);
        VT_OK(vs_ckpt_wait(ck));
        vs_ckpt_entry l[3];
        memcpy(l, e, sizeof l);
        float host2[HN];
        memset(host2, 0, sizeof host2);
        memset(blob2, 0, sizeof blob2);
        VT_CHECK(cudaMemset(d2, 0, sizeof h) == cudaSuccess, "cudaMemset");
        l[0].t.data = d2, l[1].t.data = host2, l[2].blob = blob2, l[2].blob_bytes = sizeof blob2;
        int loaded[3] = {0, 0, 0};
        VT_OK(vs_ckpt_load(ck, path, l, 3, loaded));
        to_host(back, d2, sizeof back);
        int bad = memcmp(back, h, sizeof h) != 0;
        for (int i = 0; i < HN; i++) bad |= host2[i] != hval((int64_t)me * HN + i);
        VT_CHECK(loaded[0] && loaded[1] && loaded[2] && !bad && l[2].blob_bytes == sizeof blob && blob2[0] == 1 &&
                     blob2[4] == n,
                 "rank %d, async %d: loaded %d %d %d, values at the call %s", me, async, loaded[0], loaded[1], loaded[2],
                 bad ? "differ" : "equal");
    }
    // on a mesh of another shape: every entry whole on every rank (Replicate), against the formula
    vs_mesh* m2 = mesh_of(w, 2, n / 2);
    vs_ckpt* ck2 = ckpt_of(m2);
    const size_t wn = (size_t)ROWS * (size_t)n * COLS;
    float* full = (float*)malloc(sizeof(float) * wn);
    float* fh = (float*)malloc(sizeof(float) * (size_t)HN * (size_t)n);
    void* dfull = vs_device_alloc(w, sizeof(float) * wn);
    if (!m2 || !ck2 || !full || !fh || !dfull) return 1;
    vs_ckpt_entry r[3];
    memcpy(r, e, sizeof r);
    r[0].t.layout.mesh = r[1].t.layout.mesh = m2;
    r[0].t.layout.p[0] = r[1].t.layout.p[0] = vs_replicate();
    r[0].t.data = dfull, r[1].t.data = fh, r[2].blob = blob2, r[2].blob_bytes = sizeof blob2;
    for (int async = 0; async < 2; async++) {
        char path[512];
        snprintf(path, sizeof path, "%s/save-%d/step-%d", root, n, async);
        VT_CHECK(cudaMemset(dfull, 0, sizeof(float) * wn) == cudaSuccess, "cudaMemset");
        memset(fh, 0, sizeof(float) * (size_t)HN * (size_t)n);
        VT_OK(vs_ckpt_load(ck2, path, r, 3, NULL));
        to_host(full, dfull, sizeof(float) * wn);
        int bad = 0;
        for (size_t i = 0; i < wn; i++) bad += full[i] != wval((int64_t)(i / COLS), (int64_t)(i % COLS));
        for (int i = 0; i < HN * n; i++) bad += fh[i] != hval(i);
        VT_CHECK(!bad, "rank %d, async %d, on mesh (2, %d): %d values differ", me, async, n / 2, bad);
    }
    VT_OK(vs_ckpt_free(ck2));
    VT_OK(vs_mesh_free(m2));
    vs_device_free(w, dfull);
    free(full);
    free(fh);
    VT_OK(vs_ckpt_free(ck));
    VT_OK(vs_comm_free(split));
    vs_device_free(w, d);
    vs_device_free(w, d2);
    vs_device_free(w, a);
    vs_device_free(w, b);
    VT_OK(vs_mesh_free(m));
    return 0;
}

/* ---- DDP state ------------------------------------------------------------------ */

enum { NP = 3, MAXE = 200 };
static const int64_t pnumel[NP] = {185, 19, 45};
static const char* const pname[NP] = {"w", "b", "h"};
static const vs_ddp_state kstates[3] = {VS_DDP_STATE_MASTER, VS_DDP_STATE_EXP_AVG, VS_DDP_STATE_EXP_AVG_SQ};

/* What a DDP holds, read after vs_ddp_synchronize: parameters (as bytes) and
   each owned optimizer state range. */
typedef struct ddp_state {
    unsigned char param[NP][MAXE * 4];
    float st[NP][3][MAXE];
    int64_t nst[NP][3];
    int64_t steps;
} ddp_state;

static vs_ddp* make_ddp(vs_mesh* m, vs_zero_stage zero, cudaStream_t stream)
{
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = m;
    dd.zero = zero;
    dd.bucket_bytes = 256;
    dd.grad_fp32 = 1;
    dd.optim.kind = VS_OPTIM_ADAMW;
    dd.optim.weight_decay = 0.05;
    dd.stream = (void*)stream;
    vs_ddp* d = NULL;
    VT_OK(vs_ddp_init(&dd, &d));
    for (int p = 0; d && p < NP; p++) {
        float f[MAXE];
        uint16_t hb[MAXE];
        for (int e = 0; e < pnumel[p]; e++) f[e] = (float)sin(0.37 * e + p), hb[e] = vs_f32_to_bf16(f[e]);
        vs_ddp_param_desc pd;
        memset(&pd, 0, sizeof pd);
        pd.name = pname[p];
        pd.dtype = p == 2 ? VS_BF16 : VS_F32;
        pd.ndim = 1;
        pd.shape[0] = pnumel[p];
        pd.data = p == 2 ? (const void*)hb : (const void*)f;
        pd.no_decay = p == 1;
        VT_OK(vs_ddp_add_param(d, &pd, NULL));
    }
    if (d) VT_OK(vs_ddp_finalize(d));
    return d;
}

/* One training step; gradients written on the DDP's stream, as a backward's kernels. */
static void ddp_step(vs_ddp* d, cudaStream_t st, int me, int step)
{
    VT_OK(vs_ddp_zero_grad(d));
    for (int p = NP - 1; p >= 0; p--) {
        void* g = vs_ddp_grad(d, p);
        VT_CHECK(g != NULL && vs_ddp_grad_dtype(d, p) == VS_F32, "grad %d: %s", p, vs_last_error());
        if (!g) return;
        float f[MAXE];
        for (int e = 0; e < pnumel[p]; e++) f[e] = (float)(0.3 * cos(0.7 * me + 1.3 * step + 0.11 * e + p));
        VT_CHECK(cudaMemcpyAsync(g, f, sizeof(float) * (size_t)pnumel[p], cudaMemcpyHostToDevice, st) == cudaSuccess &&
                     cudaStreamSynchronize(st) == cudaSuccess,
                 "gradient upload");
        VT_OK(vs_ddp_grad_ready(d, p));
    }
    VT_OK(vs_ddp_finish_grad_sync(d));
    VT_OK(vs_ddp_clip_grad_norm(d, 0.5, NULL));
    VT_OK(vs_ddp_step(d, 0.01)); // returns with the optimizer's kernels queued on the DDP's stream
}

static void read_state(vs_ddp* d, ddp_state* s, int states)
{
    memset(s, 0, sizeof *s);
    VT_OK(vs_ddp_synchronize(d));
    s->steps = vs_ddp_step_count(d);
    for (int p = 0; p < NP; p++) {
        const void* v = vs_ddp_param(d, p);
        VT_CHECK(v != NULL, "param %d: %s", p, vs_last_error());
        if (v) to_host(s->param[p], v, (size_t)pnumel[p] * (p == 2 ? 2 : 4));
        for (int k = 0; states && k < 3; k++) {
            vs_ddp_span sp;
            if (k == 0 && p != 2) continue; // masters: the bf16 parameter only
            VT_OK(vs_ddp_optim_state(d, p, kstates[k], &sp));
            s->nst[p][k] = sp.end - sp.begin;
            if (sp.end > sp.begin) to_host(s->st[p][k], sp.data, sizeof(float) * (size_t)(sp.end - sp.begin));
        }
    }
}

static int same_state(const ddp_state* a, const ddp_state* b, int states, char* why, size_t cap)
{
    if (a->steps != b->steps) return snprintf(why, cap, "step count %lld, want %lld", (long long)a->steps, (long long)b->steps), 0;
    for (int p = 0; p < NP; p++) {
        if (memcmp(a->param[p], b->param[p], (size_t)pnumel[p] * (p == 2 ? 2 : 4)))
            return snprintf(why, cap, "parameter %s differs", pname[p]), 0;
        for (int k = 0; states && k < 3; k++)
            if (a->nst[p][k] != b->nst[p][k] || memcmp(a->st[p][k], b->st[p][k], sizeof(float) * (size_t)a->nst[p][k]))
                return snprintf(why, cap, "%s's state %d differs", pname[p], k), 0;
    }
    return 1;
}

static int ddp_rank(vs_world* w, void* arg)
{
    (void)arg;
    const int me = vs_world_rank(w), n = vs_world_size(w);
    cudaStream_t st = NULL;
    VT_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess, "stream");
    vs_mesh* m = mesh_of(w, n, 0);
    vs_ckpt* ck = ckpt_of(m);
    vs_ddp* d = m ? make_ddp(m, VS_ZERO_0, st) : NULL; // (ZeRO-0: no all-gather after a step waits for it)
    if (!d || !ck) return 1;
    static ddp_state want[8][2], got[8];
    char path[2][512];
    int step = 0;
    for (int async = 0; async < 2; async++) {
        snprintf(path[async], sizeof path[async], "%s/ddp-%d/step-%d", root, n, async);
        for (int k = 0; k < 2; k++) ddp_step(d, st, me, step++);
        vs_ckpt_save_opts so;
        memset(&so, 0, sizeof so);
        so.async = async;
        VT_OK(vs_ckpt_save_ddp(ck, path[async], d, "model.", NULL, 0, &so)); // right after the step
        read_state(d, &want[me][async], 1);
        if (async) ddp_step(d, st, me, step++); // the next step's collectives beside the write
        VT_OK(vs_ckpt_wait(ck));
    }
    for (int async = 0; async < 2; async++) {
        vs_zero_stage z = async ? VS_ZERO_1 : VS_ZERO_0; // ZeRO-1: other owned ranges, so parameters alone
        vs_ddp* f = make_ddp(m, z, st);
        if (!f) return 1;
        VT_OK(vs_ckpt_load_ddp(ck, path[async], f, "model.", NULL, 0));
        read_state(f, &got[me], !async);
        char why[160] = "";
        VT_CHECK(same_state(&got[me], &want[me][async], !async, why, sizeof why),
                 "rank %d: the %s save, loaded under ZeRO-%d: %s", me, async ? "async" : "sync", async ? 1 : 0, why);
        VT_OK(vs_ddp_free(f));
    }
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_ckpt_free(ck));
    VT_OK(vs_mesh_free(m));
    cudaStreamDestroy(st);
    return 0;
}

/* ---- main ----------------------------------------------------------------------- */

static void violations_since(long before, const char* what)
{
#ifdef VS_STRICT
    long now = vs_strict_violations();
    VT_CHECK(now == before, "%s: %ld stand-in violations, the first: %s", what, now - before, vs_strict_first_violation());
#else
    (void)before, (void)what;
#endif
}

static long violations(void)
{
#ifdef VS_STRICT
    return vs_strict_violations();
#else
    return 0;
#endif
}

int main(void)
{
#ifdef VS_STRICT
    setenv("VS_STRICT_DELAY_US", "100", 0); /* a random delay before every stream operation */
#endif
    setenv("NCCL_CHECK_POINTERS", "1", 0);
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 2) {
        vt_skip("ckpt_nccl/all", "fewer than 2 CUDA devices");
        return vt_summary();
    }
    VT_CHECK(mkdtemp(root) != NULL, "mkdtemp");
    char name[96];
    for (int n = 2; n <= 4 && n <= ndev; n += 2) {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "mkdir -p %s/save-%d %s/ddp-%d", root, n, root, n);
        VT_CHECK(system(cmd) == 0, "%s", cmd);
        vs_launch_desc ld = nccl_launch(n);
        long v0 = violations();
        snprintf(name, sizeof name, "ckpt_nccl/n=%d: save, train on at once, load on two meshes", n);
        VT_CASE(name, {
            VT_OK(vs_launch_ex(&ld, save_rank, NULL));
            violations_since(v0, name);
        });
        v0 = violations();
        snprintf(name, sizeof name, "ckpt_nccl/n=%d: DDP state saved right after a step, loaded", n);
        VT_CASE(name, {
            VT_OK(vs_launch_ex(&ld, ddp_rank, NULL));
            violations_since(v0, name);
        });
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
    return vt_summary();
}
