/* test_lighthouse.c - issue 33: a lighthouse can never end a healthy job.

   An NCCL job of 4 processes (thread ranks standing in for them, each with
   its own vs_world_init, over the strict CUDA + NCCL stand-in) trains on
   while its lighthouse misbehaves; every step is an all-reduce of small
   integers (exact in any order) checked against its formula, and the job's
   collective timeout (6 s) is half the time a rank waits for the lighthouse
   before giving it up (vs_world_desc.lighthouse_wait_s, 12 s here), so a
   wait that waited on the lighthouse would end the job:
     - the lighthouse stopped (SIGSTOP: tools/vescale-lighthouse, a process
       of its own) or its connections black-holed (a TCP proxy here that
       stops forwarding): every step completes, and every rank warns once
       that the lighthouse does not answer;
     - three clients ask for a 16 MiB value and never read: the job's steps
       complete, another client's answer is not held up, and the three are
       closed after stall_s;
     - 2,000 idle connections to the tool at ulimit -n 1024: a new job still
       gets in and trains, and the tool does not spin;
     - a flood of 1 MiB values: refused past max_bytes with a message naming
       it (and a value past max_value, an entry past max_keys), the job
       trains beside it, and a finished job's entries expire;
     - a token: a client without it, or with another, cannot read, write or
       post a failure notice; a captured request replayed is refused; the
       job with the token trains; without a token the lighthouse says so once;
     - SHA-256 and HMAC-SHA256 against FIPS 180-2's and RFC 4231's values;
     - the directory store's "same host": an entry from another container
       with this hostname (another pid namespace) is not taken for this
       host's, so its pid is not looked at here. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vs_test.h"
#include "vt_dir.h"

#include <cuda_runtime.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lighthouse_tool.h"
#include "strict/vs_strict.h"

enum { W = 4 };

static char g_bin[600]; /* tools/vescale-lighthouse, beside this binary */

/* --- a healthy job: W ranks, `steps` all-reduces, a fault at fault_step ---- */
typedef struct fjob fjob;
struct fjob {
    char store[128]; /* elastic_dir */
    char dir[64], idfile[128];
    const char* token;
    double timeout;
    double lh_wait;              /* vs_world_desc.lighthouse_wait_s (0: its 5 s) */
    int until_warned;            /* 1: stop at the step where every rank has warned (steps: at most) */
    int steps, fault_step, ran;
    long step_us;                /* a pause between steps (compute) */
    void (*fault)(fjob*);        /* rank 0 calls it before fault_step */
    void (*beside)(fjob*, int);  /* rank 0 calls it at every step (a load beside the job) */
    void* arg;
    int ok[W], warned[W];
    double longest[W];
    char msg[W][700];
};

typedef struct frank {
    fjob* j;
    int rank;
} frank;

static void count_warn(vs_log_level level, const char* msg, void* user)
{
    if (level == VS_LOG_WARN && strstr(msg, "does not answer")) __atomic_add_fetch((int*)user, 1, __ATOMIC_SEQ_CST);
}

static vs_world* open_world(fjob* j, int rank, int* warned, vs_result* res)
{
    vs_world_desc wd;
    memset(&wd, 0, sizeof wd);
    wd.transport = VS_TRANSPORT_NCCL;
    wd.world_size = W, wd.rank = rank, wd.local_rank = rank;
    wd.device_select = VS_DEVICE_EXPLICIT, wd.cuda_device = rank;
    wd.init_file = j->idfile;
    wd.elastic_dir = j->store;
    wd.elastic_token = j->token;
    wd.timeout_s = j->timeout;
    wd.lighthouse_wait_s = j->lh_wait;
    wd.logger.fn = count_warn, wd.logger.user = warned;
    wd.log_level = VS_LOG_WARN;
    vs_world* w = NULL;
    *res = vs_world_init(&wd, &w);
    return w;
}

/* One step: the sum of rank + 1 (out[0]) and of the ranks that have warned
   (out[1]: every rank sees the same, so all stop at one step). */
static vs_result reduce(vs_world* w, float* x, int warned, float* out)
{
    float v[2] = {(float)(vs_world_rank(w) + 1), warned ? 1.0f : 0.0f};
    cudaMemcpy(x, v, sizeof v, cudaMemcpyHostToDevice);
    vs_result r = vs_all_reduce(vs_world_comm(w), x, x, 2, VS_F32, VS_OP_SUM, NULL);
    if (!r) r = cudaMemcpy(out, x, sizeof v, cudaMemcpyDeviceToHost) == cudaSuccess ? VS_OK : VS_ERR_BACKEND;
    return r;
}

