/* test_ckpt_crash.c - vescale_ckpt.h's commit under SIGKILL at random points.

   The parent forks a child that saves small checkpoints (a few KiB, 2-4 thread
   ranks) into one folder in a loop: new names step-000001, step-000002, ... and
   now and then an overwrite of the newest (or the one before), with keep_last=2
   retention or none, synchronously or async. The parent kills the child with
   SIGKILL after a random delay (a fixed seed, VS_CRASH_SEED to vary it), then -
   itself never having saved - checks the folder on 1 rank:
   - vs_ckpt_latest names a checkpoint once one was committed, the newest name
     there is (never a partial save's);
   - every directory that looks complete (a checkpoint name, an index) loads in
     full, checksums verified, and holds the values of the formula for its name
     and for a version that was committed there or was being saved there;
   - the newest two committed checkpoints are still there (the newest alone when
     the save in flight completed a new name with retention);
   - some of the time vs_ckpt_retain, after which no leftovers remain and the
     newest `keep` complete checkpoints are the same as before.
   The child reports each save it began and each one that returned through a
   file both processes map. Three rounds from fixed seeds (VS_CRASH_SEED: the first),
   VS_CRASH_KILLS kills in all (1050).
   Also: a crash between the two renames of an overwrite (made by hand), and a
   crash in the middle of retention's deletes (made by hand). */
#define VESCALE_IMPLEMENTATION
#include "../vescale_ckpt.h"
#include "vs_test.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- what a checkpoint holds: every value a function of (step, version) ---- */

#define W0 64
#define W1 16 // "w": f32 [64, 16], Shard(0)
#define V0 20
#define V1 8 // "v": f64 [20, 8], Replicate (written by one rank)
#define Z0 32
#define Z1 10 // "z": f32 [32, 10], Replicate, saved as ZeRO ranges over the ranks
#define MAGIC 0x636b637261736821ull

typedef struct meta {
    uint64_t step, ver, magic, ranks;
} meta;

static uint32_t hash4(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    uint64_t h = 1469598103934665603ull;
    uint64_t v[4] = {a, b, c, d};
    for (int i = 0; i < 4; i++) h = (h ^ v[i]) * 1099511628211ull, h ^= h >> 29;
    return (uint32_t)h;
}
/* Element i of entry e: an integer below 2^24, exact in f32 and f64. */
static double val(int e, uint64_t step, uint64_t ver, int64_t i)
{
    return (double)(hash4((uint64_t)e, step, ver, (uint64_t)i) & 0xFFFFFF);
}

static uint64_t rng_next(uint64_t* s)
{
    uint64_t x = *s;
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return *s = x;
}

/* ---- what the child tells the parent: a file both map ---- */

#define LOGMAX 256
typedef struct prog {
    int inflight;  // rank 0 is between starting a save and recording that it returned
    int in_step, in_ver, in_over, in_keep, in_async;
    int ndone;     // saves that returned OK, in log[]
    int log_step[LOGMAX], log_ver[LOGMAX], log_keep[LOGMAX];
    int ready;     // the child's ranks are set up (the kill delay counts from here, mostly)
    int failed;    // a save returned an error
    char err[512];
} prog;

typedef struct child_ctx {
    const char* folder;
    prog* P;
    uint64_t seed;
    int next_step, ver0, newest, second; // newest/second: existing names to overwrite (0: none)
    int ops, plain; // ops > 0: stop after that many saves; plain: only new names, sync, no retention
} child_ctx;

static void path_of(char* out, size_t cap, const char* folder, int step)
{
    snprintf(out, cap, "%s/step-%06d", folder, step);
}

