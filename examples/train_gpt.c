/* train_gpt.c - a small GPT (examples/gpt.h) trained on any PP x DP x TP mesh
   with vescale.h's high-level API, next to the same model on one rank.

   The training loop is the one a single-device trainer has; what makes it nD
   is the plan given to vs_parallelize (README: "One loop, any mesh").

   Usage:
       train_gpt [--mesh PPxDPxTP | --world N --auto] [--steps S] [--schedule K]
                 [--zero Z] [--dp-shard N] [--microbatches M] [--save DIR/NAME] [--resume DIR/NAME|auto]
                 [--ckpt-dir DIR] [--sp] [--recompute GLOBS] [--no-reference] [--explain]
                 [--device cpu|cuda] [--dtype f32|bf16] [--data GLOB [--shuffle SEED]]
                 [--tol REL] [--elastic [--kill R@S [--replace S2]]]
     --mesh 2x2x2       the plan's mesh (default 2x2x2: PP2 x DP2 x TP2)
     --zero Z           0..3 (plan.zero; 3: ZeRO-3, parameters sharded at rest and
                        gathered a layer at a time around its forward and backward)
     --dp-shard N       HSDP (plan.dp_shard): DP is DPR x DPS with DPS = N (a
                        divisor of DP): sharded within N ranks, replicated across
                        DP / N; e.g. --mesh 1x4x2 --zero 3 --dp-shard 2
     --sp               sequence parallelism over TP (plan.sequence_parallel)
     --recompute GLOBS  recompute these layers' activations in the backward
                        (plan.recompute, e.g. "h.*": every block)
     --world N --auto   let vs_generate_plan choose the mesh for N ranks
     --schedule K       gpipe 1f1b interleaved zbh1 zbv dualpipev (default 1f1b)
     --save P           save the whole training state at the end into P
     --resume P|auto    start from P (auto: the latest complete checkpoint in
                        --ckpt-dir), on whatever mesh this run has
     --save-every N     save into --ckpt-dir (default build/ckpt) every N steps, keeping 3
     --explain          the planner's view: a profile measured on the job's thread
                        ranks, then vs_plan_explain_for the plan this run takes
                        (the mesh given, or chosen): its estimated step, the
                        planner's choice on that mesh when it is another, the
                        runners-up and why the others lost
     --no-reference     skip the one-rank run beside it
     --device cuda      the mesh's ranks on GPUs, one per visible GPU (a build with
                        -DVESCALE_NCCL: make run-gpu): the NCCL transport, device
                        parameters and activations, gpt.h's units as
                        examples/gpt_kernels.h's kernels on each rank's compute
                        stream, the batches in pinned memory; without --mesh the
                        mesh is made of the visible GPUs (8: 2x2x2, 4: 1x2x2, 2:
                        1x1x2, 1: 1x1x1). The one-rank reference stays on the host.
                        A build without CUDA, or no GPU: says so and exits 0.
     --dtype bf16       bf16 parameters (f32 masters and gradients: vs_train_desc
                        .grad_fp32), on the host or the GPUs (default f32)
     --data GLOB        train on token shards (vescale.h's vs_data_*; llm.c's
                        format) instead of the synthetic task: each DP rank reads
                        its rows of every batch, a thread reads ahead, and the
                        position is saved and resumed with the checkpoint (on any
                        mesh). tools/vescale-shards writes shards of this GPT's
                        64-token vocabulary from any text:
                            build/vescale-shards build/shards/readme README.md
                            build/train_gpt --mesh 1x2x2 --data "build/shards/readme_*.bin"
     --shuffle SEED     with --data: every epoch's rows in an order drawn from SEED
     --tol REL          the relative loss difference from one rank that fails
                        the run (default 1e-5; see the exit status below)
     --elastic          a failed rank does not end the job (thread ranks, or
                        GPUs with --device cuda: there the smaller world is
                        ncclCommShrink's and the state moves in device memory;
                        --data moves with the state): the survivors shrink the mesh by its DP replica
                        (vs_mesh_shrink), move the training state onto the
                        smaller mesh in memory (vs_train_reconfigure) and take
                        the failed step again; a replacement grows it back
                        (vs_world_grow). A step is then 24 rows (not 16), which
                        DP x microbatches divide on DP 4 and on DP 3 (the default
                        microbatches: 8 / DP); ZeRO-0 unless --zero is given
                        (ZeRO-1..3 shard the optimizer state: the failed replica's
                        shards come from the newest checkpoint of --save-every;
                        with --dp-shard the whole DPR replica leaves and the
                        others hold its shards: no checkpoint needed)
                        With -DVESCALE_MPI, under an MPI with ULFM run with it
                        (mpirun --with-ft ulfm): the failed rank's process ends
                        (vs_world_abort), the ranks that leave with its replica
                        end with status 0, and the others go on (no --replace)
     --kill R@S         a demo and test aid: world rank R dies in the middle of
                        step S (a layer's forward fails on it, and its rank
                        function returns, leaving its peers waiting). Without
                        --elastic the job ends, as any fault does
     --nan-from S       a test aid: from step S on, the gradients are NaN (the
                        last layer's backward writes one NaN into its input
                        gradient on every rank): each such step is skipped
                        (vs_train_desc.nonfinite's default), says so at warn
                        (the default log level) and shows "skipped" in the table;
                        a run whose every step was skipped ends with status 1
     --replace S2       with --kill: a replacement for rank R starts at step S2
                        (vs_world_respawn); the mesh grows back to the plan's at
                        the first step boundary where it waits (the last step
                        waits for it)
   Thread ranks by default; built with -DVESCALE_MPI and started by mpirun, one
   process per rank (each also runs the one-rank reference by itself).

   Exit status 1 when a step's loss differs from one rank's by more than 1e-5
   (relative; GPUs: 1e-4, their expf / tanhf and block-ordered sums round apart
   from the host's; bf16: 1e-3, a master that differs in its last bits may round
   to the neighbouring bf16; --data: 1e-3, see below), or on any error.

   --data and rounding. DP and TP sum a gradient in another order than one rank
   (two halves, then the all-reduce), so parameters differ in their last bits
   after the first step. AdamW divides a gradient by its own size, so an element
   whose gradient nearly cancels (|g| near eps, 1e-8) moves by a visible part of
   lr whichever way it rounded: after one step on README.md's shards the largest
   difference is 3.7e-6 (lr 6e-4). The synthetic task keeps the losses within
   1e-5 for hundreds of steps (1x2x2: 9e-7 over 200); real text has loss
   spikes, where the loss is far more sensitive to the parameters, and there the
   difference jumps. Measured on README.md's shards for issue 33 (the numbers
   move as its text changes): with --shuffle 7 one rank's own loss spiked at
   step 14 (4.29, gradient norm 52) and the meshes differed by 2.6e-4 there
   (1x2x2; 1x2x1 2.1e-4, 1x1x2 1.7e-4), at most 4.4e-4 over 200 steps; with
   later text the first step past 1e-5 was step 21 (8e-5), at most 4.8e-4 over
   100. It is rounding, not a defect: the batches are the same (lr 0: every step
   within 4e-8), PP alone is bit for bit one rank's, and with lr x 0.3 (no
   spike) or AdamW's eps 1e-6 the same 30 steps stay within 5e-6. Being
   rounding amplified, the difference keeps growing over long runs (--tol). */
