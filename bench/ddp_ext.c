/* bench/ddp_ext.c - the gradient sync of a trainer's own flat buffers (issue 22):
   packing each bucket into a staging buffer (one call a bucket) against one
   grouped call a parameter in place (vs_ddp_desc.staged 0, the default), both against DDP's
   own contiguous buckets, measured in the same run.

       build/bench_ddp_ext [--dp N] [--zero Z] [--dim C] [--layers L] [--steps S]
                           [--step K] [--work W] [--one-call 1]

   The model has the layout of a plain-C GPT-2 trainer: 12 tensor kinds a layer
   (ln1 w/b, qkv w/b, attention projection w/b, ln2 w/b, fc w/b, fc projection
   w/b; 12 C^2 + 13 C floats), each kind contiguous across the L layers, so one
   layer's gradients are 12 pieces spread over the whole buffer. Registered layer
   by layer, a ready group a layer (one bucket a layer in all three variants:
   DDP's own buckets get bucket_bytes = one layer). ZeRO-0 (default) or 1
   (--zero 1: the in-place variant reduces each piece to its owner), f32, SGD
   not run: a step is the sync alone,

       for l = L-1 .. 0: vs_ddp_grad_ready for the layer's 12 tensors
       vs_ddp_finish_grad_sync

   on thread ranks, all gradients ready at once (the sync's own cost, no
   compute to hide it; the zeroing between steps untimed, the trainer's by the
   trainer: trainer_zero_grad). A round runs the three variants once each in a rotated
   order; S rounds (default 15) after 3 warm-up; a step's time is the max over
   ranks (a barrier first); the median per variant is reported with its ratio to
   DDP's own buckets.

   --step K times whole training steps instead, K in a row per variant and
   round (a barrier before, the last step's gathers waited for inside the
   time), per step:

       forward:  for l = 0 .. L-1: vs_ddp_param(first tensor of layer l) (waits
                 for that layer's ZeRO all-gather), then W multiply-adds an
                 element of the layer's parameters
       backward: for l = L-1 .. 0: W multiply-adds an element, written into the
                 layer's gradients, then the layer marked ready (a ready group
                 for the trainer's buffers, vs_ddp_grad_ready a tensor for DDP's)
       vs_ddp_finish_grad_sync; vs_ddp_step (SGD)

   so ZeRO-1's gathers of the next step overlap the forward as far as the step
   lets them: in place they all start in vs_ddp_step, which returns at once;
   staged, vs_ddp_step itself waits for most of them (zero2_buffers staging
   buffers, default 2); DDP's own buckets are all waited for before
   vs_ddp_zero_grad (which would wait for them). The trainer's variants zero
   their own gradients (trainer_zero_grad), DDP's own are zeroed by
   vs_ddp_zero_grad, both inside the time.

   --one-call 1 (with --step): the staged variant becomes the in-place one
   whose vs_ddp_step ends the gradient sync itself (vs_ddp_desc.finish_in_step),
   timed beside the in-place one's explicit vs_ddp_finish_grad_sync.

   Then where a step's time goes (rank 0's medians a phase), and the gathers'
   overlap: their time alone (one more step a round, whose gathers are waited
   for right after vs_ddp_step) against the time the next step waits for them;
   hidden = 1 - waited / alone. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vescale_ddp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NKIND 12
#define NVAR 3
static const char* var_name[NVAR] = {"DDP-owned buckets", "trainer's, staged copy", "trainer's, grouped in place"};

/* --step's breakdown of a step, rank 0's own time in each phase */
enum { PH_ZERO, PH_FWD, PH_WAIT, PH_BWD, PH_SYNC, PH_STEP, PH_GATHER, NPH };
static const char* ph_name[NPH] = {"zero_grad", "forward", "gather waits (in the forward, or before zero_grad)",
                                   "backward", "finish_grad_sync", "vs_ddp_step", "gathers alone"};

typedef struct bcfg {
    int dp, zero, dim, layers, steps, warmup;
    int step, work; // --step K (whole steps, K in a row), --work W (multiply-adds an element)
    int one_call;   // --one-call 1: variant 1 is in place with finish_in_step
    double* times[NVAR]; // [rounds]: rank 0 writes the max over ranks
    double* ph[NVAR][NPH]; // [rounds]: --step, rank 0's phases a step
} bcfg;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void kind_sizes(int C, int64_t* s)
{
    int64_t c = C;
    int64_t v[NKIND] = {c, c, 3 * c * c, 3 * c, c * c, c, c, c, 4 * c * c, 4 * c, 4 * c * c, c};
    memcpy(s, v, sizeof v);
}

