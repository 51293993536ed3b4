/* test_ddp_ext.c - DDP on the trainer's own memory (vs_ddp_param_desc.storage and
   grad_storage, ready_group, vs_ddp_wait_params; issue 22).

   The trainer here keeps its parameters as a plain-C GPT trainer does: all of
   them in one flat buffer, all gradients in another of the same layout, each
   tensor kind contiguous across layers (every layer's w1, then every layer's
   b1, ...). It registers them layer by layer as views with their own names, a
   ready group a layer, and marks each layer's gradients ready in reverse layer
   order (as a backward pass does). The reference is the same training with
   DDP's own memory (vs_ddp_param / vs_ddp_grad), itself checked against one
   rank in test_ddp.c: the parameters must agree bit for bit, since each element
   is reduced and stepped the same way whatever the buckets.

   Built twice: thread ranks with host memory (build/test_ddp_ext), and over the
   strict CUDA + NCCL stand-in with device memory (build/test_ddp_ext_strict).
   Written in the common subset of C and C++. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vescale_ddp.h"
#include "vescale_ckpt.h"
#include "vs_test.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef VS_STRICT
#include <cuda_runtime.h>
#include "strict/vs_strict.h"
#define DEV 1
#else
#define DEV 0
#endif
#include "ddp_common.h"

/* The model: L layers of K kinds; kind k of layer l has size[k] elements. */
#define L 6
#define K 4
static const int64_t kind_size[K] = {1536, 48, 1200, 40}; // w1 (2 pages of f32 and more), b1, w2, b2
static const char* kind_name[K] = {"w1", "b1", "w2", "b2"};
static int64_t total_elems(void)
{
    int64_t n = 0;
    for (int k = 0; k < K; k++) n += kind_size[k] * L;
    return n;
}
/* kind-major layout: offset of (kind, layer) in the flat buffers */
static int64_t flat_off(int k, int l)
{
    int64_t o = 0;
    for (int j = 0; j < k; j++) o += kind_size[j] * L;
    return o + kind_size[k] * l;
}

typedef struct cfg {
    int dp, zero, bf16, steps, ext;
    int staged;     // vs_ddp_desc.staged (ZeRO-0: copy into a staging buffer, else grouped in place)
    int read_stale; // the race: read the parameters after a step without vs_ddp_wait_params
    int group;      // mark each layer ready with vs_ddp_group_ready (ext only)
    int own_zero;   // vs_ddp_desc.trainer_zero_grad: the trainer zeroes its gradients (ext only)
    double* out;    // [total]: the final parameters as f64 (rank 0 writes)
    double* stale_sum; // read_stale: the sum read without the wait, and with it (two values)
    const char* save;  // a checkpoint of the DDP after the steps (vs_ckpt_save_ddp)
    const char* load;  // one loaded before them
} cfg;

static double init_val(int64_t i) { return 0.05 * sin(0.013 * (double)i + 0.4); }
/* the gradient of element i on rank r at step t, from the current value p */
static float grad_val(int64_t i, int r, int t, float p) { return (float)(0.1 * sin(0.37 * (double)i + 1.3 * r + 0.7 * t)) + 0.01f * p; }

static size_t esz(int bf16) { return bf16 ? 2 : 4; }
static float ld(const void* b, int bf16, int64_t i)
{
    return bf16 ? vs_bf16_to_f32(((const uint16_t*)b)[i]) : ((const float*)b)[i];
}
static void st(void* b, int bf16, int64_t i, float v)
{
    if (bf16)
        ((uint16_t*)b)[i] = vs_f32_to_bf16(v);
    else
        ((float*)b)[i] = v;
}

/* A 1-D mesh over the world and a DDP on it (ZeRO stage z, SGD). */
static vs_ddp* ddp_on(vs_mesh* mesh, vs_zero_stage z)
{
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = mesh;
    dd.zero = z;
    dd.optim.kind = VS_OPTIM_SGD;
    vs_ddp* d = NULL;
    VT_OK(vs_ddp_init(&dd, &d));
    return d;
}
static vs_ddp* open_ddp(vs_world* w, vs_zero_stage z, vs_mesh** mesh)
{
    *mesh = dc_mesh_1d(w);
    return ddp_on(*mesh, z);
}
/* The f32 parameter "w" of n elements (nothing else set). */
static vs_ddp_param_desc w_param(int64_t n)
{
    vs_ddp_param_desc pd;
    memset(&pd, 0, sizeof pd);
    pd.name = "w";
    pd.dtype = VS_F32;
    pd.ndim = 1;
    pd.shape[0] = n;
    return pd;
}

