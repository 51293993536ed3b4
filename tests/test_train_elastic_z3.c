/* test_train_elastic_z3.c - elastic training (vs_train_reconfigure) of HSDP
   and ZeRO-3 states on thread ranks: a rank dies in the middle of a step and
   the survivors go on.
   - HSDP (plan.dp_shard, a PP x DPR x DPS x TP mesh) under ZeRO-0..3: the
     survivors shrink by the failed rank's DPR replica (vs_mesh_shrink along
     "DPR") and go on from memory: every shard the replica held lives in
     another replica at the same DPS coordinate, so info.lost is 0 and no
     checkpoint is read (the path passed does not exist). DPR2 x DPS2 (and
     x TP2) becomes plain DP over DPS (DPR 1: a (PP, DP, TP) mesh); DPR3 x DPS2
     stays HSDP (DPR2 x DPS2), DPR2 x DPS1 goes on as one rank. A replica
     comes back (vs_world_grow) and the mesh is whole again. Random kills
     (VS_ELASTIC_Z3_KILLS, 12 here, 500 in make test-long) on DPR2 x DPS2,
     x TP2 and PP2 x, ZeRO-1 and ZeRO-3.
   - a shrink along DPS instead: every copy of that coordinate's shards goes;
     they come from the checkpoint.
   - plain ZeRO-3 (DP4): the lost rank's parameter shards, masters and moments
     exist nowhere else: they come from the checkpoint saved after each step
     (DP4 -> 3, and DP2 -> 1); with no checkpoint every survivor is refused
     (VS_ERR_STATE) saying so.
   The reference of each run is computed independently, without
   vs_train_reconfigure: the same job on the whole mesh for the steps before
   the kill, a checkpoint, then a new job (vs_parallelize) on the smaller mesh
   loaded from it for the steps after (and, after a grow, a checkpoint of that
   and a job on the whole mesh again). Losses and final parameters are equal
   bit for bit: each segment runs the same reductions in the same order as
   the elastic run (the same mesh, plan and batch split), and state moved in
   memory or through a checkpoint is the same f32 values.
   - bad input: a mesh whose dims are neither (PP, DP, TP) nor
     (PP, DPR, DPS, TP), TP changed on an HSDP mesh; the state unchanged.
   On main before this change every reconfigure here was VS_ERR_UNSUPPORTED. */
#define VESCALE_IMPLEMENTATION
#include "../vescale.h"
#include "vs_test.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "train_model.h"

enum { ROWS = 24, STEPS = 6, NPARAM = 9 };
static const char* PNAMES[NPARAM] = {"proj", "b0.fc1.w", "b0.fc1.b", "b0.fc2.w", "b0.fc2.b",
                                     "b1.fc1.w", "b1.fc1.b", "b1.fc2.w", "b1.fc2.b"};
static const int PSIZE[NPARAM] = {D * D, D * H, H, H * D, D, D * H, H, H * D, D};
#define NOWHERE "/nonexistent/vs_elastic_z3_ckpt" /* a checkpoint that is never there: reading it fails */

/* A mesh and plan: PP x DP x TP, dp_shard S (0: plain DP; else DPR = dp / S). */
typedef struct shape {
    int pp, dp, shard, tp;
    vs_zero_stage zero;
} shape;

typedef struct job {
    shape s;
    // the elastic run
    int victim, kill_step, kill_at; // world rank `victim` dies at its kill_at-th layer call of step kill_step
    int grow;                       // the step at which its replica comes back (0: never)
    int ckpt;                       // 0: pass NOWHERE; 1: save after every step and pass the latest; 2: pass NULL
    const char* dim;                // the dim to shrink along (NULL: DPR with HSDP, else DP)
    char dir[128];
    // a reference segment: steps [first, last), loaded from `load` before, saved to `save` after (NULL: none)
    int first, last;
    const char* load;
    const char* save;
    // results
    double loss[STEPS];
    int have[STEPS], mismatch;
    float params[NPARAM][D * H];
    int params_from;
    int shrinks, grows, refused, ok_msgs, plain_after, bad_mesh;
    vs_reconfig_info info; // the new mesh's rank 0's, at the shrink
    char msg[400];
} job;

