/* bench/ddp_zero3.c - a ZeRO-3 step (gather per layer in the forward and the backward,
   reduce-scatter per layer) overlapped with a modelled compute, with prefetch 1
   against prefetch 0 (the control), against the two lower bounds measured in the
   same run (issue 34, section 5: "Overlap"). Threads transport only.

       build/bench_ddp_zero3 [--ranks N] [--layers L] [--layer-mib M] [--factors 1,2]
                             [--steps S] [--warmup W]
       (build/bench_ddp --zero 3 [these options] runs it too)

   N thread ranks (default 4, at most 8), a 1-D mesh {N} named DP. The model: L layers (default 16), each
   one f32 parameter of M MiB (default 4), each its own ready group (a layer).
   One step (as bench/ddp.c's, the compute is modelled device time: the thread
   sleeps to absolute deadlines, holding no core, so the transport's progress
   threads run the collectives):

       t0 = now; dev = 0                      (the modelled device's timeline)
       forward  l = 0 .. L-1:   vs_ddp_gather(l+1); dev = max(dev, now - t0) + t_layer;
                                sleep until t0 + dev; vs_ddp_release(l+1)
       backward l = L-1 .. 0:   vs_ddp_gather(l+1); vs_ddp_grad(l); dev = max(dev,
                                now - t0) + 2 t_layer; sleep until t0 + dev;
                                vs_ddp_group_ready(l+1); vs_ddp_release(l+1)
       vs_ddp_finish_grad_sync; vs_ddp_step(lr 0)   (issues the next step's
                                first gathers; lr 0 changes nothing)
   (each step starts with vs_ddp_zero_grad and a barrier, outside the timed region)
   A layer's compute starts when the previous layer's ends and its gather is done
   (on a GPU the compute stream waits for the gather's event; here the gather
   returns), so a gather waited for delays the layers after it; prefetch hides it
   behind the previous layer's compute. (bench/ddp.c's backward has no such
   dependency: its deadlines are absolute.)

   Variants, one DDP each of prefetch 1 and prefetch 0:
       comm        the step with no sleeps on the prefetch-1 DDP: the gathers and
                   reduce-scatters alone (the communication lower bound)
       comm_p0     the same on the prefetch-0 DDP (reported)
   and per compute factor f (compute = f x comm, t_layer = f comm / 3L: a layer's
   backward computes twice its forward, as a matmul's two gradients do, so the
   backward's two collectives a layer (all-gather, reduce-scatter) get twice the
   forward's one's time; with an even split the backward alone would be
   communication-bound at f = 1, a step >= 3.5/3 = 1.17 x max by construction):
       compute     the sleeps alone, no DDP call
       prefetch1   the step above, prefetch 1 (default)
       prefetch0   the step above, prefetch 0: each gather waited for when asked
   W warm-up rounds (each sets t_layer again from the median comm so far, the first
   round left out once there is another), then S
   timed rounds; a round runs every variant once, rotated. A step's time is the max
   over ranks; ratio = median over rounds of variant / max(compute, comm) of the
   same round. Target (issue 34): prefetch1 <= 1.15 at factors 1 and 2. Printed,
   not enforced (exit 1 only when a call fails or a gathered value is wrong). */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vescale_ddp.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

#define MAXR 8
#define MAXF 4
enum { V_COMM, V_COMM_P0, V_COMPUTE, V_P1, V_P0, NKIND };
static const char* const kind_name[NKIND] = {"comm", "comm_p0", "compute", "prefetch1", "prefetch0"};

typedef struct opts {
    int ranks, layers, steps, warmup, nfactors;
    double layer_mib, factors[MAXF];
} opts;
typedef struct variant {
    int kind, fi;
    long t_layer_ns;
} variant;
typedef struct tctx {
    opts o;
    int64_t numel;
    variant v[2 + 3 * MAXF];
    int nv;
    double* t; /* [v][rank][round] */
    double* tg; /* rank 0's host time in vs_ddp_gather [v][round], and in finish + step [v][round] */
    double* tf;
    double* to; /* ... and in the backward's vs_ddp_grad, vs_ddp_group_ready and vs_ddp_release */
    int rounds;
    long bad[MAXR];
    int err[MAXR];
} tctx;

static void sleep_until(const struct timespec* t0, long long ns)
{
    struct timespec dl = *t0;
    long long s = ns / 1000000000LL;
    dl.tv_sec += (time_t)s;
    dl.tv_nsec += (long)(ns - s * 1000000000LL);
    if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &dl, NULL) == EINTR) {
    }
}

static float init_value(int l, int64_t e) { return (float)l + (float)(e % 1000) * 1e-3f; }

