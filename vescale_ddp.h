/* vescale_ddp.h - DDP (bucketed gradient sync overlapped with backward) and the
   DistributedOptimizer (ZeRO-1/2), on the device mesh of vescale_mesh.h.

   Do this in *one* C or C++ file:
       #define VESCALE_IMPLEMENTATION        (every part), or
       #define VESCALE_DDP_IMPLEMENTATION    (this part only; the mesh
                                              implementation must then be in
                                              the same program)
       #include "vescale_ddp.h"
   Vendoring vescale_mesh.h + vescale_ddp.h is enough. Link: -lpthread -lm.

   Step by step (a trainer with its own forward/backward):

       vs_ddp* ddp;
       vs_ddp_init(&(vs_ddp_desc){ .mesh = mesh, .zero = VS_ZERO_1,
                                   .optim = { .kind = VS_OPTIM_ADAMW, .weight_decay = 0.1 } }, &ddp);
       for each parameter:   vs_ddp_add_param(ddp, &(vs_ddp_param_desc){ .name = "h0.w", .data = w,
                                                 .dtype = VS_F32, .ndim = 2, .shape = {768, 768} }, &idx);
       vs_ddp_finalize(ddp);                   // collective: buckets, optimizer state
       loop:
           vs_ddp_zero_grad(ddp);
           forward with vs_ddp_param(ddp, i) (DDP owns the parameters from now on)
           backward: add each gradient into vs_ddp_grad(ddp, i), then
                     vs_ddp_grad_ready(ddp, i)  // a full bucket starts reducing now
           vs_ddp_finish_grad_sync(ddp);
           vs_ddp_clip_grad_norm(ddp, 1.0, &norm);
           vs_ddp_step(ddp, vs_lr_at(&sched, step));

   Semantics
   - Buckets hold the gradients of parameters in reverse registration order (the
     order backward produces them), up to bucket_bytes each, padded so every DP
     rank owns an equal range. A parameter's gradient is a view into its bucket.
   - Gradients are averaged over DP. A Partial placement in a parameter's
     placements means its value is replicated along that mesh dim but its gradient
     is a partial sum there (sequence-parallel norms over TP): DDP sums it over
     that dim too.
   - ZeRO-0: all-reduce; every rank steps every element. ZeRO-1: reduce-scatter;
     optimizer state and fp32 master weights only for the owned 1/DP range; the
     updated parameters are all-gathered bucket by bucket in the background
     (vs_ddp_param waits for its bucket: the gathers overlap the next forward). ZeRO-2: as ZeRO-1, and a rank keeps only
     its range of each bucket's gradient: full-size gradients live in a small pool
     of staging buffers reused bucket after bucket (so vs_ddp_grad must be asked
     again each backward pass), and each pass's reduced shard is added to the
     owned range (gradient accumulation reduces every micro-batch).
   - Gradient accumulation (ZeRO-0/1): vs_ddp_set_sync(ddp, 0) before the backward
     of a micro-batch that must not reduce; gradients add up in the buckets until
     a backward with sync on. Several synced passes before a step also add up
     (ZeRO-1 and TP-partial buckets keep an f32 accumulator of their reduced owned
     range for this, used only from the second pass on). vs_ddp_finish_grad_sync ends every backward pass. ZeRO-2
     with no_overlap still reduces early when it runs out of staging buffers.
   - Buckets are reduced in bucket order on every rank, whatever order the
     gradients become ready in, so ranks never disagree on the collective order.
   - Host buffers (threads and MPI transports). Names every skipped part: a CUDA
     optimizer kernel is not built yet (use the step callback).
   One thread uses a vs_ddp at a time.
*/
/* Before the guard, so a later include with VESCALE_IMPLEMENTATION still works. */
#if defined(VESCALE_IMPLEMENTATION) && !defined(VESCALE_DDP_IMPLEMENTATION)
#define VESCALE_DDP_IMPLEMENTATION
#endif

#ifndef VESCALE_DDP_INCLUDED
#define VESCALE_DDP_INCLUDED

#include "vescale_mesh.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The VESCALE_VERSION_NUMBER this part was built with. */
VS_API int vs_ddp_version(void);

// >>lr -----------------------------------------------------------------------

typedef enum vs_lr_kind {
    VS_LR_CONSTANT = 0,
    VS_LR_COSINE, // warmup, then cosine from lr to min_lr over total_steps
    VS_LR_LINEAR, // warmup, then linear from lr to min_lr over total_steps
    VS_LR_STEP    // warmup, then lr * gamma^(floor((step - warmup) / step_size))
} vs_lr_kind;

/* A learning-rate schedule: a few numbers, saved as they are by checkpoints. */
typedef struct vs_lr_schedule {
    vs_lr_kind kind;
    double lr, min_lr;
    int64_t warmup_steps; // linear from lr/warmup_steps to lr over the first steps
    int64_t total_steps;  // cosine/linear: steps until min_lr (warmup included)
    int64_t step_size;    // step decay
    double gamma;         // step decay factor
} vs_lr_schedule;

/* The learning rate of step `step` (0-based). */
VS_API double vs_lr_at(const vs_lr_schedule* s, int64_t step);

// >>ddp ----------------------------------------------------------------------

#define VS_DDP_MAX_GROUPS 16

typedef enum vs_zero_stage { VS_ZERO_0 = 0, VS_ZERO_1 = 1, VS_ZERO_2 = 2 } vs_zero_stage;
typedef enum vs_optim_kind { VS_OPTIM_ADAMW = 0, VS_OPTIM_SGD, VS_OPTIM_CUSTOM } vs_optim_kind;

/* What a custom step sees: one parameter's slice this rank owns, as f32. */
typedef struct vs_step_args {
    const char* name;
    int index;       // parameter index
    int64_t offset;  // first element of the slice within the parameter's local shard
    int64_t n;
    float* param;       // update in place (fp32 master weights for half parameters)
    const float* grad;  // averaged (and clipped) gradient
    float* state[2];    // two f32 state slots, zero at the first step
    double lr, weight_decay;
    int64_t step;       // 1 at the first step
    void* user;
} vs_step_args;
typedef vs_result (*vs_step_fn)(const vs_step_args* a);

typedef struct vs_optim_group {
    double lr_scale;     // 0: 1
    double weight_decay; // this group's decay
} vs_optim_group;

typedef struct vs_optim_desc {
    vs_optim_kind kind;
    double beta1, beta2, eps; // AdamW (0: 0.9, 0.999, 1e-8)
    double weight_decay;      // group 0 (AdamW decoupled; SGD adds wd * p to the gradient)
    double momentum;          // SGD
    int nesterov;             // SGD
    int ngroups;              // groups 1..ngroups-1 from `groups` (group 0 is the above)
    vs_optim_group groups[VS_DDP_MAX_GROUPS];
    vs_step_fn step; // VS_OPTIM_CUSTOM
    void* user;
} vs_optim_desc;

