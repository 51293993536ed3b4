/* bench/elastic_mpi.c - issue 24's figures on real processes: an MPI job with
   ULFM that loses a process goes on in memory, against the checkpoint restart
   of the same job, measured in the same run (bench/elastic_mpi.sh runs it).

       make bench-elastic-mpi VESCALE_ULFM_MPI=<an Open MPI 5 prefix>

   Model: the example GPT (examples/gpt.h: vocab 256, seq 32, dim 128, 8 heads,
   4 blocks, 0.83M parameters), 24 rows a global batch, AdamW, ZeRO-0, on 4
   processes, PP1 x DP2 x TP2. Three modes, one mpirun each:

   elastic DIR  (mpirun --with-ft ulfm -np 4) vs_parallelize, 4 steps (the
                first a warm-up, the others timed barrier to barrier: "one
                step"), vs_train_save to DIR/ckpt; then world rank 3 notes the
                time (CLOCK_MONOTONIC: the machine's) in DIR/fail_at and kills
                its own process (SIGKILL) at the start of step 4. The survivors'
                step returns VS_ERR_ABORTED (detect); vs_mesh_shrink (agree:
                MPIX_Comm_shrink; world rank 2 leaves with the failed replica);
                vs_train_reconfigure onto DP1 x TP2 from memory (reconfigure);
                step 4 again (step). The latest survivor at each point. Prints
                one line: "elastic <fail> <detect> <agree> <reconf> <step>
                <normal step> <loss>" (times in seconds).
   die DIR      (plain mpirun -np 4) the same job up to the save and the kill:
                without ULFM the runtime ends the job. What a restart pays
                first: the failure's detection and the job's end.
   restart DIR  (plain mpirun -np 2) the restart on the processes left (PP1 x
                DP1 x TP2): MPI start, vs_world_init, vs_parallelize,
                vs_train_load DIR/ckpt, step 4. Prints "restart <done> <loss>":
                from DIR/fail_at to <done> is the restart's whole cost, up to its
                first completed step, less a scheduler's and the steps since the
                save (none here).
   Both paths end with step 4 on DP1 x TP2 from the same state: their losses
   must agree (the script checks). */
#define VESCALE_IMPLEMENTATION
#include "../vescale.h"
#include "bench_util.h"
#include "../examples/gpt.h"

#include <signal.h>

static gpt_config CFG = {256, 32, 128, 8, 4, 1234};
enum { ROWS = 24, NORMAL = 4, VICTIM = 3 };
static gpt_model_storage STORE;
static vs_model_desc MODEL;

static vs_train_desc desc_of(vs_plan* p, int dp)
{
    memset(p, 0, sizeof *p);
    p->pp = 1, p->dp = dp, p->tp = 2;
    p->zero = VS_ZERO_0;
    p->microbatches = 1;
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &MODEL;
    d.plan = p;
    d.optim.kind = VS_OPTIM_ADAMW;
    d.lr.lr = 1e-3;
    return d;
}

static vs_result step(vs_train* t, double* loss)
{
    static int32_t tok[ROWS * 32], tgt[ROWS * 32];
    gpt_batch(&CFG, vs_train_steps(t), ROWS, tok, tgt);
    vs_batch b = gpt_batch_view(ROWS, CFG.seq, tok, tgt);
    return vs_train_step(t, &b, loss);
}

static int fail(int me, const char* what)
{
    fprintf(stderr, "bench elastic_mpi: world rank %d: %s: %s\n", me, what, vs_last_error());
    return 1;
}

int main(int argc, char** argv)
{
    if (argc != 3 || (strcmp(argv[1], "elastic") && strcmp(argv[1], "die") && strcmp(argv[1], "restart"))) {
        fprintf(stderr, "usage: bench_elastic_mpi elastic|die|restart DIR (bench/elastic_mpi.sh runs it)\n");
        return 2;
    }
    const char* mode = argv[1];
    char ckpt[512], fail_at[512];
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", argv[2]);
    snprintf(fail_at, sizeof fail_at, "%s/fail_at", argv[2]);
    if (gpt_model(&CFG, &STORE, &MODEL)) return fail(-1, "gpt_model");
    vs_world_desc wd;
    memset(&wd, 0, sizeof wd);
    wd.transport = VS_TRANSPORT_MPI;
    wd.timeout_s = 60;
    vs_world* w = NULL;
    if (vs_world_init(&wd, &w)) return fail(-1, "vs_world_init");
    int me = vs_world_rank(w);
    vs_plan plan;
    vs_train_desc d = desc_of(&plan, !strcmp(mode, "restart") ? 1 : 2);
    vs_train* t = NULL;
    double loss = 0, normal[NORMAL];
    if (vs_parallelize(w, &d, &t)) return fail(me, "vs_parallelize");
    if (!strcmp(mode, "restart")) {
        if (vs_train_load(t, ckpt, NULL, 0)) return fail(me, "vs_train_load");
        if (step(t, &loss)) return fail(me, "the first step");
        double done = now();
        if (me == 0) printf("restart %.6f %.9g\n", done, loss);
        vs_train_free(t);
        vs_world_free(w);
        return 0;
    }
    for (int k = 0; k < NORMAL; k++) {
        vs_barrier(vs_world_comm(w), NULL);
        double t0 = now();
        if (step(t, &loss)) return fail(me, "a step");
        vs_barrier(vs_world_comm(w), NULL);
        normal[k] = now() - t0;
    }
    if (vs_train_save(t, ckpt, NULL, 0, 0)) return fail(me, "vs_train_save");
    vs_barrier(vs_world_comm(w), NULL);
    if (me == VICTIM) {
        FILE* f = fopen(fail_at, "w");
        if (f) fprintf(f, "%.6f\n", now()), fclose(f);
        raise(SIGKILL);
    }
    double at[4];
    vs_result r = step(t, &loss);
    at[0] = now();
    if (r != VS_ERR_ABORTED && r != VS_ERR_TIMEOUT) return fail(me, "the step the failure stops");
    vs_mesh* small = NULL;
    if (vs_mesh_shrink(vs_train_mesh(t), "DP", &small, NULL)) return fail(me, "vs_mesh_shrink");
    at[1] = now();
    if (!small) { // (world rank 2: it left with the failed replica; on MPI it ends)
        vs_train_free(t);
        vs_world_free(w);
        return 0;
    }
    if (vs_train_reconfigure(&t, &d, small, NULL, NULL)) return fail(me, "vs_train_reconfigure");
    at[2] = now();
    if (step(t, &loss)) return fail(me, "the step on DP1");
    at[3] = now();
    double late[4];
    if (vs_all_reduce(vs_world_comm(w), at, late, 4, VS_F64, VS_OP_MAX, NULL)) return fail(me, "the figures");
    if (me == 0) {
        double fa = -1;
        FILE* f = fopen(fail_at, "r");
        if (!f || fscanf(f, "%lf", &fa) != 1) fa = -1;
        if (f) fclose(f);
        printf("elastic %.6f %.6f %.6f %.6f %.6f %.6f %.9g\n", fa, late[0], late[1], late[2], late[3],
               median(normal + 1, NORMAL - 1), loss);
    }
    vs_train_free(t);
    vs_mesh_free(small);
    vs_world_free(w);
    return 0;
}
