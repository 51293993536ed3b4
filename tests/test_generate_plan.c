/* vs_generate_plan, vs_plan_explain and the profile: the chosen plan is the
   fastest feasible one of every configuration enumerated, hand-computed costs on
   small meshes, fixed sizes, memory limits, and the errors for constraints no
   configuration meets. The model is synthetic (nothing runs), except for
   vs_profile_measure's, which runs on 2 thread ranks. */
#define VESCALE_IMPLEMENTATION
#include "vescale.h"
#include "tests/vs_test.h"
#include <ctype.h>
#include <math.h>
#include <regex.h>
#include <stdlib.h>
#include <time.h>

#define MAXL 64

/* A GPT-shaped model: embed, nblocks blocks (norm, attention wq/wo, MLP w1/b1/w2),
   head, loss. Flops per row: the matmuls' 2 x in x out. */
typedef struct tmodel {
    vs_layer_decl L[MAXL];
    char name[MAXL][32], in[MAXL][64], out[MAXL][64];
    char pname[MAXL][VS_LAYER_MAX_PARAMS][48];
    int n;
    int64_t D, V;
    double flops_sharded, flops_loss; // per row: layers holding a TP-sharded parameter, and the rest
    double params;                    // elements
    vs_model_desc m;
} tmodel;

static vs_result dummy(vs_pipe_call* c)
{
    (void)c;
    return VS_OK;
}

static void add_param(tmodel* t, vs_layer_decl* L, int u, const char* name, vs_role role, int ndim, int64_t a, int64_t b)
{
    int j = L->nparams++;
    snprintf(t->pname[u][j], sizeof t->pname[u][j], "%s", name);
    L->params[j].name = t->pname[u][j];
    L->params[j].dtype = VS_F32;
    L->params[j].ndim = ndim;
    L->params[j].shape[0] = a;
    L->params[j].shape[1] = b;
    L->params[j].role = role;
    t->params += (double)a * (ndim > 1 ? (double)b : 1);
}

static vs_layer_decl* add_layer(tmodel* t, const char* name, const char* in, const char* out, double flops, int split_bw)
{
    int u = t->n++;
    vs_layer_decl* L = &t->L[u];
    memset(L, 0, sizeof *L);
    snprintf(t->name[u], sizeof t->name[u], "%s", name);
    snprintf(t->in[u], sizeof t->in[u], "%s", in);
    snprintf(t->out[u], sizeof t->out[u], "%s", out);
    L->unit.name = t->name[u];
    L->unit.inputs = t->in[u];
    L->unit.outputs = t->out[u];
    L->unit.forward = dummy;
    if (split_bw) L->unit.backward_input = L->unit.backward_weight = dummy;
    else L->unit.backward = dummy;
    L->unit.flops = flops;
    return L;
}

static void build(tmodel* t, int nblocks, int64_t D, int64_t V, int split_bw)
{
    memset(t, 0, sizeof *t);
    t->D = D, t->V = V;
    char o[64], i[64], nm[48];
    snprintf(o, sizeof o, "x0:f32[*,%lld]", (long long)D);
    vs_layer_decl* L = add_layer(t, "embed", "tokens", o, 2.0 * (double)D, split_bw);
    add_param(t, L, t->n - 1, "wte", VS_ROLE_EMBEDDING, 2, V, D);
    t->flops_sharded += 2.0 * (double)D;
    for (int b = 0; b < nblocks; b++) {
        char ln[16];
        snprintf(ln, sizeof ln, "h%d", b);
        snprintf(i, sizeof i, "x%d", b);
        snprintf(o, sizeof o, "x%d:f32[*,%lld]", b + 1, (long long)D);
        double f = 20.0 * (double)D * (double)D;
        L = add_layer(t, ln, i, o, f, split_bw);
        int u = t->n - 1;
        snprintf(nm, sizeof nm, "h.%d.ln", b), add_param(t, L, u, nm, VS_ROLE_NORM, 1, D, 0);
        snprintf(nm, sizeof nm, "h.%d.attn.wq", b), add_param(t, L, u, nm, VS_ROLE_COLUMN, 2, D, D);
        snprintf(nm, sizeof nm, "h.%d.attn.wo", b), add_param(t, L, u, nm, VS_ROLE_ROW, 2, D, D);
        snprintf(nm, sizeof nm, "h.%d.mlp.w1", b), add_param(t, L, u, nm, VS_ROLE_COLUMN, 2, D, 4 * D);
        snprintf(nm, sizeof nm, "h.%d.mlp.b1", b), add_param(t, L, u, nm, VS_ROLE_COLUMN, 1, 4 * D, 0);
        snprintf(nm, sizeof nm, "h.%d.mlp.w2", b), add_param(t, L, u, nm, VS_ROLE_ROW, 2, 4 * D, D);
        t->flops_sharded += f;
    }
    snprintf(i, sizeof i, "x%d", nblocks);
    snprintf(o, sizeof o, "logits:f32[*,%lld]", (long long)V);
    L = add_layer(t, "head", i, o, 2.0 * (double)D * (double)V, split_bw);
    add_param(t, L, t->n - 1, "lm_head", VS_ROLE_HEAD, 2, D, V);
    t->flops_sharded += 2.0 * (double)D * (double)V;
    L = add_layer(t, "loss", "logits,targets", "loss:f32[]", 3.0 * (double)V, split_bw);
    t->flops_loss = 3.0 * (double)V;
    t->m.layers = t->L;
    t->m.nlayers = t->n;
}

static int divides_model(const tmodel* t, int tp) { return t->D % tp == 0 && (4 * t->D) % tp == 0 && t->V % tp == 0; }

/* The HSDP shard sizes the planner weighs (its rule, counted here): divisors S
   of dp, 1 < S < dp, whose S x tp ranks divide a host, where DP spans hosts. */
static int hsdp_sizes(const vs_constraints* c, int dp, int tp)
{
    int n = 0, N = c->node_ranks;
    for (int S = 2; N > 0 && dp * tp > N && S < dp; S++) n += dp % S == 0 && S * tp <= N && N % (S * tp) == 0;
    return n;
}

/* How many entries the planner enumerates (its rules, counted here): a mesh that
   cannot work is one entry, a microbatch count that does not divide the rows
   one entry, else one per schedule and DP form, twice (without and with
   recompute) where the planner weighs recompute: under a memory limit unless
   told never, or only with it when told always. The DP forms: ZeRO 0; then
   without HSDP and for each HSDP size, ZeRO 1 and 2, and where ZeRO-3 is
   weighed (under a memory limit unless told never, or when told always) ZeRO-3
   and, with more than one microbatch, ZeRO-3 kept gathered. */
static int expected_count(const tmodel* t, const vs_constraints* c)
{
    int W = c->world, n = 0;
    for (int pp = 1; pp <= W; pp++) {
        if (W % pp || (c->pp && c->pp != pp)) continue;
        for (int tp = 1; tp <= W / pp; tp++) {
            if ((W / pp) % tp || (c->tp && c->tp != tp)) continue;
            int dp = W / pp / tp;
            if (c->dp && c->dp != dp) continue;
            if (pp > t->n || !divides_model(t, tp) || c->global_batch % dp) {
                n++;
                continue;
            }
            int Ms[3] = {pp, 2 * pp, 4 * pp}, nM = c->microbatches ? 1 : 3;
            if (c->microbatches) Ms[0] = c->microbatches;
            for (int i = 0; i < nM; i++) {
                if ((c->global_batch / dp) % Ms[i]) {
                    n++;
                    continue;
                }
                int nsched = pp == 1 ? 1 : 3 + (t->n >= 2 * pp ? 2 : 0);
                int nrc = c->recompute == 0 && c->mem_limit_bytes > 0 ? 2 : 1;
                int z3 = c->zero3 > 0 || (c->zero3 == 0 && c->mem_limit_bytes > 0);
                int forms = dp > 1 ? 1 + (1 + hsdp_sizes(c, dp, tp)) * (2 + (z3 ? 1 + (Ms[i] > 1) : 0)) : 1;
                n += nsched * forms * nrc;
            }
        }
    }
    return n;
}

#define CAP 4096
static vs_plan_estimate est[CAP];
static char text[1 << 16];

static int near(double a, double b, double rel) { return fabs(a - b) <= rel * fabs(b) + 1e-300; }

/* The properties every successful call must have. */
static void check_choice(const tmodel* t, const vs_constraints* c, const vs_plan* out, int n, const char* what)
{
    VT_CHECK(n == expected_count(t, c), "%s: %d estimates, expected %d", what, n, expected_count(t, c));
    VT_CHECK(n > 0 && est[0].feasible, "%s: est[0] is not feasible", what);
    if (n <= 0) return;
    VT_CHECK(!memcmp(out, &est[0].plan, sizeof *out), "%s: *out is not est[0]'s plan", what);
    double best = HUGE_VAL;
    int nfeas = 0, sorted = 1, grouped = 1;
    for (int i = 0; i < n; i++) {
        const vs_plan_estimate* e = &est[i];
        if (e->feasible) {
            nfeas++;
            if (e->step_s < best) best = e->step_s;
            if (i > 0 && e->step_s < est[i - 1].step_s) sorted = 0;
            if (i > 0 && !est[i - 1].feasible) grouped = 0;
            VT_CHECK(near(e->step_s, e->compute_s + e->comm_s + e->bubble_s, 1e-12), "%s: parts do not add up", what);
            VT_CHECK(e->compute_s > 0 && e->comm_s >= 0 && e->bubble_s >= 0, "%s: negative part", what);
            VT_CHECK(!(c->mem_limit_bytes > 0) || e->mem_bytes <= c->mem_limit_bytes, "%s: feasible over the limit", what);
            VT_CHECK(i == 0 || strstr(e->why, "over the best") || strstr(e->why, "as fast"), "%s: runner-up %d why '%s'",
                     what, i, e->why);
        } else {
            VT_CHECK(e->why[0], "%s: rejected entry %d has no reason", what, i);
        }
        const vs_plan* p = &e->plan;
        VT_CHECK(p->pp * p->dp * p->tp == c->world, "%s: %dx%dx%d is not the world %d", what, p->pp, p->dp, p->tp, c->world);
        VT_CHECK(!c->pp || p->pp == c->pp, "%s: pp %d, fixed %d", what, p->pp, c->pp);
        VT_CHECK(!c->dp || p->dp == c->dp, "%s: dp %d, fixed %d", what, p->dp, c->dp);
        VT_CHECK(!c->tp || p->tp == c->tp, "%s: tp %d, fixed %d", what, p->tp, c->tp);
        VT_CHECK(!c->microbatches || p->microbatches == c->microbatches, "%s: M %d, fixed %d", what, p->microbatches,
                 c->microbatches);
    }
    VT_CHECK(sorted && grouped, "%s: est[] is not the feasible ones by time, then the rejected", what);
    VT_CHECK(est[0].step_s == best, "%s: chosen %g s, the fastest feasible %g s", what, est[0].step_s, best);
    (void)nfeas;
}

static vs_profile prof(void)
{
    vs_profile p;
    memset(&p, 0, sizeof p);
    p.flop_s = 1e-9, p.bw_bytes_s = 1e9, p.latency_s = 1e-5, p.p2p_bw_bytes_s = 2e9;
    return p;
}

static tmodel tm;

/* One rank: every configuration is the same compute, 3 x forward flops. */
static void test_one_rank(void)
{
    build(&tm, 4, 64, 256, 0);
    vs_constraints c;
    memset(&c, 0, sizeof c);
    c.world = 1, c.global_batch = 32, c.act_bytes_per_row = 1000;
    vs_profile pf = prof();
    vs_plan out;
    int n = 0;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    check_choice(&tm, &c, &out, n, "one rank");
    double want = 3 * (tm.flops_sharded + tm.flops_loss) * 32 * 1e-9;
    for (int i = 0; i < n; i++) {
        VT_CHECK(near(est[i].step_s, want, 1e-12), "M=%d: step %.17g, want %.17g", est[i].plan.microbatches, est[i].step_s, want);
        VT_CHECK(est[i].comm_s == 0 && est[i].bubble_s < 1e-15, "one rank has no communication or bubble");
    }
    // equal times: the least memory wins (4 microbatches of 8 rows, one live)
    VT_CHECK(out.microbatches == 4 && out.pp == 1 && out.dp == 1 && out.tp == 1, "chose M=%d", out.microbatches);
    double P = tm.params, mem = 4 * P + 4 * P + 8 * P + 1000.0 * 8 * tm.n;
    VT_CHECK(near(est[0].mem_bytes, mem, 1e-12), "memory %.17g, want %.17g", est[0].mem_bytes, mem);
    /* Host overheads: per microbatch an F and a BW instruction (instr_s each)
       and 2 callback calls per layer (call_s each); so now 1 microbatch wins. */
    pf.call_s = 1e-4, pf.instr_s = 3e-4;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    for (int i = 0; i < n; i++) {
        int M = est[i].plan.microbatches;
        double w = want + M * (2 * 3e-4 + 2 * tm.n * 1e-4);
        VT_CHECK(near(est[i].step_s, w, 1e-12), "M=%d with overheads: step %.17g, want %.17g", M, est[i].step_s, w);
    }
    VT_CHECK(out.microbatches == 1, "with overheads chose M=%d", out.microbatches);
}

/* DP's exposed reduction of T seconds over tm on one stage (one chunk), by
   hand: layer u's gradients start reducing after its backward of the last
   microbatch (2 x its flops x rows x flop_s: no TP, no overheads), so the
   reductions of layers u and before (T x their share of the elements, all of
   one dtype) show beyond the backward of the layers before u; the largest
   such excess. (Before vs_parallelize marked each layer ready, all of T showed
   with one chunk a stage.) */
static double dp_exposed(const tmodel* t, double T, double rows)
{
    double s = 0, B = 0, e = 0;
    for (int u = 0; u < t->n; u++) {
        double n = 0;
        for (int j = 0; j < t->L[u].nparams; j++) {
            double x = 1;
            for (int d = 0; d < t->L[u].params[j].ndim; d++) x *= (double)t->L[u].params[j].shape[d];
            n += x;
        }
        s += n / t->params;
        if (n > 0 && T * s - B > e) e = T * s - B;
        B += 2 * t->L[u].unit.flops * rows * 1e-9;
    }
    return e;
}

/* DP2: compute halves, the gradient all-reduce shows where the backward
   cannot cover it (dp_exposed), ZeRO shards the optimizer state. */