#define VESCALE_IMPLEMENTATION
#include "../vescale.h"
#include "gpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#ifdef VESCALE_NCCL
#include <cuda_runtime.h>
#endif

enum { MAXROWS = 24, MAXSTEPS = 1000 };

static int ROWS = 16; // rows of a step's global batch (--elastic: 24)

static gpt_config CFG = {64, 16, 64, 4, 2, 1234};
static vs_dtype DTYPE = VS_F32; // the parameters' (--dtype)
static gpt_model_storage STORE;
static vs_model_desc MODEL;
static const char* DATA;      // --data: token shards (NULL: gpt_batch's synthetic task)
static int SHUFFLE;           // --shuffle given
static uint64_t SEED;         // its seed

typedef struct job {
    vs_plan plan;
    int steps;              // steps this run takes (after the checkpoint's, when resuming)
    const char* save;
    const char* resume;
    int save_every;         // also save every N steps into ckdir (keeping the newest 3)
    int elastic;            // a failed rank's DP replica leaves and the others go on (--elastic)
    int replace;            // the step a replacement starts at (--replace; 0: none)
    int end;                // the step this run stops before (a replacement rank reads it)
    int victim, kill_step;  // --kill R@S (victim -1: none)
    const char* ckdir;
    double loss[MAXSTEPS];  // by step
    int skipped[MAXSTEPS];  // the step was skipped (non-finite gradients)
    double secs[MAXSTEPS];
    int have[MAXSTEPS];
    const struct job* ref;  // print beside this run's losses
    int quiet;
    int failed;
    int device;             // ranks on GPUs (NCCL)
    size_t act_peak;        // activation memory at its peak, the most over the steps (rank 0; vs_train_stats)
    double tol;             // the relative loss difference from the reference that fails the run
} job;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* --kill R@S, a demo and test aid (no part of a trainer): world rank R dies in
   the middle of step S. Every layer's forward goes through kill_forward, which
   fails on that rank at the step's middle microbatch; the rank then returns
   from its function, leaving its peers waiting in a pipeline transfer, a TP
   all-reduce or a gradient bucket, as a crashed rank would. */
static __thread int kill_armed; // this thread is rank R, in step S
static int kill_mb;             // the microbatch it dies in
static vs_pipe_fn unit_forward[GPT_MAX_UNITS];
static vs_result kill_forward(vs_pipe_call* c)
{
    if (kill_armed && c->mb == kill_mb) return vs_set_error(VS_ERR_INVALID, "killed by --kill");
    return unit_forward[c->unit](c);
}

