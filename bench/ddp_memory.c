/* bench/ddp_memory.c - memory per rank of the example GPT's parameters under ZeRO-1,
   ZeRO-2, ZeRO-3 and HSDP (ZeRO-3 over DPR2 x DPS(DP/2)) at DP 2, 4 and 8, measured
   through the world's allocator hooks (bench/rank_bytes.h: each rank thread's
   live bytes and peak counted apart) beside vs_ddp_memory_usage (issue 34, section 5:
   "Memory"). Thread ranks, host buffers. Counted, not timed.

       build/bench_ddp_memory

   The model: examples/train_gpt.c's GPT (vocab 64, seq 16, dim 64, 2 blocks; f32,
   AdamW), its parameters registered through the DDP directly, a ready group a unit
   (embed: wte wpe; h.i.attn; h.i.mlp; head: lnf; wte tied, so once). Per config:
   a first DDP makes the mesh's groups (not measured), then the measured one:
     rest      params + gradients (owned) + optimizer state + masters, from
               vs_ddp_memory_usage after finalize: what stays between steps
     bound     ZeRO-3 / HSDP: 1.05 x (total / shard ranks) + one group's padding,
               total = every parameter's bytes of parameter, f32 gradient and AdamW's
               two moments (16 bytes an element)
     hooks_rest  what the hooks see live after finalize (rest + the pools made
               there: the gathered pool, the gradient staging pool, the scratch,
               and DDP's tables)
     peak      the hooks' peak over 3 steps (forward gather/release per unit,
               backward gather, gradient, vs_ddp_group_ready, release; finish,
               step)
     formula   owned state + the gathered groups at once (current + prefetched:
               2 x the largest group) + the gradient staging (DDP's pool: 2 x the
               largest group's gradients, one reducing while the next is written)
               + the f32 scratch + DDP's tables (vs_ddp_memory.scratch, .tables)
     other     hooks_rest - what vs_ddp_memory_usage reports after finalize: 0
               when it reports all (gathered, tables and the formula: as
               reported after the steps, the pool as the first step sized it)
     allocs    allocations in a steady step (the transport's handles)
   Then the example GPT with its head's unit holding the embedding's group too
   (vs_parallelize's tied wte: two groups at once, and one prefetched). The
   table prints peak / formula; the test (tests/test_ddp_memory.c) asserts
   rest <= bound, other = 0 and peak <= 1.05 x formula for ZeRO-3 and HSDP, and
   that a step allocates nothing big. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vescale_ddp.h"
#include "rank_bytes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DM_MAXR 8
#define DM_STEPS 3

#define DM_BIG 4096 /* an allocation this large counts as big (a step makes none) */

/* The GPT's sizes: examples/train_gpt.c's (the example) and a larger one of the same
   shape, where the DDP's bookkeeping (its tables, names) is a smaller part. */
typedef struct dm_gpt {
    const char* name;
    int V, T, D, L;
} dm_gpt;
static const dm_gpt dm_gpts[2] = {{"example GPT", 64, 16, 64, 2}, {"GPT D256 L4", 1024, 64, 256, 4}};

/* The GPT's parameters: name, numel, unit (ready group). */
typedef struct dm_param {
    char name[32];
    int64_t numel;
    int group;
} dm_param;
#define DM_MAXP 64
static int dm_model(const dm_gpt* m, dm_param* p)
{
    int n = 0;
    int64_t D = m->D;
#define DM_ADD(nm, ne, g) (snprintf(p[n].name, sizeof p[n].name, "%s", nm), p[n].numel = (ne), p[n].group = (g), n++)
    DM_ADD("wte", (int64_t)m->V * D, 1);
    DM_ADD("wpe", (int64_t)m->T * D, 1);
    for (int i = 0; i < m->L; i++) {
        char b[32];
        int ga = 2 + 2 * i, gm = 3 + 2 * i;
        static const char* const an[] = {"ln1.g", "ln1.b", "wq", "wk", "wv", "bq", "bv", "proj", "bproj"};
        const int64_t am[] = {1, 1, D, D, D, 1, 1, D, 1}; /* x D */
        static const char* const mn[] = {"ln2.g", "ln2.b", "fc", "bfc", "fc2", "bfc2"};
        const int64_t mm[] = {1, 1, 4 * D, 4, 4 * D, 1};
        for (int k = 0; k < 9; k++) snprintf(b, sizeof b, "h.%d.attn.%s", i, an[k]), DM_ADD(b, am[k] * D, ga);
        for (int k = 0; k < 6; k++) snprintf(b, sizeof b, "h.%d.mlp.%s", i, mn[k]), DM_ADD(b, mm[k] * D, gm);
    }
    DM_ADD("lnf.g", D, 2 + 2 * m->L);
    DM_ADD("lnf.b", D, 2 + 2 * m->L);
#undef DM_ADD
    return n;
}
static int dm_ngroups(const dm_gpt* m) { return 2 + 2 * m->L; }