static void test_dp_by_hand(void)
{
    build(&tm, 4, 64, 256, 0);
    vs_constraints c;
    memset(&c, 0, sizeof c);
    c.world = 2, c.pp = 1, c.tp = 1, c.global_batch = 32, c.act_bytes_per_row = 1000;
    vs_profile pf = prof();
    vs_plan out;
    int n = 0;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    check_choice(&tm, &c, &out, n, "dp2");
    double P = tm.params, bytes = 4 * P, comp = 3 * (tm.flops_sharded + tm.flops_loss) * 16 * 1e-9;
    double ar = 2 * 0.5 * bytes / 1e9 + 1e-5, half = 0.5 * bytes / 1e9 + 1e-5;
    /* one microbatch: its backward, the longest, hides the most */
    VT_CHECK(out.dp == 2 && out.zero == VS_ZERO_0 && out.microbatches == 1, "chose dp %d zero %d M %d", out.dp,
             (int)out.zero, out.microbatches);
    double want = comp + dp_exposed(&tm, ar, 16);
    VT_CHECK(dp_exposed(&tm, ar, 16) < 0.5 * ar, "the test's model hides most of the reduction: %g of %g",
             dp_exposed(&tm, ar, 16), ar);
    VT_CHECK(near(est[0].step_s, want, 1e-12), "step %.17g, want %.17g", est[0].step_s, want);
    int seen = 0;
    for (int i = 0; i < n; i++) {
        const vs_plan_estimate* e = &est[i];
        if (e->plan.microbatches != 4) continue;
        double act = 1000.0 * 4 * tm.n; // 4 rows a microbatch
        if (e->plan.zero == VS_ZERO_2) {
            seen++;
            VT_CHECK(near(e->mem_bytes, 4 * P + 2 * P + 4 * P + act, 1e-12), "zero2 memory %.17g", e->mem_bytes);
            double zc = dp_exposed(&tm, half, 4) + half; // (the gather follows the optimizer step: whole)
            VT_CHECK(near(e->comm_s, zc, 1e-12), "zero2 comm %.17g, want %.17g", e->comm_s, zc);
        } else if (e->plan.zero == VS_ZERO_1) {
            seen++;
            VT_CHECK(near(e->mem_bytes, 4 * P + 4 * P + 4 * P + act, 1e-12), "zero1 memory %.17g", e->mem_bytes);
        }
    }
    VT_CHECK(seen == 2, "zero 1 and 2 at M=4: %d seen", seen);
}

/* A 4-unit chain, one D x D parameter and 5e5 flops a unit. */
static void build_chain(tmodel* t, int split_bw)
{
    memset(t, 0, sizeof *t);
    const int64_t D = 64;
    const char* io[4][2] = {{"tokens", "x1:f32[*,64]"}, {"x1", "x2:f32[*,64]"}, {"x2", "x3:f32[*,64]"},
                            {"x3,targets", "loss:f32[]"}};
    for (int u = 0; u < 4; u++) {
        char nm[16];
        snprintf(nm, sizeof nm, "u%d", u);
        vs_layer_decl* L = add_layer(t, nm, io[u][0], io[u][1], 5e5, split_bw); // 5e5 flops x 2 rows x 1e-9 s: 1 ms
        snprintf(nm, sizeof nm, "u%d.w", u), add_param(t, L, u, nm, VS_ROLE_COLUMN, 2, D, D);
    }
    t->D = D, t->m.layers = t->L, t->m.nlayers = t->n;
}

/* Every chunk's reductions queue on DP's stream (issue 35 §3): PP2 x DP2, ZB-V,
   2 chunks a stage, 2 microbatches, 4 equal units (one a chunk; chunks 0 and 3
   on stage 0, 1 and 2 on stage 1), split backward; each F, B and W takes
   u = 1 ms, a stage's message d = 512 B / 2e9 + 1e-5 s. Simulated (as
   vs_pipe_draw shows it; every start the later of its stage's free time and
   its input, + d across stages):
     stage 0: F0.0 0, F0.1 1, F3.0 3+2d, B3.0 4+2d, F3.1 5+2d, B3.1 6+2d, B0.0 7+4d,
              W3.0 8+4d, B0.1 9+4d, W3.1 10+4d, W0.0 11+4d, W0.1 12+4d (ends 13+4d)
     stage 1: F1.0 1+d, F2.0 2+d, F1.1 3+d, F2.1 4+d, B2.0 5+3d, B1.0 6+3d, B2.1 7+3d,
              B1.1 8+3d, W2.0 9+3d, W1.0 10+3d, W2.1 11+3d, W1.1 12+3d (ends 13+3d)
   (starts, in u; d in u too). A unit's gradients are ready at its W of
   microbatch 1: stage 0's at 11+4d (chunk 3) and 13+4d (chunk 0), stage 1's at
   12+3d and 13+3d. Each stage's all-reduce takes T (T/2 a unit), one after
   another, so stage 0's queue ends at max(11+4d + T, 13+4d + T/2) and stage 1's
   at max(12+3d + T, 13+3d + T/2). Beyond the makespan, 13+4d: stage 0 shows
   max(T - 2, T/2), stage 1 max(T - 1 - d, T/2 - d); T = 4.01 u here: 3.01 u - d.
   (The planner let only each stage's lowest chunk show before: T/2, 2.005 u.) */
static void test_dp_queue_by_hand(void)
{
    build_chain(&tm, 1);
    vs_constraints c;
    memset(&c, 0, sizeof c);
    c.world = 4, c.pp = 2, c.dp = 2, c.tp = 1, c.microbatches = 2, c.global_batch = 8, c.act_bytes_per_row = 256;
    vs_profile pf = prof();
    pf.bw_bytes_s = 8.192e6; // a stage's 2 x 64 x 64 f32 gradients: T = 32768 B / bw + 1e-5 s = 4.01 ms
    vs_plan out;
    int n = 0, seen = 0;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    const double u = 1e-3, d = 512 / 2e9 + 1e-5, T = 32768 / 8.192e6 + 1e-5;
    const double x0 = fmax(T - 2 * u, T / 2), x1 = fmax(T - u - d, T / 2 - d), want = fmax(x0, x1);
    VT_CHECK(want > T / 2 + 0.9 * u, "the case shows more than the lowest chunk's share: %g against %g", want, T / 2);
    for (int i = 0; i < n; i++) {
        const vs_plan_estimate* e = &est[i];
        if (!e->feasible || e->plan.schedule != VS_PIPE_ZBV || e->plan.zero != VS_ZERO_0) continue;
        seen++;
        VT_CHECK(near(e->comm_s, want, 1e-9), "ZB-V exposed DP %.17g, want %.17g (the old model's T/2: %.17g)", e->comm_s,
                 want, T / 2);
        VT_CHECK(near(e->step_s, 13 * u + 4 * d + want, 1e-9), "ZB-V step %.17g, want %.17g", e->step_s,
                 13 * u + 4 * d + want);
    }
    VT_CHECK(seen == 1, "%d ZB-V ZeRO-0 estimates", seen);
    /* HSDP, ZeRO-2 (DP4 as 2 replicas of shard 2, hosts of 2 ranks): each
       unit's reduce-scatter (R = 1.01 u in all, 0.505 a unit) on DP's stream,
       then its replicas' all-reduce (A = 4.01 u, 2.005 a unit) on theirs, in
       bucket order (the stage's last unit first). Stage 1: the RS end at
       12+3d + R/2 and 13+3d + R (later than the first), the all-reduces at
       12+3d + R/2 + A/2 and, after both, 12+3d + R/2 + A: 16.515+3d, 3.515 u - d
       past the makespan; stage 0 at 11+4d + R/2 + A, 2.515 u. Then ZeRO-2's
       all-gather, R, whole. (One stream for both, R + A in all: 4.02 u - d; the
       lowest chunk's share: (R + A) / 2 = 2.51 u.) */
    c.world = 8, c.dp = 4, c.global_batch = 16, c.node_ranks = 2, c.inter_bw_bytes_s = 4.096e6;
    pf.bw_bytes_s = 16.384e6; // reduce-scatter 16384 B / bw + 1e-5; all-reduce of 16384 B: 16384 / inter_bw + 1e-5
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    const double R = 16384 / 16.384e6 + 1e-5, A = 16384 / 4.096e6 + 1e-5;
    const double a1 = 12 * u + 3 * d + R / 2, b1 = a1 + A / 2, a2 = fmax(a1, 13 * u + 3 * d) + R / 2;
    const double s1 = fmax(b1, a2) + A / 2 - (13 * u + 4 * d), s0 = 11 * u + 4 * d + R / 2 + A - (13 * u + 4 * d);
    const double want2 = fmax(s0, s1) + R;
    seen = 0;
    for (int i = 0; i < n; i++) {
        const vs_plan_estimate* e = &est[i];
        if (!e->feasible || e->plan.schedule != VS_PIPE_ZBV || e->plan.zero != VS_ZERO_2 || e->plan.dp_shard != 2) continue;
        seen++;
        VT_CHECK(near(e->comm_s, want2, 1e-9), "ZB-V HSDP ZeRO-2 exposed DP %.17g, want %.17g (one stream: %.17g)",
                 e->comm_s, want2, 12 * u + 3 * d + R + A - (13 * u + 4 * d) + R);
    }
    VT_CHECK(seen == 1, "%d ZB-V HSDP ZeRO-2 estimates", seen);
    /* Interleaved, units without split backward (BW: 2 u; chunks 0 and 2 on
       stage 0, 1 and 3 on stage 1), DP2, ZeRO-0:
         stage 0: F0.0 0, F0.1 1, F2.0 2+2d, F2.1 3+2d, BW2.0 6+4d, BW2.1 9+4d, BW0.0 11+4d,
                  BW0.1 13+6d (ends 15+6d, the makespan)
         stage 1: F1.0 1+d, F1.1 2+d, F3.0 3+3d, BW3.0 4+3d, F3.1 6+3d, BW3.1 7+3d, BW1.0 9+3d,
                  BW1.1 11+5d (ends 13+5d)
       Ready: stage 0's at 11+4d (unit 2) and 15+6d (unit 0), stage 1's at 9+3d
       and 13+5d. T = 10.01 u: stage 0 shows max(T - 4 - 2d, T/2) = 6.01 u - 2d,
       stage 1 max(T - 6 - 3d, T/2 - 2 - d), less. (Before: T/2, 5.005 u.) */
    build_chain(&tm, 0);
    c.world = 4, c.dp = 2, c.global_batch = 8, c.node_ranks = 0, c.inter_bw_bytes_s = 0;
    pf.bw_bytes_s = 3.2768e6; // T = 32768 B / bw + 1e-5 s = 10.01 ms
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    const double T3 = 32768 / 3.2768e6 + 1e-5;
    const double want3 = fmax(fmax(T3 - 4 * u - 2 * d, T3 / 2), fmax(T3 - 6 * u - 3 * d, T3 / 2 - 2 * u - d));
    seen = 0;
    for (int i = 0; i < n; i++) {
        const vs_plan_estimate* e = &est[i];
        if (!e->feasible || e->plan.schedule != VS_PIPE_INTERLEAVED || e->plan.zero != VS_ZERO_0) continue;
        seen++;
        VT_CHECK(near(e->comm_s, want3, 1e-9), "interleaved exposed DP %.17g, want %.17g (the old model's T/2: %.17g)",
                 e->comm_s, want3, T3 / 2);
        VT_CHECK(near(e->step_s, 15 * u + 6 * d + want3, 1e-9), "interleaved step %.17g, want %.17g", e->step_s,
                 15 * u + 6 * d + want3);
    }
    VT_CHECK(seen == 1, "%d interleaved ZeRO-0 estimates", seen);
}

/* The profile's w_share splits a split unit's backward (2 u) into B 2 (1 - w) u
   and W 2 w u. The chain above on PP2 x DP1, ZB-V, M 2, w = 1/4 (B 1.5 u, W
   0.5 u), in the same instruction order (starts in u):
     stage 0: F0.0 0, F0.1 1, F3.0 3+2d, B3.0 4+2d, F3.1 5.5+2d, B3.1 6.5+2d,
              B0.0 8.5+4d, W3.0 10+4d, B0.1 11.5+4d, W3.1 13+4d, W0.0 13.5+4d,
              W0.1 14+4d (ends 14.5+4d)
     stage 1: F1.0 1+d, F2.0 2+d, F1.1 3+d, F2.1 4+d, B2.0 5.5+3d, B1.0 7+3d,
              B2.1 8.5+3d, B1.1 10+3d, W2.0 11.5+3d, ... (ends 13.5+3d)
   Stage 0 waits for stage 1's longer Bs, and its Ws are too short to fill the
   wait: 14.5 u + 4d, where w = 1/2 (or 0, not measured) gives 13 u + 4d. */
static void test_w_share_by_hand(void)
{
    build_chain(&tm, 1);
    vs_constraints c;
    memset(&c, 0, sizeof c);
    c.world = 2, c.pp = 2, c.dp = 1, c.tp = 1, c.microbatches = 2, c.global_batch = 4, c.act_bytes_per_row = 256;
    const double u = 1e-3, d = 512 / 2e9 + 1e-5;
    const double ws[3] = {0, 0.5, 0.25}, want[3] = {13 * u + 4 * d, 13 * u + 4 * d, 14.5 * u + 4 * d};
    double step[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++) {
        vs_profile pf = prof();
        pf.w_share = ws[k];
        vs_plan out;
        int n = 0, seen = 0;
        VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
        for (int i = 0; i < n; i++) {
            const vs_plan_estimate* e = &est[i];
            if (!e->feasible || e->plan.schedule != VS_PIPE_ZBV || e->plan.zero != VS_ZERO_0) continue;
            seen++;
            step[k] = e->step_s;
            VT_CHECK(near(e->step_s, want[k], 1e-9) && e->comm_s == 0, "w_share %g: ZB-V step %.17g (comm %g), want %.17g",
                     ws[k], e->step_s, e->comm_s, want[k]);
        }
        VT_CHECK(seen == 1, "w_share %g: %d ZB-V ZeRO-0 estimates", ws[k], seen);
    }
    VT_CHECK(step[0] == step[1], "w_share 0 (not measured) is 1/2: %.17g against %.17g", step[0], step[1]);
}

/* bf16 parameters with f32 gradients (vs_train_desc.grad_fp32): DP2's
   all-reduce and the gradients' memory at 4 bytes an element, not 2 (the
   strict stand-in's clock measured vs_parallelize's all-reduce of f32
   gradients at twice what the planner said: bench/gpu_model.c --published) */
static void test_grad_fp32(void)
{
    build(&tm, 4, 64, 256, 0);
    for (int u = 0; u < tm.n; u++)
        for (int j = 0; j < tm.L[u].nparams; j++) tm.L[u].params[j].dtype = VS_BF16;
    vs_constraints c;
    memset(&c, 0, sizeof c);
    c.world = 2, c.pp = 1, c.dp = 2, c.tp = 1, c.global_batch = 32, c.microbatches = 4, c.act_bytes_per_row = 1000;
    vs_profile pf = prof();
    vs_plan out;
    double comm[2], mem[2];
    for (int f = 0; f < 2; f++) {
        int n = 0;
        c.grad_fp32 = f;
        VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
        comm[f] = mem[f] = -1;
        for (int i = 0; i < n; i++)
            if (est[i].feasible && est[i].plan.zero == VS_ZERO_0) comm[f] = est[i].comm_s, mem[f] = est[i].mem_grads;
    }
    double P = tm.params, w0 = dp_exposed(&tm, 2 * 0.5 * 2 * P / 1e9 + 1e-5, 4),
           w1 = dp_exposed(&tm, 2 * 0.5 * 4 * P / 1e9 + 1e-5, 4);
    VT_CHECK(near(comm[0], w0, 1e-12), "bf16 gradients: comm %.17g, want %.17g", comm[0], w0);
    VT_CHECK(near(comm[1], w1, 1e-12) && w1 > w0, "f32 gradients: comm %.17g, want %.17g", comm[1], w1);
    VT_CHECK(near(mem[0], 2 * P, 1e-12) && near(mem[1], 4 * P, 1e-12), "gradient memory %.17g, %.17g", mem[0], mem[1]);
    c.grad_fp32 = 2;
    int n = 0;
    VT_ERR(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n), VS_ERR_INVALID, "grad_fp32 2");
}

