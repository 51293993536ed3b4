/* test_rendezvous.c - the TCP rendezvous that hands out the NCCL unique id without
   MPI (_vs_tcp_bcast), under hostile and misconfigured peers. Ranks are threads on
   127.0.0.1 (an ephemeral port); no NCCL is needed.

   Strangers: one connects first and closes, one connects and says nothing, one sends
   garbage, one sends a short hello, one has the right magic but another job's key,
   three claim ranks out of range (size, 0, -1), one claims a rank that already
   joined, and one races a real rank for its claim. Every real rank must get the
   exact payload, no stranger may get it (they read nothing or an 8-byte rejection),
   rank 0 must log each rejection and keep serving, and a silent stranger must not
   delay the real ranks. The rule for duplicates: the first valid claim of a rank
   wins, later ones are rejected (a stranger who knows the run id is indistinguishable
   from the rank, which the race case shows). A missing rank makes rank 0 time out
   naming it, within the timeout. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vs_test.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { PAYLOAD = 128 };

/* A port that was free a moment ago: bind port 0 and ask which one we got. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr*)&sa, sizeof sa) == 0 && getsockname(fd, (struct sockaddr*)&sa, &sl) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

static int connect_port(int port)
{
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)port);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr*)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- the log rank 0's world writes (rejections) ---- */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_buf[16384];

static void capture(vs_log_level level, const char* msg, void* user)
{
    (void)level;
    (void)user;
    pthread_mutex_lock(&log_mu);
    size_t n = strlen(log_buf);
    snprintf(log_buf + n, sizeof log_buf - n, "%s\n", msg);
    pthread_mutex_unlock(&log_mu);
}

static int log_count(const char* needle)
{
    pthread_mutex_lock(&log_mu);
    int c = 0;
    for (const char* p = log_buf; (p = strstr(p, needle)) != NULL; p++) c++;
    pthread_mutex_unlock(&log_mu);
    return c;
}

/* ---- real ranks ---- */
typedef struct {
    int port, size, rank;
    size_t len;
    unsigned char data[PAYLOAD];
    vs_result res;
    char msg[512];
    double timeout, took;
} rank_arg;

static int server_fn(vs_world* w, void* p)
{
    rank_arg* a = (rank_arg*)p;
    double t0 = _vs_now();
    a->res = _vs_tcp_bcast_log(w, "127.0.0.1", a->port, 0, a->size, a->data, a->len, a->timeout);
    a->took = _vs_now() - t0;
    _vs_save_error(a->msg, sizeof a->msg);
    return 0;
}

/* Rank 0 inside a 1-rank vs_launch job, for a world whose logger we capture. */
static void* server_thread(void* p)
{
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = 1;
    d.logger.fn = capture;
    d.log_level = VS_LOG_DEBUG;
    vs_result r = vs_launch_ex(&d, server_fn, p);
    if (r) ((rank_arg*)p)->res = r;
    return NULL;
}

static void* rank_thread(void* p)
{
    rank_arg* a = (rank_arg*)p;
    double t0 = _vs_now();
    a->res = _vs_tcp_bcast("127.0.0.1", a->port, a->rank, a->size, a->data, a->len, a->timeout);
    a->took = _vs_now() - t0;
    _vs_save_error(a->msg, sizeof a->msg);
    return NULL;
}

static void rank_init(rank_arg* a, int port, int rank, int size, double timeout)
{
    memset(a, 0, sizeof *a);
    a->port = port;
    a->rank = rank;
    a->size = size;
    a->len = PAYLOAD;
    a->timeout = timeout;
    if (rank == 0)
        for (int k = 0; k < PAYLOAD; k++) a->data[k] = (unsigned char)(k * 37 + 11);
}

/* ---- strangers ---- */
typedef struct {
    int port;
    unsigned char out[64]; // sent after connecting
    size_t nout;
    int close_at_once;
    double hold;             // longest it waits for rank 0 to close
    unsigned char got[1024]; // what it received
    size_t ngot;
    int connected; // atomic
    double eof_at; // seconds from connect to rank 0's close (-1: it never closed)
} stranger;

