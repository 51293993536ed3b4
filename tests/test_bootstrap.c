/* test_bootstrap.c - launcher environments (torchrun, SLURM, Open MPI), their bad
   values, and the TCP rendezvous that hands out the NCCL unique id without MPI
   (payload delivered to every rank; timeouts when a rank or the server is missing). */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vs_test.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char* const all_vars[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                                       "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK",
                                       "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"};

static void clear_env(void)
{
    for (size_t i = 0; i < sizeof all_vars / sizeof all_vars[0]; i++) unsetenv(all_vars[i]);
}

static void t_env(void)
{
    vs_bootstrap_info bi;
    clear_env();
    VT_OK(vs_bootstrap_from_env(&bi));
    VT_CHECK(bi.world_size == 1 && bi.rank == 0 && !strcmp(bi.source, "none"), "empty env: %s", bi.source);
    VT_CHECK(!strcmp(bi.master_addr, "127.0.0.1") && bi.master_port == 29500, "defaults %s:%d", bi.master_addr,
             bi.master_port);

    setenv("RANK", "5", 1);
    setenv("WORLD_SIZE", "8", 1);
    setenv("LOCAL_RANK", "1", 1);
    setenv("MASTER_ADDR", "node7", 1);
    setenv("MASTER_PORT", "1234", 1);
    setenv("SLURM_PROCID", "2", 1); // torchrun's variables win over SLURM's
    setenv("SLURM_NTASKS", "4", 1);
    VT_OK(vs_bootstrap_from_env(&bi));
    VT_CHECK(bi.rank == 5 && bi.world_size == 8 && bi.local_rank == 1 && !strcmp(bi.source, "torchrun"),
             "torchrun: %d/%d/%d %s", bi.rank, bi.world_size, bi.local_rank, bi.source);
    VT_CHECK(!strcmp(bi.master_addr, "node7") && bi.master_port == 1234, "master %s:%d", bi.master_addr,
             bi.master_port);

    clear_env();
    setenv("SLURM_PROCID", "3", 1);
    setenv("SLURM_NTASKS", "4", 1);
    setenv("SLURM_LOCALID", "3", 1);
    VT_OK(vs_bootstrap_from_env(&bi));
    VT_CHECK(bi.rank == 3 && bi.world_size == 4 && bi.local_rank == 3 && !strcmp(bi.source, "slurm"), "slurm");

    clear_env();
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
    VT_OK(vs_bootstrap_from_env(&bi));
    VT_CHECK(bi.rank == 1 && bi.world_size == 2 && bi.local_rank == 0 && !strcmp(bi.source, "openmpi"), "ompi");

    struct { const char* var; const char* val; const char* needle; } bad[] = {
        {"OMPI_COMM_WORLD_RANK", "2", "out of range"},
        {"OMPI_COMM_WORLD_RANK", "x1", "x1"},
        {"OMPI_COMM_WORLD_SIZE", "0", "OMPI_COMM_WORLD_SIZE=0"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "-1", "OMPI_COMM_WORLD_LOCAL_RANK=-1"},
        {"MASTER_PORT", "70000", "MASTER_PORT=70000"},
        {"MASTER_PORT", "12ab", "12ab"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        clear_env();
        setenv("OMPI_COMM_WORLD_RANK", "1", 1);
        setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
        setenv(bad[i].var, bad[i].val, 1);
        vs_result r = vs_bootstrap_from_env(&bi);
        VT_CHECK(r == VS_ERR_INVALID, "%s=%s gave %s", bad[i].var, bad[i].val, vs_result_string(r));
        VT_CHECK(strstr(vs_last_error(), bad[i].needle) != NULL, "message '%s' lacks '%s'", vs_last_error(),
                 bad[i].needle);
    }
    clear_env();
    setenv("RANK", "0", 1);
    VT_CHECK(vs_bootstrap_from_env(&bi) == VS_ERR_INVALID && strstr(vs_last_error(), "WORLD_SIZE"),
             "RANK without WORLD_SIZE: %s", vs_last_error());
    clear_env();
    VT_CHECK(vs_bootstrap_from_env(NULL) == VS_ERR_NULL, "NULL out");
}

/* ---- TCP rendezvous on loopback ---- */
typedef struct {
    int port, size, rank;
    unsigned char data[128];
    vs_result res;
    double timeout;
    const char* addr;
} rdv_arg;

static void* rdv_thread(void* p)
{
    rdv_arg* a = (rdv_arg*)p;
    a->res = _vs_tcp_bcast(a->addr, a->port, a->rank, a->size, a->data, sizeof a->data, a->timeout);
    return NULL;
}

static int test_port(int k) { return 20000 + (int)(getpid() % 20000) + k * 7; }

static void t_rendezvous(void)
{
    enum { N = 5 };
    rdv_arg a[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        memset(&a[i], 0, sizeof a[i]);
        a[i].port = test_port(0);
        a[i].size = N;
        a[i].rank = i;
        a[i].timeout = 20;
        a[i].addr = "127.0.0.1";
        if (i == 0)
            for (int k = 0; k < 128; k++) a[i].data[k] = (unsigned char)(k * 31 + 7);
    }
    // clients first: they must retry until the server is up
    for (int i = N - 1; i >= 0; i--) {
        pthread_create(&th[i], NULL, rdv_thread, &a[i]);
        if (i == 1) _vs_sleep_us(100000);
    }
    for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < N; i++) {
        VT_CHECK(a[i].res == VS_OK, "rank %d: %s", i, vs_result_string(a[i].res));
        VT_CHECK(memcmp(a[i].data, a[0].data, 128) == 0, "rank %d got other bytes", i);
    }
    VT_CHECK(a[0].data[5] == (unsigned char)(5 * 31 + 7), "payload");
}

