/* test_errors.c - results and messages, hooks, dtypes, every bad input of the
   communicator layer, and the timeout/abort paths (threads; with -DVESCALE_MPI
   the timeout path over MPI processes). */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vs_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#ifndef VESCALE_MPI

static void t_results(void)
{
    const vs_result codes[] = {VS_OK, VS_ERR_INVALID, VS_ERR_NULL, VS_ERR_MISMATCH, VS_ERR_STATE, VS_ERR_NONFINITE,
                               VS_ERR_NOMEM, VS_ERR_UNAVAILABLE, VS_ERR_UNSUPPORTED, VS_ERR_TIMEOUT,
                               VS_ERR_ABORTED, VS_ERR_BACKEND, VS_ERR_IO};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char* s = vs_result_string(codes[i]);
        VT_CHECK(strncmp(s, "VS_", 3) == 0 && strcmp(s, "VS_ERR_UNKNOWN") != 0, "code %d -> %s", codes[i], s);
        for (size_t k = 0; k < i; k++) VT_CHECK(strcmp(s, vs_result_string(codes[k])) != 0, "duplicate %s", s);
    }
    VT_CHECK(strcmp(vs_result_string(-999), "VS_ERR_UNKNOWN") == 0, "unknown code");
    VT_CHECK(vs_version() == VESCALE_VERSION_NUMBER, "version %d vs %d", vs_version(), VESCALE_VERSION_NUMBER);
    VT_CHECK(strcmp(vs_version_string(), VESCALE_VERSION_STRING) == 0, "version string");
    vs_clear_error();
    VT_CHECK(vs_last_error()[0] == 0, "clear_error");
}

static void t_dtypes(void)
{
    const size_t sizes[] = {0, 4, 2, 2, 8, 4, 8, 1};
    const char* names[] = {"invalid", "f32", "f16", "bf16", "f64", "i32", "i64", "u8"};
    for (int d = 0; d < VS_DTYPE_COUNT; d++) {
        VT_CHECK(vs_dtype_size((vs_dtype)d) == sizes[d], "size of %d", d);
        VT_CHECK(strcmp(vs_dtype_name((vs_dtype)d), names[d]) == 0, "name of %d", d);
    }
    VT_CHECK(vs_dtype_size((vs_dtype)99) == 0, "size of 99");
    // f16: every finite half survives half -> float -> half
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t x = (uint16_t)h;
        if ((x & 0x7c00) == 0x7c00 && (x & 0x3ff)) continue; // NaN payloads
        VT_CHECK(vs_f32_to_f16(vs_f16_to_f32(x)) == x, "f16 round trip 0x%04x", h);
    }
    VT_CHECK(vs_f16_to_f32(0x3c00) == 1.0f && vs_f16_to_f32(0xc000) == -2.0f, "f16 constants");
    VT_CHECK(vs_f16_to_f32(0x7bff) == 65504.0f && vs_f16_to_f32(0x0001) == ldexpf(1, -24), "f16 extremes");
    VT_CHECK(vs_f32_to_f16(65520.0f) == 0x7c00 && vs_f32_to_f16(1e-9f) == 0, "f16 overflow/underflow");
    VT_CHECK(vs_f32_to_f16(1.0f + ldexpf(1, -11)) == 0x3c00, "f16 tie to even (down)");
    VT_CHECK(vs_f32_to_f16(1.0f + 3 * ldexpf(1, -11)) == 0x3c02, "f16 tie to even (up)");
    VT_CHECK(vs_f32_to_f16(ldexpf(1, -25)) == 0 && vs_f32_to_f16(ldexpf(3, -26)) == 1, "f16 subnormal rounding");
#if defined(__FLT16_MAX__) && !defined(__cplusplus)
    // the compiler's own half type as an independent reference
    for (int i = 0; i < 200000; i++) {
        float f = ldexpf((float)((i * 2654435761u) % 100000u) / 100000.0f - 0.5f, (i % 40) - 26);
        _Float16 ref = (_Float16)f;
        uint16_t rb;
        memcpy(&rb, &ref, 2);
        VT_CHECK(vs_f32_to_f16(f) == rb, "f16(%a): 0x%04x vs compiler 0x%04x", (double)f, vs_f32_to_f16(f), rb);
    }
