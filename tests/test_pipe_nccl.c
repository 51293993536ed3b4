/* test_pipe_nccl.c - the pipeline engine's device path (vescale_pipe.h) over NCCL,
   on the strict CUDA + NCCL stand-in (tests/strict/: device memory the host
   cannot touch, asynchronous streams, a stand-in NCCL whose send/recv block
   their stream until the peer arrives; make build/test_pipe_nccl).

   The models of tests/pipe_models.h run on PP = 2 and 4 thread ranks, one
   simulated GPU each, and on a DP 2 x PP 2 mesh, over VS_TRANSPORT_NCCL, with
   every schedule the engine has (GPipe, 1F1B, interleaved, ZB-H1, ZB-V,
   DualPipeV). The device layers compute as a GPU would, asynchronously on the
   compute stream (vs_pipe_call.stream): each callback enqueues copies of its
   device inputs into pinned staging memory, the model's own host code as a
   stream function (cudaLaunchHostFunc: it runs when the stream gets there,
   like a kernel) and copies of its results back into the engine's device
   buffers, all in stream order; the host thread never waits. The DP x PP mesh
   also averages each chunk's parameter gradients over DP on device in on_sync
   (asynchronous, on the compute stream, while the pipeline's p2p is in
   flight: several communicators at once) and completes them in on_step in
   the compute stream's order (vs_wait_stream). One case runs one stage.

   Each configuration runs RUNS times (gradients zeroed before each run); the
   last run's minibatch loss, every microbatch's loss and every parameter
   gradient must be the same bits as the threads transport's host run of the
   same model (and as pm_ref_run, one device's loop), and so must a gradient
   tied between the first and the last chunk (vs_pipe_tie_grads, device memory).
   A DP 2 x PP 2 case runs 18 times after a first GPipe run, so blocks age out
   of the engine's cache (given back at a run's end) while replica 0 has a
   world all-reduce waiting for replica 1: cudaFree there would synchronise
   the device under a waiting collective (free-during-collective). Bit for bit holds: the
   engine moves activations as exact copies and sums nothing across ranks; the
   DP average of two identical replicas is a pre-multiplication by 0.5 (exact).
   The steady state (the last run, all ranks, from vs_pipe_run's start to its
   return) is measured with vs_strict_get_counts(), printed and asserted: no device
   allocation, no event created, at most one host sync per rank (the losses'
   broadcast; vs_pipe_desc.fixed_shapes, as every case but two sets) or one
   more per activation message (the two cases that read the shapes from the
   headers). A case changes the shapes under fixed_shapes: the run fails.
   VS_STRICT_DELAY_US adds random delays before every stream operation; the
   cases run once without and once with 200 us. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vescale_pipe.h"
#include "vs_test.h"

#include <cuda_runtime.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef VS_STRICT
#include "strict/vs_strict.h"
#else /* real GPUs (make test-gpu, 2 or more): no stand-in to count or report */
typedef struct vs_strict_counts {
    long device_allocs, device_frees, host_syncs, h2d, d2h, d2d, libraries, launches, nccl_ops;
} vs_strict_counts;
static vs_strict_counts vs_strict_get_counts(void)
{
    vs_strict_counts c;
    memset(&c, 0, sizeof c);
    return c;
}
static long vs_strict_violations(void) { return 0; }
static const char* vs_strict_first_violation(void) { return ""; }
static int st_delay_us; /* (the stand-in's random delays: none on a GPU) */
#endif
#include "pipe_models.h"

enum { RUNS = 6, RUNS_TRIM = 18, ARENA = 8 << 20, MAXR = 8 };

/* ---- device layers: the model's host code, run on the compute stream ----------- */

/* Pinned staging memory of the calling rank, handed out in order and taken back
   after each run (vs_pipe_run returns with the compute stream's work done). */
typedef struct stage_mem {
    char* base;
    size_t used;
    int overflow;
} stage_mem;
static __thread stage_mem* g_sm;

static void* sm_take(size_t n)
{
    n = (n + 63) & ~(size_t)63;
    if (!g_sm || g_sm->used + n > ARENA) {
        if (g_sm) g_sm->overflow = 1;
        return NULL;
    }
    void* p = g_sm->base + g_sm->used;
    g_sm->used += n;
    return p;
}

static size_t tbytes(const vs_pipe_tensor* t)
{
    size_t n = vs_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
    return n;
}

enum { DJ_F, DJ_B, DJ_W, DJ_BW };

typedef struct djob { /* one callback's work, as the stream runs it */
    int what;
    pm_layer* L;
    vs_pipe_call c; /* the host view: in/out point at pinned copies; _rt NULL (pm_output callocs) */
    vs_pipe_tensor in[2], out[2];
    void* hout[2]; /* forward: where the outputs go, then on to the device */
    size_t nout[2];
    void* hsaved;
    size_t nsaved;
} djob;

static void dj_bad(pm_layer* L, const char* what)
{
    int n = __atomic_add_fetch(&L->inst->bad, 1, __ATOMIC_SEQ_CST);
    if (n <= 5) fprintf(stderr, "    unit %d: %s\n", L->idx, what);
}

/* The "kernel": runs on the stream's worker. */
static void dj_run(void* arg)
{
    djob* j = (djob*)arg;
    pm_layer* L = j->L;
    vs_result r = j->what == DJ_F    ? pm_fwd(&j->c)
                  : j->what == DJ_B  ? pm_bwd_in(&j->c)
                  : j->what == DJ_W  ? pm_bwd_w(&j->c)
                                     : pm_bwd_full(&j->c);
    if (r) dj_bad(L, "the layer's host code failed");
    if (j->what != DJ_F) return;
    for (int o = 0; o < j->c.n_out; o++) {
        if (!j->out[o].data || tbytes(&j->out[o]) != j->nout[o]) {
            dj_bad(L, "forward made an output of another size than the device wrapper expected");
            continue;
        }
        memcpy(j->hout[o], j->out[o].data, j->nout[o]);
        free(j->out[o].data);
    }
    if (j->nsaved != j->c.saved_bytes || (j->nsaved && !j->c.saved)) dj_bad(L, "forward saved another size");
    else if (j->nsaved) memcpy(j->hsaved, j->c.saved, j->nsaved);
    free(j->c.saved);
}

