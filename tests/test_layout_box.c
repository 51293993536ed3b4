/* test_layout_box.c - layout arithmetic without a mesh (vs_layout_box,
   vs_layout_rank_coord, vs_layout_parse_placements; the `// >>layout` section).

   For every layout of tensors of 0, 1 and 2 dims (each mesh dim Replicate,
   Shard(0), Shard(1) or Partial) on 11 mesh shapes of 1 to 4 dims (sizes 1, uneven
   chunkings), and tensor shapes with 0-size dims and dims smaller than the mesh,
   every mesh rank of a live mesh of that shape (a vs_launch job, one thread per
   rank) checks that vs_layout_box for its coordinate gives:
     - what vs_layout_local gives on the live mesh for its mesh rank,
     - what this file computes independently: Shard(d) cuts dim d like
       torch.chunk(n, m) (chunks of ceil(n/m) from the front, the last one short,
       and there are only ceil(n/ceil(n/m)) of them); a coordinate past the last
       chunk gets an empty shard at the end of the chunk it cuts; mesh dims cut in
       order, outer first, each cutting the chunk of the one before.
   Mesh rank 0 also checks every other mesh rank through vs_layout_local(rank) and
   vs_layout_rank_coord, and that the boxes tile the tensor. Layouts a tensor does
   not fit (Shard(1) of a 1-D tensor) are VS_ERR_INVALID from both. Then the
   arithmetic on meshes far larger than any job (no mesh), and the bad input. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "tests/vs_test.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mcase {
    int nd;
    int shape[4];
} mcase;

/* 1-D to 4-D; sizes 1; 5 and 3 that chunk unevenly; at most 16 ranks */
static const mcase MESHES[] = {
    {1, {1}},       {1, {2}},       {1, {4}},          {1, {5}},          {2, {1, 3}},       {2, {2, 3}},
    {2, {4, 2}},    {3, {3, 1, 2}}, {3, {2, 2, 2}},    {4, {2, 1, 3, 2}}, {4, {2, 2, 2, 2}},
};
#define NMESH ((int)(sizeof MESHES / sizeof MESHES[0]))

typedef struct tshape {
    int ndim;
    int64_t s[2];
} tshape;

static const tshape SHAPES[] = {
    {0, {0, 0}},  {1, {0, 0}},  {1, {1, 0}},  {1, {2, 0}},  {1, {3, 0}},  {1, {5, 0}},  {1, {7, 0}},
    {1, {16, 0}}, {2, {0, 3}},  {2, {3, 0}},  {2, {1, 1}},  {2, {2, 5}},  {2, {5, 3}},  {2, {3, 4}},
    {2, {7, 2}},  {2, {13, 6}}, {2, {4, 17}},
};
#define NSHAPE ((int)(sizeof SHAPES / sizeof SHAPES[0]))

static const char* const NAMES[4] = {"A", "B", "C", "D"};
static const vs_op POPS[4] = {VS_OP_SUM, VS_OP_MAX, VS_OP_AVG, VS_OP_MIN};

/* Layout number `code` (base 4, mesh dim 0 lowest): 0 R, 1 S(0), 2 S(1), 3 Partial. */
static void layout_of(int nd, int code, vs_placement* p)
{
    for (int k = 0; k < nd; k++, code /= 4) {
        int c = code % 4;
        p[k] = c == 0 ? vs_replicate() : c == 1 ? vs_shard(0) : c == 2 ? vs_shard(1) : vs_partial(POPS[k]);
    }
}

static int ipow4(int n)
{
    int r = 1;
    while (n--) r *= 4;
    return r;
}

/* torch.chunk(n, m)'s piece i, or the empty piece at n past the last one. Written
   as torch does it (pieces of size ceil(n/m), as many as it takes to cover n), not
   as the library does. */
static void ref_piece(int64_t n, int64_t m, int64_t i, int64_t* start, int64_t* len)
{
    int64_t c = n / m + (n % m ? 1 : 0);
    int64_t pieces = c ? n / c + (n % c ? 1 : 0) : 0;
    if (i < pieces) {
        *start = i * c;
        *len = i == pieces - 1 ? n - i * c : c;
    } else {
        *start = n;
        *len = 0;
    }
}

