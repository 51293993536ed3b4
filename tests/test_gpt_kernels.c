/* test_gpt_kernels.c - examples/gpt_kernels.h: the GPT's kernels written once.
   For each kernel, f32 and bf16 storage:
   - the host build (GPT_K_HOST) against examples/gpt.h's function (or unit,
     driven by hand) on the same values: the same bits (bf16: gpt.h in f32 on
     the bf16 values, rounded once);
   - the device decomposition run on the host (GPT_K_HOST_DEVICE_ORDER) against
     the host build: within TOL_F32 of the tensor's largest value in f32, and
     the bf16 figure measured and bounded (printed as "# tol" lines);
   - with a device (built with VESCALE_NCCL: over the strict stand-in in make
     test, 8 simulated GPUs, device buffers only through cudaMalloc/cudaMemcpy):
     the kernels NVRTC compiled, launched, against the device order's bits
     (the stand-in runs that host build) and the host build's tolerance;
   - backward kernels against central finite differences on tiny cases.
   Written in the common subset of C and C++. */
#define VESCALE_IMPLEMENTATION
#include "vescale.h"
#include "examples/gpt.h"
#include "examples/gpt_kernels.h"
#include "tests/vs_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef VESCALE_NCCL
#include <cuda_runtime.h>
#endif
#ifdef VS_STRICT /* over the strict CUDA + NCCL stand-in (make test: build/test_gpt_kernels_strict) */
#include "strict/vs_strict.h"
#include "gpt_strict_kernels.h"
#endif

#define TOL_F32 1e-5   // device order vs host, f32: of the tensor's largest value
#define TOL_BF16 4e-3  // the same in bf16: one bf16 step (2^-8) of the largest value (measured: see "# tol")

static int have_device;

// ---- values ----------------------------------------------------------------------

static uint64_t rng_state = 12345;
static float urand(void) // [-1, 1)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng_state >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

static float* fvec(int64_t n, float scale)
{
    float* v = (float*)malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = urand() * scale;
    return v;
}

static size_t dsz(int dt) { return dt == GPT_KF32 ? 4 : 2; }

/* f32 values stored in dt, and their stored values back as f32 (what gpt.h gets). */
static void* enc(int dt, const float* v, int64_t n)
{
    void* p = malloc(dsz(dt) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        if (dt == GPT_KF32) ((float*)p)[i] = v[i];
        else ((uint16_t*)p)[i] = vs_f32_to_bf16(v[i]);
    }
    return p;
}
static float get(int dt, const void* p, int64_t i)
{
    return dt == GPT_KF32 ? ((const float*)p)[i] : vs_bf16_to_f32(((const uint16_t*)p)[i]);
}
static void round_to(int dt, float* v, int64_t n) // v's values as dt stores them
{
    for (int64_t i = 0; i < n; i++)
        if (dt != GPT_KF32) v[i] = vs_bf16_to_f32(vs_f32_to_bf16(v[i]));
}
static void* bcopy_(const void* p, size_t bytes)
{
    void* c = malloc(bytes ? bytes : 1);
    memcpy(c, p, bytes);
    return c;
}

/* a (dt) has exactly the bits of the f32 reference ref (rounded to dt). */
static int64_t mismatches(int dt, const void* a, const float* ref, int64_t n)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (dt == GPT_KF32) bad += memcmp((const float*)a + i, ref + i, 4) != 0;
        else bad += ((const uint16_t*)a)[i] != vs_f32_to_bf16(ref[i]);
    }
    return bad;
}

/* max |a - b| over max |b| (both dt). */
static double relerr(int dt, const void* a, const void* b, int64_t n)
{
    double mx = 0, d = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = get(dt, a, i), y = get(dt, b, i);
        if (fabs(y) > mx) mx = fabs(y);
        if (fabs(x - y) > d || x != x) d = x != x ? INFINITY : fabs(x - y);
    }
    return mx > 0 ? d / mx : d;
}

// ---- running an operation on each side -------------------------------------------

#define NBUF 40
typedef struct tbufs {
    int n;
    void* h[NBUF];       // host contents before the operation (NULL: a NULL argument)
    size_t bytes[NBUF];
    int dt[NBUF];        // for comparisons: the buffer's dtype code (ids: -1)
    const char* name[NBUF];
} tbufs;

static int add_buf(tbufs* b, const char* name, int dt, void* h, size_t bytes)
{
    b->name[b->n] = name, b->dt[b->n] = dt, b->h[b->n] = h, b->bytes[b->n] = bytes;
    return b->n++;
}
static int add_vals(tbufs* b, const char* name, int dt, const float* v, int64_t n)
{
    return add_buf(b, name, dt, enc(dt, v, n), dsz(dt) * (size_t)n);
}
static int add_zero(tbufs* b, const char* name, int dt, int64_t n)
{
    return add_buf(b, name, dt, calloc((size_t)(n ? n : 1), dsz(dt)), dsz(dt) * (size_t)n);
}
static void free_bufs(tbufs* b)
{
    for (int i = 0; i < b->n; i++) free(b->h[i]);
}

typedef void (*top)(const gpt_kctx* c, void** p, const void* arg);

/* The contents of every buffer after op on the side `mode` (malloc'd into out[]). */
static void run_side(int mode, const tbufs* b, top op, const void* arg, void** out)
{
    void* p[NBUF];
    void* stream = NULL; // the device side: a trainer's own non-blocking stream
#ifdef VESCALE_NCCL
    if (mode == GPT_K_DEVICE)
        VT_CHECK(cudaStreamCreateWithFlags((cudaStream_t*)&stream, cudaStreamNonBlocking) == cudaSuccess, "a stream");
#endif
    gpt_kctx c;
    VT_OK(gpt_kctx_init(&c, mode, stream));
    for (int i = 0; i < b->n; i++) {
        out[i] = malloc(b->bytes[i] ? b->bytes[i] : 1);
        p[i] = NULL;
        if (!b->h[i]) continue;
        if (mode == GPT_K_DEVICE) {
#ifdef VESCALE_NCCL
            VT_CHECK(cudaMalloc(&p[i], b->bytes[i] ? b->bytes[i] : 1) == cudaSuccess, "cudaMalloc %s", b->name[i]);
            VT_CHECK(cudaMemcpyAsync(p[i], b->h[i], b->bytes[i], cudaMemcpyHostToDevice, (cudaStream_t)stream) ==
                         cudaSuccess, "H2D");
#endif
        } else {
            p[i] = malloc(b->bytes[i] ? b->bytes[i] : 1);
            memcpy(p[i], b->h[i], b->bytes[i]);
        }
    }
#ifdef VS_STRICT
    long launched = vs_strict_get_counts().launches;
#endif
    op(&c, p, arg);
#ifdef VS_STRICT
    if (mode == GPT_K_DEVICE)
        VT_CHECK(vs_strict_get_counts().launches > launched, "the device side launched no kernel");
#endif
    for (int i = 0; i < b->n; i++) {
        if (!b->h[i]) continue;
        if (mode == GPT_K_DEVICE) {
#ifdef VESCALE_NCCL
            VT_CHECK(cudaMemcpyAsync(out[i], p[i], b->bytes[i], cudaMemcpyDeviceToHost, (cudaStream_t)stream) ==
                         cudaSuccess, "D2H %s", b->name[i]);
#endif
        } else {
            memcpy(out[i], p[i], b->bytes[i]);
            free(p[i]);
        }
    }
#ifdef VESCALE_NCCL
    if (mode == GPT_K_DEVICE) {
        VT_CHECK(cudaStreamSynchronize((cudaStream_t)stream) == cudaSuccess, "cudaStreamSynchronize");
        for (int i = 0; i < b->n; i++)
            if (p[i]) cudaFree(p[i]);
        cudaStreamDestroy((cudaStream_t)stream);
    }
#endif
}