/* One step (above); d NULL: the sleeps alone. *bad counts wrong gathered values
   (a few elements of each layer read in the forward). */
static vs_result run_step(vs_ddp* d, int L, int64_t numel, long t_layer_ns, long* bad, double* tw)
{
    struct timespec t0;
    double tg, ts = now();
    long long dev = 0; /* ns after t0: the modelled device's compute timeline */
    vs_result r = VS_OK;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tw[0] = tw[1] = tw[2] = 0;
    for (int l = 0; l < L && !r; l++) {
        tg = now();
        if (d && (r = vs_ddp_gather(d, l + 1))) break;
        tw[0] += now() - tg;
        if (d) {
            const float* p = (const float*)vs_ddp_param(d, l);
            if (!p) return vs_set_error(VS_ERR_STATE, "%s", vs_last_error());
            for (int64_t e = 0; e < numel; e += numel / 7 + 1)
                if (p[e] != init_value(l, e)) ++*bad;
        }
        if (t_layer_ns > 0) {
            long long at = (long long)((now() - ts) * 1e9);
            dev = (at > dev ? at : dev) + t_layer_ns;
            sleep_until(&t0, dev);
        }
        if (d) r = vs_ddp_release(d, l + 1);
    }
    for (int l = L - 1; l >= 0 && !r; l--) {
        tg = now();
        if (d && (r = vs_ddp_gather(d, l + 1))) break;
        tw[0] += now() - tg;
        tg = now();
        if (d && !vs_ddp_grad(d, l)) return vs_set_error(VS_ERR_STATE, "%s", vs_last_error());
        tw[2] += now() - tg;
        if (t_layer_ns > 0) {
            long long at = (long long)((now() - ts) * 1e9);
            dev = (at > dev ? at : dev) + 2 * (long long)t_layer_ns;
            sleep_until(&t0, dev);
        }
        tg = now();
        if (d && !(r = vs_ddp_group_ready(d, l + 1))) r = vs_ddp_release(d, l + 1);
        tw[2] += now() - tg;
    }
    tg = now();
    if (!r && d) r = vs_ddp_finish_grad_sync(d);
    if (!r && d) r = vs_ddp_step(d, 0.0);
    tw[1] = now() - tg;
    return r;
}

static vs_result make_ddp(vs_mesh* mesh, const tctx* T, int prefetch, vs_ddp** out)
{
    vs_ddp* d = NULL;
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = mesh;
    dd.zero = VS_ZERO_3;
    dd.prefetch = prefetch, dd.prefetch_set = 1;
    dd.optim.kind = VS_OPTIM_SGD;
    vs_result r = vs_ddp_init(&dd, &d);
    float* data = (float*)malloc(sizeof(float) * (size_t)T->numel);
    if (!r && !data) r = vs_set_error(VS_ERR_NOMEM, "bench: init data");
    for (int l = 0; l < T->o.layers && !r; l++) {
        char name[32];
        vs_ddp_param_desc p;
        memset(&p, 0, sizeof p);
        snprintf(name, sizeof name, "h%d.w", l);
        for (int64_t e = 0; e < T->numel; e++) data[e] = init_value(l, e);
        p.name = name, p.dtype = VS_F32, p.ndim = 1, p.shape[0] = T->numel, p.data = data;
        p.ready_group = l + 1;
        r = vs_ddp_add_param(d, &p, NULL);
    }
    free(data);
    if (!r) r = vs_ddp_finalize(d);
    if (r) {
        vs_ddp_free(d);
        return r;
    }
    *out = d;
    return VS_OK;
}

static double step_max(const tctx* T, int vi, int round)
{
    double m = 0;
    for (int r = 0; r < T->o.ranks; r++) {
        double x = T->t[((size_t)vi * T->o.ranks + r) * T->rounds + round];
        if (x > m) m = x;
    }
    return m;
}
static int find_v(const tctx* T, int kind, int fi)
{
    for (int i = 0; i < T->nv; i++)
        if (T->v[i].kind == kind && (kind == V_COMM || kind == V_COMM_P0 || T->v[i].fi == fi)) return i;
    return -1;
}
/* median of variant vi's step over rounds [r0, r1) */
static double med(const tctx* T, int vi, int r0, int r1)
{
    double x[512];
    int n = 0;
    for (int s = r0; s < r1 && n < 512; s++) x[n++] = step_max(T, vi, s);
    return median(x, n);
}

/* median of a rank-0 series [v][round] over rounds [r0, r1) */
static double medv(const double* a, int vi, int r0, int r1, int rounds)
{
    double x[512];
    int n = 0;
    for (int s = r0; s < r1 && n < 512; s++) x[n++] = a[(size_t)vi * rounds + s];
    return median(x, n);
}

