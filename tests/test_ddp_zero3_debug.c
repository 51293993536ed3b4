/* test_ddp_zero3_debug.c - ZeRO-3's misuse of a gathered group (issue 34,
   section 5's bad input), plain and under VESCALE_DEBUG=params:
   - a parameter used before its group is gathered: vs_ddp_param is NULL with
     VS_ERR_STATE naming the parameter and the group;
   - VESCALE_DEBUG=params on the host: a write through a view kept past its
     release faults naming the group (a read: tests/test_ddp_zero3.c);
   - VESCALE_DEBUG=params on a device (the strict stand-in: no page can be made
     inaccessible there): a read after the release gets the released buffer's
     canary NaN, and the non-finite gradient norm names the parameter and group
     on every rank; a write after the release is found when the buffer is handed
     out again, and the next gradient norm refuses the step on every rank (the
     writer naming the parameter), the step skipped and the one after it
     normal; bf16 parameters: a read gets NaN too (unnamed: no room in a
     16-bit NaN), a write is named; a correct trainer's results are the same
     bits with and without the debug mode;
   - reshard_after_forward 0 with a recomputed forward whose gather is held
     past the group's backward: the recompute's gather costs no traffic, the
     step refuses the held group (VS_ERR_STATE naming it, nothing changed), a
     release then lets it go on, bit for bit a trainer that released in time; a
     release more is VS_ERR_STATE;
   - ranks that disagree on VESCALE_DEBUG=params: vs_ddp_finalize refuses.
   Built twice: thread ranks with host buffers (build/test_ddp_zero3_debug) and
   over the strict CUDA + NCCL stand-in with device buffers
   (build/test_ddp_zero3_debug_strict). */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vescale_ddp.h"
#include "vs_test.h"

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef VS_STRICT
#include <cuda_runtime.h>
#include "strict/vs_strict.h"
#define DEV 1
#else
#define DEV 0
#endif
#include "ddp_common.h"

#define L 4
#define NK 2
#define DP 2
#define STEPS 3
static const int64_t ksz[NK] = {1000, 40}; // a layer: w, b
static const char* kname[NK] = {"h.%d.w", "h.%d.b"};
#define TOTAL (L * (1000 + 40))

static float init_value(int l, int k, int64_t e) { return (float)(0.5 * sin(0.37 * (double)e + 0.1 * k + 0.7 * l)); }
static float h_value(int r, int s, int l, int64_t e) { return (float)(0.01 * cos(0.11 * (double)e + r + 0.3 * s + l)); }

enum { BUG_NONE, BUG_READ, BUG_WRITE, BUG_HOLD };
typedef struct job {
    const char* debug; // vs_launch_desc.debug
    int bug;           // BUG_*: rank 1 (the hold: every rank) misuses a view at step 1
    int rsf0;          // reshard_after_forward 0
    int recompute;     // each backward's layer gathered for a recomputed forward first (one release)
    int bf16;          // bf16 parameters (f32 gradients)
    /* results */
    float out[DP][TOTAL];
    vs_result clip_r[DP][STEPS];
    char clip_msg[DP][STEPS][600];
    int64_t skipped[DP], steps[DP];
    int checks_bad[DP];
    uint64_t recompute_bytes[DP]; // bytes the DP group sent for the recomputes' gathers
} job;

static vs_result launch(int n, int (*fn)(vs_world*, void*), void* arg, const char* debug)
{
    vs_launch_desc ld = dc_launch_desc(n);
    ld.debug = debug;
    return vs_launch_ex(&ld, fn, arg);
}

/* A parameter of n elements at p (f32, or bf16) into f32 host memory. */
static void read_param(float* dst, const void* p, int64_t n, int bf16)
{
    static __thread uint16_t h[1000];
    if (!bf16) {
        dc_from_mem(dst, p, sizeof(float) * (size_t)n);
        return;
    }
    dc_from_mem(h, p, sizeof(uint16_t) * (size_t)n);
    for (int64_t e = 0; e < n; e++) dst[e] = vs_bf16_to_f32(h[e]);
}

