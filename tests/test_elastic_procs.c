/* test_elastic_procs.c - issue 24 for NCCL jobs of processes: their survivors
   agree through the elastic directory (vs_world_desc.elastic_dir, >>elastic's
   store), shrink with ncclCommShrink (or a new communicator when theirs was
   aborted), and take a replacement process back in (vs_world_desc.join).

   Over the strict CUDA + NCCL stand-in (tests/strict/; 8 simulated GPUs). Each
   rank is a thread that stands in for a process: its own vs_world_init
   through the file rendezvous, nothing shared with the others but the
   directory and the stand-in's NCCL. Every result is an all-reduce of small
   integers (exact in any order) checked against its formula, and every
   vs_reform_info against the ranks the case killed:
     - a rank that fails and says so (vs_world_abort): the others' all-reduce
       stops with VS_ERR_ABORTED naming it and its message well before the
       timeout, they shrink to 3 with ncclCommShrink, a replacement process
       joins (vs_world_joiners counts it) and the world is 4 again;
     - a rank that stops without a word (a crash on another host): the others
       time out, the first to shrink posts a notice, half the timeout later
       the agreement counts it failed, the survivors reduce on 3;
     - a rank whose process has ended (its entry in the directory names a
       child process reaped here): the others see it gone well before their
       timeout, and shrink;
     - a second failure inside the shrink (a rank that arrived, then died):
       the shrink times out, the world is at the decision's epoch, and a
       second shrink goes on without it;
     - DP2 x TP2: vs_mesh_shrink drops the failed rank's whole DP replica, the
       replica's other rank leaves and comes back with the replacement at a
       grow, and the 2 x 2 mesh is made again;
     - bad input: each misuse a clear error naming the value (a replacement
       for a rank whose process runs among them).
   Each case runs twice: over a directory, and over a lighthouse (elastic_dir
   "tcp://127.0.0.1:<port>", vs_lighthouse_start here; a fresh one a case).
   There a process that ends is a connection that closes (the test shuts the
   victim's down), and the store's entries are read through the lighthouse
   (its LIST and GET) where the directory's are read as files. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vs_test.h"
#include "vt_dir.h"

#include <cuda_runtime.h>
#include <dirent.h>
#include <signal.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "strict/vs_strict.h"

enum { W = 4 };

typedef struct proc proc;
typedef struct job {
    int tcp;           /* 1: the store is a lighthouse */
    vs_lighthouse* lh;
    char dir[64];      /* the elastic directory (and the file rendezvous') */
    char store[96];    /* elastic_dir: dir, or the lighthouse's tcp:// address */
    char idfile[128];  /* the file rendezvous */
    double timeout;
    int victim;        /* the world rank that fails */
    int silent;        /* 1: it stops without a word */
    int gone;          /* with silent: its process has ended, as far as the others' host can tell */
    int mesh;          /* 1: DP2 x TP2, vs_mesh_shrink */
    int second;        /* > 0: world rank second dies after arriving at the shrink (its arrival written, then silent) */
    int released;      /* atomic: the survivors are done with the silent one */
    proc* p;
} job;

struct proc {
    job* j;
    int rank;
    int failed_fast;   /* the step after the failure returned VS_ERR_ABORTED naming the victim */
    double detect_s;   /* how long that took */
    vs_reform_info shrink, grow;
    float after_shrink, after_grow; /* all-reduce results */
    int left;          /* vs_mesh_shrink: this rank left with the failed replica */
    int ok;
    char msg[900];
};

static vs_world* open_world(job* j, int rank, int join, vs_result* res)
{
    vs_world_desc wd;
    memset(&wd, 0, sizeof wd);
    wd.transport = VS_TRANSPORT_NCCL;
    wd.world_size = W;
    wd.rank = rank;
    wd.local_rank = rank;
    wd.device_select = VS_DEVICE_EXPLICIT;
    wd.cuda_device = rank;
    wd.init_file = j->idfile;
    wd.elastic_dir = j->store;
    wd.join = join;
    wd.timeout_s = j->timeout;
    vs_world* w = NULL;
    *res = vs_world_init(&wd, &w);
    return w;
}

/* The sum of (world rank + 1) over c's ranks. */
static vs_result reduce(vs_world* w, vs_comm* c, float* out)
{
    float* x = (float*)vs_device_alloc(w, sizeof(float));
    if (!x) return VS_ERR_NOMEM;
    float v = (float)(vs_world_rank(w) + 1);
    cudaMemcpy(x, &v, sizeof v, cudaMemcpyHostToDevice);
    vs_result r = vs_all_reduce(c, x, x, 1, VS_F32, VS_OP_SUM, NULL);
    if (!r) r = cudaMemcpy(out, x, sizeof *out, cudaMemcpyDeviceToHost) == cudaSuccess ? VS_OK : VS_ERR_BACKEND;
    vs_device_free(w, x);
    return r;
}

