/* gpt_kernels.h - examples/gpt.h's kernels written once, run on both sides: as
   host C (thread ranks, MPI) and, the very same text stringified, as CUDA that
   NVRTC compiles at run time (vescale_mesh.h's vs_kernels_get), the way the
   library writes its own kernels (vescale_mesh.h >>kernels, vescale_ddp.h).

   Include after vescale.h (or vescale_mesh.h); everything is static:
       gpt_kctx k;
       gpt_kctx_init(&k, GPT_K_HOST, NULL);          // host pointers: plain loops
       gpt_kctx_init(&k, GPT_K_DEVICE, stream);      // device pointers: kernels on `stream`
       gpt_k_layernorm(&k, n, D, x, ln_g, ln_b, y, mean, rstd, GPT_KF32, GPT_KF32);
   GPT_K_DEVICE needs a build with VESCALE_NCCL (the CUDA runtime; link -lnvrtc);
   the NVRTC source alone is there with VESCALE_NVRTC too (gpt_kernel_text).

   The kernels (each a gpt_k_* call; f32, bf16 and f16 storage through dtype
   codes, arithmetic and accumulation in f32):
       embed          x = wte[ids] + wpe[pos]       embed_backward   wte's gradient rows += dx
       add_rows       y += a (bias, positions, the residual)   sum_rows  its gradient: a's rows summed
       layernorm      y, mean, rstd                 layernorm_backward / _weight   dx +=, dg/db +=
       matmul         C = [C +] op(A) op(B) [+ bias], op: as stored or transposed (tiled, 32 x 32)
       gelu           tanh form (GPT-2)             gelu_backward
       attention      causal, per head: P = softmax(q k^T / sqrt(hd)), y = P v
       attention_backward   dq, dk, dv += (dS: a [B, H, T, T] f32 scratch)
       cross_entropy  per-token loss and softmax - one_hot (whole vocab)
       mean           the loss: mean of the per-token losses (summed in double)
       scale          dlogits = G * (dloss / n)
   Saved statistics (mean, rstd), attention probabilities P and cross-entropy's
   G are f32 whatever the activations' dtype.

   Same results as gpt.h: the host build (GPT_K_HOST) sums every reduction in
   gpt.h's order (one "thread" per reduction: GPT_KT is 1 there), and every
   other sum (matmul's dot products, the gradients accumulated over rows) in
   gpt.h's order on both sides (each output is one thread's, its terms added in
   order), so in f32 the host build gives gpt.h's bits exactly (with gcc's
   default -ffp-contract=off of -std=c99: no FMA contraction). The device build
   reduces a row (layernorm's sums, the softmax denominators, attention's
   backward dot product, the loss) with VS_MKT strided partial sums and then a
   tree, as a GPU block does: those differ from the host's by rounding
   (tests/test_gpt_kernels.c: f32 within 1e-5 of the tensor's largest value,
   measured 3.8e-7; bf16 storage: 1 element of 24542 one bf16 step apart). GPT_K_HOST_DEVICE_ORDER runs that decomposition on the host (the
   strict stand-in does too): a GPU's results equal it bit for bit except
   where CUDA's expf / tanhf / logf round apart from the C library's (NVRTC
   runs with --fmad=false, IEEE division and square root, as the library's
   kernels).

   The VS_MK* vocabulary is vescale_mesh.h's public one (>>kernels there): the
   element loads and stores (VS_MKN(ld), VS_MKN(st)) and the block's tree
   (VS_MKFOLD) are its shared words, and each kernel is declared the library's way
   (gpt_kernel_decls: arguments, flops and bytes from them), so the strict
   stand-in runs and times them from the declarations alone.

   gpt.h's units run these on a device (call->stream) and, in their host build,
   for bf16/f16 parameters (gpt.h >>device); f32 on the host keeps gpt.h's own
   loops (its blocked, vectorized gpt_mm_* are ~5x faster than this matmul's
   host build, same bits). On a GPU cuBLAS(Lt) may replace the tiled kernel
   (then within a tolerance, its sums in its own order). */
#ifndef GPT_KERNELS_H
#define GPT_KERNELS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "vescale.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define GPT__KUNUSED __attribute__((unused))
#else
#define GPT__KUNUSED
#endif
#define GPT__KFN static GPT__KUNUSED

/* Storage dtype codes of the kernels' tensors (gpt_kdtype maps vs_dtype). */
enum { GPT_KF32 = 0, GPT_KBF16 = 1, GPT_KF16 = 2 };

/* Where the kernels run. */
enum {
    GPT_K_HOST = 0,              // host pointers; reductions in gpt.h's order
    GPT_K_HOST_DEVICE_ORDER = 1, // host pointers; the device build's block decomposition, run on the host
    GPT_K_DEVICE = 2             // device pointers; kernels launched on the stream (VESCALE_NCCL)
};

// >>vocabulary -----------------------------------------------------------------
/* vescale_mesh.h's kernel vocabulary under this file's names. GPT_KT is the
   width of a block's reductions: 1 in the host build (a row summed in order),
   VS_MKT (a block's threads) in the device build and its host emulation;
   GPT__KORDER says which host build is being expanded. (GPT_KLOOP's variable
   may have any name: vescale_mesh.h's loop words no longer name their
   parameter x, which rewrote blockIdx.x in the device build.) */
#define GPT_KGLOBAL VS_MKGLOBAL
#define GPT_KDEV VS_MKDEV
#define GPT_KLOOP VS_MKLOOP
#define GPT_KROWS VS_MKROWS
#define GPT_KTHREADS VS_MKTHREADS
#define GPT_KTHREADS_BELOW VS_MKTHREADS_BELOW
#define GPT_KSYNC VS_MKSYNC
#define GPT_KSHARED VS_MKSHARED
#define GPT_KU2F VS_MKU2F
#define GPT_KBF16OF VS_MKN(bf16)
#define GPT_KF16OF VS_MKN(f16)
#define GPT_KFROMF16 VS_MKN(from_f16)
#define GPT_KBLOCK VS_MKT
#define GPT_KT VS_MKSEL(GPT__KT_H(GPT__KORDER), VS_MKT)
#define GPT__KT_H(o) GPT__KT_H_(o)
#define GPT__KT_H_(o) GPT__KT_H##o
#define GPT__KT_H0 1
#define GPT__KT_H1 VS_MKT
#define GPT_KN(x) VS_MKSEL(GPT__KN_H(GPT__KORDER, x), gptk_##x)
#define GPT__KN_H(o, x) GPT__KN_H_(o, x)
#define GPT__KN_H_(o, x) gpt__k##o##_##x
#define GPT__KORDER 0
#define GPT__KFOLD_OP(a, b) (op ? VS_MK_MAX(a, b) : VS_MK_ADD(a, b)) /* fold's: op 1 maximum, 0 sum */

// >>kernels --------------------------------------------------------------------
/* The text. Block comments only (it becomes one line). Each reduction: the
   threads below cnt take strided partial sums into red[], then GPT_KN(fold)
   folds them (nothing to fold where GPT_KT is 1) and hands every thread the
   result (a value the whole block needs, as a row's mean: a block-scope local,
   the same in every thread and so in the host build's one variable). */
