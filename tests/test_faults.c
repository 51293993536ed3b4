/* test_faults.c - the threads transport's fail-fast contract (issue 8): a fault on
   any rank ends the job promptly on every rank with an error naming the cause.
   Four thread ranks with a 60 s timeout, so "prompt" is measured, not waited out:
   a rank returns early, a rank returns an error, a rank aborts one communicator of
   a mesh, a rank skips one collective. Each case prints the time from the fault to
   the error on every rank. Also: timeout messages name the missing ranks and the
   communicator, infinite and huge timeouts, strict environment values.
   The root cause (issue 19.2): a layer callback of the example GPT fails on one
   of 8 ranks (PP2 x DP2 x TP2): vs_launch returns the callback's own result and
   message, every other rank's error names that world rank, its stage and
   instruction and the message, the error log has that one line; two ranks that
   fail at once give one of the two causes, never VS_ERR_ABORTED; errors of the
   pipeline's receive pre-posting name the stage and the instruction; a tensor
   that breaks its spec prints its actual shape beside the spec. */
#define VESCALE_IMPLEMENTATION
#include "../vescale.h"
#include "../examples/gpt.h"
#include "vs_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 4
#define LONG_TIMEOUT 60.0
#define PROMPT_S 1.0 /* generous against a loaded 2-core VM; typical figures are printed */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    nanosleep(&ts, NULL);
}

typedef struct {
    double fault_at;      /* when the faulty rank acted (monotonic) */
    double err_at[N];     /* when each rank got its error */
    vs_result res[N];
    char msg[N][600];
    int faulty;
} fault_run;

static void record(fault_run* f, int me, vs_result r)
{
    f->res[me] = r;
    f->err_at[me] = now_s();
    snprintf(f->msg[me], sizeof f->msg[me], "%s", vs_last_error());
}

/* Written by the faulty rank before its fault; read after vs_launch joined every rank. */
static void mark_fault(fault_run* f) { f->fault_at = now_s(); }

/* Prints fault -> error per rank; checks every healthy rank failed promptly with
   `code` and a message holding `needle`. */
static void check_run(const char* name, fault_run* f, vs_result code, const char* needle)
{
    printf("    %s: fault -> error:", name);
    for (int r = 0; r < N; r++) {
        if (r == f->faulty) {
            printf(" [rank %d faulty]", r);
            continue;
        }
        double ms = (f->err_at[r] - f->fault_at) * 1e3;
        printf(" rank %d %.1f ms", r, ms);
        VT_CHECK(f->res[r] == code, "%s: rank %d got %s (%s), want %s", name, r, vs_result_string(f->res[r]),
                 f->msg[r], vs_result_string(code));
        VT_CHECK(strstr(f->msg[r], needle) != NULL, "%s: rank %d message '%s' lacks '%s'", name, r, f->msg[r],
                 needle);
        VT_CHECK(f->err_at[r] > 0 && ms < PROMPT_S * 1e3, "%s: rank %d took %.1f ms after the fault", name, r, ms);
    }
    printf("\n");
}

static vs_result launch(int n, vs_rank_fn fn, void* arg, double timeout)
{
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = n;
    d.timeout_s = timeout;
    return vs_launch_ex(&d, fn, arg);
}

