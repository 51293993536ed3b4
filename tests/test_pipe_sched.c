/* test_pipe_sched.c - the schedule generators (every kind, many P and M), the
   simulator's exact bubble formulas, the text timeline and the Chrome trace,
   and bad input. The generated lists are checked here by an independent scan
   (each (chunk, mb) F/B/W once, backward parts in microbatch order, SYNC and
   STEP placement) and by vs_pipe_sched_check. */
#define VESCALE_IMPLEMENTATION
#include "vescale_pipe.h"
#include "vs_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

static int EQ(double a, double b) { return fabs(a - b) <= 1e-12 * (1 + fabs(b)); }

static int vshape(vs_pipe_kind k) { return k == VS_PIPE_ZBV || k == VS_PIPE_DUALPIPEV; }
static int split(vs_pipe_kind k) { return k == VS_PIPE_ZBH1 || vshape(k); }

/* The microbatch counts tried for P stages: 1, 2, P-1, P, 2P, 3P+1, 3P+2. */
static int mb_list(int P, int* ms)
{
    int cand[] = {1, 2, P - 1, P, 2 * P, 3 * P + 1, 3 * P + 2}, n = 0;
    for (int i = 0; i < 7; i++) {
        int dup = cand[i] < 1;
        for (int j = 0; j < n; j++) dup |= ms[j] == cand[i];
        if (!dup) ms[n++] = cand[i];
    }
    return n;
}