typedef struct vs_ddp_desc {
    vs_mesh* mesh;
    const char* dp_dim;   // NULL: "DP" (or the only dim of a 1-D mesh)
    const char* pp_dim;   // NULL: "PP" when the mesh has it (stages hold distinct parameters)
    int64_t bucket_bytes; // 0: 32 MiB (default); negative is an error
    vs_zero_stage zero;
    int no_overlap;      // 1: reduce only in vs_ddp_finish_grad_sync
    int grad_fp32;       // f16/bf16 parameters accumulate gradients in f32
    int zero2_buffers;   // ZeRO-2 staging buffers (0: 2)
    vs_optim_desc optim;
} vs_ddp_desc;

typedef struct vs_ddp_param_desc {
    const char* name;
    const void* data; // initial value of this rank's shard (copied; NULL: zeros)
    vs_dtype dtype;   // f32, bf16 or f16
    int ndim;
    int64_t shape[VS_TENSOR_MAX_DIMS];           // global shape
    vs_placement placements[VS_MESH_MAX_DIMS]; // per mesh dim (zero: Replicate)
    int group;    // optimizer group
    int no_decay; // no weight decay (norms, biases)
} vs_ddp_param_desc;

typedef struct vs_ddp_memory {
    size_t params;       // parameter buffers
    size_t grads;        // gradient buffers (ZeRO-2: owned ranges + staging pool)
    size_t optim_state;  // moments / momentum
    size_t master;       // fp32 master weights of half parameters
    size_t padding;      // elements of padding in the buckets (counted in the above)
} vs_ddp_memory;

typedef struct vs_ddp vs_ddp;

VS_API vs_result vs_ddp_init(const vs_ddp_desc* desc, vs_ddp** out);
/* Registers a parameter; *index (may be NULL) gets its index. Before finalize. */
VS_API vs_result vs_ddp_add_param(vs_ddp* d, const vs_ddp_param_desc* p, int* index);
/* Builds buckets, parameter buffers and optimizer state. Collective over the mesh. */
VS_API vs_result vs_ddp_finalize(vs_ddp* d);
VS_API int vs_ddp_num_params(const vs_ddp* d);
/* The parameter's local shard (its dtype), owned by DDP after finalize. After a
   ZeRO step it waits for that bucket's all-gather: ask again after each step. */
VS_API void* vs_ddp_param(vs_ddp* d, int index);
/* The gradient view to add into (vs_ddp_grad_dtype); asking for it starts a
   backward pass. ZeRO-2: valid for the current backward pass only. NULL with
   vs_last_error() on error. */
VS_API void* vs_ddp_grad(vs_ddp* d, int index);
/* The synchronized gradient after vs_ddp_finish_grad_sync, to read (the averaged
   values: every element with ZeRO-0, the owned range with ZeRO-1). NULL where the
   reduced values live only in the f32 accumulator (ZeRO-2, several passes). */
VS_API const void* vs_ddp_grad_synced(vs_ddp* d, int index);
VS_API vs_dtype vs_ddp_grad_dtype(const vs_ddp* d, int index);
VS_API int64_t vs_ddp_local_numel(const vs_ddp* d, int index);
VS_API vs_result vs_ddp_zero_grad(vs_ddp* d);
/* 0: the next backward accumulates without reducing (ZeRO-0/1). */
VS_API vs_result vs_ddp_set_sync(vs_ddp* d, int sync);
/* The parameter's gradient is complete for this backward pass. */
VS_API vs_result vs_ddp_grad_ready(vs_ddp* d, int index);
/* Reduces what is left and waits for every bucket; ends the backward pass. */
VS_API vs_result vs_ddp_finish_grad_sync(vs_ddp* d);
/* Global L2 norm of the gradients over DP x TP x PP (each element once); scales
   them by max_norm / norm when norm > max_norm (max_norm <= 0: only measure). */
VS_API vs_result vs_ddp_clip_grad_norm(vs_ddp* d, double max_norm, double* norm);
/* Optimizer step with learning rate `lr` on the owned ranges, then (ZeRO) the
   all-gather of the updated parameters. Collective over DP. */
VS_API vs_result vs_ddp_step(vs_ddp* d, double lr);
VS_API int64_t vs_ddp_step_count(const vs_ddp* d);
VS_API vs_result vs_ddp_memory_usage(const vs_ddp* d, vs_ddp_memory* out);
VS_API vs_result vs_ddp_free(vs_ddp* d);

#ifdef __cplusplus
}
#endif
#endif // VESCALE_DDP_INCLUDED

/* ========================================================================== */
#if defined(VESCALE_DDP_IMPLEMENTATION) && !defined(VESCALE_DDP_IMPLEMENTED)
#define VESCALE_DDP_IMPLEMENTED

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define _VS_DDP_PRIVATE static __attribute__((unused))
#else
#define _VS_DDP_PRIVATE static
#endif

VS_API int vs_ddp_version(void) { return VESCALE_VERSION_NUMBER; }

// >>lr -------------------------------------------------------------------------

VS_API double vs_lr_at(const vs_lr_schedule* s, int64_t step)
{
    if (!s) return 0.0;
    if (step < 0) step = 0;
    if (s->warmup_steps > 0 && step < s->warmup_steps) return s->lr * (double)(step + 1) / (double)s->warmup_steps;
    int64_t t = step - (s->warmup_steps > 0 ? s->warmup_steps : 0);
    int64_t span = s->total_steps - (s->warmup_steps > 0 ? s->warmup_steps : 0);
    double frac = span > 0 ? (double)t / (double)span : 1.0;
    if (frac > 1.0) frac = 1.0;
    switch (s->kind) {
    case VS_LR_COSINE: return s->min_lr + 0.5 * (s->lr - s->min_lr) * (1.0 + cos(3.14159265358979323846 * frac));
    case VS_LR_LINEAR: return s->lr + (s->min_lr - s->lr) * frac;
    case VS_LR_STEP: return s->step_size > 0 ? s->lr * pow(s->gamma, (double)(t / s->step_size)) : s->lr;
    default: return s->lr;
    }
}

// >>ddp ------------------------------------------------------------------------

typedef struct _vs_dparam {
    char* name;
    vs_dtype dtype, gdtype;
    int ndim;
    int64_t shape[VS_TENSOR_MAX_DIMS];
    vs_placement pl[VS_MESH_MAX_DIMS];
    int group, no_decay;
    int64_t numel;    // local shard
    int bucket;
    int64_t offset;   // element offset in the bucket
    int ready;
    int counted;      // counted by the grad norm on this rank (see _vs_ddp_counted)
    void* init;       // copy of the initial data until finalize
} _vs_dparam;

typedef struct _vs_dbucket {
    vs_dtype pdtype, gdtype;
    unsigned partial_mask; // mesh dims over which the gradients are partial (besides DP)
    int first, last;       // parameter indices in bucket order: params[order[first..last)]
    int64_t numel;         // padded to a multiple of dp
    int64_t shard;         // numel / dp
    void* param;           // numel, param dtype
    void* grad;            // numel (ZeRO-0/1), or the staging buffer in use (ZeRO-2)
    float* grad_shard;     // acc: the reduced owned range, f32, summed over synced passes
    float* master;         // f32 master weights of the owned range (half params)
    float* state[2];       // optimizer state of the owned range (f32)
    int acc;               // has grad_shard, to add up reduced gradients over several passes
    int acc_used;          // grad_shard holds them (ZeRO-2 always; others from a second pass)
    int nready, launched, staged, done;
    vs_work* work;
    vs_work* pwork; // ZeRO: the all-gather of updated parameters, in flight
} _vs_dbucket;