/* ---- a rank returns (VS_OK) while the others wait on it ---- */
static int early_return_rank(vs_world* w, void* arg)
{
    fault_run* f = (fault_run*)arg;
    int me = vs_world_rank(w);
    float x[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    VT_OK(vs_all_reduce(vs_world_comm(w), x, x, 8, VS_F32, VS_OP_SUM, NULL));
    if (me == f->faulty) {
        sleep_s(0.05);
        mark_fault(f);
        return 0;
    }
    record(f, me, vs_all_reduce(vs_world_comm(w), x, x, 8, VS_F32, VS_OP_SUM, NULL));
    return f->res[me];
}

static void t_early_return(void)
{
    fault_run f;
    memset(&f, 0, sizeof f);
    f.faulty = 2;
    vs_result r = launch(N, early_return_rank, &f, LONG_TIMEOUT);
    check_run("early_return", &f, VS_ERR_ABORTED, "rank 2 (world 2) returned from its function");
    VT_CHECK(r == VS_ERR_ABORTED && strstr(vs_last_error(), "rank 2 (world 2) returned"),
             "vs_launch gave %s: %s", vs_result_string(r), vs_last_error());
    VT_CHECK(strstr(f.msg[0], "all_reduce #2") != NULL, "message names the operation: %s", f.msg[0]);
}

/* ---- a rank returns an error: vs_launch reports that rank's own result ---- */
static int error_rank(vs_world* w, void* arg)
{
    fault_run* f = (fault_run*)arg;
    int me = vs_world_rank(w);
    if (me == f->faulty) {
        sleep_s(0.05);
        mark_fault(f);
        return vs_set_error(VS_ERR_IO, "checkpoint shard 7: disk full");
    }
    // blocked in a p2p receive from a healthy peer, and in a collective
    float x[4] = {0};
    vs_comm* c = vs_world_comm(w);
    if (me == 0)
        record(f, me, vs_recv(c, x, 4, VS_F32, 3, NULL));
    else
        record(f, me, vs_barrier(c, NULL));
    return f->res[me];
}

static void t_error_return(void)
{
    fault_run f;
    memset(&f, 0, sizeof f);
    f.faulty = 1;
    vs_result r = launch(N, error_rank, &f, LONG_TIMEOUT);
    check_run("error_return", &f, VS_ERR_ABORTED, "job aborted: world rank 1 failed (VS_ERR_IO): checkpoint shard 7: disk full");
    VT_CHECK(r == VS_ERR_IO, "vs_launch gave %s, want the failing rank's VS_ERR_IO", vs_result_string(r));
    VT_CHECK(strstr(vs_last_error(), "rank 1") && strstr(vs_last_error(), "disk full"),
             "vs_launch message '%s' names rank 1 and its message", vs_last_error());
}

/* ---- a rank aborts one submesh's communicator: the whole job ends ---- */
static int abort_rank(vs_world* w, void* arg)
{
    fault_run* f = (fault_run*)arg;
    int me = vs_world_rank(w);
    vs_mesh* mesh = NULL;
    vs_mesh *dp = NULL, *tp = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {2, 2}}, &mesh)); // DP x TP
    VT_OK(vs_mesh_submesh(mesh, "DP", &dp));
    VT_OK(vs_mesh_submesh(mesh, "TP", &tp));
    float x[4] = {0};
    if (me == f->faulty) {
        sleep_s(0.05);
        mark_fault(f);
        VT_OK(vs_comm_abort(vs_mesh_comm(dp)));
    } else if (me == 0) {
        record(f, me, vs_barrier(vs_world_comm(w), NULL)); // a different communicator
    } else {
        record(f, me, vs_all_reduce(vs_mesh_comm(tp), x, x, 4, VS_F32, VS_OP_SUM, NULL)); // a sibling's
    }
    vs_result after = vs_barrier(vs_mesh_comm(dp), NULL);
    VT_CHECK(after == VS_ERR_ABORTED, "rank %d: the aborted group then gave %s", me, vs_result_string(after));
    VT_OK(vs_mesh_free(mesh));
    return me == f->faulty ? 0 : f->res[me];
}

static void t_abort_submesh(void)
{
    fault_run f;
    memset(&f, 0, sizeof f);
    f.faulty = 3;
    vs_result r = launch(N, abort_rank, &f, LONG_TIMEOUT);
    check_run("abort_submesh", &f, VS_ERR_ABORTED, "rank 1 (world 3) called vs_comm_abort on DP group [1,3]");
    VT_CHECK(r == VS_ERR_ABORTED && strstr(vs_last_error(), "vs_comm_abort"), "vs_launch gave %s: %s",
             vs_result_string(r), vs_last_error());
}

/* ---- a rank skips one of ten all-reduces, then goes on to a barrier ---- */
typedef struct {
    fault_run f;
    int wrong[N]; /* sums that came back wrong before the error */
} skip_run;

static int skip_rank(vs_world* w, void* arg)
{
    skip_run* s = (skip_run*)arg;
    int me = vs_world_rank(w);
    vs_comm* c = vs_world_comm(w);
    vs_result r = VS_OK;
    for (int i = 0; i < 10 && !r; i++) {
        if (me == s->f.faulty && i == 5) {
            mark_fault(&s->f);
            continue;
        }
        float x = (float)i;
        r = vs_all_reduce(c, &x, &x, 1, VS_F32, VS_OP_SUM, NULL);
        if (!r && x != (float)(N * i)) s->wrong[me]++;
    }
    if (!r) r = vs_barrier(c, NULL);
    record(&s->f, me, r);
    return r;
}

static void t_skip(void)
{
    skip_run s;
    memset(&s, 0, sizeof s);
    s.f.faulty = 2;
    vs_result r = launch(N, skip_rank, &s, LONG_TIMEOUT);
    // every rank, the skipper too, gets the mismatch of call #10
    for (int k = 0; k < N; k++) {
        VT_CHECK(s.f.res[k] == VS_ERR_MISMATCH, "rank %d got %s (%s)", k, vs_result_string(s.f.res[k]), s.f.msg[k]);
        VT_CHECK(strstr(s.f.msg[k], "rank 2 (world 2) called barrier #10") &&
                     strstr(s.f.msg[k], "ranks 0, 1, 3 (world 0, 1, 3) called all_reduce #10"),
                 "rank %d message '%s' names both calls", k, s.f.msg[k]);
    }
    VT_CHECK(r == VS_ERR_MISMATCH, "vs_launch gave %s", vs_result_string(r));
    printf("    skip: %d wrong sums before the error (identical calls are paired by order; the first call that "
           "differs, or the skipper's return, is where it shows)\n",
           s.wrong[0]);
}