#define FAIL(...)                                      \
    do {                                               \
        snprintf(p->msg, sizeof p->msg, __VA_ARGS__);  \
        goto out;                                      \
    } while (0)

/* A replacement process for the victim: starts with join = 1, comes in. */
static void replacement(proc* p)
{
    job* j = p->j;
    vs_result r;
    vs_world* w = open_world(j, p->rank, 1, &r);
    if (r) FAIL("replacement: vs_world_init: %s", vs_last_error());
    if (!vs_world_joining(w) || vs_world_comm(w)) FAIL("replacement: not joining");
    if ((r = vs_world_grow(w, &p->grow))) FAIL("replacement: vs_world_grow: %s", vs_last_error());
    vs_mesh* m = NULL;
    vs_mesh_desc md = {{2, 2}, 0, {0}, NULL};
    if (j->mesh && (r = vs_mesh_init(w, &md, &m))) FAIL("replacement: vs_mesh_init: %s", vs_last_error());
    if ((r = reduce(w, vs_world_comm(w), &p->after_grow))) FAIL("replacement: all-reduce: %s", vs_last_error());
    p->ok = 1;
    vs_mesh_free(m);
out:
    vs_world_free(w);
}

static void* proc_main(void* arg)
{
    proc* p = (proc*)arg;
    job* j = p->j;
    vs_result r;
    vs_mesh* m = NULL;
    vs_mesh* small = NULL;
    vs_world* w = open_world(j, p->rank, 0, &r);
    if (r) FAIL("vs_world_init: %s", vs_last_error());
    float got = 0;
    if (j->mesh) {
        vs_mesh_desc md = {{2, 2}, 0, {0}, NULL};
        vs_mesh* tp = NULL;
        if ((r = vs_mesh_init(w, &md, &m)) || (r = vs_mesh_submesh(m, "TP", &tp)))
            FAIL("mesh: %s", vs_last_error());
    }
    if (j->gone && p->rank == j->victim) _vs_sleep_us(300000); // (the others read its entry while they wait)
    if ((r = reduce(w, vs_world_comm(w), &got)) || got != W * (W + 1) / 2)
        FAIL("step 1: %s, %g", vs_result_string(r), got);
    if (p->rank == j->victim) {
        if (j->silent) { // a crash: nothing said, nothing freed until the others are done
            if (j->gone && j->tcp) { // its connection to the lighthouse closes, as when its process ends
                shutdown(w->efd, SHUT_RDWR);
            } else if (j->gone) { // its process entry now names one that has ended (a child reaped here)
                pid_t c = fork();
                if (c == 0) _exit(0);
                waitpid(c, NULL, 0);
                char path[200], text[300], host[256];
                _vs_host_id(host, sizeof host);
                snprintf(path, sizeof path, "%s/vs-%016llx-p%d", j->dir, (unsigned long long)w->ekey, p->rank);
                snprintf(text, sizeof text, "%ld %s\n", (long)c, host);
                FILE* f = fopen(path, "w");
                if (f) fputs(text, f), fclose(f);
            }
            while (!__atomic_load_n(&j->released, __ATOMIC_ACQUIRE)) _vs_sleep_us(1000);
            vs_comm_abort(vs_world_comm(w));
            vs_mesh_free(m);
            vs_world_free(w);
            p->ok = 1;
            return NULL;
        }
        vs_all_reduce(NULL, NULL, NULL, 1, VS_F32, VS_OP_SUM, NULL); // this rank's own error
        vs_world_abort(w, VS_ERR_INVALID);
        vs_mesh_free(m);
        vs_world_free(w); // (the process ends; a new one takes its place)
        w = NULL;
        if (j->second) { // (no replacement: the survivors shrink twice)
            p->ok = 1;
            return NULL;
        }
        _vs_sleep_us(200000);
        replacement(p);
        return NULL;
    }
    if (j->second && p->rank == j->second) { // sees the failure, arrives at the shrink, dies there
        r = reduce(w, vs_world_comm(w), &got);
        char path[_VS_STORE_PATH];
        _vs_store_name(w, path, sizeof path, "a0s%d", p->rank);
        _vs_store_write(w, path, "1\n", 0);
        while (!__atomic_load_n(&j->released, __ATOMIC_ACQUIRE)) _vs_sleep_us(1000);
        vs_comm_abort(vs_world_comm(w));
        vs_world_free(w);
        p->ok = 1;
        return NULL;
    }
    double t0 = _vs_now();
    r = reduce(w, vs_world_comm(w), &got); // the victim never joins it
    p->detect_s = _vs_now() - t0;
    char want[64];
    snprintf(want, sizeof want, "world rank %d", j->victim);
    p->failed_fast = r == VS_ERR_ABORTED && strstr(vs_last_error(), want) &&
                     strstr(vs_last_error(), j->gone ? "ended without a word" : j->silent ? "began a shrink" : "VS_ERR_INVALID");
    if (r != VS_ERR_ABORTED && r != VS_ERR_TIMEOUT) FAIL("step 2 gave %s, not a failure", vs_result_string(r));
    if (j->second) { // the first shrink's communicator never comes (a member died in it): shrink again
        r = vs_world_shrink(w, &p->shrink);
        if (r != VS_ERR_TIMEOUT || !strstr(vs_last_error(), "shrink again"))
            FAIL("the first shrink gave %s: %s", vs_result_string(r), vs_last_error());
        p->left = vs_comm_size(vs_world_comm(w)); // (the decision's size: 3)
        if ((r = vs_world_shrink(w, &p->grow))) FAIL("the second vs_world_shrink: %s", vs_last_error());
        if ((r = reduce(w, vs_world_comm(w), &p->after_shrink))) FAIL("all-reduce: %s", vs_last_error());
        p->ok = 1;
        goto out;
    }
    if (!j->mesh) {
        if ((r = vs_world_shrink(w, &p->shrink))) FAIL("vs_world_shrink: %s", vs_last_error());
    } else {
        if ((r = vs_mesh_shrink(m, "DP", &small, &p->shrink))) FAIL("vs_mesh_shrink: %s", vs_last_error());
        p->left = small == NULL;
    }
    if (!p->left && (r = reduce(w, vs_world_comm(w), &p->after_shrink)))
        FAIL("all-reduce after the shrink: %s", vs_last_error());
    if (j->silent) {
        p->ok = 1;
        goto out;
    }
    if (p->left) { // it comes back with the replacement
        vs_mesh_free(m);
        m = NULL;
        if ((r = vs_world_grow(w, &p->grow))) FAIL("left rank: vs_world_grow: %s", vs_last_error());
    } else {
        double end = _vs_now() + 30;
        int n = 0, want = j->mesh ? 2 : 1; // (the mesh: the rank that left and the replacement)
        while (n < want && _vs_now() < end) { // step boundaries: is everyone waiting?
            if ((r = vs_world_joiners(w, &n))) FAIL("vs_world_joiners: %s", vs_last_error());
            if (n < want) _vs_sleep_us(20000);
        }
        if (n != want) FAIL("vs_world_joiners counted %d, want %d", n, want);
        vs_mesh_free(small);
        small = NULL;
        vs_mesh_free(m);
        m = NULL;
        if ((r = vs_world_grow(w, &p->grow))) FAIL("vs_world_grow: %s", vs_last_error());
    }
    if (j->mesh) {
        vs_mesh_desc md = {{2, 2}, 0, {0}, NULL};
        if ((r = vs_mesh_init(w, &md, &m))) FAIL("vs_mesh_init after the grow: %s", vs_last_error());
    }
    if ((r = reduce(w, vs_world_comm(w), &p->after_grow))) FAIL("all-reduce after the grow: %s", vs_last_error());
    p->ok = 1;
out:
    vs_mesh_free(small);
    vs_mesh_free(m);
    vs_world_free(w);
    return NULL;
}

