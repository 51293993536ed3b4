/* test_elastic.c - failure as a normal event (the `// >>elastic` section of
   vescale_mesh.h) on the threads transport: the survivors' agreement, the world
   and a mesh shrinking by whole DP replicas, a replacement rank growing the
   world back, and the bad input (no failure, a second shrink, a rank that dies
   during the agreement, one that never arrives, growing with a live rank).

   Every expected value is worked out here: the failed set is the ranks the test
   killed, the new communicators' members are the survivors in world order, and
   each all-reduce is checked against the sum of the members' world ranks. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "tests/vs_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Runs all-reduces over c until one fails; rank `victim` returns an error in
   the middle (after `after` of them). Returns the first failure (or VS_OK when
   no rank is the victim). */
static vs_result until_failure(vs_comm* c, int me, int victim, int after)
{
    for (int i = 0; i < 10000; i++) {
        if (me == victim && i == after) return vs_set_error(VS_ERR_INVALID, "killed by the test at all-reduce %d", i);
        int32_t x = 1, y = 0;
        vs_result r = vs_all_reduce(c, &x, &y, 1, VS_I32, VS_OP_SUM, NULL);
        if (r) return r;
    }
    return VS_OK;
}

/* The sum of the world ranks of c's members, by an all-reduce, checked against
   the expected members. */
static void check_comm(vs_comm* c, const int* members, int n)
{
    VT_CHECK(c != NULL, "no communicator");
    if (!c) return;
    VT_CHECK(vs_comm_size(c) == n, "size %d, want %d", vs_comm_size(c), n);
    int32_t me = -1, sum = 0, want = 0;
    for (int i = 0; i < n; i++) want += members[i];
    for (int i = 0; i < n; i++)
        if (i == vs_comm_rank(c)) me = members[i];
    VT_OK(vs_all_reduce(c, &me, &sum, 1, VS_I32, VS_OP_SUM, NULL));
    VT_CHECK(sum == want, "sum of members %d, want %d", sum, want);
}

/* ------------------------------------------------------------------------- */
/* The world: 8 ranks, rank 5 fails mid all-reduce; the survivors shrink. */

static int world_shrink_rank(vs_world* w, void* arg)
{
    (void)arg;
    int me = vs_world_rank(w);
    vs_result r = until_failure(vs_world_comm(w), me, 5, 7);
    if (me == 5) return r; // (the failed rank returns its error)
    VT_CHECK(r == VS_ERR_ABORTED, "rank %d: %s (%s)", me, vs_result_string(r), vs_last_error());
    VT_CHECK(strstr(vs_last_error(), "world rank 5") != NULL, "the error names the origin: %s", vs_last_error());
    vs_reform_info info;
    VT_OK(vs_world_shrink(w, &info));
    VT_CHECK(info.nfailed == 1 && info.failed[0] == 5, "failed set: %d ranks, first %d", info.nfailed, info.failed[0]);
    VT_CHECK(info.epoch == 1 && info.nlive == 7 && !info.left, "epoch %d, live %d, left %d", info.epoch, info.nlive,
             info.left);
    int members[7] = {0, 1, 2, 3, 4, 6, 7};
    check_comm(vs_world_comm(w), members, 7);
    VT_CHECK(vs_world_rank(w) == me, "the world rank stays");
    // a second shrink with no new failure has nothing to shrink from
    VT_ERR(vs_world_shrink(w, NULL), VS_ERR_STATE, "no rank failed");
    return 0;
}

static void case_world_shrink(void)
{
    vs_result r = vs_launch(8, world_shrink_rank, NULL);
    VT_CHECK(r == VS_OK, "vs_launch: %s (%s): the failure was recovered from", vs_result_string(r), vs_last_error());
}

/* ------------------------------------------------------------------------- */
/* A mesh shrinks by whole DP replicas, and grows back with a replacement. */

typedef struct mesh_case {
    int pp, dp, tp;
    int victim; // world rank that fails
    int grow;   // 1: respawn it and grow back
} mesh_case;