static void* stranger_thread(void* p)
{
    stranger* s = (stranger*)p;
    int fd = -1;
    double t0 = _vs_now();
    while ((fd = connect_port(s->port)) < 0 && _vs_now() - t0 < 5) _vs_sleep_us(5000);
    if (fd < 0) return NULL;
    t0 = _vs_now();
    __atomic_store_n(&s->connected, 1, __ATOMIC_SEQ_CST);
    s->eof_at = -1;
    if (s->nout) (void)!send(fd, s->out, s->nout, MSG_NOSIGNAL);
    if (!s->close_at_once)
        while (_vs_now() - t0 < s->hold && s->ngot < sizeof s->got) {
            struct pollfd pf;
            pf.fd = fd;
            pf.events = POLLIN;
            pf.revents = 0;
            if (poll(&pf, 1, 50) <= 0) continue;
            ssize_t k = recv(fd, s->got + s->ngot, sizeof s->got - s->ngot, 0);
            if (k <= 0) {
                s->eof_at = _vs_now() - t0;
                break;
            }
            s->ngot += (size_t)k;
        }
    close(fd);
    return NULL;
}

static void put32(unsigned char* p, uint32_t v) { _vs_be_put32(p, v); }

/* A well-formed hello claiming `rank` of `size` with job key `key`. */
static void hello(stranger* s, uint32_t rank, uint32_t size, uint64_t key)
{
    put32(s->out, _VS_RDV_MAGIC);
    put32(s->out + 4, rank);
    put32(s->out + 8, size);
    put32(s->out + 12, PAYLOAD);
    put32(s->out + 16, (uint32_t)(key >> 32));
    put32(s->out + 20, (uint32_t)key);
    s->nout = 24;
}

static void stranger_init(stranger* s, int port, double hold)
{
    memset(s, 0, sizeof *s);
    s->port = port;
    s->hold = hold;
}

/* A stranger got nothing, or only a rejection with `want` (0: any) as the reason. */
static void check_no_payload(const stranger* s, const char* who, uint32_t want)
{
    VT_CHECK(s->ngot == 0 || s->ngot == 8, "%s read %zu bytes", who, s->ngot);
    if (s->ngot == 8) {
        uint32_t magic = _vs_be_get32(s->got), status = _vs_be_get32(s->got + 4);
        VT_CHECK(magic == _VS_RDV_ANSWER && status != _VS_RDV_ACCEPTED, "%s was answered %08x %u", who, magic, status);
        VT_CHECK(!want || status == want, "%s rejected for %u, expected %u", who, status, want);
    }
    VT_CHECK(want == 0 || s->ngot == 8, "%s got no rejection (%zu bytes)", who, s->ngot);
}