/* The store's names, one a line ("vs-<key>-<what>"): the directory's files,
   or the lighthouse's keys (its LIST, on a connection of the test's own). */
static vs_world* lh_client(const job* j)
{
    static vs_world c; /* (the fields _vs_lh_call uses) */
    memset(&c, 0, sizeof c);
    c.rank = -1, c.timeout = 5, c.efd = -1;
    snprintf(c.elastic_dir, sizeof c.elastic_dir, "%s", j->store); /* (its host and port, as the ranks dial them) */
    if (_vs_lh_open(&c, getenv("VESCALE_LIGHTHOUSE_TOKEN")) != VS_OK) pthread_mutex_init(&c.emu, NULL);
    return &c;
}

static void lh_done(vs_world* c)
{
    if (c->efd >= 0) close(c->efd);
    pthread_mutex_destroy(&c->emu);
}

static const char* store_names(const job* j)
{
    static char buf[8192];
    size_t len = 0;
    buf[0] = 0;
    if (j->tcp) {
        vs_world* c = lh_client(j);
        _vs_lh_call(c, _VS_LH_LIST, "vs-", NULL, buf, sizeof buf, NULL);
        lh_done(c);
        return buf;
    }
    DIR* d = opendir(j->dir);
    for (struct dirent* e; d && (e = readdir(d));)
        if (!strncmp(e->d_name, "vs-", 3) && len < sizeof buf)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s\n", e->d_name);
    if (d) closedir(d);
    return buf;
}

/* The store's entries of a kind: "vs-<key>-<kind>..." ("-a": arrivals). */
static int files_with(const job* j, const char* kind)
{
    int n = 0;
    for (const char* l = store_names(j); *l; l = strchr(l, '\n') + 1)
        n += strlen(l) > 19 && !strncmp(l + 19, kind, strlen(kind));
    return n;
}