static void* frank_main(void* arg)
{
    frank* f = (frank*)arg;
    fjob* j = f->j;
    int me = f->rank;
    vs_result r;
    vs_world* w = open_world(j, me, &j->warned[me], &r);
    if (r) {
        snprintf(j->msg[me], sizeof j->msg[me], "vs_world_init: %s", vs_last_error());
        return NULL;
    }
    vs_world_desc q;
    double want = j->lh_wait > 0 ? j->lh_wait : 5;
    if (vs_world_query_desc(w, &q) || q.lighthouse_wait_s != want)
        snprintf(j->msg[me], sizeof j->msg[me], "lighthouse_wait_s reads back %g, want %g", q.lighthouse_wait_s, want);
    float* x = (float*)vs_device_alloc(w, 2 * sizeof(float));
    int s = 0, all = 0;
    for (; s < j->steps && !j->msg[me][0] && !all; s++) {
        if (me == 0 && j->fault && s == j->fault_step) j->fault(j);
        if (me == 0 && j->beside) j->beside(j, s);
        double t0 = _vs_now();
        float got[2] = {0, 0};
        if ((r = reduce(w, x, __atomic_load_n(&j->warned[me], __ATOMIC_SEQ_CST), got)) || got[0] != W * (W + 1) / 2) {
            snprintf(j->msg[me], sizeof j->msg[me], "step %d: %s (%s), sum %g", s, vs_result_string(r),
                     r ? vs_last_error() : "", got[0]);
            break;
        }
        all = j->until_warned && got[1] == W;
        if (_vs_now() - t0 > j->longest[me]) j->longest[me] = _vs_now() - t0;
        if (j->step_us) _vs_sleep_us(j->step_us);
    }
    vs_device_free(w, x);
    vs_world_free(w);
    j->ok[me] = !j->msg[me][0];
    if (me == 0) j->ran = s;
    return NULL;
}

/* Runs the job over the lighthouse at 127.0.0.1:port (0: j->store when set,
   else a directory of its own). */
static void run_fjob(fjob* j, int port)
{
    snprintf(j->dir, sizeof j->dir, "/tmp/vs_lighthouse_XXXXXX");
    VT_CHECK(mkdtemp(j->dir) != NULL, "mkdtemp");
    snprintf(j->idfile, sizeof j->idfile, "%s/nccl_id", j->dir);
    if (port) snprintf(j->store, sizeof j->store, "tcp://127.0.0.1:%d", port);
    else if (!j->store[0]) snprintf(j->store, sizeof j->store, "%s", j->dir);
    static int runs;
    char id[64];
    snprintf(id, sizeof id, "test-lighthouse-%ld-%d", (long)getpid(), ++runs);
    setenv("VESCALE_RUN_ID", id, 1); /* (one job a run id at a lighthouse) */
    pthread_t th[W];
    frank f[W];
    for (int i = 0; i < W; i++) f[i].j = j, f[i].rank = i, pthread_create(&th[i], NULL, frank_main, &f[i]);
    for (int i = 0; i < W; i++) pthread_join(th[i], NULL);
    double worst = 0;
    for (int i = 0; i < W; i++) {
        VT_CHECK(j->ok[i], "rank %d: %s", i, j->msg[i]);
        if (j->longest[i] > worst) worst = j->longest[i];
    }
    printf("    %d steps on %d ranks, the longest %.0f ms (timeout %g s)\n", j->ran, W, 1e3 * worst, j->timeout);
    vt_clear_dir(j->dir);
}

/* --- the tool as a process of its own ------------------------------------- */
typedef struct tool {
    pid_t pid;
    int port;
} tool;

static int tool_start(tool* t, long nofile)
{
    t->pid = vt_lighthouse_spawn(g_bin, nofile, &t->port);
    return t->port > 0;
}

static void tool_stop(tool* t)
{
    if (t->pid <= 0) return;
    kill(t->pid, SIGCONT);
    kill(t->pid, SIGKILL);
    waitpid(t->pid, NULL, 0);
    t->pid = -1;
}

/* user + system CPU seconds of process pid */
static double cpu_of(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE* f = fopen(path, "r");
    size_t k = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[k] = 0;
    char* p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (p) sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st);
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void fault_stop(fjob* j) { kill(((tool*)j->arg)->pid, SIGSTOP); }

static void check_warned(fjob* j)
{
    for (int i = 0; i < W; i++)
        VT_CHECK(j->warned[i] == 1, "rank %d warned %d times that the lighthouse does not answer (want once)", i,
                 j->warned[i]);
}

/* A job whose lighthouse stops answering at step 4: a collective timeout of
   6 s, and ranks that give the lighthouse up after 12 s, so a collective that
   waited on it would time out, while a loaded machine's slow step (4.3 s seen
   at load 50 with the 3 s timeout this had) does not. It runs until every
   rank has warned (104 steps at most: 21 s). */
