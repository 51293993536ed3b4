/* test_pipe_device.c - the device path of vescale_pipe.h's engine (what an NCCL
   build runs on GPUs), run here without one.

   The test builds the engine's CUDA path (_VS_PIPE_CUDA) against a stand-in CUDA
   runtime (tests/mock/cuda_runtime.h, defined below) over the threads transport,
   forced with _VS_PIPE_FORCE_DEVICE: "device" memory is host memory from the
   world's device allocator hook, tracked by the mock (tests/mock/mock_device.h).

   The same model (7 linear+tanh layers with split B/W backwards, a skip
   connection across stages, scratch kept with vs_pipe_save, a row count that
   changes with the microbatch, an MSE loss) runs twice, on host buffers and on
   device buffers, for 2 and 4 stages, 1F1B and ZB-V, M = 1 and 5, two minibatches
   each: the losses (minibatch and per microbatch), every parameter gradient and a
   tied gradient (vs_pipe_tie_grads on a device buffer) must be the same bits.
   Then test_pipe.c's four models (tests/pipe_models.h: a plain stack, skip
   connections, two inputs and two outputs, variable rows with cross-entropy), in
   f32 and with bf16 activations, on 4 stages with ZB-V and M = 5: host run,
   device run and the single-device reference, the same bits.
   What the mock checks that the host tests cannot:
   - every tensor a callback gets (in[].data/grad, out[].data/grad, the saved
     scratch, the data callback's output) lies in one device allocation on the
     device path, and in host memory on the host path;
   - every copy and memset is on the compute stream (vs_pipe_desc.stream), copies
     have a device side and stay in bounds, the loss seed is a 4-byte copy from
     the host of 1/M (the losses come back to the host through the PP
     communicator's broadcast from device memory: with 2 or more stages no copy);
   - each send is ordered after its packing: an event recorded on the compute
     stream and waited for on a non-blocking stream the engine created;
   - vs_pipe_call.stream, and the unit hooks' event.stream (as many calls per
     run as vs_pipe_hook_order lists), is the compute stream (NULL on the host path), the host
     path makes no runtime call at all;
   - no device memory, stream or event is left after vs_pipe_free.
   What it cannot check: real asynchrony, NCCL's own stream handling
   (vs_comm_set_stream on the links: the threads transport has no streams). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <pthread.h>

static int mock_force_device; /* the run's mode: 1 device path, 0 host path */
#define _VS_PIPE_CUDA 1
#define _VS_PIPE_FORCE_DEVICE mock_force_device
#define VESCALE_IMPLEMENTATION
#include "vescale_pipe.h"
#include "tests/vs_test.h"
#define MOCK_OWN_PINNED /* cudaMallocHost / cudaFreeHost below count their calls */
#define MOCK_OWN_EVENT_QUERY /* cudaEventQuery below checks its event */
#include "mock/mock_device.h"
#include "pipe_models.h"

/* ---- the stand-in runtime --------------------------------------------------- */

#define MOCK_COMPUTE ((cudaStream_t)(uintptr_t)0x5151)
struct mock_stream {
    unsigned flags;
};
struct mock_event {
    cudaStream_t recorded_on;
    long records;
};
static long mock_calls, mock_d2d, mock_h2d, mock_d2h, mock_seeds, mock_bad_seeds, mock_memsets, mock_syncs,
    mock_fences, mock_streams_live, mock_events_live;

#define MOCK_COUNT(x) __atomic_add_fetch(&(x), 1, __ATOMIC_SEQ_CST)
#define MOCK_STREAM_IS(st, what) \
    VT_CHECK((st) == MOCK_COMPUTE, "mock: %s on stream %p, not the compute stream", (what), (void*)(st))

cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t st)
{
    MOCK_COUNT(mock_calls);
    MOCK_COUNT(mock_memsets);
    MOCK_STREAM_IS(st, "cudaMemsetAsync");
    MOCK_DEV(p, n, "cudaMemsetAsync");
    memset(p, v, n);
    return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int v, size_t n)
{
    MOCK_COUNT(mock_calls);
    MOCK_DEV(p, n, "cudaMemset");
    memset(p, v, n);
    return cudaSuccess;
}
/* cudaMemcpyDefault, at least one side device memory, both in bounds (the test's own copies too). */
cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, enum cudaMemcpyKind k)
{
    MOCK_COUNT(mock_calls);
    int wd = mock_where(dst, n), ws = mock_where(src, n);
    VT_CHECK(k == cudaMemcpyDefault && wd >= 0 && ws >= 0 && (wd || ws),
             "mock: copy %p <- %p, %zu bytes: dst %d src %d (1 device, 0 host, -1 out of bounds)", dst, src, n, wd,
             ws);
    if (wd < 0 || ws < 0) return cudaErrorInvalidValue;
    if (wd && ws) MOCK_COUNT(mock_d2d);
    else if (wd) MOCK_COUNT(mock_h2d);
    else if (ws) MOCK_COUNT(mock_d2h);
    memcpy(dst, src, n);
    return cudaSuccess;
}
static __thread float mock_want_seed; /* this rank's 1/M (or 1) */
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, enum cudaMemcpyKind k, cudaStream_t st)
{
    MOCK_STREAM_IS(st, "cudaMemcpyAsync");
    if (n == sizeof(float) && mock_where(dst, n) == 1 && mock_where(src, n) == 0) { /* the loss gradient's seed */
        MOCK_COUNT(mock_seeds);
        if (memcmp(src, &mock_want_seed, sizeof(float))) MOCK_COUNT(mock_bad_seeds);
    }
    return cudaMemcpy(dst, src, n, k);
}
cudaError_t cudaStreamSynchronize(cudaStream_t st)
{
    MOCK_COUNT(mock_calls);
    MOCK_COUNT(mock_syncs);
    MOCK_STREAM_IS(st, "cudaStreamSynchronize");
    return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* st, unsigned flags)
{
    MOCK_COUNT(mock_calls);
    VT_CHECK(flags == cudaStreamNonBlocking, "mock: a stream created with flags %u, not non-blocking", flags);
    *st = (cudaStream_t)calloc(1, sizeof(struct mock_stream));
    (*st)->flags = flags;
    MOCK_COUNT(mock_streams_live);
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t st)
{
    MOCK_COUNT(mock_calls);
    VT_CHECK(st && st != MOCK_COMPUTE, "mock: destroyed stream %p, not one the engine made", (void*)st);
    if (st && st != MOCK_COMPUTE) free(st);
    __atomic_sub_fetch(&mock_streams_live, 1, __ATOMIC_SEQ_CST);
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* ev, unsigned flags)
{
    MOCK_COUNT(mock_calls);
    VT_CHECK(flags == cudaEventDisableTiming, "mock: event flags %u", flags);
    *ev = (cudaEvent_t)calloc(1, sizeof(struct mock_event));
    MOCK_COUNT(mock_events_live);
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t st)
{
    MOCK_COUNT(mock_calls);
    MOCK_STREAM_IS(st, "cudaEventRecord");
    ev->recorded_on = st;
    ev->records++;
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t ev)
{
    (void)ev;
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    MOCK_COUNT(mock_calls);
    free(ev);
    __atomic_sub_fetch(&mock_events_live, 1, __ATOMIC_SEQ_CST);
    return cudaSuccess;
}
/* Pinned host memory (the engine's headers and loss): host memory here. */
cudaError_t cudaMallocHost(void** p, size_t n)
{
    MOCK_COUNT(mock_calls);
    *p = malloc(n ? n : 1);
    return *p ? cudaSuccess : cudaErrorInvalidValue;
}
cudaError_t cudaFreeHost(void* p)
{
    MOCK_COUNT(mock_calls);
    free(p);
    return cudaSuccess;
}
/* Stream-ordered allocation: the engine takes it only without device hooks (never here). */
cudaError_t cudaMallocAsync(void** p, size_t n, cudaStream_t st)
{
    (void)p, (void)n, (void)st;
    VT_CHECK(0, "mock: cudaMallocAsync with the device hooks set");
    return cudaErrorInvalidValue;
}
cudaError_t cudaFreeAsync(void* p, cudaStream_t st)
{
    (void)p, (void)st;
    VT_CHECK(0, "mock: cudaFreeAsync with the device hooks set");
    return cudaErrorInvalidValue;
}
/* The send stream waits for the packing on the compute stream. */
cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t ev, unsigned flags)
{
    MOCK_COUNT(mock_calls);
    VT_CHECK(st != MOCK_COMPUTE && st && st->flags == cudaStreamNonBlocking,
             "mock: the wait is on stream %p, not the engine's send stream", (void*)st);
    VT_CHECK(ev->records > 0 && ev->recorded_on == MOCK_COMPUTE && flags == 0,
             "mock: the send waits on an event not recorded on the compute stream");
    MOCK_COUNT(mock_fences);
    return cudaSuccess;
}

