/* tests/ddp_common.h - what the DDP tests built twice (thread ranks with host
   buffers; VS_STRICT: the strict CUDA + NCCL stand-in with device buffers) each
   wrote for itself: meshes, a launch, DDP memory and copies in and out of it,
   f32/bf16 elements, a parameter's local shard and its initial values, a
   layered model, allocator hooks that count (bench/rank_bytes.h's), a
   checkpoint of one DDP. (tests/ddp_model.h is one small DDP run, compared
   between the device and host paths.)

   Include after vescale_ddp.h and vs_test.h; under VS_STRICT after
   cuda_runtime.h; dc_ckpt_ddp only after vescale_ckpt.h. C and C++ alike. */
#ifndef VS_TEST_DDP_COMMON_H
#define VS_TEST_DDP_COMMON_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../bench/rank_bytes.h"

/* A 1-D mesh over all of w's ranks (its dim unnamed); NULL (checked) on failure. */
VT_UNUSED static vs_mesh* dc_mesh_1d(vs_world* w)
{
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = vs_world_size(w);
    vs_mesh* m = NULL;
    VT_OK(vs_mesh_init(w, &md, &m));
    return m;
}

/* A (PP, DPR, DPS, TP) mesh: pp or dpr 0 and tp 1 leave the dim out; the data dim
   of size dp is "DPS" beside a DPR, else "DP". NULL (checked) on failure. */
VT_UNUSED static vs_mesh* dc_mesh(vs_world* w, int pp, int dpr, int dp, int tp)
{
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    int k = 0;
    if (pp) md.shape[k] = pp, md.dim_names[k++] = "PP";
    if (dpr) md.shape[k] = dpr, md.dim_names[k++] = "DPR";
    md.shape[k] = dp, md.dim_names[k++] = dpr ? "DPS" : "DP";
    if (tp > 1) md.shape[k] = tp, md.dim_names[k++] = "TP";
    vs_mesh* m = NULL;
    VT_OK(vs_mesh_init(w, &md, &m));
    return m;
}

/* n rank threads: over NCCL (the stand-in) under VS_STRICT, else the default
   (threads); the caller sets the rest. */
VT_UNUSED static vs_launch_desc dc_launch_desc(int n)
{
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = n;
#ifdef VS_STRICT
    ld.transport = VS_TRANSPORT_NCCL;
#endif
    return ld;
}

/* Memory a trainer gives DDP: device memory on the stand-in, zeroed page-aligned
   host memory else; n 0 is one byte. */
VT_UNUSED static void* dc_mem_alloc(size_t n)
{
    void* p = NULL;
#ifdef VS_STRICT
    return cudaMalloc(&p, n ? n : 1) == cudaSuccess ? p : NULL;
#else
    if (posix_memalign(&p, 4096, n ? n : 1)) return NULL;
    memset(p, 0, n ? n : 1);
    return p;
#endif
}
VT_UNUSED static void dc_mem_free(void* p)
{
#ifdef VS_STRICT
    if (p) cudaFree(p);
#else
    free(p);
#endif
}
/* host -> DDP's memory */
VT_UNUSED static void dc_to_mem(void* dst, const void* src, size_t n)
{
#ifdef VS_STRICT
    VT_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice) == cudaSuccess, "copy of %zu bytes to %p", n, dst);
#else
    memcpy(dst, src, n);
#endif
}
/* DDP's memory -> host. On the device DDP's work is in the legacy stream's order
   (its stream): that stream first, not the device (a device synchronize would
   wait beside collectives still waiting for a peer: the stand-in's
   device-sync-during-collective). */
VT_UNUSED static void dc_from_mem(void* dst, const void* src, size_t n)
{
#ifdef VS_STRICT
    VT_CHECK(cudaStreamSynchronize(cudaStreamLegacy) == cudaSuccess, "cudaStreamSynchronize");
    VT_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost) == cudaSuccess, "copy of %zu bytes from %p", n, src);
#else
    memcpy(dst, src, n);
#endif
}

/* Element i of host memory of dtype t (f32, else bf16) as f32, and back. */
VT_UNUSED static float dc_ld(const void* p, vs_dtype t, int64_t i)
{
    return t == VS_F32 ? ((const float*)p)[i] : vs_bf16_to_f32(((const uint16_t*)p)[i]);
}
VT_UNUSED static void dc_st(void* p, vs_dtype t, int64_t i, float v)
{
    if (t == VS_F32)
        ((float*)p)[i] = v;
    else
        ((uint16_t*)p)[i] = vs_f32_to_bf16(v);
}

/* Element i of a parameter's local shard (its info): its flat index in the whole tensor. */
VT_UNUSED static int64_t dc_global_of(const vs_ddp_param_info* pi, int64_t i)
{
    int64_t g = 0, rest = i, idx[2] = {0, 0};
    for (int k = pi->ndim - 1; k >= 0; k--) {
        idx[k] = rest % pi->local_shape[k] + pi->offset[k];
        rest /= pi->local_shape[k];
    }
    for (int k = 0; k < pi->ndim; k++) g = g * pi->shape[k] + idx[k];
    return g;
}

