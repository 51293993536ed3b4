/* test_ckpt_safety.c - vescale_ckpt.h touches nothing outside the checkpoint
   folder and never blocks on a file that is not a regular one (issue 19, point 1).

   A "victim" directory outside the folder holds files (and an index.json, so it
   looks like a checkpoint through a link). Into the checkpoint folder go
   symbolic links to it under every name cleanup acts on: an old checkpoint
   (step-000001), an unfinished save (.tmp-), a replaced one (.old-), a delete
   (.del-), plus a real leftover directory holding a link and a FIFO. Then:
   - vs_ckpt_retain(folder, 1), and a save with keep_last = 1: the victim's files
     are all there, the links are left alone, the real old checkpoints are gone,
     the newest one loads; the leftover's regular files are deleted, its link and
     FIFO left (and so the directory);
   - a save with overwrite onto a path that is a link to the victim: the link is
     renamed away, never followed; the victim is intact and the new checkpoint loads;
   - vs_ckpt_latest never returns a link;
   - index.json or a shard that is a FIFO: vs_ckpt_load fails at once (within the
     alarm below, which would kill a hang) with VS_ERR_IO naming the file. */
#define VESCALE_IMPLEMENTATION
#include "../vescale_ckpt.h"
#include "vs_test.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char root[64], folder[96], victim[96];

static int exists(const char* p)
{
    struct stat st;
    return lstat(p, &st) == 0;
}

static void sh(const char* cmd)
{
    int rc = system(cmd);
    VT_CHECK(rc == 0, "%s: status %d", cmd, rc);
}

/* The victim (5 files and an index.json, all of which must survive) and an
   empty checkpoint folder. */
static void fresh(void)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "rm -rf %s %s && mkdir -p %s %s && for f in a b c d index.json; do echo keep > %s/$f; done && "
             "echo '{}' > %s/shard-00000.safetensors",
             victim, folder, victim, folder, victim, victim);
    sh(cmd);
}

static int victim_intact(void)
{
    const char* names[] = {"a", "b", "c", "d", "index.json", "shard-00000.safetensors"};
    char p[512];
    for (int i = 0; i < 6; i++) {
        snprintf(p, sizeof p, "%s/%s", victim, names[i]);
        if (!exists(p)) return 0;
    }
    return 1;
}

/* One entry: f32 [64] Replicate, values v * i + 1. */
typedef struct job {
    const char* path;
    int keep_last, overwrite, load;
    float v;
    vs_result want;
    char msg[512];
} job;

static int ckpt_rank(vs_world* w, void* arg)
{
    job* j = (job*)arg;
    vs_mesh* m = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = vs_world_size(w);
    VT_OK(vs_mesh_init(w, &md, &m));
    vs_ckpt_desc cd;
    memset(&cd, 0, sizeof cd);
    cd.mesh = m;
    cd.keep_last = j->keep_last;
    vs_ckpt* ck = NULL;
    VT_OK(vs_ckpt_init(&cd, &ck));
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = j->v * (float)i + 1.0f;
    vs_ckpt_entry e;
    memset(&e, 0, sizeof e);
    e.name = "x";
    e.t.dtype = VS_F32;
    e.t.ndim = 1;
    e.t.shape[0] = 64;
    e.t.layout.mesh = m;
    e.t.layout.p[0] = vs_replicate();
    e.t.data = x;
    vs_result r;
    if (!j->load) {
        vs_ckpt_save_opts so;
        memset(&so, 0, sizeof so);
        so.overwrite = j->overwrite;
        r = vs_ckpt_save(ck, j->path, &e, 1, &so);
    } else {
        float y[64];
        memset(y, 0, sizeof y);
        e.t.data = y;
        int loaded = 0;
        r = vs_ckpt_load(ck, j->path, &e, 1, &loaded);
        if (r == VS_OK)
            for (int i = 0; i < 64; i++) VT_CHECK(y[i] == x[i], "%s: x[%d] = %g, want %g", j->path, i, y[i], x[i]);
    }
    VT_CHECK(r == j->want, "%s %s: %s, want %s (%s)", j->load ? "load" : "save", j->path, vs_result_string(r),
             vs_result_string(j->want), vs_last_error());
    if (vs_mesh_rank(m) == 0) snprintf(j->msg, sizeof j->msg, "%s", r ? vs_last_error() : "");
    vs_ckpt_free(ck);
    vs_mesh_free(m);
    return 0;
}

