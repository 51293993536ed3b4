/* test_layout.c - layouts and redistribute (the `// >>layout` section of vescale_mesh.h).

   One source, two modes (as tests/test_mesh.c):
     - threads transport (default): every case runs on its own vs_launch job, one
       thread per mesh rank;
     - -DVESCALE_MPI (mpicc, run under mpirun -np N): one MPI world; the cases whose
       mesh has N ranks run (others are skipped silently), a failure on any rank is
       counted on rank 0 through a plain MPI_Allreduce, and only rank 0 prints.

   Every expectation is computed here from the rules, not by the library:
     - Shard(d) chunks tensor dim d like torch.chunk: chunk size c = ceil(n/k), the
       chunks laid end to end from 0; chunk i past the last one is empty (at n).
       Mesh dims shard in order, outer first, each chunking the chunk before.
     - A rank's shard is its box of the full row-major tensor, stored row-major.
     - Partial(op): the value is op over that mesh dim's coordinates.
   Source data: element g of the full tensor has value v(g) (an integer, exact in
   every dtype used). A source with Partial dims splits it: the Partial(sum) and
   Partial(avg) coordinates hold integer parts that add up to v (times the avg
   sizes), and every Partial(max)/(min) coordinate but one designated (per element)
   is lowered/raised by a positive amount. Such data reduces to v whatever order the
   partial dims are combined in. Results are checked element by element against v;
   a Partial destination is checked by gathering every rank's output (shared
   pointers under threads, MPI_Gatherv under MPI) and combining the partial
   coordinates on rank 0, innermost dim first and outermost first, both of which
   must give v for every replica. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "tests/vs_test.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXR 8    /* the largest mesh here has 8 ranks */
#define GUARD 16  /* elements past each output that must stay untouched */
#define SENT 0x5A /* the byte outputs are filled with before a call */

/* ------------------------------------------------------------------------- */
/* Mesh and layout model                                                     */

typedef struct tmesh {
    int nd;
    int shape[VS_MESH_MAX_DIMS];
    int n;
} tmesh;

static tmesh tmesh_of(int nd, const int* shape)
{
    tmesh M;
    memset(&M, 0, sizeof M);
    M.nd = nd;
    M.n = 1;
    for (int k = 0; k < nd; k++) {
        M.shape[k] = shape[k];
        M.n *= shape[k];
    }
    return M;
}

static void tmesh_text(const tmesh* M, char* buf, size_t cap)
{
    size_t l = (size_t)snprintf(buf, cap, "(");
    for (int k = 0; k < M->nd && l < cap; k++) l += (size_t)snprintf(buf + l, cap - l, "%s%d", k ? "," : "", M->shape[k]);
    if (l < cap) snprintf(buf + l, cap - l, ")");
}

static void decompose(int nd, const int* shape, int r, int* coord)
{
    for (int d = nd - 1; d >= 0; d--) {
        coord[d] = r % shape[d];
        r /= shape[d];
    }
}

static int compose(int nd, const int* shape, const int* coord)
{
    int r = 0;
    for (int d = 0; d < nd; d++) r = r * shape[d] + coord[d];
    return r;
}

enum { KR = 0, KS = 1, KP = 2 };
typedef struct tlay {
    int nd;
    int kind[VS_MESH_MAX_DIMS];
    int dim[VS_MESH_MAX_DIMS];
    vs_op op[VS_MESH_MAX_DIMS];
} tlay;

/* Compact notation of the tests: space-separated R, S<d>, Ps (sum), Pa (avg),
   Px (max), Pn (min), one per mesh dim. */
static int tl_parse(int nd, const char* s, tlay* L)
{
    memset(L, 0, sizeof *L);
    L->nd = nd;
    int k = 0;
    for (;;) {
        while (*s == ' ') s++;
        if (!*s) break;
        if (k >= nd) return 0;
        if (*s == 'R') {
            L->kind[k] = KR;
            s++;
        } else if (*s == 'S') {
            char* e = NULL;
            L->kind[k] = KS;
            L->dim[k] = (int)strtol(s + 1, &e, 10);
            if (e == s + 1) return 0;
            s = e;
        } else if (*s == 'P') {
            L->kind[k] = KP;
            switch (s[1]) {
            case 's': L->op[k] = VS_OP_SUM; break;
            case 'a': L->op[k] = VS_OP_AVG; break;
            case 'x': L->op[k] = VS_OP_MAX; break;
            case 'n': L->op[k] = VS_OP_MIN; break;
            default: return 0;
            }
            s += 2;
        } else {
            return 0;
        }
        k++;
    }
    return k == nd;
}

static tlay tl_must(int nd, const char* s)
{
    tlay L;
    if (!tl_parse(nd, s, &L)) {
        fprintf(stderr, "test bug: bad compact layout \"%s\" for %d mesh dims\n", s, nd);
        exit(2);
    }
    return L;
}

static const char* op_text(vs_op op)
{
    switch (op) {
    case VS_OP_SUM: return "sum";
    case VS_OP_AVG: return "avg";
    case VS_OP_MAX: return "max";
    case VS_OP_MIN: return "min";
    default: return "?";
    }
}

/* The documented text form: "[Shard(0), Replicate, Partial(sum)]". */
static void tl_text(const tlay* L, char* buf, size_t cap)
{
    size_t l = (size_t)snprintf(buf, cap, "[");
    for (int k = 0; k < L->nd && l < cap; k++) {
        const char* sep = k ? ", " : "";
        if (L->kind[k] == KS) l += (size_t)snprintf(buf + l, cap - l, "%sShard(%d)", sep, L->dim[k]);
        else if (L->kind[k] == KP) l += (size_t)snprintf(buf + l, cap - l, "%sPartial(%s)", sep, op_text(L->op[k]));
        else l += (size_t)snprintf(buf + l, cap - l, "%sReplicate", sep);
    }
    if (l < cap) snprintf(buf + l, cap - l, "]");
}

/* The library's struct, filled field by field. */
static vs_layout tl_vs(vs_mesh* m, const tlay* L)
{
    vs_layout out;
    memset(&out, 0, sizeof out);
    out.mesh = m;
    for (int k = 0; k < L->nd; k++) {
        out.p[k].kind = L->kind[k] == KS ? VS_PLACE_SHARD : L->kind[k] == KP ? VS_PLACE_PARTIAL : VS_PLACE_REPLICATE;
        if (L->kind[k] == KS) out.p[k].dim = L->dim[k];
        if (L->kind[k] == KP) out.p[k].op = L->op[k];
    }
    return out;
}

/* 1 when a parsed vs_layout says the same as L (Partial's default op counts as sum). */
static int tl_same(const tlay* L, const vs_layout* v)
{
    for (int k = 0; k < L->nd; k++) {
        const vs_placement* p = &v->p[k];
        if (L->kind[k] == KR && p->kind != VS_PLACE_REPLICATE) return 0;
        if (L->kind[k] == KS && (p->kind != VS_PLACE_SHARD || p->dim != L->dim[k])) return 0;
        if (L->kind[k] == KP) {
            vs_op op = p->op == VS_OP_DEFAULT ? VS_OP_SUM : p->op;
            if (p->kind != VS_PLACE_PARTIAL || op != L->op[k]) return 0;
        }
    }
    return 1;
}

static int tl_fits(const tlay* L, int tnd)
{
    for (int k = 0; k < L->nd; k++)
        if (L->kind[k] == KS && L->dim[k] >= tnd) return 0;
    return 1;
}

static int tl_has(const tlay* L, int kind, int op /* -1: any */)
{
    for (int k = 0; k < L->nd; k++)
        if (L->kind[k] == kind && (op < 0 || (int)L->op[k] == op)) return 1;
    return 0;
}

/* Every layout whose placements come from the compact tokens `alpha`. */
static int tl_product(int nd, const char* const* alpha, int na, tlay* out, int cap)
{
    int total = 1;
    for (int k = 0; k < nd; k++) total *= na;
    int n = 0;
    for (int i = 0; i < total && n < cap; i++) {
        char buf[128] = "";
        int r = i, digit[VS_MESH_MAX_DIMS]; /* token of dim k: digit k of i in base na */
        for (int k = nd - 1; k >= 0; k--) {
            digit[k] = r % na;
            r /= na;
        }
        size_t l = 0;
        for (int k = 0; k < nd; k++) l += (size_t)snprintf(buf + l, sizeof buf - l, "%s ", alpha[digit[k]]);
        out[n++] = tl_must(nd, buf);
    }
    return n;
}

/* ---- torch.chunk and boxes ---- */

/* Chunk i of n elements cut like torch.chunk(n, m): chunks of ceil(n/m) from the
   front, the last one short; a chunk past the last is empty at n. */
static void ref_chunk(int64_t n, int m, int i, int64_t* start, int64_t* len)
{
    int64_t c = (n + m - 1) / m;
    int idx = 0;
    if (c > 0)
        for (int64_t s = 0; s < n; s += c, idx++)
            if (idx == i) {
                *start = s;
                *len = s + c <= n ? c : n - s;
                return;
            }
    *start = n;
    *len = 0;
}

static void ref_box(const tmesh* M, const tlay* L, int tnd, const int64_t* shape, int mesh_rank, int64_t* ls,
                    int64_t* off)
{
    int coord[VS_MESH_MAX_DIMS];
    decompose(M->nd, M->shape, mesh_rank, coord);
    for (int d = 0; d < tnd; d++) ls[d] = shape[d], off[d] = 0;
    for (int k = 0; k < M->nd; k++) {
        if (L->kind[k] != KS) continue;
        int d = L->dim[k];
        int64_t s, l;
        ref_chunk(ls[d], M->shape[k], coord[k], &s, &l);
        off[d] += s;
        ls[d] = l;
    }
}

static int64_t numel_of(const int64_t* s, int nd)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= s[d];
    return n;
}

/* Global row-major index of every element of the box, in the box's row-major order. */
static void box_globals(int tnd, const int64_t* shape, const int64_t* ls, const int64_t* off, int64_t* g)
{
    int64_t ne = numel_of(ls, tnd), idx[VS_TENSOR_MAX_DIMS] = {0};
    for (int64_t e = 0; e < ne; e++) {
        int64_t flat = 0;
        for (int d = 0; d < tnd; d++) flat = flat * shape[d] + off[d] + idx[d];
        g[e] = flat;
        for (int d = tnd - 1; d >= 0; d--) {
            if (++idx[d] < ls[d]) break;
            idx[d] = 0;
        }
    }
}

static void shape_text(int tnd, const int64_t* s, char* buf, size_t cap)
{
    size_t l = (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < tnd && l < cap; d++) l += (size_t)snprintf(buf + l, cap - l, "%s%lld", d ? "," : "", (long long)s[d]);
    if (l < cap) snprintf(buf + l, cap - l, ")");
}

/* ---- values ---- */

static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t hsh(uint64_t a, uint64_t b, uint64_t c) { return mix64(a ^ mix64(b ^ mix64(c))); }

typedef struct vmod {
    int small; /* u8/f16/bf16: values in [1, 160], parts non-negative */
    uint32_t seed;
} vmod;

static int64_t base_val(const vmod* v, int64_t g)
{
    uint64_t h = hsh((uint64_t)g, v->seed, 1);
    return v->small ? 40 + (int64_t)(h % 97) : (int64_t)(h % 2001) - 1000;
}

static int64_t split_part(const vmod* v, int64_t g, int i)
{
    uint64_t h = hsh((uint64_t)g, v->seed, 100 + (uint64_t)i);
    return v->small ? 3 + (int64_t)(h % 3) : (int64_t)(h % 2001) - 1000;
}

