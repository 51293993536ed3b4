/* test_elastic_mpi.c - issue 24 on MPI with ULFM: the survivors of a process
   that ends learn of it (VS_ERR_ABORTED naming it), shrink the world with
   MPIX_Comm_shrink, and go on; a mesh drops the failed rank's DP replica.

   Needs an MPI with ULFM run with it (Open MPI 5: mpirun --with-ft ulfm);
   tests/ulfm.sh builds this with such an mpicc and runs one mpirun a case:
       test_elastic_mpi kill    4 ranks; world rank 2's process is killed
                                (SIGKILL) between two all-reduces
       test_elastic_mpi abort   world rank 1 fails and says so (vs_world_abort):
                                the others hear its error, then shrink
       test_elastic_mpi mesh    DP2 x TP2, world rank 3 killed: vs_mesh_shrink
                                drops replica 1 (world rank 2 leaves), DP1 x TP2
       test_elastic_mpi second  as kill, and world rank 1 kills its own process
                                when it learns of the failure, as the others
                                shrink: the survivors end on 2 ranks (in one
                                shrink, or a second after VS_ERR_ABORTED
                                "shrink again"), never hang
       test_elastic_mpi bad     2 ranks, no failure: a shrink is VS_ERR_STATE, a
                                grow VS_ERR_UNSUPPORTED
       test_elastic_mpi noft    run without --with-ft: a shrink says how to get it
       test_elastic_mpi train   vs_train on PP1 x DP2 x TP2 (tests/train_model.h),
                                world rank 3 killed before step 3: the survivors
                                shrink (rank 2 leaves with the replica),
                                vs_train_reconfigure onto DP1 x TP2 from memory
                                and redo step 3; every loss and the final
                                parameters equal one host rank's uninterrupted
                                run (threads transport, in each process)
   Every result is an all-reduce of (world rank + 1) checked against its
   formula, every vs_reform_info against the ranks the case killed. The
   survivors agree on their verdict (an all-reduce of it); world rank 0 prints
   the ok or not ok line. */
#define VESCALE_IMPLEMENTATION
#include "vescale.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "train_model.h"

static int fails;
#define CHECK(cond, ...)                                                                \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "    world rank %d: check failed: %s: ", me, #cond);         \
            fprintf(stderr, __VA_ARGS__);                                               \
            fprintf(stderr, "\n");                                                      \
            fails++;                                                                    \
        }                                                                               \
    } while (0)

static float sum_ranks(vs_comm* c, int me, vs_result* r)
{
    float v = (float)(me + 1);
    *r = vs_all_reduce(c, &v, &v, 1, VS_F32, VS_OP_SUM, NULL);
    return v;
}

/* The survivors' verdict: one line from world rank 0. */
static int verdict(vs_comm* c, int me, const char* name)
{
    int32_t bad = fails, all = 0;
    vs_result r = c ? vs_all_reduce(c, &bad, &all, 1, VS_I32, VS_OP_MAX, NULL) : VS_OK;
    if (r) all = 1, fprintf(stderr, "    world rank %d: the verdict's all-reduce: %s\n", me, vs_last_error());
    if (me == 0) printf("%s mpi-ulfm/%s\n", all ? "not ok" : "ok", name);
    fflush(stdout);
    return all != 0;
}

/* This process's MPI world (timeout 20 s); NULL, said, when it fails. */
static vs_world* open_world(void)
{
    vs_world_desc wd;
    memset(&wd, 0, sizeof wd);
    wd.transport = VS_TRANSPORT_MPI;
    wd.timeout_s = 20;
    vs_world* w = NULL;
    if (vs_world_init(&wd, &w)) fprintf(stderr, "vs_world_init: %s\n", vs_last_error());
    return w;
}