static int mesh_rank(vs_world* w, void* arg)
{
    const mesh_case* mc = (const mesh_case*)arg;
    int me = vs_world_rank(w);
    int n = mc->pp * mc->dp * mc->tp;
    vs_mesh_desc md = {{mc->pp, mc->dp, mc->tp}, 0, {0}, NULL};
    vs_mesh* m = NULL;
    vs_mesh* dpm = NULL;
    if (vs_world_joining(w)) { // the replacement: in with the grow
        vs_reform_info gi;
        VT_OK(vs_world_grow(w, &gi));
        VT_CHECK(gi.nlive == n, "grown to %d ranks, want %d", gi.nlive, n);
        VT_OK(vs_mesh_init(w, &md, &m));
        goto grown;
    }
    VT_OK(vs_mesh_init(w, &md, &m));
    VT_OK(vs_mesh_submesh(m, "DP", &dpm));
    vs_result r = until_failure(vs_mesh_comm(dpm), me, mc->victim, 5);
    if (me == mc->victim) {
        vs_mesh_free(m);
        return r;
    }
    int dvictim = (mc->victim / mc->tp) % mc->dp, dme = (me / mc->tp) % mc->dp;
    // the ranks of other DP groups may see the failure only at the next world-wide call
    if (r == VS_OK) r = vs_barrier(vs_world_comm(w), NULL);
    VT_CHECK(r == VS_ERR_ABORTED, "rank %d: %s", me, vs_result_string(r));
    vs_mesh* small = NULL;
    vs_reform_info info;
    VT_OK(vs_mesh_shrink(m, "DP", &small, &info));
    VT_CHECK(info.nfailed == 1 && info.failed[0] == mc->victim, "failed %d (%d)", info.nfailed, info.failed[0]);
    VT_CHECK(info.ndropped == mc->pp * mc->tp - 1, "dropped %d, want %d", info.ndropped, mc->pp * mc->tp - 1);
    vs_mesh* again = NULL;
    VT_ERR(vs_mesh_shrink(m, "DP", &again, NULL), VS_ERR_STATE, "shrunk before");
    if (dme == dvictim) { // left with the victim's replica
        VT_CHECK(small == NULL && info.left && vs_world_joining(w), "rank %d left", me);
        VT_OK(vs_mesh_free(m));
        if (!mc->grow) return 0;
        vs_reform_info gi;
        VT_OK(vs_world_grow(w, &gi));
        VT_OK(vs_mesh_init(w, &md, &m));
        goto grown;
    }
    VT_CHECK(small != NULL && !info.left, "rank %d stays", me);
    if (!small) return 1;
    VT_CHECK(vs_mesh_size(small, "DP") == mc->dp - 1 && vs_mesh_size(small, "PP") == mc->pp &&
                 vs_mesh_size(small, "TP") == mc->tp, "shape");
    // the smaller mesh's DP groups: the old ones without the victim's coordinate
    vs_mesh* sdp = NULL;
    VT_OK(vs_mesh_submesh(small, "DP", &sdp));
    int members[16], k = 0;
    for (int d = 0; d < mc->dp; d++)
        if (d != dvictim) members[k++] = (me / (mc->dp * mc->tp)) * mc->dp * mc->tp + d * mc->tp + me % mc->tp;
    check_comm(vs_mesh_comm(sdp), members, k);
    VT_OK(vs_mesh_free(m));
    if (!mc->grow) {
        VT_OK(vs_mesh_free(small));
        return 0;
    }
    // world rank 0 starts the replacement; everyone in the small mesh grows when it waits
    if (me == 0) {
        VT_ERR(vs_world_respawn(w, 0), VS_ERR_INVALID, "is alive");
        VT_OK(vs_world_respawn(w, mc->victim));
    }
    int want = 1 + (mc->pp * mc->tp - 1), joiners = 0; // the replacement and its replica's ranks
    for (int spin = 0; spin < 20000 && joiners < want; spin++) {
        VT_OK(vs_world_joiners(w, &joiners));
        if (joiners < want) nap(0.001);
    }
    VT_CHECK(joiners == want, "joiners %d, want %d", joiners, want);
    vs_reform_info gi;
    VT_OK(vs_world_grow(w, &gi));
    VT_CHECK(gi.njoined == want && gi.nlive == n, "joined %d, live %d", gi.njoined, gi.nlive);
    VT_OK(vs_mesh_free(small));
    VT_OK(vs_mesh_init(w, &md, &m));
grown:
    VT_CHECK(!vs_world_joining(w), "grown");
    { // the original mesh again: every DP group whole
        vs_mesh* gdp = NULL;
        VT_OK(vs_mesh_submesh(m, "DP", &gdp));
        int members2[16];
        for (int d = 0; d < mc->dp; d++) members2[d] = (me / (mc->dp * mc->tp)) * mc->dp * mc->tp + d * mc->tp + me % mc->tp;
        check_comm(vs_mesh_comm(gdp), members2, mc->dp);
        check_comm(vs_world_comm(w), (int[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, n);
    }
    VT_OK(vs_mesh_free(m));
    return 0;
}

static void case_mesh(int pp, int dp, int tp, int victim, int grow)
{
    mesh_case mc = {pp, dp, tp, victim, grow};
    vs_result r = vs_launch(pp * dp * tp, mesh_rank, &mc);
    VT_CHECK(r == VS_OK, "vs_launch: %s (%s)", vs_result_string(r), vs_last_error());
}

/* ------------------------------------------------------------------------- */
/* A second rank dies while the survivors agree: it joins the failed set. */

static int mid_rank(vs_world* w, void* arg)
{
    (void)arg;
    int me = vs_world_rank(w);
    vs_result r = until_failure(vs_world_comm(w), me, 2, 3);
    if (me == 2) return r;
    if (me == 6) { // dies while the others wait in the agreement
        nap(0.05);
        return vs_set_error(VS_ERR_INVALID, "rank 6 dies during the agreement");
    }
    vs_reform_info info;
    VT_OK(vs_world_shrink(w, &info));
    VT_CHECK(info.nfailed == 2 && info.failed[0] == 2 && info.failed[1] == 6, "failed set %d: %d %d", info.nfailed,
             info.failed[0], info.failed[1]);
    int members[6] = {0, 1, 3, 4, 5, 7};
    check_comm(vs_world_comm(w), members, 6);
    return 0;
}

/* A live rank that never arrives: the others time out naming it, and agree
   once it comes. */
static int late_rank(vs_world* w, void* arg)
{
    (void)arg;
    int me = vs_world_rank(w);
    vs_result r = until_failure(vs_world_comm(w), me, 1, 2);
    if (me == 1) return r;
    if (me == 3) nap(1.0); // (the others' timeout is 0.5 s: they time out at least once, then agree)
    vs_reform_info info;
    vs_result r2 = VS_ERR_TIMEOUT;
    int timeouts = 0;
    while (r2 == VS_ERR_TIMEOUT) {
        r2 = vs_world_shrink(w, &info);
        if (r2 == VS_ERR_TIMEOUT) {
            timeouts++;
            VT_CHECK(strstr(vs_last_error(), "3 neither arrived nor failed"), "names rank 3: %s", vs_last_error());
            VT_CHECK(vs_world_joining(w) == 0, "still a member");
        }
    }
    VT_CHECK(r2 == VS_OK, "%s", vs_last_error());
    VT_CHECK(me == 3 || timeouts >= 1, "rank %d never timed out", me);
    VT_CHECK(info.nfailed == 1 && info.failed[0] == 1, "failed set");
    int members[3] = {0, 2, 3};
    check_comm(vs_world_comm(w), members, 3);
    return 0;
}

/* Every DP replica lost a rank: no replica holds the model. */
static int lost_rank(vs_world* w, void* arg)
{
    (void)arg;
    int me = vs_world_rank(w);
    vs_mesh_desc md = {{1, 2, 2}, 0, {0}, NULL};
    vs_mesh* m = NULL;
    VT_OK(vs_mesh_init(w, &md, &m));
    if (me == 0 || me == 3) {
        vs_mesh_free(m);
        return vs_set_error(VS_ERR_INVALID, "killed");
    }
    vs_result r = until_failure(vs_world_comm(w), me, -1, 0);
    VT_CHECK(r == VS_ERR_ABORTED, "%s", vs_result_string(r));
    vs_mesh* small = NULL;
    // (the agreement may see rank 3 before rank 0 is gone: wait for both)
    while (!(r = vs_mesh_shrink(m, "DP", &small, NULL)) && small) {
        vs_mesh_free(m);
        m = small;
        r = until_failure(vs_world_comm(w), me, -1, 0);
        small = NULL;
    }
    VT_CHECK(r == VS_ERR_STATE && strstr(vs_last_error(), "every replica along DP lost a rank"), "%s: %s",
             vs_result_string(r), vs_last_error());
    vs_mesh_free(m);
    return 0;
}

static int bad_rank(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh* m = NULL;
    vs_mesh_desc md = {{2, 2}, 0, {0}, NULL};
    VT_OK(vs_mesh_init(w, &md, &m));
    VT_ERR(vs_world_shrink(w, NULL), VS_ERR_STATE, "no rank failed");
    vs_mesh* small = (vs_mesh*)1;
    VT_ERR(vs_mesh_shrink(m, "XP", &small, NULL), VS_ERR_INVALID, "no dim 'XP'");
    VT_CHECK(small == NULL, "out cleared");
    vs_mesh* dp = NULL;
    VT_OK(vs_mesh_submesh(m, "DP", &dp));
    VT_ERR(vs_mesh_shrink(dp, "DP", &small, NULL), VS_ERR_INVALID, "submesh");
    VT_ERR(vs_world_respawn(w, 9), VS_ERR_INVALID, "out of range");
    VT_ERR(vs_world_respawn(w, vs_world_rank(w)), VS_ERR_INVALID, "is alive");
    VT_ERR(vs_world_grow(NULL, NULL), VS_ERR_NULL, NULL);
    VT_CHECK(vs_world_joining(w) == 0 && vs_world_joining(NULL) == 0, "joining");
    VT_OK(vs_barrier(vs_world_comm(w), NULL)); // (no rank returns while another still calls)
    vs_mesh_free(m);
    return 0;
}

static void run(int n, double timeout, vs_rank_fn fn)
{
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = n;
    d.timeout_s = timeout;
    vs_result r = vs_launch_ex(&d, fn, NULL);
    VT_CHECK(r == VS_OK, "vs_launch: %s (%s)", vs_result_string(r), vs_last_error());
}

int main(void)
{
    VT_CASE("world: 8 ranks, rank 5 fails, the 7 others agree and shrink", case_world_shrink());
    VT_CASE("mesh PP2 x DP4 x TP1: rank 5 fails, DP replica 1 leaves, DP 4 -> 3", case_mesh(2, 4, 1, 5, 0));
    VT_CASE("mesh PP1 x DP4 x TP2: rank 4 fails, its TP pair leaves, DP 4 -> 3", case_mesh(1, 4, 2, 4, 0));
    VT_CASE("grow back: PP2 x DP4 x TP1, rank 5 replaced, the mesh whole again", case_mesh(2, 4, 1, 5, 1));
    VT_CASE("grow back: PP1 x DP4 x TP2, rank 7 replaced", case_mesh(1, 4, 2, 7, 1));
    VT_CASE("a second rank dies during the agreement: both are in the failed set", run(8, 30, mid_rank));
    VT_CASE("a live rank that never arrives: timeout naming it, then agreement", run(4, 0.5, late_rank));
    VT_CASE("every DP replica lost a rank: an error pointing at the checkpoint", run(4, 30, lost_rank));
    VT_CASE("bad input: shrink with no failure, bad dim, submesh, respawn of a live rank", run(4, 30, bad_rank));
    return vt_summary();
}
