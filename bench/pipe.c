/* bench/pipe.c - the pipeline engine (vescale_pipe.h) on every built-in schedule,
   against its own simulator fed with the costs measured in the same run.
   Threads transport only (no MPI).

       build/bench_pipe [--unit-ms 2] [--units 16] [--mbs 8,16] [--reps 5]
                        [--kinds gpipe,1f1b,interleaved,zbh1,zbv,dualpipev]
                        [--trace-dir build] [--draw] [--strict]

   P = 4 stages on 4 thread ranks (vs_launch_ex), a 1-D mesh {4} named PP. The
   model: U identical layer units (default 16) and a loss unit. A layer is
   y = tanh(w * x + b) on 16 floats (tiny tensors: transfers cost little), with a
   forward, a full backward and the split ones (backward_input B, backward_weight
   W); the loss unit is 0.5 * sum(x^2), full backward only, no modelled cost.
   Split by vs_pipe_split (measured time, every layer F = B = W = 1 unit cost) into
   P x V chunks of U/(P*V) layers: V = 1 for gpipe, 1f1b and zbh1 (placement loop),
   2 for interleaved (loop), zbv and dualpipev (V-shaped); the loss unit joins the
   last chunk. The math is the same for every schedule.

   Unit compute is modelled device time: a layer's callback sleeps (clock_nanosleep
   to an absolute deadline, no core held) for its cost, F : B : W = 1 : 1 : 1
   (--unit-ms each, default 2 ms), the full backward B + W, as a host thread
   waiting for a GPU kernel would; so 4 ranks on this 2-core machine behave like 4
   devices. Each rank has a device clock: the layers of one instruction (F, B, W or
   BW of one chunk and microbatch) run back to back on it (the next layer's
   deadline is the previous one's + its cost, as kernels queued by an asynchronous
   launch would), and an instruction's first layer starts when the host calls it.
   So an instruction lasts its modelled cost plus the host's own time (the engine,
   one wake-up): that excess is the "overhead" below. The rank threads set their
   timer slack to 1 ns (Linux prctl), so a sleep ends at its deadline rather than up
   to 50 us later; what lateness remains (the VM's timer) is the "wake" column.

   Per M (default 8 and 16): every kind's schedule (vs_pipe_generate, P = 4) gets
   its own vs_pipe; one warm-up run each, then R (default 5) timed rounds, each
   running every kind once in an order rotated by one per round (round-robin, so
   the VM's noise hits them alike). A barrier before every run; a run's time is
   (latest end of vs_pipe_run) - (earliest start), over the ranks, and a kind
   reports the median of its R runs. The ranks are threads of one process, so their
   timelines (vs_pipe_last_timeline, seconds from each rank's start) are put on one
   clock with the CLOCK_MONOTONIC time each rank took just before vs_pipe_run.

   Columns:
     time_ms     median minibatch time (and the fastest..slowest run)
     bubble      measured idle fraction: 1 - sum of the stages' busy time (the
                 lengths of their F, B, W and BW instructions) / (P x span), span =
                 first instruction's start to last one's end over all stages
                 (median over the runs)
     sim_ms      vs_pipe_simulate's makespan with the costs measured in the same
                 runs: per chunk the median length of its F, B and W instructions
                 (BW schedules: the median BW split B : W = 1 : 1, as the model's
                 costs are), and p2p = the median time from a send's start to the
                 end of its receive, over receives that had to wait for the data
     sim_bub     the simulator's bubble fraction
     ideal_ms    total work / P, from the same measured costs (the simulator's)
     ratio       time_ms / sim_ms, target <= 1.05
     F,B,W       median instruction length per chunk (ms)
     p2p         the p2p above (us)
     ovh_*       the engine's own time per instruction (us, medians): a compute
                 instruction's length minus its modelled sleep; sends' lengths;
                 receives' lengths where the data was there already
     wake        the mean lateness of a modelled kernel's wake-up (us): the part of
                 ovh_* that is the sleep's, not the engine's
   Summary lines start with "summary " (grep them):
     summary pipe correctness M=<m> ... PASS|FAIL  every kind's minibatch loss (each
         run, each rank) and every layer's gradients memcmp-equal to a plain
         one-device loop over the same units
     summary pipe measured_vs_sim <kind> M=<m> ratio=<x> target<=1.05 PASS|MISS
     summary pipe zbv_speedup_vs_1f1b M=8 = <x> target>=1.2 PASS|MISS   (1f1b / zbv;
         other M: no target)
     summary pipe dualpipev_vs_zbv M=<m> = <x> target>=1.0 PASS|MISS   (zbv / dualpipev)
   Chrome traces (Perfetto, chrome://tracing) of the first M's last timed run and
   of its simulation: <trace-dir>/pipe_<kind>.json and pipe_<kind>_sim.json.
   --draw prints the simulator's text timeline of every kind at the first M.
   Exit status: 1 when a call failed or a result was wrong; a missed target prints
   MISS and exits 0 unless --strict. */
#define VESCALE_IMPLEMENTATION
#include "vescale_pipe.h"
#include "bench/bench_util.h"

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#define NR 4     /* stages = thread ranks */
#define D 16     /* floats per activation */
#define MAXU 128 /* layer units */
#define MAXM 256 /* microbatches */
#define MAXMS 8  /* M values */
#define MAXREP 51
#define NK 6
#define MAXCK (2 * NR) /* chunks: V <= 2 */
#define TARGET_SIM 1.05
#define TARGET_ZBV 1.2
#define TARGET_DPV 1.0

static const vs_pipe_kind kinds_all[NK] = {VS_PIPE_GPIPE, VS_PIPE_1F1B, VS_PIPE_INTERLEAVED,
                                           VS_PIPE_ZBH1,  VS_PIPE_ZBV,  VS_PIPE_DUALPIPEV};

typedef struct opts {
    double unit_ms;
    int units, reps, strict, draw;
    int mbs[MAXMS], nmbs;
    vs_pipe_kind kinds[NK];
    int nkinds;
    const char* trace_dir; /* NULL: no traces */
} opts;