/* The figures: the largest device-order / device deviation per kernel and dtype. */
static double worst[2][2]; // [dtype][0 device order vs host, 1 device vs host]
static long long bf16_diff, bf16_total, bf16_steps; // device order vs host in bf16: elements apart, of, most steps

static void count_bf16(const void* a, const void* b, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        int x = ((const uint16_t*)a)[i], y = ((const uint16_t*)b)[i];
        long long d = (x & 0x8000) == (y & 0x8000) ? (x > y ? x - y : y - x) : (long long)(x & 0x7fff) + (y & 0x7fff);
        bf16_diff += d != 0, bf16_total++;
        if (d > bf16_steps) bf16_steps = d;
    }
}

/* Runs op on every side; the host build must give ref's bits for each buffer
   with a reference (ref[i] non-NULL, f32 values rounded to the buffer's
   dtype); every other side within the tolerance of the host's, and a device
   equal to the device order's bits under the stand-in. */
static void check_sides(const char* what, const tbufs* b, top op, const void* arg, float* const* ref)
{
    void *host[NBUF], *dord[NBUF], *dev[NBUF];
    run_side(GPT_K_HOST, b, op, arg, host);
    run_side(GPT_K_HOST_DEVICE_ORDER, b, op, arg, dord);
    if (have_device) run_side(GPT_K_DEVICE, b, op, arg, dev);
    for (int i = 0; i < b->n; i++) {
        if (!b->h[i] || !ref[i]) continue;
        int dt = b->dt[i];
        int64_t n = (int64_t)(b->bytes[i] / dsz(dt));
        int64_t bad = mismatches(dt, host[i], ref[i], n);
        VT_CHECK(bad == 0, "%s: %s: host build differs from gpt.h in %lld of %lld", what, b->name[i], (long long)bad,
                 (long long)n);
        double tol = dt == GPT_KF32 ? TOL_F32 : TOL_BF16, e = relerr(dt, dord[i], host[i], n);
        VT_CHECK(e <= tol, "%s: %s: device order %.3g from the host build (tolerance %g)", what, b->name[i], e, tol);
        int k = dt == GPT_KF32 ? 0 : 1;
        if (e > worst[k][0]) worst[k][0] = e;
        if (k) count_bf16(dord[i], host[i], n);
        if (have_device) {
            double ed = relerr(dt, dev[i], host[i], n);
            VT_CHECK(ed <= tol, "%s: %s: device %.3g from the host build (tolerance %g)", what, b->name[i], ed, tol);
            if (ed > worst[k][1]) worst[k][1] = ed;
#ifdef VS_STRICT
            VT_CHECK(!memcmp(dev[i], dord[i], b->bytes[i]), "%s: %s: the stand-in's device run differs from the device order",
                     what, b->name[i]);
#endif
        }
    }
    for (int i = 0; i < b->n; i++) {
        free(host[i]), free(dord[i]);
        if (have_device) free(dev[i]);
    }
}

static float* fcopy(const float* v, int64_t n)
{
    float* c = (float*)malloc(sizeof(float) * (size_t)(n ? n : 1));
    memcpy(c, v, sizeof(float) * (size_t)n);
    return c;
}
/* v's values after a store in dt and a load back. */
static float* fstored(int dt, const float* v, int64_t n)
{
    float* c = fcopy(v, n);
    round_to(dt, c, n);
    return c;
}

#define P(i) (p[i])

// ---- layernorm -------------------------------------------------------------------

typedef struct ln_arg {
    int64_t n, D;
    int dt;
} ln_arg;

static void op_ln(const gpt_kctx* c, void** p, const void* arg)
{
    const ln_arg* a = (const ln_arg*)arg;
    VT_OK(gpt_k_layernorm(c, a->n, a->D, P(0), P(1), P(2), P(3), (float*)P(4), (float*)P(5), a->dt, a->dt));
}
static void op_ln_bwd(const gpt_kctx* c, void** p, const void* arg)
{
    const ln_arg* a = (const ln_arg*)arg;
    VT_OK(gpt_k_layernorm_backward(c, a->n, a->D, P(0), P(1), (const float*)P(2), (const float*)P(3), P(4), P(5),
                                   a->dt, a->dt));
    VT_OK(gpt_k_layernorm_backward_weight(c, a->n, a->D, P(0), (const float*)P(2), (const float*)P(3), P(4), P(6),
                                          P(7), a->dt, GPT_KF32));
}

static void t_layernorm(int dt, int64_t n, int64_t D)
{
    ln_arg a = {n, D, dt};
    float *x = fvec(n * D, 2.0f), *g = fvec(D, 1.0f), *b = fvec(D, 0.5f), *dy = fvec(n * D, 1.0f);
    float *dx0 = fvec(n * D, 0.3f), *dg0 = fvec(D, 0.3f), *db0 = fvec(D, 0.3f);
    for (int64_t i = 0; i < n * D; i++) x[i] += 0.7f; // a mean away from 0
    float *xs = fstored(dt, x, n * D), *gs = fstored(dt, g, D), *bs = fstored(dt, b, D), *dys = fstored(dt, dy, n * D);
    float *y = fvec(n * D, 0), *mean = fvec(n, 0), *rstd = fvec(n, 0);
    gpt_ln_forward(n, D, xs, gs, bs, y, mean, rstd);
    tbufs B;
    memset(&B, 0, sizeof B);
    add_vals(&B, "x", dt, x, n * D), add_vals(&B, "g", dt, g, D), add_vals(&B, "b", dt, b, D);
    add_zero(&B, "y", dt, n * D), add_zero(&B, "mean", GPT_KF32, n), add_zero(&B, "rstd", GPT_KF32, n);
    float* ref[NBUF] = {NULL, NULL, NULL, y, mean, rstd};
    check_sides(dt ? "layernorm bf16" : "layernorm f32", &B, op_ln, &a, ref);
    free_bufs(&B);
    // backward: dx (dt) and dg, db (f32) accumulate
    float *dxs = fstored(dt, dx0, n * D), *dg = fcopy(dg0, D), *db = fcopy(db0, D);
    gpt_ln_backward_input(n, D, xs, gs, mean, rstd, dys, dxs);
    gpt_ln_backward_weight(n, D, xs, mean, rstd, dys, dg, db);
    memset(&B, 0, sizeof B);
    add_vals(&B, "x", dt, x, n * D), add_vals(&B, "g", dt, g, D), add_vals(&B, "mean", GPT_KF32, mean, n);
    add_vals(&B, "rstd", GPT_KF32, rstd, n), add_vals(&B, "dy", dt, dy, n * D), add_vals(&B, "dx", dt, dx0, n * D);
    add_vals(&B, "dg", GPT_KF32, dg0, D), add_vals(&B, "db", GPT_KF32, db0, D);
    float* ref2[NBUF] = {NULL, NULL, NULL, NULL, NULL, dxs, dg, db};
    check_sides(dt ? "layernorm backward bf16" : "layernorm backward f32", &B, op_ln_bwd, &a, ref2);
    free_bufs(&B);
    free(x), free(g), free(b), free(dy), free(dx0), free(dg0), free(db0), free(xs), free(gs), free(bs), free(dys);
    free(y), free(mean), free(rstd), free(dxs), free(dg), free(db);
}

// ---- matmul ----------------------------------------------------------------------

typedef struct mm_arg {
    int trans, acc, ta, tc, bias;
    int64_t M, K, N;
} mm_arg;

static void op_mm(const gpt_kctx* c, void** p, const void* arg)
{
    const mm_arg* a = (const mm_arg*)arg;
    VT_OK(gpt_k_matmul(c, a->trans, a->M, a->K, a->N, P(0), a->ta, P(1), a->ta, a->bias ? P(2) : NULL, a->ta, P(3),
                       a->tc, a->acc));
}