/* Device values into pinned memory, on the stream. */
static void* dj_fetch(cudaStream_t st, const void* d, size_t n, int* err)
{
    if (!d) return NULL;
    void* h = sm_take(n ? n : 1);
    if (!h || (n && cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, st) != cudaSuccess)) *err = 1;
    return h;
}

static vs_result dv_call(vs_pipe_call* c, int what)
{
    pm_layer* L = (pm_layer*)c->user;
    cudaStream_t st = (cudaStream_t)c->stream;
    djob* j = (djob*)sm_take(sizeof *j);
    if (!j) return vs_set_error(VS_ERR_NOMEM, "test: staging memory exhausted");
    memset(j, 0, sizeof *j);
    j->what = what, j->L = L, j->c = *c;
    j->c._rt = NULL, j->c.in = j->in, j->c.out = j->out, j->c.stream = NULL;
    int err = 0;
    const int64_t rows = c->in[0].shape[0];
    if (what == DJ_F) {
        size_t saved = 0;
        for (int o = 0; o < c->n_out && o < 2; o++) {
            int64_t sh[2] = {rows, L->kind == PM_MIX ? L->wo[o] : 1};
            int nd = L->kind == PM_MIX ? 2 : 0;
            vs_dtype dt = L->kind == PM_MIX ? L->dt : VS_F32;
            void* d;
            vs_result r = vs_pipe_output(c, o, dt, nd, sh, &d);
            if (r) return r;
            j->nout[o] = vs_dtype_size(dt) * (size_t)(nd ? rows * sh[1] : 1);
            j->hout[o] = sm_take(j->nout[o]);
            memset(&j->out[o], 0, sizeof j->out[o]);
            j->out[o].name = c->out[o].name;
            if (L->kind == PM_MIX) saved += (size_t)(rows * L->wo[o]) * sizeof(float);
        }
        if (L->kind == PM_CE) saved = (size_t)(rows * c->in[0].shape[1]) * sizeof(float);
        void* dsaved = NULL;
        if (saved) {
            vs_result r = vs_pipe_save(c, saved, &dsaved);
            if (r) return r;
            j->hsaved = sm_take(saved), j->nsaved = saved;
        }
        for (int i = 0; i < c->n_in && i < 2; i++) {
            j->in[i] = c->in[i];
            j->in[i].data = dj_fetch(st, c->in[i].data, tbytes(&c->in[i]), &err);
            j->in[i].grad = NULL;
        }
        j->c.saved = NULL, j->c.saved_bytes = 0;
        if (!err && cudaLaunchHostFunc(st, dj_run, j) != cudaSuccess) err = 1;
        for (int o = 0; o < c->n_out && o < 2 && !err; o++)
            if (!j->hout[o] || cudaMemcpyAsync(c->out[o].data, j->hout[o], j->nout[o], cudaMemcpyHostToDevice, st))
                err = 1;
        if (!err && saved && (!j->hsaved || cudaMemcpyAsync(dsaved, j->hsaved, saved, cudaMemcpyHostToDevice, st)))
            err = 1;
    } else {
        for (int i = 0; i < c->n_in && i < 2; i++) {
            j->in[i] = c->in[i];
            j->in[i].data = dj_fetch(st, c->in[i].data, tbytes(&c->in[i]), &err);
            j->in[i].grad = dj_fetch(st, c->in[i].grad, tbytes(&c->in[i]), &err);
        }
        for (int o = 0; o < c->n_out && o < 2; o++) {
            j->out[o] = c->out[o];
            j->out[o].data = dj_fetch(st, c->out[o].data, tbytes(&c->out[o]), &err);
            j->out[o].grad = dj_fetch(st, c->out[o].grad, tbytes(&c->out[o]), &err);
        }
        j->c.saved = dj_fetch(st, c->saved, c->saved_bytes, &err);
        if (!err && cudaLaunchHostFunc(st, dj_run, j) != cudaSuccess) err = 1;
        for (int i = 0; i < c->n_in && i < 2 && !err && what != DJ_W; i++)
            if (c->in[i].grad &&
                cudaMemcpyAsync(c->in[i].grad, j->in[i].grad, tbytes(&c->in[i]), cudaMemcpyHostToDevice, st))
                err = 1;
    }
    return err ? vs_set_error(VS_ERR_BACKEND, "test: unit %d: staging or a copy failed", L->idx) : VS_OK;
}
static vs_result dv_fwd(vs_pipe_call* c) { return dv_call(c, DJ_F); }
static vs_result dv_bwd_in(vs_pipe_call* c) { return dv_call(c, DJ_B); }
static vs_result dv_bwd_w(vs_pipe_call* c) { return dv_call(c, DJ_W); }
static vs_result dv_bwd_full(vs_pipe_call* c) { return dv_call(c, DJ_BW); }

/* The shape-change case: from this rank's second run on, microbatch m gets
   microbatch m + 1's data (another row count in the varlen model). */
static __thread int g_shift;

/* The data callback: made on the host, copied in on the stream from pinned memory. */
static vs_result dv_data(vs_pipe_call* c)
{
    vs_pipe_call hc = *c;
    hc.mb += g_shift;
    vs_pipe_tensor o;
    memset(&o, 0, sizeof o);
    o.name = c->out[0].name;
    hc.out = &o, hc._rt = NULL;
    vs_result r = pm_data_fn(&hc);
    if (r) return r;
    void* d;
    size_t n = tbytes(&o);
    void* h = sm_take(n);
    if (!r) r = vs_pipe_output(c, 0, o.dtype, o.ndim, o.shape, &d);
    if (!r && !h) r = vs_set_error(VS_ERR_NOMEM, "test: staging memory exhausted");
    if (!r) memcpy(h, o.data, n);
    free(o.data);
    if (!r && cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, (cudaStream_t)c->stream) != cudaSuccess)
        r = vs_set_error(VS_ERR_BACKEND, "test: data copy");
    return r;
}