static int rank_fn(vs_world* w, void* arg)
{
    tctx* T = (tctx*)arg;
    const opts* o = &T->o;
    vs_mesh* mesh = NULL;
    vs_comm* c = NULL;
    vs_ddp* dp[2] = {NULL, NULL}; /* prefetch 0, 1 */
    int r = vs_comm_rank(vs_world_comm(w)), L = o->layers;
    THR_CHK(T, c, r, vs_mesh_init(w, &(vs_mesh_desc){.shape = {o->ranks}, .dim_names = {"DP"}}, &mesh), "vs_mesh_init");
    c = vs_mesh_comm(mesh);
    for (int k = 0; k < 2; k++) THR_CHK(T, c, r, make_ddp(mesh, T, k, &dp[k]), "make_ddp");
    for (int round = 0; round < o->warmup + o->steps; round++) {
        for (int j = 0; j < T->nv; j++) {
            int vi = (j + round) % T->nv;
            const variant* v = &T->v[vi];
            vs_ddp* d = v->kind == V_COMPUTE ? NULL : v->kind == V_P0 || v->kind == V_COMM_P0 ? dp[0] : dp[1];
            long tl = v->kind == V_COMM || v->kind == V_COMM_P0 ? 0 : v->t_layer_ns;
            if (d) THR_CHK(T, c, r, vs_ddp_zero_grad(d), "vs_ddp_zero_grad");
            THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");
            double ts = now();
            double tw[3];
            THR_CHK(T, c, r, run_step(d, L, T->numel, tl, &T->bad[r], tw), kind_name[v->kind]);
            T->t[((size_t)vi * o->ranks + r) * T->rounds + round] = now() - ts;
            if (r == 0) T->tg[(size_t)vi * T->rounds + round] = tw[0], T->tf[(size_t)vi * T->rounds + round] = tw[1],
                           T->to[(size_t)vi * T->rounds + round] = tw[2];
        }
        THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");
        if (r == 0 && round < o->warmup) { /* t_layer from the median comm of the warm-up rounds so far
                                               (after the first: it records the order and makes the pools) */
            double comm = med(T, find_v(T, V_COMM, 0), round > 0, round + 1);
            for (int i = 0; i < T->nv; i++)
                if (T->v[i].kind >= V_COMPUTE) T->v[i].t_layer_ns = (long)(o->factors[T->v[i].fi] * comm / (3 * L) * 1e9);
        }
        THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");
    }
out:
    for (int k = 0; k < 2; k++) vs_ddp_free(dp[k]);
    vs_mesh_free(mesh);
    return T->err[r] ? 1 : 0;
}