static void add_model(vs_ddp* d, int idx[NK][L], int bf16)
{
    dc_layers m = {L, NK, bf16, ksz, kname, init_value, 0};
    dc_add_layers(d, &m, &idx[0][0], DC_ADD);
}

/* A ZeRO-3 DDP of the model over w's ranks (a 1-D mesh), registered, and
   finalized unless finalize is 0; bf16 parameters with f32 gradients, or f32;
   close_ddp frees both. */
static vs_ddp* open_ddp(vs_world* w, vs_mesh** mesh, int idx[NK][L], int rsf0, int finalize, int bf16)
{
    *mesh = dc_mesh_1d(w);
    if (!*mesh) return NULL;
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = *mesh;
    dd.zero = VS_ZERO_3;
    dd.optim.kind = VS_OPTIM_ADAMW;
    dd.optim.weight_decay = 0.01;
    dd.reshard_after_forward = !rsf0, dd.reshard_after_forward_set = 1;
    dd.grad_fp32 = bf16; // (f32 gradients: the trainer adds in f32)
    vs_ddp* d = NULL;
    VT_OK(vs_ddp_init(&dd, &d));
    if (!d) return NULL;
    add_model(d, idx, bf16);
    if (finalize) VT_OK(vs_ddp_finalize(d));
    return d;
}
static void close_ddp(vs_ddp* d, vs_mesh* mesh)
{
    VT_OK(vs_ddp_free(d));
    VT_OK(vs_mesh_free(mesh));
}

/* Layer l's gradients from p (read through a view), g = 0.1 p + h. */
static void grads(vs_ddp* d, int idx[NK][L], int me, int s, int l, const void* const* p, int bf16)
{
    static __thread float hp[1000], hg[1000];
    for (int k = 0; k < NK; k++) {
        void* gd = vs_ddp_grad(d, idx[k][l]);
        VT_CHECK(gd != NULL, "vs_ddp_grad: %s", vs_last_error());
        if (!gd || !p[k]) continue;
        read_param(hp, p[k], ksz[k], bf16);
        dc_from_mem(hg, gd, sizeof(float) * (size_t)ksz[k]);
        for (int64_t e = 0; e < ksz[k]; e++) hg[e] += 0.1f * hp[e] + h_value(me, s, l, e);
        dc_to_mem(gd, hg, sizeof(float) * (size_t)ksz[k]);
    }
}