static __thread int tl_countdown = -1;
static int fault(vs_pipe_call* c, int bwd)
{
    (void)c, (void)bwd;
    return tl_countdown >= 0 && tl_countdown-- == 0;
}

static vs_train_desc desc_of(const shape* s, vs_plan* p)
{
    memset(p, 0, sizeof *p);
    p->pp = s->pp, p->dp = s->dp, p->tp = s->tp, p->dp_shard = s->shard, p->zero = s->zero;
    p->schedule = VS_PIPE_1F1B;
    p->microbatches = s->pp;
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &MODEL;
    d.plan = p;
    d.lr.lr = 0.05;
    d.optim.kind = VS_OPTIM_ADAMW;
    d.optim.weight_decay = 0.01;
    return d;
}

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static void record(job* J, int step, double loss)
{
    pthread_mutex_lock(&g_mu);
    if (!J->have[step]) J->loss[step] = loss, J->have[step] = 1;
    else if (memcmp(&J->loss[step], &loss, sizeof loss)) J->mismatch++; // every rank reports the same global loss
    pthread_mutex_unlock(&g_mu);
}

/* The final parameters, gathered on every rank, kept by the lowest live one. */
static void keep_params(job* J, vs_world* w, vs_train* t)
{
    for (int i = 0; i < NPARAM; i++) {
        float v[D * H];
        VT_OK(vs_train_get_param(t, PNAMES[i], v, sizeof(float) * (size_t)PSIZE[i]));
        if (vs_comm_rank(vs_world_comm(w)) == 0) memcpy(J->params[i], v, sizeof(float) * (size_t)PSIZE[i]);
    }
    if (vs_comm_rank(vs_world_comm(w)) == 0) J->params_from = vs_world_rank(w);
}

/* The whole mesh of the job's shape, as vs_parallelize makes it. */
static vs_result whole_mesh(vs_world* w, const shape* s, vs_mesh** m)
{
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    if (s->shard) {
        int v[4] = {s->pp, s->dp / s->shard, s->shard, s->tp};
        static const char* n[4] = {"PP", "DPR", "DPS", "TP"};
        for (int i = 0; i < 4; i++) md.shape[i] = v[i], md.dim_names[i] = n[i];
    } else {
        int v[3] = {s->pp, s->dp, s->tp};
        static const char* n[3] = {"PP", "DP", "TP"};
        for (int i = 0; i < 3; i++) md.shape[i] = v[i], md.dim_names[i] = n[i];
    }
    return vs_mesh_init(w, &md, m);
}

static const char* ckpt_of(job* J, char* buf, size_t cap)
{
    if (J->ckpt == 2) return NULL;
    if (J->ckpt == 0) return NOWHERE;
    return vs_ckpt_latest(J->dir, buf, cap) == VS_OK ? buf : NULL;
}

