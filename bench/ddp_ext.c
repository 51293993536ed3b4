/* bench/ddp_ext.c - the gradient sync of a trainer's own flat buffers (issue 22):
   packing each bucket into a staging buffer (one call a bucket) against one
   grouped call a parameter in place (vs_ddp_desc.staged 0, the default), both against DDP's
   own contiguous buckets, measured in the same run.

       build/bench_ddp_ext [--dp N] [--zero Z] [--dim C] [--layers L] [--steps S]

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
   compute to hide it). A round runs the three variants once each in a rotated
   order; S rounds (default 15) after 3 warm-up; a step's time is the max over
   ranks (a barrier first); the median per variant is reported with its ratio to
   DDP's own buckets. */
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

typedef struct bcfg {
    int dp, zero, dim, layers, steps, warmup;
    double* times[NVAR]; // [rounds]: rank 0 writes the max over ranks
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
    float* P = (float*)calloc((size_t)T, sizeof(float));
    float* G = (float*)calloc((size_t)T, sizeof(float));
    vs_ddp* d[NVAR];
    int* idx = (int*)malloc(sizeof(int) * (size_t)(L * NKIND) * NVAR);
    for (int v = 0; v < NVAR; v++) {
        vs_ddp_desc dd;
        memset(&dd, 0, sizeof dd);
        dd.mesh = mesh;
        dd.optim.kind = VS_OPTIM_SGD;
        dd.zero = (vs_zero_stage)b->zero;
        dd.bucket_bytes = layer * 4;
        dd.staged = v == 1;
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
                    pd.storage = P + off, pd.grad_storage = G + off;
                    pd.ready_group = l + 1;
                }
                if (vs_ddp_add_param(d[v], &pd, &idx[(v * L + l) * NKIND + k])) return 1;
            }
        if (vs_ddp_finalize(d[v])) {
            fprintf(stderr, "finalize: %s\n", vs_last_error());
            return 1;
        }
    }
    vs_comm* c = vs_mesh_comm(mesh);
    int rounds = b->warmup + b->steps;
    for (int r = 0; r < rounds; r++)
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
        }
    for (int v = 0; v < NVAR; v++) vs_ddp_free(d[v]);
    vs_mesh_free(mesh);
    free(P);
    free(G);
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
    b.dp = 2, b.dim = 256, b.layers = 12, b.steps = 15, b.warmup = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--dp")) b.dp = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--zero")) b.zero = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--dim")) b.dim = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--layers")) b.layers = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) b.steps = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: %s [--dp N] [--zero 0|1] [--dim C] [--layers L] [--steps S]\n", argv[0]);
            return 2;
        }
    }
    if (b.dp < 1 || b.dim < 1 || b.layers < 1 || b.steps < 1 || b.zero < 0 || b.zero > 1) {
        fprintf(stderr, "bench_ddp_ext: --dp, --dim, --layers and --steps must be >= 1, --zero 0 or 1\n");
        return 2;
    }
    for (int v = 0; v < NVAR; v++) b.times[v] = (double*)calloc((size_t)b.steps, sizeof(double));
    if (vs_launch(b.dp, bench_rank, &b)) {
        fprintf(stderr, "bench_ddp_ext: %s\n", vs_last_error());
        return 1;
    }
    int64_t ks[NKIND], layer = 0;
    kind_sizes(b.dim, ks);
    for (int k = 0; k < NKIND; k++) layer += ks[k];
    printf("gradient sync of flat buffers, DP%d, ZeRO-%d, %d layers x %.2f MiB (f32), median of %d:\n\n", b.dp, b.zero,
           b.layers, (double)layer * 4 / (1 << 20), b.steps);
    printf("| variant | median ms | vs DDP-owned |\n|---|---|---|\n");
    double med[NVAR];
    for (int v = 0; v < NVAR; v++) {
        qsort(b.times[v], (size_t)b.steps, sizeof(double), cmpd);
        med[v] = b.times[v][b.steps / 2];
    }
    for (int v = 0; v < NVAR; v++) printf("| %s | %.3f | %.3f |\n", var_name[v], 1e3 * med[v], med[v] / med[0]);
    for (int v = 0; v < NVAR; v++) free(b.times[v]);
    return 0;
}