/* The independent scan of one generated schedule. */
static void scan(const vs_pipe_sched* s, vs_pipe_kind kind, int P, int V, int M)
{
    const char* kn = vs_pipe_kind_name(kind);
    int K = P * V;
    VT_CHECK(vs_pipe_sched_stages(s) == P && vs_pipe_sched_nchunks(s) == K && vs_pipe_sched_mbs(s) == M,
             "%s P%d M%d: shape %d %d %d", kn, P, M, vs_pipe_sched_stages(s), vs_pipe_sched_nchunks(s),
             vs_pipe_sched_mbs(s));
    for (int k = 0; k < K; k++) {
        int want = vshape(kind) ? (k < P ? k : 2 * P - 1 - k) : k % P;
        VT_CHECK(vs_pipe_sched_chunk_stage(s, k) == want, "%s P%d: chunk %d on stage %d, not %d", kn, P, k,
                 vs_pipe_sched_chunk_stage(s, k), want);
    }
    /* per (op, chunk, mb): how many times, and the position on its stage */
    int* cnt = (int*)calloc((size_t)VS_PIPE_OP_COUNT * K * M, sizeof(int));
    int* at = (int*)calloc((size_t)VS_PIPE_OP_COUNT * K * M, sizeof(int));
    int* lastb = (int*)malloc(sizeof(int) * (size_t)K); // last backward mb seen per chunk
    int* lastw = (int*)malloc(sizeof(int) * (size_t)K);
    int* sync_at = (int*)malloc(sizeof(int) * (size_t)K);
    for (int k = 0; k < K; k++) lastb[k] = lastw[k] = sync_at[k] = -1;
    int bad_order = 0, nsync = 0;
#define IDX(op, k, m) (((size_t)(op) * K + (size_t)(k)) * M + (size_t)(m))
    for (int p = 0; p < P; p++) {
        int n = vs_pipe_sched_len(s, p);
        vs_pipe_instr in;
        VT_OK(vs_pipe_sched_at(s, p, n - 1, &in));
        VT_CHECK(in.op == VS_PIPE_STEP, "%s P%d M%d: stage %d ends with op %d, not STEP", kn, P, M, p, in.op);
        for (int i = 0; i < n; i++) {
            vs_pipe_sched_at(s, p, i, &in);
            if (in.op == VS_PIPE_STEP) {
                VT_CHECK(i == n - 1, "%s: STEP at %d of %d on stage %d", kn, i, n, p);
                continue;
            }
            if (in.op == VS_PIPE_SYNC) {
                VT_CHECK(sync_at[in.chunk] < 0, "%s: SYNC%d twice", kn, in.chunk);
                VT_CHECK(vs_pipe_sched_chunk_stage(s, in.chunk) == p, "%s: SYNC%d on stage %d", kn, in.chunk, p);
                sync_at[in.chunk] = i, nsync++;
                continue;
            }
            if (in.op != VS_PIPE_F && in.op != VS_PIPE_B && in.op != VS_PIPE_W && in.op != VS_PIPE_BW) continue;
            VT_CHECK(vs_pipe_sched_chunk_stage(s, in.chunk) == p, "%s: op %d of chunk %d on stage %d", kn, in.op,
                     in.chunk, p);
            cnt[IDX(in.op, in.chunk, in.mb)]++;
            at[IDX(in.op, in.chunk, in.mb)] = i;
            if (in.op == VS_PIPE_B || in.op == VS_PIPE_BW) {
                bad_order += in.mb != lastb[in.chunk] + 1;
                lastb[in.chunk] = in.mb;
            }
            if (in.op == VS_PIPE_W || in.op == VS_PIPE_BW) {
                bad_order += in.mb != lastw[in.chunk] + 1;
                lastw[in.chunk] = in.mb;
                if (in.mb == M - 1) { // SYNC right after the chunk's last backward part (its sends between)
                    int j = i + 1, c = in.chunk;
                    vs_pipe_instr nx = {0, 0, 0};
                    for (; j < n && (vs_pipe_sched_at(s, p, j, &nx), nx.op >= VS_PIPE_SEND_F && nx.op <= VS_PIPE_RECV_B);
                         j++) {
                    }
                    VT_CHECK(j < n && nx.op == VS_PIPE_SYNC && nx.chunk == c,
                             "%s P%d M%d: no SYNC%d after stage %d position %d", kn, P, M, c, p, i);
                }
            }
        }
    }
    VT_CHECK(bad_order == 0, "%s P%d M%d: %d backward parts out of microbatch order", kn, P, M, bad_order);
    VT_CHECK(nsync == K, "%s P%d M%d: %d SYNC for %d chunks", kn, P, M, nsync, K);
    int wrong = 0;
    for (int k = 0; k < K; k++)
        for (int m = 0; m < M; m++) {
            wrong += cnt[IDX(VS_PIPE_F, k, m)] != 1;
            if (split(kind)) {
                wrong += cnt[IDX(VS_PIPE_B, k, m)] != 1 || cnt[IDX(VS_PIPE_W, k, m)] != 1 ||
                         cnt[IDX(VS_PIPE_BW, k, m)] != 0;
                wrong += at[IDX(VS_PIPE_W, k, m)] < at[IDX(VS_PIPE_B, k, m)];
                wrong += at[IDX(VS_PIPE_B, k, m)] < at[IDX(VS_PIPE_F, k, m)];
            } else {
                wrong += cnt[IDX(VS_PIPE_BW, k, m)] != 1 || cnt[IDX(VS_PIPE_B, k, m)] != 0 ||
                         cnt[IDX(VS_PIPE_W, k, m)] != 0;
                wrong += at[IDX(VS_PIPE_BW, k, m)] < at[IDX(VS_PIPE_F, k, m)];
            }
            /* same-stage neighbours: the list order is the dependency */
            if (k + 1 < K && vs_pipe_sched_chunk_stage(s, k) == vs_pipe_sched_chunk_stage(s, k + 1))
                wrong += at[IDX(VS_PIPE_F, k + 1, m)] < at[IDX(VS_PIPE_F, k, m)];
        }
#undef IDX
    VT_CHECK(wrong == 0, "%s P%d M%d V%d: %d (chunk, mb) with a missing, doubled or misplaced F/B/W", kn, P, M, V,
             wrong);
    free(cnt), free(at), free(lastb), free(lastw), free(sync_at);
}

static void t_generators(void)
{
    const int Ps[] = {1, 2, 3, 4, 8};
    int ngen = 0;
    for (int kind = 1; kind < VS_PIPE_KIND_COUNT; kind++)
        for (int pi = 0; pi < 5; pi++) {
            int P = Ps[pi], ms[8], nm = mb_list(P, ms);
            for (int V = 1; V <= (kind == VS_PIPE_INTERLEAVED ? 3 : 1); V++)
                for (int mi = 0; mi < nm; mi++) {
                    int M = ms[mi], VV = vshape((vs_pipe_kind)kind) ? 2 : V;
                    vs_pipe_sched* s = NULL;
                    vs_result r = vs_pipe_generate(NULL, (vs_pipe_kind)kind, P, kind == VS_PIPE_INTERLEAVED ? V : 0,
                                                   M, &s);
                    VT_CHECK(r == VS_OK, "%s P%d V%d M%d: %s", vs_pipe_kind_name((vs_pipe_kind)kind), P, V, M,
                             vs_last_error());
                    if (r != VS_OK) continue;
                    scan(s, (vs_pipe_kind)kind, P, VV, M);
                    r = vs_pipe_sched_check(s, NULL);
                    VT_CHECK(r == VS_OK, "check %s P%d V%d M%d: %s", vs_pipe_kind_name((vs_pipe_kind)kind), P, V, M,
                             vs_last_error());
                    vs_pipe_sim sim;
                    VT_OK(vs_pipe_simulate(s, NULL, &sim));
                    ngen++;
                    vs_pipe_sched_free(s);
                }
        }
    VT_CHECK(ngen > 150, "%d schedules", ngen);
}