/* W multiply-adds on each of n elements: the modelled compute of a layer. */
static float layer_forward(const float* p, int64_t n, int work)
{
    float acc = 0;
    for (int64_t i = 0; i < n; i++) {
        float x = p[i];
        for (int r = 0; r < work; r++) x = x * 0.999f + 1e-4f;
        acc += x;
    }
    return acc;
}
static void layer_backward(float* g, const float* p, int64_t n, int work)
{
    for (int64_t i = 0; i < n; i++) {
        float x = p[i];
        for (int r = 0; r < work; r++) x = x * 0.999f + 1e-4f;
        g[i] += 1e-3f * x;
    }
}

/* One whole training step of variant v (--step): see the top comment. Adds
   each phase's time to ph; with `alone`, waits for the gathers right after
   vs_ddp_step (none hidden) and adds that wait to ph[PH_GATHER]. */
static int one_step(vs_ddp* d, int v, int L, const int64_t* ks, const int* idx, float* G, int64_t T, int work,
                    volatile float* sink, double* ph, int alone, int one_call)
{
    double t = now(), t1;
    if (v == 0) { // vs_ddp_zero_grad waits for every gather: counted as the forward's wait
        if (vs_ddp_wait_params(d)) return 1;
        t1 = now(), ph[PH_WAIT] += t1 - t, t = t1;
    }
    if (v > 0) memset(G, 0, (size_t)T * sizeof(float)); // the trainer's own zero_grad (trainer_zero_grad)
    else if (vs_ddp_zero_grad(d)) return 1;
    t1 = now(), ph[PH_ZERO] += t1 - t, t = t1;
    float acc = 0;
    for (int l = 0; l < L; l++) {
        double tw = now();
        if (!vs_ddp_param(d, idx[l * NKIND])) return 1; // this layer's gather, waited for
        ph[PH_WAIT] += now() - tw;
        for (int k = 0; k < NKIND; k++) {
            const float* p = (const float*)vs_ddp_param(d, idx[l * NKIND + k]);
            acc += layer_forward(p, ks[k], work);
        }
    }
    *sink = acc;
    t1 = now(), ph[PH_FWD] += t1 - t, t = t1;
    for (int l = L - 1; l >= 0; l--) {
        for (int k = 0; k < NKIND; k++) {
            int i = idx[l * NKIND + k];
            float* g = (float*)vs_ddp_grad(d, i);
            if (!g) return 1;
            layer_backward(g, (const float*)vs_ddp_param(d, i), ks[k], work);
        }
        if (v > 0) {
            if (vs_ddp_group_ready(d, l + 1)) return 1;
        } else
            for (int k = 0; k < NKIND; k++)
                if (vs_ddp_grad_ready(d, idx[l * NKIND + k])) return 1;
    }
    t1 = now(), ph[PH_BWD] += t1 - t, t = t1;
    if (!one_call && vs_ddp_finish_grad_sync(d)) return 1; // (one_call: vs_ddp_step's own)
    t1 = now(), ph[PH_SYNC] += t1 - t, t = t1;
    if (vs_ddp_step(d, 1e-3)) return 1;
    t1 = now(), ph[PH_STEP] += t1 - t, t = t1;
    if (alone && vs_ddp_wait_params(d)) return 1;
    ph[PH_GATHER] += now() - t;
    return 0;
}