struct vs_ddp {
    vs_ddp_desc desc;
    vs_mesh* mesh;
    vs_mesh* dp;
    int dp_size, dp_rank, dp_index, pp_index;
    int nparams, cap;
    _vs_dparam* params;
    vs_world* world; // allocator hooks
    int* order; // bucket order (reverse registration)
    int nbuckets;
    _vs_dbucket* buckets;
    int next_launch; // buckets launch in order
    int sync, in_pass, finalized, grads_pending;
    int64_t steps;
    void** pool; // ZeRO-2 staging buffers
    int* pool_owner;
    int npool;
    int64_t max_bucket;
    size_t max_grad_bytes; // largest bucket's gradient buffer (ZeRO-2 staging size)
    float* scratch; // f32 conversion space, max bucket shard
};

_VS_DDP_PRIVATE size_t _vs_dsz(vs_dtype t) { return vs_dtype_size(t); }

/* Zeroed buffers through the world's allocator hooks. */
_VS_DDP_PRIVATE void* _vs_ddp_zalloc(const vs_ddp* d, size_t bytes);
_VS_DDP_PRIVATE void _vs_ddp_hfree(const vs_ddp* d, void* p);

_VS_DDP_PRIVATE float _vs_ld(vs_dtype t, const void* p, int64_t i)
{
    if (t == VS_F32) return ((const float*)p)[i];
    if (t == VS_BF16) return vs_bf16_to_f32(((const uint16_t*)p)[i]);
    return vs_f16_to_f32(((const uint16_t*)p)[i]);
}

_VS_DDP_PRIVATE void _vs_st(vs_dtype t, void* p, int64_t i, float v)
{
    if (t == VS_F32)
        ((float*)p)[i] = v;
    else if (t == VS_BF16)
        ((uint16_t*)p)[i] = vs_f32_to_bf16(v);
    else
        ((uint16_t*)p)[i] = vs_f32_to_f16(v);
}

_VS_DDP_PRIVATE void* _vs_ddp_zalloc(const vs_ddp* d, size_t bytes)
{
    void* p = vs_alloc(d->world, bytes + 1);
    if (p) memset(p, 0, bytes + 1);
    return p;
}

_VS_DDP_PRIVATE void _vs_ddp_hfree(const vs_ddp* d, void* p) { vs_free(d->world, p); }

VS_API vs_result vs_ddp_init(const vs_ddp_desc* desc, vs_ddp** out)
{
    if (!desc || !out) return vs_set_error(VS_ERR_NULL, "vs_ddp_init: %s is NULL", desc ? "out" : "desc");
    *out = NULL;
    if (!desc->mesh) return vs_set_error(VS_ERR_NULL, "vs_ddp_init: mesh is NULL");
    if (desc->bucket_bytes < 0)
        return vs_set_error(VS_ERR_INVALID, "vs_ddp_init: bucket_bytes %lld must be > 0 (0 takes the default)",
                            (long long)desc->bucket_bytes);
    if ((int)desc->zero < 0 || desc->zero > VS_ZERO_2)
        return vs_set_error(VS_ERR_INVALID, "vs_ddp_init: zero stage %d (0, 1 or 2)", (int)desc->zero);
    if ((int)desc->optim.kind < 0 || desc->optim.kind > VS_OPTIM_CUSTOM)
        return vs_set_error(VS_ERR_INVALID, "vs_ddp_init: optimizer kind %d", (int)desc->optim.kind);
    if (desc->optim.kind == VS_OPTIM_CUSTOM && !desc->optim.step)
        return vs_set_error(VS_ERR_NULL, "vs_ddp_init: VS_OPTIM_CUSTOM needs optim.step");
    if (desc->optim.ngroups < 0 || desc->optim.ngroups > VS_DDP_MAX_GROUPS)
        return vs_set_error(VS_ERR_INVALID, "vs_ddp_init: ngroups %d out of range [0, %d]", desc->optim.ngroups,
                            VS_DDP_MAX_GROUPS);
    if (desc->zero2_buffers < 0)
        return vs_set_error(VS_ERR_INVALID, "vs_ddp_init: zero2_buffers %d < 0", desc->zero2_buffers);
    vs_mesh* m = desc->mesh;
    const char* dpn = desc->dp_dim;
    if (!dpn) dpn = vs_mesh_ndims(m) == 1 ? vs_mesh_dim_name(m, 0) : "DP";
    int dpi = vs_mesh_dim_index(m, dpn);
    if (dpi < 0) return vs_set_error(dpi, "vs_ddp_init: dp_dim '%s' is not a dim of the mesh", dpn);
    int ppi = -1;
    if (desc->pp_dim) {
        ppi = vs_mesh_dim_index(m, desc->pp_dim);
        if (ppi < 0) return vs_set_error(ppi, "vs_ddp_init: pp_dim '%s' is not a dim of the mesh", desc->pp_dim);
    } else {
        for (int k = 0; k < vs_mesh_ndims(m); k++)
            if (!strcmp(vs_mesh_dim_name(m, k), "PP")) ppi = k;
        vs_clear_error();
    }
    vs_ddp* d = (vs_ddp*)calloc(1, sizeof *d);
    if (!d) return vs_set_error(VS_ERR_NOMEM, "vs_ddp_init: out of memory");
    d->desc = *desc;
    d->desc.dp_dim = NULL; // not kept: the caller's string
    d->desc.pp_dim = NULL;
    if (!d->desc.bucket_bytes) d->desc.bucket_bytes = (int64_t)32 << 20;
    if (!d->desc.zero2_buffers) d->desc.zero2_buffers = 2;
    vs_optim_desc* o = &d->desc.optim;
    if (o->beta1 == 0) o->beta1 = 0.9;
    if (o->beta2 == 0) o->beta2 = 0.999;
    if (o->eps == 0) o->eps = 1e-8;
    d->mesh = m;
    d->world = vs_mesh_world(m);
    d->dp_index = dpi;
    d->pp_index = ppi;
    d->sync = 1;
    *out = d;
    return VS_OK;
}

