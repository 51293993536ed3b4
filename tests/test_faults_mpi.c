/* test_faults_mpi.c - faults between MPI processes (issue 8: points 2, 3, 5).
   One fault per mpirun, so tests/faults_mpi.sh launches each case:
       test_faults_mpi mismatch   rank 2 (and, on a split communicator, world rank 3)
                                  calls all_reduce with another count; VESCALE_DEBUG=desync
       test_faults_mpi abort      world rank 1 calls vs_comm_abort while the others wait
                                  in all-reduces (world rank 0 on the world communicator,
                                  ranks 2 and 3 on split ones)
       test_faults_mpi sigstop    world rank 3 stops itself (SIGSTOP) before an all-reduce;
                                  the survivors time out, rank 0 ends the job (vs_world_abort)
       test_faults_mpi kill       world rank 3 kills itself (SIGKILL) before an all-reduce
                                  (mpirun --enable-recovery: the survivors time out)
       test_faults_mpi init       bad VESCALE_DEBUG, explicit/torchrun ranks that are not
                                  MPI's, a split one rank never joins (timeout), and
                                  vs_world_init after MPI_Finalize
       test_faults_mpi layer      (8 processes) the example GPT on PP2 x DP2 x TP2: the
                                  forward of h.1.attn fails on world rank 5; every
                                  survivor names world rank 5, its stage and instruction
                                  and the callback's message (issue 19.2)
       test_faults_mpi pair       world rank 3 never joins an all-reduce of its pair
                                  {2,3}: rank 2's timeout names it (the only one who can
                                  be missing), and ranks 0, 1 and 3 name rank 2's timeout
       test_faults_mpi loop       (tests/hosts.sh) all-reduces, each sum checked, until a
                                  fault from outside (a partition, a stopped process, a
                                  slow link); each rank prints when (CLOCK_REALTIME: the
                                  script compares it with the fault's time) and its error
   The fault happens at a time rank 0 plans and broadcasts (CLOCK_MONOTONIC: the
   ranks share one host). Every rank prints one line per check,
       ok|not ok faults_mpi/<case> rank R: <result> <s> s after the fault: <message>
   with the time from the fault to its error. Without a case (as tests/run.sh would
   run it) or without VESCALE_MPI it prints a skip line. */