/* ---- the model -------------------------------------------------------------- */

enum { D = 6, NL = 7, NU = NL + 1, STEPS = 6, MAXP = 4 };

typedef struct layer {
    float w[D * D], b[D];
    float gw[D * D], gb[D];
} layer;

typedef struct model {
    layer l[NL];
    vs_pipe_unit units[NU];
    int dev;
    int step;
    long callbacks;
    long unit_hooks; // vs_pipe_desc.on_unit calls, each with the compute stream (NULL on the host path)
} model;

static vs_result unit_hook(void* user, const vs_pipe_hook_event* e)
{
    model* m = (model*)user;
    m->unit_hooks++;
    VT_CHECK(e->stream == (m->dev ? (void*)MOCK_COMPUTE : NULL), "unit hook at %s of unit %d: stream %p",
             vs_pipe_hook_point_name((vs_pipe_hook_point)e->point), e->unit, e->stream);
    return VS_OK;
}

static int rows(int mb) { return 2 + mb % 3; } /* shapes change with the microbatch */

/* A tensor the engine handed over: device memory on the device path, host memory else. */
static void check_mem(const model* m, const vs_pipe_call* c, const void* p, size_t bytes, const char* what)
{
    if (!p) return;
    int w = mock_where(p, bytes);
    VT_CHECK(w == (m->dev ? 1 : 0), "unit %d microbatch %d: %s (%zu bytes) is %s", c->unit, c->mb, what, bytes,
             w == 1 ? "device memory on the host path" : w == 0 ? "host memory on the device path" : "out of bounds");
}
static size_t tbytes(const vs_pipe_tensor* t)
{
    size_t n = vs_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
    return n;
}
static model* g_models[MAXP]; /* each rank's model, by stage (a callback finds it by its user pointer) */
static model* model_of(const vs_pipe_call* c)
{
    for (int i = 0; i < MAXP; i++) {
        model* m = g_models[i];
        if (m && (c->user == m || ((const char*)c->user >= (const char*)m->l && (const char*)c->user < (const char*)(m->l + NL))))
            return m;
    }
    return NULL;
}

static void check_tensors(const vs_pipe_call* c, int bwd)
{
    model* m = model_of(c);
    VT_CHECK(m != NULL, "a callback's user pointer is not a model's");
    if (!m) return;
    m->callbacks++;
    VT_CHECK(c->stream == (m->dev ? (void*)MOCK_COMPUTE : NULL), "unit %d: call->stream is %p", c->unit, c->stream);
    for (int i = 0; i < c->n_in; i++) {
        check_mem(m, c, c->in[i].data, tbytes(&c->in[i]), "in[].data");
        if (bwd) check_mem(m, c, c->in[i].grad, tbytes(&c->in[i]), "in[].grad");
    }
    for (int i = 0; i < c->n_out && bwd; i++) {
        check_mem(m, c, c->out[i].data, tbytes(&c->out[i]), "out[].data");
        check_mem(m, c, c->out[i].grad, tbytes(&c->out[i]), "out[].grad");
        VT_CHECK(c->out[i].grad != NULL, "unit %d: out[%d].grad is NULL in backward", c->unit, i);
    }
    if (bwd && c->saved) check_mem(m, c, c->saved, c->saved_bytes, "saved");
}

static float datum(int s, int mb, int i, int which) { return sinf(0.37f * (float)(s * 977 + mb * 131 + i) + (float)which); }

static vs_result load(vs_pipe_call* c)
{
    model* m = (model*)c->user;
    int target = !strcmp(c->out[0].name, "target");
    int64_t shape[2] = {rows(c->mb), D};
    float host[4 * D], *v;
    vs_result r = vs_pipe_output(c, 0, VS_F32, 2, shape, (void**)&v);
    if (r) return r;
    check_mem(m, c, v, (size_t)shape[0] * D * 4, "the data callback's output");
    VT_CHECK(c->stream == (m->dev ? (void*)MOCK_COMPUTE : NULL), "data: call->stream is %p", c->stream);
    for (int i = 0; i < shape[0] * D; i++) host[i] = target ? 0.5f * datum(m->step, c->mb, i, 1) : datum(m->step, c->mb, i, 0);
    if (m->dev) return cudaMemcpyAsync(v, host, sizeof(float) * (size_t)(shape[0] * D), cudaMemcpyDefault, (cudaStream_t)c->stream) ? VS_ERR_BACKEND : VS_OK; /* (the mock copies at once) */
    memcpy(v, host, sizeof(float) * (size_t)(shape[0] * D));
    return VS_OK;
}