#endif
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t x = (uint16_t)h;
        if ((x & 0x7f80) == 0x7f80 && (x & 0x7f)) continue;
        VT_CHECK(vs_f32_to_bf16(vs_bf16_to_f32(x)) == x, "bf16 round trip 0x%04x", h);
    }
    VT_CHECK(vs_f32_to_bf16(1.0f + ldexpf(1, -8)) == 0x3f80, "bf16 tie to even (down)");
    VT_CHECK(vs_f32_to_bf16(1.0f + 3 * ldexpf(1, -8)) == 0x3f82, "bf16 tie to even (up)");
    VT_CHECK(vs_f32_to_bf16(1.0f + ldexpf(1, -8) + ldexpf(1, -20)) == 0x3f81, "bf16 above tie");
}

/* ---- bad arguments on one rank ---- */
static int bad_args_rank(vs_world* w, void* arg)
{
    (void)arg;
    vs_comm* c = vs_world_comm(w);
    float buf[8] = {0};
    vs_work* wk = NULL;
    VT_ERR(vs_all_reduce(NULL, buf, buf, 8, VS_F32, VS_OP_SUM, NULL), VS_ERR_NULL, "comm");
    VT_ERR(vs_all_reduce(c, buf, buf, 8, (vs_dtype)99, VS_OP_SUM, NULL), VS_ERR_INVALID, "dtype 99");
    VT_ERR(vs_all_reduce(c, buf, buf, 8, VS_F32, (vs_op)42, NULL), VS_ERR_INVALID, "op 42");
    VT_ERR(vs_all_reduce(c, NULL, buf, 8, VS_F32, VS_OP_SUM, NULL), VS_ERR_NULL, "send buffer");
    VT_ERR(vs_all_reduce(c, buf, NULL, 8, VS_F32, VS_OP_SUM, NULL), VS_ERR_NULL, "recv buffer");
    VT_ERR(vs_broadcast(c, buf, buf, 8, VS_F32, 7, NULL), VS_ERR_INVALID, "root 7");
    VT_ERR(vs_reduce(c, buf, buf, 8, VS_F32, VS_OP_SUM, -1, NULL), VS_ERR_INVALID, "root -1");
    VT_ERR(vs_send(c, buf, 8, VS_F32, 5, NULL), VS_ERR_INVALID, "peer 5");
    VT_ERR(vs_recv(c, buf, 8, VS_F32, -2, NULL), VS_ERR_INVALID, "peer -2");
    VT_ERR(vs_all_to_all(c, buf, buf, 4, VS_F32, NULL), VS_ERR_INVALID, "in place");
    VT_ERR(vs_all_gatherv(c, buf, buf, NULL, NULL, VS_F32, NULL), VS_ERR_NULL, "counts");
    VT_ERR(vs_reduce_scatterv(c, buf, buf, NULL, VS_F32, VS_OP_SUM, NULL), VS_ERR_NULL, "counts");
    VT_ERR(vs_all_to_allv(c, buf, NULL, NULL, buf + 4, NULL, NULL, VS_F32, NULL), VS_ERR_NULL, "send_counts");
    VT_ERR(vs_group_end(c, NULL), VS_ERR_STATE, "no group");
    VT_ERR(vs_comm_split(c, -5, 0, NULL), VS_ERR_NULL, "out");
    vs_comm* sc = NULL;
    VT_ERR(vs_comm_split(c, -5, 0, &sc), VS_ERR_INVALID, "color -5");
    VT_ERR(vs_comm_set_timeout(c, -1), VS_ERR_INVALID, "timeout -1");
    VT_ERR(vs_comm_set_timeout(c, NAN), VS_ERR_INVALID, "timeout nan");
    VT_OK(vs_comm_set_timeout(c, 0)); // 0 and INFINITY: no timeout
    VT_CHECK(isinf(c->timeout), "timeout 0 means none, got %g", c->timeout);
    VT_OK(vs_comm_set_timeout(c, 1e19));
    VT_CHECK(isinf(c->timeout), "timeout 1e19 means none, got %g", c->timeout);
    VT_OK(vs_comm_set_timeout(c, vs_world_timeout(w)));
    VT_ERR(vs_comm_set_stream(c, NULL), VS_ERR_UNSUPPORTED, "threads");
    VT_ERR(vs_comm_free(c), VS_ERR_INVALID, "world");
    VT_ERR(vs_wait(NULL), VS_ERR_NULL, "work");
    // async handle inside a group is refused, the group still completes
    VT_OK(vs_group_start(c));
    VT_ERR(vs_all_reduce(c, buf, buf, 8, VS_F32, VS_OP_SUM, &wk), VS_ERR_STATE, "group");
    VT_CHECK(wk == NULL, "work handle set on error");
    VT_OK(vs_group_end(c, NULL));
    // nothing was written by the refused calls
    for (int i = 0; i < 8; i++) VT_CHECK(buf[i] == 0, "buf[%d] written", i);
    return 0;
}