static int rank_train(vs_world* w, void* arg)
{
    job* J = (job*)arg;
    int me = vs_world_rank(w);
    vs_mesh* mesh = NULL;
    int idx[NK][L];
    vs_ddp* d = open_ddp(w, &mesh, idx, J->rsf0, 1, J->bf16);
    if (!d) return 1;
    vs_comm* dpc = vs_mesh_comm(mesh);
    const int bad = J->bug == BUG_HOLD || me == 1;
    for (int s = 0; s < STEPS; s++) {
        const int bug = s == 1 && bad ? J->bug : BUG_NONE;
        VT_OK(vs_ddp_zero_grad(d));
        for (int l = 0; l < L; l++) { // forward: each layer's parameters read while gathered
            VT_OK(vs_ddp_gather(d, l + 1));
            for (int k = 0; k < NK; k++) VT_CHECK(vs_ddp_param(d, idx[k][l]) != NULL, "%s", vs_last_error());
            VT_OK(vs_ddp_release(d, l + 1));
        }
        for (int l = L - 1; l >= 0; l--) { // backward
            const int g = l + 1;
            if (J->recompute) { // a recomputed forward gathers it (reshard_after_forward 0: kept, no traffic)
                uint64_t before = dpc->sent;
                VT_OK(vs_ddp_gather(d, g));
                J->recompute_bytes[me] += dpc->sent - before;
            }
            VT_OK(vs_ddp_gather(d, g)); // (held already under recompute: nothing more)
            const void* p[NK];
            for (int k = 0; k < NK; k++) p[k] = vs_ddp_param(d, idx[k][l]);
            if (bug == BUG_READ && l == 1) { // reads its views after their release
                VT_OK(vs_ddp_release(d, g));
                grads(d, idx, me, s, l, p, J->bf16);
                VT_OK(vs_ddp_group_ready(d, g));
                continue;
            }
            grads(d, idx, me, s, l, p, J->bf16);
            VT_OK(vs_ddp_group_ready(d, g));
            if (bug == BUG_HOLD && l == 1) continue; // not released: held past its backward
            VT_OK(vs_ddp_release(d, g));
            if (bug == BUG_WRITE && l == 2) { // writes into a view after its release
                float junk[4] = {1, 2, 3, 4};
                dc_to_mem((char*)p[1] + 40, junk, sizeof junk);
            }
        }
        VT_OK(vs_ddp_finish_grad_sync(d));
        vs_clip_desc cd;
        memset(&cd, 0, sizeof cd);
        cd.max_norm = 1.0;
        cd.error_if_nonfinite = 1;
        J->clip_r[me][s] = vs_ddp_clip_grad_norm_ex(d, &cd, NULL);
        snprintf(J->clip_msg[me][s], sizeof J->clip_msg[me][s], "%s", J->clip_r[me][s] ? vs_last_error() : "");
        if (bug == BUG_HOLD) { // the step refuses the held group, changing nothing; released, it goes on
            float before[1000], after[1000];
            vs_ddp_span sp;
            VT_OK(vs_ddp_param_owned(d, idx[0][0], &sp));
            size_t nb = sizeof(float) * (size_t)(sp.end - sp.begin);
            if (sp.data) dc_from_mem(before, sp.data, nb);
            vs_result r = vs_ddp_step(d, 1e-3);
            if (!(r == VS_ERR_STATE && strstr(vs_last_error(), "group 2 is still gathered"))) J->checks_bad[me]++;
            if (sp.data) dc_from_mem(after, sp.data, nb);
            if (memcmp(before, after, nb) || vs_ddp_step_count(d) != s) J->checks_bad[me]++;
            VT_OK(vs_ddp_release(d, 2));
            r = vs_ddp_release(d, 2); // one release more: not gathered
            if (!(r == VS_ERR_STATE && strstr(vs_last_error(), "group 2 is not gathered"))) J->checks_bad[me]++;
        }
        VT_OK(vs_ddp_step(d, 1e-3));
        VT_OK(vs_ddp_wait_params(d));
    }
    J->skipped[me] = vs_ddp_skipped_steps(d);
    J->steps[me] = vs_ddp_step_count(d);
    for (int k = 0, at = 0; k < NK; k++) // the whole parameters, gathered
        for (int l = 0; l < L; l++, at += (int)ksz[k]) {
            VT_OK(vs_ddp_gather(d, l + 1));
            const void* p = vs_ddp_param(d, idx[k][l]);
            if (p) read_param(&J->out[me][at], p, ksz[k], J->bf16);
            VT_OK(vs_ddp_release(d, l + 1));
        }
    VT_OK(vs_ddp_synchronize(d));
    close_ddp(d, mesh);
    return 0;
}

static job* run_ex(const char* debug, int bug, int rsf0, int recompute, int bf16)
{
    job* J = (job*)calloc(1, sizeof(job));
    J->debug = debug, J->bug = bug, J->rsf0 = rsf0, J->recompute = recompute, J->bf16 = bf16;
    VT_OK(launch(DP, rank_train, J, debug));
    return J;
}
static job* run(const char* debug, int bug, int rsf0, int recompute) { return run_ex(debug, bug, rsf0, recompute, 0); }

static int same_out(const job* a, const job* b, int r)
{
    return memcmp(a->out[r], b->out[r], sizeof a->out[r]) == 0;
}

