/* test_ddp_zero3.c - ZeRO-3 in vescale_ddp.h (issue 34, section 1): parameters,
   f32 masters, optimizer state and gradients sharded at rest; vs_ddp_gather /
   vs_ddp_release a ready group at a time; prefetch; reshard_after_forward.

   The model: L layers of NK kinds, each (layer, kind) a 1-D parameter, registered
   kind by kind for all layers at once (vs_ddp_param_desc.layers), a ready group a
   layer. A step runs like a trainer's: per micro-batch a forward (gather, read
   every parameter of the layer into a checksum, release) over the layers, then a
   backward in reverse (gather, gradient g = 0.1 p + h(rank, step, micro, element)
   added into vs_ddp_grad, vs_ddp_group_ready, release); then finish_grad_sync,
   clip, step. The gradient reads the gathered parameters, so a wrong gather shows
   in the results.

   References:
   - one rank: a world of one whose gradient is the average over the DP ranks'
     (summed in float, in rank order): f32 results within 1e-6 relative;
   - ZeRO-1 on the same mesh and buckets, syncing every micro-batch: bit for bit
     (the same reduce-scatter per bucket and pass, the same sums into the f32
     accumulator, the same optimizer on the same owned ranges, the same clip sums
     in the same order), f32 and bf16.
   Memory through vs_ddp_memory_usage and the world's allocator hooks (each
   rank thread's allocations counted apart): at rest, at peak, and during
   registration (data NULL + vs_ddp_write_param after finalize against data
   copied whole). Accumulation without sync (vs_ddp_set_sync 0) against ZeRO-1
   doing the same. (ZeRO-3 on HSDP, and the owned shards in the trainer's
   memory: tests/test_ddp_hsdp.c.)

   Built twice: thread ranks with host buffers (build/test_ddp_zero3), and over
   the strict CUDA + NCCL stand-in with device buffers
   (build/test_ddp_zero3_strict), where every read and write of DDP's memory is
   a copy after the legacy stream (DDP's stream here), the stand-in checks that
   each use of a gathered buffer is ordered after its gather, and the device
   allocator hook counts device allocations after the first step (none). */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vescale_ddp.h"
#include "vescale_ckpt.h"
#include "vs_test.h"

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef VS_STRICT
#include <cuda_runtime.h>
#include "strict/vs_strict.h"
#define DEV 1
#else
#define DEV 0
#endif
#include "ddp_common.h"

/* DDP's memory to the host and back: on the device a copy after DDP's (the
   legacy) stream; else the memory itself. */
static const void* host_view(const void* p, size_t n, void* tmp)
{
#if DEV
    cudaStreamSynchronize(cudaStreamLegacy);
    VT_CHECK(cudaMemcpy(tmp, p, n, cudaMemcpyDeviceToHost) == cudaSuccess, "copy of %zu bytes from %p", n, p);
    return tmp;
#else
    (void)n, (void)tmp;
    return p;
#endif
}
static void put_back(void* p, const void* h, size_t n)
{
#if DEV
    VT_CHECK(cudaMemcpy(p, h, n, cudaMemcpyHostToDevice) == cudaSuccess, "copy of %zu bytes to %p", n, p);
#else
    (void)p, (void)h, (void)n;
#endif
}
static float read_f32(const void* p, int64_t e)
{
    float v = NAN;
    return *(const float*)host_view((const float*)p + e, sizeof v, &v);
}
static vs_result launch(int n, int (*fn)(vs_world*, void*), void* arg, const vs_allocator* al)
{
    vs_launch_desc ld = dc_launch_desc(n);
    if (al) ld.allocator = *al;
    return vs_launch_ex(&ld, fn, arg);
}

#define L 4
#define NK 3
#define STEPS 3
#define MAXR 4
static const int64_t ksz[NK] = {4400, 96, 3700}; // a layer: w1, b1, w2
static const char* kname[NK] = {"h.%d.w1", "h.%d.b1", "h.%d.w2"};
static int64_t per_layer(void) { return ksz[0] + ksz[1] + ksz[2]; }
#define TOTAL (L * (4400 + 96 + 3700))

/* the element's index in the flat result: layer-major, kinds in order */
static int64_t flat(int l, int k, int64_t e)
{
    int64_t o = (int64_t)l * per_layer();
    for (int j = 0; j < k; j++) o += ksz[j];
    return o + e;
}
static float init_value(int64_t x, int k) { return (float)(0.5 * sin(0.37 * (double)x + 0.1 * k)); }
static float h_value(int r, int dp, int step, int micro, int64_t x)
{
    return (float)(0.01 * cos(0.11 * (double)x + 0.7 * r + 1.3 * step + 0.5 * micro) + 0.02 * (r + 1) / dp);
}

/* ---- allocator hooks: live bytes and peak of each rank thread ----
   Only allocations of BIG bytes or more count: every DDP buffer of this model
   is larger (a bf16 shard of a layer at DP4: 4 KiB), the transport's
   bookkeeping of an operation in flight (~1 KiB) is not. */
#define BIG 2048

typedef struct cfg {
    int dp;      // DP ranks (ref: the ranks whose average gradient the one rank takes)
    int ref;     // a world of one rank
    vs_zero_stage zero;
    int bf16, grad_fp32, micro, sgd;
    double clip; // > 0 clips; < 0 measures
    int prefetch, prefetch_set, rsf, rsf_set;
    int per_param; // backward marks each parameter ready (vs_ddp_grad_ready), not the group
    int nosync;    // micro-batches but the last without sync (vs_ddp_set_sync 0): one reduction a step
    int lazy;      // registered with data NULL, each parameter written after finalize (vs_ddp_write_param)
    int eval;      // before each step's training from the second on, an evaluation's forward (gather, read, release)
    int nan_step; // > 0: rank 1 writes a NaN gradient at this step (1-based): skipped everywhere
    dc_acct* acct;   // the allocator hooks' counts (measure)
    int s0, s1;    // the steps to run: [s0, s1) (s1 0: STEPS)
    const char* save; // vs_ckpt_save_ddp after step save_after (1-based)
    int save_after;
    const char* load; // vs_ckpt_load_ddp after finalize
    /* results */
    float out[MAXR][TOTAL];
    double norm[STEPS], fsum[MAXR][STEPS], esum[MAXR][STEPS];
    int64_t skipped;
    vs_ddp_memory mem_rest[MAXR], mem_end[MAXR];
    long base[MAXR], hook_rest[MAXR], hook_peak[MAXR], big_steady[MAXR], dev_steady[MAXR];
    long reg_peak[MAXR]; // the hooks' peak from vs_ddp_init through finalize (and the writes)
    int64_t own_b[MAXR][L * NK], own_e[MAXR][L * NK];
    int owned_ok[MAXR];
    int prefetch_seen[MAXR], prefetch_bad[MAXR]; // forward gathers and releases that left the state (not) as meant
} cfg;

/* The gather state of group g's first bucket (the private state: this test links
   the implementation's private part, tests/vs_private.h). */
static int group_state(const vs_ddp* d, int g)
{
    for (int b = 0; b < d->nbuckets; b++)
        if (d->buckets[b].rgroup == g) return d->buckets[b].zstate;
    return -1;
}

static float getf(const void* p, int bf16, int64_t e)
{
    return bf16 ? vs_bf16_to_f32(((const uint16_t*)p)[e]) : ((const float*)p)[e];
}
static void addf(void* g, int bf16, int64_t e, float v)
{
    if (bf16)
        ((uint16_t*)g)[e] = vs_f32_to_bf16(vs_bf16_to_f32(((uint16_t*)g)[e]) + v);
    else
        ((float*)g)[e] += v;
}

/* Registers the model (kind by kind, every layer in one call) into d; lazy:
   without data (zeros), and write_model writes it after finalize. */
static float init_at(int l, int k, int64_t e) { return init_value(flat(l, k, e), k); }
static void add_model_ex(vs_ddp* d, int bf16, int idx[NK][L], int lazy, int write)
{
    dc_layers m = {L, NK, bf16, ksz, kname, init_at, 1u << 1}; // (b1: no decay)
    dc_add_layers(d, &m, &idx[0][0], write ? DC_WRITE : lazy ? DC_ADD_LAZY : DC_ADD);
}
static void add_model(vs_ddp* d, int bf16, int idx[NK][L]) { add_model_ex(d, bf16, idx, 0, 0); }