/* ---- DP: each chunk's parameter gradients averaged over DP on device ------------ */

typedef struct dp_sync {
    vs_comm* dp; /* NULL: no DP */
    int dev;     /* NCCL: device buffers on the compute stream; else host buffers */
    pm_inst* E;
    const vs_pipe_plan* plan;
    cudaStream_t st;
    float* dbuf[PM_MAXU]; /* a device copy of each unit's gradient */
    vs_work* work[PM_MAXU];
    /* the trim case: an all-reduce over the world that replica 0 starts in on_step
       and replica 1 only after its vs_pipe_run returned, so replica 0's run ends
       (and trims its block cache) while a collective of its device waits */
    int trim, rep;
    vs_comm* world;
    float* xbuf;
    vs_work* xwork;
} dp_sync;

/* SYNC<k>: the chunk's gradients (host memory the stream functions write; pinned,
   so the copy reads them when the stream gets there) to the device and an
   asynchronous all-reduce (AVG) on the DP communicator, which runs on the
   compute stream. */
static vs_result dp_on_sync(void* user, int k)
{
    dp_sync* S = (dp_sync*)user;
    if (!S->dp) return VS_OK;
    for (int u = S->plan->first_unit[k]; u < S->plan->first_unit[k + 1]; u++) {
        pm_layer* L = &S->E->L[u];
        if (!L->npar) continue;
        size_t n = (size_t)L->npar * sizeof(float);
        if (!S->dev) memcpy(S->dbuf[u], L->g, n);
        else if (cudaMemcpyAsync(S->dbuf[u], L->g, n, cudaMemcpyHostToDevice, S->st))
            return vs_set_error(VS_ERR_BACKEND, "test: gradient copy");
        _VS_TRY(vs_all_reduce(S->dp, S->dbuf[u], S->dbuf[u], (size_t)L->npar, VS_F32, VS_OP_AVG, &S->work[u]));
    }
    return VS_OK;
}

/* STEP: the averages back, in the compute stream's order (vs_wait_stream: no
   host wait; the host reads them after its own wait after vs_pipe_run). */
static vs_result dp_on_step(void* user)
{
    dp_sync* S = (dp_sync*)user;
    if (S->trim && S->rep == 0) _VS_TRY(vs_all_reduce(S->world, S->xbuf, S->xbuf, 1, VS_F32, VS_OP_SUM, &S->xwork));
    if (!S->dp) return VS_OK;
    for (int u = 0; u < S->E->nu; u++) {
        if (!S->work[u]) continue;
        _VS_TRY(vs_wait_stream(S->work[u], (void*)S->st));
        S->work[u] = NULL;
        if (!S->dev) memcpy(S->E->L[u].g, S->dbuf[u], (size_t)S->E->L[u].npar * sizeof(float));
        else if (cudaMemcpyAsync(S->E->L[u].g, S->dbuf[u], (size_t)S->E->L[u].npar * sizeof(float), cudaMemcpyDeviceToHost,
                            S->st))
            return vs_set_error(VS_ERR_BACKEND, "test: gradient copy back");
    }
    return VS_OK;
}

/* ---- the runs -------------------------------------------------------------- */

typedef struct pjob {
    vs_pipe_kind kind;
    int model, bf16, P, DP, M, nccl, runs, own_stream;
    int fixed; /* vs_pipe_desc.fixed_shapes */
    int defer; /* vs_pipe_desc.defer_loss: the loss read after the test's own vs_sync_stream */
    int nan_loss; /* defer: vs_pipe_run's *loss was NaN every run (it must be) */
    double loss[2];
    float mb_loss[2][PM_MAXM];
    float* g[2][PM_MAXU]; /* [dp replica][unit], from the stage that holds it */
    int npar[PM_MAXU];
    int bad, overflow;
    int nsends; /* send instructions in one run, all ranks */
    int nrecvf; /* activation receives in one run, all ranks (a header each without fixed shapes) */
    int reshape; /* the data's shapes change after the first run (fixed shapes: the run fails) */
    vs_result err; /* reshape: what vs_launch returned, and its message */
    char msg[512];
    int trim;   /* the first run GPipe with 2M microbatches, then RUNS_TRIM runs (blocks age out of the cache) */
    vs_strict_counts t0, t1; /* trim: around the run whose end frees the aged blocks */
    float tied[2][4][8];     /* [replica][stage]: a gradient after vs_pipe_tie_grads(first chunk, last chunk) */
    vs_strict_counts c0, c1; /* before and after the last run, all ranks */
    pthread_barrier_t bar;
    /* fault (case_fault): in the last run the last stage's rank stalls (1: past
       the others' 1 s deadline, never running it) or fails (2: its rank
       returns an error); the first stage's run's result and time, and how long
       its vs_pipe_free took */
    int fault;
    long sync0; /* fault 2: the stand-in's host waits as rank 0 began the run (-1 before) */
    vs_result fgot;
    double fsecs, free_secs;
    char fmsg[512];
} pjob;

static double pj_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static pthread_mutex_t pj_mu = PTHREAD_MUTEX_INITIALIZER;

static int pchunks(vs_pipe_kind k) { return k == VS_PIPE_INTERLEAVED || k == VS_PIPE_ZBV || k == VS_PIPE_DUALPIPEV ? 2 : 1; }

/* Every rank at one point, then rank 0 reads the counts (no CUDA or NCCL call). */
static void pj_mark(pjob* J, vs_world* w, vs_strict_counts* at)
{
    pthread_barrier_wait(&J->bar);
    if (vs_world_rank(w) == 0) *at = vs_strict_get_counts();
    pthread_barrier_wait(&J->bar);
}