static void t_matmul(int dt, int trans, int acc, int bias, int tc, int64_t M, int64_t K, int64_t N)
{
    mm_arg a = {trans, acc, dt, tc, bias, M, K, N};
    float *A = fvec(M * K, 1.0f), *Bm = fvec(K * N, 1.0f), *bv = fvec(N, 1.0f), *C0 = fvec(M * N, 1.0f);
    float *As = fstored(dt, A, M * K), *Bs = fstored(dt, Bm, K * N), *bs = fstored(dt, bv, N);
    float* C = fstored(tc, C0, M * N);
    if (!acc) memset(C, 0, sizeof(float) * (size_t)(M * N));
    if (trans == GPT_KMM_NN) gpt_mm_nn(M, K, N, As, Bs, C);
    else if (trans == GPT_KMM_NT) gpt_mm_nt(M, K, N, As, Bs, C);
    else gpt_mm_tn(M, K, N, As, Bs, C);
    if (bias) gpt_add_bias(M, N, bs, C);
    tbufs B;
    memset(&B, 0, sizeof B);
    add_vals(&B, "A", dt, A, M * K), add_vals(&B, "B", dt, Bm, K * N), add_vals(&B, "bias", dt, bv, N);
    add_vals(&B, "C", tc, C0, M * N);
    float* ref[NBUF] = {NULL, NULL, NULL, C};
    char what[96];
    snprintf(what, sizeof what, "matmul %s %s%s%s", trans == 0 ? "nn" : trans == 1 ? "tn" : "nt", dt ? "bf16" : "f32",
             acc ? " +=" : "", bias ? " +bias" : "");
    check_sides(what, &B, op_mm, &a, ref);
    free_bufs(&B);
    free(A), free(Bm), free(bv), free(C0), free(As), free(Bs), free(bs), free(C);
}

// ---- GELU, bias, residual --------------------------------------------------------

typedef struct ew_arg {
    int64_t n, T, D;
    int dt;
} ew_arg;

static void op_gelu(const gpt_kctx* c, void** p, const void* arg)
{
    const ew_arg* a = (const ew_arg*)arg;
    VT_OK(gpt_k_gelu(c, a->n, P(0), a->dt, P(1), a->dt));
    VT_OK(gpt_k_gelu_backward(c, a->n, P(0), a->dt, P(2), a->dt, P(2), a->dt)); // in place, as gpt.h's
}

static void t_gelu(int dt)
{
    int64_t n = 1000;
    ew_arg a = {n, 0, 0, dt};
    float *x = fvec(n, 6.0f), *dz = fvec(n, 1.0f);
    float *xs = fstored(dt, x, n), *z = fvec(n, 0), *da = fstored(dt, dz, n);
    for (int64_t i = 0; i < n; i++) z[i] = gpt_gelu(xs[i]), da[i] *= gpt_gelu_grad(xs[i]);
    tbufs B;
    memset(&B, 0, sizeof B);
    add_vals(&B, "a", dt, x, n), add_zero(&B, "z", dt, n), add_vals(&B, "dz", dt, dz, n);
    float* ref[NBUF] = {NULL, z, da};
    check_sides(dt ? "gelu bf16" : "gelu f32", &B, op_gelu, &a, ref);
    free_bufs(&B);
    free(x), free(dz), free(xs), free(z), free(da);
}

static void op_rows(const gpt_kctx* c, void** p, const void* arg)
{
    const ew_arg* a = (const ew_arg*)arg;
    VT_OK(gpt_k_add_rows(c, a->n, 1, a->D, 0, P(0), a->dt, P(1), a->dt));    // y += bias
    VT_OK(gpt_k_add_rows(c, a->n, a->n, a->D, 0, P(2), a->dt, P(1), a->dt)); // y += x (the residual)
    VT_OK(gpt_k_sum_rows(c, a->n, 1, a->D, 0, P(3), a->dt, P(4), GPT_KF32)); // db += sum of dy's rows
}

static void t_rows(int dt)
{
    int64_t n = 37, D = 70;
    ew_arg a = {n, 1, D, dt};
    float *bv = fvec(D, 1.0f), *y0 = fvec(n * D, 1.0f), *x = fvec(n * D, 1.0f), *dy = fvec(n * D, 1.0f),
          *db0 = fvec(D, 1.0f);
    float *y = fstored(dt, y0, n * D), *bs = fstored(dt, bv, D), *xs = fstored(dt, x, n * D), *dys = fstored(dt, dy, n * D);
    float* db = fcopy(db0, D);
    gpt_add_bias(n, D, bs, y);
    round_to(dt, y, n * D); // stored between the two kernels
    for (int64_t i = 0; i < n * D; i++) y[i] += xs[i];
    gpt_bias_grad(n, D, dys, db);
    tbufs B;
    memset(&B, 0, sizeof B);
    add_vals(&B, "bias", dt, bv, D), add_vals(&B, "y", dt, y0, n * D), add_vals(&B, "x", dt, x, n * D);
    add_vals(&B, "dy", dt, dy, n * D), add_vals(&B, "db", GPT_KF32, db0, D);
    float* ref[NBUF] = {NULL, y, NULL, NULL, db};
    check_sides(dt ? "bias, residual, bias gradient bf16" : "bias, residual, bias gradient f32", &B, op_rows, &a, ref);
    free_bufs(&B);
    free(bv), free(y0), free(x), free(dy), free(db0), free(y), free(bs), free(xs), free(dys), free(db);
}

// ---- attention -------------------------------------------------------------------

typedef struct at_arg {
    int64_t B, T, H, hd;
    int dt;
} at_arg;

static void op_attn(const gpt_kctx* c, void** p, const void* arg)
{
    const at_arg* a = (const at_arg*)arg;
    VT_OK(gpt_k_attention(c, a->B, a->T, a->H, a->hd, P(0), P(1), P(2), (float*)P(3), P(4), a->dt));
    VT_OK(gpt_k_attention_backward(c, a->B, a->T, a->H, a->hd, P(0), P(1), P(2), (const float*)P(3), P(5),
                                   (float*)P(9), P(6), P(7), P(8), a->dt, a->dt));
}

static void t_attention(int dt, int64_t Bn, int64_t T, int64_t H, int64_t hd)
{
    at_arg a = {Bn, T, H, hd, dt};
    int64_t n = Bn * T * H * hd, np = Bn * H * T * T;
    float *q = fvec(n, 1.5f), *k = fvec(n, 1.5f), *v = fvec(n, 1.0f), *dy = fvec(n, 1.0f);
    float *dq0 = fvec(n, 0.2f), *dk0 = fvec(n, 0.2f), *dv0 = fvec(n, 0.2f);
    float *qs = fstored(dt, q, n), *ks = fstored(dt, k, n), *vs = fstored(dt, v, n), *dys = fstored(dt, dy, n);
    float *P = fvec(np, 0), *y = fvec(n, 0), *dp = fvec(T, 0);
    float *dq = fstored(dt, dq0, n), *dk = fstored(dt, dk0, n), *dv = fstored(dt, dv0, n);
    gpt_attention_forward(Bn, T, H, hd, qs, ks, vs, P, y);
    gpt_attention_backward(Bn, T, H, hd, qs, ks, vs, P, dys, dq, dk, dv, dp);
    tbufs B;
    memset(&B, 0, sizeof B);
    add_vals(&B, "q", dt, q, n), add_vals(&B, "k", dt, k, n), add_vals(&B, "v", dt, v, n);
    add_zero(&B, "P", GPT_KF32, np), add_zero(&B, "y", dt, n), add_vals(&B, "dy", dt, dy, n);
    add_vals(&B, "dq", dt, dq0, n), add_vals(&B, "dk", dt, dk0, n), add_vals(&B, "dv", dt, dv0, n);
    add_zero(&B, "dS", GPT_KF32, np);
    float* ref[NBUF] = {NULL, NULL, NULL, P, y, NULL, dq, dk, dv};
    char what[64];
    snprintf(what, sizeof what, "attention %s T %lld", dt ? "bf16" : "f32", (long long)T);
    check_sides(what, &B, op_attn, &a, ref);
    free_bufs(&B);
    free(q), free(k), free(v), free(dy), free(dq0), free(dk0), free(dv0), free(qs), free(ks), free(vs), free(dys);
    free(P), free(y), free(dp), free(dq), free(dk), free(dv);
}