static vs_ddp_desc make_desc(vs_mesh* mesh, const cfg* c, vs_zero_stage zero)
{
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = mesh;
    dd.zero = zero;
    dd.grad_fp32 = c->grad_fp32;
    dd.optim.kind = c->sgd ? VS_OPTIM_SGD : VS_OPTIM_ADAMW;
    dd.optim.weight_decay = 0.01;
    dd.optim.momentum = 0.9;
    dd.prefetch = c->prefetch, dd.prefetch_set = c->prefetch_set;
    dd.reshard_after_forward = c->rsf, dd.reshard_after_forward_set = c->rsf_set;
    return dd;
}

/* Layer l's backward on this rank: g += 0.1 p + h (the ref: the DP ranks' average). */
static void backward_layer(vs_ddp* d, const cfg* c, int idx[NK][L], int me, int l, int s, int m, float* tmp)
{
    for (int k = 0; k < NK; k++) {
        int i = idx[k][l];
        const void* p = vs_ddp_param(d, i);
        void* gd = vs_ddp_grad(d, i);
        VT_CHECK(p && gd, "'%s': param %p grad %p: %s", kname[k], p, gd, vs_last_error());
        if (!p || !gd) return;
        int gb = c->bf16 && !c->grad_fp32;
        size_t gbytes = (size_t)ksz[k] * (gb ? 2 : 4);
        p = host_view(p, (size_t)ksz[k] * (c->bf16 ? 2 : 4), tmp);
        void* g = (void*)host_view(gd, gbytes, tmp + ksz[0]);
        for (int64_t e = 0; e < ksz[k]; e++) {
            float pv = getf(p, c->bf16, e), v;
            int64_t x = flat(l, k, e);
            if (c->ref) {
                float sum = 0;
                for (int r = 0; r < c->dp; r++) sum += 0.1f * pv + h_value(r, c->dp, s, m, x);
                v = sum / (float)c->dp;
            } else {
                v = 0.1f * pv + h_value(me, c->dp, s, m, x);
            }
            if (c->nan_step == s + 1 && me == 1 && x == 7) v = NAN;
            addf(g, gb, e, v);
        }
        put_back(gd, g, gbytes);
    }
}

static int train_rank(vs_world* w, void* arg)
{
    cfg* c = (cfg*)arg;
    int me = vs_world_rank(w);
    dc_acct_enter(c->acct, me);
    vs_mesh* mesh = dc_mesh_1d(w);
    if (!mesh) return 1;
    int idx[NK][L];
    float* tmp = (float*)malloc(2 * sizeof(float) * (size_t)ksz[0]); // host copies (DEV)
    if (c->acct) { // a first DDP makes the mesh's DP groups, so the measure below sees only the second's memory
        vs_ddp* d0 = NULL;
        vs_ddp_desc d0d = make_desc(mesh, c, VS_ZERO_1);
        VT_OK(vs_ddp_init(&d0d, &d0));
        add_model(d0, c->bf16, idx);
        VT_OK(vs_ddp_finalize(d0));
        VT_OK(vs_ddp_free(d0));
        c->base[me] = (long)rb_mark();
    }
    vs_ddp* d = NULL;
    vs_ddp_desc dd = make_desc(mesh, c, c->zero);
    VT_OK(vs_ddp_init(&dd, &d));
    if (!d) return 1;
    add_model_ex(d, c->bf16, idx, c->lazy, 0);
    VT_OK(vs_ddp_finalize(d));
    if (c->lazy) add_model_ex(d, c->bf16, idx, 1, 1);
    if (c->nosync) VT_OK(vs_ddp_set_sync(d, 0)); // (ZeRO-3: the staging pool for it made here, before the steps)
    if (c->acct) c->reg_peak[me] = (long)rb_since((size_t)c->base[me]);
    VT_OK(vs_ddp_memory_usage(d, &c->mem_rest[me]));
    if (c->load) VT_OK(dc_ckpt_ddp(mesh, d, c->load, 0));
    if (c->acct) { // (from here: registration held a copy of each `data` until finalize)
        c->hook_rest[me] = (long)rb_mark() - c->base[me];
    }
    long big0 = 0, dev0 = 0;
    for (int s = c->s0; s < (c->s1 ? c->s1 : STEPS); s++) {
        if (s == 0 && c->acct) big0 = rb_acct->n, dev0 = rb_acct->dev; // (none in any step)
        int p0 = c->prefetch_set && c->prefetch == 0, kept = c->rsf_set && c->rsf == 0;
        for (int l = 0; c->eval && s >= 1 && l < L; l++) { // an evaluation's forward, off the recorded order's end
            VT_OK(vs_ddp_gather(d, l + 1));
            for (int k = 0; k < NK; k++) {
                const void* p = vs_ddp_param(d, idx[k][l]);
                VT_CHECK(p != NULL, "eval: '%s' layer %d: %s", kname[k], l, vs_last_error());
                if (p) p = host_view(p, (size_t)ksz[k] * (c->bf16 ? 2 : 4), tmp);
                for (int64_t e = 0; p && e < ksz[k]; e++) c->esum[me][s] += getf(p, c->bf16, e) * (double)(e % 7 + 1);
            }
            VT_OK(vs_ddp_release(d, l + 1));
            if (c->zero == VS_ZERO_3 && l + 1 == L) { // its last group kept: the recorded order gathers it next
                c->prefetch_seen[me]++;
                if (group_state(d, L) != _VS_Z3_KEPT) c->prefetch_bad[me]++;
            }
        }
        VT_OK(vs_ddp_zero_grad(d));
        for (int m = 0; m < (c->micro ? c->micro : 1); m++) {
            double fs = 0;
            if (c->nosync) VT_OK(vs_ddp_set_sync(d, m + 1 == c->micro));
            for (int l = 0; l < L; l++) { // forward
                VT_OK(vs_ddp_gather(d, l + 1));
                if (c->zero == VS_ZERO_3 && s >= 1 && l + 1 < L) { // prefetch: the next layer's gather is in flight
                    int want = p0 ? _VS_Z3_REST : _VS_Z3_FLIGHT;
                    c->prefetch_seen[me]++;
                    if (group_state(d, l + 2) != want) c->prefetch_bad[me]++;
                }
                if (c->zero == VS_ZERO_3 && s >= 1 && l + 1 == L) { // ... at the last, the backward's next one
                    int want = kept ? _VS_Z3_KEPT : p0 ? _VS_Z3_REST : _VS_Z3_FLIGHT;
                    c->prefetch_seen[me]++;
                    if (group_state(d, L - 1) != want) c->prefetch_bad[me]++;
                }
                if (c->zero == VS_ZERO_3 && c->eval && !kept && s >= 1 && m == 0 && l == 0) { // the eval's kept
                    int want = !p0 && c->prefetch >= L - 1 ? _VS_Z3_FLIGHT : _VS_Z3_REST;    // group dropped
                    c->prefetch_seen[me]++;
                    if (group_state(d, L) != want) c->prefetch_bad[me]++;
                }
                for (int k = 0; k < NK; k++) {
                    const void* p = vs_ddp_param(d, idx[k][l]);
                    VT_CHECK(p != NULL, "forward: '%s' layer %d: %s", kname[k], l, vs_last_error());
                    if (p) p = host_view(p, (size_t)ksz[k] * (c->bf16 ? 2 : 4), tmp);
                    for (int64_t e = 0; p && e < ksz[k]; e++) fs += getf(p, c->bf16, e) * (double)(e % 7 + 1);
                }
                VT_OK(vs_ddp_release(d, l + 1));
                if (c->zero == VS_ZERO_3) { // reshard_after_forward 0: kept for the backward, else given back
                    int want = kept || (s >= 1 && l + 1 == L) ? _VS_Z3_KEPT : _VS_Z3_REST; // (the last: gathered next)
                    c->prefetch_seen[me]++;
                    if (group_state(d, l + 1) != want) c->prefetch_bad[me]++;
                }
            }
            if (m == 0) c->fsum[me][s] = fs;
            for (int l = L - 1; l >= 0; l--) { // backward
                VT_OK(vs_ddp_gather(d, l + 1));
                backward_layer(d, c, idx, me, l, s, m, tmp);
                for (int k = 0; k < NK && c->per_param; k++) VT_OK(vs_ddp_grad_ready(d, idx[k][l]));
                if (!c->per_param) VT_OK(vs_ddp_group_ready(d, l + 1));
                VT_OK(vs_ddp_release(d, l + 1));
                if (c->zero == VS_ZERO_3) { // after its backward a group is given back, kept or not in the forward,
                    int next = s >= 1 && l == 0 && m + 1 < (c->micro ? c->micro : 1); // but for the next forward
                    c->prefetch_seen[me]++;
                    if (group_state(d, l + 1) != (next ? _VS_Z3_KEPT : _VS_Z3_REST)) c->prefetch_bad[me]++;
                }
            }
            VT_OK(vs_ddp_finish_grad_sync(d)); // (each micro-batch's pass reduced: added into the owned ranges)
        }
        double norm = 0;
        if (c->clip != 0) VT_OK(vs_ddp_clip_grad_norm(d, c->clip, &norm));
        if (me == 0) c->norm[s] = norm;
        VT_OK(vs_ddp_step(d, 0.01));
        if (c->save && s + 1 == c->save_after) VT_OK(dc_ckpt_ddp(mesh, d, c->save, 1));
    }
    if (c->acct) c->big_steady[me] = rb_acct->n - big0, c->dev_steady[me] = rb_acct->dev - dev0;
    VT_OK(vs_ddp_memory_usage(d, &c->mem_end[me]));
    if (c->acct) c->hook_peak[me] = (long)rb_since((size_t)c->base[me]);
    if (me == 0) c->skipped = vs_ddp_skipped_steps(d); // (one writer: the ranks agree)
    // the results: every parameter gathered, and each one's owned range as DDP reports it
    c->owned_ok[me] = 1;
    for (int l = 0; l < L; l++) {
        VT_OK(vs_ddp_gather(d, l + 1));
        for (int k = 0; k < NK; k++) {
            int i = idx[k][l];
            const void* p = vs_ddp_param(d, i);
            size_t pz = c->bf16 ? 2 : 4;
            if (p) p = host_view(p, (size_t)ksz[k] * pz, tmp);
            for (int64_t e = 0; p && e < ksz[k]; e++) c->out[me][flat(l, k, e)] = getf(p, c->bf16, e);
            vs_ddp_param_info info;
            vs_ddp_span own, st;
            VT_OK(vs_ddp_query_param_info(d, i, &info));
            VT_OK(vs_ddp_param_owned(d, i, &own));
            c->own_b[me][k * L + l] = info.owned_begin, c->own_e[me][k * L + l] = info.owned_end;
            int ok = own.begin == info.owned_begin && own.end == info.owned_end && p;
            const void* oh = own.data ? host_view(own.data, (size_t)(own.end - own.begin) * pz, tmp + ksz[0]) : NULL;
            for (int64_t e = own.begin; ok && e < own.end; e++) // the owned shard is the gathered view's range
                ok = getf(oh, c->bf16, e - own.begin) == getf(p, c->bf16, e);
            if (!c->sgd) {
                VT_OK(vs_ddp_optim_state(d, i, VS_DDP_STATE_EXP_AVG_SQ, &st));
                ok = ok && st.begin == own.begin && st.end == own.end && (st.begin == st.end || st.data);
            }
            if (!ok) c->owned_ok[me] = 0;
        }
        VT_OK(vs_ddp_release(d, l + 1));
    }
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    free(tmp);
    return 0;
}