static int child_rank(vs_world* w, void* arg)
{
    child_ctx* c = (child_ctx*)arg;
    prog* P = c->P;
    vs_mesh* m = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = vs_world_size(w);
    if (vs_mesh_init(w, &md, &m)) return 1;
    vs_ckpt *ckk = NULL, *ck0 = NULL;
    if (vs_ckpt_init(&(vs_ckpt_desc){.mesh = m, .keep_last = 2}, &ckk)) return 1;
    if (vs_ckpt_init(&(vs_ckpt_desc){.mesh = m}, &ck0)) return 1;
    const int R = vs_mesh_rank(m), N = vs_world_size(w);
    vs_ckpt_entry en[4];
    memset(en, 0, sizeof en);
    en[0].name = "w";
    en[1].name = "v";
    en[2].name = "z";
    en[3].name = "meta";
    const int64_t shp[3][2] = {{W0, W1}, {V0, V1}, {Z0, Z1}};
    const char* lay[3] = {"[Shard(0)]", "[Replicate]", "[Replicate]"};
    const vs_dtype dt[3] = {VS_F32, VS_F64, VS_F32};
    void* buf[3];
    int64_t off[3][2], box[3][2], rb[3], re[3];
    for (int e = 0; e < 3; e++) {
        en[e].t.dtype = dt[e];
        en[e].t.ndim = 2;
        en[e].t.shape[0] = shp[e][0], en[e].t.shape[1] = shp[e][1];
        if (vs_layout_parse(m, lay[e], &en[e].t.layout)) return 1;
        if (vs_layout_local(&en[e].t.layout, 2, en[e].t.shape, R, box[e], off[e])) return 1;
        int64_t n = box[e][0] * box[e][1];
        rb[e] = 0, re[e] = n;
        if (e == 2) { // ZeRO: ranges of the replicated box
            rb[e] = n * R / N, re[e] = n * (R + 1) / N;
            en[e].kind = VS_CKPT_RANGE;
            en[e].range_begin = rb[e], en[e].range_end = re[e];
        }
        buf[e] = malloc((size_t)(re[e] - rb[e] + 1) * vs_dtype_size(dt[e]));
        en[e].t.data = buf[e];
    }
    meta mt;
    en[3].kind = VS_CKPT_BLOB;
    en[3].blob = &mt;
    en[3].blob_bytes = sizeof mt;
    if (R == 0) __atomic_store_n(&P->ready, 1, __ATOMIC_SEQ_CST);
    uint64_t rs = c->seed; // the same decisions on every rank
    int next = c->next_step, newest = c->newest, second = c->second;
    for (int op = 0; op < (c->ops ? c->ops : LOGMAX); op++) {
        uint64_t a = rng_next(&rs), b = rng_next(&rs);
        if (c->plain) a = 1;
        int over = newest && a % 4 == 0, keep = (a >> 8) % 2, async = (a >> 16) % 4 == 0;
        int step = over ? ((b % 4 == 0 && second) ? second : newest) : next++;
        int ver = c->ver0 + op;
        for (int e = 0; e < 3; e++)
            for (int64_t f = rb[e]; f < re[e]; f++) { // flat f of the box -> global index
                int64_t i0 = off[e][0] + f / box[e][1], i1 = off[e][1] + f % box[e][1];
                double v = val(e, (uint64_t)step, (uint64_t)ver, i0 * shp[e][1] + i1);
                if (dt[e] == VS_F32) ((float*)buf[e])[f - rb[e]] = (float)v;
                else ((double*)buf[e])[f - rb[e]] = v;
            }
        mt.step = (uint64_t)step, mt.ver = (uint64_t)ver, mt.magic = MAGIC, mt.ranks = (uint64_t)N;
        if (R == 0) {
            P->in_step = step, P->in_ver = ver, P->in_over = over, P->in_keep = keep, P->in_async = async;
            __atomic_store_n(&P->inflight, 1, __ATOMIC_SEQ_CST);
        }
        char path[512];
        path_of(path, sizeof path, c->folder, step);
        vs_ckpt_save_opts o = {async, over};
        vs_ckpt* ck = keep ? ckk : ck0;
        vs_result r = vs_ckpt_save(ck, path, en, 4, &o);
        if (!r && async) r = vs_ckpt_wait(ck);
        if (r) {
            if (!__atomic_exchange_n(&P->failed, 1, __ATOMIC_SEQ_CST))
                snprintf(P->err, sizeof P->err, "rank %d, save %.150s (over %d keep %d async %d): %.300s", R, path, over,
                         keep, async, vs_last_error());
            return 1;
        }
        if (R == 0) {
            int k = P->ndone;
            P->log_step[k] = step, P->log_ver[k] = ver, P->log_keep[k] = keep;
            __atomic_store_n(&P->ndone, k + 1, __ATOMIC_SEQ_CST);
            __atomic_store_n(&P->inflight, 0, __ATOMIC_SEQ_CST);
        }
        if (!over) second = newest, newest = step;
    }
    free(buf[0]), free(buf[1]), free(buf[2]);
    vs_ckpt_free(ckk), vs_ckpt_free(ck0), vs_mesh_free(m);
    return 0; // (the kill test's parent kills it long before)
}