VS_API vs_result vs_ddp_add_param(vs_ddp* d, const vs_ddp_param_desc* p, int* index)
{
    const char* fn = "vs_ddp_add_param";
    if (!d || !p) return vs_set_error(VS_ERR_NULL, "%s: %s is NULL", fn, d ? "param desc" : "ddp");
    if (d->finalized) return vs_set_error(VS_ERR_STATE, "%s: '%s' added after vs_ddp_finalize", fn, p->name ? p->name : "");
    if (!p->name || !*p->name) return vs_set_error(VS_ERR_INVALID, "%s: a parameter needs a name", fn);
    if (p->dtype != VS_F32 && p->dtype != VS_BF16 && p->dtype != VS_F16)
        return vs_set_error(VS_ERR_INVALID, "%s: '%s' has dtype %s; the optimizers take f32, bf16 or f16", fn, p->name,
                            vs_dtype_name(p->dtype));
    if (p->group < 0 || p->group >= (d->desc.optim.ngroups > 0 ? d->desc.optim.ngroups : 1))
        return vs_set_error(VS_ERR_INVALID, "%s: '%s' is in group %d, there are %d", fn, p->name, p->group,
                            d->desc.optim.ngroups > 0 ? d->desc.optim.ngroups : 1);
    for (int i = 0; i < d->nparams; i++)
        if (!strcmp(d->params[i].name, p->name))
            return vs_set_error(VS_ERR_INVALID, "%s: '%s' registered twice", fn, p->name);
    vs_layout L;
    memset(&L, 0, sizeof L);
    L.mesh = d->mesh;
    memcpy(L.p, p->placements, sizeof L.p);
    int nd = vs_mesh_ndims(d->mesh);
    for (int k = nd; k < VS_MESH_MAX_DIMS; k++) L.p[k] = vs_replicate();
    if (L.p[d->dp_index].kind != VS_PLACE_REPLICATE)
        return vs_set_error(VS_ERR_INVALID, "%s: '%s' must be Replicate along the DP dim %s", fn, p->name,
                            vs_mesh_dim_name(d->mesh, d->dp_index));
    int64_t ls[VS_TENSOR_MAX_DIMS];
    vs_result r = vs_layout_local(&L, p->ndim, p->shape, vs_mesh_rank(d->mesh), ls, NULL);
    if (r) {
        char why[256];
        snprintf(why, sizeof why, "%.200s", vs_last_error());
        return vs_set_error(r, "%s: '%s': %s", fn, p->name, why);
    }
    if (d->nparams == d->cap) {
        int cap = d->cap ? 2 * d->cap : 16;
        _vs_dparam* np = (_vs_dparam*)realloc(d->params, sizeof *np * (size_t)cap);
        if (!np) return vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
        d->params = np;
        d->cap = cap;
    }
    _vs_dparam* q = &d->params[d->nparams];
    memset(q, 0, sizeof *q);
    q->numel = 1;
    for (int k = 0; k < p->ndim; k++) q->numel *= ls[k];
    size_t nlen = strlen(p->name);
    q->name = (char*)malloc(nlen + 1);
    q->init = malloc((size_t)q->numel * _vs_dsz(p->dtype) + 1);
    if (!q->name || !q->init) {
        free(q->name);
        free(q->init);
        return vs_set_error(VS_ERR_NOMEM, "%s: out of memory for '%s'", fn, p->name);
    }
    memcpy(q->name, p->name, nlen + 1);
    if (p->data)
        memcpy(q->init, p->data, (size_t)q->numel * _vs_dsz(p->dtype));
    else
        memset(q->init, 0, (size_t)q->numel * _vs_dsz(p->dtype));
    q->dtype = p->dtype;
    q->gdtype = (d->desc.grad_fp32 && p->dtype != VS_F32) ? VS_F32 : p->dtype;
    q->ndim = p->ndim;
    memcpy(q->shape, p->shape, sizeof q->shape);
    memcpy(q->pl, L.p, sizeof q->pl);
    q->group = p->group;
    q->no_decay = p->no_decay;
    q->bucket = -1;
    if (index) *index = d->nparams;
    d->nparams++;
    return VS_OK;
}

_VS_DDP_PRIVATE unsigned _vs_ddp_partial_mask(const vs_ddp* d, const _vs_dparam* q)
{
    unsigned mask = 0;
    for (int k = 0; k < vs_mesh_ndims(d->mesh); k++)
        if (k != d->dp_index && q->pl[k].kind == VS_PLACE_PARTIAL) mask |= 1u << k;
    return mask;
}

/* An element of q is counted by the grad norm on exactly one rank: the DP rank
   that owns it, and along every other dim where q is not sharded (and not the
   pipeline dim, whose stages hold distinct parameters) coordinate 0 only. */
_VS_DDP_PRIVATE int _vs_ddp_counted(const vs_ddp* d, const _vs_dparam* q)
{
    int coord[VS_MESH_MAX_DIMS];
    vs_mesh_coord(d->mesh, coord);
    for (int k = 0; k < vs_mesh_ndims(d->mesh); k++) {
        if (k == d->dp_index || k == d->pp_index || q->pl[k].kind == VS_PLACE_SHARD) continue;
        if (coord[k] != 0) return 0;
    }
    return 1;
}

_VS_DDP_PRIVATE void _vs_ddp_release(vs_ddp* d)
{
    for (int b = 0; b < d->nbuckets; b++) {
        _vs_dbucket* k = &d->buckets[b];
        if (k->work) vs_wait(k->work);
        if (k->pwork) vs_wait(k->pwork);
        _vs_ddp_hfree(d, k->param);
        if (d->desc.zero != VS_ZERO_2) _vs_ddp_hfree(d, k->grad);
        _vs_ddp_hfree(d, k->grad_shard);
        _vs_ddp_hfree(d, k->master);
        _vs_ddp_hfree(d, k->state[0]);
        _vs_ddp_hfree(d, k->state[1]);
    }
    for (int i = 0; i < d->npool && d->pool; i++) _vs_ddp_hfree(d, d->pool[i]);
    free(d->pool);
    free(d->pool_owner);
    free(d->buckets);
    free(d->order);
    _vs_ddp_hfree(d, d->scratch);
    // NULL everything: vs_ddp_free may run this again after a failed finalize
    d->pool = NULL;
    d->pool_owner = NULL;
    d->npool = 0;
    d->order = NULL;
    d->scratch = NULL;
    d->buckets = NULL;
    d->nbuckets = 0;
}

/* The range of bucket k this rank steps: all of it (ZeRO-0) or its 1/DP shard. */
_VS_DDP_PRIVATE void _vs_ddp_owned(const vs_ddp* d, const _vs_dbucket* k, int64_t* lo, int64_t* n)
{
    *lo = d->desc.zero == VS_ZERO_0 ? 0 : k->shard * d->dp_rank;
    *n = d->desc.zero == VS_ZERO_0 ? k->numel : k->shard;
}