static int prank(vs_world* w, void* arg)
{
    pjob* J = (pjob*)arg;
    const vs_dtype dt = J->bf16 ? VS_BF16 : VS_F32;
    stage_mem sm = {NULL, 0, 0};
    g_sm = &sm;
    pm_inst* E = pm_new(J->model, dt, PM_BK_BOTH);
    const int V = pchunks(J->kind);
    vs_mesh* mesh = NULL;
    vs_mesh* dpm = NULL;
    vs_pipe* pipe = NULL;
    vs_pipe_sched* sched = NULL;
    vs_pipe_plan plan;
    memset(&plan, 0, sizeof plan);
    pm_data dd = {J->model, dt, 0};
    dp_sync S;
    memset(&S, 0, sizeof S);
    cudaStream_t st = NULL;
    vs_result r = VS_OK;
    vs_mesh_desc md; /* (no compound literals: nvcc compiles this file as C++ for real GPUs) */
    memset(&md, 0, sizeof md);
    if (J->DP > 1) md.shape[0] = J->DP, md.shape[1] = J->P, md.dim_names[0] = "DP", md.dim_names[1] = "PP";
    else md.shape[0] = J->P, md.dim_names[0] = "PP";
    r = vs_mesh_init(w, &md, &mesh);
    vs_pipe_split_desc sd;
    memset(&sd, 0, sizeof sd);
    sd.stages = J->P, sd.chunks = V, sd.kind = VS_PIPE_SPLIT_UNIFORM, sd.schedule = (int)J->kind;
    if (!r) r = vs_pipe_split(E->U, E->nu, &sd, &plan);
    E->plan = &plan;
    vs_pipe_unit U[PM_MAXU];
    memcpy(U, E->U, sizeof U);
    if (J->nccl) {
        for (int u = 0; u < E->nu; u++)
            U[u].forward = dv_fwd, U[u].backward = dv_bwd_full, U[u].backward_input = dv_bwd_in,
            U[u].backward_weight = dv_bwd_w;
        if (!r && cudaMallocHost((void**)&sm.base, ARENA)) r = vs_set_error(VS_ERR_NOMEM, "test: pinned memory");
        for (int u = 0; u < E->nu && !r; u++) /* the gradients: the stream functions write them, copies read them */
            if (E->L[u].npar && cudaHostRegister(E->L[u].g, (size_t)E->L[u].npar * sizeof(float), 0))
                r = vs_set_error(VS_ERR_BACKEND, "test: cudaHostRegister");
        if (!r && J->own_stream && cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking))
            r = vs_set_error(VS_ERR_BACKEND, "test: stream");
    }
    if (!r && J->DP > 1) {
        r = vs_mesh_submesh(mesh, "DP", &dpm);
        S.dp = dpm ? vs_mesh_comm(dpm) : NULL;
    }
    S.E = E, S.plan = &plan, S.dev = J->nccl, S.st = st; /* (DP cases give the engine their stream) */
    vs_pipe_desc pd;
    memset(&pd, 0, sizeof pd);
    pd.mesh = mesh, pd.units = U, pd.nunits = E->nu, pd.plan = &plan;
    pd.data = J->nccl ? dv_data : pm_data_fn, pd.data_user = &dd;
    pd.on_sync = dp_on_sync, pd.on_step = dp_on_step, pd.hook_user = &S, pd.stream = (void*)st;
    pd.fixed_shapes = J->fixed;
    pd.defer_loss = J->defer;
    if (!r) r = vs_pipe_init(&pd, &pipe);
    if (!r && S.dp && J->nccl) {
        r = vs_comm_set_stream(S.dp, (void*)S.st); /* DP's collectives in stream order with the layers */
        for (int u = 0; u < E->nu && !r; u++)
            if (E->L[u].npar && !(S.dbuf[u] = (float*)vs_device_alloc(w, (size_t)E->L[u].npar * sizeof(float))))
                r = vs_set_error(VS_ERR_NOMEM, "test: device gradient");
    } else if (!r && S.dp) {
        for (int u = 0; u < E->nu && !r; u++)
            if (E->L[u].npar && !(S.dbuf[u] = (float*)malloc((size_t)E->L[u].npar * sizeof(float) + 1)))
                r = VS_ERR_NOMEM;
    }
    if (!r) r = vs_pipe_generate(w, J->kind, J->P, V, J->M, &sched);
    vs_pipe_sched* first = NULL; /* trim: the first run's */
    S.trim = J->trim, S.rep = J->DP > 1 && mesh ? vs_mesh_coord_along(mesh, "DP") : 0, S.world = vs_world_comm(w);
    if (!r && J->trim && J->runs > 1) r = vs_pipe_generate(w, VS_PIPE_GPIPE, J->P, V, 2 * J->M, &first);
    if (!r && J->trim && !(S.xbuf = (float*)(J->nccl ? vs_device_alloc(w, sizeof(float)) : calloc(1, sizeof(float)))))
        r = vs_set_error(VS_ERR_NOMEM, "test: device float");
    for (int i = 0, st0 = pipe ? vs_pipe_stage(pipe) : 0; !r && i < vs_pipe_sched_len(sched, st0); i++) {
        vs_pipe_instr in;
        if (vs_pipe_sched_at(sched, st0, i, &in) == VS_OK && (in.op == VS_PIPE_SEND_F || in.op == VS_PIPE_SEND_B))
            __atomic_add_fetch(&J->nsends, 1, __ATOMIC_SEQ_CST);
        if (vs_pipe_sched_at(sched, st0, i, &in) == VS_OK && in.op == VS_PIPE_RECV_F)
            __atomic_add_fetch(&J->nrecvf, 1, __ATOMIC_SEQ_CST);
    }
    double loss = 0;
    for (int run = 0; run < J->runs; run++) {
        double ft0 = 0;
        if (J->fault && run == J->runs - 1 && !r) {
            if (vs_world_rank(w) == 1) { /* the fault (the last stage, or DP replica 1): it never runs it */
                if (J->fault == 2) /* once rank 0 waits in the run (a host wait counted since it began; 2 s at most) */
                    for (int i = 0; i < 2000; i++) {
                        long s0 = __atomic_load_n(&J->sync0, __ATOMIC_SEQ_CST);
                        if (s0 >= 0 && vs_strict_get_counts().host_syncs > s0) break;
                        usleep(1000);
                    }
                usleep(J->fault == 1 ? 2500 * 1000 : 200 * 1000); /* past the 1 s deadline; or into that wait */
                r = vs_set_error(VS_ERR_INVALID, "test: world rank 1 %s", J->fault == 1 ? "stalled" : "gives up");
                break;
            }
            if (J->fault == 1) { /* the others' deadline short only now (the first run waited for the slower start) */
                vs_mesh* ppm = NULL;
                r = vs_comm_set_timeout(vs_mesh_comm(mesh), 1);
                if (!r && J->P > 1) r = vs_mesh_submesh(mesh, "PP", &ppm); /* (the pipe's: made already) */
                if (!r && ppm) r = vs_comm_set_timeout(vs_mesh_comm(ppm), 1);
                if (!r && S.dp) r = vs_comm_set_timeout(S.dp, 1);
            }
            ft0 = pj_now();
            __atomic_store_n(&J->sync0, vs_strict_get_counts().host_syncs, __ATOMIC_SEQ_CST);
        }
        if (run == J->runs - 1 && !J->fault) pj_mark(J, w, &J->c0);
        if (J->trim && run == 16) pj_mark(J, w, &J->t0);
        g_shift = J->reshape && run > 0;
        if (!r) {
            pm_zero_grads(E); /* (the stream functions are done: vs_pipe_run waited for them) */
            r = vs_pipe_run(pipe, first && run == 0 ? first : sched, &loss);
            if (!r && J->defer) { /* no wait in the run: the test's own is the step's one */
                if (loss == loss) __atomic_store_n(&J->nan_loss, -1, __ATOMIC_SEQ_CST);
                r = vs_sync_stream(vs_world_comm(w), (void*)st);
            }
        }
        if (J->fault && run == J->runs - 1 && vs_world_rank(w) == 0) {
            J->fgot = r, J->fsecs = pj_now() - ft0;
            snprintf(J->fmsg, sizeof J->fmsg, "%s", r ? vs_last_error() : "");
        }
        if (run == J->runs - 1 && !J->fault) pj_mark(J, w, &J->c1);
        if (!r && J->defer) r = vs_pipe_loss(pipe, &loss); /* (asked for: its own copy, outside the counted run) */
        /* the run's device work is done at its return (its one host wait, for
           the losses' broadcast, comes after the compute stream's work): the
           last output (the loss of the last microbatch, written on the compute
           stream) read on the default stream at once, no other wait */
        if (J->nccl && !r && run == J->runs - 1 && vs_pipe_stage(pipe) == plan.chunk_stage[plan.nchunks - 1]) {
            vs_pipe_tensor ot;
            double l = 0;
            float f = 0, want;
            r = vs_pipe_mb_output(pipe, J->M - 1, 0, &ot);
            if (!r) r = vs_pipe_mb_loss(pipe, J->M - 1, &l);
            if (!r && cudaMemcpy(&f, ot.data, sizeof f, cudaMemcpyDeviceToHost) != cudaSuccess)
                r = vs_set_error(VS_ERR_BACKEND, "test: cudaMemcpy");
            want = (float)l;
            if (!r && memcmp(&f, &want, sizeof f))
                r = vs_set_error(VS_ERR_MISMATCH, "test: the last output on the default stream: %.9g, the loss %.9g",
                                 (double)f, l);
        }
        if (!r && J->trim && S.rep == 1) r = vs_all_reduce(S.world, S.xbuf, S.xbuf, 1, VS_F32, VS_OP_SUM, &S.xwork);
        if (!r && S.xwork) r = vs_wait(S.xwork);
        S.xwork = NULL;
        if (J->trim && run == 16) pj_mark(J, w, &J->t1);
        if (sm.overflow && !r) r = vs_set_error(VS_ERR_NOMEM, "test: staging memory overflowed");
        sm.used = 0;
    }
    int stage = pipe ? vs_pipe_stage(pipe) : 0, rep = J->DP > 1 && mesh ? vs_mesh_coord_along(mesh, "DP") : 0;
    /* a tied gradient (first and last chunk), in engine-side memory (device on NCCL) */
    float tg[8];
    for (int i = 0; i < 8; i++) tg[i] = 0.1f * (float)(stage + 1) + 0.01f * (float)i + 0.001f * (float)rep;
    /* (not after a failed run: a cudaMalloc would synchronise the device under the links' operations for the
       peer that is gone) */
    void* tbuf = J->nccl ? (r ? NULL : vs_device_alloc(w, sizeof tg)) : (void*)tg;
    if (!r && !tbuf) r = vs_set_error(VS_ERR_NOMEM, "test: tied gradient");
    if (!r && J->nccl && cudaMemcpy(tbuf, tg, sizeof tg, cudaMemcpyHostToDevice)) r = vs_set_error(VS_ERR_BACKEND, "copy");
    if (!r && plan.nchunks > 1) r = vs_pipe_tie_grads(pipe, 0, plan.nchunks - 1, tbuf, 8, VS_F32);
    if (!r && J->nccl && cudaMemcpy(tg, tbuf, sizeof tg, cudaMemcpyDeviceToHost)) r = vs_set_error(VS_ERR_BACKEND, "copy");
    if (J->nccl && tbuf) vs_device_free(w, tbuf);
    pthread_mutex_lock(&pj_mu);
    memcpy(J->tied[rep][stage], tg, sizeof tg);
    if (stage == plan.chunk_stage[plan.nchunks - 1]) J->loss[rep] = loss;
    J->bad += __atomic_load_n(&E->bad, __ATOMIC_SEQ_CST); /* (after a failed run a stream function may still count: TSan) */
    for (int m = 0; m < J->M && !r && stage == plan.chunk_stage[plan.nchunks - 1]; m++) {
        double l;
        r = vs_pipe_mb_loss(pipe, m, &l);
        J->mb_loss[rep][m] = (float)l;
    }
    for (int k = 0; k < plan.nchunks && !r; k++)
        for (int u = plan.first_unit[k]; u < plan.first_unit[k + 1]; u++)
            if (plan.chunk_stage[k] == stage) {
                J->npar[u] = E->L[u].npar;
                J->g[rep][u] = (float*)malloc(sizeof(float) * (size_t)E->L[u].npar + 1);
                memcpy(J->g[rep][u], E->L[u].g, sizeof(float) * (size_t)E->L[u].npar);
            }
    pthread_mutex_unlock(&pj_mu);
    if (r) fprintf(stderr, "    rank %d: %s\n", vs_world_rank(w), vs_last_error());
    vs_pipe_sched_free(sched);
    vs_pipe_sched_free(first);
    /* rank 0's failed run: the DP all-reduces its hooks enqueued for the replica that is gone end first
       (aborted, as a trainer's would be): vs_pipe_free's cudaFree beside them synchronised the device under them */
    if (J->fault && r && S.dp && vs_world_rank(w) == 0) vs_comm_abort(S.dp);
    double f0 = pj_now();
    vs_pipe_free(pipe);
    if (J->fault && vs_world_rank(w) == 0) J->free_secs = pj_now() - f0;
    if (S.xbuf && J->nccl) vs_device_free(w, S.xbuf);
    else free(S.xbuf);
    for (int u = 0; u < E->nu; u++) {
        if (!S.dbuf[u]) continue;
        if (J->nccl) vs_device_free(w, S.dbuf[u]);
        else free(S.dbuf[u]);
    }
    vs_mesh_free(dpm);
    vs_mesh_free(mesh);
    if (J->nccl) {
        for (int u = 0; u < E->nu; u++)
            if (E->L[u].npar) cudaHostUnregister(E->L[u].g);
        if (sm.base) cudaFreeHost(sm.base);
        if (st) cudaStreamDestroy(st);
    }
    pm_free(E);
    g_sm = NULL;
    return r;
}

