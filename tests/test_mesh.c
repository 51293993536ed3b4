/* test_mesh.c - the device mesh (the `// >>mesh` section of vescale_mesh.h).

   One source, two modes:
     - threads transport (default): every case runs on its own vs_launch job;
     - -DVESCALE_MPI (mpicc, run under mpirun -np N): one MPI world; the cases whose
       world size is N run (others are skipped silently), a failure on any rank is
       counted on rank 0, and only rank 0 prints.

   Every expected value (coordinates, member lists, group rows, neighbours) is
   computed here independently of the implementation: row-major decomposition of
   the mesh rank, members of a submesh ordered row-major over its dims in the order
   given. The PyTorch DeviceMesh recipe's worked example is hard-coded. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "tests/vs_test.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXR 64 /* largest mesh the tests build is 8 ranks */

/* ------------------------------------------------------------------------- */
/* Independent reference model                                               */

typedef struct spec {
    char label[160];
    int nd;
    int shape[VS_MESH_MAX_DIMS];
    char names[VS_MESH_MAX_DIMS][VS_MESH_NAME_MAX];
    int nranks;
    int gmap[MAXR]; /* global (world) rank of each mesh rank */
    int myrank;     /* this rank's mesh rank */
} spec;

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

static const char* default_name(int nd, int d)
{
    static const char* one[1] = {"DP"};
    static const char* two[2] = {"DP", "TP"};
    static const char* three[3] = {"PP", "DP", "TP"};
    if (nd == 1) return one[d];
    if (nd == 2) return two[d];
    if (nd == 3) return three[d];
    return "?";
}

/* Global ranks (and mesh ranks) of the submesh over dims D[0..k) (D[0] outermost)
   that contains mesh rank `mesh_rank`. Returns the member count. */
static int expected_group(const spec* s, const int* D, int k, int mesh_rank, int* out_global,
                          int* out_mesh)
{
    int base[VS_MESH_MAX_DIMS], sz[VS_MESH_MAX_DIMS];
    decompose(s->nd, s->shape, mesh_rank, base);
    int n = 1;
    for (int i = 0; i < k; i++) {
        sz[i] = s->shape[D[i]];
        n *= sz[i];
    }
    for (int j = 0; j < n; j++) {
        int sc[VS_MESH_MAX_DIMS], c[VS_MESH_MAX_DIMS];
        decompose(k, sz, j, sc);
        memcpy(c, base, sizeof c);
        for (int i = 0; i < k; i++) c[D[i]] = sc[i];
        int mr = compose(s->nd, s->shape, c);
        if (out_global) out_global[j] = s->gmap[mr];
        if (out_mesh) out_mesh[j] = mr;
    }
    return n;
}

static void dims_string(const spec* s, const int* D, int k, char* buf, size_t cap)
{
    buf[0] = 0;
    for (int i = 0; i < k; i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, cap - len, "%s%s", i ? "," : "", s->names[D[i]]);
    }
}

/* The spec of the submesh over D containing this rank. */
static void sub_spec(const spec* s, const int* D, int k, spec* out)
{
    char dims[256];
    dims_string(s, D, k, dims, sizeof dims);
    memset(out, 0, sizeof *out);
    snprintf(out->label, sizeof out->label, "%.100s sub[%.50s]", s->label, dims);
    out->nd = k;
    for (int i = 0; i < k; i++) {
        out->shape[i] = s->shape[D[i]];
        memcpy(out->names[i], s->names[D[i]], VS_MESH_NAME_MAX);
    }
    out->nranks = expected_group(s, D, k, s->myrank, out->gmap, NULL);
    int mine[VS_MESH_MAX_DIMS], sc[VS_MESH_MAX_DIMS];
    decompose(s->nd, s->shape, s->myrank, mine);
    for (int i = 0; i < k; i++) sc[i] = mine[D[i]];
    out->myrank = compose(k, out->shape, sc);
}

static void world_spec(spec* s, const char* label, int nd, const int* shape,
                       const char* const* names, int myrank)
{
    memset(s, 0, sizeof *s);
    snprintf(s->label, sizeof s->label, "%s", label);
    s->nd = nd;
    s->nranks = 1;
    for (int d = 0; d < nd; d++) {
        s->shape[d] = shape[d];
        s->nranks *= shape[d];
        snprintf(s->names[d], VS_MESH_NAME_MAX, "%s",
                 names && names[d] ? names[d] : default_name(nd, d));
    }
    for (int i = 0; i < s->nranks && i < MAXR; i++) s->gmap[i] = i;
    s->myrank = myrank;
}

static int list_eq(const int* a, const int* b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

static void fmt_list(const int* a, int n, char* buf, size_t cap)
{
    buf[0] = 0;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(buf);
        if (len + 1 >= cap) break;
        snprintf(buf + len, cap - len, "%s%d", i ? "," : "[", a[i]);
    }
    size_t len = strlen(buf);
    if (len + 1 < cap) snprintf(buf + len, cap - len, "%s", n ? "]" : "[]");
}

/* ------------------------------------------------------------------------- */
/* Checks of one mesh (or submesh) against its spec                          */