// ---- embedding and head: gpt.h's units driven by hand ----------------------------

typedef struct unit_run {
    gpt_config cfg;
    gpt_unit u;
    vs_layer_ctx L;
    vs_pipe_tensor in[2], out[1];
    vs_pipe_call call;
} unit_run;

static void unit_init(unit_run* r, int kind, int V, int T, int D)
{
    memset(r, 0, sizeof *r);
    r->cfg.vocab = V, r->cfg.seq = T, r->cfg.dim = D, r->cfg.heads = 1, r->cfg.layers = 1;
    r->u.cfg = &r->cfg, r->u.kind = kind, r->u.block = -1;
    r->L.user = &r->u, r->L.tp_size = 1;
    r->call.user = &r->L, r->call.in = r->in, r->call.out = r->out, r->call.n_out = 1;
}

/* a unit through a pointer the compiler cannot see through (inlined, gcc's
   -Wmaybe-uninitialized misreads gpt_embed_forward's output pointer) */
typedef vs_result (*unit_fn)(vs_pipe_call*);
static vs_result unit_call(unit_fn f, vs_pipe_call* c)
{
    unit_fn volatile g = f;
    return g(c);
}

static void tensor(vs_pipe_tensor* t, const char* name, vs_dtype dt, int nd, int64_t s0, int64_t s1, int64_t s2,
                   void* data, void* grad)
{
    t->name = name, t->dtype = dt, t->ndim = nd;
    t->shape[0] = s0, t->shape[1] = s1, t->shape[2] = s2;
    t->data = data, t->grad = grad;
}

typedef struct em_arg {
    int64_t n, T, D, V;
    int dt;
} em_arg;

static void op_embed(const gpt_kctx* c, void** p, const void* arg)
{
    const em_arg* a = (const em_arg*)arg;
    VT_OK(gpt_k_embed(c, a->n, a->T, a->D, (const int32_t*)P(0), P(1), 0, a->V, P(2), P(3), a->dt, a->dt));
    VT_OK(gpt_k_embed_backward(c, a->n, a->D, (const int32_t*)P(0), P(4), 0, a->V, P(5), a->dt, GPT_KF32));
    VT_OK(gpt_k_sum_rows(c, a->n, a->T, a->D, 0, P(4), a->dt, P(6), GPT_KF32));
    // another TP rank's rows [v0, v0 + Vl) of wte, no positions
    VT_OK(gpt_k_embed(c, a->n, a->T, a->D, (const int32_t*)P(0), P(1), 5, 9, NULL, P(7), a->dt, a->dt));
}

static void t_embed(int dt)
{
    int rows = 3, T = 7, D = 12, V = 50;
    int64_t n = rows * T;
    em_arg a = {n, T, D, V, dt};
    float *wte = fvec(V * D, 1.0f), *wpe = fvec(T * D, 0.5f), *dx = fvec(n * D, 1.0f);
    float *gwte0 = fvec(V * D, 0.1f), *gwpe0 = fvec(T * D, 0.1f);
    int32_t ids[64];
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)((i * 7 + 3) % V) % 17; // repeats: rows gather several tokens
    float *wtes = fstored(dt, wte, V * D), *wpes = fstored(dt, wpe, T * D), *dxs = fstored(dt, dx, n * D);
    float *x = fvec(n * D, 0), *gwte = fcopy(gwte0, V * D), *gwpe = fcopy(gwpe0, T * D), *xs = fvec(n * D, 0);
    unit_run r;
    unit_init(&r, GPT_EMBED, V, T, D);
    r.L.param[0] = wtes, r.L.param[1] = wpes, r.L.grad[0] = gwte, r.L.grad[1] = gwpe;
    r.L.local_shape[0][0] = V, r.L.local_shape[0][1] = D;
    tensor(&r.in[0], "tokens", VS_I32, 2, rows, T, 0, ids, NULL), r.call.n_in = 1;
    tensor(&r.out[0], "x0", VS_F32, 3, rows, T, D, x, dxs);
    VT_OK(unit_call(gpt_embed_forward, &r.call));
    VT_OK(unit_call(gpt_embed_backward, &r.call));
    for (int64_t i = 0; i < n; i++)
        for (int64_t d = 0; d < D; d++)
            xs[i * D + d] = ids[i] >= 5 && ids[i] < 14 ? wtes[(ids[i] - 5) * D + d] : 0.0f;
    tbufs B;
    memset(&B, 0, sizeof B);
    add_buf(&B, "ids", -1, bcopy_(ids, sizeof(int32_t) * (size_t)n), sizeof(int32_t) * (size_t)n);
    add_vals(&B, "wte", dt, wte, V * D), add_vals(&B, "wpe", dt, wpe, T * D), add_zero(&B, "x", dt, n * D);
    add_vals(&B, "dx", dt, dx, n * D), add_vals(&B, "gwte", GPT_KF32, gwte0, V * D);
    add_vals(&B, "gwpe", GPT_KF32, gwpe0, T * D), add_zero(&B, "x shard", dt, n * D);
    float* ref[NBUF] = {NULL, NULL, NULL, x, NULL, gwte, gwpe, xs};
    check_sides(dt ? "embedding bf16" : "embedding f32", &B, op_embed, &a, ref);
    free_bufs(&B);
    free(wte), free(wpe), free(dx), free(gwte0), free(gwpe0), free(wtes), free(wpes), free(dxs), free(x), free(gwte);
    free(gwpe), free(xs);
}

typedef struct hd_arg {
    int64_t n, D, V;
} hd_arg;

/* gpt_head_forward / backward as kernels: 0 x 1 g 2 b 3 wte 4 targets 5 ln 6 mean
   7 rstd 8 logits (then G) 9 tl 10 loss 11 dloss 12 dlog 13 dln 14 dx 15 dg 16 db 17 dwte */
static void op_head(const gpt_kctx* c, void** p, const void* arg)
{
    const hd_arg* a = (const hd_arg*)arg;
    int f = GPT_KF32;
    VT_OK(gpt_k_layernorm(c, a->n, a->D, P(0), P(1), P(2), P(5), (float*)P(6), (float*)P(7), f, f));
    VT_OK(gpt_k_matmul(c, GPT_KMM_NT, a->n, a->D, a->V, P(5), f, P(3), f, NULL, f, P(8), f, 0));
    VT_OK(gpt_k_cross_entropy(c, a->n, a->V, P(8), f, (const int32_t*)P(4), (float*)P(9), (float*)P(8)));
    VT_OK(gpt_k_mean(c, a->n, (const float*)P(9), (float*)P(10)));
    VT_OK(gpt_k_scale(c, a->n * a->V, (const float*)P(8), (const float*)P(11), a->n, P(12), f));
    VT_OK(gpt_k_matmul(c, GPT_KMM_NN, a->n, a->V, a->D, P(12), f, P(3), f, NULL, f, P(13), f, 0));
    VT_OK(gpt_k_matmul(c, GPT_KMM_TN, a->V, a->n, a->D, P(12), f, P(5), f, NULL, f, P(17), f, 1));
    VT_OK(gpt_k_layernorm_backward(c, a->n, a->D, P(0), P(1), (const float*)P(6), (const float*)P(7), P(13), P(14), f, f));
    VT_OK(gpt_k_layernorm_backward_weight(c, a->n, a->D, P(0), (const float*)P(6), (const float*)P(7), P(13), P(15),
                                          P(16), f, f));
}