enum { OP_F, OP_B, OP_W, OP_BW, NOP };

/* A rank's modelled device: the end of the last modelled kernel and which layer
   call it was. */
typedef struct devclk {
    double end;
    int op, chunk, mb, unit;
    double late; /* sum of wake-up lateness (s) */
    long nlate;
} devclk;

typedef struct layer {
    float w[D], b[D], gw[D], gb[D];
    devclk* dc;
    double cost; /* seconds per F, B or W */
} layer;

typedef struct rankst {
    devclk dc;
    layer lay[MAXU];
    vs_pipe_unit u[MAXU + 1];
    char name[MAXU + 1][16], in[MAXU + 1][16], out[MAXU + 1][32];
} rankst;

typedef struct runrec { /* one run on one rank */
    double a, b;        /* CLOCK_MONOTONIC before and after vs_pipe_run */
    double *t0, *t1;    /* the timeline, copied */
    int n;
    double loss;
    double late; /* the device clock's wake-up lateness, summed */
    long nlate;
} runrec;

typedef struct kres { /* one kind at one M, rank 0's analysis */
    int ok;
    double time, tmin, tmax, span, bubble;
    double sim, sim_bubble, ideal, ratio;
    double f, b, w, bw, p2p;
    double ovh[NOP], send, recv, wake;
} kres;

typedef struct tctx { /* shared by the thread ranks */
    const opts* o;
    int err[NR];
    int bad; /* wrong results (rank 0 counts) */
    int mi;  /* the M being run */
    /* per kind at the current M */
    vs_pipe_sched* sched[NK][NR]; /* each rank's own (the same lists) */
    vs_pipe_plan plan[NK];        /* rank 0's */
    runrec rec[NK][MAXREP + 1][NR]; /* [0]: the warm-up run */
    float g[NK][MAXU][2][D];        /* gradients after the warm-up run, by their owner */
    double warm_loss[NK][NR];
    kres res[MAXMS][NK];
    /* the one-device reference, per M */
    double ref_loss[MAXMS];
    float ref_g[MAXMS][MAXU][2][D];
    double other[MAXMS]; /* other programs' CPU, cores */
    char lines[8192];    /* summary lines, printed at the end */
    size_t nlines;
} tctx;

static rankst RS[NR];

/* ---- the model --------------------------------------------------------------- */

static void sleep_until(double t)
{
    struct timespec dl;
    double s = floor(t);
    dl.tv_sec = (time_t)s;
    dl.tv_nsec = (long)((t - s) * 1e9);
    if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &dl, NULL) == EINTR) {
    }
}

/* A modelled kernel of `cost` seconds for layer `unit`: queued right after the
   previous one when it continues the same instruction (next layer of the same op,
   chunk and microbatch), else started now. */
static void device_run(devclk* dc, int op, int chunk, int mb, int unit, double cost)
{
    double t = now(), start = t;
    int step = op == OP_F ? 1 : -1;
    if (dc->op == op && dc->chunk == chunk && dc->mb == mb && dc->unit + step == unit && dc->end <= t)
        start = dc->end;
    dc->op = op, dc->chunk = chunk, dc->mb = mb, dc->unit = unit;
    dc->end = start + cost;
    sleep_until(dc->end);
    dc->late += now() - dc->end;
    dc->nlate++;
}

/* The arithmetic, shared by the callbacks and the one-device reference. */
static void layer_fwd(const layer* l, const float* x, float* y)
{
    int i;
    for (i = 0; i < D; i++) y[i] = tanhf(l->w[i] * x[i] + l->b[i]);
}
static void layer_bin(const layer* l, const float* y, const float* gy, float* gx)
{
    int i;
    for (i = 0; i < D; i++) gx[i] += gy[i] * (1.0f - y[i] * y[i]) * l->w[i];
}
static void layer_bw(layer* l, const float* x, const float* y, const float* gy)
{
    int i;
    for (i = 0; i < D; i++) {
        float gs = gy[i] * (1.0f - y[i] * y[i]);
        l->gw[i] += gs * x[i];
        l->gb[i] += gs;
    }
}
static float loss_fwd(const float* x)
{
    float s = 0;
    int i;
    for (i = 0; i < D; i++) s += x[i] * x[i];
    return 0.5f * s;
}
static void loss_bwd(const float* x, float g, float* gx)
{
    int i;
    for (i = 0; i < D; i++) gx[i] += g * x[i];
}
static void make_data(int mb, float* x)
{
    int i;
    for (i = 0; i < D; i++) x[i] = 0.8f * sinf(0.37f * (float)(mb * D + i));
}
static void init_layer(layer* l, int u)
{
    int i;
    for (i = 0; i < D; i++) {
        l->w[i] = 0.9f + 0.2f * cosf((float)(u * 13 + i));
        l->b[i] = 0.05f * sinf((float)(u * 7 + i));
    }
    memset(l->gw, 0, sizeof l->gw);
    memset(l->gb, 0, sizeof l->gb);
}

static const int64_t shape_d[1] = {D};