static cfg* run(int dp, vs_zero_stage zero, const cfg* tmpl)
{
    cfg* c = (cfg*)calloc(1, sizeof(cfg));
    if (tmpl) *c = *tmpl;
    c->dp = dp;
    c->zero = zero;
    if (c->acct) c->acct->opts.min_bytes = BIG;
    vs_allocator al = dc_acct_hooks(c->acct);
    VT_OK(launch(c->ref ? 1 : dp, train_rank, c, c->acct ? &al : NULL));
    return c;
}

static void close_to(const char* what, const cfg* a, const cfg* b, double tol);

/* Every rank's parameters and checksums bit for bit equal to b's rank 0. Over
   the stand-in's NCCL, more than two ranks sum an element in an order that
   depends on where it lies in the buffer (its ring chunk; ZeRO-3 reduces from
   a staging buffer, ZeRO-1 from the bucket): there within 1e-6. */
static void same_bits_from(const char* what, const cfg* a, const cfg* b, int s0)
{
    if (DEV && a->dp > 2 && !a->ref) {
        close_to(what, a, b, 1e-6);
        return;
    }
    int n = a->ref ? 1 : a->dp;
    for (int r = 0; r < n; r++) {
        int64_t diff = 0, first = -1;
        for (int64_t x = 0; x < TOTAL; x++)
            if (memcmp(&a->out[r][x], &b->out[0][x], sizeof(float))) diff++, first = first < 0 ? x : first;
        VT_CHECK(diff == 0, "%s: rank %d: %lld of %d parameters differ (first %lld: %.9g vs %.9g)", what, r,
                 (long long)diff, TOTAL, (long long)first, first >= 0 ? a->out[r][first] : 0.0,
                 first >= 0 ? b->out[0][first] : 0.0);
        for (int s = s0; s < STEPS; s++)
            VT_CHECK(a->fsum[r][s] == b->fsum[0][s], "%s: rank %d step %d: forward checksum %.17g vs %.17g", what, r,
                     s, a->fsum[r][s], b->fsum[0][s]);
    }
    for (int s = s0; s < STEPS; s++)
        VT_CHECK(a->norm[s] == b->norm[s], "%s: step %d: norm %.17g vs %.17g", what, s, a->norm[s], b->norm[s]);
}
static void same_bits(const char* what, const cfg* a, const cfg* b) { same_bits_from(what, a, b, 0); }

/* Rank 0's parameters within tol relative (max |a-b| / max |b|) of b's. */
static void close_to(const char* what, const cfg* a, const cfg* b, double tol)
{
    double md = 0, mb = 0;
    for (int64_t x = 0; x < TOTAL; x++) {
        double dd = fabs((double)a->out[0][x] - (double)b->out[0][x]);
        if (dd > md || dd != dd) md = dd;
        if (fabs((double)b->out[0][x]) > mb) mb = fabs((double)b->out[0][x]);
    }
    VT_CHECK(md / mb <= tol, "%s: max relative difference %.3g > %.1g", what, md / mb, tol);
    for (int s = 0; s < STEPS && a->clip != 0; s++)
        VT_CHECK(fabs(a->norm[s] - b->norm[s]) <= tol * fabs(b->norm[s]), "%s: step %d: norm %.17g vs %.17g", what, s,
                 a->norm[s], b->norm[s]);
}

/* ZeRO-3 on DP ranks equal to ZeRO-`cmp` bit for bit, and (f32) to one rank within 1e-6. */
static void case_equal(int dp, const cfg* t, int cmp)
{
    cfg* z3 = run(dp, VS_ZERO_3, t);
    cfg* z1 = run(dp, (vs_zero_stage)cmp, t);
    same_bits(cmp == 1 ? "ZeRO-3 vs ZeRO-1" : "ZeRO-3 vs ZeRO-2", z3, z1);
    if (!t || !t->bf16) {
        cfg* r = (cfg*)calloc(1, sizeof(cfg));
        if (t) *r = *t;
        r->ref = 1;
        cfg* one = run(dp, VS_ZERO_1, r);
        free(r);
        close_to("ZeRO-3 vs one rank", z3, one, 1e-6);
        free(one);
    }
    for (int r = 0; r < dp; r++)
        VT_CHECK(z3->owned_ok[r], "rank %d: vs_ddp_param_owned / optim_state / query_param_info disagree", r);
    // the owned ranges partition each parameter over the DP ranks, in rank order
    for (int p = 0; p < L * NK; p++) {
        int64_t at = 0;
        for (int r = 0; r < dp; r++) {
            if (z3->own_b[r][p] < z3->own_e[r][p]) {
                VT_CHECK(z3->own_b[r][p] == at, "parameter %d rank %d: owned from %lld, want %lld", p, r,
                         (long long)z3->own_b[r][p], (long long)at);
                at = z3->own_e[r][p];
            }
        }
        VT_CHECK(at == ksz[p / L], "parameter %d: owned ranges cover %lld of %lld", p, (long long)at,
                 (long long)ksz[p / L]);
    }
    free(z3);
    free(z1);
}