#define VESCALE_IMPLEMENTATION
#include "../vescale.h"
#include "../examples/gpt.h"
#include "vs_test.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef VESCALE_MPI
int main(void)
{
    vt_skip("faults_mpi", "built without VESCALE_MPI");
    return vt_summary();
}
#else

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_until(double t)
{
    for (double d; (d = t - now_s()) > 0;) {
        struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

static int g_rank;
static const char* g_case;

/* One line per rank and check; fails the check unless cond. */
static int report(int cond, vs_result r, double dt, const char* what, const char* msg)
{
    printf("%s faults_mpi/%s%s%s rank %d: %s %.4f s %s: %s\n", cond ? "ok" : "not ok", g_case, what[0] ? "/" : "",
           what, g_rank, vs_result_string(r), dt, strncmp(what, "world_free", 10) ? "after the fault" : "in vs_world_free",
           msg);
    fflush(stdout);
    return cond;
}

/* Every rank of `live` (a bit a world rank) has printed its reports before any
   of them goes on to end the job: each tells the others so over MPI_COMM_WORLD
   (raw MPI: vescale's communicators are the ones the fault failed) and waits
   for theirs until `deadline`, no earlier than the end of the window in which
   a report counts as in time. A fixed sleep instead cut reports off: the
   survivors of sigstop report at timeout + the probe (0.5 s), the moment rank 0
   slept until before vs_world_abort, and under load mpirun killed one first
   (faults_mpi/sigstop/every_rank_reported, 1 run in 20 with a build beside it).
   Returns how many of the others said so (a missing one: the script counts it). */
static int all_reported(unsigned live, double deadline)
{
    enum { TAG = 0x7e57 };
    int n = 0, me = g_rank, got = 0, flag = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Request req[64];
    int tok[32], mine = me, nr = 0, nrecv = 0;
    for (int q = 0; q < n && q < 32; q++) {
        if (q == me || !(live >> q & 1u)) continue;
        MPI_Irecv(&tok[q], 1, MPI_INT, q, TAG, MPI_COMM_WORLD, &req[nr++]);
        nrecv++;
    }
    for (int q = 0; q < n && q < 32; q++)
        if (q != me && (live >> q & 1u)) MPI_Isend(&mine, 1, MPI_INT, q, TAG, MPI_COMM_WORLD, &req[nr++]);
    while (!flag && now_s() < deadline) {
        MPI_Testall(nrecv, req, &flag, MPI_STATUSES_IGNORE);
        if (!flag) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    for (int i = 0; i < nrecv; i++) got += req[i] == MPI_REQUEST_NULL;
    return got; // (requests left in flight: the job ends next)
}

/* Rank 0 plans the fault `lead` seconds ahead; every rank learns when. */
static double plan(vs_comm* c, double lead)
{
    double t = now_s() + lead;
    if (vs_broadcast(c, &t, &t, 1, VS_F64, 0, NULL)) return -1;
    return t;
}

/* A warm-up all-reduce with its sum checked: the job works before the fault. */
static int warm_up(vs_comm* c)
{
    float x[4];
    int n = vs_comm_size(c), me = vs_comm_rank(c);
    for (int i = 0; i < 4; i++) x[i] = (float)(me + i);
    vs_result r = vs_all_reduce(c, x, x, 4, VS_F32, VS_OP_SUM, NULL);
    int ok = r == VS_OK;
    for (int i = 0; i < 4 && ok; i++) ok = x[i] == (float)(n * (n - 1) / 2 + n * i);
    if (!ok) report(0, r, 0, "warm_up", vs_last_error());
    return ok;
}

/* (a) count mismatch: every rank gets VS_ERR_MISMATCH naming the odd rank, the
   same message everywhere; the communicator stays usable. Then the same on a split
   communicator, where the message names group and world ranks. */
static int case_mismatch(vs_world* w)
{
    vs_comm* c = vs_world_comm(w);
    int me = vs_world_rank(w), n = vs_world_size(w), fails = 0;
    if (!warm_up(c)) return 1;
    double t = plan(c, 0.2);
    sleep_until(t);
    float x[5] = {1, 1, 1, 1, 1};
    vs_result r = vs_all_reduce(c, x, x, me == 2 ? 5 : 4, VS_F32, VS_OP_SUM, NULL);
    double dt = now_s() - t;
    char msg[512];
    snprintf(msg, sizeof msg, "%.500s", vs_last_error());
    fails += !report(r == VS_ERR_MISMATCH && strstr(msg, "rank 2 (world 2) called all_reduce #3 (count 5") &&
                         strstr(msg, "count 4") && dt < 1.0,
                     r, dt, "", msg);
    // every rank reached the same verdict: compare the messages
    char* all = (char*)calloc((size_t)n, sizeof msg);
    vs_result r2 = all ? vs_all_gather(c, msg, all, sizeof msg, VS_U8, NULL) : VS_ERR_NOMEM;
    // (each message starts with the rank's own call; the verdict after it is the same)
    const char* verdict = strstr(msg, "ranks disagree");
    int same = r2 == VS_OK && verdict;
    for (int q = 0; q < n && same; q++) {
        const char* v = strstr(all + (size_t)q * sizeof msg, "ranks disagree");
        same = v && !strcmp(v, verdict);
    }
    free(all);
    fails += !report(same && warm_up(c), r2, 0, "same_message_then_usable", same ? "every rank has this verdict" : "the verdicts differ");

    // on a split communicator: odd world ranks {1, 3}; world rank 3 (group rank 1) is off
    vs_comm* odd = NULL;
    r = vs_comm_split(c, me % 2, me, &odd);
    if (r || !odd) return fails + !report(0, r, 0, "split", vs_last_error());
    if (!warm_up(odd)) return fails + 1;
    t = plan(c, 0.2);
    sleep_until(t);
    r = vs_all_reduce(odd, x, x, me == 3 ? 5 : 4, VS_F32, VS_OP_SUM, NULL);
    dt = now_s() - t;
    if (me % 2) {
        const char* m = vs_last_error();
        fails += !report(r == VS_ERR_MISMATCH && strstr(m, "rank 1 (world 3) called all_reduce #2 (count 5") &&
                             strstr(m, "rank 0 (world 1) called all_reduce #2 (count 4") && dt < 1.0,
                         r, dt, "split_names_world_ranks", m);
    } else {
        fails += !report(r == VS_OK, r, dt, "split_names_world_ranks", r ? vs_last_error() : "(even ranks agree)");
    }
    vs_comm_free(odd);
    return fails;
}

/* vs_world_free after an abort or a dead rank waits at most 2 s for the others
   (min(timeout, 2 s)) and returns. The bound tells that from a wait that does
   not end (the launcher's limit is minutes), with room for a loaded machine:
   2.9 s was seen at load 50 with 2.5 s allowed. */
#define FREE_BOUND_S (2.0 + 2.0)

/* (b) vs_comm_abort on world rank 1 wakes every other rank promptly, blocked on
   the world communicator or on a split one, with VS_ERR_ABORTED naming rank 1. */
static int case_abort(vs_world* w)
{
    vs_comm* c = vs_world_comm(w);
    int me = vs_world_rank(w), fails = 0;
    if (!warm_up(c)) return 1;
    vs_comm* half = NULL; // {0, 2} and {1, 3}
    vs_result r = vs_comm_split(c, me % 2, me, &half);
    if (r || !half) return !report(0, r, 0, "split", vs_last_error());
    double t = plan(c, 0.3);
    float x[4] = {0};
    if (me == 1) {
        sleep_until(t);
        r = vs_comm_abort(c);
        double dt = now_s() - t;
        fails += !report(r == VS_OK, r, dt, "aborter", r ? vs_last_error() : "called vs_comm_abort");
        r = vs_all_reduce(half, x, x, 4, VS_F32, VS_OP_SUM, NULL);
        fails += !report(r == VS_ERR_ABORTED, r, now_s() - t, "aborter_later_call", vs_last_error());
    } else {
        // rank 0 waits for 1, 2, 3 on the world; 2 waits for 0 on {0,2}; 3 for 1 on {1,3}
        r = vs_all_reduce(me == 0 ? c : half, x, x, 4, VS_F32, VS_OP_SUM, NULL);
        double dt = now_s() - t;
        const char* m = vs_last_error();
        fails += !report(r == VS_ERR_ABORTED && strstr(m, "world rank 1 called vs_comm_abort") && dt < 1.0, r, dt, "", m);
    }
    // surviving a rank needs ULFM, which this MPI lacks: the survivors are told so, at once
    vs_reform_info ri;
    r = vs_world_shrink(w, &ri);
    fails += !report(r == VS_ERR_UNSUPPORTED && strstr(vs_last_error(), "ULFM"), r, 0, "shrink_unsupported",
                     vs_last_error());
    // half's requests are in flight on ranks 0, 2, 3: free the world, not half
    double t0 = now_s();
    r = vs_world_free(w);
    double dt = now_s() - t0;
    // the aborter waits up to 2 s for the others in vs_world_free, who cannot finalize
    fails += !report((r == VS_OK || r == VS_ERR_ABORTED) && dt < FREE_BOUND_S, r, dt, "world_free_returns",
                     r ? vs_last_error() : "finalized");
    all_reported(0xfu, t + 4.0); // so the aborter reports before the launcher ends the job
    return fails;
}

/* A survivor's error comes at its timeout plus the probe of the missing rank
   (0.5 s): it counts as in time up to LATE_S after the timeout (1 s left 0.49 s
   to a loaded machine's scheduling; a wait that never ends is what it tells
   apart, and the launcher's limit is minutes). */
#define LATE_S 2.0

/* (c) world rank 3 stops; the others time out within timeout + LATE_S, naming it. */
static int case_sigstop(vs_world* w)
{
    vs_comm* c = vs_world_comm(w);
    int me = vs_world_rank(w), fails = 0;
    double tmo = vs_world_timeout(w);
    if (!warm_up(c)) return 1;
    double t = plan(c, 0.2);
    sleep_until(t);
    if (me == 3) {
        printf("# faults_mpi/sigstop: world rank 3 (pid %ld) stops itself\n", (long)getpid());
        fflush(stdout);
        raise(SIGSTOP);
        // continued by the script (it kills us first, normally)
        printf("# faults_mpi/sigstop: world rank 3 continued\n");
        fflush(stdout);
        return 0;
    }
    float x[4] = {0};
    vs_result r = vs_all_reduce(c, x, x, 4, VS_F32, VS_OP_SUM, NULL);
    double dt = now_s() - t;
    const char* m = vs_last_error();
    // its own timeout names rank 3; an earlier peer's timeout notice names it too
    int named = strstr(m, "3 (world 3)") || strstr(m, "missing world rank 3");
    fails += !report((r == VS_ERR_TIMEOUT || r == VS_ERR_ABORTED) && named && dt > tmo - 0.05 && dt < tmo + LATE_S, r, dt,
                     "", m);
    // each survivor reports within timeout + LATE_S (the check above): rank 0
    // ends the job once all have, or at the end of that window
    all_reported(0x7u, t + tmo + LATE_S + 0.5);
    if (me == 0) {
        vs_world_abort(w, VS_ERR_TIMEOUT); // ends the job, the stopped rank too: does not return
        report(0, r, now_s() - t, "world_abort", "vs_world_abort returned");
        return 1;
    }
    sleep_until(t + tmo + 30); // until vs_world_abort ends the job
    return fails;
}

/* (d) world rank 3 dies (SIGKILL). Under mpirun --enable-recovery the job goes on:
   the survivors time out naming it, vs_world_free returns, and they exit (there
   MPI_Abort ends the caller only). Without it, mpirun ends the job at once. */
static int case_kill(vs_world* w)
{
    vs_comm* c = vs_world_comm(w);
    int me = vs_world_rank(w), fails = 0;
    double tmo = vs_world_timeout(w);
    if (!warm_up(c)) return 1;
    double t = plan(c, 0.2);
    sleep_until(t);
    if (me == 3) {
        printf("# faults_mpi/kill: world rank 3 (pid %ld) kills itself\n", (long)getpid());
        fflush(stdout);
        raise(SIGKILL);
    }
    float x[4] = {0};
    vs_result r = vs_all_reduce(c, x, x, 4, VS_F32, VS_OP_SUM, NULL);
    double dt = now_s() - t;
    const char* m = vs_last_error();
    int named = strstr(m, "3 (world 3)") || strstr(m, "missing world rank 3");
    fails += !report((r == VS_ERR_TIMEOUT || r == VS_ERR_ABORTED) && named && dt < tmo + LATE_S, r, dt, "", m);
    double t0 = now_s();
    r = vs_world_free(w);
    dt = now_s() - t0;
    fails += !report(r == VS_ERR_ABORTED && dt < FREE_BOUND_S, r, dt, "world_free_returns", vs_last_error());
    return fails;
}

/* (e) world setup: bad VESCALE_DEBUG, an explicit or torchrun rank that is not
   MPI's, vs_comm_split when one rank never arrives (MPI_Comm_split alone blocks
   forever), and vs_world_init after MPI_Finalize. The test starts MPI itself, so
   failed inits leave it running. */
static int case_init(void)
{
    int provided = 0, me = 0, n = 0, fails = 0;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    g_rank = me;
    vs_world* w = NULL;
    vs_world_desc wd;
    memset(&wd, 0, sizeof wd);
    wd.transport = VS_TRANSPORT_MPI;
    char want[128];

    setenv("VESCALE_DEBUG", "desync, bogus", 1);
    vs_result r = vs_world_init(&wd, &w);
    unsetenv("VESCALE_DEBUG");
    fails += !report(r == VS_ERR_INVALID && strstr(vs_last_error(), "VESCALE_DEBUG") && strstr(vs_last_error(), "'bogus'"),
                     r, 0, "debug_env_unknown", vs_last_error());
    if (!r) vs_world_free(w);

    wd.world_size = n;
    wd.rank = (me + 1) % n;
    r = vs_world_init(&wd, &w);
    snprintf(want, sizeof want, "desc.rank %d, desc.world_size %d disagree with MPI's rank %d of %d", (me + 1) % n, n, me, n);
    fails += !report(r == VS_ERR_MISMATCH && strstr(vs_last_error(), want), r, 0, "explicit_rank_not_mpis", vs_last_error());
    if (!r) vs_world_free(w);
    wd.rank = me;
    r = vs_world_init(&wd, &w);
    fails += !report(r == VS_OK, r, 0, "explicit_rank_mpis", r ? vs_last_error() : "accepted");
    if (!r) vs_world_free(w);

    wd.world_size = 0;
    wd.rank = 0;
    char rk[16], ws[16];
    snprintf(rk, sizeof rk, "%d", (me + 1) % n);
    snprintf(ws, sizeof ws, "%d", n);
    setenv("RANK", rk, 1);
    setenv("WORLD_SIZE", ws, 1);
    r = vs_world_init(&wd, &w);
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    snprintf(want, sizeof want, "RANK=%d, WORLD_SIZE=%d (torchrun) disagree with MPI's rank %d of %d", (me + 1) % n, n, me, n);
    fails += !report(r == VS_ERR_MISMATCH && strstr(vs_last_error(), want), r, 0, "torchrun_rank_not_mpis", vs_last_error());
    if (!r) vs_world_free(w);

    // vs_comm_split honours the timeout: world rank 3 never calls it
    wd.timeout_s = 1.0;
    r = vs_world_init(&wd, &w);
    if (r) return fails + !report(0, r, 0, "init", vs_last_error());
    vs_comm* c = vs_world_comm(w);
    double t = plan(c, 0.2);
    sleep_until(t);
    if (me != 3) {
        vs_comm* sc = NULL;
        r = vs_comm_split(c, me % 2, me, &sc);
        double dt = now_s() - t;
        const char* m = vs_last_error();
        int timed = (r == VS_ERR_TIMEOUT && strstr(m, "split #2") && strstr(m, "within 1 s")) ||
                    (r == VS_ERR_ABORTED && strstr(m, "timed out in split #2"));
        fails += !report(timed && !sc && dt > 0.95 && dt < 2.0, r, dt, "", m);
    } else {
        // arrive after the others gave up: complete their barrier so MPI can finalize
        sleep_until(t + 1.5);
        MPI_Request rq;
        MPI_Ibarrier(vs_world_comm(w)->mc, &rq);
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    r = vs_world_free(w);
    fails += !report(r == VS_OK, r, 0, "world_free_after_late_rank", r ? vs_last_error() : "every request completed");
    MPI_Finalize();
    r = vs_world_init(&wd, &w);
    fails += !report(r == VS_ERR_STATE && strstr(vs_last_error(), "finalized"), r, 0, "init_after_finalize", vs_last_error());
    if (!r) vs_world_free(w);
    return fails;
}

/* (f) the example GPT on PP2 x DP2 x TP2, 8 processes: h.1.attn's forward fails on
   world rank 5 at microbatch 1 of step 1. Rank 5 gets its own error; every other
   rank VS_ERR_ABORTED naming world rank 5, stage 1, the instruction and the
   callback's message, from the abort notice. */
static gpt_config GCFG = {32, 8, 32, 4, 2, 5};
static gpt_model_storage GSTORE;
static vs_model_desc GMODEL;
static vs_pipe_fn g_attn_fwd;
static int g_step = -1;

static vs_result poisoned_attn_fwd(vs_pipe_call* c)
{
    const gpt_unit* u = (const gpt_unit*)vs_layer(c)->user;
    if (g_rank == 5 && u->block == 1 && g_step == 1 && c->mb == 1)
        return vs_set_error(VS_ERR_INVALID, "h.1.attn forward: poisoned weights (microbatch %d)", c->mb);
    return g_attn_fwd(c);
}

#define CALLBACK_MSG "(F1.1): unit \"h.1.attn\" forward, microbatch 1: h.1.attn forward: poisoned weights (microbatch 1)"

static int case_layer(vs_world* w)
{
    int fails = 0;
    if (gpt_model(&GCFG, &GSTORE, &GMODEL)) return !report(0, VS_ERR_INVALID, 0, "model", vs_last_error());
    for (int l = 0; l < GMODEL.nlayers; l++)
        if (GSTORE.units[l].kind == GPT_ATTN) {
            g_attn_fwd = GSTORE.layers[l].unit.forward;
            GSTORE.layers[l].unit.forward = poisoned_attn_fwd;
        }
    vs_plan pl;
    memset(&pl, 0, sizeof pl);
    pl.pp = 2, pl.dp = 2, pl.tp = 2;
    pl.microbatches = 2;
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &GMODEL;
    d.plan = &pl;
    d.optim.kind = VS_OPTIM_ADAMW;
    d.lr.lr = 1e-3;
    vs_train* t = NULL;
    vs_result r = vs_parallelize(w, &d, &t);
    if (r) return !report(0, r, 0, "parallelize", vs_last_error());
    enum { ROWS = 8 };
    int32_t tok[ROWS * 8], tgt[ROWS * 8];
    vs_batch b = gpt_batch_view(ROWS, GCFG.seq, tok, tgt);
    double t0 = 0, tmo = vs_world_timeout(w);
    for (int s = 0; s < 3 && !r; s++) {
        if (s == 1) { // the step of the fault starts on every rank at once
            t0 = plan(vs_world_comm(w), 0.2);
            sleep_until(t0);
        }
        g_step = s;
        gpt_batch(&GCFG, s, ROWS, tok, tgt);
        double l = 0;
        r = vs_train_step(t, &b, &l);
    }
    double dt = now_s() - t0;
    const char* m = vs_last_error();
    if (g_rank == 5)
        fails += !report(r == VS_ERR_INVALID && strstr(m, CALLBACK_MSG) && !strstr(m, "abort"), r, dt, "", m);
    else
        fails += !report(r == VS_ERR_ABORTED &&
                             strstr(m, "world rank 5 failed (VS_ERR_INVALID): vs_pipe_run: stage 1 at instruction ") &&
                             strstr(m, CALLBACK_MSG) && dt < tmo / 2,
                         r, dt, "", m);
    vs_train_free(t);
    all_reported(0xffu, t0 + tmo / 2 + 0.5); // every rank reports before the first to exit makes the launcher end the job
    vs_world_free(w);      // (after the abort: VS_ERR_ABORTED, MPI left to the end of the process)
    return fails;
}

/* (g) a pair's collective: world rank 3 never joins the all-reduce of {2,3};
   rank 2 times out after 1 s naming rank 3, the only one who can be missing
   (without VESCALE_DEBUG=desync). Ranks 0 and 1 (waiting on the world, 10 s)
   and 3 (later) get VS_ERR_ABORTED naming rank 2's timeout and rank 3. */
static int case_pair(vs_world* w)
{
    vs_comm* c = vs_world_comm(w);
    int me = vs_world_rank(w), fails = 0;
    if (!warm_up(c)) return 1;
    vs_comm* pair = NULL;
    vs_result r = vs_comm_split(c, me / 2, me, &pair);
    if (r || !pair) return !report(0, r, 0, "split", vs_last_error());
    vs_comm_set_timeout(pair, 1.0);
    vs_comm_set_timeout(c, 10.0);
    double t = plan(c, 0.2);
    sleep_until(t);
    float x[4] = {0};
    const char* origin = "world rank 2 timed out in all_reduce #";
    if (me == 2) {
        r = vs_all_reduce(pair, x, x, 4, VS_F32, VS_OP_SUM, NULL);
        double dt = now_s() - t;
        const char* m = vs_last_error();
        fails += !report(r == VS_ERR_TIMEOUT && strstr(m, "rank 1 (world 3), the other rank of this pair, did not arrive within 1 s") &&
                             dt > 0.95 && dt < 1.0 + LATE_S,
                         r, dt, "", m);
    } else if (me == 3) {
        sleep_until(t + 1.5);
        r = vs_barrier(c, NULL);
        const char* m = vs_last_error();
        fails += !report(r == VS_ERR_ABORTED && strstr(m, origin) && strstr(m, "missing world rank 3") &&
                             strstr(m, "the other rank of this pair"),
                         r, now_s() - t, "", m);
    } else {
        r = vs_all_reduce(c, x, x, 4, VS_F32, VS_OP_SUM, NULL);
        double dt = now_s() - t;
        const char* m = vs_last_error();
        fails += !report(r == VS_ERR_ABORTED && strstr(m, origin) && strstr(m, "missing world rank 3") &&
                             strstr(m, "the other rank of this pair") && dt < 1.0 + LATE_S,
                         r, dt, "", m);
    }
    all_reported(0xfu, t + 5.0); // rank 3 reports before the first to exit makes the launcher end the job
    vs_world_free(w);     // (requests in flight: VS_ERR_ABORTED, MPI left to the end of the process)
    return fails;
}

/* (h) all-reduces of VS_LOOP_COUNT floats (default 1024), each sum checked, until
   an error or VS_LOOP_SECONDS (default 60): tests/hosts.sh brings the fault from
   outside and checks every rank's "ended" line (its time: CLOCK_REALTIME, which
   the hosts of that script share). */
static int case_loop(vs_world* w)
{
    vs_comm* c = vs_world_comm(w);
    int me = vs_world_rank(w), n = vs_world_size(w);
    const char* e = getenv("VS_LOOP_COUNT");
    size_t count = e ? (size_t)strtoul(e, NULL, 10) : 1024;
    e = getenv("VS_LOOP_SECONDS");
    double limit = e ? atof(e) : 60, t0 = now_s();
    float* x = (float*)malloc((count ? count : 1) * sizeof(float));
    char host[64] = "?";
    gethostname(host, sizeof host);
    printf("# loop rank %d pid %ld on %s\n", me, (long)getpid(), host);
    fflush(stdout);
    vs_result r = VS_OK;
    long step = 0;
    int bad = !x;
    for (; x && !bad && now_s() - t0 < limit; step++) {
        for (size_t i = 0; i < count; i++) x[i] = (float)(me + (int)(i % 5));
        if ((r = vs_all_reduce(c, x, x, count, VS_F32, VS_OP_SUM, NULL)) != VS_OK) break;
        for (size_t i = 0; i < count && !bad; i++)
            bad = x[i] != (float)(n * (n - 1) / 2 + n * (int)(i % 5));
        if (step == 20) {
            printf("# loop rank %d runs\n", me);
            fflush(stdout);
        }
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (bad)
        printf("not ok faults_mpi/loop rank %d: the sum of step %ld differs from n(n-1)/2 + n(i mod 5)\n", me, step);
    else
        printf("# loop rank %d ended at %.3f (step %ld) %s: %s\n", me, (double)ts.tv_sec + ts.tv_nsec * 1e-9, step,
               vs_result_string(r), r ? vs_last_error() : "no fault came");
    fflush(stdout);
    free(x);
    vs_world_free(w); // (bounded: MPI left unfinalized after the fault)
    return bad;
}

int main(int argc, char** argv)
{
    g_case = argc > 1 ? argv[1] : "";
    if (!*g_case) {
        vt_skip("faults_mpi", "one fault per mpirun: run it through tests/faults_mpi.sh");
        return vt_summary();
    }
    if (!strcmp(g_case, "init")) return case_init() ? 1 : 0;
    vs_world* w = NULL;
    vs_world_desc wd;
    memset(&wd, 0, sizeof wd);
    wd.transport = VS_TRANSPORT_MPI;
    if (vs_world_init(&wd, &w)) {
        printf("not ok faults_mpi/%s/init: %s\n", g_case, vs_last_error());
        return 1;
    }
    g_rank = vs_world_rank(w);
    int need = !strcmp(g_case, "layer") ? 8 : !strcmp(g_case, "loop") ? vs_world_size(w) : 4;
    if (vs_world_size(w) != need) {
        printf("not ok faults_mpi/%s: needs %d processes, got %d\n", g_case, need, vs_world_size(w));
        vs_world_free(w);
        return 1;
    }
    int fails;
    if (!strcmp(g_case, "mismatch")) {
        fails = case_mismatch(w);
        vs_result r = vs_world_free(w);
        fails += !report(r == VS_OK, r, 0, "world_free", r ? vs_last_error() : "finalized");
    } else if (!strcmp(g_case, "abort")) {
        fails = case_abort(w);
    } else if (!strcmp(g_case, "sigstop")) {
        fails = case_sigstop(w);
    } else if (!strcmp(g_case, "kill")) {
        fails = case_kill(w);
    } else if (!strcmp(g_case, "layer")) {
        fails = case_layer(w);
    } else if (!strcmp(g_case, "pair")) {
        fails = case_pair(w);
    } else if (!strcmp(g_case, "loop")) {
        return case_loop(w) ? 1 : 0;
    } else {
        printf("not ok faults_mpi/%s: unknown case (mismatch, abort, sigstop, kill, init, layer, pair, loop)\n", g_case);
        return 1;
    }
    return fails ? 1 : 0;
}
#endif