static vs_result plaunch(pjob* J)
{
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = J->P * J->DP;
    ld.transport = J->nccl ? VS_TRANSPORT_NCCL : VS_TRANSPORT_THREADS;
    ld.timeout_s = 60;
    pthread_barrier_init(&J->bar, NULL, (unsigned)ld.nranks);
    vs_result r = vs_launch_ex(&ld, prank, J);
    J->err = r;
    snprintf(J->msg, sizeof J->msg, "%s", r ? vs_last_error() : "");
    pthread_barrier_destroy(&J->bar);
    return r;
}

static void pj_free(pjob* J)
{
    for (int d = 0; d < 2; d++)
        for (int u = 0; u < PM_MAXU; u++) free(J->g[d][u]), J->g[d][u] = NULL;
}

/* The NCCL run against the threads run and one device's loop: the same bits;
   then the last run's counts. */
static int g_defer; /* the next case_nccl's device run defers its losses */
static void case_nccl(vs_pipe_kind kind, int model, int bf16, int P, int DP, int M, int own_stream, int trim, int fixed)
{
    static pjob h, d;
    memset(&h, 0, sizeof h);
    h.kind = kind, h.model = model, h.bf16 = bf16, h.P = P, h.DP = DP, h.M = M, h.own_stream = own_stream;
    h.fixed = fixed;
    h.runs = 1, h.trim = trim;
    d = h;
    d.nccl = 1, d.runs = trim ? RUNS_TRIM : RUNS;
    d.defer = g_defer;
    g_defer = 0;
    long v0 = vs_strict_violations();
    VT_OK(plaunch(&h));
    VT_OK(plaunch(&d));
    VT_CHECK(vs_strict_violations() == v0, "%ld stand-in violations, the first: %s", vs_strict_violations() - v0,
             vs_strict_first_violation());
    VT_CHECK(h.bad == 0 && d.bad == 0, "contract violations in the layers: threads %d, NCCL %d", h.bad, d.bad);
    VT_CHECK(d.nan_loss == 0, "defer_loss: vs_pipe_run gave a loss (it must leave NaN: the losses are not there yet)");
    pm_inst* R = pm_new(model, bf16 ? VS_BF16 : VS_F32, PM_BK_FULL);
    double rl = 0;
    float rmb[PM_MAXM];
    pm_zero_grads(R);
    VT_CHECK(pm_ref_run(R, M, 0, 0, &rl, rmb) == 0, "the reference failed");
    for (int rep = 0; rep < DP; rep++) {
        VT_CHECK(!memcmp(&h.loss[rep], &d.loss[rep], sizeof(double)) && !memcmp(&rl, &d.loss[rep], sizeof(double)),
                 "replica %d: minibatch loss: NCCL %.17g, threads %.17g, one device %.17g", rep, d.loss[rep],
                 h.loss[rep], rl);
        VT_CHECK(!memcmp(h.mb_loss[rep], d.mb_loss[rep], sizeof(float) * (size_t)M) &&
                     !memcmp(rmb, d.mb_loss[rep], sizeof(float) * (size_t)M),
                 "replica %d: microbatch losses differ", rep);
        for (int u = 0; u < R->nu; u++) {
            size_t n = sizeof(float) * (size_t)R->L[u].npar;
            VT_CHECK(d.npar[u] == R->L[u].npar && d.g[rep][u] && h.g[rep][u] && !memcmp(d.g[rep][u], h.g[rep][u], n) &&
                         !memcmp(d.g[rep][u], R->L[u].g, n),
                     "replica %d, unit %d: parameter gradients differ (NCCL vs threads vs one device)", rep, u);
        }
    }
    pm_free(R);
    VT_CHECK(!memcmp(h.tied, d.tied, sizeof h.tied), "vs_pipe_tie_grads: NCCL and threads differ");
    pj_free(&h);
    pj_free(&d);
    int n = P * DP;
    vs_strict_counts a = d.c0, b = d.c1;
    printf("    steady state (run %d of %d, %s, P=%d DP=%d M=%d%s), per rank: %.2f device allocations, %.2f frees, "
           "%.2f host syncs, %.2f events created, %.2f H2D / %.2f D2H copies, %.2f NCCL ops\n",
           d.runs, d.runs, vs_pipe_kind_name(kind), P, DP, M, fixed ? ", fixed shapes" : "",
           (double)(b.device_allocs - a.device_allocs) / n, (double)(b.device_frees - a.device_frees) / n,
           (double)(b.host_syncs - a.host_syncs) / n, (double)(b.events - a.events) / n, (double)(b.h2d - a.h2d) / n,
           (double)(b.d2h - a.d2h) / n, (double)(b.nccl_ops - a.nccl_ops) / n);
    /* trim: the blocks the first run's GPipe needed beyond 1F1B's went back at the
       end of run 16, while replica 0's world all-reduce waited for replica 1
       (stream-ordered: cudaFreeAsync; cudaFree there waits for the device) */
    VT_CHECK(!trim || d.t1.device_frees > d.t0.device_frees, "trim: no block aged out of the cache (%ld frees)",
             d.t1.device_frees - d.t0.device_frees);
    /* The steady state, counted from vs_pipe_run's start to its return on all
       ranks (the caller's own wait after it is not in it). Every buffer comes
       from the engine's cache (a send's goes back when the schedule proves it
       received: the same points every run), every event from the
       communicators' pools. Host waits: the last stage reads the microbatch
       losses (one wait for its compute stream), every other stage waits for
       the loss's broadcast: one per rank, each rank makes at least that one, so
       a total of at most one per rank is one each. Without fixed shapes each
       activation message's header is read on the host besides (one wait each);
       gradients never need one. */
    long syncs = b.host_syncs - a.host_syncs, allowed = n + (fixed ? 0 : d.nrecvf);
    VT_CHECK(syncs <= allowed,
             "steady state: %ld host syncs in the last run, all %d ranks (at most %ld: one per rank%s)",
             syncs, n, allowed, fixed ? "" : " and one per activation receive");
    VT_CHECK(b.device_allocs == a.device_allocs && b.device_frees == a.device_frees && b.events == a.events,
             "steady state: %ld device allocations, %ld frees and %ld events created in the last run (want 0)",
             b.device_allocs - a.device_allocs, b.device_frees - a.device_frees, b.events - a.events);
}