static int train_rank(vs_world* w, void* arg)
{
    const cfg* c = (const cfg*)arg;
    int me = vs_world_rank(w);
    int64_t T = total_elems();
    size_t ez = esz(c->bf16), gz = c->bf16 ? 2 : 4; // (grad_fp32 off: gradients in the parameter dtype)
    vs_mesh* mesh = dc_mesh_1d(w);
    vs_ckpt* ck = NULL;
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = mesh;
    dd.zero = (vs_zero_stage)c->zero;
    dd.bucket_bytes = 4096; // small: without ready groups a layer would span buckets
    dd.staged = c->staged;
    dd.trainer_zero_grad = c->own_zero;
    dd.optim.kind = VS_OPTIM_ADAMW;
    dd.optim.weight_decay = 0.01;
    vs_ddp* d = NULL;
    VT_OK(vs_ddp_init(&dd, &d));
    // the trainer's flat buffers, kind-major, and a host image of them
    void* hp = calloc((size_t)T, ez);
    void* hg = calloc((size_t)T, gz);
    for (int64_t i = 0; i < T; i++) st(hp, c->bf16, i, (float)init_val(i));
    void* P = c->ext ? dc_mem_alloc((size_t)T * ez) : NULL;
    void* G = c->ext ? dc_mem_alloc((size_t)T * gz) : NULL;
    if (c->ext) {
        dc_to_mem(P, hp, (size_t)T * ez);
        dc_to_mem(G, hg, (size_t)T * gz);
    }
    void* init = malloc((size_t)(kind_size[0] + 16) * ez);
    int idx[L][K];
    for (int l = 0; l < L; l++) // layer by layer: the order the forward uses them
        for (int k = 0; k < K; k++) {
            char name[32];
            snprintf(name, sizeof name, "h.%d.%s", l, kind_name[k]);
            vs_ddp_param_desc pd;
            memset(&pd, 0, sizeof pd);
            pd.name = name;
            pd.dtype = c->bf16 ? VS_BF16 : VS_F32;
            pd.ndim = 1;
            pd.shape[0] = kind_size[k];
            pd.no_decay = k % 2 == 1;
            if (c->ext) {
                pd.storage = (char*)P + (size_t)flat_off(k, l) * ez;
                pd.grad_storage = (char*)G + (size_t)flat_off(k, l) * gz;
                pd.ready_group = l + 1;
            } else {
                memcpy(init, (char*)hp + (size_t)flat_off(k, l) * ez, (size_t)kind_size[k] * ez);
                pd.data = init;
            }
            VT_OK(vs_ddp_add_param(d, &pd, &idx[l][k]));
        }
    free(init);
    VT_OK(vs_ddp_finalize(d));
    if (c->ext) { // ready groups: one bucket a layer, whatever bucket_bytes says
        for (int l = 0; l < L; l++)
            for (int k = 0; k < K; k++) {
                vs_ddp_param_info a, b;
                VT_OK(vs_ddp_query_param_info(d, idx[l][k], &a));
                VT_OK(vs_ddp_query_param_info(d, idx[l][0], &b));
                VT_CHECK(a.bucket == b.bucket, "h.%d.%s in bucket %d, h.%d.w1 in %d", l, kind_name[k], a.bucket, l, b.bucket);
                if (l > 0) {
                    VT_OK(vs_ddp_query_param_info(d, idx[l - 1][0], &b));
                    VT_CHECK(a.bucket != b.bucket, "layers %d and %d share bucket %d", l, l - 1, a.bucket);
                }
            }
        // zero copy: DDP holds neither parameters nor gradients (the staging pool only)
        vs_ddp_memory mu;
        VT_OK(vs_ddp_memory_usage(d, &mu));
        VT_CHECK(mu.params == 0, "DDP holds %zu parameter bytes of trainer-owned storage", mu.params);
        // gradients: the staging pool at most (two buffers of the largest layer: 1/3 of the model's
        // gradients here) and the ZeRO-1 accumulator; ZeRO-0 grouped in place (the default) none at all
        size_t layer = 0, model = (size_t)T * gz;
        for (int k = 0; k < K; k++) layer += (size_t)kind_size[k] * gz;
        size_t cap = !c->staged && !c->zero ? 0 : 2 * (layer + 64 * gz) + (c->zero ? (size_t)T * 4 / (size_t)c->dp + 4096 : 0);
        VT_CHECK(mu.grads <= cap, "DDP holds %zu gradient bytes (cap %zu; the model's gradients are %zu)", mu.grads, cap,
                 model);
    }
    if (c->load || c->save) {
        vs_ckpt_desc cd;
        memset(&cd, 0, sizeof cd);
        cd.mesh = mesh;
        VT_OK(vs_ckpt_init(&cd, &ck));
    }
    if (c->load) {
        VT_OK(vs_ckpt_load_ddp(ck, c->load, d, "", NULL, 0));
        VT_CHECK(vs_ddp_step_count(d) == 2, "step count %lld after the load, want 2", (long long)vs_ddp_step_count(d));
    }
    for (int t = 0; t < c->steps; t++) {
        // the gradients of this step, from the current parameters
        if (c->ext) {
            VT_OK(vs_ddp_wait_params(d));
            dc_from_mem(hp, P, (size_t)T * ez);
        } else {
            for (int l = 0; l < L; l++)
                for (int k = 0; k < K; k++) {
                    const void* p = vs_ddp_param(d, idx[l][k]);
                    VT_CHECK(p != NULL, "vs_ddp_param: %s", vs_last_error());
                    if (p) dc_from_mem((char*)hp + (size_t)flat_off(k, l) * ez, p, (size_t)kind_size[k] * ez);
                }
        }
        for (int64_t i = 0; i < T; i++) st(hg, c->bf16, i, grad_val(i, me, t, ld(hp, c->bf16, i)));
        for (int l = L - 1; l >= 0; l--) { // backward: the last layer's gradients first
            for (int k = 0; k < K; k++) {
                void* g = vs_ddp_grad(d, idx[l][k]);
                VT_CHECK(g != NULL, "vs_ddp_grad: %s", vs_last_error());
                if (c->ext) VT_CHECK(g == (char*)G + (size_t)flat_off(k, l) * gz, "vs_ddp_grad is not the trainer's");
                if (g) dc_to_mem(g, (char*)hg + (size_t)flat_off(k, l) * gz, (size_t)kind_size[k] * gz);
            }
            if (c->ext && c->group) // the layer in one call: no table of indices
                VT_OK(vs_ddp_group_ready(d, l + 1));
            else
                for (int k = 0; k < K; k++) VT_OK(vs_ddp_grad_ready(d, idx[l][k]));
        }
        VT_OK(vs_ddp_finish_grad_sync(d));
        if (c->ext && c->zero == 1 && c->own_zero && !c->bf16) {
            /* the step's one reduction of f32 gradients only reads them: each owned
               piece lands in DDP's accumulator itself (no copy in and no zeroing of
               it after, which cost a ZeRO-1 step 5-15% against DDP's own buckets) */
            void* now = malloc((size_t)T * gz);
            dc_from_mem(now, G, (size_t)T * gz);
            VT_CHECK(!memcmp(now, hg, (size_t)T * gz),
                     "rank %d step %d: the ZeRO-1 reduction wrote into the trainer's gradients (it should land in the "
                     "accumulator)", me, t);
            free(now);
        }
        if (c->ext && c->zero == 0) { // the trainer's gradient holds the average (a formula: no reference run)
            void* avg = malloc((size_t)T * gz);
            dc_from_mem(avg, G, (size_t)T * gz);
            int bad = 0;
            for (int64_t i = 0; i < T && bad < 3; i++) {
                double want = 0;
                for (int r = 0; r < c->dp; r++) want += grad_val(i, r, t, ld(hp, c->bf16, i));
                want /= c->dp;
                double got = ld(avg, c->bf16, i), tol = c->bf16 ? 1e-2 * fabs(want) + 1e-3 : 1e-6;
                if (fabs(got - want) > tol) {
                    VT_CHECK(0, "rank %d step %d: averaged gradient [%lld] = %.9g, want %.9g", me, t, (long long)i, got, want);
                    bad++;
                }
            }
            free(avg);
        }
        /* clipping: f32 only. With bf16 gradients the two differ where clipping
           scales, by design: DDP-owned ZeRO-1 scales its bf16 buffer in place
           (rounding again), trainer-owned storage scales the f32 accumulator */
        double norm = 0;
        VT_OK(vs_ddp_clip_grad_norm(d, c->bf16 ? 1e9 : 0.5, &norm));
        VT_CHECK(c->bf16 || norm > 0.5, "the clip did not scale (norm %g): the case tests nothing", norm);
        VT_OK(vs_ddp_step(d, 1e-2));
        if (c->own_zero) { // the trainer's own zero_grad
            memset(hg, 0, (size_t)T * gz);
            dc_to_mem(G, hg, (size_t)T * gz);
        }
    }
    if (c->ext && c->read_stale) { // the race of issue 22: an evaluation that reads its own pointers
        double before = 0, after = 0;
        dc_from_mem(hp, P, (size_t)T * ez);
        for (int64_t i = 0; i < T; i++) before += ld(hp, c->bf16, i);
        VT_OK(vs_ddp_wait_params(d));
        dc_from_mem(hp, P, (size_t)T * ez);
        for (int64_t i = 0; i < T; i++) after += ld(hp, c->bf16, i);
        if (me == 0) c->stale_sum[0] = before, c->stale_sum[1] = after;
    }
    VT_OK(vs_ddp_wait_params(d));
    if (c->save) VT_OK(vs_ckpt_save_ddp(ck, c->save, d, "", NULL, 0, NULL));
    if (ck) VT_OK(vs_ckpt_free(ck));
    if (me == 0 && c->out) {
        if (c->ext)
            dc_from_mem(hp, P, (size_t)T * ez);
        else
            for (int l = 0; l < L; l++)
                for (int k = 0; k < K; k++) {
                    const void* p = vs_ddp_param(d, idx[l][k]);
                    if (p) dc_from_mem((char*)hp + (size_t)flat_off(k, l) * ez, p, (size_t)kind_size[k] * ez);
                }
        for (int64_t i = 0; i < T; i++) c->out[i] = ld(hp, c->bf16, i);
    }
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    if (c->ext) {
        dc_mem_free(P);
        dc_mem_free(G);
    }
    free(hp);
    free(hg);
    return 0;
}

static vs_result launch(int n, int (*fn)(vs_world*, void*), void* arg)
{
    vs_launch_desc ld = dc_launch_desc(n);
    return vs_launch_ex(&ld, fn, arg);
}

/* trainer-owned storage equals DDP-owned memory bit for bit (staged: ZeRO-0's
   buckets copied into a staging buffer, else reduced in place, a call a
   parameter) */
static void case_equal_x(int dp, int zero, int bf16, int staged, int group, int own_zero)
{
    int64_t T = total_elems();
    double* a = (double*)calloc((size_t)T, sizeof(double));
    double* b = (double*)calloc((size_t)T, sizeof(double));
    cfg ce, co;
    memset(&ce, 0, sizeof ce);
    ce.dp = dp, ce.zero = zero, ce.bf16 = bf16, ce.steps = 3, ce.ext = 1, ce.out = a, ce.staged = staged;
    ce.group = group, ce.own_zero = own_zero;
    co = ce;
    co.ext = 0, co.out = b, co.group = co.own_zero = 0;
    VT_OK(launch(dp, train_rank, &ce));
    VT_OK(launch(dp, train_rank, &co));
    /* bit for bit, but NCCL sums more than two ranks in an order that depends on
       where an element lies in the buffer (its ring chunk), as the stand-in
       does: there, within 1e-6 */
    double tol = DEV && dp > 2 ? 1e-6 : 0;
    int64_t diff = 0, first = -1;
    for (int64_t i = 0; i < T; i++)
        if (tol ? fabs(a[i] - b[i]) > tol : memcmp(&a[i], &b[i], sizeof(double)) != 0) {
            if (first < 0) first = i;
            diff++;
        }
    VT_CHECK(diff == 0, "DP%d ZeRO-%d %s: %lld of %lld parameters differ from DDP-owned memory by more than %g (first [%lld]: %.9g vs %.9g)",
             dp, zero, bf16 ? "bf16" : "f32", (long long)diff, (long long)T, tol, (long long)first, first >= 0 ? a[first] : 0.0,
             first >= 0 ? b[first] : 0.0);
    double moved = 0;
    for (int64_t i = 0; i < T; i++) moved += fabs(a[i] - init_val(i));
    VT_CHECK(moved > 1e-3, "the parameters did not move (%g)", moved);
    free(a);
    free(b);
}

