/* test_faults.c - the threads transport's fail-fast contract (issue 8): a fault on
   any rank ends the job promptly on every rank with an error naming the cause.
   Four thread ranks with a 60 s timeout, so "prompt" is measured, not waited out:
   a rank returns early, a rank returns an error, a rank aborts one communicator of
   a mesh, a rank skips one collective. Each case prints the time from the fault to
   the error on every rank. Also: timeout messages name the missing ranks and the
   communicator, infinite and huge timeouts, strict environment values. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
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
    return vt_summary();
}