#define GPT__KERNELS \
    /* the threads that reduce n elements: each one's strided partial has at least one */ \
    GPT_KDEV int GPT_KN(width)(long long n) { return VS_MKWIDTH(n, GPT_KT); } \
    /* the sum (op 0) or the maximum (op 1) of the block's partials s[0, cnt), by a tree \
       (every thread calls it; s is free again when it returns) */ \
    GPT_KDEV float GPT_KN(fold)(float* s, int cnt, int op) \
    { \
        float v; \
        GPT_KSYNC; \
        VS_MKFOLD(s, cnt, GPT_KT, GPT__KFOLD_OP) \
        v = s[0]; \
        GPT_KSYNC; \
        return v; \
    } \
    /* softmax's statistics of the row p[off, off + len) (dtype t): its maximum and the sum of \
       exp(v - maximum), both for the whole block (red: GPT_KT floats of shared scratch) */ \
    GPT_KDEV void GPT_KN(softmax_stats)(const void* p, int t, long long off, long long len, float* red, float* mx, \
                                       float* se) \
    { \
        int cnt = GPT_KN(width)(len); \
        float m; \
        GPT_KTHREADS_BELOW(u, cnt) { \
            float a = GPT_KU2F(0xff800000u), v; \
            long long j; \
            for (j = u; j < len; j += GPT_KT) { \
                v = VS_MKN(ld)(p, t, off + j); \
                a = v > a ? v : a; \
            } \
            red[u] = a; \
        } \
        m = GPT_KN(fold)(red, cnt, 1); \
        GPT_KTHREADS_BELOW(u, cnt) { \
            float a = 0.0f; \
            long long j; \
            for (j = u; j < len; j += GPT_KT) a += expf(VS_MKN(ld)(p, t, off + j) - m); \
            red[u] = a; \
        } \
        *se = GPT_KN(fold)(red, cnt, 0); \
        *mx = m; \
    } \
    /* xi[i] = wte[ids[i] - v0] (0 outside [v0, v0 + Vl): another rank's rows) + wpe[i % T] (if wpe) */ \
    GPT_KGLOBAL GPT_KN(embed)(void* out, int tx, const void* wte, const void* wpe, int tw, const int* ids, long long n, \
                              long long T, long long D, long long v0, long long Vl) \
    { \
        GPT_KLOOP(x, n * D) { \
            long long i = x / D, d = x - i * D, r = ids[i] - v0; \
            float a = r >= 0 && r < Vl ? VS_MKN(ld)(wte, tw, r * D + d) : 0.0f; \
            if (wpe) a = a + VS_MKN(ld)(wpe, tw, i % T * D + d); \
            VS_MKN(st)(out, tx, x, a); \
        } \
    } \
    /* gwte[ids[i] - v0] += dx[i], tokens in order: element (r, d) belongs to thread (d, r % nb) */ \
    GPT_KGLOBAL GPT_KN(embed_bwd)(void* gwte, int tg, const void* dx, int tx, const int* ids, long long n, long long D, \
                                  long long v0, long long Vl, long long nb) \
    { \
        GPT_KLOOP(x, D * nb) { \
            long long d = x % D, b = x / D, i, r; \
            for (i = 0; i < n; i++) { \
                r = ids[i] - v0; \
                if (r >= 0 && r < Vl && r % nb == b) \
                    VS_MKN(st)(gwte, tg, r * D + d, VS_MKN(ld)(gwte, tg, r * D + d) + VS_MKN(ld)(dx, tx, i * D + d)); \
            } \
        } \
    } \
    /* y[i, d] += a[p0 + i % T, d] over [n, D]: a bias (T 1), positions, the residual (T n) */ \
    GPT_KGLOBAL GPT_KN(add_rows)(void* y, int ty, const void* a, int ta, long long n, long long T, long long D, long long p0) \
    { \
        GPT_KLOOP(x, n * D) { \
            long long i = x / D, d = x - i * D; \
            VS_MKN(st)(y, ty, x, VS_MKN(ld)(y, ty, x) + VS_MKN(ld)(a, ta, (p0 + i % T) * D + d)); \
        } \
    } \
    /* add_rows' gradient: g[p0 + t, d] += a[i, d] over the rows i = t mod T, in order */ \
    GPT_KGLOBAL GPT_KN(sum_rows)(void* g, int tg, const void* a, int ta, long long n, long long T, long long D, long long p0) \
    { \
        long long tt = T < n ? T : n; \
        GPT_KLOOP(x, tt * D) { \
            long long t = x / D, d = x - t * D, i; \
            float acc = VS_MKN(ld)(g, tg, (p0 + t) * D + d); \
            for (i = t; i < n; i += T) acc += VS_MKN(ld)(a, ta, i * D + d); \
            VS_MKN(st)(g, tg, (p0 + t) * D + d, acc); \
        } \
    } \
    GPT_KGLOBAL GPT_KN(ln_fwd)(void* y, int ty, float* mean, float* rstd, const void* xi, int tx, const void* g, \
                               const void* b, int tw, long long n, long long D) \
    { \
        GPT_KSHARED float red[GPT_KT]; \
        int cnt = GPT_KN(width)(D); \
        GPT_KROWS(i, n) { \
            float m, v, s; \
            GPT_KTHREADS_BELOW(u, cnt) { \
                float a = 0.0f; \
                long long d; \
                for (d = u; d < D; d += GPT_KT) a += VS_MKN(ld)(xi, tx, i * D + d); \
                red[u] = a; \
            } \
            m = GPT_KN(fold)(red, cnt, 0) / (float)D; \
            GPT_KTHREADS_BELOW(u, cnt) { \
                float a = 0.0f, r; \
                long long d; \
                for (d = u; d < D; d += GPT_KT) { \
                    r = VS_MKN(ld)(xi, tx, i * D + d); \
                    a += (r - m) * (r - m); \
                } \
                red[u] = a; \
            } \
            v = GPT_KN(fold)(red, cnt, 0) / (float)D; \
            s = 1.0f / sqrtf(v + 1e-5f); \
            GPT_KTHREADS_BELOW(u, 1) { \
                mean[i] = m; \
                rstd[i] = s; \
            } \
            GPT_KTHREADS_BELOW(u, GPT_KT) { \
                long long d; \
                for (d = u; d < D; d += GPT_KT) \
                    VS_MKN(st)(y, ty, i * D + d, \
                               (VS_MKN(ld)(xi, tx, i * D + d) - m) * s * VS_MKN(ld)(g, tw, d) + VS_MKN(ld)(b, tw, d)); \
            } \
            GPT_KSYNC; \
        } \
    } \
    /* dx += the norm's input gradient given dy */ \
    GPT_KGLOBAL GPT_KN(ln_bwd)(void* dx, int tdx, const void* dy, int tdy, const void* xi, int tx, const void* g, int tw, \
                               const float* mean, const float* rstd, long long n, long long D) \
    { \
        GPT_KSHARED float ra[GPT_KT]; \
        GPT_KSHARED float rc[GPT_KT]; \
        int cnt = GPT_KN(width)(D); \
        GPT_KROWS(i, n) { \
            float m = mean[i], s = rstd[i], a, c; \
            GPT_KTHREADS_BELOW(u, cnt) { \
                float sa = 0.0f, sc = 0.0f, xh, dxh; \
                long long d; \
                for (d = u; d < D; d += GPT_KT) { \
                    xh = (VS_MKN(ld)(xi, tx, i * D + d) - m) * s, dxh = VS_MKN(ld)(dy, tdy, i * D + d) * VS_MKN(ld)(g, tw, d); \
                    sa += dxh, sc += dxh * xh; \
                } \
                ra[u] = sa, rc[u] = sc; \
            } \
            a = GPT_KN(fold)(ra, cnt, 0) / (float)D; \
            c = GPT_KN(fold)(rc, cnt, 0) / (float)D; \
            GPT_KTHREADS_BELOW(u, GPT_KT) { \
                float xh, dxh; \
                long long d; \
                for (d = u; d < D; d += GPT_KT) { \
                    xh = (VS_MKN(ld)(xi, tx, i * D + d) - m) * s, dxh = VS_MKN(ld)(dy, tdy, i * D + d) * VS_MKN(ld)(g, tw, d); \
                    VS_MKN(st)(dx, tdx, i * D + d, VS_MKN(ld)(dx, tdx, i * D + d) + s * (dxh - a - xh * c)); \
                } \
            } \
            GPT_KSYNC; \
        } \
    } \
    /* dg, db += the norm's weight gradients: column d is thread d's, rows in order */ \
    GPT_KGLOBAL GPT_KN(ln_bwd_w)(void* dg, void* db, int tg, const void* dy, int tdy, const void* xi, int tx, \
                                 const float* mean, const float* rstd, long long n, long long D) \
    { \
        GPT_KLOOP(x, D) { \
            long long d = x; \
            float ag = VS_MKN(ld)(dg, tg, d), ab = VS_MKN(ld)(db, tg, d), xh, gy; \
            long long i; \
            for (i = 0; i < n; i++) { \
                xh = (VS_MKN(ld)(xi, tx, i * D + d) - mean[i]) * rstd[i], gy = VS_MKN(ld)(dy, tdy, i * D + d); \
                ag += gy * xh; \
                ab += gy; \
            } \
            VS_MKN(st)(dg, tg, d, ag); \
            VS_MKN(st)(db, tg, d, ab); \
        } \
    } \
    /* C[M, N] = (beta ? C : 0) + op(A)[M, K] op(B)[K, N] (+ bias[N]); op(A) = A[K, M]^T where trans & 1, \
       op(B) = B[N, K]^T where trans & 2. A block a 32 xi 32 tile of C, a thread 2 xi 2 of it, k in order \
       (the per-thread sums in shared memory: the host build's threads are loop iterations) */ \
    GPT_KGLOBAL GPT_KN(mm)(void* C, int tc, const void* A, int ta, const void* B, int tb, const void* bias, int tbias, \
                           long long M, long long K, long long N, int trans, int beta) \
    { \
        GPT_KSHARED float As[16][33]; \
        GPT_KSHARED float Bs[16][33]; \
        GPT_KSHARED float acc[4][GPT_KBLOCK]; \
        long long tn = (N + 31) / 32; \
        GPT_KROWS(tile, (M + 31) / 32 * tn) { \
            long long i0 = tile / tn * 32, j0 = tile % tn * 32, k0; \
            GPT_KTHREADS(u) { \
                int q; \
                for (q = 0; q < 4; q++) { \
                    long long i = i0 + u / 16 + 16 * (q >> 1), j = j0 + u % 16 + 16 * (q & 1); \
                    acc[q][u] = beta && i < M && j < N ? VS_MKN(ld)(C, tc, i * N + j) : 0.0f; \
                } \
            } \
            for (k0 = 0; k0 < K; k0 += 16) { \
                int kn = K - k0 < 16 ? (int)(K - k0) : 16; \
                GPT_KTHREADS(u) { \
                    int q, kk, c; \
                    long long i, j, k; \
                    for (q = 0; q < 2; q++) { \
                        int e = u + q * GPT_KBLOCK; \
                        kk = trans & 1 ? e / 32 : e % 16, c = trans & 1 ? e % 32 : e / 16; \
                        i = i0 + c, k = k0 + kk; \
                        As[kk][c] = i < M && k < K ? VS_MKN(ld)(A, ta, trans & 1 ? k * M + i : i * K + k) : 0.0f; \
                        kk = trans & 2 ? e % 16 : e / 32, c = trans & 2 ? e / 16 : e % 32; \
                        j = j0 + c, k = k0 + kk; \
                        Bs[kk][c] = j < N && k < K ? VS_MKN(ld)(B, tb, trans & 2 ? j * K + k : k * N + j) : 0.0f; \
                    } \
                } \
                GPT_KSYNC; \
                GPT_KTHREADS(u) { \
                    int ty = u / 16, tx = u % 16, kk; \
                    float c00 = acc[0][u], c01 = acc[1][u], c10 = acc[2][u], c11 = acc[3][u], a0, a1, b0, b1; \
                    for (kk = 0; kk < kn; kk++) { \
                        a0 = As[kk][ty], a1 = As[kk][ty + 16], b0 = Bs[kk][tx], b1 = Bs[kk][tx + 16]; \
                        c00 += a0 * b0, c01 += a0 * b1, c10 += a1 * b0, c11 += a1 * b1; \
                    } \
                    acc[0][u] = c00, acc[1][u] = c01, acc[2][u] = c10, acc[3][u] = c11; \
                } \
                GPT_KSYNC; \
            } \
            GPT_KTHREADS(u) { \
                int q; \
                for (q = 0; q < 4; q++) { \
                    long long i = i0 + u / 16 + 16 * (q >> 1), j = j0 + u % 16 + 16 * (q & 1); \
                    float v = acc[q][u]; \
                    if (i >= M || j >= N) continue; \
                    if (bias) v = v + VS_MKN(ld)(bias, tbias, j); \
                    VS_MKN(st)(C, tc, i * N + j, v); \
                } \
            } \
        } \
    } \
    GPT_KDEV float GPT_KN(gelu)(float a) \
    { \
        return 0.5f * a * (1.0f + tanhf(0.7978845608028654f * (a + 0.044715f * a * a * a))); \
    } \
    GPT_KDEV float GPT_KN(gelu_grad)(float a) \
    { \
        float t = tanhf(0.7978845608028654f * (a + 0.044715f * a * a * a)); \
        return 0.5f * (1.0f + t) + 0.5f * a * (1.0f - t * t) * 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * a * a); \
    } \
    GPT_KGLOBAL GPT_KN(gelu_fwd)(void* z, int tz, const void* a, int ta, long long n) \
    { \
        GPT_KLOOP(x, n) VS_MKN(st)(z, tz, x, GPT_KN(gelu)(VS_MKN(ld)(a, ta, x))); \
    } \
    /* da = dz * gelu'(a) (da may be dz) */ \
    GPT_KGLOBAL GPT_KN(gelu_bwd)(void* da, int tda, const void* dz, int tdz, const void* a, int ta, long long n) \
    { \
        GPT_KLOOP(x, n) VS_MKN(st)(da, tda, x, VS_MKN(ld)(dz, tdz, x) * GPT_KN(gelu_grad)(VS_MKN(ld)(a, ta, x))); \
    } \
    /* causal attention, a block per (b, h, t): q, k, v, y [B*T, Hl*hd]; P [B, Hl, T, T] f32 */ \
    GPT_KGLOBAL GPT_KN(attn_fwd)(float* P, void* y, int ty, const void* q, const void* k, const void* v, int tq, \
                                 long long B, long long T, long long Hl, long long hd) \
    { \
        GPT_KSHARED float red[GPT_KT]; \
        long long W = Hl * hd; \
        float sc = 1.0f / sqrtf((float)hd); \
        GPT_KROWS(r, B * Hl * T) { \
            long long b = r / (Hl * T), h = r / T % Hl, t = r % T, qo = (b * T + t) * W + h * hd; \
            float* p = P + r * T; \
            float mx, sum; \
            GPT_KTHREADS_BELOW(u, GPT_KT) { \
                float a; \
                long long s, j, ko; \
                for (s = u; s <= t; s += GPT_KT) { \
                    ko = (b * T + s) * W + h * hd, a = 0.0f; \
                    for (j = 0; j < hd; j++) a += VS_MKN(ld)(q, tq, qo + j) * VS_MKN(ld)(k, tq, ko + j); \
                    p[s] = a * sc; \
                } \
            } \
            GPT_KSYNC; \
            GPT_KN(softmax_stats)(p, 0, 0, t + 1, red, &mx, &sum); \
            GPT_KTHREADS_BELOW(u, GPT_KT) { \
                long long s; \
                for (s = u; s < T; s += GPT_KT) p[s] = s <= t ? expf(p[s] - mx) / sum : 0.0f; \
            } \
            GPT_KSYNC; \
            GPT_KTHREADS_BELOW(u, GPT_KT) { \
                long long s, j; \
                float a; \
                for (j = u; j < hd; j += GPT_KT) { \
                    a = 0.0f; \
                    for (s = 0; s <= t; s++) a += p[s] * VS_MKN(ld)(v, tq, (b * T + s) * W + h * hd + j); \
                    VS_MKN(st)(y, ty, qo + j, a); \
                } \
            } \
            GPT_KSYNC; \
        } \
    } \
    /* attention's backward, first the rows: dS[b, h, t, s] = P (dy_t . v_s - sum_s P dy_t . v_s) / sqrt(hd) */ \
    GPT_KGLOBAL GPT_KN(attn_bwd_rows)(float* dS, const float* P, const void* dy, const void* v, int ta, long long B, \
                                      long long T, long long Hl, long long hd) \
    { \
        GPT_KSHARED float red[GPT_KT]; \
        long long W = Hl * hd; \
        float sc = 1.0f / sqrtf((float)hd); \
        GPT_KROWS(r, B * Hl * T) { \
            long long b = r / (Hl * T), h = r / T % Hl, t = r % T, yo = (b * T + t) * W + h * hd; \
            const float* p = P + r * T; \
            float* ds = dS + r * T; \
            int cnt = GPT_KN(width)(t + 1); \
            float dot; \
            GPT_KTHREADS_BELOW(u, cnt) { \
                float acc = 0.0f, a; \
                long long s, j, vo; \
                for (s = u; s <= t; s += GPT_KT) { \
                    vo = (b * T + s) * W + h * hd, a = 0.0f; \
                    for (j = 0; j < hd; j++) a += VS_MKN(ld)(dy, ta, yo + j) * VS_MKN(ld)(v, ta, vo + j); \
                    ds[s] = a; \
                    acc += p[s] * a; \
                } \
                red[u] = acc; \
            } \
            dot = GPT_KN(fold)(red, cnt, 0); \
            GPT_KTHREADS_BELOW(u, GPT_KT) { \
                long long s; \
                for (s = u; s < T; s += GPT_KT) ds[s] = s <= t ? p[s] * (ds[s] - dot) * sc : 0.0f; \
            } \
            GPT_KSYNC; \
        } \
    } \
    /* ... then dq, dk, dv += at each element (b, u, h, j): dq over s <= u, dk and dv over t >= u, in order */ \
    GPT_KGLOBAL GPT_KN(attn_bwd)(void* dq, void* dk, void* dv, int tg, const float* dS, const float* P, const void* q, \
                                 const void* k, const void* dy, int ta, long long B, long long T, long long Hl, \
                                 long long hd) \
    { \
        long long W = Hl * hd; \
        GPT_KLOOP(x, B * T * W) { \
            long long b = x / (T * W), u = x / W % T, h = x % W / hd, j = x % hd, s, t, o; \
            const float* ds = dS + (b * Hl + h) * T * T; \
            const float* p = P + (b * Hl + h) * T * T; \
            float aq = VS_MKN(ld)(dq, tg, x), ak = VS_MKN(ld)(dk, tg, x), av = VS_MKN(ld)(dv, tg, x); \
            for (s = 0; s <= u; s++) aq += ds[u * T + s] * VS_MKN(ld)(k, ta, (b * T + s) * W + h * hd + j); \
            for (t = u; t < T; t++) { \
                o = (b * T + t) * W + h * hd + j; \
                ak += ds[t * T + u] * VS_MKN(ld)(q, ta, o); \
                av += p[t * T + u] * VS_MKN(ld)(dy, ta, o); \
            } \
            VS_MKN(st)(dq, tg, x, aq); \
            VS_MKN(st)(dk, tg, x, ak); \
            VS_MKN(st)(dv, tg, x, av); \
        } \
    } \
    /* softmax cross-entropy over the whole vocab, a block per token: tl[i] the loss (NaN for a target \
       outside [0, V)), G[i] = softmax(lg[i]) - one_hot(tg[i]) (G may be lg when f32) */ \
    GPT_KGLOBAL GPT_KN(ce)(float* G, float* tl, const void* lg, int tlg, const int* tg, long long n, long long V) \
    { \
        GPT_KSHARED float red[GPT_KT]; \
        GPT_KROWS(i, n) { \
            float mx, se; \
            long long y = tg[i]; \
            GPT_KN(softmax_stats)(lg, tlg, i * V, V, red, &mx, &se); \
            GPT_KTHREADS_BELOW(u, 1) { \
                tl[i] = y >= 0 && y < V ? logf(se) + mx - VS_MKN(ld)(lg, tlg, i * V + y) : GPT_KU2F(0x7fc00000u); \
            } \
            GPT_KSYNC; \
            GPT_KTHREADS_BELOW(u, GPT_KT) { \
                long long j; \
                float a; \
                for (j = u; j < V; j += GPT_KT) { \
                    a = expf(VS_MKN(ld)(lg, tlg, i * V + j) - mx) / se; \
                    G[i * V + j] = j == y ? a - 1.0f : a; \
                } \
            } \
            GPT_KSYNC; \
        } \
    } \
    /* loss[0] = the mean of tl[0, n) (0 when n is 0), summed in double; one block */ \
    GPT_KGLOBAL GPT_KN(mean)(float* loss, const float* tl, long long n) \
    { \
        GPT_KSHARED double red[GPT_KT]; \
        int cnt = GPT_KN(width)(n); \
        GPT_KROWS(row, 1) { \
            GPT_KTHREADS_BELOW(u, cnt) { \
                double a = 0; \
                long long i; \
                for (i = u; i < n; i += GPT_KT) a += tl[i]; \
                red[u] = a; \
            } \
            GPT_KSYNC; \
            VS_MKFOLD(red, cnt, GPT_KT, VS_MK_ADD) \
            GPT_KTHREADS_BELOW(u, 1) loss[0] = n ? (float)(red[0] / (double)n) : 0.0f; \
        } \
    } \
    /* y = xi * (num[0] / den) (0 when den is 0): the logits' gradient from the loss's */ \
    GPT_KGLOBAL GPT_KN(scale)(void* y, int ty, const float* xi, const float* num, long long n, long long den) \
    { \
        GPT_KLOOP(x, n) VS_MKN(st)(y, ty, x, xi[x] * (den ? num[0] / (float)den : 0.0f)); \
    }