/* ---- a timeout names the missing ranks, the communicator and the call ---- */
static int late_rank(vs_world* w, void* arg)
{
    vs_result* res = (vs_result*)arg;
    int me = vs_world_rank(w);
    vs_mesh* mesh = NULL;
    vs_mesh* dp = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {2, 2}}, &mesh));
    VT_OK(vs_mesh_submesh(mesh, "DP", &dp));
    VT_OK(vs_comm_set_timeout(vs_mesh_comm(dp), 0.3));
    float x[2] = {1, 2};
    if (me == 2) sleep_s(1.0); // DP group [0,2]: rank 1 of it is late
    res[me] = vs_all_reduce(vs_mesh_comm(dp), x, x, 2, VS_F32, VS_OP_SUM, NULL);
    if (me == 0)
        VT_CHECK(strstr(vs_last_error(),
                        "all_reduce #1 (f32 x 2, sum) on DP group [0,2] of mesh (DP=2, TP=2): rank 1 (world 2) did "
                        "not arrive within 0.3 s") != NULL,
                 "timeout message '%s'", vs_last_error());
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

static void t_timeout_names(void)
{
    vs_result res[N] = {-100, -100, -100, -100};
    vs_result r = launch(N, late_rank, res, LONG_TIMEOUT);
    VT_CHECK(res[0] == VS_ERR_TIMEOUT, "rank 0 got %s", vs_result_string(res[0]));
    VT_CHECK(r == VS_ERR_TIMEOUT && strstr(vs_last_error(), "rank 1 (world 2) did not arrive"),
             "vs_launch gave %s: %s", vs_result_string(r), vs_last_error());
}

/* ---- no timeout: infinite and huge values wait for a late peer ---- */
static int inf_rank(vs_world* w, void* arg)
{
    double* waited = (double*)arg;
    int me = vs_world_rank(w);
    vs_comm* c = vs_world_comm(w);
    VT_CHECK(isinf(vs_world_timeout(w)), "world timeout %g", vs_world_timeout(w));
    VT_OK(vs_comm_set_timeout(c, INFINITY));
    float x = 1;
    if (me == 1) sleep_s(0.3);
    double t0 = now_s();
    VT_OK(vs_all_reduce(c, &x, &x, 1, VS_F32, VS_OP_SUM, NULL));
    VT_OK(vs_barrier(c, NULL));
    if (me == 0) *waited = now_s() - t0;
    VT_CHECK(x == 2, "sum %g", (double)x);
    return 0;
}

static void t_infinite(void)
{
    const char* vals[] = {"inf", "infinity", "forever", "0", "1e19"};
    for (int i = 0; i < 5; i++) {
        setenv("VESCALE_TIMEOUT", vals[i], 1);
        double waited = -1;
        VT_OK(launch(2, inf_rank, &waited, 0));
        VT_CHECK(waited > 0.25 && waited < 5, "VESCALE_TIMEOUT=%s: waited %g s for a 0.3 s late peer", vals[i],
                 waited);
    }
    unsetenv("VESCALE_TIMEOUT");
    double waited = -1;
    VT_OK(launch(2, inf_rank, &waited, INFINITY));
    VT_OK(launch(2, inf_rank, &waited, 1e300));
    VT_CHECK(waited > 0.25 && waited < 5, "timeout_s = 1e300: waited %g s", waited);
}

/* ---- the environment's values are checked, and named when wrong ---- */
static int noop_rank(vs_world* w, void* arg)
{
    (void)w;
    (void)arg;
    return 0;
}

static void t_env(void)
{
    const char* bad_timeouts[] = {"abc", "5s", "inof", "info", "-1", "nan", "1e999", " 5", ""};
    for (int i = 0; i < 8; i++) { // "" means unset: the default
        setenv("VESCALE_TIMEOUT", bad_timeouts[i], 1);
        vs_result r = launch(1, noop_rank, NULL, 0);
        VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "VESCALE_TIMEOUT"),
                 "VESCALE_TIMEOUT='%s' gave %s: %s", bad_timeouts[i], vs_result_string(r), vs_last_error());
    }
    setenv("VESCALE_TIMEOUT", "", 1);
    VT_OK(launch(1, noop_rank, NULL, 0));
    setenv("VESCALE_TIMEOUT", "2.5", 1);
    VT_OK(launch(1, noop_rank, NULL, 0));
    VT_OK(launch(1, noop_rank, NULL, 7)); // the desc wins over the environment
    unsetenv("VESCALE_TIMEOUT");
    const char* bad_levels[] = {"99", "verbose", "Info", "6", "warning"};
    for (int i = 0; i < 5; i++) {
        setenv("VESCALE_LOG", bad_levels[i], 1);
        vs_result r = launch(1, noop_rank, NULL, 0);
        VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "VESCALE_LOG"), "VESCALE_LOG='%s' gave %s: %s",
                 bad_levels[i], vs_result_string(r), vs_last_error());
    }
    setenv("VESCALE_LOG", "off", 1);
    VT_OK(launch(1, noop_rank, NULL, 0));
    unsetenv("VESCALE_LOG");
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = 1;
    d.log_level = (vs_log_level)99;
    vs_result r = vs_launch_ex(&d, noop_rank, NULL);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "log_level 99"), "log_level 99 gave %s: %s",
             vs_result_string(r), vs_last_error());
    d.log_level = VS_LOG_DEFAULT;
    d.timeout_s = -1;
    r = vs_launch_ex(&d, noop_rank, NULL);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "timeout_s -1"), "timeout_s -1 gave %s: %s",
             vs_result_string(r), vs_last_error());
    d.timeout_s = NAN;
    r = vs_launch_ex(&d, noop_rank, NULL);
    VT_CHECK(r == VS_ERR_INVALID, "timeout_s NaN gave %s", vs_result_string(r));
    setenv("VESCALE_TRANSPORT", "tcp", 1);
    vs_world* w = NULL;
    r = vs_world_init(&(vs_world_desc){.world_size = 1}, &w);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "VESCALE_TRANSPORT='tcp'"), "VESCALE_TRANSPORT=tcp gave %s: %s",
             vs_result_string(r), vs_last_error());
    VT_CHECK(w == NULL, "a world from a bad transport");
    unsetenv("VESCALE_TRANSPORT");
}

