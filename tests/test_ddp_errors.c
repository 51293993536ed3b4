/* test_ddp_errors.c - vescale_ddp.h under misuse and bad numbers (issue 8, the
   DDP points), threads transport (vs_launch).

   Each case is a regression test: it failed (or crashed) against vescale_ddp.h as
   it was before the fix it names.
   - sizes (point 10): a parameter whose element count or byte size overflows
     64 bits is refused at vs_ddp_add_param, naming it and its shape (it used to
     give 65-byte buckets and a heap overflow at the first sync).
   - schedules (points 10, 13): vs_lr_at with extreme counts stays finite and
     right; bad schedules (unknown kind, negative counts, total < warmup) give NaN
     and vs_lr_check names the field; vs_ddp_step refuses a NaN/inf/negative lr.
   - agreement (point 11): 4 ranks where one differs in shape, name, dtype,
     placement, an extra parameter, no parameter at all, or its bucket size: every
     rank gets VS_ERR_MISMATCH naming the parameter, the field and the world rank,
     within seconds (no rank hangs). Pipeline stages may differ.
   - numbers (point 12): optimizer hyper-parameters checked at vs_ddp_init;
     clipping with a NaN or inf gradient, with and without error_if_nonfinite
     (parameters bit-identical, step skipped and counted); beta1 = 0 AdamW against
     this file's own AdamW; a group with lr_scale = 0 stays bit-identical.
   - lifetimes and states (point 8): vs_mesh_free with a live DDP is VS_ERR_STATE
     (it used to free the mesh under the DDP's in-flight all-gathers), the other
     order works; vs_ddp_free with collectives in flight; calls out of order. */
#define VESCALE_IMPLEMENTATION
#include "vescale_ddp.h"
#include "tests/vs_test.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------------- */
/* Helpers                                                                   */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Runs fn on n thread ranks; a hang fails the case after 20 s instead of 300 s.
   Returns the wall time. */
static double launch(int n, vs_rank_fn fn, void* arg)
{
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = n;
    d.transport = VS_TRANSPORT_THREADS;
    d.timeout_s = 20;
    double t0 = now_s();
    VT_OK(vs_launch_ex(&d, fn, arg));
    return now_s() - t0;
}


static vs_ddp_param_desc pdesc(const char* name, vs_dtype dt, int64_t n)
{
    vs_ddp_param_desc pd;
    memset(&pd, 0, sizeof pd);
    pd.name = name;
    pd.dtype = dt;
    pd.ndim = 1;
    pd.shape[0] = n;
    return pd;
}

static float hashf(uint32_t a, uint32_t b)
{
    uint32_t h = a * 0x9E3779B1u ^ (b + 0x7F4A7C15u) * 0x85EBCA77u;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    return (float)((double)(h >> 8) / 16777216.0 * 2.0 - 1.0); /* [-1, 1) */
}

enum { N = 48, MAXR = 4 };

/* The gradient rank r adds to parameter p at step st. */
static float grad_of(int r, int p, int st, int e) { return hashf((uint32_t)(r * 1000 + p * 100 + st), (uint32_t)e); }
static float init_of(int p, int e) { return hashf((uint32_t)(7777 + p), (uint32_t)e); }

/* Registers np f32 parameters "p0".. of N elements with init_of values. */
static vs_ddp* make_ddp(vs_mesh* mesh, const vs_ddp_desc* base, int np, const int* groups)
{
    vs_ddp_desc dd = *base;
    dd.mesh = mesh;
    vs_ddp* d = NULL;
    VT_OK(vs_ddp_init(&dd, &d));
    if (!d) return NULL;
    for (int p = 0; p < np; p++) {
        char name[16];
        float init[N];
        snprintf(name, sizeof name, "p%d", p);
        for (int e = 0; e < N; e++) init[e] = init_of(p, e);
        vs_ddp_param_desc pd = pdesc(name, VS_F32, N);
        pd.data = init;
        pd.group = groups ? groups[p] : 0;
        VT_OK(vs_ddp_add_param(d, &pd, NULL));
    }
    VT_OK(vs_ddp_finalize(d));
    return d;
}

/* One backward pass: rank r's gradients of step st, plus `poison` (NaN, inf)
   in element 5 of parameter 0 when poison != 0 and r == poison_rank. */
static void backward(vs_ddp* d, int np, int r, int st, float poison, int poison_rank)
{
    VT_OK(vs_ddp_zero_grad(d));
    for (int p = np - 1; p >= 0; p--) {
        float* g = (float*)vs_ddp_grad(d, p);
        VT_CHECK(g != NULL, "vs_ddp_grad(%d): %s", p, vs_last_error());
        if (!g) return;
        for (int e = 0; e < N; e++) g[e] += grad_of(r, p, st, e);
        if (poison != 0 && r == poison_rank && p == 0) g[5] = poison;
        VT_OK(vs_ddp_grad_ready(d, p));
    }
    VT_OK(vs_ddp_finish_grad_sync(d));
}

static void read_params(vs_ddp* d, int np, float out[][N])
{
    for (int p = 0; p < np; p++) {
        const float* v = (const float*)vs_ddp_param(d, p);
        VT_CHECK(v != NULL, "vs_ddp_param(%d): %s", p, vs_last_error());
        if (v) memcpy(out[p], v, sizeof(float) * N);
    }
}