/* A pipeline step in which world rank 1 stalls (kind 1: past rank 0's 1 s
   deadline, never running the step) or fails (kind 2: its rank returns an
   error, which aborts the job's communicators): rank 0's vs_pipe_run ends in
   VS_ERR_TIMEOUT / VS_ERR_ABORTED naming world rank 1, within the deadline, not
   a hang, and its vs_pipe_free returns within it too. PP=2: world rank 1 is the
   last stage; rank 0's run waits for the losses' broadcast (a plain
   cudaStreamSynchronize there: no error, or the stand-in's hang deadline), and
   the links' operations for the absent stage held the compute stream until
   their own 60 s deadline (vs_pipe_free took 60 s: a failed run now aborts
   them). P=1 x DP=2: world rank 1 is the other replica, whose all-reduces
   (the test's DP hooks, on the compute stream) never come; the run's one wait
   is _vs_pipe_sync's (plain: success over all-reduces that never ran), and
   the losses' copy before it went to pageable memory, itself a wait without
   a deadline (the run returned VS_OK once rank 1's exit aborted the job). */
static void case_fault(int kind, int P, int DP)
{
    static pjob d;
    memset(&d, 0, sizeof d);
    d.kind = VS_PIPE_1F1B, d.model = PM_B, d.P = P, d.DP = DP, d.M = 3, d.own_stream = 1, d.fixed = 1;
    d.nccl = 1, d.runs = 2, d.fault = kind, d.sync0 = -1;
    long v0 = vs_strict_violations();
    VT_CHECK(plaunch(&d) != VS_OK, "pipe fault %d: vs_launch succeeded", kind);
    if (kind == 1)
        VT_CHECK(d.fgot == VS_ERR_TIMEOUT && strstr(d.fmsg, "vs_pipe_run") && strstr(d.fmsg, "timed out") && d.fsecs < 20,
                 "P=%d DP=%d, world rank 1 stalls: rank 0's vs_pipe_run gave %s after %.1f s (%s), want VS_ERR_TIMEOUT "
                 "within the 1 s deadline", P, DP, vs_result_string(d.fgot), d.fsecs, d.fmsg);
    else
        VT_CHECK(d.fgot == VS_ERR_ABORTED && strstr(d.fmsg, "vs_pipe_run") && strstr(d.fmsg, "world rank 1 failed") &&
                     d.fsecs < 20,
                 "P=%d DP=%d, world rank 1 fails: rank 0's vs_pipe_run gave %s after %.1f s (%s), want VS_ERR_ABORTED "
                 "naming world rank 1, well within the 60 s deadline", P, DP, vs_result_string(d.fgot), d.fsecs, d.fmsg);
    VT_CHECK(d.free_secs < 20, "pipe fault %d, P=%d DP=%d: rank 0's vs_pipe_free took %.1f s", kind, P, DP,
             d.free_secs);
    VT_CHECK(vs_strict_violations() == v0, "%ld stand-in violations, the first: %s", vs_strict_violations() - v0,
             vs_strict_first_violation());
    pj_free(&d);
}