static void case_equal_s(int dp, int zero, int bf16, int staged) { case_equal_x(dp, zero, bf16, staged, 0, 0); }
static void case_equal(int dp, int zero, int bf16) { case_equal_s(dp, zero, bf16, 0); }

/* vs_ddp_group_ready's refusals: group 0, a group nobody declared, a group
   with a member marked already (none of it is marked then). */
static int rank_group_bad(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh* mesh = NULL;
    vs_ddp* d = open_ddp(w, VS_ZERO_0, &mesh);
    float* P = (float*)dc_mem_alloc(64 * sizeof(float)); // (device memory on NCCL)
    float* G = (float*)dc_mem_alloc(64 * sizeof(float));
    int idx[4];
    for (int i = 0; i < 4; i++) { // two groups of two: h.0.* in group 1, h.1.* in group 2
        char name[16];
        snprintf(name, sizeof name, "h.%d.%s", i / 2, i % 2 ? "b" : "w");
        vs_ddp_param_desc pd = w_param(16);
        pd.name = name;
        pd.storage = P + 16 * i, pd.grad_storage = G + 16 * i, pd.ready_group = 1 + i / 2;
        VT_OK(vs_ddp_add_param(d, &pd, &idx[i]));
    }
    vs_result r = vs_ddp_group_ready(d, 1);
    VT_CHECK(r == VS_ERR_STATE && strstr(vs_last_error(), "finalize"), "before finalize: %s", vs_last_error());
    VT_OK(vs_ddp_finalize(d));
    r = vs_ddp_group_ready(d, 0);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "group 0"), "group 0: %s", vs_last_error());
    r = vs_ddp_group_ready(d, 7);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "ready_group 7"), "an unknown group: %s", vs_last_error());
    VT_OK(vs_ddp_grad_ready(d, idx[3])); // h.1.b alone, then its group
    r = vs_ddp_group_ready(d, 2);
    VT_CHECK(r == VS_ERR_STATE && strstr(vs_last_error(), "'h.1.b'") && strstr(vs_last_error(), "twice"),
             "a member marked already: %s", vs_last_error());
    VT_OK(vs_ddp_grad_ready(d, idx[2])); // not marked by the refused call
    VT_OK(vs_ddp_group_ready(d, 1));
    VT_OK(vs_ddp_finish_grad_sync(d));
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    dc_mem_free(P);
    dc_mem_free(G);
    return 0;
}

/* vs_ddp_desc.world: a DP over every rank with no mesh. A ZeRO-1 SGD step on
   the trainer's storage gives p - lr x (the ranks' mean gradient), as on a 1-D
   mesh; the made mesh is the desc's (query), freed with the DDP; mesh and world
   both set are refused, neither too. */
static int rank_world(vs_world* w, void* arg)
{
    (void)arg;
    const int n = 64, R = vs_world_size(w), me = vs_world_rank(w);
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    vs_ddp* d = NULL;
    VT_ERR(vs_ddp_init(&dd, &d), VS_ERR_NULL, "no world");
    vs_mesh* mesh = NULL;
    vs_ddp* other = open_ddp(w, VS_ZERO_1, &mesh);
    dd.mesh = mesh, dd.world = w;
    VT_ERR(vs_ddp_init(&dd, &d), VS_ERR_INVALID, "both set");
    VT_OK(vs_ddp_free(other));
    VT_OK(vs_mesh_free(mesh));
    dd.mesh = NULL, dd.zero = VS_ZERO_1, dd.optim.kind = VS_OPTIM_SGD;
    VT_OK(vs_ddp_init(&dd, &d));
    float h[64];
    float* P = (float*)dc_mem_alloc((size_t)n * sizeof(float)); // (device memory on NCCL)
    float* G = (float*)dc_mem_alloc((size_t)n * sizeof(float));
    for (int i = 0; i < n; i++) h[i] = 0.01f * (float)i;
    dc_to_mem(P, h, sizeof h);
    vs_ddp_param_desc pd = w_param(n);
    pd.storage = P, pd.grad_storage = G;
    VT_OK(vs_ddp_add_param(d, &pd, NULL));
    VT_OK(vs_ddp_finalize(d));
    for (int i = 0; i < n; i++) h[i] = 0.25f * (float)(i + me);
    dc_to_mem(G, h, sizeof h);
    VT_OK(vs_ddp_grad_ready(d, 0));
    VT_OK(vs_ddp_finish_grad_sync(d));
    VT_OK(vs_ddp_step(d, 0.5));
    VT_OK(vs_ddp_wait_params(d));
    VT_OK(vs_ddp_synchronize(d));
    dc_from_mem(h, P, sizeof h);
    int bad = 0;
    for (int i = 0; i < n; i++) { // the mean of 0.25 (i + r) over r < R: 0.25 (i + (R - 1) / 2)
        double want = 0.01 * i - 0.5 * 0.25 * (i + 0.5 * (R - 1));
        if (fabs(h[i] - want) > 1e-5) bad++;
    }
    VT_CHECK(bad == 0, "rank %d: %d of %d parameters are not p - lr x mean gradient after the step", me, bad, n);
    vs_ddp_desc q;
    memset(&q, 0, sizeof q);
    VT_OK(vs_ddp_query_desc(d, &q));
    VT_CHECK(q.mesh && !q.world && vs_mesh_ndims(q.mesh) == 1 && vs_mesh_size(q.mesh, vs_mesh_dim_name(q.mesh, 0)) == R,
             "query: mesh %p (%d dims), world %p", (void*)q.mesh, q.mesh ? vs_mesh_ndims(q.mesh) : -1, (void*)q.world);
    VT_OK(vs_ddp_free(d)); // and its mesh
    dc_mem_free(P);
    dc_mem_free(G);
    return 0;
}

#if !DEV
/* Zero copy, shown by the allocator hooks: what DDP allocates for a model in
   the trainer's memory (ZeRO-0, SGD without momentum: no optimizer state)
   against the same model in DDP's memory. Allocations of 16 KiB and more are
   counted (bookkeeping is smaller). */