static void run(const char* path, int keep_last, int overwrite, int load, float v, vs_result want, char* msg)
{
    job j;
    memset(&j, 0, sizeof j);
    j.path = path, j.keep_last = keep_last, j.overwrite = overwrite, j.load = load, j.v = v, j.want = want;
    VT_OK(vs_launch(2, ckpt_rank, &j));
    if (msg) snprintf(msg, 512, "%s", j.msg);
}

static void save_step(int step, int keep_last)
{
    char p[512];
    snprintf(p, sizeof p, "%s/step-%06d", folder, step);
    run(p, keep_last, 0, 0, (float)step, VS_OK, NULL);
}

/* Links to the victim under every name cleanup acts on, and a real leftover
   directory holding a regular file, a link to a victim file and a FIFO. */
static void plant(void)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd %s && ln -sfn %s step-000001 && ln -sfn %s step-000002.tmp-77 && ln -sfn %s step-000003.old-88 && "
             "ln -sfn %s step-000004.del- && mkdir -p step-000005.tmp-99 && echo x > step-000005.tmp-99/part && "
             "ln -sfn %s/a step-000005.tmp-99/link && mkfifo step-000005.tmp-99/fifo",
             folder, victim, victim, victim, victim, victim);
    sh(cmd);
}

static void case_retain(void)
{
    fresh();
    char p[512];
    save_step(10, 0);
    save_step(11, 0);
    save_step(12, 0);
    plant();
    VT_OK(vs_ckpt_retain(folder, 1));
    VT_CHECK(victim_intact(), "vs_ckpt_retain deleted files outside the folder (through a link)");
    const char* links[] = {"step-000001", "step-000002.tmp-77", "step-000003.old-88", "step-000004.del-"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", folder, links[i]);
        VT_CHECK(exists(p), "the link %s was removed or renamed (must be left alone)", links[i]);
    }
    snprintf(p, sizeof p, "%s/step-000010", folder);
    VT_CHECK(!exists(p), "the old checkpoint step-000010 is still there");
    snprintf(p, sizeof p, "%s/step-000011", folder);
    VT_CHECK(!exists(p), "the old checkpoint step-000011 is still there");
    snprintf(p, sizeof p, "%s/step-000005.tmp-99/part", folder);
    VT_CHECK(!exists(p), "the leftover's regular file was not deleted");
    snprintf(p, sizeof p, "%s/step-000005.tmp-99/fifo", folder);
    VT_CHECK(exists(p), "the leftover's FIFO was deleted (only regular files are)");
    char latest[512];
    VT_OK(vs_ckpt_latest(folder, latest, sizeof latest));
    snprintf(p, sizeof p, "%s/step-000012", folder);
    VT_CHECK(!strcmp(latest, p), "vs_ckpt_latest gives %s, want %s", latest, p);
    run(p, 0, 0, 1, 12.0f, VS_OK, NULL);
}

/* The same through keep_last: a save that keeps 1 cleans the folder. */
static void case_keep_last(void)
{
    fresh();
    char p[512];
    save_step(20, 0);
    plant();
    save_step(21, 1);
    VT_CHECK(victim_intact(), "a save with keep_last = 1 deleted files outside the folder (through a link)");
    snprintf(p, sizeof p, "%s/step-000020", folder);
    VT_CHECK(!exists(p), "keep_last = 1 left step-000020");
    snprintf(p, sizeof p, "%s/step-000001", folder);
    VT_CHECK(exists(p), "keep_last = 1 removed the link step-000001");
    snprintf(p, sizeof p, "%s/step-000021", folder);
    run(p, 0, 0, 1, 21.0f, VS_OK, NULL);
}

/* Overwrite onto a path that is a link to the victim. */
static void case_overwrite_link(void)
{
    fresh();
    char cmd[4096], p[512];
    snprintf(cmd, sizeof cmd, "ln -s %s %s/target", victim, folder);
    sh(cmd);
    snprintf(p, sizeof p, "%s/target", folder);
    run(p, 0, 0, 0, 3.0f, VS_ERR_STATE, NULL); // exists (a link counts), no overwrite
    run(p, 0, 1, 0, 3.0f, VS_OK, NULL);
    VT_CHECK(victim_intact(), "an overwrite of a link deleted the files it points at");
    struct stat st;
    VT_CHECK(lstat(p, &st) == 0 && S_ISDIR(st.st_mode), "the new checkpoint is not a directory at %s", p);
    run(p, 0, 0, 1, 3.0f, VS_OK, NULL);
}

