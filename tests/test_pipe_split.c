/* test_pipe_split.c - stage construction (the `// >>pipe-split` section of
   vescale_pipe.h): vs_pipe_split and vs_pipe_plan_print.

   The balanced kinds are checked against a brute force written here from the
   rules alone: every set of cut positions between unsplittable groups is tried,
   and the expected split is the one with the smallest largest chunk cost, then
   the smallest sum of squared chunk costs, then the earliest cut positions (the
   documented tie rule). Costs are small integers, so every sum is exact and the
   comparison is exact. Large models are checked with a greedy decision test
   (no split under the optimum - 1 exists, one at the optimum does). */
#define VESCALE_IMPLEMENTATION
#include "vescale_pipe.h"
#include "vs_test.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NMAX 9

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static int rnd(int n) // 0..n-1
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (int)((rng_state >> 33) % (uint64_t)n);
}

typedef struct model {
    int n;
    char names[512][16];
    char groups[512][16];
    vs_pipe_unit u[512];
} model;

static void model_init(model* m, int n)
{
    memset(m, 0, sizeof *m);
    m->n = n;
    for (int i = 0; i < n; i++) {
        snprintf(m->names[i], sizeof m->names[i], "l%d", i);
        m->u[i].name = m->names[i];
    }
}

static void model_group(model* m, int first, int last, const char* g)
{
    snprintf(m->groups[first], sizeof m->groups[first], "%s", g);
    for (int i = first; i <= last; i++) m->u[i].group = m->groups[first];
}

static double unit_cost(const vs_pipe_unit* u, vs_pipe_split_kind k)
{
    switch (k) {
    case VS_PIPE_SPLIT_PARAMS: return (double)u->params;
    case VS_PIPE_SPLIT_FLOPS: return u->flops;
    case VS_PIPE_SPLIT_TIME: return u->time_f + u->time_b + u->time_w;
    default: return 1;
    }
}

/* may a chunk start at unit i (i >= 1)? */
static int cuttable(const vs_pipe_unit* u, int i)
{
    return !(u[i].group && u[i - 1].group && strcmp(u[i].group, u[i - 1].group) == 0);
}

/* The brute-force best split: fills first[0..K]; returns 0 when none exists. */
static int brute(const vs_pipe_unit* u, int n, int K, vs_pipe_split_kind kind, int* first, double* best_max)
{
    int found = 0;
    double bmax = 0, bsq = 0;
    int cur[NMAX + 1];
    for (unsigned mask = 0; mask < (1u << (n - 1)); mask++) {
        int c = 0;
        cur[c++] = 0;
        int ok = 1;
        for (int i = 1; i < n; i++)
            if (mask & (1u << (i - 1))) {
                if (!cuttable(u, i)) ok = 0;
                cur[c++] = i;
            }
        if (!ok || c != K) continue;
        cur[c] = n;
        double mx = 0, sq = 0;
        for (int k = 0; k < K; k++) {
            double s = 0;
            for (int i = cur[k]; i < cur[k + 1]; i++) s += unit_cost(&u[i], kind);
            if (s > mx) mx = s;
            sq += s * s;
        }
        int better = !found || mx < bmax || (mx == bmax && sq < bsq);
        if (!better && mx == bmax && sq == bsq) { // lexicographically earlier cuts
            for (int k = 1; k < K; k++)
                if (cur[k] != first[k]) {
                    better = cur[k] < first[k];
                    break;
                }
        }
        if (better) {
            found = 1, bmax = mx, bsq = sq;
            memcpy(first, cur, sizeof(int) * (size_t)(K + 1));
        }
    }
    *best_max = bmax;
    return found;
}