static void fault_job(fjob* j, void (*fault)(fjob*), void* arg)
{
    memset(j, 0, sizeof *j);
    j->timeout = 6, j->lh_wait = 12, j->until_warned = 1;
    j->steps = 104, j->fault_step = 4, j->step_us = 200000, j->fault = fault, j->arg = arg;
}

static void case_stopped(void)
{
    tool t;
    VT_CHECK(tool_start(&t, 0), "%s did not start", g_bin);
    fjob j;
    fault_job(&j, fault_stop, &t);
    run_fjob(&j, t.port);
    check_warned(&j);
    tool_stop(&t);
}

/* --- a TCP proxy that stops forwarding (a black hole) ---------------------- */
typedef struct proxy {
    int lfd, port, up_port, hole, stop;
    int fd[128][2]; /* client, upstream */
    int n;
    pthread_t th;
} proxy;

static void* proxy_main(void* arg)
{
    proxy* p = (proxy*)arg;
    while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
        struct pollfd pf[1 + 2 * 128];
        int n = 0, hole = __atomic_load_n(&p->hole, __ATOMIC_ACQUIRE);
        pf[n].fd = p->lfd, pf[n].events = POLLIN, n++;
        for (int i = 0; i < p->n && !hole; i++)
            for (int k = 0; k < 2; k++) pf[n].fd = p->fd[i][k], pf[n].events = POLLIN, n++;
        if (poll(pf, (nfds_t)n, 50) <= 0) continue;
        if ((pf[0].revents & POLLIN) && p->n < 128) {
            int c = accept(p->lfd, NULL, NULL);
            int u = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in a;
            memset(&a, 0, sizeof a);
            a.sin_family = AF_INET, a.sin_port = htons((uint16_t)p->up_port), a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            if (c >= 0 && u >= 0 && connect(u, (struct sockaddr*)&a, sizeof a) == 0) {
                p->fd[p->n][0] = c, p->fd[p->n][1] = u, p->n++;
            } else {
                if (c >= 0) close(c);
                if (u >= 0) close(u);
            }
        }
        for (int i = 0, q = 1; !hole && i < p->n && q < n; i++)
            for (int k = 0; k < 2; k++, q++) {
                if (!(pf[q].revents & (POLLIN | POLLHUP))) continue;
                char buf[65536];
                ssize_t got = recv(p->fd[i][k], buf, sizeof buf, 0);
                if (got > 0 && send(p->fd[i][1 - k], buf, (size_t)got, MSG_NOSIGNAL) != got) got = -1;
                if (got <= 0) shutdown(p->fd[i][1 - k], SHUT_RDWR); /* (a close passes on) */
            }
    }
    return NULL;
}

static void proxy_start(proxy* p, int up_port)
{
    memset(p, 0, sizeof *p);
    p->up_port = up_port;
    p->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET, a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    VT_CHECK(bind(p->lfd, (struct sockaddr*)&a, sizeof a) == 0 && listen(p->lfd, 64) == 0 &&
                 getsockname(p->lfd, (struct sockaddr*)&a, &al) == 0, "proxy: %s", strerror(errno));
    p->port = ntohs(a.sin_port);
    pthread_create(&p->th, NULL, proxy_main, p);
}

static void proxy_stop(proxy* p)
{
    __atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
    pthread_join(p->th, NULL);
    for (int i = 0; i < p->n; i++) close(p->fd[i][0]), close(p->fd[i][1]);
    close(p->lfd);
}

static void fault_hole(fjob* j) { __atomic_store_n(&((proxy*)j->arg)->hole, 1, __ATOMIC_RELEASE); }

static void case_black_hole(void)
{
    vs_lighthouse* lh = NULL;
    VT_OK(vs_lighthouse_start("127.0.0.1", 0, &lh));
    proxy p;
    proxy_start(&p, vs_lighthouse_port(lh));
    fjob j;
    fault_job(&j, fault_hole, &p);
    run_fjob(&j, p.port);
    check_warned(&j);
    proxy_stop(&p);
    vs_lighthouse_stop(lh);
}

/* --- raw clients ----------------------------------------------------------- */
static int raw_connect(int port, unsigned char* nonce)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET, a.sin_port = htons((uint16_t)port), a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr*)&a, sizeof a) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    unsigned char h[_VS_LH_HELLO_LEN];
    if (nonce && (_vs_io_full(fd, h, sizeof h, 0, _vs_now() + 5) != VS_OK || _vs_be_get32(h) != _VS_LH_HELLO)) {
        close(fd);
        return -1;
    }
    if (nonce) memcpy(nonce, h + 8, 16);
    return fd;
}