/* A rank of the elastic run. */
static int elastic_fn(vs_world* w, void* arg)
{
    job* J = (job*)arg;
    const int me = vs_world_rank(w);
    vs_plan plan;
    vs_train_desc d = desc_of(&J->s, &plan);
    const char* dim = J->dim ? J->dim : J->s.shard ? "DPR" : "DP";
    vs_train* t = NULL;
    float X[ROWS * D], T[ROWS * D];
    char buf[300];
    int shrunk = 0, grown = 0, respawned = 0;
    if (vs_world_joining(w)) goto join;
    VT_OK(vs_parallelize(w, &d, &t));
    if (!t) return 1;
    while (vs_train_steps(t) < STEPS) {
        int k = (int)vs_train_steps(t);
        if (J->grow && shrunk && !grown && k >= J->grow) { // the replica comes back: everyone grows at this step
            if (vs_comm_rank(vs_world_comm(w)) == 0 && !respawned) VT_OK(vs_world_respawn(w, J->victim));
            respawned = 1;
            int joiners = 0, want = J->s.pp * J->s.tp * (J->s.shard ? J->s.shard : 1);
            VT_OK(vs_world_joiners(w, &joiners));
            if (joiners < want) {
                struct timespec ts = {0, 200000};
                nanosleep(&ts, NULL);
                continue;
            }
            vs_mesh* m = NULL;
            VT_OK(vs_world_grow(w, NULL));
            VT_OK(whole_mesh(w, &J->s, &m));
            VT_OK(vs_train_reconfigure(&t, &d, m, ckpt_of(J, buf, sizeof buf), NULL));
            grown = 1;
            __atomic_add_fetch(&J->grows, vs_comm_rank(vs_world_comm(w)) == 0, __ATOMIC_SEQ_CST);
            continue;
        }
        if (me == J->victim && k == J->kill_step) tl_countdown = J->kill_at;
        vs_batch b = tm_batch(k, X, T, ROWS);
        double loss = 0;
        vs_result r = vs_train_step(t, &b, &loss);
        if (me == J->victim && tl_countdown == -1 && k == J->kill_step) {
            vs_train_free(t); // (dead: its peers wait for it)
            return r ? r : VS_ERR_INVALID;
        }
        tl_countdown = -1;
        if (!r) record(J, k, loss);
        if (!r && J->ckpt == 1) {
            snprintf(buf, sizeof buf, "%s/step_%03d", J->dir, k + 1);
            r = vs_train_save(t, buf, NULL, 0, 0);
        }
        if (!r) continue;
        // a rank failed: the survivors shrink by its replica
        VT_CHECK(r == VS_ERR_ABORTED || r == VS_ERR_TIMEOUT, "rank %d: %s", me, vs_last_error());
        vs_mesh* small = NULL;
        r = vs_mesh_shrink(vs_train_mesh(t), dim, &small, NULL);
        VT_CHECK(r == VS_OK, "shrink on rank %d: %s", me, vs_last_error());
        if (r) {
            vs_train_free(t);
            return 0;
        }
        shrunk = 1;
        __atomic_add_fetch(&J->shrinks, small && vs_mesh_rank(small) == 0, __ATOMIC_SEQ_CST);
        if (!small) { // left with the victim's replica
            vs_train_free(t);
            t = NULL;
            if (!J->grow) return 0;
            goto join;
        }
        vs_reconfig_info ci;
        memset(&ci, 0, sizeof ci);
        int mrank = vs_mesh_rank(small);
        r = vs_train_reconfigure(&t, &d, small, ckpt_of(J, buf, sizeof buf), &ci);
        if (J->ckpt == 2) { // nothing holds the lost shards: refused on every survivor, saying so
            VT_CHECK(r == VS_ERR_STATE, "rank %d: %s (%s)", me, vs_result_string(r), vs_last_error());
            int good = strstr(vs_last_error(), "exist nowhere else") && strstr(vs_last_error(), "pass the last checkpoint");
            pthread_mutex_lock(&g_mu);
            J->refused += r == VS_ERR_STATE, J->ok_msgs += good;
            if (!J->msg[0]) snprintf(J->msg, sizeof J->msg, "%s", vs_last_error());
            pthread_mutex_unlock(&g_mu);
            vs_mesh_free(small);
            vs_train_free(t);
            return 0;
        }
        VT_CHECK(r == VS_OK, "reconfigure on rank %d: %s", me, vs_last_error());
        if (r) {
            vs_mesh_free(small);
            vs_train_free(t);
            return 0;
        }
        if (mrank == 0) J->info = ci;
        // one replica left: plain DP over DPS on a (PP, DP, TP) mesh of the same ranks
        if (J->s.shard && vs_mesh_size(small, "DPR") == 1) {
            vs_mesh* tm = vs_train_mesh(t);
            int plain = vs_mesh_ndims(tm) == 3 && vs_mesh_size(tm, "DP") == J->s.shard &&
                        vs_mesh_rank(tm) == mrank;
            __atomic_add_fetch(&J->plain_after, plain, __ATOMIC_SEQ_CST);
        }
        continue;
    join: {
        VT_OK(vs_world_grow(w, NULL));
        vs_mesh* m = NULL;
        VT_OK(whole_mesh(w, &J->s, &m));
        VT_OK(vs_train_reconfigure(&t, &d, m, ckpt_of(J, buf, sizeof buf), NULL));
        if (!t) return 1;
        grown = 1;
        __atomic_add_fetch(&J->grows, vs_comm_rank(vs_world_comm(w)) == 0, __ATOMIC_SEQ_CST);
    }
    }
    keep_params(J, w, t);
    vs_train_free(t);
    return 0;
}