typedef struct big_allocs {
    long total, largest;
} big_allocs;
static void* count_alloc(size_t n, void* user)
{
    big_allocs* b = (big_allocs*)user;
    if (n >= 16384) {
        __atomic_add_fetch(&b->total, (long)n, __ATOMIC_SEQ_CST);
        long cur = __atomic_load_n(&b->largest, __ATOMIC_SEQ_CST);
        while ((long)n > cur && !__atomic_compare_exchange_n(&b->largest, &cur, (long)n, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
        }
    }
    return malloc(n);
}
static void count_free(void* p, void* user)
{
    (void)user;
    free(p);
}
static int rank_alloc(vs_world* w, void* arg)
{
    int ext = *(const int*)arg;
    int64_t T = total_elems();
    vs_mesh* mesh = NULL;
    vs_ddp* d = open_ddp(w, VS_ZERO_0, &mesh);
    float* P = (float*)calloc((size_t)T, sizeof(float));
    float* G = (float*)calloc((size_t)T, sizeof(float));
    for (int l = 0; l < L; l++)
        for (int k = 0; k < K; k++) {
            char name[32];
            snprintf(name, sizeof name, "h.%d.%s", l, kind_name[k]);
            vs_ddp_param_desc pd;
            memset(&pd, 0, sizeof pd);
            pd.name = name;
            pd.dtype = VS_F32;
            pd.ndim = 1;
            pd.shape[0] = kind_size[k];
            if (ext) pd.storage = P + flat_off(k, l), pd.grad_storage = G + flat_off(k, l), pd.ready_group = l + 1;
            VT_OK(vs_ddp_add_param(d, &pd, NULL));
        }
    VT_OK(vs_ddp_finalize(d));
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    free(P);
    free(G);
    return 0;
}
static void case_alloc(void)
{
    big_allocs got[2];
    memset(got, 0, sizeof got);
    for (int ext = 0; ext < 2; ext++) {
        vs_launch_desc ld;
        memset(&ld, 0, sizeof ld);
        ld.nranks = 2;
        ld.allocator.alloc = count_alloc;
        ld.allocator.free = count_free;
        ld.allocator.user = &got[ext];
        VT_OK(vs_launch_ex(&ld, rank_alloc, &ext));
    }
    long model = (long)total_elems() * 4 * 2, layer = 0; // two ranks' parameters
    for (int k = 0; k < K; k++) layer += (long)kind_size[k] * 4;
    printf("    allocations >= 16 KiB, 2 ranks: DDP's memory %ld bytes (largest %ld), the trainer's %ld (largest %ld); "
           "the parameters are %ld bytes\n", got[0].total, got[0].largest, got[1].total, got[1].largest, model);
    VT_CHECK(got[0].total >= 2 * model, "DDP's own memory: %ld bytes, want at least the parameters and gradients %ld",
             got[0].total, 2 * model);
    VT_CHECK(got[1].largest <= layer + 4096, "trainer-owned: an allocation of %ld bytes, more than a layer (%ld)",
             got[1].largest, layer);
    VT_CHECK(got[1].total <= model / 2, "trainer-owned: %ld bytes allocated, the parameters are %ld", got[1].total, model);
}

/* A checkpoint of trainer-owned storage (ZeRO-1, DP2) names each parameter:
   DDP's own memory on DP4 under ZeRO-0 loads it, and trainer-owned storage on
   DP4 under ZeRO-1, parameters bit for bit. */
static void case_ckpt(void)
{
    int64_t T = total_elems();
    double* a = (double*)calloc((size_t)T, sizeof(double));
    double* b = (double*)calloc((size_t)T, sizeof(double));
    char dir[] = "/tmp/vs_ddp_ext_XXXXXX", path[96];
    VT_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/ck", dir);
    cfg c;
    memset(&c, 0, sizeof c);
    c.dp = 2, c.zero = 1, c.steps = 2, c.ext = 1, c.out = a, c.save = path;
    VT_OK(vs_launch(2, train_rank, &c));
    cfg l;
    memset(&l, 0, sizeof l);
    l.dp = 4, l.zero = 0, l.steps = 0, l.ext = 0, l.out = b, l.load = path;
    VT_OK(vs_launch(4, train_rank, &l));
    int64_t diff = 0;
    for (int64_t i = 0; i < T; i++) diff += memcmp(&a[i], &b[i], sizeof(double)) != 0;
    VT_CHECK(diff == 0, "%lld of %lld parameters differ after the load", (long long)diff, (long long)T);
    // and into trainer-owned storage again, ZeRO-1 on DP4 (masters and moments from the file)
    memset(b, 0, sizeof(double) * (size_t)T);
    l.zero = 1, l.ext = 1;
    VT_OK(vs_launch(4, train_rank, &l));
    diff = 0;
    for (int64_t i = 0; i < T; i++) diff += memcmp(&a[i], &b[i], sizeof(double)) != 0;
    VT_CHECK(diff == 0, "%lld of %lld parameters differ after the load into trainer-owned storage", (long long)diff,
             (long long)T);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    VT_CHECK(system(cmd) == 0, "%s", cmd);
    free(a);
    free(b);
}

/* Bad input: the storage rules. */
static int rank_bad(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh* mesh = NULL;
    vs_ddp* d = open_ddp(w, VS_ZERO_0, &mesh);
    float buf[64], gbuf[64];
    for (int z = 0; z < 3; z++) {
        if (z) d = ddp_on(mesh, (vs_zero_stage)z);
        vs_ddp_param_desc pd = w_param(16);
        pd.storage = buf;
        vs_result r = vs_ddp_add_param(d, &pd, NULL);
        VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "'w'") && strstr(vs_last_error(), "grad_storage is NULL"),
                 "storage alone: %s", vs_last_error());
        pd.grad_storage = gbuf;
        pd.data = buf;
        r = vs_ddp_add_param(d, &pd, NULL);
        VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "data and storage"), "data + storage: %s", vs_last_error());
        pd.data = NULL;
        pd.storage = (char*)buf + 2;
        r = vs_ddp_add_param(d, &pd, NULL);
        VT_CHECK(z == 2 || (r == VS_ERR_INVALID && strstr(vs_last_error(), "not aligned")), "misaligned: %s", vs_last_error());
        pd.storage = buf;
        r = vs_ddp_add_param(d, &pd, NULL);
        if (z == 2)
            VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "ZeRO-2") && strstr(vs_last_error(), "ZeRO-1"),
                     "ZeRO-2: %s", vs_last_error());
        else
            VT_OK(r);
        VT_OK(vs_ddp_free(d));
    }
    // ranks that disagree on trainer-owned storage: a mismatch naming it, not a hang
    d = ddp_on(mesh, VS_ZERO_0);
    vs_ddp_param_desc pd = w_param(16);
    if (vs_world_rank(w) == 1) pd.storage = buf, pd.grad_storage = gbuf;
    VT_OK(vs_ddp_add_param(d, &pd, NULL));
    vs_result r = vs_ddp_finalize(d);
    VT_CHECK(r == VS_ERR_MISMATCH && strstr(vs_last_error(), "storage"), "disagreeing storage: %s", vs_last_error());
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

/* VESCALE_DEBUG=params: a read before vs_ddp_wait_params faults naming the
   parameter; with the wait the same program runs clean. In a child process. */
static int rank_debug(vs_world* w, void* arg)
{
    const int* mode = (const int*)arg; // [0] wait, [1] trainer-owned storage (else a kept vs_ddp_param pointer)
    int wait = mode[0], ext = mode[1], me = vs_world_rank(w);
    vs_mesh* mesh = NULL;
    vs_ddp* d = open_ddp(w, VS_ZERO_1, &mesh);
    enum { N = 8192 }; // 32 KiB: whole pages outside each rank's half
    float* P = (float*)dc_mem_alloc(N * sizeof(float));
    float* G = (float*)dc_mem_alloc(N * sizeof(float));
    for (int i = 0; i < N; i++) P[i] = 1.0f, G[i] = 0;
    vs_ddp_param_desc pd;
    memset(&pd, 0, sizeof pd);
    pd.name = "h.0.attn.qkv.weight";
    pd.dtype = VS_F32;
    pd.ndim = 1;
    pd.shape[0] = N;
    if (ext)
        pd.storage = P, pd.grad_storage = G;
    else
        pd.data = P;
    int i0 = -1;
    VT_OK(vs_ddp_add_param(d, &pd, &i0));
    VT_OK(vs_ddp_finalize(d));
    float* g = (float*)vs_ddp_grad(d, i0);
    for (int i = 0; g && i < N; i++) g[i] = 1.0f;
    float* kept = ext ? P : (float*)vs_ddp_param(d, i0); // the pointer a trainer keeps
    VT_CHECK(kept != NULL, "vs_ddp_param: %s", vs_last_error());
    VT_OK(vs_ddp_grad_ready(d, i0));
    VT_OK(vs_ddp_finish_grad_sync(d));
    VT_OK(vs_ddp_step(d, 0.5));
    if (wait) VT_OK(vs_ddp_wait_params(d));
    volatile float s = 0;
    int far = me == 0 ? N * 3 / 4 : N / 4; // mid-way in the other rank's half (only whole pages are guarded)
    s += kept[far];
    if (wait) VT_CHECK(s == 0.5f, "rank %d: P[%d] = %g after the wait, want 0.5", me, far, (double)s);
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    dc_mem_free(P);
    dc_mem_free(G);
    return 0;
}

/* Runs fn on 2 thread ranks in a child process; its exit status and stderr. */
static int in_child(int (*fn)(vs_world*, void*), void* arg, const char* debug, char* out, size_t cap)
{
    int pfd[2];
    if (pipe(pfd) != 0) return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 2);
        close(pfd[0]);
        if (debug) setenv("VESCALE_DEBUG", debug, 1);
        int before = vt_failures;
        vs_result r = vs_launch(2, fn, arg);
        _exit(r == VS_OK && vt_failures == before ? 0 : 3);
    }
    close(pfd[1]);
    size_t n = 0;
    ssize_t got;
    while (n + 1 < cap && (got = read(pfd[0], out + n, cap - 1 - n)) > 0) n += (size_t)got;
    out[n] = 0;
    close(pfd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}
