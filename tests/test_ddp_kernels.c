/* test_ddp_kernels.c - the optimizer kernels of vescale_ddp.h, which are written
   once and run two ways: compiled as host C (the host path of DDP), and handed
   as a string to NVRTC for device buffers.

   Here, without a GPU:
   - the host build of the kernel text against independent references: every
     bf16/f16 bit pattern widened, and f32 narrowed at every exponent, special
     values and random patterns, against vs_*_to_f32 / vs_f32_to_* of
     vescale_mesh.h (a separate implementation); AdamW and SGD against the
     formulas written out below; the cast/add/scale kernels on each dtype;
   - with NVRTC installed (built with -DVESCALE_NVRTC, link -lnvrtc), the very
     string DDP compiles at run time: a cubin for sm_80 and sm_90 (A100, H100/
     H200) and PTX that defines every kernel DDP launches.
   On a GPU, tests/test_nccl.c runs DDP on device buffers against the host path. */
#define VESCALE_IMPLEMENTATION
#include "vescale_ddp.h"
#include "tests/vs_test.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* kernel dtype codes: 0 f32, 1 bf16, 2 f16 */
static void case_widen(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t v = (uint16_t)h;
        float kb = _vs_mk_ld(&v, 1, 0), kh = _vs_mk_ld(&v, 2, 0);
        float rb = vs_bf16_to_f32(v), rh = vs_f16_to_f32(v);
        if (f2u(kb) != f2u(rb) && bad++ < 5) VT_CHECK(0, "bf16 0x%04x: kernel 0x%08x, reference 0x%08x", h, f2u(kb), f2u(rb));
        if (f2u(kh) != f2u(rh) && bad++ < 5) VT_CHECK(0, "f16 0x%04x: kernel 0x%08x, reference 0x%08x", h, f2u(kh), f2u(rh));
    }
    VT_CHECK(bad == 0, "%d of 131072 widened values differ", bad);
    /* a few by hand, independent of both */
    uint16_t one_h = 0x3c00, one_b = 0x3f80, min_sub = 0x0001, ninf = 0xfc00;
    VT_CHECK(_vs_mk_ld(&one_h, 2, 0) == 1.0f, "f16 1.0");
    VT_CHECK(_vs_mk_ld(&one_b, 1, 0) == 1.0f, "bf16 1.0");
    VT_CHECK(_vs_mk_ld(&min_sub, 2, 0) == ldexpf(1.0f, -24), "f16 smallest subnormal");
    VT_CHECK(isinf(_vs_mk_ld(&ninf, 2, 0)) && _vs_mk_ld(&ninf, 2, 0) < 0, "f16 -inf");
}

static int narrow_one(uint32_t bits)
{
    float f = u2f(bits);
    uint16_t kb = 0, kh = 0;
    _vs_mk_st(&kb, 1, 0, f);
    _vs_mk_st(&kh, 2, 0, f);
    uint16_t rb = vs_f32_to_bf16(f), rh = vs_f32_to_f16(f);
    int bad = (kb != rb) + (kh != rh);
    if (bad) VT_CHECK(0, "f32 0x%08x: bf16 kernel 0x%04x ref 0x%04x, f16 kernel 0x%04x ref 0x%04x", bits, kb, rb, kh, rh);
    return bad;
}

static void case_narrow(void)
{
    int bad = 0;
    static const uint32_t special[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u,
                                       0x7f800001u, 0x00000001u, 0x007fffffu, 0x33000000u, 0x33000001u, 0x337fffffu,
                                       0x33800000u, 0x387fffffu, 0x38800000u, 0x477fe000u, 0x477fefffu, 0x477ff000u,
                                       0x47800000u, 0x3f800000u, 0x3f808000u, 0x3f818000u, 0x3f7fffffu, 0x7f7fffffu};
    for (size_t i = 0; i < sizeof special / sizeof special[0] && bad < 5; i++) bad += narrow_one(special[i]);
    /* every exponent, with mantissas at and around the rounding points of both formats */
    for (uint32_t s = 0; s < 2 && bad < 5; s++)
        for (uint32_t e = 0; e < 256 && bad < 5; e++)
            for (uint32_t lo = 0; lo < 64 && bad < 5; lo++) {
                uint32_t m[4] = {lo, 0x1000u - 32 + lo, 0x8000u - 32 + lo, 0x7fffffu - lo};
                for (int k = 0; k < 4; k++) bad += narrow_one((s << 31) | (e << 23) | (m[k] & 0x7fffffu));
            }
    for (int i = 0; i < (1 << 22) && bad < 5; i++) bad += narrow_one(rnd() ^ (rnd() << 16));
    VT_CHECK(bad == 0, "%d narrowed values differ", bad);
}

/* AdamW and SGD against the formulas, element by element, in float as the
   kernel computes them. */
