/* bench/elastic.c - issue 24's figures: how long a training job that loses a rank
   takes to go on in memory (vescale_mesh.h's >>elastic, vescale.h's
   vs_train_reconfigure), against a restart from a checkpoint measured in the same
   run, and what a replacement rank's state costs against memcpy.

       make bench-elastic            (builds build/bench_elastic and runs it)
       build/bench_elastic [--reps N] [--dim D] [--layers L] [--rows R] [--seq T]

   Model: the example GPT (examples/gpt.h; vocab 256, seq 32, dim 128, 8 heads, 4
   blocks by default: 0.83M parameters, 3.3 MB f32, with AdamW's two moments 10 MB
   of state a replica), 24 rows x 32 tokens a global batch, AdamW, ZeRO-0, 1F1B
   with PP microbatches, on 8 thread ranks (the threads transport): PP1 x DP4 x
   TP2 and PP2 x DP4 x TP1. A repetition (--reps, 7) of a mesh runs:

   (1) an elastic job. vs_parallelize; 4 steps (the first a warm-up; the others
       timed barrier to barrier: "one step"); vs_train_save to a folder under
       /tmp (ext4 here: fsync on, the library's default); then world rank 5 dies
       in the middle of the next step: a layer callback (every unit is wrapped)
       fails at half of the calls that rank makes in a step, and the rank frees
       its state and returns from its function, taking the time just before it
       returns: the failure. The survivors' vs_train_step returns
       VS_ERR_ABORTED; they call vs_mesh_shrink(mesh, "DP") (the agreement on
       the failed set and the smaller communicators: the victim's whole replica
       leaves, DP 4 -> 3), vs_train_reconfigure (no checkpoint: under ZeRO-0
       every replica holds all of the state) and take the interrupted step again
       on PP x DP3 x TP. Reported as the latest of the ranks at each point
       (every phase is collective, so the phases add up to the whole):
         detect        failure -> the last live rank's vs_train_step returned
                       (ranks computing when the rank died learn it at their next
                       communication)
         agree+shrink  -> the last vs_mesh_shrink returned (the rank that leaves
                       with the victim's replica takes part too)
         reconfigure   -> the last vs_train_reconfigure returned
         step          -> the last survivor's step on DP3 returned
         elastic       the sum: failure -> the first completed step on DP3
   (2) the checkpoint restart, after that job: what a restart pays up to its
       first completed step, from the checkpoint saved just before the failed
       step. No work is lost there; the steps since the last save that a real
       restart also takes again are left out (so is a scheduler's time to bring
       the processes back). Measured two ways:
         in process    a new vs_launch of the 6 ranks the smaller mesh needs,
                       vs_parallelize, vs_train_load, the first step (the latest
                       rank at each point, from the vs_launch call);
         new process   the same in a new process of this program (posix_spawn of
                       /proc/self/exe): exec and the program's start added, from
                       the spawn to the child's first step done (the monotonic
                       clock is the machine's).
       The first step's loss must equal the elastic one's (the same state and
       batch on the same mesh), so both paths did the same work.
       Targets (issue 24): elastic under one step + agree+shrink, and restart /
       elastic >= 10. Also shown: both without their first step.
   (3) the grow-back, in the same elastic job: after one more step on DP3 the
       survivors start a replacement for rank 5 (vs_world_respawn), wait until
       it and the rank that left are waiting (vs_world_joiners), then
       vs_world_grow, vs_mesh_init and vs_train_reconfigure on the whole mesh;
       the two newcomers hold no state (NULL) and receive it from a DP peer (a
       gather over DP): vs_reconfig_info.bytes_moved. Against memcpy of the
       same bytes on the same two threads at once (page-aligned buffers written
       before, median of 5), in the same job right after.
   (4) the elastic job again, with vs_train_reconfigure given a desc whose
       parameters' init is VS_INIT_ZEROS: vs_train_reconfigure builds the new
       state as vs_parallelize does, drawing every parameter's random init,
       which the move then overwrites; this job shows what that draw costs.

   Every figure is the median over the repetitions. Nothing is asserted on time;
   exit 1 when a run fails or a first loss on DP3 (the restarts', the second
   elastic job's) differs from the elastic job's by more than 1e-5 (relative).
   A survivor whose failed step returns another error than VS_ERR_ABORTED or
   VS_ERR_TIMEOUT shrinks all the same (its agreement decides what failed); the
   count is printed (seen: VS_ERR_MISMATCH "the stages run different
   schedules" on PP2, a pipeline receive posted ahead whose abort is dropped). */
#define VESCALE_IMPLEMENTATION
#include "../vescale.h"
#include "bench_util.h"
#include "../examples/gpt.h"

#include <math.h>
#include <spawn.h>
#include <sys/wait.h>

extern char** environ;

enum { MAXR = 8, NORMAL = 4, MAXREPS = 64, MC_REPS = 5 };

static gpt_config CFG = {256, 32, 128, 8, 4, 1234};
static int ROWS = 24;
static gpt_model_storage STORE;
static vs_model_desc MODEL;
static vs_layer_decl WRAPPED[GPT_MAX_UNITS];
static vs_model_desc WMODEL;
static vs_layer_decl ZWRAPPED[GPT_MAX_UNITS]; // the same, every parameter's init VS_INIT_ZEROS
static vs_model_desc ZMODEL;
static const int VICTIM = 5;