/* Checks the fields every plan must have right. */
static void check_plan(const vs_pipe_plan* p, const vs_pipe_unit* u, int n, int P, int V, vs_pipe_split_kind measure,
                       const char* what)
{
    VT_CHECK(p->stages == P && p->chunks == V && p->nchunks == P * V && p->nunits == n, "%s: shape %d %d %d %d",
             what, p->stages, p->chunks, p->nchunks, p->nunits);
    VT_CHECK(p->first_unit[0] == 0 && p->first_unit[p->nchunks] == n, "%s: ends", what);
    for (int k = 0; k < p->nchunks; k++) {
        VT_CHECK(p->first_unit[k] < p->first_unit[k + 1], "%s: chunk %d empty", what, k);
        if (k > 0) VT_CHECK(cuttable(u, p->first_unit[k]), "%s: chunk %d cuts a group at unit %d", what, k, p->first_unit[k]);
        double s = 0;
        for (int i = p->first_unit[k]; i < p->first_unit[k + 1]; i++) s += unit_cost(&u[i], measure);
        VT_CHECK(p->cost[k] == s, "%s: chunk %d cost %g want %g", what, k, p->cost[k], s);
    }
}

static void t_brute_force(void)
{
    const vs_pipe_split_kind kinds[4] = {VS_PIPE_SPLIT_UNIFORM, VS_PIPE_SPLIT_PARAMS, VS_PIPE_SPLIT_FLOPS,
                                         VS_PIPE_SPLIT_TIME};
    static model m;
    int checked = 0, zero_errors = 0;
    for (int trial = 0; trial < 6000; trial++) {
        int n = 1 + rnd(NMAX);
        model_init(&m, n);
        int ng = 0;
        for (int i = 0; i < n; i++) {
            m.u[i].params = rnd(4) ? rnd(10) : 0;
            m.u[i].flops = rnd(4) ? rnd(10) : 0;
            m.u[i].time_f = rnd(5), m.u[i].time_b = rnd(5), m.u[i].time_w = rnd(3);
            // groups: runs of 2..3 units now and then
            if (!m.u[i].group && rnd(4) == 0 && i + 1 < n) {
                char g[16];
                snprintf(g, sizeof g, "g%d", ng++);
                model_group(&m, i, i + 1 + (i + 2 < n ? rnd(2) : 0), g);
            }
        }
        int atoms = 1;
        for (int i = 1; i < n; i++) atoms += cuttable(m.u, i);
        int K = 1 + rnd(atoms);
        int P = 1 + rnd(K);
        while (K % P) P--;
        int V = K / P;
        vs_pipe_split_kind kind = kinds[rnd(4)];
        vs_pipe_split_desc d;
        memset(&d, 0, sizeof d);
        d.stages = P, d.chunks = V == 1 && rnd(2) ? 0 : V, d.kind = kind;
        vs_pipe_plan plan;
        double total = 0;
        for (int i = 0; i < n; i++) total += unit_cost(&m.u[i], kind);
        vs_result r = vs_pipe_split(m.u, n, &d, &plan);
        if (total == 0) {
            VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "is 0"), "zero costs gave %d: %s", r,
                     vs_last_error());
            zero_errors++;
            continue;
        }
        VT_CHECK(r == VS_OK, "trial %d: %s", trial, vs_last_error());
        if (r != VS_OK) continue;
        int want[NMAX + 1];
        double want_max;
        VT_CHECK(brute(m.u, n, K, kind, want, &want_max), "trial %d: brute force found nothing", trial);
        check_plan(&plan, m.u, n, P, V, kind, "random");
        double got_max = 0;
        for (int k = 0; k < K; k++) got_max = plan.cost[k] > got_max ? plan.cost[k] : got_max;
        VT_CHECK(got_max == want_max, "trial %d (n %d K %d kind %d): largest chunk %g, optimum %g", trial, n, K,
                 (int)kind, got_max, want_max);
        int same = 1;
        char got_s[64] = "", want_s[64] = "";
        for (int k = 0; k <= K; k++) {
            same &= plan.first_unit[k] == want[k];
            size_t a = strlen(got_s), b = strlen(want_s);
            snprintf(got_s + a, sizeof got_s - a, " %d", plan.first_unit[k]);
            snprintf(want_s + b, sizeof want_s - b, " %d", want[k]);
        }
        VT_CHECK(same, "trial %d (n %d K %d kind %d): first units%s, the tie rule wants%s", trial, n, K, (int)kind,
                 got_s, want_s);
        VT_CHECK(plan.kind == kind && plan.placement == VS_PIPE_PLACE_LOOP, "trial %d: kind/placement", trial);
        checked++;
    }
    VT_CHECK(checked > 4000 && zero_errors > 0, "coverage: %d checked, %d zero-cost", checked, zero_errors);
}