static void case_optim(void)
{
    enum { N = 1000 };
    static float p[N], g[N], m1[N], m2[N], rp[N], rm1[N], rm2[N];
    for (int i = 0; i < N; i++) {
        p[i] = rp[i] = (float)((int)(rnd() % 2001) - 1000) / 500.0f;
        g[i] = (float)((int)(rnd() % 2001) - 1000) / 700.0f;
        m1[i] = rm1[i] = (float)((int)(rnd() % 201) - 100) / 1000.0f;
        m2[i] = rm2[i] = (float)(rnd() % 100) / 1000.0f;
    }
    const float b1 = 0.9f, b2 = 0.999f, omb1 = 0.1f, omb2 = 0.001f, eps = 1e-8f;
    const double lr = 1e-3, wd = 0.1;
    const int t = 3;
    float step = (float)(lr / (1 - pow(0.9, t))), c2 = (float)(1.0 / sqrt(1 - pow(0.999, t))), decay = (float)(1 - lr * wd);
    _vs_hk_adamw(p, g, m1, m2, N, b1, b2, omb1, omb2, step, c2, eps, decay);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        /* decoupled decay, bias-corrected moments: p (1 - lr wd) - lr mhat / (sqrt(vhat) + eps) */
        double m = 0.9 * rm1[i] + 0.1 * g[i], v = 0.999 * rm2[i] + 0.001 * (double)g[i] * g[i];
        double mh = m / (1 - pow(0.9, t)), vh = v / (1 - pow(0.999, t));
        double want = rp[i] * (1 - lr * wd) - lr * mh / (sqrt(vh) + eps);
        double mscale = fabs(0.9 * rm1[i]) + fabs(0.1 * g[i]) + 1e-6; /* float rounding of each term */
        if (fabs(m1[i] - m) > 1e-6 * mscale || fabs(p[i] - want) > 2e-6 * (fabs(want) + 1e-3))
            if (bad++ < 3) VT_CHECK(0, "adamw [%d]: p %.9g want %.9g, m %.9g want %.9g", i, p[i], want, m1[i], m);
    }
    VT_CHECK(bad == 0, "adamw: %d of %d elements off", bad, N);
    /* SGD: with momentum (plain and Nesterov) and without (no state) */
    for (int variant = 0; variant < 3; variant++) {
        for (int i = 0; i < N; i++) p[i] = rp[i], m1[i] = rm1[i];
        float mu = variant == 2 ? 0.0f : 0.9f, lrf = 0.05f, wdf = 0.01f;
        _vs_hk_sgd(p, g, variant == 2 ? NULL : m1, N, mu, lrf, wdf, variant == 1);
        bad = 0;
        for (int i = 0; i < N; i++) {
            double gx = (double)g[i] + (double)wdf * rp[i], upd = gx;
            if (variant < 2) {
                double buf = (double)mu * rm1[i] + gx;
                upd = variant == 1 ? gx + mu * buf : buf;
            }
            double want = rp[i] - (double)lrf * upd;
            if (fabs(p[i] - want) > 1e-6 * (fabs(want) + 1e-3) && bad++ < 3)
                VT_CHECK(0, "sgd variant %d [%d]: %.9g want %.9g", variant, i, p[i], want);
        }
        VT_CHECK(bad == 0, "sgd variant %d: %d elements off", variant, bad);
    }
}

static void case_casts(void)
{
    enum { N = 257 };
    float src[N], f[N], acc[N];
    uint16_t h[N];
    for (int i = 0; i < N; i++) src[i] = (float)((int)(rnd() % 4001) - 2000) / 300.0f;
    for (int t = 0; t < 3; t++) {
        void* buf = t == 0 ? (void*)f : (void*)h;
        _vs_hk_from_f32(buf, t, src, N);
        float back[N];
        _vs_hk_to_f32(back, buf, t, N);
        for (int i = 0; i < N; i++) {
            float want = t == 0 ? src[i] : t == 1 ? vs_bf16_to_f32(vs_f32_to_bf16(src[i])) : vs_f16_to_f32(vs_f32_to_f16(src[i]));
            VT_CHECK(f2u(back[i]) == f2u(want), "dtype %d [%d]: round trip %.9g, want %.9g", t, i, back[i], want);
        }
        for (int i = 0; i < N; i++) acc[i] = 1.5f;
        _vs_hk_add_f32(acc, buf, t, N);
        for (int i = 0; i < N; i++) VT_CHECK(acc[i] == 1.5f + back[i], "dtype %d add [%d]", t, i);
        _vs_hk_scale(buf, t, N, 0.25f); /* a power of two: exact unless it leaves the range */
        _vs_hk_to_f32(acc, buf, t, N);
        for (int i = 0; i < N; i++) VT_CHECK(acc[i] == back[i] * 0.25f || (t == 2 && fabsf(back[i]) < 3e-4f),
                                             "dtype %d scale [%d]: %.9g want %.9g", t, i, acc[i], back[i] * 0.25f);
    }
}