// >>fault: every unit's callbacks wrapped; a countdown per rank thread

static __thread int tl_calls;          // layer calls this thread made (counted in a normal step)
static __thread int tl_countdown = -1; // calls before this rank dies (-1: it does not)
static __thread double* tl_fault_at;   // where to note the fault's time

static int bench_fault(void)
{
    if (tl_countdown >= 0 && tl_countdown-- == 0) {
        if (tl_fault_at) *tl_fault_at = now();
        return 1;
    }
    tl_calls++;
    return 0;
}

#define EL_WRAP(name, field)                                                                              \
    static vs_result name(vs_pipe_call* c)                                                                \
    {                                                                                                     \
        if (bench_fault()) return vs_set_error(VS_ERR_INVALID, "world rank killed by the bench");        \
        return MODEL.layers[c->unit].unit.field(c);                                                       \
    }
EL_WRAP(el_forward, forward)
EL_WRAP(el_backward, backward)
EL_WRAP(el_backward_input, backward_input)
EL_WRAP(el_backward_weight, backward_weight)
#undef EL_WRAP

static void build_wrapped(void)
{
    for (int u = 0; u < MODEL.nlayers; u++) {
        WRAPPED[u] = MODEL.layers[u];
        vs_pipe_unit* x = &WRAPPED[u].unit;
        const vs_pipe_unit* o = &MODEL.layers[u].unit;
        x->forward = o->forward ? el_forward : NULL;
        x->backward = o->backward ? el_backward : NULL;
        x->backward_input = o->backward_input ? el_backward_input : NULL;
        x->backward_weight = o->backward_weight ? el_backward_weight : NULL;
    }
    WMODEL = MODEL;
    WMODEL.layers = WRAPPED;
    for (int u = 0; u < MODEL.nlayers; u++) {
        ZWRAPPED[u] = WRAPPED[u];
        for (int i = 0; i < ZWRAPPED[u].nparams; i++) {
            memset(&ZWRAPPED[u].params[i].init, 0, sizeof ZWRAPPED[u].params[i].init);
            ZWRAPPED[u].params[i].init.kind = VS_INIT_ZEROS;
        }
    }
    ZMODEL = WMODEL;
    ZMODEL.layers = ZWRAPPED;
}

// >>jobs ------------------------------------------------------------------------

/* One elastic job (8 ranks): what each rank saw, by world rank. */
typedef struct ejob {
    int pp, tp;
    int zinit; // vs_train_reconfigure gets a desc whose parameters' init is zeros (the move overwrites it)
    char dir[256], ckpt[300];
    double par[MAXR];           // vs_parallelize's time
    double normal[NORMAL];      // barrier-to-barrier steps (rank 0's clock)
    double save;                // vs_train_save (rank 0)
    double t_fault, t_ret;      // the victim: its layer failed, it returned
    double t_abort[MAXR], t_shrunk[MAXR], t_reconf[MAXR], t_done[MAXR];
    int live[MAXR], survivor[MAXR]; // live after the failure; still in the mesh after the shrink
    vs_reconfig_info shrink_ci[MAXR];
    double small_step;          // the next step on DP3, barrier to barrier
    double loss_el;             // the first step's loss on DP3
    // the grow-back
    double g_start[MAXR], g_reconf[MAXR];
    int newcomer[MAXR];
    vs_reconfig_info grow_ci[MAXR];
    double mc[MC_REPS][MAXR];   // memcpy of bytes_moved, per repetition and rank
    double loss_full;           // the step after the grow-back
    pthread_mutex_t mu;
    int other_err;        // survivors whose failed step returned neither VS_ERR_ABORTED nor VS_ERR_TIMEOUT
    char other_msg[600];  // the first one's error
    int err;
} ejob;

/* One restart (6 ranks): from the checkpoint the elastic job saved. */
typedef struct rjob {
    int pp, dp, tp;
    const char* ckpt;
    int64_t step;
    double t_launch; // just before vs_launch (or the spawn)
    double t_start[MAXR], t_par[MAXR], t_load[MAXR], t_done[MAXR];
    double loss;
    int err;
} rjob;

static void plan_of(int pp, int dp, int tp, vs_plan* p)
{
    memset(p, 0, sizeof *p);
    p->pp = pp, p->dp = dp, p->tp = tp;
    p->zero = VS_ZERO_0;
    p->schedule = VS_PIPE_1F1B;
    p->microbatches = pp;
}

static void desc_of(const vs_plan* p, vs_train_desc* d)
{
    memset(d, 0, sizeof *d);
    d->model = &WMODEL;
    d->plan = p;
    d->optim.kind = VS_OPTIM_ADAMW;
    d->lr.lr = 1e-3;
}

static vs_batch batch_of(int64_t step, int32_t* tok, int32_t* tgt)
{
    gpt_batch(&CFG, step, ROWS, tok, tgt);
    return gpt_batch_view(ROWS, CFG.seq, tok, tgt);
}

#define CHK(J, expr, what)                                                                                  \
    do {                                                                                                    \
        vs_result chk_ = (expr);                                                                            \
        if (chk_ != VS_OK) {                                                                                \
            fprintf(stderr, "bench elastic: world rank %d: %s: %s: %s\n", me, (what), vs_result_string(chk_), \
                    vs_last_error());                                                                       \
            (J)->err = 1;                                                                                   \
            goto out;                                                                                       \
        }                                                                                                   \
    } while (0)