/* Every kind x P in 1..8 x M in 1..3P+2 passes the validator. */
static void t_validator_sweep(void)
{
    for (int kind = 1; kind < VS_PIPE_KIND_COUNT; kind++)
        for (int P = 1; P <= 8; P++)
            for (int M = 1; M <= 3 * P + 2; M++) {
                vs_pipe_sched* s = NULL;
                vs_result r = vs_pipe_generate(NULL, (vs_pipe_kind)kind, P, kind == VS_PIPE_INTERLEAVED ? 2 : 0, M, &s);
                if (r == VS_OK) r = vs_pipe_sched_check(s, NULL);
                VT_CHECK(r == VS_OK, "%s P%d M%d: %s", vs_pipe_kind_name((vs_pipe_kind)kind), P, M, vs_last_error());
                vs_pipe_sched_free(s);
            }
}

static vs_pipe_sim sim_of(vs_pipe_kind kind, int P, int V, int M, const vs_pipe_costs* c)
{
    vs_pipe_sim sim;
    memset(&sim, 0, sizeof sim);
    sim.makespan = -1;
    vs_pipe_sched* s = NULL;
    vs_result r = vs_pipe_generate(NULL, kind, P, V, M, &s);
    if (r == VS_OK) r = vs_pipe_simulate(s, c, &sim);
    VT_CHECK(r == VS_OK, "%s P%d M%d: %s", vs_pipe_kind_name(kind), P, M, vs_last_error());
    vs_pipe_sched_free(s);
    return sim;
}

/* Equal unit costs, F = B = W = 1 per chunk (a full backward 2), no p2p time:
   - GPipe and 1F1B: bubble = (P-1)/(M+P-1) for every M; GPipe holds all M
     activations on stage 0, 1F1B at most P (min(M, P));
   - interleaved with V chunks: (P-1)/(V*M+P-1) when P divides M;
   - ZB-H1: for M >= P the idle time per stage is P-1, a third of 1F1B's 3(P-1)
     (the paper's (P-1)(F+B-W) against (P-1)(F+B+W)); makespan 3M+P-1, bubble
     (P-1)/(3M+P-1). Activations held F..B stay within 1F1B's P-p; F..W within
     2P-1-p (the deferred W);
   - DualPipeV (M >= 2P): DualPipe's published bubble is (PP/2-1)(F&B+B-3W) for PP
     ranks, B a full backward; DualPipeV on P ranks is that schedule's V half, so
     PP = 2P: (P-1)(F&B+B-3W). Our lists run an overlapped pair F&B as F then B
     (nothing is overlapped here), and the simulator lets the B of a pair start
     as soon as its own input is there, not only when the pair's F is done, so it
     beats the formula with F&B = F+B: at unit costs its idle time per stage is
     exactly P-1 (the warm-up of the last stage), makespan 6M+P-1, bubble
     (P-1)/(6M+P-1), against the formula's 2(P-1). We test that exact value and
     that the published formula bounds the idle time for several cost ratios;
     its activations peak at 2P+1 chunks (DualPipe's PP+1). */