/* Parameter p (pd) as a DDP of desc dd would shard it locally: its layout into
   *q, learned from a probe DDP that holds it alone, and the shard's initial
   values init(p, global element) in pd's dtype, in host memory the caller frees. */
VT_UNUSED static void* dc_shard_init(const vs_ddp_desc* dd, const vs_ddp_param_desc* pd, float (*init)(int, int64_t),
                                     int p, vs_ddp_param_info* q)
{
    vs_ddp* probe = NULL;
    memset(q, 0, sizeof *q);
    VT_OK(vs_ddp_init(dd, &probe));
    VT_OK(vs_ddp_add_param(probe, pd, NULL));
    VT_OK(vs_ddp_query_param_info(probe, 0, q));
    VT_OK(vs_ddp_free(probe));
    void* v = calloc((size_t)q->local_numel + 1, vs_dtype_size(pd->dtype));
    for (int64_t i = 0; v && i < q->local_numel; i++) dc_st(v, pd->dtype, i, init(p, dc_global_of(q, i)));
    return v;
}

/* A layered model: nk kinds a layer over `layers` layers, kind k a 1-D parameter
   of ksz[k] elements named kname[k] (a "%d" format: vs_ddp_param_desc.layers
   registers every layer of a kind in one call), layer l in ready group l + 1,
   bf16 or f32; element e of layer l's kind k starts at init(l, k, e); the kinds
   in the no_decay mask (bit k) skip weight decay. */
typedef struct dc_layers {
    int layers, nk, bf16;
    const int64_t* ksz;
    const char* const* kname;
    float (*init)(int l, int k, int64_t e);
    unsigned no_decay;
} dc_layers;
enum {
    DC_ADD,      /* registers each kind with its initial values */
    DC_ADD_LAZY, /* registers each kind without data (zeros) */
    DC_WRITE     /* writes the initial values into the registered parameters (vs_ddp_write_param) */
};
/* idx[k * layers + l]: layer l's kind k (DC_WRITE reads it, the others fill it). */
VT_UNUSED static void dc_add_layers(vs_ddp* d, const dc_layers* m, int* idx, int how)
{
    size_t es = m->bf16 ? 2 : 4;
    for (int k = 0; k < m->nk; k++) {
        int64_t n = m->ksz[k];
        char* data = (char*)malloc((size_t)(n * m->layers) * es);
        for (int l = 0; l < m->layers; l++)
            for (int64_t e = 0; e < n; e++) dc_st(data, m->bf16 ? VS_BF16 : VS_F32, l * n + e, m->init(l, k, e));
        int* ix = idx + k * m->layers;
        if (how == DC_WRITE) {
            for (int l = 0; l < m->layers; l++) VT_OK(vs_ddp_write_param(d, ix[l], data + (size_t)(l * n) * es));
        } else {
            vs_ddp_param_desc pd;
            memset(&pd, 0, sizeof pd);
            pd.name = m->kname[k];
            pd.dtype = m->bf16 ? VS_BF16 : VS_F32;
            pd.ndim = 1;
            pd.shape[0] = n;
            pd.data = how == DC_ADD_LAZY ? NULL : data;
            pd.layers = m->layers;
            pd.ready_group = 1;
            pd.no_decay = (m->no_decay >> k) & 1;
            int first = -1;
            VT_OK(vs_ddp_add_param(d, &pd, &first));
            for (int l = 0; l < m->layers; l++) ix[l] = first + l;
        }
        free(data);
    }
}

/* The world's allocator hooks' counts (bench/rank_bytes.h), each rank thread's
   apart: the hooks are dc_acct_hooks(&a); a rank's thread charges its own
   account with dc_acct_enter(&a, rank) first (other threads charge rb_other,
   which no test reads); only allocations of a.opts.min_bytes or more count.
   Under VS_STRICT device allocations are counted too (rank[r].dev). */
enum { DC_ACCT_MAXR = 8 };
typedef struct dc_acct {
    rb_opts opts;
    rb_account rank[DC_ACCT_MAXR];
} dc_acct;
VT_UNUSED static void dc_acct_enter(dc_acct* a, int rank)
{
    rb_acct = a && rank >= 0 && rank < DC_ACCT_MAXR ? &a->rank[rank] : NULL;
}
VT_UNUSED static vs_allocator dc_acct_hooks(dc_acct* a) { return rb_hooks(a ? &a->opts : NULL); }

#ifdef VESCALE_CKPT_INCLUDED
/* Saves (save 1) or loads d's state at path with a checkpointer of its own, freed
   at once: the save and load synchronize d, so no collective is in flight while
   the checkpointer's device memory goes (a free beside one would be a device sync). */
VT_UNUSED static vs_result dc_ckpt_ddp(vs_mesh* mesh, vs_ddp* d, const char* path, int save)
{
    vs_ckpt* ck = NULL;
    vs_ckpt_desc cd;
    memset(&cd, 0, sizeof cd);
    cd.mesh = mesh;
    vs_result r = vs_ckpt_init(&cd, &ck);
    if (!r) r = save ? vs_ckpt_save_ddp(ck, path, d, "", NULL, 0, NULL) : vs_ckpt_load_ddp(ck, path, d, "", NULL, 0);
    vs_result rf = vs_ckpt_free(ck);
    return r ? r : rf;
}
#endif
#endif
