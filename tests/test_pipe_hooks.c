/* test_pipe_hooks.c - the pipeline engine's unit hooks (vs_pipe_desc.on_unit)
   and vs_pipe_hook_order, on thread ranks.

   For every schedule kind (GPipe, 1F1B, interleaved, ZB-H1, ZB-V, DualPipeV),
   P = 2 and 4, M = 1 and 2P+1, with and without recomputed units, on the model
   of tests/pipe_models.h (one unit with only a full backward, the rest with
   both the full and the split parts):
   - the calls on each stage equal the sequence this file derives from the
     schedule's own instruction list (vs_pipe_sched_at), field by field, and so
     does vs_pipe_hook_order's list, for a training run (twice) and for its
     forward-only schedule;
   - every BEFORE is followed at once by its AFTER; W points only in the kinds
     that split B and W; grads_final exactly once per unit of the stage, on the
     last of its gradient parts in the sequence (found here by position);
   - the losses and every parameter gradient with hooks equal those without,
     bit for bit;
   - a consumer shaped like ZeRO-3 (parameters NaN unless gathered: the first
     unit gathered at the step's start from vs_pipe_hook_order, the next one
     prefetched at each BEFORE, released at each AFTER, gradients taken at
     grads_final) trains bit for bit as without hooks, at most 2 units
     gathered at once.
   A failing hook (in a middle stage's backward, and in a W at the run's end)
   ends every rank within the run, long before the communicators' deadline,
   each naming the hook's message; the failing stage names the point, unit and
   microbatch. */
#define VESCALE_IMPLEMENTATION
#include "vescale_pipe.h"
#include "tests/vs_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/pipe_models.h"

#define NKINDS 6
static const vs_pipe_kind kinds[NKINDS] = {VS_PIPE_GPIPE, VS_PIPE_1F1B, VS_PIPE_INTERLEAVED,
                                           VS_PIPE_ZBH1,  VS_PIPE_ZBV,  VS_PIPE_DUALPIPEV};
static int split_kind(vs_pipe_kind k) { return k == VS_PIPE_ZBH1 || k == VS_PIPE_ZBV || k == VS_PIPE_DUALPIPEV; }

enum { FULL_ONLY_UNIT = 3 }; // a unit with only a full backward: no W points, its B is its last part