/* ---- the parent's view ---- */

#define MAXSTEP 200000
static int* model; // model[step]: the version committed there (0: none, or deleted)
static int kills, in_save, left_tmp, left_old, left_del, orphans, completed_unreported, early_exits, retains, loads;
static int bad; // broken invariants (each also a failed check)

typedef struct names {
    int n, step[512];
    char nm[512][64]; // the directory's name (an orphan's is step-N.old-X)
    int leftovers;
} names;

/* "step-N.old-X" with an index while step-N has none: the old checkpoint of an
   overwrite that a crash stopped between its two renames; it still counts as step-N. */
static int is_orphan(const char* folder, const char* name, int* step)
{
    char tail, p[1024];
    struct stat st;
    const char* o = strstr(name, ".old-");
    if (!o || strstr(name, ".del-") || strstr(name, ".tmp-") || sscanf(name, "step-%d%c", step, &tail) != 2 || tail != '.')
        return 0;
    snprintf(p, sizeof p, "%s/%s/index.json", folder, name);
    if (stat(p, &st) != 0) return 0;
    snprintf(p, sizeof p, "%s/%.*s/index.json", folder, (int)(o - name), name);
    return stat(p, &st) != 0;
}

/* The folder as a reader sees it: checkpoint names with an index, and leftovers. */
static void list_folder(const char* folder, names* out)
{
    out->n = 0, out->leftovers = 0;
    DIR* d = opendir(folder);
    if (!d) return;
    struct dirent* de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        int s;
        char tail;
        if (sscanf(de->d_name, "step-%d%c", &s, &tail) == 1 || is_orphan(folder, de->d_name, &s)) {
            char p[1024];
            struct stat st;
            snprintf(p, sizeof p, "%s/%s/index.json", folder, de->d_name);
            if (strstr(de->d_name, ".old-")) orphans++;
            if (stat(p, &st) == 0 && st.st_size > 0 && out->n < 512) {
                snprintf(out->nm[out->n], sizeof out->nm[0], "%.60s", de->d_name);
                out->step[out->n++] = s;
            }
            else out->leftovers++; // (a checkpoint name without an index: counted, then failed below)
        } else {
            out->leftovers++;
            if (strstr(de->d_name, ".tmp-")) left_tmp++;
            if (strstr(de->d_name, ".old-")) left_old++;
            if (strstr(de->d_name, ".del-")) left_del++;
        }
    }
    closedir(d);
    for (int i = 1; i < out->n; i++) // newest first
        for (int j = i; j > 0 && out->step[j] > out->step[j - 1]; j--) {
            int t = out->step[j];
            char tn[64];
            out->step[j] = out->step[j - 1], out->step[j - 1] = t;
            memcpy(tn, out->nm[j], sizeof tn);
            memcpy(out->nm[j], out->nm[j - 1], sizeof tn);
            memcpy(out->nm[j - 1], tn, sizeof tn);
        }
}

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        bad++;                                                                                     \
        VT_CHECK(0, __VA_ARGS__);                                                                  \
    } while (0)

typedef struct load_job {
    const char* dir;
    meta got;
    int ok; // 1: loaded, verified, equal to the formula for got.step/got.ver
    char why[600];
} load_job;