static void check_layout(vs_world* w, vs_mesh* m, const spec* s)
{
    const char* L = s->label;
    const int nd = s->nd;
    VT_CHECK(vs_mesh_ndims(m) == nd, "%s: ndims %d, want %d", L, vs_mesh_ndims(m), nd);
    for (int d = 0; d < nd; d++) {
        const char* nm = vs_mesh_dim_name(m, d);
        VT_CHECK(nm && strcmp(nm, s->names[d]) == 0, "%s: dim %d named \"%s\", want \"%s\"", L,
                 d, nm ? nm : "(null)", s->names[d]);
        VT_CHECK(vs_mesh_dim_index(m, s->names[d]) == d, "%s: dim_index(%s) %d, want %d", L,
                 s->names[d], vs_mesh_dim_index(m, s->names[d]), d);
        VT_CHECK(vs_mesh_size(m, s->names[d]) == s->shape[d], "%s: size(%s) %d, want %d", L,
                 s->names[d], vs_mesh_size(m, s->names[d]), s->shape[d]);
    }
    VT_CHECK(vs_mesh_nranks(m) == s->nranks, "%s: nranks %d, want %d", L, vs_mesh_nranks(m),
             s->nranks);
    VT_CHECK(vs_mesh_rank(m) == s->myrank, "%s: mesh rank %d, want %d", L, vs_mesh_rank(m),
             s->myrank);
    vs_comm* c = vs_mesh_comm(m);
    VT_CHECK(c != NULL, "%s: vs_mesh_comm is NULL", L);
    if (c) {
        VT_CHECK(vs_comm_size(c) == s->nranks, "%s: comm size %d, want %d", L, vs_comm_size(c),
                 s->nranks);
        VT_CHECK(vs_comm_rank(c) == s->myrank, "%s: comm rank %d, want %d", L, vs_comm_rank(c),
                 s->myrank);
    }
    VT_CHECK(vs_mesh_world(m) == w, "%s: vs_mesh_world is not the world", L);
    VT_CHECK(vs_mesh_local_rank(m) == vs_world_local_rank(w), "%s: local rank %d, want %d", L,
             vs_mesh_local_rank(m), vs_world_local_rank(w));
    VT_CHECK(s->gmap[s->myrank] == vs_world_rank(w), "%s: test model: gmap[%d]=%d != world rank %d",
             L, s->myrank, s->gmap[s->myrank], vs_world_rank(w));

    int want[VS_MESH_MAX_DIMS], got[VS_MESH_MAX_DIMS];
    decompose(nd, s->shape, s->myrank, want);
    for (int d = 0; d < VS_MESH_MAX_DIMS; d++) got[d] = -7;
    VT_OK(vs_mesh_coord(m, got));
    for (int d = 0; d < nd; d++) {
        VT_CHECK(got[d] == want[d], "%s: coord[%d] %d, want %d (mesh rank %d)", L, d, got[d],
                 want[d], s->myrank);
        int a = vs_mesh_coord_along(m, s->names[d]);
        VT_CHECK(a == want[d], "%s: coord_along(%s) %d, want %d", L, s->names[d], a, want[d]);
        int f = vs_mesh_is_first(m, s->names[d]), l = vs_mesh_is_last(m, s->names[d]);
        VT_CHECK(f == (want[d] == 0), "%s: is_first(%s) %d at coord %d", L, s->names[d], f,
                 want[d]);
        VT_CHECK(l == (want[d] == s->shape[d] - 1), "%s: is_last(%s) %d at coord %d of %d", L,
                 s->names[d], l, want[d], s->shape[d]);
    }

    /* every mesh rank: coord_of / rank_of round trip, global rank */
    for (int i = 0; i < s->nranks; i++) {
        int wc[VS_MESH_MAX_DIMS], gc[VS_MESH_MAX_DIMS];
        decompose(nd, s->shape, i, wc);
        for (int d = 0; d < VS_MESH_MAX_DIMS; d++) gc[d] = -7;
        VT_OK(vs_mesh_coord_of(m, i, gc));
        VT_CHECK(list_eq(gc, wc, nd), "%s: coord_of(%d) wrong (first coord %d, want %d)", L, i,
                 gc[0], wc[0]);
        int r = -7;
        VT_OK(vs_mesh_rank_of(m, wc, &r));
        VT_CHECK(r == i, "%s: rank_of(coord of %d) = %d", L, i, r);
        int g = vs_mesh_global_rank(m, i);
        VT_CHECK(g == s->gmap[i], "%s: global_rank(%d) = %d, want %d", L, i, g, s->gmap[i]);
    }

    /* neighbours */
    static const int offs[3] = {-1, 1, 2};
    for (int d = 0; d < nd; d++) {
        int sz = s->shape[d];
        for (int oi = 0; oi < 3; oi++) {
            for (int wrap = 0; wrap <= 1; wrap++) {
                int off = offs[oi];
                int nc = want[d] + off;
                if (wrap) nc = ((nc % sz) + sz) % sz;
                int exp_mr = -1, exp_g = -1;
                if (nc >= 0 && nc < sz) {
                    int c2[VS_MESH_MAX_DIMS];
                    memcpy(c2, want, sizeof c2);
                    c2[d] = nc;
                    exp_mr = compose(nd, s->shape, c2);
                    exp_g = s->gmap[exp_mr];
                }
                int g = -5, mr = -5;
                VT_OK(vs_mesh_neighbor(m, s->names[d], off, wrap, &g, &mr));
                VT_CHECK(g == exp_g && mr == exp_mr,
                         "%s: neighbor(%s, %+d, wrap=%d) from coord %d: global %d mesh %d, want "
                         "%d %d",
                         L, s->names[d], off, wrap, want[d], g, mr, exp_g, exp_mr);
                if (oi == 1 && wrap == 0) {
                    int g2 = -5;
                    VT_OK(vs_mesh_neighbor(m, s->names[d], off, wrap, &g2, NULL));
                    VT_CHECK(g2 == exp_g, "%s: neighbor(%s,+1) with NULL mesh_rank: %d, want %d",
                             L, s->names[d], g2, exp_g);
                }
            }
        }
    }

    /* describe: "(PP=2, DP=2, TP=2)" */
    char exp[512] = "(";
    for (int d = 0; d < nd; d++) {
        size_t len = strlen(exp);
        snprintf(exp + len, sizeof exp - len, "%s%s=%d", d ? ", " : "", s->names[d], s->shape[d]);
    }
    strcat(exp, ")");
    char buf[512];
    memset(buf, 'X', sizeof buf);
    int len = vs_mesh_describe(m, buf, sizeof buf);
    buf[sizeof buf - 1] = 0;
    for (int d = 0; d < nd; d++) {
        char item[64];
        snprintf(item, sizeof item, "%s=%d", s->names[d], s->shape[d]);
        VT_CHECK(strstr(buf, item) != NULL, "%s: describe \"%s\" lacks \"%s\"", L, buf, item);
    }
    VT_CHECK(strcmp(buf, exp) == 0, "%s: describe \"%s\", want \"%s\"", L, buf, exp);
    VT_CHECK(len == (int)strlen(exp), "%s: describe returned %d, want %d", L, len,
             (int)strlen(exp));
    char small[6];
    memset(small, 'X', sizeof small);
    int len2 = vs_mesh_describe(m, small, sizeof small);
    VT_CHECK(len2 == (int)strlen(exp), "%s: describe(cap 6) returned %d, want %d", L, len2,
             (int)strlen(exp));
    VT_CHECK(memchr(small, 0, sizeof small) != NULL, "%s: describe(cap 6) not terminated", L);
    if (memchr(small, 0, sizeof small))
        VT_CHECK(strncmp(small, exp, strlen(small)) == 0 && strlen(small) == 5,
                 "%s: describe(cap 6) gave \"%s\", want \"%.5s\"", L, small, exp);
    int len3 = vs_mesh_describe(m, NULL, 0);
    VT_CHECK(len3 == (int)strlen(exp), "%s: describe(NULL, 0) returned %d, want %d", L, len3,
             (int)strlen(exp));
}

/* All-reduce of bits and all-gather of global ranks over the mesh's communicator
   reach exactly the members. `tag` marks the job (concurrency test). */
static void check_collectives(vs_mesh* m, const spec* s, int tag)
{
    vs_comm* c = vs_mesh_comm(m);
    if (!c) return;
    int g = s->gmap[s->myrank];
    int64_t mine = ((int64_t)1 << g) + ((int64_t)tag << 32), sum = -1, want = 0;
    for (int i = 0; i < s->nranks; i++) want += ((int64_t)1 << s->gmap[i]) + ((int64_t)tag << 32);
    VT_OK(vs_all_reduce(c, &mine, &sum, 1, VS_I64, VS_OP_SUM, NULL));
    VT_CHECK(sum == want, "%s: all-reduce of bits 0x%llx, want 0x%llx", s->label,
             (unsigned long long)sum, (unsigned long long)want);
    int32_t gi = g + 1000 * tag, all[MAXR];
    for (int i = 0; i < MAXR; i++) all[i] = -1;
    VT_OK(vs_all_gather(c, &gi, all, 1, VS_I32, NULL));
    int ok = 1;
    for (int i = 0; i < s->nranks; i++)
        if (all[i] != s->gmap[i] + 1000 * tag) ok = 0;
    if (!ok) {
        int tmp[MAXR], want_l[MAXR];
        char a[256], b[256];
        for (int i = 0; i < s->nranks; i++) {
            tmp[i] = all[i];
            want_l[i] = s->gmap[i] + 1000 * tag;
        }
        fmt_list(tmp, s->nranks, a, sizeof a);
        fmt_list(want_l, s->nranks, b, sizeof b);
        VT_CHECK(ok, "%s: all-gather of global ranks %s, want %s", s->label, a, b);
    }
}