/* ---- two jobs at once: one job's failure does not touch the other ---- */
typedef struct {
    vs_result res;
} calm_run;

static int calm_rank(vs_world* w, void* arg)
{
    calm_run* c = (calm_run*)arg;
    float x = 1;
    for (int i = 0; i < 200; i++) {
        vs_result r = vs_all_reduce(vs_world_comm(w), &x, &x, 1, VS_F32, VS_OP_MAX, NULL);
        if (r) c->res = r;
        sleep_s(0.001);
    }
    return 0;
}

static void* calm_job(void* arg)
{
    calm_run* c = (calm_run*)arg;
    vs_result r = launch(2, calm_rank, c, LONG_TIMEOUT);
    if (r) c->res = r;
    return NULL;
}

static void t_jobs_independent(void)
{
    calm_run c = {VS_OK};
    pthread_t th;
    pthread_create(&th, NULL, calm_job, &c);
    fault_run f;
    memset(&f, 0, sizeof f);
    f.faulty = 1;
    vs_result r = launch(N, error_rank, &f, LONG_TIMEOUT);
    pthread_join(th, NULL);
    VT_CHECK(r == VS_ERR_IO, "failing job gave %s", vs_result_string(r));
    VT_CHECK(c.res == VS_OK, "the other job got %s", vs_result_string(c.res));
}

/* ---- every error returned is logged once, with its rank, at warn ---- */
typedef struct {
    int warn_lines, error_lines, other;
    char first[512];
} log_cap;

static void cap_log(vs_log_level lv, const char* msg, void* user)
{
    log_cap* c = (log_cap*)user;
    if (lv == VS_LOG_WARN && strstr(msg, "VS_ERR_NULL: vs_all_reduce: send buffer is NULL")) {
        if (__atomic_add_fetch(&c->warn_lines, 1, __ATOMIC_SEQ_CST) == 1) snprintf(c->first, sizeof c->first, "%s", msg);
    } else if (lv == VS_LOG_ERROR && strstr(msg, "job aborted: world rank 1 failed (VS_ERR_NULL)")) {
        __atomic_add_fetch(&c->error_lines, 1, __ATOMIC_SEQ_CST);
    } else if (lv <= VS_LOG_WARN) {
        __atomic_add_fetch(&c->other, 1, __ATOMIC_SEQ_CST);
    }
}

static int log_rank(vs_world* w, void* arg)
{
    (void)arg;
    float x[4] = {0};
    if (vs_world_rank(w) == 1) {
        vs_result r = vs_all_reduce(vs_world_comm(w), NULL, x, 4, VS_F32, VS_OP_SUM, NULL);
        VT_CHECK(r == VS_ERR_NULL, "bad all-reduce gave %s", vs_result_string(r));
        return r; // fails the job: logged once at error level
    }
    vs_barrier(vs_world_comm(w), NULL); // aborted by rank 1's failure
    return 0;
}

static void t_errors_logged(void)
{
    for (int level = VS_LOG_ERROR; level <= VS_LOG_DEBUG; level++) {
        log_cap c;
        memset(&c, 0, sizeof c);
        vs_launch_desc d;
        memset(&d, 0, sizeof d);
        d.nranks = 3;
        d.timeout_s = LONG_TIMEOUT;
        d.logger.fn = cap_log;
        d.logger.user = &c;
        d.log_level = (vs_log_level)level;
        vs_result r = vs_launch_ex(&d, log_rank, NULL);
        VT_CHECK(r == VS_ERR_NULL, "level %d: launch gave %s", level, vs_result_string(r));
        VT_CHECK(c.error_lines == 1, "level %d: the job's cause logged %d times", level, c.error_lines);
        if (level >= VS_LOG_WARN) {
            VT_CHECK(c.warn_lines == 1, "level %d: the error was logged %d times", level, c.warn_lines);
            VT_CHECK(strstr(c.first, "[rank 1] VS_ERR_NULL: vs_all_reduce: send buffer is NULL") != NULL,
                     "log line '%s'", c.first);
        } else {
            VT_CHECK(c.warn_lines == 0, "level error: %d warn lines", c.warn_lines);
        }
    }
}

/* ---- the root cause (issue 19.2): a layer callback fails on one of 8 ranks ---- */