static int bench_rank(vs_world* w, void* arg)
{
    bcfg* b = (bcfg*)arg;
    int L = b->layers;
    int64_t ks[NKIND], T = 0, layer = 0;
    kind_sizes(b->dim, ks);
    for (int k = 0; k < NKIND; k++) T += ks[k] * L, layer += ks[k];
    vs_mesh* mesh = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = b->dp;
    if (vs_mesh_init(w, &md, &mesh)) return 1;
    float* Pv[NVAR];
    float* Gv[NVAR]; // the trainer's buffers, each variant its own (their gathers may still run)
    for (int v = 0; v < NVAR; v++) {
        Pv[v] = (float*)calloc((size_t)T, sizeof(float));
        Gv[v] = (float*)calloc((size_t)T, sizeof(float));
        for (int64_t i = 0; i < T; i++) Pv[v][i] = 0.01f * (float)(i % 97);
    }
    vs_ddp* d[NVAR];
    int* idx = (int*)malloc(sizeof(int) * (size_t)(L * NKIND) * NVAR);
    for (int v = 0; v < NVAR; v++) {
        vs_ddp_desc dd;
        memset(&dd, 0, sizeof dd);
        dd.mesh = mesh;
        dd.optim.kind = VS_OPTIM_SGD;
        dd.zero = (vs_zero_stage)b->zero;
        dd.bucket_bytes = layer * 4;
        dd.staged = v == 1 && !b->one_call;
        dd.finish_in_step = v == 1 && b->one_call;
        dd.trainer_zero_grad = v > 0; // (the sync alone: the zeroing untimed for every variant)
        if (vs_ddp_init(&dd, &d[v])) return 1;
        for (int l = 0; l < L; l++)
            for (int k = 0; k < NKIND; k++) {
                char name[32];
                snprintf(name, sizeof name, "h.%d.%d", l, k);
                int64_t off = 0;
                for (int j = 0; j < k; j++) off += ks[j] * L;
                off += ks[k] * l;
                vs_ddp_param_desc pd;
                memset(&pd, 0, sizeof pd);
                pd.name = name;
                pd.dtype = VS_F32;
                pd.ndim = 1;
                pd.shape[0] = ks[k];
                if (v > 0) {
                    pd.storage = Pv[v] + off, pd.grad_storage = Gv[v] + off;
                    pd.ready_group = l + 1;
                } else
                    pd.data = Pv[v] + off;
                if (vs_ddp_add_param(d[v], &pd, &idx[(v * L + l) * NKIND + k])) return 1;
            }
        if (vs_ddp_finalize(d[v])) {
            fprintf(stderr, "finalize: %s\n", vs_last_error());
            return 1;
        }
    }
    vs_comm* c = vs_mesh_comm(mesh);
    int rounds = b->warmup + b->steps;
    volatile float sink = 0;
    for (int r = 0; r < rounds && b->step; r++)
        for (int i = 0; i < NVAR; i++) {
            int v = (i + r) % NVAR;
            double ph[NPH] = {0}, alone[NPH] = {0};
            if (vs_barrier(c, NULL)) return 1;
            int oc = v == 1 && b->one_call; // vs_ddp_step ends the sync
            double t0 = now();
            for (int s = 0; s < b->step; s++)
                if (one_step(d[v], v, L, ks, idx + v * L * NKIND, Gv[v], T, b->work, &sink, ph, 0, oc)) {
                    fprintf(stderr, "step: %s\n", vs_last_error());
                    return 1;
                }
            if (vs_ddp_wait_params(d[v])) return 1; // the last step's gathers, inside the time
            double t = (now() - t0) / b->step;
            // one more step, untimed, whose gathers are waited for at once: their time alone
            if (one_step(d[v], v, L, ks, idx + v * L * NKIND, Gv[v], T, b->work, &sink, alone, 1, oc)) return 1;
            ph[PH_GATHER] = alone[PH_GATHER] * b->step; // (the timed steps' own column holds nothing)
            if (vs_all_reduce(c, &t, &t, 1, VS_F64, VS_OP_MAX, NULL)) return 1;
            for (int p = 0; p < NPH && vs_world_rank(w) == 0 && r >= b->warmup; p++)
                b->ph[v][p][r - b->warmup] = ph[p] / b->step;
            if (vs_world_rank(w) == 0 && r >= b->warmup) b->times[v][r - b->warmup] = t;
        }
    for (int r = 0; r < rounds && !b->step; r++)
        for (int i = 0; i < NVAR; i++) {
            int v = (i + r) % NVAR;
            if (vs_barrier(c, NULL)) return 1;
            double t0 = now();
            for (int l = L - 1; l >= 0; l--)
                for (int k = 0; k < NKIND; k++)
                    if (vs_ddp_grad_ready(d[v], idx[(v * L + l) * NKIND + k])) return 1;
            if (vs_ddp_finish_grad_sync(d[v])) {
                fprintf(stderr, "sync: %s\n", vs_last_error());
                return 1;
            }
            double t = now() - t0;
            if (vs_all_reduce(c, &t, &t, 1, VS_F64, VS_OP_MAX, NULL)) return 1;
            if (vs_world_rank(w) == 0 && r >= b->warmup) b->times[v][r - b->warmup] = t;
            if (vs_ddp_zero_grad(d[v])) return 1;
            if (v > 0) memset(Gv[v], 0, (size_t)T * sizeof(float)); // (trainer_zero_grad)
        }
    for (int v = 0; v < NVAR; v++) vs_ddp_free(d[v]);
    vs_mesh_free(mesh);
    for (int v = 0; v < NVAR; v++) free(Pv[v]), free(Gv[v]);
    free(idx);
    return 0;
}