static void t_formulas(void)
{
    for (int P = 1; P <= 8; P++)
        for (int M = 1; M <= 3 * P + 2; M++) {
            double want = (double)(P - 1) / (M + P - 1);
            vs_pipe_sim g = sim_of(VS_PIPE_GPIPE, P, 0, M, NULL), o = sim_of(VS_PIPE_1F1B, P, 0, M, NULL);
            VT_CHECK(EQ(g.bubble, want), "gpipe P%d M%d: bubble %.15g, want %.15g", P, M, g.bubble, want);
            VT_CHECK(EQ(o.bubble, want), "1f1b P%d M%d: bubble %.15g, want %.15g", P, M, o.bubble, want);
            VT_CHECK(EQ(o.makespan, 3.0 * (M + P - 1)), "1f1b P%d M%d: makespan %g", P, M, o.makespan);
            VT_CHECK(EQ(o.ideal, 3.0 * M), "1f1b ideal %g", o.ideal);
            VT_CHECK(g.peak_live[0] == M, "gpipe P%d M%d: peak %d", P, M, g.peak_live[0]);
            VT_CHECK(o.peak_live[0] <= P && o.peak_live[0] == (M < P ? M : P), "1f1b P%d M%d: peak %d", P, M,
                     o.peak_live[0]);
            for (int p = 0; p < P; p++) VT_CHECK(o.peak_live[p] <= P - p, "1f1b stage %d peak %d", p, o.peak_live[p]);
            if (M % P == 0)
                for (int V = 2; V <= 4; V++) {
                    vs_pipe_sim iv = sim_of(VS_PIPE_INTERLEAVED, P, V, M, NULL);
                    double wi = (double)(P - 1) / (V * M + P - 1);
                    VT_CHECK(EQ(iv.bubble, wi), "interleaved P%d V%d M%d: bubble %.15g, want %.15g", P, V, M, iv.bubble,
                             wi);
                }
            if (M >= P) {
                vs_pipe_sim z = sim_of(VS_PIPE_ZBH1, P, 0, M, NULL);
                VT_CHECK(EQ(z.makespan - z.ideal, (o.makespan - o.ideal) / 3), "zbh1 P%d M%d: idle %g, 1f1b %g", P, M,
                         z.makespan - z.ideal, o.makespan - o.ideal);
                VT_CHECK(EQ(z.bubble, (double)(P - 1) / (3 * M + P - 1)), "zbh1 P%d M%d: bubble %.15g", P, M, z.bubble);
                for (int p = 0; p < P; p++)
                    VT_CHECK(z.peak_live[p] <= 2 * P - 1 - p, "zbh1 P%d M%d stage %d: peak %d", P, M, p, z.peak_live[p]);
            }
            if (M >= 2 * P) {
                vs_pipe_sim d = sim_of(VS_PIPE_DUALPIPEV, P, 0, M, NULL);
                VT_CHECK(EQ(d.makespan, 6.0 * M + P - 1), "dualpipev P%d M%d: makespan %g", P, M, d.makespan);
                VT_CHECK(EQ(d.bubble, (double)(P - 1) / (6 * M + P - 1)), "dualpipev P%d M%d: bubble %.15g", P, M,
                         d.bubble);
                for (int p = 0; p < P; p++)
                    VT_CHECK(d.peak_live[p] <= 2 * P + 1, "dualpipev stage %d: peak %d", p, d.peak_live[p]);
                const double cs[][3] = {{1, 1, 1}, {1, 2, 1}, {2, 1, 1}, {1, 1, 2}, {3, 2, 1}, {1, 2, 3}};
                for (int c = 0; c < 6; c++) {
                    vs_pipe_costs co = {cs[c][0], cs[c][1], cs[c][2], 0, NULL, NULL, NULL};
                    vs_pipe_sim dc = sim_of(VS_PIPE_DUALPIPEV, P, 0, M, &co);
                    double f = cs[c][0], bf = cs[c][1] + cs[c][2], w = cs[c][2];
                    double bound = (P - 1) * ((f + bf) + bf - 3 * w);
                    VT_CHECK(dc.makespan - dc.ideal <= bound + 1e-12, "dualpipev P%d M%d costs %g:%g:%g: idle %g > %g",
                             P, M, f, cs[c][1], w, dc.makespan - dc.ideal, bound);
                }
            }
        }
}

/* ZB-V against 1F1B at equal total work (1F1B's chunk is two ZB-V chunks: F=B=W=2),
   and DualPipeV against ZB-V. */
static void t_zbv_dualpipev(void)
{
    for (int P = 2; P <= 8; P++)
        for (int M = 2 * P; M <= 4 * P; M++) {
            vs_pipe_costs two = {2, 2, 2, 0, NULL, NULL, NULL};
            vs_pipe_sim o = sim_of(VS_PIPE_1F1B, P, 0, M, &two), z = sim_of(VS_PIPE_ZBV, P, 0, M, NULL);
            VT_CHECK(EQ(o.ideal, z.ideal), "equal work %g %g", o.ideal, z.ideal);
            VT_CHECK(z.makespan < o.makespan, "zbv P%d M%d: makespan %g, 1f1b %g", P, M, z.makespan, o.makespan);
            for (int p = 0; p < P; p++) VT_CHECK(z.peak_live[p] <= 2 * P, "zbv stage %d: peak %d", p, z.peak_live[p]);
        }
    for (int M = 8; M <= 16; M += 8) {
        vs_pipe_sim z = sim_of(VS_PIPE_ZBV, 4, 0, M, NULL), d = sim_of(VS_PIPE_DUALPIPEV, 4, 0, M, NULL);
        VT_CHECK(d.makespan <= z.makespan, "P4 M%d: dualpipev %g, zbv %g", M, d.makespan, z.makespan);
        vs_pipe_costs two = {2, 2, 2, 0, NULL, NULL, NULL};
        vs_pipe_sim o = sim_of(VS_PIPE_1F1B, 4, 0, M, &two);
        printf("    P4 M%d unit chunk costs: 1f1b %g, zbv %g, dualpipev %g (ideal %g)\n", M, o.makespan, z.makespan,
               d.makespan, z.ideal);
    }
}