enum { G_RANKS = 8, G_ROWS = 8, G_STEPS = 3 };
static gpt_config GCFG = {32, 8, 32, 4, 2, 5};
static gpt_model_storage GSTORE;
static vs_model_desc GMODEL;
static vs_pipe_fn g_attn_fwd; // the GPT's own attention forward

/* A poisoned forward: world rank `rank`'s h.<block>.attn fails at step, microbatch. */
typedef struct {
    int rank, block, step, mb;
    vs_result code;
} poison;
static poison g_poison[2];
static int g_npoison;
static __thread int t_rank = -1, t_step = -1; // the calling rank thread's world rank and step (__thread: this test uses only the public API)

static vs_result poisoned_attn_fwd(vs_pipe_call* c)
{
    const gpt_unit* u = (const gpt_unit*)vs_layer(c)->user;
    for (int i = 0; i < g_npoison; i++) {
        const poison* p = &g_poison[i];
        if (p->rank == t_rank && p->block == u->block && p->step == t_step && p->mb == c->mb)
            return vs_set_error(p->code, "h.%d.attn forward: poisoned weights (microbatch %d)", u->block, c->mb);
    }
    return g_attn_fwd(c);
}

static void gpt_setup(void)
{
    if (GMODEL.layers) return;
    VT_OK(gpt_model(&GCFG, &GSTORE, &GMODEL));
    for (int l = 0; l < GMODEL.nlayers; l++) {
        if (GSTORE.units[l].kind != GPT_ATTN) continue;
        VT_CHECK(!g_attn_fwd || g_attn_fwd == GSTORE.layers[l].unit.forward, "one attention forward");
        g_attn_fwd = GSTORE.layers[l].unit.forward;
        GSTORE.layers[l].unit.forward = poisoned_attn_fwd;
    }
}

typedef struct {
    vs_result res[G_RANKS];
    char msg[G_RANKS][1024];
} gpt_run;

static int gpt_fault_rank(vs_world* w, void* arg)
{
    gpt_run* R = (gpt_run*)arg;
    int me = vs_world_rank(w);
    t_rank = me;
    vs_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.pp = 2, plan.dp = 2, plan.tp = 2;
    plan.microbatches = 2;
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &GMODEL;
    d.plan = &plan;
    d.optim.kind = VS_OPTIM_ADAMW;
    d.lr.lr = 1e-3;
    vs_train* t = NULL;
    vs_result r = vs_parallelize(w, &d, &t);
    VT_CHECK(r == VS_OK, "rank %d: vs_parallelize: %s", me, vs_last_error());
    int32_t tok[G_ROWS * 8], tgt[G_ROWS * 8];
    vs_batch b = gpt_batch_view(G_ROWS, GCFG.seq, tok, tgt);
    for (int s = 0; s < G_STEPS && !r; s++) {
        t_step = s;
        gpt_batch(&GCFG, s, G_ROWS, tok, tgt);
        double l = 0;
        r = vs_train_step(t, &b, &l);
    }
    R->res[me] = r;
    snprintf(R->msg[me], sizeof R->msg[me], "%s", r ? vs_last_error() : "");
    if (t) vs_train_free(t);
    return r;
}

/* Captures the log lines of a job: how many at each level, and the error lines. */
typedef struct {
    int n[VS_LOG_DEBUG + 1];
    int warn_not5; // warn lines of ranks other than world rank 5
    char error_line[1024];
} gpt_log;

static void gpt_log_fn(vs_log_level lv, const char* msg, void* user)
{
    gpt_log* g = (gpt_log*)user;
    if ((int)lv < 0 || lv > VS_LOG_DEBUG) return;
    if (__atomic_add_fetch(&g->n[lv], 1, __ATOMIC_SEQ_CST) == 1 && lv == VS_LOG_ERROR)
        snprintf(g->error_line, sizeof g->error_line, "%s", msg);
    if (lv == VS_LOG_WARN && strncmp(msg, "[rank 5] ", 9) != 0) __atomic_add_fetch(&g->warn_not5, 1, __ATOMIC_SEQ_CST);
}

static vs_result gpt_launch(gpt_run* R, vs_log_level level, gpt_log* lg)
{
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = G_RANKS;
    d.timeout_s = LONG_TIMEOUT;
    if (lg) {
        d.logger.fn = gpt_log_fn;
        d.logger.user = lg;
        d.log_level = level;
    }
    memset(R, 0, sizeof *R);
    return vs_launch_ex(&d, gpt_fault_rank, R);
}

#define CALLBACK_MSG "(F1.1): unit \"h.1.attn\" forward, microbatch 1: h.1.attn forward: poisoned weights (microbatch 1)"