static void case_debug(int ext)
{
    for (int wait = 0; wait < 2; wait++) {
        int mode[2] = {wait, ext};
        char out[8192];
        int status = in_child(rank_debug, mode, "params", out, sizeof out);
        if (wait)
            VT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "with the wait the child failed (status %d): %s",
                     status, out);
        else
            VT_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV &&
                         strstr(out, "read parameter 'h.0.attn.qkv.weight'") && strstr(out, "vs_ddp_wait_params"),
                     "a read before the wait: status %d (signal %d), stderr: %s", status,
                     WIFSIGNALED(status) ? WTERMSIG(status) : 0, out);
    }
}
#endif

#if !DEV
/* Every layer's parameters as views into the flat P and G, each layer its
   ready group (l + 1); then finalize. */
static void add_flat_params(vs_ddp* d, float* P, float* G)
{
    for (int l = 0; l < L; l++)
        for (int k = 0; k < K; k++) {
            char name[32];
            snprintf(name, sizeof name, "h.%d.%s", l, kind_name[k]);
            vs_ddp_param_desc pd = w_param(kind_size[k]);
            pd.name = name;
            pd.storage = P + flat_off(k, l), pd.grad_storage = G + flat_off(k, l), pd.ready_group = l + 1;
            VT_OK(vs_ddp_add_param(d, &pd, NULL));
        }
    VT_OK(vs_ddp_finalize(d));
}

/* The log, captured: every message at warn and at debug, one a line. */
typedef struct logcap {
    pthread_mutex_t mu;
    char text[16384];
    size_t n;
} logcap;
static void cap_log(vs_log_level level, const char* msg, void* user)
{
    logcap* c = (logcap*)user;
    if (level != VS_LOG_WARN && level != VS_LOG_DEBUG) return;
    pthread_mutex_lock(&c->mu);
    int w = snprintf(c->text + c->n, sizeof c->text - c->n, "%s %s\n", level == VS_LOG_WARN ? "W" : "D", msg);
    if (w > 0) c->n = c->n + (size_t)w < sizeof c->text ? c->n + (size_t)w : sizeof c->text - 1;
    pthread_mutex_unlock(&c->mu);
}
static int count_in(const char* s, const char* what)
{
    int n = 0;
    for (const char* p = s; (p = strstr(p, what)); p++) n++;
    return n;
}

/* A tied embedding registered with the layers in forward order and marked
   ready where its gradient is first made (the LM head, at the backward's
   start): its bucket is the last, so it completes while every other is open. */
static int rank_order(vs_world* w, void* arg)
{
    int tied_first = *(const int*)arg; // 1: the embedding's readiness comes first (out of order)
    vs_mesh* mesh = NULL;
    vs_ddp* d = open_ddp(w, VS_ZERO_0, &mesh);
    static const char* names[3] = {"wte", "h.0.w", "h.1.w"}; // forward order: one bucket each (ready groups)
    float* P = (float*)calloc(3 * 64, sizeof(float));
    float* G = (float*)calloc(3 * 64, sizeof(float));
    int idx[3];
    for (int i = 0; i < 3; i++) {
        vs_ddp_param_desc pd = w_param(64);
        pd.name = names[i];
        pd.storage = P + 64 * i, pd.grad_storage = G + 64 * i, pd.ready_group = i + 1;
        VT_OK(vs_ddp_add_param(d, &pd, &idx[i]));
    }
    VT_OK(vs_ddp_finalize(d));
    for (int step = 0; step < 2; step++) { // twice: the warning is said once
        for (int i = 0; i < 3 * 64; i++) G[i] = (float)(i % 5 + vs_world_rank(w));
        if (tied_first) VT_OK(vs_ddp_grad_ready(d, idx[0]));
        VT_OK(vs_ddp_group_ready(d, 3));
        VT_OK(vs_ddp_group_ready(d, 2));
        if (!tied_first) VT_OK(vs_ddp_grad_ready(d, idx[0]));
        VT_OK(vs_ddp_finish_grad_sync(d));
        for (int i = 0; i < 3 * 64; i++) VT_CHECK(G[i] == (float)(i % 5) + 0.5f, "G[%d] = %g", i, (double)G[i]);
        VT_OK(vs_ddp_zero_grad(d));
    }
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    free(P);
    free(G);
    return 0;
}
static void case_order(void)
{
    for (int tied_first = 0; tied_first < 2; tied_first++) {
        static logcap cap;
        memset(&cap, 0, sizeof cap);
        pthread_mutex_init(&cap.mu, NULL);
        vs_launch_desc ld;
        memset(&ld, 0, sizeof ld);
        ld.nranks = 2;
        ld.logger.fn = cap_log;
        ld.logger.user = &cap;
        ld.log_level = VS_LOG_DEBUG;
        VT_OK(vs_launch_ex(&ld, rank_order, &tied_first));
        int warns = count_in(cap.text, "out of registration order");
        if (tied_first)
            VT_CHECK(warns == 2 && count_in(cap.text, "'wte' completes bucket 2") == 2 &&
                         count_in(cap.text, "whose 'h.1.w' is not ready") == 2,
                     "want one warning a rank naming 'wte' and 'h.1.w', got %d:\n%s", warns, cap.text);
        else
            VT_CHECK(warns == 0, "in order, yet warned:\n%s", cap.text);
        // debug: each bucket's launch with its tensors, 3 buckets x 2 steps x 2 ranks
        VT_CHECK(count_in(cap.text, "launches its all-reduce") == 12 &&
                     count_in(cap.text, "bucket 0 of 3 launches its all-reduce (64 elements, 1 tensors): 'h.1.w'") == 4 &&
                     count_in(cap.text, "bucket 2 of 3 launches its all-reduce (64 elements, 1 tensors): 'wte'") == 4,
                 "the debug log of launches:\n%s", cap.text);
        pthread_mutex_destroy(&cap.mu);
    }
}

/* Who zeroes the trainer's gradients, once: after the reduction (ZeRO-1) or
   in vs_ddp_zero_grad (ZeRO-0) by DDP, or by the trainer alone
   (trainer_zero_grad). The gradient buffer is made read-only from the moment
   DDP must have stopped writing it: a write faults. In a child process. */
static int rank_zero(vs_world* w, void* arg)
{
    const int* mode = (const int*)arg; // [0] ZeRO stage, [1] trainer_zero_grad
    int zero = mode[0], own = mode[1], me = vs_world_rank(w);
    int64_t T = total_elems();
    size_t bytes = ((size_t)T * 4 + 4095) / 4096 * 4096;
    vs_mesh* mesh = dc_mesh_1d(w);
    vs_ddp* d = NULL;
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = mesh;
    dd.zero = (vs_zero_stage)zero;
    dd.optim.kind = VS_OPTIM_SGD;
    dd.trainer_zero_grad = own;
    VT_OK(vs_ddp_init(&dd, &d));
    float* P = (float*)dc_mem_alloc(bytes);
    float* G = (float*)dc_mem_alloc(bytes);
    for (int64_t i = 0; i < T; i++) P[i] = (float)init_val(i), G[i] = 0;
    add_flat_params(d, P, G);
    for (int t = 0; t < 3; t++) {
        if (own) memset(G, 0, (size_t)T * 4); // the trainer's zero_grad
        // after a step the gradients are zero already (DDP or the trainer just did it): no second time
        if (t > 0) VT_CHECK(mprotect(G, bytes, PROT_READ) == 0, "mprotect");
        VT_OK(vs_ddp_zero_grad(d));
        VT_OK(vs_ddp_wait_params(d));
        VT_CHECK(mprotect(G, bytes, PROT_READ | PROT_WRITE) == 0, "mprotect");
        for (int64_t i = 0; i < T; i++) G[i] += grad_val(i, me, t, P[i]);
        for (int l = L - 1; l >= 0; l--) VT_OK(vs_ddp_group_ready(d, l + 1));
        VT_OK(vs_ddp_finish_grad_sync(d));
        int64_t nonzero = 0;
        for (int64_t i = 0; i < T; i++) nonzero += G[i] != 0;
        if (zero == 1 && !own) // DDP's one zeroing: right after the reduction took the values
            VT_CHECK(nonzero == 0, "ZeRO-1: %lld gradients not zeroed after the reduction", (long long)nonzero);
        else
            VT_CHECK(nonzero > T / 2, "ZeRO-%d%s: only %lld of %lld gradients are nonzero after the reduction", zero,
                     own ? ", the trainer zeroes" : "", (long long)nonzero, (long long)T);
        double norm = 0;
        VT_OK(vs_ddp_clip_grad_norm(d, 1e9, &norm)); // (measures only: no write)
        VT_CHECK(mprotect(G, bytes, PROT_READ) == 0, "mprotect");
        VT_OK(vs_ddp_step(d, 1e-2)); // from here on DDP writes no gradient (a write faults)
        VT_OK(vs_ddp_wait_params(d));
        if (zero == 0 && !own) VT_CHECK(mprotect(G, bytes, PROT_READ | PROT_WRITE) == 0, "mprotect"); // its one zeroing is next
        VT_OK(vs_ddp_zero_grad(d));
        VT_CHECK(mprotect(G, bytes, PROT_READ | PROT_WRITE) == 0, "mprotect");
        nonzero = 0;
        for (int64_t i = 0; i < T; i++) nonzero += G[i] != 0;
        VT_CHECK(own ? nonzero > T / 2 : nonzero == 0, "after vs_ddp_zero_grad %lld gradients are nonzero%s",
                 (long long)nonzero, own ? " (the trainer's to zero: DDP left them)" : "");
    }
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    dc_mem_free(P);
    dc_mem_free(G);
    return 0;
}
static void case_zero(int zero, int own)
{
    int mode[2] = {zero, own};
    char out[8192];
    int status = in_child(rank_zero, mode, NULL, out, sizeof out);
    VT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "ZeRO-%d%s: the child failed (status %d%s): %s", zero,
             own ? ", trainer_zero_grad" : "", status,
             WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV ? ", SIGSEGV: DDP wrote the read-only gradients" : "", out);
}

