/* bench/ddp.c - DDP gradient sync overlapped with a modelled backward, against the two
   lower bounds measured in the same run; and the optimizer-state memory of ZeRO-0/1/2.
   Threads transport only (no MPI).

       build/bench_ddp [--layers L] [--layer-mib M] [--bucket-layers K[,K..]]
                       [--zero 0,1,2] [--layouts ddp,contiguous,strided]
                       [--factors 1,2] [--steps S] [--warmup W] [--calib C] [--no-memory]
       build/bench_ddp --zero 3 [options of bench_ddp_zero3]

   --zero 3 (ZeRO-3: gathers in the forward and the backward, prefetch, another
   step than the one below) runs build/bench_ddp_zero3 (bench/ddp_zero3.c), from
   the directory of this program, with the other options.

   4 thread ranks (vs_launch_ex), a 1-D mesh {4} named DP. The model: L layers
   (default 16), each one f32 parameter of M MiB (default 4: 1 Mi floats, 64 MiB of
   gradients in all), registered first to last. bucket_bytes = K layers (default 1:
   4 MiB, 16 buckets; a list runs every bucket size).

   Layouts (issue 22: a trainer's own flat buffers), each timed as below:
       ddp         the model above: one parameter a layer, in DDP's own buffers
       contiguous  the trainer's flat parameter and gradient buffers (vs_ddp_param_desc
                   .storage, .grad_storage), a layer as llm.c's 12 tensors of a
                   transformer block of width C (ln_1 w/b, qkv w/b, attention proj w/b,
                   ln_2 w/b, fc w/b, mlp proj w/b: 12C^2 + 13C elements, C the largest
                   width within M MiB), laid out layer after layer
       strided     the same tensors in llm.c's layout: each kind contiguous across the
                   layers (every layer's ln_1 weight, then every layer's ln_1 bias, ...),
                   so a layer's 12 tensors are spread over the whole buffer
   The last two register every tensor layer by layer as a view into the two buffers,
   with ready_group = a bucket of K layers (bucket_bytes does not apply), and mark a
   layer's 12 gradients ready when its modelled compute ends. DDP's defaults reduce
   them: ZeRO-0 in place, a grouped call a tensor; ZeRO-1 packed into a staging
   buffer a bucket (bench/ddp_ext.c compares staged and grouped syncs alone). ZeRO-2
   is refused for trainer-owned storage: they run under ZeRO-0 and ZeRO-1 only. The
   two share one pair of buffers per rank (their DDPs never run at once).

   One step = the backward and the gradient sync (no optimizer step, no zero_grad):

       t0 = now
       for l = L-1 .. 0:                       (backward produces the last layer first)
           g = vs_ddp_grad(ddp, l)             (ddp layout; ZeRO-2: may wait for a staging buffer)
           sleep until t0 + (L-l) * t_layer    (the layer's compute)
           vs_ddp_grad_ready(ddp, l)           (a full bucket starts reducing now;
                                                contiguous, strided: the layer's 12 tensors)
       vs_ddp_finish_grad_sync(ddp)
   (each step starts with vs_ddp_zero_grad, outside the timed region)

   The compute is modelled device time: the thread sleeps (clock_nanosleep to an
   absolute deadline), holding no core, as a host thread waiting for a GPU kernel
   would; so 4 ranks on a 2-core machine behave like 4 devices, and the cores are
   left to the transport's progress threads, which run the asynchronous reductions.
   The deadlines are absolute (a device timeline: kernels run back to back
   whatever the host does), so a late wake-up or a slow grad_ready delays later
   layers only when the host falls behind the modelled device. The gradients are
   not rewritten (their values do not matter to the time; a "kernel" writes them).

   Variants, per ZeRO stage z and bucket size (a "config"), each with its own DDP:
       comm        lower bound: every gradient marked ready at once (no sleeps),
                   then finish_grad_sync: the async sync of the buckets alone
       comm_block  the same on the no_overlap DDP (blocking reductions in finish)
   and per compute factor f (compute = f x comm of the config; default 1 and 2):
       compute     lower bound: the sleeps alone, no DDP call at all
       overlapped  desc.no_overlap = 0 (buckets reduce while later layers compute)
       no_overlap  desc.no_overlap = 1 (everything reduces in finish_grad_sync)
   ZeRO-2 keeps the default 2 staging buffers: with no_overlap it reduces a bucket
   (blocking) when it runs out of them, in the middle of the backward.
   Calibration first: C (default 5) steps of `comm` per config (after 2 untimed),
   rotated over the configs; their median sets t_layer = f * comm / L. Then W
   (default 5) warm-up rounds and S (default 21) timed rounds; a round runs every
   variant once, in an order rotated by one each round (round-robin), so noise
   from other jobs hits them alike. After each warm-up round t_layer is set again
   from the median `comm` of the warm-up rounds so far: `comm` measured among the
   other variants, as the timed steps are, is what compute must match (alone, back
   to back, it differs on a loaded machine). A barrier before every step; a step's
   time is the max over ranks; a variant reports the median step.
   ratio_vs_max_bound = overlapped / max(compute, comm), target <= 1.15 (ZeRO-0
   and ZeRO-1; ZeRO-2 is reported, no target). no_overlap_ratio = no_overlap /
   max(compute, comm) (about (compute + comm) / max without overlap);
   overlap_speedup = no_overlap / overlapped. The table also gives the measured
   compute / comm: factor 1 is the hard point (the sync can hide only behind as
   much compute as there is), and the last bucket, holding the first layers'
   gradients, can start only when the backward ends, so overlapped >= compute +
   (its reduction) ~ compute + comm / buckets.

   Correctness (before any timing): one backward per DDP with gradient j of every
   parameter on rank r = (r+1)(j%7+1); after the sync ZeRO-0 must hold 2.5(j%7+1) in
   every element, and every stage's vs_ddp_clip_grad_norm (measure only) must give
   the norm of those values. Trainer-owned layouts: the gradients are written into
   the trainer's buffer, vs_ddp_grad must be that very view (no copy), and ZeRO-0's
   averages are read back from it.

   Memory (vs_ddp_memory_usage, rank 0, bytes per rank): the same L weights plus a
   1000-element norm per layer (odd sizes: padding), AdamW, ZeRO-0/1/2 at DP=4, f32
   and bf16 (bf16 keeps fp32 master weights of the owned range), with the default
   bucket_bytes (32 MiB) and with the first timed one. optim_state ratio ZeRO-z /
   ZeRO-0: expected 1/4 (+ padding); vs_ideal_1/dp = optim_state / (8 bytes x
   elements / 4).

   Summary lines start with "summary " (grep them); those of the contiguous and strided
   layouts say layout=, and "summary layouts" puts the layouts' ratios side by side. Exit status: non-zero when a
   result was wrong or a call failed; a missed target only prints FAIL. */