static void t_hostile(void)
{
    enum { N = 5 };
    const double T = 20;
    setenv("VESCALE_RUN_ID", "test-rendezvous-job-1", 1);
    log_buf[0] = 0;
    int port = free_port();
    VT_CHECK(port > 0, "no free port");
    uint64_t key = _vs_rdv_key(port, N, NULL);
    // another job's key, computed the real way (before any thread reads the environment)
    setenv("VESCALE_RUN_ID", "test-rendezvous-job-2", 1);
    uint64_t other_key = _vs_rdv_key(port, N, NULL);
    setenv("VESCALE_RUN_ID", "test-rendezvous-job-1", 1);
    double t0 = _vs_now();
    rank_arg a[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) rank_init(&a[i], port, i, N, T);
    pthread_create(&th[0], NULL, server_thread, &a[0]);

    // 1. the very first connection closes at once (it used to end rank 0's loop)
    stranger first;
    stranger_init(&first, port, 0);
    first.close_at_once = 1;
    stranger_thread(&first);
    VT_CHECK(first.connected, "rank 0 never listened");

    // 2. a silent stranger, connected before any real rank
    stranger silent;
    stranger_init(&silent, port, T);
    pthread_t ts;
    pthread_create(&ts, NULL, stranger_thread, &silent);
    while (!__atomic_load_n(&silent.connected, __ATOMIC_SEQ_CST) && _vs_now() - t0 < 5) _vs_sleep_us(1000);
    _vs_sleep_us(50000);

    // 3. garbage, a short hello, another job's key, ranks out of range: all at once,
    //    beside real ranks 1 and 2
    enum { NS = 7 };
    stranger bad[NS];
    const char* bad_name[NS] = {"garbage", "short hello", "wrong key", "rank = size", "rank 0", "rank -1",
                                "wrong key, right everything else"};
    uint32_t bad_want[NS] = {0, 0, _VS_RDV_BAD_KEY, _VS_RDV_BAD_RANK, _VS_RDV_BAD_RANK, _VS_RDV_BAD_RANK,
                             _VS_RDV_BAD_KEY};
    for (int i = 0; i < NS; i++) stranger_init(&bad[i], port, 10);
    memcpy(bad[0].out, "GET / HTTP/1.0\r\nHost: x\r\n\r\n", 27);
    bad[0].nout = 27;
    hello(&bad[1], 1, N, key);
    bad[1].nout = 10;
    bad[1].close_at_once = 1;
    hello(&bad[2], 1, N, key ^ 0x5a5a5a5a00000001ull);
    hello(&bad[3], N, N, key);
    hello(&bad[4], 0, N, key);
    hello(&bad[5], 0xffffffffu, N, key);
    hello(&bad[6], 2, N, other_key);
    pthread_t tb[NS];
    for (int i = 0; i < NS; i++) pthread_create(&tb[i], NULL, stranger_thread, &bad[i]);
    for (int i = 1; i <= 2; i++) pthread_create(&th[i], NULL, rank_thread, &a[i]);
    for (int i = 1; i <= 2; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < NS; i++) pthread_join(tb[i], NULL);
    for (int i = 1; i <= 2; i++) {
        VT_CHECK(a[i].res == VS_OK, "rank %d: %s %s", i, vs_result_string(a[i].res), a[i].msg);
        // the silent stranger holds its slot for 5 s; real ranks must not wait for it
        VT_CHECK(a[i].took < 2.0, "rank %d took %.2f s beside a silent stranger", i, a[i].took);
    }
    for (int i = 0; i < NS; i++) check_no_payload(&bad[i], bad_name[i], bad_want[i]);

    // 4. a late duplicate of rank 1, with the right key: rejected (first claim wins)
    stranger dup;
    stranger_init(&dup, port, 10);
    hello(&dup, 1, N, key);
    stranger_thread(&dup);
    check_no_payload(&dup, "duplicate of rank 1", _VS_RDV_DUP_RANK);

    // 5. misconfigured real ranks fail at once with the reason: another world size
    //    (so another key) and another payload length
    rank_arg wrong_size, wrong_len;
    rank_init(&wrong_size, port, 3, N + 1, T);
    rank_init(&wrong_len, port, 3, N, T);
    wrong_len.len = PAYLOAD / 2;
    rank_thread(&wrong_size);
    rank_thread(&wrong_len);
    VT_CHECK(wrong_size.res == VS_ERR_MISMATCH && strstr(wrong_size.msg, "job key differs") && wrong_size.took < 2,
             "size %d against %d: %s %s (%.2f s)", N + 1, N, vs_result_string(wrong_size.res), wrong_size.msg,
             wrong_size.took);
    VT_CHECK(wrong_len.res == VS_ERR_MISMATCH && strstr(wrong_len.msg, "payload length differs") &&
                 wrong_len.took < 2,
             "short payload: %s %s (%.2f s)", vs_result_string(wrong_len.res), wrong_len.msg, wrong_len.took);

    // 6. a stranger with the right key races real rank 3: exactly one wins
    stranger racer;
    stranger_init(&racer, port, 10);
    hello(&racer, 3, N, key);
    pthread_t tr;
    pthread_create(&tr, NULL, stranger_thread, &racer);
    pthread_create(&th[3], NULL, rank_thread, &a[3]);
    pthread_join(tr, NULL);
    pthread_join(th[3], NULL);
    int racer_won = racer.ngot == 8 + PAYLOAD && memcmp(racer.got + 8, a[0].data, PAYLOAD) == 0;
    if (racer_won) {
        VT_CHECK(a[3].res == VS_ERR_MISMATCH && strstr(a[3].msg, "already joined"), "rank 3 lost the race: %s %s",
                 vs_result_string(a[3].res), a[3].msg);
        memcpy(a[3].data, a[0].data, PAYLOAD); // for the check below: its slot was taken
    } else {
        VT_CHECK(a[3].res == VS_OK, "rank 3 won the race: %s %s", vs_result_string(a[3].res), a[3].msg);
        check_no_payload(&racer, "racer for rank 3", _VS_RDV_DUP_RANK);
    }

    // 7. the last rank
    pthread_create(&th[4], NULL, rank_thread, &a[4]);
    pthread_join(th[4], NULL);
    pthread_join(th[0], NULL);
    pthread_join(ts, NULL);
    double took = _vs_now() - t0;
    VT_CHECK(a[0].res == VS_OK, "rank 0: %s %s", vs_result_string(a[0].res), a[0].msg);
    for (int i = 1; i < N; i++) {
        VT_CHECK(a[i].res == VS_OK || (i == 3 && racer_won), "rank %d: %s", i, vs_result_string(a[i].res));
        VT_CHECK(memcmp(a[i].data, a[0].data, PAYLOAD) == 0, "rank %d got other bytes", i);
    }
    check_no_payload(&silent, "silent", 0);
    VT_CHECK(silent.eof_at >= 0, "rank 0 never closed the silent stranger");
    VT_CHECK(took < T, "the whole job took %.2f s, timeout %g", took, T);

    // each rejection is logged by rank 0's world
    struct { const char* needle; int min; } logged[] = {
        {"closed after 0 of 24 hello bytes", 1}, // the first one
        {"wrong magic 0x47455420", 1},           // "GET "
        {"closed after 10 of 24 hello bytes", 1},
        {"job key differs", 3}, // two strangers, the rank of another world size
        {"rank out of range", 3},
        {"rank already joined", 2}, // the late duplicate and the race's loser
        {"payload length differs", 1},
        {"rendezvous: rejected peer 127.0.0.1:", 12},
    };
    for (size_t i = 0; i < sizeof logged / sizeof logged[0]; i++)
        VT_CHECK(log_count(logged[i].needle) >= logged[i].min, "log has %d of '%s' (want >= %d):\n%s",
                 log_count(logged[i].needle), logged[i].needle, logged[i].min, log_buf);
    printf("    %d rejections logged, rank 3 race won by %s, job took %.2f s\n",
           log_count("rejected peer"), racer_won ? "the stranger" : "the rank", took);
    unsetenv("VESCALE_RUN_ID");
}