/* Kernel indices; the device names are "gptk_" + the name, the host builds'
   gpt__k0_<name> (GPT_K_HOST) and gpt__k1_<name> (GPT_K_HOST_DEVICE_ORDER). */
enum {
    GPT_KI_EMBED,
    GPT_KI_EMBED_BWD,
    GPT_KI_ADD_ROWS,
    GPT_KI_SUM_ROWS,
    GPT_KI_LN_FWD,
    GPT_KI_LN_BWD,
    GPT_KI_LN_BWD_W,
    GPT_KI_MM,
    GPT_KI_GELU_FWD,
    GPT_KI_GELU_BWD,
    GPT_KI_ATTN_FWD,
    GPT_KI_ATTN_BWD_ROWS,
    GPT_KI_ATTN_BWD,
    GPT_KI_CE,
    GPT_KI_MEAN,
    GPT_KI_SCALE,
    GPT_KI_N
};

/* Each kernel's declaration (vescale_mesh.h's vs_kernel_decl): its arguments
   (w a pointer the kernel writes, r one it only reads, i an int, l a long
   long: what launches and the stand-in marshal; tests/test_gpt_kernels.c
   checks them against the PTX) and its cost from them: each operand's bytes
   once (a GPU's caches serve the re-reads: matmul's tiles, attention's k and v
   rows, a row's passes), an expf, tanhf or logf as GPT_KTRANS operations (a
   stated count), arithmetic in f32 on CUDA cores (the tiled matmul too). */