/* The value mesh coordinate `coord` holds of element g in a source laid out as L. */
static int64_t src_val(const tmesh* M, const tlay* L, const int* coord, const vmod* v, int64_t g)
{
    int64_t P = 1, idx = 0, avgmul = 1;
    for (int k = 0; k < M->nd; k++)
        if (L->kind[k] == KP && (L->op[k] == VS_OP_SUM || L->op[k] == VS_OP_AVG)) {
            idx = idx * M->shape[k] + coord[k];
            P *= M->shape[k];
            if (L->op[k] == VS_OP_AVG) avgmul *= M->shape[k];
        }
    int64_t total = base_val(v, g) * avgmul, x = total;
    if (P > 1) {
        if (idx) {
            x = split_part(v, g, (int)idx);
        } else {
            for (int i = 1; i < P; i++) x -= split_part(v, g, i);
        }
    }
    for (int k = 0; k < M->nd; k++) {
        if (L->kind[k] != KP || (L->op[k] != VS_OP_MAX && L->op[k] != VS_OP_MIN)) continue;
        int chosen = (int)(((uint64_t)g + 3u * (uint64_t)k + v->seed) % (uint64_t)M->shape[k]);
        int64_t delta = v->small ? 1 : 1 + (int64_t)(hsh((uint64_t)g, (uint64_t)k, 7) % 13);
        if (coord[k] != chosen) x += L->op[k] == VS_OP_MAX ? -delta : delta;
    }
    return x;
}

/* ---- dtypes (own encodings; values are integers or exact binary fractions) ---- */

static size_t esize(vs_dtype dt)
{
    switch (dt) {
    case VS_F64: case VS_I64: return 8;
    case VS_F32: case VS_I32: return 4;
    case VS_F16: case VS_BF16: return 2;
    case VS_U8: return 1;
    default: return 0;
    }
}

static const char* dt_text(vs_dtype dt)
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

static int dt_small(vs_dtype dt) { return dt == VS_U8 || dt == VS_F16 || dt == VS_BF16; }
static int dt_int(vs_dtype dt) { return dt == VS_U8 || dt == VS_I32 || dt == VS_I64; }

static uint16_t f16_of_int(int64_t x) /* |x| <= 2048 */
{
    if (x == 0) return 0;
    uint16_t sign = x < 0 ? 0x8000 : 0;
    uint64_t a = (uint64_t)(x < 0 ? -x : x);
    int e = 0;
    while ((a >> (e + 1)) != 0) e++;
    uint16_t mant = (uint16_t)(((a << 10) >> e) & 0x3ff);
    return (uint16_t)(sign | (uint16_t)((e + 15) << 10) | mant);
}

static double f16_val(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return s ? -v : v;
}

static void put(vs_dtype dt, void* p, int64_t i, int64_t x)
{
    switch (dt) {
    case VS_F32: ((float*)p)[i] = (float)x; break;
    case VS_F64: ((double*)p)[i] = (double)x; break;
    case VS_I32: ((int32_t*)p)[i] = (int32_t)x; break;
    case VS_I64: ((int64_t*)p)[i] = x; break;
    case VS_U8: ((uint8_t*)p)[i] = (uint8_t)x; break;
    case VS_F16: ((uint16_t*)p)[i] = f16_of_int(x); break;
    case VS_BF16: {
        float f = (float)x;
        uint32_t u;
        memcpy(&u, &f, 4);
        ((uint16_t*)p)[i] = (uint16_t)(u >> 16); /* exact for |x| <= 256 */
        break;
    }
    default: break;
    }
}

static double get(vs_dtype dt, const void* p, int64_t i)
{
    switch (dt) {
    case VS_F32: return ((const float*)p)[i];
    case VS_F64: return ((const double*)p)[i];
    case VS_I32: return ((const int32_t*)p)[i];
    case VS_I64: return (double)((const int64_t*)p)[i];
    case VS_U8: return ((const uint8_t*)p)[i];
    case VS_F16: return f16_val(((const uint16_t*)p)[i]);
    case VS_BF16: {
        uint32_t u = (uint32_t)((const uint16_t*)p)[i] << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    default: return NAN;
    }
}

/* Fills a source shard: mesh rank r's box of layout L. */
static void fill_src(const tmesh* M, const tlay* L, int r, const vmod* v, vs_dtype dt, int tnd, const int64_t* shape,
                     void* buf)
{
    int64_t ls[VS_TENSOR_MAX_DIMS], off[VS_TENSOR_MAX_DIMS];
    int coord[VS_MESH_MAX_DIMS];
    decompose(M->nd, M->shape, r, coord);
    ref_box(M, L, tnd, shape, r, ls, off);
    int64_t ne = numel_of(ls, tnd);
    int64_t* g = (int64_t*)malloc(sizeof(int64_t) * (size_t)(ne + 1));
    box_globals(tnd, shape, ls, off, g);
    for (int64_t e = 0; e < ne; e++) put(dt, buf, e, src_val(M, L, coord, v, g[e]));
    free(g);
}

/* ---- checks ---- */

/* A non-Partial shard: every element is v(g). Reports the first mismatch. */
static int check_local(const tmesh* M, const tlay* L, int r, const vmod* v, vs_dtype dt, int tnd, const int64_t* shape,
                       const void* buf, const char* label)
{
    int64_t ls[VS_TENSOR_MAX_DIMS], off[VS_TENSOR_MAX_DIMS];
    ref_box(M, L, tnd, shape, r, ls, off);
    int64_t ne = numel_of(ls, tnd), bad = 0;
    int64_t* g = (int64_t*)malloc(sizeof(int64_t) * (size_t)(ne + 1));
    box_globals(tnd, shape, ls, off, g);
    for (int64_t e = 0; e < ne; e++) {
        double got = get(dt, buf, e), want = (double)base_val(v, g[e]);
        if (got != want) {
            if (!bad)
                vt_fail_msg(__FILE__, __LINE__, "check_local", "%s: rank %d element %lld (global %lld) is %g, want %g",
                            label, r, (long long)e, (long long)g[e], got, want);
            bad++;
        }
    }
    if (bad > 1) vt_fail_msg(__FILE__, __LINE__, "check_local", "%s: rank %d: %lld elements wrong", label, r, (long long)bad);
    free(g);
    return bad == 0;
}

static double reduce_op(vs_op op, const double* v, int m, int stride)
{
    double a = v[0];
    for (int i = 1; i < m; i++) {
        double b = v[i * stride];
        if (op == VS_OP_MAX) a = b > a ? b : a;
        else if (op == VS_OP_MIN) a = b < a ? b : a;
        else a += b;
    }
    return op == VS_OP_AVG ? a / m : a;
}

/* Combines vals (a row-major array over the partial dims' sizes) along every axis,
   the innermost axis first or the outermost first. */
static double combine(int np, const int* psz, const vs_op* pops, const double* vals, int outer_first)
{
    double a[MAXR], b[MAXR];
    int sz[VS_MESH_MAX_DIMS];
    vs_op ops[VS_MESH_MAX_DIMS];
    int total = 1;
    for (int t = 0; t < np; t++) sz[t] = psz[t], ops[t] = pops[t], total *= psz[t];
    memcpy(a, vals, sizeof(double) * (size_t)total);
    for (int nd = np; nd > 0; nd--) {
        int t = outer_first ? 0 : nd - 1, outer = 1, inner = 1;
        for (int i = 0; i < t; i++) outer *= sz[i];
        for (int i = t + 1; i < nd; i++) inner *= sz[i];
        for (int o = 0; o < outer; o++)
            for (int i = 0; i < inner; i++) b[o * inner + i] = reduce_op(ops[t], &a[o * sz[t] * inner + i], sz[t], inner);
        memcpy(a, b, sizeof(double) * (size_t)(outer * inner));
        for (int i = t; i < nd - 1; i++) sz[i] = sz[i + 1], ops[i] = ops[i + 1];
    }
    return a[0];
}

/* Every rank's buffer all[r] (mesh rank order) laid out as L: each element, in
   every replica, combines over the partial coordinates to v(g), and the replicas
   cover every element the same number of times. */
static int check_global(const tmesh* M, const tlay* L, const vmod* v, vs_dtype dt, int tnd, const int64_t* shape,
                        const void* const* all, const char* label)
{
    int pd[VS_MESH_MAX_DIMS], psz[VS_MESH_MAX_DIMS], np = 0, pn = 1, replicas = 1;
    vs_op pops[VS_MESH_MAX_DIMS];
    for (int k = 0; k < M->nd; k++) {
        if (L->kind[k] == KP) pd[np] = k, psz[np] = M->shape[k], pops[np] = L->op[k], pn *= M->shape[k], np++;
        if (L->kind[k] == KR) replicas *= M->shape[k];
    }
    int64_t total = numel_of(shape, tnd), bad = 0;
    int* cover = (int*)calloc((size_t)total + 1, sizeof(int));
    int64_t* g = (int64_t*)malloc(sizeof(int64_t) * (size_t)(total + 1));
    for (int r = 0; r < M->n; r++) {
        int coord[VS_MESH_MAX_DIMS], zero = 1;
        decompose(M->nd, M->shape, r, coord);
        for (int t = 0; t < np; t++) zero &= coord[pd[t]] == 0;
        if (!zero) continue;
        int64_t ls[VS_TENSOR_MAX_DIMS], off[VS_TENSOR_MAX_DIMS];
        ref_box(M, L, tnd, shape, r, ls, off);
        int64_t ne = numel_of(ls, tnd);
        box_globals(tnd, shape, ls, off, g);
        int owner[MAXR];
        for (int j = 0; j < pn; j++) {
            int pc[VS_MESH_MAX_DIMS], c2[VS_MESH_MAX_DIMS];
            decompose(np, psz, j, pc);
            memcpy(c2, coord, sizeof c2);
            for (int t = 0; t < np; t++) c2[pd[t]] = pc[t];
            owner[j] = compose(M->nd, M->shape, c2);
        }
        for (int64_t e = 0; e < ne; e++) {
            double vals[MAXR];
            for (int j = 0; j < pn; j++) vals[j] = get(dt, all[owner[j]], e);
            double want = (double)base_val(v, g[e]);
            double a = combine(np, psz, pops, vals, 0), b = np > 1 ? combine(np, psz, pops, vals, 1) : a;
            cover[g[e]]++;
            if (a != want || b != want) {
                if (!bad)
                    vt_fail_msg(__FILE__, __LINE__, "check_global",
                                "%s: element %lld of the replica at mesh rank %d combines to %g (innermost first) / %g "
                                "(outermost first), want %g; rank values %g %g %g %g ...",
                                label, (long long)g[e], r, a, b, want, vals[0], pn > 1 ? vals[1] : 0.0,
                                pn > 2 ? vals[2] : 0.0, pn > 3 ? vals[3] : 0.0);
                bad++;
            }
        }
    }
    for (int64_t e = 0; e < total; e++)
        if (cover[e] != replicas) {
            if (!bad) vt_fail_msg(__FILE__, __LINE__, "check_global", "%s: test model: element %lld covered %d times, want %d",
                                  label, (long long)e, cover[e], replicas);
            bad++;
        }
    if (bad > 1) vt_fail_msg(__FILE__, __LINE__, "check_global", "%s: %lld elements wrong", label, (long long)bad);
    free(cover);
    free(g);
    return bad == 0;
}

static int check_bytes(const void* p, size_t n, int byte)
{
    const unsigned char* b = (const unsigned char*)p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != (unsigned char)byte) return 0;
    return 1;
}

/* ------------------------------------------------------------------------- */
/* One rank of a job                                                          */

typedef struct shared { /* threads: every rank's output, published before a barrier */
    const void* slot[MAXR];
} shared;

typedef struct rk {
    vs_world* w;
    vs_mesh* m;
    tmesh M;
    int me;
    shared* sh;
    char mtext[32];
} rk;