/* One rank never comes, a silent stranger sits on a slot: the stranger is dropped
   after its hello deadline (5 s), and rank 0 times out naming rank 2. */
static void t_missing_rank(void)
{
    enum { N = 4 };
    const double T = 6.5;
    log_buf[0] = 0;
    int port = free_port();
    rank_arg a[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) rank_init(&a[i], port, i, N, i ? 10 : T);
    double t0 = _vs_now();
    pthread_create(&th[0], NULL, server_thread, &a[0]);
    stranger silent;
    stranger_init(&silent, port, 10);
    pthread_t ts;
    pthread_create(&ts, NULL, stranger_thread, &silent);
    pthread_create(&th[1], NULL, rank_thread, &a[1]);
    pthread_create(&th[3], NULL, rank_thread, &a[3]);
    pthread_join(th[0], NULL);
    double took = _vs_now() - t0;
    pthread_join(th[1], NULL);
    pthread_join(th[3], NULL);
    pthread_join(ts, NULL);
    VT_CHECK(a[0].res == VS_ERR_TIMEOUT, "rank 0: %s", vs_result_string(a[0].res));
    VT_CHECK(strstr(a[0].msg, "rank(s) 2 never joined") && strstr(a[0].msg, "3 of 4 ranks in"), "message: %s",
             a[0].msg);
    VT_CHECK(took >= T - 0.05 && took < T + 1.0, "rank 0 gave up after %.2f s, timeout %g", took, T);
    VT_CHECK(a[1].res == VS_OK && a[3].res == VS_OK && !memcmp(a[1].data, a[0].data, PAYLOAD) &&
                 !memcmp(a[3].data, a[0].data, PAYLOAD),
             "ranks that came: %s %s", vs_result_string(a[1].res), vs_result_string(a[3].res));
    VT_CHECK(silent.ngot == 0 && silent.eof_at > 4.5 && silent.eof_at < T - 0.3,
             "silent stranger: %zu bytes, closed after %.2f s (hello deadline %g s)", silent.ngot, silent.eof_at,
             _VS_RDV_HELLO_S);
    // the silent peer is rejected once (the line ends there; the timeout error, logged
    // too, quotes it inside parentheses)
    VT_CHECK(log_count("sent 0 of 24 hello bytes within 5 s\n") == 1, "log:\n%s", log_buf);
    printf("    timeout after %.2f s (limit %g): %s\n", took, T, a[0].msg);

    // several missing ranks are listed as ranges
    port = free_port();
    rank_arg b[6];
    for (int i = 0; i < 6; i++) rank_init(&b[i], port, i, 6, i ? 5 : 0.5);
    pthread_create(&th[0], NULL, server_thread, &b[0]);
    pthread_create(&th[1], NULL, rank_thread, &b[1]);
    pthread_create(&th[2], NULL, rank_thread, &b[4]);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    VT_CHECK(b[0].res == VS_ERR_TIMEOUT && strstr(b[0].msg, "rank(s) 2-3,5 never joined"), "%s: %s",
             vs_result_string(b[0].res), b[0].msg);
    VT_CHECK(b[0].took < 1.5, "timeout 0.5 s took %.2f s", b[0].took);
}