static void t_bad_args(void)
{
    VT_OK(vs_launch(2, bad_args_rank, NULL));
    VT_ERR(vs_launch(0, bad_args_rank, NULL), VS_ERR_INVALID, "nranks 0");
    VT_ERR(vs_launch(-3, bad_args_rank, NULL), VS_ERR_INVALID, "nranks -3");
    VT_ERR(vs_launch(2, NULL, NULL), VS_ERR_NULL, "fn");
    VT_ERR(vs_launch_ex(NULL, bad_args_rank, NULL), VS_ERR_NULL, "desc");
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = 2;
    d.transport = VS_TRANSPORT_MPI;
    VT_ERR(vs_launch_ex(&d, bad_args_rank, NULL), VS_ERR_INVALID, "mpi");
    d.transport = VS_TRANSPORT_NCCL;
    VT_ERR(vs_launch_ex(&d, bad_args_rank, NULL), VS_ERR_UNAVAILABLE, "VESCALE_NCCL");
    vs_world* w = NULL;
    vs_world_desc wd;
    memset(&wd, 0, sizeof wd);
    wd.transport = VS_TRANSPORT_THREADS;
    VT_ERR(vs_world_init(&wd, &w), VS_ERR_INVALID, "vs_launch");
    wd.transport = VS_TRANSPORT_MPI;
    VT_ERR(vs_world_init(&wd, &w), VS_ERR_UNAVAILABLE, "VESCALE_MPI");
    wd.transport = VS_TRANSPORT_NCCL;
    VT_ERR(vs_world_init(&wd, &w), VS_ERR_UNAVAILABLE, "VESCALE_NCCL");
    wd.transport = (vs_transport)9;
    VT_ERR(vs_world_init(&wd, &w), VS_ERR_INVALID, "transport 9");
    VT_ERR(vs_world_init(NULL, &w), VS_ERR_NULL, "desc");
    VT_CHECK(w == NULL, "world set on error");
    VT_CHECK(vs_transport_available(VS_TRANSPORT_THREADS) && !vs_transport_available(VS_TRANSPORT_NCCL),
             "availability");
}