static int el_rank(vs_world* w, void* arg)
{
    ejob* J = (ejob*)arg;
    const int me = vs_world_rank(w);
    const int pp = J->pp, tp = J->tp, dp = MAXR / (J->pp * J->tp);
    vs_plan plan;
    plan_of(pp, dp, tp, &plan);
    vs_train_desc d, rd; // vs_parallelize's, vs_train_reconfigure's
    desc_of(&plan, &d);
    rd = d;
    if (J->zinit) rd.model = &ZMODEL;
    vs_train* t = NULL;
    vs_mesh* small = NULL;
    char* src = NULL;
    char* dst = NULL;
    int32_t* tok = (int32_t*)malloc(sizeof(int32_t) * (size_t)ROWS * (size_t)CFG.seq);
    int32_t* tgt = (int32_t*)malloc(sizeof(int32_t) * (size_t)ROWS * (size_t)CFG.seq);
    double loss = 0;
    int64_t k = NORMAL;
    tl_countdown = -1, tl_calls = 0, tl_fault_at = NULL;
    if (!tok || !tgt) {
        J->err = 1;
        goto out;
    }
    if (vs_world_joining(w)) goto join; // the replacement for the victim
    {
        double t0 = now();
        CHK(J, vs_parallelize(w, &d, &t), "vs_parallelize");
        J->par[me] = now() - t0;
    }
    vs_comm* wc = vs_world_comm(w);
    int calls = 0;
    for (int i = 0; i < NORMAL; i++) {
        vs_batch b = batch_of(i, tok, tgt);
        CHK(J, vs_barrier(wc, NULL), "barrier");
        double t0 = now();
        tl_calls = 0;
        CHK(J, vs_train_step(t, &b, &loss), "a normal step");
        calls = tl_calls;
        CHK(J, vs_barrier(wc, NULL), "barrier");
        if (me == 0) J->normal[i] = now() - t0;
    }
    {
        double t0 = now();
        CHK(J, vs_train_save(t, J->ckpt, NULL, 0, 0), "vs_train_save");
        if (me == 0) J->save = now() - t0;
    }
    // the step the victim dies in, half-way through its calls
    CHK(J, vs_barrier(wc, NULL), "barrier");
    if (me == VICTIM) tl_countdown = calls / 2, tl_fault_at = &J->t_fault;
    {
        vs_batch b = batch_of(k, tok, tgt);
        vs_result r = vs_train_step(t, &b, &loss);
        if (me == VICTIM) {
            vs_train_free(t);
            t = NULL;
            free(tok), free(tgt);
            if (r == VS_OK) {
                fprintf(stderr, "bench elastic: the victim's step did not fail (it made %d calls)\n", calls);
                J->err = 1;
            }
            J->t_ret = now();
            return 1; // dead
        }
        J->t_abort[me] = now();
        J->live[me] = 1;
        if (r == VS_OK) CHK(J, VS_ERR_STATE, "the step with the failure returned VS_OK");
        if (r != VS_ERR_ABORTED && r != VS_ERR_TIMEOUT) { // (see the note at the top: it shrinks all the same)
            pthread_mutex_lock(&J->mu);
            if (!J->other_err) snprintf(J->other_msg, sizeof J->other_msg, "world rank %d: %s: %s", me,
                                        vs_result_string(r), vs_last_error());
            J->other_err++;
            pthread_mutex_unlock(&J->mu);
        }
    }
    {
        vs_reform_info ri;
        CHK(J, vs_mesh_shrink(vs_train_mesh(t), "DP", &small, &ri), "vs_mesh_shrink");
        J->t_shrunk[me] = now();
    }
    if (!small) { // left with the victim's replica: back at the grow
        vs_train_free(t);
        t = NULL;
        goto join;
    }
    J->survivor[me] = 1;
    {
        vs_reconfig_info ci;
        vs_result r = vs_train_reconfigure(&t, &rd, small, NULL, &ci);
        if (r) vs_mesh_free(small);
        small = NULL;
        CHK(J, r, "vs_train_reconfigure (shrink)");
        J->t_reconf[me] = now();
        J->shrink_ci[me] = ci;
    }
    wc = vs_world_comm(w);
    {
        vs_batch b = batch_of(k, tok, tgt);
        CHK(J, vs_train_step(t, &b, &loss), "the first step on the smaller mesh");
        J->t_done[me] = now();
        if (vs_comm_rank(wc) == 0) J->loss_el = loss;
        k++;
    }
    { // one more on the smaller mesh, timed as the normal ones
        vs_batch b = batch_of(k, tok, tgt);
        CHK(J, vs_barrier(wc, NULL), "barrier");
        double t0 = now();
        CHK(J, vs_train_step(t, &b, &loss), "a step on the smaller mesh");
        CHK(J, vs_barrier(wc, NULL), "barrier");
        if (vs_comm_rank(wc) == 0) J->small_step = now() - t0;
        k++;
    }
    // the grow-back: a replacement, and the rank that left, come in at a step boundary
    if (vs_comm_rank(wc) == 0) CHK(J, vs_world_respawn(w, VICTIM), "vs_world_respawn");
    for (double end = now() + 60;;) {
        int n = 0;
        CHK(J, vs_world_joiners(w, &n), "vs_world_joiners");
        if (n == pp * tp) break;
        if (now() > end) CHK(J, VS_ERR_TIMEOUT, "waiting 60 s for the newcomers (vs_world_joiners)");
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    J->g_start[me] = now();
    CHK(J, vs_world_grow(w, NULL), "vs_world_grow");
    goto grown;
join:
    J->newcomer[me] = 1;
    CHK(J, vs_world_grow(w, NULL), "vs_world_grow (newcomer)");
    J->g_start[me] = now();
grown: {
    vs_mesh* m = NULL;
    vs_mesh_desc md = {{pp, dp, tp}, 0, {"PP", "DP", "TP"}, NULL};
    CHK(J, vs_mesh_init(w, &md, &m), "vs_mesh_init");
    vs_reconfig_info ci;
    vs_result r = vs_train_reconfigure(&t, &rd, m, NULL, &ci);
    if (r) vs_mesh_free(m);
    CHK(J, r, "vs_train_reconfigure (grow)");
    J->g_reconf[me] = now();
    J->grow_ci[me] = ci;
    k = vs_train_steps(t);
}
    wc = vs_world_comm(w);
    { // memcpy of the bytes each rank received, on the same threads at once
        size_t nb = (size_t)J->grow_ci[me].bytes_moved;
        if (nb) {
            src = (char*)balloc(nb), dst = (char*)balloc(nb);
            if (!src || !dst) CHK(J, VS_ERR_NOMEM, "memcpy buffers");
            memcpy(dst, src, nb);
        }
        for (int i = 0; i < MC_REPS; i++) {
            CHK(J, vs_barrier(wc, NULL), "barrier");
            double t0 = now();
            if (nb) memcpy(i % 2 ? src : dst, i % 2 ? dst : src, nb);
            J->mc[i][me] = now() - t0;
        }
        CHK(J, vs_barrier(wc, NULL), "barrier");
    }
    { // a step on the whole mesh again
        vs_batch b = batch_of(k, tok, tgt);
        CHK(J, vs_train_step(t, &b, &loss), "the step after the grow-back");
        if (vs_comm_rank(wc) == 0) J->loss_full = loss;
    }
out:
    if (J->err) {
        vs_comm* c = vs_world_comm(w);
        if (c) vs_comm_abort(c);
    }
    vs_train_free(t);
    free(src), free(dst), free(tok), free(tgt);
    return J->err ? 1 : 0;
}

static int rs_rank(vs_world* w, void* arg)
{
    rjob* R = (rjob*)arg;
    const int me = vs_world_rank(w);
    R->t_start[me] = now();
    vs_plan plan;
    plan_of(R->pp, R->dp, R->tp, &plan);
    vs_train_desc d;
    desc_of(&plan, &d);
    vs_train* t = NULL;
    int32_t* tok = (int32_t*)malloc(sizeof(int32_t) * (size_t)ROWS * (size_t)CFG.seq);
    int32_t* tgt = (int32_t*)malloc(sizeof(int32_t) * (size_t)ROWS * (size_t)CFG.seq);
    double loss = 0;
    if (!tok || !tgt) {
        R->err = 1;
        goto out;
    }
    CHK(R, vs_parallelize(w, &d, &t), "vs_parallelize (restart)");
    R->t_par[me] = now();
    CHK(R, vs_train_load(t, R->ckpt, NULL, 0), "vs_train_load");
    R->t_load[me] = now();
    if (vs_train_steps(t) != R->step) {
        fprintf(stderr, "bench elastic: the checkpoint is at step %lld, not %lld\n", (long long)vs_train_steps(t),
                (long long)R->step);
        R->err = 1;
        goto out;
    }
    {
        vs_batch b = batch_of(R->step, tok, tgt);
        CHK(R, vs_train_step(t, &b, &loss), "the first step after the restart");
        R->t_done[me] = now();
        if (me == 0) R->loss = loss;
    }
out:
    if (R->err) vs_comm_abort(vs_world_comm(w));
    vs_train_free(t);
    free(tok), free(tgt);
    return R->err ? 1 : 0;
}

static vs_result launch(int n, vs_rank_fn fn, void* arg)
{
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = n;
    ld.timeout_s = 120;
    return vs_launch_ex(&ld, fn, arg);
}

static double maxof(const double* v, const int* use, int n)
{
    double m = -1;
    for (int i = 0; i < n; i++)
        if ((!use || use[i]) && v[i] > m) m = v[i];
    return m;
}

// >>child: the restart as a new process ------------------------------------------

/* bench_elastic --restart-child PP DP TP STEP CKPT OUT: the restart in this
   process; writes "t_main t_launch t_start t_par t_load t_done loss" to OUT. */
static int restart_child(char** a)
{
    double t_main = now();
    rjob R;
    memset(&R, 0, sizeof R);
    R.pp = atoi(a[0]), R.dp = atoi(a[1]), R.tp = atoi(a[2]), R.step = atoll(a[3]), R.ckpt = a[4];
    int n = R.pp * R.dp * R.tp;
    if (n < 1 || n > MAXR) return 2;
    R.t_launch = now();
    vs_result r = launch(n, rs_rank, &R);
    if (r || R.err) {
        fprintf(stderr, "bench elastic: the restart child failed: %s\n", vs_last_error());
        return 1;
    }
    FILE* f = fopen(a[5], "w");
    if (!f) return 1;
    fprintf(f, "%.9f %.9f %.9f %.9f %.9f %.9f %.17g\n", t_main, R.t_launch, maxof(R.t_start, NULL, n),
            maxof(R.t_par, NULL, n), maxof(R.t_load, NULL, n), maxof(R.t_done, NULL, n), R.loss);
    return fclose(f) ? 1 : 0;
}

/* The restart as a new process: t[0..6] as restart_child writes them, t_spawn before. */
static int restart_process(const rjob* R, const char* dir, double* t_spawn, double* t)
{
    char v[8][32], out[300];
    snprintf(v[0], 32, "%d", CFG.dim), snprintf(v[1], 32, "%d", CFG.layers), snprintf(v[2], 32, "%d", ROWS);
    snprintf(v[3], 32, "%d", CFG.seq), snprintf(v[4], 32, "%d", R->pp), snprintf(v[5], 32, "%d", R->dp);
    snprintf(v[6], 32, "%d", R->tp), snprintf(v[7], 32, "%lld", (long long)R->step);
    snprintf(out, sizeof out, "%s/child.txt", dir);
    char exe[] = "/proc/self/exe", f_dim[] = "--dim", f_lay[] = "--layers", f_rows[] = "--rows", f_seq[] = "--seq",
         flag[] = "--restart-child";
    char* argv[] = {exe,  f_dim, v[0], f_lay, v[1], f_rows, v[2], f_seq, v[3], flag,
                    v[4], v[5],  v[6], v[7],  (char*)R->ckpt, out, NULL};
    pid_t pid;
    *t_spawn = now();
    if (posix_spawn(&pid, exe, NULL, NULL, argv, environ)) return -1;
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) return -1;
    FILE* f = fopen(out, "r");
    int got = f ? fscanf(f, "%lf %lf %lf %lf %lf %lf %lf", &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &t[6]) : 0;
    if (f) fclose(f);
    return got == 7 ? 0 : -1;
}