/* prefetch 0, 1, 3 and reshard_after_forward 0: the same bits. */
static void case_prefetch(void)
{
    cfg t;
    memset(&t, 0, sizeof t);
    t.prefetch_set = 1; // prefetch 0
    cfg* p0 = run(2, VS_ZERO_3, &t);
    t.prefetch = 1;
    cfg* p1 = run(2, VS_ZERO_3, &t);
    t.prefetch = 3;
    cfg* p3 = run(4, VS_ZERO_3, &t);
    cfg* p3b = run(4, VS_ZERO_1, &t);
    t.prefetch = 1, t.rsf_set = 1; // reshard_after_forward 0
    cfg* k0 = run(2, VS_ZERO_3, &t);
    t.per_param = 1; // ... with each parameter marked ready
    cfg* k0p = run(2, VS_ZERO_3, &t);
    same_bits("prefetch 1 vs 0", p1, p0);
    same_bits("reshard_after_forward 0 vs 1", k0, p0);
    same_bits("reshard_after_forward 0, vs_ddp_grad_ready, vs 1", k0p, p0);
    same_bits("prefetch 3 vs ZeRO-1, DP4", p3, p3b);
    // after each forward gather of a later step the next layer's gather was in flight (none without prefetch),
    // and each forward release kept the group (reshard_after_forward 0) or gave it back
    const cfg* runs[5] = {p0, p1, p3, k0, k0p};
    for (int i = 0; i < 5; i++)
        for (int r = 0; r < runs[i]->dp; r++)
            VT_CHECK(runs[i]->prefetch_seen[r] > 0 && runs[i]->prefetch_bad[r] == 0,
                     "run %d rank %d: %d of %d forward gathers and releases left a group's state as not meant", i,
                     r, runs[i]->prefetch_bad[r], runs[i]->prefetch_seen[r]);
    // the pool made by finalize: 1 (no prefetch), 2 (one ahead), 4 (all kept)
    size_t one = p0->mem_end[0].gathered;
    VT_CHECK(one > 0, "prefetch 0: gathered pool %zu bytes", one);
    VT_CHECK(p1->mem_end[0].gathered == 2 * one, "prefetch 1: gathered pool %zu bytes, want 2 x %zu",
             p1->mem_end[0].gathered, one);
    VT_CHECK(k0->mem_end[0].gathered == (size_t)L * one, "reshard_after_forward 0: gathered pool %zu, want %d x %zu",
             k0->mem_end[0].gathered, L, one);
    free(p0), free(p1), free(p3), free(p3b), free(k0), free(k0p);
}

/* An evaluation's forward (gathers and releases, no backward) before each
   training step from the second: the next training forward's first gather finds
   the recorded order's start again, so each of its gathers has the next one in
   flight (the old search from the current position found the first group's
   backward entry, and nothing after it prefetched); the eval's kept last group
   goes at that gather; the eval read what the training forward reads; the
   results equal a run without it. With 2 micro-batches the first pass's last
   backward group is kept for the second pass's first gather. */
static void case_eval(void)
{
    cfg t;
    memset(&t, 0, sizeof t);
    t.prefetch = 1, t.prefetch_set = 1;
    cfg* plain = run(2, VS_ZERO_3, &t);
    t.eval = 1;
    cfg* ev = run(2, VS_ZERO_3, &t);
    t.prefetch = 3;
    cfg* ev3 = run(4, VS_ZERO_3, &t);
    t.eval = 0, t.prefetch = 1, t.micro = 2;
    cfg* mi = run(2, VS_ZERO_3, &t);
    cfg* mi1 = run(2, VS_ZERO_1, &t);
    same_bits("with an eval forward vs without", ev, plain);
    same_bits("2 micro-batches vs ZeRO-1", mi, mi1);
    const cfg* runs[3] = {ev, ev3, mi};
    for (int i = 0; i < 3; i++)
        for (int r = 0; r < runs[i]->dp; r++) {
            VT_CHECK(runs[i]->prefetch_seen[r] > 0 && runs[i]->prefetch_bad[r] == 0,
                     "run %d rank %d: %d of %d gathers and releases left a group's state as not meant", i, r,
                     runs[i]->prefetch_bad[r], runs[i]->prefetch_seen[r]);
            for (int s = 1; s < STEPS && i < 2; s++)
                VT_CHECK(runs[i]->esum[r][s] == runs[i]->fsum[r][s], "run %d rank %d step %d: eval read %.17g, "
                         "the training forward %.17g", i, r, s, runs[i]->esum[r][s], runs[i]->fsum[r][s]);
        }
    free(plain), free(ev), free(ev3), free(mi), free(mi1);
}

/* Memory: at rest 1/DP of everything (+ padding); the peak the formula; a steady
   step allocates nothing. */
static void case_memory(int dp, int bf16)
{
    dc_acct a;
    memset(&a, 0, sizeof a);
    cfg t;
    memset(&t, 0, sizeof t);
    t.acct = &a;
    t.bf16 = bf16;
    cfg* c = run(dp, VS_ZERO_3, &t);
    memset(&a, 0, sizeof a);
    cfg* z1 = run(dp, VS_ZERO_1, &t);
    size_t pz = bf16 ? 2 : 4, bpe = pz + 4 + 8 + (bf16 ? 4 : 0); // param, f32 gradient, AdamW's two, master
    int64_t align = 16 * dp, group = (per_layer() + align - 1) / align * align;
    for (int r = 0; r < dp; r++) {
        const vs_ddp_memory* m = &c->mem_rest[r];
        size_t rest = m->params + (m->grads - m->grad_staging) + m->optim_state + m->master;
        double bound = 1.05 * (double)TOTAL * (double)bpe / dp + (double)m->padding * (double)bpe / dp;
        const vs_ddp_memory* m1 = &z1->mem_rest[r];
        size_t rest1 = m1->params + (m1->grads - m1->grad_staging) + m1->optim_state + m1->master;
        if (r == 0)
            printf("    DP%d %s: at rest %zu bytes a rank (ZeRO-1: %zu), bound %.0f; staging %zu, gathered pool %zu; "
                   "hooks: %ld at rest, %ld at peak\n", dp, bf16 ? "bf16" : "f32", rest, rest1, bound,
                   m->grad_staging, c->mem_end[r].gathered, c->hook_rest[r], c->hook_peak[r]);
        VT_CHECK((double)rest <= bound, "rank %d: %zu bytes at rest, more than %.0f", r, rest, bound);
        // the gathered pool, made by finalize: the current group and one prefetched
        size_t gathered = 2 * (size_t)group * pz;
        VT_CHECK(m->gathered == gathered && c->mem_end[r].gathered == gathered,
                 "rank %d: gathered pool %zu bytes after finalize, %zu at the end, want 2 groups, %zu", r, m->gathered,
                 c->mem_end[r].gathered, gathered);
        // the hooks see what vs_ddp_memory_usage says, and bookkeeping (names, tables, the f32 scratch of a shard)
        size_t reported = m->params + m->grads + m->optim_state + m->master + m->gathered;
        long slack = 16384 + (long)(group / dp) * 4; // (the scratch: f32 of a shard)
        VT_CHECK(rest < rest1, "rank %d: ZeRO-3 at rest %zu not below ZeRO-1's %zu", r, rest, rest1);
        VT_CHECK(c->dev_steady[r] == 0, "rank %d: %ld device allocations in the steps", r, c->dev_steady[r]);
        if (DEV) continue; // (DDP's buffers are device memory, which the host hooks below do not see)
        VT_CHECK(c->hook_rest[r] >= (long)reported && c->hook_rest[r] <= (long)reported + slack,
                 "rank %d: the hooks see %ld bytes at rest, vs_ddp_memory_usage %zu (+ at most %ld)", r,
                 c->hook_rest[r], reported, slack);
        // the peak: at rest + the gathered pool + the staging pool (all in the above)
        long formula = (long)reported;
        VT_CHECK(c->hook_peak[r] >= formula && c->hook_peak[r] <= formula + slack,
                 "rank %d: peak %ld bytes through the hooks, the formula %ld (+ at most %ld)", r, c->hook_peak[r],
                 formula, slack);
        VT_CHECK(c->big_steady[r] == 0, "rank %d: %ld allocations of %d bytes or more in the steps", r,
                 c->big_steady[r], BIG);
    }
    free(c);
    free(z1);
}