/* index.json, then a shard, replaced by a FIFO: the load fails at once. */
static void case_fifo(void)
{
    fresh();
    char cmd[4096], p[512], msg[512];
    snprintf(p, sizeof p, "%s/fifo-index", folder);
    run(p, 0, 0, 0, 5.0f, VS_OK, NULL);
    snprintf(cmd, sizeof cmd, "cd %s && rm index.json && mkfifo index.json", p);
    sh(cmd);
    alarm(60); // a blocking open would hang here: the alarm ends the test with a failure
    run(p, 0, 0, 1, 5.0f, VS_ERR_IO, msg);
    VT_CHECK(strstr(msg, "index.json") && strstr(msg, "not a regular file"), "message: %s", msg);
    snprintf(p, sizeof p, "%s/fifo-shard", folder);
    run(p, 0, 0, 0, 6.0f, VS_OK, NULL);
    snprintf(cmd, sizeof cmd, "cd %s && f=$(ls *.safetensors | head -1) && rm $f && mkfifo $f", p);
    sh(cmd);
    run(p, 0, 0, 1, 6.0f, VS_ERR_IO, msg);
    VT_CHECK(strstr(msg, ".safetensors") && strstr(msg, "not a regular file"), "message: %s", msg);
    alarm(0);
}

/* Leftovers of killed saves: a .tmp- directory nobody holds goes at the next
   save or vs_ckpt_latest; one whose save is alive (a child process holding the
   save's lock, as _vs_ckpt_save_now does) stays until that process dies. */
static void case_stale(void)
{
    fresh();
    char cmd[4096], p[512], live[512];
    save_step(30, 0);
    snprintf(cmd, sizeof cmd, "cd %s && mkdir -p step-000031.tmp-dead && echo x > step-000031.tmp-dead/shard && "
             "mkdir -p step-000032.del- && echo x > step-000032.del-/shard", folder);
    sh(cmd);
    snprintf(live, sizeof live, "%s/step-000033.tmp-live", folder);
    VT_CHECK(mkdir(live, 0755) == 0, "mkdir %s", live);
    int go[2];
    VT_CHECK(pipe(go) == 0, "pipe");
    pid_t child = fork();
    if (child == 0) { // the live save: holds the lock, tells the parent, waits to be killed
        int fd = _vs_ckpt_hold(live);
        char c = fd >= 0 ? 'y' : 'n';
        if (write(go[1], &c, 1) != 1) _exit(1);
        for (;;) pause();
    }
    char c = 0;
    VT_CHECK(read(go[0], &c, 1) == 1 && c == 'y', "the child could not take the lock");
    char latest[512];
    VT_OK(vs_ckpt_latest(folder, latest, sizeof latest));
    snprintf(p, sizeof p, "%s/step-000031.tmp-dead", folder);
    VT_CHECK(!exists(p), "vs_ckpt_latest left the stale %s", p);
    snprintf(p, sizeof p, "%s/step-000032.del-", folder);
    VT_CHECK(!exists(p), "vs_ckpt_latest left the stale %s", p);
    VT_CHECK(exists(live), "vs_ckpt_latest removed %s, whose save is alive", live);
    save_step(34, 0);
    VT_CHECK(exists(live), "a save removed %s, whose save is alive", live);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    close(go[0]), close(go[1]);
    save_step(35, 0); // the killed save's directory is debris now
    VT_CHECK(!exists(live), "a save left %s after its process was killed", live);
    snprintf(p, sizeof p, "%s/step-000035", folder);
    run(p, 0, 0, 1, 35.0f, VS_OK, NULL);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    snprintf(root, sizeof root, "/tmp/vs_ckpt_safety_%d", (int)getpid());
    snprintf(folder, sizeof folder, "%s/ckpts", root);
    snprintf(victim, sizeof victim, "%s/victim", root);
    VT_CASE("ckpt_safety/retain_never_follows_links", case_retain());
    VT_CASE("ckpt_safety/keep_last_never_follows_links", case_keep_last());
    VT_CASE("ckpt_safety/overwrite_of_a_link", case_overwrite_link());
    VT_CASE("ckpt_safety/fifo_is_refused", case_fifo());
    VT_CASE("ckpt_safety/stale_leftovers_go", case_stale());
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd)) return 1;
    return vt_summary();
}