/* Greedy packing: the fewest chunks with each <= cap (atoms whole), or a big
   number when one atom alone exceeds cap. */
static int greedy_chunks(const vs_pipe_unit* u, int n, double cap, vs_pipe_split_kind kind)
{
    int chunks = 1;
    double s = 0;
    for (int i = 0; i < n;) {
        int j = i + 1;
        double a = unit_cost(&u[i], kind);
        while (j < n && !cuttable(u, j)) a += unit_cost(&u[j++], kind);
        if (a > cap) return 1 << 30;
        if (s + a > cap) chunks++, s = 0;
        s += a;
        i = j;
    }
    return chunks;
}

static void t_large(void)
{
    static model m;
    model_init(&m, 512);
    for (int i = 0; i < 512; i++) m.u[i].flops = 1 + rnd(1000);
    m.u[0].flops = 20000; // a heavy embedding
    char g[16];
    for (int i = 100; i < 500; i += 50) { // blocks of 8 units that stay together
        snprintf(g, sizeof g, "blk%d", i);
        model_group(&m, i, i + 7, g);
    }
    vs_pipe_split_desc d;
    memset(&d, 0, sizeof d);
    d.stages = 16, d.chunks = 8; // 128 chunks, default kind: flops
    vs_pipe_plan p;
    clock_t t0 = clock();
    VT_OK(vs_pipe_split(m.u, 512, &d, &p));
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    check_plan(&p, m.u, 512, 16, 8, VS_PIPE_SPLIT_FLOPS, "large");
    double mx = 0;
    for (int k = 0; k < 128; k++) mx = p.cost[k] > mx ? p.cost[k] : mx;
    VT_CHECK(mx == 20000, "largest chunk %g, the embedding alone is 20000", mx);
    VT_CHECK(greedy_chunks(m.u, 512, mx, VS_PIPE_SPLIT_FLOPS) <= 128, "optimum not feasible");
    VT_CHECK(secs < 5, "512 units in 128 chunks took %.2f s", secs);
    // without the embedding dominating: the optimum is tight
    m.u[0].flops = 5;
    VT_OK(vs_pipe_split(m.u, 512, &d, &p));
    mx = 0;
    for (int k = 0; k < 128; k++) mx = p.cost[k] > mx ? p.cost[k] : mx;
    VT_CHECK(greedy_chunks(m.u, 512, mx, VS_PIPE_SPLIT_FLOPS) <= 128, "optimum %g not feasible", mx);
    VT_CHECK(greedy_chunks(m.u, 512, mx - 1, VS_PIPE_SPLIT_FLOPS) > 128, "a split under %g exists", mx);
    check_plan(&p, m.u, 512, 16, 8, VS_PIPE_SPLIT_FLOPS, "large 2");
}