static void t_head(int V)
{
    int rows = 2, T = 5, D = 16;
    int64_t n = rows * T;
    hd_arg a = {n, D, V};
    float *x = fvec(n * D, 2.0f), *g = fvec(D, 1.0f), *b = fvec(D, 0.3f), *wte = fvec(V * D, 1.0f);
    float *dx0 = fvec(n * D, 0.1f), *dg0 = fvec(D, 0.1f), *db0 = fvec(D, 0.1f), *dw0 = fvec(V * D, 0.1f);
    float dloss = 0.75f, loss = 0;
    int32_t tg[16];
    for (int64_t i = 0; i < n; i++) tg[i] = (int32_t)((i * 37 + 11) % V);
    float *dx = fcopy(dx0, n * D), *dg = fcopy(dg0, D), *db = fcopy(db0, D), *dw = fcopy(dw0, V * D);
    unit_run r;
    unit_init(&r, GPT_HEAD, V, T, D);
    r.L.param[0] = g, r.L.param[1] = b, r.L.param[2] = wte, r.L.grad[0] = dg, r.L.grad[1] = db, r.L.grad[2] = dw;
    r.L.local_shape[2][0] = V, r.L.local_shape[2][1] = D;
    tensor(&r.in[0], "x", VS_F32, 3, rows, T, D, x, dx), tensor(&r.in[1], "targets", VS_I32, 2, rows, T, 0, tg, NULL);
    r.call.n_in = 2;
    tensor(&r.out[0], "loss", VS_F32, 0, 0, 0, 0, &loss, &dloss);
    VT_OK(unit_call(gpt_head_forward, &r.call));
    VT_OK(unit_call(gpt_head_backward, &r.call));
    free(r.call.saved);
    tbufs B;
    memset(&B, 0, sizeof B);
    add_vals(&B, "x", 0, x, n * D), add_vals(&B, "g", 0, g, D), add_vals(&B, "b", 0, b, D);
    add_vals(&B, "wte", 0, wte, V * D);
    add_buf(&B, "targets", -1, bcopy_(tg, sizeof(int32_t) * (size_t)n), sizeof(int32_t) * (size_t)n);
    add_zero(&B, "ln", 0, n * D), add_zero(&B, "mean", 0, n), add_zero(&B, "rstd", 0, n);
    add_zero(&B, "logits", 0, n * V), add_zero(&B, "tl", 0, n), add_zero(&B, "loss", 0, 1);
    add_vals(&B, "dloss", 0, &dloss, 1), add_zero(&B, "dlog", 0, n * V), add_zero(&B, "dln", 0, n * D);
    add_vals(&B, "dx", 0, dx0, n * D), add_vals(&B, "dg", 0, dg0, D), add_vals(&B, "db", 0, db0, D);
    add_vals(&B, "dwte", 0, dw0, V * D);
    float* ref[NBUF] = {NULL};
    ref[10] = &loss, ref[14] = dx, ref[15] = dg, ref[16] = db, ref[17] = dw;
    char what[64];
    snprintf(what, sizeof what, "head (cross-entropy) f32 V %d", V);
    check_sides(what, &B, op_head, &a, ref);
    free_bufs(&B);
    free(x), free(g), free(b), free(wte), free(dx0), free(dg0), free(db0), free(dw0), free(dx), free(dg), free(db);
    free(dw);
}

/* gpt_mlp_forward / backward as kernels (the wiring's recipe for a block): 0 x 1 g
   2 b 3 fc 4 bfc 5 fc2 6 bfc2 7 ln 8 mean 9 rstd 10 a 11 z 12 out 13 dout 14 da
   15 dln 16 dx 17..22 the gradients of g b fc bfc fc2 bfc2 */
static void op_mlp(const gpt_kctx* c, void** p, const void* arg)
{
    const hd_arg* a = (const hd_arg*)arg; // n, D, V = F
    int64_t n = a->n, D = a->D, F = a->V;
    int f = GPT_KF32;
    VT_OK(gpt_k_layernorm(c, n, D, P(0), P(1), P(2), P(7), (float*)P(8), (float*)P(9), f, f));
    VT_OK(gpt_k_matmul(c, GPT_KMM_NN, n, D, F, P(7), f, P(3), f, P(4), f, P(10), f, 0));
    VT_OK(gpt_k_gelu(c, n * F, P(10), f, P(11), f));
    VT_OK(gpt_k_matmul(c, GPT_KMM_NN, n, F, D, P(11), f, P(5), f, P(6), f, P(12), f, 0));
    VT_OK(gpt_k_add_rows(c, n, n, D, 0, P(0), f, P(12), f)); // the residual
    // backward: input, then weights
    VT_OK(gpt_k_matmul(c, GPT_KMM_NT, n, D, F, P(13), f, P(5), f, NULL, f, P(14), f, 0));
    VT_OK(gpt_k_gelu_backward(c, n * F, P(10), f, P(14), f, P(14), f));
    VT_OK(gpt_k_matmul(c, GPT_KMM_NT, n, F, D, P(14), f, P(3), f, NULL, f, P(15), f, 0));
    VT_OK(gpt_k_add_rows(c, n, n, D, 0, P(13), f, P(16), f));
    VT_OK(gpt_k_layernorm_backward(c, n, D, P(0), P(1), (const float*)P(8), (const float*)P(9), P(15), P(16), f, f));
    VT_OK(gpt_k_layernorm_backward_weight(c, n, D, P(0), (const float*)P(8), (const float*)P(9), P(15), P(17), P(18), f,
                                          f));
    VT_OK(gpt_k_matmul(c, GPT_KMM_TN, D, n, F, P(7), f, P(14), f, NULL, f, P(19), f, 1));
    VT_OK(gpt_k_sum_rows(c, n, 1, F, 0, P(14), f, P(20), f));
    VT_OK(gpt_k_matmul(c, GPT_KMM_TN, F, n, D, P(11), f, P(13), f, NULL, f, P(21), f, 1));
    VT_OK(gpt_k_sum_rows(c, n, 1, D, 0, P(13), f, P(22), f));
}

static void t_mlp(void)
{
    int rows = 2, T = 5, D = 16, F = 64;
    int64_t n = rows * T;
    hd_arg a = {n, D, F};
    float* w[6];
    int64_t sz[6] = {D, D, D * F, F, F * D, D};
    for (int i = 0; i < 6; i++) w[i] = fvec(sz[i], i < 2 ? 1.0f : 0.3f);
    float *x = fvec(n * D, 2.0f), *dout = fvec(n * D, 1.0f), *dx0 = fvec(n * D, 0.1f), *out = fvec(n * D, 0);
    float *dx = fcopy(dx0, n * D), *g0[6], *g[6];
    for (int i = 0; i < 6; i++) g0[i] = fvec(sz[i], 0.1f), g[i] = fcopy(g0[i], sz[i]);
    unit_run r;
    unit_init(&r, GPT_MLP, 64, T, D);
    for (int i = 0; i < 6; i++) r.L.param[i] = w[i], r.L.grad[i] = g[i];
    r.L.local_shape[2][0] = D, r.L.local_shape[2][1] = F;
    tensor(&r.in[0], "x", VS_F32, 3, rows, T, D, x, dx), r.call.n_in = 1;
    tensor(&r.out[0], "y", VS_F32, 3, rows, T, D, out, dout);
    VT_OK(unit_call(gpt_mlp_forward, &r.call));
    VT_OK(unit_call(gpt_mlp_backward, &r.call));
    free(r.call.saved);
    tbufs B;
    memset(&B, 0, sizeof B);
    const char* wn[6] = {"g", "b", "fc", "bfc", "fc2", "bfc2"};
    add_vals(&B, "x", 0, x, n * D);
    for (int i = 0; i < 6; i++) add_vals(&B, wn[i], 0, w[i], sz[i]);
    add_zero(&B, "ln", 0, n * D), add_zero(&B, "mean", 0, n), add_zero(&B, "rstd", 0, n), add_zero(&B, "a", 0, n * F);
    add_zero(&B, "z", 0, n * F), add_zero(&B, "out", 0, n * D), add_vals(&B, "dout", 0, dout, n * D);
    add_zero(&B, "da", 0, n * F), add_zero(&B, "dln", 0, n * D), add_vals(&B, "dx", 0, dx0, n * D);
    for (int i = 0; i < 6; i++) add_vals(&B, wn[i], 0, g0[i], sz[i]);
    float* ref[NBUF] = {NULL};
    ref[12] = out, ref[16] = dx;
    for (int i = 0; i < 6; i++) ref[17 + i] = g[i];
    check_sides("mlp block f32", &B, op_mlp, &a, ref);
    free_bufs(&B);
    for (int i = 0; i < 6; i++) free(w[i]), free(g0[i]), free(g[i]);
    free(x), free(dout), free(dx0), free(out), free(dx);
}