/* ------------------------------------------------------------------------- */
/* Point 10: sizes                                                           */

static int rank_sizes(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh* mesh = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {1}}, &mesh));
    vs_ddp* d = NULL;
    VT_OK(vs_ddp_init(&(vs_ddp_desc){.mesh = mesh}, &d));
    if (!d) return 1;
    /* 2^62 + 16 f32: (2^62+16) * 4 wraps to 64 bytes */
    vs_ddp_param_desc pd = pdesc("huge.weight", VS_F32, ((int64_t)1 << 62) + 16);
    VT_EXPECT_ERR(vs_ddp_add_param(d, &pd, NULL), VS_ERR_INVALID, "huge.weight", "[4611686018427387920]");
    /* the product of the dims overflows, each dim alone is fine */
    pd = pdesc("wide.weight", VS_BF16, (int64_t)1 << 32);
    pd.ndim = 2;
    pd.shape[1] = (int64_t)1 << 32;
    VT_EXPECT_ERR(vs_ddp_add_param(d, &pd, NULL), VS_ERR_INVALID, "wide.weight", "[4294967296, 4294967296]");
    pd = pdesc("max.weight", VS_F32, INT64_MAX);
    VT_EXPECT_ERR(vs_ddp_add_param(d, &pd, NULL), VS_ERR_INVALID, "max.weight", "overflows");
    VT_CHECK(vs_ddp_num_params(d) == 0, "refused parameters were registered (%d)", vs_ddp_num_params(d));
    /* a normal one after them, and a run that works */
    pd = pdesc("ok.weight", VS_F32, N);
    VT_OK(vs_ddp_add_param(d, &pd, NULL));
    VT_OK(vs_ddp_finalize(d));
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Points 10 and 13: schedules                                               */