/* A unit whose output spec leaves a dim after the first free ("x:f32[*,*]"):
   its TP all-reduces move msg_bytes_per_row a row (0: act_bytes_per_row, as
   before), here 4 D as the fixed spec of test_tp_by_hand; a stage's message the
   same (PP2 on the fixed spec and the free one with it give equal steps). Before
   msg_bytes_per_row, the planner took act_bytes_per_row, a layer's whole
   activations (a GPT's attention probabilities: 16x its T x D output at 13B's
   shapes), as the message. */
static void test_msg_bytes(void)
{
    build(&tm, 4, 64, 256, 0);
    for (int u = 0; u < tm.n; u++) /* the same units, the row's dims free */
        if (strchr(tm.out[u], '[') && strstr(tm.out[u], "[*,")) snprintf(strstr(tm.out[u], "[*,") + 3, 8, "*]");
    vs_constraints c;
    memset(&c, 0, sizeof c);
    c.world = 2, c.tp = 2, c.global_batch = 32, c.act_bytes_per_row = 1000;
    vs_profile pf = prof();
    vs_plan out;
    for (int k = 0; k < 2; k++) {
        int n = 0, bad = 0;
        c.msg_bytes_per_row = k ? 4 * tm.D : 0;
        VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
        for (int i = 0; i < n; i++) {
            const vs_plan_estimate* e = &est[i];
            int M = e->plan.microbatches;
            double rows = 32.0 / M, hid = (k ? 4.0 * (double)tm.D : 1000.0) * rows, arh = 2 * 0.5 * hid / 1e9 + 1e-5;
            bad += !near(e->comm_s, M * (arh + 4 * 4 * arh + arh), 1e-12);
        }
        VT_CHECK(!bad, "msg_bytes_per_row %lld: %d of %d estimates' TP communication is not the formula's (the first: "
                 "%.17g)", (long long)c.msg_bytes_per_row, bad, n, est[0].comm_s);
    }
    /* PP2: the free spec with msg_bytes_per_row plans as the fixed spec */
    double step[2];
    for (int f = 0; f < 2; f++) {
        build(&tm, 4, 64, 256, 0);
        for (int u = 0; f && u < tm.n; u++)
            if (strstr(tm.out[u], "[*,")) snprintf(strstr(tm.out[u], "[*,") + 3, 8, "*]");
        memset(&c, 0, sizeof c);
        c.world = 2, c.pp = 2, c.global_batch = 32, c.microbatches = 4, c.act_bytes_per_row = 100000;
        c.msg_bytes_per_row = f ? 4 * tm.D : 0;
        int n = 0;
        VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
        step[f] = est[0].step_s;
    }
    VT_CHECK(near(step[0], step[1], 1e-12), "PP2: the fixed spec's step %.17g, the free spec's with msg_bytes_per_row "
             "%.17g", step[0], step[1]);
    c.msg_bytes_per_row = -1;
    int n = 0;
    VT_ERR(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n), VS_ERR_INVALID, "msg_bytes_per_row = -1");
}

/* TP2: sharded layers halve, the loss does not; forward: 1 all-reduce in the
   embedding, 2 per block (their outputs); backward: 2 per block and 1 in the
   head (their inputs' gradients): all [rows, D] here, fully exposed. */
static void test_tp_by_hand(void)
{
    build(&tm, 4, 64, 256, 0);
    vs_constraints c;
    memset(&c, 0, sizeof c);
    c.world = 2, c.tp = 2, c.global_batch = 32, c.act_bytes_per_row = 1000;
    vs_profile pf = prof();
    vs_plan out;
    int n = 0;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    check_choice(&tm, &c, &out, n, "tp2");
    for (int i = 0; i < n; i++) {
        const vs_plan_estimate* e = &est[i];
        int M = e->plan.microbatches;
        double rows = 32.0 / M;
        double comp = 3 * (tm.flops_sharded / 2 + tm.flops_loss) * 32 * 1e-9;
        double hid = 4.0 * (double)tm.D * rows, arh = 2 * 0.5 * hid / 1e9 + 1e-5;
        double comm = M * (arh /* embed */ + 4 * 4 * arh /* blocks */ + arh /* head: its input's gradient */);
        VT_CHECK(near(e->compute_s, comp, 1e-12), "M=%d compute %.17g, want %.17g", M, e->compute_s, comp);
        VT_CHECK(near(e->comm_s, comm, 1e-12), "M=%d comm %.17g, want %.17g", M, e->comm_s, comm);
    }
    VT_CHECK(out.microbatches == 1, "fewest all-reduces: M=1, chose %d", out.microbatches);
    // sharded memory: every parameter but the norms halves
    double norms = 4.0 * (double)tm.D, sharded = tm.params - norms, P = sharded / 2 + norms;
    VT_CHECK(near(est[0].mem_bytes, 16 * P + 1000.0 * 32 * tm.n, 1e-12), "tp2 memory %.17g", est[0].mem_bytes);
}

/* The pipeline on 2 stages by hand: M microbatches of 1f1b/gpipe with even
   stages take (M + 1) x (f + b) per stage pair; the bubble is one microbatch's. */
static void test_pp_choice(void)
{
    build(&tm, 6, 64, 256, 1);
    vs_constraints c;
    memset(&c, 0, sizeof c);
    c.world = 2, c.pp = 2, c.global_batch = 64, c.act_bytes_per_row = 1000;
    vs_profile pf = prof();
    vs_plan out;
    int n = 0;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    check_choice(&tm, &c, &out, n, "pp2");
    // more microbatches, less bubble: the best has 8 (4 pp) and every runner-up
    // with fewer microbatches and the same schedule is slower
    VT_CHECK(out.microbatches == 8, "pp2 chose M=%d", out.microbatches);
    for (int i = 1; i < n; i++)
        if (est[i].feasible && est[i].plan.schedule == VS_PIPE_1F1B && est[i].plan.microbatches == 2)
            VT_CHECK(strstr(est[i].why, "bubble"), "M=2 lost on '%s', not the bubble", est[i].why);
}

/* World 8: the chosen plan is the fastest of all enumerated; with a memory
   limit, the fastest of those within it (the same set, filtered here). */
static void test_world8_and_memory(void)
{
    build(&tm, 8, 128, 512, 1);
    vs_constraints c;
    memset(&c, 0, sizeof c);
    c.world = 8, c.global_batch = 64, c.act_bytes_per_row = 64 * 1024;
    vs_profile pf = prof();
    vs_plan out;
    int n = 0;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    check_choice(&tm, &c, &out, n, "world 8");
    int nall = n;
    static vs_plan_estimate all[CAP];
    memcpy(all, est, sizeof(vs_plan_estimate) * (size_t)n);
    double lo = HUGE_VAL;
    for (int i = 0; i < n; i++)
        if (all[i].feasible && all[i].mem_bytes < lo) lo = all[i].mem_bytes;
    VT_CHECK(lo < all[0].mem_bytes, "the fastest is not the smallest (%g, %g): no test of the limit", lo, all[0].mem_bytes);
    c.mem_limit_bytes = (lo + all[0].mem_bytes) / 2;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    check_choice(&tm, &c, &out, n, "world 8, memory limit");
    /* the limit adds the recompute variants (vs_constraints.recompute 0) and
       ZeRO-3's (vs_constraints.zero3 0), no other */
    int nplain = 0;
    for (int i = 0; i < n; i++) nplain += !est[i].plan.recompute[0] && est[i].plan.zero != 3;
    VT_CHECK(nplain == nall, "%d estimates without recompute or ZeRO-3 with the limit, %d without a limit", nplain, nall);
    double want = HUGE_VAL; // the fastest within the limit: of the set without a limit, or a variant the limit adds
    for (int i = 0; i < nall; i++)
        if (all[i].feasible && all[i].mem_bytes <= c.mem_limit_bytes && all[i].step_s < want) want = all[i].step_s;
    for (int i = 0; i < n; i++)
        if ((est[i].plan.recompute[0] || est[i].plan.zero == 3) && est[i].feasible && est[i].step_s < want)
            want = est[i].step_s;
    VT_CHECK(est[0].step_s == want && est[0].mem_bytes <= c.mem_limit_bytes, "chose %g s, %g B; want %g s within %g B",
             est[0].step_s, est[0].mem_bytes, want, c.mem_limit_bytes);
    int over = 0;
    for (int i = 0; i < n; i++)
        if (!est[i].feasible && strstr(est[i].why, "exceeds memory by")) over++;
    VT_CHECK(over > 0, "no configuration over the limit");

    int len = vs_plan_explain(est, n, text, sizeof text);
    VT_CHECK(len > 0 && len < (int)sizeof text, "explain length %d", len);
    char mesh[64];
    snprintf(mesh, sizeof mesh, "chosen: PP%d x DP%d x TP%d", out.pp, out.dp, out.tp);
    VT_CHECK(strstr(text, mesh), "explanation lacks '%s':\n%s", mesh, text);
    VT_CHECK(strstr(text, "runner-up 1: PP") && strstr(text, "runner-up 2: PP"), "no two runners-up:\n%s", text);
    VT_CHECK(strstr(text, "compute") && strstr(text, "exposed communication") && strstr(text, "bubble") &&
                 strstr(text, "per rank"), "no breakdown:\n%s", text);
    VT_CHECK(strstr(text, "over the memory limit (") && strstr(text, "exceeds memory by"), "no memory group:\n%s", text);
    VT_CHECK(strstr(text, "why it lost: "), "runners-up without a reason:\n%s", text);
    // every rejected entry falls in a group that the text names with an example
    int nrej = 0;
    for (int i = 3; i < n; i++) nrej++;
    char hdr[64];
    snprintf(hdr, sizeof hdr, "rejected: %d configurations", nrej);
    VT_CHECK(strstr(text, hdr), "'%s' missing:\n%s", hdr, text);
    VT_CHECK(!strstr(text, "  other ("), "a reason outside every group:\n%s", text);
    if (getenv("VT_VERBOSE")) printf("%s", text);
    // snprintf-like: a short buffer gets the same length back
    char small[16];
    VT_CHECK(vs_plan_explain(est, n, small, sizeof small) == len && strlen(small) == 15, "short buffer");
    // a short cap keeps a quarter for the rejected
    int n2 = 0;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, 8, &n2));
    VT_CHECK(n2 == 8 && est[0].feasible && !est[7].feasible && est[5].feasible && !est[6].feasible, "cap 8: n=%d", n2);
}

/* Fixed sizes are honoured; a TP size that does not divide is a reason. */
static void test_fixed_and_divide(void)
{
    build(&tm, 4, 64, 256, 1);
    vs_constraints c;
    memset(&c, 0, sizeof c);
    c.world = 8, c.pp = 2, c.global_batch = 64;
    vs_profile pf = prof();
    vs_plan out;
    int n = 0;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    check_choice(&tm, &c, &out, n, "pp=2 fixed");
    memset(&c, 0, sizeof c);
    c.world = 8, c.tp = 2, c.microbatches = 4, c.global_batch = 64;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    check_choice(&tm, &c, &out, n, "tp=2, M=4 fixed");
    memset(&c, 0, sizeof c);
    c.world = 4, c.dp = 4, c.global_batch = 64, c.microbatches = 3;
    VT_ERR(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n), VS_ERR_INVALID, "3 microbatches do not divide the 16 rows");
    VT_CHECK(n == 1 && !est[0].feasible, "the one rejected entry is reported (n=%d)", n);

    memset(&c, 0, sizeof c);
    c.world = 6, c.global_batch = 60;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    check_choice(&tm, &c, &out, n, "world 6");
    int div = 0;
    for (int i = 0; i < n; i++)
        if (strstr(est[i].why, "tp=3 does not divide wte's 256 rows") ||
            strstr(est[i].why, "tp=6 does not divide wte's 256 rows"))
            div++;
    VT_CHECK(div == 3, "tp=3 (pp 1, 2) and tp=6 (pp 1): %d divide reasons", div);
    VT_CHECK(out.tp == 1 || out.tp == 2, "chose tp %d", out.tp);
    vs_plan_explain(est, n, text, sizeof text);
    VT_CHECK(strstr(text, "does not divide the model or batch (") && strstr(text, "wte's 256 rows"), "no divide group:\n%s", text);
}

static void test_errors(void)
{
    build(&tm, 4, 64, 256, 1);
    vs_constraints c;
    vs_profile pf = prof();
    vs_plan out;
    int n = 0;
    memset(&c, 0, sizeof c);
    c.world = 8, c.global_batch = 64, c.mem_limit_bytes = 1000;
    VT_EXPECT_ERR(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n), VS_ERR_INVALID, "memory: the smallest configuration",
                  "the limit is 1 KB");
    // the shortfall it names is the smallest estimate's, against the limit
    double lo = HUGE_VAL;
    for (int i = 0; i < n; i++)
        if (strstr(est[i].why, "exceeds memory") && est[i].mem_bytes < lo) lo = est[i].mem_bytes;
    char need[64];
    snprintf(need, sizeof need, "needs %.4g KB per rank", lo / 1e3);
    if (lo >= 1e6) snprintf(need, sizeof need, "needs %.4g MB per rank", lo / 1e6);
    VT_CHECK(strstr(vs_last_error(), need), "'%s' not in '%s'", need, vs_last_error());
    VT_CHECK(strstr(vs_last_error(), "short"), "no shortfall in '%s'", vs_last_error());

    memset(&c, 0, sizeof c);
    c.world = 8, c.pp = 3, c.global_batch = 64;
    VT_EXPECT_ERR(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n), VS_ERR_INVALID, "world: 8 ranks", "multiple of 3");
    c.pp = 2, c.dp = 2, c.tp = 1;
    VT_EXPECT_ERR(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n), VS_ERR_INVALID, "make 4 ranks", "world has 8");
    memset(&c, 0, sizeof c);
    c.world = 8, c.dp = 8, c.global_batch = 4;
    VT_EXPECT_ERR(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n), VS_ERR_INVALID, "dp=8 does not divide",
                  "global batch of 4 rows");
    memset(&c, 0, sizeof c);
    c.world = 16, c.pp = 16, c.global_batch = 64;
    VT_EXPECT_ERR(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n), VS_ERR_INVALID, "pp=16",
                  "more stages than the model's 7 layers");
    memset(&c, 0, sizeof c);
    c.world = 2, c.tp = 2, c.policy = VS_TP_NONE, c.global_batch = 64;
    VT_ERR(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n), VS_ERR_INVALID, "policy is none");
    memset(&c, 0, sizeof c);
    c.global_batch = 64;
    VT_ERR(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n), VS_ERR_INVALID, "world = 0");
    c.world = 2, c.global_batch = 0;
    VT_ERR(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n), VS_ERR_INVALID, "global_batch = 0");
    c.global_batch = 64, c.split = VS_PIPE_SPLIT_MANUAL;
    VT_ERR(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n), VS_ERR_INVALID, "manual");
    c.split = VS_PIPE_SPLIT_DEFAULT;
    VT_ERR(vs_generate_plan(NULL, &c, &pf, &out, est, CAP, &n), VS_ERR_NULL, "model");
    pf.bw_bytes_s = -1;
    VT_ERR(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n), VS_ERR_INVALID, "bw = -1");
    pf = prof();
    for (int u = 0; u < tm.n; u++) tm.L[u].unit.flops = 0;
    VT_ERR(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n), VS_ERR_INVALID, "flops");
    // no est wanted: the plan alone
    build(&tm, 4, 64, 256, 1);
    VT_OK(vs_generate_plan(&tm.m, &c, NULL, &out, NULL, 0, NULL));
    VT_CHECK(out.pp * out.dp * out.tp == 2, "plan without est");
}