/* The text of the store's entry whose name ends in `tail` ("" when none). */
static void file_text(const job* j, const char* tail, char* buf, size_t cap)
{
    char name[128] = "", path[400];
    const char* l = store_names(j);
    for (size_t n, t = strlen(tail); *l; l += n + 1) {
        n = strcspn(l, "\n");
        if (n >= t && n < sizeof name && !strncmp(l + n - t, tail, t)) memcpy(name, l, n), name[n] = 0;
    }
    buf[0] = 0;
    if (!name[0]) return;
    if (j->tcp) {
        vs_world* c = lh_client(j);
        _vs_lh_call(c, _VS_LH_GET, name, NULL, buf, cap, NULL);
        lh_done(c);
        return;
    }
    snprintf(path, sizeof path, "%s/%s", j->dir, name);
    FILE* f = fopen(path, "r");
    size_t k = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[k] = 0;
    if (f) fclose(f);
}

static int g_tcp;          /* the cases' store: 1 a lighthouse */
static const char* g_ext; /* VS_TEST_LIGHTHOUSE=host:port: one running elsewhere (tools/vescale-lighthouse) */

static void end_job(job* j)
{
    vs_lighthouse_stop(j->lh);
    j->lh = NULL;
    vt_clear_dir(j->dir);
}

static void run_job(job* j, proc* p)
{
    snprintf(j->dir, sizeof j->dir, "/tmp/vs_elastic_procs_XXXXXX");
    VT_CHECK(mkdtemp(j->dir) != NULL, "mkdtemp");
    snprintf(j->idfile, sizeof j->idfile, "%s/nccl_id", j->dir);
    snprintf(j->store, sizeof j->store, "%s", j->dir);
    j->tcp = g_tcp;
    if (j->tcp && g_ext) { // (one lighthouse for every case: a run id a case keeps them apart)
        static int cases;
        char id[64];
        snprintf(id, sizeof id, "test-elastic-procs-%ld-%d", (long)getpid(), ++cases);
        setenv("VESCALE_RUN_ID", id, 1);
        snprintf(j->store, sizeof j->store, "tcp://%s", g_ext);
    } else if (j->tcp) {
        VT_OK(vs_lighthouse_start("127.0.0.1", 0, &j->lh));
        snprintf(j->store, sizeof j->store, "tcp://127.0.0.1:%d", vs_lighthouse_port(j->lh));
    }
    j->p = p;
    pthread_t th[W];
    for (int i = 0; i < W; i++) {
        memset(&p[i], 0, sizeof p[i]);
        p[i].j = j, p[i].rank = i;
        pthread_create(&th[i], NULL, proc_main, &p[i]);
    }
    if (j->silent || j->second) { // released once every survivor is done
        for (int i = 0; i < W; i++)
            if (i != j->victim && !(j->second && i == j->second)) pthread_join(th[i], NULL);
        __atomic_store_n(&j->released, 1, __ATOMIC_RELEASE);
        pthread_join(th[j->victim], NULL);
        if (j->second) pthread_join(th[j->second], NULL);
    } else {
        for (int i = 0; i < W; i++) pthread_join(th[i], NULL);
    }
    for (int i = 0; i < W; i++) VT_CHECK(p[i].ok, "rank %d: %s", i, p[i].msg);
    double worst = 0;
    for (int i = 0; i < W; i++)
        if (i != j->victim && p[i].detect_s > worst) worst = p[i].detect_s;
    printf("    the survivors' step after the failure returned within %.0f ms (timeout %g s)\n", 1e3 * worst, j->timeout);
}

static void case_notice(void)
{
    job j;
    memset(&j, 0, sizeof j);
    j.timeout = 30, j.victim = 2;
    proc p[W];
    run_job(&j, p);
    for (int i = 0; i < W; i++) {
        if (i == j.victim) {
            VT_CHECK(p[i].after_grow == 10, "replacement: all-reduce %g, want 10", p[i].after_grow);
            VT_CHECK(p[i].grow.njoined == 1 && p[i].grow.joined[0] == 2 && p[i].grow.nlive == 4 && p[i].grow.epoch == 2,
                     "replacement's grow: joined %d [%d], live %d, epoch %d", p[i].grow.njoined, p[i].grow.joined[0],
                     p[i].grow.nlive, p[i].grow.epoch);
            continue;
        }
        VT_CHECK(p[i].failed_fast && p[i].detect_s < j.timeout / 4, "rank %d: the failure seen %s after %.2f s",
                 i, p[i].failed_fast ? "" : "without naming rank 2 and its error", p[i].detect_s);
        VT_CHECK(p[i].shrink.nfailed == 1 && p[i].shrink.failed[0] == 2 && p[i].shrink.nlive == 3 &&
                     p[i].shrink.epoch == 1 && !p[i].shrink.left,
                 "rank %d: shrink failed %d [%d], live %d, epoch %d", i, p[i].shrink.nfailed, p[i].shrink.failed[0],
                 p[i].shrink.nlive, p[i].shrink.epoch);
        VT_CHECK(p[i].after_shrink == 1 + 2 + 4, "rank %d: all-reduce on 3: %g, want 7", i, p[i].after_shrink);
        VT_CHECK(p[i].after_grow == 10 && p[i].grow.nlive == 4 && p[i].grow.njoined == 1,
                 "rank %d: after the grow %g (live %d, joined %d)", i, p[i].after_grow, p[i].grow.nlive,
                 p[i].grow.njoined);
    }
    VT_CHECK(files_with(&j, "-a") == 0 && files_with(&j, "-j") == 0, "arrivals or requests left:%s",
             store_names(&j));
    VT_CHECK(files_with(&j, "-d") == 2, "%d decisions, want 2:%s", files_with(&j, "-d"), store_names(&j));
    char dec[4096];
    file_text(&j, "-d1", dec, sizeof dec); // (the survivors' world handles were revoked, not aborted)
    VT_CHECK(strstr(dec, " shrink 1 "), "the shrink did not use ncclCommShrink: %s", dec);
    file_text(&j, "-d2", dec, sizeof dec);
    VT_CHECK(strstr(dec, " shrink 0 "), "a grow needs a new communicator: %s", dec);
    end_job(&j);
}