#define GPT_KTRANS 8.0
#define GPT__KLL(i) ((double)VS_MKARG(long long, i))
#define GPT__KE(i) VS_MKESZ(VS_MKARG(int, i))
GPT__KFN void gpt__kc_embed(void** a, vs_kernel_cost* c) /* out tx wte wpe tw ids n T D v0 Vl */
{
    double nd = GPT__KLL(6) * GPT__KLL(8), pos = VS_MKARG(const void*, 3) ? 1 : 0;
    c->flops = pos * nd;
    c->bytes = nd * (GPT__KE(4) * (1 + pos) + GPT__KE(1)) + 4 * GPT__KLL(6);
}
GPT__KFN void gpt__kc_embed_bwd(void** a, vs_kernel_cost* c) /* gwte tg dx tx ids n D v0 Vl nb */
{
    double nd = GPT__KLL(5) * GPT__KLL(6);
    c->flops = nd;
    c->bytes = nd * (GPT__KE(3) + 2 * GPT__KE(1)) + 4 * GPT__KLL(5);
}
GPT__KFN void gpt__kc_add_rows(void** a, vs_kernel_cost* c) /* y ty a ta n T D p0 */
{
    double n = GPT__KLL(4), T = GPT__KLL(5), D = GPT__KLL(6);
    c->flops = n * D;
    c->bytes = n * D * 2 * GPT__KE(1) + (T < n ? T : n) * D * GPT__KE(3);
}
GPT__KFN void gpt__kc_sum_rows(void** a, vs_kernel_cost* c) /* g tg a ta n T D p0 */
{
    double n = GPT__KLL(4), T = GPT__KLL(5), D = GPT__KLL(6);
    c->flops = n * D;
    c->bytes = (T < n ? T : n) * D * 2 * GPT__KE(1) + n * D * GPT__KE(3);
}
GPT__KFN void gpt__kc_ln_fwd(void** a, vs_kernel_cost* c) /* y ty mean rstd x tx g b tw n D */
{
    double n = GPT__KLL(9), D = GPT__KLL(10);
    c->flops = 8 * n * D; // the sum 1, the variance 3, the normalization 4 an element
    c->bytes = n * D * (GPT__KE(5) + GPT__KE(1)) + 2 * D * GPT__KE(8) + 8 * n;
}
GPT__KFN void gpt__kc_ln_bwd(void** a, vs_kernel_cost* c) /* dx tdx dy tdy x tx g tw mean rstd n D */
{
    double n = GPT__KLL(10), D = GPT__KLL(11);
    c->flops = 14 * n * D;
    c->bytes = n * D * (GPT__KE(3) + GPT__KE(5) + 2 * GPT__KE(1)) + D * GPT__KE(7) + 8 * n;
}
GPT__KFN void gpt__kc_ln_bwd_w(void** a, vs_kernel_cost* c) /* dg db tg dy tdy x tx mean rstd n D */
{
    double n = GPT__KLL(9), D = GPT__KLL(10);
    c->flops = 5 * n * D;
    c->bytes = n * D * (GPT__KE(4) + GPT__KE(6)) + 4 * D * GPT__KE(2) + 8 * n;
}
GPT__KFN void gpt__kc_mm(void** a, vs_kernel_cost* c) /* C tc A ta B tb bias tbias M K N trans beta */
{
    double M = GPT__KLL(8), K = GPT__KLL(9), N = GPT__KLL(10), bias = VS_MKARG(const void*, 6) ? 1 : 0;
    double beta = VS_MKARG(int, 12) ? 1 : 0;
    c->flops = 2 * M * N * K + (bias + beta) * M * N;
    c->bytes = M * K * GPT__KE(3) + K * N * GPT__KE(5) + M * N * GPT__KE(1) * (1 + beta) + bias * N * GPT__KE(7);
}
GPT__KFN void gpt__kc_gelu_fwd(void** a, vs_kernel_cost* c) /* z tz a ta n */
{
    double n = GPT__KLL(4);
    c->flops = n * (9 + GPT_KTRANS);
    c->bytes = n * (GPT__KE(1) + GPT__KE(3));
}
GPT__KFN void gpt__kc_gelu_bwd(void** a, vs_kernel_cost* c) /* da tda dz tdz a ta n */
{
    double n = GPT__KLL(6);
    c->flops = n * (20 + GPT_KTRANS);
    c->bytes = n * (GPT__KE(1) + GPT__KE(3) + GPT__KE(5));
}
/* attention's rows: B*Hl*T, row t of its sequence over t + 1 keys: sum (t + 1) = T(T + 1)/2 a head */
GPT__KFN void gpt__kc_attn_fwd(void** a, vs_kernel_cost* c) /* P y ty q k v tq B T Hl hd */
{
    double B = GPT__KLL(7), T = GPT__KLL(8), H = GPT__KLL(9), hd = GPT__KLL(10), pairs = B * H * T * (T + 1) / 2;
    c->flops = pairs * (4 * hd + 2 * GPT_KTRANS + 4); // q.k and P v; the softmax's two exps, max, sum, scale
    c->bytes = B * T * H * hd * (3 * GPT__KE(6) + GPT__KE(2)) + 8 * B * H * T * T; // P written and read back
}
GPT__KFN void gpt__kc_attn_bwd_rows(void** a, vs_kernel_cost* c) /* dS P dy v ta B T Hl hd */
{
    double B = GPT__KLL(5), T = GPT__KLL(6), H = GPT__KLL(7), hd = GPT__KLL(8), pairs = B * H * T * (T + 1) / 2;
    c->flops = pairs * (2 * hd + 5);
    c->bytes = B * T * H * hd * 2 * GPT__KE(4) + 12 * B * H * T * T; // P read, dS written and read back
}
GPT__KFN void gpt__kc_attn_bwd(void** a, vs_kernel_cost* c) /* dq dk dv tg dS P q k dy ta B T Hl hd */
{
    double B = GPT__KLL(10), T = GPT__KLL(11), H = GPT__KLL(12), hd = GPT__KLL(13);
    c->flops = 3 * B * H * hd * T * (T + 1); // dq over s <= u, dk and dv over t >= u: 2 each
    c->bytes = B * T * H * hd * (6 * GPT__KE(3) + 3 * GPT__KE(9)) + 8 * B * H * T * T;
}
GPT__KFN void gpt__kc_ce(void** a, vs_kernel_cost* c) /* G tl lg tlg tg n V */
{
    double n = GPT__KLL(5), V = GPT__KLL(6);
    c->flops = n * V * (2 * GPT_KTRANS + 5);
    c->bytes = n * V * (GPT__KE(3) + 4) + 8 * n;
}
GPT__KFN void gpt__kc_mean(void** a, vs_kernel_cost* c) /* loss tl n */
{
    c->flops = GPT__KLL(2);
    c->bytes = 4 * GPT__KLL(2) + 4;
}
GPT__KFN void gpt__kc_scale(void** a, vs_kernel_cost* c) /* y ty x num n den */
{
    double n = GPT__KLL(4);
    c->flops = n + 1;
    c->bytes = n * (4 + GPT__KE(1)) + 4;
}
#undef GPT__KLL
#undef GPT__KE
static const vs_kernel_decl gpt_kernel_decls[GPT_KI_N] GPT__KUNUSED = {
    {"gptk_embed", "wirrirlllll", "x tx wte wpe tw ids n T D v0 Vl", gpt__kc_embed, 0},
    {"gptk_embed_bwd", "wirirlllll", "gwte tg dx tx ids n D v0 Vl nb", gpt__kc_embed_bwd, 0},
    {"gptk_add_rows", "wirillll", "y ty a ta n T D p0", gpt__kc_add_rows, 0},
    {"gptk_sum_rows", "wirillll", "g tg a ta n T D p0", gpt__kc_sum_rows, 0},
    {"gptk_ln_fwd", "wiwwrirrill", "y ty mean rstd x tx g b tw n D", gpt__kc_ln_fwd, 0},
    {"gptk_ln_bwd", "wiriririrrll", "dx tdx dy tdy x tx g tw mean rstd n D", gpt__kc_ln_bwd, 0},
    {"gptk_ln_bwd_w", "wwiririrrll", "dg db tg dy tdy x tx mean rstd n D", gpt__kc_ln_bwd_w, 0},
    {"gptk_mm", "wiriririlllii", "C tc A ta B tb bias tbias M K N trans beta", gpt__kc_mm, 0},
    {"gptk_gelu_fwd", "wiril", "z tz a ta n", gpt__kc_gelu_fwd, 0},
    {"gptk_gelu_bwd", "wiriril", "da tda dz tdz a ta n", gpt__kc_gelu_bwd, 0},
    {"gptk_attn_fwd", "wwirrrillll", "P y ty q k v tq B T Hl hd", gpt__kc_attn_fwd, 0},
    {"gptk_attn_bwd_rows", "wrrrillll", "dS P dy v ta B T Hl hd", gpt__kc_attn_bwd_rows, 0},
    {"gptk_attn_bwd", "wwwirrrrrillll", "dq dk dv tg dS P q k dy ta B T Hl hd", gpt__kc_attn_bwd, 0},
    {"gptk_ce", "wwrirll", "G tl lg tlg tg n V", gpt__kc_ce, 0},
    {"gptk_mean", "wrl", "loss tl n", gpt__kc_mean, 0},
    {"gptk_scale", "wirrll", "y ty x num n den", gpt__kc_scale, 0}};