static vs_result cb_fwd(vs_pipe_call* c)
{
    layer* l = (layer*)c->user;
    float* y;
    vs_result r = vs_pipe_output(c, 0, VS_F32, 1, shape_d, (void**)&y);
    if (r) return r;
    layer_fwd(l, (const float*)c->in[0].data, y);
    device_run(l->dc, OP_F, c->chunk, c->mb, c->unit, l->cost);
    return VS_OK;
}
static vs_result cb_bin(vs_pipe_call* c)
{
    layer* l = (layer*)c->user;
    if (c->in[0].grad)
        layer_bin(l, (const float*)c->out[0].data, (const float*)c->out[0].grad, (float*)c->in[0].grad);
    device_run(l->dc, OP_B, c->chunk, c->mb, c->unit, l->cost);
    return VS_OK;
}
static vs_result cb_bw(vs_pipe_call* c)
{
    layer* l = (layer*)c->user;
    layer_bw(l, (const float*)c->in[0].data, (const float*)c->out[0].data, (const float*)c->out[0].grad);
    device_run(l->dc, OP_W, c->chunk, c->mb, c->unit, l->cost);
    return VS_OK;
}
static vs_result cb_full(vs_pipe_call* c)
{
    layer* l = (layer*)c->user;
    if (c->in[0].grad)
        layer_bin(l, (const float*)c->out[0].data, (const float*)c->out[0].grad, (float*)c->in[0].grad);
    layer_bw(l, (const float*)c->in[0].data, (const float*)c->out[0].data, (const float*)c->out[0].grad);
    device_run(l->dc, OP_BW, c->chunk, c->mb, c->unit, 2 * l->cost);
    return VS_OK;
}
static vs_result cb_loss_fwd(vs_pipe_call* c)
{
    float* v;
    vs_result r = vs_pipe_output(c, 0, VS_F32, 0, NULL, (void**)&v);
    if (r) return r;
    *v = loss_fwd((const float*)c->in[0].data);
    return VS_OK;
}
static vs_result cb_loss_bwd(vs_pipe_call* c)
{
    loss_bwd((const float*)c->in[0].data, *(const float*)c->out[0].grad, (float*)c->in[0].grad);
    return VS_OK;
}
static vs_result cb_data(vs_pipe_call* c)
{
    float* x;
    vs_result r = vs_pipe_output(c, 0, VS_F32, 1, shape_d, (void**)&x);
    if (r) return r;
    make_data(c->mb, x);
    return VS_OK;
}

/* Rank r's units: layers l0..l<U-1> (x -> h0 -> ... -> h<U-1>) and the loss. */
static void make_units(rankst* s, int U, double cost)
{
    int u;
    memset(s, 0, sizeof *s);
    s->dc.op = -1;
    for (u = 0; u <= U; u++) {
        vs_pipe_unit* un = &s->u[u];
        if (u < U) {
            snprintf(s->name[u], sizeof s->name[u], "l%d", u);
            snprintf(s->out[u], sizeof s->out[u], "h%d:f32[%d]", u, D);
            init_layer(&s->lay[u], u);
            s->lay[u].dc = &s->dc;
            s->lay[u].cost = cost;
            un->forward = cb_fwd;
            un->backward = cb_full;
            un->backward_input = cb_bin;
            un->backward_weight = cb_bw;
            un->user = &s->lay[u];
            un->params = 2 * D;
            un->time_f = un->time_b = un->time_w = cost;
        } else {
            snprintf(s->name[u], sizeof s->name[u], "loss");
            snprintf(s->out[u], sizeof s->out[u], "loss:f32[]");
            un->forward = cb_loss_fwd;
            un->backward = cb_loss_bwd;
        }
        if (u == 0)
            snprintf(s->in[u], sizeof s->in[u], "x");
        else
            snprintf(s->in[u], sizeof s->in[u], "h%d", u - 1);
        un->name = s->name[u];
        un->inputs = s->in[u];
        un->outputs = s->out[u];
    }
}

/* The plain one-device loop over the same units: loss (mean over microbatches,
   summed in microbatch order) and every layer's gradients. */
static void reference(int U, int M, double* loss, float (*g)[2][D])
{
    static layer L[MAXU];
    static float h[MAXU][D], gh[MAXU][D];
    float x[D], seed = 1.0f / (float)M;
    double tot = 0;
    int u, m;
    for (u = 0; u < U; u++) init_layer(&L[u], u);
    for (m = 0; m < M; m++) {
        make_data(m, x);
        for (u = 0; u < U; u++) layer_fwd(&L[u], u ? h[u - 1] : x, h[u]);
        tot += (double)loss_fwd(h[U - 1]);
        memset(gh, 0, sizeof gh);
        loss_bwd(h[U - 1], seed, gh[U - 1]);
        for (u = U - 1; u >= 0; u--) {
            if (u > 0) layer_bin(&L[u], h[u], gh[u], gh[u - 1]);
            layer_bw(&L[u], u ? h[u - 1] : x, h[u], gh[u]);
        }
    }
    *loss = tot / (double)M;
    for (u = 0; u < U; u++) {
        memcpy(g[u][0], L[u].gw, sizeof L[u].gw);
        memcpy(g[u][1], L[u].gb, sizeof L[u].gb);
    }
}

/* ---- the runs --------------------------------------------------------------- */

static int kind_chunks(vs_pipe_kind k)
{
    return k == VS_PIPE_INTERLEAVED || k == VS_PIPE_ZBV || k == VS_PIPE_DUALPIPEV ? 2 : 1;
}

static void zero_grads(rankst* s, int U)
{
    int u;
    for (u = 0; u < U; u++) {
        memset(s->lay[u].gw, 0, sizeof s->lay[u].gw);
        memset(s->lay[u].gb, 0, sizeof s->lay[u].gb);
    }
    s->dc.op = -1;
    s->dc.late = 0, s->dc.nlate = 0;
}

/* One run of kind ki on this rank, recorded in T->rec[ki][slot][r]. */
static vs_result one_run(tctx* T, vs_comm* c, vs_pipe* p, int ki, int slot, int r)
{
    runrec* rr = &T->rec[ki][slot][r];
    const double *t0 = NULL, *t1 = NULL;
    int n = 0;
    vs_result e;
    zero_grads(&RS[r], T->o->units);
    e = vs_barrier(c, NULL);
    if (e) return e;
    rr->a = now();
    e = vs_pipe_run(p, T->sched[ki][r], &rr->loss);
    rr->b = now();
    rr->late = RS[r].dc.late, rr->nlate = RS[r].dc.nlate;
    if (e) return e;
    e = vs_pipe_last_timeline(p, &t0, &t1, &n);
    if (e) return e;
    free(rr->t0);
    free(rr->t1);
    rr->t0 = (double*)malloc(sizeof(double) * (size_t)(n ? n : 1));
    rr->t1 = (double*)malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!rr->t0 || !rr->t1) return vs_set_error(VS_ERR_NOMEM, "bench: out of memory for a timeline");
    memcpy(rr->t0, t0, sizeof(double) * (size_t)n);
    memcpy(rr->t1, t1, sizeof(double) * (size_t)n);
    rr->n = n;
    return VS_OK;
}

