/* test_ckpt_durable.c - a save's commit makes its checkpoint durable in the
   documented order (issue 19, point 9): every file of <path>.tmp-<nonce> and
   that directory are fsynced before it is renamed to <path>, and the parent
   is fsynced after the rename; on overwrite the old checkpoint is renamed away
   first and nothing of it is deleted before the new one's rename is durable.

   Linked with -Wl,--wrap=fsync,--wrap=rename,--wrap=renameat,--wrap=unlinkat
   (see the Makefile): the library's calls of those (this translation unit holds
   the whole library) land in the __wrap_ functions below, which log each call
   with the path it acts on (an fsync's descriptor named through
   /proc/self/fd/N, a *at call's directory descriptor the same way) and a start
   and an end tick of one clock shared by every thread. "A before B" means A's
   end tick comes before B's start tick, so ranks and the async save's
   background thread are ordered by what completed, not by when they logged.

   Each save runs on 2 thread ranks (each writes a shard) and is checked alone:
   a fresh path, an overwrite of it, and an async save to another path. */
#define VESCALE_IMPLEMENTATION
#include "../vescale_ckpt.h"
#include "vs_test.h"

#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int __real_fsync(int fd);
int __real_rename(const char* from, const char* to);
int __real_renameat(int fd1, const char* from, int fd2, const char* to);
int __real_unlinkat(int fd, const char* name, int flags);
int __wrap_fsync(int fd);
int __wrap_rename(const char* from, const char* to);
int __wrap_renameat(int fd1, const char* from, int fd2, const char* to);
int __wrap_unlinkat(int fd, const char* name, int flags);

enum { EV_FSYNC = 1, EV_RENAME, EV_UNLINK, MAXEV = 512, PATHCAP = 1024 };

typedef struct ev {
    int op;
    int rc;           // the real call's result
    long start, end;  // ticks
    char a[PATHCAP];  // fsync: the path; rename: from; unlink: the path
    char b[PATHCAP];  // rename: to
} ev;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static ev evs[MAXEV];
static int nev, overflow;
static long tick;

/* The path a descriptor is open on ("" when it cannot be told). */
static void fd_path(int fd, char* out, size_t cap)
{
    char link[64];
    out[0] = 0;
    if (fd == AT_FDCWD) {
        if (!getcwd(out, cap)) out[0] = 0;
        return;
    }
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, out, cap - 1);
    out[n > 0 ? n : 0] = 0;
}

static void at_path(int fd, const char* name, char* out, size_t cap)
{
    char dir[PATHCAP / 2]; // (paths here are short: room for the name)
    if (name[0] == '/') {
        snprintf(out, cap, "%s", name);
        return;
    }
    fd_path(fd, dir, sizeof dir);
    snprintf(out, cap, "%s/%s", dir, name);
}

/* Takes a slot and its start tick; NULL when the log is full. */
static ev* ev_begin(int op, const char* a, const char* b)
{
    pthread_mutex_lock(&mu);
    ev* e = NULL;
    if (nev < MAXEV) {
        e = &evs[nev++];
        memset(e, 0, sizeof *e);
        e->op = op;
        e->start = ++tick;
        snprintf(e->a, sizeof e->a, "%s", a);
        snprintf(e->b, sizeof e->b, "%s", b ? b : "");
    } else
        overflow = 1;
    pthread_mutex_unlock(&mu);
    return e;
}

static void ev_end(ev* e, int rc)
{
    pthread_mutex_lock(&mu);
    if (e) e->end = ++tick, e->rc = rc;
    pthread_mutex_unlock(&mu);
}

int __wrap_fsync(int fd)
{
    char p[PATHCAP];
    fd_path(fd, p, sizeof p); // (named before the call: what it makes durable)
    ev* e = ev_begin(EV_FSYNC, p, NULL);
    int rc = __real_fsync(fd);
    ev_end(e, rc);
    return rc;
}

int __wrap_rename(const char* from, const char* to)
{
    char a[PATHCAP], b[PATHCAP];
    at_path(AT_FDCWD, from, a, sizeof a);
    at_path(AT_FDCWD, to, b, sizeof b);
    ev* e = ev_begin(EV_RENAME, a, b);
    int rc = __real_rename(from, to);
    ev_end(e, rc);
    return rc;
}

int __wrap_renameat(int fd1, const char* from, int fd2, const char* to)
{
    char a[PATHCAP], b[PATHCAP];
    at_path(fd1, from, a, sizeof a);
    at_path(fd2, to, b, sizeof b);
    ev* e = ev_begin(EV_RENAME, a, b);
    int rc = __real_renameat(fd1, from, fd2, to);
    ev_end(e, rc);
    return rc;
}