enum { DM_Z1, DM_Z2, DM_Z3, DM_HSDP, DM_NKIND };
static const char* const dm_kind_name[DM_NKIND] = {"ZeRO-1", "ZeRO-2", "ZeRO-3", "HSDP"};

typedef struct dm_row {
    const dm_gpt* gpt;
    int kind, dp, ok;
    int tied; /* the head's unit also gathers the embedding's group (vs_parallelize's tied wte) */
    int64_t total; /* elements */
    size_t rest, bound, hooks_rest, peak, formula, gathered, staging, scratch, tables, padding, total_bytes, group_pad;
    size_t scratch_want; /* the scratch as worked out here: a shard of the largest group (ZeRO-3), else the largest */
    long other; /* hooks after finalize - everything vs_ddp_memory_usage reports then (0: it reports all the DDP holds) */
    long big_steady, allocs_steady; /* a steady step's allocations: of DM_BIG bytes or more; all (per step) */
    char err[200];
} dm_row;

typedef struct dm_ctx {
    dm_row* row;
    rb_opts opts; /* the hooks' (bench/rank_bytes.h): blocks of DM_BIG or more counted apart */
    rb_account acct[DM_MAXR];
    vs_ddp_memory mem[DM_MAXR], mem_end[DM_MAXR]; /* after finalize; after the steps */
    long base[DM_MAXR], hrest[DM_MAXR], peak[DM_MAXR], big0[DM_MAXR], n0[DM_MAXR];
    int failed[DM_MAXR];
} dm_ctx;

static vs_result dm_make(vs_mesh* m, const dm_gpt* gpt, int kind, vs_ddp** out)
{
    dm_param ps[DM_MAXP];
    int np = dm_model(gpt, ps);
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = m;
    dd.zero = kind == DM_Z1 ? VS_ZERO_1 : kind == DM_Z2 ? VS_ZERO_2 : VS_ZERO_3;
    if (kind == DM_HSDP) dd.dp_replicate_dim = "DPR", dd.dp_dim = "DPS";
    dd.optim.kind = VS_OPTIM_ADAMW;
    dd.optim.weight_decay = 0.1;
    vs_ddp* d = NULL;
    vs_result r = vs_ddp_init(&dd, &d);
    float* data = (float*)calloc((size_t)gpt->V * (size_t)gpt->D * 4 + (size_t)gpt->T * (size_t)gpt->D, sizeof(float));
    if (!r && !data) r = vs_set_error(VS_ERR_NOMEM, "bench: the init data");
    for (int i = 0; i < np && !r; i++) {
        vs_ddp_param_desc p;
        memset(&p, 0, sizeof p);
        for (int64_t e = 0; e < ps[i].numel; e++) data[e] = (float)(0.01 * ((e * 7 + i) % 13) - 0.06);
        p.name = ps[i].name, p.dtype = VS_F32, p.ndim = 1, p.shape[0] = ps[i].numel, p.data = data;
        p.ready_group = ps[i].group;
        r = vs_ddp_add_param(d, &p, NULL);
    }
    free(data);
    if (!r) r = vs_ddp_finalize(d);
    if (r) {
        vs_ddp_free(d);
        return r;
    }
    *out = d;
    return VS_OK;
}

/* One step of the GPT's unit order: forward gathers, backward gathers with a gradient each.
   tied: the head's unit (the last group) holds the embedding's group too, as
   vs_parallelize's unit hooks do for the tied wte: two groups at once. */