/* A large model on 64 ranks stays quick. */
static void test_large(void)
{
    build(&tm, 24, 2048, 50304 - 50304 % 64, 1);
    vs_constraints c;
    memset(&c, 0, sizeof c);
    c.world = 64, c.global_batch = 512, c.mem_limit_bytes = 16e9, c.act_bytes_per_row = (int64_t)34 * 1024 * 2048;
    vs_profile pf = prof();
    pf.flop_s = 1e-14, pf.bw_bytes_s = 50e9, pf.p2p_bw_bytes_s = 25e9;
    vs_plan out;
    int n = 0;
    clock_t t0 = clock(); // (CPU time: the planner is one thread, and a loaded machine's wall time is not its own)
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    double t = (double)(clock() - t0) / CLOCKS_PER_SEC;
    check_choice(&tm, &c, &out, n, "64 ranks");
    VT_CHECK(t < 3, "planning took %.2f s of CPU", t);
    vs_plan_explain(est, n, text, sizeof text);
    /* each group holds its own reason (a recomputing plan over the limit was
       grouped as "more compute": its name's ", recompute" matched) */
    for (const char* l = text; (l = strstr(l, "\n  slower: ")) != NULL; l++) {
        int k = (int)strcspn(l + 1, "\n");
        char line[512];
        snprintf(line, sizeof line, "%.*s", k, l + 1);
        VT_CHECK(!strstr(line, "exceeds memory"), "a group's example is another reason: %s", line);
    }
    if (getenv("VT_VERBOSE")) printf("%d configurations in %.3f s\n%s", n, t, text);
}

static void test_profile_text(void)
{
    vs_profile p, q;
    memset(&p, 0, sizeof p);
    p.flop_s = 1.2345678901234567e-11, p.bw_bytes_s = 3.3e9, p.latency_s = 1.7e-5, p.p2p_bw_bytes_s = 2.25e10;
    p.call_s = 6.1e-5, p.instr_s = 1.0000000000000002e-4, p.opt_s = 3.0000000000000001e-9;
    p.w_share = 0.34300000000000003;
    for (int g = 0; g < VS_PROFILE_AR_GROUPS; g++) {
        p.ar_n[g] = 2 << g;
        for (int k = 0; k < VS_PROFILE_AR_SIZES; k++) p.ar_s[g][k] = 1e-5 * (g + 1) * (k + 1) + 1e-17 * k;
        p.tp_s[g] = g == 2 ? 0 : (g & 1 ? -1 : 1) * 3.0000000000000004e-10 * (g + 1); // 0: not printed
    }
    char buf[2048];
    int len = vs_profile_print(&p, buf, sizeof buf);
    VT_CHECK(len > 0 && len == (int)strlen(buf) && len < 1300 && !strchr(buf, '\n'), "one line of about 1.2 KB: '%s'", buf);
    VT_CHECK(strstr(buf, " tp2=3.00000000000000") && strstr(buf, " tp4=-6.0000") && !strstr(buf, " tp8="),
             "tpN: %s", buf);
    VT_CHECK(strstr(buf, "flop_s=") && strstr(buf, " bw=") && strstr(buf, " latency=") && strstr(buf, " p2p_bw=") &&
                 strstr(buf, " call=") && strstr(buf, " instr=") && strstr(buf, " opt=") && strstr(buf, " ar2=") &&
                 strstr(buf, " ar64=") && strstr(buf, " w_share=0.343"),
             "%s", buf);
    VT_OK(vs_profile_parse(buf, &q));
    VT_CHECK(!memcmp(&p, &q, sizeof p), "round trip: '%s'", buf);
    char small[8];
    VT_CHECK(vs_profile_print(&p, small, sizeof small) == len && !strncmp(small, buf, 7) && !small[7], "snprintf-like");
    VT_CHECK(vs_profile_print(&p, NULL, 0) == len, "length only");
    VT_OK(vs_profile_parse("  latency=1e-6\n", &q));
    VT_CHECK(q.latency_s == 1e-6 && q.flop_s == 0 && q.bw_bytes_s == 0 && q.call_s == 0 && q.instr_s == 0 &&
                 q.opt_s == 0 && q.ar_n[0] == 0,
             "missing keys are 0 (defaults)");
    VT_OK(vs_profile_parse("instr=2.5e-5 call=1e-6", &q));
    VT_CHECK(q.instr_s == 2.5e-5 && q.call_s == 1e-6, "instr %g call %g", q.instr_s, q.call_s);
    // each key once (issue 19.5: a repeated key was silently the last one)
    VT_ERR(vs_profile_parse("ar4=1,2,3,4 opt=5e-9 ar4=5,6,7,8", &q), VS_ERR_INVALID, "'ar4' twice");
    VT_ERR(vs_profile_parse("opt=5e-9 tp4=1 opt=6e-9", &q), VS_ERR_INVALID, "'opt' twice");
    VT_OK(vs_profile_parse("ar4=1,2,3,4 tp4=0.5", &q)); // (ar4 and tp4: one group size, two keys)
    { // -0 is 0 ("not measured"): print leaves it out, so parse must not keep the sign (found by fuzz_profile)
        vs_profile z, z2;
        char zt[2048];
        VT_OK(vs_profile_parse("flop_s=3.2e-05 tp43=-.0000 opt=-0", &z));
        VT_CHECK(vs_profile_print(&z, zt, sizeof zt) > 0 && vs_profile_parse(zt, &z2) == VS_OK &&
                     !memcmp(&z, &z2, sizeof z) && !signbit(z.opt_s),
                 "a -0 did not round-trip: %s", zt);
    }
    VT_ERR(vs_profile_parse("instr=-1", &q), VS_ERR_INVALID, "instr = '-1'");
    VT_ERR(vs_profile_parse("flop_s=1 speed=3", &q), VS_ERR_INVALID, "unknown key 'speed'");
    VT_ERR(vs_profile_parse("bw=fast", &q), VS_ERR_INVALID, "bw = 'fast'");
    VT_ERR(vs_profile_parse("bw=-2", &q), VS_ERR_INVALID, "bw = '-2'");
    VT_ERR(vs_profile_parse("bw", &q), VS_ERR_INVALID, "not key=value");
    VT_ERR(vs_profile_parse("ar8=1,2,3", &q), VS_ERR_INVALID, "ar8 = '1,2,3'");
    VT_ERR(vs_profile_parse("ar8=1,2,3,4,5", &q), VS_ERR_INVALID, "ar8 = '1,2,3,4,5'");
    VT_ERR(vs_profile_parse("ar8=1,-2,3,4", &q), VS_ERR_INVALID, "ar8 = '1,-2,3,4'");
    VT_ERR(vs_profile_parse("ar1=1,2,3,4", &q), VS_ERR_INVALID, "'ar1': the group size after 'ar' must be an integer >= 2");
    VT_ERR(vs_profile_parse("arx=1,2,3,4", &q), VS_ERR_INVALID, "unknown key 'arx'");
    VT_OK(vs_profile_parse("tp4=-2.5e-4 ar4=1,2,3,4 tp8=1e-3", &q));
    VT_CHECK(q.ar_n[0] == 4 && q.tp_s[0] == -2.5e-4 && q.ar_s[0][3] == 4 && q.ar_n[1] == 8 && q.tp_s[1] == 1e-3 &&
                 q.ar_s[1][0] == 0,
             "tpN: n %d %g, n %d %g", q.ar_n[0], q.tp_s[0], q.ar_n[1], q.tp_s[1]);
    VT_ERR(vs_profile_parse("tp4=fast", &q), VS_ERR_INVALID, "tp4 = 'fast' (a finite number)");
    VT_ERR(vs_profile_parse("tp4=inf", &q), VS_ERR_INVALID, "tp4 = 'inf'");
    VT_ERR(vs_profile_parse("tp1=0.1", &q), VS_ERR_INVALID, "the group size after 'tp' must be an integer >= 2");
    VT_ERR(vs_profile_parse("ar2=1,1,1,1 ar3=1,1,1,1 ar4=1,1,1,1 ar5=1,1,1,1 ar6=1,1,1,1 ar7=1,1,1,1 ar8=1,1,1,1", &q),
           VS_ERR_INVALID, "more than 6 group sizes");
    VT_ERR(vs_profile_parse(NULL, &q), VS_ERR_NULL, "text");
    // w_share: a share of the backward, [0, 1)
    VT_OK(vs_profile_parse("w_share=0.25", &q));
    VT_CHECK(q.w_share == 0.25, "w_share %g", q.w_share);
    VT_ERR(vs_profile_parse("w_share=1", &q), VS_ERR_INVALID, "w_share = '1' (a share of the backward, in [0, 1))");
    VT_ERR(vs_profile_parse("w_share=-0.5", &q), VS_ERR_INVALID, "w_share = '-0.5'");
    VT_ERR(vs_profile_parse("w_share=0.1 w_share=0.2", &q), VS_ERR_INVALID, "'w_share' twice");
    memset(&q, 0, sizeof q);
    q.w_share = 1.5;
    VT_CHECK(vs_profile_print(&q, buf, sizeof buf) == -1 && strstr(vs_last_error(), "w_share = 1.5 (in [0, 1)"),
             "print of w_share 1.5: %s", vs_last_error());
}

/* A measured all-reduce table and optimizer time, by hand: TP2's all-reduces of
   [rows, D] f32 interpolate the table's n = 2 row between 4 B and 64 KiB; DP2's
   gradient all-reduce (ZeRO-0) and reduce-scatter + all-gather (ZeRO-1/2)
   interpolate its 512 KiB - 4 MiB span or extend it; the optimizer adds opt_s
   per element a rank steps. A group size the table lacks keeps the formula. */
static void test_measured_tables(void)
{
    build(&tm, 4, 64, 256, 0);
    vs_profile pf = prof();
    const double t[4] = {3e-5, 1e-4, 4e-4, 2e-3}, X[4] = {4, 65536, 524288, 4194304};
    pf.ar_n[0] = 4, pf.ar_n[1] = 2; // n = 4: never used here
    for (int k = 0; k < 4; k++) pf.ar_s[0][k] = 1, pf.ar_s[1][k] = t[k];
    pf.opt_s = 2e-9;
    pf.tp_s[0] = 1, pf.tp_s[1] = 2e-10; // each TP2 all-reduce inside a layer: 0.2 ns a byte more
    vs_constraints c;
    memset(&c, 0, sizeof c);
    c.world = 2, c.tp = 2, c.global_batch = 32, c.act_bytes_per_row = 1000;
    vs_plan out;
    int n = 0;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    double norms = 4.0 * (double)tm.D, sharded = tm.params - norms, P = sharded / 2 + norms;
    for (int i = 0; i < n; i++) {
        const vs_plan_estimate* e = &est[i];
        int M = e->plan.microbatches;
        double rows = 32.0 / M, hid = 4.0 * (double)tm.D * rows;
        VT_CHECK(hid > X[0] && hid <= X[1], "hid %g bytes lies in the first span", hid);
        double arh = t[0] + (t[1] - t[0]) * (hid - X[0]) / (X[1] - X[0]) + 2e-10 * hid;
        double comm = M * (arh + 4 * 4 * arh + arh);
        double comp = 3 * (tm.flops_sharded / 2 + tm.flops_loss) * 32 * 1e-9 + 2e-9 * P;
        VT_CHECK(near(e->comm_s, comm, 1e-12), "tp2 M=%d comm %.17g, want %.17g", M, e->comm_s, comm);
        VT_CHECK(near(e->compute_s, comp, 1e-12), "tp2 M=%d compute %.17g, want %.17g (optimizer included)", M,
                 e->compute_s, comp);
    }
    // an in-place extra below minus the table's time: the calls cost nothing, never less
    vs_profile fast = pf;
    fast.tp_s[1] = -1;
    VT_OK(vs_generate_plan(&tm.m, &c, &fast, &out, est, CAP, &n));
    for (int i = 0; i < n; i++) VT_CHECK(est[i].comm_s == 0, "tp_s -1: comm %g", est[i].comm_s);
    // DP2: the whole model's gradients, 4 P bytes (tp_s plays no part)
    memset(&c, 0, sizeof c);
    c.world = 2, c.pp = 1, c.tp = 1, c.global_batch = 32, c.act_bytes_per_row = 1000;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    double B = 4 * tm.params, ar;
    if (B <= X[2]) ar = t[1] + (t[2] - t[1]) * (B - X[1]) / (X[2] - X[1]);
    else ar = t[2] + (t[3] - t[2]) * (B - X[2]) / (X[3] - X[2]); // (past 4 MiB: the same line)
    double half = t[0] + (ar - t[0]) / 2;
    int seen = 0;
    for (int i = 0; i < n; i++) {
        const vs_plan_estimate* e = &est[i];
        double rows = 16.0 / e->plan.microbatches;
        double want = e->plan.zero == VS_ZERO_0 ? dp_exposed(&tm, ar, rows) : dp_exposed(&tm, half, rows) + half;
        double opt = 2e-9 * tm.params / (e->plan.zero == VS_ZERO_0 ? 1 : 2);
        double comp = 3 * (tm.flops_sharded + tm.flops_loss) * 32 * 1e-9 / 2;
        seen++;
        VT_CHECK(near(e->comm_s, want, 1e-12), "dp2 zero %d M=%d comm %.17g, want %.17g", (int)e->plan.zero,
                 e->plan.microbatches, e->comm_s, want);
        VT_CHECK(near(e->compute_s, comp + opt, 1e-12), "dp2 zero %d compute %.17g, want %.17g", (int)e->plan.zero,
                 e->compute_s, comp + opt);
    }
    VT_CHECK(seen > 3, "%d estimates", seen);
    // bad tables
    vs_profile bad = pf;
    bad.ar_s[1][2] = NAN;
    VT_ERR(vs_generate_plan(&tm.m, &c, &bad, &out, est, CAP, &n), VS_ERR_INVALID, "ar_s[1][2] = nan");
    bad = pf;
    bad.ar_n[3] = -2;
    VT_ERR(vs_generate_plan(&tm.m, &c, &bad, &out, est, CAP, &n), VS_ERR_INVALID, "ar_n[3] = -2");
    bad = pf;
    bad.opt_s = -1;
    VT_ERR(vs_generate_plan(&tm.m, &c, &bad, &out, est, CAP, &n), VS_ERR_INVALID, "profile opt = -1");
    bad = pf;
    bad.tp_s[2] = INFINITY;
    VT_ERR(vs_generate_plan(&tm.m, &c, &bad, &out, est, CAP, &n), VS_ERR_INVALID, "tp_s[2] = inf");
}

/* Sequence parallelism: the same configurations, each plan marked, each one's
   activations (act_bytes_per_row x rows x 7 layers, one microbatch live on a
   single stage) counted 1/tp; a memory limit between the two fits only with it. */