int __wrap_unlinkat(int fd, const char* name, int flags)
{
    char a[PATHCAP];
    at_path(fd, name, a, sizeof a);
    ev* e = ev_begin(EV_UNLINK, a, NULL);
    int rc = __real_unlinkat(fd, name, flags);
    ev_end(e, rc);
    return rc;
}

/* ---- the saves ------------------------------------------------------------------ */

typedef struct job {
    const char* path;
    int overwrite, async;
} job;

static int save_rank(vs_world* w, void* arg)
{
    const job* j = (const job*)arg;
    vs_mesh* m = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = 2;
    VT_OK(vs_mesh_init(w, &md, &m));
    if (!m) return 1;
    vs_ckpt* ck = NULL;
    vs_ckpt_desc cd;
    memset(&cd, 0, sizeof cd);
    cd.mesh = m;
    VT_OK(vs_ckpt_init(&cd, &ck));
    float v[12]; // this rank's half of w [6,4] under Shard(0): each rank writes a shard
    for (int i = 0; i < 12; i++) v[i] = (float)(vs_world_rank(w) * 12 + i);
    uint64_t step = 7;
    vs_ckpt_entry en[2];
    memset(en, 0, sizeof en);
    en[0].name = "w";
    en[0].t.dtype = VS_F32;
    en[0].t.ndim = 2;
    en[0].t.shape[0] = 6;
    en[0].t.shape[1] = 4;
    en[0].t.data = v;
    VT_OK(vs_layout_parse(m, "[Shard(0)]", &en[0].t.layout));
    en[1].name = "step";
    en[1].kind = VS_CKPT_BLOB;
    en[1].blob = &step;
    en[1].blob_bytes = sizeof step;
    vs_ckpt_save_opts o = {j->async, j->overwrite};
    if (ck) VT_OK(vs_ckpt_save(ck, j->path, en, 2, &o));
    if (ck && j->async) VT_OK(vs_ckpt_wait(ck));
    if (ck) VT_OK(vs_ckpt_free(ck));
    VT_OK(vs_mesh_free(m));
    return 0;
}

static int starts_with(const char* s, const char* pre) { return strncmp(s, pre, strlen(pre)) == 0; }

/* The last successful fsync of exactly `path` that ended before tick `before`
   (0: any), or NULL. */
static const ev* fsync_of(const char* path, long before)
{
    const ev* f = NULL;
    for (int i = 0; i < nev; i++)
        if (evs[i].op == EV_FSYNC && evs[i].rc == 0 && !strcmp(evs[i].a, path) && (!before || evs[i].end < before))
            f = &evs[i];
    return f;
}

static void dump_log(void)
{
    static const char* const op[] = {"", "fsync", "rename", "unlink"};
    for (int i = 0; i < nev; i++)
        fprintf(stderr, "      [%ld,%ld] %s %s%s%s%s\n", evs[i].start, evs[i].end, op[evs[i].op], evs[i].a,
                evs[i].b[0] ? " -> " : "", evs[i].b, evs[i].rc ? " (failed)" : "");
}