/* A parameter used before its group is gathered: NULL, VS_ERR_STATE naming both. */
static int rank_ungathered(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh* mesh = NULL;
    int idx[NK][L];
    vs_ddp* d = open_ddp(w, &mesh, idx, 0, 1, 0);
    if (!d) return 1;
    const void* p = vs_ddp_param(d, idx[1][2]);
    VT_CHECK(p == NULL && strstr(vs_last_error(), "'h.2.b'") &&
                 strstr(vs_last_error(), "ready group 3") && strstr(vs_last_error(), "vs_ddp_gather(d, 3)"),
             "ungathered: %p %s", p, vs_last_error());
    VT_OK(vs_ddp_gather(d, 3));
    VT_OK(vs_ddp_release(d, 3));
    p = vs_ddp_param(d, idx[1][2]); // (released: the same)
    VT_CHECK(p == NULL && strstr(vs_last_error(), "'h.2.b'") && strstr(vs_last_error(), "ready group 3"),
             "released: %p %s", p, vs_last_error());
    close_ddp(d, mesh);
    return 0;
}

/* Ranks that disagree on VESCALE_DEBUG=params (each process reads its own
   environment; naming a read after a release is a collective): finalize refuses. */
static int rank_debug_mismatch(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh* mesh = NULL;
    int idx[NK][L];
    vs_ddp* d = open_ddp(w, &mesh, idx, 0, 0, 0);
    if (!d) return 1;
    if (vs_world_rank(w) == 1) d->debug_params = 1; // (as if its process had VESCALE_DEBUG=params)
    vs_result r = vs_ddp_finalize(d);
    VT_CHECK(r == VS_ERR_MISMATCH && strstr(vs_last_error(), "VESCALE_DEBUG=params 0") &&
                 strstr(vs_last_error(), "world rank 1 has 1, 1, 1"),
             "finalize: %d %s", r, vs_last_error());
    close_ddp(d, mesh);
    return 0;
}

#if !DEV
/* VESCALE_DEBUG=params on the host: a write through a view after its release
   faults naming the group; in a child process, whose stderr and end come back. */
static int rank_write_after(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh* mesh = NULL;
    int idx[NK][L];
    vs_ddp* d = open_ddp(w, &mesh, idx, 0, 1, 0);
    if (!d) return 1;
    VT_OK(vs_ddp_gather(d, 3));
    volatile float* p = (float*)vs_ddp_param(d, idx[0][2]);
    if (p) p[5] = 1.0f; // (while gathered: allowed)
    VT_OK(vs_ddp_release(d, 3));
    VT_OK(vs_barrier(vs_world_comm(w), NULL));
    if (vs_world_rank(w) == 1 && p) p[5] = 2.0f; // (faults here)
    VT_OK(vs_barrier(vs_world_comm(w), NULL));
    close_ddp(d, mesh);
    return 0;
}
static void case_host_write(void)
{
    int pfd[2];
    VT_CHECK(pipe(pfd) == 0, "pipe");
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 2);
        close(pfd[0]);
        vs_result r = launch(2, rank_write_after, NULL, "params");
        _exit(r == VS_OK ? 0 : 3);
    }
    close(pfd[1]);
    char out[8192];
    size_t n = 0;
    ssize_t got;
    while (n + 1 < sizeof out && (got = read(pfd[0], out + n, sizeof out - 1 - n)) > 0) n += (size_t)got;
    out[n] = 0;
    close(pfd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    VT_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV && strstr(out, "rank 1") &&
                 strstr(out, "ready group 3 ('h.2.") && strstr(out, "after vs_ddp_release"),
             "a write after the release: status %d (signal %d), stderr: %s", status,
             WIFSIGNALED(status) ? WTERMSIG(status) : 0, out);
}
#endif

#if DEV
/* The released buffer's NaN read by rank 1 reaches the gradients: every rank's
   non-finite norm names the parameter and group; without the debug mode the
   stale values go through unnoticed (the case that fails before the fix). */