/* ... and as host C, twice: in gpt.h's order, then in the device's. */
#define VS_MK_DEVICE 0
#ifndef VS_MK_HOST_SHARED
#define VS_MK_HOST_SHARED
VS_MK_HOSTBITS
VS_MK_DTYPES
#endif
GPT__KERNELS
#undef GPT__KORDER
#define GPT__KORDER 1
GPT__KERNELS
#undef GPT__KORDER
#define GPT__KORDER 0
#undef VS_MK_DEVICE

/* Runs kernel ki's host build (device_order: the device's decomposition) on the
   arguments a launch would take (a[i] points at argument i). */
GPT__KFN void gpt_kernel_host(int ki, void** a, int device_order)
{
#define GPT__A(T, i) (*(T*)a[i])
#define GPT__RUN(name, args) \
    do { \
        if (device_order) gpt__k1_##name args; \
        else gpt__k0_##name args; \
    } while (0)
#define GPT__V(i) GPT__A(void*, i)
#define GPT__C(i) GPT__A(const void*, i)
#define GPT__F(i) GPT__A(float*, i)
#define GPT__CF(i) GPT__A(const float*, i)
#define GPT__I(i) GPT__A(int, i)
#define GPT__L(i) GPT__A(long long, i)
    switch (ki) {
    case GPT_KI_EMBED:
        GPT__RUN(embed, (GPT__V(0), GPT__I(1), GPT__C(2), GPT__C(3), GPT__I(4), GPT__A(const int*, 5), GPT__L(6),
                         GPT__L(7), GPT__L(8), GPT__L(9), GPT__L(10)));
        break;
    case GPT_KI_EMBED_BWD:
        GPT__RUN(embed_bwd, (GPT__V(0), GPT__I(1), GPT__C(2), GPT__I(3), GPT__A(const int*, 4), GPT__L(5), GPT__L(6),
                             GPT__L(7), GPT__L(8), GPT__L(9)));
        break;
    case GPT_KI_ADD_ROWS:
        GPT__RUN(add_rows, (GPT__V(0), GPT__I(1), GPT__C(2), GPT__I(3), GPT__L(4), GPT__L(5), GPT__L(6), GPT__L(7)));
        break;
    case GPT_KI_SUM_ROWS:
        GPT__RUN(sum_rows, (GPT__V(0), GPT__I(1), GPT__C(2), GPT__I(3), GPT__L(4), GPT__L(5), GPT__L(6), GPT__L(7)));
        break;
    case GPT_KI_LN_FWD:
        GPT__RUN(ln_fwd, (GPT__V(0), GPT__I(1), GPT__F(2), GPT__F(3), GPT__C(4), GPT__I(5), GPT__C(6), GPT__C(7),
                          GPT__I(8), GPT__L(9), GPT__L(10)));
        break;
    case GPT_KI_LN_BWD:
        GPT__RUN(ln_bwd, (GPT__V(0), GPT__I(1), GPT__C(2), GPT__I(3), GPT__C(4), GPT__I(5), GPT__C(6), GPT__I(7),
                          GPT__CF(8), GPT__CF(9), GPT__L(10), GPT__L(11)));
        break;
    case GPT_KI_LN_BWD_W:
        GPT__RUN(ln_bwd_w, (GPT__V(0), GPT__V(1), GPT__I(2), GPT__C(3), GPT__I(4), GPT__C(5), GPT__I(6), GPT__CF(7),
                            GPT__CF(8), GPT__L(9), GPT__L(10)));
        break;
    case GPT_KI_MM:
        GPT__RUN(mm, (GPT__V(0), GPT__I(1), GPT__C(2), GPT__I(3), GPT__C(4), GPT__I(5), GPT__C(6), GPT__I(7),
                      GPT__L(8), GPT__L(9), GPT__L(10), GPT__I(11), GPT__I(12)));
        break;
    case GPT_KI_GELU_FWD: GPT__RUN(gelu_fwd, (GPT__V(0), GPT__I(1), GPT__C(2), GPT__I(3), GPT__L(4))); break;
    case GPT_KI_GELU_BWD:
        GPT__RUN(gelu_bwd, (GPT__V(0), GPT__I(1), GPT__C(2), GPT__I(3), GPT__C(4), GPT__I(5), GPT__L(6)));
        break;
    case GPT_KI_ATTN_FWD:
        GPT__RUN(attn_fwd, (GPT__F(0), GPT__V(1), GPT__I(2), GPT__C(3), GPT__C(4), GPT__C(5), GPT__I(6), GPT__L(7),
                            GPT__L(8), GPT__L(9), GPT__L(10)));
        break;
    case GPT_KI_ATTN_BWD_ROWS:
        GPT__RUN(attn_bwd_rows, (GPT__F(0), GPT__CF(1), GPT__C(2), GPT__C(3), GPT__I(4), GPT__L(5), GPT__L(6),
                                 GPT__L(7), GPT__L(8)));
        break;
    case GPT_KI_ATTN_BWD:
        GPT__RUN(attn_bwd, (GPT__V(0), GPT__V(1), GPT__V(2), GPT__I(3), GPT__CF(4), GPT__CF(5), GPT__C(6), GPT__C(7),
                            GPT__C(8), GPT__I(9), GPT__L(10), GPT__L(11), GPT__L(12), GPT__L(13)));
        break;
    case GPT_KI_CE:
        GPT__RUN(ce, (GPT__F(0), GPT__F(1), GPT__C(2), GPT__I(3), GPT__A(const int*, 4), GPT__L(5), GPT__L(6)));
        break;
    case GPT_KI_MEAN: GPT__RUN(mean, (GPT__F(0), GPT__CF(1), GPT__L(2))); break;
    case GPT_KI_SCALE:
        GPT__RUN(scale, (GPT__V(0), GPT__I(1), GPT__CF(2), GPT__CF(3), GPT__L(4), GPT__L(5)));
        break;
    default: break;
    }
#undef GPT__A
#undef GPT__RUN
#undef GPT__V
#undef GPT__C
#undef GPT__F
#undef GPT__CF
#undef GPT__I
#undef GPT__L
}