static int parse_list(const char* s, double* out, int max)
{
    int n = 0;
    char* end;
    while (*s && n < max) {
        out[n++] = strtod(s, &end);
        if (end == s) return -1;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

int main(int argc, char** argv)
{
    static tctx T;
    opts* o = &T.o;
    o->ranks = 4, o->layers = 16, o->layer_mib = 4, o->steps = 15, o->warmup = 4, o->nfactors = 2;
    o->factors[0] = 1, o->factors[1] = 2;
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) goto usage;
        if (!strcmp(a, "--ranks")) o->ranks = atoi(v);
        else if (!strcmp(a, "--layers")) o->layers = atoi(v);
        else if (!strcmp(a, "--layer-mib")) o->layer_mib = atof(v);
        else if (!strcmp(a, "--steps")) o->steps = atoi(v);
        else if (!strcmp(a, "--warmup")) o->warmup = atoi(v);
        else if (!strcmp(a, "--factors")) o->nfactors = parse_list(v, o->factors, MAXF);
        else goto usage;
        i++;
    }
    if (o->ranks < 2 || o->ranks > MAXR || o->layers < 2 || o->layer_mib <= 0 || o->steps < 1 || o->warmup < 1 || o->nfactors < 1 || o->steps > 500)
        goto usage;
    T.numel = (int64_t)(o->layer_mib * 1048576.0 / 4) / 64 * 64;
    T.v[T.nv++] = (variant){V_COMM, 0, 0};
    T.v[T.nv++] = (variant){V_COMM_P0, 0, 0};
    for (int f = 0; f < o->nfactors; f++)
        for (int k = V_COMPUTE; k <= V_P0; k++) T.v[T.nv++] = (variant){k, f, 0};
    T.rounds = o->warmup + o->steps;
    T.t = (double*)calloc((size_t)T.nv * (size_t)o->ranks * (size_t)T.rounds, sizeof(double));
    T.tg = (double*)calloc((size_t)T.nv * (size_t)T.rounds, sizeof(double));
    T.tf = (double*)calloc((size_t)T.nv * (size_t)T.rounds, sizeof(double));
    T.to = (double*)calloc((size_t)T.nv * (size_t)T.rounds, sizeof(double));
    char la[64];
    double t0 = now();
    vs_result r = vs_launch_ex(&(vs_launch_desc){.nranks = o->ranks, .timeout_s = 300}, rank_fn, &T);
    int rc = 0;
    if (r) {
        fprintf(stderr, "bench: vs_launch_ex: %s\n", vs_last_error());
        rc = 1;
    }
    for (int k = 0; k < o->ranks; k++)
        if (T.bad[k]) fprintf(stderr, "bench: rank %d: %ld gathered values wrong\n", k, T.bad[k]), rc = 1;
    if (!rc) {
        int w0 = o->warmup, w1 = T.rounds;
        double comm = med(&T, find_v(&T, V_COMM, 0), w0, w1), comm0 = med(&T, find_v(&T, V_COMM_P0, 0), w0, w1);
        printf("# ZeRO-3 step, %d thread ranks, %d layers of %.2f MiB f32 (a group a layer); medians of %d rounds\n",
               o->ranks, o->layers, (double)T.numel * 4 / 1048576.0, o->steps);
        printf("# comm alone: prefetch 1 %.2f ms, prefetch 0 %.2f ms; host in vs_ddp_gather %.2f ms, %.2f ms; in finish "
               "+ step %.2f ms, %.2f ms\n", comm * 1e3, comm0 * 1e3, medv(T.tg, find_v(&T, V_COMM, 0), w0, w1, T.rounds) * 1e3,
               medv(T.tg, find_v(&T, V_COMM_P0, 0), w0, w1, T.rounds) * 1e3,
               medv(T.tf, find_v(&T, V_COMM, 0), w0, w1, T.rounds) * 1e3,
               medv(T.tf, find_v(&T, V_COMM_P0, 0), w0, w1, T.rounds) * 1e3);
        printf("# %6s %9s %9s %9s %11s %11s %9s %9s\n", "factor", "compute", "comm", "max_bnd", "prefetch1", "prefetch0",
               "p1/max", "p0/max");
        for (int f = 0; f < o->nfactors; f++) {
            int vc = find_v(&T, V_COMPUTE, f), v1 = find_v(&T, V_P1, f), v0 = find_v(&T, V_P0, f), vm = find_v(&T, V_COMM, 0);
            double r1[512], r0[512];
            int n = 0;
            for (int s = w0; s < w1; s++, n++) { /* paired within the round */
                double mx = fmax(step_max(&T, vc, s), step_max(&T, vm, s));
                r1[n] = step_max(&T, v1, s) / mx, r0[n] = step_max(&T, v0, s) / mx;
            }
            double cp = med(&T, vc, w0, w1), p1 = med(&T, v1, w0, w1), p0 = med(&T, v0, w0, w1);
            double q1 = median(r1, n), q0 = median(r0, n);
            printf("  %6.1f %8.2fms %8.2fms %8.2fms %10.2fms %10.2fms %9.3f %9.3f\n", o->factors[f], cp * 1e3,
                   comm * 1e3, fmax(cp, comm) * 1e3, p1 * 1e3, p0 * 1e3, q1, q0);
            printf("#        host in vs_ddp_gather a step (rank 0): prefetch1 %.2f ms, prefetch0 %.2f ms; in finish + "
                   "step: %.2f ms, %.2f ms; in grad, group_ready, release: %.2f ms, %.2f ms\n",
                   medv(T.tg, v1, w0, w1, T.rounds) * 1e3, medv(T.tg, v0, w0, w1, T.rounds) * 1e3,
                   medv(T.tf, v1, w0, w1, T.rounds) * 1e3, medv(T.tf, v0, w0, w1, T.rounds) * 1e3,
                   medv(T.to, v1, w0, w1, T.rounds) * 1e3, medv(T.to, v0, w0, w1, T.rounds) * 1e3);
            printf("summary zero=3 compute=%.1fxcomm prefetch1_ratio=%.3f prefetch0_ratio=%.3f target=1.15 %s\n",
                   o->factors[f], q1, q0, q1 <= 1.15 ? "MET" : "MISS");
        }
    }
    printf("# bench_ddp_zero3 done: %.1f s; loadavg %s%s\n", now() - t0, loadavg(la, sizeof la), rc ? "; ERRORS" : "");
    free(T.t), free(T.tg), free(T.tf), free(T.to);
    return rc;
usage:
    fprintf(stderr, "usage: bench_ddp_zero3 [--ranks 2..8] [--layers L>=2] [--layer-mib M] [--factors 1,2] [--steps S] [--warmup W]\n");
    return 2;
}