// >>main -------------------------------------------------------------------------

/* One elastic job's figures, in seconds (and bytes). */
typedef struct efigs {
    double normal, small_step, save, par8;
    double fault_ret, detect, agree, reconf, step, elastic;
    double shrink_local;                                  // bytes a survivor copied from its own replica (max)
    double g_moved, g_local;                              // a newcomer's bytes received, a member's own copy (max)
    double g_reconf_new, g_reconf_all, g_memcpy;          // the grow's times
    double loss;                                          // the first step's on DP3
} efigs;

/* One repetition of a mesh: the elastic job, the restarts, the elastic job again
   with a zero-init desc for vs_train_reconfigure. */
typedef struct figs {
    efigs e, z;
    double r_launch, r_par, r_load, r_step, restart;
    double p_start, p_launch, p_par, p_load, p_step, restart_proc;
    double loss_r, loss_p;
} figs;

enum { NFIG = sizeof(figs) / sizeof(double) };
#define FIX(field) (offsetof(figs, field) / sizeof(double))

static double rel(double a, double b) { return fabs(a - b) / (fabs(b) > 1e-12 ? fabs(b) : 1e-12); }

static int OTHER_ERR, OTHER_JOBS, ELASTIC_JOBS; // survivors (jobs) with another error than VS_ERR_ABORTED
static char OTHER_MSG[600];