static int load_rank(vs_world* w, void* arg)
{
    load_job* L = (load_job*)arg;
    L->ok = 0;
    vs_mesh* m;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = 1;
    if (vs_mesh_init(w, &md, &m)) return 1;
    vs_ckpt* ck;
    if (vs_ckpt_init(&(vs_ckpt_desc){.mesh = m}, &ck)) return 1;
    static float wb[W0 * W1], zb[Z0 * Z1];
    static double vb[V0 * V1];
    vs_ckpt_entry en[4];
    memset(en, 0, sizeof en);
    const char* nm[3] = {"w", "v", "z"};
    const int64_t shp[3][2] = {{W0, W1}, {V0, V1}, {Z0, Z1}};
    void* bufs[3] = {wb, vb, zb};
    const vs_dtype dt[3] = {VS_F32, VS_F64, VS_F32};
    for (int e = 0; e < 3; e++) {
        en[e].name = nm[e];
        en[e].t.dtype = dt[e];
        en[e].t.ndim = 2;
        en[e].t.shape[0] = shp[e][0], en[e].t.shape[1] = shp[e][1];
        en[e].t.data = bufs[e];
        vs_layout_parse(m, "[Replicate]", &en[e].t.layout);
    }
    memset(&L->got, 0, sizeof L->got);
    en[3].name = "meta";
    en[3].kind = VS_CKPT_BLOB;
    en[3].blob = &L->got;
    en[3].blob_bytes = sizeof L->got;
    int loaded[4] = {0};
    vs_result r = vs_ckpt_load(ck, L->dir, en, 4, loaded);
    if (r) snprintf(L->why, sizeof L->why, "load: %s", vs_last_error());
    else if (en[3].blob_bytes != sizeof(meta) || L->got.magic != MAGIC)
        snprintf(L->why, sizeof L->why, "meta blob of %zu bytes, magic %llx", en[3].blob_bytes,
                 (unsigned long long)L->got.magic);
    else {
        L->ok = 1;
        for (int e = 0; e < 3 && L->ok; e++)
            for (int64_t i = 0; i < shp[e][0] * shp[e][1]; i++) {
                double x = dt[e] == VS_F32 ? (double)((float*)bufs[e])[i] : ((double*)bufs[e])[i];
                if (x != val(e, L->got.step, L->got.ver, i)) {
                    snprintf(L->why, sizeof L->why, "entry %s[%lld] = %g, the formula for step %llu ver %llu says %g",
                             nm[e], (long long)i, x, (unsigned long long)L->got.step, (unsigned long long)L->got.ver,
                             val(e, L->got.step, L->got.ver, i));
                    L->ok = 0;
                    break;
                }
            }
    }
    vs_ckpt_free(ck);
    vs_mesh_free(m);
    return 0;
}

static int load_check(const char* dir, load_job* L)
{
    memset(L, 0, sizeof *L);
    L->dir = dir;
    if (vs_launch(1, load_rank, L)) snprintf(L->why, sizeof L->why, "launch: %s", vs_last_error());
    loads++;
    return L->ok;
}