static void expect_nan(int line, const char* what, double v, const char* n1)
{
    if (!isnan(v)) vt_fail_msg(__FILE__, line, what, "gave %.17g, want NaN", v);
    else if (n1 && !vt_contains(vs_last_error(), n1))
        vt_fail_msg(__FILE__, line, what, "message \"%s\" does not name '%s'", vs_last_error(), n1);
}
#define EXPECT_NAN(expr, n1)                                                            \
    do {                                                                                \
        vs_clear_error();                                                               \
        expect_nan(__LINE__, #expr, (expr), (n1));                                      \
    } while (0)

static void case_lr(void)
{
    const double PI = 3.14159265358979323846;
    vs_lr_schedule s;
    /* extreme but valid counts: finite, and the formula's values */
    memset(&s, 0, sizeof s);
    s.kind = VS_LR_COSINE;
    s.lr = 1e-3;
    s.min_lr = 1e-5;
    s.warmup_steps = 10;
    s.total_steps = INT64_MAX;
    VT_OK(vs_lr_check(&s));
    double v = vs_lr_at(&s, INT64_MAX);
    VT_CHECK(fabs(v - 1e-5) <= 1e-15, "cosine total INT64_MAX at step INT64_MAX: %.17g, want min_lr", v);
    v = vs_lr_at(&s, 10);
    VT_CHECK(fabs(v - 1e-3) <= 1e-15, "cosine total INT64_MAX at step 10: %.17g, want lr", v);
    double half = (double)(INT64_MAX / 2);
    v = vs_lr_at(&s, INT64_MAX / 2);
    double f = (half - 10.0) / ((double)INT64_MAX - 10.0);
    double want = 1e-5 + 0.5 * (1e-3 - 1e-5) * (1.0 + cos(PI * f));
    VT_CHECK(fabs(v - want) <= 1e-12, "cosine midpoint: %.17g, want %.17g", v, want);
    s.warmup_steps = INT64_MAX; /* warmup all the way */
    s.kind = VS_LR_LINEAR;
    v = vs_lr_at(&s, INT64_MAX - 1);
    VT_CHECK(fabs(v - 1e-3) <= 1e-15, "warmup INT64_MAX at its last step: %.17g, want lr", v);
    v = vs_lr_at(&s, INT64_MAX);
    VT_CHECK(fabs(v - 1e-5) <= 1e-15, "linear, warmup = total = INT64_MAX, step INT64_MAX: %.17g, want min_lr", v);
    memset(&s, 0, sizeof s);
    s.kind = VS_LR_STEP;
    s.lr = 0.4;
    s.gamma = 0.5;
    s.step_size = 1;
    v = vs_lr_at(&s, INT64_MAX);
    VT_CHECK(v == 0.0, "step decay over INT64_MAX halvings: %.17g, want 0", v);
    s.step_size = INT64_MAX;
    v = vs_lr_at(&s, INT64_MAX - 1);
    VT_CHECK(v == 0.4, "step_size INT64_MAX: %.17g, want 0.4", v);

    /* bad schedules: NaN from vs_lr_at, an error naming the field from vs_lr_check */
    memset(&s, 0, sizeof s);
    s.kind = VS_LR_COSINE;
    s.lr = 1e-3;
    s.warmup_steps = 1;
    s.total_steps = INT64_MIN; /* total - warmup overflowed */
    EXPECT_NAN(vs_lr_at(&s, 5), "total_steps");
    VT_EXPECT_ERR(vs_lr_check(&s), VS_ERR_INVALID, "total_steps", "-9223372036854775808");
    s.total_steps = 5;
    s.warmup_steps = 10; /* total counts the warmup */
    VT_EXPECT_ERR(vs_lr_check(&s), VS_ERR_INVALID, "total_steps 5", "warmup_steps 10");
    s.warmup_steps = INT64_MIN;
    s.total_steps = INT64_MAX;
    EXPECT_NAN(vs_lr_at(&s, INT64_MAX), "warmup_steps");
    s.warmup_steps = 0;
    s.total_steps = 0; /* a cosine with no length */
    VT_EXPECT_ERR(vs_lr_check(&s), VS_ERR_INVALID, "total_steps 0", NULL);
    s.total_steps = 100;
    VT_OK(vs_lr_check(&s));
    EXPECT_NAN(vs_lr_at(&s, -1), "step -1");
    s.kind = (vs_lr_kind)42;
    EXPECT_NAN(vs_lr_at(&s, 3), "kind 42");
    VT_EXPECT_ERR(vs_lr_check(&s), VS_ERR_INVALID, "unknown schedule kind 42", NULL);
    s.kind = (vs_lr_kind)-1;
    VT_EXPECT_ERR(vs_lr_check(&s), VS_ERR_INVALID, "kind -1", NULL);
    s.kind = VS_LR_CONSTANT;
    s.lr = NAN;
    EXPECT_NAN(vs_lr_at(&s, 0), "lr");
    s.lr = INFINITY;
    VT_EXPECT_ERR(vs_lr_check(&s), VS_ERR_INVALID, "lr inf", NULL);
    s.lr = -1e-3;
    VT_EXPECT_ERR(vs_lr_check(&s), VS_ERR_INVALID, "lr -0.001", NULL);
    s.lr = 1e-3;
    s.min_lr = NAN;
    VT_EXPECT_ERR(vs_lr_check(&s), VS_ERR_INVALID, "min_lr", NULL);
    memset(&s, 0, sizeof s);
    s.kind = VS_LR_STEP;
    s.lr = 1;
    s.step_size = -3;
    VT_EXPECT_ERR(vs_lr_check(&s), VS_ERR_INVALID, "step_size -3", NULL);
    s.step_size = 3;
    s.gamma = NAN;
    VT_EXPECT_ERR(vs_lr_check(&s), VS_ERR_INVALID, "gamma", NULL);
    s.gamma = -0.5;
    EXPECT_NAN(vs_lr_at(&s, 7), "gamma -0.5");
    VT_EXPECT_ERR(vs_lr_check(NULL), VS_ERR_NULL, "NULL", NULL);
    EXPECT_NAN(vs_lr_at(NULL, 0), "NULL");
}

/* ------------------------------------------------------------------------- */
/* Point 11: ranks agree at vs_ddp_finalize                                  */

enum { AG_SHAPE, AG_NAME, AG_DTYPE, AG_EXTRA, AG_NONE, AG_PLACE, AG_BUCKET, AG_PP_OK, AG_N };
static const char* const ag_label[AG_N] = {"rank 2 has another shape",
                                           "rank 3 has another name",
                                           "rank 0 has another dtype",
                                           "rank 1 has an extra parameter",
                                           "rank 3 has no parameter",
                                           "DPxTP: world rank 1 has another placement",
                                           "rank 2 has another bucket_bytes",
                                           "PPxDP: stages with different parameters agree"};

typedef struct ag_case {
    int kind;
    vs_result res[MAXR];
    char msg[MAXR][1024];
} ag_case;

static int rank_agree(vs_world* w, void* arg)
{
    ag_case* c = (ag_case*)arg;
    int r = vs_world_rank(w);
    vs_mesh* mesh = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = 4;
    if (c->kind == AG_PLACE) md.shape[0] = 2, md.shape[1] = 2; /* (DP, TP) */
    if (c->kind == AG_PP_OK) {
        md.shape[0] = 2, md.shape[1] = 2;
        md.dim_names[0] = "PP", md.dim_names[1] = "DP";
    }
    VT_OK(vs_mesh_init(w, &md, &mesh));
    if (!mesh) return 1;
    vs_ddp* d = NULL;
    int64_t bb = c->kind == AG_BUCKET && r == 2 ? 512 : 256;
    VT_OK(vs_ddp_init(&(vs_ddp_desc){.mesh = mesh, .zero = VS_ZERO_1, .bucket_bytes = bb}, &d));
    if (!d) return 1;
    const char* names[4] = {"embed.weight", "h0.attn.weight", "h0.mlp.weight", "head.bias"};
    if (c->kind == AG_NAME && r == 3) names[2] = "h0.mlp.wieght";
    if (c->kind == AG_PP_OK && vs_mesh_coord_along(mesh, "PP") == 1) names[0] = "stage1.weight";
    int np = c->kind == AG_NONE && r == 3 ? 0 : 4;
    for (int p = 0; p < np; p++) {
        vs_ddp_param_desc pd = pdesc(names[p], VS_F32, 32);
        if (p == 1) pd.ndim = 2, pd.shape[0] = 4, pd.shape[1] = 8;
        if (c->kind == AG_SHAPE && r == 2 && p == 1) pd.shape[1] = 9;
        if (c->kind == AG_DTYPE && r == 0 && p == 3) pd.dtype = VS_BF16;
        if (c->kind == AG_PLACE && p == 1) pd.placements[1] = r == 1 ? vs_shard(1) : vs_shard(0);
        VT_OK(vs_ddp_add_param(d, &pd, NULL));
    }
    if (c->kind == AG_EXTRA && r == 1) {
        vs_ddp_param_desc pd = pdesc("extra.bias", VS_F32, 8);
        VT_OK(vs_ddp_add_param(d, &pd, NULL));
    }
    vs_clear_error();
    c->res[r] = vs_ddp_finalize(d);
    snprintf(c->msg[r], sizeof c->msg[r], "%s", vs_last_error());
    if (c->res[r] == VS_OK) { /* usable: one step */
        for (int p = np - 1; p >= 0; p--) {
            VT_CHECK(vs_ddp_grad(d, p) != NULL, "grad %d: %s", p, vs_last_error());
            VT_OK(vs_ddp_grad_ready(d, p));
        }
        VT_OK(vs_ddp_finish_grad_sync(d));
        VT_OK(vs_ddp_step(d, 0.1));
    }
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

static void case_agree(int kind)
{
    static ag_case c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    double t = launch(4, rank_agree, &c);
    VT_CHECK(t < 10, "%s: took %.1f s (a rank waited for a timeout)", ag_label[kind], t);
    /* what every rank's message must name: parameter, field, the odd world rank */
    const char* want[AG_N][3] = {
        {"parameter 1 ('h0.attn.weight')", "global shape differs", "world rank 2 has 'h0.attn.weight' f32 [4, 9]"},
        {"parameter 2 ('h0.mlp.weight')", "name differs", "world rank 3 has 'h0.mlp.wieght'"},
        {"parameter 3 ('head.bias')", "dtype differs", "world rank 1 has 'head.bias' f32"},
        {"parameter 4 ('extra.bias')", "parameter count differs", "world rank 1 has 'extra.bias' f32 [8]"},
        {"parameter 0 ('embed.weight')", "parameter count differs", "world rank 3 has no such parameter"},
        {"parameter 1 ('h0.attn.weight')", "placements differ", "world rank 1 has 'h0.attn.weight' f32 [4, 8] [Replicate, Shard(1)]"},
        {"DDP settings", "bucket_bytes 256", "world rank 2 has 1, 512"},
        {NULL, NULL, NULL}};
    for (int r = 0; r < 4; r++) {
        if (kind == AG_PP_OK) {
            VT_CHECK(c.res[r] == VS_OK, "%s: rank %d: %s: %s", ag_label[kind], r, vs_result_string(c.res[r]), c.msg[r]);
            continue;
        }
        VT_CHECK(c.res[r] == VS_ERR_MISMATCH, "%s: rank %d got %s (%s), want VS_ERR_MISMATCH", ag_label[kind], r,
                 vs_result_string(c.res[r]), c.msg[r]);
        for (int k = 0; k < 3; k++)
            VT_CHECK(vt_contains(c.msg[r], want[kind][k]), "%s: rank %d: message \"%s\" does not say \"%s\"",
                     ag_label[kind], r, c.msg[r], want[kind][k]);
        VT_CHECK(!strcmp(c.msg[r], c.msg[0]), "%s: ranks 0 and %d say different things:\n  %s\n  %s", ag_label[kind], r,
                 c.msg[0], c.msg[r]);
    }
    printf("    4 ranks, every rank %s in %.3f s\n", kind == AG_PP_OK ? "VS_OK" : "VS_ERR_MISMATCH", t);
    if (kind == AG_SHAPE) printf("    e.g. %s\n", c.msg[0]);
}

/* ------------------------------------------------------------------------- */
/* Point 12: optimizer numbers, lr and max_norm                              */

static int rank_numbers(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh* mesh = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {2}}, &mesh));
    if (!mesh) return 1;
    vs_ddp* d = (vs_ddp*)&mesh;