/* vs_ddp_param_desc.layers: each kind registered once for its L layers, kind after
   kind (llm.c's order), against every layer's views registered layer after layer
   (add_flat_params): the same buckets (a layer each, the same members), the same
   names, and the same parameters bit for bit after three steps on DP2, ZeRO-0 and 1. */
static int rank_layers(vs_world* w, void* arg)
{
    int zero = *(const int*)arg, me = vs_world_rank(w);
    int64_t T = total_elems();
    vs_mesh* mesh = dc_mesh_1d(w);
    vs_ddp* d[2] = {NULL, NULL}; // [0] a view a call, [1] a kind a call
    float *P[2], *G[2];
    for (int v = 0; v < 2; v++) {
        vs_ddp_desc dd;
        memset(&dd, 0, sizeof dd);
        dd.mesh = mesh;
        dd.zero = (vs_zero_stage)zero;
        dd.optim.kind = VS_OPTIM_ADAMW;
        VT_OK(vs_ddp_init(&dd, &d[v]));
        P[v] = (float*)dc_mem_alloc((size_t)T * 4), G[v] = (float*)dc_mem_alloc((size_t)T * 4);
        for (int64_t i = 0; i < T; i++) P[v][i] = (float)init_val(i), G[v][i] = 0;
    }
    add_flat_params(d[0], P[0], G[0]);
    for (int k = 0; k < K; k++) {
        char name[32];
        snprintf(name, sizeof name, "h.%%d.%s", kind_name[k]);
        vs_ddp_param_desc pd = w_param(kind_size[k]);
        pd.name = name;
        pd.storage = P[1] + flat_off(k, 0), pd.grad_storage = G[1] + flat_off(k, 0);
        pd.ready_group = 1, pd.layers = L;
        int first = -1;
        VT_OK(vs_ddp_add_param(d[1], &pd, &first));
        VT_CHECK(first == k * L, "kind %d: first index %d, want %d", k, first, k * L);
    }
    VT_OK(vs_ddp_finalize(d[1]));
    VT_CHECK(d[0]->nbuckets == L && d[1]->nbuckets == L, "buckets: %d and %d, want %d (a layer each)", d[0]->nbuckets,
             d[1]->nbuckets, L);
    for (int b = 0; b < d[0]->nbuckets && b < d[1]->nbuckets; b++) { // the same members, the same order
        const _vs_dbucket *ka = &d[0]->buckets[b], *kb = &d[1]->buckets[b];
        VT_CHECK(ka->last - ka->first == kb->last - kb->first && ka->numel == kb->numel,
                 "bucket %d: %d and %d parameters", b, ka->last - ka->first, kb->last - kb->first);
        for (int j = 0; j < ka->last - ka->first && j < kb->last - kb->first; j++) {
            const _vs_dparam* qa = &d[0]->params[d[0]->order[ka->first + j]];
            const _vs_dparam* qb = &d[1]->params[d[1]->order[kb->first + j]];
            VT_CHECK(!strcmp(qa->name, qb->name) && qa->offset == qb->offset, "bucket %d, place %d: '%s' at %lld and '%s' at %lld",
                     b, j, qa->name, (long long)qa->offset, qb->name, (long long)qb->offset);
        }
    }
    vs_ddp_param_info pi;
    VT_OK(vs_ddp_query_param_info(d[1], 2 * L + 3, &pi));
    VT_CHECK(!strcmp(pi.name, "h.3.w2"), "parameter %d is '%s', want h.3.w2", 2 * L + 3, pi.name);
    for (int t = 0; t < 3; t++)
        for (int v = 0; v < 2; v++) {
            VT_OK(vs_ddp_zero_grad(d[v]));
            VT_OK(vs_ddp_wait_params(d[v]));
            for (int64_t i = 0; i < T; i++) G[v][i] += (float)grad_val(i, me, t, P[v][i]);
            for (int l = L - 1; l >= 0; l--) VT_OK(vs_ddp_group_ready(d[v], l + 1));
            VT_OK(vs_ddp_finish_grad_sync(d[v]));
            VT_OK(vs_ddp_step(d[v], 1e-2));
            VT_OK(vs_ddp_wait_params(d[v]));
        }
    int64_t differ = 0;
    for (int64_t i = 0; i < T; i++) differ += memcmp(&P[0][i], &P[1][i], 4) != 0;
    VT_CHECK(differ == 0, "ZeRO-%d: %lld of %lld parameters differ between the two registrations", zero, (long long)differ,
             (long long)T);
    for (int v = 0; v < 2; v++) {
        VT_OK(vs_ddp_free(d[v]));
        dc_mem_free(P[v]), dc_mem_free(G[v]);
    }
    VT_OK(vs_mesh_free(mesh));
    return 0;
}
static void case_layers(int zero)
{
    VT_OK(vs_launch(2, rank_layers, &zero));
}

/* vs_ddp_param_desc.layers refused: a name without one %d (or with another %), layers
   out of range, ready_group overflowing; and a failure at layer 2 (a name taken)
   registers none of them. */
static int rank_layers_bad(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh* mesh = NULL;
    vs_ddp* d = open_ddp(w, VS_ZERO_0, &mesh);
    static float buf[4 * 64], gbuf[4 * 64];
    vs_ddp_param_desc pd = w_param(64);
    pd.storage = buf, pd.grad_storage = gbuf, pd.layers = 4;
    static const char* bad[3] = {"h.w", "h.%d.%d.w", "h.%s.w"};
    for (int i = 0; i < 3; i++) {
        pd.name = bad[i];
        vs_result r = vs_ddp_add_param(d, &pd, NULL);
        VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), bad[i]) && strstr(vs_last_error(), "%d"),
                 "name '%s': %d %s", bad[i], r, vs_last_error());
    }
    pd.name = "h.%d.w";
    pd.layers = -1;
    VT_CHECK(vs_ddp_add_param(d, &pd, NULL) == VS_ERR_INVALID && strstr(vs_last_error(), "layers -1"), "layers -1: %s",
             vs_last_error());
    pd.layers = 4, pd.ready_group = INT_MAX - 1;
    VT_CHECK(vs_ddp_add_param(d, &pd, NULL) == VS_ERR_INVALID && strstr(vs_last_error(), "overflows"),
             "ready_group overflow: %s", vs_last_error());
    pd.ready_group = 0;
    vs_ddp_param_desc taken = w_param(64);
    taken.name = "h.2.w";
    VT_OK(vs_ddp_add_param(d, &taken, NULL));
    vs_result r = vs_ddp_add_param(d, &pd, NULL);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "'h.2.w' registered twice"), "a taken name: %d %s", r,
             vs_last_error());
    VT_CHECK(d->nparams == 1, "after the failure %d parameters are registered, want 1 (none of the layers)", d->nparams);
    pd.name = "h.%d.v"; // and the same desc under a free name goes in whole
    int first = -1;
    VT_OK(vs_ddp_add_param(d, &pd, &first));
    VT_CHECK(first == 1 && d->nparams == 5, "first %d, %d parameters (want 1, 5)", first, d->nparams);
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    return 0;
}
static void case_layers_bad(void)
{
    VT_OK(vs_launch(1, rank_layers_bad, NULL));
}