static void ref_box(int nd, const int* mshape, const vs_placement* p, int ndim, const int64_t* shape,
                    const int* coord, int64_t* ls, int64_t* off)
{
    for (int d = 0; d < ndim; d++) ls[d] = shape[d], off[d] = 0;
    for (int k = 0; k < nd; k++) {
        if (p[k].kind != VS_PLACE_SHARD) continue;
        int64_t s, l;
        ref_piece(ls[p[k].dim], mshape[k], coord[k], &s, &l);
        off[p[k].dim] += s;
        ls[p[k].dim] = l;
    }
}

static int fits(int nd, const vs_placement* p, int ndim)
{
    for (int k = 0; k < nd; k++)
        if (p[k].kind == VS_PLACE_SHARD && p[k].dim >= ndim) return 0;
    return 1;
}

static void text_of(int nd, const int* mshape, const vs_placement* p, int ndim, const int64_t* shape, char* buf,
                    size_t cap)
{
    size_t l = (size_t)snprintf(buf, cap, "mesh (");
    for (int k = 0; k < nd; k++) l += (size_t)snprintf(buf + l, cap - l, "%s%d", k ? "," : "", mshape[k]);
    l += (size_t)snprintf(buf + l, cap - l, ") [");
    for (int k = 0; k < nd; k++)
        l += (size_t)snprintf(buf + l, cap - l, "%s%s", k ? " " : "",
                              p[k].kind == VS_PLACE_SHARD ? (p[k].dim ? "S1" : "S0")
                              : p[k].kind == VS_PLACE_PARTIAL ? "P" : "R");
    l += (size_t)snprintf(buf + l, cap - l, "] tensor (");
    for (int d = 0; d < ndim; d++) l += (size_t)snprintf(buf + l, cap - l, "%s%lld", d ? "," : "", (long long)shape[d]);
    snprintf(buf + l, cap - l, ")");
}

/* vs_layout_box at `coord` against the reference and (ls_live, off_live) (NULL:
   not given). Returns the box's element count, -1 on a failure. */
static int64_t check_one(int nd, const int* mshape, const vs_placement* p, int ndim, const int64_t* shape,
                         const int* coord, const int64_t* ls_live, const int64_t* off_live, const char* what)
{
    int64_t ls[2] = {-7, -7}, off[2] = {-7, -7}, rls[2], roff[2];
    vs_result r = vs_layout_box(nd, mshape, p, ndim, shape, coord, ls, off);
    char t[160];
    text_of(nd, mshape, p, ndim, shape, t, sizeof t);
    VT_CHECK(r == VS_OK, "%s: %s: vs_layout_box: %s", what, t, vs_last_error());
    if (r != VS_OK) return -1;
    ref_box(nd, mshape, p, ndim, shape, coord, rls, roff);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        VT_CHECK(ls[d] == rls[d] && off[d] == roff[d], "%s: %s dim %d: box size %lld at %lld, reference %lld at %lld",
                 what, t, d, (long long)ls[d], (long long)off[d], (long long)rls[d], (long long)roff[d]);
        if (ls_live)
            VT_CHECK(ls[d] == ls_live[d] && off[d] == off_live[d],
                     "%s: %s dim %d: box size %lld at %lld, vs_layout_local %lld at %lld", what, t, d, (long long)ls[d],
                     (long long)off[d], (long long)ls_live[d], (long long)off_live[d]);
        VT_CHECK(ls[d] >= 0 && off[d] >= 0 && off[d] + ls[d] <= shape[d], "%s: %s dim %d: box [%lld, +%lld) of %lld",
                 what, t, d, (long long)off[d], (long long)ls[d], (long long)shape[d]);
        n *= ls[d];
    }
    return n;
}