static vs_result dm_step(vs_ddp* d, int ng, int np, const dm_param* ps, int tied)
{
    vs_result r = vs_ddp_zero_grad(d);
    for (int g = 1; g <= ng && !r; g++) {
        if ((r = vs_ddp_gather(d, g))) break;
        if (tied && g == ng && !(r = vs_ddp_gather(d, 1))) r = vs_ddp_release(d, 1);
        if (!r) r = vs_ddp_release(d, g);
    }
    for (int g = ng; g >= 1 && !r; g--) {
        if ((r = vs_ddp_gather(d, g))) break;
        if (tied && g == ng && (r = vs_ddp_gather(d, 1))) break;
        for (int i = 0; i < np && !r; i++) {
            if (ps[i].group != g) continue;
            float* gr = (float*)vs_ddp_grad(d, i);
            if (!gr) return vs_set_error(VS_ERR_STATE, "%s", vs_last_error());
            for (int64_t e = 0; e < ps[i].numel; e++) gr[e] += 1e-3f * (float)(e % 5);
        }
        if (!r) r = vs_ddp_group_ready(d, g);
        if (!r) r = vs_ddp_release(d, g);
        if (!r && tied && g == ng) r = vs_ddp_release(d, 1);
    }
    if (!r) r = vs_ddp_finish_grad_sync(d);
    if (!r) r = vs_ddp_step(d, 1e-3);
    return r;
}

static int dm_rank_fn(vs_world* w, void* arg)
{
    dm_ctx* c = (dm_ctx*)arg;
    int me = vs_world_rank(w), n = vs_world_size(w);
    rb_acct = &c->acct[me];
    const dm_gpt* gpt = c->row->gpt;
    dm_param ps[DM_MAXP];
    int np = dm_model(gpt, ps);
    vs_mesh* m = NULL;
    vs_ddp *d0 = NULL, *d = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    if (c->row->kind == DM_HSDP) {
        md.shape[0] = 2, md.shape[1] = n / 2, md.dim_names[0] = "DPR", md.dim_names[1] = "DPS";
    } else {
        md.shape[0] = n, md.dim_names[0] = "DP";
    }
    vs_result r = vs_mesh_init(w, &md, &m);
    if (!r) r = dm_make(m, gpt, c->row->kind, &d0); /* makes the mesh's groups: not measured */
    if (!r) r = vs_ddp_free(d0);
    if (!r) {
        c->base[me] = (long)rb_live();
        r = dm_make(m, gpt, c->row->kind, &d);
    }
    if (!r) r = vs_ddp_memory_usage(d, &c->mem[me]);
    if (!r) c->hrest[me] = (long)rb_mark() - c->base[me];
    for (int s = 0; s < DM_STEPS && !r; s++) {
        if (s == 1) c->big0[me] = rb_acct->big, c->n0[me] = rb_acct->n; /* (the first records the order) */
        r = dm_step(d, dm_ngroups(gpt), np, ps, c->row->tied);
    }
    if (!r) c->peak[me] = (long)rb_since((size_t)c->base[me]), c->big0[me] = rb_acct->big - c->big0[me];
    if (!r) c->n0[me] = rb_acct->n - c->n0[me];
    if (!r) r = vs_ddp_memory_usage(d, &c->mem_end[me]);
    if (r && me == 0) snprintf(c->row->err, sizeof c->row->err, "%.190s", vs_last_error());
    if (r) c->failed[me] = 1, vs_comm_abort(vs_world_comm(w));
    vs_ddp_free(d);
    vs_mesh_free(m);
    return r ? 1 : 0;
}

/* n rounded up to the buckets' alignment over `shard` ranks (16 elements a rank) */
static int64_t gsz_pad(int64_t n, int shard) { return (n + 16 * shard - 1) / (16 * shard) * (16 * shard); }