static void test_sequence_parallel(void)
{
    build(&tm, 4, 64, 256, 0);
    vs_profile pf = prof();
    vs_constraints c;
    memset(&c, 0, sizeof c);
    c.world = 2, c.pp = 1, c.tp = 2, c.global_batch = 32, c.act_bytes_per_row = 1000;
    static vs_plan_estimate e0[CAP];
    vs_plan out;
    int n0 = 0, n = 0;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, e0, CAP, &n0));
    VT_CHECK(!out.sequence_parallel, "off unless asked");
    c.sequence_parallel = 1; // refused until every layer says it handles it (vs_layer_decl.sp_ok)
    VT_ERR(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n), VS_ERR_INVALID, "does not declare that it handles it");
    for (int l = 0; l < tm.m.nlayers; l++) tm.L[l].sp_ok = 1;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    VT_CHECK(out.sequence_parallel == 1 && n == n0 && n > 2, "plan sp %d, %d and %d estimates", out.sequence_parallel, n, n0);
    for (int i = 0; i < n && i < n0; i++) {
        int M = est[i].plan.microbatches;
        double act = 1000.0 * (32.0 / M) * 7;
        VT_CHECK(est[i].plan.sequence_parallel == 1 && est[i].plan.microbatches == e0[i].plan.microbatches, "est %d", i);
        VT_CHECK(near(e0[i].mem_bytes - est[i].mem_bytes, act / 2, 1e-9), "M=%d: %.17g - %.17g, want act/2 = %g", M,
                 e0[i].mem_bytes, est[i].mem_bytes, act / 2);
        VT_CHECK(est[i].step_s == e0[i].step_s, "M=%d: the same time", M);
    }
    double least = HUGE_VAL; // the least memory with it: without it nothing fits
    for (int i = 0; i < n; i++) least = fmin(least, est[i].mem_bytes);
    c.mem_limit_bytes = least + 1;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    c.sequence_parallel = 0;
    VT_ERR(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n), VS_ERR_INVALID, "memory");
    c.sequence_parallel = 1, c.tp = 1, c.dp = 2, c.mem_limit_bytes = 0;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    VT_CHECK(!out.sequence_parallel, "tp 1: no sequence parallelism in the plan");
    c.sequence_parallel = 2;
    VT_ERR(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n), VS_ERR_INVALID, "sequence_parallel 2 (0 or 1)");
}

/* ---- the explanation names the plan that runs (issue 19.7, make run) ----------- */

/* A plan as an explanation line names it: "<label>: PP2 x DP2 x TP2, 1f1b, 1 chunk
   per stage, 4 microbatches, ZeRO-1[, sequence parallel], split flops[: ...]". */
typedef struct named {
    int pp, dp, tp, chunks, mbs, zero, sp;
    char sched[16], split[16], rest[256];
} named;

/* The line of `text` that starts with "<label>: ", read; 0 when none or it does
   not read as a plan. */
static int read_named(const char* text, const char* label, named* o)
{
    size_t ll = strlen(label);
    const char* l = text;
    while (l && !(!strncmp(l, label, ll) && !strncmp(l + ll, ": ", 2))) {
        l = strchr(l, '\n');
        if (l) l++;
    }
    if (!l || !*l) return 0;
    char line[512];
    size_t k = strcspn(l, "\n");
    snprintf(line, sizeof line, "%.*s", (int)k, l);
    memset(o, 0, sizeof *o);
    regex_t re;
    regmatch_t m[12];
    const char* pat = "^[^:]*: PP([0-9]+) x DP([0-9]+) x TP([0-9]+), ([a-z0-9]+), ([0-9]+) chunks? per stage, "
                      "([0-9]+) microbatch(es)?, ZeRO-([0-9])(, sequence parallel)?, split ([a-z]+)(.*)$";
    if (regcomp(&re, pat, REG_EXTENDED)) return 0;
    int ok = !regexec(&re, line, 12, m, 0);
    regfree(&re);
    if (!ok) return 0;
    o->pp = atoi(line + m[1].rm_so), o->dp = atoi(line + m[2].rm_so), o->tp = atoi(line + m[3].rm_so);
    snprintf(o->sched, sizeof o->sched, "%.*s", (int)(m[4].rm_eo - m[4].rm_so), line + m[4].rm_so);
    o->chunks = atoi(line + m[5].rm_so), o->mbs = atoi(line + m[6].rm_so), o->zero = atoi(line + m[8].rm_so);
    o->sp = m[9].rm_so >= 0;
    snprintf(o->split, sizeof o->split, "%.*s", (int)(m[10].rm_eo - m[10].rm_so), line + m[10].rm_so);
    snprintf(o->rest, sizeof o->rest, "%s", line + m[11].rm_so);
    return 1;
}

/* The most significant digits of any number in `text` (a run of digits with at
   most one point; an exponent's digits count on their own); *worst gets it. */
static int max_digits(const char* text, char* worst, size_t n)
{
    int most = 0;
    for (const char* s = text; *s;) {
        if (!isdigit((unsigned char)*s)) {
            s++;
            continue;
        }
        const char* b = s;
        int sig = 0, lead = 1, dots = 0;
        for (; isdigit((unsigned char)*s) || (*s == '.' && !dots && isdigit((unsigned char)s[1])); s++) {
            if (*s == '.') {
                dots++;
                continue;
            }
            if (*s != '0') lead = 0;
            if (!lead) sig++;
        }
        if (sig > most) {
            most = sig;
            snprintf(worst, n, "%.*s", (int)(s - b), b);
        }
    }
    return most;
}

static void check_digits(const char* text, const char* what)
{
    char worst[64] = "";
    int d = max_digits(text, worst, sizeof worst);
    VT_CHECK(d <= 6, "%s: %s has %d significant digits:\n%s", what, worst, d, text);
}

/* The first line of vs_plan_explain_for(p) names p as it resolves (schedule, chunks
   per stage, microbatches, ZeRO, split), with its own estimate or a word on why
   there is none. want_*: the resolved values, written out here. */
static void check_explained(const vs_plan* p, int n, const char* sched, int chunks, const char* split, const char* what)
{
    int len = vs_plan_explain_for(p, est, n, text, sizeof text);
    VT_CHECK(len > 0 && len < (int)sizeof text, "%s: length %d", what, len);
    named x;
    VT_CHECK(!strncmp(text, "plan: ", 6) && read_named(text, "plan", &x), "%s: no \"plan: \" line first:\n%s", what, text);
    if (strncmp(text, "plan: ", 6) || !read_named(text, "plan", &x)) return;
    int M = p->microbatches ? p->microbatches : (p->pp ? p->pp : 1);
    VT_CHECK(x.pp == p->pp && x.dp == p->dp && x.tp == p->tp && !strcmp(x.sched, sched) && x.chunks == chunks &&
                 x.mbs == M && x.zero == (int)p->zero && !strcmp(x.split, split) &&
                 x.sp == (p->sequence_parallel && p->tp > 1),
             "%s: the explanation names PP%d x DP%d x TP%d %s, %d chunks, %d microbatches, ZeRO-%d, sp %d, split %s; the "
             "plan is %s, %d chunks, %d microbatches, ZeRO-%d, split %s:\n%s",
             what, x.pp, x.dp, x.tp, x.sched, x.chunks, x.mbs, x.zero, x.sp, x.split, sched, chunks, M, (int)p->zero,
             split, text);
    /* its estimate: the entry of the same configuration (the planner's plans are
       resolved), its step time on the next line */
    int j = -1;
    for (int i = 0; i < n && j < 0; i++) {
        const vs_plan* e = &est[i].plan;
        static const char* const splits[] = {"default", "manual", "uniform", "parameters", "flops", "time"};
        if (est[i].feasible && e->pp == x.pp && e->dp == x.dp && e->tp == x.tp && !strcmp(vs_pipe_kind_name(e->schedule), sched) &&
            e->chunks == chunks && e->microbatches == M && (int)e->zero == x.zero && !strcmp(splits[e->split], split) &&
            e->sequence_parallel == x.sp)
            j = i;
    }
    if (j == 0) {
        VT_CHECK(!strcmp(x.rest, ": the planner's choice") && !strstr(text, "\nthe planner's choice: "),
                 "%s: est[0] is this plan:\n%s", what, text);
    } else if (j > 0) {
        char t[32], want[64];
        snprintf(want, sizeof want, "\n  step %s (", _vs_gp_fmt_time(est[j].step_s, t, sizeof t));
        VT_CHECK(!x.rest[0] && strstr(text, want) && strstr(text, "\n  why it is not the planner's choice: "),
                 "%s: its estimate (%s) and why it lost:\n%s", what, want + 3, text);
        named b;
        VT_CHECK(read_named(text, "the planner's choice", &b) && !strcmp(b.sched, vs_pipe_kind_name(est[0].plan.schedule)) &&
                     b.zero == (int)est[0].plan.zero && b.chunks == est[0].plan.chunks,
                 "%s: the planner's choice (%s, ZeRO-%d) is not named:\n%s", what, vs_pipe_kind_name(est[0].plan.schedule),
                 (int)est[0].plan.zero, text);
    } else {
        VT_CHECK(strstr(x.rest, "not among the") || strstr(x.rest, "infeasible"), "%s: no estimate, no word why:\n%s",
                 what, text);
    }
    check_digits(text, what);
}

/* The mesh `make run` gives (PP2 x DP2 x TP2, 4 microbatches per DP rank, 16 rows)
   and train_gpt's plans on it (schedule and ZeRO fixed by the user, chunks and
   split left 0); then PP2 x TP4 with a uniform split, V-shaped and unestimated
   schedules and a manual split; DP4 x TP2 with sequence parallelism. */
static void test_explain_given_plan(void)
{
    build(&tm, 2, 64, 64, 0);
    vs_profile pf = prof();
    vs_constraints c;
    memset(&c, 0, sizeof c);
    c.world = 8, c.pp = 2, c.dp = 2, c.tp = 2, c.microbatches = 4, c.global_batch = 16, c.act_bytes_per_row = 4096;
    vs_plan out;
    int n = 0;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    static const vs_pipe_kind kinds[4] = {VS_PIPE_1F1B, VS_PIPE_GPIPE, VS_PIPE_ZBH1, VS_PIPE_ZBV};
    int notbest = 0;
    for (int k = 0; k < 4; k++)
        for (int z = 0; z <= 2; z++) {
            vs_plan p;
            memset(&p, 0, sizeof p);
            p.pp = 2, p.dp = 2, p.tp = 2, p.microbatches = 4, p.schedule = kinds[k], p.zero = (vs_zero_stage)z;
            char what[64];
            snprintf(what, sizeof what, "make run's mesh, %s ZeRO-%d", vs_pipe_kind_name(kinds[k]), z);
            check_explained(&p, n, vs_pipe_kind_name(kinds[k]), kinds[k] == VS_PIPE_ZBV ? 2 : 1, "flops", what);
            notbest += est[0].plan.schedule != kinds[k] || (int)est[0].plan.zero != z;
        }
    VT_CHECK(notbest >= 11, "%d of 12 plans are not the planner's choice", notbest);
    check_explained(&out, n, vs_pipe_kind_name(out.schedule), out.chunks, "flops", "the planner's choice itself");
    vs_plan p;
    memset(&p, 0, sizeof p);
    p.pp = 2, p.dp = 2, p.tp = 2, p.microbatches = 4, p.schedule = VS_PIPE_INTERLEAVED, p.chunks = 2;
    check_explained(&p, n, "interleaved", 2, "flops", "interleaved, 2 chunks");
    // vs_plan_explain: its "chosen:" line names est[0] the same way
    vs_plan_explain(est, n, text, sizeof text);
    named x;
    VT_CHECK(read_named(text, "chosen", &x) && !strcmp(x.sched, vs_pipe_kind_name(est[0].plan.schedule)) &&
                 x.chunks == est[0].plan.chunks && x.zero == (int)est[0].plan.zero && !strcmp(x.split, "flops"),
             "the chosen line:\n%s", text);
    check_digits(text, "vs_plan_explain");

    // PP2 x TP4: a uniform split, zbv's V, a schedule the planner does not try, a manual split
    build(&tm, 4, 64, 256, 1);
    memset(&c, 0, sizeof c);
    c.world = 8, c.pp = 2, c.dp = 1, c.tp = 4, c.microbatches = 8, c.global_batch = 32, c.split = VS_PIPE_SPLIT_UNIFORM;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    memset(&p, 0, sizeof p);
    p.pp = 2, p.dp = 1, p.tp = 4, p.microbatches = 8, p.schedule = VS_PIPE_ZBV, p.split = VS_PIPE_SPLIT_UNIFORM;
    check_explained(&p, n, "zbv", 2, "uniform", "PP2 x TP4 zbv, uniform");
    p.schedule = VS_PIPE_1F1B;
    check_explained(&p, n, "1f1b", 1, "uniform", "PP2 x TP4 1f1b, uniform");
    p.schedule = VS_PIPE_DUALPIPEV;
    check_explained(&p, n, "dualpipev", 2, "uniform", "PP2 x TP4 dualpipev (not estimated)");
    VT_CHECK(strstr(text, "not among the") && read_named(text, "the planner's choice", &x), "dualpipev:\n%s", text);
    p.schedule = VS_PIPE_1F1B, p.split = VS_PIPE_SPLIT_DEFAULT;
    snprintf(p.split_points, sizeof p.split_points, "h2");
    check_explained(&p, n, "1f1b", 1, "manual", "PP2 x TP4 1f1b, a manual split");
    p.split_points[0] = 0;
    check_explained(&p, n, "1f1b", 1, "flops", "PP2 x TP4 1f1b, split flops (the planner cut uniformly)");
    VT_CHECK(strstr(text, "not among the"), "a split the planner did not use has no estimate:\n%s", text);

    // DP4 x TP2 with sequence parallelism (make run's second half; its layers handle it)
    for (int l = 0; l < tm.m.nlayers; l++) tm.L[l].sp_ok = 1;
    memset(&c, 0, sizeof c);
    c.world = 8, c.pp = 1, c.dp = 4, c.tp = 2, c.microbatches = 2, c.global_batch = 16, c.sequence_parallel = 1;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    memset(&p, 0, sizeof p);
    p.pp = 1, p.dp = 4, p.tp = 2, p.microbatches = 2, p.schedule = VS_PIPE_1F1B, p.zero = VS_ZERO_1, p.sequence_parallel = 1;
    check_explained(&p, n, "1f1b", 1, "flops", "DP4 x TP2, sequence parallel");
    p.sequence_parallel = 0;
    check_explained(&p, n, "1f1b", 1, "flops", "DP4 x TP2 without sequence parallelism (not estimated)");
    VT_CHECK(strstr(text, "not among the"), "sequence parallelism is part of the plan:\n%s", text);
    VT_CHECK(vs_plan_explain_for(&p, NULL, 0, text, sizeof text) > 0 && strstr(text, "no estimates"), "%s", text);
    p.schedule = (vs_pipe_kind)77;
    VT_ERR(vs_plan_explain_for(&p, est, n, text, sizeof text), -1, "schedule 77");
}

/* Why each runner-up lost, one reason per branch of the comparison: a phrase
   after "why it lost: " (once "lost on as fast as the best"). */
