/* test_collectives.c - every collective, point-to-point, group, async and split
   operation of vescale_mesh.h checked against a reference computed here.

   Two modes from one source:
     - default: the threads transport; every case runs under vs_launch for
       1, 2, 3, 4 and 8 ranks ("all_reduce/threads/n=4").
     - -DVESCALE_MPI (mpicc, run under mpirun -np N): one vs_world_init, then the
       same per-rank case functions on that world ("all_reduce/mpi/n=N"). Rank 0
       prints; a failure on any rank fails the case (the per-case failure flags
       are combined with a plain MPI_Allreduce, independent of the library).

   Inputs are pure functions of (salt, rank, index), so every rank can compute
   every other rank's input and the expected result. Reductions use small
   integers (exact in every dtype, sums exact in any order) plus, for integer
   dtypes, values near the type limits to check wrap-around. Data-movement
   collectives use pseudo-random bit patterns and are compared bitwise. Receive
   buffers are pre-filled with a sentinel and carry guard elements, so writes
   outside the result (gaps, guards) are caught.

   Semantics checked (the reference implements them): result[i] = op over ranks
   0..n-1; integer sums wrap (u8 mod 256); AVG = SUM / n, integers truncating
   toward zero, f32/f64 dividing in their precision, f16/bf16 accumulating in
   float and rounding once (case half_round_once); on threads, f32 sums are
   bitwise the rank-order float sum, identical on every rank and repeatable.

   Control flow never depends on a check's outcome, so a wrong result on one rank
   cannot make the ranks issue different collectives. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vs_test.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef VESCALE_MPI
#include <mpi.h>
#endif

#define MAXR 64   /* most ranks a case handles (fixed-size per-rank arrays) */
#define GUARD 8   /* guard elements after every buffer */
#define SENT 0xA5 /* sentinel byte of untouched memory */
#define BIG 100003

typedef struct tctx {
    vs_world* w;
    vs_comm* c;
    int rank, n;
    int threads; /* 1: threads transport (bitwise cross-rank checks apply) */
    int one_host; /* 1: all ranks share CLOCK_MONOTONIC (barrier timing check) */
} tctx;

static const vs_dtype DTS[] = { VS_F32, VS_F16, VS_BF16, VS_F64, VS_I32, VS_I64, VS_U8 };
#define NDTS ((int)(sizeof DTS / sizeof DTS[0]))
static const vs_op OPS[] = { VS_OP_DEFAULT, VS_OP_SUM, VS_OP_AVG, VS_OP_MAX, VS_OP_MIN };
#define NOPS ((int)(sizeof OPS / sizeof OPS[0]))

/* ---- small helpers ------------------------------------------------------- */

static size_t esz(vs_dtype dt)
{
    switch (dt) {
    case VS_F32: case VS_I32: return 4;
    case VS_F16: case VS_BF16: return 2;
    case VS_F64: case VS_I64: return 8;
    case VS_U8: return 1;
    default: return 0;
    }
}

static const char* dtn(vs_dtype dt)
{
    switch (dt) {
    case VS_F32: return "f32";
    case VS_F16: return "f16";
    case VS_BF16: return "bf16";
    case VS_F64: return "f64";
    case VS_I32: return "i32";
    case VS_I64: return "i64";
    case VS_U8: return "u8";
    default: return "?";
    }
}

static const char* opn(vs_op op)
{
    switch (op) {
    case VS_OP_DEFAULT: return "default";
    case VS_OP_SUM: return "sum";
    case VS_OP_AVG: return "avg";
    case VS_OP_MAX: return "max";
    case VS_OP_MIN: return "min";
    default: return "?";
    }
}

static int is_float(vs_dtype dt)
{
    return dt == VS_F32 || dt == VS_F16 || dt == VS_BF16 || dt == VS_F64;
}

static int is_int(vs_dtype dt) { return dt == VS_I32 || dt == VS_I64 || dt == VS_U8; }

static void sleep_ms(int ms)
{
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

/* CLOCK_MONOTONIC is system-wide on Linux: comparable across the threads of one
   process and across the processes of a single-host mpirun. */
static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
}

static void* xalloc(const tctx* t, size_t bytes)
{
    void* p = vs_alloc(t->w, bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "test_collectives: vs_alloc(%zu) failed\n", bytes);
        abort();
    }
    return p;
}

/* count elements plus GUARD guard elements, all set to the sentinel. */
static void* ebuf(const tctx* t, vs_dtype dt, size_t count)
{
    size_t b = (count + GUARD) * esz(dt);
    void* p = xalloc(t, b);
    memset(p, SENT, b);
    return p;
}

static void xfree(const tctx* t, void* p)
{
    if (p) vs_free(t->w, p);
}

static char* at(void* buf, vs_dtype dt, size_t i) { return (char*)buf + i * esz(dt); }

#define T_OK(what, expr)                                                       \
    do {                                                                       \
        vs_result t_r_ = (expr);                                               \
        if (t_r_ != VS_OK)                                                     \
            vt_fail_msg(__FILE__, __LINE__, #expr, "%s: %s: %s", (what),       \
                        vs_result_string(t_r_), vs_last_error());              \
    } while (0)