/* Accumulation without sync: micro-batches but the last keep full gradients
   (vs_ddp_set_sync 0), the last reduces once. Bit for bit ZeRO-1 doing the
   same (the same sums in full buffers, one reduce-scatter), within 1e-6 of one
   rank; the staging pool holds a buffer a bucket (reported), made before the
   steps: none allocates. */
static void case_nosync(int dp)
{
    dc_acct a;
    memset(&a, 0, sizeof a);
    cfg t;
    memset(&t, 0, sizeof t);
    t.micro = 3;
    t.nosync = 1;
    t.clip = 1.0;
    t.acct = &a;
    cfg* z3 = run(dp, VS_ZERO_3, &t);
    t.acct = NULL;
    cfg* z1 = run(dp, VS_ZERO_1, &t);
    same_bits("ZeRO-3 without sync vs ZeRO-1 without sync", z3, z1);
    t.ref = 1;
    cfg* one = run(dp, VS_ZERO_1, &t);
    close_to("ZeRO-3 without sync vs one rank", z3, one, 1e-6);
    t.ref = 0, t.nosync = 0;
    cfg* each = run(dp, VS_ZERO_3, &t);
    for (int r = 0; r < dp; r++) {
        const vs_ddp_memory* m = &z3->mem_end[r];
        size_t per = each->mem_end[r].grad_staging / (size_t)(2 * 1); // (a group a bucket: 2 buffers by default)
        if (r == 0)
            printf("    DP%d: staging %zu bytes without sync (%d buckets), %zu reducing every micro-batch\n", dp,
                   m->grad_staging, L, each->mem_end[r].grad_staging);
        VT_CHECK(m->grad_staging == (size_t)L * per && per >= (size_t)per_layer() * 4,
                 "rank %d: staging pool %zu bytes without sync, want %d buffers of %zu", r, m->grad_staging, L, per);
        VT_CHECK(z3->big_steady[r] == 0 && z3->dev_steady[r] == 0, "rank %d: %ld allocations (%ld device) in the "
                 "steps", r, z3->big_steady[r], z3->dev_steady[r]);
    }
    free(z3), free(z1), free(one), free(each);
}

/* Registration's peak through the hooks: add_param copies `data` whole until
   finalize (every rank holds its whole model once); with data NULL and each
   parameter written after finalize (vs_ddp_write_param) the peak is the
   owned shards (at rest + pools). Both train equal bit for bit. */
static void case_registration(int dp, int bf16)
{
    dc_acct a;
    memset(&a, 0, sizeof a);
    cfg t;
    memset(&t, 0, sizeof t);
    t.acct = &a;
    t.bf16 = bf16;
    cfg* eager = run(dp, VS_ZERO_3, &t);
    memset(&a, 0, sizeof a);
    t.lazy = 1;
    cfg* lazy = run(dp, VS_ZERO_3, &t);
    same_bits("written after finalize vs registered with data", lazy, eager);
    long whole = (long)TOTAL * (bf16 ? 2 : 4), slack = 16384 + (long)(per_layer() / dp + 64) * 4;
    for (int r = 0; r < dp; r++) {
        if (r == 0)
            printf("    DP%d %s: registration peak %ld bytes with data (whole model %ld), %ld written after finalize "
                   "(at rest %ld)\n", dp, bf16 ? "bf16" : "f32", eager->reg_peak[r], whole, lazy->reg_peak[r],
                   lazy->hook_rest[r]);
        // (with data: every rank's copy of the whole model sits beside the owned shards finalize makes)
        long above = whole - whole / dp;
        VT_CHECK(eager->reg_peak[r] >= lazy->hook_rest[r] + above, "rank %d: registered with data: peak %ld, not "
                 "%ld above at rest (%ld)", r, eager->reg_peak[r], above, lazy->hook_rest[r]);
        VT_CHECK(lazy->reg_peak[r] <= lazy->hook_rest[r] + slack, "rank %d: written after finalize: registration "
                 "peak %ld bytes, more than at rest (%ld) + %ld", r, lazy->reg_peak[r], lazy->hook_rest[r], slack);
    }
    free(eager), free(lazy);
}

/* DP x TP2: w1 sharded over TP, b1 Replicate with a gradient partial over TP
   (summed by DDP over TP on the owned range), w2 replicated; a layer's group is
   then three buckets (the partial dims split it), gathered together. Each rank's
   local parameters bit for bit equal to ZeRO-1's on the same mesh. */