/* Sends a request (signed under token for nonce, number seq); with answer,
   reads it: its status (value into out), -1 when the connection failed. */
static int raw_call(int fd, const unsigned char* nonce, const char* token, uint64_t seq, uint32_t op, const char* key,
                    const void* val, size_t vlen, int answer, char* out, size_t cap)
{
    unsigned char h[_VS_LH_REQ];
    size_t klen = strlen(key);
    _vs_lh_request_head(h, op, key, klen, val, vlen, seq, token, nonce);
    double until = _vs_now() + 10;
    if (_vs_io_full(fd, h, sizeof h, 1, until) || _vs_io_full(fd, (void*)(uintptr_t)key, klen, 1, until) ||
        (vlen && _vs_io_full(fd, (void*)(uintptr_t)val, vlen, 1, until)))
        return -1;
    if (!answer) return 0;
    unsigned char a[12];
    if (_vs_io_full(fd, a, sizeof a, 0, until) || _vs_be_get32(a) != _VS_LH_ANSWER) return -1;
    size_t n = _vs_be_get32(a + 8), got = 0;
    while (got < n) {
        char sink[4096];
        size_t k = n - got > sizeof sink ? sizeof sink : n - got;
        if (_vs_io_full(fd, sink, k, 0, until)) return -1;
        if (out && got < cap) memcpy(out + got, sink, k < cap - got ? k : cap - got);
        got += k;
    }
    if (out && cap) out[n < cap ? n : cap - 1] = 0;
    return (int)_vs_be_get32(a + 4);
}

/* --- 3 clients that never read a 16 MiB answer ---------------------------- */
typedef struct slow {
    vs_lighthouse* lh;
    int port;
    double worst_ms; /* another client's GET, the longest while the three hold theirs */
} slow;

static void probe(fjob* j, int s)
{
    slow* sl = (slow*)j->arg;
    (void)s;
    unsigned char nonce[16];
    int fd = raw_connect(sl->port, nonce);
    char t[64];
    double t0 = _vs_now();
    int st = fd >= 0 ? raw_call(fd, nonce, NULL, 1, _VS_LH_GET, "probe-key", NULL, 0, 1, t, sizeof t) : -1;
    double ms = 1e3 * (_vs_now() - t0);
    VT_CHECK(st == 0 && !strcmp(t, "here"), "the probe's GET: status %d", st);
    if (ms > sl->worst_ms) sl->worst_ms = ms;
    if (fd >= 0) close(fd);
}