/* A silent victim (world rank 1): gone 0, it stops without a word and the
   others time out (3 s); gone 1, its process has ended and the others see it
   well before their timeout (20 s). Either way the survivors shrink to 3. */
static void case_silent(int gone)
{
    job j;
    memset(&j, 0, sizeof j);
    j.timeout = gone ? 20 : 3, j.victim = 1, j.silent = 1, j.gone = gone;
    proc p[W];
    run_job(&j, p);
    for (int i = 0; i < W; i++) {
        if (i == j.victim) continue;
        if (gone)
            VT_CHECK(p[i].failed_fast && p[i].detect_s < 5, "rank %d: the failure seen %s after %.2f s (timeout %g s)",
                     i, p[i].failed_fast ? "" : "without naming rank 1's process", p[i].detect_s, j.timeout);
        VT_CHECK(p[i].shrink.nfailed == 1 && p[i].shrink.failed[0] == 1 && p[i].shrink.nlive == 3,
                 "rank %d: shrink failed %d [%d], live %d", i, p[i].shrink.nfailed, p[i].shrink.failed[0],
                 p[i].shrink.nlive);
        VT_CHECK(p[i].after_shrink == 1 + 3 + 4, "rank %d: all-reduce on 3: %g, want 8", i, p[i].after_shrink);
    }
    end_job(&j);
}

static void case_second(void)
{
    job j;
    memset(&j, 0, sizeof j);
    j.timeout = 4, j.victim = 2, j.second = 1;
    proc p[W];
    run_job(&j, p);
    for (int i = 0; i < W; i++) {
        if (i == j.victim || i == j.second) continue;
        VT_CHECK(p[i].left == 3, "rank %d: after the first shrink the world has %d ranks, want 3", i, p[i].left);
        VT_CHECK(p[i].grow.epoch == 2 && p[i].grow.nfailed == 1 && p[i].grow.failed[0] == 1 && p[i].grow.nlive == 2,
                 "rank %d: the second shrink: epoch %d, failed %d [%d], live %d", i, p[i].grow.epoch,
                 p[i].grow.nfailed, p[i].grow.failed[0], p[i].grow.nlive);
        VT_CHECK(p[i].after_shrink == 1 + 4, "rank %d: all-reduce on 2: %g, want 5", i, p[i].after_shrink);
    }
    end_job(&j);
}

static void case_mesh(void)
{
    job j;
    memset(&j, 0, sizeof j);
    j.timeout = 30, j.victim = 3, j.mesh = 1;
    proc p[W];
    run_job(&j, p);
    /* DP2 x TP2: replica 1 is world ranks 2 and 3; rank 3 failed, rank 2 leaves */
    for (int i = 0; i < W; i++) {
        if (i == j.victim) {
            VT_CHECK(p[i].after_grow == 10, "replacement: all-reduce %g", p[i].after_grow);
            continue;
        }
        VT_CHECK(p[i].left == (i == 2), "rank %d: left %d", i, p[i].left);
        VT_CHECK(p[i].shrink.nfailed == 1 && p[i].shrink.failed[0] == 3 && p[i].shrink.ndropped == 1 &&
                     p[i].shrink.dropped[0] == 2 && p[i].shrink.nlive == 2,
                 "rank %d: shrink failed %d, dropped %d [%d], live %d", i, p[i].shrink.nfailed, p[i].shrink.ndropped,
                 p[i].shrink.dropped[0], p[i].shrink.nlive);
        if (i != 2) VT_CHECK(p[i].after_shrink == 1 + 2, "rank %d: all-reduce on DP1 x TP2: %g", i, p[i].after_shrink);
        VT_CHECK(p[i].after_grow == 10 && p[i].grow.nlive == 4 && p[i].grow.njoined == 2,
                 "rank %d: after the grow %g (live %d, joined %d)", i, p[i].after_grow, p[i].grow.nlive,
                 p[i].grow.njoined);
    }
    end_job(&j);
}

