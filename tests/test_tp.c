/* test_tp.c - tensor/sequence parallelism and sharding-invariant init (the `// >>tp`
   and `// >>init` sections of vescale_mesh.h), threads transport (vs_launch).

   Every reference is computed here in plain C on the whole (unsplit) tensors:
     - a tensor-parallel MLP (column-parallel W1, row-parallel W2, gelu) forward and
       backward over TP meshes of 1-4 ranks and the "TP" submesh of (2,2) and (2,4)
       meshes (several TP groups at once), with and without sequence parallelism;
     - an attention block (QKV column-parallel over heads, output row-parallel);
     both against the same model unsplit in f32 on one rank (within 1e-6 relative:
     only the order of the TP sums differs) and in double (within 1e-4: guards this
     file's own arithmetic);
     - sequence-parallel gather/scatter against slicing/concatenating/summing;
     - vocab-parallel embedding and cross-entropy against a plain lookup and a
       double-precision log-softmax;
     - sharding-invariant init: every shard of every layout equals, bit for bit, the
       box of the same tensor filled whole on a 1-rank mesh, whose values are the
       correctly rounded vs_init_value; distribution statistics; Philox4x32-10
       against Random123's known-answer vectors;
     - bad input: right code, a message naming the bad value, nothing written. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "tests/vs_test.h"

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-6

/* ------------------------------------------------------------------------- */
/* Small helpers                                                             */

static void launch(int n, vs_rank_fn fn, void* arg)
{
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = n;
    d.transport = VS_TRANSPORT_THREADS;
    d.timeout_s = 60; /* a hang fails the case instead of stalling for 300 s */
    VT_OK(vs_launch_ex(&d, fn, arg));
}

static void* xalloc(size_t bytes)
{
    void* p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        abort();
    }
    return p;
}

/* Deterministic test data in [-1, 1] (multiples of 1/1000). */
static uint32_t mix32(uint32_t a, uint32_t b)
{
    uint32_t h = a * 0x9E3779B1u ^ (b + 0x7F4A7C15u) * 0x85EBCA77u;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    h *= 0x297A2D39u;
    h ^= h >> 15;
    return h;
}
static double fval(uint32_t seed, int64_t i) { return (double)((int)(mix32(seed, (uint32_t)i) % 2001u) - 1000) / 1000.0; }

/* torch.chunk: chunks of ceil(n/m), trailing ones short or empty. */
static void chunk(int64_t n, int m, int i, int64_t* start, int64_t* len)
{
    int64_t c = (n + m - 1) / m, s = c * i, e;
    if (s > n) s = n;
    e = s + c;
    if (e > n) e = n;
    *start = s;
    *len = e - s;
}

/* max |got - want| / max |want| (NaN-propagating). */
static double relerr_f(const float* got, const double* want, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= num)) num = d;
        if (fabs(want[i]) > den) den = fabs(want[i]);
    }
    return num / (den > 1e-30 ? den : 1e-30);
}
static double abserr_f(const float* got, const double* want, int64_t n)
{
    double num = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= num)) num = d;
    }
    return num;
}

static double maxabs_d(const double* a, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(a[i]));
    return m;
}

#define CHECK_REL(ctx, what, got, want, n)                                                     \
    do {                                                                                       \
        double e_ = relerr_f((got), (want), (n));                                              \
        VT_CHECK(e_ <= TOL, "%s: %s relative error %.3g > %g", (ctx), (what), e_, TOL);        \
    } while (0)

/* Does `msg` contain the integer v as a token (not part of a word like "f32")? */
static int has_int(const char* msg, long long v)
{
    for (const char* p = msg; *p; p++) {
        const char* s = p;
        if (*s == '-') s++;
        if (!isdigit((unsigned char)*s)) continue;
        if (p > msg && (isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '.')) continue;
        if (*p != '-' && p > msg && p[-1] == '-') continue;
        char* end;
        long long x = strtoll(p, &end, 10);
        if (x == v && !isalnum((unsigned char)*end) && *end != '.') return 1;
        p = end - 1;
    }
    return 0;
}

/* Expects code `want` and a message containing `s1` (and `s2`, and the integer
   `num` when num_check). */
static void expect_err(const char* ctx, const char* what, vs_result got, vs_result want, const char* s1,
                       const char* s2, int num_check, long long num)
{
    const char* msg = vs_last_error();
    VT_CHECK(got == want, "%s: %s gave %s, want %s (%s)", ctx, what, vs_result_string(got), vs_result_string(want),
             msg);
    if (got != want) return;
    VT_CHECK(!s1 || strstr(msg, s1), "%s: %s: message \"%s\" lacks \"%s\"", ctx, what, msg, s1);
    VT_CHECK(!s2 || strstr(msg, s2), "%s: %s: message \"%s\" lacks \"%s\"", ctx, what, msg, s2);
    VT_CHECK(!num_check || has_int(msg, num), "%s: %s: message \"%s\" does not name %lld", ctx, what, msg, num);
}

static int untouched(const void* p, size_t bytes, unsigned char fill)
{
    const unsigned char* b = (const unsigned char*)p;
    for (size_t i = 0; i < bytes; i++)
        if (b[i] != fill) return 0;
    return 1;
}

/* Typed element access for the dtypes the tests move around. */
static void put(vs_dtype dt, void* p, int64_t i, double v)
{
    switch (dt) {
    case VS_F32: ((float*)p)[i] = (float)v; break;
    case VS_F64: ((double*)p)[i] = v; break;
    case VS_BF16: ((uint16_t*)p)[i] = vs_f32_to_bf16((float)v); break;
    case VS_F16: ((uint16_t*)p)[i] = vs_f32_to_f16((float)v); break;
    case VS_I32: ((int32_t*)p)[i] = (int32_t)v; break;
    case VS_I64: ((int64_t*)p)[i] = (int64_t)v; break;
    default: ((uint8_t*)p)[i] = (uint8_t)v; break;
    }
}
static double get(vs_dtype dt, const void* p, int64_t i)
{
    switch (dt) {
    case VS_F32: return ((const float*)p)[i];
    case VS_F64: return ((const double*)p)[i];
    case VS_BF16: return vs_bf16_to_f32(((const uint16_t*)p)[i]);
    case VS_F16: return vs_f16_to_f32(((const uint16_t*)p)[i]);
    case VS_I32: return ((const int32_t*)p)[i];
    case VS_I64: return (double)((const int64_t*)p)[i];
    default: return ((const uint8_t*)p)[i];
    }
}

/* A 1-D TP mesh of the whole world named "TP" (dp == 1), or the "TP" submesh of a
   (DP, TP) mesh. *dpc gets this rank's DP coordinate. */
static vs_mesh* tp_mesh(vs_world* w, int dp, int tp, vs_mesh** owner, int* dpc)
{
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    *owner = NULL;
    *dpc = 0;
    if (dp > 1) {
        md.shape[0] = dp;
        md.shape[1] = tp;
        VT_OK(vs_mesh_init(w, &md, owner));
        if (!*owner) return NULL;
        vs_mesh* sub = NULL;
        VT_OK(vs_mesh_submesh(*owner, "TP", &sub));
        *dpc = vs_mesh_coord_along(*owner, "DP");
        return sub;
    }
    md.shape[0] = tp;
    md.dim_names[0] = "TP";
    VT_OK(vs_mesh_init(w, &md, owner));
    return *owner;
}

/* ------------------------------------------------------------------------- */
/* 1. Tensor-parallel MLP                                                    */