static void case_dev_read(void)
{
    job* J = run("params", BUG_READ, 0, 0);
    for (int r = 0; r < DP; r++) {
        VT_CHECK(J->clip_r[r][0] == VS_OK && J->clip_r[r][2] == VS_OK, "rank %d: steps 0 and 2 clip: %s %s", r,
                 J->clip_msg[r][0], J->clip_msg[r][2]);
        VT_CHECK(J->clip_r[r][1] == VS_ERR_NONFINITE &&
                     strstr(J->clip_msg[r][1], "parameter 'h.1.") && // (w or b: both were read)
                     strstr(J->clip_msg[r][1], "' of ready group 2 was read after vs_ddp_release(2)"),
                 "rank %d: step 1's clip: %d %s", r, J->clip_r[r][1], J->clip_msg[r][1]);
        VT_CHECK(J->skipped[r] == 1 && J->steps[r] == 2, "rank %d: %lld skipped, %lld steps", r,
                 (long long)J->skipped[r], (long long)J->steps[r]);
    }
    free(J);
}

/* bf16 parameters: a read after the release gets NaN too (the step skipped on
   every rank; a 16-bit NaN has no room to name the parameter); a write is
   found and named as in f32. */
static void case_dev_bf16(void)
{
    job* R = run_ex("params", BUG_READ, 0, 0, 1);
    job* W = run_ex("params", BUG_WRITE, 0, 0, 1);
    for (int r = 0; r < DP; r++) {
        VT_CHECK(R->clip_r[r][1] == VS_ERR_NONFINITE && R->clip_r[r][0] == VS_OK && R->clip_r[r][2] == VS_OK &&
                     R->skipped[r] == 1,
                 "rank %d: a read: clips %d %d %d (%s), %lld skipped", r, R->clip_r[r][0], R->clip_r[r][1],
                 R->clip_r[r][2], R->clip_msg[r][1], (long long)R->skipped[r]);
        const char* want = r == 1 ? "rank 1 wrote into parameter 'h.2.b' of ready group 3 after vs_ddp_release(3)"
                                  : "another rank wrote into a released ZeRO-3 buffer";
        VT_CHECK(W->clip_r[r][1] == VS_ERR_STATE && strstr(W->clip_msg[r][1], want) && W->clip_r[r][2] == VS_OK &&
                     W->skipped[r] == 1,
                 "rank %d: a write: clip %d %s, %lld skipped", r, W->clip_r[r][1], W->clip_msg[r][1],
                 (long long)W->skipped[r]);
    }
    free(R);
    free(W);
}

/* Rank 1 writes into a released view: found when the buffer is handed out
   again, every rank's next clip refuses (the writer naming the parameter), the
   step skipped, the next one normal. */
static void case_dev_write(void)
{
    job* J = run("params", BUG_WRITE, 0, 0);
    for (int r = 0; r < DP; r++) {
        VT_CHECK(J->clip_r[r][0] == VS_OK && J->clip_r[r][2] == VS_OK, "rank %d: steps 0 and 2 clip: %s %s", r,
                 J->clip_msg[r][0], J->clip_msg[r][2]);
        const char* want = r == 1 ? "rank 1 wrote into parameter 'h.2.b' of ready group 3 after vs_ddp_release(3)"
                                  : "another rank wrote into a released ZeRO-3 buffer";
        VT_CHECK(J->clip_r[r][1] == VS_ERR_STATE && strstr(J->clip_msg[r][1], want), "rank %d: step 1's clip: %d %s",
                 r, J->clip_r[r][1], J->clip_msg[r][1]);
        VT_CHECK(J->skipped[r] == 1 && J->steps[r] == 2, "rank %d: %lld skipped, %lld steps", r,
                 (long long)J->skipped[r], (long long)J->steps[r]);
    }
    free(J);
}
#endif