/* ---- mismatched collectives across ranks: every rank gets VS_ERR_MISMATCH ---- */
static int mismatch_rank(vs_world* w, void* arg)
{
    (void)arg;
    vs_comm* c = vs_world_comm(w);
    int me = vs_world_rank(w);
    float a[16] = {0}, b[16] = {0};
    VT_ERR(vs_all_reduce(c, a, b, me == 1 ? 8 : 16, VS_F32, VS_OP_SUM, NULL), VS_ERR_MISMATCH, "count");
    VT_ERR(vs_all_reduce(c, a, b, 4, me == 2 ? VS_I32 : VS_F32, VS_OP_SUM, NULL), VS_ERR_MISMATCH, "dtype");
    VT_ERR(vs_all_reduce(c, a, b, 4, VS_F32, me ? VS_OP_MAX : VS_OP_SUM, NULL), VS_ERR_MISMATCH, "op");
    VT_ERR(vs_broadcast(c, a, b, 4, VS_F32, me == 0 ? 0 : 1, NULL), VS_ERR_MISMATCH, "root");
    if (me == 0)
        VT_ERR(vs_all_reduce(c, a, b, 4, VS_F32, VS_OP_SUM, NULL), VS_ERR_MISMATCH, "collective mismatch");
    else
        VT_ERR(vs_all_gather(c, a, b, 4, VS_F32, NULL), VS_ERR_MISMATCH, "collective mismatch");
    // split on one rank, a collective on the others
    vs_comm* sc = NULL;
    if (me == 3)
        VT_ERR(vs_comm_split(c, 0, 0, &sc), VS_ERR_MISMATCH, "collective mismatch");
    else
        VT_ERR(vs_barrier(c, NULL), VS_ERR_MISMATCH, "collective mismatch");
    VT_CHECK(sc == NULL, "split gave a communicator on mismatch");
    // send 4 floats, receive 8: both sides see the mismatch, nothing written
    float r8[8];
    for (int i = 0; i < 8; i++) r8[i] = -1;
    if (me == 0) VT_ERR(vs_send(c, a, 4, VS_F32, 1, NULL), VS_ERR_MISMATCH, "mismatch");
    if (me == 1) {
        VT_ERR(vs_recv(c, r8, 8, VS_F32, 0, NULL), VS_ERR_MISMATCH, "mismatch");
        for (int i = 0; i < 8; i++) VT_CHECK(r8[i] == -1, "recv buffer written on mismatch");
    }
    // the communicator still works afterwards
    float x = (float)me, s = 0;
    VT_OK(vs_all_reduce(c, &x, &s, 1, VS_F32, VS_OP_SUM, NULL));
    VT_CHECK(s == 6.0f, "sum after mismatches %g", (double)s);
    return 0;
}

/* ---- timeouts: one rank skips a collective ---- */
typedef struct { double elapsed[8]; vs_result res[8]; vs_result after[8]; } timeout_args;

static int timeout_rank(vs_world* w, void* arg)
{
    timeout_args* ta = (timeout_args*)arg;
    vs_comm* c = vs_world_comm(w);
    int me = vs_world_rank(w), n = vs_world_size(w);
    float x[4] = {1, 2, 3, 4};
    if (me == n - 1) { // arrives only after the others timed out (returning at once ends the job sooner)
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
        return 0;
    }
    double t0 = now_s();
    ta->res[me] = vs_all_reduce(c, x, x, 4, VS_F32, VS_OP_SUM, NULL);
    ta->elapsed[me] = now_s() - t0;
    if (ta->res[me] == VS_ERR_TIMEOUT)
        VT_CHECK(strstr(vs_last_error(), "of 4 ranks") || strstr(vs_last_error(), "did not arrive"),
                 "timeout message '%s'", vs_last_error());
    ta->after[me] = vs_barrier(c, NULL);
    return 0;
}

static void t_timeout_collective(void)
{
    timeout_args ta;
    memset(&ta, 0, sizeof ta);
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = 4;
    d.timeout_s = 0.3;
    vs_launch_ex(&d, timeout_rank, &ta);
    for (int r = 0; r < 3; r++) {
        VT_CHECK(ta.res[r] == VS_ERR_TIMEOUT, "rank %d got %s", r, vs_result_string(ta.res[r]));
        VT_CHECK(ta.elapsed[r] < 10.0, "rank %d waited %g s", r, ta.elapsed[r]);
        VT_CHECK(ta.after[r] == VS_ERR_ABORTED, "rank %d after timeout got %s", r, vs_result_string(ta.after[r]));
    }
    double mx = 0;
    for (int r = 0; r < 3; r++) mx = ta.elapsed[r] > mx ? ta.elapsed[r] : mx;
    VT_CHECK(mx >= 0.29, "timed out after %g s, before the 0.3 s timeout", mx);
}

static int p2p_timeout_rank(vs_world* w, void* arg)
{
    vs_result* res = (vs_result*)arg;
    vs_comm* c = vs_world_comm(w);
    float x[4] = {0};
    if (vs_world_rank(w) == 0) res[0] = vs_send(c, x, 4, VS_F32, 1, NULL);
    if (vs_world_rank(w) == 1) {
        vs_work* wk = NULL;
        res[1] = vs_recv(c, x, 4, VS_F32, 0, &wk); // async recv matched by rank 0's blocking send
        if (!res[1]) res[1] = vs_wait(wk);
    }
    return 0;
}