/* The checks after one kill; P is what the dead child reported. */
static void check_after(const char* folder, const prog* P, int ever_committed, uint64_t* rs)
{
    // the saves that returned are committed (retention as the child did it)
    for (int k = 0; k < P->ndone; k++) {
        model[P->log_step[k]] = P->log_ver[k];
        if (P->log_keep[k]) { // keep_last = 2: only the newest two names stay
            int seen = 0;
            for (int s = MAXSTEP - 1; s > 0; s--)
                if (model[s] && ++seen > 2) model[s] = 0;
        }
    }
    int top[2] = {0, 0}, nt = 0;
    for (int s = MAXSTEP - 1; s > 0 && nt < 2; s--)
        if (model[s]) top[nt++] = s;
    names F;
    list_folder(folder, &F);
    int in_new_done = 0; // the save in flight made a new name that is there now
    for (int i = 0; i < F.n; i++) {
        int s = F.step[i];
        char dir[600];
        snprintf(dir, sizeof dir, "%s/%s", folder, F.nm[i]);
        load_job L;
        if (!load_check(dir, &L)) {
            FAIL("kill %d: %s looks complete but does not load: %s", kills, dir, L.why);
            continue;
        }
        int v = (int)L.got.ver;
        int was_inflight = P->inflight && s == P->in_step && v == P->in_ver;
        if ((int)L.got.step != s) FAIL("kill %d: %s holds step %llu", kills, dir, (unsigned long long)L.got.step);
        else if (!(model[s] && v == model[s]) && !was_inflight)
            FAIL("kill %d: %s holds version %d; committed there: %d; in flight: %s step %d ver %d", kills, dir, v,
                 model[s], P->inflight ? "yes" : "no", P->in_step, P->in_ver);
        if (was_inflight && v != model[s]) {
            completed_unreported++;
            if (!P->in_over) in_new_done = 1;
        }
    }
    // latest: the newest complete one, present whenever a save was ever committed
    char latest[700];
    vs_result r = vs_ckpt_latest(folder, latest, sizeof latest);
    if (F.n) {
        char want[600];
        snprintf(want, sizeof want, "%s/%s", folder, F.nm[0]);
        if (r) FAIL("kill %d: vs_ckpt_latest: %s (%d complete there)", kills, vs_last_error(), F.n);
        else if (strcmp(latest, want)) FAIL("kill %d: latest is %s, the newest complete is %s", kills, latest, want);
    } else if (ever_committed) {
        FAIL("kill %d: no complete checkpoint left after %d commits", kills, ever_committed);
    }
    if (!r && nt && strcmp(latest, "") && F.n && F.step[0] < top[0])
        FAIL("kill %d: latest step %d is older than the newest committed %d", kills, F.step[0], top[0]);
    // the newest committed ones are intact (loaded above): present
    for (int t = 0; t < nt; t++) {
        if (t == 1 && in_new_done && P->in_keep) break; // (the new one's retention may drop it)
        int found = 0;
        for (int i = 0; i < F.n; i++) found |= F.step[i] == top[t];
        if (!found)
            FAIL("kill %d: committed step-%06d (the %s) is gone; in flight: step %d over %d keep %d", kills, top[t],
                 t ? "one before the newest" : "newest", P->in_step, P->in_over, P->in_keep);
    }
    // the model is now what is there
    for (int s = 0; s < MAXSTEP; s++) model[s] = 0;
    for (int i = 0; i < F.n; i++) {
        load_job L;
        char dir[600];
        snprintf(dir, sizeof dir, "%s/%s", folder, F.nm[i]);
        if (load_check(dir, &L)) model[F.step[i]] = (int)L.got.ver;
    }
    // some of the time (or when the folder grows): retention, then nothing left over
    if (rng_next(rs) % 3 == 0 || F.n > 8) {
        int keep = 2 + (int)(rng_next(rs) % 2);
        retains++;
        if (vs_ckpt_retain(folder, keep)) FAIL("kill %d: vs_ckpt_retain(%d): %s", kills, keep, vs_last_error());
        names G;
        list_folder(folder, &G);
        if (G.leftovers) FAIL("kill %d: %d leftovers after vs_ckpt_retain", kills, G.leftovers);
        int want = F.n < keep ? F.n : keep;
        if (G.n != want) FAIL("kill %d: %d complete after vs_ckpt_retain(%d), %d before", kills, G.n, keep, F.n);
        for (int i = 0; i < G.n && i < want; i++)
            if (G.step[i] != F.step[i]) FAIL("kill %d: retain kept step %d, not %d", kills, G.step[i], F.step[i]);
        for (int i = want; i < F.n; i++) model[F.step[i]] = 0;
    }
}

static char root[256], folder[300];