/* ------------------------------------------------------------------------- */
/* Submeshes                                                                 */

static void do_submesh(vs_world* w, vs_mesh* m, const spec* s, const int* D, int k)
{
    char dims[256], a[256], b[256];
    dims_string(s, D, k, dims, sizeof dims);
    const char* L = s->label;

    /* group_of for every mesh rank (no communication) */
    for (int r = 0; r < s->nranks; r++) {
        int want[MAXR], got[MAXR], n = -1;
        int wn = expected_group(s, D, k, r, want, NULL);
        for (int i = 0; i < MAXR; i++) got[i] = -9;
        VT_OK(vs_mesh_group_of(m, dims, r, got, MAXR, &n));
        if (n != wn || !list_eq(got, want, wn)) {
            fmt_list(got, n > 0 && n <= MAXR ? n : 0, a, sizeof a);
            fmt_list(want, wn, b, sizeof b);
            VT_CHECK(0, "%s: group_of(%s, %d) = %s (n=%d), want %s", L, dims, r, a, n, b);
        }
        if (r == s->myrank) {
            int n2 = -1;
            VT_OK(vs_mesh_group_of(m, dims, r, got, wn, &n2)); /* exact cap */
            VT_CHECK(n2 == wn, "%s: group_of(%s) exact cap: n=%d want %d", L, dims, n2, wn);
            vs_result rc = vs_mesh_group_of(m, dims, r, got, wn - 1, &n2);
            VT_CHECK(rc == VS_ERR_INVALID, "%s: group_of(%s) cap %d < %d gave %s, want INVALID",
                     L, dims, wn - 1, wn, vs_result_string(rc));
        }
    }

    /* all sibling groups */
    {
        int rows[MAXR], ng = -1, gs = -1;
        for (int i = 0; i < MAXR; i++) rows[i] = -9;
        VT_OK(vs_mesh_groups(m, dims, rows, MAXR, &ng, &gs));
        int R[VS_MESH_MAX_DIMS], nr = 0, rsz[VS_MESH_MAX_DIMS], nrows = 1, gsize = 1;
        for (int d = 0; d < s->nd; d++) {
            int in = 0;
            for (int i = 0; i < k; i++)
                if (D[i] == d) in = 1;
            if (in) {
                gsize *= s->shape[d];
            } else {
                R[nr] = d;
                rsz[nr] = s->shape[d];
                nrows *= s->shape[d];
                nr++;
            }
        }
        VT_CHECK(ng == nrows && gs == gsize, "%s: groups(%s): %d x %d, want %d x %d", L, dims, ng,
                 gs, nrows, gsize);
        if (ng == nrows && gs == gsize) {
            for (int g = 0; g < nrows; g++) {
                int rc_[VS_MESH_MAX_DIMS], c[VS_MESH_MAX_DIMS] = {0};
                decompose(nr, rsz, g, rc_);
                for (int i = 0; i < nr; i++) c[R[i]] = rc_[i];
                int want[MAXR];
                expected_group(s, D, k, compose(s->nd, s->shape, c), want, NULL);
                if (!list_eq(rows + g * gsize, want, gsize)) {
                    fmt_list(rows + g * gsize, gsize, a, sizeof a);
                    fmt_list(want, gsize, b, sizeof b);
                    VT_CHECK(0, "%s: groups(%s) row %d = %s, want %s", L, dims, g, a, b);
                }
            }
        }
        if (s->nranks > 0) {
            vs_result rc = vs_mesh_groups(m, dims, rows, s->nranks - 1, &ng, &gs);
            VT_CHECK(rc == VS_ERR_INVALID, "%s: groups(%s) cap %d gave %s, want INVALID", L, dims,
                     s->nranks - 1, vs_result_string(rc));
        }
    }

    /* the submesh itself (collective the first time) */
    vs_mesh* sub = NULL;
    VT_OK(vs_mesh_submesh(m, dims, &sub));
    VT_CHECK(sub != NULL, "%s: submesh(%s) is NULL", L, dims);
    if (!sub) return;
    vs_mesh* again = NULL;
    VT_OK(vs_mesh_submesh(m, dims, &again));
    VT_CHECK(again == sub, "%s: submesh(%s) twice gave %p then %p (not cached)", L, dims,
             (void*)sub, (void*)again);
    spec ss;
    sub_spec(s, D, k, &ss);
    check_layout(w, sub, &ss);
    check_collectives(sub, &ss, 0);

    /* a submesh of a submesh: along its first dim */
    if (k >= 2) {
        vs_mesh* inner = NULL;
        VT_OK(vs_mesh_submesh(sub, ss.names[0], &inner));
        if (inner) {
            int zero = 0;
            spec is;
            sub_spec(&ss, &zero, 1, &is);
            int want[MAXR];
            int wn = expected_group(s, D, 1, s->myrank, want, NULL);
            VT_CHECK(is.nranks == wn && list_eq(is.gmap, want, wn),
                     "%s: test model: nested spec disagrees", L);
            check_layout(w, inner, &is);
            check_collectives(inner, &is, 0);
        }
    }
}

/* Every ordered selection of 1..3 distinct dims, and for more dims all of them in
   parent order and reversed. */
static void check_submeshes(vs_world* w, vs_mesh* m, const spec* s)
{
    int nd = s->nd;
    int kmax = nd < 3 ? nd : 3;
    for (int k = 1; k <= kmax; k++) {
        int total = 1;
        for (int i = 0; i < k; i++) total *= nd;
        for (int idx = 0; idx < total; idx++) {
            int D[3], x = idx, distinct = 1;
            for (int i = k - 1; i >= 0; i--) {
                D[i] = x % nd;
                x /= nd;
            }
            for (int i = 0; i < k; i++)
                for (int j = i + 1; j < k; j++)
                    if (D[i] == D[j]) distinct = 0;
            if (distinct) do_submesh(w, m, s, D, k);
        }
    }
    if (nd > 3) {
        int D[VS_MESH_MAX_DIMS];
        for (int i = 0; i < nd; i++) D[i] = i;
        do_submesh(w, m, s, D, nd);
        for (int i = 0; i < nd; i++) D[i] = nd - 1 - i;
        do_submesh(w, m, s, D, nd);
    }
}

/* ------------------------------------------------------------------------- */
/* Cases                                                                     */

typedef struct config {
    int nd;
    int shape[VS_MESH_MAX_DIMS];
    const char* names[VS_MESH_MAX_DIMS]; /* all NULL: the defaults */
    int explicit_ndims;
    char label[128];
} config;

static int config_nranks(const config* c)
{
    int n = 1;
    for (int d = 0; d < c->nd; d++) n *= c->shape[d];
    return n;
}

static int case_config(vs_world* w, void* arg)
{
    const config* cfg = (const config*)arg;
    vs_mesh_desc d;
    memset(&d, 0, sizeof d);
    for (int i = 0; i < cfg->nd; i++) {
        d.shape[i] = cfg->shape[i];
        d.dim_names[i] = cfg->names[i];
    }
    if (cfg->explicit_ndims) d.ndims = cfg->nd;
    VT_CHECK(vs_world_size(w) == config_nranks(cfg), "%s: world size %d", cfg->label,
             vs_world_size(w));
    vs_mesh* m = NULL;
    VT_OK(vs_mesh_init(w, &d, &m));
    if (!m) return 0;
    VT_CHECK(vs_mesh_comm(m) == vs_world_comm(w), "%s: mesh comm is not the world's comm",
             cfg->label);
    spec s;
    world_spec(&s, cfg->label, cfg->nd, cfg->shape, cfg->names, vs_world_rank(w));
    check_layout(w, m, &s);
    check_collectives(m, &s, 0);
    check_submeshes(w, m, &s);
    VT_OK(vs_mesh_free(m));
    return 0;
}