static void case_slow_readers(void)
{
    vs_lighthouse_desc d;
    memset(&d, 0, sizeof d);
    d.addr = "127.0.0.1", d.max_value = 32u << 20, d.max_bytes = (size_t)256 << 20, d.stall_s = 2;
    vs_lighthouse* lh = NULL;
    VT_OK(vs_lighthouse_start_desc(&d, &lh));
    slow sl = {lh, vs_lighthouse_port(lh), 0};
    size_t big = 16u << 20;
    char* v = (char*)malloc(big);
    memset(v, 'x', big);
    unsigned char nonce[16];
    int w = raw_connect(sl.port, nonce);
    VT_CHECK(raw_call(w, nonce, NULL, 1, _VS_LH_PUT, "big-value", v, big, 1, NULL, 0) == 0, "PUT 16 MiB");
    VT_CHECK(raw_call(w, nonce, NULL, 2, _VS_LH_PUT, "probe-key", "here", 4, 1, NULL, 0) == 0, "PUT probe-key");
    close(w);
    free(v);
    int r[3];
    for (int i = 0; i < 3; i++) { /* each asks for it, reads nothing */
        r[i] = raw_connect(sl.port, nonce);
        int small = 4096;
        setsockopt(r[i], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
        VT_CHECK(r[i] >= 0 && raw_call(r[i], nonce, NULL, 1, _VS_LH_GET, "big-value", NULL, 0, 0, NULL, 0) == 0,
                 "slow reader %d", i);
    }
    fjob j;
    memset(&j, 0, sizeof j);
    j.timeout = 3, j.steps = 20, j.step_us = 200000, j.beside = probe, j.arg = &sl;
    run_fjob(&j, sl.port);
    for (int i = 0; i < W; i++) VT_CHECK(j.warned[i] == 0, "rank %d gave the lighthouse up", i);
    vs_lighthouse_stats st;
    _vs_sleep_us(1500000); /* (the stats are a second old at most) */
    VT_OK(vs_lighthouse_query_stats(lh, &st));
    printf("    another client's answer beside the three: at most %.1f ms; closed %lld, answers waiting %lld bytes\n",
           sl.worst_ms, st.closed, st.pending);
    /* A lighthouse that blocked on one of the three would hold the probe until
       stall_s closed that reader (2 s, and a blocking write never returns at
       all): half of stall_s tells the two apart and leaves a loaded machine's
       scheduling noise room (250 ms did not: 260 ms seen at load 50). */
    VT_CHECK(sl.worst_ms < 500 * d.stall_s, "another client's GET took %.1f ms beside the slow readers (a lighthouse "
             "held up by them would take stall_s = %g s)", sl.worst_ms, d.stall_s);
    VT_CHECK(st.closed >= 3 && st.pending == 0, "%lld closed, %lld bytes waiting: the slow readers were not closed",
             st.closed, st.pending);
    for (int i = 0; i < 3; i++)
        if (r[i] >= 0) close(r[i]);
    vs_lighthouse_stop(lh);
}

/* --- 2,000 idle connections at ulimit -n 1024 ----------------------------- */
static void case_idle_flood(void)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < 2200) {
        rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < 2100) {
        printf("skip lighthouse/idle: this process may open %lu descriptors, the case needs 2100\n",
               (unsigned long)rl.rlim_cur);
        return;
    }
    tool t;
    VT_CHECK(tool_start(&t, 1024), "%s did not start", g_bin);
    static int fds[2000];
    int opened = 0;
    for (int i = 0; i < 2000; i++)
        if ((fds[i] = raw_connect(t.port, NULL)) >= 0) opened++;
    _vs_sleep_us(1500000);
    double c0 = cpu_of(t.pid), t0 = _vs_now();
    fjob j;
    memset(&j, 0, sizeof j);
    j.timeout = 5, j.steps = 10, j.step_us = 100000;
    run_fjob(&j, t.port);
    double cpu = cpu_of(t.pid) - c0, wall = _vs_now() - t0;
    printf("    %d idle connections opened; the tool used %.2f s of CPU in %.1f s while the job ran\n", opened, cpu,
           wall);
    VT_CHECK(cpu < 0.5 * wall, "the lighthouse spun: %.2f s of CPU in %.1f s", cpu, wall);
    for (int i = 0; i < 2000; i++)
        if (fds[i] >= 0) close(fds[i]);
    tool_stop(&t);
}

/* --- a flood of values; limits; expiry ------------------------------------ */
typedef struct flood {
    int port, refused, wrote;
    char why[256];
} flood;

static void flood_some(fjob* j, int s)
{
    flood* f = (flood*)j->arg;
    if (s >= 15) return;
    size_t mb = 1u << 20;
    char* v = (char*)malloc(mb);
    memset(v, 'f', mb);
    unsigned char nonce[16];
    int fd = raw_connect(f->port, nonce);
    for (int i = 0; i < 10 && fd >= 0; i++) {
        char key[64], t[256];
        snprintf(key, sizeof key, "vs-flood-k%d", s * 10 + i);
        int st = raw_call(fd, nonce, NULL, (uint64_t)i + 1, _VS_LH_PUT, key, v, mb - 64, 1, t, sizeof t);
        if (st == 2 && !f->refused++) snprintf(f->why, sizeof f->why, "%s", t);
        f->wrote += st == 0;
    }
    if (fd >= 0) close(fd);
    free(v);
}