static int rk_init(rk* x, vs_world* w, int nd, const int* shape, shared* sh)
{
    memset(x, 0, sizeof *x);
    x->w = w;
    x->M = tmesh_of(nd, shape);
    x->sh = sh;
    tmesh_text(&x->M, x->mtext, sizeof x->mtext);
    vs_mesh_desc d;
    memset(&d, 0, sizeof d);
    for (int k = 0; k < nd; k++) d.shape[k] = shape[k];
    d.ndims = nd;
    VT_OK(vs_mesh_init(w, &d, &x->m));
    if (!x->m) return 0;
    x->me = vs_mesh_rank(x->m);
    VT_CHECK(x->me == vs_world_rank(w), "mesh %s: mesh rank %d != world rank %d", x->mtext, x->me, vs_world_rank(w));
    return 1;
}

/* Makes every rank's buffer readable on mesh rank 0 (all[r]); collective. Under
   threads the pointers are shared; under MPI the bytes are gathered with MPI. */
static void share_bufs(rk* x, const void* mine, size_t bytes, const void* all[MAXR], char** hold)
{
    *hold = NULL;
#ifdef VESCALE_MPI
    int b = (int)bytes, counts[MAXR], displs[MAXR], n = x->M.n;
    MPI_Gather(&b, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    size_t tot = 0;
    if (x->me == 0)
        for (int i = 0; i < n; i++) displs[i] = (int)tot, tot += (size_t)counts[i];
    char* buf = x->me == 0 ? (char*)malloc(tot + 1) : NULL;
    MPI_Gatherv(mine, b, MPI_BYTE, buf, counts, displs, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (x->me == 0)
        for (int i = 0; i < n; i++) all[i] = buf + displs[i];
    *hold = buf;
#else
    (void)bytes;
    x->sh->slot[x->me] = mine;
    VT_OK(vs_barrier(vs_world_comm(x->w), NULL));
    if (x->me == 0)
        for (int i = 0; i < x->M.n; i++) all[i] = x->sh->slot[i];
#endif
}

static void unshare_bufs(rk* x, char* hold)
{
#ifdef VESCALE_MPI
    (void)x;
    free(hold);
#else
    (void)hold;
    VT_OK(vs_barrier(vs_world_comm(x->w), NULL)); /* rank 0 is done reading */
#endif
}

static vs_dtensor mk_dt(rk* x, const tlay* L, vs_dtype dt, int tnd, const int64_t* shape, void* data)
{
    vs_dtensor t;
    memset(&t, 0, sizeof t);
    t.layout = tl_vs(x->m, L);
    t.dtype = dt;
    t.ndim = tnd;
    for (int d = 0; d < tnd; d++) t.shape[d] = shape[d];
    t.data = data;
    return t;
}

/* Checks a redistributed shard `buf` laid out as L: locally when L has no
   Partial, else combined over all ranks on rank 0. Collective when L has Partial. */
static void check_result(rk* x, const tlay* L, const vmod* v, vs_dtype dt, int tnd, const int64_t* shape, const void* buf,
                         size_t bytes, const char* label)
{
    if (!tl_has(L, KP, -1)) {
        check_local(&x->M, L, x->me, v, dt, tnd, shape, buf, label);
        return;
    }
    const void* all[MAXR];
    char* hold = NULL;
    share_bufs(x, buf, bytes, all, &hold);
    if (x->me == 0) check_global(&x->M, L, v, dt, tnd, shape, all, label);
    unshare_bufs(x, hold);
}

/* A -> B checked, then B -> A (round trip) checked. Collective. */
static void run_pair(rk* x, const tlay* A, const tlay* B, vs_dtype dt, const vmod* v, int tnd, const int64_t* shape)
{
    char label[400], ta[120], tb[120], st[64];
    tl_text(A, ta, sizeof ta);
    tl_text(B, tb, sizeof tb);
    shape_text(tnd, shape, st, sizeof st);
    snprintf(label, sizeof label, "mesh %s %s %s: %s -> %s", x->mtext, dt_text(dt), st, ta, tb);
    size_t es = esize(dt);
    int64_t lsa[VS_TENSOR_MAX_DIMS], ofa[VS_TENSOR_MAX_DIMS], lsb[VS_TENSOR_MAX_DIMS], ofb[VS_TENSOR_MAX_DIMS];
    ref_box(&x->M, A, tnd, shape, x->me, lsa, ofa);
    ref_box(&x->M, B, tnd, shape, x->me, lsb, ofb);
    int64_t na = numel_of(lsa, tnd), nb = numel_of(lsb, tnd);
    size_t ba = (size_t)na * es, bb = (size_t)nb * es;
    char* sbuf = (char*)malloc(ba + GUARD * es);
    char* scopy = (char*)malloc(ba + 1);
    char* dbuf = (char*)malloc(bb + GUARD * es);
    char* rbuf = (char*)malloc(ba + GUARD * es);
    fill_src(&x->M, A, x->me, v, dt, tnd, shape, sbuf);
    memcpy(scopy, sbuf, ba);
    memset(dbuf, SENT, bb + GUARD * es);
    memset(rbuf, SENT, ba + GUARD * es);
    vs_dtensor src = mk_dt(x, A, dt, tnd, shape, sbuf), dst = mk_dt(x, B, dt, tnd, shape, dbuf);
    vs_dtensor back = mk_dt(x, A, dt, tnd, shape, rbuf);
    int64_t n1 = -1, n2 = -1;
    VT_OK(vs_dtensor_local_numel(&src, &n1));
    VT_OK(vs_dtensor_local_numel(&dst, &n2));
    VT_CHECK(n1 == na && n2 == nb, "%s: rank %d: local numel %lld/%lld, want %lld/%lld", label, x->me, (long long)n1,
             (long long)n2, (long long)na, (long long)nb);

    int needs_avg = tl_has(A, KP, VS_OP_AVG) || tl_has(B, KP, VS_OP_AVG);
    if (needs_avg && dt_int(dt)) { /* integers cannot be averaged exactly: refused, nothing written */
        vs_clear_error();
        vs_result r = vs_redistribute(&src, &dst);
        VT_CHECK(r == VS_ERR_INVALID, "%s: Partial(avg) on %s gave %s, want VS_ERR_INVALID", label, dt_text(dt),
                 vs_result_string(r));
        VT_CHECK(strstr(vs_last_error(), "avg") != NULL, "%s: error \"%s\" does not name avg", label, vs_last_error());
        VT_CHECK(check_bytes(dbuf, bb + GUARD * es, SENT), "%s: rank %d: refused call wrote dst->data", label, x->me);
        goto done;
    }

    vs_result r = vs_redistribute(&src, &dst);
    VT_CHECK(r == VS_OK, "%s: rank %d: %s: %s", label, x->me, vs_result_string(r), vs_last_error());
    VT_CHECK(check_bytes(dbuf + bb, GUARD * es, SENT), "%s: rank %d wrote past its %lld-element shard", label, x->me,
             (long long)nb);
    VT_CHECK(memcmp(sbuf, scopy, ba) == 0, "%s: rank %d: the source shard was modified", label, x->me);
    check_result(x, B, v, dt, tnd, shape, dbuf, bb, label);

    /* round trip B -> A from what the library produced */
    char label2[420];
    snprintf(label2, sizeof label2, "%s (round trip back)", label);
    r = vs_redistribute(&dst, &back);
    VT_CHECK(r == VS_OK, "%s: rank %d: %s: %s", label2, x->me, vs_result_string(r), vs_last_error());
    VT_CHECK(check_bytes(rbuf + ba, GUARD * es, SENT), "%s: rank %d wrote past its %lld-element shard", label2, x->me,
             (long long)na);
    if (!tl_has(A, KP, -1)) {
        if (memcmp(rbuf, scopy, ba) != 0) check_local(&x->M, A, x->me, v, dt, tnd, shape, rbuf, label2);
        VT_CHECK(memcmp(rbuf, scopy, ba) == 0, "%s: rank %d: round trip is not bit-exact", label2, x->me);
    } else {
        check_result(x, A, v, dt, tnd, shape, rbuf, ba, label2);
    }
done:
    free(sbuf);
    free(scopy);
    free(dbuf);
    free(rbuf);
}

/* ------------------------------------------------------------------------- */
/* Redistribute cases                                                         */

#define MAXLAY 512

typedef struct rd_case {
    const char* name;
    int mnd;
    int mshape[3];
    const char* const* alpha; /* layouts: every product of these tokens, or */
    int nalpha;
    const char* const* list; /* an explicit list */
    int nlist;
    int nshapes;
    int tnd[6];
    int64_t shapes[6][VS_TENSOR_MAX_DIMS];
    int ndt;
    vs_dtype dts[7];
    int stride; /* every stride-th ordered pair (0/1: all), the phase moving per shape and dtype */
    shared sh;
} rd_case;

static int build_layouts(int nd, const char* const* alpha, int nalpha, const char* const* list, int nlist, tlay* out)
{
    if (alpha) return tl_product(nd, alpha, nalpha, out, MAXLAY);
    int n = 0;
    for (int i = 0; i < nlist && n < MAXLAY; i++) out[n++] = tl_must(nd, list[i]);
    return n;
}

static int case_redistribute(vs_world* w, void* arg)
{
    rd_case* c = (rd_case*)arg;
    rk x;
    if (!rk_init(&x, w, c->mnd, c->mshape, &c->sh)) return 1;
    tlay* lays = (tlay*)malloc(sizeof(tlay) * MAXLAY);
    int nl = build_layouts(c->mnd, c->alpha, c->nalpha, c->list, c->nlist, lays);
    int* fit = (int*)malloc(sizeof(int) * MAXLAY);
    int stride = c->stride > 1 ? c->stride : 1;
    for (int di = 0; di < c->ndt; di++)
        for (int si = 0; si < c->nshapes; si++) {
            vs_dtype dt = c->dts[di];
            vmod v = {dt_small(dt), (uint32_t)(1 + 131 * di + 17 * si)};
            int nf = 0;
            for (int i = 0; i < nl; i++)
                if (tl_fits(&lays[i], c->tnd[si])) fit[nf++] = i;
            int phase = (di * 7 + si * 3) % stride;
            for (int i = 0; i < nf; i++)
                for (int j = 0; j < nf; j++) {
                    if ((i * nf + j + phase) % stride) continue;
                    int has_avg = tl_has(&lays[fit[i]], KP, VS_OP_AVG) || tl_has(&lays[fit[j]], KP, VS_OP_AVG);
                    if (has_avg && (dt == VS_F16 || dt == VS_BF16)) continue; /* averages not exact */
                    run_pair(&x, &lays[fit[i]], &lays[fit[j]], dt, &v, c->tnd[si], c->shapes[si]);
                }
        }
    free(fit);
    free(lays);
    VT_OK(vs_mesh_free(x.m));
    return 0;
}

/* ------------------------------------------------------------------------- */
/* vs_layout_local: boxes for every layout of an alphabet                     */

typedef struct local_case {
    int mnd;
    int mshape[3];
} local_case;

static void check_local_boxes(rk* x, const tlay* L, int tnd, const int64_t* shape, int coverage)
{
    const tmesh* M = &x->M;
    char lt[120], st[64];
    vs_layout vl = tl_vs(x->m, L);
    int64_t total = numel_of(shape, tnd);
    int* cover = coverage ? (int*)calloc((size_t)total + 1, sizeof(int)) : NULL;
    int64_t* g = coverage ? (int64_t*)malloc(sizeof(int64_t) * (size_t)(total + 1)) : NULL;
    int replicas = 1, bad = 0;
    for (int k = 0; k < M->nd; k++)
        if (L->kind[k] != KS) replicas *= M->shape[k];
    VT_OK(vs_layout_check(&vl, tnd));
    for (int r = 0; r < M->n; r++) {
        if (!coverage && r != x->me) continue;
        int64_t ls[VS_TENSOR_MAX_DIMS], off[VS_TENSOR_MAX_DIMS], els[VS_TENSOR_MAX_DIMS], eoff[VS_TENSOR_MAX_DIMS];
        for (int d = 0; d < VS_TENSOR_MAX_DIMS; d++) ls[d] = off[d] = -77;
        ref_box(M, L, tnd, shape, r, els, eoff);
        vs_result res = vs_layout_local(&vl, tnd, shape, r, ls, off);
        int same = res == VS_OK;
        for (int d = 0; d < tnd; d++) same &= ls[d] == els[d] && off[d] == eoff[d];
        for (int d = tnd; d < VS_TENSOR_MAX_DIMS; d++) same &= ls[d] == -77 && off[d] == -77; /* nothing past ndim */
        if (!same && bad++ < 3) {
            char gs[64], gof[64], ws[64], wo[64];
            tl_text(L, lt, sizeof lt);
            shape_text(tnd, shape, st, sizeof st);
            shape_text(tnd, ls, gs, sizeof gs);
            shape_text(tnd, off, gof, sizeof gof);
            shape_text(tnd, els, ws, sizeof ws);
            shape_text(tnd, eoff, wo, sizeof wo);
            vt_fail_msg(__FILE__, __LINE__, "vs_layout_local", "mesh %s %s shape %s mesh rank %d: %s: shape %s offset %s, want %s %s",
                        x->mtext, lt, st, r, vs_result_string(res), gs, gof, ws, wo);
        }
        if (coverage && res == VS_OK) { /* the library's boxes tile the tensor `replicas` times */
            int ok = 1;
            for (int d = 0; d < tnd; d++) ok &= ls[d] >= 0 && off[d] >= 0 && off[d] + ls[d] <= shape[d];
            if (ok) {
                box_globals(tnd, shape, ls, off, g);
                for (int64_t e = 0; e < numel_of(ls, tnd); e++) cover[g[e]]++;
            } else if (bad++ < 3) {
                vt_fail_msg(__FILE__, __LINE__, "vs_layout_local", "mesh %s mesh rank %d: box outside the tensor", x->mtext, r);
            }
        }
        if (r == x->me) {
            vs_dtensor t = mk_dt(x, L, VS_F32, tnd, shape, NULL);
            int64_t n = -1;
            VT_OK(vs_dtensor_local_numel(&t, &n));
            VT_CHECK(n == numel_of(els, tnd), "mesh %s rank %d: local numel %lld, want %lld", x->mtext, r, (long long)n,
                     (long long)numel_of(els, tnd));
        }
    }
    if (coverage)
        for (int64_t e = 0; e < total; e++)
            if (cover[e] != replicas) {
                tl_text(L, lt, sizeof lt);
                shape_text(tnd, shape, st, sizeof st);
                vt_fail_msg(__FILE__, __LINE__, "coverage", "mesh %s %s shape %s: element %lld covered %d times, want %d",
                            x->mtext, lt, st, (long long)e, cover[e], replicas);
                break;
            }
    free(cover);
    free(g);
}

static int case_local(vs_world* w, void* arg)
{
    local_case* c = (local_case*)arg;
    rk x;
    if (!rk_init(&x, w, c->mnd, c->mshape, NULL)) return 1;
    static const int64_t shapes0[1][VS_TENSOR_MAX_DIMS] = {{0}};
    static const int64_t shapes1[][VS_TENSOR_MAX_DIMS] = {{5}, {1}, {0}, {16}, {7}, {3}, {9}, {10}};
    static const int64_t shapes2[][VS_TENSOR_MAX_DIMS] = {{9, 2}, {1, 4}, {6, 5}};
    static const int64_t shapes3[][VS_TENSOR_MAX_DIMS] = {{8, 4, 6}, {5, 3, 7}, {3, 1, 2}, {0, 4, 5}, {16, 9, 10}, {7, 7, 7}, {1, 1, 1}};
    static const int64_t shapes5[][VS_TENSOR_MAX_DIMS] = {{2, 3, 4, 5, 3}, {1, 9, 2, 8, 3}};
    static const char* const alpha[] = {"R", "S0", "S1", "S2", "S3", "S4", "Ps"};
    struct {
        int tnd, n;
        const int64_t (*s)[VS_TENSOR_MAX_DIMS];
    } groups[] = {{0, 1, shapes0}, {1, 8, shapes1}, {2, 3, shapes2}, {3, 7, shapes3}, {5, 2, shapes5}};
    tlay* lays = (tlay*)malloc(sizeof(tlay) * 2048);
    for (int gi = 0; gi < 5; gi++) {
        int tnd = groups[gi].tnd;
        /* placements R, S0..S(tnd-1), Ps on every mesh dim; fewer for 5-D on 3 mesh dims */
        const char* a[8];
        int na = 0;
        a[na++] = "R";
        for (int d = 0; d < tnd && d < 5; d++) a[na++] = alpha[1 + d];
        a[na++] = "Ps";
        if (tnd == 5 && x.M.nd == 3) na = 0, a[na++] = "R", a[na++] = "S1", a[na++] = "S3", a[na++] = "S4", a[na++] = "Ps";
        int nl = tl_product(x.M.nd, a, na, lays, 2048);
        for (int si = 0; si < groups[gi].n; si++)
            for (int i = 0; i < nl; i++) check_local_boxes(&x, &lays[i], tnd, groups[gi].s[si], x.me == 0);
    }
    free(lays);
    VT_OK(vs_mesh_free(x.m));
    return 0;
}

/* Worked examples, written out by hand from torch.chunk. */
static void expect_boxes(rk* x, const char* compact, int tnd, const int64_t* shape, const int64_t* want_ls,
                         const int64_t* want_off)
{
    tlay L = tl_must(x->M.nd, compact);
    vs_layout vl = tl_vs(x->m, &L);
    for (int r = 0; r < x->M.n; r++) {
        int64_t ls[VS_TENSOR_MAX_DIMS], off[VS_TENSOR_MAX_DIMS], els[VS_TENSOR_MAX_DIMS], eoff[VS_TENSOR_MAX_DIMS];
        VT_OK(vs_layout_local(&vl, tnd, shape, r, ls, off));
        ref_box(&x->M, &L, tnd, shape, r, els, eoff);
        for (int d = 0; d < tnd; d++) {
            VT_CHECK(ls[d] == want_ls[r * tnd + d] && off[d] == want_off[r * tnd + d],
                     "mesh %s [%s] shape[%d]=%lld rank %d: size %lld offset %lld, want %lld %lld", x->mtext, compact, d,
                     (long long)shape[d], r, (long long)ls[d], (long long)off[d], (long long)want_ls[r * tnd + d],
                     (long long)want_off[r * tnd + d]);
            VT_CHECK(els[d] == want_ls[r * tnd + d] && eoff[d] == want_off[r * tnd + d], "test model disagrees (%s)",
                     compact);
        }
    }
}

static int case_examples4(vs_world* w, void* arg)
{
    (void)arg;
    rk x;
    if (!rk_init(&x, w, 1, (const int[]){4}, NULL)) return 1;
    const int64_t n5[] = {5}, n6[] = {6}, n3[] = {3}, n1[] = {1}, n9[] = {9}, n10[] = {10}, n0[] = {0};
    expect_boxes(&x, "S0", 1, n5, (const int64_t[]){2, 2, 1, 0}, (const int64_t[]){0, 2, 4, 5});
    expect_boxes(&x, "S0", 1, n6, (const int64_t[]){2, 2, 2, 0}, (const int64_t[]){0, 2, 4, 6});
    expect_boxes(&x, "S0", 1, n3, (const int64_t[]){1, 1, 1, 0}, (const int64_t[]){0, 1, 2, 3});
    expect_boxes(&x, "S0", 1, n1, (const int64_t[]){1, 0, 0, 0}, (const int64_t[]){0, 1, 1, 1});
    expect_boxes(&x, "S0", 1, n9, (const int64_t[]){3, 3, 3, 0}, (const int64_t[]){0, 3, 6, 9});
    expect_boxes(&x, "S0", 1, n10, (const int64_t[]){3, 3, 3, 1}, (const int64_t[]){0, 3, 6, 9});
    expect_boxes(&x, "S0", 1, n0, (const int64_t[]){0, 0, 0, 0}, (const int64_t[]){0, 0, 0, 0});
    expect_boxes(&x, "R", 1, n5, (const int64_t[]){5, 5, 5, 5}, (const int64_t[]){0, 0, 0, 0});
    expect_boxes(&x, "Px", 1, n5, (const int64_t[]){5, 5, 5, 5}, (const int64_t[]){0, 0, 0, 0});
    /* (3,5) sharded on dim 1: 5 -> 2,2,1,0 */
    expect_boxes(&x, "S1", 2, (const int64_t[]){3, 5}, (const int64_t[]){3, 2, 3, 2, 3, 1, 3, 0},
                 (const int64_t[]){0, 0, 0, 2, 0, 4, 0, 5});
    VT_OK(vs_mesh_free(x.m));
    return 0;
}

static int case_examples22(vs_world* w, void* arg)
{
    (void)arg;
    rk x;
    if (!rk_init(&x, w, 2, (const int[]){2, 2}, NULL)) return 1;
    /* nested: 7 -> outer [0,4) [4,7); inner 4 -> 2,2; inner 3 -> [4,6) [6,7) */
    expect_boxes(&x, "S0 S0", 1, (const int64_t[]){7}, (const int64_t[]){2, 2, 2, 1}, (const int64_t[]){0, 2, 4, 6});
    /* 3 -> [0,2) [2,3); 2 -> 1,1; 1 -> [2,3) and empty at 3 */
    expect_boxes(&x, "S0 S0", 1, (const int64_t[]){3}, (const int64_t[]){1, 1, 1, 0}, (const int64_t[]){0, 1, 2, 3});
    /* 1 -> [0,1) and empty at 1; the empty one chunks to empties at 1 */
    expect_boxes(&x, "S0 S0", 1, (const int64_t[]){1}, (const int64_t[]){1, 0, 0, 0}, (const int64_t[]){0, 1, 1, 1});
    /* (3,5): dim 0 -> [0,2) [2,3), dim 1 -> [0,3) [3,5) */
    expect_boxes(&x, "S0 S1", 2, (const int64_t[]){3, 5}, (const int64_t[]){2, 3, 2, 2, 1, 3, 1, 2},
                 (const int64_t[]){0, 0, 0, 3, 2, 0, 2, 3});
    expect_boxes(&x, "S1 S0", 2, (const int64_t[]){3, 5}, (const int64_t[]){2, 3, 1, 3, 2, 2, 1, 2},
                 (const int64_t[]){0, 0, 2, 0, 0, 3, 2, 3});
    expect_boxes(&x, "Ps S1", 2, (const int64_t[]){3, 5}, (const int64_t[]){3, 3, 3, 2, 3, 3, 3, 2},
                 (const int64_t[]){0, 0, 0, 3, 0, 0, 0, 3});
    /* 5-D (2,3,4,5,3) with Shard(3), Shard(1): dim 3: 5 -> [0,3) [3,5); dim 1: 3 -> [0,2) [2,3) */
    expect_boxes(&x, "S3 S1", 5, (const int64_t[]){2, 3, 4, 5, 3},
                 (const int64_t[]){2, 2, 4, 3, 3, 2, 1, 4, 3, 3, 2, 2, 4, 2, 3, 2, 1, 4, 2, 3},
                 (const int64_t[]){0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 3, 0, 0, 2, 0, 3, 0});
    VT_OK(vs_mesh_free(x.m));
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Bad input                                                                  */


/* The layout text parses to an error quoting it; *out is left alone. */
static void expect_parse_bad(rk* x, const char* text, int line)
{
    vs_layout out;
    memset(&out, 0xC3, sizeof out);
    vs_layout before = out;
    vs_clear_error();
    vs_result r = vs_layout_parse(x->m, text, &out);
    char what[200];
    snprintf(what, sizeof what, "vs_layout_parse(mesh %s, \"%s\")", x->mtext, text);
    vt_expect_err(__FILE__, line, what, r, VS_ERR_INVALID, text[0] ? text : NULL, NULL);
    if (memcmp(&out, &before, sizeof out) != 0) vt_fail_msg(__FILE__, line, what, "wrote *out on error");
}

/* Joins placements into "[a, b, c]" (sep between, pre/post around). */
static void join(char* buf, size_t cap, const char* pre, const char* const* items, int n, const char* sep, const char* post)
{
    size_t l = (size_t)snprintf(buf, cap, "%s", pre);
    for (int i = 0; i < n && l < cap; i++) l += (size_t)snprintf(buf + l, cap - l, "%s%s", i ? sep : "", items[i]);
    if (l < cap) snprintf(buf + l, cap - l, "%s", post);
}


/* The short form of L: "[S(0),R,P(sum)]" (P for sum when bare). */
static void tl_short(const tlay* L, char* buf, size_t cap, const char* sep, int bare_sum)
{
    size_t l = (size_t)snprintf(buf, cap, "[");
    for (int k = 0; k < L->nd && l < cap; k++) {
        const char* s = k ? sep : "";
        if (L->kind[k] == KS) l += (size_t)snprintf(buf + l, cap - l, "%sS(%d)", s, L->dim[k]);
        else if (L->kind[k] == KP && bare_sum && L->op[k] == VS_OP_SUM) l += (size_t)snprintf(buf + l, cap - l, "%sP", s);
        else if (L->kind[k] == KP) l += (size_t)snprintf(buf + l, cap - l, "%sP(%s)", s, op_text(L->op[k]));
        else l += (size_t)snprintf(buf + l, cap - l, "%sR", s);
    }
    if (l < cap) snprintf(buf + l, cap - l, "]");
}

static void parse_same(rk* x, const char* text, const tlay* L, int line)
{
    vs_layout out;
    memset(&out, 0, sizeof out);
    vs_clear_error();
    vs_result r = vs_layout_parse(x->m, text, &out);
    char what[240], want[200];
    snprintf(what, sizeof what, "vs_layout_parse(mesh %s, \"%s\")", x->mtext, text);
    tl_text(L, want, sizeof want);
    if (r != VS_OK) {
        vt_fail_msg(__FILE__, line, what, "%s: %s (want %s)", vs_result_string(r), vs_last_error(), want);
    } else if (out.mesh != x->m || !tl_same(L, &out)) {
        char got[200];
        vs_layout_format(&out, got, sizeof got);
        vt_fail_msg(__FILE__, line, what, "parsed as %s, want %s", got, want);
    }
}

static void expect_parse_ok(rk* x, const char* text, const char* compact, int line)
{
    tlay L = tl_must(x->M.nd, compact);
    parse_same(x, text, &L, line);
}

static void expect_format(rk* x, const char* compact, const char* want, int line)
{
    tlay L = tl_must(x->M.nd, compact);
    vs_layout vl = tl_vs(x->m, &L);
    char got[200];
    int n = vs_layout_format(&vl, got, sizeof got);
    if (n != (int)strlen(want) || strcmp(got, want) != 0)
        vt_fail_msg(__FILE__, line, "vs_layout_format", "[%s] gave \"%s\" (%d), want \"%s\"", compact, got, n, want);
    parse_same(x, want, &L, line);
}

static int case_format_parse(vs_world* w, void* arg)
{
    local_case* c = (local_case*)arg;
    rk x;
    if (!rk_init(&x, w, c->mnd, c->mshape, NULL)) return 1;
    const int nd = x.M.nd;
    char buf[400];

    /* every layout of the alphabet: exact text, needed length, truncation, round
       trips through the long and the short forms */
    static const char* const alpha[] = {"R", "S0", "S3", "S7", "Ps", "Pa", "Px", "Pn"};
    tlay* lays = (tlay*)malloc(sizeof(tlay) * MAXLAY);
    int nl = tl_product(nd, alpha, 8, lays, MAXLAY);
    for (int i = 0; i < nl; i++) {
        char want[200], got[200];
        tl_text(&lays[i], want, sizeof want);
        int wl = (int)strlen(want);
        vs_layout vl = tl_vs(x.m, &lays[i]);
        memset(got, 0x11, sizeof got);
        int n = vs_layout_format(&vl, got, sizeof got);
        VT_CHECK(n == wl && strcmp(got, want) == 0, "format: \"%s\" (%d), want \"%s\"", got, n, want);
        n = vs_layout_format(&vl, NULL, 0);
        VT_CHECK(n == wl, "format(NULL, 0) of %s: %d, want %d", want, n, wl);
        size_t cap = (size_t)wl / 2 + 1; /* too small: a terminated prefix, still the full length back */
        memset(got, 0x11, sizeof got);
        n = vs_layout_format(&vl, got, cap);
        VT_CHECK(n == wl && strlen(got) == cap - 1 && strncmp(got, want, cap - 1) == 0 && (unsigned char)got[cap] == 0x11,
                 "format cap %zu of %s: \"%.*s\" returned %d", cap, want, (int)cap, got, n);
        memset(got, 0x11, sizeof got);
        n = vs_layout_format(&vl, got, (size_t)wl); /* one short: the last ']' cut */
        VT_CHECK(n == wl && strlen(got) == (size_t)wl - 1, "format cap %d of %s: \"%s\"", wl, want, got);
        parse_same(&x, want, &lays[i], __LINE__);
        tl_short(&lays[i], buf, sizeof buf, ",", 0);
        parse_same(&x, buf, &lays[i], __LINE__);
        tl_short(&lays[i], buf, sizeof buf, " , ", 1);
        parse_same(&x, buf, &lays[i], __LINE__);
    }
    free(lays);

    /* literals */
    if (nd == 1) {
        expect_format(&x, "S0", "[Shard(0)]", __LINE__);
        expect_format(&x, "R", "[Replicate]", __LINE__);
        expect_format(&x, "Ps", "[Partial(sum)]", __LINE__);
        expect_format(&x, "Pn", "[Partial(min)]", __LINE__);
        expect_parse_ok(&x, "[S(2)]", "S2", __LINE__);
        expect_parse_ok(&x, "[P]", "Ps", __LINE__);
        expect_parse_ok(&x, "[Partial]", "Ps", __LINE__);
        expect_parse_ok(&x, "[P(max)]", "Px", __LINE__);
        expect_parse_ok(&x, "[P(avg)]", "Pa", __LINE__);
        expect_parse_ok(&x, "[Replicate()]", "R", __LINE__);
        expect_parse_ok(&x, "[R]", "R", __LINE__);
        expect_parse_ok(&x, "[ R ]", "R", __LINE__);
        expect_parse_ok(&x, "\t[\nShard(1)\t]\n", "S1", __LINE__);
        expect_parse_ok(&x, "  [Partial(max)]  ", "Px", __LINE__);
    } else if (nd == 2) {
        expect_format(&x, "S0 R", "[Shard(0), Replicate]", __LINE__);
        expect_format(&x, "R S1", "[Replicate, Shard(1)]", __LINE__);
        expect_format(&x, "Ps S2", "[Partial(sum), Shard(2)]", __LINE__);
        expect_format(&x, "Pn Pa", "[Partial(min), Partial(avg)]", __LINE__);
        expect_format(&x, "S0 S0", "[Shard(0), Shard(0)]", __LINE__);
        expect_parse_ok(&x, "[S(0), R]", "S0 R", __LINE__);
        expect_parse_ok(&x, "[S(0),R]", "S0 R", __LINE__);
        expect_parse_ok(&x, "[P(sum), Partial]", "Ps Ps", __LINE__);
        expect_parse_ok(&x, "[P, P(max)]", "Ps Px", __LINE__);
        expect_parse_ok(&x, "[Partial(avg),S(3)]", "Pa S3", __LINE__);
        expect_parse_ok(&x, "[Replicate(), Shard(1)]", "R S1", __LINE__);
        expect_parse_ok(&x, "[Partial(max), P(min)]", "Px Pn", __LINE__);
        expect_parse_ok(&x, "  [ Shard(0) ,Replicate ]  ", "S0 R", __LINE__);
        expect_parse_ok(&x, "[S(1),\tP(min)\n]", "S1 Pn", __LINE__);
        expect_parse_ok(&x, "[R ,  S(0)]", "R S0", __LINE__);
        expect_parse_ok(&x, "[\tR,\n\tS(0)\n]\n", "R S0", __LINE__);
        expect_parse_ok(&x, "[P ,R]", "Ps R", __LINE__);
    } else if (nd == 3) {
        expect_format(&x, "S0 R Ps", "[Shard(0), Replicate, Partial(sum)]", __LINE__);
        expect_format(&x, "S0 S0 Px", "[Shard(0), Shard(0), Partial(max)]", __LINE__);
        expect_format(&x, "R R R", "[Replicate, Replicate, Replicate]", __LINE__);
        expect_parse_ok(&x, "[S(0), R, P(sum)]", "S0 R Ps", __LINE__);
        expect_parse_ok(&x, "[Partial, P, P(max)]", "Ps Ps Px", __LINE__);
        expect_parse_ok(&x, "[S(2),S(1),S(0)]", "S2 S1 S0", __LINE__);
        expect_parse_ok(&x, " [ R , Shard(4) , Partial(min) ] ", "R S4 Pn", __LINE__);
    }
    /* a Partial with the default op prints and reads as sum */
    {
        vs_layout vl;
        memset(&vl, 0, sizeof vl);
        vl.mesh = x.m;
        vl.p[0].kind = VS_PLACE_PARTIAL;
        vl.p[0].op = VS_OP_DEFAULT;
        char got[200], want[200];
        tlay L;
        memset(&L, 0, sizeof L);
        L.nd = nd;
        L.kind[0] = KP;
        L.op[0] = VS_OP_SUM;
        tl_text(&L, want, sizeof want);
        vs_layout_format(&vl, got, sizeof got);
        VT_CHECK(strcmp(got, want) == 0, "Partial(default op) formats as \"%s\", want \"%s\"", got, want);
    }

    /* whitespace around every token (space, tab, newline) */
    {
        const char* items[VS_MESH_MAX_DIMS];
        static const char* const pick[] = {"Shard(1)", "R()", "P(max)", "S(0)", "Replicate()", "Partial(sum)"};
        static const char* const pickc[] = {"S1", "R", "Px", "S0", "R", "Ps"};
        char compact[64] = "";
        for (int k = 0; k < nd; k++) {
            items[k] = pick[k % 6];
            strcat(compact, pickc[k % 6]);
            strcat(compact, " ");
        }
        static const char* const pre[] = {"[", " [ ", "\t[\t", "\n[\n", " \t\n[ \t\n"};
        static const char* const sep[] = {",", " , ", "\t,\t", "\n,\n", " \t\n, \t\n"};
        static const char* const post[] = {"]", " ] ", "\t]\t", "\n]\n", " \t\n] \t\n"};
        for (int a = 0; a < 5; a++)
            for (int b = 0; b < 5; b++) {
                join(buf, sizeof buf, pre[a], items, nd, sep[b], post[(a + b) % 5]);
                expect_parse_ok(&x, buf, compact, __LINE__);
            }
    }

    /* bad text: VS_ERR_INVALID quoting it, *out untouched */
    {
        const char* items[VS_MESH_MAX_DIMS + 2];
        for (int k = 0; k < nd + 2; k++) items[k] = "R";
        static const char* const firsts[] = {"Shard(x)", "Partial(foo)", "Shard()", "Shard(-1)", "Shard(8)", "S(1.5)",
                                             "Sharded(0)", "Replicate(0)", "Partial(sum", "Shard(0", "Q", "",
                                             "S(0)R", "Partial(sum)(max)", "Shard(0x1)", "Partial(SUM!)"};
        for (int f = 0; f < (int)(sizeof firsts / sizeof firsts[0]); f++) {
            items[0] = firsts[f];
            join(buf, sizeof buf, "[", items, nd, ", ", "]");
            expect_parse_bad(&x, buf, __LINE__);
        }
        items[0] = "Shard(0)";
        join(buf, sizeof buf, "[", items, nd, ", ", ""); /* no ']' */
        expect_parse_bad(&x, buf, __LINE__);
        join(buf, sizeof buf, "", items, nd, ", ", "]"); /* no '[' */
        expect_parse_bad(&x, buf, __LINE__);
        join(buf, sizeof buf, "(", items, nd, ", ", ")");
        expect_parse_bad(&x, buf, __LINE__);
        join(buf, sizeof buf, "[", items, nd + 1, ", ", "]"); /* one too many */
        expect_parse_bad(&x, buf, __LINE__);
        join(buf, sizeof buf, "[", items, nd + 2, ", ", "]");
        expect_parse_bad(&x, buf, __LINE__);
        join(buf, sizeof buf, "[", items, nd - 1, ", ", "]"); /* one too few ("[]" for one dim) */
        expect_parse_bad(&x, buf, __LINE__);
        join(buf, sizeof buf, "[", items, nd, ", ", "] junk"); /* trailing text */
        expect_parse_bad(&x, buf, __LINE__);
        join(buf, sizeof buf, "[", items, nd, ", ", "]]");
        expect_parse_bad(&x, buf, __LINE__);
        join(buf, sizeof buf, "[", items, nd, ", ", "],");
        expect_parse_bad(&x, buf, __LINE__);
        join(buf, sizeof buf, "[", items, nd, ", ", ",]"); /* dangling comma */
        expect_parse_bad(&x, buf, __LINE__);
        join(buf, sizeof buf, "[,", items, nd, ", ", "]");
        expect_parse_bad(&x, buf, __LINE__);
        join(buf, sizeof buf, "[", items, nd, " ", "]"); /* no commas (one dim: fine, skip) */
        if (nd > 1) expect_parse_bad(&x, buf, __LINE__);
        join(buf, sizeof buf, "[", items, nd, ",,", "]");
        if (nd > 1) expect_parse_bad(&x, buf, __LINE__);
        join(buf, sizeof buf, "[", items, nd, ", ", "] [R]");
        expect_parse_bad(&x, buf, __LINE__);
        expect_parse_bad(&x, "", __LINE__);
        expect_parse_bad(&x, "   ", __LINE__);
        expect_parse_bad(&x, "[", __LINE__);
        expect_parse_bad(&x, "]", __LINE__);
        expect_parse_bad(&x, "R", __LINE__);
        expect_parse_bad(&x, "Shard(0)", __LINE__);
    }

    /* NULL arguments */
    {
        vs_layout out;
        tlay R;
        memset(&R, 0, sizeof R);
        R.nd = nd;
        vs_layout vl = tl_vs(x.m, &R);
        VT_EXPECT_ERR(vs_layout_parse(NULL, "[R]", &out), VS_ERR_NULL, "mesh", NULL);
        VT_EXPECT_ERR(vs_layout_parse(x.m, NULL, &out), VS_ERR_NULL, "text", NULL);
        VT_EXPECT_ERR(vs_layout_parse(x.m, "[R]", NULL), VS_ERR_NULL, "out", NULL);
        vs_clear_error();
        VT_CHECK(vs_layout_format(NULL, buf, sizeof buf) < 0, "vs_layout_format(NULL) should fail");
        vl.mesh = NULL;
        VT_CHECK(vs_layout_format(&vl, buf, sizeof buf) < 0, "vs_layout_format of a layout without mesh should fail");
    }
    VT_OK(vs_mesh_free(x.m));
    return 0;
}

/* Tab or newline right after a bare placement name (R, P, Replicate, Partial):
   whitespace is skipped around every other token. */
static int case_parse_ws_bare(vs_world* w, void* arg)
{
    (void)arg;
    rk x;
    if (!rk_init(&x, w, 2, (const int[]){1, 1}, NULL)) return 1;
    expect_parse_ok(&x, "[R\t, S(0)]", "R S0", __LINE__);
    expect_parse_ok(&x, "[Replicate\n,Partial\t]", "R Ps", __LINE__);
    expect_parse_ok(&x, "[S(0), P\n]", "S0 Ps", __LINE__);
    VT_OK(vs_mesh_free(x.m));
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Bad input to redistribute and friends                                      */

static int case_errors(vs_world* w, void* arg)
{
    local_case* c = (local_case*)arg;
    rk x;
    if (!rk_init(&x, w, c->mnd, c->mshape, NULL)) return 1;
    const int nd = x.M.nd, last = nd - 1;
    int64_t shape[VS_TENSOR_MAX_DIMS] = {4, 6, 5};
    tlay A, B;
    memset(&A, 0, sizeof A);
    A.nd = nd;
    B = A;
    A.kind[0] = KS, A.dim[0] = 0;       /* [S(0), R, ...] */
    B.kind[last] = KS, B.dim[last] = 1; /* [R, ..., S(1)] */
    const size_t full = 4 * 6 * 5 * 8, dcap = full + GUARD * 8;
    char* sbuf = (char*)malloc(full);
    char* dbuf = (char*)malloc(dcap);
    vmod v = {0, 99};
    fill_src(&x.M, &A, x.me, &v, VS_I64, 3, shape, sbuf);
    vs_dtensor src = mk_dt(&x, &A, VS_I64, 3, shape, sbuf), dst = mk_dt(&x, &B, VS_I64, 3, shape, dbuf), s2, d2;
    int64_t ls[VS_TENSOR_MAX_DIMS], off[VS_TENSOR_MAX_DIMS], n = 0;
    char num[32];

    /* positive control */
    memset(dbuf, SENT, dcap);
    VT_OK(vs_redistribute(&src, &dst));
    check_local(&x.M, &B, x.me, &v, VS_I64, 3, shape, dbuf, "errors: positive control");

#define EXPECT_RD(S, D, want, n1, n2)                                                                      \
    do {                                                                                                   \
        memset(dbuf, SENT, dcap);                                                                          \
        VT_EXPECT_ERR(vs_redistribute((S), (D)), (want), (n1), (n2));                                         \
        VT_CHECK(check_bytes(dbuf, dcap, SENT), "line %d: dst->data written by a failing call", __LINE__); \
    } while (0)

    /* shard dim out of range */
    s2 = src, s2.layout.p[0].dim = 3;
    EXPECT_RD(&s2, &dst, VS_ERR_INVALID, "Shard(3)", NULL);
    VT_EXPECT_ERR(vs_layout_check(&s2.layout, 3), VS_ERR_INVALID, "Shard(3)", NULL);
    VT_OK(vs_layout_check(&s2.layout, 4));
    VT_EXPECT_ERR(vs_layout_local(&s2.layout, 3, shape, 0, ls, off), VS_ERR_INVALID, "Shard(3)", NULL);
    VT_EXPECT_ERR(vs_dtensor_local_numel(&s2, &n), VS_ERR_INVALID, "Shard(3)", NULL);
    d2 = dst, d2.layout.p[last].dim = 3;
    EXPECT_RD(&src, &d2, VS_ERR_INVALID, "Shard(3)", NULL);
    s2 = src, s2.layout.p[0].dim = -1;
    EXPECT_RD(&s2, &dst, VS_ERR_INVALID, "Shard(-1)", NULL);
    d2 = dst, d2.layout.p[last].dim = 7;
    EXPECT_RD(&src, &d2, VS_ERR_INVALID, "Shard(7)", NULL);

    /* different meshes of the same shape */
    {
        vs_mesh* m2 = NULL;
        vs_mesh_desc md;
        memset(&md, 0, sizeof md);
        for (int k = 0; k < nd; k++) md.shape[k] = x.M.shape[k];
        md.ndims = nd;
        VT_OK(vs_mesh_init(w, &md, &m2));
        if (m2) {
            d2 = dst, d2.layout.mesh = m2;
            EXPECT_RD(&src, &d2, VS_ERR_MISMATCH, "mesh", NULL);
            s2 = src, s2.layout.mesh = m2;
            EXPECT_RD(&s2, &dst, VS_ERR_MISMATCH, "mesh", NULL);
            VT_OK(vs_mesh_free(m2));
        }
    }

    /* dtype, ndim, shape mismatches */
    d2 = dst, d2.dtype = VS_F32;
    EXPECT_RD(&src, &d2, VS_ERR_MISMATCH, "i64", "f32");
    d2 = dst, d2.dtype = VS_I32;
    EXPECT_RD(&src, &d2, VS_ERR_MISMATCH, "i64", "i32");
    d2 = dst, d2.ndim = 2;
    EXPECT_RD(&src, &d2, VS_ERR_MISMATCH, "3", "2");
    d2 = dst, d2.ndim = 4, d2.shape[3] = 1;
    EXPECT_RD(&src, &d2, VS_ERR_MISMATCH, "3", "4");
    d2 = dst, d2.shape[1] = 9;
    EXPECT_RD(&src, &d2, VS_ERR_MISMATCH, "9", "6");
    d2 = dst, d2.shape[0] = 8;
    EXPECT_RD(&src, &d2, VS_ERR_MISMATCH, "8", "4");
    s2 = src, s2.shape[2] = 11;
    EXPECT_RD(&s2, &dst, VS_ERR_MISMATCH, "11", "5");

    /* Partial(avg) on integers */
    {
        vs_placement avg;
        memset(&avg, 0, sizeof avg);
        avg.kind = VS_PLACE_PARTIAL;
        avg.op = VS_OP_AVG;
        s2 = src, s2.layout.p[0] = avg;
        EXPECT_RD(&s2, &dst, VS_ERR_INVALID, "avg", "i64");
        d2 = dst, d2.layout.p[last] = avg;
        EXPECT_RD(&src, &d2, VS_ERR_INVALID, "avg", "i64");
        s2.dtype = VS_I32, d2 = dst, d2.dtype = VS_I32;
        EXPECT_RD(&s2, &d2, VS_ERR_INVALID, "avg", "i32");
        s2.dtype = VS_U8, d2.dtype = VS_U8;
        EXPECT_RD(&s2, &d2, VS_ERR_INVALID, "avg", "u8");
        /* floats average: allowed (collective) */
        tlay Aavg = A;
        Aavg.kind[0] = KP, Aavg.op[0] = VS_OP_AVG;
        vmod vf = {0, 5};
        fill_src(&x.M, &Aavg, x.me, &vf, VS_F32, 3, shape, sbuf);
        s2 = mk_dt(&x, &Aavg, VS_F32, 3, shape, sbuf);
        d2 = mk_dt(&x, &B, VS_F32, 3, shape, dbuf);
        VT_OK(vs_redistribute(&s2, &d2));
        check_local(&x.M, &B, x.me, &vf, VS_F32, 3, shape, dbuf, "errors: Partial(avg) f32 -> Shard");
        fill_src(&x.M, &A, x.me, &v, VS_I64, 3, shape, sbuf);
    }

    /* NULL */
    EXPECT_RD(NULL, &dst, VS_ERR_NULL, "source", NULL);
    EXPECT_RD(&src, NULL, VS_ERR_NULL, "destination", NULL);
    s2 = src, s2.data = NULL;
    EXPECT_RD(&s2, &dst, VS_ERR_NULL, "source", NULL);
    d2 = dst, d2.data = NULL; /* replicated: every rank has elements, so every rank refuses */
    memset(&d2.layout.p, 0, sizeof d2.layout.p);
    VT_EXPECT_ERR(vs_redistribute(&src, &d2), VS_ERR_NULL, "destination", NULL);
    s2 = src, s2.layout.mesh = NULL;
    EXPECT_RD(&s2, &dst, VS_ERR_NULL, "mesh", NULL);
    d2 = dst, d2.layout.mesh = NULL;
    EXPECT_RD(&src, &d2, VS_ERR_NULL, "mesh", NULL);

    /* bad values */
    s2 = src, d2 = dst, s2.dtype = d2.dtype = VS_DTYPE_INVALID;
    EXPECT_RD(&s2, &d2, VS_ERR_INVALID, "dtype", NULL);
    s2.dtype = d2.dtype = (vs_dtype)99;
    EXPECT_RD(&s2, &d2, VS_ERR_INVALID, "99", NULL);
    s2 = src, d2 = dst, s2.shape[1] = d2.shape[1] = -3;
    EXPECT_RD(&s2, &d2, VS_ERR_INVALID, "-3", NULL);
    s2 = src, s2.layout.p[0].kind = VS_PLACE_PARTIAL, s2.layout.p[0].op = (vs_op)17;
    EXPECT_RD(&s2, &dst, VS_ERR_INVALID, "17", NULL);
    s2 = src, s2.layout.p[0].kind = (vs_placement_kind)7;
    EXPECT_RD(&s2, &dst, VS_ERR_INVALID, "7", NULL);
    s2 = src, d2 = dst, s2.ndim = d2.ndim = 9;
    EXPECT_RD(&s2, &d2, VS_ERR_INVALID, "9", NULL);
    s2 = src, d2 = dst, s2.ndim = d2.ndim = -1;
    EXPECT_RD(&s2, &d2, VS_ERR_INVALID, "-1", NULL);

    /* vs_layout_local / check / local_numel / format */
    {
        vs_layout vl = tl_vs(x.m, &A), nomesh = vl;
        nomesh.mesh = NULL;
        VT_EXPECT_ERR(vs_layout_local(&vl, 3, shape, -1, ls, off), VS_ERR_INVALID, "-1", NULL);
        snprintf(num, sizeof num, "%d", x.M.n);
        VT_EXPECT_ERR(vs_layout_local(&vl, 3, shape, x.M.n, ls, off), VS_ERR_INVALID, num, NULL);
        VT_EXPECT_ERR(vs_layout_local(&vl, 3, shape, 1000, ls, off), VS_ERR_INVALID, "1000", NULL);
        VT_EXPECT_ERR(vs_layout_local(NULL, 3, shape, 0, ls, off), VS_ERR_NULL, NULL, NULL);
        VT_EXPECT_ERR(vs_layout_local(&nomesh, 3, shape, 0, ls, off), VS_ERR_NULL, "mesh", NULL);
        VT_EXPECT_ERR(vs_layout_local(&vl, 3, NULL, 0, ls, off), VS_ERR_NULL, "shape", NULL);
        int64_t neg[3] = {4, -2, 5};
        VT_EXPECT_ERR(vs_layout_local(&vl, 3, neg, 0, ls, off), VS_ERR_INVALID, "-2", NULL);
        VT_EXPECT_ERR(vs_layout_local(&vl, 9, shape, 0, ls, off), VS_ERR_INVALID, "9", NULL);
        VT_EXPECT_ERR(vs_layout_check(NULL, 3), VS_ERR_NULL, NULL, NULL);
        VT_EXPECT_ERR(vs_layout_check(&nomesh, 3), VS_ERR_NULL, "mesh", NULL);
        VT_EXPECT_ERR(vs_dtensor_local_numel(NULL, &n), VS_ERR_NULL, NULL, NULL);
        VT_EXPECT_ERR(vs_dtensor_local_numel(&src, NULL), VS_ERR_NULL, "numel", NULL);
        /* NULL outputs are allowed */
        VT_OK(vs_layout_local(&vl, 3, shape, 0, NULL, NULL));
    }

    /* ranks holding nothing may pass NULL data */
    if (x.M.shape[0] >= 2) {
        int64_t sh1[VS_TENSOR_MAX_DIMS] = {1, 6, 5};
        int64_t ls1[VS_TENSOR_MAX_DIMS], of1[VS_TENSOR_MAX_DIMS];
        ref_box(&x.M, &A, 3, sh1, x.me, ls1, of1);
        int empty = numel_of(ls1, 3) == 0;
        fill_src(&x.M, &A, x.me, &v, VS_I64, 3, sh1, sbuf);
        s2 = mk_dt(&x, &A, VS_I64, 3, sh1, empty ? NULL : sbuf);
        d2 = mk_dt(&x, &B, VS_I64, 3, sh1, dbuf);
        VT_OK(vs_redistribute(&s2, &d2));
        check_local(&x.M, &B, x.me, &v, VS_I64, 3, sh1, dbuf, "empty source shard with NULL data");
        fill_src(&x.M, &B, x.me, &v, VS_I64, 3, sh1, sbuf);
        s2 = mk_dt(&x, &B, VS_I64, 3, sh1, sbuf);
        d2 = mk_dt(&x, &A, VS_I64, 3, sh1, empty ? NULL : dbuf);
        VT_OK(vs_redistribute(&s2, &d2));
        if (!empty) check_local(&x.M, &A, x.me, &v, VS_I64, 3, sh1, dbuf, "empty destination shard with NULL data");
        fill_src(&x.M, &A, x.me, &v, VS_I64, 3, shape, sbuf);
    }

    /* still works */
    memset(dbuf, SENT, dcap);
    VT_OK(vs_redistribute(&src, &dst));
    check_local(&x.M, &B, x.me, &v, VS_I64, 3, shape, dbuf, "errors: after the bad calls");
#undef EXPECT_RD
    free(sbuf);
    free(dbuf);
    VT_OK(vs_mesh_free(x.m));
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Runner                                                                     */

#ifdef VESCALE_MPI
static vs_world* g_world;
static int g_rank;
#endif

/* n: ranks the case needs (its mesh size). Under MPI only the cases with n equal
   to the world size run. */
static void run_case(const char* name, int n, vs_rank_fn fn, void* arg)
{
    const char* only = getenv("VT_FILTER"); /* debugging: run the cases whose name contains it */
    if (only && !strstr(name, only)) return;
#ifdef VESCALE_MPI
    if (vs_world_size(g_world) != n) return;
    vt_begin(name);
    int rc = fn(g_world, arg);
    VT_CHECK(rc == 0, "%s: rank %d returned %d", name, g_rank, rc);
    int local = __atomic_load_n(&vt_failures, __ATOMIC_SEQ_CST) != vt_case_start, any = 1;
    /* plain MPI, so a broken library cannot hide another rank's failure */
    MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (g_rank == 0) {
        VT_CHECK(!any || local, "%s failed on another rank (see its stderr)", name);
        vt_end(name);
    }
#else
    vt_begin(name);
    VT_OK(vs_launch(n, fn, arg));
    vt_end(name);
#endif
}

#define ARR(a) (a), (int)(sizeof(a) / sizeof((a)[0]))

/* placements for the all-pairs lists */
static const char* const A_1D[] = {"R", "S0", "S1", "S2", "Ps", "Px", "Pn"};
static const char* const A_1D_SMALL[] = {"R", "S0", "S2", "Ps", "Px"};
static const char* const A_2D[] = {"R", "S0", "S1", "S2", "Ps", "Px"};
static const char* const A_2D_SMALL[] = {"R", "S0", "S2", "Ps", "Px"};
static const char* const A_1D_AVG[] = {"R", "S0", "S2", "Pa", "Ps", "Px"};
static const char* const A_2D_AVG[] = {"R", "S0", "S1", "Pa", "Ps", "Pn"};
static const char* const A_RANKS_2D[] = {"R", "S0", "S1", "S3", "S4", "Ps", "Px"};
static const char* const A_RANKS_3D[] = {"R", "S0", "S1", "S3", "Ps"};
/* (2,2,2): Replicate, one shard of each tensor dim on each mesh dim, two and three
   dims sharded, nested shards in both orders, Partial(sum/max/min) mixes */
static const char* const L_3D[] = {
    "R R R",
    "S0 R R", "S1 R R", "S2 R R", "R S0 R", "R S1 R", "R S2 R", "R R S0", "R R S1", "R R S2",
    "S0 S1 R", "S1 S0 R", "R S0 S2", "S2 R S1",
    "S0 S0 R", "R S1 S1", "S2 R S2", "S0 S0 S0", "S1 S1 S0", "S0 S1 S0", "S1 S0 S0",
    "S0 S1 S2", "S2 S1 S0", "S1 S2 S0",
    "Ps R R", "R Ps R", "R R Ps", "Ps Ps Ps", "Px R R", "R R Px", "Ps S0 R", "S1 Ps S0", "Px S2 S2",
    "S0 S0 Ps", "Ps Px S1", "Px Ps R", "S2 Px Ps", "R Pn S0", "Pn Px Ps",
};
static const char* const L_3D_AVG[] = {
    "R R R", "Pa R R", "R Pa S0", "Pa Pa R", "Pa Ps S1", "S0 Pa Px", "Ps R Pa", "S1 S1 Pa", "Px Pa Pn", "S0 S1 S2",
    "S2 S2 R", "Pa Pa Pa",
};

#define SH3 {8, 4, 6}, {5, 3, 7}, {3, 1, 2}

static rd_case RD[] = {
    /* ---- all pairs, i64, meshes (4), (2,2), (2,2,2) ---- */
    {"redistribute mesh (4), all pairs of 7 layouts, i64, (8,4,6) (5,3,7) (3,1,2)", 1, {4}, ARR(A_1D), NULL, 0,
     3, {3, 3, 3}, {SH3}, 1, {VS_I64}, 1, {{0}}},
    {"redistribute mesh (2,2), all pairs of 36 layouts, i64, (8,4,6) (5,3,7) (3,1,2)", 2, {2, 2}, ARR(A_2D), NULL, 0,
     3, {3, 3, 3}, {SH3}, 1, {VS_I64}, 1, {{0}}},
    {"redistribute mesh (2,2,2), all pairs of 39 layouts, i64, (8,4,6) (5,3,7) (3,1,2)", 3, {2, 2, 2}, NULL, 0,
     ARR(L_3D), 3, {3, 3, 3}, {SH3}, 1, {VS_I64}, 1, {{0}}},
    /* ---- i32 ---- */
    {"redistribute mesh (4), all pairs, i32, (5,3,7) (3,1,2)", 1, {4}, ARR(A_1D), NULL, 0, 2, {3, 3},
     {{5, 3, 7}, {3, 1, 2}}, 1, {VS_I32}, 1, {{0}}},
    {"redistribute mesh (2,2,2), all pairs, i32, (5,3,7)", 3, {2, 2, 2}, NULL, 0, ARR(L_3D), 1, {3}, {{5, 3, 7}}, 1,
     {VS_I32}, 1, {{0}}},
    /* ---- other dtypes ---- */
    {"redistribute mesh (4), all pairs, f32 f64 f16 bf16 u8, (5,3,7)", 1, {4}, ARR(A_1D), NULL, 0, 1, {3},
     {{5, 3, 7}}, 5, {VS_F32, VS_F64, VS_F16, VS_BF16, VS_U8}, 1, {{0}}},
    {"redistribute mesh (2,2), all pairs, f32 f64 f16 bf16 u8, (5,3,7)", 2, {2, 2}, ARR(A_2D), NULL, 0, 1, {3},
     {{5, 3, 7}}, 5, {VS_F32, VS_F64, VS_F16, VS_BF16, VS_U8}, 1, {{0}}},
    {"redistribute mesh (2,2,2), every 4th pair, f32 f64 f16 bf16 u8, (5,3,7) (3,1,2)", 3, {2, 2, 2}, NULL, 0,
     ARR(L_3D), 2, {3, 3}, {{5, 3, 7}, {3, 1, 2}}, 5, {VS_F32, VS_F64, VS_F16, VS_BF16, VS_U8}, 4, {{0}}},
    /* ---- Partial(avg): floats average, integers refuse ---- */
    {"redistribute Partial(avg) mesh (4), all pairs, f32 f64 (i64 refused), (8,4,6) (5,3,7)", 1, {4}, ARR(A_1D_AVG),
     NULL, 0, 2, {3, 3}, {{8, 4, 6}, {5, 3, 7}}, 3, {VS_F32, VS_F64, VS_I64}, 1, {{0}}},
    {"redistribute Partial(avg) mesh (2,2), all pairs, f32 f64, (5,3,7) (3,1,2)", 2, {2, 2}, ARR(A_2D_AVG), NULL, 0, 2,
     {3, 3}, {{5, 3, 7}, {3, 1, 2}}, 2, {VS_F32, VS_F64}, 1, {{0}}},
    {"redistribute Partial(avg) mesh (2,2,2), all pairs, f32 f64, (5,3,7)", 3, {2, 2, 2}, NULL, 0, ARR(L_3D_AVG), 1,
     {3}, {{5, 3, 7}}, 2, {VS_F32, VS_F64}, 1, {{0}}},
    /* ---- tensor ranks 0-D to 5-D, shard dims other than 0 ---- */
    {"redistribute ranks 0-D..5-D mesh (2,2), all pairs of 49 layouts, i64", 2, {2, 2}, ARR(A_RANKS_2D), NULL, 0, 6,
     {0, 1, 2, 4, 5, 5},
     {{0}, {7}, {5, 6}, {3, 2, 5, 4}, {2, 3, 4, 5, 3}, {1, 5, 2, 3, 2}},
     1, {VS_I64}, 1, {{0}}},
    {"redistribute ranks 0-D..5-D mesh (2,2,2), every 5th pair of 125 layouts, i64", 3, {2, 2, 2}, ARR(A_RANKS_3D),
     NULL, 0, 5, {0, 1, 2, 4, 5}, {{0}, {7}, {5, 6}, {3, 2, 5, 4}, {2, 3, 4, 5, 3}}, 1, {VS_I64}, 5, {{0}}},
    {"redistribute mesh (2,2), empty tensor (0,3,2) and (4,0), all pairs, i64", 2, {2, 2}, ARR(A_2D), NULL, 0, 2,
     {3, 2}, {{0, 3, 2}, {4, 0}}, 1, {VS_I64}, 1, {{0}}},
    /* ---- more meshes (and the sizes MPI runs with 1, 2 and 8 processes) ---- */
    {"redistribute mesh (2,4), all pairs of 25 layouts, i64, (5,3,7) (3,1,2) (9,2,4)", 2, {2, 4}, ARR(A_2D_SMALL),
     NULL, 0, 3, {3, 3, 3}, {{5, 3, 7}, {3, 1, 2}, {9, 2, 4}}, 1, {VS_I64}, 1, {{0}}},
    {"redistribute mesh (4,2), all pairs of 25 layouts, i64, (5,3,7) (3,1,2) (9,2,4)", 2, {4, 2}, ARR(A_2D_SMALL),
     NULL, 0, 3, {3, 3, 3}, {{5, 3, 7}, {3, 1, 2}, {9, 2, 4}}, 1, {VS_I64}, 1, {{0}}},
    {"redistribute mesh (8), all pairs, i64, (8,4,6) (5,3,7) (3,1,2) (17,2,1)", 1, {8}, ARR(A_1D), NULL, 0, 4,
     {3, 3, 3, 3}, {SH3, {17, 2, 1}}, 1, {VS_I64}, 1, {{0}}},
    {"redistribute mesh (2), all pairs, i64 f32, (8,4,6) (5,3,7) (3,1,2)", 1, {2}, ARR(A_1D), NULL, 0, 3, {3, 3, 3},
     {SH3}, 2, {VS_I64, VS_F32}, 1, {{0}}},
    {"redistribute mesh (1,2), all pairs of 36 layouts, i64, (5,3,7) (3,1,2)", 2, {1, 2}, ARR(A_2D), NULL, 0, 2,
     {3, 3}, {{5, 3, 7}, {3, 1, 2}}, 1, {VS_I64}, 1, {{0}}},
    {"redistribute mesh (1), all pairs, i64 f16, (5,3,7) (3,1,2)", 1, {1}, ARR(A_1D), NULL, 0, 2, {3, 3},
     {{5, 3, 7}, {3, 1, 2}}, 2, {VS_I64, VS_F16}, 1, {{0}}},
    {"redistribute mesh (1,1,1), every 7th pair of 125 layouts, i64, (5,3,7)", 3, {1, 1, 1},
     ARR(A_1D_SMALL), NULL, 0, 1, {3}, {{5, 3, 7}}, 1, {VS_I64}, 7, {{0}}},
};

static local_case LOCAL[] = {{1, {1}}, {1, {2}}, {1, {4}}, {1, {8}}, {2, {1, 2}}, {2, {2, 2}},
                             {2, {2, 4}}, {2, {4, 2}}, {3, {2, 2, 2}}, {3, {2, 1, 4}}};
static local_case FMT[] = {{1, {1}}, {1, {2}}, {2, {2, 2}}, {3, {2, 2, 2}}};
static local_case ERRS[] = {{1, {1}}, {2, {1, 2}}, {1, {4}}, {2, {2, 2}}, {3, {2, 2, 2}}};

static int mesh_n(const local_case* c)
{
    int n = 1;
    for (int k = 0; k < c->mnd; k++) n *= c->mshape[k];
    return n;
}

#ifndef VESCALE_MPI
/* Gathers and all-to-alls of the last dim with rows of large pieces (>= 1 KiB per
   rank: copied straight, not assembled) and of small ones, on 2 and 4 ranks,
   against the formula. */
static int wide_rows_rank(vs_world* w, void* arg)
{
    (void)arg;
    int n = vs_world_size(w);
    vs_mesh* m = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = n;
    VT_OK(vs_mesh_init(w, &md, &m));
    const int64_t shapes[3][2] = {{3, 1200}, {5, 37}, {2, 4100}};
    const char* pairs[3][2] = {{"[S(1)]", "[R]"}, {"[S(0)]", "[S(1)]"}, {"[S(1)]", "[S(0)]"}};
    for (int si = 0; si < 3; si++)
        for (int pi = 0; pi < 3; pi++) {
            vs_dtensor a, b;
            memset(&a, 0, sizeof a);
            a.dtype = VS_F32;
            a.ndim = 2;
            a.shape[0] = shapes[si][0];
            a.shape[1] = shapes[si][1];
            b = a;
            VT_OK(vs_layout_parse(m, pairs[pi][0], &a.layout));
            VT_OK(vs_layout_parse(m, pairs[pi][1], &b.layout));
            int64_t na = 0, nb = 0, ls[2], off[2];
            VT_OK(vs_dtensor_local_numel(&a, &na));
            VT_OK(vs_dtensor_local_numel(&b, &nb));
            float* x = (float*)malloc(sizeof(float) * (size_t)na + 4);
            float* y = (float*)malloc(sizeof(float) * (size_t)nb + 4);
            VT_OK(vs_layout_local(&a.layout, 2, a.shape, vs_mesh_rank(m), ls, off));
            for (int64_t i = 0; i < ls[0]; i++)
                for (int64_t j = 0; j < ls[1]; j++) x[i * ls[1] + j] = (float)((off[0] + i) * a.shape[1] + off[1] + j);
            a.data = x;
            b.data = y;
            VT_OK(vs_redistribute(&a, &b));
            VT_OK(vs_layout_local(&b.layout, 2, b.shape, vs_mesh_rank(m), ls, off));
            long bad = 0;
            for (int64_t i = 0; i < ls[0]; i++)
                for (int64_t j = 0; j < ls[1]; j++)
                    bad += y[i * ls[1] + j] != (float)((off[0] + i) * a.shape[1] + off[1] + j);
            VT_CHECK(bad == 0, "%s -> %s shape (%lld,%lld) n=%d: %ld wrong", pairs[pi][0], pairs[pi][1],
                     (long long)a.shape[0], (long long)a.shape[1], n, bad);
            free(x);
            free(y);
        }
    VT_OK(vs_mesh_free(m));
    return 0;
}
#endif

int main(void)
{
    setenv("VESCALE_TIMEOUT", "60", 0); /* a hang fails in a minute, not five */
#ifdef VESCALE_MPI
    vs_result wr = vs_world_init(&(vs_world_desc){.transport = VS_TRANSPORT_MPI}, &g_world);
    if (wr != VS_OK) {
        fprintf(stderr, "vs_world_init(MPI): %s: %s\n", vs_result_string(wr), vs_last_error());
        return 1;
    }
    g_rank = vs_world_rank(g_world);
#endif
    char name[200], mt[32];

    for (int i = 0; i < (int)(sizeof LOCAL / sizeof LOCAL[0]); i++) {
        tmesh M = tmesh_of(LOCAL[i].mnd, LOCAL[i].mshape);
        tmesh_text(&M, mt, sizeof mt);
        snprintf(name, sizeof name, "layout local: mesh %s, every layout of R/Shard/Partial, 0-D..5-D shapes, coverage", mt);
        run_case(name, M.n, case_local, &LOCAL[i]);
    }
    run_case("layout local: torch.chunk worked examples, mesh (4)", 4, case_examples4, NULL);
    run_case("layout local: nested and 5-D worked examples, mesh (2,2)", 4, case_examples22, NULL);

    for (int i = 0; i < (int)(sizeof FMT / sizeof FMT[0]); i++) {
        tmesh M = tmesh_of(FMT[i].mnd, FMT[i].mshape);
        tmesh_text(&M, mt, sizeof mt);
        snprintf(name, sizeof name, "layout format/parse: mesh %s, exact text, round trips, short forms, bad text", mt);
        run_case(name, M.n, case_format_parse, &FMT[i]);
    }
    run_case("layout parse: tab/newline right after a bare R/P/Replicate/Partial", 1, case_parse_ws_bare, NULL);

    for (int i = 0; i < (int)(sizeof RD / sizeof RD[0]); i++) {
        tmesh M = tmesh_of(RD[i].mnd, RD[i].mshape);
        run_case(RD[i].name, M.n, case_redistribute, &RD[i]);
    }

    for (int i = 0; i < (int)(sizeof ERRS / sizeof ERRS[0]); i++) {
        tmesh M = tmesh_of(ERRS[i].mnd, ERRS[i].mshape);
        tmesh_text(&M, mt, sizeof mt);
        snprintf(name, sizeof name, "redistribute bad input: mesh %s", mt);
        run_case(name, mesh_n(&ERRS[i]), case_errors, &ERRS[i]);
    }

#ifdef VESCALE_MPI
    int rc = 0;
    if (g_rank == 0) rc = vt_summary();
    vs_world_free(g_world);
    return rc;
#else
#ifndef VESCALE_MPI
    VT_CASE("redistribute rows of the last dim: large and small pieces, n=2 and 4", {
        VT_OK(vs_launch(2, wide_rows_rank, NULL));
        VT_OK(vs_launch(4, wide_rows_rank, NULL));
    });
#endif
    return vt_summary();
#endif
}