/* The host build a stand-in runtime runs for a launch: the device's order. */
GPT__KFN void gpt__khost_device(int ki, void** a) { gpt_kernel_host(ki, a, 1); }

/* The text as NVRTC source (a C99 compiler need not take a string this long:
   only builds with NVRTC have it). */
#if defined(VESCALE_NCCL) || defined(VESCALE_NVRTC)
#define VS_MK_DEVICE 1
static const char gpt__kbody[] GPT__KUNUSED = VS_MKSTR(GPT__KERNELS) "\n";
#undef VS_MK_DEVICE
static const vs_kernel_text gpt_kernel_text GPT__KUNUSED = {"gpt_kernels.cu", gpt__kbody, GPT_KI_N, gpt_kernel_decls,
                                                        gpt__khost_device};
#endif


// >>launch ---------------------------------------------------------------------

/* Where a layer's kernels run: host loops, or device kernels on a stream. */
typedef struct gpt_kctx {
    int mode;          // GPT_K_HOST, GPT_K_HOST_DEVICE_ORDER or GPT_K_DEVICE
    void* stream;      // GPT_K_DEVICE: the cudaStream_t the kernels go on (NULL: the legacy stream)
    void* k[GPT_KI_N]; // GPT_K_DEVICE: the kernels for the device current at gpt_kctx_init (cudaKernel_t)
} gpt_kctx;

/* mode GPT_K_DEVICE compiles the kernels for the calling thread's current device
   (once per process and architecture: vs_kernels_get) and uses `stream`; it is
   VS_ERR_UNAVAILABLE without VESCALE_NCCL. */
GPT__KFN vs_result gpt_kctx_init(gpt_kctx* c, int mode, void* stream)
{
    if (!c) return vs_set_error(VS_ERR_NULL, "gpt_kctx_init: c is NULL");
    memset(c, 0, sizeof *c);
    if (mode < GPT_K_HOST || mode > GPT_K_DEVICE)
        return vs_set_error(VS_ERR_INVALID, "gpt_kctx_init: mode %d (0 host, 1 host in device order, 2 device)", mode);
    c->mode = mode, c->stream = stream;
    if (mode != GPT_K_DEVICE) return VS_OK;
#ifdef VESCALE_NCCL
    return vs_kernels_get(&gpt_kernel_text, "gpt_kctx_init", c->k);
#else
    return vs_set_error(VS_ERR_UNAVAILABLE, "gpt_kctx_init: GPT_K_DEVICE in a build without CUDA (define VESCALE_NCCL)");
#endif
}

/* The kernels' dtype code of a vs_dtype: -1 for one they do not store. */
GPT__KFN int gpt_kdtype(vs_dtype t) { return t == VS_F32 ? GPT_KF32 : t == VS_BF16 ? GPT_KBF16 : t == VS_F16 ? GPT_KF16 : -1; }

/* Kernel ki on its arguments: the host build, or a launch of `blocks` blocks of
   GPT_KBLOCK threads (grid-strided kernels: any count gives the same result). */
#ifdef VESCALE_NCCL
/* Every pointer argument of kernel ki is memory of the context's side (device
   memory of the current device, or pinned host memory, for GPT_K_DEVICE; host
   memory for the host modes), checked before anything runs: the message names
   the argument. */
