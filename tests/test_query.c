/* test_query.c - descs with their defaults resolved in one place and read back
   (issue 9, point 3): vs_world_query_desc for ranks of vs_launch, vs_mesh_query_desc,
   and a queried desc fed back in gives the same object. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vs_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void quiet(vs_log_level lv, const char* msg, void* user)
{
    (void)lv, (void)msg, (void)user;
}
static void* my_alloc(size_t n, void* user)
{
    (void)user;
    return malloc(n ? n : 1);
}
static void my_free(void* p, void* user)
{
    (void)user;
    free(p);
}

typedef struct {
    double want_timeout;
    vs_log_level want_level;
} expect;

static int world_rank(vs_world* w, void* arg)
{
    const expect* e = (const expect*)arg;
    vs_world_desc d;
    memset(&d, 0x5a, sizeof d); // every field must be written
    VT_OK(vs_world_query_desc(w, &d));
    VT_CHECK(d.transport == VS_TRANSPORT_THREADS, "transport %d", (int)d.transport);
    VT_CHECK(d.world_size == 4 && d.rank == vs_world_rank(w) && d.local_rank == vs_world_rank(w) % 2,
             "numbers %d %d %d", d.world_size, d.rank, d.local_rank);
    VT_CHECK(d.timeout_s == e->want_timeout || (isinf(e->want_timeout) && isinf(d.timeout_s)), "timeout %g, want %g",
             d.timeout_s, e->want_timeout);
    VT_CHECK(d.log_level == e->want_level, "log level %d, want %d", (int)d.log_level, (int)e->want_level);
    VT_CHECK(d.logger.fn == quiet && d.allocator.alloc == my_alloc && d.allocator.free == my_free,
             "hooks not reported");
    VT_CHECK(d.master_addr != NULL, "master_addr NULL");
    // the mesh: defaults resolved, and the queried desc builds the same mesh
    vs_mesh* m = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {2, 2}}, &m));
    vs_mesh_desc md;
    memset(&md, 0x5a, sizeof md);
    VT_OK(vs_mesh_query_desc(m, &md));
    VT_CHECK(md.ndims == 2 && md.shape[0] == 2 && md.shape[1] == 2 && md.shape[2] == 0, "shape");
    VT_CHECK(md.dim_names[0] && !strcmp(md.dim_names[0], "DP") && md.dim_names[1] && !strcmp(md.dim_names[1], "TP") &&
                 md.dim_names[2] == NULL,
             "dim names");
    VT_CHECK(md.comm == vs_world_comm(w), "comm");
    vs_mesh* m2 = NULL;
    VT_OK(vs_mesh_init(w, &md, &m2));
    VT_CHECK(m2 && vs_mesh_ndims(m2) == 2 && vs_mesh_size(m2, "TP") == 2 && vs_mesh_rank(m2) == vs_mesh_rank(m),
             "the queried desc builds the same mesh");
    // submeshes report themselves too
    vs_mesh* tp = NULL;
    VT_OK(vs_mesh_submesh(m, "TP", &tp));
    VT_OK(vs_mesh_query_desc(tp, &md));
    VT_CHECK(md.ndims == 1 && md.shape[0] == 2 && !strcmp(md.dim_names[0], "TP") && md.comm == vs_mesh_comm(tp),
             "submesh desc");
    VT_CHECK(vs_mesh_query_desc(NULL, &md) == VS_ERR_NULL && vs_world_query_desc(w, NULL) == VS_ERR_NULL, "NULLs");
    VT_OK(vs_mesh_free(m2));
    VT_OK(vs_mesh_free(m));
    return 0;
}

static void run(double timeout_s, const char* env_timeout, const char* env_log, vs_log_level level, double want_timeout,
                vs_log_level want_level)
{
    if (env_timeout) setenv("VESCALE_TIMEOUT", env_timeout, 1);
    if (env_log) setenv("VESCALE_LOG", env_log, 1);
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = 4;
    d.ranks_per_node = 2;
    d.timeout_s = timeout_s;
    d.log_level = level;
    d.logger.fn = quiet;
    d.allocator.alloc = my_alloc;
    d.allocator.free = my_free;
    expect e = {want_timeout, want_level};
    VT_OK(vs_launch_ex(&d, world_rank, &e));
    unsetenv("VESCALE_TIMEOUT");
    unsetenv("VESCALE_LOG");
}

/* Debug modes as a world desc field (issue 33.8): a rank of vs_launch reads
   VESCALE_DEBUG's back as the modes' names; vs_world_init checks desc.debug
   first (the environment only when it is NULL). */