VS_API vs_result vs_ddp_finalize(vs_ddp* d)
{
    const char* fn = "vs_ddp_finalize";
    if (!d) return vs_set_error(VS_ERR_NULL, "%s: ddp is NULL", fn);
    if (d->finalized) return vs_set_error(VS_ERR_STATE, "%s: called twice", fn);
    if (d->nparams == 0) return vs_set_error(VS_ERR_STATE, "%s: no parameters registered", fn);
    vs_result r = vs_mesh_submesh(d->mesh, vs_mesh_dim_name(d->mesh, d->dp_index), &d->dp);
    if (r) return r;
    for (int k = 0; k < vs_mesh_ndims(d->mesh); k++) { // the other dims' groups, made collectively now
        vs_mesh* sub;
        if (k != d->dp_index && (r = vs_mesh_submesh(d->mesh, vs_mesh_dim_name(d->mesh, k), &sub))) return r;
    }
    d->dp_size = vs_mesh_nranks(d->dp);
    d->dp_rank = vs_mesh_rank(d->dp);
    int n = d->nparams;
    d->order = (int*)malloc(sizeof(int) * (size_t)n);
    d->buckets = (_vs_dbucket*)calloc((size_t)n, sizeof(_vs_dbucket));
    if (!d->order || !d->buckets) goto nomem;
    for (int i = 0; i < n; i++) d->order[i] = n - 1 - i; // backward produces the last ones first
    // buckets: consecutive parameters in bucket order with the same dtypes and
    // partial dims, up to bucket_bytes
    for (int i = 0; i < n;) {
        _vs_dparam* q0 = &d->params[d->order[i]];
        _vs_dbucket* k = &d->buckets[d->nbuckets];
        k->pdtype = q0->dtype;
        k->gdtype = q0->gdtype;
        k->partial_mask = _vs_ddp_partial_mask(d, q0);
        k->first = i;
        int64_t elems = 0;
        size_t gsz = _vs_dsz(k->gdtype);
        while (i < n) {
            _vs_dparam* q = &d->params[d->order[i]];
            if (q->dtype != k->pdtype || q->gdtype != k->gdtype || _vs_ddp_partial_mask(d, q) != k->partial_mask) break;
            if (elems > 0 && (elems + q->numel) * (int64_t)gsz > d->desc.bucket_bytes) break;
            q->bucket = d->nbuckets;
            q->offset = elems;
            q->counted = _vs_ddp_counted(d, q);
            elems += q->numel;
            i++;
        }
        k->last = i;
        int64_t align = 16 * (int64_t)d->dp_size; // equal, 64-byte aligned ranges
        k->numel = (elems + align - 1) / align * align;
        k->shard = k->numel / d->dp_size;
        if (k->numel > d->max_bucket) d->max_bucket = k->numel;
        if ((size_t)k->numel * gsz > d->max_grad_bytes) d->max_grad_bytes = (size_t)k->numel * gsz;
        d->nbuckets++;
    }
    d->scratch = (float*)_vs_ddp_zalloc(d, sizeof(float) * (size_t)d->max_bucket);
    if (!d->scratch) goto nomem;
    for (int b = 0; b < d->nbuckets; b++) {
        _vs_dbucket* k = &d->buckets[b];
        size_t pz = _vs_dsz(k->pdtype), gz = _vs_dsz(k->gdtype);
        int64_t first, own;
        _vs_ddp_owned(d, k, &first, &own);
        k->param = _vs_ddp_zalloc(d, (size_t)k->numel * pz);
        if (!k->param) goto nomem;
        // an accumulator for the reduced owned range: ZeRO-1/2, and ZeRO-0 buckets
        // that are also summed over TP (their buffer cannot take a second pass)
        k->acc = d->desc.zero != VS_ZERO_0 || k->partial_mask != 0;
        k->acc_used = d->desc.zero == VS_ZERO_2;
        if (k->acc && !(k->grad_shard = (float*)_vs_ddp_zalloc(d, sizeof(float) * (size_t)own))) goto nomem;
        if (d->desc.zero != VS_ZERO_2 && !(k->grad = _vs_ddp_zalloc(d, (size_t)k->numel * gz))) goto nomem;
        if (k->pdtype != VS_F32 && !(k->master = (float*)_vs_ddp_zalloc(d, sizeof(float) * (size_t)own))) goto nomem;
        int nstate = d->desc.optim.kind == VS_OPTIM_SGD ? (d->desc.optim.momentum != 0) : 2;
        for (int s = 0; s < nstate; s++)
            if (!(k->state[s] = (float*)_vs_ddp_zalloc(d, sizeof(float) * (size_t)own))) goto nomem;
        for (int j = k->first; j < k->last; j++) {
            _vs_dparam* q = &d->params[d->order[j]];
            memcpy((char*)k->param + (size_t)q->offset * pz, q->init, (size_t)q->numel * pz);
            free(q->init);
            q->init = NULL;
        }
        if (k->master)
            for (int64_t e = 0; e < own; e++) k->master[e] = _vs_ld(k->pdtype, k->param, first + e);
    }
    if (d->desc.zero == VS_ZERO_2) {
        d->npool = d->desc.zero2_buffers;
        d->pool = (void**)calloc((size_t)d->npool, sizeof(void*));
        d->pool_owner = (int*)malloc(sizeof(int) * (size_t)d->npool);
        if (!d->pool || !d->pool_owner) goto nomem;
        for (int i = 0; i < d->npool; i++) {
            d->pool_owner[i] = -1;
            if (!(d->pool[i] = _vs_ddp_zalloc(d, d->max_grad_bytes))) goto nomem;
        }
    }
    d->finalized = 1;
    return VS_OK;
nomem:
    _vs_ddp_release(d);
    return vs_set_error(VS_ERR_NOMEM, "%s: out of memory for %d parameters", fn, n);
}

VS_API int vs_ddp_num_params(const vs_ddp* d) { return d ? d->nparams : 0; }

_VS_DDP_PRIVATE vs_result _vs_ddp_check_index(const char* fn, const vs_ddp* d, int i)
{
    if (!d) return vs_set_error(VS_ERR_NULL, "%s: ddp is NULL", fn);
    if (!d->finalized) return vs_set_error(VS_ERR_STATE, "%s: call vs_ddp_finalize first", fn);
    if (i < 0 || i >= d->nparams)
        return vs_set_error(VS_ERR_INVALID, "%s: parameter index %d out of range [0, %d)", fn, i, d->nparams);
    return VS_OK;
}

/* Waits for bucket b's parameter all-gather, if one is in flight. */
_VS_DDP_PRIVATE vs_result _vs_ddp_params_ready(vs_ddp* d, int b)
{
    _vs_dbucket* k = &d->buckets[b];
    if (!k->pwork) return VS_OK;
    vs_result r = vs_wait(k->pwork);
    k->pwork = NULL;
    return r;
}

VS_API void* vs_ddp_param(vs_ddp* d, int i)
{
    if (_vs_ddp_check_index("vs_ddp_param", d, i)) return NULL;
    _vs_dparam* q = &d->params[i];
    if (_vs_ddp_params_ready(d, q->bucket)) return NULL;
    return (char*)d->buckets[q->bucket].param + (size_t)q->offset * _vs_dsz(q->dtype);
}

VS_API vs_dtype vs_ddp_grad_dtype(const vs_ddp* d, int i)
{
    if (!d || i < 0 || i >= d->nparams) return VS_DTYPE_INVALID;
    return d->params[i].gdtype;
}

VS_API int64_t vs_ddp_local_numel(const vs_ddp* d, int i)
{
    if (!d || i < 0 || i >= d->nparams) return -1;
    return d->params[i].numel;
}

/* grad_shard += the reduced owned range at `base`. */
_VS_DDP_PRIVATE void _vs_ddp_add_owned(_vs_dbucket* k, const void* base, int64_t cnt)
{
    float* a = k->grad_shard;
    if (k->gdtype == VS_F32) {
        const float* g = (const float*)base;
        for (int64_t e = 0; e < cnt; e++) a[e] += g[e];
    } else {
        for (int64_t e = 0; e < cnt; e++) a[e] += _vs_ld(k->gdtype, base, e);
    }
}