/* ZeRO-1's gathers into the trainer's storage: vs_ddp_step starts them and
   returns; it does not wait for them, so a rank's step returns while its peer
   has not stepped yet (with staging buffers it waited for the peer's part of
   the earlier gathers to free a buffer). The peer waits for that return (10 s
   at most, so a step that waits ends in a failed check, not a hang). */
static int rank_nowait(vs_world* w, void* arg)
{
    int* returned = (int*)arg, me = vs_world_rank(w);
    int64_t T = total_elems();
    vs_mesh* mesh = NULL;
    vs_ddp* d = open_ddp(w, VS_ZERO_1, &mesh);
    float* P = (float*)dc_mem_alloc((size_t)T * 4);
    float* G = (float*)dc_mem_alloc((size_t)T * 4);
    for (int64_t i = 0; i < T; i++) P[i] = (float)init_val(i), G[i] = grad_val(i, me, 0, P[i]);
    add_flat_params(d, P, G);
    for (int l = L - 1; l >= 0; l--) VT_OK(vs_ddp_group_ready(d, l + 1));
    VT_OK(vs_ddp_finish_grad_sync(d));
    if (me == 1)
        for (int i = 0; i < 10000 && !__atomic_load_n(returned, __ATOMIC_ACQUIRE); i++) {
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
    VT_CHECK(me == 0 || __atomic_load_n(returned, __ATOMIC_ACQUIRE),
             "rank 0's vs_ddp_step did not return before rank 1 stepped: it waits for the gathers");
    VT_OK(vs_ddp_step(d, 1e-2));
    if (me == 0) __atomic_store_n(returned, 1, __ATOMIC_RELEASE);
    VT_OK(vs_ddp_wait_params(d));
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    dc_mem_free(P);
    dc_mem_free(G);
    return 0;
}
static void case_nowait(void)
{
    int returned = 0;
    VT_OK(vs_launch(2, rank_nowait, &returned));
}

/* VESCALE_DEBUG=params below a page: a parameter smaller than a page (a
   layernorm's weight) cannot be guarded by mprotect; its stale part is NaN
   until the wait, so a forward that reads it early gets NaN, and the clip's
   non-finite norm names it. With the wait, nothing is NaN. */
static int rank_subpage(vs_world* w, void* arg)
{
    int wait = *(const int*)arg, me = vs_world_rank(w);
    vs_mesh* mesh = NULL;
    vs_ddp* d = open_ddp(w, VS_ZERO_1, &mesh);
    enum { N = 64 }; // 256 bytes
    float* P = (float*)dc_mem_alloc(4096);
    float* G = (float*)dc_mem_alloc(4096);
    for (int i = 0; i < N; i++) P[i] = 1.0f, G[i] = 0;
    vs_ddp_param_desc pd = w_param(N);
    pd.name = "h.0.ln_1.weight";
    pd.storage = P, pd.grad_storage = G;
    int i0 = -1;
    VT_OK(vs_ddp_add_param(d, &pd, &i0));
    VT_OK(vs_ddp_finalize(d));
    VT_CHECK(d->debug_params, "VESCALE_DEBUG=params not seen");
    for (int t = 0; t < 2; t++) {
        if (wait) VT_OK(vs_ddp_wait_params(d));
        for (int i = 0; i < N; i++) G[i] = P[i]; // the forward reads every element
        VT_OK(vs_ddp_grad_ready(d, i0));
        VT_OK(vs_ddp_finish_grad_sync(d));
        vs_clip_desc cd;
        memset(&cd, 0, sizeof cd);
        cd.max_norm = 1e9;
        cd.error_if_nonfinite = 1;
        double norm = 0;
        vs_result r = vs_ddp_clip_grad_norm_ex(d, &cd, &norm);
        if (wait || t == 0)
            VT_CHECK(r == VS_OK && isfinite(norm), "rank %d step %d: norm %g: %s", me, t, norm, vs_last_error());
        else
            VT_CHECK(r == VS_ERR_NONFINITE && strstr(vs_last_error(), "'h.0.ln_1.weight'") &&
                         strstr(vs_last_error(), "VESCALE_DEBUG=params") && strstr(vs_last_error(), "vs_ddp_wait_params"),
                     "rank %d: a stale read below a page: norm %g, %s", me, norm, vs_last_error());
        VT_OK(vs_ddp_step(d, 0.1));
    }
    VT_OK(vs_ddp_wait_params(d));
    for (int i = 0; i < N; i++) VT_CHECK(!wait || isfinite(P[i]), "P[%d] = %g after the wait", i, (double)P[i]);
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    dc_mem_free(P);
    dc_mem_free(G);
    return 0;
}
static void case_subpage(void)
{
    for (int wait = 0; wait < 2; wait++) {
        char out[8192];
        int status = in_child(rank_subpage, &wait, "params", out, sizeof out);
        VT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s the wait: the child failed (status %d): %s",
                 wait ? "with" : "without", status, out);
    }
}

/* VESCALE_DEBUG is one list, parsed once (vs_debug_modes): MPI's desync and
   DDP's params together, and an unknown mode named by vs_ddp_init. */
static int rank_dbg_env(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh* mesh = dc_mesh_1d(w);
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = mesh;
    vs_ddp* d = NULL;
    vs_result r = vs_ddp_init(&dd, &d);
    const char* e = getenv("VESCALE_DEBUG");
    if (strstr(e, "bogus"))
        VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "'bogus'") && strstr(vs_last_error(), "params"),
                 "VESCALE_DEBUG=%s: %s", e, vs_last_error());
    else
        VT_CHECK(r == VS_OK && d && d->debug_params, "VESCALE_DEBUG=%s: debug_params %d: %s", e, d ? d->debug_params : -1,
                 vs_last_error());
    if (d) VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    return 0;
}
/* The world's modes reach DDP: vs_launch_desc.debug turns DDP's params checks on
   without VESCALE_DEBUG, and "" turns them off beside VESCALE_DEBUG=params. */
static int rank_dbg_desc(vs_world* w, void* arg)
{
    int want = *(const int*)arg;
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.world = w;
    vs_ddp* d = NULL;
    VT_OK(vs_ddp_init(&dd, &d));
    VT_CHECK(d && d->debug_params == want, "launch desc debug: debug_params %d, want %d", d ? d->debug_params : -1,
             want);
    if (d) VT_OK(vs_ddp_free(d));
    return 0;
}
static void case_debug_desc(void)
{
    const char* had = getenv("VESCALE_DEBUG");
    char keep[64];
    snprintf(keep, sizeof keep, "%s", had ? had : "");
    static const char* descs[2] = {"params", ""};
    static const char* envs[2] = {NULL, "params"};
    for (int i = 0; i < 2; i++) {
        if (envs[i]) setenv("VESCALE_DEBUG", envs[i], 1);
        else unsetenv("VESCALE_DEBUG");
        int want = i == 0;
        vs_launch_desc ld;
        memset(&ld, 0, sizeof ld);
        ld.nranks = 2;
        ld.debug = descs[i];
        VT_OK(vs_launch_ex(&ld, rank_dbg_desc, &want));
    }
    if (had) setenv("VESCALE_DEBUG", keep, 1);
    else unsetenv("VESCALE_DEBUG");
}
static void case_debug_modes(void)
{
    unsigned m = 0;
    VT_OK(vs_debug_modes("desync,params", &m));
    VT_CHECK(m == (VS_DEBUG_DESYNC | VS_DEBUG_PARAMS), "desync,params: %u", m);
    VT_OK(vs_debug_modes(" params ", &m));
    VT_CHECK(m == VS_DEBUG_PARAMS, "' params ': %u", m);
    VT_OK(vs_debug_modes("", &m));
    VT_CHECK(m == 0, "'': %u", m);
    vs_result r = vs_debug_modes("desync,paramz", &m);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "unknown value 'paramz'") &&
                 strstr(vs_last_error(), "known: desync, params"), "paramz: %s", vs_last_error());
    static const char* envs[3] = {"params", "desync,params", "params,bogus"};
    for (int i = 0; i < 3; i++) {
        char out[8192];
        int status = in_child(rank_dbg_env, NULL, envs[i], out, sizeof out);
        int want = strstr(envs[i], "bogus") ? 3 : 0; // (a bad value: vs_launch refuses it before any rank runs)
        VT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == want, "VESCALE_DEBUG=%s: the child's status %d: %s",
                 envs[i], status, out);
    }
}
#endif