/* y = tanh(x W + b [+ skip]); keeps 1 - y^2 with vs_pipe_save */
static vs_result layer_fwd(vs_pipe_call* c)
{
    const layer* l = (const layer*)c->user;
    check_tensors(c, 0);
    int R = (int)c->in[0].shape[0];
    const float* x = (const float*)c->in[0].data;
    const float* skip = c->n_in > 1 ? (const float*)c->in[1].data : NULL;
    int64_t shape[2] = {R, D};
    float *y, *dy;
    vs_result r = vs_pipe_output(c, 0, VS_F32, 2, shape, (void**)&y);
    if (!r) r = vs_pipe_save(c, sizeof(float) * (size_t)(R * D), (void**)&dy);
    if (r) return r;
    check_mem(model_of(c), c, y, sizeof(float) * (size_t)(R * D), "vs_pipe_output's buffer");
    check_mem(model_of(c), c, dy, sizeof(float) * (size_t)(R * D), "vs_pipe_save's buffer");
    for (int i = 0; i < R; i++)
        for (int j = 0; j < D; j++) {
            float a = l->b[j];
            for (int k = 0; k < D; k++) a += x[i * D + k] * l->w[k * D + j];
            if (skip) a += skip[i * D + j];
            y[i * D + j] = tanhf(a);
            dy[i * D + j] = 1.0f - y[i * D + j] * y[i * D + j];
        }
    return VS_OK;
}

static vs_result layer_bwd_input(vs_pipe_call* c)
{
    const layer* l = (const layer*)c->user;
    check_tensors(c, 1);
    int R = (int)c->in[0].shape[0];
    const float* dy = (const float*)c->saved;
    const float* go = (const float*)c->out[0].grad;
    float* gx = (float*)c->in[0].grad;
    float* gskip = c->n_in > 1 ? (float*)c->in[1].grad : NULL;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < D; j++) {
            float da = go[i * D + j] * dy[i * D + j];
            if (gx)
                for (int k = 0; k < D; k++) gx[i * D + k] += da * l->w[k * D + j];
            if (gskip) gskip[i * D + j] += da;
        }
    return VS_OK;
}

static vs_result layer_bwd_weight(vs_pipe_call* c)
{
    layer* l = (layer*)c->user;
    check_tensors(c, 1);
    int R = (int)c->in[0].shape[0];
    const float* x = (const float*)c->in[0].data;
    const float* dy = (const float*)c->saved;
    const float* go = (const float*)c->out[0].grad;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < D; j++) {
            float da = go[i * D + j] * dy[i * D + j];
            for (int k = 0; k < D; k++) l->gw[k * D + j] += da * x[i * D + k];
            l->gb[j] += da;
        }
    return VS_OK;
}

static vs_result loss_fwd(vs_pipe_call* c)
{
    check_tensors(c, 0);
    int n = (int)(c->in[0].shape[0] * D);
    const float* y = (const float*)c->in[0].data;
    const float* t = (const float*)c->in[1].data;
    float* loss;
    vs_result r = vs_pipe_output(c, 0, VS_F32, 0, NULL, (void**)&loss);
    if (r) return r;
    check_mem(model_of(c), c, loss, sizeof(float), "the loss");
    float s = 0;
    for (int i = 0; i < n; i++) s += (y[i] - t[i]) * (y[i] - t[i]);
    *loss = s / (float)n;
    return VS_OK;
}

static vs_result loss_bwd(vs_pipe_call* c)
{
    check_tensors(c, 1);
    int n = (int)(c->in[0].shape[0] * D);
    const float* y = (const float*)c->in[0].data;
    const float* t = (const float*)c->in[1].data;
    float g = *(const float*)c->out[0].grad;
    float* gy = (float*)c->in[0].grad;
    for (int i = 0; i < n; i++) gy[i] += g * 2.0f * (y[i] - t[i]) / (float)n;
    return VS_OK;
}