static const double GC = 0.79788456080286535588; /* sqrt(2/pi) */
static double gelu_d(double x) { return 0.5 * x * (1.0 + tanh(GC * (x + 0.044715 * x * x * x))); }
static double dgelu_d(double x)
{
    double t = tanh(GC * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GC * (1.0 + 3.0 * 0.044715 * x * x);
}
static float gelu_f(float x) { return 0.5f * x * (1.0f + tanhf((float)GC * (x + 0.044715f * x * x * x))); }
static float dgelu_f(float x)
{
    float t = tanhf((float)GC * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * (float)GC * (1.0f + 3.0f * 0.044715f * x * x);
}

typedef struct mlp_cfg {
    int dp, tp;
    int T, H, F;
    int sp; /* sequence parallel: x and y sharded along tokens */
} mlp_cfg;

/* The unsplit MLP, y = W2 gelu(W1 x + b1) + b2 with loss = sum(y * gy), in real
   type R (float: the f32 single-rank model; double: a sanity reference). */
#define DEFINE_MLP_REF(NAME, R, GELU, DGELU)                                                              \
    static void NAME(int T, int H, int F, const R* x, const R* W1, const R* b1, const R* W2, const R* b2,  \
                     const R* gy, R* y, R* dW1, R* db1, R* dW2, R* db2, R* dx)                            \
    {                                                                                                     \
        R* h = (R*)xalloc(sizeof(R) * (size_t)(3 * T * F));                                               \
        R *a = h + T * F, *dh = a + T * F;                                                                \
        for (int t = 0; t < T; t++)                                                                       \
            for (int j = 0; j < F; j++) {                                                                 \
                R s = b1[j];                                                                              \
                for (int k = 0; k < H; k++) s += x[t * H + k] * W1[j * H + k];                            \
                h[t * F + j] = s;                                                                         \
                a[t * F + j] = GELU(s);                                                                   \
            }                                                                                             \
        for (int t = 0; t < T; t++)                                                                       \
            for (int i = 0; i < H; i++) {                                                                 \
                R s = 0;                                                                                  \
                for (int j = 0; j < F; j++) s += a[t * F + j] * W2[i * F + j];                            \
                y[t * H + i] = s + b2[i];                                                                 \
            }                                                                                             \
        for (int i = 0; i < H; i++) {                                                                     \
            R s = 0;                                                                                      \
            for (int t = 0; t < T; t++) s += gy[t * H + i];                                               \
            db2[i] = s;                                                                                   \
            for (int j = 0; j < F; j++) {                                                                 \
                R g = 0;                                                                                  \
                for (int t = 0; t < T; t++) g += gy[t * H + i] * a[t * F + j];                            \
                dW2[i * F + j] = g;                                                                       \
            }                                                                                             \
        }                                                                                                 \
        for (int t = 0; t < T; t++)                                                                       \
            for (int j = 0; j < F; j++) {                                                                 \
                R s = 0;                                                                                  \
                for (int i = 0; i < H; i++) s += gy[t * H + i] * W2[i * F + j];                           \
                dh[t * F + j] = s * DGELU(h[t * F + j]);                                                  \
            }                                                                                             \
        for (int j = 0; j < F; j++) {                                                                     \
            R s = 0;                                                                                      \
            for (int t = 0; t < T; t++) s += dh[t * F + j];                                               \
            db1[j] = s;                                                                                   \
            for (int k = 0; k < H; k++) {                                                                 \
                R g = 0;                                                                                  \
                for (int t = 0; t < T; t++) g += dh[t * F + j] * x[t * H + k];                            \
                dW1[j * H + k] = g;                                                                       \
            }                                                                                             \
        }                                                                                                 \
        for (int t = 0; t < T; t++)                                                                       \
            for (int k = 0; k < H; k++) {                                                                 \
                R s = 0;                                                                                  \
                for (int j = 0; j < F; j++) s += dh[t * F + j] * W1[j * H + k];                           \
                dx[t * H + k] = s;                                                                        \
            }                                                                                             \
        free(h);                                                                                          \
    }
DEFINE_MLP_REF(mlp_ref_d, double, gelu_d, dgelu_d)
DEFINE_MLP_REF(mlp_ref_f, float, gelu_f, dgelu_f)

/* Copies the block rows [r0, r0+nr) x cols [c0, c0+nc) of a rows x cols matrix. */
static void block_d(const double* m, int cols, int64_t r0, int64_t nr, int64_t c0, int64_t nc, double* out)
{
    for (int64_t r = 0; r < nr; r++)
        for (int64_t c = 0; c < nc; c++) out[r * nc + c] = m[(r0 + r) * cols + c0 + c];
}
static void block_f(const double* m, int cols, int64_t r0, int64_t nr, int64_t c0, int64_t nc, float* out)
{
    for (int64_t r = 0; r < nr; r++)
        for (int64_t c = 0; c < nc; c++) out[r * nc + c] = (float)m[(r0 + r) * cols + c0 + c];
}
static void to_f(const double* a, float* out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = (float)a[i];
}
static void to_d(const float* a, double* out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = a[i];
}

/* A block of a full rows x cols tensor, checked against the unsplit f32 model
   (refF, within TOL) and the double model (refD, within 1e-4, which guards this
   file's own arithmetic), relative to the largest element of the whole tensor. */
static void check_block(const char* ctx, const char* what, const float* got, const double* refF, const double* refD,
                        int rows, int cols, int64_t r0, int64_t nr, int64_t c0, int64_t nc)
{
    double* wnt = (double*)xalloc(sizeof(double) * (size_t)(nr * nc));
    for (int pass = 0; pass < 2; pass++) {
        const double* full = pass ? refD : refF;
        const double tol = pass ? 1e-4 : TOL;
        block_d(full, cols, r0, nr, c0, nc, wnt);
        double num = 0, den = maxabs_d(full, (int64_t)rows * cols);
        for (int64_t i = 0; i < nr * nc; i++) {
            double d = fabs((double)got[i] - wnt[i]);
            if (!(d <= num)) num = d;
        }
        double e = num / (den > 1e-30 ? den : 1e-30);
        VT_CHECK(e <= tol, "%s: %s (rows %lld+%lld, cols %lld+%lld) relative error %.3g > %g against the %s model", ctx,
                 what, (long long)r0, (long long)nr, (long long)c0, (long long)nc, e, tol,
                 pass ? "double" : "unsplit f32");
    }
    free(wnt);
}

static int case_mlp(vs_world* w, void* arg)
{
    const mlp_cfg* c = (const mlp_cfg*)arg;
    const int T = c->T, H = c->H, F = c->F;
    vs_mesh* owner;
    int dpc;
    vs_mesh* tp = tp_mesh(w, c->dp, c->tp, &owner, &dpc);
    if (!tp) {
        if (owner) vs_mesh_free(owner);
        return 1;
    }
    const int r = vs_mesh_rank(tp);
    char ctx[160];
    snprintf(ctx, sizeof ctx, "mlp dp=%d tp=%d T=%d H=%d F=%d sp=%d, DP %d TP rank %d", c->dp, c->tp, T, H, F, c->sp,
             dpc, r);
    VT_CHECK(vs_mesh_ndims(tp) == 1 && vs_mesh_nranks(tp) == c->tp, "%s: TP mesh has %d dims, %d ranks", ctx,
             vs_mesh_ndims(tp), vs_mesh_nranks(tp));

    /* Full tensors, exactly representable in f32. Weights are shared by every DP
       group, activations differ per group (a mix-up between groups shows). */
    const int nTH = T * H, nFH = F * H;
    double* buf = (double*)xalloc(sizeof(double) * (size_t)(3 * (2 * nTH + 2 * nFH + F + H)));
    double *x = buf, *gy = x + nTH, *W1 = gy + nTH, *W2 = W1 + nFH, *b1 = W2 + nFH, *b2 = b1 + F;
    double *yD = b2 + H, *dxD = yD + nTH, *dW1D = dxD + nTH, *dW2D = dW1D + nFH, *db1D = dW2D + nFH, *db2D = db1D + F;
    double *yF = db2D + H, *dxF = yF + nTH, *dW1F = dxF + nTH, *dW2F = dW1F + nFH, *db1F = dW2F + nFH, *db2F = db1F + F;
    for (int i = 0; i < nTH; i++)
        x[i] = (float)fval(100 + 17 * (uint32_t)dpc, i), gy[i] = (float)fval(200 + 17 * (uint32_t)dpc, i);
    for (int i = 0; i < nFH; i++) W1[i] = (float)(0.5 * fval(301, i)), W2[i] = (float)(0.5 * fval(302, i));
    for (int i = 0; i < F; i++) b1[i] = (float)(0.2 * fval(303, i));
    for (int i = 0; i < H; i++) b2[i] = (float)(0.2 * fval(304, i));
    mlp_ref_d(T, H, F, x, W1, b1, W2, b2, gy, yD, dW1D, db1D, dW2D, db2D, dxD);
    {
        /* the same MLP unsplit in f32, on one rank */
        const int nin = 2 * nTH + 2 * nFH + F + H;
        float* fb = (float*)xalloc(sizeof(float) * (size_t)(2 * nin));
        to_f(buf, fb, nin);
        float *fx = fb, *fgy = fx + nTH, *fW1 = fgy + nTH, *fW2 = fW1 + nFH, *fb1 = fW2 + nFH, *fb2 = fb1 + F;
        float *o = fb + nin, *oy = o, *odx = oy + nTH, *odW1 = odx + nTH, *odW2 = odW1 + nFH, *odb1 = odW2 + nFH,
              *odb2 = odb1 + F;
        mlp_ref_f(T, H, F, fx, fW1, fb1, fW2, fb2, fgy, oy, odW1, odb1, odW2, odb2, odx);
        to_d(o, yF, nin);
        free(fb);
    }

    /* This rank's slices: W1 and b1 Shard(0), W2 Shard(1), through vs_layout_local. */
    vs_layout L0, L1;
    memset(&L0, 0, sizeof L0);
    L0.mesh = tp;
    L0.p[0] = vs_shard(0);
    L1 = L0;
    L1.p[0] = vs_shard(1);
    int64_t ls[2] = {-1, -1}, off[2] = {-1, -1}, f0, fl;
    chunk(F, c->tp, r, &f0, &fl);
    VT_OK(vs_layout_local(&L0, 2, (const int64_t[]){F, H}, r, ls, off));
    VT_CHECK(off[0] == f0 && ls[0] == fl && off[1] == 0 && ls[1] == H, "%s: W1 shard off (%lld,%lld) shape (%lld,%lld)",
             ctx, (long long)off[0], (long long)off[1], (long long)ls[0], (long long)ls[1]);
    VT_OK(vs_layout_local(&L0, 1, (const int64_t[]){F}, r, ls, off));
    VT_CHECK(off[0] == f0 && ls[0] == fl, "%s: b1 shard off %lld len %lld", ctx, (long long)off[0], (long long)ls[0]);
    VT_OK(vs_layout_local(&L1, 2, (const int64_t[]){H, F}, r, ls, off));
    VT_CHECK(off[1] == f0 && ls[1] == fl && off[0] == 0 && ls[0] == H, "%s: W2 shard off (%lld,%lld) shape (%lld,%lld)",
             ctx, (long long)off[0], (long long)off[1], (long long)ls[0], (long long)ls[1]);

    float* W1l = (float*)xalloc(sizeof(float) * (size_t)(fl * H));
    float* W2l = (float*)xalloc(sizeof(float) * (size_t)(H * fl));
    float *b1l = (float*)xalloc(sizeof(float) * (size_t)fl), *b2f = (float*)xalloc(sizeof(float) * (size_t)H);
    block_f(W1, H, f0, fl, 0, H, W1l);
    block_f(W2, F, 0, H, f0, fl, W2l);
    block_f(b1, 1, f0, fl, 0, 1, b1l);
    block_f(b2, 1, 0, H, 0, 1, b2f);

    /* Tokens this rank holds under sequence parallelism. */
    int64_t t0 = 0, tl = T;
    if (c->sp) chunk(T, c->tp, r, &t0, &tl);
    const int64_t shapeTH[2] = {T, H};

    /* forward: x (gathered under SP) -> column-parallel -> row-parallel -> reduce */
    float* xf = (float*)xalloc(sizeof(float) * (size_t)nTH);
    if (c->sp) {
        float* xl = (float*)xalloc(sizeof(float) * (size_t)(tl * H));
        block_f(x, H, t0, tl, 0, H, xl);
        memset(xf, 0xCD, sizeof(float) * (size_t)nTH);
        VT_OK(vs_sp_gather_forward(tp, VS_F32, 2, shapeTH, 0, xl, xf));
        free(xl);
    } else {
        block_f(x, H, 0, T, 0, H, xf); /* identity into the column-parallel layer */
    }
    float* h = (float*)xalloc(sizeof(float) * (size_t)(T * fl));
    float* a = (float*)xalloc(sizeof(float) * (size_t)(T * fl));
    for (int t = 0; t < T; t++)
        for (int64_t j = 0; j < fl; j++) {
            float s = b1l[j];
            for (int k = 0; k < H; k++) s += xf[t * H + k] * W1l[j * H + k];
            h[t * fl + j] = s;
            a[t * fl + j] = gelu_f(s);
        }
    float* z = (float*)xalloc(sizeof(float) * (size_t)nTH);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < H; i++) {
            float s = 0;
            for (int64_t j = 0; j < fl; j++) s += a[t * fl + j] * W2l[i * fl + j];
            z[t * H + i] = s;
        }
    if (c->sp) {
        float* yl = (float*)xalloc(sizeof(float) * (size_t)(tl * H));
        VT_OK(vs_sp_scatter_forward(tp, VS_F32, 2, shapeTH, 0, z, yl));
        for (int64_t t = 0; t < tl; t++)
            for (int i = 0; i < H; i++) yl[t * H + i] += b2f[i];
        check_block(ctx, "y (local tokens)", yl, yF, yD, T, H, t0, tl, 0, H);
        free(yl);
    } else {
        VT_OK(vs_tp_reduce_forward(tp, z, (size_t)nTH, VS_F32));
        for (int t = 0; t < T; t++)
            for (int i = 0; i < H; i++) z[t * H + i] += b2f[i]; /* b2 once, after the reduction */
        check_block(ctx, "y", z, yF, yD, T, H, 0, T, 0, H);
    }

    /* backward */
    float* gyf = (float*)xalloc(sizeof(float) * (size_t)nTH);
    float* db2l = (float*)xalloc(sizeof(float) * (size_t)H);
    if (c->sp) {
        float* gyl = (float*)xalloc(sizeof(float) * (size_t)(tl * H));
        block_f(gy, H, t0, tl, 0, H, gyl);
        memset(gyf, 0xCD, sizeof(float) * (size_t)nTH);
        VT_OK(vs_sp_scatter_backward(tp, VS_F32, 2, shapeTH, 0, gyl, gyf));
        for (int i = 0; i < H; i++) {
            float s = 0;
            for (int64_t t = 0; t < tl; t++) s += gyl[t * H + i];
            db2l[i] = s;
        }
        /* b2 is a sequence-parallel parameter: its gradient is summed over TP */
        VT_OK(vs_all_reduce(vs_mesh_comm(tp), db2l, db2l, (size_t)H, VS_F32, VS_OP_SUM, NULL));
        free(gyl);
    } else {
        block_f(gy, H, 0, T, 0, H, gyf); /* reduce_forward's backward: identity */
        for (int i = 0; i < H; i++) {
            float s = 0;
            for (int t = 0; t < T; t++) s += gyf[t * H + i];
            db2l[i] = s;
        }
    }
    check_block(ctx, "db2", db2l, db2F, db2D, 1, H, 0, 1, 0, H);

    float* dW2l = (float*)xalloc(sizeof(float) * (size_t)(H * fl));
    float* dh = (float*)xalloc(sizeof(float) * (size_t)(T * fl));
    float* db1l = (float*)xalloc(sizeof(float) * (size_t)fl);
    float* dW1l = (float*)xalloc(sizeof(float) * (size_t)(fl * H));
    float* dxp = (float*)xalloc(sizeof(float) * (size_t)nTH);
    for (int i = 0; i < H; i++)
        for (int64_t j = 0; j < fl; j++) {
            float s = 0;
            for (int t = 0; t < T; t++) s += gyf[t * H + i] * a[t * fl + j];
            dW2l[i * fl + j] = s;
        }
    for (int t = 0; t < T; t++)
        for (int64_t j = 0; j < fl; j++) {
            float s = 0;
            for (int i = 0; i < H; i++) s += gyf[t * H + i] * W2l[i * fl + j];
            dh[t * fl + j] = s * dgelu_f(h[t * fl + j]);
        }
    for (int64_t j = 0; j < fl; j++) {
        float s = 0;
        for (int t = 0; t < T; t++) s += dh[t * fl + j];
        db1l[j] = s;
        for (int k = 0; k < H; k++) {
            float g = 0;
            for (int t = 0; t < T; t++) g += dh[t * fl + j] * xf[t * H + k];
            dW1l[j * H + k] = g;
        }
    }
    for (int t = 0; t < T; t++)
        for (int k = 0; k < H; k++) {
            float s = 0;
            for (int64_t j = 0; j < fl; j++) s += dh[t * fl + j] * W1l[j * H + k];
            dxp[t * H + k] = s;
        }
    check_block(ctx, "dW2 (local columns)", dW2l, dW2F, dW2D, H, F, 0, H, f0, fl);
    check_block(ctx, "db1 (local rows)", db1l, db1F, db1D, F, 1, f0, fl, 0, 1);
    check_block(ctx, "dW1 (local rows)", dW1l, dW1F, dW1D, F, H, f0, fl, 0, H);
    if (c->sp) {
        float* dxl = (float*)xalloc(sizeof(float) * (size_t)(tl * H));
        VT_OK(vs_sp_gather_backward(tp, VS_F32, 2, shapeTH, 0, dxp, dxl));
        check_block(ctx, "dx (local tokens)", dxl, dxF, dxD, T, H, t0, tl, 0, H);
        free(dxl);
    } else {
        VT_OK(vs_tp_copy_backward(tp, dxp, (size_t)nTH, VS_F32));
        check_block(ctx, "dx", dxp, dxF, dxD, T, H, 0, T, 0, H);
    }

    free(buf), free(W1l), free(W2l), free(b1l), free(b2f), free(xf), free(h), free(a), free(z), free(gyf);
    free(db2l), free(dW2l), free(dh), free(db1l), free(dW1l), free(dxp);
    VT_OK(vs_mesh_free(owner));
    return 0;
}

/* ------------------------------------------------------------------------- */
/* 2. Attention: QKV column-parallel over heads, output row-parallel          */

typedef struct attn_cfg {
    int dp, tp;
    int S, D, nh, dh; /* tokens, model width, heads, head width */
    int causal;
} attn_cfg;

/* One head in double: out[S x dh] = softmax(q k^T / sqrt(dh)) v. */
static void head_d(int S, int D, int dh, const double* x, const double* Wq, const double* Wk, const double* Wv,
                   int causal, double* out)
{
    double* q = (double*)xalloc(sizeof(double) * (size_t)(3 * S * dh));
    double *k = q + S * dh, *v = k + S * dh;
    for (int s = 0; s < S; s++)
        for (int e = 0; e < dh; e++) {
            double a = 0, b = 0, c = 0;
            for (int i = 0; i < D; i++) {
                a += x[s * D + i] * Wq[e * D + i];
                b += x[s * D + i] * Wk[e * D + i];
                c += x[s * D + i] * Wv[e * D + i];
            }
            q[s * dh + e] = a, k[s * dh + e] = b, v[s * dh + e] = c;
        }
    double* p = (double*)xalloc(sizeof(double) * (size_t)S);
    for (int s = 0; s < S; s++) {
        double m = -INFINITY, sum = 0;
        int n = causal ? s + 1 : S;
        for (int u = 0; u < n; u++) {
            double d = 0;
            for (int e = 0; e < dh; e++) d += q[s * dh + e] * k[u * dh + e];
            p[u] = d / sqrt((double)dh);
            if (p[u] > m) m = p[u];
        }
        for (int u = 0; u < n; u++) sum += (p[u] = exp(p[u] - m));
        for (int e = 0; e < dh; e++) {
            double o = 0;
            for (int u = 0; u < n; u++) o += p[u] / sum * v[u * dh + e];
            out[s * dh + e] = o;
        }
    }
    free(q);
    free(p);
}

static void head_f(int S, int D, int dh, const float* x, const float* Wq, const float* Wk, const float* Wv,
                   int causal, float* out, int ostride)
{
    float* q = (float*)xalloc(sizeof(float) * (size_t)(3 * S * dh));
    float *k = q + S * dh, *v = k + S * dh;
    for (int s = 0; s < S; s++)
        for (int e = 0; e < dh; e++) {
            float a = 0, b = 0, c = 0;
            for (int i = 0; i < D; i++) {
                a += x[s * D + i] * Wq[e * D + i];
                b += x[s * D + i] * Wk[e * D + i];
                c += x[s * D + i] * Wv[e * D + i];
            }
            q[s * dh + e] = a, k[s * dh + e] = b, v[s * dh + e] = c;
        }
    float* p = (float*)xalloc(sizeof(float) * (size_t)S);
    for (int s = 0; s < S; s++) {
        float m = -INFINITY, sum = 0;
        int n = causal ? s + 1 : S;
        for (int u = 0; u < n; u++) {
            float d = 0;
            for (int e = 0; e < dh; e++) d += q[s * dh + e] * k[u * dh + e];
            p[u] = d / sqrtf((float)dh);
            if (p[u] > m) m = p[u];
        }
        for (int u = 0; u < n; u++) sum += (p[u] = expf(p[u] - m));
        for (int e = 0; e < dh; e++) {
            float o = 0;
            for (int u = 0; u < n; u++) o += p[u] / sum * v[u * dh + e];
            out[s * ostride + e] = o;
        }
    }
    free(q);
    free(p);
}

static int case_attn(vs_world* w, void* arg)
{
    const attn_cfg* c = (const attn_cfg*)arg;
    const int S = c->S, D = c->D, nh = c->nh, dh = c->dh, HD = nh * dh;
    vs_mesh* owner;
    int dpc;
    vs_mesh* tp = tp_mesh(w, c->dp, c->tp, &owner, &dpc);
    if (!tp) {
        if (owner) vs_mesh_free(owner);
        return 1;
    }
    const int r = vs_mesh_rank(tp);
    char ctx[160];
    snprintf(ctx, sizeof ctx, "attention dp=%d tp=%d S=%d D=%d heads=%d x %d causal=%d, DP %d TP rank %d", c->dp,
             c->tp, S, D, nh, dh, c->causal, dpc, r);

    double* x = (double*)xalloc(sizeof(double) * (size_t)(S * D));
    double* Wq = (double*)xalloc(sizeof(double) * (size_t)(3 * HD * D)); /* [nh, dh, D] each */
    double *Wk = Wq + HD * D, *Wv = Wk + HD * D;
    double* Wo = (double*)xalloc(sizeof(double) * (size_t)(D * HD)); /* [D, nh, dh] */
    double* bo = (double*)xalloc(sizeof(double) * (size_t)D);
    for (int i = 0; i < S * D; i++) x[i] = (float)fval(400 + 13 * (uint32_t)dpc, i);
    for (int i = 0; i < 3 * HD * D; i++) Wq[i] = (float)(0.6 * fval(401, i));
    for (int i = 0; i < D * HD; i++) Wo[i] = (float)(0.5 * fval(402, i));
    for (int i = 0; i < D; i++) bo[i] = (float)(0.1 * fval(403, i));

    /* unsplit reference */
    double* o = (double*)xalloc(sizeof(double) * (size_t)(S * HD));
    double* oh = (double*)xalloc(sizeof(double) * (size_t)(S * dh));
    for (int hh = 0; hh < nh; hh++) {
        head_d(S, D, dh, x, Wq + hh * dh * D, Wk + hh * dh * D, Wv + hh * dh * D, c->causal, oh);
        for (int s = 0; s < S; s++)
            for (int e = 0; e < dh; e++) o[s * HD + hh * dh + e] = oh[s * dh + e];
    }
    double* y = (double*)xalloc(sizeof(double) * (size_t)(S * D));
    for (int s = 0; s < S; s++)
        for (int i = 0; i < D; i++) {
            double acc = bo[i];
            for (int j = 0; j < HD; j++) acc += o[s * HD + j] * Wo[i * HD + j];
            y[s * D + i] = acc;
        }
    /* and in f32 on one rank */
    double* yF = (double*)xalloc(sizeof(double) * (size_t)(S * D));
    {
        float* fx = (float*)xalloc(sizeof(float) * (size_t)(S * D + 4 * HD * D + S * HD));
        float *fW = fx + S * D, *fWo = fW + 3 * HD * D, *fo = fWo + D * HD;
        to_f(x, fx, S * D);
        to_f(Wq, fW, 3 * HD * D);
        to_f(Wo, fWo, D * HD);
        for (int hh = 0; hh < nh; hh++)
            head_f(S, D, dh, fx, fW + hh * dh * D, fW + HD * D + hh * dh * D, fW + 2 * HD * D + hh * dh * D,
                   c->causal, fo + hh * dh, HD);
        for (int s = 0; s < S; s++)
            for (int i = 0; i < D; i++) {
                float acc = 0;
                for (int j = 0; j < HD; j++) acc += fo[s * HD + j] * fWo[i * HD + j];
                yF[s * D + i] = acc + (float)bo[i];
            }
        free(fx);
    }

    /* heads of this rank: Shard(0) of [nh, dh, D], Shard(1) of [D, nh, dh] */
    vs_layout L;
    memset(&L, 0, sizeof L);
    L.mesh = tp;
    L.p[0] = vs_shard(0);
    int64_t ls[3], off[3], h0, hl;
    chunk(nh, c->tp, r, &h0, &hl);
    VT_OK(vs_layout_local(&L, 3, (const int64_t[]){nh, dh, D}, r, ls, off));
    VT_CHECK(off[0] == h0 && ls[0] == hl, "%s: QKV heads from %lld, %lld of them; want %lld, %lld", ctx,
             (long long)off[0], (long long)ls[0], (long long)h0, (long long)hl);
    L.p[0] = vs_shard(1);
    VT_OK(vs_layout_local(&L, 3, (const int64_t[]){D, nh, dh}, r, ls, off));
    VT_CHECK(off[1] == h0 && ls[1] == hl, "%s: output proj heads from %lld, %lld of them", ctx, (long long)off[1],
             (long long)ls[1]);

    const int64_t hdl = hl * dh;
    float* xf = (float*)xalloc(sizeof(float) * (size_t)(S * D));
    block_f(x, D, 0, S, 0, D, xf);
    float* Wql = (float*)xalloc(sizeof(float) * (size_t)(3 * hdl * D));
    block_f(Wq, D, h0 * dh, hdl, 0, D, Wql);
    block_f(Wk, D, h0 * dh, hdl, 0, D, Wql + hdl * D);
    block_f(Wv, D, h0 * dh, hdl, 0, D, Wql + 2 * hdl * D);
    float* Wol = (float*)xalloc(sizeof(float) * (size_t)(D * hdl));
    block_f(Wo, HD, 0, D, h0 * dh, hdl, Wol);
    float* ol = (float*)xalloc(sizeof(float) * (size_t)(S * hdl));
    for (int64_t hh = 0; hh < hl; hh++)
        head_f(S, D, dh, xf, Wql + hh * dh * D, Wql + hdl * D + hh * dh * D, Wql + 2 * hdl * D + hh * dh * D,
               c->causal, ol + hh * dh, (int)hdl);
    float* yp = (float*)xalloc(sizeof(float) * (size_t)(S * D));
    for (int s = 0; s < S; s++)
        for (int i = 0; i < D; i++) {
            float acc = 0;
            for (int64_t j = 0; j < hdl; j++) acc += ol[s * hdl + j] * Wol[i * hdl + j];
            yp[s * D + i] = acc;
        }
    VT_OK(vs_tp_reduce_forward(tp, yp, (size_t)(S * D), VS_F32));
    for (int s = 0; s < S; s++)
        for (int i = 0; i < D; i++) yp[s * D + i] += (float)bo[i];
    check_block(ctx, "attention output", yp, yF, y, S, D, 0, S, 0, D);

    free(x), free(Wq), free(Wo), free(bo), free(o), free(oh), free(y), free(yF), free(xf), free(Wql), free(Wol), free(ol);
    free(yp);
    VT_OK(vs_mesh_free(owner));
    return 0;
}

/* ------------------------------------------------------------------------- */
/* 3. Sequence parallelism                                                   */

typedef struct sp_cfg {
    int tp;
    int ndim;
    int64_t shape[3];
    int seq_dim;
    vs_dtype dt;
} sp_cfg;

/* Row-major index of the full tensor for a local index of the box (seq chunk). */
static int64_t sp_global(const sp_cfg* c, int64_t s0, int64_t sl, int64_t li)
{
    int64_t ls[3], idx[3], g = 0;
    for (int d = 0; d < c->ndim; d++) ls[d] = d == c->seq_dim ? sl : c->shape[d];
    for (int d = c->ndim - 1; d >= 0; d--) idx[d] = li % ls[d], li /= ls[d];
    for (int d = 0; d < c->ndim; d++) g = g * c->shape[d] + idx[d] + (d == c->seq_dim ? s0 : 0);
    return g;
}

/* Small integers: every sum below is exact in every dtype tested. */
static double sp_val(int who, int64_t g) { return (double)((int)(mix32(500 + (uint32_t)who, (uint32_t)g) % 15u) - 7); }

static int case_sp(vs_world* w, void* arg)
{
    const sp_cfg* c = (const sp_cfg*)arg;
    vs_mesh* owner;
    int dpc;
    vs_mesh* tp = tp_mesh(w, 1, c->tp, &owner, &dpc);
    if (!tp) return 1;
    const int r = vs_mesh_rank(tp), n = c->tp, nd = c->ndim;
    char ctx[200];
    snprintf(ctx, sizeof ctx, "sp tp=%d %s [%lld,%lld,%lld](ndim %d) seq_dim %d, rank %d", n, vs_dtype_name(c->dt),
             (long long)c->shape[0], (long long)c->shape[1], (long long)c->shape[2], nd, c->seq_dim, r);
    const size_t es = vs_dtype_size(c->dt);
    int64_t full = 1;
    for (int d = 0; d < nd; d++) full *= c->shape[d];
    int64_t s0, sl;
    chunk(c->shape[c->seq_dim], n, r, &s0, &sl);
    int64_t local_n = 1;
    for (int d = 0; d < nd; d++) local_n *= d == c->seq_dim ? sl : c->shape[d];

    void* lin = xalloc(es * (size_t)local_n);
    void* lout = xalloc(es * (size_t)local_n);
    void* fin = xalloc(es * (size_t)full);
    void* fout = xalloc(es * (size_t)full);
    void* fcopy = xalloc(es * (size_t)full);

    /* gather forward / scatter backward: local slice of X -> all of X */
    for (int pass = 0; pass < 2; pass++) {
        const char* what = pass ? "vs_sp_scatter_backward" : "vs_sp_gather_forward";
        for (int64_t i = 0; i < local_n; i++) put(c->dt, lin, i, sp_val(pass, sp_global(c, s0, sl, i)));
        memset(fout, 0xAB, es * (size_t)full);
        if (pass)
            VT_OK(vs_sp_scatter_backward(tp, c->dt, nd, c->shape, c->seq_dim, lin, fout));
        else
            VT_OK(vs_sp_gather_forward(tp, c->dt, nd, c->shape, c->seq_dim, lin, fout));
        int64_t bad = -1;
        for (int64_t g = 0; g < full && bad < 0; g++)
            if (get(c->dt, fout, g) != sp_val(pass, g)) bad = g;
        VT_CHECK(bad < 0, "%s: %s: element %lld is %g, want %g", ctx, what, (long long)bad,
                 bad < 0 ? 0.0 : get(c->dt, fout, bad), bad < 0 ? 0.0 : sp_val(pass, bad));
    }

    /* gather backward / scatter forward: each rank's full partial -> local slice of the sum */
    for (int pass = 0; pass < 2; pass++) {
        const char* what = pass ? "vs_sp_scatter_forward" : "vs_sp_gather_backward";
        for (int64_t g = 0; g < full; g++) put(c->dt, fin, g, sp_val(10 + 10 * pass + r, g));
        memcpy(fcopy, fin, es * (size_t)full);
        memset(lout, 0xAB, es * (size_t)local_n);
        if (pass)
            VT_OK(vs_sp_scatter_forward(tp, c->dt, nd, c->shape, c->seq_dim, fin, lout));
        else
            VT_OK(vs_sp_gather_backward(tp, c->dt, nd, c->shape, c->seq_dim, fin, lout));
        int64_t bad = -1;
        double want = 0;
        for (int64_t i = 0; i < local_n && bad < 0; i++) {
            int64_t g = sp_global(c, s0, sl, i);
            double s = 0;
            for (int q = 0; q < n; q++) s += sp_val(10 + 10 * pass + q, g);
            if (get(c->dt, lout, i) != s) bad = i, want = s;
        }
        VT_CHECK(bad < 0, "%s: %s: local element %lld is %g, want %g (sum over TP)", ctx, what, (long long)bad,
                 bad < 0 ? 0.0 : get(c->dt, lout, bad), want);
        VT_CHECK(memcmp(fcopy, fin, es * (size_t)full) == 0, "%s: %s changed its input", ctx, what);
    }
    free(lin), free(lout), free(fin), free(fout), free(fcopy);
    VT_OK(vs_mesh_free(owner));
    return 0;
}

/* ------------------------------------------------------------------------- */
/* 4. Vocab-parallel embedding and cross-entropy                             */

typedef struct vocab_cfg {
    int tp;
    int V, D, n;
    double scale, shift; /* logits = scale * fval + shift */
} vocab_cfg;

static int case_vocab(vs_world* w, void* arg)
{
    const vocab_cfg* c = (const vocab_cfg*)arg;
    vs_mesh* owner;
    int dpc;
    vs_mesh* tp = tp_mesh(w, 1, c->tp, &owner, &dpc);
    if (!tp) return 1;
    const int r = vs_mesh_rank(tp), V = c->V, D = c->D, n = c->n;
    char ctx[160];
    snprintf(ctx, sizeof ctx, "vocab tp=%d V=%d D=%d n=%d logits %g*u%+g, rank %d", c->tp, V, D, n, c->scale, c->shift,
             r);

    /* vs_vocab_range for this V and a few others */
    static const int64_t extra[] = {0, 1, 2, 3, 4, 5, 8, 100, 101};
    for (int i = -1; i < (int)(sizeof extra / sizeof extra[0]); i++) {
        int64_t vv = i < 0 ? V : extra[i], s = -5, l = -5, ws, wl;
        chunk(vv, c->tp, r, &ws, &wl);
        VT_OK(vs_vocab_range(tp, vv, &s, &l));
        VT_CHECK(s == ws && l == wl, "%s: vs_vocab_range(%lld) = [%lld, +%lld), want [%lld, +%lld)", ctx,
                 (long long)vv, (long long)s, (long long)l, (long long)ws, (long long)wl);
    }
    int64_t start, rows;
    chunk(V, c->tp, r, &start, &rows);

    /* ids: every chunk boundary of every rank, both ends of the vocab, repeats */
    int32_t* ids = (int32_t*)xalloc(sizeof(int32_t) * (size_t)n);
    {
        int k = 0;
        for (int q = 0; q < c->tp && k < n; q++) {
            int64_t s, l;
            chunk(V, c->tp, q, &s, &l);
            if (l > 0) {
                ids[k++] = (int32_t)s;
                if (k < n) ids[k++] = (int32_t)(s + l - 1);
            }
        }
        if (k < n) ids[k++] = V - 1;
        if (k < n) ids[k++] = 0;
        for (; k < n; k++) ids[k] = (int32_t)(mix32(600, (uint32_t)k) % (uint32_t)V);
        if (n >= 4) ids[n - 1] = ids[1]; /* a repeat */
    }

    /* embedding forward: a plain lookup */
    float* table = (float*)xalloc(sizeof(float) * (size_t)(V * D));
    for (int i = 0; i < V * D; i++) table[i] = (float)fval(601, i);
    float* out = (float*)xalloc(sizeof(float) * (size_t)(n * D));
    memset(out, 0xCD, sizeof(float) * (size_t)(n * D));
    /* a rank that holds no rows may pass NULL for its shards */
    VT_OK(vs_vocab_embedding_forward(tp, rows ? table + start * D : NULL, V, D, ids, n, out));
    int bad = -1;
    for (int i = 0; i < n * D && bad < 0; i++)
        if (out[i] != table[(int64_t)ids[i / D] * D + i % D]) bad = i;
    VT_CHECK(bad < 0, "%s: embedding of token %d (id %d) column %d is %g, want %g", ctx, bad / D,
             bad < 0 ? 0 : ids[bad / D], bad % D, bad < 0 ? 0.0 : out[bad],
             bad < 0 ? 0.0 : table[(int64_t)ids[bad / D] * D + bad % D]);

    /* embedding backward: adds into this rank's rows */
    float* gout = (float*)xalloc(sizeof(float) * (size_t)(n * D));
    for (int i = 0; i < n * D; i++) gout[i] = (float)fval(602, i);
    float* gt = (float*)xalloc(sizeof(float) * (size_t)(rows * D));
    double* gwant = (double*)xalloc(sizeof(double) * (size_t)(rows * D));
    for (int64_t i = 0; i < rows * D; i++) gt[i] = (float)fval(603, start * D + i), gwant[i] = gt[i];
    for (int t = 0; t < n; t++)
        if (ids[t] >= start && ids[t] < start + rows)
            for (int j = 0; j < D; j++) gwant[(ids[t] - start) * D + j] += gout[t * D + j];
    VT_OK(vs_vocab_embedding_backward(tp, gout, ids, n, V, D, rows ? gt : NULL));
    double e = abserr_f(gt, gwant, rows * D);
    VT_CHECK(e <= TOL, "%s: embedding grad of rows [%lld, +%lld) off by %.3g", ctx, (long long)start, (long long)rows, e);

    /* cross-entropy against a double log-softmax of the full logits */
    float* logits = (float*)xalloc(sizeof(float) * (size_t)(n * V));
    for (int i = 0; i < n * V; i++) logits[i] = (float)(c->scale * fval(604, i) + c->shift);
    float* lsh = (float*)xalloc(sizeof(float) * (size_t)(n * rows));
    for (int t = 0; t < n; t++)
        for (int64_t j = 0; j < rows; j++) lsh[t * rows + j] = logits[t * V + start + j];
    double* lwant = (double*)xalloc(sizeof(double) * (size_t)n);
    double* dwant = (double*)xalloc(sizeof(double) * (size_t)(n * rows));
    double maxabs = 0;
    for (int t = 0; t < n; t++) {
        double m = -INFINITY, s = 0;
        for (int j = 0; j < V; j++) m = fmax(m, (double)logits[t * V + j]);
        for (int j = 0; j < V; j++) s += exp((double)logits[t * V + j] - m);
        double lse = m + log(s);
        lwant[t] = lse - (double)logits[t * V + ids[t]];
        for (int64_t j = 0; j < rows; j++)
            dwant[t * rows + j] = exp((double)logits[t * V + start + j] - lse) - (start + j == ids[t] ? 1.0 : 0.0);
        for (int j = 0; j < V; j++) maxabs = fmax(maxabs, fabs((double)logits[t * V + j]));
    }
    float* loss = (float*)xalloc(sizeof(float) * (size_t)n);
    float* grad = (float*)xalloc(sizeof(float) * (size_t)(n * rows));
    memset(loss, 0xCD, sizeof(float) * (size_t)n);
    memset(grad, 0xCD, sizeof(float) * (size_t)(n * rows));
    VT_OK(vs_vocab_cross_entropy(tp, rows ? lsh : NULL, n, V, ids, loss, rows ? grad : NULL));
    if (fabs(c->shift) < 100) {
        CHECK_REL(ctx, "cross-entropy loss", loss, lwant, n);
    } else {
        /* huge logits: no overflow, and as close as f32 at that magnitude allows */
        double ea = abserr_f(loss, lwant, n);
        VT_CHECK(ea <= TOL * maxabs, "%s: loss off by %.3g with logits up to %g (f32 spacing there %.3g)", ctx, ea,
                 maxabs, maxabs * 1.2e-7);
    }
    e = abserr_f(grad, dwant, n * rows);
    VT_CHECK(e <= TOL, "%s: cross-entropy grad of columns [%lld, +%lld) off by %.3g", ctx, (long long)start,
             (long long)rows, e);
    /* without grad_shard: the same loss */
    float* loss2 = (float*)xalloc(sizeof(float) * (size_t)n);
    VT_OK(vs_vocab_cross_entropy(tp, lsh, n, V, ids, loss2, NULL));
    VT_CHECK(memcmp(loss, loss2, sizeof(float) * (size_t)n) == 0, "%s: loss differs with grad_shard NULL", ctx);

    free(ids), free(table), free(out), free(gout), free(gt), free(gwant), free(logits), free(lsh), free(lwant);
    free(dwant), free(loss), free(grad), free(loss2);
    VT_OK(vs_mesh_free(owner));
    return 0;
}

/* ------------------------------------------------------------------------- */
/* 5. Sharding-invariant init                                                */

static const vs_dtype init_dtypes[] = {VS_F32, VS_F64, VS_BF16, VS_F16, VS_I32};
#define N_INIT_DT 5

static vs_init_desc init_desc(int kind)
{
    vs_init_desc d;
    memset(&d, 0, sizeof d);
    d.kind = (vs_init_kind)kind;
    d.seed = 1234 + (uint64_t)kind * 77;
    d.name = "decoder.layers.3.mlp.fc1.weight";
    switch (kind) {
    case VS_INIT_CONSTANT: d.a = 2.5; break;
    case VS_INIT_UNIFORM: d.a = -0.75, d.b = 1.25; break;
    case VS_INIT_NORMAL: d.a = 0.1, d.b = 0.5; break;
    case VS_INIT_SCALED_NORMAL: d.a = -0.05, d.b = 0.02, d.num_layers = 12; break;
    default: break;
    }
    return d;
}

/* Is `stored` the value v rounded to nearest in a format with p fraction bits and
   smallest normal exponent emin (ties either way)? */
static int rounded_ok(double v, double stored, int p, int emin)
{
    if (v == 0) return stored == 0;
    int e;
    frexp(v, &e); /* |v| in [2^(e-1), 2^e) */
    int be = e - 1 < emin ? emin : e - 1;
    double ulp = ldexp(1.0, be - p);
    return fabs(stored - v) <= 0.5 * ulp;
}

static int value_ok(vs_dtype dt, double v, const void* buf, int64_t i)
{
    switch (dt) {
    case VS_F64: return ((const double*)buf)[i] == v;
    case VS_F32: return rounded_ok(v, ((const float*)buf)[i], 23, -126);
    case VS_BF16: return rounded_ok(v, vs_bf16_to_f32(((const uint16_t*)buf)[i]), 7, -126);
    case VS_F16: return rounded_ok(v, vs_f16_to_f32(((const uint16_t*)buf)[i]), 10, -14);
    default: return 1; /* integer rounding is not specified */
    }
}

typedef struct init_cfg {
    int nd;
    int shape[3];
} init_cfg;

static const int64_t init_shapes[][4] = {
    /* ndim, dims */
    {1, 13, 0, 0}, {2, 8, 6, 0}, {2, 7, 5, 0}, {2, 3, 10, 0}, {3, 4, 6, 8},
    {3, 5, 3, 7},  {3, 1, 2, 3}, {2, 0, 5, 0}, {1, 64, 0, 0},
};
#define N_INIT_SHAPES ((int)(sizeof init_shapes / sizeof init_shapes[0]))

/* Every shape x kind x dtype x layout over `mesh`: each shard equals its box of the
   whole tensor filled on the 1-rank mesh `one`. */
static void init_layouts_on(vs_mesh* mesh, vs_mesh* one)
{
    const int me = vs_mesh_rank(mesh), mnd = vs_mesh_ndims(mesh);
    int coord[VS_MESH_MAX_DIMS];
    VT_OK(vs_mesh_coord(mesh, coord));
    char mdesc[64];
    vs_mesh_describe(mesh, mdesc, sizeof mdesc);
    int nfail_report = 0;

    for (int si = 0; si < N_INIT_SHAPES; si++) {
        const int tnd = (int)init_shapes[si][0];
        int64_t shape[3] = {init_shapes[si][1], init_shapes[si][2], init_shapes[si][3]};
        int64_t full = 1;
        for (int d = 0; d < tnd; d++) full *= shape[d];
        for (int kind = VS_INIT_ZEROS; kind <= VS_INIT_SCALED_NORMAL; kind++) {
            vs_init_desc id = init_desc(kind);
            for (int di = 0; di < N_INIT_DT; di++) {
                const vs_dtype dt = init_dtypes[di];
                if (dt == VS_I32 && kind >= VS_INIT_UNIFORM) continue;
                const size_t es = vs_dtype_size(dt);
                char ctx[200];
                snprintf(ctx, sizeof ctx, "init mesh %s kind %d %s shape [%lld,%lld,%lld](%dd), rank %d", mdesc, kind,
                         vs_dtype_name(dt), (long long)shape[0], (long long)shape[1], (long long)shape[2], tnd, me);

                /* the whole tensor on one rank */
                unsigned char* ref = (unsigned char*)xalloc(es * (size_t)full);
                vs_dtensor whole;
                memset(&whole, 0, sizeof whole);
                whole.layout.mesh = one;
                whole.dtype = dt;
                whole.ndim = tnd;
                memcpy(whole.shape, shape, sizeof(int64_t) * (size_t)tnd);
                whole.data = ref;
                VT_OK(vs_init_fill(&whole, &id));
                /* its values: vs_init_value of the global index, rounded to the dtype */
                int64_t badv = -1;
                for (int64_t g = 0; g < full && badv < 0; g++) {
                    double v = vs_init_value(&id, (uint64_t)g);
                    if (!value_ok(dt, v, ref, g)) badv = g;
                    if (kind == VS_INIT_ZEROS && v != 0) badv = g;
                    if (kind == VS_INIT_ONES && (v != 1 || get(dt, ref, g) != 1)) badv = g;
                    if (kind == VS_INIT_CONSTANT && v != 2.5) badv = g;
                }
                VT_CHECK(badv < 0, "%s: whole-tensor element %lld is %.9g, vs_init_value %.17g", ctx, (long long)badv,
                         badv < 0 ? 0.0 : get(dt, ref, badv), badv < 0 ? 0.0 : vs_init_value(&id, (uint64_t)badv));

                /* every layout: each mesh dim Replicate or Shard(any tensor dim) */
                int nl = 1;
                for (int k = 0; k < mnd; k++) nl *= tnd + 1;
                for (int li = 0; li < nl; li++) {
                    vs_dtensor t;
                    memset(&t, 0, sizeof t);
                    t.layout.mesh = mesh;
                    t.dtype = dt;
                    t.ndim = tnd;
                    memcpy(t.shape, shape, sizeof(int64_t) * (size_t)tnd);
                    int64_t ls[3], off[3];
                    for (int d = 0; d < tnd; d++) ls[d] = shape[d], off[d] = 0;
                    for (int k = 0, rest = li; k < mnd; k++, rest /= tnd + 1) {
                        int ch = rest % (tnd + 1);
                        t.layout.p[k] = ch == 0 ? vs_replicate() : vs_shard(ch - 1);
                        if (ch) { /* outer mesh dim first, chunking the chunk */
                            int64_t s, l;
                            chunk(ls[ch - 1], vs_mesh_size(mesh, vs_mesh_dim_name(mesh, k)), coord[k], &s, &l);
                            off[ch - 1] += s;
                            ls[ch - 1] = l;
                        }
                    }
                    char lay[128];
                    vs_layout_format(&t.layout, lay, sizeof lay);
                    int64_t gls[3] = {-1, -1, -1}, goff[3] = {-1, -1, -1}, numel = -1, want_n = 1;
                    VT_OK(vs_layout_local(&t.layout, tnd, shape, me, gls, goff));
                    for (int d = 0; d < tnd; d++) {
                        want_n *= ls[d];
                        VT_CHECK(gls[d] == ls[d] && goff[d] == off[d],
                                 "%s %s: vs_layout_local dim %d: offset %lld size %lld, want %lld %lld", ctx, lay, d,
                                 (long long)goff[d], (long long)gls[d], (long long)off[d], (long long)ls[d]);
                    }
                    VT_OK(vs_dtensor_local_numel(&t, &numel));
                    VT_CHECK(numel == want_n, "%s %s: local numel %lld, want %lld", ctx, lay, (long long)numel,
                             (long long)want_n);
                    unsigned char* buf = (unsigned char*)xalloc(es * (size_t)want_n);
                    memset(buf, 0xEE, es * (size_t)want_n);
                    t.data = want_n ? buf : NULL;
                    VT_OK(vs_init_fill(&t, &id));
                    int64_t idx[3] = {0, 0, 0}, bad = -1, badg = -1;
                    for (int64_t i = 0; i < want_n && bad < 0; i++) {
                        int64_t g = 0;
                        for (int d = 0; d < tnd; d++) g = g * shape[d] + off[d] + idx[d];
                        if (memcmp(buf + (size_t)i * es, ref + (size_t)g * es, es) != 0) bad = i, badg = g;
                        for (int d = tnd - 1; d >= 0 && ++idx[d] == ls[d]; d--) idx[d] = 0;
                    }
                    if (bad >= 0 && nfail_report++ < 8)
                        VT_CHECK(0, "%s %s: local element %lld (global %lld) is %.9g, whole tensor has %.9g", ctx,
                                 lay, (long long)bad, (long long)badg, get(dt, buf, bad), get(dt, ref, badg));
                    free(buf);
                }
                free(ref);
            }
        }
    }
    VT_CHECK(nfail_report == 0, "mesh %s rank %d: %d layout/tensor combinations differ from the whole tensor", mdesc,
             me, nfail_report);
}

static int case_init_layouts(vs_world* w, void* arg)
{
    const init_cfg* c = (const init_cfg*)arg;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    for (int d = 0; d < c->nd; d++) md.shape[d] = c->shape[d];
    vs_mesh* mesh = NULL;
    VT_OK(vs_mesh_init(w, &md, &mesh));
    /* a 1-rank mesh of this rank alone, to fill whole tensors on */
    vs_comm* solo = NULL;
    VT_OK(vs_comm_split(vs_world_comm(w), vs_world_rank(w), 0, &solo));
    vs_mesh* one = NULL;
    memset(&md, 0, sizeof md);
    md.shape[0] = 1;
    md.comm = solo;
    VT_OK(vs_mesh_init(w, &md, &one));
    if (!mesh || !one) return 1;
    init_layouts_on(mesh, one);
    if (c->nd >= 2) {
        /* a submesh with its dims in reverse order: innermost first */
        char dims[2 * VS_MESH_NAME_MAX + 8];
        snprintf(dims, sizeof dims, "%s,%s", vs_mesh_dim_name(mesh, c->nd - 1), vs_mesh_dim_name(mesh, 0));
        vs_mesh* sub = NULL;
        VT_OK(vs_mesh_submesh(mesh, dims, &sub));
        if (sub) init_layouts_on(sub, one);
    }
    VT_OK(vs_mesh_free(one));
    VT_OK(vs_comm_free(solo));
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

/* Statistics of a sharded fill: [R x C] f64 (or f32/bf16/f16) over a (4) mesh,
   Shard(1), summed over ranks. */
typedef struct stat_cfg {
    vs_init_desc d;
    vs_dtype dt;
} stat_cfg;

static void sharded_stats(vs_world* w, const vs_init_desc* id, vs_dtype dt, double* mean, double* sd, double* lo,
                          double* hi, double* frac1, double* count, const char* ctx)
{
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = vs_world_size(w);
    vs_mesh* m = NULL;
    VT_OK(vs_mesh_init(w, &md, &m));
    if (!m) return;
    vs_dtensor t;
    memset(&t, 0, sizeof t);
    t.layout.mesh = m;
    t.layout.p[0] = vs_shard(1);
    t.dtype = dt;
    t.ndim = 2;
    t.shape[0] = 500;
    t.shape[1] = 203; /* 101,500 elements, uneven over 4 */
    int64_t n = 0;
    VT_OK(vs_dtensor_local_numel(&t, &n));
    t.data = xalloc(vs_dtype_size(dt) * (size_t)n);
    VT_OK(vs_init_fill(&t, id));
    double s[4] = {0, 0, 0, 0}, mn = INFINITY, mx = -INFINITY;
    double want_sd = id->kind == VS_INIT_SCALED_NORMAL ? id->b / sqrt(2.0 * id->num_layers) : id->b;
    for (int64_t i = 0; i < n; i++) {
        double v = get(dt, t.data, i);
        s[0] += 1, s[1] += v, s[2] += v * v;
        if (fabs(v - id->a) <= want_sd) s[3] += 1;
        mn = fmin(mn, v), mx = fmax(mx, v);
    }
    vs_comm* cm = vs_mesh_comm(m);
    VT_OK(vs_all_reduce(cm, s, s, 4, VS_F64, VS_OP_SUM, NULL));
    VT_OK(vs_all_reduce(cm, &mn, &mn, 1, VS_F64, VS_OP_MIN, NULL));
    VT_OK(vs_all_reduce(cm, &mx, &mx, 1, VS_F64, VS_OP_MAX, NULL));
    VT_CHECK(s[0] == 500.0 * 203.0, "%s: %g elements over the ranks, want 101500", ctx, s[0]);
    *count = s[0];
    *mean = s[1] / s[0];
    *sd = sqrt((s[2] - s[0] * *mean * *mean) / (s[0] - 1));
    *lo = mn, *hi = mx, *frac1 = s[3] / s[0];
    free(t.data);
    VT_OK(vs_mesh_free(m));
}

static int case_init_stats(vs_world* w, void* arg)
{
    (void)arg;
    const int r = vs_world_rank(w);
    char ctx[160];
    double mean = 0, sd = 0, lo = 0, hi = 0, f1 = 0, N = 1;
    static const vs_dtype dts[] = {VS_F64, VS_F32};
    for (int di = 0; di < 2; di++) {
        vs_dtype dt = dts[di];
        /* normal(a, b) */
        vs_init_desc d;
        memset(&d, 0, sizeof d);
        d.kind = VS_INIT_NORMAL, d.seed = 42, d.name = "w", d.a = 0.5, d.b = 2.0;
        snprintf(ctx, sizeof ctx, "normal(0.5, 2) %s, rank %d", vs_dtype_name(dt), r);
        sharded_stats(w, &d, dt, &mean, &sd, &lo, &hi, &f1, &N, ctx);
        VT_CHECK(fabs(mean - d.a) <= 5 * d.b / sqrt(N), "%s: mean %.5f, want %.5f +- %.5f", ctx, mean, d.a,
                 5 * d.b / sqrt(N));
        VT_CHECK(fabs(sd - d.b) <= 5 * d.b / sqrt(2 * N), "%s: std %.5f, want %.5f +- %.5f", ctx, sd, d.b,
                 5 * d.b / sqrt(2 * N));
        VT_CHECK(fabs(f1 - 0.682689) <= 5 * sqrt(0.682689 * 0.317311 / N), "%s: %.4f within 1 std, want 0.6827", ctx,
                 f1);
        VT_CHECK(isfinite(lo) && isfinite(hi) && lo < d.a - 3 * d.b && hi > d.a + 3 * d.b,
                 "%s: range [%g, %g] lacks tails", ctx, lo, hi);
        /* scaled normal: std b / sqrt(2 L) */
        d.kind = VS_INIT_SCALED_NORMAL, d.a = -0.25, d.b = 0.8, d.num_layers = 8, d.name = "out_proj";
        snprintf(ctx, sizeof ctx, "scaled_normal(-0.25, 0.8, L=8) %s, rank %d", vs_dtype_name(dt), r);
        sharded_stats(w, &d, dt, &mean, &sd, &lo, &hi, &f1, &N, ctx);
        double ws = 0.8 / 4.0;
        VT_CHECK(fabs(mean - d.a) <= 5 * ws / sqrt(N), "%s: mean %.5f, want %.5f", ctx, mean, d.a);
        VT_CHECK(fabs(sd - ws) <= 5 * ws / sqrt(2 * N), "%s: std %.5f, want %.5f +- %.5f", ctx, sd, ws,
                 5 * ws / sqrt(2 * N));
        /* uniform [a, b) */
        d.kind = VS_INIT_UNIFORM, d.a = -1.0, d.b = 3.0, d.num_layers = 0, d.name = "emb";
        snprintf(ctx, sizeof ctx, "uniform[-1, 3) %s, rank %d", vs_dtype_name(dt), r);
        sharded_stats(w, &d, dt, &mean, &sd, &lo, &hi, &f1, &N, ctx);
        double usd = 4.0 / sqrt(12.0);
        VT_CHECK(lo >= d.a && hi < d.b, "%s: values in [%.9g, %.9g], want within [-1, 3)", ctx, lo, hi);
        VT_CHECK(lo < d.a + 0.001 && hi > d.b - 0.001, "%s: values in [%g, %g] do not reach the ends", ctx, lo, hi);
        VT_CHECK(fabs(mean - 1.0) <= 5 * usd / sqrt(N), "%s: mean %.5f, want 1", ctx, mean);
        VT_CHECK(fabs(sd - usd) <= 5 * usd * sqrt(0.8 / (4 * N)), "%s: std %.5f, want %.5f", ctx, sd, usd);
    }
    /* the raw values of uniform stay in [a, b) */
    vs_init_desc u;
    memset(&u, 0, sizeof u);
    u.kind = VS_INIT_UNIFORM, u.seed = 9, u.name = "u", u.a = 2.0, u.b = 2.5;
    for (uint64_t i = 0; i < 20000; i += 1 + (uint64_t)r) {
        double v = vs_init_value(&u, i);
        if (!(v >= u.a && v < u.b)) {
            VT_CHECK(0, "uniform[2, 2.5) vs_init_value(%llu) = %.17g", (unsigned long long)i, v);
            break;
        }
    }
    return 0;
}

/* Uniform [a, b) after rounding to the half types (kept apart: see the report). */
static int case_init_uniform_half(vs_world* w, void* arg)
{
    (void)arg;
    static const vs_dtype dts[] = {VS_BF16, VS_F16};
    for (int di = 0; di < 2; di++) {
        vs_init_desc d;
        memset(&d, 0, sizeof d);
        d.kind = VS_INIT_UNIFORM, d.seed = 7, d.name = "w", d.a = -1.0, d.b = 1.0;
        char ctx[96];
        snprintf(ctx, sizeof ctx, "uniform[-1, 1) %s, rank %d", vs_dtype_name(dts[di]), vs_world_rank(w));
        double mean = 0, sd = 0, lo = 0, hi = 0, f1 = 0, N = 1;
        sharded_stats(w, &d, dts[di], &mean, &sd, &lo, &hi, &f1, &N, ctx);
        VT_CHECK(lo >= d.a && hi < d.b, "%s: stored values in [%.9g, %.9g], want within [-1, 1)", ctx, lo, hi);
        VT_CHECK(fabs(mean) <= 5 * (2.0 / sqrt(12.0)) / sqrt(N), "%s: mean %.5f, want 0", ctx, mean);
    }
    return 0;
}

static void case_init_keys(void)
{
    vs_init_desc a;
    memset(&a, 0, sizeof a);
    a.kind = VS_INIT_NORMAL, a.seed = 1, a.name = "layer.0.weight", a.a = 0, a.b = 1;
    vs_init_desc b = a, c = a, e = a, f = a, g = a;
    b.name = "layer.1.weight";
    c.seed = 2;
    e.name = NULL;
    f.name = "";
    g.kind = VS_INIT_UNIFORM;
    int same_name = 0, same_seed = 0, same_null = 0, same_self = 0, same_idx = 0;
    const int N = 4096;
    for (int i = 0; i < N; i++) {
        double va = vs_init_value(&a, (uint64_t)i);
        same_name += va == vs_init_value(&b, (uint64_t)i);
        same_seed += va == vs_init_value(&c, (uint64_t)i);
        same_null += vs_init_value(&e, (uint64_t)i) == vs_init_value(&f, (uint64_t)i);
        same_self += va == vs_init_value(&a, (uint64_t)i);
        same_idx += va == vs_init_value(&a, (uint64_t)i + 1);
    }
    VT_CHECK(same_name == 0, "names layer.0/layer.1 agree at %d of %d elements", same_name, N);
    VT_CHECK(same_seed == 0, "seeds 1/2 agree at %d of %d elements", same_seed, N);
    VT_CHECK(same_idx == 0, "neighbouring indices agree at %d of %d elements", same_idx, N);
    VT_CHECK(same_self == N, "vs_init_value is not deterministic (%d of %d)", same_self, N);
    VT_CHECK(same_null == N, "name NULL and \"\" differ (%d of %d agree)", same_null, N);
    /* the seed is not just xor-ed into the name hash: (seed, name) pairs differ */
    int pairs = 0;
    for (uint64_t s = 0; s < 16; s++)
        for (uint64_t s2 = s + 1; s2 < 16; s2++) {
            vs_init_desc p = a, q = a;
            p.seed = s, q.seed = s2;
            pairs += vs_init_value(&p, 5) == vs_init_value(&q, 5);
        }
    VT_CHECK(pairs == 0, "%d pairs of seeds 0..15 give the same value at index 5", pairs);
    /* uniform and normal of one key are different draws of the same stream: both finite */
    VT_CHECK(isfinite(vs_init_value(&g, 0)) && isfinite(vs_init_value(&a, 0)), "non-finite init values");
    /* bad descs are errors, not values: NaN with the reason */
    VT_CHECK(isnan(vs_init_value(NULL, 3)) && strstr(vs_last_error(), "desc is NULL"), "vs_init_value(NULL): %s",
             vs_last_error());
    vs_init_desc bad = g;
    bad.kind = (vs_init_kind)42;
    VT_CHECK(isnan(vs_init_value(&bad, 3)) && strstr(vs_last_error(), "invalid init kind 42"),
             "vs_init_value(kind 42): %s", vs_last_error());
    bad.kind = VS_INIT_SCALED_NORMAL;
    bad.num_layers = 0;
    VT_CHECK(isnan(vs_init_value(&bad, 3)) && strstr(vs_last_error(), "num_layers 0"), "scaled normal, 0 layers: %s",
             vs_last_error());
    VT_CHECK(vs_philox(1, 2, 3, NULL) == VS_ERR_NULL, "vs_philox(NULL out)");
}

static void case_philox(void)
{
    /* Random123 kat_vectors, philox4x32 10 rounds: counter words 0..3, key words 0..1 */
    static const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e, 0xa20bc7c6,
         0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb, 0x5001e420,
         0x24126ea1},
    };
    for (int i = 0; i < 3; i++) {
        const uint32_t* k = kat[i];
        uint64_t lo = (uint64_t)k[1] << 32 | k[0], hi = (uint64_t)k[3] << 32 | k[2], key = (uint64_t)k[5] << 32 | k[4];
        uint32_t out[4] = {1, 2, 3, 4};
        vs_philox(key, lo, hi, out);
        VT_CHECK(out[0] == k[6] && out[1] == k[7] && out[2] == k[8] && out[3] == k[9],
                 "philox4x32-10 kat %d: got {%08x %08x %08x %08x}, want {%08x %08x %08x %08x}", i, out[0], out[1],
                 out[2], out[3], k[6], k[7], k[8], k[9]);
    }
}