/* ---- rank 0's analysis ------------------------------------------------------ */

static int op_class(int op)
{
    switch (op) {
    case VS_PIPE_F: return OP_F;
    case VS_PIPE_B: return OP_B;
    case VS_PIPE_W: return OP_W;
    case VS_PIPE_BW: return OP_BW;
    default: return -1;
    }
}

/* NAN when there is none. */
static double med(double* v, int n) { return n > 0 ? median(v, n) : NAN; }

/* A table field: "-" for NAN. */
static const char* fld(char* buf, size_t cap, int width, int prec, double v)
{
    if (isnan(v))
        snprintf(buf, cap, "%*s", width, "-");
    else
        snprintf(buf, cap, "%*.*f", width, prec, v);
    return buf;
}

/* Lines of text prefixed with "# ". */
static void print_commented(const char* text)
{
    const char* s = text;
    while (*s) {
        const char* e = strchr(s, '\n');
        int len = e ? (int)(e - s) : (int)strlen(s);
        printf("#   %.*s\n", len, s);
        s += len + (e ? 1 : 0);
    }
}

/* Kind ki at the current M, from runs 1..R: times, bubble, the costs measured, the
   simulation with them; traces of the last run when `trace`. */
static vs_result analyse(tctx* T, int ki, kres* out, int trace)
{
    const opts* o = T->o;
    const vs_pipe_sched* s = T->sched[ki][0];
    const vs_pipe_plan* pl = &T->plan[ki];
    const int K = pl->nchunks, M = vs_pipe_sched_mbs(s), R = o->reps;
    const double t = o->unit_ms * 1e-3;
    const size_t per = (size_t)M * (size_t)R; /* instances of one (op, chunk) */
    double *dur = NULL, *ovh = NULL, *sendd = NULL, *recvd = NULL, *lat = NULL;
    double wall[MAXREP], span[MAXREP], bub[MAXREP];
    double cf[MAXCK], cb[MAXCK], cw[MAXCK];
    int ndur[NOP][MAXCK], novh[NOP], nsend = 0, nrecv = 0, nlat = 0;
    int sidx[2][MAXCK][MAXM][2]; /* SEND_F / SEND_B of (chunk, mb): stage, index */
    int nl[MAXCK], p, i, k, rep, op;
    double late = 0;
    long nlate = 0;
    vs_pipe_costs costs;
    vs_pipe_sim sim;
    vs_result e = VS_OK;
    char tn[32];

    memset(out, 0, sizeof *out);
    memset(ndur, 0, sizeof ndur);
    memset(novh, 0, sizeof novh);
    memset(sidx, -1, sizeof sidx);
    dur = (double*)malloc(sizeof(double) * NOP * (size_t)K * per);
    ovh = (double*)malloc(sizeof(double) * NOP * (size_t)K * per);
    sendd = (double*)malloc(sizeof(double) * 2 * (size_t)K * per);
    recvd = (double*)malloc(sizeof(double) * 2 * (size_t)K * per);
    lat = (double*)malloc(sizeof(double) * 2 * (size_t)K * per);
    if (!dur || !ovh || !sendd || !recvd || !lat) {
        e = vs_set_error(VS_ERR_NOMEM, "bench: out of memory (analysis)");
        goto done;
    }
    for (k = 0; k < K; k++) nl[k] = pl->first_unit[k + 1] - pl->first_unit[k] - (k == K - 1); /* layers */
    for (p = 0; p < NR; p++)
        for (i = 0; i < vs_pipe_sched_len(s, p); i++) {
            vs_pipe_instr in;
            vs_pipe_sched_at(s, p, i, &in);
            if (in.op == VS_PIPE_SEND_F || in.op == VS_PIPE_SEND_B) {
                int d = in.op == VS_PIPE_SEND_B;
                sidx[d][in.chunk][in.mb][0] = p;
                sidx[d][in.chunk][in.mb][1] = i;
            }
        }
    for (rep = 1; rep <= R; rep++) {
        runrec* rr = T->rec[ki][rep];
        double a0 = HUGE_VAL, b1 = -HUGE_VAL, s0 = HUGE_VAL, s1 = -HUGE_VAL, busy = 0;
        for (p = 0; p < NR; p++) {
            late += rr[p].late, nlate += rr[p].nlate;
            if (rr[p].n != vs_pipe_sched_len(s, p)) {
                e = vs_set_error(VS_ERR_STATE, "bench: stage %d timeline has %d instructions, its list %d", p,
                                 rr[p].n, vs_pipe_sched_len(s, p));
                goto done;
            }
            if (rr[p].a < a0) a0 = rr[p].a;
            if (rr[p].b > b1) b1 = rr[p].b;
            if (rr[p].n && rr[p].a + rr[p].t0[0] < s0) s0 = rr[p].a + rr[p].t0[0];
            if (rr[p].n && rr[p].a + rr[p].t1[rr[p].n - 1] > s1) s1 = rr[p].a + rr[p].t1[rr[p].n - 1];
        }
        for (p = 0; p < NR; p++)
            for (i = 0; i < rr[p].n; i++) {
                vs_pipe_instr in;
                double d = rr[p].t1[i] - rr[p].t0[i];
                vs_pipe_sched_at(s, p, i, &in);
                op = op_class(in.op);
                if (op >= 0) {
                    double model = nl[in.chunk] * t * (op == OP_BW ? 2 : 1);
                    busy += d;
                    dur[((size_t)op * K + (size_t)in.chunk) * per + (size_t)ndur[op][in.chunk]++] = d;
                    ovh[(size_t)op * K * per + (size_t)novh[op]++] = d - model;
                } else if (in.op == VS_PIPE_SEND_F || in.op == VS_PIPE_SEND_B) {
                    sendd[nsend++] = d;
                } else if (in.op == VS_PIPE_RECV_F || in.op == VS_PIPE_RECV_B) {
                    int dir = in.op == VS_PIPE_RECV_B, sk = dir ? in.chunk + 1 : in.chunk - 1;
                    int q = sk >= 0 && sk < K ? sidx[dir][sk][in.mb][0] : -1;
                    int j = q >= 0 ? sidx[dir][sk][in.mb][1] : -1;
                    if (q < 0) {
                        e = vs_set_error(VS_ERR_STATE, "bench: stage %d instruction %d (a receive) has no send", p, i);
                        goto done;
                    }
                    if (rr[p].a + rr[p].t0[i] >= rr[q].a + rr[q].t1[j])
                        recvd[nrecv++] = d; /* the data was there */
                    else
                        lat[nlat++] = rr[p].a + rr[p].t1[i] - (rr[q].a + rr[q].t0[j]);
                }
            }
        wall[rep - 1] = b1 - a0;
        span[rep - 1] = s1 - s0;
        bub[rep - 1] = s1 > s0 ? 1 - busy / (NR * (s1 - s0)) : 0;
    }
    out->time = med(wall, R);
    out->tmin = wall[0], out->tmax = wall[R > 0 ? R - 1 : 0]; /* sorted by med */
    out->span = med(span, R);
    out->bubble = med(bub, R);
    for (k = 0; k < K; k++) {
        double f = med(dur + ((size_t)OP_F * K + k) * per, ndur[OP_F][k]);
        double b = med(dur + ((size_t)OP_B * K + k) * per, ndur[OP_B][k]);
        double w = med(dur + ((size_t)OP_W * K + k) * per, ndur[OP_W][k]);
        double bw = med(dur + ((size_t)OP_BW * K + k) * per, ndur[OP_BW][k]);
        if (isnan(b) && isnan(w) && !isnan(bw)) b = w = bw / 2; /* B : W = 1 : 1 as modelled */
        if (isnan(b)) b = isnan(w) ? 0 : w;
        if (isnan(w)) w = b;
        cf[k] = isnan(f) ? 0 : f, cb[k] = b, cw[k] = w;
    }
    {
        /* one figure per op for the table: the median over all chunks' instances */
        double* all = (double*)malloc(sizeof(double) * (size_t)K * per);
        double* fig[NOP] = {&out->f, &out->b, &out->w, &out->bw};
        if (!all) {
            e = vs_set_error(VS_ERR_NOMEM, "bench: out of memory (analysis)");
            goto done;
        }
        for (op = 0; op < NOP; op++) {
            int n = 0;
            for (k = 0; k < K; k++) {
                memcpy(all + n, dur + ((size_t)op * K + k) * per, sizeof(double) * (size_t)ndur[op][k]);
                n += ndur[op][k];
            }
            *fig[op] = med(all, n);
            out->ovh[op] = med(ovh + (size_t)op * K * per, novh[op]);
        }
        free(all);
    }
    out->wake = nlate ? late / (double)nlate : NAN;
    out->send = med(sendd, nsend);
    out->recv = med(recvd, nrecv);
    out->p2p = nlat ? med(lat, nlat) : nrecv ? out->recv : 0;
    if (!(out->p2p > 0)) out->p2p = 0;
    memset(&costs, 0, sizeof costs);
    costs.p2p = out->p2p;
    costs.chunk_f = cf, costs.chunk_b = cb, costs.chunk_w = cw;
    e = vs_pipe_simulate(s, &costs, &sim);
    if (e) {
        e = vs_set_error(e, "bench: %s: vs_pipe_simulate: %s", vs_pipe_kind_name(o->kinds[ki]), vs_last_error());
        goto done;
    }
    out->sim = sim.makespan;
    out->sim_bubble = sim.bubble;
    out->ideal = sim.ideal;
    out->ratio = out->time / sim.makespan;
    out->ok = 1;
    if (o->draw && trace) {
        int need = vs_pipe_draw(s, &costs, 0, NULL, 0);
        char* buf = need > 0 ? (char*)malloc((size_t)need + 1) : NULL;
        if (buf && vs_pipe_draw(s, &costs, 0, buf, (size_t)need + 1) >= 0) {
            printf("# %s M=%d, simulated with the measured costs (vs_pipe_draw):\n", vs_pipe_kind_name(o->kinds[ki]), M);
            print_commented(buf);
        }
        free(buf);
    }
    if (trace && o->trace_dir) {
        runrec* rr = T->rec[ki][R];
        double *t0s[NR], *t1s[NR], s0 = HUGE_VAL;
        char path[1024];
        for (p = 0; p < NR; p++)
            if (rr[p].n && rr[p].a + rr[p].t0[0] < s0) s0 = rr[p].a + rr[p].t0[0];
        for (p = 0; p < NR; p++) {
            t0s[p] = (double*)malloc(sizeof(double) * (size_t)(rr[p].n ? rr[p].n : 1));
            t1s[p] = (double*)malloc(sizeof(double) * (size_t)(rr[p].n ? rr[p].n : 1));
            for (i = 0; t0s[p] && t1s[p] && i < rr[p].n; i++) {
                t0s[p][i] = rr[p].a + rr[p].t0[i] - s0;
                t1s[p][i] = rr[p].a + rr[p].t1[i] - s0;
            }
        }
        snprintf(tn, sizeof tn, "%s", vs_pipe_kind_name(o->kinds[ki]));
        snprintf(path, sizeof path, "%s/pipe_%s.json", o->trace_dir, tn);
        e = vs_pipe_trace_write(s, (const double* const*)t0s, (const double* const*)t1s, path);
        if (!e) {
            snprintf(path, sizeof path, "%s/pipe_%s_sim.json", o->trace_dir, tn);
            e = vs_pipe_trace_simulated(s, &costs, path);
        }
        if (e) e = vs_set_error(e, "bench: writing %s: %s", path, vs_last_error());
        for (p = 0; p < NR; p++) free(t0s[p]), free(t1s[p]);
    }
done:
    free(dur), free(ovh), free(sendd), free(recvd), free(lat);
    return e;
}