static void model_init(model* m)
{
    static const char* names[NU] = {"l0", "l1", "l2", "l3", "l4", "l5", "l6", "loss"};
    static const char* ins[NU] = {"x", "h0", "h1", "h2,h0", "h3", "h4", "h5", "h6,target"};
    static const char* outs[NU] = {"h0:f32[*,6]", "h1", "h2", "h3", "h4", "h5", "h6:f32[*,6]", "loss:f32[]"};
    memset(m, 0, sizeof *m);
    for (int u = 0; u < NU; u++) {
        vs_pipe_unit* un = &m->units[u];
        un->name = names[u];
        un->inputs = ins[u];
        un->outputs = outs[u];
        un->flops = 1;
        if (u < NL) {
            for (int i = 0; i < D * D; i++) m->l[u].w[i] = 0.5f * sinf((float)(u * 100 + i));
            for (int i = 0; i < D; i++) m->l[u].b[i] = 0.1f * cosf((float)(u * 10 + i));
            un->forward = layer_fwd;
            un->backward_input = layer_bwd_input;
            un->backward_weight = layer_bwd_weight;
            un->user = &m->l[u];
        } else {
            un->forward = loss_fwd;
            un->backward = loss_bwd;
            un->user = m;
        }
    }
}

/* ---- the runs --------------------------------------------------------------- */

typedef struct job {
    vs_pipe_kind kind;
    int P, M, dev;
    double loss[STEPS];
    double mb_loss[STEPS][8];
    float gw[NL][D * D], gb[NL][D]; /* each layer's gradient from the stage that holds it */
    float tied[MAXP][D];            /* the tied gradient on each stage after vs_pipe_tie_grads */
    long callbacks;
    int failed;
    long allocs0, allocs[3]; /* device allocations so far: before the first run, after it, before and after the last */
} job;

static pthread_mutex_t job_mu = PTHREAD_MUTEX_INITIALIZER;