/* A rank of a reference segment: a new job on its mesh, loaded, trained, saved. */
static int segment_fn(vs_world* w, void* arg)
{
    job* J = (job*)arg;
    vs_plan plan;
    vs_train_desc d = desc_of(&J->s, &plan);
    vs_train* t = NULL;
    VT_OK(vs_parallelize(w, &d, &t));
    if (!t) return 1;
    if (J->load) VT_OK(vs_train_load(t, J->load, NULL, 0));
    VT_CHECK(vs_train_steps(t) == J->first, "the segment starts at step %lld, want %d", (long long)vs_train_steps(t),
             J->first);
    float X[ROWS * D], T[ROWS * D];
    for (int k = J->first; k < J->last; k++) {
        vs_batch b = tm_batch(k, X, T, ROWS);
        double loss = 0;
        VT_OK(vs_train_step(t, &b, &loss));
        record(J, k, loss);
    }
    if (J->save) VT_OK(vs_train_save(t, J->save, NULL, 0, 0));
    keep_params(J, w, t);
    vs_train_free(t);
    return 0;
}

static void launch(int n, int (*fn)(vs_world*, void*), job* J)
{
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = n;
    ld.timeout_s = 30;
    vs_result r = vs_launch_ex(&ld, fn, J);
    VT_CHECK(r == VS_OK, "vs_launch: %s (%s)", vs_result_string(r), vs_last_error());
}

static job* mk(shape s)
{
    job* J = (job*)calloc(1, sizeof(job));
    J->s = s;
    J->victim = -1;
    J->params_from = -1;
    return J;
}

/* Reference segment [first, last) on shape s into R's losses (and its final
   parameters: the last segment's). */
static void segment(job* R, shape s, int first, int last, const char* load, const char* save)
{
    job* S = mk(s);
    S->first = first, S->last = last, S->load = load, S->save = save;
    launch(s.pp * s.dp * s.tp, segment_fn, S);
    for (int k = first; k < last; k++) {
        VT_CHECK(S->have[k], "reference segment: step %d has no loss", k);
        R->loss[k] = S->loss[k], R->have[k] = S->have[k];
    }
    R->mismatch += S->mismatch;
    memcpy(R->params, S->params, sizeof R->params);
    R->params_from = S->params_from;
    free(S);
}

/* Every loss and every final parameter bit for bit equal. */
static void compare(const job* J, const job* R, const char* what)
{
    for (int s = 0; s < STEPS; s++) {
        VT_CHECK(J->have[s] && R->have[s], "%s: step %d has no loss (run %d, reference %d)", what, s, J->have[s], R->have[s]);
        VT_CHECK(!memcmp(&J->loss[s], &R->loss[s], sizeof(double)), "%s: step %d loss %.17g, reference %.17g", what, s,
                 J->loss[s], R->loss[s]);
    }
    VT_CHECK(J->mismatch == 0 && R->mismatch == 0, "%s: ranks reported different losses (%d, %d)", what, J->mismatch,
             R->mismatch);
    VT_CHECK(J->params_from >= 0 && R->params_from >= 0, "%s: no final parameters", what);
    for (int i = 0; i < NPARAM; i++)
        for (int e = 0; e < PSIZE[i]; e++)
            if (memcmp(&J->params[i][e], &R->params[i][e], sizeof(float))) {
                VT_CHECK(0, "%s: %s[%d] = %.9g, reference %.9g", what, PNAMES[i], e, J->params[i][e], R->params[i][e]);
                return;
            }
}

static void tmpdir(char* dir, size_t cap)
{
    snprintf(dir, cap, "/tmp/vs_elastic_z3_XXXXXX");
    VT_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
}
static void rmdir_all(const char* dir)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    VT_CHECK(system(cmd) == 0, "rm");
}

/* J against its reference, made without reconfigure: mesh s for steps [0, k)
   and a checkpoint, a new job on `small` loaded from it up to grow (0: to the
   end), then with grow a checkpoint and s again from it. */