static void test_explain_reasons(void)
{
    static _vs_gp_est g[6];
    memset(g, 0, sizeof g);
    for (int i = 0; i < 6; i++) {
        vs_plan_estimate* e = &g[i].e;
        e->plan.pp = 2, e->plan.dp = 2, e->plan.tp = 1, e->plan.schedule = VS_PIPE_1F1B, e->plan.chunks = 1;
        e->plan.microbatches = 4, e->plan.split = VS_PIPE_SPLIT_FLOPS, e->plan.zero = (vs_zero_stage)(i % 3);
        e->step_s = 1e-2, e->compute_s = 5e-3, e->comm_s = 3e-3, e->bubble_s = 2e-3, e->mem_bytes = 1e5;
        e->feasible = 1;
        g[i].idx = i;
    }
    g[1].e.mem_bytes = 2e5;                                                 // as fast, more memory
    g[2].e.plan.schedule = VS_PIPE_GPIPE;                                   // as fast, as large
    g[3].e.bubble_s += 1e-3, g[3].e.step_s += 1e-3, g[3].e.plan.schedule = VS_PIPE_ZBV, g[3].e.plan.chunks = 2; // bubble
    g[4].e.comm_s += 2e-3, g[4].e.step_s += 2e-3, g[4].e.plan.schedule = VS_PIPE_ZBH1; // communication
    g[5].e.compute_s += 3e-3, g[5].e.step_s += 3e-3, g[5].e.plan.schedule = VS_PIPE_GPIPE; // compute
    static const char* const want[6] = {NULL,
                                        "as fast as the best but needs more memory, 200 KB a rank against 100 KB",
                                        "as fast as the best and needs as much memory; the best was enumerated first",
                                        "a larger bubble (27% of its step at 4 microbatches), +1 ms a step over the best",
                                        "more exposed communication (5 ms), +2 ms a step over the best",
                                        "more compute per rank (8 ms), +3 ms a step over the best"};
    vs_plan_estimate e[6];
    for (int i = 0; i < 6; i++) {
        if (i) _vs_gp_why_lost(&g[i], &g[0]);
        e[i] = g[i].e;
        const char* r = strstr(e[i].why, ": ");
        VT_CHECK(!i || (r && !strcmp(r + 2, want[i])), "branch %d: '%s', want '%s'", i, e[i].why, want[i]);
    }
    for (int i = 1; i < 6; i++) { // each reason as a runner-up's and as the run's
        vs_plan_estimate two[2] = {e[0], e[i]};
        char line[300];
        vs_plan_explain(two, 2, text, sizeof text);
        snprintf(line, sizeof line, "\n  why it lost: %s\n", want[i]);
        VT_CHECK(strstr(text, line) && !strstr(text, "lost on"), "branch %d:\n%s", i, text);
        vs_plan_explain_for(&e[i].plan, two, 2, text, sizeof text);
        snprintf(line, sizeof line, "\n  why it is not the planner's choice: %s\n", want[i]);
        VT_CHECK(strstr(text, line) && strstr(text, "\nthe planner's choice: "), "branch %d, as the run's:\n%s", i, text);
        check_digits(text, "reasons");
    }
    // the rest, counted by reason: with the best and two runners-up shown, three here
    vs_plan_explain(e, 6, text, sizeof text);
    VT_CHECK(strstr(text, "rejected: 3 configurations\n") && strstr(text, "  slower: larger bubble (1), e.g. PP2") &&
                 strstr(text, "  slower: more exposed communication (1)") && strstr(text, "  slower: more compute per rank (1)"),
             "%s", text);
    // a why without its terminator is refused, not read past
    memset(e[1].why, 'x', sizeof e[1].why);
    VT_CHECK(vs_plan_explain(e, 6, text, sizeof text) == -1 && strstr(vs_last_error(), "est[1].why is not terminated"),
             "unterminated why: %s", vs_last_error());
}

/* The plan's text names what its defaults resolve to; vs_plan_resolve says it. */
static void test_plan_defaults_named(void)
{
    vs_plan p, r;
    memset(&p, 0, sizeof p);
    p.pp = 2;
    char t[2048];
    vs_plan_print(&p, t, sizeof t);
    VT_CHECK(strstr(t, "\nsplit: flops\n") && strstr(t, "\nchunks: 1\n") && strstr(t, "\nschedule: 1f1b\n") &&
                 strstr(t, "\nmicrobatches: 2\n") && !strstr(t, "default"),
             "the defaults as they resolve:\n%s", t);
    vs_plan_print_json(&p, t, sizeof t);
    VT_CHECK(strstr(t, "\"split\": \"flops\""), "%s", t);
    VT_OK(vs_plan_resolve(&p, &r));
    VT_CHECK(r.pp == 2 && r.dp == 1 && r.tp == 1 && r.schedule == VS_PIPE_1F1B && r.chunks == 1 && r.microbatches == 2 &&
                 r.split == VS_PIPE_SPLIT_FLOPS,
             "resolved: %d %d %d %d %d %d %d", r.pp, r.dp, r.tp, (int)r.schedule, r.chunks, r.microbatches, (int)r.split);
    snprintf(p.split_points, sizeof p.split_points, "h1");
    p.schedule = VS_PIPE_ZBV;
    vs_plan_print(&p, t, sizeof t);
    VT_CHECK(strstr(t, "\nsplit: manual\n") && strstr(t, "\nchunks: 2\n"), "%s", t);
    VT_OK(vs_plan_resolve(&p, &p));
    VT_CHECK(p.split == VS_PIPE_SPLIT_MANUAL && p.chunks == 2 && !strcmp(p.split_points, "h1"), "in place");
    vs_plan q;
    VT_OK(vs_plan_parse("split: default\n", &q)); // still read
    VT_CHECK(q.split == VS_PIPE_SPLIT_DEFAULT, "split %d", (int)q.split);
    p.chunks = -1;
    VT_ERR(vs_plan_resolve(&p, &r), VS_ERR_INVALID, "chunks=-1");
    VT_ERR(vs_plan_resolve(NULL, &r), VS_ERR_NULL, "plan");
    // the schedule's picture counts chunks per stage, as the plan does
    static const struct { vs_pipe_kind k; int V; const char* head; } d[3] = {
        {VS_PIPE_1F1B, 1, "# 2 stages, 1 chunk per stage, 4 microbatches;"},
        {VS_PIPE_ZBV, 2, "# 2 stages, 2 chunks per stage, 4 microbatches;"},
        {VS_PIPE_INTERLEAVED, 2, "# 2 stages, 2 chunks per stage, 4 microbatches;"}};
    for (int i = 0; i < 3; i++) {
        vs_pipe_sched* s;
        VT_OK(vs_pipe_generate(NULL, d[i].k, 2, d[i].V, 4, &s));
        vs_pipe_costs costs;
        memset(&costs, 0, sizeof costs);
        static char pic[8192];
        VT_CHECK(vs_pipe_draw(s, &costs, 0, pic, sizeof pic) > 0 && !strncmp(pic, d[i].head, strlen(d[i].head)),
                 "%s: '%.60s'", d[i].head, pic);
        vs_pipe_sched_free(s);
    }
}

/* The profile for people: rates and times, 3 significant digits, the defaults
   named; vs_profile_print keeps 17 for vs_profile_parse. */
static void test_profile_describe(void)
{
    vs_profile p;
    memset(&p, 0, sizeof p);
    p.flop_s = 1.2345678901234567e-11, p.bw_bytes_s = 3.3e9, p.latency_s = 1.7e-5, p.p2p_bw_bytes_s = 2.25e10;
    p.call_s = 6.1e-5, p.instr_s = 1.0000000000000002e-4, p.opt_s = 3.0000000000000001e-9;
    p.ar_n[0] = 2, p.ar_n[1] = 8;
    for (int k = 0; k < VS_PROFILE_AR_SIZES; k++) p.ar_s[0][k] = 1.2345678901234e-5 * (k + 1), p.ar_s[1][k] = 0.99996 * (k + 1);
    p.tp_s[0] = 2.2599257075594241e-08, p.tp_s[1] = -6.0000000000000004e-10;
    char buf[2048];
    int len = vs_profile_describe(&p, buf, sizeof buf);
    VT_CHECK(len > 0 && len == (int)strlen(buf), "length %d", len);
    VT_CHECK(strstr(buf, "compute 81 GFLOP/s;") && strstr(buf, "host 61 us a layer call, 100 us an engine instruction") &&
                 strstr(buf, "optimizer 3 ns an element") && strstr(buf, "collectives 3.3 GB/s, 17 us a call") &&
                 strstr(buf, "point-to-point 22.5 GB/s") &&
                 strstr(buf, "2 ranks 12.3 us, 24.7 us, 37 us, 49.4 us; 8 ranks 1 s, 2 s, 3 s, 4 s") &&
                 strstr(buf, "+22.6 ns a byte on 2 ranks, -600 ps a byte on 8 ranks"),
             "%s", buf);
    check_digits(buf, "vs_profile_describe");
    char small[8];
    VT_CHECK(vs_profile_describe(&p, small, sizeof small) == len && strlen(small) == 7, "snprintf-like");
    memset(&p, 0, sizeof p);
    vs_profile_describe(&p, buf, sizeof buf);
    VT_CHECK(strstr(buf, "compute 10 GFLOP/s (default)") && strstr(buf, "collectives 1 GB/s (default), 20 us (default)") &&
                 strstr(buf, "all-reduce: not measured"),
             "%s", buf);
    VT_ERR(vs_profile_describe(NULL, buf, sizeof buf), -1, "profile is NULL");
}

/* vs_profile_measure on 2 thread ranks with a real two-layer model. */
#define PD 32
#define PR 16
typedef struct pdata {
    int dummy;
} pdata;

static vs_result p_data(vs_pipe_call* c)
{
    int64_t shape[2] = {PR, PD};
    float* v;
    vs_result r = vs_pipe_output(c, 0, VS_F32, 2, shape, (void**)&v);
    for (int i = 0; r == VS_OK && i < PR * PD; i++) v[i] = (float)sin(0.1 * i);
    return r;
}

/* l0 column-parallel (w [PD, PD], its columns split over TP), l1 row-parallel
   (its rows split; its partial output summed over TP). At TP > 1 each of l1's
   two collectives (forward, backward: what the planner counts for a
   row-parallel weight) is followed by a sleep of P_EXTRA seconds, as a layer
   whose TP calls cost more than the table's all-reduce does: the profile's
   tp_s must find it. 20 ms, so that the machine's noise in what the profile
   subtracts (its compute and all-reduce times, measured apart) stays small
   beside it: with 2 ms, a loaded machine found 0.15 of it (1 run in 3). */
#define P_EXTRA 20e-3
static void p_sleep(double s)
{
    struct timespec ts;
    ts.tv_sec = 0, ts.tv_nsec = (long)(s * 1e9);
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static vs_result p_fwd(vs_pipe_call* c)
{
    const vs_layer_ctx* L = vs_layer(c);
    const float *x = (const float*)c->in[0].data, *w = (const float*)L->param[0];
    int64_t I = L->local_shape[0][0], O = L->local_shape[0][1], shape[2] = {PR, O};
    int row = I < PD;
    float* y;
    VT_CHECK(row ? I * L->tp_size == PD && O == PD && L->offset[0][0] == I * L->tp_rank
                 : I == PD && O * L->tp_size == PD && L->offset[0][1] == O * L->tp_rank,
             "layer ctx: local %lld x %lld at TP%d rank %d, offsets %lld %lld", (long long)I, (long long)O, L->tp_size,
             L->tp_rank, (long long)L->offset[0][0], (long long)L->offset[0][1]);
    vs_result r = vs_pipe_output(c, 0, VS_F32, 2, shape, (void**)&y);
    if (r) return r;
    for (int i = 0; i < PR; i++)
        for (int j = 0; j < O; j++) {
            float a = 0;
            for (int k = 0; k < I; k++) a += x[i * I + k] * w[k * O + j];
            y[i * O + j] = a;
        }
    if (row && L->tp_size > 1) {
        if ((r = vs_tp_reduce_forward(L->tp, y, (size_t)(PR * O), VS_F32)) != VS_OK) return r;
        p_sleep(P_EXTRA);
    }
    return VS_OK;
}

/* the layer's input gradient (B's part; none for data) and weight gradient (W's) */
static void p_grad_in(vs_pipe_call* c)
{
    const vs_layer_ctx* L = vs_layer(c);
    const float *w = (const float*)L->param[0], *gy = (const float*)c->out[0].grad;
    float* gx = (float*)c->in[0].grad;
    int64_t I = L->local_shape[0][0], O = L->local_shape[0][1];
    for (int i = 0; gx && i < PR; i++)
        for (int j = 0; j < O; j++)
            for (int k = 0; k < I; k++) gx[i * I + k] += gy[i * O + j] * w[k * O + j];
}

static void p_grad_w(vs_pipe_call* c)
{
    const vs_layer_ctx* L = vs_layer(c);
    const float *x = (const float*)c->in[0].data, *gy = (const float*)c->out[0].grad;
    float* gw = (float*)L->grad[0];
    int64_t I = L->local_shape[0][0], O = L->local_shape[0][1];
    for (int i = 0; i < PR; i++)
        for (int j = 0; j < O; j++)
            for (int k = 0; k < I; k++) gw[k * O + j] += gy[i * O + j] * x[i * I + k];
}

static vs_result p_bwd(vs_pipe_call* c)
{
    const vs_layer_ctx* L = vs_layer(c);
    p_grad_in(c);
    p_grad_w(c);
    if (L->local_shape[0][0] < PD && L->tp_size > 1) p_sleep(P_EXTRA); // (its input's gradient needs no sum here: l0's input is data)
    return VS_OK;
}

/* The same backward split in two (B: the input's gradient, W: the weight's),
   each after a sleep, B's 3 x W's: the profile's w_share must find W's 1/4 */
#define P_BI_S 6e-3
#define P_BW_S 2e-3
static vs_result p_bi(vs_pipe_call* c)
{
    p_grad_in(c);
    p_sleep(P_BI_S);
    return VS_OK;
}

static vs_result p_bw(vs_pipe_call* c)
{
    p_grad_w(c);
    p_sleep(P_BW_S);
    return VS_OK;
}

static vs_result p_loss(vs_pipe_call* c)
{
    const float* y = (const float*)c->in[0].data;
    float* l;
    vs_result r = vs_pipe_output(c, 0, VS_F32, 0, NULL, (void**)&l);
    if (r) return r;
    *l = 0;
    for (int i = 0; i < PR * PD; i++) *l += y[i] * y[i];
    return VS_OK;
}

static vs_result p_loss_bwd(vs_pipe_call* c)
{
    const float* y = (const float*)c->in[0].data;
    float g = *(const float*)c->out[0].grad;
    for (int i = 0; i < PR * PD; i++) ((float*)c->in[0].grad)[i] += 2 * g * y[i];
    return VS_OK;
}

static vs_layer_decl plm[3];
static vs_profile got[2];

static int measure_rank(vs_world* w, void* arg)
{
    (void)arg;
    vs_model_desc m;
    memset(&m, 0, sizeof m);
    m.layers = plm, m.nlayers = 3;
    VT_OK(vs_profile_measure(w, &m, p_data, NULL, &got[vs_world_rank(w)]));
    return 0;
}

static int measure_rank_err(vs_world* w, void* arg)
{
    (void)arg;
    vs_model_desc m;
    vs_profile p;
    memset(&m, 0, sizeof m);
    m.layers = plm, m.nlayers = 3;
    vs_result r = vs_profile_measure(w, &m, p_data, NULL, &p);
    const char* want = "no flops"; // every rank times the layers, and says why it failed
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), want), "rank %d: %d '%s'", vs_world_rank(w), (int)r,
             vs_last_error());
    return 0;
}