#define VESCALE_IMPLEMENTATION
#include "vescale_ddp.h"
#include "bench/bench_util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NRANKS 4
#define MAXL 256
#define MAXB 8   /* bucket sizes */
#define MAXF 8   /* compute factors */
#define MAXCFG 24
#define BLOCK 12 /* tensors of a layer in the contiguous and strided layouts */
#define MAXV 160
#define NORM_NUMEL 1000 /* memory model: a norm per layer */
#define TARGET 1.15
#define MIB ((size_t)1 << 20)

enum { V_COMM, V_COMM_BLOCK, V_COMPUTE, V_OVL, V_NOOVL, NKIND };
static const char* const kind_name[NKIND] = {"comm", "comm_block", "compute", "overlapped",
                                             "no_overlap"};
enum { L_DDP, L_CONTIG, L_STRIDED, NLAYOUT };
static const char* const layout_name[NLAYOUT] = {"ddp", "contiguous", "strided"};

typedef struct opts {
    int layers;
    double layer_mib;
    int bucket_layers[MAXB], nbuckets;
    int zero[3], nzero;
    int layouts[NLAYOUT], nlayouts;
    double factors[MAXF];
    int nfactors;
    int steps, warmup, calib;
    int memory;
} opts;

typedef struct config { /* a layout, a ZeRO stage and a bucket size: two DDPs per rank */
    int layout, zero, bucket_layers;
    double comm_calib; /* comm alone, calibration steps (s) */
    double comm_warm;  /* comm in the warm-up rounds (s): sets t_layer */
} config;

typedef struct variant {
    int kind, cfg, fi; /* fi: factor index (compute, overlapped, no_overlap) */
    long t_layer_ns;   /* set by the calibration, reset by the warm-up rounds */
} variant;

typedef struct memrow {
    int64_t bucket_bytes; /* 0: the default */
    int zero;
    vs_dtype dt;
    vs_ddp_memory m;
} memrow;

typedef struct tctx { /* shared by the thread ranks */
    const opts* o;
    int ncfg, nv;
    config cfg[MAXCFG];
    variant v[MAXV];
    int64_t numel;        /* per layer */
    int64_t block[BLOCK]; /* contiguous, strided: the sizes of a layer's tensors */
    int64_t block_numel;  /* their sum, <= numel */
    int storage;          /* 1: some config uses the trainer's buffers */
    double* t;            /* [v][rank][step] seconds */
    int tsteps;           /* steps allotted per variant in t */
    double res[MAXV];     /* median step (s), rank 0 fills */
    double paired[MAXCFG][MAXF]; /* paired_ratio, rank 0 fills */
    long bad[NRANKS];     /* wrong elements in the check */
    double norm_err[MAXCFG][2][NRANKS]; /* relative error of the norm (2 DDPs) */
    int err[NRANKS];
    memrow mem[12];
    int nmem;
    double t_calib, t_main, t_mem;
} tctx;


/* Sleeps until CLOCK_MONOTONIC time `t0 + ns` (no core held; returns at once when
   the deadline has passed). */
static void sleep_until(const struct timespec* t0, long long ns)
{
    struct timespec dl = *t0;
    long long s = ns / 1000000000LL;
    dl.tv_sec += (time_t)s;
    dl.tv_nsec += (long)(ns - s * 1000000000LL);
    if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &dl, NULL) == EINTR) {
    }
}

/* vs_ddp_grad gave NULL: its message (copied: vs_set_error writes the same buffer). */
static vs_result last_error(void)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%.480s", vs_last_error());
    return vs_set_error(VS_ERR_STATE, "%s", msg);
}

/* One step on this rank: the backward of L layers with t_layer_ns of compute each
   (0: none), and the sync on d (NULL: compute alone). per_layer: parameters a layer,
   1 (the ddp layout: DDP's buffer of each layer asked for, as a trainer would) or
   BLOCK (the trainer's own buffers: written in place, nothing to ask). */
static vs_result run_step(vs_ddp* d, int L, int per_layer, long t_layer_ns)
{
    struct timespec t0;
    int l, k;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (l = L - 1; l >= 0; l--) {
        if (d && per_layer == 1 && !vs_ddp_grad(d, l)) return last_error();
        if (t_layer_ns > 0) sleep_until(&t0, (long long)t_layer_ns * (L - l));
        for (k = 0; d && k < per_layer; k++) {
            vs_result r = vs_ddp_grad_ready(d, l * per_layer + k);
            if (r) return r;
        }
    }
    return d ? vs_ddp_finish_grad_sync(d) : VS_OK;
}

/* Element offset of tensor k of layer l in the trainer's flat buffers. */
static int64_t flat_offset(const tctx* T, int layout, int l, int k)
{
    int64_t before = 0;
    int j;
    for (j = 0; j < k; j++) before += T->block[j];
    if (layout == L_CONTIG) return (int64_t)l * T->block_numel + before;  /* layer after layer */
    return (int64_t)T->o->layers * before + (int64_t)l * T->block[k]; /* kind after kind (llm.c) */
}

/* Registers layer l's BLOCK tensors as views into the trainer's buffers flat[0]
   (parameters) and flat[1] (gradients), in ready group `group`. */