static void t_known(void)
{
    static model m;
    vs_pipe_split_desc d;
    vs_pipe_plan p;
    // 8 units, uniform, 4 stages: 2 each
    model_init(&m, 8);
    memset(&d, 0, sizeof d);
    d.stages = 4, d.kind = VS_PIPE_SPLIT_UNIFORM;
    VT_OK(vs_pipe_split(m.u, 8, &d, &p));
    for (int k = 0; k <= 4; k++) VT_CHECK(p.first_unit[k] == 2 * k, "uniform 8/4: first_unit[%d] = %d", k, p.first_unit[k]);
    for (int k = 0; k < 4; k++) VT_CHECK(p.cost[k] == 2, "uniform 8/4: cost[%d] = %g", k, p.cost[k]);
    VT_CHECK(p.chunks == 1 && p.nchunks == 4, "chunks 0 means 1");
    // 9 units in 4: the tie rule puts the extra unit last (2, 2, 2, 3)
    model_init(&m, 9);
    VT_OK(vs_pipe_split(m.u, 9, &d, &p));
    const int w9[5] = {0, 2, 4, 6, 9};
    for (int k = 0; k <= 4; k++) VT_CHECK(p.first_unit[k] == w9[k], "uniform 9/4: first_unit[%d] = %d", k, p.first_unit[k]);
    // a heavy embedding counts: embed 40, six layers of 10, a head of 20, 3 stages
    model_init(&m, 8);
    m.u[0].flops = 40;
    for (int i = 1; i < 7; i++) m.u[i].flops = 10;
    m.u[7].flops = 20;
    memset(&d, 0, sizeof d);
    d.stages = 3; // default kind: flops
    VT_OK(vs_pipe_split(m.u, 8, &d, &p));
    const int we[4] = {0, 1, 5, 8};
    for (int k = 0; k <= 3; k++) VT_CHECK(p.first_unit[k] == we[k], "embedding: first_unit[%d] = %d", k, p.first_unit[k]);
    VT_CHECK(p.cost[0] == 40 && p.cost[1] == 40 && p.cost[2] == 40, "embedding: costs %g %g %g", p.cost[0], p.cost[1],
             p.cost[2]);
    VT_CHECK(p.kind == VS_PIPE_SPLIT_FLOPS, "default kind without points is flops (%d)", (int)p.kind);
    // params and time pick their own measure
    for (int i = 0; i < 8; i++) m.u[i].params = i == 7 ? 700 : 100, m.u[i].time_b = i == 0 ? 3.0 : 1.0;
    d.kind = VS_PIPE_SPLIT_PARAMS;
    VT_OK(vs_pipe_split(m.u, 8, &d, &p));
    VT_CHECK(p.first_unit[1] == 3 && p.first_unit[2] == 7 && p.cost[2] == 700, "params: %d %d %g", p.first_unit[1],
             p.first_unit[2], p.cost[2]);
    d.kind = VS_PIPE_SPLIT_TIME;
    VT_OK(vs_pipe_split(m.u, 8, &d, &p));
    // 3 | 1 1 1 | 1 1 1 1 and 3 | 1 1 1 1 | 1 1 1 tie on both criteria: earliest cuts
    VT_CHECK(p.first_unit[1] == 1 && p.first_unit[2] == 4 && p.cost[0] == 3 && p.cost[1] == 3 && p.cost[2] == 4,
             "time: %d %d costs %g %g %g", p.first_unit[1], p.first_unit[2], p.cost[0], p.cost[1], p.cost[2]);
    // a group of 3 stays together even though an even split would cut it
    model_init(&m, 6);
    model_group(&m, 2, 4, "attn");
    memset(&d, 0, sizeof d);
    d.stages = 2, d.kind = VS_PIPE_SPLIT_UNIFORM;
    VT_OK(vs_pipe_split(m.u, 6, &d, &p));
    VT_CHECK(p.first_unit[1] == 2 && p.cost[0] == 2 && p.cost[1] == 4, "group: cut at %d", p.first_unit[1]);
    // every flops 0 with the default kind: an error, not a guess
    model_init(&m, 4);
    memset(&d, 0, sizeof d);
    d.stages = 2;
    VT_ERR(vs_pipe_split(m.u, 4, &d, &p), VS_ERR_INVALID, "flops");
    VT_CHECK(p.nchunks == 0, "out zeroed on error");
}

