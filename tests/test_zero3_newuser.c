/* test_zero3_newuser.c - ZeRO-3 and HSDP as a trainer meets them from README.md
   alone (issue 34's new-user pass): README's ZeRO-3 loop around a small MLP
   (3 layers, tanh, squared error), and the mistakes a newcomer makes with it.

   - The loop on DP4, on HSDP DPR2 x DPS2 and on HSDP with its own dim names
     (hosts x gpus) against one rank (ZeRO-0, the same calls): losses and the
     final parameters within 1e-6.
   - Misuse that is refused (a gather of group 0 or of an unknown group, a
     view of an ungathered group, a step while a group is held, a release
     twice), made inside the first steps while the gather order is recorded:
     the run is bit for bit the clean one (nothing changed).
   - What the headers promise for the rest: groups released in any order; a
     forgotten vs_ddp_group_ready reduced by vs_ddp_finish_grad_sync (bit for
     bit), or refused by vs_ddp_grad once the staging pool is all held; a
     vs_ddp_free with a group gathered; a gather off the recorded order
     between steps grows the gathered pool at most once.
   Public API only. */
#define VESCALE_IMPLEMENTATION
#include "vescale.h"
#include "vs_test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define NL 3
#define NB 8 // global batch rows
#define STEPS 5
static const int dims[NL + 1] = {8, 16, 16, 4};

enum { MESH_DP, MESH_HSDP, MESH_NAMED };
enum { MIS_NONE, MIS_REFUSED, MIS_ORDER, MIS_FORGET };

typedef struct job {
    int zero, mesh, nranks, misuse, buffers;
    double loss[STEPS];
    float w[NL][16 * 16]; // final weights (rank 0, gathered)
    size_t pool[3];       // ZeRO-3: gathered pool before, after one off-order read, after a second
} job;

static float hashf(unsigned a, unsigned b, unsigned c)
{
    unsigned h = a * 2654435761u ^ (b + 0x9e3779b9u) * 40503u ^ c * 2246822519u;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
    return (float)(h & 0xffff) / 65535.0f - 0.5f;
}

/* Refused calls, each naming its value: nothing may change. (A step in the
   forward is refused for its missing gradients first; after the sync, for the
   held group.) */
static void refused(vs_ddp* d, const int* iw, int held, int synced)
{
    VT_ERR(vs_ddp_gather(d, 0), VS_ERR_INVALID, "group 0");
    VT_ERR(vs_ddp_gather(d, 7), VS_ERR_INVALID, "ready_group 7");
    int other = held % NL + 1;
    VT_CHECK(vs_ddp_param(d, iw[other - 1]) == NULL && strstr(vs_last_error(), "is not gathered"),
             "a view of ungathered group %d: %s", other, vs_last_error());
    VT_ERR(vs_ddp_step(d, 1e-2), VS_ERR_STATE, synced ? "group 1 is still gathered" : "no synchronized gradients");
}