static void add_line(tctx* T, const char* fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void add_line(tctx* T, const char* fmt, ...)
{
    va_list ap;
    int n;
    if (T->nlines >= sizeof T->lines) return;
    va_start(ap, fmt);
    n = vsnprintf(T->lines + T->nlines, sizeof T->lines - T->nlines, fmt, ap);
    va_end(ap);
    if (n > 0) T->nlines += (size_t)n;
    if (T->nlines >= sizeof T->lines) T->nlines = sizeof T->lines - 1;
}

/* Rank 0, after the timed rounds of M = o->mbs[mi]: correctness, analysis, table. */
static vs_result report_m(tctx* T, int mi)
{
    const opts* o = T->o;
    const int M = o->mbs[mi], R = o->reps, U = o->units;
    int ki, rep, p, u, bad_loss = 0, bad_grad = 0, first = -1;
    unsigned long long bits;
    vs_result e;
    /* correctness: every run's loss on every rank, the warm-up run's gradients */
    for (ki = 0; ki < o->nkinds; ki++) {
        int bad = 0;
        for (rep = 0; rep <= R; rep++)
            for (p = 0; p < NR; p++)
                if (memcmp(&T->rec[ki][rep][p].loss, &T->ref_loss[mi], sizeof(double))) bad_loss++, bad = 1;
        for (u = 0; u < U; u++)
            if (memcmp(T->g[ki][u], T->ref_g[mi][u], sizeof T->g[ki][u])) bad_grad++, bad = 1;
        if (bad && first < 0) first = ki;
    }
    memcpy(&bits, &T->ref_loss[mi], sizeof bits);
    if (bad_loss || bad_grad) {
        T->bad++;
        fprintf(stderr, "bench: M=%d: %d losses and %d layer gradients differ from one device (first: %s)\n", M,
                bad_loss, bad_grad, vs_pipe_kind_name(o->kinds[first]));
    }
    add_line(T,
             "summary pipe correctness M=%d loss %.9g (0x%016llx) in %d runs x %d ranks and %d layers' gradients of "
             "%d kinds compared bit for bit (memcmp) with one device: %s\n",
             M, T->ref_loss[mi], bits, R + 1, NR, U, o->nkinds,
             bad_loss || bad_grad ? "correctness FAIL" : "correctness PASS");

    for (ki = 0; ki < o->nkinds; ki++) { /* first: --draw prints here, before the table */
        e = analyse(T, ki, &T->res[mi][ki], mi == 0);
        if (e) return e;
    }
    printf("#\n# M=%d: median of %d runs (round-robin over the kinds); other programs used %.2f cores meanwhile\n", M,
           R, T->other[mi]);
    printf("# %-11s %1s | %8s %17s %6s | %8s %7s | %8s %6s | %6s %6s %6s %6s %6s | %6s %6s %6s %6s %6s %6s %6s\n", "kind",
           "V", "time_ms", "(min..max)", "bubble", "sim_ms", "sim_bub", "ideal_ms", "ratio", "F_ms", "B_ms", "W_ms",
           "BW_ms", "p2p_us", "ovh_F", "ovh_B", "ovh_W", "ovh_BW", "send", "recv", "wake");
    for (ki = 0; ki < o->nkinds; ki++) {
        kres* k = &T->res[mi][ki];
        char rng[40];
        char f[12][16];
        snprintf(rng, sizeof rng, "(%.1f..%.1f)", k->tmin * 1e3, k->tmax * 1e3);
        printf("  %-11s %1d | %8.2f %17s %6.3f | %8.2f %7.3f | %8.2f %6.3f | %s %s %s %s %6.1f | "
               "%s %s %s %s %s %s %6.1f\n",
               vs_pipe_kind_name(o->kinds[ki]), T->plan[ki].chunks, k->time * 1e3, rng, k->bubble, k->sim * 1e3,
               k->sim_bubble, k->ideal * 1e3, k->ratio, fld(f[0], 16, 6, 2, k->f * 1e3),
               fld(f[1], 16, 6, 2, k->b * 1e3), fld(f[2], 16, 6, 2, k->w * 1e3), fld(f[3], 16, 6, 2, k->bw * 1e3),
               k->p2p * 1e6, fld(f[4], 16, 6, 1, k->ovh[OP_F] * 1e6), fld(f[5], 16, 6, 1, k->ovh[OP_B] * 1e6),
               fld(f[6], 16, 6, 1, k->ovh[OP_W] * 1e6), fld(f[7], 16, 6, 1, k->ovh[OP_BW] * 1e6),
               fld(f[8], 16, 6, 1, k->send * 1e6), fld(f[9], 16, 6, 1, k->recv * 1e6), k->wake * 1e6);
        add_line(T, "summary pipe measured_vs_sim %s M=%d ratio=%.3f target<=%.2f %s\n",
                 vs_pipe_kind_name(o->kinds[ki]), M, k->ratio, TARGET_SIM, k->ratio <= TARGET_SIM ? "PASS" : "MISS");
    }
    printf("# (ms: median instruction lengths; us, per instruction: ovh_* = length - modelled sleep, send and recv\n"
           "#  (data there) = whole instruction, wake = mean lateness of a modelled kernel's wake-up (part of ovh_*);\n"
           "#  -: no such instruction in the kind's lists)\n");
    {
        int i1 = -1, iz = -1, id = -1;
        for (ki = 0; ki < o->nkinds; ki++) {
            if (o->kinds[ki] == VS_PIPE_1F1B) i1 = ki;
            if (o->kinds[ki] == VS_PIPE_ZBV) iz = ki;
            if (o->kinds[ki] == VS_PIPE_DUALPIPEV) id = ki;
        }
        if (i1 >= 0 && iz >= 0) {
            double x = T->res[mi][i1].time / T->res[mi][iz].time;
            if (M == 8)
                add_line(T, "summary pipe zbv_speedup_vs_1f1b M=%d = %.3f target>=%.1f %s\n", M, x, TARGET_ZBV,
                         x >= TARGET_ZBV ? "PASS" : "MISS");
            else
                add_line(T, "summary pipe zbv_speedup_vs_1f1b M=%d = %.3f (no target)\n", M, x);
        }
        if (iz >= 0 && id >= 0) {
            double x = T->res[mi][iz].time / T->res[mi][id].time;
            add_line(T, "summary pipe dualpipev_vs_zbv M=%d = %.3f target>=%.1f %s\n", M, x, TARGET_DPV,
                     x >= TARGET_DPV ? "PASS" : "MISS");
        }
    }
    fflush(stdout);
    return VS_OK;
}

/* ---- the ranks ---------------------------------------------------------------- */

static int rank_fn(vs_world* w, void* arg)
{
    tctx* T = (tctx*)arg;
    const opts* o = T->o;
    const int r = vs_world_rank(w), U = o->units, R = o->reps;
    vs_mesh* mesh = NULL;
    vs_comm* c = NULL;
    vs_pipe* pipes[NK] = {NULL};
    vs_mesh_desc md;
    int mi, ki, rep, j, k, u;
#ifdef __linux__
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL); /* wake at the deadline, not up to 50 us after */
#endif
    memset(&md, 0, sizeof md);
    md.shape[0] = NR;
    md.dim_names[0] = "PP";
    THR_CHK(T, c, r, vs_mesh_init(w, &md, &mesh), "vs_mesh_init");
    c = vs_mesh_comm(mesh);
    make_units(&RS[r], U, o->unit_ms * 1e-3);
    for (mi = 0; mi < o->nmbs; mi++) {
        const int M = o->mbs[mi];
        cpu_snap s0, s1;
        for (ki = 0; ki < o->nkinds; ki++) {
            vs_pipe_kind kind = o->kinds[ki];
            int V = kind_chunks(kind), K = NR * V, st;
            vs_pipe_split_desc sd;
            vs_pipe_plan pl;
            vs_pipe_desc d;
            THR_CHK(T, c, r, vs_pipe_generate(w, kind, NR, V, M, &T->sched[ki][r]), vs_pipe_kind_name(kind));
            memset(&sd, 0, sizeof sd);
            sd.stages = NR, sd.chunks = V, sd.kind = VS_PIPE_SPLIT_TIME;
            sd.placement = kind == VS_PIPE_ZBV || kind == VS_PIPE_DUALPIPEV ? VS_PIPE_PLACE_V : VS_PIPE_PLACE_LOOP;
            THR_CHK(T, c, r, vs_pipe_split(RS[r].u, U + 1, &sd, &pl), "vs_pipe_split");
            for (k = 0; k < K; k++) {
                int want = U / K + (k == K - 1);
                if (pl.chunk_stage[k] != vs_pipe_sched_chunk_stage(T->sched[ki][r], k) ||
                    pl.first_unit[k + 1] - pl.first_unit[k] != want) {
                    if (r == 0) {
                        char buf[4096];
                        vs_pipe_plan_print(&pl, RS[r].u, buf, sizeof buf);
                        fprintf(stderr, "bench: the plan for %s:\n%s", vs_pipe_kind_name(kind), buf);
                    }
                    THR_CHK(T, c, r,
                            vs_set_error(VS_ERR_STATE,
                                         "%s: chunk %d has %d units on stage %d; the schedule puts it on stage %d, "
                                         "%d units expected",
                                         vs_pipe_kind_name(kind), k, pl.first_unit[k + 1] - pl.first_unit[k],
                                         pl.chunk_stage[k], vs_pipe_sched_chunk_stage(T->sched[ki][r], k), want),
                            "the plan");
                }
            }
            if (r == 0) {
                T->plan[ki] = pl;
                if (mi == 0 && (ki == 0 || T->plan[ki].chunks != T->plan[ki - 1].chunks ||
                                T->plan[ki].placement != T->plan[ki - 1].placement)) {
                    char buf[4096];
                    vs_pipe_plan_print(&pl, RS[r].u, buf, sizeof buf);
                    printf("# plan of %s (vs_pipe_split):\n", vs_pipe_kind_name(kind));
                    print_commented(buf);
                }
            }
            memset(&d, 0, sizeof d);
            d.mesh = mesh;
            d.units = RS[r].u;
            d.nunits = U + 1;
            d.plan = &pl;
            d.data = cb_data;
            THR_CHK(T, c, r, vs_pipe_init(&d, &pipes[ki]), "vs_pipe_init");
            /* the warm-up run: also the one whose gradients are checked */
            THR_CHK(T, c, r, one_run(T, c, pipes[ki], ki, 0, r), vs_pipe_kind_name(kind));
            st = vs_pipe_stage(pipes[ki]);
            for (k = 0; k < K; k++)
                if (pl.chunk_stage[k] == st)
                    for (u = pl.first_unit[k]; u < pl.first_unit[k + 1] && u < U; u++) {
                        memcpy(T->g[ki][u][0], RS[r].lay[u].gw, sizeof RS[r].lay[u].gw);
                        memcpy(T->g[ki][u][1], RS[r].lay[u].gb, sizeof RS[r].lay[u].gb);
                    }
        }
        s0 = snap_now();
        for (rep = 1; rep <= R; rep++)
            for (j = 0; j < o->nkinds; j++) {
                ki = (j + rep) % o->nkinds;
                THR_CHK(T, c, r, one_run(T, c, pipes[ki], ki, rep, r), vs_pipe_kind_name(o->kinds[ki]));
            }
        s1 = snap_now();
        if (r == 0) T->other[mi] = other_cores(s0, s1, s1.self - s0.self);
        THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");
        if (r == 0) THR_CHK(T, c, r, report_m(T, mi), "report");
        THR_CHK(T, c, r, vs_barrier(c, NULL), "vs_barrier");
        for (ki = 0; ki < o->nkinds; ki++) {
            vs_pipe_free(pipes[ki]);
            pipes[ki] = NULL;
            vs_pipe_sched_free(T->sched[ki][r]);
            T->sched[ki][r] = NULL;
        }
    }
out:
    for (ki = 0; ki < NK; ki++) {
        if (pipes[ki]) vs_pipe_free(pipes[ki]);
        if (T->sched[ki][r]) vs_pipe_sched_free(T->sched[ki][r]);
        T->sched[ki][r] = NULL;
    }
    if (mesh) vs_mesh_free(mesh);
    return T->err[r] != 0;
}