/* Fixed shapes broken: microbatch 0's rows change in the second run. Stage 0's
   send sees it (no receiver reads a header) and fails the run, naming the
   tensor and both shapes; the other stages' waits end with it (the links are
   aborted, the watchdog ends the streams' waits), no hang, no violation. */
static void case_reshape(void)
{
    static pjob d;
    memset(&d, 0, sizeof d);
    d.kind = VS_PIPE_1F1B, d.model = PM_D, d.P = 2, d.DP = 1, d.M = 3, d.own_stream = 1, d.fixed = 1, d.reshape = 1;
    d.nccl = 1, d.runs = 2;
    long v0 = vs_strict_violations();
    VT_CHECK(plaunch(&d) == VS_ERR_MISMATCH, "vs_launch: %s, want VS_ERR_MISMATCH", vs_result_string(d.err));
    VT_CHECK(strstr(d.msg, "fixed_shapes") && strstr(d.msg, "of microbatch 0 is") && strstr(d.msg, "in an earlier run"),
             "the error: %s", d.msg);
    VT_CHECK(vs_strict_violations() == v0, "%ld stand-in violations, the first: %s", vs_strict_violations() - v0,
             vs_strict_first_violation());
    pj_free(&d);
}

int main(void)
{
    static const vs_pipe_kind kinds[] = {VS_PIPE_GPIPE, VS_PIPE_1F1B, VS_PIPE_INTERLEAVED,
                                         VS_PIPE_ZBH1,  VS_PIPE_ZBV,  VS_PIPE_DUALPIPEV};
    const int nk = (int)(sizeof kinds / sizeof kinds[0]);
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 4) { /* PP = 4: a GPU per rank */
        vt_skip("pipe/nccl/all", "fewer than 4 CUDA devices");
        return vt_summary();
    }
    const char* delay0 = getenv("VS_STRICT_DELAY_US");
    for (int pass = 0; pass < 2; pass++) {
        /* pass 1: random delays before every stream operation (unless the caller set them) */
        if (pass == 1 && !(delay0 && *delay0)) st_delay_us = 200;
        const char* dl = pass == 1 ? " (stream delays)" : "";
        for (int k = 0; k < nk; k++)
            for (int P = 2; P <= 4; P += 2) {
                int model = (k + P / 2) % PM_NMODELS, M = P == 2 ? 3 : 2 * P + 1;
                char name[256];
                snprintf(name, sizeof name, "pipe/nccl %s, model %s, PP=%d, M=%d%s", vs_pipe_kind_name(kinds[k]),
                         pm_model_name[model], P, M, dl);
                VT_CASE(name, case_nccl(kinds[k], model, 0, P, 1, M, 1, 0, 1));
            }
        char name[256];
        snprintf(name, sizeof name, "pipe/nccl 1f1b, model varlen, bf16, PP=4, M=5, the PP communicator's stream%s", dl);
        VT_CASE(name, case_nccl(VS_PIPE_1F1B, PM_D, 1, 4, 1, 5, 0, 0, 1));
        /* without fixed shapes: each activation message's header read on the host */
        snprintf(name, sizeof name, "pipe/nccl 1f1b, model varlen, PP=4, M=5, shapes from the headers%s", dl);
        VT_CASE(name, case_nccl(VS_PIPE_1F1B, PM_D, 0, 4, 1, 5, 1, 0, 0));
        snprintf(name, sizeof name, "pipe/nccl interleaved, model skip, PP=2, M=3, shapes from the headers%s", dl);
        VT_CASE(name, case_nccl(VS_PIPE_INTERLEAVED, PM_B, 0, 2, 1, 3, 1, 0, 0));
        snprintf(name, sizeof name, "pipe/nccl 1f1b, model mlp, one stage, M=3%s", dl);
        VT_CASE(name, case_nccl(VS_PIPE_1F1B, PM_A, 0, 1, 1, 3, 1, 0, 1));
        snprintf(name, sizeof name, "pipe/nccl 1f1b, model skip, DP2 x PP2, DP average in on_sync, M=4%s", dl);
        VT_CASE(name, case_nccl(VS_PIPE_1F1B, PM_B, 0, 2, 2, 4, 1, 0, 1));
        snprintf(name, sizeof name, "pipe/nccl zbv, model 2in2out, DP2 x PP2, DP average in on_sync, M=4%s", dl);
        VT_CASE(name, case_nccl(VS_PIPE_ZBV, PM_C, 0, 2, 2, 4, 1, 0, 1));
        snprintf(name, sizeof name,
                 "pipe/nccl 1f1b, model skip, DP2 x PP2, M=4, %d runs after a GPipe one: blocks age out of the cache "
                 "while a collective waits%s", RUNS_TRIM - 1, dl);
        VT_CASE(name, case_nccl(VS_PIPE_1F1B, PM_B, 0, 2, 2, 4, 1, 1, 1));
    }
    VT_CASE("pipe/nccl: fixed shapes that change fail the run (VS_ERR_MISMATCH)", case_reshape());
    VT_CASE("pipe/nccl fault: the last stage stalls in a step: the first stage's run and free end at the deadline",
            case_fault(1, 2, 1));
    VT_CASE("pipe/nccl fault: the last stage fails in a step: the first stage's run ends VS_ERR_ABORTED naming it",
            case_fault(2, 2, 1));
    VT_CASE("pipe/nccl fault: a DP replica stalls in a one-stage step: the other's run and free end at the deadline",
            case_fault(1, 1, 2));
    VT_CASE("pipe/nccl fault: a DP replica fails in a one-stage step: the other's run ends VS_ERR_ABORTED naming it",
            case_fault(2, 1, 2));
    /* defer_loss: the run waits for nothing; the caller's vs_sync_stream brings the losses, equal to the threads
       run's and one device's (the host syncs per run, the test's own included, still at most 1) */
    VT_CASE("pipe/nccl defer_loss: 1f1b, model skip, PP=2, M=3", (g_defer = 1, case_nccl(VS_PIPE_1F1B, PM_B, 0, 2, 1, 3, 1, 0, 1)));
    VT_CASE("pipe/nccl defer_loss: zbv, model 2in2out, DP2 x PP2, M=4",
            (g_defer = 1, case_nccl(VS_PIPE_ZBV, PM_C, 0, 2, 2, 4, 1, 0, 1)));
    VT_CASE("pipe/nccl defer_loss: one stage, M=3", (g_defer = 1, case_nccl(VS_PIPE_1F1B, PM_A, 0, 1, 1, 3, 1, 0, 1)));
    vs_strict_counts sc = vs_strict_get_counts();
    printf("strict stand-in: %ld device allocations, %ld frees, %ld host syncs, %ld kernels and "
           "stream functions, %ld NCCL operations\n",
           sc.device_allocs, sc.device_frees, sc.host_syncs, sc.launches, sc.nccl_ops);
    VT_CASE("pipe/nccl: no stand-in violations", VT_CHECK(vs_strict_violations() == 0, "%ld violations, the first: %s",
                                                          vs_strict_violations(), vs_strict_first_violation()));
    return vt_summary();
}