static void case_flood(void)
{
    vs_lighthouse_desc d;
    memset(&d, 0, sizeof d);
    d.addr = "127.0.0.1", d.expire_s = 3;
    vs_lighthouse* lh = NULL;
    VT_OK(vs_lighthouse_start_desc(&d, &lh));
    vs_lighthouse_desc q;
    VT_OK(vs_lighthouse_query_desc(&d, &q));
    VT_CHECK(q.max_bytes == (size_t)64 << 20 && q.max_value == 1u << 20 && q.max_keys == 65536 && q.max_conns > 0 &&
                 q.idle_s == 60 && q.stall_s == 5 && q.expire_s == 3,
             "defaults: max_bytes %zu max_value %zu max_keys %d idle %g stall %g", q.max_bytes, q.max_value,
             q.max_keys, q.idle_s, q.stall_s);
    flood f;
    memset(&f, 0, sizeof f);
    f.port = vs_lighthouse_port(lh);
    fjob j;
    memset(&j, 0, sizeof j);
    j.timeout = 3, j.steps = 20, j.step_us = 50000, j.beside = flood_some, j.arg = &f;
    run_fjob(&j, f.port);
    vs_lighthouse_stats st;
    _vs_sleep_us(1200000);
    VT_OK(vs_lighthouse_query_stats(lh, &st));
    printf("    150 values of 1 MiB: %d stored, %d refused (\"%s\"); the lighthouse holds %.1f MiB\n", f.wrote,
           f.refused, f.why, (double)st.bytes / (1 << 20));
    VT_CHECK(f.refused > 0 && strstr(f.why, "max_bytes"), "refused %d: %s", f.refused, f.why);
    VT_CHECK(st.bytes <= (long long)(64 << 20), "it holds %lld bytes, past max_bytes", st.bytes);
    /* a value past max_value: refused, the connection serves on */
    unsigned char nonce[16];
    int fd = raw_connect(f.port, nonce);
    size_t two = 2u << 20;
    char* v = (char*)calloc(1, two);
    char t[256];
    int s1 = raw_call(fd, nonce, NULL, 1, _VS_LH_PUT, "vs-big-v", v, two, 1, t, sizeof t);
    VT_CHECK(s1 == 2 && strstr(t, "max_value"), "a 2 MiB value: status %d: %s", s1, t);
    VT_CHECK(raw_call(fd, nonce, NULL, 2, _VS_LH_PUT, "vs-big-ok", "1", 1, 1, NULL, 0) == 0,
             "the connection after a refused value");
    free(v);
    close(fd);
    /* expiry: the job ended (its entries held by nobody), the flood's too: forgotten after expire_s */
    _vs_sleep_us(4500000);
    VT_OK(vs_lighthouse_query_stats(lh, &st));
    VT_CHECK(st.entries == 0 && st.jobs == 0 && st.bytes == 0, "after expire_s: %lld entries, %d jobs, %lld bytes",
             st.entries, st.jobs, st.bytes);
    vs_lighthouse_stop(lh);
    /* entries per job */
    memset(&d, 0, sizeof d);
    d.addr = "127.0.0.1", d.max_keys = 100;
    VT_OK(vs_lighthouse_start_desc(&d, &lh));
    fd = raw_connect(vs_lighthouse_port(lh), nonce);
    int stored = 0, st2 = 0;
    for (int i = 0; i < 101; i++) {
        char key[64];
        snprintf(key, sizeof key, "vs-keys-%d", i);
        st2 = raw_call(fd, nonce, NULL, (uint64_t)i + 1, _VS_LH_PUT, key, "v", 1, 1, t, sizeof t);
        stored += st2 == 0;
    }
    VT_CHECK(stored == 100 && st2 == 2 && strstr(t, "max_keys"), "%d stored; the 101st: %d %s", stored, st2, t);
    close(fd);
    vs_lighthouse_stop(lh);
    vs_lighthouse_desc bad;
    memset(&bad, 0, sizeof bad);
    bad.idle_s = -1;
    VT_EXPECT_ERR(vs_lighthouse_start_desc(&bad, &lh), VS_ERR_INVALID, "idle_s -1", NULL);
}

/* --- the token ------------------------------------------------------------ */
static void count_token_warn(vs_log_level level, const char* msg, void* user)
{
    if (level == VS_LOG_WARN && strstr(msg, "has no token")) (*(int*)user)++;
}