/* A world of one NCCL process, timeout 1 s: the misuse cases' start. */
static vs_world_desc one_rank_desc(void)
{
    vs_world_desc wd;
    memset(&wd, 0, sizeof wd);
    wd.transport = VS_TRANSPORT_NCCL;
    wd.world_size = 1;
    wd.device_select = VS_DEVICE_EXPLICIT;
    wd.timeout_s = 1;
    return wd;
}

static void case_bad_input(void)
{
    vs_world_desc wd = one_rank_desc();
    vs_world* w = NULL;
    wd.join = 1;
    VT_EXPECT_ERR(vs_world_init(&wd, &w), VS_ERR_INVALID, "join", "elastic directory");
    wd.join = 2;
    wd.elastic_dir = "/tmp";
    VT_EXPECT_ERR(vs_world_init(&wd, &w), VS_ERR_INVALID, "join 2", NULL);
    wd.join = 0;
    wd.elastic_dir = "";
    VT_EXPECT_ERR(vs_world_init(&wd, &w), VS_ERR_INVALID, "elastic_dir is empty", NULL);
    wd.elastic_dir = "/nonexistent/vescale";
    VT_EXPECT_ERR(vs_world_init(&wd, &w), VS_ERR_IO, "/nonexistent/vescale", NULL);
    wd.elastic_dir = NULL;
    setenv("VESCALE_ELASTIC_JOIN", "yes", 1);
    VT_EXPECT_ERR(vs_world_init(&wd, &w), VS_ERR_INVALID, "VESCALE_ELASTIC_JOIN='yes'", NULL);
    unsetenv("VESCALE_ELASTIC_JOIN");
    /* a world of processes without a directory: no agreement, said how to get one */
    VT_OK(vs_world_init(&wd, &w));
    VT_EXPECT_ERR(vs_world_shrink(w, NULL), VS_ERR_UNSUPPORTED, "VESCALE_ELASTIC_DIR", NULL);
    VT_EXPECT_ERR(vs_world_respawn(w, 0), VS_ERR_UNSUPPORTED, "VESCALE_ELASTIC_JOIN", NULL);
    vs_world_free(w);
    /* with one: a shrink with no failure, a joiner that nobody takes in */
    char dir[] = "/tmp/vs_elastic_bad_XXXXXX";
    VT_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    wd.elastic_dir = dir;
    VT_OK(vs_world_init(&wd, &w));
    vs_world_desc q;
    VT_OK(vs_world_query_desc(w, &q));
    VT_CHECK(q.elastic_dir && !strcmp(q.elastic_dir, dir) && !q.join, "query: elastic_dir %s, join %d",
             q.elastic_dir ? q.elastic_dir : "(null)", q.join);
    VT_EXPECT_ERR(vs_world_shrink(w, NULL), VS_ERR_STATE, "saw no failure", NULL);
    vs_world_free(w);
    wd.world_size = 2;
    wd.rank = 1;
    wd.local_rank = 1;
    wd.join = 1;
    VT_OK(vs_world_init(&wd, &w));
    VT_CHECK(vs_world_joining(w) && !vs_world_comm(w), "a joiner holds no communicator");
    VT_EXPECT_ERR(vs_world_shrink(w, NULL), VS_ERR_STATE, "vs_world_grow", NULL);
    int n = 0;
    VT_EXPECT_ERR(vs_world_joiners(w, &n), VS_ERR_STATE, NULL, NULL);
    VT_EXPECT_ERR(vs_world_grow(w, NULL), VS_ERR_TIMEOUT, "no grow of the world took world rank 1", NULL);
    /* a replacement for a rank whose process runs on this host (here: this test's parent) */
    char pf[200], text[300], host[256];
    _vs_host_id(host, sizeof host);
    snprintf(pf, sizeof pf, "%s/vs-%016llx-p1", dir, (unsigned long long)w->ekey);
    vs_world_free(w);
    snprintf(text, sizeof text, "%ld %s\n", (long)getppid(), host);
    FILE* f = fopen(pf, "w");
    if (f) fputs(text, f), fclose(f);
    VT_EXPECT_ERR(vs_world_init(&wd, &w), VS_ERR_INVALID, "world rank 1 is alive", NULL);
    unlink(pf);
    job j;
    memset(&j, 0, sizeof j);
    snprintf(j.dir, sizeof j.dir, "%s", dir);
    VT_CHECK(files_with(&j, "-j") == 0, "the joiner's request was not withdrawn");
    vt_clear_dir(dir);
}