#define CHECK(x)                                                                                                      \
    do {                                                                                                              \
        vs_result r_ = (x);                                                                                           \
        if (r_) {                                                                                                     \
            fprintf(stderr, "rank %d: %s: %s\n", vs_world_rank(w), #x, vs_last_error());                             \
            return 1;                                                                                                 \
        }                                                                                                             \
    } while (0)

/* The first rank of the world's communicator prints (world rank 0, until a
   failure takes it away). */
static int lead(vs_world* w) { return vs_comm_rank(vs_world_comm(w)) == 0; }

/* The data position: the batches taken (a step skipped for a NaN took its batch too). */
static int position(vs_train* t) { return (int)(vs_train_steps(t) + vs_train_skipped_steps(t)); }

/* --nan-from S, a test aid: from step S on, the last layer's backward puts a NaN
   into its input gradient, so every parameter's gradient becomes NaN. */
static int nan_from = -1;
static __thread int nan_armed; // this rank thread is at a step >= S
static vs_pipe_fn last_backward;
static vs_result nan_backward(vs_pipe_call* c)
{
    vs_result r = last_backward(c);
    for (int i = 0; !r && nan_armed && i < c->n_in; i++)
        if (c->in[i].grad && c->in[i].dtype == VS_F32) {
            ((float*)c->in[i].grad)[0] = NAN;
            break;
        }
    return r;
}

static void print_ranks(const char* what, const int* r, int n)
{
    printf("%s%s", what, n == 1 ? "" : "s");
    for (int i = 0; i < n && i < VS_REFORM_LIST; i++) printf(" %d", r[i]);
}

/* --elastic --replace: the world grows back (vs_world_grow: the ranks of the
   mesh, the ones that left with a failed replica and the replacements, at one
   step boundary), the plan's mesh is made again and the training state moves
   onto it (*t NULL on a rank that comes in: its state comes from a DP peer). */
static vs_result grow(vs_world* w, const job* J, const vs_train_desc* d, vs_train** t)
{
    const vs_plan* p = &J->plan;
    int S = p->dp_shard > 0 && p->dp_shard < p->dp ? p->dp_shard : 0; // HSDP: (PP, DPR, DPS, TP)
    vs_mesh_desc md = {{p->pp, p->dp, p->tp}, 0, {"PP", "DP", "TP"}, NULL};
    vs_mesh_desc mh = {{p->pp, S ? p->dp / S : 1, S, p->tp}, 0, {"PP", "DPR", "DPS", "TP"}, NULL};
    if (S) md = mh;
    vs_mesh* m = NULL;
    vs_reform_info ri;
    vs_reconfig_info ci;
    vs_result r = vs_world_grow(w, &ri);
    if (!r) r = vs_mesh_init(w, &md, &m);
    if (!r) r = vs_train_reconfigure(t, d, m, NULL, &ci);
    if (r && m) vs_mesh_free(m);
    if (!r && lead(w) && !J->quiet) {
        printf("  elastic: step %d: ", position(*t));
        print_ranks("world rank", ri.joined, ri.njoined);
        printf(" joined: (PP=%d, DP=%d, TP=%d) -> (PP=%d, DP=%d, TP=%d), the state moved in %.1f ms\n", p->pp,
               (ri.nlive - ri.njoined) / (p->pp * p->tp), p->tp, p->pp, p->dp, p->tp, 1e3 * ci.seconds);
    }
    return r;
}

/* The trainer: the same on one rank and on a mesh. */
static int train(vs_world* w, void* arg)
{
    job* J = (job*)arg;
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &MODEL;
    d.plan = &J->plan;
    d.optim.kind = VS_OPTIM_ADAMW;
    d.optim.weight_decay = 0.01;
    d.lr = (vs_lr_schedule){VS_LR_COSINE, 3e-3, 3e-4, 5, 200, 0, 0};
    d.clip = 1.0;
    d.grad_fp32 = DTYPE == VS_BF16 || DTYPE == VS_F16; // f32 gradients for bf16 parameters
    vs_train* t = NULL;
    int joining = vs_world_joining(w); // a replacement rank (--replace)
    if (joining) CHECK(grow(w, J, &d, &t));
    else CHECK(vs_parallelize(w, &d, &t));
    vs_data* data = NULL; // --data: this DP rank's rows of each batch, read ahead; attached: saved and resumed with t
    vs_data_desc dd;      // (and moved with it by vs_train_reconfigure)
    memset(&dd, 0, sizeof dd);
    dd.files = DATA, dd.batch = ROWS, dd.seq_len = CFG.seq, dd.vocab = CFG.vocab;
    dd.shuffle = SHUFFLE, dd.seed = SEED;
    if (DATA) {
        dd.train = t;
        CHECK(vs_data_open(&dd, &data));
        vs_data_info di;
        CHECK(vs_data_query(data, &di));
        if (vs_world_rank(w) == 0 && !J->quiet)
            printf("data: %d files, %lld tokens, %lld rows of %d + 1 (%lld batches an epoch)%s\n", di.nshards,
                   (long long)di.tokens, (long long)di.windows, CFG.seq, (long long)di.batches_per_epoch,
                   SHUFFLE ? ", shuffled" : "");
    }
    if (J->resume && !joining) CHECK(vs_train_load(t, J->resume, NULL, 0)); // (and the data position)
    int32_t tokens_h[MAXROWS * 64], targets_h[MAXROWS * 64], *tokens = tokens_h, *targets = targets_h;
#ifdef VESCALE_NCCL
    if (J->device) { // pinned: the batch's copies to the device are asynchronous (each step's done by its loss read)
        if (cudaMallocHost((void**)&tokens, sizeof tokens_h) != cudaSuccess ||
            cudaMallocHost((void**)&targets, sizeof targets_h) != cudaSuccess) {
            fprintf(stderr, "rank %d: cudaMallocHost failed\n", vs_world_rank(w));
            return 1;
        }
    }
#endif
    vs_batch b = gpt_batch_view(ROWS, CFG.seq, tokens, targets);
    // the data position: 0, or where the checkpoint stopped (a replacement rank: where the others are)
    int s0 = position(t), end = joining ? J->end : s0 + J->steps;
    if (vs_world_rank(w) == 0 && !joining) J->end = end;
    vs_reform_info lost;         // --elastic: the ranks the last shrink lost (nfailed 0: none, or grown back)
    double failed_at = 0, agreed = 0, moved = 0; // when this rank learnt of a failure it survived; the shrink's parts
    lost.nfailed = 0;
    for (int s = s0; s < end && s < MAXSTEPS; s++) {
        if (lost.nfailed && J->replace && s >= J->replace) { // a replacement starts; the mesh grows when it waits
            if (s == J->replace && lead(w))
                for (int i = 0; i < lost.nfailed; i++) {
                    CHECK(vs_world_respawn(w, lost.failed[i])); // (threads: a new thread runs train)
                    if (!J->quiet) printf("  elastic: step %d: a replacement for world rank %d starts\n", s, lost.failed[i]);
                }
            int n = 0, want = J->plan.pp * J->plan.dp * J->plan.tp - vs_comm_size(vs_world_comm(w));
            CHECK(vs_world_joiners(w, &n)); // ranks waiting to come in (the same on every rank)
            if (n == want || s == end - 1) { // (the last step grows anyway: vs_world_grow waits for who started)
                CHECK(grow(w, J, &d, &t));
                lost.nfailed = 0;
            }
        }
        double t0 = now();
        if (data) CHECK(vs_data_next(data, &b)); // this DP rank's rows (b.dp_local)
        else gpt_batch(&CFG, s, ROWS, tokens, targets); // the global batch of step s
        vs_train_stats st; // the step's metrics: loss, gradient norm before clipping, lr, ...
        kill_armed = vs_world_rank(w) == J->victim && s == J->kill_step; // (--kill)
        nan_armed = nan_from >= 0 && s >= nan_from;                      // (--nan-from)
        vs_result step = vs_train_step_ex(t, &b, &st);
        if (J->elastic && (step == VS_ERR_ABORTED || step == VS_ERR_TIMEOUT)) { // a rank failed: go on without its DP replica
            char before[64], ck[1100];
            vs_mesh* small;
            vs_reconfig_info ci;
            double seen = now(); // (the failure, as this rank learns of it)
            vs_mesh_describe(vs_train_mesh(t), before, sizeof before);
            int hsdp = J->plan.dp_shard > 0 && J->plan.dp_shard < J->plan.dp; // (HSDP: a whole DPR replica leaves)
            CHECK(vs_mesh_shrink(vs_train_mesh(t), hsdp ? "DPR" : "DP", &small, &lost)); // the survivors agree
            agreed = now() - seen;
            if (!small) { // this rank left with a failed rank's replica: it frees its state and waits to come back
                CHECK(vs_train_free(t)); // (its data loader is detached: opened again on the state that comes)
                t = NULL;
                if (!J->replace) return vs_data_free(data) ? 1 : 0;
                CHECK(grow(w, J, &d, &t));
                if (data) { // at the others' data position (vs_train_reconfigure brought it)
                    CHECK(vs_data_free(data));
                    dd.train = t, data = NULL;
                    CHECK(vs_data_open(&dd, &data));
                }
                s = position(t) - 1, lost.nfailed = 0;
                continue;
            }
            // ZeRO-1/2: the failed replica's optimizer shards exist nowhere else: from the newest checkpoint
            const char* ckpt = J->save_every && vs_ckpt_latest(J->ckdir, ck, sizeof ck) == VS_OK ? ck : NULL;
            CHECK(vs_train_reconfigure(&t, &d, small, ckpt, &ci)); // the state onto the smaller mesh, in memory
            failed_at = seen, moved = ci.seconds;
            if (lead(w) && !J->quiet) {
                char after[64];
                vs_mesh_describe(vs_train_mesh(t), after, sizeof after);
                printf("  elastic: step %d: ", s);
                print_ranks("world rank", lost.failed, lost.nfailed);
                print_ranks(" failed; world rank", lost.dropped, lost.ndropped);
                printf(" left with the DP replica%s: %s -> %s\n", lost.nfailed == 1 ? "" : "s", before, after);
            }
            s--; // the step again, on the smaller mesh
            continue;
        }
        if (step) { // this rank's own failure (--kill's too), or any without --elastic: it ends here
            fprintf(stderr, "rank %d: vs_train_step_ex: %s\n", vs_world_rank(w), vs_last_error());
            vs_train_free(t);
            return step;
        }
        double loss = st.loss, recovered = failed_at ? now() - failed_at : 0; // (the first step done after a failure)
        failed_at = 0;
        if (J->save_every && (s + 1) % J->save_every == 0) { // a checkpoint that a killed job resumes from
            char path[1100];
            snprintf(path, sizeof path, "%s/step-%06d", J->ckdir, s + 1);
            CHECK(vs_train_save(t, path, NULL, 0, 0));
            if (lead(w)) CHECK(vs_ckpt_retain(J->ckdir, 3));
        }
        if (!lead(w)) continue;
        J->loss[s] = loss, J->secs[s] = now() - t0, J->have[s] = 1, J->skipped[s] = st.skipped_step;
        if (st.act_peak > J->act_peak) J->act_peak = st.act_peak;
        if (J->quiet) continue;
        double tps = ROWS * CFG.seq / J->secs[s];
        if (st.skipped_step) // (vs_train_step logged why at warn)
            printf("  %4d   %10s   %10s   %9s   %6.3f   %8.2e   %9.0f   skipped: the gradients are not finite\n", s,
                   "-", "-", "-", st.grad_norm, st.lr, tps);
        else if (J->ref && J->ref->have[s]) {
            double rel = fabs(loss - J->ref->loss[s]) / fabs(J->ref->loss[s]);
            printf("  %4d   %10.6f   %10.6f   %9.2e   %6.3f%s  %8.2e   %9.0f\n", s, loss, J->ref->loss[s], rel,
                   st.grad_norm, st.clipped ? "*" : " ", st.lr, tps);
            if (!(rel <= J->tol)) J->failed = 1;
        } else
            printf("  %4d   %10.6f   %10s   %9s   %6.3f%s  %8.2e   %9.0f\n", s, loss, "-", "-", st.grad_norm,
                   st.clipped ? "*" : " ", st.lr, tps);
        if (recovered)
            printf("  elastic: %.1f ms from the failure to step %d done again (the agreement %.1f ms, moving the "
                   "state %.1f ms, the step %.1f ms)\n", 1e3 * recovered, s, 1e3 * agreed, 1e3 * moved, 1e3 * J->secs[s]);
        fflush(stdout);
    }
    if (J->save) {
        CHECK(vs_train_save(t, J->save, NULL, 0, 0));
        if (lead(w) && !J->quiet) printf("saved step %lld to %s\n", (long long)vs_train_steps(t), J->save);
    }
    CHECK(vs_data_free(data));
    CHECK(vs_train_free(t));
#ifdef VESCALE_NCCL
    if (J->device) cudaFreeHost(tokens), cudaFreeHost(targets);
#endif
    return 0;
}

/* The planner's profile (--auto, --explain): this machine's layer, optimizer and
   transport times, measured on the thread ranks the job will use, one
   microbatch of 2 rows. (Under MPI the planner keeps its default costs.) */
#ifndef VESCALE_MPI
static vs_result prof_data(vs_pipe_call* c)
{
    int64_t sh[2] = {2, CFG.seq};
    int32_t* v;
    vs_result r = vs_pipe_output(c, 0, VS_I32, 2, sh, (void**)&v);
    for (int64_t i = 0; r == VS_OK && i < sh[0] * sh[1]; i++) v[i] = (int32_t)(i % CFG.vocab);
    return r;
}

static int prof_rank(vs_world* w, void* arg)
{
    vs_profile pf;
    CHECK(vs_profile_measure(w, &MODEL, prof_data, NULL, &pf));
    if (vs_world_rank(w) == 0) *(vs_profile*)arg = pf;
    return 0;
}
#endif

static const char USAGE[] =
    "usage: train_gpt [--mesh PPxDPxTP | --world N --auto] [--steps S] [--schedule K] [--zero Z] [--dp-shard N]\n"
    "                 [--microbatches M]\n"
    "                 [--save P] [--resume P|auto] [--ckpt-dir D] [--save-every N] [--sp] [--recompute GLOBS]\n"
    "                 [--no-reference] [--explain] [--device cpu|cuda] [--dtype f32|bf16] [--data GLOB [--shuffle SEED]]\n"
    "                 [--tol REL]\n"
    "                 [--elastic [--kill R@S [--replace S2]]]\n"
    "  --elastic      a failed rank's DP replica leaves, the others shrink the mesh, move the state and go on\n"
    "                 (threads or --device cuda; 24 rows a step; ZeRO-0 unless --zero: ZeRO-1/2 need --save-every)\n"
    "  --kill R@S     (a demo) world rank R dies in the middle of step S\n"
    "  --replace S2   a replacement for it starts at step S2; the mesh grows back when it is in\n"
    "  (every option: examples/train_gpt.c's top comment; README.md)\n";

static int parse_mesh(const char* s, vs_plan* p)
{
    return sscanf(s, "%dx%dx%d", &p->pp, &p->dp, &p->tp) == 3 && p->pp > 0 && p->dp > 0 && p->tp > 0 ? 0 : -1;
}

int main(int argc, char** argv)
{
    static job par, ref;
    vs_plan* p = &par.plan;
    p->pp = p->dp = p->tp = 2;
    p->schedule = VS_PIPE_1F1B;
    int steps = 20, world = 0, autoplan = 0, reference = 1, explain = 0, zero = 1, mbs = 0, every = 0, zero_given = 0;
    int sp = 0, device = 0, mesh_given = 0, kill = 0, dp_shard = 0;
    double tol = 0; // --tol (0: the default of the run's kind)
    (void)mesh_given; // (a CUDA build's)
    const char *save = NULL, *resume = NULL, *ckdir = "build/ckpt";
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--mesh") && v && !parse_mesh(v, p)) i++, mesh_given = 1;
        else if (!strcmp(a, "--device") && v && (!strcmp(v, "cuda") || !strcmp(v, "cpu"))) device = !strcmp(argv[++i], "cuda");
        else if (!strcmp(a, "--dtype") && v && (!strcmp(v, "f32") || !strcmp(v, "bf16")))
            DTYPE = !strcmp(argv[++i], "bf16") ? VS_BF16 : VS_F32;
        else if (!strcmp(a, "--world") && v) world = atoi(argv[++i]);
        else if (!strcmp(a, "--auto")) autoplan = 1;
        else if (!strcmp(a, "--steps") && v) steps = atoi(argv[++i]);
        else if (!strcmp(a, "--schedule") && v && vs_pipe_kind_parse(v, &p->schedule) == VS_OK) i++;
        else if (!strcmp(a, "--zero") && v) zero = atoi(argv[++i]), zero_given = 1;
        else if (!strcmp(a, "--dp-shard") && v && atoi(v) > 0) dp_shard = atoi(argv[++i]);
        else if (!strcmp(a, "--microbatches") && v) mbs = atoi(argv[++i]);
        else if (!strcmp(a, "--save") && v) save = argv[++i];
        else if (!strcmp(a, "--resume") && v) resume = argv[++i];
        else if (!strcmp(a, "--ckpt-dir") && v) ckdir = argv[++i];
        else if (!strcmp(a, "--save-every") && v) every = atoi(argv[++i]);
        else if (!strcmp(a, "--no-reference")) reference = 0;
        else if (!strcmp(a, "--explain")) explain = 1;
        else if (!strcmp(a, "--sp")) sp = 1;
        else if (!strcmp(a, "--recompute") && v && strlen(v) < sizeof p->recompute) strcpy(p->recompute, argv[++i]);
        else if (!strcmp(a, "--data") && v) DATA = argv[++i];
        else if (!strcmp(a, "--shuffle") && v) SHUFFLE = 1, SEED = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--tol") && v && atof(v) > 0) tol = atof(argv[++i]);
        else if (!strcmp(a, "--elastic")) par.elastic = 1;
        else if (!strcmp(a, "--kill") && v && sscanf(v, "%d@%d", &par.victim, &par.kill_step) == 2) i++, kill = 1;
        else if (!strcmp(a, "--replace") && v) par.replace = atoi(argv[++i]);
        else if (!strcmp(a, "--nan-from") && v && atoi(v) >= 0) nan_from = atoi(argv[++i]);
        else {
            int help = !strcmp(a, "--help");
            fprintf(help ? stdout : stderr, "%s", USAGE);
            return help ? 0 : 2;
        }
    }
    if (!kill) par.victim = -1;
    ref.victim = -1;
    if (par.elastic) { // (vescale_mesh.h's >>elastic)
#ifdef VESCALE_MPI // (an MPI with ULFM, run with it: mpirun --with-ft ulfm; else vs_mesh_shrink says what is missing)
        if (par.replace) return fprintf(stderr, "--replace: an MPI job does not grow back (ULFM shrinks only)\n"), 2;
#endif
        ROWS = 24; // DP x microbatches divide it on DP 4 and on DP 3 (and on 2 and 1)
        if (!zero_given) zero = 0;
        if (zero && !every && !(dp_shard > 0)) // (vs_train_reconfigure would say so, naming the state)
            return fprintf(stderr, "--elastic --zero %d: a failed replica's optimizer shards are then nowhere else: "
                                   "give --save-every N (they come from the newest checkpoint)\n", zero), 2;
    }
    if (par.replace && (!par.elastic || !kill || par.replace <= par.kill_step || (!resume && par.replace >= steps)))
        return fprintf(stderr, "--replace %d: with --elastic --kill R@S, S < S2 < the last step\n", par.replace), 2;
    if (device) { // the GPUs: a CUDA build and a visible device, else a clear skip (make run-gpu on a machine without)
#if !defined(VESCALE_NCCL)
        printf("train_gpt: --device cuda: this build has no CUDA (build with -DVESCALE_NCCL, -lcudart -lnccl -lnvrtc: "
               "make run-gpu); nothing to run\n");
        return 0;
#elif defined(VESCALE_MPI)
        fprintf(stderr, "train_gpt: --device cuda runs thread ranks on the NCCL transport; an MPI build does not\n");
        return 2;
#else
        int ndev = 0;
        cudaError_t e = cudaGetDeviceCount(&ndev);
        if (e != cudaSuccess || ndev < 1) {
            printf("train_gpt: --device cuda: no CUDA device visible (%s); nothing to run\n",
                   e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
            return 0;
        }
        if (!mesh_given && !autoplan) { // every visible GPU that fits the model's mesh (TP divides 4 heads, DP 16 rows)
            int n = ndev > 8 ? 8 : ndev;
            while (n > 1 && n != 8 && n != 4 && n != 2) n--;
            p->tp = n >= 2 ? 2 : 1, p->pp = n == 8 ? 2 : 1, p->dp = n / (p->tp * p->pp);
        }
        if (p->pp * p->dp * p->tp > ndev)
            return fprintf(stderr, "train_gpt: the mesh %dx%dx%d needs %d GPUs; %d visible\n", p->pp, p->dp, p->tp,
                           p->pp * p->dp * p->tp, ndev), 2;
        printf("train_gpt: %d CUDA device(s) visible; the mesh on %d of them (NCCL), the reference on the host\n", ndev,
               p->pp * p->dp * p->tp);
#endif
    }
    par.device = device;
    par.tol = tol ? tol : DTYPE == VS_BF16 || DATA ? 1e-3 : device ? 1e-4 : 1e-5; // (--data: the top comment)
    if (steps < 1 || steps > MAXSTEPS - 1) return fprintf(stderr, "--steps %d (1..%d)\n", steps, MAXSTEPS - 1), 2;
    if (save && strchr(save, '/')) { // the folder the checkpoint goes in (one level)
        char dir[1024];
        snprintf(dir, sizeof dir, "%.*s", (int)(strrchr(save, '/') - save), save);
        mkdir(dir, 0755);
    }
    if (gpt_model(&CFG, &STORE, &MODEL) != VS_OK || gpt_model_dtype(&STORE, DTYPE) != VS_OK)
        return fprintf(stderr, "gpt_model: %s\n", vs_last_error()), 1;
    p->zero = (vs_zero_stage)zero;
    p->dp_shard = dp_shard; // (vs_parallelize checks it divides DP)
    char latest[1024];
    if (resume && !strcmp(resume, "auto")) { // the newest complete checkpoint, whatever mesh saved it
        if (vs_ckpt_latest(ckdir, latest, sizeof latest) != VS_OK) {
            printf("--resume auto: %s: starting from scratch\n", vs_last_error());
            resume = NULL;
        } else resume = latest;
    }
    if (resume) { // where it stopped (the step count is in the checkpoint; the plan too)
        vs_plan saved;
        if (vs_train_saved_plan(resume, &saved) != VS_OK) return fprintf(stderr, "%s\n", vs_last_error()), 1;
        printf("resuming %s (saved on PP%d x DP%d x TP%d)\n", resume, saved.pp, saved.dp, saved.tp);
    }
    if (!autoplan) { // the mesh given; the microbatches too, or 8 in all
        if (mbs) p->microbatches = mbs;
        if (!p->microbatches) p->microbatches = 8 / p->dp > 0 ? 8 / p->dp : 1;
    }
    static vs_plan_estimate est[1024];
    int nest = 0;
    if (autoplan || explain) { // the planner: chooses the mesh (--auto) or explains the one given
        vs_constraints c;
        memset(&c, 0, sizeof c);
        c.world = autoplan ? (world ? world : 8) : p->pp * p->dp * p->tp;
        if (!autoplan) c.pp = p->pp, c.dp = p->dp, c.tp = p->tp;
        c.global_batch = ROWS;
        c.microbatches = autoplan ? mbs : p->microbatches;
        c.sequence_parallel = sp;
        c.act_bytes_per_row = (int64_t)CFG.seq * CFG.dim * 4; // gpt.h keeps [rows, T, D] f32 per layer
        vs_profile prof;
        memset(&prof, 0, sizeof prof);
#ifndef VESCALE_MPI
        if (vs_launch(c.world, prof_rank, &prof) != VS_OK) return fprintf(stderr, "profile: %s\n", vs_last_error()), 1;
        static char pt[2048]; // (vs_profile_print is the exact form, to save and parse back)
        vs_profile_describe(&prof, pt, sizeof pt);
        printf("profile (vs_profile_measure on %d thread ranks):\n", c.world);
        for (const char* l = pt; *l;) {
            int k = (int)strcspn(l, "\n");
            printf("  %.*s\n", k, l);
            l += k + (l[k] == '\n');
        }
#endif
        vs_plan chosen;
        if (vs_generate_plan(&MODEL, &c, &prof, &chosen, est, 1024, &nest) != VS_OK)
            return fprintf(stderr, "vs_generate_plan: %s\n", vs_last_error()), 1;
        if (autoplan) {
            *p = chosen;
            if (zero_given) p->zero = (vs_zero_stage)zero; // what the user fixed stays fixed
            if (dp_shard) p->dp_shard = dp_shard;
        }
    }
    p->sequence_parallel = sp && p->tp > 1; // (the planner's choice keeps --microbatches: it was a constraint)
    if (explain) { // the plan as it runs (nothing below changes it), beside the planner's estimates
        static char text[16384];
        if (vs_plan_explain_for(p, est, nest, text, sizeof text) < 0) return fprintf(stderr, "%s\n", vs_last_error()), 1;
        printf("%s\n", text);
    }
    if (ROWS % (p->dp * p->microbatches))
        return fprintf(stderr, "DP %d x %d microbatches do not divide the %d rows of a step\n", p->dp, p->microbatches, ROWS), 2;
    int dp_after = p->dp - (p->dp_shard > 0 && p->dp_shard < p->dp ? p->dp_shard : 1); // (HSDP: a DPR replica leaves)
    if (par.elastic && p->dp > 1 && ROWS % (dp_after * p->microbatches))
        return fprintf(stderr, "--elastic: DP %d x %d microbatches (after a failure) do not divide the %d rows of a step\n",
                       dp_after, p->microbatches, ROWS), 2;
    int nranks = p->pp * p->dp * p->tp;
    if (nan_from >= 0) { // (--nan-from: the last layer's backward through nan_backward)
        if (device) return fprintf(stderr, "--nan-from: host ranks only (not with --device cuda)\n"), 2;
        vs_pipe_unit* last = &STORE.layers[MODEL.nlayers - 1].unit;
        last_backward = last->backward, last->backward = nan_backward;
    }
    if (kill) { // (the --kill demo: every layer's forward through kill_forward)
        if (par.victim < 0 || par.victim >= nranks || par.kill_step < 0)
            return fprintf(stderr, "--kill %d@%d: a world rank 0..%d, a step >= 0\n", par.victim, par.kill_step, nranks - 1), 2;
        kill_mb = p->microbatches / 2;
        for (int u = 0; u < MODEL.nlayers; u++)
            unit_forward[u] = STORE.layers[u].unit.forward, STORE.layers[u].unit.forward = kill_forward;
    }

    char text[4096];
    vs_plan_print(p, text, sizeof text);
    printf("GPT: vocab %d, seq %d, dim %d, heads %d, layers %d (%lld parameters%s); %d rows x %d tokens per step%s\n",
           CFG.vocab, CFG.seq, CFG.dim, CFG.heads, CFG.layers, (long long)gpt_param_count(&CFG),
           DTYPE == VS_BF16 ? ", bf16" : "", ROWS, CFG.seq, device ? "; the mesh on GPUs" : "");
    printf("plan (vs_plan_print):\n%s", text);
    { // the pipeline schedule this plan runs, drawn
        vs_pipe_sched* s;
        vs_plan rp; // the defaults as vs_parallelize resolves them (chunks 0: the schedule's)
        if (vs_plan_resolve(p, &rp) != VS_OK) return fprintf(stderr, "%s\n", vs_last_error()), 1;
        if (rp.pp > 1 && vs_pipe_generate(NULL, rp.schedule, rp.pp, rp.chunks, rp.microbatches, &s) == VS_OK) {
            static char pic[16384];
            vs_pipe_costs costs;
            memset(&costs, 0, sizeof costs);
            vs_pipe_draw(s, &costs, 0, pic, sizeof pic);
            vs_pipe_sim sim;
            vs_pipe_simulate(s, &costs, &sim);
            printf("schedule %s (vs_pipe_draw, unit costs; bubble %.1f%%):\n%s", vs_pipe_kind_name(rp.schedule),
                   100 * sim.bubble, pic);
            vs_pipe_sched_free(s);
        }
    }

    par.steps = steps;
    par.save = save;
    par.save_every = every;
    par.ckdir = ckdir;
    if (every) mkdir(ckdir, 0755);
    par.resume = resume;
    ref.plan.pp = ref.plan.dp = ref.plan.tp = 1;
    ref.plan.microbatches = p->dp * p->microbatches; // the same microbatches, all on one rank
    ref.plan.schedule = VS_PIPE_GPIPE;
    ref.quiet = 1;
#ifdef VESCALE_MPI
    vs_world* w;
    vs_world_desc wd;
    memset(&wd, 0, sizeof wd);
    wd.transport = VS_TRANSPORT_MPI;
    if (vs_world_init(&wd, &w) != VS_OK) return fprintf(stderr, "vs_world_init: %s\n", vs_last_error()), 1;
    if (vs_world_size(w) != nranks) {
        fprintf(stderr, "the plan's mesh has %d ranks; run with mpirun -np %d\n", nranks, nranks);
        vs_world_abort(w, VS_ERR_INVALID);
    }
#endif
    if (reference && !resume) { // one rank first, from scratch: its losses print beside the mesh's
        ref.steps = steps;
        if (vs_launch(1, train, &ref) != VS_OK) return fprintf(stderr, "one rank: %s\n", vs_last_error()), 1;
        par.ref = &ref;
    }
    printf("\n  step   loss (mesh)  loss 1 rank   rel. diff    gnorm        lr   tokens/s   (gnorm: before clipping, *: clipped)\n");
    par.quiet = reference && resume; // (a resumed run is compared after it: the one-rank run starts at 0)
#ifdef VESCALE_MPI
    if (train(w, &par) != 0) vs_world_abort(w, VS_ERR_ABORTED);
    int me = vs_world_rank(w);
    vs_world_free(w);
    if (me != 0) return 0;
#else
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = nranks;
    ld.transport = device ? VS_TRANSPORT_NCCL : VS_TRANSPORT_THREADS;
    if (vs_launch_ex(&ld, train, &par) != VS_OK) return fprintf(stderr, "%s\n", vs_last_error()), 1;
#endif
    if (reference && resume) { // the one-rank run from scratch to the same step, then the table
        int lo = MAXSTEPS, hi = 0;
        for (int s = 0; s < MAXSTEPS; s++)
            if (par.have[s]) lo = s < lo ? s : lo, hi = s + 1;
        ref.steps = hi;
        if (vs_launch(1, train, &ref) != VS_OK) return fprintf(stderr, "one rank: %s\n", vs_last_error()), 1;
        printf("  (resumed at step %d: the one-rank run went from step 0 to %d)\n", lo, hi - 1);
        for (int s = lo; s < hi; s++) {
            double rel = fabs(par.loss[s] - ref.loss[s]) / fabs(ref.loss[s]);
            printf("  %4d   %10.6f   %10.6f   %9.2e   %9.0f\n", s, par.loss[s], ref.loss[s], rel,
                   ROWS * CFG.seq / par.secs[s]);
            if (!(rel <= par.tol)) par.failed = 1;
        }
    }
    int lo = -1, hi = -1;
    for (int s = 0; s < MAXSTEPS; s++)
        if (par.have[s]) hi = s, lo = lo < 0 ? s : lo;
    char dpt[48]; // HSDP: DPR x DPS
    if (p->dp_shard > 0 && p->dp_shard < p->dp) snprintf(dpt, sizeof dpt, "DPR%d x DPS%d", p->dp / p->dp_shard, p->dp_shard);
    else snprintf(dpt, sizeof dpt, "DP%d", p->dp);
    if (lo >= 0) printf("loss %.4f -> %.4f over steps %d..%d on PP%d x %s x TP%d%s%s", par.loss[lo], par.loss[hi], lo, hi,
                        p->pp, dpt, p->tp, p->zero == VS_ZERO_3 ? " (ZeRO-3)" : "",
                        reference ? (par.failed ? ": DIFFERS from one rank" : ": equals one rank within ") : "");
    if (lo >= 0 && reference && !par.failed) { // (as 1e-5 or 2.5e-4: %e without its zeros)
        char tt[32], *e, *z;
        snprintf(tt, sizeof tt, "%.3e", par.tol);
        e = strchr(tt, 'e');
        for (z = e; z[-1] == '0' || z[-1] == '.';) z--; // the mantissa's trailing zeros and point
        memmove(z, e, strlen(e) + 1);
        if ((e = strstr(tt, "e-0")) != NULL || (e = strstr(tt, "e+0")) != NULL) memmove(e + 2, e + 3, strlen(e + 3) + 1);
        printf("%s", tt);
    }
    if (lo >= 0) printf("\n");
    if (lo >= 0 && reference && DATA && DTYPE != VS_BF16) { // (real text: the top comment)
        double most = 0;
        for (int s = lo; s <= hi; s++)
            if (par.have[s] && ref.have[s]) {
                double rel = fabs(par.loss[s] - ref.loss[s]) / fabs(ref.loss[s]);
                most = rel > most ? rel : most;
            }
        printf("(real text: the largest difference %.2e; rounding of the DP/TP sums, grown by AdamW and loss spikes, "
               "may pass 1e-5)\n", most);
    }
    if (lo >= 0)
        printf("activation memory at its peak (rank 0, the pipeline engine's accounting): %.1f KiB%s%s\n",
               (double)par.act_peak / 1024, p->recompute[0] ? ", recomputing " : "", p->recompute);
    int nrun = 0, nskip = 0; // (--nan-from) the steps taken and how many were skipped
    for (int s = 0; s < MAXSTEPS; s++) nrun += par.have[s], nskip += par.have[s] && par.skipped[s];
    if (nskip) printf("%d of %d steps skipped: their gradients were not finite (vescale's warnings say which)\n", nskip, nrun);
    if (nrun && nskip == nrun) {
        fprintf(stderr, "train_gpt: every step was skipped (non-finite gradients): nothing was trained\n");
        return 1;
    }
    return par.failed;
}