/* A pass starts while reduced gradients of an earlier synced pass wait for a
   step: their owned ranges move into the accumulators and the buffers are
   cleared, so the new pass's local gradients reduce on their own. The usual
   single pass per step never pays for this. */
_VS_DDP_PRIVATE void _vs_ddp_begin_pass(vs_ddp* d)
{
    if (d->in_pass) return;
    d->in_pass = 1;
    if (!d->grads_pending || d->desc.zero == VS_ZERO_2) return;
    for (int b = 0; b < d->nbuckets; b++) {
        _vs_dbucket* k = &d->buckets[b];
        if (!k->acc) continue;
        int64_t lo, cnt;
        _vs_ddp_owned(d, k, &lo, &cnt);
        if (!k->acc_used) memset(k->grad_shard, 0, sizeof(float) * (size_t)cnt);
        if (!k->acc_used) _vs_ddp_add_owned(k, (char*)k->grad + (size_t)lo * _vs_dsz(k->gdtype), cnt);
        k->acc_used = 1;
        memset(k->grad, 0, (size_t)k->numel * _vs_dsz(k->gdtype));
    }
}

/* Waits for bucket b's reduction; ZeRO-2 then adds the owned range into the
   shard accumulator and gives the staging buffer back. */
_VS_DDP_PRIVATE vs_result _vs_ddp_complete(vs_ddp* d, int b)
{
    _vs_dbucket* k = &d->buckets[b];
    vs_result r = VS_OK;
    if (k->done) return VS_OK;
    if (k->work) {
        r = vs_wait(k->work);
        k->work = NULL;
    }
    if (r) return r;
    // gradients that are also partial over other dims (sequence-parallel norms)
    int64_t lo, cnt;
    _vs_ddp_owned(d, k, &lo, &cnt);
    void* base = k->grad ? (char*)k->grad + (size_t)lo * _vs_dsz(k->gdtype) : NULL;
    for (int dim = 0; dim < vs_mesh_ndims(d->mesh) && k->launched && !r; dim++) {
        if (!(k->partial_mask & (1u << dim))) continue;
        vs_mesh* sub;
        r = vs_mesh_submesh(d->mesh, vs_mesh_dim_name(d->mesh, dim), &sub);
        if (!r) r = vs_all_reduce(vs_mesh_comm(sub), base, base, (size_t)cnt, k->gdtype, VS_OP_SUM, NULL);
    }
    if (r || !k->launched) return r;
    if (k->acc_used && k->grad) _vs_ddp_add_owned(k, base, cnt); // a later pass adds up in the accumulator
    if (d->desc.zero == VS_ZERO_2 && k->staged) {
        for (int i = 0; i < d->npool; i++)
            if (d->pool_owner[i] == b) d->pool_owner[i] = -1;
        k->grad = NULL;
        k->staged = 0;
    }
    k->done = 1;
    return VS_OK;
}

_VS_DDP_PRIVATE vs_result _vs_ddp_stage(vs_ddp* d, int b);
_VS_DDP_PRIVATE vs_result _vs_ddp_launch_ready(vs_ddp* d, int all);

_VS_DDP_PRIVATE vs_result _vs_ddp_launch(vs_ddp* d, int b)
{
    _vs_dbucket* k = &d->buckets[b];
    vs_comm* c = vs_mesh_comm(d->dp);
    vs_work** wp = d->desc.no_overlap ? NULL : &k->work;
    if (d->desc.zero == VS_ZERO_2 && !k->staged) { // no gradient asked for here: take part with zeros
        vs_result r = _vs_ddp_stage(d, b);
        if (r) return r;
    }
    k->launched = 1;
    if (d->desc.zero == VS_ZERO_0)
        return vs_all_reduce(c, k->grad, k->grad, (size_t)k->numel, k->gdtype, VS_OP_AVG, wp);
    void* mine = (char*)k->grad + (size_t)(k->shard * d->dp_rank) * _vs_dsz(k->gdtype);
    return vs_reduce_scatter(c, k->grad, mine, (size_t)k->shard, k->gdtype, VS_OP_AVG, wp);
}

/* Launches, in bucket order, every bucket whose gradients are all ready. */
_VS_DDP_PRIVATE vs_result _vs_ddp_launch_ready(vs_ddp* d, int all)
{
    while (d->next_launch < d->nbuckets) {
        _vs_dbucket* k = &d->buckets[d->next_launch];
        if (!all && k->nready < k->last - k->first) break;
        vs_result r = _vs_ddp_launch(d, d->next_launch);
        if (r) return r;
        d->next_launch++;
    }
    return VS_OK;
}

/* ZeRO-2: a staging buffer for bucket b, waiting for the oldest launched bucket
   when the pool is empty. */
_VS_DDP_PRIVATE vs_result _vs_ddp_stage(vs_ddp* d, int b)
{
    _vs_dbucket* k = &d->buckets[b];
    if (k->staged) return VS_OK;
    if (k->launched)
        return vs_set_error(VS_ERR_STATE, "vs_ddp_grad: bucket %d was already reduced in this backward pass", b);
    for (;;) {
        for (int i = 0; i < d->npool; i++)
            if (d->pool_owner[i] < 0) {
                d->pool_owner[i] = b;
                k->grad = d->pool[i];
                k->staged = 1;
                memset(k->grad, 0, (size_t)k->numel * _vs_dsz(k->gdtype));
                return VS_OK;
            }
        int oldest = -1;
        for (int pass = 0; pass < 2 && oldest < 0; pass++) {
            // without overlap nothing was launched yet: reduce the ready buckets now
            if (pass == 1) {
                vs_result r = _vs_ddp_launch_ready(d, 0);
                if (r) return r;
            }
            for (int i = 0; i < d->npool; i++) {
                int o = d->pool_owner[i];
                if (o >= 0 && d->buckets[o].launched && !d->buckets[o].done && (oldest < 0 || o < oldest)) oldest = o;
            }
        }
        if (oldest < 0)
            return vs_set_error(VS_ERR_STATE,
                                "vs_ddp_grad: ZeRO-2 has %d staging buffers, all held by buckets still being filled "
                                "(raise zero2_buffers or mark gradients ready sooner)", d->npool);
        vs_result r = _vs_ddp_complete(d, oldest);
        if (r) return r;
    }
}

VS_API void* vs_ddp_grad(vs_ddp* d, int i)
{
    if (_vs_ddp_check_index("vs_ddp_grad", d, i)) return NULL;
    _vs_dparam* q = &d->params[i];
    _vs_dbucket* k = &d->buckets[q->bucket];
    _vs_ddp_begin_pass(d);
    if (d->desc.zero == VS_ZERO_2 && _vs_ddp_stage(d, q->bucket)) return NULL;
    return (char*)k->grad + (size_t)q->offset * _vs_dsz(q->gdtype);
}

VS_API const void* vs_ddp_grad_synced(vs_ddp* d, int i)
{
    if (_vs_ddp_check_index("vs_ddp_grad_synced", d, i)) return NULL;
    _vs_dparam* q = &d->params[i];
    _vs_dbucket* k = &d->buckets[q->bucket];
    if (d->in_pass) {
        vs_set_error(VS_ERR_STATE, "vs_ddp_grad_synced: '%s': a backward pass is in progress", q->name);
        return NULL;
    }
    if (k->acc_used || !k->grad) {
        vs_set_error(VS_ERR_UNSUPPORTED, "vs_ddp_grad_synced: '%s': its reduced gradient lives only in the owned f32 "
                     "range (ZeRO-2, or several synced passes)", q->name);
        return NULL;
    }
    return (const char*)k->grad + (size_t)q->offset * _vs_dsz(q->gdtype);
}