enum { ROWS = 24, STEPS = 6, NPARAM = 9 };
static const char* PNAMES[NPARAM] = {"proj", "b0.fc1.w", "b0.fc1.b", "b0.fc2.w", "b0.fc2.b",
                                     "b1.fc1.w", "b1.fc1.b", "b1.fc2.w", "b1.fc2.b"};
static const int PSIZE[NPARAM] = {D * D, D * H, H, H * D, D, D * H, H, H * D, D};
static double ref_loss[STEPS];
static float ref_param[NPARAM][D * H];

static vs_train_desc desc_of(vs_plan* plan, int dp)
{
    memset(plan, 0, sizeof *plan);
    plan->pp = 1, plan->dp = dp, plan->tp = 2;
    plan->microbatches = 1;
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &MODEL;
    d.plan = plan;
    d.lr.lr = 0.05;
    return d;
}

/* The reference: one host rank (threads), every step. */
static int ref_fn(vs_world* w, void* arg)
{
    (void)arg;
    vs_plan plan;
    vs_train_desc d = desc_of(&plan, 1);
    plan.tp = 1;
    vs_train* t = NULL;
    float X[ROWS * D], T[ROWS * D];
    int bad = vs_parallelize(w, &d, &t) != VS_OK;
    for (int k = 0; !bad && k < STEPS; k++) {
        vs_batch b = tm_batch(k, X, T, ROWS);
        bad = vs_train_step(t, &b, &ref_loss[k]) != VS_OK;
    }
    for (int i = 0; !bad && i < NPARAM; i++)
        bad = vs_train_get_param(t, PNAMES[i], ref_param[i], sizeof(float) * (size_t)PSIZE[i]) != VS_OK;
    if (bad) fprintf(stderr, "the reference: %s\n", vs_last_error());
    vs_train_free(t);
    return bad;
}

static double rel(double a, double b) { return fabs(a - b) / (fabs(b) > 1e-3 ? fabs(b) : 1e-3); }

static int case_train(void)
{
    build_model();
    if (vs_launch(1, ref_fn, NULL) != VS_OK) {
        fprintf(stderr, "the reference run: %s\n", vs_last_error());
        return 1;
    }
    vs_world* w = open_world();
    if (!w) return 1;
    int me = vs_world_rank(w), shrinks = 0;
    vs_plan plan;
    vs_train_desc d = desc_of(&plan, 2);
    vs_train* t = NULL;
    float X[ROWS * D], T[ROWS * D];
    double loss[STEPS], worst = 0;
    CHECK(vs_parallelize(w, &d, &t) == VS_OK, "vs_parallelize: %s", vs_last_error());
    while (t && vs_train_steps(t) < STEPS) {
        int k = (int)vs_train_steps(t);
        if (me == 3 && k == 3) raise(SIGKILL); // (its process ends)
        vs_batch b = tm_batch(k, X, T, ROWS);
        vs_result r = vs_train_step(t, &b, &loss[k]);
        if (!r) continue;
        CHECK(r == VS_ERR_ABORTED && k == 3 && strstr(vs_last_error(), "world rank 3 failed"), "step %d: %s", k,
              vs_last_error());
        vs_mesh* small = NULL;
        vs_reform_info ri;
        r = vs_mesh_shrink(vs_train_mesh(t), "DP", &small, &ri);
        CHECK(r == VS_OK && ri.nfailed == 1 && ri.failed[0] == 3 && ri.left == (me == 2), "shrink: %s",
              r ? vs_last_error() : "a wrong answer");
        shrinks++;
        if (r || !small) { // (rank 2 left with the failed replica: on MPI it ends here)
            vs_train_free(t);
            t = NULL;
            break;
        }
        vs_reconfig_info ci;
        r = vs_train_reconfigure(&t, &d, small, NULL, &ci);
        CHECK(r == VS_OK, "vs_train_reconfigure: %s", vs_last_error());
        if (r) break;
    }
    if (t && vs_train_steps(t) == STEPS) {
        for (int k = 0; k < STEPS; k++) {
            double e = rel(loss[k], ref_loss[k]);
            if (e > worst) worst = e;
            CHECK(e < 1e-5, "step %d: loss %.9g, one host rank %.9g", k, loss[k], ref_loss[k]);
        }
        for (int i = 0; i < NPARAM; i++) {
            float v[D * H], big = 1e-6f, dmax = 0;
            CHECK(vs_train_get_param(t, PNAMES[i], v, sizeof v) == VS_OK, "get %s: %s", PNAMES[i], vs_last_error());
            for (int j = 0; j < PSIZE[i]; j++) {
                if (fabsf(ref_param[i][j]) > big) big = fabsf(ref_param[i][j]);
                if (fabsf(v[j] - ref_param[i][j]) > dmax) dmax = fabsf(v[j] - ref_param[i][j]);
            }
            if (dmax / big > worst) worst = dmax / big;
            CHECK(dmax / big < 1e-5, "%s differs from one host rank by %.3g of its largest", PNAMES[i], dmax / big);
        }
        CHECK(shrinks == 1, "%d shrinks", shrinks);
        if (me == 0) printf("    largest relative difference from one host rank: %.2e\n", worst);
    } else {
        CHECK(me == 2, "world rank %d stopped at step %d", me, t ? (int)vs_train_steps(t) : -1);
    }
    int out = me == 2 ? fails != 0 : verdict(vs_world_comm(w), me, "train");
    vs_train_free(t);
    vs_world_free(w);
    return out;
}