static void t_rendezvous_timeouts(void)
{
    // server waits for 2 clients, only 1 comes
    rdv_arg s, c;
    memset(&s, 0, sizeof s);
    memset(&c, 0, sizeof c);
    s.port = c.port = test_port(1);
    s.size = c.size = 3;
    c.rank = 1;
    s.timeout = 0.5;
    c.timeout = 5;
    s.addr = c.addr = "127.0.0.1";
    pthread_t ts, tc;
    pthread_create(&ts, NULL, rdv_thread, &s);
    pthread_create(&tc, NULL, rdv_thread, &c);
    pthread_join(ts, NULL);
    pthread_join(tc, NULL);
    VT_CHECK(s.res == VS_ERR_TIMEOUT, "server got %s", vs_result_string(s.res));
    VT_CHECK(c.res == VS_OK, "the client that came got %s", vs_result_string(c.res));
    // a client with no server
    memset(&c, 0, sizeof c);
    c.port = test_port(2);
    c.size = 2;
    c.rank = 1;
    c.timeout = 0.3;
    c.addr = "127.0.0.1";
    rdv_thread(&c);
    VT_CHECK(c.res == VS_ERR_TIMEOUT, "lonely client got %s", vs_result_string(c.res));
    VT_CHECK(strstr(vs_last_error(), "127.0.0.1") != NULL, "message '%s'", vs_last_error());
    // bad address and port
    VT_CHECK(_vs_tcp_bcast("no.such.host.invalid", 1234, 1, 2, c.data, 4, 0.2) == VS_ERR_IO, "bad host");
    VT_CHECK(_vs_tcp_bcast("127.0.0.1", 0, 1, 2, c.data, 4, 0.2) == VS_ERR_INVALID, "port 0");
}

int main(void)
{
    VT_CASE("bootstrap/env", t_env());
    VT_CASE("bootstrap/tcp_rendezvous", t_rendezvous());
    VT_CASE("bootstrap/tcp_rendezvous_timeouts", t_rendezvous_timeouts());
    return vt_summary();
}