static int train(vs_world* w, void* arg)
{
    job* jb = (job*)arg;
    int chunks = jb->kind == VS_PIPE_ZBV ? 2 : 1;
    model* m = (model*)calloc(1, sizeof *m);
    model_init(m);
    m->dev = jb->dev;
    g_models[vs_world_rank(w)] = m;
    mock_want_seed = 1.0f / (float)jb->M;
    vs_mesh* mesh = NULL;
    vs_pipe* pipe = NULL;
    vs_pipe_sched* sched = NULL;
    vs_pipe_plan plan;
    vs_result r = vs_mesh_init(w, &(vs_mesh_desc){.shape = {jb->P}, .dim_names = {"PP"}}, &mesh);
    if (!r)
        r = vs_pipe_split(m->units, NU,
                          &(vs_pipe_split_desc){.stages = jb->P, .chunks = chunks, .kind = VS_PIPE_SPLIT_UNIFORM,
                                                .placement = chunks == 2 ? VS_PIPE_PLACE_V : VS_PIPE_PLACE_LOOP},
                          &plan);
    if (!r)
        r = vs_pipe_init(&(vs_pipe_desc){.mesh = mesh, .units = m->units, .nunits = NU, .plan = &plan, .data = load,
                                         .data_user = m, .stream = (void*)MOCK_COMPUTE, .on_unit = unit_hook,
                                         .unit_user = m},
                         &pipe);
    if (!r) r = vs_pipe_generate(w, jb->kind, jb->P, chunks, jb->M, &sched);
    int stage = pipe ? vs_pipe_stage(pipe) : 0, last = plan.chunk_stage[plan.nchunks - 1];
    if (!r) r = vs_barrier(vs_world_comm(w), NULL);
    if (!r && vs_world_rank(w) == 0) jb->allocs0 = __atomic_load_n(&mock_allocs, __ATOMIC_SEQ_CST);
    if (!r) r = vs_barrier(vs_world_comm(w), NULL);
    for (int s = 0; s < STEPS && !r; s++) {
        m->step = s;
        double l = 0;
        r = vs_pipe_run(pipe, sched, &l); /* (every stage gets the same value; the last stage keeps it) */
        if (!r && stage == last) jb->loss[s] = l;
        for (int mb = 0; mb < jb->M && !r && stage == last; mb++) r = vs_pipe_mb_loss(pipe, mb, &jb->mb_loss[s][mb]);
        /* device allocations, every rank's, in the first run and in the last:
           the engine caches its blocks (cudaMalloc/cudaFree in the hot loop
           synchronise the device), so the last run makes next to none. (Not
           exactly none: how many sends are still in flight, each holding its
           buffer, depends on how fast the peers receive; a run may yet reach
           a new peak and add a block or two.) */
        if (s != 0 && s < STEPS - 2) continue;
        if (!r) r = vs_barrier(vs_world_comm(w), NULL);
        if (!r && vs_world_rank(w) == 0) jb->allocs[s == 0 ? 0 : s == STEPS - 2 ? 1 : 2] = __atomic_load_n(&mock_allocs, __ATOMIC_SEQ_CST);
        if (!r) r = vs_barrier(vs_world_comm(w), NULL);
    }
    size_t calls = 0; // every run made the unit hooks' calls its order lists
    if (!r) r = vs_pipe_hook_order(pipe, sched, NULL, 0, &calls);
    VT_CHECK(r || (calls > 0 && m->unit_hooks == STEPS * (long)calls), "stage %d: %ld unit hook calls in %d runs of %zu",
             stage, m->unit_hooks, STEPS, calls);
    /* a tied gradient between the first and the last chunk, in engine-side memory */
    float tg[D];
    for (int i = 0; i < D; i++) tg[i] = 0.1f * (float)(stage + 1) + 0.01f * (float)i;
    void* buf = m->dev ? vs_device_alloc(w, sizeof tg) : (void*)tg;
    if (!r && m->dev) r = cudaMemcpy(buf, tg, sizeof tg, cudaMemcpyDefault) ? VS_ERR_BACKEND : VS_OK;
    if (!r) r = vs_pipe_tie_grads(pipe, 0, plan.nchunks - 1, buf, D, VS_F32);
    if (!r && m->dev) r = cudaMemcpy(tg, buf, sizeof tg, cudaMemcpyDefault) ? VS_ERR_BACKEND : VS_OK;
    if (m->dev) vs_device_free(w, buf);
    pthread_mutex_lock(&job_mu);
    memcpy(jb->tied[stage], tg, sizeof tg);
    for (int k = 0; k < plan.nchunks; k++)
        for (int u = plan.first_unit[k]; u < plan.first_unit[k + 1] && u < NL; u++)
            if (plan.chunk_stage[k] == stage) {
                memcpy(jb->gw[u], m->l[u].gw, sizeof m->l[u].gw);
                memcpy(jb->gb[u], m->l[u].gb, sizeof m->l[u].gb);
            }
    jb->callbacks += m->callbacks;
    pthread_mutex_unlock(&job_mu);
    if (r) fprintf(stderr, "rank %d: %s\n", vs_world_rank(w), vs_last_error());
    vs_pipe_sched_free(sched);
    vs_pipe_free(pipe);
    vs_mesh_free(mesh);
    g_models[vs_world_rank(w)] = NULL;
    free(m);
    return r;
}

static vs_result launch(job* jb)
{
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = jb->P;
    ld.timeout_s = 60;
    ld.allocator.device_alloc = mock_dalloc;
    ld.allocator.device_free = mock_dfree;
    return vs_launch_ex(&ld, train, jb);
}