static void t_layer_fails(void)
{
    gpt_setup();
    // world rank 5 = (PP 1, DP 0, TP 1): stage 1 holds h.1.attn; its TP partner 4
    // then waits in an all-reduce, the other stages in receives
    g_npoison = 1;
    g_poison[0] = (poison){5, 1, 1, 1, VS_ERR_INVALID};
    gpt_run R;
    gpt_log lg;
    memset(&lg, 0, sizeof lg);
    vs_result r = gpt_launch(&R, VS_LOG_ERROR, &lg);
    const char* lm = vs_last_error();
    printf("    vs_launch: %s: %s\n", vs_result_string(r), lm);
    for (int k = 0; k < G_RANKS; k++) printf("    rank %d: %s: %s\n", k, vs_result_string(R.res[k]), R.msg[k]);
    VT_CHECK(r == VS_ERR_INVALID, "vs_launch gave %s, want the callback's VS_ERR_INVALID: %s", vs_result_string(r), lm);
    VT_CHECK(strstr(lm, "vs_launch: world rank 5 failed (VS_ERR_INVALID): vs_train_step (step 1): vs_pipe_run: stage 1 "
                        "at instruction ") && strstr(lm, CALLBACK_MSG),
             "vs_launch's message '%s' is not world rank 5's own", lm);
    VT_CHECK(R.res[5] == VS_ERR_INVALID && strstr(R.msg[5], CALLBACK_MSG) && !strstr(R.msg[5], "abort"),
             "rank 5 (the cause) got %s: %s", vs_result_string(R.res[5]), R.msg[5]);
    for (int k = 0; k < G_RANKS; k++) {
        if (k == 5) continue;
        VT_CHECK(R.res[k] == VS_ERR_ABORTED, "rank %d got %s: %s", k, vs_result_string(R.res[k]), R.msg[k]);
        VT_CHECK(strstr(R.msg[k], "world rank 5 failed (VS_ERR_INVALID): vs_pipe_run: stage 1 at instruction ") &&
                     strstr(R.msg[k], CALLBACK_MSG),
                 "rank %d's message does not name the origin, its stage and instruction and its message: %s", k,
                 R.msg[k]);
    }
    // VESCALE_LOG=error: the cause, once
    VT_CHECK(lg.n[VS_LOG_ERROR] == 1 && lg.n[VS_LOG_WARN] == 0 && lg.n[VS_LOG_INFO] == 0,
             "level error: %d error, %d warn, %d info lines (want 1, 0, 0)", lg.n[VS_LOG_ERROR], lg.n[VS_LOG_WARN],
             lg.n[VS_LOG_INFO]);
    VT_CHECK(strstr(lg.error_line, "[rank 5] job aborted: world rank 5 failed (VS_ERR_INVALID): vs_pipe_run: stage 1 ") &&
                 strstr(lg.error_line, CALLBACK_MSG),
             "the error line '%s'", lg.error_line);
    printf("    log at error: %s\n", lg.error_line);
    // at info: the cause's own errors at warn, every consequence at info
    memset(&lg, 0, sizeof lg);
    r = gpt_launch(&R, VS_LOG_INFO, &lg);
    VT_CHECK(r == VS_ERR_INVALID, "level info: vs_launch gave %s", vs_result_string(r));
    VT_CHECK(lg.n[VS_LOG_ERROR] == 1 && lg.warn_not5 == 0 && lg.n[VS_LOG_INFO] >= G_RANKS - 1,
             "level info: %d error lines, %d warn lines of other ranks, %d info lines", lg.n[VS_LOG_ERROR], lg.warn_not5,
             lg.n[VS_LOG_INFO]);
}

/* Two ranks of different DP replicas fail at once (independent pipelines): the
   first recorded is the cause; vs_launch gives one of the two own results, never
   VS_ERR_ABORTED, and every other rank names that one. */
static void t_two_causes(void)
{
    gpt_setup();
    g_npoison = 2;
    g_poison[0] = (poison){5, 1, 1, 0, VS_ERR_INVALID}; // stage 1, DP replica 0
    g_poison[1] = (poison){2, 0, 1, 1, VS_ERR_IO};      // stage 0, DP replica 1: about when 5 fails
    int won[2] = {0, 0};
    for (int it = 0; it < 6; it++) {
        gpt_run R;
        vs_result r = gpt_launch(&R, VS_LOG_DEFAULT, NULL);
        const char* lm = vs_last_error();
        int w = r == VS_ERR_INVALID ? 0 : r == VS_ERR_IO ? 1 : -1;
        VT_CHECK(w >= 0, "vs_launch gave %s, want one of the causes: %s", vs_result_string(r), lm);
        if (w < 0) return;
        won[w]++;
        char who[64];
        snprintf(who, sizeof who, "world rank %d failed (%s): ", g_poison[w].rank, vs_result_string(r));
        VT_CHECK(strstr(lm, who) && strstr(lm, "poisoned weights"), "vs_launch: %s", lm);
        for (int k = 0; k < G_RANKS; k++) {
            int own = -1;
            for (int i = 0; i < 2; i++)
                if (g_poison[i].rank == k) own = i;
            int is_own = own >= 0 && R.res[k] == g_poison[own].code && strstr(R.msg[k], "poisoned weights") &&
                         !strstr(R.msg[k], "abort");
            int names = R.res[k] == VS_ERR_ABORTED && strstr(R.msg[k], who);
            VT_CHECK(is_own || names, "run %d: rank %d got %s: %s (the cause: %s)", it, k, vs_result_string(R.res[k]),
                     R.msg[k], who);
        }
    }
    printf("    two causes: world rank 5 first %d times, world rank 2 first %d times\n", won[0], won[1]);
}