static void compare_reference(const job* J, shape s, shape small, int k, int grow, const char* what)
{
    char dir[128], a[200], b[200];
    tmpdir(dir, sizeof dir);
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    job* R = mk(s);
    segment(R, s, 0, k, NULL, a);
    segment(R, small, k, grow ? grow : STEPS, a, grow ? b : NULL);
    if (grow) segment(R, s, grow, STEPS, b, NULL);
    compare(J, R, what);
    rmdir_all(dir);
    free(R);
}

/* HSDP on PP x DPR x DPS x TP: world rank `victim` dies at call `at` of step
   k; the survivors shrink by its DPR replica and go on from memory (lost 0,
   the checkpoint path never read); with grow, the replica comes back at that
   step. The reference: the whole mesh for steps [0, k), a checkpoint, a new
   job on DPR-1 replicas for [k, grow or STEPS) (DPR 1: plain DP over DPS), and
   after a grow a checkpoint and the whole mesh again. */
static void case_hsdp(int pp, int dpr, int dps, int tp, vs_zero_stage z, int victim, int k, int at, int grow)
{
    shape s = {pp, dpr * dps, dps, tp, z};
    shape small = {pp, (dpr - 1) * dps, dpr - 1 > 1 ? dps : 0, tp, z};
    char what[200];
    snprintf(what, sizeof what, "ZeRO-%d PP%d x DPR%d x DPS%d x TP%d, world rank %d dies at step %d call %d%s", (int)z,
             pp, dpr, dps, tp, victim, k, at, grow ? ", its replica comes back" : "");
    job* J = mk(s);
    J->victim = victim, J->kill_step = k, J->kill_at = at, J->grow = grow, J->ckpt = 0;
    launch(pp * dpr * dps * tp, elastic_fn, J);
    int survivors = pp * (dpr - 1) * dps * tp;
    VT_CHECK(J->shrinks == 1 && J->grows == (grow ? 1 : 0), "%s: %d shrinks, %d grows", what, J->shrinks, J->grows);
    VT_CHECK(J->info.lost == 0 && J->info.steps == k && J->info.holders == survivors, "%s: lost %lld (want 0: no "
             "checkpoint read), steps %lld (want %d), holders %d (want %d)", what, (long long)J->info.lost,
             (long long)J->info.steps, k, J->info.holders, survivors);
    if (z == VS_ZERO_0 || z == VS_ZERO_3) // (ZeRO-1/2 gather each parameter from its owners' ranges)
        VT_CHECK(J->info.bytes_moved == 0 && J->info.bytes_local > 0, "%s: %lld bytes moved between ranks, %lld "
                 "copied locally (the shrink keeps each rank's own shards)", what, (long long)J->info.bytes_moved,
                 (long long)J->info.bytes_local);
    if (dpr == 2)
        VT_CHECK(J->plain_after == survivors, "%s: %d of %d survivors on a (PP, DP=%d, TP) mesh after the shrink", what,
                 J->plain_after, survivors, dps);
    compare_reference(J, s, small, k, grow, what);
    free(J);
}

/* Plain ZeRO-3 over DP: world rank `victim` dies; its parameter shards,
   moments (and with bf16 masters) exist nowhere else. ckpt 1: the checkpoint
   saved after each step fills them, and the run equals the whole mesh for
   [0, k) then a new job on DP-1 loaded from that checkpoint; ckpt 2 (NULL):
   every survivor refuses, saying the shard exists nowhere else. */