static void case_token(void)
{
    const char* tok = "s3cret-token-of-the-job";
    vs_lighthouse_desc d;
    memset(&d, 0, sizeof d);
    d.addr = "127.0.0.1", d.token = tok;
    vs_lighthouse* lh = NULL;
    VT_OK(vs_lighthouse_start_desc(&d, &lh));
    int port = vs_lighthouse_port(lh);
    unsigned char n1[16], n2[16];
    char t[256];
    /* the right token: a PUT and a GET */
    int a = raw_connect(port, n1);
    VT_CHECK(raw_call(a, n1, tok, 1, _VS_LH_PUT, "vs-tok-k", "v1", 2, 1, NULL, 0) == 0, "PUT with the token");
    VT_CHECK(raw_call(a, n1, tok, 2, _VS_LH_GET, "vs-tok-k", NULL, 0, 1, t, sizeof t) == 0 && !strcmp(t, "v1"),
             "GET with the token: %s", t);
    /* none, or another: cannot read, write or post a notice (each refused, that connection closed) */
    const char* wrong[2] = {NULL, "not-the-token"};
    for (int k = 0; k < 2; k++) {
        uint32_t ops[3] = {_VS_LH_GET, _VS_LH_PUT, _VS_LH_LINK};
        const char* keys[3] = {"vs-tok-k", "vs-tok-k", "vs-tok-f0"};
        for (int o = 0; o < 3; o++) {
            int b = raw_connect(port, n2);
            int st = raw_call(b, n2, wrong[k], 1, ops[o], keys[o], "0 a stranger's notice", 21, 1, t, sizeof t);
            VT_CHECK(st == 3 && strstr(t, "token"), "%s token, op %u: status %d (%s)", wrong[k] ? "another" : "no",
                     ops[o], st, t);
            char x;
            VT_CHECK(recv(b, &x, 1, 0) == 0, "the connection stayed open after a bad signature");
            close(b);
        }
    }
    VT_CHECK(raw_call(a, n1, tok, 3, _VS_LH_GET, "vs-tok-k", NULL, 0, 1, t, sizeof t) == 0 && !strcmp(t, "v1"),
             "the value after the strangers' PUTs: %s", t);
    VT_CHECK(raw_call(a, n1, tok, 4, _VS_LH_GET, "vs-tok-f0", NULL, 0, 1, t, sizeof t) == 1,
             "a stranger's notice is there");
    /* replay: a request captured on a, sent again on a (an old number) and on another connection (another nonce) */
    unsigned char cap[_VS_LH_REQ];
    _vs_lh_request_head(cap, _VS_LH_PUT, "vs-tok-k", 8, "v2", 2, 5, tok, n1);
    for (int again = 0; again < 3; again++) {
        int fd = again < 2 ? a : raw_connect(port, n2);
        double until = _vs_now() + 5;
        unsigned char ans[12];
        VT_CHECK(!_vs_io_full(fd, cap, sizeof cap, 1, until) && !_vs_io_full(fd, "vs-tok-kv2", 10, 1, until) &&
                     !_vs_io_full(fd, ans, sizeof ans, 0, until),
                 "send %d", again);
        size_t n = _vs_be_get32(ans + 8);
        char sink[256];
        if (n && n < sizeof sink) _vs_io_full(fd, sink, n, 0, until);
        VT_CHECK((int)_vs_be_get32(ans + 4) == (again ? 3 : 0), "the %s: status %u", again == 0 ? "original"
                 : again == 1 ? "replay on its connection" : "replay on another", _vs_be_get32(ans + 4));
        if (again == 2) close(fd);
    }
    close(a);
    /* a job with the token trains; a rank without it, or with another, is told at vs_world_init */
    fjob j;
    memset(&j, 0, sizeof j);
    j.timeout = 5, j.steps = 5, j.token = tok;
    run_fjob(&j, port);
    vs_world_desc wd;
    memset(&wd, 0, sizeof wd);
    wd.transport = VS_TRANSPORT_NCCL, wd.world_size = 2, wd.rank = 1, wd.local_rank = 1;
    wd.device_select = VS_DEVICE_EXPLICIT, wd.cuda_device = 1, wd.join = 1, wd.timeout_s = 5;
    wd.elastic_dir = j.store;
    vs_world* w = NULL;
    unsetenv("VESCALE_LIGHTHOUSE_TOKEN");
    VT_EXPECT_ERR(vs_world_init(&wd, &w), VS_ERR_INVALID, "signed by its token", "VESCALE_LIGHTHOUSE_TOKEN");
    wd.elastic_token = "not-the-token";
    VT_EXPECT_ERR(vs_world_init(&wd, &w), VS_ERR_INVALID, "not signed by the lighthouse's token", NULL);
    vs_lighthouse_stop(lh);
    /* without a token: said once, as it starts */
    int said = 0;
    memset(&d, 0, sizeof d);
    d.addr = "127.0.0.1", d.logger.fn = count_token_warn, d.logger.user = &said, d.log_level = VS_LOG_WARN;
    VT_OK(vs_lighthouse_start_desc(&d, &lh));
    vs_lighthouse_stop(lh);
    VT_CHECK(said == 1, "a lighthouse without a token said so %d times", said);
}

/* --- SHA-256, HMAC-SHA256 ------------------------------------------------- */
static void hex(const unsigned char* d, char* out)
{
    for (int i = 0; i < 32; i++) sprintf(out + 2 * i, "%02x", d[i]);
}