static int rank_main(vs_world* w, void* arg)
{
    const mcase* M = (const mcase*)arg;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.ndims = M->nd;
    for (int k = 0; k < M->nd; k++) md.shape[k] = M->shape[k], md.dim_names[k] = NAMES[k];
    vs_mesh* mesh = NULL;
    VT_OK(vs_mesh_init(w, &md, &mesh));
    if (!mesh) return 1;
    int me = vs_mesh_rank(mesh), nranks = vs_mesh_nranks(mesh), nd = M->nd;
    int coord[VS_MESH_MAX_DIMS], c2[VS_MESH_MAX_DIMS];
    VT_OK(vs_mesh_coord(mesh, coord));
    VT_OK(vs_layout_rank_coord(nd, M->shape, me, c2));
    for (int k = 0; k < nd; k++)
        VT_CHECK(c2[k] == coord[k], "rank %d: vs_layout_rank_coord dim %d = %d, mesh %d", me, k, c2[k], coord[k]);
    for (int code = 0; code < ipow4(nd); code++) {
        vs_layout L;
        memset(&L, 0, sizeof L);
        L.mesh = mesh;
        layout_of(nd, code, L.p);
        /* the text round trip: the mesh's format, parsed without the mesh */
        char txt[256];
        vs_layout_format(&L, txt, sizeof txt);
        vs_placement back[VS_MESH_MAX_DIMS];
        VT_OK(vs_layout_parse_placements(nd, txt, back));
        for (int k = 0; k < nd; k++)
            VT_CHECK(back[k].kind == L.p[k].kind && back[k].dim == L.p[k].dim && back[k].op == L.p[k].op,
                     "'%s' parsed back differs on mesh dim %d", txt, k);
        for (int si = 0; si < NSHAPE; si++) {
            const tshape* S = &SHAPES[si];
            int64_t lls[2] = {-9, -9}, loff[2] = {-9, -9}, bls[2] = {-9, -9}, boff[2] = {-9, -9};
            if (!fits(nd, L.p, S->ndim)) {
                VT_ERR(vs_layout_local(&L, S->ndim, S->s, me, lls, loff), VS_ERR_INVALID, "Shard(");
                VT_ERR(vs_layout_box(nd, M->shape, L.p, S->ndim, S->s, coord, bls, boff), VS_ERR_INVALID, "Shard(");
                VT_CHECK(bls[0] == -9 && bls[1] == -9 && boff[0] == -9 && boff[1] == -9,
                         "vs_layout_box wrote its outputs on an error");
                continue;
            }
            VT_OK(vs_layout_local(&L, S->ndim, S->s, me, lls, loff));
            int64_t n = check_one(nd, M->shape, L.p, S->ndim, S->s, coord, lls, loff, "own rank");
            vs_dtensor t;
            memset(&t, 0, sizeof t);
            t.layout = L;
            t.dtype = VS_F32;
            t.ndim = S->ndim;
            memcpy(t.shape, S->s, sizeof S->s);
            int64_t numel = -1;
            VT_OK(vs_dtensor_local_numel(&t, &numel));
            VT_CHECK(numel == n, "local numel %lld, box %lld", (long long)numel, (long long)n);
            if (me != 0) continue;
            /* every mesh rank through the live mesh, and the tiling: the boxes of the
               coordinates cover the tensor once per replica (non-Shard mesh dims) */
            int64_t total = 0, want = 1;
            for (int d = 0; d < S->ndim; d++) want *= S->s[d];
            for (int k = 0; k < nd; k++)
                if (L.p[k].kind != VS_PLACE_SHARD) want *= M->shape[k];
            for (int r = 0; r < nranks; r++) {
                int rc[VS_MESH_MAX_DIMS], mc[VS_MESH_MAX_DIMS];
                VT_OK(vs_layout_rank_coord(nd, M->shape, r, rc));
                VT_OK(vs_mesh_coord_of(mesh, r, mc));
                for (int k = 0; k < nd; k++)
                    VT_CHECK(rc[k] == mc[k], "rank %d dim %d: coordinate %d, mesh %d", r, k, rc[k], mc[k]);
                VT_OK(vs_layout_local(&L, S->ndim, S->s, r, lls, loff));
                total += check_one(nd, M->shape, L.p, S->ndim, S->s, rc, lls, loff, "rank 0 for all");
            }
            char tt[160];
            text_of(nd, M->shape, L.p, S->ndim, S->s, tt, sizeof tt);
            VT_CHECK(total == want, "%s: boxes hold %lld elements, want %lld", tt, (long long)total, (long long)want);
        }
    }
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

/* Meshes no job has: the arithmetic alone, against the reference. */
static void big_meshes(void)
{
    const int m2[2] = {1000, 999};
    vs_placement p[3] = {vs_shard(0), vs_shard(0), vs_partial(VS_OP_DEFAULT)};
    const int64_t s1[1] = {1000000007};
    const int coords[][2] = {{0, 0}, {0, 998}, {999, 0}, {999, 998}, {500, 500}, {17, 3}};
    for (size_t i = 0; i < sizeof coords / sizeof coords[0]; i++)
        check_one(2, m2, p, 1, s1, coords[i], NULL, NULL, "1000x999");
    /* near INT64_MAX: no overflow in the chunk arithmetic */
    const int m3[3] = {3, 7, 1 << 20};
    vs_placement q[3] = {vs_shard(1), vs_shard(0), vs_shard(1)};
    const int64_t s2[2] = {INT64_MAX / 5, 5};
    const int c3[][3] = {{0, 0, 0}, {2, 6, (1 << 20) - 1}, {1, 3, 12345}, {2, 0, 1}};
    for (size_t i = 0; i < sizeof c3 / sizeof c3[0]; i++) check_one(3, m3, q, 2, s2, c3[i], NULL, NULL, "huge");
    /* the examples of the header comment */
    const int m23[2] = {2, 3}, c02[2] = {0, 2}, m4[1] = {4}, c3b[1] = {3};
    const int64_t four[1] = {4}, three[1] = {3};
    int64_t ls = -1, off = -1;
    VT_OK(vs_layout_box(2, m23, p, 1, four, c02, &ls, &off));
    VT_CHECK(ls == 0 && off == 2, "Shard(0),Shard(0) of 4 on 2x3 at (0,2): size %lld at %lld", (long long)ls,
             (long long)off);
    VT_OK(vs_layout_box(1, m4, p, 1, three, c3b, &ls, &off));
    VT_CHECK(ls == 0 && off == 3, "Shard(0) of 3 on 4 at 3: size %lld at %lld", (long long)ls, (long long)off);
    /* NULL outputs and a 0-dim tensor without a shape */
    VT_OK(vs_layout_box(2, m23, p, 1, four, c02, NULL, NULL));
    vs_placement rp[2] = {vs_replicate(), vs_partial(VS_OP_MAX)};
    VT_OK(vs_layout_box(2, m23, rp, 0, NULL, c02, NULL, NULL));
}

static void bad_input(void)
{
    const int ms[2] = {2, 3}, coord[2] = {1, 2};
    vs_placement p[2] = {vs_shard(0), vs_shard(1)};
    const int64_t sh[2] = {5, 4};
    int64_t ls[2] = {-9, -9}, off[2] = {-9, -9};
    /* the mesh shape */
    VT_EXPECT_ERR(vs_layout_box(0, ms, p, 2, sh, coord, ls, off), VS_ERR_INVALID, "vs_layout_box", "mesh_ndims 0");
    VT_ERR(vs_layout_box(9, ms, p, 2, sh, coord, ls, off), VS_ERR_INVALID, "mesh_ndims 9");
    VT_ERR(vs_layout_box(-1, ms, p, 2, sh, coord, ls, off), VS_ERR_INVALID, "mesh_ndims -1");
    VT_ERR(vs_layout_box(2, NULL, p, 2, sh, coord, ls, off), VS_ERR_NULL, "mesh_shape");
    const int z[2] = {2, 0}, neg[2] = {-2, 3}, huge[2] = {65536, 65536};
    VT_ERR(vs_layout_box(2, z, p, 2, sh, coord, ls, off), VS_ERR_INVALID, "mesh_shape[1] = 0");
    VT_ERR(vs_layout_box(2, neg, p, 2, sh, coord, ls, off), VS_ERR_INVALID, "mesh_shape[0] = -2");
    VT_ERR(vs_layout_box(2, huge, p, 2, sh, coord, ls, off), VS_ERR_INVALID, "INT_MAX");
    /* placements */
    VT_ERR(vs_layout_box(2, ms, NULL, 2, sh, coord, ls, off), VS_ERR_NULL, "placements");
    vs_placement bad[2] = {vs_shard(2), vs_replicate()};
    VT_EXPECT_ERR(vs_layout_box(2, ms, bad, 2, sh, coord, ls, off), VS_ERR_INVALID, "Shard(2) on mesh dim 0",
                  "tensor has 2 dims");
    bad[0] = vs_shard(-1);
    VT_ERR(vs_layout_box(2, ms, bad, 2, sh, coord, ls, off), VS_ERR_INVALID, "Shard(-1)");
    bad[0] = vs_replicate();
    bad[1] = vs_partial(VS_OP_SUM);
    bad[1].op = VS_OP_COUNT;
    VT_ERR(vs_layout_box(2, ms, bad, 2, sh, coord, ls, off), VS_ERR_INVALID, "invalid op 5 on mesh dim 1");
    bad[1].kind = (vs_placement_kind)7;
    VT_ERR(vs_layout_box(2, ms, bad, 2, sh, coord, ls, off), VS_ERR_INVALID, "invalid placement kind 7");
    /* the tensor */
    VT_ERR(vs_layout_box(2, ms, p, 9, sh, coord, ls, off), VS_ERR_INVALID, "tensor of 9 dims");
    VT_ERR(vs_layout_box(2, ms, p, -1, sh, coord, ls, off), VS_ERR_INVALID, "tensor of -1 dims");
    VT_ERR(vs_layout_box(2, ms, p, 2, NULL, coord, ls, off), VS_ERR_NULL, "shape");
    const int64_t nsh[2] = {5, -4}, bigsh[2] = {INT64_MAX / 2, 3};
    VT_ERR(vs_layout_box(2, ms, p, 2, nsh, coord, ls, off), VS_ERR_INVALID, "shape[1] = -4");
    VT_ERR(vs_layout_box(2, ms, p, 2, bigsh, coord, ls, off), VS_ERR_INVALID, "2^63");
    /* the coordinate */
    VT_ERR(vs_layout_box(2, ms, p, 2, sh, NULL, ls, off), VS_ERR_NULL, "coord");
    const int c_hi[2] = {1, 3}, c_neg[2] = {-1, 0};
    VT_EXPECT_ERR(vs_layout_box(2, ms, p, 2, sh, c_hi, ls, off), VS_ERR_INVALID, "coord[1] = 3", "[0, 3)");
    VT_ERR(vs_layout_box(2, ms, p, 2, sh, c_neg, ls, off), VS_ERR_INVALID, "coord[0] = -1");
    /* the coordinate of a Replicate/Partial mesh dim is checked too */
    vs_placement rp[2] = {vs_replicate(), vs_partial(VS_OP_AVG)};
    VT_ERR(vs_layout_box(2, ms, rp, 2, sh, c_hi, ls, off), VS_ERR_INVALID, "coord[1] = 3");
    for (int d = 0; d < 2; d++)
        VT_CHECK(ls[d] == -9 && off[d] == -9, "vs_layout_box wrote its outputs on an error (dim %d)", d);

    /* vs_layout_rank_coord */
    int c[VS_MESH_MAX_DIMS] = {-9, -9};
    VT_ERR(vs_layout_rank_coord(2, ms, 6, c), VS_ERR_INVALID, "mesh rank 6 out of range [0, 6)");
    VT_ERR(vs_layout_rank_coord(2, ms, -1, c), VS_ERR_INVALID, "mesh rank -1");
    VT_ERR(vs_layout_rank_coord(2, ms, 0, NULL), VS_ERR_NULL, "coord");
    VT_ERR(vs_layout_rank_coord(2, NULL, 0, c), VS_ERR_NULL, "mesh_shape");
    VT_ERR(vs_layout_rank_coord(0, ms, 0, c), VS_ERR_INVALID, "mesh_ndims 0");
    VT_ERR(vs_layout_rank_coord(2, z, 0, c), VS_ERR_INVALID, "mesh_shape[1] = 0");
    VT_CHECK(c[0] == -9 && c[1] == -9, "vs_layout_rank_coord wrote coord on an error");
    VT_OK(vs_layout_rank_coord(2, ms, 5, c));
    VT_CHECK(c[0] == 1 && c[1] == 2, "rank 5 of 2x3: (%d, %d), want (1, 2)", c[0], c[1]);

    /* vs_layout_parse_placements */
    vs_placement out[3] = {vs_shard(5), vs_shard(5), vs_shard(5)};
    VT_ERR(vs_layout_parse_placements(0, "[R]", out), VS_ERR_INVALID, "mesh_ndims 0");
    VT_ERR(vs_layout_parse_placements(9, "[R]", out), VS_ERR_INVALID, "mesh_ndims 9");
    VT_ERR(vs_layout_parse_placements(2, NULL, out), VS_ERR_NULL, "text");
    VT_ERR(vs_layout_parse_placements(2, "[R, R]", NULL), VS_ERR_NULL, "out");
    VT_EXPECT_ERR(vs_layout_parse_placements(2, "[R, S(0), P]", out), VS_ERR_INVALID, "vs_layout_parse_placements",
                  "more placements than the mesh's 2 dims");
    VT_ERR(vs_layout_parse_placements(3, "[R, S(0)]", out), VS_ERR_INVALID, "has 2 placements, the mesh has 3 dims");
    VT_ERR(vs_layout_parse_placements(2, "[R, Q]", out), VS_ERR_INVALID, "bad placement at 'Q]'");
    VT_ERR(vs_layout_parse_placements(2, "R, R", out), VS_ERR_INVALID, "does not start with '['");
    VT_ERR(vs_layout_parse_placements(2, "[R, R] x", out), VS_ERR_INVALID, "trailing text 'x'");
    VT_ERR(vs_layout_parse_placements(2, "[S(0) R]", out), VS_ERR_INVALID, "expected ',' or ']'");
    for (int k = 0; k < 3; k++)
        VT_CHECK(out[k].kind == VS_PLACE_SHARD && out[k].dim == 5, "out[%d] written on an error", k);
    VT_OK(vs_layout_parse_placements(2, " [ S(1) , P(max) ] ", out));
    VT_CHECK(out[0].kind == VS_PLACE_SHARD && out[0].dim == 1 && out[1].kind == VS_PLACE_PARTIAL &&
                 out[1].op == VS_OP_MAX && out[2].kind == VS_PLACE_SHARD && out[2].dim == 5,
             "[S(1), P(max)] parsed wrong, or out[2] written");
    /* a Shard dim the text allows but the tensor does not: vs_layout_box says so */
    VT_OK(vs_layout_parse_placements(2, "[Shard(3), Replicate]", out));
    VT_ERR(vs_layout_box(2, ms, out, 2, sh, coord, ls, off), VS_ERR_INVALID, "Shard(3) on mesh dim 0");
}

int main(void)
{
    for (int i = 0; i < NMESH; i++) {
        const mcase* M = &MESHES[i];
        int n = 1;
        char name[96];
        size_t l = (size_t)snprintf(name, sizeof name, "layout box: every layout and coordinate, mesh (");
        for (int k = 0; k < M->nd; k++) {
            n *= M->shape[k];
            l += (size_t)snprintf(name + l, sizeof name - l, "%s%d", k ? "," : "", M->shape[k]);
        }
        snprintf(name + l, sizeof name - l, ")");
        vt_begin(name);
        VT_OK(vs_launch(n, rank_main, (void*)M));
        vt_end(name);
    }
    VT_CASE("layout box: meshes no job has, overflow, the documented empty shards", big_meshes());
    VT_CASE("layout box: bad input", bad_input());
    return vt_summary();
}