static int tp_rank(vs_world* w, void* arg)
{
    cfg* c = (cfg*)arg;
    int me = vs_world_rank(w);
    vs_mesh* mesh = dc_mesh(w, 0, 0, c->dp, 2);
    if (!mesh) return 1;
    int dpc = vs_mesh_coord_along(mesh, "DP"), tpc = vs_mesh_coord_along(mesh, "TP");
    vs_ddp* d = NULL;
    vs_ddp_desc dd = make_desc(mesh, c, c->zero);
    VT_OK(vs_ddp_init(&dd, &d));
    if (!d) return 1;
    int64_t n[NK], off[NK]; // local size and first global element of each kind
    int idx[NK][L];
    for (int k = 0; k < NK; k++) {
        n[k] = k == 0 ? ksz[k] / 2 : ksz[k];
        off[k] = k == 0 ? tpc * n[k] : 0;
        float* data = (float*)malloc(sizeof(float) * (size_t)(n[k] * L));
        for (int l = 0; l < L; l++)
            for (int64_t e = 0; e < n[k]; e++) data[l * n[k] + e] = init_value(flat(l, k, off[k] + e), k);
        vs_ddp_param_desc pd;
        memset(&pd, 0, sizeof pd);
        pd.name = kname[k];
        pd.dtype = VS_F32;
        pd.ndim = 1;
        pd.shape[0] = ksz[k];
        pd.placements[1] = k == 0 ? vs_shard(0) : k == 1 ? vs_partial(VS_OP_SUM) : vs_replicate();
        pd.data = data;
        pd.layers = L;
        pd.ready_group = 1;
        int first = -1;
        VT_OK(vs_ddp_add_param(d, &pd, &first));
        for (int l = 0; l < L; l++) idx[k][l] = first + l;
        free(data);
    }
    VT_OK(vs_ddp_finalize(d));
    float* tmp = (float*)malloc(2 * sizeof(float) * (size_t)ksz[0]);
    for (int s = 0; s < STEPS; s++) {
        VT_OK(vs_ddp_zero_grad(d));
        double fs = 0;
        for (int l = 0; l < L; l++) {
            VT_OK(vs_ddp_gather(d, l + 1));
            for (int k = 0; k < NK; k++) {
                const void* p = vs_ddp_param(d, idx[k][l]);
                VT_CHECK(p != NULL, "forward: '%s' layer %d: %s", kname[k], l, vs_last_error());
                if (p) p = host_view(p, (size_t)n[k] * 4, tmp);
                for (int64_t e = 0; p && e < n[k]; e++) fs += ((const float*)p)[e] * (double)(e % 7 + 1);
            }
            VT_OK(vs_ddp_release(d, l + 1));
        }
        c->fsum[me][s] = fs;
        for (int l = L - 1; l >= 0; l--) {
            VT_OK(vs_ddp_gather(d, l + 1));
            for (int k = 0; k < NK; k++) {
                const void* pd = vs_ddp_param(d, idx[k][l]);
                void* gd = vs_ddp_grad(d, idx[k][l]);
                VT_CHECK(pd && gd, "'%s': %s", kname[k], vs_last_error());
                if (!pd || !gd) continue;
                const float* p = (const float*)host_view(pd, (size_t)n[k] * 4, tmp);
                float* g = (float*)host_view(gd, (size_t)n[k] * 4, tmp + ksz[0]);
                for (int64_t e = 0; e < n[k]; e++) {
                    float v = 0.1f * p[e] + h_value(dpc, c->dp, s, 0, flat(l, k, off[k] + e));
                    g[e] += k == 1 ? v * (float)(tpc + 1) / 3.0f : v; // (partial: the TP ranks' parts sum to v)
                }
                put_back(gd, g, (size_t)n[k] * 4);
            }
            VT_OK(vs_ddp_group_ready(d, l + 1));
            VT_OK(vs_ddp_release(d, l + 1));
        }
        VT_OK(vs_ddp_finish_grad_sync(d));
        double norm = 0;
        VT_OK(vs_ddp_clip_grad_norm(d, 0.5, &norm));
        if (me == 0) c->norm[s] = norm;
        VT_OK(vs_ddp_step(d, 0.01));
    }
    int64_t at = 0;
    for (int l = 0; l < L; l++) {
        VT_OK(vs_ddp_gather(d, l + 1));
        for (int k = 0; k < NK; k++) {
            const void* p = vs_ddp_param(d, idx[k][l]);
            if (p) p = host_view(p, (size_t)n[k] * 4, tmp);
            for (int64_t e = 0; p && e < n[k]; e++) c->out[me][at++] = ((const float*)p)[e];
        }
        VT_OK(vs_ddp_release(d, l + 1));
    }
    free(tmp);
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

static void case_tp(int dp)
{
    cfg* z[2];
    for (int i = 0; i < 2; i++) {
        z[i] = (cfg*)calloc(1, sizeof(cfg));
        z[i]->dp = dp;
        z[i]->zero = i ? VS_ZERO_1 : VS_ZERO_3;
        VT_OK(launch(2 * dp, tp_rank, z[i], NULL));
    }
    double tol = DEV && dp > 2 ? 1e-6 : 0; // (see same_bits)
    for (int r = 0; r < 2 * dp; r++) {
        int64_t diff = 0;
        for (int64_t x = 0; x < TOTAL; x++) {
            double a = z[0]->out[r][x], b = z[1]->out[r][x];
            diff += tol ? fabs(a - b) > tol * (fabs(b) + 1e-3) : memcmp(&z[0]->out[r][x], &z[1]->out[r][x], 4) != 0;
        }
        VT_CHECK(diff == 0, "rank %d: %lld parameters differ from ZeRO-1's", r, (long long)diff);
        for (int s = 0; s < STEPS && !tol; s++)
            VT_CHECK(z[0]->fsum[r][s] == z[1]->fsum[r][s], "rank %d step %d: forward checksum %.17g vs %.17g", r, s,
                     z[0]->fsum[r][s], z[1]->fsum[r][s]);
    }
    for (int s = 0; s < STEPS; s++)
        VT_CHECK(tol ? fabs(z[0]->norm[s] - z[1]->norm[s]) <= tol * z[1]->norm[s] : z[0]->norm[s] == z[1]->norm[s],
                 "step %d: norm %.17g vs %.17g", s, z[0]->norm[s], z[1]->norm[s]);
    free(z[0]), free(z[1]);
}

/* Checkpoints of the DDP state: ZeRO-3 saves each parameter's owned range (as
   the optimizer state); loads reshard to ZeRO-1 and to other DP sizes, and a
   ZeRO-1 file loads into ZeRO-3. Training on from a load equals training on. */
static void case_ckpt(void)
{
    char dir[] = "/tmp/vs_zero3_XXXXXX", p3[96], p1[96];
    VT_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(p3, sizeof p3, "%s/z3", dir);
    snprintf(p1, sizeof p1, "%s/z1", dir);
    cfg t;
    memset(&t, 0, sizeof t);
    t.save = p3, t.save_after = 2;
    cfg* a = run(2, VS_ZERO_3, &t); // 3 steps, saved after 2
    memset(&t, 0, sizeof t);
    t.s1 = 2, t.save = p1, t.save_after = 2;
    cfg* at2 = run(2, VS_ZERO_1, &t); // ZeRO-1's 2 steps, saved (equal to ZeRO-3's bit for bit)
    memset(&t, 0, sizeof t);
    t.load = p3, t.s0 = 2;
    cfg* b = run(2, VS_ZERO_3, &t); // on from the file: step 3
    cfg* c = run(2, VS_ZERO_1, &t);
    same_bits_from("ZeRO-3 DP2 file, ZeRO-3 DP2 on from it", b, a, 2);
    same_bits_from("ZeRO-3 DP2 file, ZeRO-1 DP2 on from it", c, a, 2);
    t.s1 = 2; // no step: the loaded parameters
    cfg* e = run(4, VS_ZERO_3, &t);
    cfg* f = run(4, VS_ZERO_1, &t);
    t.load = p1;
    cfg* g = run(4, VS_ZERO_3, &t);
    for (int r = 0; r < 4; r++) {
        const cfg* got[3] = {e, f, g};
        for (int i = 0; i < 3; i++)
            VT_CHECK(memcmp(got[i]->out[r], at2->out[0], sizeof(float) * TOTAL) == 0,
                     "%s DP4 rank %d: the loaded parameters differ from the saved ones",
                     i == 0 ? "ZeRO-3 file into ZeRO-3" : i == 1 ? "ZeRO-3 file into ZeRO-1" : "ZeRO-1 file into ZeRO-3", r);
    }
    free(a), free(at2), free(b), free(c), free(e), free(f), free(g);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    VT_CHECK(system(cmd) == 0, "%s", cmd);
}

/* A NaN gradient on one rank: every rank skips that step; equal to ZeRO-1 doing the same. */
static void case_nonfinite(void)
{
    cfg t;
    memset(&t, 0, sizeof t);
    t.clip = 1.0;
    t.nan_step = 2;
    cfg* z3 = run(2, VS_ZERO_3, &t);
    cfg* z1 = run(2, VS_ZERO_1, &t);
    VT_CHECK(z3->skipped == 1, "skipped %lld steps, want 1", (long long)z3->skipped);
    VT_CHECK(!(z3->norm[1] == z3->norm[1]), "step 2's norm %g, want NaN", z3->norm[1]);
    // (the NaN norm compares unequal to itself: compare parameters only)
    int64_t diff = 0;
    for (int64_t x = 0; x < TOTAL; x++) diff += memcmp(&z3->out[0][x], &z1->out[0][x], sizeof(float)) != 0;
    VT_CHECK(diff == 0, "%lld parameters differ from ZeRO-1's", (long long)diff);
    free(z3), free(z1);
}

/* ---- bad input ---- */

static int rank_bad(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh* mesh = dc_mesh_1d(w);
    if (!mesh) return 1;
    cfg t;
    memset(&t, 0, sizeof t);
    vs_ddp* d = NULL;
    vs_ddp_desc dd = make_desc(mesh, &t, (vs_zero_stage)4);
    vs_result r = vs_ddp_init(&dd, &d);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "zero stage 4"), "zero 4: %d %s", r, vs_last_error());
    dd = make_desc(mesh, &t, VS_ZERO_3);
    dd.prefetch = -1;
    r = vs_ddp_init(&dd, &d);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "prefetch -1"), "prefetch -1: %d %s", r, vs_last_error());
    dd = make_desc(mesh, &t, VS_ZERO_3);
    dd.reshard_after_forward = 2;
    r = vs_ddp_init(&dd, &d);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "reshard_after_forward 2"), "rsf 2: %d %s", r,
             vs_last_error());
    dd = make_desc(mesh, &t, VS_ZERO_3);
    VT_OK(vs_ddp_init(&dd, &d));
    if (!d) return 1;
    vs_ddp_desc q;
    VT_OK(vs_ddp_query_desc(d, &q));
    VT_CHECK(q.prefetch == 1 && q.reshard_after_forward == 1 && q.prefetch_set && q.reshard_after_forward_set,
             "defaults: prefetch %d reshard_after_forward %d", q.prefetch, q.reshard_after_forward);
    // registration: group 0 and trainer-owned storage refused, naming the parameter; nothing registered
    float st[8], gst[8];
    vs_ddp_param_desc pd;
    memset(&pd, 0, sizeof pd);
    pd.name = "loose";
    pd.dtype = VS_F32;
    pd.ndim = 1;
    pd.shape[0] = 8;
    r = vs_ddp_add_param(d, &pd, NULL);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "'loose'") && strstr(vs_last_error(), "ready_group 0"),
             "group 0: %d %s", r, vs_last_error());
    pd.ready_group = 9;
    pd.storage = st, pd.grad_storage = gst;
    r = vs_ddp_add_param(d, &pd, NULL);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "'loose'") && strstr(vs_last_error(), "ZeRO-3"),
             "storage: %d %s", r, vs_last_error());
    VT_CHECK(vs_ddp_num_params(d) == 0, "%d parameters registered by refused calls", vs_ddp_num_params(d));
    int idx[NK][L];
    add_model(d, 0, idx);
    r = vs_ddp_gather(d, 1);
    VT_CHECK(r == VS_ERR_STATE && strstr(vs_last_error(), "finalize"), "gather before finalize: %d %s", r,
             vs_last_error());
    VT_CHECK(vs_ddp_set_group_reshard(d, 9, 0) == VS_ERR_INVALID && strstr(vs_last_error(), "ready_group 9"),
             "reshard of group 9: %s", vs_last_error());
    VT_CHECK(vs_ddp_set_group_reshard(d, 1, 3) == VS_ERR_INVALID && strstr(vs_last_error(), "3"),
             "reshard 3: %s", vs_last_error());
    VT_OK(vs_ddp_finalize(d));
    // unknown groups, release of what is not gathered, a view of an ungathered parameter
    r = vs_ddp_gather(d, 99);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "ready_group 99"), "gather 99: %d %s", r, vs_last_error());
    r = vs_ddp_gather(d, 0);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "group 0"), "gather 0: %d %s", r, vs_last_error());
    r = vs_ddp_release(d, 2);
    VT_CHECK(r == VS_ERR_STATE && strstr(vs_last_error(), "group 2 is not gathered"), "release 2: %d %s", r,
             vs_last_error());
    const void* p = vs_ddp_param(d, idx[0][1]);
    VT_CHECK(!p && strstr(vs_last_error(), "'h.1.w1'") && strstr(vs_last_error(), "ready group 2") &&
                 strstr(vs_last_error(), "vs_ddp_gather"),
             "param of an ungathered group: %p %s", p, vs_last_error());
    VT_OK(vs_ddp_set_sync(d, 0)); // (ZeRO-3 accumulates without sync: case_nosync)
    VT_OK(vs_ddp_set_sync(d, 1));
    // the owned shards' storage and vs_ddp_write_param: refused while the group is gathered, bad arguments
    size_t ob = 0;
    VT_OK(vs_ddp_owned_bytes(d, 2, &ob));
    VT_CHECK(ob >= (size_t)per_layer() * 4 / 2 && ob <= ((size_t)per_layer() + 64) * 4, "group 2 owns %zu bytes", ob);
    size_t ob99 = 1;
    VT_CHECK(vs_ddp_owned_bytes(d, 99, &ob99) == VS_ERR_INVALID && strstr(vs_last_error(), "ready_group 99") && !ob99,
             "owned_bytes 99: %zu %s", ob99, vs_last_error());
    float* ostore = NULL;
    float* ones1 = (float*)malloc(sizeof(float) * (size_t)ksz[0]);
    for (int64_t e = 0; e < ksz[0]; e++) ones1[e] = 1.0f;