/* host run, device run: the same bits */
static void case_same(vs_pipe_kind kind, int P, int M)
{
    static job h, d;
    memset(&h, 0, sizeof h);
    h.kind = kind, h.P = P, h.M = M;
    d = h;
    d.dev = 1;
    long calls0 = mock_calls;
    mock_force_device = 0;
    VT_OK(launch(&h));
    VT_CHECK(mock_calls == calls0, "the host path called the CUDA runtime %ld times", mock_calls - calls0);
    long seeds0 = mock_seeds, bad0 = mock_bad_seeds, fences0 = mock_fences, d2d0 = mock_d2d;
    mock_force_device = 1;
    VT_OK(launch(&d));
    mock_force_device = 0;
    VT_CHECK(mock_live == 0, "%d device allocations leaked", mock_live);
    long first = d.allocs[0] - d.allocs0, last = d.allocs[2] - d.allocs[1];
    VT_CHECK(first > 0 && last * 20 <= first, "device allocations: %ld in the first run, %ld in run %d (a cache: at most 1/20)",
             first, last, STEPS);
    VT_CHECK(mock_streams_live == 0 && mock_events_live == 0, "%ld streams and %ld events left", mock_streams_live,
             mock_events_live);
    /* the seed (1/M) reaches each rank's device once, as it does not change
       between runs; each microbatch's seed is then a device-to-device copy */
    VT_CHECK(mock_seeds - seeds0 == (long)P && mock_bad_seeds == bad0,
             "%ld loss seeds copied from the host (want %d: one per rank), %ld of them not 1/M", mock_seeds - seeds0, P,
             mock_bad_seeds - bad0);
    VT_CHECK(mock_fences > fences0 && mock_d2d > d2d0, "sends ordered %ld, device copies %ld", mock_fences - fences0,
             mock_d2d - d2d0);
    VT_CHECK(h.callbacks > 0 && h.callbacks == d.callbacks, "callbacks: host %ld, device %ld", h.callbacks, d.callbacks);
    VT_CHECK(!memcmp(h.loss, d.loss, sizeof h.loss) && !memcmp(h.mb_loss, d.mb_loss, sizeof h.mb_loss),
             "losses differ: host %.9g device %.9g", h.loss[STEPS - 1], d.loss[STEPS - 1]);
    VT_CHECK(!memcmp(h.gw, d.gw, sizeof h.gw) && !memcmp(h.gb, d.gb, sizeof h.gb), "parameter gradients differ");
    VT_CHECK(!memcmp(h.tied, d.tied, sizeof h.tied), "tied gradients differ");
    int nz = 0;
    for (int u = 0; u < NL; u++)
        for (int i = 0; i < D; i++) nz += h.gb[u][i] != 0;
    VT_CHECK(nz > NL, "the gradients are (nearly) all zero: the comparison proves little");
}

/* ---- the models of test_pipe.c (pipe_models.h) ------------------------------ */

typedef struct mjob {
    int model, bf16, P, M;
    vs_pipe_kind kind;
    double loss;
    float mb_loss[PM_MAXM];
    float* g[PM_MAXU]; /* each unit's parameter gradient, from its stage */
    int npar[PM_MAXU];
    int bad;
} mjob;

static int model_rank(vs_world* w, void* arg)
{
    mjob* J = (mjob*)arg;
    const vs_dtype dt = J->bf16 ? VS_BF16 : VS_F32;
    pm_inst* E = pm_new(J->model, dt, PM_BK_BOTH);
    int V = J->kind == VS_PIPE_ZBV ? 2 : 1;
    vs_mesh* mesh = NULL;
    vs_pipe* pipe = NULL;
    vs_pipe_sched* sched = NULL;
    vs_pipe_plan plan;
    pm_data dd = {J->model, dt, 0};
    vs_result r = vs_mesh_init(w, &(vs_mesh_desc){.shape = {J->P}, .dim_names = {"PP"}}, &mesh);
    if (!r)
        r = vs_pipe_split(E->U, E->nu,
                          &(vs_pipe_split_desc){.stages = J->P, .chunks = V, .kind = VS_PIPE_SPLIT_UNIFORM,
                                                .placement = V == 2 ? VS_PIPE_PLACE_V : VS_PIPE_PLACE_LOOP},
                          &plan);
    E->plan = &plan;
    if (!r)
        r = vs_pipe_init(&(vs_pipe_desc){.mesh = mesh, .units = E->U, .nunits = E->nu, .plan = &plan,
                                         .data = pm_data_fn, .data_user = &dd, .stream = (void*)MOCK_COMPUTE},
                         &pipe);
    if (!r) r = vs_pipe_generate(w, J->kind, J->P, V, J->M, &sched);
    mock_want_seed = 1.0f / (float)J->M;
    double loss = 0;
    if (!r) r = vs_pipe_run(pipe, sched, &loss);
    int stage = pipe ? vs_pipe_stage(pipe) : 0;
    pthread_mutex_lock(&job_mu);
    J->loss = loss;
    J->bad += E->bad;
    for (int m = 0; m < J->M && !r && stage == plan.chunk_stage[plan.nchunks - 1]; m++) {
        double l;
        r = vs_pipe_mb_loss(pipe, m, &l);
        J->mb_loss[m] = (float)l;
    }
    for (int k = 0; k < plan.nchunks && !r; k++)
        for (int u = plan.first_unit[k]; u < plan.first_unit[k + 1]; u++)
            if (plan.chunk_stage[k] == stage) {
                J->npar[u] = E->L[u].npar;
                J->g[u] = (float*)malloc(sizeof(float) * (size_t)E->L[u].npar + 1);
                memcpy(J->g[u], E->L[u].g, sizeof(float) * (size_t)E->L[u].npar);
            }
    pthread_mutex_unlock(&job_mu);
    if (r) fprintf(stderr, "rank %d: %s\n", vs_world_rank(w), vs_last_error());
    vs_pipe_sched_free(sched);
    vs_pipe_free(pipe);
    vs_mesh_free(mesh);
    pm_free(E);
    return r;
}