/* The simulator on hand-written lists: p2p time, per-chunk costs, deadlock, bad
   costs. */
static void t_simulator(void)
{
    vs_pipe_sched* s = NULL;
    VT_OK(vs_pipe_generate(NULL, VS_PIPE_1F1B, 2, 0, 1, &s));
    vs_pipe_costs c = {1, 1, 1, 0.5, NULL, NULL, NULL};
    vs_pipe_sim sim;
    VT_OK(vs_pipe_simulate(s, &c, &sim));
    /* F0 1, p2p .5, F1 1, BW1 2, p2p .5, BW0 2 */
    VT_CHECK(EQ(sim.makespan, 7), "makespan %g", sim.makespan);
    VT_CHECK(EQ(sim.busy[0], 3) && EQ(sim.busy[1], 3), "busy %g %g", sim.busy[0], sim.busy[1]);
    const double cf[2] = {1, 3}, cb[2] = {2, 1}, cw[2] = {0.5, 0.25};
    vs_pipe_costs pc = {0, 0, 0, 0, cf, cb, cw};
    VT_OK(vs_pipe_simulate(s, &pc, &sim));
    VT_CHECK(EQ(sim.makespan, 1 + 3 + 1.25 + 2.5), "per chunk: makespan %g", sim.makespan);
    VT_CHECK(EQ(sim.ideal, (1 + 2.5 + 3 + 1.25) / 2), "ideal %g", sim.ideal);
    vs_pipe_costs neg = {1, -1, 1, 0, NULL, NULL, NULL};
    VT_CHECK(vs_pipe_simulate(s, &neg, &sim) == VS_ERR_INVALID && strstr(vs_last_error(), "-1"), "%s",
             vs_last_error());
    vs_pipe_sched_free(s);

    /* crossed receives: each stage waits for the other first */
    const char* text = "pipe stages=2 chunks=2 mbs=1 place=0,1\n"
                       "0: RB0.0 F0.0 SF0.0 BW0.0 SYNC0 STEP\n"
                       "1: SB1.0 RF1.0 F1.0 BW1.0 SYNC1 STEP\n";
    vs_result r = vs_pipe_sched_parse(NULL, text, &s);
    VT_CHECK(r == VS_OK, "parse: %s", vs_last_error());
    if (r == VS_OK) {
        r = vs_pipe_simulate(s, NULL, &sim);
        VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "deadlock") && strstr(vs_last_error(), "RB0.0") &&
                     strstr(vs_last_error(), "SB1.0"),
                 "%d %s", r, vs_last_error());
        vs_pipe_sched_free(s);
    }
    VT_CHECK(vs_pipe_simulate(NULL, NULL, &sim) == VS_ERR_NULL, "NULL schedule");
}

/* Receives on the clock. The lists write their sends and receives out, and a
   stage's receive holds it until the message is in (send + p2p): here stage 0
   sends both activations only after both forwards, so stage 1 starts later than
   its forward's own input (F0.0's end + p2p) would allow. Costs: F 2 on chunk 0
   and 1 on chunk 1, B 1, W 0.5 (BW 1.5), p2p 0.5. By hand:
     stage 0: F0.0 [0,2] F0.1 [2,4] SF0.0 SF0.1 at 4
     stage 1: RF1.0 at 4.5 (not F0.0's end 2 + .5), F1.0 [4.5,5.5], RF1.1 at 5.5,
              F1.1 [5.5,6.5], BW1.0 [6.5,8], SB1.0 at 8, BW1.1 [8,9.5], SB1.1 at 9.5
     stage 0: RB0.0 at 8.5, BW0.0 [8.5,10], RB0.1 at 10, BW0.1 [10,11.5]
   makespan 11.5, busy 7 and 5, ideal 6, bubble 1 - 12/23. With p2p 0 the two
   hops of the critical path (SF0.0 -> RF1.0, SB1.1 -> RB0.1) go: 10.5. A receive
   that took no p2p time would give 11; one that did not wait for its send, 10.5. */