/* vs_world_abort(w, why) on threads: this rank's last error is the cause. */
static int world_abort_rank(vs_world* w, void* arg)
{
    fault_run* f = (fault_run*)arg;
    int me = vs_world_rank(w);
    if (me == f->faulty) {
        sleep_s(0.05);
        mark_fault(f);
        vs_set_error(VS_ERR_IO, "checkpoint shard 3: disk full");
        VT_OK(vs_world_abort(w, VS_ERR_IO));
        return 0;
    }
    record(f, me, vs_barrier(vs_world_comm(w), NULL));
    return f->res[me];
}

static void t_world_abort_cause(void)
{
    fault_run f;
    memset(&f, 0, sizeof f);
    f.faulty = 1;
    vs_result r = launch(N, world_abort_rank, &f, LONG_TIMEOUT);
    check_run("world_abort", &f, VS_ERR_ABORTED, "world rank 1 failed (VS_ERR_IO): checkpoint shard 3: disk full");
    VT_CHECK(r == VS_ERR_IO && strstr(vs_last_error(), "world rank 1 failed (VS_ERR_IO): checkpoint shard 3: disk full"),
             "vs_launch gave %s: %s", vs_result_string(r), vs_last_error());
}

/* ---- the pipeline engine's own messages: receive pre-posting, a shape off spec ---- */

static int g_bad_shape; // 1: the data callback makes x off spec at microbatch 1; 2: unit "a" makes h so

static vs_result sp_data(vs_pipe_call* c)
{
    int64_t sh[2] = {3, 8};
    if (g_bad_shape == 1 && c->mb == 1) sh[0] = 5, sh[1] = 7;
    float* x = NULL;
    vs_result r = vs_pipe_output(c, 0, VS_F32, 2, sh, (void**)&x);
    for (int64_t i = 0; !r && i < sh[0] * sh[1]; i++) x[i] = 0.01f * (float)(i + c->mb);
    return r;
}

static vs_result sp_a_fwd(vs_pipe_call* c)
{
    int64_t sh[2] = {c->in[0].shape[0], 8};
    if (g_bad_shape == 2 && c->mb == 1) sh[0] = 5, sh[1] = 7;
    float* h = NULL;
    vs_result r = vs_pipe_output(c, 0, VS_F32, 2, sh, (void**)&h);
    if (!r) memcpy(h, c->in[0].data, sizeof(float) * (size_t)(sh[0] * 8));
    return r;
}

static vs_result sp_a_bwd(vs_pipe_call* c)
{
    (void)c; // its input is data: no gradient to give
    return VS_OK;
}

static vs_result sp_b_fwd(vs_pipe_call* c)
{
    const float* h = (const float*)c->in[0].data;
    float* loss = NULL;
    vs_result r = vs_pipe_output(c, 0, VS_F32, 0, NULL, (void**)&loss);
    float a = 0;
    for (int64_t i = 0; i < c->in[0].shape[0] * 8; i++) a += h[i] * h[i];
    if (!r) *loss = a;
    return r;
}

static vs_result sp_b_bwd(vs_pipe_call* c)
{
    const float* h = (const float*)c->in[0].data;
    float* gh = (float*)c->in[0].grad;
    float g = *(const float*)c->out[0].grad;
    for (int64_t i = 0; i < c->in[0].shape[0] * 8; i++) gh[i] += 2 * g * h[i];
    return VS_OK;
}

typedef struct {
    int prepost; // run once, abort the world from rank 0, run again
    vs_result res[2];
    char msg[2][1024];
} sp_run;

static int sp_rank(vs_world* w, void* arg)
{
    sp_run* R = (sp_run*)arg;
    int me = vs_world_rank(w);
    static const vs_pipe_unit units[2] = {
        {"a", "x:f32[*,8]", "h:f32[*,8]", sp_a_fwd, sp_a_bwd, NULL, NULL, NULL, 0, 1, 0, 0, 0, NULL, 0},
        {"b", "h:f32[*,8]", "loss:f32[]", sp_b_fwd, sp_b_bwd, NULL, NULL, NULL, 0, 1, 0, 0, 0, NULL, 0}};
    vs_mesh* mesh = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = 2;
    md.dim_names[0] = "PP";
    VT_OK(vs_mesh_init(w, &md, &mesh));
    vs_pipe_split_desc sd;
    memset(&sd, 0, sizeof sd);
    sd.stages = 2;
    sd.kind = VS_PIPE_SPLIT_UNIFORM;
    vs_pipe_plan plan;
    VT_OK(vs_pipe_split(units, 2, &sd, &plan));
    vs_pipe_desc pd;
    memset(&pd, 0, sizeof pd);
    pd.mesh = mesh;
    pd.units = units;
    pd.nunits = 2;
    pd.plan = &plan;
    pd.data = sp_data;
    vs_pipe* pipe = NULL;
    vs_pipe_sched* s = NULL;
    VT_OK(vs_pipe_init(&pd, &pipe));
    VT_OK(vs_pipe_generate(w, VS_PIPE_1F1B, 2, 1, 2, &s));
    vs_result r = VS_ERR_STATE;
    if (pipe && s) {
        double loss = 0;
        if (R->prepost) {
            VT_OK(vs_pipe_run(pipe, s, &loss));
            VT_OK(vs_barrier(vs_world_comm(w), NULL));
            if (me == 0)
                VT_OK(vs_comm_abort(vs_world_comm(w)));
            else // returns once rank 0 has aborted the world
                VT_CHECK(vs_barrier(vs_world_comm(w), NULL) == VS_ERR_ABORTED, "the barrier: %s", vs_last_error());
        }
        r = vs_pipe_run(pipe, s, &loss);
    }
    R->res[me] = r;
    snprintf(R->msg[me], sizeof R->msg[me], "%s", r ? vs_last_error() : "");
    vs_pipe_sched_free(s);
    if (pipe) vs_pipe_free(pipe);
    vs_mesh_free(mesh);
    return R->prepost ? 0 : r;
}