/* ------------------------------------------------------------------------- */
/* 6. Bad input                                                              */

/* ------------------------------------------------------------------------- */
/* 4b. Row-parallel output with its bias (vs_tp_reduce_forward_bias)          */

/* y = x W^T + b, W [N, K] row-parallel (each TP rank holds columns k of W and
   of x, torch.chunk), against the whole product on one rank. exact: small
   integers, so every partial sum is exact in every dtype and the result must
   equal the reference exactly (a bias added on every rank before the sum, or
   never, cannot pass); else values in [-1, 1], within 1e-6 relative (f32) or
   1e-12 (f64) of a double reference. Every TP rank must hold the same bits. */
typedef struct {
    int dp, tp, B, K, N;
    vs_dtype dt, bdt;
    int exact;
} bias_cfg;

static double bias_val(const bias_cfg* c, uint32_t seed, int64_t i)
{
    return c->exact ? (double)((int)(mix32(seed, (uint32_t)i) % 7u) - 3) : fval(seed, i);
}

static int case_bias(vs_world* w, void* arg)
{
    const bias_cfg* c = (const bias_cfg*)arg;
    vs_mesh* owner = NULL;
    int dpc = 0;
    vs_mesh* tp = tp_mesh(w, c->dp, c->tp, &owner, &dpc);
    if (!tp) return 1;
    int coord = vs_mesh_rank(tp);
    int64_t k0 = 0, kl = 0;
    chunk(c->K, c->tp, coord, &k0, &kl);
    size_t es = vs_dtype_size(c->dt), bes = vs_dtype_size(c->bdt);
    void* y = xalloc((size_t)(c->B * c->N) * es);
    void* b = xalloc((size_t)c->N * bes);
    double* ref = (double*)xalloc(sizeof(double) * (size_t)(c->B * c->N));
    uint32_t sx = 900 + (uint32_t)dpc, sw = 950, sb = 970; /* each DP group its own x */
    for (int64_t n = 0; n < c->N; n++) put(c->bdt, b, n, bias_val(c, sb, n));
    for (int64_t i = 0; i < c->B; i++)
        for (int64_t n = 0; n < c->N; n++) {
            double part = 0, whole = 0;
            for (int64_t k = 0; k < c->K; k++) {
                double p = bias_val(c, sx, i * c->K + k) * bias_val(c, sw, n * c->K + k);
                whole += p;
                if (k >= k0 && k < k0 + kl) part += p;
            }
            put(c->dt, y, i * c->N + n, part); /* this rank's partial, rounded to the dtype */
            ref[i * c->N + n] = whole + get(c->bdt, b, n);
        }
    VT_OK(vs_tp_reduce_forward_bias(tp, y, c->B, c->N, c->dt, b, c->bdt));
    double tol = c->exact ? 0 : c->dt == VS_F64 ? 1e-12 : 1e-6, mx = maxabs_d(ref, c->B * c->N), err = 0;
    for (int64_t i = 0; i < c->B * c->N; i++) err = fmax(err, fabs(get(c->dt, y, i) - ref[i]));
    if (mx > 0) err /= c->exact ? 1 : mx;
    VT_CHECK(err <= tol, "rank %d: y = x W^T + b off by %.3g (tolerance %g)", vs_world_rank(w), err, tol);
    /* the same bits on every TP rank: the min and max of a hash over TP agree */
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < (size_t)(c->B * c->N) * es; i++) h = (h ^ ((unsigned char*)y)[i]) * 16777619u;
    int32_t hs[2] = {(int32_t)(h & 0x7fffffff), (int32_t)(h & 0x7fffffff)};
    VT_OK(vs_all_reduce(vs_mesh_comm(tp), hs, hs, 1, VS_I32, VS_OP_MAX, NULL));
    VT_OK(vs_all_reduce(vs_mesh_comm(tp), hs + 1, hs + 1, 1, VS_I32, VS_OP_MIN, NULL));
    VT_CHECK(hs[0] == hs[1], "rank %d: the TP ranks hold different bits", vs_world_rank(w));
    free(y);
    free(b);
    free(ref);
    VT_OK(vs_mesh_free(owner));
    return 0;
}