static void t_sim_recv(void)
{
    const char* text = "pipe stages=2 chunks=2 mbs=2 place=0,1\n"
                       "0: F0.0 F0.1 SF0.0 SF0.1 RB0.0 BW0.0 RB0.1 BW0.1 SYNC0 STEP\n"
                       "1: RF1.0 F1.0 RF1.1 F1.1 BW1.0 SB1.0 BW1.1 SB1.1 SYNC1 STEP\n";
    vs_pipe_sched* s = NULL;
    VT_OK(vs_pipe_sched_parse(NULL, text, &s));
    if (!s) return;
    VT_OK(vs_pipe_sched_check(s, NULL));
    const double cf[2] = {2, 1}, cb[2] = {1, 1}, cw[2] = {0.5, 0.5};
    vs_pipe_costs c = {0, 0, 0, 0.5, cf, cb, cw};
    vs_pipe_sim sim;
    VT_OK(vs_pipe_simulate(s, &c, &sim));
    VT_CHECK(EQ(sim.makespan, 11.5), "makespan %.17g, by hand 11.5", sim.makespan);
    VT_CHECK(EQ(sim.busy[0], 7) && EQ(sim.busy[1], 5), "busy %g %g, by hand 7 and 5", sim.busy[0], sim.busy[1]);
    VT_CHECK(EQ(sim.ideal, 6), "ideal %g", sim.ideal);
    VT_CHECK(EQ(sim.bubble, 1 - 12.0 / 23), "bubble %.17g, by hand %.17g", sim.bubble, 1 - 12.0 / 23);
    c.p2p = 0;
    VT_OK(vs_pipe_simulate(s, &c, &sim));
    VT_CHECK(EQ(sim.makespan, 10.5), "p2p 0: makespan %.17g, by hand 10.5", sim.makespan);
    vs_pipe_sched_free(s);
}

static void t_draw(void)
{
    vs_pipe_sched* s = NULL;
    VT_OK(vs_pipe_generate(NULL, VS_PIPE_1F1B, 2, 0, 2, &s));
    char buf[2048];
    int n = vs_pipe_draw(s, NULL, 0, buf, sizeof buf);
    VT_CHECK(n > 0 && (size_t)n == strlen(buf), "length %d vs %zu", n, strlen(buf));
    /* 1F1B, P=2, M=2, unit slots (BW = 2) */
    VT_CHECK(strstr(buf, " 0 | F0  F1  .   .   BW0 -   .   BW1 -\n") != NULL, "stage 0 row:\n%s", buf);
    VT_CHECK(strstr(buf, " 1 | .   F0  BW0 -   F1  BW1 -   .   .\n") != NULL, "stage 1 row:\n%s", buf);
    VT_CHECK(strstr(buf, "F forward") && strstr(buf, "W backward for the weights"), "legend:\n%s", buf);
    char small[16];
    VT_CHECK(vs_pipe_draw(s, NULL, 0, small, sizeof small) == n && strlen(small) == sizeof small - 1, "truncated");
    VT_CHECK(vs_pipe_draw(s, NULL, 0, NULL, 0) == n, "size query");
    vs_pipe_sched_free(s);
    VT_OK(vs_pipe_generate(NULL, VS_PIPE_ZBV, 2, 0, 2, &s));
    n = vs_pipe_draw(s, NULL, 0, buf, sizeof buf);
    VT_CHECK(n > 0 && strstr(buf, "F0.0") && strstr(buf, "W3.1"), "zbv labels:\n%s", buf);
    vs_pipe_sched_free(s);
}