int main(int argc, char** argv)
{
    const char* cs = argc > 1 ? argv[1] : "";
    if (!strcmp(cs, "train")) return case_train();
    vs_world* w = open_world();
    if (!w) return 1;
    int me = vs_world_rank(w), n = vs_world_size(w), out = 0;
    vs_result r;
    float got = sum_ranks(vs_world_comm(w), me, &r);
    CHECK(r == VS_OK && got == n * (n + 1) / 2, "step 1: %s, %g", vs_result_string(r), got);
    if (!strcmp(cs, "bad") || !strcmp(cs, "noft")) {
        int ft = !strcmp(cs, "bad");
        r = vs_world_shrink(w, NULL);
        CHECK(r == (ft ? VS_ERR_STATE : VS_ERR_UNSUPPORTED) &&
                  strstr(vs_last_error(), ft ? "saw no failure" : "--with-ft ulfm"),
              "shrink: %s: %s", vs_result_string(r), vs_last_error());
        if (ft) {
            r = vs_world_grow(w, NULL);
            CHECK(r == VS_ERR_UNSUPPORTED && strstr(vs_last_error(), "does not grow back"), "grow: %s: %s",
                  vs_result_string(r), vs_last_error());
        }
        out = verdict(vs_world_comm(w), me, cs);
        vs_world_free(w);
        return out;
    }
    int mesh = !strcmp(cs, "mesh"), victim = !strcmp(cs, "abort") ? 1 : mesh ? 3 : 2, second = !strcmp(cs, "second");
    vs_mesh* m = NULL;
    vs_mesh* small = NULL;
    if (mesh) {
        vs_mesh_desc md = {{2, 2}, 0, {0}, NULL};
        if (vs_mesh_init(w, &md, &m)) fprintf(stderr, "vs_mesh_init: %s\n", vs_last_error()), fails++;
    }
    if (me == victim) {
        if (!strcmp(cs, "abort")) {
            vs_all_reduce(NULL, NULL, NULL, 1, VS_F32, VS_OP_SUM, NULL); // (this rank's own error, its last)
            vs_world_abort(w, VS_ERR_INVALID);                         // (does not return)
        }
        raise(SIGKILL);
    }
    double t0 = _vs_now();
    got = sum_ranks(vs_world_comm(w), me, &r);
    double dt = _vs_now() - t0;
    if (second && me == 1) raise(SIGKILL); // (a second failure, as the others shrink)
    char want[64];
    snprintf(want, sizeof want, "world rank %d failed", victim);
    CHECK(r == VS_ERR_ABORTED && strstr(vs_last_error(), want) &&
              strstr(vs_last_error(), victim == 1 ? "VS_ERR_INVALID" : "its process ended"),
          "step 2 gave %s: %s", vs_result_string(r), vs_last_error());
    CHECK(dt < 10, "the failure took %.2f s to come (timeout 20 s)", dt);
    vs_reform_info ri;
    memset(&ri, 0, sizeof ri);
    if (mesh) {
        r = vs_mesh_shrink(m, "DP", &small, &ri);
        CHECK(r == VS_OK, "vs_mesh_shrink: %s", vs_last_error());
        CHECK(ri.nfailed == 1 && ri.failed[0] == 3 && ri.ndropped == 1 && ri.dropped[0] == 2 && ri.nlive == 2 &&
                  ri.left == (me == 2) && (small == NULL) == (me == 2),
              "shrink: failed %d [%d], dropped %d [%d], live %d, left %d", ri.nfailed, ri.failed[0], ri.ndropped,
              ri.dropped[0], ri.nlive, ri.left);
        if (me == 2) { // (it left with its replica: on MPI it does not come back)
            vs_mesh_free(m);
            vs_world_free(w);
            return fails != 0;
        }
        CHECK(small && vs_mesh_size(small, "DP") == 1 && vs_mesh_size(small, "TP") == 2, "the smaller mesh");
        vs_mesh* tp = NULL;
        if (small && !vs_mesh_submesh(small, "TP", &tp)) {
            got = sum_ranks(vs_mesh_comm(tp), me, &r);
            CHECK(r == VS_OK && got == 1 + 2, "TP all-reduce on the smaller mesh: %s, %g", vs_result_string(r), got);
        }
    } else if (second) {
        r = vs_world_shrink(w, &ri); // (MPI's shrink takes rank 1's death in; a split after it may not)
        if (r == VS_ERR_ABORTED && strstr(vs_last_error(), "shrink again")) r = vs_world_shrink(w, &ri);
        CHECK(r == VS_OK, "vs_world_shrink: %s", vs_last_error());
        int f1 = 0, f2 = 0;
        for (int i = 0; i < ri.nfailed && i < VS_REFORM_LIST; i++) f1 |= ri.failed[i] == 1, f2 |= ri.failed[i] == 2;
        CHECK(r == VS_OK && ri.nlive == 2 && f1 && f2 && !ri.left, "shrink: failed %d, live %d, epoch %d",
              ri.nfailed, ri.nlive, ri.epoch);
    } else {
        r = vs_world_shrink(w, &ri);
        CHECK(r == VS_OK, "vs_world_shrink: %s", vs_last_error());
        CHECK(ri.nfailed == 1 && ri.failed[0] == victim && ri.nlive == 3 && ri.epoch == 1 && !ri.left,
              "shrink: failed %d [%d], live %d, epoch %d", ri.nfailed, ri.failed[0], ri.nlive, ri.epoch);
    }
    int want_sum = mesh ? 1 + 2 : second ? 1 + 4 : 10 - (victim + 1);
    for (int step = 0; step < 3; step++) { // (and it goes on)
        got = sum_ranks(vs_world_comm(w), me, &r);
        CHECK(r == VS_OK && got == want_sum, "all-reduce after the shrink: %s, %g, want %d", vs_result_string(r), got,
              want_sum);
    }
    r = vs_world_shrink(w, NULL); // (no second failure: nothing to shrink from)
    CHECK(r == VS_ERR_STATE, "a second shrink: %s", vs_result_string(r));
    out = verdict(vs_world_comm(w), me, cs);
    vs_mesh_free(small);
    vs_mesh_free(m);
    vs_world_free(w);
    return out;
}
