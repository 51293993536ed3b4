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

/* ---- the file rendezvous (_vs_file_bcast): the same exchange through a path ---- */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

typedef struct {
    char path[700];
    int rank, size;
    double timeout;
    unsigned char data[PAYLOAD];
    vs_result res;
    char msg[700];
} frank;

static void* frank_thread(void* p)
{
    frank* a = (frank*)p;
    a->res = _vs_file_bcast(NULL, a->path, a->rank, a->size, a->data, PAYLOAD, a->timeout);
    _vs_save_error(a->msg, sizeof a->msg);
    return NULL;
}

static void frank_init(frank* a, const char* path, int rank, int size, double timeout)
{
    memset(a, 0, sizeof *a);
    snprintf(a->path, sizeof a->path, "%s", path);
    a->rank = rank, a->size = size, a->timeout = timeout;
    for (int k = 0; k < PAYLOAD; k++) a->data[k] = rank == 0 ? (unsigned char)(k * 29 + 3) : 0xCC;
}

/* Runs ranks [lo, hi) of a in threads and joins them. */
static void frank_run(frank* a, int lo, int hi)
{
    pthread_t th[16];
    for (int i = lo; i < hi; i++) pthread_create(&th[i], NULL, frank_thread, &a[i]);
    for (int i = lo; i < hi; i++) pthread_join(th[i], NULL);
}

static int dir_entries(const char* dir)
{
    DIR* d = opendir(dir);
    int n = 0;
    for (struct dirent* e; d && (e = readdir(d));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d) closedir(d);
    return n;
}

static void put_file(const char* path, const void* b, size_t n)
{
    FILE* f = fopen(path, "wb");
    VT_CHECK(f && fwrite(b, 1, n, f) == n, "writing %s", path);
    if (f) fclose(f);
}

static int exists(const char* path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* An id file as rank 0 writes it, with any key, size and nonce; its length. */
static size_t id_file(unsigned char* b, int size, uint64_t key, uint64_t nonce, unsigned char fill)
{
    _vs_be_put32(b, _VS_FRDV_MAGIC);
    _vs_be_put32(b + 4, (uint32_t)size);
    _vs_be_put32(b + 8, PAYLOAD);
    _vs_be_put64(b + 12, key);
    _vs_be_put64(b + 20, nonce);
    memset(b + _VS_FRDV_HEAD, fill, PAYLOAD);
    size_t n = _VS_FRDV_HEAD + PAYLOAD + 8;
    _vs_be_put64(b + n - 8, _vs_fnv1a64(_VS_FNV64_BASIS, b, n - 8));
    return n;
}

static uint64_t file_key(int size) { return _vs_job_key("file", "", size, NULL); }

/* Every rank gets rank 0's payload, twice in one directory, and nothing is left. */
static void t_file_ok(const char* dir)
{
    enum { N = 4 };
    char path[512];
    snprintf(path, sizeof path, "%s/id", dir);
    for (int round = 0; round < 2; round++) {
        frank a[N];
        for (int i = 0; i < N; i++) frank_init(&a[i], path, i, N, 30);
        frank_run(a, 0, N);
        for (int i = 0; i < N; i++) {
            VT_CHECK(a[i].res == VS_OK, "round %d rank %d: %s %s", round, i, vs_result_string(a[i].res), a[i].msg);
            VT_CHECK(!memcmp(a[i].data, a[0].data, PAYLOAD), "round %d rank %d: not rank 0's payload", round, i);
        }
        VT_CHECK(dir_entries(dir) == 0, "round %d: %d files left in %s", round, dir_entries(dir), dir);
    }
    unsigned char d[4] = {0};
    VT_CHECK(_vs_file_bcast(NULL, path, 0, 1, d, 4, 1) == VS_OK && dir_entries(dir) == 0,
             "a world of one touches nothing");
}

/* An earlier run of the same job (same key) left its id file and a claim:
   ranks 1..3 read it and claim it before rank 0 starts; when rank 0 writes the
   new one they claim again, and all end with the new id. */
static void t_file_stale_same_job(const char* dir)
{
    enum { N = 4 };
    char path[512], cpath[600];
    snprintf(path, sizeof path, "%s/id", dir);
    unsigned char b[_VS_FRDV_HEAD + PAYLOAD + 8];
    put_file(path, b, id_file(b, N, file_key(N), 12345, 0xEE));
    frank a[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) frank_init(&a[i], path, i, N, 30);
    for (int i = 1; i < N; i++) pthread_create(&th[i], NULL, frank_thread, &a[i]);
    for (int i = 1; i < N; i++) { // each has claimed the stale file (bounded: the ranks' own deadline)
        snprintf(cpath, sizeof cpath, "%s.rank%d", path, i);
        for (double t0 = _vs_now(); !exists(cpath) && _vs_now() - t0 < 30;) _vs_sleep_us(1000);
        uint64_t nonce = 0, tok = 0;
        VT_CHECK(_vs_frdv_claim_read(cpath, i, N, file_key(N), &nonce, &tok) && nonce == 12345,
                 "rank %d claimed the earlier run's file (nonce %llu)", i, (unsigned long long)nonce);
    }
    pthread_create(&th[0], NULL, frank_thread, &a[0]);
    for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < N; i++) {
        VT_CHECK(a[i].res == VS_OK, "rank %d: %s %s", i, vs_result_string(a[i].res), a[i].msg);
        VT_CHECK(!memcmp(a[i].data, a[0].data, PAYLOAD), "rank %d kept the earlier run's id (0x%02x)", i, a[i].data[0]);
    }
    VT_CHECK(dir_entries(dir) == 0, "%d files left in %s", dir_entries(dir), dir);
}