/* One elastic job; its checkpoint stays in dir (the caller removes it). */
static int elastic_job(int pp, int tp, int zinit, efigs* F, char* dir, size_t dcap, char* ckpt, size_t ccap)
{
    memset(F, 0, sizeof *F);
    ejob* J = (ejob*)calloc(1, sizeof(ejob));
    if (!J) return -1;
    J->pp = pp, J->tp = tp, J->zinit = zinit;
    pthread_mutex_init(&J->mu, NULL);
    snprintf(J->dir, sizeof J->dir, "/tmp/vs_bench_elastic_XXXXXX");
    if (!mkdtemp(J->dir)) {
        free(J);
        return -1;
    }
    snprintf(J->ckpt, sizeof J->ckpt, "%s/step_%03d", J->dir, NORMAL);
    snprintf(dir, dcap, "%s", J->dir);
    snprintf(ckpt, ccap, "%s", J->ckpt);
    vs_result r = launch(MAXR, el_rank, J);
    ELASTIC_JOBS++;
    int ok = !J->err && J->t_ret > 0 && r == VS_OK;
    if (!ok)
        fprintf(stderr, "bench elastic: PP%d x DP4 x TP%d: the elastic job failed (%s: %s)\n", pp, tp,
                vs_result_string(r), vs_last_error());
    if (ok) {
        double nm[NORMAL - 1];
        for (int i = 1; i < NORMAL; i++) nm[i - 1] = J->normal[i];
        F->normal = median(nm, NORMAL - 1);
        F->small_step = J->small_step;
        F->save = J->save;
        F->par8 = maxof(J->par, NULL, MAXR);
        double a = maxof(J->t_abort, J->live, MAXR), s = maxof(J->t_shrunk, J->live, MAXR);
        double c = maxof(J->t_reconf, J->survivor, MAXR), e = maxof(J->t_done, J->survivor, MAXR);
        F->fault_ret = J->t_ret - J->t_fault;
        F->detect = a - J->t_ret, F->agree = s - a, F->reconf = c - s, F->step = e - c, F->elastic = e - J->t_ret;
        for (int i = 0; i < MAXR; i++) {
            if (J->survivor[i] && J->shrink_ci[i].bytes_local > F->shrink_local)
                F->shrink_local = (double)J->shrink_ci[i].bytes_local;
            if (!J->newcomer[i] && J->grow_ci[i].bytes_local > F->g_local) F->g_local = (double)J->grow_ci[i].bytes_local;
            if (J->newcomer[i] && J->grow_ci[i].bytes_moved > F->g_moved) F->g_moved = (double)J->grow_ci[i].bytes_moved;
            if (J->newcomer[i] && J->grow_ci[i].seconds > F->g_reconf_new) F->g_reconf_new = J->grow_ci[i].seconds;
        }
        F->g_reconf_all = maxof(J->g_reconf, NULL, MAXR) - maxof(J->g_start, NULL, MAXR);
        double mc[MC_REPS];
        for (int i = 0; i < MC_REPS; i++) mc[i] = maxof(J->mc[i], J->newcomer, MAXR);
        F->g_memcpy = median(mc, MC_REPS);
        F->loss = J->loss_el;
        if (!isfinite(J->loss_el) || !isfinite(J->loss_full)) {
            fprintf(stderr, "bench elastic: a loss is not finite (%g, %g)\n", J->loss_el, J->loss_full);
            ok = 0;
        }
    }
    if (J->other_err) {
        OTHER_ERR += J->other_err, OTHER_JOBS++;
        if (!OTHER_MSG[0]) snprintf(OTHER_MSG, sizeof OTHER_MSG, "%s", J->other_msg);
    }
    pthread_mutex_destroy(&J->mu);
    free(J);
    return ok ? 0 : -1;
}