static void case_kills(uint64_t seed, int want_kills)
{
    kills = in_save = left_tmp = left_old = left_del = orphans = completed_unreported = early_exits = retains = loads = 0;
    bad = 0;
    if (!seed) seed = 1;
    uint64_t rs = seed;
    char pf[320];
    snprintf(pf, sizeof pf, "%s/progress", root);
    int fd = open(pf, O_RDWR | O_CREAT | O_TRUNC, 0644);
    VT_CHECK(fd >= 0 && ftruncate(fd, sizeof(prog)) == 0, "progress file %s", pf);
    prog* P = (prog*)mmap(NULL, sizeof(prog), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    VT_CHECK(P != MAP_FAILED, "mmap");
    if (fd < 0 || P == MAP_FAILED) return;
    close(fd);
    model = (int*)calloc(MAXSTEP, sizeof(int));
    int next_step = 1, ver = 1, committed = 0, saves_done = 0;
    struct timespec ts0, ts1;
    clock_gettime(CLOCK_MONOTONIC, &ts0);
    while (kills < want_kills && bad < 5) {
        memset(P, 0, sizeof *P);
        child_ctx c;
        memset(&c, 0, sizeof c); // ops, plain: 0 (a child saves until it is killed); garbage made it end at once
        c.folder = folder;
        c.P = P;
        c.seed = rng_next(&rs) | 1;
        c.next_step = next_step;
        c.ver0 = ver;
        c.newest = c.second = 0;
        for (int s = MAXSTEP - 1; s > 0; s--)
            if (model[s]) {
                if (!c.newest) c.newest = s;
                else {
                    c.second = s;
                    break;
                }
            }
        int ranks = 2 + (int)(rng_next(&rs) % 3);
        // kill delay after the child's setup: mostly 0-3 ms (a save takes 1-3), some
        // longer (several saves); 1 in 10 counts from the fork (kills during setup)
        uint64_t u = rng_next(&rs);
        int from_fork = u % 10 == 9;
        long ns = u % 10 < 7 ? (long)(u >> 8) % 3000000 : u % 10 < 9 ? 3000000 + (long)(u >> 8) % 9000000
                                                                        : (long)(u >> 8) % 1000000;
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
            vs_result r = vs_launch(ranks, child_rank, &c);
            _exit(r ? 3 : 0);
        }
        VT_CHECK(pid > 0, "fork");
        if (pid < 0) break;
        struct timespec d = {0, ns}, poll = {0, 20000};
        for (int t = 0; !from_fork && t < 100000 && !__atomic_load_n(&P->ready, __ATOMIC_SEQ_CST); t++)
            nanosleep(&poll, NULL);
        nanosleep(&d, NULL);
        kill(pid, SIGKILL);
        int st = 0;
        waitpid(pid, &st, 0);
        if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) kills++;
        else early_exits++;
        if (P->failed) FAIL("a save in the child failed: %s", P->err);
        else if (WIFSIGNALED(st) && WTERMSIG(st) != SIGKILL)
            FAIL("the child died of signal %d (not the test's SIGKILL)", WTERMSIG(st));
        else if (!WIFSIGNALED(st) && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
            FAIL("the child ended with status %d", st);
        in_save += P->inflight;
        saves_done += P->ndone;
        committed += P->ndone;
        check_after(folder, P, committed, &rs);
        // the next child goes on after everything this one may have begun
        int top = 0;
        for (int s = MAXSTEP - 1; s > 0 && !top; s--)
            if (model[s]) top = s;
        int last = P->inflight ? P->in_step : P->ndone ? P->log_step[P->ndone - 1] : 0;
        next_step = (top > last ? top : last) + 1;
        if (next_step < c.next_step) next_step = c.next_step;
        if (P->inflight && !P->in_over && P->in_step >= next_step) next_step = P->in_step + 1;
        ver = c.ver0 + P->ndone + 1;
        if (next_step > MAXSTEP - LOGMAX - 2) break;
    }
    clock_gettime(CLOCK_MONOTONIC, &ts1);
    double secs = (double)(ts1.tv_sec - ts0.tv_sec) + 1e-9 * (double)(ts1.tv_nsec - ts0.tv_nsec);
    printf("    crash: seed %llu, %d kills (%d during a save: %d of them completed it unreported), %d child ends "
           "before the kill, %d saves returned, %d leftovers of interrupted saves seen (%d .tmp-, %d .old-), "
           "%d retains, %d loads, %d broken invariants, %.1f s\n",
           (unsigned long long)seed, kills, in_save, completed_unreported, early_exits, saves_done,
           left_tmp + left_old, left_tmp, left_old, retains, loads, bad, secs);
    printf("    crash: %d half-deleted checkpoints seen (.del-), %d orphans of an overwrite between its renames\n",
           left_del, orphans);
    VT_CHECK(kills >= want_kills, "%d kills, wanted %d", kills, want_kills);
    VT_CHECK(in_save * 3 >= kills, "only %d of %d kills landed during a save", in_save, kills);
    munmap(P, sizeof *P);
    free(model);
}

/* Saves plain new checkpoints step-<first>.. on 1 rank (version = step). */
static void save_plain(const char* dir, int first, int count)
{
    prog P;
    memset(&P, 0, sizeof P);
    child_ctx c;
    memset(&c, 0, sizeof c);
    c.folder = dir, c.P = &P, c.seed = 7, c.next_step = first, c.ver0 = first, c.ops = count, c.plain = 1;
    VT_CHECK(vs_launch(1, child_rank, &c) == VS_OK && !P.failed, "save: %s", P.err);
}