static void t_manual(void)
{
    static model m;
    vs_pipe_split_desc d;
    vs_pipe_plan p;
    model_init(&m, 8);
    memset(&d, 0, sizeof d);
    d.stages = 2, d.chunks = 2, d.points = " l2 , l3,l6 "; // default kind with points: manual
    VT_OK(vs_pipe_split(m.u, 8, &d, &p));
    const int w[5] = {0, 2, 3, 6, 8};
    for (int k = 0; k <= 4; k++) VT_CHECK(p.first_unit[k] == w[k], "manual: first_unit[%d] = %d", k, p.first_unit[k]);
    VT_CHECK(p.kind == VS_PIPE_SPLIT_MANUAL, "kind %d", (int)p.kind);
    check_plan(&p, m.u, 8, 2, 2, VS_PIPE_SPLIT_UNIFORM, "manual, cost in units");
    for (int i = 0; i < 8; i++) m.u[i].flops = i + 1;
    VT_OK(vs_pipe_split(m.u, 8, &d, &p));
    check_plan(&p, m.u, 8, 2, 2, VS_PIPE_SPLIT_FLOPS, "manual, cost in flops");
    VT_CHECK(p.cost[0] == 3 && p.cost[3] == 15, "manual flops costs %g %g", p.cost[0], p.cost[3]);
    // one chunk needs no points
    memset(&d, 0, sizeof d);
    d.stages = 1, d.kind = VS_PIPE_SPLIT_MANUAL;
    VT_OK(vs_pipe_split(m.u, 8, &d, &p));
    VT_CHECK(p.nchunks == 1 && p.first_unit[1] == 8 && p.cost[0] == 36, "one chunk");

    memset(&d, 0, sizeof d);
    d.stages = 4, d.kind = VS_PIPE_SPLIT_MANUAL;
    model_group(&m, 3, 5, "blk");
    d.points = "l2,l9,l6";
    VT_EXPECT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "'l9'", "not the name");
    d.points = "l6,l2,l7";
    VT_EXPECT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "'l2' (unit 2) comes after", "'l6'");
    d.points = "l2,l2,l6";
    VT_EXPECT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "'l2'", "twice");
    d.points = "l0,l2,l6";
    VT_EXPECT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "'l0'", "first unit");
    d.points = "l2,l6";
    VT_EXPECT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "2 split points", "want 3");
    d.points = "l1,l2,l3,l6";
    VT_EXPECT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "4 split points", "want 3");
    d.points = NULL;
    VT_EXPECT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "0 split points", "want 3");
    d.points = "l2,l4,l6";
    VT_EXPECT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "'l4'", "group 'blk' (units l3..l5)");
    d.points = "l2,,l6";
    VT_EXPECT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "split point 2", "empty");
    d.points = "l2,l3,l6";
    VT_OK(vs_pipe_split(m.u, 8, &d, &p));
    d.kind = VS_PIPE_SPLIT_FLOPS;
    VT_EXPECT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "l2,l3,l6", "flops");
}