#if DEV
/* On NCCL the storage is device memory: a plain host pointer is refused, named. */
static int rank_host_ptr(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh* mesh = NULL;
    vs_ddp* d = open_ddp(w, VS_ZERO_0, &mesh);
    float* host = (float*)malloc(64 * sizeof(float));
    void* dev = dc_mem_alloc(64 * sizeof(float));
    vs_ddp_param_desc pd = w_param(64);
    pd.storage = dev, pd.grad_storage = host;
    vs_result r = vs_ddp_add_param(d, &pd, NULL);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "'w'") && strstr(vs_last_error(), "grad_storage") &&
                 strstr(vs_last_error(), "host memory"), "a host grad_storage on NCCL: %s", vs_last_error());
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    free(host);
    dc_mem_free(dev);
    return 0;
}
#endif

/* The race of issue 22 with the trainer's pointers, and the wait that ends it.
   The gathers land in place as they run, so a read before the wait sees old,
   new or half-gathered values: the staged form (gathered into a staging
   buffer, written in at the wait) shows the stale values deterministically;
   the in-place form is read after the wait only (an early read races with the
   gather: ThreadSanitizer would rightly say so). */
static void case_race(void)
{
    int64_t T = total_elems();
    double* ref = (double*)calloc((size_t)T, sizeof(double));
    for (int staged = 1; staged >= 0; staged--) {
        double sums[2] = {0, 0};
        cfg c;
        memset(&c, 0, sizeof c);
        c.dp = 2, c.zero = 1, c.steps = 2, c.ext = 1, c.out = ref, c.read_stale = staged, c.stale_sum = sums;
        c.staged = staged;
        VT_OK(launch(2, train_rank, &c));
        double want = 0;
        for (int64_t i = 0; i < T; i++) want += ref[i];
        VT_CHECK(!staged || sums[1] == want, "after the wait: sum %.17g, want %.17g", sums[1], want);
#if !DEV
        VT_CHECK(!staged || sums[0] != want, "without the wait the sum %.17g is already the updated one", sums[0]);
#endif
    }
    free(ref);
}

int main(void)
{
    setenv("VESCALE_TIMEOUT", "60", 0);
    VT_CASE("trainer-owned flat buffers, ZeRO-0 DP2, f32: equal to DDP-owned memory, averaged gradient in place",
            case_equal(2, 0, 0));
    VT_CASE("trainer-owned flat buffers, ZeRO-1 DP2, f32", case_equal(2, 1, 0));
    VT_CASE("trainer-owned flat buffers, staged (packed into a staging buffer): ZeRO-0 DP2 f32 and bf16, DP4; ZeRO-1 "
            "DP2 and DP4", {
                case_equal_s(2, 0, 0, 1);
                case_equal_s(2, 0, 1, 1);
                case_equal_s(4, 0, 0, 1);
                case_equal_s(2, 1, 0, 1);
                case_equal_s(4, 1, 0, 1);
            });
    VT_CASE("trainer-owned flat buffers, ZeRO-1 DP4 and ZeRO-0 DP4", {
        case_equal(4, 1, 0);
        case_equal(4, 0, 0);
    });
    VT_CASE("trainer-owned flat buffers, bf16 with fp32 masters, ZeRO-0 and ZeRO-1 DP2", {
        case_equal(2, 0, 1);
        case_equal(2, 1, 1);
    });
    VT_CASE("the race: reading own pointers after a ZeRO-1 step sees stale values; after vs_ddp_wait_params the updated",
            case_race());
    VT_CASE("vs_ddp_group_ready marks a layer in one call: ZeRO-0 and ZeRO-1 DP2 equal to DDP-owned memory", {
        case_equal_x(2, 0, 0, 0, 1, 0);
        case_equal_x(2, 1, 0, 0, 1, 0);
    });
    VT_CASE("trainer_zero_grad: the trainer zeroes its own gradients, ZeRO-0 and ZeRO-1 equal to DDP-owned memory; ZeRO-1 "
            "f32 reduces them into its accumulator, leaving them as the backward wrote them", {
        case_equal_x(2, 0, 0, 0, 1, 1);
        case_equal_x(2, 1, 1, 0, 1, 1);
        case_equal_x(4, 1, 0, 0, 1, 1);
    });
    VT_CASE("ZeRO-1 gathers in place, staged ones through staging buffers: DP2 and DP4, f32 and bf16, equal", {
        case_equal_x(2, 1, 0, 1, 1, 0);
        case_equal_x(2, 1, 1, 1, 0, 0);
        case_equal_x(4, 1, 0, 1, 0, 0);
    });
    VT_CASE("vs_ddp_group_ready refuses group 0, an unknown group and a group with a member marked (marking none)",
            VT_OK(launch(2, rank_group_bad, NULL)));
    VT_CASE("vs_ddp_desc.world: plain DP over every rank without a mesh (made and freed by the DDP), ZeRO-1 DP3",
            VT_OK(launch(3, rank_world, NULL)));
#if !DEV
    VT_CASE("zero copy: the allocator hooks see no parameter-sized allocation for trainer-owned storage", case_alloc());
    VT_CASE("checkpoint of trainer-owned ZeRO-1 DP2 storage, each parameter by name, loaded on DP4 by DDP-owned ZeRO-0 and trainer-owned ZeRO-1",
            case_ckpt());
    VT_CASE("bad input: storage rules, ZeRO-2 refused, ranks disagreeing", VT_OK(vs_launch(2, rank_bad, NULL)));
    VT_CASE("VESCALE_DEBUG=params: a read of trainer-owned storage before vs_ddp_wait_params faults naming the parameter",
            case_debug(1));
    VT_CASE("VESCALE_DEBUG=params: a read through a kept vs_ddp_param pointer before the wait faults too", case_debug(0));
    VT_CASE("VESCALE_DEBUG=params below a page: the stale part is NaN until the wait; the clip's non-finite norm names "
            "the parameter", case_subpage());
    VT_CASE("VESCALE_DEBUG is one list (vs_debug_modes): desync,params, params; an unknown mode is named by vs_ddp_init",
            case_debug_modes());
    VT_CASE("layers: a kind a call for every layer (kind after kind) equals a view a call (layer after layer): the same "
            "buckets, names and parameters bit for bit, ZeRO-0", case_layers(0));
    VT_CASE("layers: the same, ZeRO-1", case_layers(1));
    VT_CASE("layers refused: a name without one %d, layers -1, a ready_group overflow; a taken name at layer 2 registers "
            "none", case_layers_bad());
    VT_CASE("vs_launch_desc.debug reaches DDP: \"params\" without VESCALE_DEBUG turns its checks on, \"\" beside "
            "VESCALE_DEBUG=params turns them off",
            case_debug_desc());
    VT_CASE("out-of-order readiness (a tied embedding first): one warning a rank naming both tensors; VESCALE_LOG=debug "
            "logs each bucket's launch with its tensors", case_order());
    VT_CASE("the gradients are zeroed once a step: by DDP after a ZeRO-1 reduction (vs_ddp_zero_grad writes nothing)",
            case_zero(1, 0));
    VT_CASE("the gradients are zeroed once a step: by DDP in vs_ddp_zero_grad under ZeRO-0", case_zero(0, 0));
    VT_CASE("trainer_zero_grad: DDP writes no zeros into the trainer's gradients, ZeRO-0 and ZeRO-1", {
        case_zero(0, 1);
        case_zero(1, 1);
    });
    VT_CASE("ZeRO-1 into the trainer's storage: vs_ddp_step starts the gathers and returns without waiting for them",
            case_nowait());
#endif
#if DEV
    /* the device form of the debug mode: stale ranges filled with NaN until the
       gathered values land in stream order; a trainer that reads in order sees
       the same results */
    setenv("VESCALE_DEBUG", "params", 1);
    VT_CASE("VESCALE_DEBUG=params on NCCL: ZeRO-1 DP2 with the stale ranges poisoned, results unchanged",
            case_equal(2, 1, 0));
    unsetenv("VESCALE_DEBUG");
    VT_CASE("bad input on NCCL: a host pointer as grad_storage, named", VT_OK(launch(2, rank_host_ptr, NULL)));
#endif
#ifdef VS_STRICT
    VT_CASE("strict/no violations", VT_CHECK(vs_strict_violations() == 0, "%s", vs_strict_first_violation()));
#endif
    return vt_summary();
}