static int cmpd(const void* a, const void* b)
{
    double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char** argv)
{
    bcfg b;
    memset(&b, 0, sizeof b);
    b.dp = 2, b.dim = 256, b.layers = 12, b.steps = 15, b.warmup = 3, b.work = 4;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--dp")) b.dp = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--zero")) b.zero = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--dim")) b.dim = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--layers")) b.layers = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) b.steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--step")) b.step = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--work")) b.work = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--one-call")) b.one_call = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: %s [--dp N] [--zero 0|1] [--dim C] [--layers L] [--steps S] [--step K] [--work W] "
                            "[--one-call 1]\n", argv[0]);
            return 2;
        }
    }
    if (b.dp < 1 || b.dim < 1 || b.layers < 1 || b.steps < 1 || b.zero < 0 || b.zero > 1 || b.step < 0 || b.work < 0 ||
        (b.one_call && !b.step)) {
        fprintf(stderr, "bench_ddp_ext: --dp, --dim, --layers and --steps must be >= 1, --zero 0 or 1, --step and "
                        "--work >= 0, --one-call with --step\n");
        return 2;
    }
    if (b.one_call) var_name[1] = "trainer's, in place, vs_ddp_step ends the sync";
    for (int v = 0; v < NVAR; v++) {
        b.times[v] = (double*)calloc((size_t)b.steps, sizeof(double));
        for (int p = 0; p < NPH; p++) b.ph[v][p] = (double*)calloc((size_t)b.steps, sizeof(double));
    }
    if (vs_launch(b.dp, bench_rank, &b)) {
        fprintf(stderr, "bench_ddp_ext: %s\n", vs_last_error());
        return 1;
    }
    int64_t ks[NKIND], layer = 0;
    kind_sizes(b.dim, ks);
    for (int k = 0; k < NKIND; k++) layer += ks[k];
    if (b.step)
        printf("whole steps (forward, backward, sync, step; %d multiply-adds an element), %d in a row, DP%d, ZeRO-%d, "
               "%d layers x %.2f MiB (f32), median of %d:\n\n", b.work, b.step, b.dp, b.zero, b.layers,
               (double)layer * 4 / (1 << 20), b.steps);
    else
        printf("gradient sync of flat buffers, DP%d, ZeRO-%d, %d layers x %.2f MiB (f32), median of %d:\n\n", b.dp,
               b.zero, b.layers, (double)layer * 4 / (1 << 20), b.steps);
    printf("| variant | median ms | vs DDP-owned |\n|---|---|---|\n");
    double med[NVAR];
    for (int v = 0; v < NVAR; v++) {
        qsort(b.times[v], (size_t)b.steps, sizeof(double), cmpd);
        med[v] = b.times[v][b.steps / 2];
    }
    for (int v = 0; v < NVAR; v++) printf("| %s | %.3f | %.3f |\n", var_name[v], 1e3 * med[v], med[v] / med[0]);
    if (b.step) {
        double pm[NVAR][NPH];
        for (int v = 0; v < NVAR; v++)
            for (int p = 0; p < NPH; p++) {
                qsort(b.ph[v][p], (size_t)b.steps, sizeof(double), cmpd);
                pm[v][p] = b.ph[v][p][b.steps / 2];
            }
        printf("\nwhere a step's time goes (rank 0, median ms a step; \"gathers alone\": an extra step's, waited for at "
               "once after vs_ddp_step):\n\n| phase |");
        for (int v = 0; v < NVAR; v++) printf(" %s |", var_name[v]);
        printf("\n|---|%s\n", NVAR == 3 ? "---|---|---|" : "");
        for (int p = 0; p < NPH; p++) {
            printf("| %s |", ph_name[p]);
            for (int v = 0; v < NVAR; v++) printf(" %.3f |", 1e3 * pm[v][p]);
            printf("\n");
        }
        for (int v = 0; v < NVAR && b.zero; v++) // the next forward waits only for what it does not hide
            printf("%s: ZeRO-1 gathers %.3f ms alone, %.3f ms waited for by the next step: %.0f%% hidden\n",
                   var_name[v], 1e3 * pm[v][PH_GATHER], 1e3 * pm[v][PH_WAIT],
                   pm[v][PH_GATHER] > 0 ? 100 * (1 - pm[v][PH_WAIT] / pm[v][PH_GATHER]) : 0.0);
    }
    for (int v = 0; v < NVAR; v++) {
        free(b.times[v]);
        for (int p = 0; p < NPH; p++) free(b.ph[v][p]);
    }
    return 0;
}