/* A lighthouse's own misuse, and a job's misuse of one. */
static void case_bad_lighthouse(void)
{
    vs_lighthouse* lh = NULL;
    VT_EXPECT_ERR(vs_lighthouse_start(NULL, 70000, &lh), VS_ERR_INVALID, "port 70000", NULL);
    VT_EXPECT_ERR(vs_lighthouse_start(NULL, 0, NULL), VS_ERR_INVALID, "out is NULL", NULL);
    VT_EXPECT_ERR(vs_lighthouse_start("no.such.host.invalid", 0, &lh), VS_ERR_IO, "no.such.host.invalid", NULL);
    VT_OK(vs_lighthouse_start("127.0.0.1", 0, &lh));
    int port = vs_lighthouse_port(lh);
    VT_CHECK(port > 0 && vs_lighthouse_port(NULL) == 0, "port %d", port);
    vs_lighthouse* two = NULL;
    VT_EXPECT_ERR(vs_lighthouse_start("127.0.0.1", port, &two), VS_ERR_IO, "cannot listen", NULL);
    vs_lighthouse_stop(NULL);
    /* a stranger's garbage: that connection closed, the lighthouse serves on */
    job j;
    memset(&j, 0, sizeof j);
    j.lh = lh;
    snprintf(j.store, sizeof j.store, "tcp://127.0.0.1:%d", port);
    vs_world* c = lh_client(&j);
    VT_CHECK(c->efd >= 0, "connect");
    VT_CHECK(write(c->efd, "GET / HTTP/1.0\r\n\r\n", 18) == 18, "write");
    char t[64];
    struct pollfd pw = {c->efd, POLLIN, 0};
    VT_CHECK(poll(&pw, 1, 5000) == 1, "the lighthouse neither answered nor closed within 5 s");
    ssize_t got = recv(c->efd, t, sizeof t, 0); /* (closed: a FIN, or a reset when the close found bytes unread) */
    VT_CHECK(got == 0 || (got < 0 && errno == ECONNRESET), "the lighthouse answered garbage instead of closing: "
             "recv gave %zd (%s)", got, got < 0 ? strerror(errno) : "bytes");
    lh_done(c);
    c = lh_client(&j);
    VT_CHECK(_vs_lh_call(c, _VS_LH_LINK, "k", "one", NULL, 0, NULL) == 0, "LINK a new key");
    VT_CHECK(_vs_lh_call(c, _VS_LH_LINK, "k", "two", NULL, 0, NULL) == 1, "LINK an old key: not there first");
    VT_CHECK(_vs_lh_call(c, _VS_LH_GET, "k", NULL, t, sizeof t, NULL) == 0 && !strcmp(t, "one"), "GET k: %s", t);
    VT_CHECK(_vs_lh_call(c, _VS_LH_OWN, "p", "mine", NULL, 0, NULL) == 0, "OWN");
    lh_done(c); /* (its process ended: what it held reads "gone") */
    c = lh_client(&j);
    for (int i = 0; i < 100 && (_vs_lh_call(c, _VS_LH_GET, "p", NULL, t, sizeof t, NULL), strcmp(t, "gone")); i++)
        _vs_sleep_us(10000);
    VT_CHECK(!strcmp(t, "gone"), "an ended connection's entry reads '%s', want 'gone'", t);
    VT_CHECK(_vs_lh_call(c, _VS_LH_GONE, "", NULL, t, sizeof t, NULL) == 0 && !strcmp(t, "1"), "GONE: %s", t);
    lh_done(c);
    /* a process killed (SIGKILL) while it holds an entry: gone too */
    int ready[2];
    VT_CHECK(pipe(ready) == 0, "pipe");
    pid_t kid = fork();
    if (kid == 0) {
        vs_world* k = lh_client(&j);
        int ok = _vs_lh_call(k, _VS_LH_OWN, "q", "child", NULL, 0, NULL) == 0;
        if (write(ready[1], &ok, sizeof ok) != (ssize_t)sizeof ok) _exit(1);
        for (;;) pause();
    }
    int ok = 0;
    VT_CHECK(kid > 0 && read(ready[0], &ok, sizeof ok) == (ssize_t)sizeof ok && ok, "the child's OWN");
    close(ready[0]), close(ready[1]);
    c = lh_client(&j);
    VT_CHECK(_vs_lh_call(c, _VS_LH_GET, "q", NULL, t, sizeof t, NULL) == 0 && !strcmp(t, "child"), "q: %s", t);
    kill(kid, SIGKILL);
    waitpid(kid, NULL, 0);
    for (int i = 0; i < 100 && (_vs_lh_call(c, _VS_LH_GET, "q", NULL, t, sizeof t, NULL), strcmp(t, "gone")); i++)
        _vs_sleep_us(10000);
    VT_CHECK(!strcmp(t, "gone"), "a killed process's entry reads '%s', want 'gone'", t);
    lh_done(c);
    /* a job's misuse */
    vs_world_desc wd = one_rank_desc();
    vs_world* w = NULL;
    const char* bad[] = {"tcp://127.0.0.1", "tcp://:80", "tcp://127.0.0.1:0", "tcp://127.0.0.1:99999", "tcp://h:8x"};
    for (int i = 0; i < 5; i++) {
        wd.elastic_dir = bad[i];
        VT_EXPECT_ERR(vs_world_init(&wd, &w), VS_ERR_INVALID, bad[i], "tcp://host:port");
    }
    vs_lighthouse* gone = NULL; /* a port where nobody listens (a lighthouse's, stopped) */
    VT_OK(vs_lighthouse_start("127.0.0.1", 0, &gone));
    char addr[64];
    snprintf(addr, sizeof addr, "tcp://127.0.0.1:%d", vs_lighthouse_port(gone));
    vs_lighthouse_stop(gone);
    wd.elastic_dir = addr;
    VT_EXPECT_ERR(vs_world_init(&wd, &w), VS_ERR_IO, "cannot reach the lighthouse", addr);
    /* no failure; a joiner nobody takes in; a replacement for a rank that is alive */
    wd.elastic_dir = j.store;
    VT_OK(vs_world_init(&wd, &w));
    VT_EXPECT_ERR(vs_world_shrink(w, NULL), VS_ERR_STATE, "saw no failure", NULL);
    vs_world_free(w);
    wd.world_size = 2, wd.rank = 1, wd.local_rank = 1, wd.join = 1;
    VT_OK(vs_world_init(&wd, &w));
    VT_EXPECT_ERR(vs_world_grow(w, NULL), VS_ERR_TIMEOUT, "no grow of the world took world rank 1", NULL);
    vs_world* w2 = NULL; /* (w holds rank 1's entry while it lives) */
    VT_EXPECT_ERR(vs_world_init(&wd, &w2), VS_ERR_INVALID, "world rank 1 is alive", "lighthouse");
    vs_world_free(w);
    j.tcp = 1;
    VT_CHECK(files_with(&j, "-j") == 0, "the joiner's request was not withdrawn:\n%s", store_names(&j));
    vs_lighthouse_stop(lh);
}