/* A correct trainer: the same bits with the debug mode on (device: the canaries
   never reach a value read). */
static void case_same_bits(void)
{
    job* a = run(NULL, BUG_NONE, 0, 0);
    job* b = run("params", BUG_NONE, 0, 0);
    for (int r = 0; r < DP; r++) {
        VT_CHECK(same_out(a, b, r), "rank %d: parameters differ with VESCALE_DEBUG=params", r);
        for (int s = 0; s < STEPS; s++)
            VT_CHECK(b->clip_r[r][s] == VS_OK, "rank %d step %d: %s", r, s, b->clip_msg[r][s]);
        VT_CHECK(a->out[r][7] != init_value(0, 0, 7), "rank %d: trained", r);
    }
    free(a);
    free(b);
}

/* reshard_after_forward 0, each backward's layer recomputed: the recompute's
   gather of the kept group sends nothing; a group held past its backward: the
   step refuses it (nothing changed), released it goes on, bit for bit the
   trainer that released in time; a release more is refused. */
static void case_hold(void)
{
    job* ok = run(NULL, BUG_NONE, 1, 1);
    job* held = run(NULL, BUG_HOLD, 1, 1);
    job* plain = run(NULL, BUG_NONE, 1, 0);
    for (int r = 0; r < DP; r++) {
        VT_CHECK(ok->recompute_bytes[r] == 0 && held->recompute_bytes[r] == 0,
                 "rank %d: the recomputes' gathers sent %llu and %llu bytes", r,
                 (unsigned long long)ok->recompute_bytes[r], (unsigned long long)held->recompute_bytes[r]);
        VT_CHECK(held->checks_bad[r] == 0, "rank %d: %d checks of the held group failed", r, held->checks_bad[r]);
        VT_CHECK(same_out(ok, held, r) && same_out(ok, plain, r), "rank %d: results differ (held %d, plain %d)", r,
                 !same_out(ok, held, r), !same_out(ok, plain, r));
        VT_CHECK(held->steps[r] == STEPS && held->skipped[r] == 0, "rank %d: %lld steps", r,
                 (long long)held->steps[r]);
    }
    free(ok);
    free(held);
    free(plain);
}

int main(void)
{
    VT_CASE("a parameter used before its group is gathered (and after its release): NULL, VS_ERR_STATE naming the "
            "parameter and the group", VT_OK(launch(DP, rank_ungathered, NULL, NULL)));
    VT_CASE("ranks disagreeing on VESCALE_DEBUG=params under ZeRO-3: vs_ddp_finalize refuses on every rank, naming "
            "both", VT_OK(launch(DP, rank_debug_mismatch, NULL, NULL)));
#if !DEV
    VT_CASE("VESCALE_DEBUG=params, host: a write through a view after its release faults naming the rank and group",
            case_host_write());
#else
    VT_CASE("VESCALE_DEBUG=params, device: a read after the release gets the canary NaN; every rank's non-finite norm "
            "names the parameter and group; the step skipped", case_dev_read());
    VT_CASE("VESCALE_DEBUG=params, device: a write after the release is found when the buffer is handed out again; "
            "every rank's next clip refuses (the writer naming the parameter); the step skipped, the next one normal",
            case_dev_write());
    VT_CASE("VESCALE_DEBUG=params, device, bf16 parameters: a read after the release gets NaN (the step skipped); a "
            "write is found and named", case_dev_bf16());
#endif
    VT_CASE("VESCALE_DEBUG=params: a correct trainer's parameters the same bits as without it", case_same_bits());
    VT_CASE("reshard_after_forward 0 + recompute: the recompute's gather sends nothing; a group held past its backward "
            "is refused by the step naming it (nothing changed), released it goes on bit for bit; a release more is "
            "refused", case_hold());
#ifdef VS_STRICT
    VT_CASE("strict/no violations", VT_CHECK(vs_strict_violations() == 0, "%s", vs_strict_first_violation()));
#endif
    return vt_summary();
}