/* The worked example of the PyTorch DeviceMesh recipe: (2,4) over 8 ranks named
   ("replicate", "shard"). */
static int case_recipe(vs_world* w, void* arg)
{
    (void)arg;
    static const int rep[4][2] = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
    static const int shard[2][4] = {{0, 1, 2, 3}, {4, 5, 6, 7}};
    int me = vs_world_rank(w);
    vs_mesh* m = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {2, 4}, .dim_names = {"replicate", "shard"}},
                       &m));
    if (!m) return 0;
    int rows[MAXR], ng = -1, gs = -1;
    VT_OK(vs_mesh_groups(m, "replicate", rows, MAXR, &ng, &gs));
    VT_CHECK(ng == 4 && gs == 2 && list_eq(rows, &rep[0][0], 8),
             "recipe: groups(replicate) %d x %d, rows %d,%d %d,%d ...", ng, gs, rows[0], rows[1],
             rows[2], rows[3]);
    VT_OK(vs_mesh_groups(m, "shard", rows, MAXR, &ng, &gs));
    VT_CHECK(ng == 2 && gs == 4 && list_eq(rows, &shard[0][0], 8),
             "recipe: groups(shard) %d x %d, rows %d,%d,%d,%d ...", ng, gs, rows[0], rows[1],
             rows[2], rows[3]);
    const int* my_rep = rep[me % 4];
    const int* my_shard = shard[me / 4];
    int got[MAXR], n = -1;
    VT_OK(vs_mesh_group_of(m, "replicate", me, got, MAXR, &n));
    VT_CHECK(n == 2 && list_eq(got, my_rep, 2), "recipe: rank %d group_of(replicate) %d,%d", me,
             got[0], got[1]);
    VT_OK(vs_mesh_group_of(m, "shard", me, got, MAXR, &n));
    VT_CHECK(n == 4 && list_eq(got, my_shard, 4), "recipe: rank %d group_of(shard) %d,%d,%d,%d",
             me, got[0], got[1], got[2], got[3]);
    VT_CHECK(vs_mesh_coord_along(m, "replicate") == me / 4, "recipe: coord(replicate)");
    VT_CHECK(vs_mesh_coord_along(m, "shard") == me % 4, "recipe: coord(shard)");

    vs_mesh *r = NULL, *s = NULL;
    VT_OK(vs_mesh_submesh(m, "replicate", &r));
    VT_OK(vs_mesh_submesh(m, "shard", &s));
    if (r && s) {
        for (int i = 0; i < 2; i++)
            VT_CHECK(vs_mesh_global_rank(r, i) == my_rep[i], "recipe: replicate sub rank %d", i);
        for (int i = 0; i < 4; i++)
            VT_CHECK(vs_mesh_global_rank(s, i) == my_shard[i], "recipe: shard sub rank %d", i);
        int32_t g = me, all[8];
        VT_OK(vs_all_gather(vs_mesh_comm(r), &g, all, 1, VS_I32, NULL));
        VT_CHECK(all[0] == my_rep[0] && all[1] == my_rep[1], "recipe: replicate gather %d,%d",
                 all[0], all[1]);
        VT_OK(vs_all_gather(vs_mesh_comm(s), &g, all, 1, VS_I32, NULL));
        VT_CHECK(all[0] == my_shard[0] && all[1] == my_shard[1] && all[2] == my_shard[2] &&
                     all[3] == my_shard[3],
                 "recipe: shard gather %d,%d,%d,%d", all[0], all[1], all[2], all[3]);
        int64_t bit = (int64_t)1 << me, sum = 0;
        VT_OK(vs_all_reduce(vs_mesh_comm(r), &bit, &sum, 1, VS_I64, VS_OP_SUM, NULL));
        VT_CHECK(sum == (((int64_t)1 << my_rep[0]) | ((int64_t)1 << my_rep[1])),
                 "recipe: replicate all-reduce 0x%llx", (unsigned long long)sum);
        VT_OK(vs_all_reduce(vs_mesh_comm(s), &bit, &sum, 1, VS_I64, VS_OP_SUM, NULL));
        VT_CHECK(sum == ((int64_t)0xF << (4 * (me / 4))), "recipe: shard all-reduce 0x%llx",
                 (unsigned long long)sum);
    }
    char buf[128];
    vs_mesh_describe(m, buf, sizeof buf);
    VT_CHECK(strstr(buf, "replicate=2") && strstr(buf, "shard=4"), "recipe: describe \"%s\"",
             buf);
    VT_OK(vs_mesh_free(m));
    return 0;
}

/* Two meshes over one world at once, (2,4) and (4,2), with submeshes, used
   interleaved; the first freed while the second is still in use. */
static int case_two_meshes(vs_world* w, void* arg)
{
    (void)arg;
    int me = vs_world_rank(w);
    vs_mesh *a = NULL, *b = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {2, 4}}, &a));
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {4, 2}}, &b));
    if (!a || !b) {
        if (a) vs_mesh_free(a);
        if (b) vs_mesh_free(b);
        return 0;
    }
    VT_CHECK(a != b, "two meshes: same handle");
    spec sa, sb;
    world_spec(&sa, "two meshes (2,4)", 2, (const int[]){2, 4}, NULL, me);
    world_spec(&sb, "two meshes (4,2)", 2, (const int[]){4, 2}, NULL, me);
    static const int Ds[3][2] = {{0, -1}, {1, -1}, {1, 0}}; /* DP, TP, "TP,DP" */
    static const int Ks[3] = {1, 1, 2};
    static const char* Dn[3] = {"DP", "TP", "TP,DP"};
    vs_mesh* subs[6] = {0};
    spec ss[6];
    for (int i = 0; i < 3; i++) {
        /* interleave creation: a first, then b first */
        vs_mesh* first = (i % 2) ? b : a;
        vs_mesh* second = (i % 2) ? a : b;
        int fi = (i % 2) ? 2 * i + 1 : 2 * i, si = (i % 2) ? 2 * i : 2 * i + 1;
        VT_OK(vs_mesh_submesh(first, Dn[i], &subs[fi]));
        VT_OK(vs_mesh_submesh(second, Dn[i], &subs[si]));
        sub_spec(&sa, Ds[i], Ks[i], &ss[2 * i]);     /* even: a */
        sub_spec(&sb, Ds[i], Ks[i], &ss[2 * i + 1]); /* odd: b */
    }
    for (int i = 0; i < 6; i++)
        VT_CHECK(subs[i] != NULL, "two meshes: submesh %s of %s is NULL", Dn[i / 2],
                 i % 2 ? "b" : "a");
    for (int i = 0; i < 6; i++)
        if (!subs[i]) {
            vs_mesh_free(a);
            vs_mesh_free(b);
            return 0;
        }
    VT_CHECK(subs[0] != subs[1] && subs[2] != subs[3], "two meshes share a submesh handle");
    for (int i = 0; i < 6; i++) check_layout(w, subs[i], &ss[i]);
    static const int order[6] = {0, 3, 1, 4, 2, 5};
    for (int round = 0; round < 4; round++) {
        for (int j = 0; j < 6; j++) {
            int i = order[(j + round) % 6];
            check_collectives(subs[i], &ss[i], 0);
        }
        check_collectives(round % 2 ? a : b, round % 2 ? &sa : &sb, 0);
    }
    /* both still give the right answers after mixing; lookups are cached */
    vs_mesh* again = NULL;
    VT_OK(vs_mesh_submesh(b, "TP,DP", &again));
    VT_CHECK(again == subs[5], "two meshes: b's TP,DP not cached");
    VT_OK(vs_mesh_free(a));
    for (int i = 1; i < 6; i += 2) check_collectives(subs[i], &ss[i], 0);
    check_layout(w, b, &sb);
    VT_OK(vs_mesh_free(b));
    return 0;
}