static double now_s(void)
{
    struct timespec ts;
    return clock_gettime(CLOCK_MONOTONIC, &ts) ? 0 : (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static vs_result launch_t(int n, double timeout, vs_rank_fn fn, void* arg)
{
    vs_launch_desc d = {0};
    d.nranks = n, d.transport = VS_TRANSPORT_THREADS, d.timeout_s = timeout;
    return vs_launch_ex(&d, fn, arg);
}

/* ---- the hook: records every call; fails at one point when asked ------------ */

typedef struct hlog {
    vs_pipe_hook_event* ev;
    size_t n, cap;
    int fail_point, fail_mb, fail_unit; // fail there (fail_point 0: never)
} hlog;

static vs_result rec_hook(void* user, const vs_pipe_hook_event* e)
{
    hlog* L = (hlog*)user;
    if (L->n == L->cap) {
        size_t cap = L->cap ? 2 * L->cap : 256;
        vs_pipe_hook_event* ev = (vs_pipe_hook_event*)realloc(L->ev, cap * sizeof *ev);
        if (!ev) return vs_set_error(VS_ERR_NOMEM, "hook log");
        L->ev = ev, L->cap = cap;
    }
    L->ev[L->n++] = *e;
    if (L->fail_point && e->point == L->fail_point && e->mb == L->fail_mb && e->unit == L->fail_unit)
        return vs_set_error(VS_ERR_INVALID, "injected hook failure (unit %d)", e->unit);
    return VS_OK;
}

/* ---- the sequence derived from the schedule's list --------------------------- */

typedef struct want {
    vs_pipe_hook_event* ev;
    size_t n, cap;
} want;

static void push(want* W, int point, int unit, int chunk, int mb, int M, int instr, int rc, int fwd)
{
    if (W->n == W->cap) {
        W->cap = W->cap ? 2 * W->cap : 256;
        W->ev = (vs_pipe_hook_event*)realloc(W->ev, W->cap * sizeof *W->ev);
    }
    vs_pipe_hook_event* e = &W->ev[W->n];
    memset(e, 0, sizeof *e);
    e->point = point, e->unit = unit, e->chunk = chunk, e->mb = mb, e->mbs = M, e->instr = instr;
    e->seq = (int64_t)W->n, e->recompute = rc, e->forward_only = fwd;
    W->n++;
}

/* The contract, read off stage st's instruction list: F runs its chunk's units in
   model order, a backward (B, BW) in reverse with a recomputed unit's forward
   just before its backward, W in reverse over the units with split parts. */
static void derive(const vs_pipe_sched* s, const vs_pipe_plan* pl, const vs_pipe_unit* U, int st, want* W)
{
    const int M = vs_pipe_sched_mbs(s), n = vs_pipe_sched_len(s, st);
    int fwd = 1;
    for (int i = 0; i < n; i++) {
        vs_pipe_instr in;
        VT_OK(vs_pipe_sched_at(s, st, i, &in));
        if (in.op == VS_PIPE_B || in.op == VS_PIPE_BW || in.op == VS_PIPE_W) fwd = 0;
    }
    W->n = 0;
    for (int i = 0; i < n; i++) {
        vs_pipe_instr in;
        VT_OK(vs_pipe_sched_at(s, st, i, &in));
        const int c = in.chunk, lo = pl->first_unit[c], hi = pl->first_unit[c + 1];
        if (in.op == VS_PIPE_F)
            for (int u = lo; u < hi; u++) {
                push(W, VS_PIPE_HOOK_FORWARD_BEFORE, u, c, in.mb, M, i, 0, fwd);
                push(W, VS_PIPE_HOOK_FORWARD_AFTER, u, c, in.mb, M, i, 0, fwd);
            }
        if (in.op == VS_PIPE_B || in.op == VS_PIPE_BW)
            for (int u = hi - 1; u >= lo; u--) {
                if (U[u].recompute) {
                    push(W, VS_PIPE_HOOK_FORWARD_BEFORE, u, c, in.mb, M, i, 1, fwd);
                    push(W, VS_PIPE_HOOK_FORWARD_AFTER, u, c, in.mb, M, i, 1, fwd);
                }
                push(W, VS_PIPE_HOOK_BACKWARD_BEFORE, u, c, in.mb, M, i, 0, fwd);
                push(W, VS_PIPE_HOOK_BACKWARD_AFTER, u, c, in.mb, M, i, 0, fwd);
            }
        if (in.op == VS_PIPE_W)
            for (int u = hi - 1; u >= lo; u--)
                if (U[u].backward_input) {
                    push(W, VS_PIPE_HOOK_WEIGHT_BEFORE, u, c, in.mb, M, i, 0, fwd);
                    push(W, VS_PIPE_HOOK_WEIGHT_AFTER, u, c, in.mb, M, i, 0, fwd);
                }
    }
    /* grads_final: the last gradient part of each unit in the sequence */
    for (size_t j = W->n; j-- > 0;) {
        vs_pipe_hook_event* e = &W->ev[j];
        if (e->point != VS_PIPE_HOOK_BACKWARD_AFTER && e->point != VS_PIPE_HOOK_WEIGHT_AFTER) continue;
        int later = 0;
        for (size_t k = j + 1; k < W->n; k++)
            later |= W->ev[k].unit == e->unit && W->ev[k].point >= VS_PIPE_HOOK_BACKWARD_BEFORE;
        e->grads_final = !later;
    }
}

static int same_event(const vs_pipe_hook_event* a, const vs_pipe_hook_event* b)
{
    return a->point == b->point && a->unit == b->unit && a->chunk == b->chunk && a->mb == b->mb && a->mbs == b->mbs &&
           a->instr == b->instr && a->seq == b->seq && a->recompute == b->recompute &&
           a->grads_final == b->grads_final && a->forward_only == b->forward_only && a->stream == b->stream;
}

static void ev_text(const vs_pipe_hook_event* e, char* buf, size_t cap)
{
    snprintf(buf, cap, "#%lld %s u%d c%d mb%d/%d i%d rc%d final%d fwd%d", (long long)e->seq,
             vs_pipe_hook_point_name((vs_pipe_hook_point)e->point), e->unit, e->chunk, e->mb, e->mbs, e->instr,
             e->recompute, e->grads_final, e->forward_only);
}

/* got[0..ng) equals want, naming the first difference. */
static void same_seq(const char* what, const char* name, int st, const vs_pipe_hook_event* got, size_t ng,
                     const want* W)
{
    VT_CHECK(ng == W->n, "%s: stage %d, %s: %zu calls, the schedule's list gives %zu", name, st, what, ng, W->n);
    for (size_t j = 0; j < ng && j < W->n; j++)
        if (!same_event(&got[j], &W->ev[j])) {
            char a[160], b[160];
            ev_text(&got[j], a, sizeof a);
            ev_text(&W->ev[j], b, sizeof b);
            VT_CHECK(0, "%s: stage %d, %s: call %zu is %s, want %s", name, st, what, j, a, b);
            return;
        }
}

/* Each BEFORE followed at once by its AFTER; W points only where B and W split;
   grads_final once per unit with a gradient part, on microbatch M-1. */
static void shape_checks(const char* name, int st, const hlog* L, int split, int training)
{
    size_t nw = 0, nfinal = 0;
    for (size_t j = 0; j < L->n; j++) {
        const vs_pipe_hook_event* e = &L->ev[j];
        if (e->point == VS_PIPE_HOOK_WEIGHT_BEFORE) nw++;
        if (e->grads_final) {
            nfinal++;
            VT_CHECK(e->mb == e->mbs - 1, "%s: stage %d: grads_final at microbatch %d of %d", name, st, e->mb, e->mbs);
        }
        if (e->point % 2 == 1) { // a BEFORE
            const vs_pipe_hook_event* a = j + 1 < L->n ? &L->ev[j + 1] : NULL;
            VT_CHECK(a && a->point == e->point + 1 && a->unit == e->unit && a->mb == e->mb &&
                         a->recompute == e->recompute,
                     "%s: stage %d: call %zu (%s of unit %d) is not followed by its after", name, st, j,
                     vs_pipe_hook_point_name((vs_pipe_hook_point)e->point), e->unit);
        }
    }
    VT_CHECK(split ? nw > 0 : nw == 0, "%s: stage %d: %zu W calls (the kind %s B and W)", name, st, nw,
             split ? "splits" : "does not split");
    VT_CHECK(!training || nfinal > 0, "%s: stage %d: no grads_final", name, st);
}

/* ---- equality and order: one configuration ----------------------------------- */

typedef struct ojob {
    vs_pipe_kind kind;
    int P, M, recompute;
    char name[96];
} ojob;

static pm_inst* model(int recompute)
{
    pm_inst* E = pm_new(PM_A, VS_F32, PM_BK_BOTH);
    E->U[FULL_ONLY_UNIT].backward_input = NULL;
    E->U[FULL_ONLY_UNIT].backward_weight = NULL;
    for (int u = 0; recompute && u < E->nu; u += 2) E->U[u].recompute = 1;
    return E;
}

/* This rank's part of a P-stage pipeline for schedule kind (0: any): the PP mesh,
   the model (recomputed units: rc) and its uniform plan. NULL mesh on failure. */
static vs_mesh* setup(vs_world* w, int P, vs_pipe_kind kind, int rc, pm_inst** E, pm_inst** E1,
                      vs_pipe_plan* plan)
{
    vs_mesh* mesh = NULL;
    vs_mesh_desc md = {0};
    md.shape[0] = P;
    md.dim_names[0] = "PP";
    VT_OK(vs_mesh_init(w, &md, &mesh));
    *E = model(rc);
    if (E1) *E1 = model(rc); // a second copy (the run with hooks beside the one without)
    vs_pipe_split_desc sd = {0};
    sd.stages = P, sd.kind = VS_PIPE_SPLIT_UNIFORM, sd.schedule = (int)kind;
    VT_OK(vs_pipe_split((*E)->U, (*E)->nu, &sd, plan));
    return mesh;
}

static vs_pipe* make_pipe(vs_mesh* mesh, pm_inst* E, const vs_pipe_plan* plan, pm_data* dd, vs_pipe_unit_hook hook,
                          void* user)
{
    if (!mesh) return NULL;
    vs_pipe_desc pd;
    memset(&pd, 0, sizeof pd);
    pd.mesh = mesh, pd.units = E->U, pd.nunits = E->nu, pd.plan = plan, pd.data = pm_data_fn, pd.data_user = dd;
    pd.on_unit = hook, pd.unit_user = user;
    vs_pipe* pipe = NULL;
    VT_OK(vs_pipe_init(&pd, &pipe));
    return pipe;
}

/* The end of a rank function with two pipes (without and with hooks). */
static int teardown(vs_pipe_sched* s, vs_pipe* p0, vs_pipe* p1, vs_mesh* mesh, pm_inst* E0, pm_inst* E1)
{
    vs_pipe_sched_free(s);
    if (p1) vs_pipe_free(p1);
    if (p0) vs_pipe_free(p0);
    vs_mesh_free(mesh);
    pm_free(E0);
    pm_free(E1);
    return 0;
}

static void check_order(const char* name, const char* what, vs_pipe* pipe, const vs_pipe_sched* s, const want* W,
                        int st)
{
    size_t n = 0;
    VT_OK(vs_pipe_hook_order(pipe, s, NULL, 0, &n));
    vs_pipe_hook_event* ord = (vs_pipe_hook_event*)calloc(n + 1, sizeof *ord);
    size_t n2 = 0;
    VT_OK(vs_pipe_hook_order(pipe, s, ord, n, &n2));
    VT_CHECK(n2 == n, "%s: vs_pipe_hook_order counted %zu, then %zu", name, n, n2);
    char w2[64];
    snprintf(w2, sizeof w2, "vs_pipe_hook_order (%s)", what);
    same_seq(w2, name, st, ord, n2, W);
    free(ord);
}

static int order_rank(vs_world* w, void* arg)
{
    const ojob* J = (const ojob*)arg;
    pm_inst *E0, *E1; // without hooks, with them
    vs_pipe_plan plan;
    vs_mesh* mesh = setup(w, J->P, J->kind, J->recompute, &E0, &E1, &plan);
    pm_data dd = {PM_A, VS_F32, 0};
    hlog L;
    memset(&L, 0, sizeof L);
    vs_pipe* p0 = make_pipe(mesh, E0, &plan, &dd, NULL, NULL);
    vs_pipe* p1 = make_pipe(mesh, E1, &plan, &dd, rec_hook, &L);
    vs_pipe_sched *s = NULL, *fs = NULL;
    VT_OK(vs_pipe_generate(w, J->kind, J->P, 0, J->M, &s));
    if (s) VT_OK(vs_pipe_sched_forward(s, &fs));
    want W;
    memset(&W, 0, sizeof W);
    const int st = p1 ? vs_pipe_stage(p1) : -1;
    /* the single-device loop of the contract (pipe_models.h), for the loss */
    pm_inst* R = pm_new(PM_A, VS_F32, PM_BK_FULL);
    double ref = 0;
    VT_CHECK(pm_ref_run(R, J->M, 0, 0, &ref, NULL) == 0, "reference failed");
    pm_free(R);
    if (p0 && p1 && s && fs) {
        derive(s, &plan, E1->U, st, &W);
        check_order(J->name, "training", p1, s, &W, st); // before any run: learnable at a step's start
        for (int run = 0; run < 2; run++) {
            double l0 = -1, l1 = -2;
            pm_zero_grads(E0);
            pm_zero_grads(E1);
            L.n = 0;
            VT_OK(vs_pipe_run(p0, s, &l0));
            VT_OK(vs_pipe_run(p1, s, &l1));
            VT_CHECK(memcmp(&l0, &l1, sizeof l0) == 0, "%s: stage %d, run %d: loss %.17g with hooks, %.17g without",
                     J->name, st, run, l1, l0);
            VT_CHECK(memcmp(&ref, &l1, sizeof l0) == 0, "%s: stage %d, run %d: loss %.17g with hooks, one device %.17g",
                     J->name, st, run, l1, ref);
            for (int u = 0; u < E0->nu; u++)
                VT_CHECK(memcmp(E0->L[u].g, E1->L[u].g, (size_t)E0->L[u].npar * sizeof(float)) == 0,
                         "%s: stage %d, run %d: unit %d's gradients differ with hooks", J->name, st, run, u);
            for (int m = 0; m < J->M && plan.chunk_stage[plan.nchunks - 1] == st; m++) {
                double a = -1, b = -2;
                VT_OK(vs_pipe_mb_loss(p0, m, &a));
                VT_OK(vs_pipe_mb_loss(p1, m, &b));
                VT_CHECK(memcmp(&a, &b, sizeof a) == 0, "%s: microbatch %d's loss differs with hooks", J->name, m);
            }
            same_seq(run ? "the second run's calls" : "the calls", J->name, st, L.ev, L.n, &W);
            shape_checks(J->name, st, &L, split_kind(J->kind), 1);
        }
        /* an evaluation: the forward points only */
        derive(fs, &plan, E1->U, st, &W);
        check_order(J->name, "forward only", p1, fs, &W, st);
        double l0 = -1, l1 = -2;
        L.n = 0;
        VT_OK(vs_pipe_run(p0, fs, &l0));
        VT_OK(vs_pipe_run(p1, fs, &l1));
        VT_CHECK(memcmp(&l0, &l1, sizeof l0) == 0, "%s: stage %d, forward only: loss %.17g with hooks, %.17g without",
                 J->name, st, l1, l0);
        same_seq("the forward-only calls", J->name, st, L.ev, L.n, &W);
        shape_checks(J->name, st, &L, 0, 0);
        for (size_t j = 0; j < L.n; j++)
            VT_CHECK(L.ev[j].point <= VS_PIPE_HOOK_FORWARD_AFTER && L.ev[j].forward_only && !L.ev[j].recompute,
                     "%s: stage %d, forward only: call %zu is %s", J->name, st, j,
                     vs_pipe_hook_point_name((vs_pipe_hook_point)L.ev[j].point));
    }
    free(W.ev);
    free(L.ev);
    vs_pipe_sched_free(fs);
    return teardown(s, p0, p1, mesh, E0, E1);
}

/* rank_fn on P ranks for each M (M = 1 only with all_m) and with and without recompute */
static void sweep(vs_rank_fn rank_fn, const char* what, vs_pipe_kind kind, int P, int all_m)
{
    const int Ms[2] = {2 * P + 1, 1};
    for (int mi = 0; mi < 1 + all_m; mi++)
        for (int rc = 0; rc < 2; rc++) {
            ojob J;
            memset(&J, 0, sizeof J);
            J.kind = kind, J.P = P, J.M = Ms[mi], J.recompute = rc;
            snprintf(J.name, sizeof J.name, "%s%s P=%d M=%d%s", what, vs_pipe_kind_name(kind), P, J.M,
                     rc ? " recompute" : "");
            VT_OK(launch_t(P, 30, rank_fn, &J));
        }
}

/* ---- a ZeRO-3-like consumer: parameters live only while gathered ------------ */

/* What the DDP will do with the hooks, on one rank: a unit's parameters hold
   NaN unless gathered; the consumer gathers the first unit at the step's start
   (from vs_pipe_hook_order), at each BEFORE prefetches the next other unit of
   the order, at each AFTER releases the unit unless it comes next, and at
   grads_final takes the unit's gradients (as a reduce-scatter would) and
   poisons them. A hook called out of order, a part without its hooks or a
   grads_final too early gives NaN or a missing contribution: the losses and
   gradients then differ from the run without hooks. */
typedef struct z3 {
    pm_inst* E;
    float* master[PM_MAXU];
    float* taken[PM_MAXU]; // the gradients at grads_final
    int ntaken[PM_MAXU];
    int live[PM_MAXU], nlive, max_live;
    vs_pipe_hook_event* order;
    size_t n;
} z3;

static void z3_gather(z3* Z, int u)
{
    if (Z->live[u]) return;
    memcpy(Z->E->L[u].p, Z->master[u], (size_t)Z->E->L[u].npar * sizeof(float));
    Z->live[u] = 1;
    if (++Z->nlive > Z->max_live) Z->max_live = Z->nlive;
}

static void z3_release(z3* Z, int u)
{
    if (!Z->live[u]) return;
    for (int i = 0; i < Z->E->L[u].npar; i++) Z->E->L[u].p[i] = NAN;
    Z->live[u] = 0;
    Z->nlive--;
}

/* the unit of the first BEFORE after position seq whose unit is not `not` (-1: any), or -1 */
static int z3_next(const z3* Z, int64_t seq, int not)
{
    for (size_t j = (size_t)seq + 1; j < Z->n; j++)
        if (Z->order[j].point % 2 == 1 && Z->order[j].unit != not) return Z->order[j].unit;
    return -1;
}

static vs_result z3_hook(void* user, const vs_pipe_hook_event* e)
{
    z3* Z = (z3*)user;
    const int u = e->unit;
    if (e->point % 2 == 1) { // BEFORE: it must be here already (gathered at the start, or prefetched)
        if (!Z->live[u])
            return vs_set_error(VS_ERR_STATE, "unit %d at %s, call %lld: not gathered", u,
                                vs_pipe_hook_point_name((vs_pipe_hook_point)e->point), (long long)e->seq);
        int nx = z3_next(Z, e->seq, u);
        if (nx >= 0) z3_gather(Z, nx);
        return VS_OK;
    }
    if (e->grads_final) {
        pm_layer* L = &Z->E->L[u];
        memcpy(Z->taken[u], L->g, (size_t)L->npar * sizeof(float));
        for (int i = 0; i < L->npar; i++) L->g[i] = NAN;
        Z->ntaken[u]++;
    }
    if (z3_next(Z, e->seq, -1) != u) z3_release(Z, u);
    return VS_OK;
}

static int z3_rank(vs_world* w, void* arg)
{
    const ojob* J = (const ojob*)arg;
    pm_inst *E0, *E1;
    vs_pipe_plan plan;
    vs_mesh* mesh = setup(w, J->P, J->kind, J->recompute, &E0, &E1, &plan);
    pm_data dd = {PM_A, VS_F32, 0};
    z3 Z;
    memset(&Z, 0, sizeof Z);
    Z.E = E1;
    vs_pipe* p0 = make_pipe(mesh, E0, &plan, &dd, NULL, NULL);
    vs_pipe* p1 = make_pipe(mesh, E1, &plan, &dd, z3_hook, &Z);
    vs_pipe_sched* s = NULL;
    VT_OK(vs_pipe_generate(w, J->kind, J->P, 0, J->M, &s));
    const int st = p1 ? vs_pipe_stage(p1) : -1;
    if (p0 && p1 && s) {
        VT_OK(vs_pipe_hook_order(p1, s, NULL, 0, &Z.n));
        Z.order = (vs_pipe_hook_event*)calloc(Z.n + 1, sizeof *Z.order);
        VT_OK(vs_pipe_hook_order(p1, s, Z.order, Z.n, &Z.n));
        for (int u = 0; u < E1->nu; u++) {
            Z.master[u] = (float*)malloc(((size_t)E1->L[u].npar + 1) * sizeof(float));
            Z.taken[u] = (float*)calloc((size_t)E1->L[u].npar + 1, sizeof(float));
            memcpy(Z.master[u], E1->L[u].p, (size_t)E1->L[u].npar * sizeof(float));
            Z.live[u] = 1, Z.nlive++;
            z3_release(&Z, u); // at rest: nothing gathered
        }
        for (int run = 0; run < 2; run++) {
            double l0 = -1, l1 = -2;
            pm_zero_grads(E0);
            pm_zero_grads(E1);
            memset(Z.ntaken, 0, sizeof Z.ntaken);
            if (Z.n) z3_gather(&Z, Z.order[0].unit); // the step's first unit, known ahead
            VT_OK(vs_pipe_run(p0, s, &l0));
            VT_OK(vs_pipe_run(p1, s, &l1));
            VT_CHECK(memcmp(&l0, &l1, sizeof l0) == 0, "%s: stage %d, run %d: loss %.17g gathering by hooks, %.17g",
                     J->name, st, run, l1, l0);
            VT_CHECK(Z.nlive == 0 && Z.max_live <= 2, "%s: stage %d: %d units gathered after the run, %d at most",
                     J->name, st, Z.nlive, Z.max_live);
            for (int k = 0; k < plan.nchunks; k++)
                for (int u = plan.first_unit[k]; u < plan.first_unit[k + 1] && plan.chunk_stage[k] == st; u++) {
                    VT_CHECK(Z.ntaken[u] == 1, "%s: stage %d: unit %d's gradients taken %d times", J->name, st, u,
                             Z.ntaken[u]);
                    VT_CHECK(memcmp(Z.taken[u], E0->L[u].g, (size_t)E0->L[u].npar * sizeof(float)) == 0,
                             "%s: stage %d, run %d: unit %d's gradients at grads_final differ", J->name, st, run, u);
                }
        }
    }
    for (int u = 0; u < E1->nu; u++) free(Z.master[u]), free(Z.taken[u]);
    free(Z.order);
    return teardown(s, p0, p1, mesh, E0, E1);
}

/* ---- a failing hook ------------------------------------------------------------ */

typedef struct fjob {
    vs_pipe_kind kind;
    int P, M, fail_stage, fail_point, fail_mb, fail_unit;
    double dt[8];
    int rc[8];
    char msg[8][1024];
} fjob;

static int fail_rank(vs_world* w, void* arg)
{
    fjob* J = (fjob*)arg;
    pm_inst* E;
    vs_pipe_plan plan;
    vs_mesh* mesh = setup(w, J->P, J->kind, 0, &E, NULL, &plan);
    pm_data dd = {PM_A, VS_F32, 0};
    hlog L;
    memset(&L, 0, sizeof L);
    const int rank = vs_world_rank(w);
    if (rank == J->fail_stage) L.fail_point = J->fail_point, L.fail_mb = J->fail_mb, L.fail_unit = J->fail_unit;
    vs_pipe* pipe = make_pipe(mesh, E, &plan, &dd, rec_hook, &L);
    vs_pipe_sched* s = NULL;
    VT_OK(vs_pipe_generate(w, J->kind, J->P, 0, J->M, &s));
    if (pipe && s) {
        VT_CHECK(vs_pipe_stage(pipe) == rank, "stage %d on world rank %d", vs_pipe_stage(pipe), rank);
        const double t0 = now_s();
        vs_clear_error();
        const vs_result r = vs_pipe_run(pipe, s, NULL); // (the loss: none, the run fails)
        snprintf(J->msg[rank], sizeof J->msg[rank], "%s", vs_last_error());
        J->dt[rank] = now_s() - t0, J->rc[rank] = r;
    }
    free(L.ev);
    vs_pipe_sched_free(s);
    if (pipe) vs_pipe_free(pipe);
    vs_mesh_free(mesh);
    pm_free(E);
    return 0;
}

/* The hook of stage `stage` fails at `point` of microbatch mb of the first (last:
   1) unit of its first chunk. */
static void case_fail(vs_pipe_kind kind, int P, int stage, int point, int mb, int last)
{
    pm_inst* E = model(0);
    vs_pipe_plan plan;
    vs_pipe_split_desc sd = {0};
    sd.stages = P, sd.kind = VS_PIPE_SPLIT_UNIFORM, sd.schedule = (int)kind;
    VT_OK(vs_pipe_split(E->U, E->nu, &sd, &plan));
    int k = 0;
    while (k < plan.nchunks && plan.chunk_stage[k] != stage) k++;
    const int unit = last ? plan.first_unit[k + 1] - 1 : plan.first_unit[k];
    char unit_name[VS_PIPE_NAME_MAX];
    snprintf(unit_name, sizeof unit_name, "%s", E->U[unit].name);
    pm_free(E);
    fjob J;
    memset(&J, 0, sizeof J);
    J.kind = kind, J.P = P, J.M = 2 * P, J.fail_stage = stage, J.fail_point = point, J.fail_mb = mb, J.fail_unit = unit;
    for (int i = 0; i < P; i++) J.rc[i] = VS_OK;
    const double timeout = 20.0;
    double t0 = now_s();
    vs_result r = launch_t(P, timeout, fail_rank, &J);
    double total = now_s() - t0;
    VT_CHECK(r == VS_ERR_INVALID, "the job gave %s, want the hook's VS_ERR_INVALID", vs_result_string(r));
    VT_CHECK(total < timeout / 2, "the job took %.1f s (deadline %.0f s)", total, timeout);
    if (getenv("PT_VERBOSE"))
        for (int st = 0; st < P; st++) printf("    stage %d: %.2f s: %s\n", st, J.dt[st], J.msg[st]);
    for (int st = 0; st < P; st++) {
        VT_CHECK(J.rc[st] != VS_OK, "stage %d: vs_pipe_run returned VS_OK", st);
        VT_CHECK(J.dt[st] < timeout / 4, "stage %d: vs_pipe_run returned after %.1f s", st, J.dt[st]);
        VT_CHECK(strstr(J.msg[st], "injected hook failure") != NULL,
                 "stage %d: \"%s\" does not carry the hook's message", st, J.msg[st]);
    }
    char want[160];
    snprintf(want, sizeof want, "unit hook (vs_pipe_desc.on_unit) at %s of unit \"%s\", microbatch %d",
             vs_pipe_hook_point_name((vs_pipe_hook_point)point), unit_name, mb);
    VT_CHECK(strstr(J.msg[stage], want) && strstr(J.msg[stage], "vs_pipe_run: stage"),
             "stage %d: \"%s\" does not name the hook (\"%s\")", stage, J.msg[stage], want);
}

/* ---- bad input ----------------------------------------------------------------- */

static int bad_rank(vs_world* w, void* arg)
{
    (void)arg;
    pm_inst* E;
    vs_pipe_plan plan;
    vs_mesh* mesh = setup(w, 2, VS_PIPE_DEFAULT, 0, &E, NULL, &plan);
    pm_data dd = {PM_A, VS_F32, 0};
    vs_pipe* pipe = make_pipe(mesh, E, &plan, &dd, NULL, NULL);
    vs_pipe_sched *s = NULL, *other = NULL;
    VT_OK(vs_pipe_generate(w, VS_PIPE_1F1B, 2, 0, 3, &s));
    VT_OK(vs_pipe_generate(w, VS_PIPE_1F1B, 4, 0, 3, &other));
    vs_pipe_hook_event ev[4];
    size_t n = 7;
    VT_CHECK(vs_pipe_hook_order(pipe, s, NULL, 4, &n) == VS_ERR_NULL && strstr(vs_last_error(), "out"), "%s",
             vs_last_error());
    VT_CHECK(vs_pipe_hook_order(pipe, NULL, ev, 4, &n) == VS_ERR_NULL && strstr(vs_last_error(), "schedule"), "%s",
             vs_last_error());
    VT_CHECK(vs_pipe_hook_order(pipe, s, ev, 4, NULL) == VS_ERR_NULL, "%s", vs_last_error());
    VT_CHECK(vs_pipe_hook_order(pipe, other, ev, 4, &n) == VS_ERR_MISMATCH && n == 0 &&
                 strstr(vs_last_error(), "vs_pipe_hook_order") && strstr(vs_last_error(), "4 stages"),
             "%s (n %zu)", vs_last_error(), n);
    /* a short array: the count still, the first cap entries filled */
    VT_OK(vs_pipe_hook_order(pipe, s, ev, 4, &n));
    VT_CHECK(n > 4 && ev[0].seq == 0 && ev[3].seq == 3 && ev[0].point == VS_PIPE_HOOK_FORWARD_BEFORE, "n %zu", n);
    VT_CHECK(!strcmp(vs_pipe_hook_point_name(VS_PIPE_HOOK_WEIGHT_AFTER), "weight_after") &&
                 !strcmp(vs_pipe_hook_point_name(VS_PIPE_HOOK_NONE), "invalid") &&
                 !strcmp(vs_pipe_hook_point_name(VS_PIPE_HOOK_POINT_COUNT), "invalid"),
             "point names");
    /* the resolved desc keeps the hook */
    vs_pipe_desc q;
    VT_OK(vs_pipe_query_desc(pipe, &q));
    VT_CHECK(q.on_unit == NULL && q.unit_user == NULL, "query_desc invented a hook");
    vs_pipe_sched_free(other);
    vs_pipe_sched_free(s);
    if (pipe) vs_pipe_free(pipe);
    vs_mesh_free(mesh);
    pm_free(E);
    return 0;
}

int main(void)
{
    for (int P = 2; P <= 4; P += 2)
        for (int ki = 0; ki < NKINDS; ki++) {
            char name[64];
            snprintf(name, sizeof name, "order P=%d %s", P, vs_pipe_kind_name(kinds[ki]));
            VT_CASE(name, sweep(order_rank, "", kinds[ki], P, 1));
        }
    for (int P = 2; P <= 4; P += 2)
        for (int ki = 0; ki < NKINDS; ki++) {
            char name[64];
            snprintf(name, sizeof name, "gather by hooks P=%d %s", P, vs_pipe_kind_name(kinds[ki]));
            VT_CASE(name, sweep(z3_rank, "gather ", kinds[ki], P, 0));
        }
    /* 1F1B on 4 stages: stage 2's first unit in backward order, before its backward in microbatch 1 */
    VT_CASE("fail backward_before P=4 1f1b", case_fail(VS_PIPE_1F1B, 4, 2, VS_PIPE_HOOK_BACKWARD_BEFORE, 1, 1));
    /* ZB-H1: stage 0's first unit after its W of the last microbatch, near the run's end */
    VT_CASE("fail weight_after P=2 zbh1", case_fail(VS_PIPE_ZBH1, 2, 0, VS_PIPE_HOOK_WEIGHT_AFTER, 3, 0));
    /* ZB-V on 2 stages: after a forward on stage 1 */
    VT_CASE("fail forward_after P=2 zbv", case_fail(VS_PIPE_ZBV, 2, 1, VS_PIPE_HOOK_FORWARD_AFTER, 0, 0));
    VT_CASE("bad input", VT_OK(launch_t(2, 30, bad_rank, NULL)));
    return vt_summary();
}