VS_API vs_result vs_ddp_zero_grad(vs_ddp* d)
{
    if (!d) return vs_set_error(VS_ERR_NULL, "vs_ddp_zero_grad: ddp is NULL");
    if (!d->finalized) return vs_set_error(VS_ERR_STATE, "vs_ddp_zero_grad: call vs_ddp_finalize first");
    if (d->in_pass)
        return vs_set_error(VS_ERR_STATE, "vs_ddp_zero_grad: a backward pass is in progress (call vs_ddp_finish_grad_sync)");
    for (int b = 0; b < d->nbuckets; b++) {
        _vs_dbucket* k = &d->buckets[b];
        int64_t lo, own;
        _vs_ddp_owned(d, k, &lo, &own);
        if (k->grad && d->desc.zero != VS_ZERO_2) memset(k->grad, 0, (size_t)k->numel * _vs_dsz(k->gdtype));
        if (k->grad_shard) memset(k->grad_shard, 0, sizeof(float) * (size_t)own);
        k->acc_used = d->desc.zero == VS_ZERO_2;
    }
    d->grads_pending = 0;
    return VS_OK;
}

VS_API vs_result vs_ddp_set_sync(vs_ddp* d, int sync)
{
    if (!d) return vs_set_error(VS_ERR_NULL, "vs_ddp_set_sync: ddp is NULL");
    if (d->in_pass) return vs_set_error(VS_ERR_STATE, "vs_ddp_set_sync: not during a backward pass");
    if (!sync && d->desc.zero == VS_ZERO_2)
        return vs_set_error(VS_ERR_UNSUPPORTED,
                            "vs_ddp_set_sync: ZeRO-2 keeps no full gradients, so it reduces every micro-batch "
                            "(accumulation happens in the owned ranges)");
    d->sync = sync != 0;
    return VS_OK;
}

VS_API vs_result vs_ddp_grad_ready(vs_ddp* d, int i)
{
    vs_result r = _vs_ddp_check_index("vs_ddp_grad_ready", d, i);
    if (r) return r;
    _vs_dparam* q = &d->params[i];
    if (q->ready)
        return vs_set_error(VS_ERR_STATE, "vs_ddp_grad_ready: '%s' marked ready twice in one backward pass", q->name);
    _vs_dbucket* k = &d->buckets[q->bucket];
    if (d->desc.zero == VS_ZERO_2 && !k->staged)
        return vs_set_error(VS_ERR_STATE, "vs_ddp_grad_ready: '%s': ask vs_ddp_grad for its gradient first (ZeRO-2)",
                            q->name);
    _vs_ddp_begin_pass(d);
    q->ready = 1;
    k->nready++;
    if (!d->sync || d->desc.no_overlap) return VS_OK;
    return _vs_ddp_launch_ready(d, 0);
}

VS_API vs_result vs_ddp_finish_grad_sync(vs_ddp* d)
{
    if (!d) return vs_set_error(VS_ERR_NULL, "vs_ddp_finish_grad_sync: ddp is NULL");
    if (!d->finalized) return vs_set_error(VS_ERR_STATE, "vs_ddp_finish_grad_sync: call vs_ddp_finalize first");
    vs_result r = VS_OK;
    if (d->sync) {
        r = _vs_ddp_launch_ready(d, 1);
        for (int b = 0; b < d->nbuckets; b++) {
            vs_result rb = _vs_ddp_complete(d, b);
            if (!r) r = rb;
        }
        d->grads_pending = r == VS_OK;
    }
    for (int i = 0; i < d->nparams; i++) d->params[i].ready = 0;
    for (int b = 0; b < d->nbuckets; b++) d->buckets[b].nready = 0, d->buckets[b].launched = 0, d->buckets[b].done = 0;
    d->next_launch = 0;
    d->in_pass = 0;
    return r;
}

/* The averaged gradient of the owned range of bucket k, as f32 in d->scratch
   (or the buffer itself when it is f32 already). */
_VS_DDP_PRIVATE float* _vs_ddp_owned_grad(vs_ddp* d, _vs_dbucket* k, int64_t lo, int64_t n)
{
    if (k->acc_used) return k->grad_shard;
    if (k->gdtype == VS_F32) return (float*)k->grad + lo;
    for (int64_t e = 0; e < n; e++) d->scratch[e] = _vs_ld(k->gdtype, k->grad, lo + e);
    return d->scratch;
}

VS_API vs_result vs_ddp_clip_grad_norm(vs_ddp* d, double max_norm, double* norm)
{
    const char* fn = "vs_ddp_clip_grad_norm";
    if (!d) return vs_set_error(VS_ERR_NULL, "%s: ddp is NULL", fn);
    if (!d->grads_pending) return vs_set_error(VS_ERR_STATE, "%s: no synchronized gradients (finish_grad_sync first)", fn);
    double ss = 0;
    // each element once: DP ranks count disjoint ranges, other dims per _vs_ddp_counted
    for (int b = 0; b < d->nbuckets; b++) {
        _vs_dbucket* k = &d->buckets[b];
        int64_t lo = k->shard * d->dp_rank, n = k->shard; // disjoint ranges, whatever the stage
        int64_t own_lo, own_n;
        _vs_ddp_owned(d, k, &own_lo, &own_n);
        float* g = _vs_ddp_owned_grad(d, k, own_lo, own_n);
        for (int j = k->first; j < k->last; j++) {
            _vs_dparam* q = &d->params[d->order[j]];
            if (!q->counted) continue;
            int64_t a = q->offset > lo ? q->offset : lo, e = q->offset + q->numel < lo + n ? q->offset + q->numel : lo + n;
            for (int64_t x = a; x < e; x++) {
                double v = g[x - own_lo];
                ss += v * v;
            }
        }
    }
    vs_result r = vs_all_reduce(vs_mesh_comm(d->mesh), &ss, &ss, 1, VS_F64, VS_OP_SUM, NULL);
    if (r) return r;
    double total = sqrt(ss);
    if (norm) *norm = total;
    if (max_norm <= 0 || total <= max_norm) return VS_OK;
    float scale = (float)(max_norm / (total + 1e-6));
    for (int b = 0; b < d->nbuckets; b++) {
        _vs_dbucket* k = &d->buckets[b];
        int64_t lo, n;
        _vs_ddp_owned(d, k, &lo, &n);
        if (k->acc_used) {
            for (int64_t e = 0; e < n; e++) k->grad_shard[e] *= scale;
        } else {
            for (int64_t e = 0; e < n; e++) _vs_st(k->gdtype, k->grad, lo + e, _vs_ld(k->gdtype, k->grad, lo + e) * scale);
        }
    }
    return VS_OK;
}