static void t_prepost_wrapped(void)
{
    sp_run R;
    memset(&R, 0, sizeof R);
    R.prepost = 1;
    g_bad_shape = 0;
    vs_result r = launch(2, sp_rank, &R, LONG_TIMEOUT);
    VT_CHECK(r == VS_ERR_ABORTED, "vs_launch gave %s: %s", vs_result_string(r), vs_last_error());
    static const char* want[2] = {
        "vs_pipe_run: stage 0, before its first instruction: posting ahead the receive of instruction 4 (RB0.0) from "
        "stage 1: recv",
        "vs_pipe_run: stage 1, before its first instruction: posting ahead the receive of instruction 0 (RF1.0) from "
        "stage 0: recv"};
    for (int k = 0; k < 2; k++) {
        printf("    rank %d: %s: %s\n", k, vs_result_string(R.res[k]), R.msg[k]);
        VT_CHECK(R.res[k] == VS_ERR_ABORTED && strstr(R.msg[k], want[k]) &&
                     strstr(R.msg[k], "rank 0 (world 0) called vs_comm_abort on world"),
                 "rank %d: %s: %s", k, vs_result_string(R.res[k]), R.msg[k]);
    }
}

static void t_shape_message(void)
{
    static const char* want[2] = {
        "vs_pipe_run: stage 0 at instruction 2 (F0.1): unit \"a\", microbatch 1: input \"x\" got f32[5,7], spec x:f32[*,8]",
        "vs_pipe_run: stage 0 at instruction 2 (F0.1): unit \"a\" forward, microbatch 1: vs_pipe_output: a: output \"h\" "
        "got f32[5,7], spec h:f32[*,8]"};
    for (int bad = 1; bad <= 2; bad++) {
        sp_run R;
        memset(&R, 0, sizeof R);
        g_bad_shape = bad;
        vs_result r = launch(2, sp_rank, &R, LONG_TIMEOUT);
        printf("    %s: rank 0: %s\n", bad == 1 ? "input" : "output", R.msg[0]);
        printf("    %s: rank 1: %s\n", bad == 1 ? "input" : "output", R.msg[1]);
        VT_CHECK(r == VS_ERR_MISMATCH && strstr(vs_last_error(), want[bad - 1]), "vs_launch gave %s: %s",
                 vs_result_string(r), vs_last_error());
        VT_CHECK(R.res[0] == VS_ERR_MISMATCH && strstr(R.msg[0], want[bad - 1]), "rank 0: %s: %s",
                 vs_result_string(R.res[0]), R.msg[0]);
        VT_CHECK(R.res[1] == VS_ERR_ABORTED && strstr(R.msg[1], "world rank 0 failed (VS_ERR_MISMATCH): ") &&
                     strstr(R.msg[1], want[bad - 1]),
                 "rank 1: %s: %s", vs_result_string(R.res[1]), R.msg[1]);
    }
    g_bad_shape = 0;
}

int main(void)
{
    VT_CASE("faults/threads/rank_returns_early", t_early_return());
    VT_CASE("faults/threads/rank_returns_error", t_error_return());
    VT_CASE("faults/threads/rank_aborts_a_submesh", t_abort_submesh());
    VT_CASE("faults/threads/rank_skips_a_collective", t_skip());
    VT_CASE("faults/threads/timeout_names_ranks_and_group", t_timeout_names());
    VT_CASE("faults/threads/no_timeout", t_infinite());
    VT_CASE("faults/threads/environment_values", t_env());
    VT_CASE("faults/threads/jobs_independent", t_jobs_independent());
    VT_CASE("faults/threads/errors_logged_once", t_errors_logged());
    VT_CASE("faults/threads/layer_fails_root_cause", t_layer_fails());
    VT_CASE("faults/threads/two_causes_one_wins", t_two_causes());
    VT_CASE("faults/threads/world_abort_names_the_cause", t_world_abort_cause());
    VT_CASE("faults/threads/pipe_prepost_error_wrapped", t_prepost_wrapped());
    VT_CASE("faults/threads/pipe_shape_message", t_shape_message());
    return vt_summary();
}