static void case_sha(void)
{
    unsigned char d[32];
    char h[65];
    _vs_sha256 s;
    _vs_sha256_init(&s);
    _vs_sha256_add(&s, "abc", 3);
    _vs_sha256_end(&s, d);
    hex(d, h);
    VT_CHECK(!strcmp(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "SHA-256(abc) %s", h);
    const char* m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    _vs_sha256_init(&s);
    for (const char* p = m; *p; p++) _vs_sha256_add(&s, p, 1); /* (byte by byte: the block boundary) */
    _vs_sha256_end(&s, d);
    hex(d, h);
    /* (FIPS 180-2's second example: 56 bytes, two blocks) */
    VT_CHECK(!strcmp(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"), "SHA-256 of the 56-byte "
             "example %s", h);
    const void* part[1] = {"what do ya want for nothing?"};
    size_t len[1] = {28};
    _vs_hmac_sha256("Jefe", 4, part, len, 1, d);
    hex(d, h);
    VT_CHECK(!strcmp(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"), "HMAC (RFC 4231 2) %s", h);
    unsigned char a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 5};
    VT_CHECK(_vs_same_bytes(a, a, 4) && !_vs_same_bytes(a, b, 4), "_vs_same_bytes");
}

/* --- two "hosts" with one name (containers) -------------------------------- */
static void other_container(fjob* j)
{
    /* rank 1's entry rewritten as a process of another pid namespace on a
       host of this name would write it: a pid that does not exist here */
    pid_t c = fork();
    if (c == 0) _exit(0);
    waitpid(c, NULL, 0);
    char host[256], path[400], text[400], mine[256];
    _vs_host_id(mine, sizeof mine);
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    DIR* d = opendir(j->dir);
    for (struct dirent* e; d && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n > 3 && !strcmp(e->d_name + n - 3, "-p1")) snprintf(path, sizeof path, "%s/%s", j->dir, e->d_name);
    }
    if (d) closedir(d);
    snprintf(text, sizeof text, "%ld %s/0123456789ab.7\n", (long)c, host);
    VT_CHECK(strcmp(mine, strchr(text, ' ') + 1) != 0, "the other container's id equals this one's: %s", mine);
    FILE* f = fopen(path, "w");
    if (f) fputs(text, f), fclose(f);
}

static void case_same_name(void)
{
    fjob j;
    memset(&j, 0, sizeof j);
    j.timeout = 5, j.steps = 14, j.fault_step = 2, j.step_us = 200000, j.fault = other_container;
    run_fjob(&j, 0);
}

/* --- another host's lighthouse, partitioned (tests/hosts_lighthouse.sh) ---- */
static void fault_cmd(fjob* j)
{
    const char* cmd = (const char*)j->arg;
    VT_CHECK(system(cmd) == 0, "the partition command failed: %s", cmd);
}

static void case_partition(const char* addr, const char* cmd)
{
    fjob j;
    fault_job(&j, fault_cmd, (void*)cmd);
    snprintf(j.store, sizeof j.store, "tcp://%s", addr);
    run_fjob(&j, 0);
    check_warned(&j);
}

int main(int argc, char** argv)
{
    (void)argc;
    setenv("VS_STRICT_DELAY_US", "50", 0);
    setenv("VS_STRICT_HANG_S", "60", 0);
    setenv("NCCL_CHECK_POINTERS", "1", 0);
    signal(SIGPIPE, SIG_IGN);
    const char* slash = strrchr(argv[0], '/');
    snprintf(g_bin, sizeof g_bin, "%.*svescale-lighthouse", slash ? (int)(slash - argv[0] + 1) : 0, argv[0]);
    if (access(g_bin, X_OK) != 0) {
        printf("not ok lighthouse: %s is not there (make builds it beside the tests)\n", g_bin);
        return 1;
    }
    const char* ext = getenv("VS_TEST_LIGHTHOUSE"), *cut = getenv("VS_TEST_PARTITION");
    if (ext && *ext && cut && *cut) { /* (tests/hosts_lighthouse.sh: its host, and how to cut it off) */
        VT_CASE("hosts/lighthouse partitioned: the lighthouse's host is cut off mid-job: every step completes within a "
                "6 s timeout (12 s to give it up), every rank warns once", case_partition(ext, cut));
        return vt_summary();
    }
    VT_CASE("lighthouse/sha: SHA-256 and HMAC-SHA256 against FIPS 180-2 and RFC 4231", case_sha());
    VT_CASE("lighthouse/stopped: the lighthouse process stopped (SIGSTOP) mid-job: every step completes within a "
            "6 s timeout (12 s to give it up), every rank warns once", case_stopped());
    VT_CASE("lighthouse/black hole: its connections stop forwarding mid-job: every step completes, every rank warns "
            "once", case_black_hole());
    VT_CASE("lighthouse/slow readers: three clients never read a 16 MiB answer: the job trains, another client's "
            "answer is not held up, the three are closed after stall_s", case_slow_readers());
    VT_CASE("lighthouse/idle: 2,000 idle connections to the tool at ulimit -n 1024: a new job gets in and trains, "
            "the tool does not spin", case_idle_flood());
    VT_CASE("lighthouse/flood: 1 MiB values past max_bytes, a value past max_value, entries past max_keys: refused "
            "naming the limit, the job trains beside, a finished job expires", case_flood());
    VT_CASE("lighthouse/token: without the token, or with another, nothing is read, written or posted; a replayed "
            "request is refused; the job with it trains; none: said once", case_token());
    VT_CASE("lighthouse/same name: an entry from another container with this hostname is not this host's: its pid "
            "is not looked at here, the job trains on", case_same_name());
    return vt_summary();
}