#if DEV
    VT_CHECK(cudaMalloc((void**)&ostore, ob + 64) == cudaSuccess, "cudaMalloc");
#else
    VT_CHECK(posix_memalign((void**)&ostore, 16, ob + 64) == 0, "posix_memalign");
#endif
    r = vs_ddp_set_owned_storage(d, 2, (char*)ostore + 4);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "16-byte"), "unaligned storage: %d %s", r, vs_last_error());
    VT_CHECK(vs_ddp_set_owned_storage(d, 2, NULL) == VS_ERR_NULL, "NULL storage: %s", vs_last_error());
    VT_CHECK(vs_ddp_write_param(d, idx[0][1], NULL) == VS_ERR_NULL, "write NULL: %s", vs_last_error());
    VT_OK(vs_ddp_gather(d, 2));
    r = vs_ddp_set_owned_storage(d, 2, ostore);
    VT_CHECK(r == VS_ERR_STATE && strstr(vs_last_error(), "group 2 is gathered"), "storage while gathered: %d %s", r,
             vs_last_error());
    r = vs_ddp_write_param(d, idx[0][1], ones1);
    VT_CHECK(r == VS_ERR_STATE && strstr(vs_last_error(), "'h.1.w1'") && strstr(vs_last_error(), "gathered"),
             "write while gathered: %d %s", r, vs_last_error());
    p = vs_ddp_param(d, idx[0][1]);
    VT_CHECK(p && read_f32(p, 5) == init_value(flat(1, 0, 5), 0), "the gathered view: %p", p);
    r = vs_ddp_set_group_reshard(d, 2, 0);
    VT_CHECK(r == VS_ERR_STATE && strstr(vs_last_error(), "group 2 is gathered"), "reshard while gathered: %d %s", r,
             vs_last_error());
    // a step while a group is held: refused, nothing changed; after the release it goes
    float* ones = (float*)malloc(sizeof(float) * (size_t)ksz[0]);
    for (int64_t e = 0; e < ksz[0]; e++) ones[e] = 1.0f;
    for (int l = L - 1; l >= 0; l--) {
        for (int k = 0; k < NK; k++) {
            float* g = (float*)vs_ddp_grad(d, idx[k][l]);
#if DEV
            if (g) put_back(g, ones, sizeof(float) * (size_t)ksz[k]);
#else
            if (g) memcpy(g, ones, sizeof(float) * (size_t)ksz[k]);
#endif
        }
        VT_OK(vs_ddp_group_ready(d, l + 1));
    }
    VT_OK(vs_ddp_finish_grad_sync(d));
    r = vs_ddp_step(d, 0.01);
    VT_CHECK(r == VS_ERR_STATE && strstr(vs_last_error(), "group 2 is still gathered"), "step while held: %d %s", r,
             vs_last_error());
    VT_CHECK(vs_ddp_step_count(d) == 0, "the refused step counted");
    VT_CHECK(read_f32(p, 5) == init_value(flat(1, 0, 5), 0), "the refused step changed the view");
    free(ones);
    VT_OK(vs_ddp_release(d, 2));
    r = vs_ddp_release(d, 2);
    VT_CHECK(r == VS_ERR_STATE && strstr(vs_last_error(), "group 2 is not gathered"), "release twice: %d %s", r,
             vs_last_error());
    VT_OK(vs_ddp_step(d, 0.01));
    VT_CHECK(vs_ddp_step_count(d) == 1, "step count %lld", (long long)vs_ddp_step_count(d));
    VT_OK(vs_ddp_set_owned_storage(d, 2, ostore)); // (the stepped shard moves in: the gathers read it)
    VT_OK(vs_ddp_gather(d, 2));
    p = vs_ddp_param(d, idx[0][1]);
    VT_CHECK(p && read_f32(p, 5) != init_value(flat(1, 0, 5), 0), "the step did not reach the gathered view");
    VT_OK(vs_ddp_release(d, 2));
    VT_OK(vs_ddp_write_param(d, idx[0][1], ones1)); // (into the trainer's storage, read by the gather)
    VT_OK(vs_ddp_gather(d, 2));
    p = vs_ddp_param(d, idx[0][1]);
    VT_CHECK(p && read_f32(p, 5) == 1.0f && read_f32(p, ksz[0] - 1) == 1.0f, "written ones, gathered: %g %g",
             p ? read_f32(p, 5) : 0.0, p ? read_f32(p, ksz[0] - 1) : 0.0);
    VT_OK(vs_ddp_release(d, 2));
    VT_OK(vs_ddp_free(d));
    // other stages: gather and release check the group, and do nothing
    dd = make_desc(mesh, &t, VS_ZERO_1);
    VT_OK(vs_ddp_init(&dd, &d));
    add_model(d, 0, idx);
    VT_OK(vs_ddp_finalize(d));
    VT_OK(vs_ddp_gather(d, 1));
    VT_OK(vs_ddp_release(d, 1));
    VT_OK(vs_ddp_release(d, 1));
    VT_CHECK(vs_ddp_gather(d, 99) == VS_ERR_INVALID, "ZeRO-1 gather 99: %s", vs_last_error());
    VT_CHECK(vs_ddp_param(d, 0) != NULL, "ZeRO-1: vs_ddp_param %s", vs_last_error());
    VT_CHECK(vs_ddp_owned_bytes(d, 1, &ob99) == VS_ERR_UNSUPPORTED && strstr(vs_last_error(), "ZeRO-1"),
             "ZeRO-1 owned_bytes: %s", vs_last_error());
    VT_OK(vs_ddp_free(d));
    dd = make_desc(mesh, &t, VS_ZERO_2);
    VT_OK(vs_ddp_init(&dd, &d));
    r = vs_ddp_set_sync(d, 0);
    VT_CHECK(r == VS_ERR_UNSUPPORTED && strstr(vs_last_error(), "ZeRO-2"), "ZeRO-2 set_sync 0: %d %s", r,
             vs_last_error());
    VT_OK(vs_ddp_free(d));