int main(void)
{
    setenv("VS_STRICT_DELAY_US", "50", 0); /* a random delay before every stream operation */
    setenv("VS_STRICT_HANG_S", "60", 0);   /* a stand-in wait that long is a hang: reported, then exit */
    setenv("NCCL_CHECK_POINTERS", "1", 0);
    if ((g_ext = getenv("VS_TEST_LIGHTHOUSE")) && *g_ext) { // (tests/run.sh: the tool, a process of its own)
        g_tcp = 1;
        VT_CASE("procs/lighthouse process notice: as procs/notice, over tools/vescale-lighthouse", case_notice());
        VT_CASE("procs/lighthouse process gone: as procs/lighthouse gone, over tools/vescale-lighthouse",
                case_silent(1));
        VT_CASE("procs/lighthouse process mesh: as procs/mesh, over tools/vescale-lighthouse", case_mesh());
        return vt_summary();
    }
    VT_CASE("procs/notice: rank 2 fails and says so; 3 shrink with ncclCommShrink; a replacement process joins",
            case_notice());
    VT_CASE("procs/silent: rank 1 stops without a word; the others time out, agree it failed, reduce on 3",
            case_silent(0));
    VT_CASE("procs/gone: rank 1's process ends without a word: the others see it gone within a second, not at "
            "their 20 s timeout, and shrink", case_silent(1));
    VT_CASE("procs/second failure: rank 1 dies inside the shrink (after it arrived): the shrink times out, the "
            "world is at the decision's epoch, a second shrink goes on without rank 1", case_second());
    VT_CASE("procs/mesh: DP2 x TP2, rank 3 fails: its replica leaves, comes back with the replacement, 2 x 2 again",
            case_mesh());
    VT_CASE("procs/bad input: join without a directory, bad values, no failure, a joiner nobody takes in",
            case_bad_input());
    g_tcp = 1;
    VT_CASE("procs/lighthouse notice: as procs/notice, the store a lighthouse", case_notice());
    VT_CASE("procs/lighthouse silent: as procs/silent, the store a lighthouse", case_silent(0));
    VT_CASE("procs/lighthouse gone: rank 1's connection to the lighthouse closes (its process ended, on any host): "
            "the others see it within a second and shrink", case_silent(1));
    VT_CASE("procs/lighthouse second failure: as procs/second failure, the store a lighthouse", case_second());
    VT_CASE("procs/lighthouse mesh: as procs/mesh, the store a lighthouse", case_mesh());
    VT_CASE("procs/lighthouse bad input: its port, garbage from a stranger, a bad address, none there, a "
            "replacement for a live rank", case_bad_lighthouse());
    return vt_summary();
}