#define BAD_INIT(optim_init, n1, n2)                                                                         \
    do {                                                                                                     \
        d = (vs_ddp*)&mesh;                                                                                  \
        VT_EXPECT_ERR(vs_ddp_init(&(vs_ddp_desc){.mesh = mesh, .optim = optim_init}, &d), VS_ERR_INVALID, n1, n2); \
        VT_CHECK(d == NULL, "a refused vs_ddp_init left *out set");                                          \
    } while (0)
    BAD_INIT(((vs_optim_desc){.beta1 = 1.0}), "beta1", "[0, 1)");
    BAD_INIT(((vs_optim_desc){.beta1 = -0.1}), "beta1 -0.1", NULL);
    BAD_INIT(((vs_optim_desc){.beta1 = NAN}), "beta1 nan", NULL);
    BAD_INIT(((vs_optim_desc){.beta2 = 1.5}), "beta2 1.5", NULL);
    BAD_INIT(((vs_optim_desc){.beta2 = 0, .beta2_set = 1, .eps = -1e-8}), "eps -1e-08", NULL);
    BAD_INIT(((vs_optim_desc){.eps = INFINITY}), "eps inf", NULL);
    BAD_INIT(((vs_optim_desc){.weight_decay = NAN}), "weight_decay nan", NULL);
    BAD_INIT(((vs_optim_desc){.weight_decay = -0.1}), "weight_decay -0.1", NULL);
    BAD_INIT(((vs_optim_desc){.kind = VS_OPTIM_SGD, .momentum = -0.9}), "momentum -0.9", NULL);
    BAD_INIT(((vs_optim_desc){.kind = VS_OPTIM_SGD, .momentum = INFINITY}), "momentum inf", NULL);
    BAD_INIT(((vs_optim_desc){.kind = VS_OPTIM_SGD, .nesterov = 1}), "nesterov", "momentum > 0");
    BAD_INIT(((vs_optim_desc){.ngroups = 2, .groups = {{0}, {.lr_scale = -1}}}), "groups[1].lr_scale -1", NULL);
    BAD_INIT(((vs_optim_desc){.ngroups = 3, .groups = {{0}, {0}, {.weight_decay = INFINITY}}}),
             "groups[2].weight_decay inf", NULL);
    /* and what is fine: real zeros with their flags, SGD ignoring AdamW's fields */
    d = NULL;
    VT_OK(vs_ddp_init(&(vs_ddp_desc){.mesh = mesh,
                                     .optim = {.beta1 = 0, .beta1_set = 1, .beta2 = 0, .beta2_set = 1, .eps = 0,
                                               .eps_set = 1}},
                      &d));
    VT_OK(vs_ddp_free(d));
    d = NULL;
    VT_OK(vs_ddp_init(&(vs_ddp_desc){.mesh = mesh, .optim = {.kind = VS_OPTIM_SGD, .beta1 = 7, .momentum = 0.9,
                                                            .nesterov = 1}},
                      &d));
    VT_OK(vs_ddp_free(d));

    /* lr at the step, max_norm at the clip: refused, nothing changed, then fine */
    int r = vs_world_rank(w);
    d = make_ddp(mesh, &(vs_ddp_desc){.zero = VS_ZERO_1, .bucket_bytes = 128}, 2, NULL);
    if (!d) return 1;
    float before[2][N], after[2][N];
    read_params(d, 2, before);
    backward(d, 2, r, 0, 0, 0);
    VT_EXPECT_ERR(vs_ddp_clip_grad_norm(d, NAN, NULL), VS_ERR_INVALID, "max_norm nan", NULL);
    VT_EXPECT_ERR(vs_ddp_clip_grad_norm(d, INFINITY, NULL), VS_ERR_INVALID, "max_norm inf", NULL);
    VT_EXPECT_ERR(vs_ddp_clip_grad_norm_ex(d, NULL, NULL), VS_ERR_NULL, "clip", NULL);
    VT_EXPECT_ERR(vs_ddp_step(d, NAN), VS_ERR_INVALID, "lr nan", NULL);
    VT_EXPECT_ERR(vs_ddp_step(d, INFINITY), VS_ERR_INVALID, "lr inf", NULL);
    VT_EXPECT_ERR(vs_ddp_step(d, -0.5), VS_ERR_INVALID, "lr -0.5", NULL);
    vs_lr_schedule bad = {.kind = (vs_lr_kind)9, .lr = 0.1};
    VT_EXPECT_ERR(vs_ddp_step(d, vs_lr_at(&bad, 0)), VS_ERR_INVALID, "lr nan", NULL);
    read_params(d, 2, after);
    VT_CHECK(!memcmp(before, after, sizeof before), "a refused step changed the parameters");
    VT_CHECK(vs_ddp_step_count(d) == 0, "a refused step counted");
    double norm = -1;
    VT_OK(vs_ddp_clip_grad_norm(d, 1e9, &norm));
    VT_CHECK(norm > 0 && isfinite(norm), "norm %g", norm);
    VT_OK(vs_ddp_step(d, 0.01));
    VT_CHECK(vs_ddp_step_count(d) == 1, "step count %lld", (long long)vs_ddp_step_count(d));
    read_params(d, 2, after);
    VT_CHECK(memcmp(before, after, sizeof before) != 0, "the step after the refused ones changed nothing");
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    return 0;
#undef BAD_INIT
}