/* A mesh over a split communicator: mesh ranks map to world ranks through it.
   variant 0: comm {c, c+2, c+4, c+6}; variant 1: the same ranks in reverse order. */
static int case_split_comm(vs_world* w, void* arg)
{
    int variant = *(const int*)arg;
    int me = vs_world_rank(w), color = me % 2;
    vs_comm* sc = NULL;
    VT_OK(vs_comm_split(vs_world_comm(w), color, variant ? 7 - me : me, &sc));
    if (!sc) return 0;
    spec s;
    char label[64];
    snprintf(label, sizeof label, "(2,2) over split comm %d%s", color,
             variant ? " reversed" : "");
    world_spec(&s, label, 2, (const int[]){2, 2}, NULL, 0);
    for (int i = 0; i < 4; i++) {
        s.gmap[i] = variant ? 6 - 2 * i + color : 2 * i + color;
        if (s.gmap[i] == me) s.myrank = i;
    }
    VT_CHECK(vs_comm_rank(sc) == s.myrank, "%s: split comm rank %d, want %d", label,
             vs_comm_rank(sc), s.myrank);
    vs_mesh* m = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {2, 2}, .comm = sc}, &m));
    if (m) {
        VT_CHECK(vs_mesh_comm(m) == sc, "%s: mesh comm is not desc.comm", label);
        check_layout(w, m, &s);
        check_collectives(m, &s, 0);
        check_submeshes(w, m, &s);
        VT_OK(vs_mesh_free(m));
    }
    VT_OK(vs_comm_free(sc));
    return 0;
}

/* A mesh built over a submesh's communicator: (2,2) named X,Y over the TP rows of
   a (2,4) mesh; its ranks map to world ranks 4*dp + i. */
static int case_mesh_over_submesh(vs_world* w, void* arg)
{
    (void)arg;
    int me = vs_world_rank(w);
    vs_mesh *parent = NULL, *tp = NULL, *m = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {2, 4}}, &parent));
    if (!parent) return 0;
    VT_OK(vs_mesh_submesh(parent, "TP", &tp));
    if (tp) {
        VT_OK(vs_mesh_init(w,
                           &(vs_mesh_desc){.shape = {2, 2},
                                           .dim_names = {"X", "Y"},
                                           .comm = vs_mesh_comm(tp)},
                           &m));
    }
    if (m) {
        spec s;
        char label[64];
        snprintf(label, sizeof label, "(2,2) X,Y over TP row %d of (2,4)", me / 4);
        world_spec(&s, label, 2, (const int[]){2, 2}, (const char* const[]){"X", "Y"}, me % 4);
        for (int i = 0; i < 4; i++) s.gmap[i] = 4 * (me / 4) + i;
        VT_CHECK(vs_mesh_comm(m) == vs_mesh_comm(tp), "%s: comm not shared", label);
        check_layout(w, m, &s);
        check_collectives(m, &s, 0);
        check_submeshes(w, m, &s);
        VT_OK(vs_mesh_free(m));
        /* the parent and its submesh are intact */
        spec ps, ts;
        world_spec(&ps, "(2,4) parent", 2, (const int[]){2, 4}, NULL, me);
        sub_spec(&ps, (const int[]){1}, 1, &ts);
        check_collectives(tp, &ts, 0);
    }
    VT_OK(vs_mesh_free(parent));
    return 0;
}

/* ---- bad input ---- */

static void expect_err_(int got, int want, int alt, const char* needle, const char* needle2,
                        const char* what, int line)
{
    char msg[512];
    const char* e = vs_last_error(); /* right after the call under test */
    /* copied by hand: snprintf("%s") of the TLS buffer trips -Wformat-truncation at -O1 */
    if (!e) e = "(null)";
    size_t k = 0;
    for (; e[k] && k + 1 < sizeof msg; k++) msg[k] = e[k];
    msg[k] = 0;
    if (!(got == want || (alt && got == alt)))
        vt_fail_msg(__FILE__, line, what, "returned %d (%s), want %s%s%s; last error \"%s\"", got,
                    vs_result_string(got), vs_result_string(want), alt ? " or " : "",
                    alt ? vs_result_string(alt) : "", msg);
    if (got < 0 && msg[0] == 0)
        vt_fail_msg(__FILE__, line, what, "vs_last_error() is empty after an error");
    if (needle && !strstr(msg, needle) && !(needle2 && strstr(msg, needle2)))
        vt_fail_msg(__FILE__, line, what, "last error \"%s\" does not mention \"%s\"%s%s%s", msg,
                    needle, needle2 ? " (or \"" : "", needle2 ? needle2 : "",
                    needle2 ? "\")" : "");
}