static vs_result mlaunch(mjob* J)
{
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = J->P;
    ld.timeout_s = 60;
    ld.allocator.device_alloc = mock_dalloc;
    ld.allocator.device_free = mock_dfree;
    return vs_launch_ex(&ld, model_rank, J);
}

/* A model of test_pipe.c (skip connections, two inputs and outputs, variable
   rows, bf16 activations): host run, device run, the same bits. */
static void case_model(int model, int bf16, int P, vs_pipe_kind kind, int M)
{
    mjob h, d;
    memset(&h, 0, sizeof h);
    h.model = model, h.bf16 = bf16, h.P = P, h.kind = kind, h.M = M;
    d = h;
    long calls0 = mock_calls;
    mock_force_device = 0;
    VT_OK(mlaunch(&h));
    VT_CHECK(mock_calls == calls0, "the host path called the CUDA runtime");
    mock_force_device = 1;
    VT_OK(mlaunch(&d));
    mock_force_device = 0;
    VT_CHECK(mock_live == 0 && mock_streams_live == 0 && mock_events_live == 0, "device memory, streams or events left");
    VT_CHECK(h.bad == 0 && d.bad == 0, "contract violations in the callbacks: host %d, device %d", h.bad, d.bad);
    VT_CHECK(!memcmp(&h.loss, &d.loss, sizeof h.loss) && !memcmp(h.mb_loss, d.mb_loss, sizeof h.mb_loss),
             "losses differ: host %.9g device %.9g", h.loss, d.loss);
    /* and both are the single-device loop's bits */
    pm_inst* R = pm_new(model, bf16 ? VS_BF16 : VS_F32, PM_BK_FULL);
    double rl = 0;
    float mbl[PM_MAXM];
    pm_zero_grads(R);
    VT_CHECK(pm_ref_run(R, M, 0, 0, &rl, mbl) == 0, "the reference failed");
    VT_CHECK(!memcmp(&rl, &d.loss, sizeof rl) && !memcmp(mbl, d.mb_loss, sizeof(float) * (size_t)M),
             "the device run's loss %.9g, one device's %.9g", d.loss, rl);
    for (int u = 0; u < R->nu; u++)
        VT_CHECK(d.g[u] && !memcmp(d.g[u], R->L[u].g, sizeof(float) * (size_t)R->L[u].npar),
                 "unit %d: the device run's gradient differs from one device's", u);
    pm_free(R);
    for (int u = 0; u < PM_MAXU; u++) {
        VT_CHECK(h.npar[u] == d.npar[u] && (!h.npar[u] || (h.g[u] && d.g[u] && !memcmp(h.g[u], d.g[u], sizeof(float) * (size_t)h.npar[u]))),
                 "unit %d: parameter gradients differ", u);
        free(h.g[u]);
        free(d.g[u]);
    }
}

int main(void)
{
    static const vs_pipe_kind kinds[2] = {VS_PIPE_1F1B, VS_PIPE_ZBV};
    static const int Ps[2] = {2, 4}, Ms[2] = {1, 5};
    for (int k = 0; k < 2; k++)
        for (int p = 0; p < 2; p++)
            for (int i = 0; i < 2; i++) {
                char name[96];
                snprintf(name, sizeof name, "device path == host path: %s, %d stages, M = %d", vs_pipe_kind_name(kinds[k]),
                         Ps[p], Ms[i]);
                VT_CASE(name, case_same(kinds[k], Ps[p], Ms[i]));
            }
    for (int model = 0; model < PM_NMODELS; model++)
        for (int bf16 = 0; bf16 < 2; bf16++) {
            char name[96];
            snprintf(name, sizeof name, "device path == host path: model %s%s, zbv, 4 stages, M = 5",
                     pm_model_name[model], bf16 ? " (bf16)" : "");
            VT_CASE(name, case_model(model, bf16, 4, VS_PIPE_ZBV, 5));
        }
    return vt_summary();
}