/* Clipping with a non-finite gradient on one rank. */
typedef struct clip_case {
    int error_if_nonfinite;
    float poison;
    vs_zero_stage zero;
    int named[MAXR]; /* the rank's message named p0 (the rank that owns the element after the reduction does) */
} clip_case;

static int rank_clip(vs_world* w, void* arg)
{
    clip_case* c = (clip_case*)arg;
    int r = vs_world_rank(w);
    vs_mesh* mesh = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {2}}, &mesh));
    if (!mesh) return 1;
    vs_ddp* d = make_ddp(mesh, &(vs_ddp_desc){.zero = c->zero, .bucket_bytes = 128, .optim = {.weight_decay = 0.1}}, 2,
                         NULL);
    if (!d) return 1;
    float p0[2][N], p1[2][N], p2[2][N];
    /* a good step first, so the optimizer state is not zero */
    backward(d, 2, r, 0, 0, 0);
    VT_OK(vs_ddp_clip_grad_norm(d, 1.0, NULL));
    VT_OK(vs_ddp_step(d, 0.01));
    read_params(d, 2, p0);
    /* the poisoned pass: rank 1 has a NaN (or inf) */
    backward(d, 2, r, 1, c->poison, 1);
    double norm = 0;
    vs_clip_desc cd = {.max_norm = 1.0, .error_if_nonfinite = c->error_if_nonfinite};
    if (c->error_if_nonfinite)
        VT_EXPECT_ERR(vs_ddp_clip_grad_norm_ex(d, &cd, &norm), VS_ERR_NONFINITE, "not finite", "error_if_nonfinite");
    else
        VT_OK(vs_ddp_clip_grad_norm_ex(d, &cd, &norm));
    VT_CHECK(!isfinite(norm), "rank %d: norm %g with a %g gradient", r, norm, (double)c->poison);
    c->named[r] = vt_contains(vs_last_error(), "'p0'");
    read_params(d, 2, p1);
    VT_CHECK(!memcmp(p0, p1, sizeof p0), "rank %d: the clip changed the parameters", r);
    VT_OK(vs_ddp_step(d, 0.01)); /* skipped, on every rank */
    read_params(d, 2, p1);
    VT_CHECK(!memcmp(p0, p1, sizeof p0), "rank %d: a step after a non-finite norm changed the parameters", r);
    VT_CHECK(vs_ddp_skipped_steps(d) == 1, "rank %d: skipped steps %lld", r, (long long)vs_ddp_skipped_steps(d));
    VT_CHECK(vs_ddp_step_count(d) == 1, "rank %d: step count %lld after a skipped step", r,
             (long long)vs_ddp_step_count(d));
    VT_EXPECT_ERR(vs_ddp_step(d, 0.01), VS_ERR_STATE, "no synchronized gradients", NULL);
    /* the next good pass steps again, from the same optimizer state */
    backward(d, 2, r, 2, 0, 0);
    VT_OK(vs_ddp_clip_grad_norm_ex(d, &cd, &norm));
    VT_CHECK(isfinite(norm), "norm %g", norm);
    VT_OK(vs_ddp_step(d, 0.01));
    read_params(d, 2, p2);
    VT_CHECK(memcmp(p0, p2, sizeof p0) != 0, "rank %d: the good step after the skip changed nothing", r);
    for (int p = 0; p < 2; p++)
        for (int e = 0; e < N; e++) VT_CHECK(isfinite(p2[p][e]), "p%d[%d] = %g", p, e, (double)p2[p][e]);
    VT_CHECK(vs_ddp_step_count(d) == 2 && vs_ddp_skipped_steps(d) == 1, "counts %lld/%lld",
             (long long)vs_ddp_step_count(d), (long long)vs_ddp_skipped_steps(d));
    /* a non-finite norm, then new gradients: the skip is cancelled */
    backward(d, 2, r, 3, c->poison, 0);
    VT_OK(vs_ddp_clip_grad_norm(d, 1.0, &norm));
    VT_CHECK(!isfinite(norm), "norm %g", norm);
    backward(d, 2, r, 3, 0, 0);
    VT_OK(vs_ddp_step(d, 0.01));
    VT_CHECK(vs_ddp_step_count(d) == 3 && vs_ddp_skipped_steps(d) == 1, "counts %lld/%lld after a cancelled skip",
             (long long)vs_ddp_step_count(d), (long long)vs_ddp_skipped_steps(d));
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