/* Clears the error, runs expr (an int or vs_result), checks code and message. */
#define EXPECT_ERR(expr, want, needle)                                                    \
    do {                                                                                  \
        vs_clear_error();                                                                 \
        int e_got_ = (int)(expr);                                                         \
        expect_err_(e_got_, (want), 0, (needle), NULL, #expr, __LINE__);                  \
    } while (0)

static void init_expect_(vs_world* w, const vs_mesh_desc* d, int want, int alt,
                         const char* needle, const char* needle2, const char* what, int line)
{
    vs_mesh* m = NULL;
    vs_clear_error();
    int r = vs_mesh_init(w, d, &m);
    expect_err_(r, want, alt, needle, needle2, what, line);
    if (r == VS_OK && m) vs_mesh_free(m);
}
#define INIT_EXPECT(w, d, want, alt, needle, needle2) \
    init_expect_((w), (d), (want), (alt), (needle), (needle2), #d, __LINE__)

static int case_errors(vs_world* w, void* arg)
{
    (void)arg;
    const int N = vs_world_size(w);
    char num[32];

    /* --- vs_mesh_init --- */
    /* shape product != world size ("sizes differ": MISMATCH; INVALID accepted) */
    /* the message names the product or the odd size */
    snprintf(num, sizeof num, "%d", 3 * N);
    INIT_EXPECT(w, (&(vs_mesh_desc){.shape = {3, N}}), VS_ERR_MISMATCH, VS_ERR_INVALID, num, "3");
    snprintf(num, sizeof num, "%d", N + 1);
    INIT_EXPECT(w, (&(vs_mesh_desc){.shape = {N + 1}}), VS_ERR_MISMATCH, VS_ERR_INVALID, num, NULL);
    snprintf(num, sizeof num, "%d", 5 * N);
    INIT_EXPECT(w, (&(vs_mesh_desc){.shape = {1, N, 5}, .ndims = 3}), VS_ERR_MISMATCH,
                VS_ERR_INVALID, num, "5");
    /* a zero size (explicit ndims, else the zero ends the shape) */
    INIT_EXPECT(w, (&(vs_mesh_desc){.shape = {N, 0}, .ndims = 2}), VS_ERR_INVALID, 0, "0", NULL);
    INIT_EXPECT(w, (&(vs_mesh_desc){.shape = {1, N}, .ndims = 3}), VS_ERR_INVALID, 0, "0", NULL);
    INIT_EXPECT(w, (&(vs_mesh_desc){.shape = {0}}), VS_ERR_INVALID, 0, NULL, NULL); /* no dims */
    /* negative sizes whose product is the world size */
    INIT_EXPECT(w, (&(vs_mesh_desc){.shape = {-1, -N}}), VS_ERR_INVALID, 0, "-1", NULL);
    INIT_EXPECT(w, (&(vs_mesh_desc){.shape = {N, -1, -1}}), VS_ERR_INVALID, 0, "-1", NULL);
    /* ndims out of range */
    INIT_EXPECT(w,
                (&(vs_mesh_desc){.shape = {1, 1, 1, 1, 1, 1, 1, N},
                                 .ndims = 9,
                                 .dim_names = {"a", "b", "c", "d", "e", "f", "g", "h"}}),
                VS_ERR_INVALID, 0, "9", NULL);
    INIT_EXPECT(w, (&(vs_mesh_desc){.shape = {N}, .ndims = -1}), VS_ERR_INVALID, 0, "-1", NULL);
    /* more than 3 dims without names */
    INIT_EXPECT(w, (&(vs_mesh_desc){.shape = {1, 1, 1, N}}), VS_ERR_INVALID, 0, "4", "name");
    /* duplicate dim names */
    INIT_EXPECT(w, (&(vs_mesh_desc){.shape = {1, N}, .dim_names = {"ZZ", "ZZ"}}), VS_ERR_INVALID,
                0, "ZZ", NULL);
    INIT_EXPECT(w, (&(vs_mesh_desc){.shape = {1, 1, N}, .dim_names = {"PP", "QQ", "PP"}}),
                VS_ERR_INVALID, 0, "PP", NULL);
    /* dim names that cannot work: empty, too long, with the list separator */
    {
        char longname[VS_MESH_NAME_MAX + 1], okname[VS_MESH_NAME_MAX];
        memset(longname, 'L', VS_MESH_NAME_MAX);
        longname[VS_MESH_NAME_MAX] = 0; /* VS_MESH_NAME_MAX chars: one too many */
        memset(okname, 'K', VS_MESH_NAME_MAX - 1);
        okname[VS_MESH_NAME_MAX - 1] = 0;
        INIT_EXPECT(w, (&(vs_mesh_desc){.shape = {1, N}, .dim_names = {"A,B", "C"}}),
                    VS_ERR_INVALID, 0, "A,B", NULL);
        INIT_EXPECT(w, (&(vs_mesh_desc){.shape = {1, N}, .dim_names = {"", "C"}}), VS_ERR_INVALID,
                    0, NULL, NULL);
        INIT_EXPECT(w, (&(vs_mesh_desc){.shape = {1, N}, .dim_names = {longname, "C"}}),
                    VS_ERR_INVALID, 0, "LLLL", NULL);
        vs_mesh* m = NULL;
        VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {1, N}, .dim_names = {okname, "C"}}, &m));
        if (m) {
            VT_CHECK(vs_mesh_size(m, okname) == 1, "31-char dim name: size %d",
                     vs_mesh_size(m, okname));
            char dims[2 * VS_MESH_NAME_MAX + 2];
            snprintf(dims, sizeof dims, "C,%s", okname);
            int grp[MAXR], gn = 0;
            VT_OK(vs_mesh_group_of(m, dims, 0, grp, MAXR, &gn));
            VT_CHECK(gn == N, "31-char dim name: group_of(%s) n=%d", dims, gn);
            VT_OK(vs_mesh_free(m));
        }
    }
    /* NULL world / desc / out */
    {
        vs_mesh* m = NULL;
        vs_mesh_desc d = {.shape = {N}};
        EXPECT_ERR(vs_mesh_init(NULL, &d, &m), VS_ERR_NULL, "world");
        if (m) vs_mesh_free(m);
        m = NULL;
        EXPECT_ERR(vs_mesh_init(w, NULL, &m), VS_ERR_NULL, "desc");
        if (m) vs_mesh_free(m);
        EXPECT_ERR(vs_mesh_init(w, &d, NULL), VS_ERR_NULL, "out");
    }
    /* positive controls: 8 named dims, explicit ndims */
    {
        vs_mesh* m = NULL;
        VT_OK(vs_mesh_init(w,
                           &(vs_mesh_desc){.shape = {1, 1, 1, 1, 1, 1, 1, N},
                                           .dim_names = {"a", "b", "c", "d", "e", "f", "g", "h"}},
                           &m));
        if (m) {
            VT_CHECK(vs_mesh_ndims(m) == 8, "8-dim mesh: ndims %d", vs_mesh_ndims(m));
            VT_CHECK(vs_mesh_size(m, "h") == N, "8-dim mesh: size(h) %d", vs_mesh_size(m, "h"));
            VT_OK(vs_mesh_free(m));
        }
        m = NULL;
        VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {N, 1}, .ndims = 2}, &m));
        if (m) {
            VT_CHECK(vs_mesh_ndims(m) == 2, "explicit ndims 2: %d", vs_mesh_ndims(m));
            VT_CHECK(vs_mesh_size(m, "TP") == 1, "explicit ndims 2: size(TP) %d",
                     vs_mesh_size(m, "TP"));
            VT_OK(vs_mesh_free(m));
        }
    }

    /* --- queries on a good (1,N) mesh, dims DP,TP --- */
    vs_mesh* m = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {1, N}}, &m));
    if (!m) return 0;
    int coord[VS_MESH_MAX_DIMS], ranks[MAXR], n = 0, ng = 0, gs = 0, g = 0, mr = 0, r = 0;
    vs_mesh* sub = NULL;

    /* unknown dim name */
    EXPECT_ERR(vs_mesh_size(m, "XX"), VS_ERR_INVALID, "XX");
    EXPECT_ERR(vs_mesh_dim_index(m, "XX"), VS_ERR_INVALID, "XX");
    EXPECT_ERR(vs_mesh_coord_along(m, "XX"), VS_ERR_INVALID, "XX");
    EXPECT_ERR(vs_mesh_is_first(m, "XX"), VS_ERR_INVALID, "XX");
    EXPECT_ERR(vs_mesh_is_last(m, "XX"), VS_ERR_INVALID, "XX");
    EXPECT_ERR(vs_mesh_submesh(m, "XX", &sub), VS_ERR_INVALID, "XX");
    EXPECT_ERR(vs_mesh_submesh(m, "DP,XX", &sub), VS_ERR_INVALID, "XX");
    EXPECT_ERR(vs_mesh_group_of(m, "XX", 0, ranks, MAXR, &n), VS_ERR_INVALID, "XX");
    EXPECT_ERR(vs_mesh_groups(m, "XX", ranks, MAXR, &ng, &gs), VS_ERR_INVALID, "XX");
    EXPECT_ERR(vs_mesh_neighbor(m, "XX", 1, 0, &g, &mr), VS_ERR_INVALID, "XX");
    EXPECT_ERR(vs_mesh_neighbor(m, "DP,TP", 1, 0, &g, &mr), VS_ERR_INVALID, NULL);
    EXPECT_ERR(vs_mesh_size(m, "dp"), VS_ERR_INVALID, "dp"); /* names are case-sensitive */
    /* a dims string naming a dim twice, or with an empty name */
    EXPECT_ERR(vs_mesh_submesh(m, "DP,DP", &sub), VS_ERR_INVALID, "DP");
    EXPECT_ERR(vs_mesh_submesh(m, "TP,DP,TP", &sub), VS_ERR_INVALID, "TP");
    EXPECT_ERR(vs_mesh_group_of(m, "DP,DP", 0, ranks, MAXR, &n), VS_ERR_INVALID, "DP");
    EXPECT_ERR(vs_mesh_groups(m, "DP,DP", ranks, MAXR, &ng, &gs), VS_ERR_INVALID, "DP");
    EXPECT_ERR(vs_mesh_submesh(m, "", &sub), VS_ERR_INVALID, NULL);
    EXPECT_ERR(vs_mesh_submesh(m, "DP,", &sub), VS_ERR_INVALID, NULL);
    /* mesh rank out of range */
    snprintf(num, sizeof num, "%d", N);
    EXPECT_ERR(vs_mesh_coord_of(m, N, coord), VS_ERR_INVALID, num);
    EXPECT_ERR(vs_mesh_coord_of(m, 1000, coord), VS_ERR_INVALID, "1000");
    EXPECT_ERR(vs_mesh_coord_of(m, -1, coord), VS_ERR_INVALID, "-1");
    EXPECT_ERR(vs_mesh_global_rank(m, N), VS_ERR_INVALID, num);
    EXPECT_ERR(vs_mesh_global_rank(m, 1000), VS_ERR_INVALID, "1000");
    EXPECT_ERR(vs_mesh_global_rank(m, -1), VS_ERR_INVALID, "-1");
    EXPECT_ERR(vs_mesh_group_of(m, "TP", N, ranks, MAXR, &n), VS_ERR_INVALID, num);
    EXPECT_ERR(vs_mesh_group_of(m, "TP", 1000, ranks, MAXR, &n), VS_ERR_INVALID, "1000");
    EXPECT_ERR(vs_mesh_group_of(m, "TP", -1, ranks, MAXR, &n), VS_ERR_INVALID, "-1");
    /* coordinate out of range */
    EXPECT_ERR(vs_mesh_rank_of(m, (const int[VS_MESH_MAX_DIMS]){0, N}, &r), VS_ERR_INVALID, num);
    EXPECT_ERR(vs_mesh_rank_of(m, (const int[VS_MESH_MAX_DIMS]){0, 77}, &r), VS_ERR_INVALID,
               "77");
    EXPECT_ERR(vs_mesh_rank_of(m, (const int[VS_MESH_MAX_DIMS]){1, 0}, &r), VS_ERR_INVALID, "1");
    EXPECT_ERR(vs_mesh_rank_of(m, (const int[VS_MESH_MAX_DIMS]){-3, 0}, &r), VS_ERR_INVALID,
               "-3");
    /* capacity too small */
    if (N > 1)
        EXPECT_ERR(vs_mesh_group_of(m, "TP", 0, ranks, N - 1, &n), VS_ERR_INVALID, NULL);
    EXPECT_ERR(vs_mesh_groups(m, "DP", ranks, N - 1, &ng, &gs), VS_ERR_INVALID, NULL);
    /* NULL pointers */
    EXPECT_ERR(vs_mesh_submesh(m, NULL, &sub), VS_ERR_NULL, NULL);
    EXPECT_ERR(vs_mesh_submesh(m, "DP", NULL), VS_ERR_NULL, NULL);
    EXPECT_ERR(vs_mesh_submesh(NULL, "DP", &sub), VS_ERR_NULL, NULL);
    EXPECT_ERR(vs_mesh_coord(m, NULL), VS_ERR_NULL, NULL);
    EXPECT_ERR(vs_mesh_coord(NULL, coord), VS_ERR_NULL, NULL);
    EXPECT_ERR(vs_mesh_coord_of(m, 0, NULL), VS_ERR_NULL, NULL);
    EXPECT_ERR(vs_mesh_rank_of(m, NULL, &r), VS_ERR_NULL, NULL);
    EXPECT_ERR(vs_mesh_rank_of(m, (const int[VS_MESH_MAX_DIMS]){0, 0}, NULL), VS_ERR_NULL, NULL);
    EXPECT_ERR(vs_mesh_group_of(m, NULL, 0, ranks, MAXR, &n), VS_ERR_NULL, NULL);
    EXPECT_ERR(vs_mesh_group_of(m, "DP", 0, NULL, MAXR, &n), VS_ERR_NULL, NULL);
    EXPECT_ERR(vs_mesh_group_of(m, "DP", 0, ranks, MAXR, NULL), VS_ERR_NULL, NULL);
    EXPECT_ERR(vs_mesh_groups(m, "DP", NULL, MAXR, &ng, &gs), VS_ERR_NULL, NULL);
    EXPECT_ERR(vs_mesh_groups(m, "DP", ranks, MAXR, NULL, &gs), VS_ERR_NULL, NULL);
    EXPECT_ERR(vs_mesh_groups(m, "DP", ranks, MAXR, &ng, NULL), VS_ERR_NULL, NULL);
    EXPECT_ERR(vs_mesh_neighbor(m, "TP", 1, 0, NULL, &mr), VS_ERR_NULL, NULL);
    EXPECT_ERR(vs_mesh_neighbor(m, NULL, 1, 0, &g, &mr), VS_ERR_NULL, NULL);
    EXPECT_ERR(vs_mesh_neighbor(NULL, "TP", 1, 0, &g, &mr), VS_ERR_NULL, NULL);
    EXPECT_ERR(vs_mesh_size(m, NULL), VS_ERR_NULL, NULL);
    EXPECT_ERR(vs_mesh_dim_index(m, NULL), VS_ERR_NULL, NULL);
    {
        vs_result fr = vs_mesh_free(NULL);
        VT_CHECK(fr == VS_OK || fr == VS_ERR_NULL, "vs_mesh_free(NULL) gave %s",
                 vs_result_string(fr));
    }

    /* the mesh still works after all that */
    VT_OK(vs_mesh_submesh(m, "TP", &sub));
    if (sub) {
        /* "vs_comm_free: not the world's or a mesh's" */
        vs_clear_error();
        int fr = vs_comm_free(vs_mesh_comm(sub));
        expect_err_(fr, VS_ERR_INVALID, VS_ERR_STATE, NULL, NULL, "vs_comm_free(submesh comm)",
                    __LINE__);
        vs_clear_error();
        fr = vs_comm_free(vs_mesh_comm(m));
        expect_err_(fr, VS_ERR_INVALID, VS_ERR_STATE, NULL, NULL, "vs_comm_free(world mesh comm)",
                    __LINE__);
        int64_t one = 1, sum = 0;
        VT_OK(vs_all_reduce(vs_mesh_comm(sub), &one, &sum, 1, VS_I64, VS_OP_SUM, NULL));
        VT_CHECK(sum == N, "after errors: TP all-reduce %lld, want %d", (long long)sum, N);
    }
    vs_clear_error();
    VT_CHECK(vs_last_error() && vs_last_error()[0] == 0, "vs_clear_error left \"%s\"",
             vs_last_error());
    VT_OK(vs_mesh_free(m));
    return 0;
}