/* One save, then its log against the order. */
static void check_save(const char* path, int overwrite, int async)
{
    pthread_mutex_lock(&mu);
    nev = 0, overflow = 0;
    pthread_mutex_unlock(&mu);
    job j = {path, overwrite, async};
    VT_CHECK(vs_launch(2, save_rank, &j) == VS_OK, "%s: launch: %s", path, vs_last_error());
    VT_CHECK(!overflow, "%s: more than %d logged calls", path, MAXEV);
    int before = vt_failures;

    char parent[PATHCAP], tmp_pre[PATHCAP], old_pre[PATHCAP];
    snprintf(parent, sizeof parent, "%s", path);
    *strrchr(parent, '/') = 0;
    snprintf(tmp_pre, sizeof tmp_pre, "%s.tmp-", path);
    snprintf(old_pre, sizeof old_pre, "%s.old-", path);

    /* the one rename that puts the checkpoint in place */
    const ev* mv = NULL;
    int nmv = 0;
    for (int i = 0; i < nev; i++)
        if (evs[i].op == EV_RENAME && !strcmp(evs[i].b, path) && starts_with(evs[i].a, tmp_pre) && evs[i].rc == 0)
            mv = &evs[i], nmv++;
    VT_CHECK(nmv == 1, "%s: %d renames of a %s* directory onto it", path, nmv, tmp_pre);
    if (!mv) {
        dump_log();
        return;
    }
    const char* tmp = mv->a;

    /* every file now in path: fsynced under the temporary name before the
       directory's fsync, which comes before the rename */
    const ev* dirsync = fsync_of(tmp, mv->start);
    VT_CHECK(dirsync != NULL, "%s: the temporary directory %s is not fsynced before its rename", path, tmp);
    DIR* d = opendir(path);
    VT_CHECK(d != NULL, "cannot list %s", path);
    int nfiles = 0, has_index = 0, nshards = 0;
    struct dirent* de;
    while (d && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char f[PATHCAP + 300];
        snprintf(f, sizeof f, "%s/%s", tmp, de->d_name);
        nfiles++;
        has_index += !strcmp(de->d_name, "index.json");
        nshards += strstr(de->d_name, ".safetensors") != NULL;
        const ev* fs = fsync_of(f, mv->start);
        VT_CHECK(fs != NULL, "%s: %s is not fsynced before the rename of %s", path, de->d_name, tmp);
        VT_CHECK(!fs || !dirsync || fs->end < dirsync->start,
                 "%s: %s's fsync [%ld,%ld] does not come before the directory's fsync [%ld,%ld]", path, de->d_name,
                 fs ? fs->start : 0, fs ? fs->end : 0, dirsync ? dirsync->start : 0, dirsync ? dirsync->end : 0);
    }
    if (d) closedir(d);
    VT_CHECK(has_index == 1 && nshards == 2 && nfiles == 3, "%s: %d files (%d index, %d shards), want index.json and 2 shards",
             path, nfiles, has_index, nshards);

    /* the parent after the rename */
    const ev* psync = NULL;
    for (int i = 0; i < nev; i++)
        if (evs[i].op == EV_FSYNC && evs[i].rc == 0 && !strcmp(evs[i].a, parent) && evs[i].start > mv->end) {
            psync = &evs[i];
            break;
        }
    VT_CHECK(psync != NULL, "%s: the parent %s is not fsynced after the rename", path, parent);

    /* overwrite: the old checkpoint renamed away before, and none of it removed
       (renamed to .del-, or a file unlinked) until the parent's fsync is done */
    int nold = 0;
    for (int i = 0; i < nev; i++) {
        const ev* e = &evs[i];
        if (e->op == EV_RENAME && !strcmp(e->a, path) && starts_with(e->b, old_pre)) {
            nold++;
            VT_CHECK(e->rc == 0 && e->end < mv->start, "%s: the old checkpoint's rename to %s does not come first", path,
                     e->b);
        }
        if ((e->op == EV_UNLINK || (e->op == EV_RENAME && strcmp(e->a, path))) && starts_with(e->a, old_pre))
            VT_CHECK(psync && e->start > psync->end, "%s: %s of %s before the new checkpoint's rename is durable", path,
                     e->op == EV_UNLINK ? "unlink" : "rename", e->a);
    }
    VT_CHECK(nold == overwrite, "%s: the old checkpoint renamed away %d times, want %d", path, nold, overwrite);
    if (overwrite) {
        int gone = 0; // and it is deleted in the end
        for (int i = 0; i < nev; i++) gone += evs[i].op == EV_UNLINK && starts_with(evs[i].a, old_pre) && evs[i].rc == 0;
        VT_CHECK(gone >= 4, "%s: %d unlinks of the old checkpoint (3 files and the directory)", path, gone);
    }
    if (vt_failures != before || getenv("VT_VERBOSE")) dump_log();
}

int main(void)
{
    char tmpl[] = "/tmp/vs_ckpt_durable_XXXXXX";
    if (!mkdtemp(tmpl)) return 1;
    char root[PATHCAP], p1[PATHCAP + 32], p2[PATHCAP + 32];
    int rfd = open(tmpl, O_RDONLY | O_DIRECTORY); // named as /proc/self/fd names it (/tmp may be a link)
    if (rfd < 0) return 1;
    fd_path(rfd, root, sizeof root);
    close(rfd);
    if (!root[0]) { // (Linux names descriptors there; the wrappers need it)
        vt_skip("durable", "/proc/self/fd cannot name a descriptor here");
        rmdir(tmpl);
        return vt_summary();
    }
    snprintf(p1, sizeof p1, "%s/step-000001", root);
    snprintf(p2, sizeof p2, "%s/step-000002", root);

    VT_CASE("durable: new path, files and dir fsynced before the rename, parent after", check_save(p1, 0, 0));
    VT_CASE("durable: overwrite, old renamed away first, deleted after the parent's fsync", check_save(p1, 1, 0));
    VT_CASE("durable: async save, the same order from the background thread", check_save(p2, 0, 1));

    char cmd[PATHCAP + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd)) return 1;
    return vt_summary();
}