static vs_result add_block(vs_ddp* d, const tctx* T, int layout, int l, int group, float* const* flat)
{
    static const char* const kn[BLOCK] = {"ln_1.w", "ln_1.b", "qkv.w",  "qkv.b", "attn_proj.w", "attn_proj.b",
                                          "ln_2.w", "ln_2.b", "fc.w",   "fc.b",  "mlp_proj.w",  "mlp_proj.b"};
    int k;
    for (k = 0; k < BLOCK; k++) {
        vs_ddp_param_desc p;
        char name[48];
        int64_t off = flat_offset(T, layout, l, k);
        vs_result r;
        memset(&p, 0, sizeof p);
        snprintf(name, sizeof name, "h%d.%s", l, kn[k]);
        p.name = name;
        p.dtype = VS_F32;
        p.ndim = 1;
        p.shape[0] = T->block[k];
        p.no_decay = k % 2; /* norms and biases */
        p.storage = flat[0] + off;
        p.grad_storage = flat[1] + off;
        p.ready_group = group;
        if ((r = vs_ddp_add_param(d, &p, NULL))) return r;
    }
    return VS_OK;
}

/* The trainer's gradient of parameter i (NULL: the ddp layout, DDP's own buffers). */
static float* trainer_grad(const tctx* T, int layout, float* const* flat, int i)
{
    return layout == L_DDP ? NULL : flat[1] + flat_offset(T, layout, i / BLOCK, i % BLOCK);
}

/* Index of the variant (kind, cfg, fi), or -1. */
static int find_v(const tctx* T, int kind, int cfg, int fi)
{
    int i;
    for (i = 0; i < T->nv; i++)
        if (T->v[i].kind == kind && T->v[i].cfg == cfg && (kind <= V_COMM_BLOCK || T->v[i].fi == fi)) return i;
    return -1;
}

/* Index in T->t of step `step` of variant vi on rank r. */
static size_t slot(const tctx* T, int vi, int r, int step)
{
    return ((size_t)vi * NRANKS + (size_t)r) * (size_t)T->tsteps + (size_t)step;
}

/* Step s of variant vi: the max over ranks (rank 0, after a barrier). */
static double step_max(const tctx* T, int vi, int s)
{
    double m = 0;
    int k;
    for (k = 0; k < NRANKS; k++)
        if (T->t[slot(T, vi, k, s)] > m) m = T->t[slot(T, vi, k, s)];
    return m;
}

/* Median over steps [0, ns) of the max over ranks of variant vi. */
static double med_max(const tctx* T, int vi, int ns)
{
    double m[1024];
    int s;
    for (s = 0; s < ns; s++) m[s] = step_max(T, vi, s);
    return median(m, ns);
}

/* Median over the timed rounds of overlapped / max(compute, comm) within a round. */
static double paired_ratio(const tctx* T, int cfg, int fi)
{
    double m[1024];
    int s, vo = find_v(T, V_OVL, cfg, fi), vc = find_v(T, V_COMPUTE, cfg, fi), vm = find_v(T, V_COMM, cfg, 0);
    for (s = 0; s < T->o->steps; s++) {
        double c = step_max(T, vc, s), k = step_max(T, vm, s);
        m[s] = step_max(T, vo, s) / (c > k ? c : k);
    }
    return median(m, T->o->steps);
}

/* t_layer of every compute variant: factor x comm / L (comm: the calibration's or
   the warm-up rounds'). */
static void set_t_layer(tctx* T, int warm)
{
    int vi;
    for (vi = 0; vi < T->nv; vi++) {
        variant* v = &T->v[vi];
        const config* cf = &T->cfg[v->cfg];
        double comm = warm ? cf->comm_warm : cf->comm_calib;
        if (v->kind == V_COMPUTE || v->kind == V_OVL || v->kind == V_NOOVL)
            v->t_layer_ns = (long)(T->o->factors[v->fi] * comm / T->o->layers * 1e9 + 0.5);
    }
}
/* A DDP over `mesh` with the bench model (L weights of numel; memory model: plus a
   norm per layer), not yet checked. Layouts contiguous and strided: L blocks of views
   into flat, a ready group per bucket_bytes / (numel f32s) layers. */
static vs_result make_ddp(vs_mesh* mesh, const tctx* T, int layout, int zero, int no_overlap, int64_t bucket_bytes,
                          vs_optim_kind kind, vs_dtype dt, int with_norms, float* const* flat, vs_ddp** out)
{
    vs_ddp* d = NULL;
    vs_result r;
    int l;
    char name[32];
    *out = NULL;
    r = vs_ddp_init(&(vs_ddp_desc){.mesh = mesh,
                                   .zero = (vs_zero_stage)zero,
                                   .no_overlap = no_overlap,
                                   .bucket_bytes = bucket_bytes,
                                   .optim = {.kind = kind, .weight_decay = 0.1}},
                    &d);
    if (r) return r;
    for (l = 0; l < T->o->layers && !r; l++) {
        vs_ddp_param_desc p;
        if (layout != L_DDP) {
            r = add_block(d, T, layout, l, 1 + l / (int)(bucket_bytes / (T->numel * (int64_t)sizeof(float))), flat);
            continue;
        }
        memset(&p, 0, sizeof p);
        snprintf(name, sizeof name, "h%d.w", l);
        p.name = name;
        p.dtype = dt;
        p.ndim = 1;
        p.shape[0] = T->numel;
        r = vs_ddp_add_param(d, &p, NULL);
        if (!r && with_norms) {
            snprintf(name, sizeof name, "h%d.ln", l);
            p.shape[0] = NORM_NUMEL;
            p.no_decay = 1;
            r = vs_ddp_add_param(d, &p, NULL);
        }
    }
    if (!r) r = vs_ddp_finalize(d);
    if (r) {
        vs_ddp_free(d);
        return r;
    }
    *out = d;
    return VS_OK;
}

/* The check backward: gradient j of every parameter on rank r = (r+1)(j%7+1).
   Counts wrong elements (ZeRO-0: every element must be 2.5(j%7+1)) into *bad and
   gives the relative error of the global norm. Also faults every gradient page in.
   Trainer-owned layouts: vs_ddp_grad must be the trainer's own view (one bad count
   per parameter otherwise), and ZeRO-0's averages are read there. */