static void t_timeout_p2p(void)
{
    // a short timeout does not disturb a pair that does meet (rank 2 stays idle)
    vs_result res[3] = {-100, -100, -100};
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = 3;
    d.timeout_s = 0.2;
    VT_OK(vs_launch_ex(&d, p2p_timeout_rank, res));
    VT_CHECK(res[0] == VS_OK && res[1] == VS_OK, "matched pair: %s %s", vs_result_string(res[0]),
             vs_result_string(res[1]));
}

static int p2p_lonely_rank(vs_world* w, void* arg)
{
    vs_result* res = (vs_result*)arg;
    float x[4] = {0};
    if (vs_world_rank(w) == 1) { // stays, but never receives
        struct timespec ts = {0, 600 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (vs_world_rank(w) == 0) {
        double t0 = now_s();
        res[0] = vs_send(vs_world_comm(w), x, 4, VS_F32, 1, NULL);
        VT_CHECK(now_s() - t0 >= 0.19, "send gave up after %g s", now_s() - t0);
        VT_CHECK(strstr(vs_last_error(), "rank 1") != NULL, "message '%s' names the peer", vs_last_error());
    }
    return 0;
}

static void t_timeout_p2p_lonely(void)
{
    vs_result res[2] = {-100, -100};
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = 2;
    d.timeout_s = 0.2;
    vs_launch_ex(&d, p2p_lonely_rank, res);
    VT_CHECK(res[0] == VS_ERR_TIMEOUT, "lonely send got %s", vs_result_string(res[0]));
}

/* ---- vs_comm_abort wakes a rank blocked in a collective ---- */
static int abort_rank(vs_world* w, void* arg)
{
    vs_result* res = (vs_result*)arg;
    vs_comm* c = vs_world_comm(w);
    if (vs_world_rank(w) == 0) {
        res[0] = vs_barrier(c, NULL); // blocks: rank 1 never comes, aborts instead
    } else {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        vs_comm_abort(c);
        res[1] = vs_barrier(c, NULL);
    }
    return 0;
}

static void t_abort(void)
{
    vs_result res[2] = {-100, -100};
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = 2;
    d.timeout_s = 30;
    double t0 = now_s();
    vs_launch_ex(&d, abort_rank, res);
    VT_CHECK(res[0] == VS_ERR_ABORTED && res[1] == VS_ERR_ABORTED, "abort: %s %s", vs_result_string(res[0]),
             vs_result_string(res[1]));
    VT_CHECK(now_s() - t0 < 10, "abort took %g s", now_s() - t0);
}

/* ---- hooks: logger and allocator, timeout per world ---- */
typedef struct { int calls; char last[256]; int allocs, frees; } hook_state;

static void cap_log(vs_log_level lv, const char* msg, void* user)
{
    hook_state* h = (hook_state*)user;
    if (lv == VS_LOG_INFO) {
        __atomic_add_fetch(&h->calls, 1, __ATOMIC_SEQ_CST);
        if (strstr(msg, "[rank 1]")) snprintf(h->last, sizeof h->last, "%s", msg);
    }
}
static void* cnt_alloc(size_t n, void* user)
{
    __atomic_add_fetch(&((hook_state*)user)->allocs, 1, __ATOMIC_SEQ_CST);
    return malloc(n);
}
static void cnt_free(void* p, void* user)
{
    __atomic_add_fetch(&((hook_state*)user)->frees, 1, __ATOMIC_SEQ_CST);
    free(p);
}

static int hooks_rank(vs_world* w, void* arg)
{
    (void)arg;
    VT_CHECK(fabs(vs_world_timeout(w) - 12.5) < 1e-9, "timeout %g", vs_world_timeout(w));
    vs_log(w, VS_LOG_INFO, "hello %d", 42);
    vs_log(w, VS_LOG_DEBUG, "filtered");
    void* p = vs_alloc(w, 100);
    VT_CHECK(p != NULL, "alloc");
    vs_free(w, p);
    return 0;
}

static void t_hooks(void)
{
    hook_state h;
    memset(&h, 0, sizeof h);
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = 2;
    d.timeout_s = 12.5;
    d.logger.fn = cap_log;
    d.logger.user = &h;
    d.log_level = VS_LOG_INFO;
    d.allocator.alloc = cnt_alloc;
    d.allocator.free = cnt_free;
    d.allocator.user = &h;
    VT_OK(vs_launch_ex(&d, hooks_rank, NULL));
    VT_CHECK(h.calls == 2, "logger called %d times", h.calls);
    VT_CHECK(strstr(h.last, "hello 42") != NULL, "log line '%s'", h.last);
    // the 2 vs_alloc calls and every allocation of the library itself (test_alloc
    // checks that none bypasses the hooks), each freed
    VT_CHECK(h.allocs > 2 && h.allocs == h.frees, "allocator %d/%d", h.allocs, h.frees);
}

static int ret7_rank(vs_world* w, void* arg)
{
    (void)arg;
    return vs_world_rank(w) == 2 ? 7 : 0;
}

int main(void)
{
    VT_CASE("errors/results_and_version", t_results());
    VT_CASE("errors/dtypes_and_half_conversions", t_dtypes());
    VT_CASE("errors/bad_arguments", t_bad_args());
    VT_CASE("errors/mismatched_collectives", VT_OK(vs_launch(4, mismatch_rank, NULL)));
    VT_CASE("errors/rank_failure_reported", {
        vs_result r = vs_launch(4, ret7_rank, NULL);
        VT_CHECK(r == 7 && strstr(vs_last_error(), "rank 2"), "launch gave %d: %s", r, vs_last_error());
    });
    VT_CASE("errors/timeout_collective", t_timeout_collective());
    VT_CASE("errors/timeout_p2p_matched", t_timeout_p2p());
    VT_CASE("errors/timeout_p2p_no_receiver", t_timeout_p2p_lonely());
    VT_CASE("errors/abort", t_abort());
    VT_CASE("errors/hooks", t_hooks());
    return vt_summary();
}

#else /* VESCALE_MPI: the timeout path with ranks as MPI processes */

int main(void)
{
    vs_world* w = NULL;
    vs_world_desc wd;
    memset(&wd, 0, sizeof wd);
    wd.transport = VS_TRANSPORT_MPI;
    wd.timeout_s = 0.5;
    if (vs_world_init(&wd, &w)) {
        printf("not ok errors/mpi/init: %s\n", vs_last_error());
        return 1;
    }
    int me = vs_world_rank(w), n = vs_world_size(w);
    if (me == 0) vt_begin("errors/mpi/timeout_collective");
    float x[4] = {1, 2, 3, 4};
    int bad = 0;
    if (n >= 2) {
        vs_comm* c = vs_world_comm(w);
        if (me != n - 1) {
            double t0 = now_s();
            vs_result r = vs_all_reduce(c, x, x, 4, VS_F32, VS_OP_SUM, NULL);
            double el = now_s() - t0;
            if (r != VS_ERR_TIMEOUT || el < 0.45 || el > 10) {
                fprintf(stderr, "rank %d: got %s after %g s\n", me, vs_result_string(r), el);
                bad = 1;
            }
            if (vs_barrier(c, NULL) != VS_ERR_ABORTED) bad = 1;
        } else {
            // arrive long after the others gave up, so their requests can finish
            struct timespec ts = {1, 0};
            nanosleep(&ts, NULL);
            MPI_Request rq;
            MPI_Iallreduce(MPI_IN_PLACE, x, 4, MPI_FLOAT, MPI_SUM, vs_world_comm(w)->mc, &rq);
            MPI_Wait(&rq, MPI_STATUS_IGNORE);
        }
        // the dead communicator is not used again; the job ends cleanly on MPI_COMM_WORLD
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (me == 0) {
        VT_CHECK(any == 0, "a rank saw the wrong timeout behaviour");
        vt_end("errors/mpi/timeout_collective");
    }
    vs_world_free(w);
    return me == 0 ? vt_summary() : 0;
}
#endif