/* ---- main ------------------------------------------------------------------------ */

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_pipe [--unit-ms 2] [--units 16] [--mbs 8,16] [--reps 5]\n"
            "                  [--kinds gpipe,1f1b,interleaved,zbh1,zbv,dualpipev]\n"
            "                  [--trace-dir build|-] [--draw] [--strict]\n");
}

static int parse_opts(int argc, char** argv, opts* o)
{
    int i;
    memset(o, 0, sizeof *o);
    o->unit_ms = 2;
    o->units = 16;
    o->reps = 5;
    o->mbs[0] = 8, o->mbs[1] = 16, o->nmbs = 2;
    for (i = 0; i < NK; i++) o->kinds[i] = kinds_all[i];
    o->nkinds = NK;
    o->trace_dir = "build";
    for (i = 1; i < argc; i++) {
        const char* a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--draw")) {
            o->draw = 1;
        } else if (!strcmp(a, "--strict")) {
            o->strict = 1;
        } else if (v && !strcmp(a, "--unit-ms")) {
            o->unit_ms = atof(v), i++;
        } else if (v && !strcmp(a, "--units")) {
            o->units = atoi(v), i++;
        } else if (v && !strcmp(a, "--reps")) {
            o->reps = atoi(v), i++;
        } else if (v && !strcmp(a, "--trace-dir")) {
            o->trace_dir = strcmp(v, "-") ? v : NULL, i++;
        } else if (v && !strcmp(a, "--mbs")) {
            const char* s = v;
            o->nmbs = 0;
            while (*s) {
                char* e;
                long x;
                while (*s == ',' || *s == ' ') s++;
                if (!*s) break;
                x = strtol(s, &e, 10);
                if (e == s || x < 1 || x > MAXM || o->nmbs == MAXMS) return -1;
                o->mbs[o->nmbs++] = (int)x;
                s = e;
            }
            if (!o->nmbs) return -1;
            i++;
        } else if (v && !strcmp(a, "--kinds")) {
            char buf[256], *s, *save = NULL;
            snprintf(buf, sizeof buf, "%s", v);
            o->nkinds = 0;
            for (s = strtok_r(buf, ", ", &save); s; s = strtok_r(NULL, ", ", &save)) {
                vs_pipe_kind k;
                if (vs_pipe_kind_parse(s, &k) != VS_OK || o->nkinds == NK) return -1;
                o->kinds[o->nkinds++] = k;
            }
            if (!o->nkinds) return -1;
            i++;
        } else {
            return -1;
        }
    }
    if (!(o->unit_ms > 0 && o->unit_ms <= 1000) || o->units < 2 * NR || o->units > MAXU ||
        o->units % (2 * NR) || o->reps < 1 || o->reps > MAXREP)
        return -1;
    return 0;
}