static int debug_rank(vs_world* w, void* arg)
{
    const char* want = (const char*)arg;
    vs_world_desc d;
    memset(&d, 0x5a, sizeof d);
    VT_OK(vs_world_query_desc(w, &d));
    VT_CHECK(d.debug && !strcmp(d.debug, want), "debug '%s', want '%s'", d.debug ? d.debug : "(null)", want);
    return 0;
}
static void debug_modes(void)
{
    setenv("VESCALE_DEBUG", " params , desync", 1);
    VT_OK(vs_launch(2, debug_rank, (void*)"desync,params"));
    unsetenv("VESCALE_DEBUG");
    VT_OK(vs_launch(2, debug_rank, (void*)""));
    vs_world* w = NULL;
    vs_result r = vs_world_init(&(vs_world_desc){.transport = VS_TRANSPORT_MPI, .debug = "desync,bogus"}, &w);
    VT_CHECK(r == VS_ERR_INVALID && w == NULL && strstr(vs_last_error(), "vs_world_init: debug") &&
                 strstr(vs_last_error(), "'bogus'"),
             "desc.debug bogus: %s: %s", vs_result_string(r), vs_last_error());
    /* thread ranks take them in vs_launch_desc.debug too (the environment the
       fallback); a bad one is the launch's error naming the field */
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = 2, ld.debug = "params";
    VT_OK(vs_launch_ex(&ld, debug_rank, (void*)"params"));
    ld.debug = "";
    setenv("VESCALE_DEBUG", "params", 1);
    VT_OK(vs_launch_ex(&ld, debug_rank, (void*)"")); // ("": none, over the environment)
    unsetenv("VESCALE_DEBUG");
    ld.debug = "params,bogus";
    VT_EXPECT_ERR(vs_launch_ex(&ld, debug_rank, (void*)""), VS_ERR_INVALID, "vs_launch: desc.debug", "'bogus'");
    setenv("VESCALE_DEBUG", "bogus", 1);
    r = vs_world_init(&(vs_world_desc){.transport = VS_TRANSPORT_MPI}, &w);
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "VESCALE_DEBUG") && strstr(vs_last_error(), "'bogus'"),
             "VESCALE_DEBUG=bogus: %s: %s", vs_result_string(r), vs_last_error());
    /* vs_launch too: a malformed value is an error naming the variable, not
       modes silently off (a new user's trainer without DDP saw VS_OK) */
    r = vs_launch(2, debug_rank, (void*)"");
    VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "VESCALE_DEBUG") && strstr(vs_last_error(), "'bogus'"),
             "vs_launch with VESCALE_DEBUG=bogus: %s: %s", vs_result_string(r), vs_last_error());
    r = vs_world_init(&(vs_world_desc){.transport = VS_TRANSPORT_MPI, .debug = "desync"}, &w); // (the desc wins)
    VT_CHECK(r != VS_ERR_INVALID, "desc.debug over VESCALE_DEBUG: %s: %s", vs_result_string(r), vs_last_error());
    if (r == VS_OK) vs_world_free(w);
    unsetenv("VESCALE_DEBUG");
}

/* vs_lighthouse_query_desc names itself and the one bad field (it said
   "vs_lighthouse_start: a negative or NaN limit (...)" listing all five) */
static void lighthouse_desc(void)
{
    vs_lighthouse_desc d, q;
    memset(&d, 0, sizeof d);
    d.port = 70000;
    VT_EXPECT_ERR(vs_lighthouse_query_desc(&d, &q), VS_ERR_INVALID, "vs_lighthouse_query_desc: desc.port 70000", NULL);
    d.port = 0, d.idle_s = -1;
    VT_EXPECT_ERR(vs_lighthouse_query_desc(&d, &q), VS_ERR_INVALID, "vs_lighthouse_query_desc: desc.idle_s -1", NULL);
    d.idle_s = 0, d.stall_s = NAN;
    VT_EXPECT_ERR(vs_lighthouse_query_desc(&d, &q), VS_ERR_INVALID, "vs_lighthouse_query_desc: desc.stall_s nan", NULL);
    d.stall_s = 0, d.max_keys = -2;
    VT_EXPECT_ERR(vs_lighthouse_query_desc(&d, &q), VS_ERR_INVALID, "vs_lighthouse_query_desc: desc.max_keys -2", NULL);
    d.max_keys = 0, d.max_conns = -1;
    vs_lighthouse* lh = NULL;
    VT_EXPECT_ERR(vs_lighthouse_start_desc(&d, &lh), VS_ERR_INVALID, "vs_lighthouse_start: desc.max_conns -1", NULL);
    VT_CHECK(!lh, "a refused start gave a lighthouse");
    d.max_conns = 0;
    VT_OK(vs_lighthouse_query_desc(&d, &q));
    VT_CHECK(q.idle_s == 60 && q.stall_s == 5 && q.expire_s == 600, "defaults: idle %g stall %g expire %g", q.idle_s,
             q.stall_s, q.expire_s);
}

int main(void)
{
    unsetenv("VESCALE_TIMEOUT");
    unsetenv("VESCALE_LOG");
    VT_CASE("query/defaults", run(0, NULL, NULL, VS_LOG_DEFAULT, 300.0, VS_LOG_WARN)); // (warn: issue 33)
    VT_CASE("query/from_the_environment", run(0, "inf", "warn", VS_LOG_DEFAULT, INFINITY, VS_LOG_WARN));
    VT_CASE("query/desc_wins", run(7.5, "inf", "warn", VS_LOG_ERROR, 7.5, VS_LOG_ERROR));
    VT_CASE("query/debug_modes", debug_modes());
    VT_CASE("query/lighthouse_desc", lighthouse_desc());
    return vt_summary();
}