static void rm_dir(const char* dir)
{
    char cmd[320];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "bench elastic: could not remove %s\n", dir);
}

static int one_rep(int pp, int tp, figs* F)
{
    memset(F, 0, sizeof *F);
    char dir[256], ckpt[300];
    const int dp = MAXR / (pp * tp);
    int ok = elastic_job(pp, tp, 0, &F->e, dir, sizeof dir, ckpt, sizeof ckpt) == 0;
    rjob R;
    memset(&R, 0, sizeof R);
    R.pp = pp, R.dp = dp - 1, R.tp = tp, R.ckpt = ckpt, R.step = NORMAL;
    int n = pp * (dp - 1) * tp;
    if (ok) {
        R.t_launch = now();
        vs_result r = launch(n, rs_rank, &R);
        if (r || R.err) {
            fprintf(stderr, "bench elastic: the restart failed: %s\n", vs_last_error());
            ok = 0;
        }
    }
    if (ok) {
        double st = maxof(R.t_start, NULL, n), pa = maxof(R.t_par, NULL, n), lo = maxof(R.t_load, NULL, n);
        double dn = maxof(R.t_done, NULL, n);
        F->r_launch = st - R.t_launch, F->r_par = pa - st, F->r_load = lo - pa, F->r_step = dn - lo;
        F->restart = dn - R.t_launch;
        F->loss_r = R.loss;
        double t0, t[7];
        if (restart_process(&R, dir, &t0, t)) {
            fprintf(stderr, "bench elastic: the restart as a new process failed\n");
            ok = 0;
        } else {
            F->p_start = t[1] - t0, F->p_launch = t[2] - t[1], F->p_par = t[3] - t[2], F->p_load = t[4] - t[3];
            F->p_step = t[5] - t[4], F->restart_proc = t[5] - t0;
            F->loss_p = t[6];
        }
    }
    rm_dir(dir);
    if (ok) {
        ok = elastic_job(pp, tp, 1, &F->z, dir, sizeof dir, ckpt, sizeof ckpt) == 0;
        rm_dir(dir);
    }
    return ok ? 0 : -1;
}

static int usage(void)
{
    fprintf(stderr, "bench_elastic [--reps N] [--dim D] [--layers L] [--rows R] [--seq T]\n");
    return 2;
}

enum { NM = 2 };
static const int MESHES[NM][2] = {{1, 2}, {2, 1}}; // (PP, TP); DP 4
static figs ALL[NM][MAXREPS];
static int REPS = 7;

/* The median over the repetitions of figs' double at index f (per mesh), or of
   fn(figs) when fn is given. */
static void med_of(size_t f, double (*fn)(const figs*), double* out)
{
    for (int m = 0; m < NM; m++) {
        double v[MAXREPS];
        for (int i = 0; i < REPS; i++) v[i] = fn ? fn(&ALL[m][i]) : ((const double*)&ALL[m][i])[f];
        out[m] = median(v, REPS);
    }
}

static void row(const char* what, size_t f, double (*fn)(const figs*), const char* unit, double scale)
{
    double v[NM];
    med_of(f, fn, v);
    printf("%-60s", what);
    for (int m = 0; m < NM; m++) printf(" %13.2f", v[m] * scale);
    printf("  %s\n", unit);
}

static double f_ratio(const figs* F) { return F->restart / F->e.elastic; }
static double f_ratio_p(const figs* F) { return F->restart_proc / F->e.elastic; }
static double f_over(const figs* F) { return F->e.elastic - (F->e.normal + F->e.agree); }
static double f_ratio_z(const figs* F) { return F->restart / F->z.elastic; }
static double f_over_z(const figs* F) { return F->z.elastic - (F->z.normal + F->z.agree); }
static double f_ovh_e(const figs* F) { return F->e.detect + F->e.agree + F->e.reconf; }
static double f_ovh_z(const figs* F) { return F->z.detect + F->z.agree + F->z.reconf; }
static double f_ovh_r(const figs* F) { return F->r_launch + F->r_par + F->r_load; }
static double f_ovh_ratio(const figs* F) { return f_ovh_r(F) / f_ovh_e(F); }
static double f_ovh_ratio_z(const figs* F) { return f_ovh_r(F) / f_ovh_z(F); }
static double f_grow(const figs* F) { return F->e.g_reconf_new / F->e.g_memcpy; }
static double f_grow_z(const figs* F) { return F->z.g_reconf_new / F->z.g_memcpy; }