static void t_bad_input(void)
{
    static model m;
    vs_pipe_split_desc d;
    vs_pipe_plan p;
    model_init(&m, 8);
    for (int i = 0; i < 8; i++) m.u[i].flops = 1, m.u[i].params = 1, m.u[i].time_f = 1;
    memset(&d, 0, sizeof d);
    d.stages = 2;
    VT_ERR(vs_pipe_split(NULL, 8, &d, &p), VS_ERR_NULL, "units");
    VT_ERR(vs_pipe_split(m.u, 8, NULL, &p), VS_ERR_NULL, "desc");
    VT_ERR(vs_pipe_split(m.u, 8, &d, NULL), VS_ERR_NULL, "out");
    VT_ERR(vs_pipe_split(m.u, 0, &d, &p), VS_ERR_INVALID, "nunits = 0");
    d.stages = 0;
    VT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "stages = 0");
    d.stages = 2, d.chunks = -1;
    VT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "chunks = -1");
    d.stages = 16, d.chunks = 17;
    VT_EXPECT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "272", "VS_PIPE_MAX_CHUNKS");
    d.stages = 9, d.chunks = 0;
    VT_EXPECT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "9 chunks", "only 8 units");
    model_group(&m, 0, 1, "emb");
    model_group(&m, 4, 5, "mid");
    d.stages = 4, d.chunks = 2;
    VT_EXPECT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "8 chunks", "only 6 unsplittable groups");
    d.stages = 3, d.chunks = 2;
    VT_OK(vs_pipe_split(m.u, 8, &d, &p)); // 6 chunks over 6 groups: each group its own chunk
    VT_CHECK(p.first_unit[1] == 2 && p.first_unit[4] == 6, "6 groups in 6 chunks");
    model_group(&m, 7, 7, "emb");
    VT_EXPECT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "group 'emb'", "'l7'");
    model_init(&m, 8);
    for (int i = 0; i < 8; i++) m.u[i].flops = 1, m.u[i].params = 1, m.u[i].time_f = 1;
    d.stages = 2, d.chunks = 0;
    m.u[3].flops = -5;
    VT_EXPECT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "'l3'", "flops = -5");
    m.u[3].flops = NAN;
    VT_EXPECT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "'l3'", "flops = nan");
    m.u[3].flops = INFINITY;
    VT_EXPECT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "'l3'", "flops = inf");
    d.kind = VS_PIPE_SPLIT_UNIFORM; // flops do not matter to a uniform split
    VT_OK(vs_pipe_split(m.u, 8, &d, &p));
    m.u[3].flops = 1;
    m.u[6].time_b = NAN;
    d.kind = VS_PIPE_SPLIT_TIME;
    VT_EXPECT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "'l6'", "time_b = nan");
    m.u[6].time_b = 0;
    m.u[5].params = -1;
    d.kind = VS_PIPE_SPLIT_PARAMS;
    VT_EXPECT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "'l5'", "params = -1");
    m.u[5].params = 1;
    m.u[2].name = NULL;
    VT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_NULL, "unit 2");
    m.u[2].name = "l5";
    VT_EXPECT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "'l5'", "units 2 and 5");
    m.u[2].name = "a_name_much_longer_than_sixty_three_bytes_which_the_model_does_not_take";
    VT_EXPECT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "unit 2", "63 bytes");
    m.u[2].name = m.names[2];
    d.kind = (vs_pipe_split_kind)99;
    VT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "kind = 99");
    d.kind = VS_PIPE_SPLIT_UNIFORM, d.placement = (vs_pipe_placement)7;
    VT_ERR(vs_pipe_split(m.u, 8, &d, &p), VS_ERR_INVALID, "placement = 7");
    d.placement = VS_PIPE_PLACE_DEFAULT;
    VT_OK(vs_pipe_split(m.u, 8, &d, &p));
}

static void t_placement(void)
{
    static model m;
    model_init(&m, 16);
    vs_pipe_split_desc d;
    vs_pipe_plan p;
    memset(&d, 0, sizeof d);
    d.stages = 4, d.chunks = 2, d.kind = VS_PIPE_SPLIT_UNIFORM;
    const int loop[8] = {0, 1, 2, 3, 0, 1, 2, 3}, vee[8] = {0, 1, 2, 3, 3, 2, 1, 0};
    VT_OK(vs_pipe_split(m.u, 12, &d, &p));
    VT_CHECK(p.placement == VS_PIPE_PLACE_LOOP, "default placement is loop");
    for (int k = 0; k < 8; k++) VT_CHECK(p.chunk_stage[k] == loop[k], "loop: chunk %d on %d", k, p.chunk_stage[k]);
    d.placement = VS_PIPE_PLACE_V;
    VT_OK(vs_pipe_split(m.u, 12, &d, &p));
    VT_CHECK(p.placement == VS_PIPE_PLACE_V, "placement V");
    for (int k = 0; k < 8; k++) VT_CHECK(p.chunk_stage[k] == vee[k], "V: chunk %d on %d", k, p.chunk_stage[k]);
    d.chunks = 4; // the zigzag goes on: 0..3, 3..0, 0..3, 3..0
    VT_OK(vs_pipe_split(m.u, 16, &d, &p));
    for (int k = 0; k < 16; k++)
        VT_CHECK(p.chunk_stage[k] == ((k / 4) % 2 ? 3 - k % 4 : k % 4), "V x4: chunk %d on %d", k, p.chunk_stage[k]);
}