#ifdef VESCALE_NVRTC
static const char* const knames[] = {"vs_k_adamw", "vs_k_sgd",   "vs_k_to_f32", "vs_k_from_f32",    "vs_k_add_f32",
                                     "vs_k_scale", "vs_k_sumsq", "vs_k_canary", "vs_k_canary_check"};

/* The body DDP hands vescale_mesh.h's vs_kernels_get (compiled after the shared
   prelude, whose f16/bf16 conversions it calls). */
static void case_source(void)
{
    const char* src = _vs_ddp_text.body;
    VT_CHECK(!strstr(src, "_vs_hk_") && !strstr(src, "_vs_mk_") && !strstr(src, "_VS_"),
             "host names or macros left in the device source");
    for (size_t i = 0; i < sizeof knames / sizeof knames[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "void %s(", knames[i]);
        VT_CHECK(strstr(src, want) != NULL, "the device source has no kernel %s", knames[i]);
        VT_CHECK(!strcmp(_vs_ddp_text.kernels[i].name, knames[i]), "kernel %zu is %s, not %s", i,
                 _vs_ddp_text.kernels[i].name, knames[i]);
    }
    VT_CHECK(_vs_ddp_text.count == (int)(sizeof knames / sizeof knames[0]), "%d kernels", _vs_ddp_text.count);
    VT_CHECK(strstr(src, "vs_mk_ld(") && strstr(src, "vs_mk_st("), "the body does not use the shared loads and stores");
    VT_CHECK(!strstr(src, "unsigned short vs_mk_f16(") && !strstr(src, "float vs_mk_ld("),
             "the body defines the shared conversions itself");
    VT_CHECK(strstr(_vs_mk_prelude, "unsigned short vs_mk_f16(") && strstr(_vs_mk_prelude, "float vs_mk_from_f16(") &&
                 strstr(_vs_mk_prelude, "float vs_mk_ld(") && strstr(_vs_mk_prelude, "void vs_mk_st("),
             "the shared prelude lacks the conversions");
    VT_CHECK(strstr(src, "vs_rtc_global void vs_k_adamw(") && strstr(src, "vs_rtc_global void vs_k_sumsq(") &&
                 !strstr(src, "__global__"),
             "kernels are not all spelled vs_rtc_global (the prelude's extern \"C\" __global__)");
}

static void case_nvrtc(void)
{
    static const char* const archs[] = {"sm_80", "sm_90", "compute_80"};
    for (int a = 0; a < 3; a++) {
        char* image = NULL;
        size_t size = 0;
        VT_OK(_vs_k_compile(&_vs_ddp_text, archs[a], "test", &image, &size));
        VT_CHECK(image && size > 1000, "%s: image of %zu bytes", archs[a], size);
        if (image && a == 2) { /* PTX: every kernel DDP launches is an entry */
            for (size_t i = 0; i < sizeof knames / sizeof knames[0]; i++) {
                char want[64];
                snprintf(want, sizeof want, ".entry %s(", knames[i]);
                VT_CHECK(strstr(image, want) != NULL, "PTX has no %s", want);
            }
            VT_CHECK(!strstr(image, ".entry _vs_"), "PTX has private entries");
        }
        free(image);
    }
    /* a bad target ends in an error naming it, not a crash */
    char* image = (char*)&image;
    size_t size = 0;
    vs_result r = _vs_k_compile(&_vs_ddp_text, "sm_1", "vs_ddp", &image, &size);
    VT_CHECK(r == VS_ERR_BACKEND && strstr(vs_last_error(), "sm_1") && strstr(vs_last_error(), "vs_ddp: ") &&
                 image == NULL,
             "bad arch: %d %s image %p", r, vs_last_error(), (void*)image);
}
#endif

int main(void)
{
    VT_CASE("kernel text: bf16/f16 -> f32 equals vs_*_to_f32 for all 65536 patterns", case_widen());
    VT_CASE("kernel text: f32 -> bf16/f16 equals vs_f32_to_* (specials, every exponent, 4M random)", case_narrow());
    VT_CASE("kernel text: AdamW and SGD (momentum, Nesterov, none) equal their formulas", case_optim());
    VT_CASE("kernel text: to_f32 / from_f32 / add_f32 / scale on f32, bf16, f16", case_casts());
#ifdef VESCALE_NVRTC
    VT_CASE("device source: every kernel, extern \"C\", no host names, the shared conversions", case_source());
    VT_CASE("NVRTC compiles the DDP kernels: cubin sm_80 and sm_90, PTX with every entry; bad arch refused",
            case_nvrtc());
#else
    vt_skip("device source and NVRTC", "built without VESCALE_NVRTC (no nvrtc.h)");
#endif
    return vt_summary();
}