/* ---- two vs_launch jobs at once (threads transport only) ---- */

#ifndef VESCALE_MPI
typedef struct conc_job {
    int id, nranks, iters;
    pthread_barrier_t* bar;
    vs_result rc;
} conc_job;

static int conc_rank(vs_world* w, void* arg)
{
    conc_job* j = (conc_job*)arg;
    int me = vs_world_rank(w), n = vs_world_size(w);
    VT_CHECK(n == j->nranks, "job %d: world size %d, want %d", j->id, n, j->nranks);
    char label[64];
    snprintf(label, sizeof label, "job %d (2,%d)", j->id, n / 2);
    vs_mesh* m = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {2, n / 2}}, &m));
    if (!m) return 0;
    spec s, sdp, stp;
    world_spec(&s, label, 2, (const int[]){2, n / 2}, NULL, me);
    sub_spec(&s, (const int[]){0}, 1, &sdp);
    sub_spec(&s, (const int[]){1}, 1, &stp);
    vs_mesh *dp = NULL, *tp = NULL;
    VT_OK(vs_mesh_submesh(m, "DP", &dp));
    VT_OK(vs_mesh_submesh(m, "TP", &tp));
    if (dp && tp) {
        for (int it = 0; it < j->iters; it++) {
            check_collectives(m, &s, j->id);
            check_collectives(dp, &sdp, j->id);
            check_collectives(tp, &stp, j->id);
        }
        check_layout(w, dp, &sdp);
    }
    VT_OK(vs_mesh_free(m));
    return 0;
}