static int count(const char* hay, const char* needle)
{
    int n = 0;
    for (const char* p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

static void t_trace(void)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/vs_pipe_trace_%d.json", (int)getpid());
    vs_pipe_sched* s = NULL;
    VT_OK(vs_pipe_generate(NULL, VS_PIPE_ZBH1, 3, 0, 4, &s));
    VT_OK(vs_pipe_trace_simulated(s, NULL, path));
    int total = 0, compute = 0;
    for (int p = 0; p < 3; p++)
        for (int i = 0; i < vs_pipe_sched_len(s, p); i++) {
            vs_pipe_instr in;
            vs_pipe_sched_at(s, p, i, &in);
            total++;
            compute += in.op == VS_PIPE_F || in.op == VS_PIPE_B || in.op == VS_PIPE_W || in.op == VS_PIPE_BW;
        }
    FILE* fp = fopen(path, "r");
    static char text[1 << 16];
    size_t len = fp ? fread(text, 1, sizeof text - 1, fp) : 0;
    if (fp) fclose(fp);
    text[len] = 0;
    VT_CHECK(count(text, "\"ph\":\"X\"") == total, "%d events for %d instructions", count(text, "\"ph\":\"X\""), total);
    VT_CHECK(count(text, "\"name\":\"F") + count(text, "\"name\":\"B") + count(text, "\"name\":\"W") == compute,
             "compute events vs %d", compute);
    VT_CHECK(strstr(text, "\"name\":\"F0.0\",\"ph\":\"X\",\"ts\":0.000,\"dur\":1000000.000,\"pid\":0,\"tid\":0"),
             "first event:\n%.300s", text);
    /* a real JSON parser, where python3 is there */
    if (system("python3 -c 'import json' >/dev/null 2>&1") == 0) {
        char cmd[256];
        snprintf(cmd, sizeof cmd,
                 "python3 -c 'import json,sys; e=json.load(open(\"%s\"))[\"traceEvents\"]; "
                 "x=[v for v in e if v[\"ph\"]==\"X\" and v[\"name\"][0] in \"FBW\"]; sys.exit(len(x)!=%d)'",
                 path, compute);
        VT_CHECK(system(cmd) == 0, "python3 json: %s", cmd);
    }
    /* measured times */
    double a[2][64], b[2][64];
    const double* t0[2] = {a[0], a[1]};
    const double* t1[2] = {b[0], b[1]};
    vs_pipe_sched_free(s);
    VT_OK(vs_pipe_generate(NULL, VS_PIPE_GPIPE, 2, 0, 2, &s));
    for (int p = 0; p < 2; p++)
        for (int i = 0; i < 64; i++) a[p][i] = 0.001 * i, b[p][i] = 0.001 * i + 0.0005;
    VT_OK(vs_pipe_trace_write(s, t0, t1, path));
    b[1][2] = -1;
    VT_CHECK(vs_pipe_trace_write(s, t0, t1, path) == VS_ERR_INVALID && strstr(vs_last_error(), "stage 1 instruction 2"),
             "%s", vs_last_error());
    VT_CHECK(vs_pipe_trace_write(s, t0, t1, "/nonexistent/dir/x.json") != VS_OK, "bad path");
    vs_pipe_sched_free(s);
    remove(path);
}

static void t_bad_input(void)
{
    vs_pipe_sched* s = (vs_pipe_sched*)1;
    VT_CHECK(vs_pipe_generate(NULL, VS_PIPE_1F1B, 0, 0, 4, &s) == VS_ERR_INVALID && s == NULL &&
                 strstr(vs_last_error(), "stages = 0"),
             "%s", vs_last_error());
    VT_CHECK(vs_pipe_generate(NULL, VS_PIPE_1F1B, 4, 0, 0, &s) == VS_ERR_INVALID &&
                 strstr(vs_last_error(), "microbatch count 0"),
             "%s", vs_last_error());
    VT_CHECK(vs_pipe_generate(NULL, VS_PIPE_ZBV, 4, 3, 8, &s) == VS_ERR_INVALID &&
                 strstr(vs_last_error(), "chunks = 3") && strstr(vs_last_error(), "zbv"),
             "%s", vs_last_error());
    VT_CHECK(vs_pipe_generate(NULL, VS_PIPE_DUALPIPEV, 4, 1, 8, &s) == VS_ERR_INVALID &&
                 strstr(vs_last_error(), "chunks = 1"),
             "%s", vs_last_error());
    VT_CHECK(vs_pipe_generate(NULL, VS_PIPE_1F1B, 4, 2, 8, &s) == VS_ERR_INVALID &&
                 strstr(vs_last_error(), "chunks = 2"),
             "%s", vs_last_error());
    VT_CHECK(vs_pipe_generate(NULL, VS_PIPE_INTERLEAVED, 4, 65, 8, &s) == VS_ERR_INVALID &&
                 strstr(vs_last_error(), "chunks = 65"),
             "%s", vs_last_error());
    VT_CHECK(vs_pipe_generate(NULL, (vs_pipe_kind)99, 4, 0, 8, &s) == VS_ERR_INVALID &&
                 strstr(vs_last_error(), "kind 99"),
             "%s", vs_last_error());
    VT_CHECK(vs_pipe_generate(NULL, VS_PIPE_1F1B, 4, 0, 8, NULL) == VS_ERR_NULL, "out NULL");
    vs_pipe_kind k;
    VT_CHECK(vs_pipe_kind_parse("zbv", &k) == VS_OK && k == VS_PIPE_ZBV, "parse zbv");
    VT_CHECK(vs_pipe_kind_parse("zb-v", &k) == VS_ERR_INVALID && strstr(vs_last_error(), "zb-v"), "%s",
             vs_last_error());
}

/* Schedules made without a world, freed (issue 33): each use is VS_ERR_STATE
   "already freed" while among this thread's last 16 such, not a use after free
   (under ASan: a crash before the fix). What a thread keeps goes when it ends:
   under ASan's leak check, a thread that freed some and ended leaks nothing. */
static int freed_null_world(void)
{
    int bad = 0;
    vs_pipe_sched* s[16] = {NULL};
    for (int i = 0; i < 16; i++) {
        vs_result r = i % 4 == 0 ? vs_pipe_sched_new(NULL, 2, 2, NULL, 2, &s[i])
                      : i % 4 == 1 ? vs_pipe_generate(NULL, VS_PIPE_1F1B, 2, 0, 2, &s[i])
                      : i % 4 == 2 ? vs_pipe_sched_parse(NULL, "pipe stages=1 chunks=1 mbs=1 place=0\n0: F0.0 BW0.0\n", &s[i])
                                   : vs_pipe_sched_forward(s[i - 2], &s[i]);
        bad += r != VS_OK;
    }
    for (int i = 0; i < 16; i++) bad += vs_pipe_sched_free(s[i]) != VS_OK;
    char b[64];
    vs_pipe_sim sim;
    for (int i = 0; i < 16; i++) { // the four uses: a call, a getter, a second free, print
        bad += vs_pipe_sched_push(s[i], 0, VS_PIPE_F, 0, 0) != VS_ERR_STATE || !strstr(vs_last_error(), "already freed");
        bad += vs_pipe_sched_stages(s[i]) != VS_ERR_STATE || !strstr(vs_last_error(), "vs_pipe_sched_stages");
        bad += vs_pipe_sched_free(s[i]) != VS_ERR_STATE || !strstr(vs_last_error(), "already freed");
        bad += vs_pipe_sched_print(s[i], b, sizeof b) != -1 || !strstr(vs_last_error(), "already freed");
        bad += vs_pipe_simulate(s[i], NULL, &sim) != VS_ERR_STATE;
    }
    return bad;
}

static void* freed_null_world_thread(void* arg)
{
    *(int*)arg = freed_null_world();
    return NULL;
}

static void t_freed_null_world(void)
{
    VT_CHECK(freed_null_world() == 0, "main thread: %s", vs_last_error());
    for (int round = 0; round < 3; round++) { // each thread keeps its own; its end releases them
        pthread_t th;
        int bad = -1;
        VT_CHECK(pthread_create(&th, NULL, freed_null_world_thread, &bad) == 0, "pthread_create");
        pthread_join(th, NULL);
        VT_CHECK(bad == 0, "thread %d: %d wrong answers", round, bad);
    }
    VT_CHECK(freed_null_world() == 0, "main thread again: %s", vs_last_error());
}

int main(void)
{
    vt_begin("generators: every kind, P in {1,2,3,4,8}, M in {1,2,P-1,P,2P,3P+1,3P+2}: scan + validator");
    t_generators();
    vt_end("generators: every kind, P in {1,2,3,4,8}, M in {1,2,P-1,P,2P,3P+1,3P+2}: scan + validator");
    vt_begin("validator accepts every kind for P 1..8, M 1..3P+2");
    t_validator_sweep();
    vt_end("validator accepts every kind for P 1..8, M 1..3P+2");
    vt_begin("simulator formulas: gpipe, 1f1b, interleaved, zbh1, dualpipev");
    t_formulas();
    vt_end("simulator formulas: gpipe, 1f1b, interleaved, zbh1, dualpipev");
    vt_begin("zbv beats 1f1b at equal work; dualpipev no slower than zbv");
    t_zbv_dualpipev();
    vt_end("zbv beats 1f1b at equal work; dualpipev no slower than zbv");
    vt_begin("simulator: p2p, per-chunk costs, deadlock, bad costs");
    t_simulator();
    vt_end("simulator: p2p, per-chunk costs, deadlock, bad costs");
    vt_begin("simulator: explicit sends and receives, unequal forwards, p2p (by hand)");
    t_sim_recv();
    vt_end("simulator: explicit sends and receives, unequal forwards, p2p (by hand)");
    vt_begin("draw: text timeline");
    t_draw();
    vt_end("draw: text timeline");
    vt_begin("chrome trace: simulated and measured");
    t_trace();
    vt_end("chrome trace: simulated and measured");
    vt_begin("bad input names the value");
    t_bad_input();
    vt_end("bad input names the value");
    vt_begin("freed schedules made without a world: already freed, per thread, released at its end");
    t_freed_null_world();
    vt_end("freed schedules made without a world: already freed, per thread, released at its end");
    return vt_summary();
}