static int rank_main(vs_world* w, void* arg)
{
    job* jb = (job*)arg;
    vs_mesh* mesh = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = jb->nranks;
    md.dim_names[0] = "DP";
    if (jb->mesh != MESH_DP) {
        md.shape[0] = md.shape[1] = 2;
        md.dim_names[0] = jb->mesh == MESH_NAMED ? "hosts" : "DPR";
        md.dim_names[1] = jb->mesh == MESH_NAMED ? "gpus" : "DPS";
    }
    VT_OK(vs_mesh_init(w, &md, &mesh));
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = mesh;
    dd.zero = (vs_zero_stage)jb->zero;
    dd.zero2_buffers = jb->buffers;
    dd.optim.kind = VS_OPTIM_ADAMW;
    dd.optim.weight_decay = 0.01;
    if (jb->mesh == MESH_NAMED) dd.dp_replicate_dim = "hosts", dd.dp_dim = "gpus";
    vs_ddp* d = NULL;
    VT_OK(vs_ddp_init(&dd, &d));
    if (!d) return 1;
    int iw[NL], ib[NL];
    for (int l = 0; l < NL; l++) {
        int in = dims[l], out = dims[l + 1];
        float wv[16 * 16], bv[16];
        for (int k = 0; k < out * in; k++) wv[k] = hashf(1, (unsigned)l, (unsigned)k) / sqrtf((float)in);
        for (int k = 0; k < out; k++) bv[k] = 0.1f * hashf(2, (unsigned)l, (unsigned)k);
        char wn[16], bn[16];
        snprintf(wn, sizeof wn, "l%d.w", l);
        snprintf(bn, sizeof bn, "l%d.b", l);
        vs_ddp_param_desc pw = {.name = wn, .data = wv, .dtype = VS_F32, .ndim = 2, .shape = {out, in}, .ready_group = l + 1};
        vs_ddp_param_desc pb = {.name = bn, .data = bv, .dtype = VS_F32, .ndim = 1, .shape = {out}, .ready_group = l + 1,
                                .no_decay = 1};
        VT_OK(vs_ddp_add_param(d, &pw, &iw[l]));
        VT_OK(vs_ddp_add_param(d, &pb, &ib[l]));
    }
    VT_OK(vs_ddp_finalize(d));
    int dp = vs_mesh_nranks(mesh), me = vs_mesh_rank(mesh), rows = NB / dp; // HSDP: every DPR x DPS rank its rows
    float act[NL + 1][NB][16], gpre[NB][16], dx[NB][16], dy[NB][16];
    for (int s = 0; s < STEPS; s++) {
        for (int r = 0; r < rows; r++)
            for (int k = 0; k < dims[0]; k++) act[0][r][k] = hashf(3, (unsigned)(s * NB + me * rows + r), (unsigned)k);
        VT_OK(vs_ddp_zero_grad(d));
        for (int l = 0; l < NL; l++) { // forward
            VT_OK(vs_ddp_gather(d, l + 1));
            if (jb->misuse == MIS_REFUSED && s < 2) refused(d, iw, l + 1, 0);
            const float* W = (const float*)vs_ddp_param(d, iw[l]);
            const float* b = (const float*)vs_ddp_param(d, ib[l]);
            if (!W || !b) return 1;
            for (int r = 0; r < rows; r++)
                for (int o = 0; o < dims[l + 1]; o++) {
                    float v = b[o];
                    for (int i = 0; i < dims[l]; i++) v += W[o * dims[l] + i] * act[l][r][i];
                    act[l + 1][r][o] = l < NL - 1 ? tanhf(v) : v;
                }
            if (jb->misuse == MIS_ORDER && l == 1) { // held together, released first-gathered first
                VT_OK(vs_ddp_gather(d, 3));
                VT_OK(vs_ddp_release(d, 2));
                VT_OK(vs_ddp_release(d, 3));
                continue;
            }
            VT_OK(vs_ddp_release(d, l + 1));
            if (jb->misuse == MIS_REFUSED && s < 2) VT_ERR(vs_ddp_release(d, l + 1), VS_ERR_STATE, "not gathered");
        }
        float lsum = 0;
        for (int r = 0; r < rows; r++)
            for (int o = 0; o < dims[NL]; o++) {
                float e = act[NL][r][o] - hashf(4, (unsigned)(s * NB + me * rows + r), (unsigned)o);
                lsum += 0.5f * e * e;
                dy[r][o] = e / (float)rows; // the local mean's: DDP averages over the DP ranks
            }
        for (int l = NL - 1; l >= 0; l--) { // backward
            int in = dims[l], out = dims[l + 1];
            VT_OK(vs_ddp_gather(d, l + 1));
            const float* W = (const float*)vs_ddp_param(d, iw[l]);
            float* gW = (float*)vs_ddp_grad(d, iw[l]);
            float* gb = (float*)vs_ddp_grad(d, ib[l]);
            if (!W || !gW || !gb) return 1;
            for (int r = 0; r < rows; r++) {
                for (int o = 0; o < out; o++) {
                    float g = dy[r][o];
                    if (l < NL - 1) g *= 1 - act[l + 1][r][o] * act[l + 1][r][o];
                    gb[o] += g;
                    for (int i = 0; i < in; i++) gW[o * in + i] += g * act[l][r][i];
                    gpre[r][o] = g;
                }
                for (int i = 0; i < in; i++) {
                    float v = 0;
                    for (int o = 0; o < out; o++) v += W[o * in + i] * gpre[r][o];
                    dx[r][i] = v;
                }
            }
            if (jb->misuse != MIS_FORGET || l != 1) VT_OK(vs_ddp_group_ready(d, l + 1));
            VT_OK(vs_ddp_release(d, l + 1));
            memcpy(dy, dx, sizeof dy);
        }
        VT_OK(vs_ddp_finish_grad_sync(d)); // (MIS_FORGET: reduces group 2 here)
        if (jb->misuse == MIS_REFUSED && s < 2) { // a step with a group held, after the sync
            VT_OK(vs_ddp_gather(d, 1));
            refused(d, iw, 1, 1);
            VT_OK(vs_ddp_release(d, 1));
        }
        VT_OK(vs_ddp_clip_grad_norm(d, 1.0, NULL));
        VT_OK(vs_ddp_step(d, 1e-2));
        float tot = lsum;
        VT_OK(vs_all_reduce(vs_mesh_comm(mesh), &tot, &tot, 1, VS_F32, VS_OP_SUM, NULL));
        if (me == 0) jb->loss[s] = tot / NB;
    }
    for (int pass = 0; pass < 3; pass++) { // the final weights: a read of each layer between steps
        vs_ddp_memory mu;
        VT_OK(vs_ddp_memory_usage(d, &mu));
        if (me == 0) jb->pool[pass] = mu.gathered;
        if (pass == 2) break;
        for (int l = 1; l < NL; l++) { // off the recorded order: the step prefetched group 1
            VT_OK(vs_ddp_gather(d, l + 1));
            const float* W = (const float*)vs_ddp_param(d, iw[l]);
            if (me == 0 && W) memcpy(jb->w[l], W, sizeof(float) * (size_t)(dims[l] * dims[l + 1]));
            VT_OK(vs_ddp_release(d, l + 1));
        }
    }
    VT_OK(vs_ddp_gather(d, 1));
    if (me == 0) memcpy(jb->w[0], vs_ddp_param(d, iw[0]), sizeof(float) * (size_t)(dims[0] * dims[1]));
    VT_OK(vs_ddp_free(d)); // with group 1 gathered: freed with it
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

static job* run(int zero, int mesh, int nranks, int misuse, int buffers)
{
    static job jobs[16];
    static int n;
    job* jb = &jobs[n++ % 16];
    memset(jb, 0, sizeof *jb);
    jb->zero = zero, jb->mesh = mesh, jb->nranks = nranks, jb->misuse = misuse, jb->buffers = buffers;
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = nranks;
    ld.log_level = misuse == MIS_FORGET ? VS_LOG_ERROR : VS_LOG_DEFAULT; // (its out-of-order warning is expected)
    VT_OK(vs_launch_ex(&ld, rank_main, jb));
    return jb;
}

static void close_to(const char* what, const job* a, const job* ref)
{
    double worst = 0;
    for (int s = 0; s < STEPS; s++) {
        VT_CHECK(ref->loss[s] > 0, "%s: the reference's loss at step %d is %g", what, s, ref->loss[s]);
        worst = fmax(worst, fabs(a->loss[s] - ref->loss[s]) / fabs(ref->loss[s]));
    }
    for (int l = 0; l < NL; l++)
        for (int k = 0; k < dims[l] * dims[l + 1]; k++) worst = fmax(worst, fabs(a->w[l][k] - ref->w[l][k]));
    VT_CHECK(worst <= 1e-6, "%s: %.3g from one rank", what, worst);
}

static int rank_pool_full(vs_world* w, void* arg)
{
    (void)arg;
    vs_ddp* d = NULL;
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.world = w;
    dd.zero = VS_ZERO_3;
    VT_OK(vs_ddp_init(&dd, &d));
    int idx[3];
    for (int g = 0; g < 3; g++) {
        char name[16]; // (room for any int: gcc's -Wformat-truncation under -fsanitize=undefined)
        snprintf(name, sizeof name, "p%d", g);
        vs_ddp_param_desc p = {.name = name, .dtype = VS_F32, .ndim = 1, .shape = {64}, .ready_group = g + 1};
        VT_OK(vs_ddp_add_param(d, &p, &idx[g]));
    }
    VT_OK(vs_ddp_finalize(d));
    VT_OK(vs_ddp_zero_grad(d));
    for (int g = 3; g >= 2; g--) VT_CHECK(vs_ddp_grad(d, idx[g - 1]) != NULL, "grad %d: %s", g, vs_last_error());
    // no group marked ready: the third bucket finds the pool (2 buffers) held
    VT_CHECK(vs_ddp_grad(d, idx[0]) == NULL &&
                 strstr(vs_last_error(), "zero2_buffers"),
             "a third gradient with none marked ready: %s", vs_last_error());
    VT_OK(vs_ddp_group_ready(d, 3));
    VT_CHECK(vs_ddp_grad(d, idx[0]) != NULL, "after a group_ready: %s", vs_last_error());
    VT_OK(vs_ddp_finish_grad_sync(d));
    VT_OK(vs_ddp_free(d));
    return 0;
}

int main(void)
{
    job* ref = run(VS_ZERO_0, MESH_DP, 1, MIS_NONE, 0);
    job* dp4 = NULL;
    VT_CASE("README's ZeRO-3 loop: DP4, DPR2 x DPS2 and hosts x gpus within 1e-6 of one rank", {
        dp4 = run(VS_ZERO_3, MESH_DP, 4, MIS_NONE, 0);
        close_to("ZeRO-3 DP4", dp4, ref);
        close_to("HSDP DPR2 x DPS2", run(VS_ZERO_3, MESH_HSDP, 4, MIS_NONE, 0), ref);
        close_to("HSDP hosts x gpus", run(VS_ZERO_3, MESH_NAMED, 4, MIS_NONE, 0), ref);
    });
    VT_CASE("refused misuse in the first steps (group 0, an unknown group, a view ungathered, a step held, release "
            "twice): bit for bit the clean run", {
        const job* a = run(VS_ZERO_3, MESH_DP, 4, MIS_REFUSED, 0);
        VT_CHECK(dp4 && !memcmp(a->loss, dp4->loss, sizeof a->loss) && !memcmp(a->w, dp4->w, sizeof a->w),
                 "the refused calls changed the run");
    });
    VT_CASE("groups released in any order; a forgotten group_ready is reduced by finish_grad_sync: bit for bit", {
        const job* a = run(VS_ZERO_3, MESH_DP, 4, MIS_ORDER, 0);
        const job* b = run(VS_ZERO_3, MESH_DP, 4, MIS_FORGET, 8);
        VT_CHECK(dp4 && !memcmp(a->w, dp4->w, sizeof a->w) && !memcmp(b->w, dp4->w, sizeof b->w) &&
                     !memcmp(b->loss, dp4->loss, sizeof b->loss),
                 "release order %d, forgotten group_ready %d", dp4 && memcmp(a->w, dp4->w, sizeof a->w),
                 dp4 && memcmp(b->w, dp4->w, sizeof b->w));
    });
    VT_CASE("a forgotten group_ready with the staging pool all held: vs_ddp_grad refuses, naming zero2_buffers",
            VT_OK(vs_launch(2, rank_pool_full, NULL)));
    VT_CASE("reads off the recorded order between steps grow the gathered pool at most once; vs_ddp_free with a "
            "group gathered", {
        if (dp4) printf("# gathered pool %zu bytes, %zu after reading two layers off the order, %zu after again\n",
                        dp4->pool[0], dp4->pool[1], dp4->pool[2]);
        VT_CHECK(dp4 && dp4->pool[0] > 0 && dp4->pool[2] == dp4->pool[1] && dp4->pool[1] <= dp4->pool[0] * 3 / 2,
                 "gathered pool %zu, then %zu, then %zu bytes", dp4 ? dp4->pool[0] : 0, dp4 ? dp4->pool[1] : 0,
                 dp4 ? dp4->pool[2] : 0);
    });
    return vt_summary();
}