static void test_profile_measure(void)
{
    memset(plm, 0, sizeof plm);
    const char* names[3] = {"l0", "l1", "loss"};
    const char* ins[3] = {"x", "h0", "h1"};
    const char* outs[3] = {"h0:f32[*,*]", "h1:f32[*,32]", "loss:f32[]"};
    static const char* pn[2] = {"l0.w", "l1.w"};
    for (int u = 0; u < 3; u++) {
        plm[u].unit.name = names[u], plm[u].unit.inputs = ins[u], plm[u].unit.outputs = outs[u];
        plm[u].unit.forward = u < 2 ? p_fwd : p_loss;
        plm[u].unit.backward = u < 2 ? p_bwd : p_loss_bwd;
        plm[u].unit.flops = u < 2 ? 2.0 * PD * PD : 2.0 * PD;
        if (u < 2) {
            plm[u].nparams = 1;
            plm[u].params[0].name = pn[u], plm[u].params[0].ndim = 2;
            plm[u].params[0].shape[0] = plm[u].params[0].shape[1] = PD;
            plm[u].params[0].role = u == 0 ? VS_ROLE_COLUMN : VS_ROLE_ROW;
            plm[u].params[0].init.kind = VS_INIT_NORMAL, plm[u].params[0].init.b = 0.02;
        }
    }
    memset(got, 0, sizeof got);
    VT_OK(vs_launch(2, measure_rank, NULL));
    const vs_profile* p = &got[0];
    VT_CHECK(p->flop_s > 0 && p->flop_s < 1e-6 && p->bw_bytes_s > 0 && p->latency_s > 0 && p->p2p_bw_bytes_s > 0,
             "flop_s %g bw %g latency %g p2p %g", p->flop_s, p->bw_bytes_s, p->latency_s, p->p2p_bw_bytes_s);
    VT_CHECK(p->call_s >= 0 && p->call_s < 1e-2 && p->instr_s >= 0 && p->instr_s < 1e-2, "call %g instr %g", p->call_s,
             p->instr_s);
    VT_CHECK(!memcmp(&got[0], &got[1], sizeof got[0]), "ranks disagree");
    /* tp_s: the layers on TP2 (column then row) found the sleeps after l1's two
       collectives, per byte they move: l1's output [PR, PD] forward, its input
       (l0's output, [PR, PD / 2] on TP2) backward (the layers' compute is ~30 us) */
    double want = 2 * P_EXTRA / (4.0 * PR * PD + 4.0 * PR * PD / 2);
    /* tp_s is what the TP2 layers took beyond the compute and all-reduce times
       the profile measured apart: a load spike in either shifts it (one
       measurement under 3 busy loops came out at -2.8x). The median of three
       measurements is checked; a profile that does not find the sleeps misses
       all three. */
    double tps[3] = {p->tp_s[0], 0, 0};
    int arn = p->ar_n[0];
    for (int k = 1; k < 3; k++) {
        memset(got, 0, sizeof got);
        VT_OK(vs_launch(2, measure_rank, NULL));
        tps[k] = got[0].tp_s[0];
        arn = got[0].ar_n[0] == 2 ? arn : got[0].ar_n[0];
    }
    for (int i = 0; i < 3; i++)
        for (int k = i + 1; k < 3; k++)
            if (tps[k] < tps[i]) { double t = tps[i]; tps[i] = tps[k]; tps[k] = t; }
    VT_CHECK(arn == 2 && tps[1] > 0.7 * want && tps[1] < 5 * want, "ar_n[0] %d tp_s[0] median %g of %g %g %g (want ~%g)",
             arn, tps[1], tps[0], tps[1], tps[2], want);
    if (getenv("VT_VERBOSE")) {
        char buf[256];
        vs_profile_print(p, buf, sizeof buf);
        printf("measured: %s\n", buf);
    }
    VT_CHECK(got[0].w_share == 0, "no layer has split backward parts, yet w_share = %g", got[0].w_share);
    /* w_share: l0 and l1 given split parts as well (B sleeps 3 x what W does);
       at TP 1 the profile runs them (not the full backward) and times them
       apart: W's share ~1/4 (their compute, ~30 us, and a loaded machine's
       late wake-ups move it toward 1/2; a profile that does not time them
       apart says 0, one that swaps them 3/4) */
    plm[0].unit.backward_input = plm[1].unit.backward_input = p_bi;
    plm[0].unit.backward_weight = plm[1].unit.backward_weight = p_bw;
    memset(got, 0, sizeof got);
    VT_OK(vs_launch(2, measure_rank, NULL));
    VT_CHECK(got[0].w_share > 0.18 && got[0].w_share < 0.40 && got[0].w_share == got[1].w_share,
             "w_share %g and %g (want ~%g)", got[0].w_share, got[1].w_share, P_BW_S / (P_BI_S + P_BW_S));
    plm[0].unit.backward_input = plm[1].unit.backward_input = NULL;
    plm[0].unit.backward_weight = plm[1].unit.backward_weight = NULL;
    // rank 0's error reaches every rank
    plm[0].unit.flops = plm[1].unit.flops = plm[2].unit.flops = 0;
    VT_OK(vs_launch(2, measure_rank_err, NULL));
}

/* Recompute in the planner: every layer recomputed costs a forward more and
   keeps only the layers' outputs between forward and backward; under a limit
   that only recompute meets, the planner finds it and says so. */
static void test_recompute(void)
{
    build(&tm, 8, 128, 512, 1);
    vs_constraints c;
    memset(&c, 0, sizeof c);
    c.world = 8, c.global_batch = 64, c.act_bytes_per_row = 64 * 1024;
    vs_profile pf = prof();
    vs_plan out;
    static vs_plan_estimate plain[CAP], rc[CAP];
    int np = 0, nr = 0;
    c.recompute = -1;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, plain, CAP, &np));
    c.recompute = 1;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, rc, CAP, &nr));
    VT_CHECK(np == nr && np > 0, "%d estimates without recompute, %d with", np, nr);
    double lo = HUGE_VAL, lo_rc = HUGE_VAL;
    int pairs = 0;
    for (int i = 0; i < nr; i++) {
        if (!rc[i].feasible) continue;
        VT_CHECK(!strcmp(rc[i].plan.recompute, "*"), "recompute 1: est %d recomputes \"%s\"", i, rc[i].plan.recompute);
        lo_rc = fmin(lo_rc, rc[i].mem_bytes);
        for (int j = 0; j < np; j++) {
            vs_plan a = rc[i].plan;
            a.recompute[0] = 0;
            if (!plain[j].feasible || memcmp(&a, &plain[j].plan, sizeof a)) continue;
            pairs++;
            VT_CHECK(rc[i].mem_act < plain[j].mem_act && rc[i].mem_params == plain[j].mem_params &&
                         rc[i].mem_optim == plain[j].mem_optim && rc[i].step_s > plain[j].step_s &&
                         rc[i].compute_s > plain[j].compute_s,
                     "est %d: recompute %g B of activations, %g s; without %g B, %g s", i, rc[i].mem_act, rc[i].step_s,
                     plain[j].mem_act, plain[j].step_s);
        }
    }
    for (int j = 0; j < np; j++)
        if (plain[j].feasible) lo = fmin(lo, plain[j].mem_bytes);
    VT_CHECK(pairs > 0, "%d configurations compared", pairs);
    VT_CHECK(lo_rc < lo, "recompute's smallest %g B, without %g B", lo_rc, lo);
    c.recompute = 0;
    c.mem_limit_bytes = (lo_rc + lo) / 2;
    int n = 0;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    VT_CHECK(!strcmp(out.recompute, "*") && est[0].mem_bytes <= c.mem_limit_bytes,
             "under %g B the planner chose recompute \"%s\" at %g B", c.mem_limit_bytes, out.recompute, est[0].mem_bytes);
    VT_OK(vs_plan_check(&out, &tm.m));
    int len = vs_plan_explain(est, n, text, sizeof text);
    VT_CHECK(len > 0 && strstr(text, ", recompute, split ") && strstr(text, "it fits only with recompute: without, the same "
             "configuration needs") && strstr(text, "no configuration fits without recompute"), "explanation:\n%s", text);
    if (getenv("VT_VERBOSE")) printf("%s", text);
    c.recompute = 2;
    vs_result r = vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "recompute 2"), "recompute 2: %s", vs_last_error());
}

/* The largest unit's parameter bytes (a ZeRO-3 group: the planner gathers a
   layer at a time), TP 1. */
static double largest_group(const tmodel* t)
{
    double g = 0;
    for (int u = 0; u < t->n; u++) {
        double b = 0;
        for (int j = 0; j < t->L[u].nparams; j++) {
            const vs_param_decl* d = &t->L[u].params[j];
            b += 4.0 * (double)d->shape[0] * (d->ndim > 1 ? (double)d->shape[1] : 1);
        }
        g = fmax(g, b);
    }
    return g;
}

/* Memory per rank of every DP form on one stage, TP 1, by hand: P elements of
   f32 (b = 4P bytes), the shard group S (dp, or HSDP's dp_shard), the largest
   group g:
   - ZeRO-1: b + b + 8P/S (AdamW's two f32 moments, sharded)
   - ZeRO-2: b + b/S + 8P/S
   - ZeRO-3: b/S + 2g (the current group and the prefetched one) + b/S + g (one
     group's gradients before their reduce-scatter) + 8P/S; kept gathered
     (reshard_after_forward 0): b/S + b + b/S + g + 8P/S
   plus the activations: act_bytes_per_row x rows a microbatch x layers. */
static void test_zero3_memory_by_hand(void)
{
    build(&tm, 4, 64, 256, 0);
    const double P = tm.params, b = 4 * P, g = largest_group(&tm);
    static const int dps[3] = {2, 4, 8}, nodes[3] = {0, 2, 4};
    for (int i = 0; i < 3; i++) {
        vs_constraints c;
        memset(&c, 0, sizeof c);
        c.world = dps[i], c.pp = 1, c.tp = 1, c.global_batch = 32, c.act_bytes_per_row = 1000;
        c.zero3 = 1, c.node_ranks = nodes[i];
        vs_profile pf = prof();
        vs_plan out;
        int n = 0, dp = dps[i];
        VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
        check_choice(&tm, &c, &out, n, "zero3 memory");
        int seen[4][9][2]; // [zero][shard][kept]
        memset(seen, 0, sizeof seen);
        for (int k = 0; k < n; k++) {
            const vs_plan_estimate* e = &est[k];
            const vs_plan* q = &e->plan;
            int S = q->dp_shard ? q->dp_shard : dp, kept = q->zero == 3 && !q->reshard_after_forward;
            double act = 1000.0 * (32.0 / dp / q->microbatches) * tm.n, mp = b, mg = b, mo = 8 * P / S;
            if (q->zero == 0) mo = 8 * P;
            if (q->zero == 2) mg = b / S;
            if (q->zero == 3) mp = b / S + (kept ? b : 2 * g), mg = b / S + g;
            VT_CHECK(near(e->mem_bytes, mp + mg + mo + act, 1e-12) && near(e->mem_params, mp, 1e-12) &&
                         near(e->mem_grads, mg, 1e-12) && near(e->mem_optim, mo, 1e-12),
                     "DP%d ZeRO-%d shard %d kept %d M=%d: memory %.17g (params %.17g grads %.17g optim %.17g), want %.17g",
                     dp, (int)q->zero, S, kept, q->microbatches, e->mem_bytes, e->mem_params, e->mem_grads, e->mem_optim,
                     mp + mg + mo + act);
            VT_CHECK(q->zero != 3 || (q->prefetch == 1 && q->prefetch_set && q->reshard_after_forward_set),
                     "a ZeRO-3 estimate resolved: prefetch %d", q->prefetch);
            if (S <= 8) seen[q->zero][S][kept]++;
        }
        // the forms: ZeRO 0..3 and kept over dp, and HSDP's shards within a host (DP2 on one host: none)
        VT_CHECK(seen[0][dp][0] && seen[1][dp][0] && seen[2][dp][0] && seen[3][dp][0] && seen[3][dp][1],
                 "DP%d: a form missing", dp);
        for (int S = 2; S < dp; S++) {
            int want = dp % S == 0 && nodes[i] % S == 0;
            VT_CHECK(!!seen[1][S][0] == want && !!seen[2][S][0] == want && !!seen[3][S][0] == want &&
                         !!seen[3][S][1] == want && !seen[0][S][0],
                     "DP%d, %d ranks a host: HSDP shard %d %s", dp, nodes[i], S, want ? "missing" : "not expected");
        }
    }
}

/* ZeRO-3's time on one stage by hand, M microbatches, n groups (the layers
   with parameters) of the shard group's all-gather G (ring: (S-1)/S x b/bw
   + n latencies; across hosts at inter_bw), compute forward Cf and backward
   2 Cf a microbatch. Prefetched, a pass shows its first group's share and
   what the compute cannot cover: forward G/n + max(0, G (1 - 1/n) - Cf),
   backward (its gathers and reduce-scatters) 2G/n + max(0, 2G (1 - 1/n) -
   2Cf). HSDP adds the owned shard's all-reduce over the replicas, across
   hosts: 2 (R-1)/R x (b/S) / inter_bw + latency. */
static double z3_exposed(double G, double B, double C, int n)
{
    return (G + B) / n + fmax(0, (G + B) * (1 - 1.0 / n) - C);
}

static void test_zero3_time_by_hand(void)
{
    build(&tm, 16, 128, 512, 0);
    vs_constraints c;
    memset(&c, 0, sizeof c);
    c.world = 8, c.pp = 1, c.tp = 1, c.global_batch = 64, c.act_bytes_per_row = 1000, c.zero3 = 1;
    c.node_ranks = 4, c.inter_bw_bytes_s = 1e8;
    vs_profile pf = prof();
    vs_plan out;
    int n = 0, seen = 0;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    check_choice(&tm, &c, &out, n, "zero3 time");
    const double b = 4 * tm.params, F = tm.flops_sharded + tm.flops_loss, lat = 1e-5;
    const int ng = tm.n - 1; // the loss holds no parameter
    for (int k = 0; k < n; k++) {
        const vs_plan* q = &est[k].plan;
        if (q->zero != 3) continue;
        int M = q->microbatches, S = q->dp_shard ? q->dp_shard : 8, R = 8 / S, kept = !q->reshard_after_forward;
        double Cf = F * (64.0 / 8 / M) * 1e-9, bw = S == 8 ? 1e8 : 1e9; // the 8 ranks span 2 hosts
        double G = (S - 1.0) / S * b / bw + ng * lat;
        double xr = R > 1 ? 2.0 * (R - 1) / R * (b / S) / 1e8 + lat : 0;
        /* kept gathered: the forward's gathers once a step, after the pipeline;
           each backward only reduce-scatters */
        double want = kept ? M * z3_exposed(0, G, 2 * Cf, ng) + z3_exposed(G, 0, Cf, ng) + xr
                           : M * (z3_exposed(G, 0, Cf, ng) + z3_exposed(G, G, 2 * Cf, ng)) + xr;
        VT_CHECK(near(est[k].comm_s, want, 1e-9), "ZeRO-3 shard %d M=%d kept %d: comm %.17g, want %.17g", S, M, kept,
                 est[k].comm_s, want);
        VT_CHECK(near(est[k].compute_s, 3 * F * 8 * 1e-9, 1e-12), "ZeRO-3 shard %d M=%d: compute %.17g", S, M,
                 est[k].compute_s);
        seen++;
    }
    VT_CHECK(seen == 3 * (3 + 2), "%d ZeRO-3 estimates (3 shard sizes x 3 microbatch counts, kept at 2 of them)", seen);
}