/* Measures one config into *row (rank 0's figures; every rank's are alike but for padding). */
static void dm_measure_ex(const dm_gpt* gpt, int kind, int dp, int tied, dm_row* row)
{
    static dm_ctx c; /* (large: 8 ranks' memory structs) */
    memset(&c, 0, sizeof c);
    memset(row, 0, sizeof *row);
    row->gpt = gpt, row->kind = kind, row->dp = dp, row->tied = tied;
    c.row = row;
    dm_param ps[DM_MAXP];
    int np = dm_model(gpt, ps);
    int64_t gsz[DM_MAXP] = {0}, maxg = 0;
    for (int i = 0; i < np; i++) row->total += ps[i].numel, gsz[ps[i].group] += ps[i].numel;
    for (int g = 1; g <= dm_ngroups(gpt); g++) maxg = gsz[g] > maxg ? gsz[g] : maxg;
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = dp;
    ld.timeout_s = 60;
    c.opts.big_bytes = DM_BIG;
    ld.allocator = rb_hooks(&c.opts);
    vs_result r = vs_launch_ex(&ld, dm_rank_fn, &c);
    if (r) {
        if (!row->err[0]) snprintf(row->err, sizeof row->err, "%.190s", vs_last_error());
        return;
    }
    const vs_ddp_memory* m = &c.mem[0];
    int shard = kind == DM_HSDP ? dp / 2 : dp;
    row->ok = 1;
    row->rest = m->params + (m->grads - m->grad_staging) + m->optim_state + m->master;
    row->gathered = m->gathered, row->staging = m->grad_staging, row->padding = m->padding;
    row->total_bytes = (size_t)row->total * 16;
    /* one group's padding: the largest group rounded up to the DDP's alignment at most */
    row->group_pad = (size_t)16 * (size_t)(16 * shard);
    row->bound = (size_t)(1.05 * (double)row->total_bytes / shard) + row->group_pad;
    row->hooks_rest = (size_t)c.hrest[0];
    row->peak = (size_t)c.peak[0];
    /* DDP's f32 scratch: a shard of the largest group (ZeRO-3), the largest bucket padded (else) */
    row->scratch = m->scratch, row->tables = m->tables;
    row->scratch_want = (size_t)(kind >= DM_Z3 ? gsz_pad(maxg, shard) / shard : gsz_pad(maxg, shard)) * 4;
    row->other = (long)row->hooks_rest - (long)(row->rest + row->gathered + row->staging + row->scratch + row->tables);
    /* the formula with the pools as the first step left them (the gathered pool sized by it; the recorded order) */
    const vs_ddp_memory* e = &c.mem_end[0];
    row->gathered = e->gathered, row->tables = e->tables;
    row->formula = row->rest + row->gathered + row->staging + row->scratch + row->tables;
    for (int k = 0; k < dp; k++) {
        if (c.big0[k] > row->big_steady) row->big_steady = c.big0[k];
        if (c.n0[k] > row->allocs_steady) row->allocs_steady = c.n0[k];
    }
    row->allocs_steady = (row->allocs_steady + DM_STEPS - 2) / (DM_STEPS - 1); /* (per step, rounded up) */
}

static void dm_measure(const dm_gpt* gpt, int kind, int dp, dm_row* row) { dm_measure_ex(gpt, kind, dp, 0, row); }

static void dm_header(const dm_gpt* g)
{
    printf("# %s (V%d T%d D%d L%d, f32, AdamW), bytes a rank; rest = params + grads + optimizer state (owned)\n",
           g->name, g->V, g->T, g->D, g->L);
    printf("# %-6s %3s | %10s %10s %10s | %9s %9s %8s %7s | %10s %10s %7s | %5s %6s\n", "stage", "DP", "rest",
           "tot/shard", "bound", "gathered", "staging", "scratch", "tables", "peak", "formula", "pk/frm", "other",
           "allocs");
}
static void dm_print(const dm_row* w)
{
    if (!w->ok) {
        printf("  %-6s %3d | failed: %s\n", dm_kind_name[w->kind], w->dp, w->err);
        return;
    }
    int z3 = w->kind >= DM_Z3;
    int shard = w->kind == DM_HSDP ? w->dp / 2 : w->dp;
    char b[32] = "-";
    if (z3) snprintf(b, sizeof b, "%zu", w->bound);
    printf("  %-6s %3d | %10zu %10zu %10s | %9zu %9zu %8zu %7zu | %10zu %10zu %7.3f | %5ld %6ld\n",
           dm_kind_name[w->kind], w->dp, w->rest, w->total_bytes / (size_t)shard, b, w->gathered, w->staging, w->scratch,
           w->tables, w->peak, w->formula, (double)w->peak / (double)w->formula, w->other, w->allocs_steady);
}

#ifndef DM_NO_MAIN
int main(void)
{
    static const int dps[3] = {2, 4, 8};
    int rc = 0;
    for (int m = 0; m < 2; m++) {
        dm_header(&dm_gpts[m]);
        for (int k = 0; k < DM_NKIND; k++)
            for (int i = 0; i < 3; i++) {
                dm_row w;
                dm_measure(&dm_gpts[m], k, dps[i], &w);
                dm_print(&w);
                if (!w.ok) rc = 1;
            }
    }
    printf("# the example GPT again, its head's unit holding the embedding's group too (vs_parallelize's tied wte):\n"
           "# 2 groups at once + 1 prefetched, the gathered pool sized at the first step's end\n");
    for (int k = DM_Z3; k <= DM_HSDP; k++)
        for (int i = 0; i < 3; i++) {
            dm_row w;
            dm_measure_ex(&dm_gpts[0], k, dps[i], 1, &w);
            dm_print(&w);
            if (!w.ok) rc = 1;
        }
    return rc;
}
#endif