_VS_DDP_PRIVATE void _vs_ddp_group(const vs_ddp* d, const _vs_dparam* q, double lr, double* glr, double* gwd)
{
    const vs_optim_desc* o = &d->desc.optim;
    double scale = 1.0, wd = o->weight_decay;
    if (q->group > 0) {
        scale = o->groups[q->group].lr_scale != 0 ? o->groups[q->group].lr_scale : 1.0;
        wd = o->groups[q->group].weight_decay;
    }
    *glr = lr * scale;
    *gwd = q->no_decay ? 0.0 : wd;
}

VS_API vs_result vs_ddp_step(vs_ddp* d, double lr)
{
    const char* fn = "vs_ddp_step";
    if (!d) return vs_set_error(VS_ERR_NULL, "%s: ddp is NULL", fn);
    if (!d->finalized) return vs_set_error(VS_ERR_STATE, "%s: call vs_ddp_finalize first", fn);
    if (d->in_pass) return vs_set_error(VS_ERR_STATE, "%s: gradient sync not finished (call vs_ddp_finish_grad_sync)", fn);
    if (!d->grads_pending) return vs_set_error(VS_ERR_STATE, "%s: no synchronized gradients since the last step", fn);
    for (int b = 0; b < d->nbuckets; b++) {
        vs_result rw = _vs_ddp_params_ready(d, b);
        if (rw) return rw;
    }
    const vs_optim_desc* o = &d->desc.optim;
    int64_t t = ++d->steps;
    double bc1 = 1.0 - pow(o->beta1, (double)t), bc2 = 1.0 - pow(o->beta2, (double)t);
    vs_result r = VS_OK;
    for (int b = 0; b < d->nbuckets && !r; b++) {
        _vs_dbucket* k = &d->buckets[b];
        int64_t lo, n;
        _vs_ddp_owned(d, k, &lo, &n);
        float* g = _vs_ddp_owned_grad(d, k, lo, n);
        for (int j = k->first; j < k->last && !r; j++) {
            _vs_dparam* q = &d->params[d->order[j]];
            int64_t a = q->offset > lo ? q->offset : lo, e = q->offset + q->numel < lo + n ? q->offset + q->numel : lo + n;
            if (a >= e) continue;
            double glr, gwd;
            _vs_ddp_group(d, q, lr, &glr, &gwd);
            int64_t m = e - a, s0 = a - lo; // s0: index into the owned range
            float* p = k->master ? k->master + s0 : (float*)k->param + a;
            const float* gr = g + s0;
            float* m1 = k->state[0] ? k->state[0] + s0 : NULL;
            float* m2 = k->state[1] ? k->state[1] + s0 : NULL;
            if (o->kind == VS_OPTIM_ADAMW) {
                // (1 - beta) in double, then rounded: the same betas as the bias correction
                float b1 = (float)o->beta1, b2 = (float)o->beta2, eps = (float)o->eps;
                float omb1 = (float)(1.0 - o->beta1), omb2 = (float)(1.0 - o->beta2);
                float step = (float)(glr / bc1), c2 = (float)(1.0 / sqrt(bc2)), decay = (float)(1.0 - glr * gwd);
                for (int64_t x = 0; x < m; x++) {
                    m1[x] = b1 * m1[x] + omb1 * gr[x];
                    m2[x] = b2 * m2[x] + omb2 * gr[x] * gr[x];
                    p[x] = p[x] * decay - step * m1[x] / (sqrtf(m2[x]) * c2 + eps);
                }
            } else if (o->kind == VS_OPTIM_SGD) {
                float mu = (float)o->momentum, lrf = (float)glr, wdf = (float)gwd;
                for (int64_t x = 0; x < m; x++) {
                    float gx = gr[x] + wdf * p[x];
                    if (m1) {
                        m1[x] = mu * m1[x] + gx;
                        gx = o->nesterov ? gx + mu * m1[x] : m1[x];
                    }
                    p[x] -= lrf * gx;
                }
            } else {
                vs_step_args sa;
                memset(&sa, 0, sizeof sa);
                sa.name = q->name;
                sa.index = d->order[j];
                sa.offset = a - q->offset;
                sa.n = m;
                sa.param = p;
                sa.grad = gr;
                sa.state[0] = m1;
                sa.state[1] = m2;
                sa.lr = glr;
                sa.weight_decay = gwd;
                sa.step = t;
                sa.user = o->user;
                r = o->step(&sa);
            }
        }
        if (k->master) // write the rounded master weights into the owned parameters
            for (int64_t x = 0; x < n; x++) _vs_st(k->pdtype, k->param, lo + x, k->master[x]);
    }
    if (r) return r;
    // ZeRO: every rank gets the updated ranges of the others (in place), the
    // first layers' buckets first; vs_ddp_param waits for its bucket, so the
    // gathers overlap with the next forward
    if (d->desc.zero != VS_ZERO_0)
        for (int b = d->nbuckets - 1; b >= 0 && !r; b--) {
            _vs_dbucket* k = &d->buckets[b];
            size_t pz = _vs_dsz(k->pdtype);
            void* mine = (char*)k->param + (size_t)(k->shard * d->dp_rank) * pz;
            r = vs_all_gather(vs_mesh_comm(d->dp), mine, k->param, (size_t)k->shard, k->pdtype,
                              d->desc.no_overlap ? NULL : &k->pwork);
        }
    d->grads_pending = 0;
    return r;
}

VS_API int64_t vs_ddp_step_count(const vs_ddp* d) { return d ? d->steps : 0; }

VS_API vs_result vs_ddp_memory_usage(const vs_ddp* d, vs_ddp_memory* out)
{
    if (!d || !out) return vs_set_error(VS_ERR_NULL, "vs_ddp_memory_usage: %s is NULL", d ? "out" : "ddp");
    memset(out, 0, sizeof *out);
    for (int b = 0; b < d->nbuckets; b++) {
        const _vs_dbucket* k = &d->buckets[b];
        int64_t first, own;
        _vs_ddp_owned(d, k, &first, &own);
        int64_t used = 0;
        for (int j = k->first; j < k->last; j++) used += d->params[d->order[j]].numel;
        out->padding += (size_t)(k->numel - used);
        out->params += (size_t)k->numel * _vs_dsz(k->pdtype);
        if (d->desc.zero != VS_ZERO_2) out->grads += (size_t)k->numel * _vs_dsz(k->gdtype);
        if (k->acc) out->grads += (size_t)own * sizeof(float);
        if (k->master) out->master += (size_t)own * sizeof(float);
        for (int s = 0; s < 2; s++)
            if (k->state[s]) out->optim_state += (size_t)own * sizeof(float);
    }
    if (d->desc.zero == VS_ZERO_2) out->grads += (size_t)d->npool * d->max_grad_bytes;
    return VS_OK;
}

VS_API vs_result vs_ddp_free(vs_ddp* d)
{
    if (!d) return VS_OK;
    _vs_ddp_release(d);
    for (int i = 0; i < d->nparams; i++) {
        free(d->params[i].name);
        free(d->params[i].init);
    }
    free(d->params);
    free(d);
    return VS_OK;
}

#ifdef __cplusplus
}
#endif
#endif // VESCALE_DDP_IMPLEMENTATION