static vs_result check_ddp(vs_ddp* d, const tctx* T, int layout, float* const* flat, int zero, int rank, long* bad,
                           double* norm_err)
{
    double want = 0, norm = 0;
    int64_t j, n = 0;
    int i, np = vs_ddp_num_params(d);
    vs_result r = vs_ddp_zero_grad(d);
    if (r) return r;
    for (i = np - 1; i >= 0; i--) {
        float* g = (float*)vs_ddp_grad(d, i);
        if (!g) return last_error();
        if (layout != L_DDP && g != trainer_grad(T, layout, flat, i)) {
            fprintf(stderr, "bench: rank %d %s: vs_ddp_grad(%d) is not the trainer's gradient\n", rank,
                    layout_name[layout], i);
            ++*bad;
        }
        n = vs_ddp_local_numel(d, i);
        for (j = 0; j < n; j++) g[j] = (float)((rank + 1) * (int)(j % 7 + 1));
        if ((r = vs_ddp_grad_ready(d, i))) return r;
    }
    if ((r = vs_ddp_finish_grad_sync(d))) return r;
    for (i = 0; i < np; i++) {
        n = vs_ddp_local_numel(d, i);
        for (j = 0; j < n; j++) {
            double v = 2.5 * (double)(j % 7 + 1);
            want += v * v;
        }
        if (zero == VS_ZERO_0) {
            const float* g = layout != L_DDP ? trainer_grad(T, layout, flat, i) : (const float*)vs_ddp_grad_synced(d, i);
            if (!g) return vs_set_error(VS_ERR_STATE, "vs_ddp_grad_synced gave NULL");
            for (j = 0; j < n; j++)
                if (g[j] != (float)(2.5 * (double)(j % 7 + 1))) {
                    if (!*bad)
                        fprintf(stderr, "bench: rank %d zero=0 %s parameter %d element %lld: %g, want %g\n", rank,
                                layout_name[layout], i, (long long)j, (double)g[j], 2.5 * (double)(j % 7 + 1));
                    ++*bad;
                }
        }
    }
    if ((r = vs_ddp_clip_grad_norm(d, 0, &norm))) return r;
    want = sqrt(want);
    *norm_err = fabs(norm - want) / want;
    return VS_OK;
}

static int rank_fn(vs_world* w, void* arg)
{
    tctx* T = (tctx*)arg;
    const opts* o = T->o;
    vs_mesh* mesh = NULL;
    vs_comm* c = NULL;
    int r = vs_comm_rank(vs_world_comm(w)), n = NRANKS, L = o->layers;
    vs_ddp* ddp[MAXCFG][2]; /* [cfg][no_overlap] */
    float* flat[2] = {NULL, NULL}; /* contiguous, strided: the trainer's parameters and gradients */
    int ci, k, vi, round;
    int64_t layer_bytes = T->numel * (int64_t)sizeof(float);
    double t0, ts;
    memset(ddp, 0, sizeof ddp);

    THR_CHK(T, c, r, vs_mesh_init(w, &(vs_mesh_desc){.shape = {n}, .dim_names = {"DP"}}, &mesh), "vs_mesh_init");
    c = vs_mesh_comm(mesh);
    if (T->storage) { /* one pair for every trainer-owned DDP: they never run at once */
        for (k = 0; k < 2; k++)
            if (!(flat[k] = (float*)balloc((size_t)(L * T->block_numel) * sizeof(float))))
                THR_CHK(T, c, r, vs_set_error(VS_ERR_NOMEM, "the trainer's buffers"), "balloc");
    }

    /* every DDP, checked once */
    for (ci = 0; ci < T->ncfg; ci++)
        for (k = 0; k < 2; k++) {
            const config* cf = &T->cfg[ci];
            long bad = 0;
            THR_CHK(T, c, r,
                    make_ddp(mesh, T, cf->layout, cf->zero, k, layer_bytes * cf->bucket_layers, VS_OPTIM_SGD, VS_F32, 0,
                             flat, &ddp[ci][k]),
                    "make_ddp");
            THR_CHK(T, c, r, check_ddp(ddp[ci][k], T, cf->layout, flat, cf->zero, r, &bad, &T->norm_err[ci][k][r]),
                    "check");
            T->bad[r] += bad;
        }
    THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");

    /* calibration: `comm` of every config alone, rotated; then t_layer */
    t0 = now();
    for (round = 0; round < 2 + o->calib; round++)
        for (k = 0; k < T->ncfg; k++) {
            ci = (k + round) % T->ncfg;
            vi = find_v(T, V_COMM, ci, 0);
            THR_CHK(T, c, r, vs_ddp_zero_grad(ddp[ci][0]), "vs_ddp_zero_grad");
            THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");
            ts = now();
            THR_CHK(T, c, r, run_step(ddp[ci][0], L, T->cfg[ci].layout == L_DDP ? 1 : BLOCK, 0), "comm step");
            if (round >= 2) T->t[slot(T, vi, r, round - 2)] = now() - ts;
        }
    THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");
    if (r == 0) {
        for (ci = 0; ci < T->ncfg; ci++) T->cfg[ci].comm_calib = med_max(T, find_v(T, V_COMM, ci, 0), o->calib);
        set_t_layer(T, 0);
        T->t_calib = now() - t0;
    }
    THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");

    /* rounds: every variant once per round, rotated. The warm-up rounds also
       recalibrate: after each, t_layer follows the median `comm` of the warm-up
       rounds so far (measured among the other variants, as the timed steps are). */
    t0 = now();
    for (round = 0; round < o->warmup + o->steps; round++) {
        int warm = round < o->warmup;
        for (k = 0; k < T->nv; k++) {
            vi = (k + round) % T->nv;
            const variant* v = &T->v[vi];
            vs_ddp* d = NULL;
            long tl = 0;
            switch (v->kind) {
            case V_COMM: d = ddp[v->cfg][0]; break;
            case V_COMM_BLOCK: d = ddp[v->cfg][1]; break;
            case V_COMPUTE: tl = v->t_layer_ns; break;
            case V_OVL: d = ddp[v->cfg][0], tl = v->t_layer_ns; break;
            default: d = ddp[v->cfg][1], tl = v->t_layer_ns; break;
            }
            // a training step zeroes its gradients first (outside the timed
            // backward): without it every step would be a further accumulation pass
            if (d) THR_CHK(T, c, r, vs_ddp_zero_grad(d), "vs_ddp_zero_grad");
            THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");
            ts = now();
            THR_CHK(T, c, r, run_step(d, L, T->cfg[v->cfg].layout == L_DDP ? 1 : BLOCK, tl), kind_name[v->kind]);
            T->t[slot(T, vi, r, warm ? round : round - o->warmup)] = now() - ts;
        }
        THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");
        if (warm && r == 0) {
            for (ci = 0; ci < T->ncfg; ci++) T->cfg[ci].comm_warm = med_max(T, find_v(T, V_COMM, ci, 0), round + 1);
            set_t_layer(T, 1);
        }
        THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");
    }
    if (r == 0) {
        for (vi = 0; vi < T->nv; vi++) T->res[vi] = med_max(T, vi, o->steps);
        for (ci = 0; ci < T->ncfg; ci++)
            for (k = 0; k < o->nfactors; k++) T->paired[ci][k] = paired_ratio(T, ci, k);
        T->t_main = now() - t0;
    }
    for (ci = 0; ci < T->ncfg; ci++)
        for (k = 0; k < 2; k++) {
            vs_ddp_free(ddp[ci][k]);
            ddp[ci][k] = NULL;
        }
    THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");

    /* memory: AdamW, ZeRO-0/1/2, f32 and bf16, default buckets and the timed
       ones, one DDP at a time */
    if (o->memory) {
        static const vs_dtype dts[2] = {VS_F32, VS_BF16};
        const int64_t bbs[2] = {0, layer_bytes * o->bucket_layers[0]};
        int bi, di, z;
        t0 = now();
        for (bi = 0; bi < 2; bi++)
            for (di = 0; di < 2; di++)
                for (z = 0; z < 3; z++) {
                    vs_ddp* d = NULL;
                    vs_ddp_memory m;
                    THR_CHK(T, c, r, make_ddp(mesh, T, L_DDP, z, 0, bbs[bi], VS_OPTIM_ADAMW, dts[di], 1, NULL, &d),
                            "make_ddp (memory)");
                    vs_ddp_memory_usage(d, &m);
                    vs_ddp_free(d);
                    if (r == 0) {
                        memrow* row = &T->mem[T->nmem++];
                        row->bucket_bytes = bbs[bi];
                        row->zero = z;
                        row->dt = dts[di];
                        row->m = m;
                    }
                    THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");
                }
        if (r == 0) T->t_mem = now() - t0;
    }
out:
    for (ci = 0; ci < T->ncfg; ci++)
        for (k = 0; k < 2; k++) vs_ddp_free(ddp[ci][k]);
    if (mesh) vs_mesh_free(mesh);
    free(flat[0]);
    free(flat[1]);
    return T->err[r] != 0;
}