int main(int argc, char** argv)
{
    char** child = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--restart-child")) {
            if (i + 6 >= argc) return usage();
            child = &argv[i + 1];
            i += 6;
            continue;
        }
        if (i + 1 >= argc) return usage();
        int v = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--reps")) REPS = v;
        else if (!strcmp(argv[i], "--dim")) CFG.dim = v;
        else if (!strcmp(argv[i], "--layers")) CFG.layers = v;
        else if (!strcmp(argv[i], "--rows")) ROWS = v;
        else if (!strcmp(argv[i], "--seq")) CFG.seq = v;
        else return usage();
        i++;
    }
    if (REPS < 1 || REPS > MAXREPS || ROWS < 1 || ROWS % 12) {
        fprintf(stderr, "bench_elastic: --reps 1..%d, --rows a multiple of 12 (DP 4 and 3, 1 or 2 microbatches)\n",
                MAXREPS);
        return 2;
    }
    if (gpt_model(&CFG, &STORE, &MODEL) != VS_OK) {
        fprintf(stderr, "gpt_model: %s\n", vs_last_error());
        return 2;
    }
    build_wrapped();
    if (child) return restart_child(child);

    int64_t np = gpt_param_count(&CFG);
    char la[64];
    printf("# bench_elastic: GPT vocab %d seq %d dim %d heads %d blocks %d: %lld parameters (%.1f MB f32; with AdamW's "
           "moments %.1f MB a replica), %d rows x %d tokens a step, AdamW, ZeRO-0, 1F1B (PP microbatches), 8 thread "
           "ranks on %ld cores, load %s\n", CFG.vocab, CFG.seq, CFG.dim, CFG.heads, CFG.layers, (long long)np,
           4e-6 * (double)np, 12e-6 * (double)np, ROWS, CFG.seq, sysconf(_SC_NPROCESSORS_ONLN), loadavg(la, sizeof la));
    printf("# %d repetitions, meshes alternating; world rank %d dies half-way through its layer calls of step %d\n",
           REPS, VICTIM, NORMAL);
    fflush(stdout);
    int failed = 0;
    cpu_snap s0 = snap_now();
    for (int rep = 0; rep < REPS && !failed; rep++)
        for (int m = 0; m < NM && !failed; m++) {
            figs* F = &ALL[m][rep];
            if (one_rep(MESHES[m][0], MESHES[m][1], F)) {
                failed = 1;
                break;
            }
            printf("  rep %d PP%d x DP4 x TP%d: step %.1f ms; elastic %.1f ms (reconfigure %.1f), zero-init desc %.1f "
                   "ms (%.1f); restart %.1f ms, as a process %.1f ms; grow: %.1f ms / memcpy %.2f ms\n", rep,
                   MESHES[m][0], MESHES[m][1], 1e3 * F->e.normal, 1e3 * F->e.elastic, 1e3 * F->e.reconf,
                   1e3 * F->z.elastic, 1e3 * F->z.reconf, 1e3 * F->restart, 1e3 * F->restart_proc,
                   1e3 * F->e.g_reconf_new, 1e3 * F->e.g_memcpy);
            fflush(stdout);
            double d = fmax(rel(F->loss_r, F->e.loss), fmax(rel(F->loss_p, F->e.loss), rel(F->z.loss, F->e.loss)));
            if (!(d <= 1e-5)) {
                fprintf(stderr, "bench elastic: the first loss on DP3 differs between the elastic run (%.9g), the "
                        "restarts (%.9g, %.9g) and the zero-init run (%.9g)\n", F->e.loss, F->loss_r, F->loss_p,
                        F->z.loss);
                failed = 1;
            }
        }
    cpu_snap s1 = snap_now();
    if (failed) return 1;
    printf("\n# medians of %d repetitions (ms unless said); other programs used %.2f cores meanwhile\n", REPS,
           other_cores(s0, s1, s1.self - s0.self));
    printf("%-60s %13s %13s\n", "", "PP1xDP4xTP2", "PP2xDP4xTP1");
    row("one step on DP4 (8 ranks, barrier to barrier)", FIX(e.normal), NULL, "", 1e3);
    row("one step on DP3 (6 ranks, barrier to barrier)", FIX(e.small_step), NULL, "", 1e3);
    row("(vs_train_save before the failure, not counted)", FIX(e.save), NULL, "", 1e3);
    row("(the victim's layer fails -> the victim returns)", FIX(e.fault_ret), NULL, "", 1e3);
    row("ELASTIC: the victim returns -> first step done on DP3", FIX(e.elastic), NULL, "", 1e3);
    row("  detect: -> the last live rank's step returned", FIX(e.detect), NULL, "", 1e3);
    row("  agree+shrink: vs_mesh_shrink", FIX(e.agree), NULL, "", 1e3);
    row("  reconfigure: vs_train_reconfigure", FIX(e.reconf), NULL, "", 1e3);
    row("  the step on DP3", FIX(e.step), NULL, "", 1e3);
    row("  (state a survivor copied from its own replica)", FIX(e.shrink_local), NULL, "MB", 1e-6);
    row("RESTART in process: vs_launch -> first step done", FIX(restart), NULL, "", 1e3);
    row("  vs_launch of 6 thread ranks", FIX(r_launch), NULL, "", 1e3);
    row("  vs_parallelize", FIX(r_par), NULL, "", 1e3);
    row("  vs_train_load", FIX(r_load), NULL, "", 1e3);
    row("  the first step", FIX(r_step), NULL, "", 1e3);
    row("RESTART as a new process: spawn -> first step done", FIX(restart_proc), NULL, "", 1e3);
    row("  exec and the program's start", FIX(p_start), NULL, "", 1e3);
    row("  vs_launch of 6 thread ranks", FIX(p_launch), NULL, "", 1e3);
    row("  vs_parallelize", FIX(p_par), NULL, "", 1e3);
    row("  vs_train_load", FIX(p_load), NULL, "", 1e3);
    row("  the first step", FIX(p_step), NULL, "", 1e3);
    row("restart (in process) / elastic (target >= 10)", 0, f_ratio, "x", 1);
    row("restart (new process) / elastic (target >= 10)", 0, f_ratio_p, "x", 1);
    row("elastic - (one step on DP4 + agree+shrink) (target <= 0)", 0, f_over, "", 1e3);
    row("before the first step: elastic (detect+agree+reconfigure)", 0, f_ovh_e, "", 1e3);
    row("before the first step: restart (launch+parallelize+load)", 0, f_ovh_r, "", 1e3);
    row("  restart / elastic, both without their first step", 0, f_ovh_ratio, "x", 1);
    printf("# the same job, vs_train_reconfigure given a desc whose parameters' init is zeros (the\n"
           "# move overwrites every value: the random draw it skips is what it would have wasted)\n");
    row("ELASTIC (zero-init desc)", FIX(z.elastic), NULL, "", 1e3);
    row("  detect", FIX(z.detect), NULL, "", 1e3);
    row("  agree+shrink", FIX(z.agree), NULL, "", 1e3);
    row("  reconfigure", FIX(z.reconf), NULL, "", 1e3);
    row("  the step on DP3", FIX(z.step), NULL, "", 1e3);
    row("restart (in process) / elastic (zero-init desc)", 0, f_ratio_z, "x", 1);
    row("elastic (zero-init desc) - (one step + agree+shrink)", 0, f_over_z, "", 1e3);
    row("  restart / elastic (zero-init), both without their first step", 0, f_ovh_ratio_z, "x", 1);
    printf("\n# grow-back: a replacement for rank %d and the rank that left with it come in; each receives its state\n"
           "# from a DP peer (a gather over DP)\n", VICTIM);
    row("state moved to a newcomer (vs_reconfig_info.bytes_moved)", FIX(e.g_moved), NULL, "MB", 1e-6);
    row("(state a member copied from its own)", FIX(e.g_local), NULL, "MB", 1e-6);
    row("a newcomer's vs_train_reconfigure (info.seconds)", FIX(e.g_reconf_new), NULL, "", 1e3);
    row("the grow's reconfigure, all 8 ranks (latest)", FIX(e.g_reconf_all), NULL, "", 1e3);
    row("(vs_parallelize on 8 ranks at the job's start)", FIX(e.par8), NULL, "", 1e3);
    row("memcpy of the same bytes, the 2 newcomers at once", FIX(e.g_memcpy), NULL, "", 1e3);
    row("newcomer's reconfigure / memcpy", 0, f_grow, "x", 1);
    row("a newcomer's reconfigure, zero-init desc", FIX(z.g_reconf_new), NULL, "", 1e3);
    row("newcomer's reconfigure (zero-init desc) / memcpy", 0, f_grow_z, "x", 1);
    if (OTHER_ERR)
        printf("\n# %d survivors in %d of the %d elastic jobs got another error than VS_ERR_ABORTED from the step the "
               "victim died in (they shrank all the same); the first: %s\n", OTHER_ERR, OTHER_JOBS, ELASTIC_JOBS,
               OTHER_MSG);
    else
        printf("\n# every survivor's failed step returned VS_ERR_ABORTED or VS_ERR_TIMEOUT (%d elastic jobs)\n",
               ELASTIC_JOBS);
    for (int m = 0; m < NM; m++) {
        double v[12];
        med_of(FIX(e.normal), NULL, &v[0]), med_of(FIX(e.elastic), NULL, &v[2]), med_of(FIX(restart), NULL, &v[4]);
        med_of(0, f_ratio, &v[6]), med_of(0, f_over, &v[8]), med_of(0, f_grow, &v[10]);
        printf("summary elastic PP%dxDP4xTP%d step_ms=%.1f elastic_ms=%.1f restart_ms=%.1f restart_over_elastic=%.2f "
               "(target >= 10 %s) elastic_minus_step_plus_agree_ms=%.1f (target <= 0 %s) grow_over_memcpy=%.1f\n",
               MESHES[m][0], MESHES[m][1], 1e3 * v[m], 1e3 * v[2 + m], 1e3 * v[4 + m], v[6 + m],
               v[6 + m] >= 10 ? "PASS" : "FAIL", 1e3 * v[8 + m], v[8 + m] <= 0 ? "PASS" : "FAIL", v[10 + m]);
    }
    return 0;
}