static void case_zero3(int pp, int dp, int tp, int victim, int k, int at, int ckpt)
{
    shape s = {pp, dp, 0, tp, VS_ZERO_3}, small = {pp, dp - 1, 0, tp, VS_ZERO_3};
    char what[200];
    snprintf(what, sizeof what, "ZeRO-3 PP%d x DP%d x TP%d, world rank %d dies at step %d call %d, %s", pp, dp, tp,
             victim, k, at, ckpt == 1 ? "a checkpoint each step" : "no checkpoint");
    job* J = mk(s);
    J->victim = victim, J->kill_step = k, J->kill_at = at, J->ckpt = ckpt;
    tmpdir(J->dir, sizeof J->dir);
    launch(pp * dp * tp, elastic_fn, J);
    int survivors = pp * (dp - 1) * tp;
    VT_CHECK(J->shrinks == 1, "%s: %d shrinks", what, J->shrinks);
    if (ckpt == 2) {
        VT_CHECK(J->refused == survivors && J->ok_msgs == survivors, "%s: %d of %d survivors refused, %d saying the "
                 "shard exists nowhere else: %s", what, J->refused, survivors, J->ok_msgs, J->msg);
    } else {
        VT_CHECK(J->info.lost > 0 && J->info.steps == k, "%s: lost %lld (want > 0: from the checkpoint), steps %lld",
                 what, (long long)J->info.lost, (long long)J->info.steps);
        compare_reference(J, s, small, k, 0, what);
    }
    rmdir_all(J->dir);
    free(J);
}

/* HSDP ZeRO-3 DPR2 x DPS2 shrunk along DPS instead: the failed rank's DPS
   column leaves, and with it every copy of the shards at that coordinate;
   they come from the checkpoint saved after each step (lost > 0), and the run
   equals the whole mesh for [0, k) then a new DPR2 x DPS1 job loaded from a
   checkpoint of it, bit for bit. */
static void case_hsdp_dps(int victim, int k, int at)
{
    shape s = {1, 4, 2, 1, VS_ZERO_3}, small = {1, 2, 1, 1, VS_ZERO_3};
    char what[200];
    snprintf(what, sizeof what, "ZeRO-3 DPR2 x DPS2 shrunk along DPS, world rank %d dies at step %d call %d", victim, k,
             at);
    job* J = mk(s);
    J->victim = victim, J->kill_step = k, J->kill_at = at, J->ckpt = 1, J->dim = "DPS";
    tmpdir(J->dir, sizeof J->dir);
    launch(4, elastic_fn, J);
    VT_CHECK(J->shrinks == 1 && J->info.lost > 0 && J->info.steps == k, "%s: %d shrinks, lost %lld (want > 0), steps "
             "%lld", what, J->shrinks, (long long)J->info.lost, (long long)J->info.steps);
    compare_reference(J, s, small, k, 0, what);
    rmdir_all(J->dir);
    free(J);
}

/* n random kills (VS_ELASTIC_Z3_KILLS): HSDP DPR2 x DPS2, DPR2 x DPS2 x TP2 and
   PP2 x DPR2 x DPS2 in turn, ZeRO-1 and ZeRO-3, any rank at any layer call of
   steps 1-3, every third replica coming back two steps later; each bit for
   bit its reference. */
static void case_random(int n)
{
    srand(41);
    for (int i = 0; i < n; i++) {
        int m = i % 3, pp = m == 2 ? 2 : 1, tp = m == 1 ? 2 : 1, k = 1 + rand() % 3;
        vs_zero_stage z = rand() % 2 ? VS_ZERO_3 : VS_ZERO_1;
        case_hsdp(pp, 2, 2, tp, z, rand() % (4 * pp * tp), k, rand() % 16, i % 3 == 2 ? k + 2 : 0);
    }
}

static int bad_fn(vs_world* w, void* arg)
{
    (void)arg;
    shape s = {1, 4, 2, 1, VS_ZERO_3};
    vs_plan plan;
    vs_train_desc d = desc_of(&s, &plan);
    vs_train* t = NULL;
    VT_OK(vs_parallelize(w, &d, &t));
    if (!t) return 1;
    vs_train* old = t;
    vs_mesh* m = NULL;
    vs_mesh_desc md = {{1, 2, 2, 1}, 0, {"PP", "DP", "DPS", "TP"}, NULL}; // (DP where DPR belongs)
    VT_OK(vs_mesh_init(w, &md, &m));
    VT_EXPECT_ERR(vs_train_reconfigure(&t, &d, m, NULL, NULL), VS_ERR_INVALID, "(PP, DPR, DPS, TP)", "(PP, DP, TP)");
    VT_OK(vs_mesh_free(m));
    vs_mesh_desc md2 = {{1, 2, 1, 2}, 0, {"PP", "DPR", "DPS", "TP"}, NULL}; // TP 2: the plan's is 1
    VT_OK(vs_mesh_init(w, &md2, &m));
    VT_ERR(vs_train_reconfigure(&t, &d, m, NULL, NULL), VS_ERR_MISMATCH, "only DP changes");
    VT_OK(vs_mesh_free(m));
    VT_CHECK(t == old && vs_train_steps(t) == 0, "the state was replaced by a refusal");
    float X[ROWS * D], T[ROWS * D];
    vs_batch b = tm_batch(0, X, T, ROWS);
    double l = NAN;
    VT_OK(vs_train_step(t, &b, &l));
    VT_CHECK(isfinite(l), "loss %g after the refusals", l);
    vs_train_free(t);
    return 0;
}