/* Files of another job: never used; a reader waits past them to its deadline
   and names the file and why; rank 0 replaces them. */
static void t_file_other_job(const char* dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/id", dir);
    unsigned char b[_VS_FRDV_HEAD + PAYLOAD + 8];
    setenv("VESCALE_RUN_ID", "another-job", 1);
    uint64_t other = file_key(2);
    unsetenv("VESCALE_RUN_ID");
    struct {
        int size;
        uint64_t key;
        const char* needle;
    } cases[] = {{2, other, "another job (its key differs"}, {8, file_key(8), "a world of 8 ranks"}};
    for (int c = 0; c < 2; c++) {
        size_t n = id_file(b, cases[c].size, cases[c].key, 777, 0xEE);
        put_file(path, b, n);
        frank a[2];
        frank_init(&a[1], path, 1, 2, 0.3);
        frank_run(a, 1, 2);
        VT_CHECK(a[1].res == VS_ERR_TIMEOUT && strstr(a[1].msg, path) && strstr(a[1].msg, cases[c].needle),
                 "case %d: %s %s", c, vs_result_string(a[1].res), a[1].msg);
        VT_CHECK(a[1].data[0] == 0xCC, "case %d: the other job's id was taken", c);
        VT_CHECK(dir_entries(dir) == 1, "case %d: a reader left %d files (the other job's stays)", c, dir_entries(dir));
        for (int i = 0; i < 2; i++) frank_init(&a[i], path, i, 2, 30); // rank 0 replaces it
        frank_run(a, 0, 2);
        VT_CHECK(a[0].res == VS_OK && a[1].res == VS_OK && !memcmp(a[0].data, a[1].data, PAYLOAD),
                 "case %d: with rank 0: %s %s / %s %s", c, vs_result_string(a[0].res), a[0].msg,
                 vs_result_string(a[1].res), a[1].msg);
        VT_CHECK(dir_entries(dir) == 0, "case %d: %d files left", c, dir_entries(dir));
    }
}

/* Bad input: each an error naming the path, at once (no timeout), files kept
   that are not the rendezvous'. */