/* beta1 = 0 AdamW (and eps = 0) against this file's AdamW on the averaged gradient. */
typedef struct adam_case {
    float fin[MAXR][2][N];
} adam_case;

enum { ADAM_STEPS = 3 };
static const double A_LR = 1e-2, A_B2 = 0.99, A_WD = 0.1;

static int rank_adam0(vs_world* w, void* arg)
{
    adam_case* c = (adam_case*)arg;
    int r = vs_world_rank(w);
    vs_mesh* mesh = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {2}}, &mesh));
    if (!mesh) return 1;
    vs_ddp* d = make_ddp(mesh,
                         &(vs_ddp_desc){.zero = VS_ZERO_1, .bucket_bytes = 128,
                                        .optim = {.beta1 = 0, .beta1_set = 1, .beta2 = A_B2, .weight_decay = A_WD}},
                         2, NULL);
    if (!d) return 1;
    for (int st = 0; st < ADAM_STEPS; st++) {
        backward(d, 2, r, st, 0, 0);
        VT_OK(vs_ddp_step(d, A_LR));
    }
    read_params(d, 2, c->fin[r]);
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

/* Plain AdamW (decoupled decay, bias-corrected), the gradient averaged over 2 ranks. */
static void adam_ref(double b1, float out[2][N])
{
    for (int p = 0; p < 2; p++)
        for (int e = 0; e < N; e++) {
            double x = init_of(p, e), m = 0, v = 0;
            for (int t = 1; t <= ADAM_STEPS; t++) {
                double g = 0.5 * ((double)grad_of(0, p, t - 1, e) + (double)grad_of(1, p, t - 1, e));
                m = b1 * m + (1 - b1) * g;
                v = A_B2 * v + (1 - A_B2) * g * g;
                double mh = m / (1 - pow(b1, t)), vh = v / (1 - pow(A_B2, t));
                x = x * (1 - A_LR * A_WD) - A_LR * mh / (sqrt(vh) + 1e-8);
            }
            out[p][e] = (float)x;
        }
}

static void case_clip(clip_case* c)
{
    memset(c->named, 0, sizeof c->named);
    launch(2, rank_clip, c);
    if (c->error_if_nonfinite)
        VT_CHECK(c->named[0] || c->named[1], "no rank's message names the parameter with the %g", (double)c->poison);
}