/* ------------------------------------------------------------------ output */

static const char* mib(double bytes, char* buf, size_t cap)
{
    snprintf(buf, cap, "%.2f", bytes / (double)MIB);
    return buf;
}

/* "summary layouts": ratio_vs_max_bound of each layout side by side, per ZeRO stage,
   bucket size and factor (where more than one layout ran). */
static void print_layouts(const tctx* T)
{
    const opts* o = T->o;
    int ci, cj, fi, pass;
    for (ci = 0; ci < T->ncfg; ci++) {
        const config* a = &T->cfg[ci];
        int earlier = 0, later = 0;
        for (cj = 0; cj < T->ncfg; cj++)
            if (cj != ci && T->cfg[cj].zero == a->zero && T->cfg[cj].bucket_layers == a->bucket_layers) {
                if (cj < ci)
                    earlier++;
                else
                    later++;
            }
        if (earlier || !later) continue; /* one line per (zero, bucket), at its first layout */
        for (fi = 0; fi < o->nfactors; fi++) {
            printf("summary layouts zero=%d bucket=%gMiB compute=%.1fxcomm", a->zero, a->bucket_layers * o->layer_mib,
                   o->factors[fi]);
            for (pass = 0; pass < 2; pass++) { /* the ratios, then comm alone */
                printf(pass ? " comm_ms:" : " ratio_vs_max_bound:");
                for (cj = ci; cj < T->ncfg; cj++) {
                    const config* b = &T->cfg[cj];
                    double comm = T->res[find_v(T, V_COMM, cj, 0)], comp = T->res[find_v(T, V_COMPUTE, cj, fi)];
                    if (b->zero != a->zero || b->bucket_layers != a->bucket_layers) continue;
                    if (pass)
                        printf(" %s=%.2f", layout_name[b->layout], comm * 1e3);
                    else
                        printf(" %s=%.3f", layout_name[b->layout],
                               T->res[find_v(T, V_OVL, cj, fi)] / (comp > comm ? comp : comm));
                }
                if (!pass) printf(" target<=%.2f;", TARGET);
            }
            printf("\n");
        }
    }
}