static int case_errors(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = 2, md.shape[1] = 2;
    vs_mesh* m2 = NULL;
    VT_OK(vs_mesh_init(w, &md, &m2));
    if (!m2) return 1;
    vs_mesh* tp = NULL;
    VT_OK(vs_mesh_submesh(m2, "TP", &tp));
    if (!tp) return 1;
    char ctx[64];
    snprintf(ctx, sizeof ctx, "errors, rank %d", vs_world_rank(w));
    const unsigned char S = 0x5A;
    float buf[64], buf2[64];
    int32_t ids[4] = {0, 1, 2, 3};
    const int64_t sh[3] = {4, 2, 3};
    memset(buf2, 0, sizeof buf2);

    /* TP helpers need a 1-D mesh: the whole (2,2) mesh is refused */
    struct {
        const char* fn;
        int which;
    } calls[] = {{"vs_tp_copy_backward", 0},        {"vs_tp_reduce_forward", 1},    {"vs_sp_gather_forward", 2},
                 {"vs_sp_gather_backward", 3},      {"vs_sp_scatter_forward", 4},   {"vs_sp_scatter_backward", 5},
                 {"vs_vocab_range", 6},             {"vs_vocab_embedding_forward", 7},
                 {"vs_vocab_embedding_backward", 8}, {"vs_vocab_cross_entropy", 9},
                 {"vs_tp_reduce_forward_bias", 10}};
    for (int pass = 0; pass < 2; pass++) {
        vs_mesh* mm = pass ? NULL : m2;
        for (int i = 0; i < (int)(sizeof calls / sizeof calls[0]); i++) {
            memset(buf, S, sizeof buf);
            int64_t st = 77, rows = 77;
            vs_result rc = VS_OK;
            switch (calls[i].which) {
            case 0: rc = vs_tp_copy_backward(mm, buf, 16, VS_F32); break;
            case 1: rc = vs_tp_reduce_forward(mm, buf, 16, VS_F32); break;
            case 2: rc = vs_sp_gather_forward(mm, VS_F32, 3, sh, 0, buf2, buf); break;
            case 3: rc = vs_sp_gather_backward(mm, VS_F32, 3, sh, 0, buf2, buf); break;
            case 4: rc = vs_sp_scatter_forward(mm, VS_F32, 3, sh, 0, buf2, buf); break;
            case 5: rc = vs_sp_scatter_backward(mm, VS_F32, 3, sh, 0, buf2, buf); break;
            case 6: rc = vs_vocab_range(mm, 10, &st, &rows); break;
            case 7: rc = vs_vocab_embedding_forward(mm, buf2, 10, 2, ids, 4, buf); break;
            case 8: rc = vs_vocab_embedding_backward(mm, buf2, ids, 4, 10, 2, buf); break;
            case 9: rc = vs_vocab_cross_entropy(mm, buf2, 2, 10, ids, buf, buf + 32); break;
            case 10: rc = vs_tp_reduce_forward_bias(mm, buf, 4, 4, VS_F32, buf2, VS_F32); break;
            }
            char what[96];
            snprintf(what, sizeof what, "%s on %s", calls[i].fn, pass ? "a NULL mesh" : "the 2-D mesh");
            /* (the vocab helpers report these under "vs_vocab_range": see the report) */
            const char* named = calls[i].which <= 6 || calls[i].which == 10 ? calls[i].fn : NULL;
            if (pass)
                expect_err(ctx, what, rc, VS_ERR_NULL, "mesh", named, 0, 0);
            else
                expect_err(ctx, what, rc, VS_ERR_INVALID, "dim", named, 1, 2);
            VT_CHECK(untouched(buf, sizeof buf, S) && st == 77 && rows == 77, "%s: %s wrote its output", ctx, what);
        }
    }

    /* seq_dim out of range, bad ndim, negative shape */
    {
        static const int bad_seq[] = {3, -1, 8};
        for (int i = 0; i < 3; i++)
            for (int f = 0; f < 4; f++) {
                memset(buf, S, sizeof buf);
                vs_result rc;
                const char* fn;
                int sd = bad_seq[i];
                if (f == 0) fn = "vs_sp_gather_forward", rc = vs_sp_gather_forward(tp, VS_F32, 3, sh, sd, buf2, buf);
                else if (f == 1) fn = "vs_sp_gather_backward", rc = vs_sp_gather_backward(tp, VS_F32, 3, sh, sd, buf2, buf);
                else if (f == 2) fn = "vs_sp_scatter_forward", rc = vs_sp_scatter_forward(tp, VS_F32, 3, sh, sd, buf2, buf);
                else fn = "vs_sp_scatter_backward", rc = vs_sp_scatter_backward(tp, VS_F32, 3, sh, sd, buf2, buf);
                char what[80];
                snprintf(what, sizeof what, "%s seq_dim %d of 3 dims", fn, sd);
                expect_err(ctx, what, rc, VS_ERR_INVALID, "seq_dim", NULL, 1, sd);
                VT_CHECK(untouched(buf, sizeof buf, S), "%s: %s wrote its output", ctx, what);
            }
        memset(buf, S, sizeof buf);
        vs_result rc = vs_sp_gather_forward(tp, VS_F32, 0, sh, 0, buf2, buf);
        expect_err(ctx, "vs_sp_gather_forward ndim 0", rc, VS_ERR_INVALID, "ndim", NULL, 1, 0);
        rc = vs_sp_scatter_backward(tp, VS_F32, 9, sh, 0, buf2, buf);
        expect_err(ctx, "vs_sp_scatter_backward ndim 9", rc, VS_ERR_INVALID, "ndim", NULL, 1, 9);
        const int64_t neg[2] = {4, -3};
        rc = vs_sp_gather_forward(tp, VS_F32, 2, neg, 0, buf2, buf);
        expect_err(ctx, "vs_sp_gather_forward shape [4, -3]", rc, VS_ERR_INVALID, NULL, NULL, 1, -3);
        VT_CHECK(untouched(buf, sizeof buf, S), "%s: bad ndim/shape wrote the output", ctx);
    }

    /* the row-parallel bias: NULL buffers, bad sizes, dtypes; nothing written */
    {
        const char* fn = "vs_tp_reduce_forward_bias";
        struct {
            const char* what;
            int nully, nullb;
            int64_t rows, cols;
            vs_dtype dt, bdt;
            vs_result want;
            const char *s1, *s2;
            int numc;
            long long num;
        } bad[] = {
            {"y NULL", 1, 0, 2, 4, VS_F32, VS_F32, VS_ERR_NULL, "y is NULL", NULL, 1, 4},
            {"bias NULL", 0, 1, 2, 4, VS_F32, VS_F32, VS_ERR_NULL, "bias is NULL", NULL, 1, 4},
            {"rows -1", 0, 0, -1, 4, VS_F32, VS_F32, VS_ERR_INVALID, "rows", NULL, 1, -1},
            {"cols -3", 0, 0, 2, -3, VS_F32, VS_F32, VS_ERR_INVALID, "cols", NULL, 1, -3},
            {"rows x cols overflow", 0, 0, (int64_t)1 << 40, (int64_t)1 << 40, VS_F32, VS_F32, VS_ERR_INVALID,
             "overflow", NULL, 1, (long long)1 << 40},
            {"bias f64 for y f32", 0, 0, 2, 4, VS_F32, VS_F64, VS_ERR_MISMATCH, "bias dtype f64", "f32", 0, 0},
            {"bias f16 for y bf16", 0, 0, 2, 4, VS_BF16, VS_F16, VS_ERR_MISMATCH, "bias dtype f16", "bf16", 0, 0},
            {"bias f32 for y f64", 0, 0, 2, 4, VS_F64, VS_F32, VS_ERR_MISMATCH, "bias dtype f32", "f64", 0, 0},
            {"y i32", 0, 0, 2, 4, VS_I32, VS_I32, VS_ERR_INVALID, "i32", NULL, 0, 0},
            {"y dtype 99", 0, 0, 2, 4, (vs_dtype)99, VS_F32, VS_ERR_INVALID, "dtype", NULL, 1, 99},
        };
        for (int i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
            memset(buf, S, sizeof buf);
            vs_result rc = vs_tp_reduce_forward_bias(tp, bad[i].nully ? NULL : buf, bad[i].rows, bad[i].cols,
                                                     bad[i].dt, bad[i].nullb ? NULL : buf2, bad[i].bdt);
            char what[96];
            snprintf(what, sizeof what, "%s %s", fn, bad[i].what);
            expect_err(ctx, what, rc, bad[i].want, bad[i].s1, bad[i].s2, bad[i].numc, bad[i].num);
            VT_CHECK(strstr(vs_last_error(), fn) != NULL, "%s: %s: message does not name the call", ctx, what);
            VT_CHECK(untouched(buf, sizeof buf, S), "%s: %s wrote y", ctx, what);
        }
    }

    /* vocab: ids out of range name the id; nothing written */
    {
        float table[10 * 2];
        for (int i = 0; i < 20; i++) table[i] = (float)i;
        int64_t st = 77, rows = 77;
        vs_result rc = vs_vocab_range(tp, -5, &st, &rows);
        expect_err(ctx, "vs_vocab_range vocab -5", rc, VS_ERR_INVALID, NULL, NULL, 1, -5);
        VT_CHECK(st == 77 && rows == 77, "%s: vs_vocab_range(-5) wrote its output", ctx);
        VT_CHECK(vs_vocab_range(tp, 10, NULL, &rows) == VS_ERR_NULL, "%s: vs_vocab_range(start NULL) not NULL", ctx);
        VT_OK(vs_vocab_range(tp, 37, &st, &rows));
        static const int32_t badid[][4] = {{0, 37, 1, 2}, {-1, 0, 1, 2}, {0, 1, 2, 40}};
        static const int badval[] = {37, -1, 40};
        for (int k = 0; k < 3; k++) {
            char what[96];
            memset(buf, S, sizeof buf);
            rc = vs_vocab_embedding_forward(tp, table, 37, 1, badid[k], 4, buf);
            snprintf(what, sizeof what, "vs_vocab_embedding_forward id %d of vocab 37", badval[k]);
            expect_err(ctx, what, rc, VS_ERR_INVALID, "id", NULL, 1, badval[k]);
            VT_CHECK(untouched(buf, sizeof buf, S), "%s: %s wrote its output", ctx, what);
            rc = vs_vocab_embedding_backward(tp, table, badid[k], 4, 37, 1, buf);
            snprintf(what, sizeof what, "vs_vocab_embedding_backward id %d of vocab 37", badval[k]);
            expect_err(ctx, what, rc, VS_ERR_INVALID, "id", NULL, 1, badval[k]);
            VT_CHECK(untouched(buf, sizeof buf, S), "%s: %s wrote the table gradient", ctx, what);
            float logits[4 * 19];
            for (int i = 0; i < 4 * 19; i++) logits[i] = 0.01f * (float)i;
            rc = vs_vocab_cross_entropy(tp, logits, 4, 37, badid[k], buf, buf + 4);
            snprintf(what, sizeof what, "vs_vocab_cross_entropy target %d of vocab 37", badval[k]);
            expect_err(ctx, what, rc, VS_ERR_INVALID, NULL, NULL, 1, badval[k]);
            VT_CHECK(untouched(buf, sizeof buf, S), "%s: %s wrote loss or grad", ctx, what);
        }
    }

    /* init: Partial, random on integers, num_layers < 1, invalid kind, NULLs */
    {
        unsigned char data[512];
        vs_dtensor t;
        memset(&t, 0, sizeof t);
        t.layout.mesh = m2;
        t.dtype = VS_F32;
        t.ndim = 2;
        t.shape[0] = 6, t.shape[1] = 5;
        t.data = data;
        vs_init_desc d;
        memset(&d, 0, sizeof d);
        d.kind = VS_INIT_NORMAL, d.seed = 3, d.name = "proj.weight", d.a = 0, d.b = 1;

        t.layout.p[0] = vs_replicate(), t.layout.p[1] = vs_partial(VS_OP_SUM);
        memset(data, S, sizeof data);
        vs_result rc = vs_init_fill(&t, &d);
        expect_err(ctx, "init of a [R, Partial(sum)] tensor", rc, VS_ERR_INVALID, "Partial", "TP", 0, 0);
        VT_CHECK(untouched(data, sizeof data, S), "%s: init of a Partial tensor wrote data", ctx);
        t.layout.p[0] = vs_partial(VS_OP_MAX), t.layout.p[1] = vs_shard(0);
        rc = vs_init_fill(&t, &d);
        expect_err(ctx, "init of a [Partial(max), S(0)] tensor", rc, VS_ERR_INVALID, "Partial", "DP", 0, 0);
        VT_CHECK(untouched(data, sizeof data, S), "%s: init of a Partial tensor wrote data", ctx);
        d.kind = VS_INIT_ZEROS;
        rc = vs_init_fill(&t, &d);
        expect_err(ctx, "zeros init of a Partial tensor", rc, VS_ERR_INVALID, "Partial", NULL, 0, 0);
        VT_CHECK(untouched(data, sizeof data, S), "%s: zeros init of a Partial tensor wrote data", ctx);

        t.layout.p[0] = vs_shard(0), t.layout.p[1] = vs_shard(1);
        static const vs_dtype ints[] = {VS_I32, VS_I64, VS_U8};
        for (int i = 0; i < 3; i++)
            for (int k = VS_INIT_UNIFORM; k <= VS_INIT_SCALED_NORMAL; k++) {
                t.dtype = ints[i];
                d.kind = (vs_init_kind)k;
                d.num_layers = 4;
                char what[80];
                snprintf(what, sizeof what, "random init kind %d of %s", k, vs_dtype_name(ints[i]));
                rc = vs_init_fill(&t, &d);
                expect_err(ctx, what, rc, VS_ERR_INVALID, vs_dtype_name(ints[i]), NULL, 0, 0);
                VT_CHECK(untouched(data, sizeof data, S), "%s: %s wrote data", ctx, what);
            }
        /* non-random kinds are fine on integers */
        t.dtype = VS_I32;
        d.kind = VS_INIT_ONES;
        VT_OK(vs_init_fill(&t, &d));
        int64_t n = 0, s0, l0, s1, l1;
        VT_OK(vs_dtensor_local_numel(&t, &n));
        chunk(6, 2, vs_mesh_coord_along(m2, "DP"), &s0, &l0);
        chunk(5, 2, vs_mesh_coord_along(m2, "TP"), &s1, &l1);
        int ones = 1;
        for (int64_t i = 0; i < n; i++) ones &= ((int32_t*)(void*)data)[i] == 1;
        VT_CHECK(ones && n == l0 * l1, "%s: ones init of i32 shard (%lld elements, want %lld)", ctx, (long long)n,
                 (long long)(l0 * l1));
        VT_CHECK(data[n * 4] == S, "%s: ones init wrote past the shard", ctx);

        t.dtype = VS_BF16;
        memset(data, S, sizeof data);
        static const int bad_layers[] = {0, -2};
        for (int i = 0; i < 2; i++) {
            d.kind = VS_INIT_SCALED_NORMAL, d.num_layers = bad_layers[i];
            char what[64];
            snprintf(what, sizeof what, "scaled normal with num_layers %d", bad_layers[i]);
            rc = vs_init_fill(&t, &d);
            expect_err(ctx, what, rc, VS_ERR_INVALID, "num_layers", NULL, 1, bad_layers[i]);
            VT_CHECK(untouched(data, sizeof data, S), "%s: %s wrote data", ctx, what);
        }
        static const int bad_kind[] = {42, -1, VS_INIT_SCALED_NORMAL + 1};
        for (int i = 0; i < 3; i++) {
            d.kind = (vs_init_kind)bad_kind[i];
            d.num_layers = 4;
            char what[64];
            snprintf(what, sizeof what, "init kind %d", bad_kind[i]);
            rc = vs_init_fill(&t, &d);
            expect_err(ctx, what, rc, VS_ERR_INVALID, "kind", NULL, 1, bad_kind[i]);
            VT_CHECK(untouched(data, sizeof data, S), "%s: %s wrote data", ctx, what);
        }
        d.kind = VS_INIT_NORMAL;
        rc = vs_init_fill(NULL, &d);
        expect_err(ctx, "vs_init_fill(NULL tensor)", rc, VS_ERR_NULL, NULL, NULL, 0, 0);
        rc = vs_init_fill(&t, NULL);
        expect_err(ctx, "vs_init_fill(NULL desc)", rc, VS_ERR_NULL, NULL, NULL, 0, 0);
        t.data = NULL;
        rc = vs_init_fill(&t, &d);
        expect_err(ctx, "vs_init_fill(data NULL)", rc, VS_ERR_NULL, NULL, NULL, 0, 0);
        t.data = data;
        t.layout.p[1] = vs_shard(2);
        rc = vs_init_fill(&t, &d);
        expect_err(ctx, "vs_init_fill Shard(2) of a 2-D tensor", rc, VS_ERR_INVALID, NULL, NULL, 0, 0);
        VT_CHECK(untouched(data, sizeof data, S), "%s: bad init wrote data", ctx);
    }

    /* the TP communicator still works after all that */
    float one = 1.0f + (float)vs_mesh_rank(tp);
    VT_OK(vs_tp_reduce_forward(tp, &one, 1, VS_F32));
    VT_CHECK(one == 3.0f, "%s: TP all-reduce after errors gave %g, want 3", ctx, one);
    VT_OK(vs_mesh_free(m2));
    return 0;
}