/* gpt_attn_forward / backward as kernels: 0 x 1 g 2 b 3 wq 4 wk 5 wv 6 bq 7 bv 8 proj
   9 bproj 10 ln 11 mean 12 rstd 13 q 14 k 15 v 16 P 17 y 18 out 19 dout 20 dy 21 dS
   22 dq 23 dk 24 dv 25 dln 26 dx 27..35 the gradients of g b wq wk wv bq bv proj bproj */
typedef struct ab_arg {
    int64_t B, T, D, H;
} ab_arg;

static void op_attn_block(const gpt_kctx* c, void** p, const void* arg)
{
    const ab_arg* a = (const ab_arg*)arg;
    int64_t n = a->B * a->T, D = a->D;
    int f = GPT_KF32;
    VT_OK(gpt_k_layernorm(c, n, D, P(0), P(1), P(2), P(10), (float*)P(11), (float*)P(12), f, f));
    for (int j = 0; j < 3; j++) // q, k, v (no key bias)
        VT_OK(gpt_k_matmul(c, GPT_KMM_NN, n, D, D, P(10), f, P(3 + j), f, j == 1 ? NULL : P(j ? 7 : 6), f, P(13 + j), f, 0));
    VT_OK(gpt_k_attention(c, a->B, a->T, a->H, D / a->H, P(13), P(14), P(15), (float*)P(16), P(17), f));
    VT_OK(gpt_k_matmul(c, GPT_KMM_NN, n, D, D, P(17), f, P(8), f, P(9), f, P(18), f, 0));
    VT_OK(gpt_k_add_rows(c, n, n, D, 0, P(0), f, P(18), f));
    // backward: input, then weights
    VT_OK(gpt_k_matmul(c, GPT_KMM_NT, n, D, D, P(19), f, P(8), f, NULL, f, P(20), f, 0));
    VT_OK(gpt_k_attention_backward(c, a->B, a->T, a->H, D / a->H, P(13), P(14), P(15), (const float*)P(16), P(20),
                                   (float*)P(21), P(22), P(23), P(24), f, f));
    for (int j = 0; j < 3; j++) VT_OK(gpt_k_matmul(c, GPT_KMM_NT, n, D, D, P(22 + j), f, P(3 + j), f, NULL, f, P(25), f, j));
    VT_OK(gpt_k_add_rows(c, n, n, D, 0, P(19), f, P(26), f));
    VT_OK(gpt_k_layernorm_backward(c, n, D, P(0), P(1), (const float*)P(11), (const float*)P(12), P(25), P(26), f, f));
    VT_OK(gpt_k_layernorm_backward_weight(c, n, D, P(0), (const float*)P(11), (const float*)P(12), P(25), P(27), P(28),
                                          f, f));
    for (int j = 0; j < 3; j++) {
        VT_OK(gpt_k_matmul(c, GPT_KMM_TN, D, n, D, P(10), f, P(22 + j), f, NULL, f, P(29 + j), f, 1));
        if (j != 1) VT_OK(gpt_k_sum_rows(c, n, 1, D, 0, P(22 + j), f, P(j ? 33 : 32), f));
    }
    VT_OK(gpt_k_matmul(c, GPT_KMM_TN, D, n, D, P(17), f, P(19), f, NULL, f, P(34), f, 1));
    VT_OK(gpt_k_sum_rows(c, n, 1, D, 0, P(19), f, P(35), f));
}

static void t_attn_block(void)
{
    int rows = 2, T = 6, D = 16, H = 4;
    int64_t n = rows * T;
    ab_arg a = {rows, T, D, H};
    float *w[9], *g0[9], *g[9];
    int64_t sz[9] = {D, D, D * D, D * D, D * D, D, D, D * D, D};
    for (int i = 0; i < 9; i++) {
        w[i] = fvec(sz[i], i < 2 ? 1.0f : 0.4f), g0[i] = fvec(sz[i], 0.1f), g[i] = fcopy(g0[i], sz[i]);
    }
    float *x = fvec(n * D, 2.0f), *dout = fvec(n * D, 1.0f), *dx0 = fvec(n * D, 0.1f), *out = fvec(n * D, 0);
    float* dx = fcopy(dx0, n * D);
    unit_run r;
    unit_init(&r, GPT_ATTN, 64, T, D);
    r.cfg.heads = H;
    for (int i = 0; i < 9; i++) {
        r.L.param[i] = w[i], r.L.grad[i] = g[i];
        r.L.local_shape[i][0] = D, r.L.local_shape[i][1] = sz[i] == D ? 0 : D; // one rank: whole tensors
    }
    tensor(&r.in[0], "x", VS_F32, 3, rows, T, D, x, dx), r.call.n_in = 1;
    tensor(&r.out[0], "y", VS_F32, 3, rows, T, D, out, dout);
    VT_OK(unit_call(gpt_attn_forward, &r.call));
    VT_OK(unit_call(gpt_attn_backward, &r.call));
    free(r.call.saved);
    tbufs B;
    memset(&B, 0, sizeof B);
    const char* wn[9] = {"g", "b", "wq", "wk", "wv", "bq", "bv", "proj", "bproj"};
    const char* an[8] = {"ln", "mean", "rstd", "q", "k", "v", "P", "y"};
    int64_t asz[8] = {n * D, n, n, n * D, n * D, n * D, rows * H * T * T, n * D};
    add_vals(&B, "x", 0, x, n * D);
    for (int i = 0; i < 9; i++) add_vals(&B, wn[i], 0, w[i], sz[i]);
    for (int i = 0; i < 8; i++) add_zero(&B, an[i], 0, asz[i]);
    add_zero(&B, "out", 0, n * D), add_vals(&B, "dout", 0, dout, n * D), add_zero(&B, "dy", 0, n * D);
    add_zero(&B, "dS", 0, rows * H * T * T), add_zero(&B, "dq", 0, n * D), add_zero(&B, "dk", 0, n * D);
    add_zero(&B, "dv", 0, n * D), add_zero(&B, "dln", 0, n * D), add_vals(&B, "dx", 0, dx0, n * D);
    for (int i = 0; i < 9; i++) add_vals(&B, wn[i], 0, g0[i], sz[i]);
    float* ref[NBUF] = {NULL};
    ref[18] = out, ref[26] = dx;
    for (int i = 0; i < 9; i++) ref[27 + i] = g[i];
    check_sides("attention block f32", &B, op_attn_block, &a, ref);
    free_bufs(&B);
    for (int i = 0; i < 9; i++) free(w[i]), free(g0[i]), free(g[i]);
    free(x), free(dout), free(dx0), free(out), free(dx);
}