static void print_results(const tctx* T, int* fail)
{
    const opts* o = T->o;
    int ci, fi;
    long bad = 0;
    double nerr = 0;
    for (ci = 0; ci < NRANKS; ci++) bad += T->bad[ci];
    for (ci = 0; ci < T->ncfg; ci++)
        for (fi = 0; fi < 2; fi++)
            for (int k = 0; k < NRANKS; k++)
                if (T->norm_err[ci][fi][k] > nerr) nerr = T->norm_err[ci][fi][k];

    printf("#\n# calibration (%.1f s): comm alone per config, median of %d steps (max over ranks), rotated "
           "over the configs; then t_layer = factor x comm / %d layers, reset after each warm-up round "
           "from the median comm of the warm-up rounds (%d)\n",
           T->t_calib, o->calib, o->layers, o->warmup);
    for (ci = 0; ci < T->ncfg; ci++)
        printf("#   %s zero=%d bucket=%d layer(s) (%g MiB): comm %.2f ms alone, %.2f ms in the warm-up rounds\n",
               layout_name[T->cfg[ci].layout], T->cfg[ci].zero, T->cfg[ci].bucket_layers,
               T->cfg[ci].bucket_layers * o->layer_mib,
               T->cfg[ci].comm_calib * 1e3, T->cfg[ci].comm_warm * 1e3);
    printf("#\n# step = backward (%d layers, modelled compute) + gradient sync; median of %d steps "
           "(max over %d ranks), ms; %d + %d rounds of %d variants, rotated (%.1f s)\n",
           o->layers, o->steps, NRANKS, o->warmup, o->steps, T->nv, T->t_main);
    printf("# %10s %4s %7s %7s | %8s %8s %10s %9s | %8s %10s %10s | %8s %8s %8s %8s\n", "layout", "zero", "bucket",
           "factor", "compute", "comm", "comm_block", "comp/comm", "max_bnd", "overlapped", "no_overlap",
           "ovl/max", "paired", "novl/max", "speedup");
    for (ci = 0; ci < T->ncfg; ci++) {
        double comm = T->res[find_v(T, V_COMM, ci, 0)], cb = T->res[find_v(T, V_COMM_BLOCK, ci, 0)];
        for (fi = 0; fi < o->nfactors; fi++) {
            double comp = T->res[find_v(T, V_COMPUTE, ci, fi)];
            double ov = T->res[find_v(T, V_OVL, ci, fi)], no = T->res[find_v(T, V_NOOVL, ci, fi)];
            double mx = comp > comm ? comp : comm;
            char bk[16];
            snprintf(bk, sizeof bk, "%gMiB", T->cfg[ci].bucket_layers * o->layer_mib);
            printf("  %10s %4d %7s %6.1fx | %8.2f %8.2f %10.2f %9.2f | %8.2f %10.2f %10.2f | %8.3f %8.3f %8.3f %8.2f\n",
                   layout_name[T->cfg[ci].layout], T->cfg[ci].zero, bk, o->factors[fi], comp * 1e3, comm * 1e3, cb * 1e3, comp / comm, mx * 1e3,
                   ov * 1e3, no * 1e3, ov / mx, T->paired[ci][fi], no / mx, no / ov);
        }
    }
    printf("#\n# columns: factor = compute / comm of the warm-up rounds; compute = the sleeps alone; "
           "comm = sync alone (async, as overlapped uses it); comm_block = sync alone on the no_overlap "
           "DDP; comp/comm = measured compute / comm; max_bnd = max(compute, comm); ovl/max = overlapped / "
           "max_bnd (the target); paired = median over rounds of that ratio within one round (robust to "
           "load changing between rounds); speedup = no_overlap / overlapped; layout: see the top of "
           "bench/ddp.c (ddp: DDP's buffers, a parameter a layer; contiguous / strided: the trainer's flat "
           "buffers, 12 tensors a layer, layer after layer / each kind across the layers)\n");
    printf("#\nsummary correctness %s (ZeRO-0 wrong elements %ld, max relative norm error %.2g)\n",
           bad == 0 && nerr < 1e-6 ? "PASS" : "FAIL", bad, nerr);
    if (bad || nerr >= 1e-6) *fail = 1;
    for (ci = 0; ci < T->ncfg; ci++) {
        double comm = T->res[find_v(T, V_COMM, ci, 0)];
        char bk[64];
        int n = 0;
        bk[0] = 0;
        if (T->cfg[ci].layout != L_DDP) /* the ddp layout's lines as they always were */
            n = snprintf(bk, sizeof bk, " layout=%s", layout_name[T->cfg[ci].layout]);
        if (o->nbuckets > 1)
            snprintf(bk + n, sizeof bk - (size_t)n, " bucket=%gMiB", T->cfg[ci].bucket_layers * o->layer_mib);
        for (fi = 0; fi < o->nfactors; fi++) {
            double comp = T->res[find_v(T, V_COMPUTE, ci, fi)];
            double ov = T->res[find_v(T, V_OVL, ci, fi)], no = T->res[find_v(T, V_NOOVL, ci, fi)];
            double mx = comp > comm ? comp : comm, ratio = ov / mx;
            int z = T->cfg[ci].zero;
            printf("summary zero=%d%s compute=%.1fxcomm overlapped_ms=%.2f compute_ms=%.2f comm_ms=%.2f "
                   "paired_ratio=%.3f ratio_vs_max_bound=%.3f target<=%.2f %s\n",
                   z, bk, o->factors[fi], ov * 1e3, comp * 1e3, comm * 1e3, T->paired[ci][fi], ratio, TARGET,
                   z == 2 ? "INFO" : ratio <= TARGET ? "PASS" : "FAIL");
            printf("summary zero=%d%s compute=%.1fxcomm no_overlap_ms=%.2f no_overlap_ratio=%.3f "
                   "overlap_speedup=%.2f\n",
                   z, bk, o->factors[fi], no * 1e3, no / mx, no / ov);
        }
    }
    print_layouts(T);
}

/* The ZeRO-0 row with the same dtype and buckets as m. */
static const memrow* zero0_of(const tctx* T, const memrow* m)
{
    int j;
    for (j = 0; j < T->nmem; j++)
        if (T->mem[j].dt == m->dt && T->mem[j].bucket_bytes == m->bucket_bytes && T->mem[j].zero == 0)
            return &T->mem[j];
    return NULL;
}