/* A memory limit only ZeRO-3 meets: the planner picks it and says why, naming
   what ZeRO-1 would need. */
static void test_zero3_only_fit(void)
{
    build(&tm, 8, 128, 512, 0);
    vs_constraints c;
    memset(&c, 0, sizeof c);
    c.world = 8, c.pp = 1, c.tp = 1, c.global_batch = 64, c.act_bytes_per_row = 1000, c.recompute = -1;
    const double b = 4 * tm.params, g = largest_group(&tm);
    c.mem_limit_bytes = 1.2 * b; // ZeRO-2 needs b + b/8 + b/4, ZeRO-3 b/2 + 3 g and the activations
    VT_CHECK(b / 2 + 3 * g + 1e5 < c.mem_limit_bytes, "the model: ZeRO-3 would not fit either");
    vs_profile pf = prof();
    vs_plan out;
    int n = 0;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    check_choice(&tm, &c, &out, n, "only zero 3 fits");
    VT_CHECK(out.zero == 3 && out.dp == 8 && out.dp_shard == 0, "chose ZeRO-%d DP%d shard %d", (int)out.zero, out.dp,
             out.dp_shard);
    for (int k = 0; k < n; k++)
        VT_CHECK(!est[k].feasible || est[k].plan.zero == 3, "ZeRO-%d fits", (int)est[k].plan.zero);
    int len = vs_plan_explain(est, n, text, sizeof text);
    char want[160], mb[32];
    double z1 = 2 * b + b / 4 + 1000.0 * (64.0 / 8 / out.microbatches) * tm.n;
    snprintf(mb, sizeof mb, "%.4g MB", z1 / 1e6);
    snprintf(want, sizeof want, "it fits only with parameters sharded: ZeRO-1 needs %s a rank, ZeRO-2 ", mb);
    VT_CHECK(len > 0 && strstr(text, "chosen: PP1 x DP8 x TP1") && strstr(text, ", ZeRO-3, split") && strstr(text, want),
             "explanation lacks '%s':\n%s", want, text);
    VT_OK(vs_plan_check(&out, &tm.m));
    // without the limit ZeRO-3 is not weighed (vs_constraints.zero3 0), told never it is not either
    c.zero3 = -1;
    VT_ERR(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n), VS_ERR_INVALID, "memory: the smallest configuration");
    c.zero3 = 2;
    VT_ERR(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n), VS_ERR_INVALID, "zero3 2");
    c.zero3 = 0, c.node_ranks = -1;
    VT_ERR(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n), VS_ERR_INVALID, "node_ranks = -1");
    c.node_ranks = 0, c.inter_bw_bytes_s = NAN;
    VT_ERR(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n), VS_ERR_INVALID, "inter_bw_bytes_s = nan");
    if (getenv("VT_VERBOSE")) printf("%s", text);
}

/* Two hosts of 4 ranks, slow between them: under a limit that ZeRO-3 over the
   8 ranks and HSDP (DPR2 x DPS4) both meet, HSDP is faster (its gathers stay
   within a host; across, one all-reduce of a quarter of the gradients) and is
   chosen, the explanation naming what ZeRO-3 over all 8 would take. */
static void test_hsdp_cheaper(void)
{
    build(&tm, 16, 128, 512, 0);
    vs_constraints c;
    memset(&c, 0, sizeof c);
    c.world = 8, c.pp = 1, c.tp = 1, c.global_batch = 64, c.act_bytes_per_row = 1000, c.recompute = -1;
    c.node_ranks = 4, c.inter_bw_bytes_s = 1e8;
    const double b = 4 * tm.params, g = largest_group(&tm);
    c.mem_limit_bytes = b + 3 * g + 1e6; // HSDP's ZeRO-3 (b/4 + 2g + b/4 + g + b/2) fits, ZeRO-2 (b + b/8 + b/4) not
    VT_CHECK(c.mem_limit_bytes < 1.375 * b, "the model: ZeRO-2 would fit");
    vs_profile pf = prof();
    vs_plan out;
    int n = 0;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    check_choice(&tm, &c, &out, n, "hsdp");
    VT_CHECK(out.zero == 3 && out.dp_shard == 4, "chose ZeRO-%d dp_shard %d", (int)out.zero, out.dp_shard);
    const vs_plan_estimate* flat = NULL; // the same plan sharded over all 8
    for (int k = 0; k < n && !flat; k++)
        if (est[k].plan.zero == 3 && !est[k].plan.dp_shard && est[k].plan.microbatches == out.microbatches &&
            est[k].plan.reshard_after_forward == out.reshard_after_forward)
            flat = &est[k];
    VT_CHECK(flat && flat->feasible && flat->mem_bytes < est[0].mem_bytes && flat->step_s > est[0].step_s,
             "ZeRO-3 over 8: %s", flat ? flat->why : "not estimated");
    int len = vs_plan_explain(est, n, text, sizeof text);
    VT_CHECK(len > 0 && strstr(text, "ZeRO-3 HSDP DPR2 x DPS4") &&
                 strstr(text, "HSDP: shards within a host (DPS4), 2 replicas across hosts (DPR2)") &&
                 strstr(text, "sharded over all 8 DP ranks: step"),
             "explanation:\n%s", text);
    if (getenv("VT_VERBOSE")) printf("%s", text);
    // one host of 8: no HSDP weighed (it would only add memory)
    c.node_ranks = 8;
    VT_OK(vs_generate_plan(&tm.m, &c, &pf, &out, est, CAP, &n));
    for (int k = 0; k < n; k++) VT_CHECK(!est[k].plan.dp_shard, "HSDP on one host");
}

/* The plan's ZeRO-3 and HSDP fields through text and JSON, and the refusals. */
static void test_plan_zero3_text(void)
{
    vs_plan p, q;
    memset(&p, 0, sizeof p);
    p.pp = 2, p.dp = 8, p.tp = 2, p.zero = (vs_zero_stage)3, p.dp_shard = 4;
    p.reshard_after_forward_set = 1, p.prefetch = 2, p.prefetch_set = 1;
    p.split = VS_PIPE_SPLIT_FLOPS, p.chunks = 1, p.schedule = VS_PIPE_1F1B, p.microbatches = 2; // (as they print)
    char t1[2048], t2[2048];
    for (int form = 0; form < 2; form++) {
        int len = form ? vs_plan_print_json(&p, t1, sizeof t1) : vs_plan_print(&p, t1, sizeof t1);
        VT_CHECK(len > 0, "print: %s", vs_last_error());
        VT_CHECK(form ? strstr(t1, "\"zero\": 3") && strstr(t1, "\"dp_shard\": 4") &&
                            strstr(t1, "\"reshard_after_forward\": 0") && strstr(t1, "\"prefetch\": 2")
                      : strstr(t1, "zero: 3\n") && strstr(t1, "dp_shard: 4\n") && strstr(t1, "reshard_after_forward: 0\n") &&
                            strstr(t1, "prefetch: 2\n"),
                 "form %d:\n%s", form, t1);
        VT_OK(vs_plan_parse(t1, &q));
        VT_CHECK(!memcmp(&p, &q, sizeof p), "form %d: the parsed plan differs:\n%s", form, t1);
        (form ? vs_plan_print_json : vs_plan_print)(&q, t2, sizeof t2);
        VT_CHECK(!strcmp(t1, t2), "form %d reprinted:\n%s\n%s", form, t1, t2);
    }
    // keys in any order; the defaults resolve (zero 3: reshard_after_forward 1, prefetch 1)
    VT_OK(vs_plan_parse("dp_shard: 8\nzero: 3\nmesh: PP=1 DP=16 TP=1\n", &q));
    VT_CHECK(q.dp_shard == 8 && q.zero == 3 && !q.prefetch_set, "parsed shard %d zero %d", q.dp_shard, (int)q.zero);
    VT_OK(vs_plan_resolve(&q, &q));
    VT_CHECK(q.reshard_after_forward == 1 && q.prefetch == 1 && q.reshard_after_forward_set && q.prefetch_set,
             "resolved reshard %d prefetch %d", q.reshard_after_forward, q.prefetch);
    VT_OK(vs_plan_parse("{\"zero\": 3, \"dp_shard\": 2, \"mesh\": {\"pp\": 1, \"dp\": 4, \"tp\": 1}}", &q));
    VT_CHECK(q.dp_shard == 2 && q.dp == 4 && q.zero == 3, "JSON parsed shard %d", q.dp_shard);
    // old plans are unchanged: no new key printed
    memset(&q, 0, sizeof q);
    q.dp = 2, q.zero = VS_ZERO_1;
    vs_plan_print(&q, t1, sizeof t1), vs_plan_print_json(&q, t2, sizeof t2);
    VT_CHECK(!strstr(t1, "dp_shard") && !strstr(t1, "prefetch") && !strstr(t2, "reshard"), "%s%s", t1, t2);
    // refusals, each naming the value
    VT_ERR(vs_plan_parse("mesh: PP=1 DP=6 TP=1\ndp_shard: 4\n", &q), VS_ERR_INVALID, "dp_shard 4 does not divide the mesh's DP=6");
    VT_ERR(vs_plan_parse("{\"dp_shard\": 3, \"mesh\": {\"pp\": 1, \"dp\": 8, \"tp\": 1}}", &q), VS_ERR_INVALID,
           "dp_shard 3 does not divide");
    VT_ERR(vs_plan_parse("dp_shard: -2\n", &q), VS_ERR_INVALID, "dp_shard = \"-2\"");
    VT_ERR(vs_plan_parse("prefetch: -1\n", &q), VS_ERR_INVALID, "prefetch = \"-1\"");
    VT_ERR(vs_plan_parse("reshard_after_forward: 2\n", &q), VS_ERR_INVALID, "reshard_after_forward = \"2\" (0..1)");
    VT_ERR(vs_plan_parse("zero: 4\n", &q), VS_ERR_INVALID, "zero = \"4\" (0..3)");
    VT_ERR(vs_plan_parse("zero: 3\nzero: 3\n", &q), VS_ERR_INVALID, "key \"zero\" twice");
    q = p, q.dp_shard = 3;
    VT_ERR(vs_plan_print(&q, t1, sizeof t1), -1, "dp_shard 3 does not divide DP=8");
    q = p, q.dp_shard = -1;
    VT_ERR(vs_plan_check(&q, &tm.m), VS_ERR_INVALID, "dp_shard -1");
    q = p, q.prefetch = -1;
    VT_ERR(vs_plan_print_json(&q, t1, sizeof t1), -1, "prefetch -1");
    q = p, q.reshard_after_forward = 2;
    VT_ERR(vs_plan_check(&q, &tm.m), VS_ERR_INVALID, "reshard_after_forward 2 (0 or 1)");
    q = p, q.prefetch_set = 7;
    VT_ERR(vs_plan_check(&q, &tm.m), VS_ERR_INVALID, "prefetch_set 7");
    q = p, q.zero = (vs_zero_stage)4;
    VT_ERR(vs_plan_check(&q, &tm.m), VS_ERR_INVALID, "zero 4 (0..3)");
}

/* vs_parallelize builds the plans the planner makes with ZeRO-3 and HSDP
   (issue 34; it refused them, VS_ERR_UNSUPPORTED, before the high-level API was
   wired): a ZeRO-3 DDP, and HSDP's PP x DPR x DPS x TP mesh (even 2 replicas of
   1). tests/test_train_zero3.c trains them. */
static vs_plan par_plan;
static int par_rank(vs_world* w, void* arg)
{
    (void)arg;
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &tm.m, d.plan = &par_plan;
    vs_train* t = NULL;
    VT_OK(vs_parallelize(w, &d, &t));
    if (!t) return 1;
    vs_ddp_desc dd;
    VT_OK(vs_ddp_query_desc(vs_train_ddp(t), &dd));
    VT_CHECK(dd.zero == par_plan.zero, "the DDP's zero %d, the plan's %d", (int)dd.zero, (int)par_plan.zero);
    int hsdp = par_plan.dp_shard > 0 && par_plan.dp_shard < par_plan.dp;
    VT_CHECK(hsdp == (vs_mesh_dim_index(vs_train_mesh(t), "DPR") == 1 && vs_mesh_dim_index(vs_train_mesh(t), "DPS") == 2),
             "HSDP %d: the mesh's DPR at %d, DPS at %d", hsdp, vs_mesh_dim_index(vs_train_mesh(t), "DPR"),
             vs_mesh_dim_index(vs_train_mesh(t), "DPS"));
    VT_OK(vs_train_free(t));
    return 0;
}

static void test_parallelize_builds_zero3(void)
{
    build(&tm, 4, 64, 256, 0);
    memset(&par_plan, 0, sizeof par_plan);
    par_plan.zero = (vs_zero_stage)3;
    VT_OK(vs_launch(1, par_rank, NULL));
    par_plan.zero = VS_ZERO_1, par_plan.dp = 2, par_plan.dp_shard = 1; // HSDP: 2 replicas of 1
    VT_OK(vs_launch(2, par_rank, NULL));
}

int main(void)
{
    VT_CASE("generate_plan_one_rank_by_hand", test_one_rank());
    VT_CASE("generate_plan_dp_by_hand", test_dp_by_hand());
    VT_CASE("generate_plan_dp_queue_by_hand: every chunk's reductions queue (PP2, ZB-V and interleaved, M 2)", test_dp_queue_by_hand());
    VT_CASE("generate_plan_w_share_by_hand: the profile's W share of a split backward (PP2, ZB-V, M 2)", test_w_share_by_hand());
    VT_CASE("generate_plan_grad_fp32: DP traffic and memory of f32 gradients", test_grad_fp32());
    VT_CASE("generate_plan_msg_bytes: a free dim's message bytes (msg_bytes_per_row) for TP and PP", test_msg_bytes());
    VT_CASE("generate_plan_tp_by_hand", test_tp_by_hand());
    VT_CASE("generate_plan_pp_bubble", test_pp_choice());
    VT_CASE("generate_plan_world8_memory_explain", test_world8_and_memory());
    VT_CASE("generate_plan_fixed_sizes_divide", test_fixed_and_divide());
    VT_CASE("generate_plan_errors", test_errors());
    VT_CASE("generate_plan_recompute_found_and_explained", test_recompute());
    VT_CASE("generate_plan_large_quick", test_large());
    VT_CASE("profile_print_parse", test_profile_text());
    VT_CASE("generate_plan_measured_tables", test_measured_tables());
    VT_CASE("generate_plan_sequence_parallel", test_sequence_parallel());
    VT_CASE("plan_explain_names_the_plan_that_runs", test_explain_given_plan());
    VT_CASE("plan_explain_reasons_read", test_explain_reasons());
    VT_CASE("plan_defaults_named_as_resolved", test_plan_defaults_named());
    VT_CASE("profile_describe_for_people", test_profile_describe());
    VT_CASE("profile_measure_2_ranks", test_profile_measure());
    VT_CASE("generate_plan_zero3_memory_by_hand", test_zero3_memory_by_hand());
    VT_CASE("generate_plan_zero3_time_by_hand", test_zero3_time_by_hand());
    VT_CASE("generate_plan_zero3_only_fit_explained", test_zero3_only_fit());
    VT_CASE("generate_plan_hsdp_cheaper_across_hosts", test_hsdp_cheaper());
    VT_CASE("plan_zero3_hsdp_text_json_refusals", test_plan_zero3_text());
    VT_CASE("parallelize_builds_zero3_hsdp", test_parallelize_builds_zero3());
    return vt_summary();
}