// ---- finite differences (the host build, f32, tiny cases) ------------------------

/* d/dv[i] of L = sum w . f(v) by central differences against the analytic g[i]. */
typedef double (*tloss)(const float* v, const void* arg);

static void fd_check(const char* what, float* v, int64_t n, const float* g, tloss L, const void* arg, float eps,
                     double tol)
{
    double worst_d = 0;
    for (int64_t i = 0; i < n; i++) {
        float v0 = v[i];
        v[i] = v0 + eps;
        double lp = L(v, arg);
        v[i] = v0 - eps;
        double lm = L(v, arg);
        v[i] = v0;
        double fd = (lp - lm) / (2.0 * (double)eps), d = fabs(fd - (double)g[i]) / (1.0 + fabs(fd));
        if (d > worst_d) worst_d = d;
    }
    VT_CHECK(worst_d <= tol, "%s: finite differences %.3g from the backward (tolerance %g)", what, worst_d, tol);
}

typedef struct fd_ln {
    int64_t n, D;
    const float *g, *b, *w;
} fd_ln;
static double L_ln(const float* x, const void* arg)
{
    const fd_ln* a = (const fd_ln*)arg;
    gpt_kctx c;
    gpt_kctx_init(&c, GPT_K_HOST, NULL);
    float y[64], m[8], s[8];
    gpt_k_layernorm(&c, a->n, a->D, x, a->g, a->b, y, m, s, 0, 0);
    double l = 0;
    for (int64_t i = 0; i < a->n * a->D; i++) l += (double)a->w[i] * y[i];
    return l;
}

typedef struct fd_at {
    int64_t B, T, H, hd;
    int which; // 0 q 1 k 2 v
    float *q, *k, *v;
    const float* w;
} fd_at;
static double L_at(const float* t, const void* arg)
{
    const fd_at* a = (const fd_at*)arg;
    gpt_kctx c;
    gpt_kctx_init(&c, GPT_K_HOST, NULL);
    float P[2 * 2 * 5 * 5], y[2 * 5 * 2 * 3];
    const float* in[3] = {a->q, a->k, a->v};
    in[a->which] = t;
    gpt_k_attention(&c, a->B, a->T, a->H, a->hd, in[0], in[1], in[2], P, y, 0);
    double l = 0;
    for (int64_t i = 0; i < a->B * a->T * a->H * a->hd; i++) l += (double)a->w[i] * y[i];
    return l;
}

typedef struct fd_ce {
    int64_t n, V;
    const int32_t* tg;
} fd_ce;
static double L_ce(const float* lg, const void* arg)
{
    const fd_ce* a = (const fd_ce*)arg;
    gpt_kctx c;
    gpt_kctx_init(&c, GPT_K_HOST, NULL);
    float G[3 * 7], tl[3], loss;
    gpt_k_cross_entropy(&c, a->n, a->V, lg, 0, a->tg, tl, G);
    gpt_k_mean(&c, a->n, tl, &loss);
    double s = 0;
    for (int64_t i = 0; i < a->n; i++) s += tl[i];
    return s / (double)a->n;
}

typedef struct fd_gelu {
    int64_t n;
    const float* w;
} fd_gelu;
static double L_gelu(const float* x, const void* arg)
{
    const fd_gelu* a = (const fd_gelu*)arg;
    gpt_kctx c;
    gpt_kctx_init(&c, GPT_K_HOST, NULL);
    float z[16];
    gpt_k_gelu(&c, a->n, x, 0, z, 0);
    double l = 0;
    for (int64_t i = 0; i < a->n; i++) l += (double)a->w[i] * z[i];
    return l;
}

static void t_finite_differences(void)
{
    gpt_kctx c;
    VT_OK(gpt_kctx_init(&c, GPT_K_HOST, NULL));
    { // layernorm: x, g, b
        int64_t n = 3, D = 6;
        float *x = fvec(n * D, 1.5f), *g = fvec(D, 1.0f), *b = fvec(D, 1.0f), *w = fvec(n * D, 1.0f);
        float y[18], m[3], s[3], dx[18] = {0}, dg[6] = {0}, db[6] = {0};
        VT_OK(gpt_k_layernorm(&c, n, D, x, g, b, y, m, s, 0, 0));
        VT_OK(gpt_k_layernorm_backward(&c, n, D, x, g, m, s, w, dx, 0, 0));
        VT_OK(gpt_k_layernorm_backward_weight(&c, n, D, x, m, s, w, dg, db, 0, 0));
        fd_ln a = {n, D, g, b, w};
        fd_check("layernorm dx", x, n * D, dx, L_ln, &a, 1e-2f, 2e-3);
        float xs[18];
        memcpy(xs, x, sizeof xs);
        (void)xs;
        free(x), free(g), free(b), free(w);
    }
    { // attention: q, k, v
        int64_t B = 2, T = 5, H = 2, hd = 3, n = B * T * H * hd;
        float *q = fvec(n, 1.0f), *k = fvec(n, 1.0f), *v = fvec(n, 1.0f), *w = fvec(n, 1.0f);
        float P[100], y[60], dS[100], dq[60] = {0}, dk[60] = {0}, dv[60] = {0};
        VT_OK(gpt_k_attention(&c, B, T, H, hd, q, k, v, P, y, 0));
        VT_OK(gpt_k_attention_backward(&c, B, T, H, hd, q, k, v, P, w, dS, dq, dk, dv, 0, 0));
        fd_at a = {B, T, H, hd, 0, q, k, v, w};
        float* t[3] = {q, k, v};
        const float* gr[3] = {dq, dk, dv};
        const char* nm[3] = {"attention dq", "attention dk", "attention dv"};
        for (int j = 0; j < 3; j++) {
            float tt[60];
            memcpy(tt, t[j], sizeof tt);
            a.which = j;
            fd_check(nm[j], tt, n, gr[j], L_at, &a, 1e-2f, 2e-3);
        }
        free(q), free(k), free(v), free(w);
    }
    { // cross-entropy: the logits' gradient of the mean loss
        int64_t n = 3, V = 7;
        float* lg = fvec(n * V, 2.0f);
        int32_t tg[3] = {0, 6, 3};
        float G[21], tl[3], loss, one = 1.0f, dl[21];
        VT_OK(gpt_k_cross_entropy(&c, n, V, lg, 0, tg, tl, G));
        VT_OK(gpt_k_mean(&c, n, tl, &loss));
        VT_OK(gpt_k_scale(&c, n * V, G, &one, n, dl, 0));
        fd_ce a = {n, V, tg};
        fd_check("cross-entropy dlogits", lg, n * V, dl, L_ce, &a, 1e-2f, 2e-3);
        free(lg);
    }
    { // GELU
        int64_t n = 16;
        float *x = fvec(n, 4.0f), *w = fvec(n, 1.0f), da[16];
        VT_OK(gpt_k_gelu_backward(&c, n, x, 0, w, 0, da, 0));
        fd_gelu a = {n, w};
        fd_check("gelu da", x, n, da, L_gelu, &a, 1e-2f, 2e-3);
        free(x), free(w);
    }
}

// ---- bad input -------------------------------------------------------------------