static void print_memory(const tctx* T)
{
    const opts* o = T->o;
    int i;
    double params = (double)o->layers * ((double)T->numel + NORM_NUMEL);
    char a[6][32], bk[32];
    if (!T->nmem) return;
    printf("#\n# memory per rank (vs_ddp_memory_usage, %.1f s), DP=4, AdamW; %d x (%lld-element weight + "
           "%d-element norm) = %.0f elements; MiB\n",
           T->t_mem, o->layers, (long long)T->numel, NORM_NUMEL, params);
    printf("# %6s %5s %4s | %9s %9s %11s %9s %9s | %8s | %12s\n", "bucket", "dtype", "zero", "params", "grads",
           "optim_state", "master", "total", "padding", "optim/ZeRO-0");
    for (i = 0; i < T->nmem; i++) {
        const memrow* m = &T->mem[i];
        const memrow* z0 = zero0_of(T, m);
        double ratio = z0 && z0->m.optim_state ? (double)m->m.optim_state / (double)z0->m.optim_state : -1;
        size_t tot = m->m.params + m->m.grads + m->m.optim_state + m->m.master;
        snprintf(bk, sizeof bk, "%gMiB", m->bucket_bytes ? (double)m->bucket_bytes / (double)MIB : 32.0);
        printf("  %6s %5s %4d | %9s %9s %11s %9s %9s | %8zu | %12.4f\n", bk, vs_dtype_name(m->dt), m->zero,
               mib((double)m->m.params, a[0], 32), mib((double)m->m.grads, a[1], 32),
               mib((double)m->m.optim_state, a[2], 32), mib((double)m->m.master, a[3], 32),
               mib((double)tot, a[4], 32), m->m.padding, ratio);
    }
    printf("#   bucket: bucket_bytes (32MiB: the default, 0); padding: elements added so each of the 4 "
           "ranks owns an equal, 64-byte aligned range of every bucket (counted in the other columns); "
           "grads: ZeRO-0 the buckets, ZeRO-1 the buckets + an f32 accumulator of the owned ranges, ZeRO-2 "
           "the f32 owned ranges + 2 staging buffers (f32-sized) of the largest bucket\n");
    for (i = 0; i < T->nmem; i++) {
        const memrow* m = &T->mem[i];
        const memrow* z0 = zero0_of(T, m);
        double ratio, ideal = 2.0 * 4.0 * params / NRANKS; /* two f32 moments of 1/DP of the elements */
        if (!z0 || !z0->m.optim_state) continue;
        ratio = (double)m->m.optim_state / (double)z0->m.optim_state;
        snprintf(bk, sizeof bk, "%gMiB", m->bucket_bytes ? (double)m->bucket_bytes / (double)MIB : 32.0);
        if (m->zero == 0)
            printf("summary memory bucket=%s dtype=%s zero=0 optim_state_bytes=%zu master_bytes=%zu "
                   "grads_bytes=%zu\n",
                   bk, vs_dtype_name(m->dt), m->m.optim_state, m->m.master, m->m.grads);
        else
            printf("summary memory bucket=%s dtype=%s zero=%d optim_state_bytes=%zu master_bytes=%zu "
                   "grads_bytes=%zu optim_ratio_vs_zero0=%.4f vs_ideal_1/dp=%.4f target<=0.26 %s\n",
                   bk, vs_dtype_name(m->dt), m->zero, m->m.optim_state, m->m.master, m->m.grads, ratio,
                   (double)m->m.optim_state / ideal, ratio <= 0.26 ? "PASS" : "FAIL");
    }
}

/* ------------------------------------------------------------------- main */

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_ddp [--layers L] [--layer-mib M] [--bucket-layers K[,K..]] [--zero 0,1,2 | --zero 3 ...]\n"
            "                 [--layouts ddp,contiguous,strided] [--factors 1,2] [--steps S] [--warmup W]\n"
            "                 [--calib C] [--no-memory]\n");
}

/* Comma (or space) separated numbers into v[0..cap); returns how many, -1 on junk. */
static int parse_list(const char* s, double* v, int cap)
{
    int n = 0;
    while (*s) {
        char* e;
        double x;
        while (*s == ',' || *s == ' ') s++;
        if (!*s) break;
        x = strtod(s, &e);
        if (e == s || n == cap) return -1;
        v[n++] = x;
        s = e;
    }
    return n;
}

/* Comma separated layout names into o->layouts; -1 on an unknown one. */
static int parse_layouts(const char* s, opts* o)
{
    o->nlayouts = 0;
    while (*s) {
        size_t len = strcspn(s, ",");
        int k, found = -1;
        for (k = 0; k < NLAYOUT; k++)
            if (len == strlen(layout_name[k]) && !strncmp(s, layout_name[k], len)) found = k;
        for (k = 0; k < o->nlayouts; k++)
            if (o->layouts[k] == found) found = -1; /* twice */
        if (found < 0) return -1;
        o->layouts[o->nlayouts++] = found;
        s += len;
        if (*s) s++;
    }
    return o->nlayouts ? 0 : -1;
}

static int parse_opts(int argc, char** argv, opts* o)
{
    int i, k;
    double tmp[MAXF > MAXB ? MAXF : MAXB];
    memset(o, 0, sizeof *o);
    o->layers = 16;
    o->layer_mib = 4;
    o->bucket_layers[0] = 1, o->nbuckets = 1;
    o->zero[0] = 0, o->zero[1] = 1, o->zero[2] = 2, o->nzero = 3;
    o->layouts[0] = L_DDP, o->layouts[1] = L_CONTIG, o->layouts[2] = L_STRIDED, o->nlayouts = 3;
    o->factors[0] = 1, o->factors[1] = 2, o->nfactors = 2;
    o->steps = 21;
    o->warmup = 5;
    o->calib = 5;
    o->memory = 1;
    for (i = 1; i < argc; i++) {
        const char* a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-memory")) {
            o->memory = 0;
        } else if (v && !strcmp(a, "--layers")) {
            o->layers = atoi(v), i++;
        } else if (v && !strcmp(a, "--layer-mib")) {
            o->layer_mib = atof(v), i++;
        } else if (v && !strcmp(a, "--steps")) {
            o->steps = atoi(v), i++;
        } else if (v && !strcmp(a, "--warmup")) {
            o->warmup = atoi(v), i++;
        } else if (v && !strcmp(a, "--calib")) {
            o->calib = atoi(v), i++;
        } else if (v && !strcmp(a, "--bucket-layers")) {
            if ((o->nbuckets = parse_list(v, tmp, MAXB)) < 1) return -1;
            for (k = 0; k < o->nbuckets; k++) {
                o->bucket_layers[k] = (int)tmp[k];
                if (tmp[k] < 1 || tmp[k] != (double)(int)tmp[k]) return -1;
            }
            i++;
        } else if (v && !strcmp(a, "--zero")) {
            if ((o->nzero = parse_list(v, tmp, 3)) < 1) return -1;
            for (k = 0; k < o->nzero; k++) {
                o->zero[k] = (int)tmp[k];
                if (tmp[k] != 0 && tmp[k] != 1 && tmp[k] != 2) return -1;
            }
            i++;
        } else if (v && !strcmp(a, "--layouts")) {
            if (parse_layouts(v, o)) return -1;
            i++;
        } else if (v && !strcmp(a, "--factors")) {
            if ((o->nfactors = parse_list(v, o->factors, MAXF)) < 1) return -1;
            for (k = 0; k < o->nfactors; k++)
                if (!(o->factors[k] > 0)) return -1;
            i++;
        } else {
            return -1;
        }
    }
    if (o->layers < 1 || o->layers > MAXL || !(o->layer_mib > 0) || o->steps < 1 || o->steps > 1024 ||
        o->warmup < 1 || o->warmup > 1024 || o->calib < 1 || o->calib > 1024)
        return -1;
    if (o->nzero * o->nbuckets * o->nlayouts > MAXCFG) return -1;
    if (o->nzero * o->nbuckets * o->nlayouts * (2 + 3 * o->nfactors) > MAXV) return -1;
    return 0;
}

