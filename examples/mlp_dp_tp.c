/* mlp_dp_tp.c - a first trainer to copy: a 2-layer MLP trained on 4 ranks as
   DP2 x TP2, next to the same model trained on one rank. Both runs print their
   loss per step; the program fails (exit 1) when they differ by more than 1e-6
   (relative).

   The model, with x [B, D] a batch and t [B, D] its target:
       a = x W1 + b1        W1 [D, H]  column-parallel: Shard(1) over TP, b1 Shard(0)
       z = gelu(a)          a, z [B, H/TP]: each TP rank holds its own columns
       y = z W2 + b2        W2 [H, D]  row-parallel: Shard(0) over TP; z W2 is a
                            partial sum on each TP rank (vs_tp_reduce_forward adds
                            them up), b2 is replicated and added once, after the sum
       loss = mean((y - t)^2)
   DP: each DP rank takes its B/DP rows of the global batch; vescale_ddp.h averages
   the gradients over DP, clips them (global norm), and steps AdamW under ZeRO-1
   (each DP rank keeps optimizer state for its half of each bucket only).

   Build and run (threads: the 4 ranks are threads of this process):
       cc -std=c99 -O2 -I. examples/mlp_dp_tp.c -o mlp_dp_tp -lpthread -lm && ./mlp_dp_tp
   With MPI (4 processes; each also runs the one-rank reference by itself):
       mpicc -std=c99 -O2 -I. -DVESCALE_MPI examples/mlp_dp_tp.c -o mlp_dp_tp_mpi -lpthread -lm
       mpirun -np 4 ./mlp_dp_tp_mpi

   Why the two runs agree to ~1e-7 and not bit for bit: the same numbers are
   summed in a different order (DP: two half-batch sums, then their average; TP:
   two partial sums over H/2, then their sum). Every element is otherwise computed
   by the same code from the same bits, since the weights are initialized by
   vs_init_fill, whose values do not depend on the sharding. */
#define VESCALE_IMPLEMENTATION
#include "vescale.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { B = 16, D = 8, H = 32, STEPS = 20 }; /* global batch, model width, hidden width */
enum { P_W1, P_B1, P_W2, P_B2, NPARAM };     /* parameter indices, in registration order */

typedef struct run {
    int dp, tp;         /* mesh shape (DP, TP) */
    double loss[STEPS]; /* the global loss of each step, written by mesh rank 0 */
    double norm[STEPS]; /* the gradient norm before clipping */
} run;

/* Fails the rank with the call, file line and vescale's message. Under vs_launch a
   rank's non-zero return ends the job on every rank (the others get VS_ERR_ABORTED). */