/* A listener that is not rank 0: the rank retries until its deadline, then says so. */
static int fake_stop; // atomic
static void* fake_listener(void* p)
{
    int lfd = *(int*)p;
    while (!__atomic_load_n(&fake_stop, __ATOMIC_SEQ_CST)) {
        struct pollfd pf;
        pf.fd = lfd;
        pf.events = POLLIN;
        pf.revents = 0;
        if (poll(&pf, 1, 20) <= 0) continue;
        int c = accept(lfd, NULL, NULL);
        if (c < 0) continue;
        unsigned char buf[24];
        (void)!recv(c, buf, sizeof buf, 0);
        (void)!send(c, "HTTP/1.0 400 Bad\r\n\r\n", 20, MSG_NOSIGNAL);
        close(c);
    }
    return NULL;
}

static void t_impostor_rank0(void)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    VT_CHECK(lfd >= 0 && bind(lfd, (struct sockaddr*)&sa, sizeof sa) == 0 && listen(lfd, 8) == 0 &&
                 getsockname(lfd, (struct sockaddr*)&sa, &sl) == 0,
             "fake listener");
    __atomic_store_n(&fake_stop, 0, __ATOMIC_SEQ_CST);
    pthread_t tf;
    pthread_create(&tf, NULL, fake_listener, &lfd);
    rank_arg c;
    rank_init(&c, ntohs(sa.sin_port), 1, 2, 0.5);
    rank_thread(&c);
    __atomic_store_n(&fake_stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(tf, NULL);
    close(lfd);
    VT_CHECK(c.res == VS_ERR_TIMEOUT && strstr(c.msg, "not a vescale rank 0") && c.took < 1.5, "%s: %s (%.2f s)",
             vs_result_string(c.res), c.msg, c.took);
    for (int k = 0; k < PAYLOAD; k++) VT_CHECK(c.data[k] == 0, "byte %d written", k);
}

/* The job key: run id first, torchrun's next ("none" is its default: ignored), else
   the port; the world size always. */