static void case_adam0(void)
{
    static adam_case c;
    float ref0[2][N], ref9[2][N];
    adam_ref(0.0, ref0);
    adam_ref(0.9, ref9);
    launch(2, rank_adam0, &c);
    double err = 0, far = 0;
    for (int r = 0; r < 2; r++)
        for (int p = 0; p < 2; p++)
            for (int e = 0; e < N; e++) {
                double a = c.fin[r][p][e];
                err = fmax(err, fabs(a - ref0[p][e]) / fmax(fabs(ref0[p][e]), 1e-3));
                far = fmax(far, fabs(a - ref9[p][e]));
            }
    VT_CHECK(err <= 1e-5, "beta1 = 0 AdamW: relative error %.3g against the formula", err);
    VT_CHECK(far > 1e-3, "beta1 = 0 gave the beta1 = 0.9 result (max difference %.3g)", far);
    printf("    beta1 = 0 AdamW, 3 steps, DP=2 ZeRO-1: max relative error %.2g (vs beta1 = 0.9: %.2g apart)\n", err, far);
}

/* A frozen group (lr_scale = 0, set) stays bit-identical; lr_scale 0 without the
   flag is still the default 1 (existing callers). */
typedef struct frozen_case {
    vs_optim_kind kind;
    vs_zero_stage zero;
    int set;
} frozen_case;

static int rank_frozen(vs_world* w, void* arg)
{
    frozen_case* c = (frozen_case*)arg;
    int r = vs_world_rank(w);
    vs_mesh* mesh = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {2}}, &mesh));
    if (!mesh) return 1;
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.zero = c->zero;
    dd.bucket_bytes = 128;
    dd.optim.kind = c->kind;
    dd.optim.weight_decay = 0.1;
    dd.optim.momentum = 0.9;
    dd.optim.ngroups = 2;
    dd.optim.groups[1].lr_scale = 0;
    dd.optim.groups[1].lr_scale_set = c->set;
    dd.optim.groups[1].weight_decay = 0.5; /* would move the parameters if the group stepped */
    const int groups[3] = {0, 1, 0};
    vs_ddp* d = make_ddp(mesh, &dd, 3, groups);
    if (!d) return 1;
    float before[3][N], after[3][N];
    read_params(d, 3, before);
    for (int st = 0; st < 2; st++) {
        backward(d, 3, r, st, 0, 0);
        VT_OK(vs_ddp_step(d, 0.05));
    }
    read_params(d, 3, after);
    for (int p = 0; p < 3; p++) {
        int same = !memcmp(before[p], after[p], sizeof before[p]);
        if (p == 1 && c->set)
            VT_CHECK(same, "rank %d: the frozen group's p1 changed", r);
        else
            VT_CHECK(!same, "rank %d: p%d did not change (lr_scale_set %d)", r, p, c->set);
    }
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

static void case_frozen(void)
{
    static frozen_case cs[] = {{VS_OPTIM_ADAMW, VS_ZERO_1, 1}, {VS_OPTIM_SGD, VS_ZERO_0, 1},
                               {VS_OPTIM_ADAMW, VS_ZERO_2, 1}, {VS_OPTIM_SGD, VS_ZERO_1, 0}};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) launch(2, rank_frozen, &cs[i]);
}

/* ------------------------------------------------------------------------- */
/* Point 8 and states: lifetimes, order of calls                             */

static int rank_lifetime(vs_world* w, void* arg)
{
    (void)arg;
    int r = vs_world_rank(w);
    vs_mesh* mesh = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {2, 2}}, &mesh)); /* (DP, TP) */
    if (!mesh) return 1;
    /* a step leaves the ZeRO all-gathers in flight (overlap with the next forward) */
    vs_ddp* d = make_ddp(mesh, &(vs_ddp_desc){.zero = VS_ZERO_1, .bucket_bytes = 64}, 3, NULL);
    if (!d) return 1;
    backward(d, 3, r, 0, 0, 0);
    VT_OK(vs_ddp_step(d, 0.01));
    VT_EXPECT_ERR(vs_mesh_free(mesh), VS_ERR_STATE, "still alive", "free them first");
    /* a second DDP, never finalized, also holds the mesh */
    vs_ddp* d2 = NULL;
    VT_OK(vs_ddp_init(&(vs_ddp_desc){.mesh = mesh}, &d2));
    VT_OK(vs_ddp_free(d)); /* waits for the all-gathers */
    VT_EXPECT_ERR(vs_mesh_free(mesh), VS_ERR_STATE, "1 handle", NULL);
    VT_OK(vs_ddp_free(d2));
    VT_OK(vs_ddp_free(NULL));
    VT_OK(vs_mesh_free(mesh)); /* the right order */

    /* a DDP on a submesh holds its parent too */
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {2, 2}}, &mesh));
    vs_mesh* dp = NULL;
    VT_OK(vs_mesh_submesh(mesh, "DP", &dp));
    d = NULL;
    if (dp) VT_OK(vs_ddp_init(&(vs_ddp_desc){.mesh = dp}, &d));
    VT_EXPECT_ERR(vs_mesh_free(mesh), VS_ERR_STATE, "still alive", NULL);
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));

    /* freed in the middle of a backward pass: reductions launched and in flight */
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {4}}, &mesh));
    d = make_ddp(mesh, &(vs_ddp_desc){.zero = VS_ZERO_2, .bucket_bytes = 64}, 3, NULL);
    if (!d) return 1;
    VT_OK(vs_ddp_zero_grad(d));
    for (int p = 2; p >= 1; p--) {
        float* g = (float*)vs_ddp_grad(d, p);
        if (g) g[0] = 1.0f;
        VT_OK(vs_ddp_grad_ready(d, p));
    }
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