GPT__KFN vs_result gpt__kpointers(const gpt_kctx* c, int ki, void** a)
{
    int dev = 0;
    if (c->mode == GPT_K_DEVICE && cudaGetDevice(&dev) != cudaSuccess) dev = -1;
    for (int i = 0; gpt_kernel_decls[ki].args[i]; i++) {
        if (gpt_kernel_decls[ki].args[i] != 'w' && gpt_kernel_decls[ki].args[i] != 'r') continue;
        const void* p = *(void* const*)a[i];
        struct cudaPointerAttributes at;
        if (!p) continue;
        memset(&at, 0, sizeof at);
        if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
            (void)cudaGetLastError(); // (older runtimes: unregistered host memory is an error)
            at.type = cudaMemoryTypeUnregistered;
        }
        int is_dev = at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged;
        const char* bad = NULL;
        if (c->mode == GPT_K_DEVICE && at.type == cudaMemoryTypeUnregistered) bad = "host memory, not the device's";
        else if (c->mode == GPT_K_DEVICE && at.type == cudaMemoryTypeDevice && at.device != dev) bad = "another device's memory";
        else if (c->mode != GPT_K_DEVICE && is_dev) bad = "device memory in a host context";
        if (!bad) continue;
        const char* nm = gpt_kernel_decls[ki].argnames;
        for (int k = 0; k < i && nm; k++) nm = strchr(nm, ' '), nm = nm ? nm + 1 : NULL;
        int len = nm ? (int)(strchr(nm, ' ') ? strchr(nm, ' ') - nm : (long)strlen(nm)) : 0;
        return vs_set_error(VS_ERR_INVALID, "%s: argument %.*s (%p) is %s", gpt_kernel_decls[ki].name, len, nm ? nm : "",
                            p, bad);
    }
    return VS_OK;
}
#endif

GPT__KFN vs_result gpt__klaunch(const gpt_kctx* c, int ki, void** a, long long blocks)
{
#ifdef VESCALE_NCCL
    vs_result r = gpt__kpointers(c, ki, a);
    if (r) return r;
#endif
    if (c->mode != GPT_K_DEVICE) {
        gpt_kernel_host(ki, a, c->mode == GPT_K_HOST_DEVICE_ORDER);
        return VS_OK;
    }
#ifdef VESCALE_NCCL
    dim3 grid, block;
    grid.x = (unsigned)(blocks < 1 ? 1 : blocks > 16384 ? 16384 : blocks), grid.y = grid.z = 1;
    block.x = GPT_KBLOCK, block.y = block.z = 1;
    cudaError_t e = cudaLaunchKernel((const void*)c->k[ki], grid, block, a, 0, (cudaStream_t)c->stream);
    if (e == cudaSuccess) return VS_OK;
    char what[64];
    snprintf(what, sizeof what, "launching %s", gpt_kernel_decls[ki].name);
    return vs_cuda_error((int)e, "gpt_kernels", what);
#else
    (void)blocks;
    return vs_set_error(VS_ERR_UNAVAILABLE, "gpt_kernels: %s on the device in a build without CUDA", gpt_kernel_decls[ki].name);
#endif
}

/* Argument checks shared by the calls: dtype codes and sizes. */
GPT__KFN vs_result gpt__kcheck(const char* fn, const int* dt, int ndt, const int64_t* sz, int nsz)
{
    for (int i = 0; i < ndt; i++)
        if (dt[i] < GPT_KF32 || dt[i] > GPT_KF16)
            return vs_set_error(VS_ERR_INVALID, "%s: dtype code %d (0 f32, 1 bf16, 2 f16)", fn, dt[i]);
    for (int i = 0; i < nsz; i++)
        if (sz[i] < 0) return vs_set_error(VS_ERR_INVALID, "%s: size %lld < 0", fn, (long long)sz[i]);
    return VS_OK;
}
#define GPT__KCHECK(fn, dts, szs) \
    do { \
        const int gpt__dt[] = {GPT__KUNPACK dts}; \
        const int64_t gpt__sz[] = {GPT__KUNPACK szs}; \
        vs_result gpt__r = gpt__kcheck(fn, gpt__dt, (int)(sizeof gpt__dt / sizeof gpt__dt[0]), gpt__sz, \
                                       (int)(sizeof gpt__sz / sizeof gpt__sz[0])); \
        if (gpt__r) return gpt__r; \
    } while (0)
#define GPT__KUNPACK(...) __VA_ARGS__
#define GPT__KBLOCKS(n) (((n) + GPT_KBLOCK - 1) / GPT_KBLOCK)

/* x[n, D] = wte[ids - v0] (zero for ids outside [v0, v0 + Vl): another TP rank's
   rows; v0 0 and Vl V: the whole table) + wpe[i % T] (wpe NULL: none). The ids
   are not checked here (vs_vocab_range / the caller's check). */
GPT__KFN vs_result gpt_k_embed(const gpt_kctx* c, int64_t n, int64_t T, int64_t D, const int32_t* ids, const void* wte,
                               int64_t v0, int64_t Vl, const void* wpe, void* x, int tx, int tw)
{
    GPT__KCHECK("gpt_k_embed", (tx, tw), (n, D, v0, Vl));
    if (T < 1) return vs_set_error(VS_ERR_INVALID, "gpt_k_embed: T %lld < 1", (long long)T);
    long long n_ = n, T_ = T, D_ = D, v0_ = v0, Vl_ = Vl;
    void* a[] = {&x, &tx, (void*)&wte, (void*)&wpe, &tw, (void*)&ids, &n_, &T_, &D_, &v0_, &Vl_};
    return gpt__klaunch(c, GPT_KI_EMBED, a, GPT__KBLOCKS(n_ * D_));
}

/* gwte[ids - v0] += dx for the ids in [v0, v0 + Vl), in token order. */
GPT__KFN vs_result gpt_k_embed_backward(const gpt_kctx* c, int64_t n, int64_t D, const int32_t* ids, const void* dx,
                                        int64_t v0, int64_t Vl, void* gwte, int tx, int tg)
{
    GPT__KCHECK("gpt_k_embed_backward", (tx, tg), (n, D, v0, Vl));
    long long n_ = n, D_ = D, v0_ = v0, Vl_ = Vl, nb = D > 0 ? 65536 / D : 1;
    if (nb > Vl_) nb = Vl_;
    if (nb < 1) nb = 1;
    void* a[] = {&gwte, &tg, (void*)&dx, &tx, (void*)&ids, &n_, &D_, &v0_, &Vl_, &nb};
    return gpt__klaunch(c, GPT_KI_EMBED_BWD, a, GPT__KBLOCKS(D_ * nb));
}

/* y[i, :] += a[p0 + i % T, :] over y [n, D]: a bias (T 1, p0 0), positions
   (T the sequence, p0 the first), the residual (T n). */
GPT__KFN vs_result gpt_k_add_rows(const gpt_kctx* c, int64_t n, int64_t T, int64_t D, int64_t p0, const void* a_,
                                  int ta, void* y, int ty)
{
    GPT__KCHECK("gpt_k_add_rows", (ta, ty), (n, D, p0));
    if (T < 1) return vs_set_error(VS_ERR_INVALID, "gpt_k_add_rows: T %lld < 1", (long long)T);
    long long n_ = n, T_ = T, D_ = D, p0_ = p0;
    void* a[] = {&y, &ty, (void*)&a_, &ta, &n_, &T_, &D_, &p0_};
    return gpt__klaunch(c, GPT_KI_ADD_ROWS, a, GPT__KBLOCKS(n_ * D_));
}

/* add_rows' gradient: g[p0 + t, :] += the rows i = t mod T of a [n, D], in order. */
GPT__KFN vs_result gpt_k_sum_rows(const gpt_kctx* c, int64_t n, int64_t T, int64_t D, int64_t p0, const void* a_,
                                  int ta, void* g, int tg)
{
    GPT__KCHECK("gpt_k_sum_rows", (ta, tg), (n, D, p0));
    if (T < 1) return vs_set_error(VS_ERR_INVALID, "gpt_k_sum_rows: T %lld < 1", (long long)T);
    long long n_ = n, T_ = T, D_ = D, p0_ = p0;
    void* a[] = {&g, &tg, (void*)&a_, &ta, &n_, &T_, &D_, &p0_};
    return gpt__klaunch(c, GPT_KI_SUM_ROWS, a, GPT__KBLOCKS((T_ < n_ ? T_ : n_) * D_));
}

/* y = (x - mean) rstd g + b per row of D (gpt_ln_forward); mean, rstd [n] f32. */
GPT__KFN vs_result gpt_k_layernorm(const gpt_kctx* c, int64_t n, int64_t D, const void* x, const void* g,
                                   const void* b, void* y, float* mean, float* rstd, int ta, int tw)
{
    GPT__KCHECK("gpt_k_layernorm", (ta, tw), (n, D));
    long long n_ = n, D_ = D;
    void* a[] = {&y, &ta, &mean, &rstd, (void*)&x, &ta, (void*)&g, (void*)&b, &tw, &n_, &D_};
    return gpt__klaunch(c, GPT_KI_LN_FWD, a, n_);
}