#define TRY(call)                                                                               \
    do {                                                                                        \
        vs_result r_ = (call);                                                                  \
        if (r_ != VS_OK) {                                                                      \
            fprintf(stderr, "mlp_dp_tp.c:%d: %s: %s\n", __LINE__, #call, vs_last_error());      \
            return r_;                                                                          \
        }                                                                                       \
    } while (0)

/* The data stream: element d of sample g, uniform in [-1, 1), the same for any
   number of ranks (a counter-based generator, keyed by the global index). */
static float sample_x(int64_t g, int d)
{
    vs_init_desc u;
    memset(&u, 0, sizeof u); /* zero is "default" in every vescale desc */
    u.kind = VS_INIT_UNIFORM;
    u.seed = 7;
    u.name = "data";
    u.a = -1.0;
    u.b = 1.0;
    return (float)vs_init_value(&u, (uint64_t)g * D + (uint64_t)d);
}
/* The function the MLP learns. */
static float target(const float* x, int d) { return 0.5f * sinf(2.0f * x[d]) + 0.25f * x[(d + 1) % D]; }

static float gelu(float a) { return 0.5f * a * (1.0f + erff(a * 0.70710678f)); }
static float gelu_grad(float a) { return 0.5f * (1.0f + erff(a * 0.70710678f)) + a * 0.39894228f * expf(-0.5f * a * a); }

/* Registers one parameter: its global shape, its placements over (DP, TP), and
   this rank's shard of its initial value. vs_init_fill fills the shard with the
   values the whole tensor would have: every mesh shape starts from the same model. */
static vs_result add_param(vs_ddp* ddp, vs_mesh* mesh, const char* name, int64_t rows, int64_t cols,
                           vs_placement tp_place, double std)
{
    vs_dtensor t;
    memset(&t, 0, sizeof t);
    t.layout.mesh = mesh;
    t.layout.p[0] = vs_replicate(); /* DP: every DP rank holds the same parameters */
    t.layout.p[1] = tp_place;
    t.dtype = VS_F32;
    t.ndim = cols ? 2 : 1;
    t.shape[0] = rows;
    t.shape[1] = cols;
    float init[D * H]; /* large enough for any shard of this model */
    t.data = init;
    vs_init_desc id;
    memset(&id, 0, sizeof id);
    id.kind = std > 0 ? VS_INIT_NORMAL : VS_INIT_ZEROS;
    id.seed = 1234;
    id.name = name; /* part of the key: each tensor gets its own numbers */
    id.b = std;
    TRY(vs_init_fill(&t, &id));

    vs_ddp_param_desc p;
    memset(&p, 0, sizeof p); /* C++: vs_ddp_param_desc p = {}; then set fields */
    p.name = name;
    p.data = init; /* copied: DDP owns the parameter from now on */
    p.dtype = VS_F32;
    p.ndim = t.ndim;
    p.shape[0] = rows;
    p.shape[1] = cols;
    p.placements[0] = t.layout.p[0];
    p.placements[1] = t.layout.p[1];
    p.no_decay = cols == 0; /* no weight decay on biases */
    return vs_ddp_add_param(ddp, &p, NULL);
}

/* One rank of a (dp, tp) run: the same code trains the 4-rank and the 1-rank model. */
static int train(vs_world* w, void* arg)
{
    run* R = (run*)arg;
    vs_mesh *mesh, *dpm, *tpm;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = R->dp; /* 2 dims: named (DP, TP), TP innermost (neighbouring ranks) */
    md.shape[1] = R->tp;
    TRY(vs_mesh_init(w, &md, &mesh));
    TRY(vs_mesh_submesh(mesh, "DP", &dpm));
    TRY(vs_mesh_submesh(mesh, "TP", &tpm));
    const int dpr = vs_mesh_coord_along(mesh, "DP"), bl = B / R->dp, hl = H / R->tp;

    vs_ddp* ddp;
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = mesh;
    dd.zero = VS_ZERO_1;
    dd.optim.kind = VS_OPTIM_ADAMW;
    dd.optim.weight_decay = 0.01;
    TRY(vs_ddp_init(&dd, &ddp));
    TRY(add_param(ddp, mesh, "mlp.w1", D, H, vs_shard(1), 0.5));   /* column-parallel */
    TRY(add_param(ddp, mesh, "mlp.b1", H, 0, vs_shard(0), 0));
    TRY(add_param(ddp, mesh, "mlp.w2", H, D, vs_shard(0), 0.2));   /* row-parallel */
    TRY(add_param(ddp, mesh, "mlp.b2", D, 0, vs_replicate(), 0));
    TRY(vs_ddp_finalize(ddp)); /* collective: buckets and optimizer state */

    vs_lr_schedule sched;
    memset(&sched, 0, sizeof sched);
    sched.kind = VS_LR_COSINE; /* warmup for 3 steps, then cosine down to min_lr */
    sched.lr = 1e-2;
    sched.min_lr = 1e-3;
    sched.warmup_steps = 3;
    sched.total_steps = STEPS;
    TRY(vs_lr_check(&sched));

    float x[B * D], t[B * D], a[B * H], z[B * H], y[B * D], dy[B * D], dz[B * H], dx[B * D];
    for (int step = 0; step < STEPS; step++) {
        /* This DP rank's rows of the global batch: samples dpr*bl .. dpr*bl+bl-1.
           Every TP rank of a DP group reads the same rows. */
        for (int b = 0; b < bl; b++) {
            int64_t g = (int64_t)step * B + (int64_t)dpr * bl + b;
            for (int d = 0; d < D; d++) x[b * D + d] = sample_x(g, d);
            for (int d = 0; d < D; d++) t[b * D + d] = target(&x[b * D], d);
        }
        /* Ask for the parameters every step: after a ZeRO step this waits for the
           all-gather of the updated values. */
        const float* W1 = (const float*)vs_ddp_param(ddp, P_W1); /* [D, hl] */
        const float* b1 = (const float*)vs_ddp_param(ddp, P_B1); /* [hl] */
        const float* W2 = (const float*)vs_ddp_param(ddp, P_W2); /* [hl, D] */
        const float* b2 = (const float*)vs_ddp_param(ddp, P_B2); /* [D] */
        if (!W1 || !b1 || !W2 || !b2) TRY(VS_ERR_STATE);

        /* Forward. Column-parallel layer: the input x is whole on every TP rank
           (forward of vs_tp_copy_backward is the identity); each rank makes its
           hl columns of a. */
        for (int b = 0; b < bl; b++)
            for (int h = 0; h < hl; h++) {
                float s = b1[h];
                for (int d = 0; d < D; d++) s += x[b * D + d] * W1[d * hl + h];
                a[b * hl + h] = s;
                z[b * hl + h] = gelu(s);
            }
        /* Row-parallel layer: each rank multiplies its hl columns of z by its hl rows
           of W2, a partial sum of y; vs_tp_reduce_forward sums them over TP. */
        for (int b = 0; b < bl; b++)
            for (int d = 0; d < D; d++) {
                float s = 0;
                for (int h = 0; h < hl; h++) s += z[b * hl + h] * W2[h * D + d];
                y[b * D + d] = s;
            }
        TRY(vs_tp_reduce_forward(tpm, y, (size_t)bl * D, VS_F32));
        double loss = 0;
        for (int i = 0; i < bl * D; i++) {
            y[i] += b2[i % D];
            float e = y[i] - t[i];
            loss += (double)e * e;
            dy[i] = 2.0f * e / (float)(bl * D); /* d(mean over this rank's rows) */
        }
        loss /= bl * D;

        /* Backward, output to input. DDP averages each gradient over DP, turning
           this rank's mean into the global batch's mean. Gradients are added into
           DDP's buffers and marked ready in the order backward produces them, so
           a full bucket starts reducing while backward goes on. */
        TRY(vs_ddp_zero_grad(ddp));
        float* gb2 = (float*)vs_ddp_grad(ddp, P_B2);
        float* gW2 = (float*)vs_ddp_grad(ddp, P_W2);
        float* gb1 = (float*)vs_ddp_grad(ddp, P_B1);
        float* gW1 = (float*)vs_ddp_grad(ddp, P_W1);
        if (!gb2 || !gW2 || !gb1 || !gW1) TRY(VS_ERR_STATE);
        /* Row-parallel backward: the identity for dy (every TP rank has all of it). */
        for (int i = 0; i < bl * D; i++) gb2[i % D] += dy[i];
        TRY(vs_ddp_grad_ready(ddp, P_B2));
        for (int h = 0; h < hl; h++)
            for (int d = 0; d < D; d++) {
                float s = 0;
                for (int b = 0; b < bl; b++) s += z[b * hl + h] * dy[b * D + d];
                gW2[h * D + d] += s;
            }
        TRY(vs_ddp_grad_ready(ddp, P_W2));
        for (int b = 0; b < bl; b++)
            for (int h = 0; h < hl; h++) {
                float s = 0;
                for (int d = 0; d < D; d++) s += dy[b * D + d] * W2[h * D + d];
                dz[b * hl + h] = s * gelu_grad(a[b * hl + h]); /* now d loss / d a */
            }
        for (int b = 0; b < bl; b++)
            for (int h = 0; h < hl; h++) gb1[h] += dz[b * hl + h];
        TRY(vs_ddp_grad_ready(ddp, P_B1));
        for (int d = 0; d < D; d++)
            for (int h = 0; h < hl; h++) {
                float s = 0;
                for (int b = 0; b < bl; b++) s += x[b * D + d] * dz[b * hl + h];
                gW1[d * hl + h] += s;
            }
        TRY(vs_ddp_grad_ready(ddp, P_W1));
        /* Column-parallel backward: each TP rank has a partial d loss / d x (from its
           columns); vs_tp_copy_backward sums them. This model has nothing before
           the MLP, but a layer there (an embedding, a norm) would take dx from here. */
        for (int b = 0; b < bl; b++)
            for (int d = 0; d < D; d++) {
                float s = 0;
                for (int h = 0; h < hl; h++) s += dz[b * hl + h] * W1[d * hl + h];
                dx[b * D + d] = s;
            }
        TRY(vs_tp_copy_backward(tpm, dx, (size_t)bl * D, VS_F32));

        TRY(vs_ddp_finish_grad_sync(ddp)); /* waits for every bucket's reduction */
        double norm;
        /* the global norm over DP x TP (each element once); above 0.5 (the first
           steps here) the gradients are scaled down to it */
        TRY(vs_ddp_clip_grad_norm(ddp, 0.5, &norm));
        TRY(vs_ddp_step(ddp, vs_lr_at(&sched, step)));

        /* The global loss: the mean of the DP ranks' means (equal batch slices). */
        TRY(vs_all_reduce(vs_mesh_comm(dpm), &loss, &loss, 1, VS_F64, VS_OP_AVG, NULL));
        if (vs_mesh_rank(mesh) == 0) R->loss[step] = loss, R->norm[step] = norm;
    }
    TRY(vs_ddp_free(ddp)); /* the DDP first: it holds the mesh */
    TRY(vs_mesh_free(mesh));
    return 0;
}

/* Prints both runs side by side; 1 when they differ by more than 1e-6. */
static int compare(const run* one, const run* par)
{
    double worst = 0;
    printf("step  loss 1 rank     loss DP2xTP2   grad norm   rel. diff\n");
    for (int s = 0; s < STEPS; s++) {
        double rel = fabs(par->loss[s] - one->loss[s]) / fabs(one->loss[s]);
        if (!(rel <= worst)) worst = rel; /* NaN counts as the worst */
        printf("%4d  %.9f  %.9f  %9.6f   %.2e\n", s, one->loss[s], par->loss[s], par->norm[s], rel);
    }
    printf("largest relative difference %.3g (bar 1e-6)\n", worst);
    return !(worst <= 1e-6);
}

int main(void)
{
    run one = {1, 1, {0}, {0}}, par = {2, 2, {0}, {0}};
    /* The reference: the same model on a 1x1 mesh, one thread rank. */
    if (vs_launch(1, train, &one) != VS_OK) return 1;
#ifdef VESCALE_MPI
    /* One process per rank, started by mpirun. */
    vs_world* w;
    vs_world_desc wd;
    memset(&wd, 0, sizeof wd);
    wd.transport = VS_TRANSPORT_MPI;
    if (vs_world_init(&wd, &w) != VS_OK) {
        fprintf(stderr, "vs_world_init: %s\n", vs_last_error());
        return 1;
    }
    if (vs_world_size(w) != 4) {
        fprintf(stderr, "run with mpirun -np 4 (this job has %d processes)\n", vs_world_size(w));
        vs_world_abort(w, VS_ERR_INVALID);
    }
    if (train(w, &par) != 0) vs_world_abort(w, VS_ERR_ABORTED); /* ends every process */
    int bad = vs_world_rank(w) == 0 ? compare(&one, &par) : 0;
    vs_world_free(w);
    return bad;
#else
    /* 4 thread ranks, mesh (DP=2, TP=2): ranks 0,1 and 2,3 are the TP groups. */
    if (vs_launch(4, train, &par) != VS_OK) return 1;
    return compare(&one, &par);
#endif
}