#define T_EXPECT(what, expr, code)                                             \
    do {                                                                       \
        vs_result t_r_ = (expr);                                               \
        if (t_r_ != (code))                                                    \
            vt_fail_msg(__FILE__, __LINE__, #expr,                             \
                        "%s: returned %d (%s), expected %s", (what), t_r_,     \
                        vs_result_string(t_r_), #code);                        \
    } while (0)

/* ---- inputs --------------------------------------------------------------- */

enum { PAT_SMALL = 0, PAT_WRAP = 1 };

/* Input of `rank` at global index i for reductions. PAT_SMALL: integers in
   [-8, 8] ([0, 16] for u8), exact in every dtype. PAT_WRAP (integer dtypes):
   values near the limits so sums wrap. */
static int64_t in_val(vs_dtype dt, int pat, int salt, int rank, size_t i)
{
    uint64_t h = (uint64_t)rank * 7u + (uint64_t)i * 3u + (uint64_t)salt * 5u;
    if (pat == PAT_SMALL || is_float(dt))
        return dt == VS_U8 ? (int64_t)(h % 17u) : (int64_t)(h % 17u) - 8;
    uint64_t k = ((uint64_t)rank * 13u + (uint64_t)i * 5u + (uint64_t)salt * 11u) % 1000u;
    int neg = ((uint64_t)i + (uint64_t)rank) % 3u == 0;
    switch (dt) {
    case VS_U8: return 200 + (int64_t)(k % 56u);
    case VS_I32: return neg ? (int64_t)INT32_MIN + (int64_t)k : (int64_t)INT32_MAX - (int64_t)k;
    case VS_I64: return neg ? INT64_MIN + (int64_t)k : INT64_MAX - (int64_t)k;
    default: return 0;
    }
}

static void put_val(vs_dtype dt, void* buf, size_t i, int64_t v)
{
    char* p = at(buf, dt, i);
    switch (dt) {
    case VS_F32: { float f = (float)v; memcpy(p, &f, 4); break; }
    case VS_F16: { uint16_t h = vs_f32_to_f16((float)v); memcpy(p, &h, 2); break; }
    case VS_BF16: { uint16_t h = vs_f32_to_bf16((float)v); memcpy(p, &h, 2); break; }
    case VS_F64: { double d = (double)v; memcpy(p, &d, 8); break; }
    case VS_I32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
    case VS_I64: memcpy(p, &v, 8); break;
    case VS_U8: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
    default: break;
    }
}

/* buf[k] = input of rank at global index gofs + k. */
static void fill_vals(vs_dtype dt, void* buf, size_t count, int pat, int salt, int rank,
                      size_t gofs)
{
    for (size_t k = 0; k < count; k++) put_val(dt, buf, k, in_val(dt, pat, salt, rank, gofs + k));
}

/* Reference reduction over ranks 0..n-1 of the inputs at global index i. */
static void ref_elem(vs_dtype dt, vs_op op, int n, int pat, int salt, size_t i, void* out)
{
    if (op == VS_OP_DEFAULT) op = VS_OP_SUM;
    if (is_float(dt)) {
        double s = 0, mx = 0, mn = 0; /* small integers: the double sum is exact */
        for (int r = 0; r < n; r++) {
            double v = (double)in_val(dt, pat, salt, r, i);
            s += v;
            if (r == 0 || v > mx) mx = v;
            if (r == 0 || v < mn) mn = v;
        }
        if (op == VS_OP_AVG) {
            switch (dt) {
            case VS_F32: { float f = (float)s / (float)n; memcpy(out, &f, 4); break; }
            case VS_F64: { double d = s / (double)n; memcpy(out, &d, 8); break; }
            case VS_F16: { uint16_t h = vs_f32_to_f16((float)s / (float)n); memcpy(out, &h, 2); break; }
            case VS_BF16: { uint16_t h = vs_f32_to_bf16((float)s / (float)n); memcpy(out, &h, 2); break; }
            default: break;
            }
            return;
        }
        double res = op == VS_OP_SUM ? s : op == VS_OP_MAX ? mx : mn;
        put_val(dt, out, 0, (int64_t)res);
        return;
    }
    uint64_t s = 0;
    int64_t mx = 0, mn = 0;
    for (int r = 0; r < n; r++) {
        int64_t v = in_val(dt, pat, salt, r, i);
        s += (uint64_t)v;
        if (r == 0 || v > mx) mx = v;
        if (r == 0 || v < mn) mn = v;
    }
    switch (op) {
    case VS_OP_SUM:
        if (dt == VS_I32) { int32_t x = (int32_t)(uint32_t)s; memcpy(out, &x, 4); }
        else if (dt == VS_I64) { int64_t x = (int64_t)s; memcpy(out, &x, 8); }
        else { uint8_t x = (uint8_t)s; memcpy(out, &x, 1); }
        break;
    case VS_OP_AVG:
        if (dt == VS_I32) { int32_t x = (int32_t)(uint32_t)s / (int32_t)n; memcpy(out, &x, 4); }
        else if (dt == VS_I64) { int64_t x = (int64_t)s / (int64_t)n; memcpy(out, &x, 8); }
        else { uint8_t x = (uint8_t)((unsigned)(uint8_t)s / (unsigned)n); memcpy(out, &x, 1); }
        break;
    default:
        put_val(dt, out, 0, op == VS_OP_MAX ? mx : mn);
        break;
    }
}

static void ref_fill(vs_dtype dt, vs_op op, int n, int pat, int salt, size_t gofs, size_t count,
                     void* out)
{
    for (size_t k = 0; k < count; k++) ref_elem(dt, op, n, pat, salt, gofs + k, at(out, dt, k));
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* Pseudo-random bits for data movement: buf[k] = bits of (salt, rank, gofs + k). */
static void fill_bits(vs_dtype dt, void* buf, size_t count, int salt, int rank, uint64_t gofs)
{
    size_t es = esz(dt);
    uint64_t seed = mix64(((uint64_t)(uint32_t)salt << 24) ^ (uint64_t)(uint32_t)rank ^ 0x5bd1e995u);
    for (size_t k = 0; k < count; k++) {
        uint64_t h = mix64(seed + gofs + k);
        memcpy((char*)buf + k * es, &h, es);
    }
}

/* ---- checks --------------------------------------------------------------- */

static void elem_str(vs_dtype dt, const void* p, char* s, size_t cap)
{
    switch (dt) {
    case VS_F32: { float f; uint32_t b; memcpy(&f, p, 4); memcpy(&b, p, 4);
                   snprintf(s, cap, "%.9g (0x%08x)", (double)f, (unsigned)b); break; }
    case VS_F16: { uint16_t h; memcpy(&h, p, 2);
                   snprintf(s, cap, "%.6g (0x%04x)", (double)vs_f16_to_f32(h), (unsigned)h); break; }
    case VS_BF16: { uint16_t h; memcpy(&h, p, 2);
                    snprintf(s, cap, "%.4g (0x%04x)", (double)vs_bf16_to_f32(h), (unsigned)h); break; }
    case VS_F64: { double d; memcpy(&d, p, 8); snprintf(s, cap, "%.17g", d); break; }
    case VS_I32: { int32_t x; memcpy(&x, p, 4); snprintf(s, cap, "%ld", (long)x); break; }
    case VS_I64: { int64_t x; memcpy(&x, p, 8); snprintf(s, cap, "%lld", (long long)x); break; }
    case VS_U8: { uint8_t x; memcpy(&x, p, 1); snprintf(s, cap, "%u", (unsigned)x); break; }
    default: snprintf(s, cap, "?"); break;
    }
}

/* Bitwise, element by element; one failure line per buffer. */
static int check_eq(const char* what, vs_dtype dt, const void* got, const void* exp, size_t count)
{
    size_t es = esz(dt), bad = 0, first = 0;
    const char* g = (const char*)got;
    const char* e = (const char*)exp;
    for (size_t i = 0; i < count; i++)
        if (memcmp(g + i * es, e + i * es, es) != 0) {
            if (!bad) first = i;
            bad++;
        }
    if (bad) {
        char gs[64], xs[64];
        elem_str(dt, g + first * es, gs, sizeof gs);
        elem_str(dt, e + first * es, xs, sizeof xs);
        vt_fail_msg(__FILE__, __LINE__, "result == reference",
                    "%s: %zu of %zu elements differ; first [%zu]: got %s, expected %s", what,
                    bad, count, first, gs, xs);
    }
    return bad == 0;
}

/* The GUARD elements after buf[count] still hold the sentinel. */
static void check_guard(const char* what, vs_dtype dt, const void* buf, size_t count)
{
    const unsigned char* p = (const unsigned char*)buf + count * esz(dt);
    for (size_t i = 0; i < GUARD * esz(dt); i++)
        if (p[i] != SENT) {
            vt_fail_msg(__FILE__, __LINE__, "guard intact",
                        "%s: wrote past the end (byte %zu after element %zu)", what, i, count);
            return;
        }
}

/* The send buffer of an out-of-place reduction still holds this rank's input. */
static void check_vals_unchanged(const tctx* t, const char* what, vs_dtype dt, const void* buf,
                                 size_t count, int pat, int salt, size_t gofs)
{
    void* exp = ebuf(t, dt, count);
    fill_vals(dt, exp, count, pat, salt, t->rank, gofs);
    char w2[256];
    snprintf(w2, sizeof w2, "%s [send buffer modified]", what);
    check_eq(w2, dt, buf, exp, count + GUARD);
    xfree(t, exp);
}

static void check_bits_unchanged(const tctx* t, const char* what, vs_dtype dt, const void* buf,
                                 size_t count, int salt, uint64_t gofs)
{
    void* exp = ebuf(t, dt, count);
    fill_bits(dt, exp, count, salt, t->rank, gofs);
    char w2[256];
    snprintf(w2, sizeof w2, "%s [send buffer modified]", what);
    check_eq(w2, dt, buf, exp, count + GUARD);
    xfree(t, exp);
}

/* Waits for an async handle by polling vs_test only (no vs_wait): proves the
   operation progresses in the background. Returns 1 when done was seen. */
static int poll_done(const char* what, vs_work* wk, int max_ms)
{
    int done = 0;
    for (int ms = 0; ms <= max_ms; ms++) {
        vs_result r = vs_test(wk, &done);
        if (r != VS_OK) {
            vt_fail_msg(__FILE__, __LINE__, "vs_test", "%s: %s: %s", what, vs_result_string(r),
                        vs_last_error());
            return 0;
        }
        if (done) return 1;
        sleep_ms(1);
    }
    vt_fail_msg(__FILE__, __LINE__, "done == 1",
                "%s: vs_test never reported completion within %d ms (no background progress?)",
                what, max_ms);
    return 0;
}

/* ---- uneven count patterns ------------------------------------------------ */

#define NVPAT 5
/* counts[i] for v-collectives: uneven with zeros, first empty, all empty, only
   the last, even. */
static size_t vcount(int pat, int i, int n)
{
    switch (pat) {
    case 0: return (i % 3 == 1) ? 0 : (size_t)((i * 5 + 3) % 7 + 1);
    case 1: return i == 0 ? 0 : (size_t)(1031 + 13 * i);
    case 2: return 0;
    case 3: return i == n - 1 ? 257 : 0;
    default: return 5;
    }
}

/* Packed displacements, or (gapped) blocks in reverse rank order with gaps in
   front, between and after. Returns the extent in elements. */
static size_t make_displs(const size_t* counts, int n, int gapped, size_t* displs)
{
    size_t pos = 0;
    if (!gapped) {
        for (int i = 0; i < n; i++) {
            displs[i] = pos;
            pos += counts[i];
        }
        return pos;
    }
    pos = 3;
    for (int i = n - 1; i >= 0; i--) {
        displs[i] = pos;
        pos += counts[i] + 1 + (size_t)(i % 2) * 2;
    }
    return pos + 2;
}

/* ---- all-reduce ----------------------------------------------------------- */

static void ar_one(const tctx* t, vs_dtype dt, vs_op op, size_t count, int inplace, int pat,
                   int salt)
{
    char what[200];
    snprintf(what, sizeof what, "all_reduce dt=%s op=%s count=%zu %s pat=%d rank=%d/%d", dtn(dt),
             opn(op), count, inplace ? "in-place" : "out-of-place", pat, t->rank, t->n);
    void* send = ebuf(t, dt, count);
    void* recv = inplace ? send : ebuf(t, dt, count);
    void* exp = ebuf(t, dt, count);
    fill_vals(dt, send, count, pat, salt, t->rank, 0);
    ref_fill(dt, op, t->n, pat, salt, 0, count, exp);
    T_OK(what, vs_all_reduce(t->c, send, recv, count, dt, op, NULL));
    check_eq(what, dt, recv, exp, count);
    check_guard(what, dt, recv, count);
    if (!inplace) check_vals_unchanged(t, what, dt, send, count, pat, salt, 0);
    xfree(t, exp);
    if (!inplace) xfree(t, recv);
    xfree(t, send);
}

static void case_all_reduce(tctx* t)
{
    static const size_t counts[] = { 0, 1, 3, 1031 };
    int salt = 1;
    for (int d = 0; d < NDTS; d++)
        for (int o = 0; o < NOPS; o++)
            for (int k = 0; k < 4; k++)
                for (int ip = 0; ip < 2; ip++)
                    ar_one(t, DTS[d], OPS[o], counts[k], ip, PAT_SMALL, salt++);
    /* integer wrap-around */
    for (int d = 0; d < NDTS; d++)
        if (is_int(DTS[d]))
            for (int o = 0; o < NOPS; o++)
                for (int ip = 0; ip < 2; ip++) ar_one(t, DTS[d], OPS[o], 37, ip, PAT_WRAP, salt++);
    /* ~1e5 elements */
    for (int d = 0; d < NDTS; d++) {
        ar_one(t, DTS[d], VS_OP_SUM, BIG, 0, PAT_SMALL, salt++);
        ar_one(t, DTS[d], VS_OP_AVG, BIG, 1, PAT_SMALL, salt++);
    }
}

/* ---- reduce --------------------------------------------------------------- */

static void reduce_one(const tctx* t, vs_dtype dt, vs_op op, size_t count, int root, int pat,
                       int salt)
{
    char what[200];
    snprintf(what, sizeof what, "reduce dt=%s op=%s count=%zu root=%d pat=%d rank=%d/%d", dtn(dt),
             opn(op), count, root, pat, t->rank, t->n);
    void* send = ebuf(t, dt, count);
    void* recv = ebuf(t, dt, count);
    fill_vals(dt, send, count, pat, salt, t->rank, 0);
    T_OK(what, vs_reduce(t->c, send, recv, count, dt, op, root, NULL));
    if (t->rank == root) {
        void* exp = ebuf(t, dt, count);
        ref_fill(dt, op, t->n, pat, salt, 0, count, exp);
        check_eq(what, dt, recv, exp, count);
        check_guard(what, dt, recv, count);
        xfree(t, exp);
    }
    check_vals_unchanged(t, what, dt, send, count, pat, salt, 0);
    xfree(t, recv);
    xfree(t, send);
}

static void case_reduce(tctx* t)
{
    int salt = 1000;
    for (int root = 0; root < t->n; root++)
        for (int d = 0; d < NDTS; d++)
            for (int o = 0; o < NOPS; o++) {
                if (root == 0) reduce_one(t, DTS[d], OPS[o], 0, root, PAT_SMALL, salt++);
                reduce_one(t, DTS[d], OPS[o], 1, root, PAT_SMALL, salt++);
                reduce_one(t, DTS[d], OPS[o], 1031, root, PAT_SMALL, salt++);
            }
    for (int d = 0; d < NDTS; d++)
        if (is_int(DTS[d]))
            for (int o = 0; o < NOPS; o++)
                reduce_one(t, DTS[d], OPS[o], 37, t->n - 1, PAT_WRAP, salt++);
    reduce_one(t, VS_F32, VS_OP_SUM, BIG, t->n / 2, PAT_SMALL, salt++);
    reduce_one(t, VS_BF16, VS_OP_AVG, BIG, t->n - 1, PAT_SMALL, salt++);
    reduce_one(t, VS_I64, VS_OP_MIN, BIG, 0, PAT_SMALL, salt++);
}

/* ---- broadcast ------------------------------------------------------------ */

static void bcast_one(const tctx* t, vs_dtype dt, size_t count, int root, int inplace, int salt)
{
    char what[200];
    snprintf(what, sizeof what, "broadcast dt=%s count=%zu root=%d %s rank=%d/%d", dtn(dt), count,
             root, inplace ? "in-place" : "out-of-place", t->rank, t->n);
    void* recv = ebuf(t, dt, count);
    void* send = recv;
    if (inplace) {
        if (t->rank == root) fill_bits(dt, recv, count, salt, root, 0);
    } else {
        send = ebuf(t, dt, count); /* non-roots: their own data, which must not leak */
        fill_bits(dt, send, count, salt, t->rank, 0);
    }
    void* exp = ebuf(t, dt, count);
    fill_bits(dt, exp, count, salt, root, 0);
    T_OK(what, vs_broadcast(t->c, send, recv, count, dt, root, NULL));
    check_eq(what, dt, recv, exp, count + GUARD);
    if (!inplace) {
        check_bits_unchanged(t, what, dt, send, count, salt, 0);
        xfree(t, send);
    }
    xfree(t, exp);
    xfree(t, recv);
}

static void case_broadcast(tctx* t)
{
    static const size_t counts[] = { 0, 1, 1031 };
    int salt = 2000;
    for (int root = 0; root < t->n; root++)
        for (int d = 0; d < NDTS; d++)
            for (int k = 0; k < 3; k++)
                for (int ip = 0; ip < 2; ip++) bcast_one(t, DTS[d], counts[k], root, ip, salt++);
    bcast_one(t, VS_F32, BIG, t->n / 2, 0, salt++);
    bcast_one(t, VS_U8, BIG, t->n - 1, 1, salt++);
}

/* ---- all-gather ----------------------------------------------------------- */

static void ag_one(const tctx* t, vs_dtype dt, size_t count, int inplace, int salt)
{
    char what[200];
    int n = t->n;
    snprintf(what, sizeof what, "all_gather dt=%s count=%zu %s rank=%d/%d", dtn(dt), count,
             inplace ? "in-place" : "out-of-place", t->rank, n);
    void* recv = ebuf(t, dt, (size_t)n * count);
    void* send = inplace ? at(recv, dt, (size_t)t->rank * count) : ebuf(t, dt, count);
    fill_bits(dt, send, count, salt, t->rank, 0);
    void* exp = ebuf(t, dt, (size_t)n * count);
    for (int i = 0; i < n; i++) fill_bits(dt, at(exp, dt, (size_t)i * count), count, salt, i, 0);
    T_OK(what, vs_all_gather(t->c, send, recv, count, dt, NULL));
    check_eq(what, dt, recv, exp, (size_t)n * count + GUARD);
    if (!inplace) {
        check_bits_unchanged(t, what, dt, send, count, salt, 0);
        xfree(t, send);
    }
    xfree(t, exp);
    xfree(t, recv);
}

static void case_all_gather(tctx* t)
{
    static const size_t counts[] = { 0, 1, 3, 1031 };
    int salt = 3000;
    for (int d = 0; d < NDTS; d++)
        for (int k = 0; k < 4; k++)
            for (int ip = 0; ip < 2; ip++) ag_one(t, DTS[d], counts[k], ip, salt++);
    ag_one(t, VS_F32, BIG / (size_t)t->n, 0, salt++);
    ag_one(t, VS_F16, BIG / (size_t)t->n, 1, salt++);
}

/* ---- all-gatherv ---------------------------------------------------------- */

static void agv_one(const tctx* t, vs_dtype dt, int vp, int gapped, int salt)
{
    char what[200];
    int n = t->n;
    size_t counts[MAXR] = {0}, displs[MAXR] = {0};
    for (int i = 0; i < n; i++) counts[i] = vcount(vp, i, n);
    size_t extent = make_displs(counts, n, gapped, displs);
    snprintf(what, sizeof what, "all_gatherv dt=%s counts-pattern=%d displs=%s rank=%d/%d", dtn(dt),
             vp, gapped ? "gapped" : "NULL", t->rank, n);
    size_t mine = counts[t->rank];
    void* send = ebuf(t, dt, mine);
    fill_bits(dt, send, mine, salt, t->rank, 0);
    void* recv = ebuf(t, dt, extent);
    void* exp = ebuf(t, dt, extent);
    for (int i = 0; i < n; i++) fill_bits(dt, at(exp, dt, displs[i]), counts[i], salt, i, 0);
    T_OK(what, vs_all_gatherv(t->c, send, recv, counts, gapped ? displs : NULL, dt, NULL));
    check_eq(what, dt, recv, exp, extent + GUARD); /* blocks, gaps untouched, guard */
    check_bits_unchanged(t, what, dt, send, mine, salt, 0);
    xfree(t, exp);
    xfree(t, recv);
    xfree(t, send);
}

static void case_all_gatherv(tctx* t)
{
    int salt = 4000;
    for (int d = 0; d < NDTS; d++)
        for (int vp = 0; vp < NVPAT; vp++)
            for (int g = 0; g < 2; g++) agv_one(t, DTS[d], vp, g, salt++);
}

/* ---- reduce-scatter ------------------------------------------------------- */

static void rs_one(const tctx* t, vs_dtype dt, vs_op op, size_t count, int inplace, int pat,
                   int salt)
{
    char what[200];
    int n = t->n;
    snprintf(what, sizeof what, "reduce_scatter dt=%s op=%s count=%zu %s pat=%d rank=%d/%d",
             dtn(dt), opn(op), count, inplace ? "in-place" : "out-of-place", pat, t->rank, n);
    size_t total = (size_t)n * count;
    void* send = ebuf(t, dt, total);
    fill_vals(dt, send, total, pat, salt, t->rank, 0);
    void* recv = inplace ? at(send, dt, (size_t)t->rank * count) : ebuf(t, dt, count);
    void* exp = ebuf(t, dt, count);
    ref_fill(dt, op, n, pat, salt, (size_t)t->rank * count, count, exp);
    T_OK(what, vs_reduce_scatter(t->c, send, recv, count, dt, op, NULL));
    check_eq(what, dt, recv, exp, count);
    if (inplace) {
        check_guard(what, dt, send, total);
    } else {
        check_guard(what, dt, recv, count);
        check_vals_unchanged(t, what, dt, send, total, pat, salt, 0);
        xfree(t, recv);
    }
    xfree(t, exp);
    xfree(t, send);
}

static void case_reduce_scatter(tctx* t)
{
    static const size_t counts[] = { 0, 1, 3, 1031 };
    int salt = 5000;
    for (int d = 0; d < NDTS; d++)
        for (int o = 0; o < NOPS; o++)
            for (int k = 0; k < 4; k++)
                for (int ip = 0; ip < 2; ip++)
                    rs_one(t, DTS[d], OPS[o], counts[k], ip, PAT_SMALL, salt++);
    for (int d = 0; d < NDTS; d++)
        if (is_int(DTS[d]))
            for (int o = 0; o < NOPS; o++)
                for (int ip = 0; ip < 2; ip++) rs_one(t, DTS[d], OPS[o], 37, ip, PAT_WRAP, salt++);
    rs_one(t, VS_F32, VS_OP_SUM, BIG / (size_t)t->n, 0, PAT_SMALL, salt++);
    rs_one(t, VS_BF16, VS_OP_AVG, BIG / (size_t)t->n, 1, PAT_SMALL, salt++);
}

/* ---- reduce-scatterv ------------------------------------------------------ */

static void rsv_one(const tctx* t, vs_dtype dt, vs_op op, int vp, int pat, int salt)
{
    char what[200];
    int n = t->n;
    size_t counts[MAXR] = {0}, displs[MAXR] = {0};
    for (int i = 0; i < n; i++) counts[i] = vcount(vp, i, n);
    size_t total = make_displs(counts, n, 0, displs);
    snprintf(what, sizeof what, "reduce_scatterv dt=%s op=%s counts-pattern=%d pat=%d rank=%d/%d",
             dtn(dt), opn(op), vp, pat, t->rank, n);
    size_t mine = counts[t->rank];
    void* send = ebuf(t, dt, total);
    fill_vals(dt, send, total, pat, salt, t->rank, 0);
    void* recv = ebuf(t, dt, mine);
    void* exp = ebuf(t, dt, mine);
    ref_fill(dt, op, n, pat, salt, displs[t->rank], mine, exp);
    T_OK(what, vs_reduce_scatterv(t->c, send, recv, counts, dt, op, NULL));
    check_eq(what, dt, recv, exp, mine + GUARD);
    check_vals_unchanged(t, what, dt, send, total, pat, salt, 0);
    xfree(t, exp);
    xfree(t, recv);
    xfree(t, send);
}

static void case_reduce_scatterv(tctx* t)
{
    int salt = 6000;
    for (int d = 0; d < NDTS; d++)
        for (int o = 0; o < NOPS; o++)
            for (int vp = 0; vp < NVPAT; vp++) rsv_one(t, DTS[d], OPS[o], vp, PAT_SMALL, salt++);
    for (int d = 0; d < NDTS; d++)
        if (is_int(DTS[d]))
            for (int o = 0; o < NOPS; o++) rsv_one(t, DTS[d], OPS[o], 0, PAT_WRAP, salt++);
}

/* ---- all-to-all ----------------------------------------------------------- */

static void a2a_one(const tctx* t, vs_dtype dt, size_t count, int salt)
{
    char what[200];
    int n = t->n;
    snprintf(what, sizeof what, "all_to_all dt=%s count=%zu rank=%d/%d", dtn(dt), count, t->rank, n);
    size_t total = (size_t)n * count;
    void* send = ebuf(t, dt, total); /* block j element k = bits(rank, j*count + k) */
    fill_bits(dt, send, total, salt, t->rank, 0);
    void* recv = ebuf(t, dt, total);
    void* exp = ebuf(t, dt, total);
    for (int i = 0; i < n; i++)
        fill_bits(dt, at(exp, dt, (size_t)i * count), count, salt, i, (uint64_t)t->rank * count);
    T_OK(what, vs_all_to_all(t->c, send, recv, count, dt, NULL));
    check_eq(what, dt, recv, exp, total + GUARD);
    check_bits_unchanged(t, what, dt, send, total, salt, 0);
    xfree(t, exp);
    xfree(t, recv);
    xfree(t, send);
}

static void case_all_to_all(tctx* t)
{
    static const size_t counts[] = { 0, 1, 3, 1031 };
    int salt = 7000;
    for (int d = 0; d < NDTS; d++)
        for (int k = 0; k < 4; k++) a2a_one(t, DTS[d], counts[k], salt++);
    a2a_one(t, VS_F32, BIG / (size_t)t->n, salt++);
}

/* ---- all-to-allv ---------------------------------------------------------- */

#define NA2AVPAT 3
static size_t a2av_count(int pat, int src, int dst)
{
    switch (pat) {
    case 0: return ((src * 3 + dst * 5) % 4 == 0) ? 0 : (size_t)((src + 2 * dst) % 7 + 1);
    case 1: return src == dst ? 0 : (size_t)(300 + 17 * src + dst);
    default: return dst == 0 ? 0 : 2; /* rank 0 receives nothing */
    }
}

static void a2av_one(const tctx* t, vs_dtype dt, int pat, int layout, int salt)
{
    char what[200];
    int n = t->n, r = t->rank;
    size_t sc[MAXR] = {0}, sd[MAXR] = {0}, rc[MAXR] = {0}, rd[MAXR] = {0};
    for (int j = 0; j < n; j++) {
        sc[j] = a2av_count(pat, r, j);
        rc[j] = a2av_count(pat, j, r);
    }
    /* layout 0: both packed; 1: both gapped, reversed; 2: send gapped, recv packed */
    size_t sext = make_displs(sc, n, layout != 0, sd);
    size_t rext = make_displs(rc, n, layout == 1, rd);
    snprintf(what, sizeof what, "all_to_allv dt=%s counts-pattern=%d layout=%d rank=%d/%d", dtn(dt),
             pat, layout, r, n);
    void* send = ebuf(t, dt, sext);
    for (int j = 0; j < n; j++) fill_bits(dt, at(send, dt, sd[j]), sc[j], salt, r, (uint64_t)j << 24);
    void* recv = ebuf(t, dt, rext);
    void* exp = ebuf(t, dt, rext);
    for (int i = 0; i < n; i++) fill_bits(dt, at(exp, dt, rd[i]), rc[i], salt, i, (uint64_t)r << 24);
    T_OK(what, vs_all_to_allv(t->c, send, sc, sd, recv, rc, rd, dt, NULL));
    check_eq(what, dt, recv, exp, rext + GUARD);
    xfree(t, exp);
    xfree(t, recv);
    xfree(t, send);
}

static void case_all_to_allv(tctx* t)
{
    int salt = 8000;
    for (int d = 0; d < NDTS; d++)
        for (int p = 0; p < NA2AVPAT; p++)
            for (int l = 0; l < 3; l++) a2av_one(t, DTS[d], p, l, salt++);
}

/* ---- all-to-allv, packed (NULL displacements) ----------------------------- */

/* Receive counts differ from send counts here, so a receive side laid out with the
   send counts (or any other wrong packed offset) shows. Every element carries its
   (source, destination, index) in its bits, for the sizes of dtype used. */
#define NPACKPAT 5
static size_t packed_count(int pat, int src, int dst, int n)
{
    switch (pat) {
    case 0: return ((src * 3 + dst * 5) % 4 == 0) ? 0 : (size_t)((src + 2 * dst) % 7 + 1);
    case 1: return dst == 0 ? 0 : (size_t)(1 + 3 * src + dst);  /* rank 0 receives nothing */
    case 2: return src == n - 1 ? (size_t)(40 + dst) : 0;       /* only the last rank sends */
    case 3: return (size_t)(5 * src + 1);                       /* the count depends on the source */
    default: return src == dst ? (size_t)(300 + src) : src > dst ? 2 : 0;
    }
}

static uint64_t packed_tag(size_t es, int src, int dst, size_t i)
{
    if (es == 8) return ((uint64_t)(src + 1) << 48) | ((uint64_t)(dst + 1) << 32) | (uint64_t)i;
    if (es == 4) return ((uint64_t)(src + 1) << 24) | ((uint64_t)(dst + 1) << 16) | (uint64_t)i;
    return ((uint64_t)src << 13) | ((uint64_t)dst << 10) | (uint64_t)i; /* 2 bytes: n <= 8, i < 1024 */
}

static void packed_put(vs_dtype dt, void* buf, size_t k, int src, int dst, size_t i)
{
    uint64_t tag = packed_tag(esz(dt), src, dst, i);
    memcpy(at(buf, dt, k), &tag, esz(dt)); /* little-endian: the low bytes */
}

/* mode 0: both sides packed (NULL displacements); 1: send packed, recv gapped and
   reversed; 2: send gapped, recv packed. */
static void a2av_packed_one(const tctx* t, vs_dtype dt, int pat, int mode, int async)
{
    char what[200];
    int n = t->n, r = t->rank;
    size_t sc[MAXR] = {0}, sd[MAXR] = {0}, rc[MAXR] = {0}, rd[MAXR] = {0};
    for (int j = 0; j < n; j++) {
        sc[j] = packed_count(pat, r, j, n);
        rc[j] = packed_count(pat, j, r, n);
    }
    size_t sext = make_displs(sc, n, mode == 2, sd);
    size_t rext = make_displs(rc, n, mode == 1, rd);
    snprintf(what, sizeof what, "all_to_allv packed dt=%s counts-pattern=%d mode=%d%s rank=%d/%d", dtn(dt), pat,
             mode, async ? " async" : "", r, n);
    void* send = ebuf(t, dt, sext);
    for (int j = 0; j < n; j++)
        for (size_t i = 0; i < sc[j]; i++) packed_put(dt, send, sd[j] + i, r, j, i);
    /* sentinel slack after the result, as long as everything sent: a block put at a
       wrong offset past the end lands there and is reported, not a heap overrun */
    size_t slack = 0;
    for (int s = 0; s < n; s++)
        for (int j = 0; j < n; j++) slack += packed_count(pat, s, j, n);
    void* recv = ebuf(t, dt, rext + slack);
    void* exp = ebuf(t, dt, rext + slack);
    for (int s = 0; s < n; s++)
        for (size_t i = 0; i < rc[s]; i++) packed_put(dt, exp, rd[s] + i, s, r, i);
    vs_work* wk = NULL;
    T_OK(what, vs_all_to_allv(t->c, send, sc, mode == 2 ? sd : NULL, recv, rc, mode == 1 ? rd : NULL, dt,
                              async ? &wk : NULL));
    if (wk) T_OK(what, vs_wait(wk));
    /* element by element, naming the tag found and the one expected */
    size_t es = esz(dt), bad = 0, first = 0;
    for (size_t k = 0; k < rext + slack + GUARD; k++)
        if (memcmp(at(recv, dt, k), at(exp, dt, k), es) != 0 && !bad++) first = k;
    if (bad) {
        uint64_t g = 0, e = 0;
        memcpy(&g, at(recv, dt, first), es);
        memcpy(&e, at(exp, dt, first), es);
        vt_fail_msg(__FILE__, __LINE__, "received == tagged reference",
                    "%s: %zu of %zu elements wrong; first recv[%zu] = 0x%llx, expected 0x%llx (tags: source+1, "
                    "destination+1, index; 0x%02x.. is the sentinel)", what, bad, rext + slack + GUARD, first,
                    (unsigned long long)g, (unsigned long long)e, SENT);
    }

    {
        void* s2 = ebuf(t, dt, sext);
        for (int j = 0; j < n; j++)
            for (size_t i = 0; i < sc[j]; i++) packed_put(dt, s2, sd[j] + i, r, j, i);
        char w2[256];
        snprintf(w2, sizeof w2, "%s [send buffer modified]", what);
        check_eq(w2, dt, send, s2, sext + GUARD);
        xfree(t, s2);
    }
    xfree(t, exp);
    xfree(t, recv);
    xfree(t, send);
}

static void case_all_to_allv_packed(tctx* t)
{
    static const vs_dtype pdt[] = { VS_I64, VS_I32, VS_BF16 };
    for (int d = 0; d < 3; d++) {
        if (esz(pdt[d]) == 2 && t->n > 8) continue; /* the 2-byte tag holds 8 ranks */
        for (int p = 0; p < NPACKPAT; p++)
            for (int m = 0; m < 3; m++) a2av_packed_one(t, pdt[d], p, m, 0);
        a2av_packed_one(t, pdt[d], 0, 0, 1);
    }
    /* the patterns make receive counts differ from send counts somewhere */
    if (t->n > 1) {
        int differ = 0;
        for (int p = 0; p < NPACKPAT; p++)
            for (int j = 0; j < t->n; j++)
                differ += packed_count(p, t->rank, j, t->n) != packed_count(p, j, t->rank, t->n);
        VT_CHECK(differ > 0, "all_to_allv packed: receive counts equal send counts on rank %d/%d", t->rank, t->n);
    }
}

/* ---- barrier -------------------------------------------------------------- */

static void case_barrier(tctx* t)
{
    enum { IT = 24 };
    int n = t->n, r = t->rank;
    int64_t enter[IT], leave[IT];
    for (int it = 0; it < IT; it++) {
        if (r == it % n) sleep_ms(3); /* a different late rank each time */
        enter[it] = now_ns();
        if (it % 3 == 2) {
            vs_work* wk = NULL;
            T_OK("async barrier", vs_barrier(t->c, &wk));
            VT_CHECK(wk != NULL, "async barrier gave no handle");
            if (wk) T_OK("vs_wait(barrier)", vs_wait(wk));
        } else {
            T_OK("barrier", vs_barrier(t->c, NULL));
        }
        leave[it] = now_ns();
    }
    for (int i = 0; i < 200; i++) T_OK("barrier (back to back)", vs_barrier(t->c, NULL));

    int64_t* all = (int64_t*)xalloc(t, sizeof(int64_t) * IT * (size_t)n);
    T_OK("all_gather of barrier entry times", vs_all_gather(t->c, enter, all, IT, VS_I64, NULL));
    for (int it = 0; it < IT && t->one_host; it++) {
        int last = 0;
        for (int q = 1; q < n; q++)
            if (all[q * IT + it] > all[last * IT + it]) last = q;
        VT_CHECK(leave[it] >= all[last * IT + it],
                 "barrier %d: rank %d/%d left %.3f ms before rank %d entered", it, r, n,
                 (double)(all[last * IT + it] - leave[it]) / 1e6, last);
    }
    xfree(t, all);
}

/* ---- send / recv (no groups) ---------------------------------------------- */

static void pair_one(const tctx* t, vs_dtype dt, size_t count, int async, int salt)
{
    int r = t->rank, partner = r ^ 1;
    if (partner >= t->n) return; /* odd n: the last rank sits out */
    char what[200];
    snprintf(what, sizeof what, "pairwise send/recv dt=%s count=%zu %s rank=%d/%d", dtn(dt), count,
             async ? "async" : "blocking", r, t->n);
    void* send = ebuf(t, dt, count);
    fill_bits(dt, send, count, salt, r, 0);
    void* recv = ebuf(t, dt, count);
    for (int step = 0; step < 2; step++) {
        int sending = (step == 0) == (r % 2 == 0); /* even ranks send first */
        vs_work* wk = NULL;
        vs_work** pw = async ? &wk : NULL;
        if (sending) T_OK(what, vs_send(t->c, send, count, dt, partner, pw));
        else T_OK(what, vs_recv(t->c, recv, count, dt, partner, pw));
        if (async) {
            VT_CHECK(wk != NULL, "%s: no handle", what);
            if (wk) {
                poll_done(what, wk, 5000);
                T_OK(what, vs_wait(wk));
            }
        }
    }
    void* exp = ebuf(t, dt, count);
    fill_bits(dt, exp, count, salt, partner, 0);
    check_eq(what, dt, recv, exp, count + GUARD);
    check_bits_unchanged(t, what, dt, send, count, salt, 0);
    xfree(t, exp);
    xfree(t, recv);
    xfree(t, send);
}

static void case_send_recv(tctx* t)
{
    static const size_t counts[] = { 0, 1, 1031 };
    int salt = 9000, r = t->rank, n = t->n;
    for (int d = 0; d < NDTS; d++)
        for (int k = 0; k < 3; k++) pair_one(t, DTS[d], counts[k], 0, salt++);
    pair_one(t, VS_F32, BIG, 0, salt++);
    pair_one(t, VS_BF16, 1031, 1, salt++);
    pair_one(t, VS_I64, 7, 1, salt++);

    /* A chain 0 -> 1 -> ... -> n-1, each rank forwarding what it got. */
    {
        size_t count = 513;
        int s = salt++;
        void* buf = ebuf(t, VS_I32, count);
        if (r == 0) fill_bits(VS_I32, buf, count, s, 0, 0);
        if (r > 0) T_OK("chain recv", vs_recv(t->c, buf, count, VS_I32, r - 1, NULL));
        if (r < n - 1) T_OK("chain send", vs_send(t->c, buf, count, VS_I32, r + 1, NULL));
        void* exp = ebuf(t, VS_I32, count);
        fill_bits(VS_I32, exp, count, s, 0, 0);
        check_eq("chain forward", VS_I32, buf, exp, count + GUARD);
        xfree(t, exp);
        xfree(t, buf);
    }

    /* Two messages to the same peer arrive in order. */
    if ((r ^ 1) < n) {
        int partner = r ^ 1, s = salt++;
        void* a = ebuf(t, VS_F64, 5);
        void* b = ebuf(t, VS_F64, 9);
        if (r % 2 == 0) {
            fill_bits(VS_F64, a, 5, s, r, 0);
            fill_bits(VS_F64, b, 9, s, r, 100);
            T_OK("ordered send a", vs_send(t->c, a, 5, VS_F64, partner, NULL));
            T_OK("ordered send b", vs_send(t->c, b, 9, VS_F64, partner, NULL));
        } else {
            T_OK("ordered recv a", vs_recv(t->c, a, 5, VS_F64, partner, NULL));
            T_OK("ordered recv b", vs_recv(t->c, b, 9, VS_F64, partner, NULL));
            void* ea = ebuf(t, VS_F64, 5);
            void* eb = ebuf(t, VS_F64, 9);
            fill_bits(VS_F64, ea, 5, s, partner, 0);
            fill_bits(VS_F64, eb, 9, s, partner, 100);
            check_eq("two sends to one peer: first", VS_F64, a, ea, 5 + GUARD);
            check_eq("two sends to one peer: second", VS_F64, b, eb, 9 + GUARD);
            xfree(t, ea);
            xfree(t, eb);
        }
        xfree(t, a);
        xfree(t, b);
    }
}

/* ---- groups --------------------------------------------------------------- */

/* mode 0: send then recv, group_end(NULL); 1: recv then send, group_end(&work);
   2: nested groups, the send in an inner group. */
static void ring_one(const tctx* t, vs_dtype dt, size_t count, int mode, int salt)
{
    int n = t->n, r = t->rank, next = (r + 1) % n, prev = (r - 1 + n) % n;
    char what[200];
    snprintf(what, sizeof what, "group ring dt=%s count=%zu mode=%d rank=%d/%d", dtn(dt), count,
             mode, r, n);
    void* send = ebuf(t, dt, count);
    fill_bits(dt, send, count, salt, r, 0);
    void* recv = ebuf(t, dt, count);
    T_OK(what, vs_group_start(t->c));
    if (mode == 0) {
        T_OK(what, vs_send(t->c, send, count, dt, next, NULL));
        T_OK(what, vs_recv(t->c, recv, count, dt, prev, NULL));
        T_OK(what, vs_group_end(t->c, NULL));
    } else if (mode == 1) {
        T_OK(what, vs_recv(t->c, recv, count, dt, prev, NULL));
        T_OK(what, vs_send(t->c, send, count, dt, next, NULL));
        vs_work* wk = NULL;
        T_OK(what, vs_group_end(t->c, &wk));
        VT_CHECK(wk != NULL, "%s: vs_group_end(&work) gave no handle", what);
        if (wk) T_OK(what, vs_wait(wk));
    } else {
        T_OK(what, vs_group_start(t->c));
        T_OK(what, vs_send(t->c, send, count, dt, next, NULL));
        T_OK(what, vs_group_end(t->c, NULL)); /* inner: must not launch yet */
        T_OK(what, vs_recv(t->c, recv, count, dt, prev, NULL));
        T_OK(what, vs_group_end(t->c, NULL));
    }
    void* exp = ebuf(t, dt, count);
    fill_bits(dt, exp, count, salt, prev, 0);
    check_eq(what, dt, recv, exp, count + GUARD);
    check_bits_unchanged(t, what, dt, send, count, salt, 0);
    xfree(t, exp);
    xfree(t, recv);
    xfree(t, send);
}

/* An all-to-all made of grouped send/recv (self included). */
static void group_a2a(const tctx* t, vs_dtype dt, size_t count, int salt)
{
    int n = t->n, r = t->rank;
    char what[200];
    snprintf(what, sizeof what, "all_to_all from grouped send/recv dt=%s count=%zu rank=%d/%d",
             dtn(dt), count, r, n);
    size_t total = (size_t)n * count;
    void* send = ebuf(t, dt, total);
    fill_bits(dt, send, total, salt, r, 0);
    void* recv = ebuf(t, dt, total);
    T_OK(what, vs_group_start(t->c));
    for (int j = 0; j < n; j++)
        T_OK(what, vs_send(t->c, at(send, dt, (size_t)j * count), count, dt, j, NULL));
    for (int i = 0; i < n; i++)
        T_OK(what, vs_recv(t->c, at(recv, dt, (size_t)i * count), count, dt, i, NULL));
    T_OK(what, vs_group_end(t->c, NULL));
    void* exp = ebuf(t, dt, total); /* the same reference as case all_to_all */
    for (int i = 0; i < n; i++)
        fill_bits(dt, at(exp, dt, (size_t)i * count), count, salt, i, (uint64_t)r * count);
    check_eq(what, dt, recv, exp, total + GUARD);
    xfree(t, exp);
    xfree(t, recv);
    xfree(t, send);
}

/* A group holding collectives and p2p: all-reduce, ring send/recv, broadcast,
   reduce-scatter. */
static void group_mixed(const tctx* t, int use_work, int salt)
{
    int n = t->n, r = t->rank, next = (r + 1) % n, prev = (r - 1 + n) % n;
    char what[200];
    snprintf(what, sizeof what, "group of collectives + p2p (%s) rank=%d/%d",
             use_work ? "group_end(&work)" : "group_end(NULL)", r, n);
    const size_t ca = 100, cp = 64, cb = 50, cr = 11;
    void* ar_s = ebuf(t, VS_I32, ca);
    void* ar_r = ebuf(t, VS_I32, ca);
    fill_vals(VS_I32, ar_s, ca, PAT_SMALL, salt, r, 0);
    void* p_s = ebuf(t, VS_F32, cp);
    void* p_r = ebuf(t, VS_F32, cp);
    fill_bits(VS_F32, p_s, cp, salt, r, 0);
    void* b = ebuf(t, VS_U8, cb);
    if (r == 0) fill_bits(VS_U8, b, cb, salt, 0, 0);
    void* rs_s = ebuf(t, VS_F64, (size_t)n * cr);
    void* rs_r = ebuf(t, VS_F64, cr);
    fill_vals(VS_F64, rs_s, (size_t)n * cr, PAT_SMALL, salt + 1, r, 0);

    T_OK(what, vs_group_start(t->c));
    T_OK(what, vs_all_reduce(t->c, ar_s, ar_r, ca, VS_I32, VS_OP_SUM, NULL));
    T_OK(what, vs_send(t->c, p_s, cp, VS_F32, next, NULL));
    T_OK(what, vs_recv(t->c, p_r, cp, VS_F32, prev, NULL));
    T_OK(what, vs_broadcast(t->c, b, b, cb, VS_U8, 0, NULL));
    T_OK(what, vs_reduce_scatter(t->c, rs_s, rs_r, cr, VS_F64, VS_OP_MAX, NULL));
    if (use_work) {
        vs_work* wk = NULL;
        T_OK(what, vs_group_end(t->c, &wk));
        VT_CHECK(wk != NULL, "%s: no handle", what);
        if (wk) T_OK(what, vs_wait(wk));
    } else {
        T_OK(what, vs_group_end(t->c, NULL));
    }

    void* e = ebuf(t, VS_I32, ca);
    ref_fill(VS_I32, VS_OP_SUM, n, PAT_SMALL, salt, 0, ca, e);
    check_eq(what, VS_I32, ar_r, e, ca + GUARD);
    xfree(t, e);
    e = ebuf(t, VS_F32, cp);
    fill_bits(VS_F32, e, cp, salt, prev, 0);
    check_eq(what, VS_F32, p_r, e, cp + GUARD);
    xfree(t, e);
    e = ebuf(t, VS_U8, cb);
    fill_bits(VS_U8, e, cb, salt, 0, 0);
    check_eq(what, VS_U8, b, e, cb + GUARD);
    xfree(t, e);
    e = ebuf(t, VS_F64, cr);
    ref_fill(VS_F64, VS_OP_MAX, n, PAT_SMALL, salt + 1, (size_t)r * cr, cr, e);
    check_eq(what, VS_F64, rs_r, e, cr + GUARD);
    xfree(t, e);

    xfree(t, ar_s); xfree(t, ar_r); xfree(t, p_s); xfree(t, p_r); xfree(t, b);
    xfree(t, rs_s); xfree(t, rs_r);
}

static void case_group(tctx* t)
{
    static const size_t counts[] = { 0, 1, 1031 };
    int salt = 10000, n = t->n, r = t->rank;
    for (int d = 0; d < NDTS; d++)
        for (int k = 0; k < 3; k++)
            for (int m = 0; m < 3; m++) ring_one(t, DTS[d], counts[k], m, salt++);
    ring_one(t, VS_F32, BIG, 0, salt++);
    group_a2a(t, VS_I32, 37, salt++);
    group_a2a(t, VS_BF16, 1031, salt++);
    group_a2a(t, VS_U8, 0, salt++);
    group_mixed(t, 0, salt);
    salt += 2;
    group_mixed(t, 1, salt);
    salt += 2;

    /* Two sends to the same peer inside one group match the receives in order. */
    {
        int next = (r + 1) % n, prev = (r - 1 + n) % n, s = salt++;
        void* a = ebuf(t, VS_I64, 5);
        void* b = ebuf(t, VS_I64, 9);
        void* ra = ebuf(t, VS_I64, 5);
        void* rb = ebuf(t, VS_I64, 9);
        fill_bits(VS_I64, a, 5, s, r, 0);
        fill_bits(VS_I64, b, 9, s, r, 100);
        T_OK("group two sends", vs_group_start(t->c));
        T_OK("group two sends", vs_recv(t->c, ra, 5, VS_I64, prev, NULL));
        T_OK("group two sends", vs_send(t->c, a, 5, VS_I64, next, NULL));
        T_OK("group two sends", vs_send(t->c, b, 9, VS_I64, next, NULL));
        T_OK("group two sends", vs_recv(t->c, rb, 9, VS_I64, prev, NULL));
        T_OK("group two sends", vs_group_end(t->c, NULL));
        void* ea = ebuf(t, VS_I64, 5);
        void* eb = ebuf(t, VS_I64, 9);
        fill_bits(VS_I64, ea, 5, s, prev, 0);
        fill_bits(VS_I64, eb, 9, s, prev, 100);
        check_eq("group: two sends to one peer, first", VS_I64, ra, ea, 5 + GUARD);
        check_eq("group: two sends to one peer, second", VS_I64, rb, eb, 9 + GUARD);
        xfree(t, a); xfree(t, b); xfree(t, ra); xfree(t, rb); xfree(t, ea); xfree(t, eb);
    }

    /* An empty group is fine. */
    T_OK("empty group", vs_group_start(t->c));
    T_OK("empty group", vs_group_end(t->c, NULL));
}

/* ---- async ---------------------------------------------------------------- */

static void case_async(tctx* t)
{
    int n = t->n, r = t->rank, salt = 11000;

    /* (a) Completion observed through vs_test alone. */
    {
        static const struct { vs_dtype dt; vs_op op; size_t count; } v[] = {
            { VS_F32, VS_OP_SUM, 1031 }, { VS_BF16, VS_OP_AVG, 1 },
            { VS_I64, VS_OP_MAX, BIG },  { VS_U8, VS_OP_SUM, 0 } };
        for (int k = 0; k < 4; k++) {
            vs_dtype dt = v[k].dt;
            size_t count = v[k].count;
            int s = salt++;
            char what[200];
            snprintf(what, sizeof what, "async all_reduce polled by vs_test dt=%s count=%zu rank=%d/%d",
                     dtn(dt), count, r, n);
            void* send = ebuf(t, dt, count);
            void* recv = ebuf(t, dt, count);
            fill_vals(dt, send, count, PAT_SMALL, s, r, 0);
            vs_work* wk = NULL;
            T_OK(what, vs_all_reduce(t->c, send, recv, count, dt, v[k].op, &wk));
            VT_CHECK(wk != NULL, "%s: no handle", what);
            if (wk) {
                if (poll_done(what, wk, 5000)) {
                    int done = 0; /* stays done */
                    T_OK(what, vs_test(wk, &done));
                    VT_CHECK(done == 1, "%s: vs_test went back to not done", what);
                }
                T_OK(what, vs_wait(wk));
            }
            void* exp = ebuf(t, dt, count);
            ref_fill(dt, v[k].op, n, PAT_SMALL, s, 0, count, exp);
            check_eq(what, dt, recv, exp, count + GUARD);
            xfree(t, exp);
            xfree(t, recv);
            xfree(t, send);
        }
    }

    /* (b) Four async ops of different kinds, waited in reverse order. */
    {
        const char* what = "4 async ops waited in reverse";
        int s = salt++;
        size_t c1 = 1031, c2 = 257, c3 = 1031, c4 = 33;
        void* s1 = ebuf(t, VS_F32, c1);
        void* r1 = ebuf(t, VS_F32, c1);
        fill_vals(VS_F32, s1, c1, PAT_SMALL, s, r, 0);
        void* s2 = ebuf(t, VS_I32, c2);
        void* r2 = ebuf(t, VS_I32, (size_t)n * c2);
        fill_bits(VS_I32, s2, c2, s, r, 0);
        void* b3 = ebuf(t, VS_U8, c3);
        if (r == n - 1) fill_bits(VS_U8, b3, c3, s, n - 1, 0);
        void* s4 = ebuf(t, VS_F64, (size_t)n * c4);
        void* r4 = ebuf(t, VS_F64, c4);
        fill_vals(VS_F64, s4, (size_t)n * c4, PAT_SMALL, s + 1, r, 0);
        vs_work *w1 = NULL, *w2 = NULL, *w3 = NULL, *w4 = NULL;
        T_OK(what, vs_all_reduce(t->c, s1, r1, c1, VS_F32, VS_OP_SUM, &w1));
        T_OK(what, vs_all_gather(t->c, s2, r2, c2, VS_I32, &w2));
        T_OK(what, vs_broadcast(t->c, b3, b3, c3, VS_U8, n - 1, &w3));
        T_OK(what, vs_reduce_scatter(t->c, s4, r4, c4, VS_F64, VS_OP_MIN, &w4));
        VT_CHECK(w1 && w2 && w3 && w4, "%s: missing handle", what);
        if (w4) T_OK(what, vs_wait(w4));
        if (w3) T_OK(what, vs_wait(w3));
        if (w2) T_OK(what, vs_wait(w2));
        if (w1) T_OK(what, vs_wait(w1));
        void* e = ebuf(t, VS_F32, c1);
        ref_fill(VS_F32, VS_OP_SUM, n, PAT_SMALL, s, 0, c1, e);
        check_eq("reverse wait: all_reduce", VS_F32, r1, e, c1 + GUARD);
        xfree(t, e);
        e = ebuf(t, VS_I32, (size_t)n * c2);
        for (int i = 0; i < n; i++) fill_bits(VS_I32, at(e, VS_I32, (size_t)i * c2), c2, s, i, 0);
        check_eq("reverse wait: all_gather", VS_I32, r2, e, (size_t)n * c2 + GUARD);
        xfree(t, e);
        e = ebuf(t, VS_U8, c3);
        fill_bits(VS_U8, e, c3, s, n - 1, 0);
        check_eq("reverse wait: broadcast", VS_U8, b3, e, c3 + GUARD);
        xfree(t, e);
        e = ebuf(t, VS_F64, c4);
        ref_fill(VS_F64, VS_OP_MIN, n, PAT_SMALL, s + 1, (size_t)r * c4, c4, e);
        check_eq("reverse wait: reduce_scatter", VS_F64, r4, e, c4 + GUARD);
        xfree(t, e);
        xfree(t, s1); xfree(t, r1); xfree(t, s2); xfree(t, r2); xfree(t, b3);
        xfree(t, s4); xfree(t, r4);
    }

    /* (c) A blocking op issued while async ops are pending completes after them
       (stream order), and may consume an async op's output. */
    {
        const char* what = "blocking op after pending async ops";
        int s = salt++;
        size_t cx = 513, cg = 100;
        void* x = ebuf(t, VS_I32, cx);
        void* y = ebuf(t, VS_I32, cx);
        void* z = ebuf(t, VS_I32, cx);
        fill_vals(VS_I32, x, cx, PAT_SMALL, s, r, 0);
        void* gs = ebuf(t, VS_I64, cg);
        void* gr = ebuf(t, VS_I64, (size_t)n * cg);
        fill_bits(VS_I64, gs, cg, s, r, 0);
        vs_work *w1 = NULL, *w2 = NULL;
        T_OK(what, vs_all_reduce(t->c, x, y, cx, VS_I32, VS_OP_SUM, &w1));
        T_OK(what, vs_all_gather(t->c, gs, gr, cg, VS_I64, &w2));
        T_OK(what, vs_all_reduce(t->c, y, z, cx, VS_I32, VS_OP_SUM, NULL)); /* reads y */
        int d1 = -1, d2 = -1;
        if (w1) T_OK(what, vs_test(w1, &d1));
        if (w2) T_OK(what, vs_test(w2, &d2));
        VT_CHECK(w1 && w2 && d1 == 1 && d2 == 1,
                 "%s: earlier async ops not complete after the blocking op returned (%d, %d)",
                 what, d1, d2);
        if (w1) T_OK(what, vs_wait(w1));
        if (w2) T_OK(what, vs_wait(w2));
        void* e = ebuf(t, VS_I32, cx);
        ref_fill(VS_I32, VS_OP_SUM, n, PAT_SMALL, s, 0, cx, e);
        check_eq("stream order: async all_reduce", VS_I32, y, e, cx + GUARD);
        for (size_t i = 0; i < cx; i++) {
            int32_t v;
            memcpy(&v, at(e, VS_I32, i), 4);
            v *= n;
            memcpy(at(e, VS_I32, i), &v, 4);
        }
        check_eq("stream order: blocking all_reduce of the async result", VS_I32, z, e, cx + GUARD);
        xfree(t, e);
        e = ebuf(t, VS_I64, (size_t)n * cg);
        for (int i = 0; i < n; i++) fill_bits(VS_I64, at(e, VS_I64, (size_t)i * cg), cg, s, i, 0);
        check_eq("stream order: async all_gather", VS_I64, gr, e, (size_t)n * cg + GUARD);
        xfree(t, e);
        xfree(t, x); xfree(t, y); xfree(t, z); xfree(t, gs); xfree(t, gr);
    }

    /* (d) Many ops in flight (all-reduce, in-place all-reduce, in-place all-gather,
       in-place reduce-scatter, barrier), waited in issue order. */
    {
        enum { K = 16 };
        vs_work* wk[K];
        void* sb[K];
        void* rb[K];
        int ss[K];
        vs_dtype dts[K];
        size_t cnt[K];
        for (int k = 0; k < K; k++) {
            vs_dtype dt = DTS[k % NDTS];
            size_t c = 1 + 97 * (size_t)k;
            int s = salt++, kind = k % 5;
            dts[k] = dt;
            cnt[k] = c;
            ss[k] = s;
            wk[k] = NULL;
            sb[k] = rb[k] = NULL;
            char what[160];
            snprintf(what, sizeof what, "in flight #%d kind=%d dt=%s", k, kind, dtn(dt));
            switch (kind) {
            case 0:
                sb[k] = ebuf(t, dt, c);
                rb[k] = ebuf(t, dt, c);
                fill_vals(dt, sb[k], c, PAT_SMALL, s, r, 0);
                T_OK(what, vs_all_reduce(t->c, sb[k], rb[k], c, dt, VS_OP_MAX, &wk[k]));
                break;
            case 1:
                sb[k] = ebuf(t, dt, c);
                fill_vals(dt, sb[k], c, PAT_SMALL, s, r, 0);
                T_OK(what, vs_all_reduce(t->c, sb[k], sb[k], c, dt, VS_OP_AVG, &wk[k]));
                break;
            case 2:
                rb[k] = ebuf(t, dt, (size_t)n * c);
                fill_bits(dt, at(rb[k], dt, (size_t)r * c), c, s, r, 0);
                T_OK(what, vs_all_gather(t->c, at(rb[k], dt, (size_t)r * c), rb[k], c, dt, &wk[k]));
                break;
            case 3:
                sb[k] = ebuf(t, dt, (size_t)n * c);
                fill_vals(dt, sb[k], (size_t)n * c, PAT_SMALL, s, r, 0);
                T_OK(what, vs_reduce_scatter(t->c, sb[k], at(sb[k], dt, (size_t)r * c), c, dt,
                                             VS_OP_SUM, &wk[k]));
                break;
            default:
                T_OK(what, vs_barrier(t->c, &wk[k]));
                break;
            }
            VT_CHECK(wk[k] != NULL, "%s: no handle", what);
        }
        for (int k = 0; k < K; k++) {
            char what[160];
            vs_dtype dt = dts[k];
            size_t c = cnt[k];
            int s = ss[k], kind = k % 5;
            snprintf(what, sizeof what, "in flight #%d kind=%d dt=%s rank=%d/%d", k, kind, dtn(dt),
                     r, n);
            if (wk[k]) T_OK(what, vs_wait(wk[k]));
            void* e = NULL;
            switch (kind) {
            case 0:
                e = ebuf(t, dt, c);
                ref_fill(dt, VS_OP_MAX, n, PAT_SMALL, s, 0, c, e);
                check_eq(what, dt, rb[k], e, c + GUARD);
                break;
            case 1:
                e = ebuf(t, dt, c);
                ref_fill(dt, VS_OP_AVG, n, PAT_SMALL, s, 0, c, e);
                check_eq(what, dt, sb[k], e, c + GUARD);
                break;
            case 2:
                e = ebuf(t, dt, (size_t)n * c);
                for (int i = 0; i < n; i++) fill_bits(dt, at(e, dt, (size_t)i * c), c, s, i, 0);
                check_eq(what, dt, rb[k], e, (size_t)n * c + GUARD);
                break;
            case 3:
                e = ebuf(t, dt, c);
                ref_fill(dt, VS_OP_SUM, n, PAT_SMALL, s, (size_t)r * c, c, e);
                check_eq(what, dt, at(sb[k], dt, (size_t)r * c), e, c);
                break;
            default:
                break;
            }
            xfree(t, e);
            xfree(t, sb[k]);
            xfree(t, rb[k]);
        }
    }

    /* (e) Async on every collective kind, each polled then waited. */
    {
        int s = salt++;
        size_t c = 211;
        size_t counts[MAXR] = {0};
        for (int i = 0; i < n; i++) counts[i] = vcount(0, i, n);
        size_t displs[MAXR] = {0};
        size_t ext = make_displs(counts, n, 0, displs);
        void* sv = ebuf(t, VS_F32, (size_t)n * c + ext);
        void* rv = ebuf(t, VS_F32, (size_t)n * c + ext);
        vs_work* wk;
        /* reduce */
        fill_vals(VS_F32, sv, c, PAT_SMALL, s, r, 0);
        wk = NULL;
        T_OK("async reduce", vs_reduce(t->c, sv, rv, c, VS_F32, VS_OP_SUM, 0, &wk));
        if (wk) { poll_done("async reduce", wk, 5000); T_OK("async reduce", vs_wait(wk)); }
        if (r == 0) {
            void* e = ebuf(t, VS_F32, c);
            ref_fill(VS_F32, VS_OP_SUM, n, PAT_SMALL, s, 0, c, e);
            check_eq("async reduce", VS_F32, rv, e, c);
            xfree(t, e);
        }
        /* all_gatherv */
        fill_bits(VS_F32, sv, counts[r], s, r, 0);
        wk = NULL;
        T_OK("async all_gatherv", vs_all_gatherv(t->c, sv, rv, counts, NULL, VS_F32, &wk));
        if (wk) { poll_done("async all_gatherv", wk, 5000); T_OK("async all_gatherv", vs_wait(wk)); }
        {
            void* e = ebuf(t, VS_F32, ext);
            for (int i = 0; i < n; i++) fill_bits(VS_F32, at(e, VS_F32, displs[i]), counts[i], s, i, 0);
            check_eq("async all_gatherv", VS_F32, rv, e, ext);
            xfree(t, e);
        }
        /* reduce_scatterv */
        fill_vals(VS_F32, sv, ext, PAT_SMALL, s, r, 0);
        wk = NULL;
        T_OK("async reduce_scatterv",
             vs_reduce_scatterv(t->c, sv, rv, counts, VS_F32, VS_OP_MIN, &wk));
        if (wk) { poll_done("async reduce_scatterv", wk, 5000); T_OK("async reduce_scatterv", vs_wait(wk)); }
        {
            void* e = ebuf(t, VS_F32, counts[r]);
            ref_fill(VS_F32, VS_OP_MIN, n, PAT_SMALL, s, displs[r], counts[r], e);
            check_eq("async reduce_scatterv", VS_F32, rv, e, counts[r]);
            xfree(t, e);
        }
        /* all_to_all */
        fill_bits(VS_F32, sv, (size_t)n * c, s, r, 0);
        wk = NULL;
        T_OK("async all_to_all", vs_all_to_all(t->c, sv, rv, c, VS_F32, &wk));
        if (wk) { poll_done("async all_to_all", wk, 5000); T_OK("async all_to_all", vs_wait(wk)); }
        {
            void* e = ebuf(t, VS_F32, (size_t)n * c);
            for (int i = 0; i < n; i++)
                fill_bits(VS_F32, at(e, VS_F32, (size_t)i * c), c, s, i, (uint64_t)r * c);
            check_eq("async all_to_all", VS_F32, rv, e, (size_t)n * c);
            xfree(t, e);
        }
        /* all_to_allv */
        {
            size_t sc[MAXR] = {0}, sd[MAXR] = {0}, rc[MAXR] = {0}, rd[MAXR] = {0};
            for (int j = 0; j < n; j++) {
                sc[j] = a2av_count(0, r, j);
                rc[j] = a2av_count(0, j, r);
            }
            size_t sext = make_displs(sc, n, 1, sd), rext = make_displs(rc, n, 1, rd);
            void* s2 = ebuf(t, VS_I32, sext);
            void* r2 = ebuf(t, VS_I32, rext);
            for (int j = 0; j < n; j++)
                fill_bits(VS_I32, at(s2, VS_I32, sd[j]), sc[j], s, r, (uint64_t)j << 24);
            wk = NULL;
            T_OK("async all_to_allv", vs_all_to_allv(t->c, s2, sc, sd, r2, rc, rd, VS_I32, &wk));
            if (wk) { poll_done("async all_to_allv", wk, 5000); T_OK("async all_to_allv", vs_wait(wk)); }
            void* e = ebuf(t, VS_I32, rext);
            for (int i = 0; i < n; i++)
                fill_bits(VS_I32, at(e, VS_I32, rd[i]), rc[i], s, i, (uint64_t)r << 24);
            check_eq("async all_to_allv", VS_I32, r2, e, rext + GUARD);
            xfree(t, e);
            xfree(t, s2);
            xfree(t, r2);
        }
        xfree(t, sv);
        xfree(t, rv);
    }
}

/* ---- split ---------------------------------------------------------------- */

static int dummy_marker;

static void case_split(tctx* t)
{
    int n = t->n, r = t->rank;
    vs_comm* sub = NULL;

    /* color = parity, key = -rank: members ordered by descending world rank. */
    {
        int members[MAXR] = {0}, m = 0, me = -1;
        for (int q = n - 1; q >= 0; q--)
            if (q % 2 == r % 2) {
                if (q == r) me = m;
                members[m++] = q;
            }
        T_OK("split parity", vs_comm_split(t->c, r % 2, -r, &sub));
        VT_CHECK(sub != NULL, "split parity: rank %d/%d got no communicator", r, n);
        if (sub) {
            VT_CHECK(vs_comm_size(sub) == m, "split parity: rank %d/%d size %d, expected %d", r, n,
                     vs_comm_size(sub), m);
            VT_CHECK(vs_comm_rank(sub) == me, "split parity: rank %d/%d new rank %d, expected %d", r,
                     n, vs_comm_rank(sub), me);
            VT_CHECK(vs_comm_device(sub) == 0 && vs_comm_device(t->c) == 0, "host transports hold host buffers");
            VT_CHECK(vs_comm_transport(sub) == vs_comm_transport(t->c),
                     "split parity: transport changed");
            int32_t mine = r, got[MAXR + GUARD];
            memset(got, SENT, sizeof got);
            T_OK("split parity: all_gather", vs_all_gather(sub, &mine, got, 1, VS_I32, NULL));
            int32_t exp[MAXR + GUARD];
            memset(exp, SENT, sizeof exp);
            for (int i = 0; i < m; i++) exp[i] = members[i];
            char what[96];
            snprintf(what, sizeof what, "split parity: member list on rank %d/%d", r, n);
            check_eq(what, VS_I32, got, exp, (size_t)m + GUARD);

            int64_t bit = (int64_t)1 << r, mask = 0, expm = 0;
            for (int i = 0; i < m; i++) expm |= (int64_t)1 << members[i];
            T_OK("split parity: all_reduce", vs_all_reduce(sub, &bit, &mask, 1, VS_I64, VS_OP_SUM, NULL));
            VT_CHECK(mask == expm, "split parity: all_reduce reached 0x%llx, expected 0x%llx (rank %d/%d)",
                     (unsigned long long)mask, (unsigned long long)expm, r, n);

            /* async on the sub-communicator */
            vs_work* wk = NULL;
            int64_t bit2 = bit, mask2 = 0;
            T_OK("split parity: async", vs_all_reduce(sub, &bit2, &mask2, 1, VS_I64, VS_OP_MAX, &wk));
            if (wk) T_OK("split parity: async", vs_wait(wk));
            int64_t expmax = (int64_t)1 << members[0];
            VT_CHECK(mask2 == expmax, "split parity: async max 0x%llx, expected 0x%llx",
                     (unsigned long long)mask2, (unsigned long long)expmax);

            /* split of a split: keep the even new ranks, in new-rank order (the
               control flow follows the actual new rank so every rank agrees) */
            vs_comm* sub2 = (vs_comm*)(void*)&dummy_marker;
            int sr = vs_comm_rank(sub);
            T_OK("split of split", vs_comm_split(sub, sr % 2 ? VS_COLOR_NONE : 0, sr, &sub2));
            if (sr % 2) {
                VT_CHECK(sub2 == NULL, "split of split: VS_COLOR_NONE gave a communicator");
            } else {
                VT_CHECK(sub2 != NULL && sub2 != (vs_comm*)(void*)&dummy_marker,
                         "split of split: no communicator");
                if (sub2 && sub2 != (vs_comm*)(void*)&dummy_marker) {
                    VT_CHECK(vs_comm_size(sub2) == (m + 1) / 2 && vs_comm_rank(sub2) == sr / 2,
                             "split of split: size %d rank %d, expected %d %d",
                             vs_comm_size(sub2), vs_comm_rank(sub2), (m + 1) / 2, sr / 2);
                    int64_t b3 = bit, m3 = 0, e3 = 0;
                    for (int i = 0; i < m; i += 2) e3 |= (int64_t)1 << members[i];
                    T_OK("split of split: all_reduce", vs_all_reduce(sub2, &b3, &m3, 1, VS_I64, VS_OP_SUM, NULL));
                    VT_CHECK(m3 == e3, "split of split: reached 0x%llx, expected 0x%llx",
                             (unsigned long long)m3, (unsigned long long)e3);
                    T_OK("free split of split", vs_comm_free(sub2));
                }
            }
        }
    }

    /* The world communicator still works while the split one lives. Outside the
       block above on purpose: every rank calls it whatever the split gave. */
    {
        int32_t one = 1, tot = 0;
        T_OK("world after split", vs_all_reduce(t->c, &one, &tot, 1, VS_I32, VS_OP_SUM, NULL));
        VT_CHECK(tot == n, "world all_reduce after split gave %d, expected %d", (int)tot, n);
        if (sub) T_OK("free split parity", vs_comm_free(sub));
    }

    /* VS_COLOR_NONE on ranks with r % 3 == 2; the rest, key 0 (old rank order). */
    {
        int none = (r % 3 == 2);
        int m = 0, me = -1;
        int64_t expm = 0;
        for (int q = 0; q < n; q++)
            if (q % 3 != 2) {
                if (q == r) me = m;
                m++;
                expm |= (int64_t)1 << q;
            }
        vs_comm* s2 = (vs_comm*)(void*)&dummy_marker;
        T_OK("split color none", vs_comm_split(t->c, none ? VS_COLOR_NONE : 7, 0, &s2));
        if (none) {
            VT_CHECK(s2 == NULL, "split: VS_COLOR_NONE on rank %d/%d did not give NULL", r, n);
        } else {
            VT_CHECK(s2 != NULL && s2 != (vs_comm*)(void*)&dummy_marker,
                     "split color none: rank %d/%d got no communicator", r, n);
            if (s2 && s2 != (vs_comm*)(void*)&dummy_marker) {
                VT_CHECK(vs_comm_size(s2) == m && vs_comm_rank(s2) == me,
                         "split color none: rank %d/%d size %d rank %d, expected %d %d", r, n,
                         vs_comm_size(s2), vs_comm_rank(s2), m, me);
                int64_t bit = (int64_t)1 << r, mask = 0;
                T_OK("split color none: all_reduce", vs_all_reduce(s2, &bit, &mask, 1, VS_I64, VS_OP_SUM, NULL));
                VT_CHECK(mask == expm, "split color none: reached 0x%llx, expected 0x%llx",
                         (unsigned long long)mask, (unsigned long long)expm);
                T_OK("free split color none", vs_comm_free(s2));
            }
        }
    }

    /* Everyone alone (color = rank) and everyone together (a copy). */
    {
        vs_comm* alone = NULL;
        T_OK("split alone", vs_comm_split(t->c, r, 0, &alone));
        VT_CHECK(alone != NULL, "split alone: no communicator");
        if (alone) {
            VT_CHECK(vs_comm_size(alone) == 1 && vs_comm_rank(alone) == 0,
                     "split alone: size %d rank %d", vs_comm_size(alone), vs_comm_rank(alone));
            int32_t v = r + 100, o = 0;
            T_OK("split alone: all_reduce", vs_all_reduce(alone, &v, &o, 1, VS_I32, VS_OP_SUM, NULL));
            VT_CHECK(o == r + 100, "split alone: all_reduce gave %d", (int)o);
            T_OK("free split alone", vs_comm_free(alone));
        }
        vs_comm* all = NULL;
        T_OK("split all", vs_comm_split(t->c, 3, 0, &all));
        VT_CHECK(all != NULL, "split all: no communicator");
        if (all) {
            VT_CHECK(vs_comm_size(all) == n && vs_comm_rank(all) == r, "split all: size %d rank %d",
                     vs_comm_size(all), vs_comm_rank(all));
            int32_t v = r, o = -1;
            T_OK("split all: all_reduce", vs_all_reduce(all, &v, &o, 1, VS_I32, VS_OP_MAX, NULL));
            VT_CHECK(o == n - 1, "split all: max gave %d", (int)o);
            T_OK("free split all", vs_comm_free(all));
        }
    }
}

/* ---- average over a split communicator ------------------------------------ */

/* VS_OP_AVG divides by the size of the communicator it runs on, not the world's.
   Two splits (parity; the first n-1 ranks and the last alone) give groups of sizes
   other than n. Floats: values whose sum is a multiple of the group size, so the
   average is an exact integer in every float dtype. Integers: sums that are not,
   negative ones included, truncating toward zero. All-reduce (out of place and in
   place), reduce to the last member, reduce-scatter. */
static int64_t savg_base(int w, size_t i, int salt) { return (int64_t)((w * 7 + (int)i * 3 + salt) % 41) - 20; }

/* Input of the member with world rank members[k] at index i, for dtype dt. */
static int64_t savg_in(vs_dtype dt, const int* members, int m, int k, size_t i, int salt)
{
    int64_t v = savg_base(members[k], i, salt);
    if (is_float(dt)) {
        if (k == m - 1) { /* the last member makes the sum a multiple of m */
            int64_t s = 0;
            for (int q = 0; q < m; q++) s += savg_base(members[q], i, salt);
            v -= ((s % m) + m) % m;
        }
        return v;
    }
    if (dt == VS_U8) return (v + 20) % 31;     /* [0, 30]: sums of 8 members stay below 256 */
    if (dt == VS_I32) return v * 10000019;     /* |sum| < 2^31 for up to 10 members */
    return v * (int64_t)100000000000007LL;     /* i64 */
}

static int64_t savg_ref(vs_dtype dt, const int* members, int m, size_t i, int salt)
{
    int64_t s = 0;
    for (int k = 0; k < m; k++) s += savg_in(dt, members, m, k, i, salt);
    return s / m; /* C division truncates toward zero; exact for the floats */
}

static void savg_fill(vs_dtype dt, void* buf, const int* members, int m, int k, size_t gofs, size_t count, int salt)
{
    for (size_t j = 0; j < count; j++) put_val(dt, buf, j, savg_in(dt, members, m, k, gofs + j, salt));
}

static void savg_one(const tctx* t, vs_comm* sub, const int* members, int m, const char* split, vs_dtype dt,
                     int salt)
{
    int k = vs_comm_rank(sub), r = t->rank;
    char what[200];
    /* all-reduce, out of place and in place */
    for (int ip = 0; ip < 2; ip++) {
        const size_t count = 1031;
        snprintf(what, sizeof what, "avg on split %s (size %d) all_reduce dt=%s %s rank=%d/%d", split, m, dtn(dt),
                 ip ? "in-place" : "out-of-place", r, t->n);
        void* send = ebuf(t, dt, count);
        void* recv = ip ? send : ebuf(t, dt, count);
        void* exp = ebuf(t, dt, count);
        savg_fill(dt, send, members, m, k, 0, count, salt);
        for (size_t i = 0; i < count; i++) put_val(dt, exp, i, savg_ref(dt, members, m, i, salt));
        T_OK(what, vs_all_reduce(sub, send, recv, count, dt, VS_OP_AVG, NULL));
        check_eq(what, dt, recv, exp, count + GUARD);
        xfree(t, exp);
        if (!ip) xfree(t, recv);
        xfree(t, send);
    }
    /* reduce to the last member */
    {
        const size_t count = 77;
        snprintf(what, sizeof what, "avg on split %s (size %d) reduce dt=%s rank=%d/%d", split, m, dtn(dt), r, t->n);
        void* send = ebuf(t, dt, count);
        void* recv = ebuf(t, dt, count);
        void* exp = ebuf(t, dt, count);
        savg_fill(dt, send, members, m, k, 0, count, salt);
        for (size_t i = 0; i < count; i++) put_val(dt, exp, i, savg_ref(dt, members, m, i, salt));
        T_OK(what, vs_reduce(sub, send, recv, count, dt, VS_OP_AVG, m - 1, NULL));
        if (k == m - 1) check_eq(what, dt, recv, exp, count + GUARD);
        xfree(t, exp);
        xfree(t, recv);
        xfree(t, send);
    }
    /* reduce-scatter: block q of the send buffer is global indices q*c.. */
    {
        const size_t c = 37, total = c * (size_t)m;
        snprintf(what, sizeof what, "avg on split %s (size %d) reduce_scatter dt=%s rank=%d/%d", split, m, dtn(dt),
                 r, t->n);
        void* send = ebuf(t, dt, total);
        void* recv = ebuf(t, dt, c);
        void* exp = ebuf(t, dt, c);
        savg_fill(dt, send, members, m, k, 0, total, salt);
        for (size_t i = 0; i < c; i++) put_val(dt, exp, i, savg_ref(dt, members, m, (size_t)k * c + i, salt));
        T_OK(what, vs_reduce_scatter(sub, send, recv, c, dt, VS_OP_AVG, NULL));
        check_eq(what, dt, recv, exp, c + GUARD);
        xfree(t, exp);
        xfree(t, recv);
        xfree(t, send);
    }
}

static void case_split_avg(tctx* t)
{
    int n = t->n, r = t->rank, salt = 9100;
    for (int s = 0; s < 2; s++) {
        /* s 0: color parity, key -rank (descending world rank); s 1: the first n-1
           ranks (rank order) and the last alone */
        int color = s == 0 ? r % 2 : r < n - 1 ? 0 : 1, key = s == 0 ? -r : r;
        int members[MAXR], m = 0;
        for (int q0 = 0; q0 < n; q0++) {
            int q = s == 0 ? n - 1 - q0 : q0;
            int cq = s == 0 ? q % 2 : q < n - 1 ? 0 : 1;
            if (cq == color) members[m++] = q;
        }
        const char* split = s == 0 ? "parity" : "first n-1";
        vs_comm* sub = NULL;
        T_OK(split, vs_comm_split(t->c, color, key, &sub));
        VT_CHECK(sub && vs_comm_size(sub) == m && members[vs_comm_rank(sub)] == r,
                 "split %s: rank %d/%d: size %d, expected %d", split, r, n, sub ? vs_comm_size(sub) : -1, m);
        if (!sub) continue; /* the split failed everywhere: nothing collective follows */
        for (int d = 0; d < NDTS; d++) savg_one(t, sub, members, m, split, DTS[d], salt++);
        T_OK("free split", vs_comm_free(sub));
    }
}

/* ---- determinism ---------------------------------------------------------- */

static float rnd_float(int rank, size_t i)
{
    uint64_t h = mix64(((uint64_t)(uint32_t)rank << 32) ^ (uint64_t)i ^ 0xabcdef12345ULL);
    float m = (float)(h & 0xFFFFFF) / 16777216.0f - 0.5f;
    int e = (int)((h >> 24) % 20u) - 10;
    return ldexpf(m, e);
}

/* The threads transport reduces f32 sums in one of two ways (_vs_t_reduce_range):
   the block loop (_vs_reduce_block), and, for all-reduces of at least
   VESCALE_NT_MIN bytes over 4 or more ranks whose destinations are 16-byte aligned
   (x86 with SSE2), streamed segments (_vs_reduce_stream_f32). Both must give the
   rank-order float sum (and that sum / n for VS_OP_AVG). Each build runs both: a
   receive buffer one float off 16-byte alignment keeps any size on the block loop;
   an aligned one of VESCALE_NT_MIN bytes or more takes the segments (in the _nt
   build, VESCALE_NT_MIN=0, that is every size). */
static void det_one(tctx* t, size_t count, int misalign, int full)
{
    int n = t->n, r = t->rank;
    char what[160];
    snprintf(what, sizeof what, "determinism count=%zu recv %s rank=%d/%d", count,
             misalign ? "misaligned (block loop)" : "aligned", r, n);
    char* sb = (char*)xalloc(t, count * sizeof(float) + 64);
    char* b1 = (char*)xalloc(t, (count + 1) * sizeof(float) + 64);
    char* b2 = (char*)xalloc(t, full ? (count + 1) * sizeof(float) + 64 : 64);
    char* ba = (char*)xalloc(t, (count + 1) * sizeof(float) + 64);
#define DET_AL(p) ((float*)(void*)((p) + (64 - (uintptr_t)(p) % 64) % 64))
    float* send = DET_AL(sb);
    float* r1 = DET_AL(b1) + misalign;
    float* r2 = full ? DET_AL(b2) + misalign : NULL;
    float* ra = DET_AL(ba) + misalign;
#undef DET_AL
    for (size_t i = 0; i < count; i++) send[i] = rnd_float(r, i);
    T_OK(what, vs_all_reduce(t->c, send, r1, count, VS_F32, VS_OP_SUM, NULL));
    if (full) T_OK(what, vs_all_reduce(t->c, send, r2, count, VS_F32, VS_OP_SUM, NULL));
    T_OK(what, vs_all_reduce(t->c, send, ra, count, VS_F32, VS_OP_AVG, NULL));

    size_t bad = 0, first = 0, nbad = 0, fb = 0, abad = 0, fa = 0;
    float fe = 0, fae = 0;
    for (size_t i = 0; i < count; i++) {
        double s = 0, a = 0;
        float acc = 0;
        for (int q = 0; q < n; q++) {
            float v = rnd_float(q, i);
            s += (double)v;
            a += fabs((double)v);
            acc = q ? acc + v : v;
        }
        /* close to the exact sum (not garbage), on every transport */
        if (!(fabs((double)r1[i] - s) <= a * (double)n * 1.2e-7 + 1e-30) ||
            !(fabs((double)ra[i] - s / n) <= a * 1.2e-7 + 1e-30)) {
            if (!bad) first = i;
            bad++;
        }
        if (!t->threads) continue;
        /* threads: bitwise the float sum in rank order 0..n-1, and that / n */
        float av = acc / (float)n;
        if (memcmp(&acc, &r1[i], sizeof acc) != 0 && !nbad++) fb = i, fe = acc;
        if (memcmp(&av, &ra[i], sizeof av) != 0 && !abad++) fa = i, fae = av;
    }
    VT_CHECK(bad == 0, "%s: %zu sums or averages off, first [%zu] = %.9g, avg %.9g", what, bad, first,
             (double)r1[first], (double)ra[first]);
    VT_CHECK(nbad == 0, "%s: f32 sum not in rank order: %zu of %zu differ, first [%zu] %.9g vs %.9g", what, nbad,
             count, fb, (double)r1[fb], (double)fe);
    VT_CHECK(abad == 0, "%s: f32 average not the rank-order sum / n: %zu of %zu differ, first [%zu] %.9g vs %.9g",
             what, abad, count, fa, (double)ra[fa], (double)fae);
    if (t->threads && full) {
        VT_CHECK(memcmp(r1, r2, count * sizeof(float)) == 0, "%s: two identical all-reduces differ", what);
        /* Bit-identical on every rank. */
        unsigned char* all = (unsigned char*)xalloc(t, count * sizeof(float) * (size_t)n);
        T_OK("determinism gather", vs_all_gather(t->c, r1, all, count * sizeof(float), VS_U8, NULL));
        for (int q = 0; q < n; q++)
            VT_CHECK(memcmp(all + (size_t)q * count * sizeof(float), r1, count * sizeof(float)) == 0,
                     "%s: rank %d's sum differs bitwise from rank %d's", what, q, r);
        xfree(t, all);
    }
    xfree(t, sb);
    xfree(t, b1);
    xfree(t, b2);
    xfree(t, ba);
}

static void case_determinism(tctx* t)
{
    /* the block loop, in every build */
    det_one(t, 4099, 1, 1);
    /* the streamed segments: all-reduces of VESCALE_NT_MIN bytes or more over 4 or
       more ranks (the block loop again below 4 ranks, or without SSE2) */
    size_t big = (size_t)VESCALE_NT_MIN / sizeof(float) + 4099;
    if (t->threads && t->n >= 4) {
        VT_CHECK(_VS_USE_NT(big * sizeof(float)), "determinism: %zu floats would not stream (VESCALE_NT_MIN %zu)",
                 big, (size_t)VESCALE_NT_MIN);
        det_one(t, big, 0, 0);
    }
}

/* ---- half types accumulate in float and round once ----------------------- */

/* One rank holds a large value (2048 for f16, 256 for bf16, where the spacing is
   2), the others add 0.25..1.0. Summed in float and rounded once, the small
   terms show; rounded to half after every addition they vanish (ties to even). */
static float half_in(vs_dtype dt, int q, int n, size_t i)
{
    float base = dt == VS_F16 ? 2048.0f : 256.0f;
    if ((size_t)q % (size_t)n == i % (size_t)n) return base * (float)(1 + (int)(i % 2));
    return (float)((q * 3 + (int)(i % 4)) % 4 + 1) * 0.25f;
}

static void case_half_round_once(tctx* t)
{
    int n = t->n, r = t->rank;
    const size_t count = 1031;
    static const vs_dtype hd[] = { VS_F16, VS_BF16 };
    static const vs_op hop[] = { VS_OP_SUM, VS_OP_AVG };
    for (int d = 0; d < 2; d++)
        for (int o = 0; o < 2; o++)
            for (int ip = 0; ip < 2; ip++) {
                vs_dtype dt = hd[d];
                vs_op op = hop[o];
                char what[200];
                snprintf(what, sizeof what, "half round-once all_reduce dt=%s op=%s %s rank=%d/%d",
                         dtn(dt), opn(op), ip ? "in-place" : "out-of-place", r, n);
                uint16_t* send = (uint16_t*)ebuf(t, dt, count);
                uint16_t* recv = ip ? send : (uint16_t*)ebuf(t, dt, count);
                uint16_t* exp = (uint16_t*)ebuf(t, dt, count);
                for (size_t i = 0; i < count; i++) {
                    float v = half_in(dt, r, n, i);
                    send[i] = dt == VS_F16 ? vs_f32_to_f16(v) : vs_f32_to_bf16(v);
                    float acc = 0; /* exact: every partial sum fits a float */
                    for (int q = 0; q < n; q++) acc += half_in(dt, q, n, i);
                    if (op == VS_OP_AVG) acc /= (float)n;
                    exp[i] = dt == VS_F16 ? vs_f32_to_f16(acc) : vs_f32_to_bf16(acc);
                }
                T_OK(what, vs_all_reduce(t->c, send, recv, count, dt, op, NULL));
                check_eq(what, dt, recv, exp, count + GUARD);
                snprintf(what, sizeof what, "half round-once reduce_scatter dt=%s op=%s rank=%d/%d",
                         dtn(dt), opn(op), r, n);
                if (!ip) xfree(t, recv);
                xfree(t, send);
                /* reduce-scatter: block j of every rank's send is the pattern at j*c+k */
                size_t c = 67, total = (size_t)n * c;
                send = (uint16_t*)ebuf(t, dt, total);
                recv = (uint16_t*)ebuf(t, dt, c);
                for (size_t i = 0; i < total; i++) {
                    float v = half_in(dt, r, n, i);
                    send[i] = dt == VS_F16 ? vs_f32_to_f16(v) : vs_f32_to_bf16(v);
                }
                for (size_t k = 0; k < c; k++) {
                    size_t i = (size_t)r * c + k;
                    float acc = 0;
                    for (int q = 0; q < n; q++) acc += half_in(dt, q, n, i);
                    if (op == VS_OP_AVG) acc /= (float)n;
                    exp[k] = dt == VS_F16 ? vs_f32_to_f16(acc) : vs_f32_to_bf16(acc);
                }
                memset(exp + c, SENT, GUARD * 2);
                T_OK(what, vs_reduce_scatter(t->c, send, recv, c, dt, op, NULL));
                check_eq(what, dt, recv, exp, c + GUARD);
                xfree(t, recv);
                xfree(t, send);
                xfree(t, exp);
            }
}

/* ---- argument errors ------------------------------------------------------ */

static void case_errors(tctx* t)
{
    int n = t->n;
    float a[8] = { 0 }, b[8] = { 0 };
    T_EXPECT("invalid dtype", vs_all_reduce(t->c, a, b, 4, VS_DTYPE_INVALID, VS_OP_SUM, NULL), VS_ERR_INVALID);
    T_EXPECT("dtype out of range", vs_all_reduce(t->c, a, b, 4, VS_DTYPE_COUNT, VS_OP_SUM, NULL), VS_ERR_INVALID);
    T_EXPECT("op out of range", vs_all_reduce(t->c, a, b, 4, VS_F32, VS_OP_COUNT, NULL), VS_ERR_INVALID);
    T_EXPECT("reduce root = n", vs_reduce(t->c, a, b, 4, VS_F32, VS_OP_SUM, n, NULL), VS_ERR_INVALID);
    T_EXPECT("reduce root = -1", vs_reduce(t->c, a, b, 4, VS_F32, VS_OP_SUM, -1, NULL), VS_ERR_INVALID);
    T_EXPECT("broadcast root = n", vs_broadcast(t->c, a, b, 4, VS_F32, n, NULL), VS_ERR_INVALID);
    T_EXPECT("send peer = n", vs_send(t->c, a, 4, VS_F32, n, NULL), VS_ERR_INVALID);
    T_EXPECT("recv peer = -1", vs_recv(t->c, b, 4, VS_F32, -1, NULL), VS_ERR_INVALID);
    T_EXPECT("NULL comm", vs_all_reduce(NULL, a, b, 4, VS_F32, VS_OP_SUM, NULL), VS_ERR_NULL);
    T_EXPECT("NULL send", vs_all_reduce(t->c, NULL, b, 4, VS_F32, VS_OP_SUM, NULL), VS_ERR_NULL);
    T_EXPECT("NULL recv", vs_all_reduce(t->c, a, NULL, 4, VS_F32, VS_OP_SUM, NULL), VS_ERR_NULL);
    T_EXPECT("NULL counts", vs_all_gatherv(t->c, a, b, NULL, NULL, VS_F32, NULL), VS_ERR_NULL);
    T_EXPECT("NULL counts", vs_reduce_scatterv(t->c, a, b, NULL, VS_F32, VS_OP_SUM, NULL), VS_ERR_NULL);
    T_EXPECT("vs_wait(NULL)", vs_wait(NULL), VS_ERR_NULL);
    {
        int done = 0;
        T_EXPECT("vs_test(NULL)", vs_test(NULL, &done), VS_ERR_NULL);
    }
    T_EXPECT("group_end without start", vs_group_end(t->c, NULL), VS_ERR_STATE);
    {
        vs_work* wk = NULL;
        T_OK("group for async check", vs_group_start(t->c));
        T_EXPECT("async inside a group",
                 vs_all_reduce(t->c, a, b, 4, VS_F32, VS_OP_SUM, &wk), VS_ERR_STATE);
        T_OK("group for async check", vs_group_end(t->c, NULL));
        if (wk) (void)vs_wait(wk);
    }
    if (n > 1) {
        vs_result r = vs_all_to_all(t->c, a, a, 2, VS_F32, NULL);
        VT_CHECK(r != VS_OK, "all_to_all in place (send == recv) was accepted");
    }

    /* Nothing above broke the communicator. */
    int32_t v = t->rank + 1, o = 0;
    T_OK("all_reduce after errors", vs_all_reduce(t->c, &v, &o, 1, VS_I32, VS_OP_SUM, NULL));
    VT_CHECK(o == n * (n + 1) / 2, "all_reduce after errors gave %d", (int)o);
}

/* ---- local: dtypes and conversions --------------------------------------- */

static void case_dtype(tctx* t)
{
    (void)t;
    static const struct { vs_dtype dt; size_t size; } sz[] = {
        { VS_F32, 4 }, { VS_F16, 2 }, { VS_BF16, 2 }, { VS_F64, 8 },
        { VS_I32, 4 }, { VS_I64, 8 }, { VS_U8, 1 }, { VS_DTYPE_INVALID, 0 } };
    for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++)
        VT_CHECK(vs_dtype_size(sz[i].dt) == sz[i].size, "vs_dtype_size(%s) = %zu", dtn(sz[i].dt),
                 vs_dtype_size(sz[i].dt));
    VT_CHECK(strcmp(vs_dtype_name(VS_F32), "f32") == 0, "vs_dtype_name(VS_F32)");
    VT_CHECK(strcmp(vs_dtype_name(VS_BF16), "bf16") == 0, "vs_dtype_name(VS_BF16)");
    VT_CHECK(strcmp(vs_dtype_name(VS_DTYPE_COUNT), "invalid") == 0, "vs_dtype_name(invalid)");

    static const struct { float f; uint16_t h; } f16[] = {
        { 1.0f, 0x3C00 }, { -2.0f, 0xC000 }, { 0.5f, 0x3800 }, { 65504.0f, 0x7BFF },
        { 0.0f, 0x0000 }, { -8.0f, 0xC800 }, { 1.0f / 3.0f, 0x3555 }, { 65520.0f, 0x7C00 },
        { 5.9604644775390625e-08f, 0x0001 },  /* 2^-24, smallest subnormal */
        { 1.00048828125f, 0x3C00 },           /* 1 + 2^-11: tie, to even */
        { 1.00146484375f, 0x3C02 },           /* 1 + 3*2^-11: tie, to even */
        { 2.3333333f, 0x40AB } };
    for (size_t i = 0; i < sizeof f16 / sizeof f16[0]; i++)
        VT_CHECK(vs_f32_to_f16(f16[i].f) == f16[i].h, "vs_f32_to_f16(%.9g) = 0x%04x, expected 0x%04x",
                 (double)f16[i].f, (unsigned)vs_f32_to_f16(f16[i].f), (unsigned)f16[i].h);
    VT_CHECK(vs_f32_to_f16(-0.0f) == 0x8000, "f16(-0)");
    VT_CHECK(vs_f32_to_f16(INFINITY) == 0x7C00, "f16(inf)");
    {
        uint16_t h = vs_f32_to_f16(NAN);
        VT_CHECK((h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0, "f16(nan) = 0x%04x", (unsigned)h);
    }
    static const struct { float f; uint16_t h; } bf[] = {
        { 1.0f, 0x3F80 }, { -8.0f, 0xC100 }, { 1.0f / 3.0f, 0x3EAB },
        { 1.00390625f, 0x3F80 }, /* 1 + 2^-8: tie, to even */
        { 1.01171875f, 0x3F82 }, /* 1 + 3*2^-8: tie, to even */
        { 0.0f, 0x0000 } };
    for (size_t i = 0; i < sizeof bf / sizeof bf[0]; i++)
        VT_CHECK(vs_f32_to_bf16(bf[i].f) == bf[i].h, "vs_f32_to_bf16(%.9g) = 0x%04x, expected 0x%04x",
                 (double)bf[i].f, (unsigned)vs_f32_to_bf16(bf[i].f), (unsigned)bf[i].h);
    VT_CHECK(vs_f32_to_bf16(INFINITY) == 0x7F80, "bf16(inf)");
    {
        uint16_t h = vs_f32_to_bf16(NAN);
        VT_CHECK((h & 0x7F80) == 0x7F80 && (h & 0x007F) != 0, "bf16(nan) = 0x%04x", (unsigned)h);
    }
    VT_CHECK(vs_f16_to_f32(0x3C00) == 1.0f, "f16 0x3C00");
    VT_CHECK(vs_f16_to_f32(0x0001) == 5.9604644775390625e-08f, "f16 0x0001");
    VT_CHECK(vs_f16_to_f32(0x3555) == 0.333251953125f, "f16 0x3555");
    VT_CHECK(isinf(vs_f16_to_f32(0xFC00)) && vs_f16_to_f32(0xFC00) < 0, "f16 -inf");
    VT_CHECK(vs_bf16_to_f32(0xC100) == -8.0f, "bf16 0xC100");
    for (int v = -256; v <= 256; v++) {
        VT_CHECK(vs_f16_to_f32(vs_f32_to_f16((float)v)) == (float)v, "f16 round trip %d", v);
        VT_CHECK(vs_bf16_to_f32(vs_f32_to_bf16((float)v)) == (float)v, "bf16 round trip %d", v);
    }
    VT_CHECK(vs_transport_available(VS_TRANSPORT_THREADS) == 1, "threads transport available");
#ifdef VESCALE_MPI
    VT_CHECK(vs_transport_available(VS_TRANSPORT_MPI) == 1, "MPI transport available");
#else
    VT_CHECK(vs_transport_available(VS_TRANSPORT_MPI) == 0, "MPI transport not compiled in");
#endif
    VT_CHECK(vs_version() == VESCALE_VERSION_NUMBER, "vs_version");
    VT_CHECK(strcmp(vs_result_string(VS_ERR_TIMEOUT), "VS_ERR_TIMEOUT") == 0, "vs_result_string");
}

/* The raw handles (vs_comm_nccl, vs_comm_mpi): on threads neither exists (NULL,
   and a message naming the transport); on MPI the MPI_Comm is c's, and the
   trainer's own MPI_Allreduce on it between two vescale all-reduces gives the
   right sums, in order with them. */
static void case_raw_handles(tctx* t)
{
    vs_comm* c = t->c;
    VT_ERR(vs_comm_nccl(c) == NULL ? VS_ERR_UNSUPPORTED : VS_OK, VS_ERR_UNSUPPORTED,
           t->threads ? "threads communicator" : "mpi communicator");
    VT_CHECK(strstr(vs_last_error(), "vs_comm_nccl") && strstr(vs_last_error(), "ncclComm_t"), "%s", vs_last_error());
    void* nc = (void*)1;
    VT_ERR(vs_comm_nccl_begin(c, &nc), VS_ERR_UNSUPPORTED, t->threads ? "threads" : "mpi");
    VT_CHECK(nc == NULL, "vs_comm_nccl_begin left its output %p", nc);
    VT_ERR(vs_comm_nccl_end(c), VS_ERR_UNSUPPORTED, "vs_comm_nccl_end");
    VT_ERR(vs_comm_nccl_begin(c, NULL), VS_ERR_NULL, "nccl_comm");
    VT_ERR(vs_comm_nccl(NULL) == NULL ? VS_ERR_NULL : VS_OK, VS_ERR_NULL, "vs_comm_nccl");
    VT_ERR(vs_comm_mpi(NULL) == NULL ? VS_ERR_NULL : VS_OK, VS_ERR_NULL, "vs_comm_mpi");
    VT_CHECK(vs_comm_stream(c) == NULL, "a host transport has no stream");
    if (t->threads) {
        VT_ERR(vs_comm_mpi(c) == NULL ? VS_ERR_UNSUPPORTED : VS_OK, VS_ERR_UNSUPPORTED, "threads communicator");
        VT_CHECK(strstr(vs_last_error(), "MPI_Comm") != NULL, "%s", vs_last_error());
        return;
    }
#ifdef VESCALE_MPI
    float x[3] = {(float)t->rank, 1.0f, 2.0f}, want0 = (float)(t->n * (t->n - 1) / 2);
    const MPI_Comm* pm = (const MPI_Comm*)vs_comm_mpi(c);
    VT_CHECK(pm != NULL, "vs_comm_mpi: %s", vs_last_error());
    if (!pm) return;
    int mr = -1, mn = -1;
    MPI_Comm_rank(*pm, &mr);
    MPI_Comm_size(*pm, &mn);
    VT_CHECK(mr == vs_comm_rank(c) && mn == vs_comm_size(c), "MPI_Comm rank %d of %d, vs_comm %d of %d", mr, mn,
             vs_comm_rank(c), vs_comm_size(c));
    vs_work* wk = NULL;
    VT_OK(vs_all_reduce(c, x, x, 1, VS_F32, VS_OP_SUM, &wk)); /* waited before the trainer's own call */
    VT_OK(vs_wait(wk));
    MPI_Allreduce(MPI_IN_PLACE, x + 1, 1, MPI_FLOAT, MPI_SUM, *pm); /* the trainer's own, between two of ours */
    VT_OK(vs_all_reduce(c, x + 2, x + 2, 1, VS_F32, VS_OP_MAX, NULL));
    VT_CHECK(x[0] == want0 && x[1] == (float)t->n && x[2] == 2.0f, "sums %g %g %g, want %g %g 2", x[0], x[1], x[2],
             want0, (float)t->n);
#endif
}

/* ---- drivers -------------------------------------------------------------- */

typedef void (*case_fn)(tctx*);
static const struct {
    const char* name;
    case_fn fn;
} CASES[] = {
    { "all_reduce", case_all_reduce },
    { "reduce", case_reduce },
    { "broadcast", case_broadcast },
    { "all_gather", case_all_gather },
    { "all_gatherv", case_all_gatherv },
    { "reduce_scatter", case_reduce_scatter },
    { "reduce_scatterv", case_reduce_scatterv },
    { "all_to_all", case_all_to_all },
    { "all_to_allv", case_all_to_allv },
    { "all_to_allv_packed", case_all_to_allv_packed },
    { "barrier", case_barrier },
    { "send_recv", case_send_recv },
    { "group", case_group },
    { "async", case_async },
    { "split", case_split },
    { "split_avg", case_split_avg },
    { "determinism", case_determinism },
    { "half_round_once", case_half_round_once },
    { "errors", case_errors },
    { "raw_handles", case_raw_handles },
};
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

#define TIMEOUT_S 60.0 /* a hang becomes VS_ERR_TIMEOUT instead of 300 s */

#ifndef VESCALE_MPI
typedef struct job {
    case_fn fn;
} job;

static int rank_entry(vs_world* w, void* arg)
{
    const job* j = (const job*)arg;
    tctx t;
    t.w = w;
    t.c = vs_world_comm(w);
    t.rank = vs_world_rank(w);
    t.n = vs_world_size(w);
    t.threads = 1;
    t.one_host = 1;
    VT_CHECK(t.c != NULL, "vs_world_comm gave NULL");
    if (!t.c) return 1;
    VT_CHECK(vs_comm_rank(t.c) == t.rank && vs_comm_size(t.c) == t.n,
             "comm rank/size %d/%d != world %d/%d", vs_comm_rank(t.c), vs_comm_size(t.c), t.rank,
             t.n);
    j->fn(&t);
    return 0;
}

int main(void)
{
    static const int NR[] = { 1, 2, 3, 4, 8 };
    (void)vt_skip; /* used by the MPI build only */
    alarm(1800); /* last-resort watchdog against a hang no timeout catches */
    {
        tctx t;
        memset(&t, 0, sizeof t);
        VT_CASE("dtype/local", case_dtype(&t));
    }
    for (int k = 0; k < NCASES; k++)
        for (size_t ni = 0; ni < sizeof NR / sizeof NR[0]; ni++) {
            char name[96];
            snprintf(name, sizeof name, "%s/threads/n=%d", CASES[k].name, NR[ni]);
            job j;
            j.fn = CASES[k].fn;
            vs_launch_desc d;
            memset(&d, 0, sizeof d);
            d.nranks = NR[ni];
            d.transport = VS_TRANSPORT_THREADS;
            d.timeout_s = TIMEOUT_S;
            vt_begin(name);
            vs_result r = vs_launch_ex(&d, rank_entry, &j);
            VT_CHECK(r == VS_OK, "vs_launch_ex(%d ranks): %d %s: %s", NR[ni], r, vs_result_string(r),
                     vs_last_error());
            vt_end(name);
        }
    return vt_summary();
}

#else /* VESCALE_MPI */

int main(void)
{
    alarm(1800);
    vs_world* w = NULL;
    vs_world_desc wd;
    memset(&wd, 0, sizeof wd);
    wd.transport = VS_TRANSPORT_MPI;
    wd.timeout_s = TIMEOUT_S;
    vs_result r = vs_world_init(&wd, &w);
    if (r != VS_OK || !w) {
        fprintf(stderr, "vs_world_init(MPI): %s: %s\n", vs_result_string(r), vs_last_error());
        return 1;
    }
    tctx t;
    t.w = w;
    t.c = vs_world_comm(w);
    t.rank = vs_world_rank(w);
    t.n = vs_world_size(w);
    t.threads = 0;
    {
        /* Barrier timing compares clocks across ranks: only on one host. */
        MPI_Comm node;
        int nn = 0;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        MPI_Comm_size(node, &nn);
        MPI_Comm_free(&node);
        t.one_host = nn == t.n;
    }
    int rank = t.rank;
    if (t.n > MAXR || !t.c) {
        if (rank == 0) {
            vt_skip("collectives/mpi", t.c ? "more ranks than the test handles" : "no world comm");
            vt_summary();
        }
        vs_world_free(w);
        return t.c ? 0 : 1;
    }
    int local_failed = 0;
    for (int k = -1; k < NCASES; k++) {
        char name[96];
        snprintf(name, sizeof name, "%s/mpi/n=%d", k < 0 ? "dtype" : CASES[k].name, t.n);
        if (rank == 0) vt_begin(name);
        int before = __atomic_load_n(&vt_failures, __ATOMIC_SEQ_CST);
        if (k < 0) case_dtype(&t);
        else CASES[k].fn(&t);
        int mine = __atomic_load_n(&vt_failures, __ATOMIC_SEQ_CST) != before, any = 0;
        local_failed |= mine;
        /* Plain MPI, so a broken library cannot hide failures of other ranks. */
        MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (rank == 0) {
            VT_CHECK(!any || mine, "%s failed on another rank (see its stderr)", name);
            vt_end(name);
        }
    }
    int rc = rank == 0 ? vt_summary() : local_failed;
    r = vs_world_free(w);
    if (r != VS_OK) {
        fprintf(stderr, "vs_world_free: %s: %s\n", vs_result_string(r), vs_last_error());
        rc = 1;
    }
    return rc;
}
#endif