/* desc.schedule: the split checks the schedule it is for and resolves its
   defaults (ZB-V: 2 chunks in a V); vs_pipe_unit_chunk says where a unit went. */
static void t_for_schedule(void)
{
    static model m;
    model_init(&m, 16);
    vs_pipe_split_desc d;
    vs_pipe_plan p;
    memset(&d, 0, sizeof d);
    d.stages = 4, d.kind = VS_PIPE_SPLIT_UNIFORM, d.schedule = VS_PIPE_ZBV;
    VT_OK(vs_pipe_split(m.u, 16, &d, &p));
    VT_CHECK(p.chunks == 2 && p.placement == VS_PIPE_PLACE_V, "zbv: %d chunks, placement %d (want 2, V)", p.chunks,
             (int)p.placement);
    const int vee[8] = {0, 1, 2, 3, 3, 2, 1, 0};
    for (int k = 0; k < 8; k++) VT_CHECK(p.chunk_stage[k] == vee[k], "zbv: chunk %d on %d", k, p.chunk_stage[k]);
    vs_pipe_sched* s = NULL; // the generator's schedule fits that plan: what vs_pipe_run would check
    VT_OK(vs_pipe_generate(NULL, VS_PIPE_ZBV, 4, 0, 8, &s));
    vs_pipe_sched_free(s);
    d.placement = VS_PIPE_PLACE_LOOP;
    VT_ERR(vs_pipe_split(m.u, 16, &d, &p), VS_ERR_INVALID, "placement LOOP does not fit schedule zbv");
    d.placement = VS_PIPE_PLACE_DEFAULT, d.chunks = 3;
    VT_ERR(vs_pipe_split(m.u, 16, &d, &p), VS_ERR_INVALID, "chunks = 3 per stage for schedule zbv");
    d.schedule = VS_PIPE_1F1B, d.chunks = 2;
    VT_ERR(vs_pipe_split(m.u, 16, &d, &p), VS_ERR_INVALID, "chunks = 2 per stage for schedule 1f1b");
    d.schedule = VS_PIPE_INTERLEAVED, d.placement = VS_PIPE_PLACE_V;
    VT_ERR(vs_pipe_split(m.u, 16, &d, &p), VS_ERR_INVALID, "placement V does not fit schedule interleaved");
    d.placement = VS_PIPE_PLACE_DEFAULT;
    VT_OK(vs_pipe_split(m.u, 16, &d, &p));
    VT_CHECK(p.placement == VS_PIPE_PLACE_LOOP && p.chunks == 2, "interleaved: loop, 2 chunks");
    d.schedule = 99;
    VT_ERR(vs_pipe_split(m.u, 16, &d, &p), VS_ERR_INVALID, "schedule = 99");
    d.schedule = VS_PIPE_DEFAULT, d.chunks = 0; // any schedule: as before
    VT_OK(vs_pipe_split(m.u, 16, &d, &p));
    VT_CHECK(p.chunks == 1 && p.placement == VS_PIPE_PLACE_LOOP, "default: 1 chunk, loop");
    VT_ERR(vs_pipe_generate(NULL, VS_PIPE_DEFAULT, 4, 0, 8, &s), VS_ERR_INVALID, "kind 0 (VS_PIPE_DEFAULT) names no schedule");
    // where each unit went: 16 units in 4 chunks of 4
    d.schedule = VS_PIPE_1F1B;
    VT_OK(vs_pipe_split(m.u, 16, &d, &p));
    for (int u = 0; u < 16; u++) {
        int st = -9, c = vs_pipe_unit_chunk(&p, u, &st);
        VT_CHECK(c == u / 4 && st == p.chunk_stage[u / 4], "unit %d: chunk %d stage %d, want %d", u, c, st, u / 4);
    }
    int st = 0;
    VT_CHECK(vs_pipe_unit_chunk(&p, 16, &st) == -1 && st == -1 && strstr(vs_last_error(), "unit 16 (0..15)"),
             "unit 16: %s", vs_last_error());
    VT_CHECK(vs_pipe_unit_chunk(NULL, 0, NULL) == -1 && strstr(vs_last_error(), "plan is NULL"), "NULL plan");
}