static int rank_states(vs_world* w, void* arg)
{
    (void)arg;
    int r = vs_world_rank(w);
    vs_mesh* mesh = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {2}}, &mesh));
    if (!mesh) return 1;
    vs_ddp* d = NULL;
    VT_OK(vs_ddp_init(&(vs_ddp_desc){.mesh = mesh, .zero = VS_ZERO_1, .bucket_bytes = 128}, &d));
    if (!d) return 1;
    vs_ddp_param_desc pd = pdesc("w", VS_F32, N);
    VT_OK(vs_ddp_add_param(d, &pd, NULL));
    /* before finalize */
    VT_EXPECT_ERR(vs_ddp_step(d, 0.1), VS_ERR_STATE, "finalize", NULL);
    VT_EXPECT_ERR(vs_ddp_clip_grad_norm(d, 1.0, NULL), VS_ERR_STATE, "finalize", NULL);
    VT_EXPECT_ERR(vs_ddp_finish_grad_sync(d), VS_ERR_STATE, "finalize", NULL);
    VT_EXPECT_ERR(vs_ddp_grad_ready(d, 0), VS_ERR_STATE, "finalize", NULL);
    VT_CHECK(vs_ddp_param(d, 0) == NULL && vt_contains(vs_last_error(), "finalize"), "vs_ddp_param before finalize");
    VT_OK(vs_ddp_finalize(d));
    /* after it */
    pd = pdesc("late", VS_F32, N);
    VT_EXPECT_ERR(vs_ddp_add_param(d, &pd, NULL), VS_ERR_STATE, "'late'", "after vs_ddp_finalize");
    VT_EXPECT_ERR(vs_ddp_finalize(d), VS_ERR_STATE, "twice", NULL);
    /* inside a pass */
    VT_OK(vs_ddp_zero_grad(d));
    float* g = (float*)vs_ddp_grad(d, 0);
    VT_CHECK(g != NULL, "grad: %s", vs_last_error());
    if (g) g[1] = (float)(r + 1);
    VT_EXPECT_ERR(vs_ddp_clip_grad_norm(d, 1.0, NULL), VS_ERR_STATE, "backward pass", NULL);
    VT_EXPECT_ERR(vs_ddp_step(d, 0.1), VS_ERR_STATE, "finish_grad_sync", NULL);
    VT_OK(vs_ddp_grad_ready(d, 0));
    VT_EXPECT_ERR(vs_ddp_grad_ready(d, 0), VS_ERR_STATE, "'w'", "twice");
    VT_OK(vs_ddp_finish_grad_sync(d));
    /* a second finish would reduce the reduced values again */
    const float* gs = (const float*)vs_ddp_grad_synced(d, 0);
    float synced = gs ? gs[1] : -1;
    VT_EXPECT_ERR(vs_ddp_finish_grad_sync(d), VS_ERR_STATE, "called twice", NULL);
    gs = (const float*)vs_ddp_grad_synced(d, 0);
    VT_CHECK(gs && gs[1] == synced, "the refused finish changed the gradient");
    VT_CHECK(synced == 1.5f || r == 1, "rank 0 owns element 1: averaged %g, want 1.5", (double)synced);
    VT_OK(vs_ddp_step(d, 0.1));
    VT_EXPECT_ERR(vs_ddp_step(d, 0.1), VS_ERR_STATE, "since the last step", NULL);
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

int main(void)
{
    VT_CASE("sizes: element count and byte size overflow in vs_ddp_add_param", launch(1, rank_sizes, NULL));
    VT_CASE("vs_lr_at: extreme counts stay right; bad schedules give NaN, vs_lr_check names them", case_lr());
    for (int k = 0; k < AG_N; k++) {
        char name[160];
        snprintf(name, sizeof name, "finalize agreement, 4 ranks: %s", ag_label[k]);
        VT_CASE(name, case_agree(k));
    }
    VT_CASE("optimizer numbers at init, lr at step, max_norm at clip", launch(2, rank_numbers, NULL));
    static clip_case cl[] = {{.poison = NAN, .zero = VS_ZERO_1}, {.error_if_nonfinite = 1, .poison = NAN, .zero = VS_ZERO_1},
                             {.poison = INFINITY, .zero = VS_ZERO_0},
                             {.error_if_nonfinite = 1, .poison = -INFINITY, .zero = VS_ZERO_2}};
    VT_CASE("clip with a NaN gradient: step skipped and counted, parameters bit-identical", case_clip(&cl[0]));
    VT_CASE("clip with a NaN gradient, error_if_nonfinite: error, parameters bit-identical", case_clip(&cl[1]));
    VT_CASE("clip with an inf gradient (ZeRO-0), and -inf with error_if_nonfinite (ZeRO-2)",
            (case_clip(&cl[2]), case_clip(&cl[3])));
    VT_CASE("AdamW with beta1 = 0 equals the formula", case_adam0());
    VT_CASE("lr_scale = 0 (set) freezes a group bit for bit; unset 0 is still 1", case_frozen());
    VT_CASE("lifetimes: mesh freed under a live DDP is VS_ERR_STATE; DDP then mesh works",
            launch(4, rank_lifetime, NULL));
    VT_CASE("calls out of order are VS_ERR_STATE", launch(2, rank_states, NULL));
    return vt_summary();
}