/* ------------------------------------------------------------------------- */

int main(void)
{
    char name[160];

    /* 1. MLP */
    static const mlp_cfg mlps[] = {
        {1, 2, 5, 8, 16, 0}, {1, 4, 5, 8, 16, 0}, {1, 4, 6, 8, 14, 0}, /* 14 over 4: 4,4,4,2 */
        {2, 2, 5, 8, 16, 0}, {2, 4, 4, 6, 12, 0}, {1, 3, 5, 6, 10, 0},
        {1, 4, 7, 8, 16, 1}, /* sequence parallel, 7 tokens over 4 */
        {2, 2, 5, 6, 12, 1}, {1, 4, 3, 8, 16, 1}, /* 3 tokens over 4: one rank has none */
        {1, 1, 4, 5, 7, 0},
    };
    for (int i = 0; i < (int)(sizeof mlps / sizeof mlps[0]); i++) {
        const mlp_cfg* c = &mlps[i];
        if (c->dp > 1)
            snprintf(name, sizeof name, "tp mlp mesh (%d,%d) TP submesh: T=%d H=%d F=%d%s", c->dp, c->tp, c->T, c->H,
                     c->F, c->sp ? ", sequence parallel" : "");
        else
            snprintf(name, sizeof name, "tp mlp TP=%d: T=%d H=%d F=%d%s", c->tp, c->T, c->H, c->F,
                     c->sp ? ", sequence parallel" : "");
        VT_CASE(name, launch(c->dp * c->tp, case_mlp, (void*)c));
    }

    /* 2. attention */
    static const attn_cfg attns[] = {
        {1, 2, 6, 8, 4, 4, 0}, {1, 4, 6, 8, 4, 4, 1}, {2, 2, 5, 8, 4, 2, 1},
        {1, 2, 5, 6, 3, 4, 0}, /* 3 heads over 2 */
        {1, 4, 4, 6, 3, 2, 1}, /* 3 heads over 4: one rank has none */
    };
    for (int i = 0; i < (int)(sizeof attns / sizeof attns[0]); i++) {
        const attn_cfg* c = &attns[i];
        snprintf(name, sizeof name, "tp attention %s%d%s: S=%d D=%d %d heads of %d%s", c->dp > 1 ? "mesh (2," : "TP=",
                 c->tp, c->dp > 1 ? ") TP submesh" : "", c->S, c->D, c->nh, c->dh, c->causal ? ", causal" : "");
        VT_CASE(name, launch(c->dp * c->tp, case_attn, (void*)c));
    }

    /* 3. sequence parallelism */
    static const sp_cfg sps[] = {
        {4, 3, {7, 2, 5}, 0, VS_F32}, /* [seq, batch, hidden] */
        {4, 3, {2, 7, 5}, 1, VS_F32}, /* [batch, seq, hidden] */
        {4, 3, {8, 3, 4}, 0, VS_F64}, {4, 3, {3, 9, 2}, 1, VS_BF16}, {4, 3, {3, 3, 2}, 0, VS_I32},
        {2, 3, {7, 2, 3}, 0, VS_F32}, {2, 3, {2, 7, 3}, 1, VS_F16},  {3, 3, {2, 10, 3}, 1, VS_F32},
        {4, 2, {5, 6, 0}, 0, VS_F32}, /* 5 over 4: 2,2,1,0 */
        {4, 3, {2, 3, 6}, 2, VS_F32}, {1, 3, {7, 2, 3}, 1, VS_F32}, {4, 3, {0, 2, 3}, 0, VS_F32},
    };
    for (int i = 0; i < (int)(sizeof sps / sizeof sps[0]); i++) {
        const sp_cfg* c = &sps[i];
        char sh[64];
        snprintf(sh, sizeof sh, "%lld,%lld", (long long)c->shape[0], (long long)c->shape[1]);
        if (c->ndim > 2) snprintf(sh + strlen(sh), sizeof sh - strlen(sh), ",%lld", (long long)c->shape[2]);
        snprintf(name, sizeof name, "sp gather/scatter TP=%d %s shape [%s] seq_dim %d", c->tp, vs_dtype_name(c->dt),
                 sh, c->seq_dim);
        VT_CASE(name, launch(c->tp, case_sp, (void*)c));
    }

    /* 4. vocab parallel */
    static const vocab_cfg vocs[] = {
        {1, 37, 5, 11, 3.0, 0}, {2, 37, 5, 11, 3.0, 0}, {3, 37, 5, 11, 3.0, 0}, {4, 37, 5, 11, 3.0, 0},
        {4, 3, 2, 6, 2.0, 0.5}, /* vocab 3 over 4: one rank holds no rows */
        {3, 37, 4, 9, 5.0, 1000.0}, /* huge logits: no overflow */
        {2, 37, 4, 0, 1.0, 0},      /* no tokens */
    };
    for (int i = 0; i < (int)(sizeof vocs / sizeof vocs[0]); i++) {
        const vocab_cfg* c = &vocs[i];
        snprintf(name, sizeof name, "vocab parallel TP=%d: vocab %d, dim %d, %d tokens%s", c->tp, c->V, c->D, c->n,
                 c->shift >= 100 ? ", logits near 1000" : "");
        VT_CASE(name, launch(c->tp, case_vocab, (void*)c));
    }

    /* 4b. row-parallel bias */
    static const bias_cfg biases[] = {
        {1, 2, 5, 8, 6, VS_F32, VS_F32, 1},   {1, 4, 5, 8, 6, VS_F32, VS_F32, 1},
        {1, 4, 7, 10, 5, VS_F32, VS_F32, 0},  /* 10 columns over 4: 3,3,3,1 */
        {2, 2, 4, 9, 6, VS_F32, VS_F32, 0},   {1, 2, 4, 8, 6, VS_F64, VS_F64, 0},
        {1, 2, 5, 8, 6, VS_BF16, VS_BF16, 1}, {1, 4, 5, 8, 6, VS_BF16, VS_F32, 1},
        {1, 4, 5, 8, 6, VS_F16, VS_F16, 1},   {1, 2, 3, 8, 6, VS_F16, VS_F32, 1},
        {1, 4, 3, 2, 4, VS_F32, VS_F32, 1},   /* 2 columns over 4: two ranks add nothing */
        {1, 2, 0, 8, 6, VS_F32, VS_F32, 1},   /* no rows */
    };
    for (int i = 0; i < (int)(sizeof biases / sizeof biases[0]); i++) {
        const bias_cfg* c = &biases[i];
        snprintf(name, sizeof name, "row-parallel bias %s%d%s: y [%d, %d] = x [%d, %d] W^T + b, %s y, %s bias%s",
                 c->dp > 1 ? "mesh (2," : "DP1 x TP", c->tp, c->dp > 1 ? ") TP submesh" : "", c->B, c->N, c->B,
                 c->K, vs_dtype_name(c->dt), vs_dtype_name(c->bdt), c->exact ? ", exact" : "");
        VT_CASE(name, launch(c->dp * c->tp, case_bias, (void*)c));
    }

    /* 5. init */
    VT_CASE("philox4x32-10 known answers (Random123)", case_philox());
    VT_CASE("init keys: names, seeds, indices give different values", case_init_keys());
    static const init_cfg inits[] = {{1, {4, 0, 0}}, {2, {2, 2, 0}}, {3, {2, 2, 2}}, {2, {2, 3, 0}}};
    for (int i = 0; i < (int)(sizeof inits / sizeof inits[0]); i++) {
        const init_cfg* c = &inits[i];
        int n = 1;
        char sh[32] = "";
        for (int d = 0; d < c->nd; d++) {
            n *= c->shape[d];
            snprintf(sh + strlen(sh), sizeof sh - strlen(sh), "%s%d", d ? "," : "", c->shape[d]);
        }
        snprintf(name, sizeof name, "init sharding-invariant on mesh (%s): every kind, dtype, layout", sh);
        VT_CASE(name, launch(n, case_init_layouts, (void*)c));
    }
    VT_CASE("init statistics: normal, scaled normal, uniform (f64, f32) over 4 shards", launch(4, case_init_stats, NULL));
    VT_CASE("init uniform [a, b) holds after rounding to bf16 and f16", launch(4, case_init_uniform_half, NULL));

    /* 6. bad input */
    VT_CASE("bad input: TP helpers and init (mesh (2,2))", launch(4, case_errors, NULL));

    return vt_summary();
}