static void t_print(void)
{
    static model m;
    model_init(&m, 12);
    for (int i = 0; i < 12; i++) m.u[i].flops = i == 0 ? 400 : 100;
    vs_pipe_split_desc d;
    vs_pipe_plan p;
    memset(&d, 0, sizeof d);
    d.stages = 2, d.chunks = 2, d.placement = VS_PIPE_PLACE_V;
    VT_OK(vs_pipe_split(m.u, 12, &d, &p)); // l0 | l1 l2 l3 | l4..l7 | l8..l11
    char buf[2048];
    int n = vs_pipe_plan_print(&p, m.u, buf, sizeof buf);
    VT_CHECK(n > 0 && (size_t)n == strlen(buf), "length %d vs strlen %zu", n, strlen(buf));
    const char* want[] = {"split flops", "2 stages x 2 chunks", "placement V", "max 400.0", "min 300.0",
                          "imbalance 1.067", "stage 0 chunk 0: l0 (1 unit) cost 400.0",
                          "stage 1 chunk 1: l1, l2, l3 (3 units) cost 300.0",
                          "stage 1 chunk 2: units l4..l7 (4 units) cost 400.0",
                          "stage 0 chunk 3: units l8..l11 (4 units) cost 400.0"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        VT_CHECK(strstr(buf, want[i]), "print lacks \"%s\":\n%s", want[i], buf);
    int lines = 0;
    for (const char* c = buf; *c; c++) lines += *c == '\n';
    VT_CHECK(lines == 5, "%d lines:\n%s", lines, buf);
    // the length contract
    VT_CHECK(vs_pipe_plan_print(&p, m.u, NULL, 0) == n, "NULL buffer gives the length");
    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    VT_CHECK(vs_pipe_plan_print(&p, m.u, tiny, sizeof tiny) == n, "tiny buffer gives the full length");
    VT_CHECK(tiny[7] == 0 && strncmp(tiny, buf, 7) == 0, "tiny buffer holds the start: \"%.8s\"", tiny);
    // without units: indices; manual plans say their measure
    n = vs_pipe_plan_print(&p, NULL, buf, sizeof buf);
    VT_CHECK(strstr(buf, "chunk 2: units 4..7 (4 units)") && (size_t)n == strlen(buf), "no units:\n%s", buf);
    d.points = "l3,l5,l11", d.placement = VS_PIPE_PLACE_DEFAULT;
    VT_OK(vs_pipe_split(m.u, 12, &d, &p));
    vs_pipe_plan_print(&p, m.u, buf, sizeof buf);
    VT_CHECK(strstr(buf, "split manual, cost in flops") && strstr(buf, "placement loop") &&
                 strstr(buf, "stage 1 chunk 3: l11 (1 unit) cost 100.0"),
             "manual:\n%s", buf);
    VT_ERR(vs_pipe_plan_print(NULL, m.u, buf, sizeof buf), -1, "plan is NULL");
    VT_CHECK(buf[0] == 0, "NULL plan: empty text");
    p.first_unit[2] = p.first_unit[1]; // an empty chunk: not a plan split makes
    vs_pipe_plan_print(&p, m.u, buf, sizeof buf);
    VT_CHECK(strstr(buf, "invalid"), "bad plan:\n%s", buf);
}

int main(void)
{
    VT_CASE("pipe_split/brute_force_optimum", t_brute_force());
    VT_CASE("pipe_split/large_model", t_large());
    VT_CASE("pipe_split/known_cases", t_known());
    VT_CASE("pipe_split/manual_points", t_manual());
    VT_CASE("pipe_split/bad_input", t_bad_input());
    VT_CASE("pipe_split/placement", t_placement());
    VT_CASE("pipe_split/for_a_schedule", t_for_schedule());
    VT_CASE("pipe_split/print", t_print());
    return vt_summary();
}