/* dx += the norm's input gradient given dy (gpt_ln_backward_input). */
GPT__KFN vs_result gpt_k_layernorm_backward(const gpt_kctx* c, int64_t n, int64_t D, const void* x, const void* g,
                                            const float* mean, const float* rstd, const void* dy, void* dx, int ta,
                                            int tw)
{
    GPT__KCHECK("gpt_k_layernorm_backward", (ta, tw), (n, D));
    long long n_ = n, D_ = D;
    void* a[] = {&dx, &ta, (void*)&dy, &ta, (void*)&x, &ta, (void*)&g, &tw, (void*)&mean, (void*)&rstd, &n_, &D_};
    return gpt__klaunch(c, GPT_KI_LN_BWD, a, n_);
}

/* dg, db += the norm's weight gradients (gpt_ln_backward_weight). */
GPT__KFN vs_result gpt_k_layernorm_backward_weight(const gpt_kctx* c, int64_t n, int64_t D, const void* x,
                                                   const float* mean, const float* rstd, const void* dy, void* dg,
                                                   void* db, int ta, int tg)
{
    GPT__KCHECK("gpt_k_layernorm_backward_weight", (ta, tg), (n, D));
    long long n_ = n, D_ = D;
    void* a[] = {&dg, &db, &tg, (void*)&dy, &ta, (void*)&x, &ta, (void*)&mean, (void*)&rstd, &n_, &D_};
    return gpt__klaunch(c, GPT_KI_LN_BWD_W, a, GPT__KBLOCKS(D_));
}

/* C[M, N] = (accumulate ? C : 0) + op(A) op(B) (+ bias[N] if bias): GPT_KMM_NN
   A[M, K] B[K, N] (gpt_mm_nn), GPT_KMM_NT B stored [N, K] (gpt_mm_nt),
   GPT_KMM_TN A stored [K, M] (gpt_mm_tn). Each output's k in order. */
enum { GPT_KMM_NN = 0, GPT_KMM_TN = 1, GPT_KMM_NT = 2 };
GPT__KFN vs_result gpt_k_matmul(const gpt_kctx* c, int trans, int64_t M, int64_t K, int64_t N, const void* A, int ta,
                                const void* B, int tb, const void* bias, int tbias, void* C, int tc, int accumulate)
{
    GPT__KCHECK("gpt_k_matmul", (ta, tb, tbias, tc), (M, K, N));
    if (trans < 0 || trans > 3) return vs_set_error(VS_ERR_INVALID, "gpt_k_matmul: trans %d (0..3)", trans);
    long long M_ = M, K_ = K, N_ = N;
    int beta = accumulate != 0;
    void* a[] = {&C, &tc, (void*)&A, &ta, (void*)&B, &tb, (void*)&bias, &tbias, &M_, &K_, &N_, &trans, &beta};
    return gpt__klaunch(c, GPT_KI_MM, a, (M_ + 31) / 32 * ((N_ + 31) / 32));
}

/* z = gelu(a) (tanh form, gpt_gelu) over n elements. */
GPT__KFN vs_result gpt_k_gelu(const gpt_kctx* c, int64_t n, const void* a_, int ta, void* z, int tz)
{
    GPT__KCHECK("gpt_k_gelu", (ta, tz), (n));
    long long n_ = n;
    void* a[] = {&z, &tz, (void*)&a_, &ta, &n_};
    return gpt__klaunch(c, GPT_KI_GELU_FWD, a, GPT__KBLOCKS(n_));
}

/* da = dz gelu'(a) (da may be dz, the same dtype). */
GPT__KFN vs_result gpt_k_gelu_backward(const gpt_kctx* c, int64_t n, const void* a_, int ta, const void* dz, int tdz,
                                       void* da, int tda)
{
    GPT__KCHECK("gpt_k_gelu_backward", (ta, tdz, tda), (n));
    long long n_ = n;
    void* a[] = {&da, &tda, (void*)&dz, &tdz, (void*)&a_, &ta, &n_};
    return gpt__klaunch(c, GPT_KI_GELU_BWD, a, GPT__KBLOCKS(n_));
}

/* Causal attention of Hl heads of hd dims over B rows of T positions
   (gpt_attention_forward): q, k, v, y [B*T, Hl*hd] in dtype ta, P [B, Hl, T, T]
   f32 (the upper triangle zero). */
GPT__KFN vs_result gpt_k_attention(const gpt_kctx* c, int64_t B, int64_t T, int64_t Hl, int64_t hd, const void* q,
                                   const void* k, const void* v, float* P, void* y, int ta)
{
    GPT__KCHECK("gpt_k_attention", (ta), (B, T, Hl, hd));
    long long B_ = B, T_ = T, H_ = Hl, hd_ = hd;
    void* a[] = {&P, &y, &ta, (void*)&q, (void*)&k, (void*)&v, &ta, &B_, &T_, &H_, &hd_};
    return gpt__klaunch(c, GPT_KI_ATTN_FWD, a, B_ * H_ * T_);
}

/* dq, dk, dv (dtype tg) += the gradients given dy (gpt_attention_backward, which
   wants them zeroed first: so do these to match it); dS: [B, Hl, T, T] f32
   scratch. */
GPT__KFN vs_result gpt_k_attention_backward(const gpt_kctx* c, int64_t B, int64_t T, int64_t Hl, int64_t hd,
                                            const void* q, const void* k, const void* v, const float* P,
                                            const void* dy, float* dS, void* dq, void* dk, void* dv, int ta, int tg)
{
    GPT__KCHECK("gpt_k_attention_backward", (ta, tg), (B, T, Hl, hd));
    long long B_ = B, T_ = T, H_ = Hl, hd_ = hd;
    void* a1[] = {&dS, (void*)&P, (void*)&dy, (void*)&v, &ta, &B_, &T_, &H_, &hd_};
    vs_result r = gpt__klaunch(c, GPT_KI_ATTN_BWD_ROWS, a1, B_ * H_ * T_);
    if (r) return r;
    void* a2[] = {&dq, &dk, &dv, &tg, (void*)&dS, (void*)&P, (void*)&q, (void*)&k, (void*)&dy, &ta, &B_, &T_, &H_, &hd_};
    return gpt__klaunch(c, GPT_KI_ATTN_BWD, a2, GPT__KBLOCKS(B_ * T_ * H_ * hd_));
}

/* Softmax cross-entropy of logits lg [n, V] (dtype tl) against targets tg:
   loss [n] (NaN where a target is outside [0, V)) and G [n, V] = softmax -
   one_hot, f32 (G may be lg when tl is f32), as gpt_head_forward's one-rank
   branch. */
GPT__KFN vs_result gpt_k_cross_entropy(const gpt_kctx* c, int64_t n, int64_t V, const void* lg, int tl,
                                       const int32_t* tg, float* loss, float* G)
{
    GPT__KCHECK("gpt_k_cross_entropy", (tl), (n, V));
    long long n_ = n, V_ = V;
    void* a[] = {&G, &loss, (void*)&lg, &tl, (void*)&tg, &n_, &V_};
    return gpt__klaunch(c, GPT_KI_CE, a, n_);
}

/* out[0] = the mean of x[0, n) (0 for n 0), summed in double: the step's loss. */
GPT__KFN vs_result gpt_k_mean(const gpt_kctx* c, int64_t n, const float* x, float* out)
{
    GPT__KCHECK("gpt_k_mean", (GPT_KF32), (n));
    long long n_ = n;
    void* a[] = {&out, (void*)&x, &n_};
    return gpt__klaunch(c, GPT_KI_MEAN, a, 1);
}

/* y = x * (num[0] / den) over n elements (0 for den 0); num is memory of the
   context's side (a device scalar: the loss's gradient, never read by the host). */
GPT__KFN vs_result gpt_k_scale(const gpt_kctx* c, int64_t n, const float* x, const float* num, int64_t den, void* y,
                               int ty)
{
    GPT__KCHECK("gpt_k_scale", (ty), (n, den));
    long long n_ = n, den_ = den;
    void* a[] = {&y, &ty, (void*)&x, (void*)&num, &n_, &den_};
    return gpt__klaunch(c, GPT_KI_SCALE, a, GPT__KBLOCKS(n_));
}

#ifdef __cplusplus
}
#endif

#endif // GPT_KERNELS_H