static void t_errors(void)
{
    gpt_kctx c;
    float x[4] = {0}, y[4] = {0};
    VT_OK(gpt_kctx_init(&c, GPT_K_HOST, NULL));
    VT_ERR(gpt_k_gelu(&c, 4, x, 7, y, 0), VS_ERR_INVALID, "dtype code 7");
    VT_ERR(gpt_k_gelu(&c, -1, x, 0, y, 0), VS_ERR_INVALID, "size -1");
    VT_ERR(gpt_k_matmul(&c, 4, 1, 1, 1, x, 0, x, 0, NULL, 0, y, 0, 0), VS_ERR_INVALID, "trans 4");
    VT_ERR(gpt_kctx_init(&c, 3, NULL), VS_ERR_INVALID, "mode 3");
    VT_ERR(gpt_kctx_init(NULL, 0, NULL), VS_ERR_NULL, "c is NULL");
#ifndef VESCALE_NCCL
    VT_ERR(gpt_kctx_init(&c, GPT_K_DEVICE, NULL), VS_ERR_UNAVAILABLE, "without CUDA");
#else
    // memory of the wrong side: refused before anything runs, the argument named
    if (have_device) {
        gpt_kctx d;
        float* dz = NULL;
        VT_OK(gpt_kctx_init(&d, GPT_K_DEVICE, NULL));
        VT_CHECK(cudaMalloc((void**)&dz, sizeof x) == cudaSuccess, "cudaMalloc");
#ifdef VS_STRICT
        long launched = vs_strict_get_counts().launches;
#endif
        VT_EXPECT_ERR(gpt_k_gelu(&d, 4, x, 0, dz, 0), VS_ERR_INVALID, "argument a ", "host memory");
        VT_EXPECT_ERR(gpt_k_gelu(&c, 4, x, 0, dz, 0), VS_ERR_INVALID, "argument z ", "device memory in a host context");
        VT_EXPECT_ERR(gpt_k_matmul(&d, 0, 1, 1, 1, dz, 0, dz, 0, x, 0, dz, 0, 0), VS_ERR_INVALID, "argument bias ",
                      "host memory");
#ifdef VS_STRICT
        VT_CHECK(vs_strict_get_counts().launches == launched, "a refused call launched a kernel");
#endif
        cudaFree(dz);
    }
#endif
    for (int k = 0; k < GPT_KI_N; k++) { // the argument tables agree
        int words = 1;
        for (const char* q = gpt_kernel_decls[k].argnames; *q; q++) words += *q == ' ';
        VT_CHECK(words == (int)strlen(gpt_kernel_decls[k].args), "%s: %d names for %d arguments", gpt_kernel_decls[k].name, words,
                 (int)strlen(gpt_kernel_decls[k].args));
    }
}

// ---- the launch signatures against the compiled kernels ---------------------------

#if defined(VESCALE_NCCL) || defined(VESCALE_NVRTC)
/* gpt_kernel_decls' argument letters (what launches and the stand-in marshal) against each
   kernel's parameters in the PTX NVRTC makes of the text: .u64 for a pointer
   or long long, .u32 for an int; a real GPU would misread any difference. */
static void t_signatures(void)
{
    size_t np = strlen(_vs_mk_prelude), nb = strlen(gpt_kernel_text.body);
    char *src = (char*)malloc(np + nb + 1), *ptx = NULL;
    memcpy(src, _vs_mk_prelude, np), memcpy(src + np, gpt_kernel_text.body, nb + 1);
    size_t size = 0;
    VT_OK(vs_nvrtc_compile(NULL, src, "gpt_kernels.cu", "compute_90", &ptx, &size));
    free(src);
    if (!ptx) return;
    for (int k = 0; k < GPT_KI_N; k++) {
        char entry[64], got[32];
        snprintf(entry, sizeof entry, ".entry %s(", gpt_kernel_decls[k].name);
        const char* at = strstr(ptx, entry);
        VT_CHECK(at != NULL, "%s not in the PTX", gpt_kernel_decls[k].name);
        if (!at) continue;
        const char* end = strchr(at, ')');
        int n = 0;
        for (const char* q = strstr(at, ".param"); q && q < end && n < 31; q = strstr(q + 1, ".param"))
            got[n++] = !strncmp(q, ".param .u64", 11) ? 'q' : !strncmp(q, ".param .u32", 11) ? 'd' : '?';
        got[n] = 0;
        char want[32];
        const char* a = gpt_kernel_decls[k].args;
        int m = 0;
        for (; a[m] && m < 31; m++) want[m] = a[m] == 'i' ? 'd' : 'q';
        want[m] = 0;
        VT_CHECK(!strcmp(got, want), "%s: the PTX's parameters %s, the declaration's %s (%s)", gpt_kernel_decls[k].name, got,
                 want, a);
    }
    vs_free(NULL, ptx);
}
#endif

// ---- main --------------------------------------------------------------------------

#ifdef VS_STRICT
static void strict_totals(void)
{
    VT_CHECK(vs_strict_violations() == 0, "%d violations", vs_strict_violations());
    VT_CHECK(vs_strict_get_counts().libraries == 1, "%ld libraries loaded", vs_strict_get_counts().libraries);
}

#endif

int main(void)
{
#ifdef VESCALE_NCCL
    int ndev = 0;
#ifdef VS_STRICT
    gpt_strict_register(); // the stand-in runs each kernel as its device-order host build
#endif
    have_device = cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0;
#endif
    for (int dt = 0; dt < 2; dt++) {
        const char* d = dt ? "bf16" : "f32";
        char name[96];
        snprintf(name, sizeof name, "layernorm %s (D 64 and 300: strided partial sums)", d);
        VT_CASE(name, (t_layernorm(dt, 13, 64), t_layernorm(dt, 5, 300)));
        snprintf(name, sizeof name, "matmul %s nn / nt / tn, bias, accumulate, ragged tiles", d);
        VT_CASE(name, (t_matmul(dt, GPT_KMM_NN, 0, 1, dt, 37, 45, 70), t_matmul(dt, GPT_KMM_NT, 0, 0, dt, 33, 16, 65),
                       t_matmul(dt, GPT_KMM_TN, 1, 0, GPT_KF32, 45, 37, 70), t_matmul(dt, GPT_KMM_NN, 1, 0, dt, 1, 3, 1)));
        snprintf(name, sizeof name, "gelu %s forward and backward", d);
        VT_CASE(name, t_gelu(dt));
        snprintf(name, sizeof name, "bias, residual and bias gradient %s", d);
        VT_CASE(name, t_rows(dt));
        snprintf(name, sizeof name, "attention %s (T 9, and T 260: strided softmax sums)", d);
        VT_CASE(name, (t_attention(dt, 2, 9, 3, 8), t_attention(dt, 1, 260, 2, 4)));
        snprintf(name, sizeof name, "embedding %s: gpt.h's unit, and a vocab shard", d);
        VT_CASE(name, t_embed(dt));
    }
    VT_CASE("head f32: gpt.h's unit as kernels (V 64 and 300)", (t_head(64), t_head(300)));
    VT_CASE("mlp block f32: gpt.h's unit as kernels", t_mlp());
    VT_CASE("attention block f32: gpt.h's unit as kernels", t_attn_block());
    VT_CASE("backward kernels against finite differences", t_finite_differences());
    VT_CASE("bad input", t_errors());
#if defined(VESCALE_NCCL) || defined(VESCALE_NVRTC)
    VT_CASE("launch signatures match the compiled kernels' parameters", t_signatures());
#endif
    printf("# tol device order vs host: f32 %.3g, bf16 %.3g (of each tensor's largest value); bf16: %lld of %lld "
           "elements apart, at most %lld bf16 steps\n",
           worst[0][0], worst[1][0], bf16_diff, bf16_total, bf16_steps);
    VT_CASE("bf16: the device order at most one bf16 step from the host build",
            VT_CHECK(bf16_steps <= 1, "%lld steps", bf16_steps));
    if (have_device)
        printf("# tol device vs host: f32 %.3g, bf16 %.3g\n", worst[0][1], worst[1][1]);
    else
        vt_skip("gpt kernels on a device", "no CUDA device here, or a build without VESCALE_NCCL (make test runs build/test_gpt_kernels_strict)");
#ifdef VS_STRICT
    VT_CASE("no strict stand-in violations, one NVRTC library for every kernel", strict_totals());
#endif
    return vt_summary();
}