int main(void)
{
    build_model();
    tm_fault = fault;
    VT_CASE("bad input: vs_train_reconfigure of an HSDP state onto a mesh of other dims, or another TP",
            VT_OK(vs_launch(4, bad_fn, NULL)));
    for (int z = 0; z <= 3; z++) {
        char name[200];
        snprintf(name, sizeof name, "HSDP ZeRO-%d DPR2 x DPS2: a rank dies, its replica leaves, the other goes on "
                 "from memory as DP2 (lost 0, no checkpoint read), bit for bit a job loaded on DP2", z);
        VT_CASE(name, case_hsdp(1, 2, 2, 1, (vs_zero_stage)z, z % 2 ? 1 : 2, 2, 3 + 4 * z, 0));
    }
    VT_CASE("HSDP ZeRO-3 DPR2 x DPS2 x TP2: a rank dies in the backward, the survivors go on from memory, bit for bit",
            case_hsdp(1, 2, 2, 2, VS_ZERO_3, 5, 3, 11, 0));
    VT_CASE("HSDP ZeRO-2 DPR2 x DPS1: the survivor goes on alone (DP1) from memory, bit for bit",
            case_hsdp(1, 2, 1, 1, VS_ZERO_2, 0, 2, 9, 0));
    VT_CASE("HSDP ZeRO-3 DPR3 x DPS2: the survivors stay HSDP (DPR2 x DPS2) from memory, bit for bit",
            case_hsdp(1, 3, 2, 1, VS_ZERO_3, 3, 2, 6, 0));
    VT_CASE("HSDP ZeRO-3 DPR2 x DPS2: a rank dies, the replica leaves and comes back two steps later (DP2 -> "
            "DPR2 x DPS2), bit for bit", case_hsdp(1, 2, 2, 1, VS_ZERO_3, 0, 1, 9, 3));
    VT_CASE("HSDP ZeRO-1 PP2 x DPR2 x DPS2: a rank dies, the replica leaves and comes back, bit for bit",
            case_hsdp(2, 2, 2, 1, VS_ZERO_1, 6, 2, 4, 4));
    VT_CASE("HSDP ZeRO-3 DPR2 x DPS2 shrunk along DPS: the shards of the lost coordinate come from the checkpoint, "
            "bit for bit a job loaded on DPR2 x DPS1", case_hsdp_dps(1, 2, 6));
    const char* nk = getenv("VS_ELASTIC_Z3_KILLS");
    int kills = nk ? atoi(nk) : 12;
    VT_CASE("HSDP random kills (VS_ELASTIC_Z3_KILLS) on DPR2 x DPS2, x TP2 and PP2 x, ZeRO-1 and ZeRO-3, some grown "
            "back: each bit for bit its reference", case_random(kills));
    VT_CASE("ZeRO-3 DP4: the lost shards come from the checkpoint, bit for bit a job loaded on DP3",
            case_zero3(1, 4, 1, 2, 3, 5, 1));
    VT_CASE("ZeRO-3 DP2 -> DP1: the one survivor keeps its shards, the rest from the checkpoint, bit for bit a job "
            "loaded on one rank", case_zero3(1, 2, 1, 1, 2, 5, 1));
    VT_CASE("ZeRO-3 DP4 without a checkpoint: every survivor refuses, the lost shard exists nowhere else",
            case_zero3(1, 4, 1, 1, 2, 7, 2));
    return vt_summary();
}