int main(int argc, char** argv)
{
    opts o;
    static tctx T;
    int mi, ki, rep, p, rc = 0;
    char la[64];
    double t0 = now();
    vs_result r;
    if (parse_opts(argc, argv, &o) != 0) {
        usage();
        return 2;
    }
    memset(&T, 0, sizeof T);
    T.o = &o;
    for (mi = 0; mi < o.nmbs; mi++) reference(o.units, o.mbs[mi], &T.ref_loss[mi], T.ref_g[mi]);
    printf("# bench_pipe: vescale %s threads transport, P = %d stages on %d thread ranks, mesh {%d} PP; model %d "
           "layers of %d f32 + a loss unit; modelled device time per layer F = B = W = %g ms (full backward %g ms); "
           "M =",
           vs_version_string(), NR, NR, NR, o.units, D, o.unit_ms, 2 * o.unit_ms);
    for (mi = 0; mi < o.nmbs; mi++) printf(" %d", o.mbs[mi]);
    printf("; %d timed runs per kind; online CPUs %ld; loadavg %s\n", o.reps, sysconf(_SC_NPROCESSORS_ONLN),
           loadavg(la, sizeof la));
    fflush(stdout);

    r = vs_launch_ex(&(vs_launch_desc){.nranks = NR, .timeout_s = 120}, rank_fn, &T);
    if (r != VS_OK) {
        fprintf(stderr, "bench: vs_launch_ex: %d %s: %s\n", r, r < 0 ? vs_result_string(r) : "a rank failed",
                vs_last_error());
        rc = 1;
    }
    printf("#\n%s", T.lines);
    if (T.bad) rc = 1;
    if (o.strict && strstr(T.lines, " MISS\n")) rc = rc ? rc : 1;
    if (o.trace_dir && !rc)
        printf("# traces: %s/pipe_<kind>.json (measured, M=%d) and pipe_<kind>_sim.json (simulated)\n", o.trace_dir,
               o.mbs[0]);
    printf("# bench_pipe done: %.1f s; loadavg %s%s\n", now() - t0, loadavg(la, sizeof la),
           rc ? "; ERRORS (see stderr)" : "");
    for (ki = 0; ki < NK; ki++)
        for (rep = 0; rep <= MAXREP; rep++)
            for (p = 0; p < NR; p++) free(T.rec[ki][rep][p].t0), free(T.rec[ki][rep][p].t1);
    return rc;
}