static void* conc_thread(void* p)
{
    conc_job* j = (conc_job*)p;
    pthread_barrier_wait(j->bar);
    j->rc = vs_launch(j->nranks, conc_rank, j);
    return NULL;
}

static void case_concurrent(int n1, int n2)
{
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    conc_job jobs[2] = {{1, n1, 30, &bar, -99}, {2, n2, 30, &bar, -99}};
    pthread_t t[2];
    int started[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        started[i] = pthread_create(&t[i], NULL, conc_thread, &jobs[i]) == 0;
        VT_CHECK(started[i], "pthread_create failed");
    }
    if (!started[0] || !started[1]) {
        /* cannot happen in practice; avoid hanging on the barrier */
        fprintf(stderr, "    cannot start threads\n");
        exit(2);
    }
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++)
        VT_CHECK(jobs[i].rc == VS_OK, "job %d: vs_launch gave %d (%s)", jobs[i].id, jobs[i].rc,
                 vs_result_string(jobs[i].rc));
    pthread_barrier_destroy(&bar);
}
#endif

/* ------------------------------------------------------------------------- */
/* Runner                                                                    */

#ifdef VESCALE_MPI
static vs_world* g_world;
static int g_rank;
#endif

/* n: ranks the case needs (0: any; MPI only). */
static void run_case(const char* name, int n, vs_rank_fn fn, void* arg)
{
#ifdef VESCALE_MPI
    if (n && vs_world_size(g_world) != n) return;
    vt_begin(name);
    int rc = fn(g_world, arg);
    VT_CHECK(rc == 0, "%s: rank %d returned %d", name, g_rank, rc);
    int32_t local = __atomic_load_n(&vt_failures, __ATOMIC_SEQ_CST) != vt_case_start, any = 1;
    vs_result r = vs_all_reduce(vs_world_comm(g_world), &local, &any, 1, VS_I32, VS_OP_MAX, NULL);
    VT_CHECK(r == VS_OK, "%s: failure all-reduce: %s", name, vs_result_string(r));
    if (g_rank == 0) {
        VT_CHECK(!any || local, "%s failed on another rank", name);
        vt_end(name);
    }
#else
    if (n <= 0) n = 8;
    vt_begin(name);
    VT_OK(vs_launch(n, fn, arg));
    vt_end(name);
#endif
}

static void make_label(config* c)
{
    char* p = c->label;
    size_t cap = sizeof c->label;
    int len = snprintf(p, cap, "mesh (");
    for (int d = 0; d < c->nd; d++) len += snprintf(p + len, cap - len, "%s%d", d ? "," : "", c->shape[d]);
    if (c->names[0]) {
        len += snprintf(p + len, cap - len, ") names ");
        for (int d = 0; d < c->nd; d++)
            len += snprintf(p + len, cap - len, "%s%s", d ? "," : "", c->names[d]);
    } else {
        len += snprintf(p + len, cap - len, ") default names");
    }
    if (c->explicit_ndims) snprintf(p + len, cap - len, " (explicit ndims)");
}

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

    static config configs[] = {
        {1, {8}, {NULL}, 0, ""},
        {1, {8}, {"world"}, 1, ""},
        {2, {2, 4}, {NULL}, 0, ""},
        {2, {2, 4}, {"rows", "cols"}, 0, ""},
        {2, {4, 2}, {NULL}, 1, ""},
        {2, {4, 2}, {"A", "B"}, 0, ""},
        {2, {4, 2}, {"TP", "DP"}, 0, ""}, /* default names, swapped places */
        {3, {2, 2, 2}, {NULL}, 0, ""},
        {3, {2, 2, 2}, {"pipe", "data", "tensor"}, 0, ""},
        {3, {2, 1, 4}, {NULL}, 0, ""},
        {3, {2, 1, 4}, {"pp", "ep", "tp"}, 1, ""},
        {4, {2, 2, 1, 2}, {"PP", "DP", "CP", "TP"}, 0, ""},
        {3, {1, 1, 1}, {NULL}, 0, ""},
        {3, {1, 1, 1}, {"a", "b", "c"}, 0, ""},
        {1, {1}, {NULL}, 0, ""},
        {1, {2}, {NULL}, 0, ""},
        {2, {1, 2}, {"x", "y"}, 0, ""},
        {2, {2, 2}, {NULL}, 0, ""},
        {2, {4, 1}, {"outer", "inner"}, 0, ""},
        {3, {2, 1, 2}, {NULL}, 0, ""},
    };
    const int ncfg = (int)(sizeof configs / sizeof configs[0]);
    for (int i = 0; i < ncfg; i++) {
        make_label(&configs[i]);
        run_case(configs[i].label, config_nranks(&configs[i]), case_config, &configs[i]);
    }

    run_case("PyTorch DeviceMesh recipe (2,4) replicate,shard", 8, case_recipe, NULL);
    run_case("two meshes (2,4) and (4,2) in one job, interleaved", 8, case_two_meshes, NULL);
    static const int v0 = 0, v1 = 1;
    run_case("mesh over a split comm", 8, case_split_comm, (void*)&v0);
    run_case("mesh over a split comm in reversed order", 8, case_split_comm, (void*)&v1);
    run_case("mesh over a submesh's comm", 8, case_mesh_over_submesh, NULL);

#ifdef VESCALE_MPI
    run_case("bad input", 0, case_errors, NULL);
    if (g_rank == 0) vt_skip("two vs_launch jobs at once", "threads transport only");
#else
    (void)vt_skip;
    run_case("bad input (8 ranks)", 8, case_errors, NULL);
    run_case("bad input (1 rank)", 1, case_errors, NULL);
    run_case("bad input (3 ranks)", 3, case_errors, NULL);
    VT_CASE("two vs_launch jobs at once (4+4 ranks)", case_concurrent(4, 4));
    VT_CASE("two vs_launch jobs at once (8+2 ranks)", case_concurrent(8, 2));
#endif

#ifdef VESCALE_MPI
    int rc = 0;
    if (g_rank == 0) rc = vt_summary();
    vs_world_free(g_world);
    return rc;
#else
    return vt_summary();
#endif
}