static void t_key(void)
{
    const char* from = NULL;
    unsetenv("VESCALE_RUN_ID");
    unsetenv("TORCHELASTIC_RUN_ID");
    uint64_t k_plain = _vs_rdv_key(1234, 4, &from);
    VT_CHECK(strstr(from, "no run id") != NULL, "from %s", from);
    VT_CHECK(_vs_rdv_key(1235, 4, NULL) != k_plain && _vs_rdv_key(1234, 5, NULL) != k_plain, "port and size count");
    setenv("TORCHELASTIC_RUN_ID", "none", 1);
    VT_CHECK(_vs_rdv_key(1234, 4, NULL) == k_plain, "TORCHELASTIC_RUN_ID=none is no run id");
    setenv("TORCHELASTIC_RUN_ID", "job-a", 1);
    uint64_t k_te = _vs_rdv_key(1234, 4, &from);
    VT_CHECK(k_te != k_plain && !strcmp(from, "TORCHELASTIC_RUN_ID"), "torchrun id: %s", from);
    VT_CHECK(_vs_rdv_key(9999, 4, NULL) == k_te, "with a run id the port does not count");
    VT_CHECK(_vs_rdv_key(1234, 8, NULL) != k_te, "the size does");
    setenv("VESCALE_RUN_ID", "job-a", 1);
    uint64_t k_vs = _vs_rdv_key(1234, 4, &from);
    VT_CHECK(!strcmp(from, "VESCALE_RUN_ID") && k_vs == k_te, "VESCALE_RUN_ID wins (same id, same key): %s", from);
    setenv("VESCALE_RUN_ID", "job-b", 1);
    VT_CHECK(_vs_rdv_key(1234, 4, NULL) != k_te, "another id, another key");
    unsetenv("VESCALE_RUN_ID");
    unsetenv("TORCHELASTIC_RUN_ID");
    // FNV-1a 64 reference values ("" and "a")
    VT_CHECK(_vs_fnv1a64(_VS_FNV64_BASIS, "", 0) == 0xcbf29ce484222325ull, "fnv empty");
    VT_CHECK(_vs_fnv1a64(_VS_FNV64_BASIS, "a", 1) == 0xaf63dc4c8601ec8cull, "fnv 'a'");
}

/* No deadline (infinite or 0 timeout) works, and bad arguments are errors. */
static void t_no_deadline_and_args(void)
{
    enum { N = 3 };
    int port = free_port();
    rank_arg a[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) rank_init(&a[i], port, i, N, i == 1 ? 0 : (double)INFINITY);
    for (int i = 0; i < N; i++) pthread_create(&th[i], NULL, i ? rank_thread : server_thread, &a[i]);
    for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < N; i++) {
        VT_CHECK(a[i].res == VS_OK, "rank %d: %s %s", i, vs_result_string(a[i].res), a[i].msg);
        VT_CHECK(!memcmp(a[i].data, a[0].data, PAYLOAD), "rank %d payload", i);
    }
    unsigned char d[4];
    VT_CHECK(_vs_tcp_bcast("127.0.0.1", port, 2, 2, d, 4, 1) == VS_ERR_INVALID, "rank 2 of 2");
    VT_CHECK(_vs_tcp_bcast("127.0.0.1", port, -1, 2, d, 4, 1) == VS_ERR_INVALID, "rank -1");
    VT_CHECK(_vs_tcp_bcast("127.0.0.1", port, 1, 2, NULL, 4, 1) == VS_ERR_INVALID, "NULL data");
    VT_CHECK(_vs_tcp_bcast("127.0.0.1", port, 1, 2, d, 4, (double)NAN) == VS_ERR_INVALID, "NaN timeout");
    VT_CHECK(_vs_tcp_bcast("127.0.0.1", port, 0, 1, d, 4, 1) == VS_OK, "a world of one needs nobody");
}

int main(void)
{
    VT_CASE("rendezvous/hostile_peers", t_hostile());
    VT_CASE("rendezvous/missing_rank_timeout", t_missing_rank());
    VT_CASE("rendezvous/impostor_rank0", t_impostor_rank0());
    VT_CASE("rendezvous/job_key", t_key());
    VT_CASE("rendezvous/no_deadline_and_args", t_no_deadline_and_args());
    return vt_summary();
}