static void t_file_bad(const char* dir)
{
    char path[512], p2[600];
    snprintf(path, sizeof path, "%s/id", dir);
    frank a[3];
    /* garbage at the path: rank 0 refuses to replace it, a reader refuses it */
    put_file(path, "hello, world\n", 13);
    for (int i = 0; i < 2; i++) frank_init(&a[i], path, i, 2, 30);
    frank_run(a, 0, 2);
    for (int i = 0; i < 2; i++)
        VT_CHECK(a[i].res == VS_ERR_INVALID && strstr(a[i].msg, path) && strstr(a[i].msg, "not a vescale rendezvous file"),
                 "garbage, rank %d: %s %s", i, vs_result_string(a[i].res), a[i].msg);
    FILE* f = fopen(path, "rb");
    char back[32] = "";
    VT_CHECK(f && fread(back, 1, sizeof back, f) == 13 && !memcmp(back, "hello, world\n", 13), "the garbage was replaced");
    if (f) fclose(f);
    /* a rendezvous file cut short, and one with a byte changed: damaged */
    unsigned char b[_VS_FRDV_HEAD + PAYLOAD + 8];
    size_t n = id_file(b, 2, file_key(2), 5, 0x11);
    for (int k = 0; k < 2; k++) {
        if (k) b[40] ^= 1;
        put_file(path, b, k ? n : 20);
        frank_init(&a[1], path, 1, 2, 30);
        frank_run(a, 1, 2);
        VT_CHECK(a[1].res == VS_ERR_IO && strstr(a[1].msg, path) && strstr(a[1].msg, "truncated or damaged"),
                 "%s: %s %s", k ? "a changed byte" : "20 bytes", vs_result_string(a[1].res), a[1].msg);
    }
    unlink(path);
    /* a directory that does not exist, one that is a file, one nobody may write
       in (/sys: even root): every rank at once */
    snprintf(p2, sizeof p2, "%s/missing/id", dir);
    const char* paths[] = {p2, "/dev/null/id", "/sys/vescale_rendezvous_id"};
    for (int k = 0; k < 3; k++) {
        if (k == 2 && (!exists("/sys") || access("/sys", F_OK))) continue;
        for (int i = 0; i < 2; i++) frank_init(&a[i], paths[k], i, 2, 30);
        frank_run(a, 0, 2);
        for (int i = 0; i < 2; i++)
            VT_CHECK(a[i].res == VS_ERR_IO && strstr(a[i].msg, paths[k]) && strstr(a[i].msg, "cannot write in"),
                     "%s, rank %d: %s %s", paths[k], i, vs_result_string(a[i].res), a[i].msg);
    }
    if (geteuid() != 0) { // a directory without write permission (root writes anyway)
        snprintf(p2, sizeof p2, "%s/ro", dir);
        mkdir(p2, 0555);
        snprintf(p2, sizeof p2, "%s/ro/id", dir);
        frank_init(&a[1], p2, 1, 2, 30);
        frank_run(a, 1, 2);
        VT_CHECK(a[1].res == VS_ERR_IO && strstr(a[1].msg, p2), "read-only directory: %s", a[1].msg);
        snprintf(p2, sizeof p2, "%s/ro", dir);
        rmdir(p2);
    }
    /* a missing rank: rank 0 names it and the file; rank 1 ends at its deadline; nothing left */
    for (int i = 0; i < 3; i++) frank_init(&a[i], path, i, 3, 0.5);
    frank_run(a, 0, 2);
    VT_CHECK(a[0].res == VS_ERR_TIMEOUT && strstr(a[0].msg, "rank(s) 2 never claimed") && strstr(a[0].msg, path),
             "rank 0: %s %s", vs_result_string(a[0].res), a[0].msg);
    VT_CHECK(a[1].res == VS_ERR_TIMEOUT && strstr(a[1].msg, path) && strstr(a[1].msg, "rank 0 never took the claim"),
             "rank 1: %s %s", vs_result_string(a[1].res), a[1].msg);
    VT_CHECK(dir_entries(dir) == 0, "%d files left after the timeouts", dir_entries(dir));
    /* arguments */
    unsigned char d[4];
    char longp[1100];
    memset(longp, 'a', sizeof longp - 1);
    longp[sizeof longp - 1] = 0;
    VT_ERR(_vs_file_bcast(NULL, NULL, 0, 2, d, 4, 1), VS_ERR_INVALID, "no init file");
    VT_ERR(_vs_file_bcast(NULL, "", 0, 2, d, 4, 1), VS_ERR_INVALID, "no init file");
    VT_ERR(_vs_file_bcast(NULL, longp, 0, 2, d, 4, 1), VS_ERR_INVALID, "longer than 1000 bytes");
    VT_ERR(_vs_file_bcast(NULL, path, 2, 2, d, 4, 1), VS_ERR_INVALID, "rank 2 of 2");
    VT_ERR(_vs_file_bcast(NULL, path, 1, 2, NULL, 4, 1), VS_ERR_INVALID, "payload");
    VT_ERR(_vs_file_bcast(NULL, path, 1, 2, d, 4, (double)NAN), VS_ERR_INVALID, "NaN");
    VT_CHECK(dir_entries(dir) == 0, "bad arguments left files");
}

static void file_case(const char* name, void (*fn)(const char*))
{
    char dir[] = "/tmp/vs_rdv_file_XXXXXX";
    if (!vt_selected(name)) return;
    vt_begin(name);
    VT_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    unsetenv("VESCALE_RUN_ID");
    unsetenv("TORCHELASTIC_RUN_ID");
    fn(dir);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    VT_CHECK(system(cmd) == 0, "%s", cmd);
    vt_end(name);
}

int main(void)
{
    VT_CASE("rendezvous/hostile_peers", t_hostile());
    VT_CASE("rendezvous/missing_rank_timeout", t_missing_rank());
    VT_CASE("rendezvous/impostor_rank0", t_impostor_rank0());
    VT_CASE("rendezvous/job_key", t_key());
    VT_CASE("rendezvous/no_deadline_and_args", t_no_deadline_and_args());
    file_case("rendezvous/file: every rank gets rank 0's id, nothing left behind", t_file_ok);
    file_case("rendezvous/file: an earlier run's file of the same job is claimed, then the new one", t_file_stale_same_job);
    file_case("rendezvous/file: another job's file is never used (a timeout names it), rank 0 replaces it",
              t_file_other_job);
    file_case("rendezvous/file: garbage, damaged, unwritable, a missing rank: errors naming the path", t_file_bad);
    return vt_summary();
}