/* --zero 3: bench_ddp_zero3 beside this program, with the other options
   (returns only when it cannot run it). */
static int run_zero3(int argc, char** argv)
{
    char path[4096];
    const char* slash = strrchr(argv[0], '/');
    int n = slash ? (int)(slash - argv[0]) + 1 : 0;
    snprintf(path, sizeof path, "%.*sbench_ddp_zero3", n, argv[0]);
    char** av = (char**)calloc((size_t)argc + 1, sizeof *av);
    int k = 0;
    if (!av) return 1;
    av[k++] = path;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--zero") && i + 1 < argc && !strcmp(argv[i + 1], "3")) {
            i++;
            continue;
        }
        av[k++] = argv[i];
    }
    fflush(stdout);
    execv(path, av);
    fprintf(stderr, "bench_ddp --zero 3: cannot run %s (%s): build it (make %s)\n", path, strerror(errno), path);
    free(av);
    return 1;
}

int main(int argc, char** argv)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--zero") && !strcmp(argv[i + 1], "3")) return run_zero3(argc, argv);
    opts o;
    static tctx T;
    int bi, li, zi, fi, rc = 0;
    int64_t C;
    char la[64];
    double t0 = now();
    vs_result r;
    if (parse_opts(argc, argv, &o) != 0) {
        usage();
        return 2;
    }
    memset(&T, 0, sizeof T);
    T.o = &o;
    T.numel = (int64_t)(o.layer_mib * (double)MIB) / (int64_t)sizeof(float);
    /* contiguous, strided: the widest block of 12C^2 + 13C elements within a layer */
    for (C = (int64_t)sqrt((double)T.numel / 12.0) + 1; C > 0 && 12 * C * C + 13 * C > T.numel; C--) {
    }
    if (T.numel < 1 || C < 1) {
        usage();
        return 2;
    }
    {
        const int64_t blk[BLOCK] = {C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C};
        for (fi = 0; fi < BLOCK; fi++) T.block_numel += T.block[fi] = blk[fi];
    }
    /* configs: bucket sizes outer, then layouts, stages inner; variants: per config
       comm, comm_block, then per factor compute, overlapped, no_overlap */
    for (bi = 0; bi < o.nbuckets; bi++)
        for (li = 0; li < o.nlayouts; li++)
            for (zi = 0; zi < o.nzero; zi++) {
                config* cf = &T.cfg[T.ncfg];
                if (o.layouts[li] != L_DDP && o.zero[zi] == 2) continue; /* refused for trainer-owned storage */
                cf->layout = o.layouts[li];
                T.storage |= cf->layout != L_DDP;
                cf->zero = o.zero[zi];
                cf->bucket_layers = o.bucket_layers[bi];
                T.v[T.nv++] = (variant){V_COMM, T.ncfg, 0, 0};
                T.v[T.nv++] = (variant){V_COMM_BLOCK, T.ncfg, 0, 0};
                for (fi = 0; fi < o.nfactors; fi++) {
                    T.v[T.nv++] = (variant){V_COMPUTE, T.ncfg, fi, 0};
                    T.v[T.nv++] = (variant){V_OVL, T.ncfg, fi, 0};
                    T.v[T.nv++] = (variant){V_NOOVL, T.ncfg, fi, 0};
                }
                T.ncfg++;
            }
    T.tsteps = o.steps > o.calib ? o.steps : o.calib;
    if (o.warmup > T.tsteps) T.tsteps = o.warmup;
    T.t = (double*)calloc((size_t)T.nv * NRANKS * (size_t)T.tsteps, sizeof *T.t);
    if (!T.t) {
        fprintf(stderr, "bench: out of memory\n");
        return 1;
    }
    printf("# bench_ddp: vescale %s threads transport, %d thread ranks, mesh {%d} DP; model %d layers x "
           "%lld f32 (%.2f MiB each, %.1f MiB of gradients); bucket_bytes =",
           vs_version_string(), NRANKS, NRANKS, o.layers, (long long)T.numel, o.layer_mib,
           o.layers * o.layer_mib);
    for (bi = 0; bi < o.nbuckets; bi++) printf(" %d layer(s)", o.bucket_layers[bi]);
    printf("; ZeRO");
    for (zi = 0; zi < o.nzero; zi++) printf(" %d", o.zero[zi]);
    printf("; layouts");
    for (li = 0; li < o.nlayouts; li++) printf(" %s", layout_name[o.layouts[li]]);
    if (T.storage) printf(" (a block of C = %lld: %lld elements a layer)", (long long)C, (long long)T.block_numel);
    printf("; compute = ");
    for (fi = 0; fi < o.nfactors; fi++) printf("%gx ", o.factors[fi]);
    printf("comm; online CPUs %ld; loadavg %s\n", sysconf(_SC_NPROCESSORS_ONLN), loadavg(la, sizeof la));
    fflush(stdout);

    r = vs_launch_ex(&(vs_launch_desc){.nranks = NRANKS, .timeout_s = 120}, rank_fn, &T);
    if (r != VS_OK) {
        fprintf(stderr, "bench: vs_launch_ex: %d %s: %s\n", r, r < 0 ? vs_result_string(r) : "a rank failed",
                vs_last_error());
        rc = 1;
    } else {
        print_results(&T, &rc);
        print_memory(&T);
    }
    printf("# bench_ddp done: %.1f s; loadavg %s%s\n", now() - t0, loadavg(la, sizeof la),
           rc ? "; ERRORS (see stderr)" : "");
    free(T.t);
    return rc;
}