static int ver_at(const char* dir)
{
    load_job L;
    return load_check(dir, &L) ? (int)L.got.ver : -1;
}

/* Crashes made by hand where the random kills seldom land. */
static void case_by_hand(void)
{
    char f[320], a[700], b[700], latest[700];
    struct stat st;
    snprintf(f, sizeof f, "%s/hand", root);
    VT_CHECK(mkdir(f, 0755) == 0, "mkdir %s", f);
    save_plain(f, 1, 2);
    // an overwrite of step-000002 stopped between its renames: the old one is
    // renamed away, the new one not yet in place
    snprintf(a, sizeof a, "%s/step-000002", f);
    snprintf(b, sizeof b, "%s/step-000002.old-00000000000000aa", f);
    VT_CHECK(rename(a, b) == 0, "rename");
    snprintf(a, sizeof a, "%s/step-000002.tmp-00000000000000aa", f);
    VT_CHECK(mkdir(a, 0755) == 0, "mkdir");
    VT_OK(vs_ckpt_latest(f, latest, sizeof latest));
    VT_CHECK(!strcmp(latest, b), "latest is %s, not the old step-000002 (%s)", latest, b);
    VT_CHECK(ver_at(latest) == 2, "latest holds %d", ver_at(latest));
    VT_OK(vs_ckpt_retain(f, 2));
    snprintf(a, sizeof a, "%s/step-000002", f);
    VT_CHECK(ver_at(a) == 2, "step-000002 after retain holds %d (retain deleted the old one?)", ver_at(a));
    names G;
    list_folder(f, &G);
    VT_CHECK(G.n == 2 && !G.leftovers, "%d complete, %d leftovers", G.n, G.leftovers);
    // a replaced checkpoint whose delete was stopped (its successor in place):
    // never taken for the name, deleted by retain, even when the name goes too
    save_plain(f, 3, 1);
    snprintf(a, sizeof a, "%s/step-000003", f);
    snprintf(b, sizeof b, "%s/step-000001.old-00000000000000bb", f);
    VT_CHECK(rename(a, b) == 0, "rename");
    save_plain(f, 4, 1);
    VT_OK(vs_ckpt_latest(f, latest, sizeof latest));
    VT_CHECK(strstr(latest, "/step-000004") != NULL, "latest %s", latest);
    VT_OK(vs_ckpt_retain(f, 1));
    list_folder(f, &G);
    VT_CHECK(G.n == 1 && G.step[0] == 4 && !G.leftovers, "%d complete (first %d), %d leftovers", G.n, G.step[0],
             G.leftovers);
    VT_CHECK(stat(b, &st) != 0, "%s kept", b);
    // a delete stopped midway: hidden under .del- and removed by retain
    snprintf(a, sizeof a, "%s/step-000009.del-", f);
    VT_CHECK(mkdir(a, 0755) == 0, "mkdir");
    VT_OK(vs_ckpt_latest(f, latest, sizeof latest));
    VT_CHECK(strstr(latest, "/step-000004") != NULL, "latest %s", latest);
    VT_OK(vs_ckpt_retain(f, 1));
    VT_CHECK(stat(a, &st) != 0, "%s kept", a);
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/vs_ckcrash_XXXXXX");
    if (!mkdtemp(root)) return 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* Three rounds, each from its own fixed seed (VS_CRASH_SEED: the first). */
    const char* e = getenv("VS_CRASH_SEED");
    uint64_t seed = e ? strtoull(e, NULL, 0) : 20261123ull;
    e = getenv("VS_CRASH_KILLS");
    int total = e ? atoi(e) : 1050;
    vt_begin("ckpt_crash/kills");
    for (int round = 0; round < 3; round++) {
        snprintf(folder, sizeof folder, "%s/ck%d", root, round);
        if (mkdir(folder, 0755)) return 1;
        case_kills(seed + (uint64_t)round * 1000003ull, (total + 2) / 3);
    }
    vt_end("ckpt_crash/kills");
    vt_begin("ckpt_crash/by_hand");
    case_by_hand();
    vt_end("ckpt_crash/by_hand");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd)) return 1;
    return vt_summary();
}