#if DEV
    cudaFree(ostore);
#else
    free(ostore);
#endif
    free(ones1);
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

#if !DEV
/* VESCALE_DEBUG=params: a view read after its group's release faults, naming the
   group and a parameter (the released buffer's pages are inaccessible); reads
   while it is gathered do not. Run in a child process, whose stderr and end
   come back. */
static int rank_stale(vs_world* w, void* arg)
{
    int read_after = *(int*)arg;
    vs_mesh* mesh = dc_mesh_1d(w);
    cfg t;
    memset(&t, 0, sizeof t);
    vs_ddp* d = NULL;
    vs_ddp_desc dd = make_desc(mesh, &t, VS_ZERO_3);
    VT_OK(vs_ddp_init(&dd, &d));
    int idx[NK][L];
    add_model(d, 0, idx);
    VT_OK(vs_ddp_finalize(d));
    VT_OK(vs_ddp_gather(d, 2));
    volatile const float* p = (const float*)vs_ddp_param(d, idx[0][1]);
    float v = p ? p[100] : 0;
    VT_CHECK(v == init_value(flat(1, 0, 100), 0), "the gathered view holds %g", v);
    VT_OK(vs_ddp_release(d, 2));
    VT_OK(vs_barrier(vs_world_comm(w), NULL));
    if (read_after && vs_world_rank(w) == 0) v = p[100]; // (faults here)
    VT_OK(vs_barrier(vs_world_comm(w), NULL));
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    return v == 12345.0f;
}
static int in_child(int (*fn)(vs_world*, void*), void* arg, char* out, size_t cap)
{
    int pfd[2];
    if (pipe(pfd) != 0) return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 2);
        close(pfd[0]);
        setenv("VESCALE_DEBUG", "params", 1);
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
static void case_stale(void)
{
    for (int after = 0; after < 2; after++) {
        char out[8192];
        int status = in_child(rank_stale, &after, out, sizeof out);
        if (!after)
            VT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "reads while gathered: the child failed (status "
                     "%d): %s", status, out);
        else
            VT_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV && strstr(out, "ready group 2 ('h.1.") &&
                         strstr(out, "after vs_ddp_release"),
                     "a read after the release: status %d (signal %d), stderr: %s", status,
                     WIFSIGNALED(status) ? WTERMSIG(status) : 0, out);
    }
}
#endif

/* Ranks with different prefetch settings would run different gathers: refused by finalize. */
static int rank_mismatch(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh* mesh = dc_mesh_1d(w);
    if (!mesh) return 1;
    cfg t;
    memset(&t, 0, sizeof t);
    t.prefetch = vs_world_rank(w) + 1;
    vs_ddp* d = NULL;
    vs_ddp_desc dd = make_desc(mesh, &t, VS_ZERO_3);
    VT_OK(vs_ddp_init(&dd, &d));
    int idx[NK][L];
    add_model(d, 0, idx);
    vs_result r = vs_ddp_finalize(d);
    VT_CHECK(r == VS_ERR_MISMATCH && strstr(vs_last_error(), "prefetch 1") && strstr(vs_last_error(), "has 2"),
             "finalize with prefetch %d: %d %s", t.prefetch, r, vs_last_error());
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

int main(void)
{
    static cfg t; // (large: not on the stack)
    VT_CASE("ZeRO-3 DP2 f32 AdamW: bit for bit ZeRO-1, one rank within 1e-6; owned ranges partition", case_equal(2, NULL, 1));
    VT_CASE("ZeRO-3 DP4 f32 AdamW", case_equal(4, NULL, 1));
    VT_CASE("ZeRO-3 DP2 f32 SGD with momentum, clip (clipping every step): ZeRO-1 bits, one rank within 1e-6", {
        memset(&t, 0, sizeof t);
        t.sgd = 1;
        t.clip = 0.5;
        case_equal(2, &t, 1);
    });
    VT_CASE("ZeRO-3 DP4 accumulation over 3 micro-batches (a reduce-scatter each), clip measured", {
        memset(&t, 0, sizeof t);
        t.micro = 3;
        t.clip = -1;
        case_equal(4, &t, 1);
    });
    /* ZeRO-1 scales a bf16 gradient in its bf16 buffer (rounded), ZeRO-2/3 in the f32
       accumulator: with a clip that scales, ZeRO-2 is the one with the same arithmetic */
    VT_CASE("ZeRO-3 DP2 bf16 (f32 masters sharded, bf16 gradients): ZeRO-1 bit for bit; clipped: ZeRO-2 bit for bit", {
        memset(&t, 0, sizeof t);
        t.bf16 = 1;
        case_equal(2, &t, 1);
        t.clip = 1.0;
        case_equal(2, &t, 2);
    });
    VT_CASE("ZeRO-3 DP4 bf16, grad_fp32, 2 micro-batches: ZeRO-1 bit for bit", {
        memset(&t, 0, sizeof t);
        t.bf16 = 1;
        t.grad_fp32 = 1;
        t.micro = 2;
        case_equal(4, &t, 1);
    });
    VT_CASE("DP2 x TP2: a TP-sharded, a TP-partial (a group of three buckets) and a replicated kind, clipped: each "
            "rank bit for bit ZeRO-1", case_tp(2));
    VT_CASE("prefetch 0/1/3 and reshard_after_forward 0: equal results; the gathered pool holds 1, 2 or L groups",
            case_prefetch());
    VT_CASE("an eval forward between steps: the next training forward prefetches from its first gather, results "
            "equal; 2 micro-batches keep the last backward group for the next pass", case_eval());
    VT_CASE("memory DP2 f32: at rest <= 1.05 x total/DP + padding; hooks equal vs_ddp_memory_usage; peak = formula; "
            "no allocation in a step", case_memory(2, 0));
    VT_CASE("memory DP4 f32", case_memory(4, 0));
    VT_CASE("memory DP4 bf16", case_memory(4, 1));
    VT_CASE("ZeRO-3 accumulation without sync (3 micro-batches, one reduce-scatter a step), DP2 and DP4: ZeRO-1 bit "
            "for bit, one rank within 1e-6; the staging pool a buffer a bucket, no allocation in a step", {
        case_nosync(2);
        case_nosync(4);
    });
    VT_CASE("registration DP4 f32 and DP2 bf16: data NULL + vs_ddp_write_param after finalize peaks at the owned "
            "shards (with data: the whole model); equal bit for bit", {
        case_registration(4, 0);
        case_registration(2, 1);
    });
    VT_CASE("checkpoints: ZeRO-3 DP2 saved (owned ranges) trains on equal as ZeRO-3 and ZeRO-1; loads into ZeRO-3 and "
            "ZeRO-1 DP4, and a ZeRO-1 file into ZeRO-3 DP4, give the saved parameters", case_ckpt());
    VT_CASE("a NaN gradient on one rank: the step is skipped on every rank, as ZeRO-1", case_nonfinite());
    VT_CASE("bad input: zero 4, prefetch -1, reshard 2, group 0, storage, unknown group, release twice, a view "
            "ungathered, a step while held, ZeRO-2 set_sync 0, owned storage (unaligned, NULL, while gathered, ZeRO-1), "
            "write_param while gathered; ZeRO-1's calls do nothing", VT_OK(launch(2, rank_bad, NULL, NULL)));
#if !DEV
    VT_CASE("VESCALE_DEBUG=params: a view read after vs_ddp_release faults naming its group (and one of its parameters)",
            case_stale());
#endif
    VT_CASE("ranks with different prefetch: vs_ddp_finalize refuses on every rank, naming both values",
            VT_OK(launch(2, rank_mismatch, NULL, NULL)));
#ifdef VS_STRICT
    VT_CASE("strict/no violations", VT_CHECK(vs_strict_violations() == 0, "%s", vs_strict_first_violation()));
#endif
    return vt_summary();
}
