/* test_badinput.c - a bad-input sweep over every public function (issues 8 and 19).

   Each entry of the table below calls one public function of vescale_mesh.h,
   vescale_ddp.h, vescale_pipe.h, vescale_ckpt.h or vescale.h with one bad input:
   a NULL pointer, an out-of-range value, an unknown enum, a call in the wrong
   state, a size that overflows. Entries that need live handles run inside
   vs_launch (2 thread ranks with a world, or 4 with a {2, 2} mesh, its DP and TP
   submeshes, and a DDP; 2 with a two-stage pipe; 2 with a DP2 training state of
   a two-layer model, a checkpoint of it and a checkpointer), every rank making
   the same call. Each entry runs in a forked child, so a crash or a hang is recorded
   without ending the sweep. Outcomes:
     clear     an error value (negative result, NULL, NaN, as the header documents)
               and vs_last_error() naming the bad input (a substring per entry);
               for functions that cannot fail: the documented value
     silent    a normal result for bad input
     vague     an error value whose message does not name the input
     crash     the child died on a signal (or a sanitizer stopped it)
     hang      the child ran past a 20 s alarm
     tolerated a function that cannot fail and documents no error value (a getter
               given NULL, a constructor): it did not crash; listed as "# note"
   The sweep fails on any silent, vague, crash or hang outcome.

   Valid inputs near the edges (dim lists with spaces, a shape of INT64_MAX
   sharded over 2 ranks, extreme schedule lengths) must work: badinput/valid_edges.

   Under ASan the children print the report of a crash themselves; huge
   allocations return NULL instead of aborting (allocator_may_return_null below),
   as malloc does without ASan. */
#define VESCALE_IMPLEMENTATION
#include "vescale.h"
#include "vs_test.h"

#include <dirent.h>
#include <sys/stat.h>

#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* Sanitizer runtimes read these when present (they are plain functions otherwise):
   a huge malloc returns NULL as it does without ASan, and UB stops the child, so
   the parent sees it as a crash. */
const char* __asan_default_options(void);
const char* __asan_default_options(void) { return "allocator_may_return_null=1"; }
const char* __tsan_default_options(void);
const char* __tsan_default_options(void) { return "allocator_may_return_null=1"; }
const char* __ubsan_default_options(void);
const char* __ubsan_default_options(void) { return "halt_on_error=1:print_stacktrace=1"; }

/* ASan and TSan reserve terabytes of address space: no RLIMIT_AS under them. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SW_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SW_ASAN 1
#endif
#endif

enum { SW_IGNORED = 0, SW_CLEAR, SW_TOLERATED, SW_VAGUE, SW_SILENT, SW_NONE, SW_SETUP, SW_CRASH, SW_HANG };
static const char* const sw_outcome_names[] = {"ignored", "clear", "tolerated", "vague", "silent",
                                               "no outcome", "setup failed", "crash", "hang"};

/* Fixtures: what the handles of an entry are. */
enum {
    FX_NONE = 0, // no launch: the entry runs on the child's main thread
    FX_W2,       // 2 ranks: world, its comm, a split comm, a freed split comm
    FX_M4,       // 4 ranks: + mesh {2, 2} (DP, TP) with its DP and TP submeshes
    FX_DDP,      // + a DDP (ZeRO-1, AdamW) with parameters "w" [4, 4] and "b" [4], not finalized
    FX_DDPF,     // + the DDP finalized
    FX_PIPE,     // 2 ranks: mesh {2} ("PP"), a two-stage pipe of two units, a 1F1B schedule (2 microbatches) run once
    FX_TRAIN     // 2 ranks: a DP2 training state of the two-layer model, one step taken, saved as <dir>/ck0;
                 // a checkpointer on its mesh
};
static const int sw_fx_ranks[] = {0, 2, 4, 4, 4, 2, 2};

#define SW_DETAIL 300
#define SW_MAX 1200

typedef struct sw_meta {
    const char* area;
    const char* fn;
    const char* input;
    int fx;
} sw_meta;
static sw_meta sw_metas[SW_MAX];
static int sw_nmeta;

typedef struct sw_job sw_job;

typedef struct sw_ctx {
    int listing; // 1: record the entries' metadata; 0: run entry `sel`
    int sel, k;
    sw_job* job;
    vs_world* w;
    vs_comm* comm;  // the world's
    vs_comm* split; // a live split communicator
    vs_comm* freed; // a freed split communicator
    vs_mesh *mesh, *dp, *tp;
    vs_ddp* ddp;
    // FX_PIPE
    vs_pipe_unit punits[2];
    vs_pipe_plan pplan;
    vs_pipe* pipe;
    vs_pipe_sched* sched;
    int probe;           // a bad call a callback makes (sw_probe), 0: none
    int probe_ran;       // it was made
    vs_result probe_r;   // its result and message
    char probe_msg[SW_DETAIL];
    // FX_TRAIN
    vs_train* train;
    vs_ckpt* ck;
    const char* dir; // a temporary folder of the entry's own (every fixture)
    char ck0[300];   // <dir>/ck0: the training state's checkpoint
    int rank;
    float buf[64], buf2[64];
    int outcome;
    char detail[SW_DETAIL];
} sw_ctx;

struct sw_job {
    int sel, fx;
    char dir[256];
    int marks; // logger calls carrying "sw-mark" (atomic)
    int outcome[4];
    char detail[4][SW_DETAIL];
};

static void sw_set(sw_ctx* x, int outcome, const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->detail, sizeof x->detail, fmt, ap);
    va_end(ap);
    x->outcome = outcome;
}

/* The entry's header: lists it, or says whether it is the one to run. */
static int sw_e(sw_ctx* x, const char* area, const char* fn, const char* input, int fx)
{
    int id = x->k++;
    if (x->listing) {
        if (id < SW_MAX) {
            sw_meta m = {area, fn, input, fx};
            sw_metas[id] = m;
        }
        sw_nmeta = x->k;
        return 0;
    }
    return id == x->sel;
}
#define E(area, fn, input, fx) sw_e(x, area, fn, input, fx)

/* "a|b": either substring names the input. */
static int sw_names(const char* msg, const char* needles)
{
    char buf[128];
    const char* p = needles;
    for (;;) {
        const char* bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n >= sizeof buf) n = sizeof buf - 1;
        memcpy(buf, p, n);
        buf[n] = 0;
        if (n && strstr(msg, buf)) return 1;
        if (!bar) return 0;
        p = bar + 1;
    }
}

static void sw_err_outcome(sw_ctx* x, const char* got, const char* needle)
{
    const char* m = vs_last_error();
    if (!m[0])
        sw_set(x, SW_VAGUE, "%s with no message (want one naming '%s')", got, needle);
    else if (!sw_names(m, needle))
        sw_set(x, SW_VAGUE, "%s: '%s' does not name '%s'", got, m, needle);
    else
        sw_set(x, SW_CLEAR, "%s: %s", got, m);
}

/* vs_result, or an int whose negative values are errors. */
static void sw_res(sw_ctx* x, int r, const char* needle)
{
    if (r >= 0) {
        sw_set(x, SW_SILENT, "returned %d%s", r, r == 0 ? " (VS_OK)" : "");
        return;
    }
    sw_err_outcome(x, vs_result_string(r), needle);
}
/* pointers: NULL is the error */
static void sw_ptr(sw_ctx* x, const void* p, const char* needle)
{
    if (p) {
        sw_set(x, SW_SILENT, "returned a pointer (%p)", p);
        return;
    }
    sw_err_outcome(x, "NULL", needle);
}
/* doubles: NaN is the error */
static void sw_nan(sw_ctx* x, double v, const char* needle)
{
    if (v == v) {
        sw_set(x, SW_SILENT, "returned %g", v);
        return;
    }
    sw_err_outcome(x, "NaN", needle);
}

#define R(call, needle)                                                                \
    do {                                                                               \
        vs_clear_error();                                                              \
        sw_res(x, (int)(call), needle);                                                \
    } while (0)
#define RP(call, needle)                                                               \
    do {                                                                               \
        vs_clear_error();                                                              \
        const void* sw_p_ = (const void*)(call);                                       \
        sw_ptr(x, sw_p_, needle);                                                      \
    } while (0)
#define RN(call, needle)                                                               \
    do {                                                                               \
        vs_clear_error();                                                              \
        double sw_v_ = (call);                                                         \
        sw_nan(x, sw_v_, needle);                                                      \
    } while (0)
/* enums: 0 (DEFAULT/INVALID) with a message is the error (the getters' rule) */
static void sw_zero(sw_ctx* x, int v, const char* needle)
{
    if (v != 0) {
        sw_set(x, SW_SILENT, "returned %d", v);
        return;
    }
    sw_err_outcome(x, "0", needle);
}
#define RZ(call, needle)                                                               \
    do {                                                                               \
        vs_clear_error();                                                              \
        sw_zero(x, (int)(call), needle);                                               \
    } while (0)
/* A function that cannot fail gave its documented value (else: silent). */
#define DOC(cond, ...) sw_set(x, (cond) ? SW_CLEAR : SW_SILENT, __VA_ARGS__)
/* A function that cannot fail and documents no error value: it did not crash. */
#define TOL(...) sw_set(x, SW_TOLERATED, __VA_ARGS__)
/* Only this rank's outcome counts (the others take part in the collective). */
#define ONLY_RANK(r)                                                                   \
    do {                                                                               \
        if (x->rank != (r)) x->outcome = SW_IGNORED, x->detail[0] = 0;                 \
    } while (0)

static int sw_noop_rank(vs_world* w, void* arg)
{
    (void)w;
    (void)arg;
    return 0;
}

static vs_result sw_custom_step(const vs_step_args* a)
{
    (void)a;
    return VS_OK;
}

/* Unsets every variable the library reads, so env entries start from nothing. */
static void sw_clean_env(void)
{
    static const char* const vars[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                                       "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK",
                                       "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "VESCALE_LOG",
                                       "VESCALE_TIMEOUT", "VESCALE_TRANSPORT"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

/* One backward pass on the DDP fixture: every gradient 1, synced. */
static vs_result sw_backward(sw_ctx* x)
{
    vs_result r = vs_ddp_zero_grad(x->ddp);
    for (int i = 0; i < vs_ddp_num_params(x->ddp) && !r; i++) {
        float* g = (float*)vs_ddp_grad(x->ddp, i);
        if (!g) return VS_ERR_STATE;
        for (int64_t j = 0; j < vs_ddp_local_numel(x->ddp, i); j++) g[j] = 1.0f;
        r = vs_ddp_grad_ready(x->ddp, i);
    }
    return r ? r : vs_ddp_finish_grad_sync(x->ddp);
}

/* --- the pipe fixture's units: "u0" h = 2 x (x: data), "ploss" mean(h) ----------- */

enum { SW_ROWS = 2, SW_W = 4 };

static vs_result sw_probe(sw_ctx* x, vs_pipe_call* c);

/* strcpy cut to cap (a message may be longer than the detail it goes into). */
static void sw_copy(char* dst, size_t cap, const char* src)
{
    size_t n = strlen(src);
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

static vs_result sw_data(vs_pipe_call* c)
{
    int64_t sh[2] = {SW_ROWS, SW_W};
    float* d;
    vs_result r = vs_pipe_output(c, 0, VS_F32, 2, sh, (void**)&d);
    for (int i = 0; !r && i < SW_ROWS * SW_W; i++) d[i] = (float)(i + c->mb);
    return r;
}

static vs_result sw_u0_fwd(vs_pipe_call* c)
{
    sw_ctx* x = (sw_ctx*)c->user;
    if (x->probe && !x->probe_ran && x->probe < 100) { // a bad call first; then the unit's own work
        x->probe_ran = 1;
        vs_clear_error();
        x->probe_r = sw_probe(x, c);
        sw_copy(x->probe_msg, sizeof x->probe_msg, vs_last_error());
    }
    int64_t sh[2] = {c->in[0].shape[0], SW_W};
    float* h;
    vs_result r = vs_pipe_output(c, 0, VS_F32, 2, sh, (void**)&h);
    for (int64_t i = 0; !r && i < sh[0] * SW_W; i++) h[i] = 2 * ((const float*)c->in[0].data)[i];
    if (!r && x->probe >= 100 && !x->probe_ran) { // bad calls after the unit's output exists
        x->probe_ran = 1;
        vs_clear_error();
        x->probe_r = sw_probe(x, c);
        sw_copy(x->probe_msg, sizeof x->probe_msg, vs_last_error());
    }
    return r;
}

static vs_result sw_u0_bwd(vs_pipe_call* c)
{
    (void)c; // x is data: no input gradient, no parameters
    return VS_OK;
}

static vs_result sw_ploss_fwd(vs_pipe_call* c)
{
    float* l;
    vs_result r = vs_pipe_output(c, 0, VS_F32, 0, NULL, (void**)&l);
    int64_t n = c->in[0].shape[0] * c->in[0].shape[1];
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += ((const float*)c->in[0].data)[i];
    if (!r) *l = (float)(s / (double)n);
    return r;
}

static vs_result sw_ploss_bwd(vs_pipe_call* c)
{
    int64_t n = c->in[0].shape[0] * c->in[0].shape[1];
    float g = ((const float*)c->out[0].grad)[0] / (float)n;
    for (int64_t i = 0; i < n; i++) ((float*)c->in[0].grad)[i] += g;
    return VS_OK;
}

/* --- the training fixture's model: "lin" y = x W (W [4, 4]), "loss" mean (y - t)^2 -- */

static vs_result sw_lin_fwd(vs_pipe_call* c)
{
    const float* W = (const float*)vs_layer(c)->param[0];
    const float* xi = (const float*)c->in[0].data;
    int64_t R = c->in[0].shape[0], sh[2] = {R, SW_W};
    float* y;
    vs_result r = vs_pipe_output(c, 0, VS_F32, 2, sh, (void**)&y);
    for (int64_t i = 0; !r && i < R; i++)
        for (int j = 0; j < SW_W; j++) {
            float a = 0;
            for (int k = 0; k < SW_W; k++) a += xi[i * SW_W + k] * W[k * SW_W + j];
            y[i * SW_W + j] = a;
        }
    return r;
}

static vs_result sw_lin_bwd(vs_pipe_call* c)
{
    float* gW = (float*)vs_layer(c)->grad[0];
    const float* xi = (const float*)c->in[0].data;
    const float* gy = (const float*)c->out[0].grad;
    for (int64_t i = 0; i < c->in[0].shape[0]; i++)
        for (int j = 0; j < SW_W; j++)
            for (int k = 0; k < SW_W; k++) gW[k * SW_W + j] += xi[i * SW_W + k] * gy[i * SW_W + j];
    return VS_OK;
}

static vs_result sw_loss_fwd(vs_pipe_call* c)
{
    const float *y = (const float*)c->in[0].data, *t = (const float*)c->in[1].data;
    int64_t n = c->in[0].shape[0] * SW_W;
    float* l;
    vs_result r = vs_pipe_output(c, 0, VS_F32, 0, NULL, (void**)&l);
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)(y[i] - t[i]) * (y[i] - t[i]);
    if (!r) *l = (float)(s / (double)n);
    return r;
}

static vs_result sw_loss_bwd(vs_pipe_call* c)
{
    const float *y = (const float*)c->in[0].data, *t = (const float*)c->in[1].data;
    int64_t n = c->in[0].shape[0] * SW_W;
    float g = ((const float*)c->out[0].grad)[0];
    for (int64_t i = 0; i < n; i++) ((float*)c->in[0].grad)[i] += g * 2 * (y[i] - t[i]) / (float)n;
    return VS_OK;
}

static const vs_layer_decl sw_layers[2] = {
    {.unit = {.name = "lin", .inputs = "x", .outputs = "y:f32[*,4]", .forward = sw_lin_fwd, .backward = sw_lin_bwd,
              .flops = 32},
     .params = {{.name = "lin.w", .ndim = 2, .shape = {SW_W, SW_W}, .init = {.kind = VS_INIT_NORMAL, .b = 0.1}}},
     .nparams = 1},
    {.unit = {.name = "loss", .inputs = "y,t", .outputs = "loss:f32[]", .forward = sw_loss_fwd,
              .backward = sw_loss_bwd, .flops = 8}},
};
static const vs_model_desc sw_model = {sw_layers, 2, 7};

/* A global batch of 4 rows (x and t, [4, 4] each). */
static float sw_bx[4 * SW_W], sw_bt[4 * SW_W];
static vs_batch sw_batch(void)
{
    vs_batch b;
    memset(&b, 0, sizeof b);
    b.n = 2;
    for (int i = 0; i < 4 * SW_W; i++) sw_bx[i] = (float)(i % 5) * 0.25f, sw_bt[i] = (float)(i % 3) * 0.5f;
    b.name[0] = "x", b.name[1] = "t";
    b.dtype[0] = b.dtype[1] = VS_F32;
    b.ndim[0] = b.ndim[1] = 2;
    b.shape[0][0] = b.shape[1][0] = 4;
    b.shape[0][1] = b.shape[1][1] = SW_W;
    b.data[0] = sw_bx, b.data[1] = sw_bt;
    return b;
}

/* A schedule's text for the two-stage fixture (2 microbatches). */
static const char* const sw_sched_text = "pipe stages=2 chunks=2 mbs=2 place=0,1\n"
                                         "0: F0.0 SF0.0 F0.1 SF0.1 RB0.0 BW0.0 RB0.1 BW0.1 SYNC0 STEP\n"
                                         "1: RF1.0 F1.0 BW1.0 SB1.0 RF1.1 F1.1 BW1.1 SB1.1 SYNC1 STEP\n";


/* ------------------------------------------------------------------------ */
/* The table: one `if (E(area, function, input, fixture)) <call and outcome>;`
   per bad call. */

#define HUGE_F32 (SIZE_MAX / 2)      // elements: x 4 bytes overflows size_t
#define HUGE_F32_1 (SIZE_MAX / 2 + 1)

static void sweep_base(sw_ctx* x)
{
    const char* A = "base";
    if (E(A, "vs_result_string", "code 99", FX_NONE)) {
        const char* s = vs_result_string(99);
        TOL("returned '%s'", s ? s : "(null)");
    }
    if (E(A, "vs_result_string", "code INT_MIN", FX_NONE)) {
        const char* s = vs_result_string(INT_MIN);
        TOL("returned '%s'", s ? s : "(null)");
    }
    if (E(A, "vs_last_error", "before any error", FX_NONE)) DOC(vs_last_error() && !vs_last_error()[0], "empty string");
    if (E(A, "vs_last_backend_code", "before any error", FX_NONE)) TOL("returned %d", vs_last_backend_code());
    if (E(A, "vs_clear_error", "twice", FX_NONE)) {
        vs_clear_error();
        vs_clear_error();
        DOC(!vs_last_error()[0], "message empty");
    }
    if (E(A, "vs_set_error", "fmt NULL", FX_NONE)) {
        vs_result r = vs_set_error(VS_ERR_IO, NULL);
        TOL("returned %d, message '%s'", r, vs_last_error());
    }
    if (E(A, "vs_version", "(no input)", FX_NONE))
        DOC(vs_version() == VESCALE_VERSION_NUMBER, "returned %d (header %d)", vs_version(), VESCALE_VERSION_NUMBER);
    if (E(A, "vs_version_string", "(no input)", FX_NONE))
        DOC(!strcmp(vs_version_string(), VESCALE_VERSION_STRING), "returned '%s'", vs_version_string());
    if (E(A, "vs_ddp_version", "(no input)", FX_NONE))
        DOC(vs_ddp_version() == VESCALE_VERSION_NUMBER, "returned %d", vs_ddp_version());
    if (E(A, "vs_dtype_size", "dtype 99", FX_NONE)) DOC(vs_dtype_size((vs_dtype)99) == 0, "returned %zu", vs_dtype_size((vs_dtype)99));
    if (E(A, "vs_dtype_size", "dtype -1", FX_NONE)) DOC(vs_dtype_size((vs_dtype)-1) == 0, "returned %zu", vs_dtype_size((vs_dtype)-1));
    if (E(A, "vs_dtype_size", "VS_DTYPE_INVALID", FX_NONE)) DOC(vs_dtype_size(VS_DTYPE_INVALID) == 0, "returned %zu", vs_dtype_size(VS_DTYPE_INVALID));
    if (E(A, "vs_dtype_name", "dtype 99", FX_NONE)) DOC(!strcmp(vs_dtype_name((vs_dtype)99), "invalid"), "returned '%s'", vs_dtype_name((vs_dtype)99));
    if (E(A, "vs_dtype_name", "dtype -1", FX_NONE)) DOC(!strcmp(vs_dtype_name((vs_dtype)-1), "invalid"), "returned '%s'", vs_dtype_name((vs_dtype)-1));
    if (E(A, "vs_op_name", "op 99", FX_NONE)) TOL("returned '%s'", vs_op_name((vs_op)99));
    if (E(A, "vs_op_name", "op -1", FX_NONE)) TOL("returned '%s'", vs_op_name((vs_op)-1));
    if (E(A, "vs_transport_name", "transport 99", FX_NONE)) TOL("returned '%s'", vs_transport_name((vs_transport)99));
    if (E(A, "vs_transport_available", "transport 99", FX_NONE))
        DOC(vs_transport_available((vs_transport)99) == 0, "returned %d", vs_transport_available((vs_transport)99));
    if (E(A, "vs_transport_available", "transport -1", FX_NONE))
        DOC(vs_transport_available((vs_transport)-1) == 0, "returned %d", vs_transport_available((vs_transport)-1));
    // conversions: IEEE special values keep their meaning (round to nearest even)
    if (E(A, "vs_f32_to_f16", "NaN", FX_NONE)) {
        uint16_t h = vs_f32_to_f16(NAN);
        DOC((h & 0x7c00) == 0x7c00 && (h & 0x3ff), "returned 0x%04x", h);
    }
    if (E(A, "vs_f32_to_f16", "1e10 (overflow)", FX_NONE)) {
        uint16_t h = vs_f32_to_f16(1e10f);
        DOC(h == 0x7c00, "returned 0x%04x (want +inf 0x7c00)", h);
    }
    if (E(A, "vs_f32_to_f16", "-inf", FX_NONE)) {
        uint16_t h = vs_f32_to_f16(-INFINITY);
        DOC(h == 0xfc00, "returned 0x%04x", h);
    }
    if (E(A, "vs_f16_to_f32", "0x7e00 (NaN)", FX_NONE)) {
        float f = vs_f16_to_f32(0x7e00);
        DOC(f != f, "returned %g", (double)f);
    }
    if (E(A, "vs_f32_to_bf16", "NaN", FX_NONE)) {
        uint16_t h = vs_f32_to_bf16(NAN);
        DOC((h & 0x7f80) == 0x7f80 && (h & 0x7f), "returned 0x%04x", h);
    }
    if (E(A, "vs_f32_to_bf16", "FLT_MAX (rounds to inf)", FX_NONE)) {
        uint16_t h = vs_f32_to_bf16(3.4028234e38f);
        DOC(h == 0x7f80, "returned 0x%04x", h);
    }
    if (E(A, "vs_bf16_to_f32", "0xffc1 (NaN)", FX_NONE)) {
        float f = vs_bf16_to_f32(0xffc1);
        DOC(f != f, "returned %g", (double)f);
    }
    if (E(A, "vs_replicate", "(no input)", FX_NONE)) DOC(vs_replicate().kind == VS_PLACE_REPLICATE, "kind %d", (int)vs_replicate().kind);
    if (E(A, "vs_shard", "dim -1", FX_NONE)) TOL("returned Shard(%d): vs_layout_check rejects it", vs_shard(-1).dim);
    if (E(A, "vs_partial", "op 99", FX_NONE)) TOL("returned Partial(op %d): vs_layout_check rejects it", (int)vs_partial((vs_op)99).op);
}

static void sweep_comm(sw_ctx* x)
{
    const char* A = "comm";
    float* b = x->buf;
    float* b2 = x->buf2;
    size_t cnt[4] = {2, 2, 2, 2}, dsp[4] = {0, 2, 4, 6};
    static union {
        char bytes[sizeof(vs_comm) + sizeof(vs_work) + 64];
        double align;
    } junk; // zeros: not a handle
    vs_comm* jc = (vs_comm*)(void*)junk.bytes;
    vs_work* jw = (vs_work*)(void*)junk.bytes;

    if (E(A, "vs_comm_rank", "comm NULL", FX_NONE)) R(vs_comm_rank(NULL), "comm is NULL");
    if (E(A, "vs_comm_size", "comm NULL", FX_NONE)) R(vs_comm_size(NULL), "comm is NULL");
    if (E(A, "vs_comm_transport", "comm NULL", FX_NONE)) RZ(vs_comm_transport(NULL), "comm is NULL");
    if (E(A, "vs_comm_stream", "comm NULL", FX_NONE)) RP(vs_comm_stream(NULL), "comm is NULL");
    if (E(A, "vs_comm_device", "comm NULL", FX_NONE)) RZ(vs_comm_device(NULL), "comm is NULL");
    if (E(A, "vs_comm_device", "freed comm", FX_W2)) RZ(vs_comm_device(x->freed), "already freed");
    if (E(A, "vs_comm_rank", "freed comm", FX_W2)) R(vs_comm_rank(x->freed), "already freed");
    if (E(A, "vs_comm_size", "freed comm", FX_W2)) R(vs_comm_size(x->freed), "already freed");
    if (E(A, "vs_comm_set_timeout", "comm NULL", FX_NONE)) R(vs_comm_set_timeout(NULL, 1), "comm");
    if (E(A, "vs_comm_set_timeout", "-1 s", FX_W2)) R(vs_comm_set_timeout(x->comm, -1), "timeout");
    if (E(A, "vs_comm_set_timeout", "NaN s", FX_W2)) R(vs_comm_set_timeout(x->comm, NAN), "timeout");
    if (E(A, "vs_comm_set_timeout", "-inf s", FX_W2)) R(vs_comm_set_timeout(x->comm, -INFINITY), "timeout");
    if (E(A, "vs_comm_set_timeout", "freed comm", FX_W2)) R(vs_comm_set_timeout(x->freed, 1), "freed");
    if (E(A, "vs_comm_set_stream", "comm NULL", FX_NONE)) R(vs_comm_set_stream(NULL, NULL), "comm");
    if (E(A, "vs_comm_set_stream", "threads comm (no streams)", FX_W2)) R(vs_comm_set_stream(x->comm, (void*)x), "stream");
    if (E(A, "vs_comm_nccl", "comm NULL", FX_NONE)) RP(vs_comm_nccl(NULL), "comm is NULL");
    if (E(A, "vs_comm_nccl", "freed comm", FX_W2)) RP(vs_comm_nccl(x->freed), "already freed");
    if (E(A, "vs_comm_nccl", "threads comm", FX_W2)) RP(vs_comm_nccl(x->comm), "threads communicator");
    if (E(A, "vs_comm_mpi", "comm NULL", FX_NONE)) RP(vs_comm_mpi(NULL), "comm is NULL");
    if (E(A, "vs_comm_mpi", "threads comm", FX_W2)) RP(vs_comm_mpi(x->comm), "threads communicator");
    if (E(A, "vs_comm_nccl_begin", "comm NULL", FX_NONE)) {
        void* o;
        R(vs_comm_nccl_begin(NULL, &o), "comm");
    }
    if (E(A, "vs_comm_nccl_begin", "nccl_comm NULL", FX_W2)) R(vs_comm_nccl_begin(x->comm, NULL), "nccl_comm");
    if (E(A, "vs_comm_nccl_begin", "threads comm", FX_W2)) {
        void* o;
        R(vs_comm_nccl_begin(x->comm, &o), "threads");
    }
    if (E(A, "vs_comm_nccl_end", "comm NULL", FX_NONE)) R(vs_comm_nccl_end(NULL), "comm");
    if (E(A, "vs_comm_nccl_end", "threads comm", FX_W2)) R(vs_comm_nccl_end(x->comm), "threads");
    if (E(A, "vs_comm_split", "comm NULL", FX_NONE)) {
        vs_comm* o;
        R(vs_comm_split(NULL, 0, 0, &o), "comm");
    }
    if (E(A, "vs_comm_split", "out NULL", FX_W2)) R(vs_comm_split(x->comm, 0, 0, NULL), "out");
    if (E(A, "vs_comm_split", "color -5", FX_W2)) {
        vs_comm* o;
        R(vs_comm_split(x->comm, -5, 0, &o), "color -5");
    }
    if (E(A, "vs_comm_split", "color INT_MIN", FX_W2)) {
        vs_comm* o;
        R(vs_comm_split(x->comm, INT_MIN, 0, &o), "color");
    }
    if (E(A, "vs_comm_split", "freed comm", FX_W2)) {
        vs_comm* o;
        R(vs_comm_split(x->freed, 0, 0, &o), "freed");
    }
    if (E(A, "vs_comm_split", "inside a group", FX_W2)) {
        vs_comm* o;
        vs_group_start(x->comm);
        R(vs_comm_split(x->comm, 0, 0, &o), "group");
        vs_group_end(x->comm, NULL);
    }
    if (E(A, "vs_comm_free", "comm NULL", FX_NONE)) DOC(vs_comm_free(NULL) == VS_OK, "returned VS_OK (documented)");
    if (E(A, "vs_comm_free", "world comm", FX_W2)) R(vs_comm_free(x->comm), "world");
    if (E(A, "vs_comm_free", "mesh comm", FX_M4)) R(vs_comm_free(vs_mesh_comm(x->dp)), "mesh");
    if (E(A, "vs_comm_free", "freed twice", FX_W2)) R(vs_comm_free(x->freed), "freed");
    if (E(A, "vs_comm_free", "not a handle", FX_W2)) R(vs_comm_free(jc), "not a live");
    if (E(A, "vs_comm_free", "group open", FX_W2)) {
        vs_group_start(x->split);
        R(vs_comm_free(x->split), "group");
        vs_group_end(x->split, NULL);
    }
    if (E(A, "vs_comm_abort", "comm NULL", FX_NONE)) R(vs_comm_abort(NULL), "comm");
    if (E(A, "vs_comm_abort", "freed comm", FX_W2)) R(vs_comm_abort(x->freed), "freed");
    if (E(A, "vs_comm_abort_with", "comm NULL", FX_NONE)) R(vs_comm_abort_with(NULL, VS_ERR_IO, "m"), "comm");
    if (E(A, "vs_comm_abort_with", "freed comm", FX_W2)) R(vs_comm_abort_with(x->freed, VS_ERR_IO, "m"), "freed");
    if (E(A, "vs_comm_abort_with", "why VS_OK", FX_W2)) R(vs_comm_abort_with(x->comm, VS_OK, "m"), "why 0");
    if (E(A, "vs_comm_abort_with", "why 5", FX_W2)) R(vs_comm_abort_with(x->comm, (vs_result)5, NULL), "why 5");

    // all-reduce: each argument in turn
    if (E(A, "vs_all_reduce", "comm NULL", FX_NONE)) R(vs_all_reduce(NULL, b, b, 4, VS_F32, VS_OP_SUM, NULL), "comm");
    if (E(A, "vs_all_reduce", "send NULL", FX_W2)) R(vs_all_reduce(x->comm, NULL, b, 4, VS_F32, VS_OP_SUM, NULL), "send");
    if (E(A, "vs_all_reduce", "recv NULL", FX_W2)) R(vs_all_reduce(x->comm, b, NULL, 4, VS_F32, VS_OP_SUM, NULL), "recv");
    if (E(A, "vs_all_reduce", "dtype 99", FX_W2)) R(vs_all_reduce(x->comm, b, b, 4, (vs_dtype)99, VS_OP_SUM, NULL), "dtype 99");
    if (E(A, "vs_all_reduce", "dtype INVALID", FX_W2)) R(vs_all_reduce(x->comm, b, b, 4, VS_DTYPE_INVALID, VS_OP_SUM, NULL), "dtype 0");
    if (E(A, "vs_all_reduce", "op 99", FX_W2)) R(vs_all_reduce(x->comm, b, b, 4, VS_F32, (vs_op)99, NULL), "op 99");
    if (E(A, "vs_all_reduce", "op -1", FX_W2)) R(vs_all_reduce(x->comm, b, b, 4, VS_F32, (vs_op)-1, NULL), "op -1");
    if (E(A, "vs_all_reduce", "count SIZE_MAX/2 f32", FX_W2)) R(vs_all_reduce(x->comm, b, b, HUGE_F32, VS_F32, VS_OP_SUM, NULL), "overflows");
    if (E(A, "vs_all_reduce", "count SIZE_MAX f64", FX_W2)) R(vs_all_reduce(x->comm, b, b, SIZE_MAX, VS_F64, VS_OP_SUM, NULL), "overflows");
    if (E(A, "vs_all_reduce", "freed comm", FX_W2)) R(vs_all_reduce(x->freed, b, b, 4, VS_F32, VS_OP_SUM, NULL), "freed");
    if (E(A, "vs_all_reduce", "not a handle", FX_W2)) R(vs_all_reduce(jc, b, b, 4, VS_F32, VS_OP_SUM, NULL), "not a live");
    if (E(A, "vs_all_reduce", "work handle inside a group", FX_W2)) {
        vs_work* wk = NULL;
        vs_group_start(x->comm);
        R(vs_all_reduce(x->comm, b, b, 4, VS_F32, VS_OP_SUM, &wk), "group");
        vs_group_end(x->comm, NULL);
    }
    if (E(A, "vs_reduce", "comm NULL", FX_NONE)) R(vs_reduce(NULL, b, b, 4, VS_F32, VS_OP_SUM, 0, NULL), "comm");
    if (E(A, "vs_reduce", "root -1", FX_W2)) R(vs_reduce(x->comm, b, b, 4, VS_F32, VS_OP_SUM, -1, NULL), "root -1");
    if (E(A, "vs_reduce", "root 2 of 2", FX_W2)) R(vs_reduce(x->comm, b, b, 4, VS_F32, VS_OP_SUM, 2, NULL), "root 2");
    if (E(A, "vs_reduce", "root INT_MAX", FX_W2)) R(vs_reduce(x->comm, b, b, 4, VS_F32, VS_OP_SUM, INT_MAX, NULL), "root");
    if (E(A, "vs_reduce", "op 99", FX_W2)) R(vs_reduce(x->comm, b, b, 4, VS_F32, (vs_op)99, 0, NULL), "op 99");
    if (E(A, "vs_reduce", "dtype 99", FX_W2)) R(vs_reduce(x->comm, b, b, 4, (vs_dtype)99, VS_OP_SUM, 0, NULL), "dtype 99");
    if (E(A, "vs_reduce", "send NULL", FX_W2)) R(vs_reduce(x->comm, NULL, b, 4, VS_F32, VS_OP_SUM, 0, NULL), "send");
    if (E(A, "vs_reduce", "recv NULL on the root", FX_W2)) {
        R(vs_reduce(x->comm, b, NULL, 4, VS_F32, VS_OP_SUM, 0, NULL), "recv");
        ONLY_RANK(0);
    }
    if (E(A, "vs_reduce", "count SIZE_MAX/2 f32", FX_W2)) R(vs_reduce(x->comm, b, b, HUGE_F32, VS_F32, VS_OP_SUM, 0, NULL), "overflows");
    if (E(A, "vs_broadcast", "comm NULL", FX_NONE)) R(vs_broadcast(NULL, b, b, 4, VS_F32, 0, NULL), "comm");
    if (E(A, "vs_broadcast", "root -1", FX_W2)) R(vs_broadcast(x->comm, b, b, 4, VS_F32, -1, NULL), "root -1");
    if (E(A, "vs_broadcast", "root 7 of 2", FX_W2)) R(vs_broadcast(x->comm, b, b, 4, VS_F32, 7, NULL), "root 7");
    if (E(A, "vs_broadcast", "dtype 99", FX_W2)) R(vs_broadcast(x->comm, b, b, 4, (vs_dtype)99, 0, NULL), "dtype 99");
    if (E(A, "vs_broadcast", "recv NULL", FX_W2)) R(vs_broadcast(x->comm, b, NULL, 4, VS_F32, 0, NULL), "recv");
    if (E(A, "vs_broadcast", "send NULL on the root", FX_W2)) {
        R(vs_broadcast(x->comm, NULL, b, 4, VS_F32, 0, NULL), "send");
        ONLY_RANK(0);
    }
    if (E(A, "vs_broadcast", "count SIZE_MAX/2 f32", FX_W2)) R(vs_broadcast(x->comm, b, b, HUGE_F32, VS_F32, 0, NULL), "overflows");
    if (E(A, "vs_all_gather", "comm NULL", FX_NONE)) R(vs_all_gather(NULL, b, b2, 4, VS_F32, NULL), "comm");
    if (E(A, "vs_all_gather", "send NULL", FX_W2)) R(vs_all_gather(x->comm, NULL, b2, 4, VS_F32, NULL), "send");
    if (E(A, "vs_all_gather", "recv NULL", FX_W2)) R(vs_all_gather(x->comm, b, NULL, 4, VS_F32, NULL), "recv");
    if (E(A, "vs_all_gather", "dtype 99", FX_W2)) R(vs_all_gather(x->comm, b, b2, 4, (vs_dtype)99, NULL), "dtype 99");
    if (E(A, "vs_all_gather", "count SIZE_MAX/2+1 f32", FX_W2)) R(vs_all_gather(x->comm, b, b2, HUGE_F32_1, VS_F32, NULL), "overflows");
    if (E(A, "vs_all_gather", "count SIZE_MAX/4 f32 x 2 ranks", FX_W2)) R(vs_all_gather(x->comm, b, b2, SIZE_MAX / 4, VS_F32, NULL), "overflows");
    if (E(A, "vs_all_gather", "freed comm", FX_W2)) R(vs_all_gather(x->freed, b, b2, 4, VS_F32, NULL), "freed");
    if (E(A, "vs_all_gatherv", "comm NULL", FX_NONE)) R(vs_all_gatherv(NULL, b, b2, cnt, NULL, VS_F32, NULL), "comm");
    if (E(A, "vs_all_gatherv", "counts NULL", FX_W2)) R(vs_all_gatherv(x->comm, b, b2, NULL, NULL, VS_F32, NULL), "counts");
    if (E(A, "vs_all_gatherv", "overlapping displs {0, 1}", FX_W2)) {
        size_t d2[2] = {0, 1};
        R(vs_all_gatherv(x->comm, b, b2, cnt, d2, VS_F32, NULL), "overlap");
    }
    if (E(A, "vs_all_gatherv", "equal displs {3, 3}", FX_W2)) {
        size_t d2[2] = {3, 3};
        R(vs_all_gatherv(x->comm, b, b2, cnt, d2, VS_F32, NULL), "overlap");
    }
    if (E(A, "vs_all_gatherv", "displ SIZE_MAX", FX_W2)) {
        size_t d2[2] = {0, SIZE_MAX};
        R(vs_all_gatherv(x->comm, b, b2, cnt, d2, VS_F32, NULL), "overflows");
    }
    if (E(A, "vs_all_gatherv", "counts {SIZE_MAX/8, SIZE_MAX/8} f32", FX_W2)) {
        size_t c2[2] = {SIZE_MAX / 8, SIZE_MAX / 8};
        R(vs_all_gatherv(x->comm, b, b2, c2, NULL, VS_F32, NULL), "overflows");
    }
    if (E(A, "vs_all_gatherv", "recv NULL", FX_W2)) R(vs_all_gatherv(x->comm, b, NULL, cnt, NULL, VS_F32, NULL), "recv");
    if (E(A, "vs_all_gatherv", "send NULL", FX_W2)) R(vs_all_gatherv(x->comm, NULL, b2, cnt, NULL, VS_F32, NULL), "send");
    if (E(A, "vs_all_gatherv", "dtype 99", FX_W2)) R(vs_all_gatherv(x->comm, b, b2, cnt, NULL, (vs_dtype)99, NULL), "dtype 99");
    if (E(A, "vs_reduce_scatter", "comm NULL", FX_NONE)) R(vs_reduce_scatter(NULL, b, b2, 4, VS_F32, VS_OP_SUM, NULL), "comm");
    if (E(A, "vs_reduce_scatter", "send NULL", FX_W2)) R(vs_reduce_scatter(x->comm, NULL, b2, 4, VS_F32, VS_OP_SUM, NULL), "send");
    if (E(A, "vs_reduce_scatter", "recv NULL", FX_W2)) R(vs_reduce_scatter(x->comm, b, NULL, 4, VS_F32, VS_OP_SUM, NULL), "recv");
    if (E(A, "vs_reduce_scatter", "op 99", FX_W2)) R(vs_reduce_scatter(x->comm, b, b2, 4, VS_F32, (vs_op)99, NULL), "op 99");
    if (E(A, "vs_reduce_scatter", "dtype 99", FX_W2)) R(vs_reduce_scatter(x->comm, b, b2, 4, (vs_dtype)99, VS_OP_SUM, NULL), "dtype 99");
    if (E(A, "vs_reduce_scatter", "count SIZE_MAX/2+1 f32", FX_W2)) R(vs_reduce_scatter(x->comm, b, b2, HUGE_F32_1, VS_F32, VS_OP_SUM, NULL), "overflows");
    if (E(A, "vs_reduce_scatterv", "comm NULL", FX_NONE)) R(vs_reduce_scatterv(NULL, b, b2, cnt, VS_F32, VS_OP_SUM, NULL), "comm");
    if (E(A, "vs_reduce_scatterv", "counts NULL", FX_W2)) R(vs_reduce_scatterv(x->comm, b, b2, NULL, VS_F32, VS_OP_SUM, NULL), "counts");
    if (E(A, "vs_reduce_scatterv", "counts {SIZE_MAX, 1}", FX_W2)) {
        size_t c2[2] = {SIZE_MAX, 1};
        R(vs_reduce_scatterv(x->comm, b, b2, c2, VS_F32, VS_OP_SUM, NULL), "overflows");
    }
    if (E(A, "vs_reduce_scatterv", "op 99", FX_W2)) R(vs_reduce_scatterv(x->comm, b, b2, cnt, VS_F32, (vs_op)99, NULL), "op 99");
    if (E(A, "vs_reduce_scatterv", "send NULL", FX_W2)) R(vs_reduce_scatterv(x->comm, NULL, b2, cnt, VS_F32, VS_OP_SUM, NULL), "send");
    if (E(A, "vs_all_to_all", "comm NULL", FX_NONE)) R(vs_all_to_all(NULL, b, b2, 2, VS_F32, NULL), "comm");
    if (E(A, "vs_all_to_all", "send NULL", FX_W2)) R(vs_all_to_all(x->comm, NULL, b2, 2, VS_F32, NULL), "send");
    if (E(A, "vs_all_to_all", "recv NULL", FX_W2)) R(vs_all_to_all(x->comm, b, NULL, 2, VS_F32, NULL), "recv");
    if (E(A, "vs_all_to_all", "in place", FX_W2)) R(vs_all_to_all(x->comm, b, b, 2, VS_F32, NULL), "in place");
    if (E(A, "vs_all_to_all", "dtype 99", FX_W2)) R(vs_all_to_all(x->comm, b, b2, 2, (vs_dtype)99, NULL), "dtype 99");
    if (E(A, "vs_all_to_all", "count SIZE_MAX/2 f32", FX_W2)) R(vs_all_to_all(x->comm, b, b2, HUGE_F32, VS_F32, NULL), "overflows");
    if (E(A, "vs_all_to_allv", "comm NULL", FX_NONE)) R(vs_all_to_allv(NULL, b, cnt, NULL, b2, cnt, NULL, VS_F32, NULL), "comm");
    if (E(A, "vs_all_to_allv", "send_counts NULL", FX_W2)) R(vs_all_to_allv(x->comm, b, NULL, NULL, b2, cnt, NULL, VS_F32, NULL), "send_counts");
    if (E(A, "vs_all_to_allv", "recv_counts NULL", FX_W2)) R(vs_all_to_allv(x->comm, b, cnt, NULL, b2, NULL, NULL, VS_F32, NULL), "recv_counts");
    if (E(A, "vs_all_to_allv", "overlapping recv_displs", FX_W2)) {
        size_t d2[2] = {0, 1};
        R(vs_all_to_allv(x->comm, b, cnt, dsp, b2, cnt, d2, VS_F32, NULL), "overlap");
    }
    if (E(A, "vs_all_to_allv", "send_displ SIZE_MAX", FX_W2)) {
        size_t d2[2] = {0, SIZE_MAX};
        R(vs_all_to_allv(x->comm, b, cnt, d2, b2, cnt, dsp, VS_F32, NULL), "overflows");
    }
    if (E(A, "vs_all_to_allv", "dtype 99", FX_W2)) R(vs_all_to_allv(x->comm, b, cnt, NULL, b2, cnt, NULL, (vs_dtype)99, NULL), "dtype 99");
    if (E(A, "vs_barrier", "comm NULL", FX_NONE)) R(vs_barrier(NULL, NULL), "comm");
    if (E(A, "vs_barrier", "freed comm", FX_W2)) R(vs_barrier(x->freed, NULL), "freed");
    if (E(A, "vs_barrier", "not a handle", FX_W2)) R(vs_barrier(jc, NULL), "not a live");
    if (E(A, "vs_send", "comm NULL", FX_NONE)) R(vs_send(NULL, b, 4, VS_F32, 1, NULL), "comm");
    if (E(A, "vs_send", "peer -1", FX_W2)) R(vs_send(x->comm, b, 4, VS_F32, -1, NULL), "peer -1");
    if (E(A, "vs_send", "peer 2 of 2", FX_W2)) R(vs_send(x->comm, b, 4, VS_F32, 2, NULL), "peer 2");
    if (E(A, "vs_send", "buf NULL", FX_W2)) R(vs_send(x->comm, NULL, 4, VS_F32, 1 - x->rank, NULL), "buffer");
    if (E(A, "vs_send", "dtype 99", FX_W2)) R(vs_send(x->comm, b, 4, (vs_dtype)99, 1 - x->rank, NULL), "dtype 99");
    if (E(A, "vs_send", "count SIZE_MAX/2 f32", FX_W2)) R(vs_send(x->comm, b, HUGE_F32, VS_F32, 1 - x->rank, NULL), "overflows");
    if (E(A, "vs_send", "freed comm", FX_W2)) R(vs_send(x->freed, b, 4, VS_F32, 0, NULL), "freed");
    if (E(A, "vs_recv", "comm NULL", FX_NONE)) R(vs_recv(NULL, b, 4, VS_F32, 1, NULL), "comm");
    if (E(A, "vs_recv", "peer -1", FX_W2)) R(vs_recv(x->comm, b, 4, VS_F32, -1, NULL), "peer -1");
    if (E(A, "vs_recv", "peer INT_MAX", FX_W2)) R(vs_recv(x->comm, b, 4, VS_F32, INT_MAX, NULL), "peer");
    if (E(A, "vs_recv", "buf NULL", FX_W2)) R(vs_recv(x->comm, NULL, 4, VS_F32, 1 - x->rank, NULL), "buffer");
    if (E(A, "vs_recv", "dtype 99", FX_W2)) R(vs_recv(x->comm, b, 4, (vs_dtype)99, 1 - x->rank, NULL), "dtype 99");
    if (E(A, "vs_recv", "count SIZE_MAX f32", FX_W2)) R(vs_recv(x->comm, b, SIZE_MAX, VS_F32, 1 - x->rank, NULL), "overflows");
    if (E(A, "vs_group_start", "comm NULL", FX_NONE)) R(vs_group_start(NULL), "comm");
    if (E(A, "vs_group_start", "freed comm", FX_W2)) R(vs_group_start(x->freed), "freed");
    if (E(A, "vs_group_end", "comm NULL", FX_NONE)) R(vs_group_end(NULL, NULL), "comm");
    if (E(A, "vs_group_end", "without vs_group_start", FX_W2)) R(vs_group_end(x->comm, NULL), "no group");
    if (E(A, "vs_group_end", "twice after one start", FX_W2)) {
        vs_group_start(x->comm);
        vs_group_end(x->comm, NULL);
        R(vs_group_end(x->comm, NULL), "no group");
    }
    if (E(A, "vs_wait", "work NULL", FX_NONE)) R(vs_wait(NULL), "work");
    if (E(A, "vs_wait", "waited twice", FX_W2)) {
        vs_work* wk = NULL;
        vs_all_reduce(x->comm, b, b, 4, VS_F32, VS_OP_SUM, &wk);
        vs_wait(wk);
        R(vs_wait(wk), "already freed");
    }
    if (E(A, "vs_wait", "not a handle", FX_W2)) R(vs_wait(jw), "not a live");
    if (E(A, "vs_test", "work NULL", FX_NONE)) {
        int done = 0;
        R(vs_test(NULL, &done), "work");
    }
    if (E(A, "vs_test", "done NULL", FX_W2)) {
        vs_work* wk = NULL;
        vs_all_reduce(x->comm, b, b, 4, VS_F32, VS_OP_SUM, &wk);
        R(vs_test(wk, NULL), "done");
        vs_wait(wk);
    }
    if (E(A, "vs_test", "after vs_wait", FX_W2)) {
        vs_work* wk = NULL;
        int done = 0;
        vs_all_reduce(x->comm, b, b, 4, VS_F32, VS_OP_SUM, &wk);
        vs_wait(wk);
        R(vs_test(wk, &done), "already freed");
    }
}

static void sweep_mesh(sw_ctx* x)
{
    const char* A = "mesh";
    vs_mesh* o = NULL;
    int co[VS_MESH_MAX_DIMS] = {0}, r = 0, n = 0, g = 0, gs = 0, ranks[16];
#define MESH_INIT(...) vs_mesh_init(x->w, &(vs_mesh_desc){__VA_ARGS__}, &o)
    if (E(A, "vs_mesh_init", "world NULL", FX_NONE)) R(vs_mesh_init(NULL, &(vs_mesh_desc){.shape = {1}}, &o), "world");
    if (E(A, "vs_mesh_init", "desc NULL", FX_W2)) R(vs_mesh_init(x->w, NULL, &o), "desc");
    if (E(A, "vs_mesh_init", "out NULL", FX_W2)) R(vs_mesh_init(x->w, &(vs_mesh_desc){.shape = {2}}, NULL), "out");
    if (E(A, "vs_mesh_init", "shape {2, 0, 2}", FX_M4)) R(MESH_INIT(.shape = {2, 0, 2}), "shape[1]");
    if (E(A, "vs_mesh_init", "shape {0, 4}", FX_M4)) R(MESH_INIT(.shape = {0, 4}), "shape");
    if (E(A, "vs_mesh_init", "shape {} (empty)", FX_M4)) R(MESH_INIT(.ndims = 0), "empty");
    if (E(A, "vs_mesh_init", "shape {-2, -2}", FX_M4)) R(MESH_INIT(.shape = {-2, -2}), "shape[0] = -2");
    if (E(A, "vs_mesh_init", "shape {3} (3 ranks of 4)", FX_M4)) R(MESH_INIT(.shape = {3}), "3 ranks");
    if (E(A, "vs_mesh_init", "shape {65536, 65536}", FX_M4)) R(MESH_INIT(.shape = {65536, 65536}), "too large");
    if (E(A, "vs_mesh_init", "shape {INT_MAX, INT_MAX}", FX_M4)) R(MESH_INIT(.shape = {INT_MAX, INT_MAX}), "too large");
    if (E(A, "vs_mesh_init", "ndims 9", FX_M4)) R(MESH_INIT(.shape = {4}, .ndims = 9), "ndims 9");
    if (E(A, "vs_mesh_init", "ndims -1", FX_M4)) R(MESH_INIT(.shape = {4}, .ndims = -1), "ndims -1");
    if (E(A, "vs_mesh_init", "ndims 2, shape {4, 0}", FX_M4)) R(MESH_INIT(.shape = {4, 0}, .ndims = 2), "shape[1] = 0");
    if (E(A, "vs_mesh_init", "dim name with a space 'D P'", FX_M4)) R(MESH_INIT(.shape = {4}, .dim_names = {"D P"}), "D P");
    if (E(A, "vs_mesh_init", "dim name with a comma", FX_M4)) R(MESH_INIT(.shape = {4}, .dim_names = {"A,B"}), "A,B");
    if (E(A, "vs_mesh_init", "dim name ''", FX_M4)) R(MESH_INIT(.shape = {4}, .dim_names = {""}), "name");
    if (E(A, "vs_mesh_init", "dim name of 40 chars", FX_M4))
        R(MESH_INIT(.shape = {4}, .dim_names = {"ABCDEFGHIJABCDEFGHIJABCDEFGHIJABCDEFGHIJ"}), "ABCDEFGHIJ");
    if (E(A, "vs_mesh_init", "dim name twice", FX_M4)) R(MESH_INIT(.shape = {2, 2}, .dim_names = {"X", "X"}), "twice");
    if (E(A, "vs_mesh_init", "4 dims without names", FX_M4)) R(MESH_INIT(.shape = {1, 1, 2, 2}), "no name");
    if (E(A, "vs_mesh_init", "desc.comm freed", FX_W2)) R(vs_mesh_init(x->w, &(vs_mesh_desc){.shape = {1}, .comm = x->freed}, &o), "freed");
    if (E(A, "vs_mesh_free", "submesh", FX_M4)) R(vs_mesh_free(x->dp), "submesh");
    if (E(A, "vs_mesh_free", "mesh with a live DDP", FX_DDP)) R(vs_mesh_free(x->mesh), "alive");
    if (E(A, "vs_mesh_free", "mesh NULL", FX_NONE)) DOC(vs_mesh_free(NULL) == VS_OK, "returned VS_OK (documented)");
    if (E(A, "vs_mesh_init", "desc.comm not a handle", FX_W2)) {
        static union {
            char bytes[sizeof(vs_comm)];
            double align;
        } junk;
        R(vs_mesh_init(x->w, &(vs_mesh_desc){.shape = {1}, .comm = (vs_comm*)(void*)junk.bytes}, &o), "not a live");
    }
    if (E(A, "vs_mesh_retain", "mesh NULL", FX_NONE)) R(vs_mesh_retain(NULL), "mesh");
    if (E(A, "vs_mesh_release", "mesh NULL", FX_NONE)) R(vs_mesh_release(NULL), "mesh");
    if (E(A, "vs_mesh_release", "without vs_mesh_retain", FX_M4)) R(vs_mesh_release(x->mesh), "vs_mesh_retain");
    if (E(A, "vs_mesh_ndims", "mesh NULL", FX_NONE)) R(vs_mesh_ndims(NULL), "mesh");
    if (E(A, "vs_mesh_dim_index", "mesh NULL", FX_NONE)) R(vs_mesh_dim_index(NULL, "DP"), "mesh");
    if (E(A, "vs_mesh_dim_index", "dim NULL", FX_M4)) R(vs_mesh_dim_index(x->mesh, NULL), "dim");
    if (E(A, "vs_mesh_dim_index", "dim 'XX'", FX_M4)) R(vs_mesh_dim_index(x->mesh, "XX"), "dims: DP, TP");
    if (E(A, "vs_mesh_dim_index", "dim ''", FX_M4)) R(vs_mesh_dim_index(x->mesh, ""), "dims: DP, TP");
    if (E(A, "vs_mesh_dim_name", "mesh NULL", FX_NONE)) {
        RP(vs_mesh_dim_name(NULL, 0), "mesh is NULL");
    }
    if (E(A, "vs_mesh_dim_name", "index 99", FX_M4)) {
        vs_clear_error();
        volatile int i99 = 99; // volatile: not folded into a compile-time bounds warning
        RP(vs_mesh_dim_name(x->mesh, i99), "index 99");
    }
    if (E(A, "vs_mesh_dim_name", "index -1", FX_M4)) {
        RP(vs_mesh_dim_name(x->mesh, -1), "index -1");
    }
    if (E(A, "vs_mesh_size", "mesh NULL", FX_NONE)) R(vs_mesh_size(NULL, "DP"), "mesh");
    if (E(A, "vs_mesh_size", "dim NULL", FX_M4)) R(vs_mesh_size(x->mesh, NULL), "dim");
    if (E(A, "vs_mesh_size", "dim 'PP' (absent)", FX_M4)) R(vs_mesh_size(x->mesh, "PP"), "'PP'");
    if (E(A, "vs_mesh_nranks", "mesh NULL", FX_NONE)) R(vs_mesh_nranks(NULL), "mesh");
    if (E(A, "vs_mesh_rank", "mesh NULL", FX_NONE)) R(vs_mesh_rank(NULL), "mesh");
    if (E(A, "vs_mesh_coord_along", "mesh NULL", FX_NONE)) R(vs_mesh_coord_along(NULL, "DP"), "mesh");
    if (E(A, "vs_mesh_coord_along", "dim 'dp' (case)", FX_M4)) R(vs_mesh_coord_along(x->mesh, "dp"), "'dp'");
    if (E(A, "vs_mesh_coord", "mesh NULL", FX_NONE)) R(vs_mesh_coord(NULL, co), "mesh");
    if (E(A, "vs_mesh_coord", "coord NULL", FX_M4)) R(vs_mesh_coord(x->mesh, NULL), "coord");
    if (E(A, "vs_mesh_coord_of", "mesh NULL", FX_NONE)) R(vs_mesh_coord_of(NULL, 0, co), "mesh");
    if (E(A, "vs_mesh_coord_of", "coord NULL", FX_M4)) R(vs_mesh_coord_of(x->mesh, 0, NULL), "coord");
    if (E(A, "vs_mesh_coord_of", "rank 4 of 4", FX_M4)) R(vs_mesh_coord_of(x->mesh, 4, co), "rank 4");
    if (E(A, "vs_mesh_coord_of", "rank -1", FX_M4)) R(vs_mesh_coord_of(x->mesh, -1, co), "rank -1");
    if (E(A, "vs_mesh_rank_of", "mesh NULL", FX_NONE)) R(vs_mesh_rank_of(NULL, co, &r), "mesh");
    if (E(A, "vs_mesh_rank_of", "coord NULL", FX_M4)) R(vs_mesh_rank_of(x->mesh, NULL, &r), "coord");
    if (E(A, "vs_mesh_rank_of", "mesh_rank NULL", FX_M4)) R(vs_mesh_rank_of(x->mesh, co, NULL), "mesh_rank");
    if (E(A, "vs_mesh_rank_of", "coord {0, 2}", FX_M4)) {
        int c2[2] = {0, 2};
        R(vs_mesh_rank_of(x->mesh, c2, &r), "coordinate 2");
    }
    if (E(A, "vs_mesh_rank_of", "coord {-1, 0}", FX_M4)) {
        int c2[2] = {-1, 0};
        R(vs_mesh_rank_of(x->mesh, c2, &r), "coordinate -1");
    }
    if (E(A, "vs_mesh_global_rank", "mesh NULL", FX_NONE)) R(vs_mesh_global_rank(NULL, 0), "mesh");
    if (E(A, "vs_mesh_global_rank", "rank 4 of 4", FX_M4)) R(vs_mesh_global_rank(x->mesh, 4), "rank 4");
    if (E(A, "vs_mesh_global_rank", "rank INT_MIN", FX_M4)) R(vs_mesh_global_rank(x->mesh, INT_MIN), "rank");
    if (E(A, "vs_mesh_local_rank", "mesh NULL", FX_NONE)) R(vs_mesh_local_rank(NULL), "mesh");
    if (E(A, "vs_mesh_comm", "mesh NULL", FX_NONE)) RP(vs_mesh_comm(NULL), "mesh is NULL");
    if (E(A, "vs_mesh_world", "mesh NULL", FX_NONE)) RP(vs_mesh_world(NULL), "mesh is NULL");
    if (E(A, "vs_mesh_submesh", "mesh NULL", FX_NONE)) R(vs_mesh_submesh(NULL, "DP", &o), "mesh");
    if (E(A, "vs_mesh_submesh", "dims NULL", FX_M4)) R(vs_mesh_submesh(x->mesh, NULL, &o), "dims");
    if (E(A, "vs_mesh_submesh", "out NULL", FX_M4)) R(vs_mesh_submesh(x->mesh, "DP", NULL), "out");
    if (E(A, "vs_mesh_submesh", "dims 'XX' (unknown)", FX_M4)) R(vs_mesh_submesh(x->mesh, "XX", &o), "dims: DP, TP");
    if (E(A, "vs_mesh_submesh", "dims 'DP,DP'", FX_M4)) R(vs_mesh_submesh(x->mesh, "DP,DP", &o), "twice");
    if (E(A, "vs_mesh_submesh", "dims 'DP,,TP'", FX_M4)) R(vs_mesh_submesh(x->mesh, "DP,,TP", &o), "DP,,TP");
    if (E(A, "vs_mesh_submesh", "dims ''", FX_M4)) R(vs_mesh_submesh(x->mesh, "", &o), "dims");
    if (E(A, "vs_mesh_submesh", "dims ','", FX_M4)) R(vs_mesh_submesh(x->mesh, ",", &o), "','");
    if (E(A, "vs_mesh_submesh", "dims 'DP TP' (no comma)", FX_M4)) R(vs_mesh_submesh(x->mesh, "DP TP", &o), "DP TP");
    if (E(A, "vs_mesh_submesh", "dims of 100 chars", FX_M4))
        R(vs_mesh_submesh(x->mesh, "DPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDPDP", &o), "dims");
    if (E(A, "vs_mesh_group_of", "mesh NULL", FX_NONE)) R(vs_mesh_group_of(NULL, "DP", 0, ranks, 16, &n), "mesh");
    if (E(A, "vs_mesh_group_of", "dims NULL", FX_M4)) R(vs_mesh_group_of(x->mesh, NULL, 0, ranks, 16, &n), "dims");
    if (E(A, "vs_mesh_group_of", "ranks NULL", FX_M4)) R(vs_mesh_group_of(x->mesh, "DP", 0, NULL, 16, &n), "ranks");
    if (E(A, "vs_mesh_group_of", "n NULL", FX_M4)) R(vs_mesh_group_of(x->mesh, "DP", 0, ranks, 16, NULL), "n");
    if (E(A, "vs_mesh_group_of", "mesh_rank 9", FX_M4)) R(vs_mesh_group_of(x->mesh, "DP", 9, ranks, 16, &n), "rank 9");
    if (E(A, "vs_mesh_group_of", "cap 1 < 2", FX_M4)) R(vs_mesh_group_of(x->mesh, "DP", 0, ranks, 1, &n), "cap 1");
    if (E(A, "vs_mesh_group_of", "cap -1", FX_M4)) R(vs_mesh_group_of(x->mesh, "DP", 0, ranks, -1, &n), "cap -1");
    if (E(A, "vs_mesh_group_of", "dims 'QQ'", FX_M4)) R(vs_mesh_group_of(x->mesh, "QQ", 0, ranks, 16, &n), "QQ");
    if (E(A, "vs_mesh_groups", "mesh NULL", FX_NONE)) R(vs_mesh_groups(NULL, "DP", ranks, 16, &g, &gs), "mesh");
    if (E(A, "vs_mesh_groups", "ranks NULL", FX_M4)) R(vs_mesh_groups(x->mesh, "DP", NULL, 16, &g, &gs), "ranks");
    if (E(A, "vs_mesh_groups", "ngroups NULL", FX_M4)) R(vs_mesh_groups(x->mesh, "DP", ranks, 16, NULL, &gs), "ngroups");
    if (E(A, "vs_mesh_groups", "group_size NULL", FX_M4)) R(vs_mesh_groups(x->mesh, "DP", ranks, 16, &g, NULL), "group_size");
    if (E(A, "vs_mesh_groups", "cap 3 < 4", FX_M4)) R(vs_mesh_groups(x->mesh, "DP", ranks, 3, &g, &gs), "cap 3");
    if (E(A, "vs_mesh_groups", "cap INT_MIN", FX_M4)) R(vs_mesh_groups(x->mesh, "TP", ranks, INT_MIN, &g, &gs), "cap");
    if (E(A, "vs_mesh_neighbor", "mesh NULL", FX_NONE)) R(vs_mesh_neighbor(NULL, "DP", 1, 0, &r, NULL), "mesh");
    if (E(A, "vs_mesh_neighbor", "dim NULL", FX_M4)) R(vs_mesh_neighbor(x->mesh, NULL, 1, 0, &r, NULL), "dim");
    if (E(A, "vs_mesh_neighbor", "dim 'PP' (absent)", FX_M4)) R(vs_mesh_neighbor(x->mesh, "PP", 1, 0, &r, NULL), "'PP'");
    if (E(A, "vs_mesh_neighbor", "global_rank NULL", FX_M4)) R(vs_mesh_neighbor(x->mesh, "DP", 1, 0, NULL, NULL), "global_rank");
    if (E(A, "vs_mesh_is_first", "mesh NULL", FX_NONE)) R(vs_mesh_is_first(NULL, "DP"), "mesh");
    if (E(A, "vs_mesh_is_first", "dim 'ZZ'", FX_M4)) R(vs_mesh_is_first(x->mesh, "ZZ"), "'ZZ'");
    if (E(A, "vs_mesh_is_last", "mesh NULL", FX_NONE)) R(vs_mesh_is_last(NULL, "DP"), "mesh");
    if (E(A, "vs_mesh_is_last", "dim NULL", FX_M4)) R(vs_mesh_is_last(x->mesh, NULL), "dim");
    if (E(A, "vs_mesh_describe", "mesh NULL", FX_NONE)) {
        char buf[64];
        R(vs_mesh_describe(NULL, buf, sizeof buf), "mesh");
    }
#undef MESH_INIT
}

static void sweep_layout(sw_ctx* x)
{
    const char* A = "layout";
    vs_layout L;
    int64_t ls[VS_TENSOR_MAX_DIMS], off[VS_TENSOR_MAX_DIMS], numel = 0;
    int64_t shp[2] = {8, 8};
    char buf[128];
    memset(&L, 0, sizeof L);
    L.mesh = x->mesh;
#define LAYOUT(p0, p1) (L.p[0] = (p0), L.p[1] = (p1), &L)
    vs_placement bad_kind = vs_replicate();
    bad_kind.kind = (vs_placement_kind)7;
    vs_placement bad_op = vs_replicate();
    bad_op.kind = VS_PLACE_PARTIAL;
    bad_op.op = (vs_op)99;
    vs_dtensor t, t2;
    memset(&t, 0, sizeof t);
    t.layout.mesh = x->mesh;
    t.dtype = VS_F32;
    t.ndim = 2;
    t.shape[0] = 8, t.shape[1] = 8;
    t.data = x->buf;
    t2 = t;
    t2.data = x->buf2;

    if (E(A, "vs_layout_check", "layout NULL", FX_NONE)) R(vs_layout_check(NULL, 2), "layout");
    if (E(A, "vs_layout_check", "layout without mesh", FX_NONE)) {
        vs_layout L0;
        memset(&L0, 0, sizeof L0);
        R(vs_layout_check(&L0, 2), "mesh");
    }
    if (E(A, "vs_layout_check", "placement kind 7", FX_M4)) R(vs_layout_check(LAYOUT(bad_kind, vs_replicate()), 2), "kind 7");
    if (E(A, "vs_layout_check", "placement kind -1", FX_M4)) {
        vs_placement p = vs_replicate();
        p.kind = (vs_placement_kind)-1;
        R(vs_layout_check(LAYOUT(vs_replicate(), p), 2), "kind -1");
    }
    if (E(A, "vs_layout_check", "Partial(op 99)", FX_M4)) R(vs_layout_check(LAYOUT(bad_op, vs_replicate()), 2), "op 99");
    if (E(A, "vs_layout_check", "Shard(2) of a 2-dim tensor", FX_M4)) R(vs_layout_check(LAYOUT(vs_shard(2), vs_replicate()), 2), "Shard(2)");
    if (E(A, "vs_layout_check", "Shard(-1)", FX_M4)) R(vs_layout_check(LAYOUT(vs_shard(-1), vs_replicate()), 2), "Shard(-1)");
    if (E(A, "vs_layout_check", "ndim -1", FX_M4)) R(vs_layout_check(LAYOUT(vs_replicate(), vs_replicate()), -1), "-1 dims");
    if (E(A, "vs_layout_check", "ndim 9", FX_M4)) R(vs_layout_check(LAYOUT(vs_replicate(), vs_replicate()), 9), "9 dims");
    if (E(A, "vs_layout_local", "layout NULL", FX_NONE)) R(vs_layout_local(NULL, 2, shp, 0, ls, off), "layout");
    if (E(A, "vs_layout_local", "shape NULL", FX_M4)) R(vs_layout_local(LAYOUT(vs_shard(0), vs_replicate()), 2, NULL, 0, ls, off), "shape");
    if (E(A, "vs_layout_local", "shape {-8, 8}", FX_M4)) {
        int64_t s2[2] = {-8, 8};
        R(vs_layout_local(LAYOUT(vs_shard(0), vs_replicate()), 2, s2, 0, ls, off), "shape[0] = -8");
    }
    if (E(A, "vs_layout_local", "shape {INT64_MAX, 2}", FX_M4)) {
        int64_t s2[2] = {INT64_MAX, 2};
        R(vs_layout_local(LAYOUT(vs_shard(0), vs_replicate()), 2, s2, 0, ls, off), "2^63");
    }
    if (E(A, "vs_layout_local", "shape {2^32, 2^32}", FX_M4)) {
        int64_t s2[2] = {(int64_t)1 << 32, (int64_t)1 << 32};
        R(vs_layout_local(LAYOUT(vs_shard(1), vs_shard(0)), 2, s2, 1, ls, off), "2^63");
    }
    if (E(A, "vs_layout_local", "mesh_rank 4 of 4", FX_M4)) R(vs_layout_local(LAYOUT(vs_shard(0), vs_replicate()), 2, shp, 4, ls, off), "rank 4");
    if (E(A, "vs_layout_local", "mesh_rank -1", FX_M4)) R(vs_layout_local(LAYOUT(vs_shard(0), vs_replicate()), 2, shp, -1, ls, off), "rank -1");
    if (E(A, "vs_layout_local", "placement kind 7", FX_M4)) R(vs_layout_local(LAYOUT(bad_kind, vs_replicate()), 2, shp, 0, ls, off), "kind 7");
    if (E(A, "vs_dtensor_local_numel", "tensor NULL", FX_NONE)) R(vs_dtensor_local_numel(NULL, &numel), "tensor");
    if (E(A, "vs_dtensor_local_numel", "numel NULL", FX_M4)) R(vs_dtensor_local_numel(&t, NULL), "numel");
    if (E(A, "vs_dtensor_local_numel", "dtype 99", FX_M4)) {
        t.dtype = (vs_dtype)99;
        R(vs_dtensor_local_numel(&t, &numel), "dtype 99");
    }
    if (E(A, "vs_dtensor_local_numel", "ndim 9", FX_M4)) {
        t.ndim = 9;
        R(vs_dtensor_local_numel(&t, &numel), "9 dims");
    }
    if (E(A, "vs_dtensor_local_numel", "shape {INT64_MAX} f32 over 2", FX_M4)) {
        t.ndim = 1;
        t.shape[0] = INT64_MAX;
        t.layout.p[0] = vs_shard(0);
        R(vs_dtensor_local_numel(&t, &numel), "larger than memory");
    }
    if (E(A, "vs_dtensor_local_numel", "layout without mesh", FX_M4)) {
        t.layout.mesh = NULL;
        R(vs_dtensor_local_numel(&t, &numel), "mesh");
    }
    if (E(A, "vs_layout_format", "layout NULL", FX_NONE)) R(vs_layout_format(NULL, buf, sizeof buf), "layout");
    if (E(A, "vs_layout_format", "placement kind 7", FX_M4)) {
        vs_clear_error();
        int n = vs_layout_format(LAYOUT(bad_kind, vs_replicate()), buf, sizeof buf);
        TOL("returned %d: '%s'", n, buf);
    }
    if (E(A, "vs_layout_parse", "mesh NULL", FX_NONE)) R(vs_layout_parse(NULL, "[R]", &L), "mesh");
    if (E(A, "vs_layout_parse", "text NULL", FX_M4)) R(vs_layout_parse(x->mesh, NULL, &L), "text");
    if (E(A, "vs_layout_parse", "out NULL", FX_M4)) R(vs_layout_parse(x->mesh, "[R, R]", NULL), "out");
    if (E(A, "vs_layout_parse", "'[Shard(9), R]'", FX_M4)) R(vs_layout_parse(x->mesh, "[Shard(9), R]", &L), "Shard(9)");
    if (E(A, "vs_layout_parse", "'[S(-1), R]'", FX_M4)) R(vs_layout_parse(x->mesh, "[S(-1), R]", &L), "S(-1)");
    if (E(A, "vs_layout_parse", "'[P(foo), R]'", FX_M4)) R(vs_layout_parse(x->mesh, "[P(foo), R]", &L), "P(foo)");
    if (E(A, "vs_layout_parse", "'[R]' (1 of 2 dims)", FX_M4)) R(vs_layout_parse(x->mesh, "[R]", &L), "1 placements");
    if (E(A, "vs_layout_parse", "'[R, R, R]'", FX_M4)) R(vs_layout_parse(x->mesh, "[R, R, R]", &L), "more placements");
    if (E(A, "vs_layout_parse", "'R, R' (no brackets)", FX_M4)) R(vs_layout_parse(x->mesh, "R, R", &L), "'['");
    if (E(A, "vs_layout_parse", "'[R, R] x'", FX_M4)) R(vs_layout_parse(x->mesh, "[R, R] x", &L), "trailing");
    if (E(A, "vs_layout_parse", "'[S(99999999999999999999), R]'", FX_M4)) R(vs_layout_parse(x->mesh, "[S(99999999999999999999), R]", &L), "S(9999");
    if (E(A, "vs_layout_parse", "'[R R]'", FX_M4)) R(vs_layout_parse(x->mesh, "[R R]", &L), "[R R]");
    if (E(A, "vs_redistribute", "src NULL", FX_M4)) R(vs_redistribute(NULL, &t2), "source");
    if (E(A, "vs_redistribute", "dst NULL", FX_M4)) R(vs_redistribute(&t, NULL), "destination");
    if (E(A, "vs_redistribute", "src data NULL", FX_M4)) {
        t.data = NULL;
        R(vs_redistribute(&t, &t2), "source data");
    }
    if (E(A, "vs_redistribute", "dst data NULL", FX_M4)) {
        t2.data = NULL;
        t2.layout.p[0] = vs_shard(0);
        R(vs_redistribute(&t, &t2), "destination data");
    }
    if (E(A, "vs_redistribute", "dtype f32 -> f64", FX_M4)) {
        t2.dtype = VS_F64;
        R(vs_redistribute(&t, &t2), "dtype");
    }
    if (E(A, "vs_redistribute", "shape [8, 8] -> [8, 4]", FX_M4)) {
        t2.shape[1] = 4;
        R(vs_redistribute(&t, &t2), "shape[1]");
    }
    if (E(A, "vs_redistribute", "ndim 2 -> 1", FX_M4)) {
        t2.ndim = 1;
        R(vs_redistribute(&t, &t2), "2-dim source");
    }
    if (E(A, "vs_redistribute", "different meshes", FX_M4)) {
        t2.layout.mesh = x->dp;
        R(vs_redistribute(&t, &t2), "different meshes");
    }
    if (E(A, "vs_redistribute", "Partial(avg) of i32", FX_M4)) {
        t.dtype = t2.dtype = VS_I32;
        t.layout.p[0] = vs_partial(VS_OP_AVG);
        R(vs_redistribute(&t, &t2), "avg");
    }
    if (E(A, "vs_redistribute", "placement kind 7", FX_M4)) {
        t.layout.p[1] = bad_kind;
        R(vs_redistribute(&t, &t2), "kind 7");
    }
    if (E(A, "vs_redistribute", "shape {-1, 8}", FX_M4)) {
        t.shape[0] = t2.shape[0] = -1;
        R(vs_redistribute(&t, &t2), "shape[0] = -1");
    }
    if (E(A, "vs_redistribute", "shape {2^40, 2^30} f32", FX_M4)) {
        t.shape[0] = t2.shape[0] = (int64_t)1 << 40;
        t.shape[1] = t2.shape[1] = (int64_t)1 << 30;
        R(vs_redistribute(&t, &t2), "2^63|larger than memory");
    }
#undef LAYOUT
}

static void sweep_tp(sw_ctx* x)
{
    const char* A = "tp";
    float* b = x->buf;
    float* b2 = x->buf2;
    int64_t shp[2] = {4, 4}, st = 0, rows = 0;
    int32_t ids[4] = {0, 1, 2, 3};
    float loss[4];
    if (E(A, "vs_tp_copy_backward", "tp NULL", FX_NONE)) R(vs_tp_copy_backward(NULL, b, 4, VS_F32), "tp");
    if (E(A, "vs_tp_copy_backward", "2-dim mesh", FX_M4)) R(vs_tp_copy_backward(x->mesh, b, 4, VS_F32), "1 dim");
    if (E(A, "vs_tp_copy_backward", "grad NULL", FX_M4)) R(vs_tp_copy_backward(x->tp, NULL, 4, VS_F32), "NULL");
    if (E(A, "vs_tp_copy_backward", "dtype 99", FX_M4)) R(vs_tp_copy_backward(x->tp, b, 4, (vs_dtype)99), "dtype 99");
    if (E(A, "vs_tp_copy_backward", "count SIZE_MAX/2 f32", FX_M4)) R(vs_tp_copy_backward(x->tp, b, HUGE_F32, VS_F32), "overflows");
    if (E(A, "vs_tp_reduce_forward", "tp NULL", FX_NONE)) R(vs_tp_reduce_forward(NULL, b, 4, VS_F32), "tp");
    if (E(A, "vs_tp_reduce_forward", "2-dim mesh", FX_M4)) R(vs_tp_reduce_forward(x->mesh, b, 4, VS_F32), "1 dim");
    if (E(A, "vs_tp_reduce_forward", "x NULL", FX_M4)) R(vs_tp_reduce_forward(x->tp, NULL, 4, VS_F32), "NULL");
    if (E(A, "vs_tp_reduce_forward", "dtype -3", FX_M4)) R(vs_tp_reduce_forward(x->tp, b, 4, (vs_dtype)-3), "dtype -3");
    if (E(A, "vs_tp_reduce_forward", "count SIZE_MAX f32", FX_M4)) R(vs_tp_reduce_forward(x->tp, b, SIZE_MAX, VS_F32), "overflows");
    if (E(A, "vs_tp_reduce_forward_bias", "tp NULL", FX_NONE)) R(vs_tp_reduce_forward_bias(NULL, b, 2, 2, VS_F32, b2, VS_F32), "tp");
    if (E(A, "vs_tp_reduce_forward_bias", "2-dim mesh", FX_M4)) R(vs_tp_reduce_forward_bias(x->mesh, b, 2, 2, VS_F32, b2, VS_F32), "1 dim");
    if (E(A, "vs_tp_reduce_forward_bias", "y NULL", FX_M4)) R(vs_tp_reduce_forward_bias(x->tp, NULL, 2, 2, VS_F32, b2, VS_F32), "y is NULL");
    if (E(A, "vs_tp_reduce_forward_bias", "bias NULL", FX_M4)) R(vs_tp_reduce_forward_bias(x->tp, b, 2, 2, VS_F32, NULL, VS_F32), "bias is NULL");
    if (E(A, "vs_tp_reduce_forward_bias", "rows -2", FX_M4)) R(vs_tp_reduce_forward_bias(x->tp, b, -2, 2, VS_F32, b2, VS_F32), "rows -2");
    if (E(A, "vs_tp_reduce_forward_bias", "rows x cols overflow", FX_M4)) R(vs_tp_reduce_forward_bias(x->tp, b, INT64_MAX, 2, VS_F32, b2, VS_F32), "overflow");
    if (E(A, "vs_tp_reduce_forward_bias", "dtype 99", FX_M4)) R(vs_tp_reduce_forward_bias(x->tp, b, 2, 2, (vs_dtype)99, b2, VS_F32), "dtype");
    if (E(A, "vs_tp_reduce_forward_bias", "bias f64 for f32", FX_M4)) R(vs_tp_reduce_forward_bias(x->tp, b, 2, 2, VS_F32, b2, VS_F64), "bias dtype f64");
    if (E(A, "vs_sp_gather_forward", "tp NULL", FX_NONE)) R(vs_sp_gather_forward(NULL, VS_F32, 2, shp, 0, b, b2), "tp");
    if (E(A, "vs_sp_gather_forward", "2-dim mesh", FX_M4)) R(vs_sp_gather_forward(x->mesh, VS_F32, 2, shp, 0, b, b2), "1 dim");
    if (E(A, "vs_sp_gather_forward", "ndim 0", FX_M4)) R(vs_sp_gather_forward(x->tp, VS_F32, 0, shp, 0, b, b2), "ndim 0");
    if (E(A, "vs_sp_gather_forward", "ndim 9", FX_M4)) R(vs_sp_gather_forward(x->tp, VS_F32, 9, shp, 0, b, b2), "ndim 9");
    if (E(A, "vs_sp_gather_forward", "seq_dim 2 of 2", FX_M4)) R(vs_sp_gather_forward(x->tp, VS_F32, 2, shp, 2, b, b2), "seq_dim 2");
    if (E(A, "vs_sp_gather_forward", "seq_dim -1", FX_M4)) R(vs_sp_gather_forward(x->tp, VS_F32, 2, shp, -1, b, b2), "seq_dim -1");
    if (E(A, "vs_sp_gather_forward", "shape NULL", FX_M4)) R(vs_sp_gather_forward(x->tp, VS_F32, 2, NULL, 0, b, b2), "shape");
    if (E(A, "vs_sp_gather_forward", "shape {-4, 4}", FX_M4)) {
        int64_t s2[2] = {-4, 4};
        R(vs_sp_gather_forward(x->tp, VS_F32, 2, s2, 0, b, b2), "shape[0] = -4");
    }
    if (E(A, "vs_sp_gather_forward", "dtype 99", FX_M4)) R(vs_sp_gather_forward(x->tp, (vs_dtype)99, 2, shp, 0, b, b2), "dtype 99");
    if (E(A, "vs_sp_gather_forward", "in NULL", FX_M4)) R(vs_sp_gather_forward(x->tp, VS_F32, 2, shp, 0, NULL, b2), "source data");
    if (E(A, "vs_sp_gather_forward", "out NULL", FX_M4)) R(vs_sp_gather_forward(x->tp, VS_F32, 2, shp, 0, b, NULL), "destination data");
    if (E(A, "vs_sp_gather_forward", "shape {2^62, 4} f32", FX_M4)) {
        int64_t s2[2] = {(int64_t)1 << 62, 4};
        R(vs_sp_gather_forward(x->tp, VS_F32, 2, s2, 0, b, b2), "2^63|larger than memory");
    }
    if (E(A, "vs_sp_gather_backward", "tp NULL", FX_NONE)) R(vs_sp_gather_backward(NULL, VS_F32, 2, shp, 0, b, b2), "tp");
    if (E(A, "vs_sp_gather_backward", "seq_dim 5", FX_M4)) R(vs_sp_gather_backward(x->tp, VS_F32, 2, shp, 5, b, b2), "seq_dim 5");
    if (E(A, "vs_sp_gather_backward", "grad_full NULL", FX_M4)) R(vs_sp_gather_backward(x->tp, VS_F32, 2, shp, 0, NULL, b2), "source data");
    if (E(A, "vs_sp_gather_backward", "dtype 0", FX_M4)) R(vs_sp_gather_backward(x->tp, VS_DTYPE_INVALID, 2, shp, 0, b, b2), "dtype 0");
    if (E(A, "vs_sp_scatter_forward", "tp NULL", FX_NONE)) R(vs_sp_scatter_forward(NULL, VS_F32, 2, shp, 0, b, b2), "tp");
    if (E(A, "vs_sp_scatter_forward", "ndim -1", FX_M4)) R(vs_sp_scatter_forward(x->tp, VS_F32, -1, shp, 0, b, b2), "ndim -1");
    if (E(A, "vs_sp_scatter_forward", "out_local NULL", FX_M4)) R(vs_sp_scatter_forward(x->tp, VS_F32, 2, shp, 0, b, NULL), "destination data");
    if (E(A, "vs_sp_scatter_backward", "tp NULL", FX_NONE)) R(vs_sp_scatter_backward(NULL, VS_F32, 2, shp, 0, b, b2), "tp");
    if (E(A, "vs_sp_scatter_backward", "2-dim mesh", FX_M4)) R(vs_sp_scatter_backward(x->mesh, VS_F32, 2, shp, 0, b, b2), "1 dim");
    if (E(A, "vs_sp_scatter_backward", "grad_local NULL", FX_M4)) R(vs_sp_scatter_backward(x->tp, VS_F32, 2, shp, 0, NULL, b2), "source data");
    if (E(A, "vs_vocab_range", "tp NULL", FX_NONE)) R(vs_vocab_range(NULL, 8, &st, &rows), "tp");
    if (E(A, "vs_vocab_range", "2-dim mesh", FX_M4)) R(vs_vocab_range(x->mesh, 8, &st, &rows), "1 dim");
    if (E(A, "vs_vocab_range", "vocab -1", FX_M4)) R(vs_vocab_range(x->tp, -1, &st, &rows), "vocab -1");
    if (E(A, "vs_vocab_range", "vocab INT64_MIN", FX_M4)) R(vs_vocab_range(x->tp, INT64_MIN, &st, &rows), "vocab");
    if (E(A, "vs_vocab_range", "start NULL", FX_M4)) R(vs_vocab_range(x->tp, 8, NULL, &rows), "start");
    if (E(A, "vs_vocab_range", "rows NULL", FX_M4)) R(vs_vocab_range(x->tp, 8, &st, NULL), "rows");
    if (E(A, "vs_vocab_embedding_forward", "tp NULL", FX_NONE)) R(vs_vocab_embedding_forward(NULL, b, 8, 2, ids, 4, b2), "tp");
    if (E(A, "vs_vocab_embedding_forward", "n -1", FX_M4)) R(vs_vocab_embedding_forward(x->tp, b, 8, 2, ids, -1, b2), "n -1");
    if (E(A, "vs_vocab_embedding_forward", "dim -1", FX_M4)) R(vs_vocab_embedding_forward(x->tp, b, 8, -1, ids, 4, b2), "dim -1");
    if (E(A, "vs_vocab_embedding_forward", "vocab -8", FX_M4)) R(vs_vocab_embedding_forward(x->tp, b, -8, 2, ids, 4, b2), "vocab -8");
    if (E(A, "vs_vocab_embedding_forward", "id 8 of vocab 8", FX_M4)) {
        int32_t bad[4] = {0, 8, 1, 2};
        R(vs_vocab_embedding_forward(x->tp, b, 8, 2, bad, 4, b2), "id 8");
    }
    if (E(A, "vs_vocab_embedding_forward", "id -1", FX_M4)) {
        int32_t bad[4] = {0, 1, -1, 2};
        R(vs_vocab_embedding_forward(x->tp, b, 8, 2, bad, 4, b2), "id -1");
    }
    if (E(A, "vs_vocab_embedding_forward", "ids NULL", FX_M4)) R(vs_vocab_embedding_forward(x->tp, b, 8, 2, NULL, 4, b2), "ids");
    if (E(A, "vs_vocab_embedding_forward", "out NULL", FX_M4)) R(vs_vocab_embedding_forward(x->tp, b, 8, 2, ids, 4, NULL), "out");
    if (E(A, "vs_vocab_embedding_forward", "table_shard NULL", FX_M4)) R(vs_vocab_embedding_forward(x->tp, NULL, 8, 2, ids, 4, b2), "table_shard");
    if (E(A, "vs_vocab_embedding_forward", "n 2^40 x dim 2^40", FX_M4))
        R(vs_vocab_embedding_forward(x->tp, b, 8, (int64_t)1 << 40, ids, (int64_t)1 << 40, b2), "overflows");
    if (E(A, "vs_vocab_embedding_backward", "tp NULL", FX_NONE)) R(vs_vocab_embedding_backward(NULL, b, ids, 4, 8, 2, b2), "tp");
    if (E(A, "vs_vocab_embedding_backward", "n -1", FX_M4)) R(vs_vocab_embedding_backward(x->tp, b, ids, -1, 8, 2, b2), "n -1");
    if (E(A, "vs_vocab_embedding_backward", "dim -1", FX_M4)) R(vs_vocab_embedding_backward(x->tp, b, ids, 4, 8, -1, b2), "dim -1");
    if (E(A, "vs_vocab_embedding_backward", "n INT64_MIN", FX_M4)) R(vs_vocab_embedding_backward(x->tp, b, ids, INT64_MIN, 8, 2, b2), "n -");
    if (E(A, "vs_vocab_embedding_backward", "vocab -1", FX_M4)) R(vs_vocab_embedding_backward(x->tp, b, ids, 4, -1, 2, b2), "vocab -1");
    if (E(A, "vs_vocab_embedding_backward", "ids NULL", FX_M4)) R(vs_vocab_embedding_backward(x->tp, b, NULL, 4, 8, 2, b2), "ids");
    if (E(A, "vs_vocab_embedding_backward", "grad_out NULL", FX_M4)) R(vs_vocab_embedding_backward(x->tp, NULL, ids, 4, 8, 2, b2), "grad_out");
    if (E(A, "vs_vocab_embedding_backward", "grad_table_shard NULL", FX_M4)) R(vs_vocab_embedding_backward(x->tp, b, ids, 4, 8, 2, NULL), "grad_table_shard");
    if (E(A, "vs_vocab_embedding_backward", "id 99 of vocab 8", FX_M4)) {
        int32_t bad[4] = {0, 99, 1, 2};
        R(vs_vocab_embedding_backward(x->tp, b, bad, 4, 8, 2, b2), "id 99");
    }
    if (E(A, "vs_vocab_cross_entropy", "tp NULL", FX_NONE)) R(vs_vocab_cross_entropy(NULL, b, 4, 8, ids, loss, NULL), "tp");
    if (E(A, "vs_vocab_cross_entropy", "n -1", FX_M4)) R(vs_vocab_cross_entropy(x->tp, b, -1, 8, ids, loss, NULL), "n -1");
    if (E(A, "vs_vocab_cross_entropy", "vocab -1", FX_M4)) R(vs_vocab_cross_entropy(x->tp, b, 4, -1, ids, loss, NULL), "vocab -1");
    if (E(A, "vs_vocab_cross_entropy", "n 2^61", FX_M4)) R(vs_vocab_cross_entropy(x->tp, b, (int64_t)1 << 61, 8, ids, loss, NULL), "overflows");
    if (E(A, "vs_vocab_cross_entropy", "target 8 of vocab 8", FX_M4)) {
        int32_t bad[4] = {0, 1, 2, 8};
        R(vs_vocab_cross_entropy(x->tp, b, 4, 8, bad, loss, NULL), "id 8");
    }
    if (E(A, "vs_vocab_cross_entropy", "targets NULL", FX_M4)) R(vs_vocab_cross_entropy(x->tp, b, 4, 8, NULL, loss, NULL), "ids|targets");
    if (E(A, "vs_vocab_cross_entropy", "loss NULL", FX_M4)) R(vs_vocab_cross_entropy(x->tp, b, 4, 8, ids, NULL, NULL), "loss");
    if (E(A, "vs_vocab_cross_entropy", "logits_shard NULL", FX_M4)) R(vs_vocab_cross_entropy(x->tp, NULL, 4, 8, ids, loss, NULL), "logits_shard");
}

static void sweep_init(sw_ctx* x)
{
    const char* A = "init";
    uint32_t out4[4];
    vs_init_desc d;
    memset(&d, 0, sizeof d);
    d.name = "w";
    vs_dtensor t;
    memset(&t, 0, sizeof t);
    t.layout.mesh = x->mesh;
    t.dtype = VS_F32;
    t.ndim = 2;
    t.shape[0] = 4, t.shape[1] = 4;
    t.data = x->buf;
    if (E(A, "vs_philox", "out NULL", FX_NONE)) R(vs_philox(1, 2, 3, NULL), "out");
    if (E(A, "vs_init_value", "desc NULL", FX_NONE)) RN(vs_init_value(NULL, 0), "desc");
    if (E(A, "vs_init_value", "kind 99", FX_NONE)) {
        d.kind = (vs_init_kind)99;
        RN(vs_init_value(&d, 0), "kind 99");
    }
    if (E(A, "vs_init_value", "kind -1", FX_NONE)) {
        d.kind = (vs_init_kind)-1;
        RN(vs_init_value(&d, 0), "kind -1");
    }
    if (E(A, "vs_init_value", "scaled normal, num_layers 0", FX_NONE)) {
        d.kind = VS_INIT_SCALED_NORMAL;
        d.b = 0.02;
        RN(vs_init_value(&d, 0), "num_layers 0");
    }
    if (E(A, "vs_init_value", "scaled normal, num_layers -3", FX_NONE)) {
        d.kind = VS_INIT_SCALED_NORMAL;
        d.num_layers = -3;
        RN(vs_init_value(&d, 0), "num_layers -3");
    }
    if (E(A, "vs_init_value", "uniform [NaN, 1)", FX_NONE)) {
        d.kind = VS_INIT_UNIFORM;
        d.a = NAN;
        d.b = 1;
        RN(vs_init_value(&d, 0), "NaN|nan");
    }
    if (E(A, "vs_init_value", "normal std -1", FX_NONE)) {
        d.kind = VS_INIT_NORMAL;
        d.b = -1;
        RN(vs_init_value(&d, 0), "std -1|-1");
    }
    if (E(A, "vs_init_value", "normal std inf", FX_NONE)) {
        d.kind = VS_INIT_NORMAL;
        d.b = INFINITY;
        RN(vs_init_value(&d, 0), "inf");
    }
    if (E(A, "vs_init_value", "uniform [1, 0) (b < a)", FX_NONE)) {
        d.kind = VS_INIT_UNIFORM;
        d.a = 1;
        d.b = 0;
        RN(vs_init_value(&d, 0), "uniform");
    }
    if (E(A, "vs_init_fill", "tensor NULL", FX_NONE)) R(vs_init_fill(NULL, &d), "tensor");
    if (E(A, "vs_init_fill", "desc NULL", FX_M4)) R(vs_init_fill(&t, NULL), "desc");
    if (E(A, "vs_init_fill", "kind 99", FX_M4)) {
        d.kind = (vs_init_kind)99;
        R(vs_init_fill(&t, &d), "kind 99");
    }
    if (E(A, "vs_init_fill", "dtype 99", FX_M4)) {
        t.dtype = (vs_dtype)99;
        R(vs_init_fill(&t, &d), "dtype 99");
    }
    if (E(A, "vs_init_fill", "normal into i32", FX_M4)) {
        d.kind = VS_INIT_NORMAL;
        d.b = 1;
        t.dtype = VS_I32;
        R(vs_init_fill(&t, &d), "floating");
    }
    if (E(A, "vs_init_fill", "scaled normal, num_layers 0", FX_M4)) {
        d.kind = VS_INIT_SCALED_NORMAL;
        R(vs_init_fill(&t, &d), "num_layers");
    }
    if (E(A, "vs_init_fill", "Partial layout", FX_M4)) {
        t.layout.p[0] = vs_partial(VS_OP_SUM);
        R(vs_init_fill(&t, &d), "Partial");
    }
    if (E(A, "vs_init_fill", "data NULL", FX_M4)) {
        t.data = NULL;
        R(vs_init_fill(&t, &d), "data");
    }
    if (E(A, "vs_init_fill", "Shard(5) of a 2-dim tensor", FX_M4)) {
        t.layout.p[1] = vs_shard(5);
        R(vs_init_fill(&t, &d), "Shard(5)");
    }
    if (E(A, "vs_init_fill", "constant 1e30 into i32", FX_M4)) {
        d.kind = VS_INIT_CONSTANT;
        d.a = 1e30;
        t.dtype = VS_I32;
        R(vs_init_fill(&t, &d), "1e+30");
    }
    if (E(A, "vs_init_fill", "constant NaN into u8", FX_M4)) {
        d.kind = VS_INIT_CONSTANT;
        d.a = NAN;
        t.dtype = VS_U8;
        R(vs_init_fill(&t, &d), "nan");
    }
    if (E(A, "vs_init_fill", "constant -1 into u8", FX_M4)) {
        d.kind = VS_INIT_CONSTANT;
        d.a = -1;
        t.dtype = VS_U8;
        R(vs_init_fill(&t, &d), "-1");
    }
    if (E(A, "vs_init_fill", "constant 1e300 into f32", FX_M4)) {
        d.kind = VS_INIT_CONSTANT;
        d.a = 1e300;
        R(vs_init_fill(&t, &d), "1e+300");
    }
    if (E(A, "vs_init_fill", "normal std NaN", FX_M4)) {
        d.kind = VS_INIT_NORMAL;
        d.b = NAN;
        R(vs_init_fill(&t, &d), "nan");
    }
    (void)out4;
}

static void sweep_bootstrap(sw_ctx* x)
{
    const char* A = "bootstrap";
    vs_world* wo = NULL;
    vs_bootstrap_info bi;
    volatile size_t sw_huge = SIZE_MAX; // volatile: gcc refuses a constant this large at compile time
    char longaddr[400];
    memset(longaddr, 'a', sizeof longaddr - 1);
    longaddr[sizeof longaddr - 1] = 0;
#define LAUNCH(...) vs_launch_ex(&(vs_launch_desc){__VA_ARGS__}, sw_noop_rank, NULL)
#define WINIT(...) vs_world_init(&(vs_world_desc){__VA_ARGS__}, &wo)
    if (E(A, "vs_launch", "nranks 0", FX_NONE)) R(vs_launch(0, sw_noop_rank, NULL), "nranks 0");
    if (E(A, "vs_launch", "nranks -1", FX_NONE)) R(vs_launch(-1, sw_noop_rank, NULL), "nranks -1");
    if (E(A, "vs_launch", "nranks INT_MAX", FX_NONE)) R(vs_launch(INT_MAX, sw_noop_rank, NULL), "nranks 2147483647");
    if (E(A, "vs_launch", "fn NULL", FX_NONE)) R(vs_launch(2, NULL, NULL), "fn");
    if (E(A, "vs_launch_ex", "desc NULL", FX_NONE)) R(vs_launch_ex(NULL, sw_noop_rank, NULL), "desc");
    if (E(A, "vs_launch_ex", "fn NULL", FX_NONE)) R(vs_launch_ex(&(vs_launch_desc){.nranks = 2}, NULL, NULL), "fn");
    if (E(A, "vs_launch_ex", "timeout_s -1", FX_NONE)) R(LAUNCH(.nranks = 2, .timeout_s = -1), "timeout_s -1");
    if (E(A, "vs_launch_ex", "timeout_s NaN", FX_NONE)) R(LAUNCH(.nranks = 2, .timeout_s = NAN), "timeout_s nan|timeout_s -nan");
    if (E(A, "vs_launch_ex", "timeout_s -inf", FX_NONE)) R(LAUNCH(.nranks = 2, .timeout_s = -INFINITY), "timeout_s -inf");
    if (E(A, "vs_launch_ex", "log_level 99", FX_NONE)) R(LAUNCH(.nranks = 2, .log_level = (vs_log_level)99), "log_level 99");
    if (E(A, "vs_launch_ex", "log_level -1", FX_NONE)) R(LAUNCH(.nranks = 2, .log_level = (vs_log_level)-1), "log_level -1");
    if (E(A, "vs_launch_ex", "transport 99", FX_NONE)) R(LAUNCH(.nranks = 2, .transport = (vs_transport)99), "transport");
    if (E(A, "vs_launch_ex", "transport MPI", FX_NONE)) R(LAUNCH(.nranks = 2, .transport = VS_TRANSPORT_MPI), "mpi");
    if (E(A, "vs_launch_ex", "ranks_per_node -1", FX_NONE)) R(LAUNCH(.nranks = 2, .ranks_per_node = -1), "ranks_per_node -1");
    if (E(A, "vs_launch", "VESCALE_TIMEOUT=abc", FX_NONE)) {
        sw_clean_env();
        setenv("VESCALE_TIMEOUT", "abc", 1);
        R(vs_launch(2, sw_noop_rank, NULL), "VESCALE_TIMEOUT");
    }
    if (E(A, "vs_launch", "VESCALE_TIMEOUT=5s", FX_NONE)) {
        sw_clean_env();
        setenv("VESCALE_TIMEOUT", "5s", 1);
        R(vs_launch(2, sw_noop_rank, NULL), "VESCALE_TIMEOUT");
    }
    if (E(A, "vs_launch", "VESCALE_TIMEOUT=-3", FX_NONE)) {
        sw_clean_env();
        setenv("VESCALE_TIMEOUT", "-3", 1);
        R(vs_launch(2, sw_noop_rank, NULL), "VESCALE_TIMEOUT");
    }
    if (E(A, "vs_launch", "VESCALE_LOG=99", FX_NONE)) {
        sw_clean_env();
        setenv("VESCALE_LOG", "99", 1);
        R(vs_launch(2, sw_noop_rank, NULL), "VESCALE_LOG");
    }
    if (E(A, "vs_launch", "VESCALE_LOG=verbose", FX_NONE)) {
        sw_clean_env();
        setenv("VESCALE_LOG", "verbose", 1);
        R(vs_launch(2, sw_noop_rank, NULL), "VESCALE_LOG");
    }
    if (E(A, "vs_bootstrap_from_env", "out NULL", FX_NONE)) R(vs_bootstrap_from_env(NULL), "out");
    if (E(A, "vs_bootstrap_from_env", "RANK=abc", FX_NONE)) {
        sw_clean_env();
        setenv("RANK", "abc", 1);
        setenv("WORLD_SIZE", "2", 1);
        R(vs_bootstrap_from_env(&bi), "RANK");
    }
    if (E(A, "vs_bootstrap_from_env", "RANK=5 WORLD_SIZE=2", FX_NONE)) {
        sw_clean_env();
        setenv("RANK", "5", 1);
        setenv("WORLD_SIZE", "2", 1);
        R(vs_bootstrap_from_env(&bi), "RANK=5");
    }
    if (E(A, "vs_bootstrap_from_env", "WORLD_SIZE=0", FX_NONE)) {
        sw_clean_env();
        setenv("RANK", "0", 1);
        setenv("WORLD_SIZE", "0", 1);
        R(vs_bootstrap_from_env(&bi), "WORLD_SIZE=0");
    }
    if (E(A, "vs_bootstrap_from_env", "WORLD_SIZE=99999999999", FX_NONE)) {
        sw_clean_env();
        setenv("RANK", "0", 1);
        setenv("WORLD_SIZE", "99999999999", 1);
        R(vs_bootstrap_from_env(&bi), "WORLD_SIZE");
    }
    if (E(A, "vs_bootstrap_from_env", "RANK without WORLD_SIZE", FX_NONE)) {
        sw_clean_env();
        setenv("RANK", "1", 1);
        R(vs_bootstrap_from_env(&bi), "WORLD_SIZE");
    }
    if (E(A, "vs_bootstrap_from_env", "LOCAL_RANK=-1", FX_NONE)) {
        sw_clean_env();
        setenv("RANK", "0", 1);
        setenv("WORLD_SIZE", "2", 1);
        setenv("LOCAL_RANK", "-1", 1);
        R(vs_bootstrap_from_env(&bi), "LOCAL_RANK=-1");
    }
    if (E(A, "vs_bootstrap_from_env", "SLURM_PROCID=-2", FX_NONE)) {
        sw_clean_env();
        setenv("SLURM_PROCID", "-2", 1);
        setenv("SLURM_NTASKS", "4", 1);
        R(vs_bootstrap_from_env(&bi), "SLURM_PROCID=-2");
    }
    if (E(A, "vs_bootstrap_from_env", "MASTER_PORT=70000", FX_NONE)) {
        sw_clean_env();
        setenv("MASTER_PORT", "70000", 1);
        R(vs_bootstrap_from_env(&bi), "MASTER_PORT=70000");
    }
    if (E(A, "vs_bootstrap_from_env", "MASTER_PORT=http", FX_NONE)) {
        sw_clean_env();
        setenv("MASTER_PORT", "http", 1);
        R(vs_bootstrap_from_env(&bi), "MASTER_PORT");
    }
    if (E(A, "vs_bootstrap_from_env", "MASTER_ADDR of 399 chars", FX_NONE)) {
        sw_clean_env();
        setenv("MASTER_ADDR", longaddr, 1);
        R(vs_bootstrap_from_env(&bi), "MASTER_ADDR");
    }
    if (E(A, "vs_world_init", "desc NULL", FX_NONE)) R(vs_world_init(NULL, &wo), "desc");
    if (E(A, "vs_world_init", "out NULL", FX_NONE)) R(vs_world_init(&(vs_world_desc){.transport = VS_TRANSPORT_MPI}, NULL), "out");
    if (E(A, "vs_world_init", "transport 99", FX_NONE)) R(WINIT(.transport = (vs_transport)99), "transport 99");
    if (E(A, "vs_world_init", "transport threads", FX_NONE)) R(WINIT(.transport = VS_TRANSPORT_THREADS), "vs_launch");
    if (E(A, "vs_world_init", "VESCALE_TRANSPORT=tcp", FX_NONE)) {
        sw_clean_env();
        setenv("VESCALE_TRANSPORT", "tcp", 1);
        R(WINIT(.world_size = 0), "VESCALE_TRANSPORT");
    }
    if (E(A, "vs_world_init", "timeout_s -1", FX_NONE)) R(WINIT(.transport = VS_TRANSPORT_MPI, .timeout_s = -1), "timeout_s -1");
    if (E(A, "vs_world_init", "timeout_s NaN", FX_NONE)) R(WINIT(.transport = VS_TRANSPORT_MPI, .timeout_s = NAN), "timeout_s nan|timeout_s -nan");
    if (E(A, "vs_world_init", "log_level 99", FX_NONE)) R(WINIT(.transport = VS_TRANSPORT_MPI, .log_level = (vs_log_level)99), "log_level 99");
    if (E(A, "vs_world_init", "world_size -1", FX_NONE)) R(WINIT(.transport = VS_TRANSPORT_MPI, .world_size = -1), "world_size -1");
    if (E(A, "vs_world_init", "rank 5 of 2", FX_NONE)) R(WINIT(.transport = VS_TRANSPORT_MPI, .world_size = 2, .rank = 5), "rank 5");
    if (E(A, "vs_world_init", "rank -1 of 2", FX_NONE)) R(WINIT(.transport = VS_TRANSPORT_MPI, .world_size = 2, .rank = -1), "rank -1");
    if (E(A, "vs_world_init", "local_rank -1", FX_NONE)) R(WINIT(.transport = VS_TRANSPORT_MPI, .world_size = 2, .local_rank = -1), "local_rank -1");
    if (E(A, "vs_world_init", "master_port 70000", FX_NONE)) R(WINIT(.transport = VS_TRANSPORT_NCCL, .world_size = 2, .master_port = 70000), "70000");
    if (E(A, "vs_world_init", "master_port -1", FX_NONE)) R(WINIT(.transport = VS_TRANSPORT_NCCL, .world_size = 2, .master_port = -1), "port -1");
    if (E(A, "vs_world_init", "master_addr of 399 chars", FX_NONE)) R(WINIT(.transport = VS_TRANSPORT_NCCL, .world_size = 2, .master_addr = longaddr), "master_addr");
    if (E(A, "vs_world_init", "init_file empty", FX_NONE)) R(WINIT(.transport = VS_TRANSPORT_NCCL, .world_size = 2, .init_file = ""), "init_file is empty");
    if (E(A, "vs_world_init", "init_file of 1100 chars", FX_NONE)) {
        static char longf[1101];
        memset(longf, 'f', 1100);
        R(WINIT(.transport = VS_TRANSPORT_NCCL, .world_size = 2, .init_file = longf), "init_file is longer");
    }
    if (E(A, "vs_world_init", "device_select 99", FX_NONE)) R(WINIT(.transport = VS_TRANSPORT_NCCL, .world_size = 2, .device_select = (vs_device_select)99), "device_select 99");
    if (E(A, "vs_world_init", "cuda_device -1 (explicit)", FX_NONE)) R(WINIT(.transport = VS_TRANSPORT_NCCL, .world_size = 2, .device_select = VS_DEVICE_EXPLICIT, .cuda_device = -1), "cuda_device -1");
    if (E(A, "vs_world_init", "lighthouse_wait_s -1", FX_NONE)) R(WINIT(.transport = VS_TRANSPORT_NCCL, .world_size = 2, .lighthouse_wait_s = -1), "lighthouse_wait_s -1");
    if (E(A, "vs_world_init", "lighthouse_wait_s NaN", FX_NONE)) R(WINIT(.transport = VS_TRANSPORT_NCCL, .world_size = 2, .lighthouse_wait_s = NAN), "lighthouse_wait_s nan");
    if (E(A, "vs_world_init", "lighthouse_wait_s inf", FX_NONE)) R(WINIT(.transport = VS_TRANSPORT_NCCL, .world_size = 2, .lighthouse_wait_s = INFINITY), "lighthouse_wait_s inf");
    if (E(A, "vs_world_free", "world NULL", FX_NONE)) DOC(vs_world_free(NULL) == VS_OK, "returned VS_OK (documented)");
    if (E(A, "vs_world_rank", "world NULL", FX_NONE)) R(vs_world_rank(NULL), "world is NULL");
    if (E(A, "vs_world_size", "world NULL", FX_NONE)) R(vs_world_size(NULL), "world is NULL");
    if (E(A, "vs_world_local_rank", "world NULL", FX_NONE)) R(vs_world_local_rank(NULL), "world is NULL");
    if (E(A, "vs_world_transport", "world NULL", FX_NONE)) RZ(vs_world_transport(NULL), "world is NULL");
    if (E(A, "vs_world_comm", "world NULL", FX_NONE)) RP(vs_world_comm(NULL), "world is NULL");
    if (E(A, "vs_world_timeout", "world NULL", FX_NONE)) RN(vs_world_timeout(NULL), "world is NULL");
    // vs_log is void: the pass is no crash and nothing logged
    if (E(A, "vs_log", "world NULL", FX_NONE)) {
        vs_log(NULL, VS_LOG_ERROR, "sw-mark %d", 1);
        DOC(1, "no crash");
    }
    if (E(A, "vs_log", "level 99", FX_W2)) {
        int before = __atomic_load_n(&x->job->marks, __ATOMIC_SEQ_CST);
        vs_log(x->w, (vs_log_level)99, "sw-mark %d", 99);
        int after = __atomic_load_n(&x->job->marks, __ATOMIC_SEQ_CST);
        DOC(after == before, "%d message(s) logged", after - before);
    }
    if (E(A, "vs_log", "level -1", FX_W2)) {
        int before = __atomic_load_n(&x->job->marks, __ATOMIC_SEQ_CST);
        vs_log(x->w, (vs_log_level)-1, "sw-mark %d", -1);
        int after = __atomic_load_n(&x->job->marks, __ATOMIC_SEQ_CST);
        DOC(after == before, "%d message(s) logged", after - before);
    }
    if (E(A, "vs_log", "level INT_MIN", FX_W2)) {
        int before = __atomic_load_n(&x->job->marks, __ATOMIC_SEQ_CST);
        vs_log(x->w, (vs_log_level)INT_MIN, "sw-mark");
        int after = __atomic_load_n(&x->job->marks, __ATOMIC_SEQ_CST);
        DOC(after == before, "%d message(s) logged", after - before);
    }
    if (E(A, "vs_log", "fmt NULL", FX_W2)) {
        vs_log(x->w, VS_LOG_ERROR, NULL);
        DOC(1, "no crash");
    }
    if (E(A, "vs_alloc", "size SIZE_MAX", FX_W2)) RP(vs_alloc(x->w, sw_huge), "SIZE_MAX|18446744073709551615|memory");
    if (E(A, "vs_alloc", "world NULL, size SIZE_MAX", FX_NONE)) RP(vs_alloc(NULL, sw_huge), "18446744073709551615|memory");
    if (E(A, "vs_free", "ptr NULL", FX_W2)) {
        vs_free(x->w, NULL);
        DOC(1, "no crash");
    }
    if (E(A, "vs_free", "world NULL, ptr NULL", FX_NONE)) {
        vs_free(NULL, NULL);
        DOC(1, "no crash");
    }
    if (E(A, "vs_free_later", "ptr NULL", FX_W2)) {
        vs_free_later(x->w, NULL);
        DOC(1, "no crash");
    }
    if (E(A, "vs_free_later", "world NULL, ptr NULL", FX_NONE)) {
        vs_free_later(NULL, NULL);
        DOC(1, "no crash");
    }
    if (E(A, "vs_device_alloc", "no CUDA in this build", FX_W2)) RP(vs_device_alloc(x->w, 16), "VESCALE_NCCL");
    if (E(A, "vs_device_alloc", "world NULL", FX_NONE)) RP(vs_device_alloc(NULL, 16), "VESCALE_NCCL");
    if (E(A, "vs_device_free", "ptr NULL", FX_W2)) {
        vs_device_free(x->w, NULL);
        DOC(1, "no crash");
    }
#undef LAUNCH
#undef WINIT
}

static void sweep_ddp(sw_ctx* x)
{
    const char* A = "ddp";
    vs_ddp* o = NULL;
    int idx = 0;
    double norm = 0;
    vs_ddp_memory mem;
    vs_clip_desc clip = {.max_norm = 1.0};
#define DINIT(...) vs_ddp_init(&(vs_ddp_desc){.mesh = x->mesh, __VA_ARGS__}, &o)
#define PADD(...) vs_ddp_add_param(x->ddp, &(vs_ddp_param_desc){.dtype = VS_F32, __VA_ARGS__}, &idx)
    if (E(A, "vs_ddp_init", "desc NULL", FX_NONE)) R(vs_ddp_init(NULL, &o), "desc");
    if (E(A, "vs_ddp_init", "out NULL", FX_M4)) R(vs_ddp_init(&(vs_ddp_desc){.mesh = x->mesh}, NULL), "out");
    if (E(A, "vs_ddp_init", "mesh NULL", FX_NONE)) R(vs_ddp_init(&(vs_ddp_desc){.mesh = NULL}, &o), "mesh");
    if (E(A, "vs_ddp_init", "bucket_bytes -1", FX_M4)) R(DINIT(.bucket_bytes = -1), "bucket_bytes -1");
    if (E(A, "vs_ddp_init", "zero stage 7", FX_M4)) R(DINIT(.zero = (vs_zero_stage)7), "zero stage 7");
    if (E(A, "vs_ddp_init", "zero stage -1", FX_M4)) R(DINIT(.zero = (vs_zero_stage)-1), "zero stage -1");
    if (E(A, "vs_ddp_init", "optim kind 99", FX_M4)) R(DINIT(.optim = {.kind = (vs_optim_kind)99}), "kind 99");
    if (E(A, "vs_ddp_init", "custom optimizer without step", FX_M4)) R(DINIT(.optim = {.kind = VS_OPTIM_CUSTOM}), "optim.step");
    if (E(A, "vs_ddp_init", "custom optimizer, ngroups 99", FX_M4))
        R(DINIT(.optim = {.kind = VS_OPTIM_CUSTOM, .step = sw_custom_step, .ngroups = 99}), "ngroups 99");
    if (E(A, "vs_ddp_init", "ngroups 17", FX_M4)) R(DINIT(.optim = {.ngroups = 17}), "ngroups 17");
    if (E(A, "vs_ddp_init", "ngroups -1", FX_M4)) R(DINIT(.optim = {.ngroups = -1}), "ngroups -1");
    if (E(A, "vs_ddp_init", "zero2_buffers -1", FX_M4)) R(DINIT(.zero = VS_ZERO_2, .zero2_buffers = -1), "zero2_buffers -1");
    if (E(A, "vs_ddp_init", "beta1 1.5", FX_M4)) R(DINIT(.optim = {.beta1 = 1.5}), "beta1 1.5");
    if (E(A, "vs_ddp_init", "beta1 -0.1", FX_M4)) R(DINIT(.optim = {.beta1 = -0.1}), "beta1 -0.1");
    if (E(A, "vs_ddp_init", "beta2 NaN", FX_M4)) R(DINIT(.optim = {.beta2 = NAN}), "beta2");
    if (E(A, "vs_ddp_init", "beta2 1 (set)", FX_M4)) R(DINIT(.optim = {.beta2 = 1, .beta2_set = 1}), "beta2 1");
    if (E(A, "vs_ddp_init", "eps -1e-8", FX_M4)) R(DINIT(.optim = {.eps = -1e-8}), "eps -1e-08");
    if (E(A, "vs_ddp_init", "eps inf", FX_M4)) R(DINIT(.optim = {.eps = INFINITY}), "eps inf");
    if (E(A, "vs_ddp_init", "weight_decay NaN", FX_M4)) R(DINIT(.optim = {.weight_decay = NAN}), "weight_decay");
    if (E(A, "vs_ddp_init", "weight_decay -0.1", FX_M4)) R(DINIT(.optim = {.weight_decay = -0.1}), "weight_decay -0.1");
    if (E(A, "vs_ddp_init", "SGD momentum -0.9", FX_M4)) R(DINIT(.optim = {.kind = VS_OPTIM_SGD, .momentum = -0.9}), "momentum -0.9");
    if (E(A, "vs_ddp_init", "SGD nesterov without momentum", FX_M4)) R(DINIT(.optim = {.kind = VS_OPTIM_SGD, .nesterov = 1}), "nesterov");
    if (E(A, "vs_ddp_init", "group lr_scale -1", FX_M4)) R(DINIT(.optim = {.ngroups = 2, .groups = {{0}, {.lr_scale = -1}}}), "lr_scale -1");
    if (E(A, "vs_ddp_init", "group weight_decay inf", FX_M4)) R(DINIT(.optim = {.ngroups = 2, .groups = {{0}, {.weight_decay = INFINITY}}}), "weight_decay inf");
    if (E(A, "vs_ddp_init", "dp_dim 'XX'", FX_M4)) R(DINIT(.dp_dim = "XX"), "XX");
    if (E(A, "vs_ddp_init", "pp_dim 'YY'", FX_M4)) R(DINIT(.pp_dim = "YY"), "YY");
    if (E(A, "vs_ddp_set_bucket_bytes", "ddp NULL", FX_NONE)) R(vs_ddp_set_bucket_bytes(NULL, 1024), "ddp");
    if (E(A, "vs_ddp_set_bucket_bytes", "0", FX_DDP)) R(vs_ddp_set_bucket_bytes(x->ddp, 0), "bucket size 0");
    if (E(A, "vs_ddp_set_bucket_bytes", "INT64_MIN", FX_DDP)) R(vs_ddp_set_bucket_bytes(x->ddp, INT64_MIN), "bucket size -");
    if (E(A, "vs_ddp_set_bucket_bytes", "after finalize", FX_DDPF)) R(vs_ddp_set_bucket_bytes(x->ddp, 1024), "finalized");
    if (E(A, "vs_ddp_add_param", "ddp NULL", FX_NONE)) R(vs_ddp_add_param(NULL, &(vs_ddp_param_desc){.name = "p"}, &idx), "ddp");
    if (E(A, "vs_ddp_add_param", "desc NULL", FX_DDP)) R(vs_ddp_add_param(x->ddp, NULL, &idx), "param desc");
    if (E(A, "vs_ddp_add_param", "name NULL", FX_DDP)) R(PADD(.ndim = 1, .shape = {4}), "name");
    if (E(A, "vs_ddp_add_param", "name ''", FX_DDP)) R(PADD(.name = "", .ndim = 1, .shape = {4}), "name");
    if (E(A, "vs_ddp_add_param", "dtype 99", FX_DDP)) R(vs_ddp_add_param(x->ddp, &(vs_ddp_param_desc){.name = "p", .dtype = (vs_dtype)99, .ndim = 1, .shape = {4}}, &idx), "dtype invalid");
    if (E(A, "vs_ddp_add_param", "dtype i32", FX_DDP)) R(vs_ddp_add_param(x->ddp, &(vs_ddp_param_desc){.name = "p", .dtype = VS_I32, .ndim = 1, .shape = {4}}, &idx), "dtype i32");
    if (E(A, "vs_ddp_add_param", "group 5 of 1", FX_DDP)) R(PADD(.name = "p", .ndim = 1, .shape = {4}, .group = 5), "group 5");
    if (E(A, "vs_ddp_add_param", "group -1", FX_DDP)) R(PADD(.name = "p", .ndim = 1, .shape = {4}, .group = -1), "group -1");
    if (E(A, "vs_ddp_add_param", "name registered twice", FX_DDP)) R(PADD(.name = "w", .ndim = 1, .shape = {4}), "twice");
    if (E(A, "vs_ddp_add_param", "Shard along DP", FX_DDP)) R(PADD(.name = "p", .ndim = 1, .shape = {4}, .placements = {vs_shard(0)}), "DP");
    if (E(A, "vs_ddp_add_param", "shape 2^62+16", FX_DDP)) R(PADD(.name = "p", .ndim = 1, .shape = {((int64_t)1 << 62) + 16}), "too large");
    if (E(A, "vs_ddp_add_param", "shape INT64_MAX", FX_DDP)) R(PADD(.name = "p", .ndim = 1, .shape = {INT64_MAX}), "too large");
    if (E(A, "vs_ddp_add_param", "shape {2^31, 2^31, 2^31}", FX_DDP))
        R(PADD(.name = "p", .ndim = 3, .shape = {(int64_t)1 << 31, (int64_t)1 << 31, (int64_t)1 << 31}), "too large");
    if (E(A, "vs_ddp_add_param", "shape 2^50 (no memory)", FX_DDP)) R(PADD(.name = "p", .ndim = 1, .shape = {(int64_t)1 << 50}), "memory");
    if (E(A, "vs_ddp_add_param", "shape {-3}", FX_DDP)) R(PADD(.name = "p", .ndim = 1, .shape = {-3}), "shape[0] = -3");
    if (E(A, "vs_ddp_add_param", "ndim -1", FX_DDP)) R(PADD(.name = "p", .ndim = -1), "-1 dims");
    if (E(A, "vs_ddp_add_param", "ndim 9", FX_DDP)) R(PADD(.name = "p", .ndim = 9), "9 dims");
    if (E(A, "vs_ddp_add_param", "placement kind 7 on TP", FX_DDP)) {
        vs_placement p = vs_replicate();
        p.kind = (vs_placement_kind)7;
        R(PADD(.name = "p", .ndim = 1, .shape = {4}, .placements = {vs_replicate(), p}), "kind 7");
    }
    if (E(A, "vs_ddp_add_param", "Shard(3) of a 2-dim param", FX_DDP))
        R(PADD(.name = "p", .ndim = 2, .shape = {4, 4}, .placements = {vs_replicate(), vs_shard(3)}), "Shard(3)");
    if (E(A, "vs_ddp_add_param", "after finalize", FX_DDPF)) R(PADD(.name = "p", .ndim = 1, .shape = {4}), "after vs_ddp_finalize");
    if (E(A, "vs_ddp_finalize", "ddp NULL", FX_NONE)) R(vs_ddp_finalize(NULL), "ddp");
    if (E(A, "vs_ddp_finalize", "twice", FX_DDPF)) R(vs_ddp_finalize(x->ddp), "twice");
    if (E(A, "vs_ddp_num_params", "ddp NULL", FX_NONE)) R(vs_ddp_num_params(NULL), "ddp is NULL");
    if (E(A, "vs_ddp_param", "ddp NULL", FX_NONE)) RP(vs_ddp_param(NULL, 0), "ddp");
    if (E(A, "vs_ddp_synchronize", "ddp NULL", FX_NONE)) R(vs_ddp_synchronize(NULL), "ddp is NULL");
    if (E(A, "vs_ddp_param", "before finalize", FX_DDP)) RP(vs_ddp_param(x->ddp, 0), "vs_ddp_finalize");
    if (E(A, "vs_ddp_param", "index -1", FX_DDPF)) RP(vs_ddp_param(x->ddp, -1), "index -1");
    if (E(A, "vs_ddp_param", "index 2 of 2", FX_DDPF)) RP(vs_ddp_param(x->ddp, 2), "index 2");
    if (E(A, "vs_ddp_grad", "ddp NULL", FX_NONE)) RP(vs_ddp_grad(NULL, 0), "ddp");
    if (E(A, "vs_ddp_grad", "before finalize", FX_DDP)) RP(vs_ddp_grad(x->ddp, 0), "vs_ddp_finalize");
    if (E(A, "vs_ddp_grad", "index INT_MAX", FX_DDPF)) RP(vs_ddp_grad(x->ddp, INT_MAX), "index 2147483647");
    if (E(A, "vs_ddp_grad_synced", "ddp NULL", FX_NONE)) RP(vs_ddp_grad_synced(NULL, 0), "ddp");
    if (E(A, "vs_ddp_grad_synced", "before finalize", FX_DDP)) RP(vs_ddp_grad_synced(x->ddp, 0), "vs_ddp_finalize");
    if (E(A, "vs_ddp_grad_synced", "index -5", FX_DDPF)) RP(vs_ddp_grad_synced(x->ddp, -5), "index -5");
    if (E(A, "vs_ddp_grad_synced", "during a backward pass", FX_DDPF)) {
        vs_ddp_zero_grad(x->ddp);
        vs_ddp_grad(x->ddp, 0);
        RP(vs_ddp_grad_synced(x->ddp, 0), "backward pass");
        for (int i = 0; i < vs_ddp_num_params(x->ddp); i++) vs_ddp_grad_ready(x->ddp, i);
        vs_ddp_finish_grad_sync(x->ddp);
    }
    if (E(A, "vs_ddp_grad_dtype", "ddp NULL", FX_NONE)) RZ(vs_ddp_grad_dtype(NULL, 0), "ddp is NULL");
    if (E(A, "vs_ddp_grad_dtype", "index 99", FX_DDPF)) RZ(vs_ddp_grad_dtype(x->ddp, 99), "index 99");
    if (E(A, "vs_ddp_local_numel", "ddp NULL", FX_NONE)) R((int)vs_ddp_local_numel(NULL, 0), "ddp is NULL");
    if (E(A, "vs_ddp_local_numel", "index -1", FX_DDPF)) R((int)vs_ddp_local_numel(x->ddp, -1), "index -1");
    if (E(A, "vs_ddp_zero_grad", "ddp NULL", FX_NONE)) R(vs_ddp_zero_grad(NULL), "ddp");
    if (E(A, "vs_ddp_zero_grad", "before finalize", FX_DDP)) R(vs_ddp_zero_grad(x->ddp), "vs_ddp_finalize");
    if (E(A, "vs_ddp_zero_grad", "during a backward pass", FX_DDPF)) {
        vs_ddp_grad(x->ddp, 0);
        R(vs_ddp_zero_grad(x->ddp), "backward pass");
        for (int i = 0; i < vs_ddp_num_params(x->ddp); i++) vs_ddp_grad_ready(x->ddp, i);
        vs_ddp_finish_grad_sync(x->ddp);
    }
    if (E(A, "vs_ddp_set_sync", "ddp NULL", FX_NONE)) R(vs_ddp_set_sync(NULL, 1), "ddp");
    if (E(A, "vs_ddp_set_sync", "during a backward pass", FX_DDPF)) {
        vs_ddp_grad(x->ddp, 0);
        R(vs_ddp_set_sync(x->ddp, 0), "backward pass");
        for (int i = 0; i < vs_ddp_num_params(x->ddp); i++) vs_ddp_grad_ready(x->ddp, i);
        vs_ddp_finish_grad_sync(x->ddp);
    }
    if (E(A, "vs_ddp_grad_ready", "ddp NULL", FX_NONE)) R(vs_ddp_grad_ready(NULL, 0), "ddp");
    if (E(A, "vs_ddp_grad_ready", "before finalize", FX_DDP)) R(vs_ddp_grad_ready(x->ddp, 0), "vs_ddp_finalize");
    if (E(A, "vs_ddp_grad_ready", "index 2 of 2", FX_DDPF)) R(vs_ddp_grad_ready(x->ddp, 2), "index 2");
    if (E(A, "vs_ddp_grad_ready", "index -1", FX_DDPF)) R(vs_ddp_grad_ready(x->ddp, -1), "index -1");
    if (E(A, "vs_ddp_grad_ready", "twice in one pass", FX_DDPF)) {
        vs_ddp_zero_grad(x->ddp);
        vs_ddp_grad(x->ddp, 0);
        vs_ddp_grad_ready(x->ddp, 0);
        R(vs_ddp_grad_ready(x->ddp, 0), "twice");
        for (int i = 1; i < vs_ddp_num_params(x->ddp); i++) vs_ddp_grad_ready(x->ddp, i);
        vs_ddp_finish_grad_sync(x->ddp);
    }
    if (E(A, "vs_ddp_set_sync", "0 under ZeRO-2", FX_M4)) {
        vs_ddp* z = NULL;
        vs_ddp_init(&(vs_ddp_desc){.mesh = x->mesh, .zero = VS_ZERO_2}, &z);
        vs_ddp_add_param(z, &(vs_ddp_param_desc){.name = "w", .dtype = VS_F32, .ndim = 1, .shape = {8}}, NULL);
        vs_ddp_finalize(z);
        R(vs_ddp_set_sync(z, 0), "ZeRO-2");
        vs_ddp_free(z);
    }
    if (E(A, "vs_ddp_grad_ready", "before vs_ddp_grad under ZeRO-2", FX_M4)) {
        vs_ddp* z = NULL;
        vs_ddp_init(&(vs_ddp_desc){.mesh = x->mesh, .zero = VS_ZERO_2}, &z);
        vs_ddp_add_param(z, &(vs_ddp_param_desc){.name = "w", .dtype = VS_F32, .ndim = 1, .shape = {8}}, NULL);
        vs_ddp_finalize(z);
        R(vs_ddp_grad_ready(z, 0), "vs_ddp_grad");
        vs_ddp_free(z);
    }
    if (E(A, "vs_ddp_finish_grad_sync", "ddp NULL", FX_NONE)) R(vs_ddp_finish_grad_sync(NULL), "ddp");
    if (E(A, "vs_ddp_finish_grad_sync", "before finalize", FX_DDP)) R(vs_ddp_finish_grad_sync(x->ddp), "vs_ddp_finalize");
    if (E(A, "vs_ddp_finish_grad_sync", "twice", FX_DDPF)) {
        sw_backward(x);
        R(vs_ddp_finish_grad_sync(x->ddp), "twice");
    }
    if (E(A, "vs_ddp_clip_grad_norm_ex", "ddp NULL", FX_NONE)) R(vs_ddp_clip_grad_norm_ex(NULL, &clip, &norm), "ddp");
    if (E(A, "vs_ddp_clip_grad_norm_ex", "clip NULL", FX_DDPF)) R(vs_ddp_clip_grad_norm_ex(x->ddp, NULL, &norm), "clip");
    if (E(A, "vs_ddp_clip_grad_norm_ex", "max_norm NaN", FX_DDPF)) {
        vs_clip_desc c = {.max_norm = NAN, .error_if_nonfinite = 1};
        sw_backward(x);
        R(vs_ddp_clip_grad_norm_ex(x->ddp, &c, &norm), "max_norm");
    }
    if (E(A, "vs_ddp_clip_grad_norm_ex", "before finalize", FX_DDP)) R(vs_ddp_clip_grad_norm_ex(x->ddp, &clip, &norm), "vs_ddp_finalize");
    if (E(A, "vs_ddp_clip_grad_norm_ex", "no gradients yet", FX_DDPF)) R(vs_ddp_clip_grad_norm_ex(x->ddp, &clip, &norm), "no synchronized");
    if (E(A, "vs_ddp_clip_grad_norm_ex", "during a backward pass", FX_DDPF)) {
        vs_ddp_grad(x->ddp, 0);
        R(vs_ddp_clip_grad_norm_ex(x->ddp, &clip, &norm), "backward pass");
        for (int i = 0; i < vs_ddp_num_params(x->ddp); i++) vs_ddp_grad_ready(x->ddp, i);
        vs_ddp_finish_grad_sync(x->ddp);
    }
    if (E(A, "vs_ddp_clip_grad_norm_ex", "NaN gradient, error_if_nonfinite", FX_DDPF)) {
        vs_clip_desc c = {.max_norm = 1.0, .error_if_nonfinite = 1};
        vs_ddp_zero_grad(x->ddp);
        for (int i = 0; i < vs_ddp_num_params(x->ddp); i++) {
            float* g = (float*)vs_ddp_grad(x->ddp, i);
            if (g) g[0] = NAN;
            vs_ddp_grad_ready(x->ddp, i);
        }
        vs_ddp_finish_grad_sync(x->ddp);
        R(vs_ddp_clip_grad_norm_ex(x->ddp, &c, &norm), "not finite");
    }
    if (E(A, "vs_ddp_clip_grad_norm", "ddp NULL", FX_NONE)) R(vs_ddp_clip_grad_norm(NULL, 1.0, &norm), "ddp");
    if (E(A, "vs_ddp_clip_grad_norm", "max_norm inf", FX_DDPF)) {
        sw_backward(x);
        R(vs_ddp_clip_grad_norm(x->ddp, INFINITY, &norm), "max_norm inf");
    }
    if (E(A, "vs_ddp_clip_grad_norm", "max_norm -NaN", FX_DDPF)) {
        sw_backward(x);
        R(vs_ddp_clip_grad_norm(x->ddp, -NAN, &norm), "max_norm");
    }
    if (E(A, "vs_ddp_step", "ddp NULL", FX_NONE)) R(vs_ddp_step(NULL, 0.1), "ddp");
    if (E(A, "vs_ddp_step", "before finalize", FX_DDP)) R(vs_ddp_step(x->ddp, 0.1), "vs_ddp_finalize");
    if (E(A, "vs_ddp_step", "no gradients", FX_DDPF)) R(vs_ddp_step(x->ddp, 0.1), "no synchronized");
    if (E(A, "vs_ddp_step", "twice after one sync", FX_DDPF)) {
        sw_backward(x);
        vs_ddp_step(x->ddp, 0.1);
        R(vs_ddp_step(x->ddp, 0.1), "no synchronized");
    }
    if (E(A, "vs_ddp_step", "during a backward pass", FX_DDPF)) {
        vs_ddp_grad(x->ddp, 0);
        R(vs_ddp_step(x->ddp, 0.1), "finish_grad_sync");
        for (int i = 0; i < vs_ddp_num_params(x->ddp); i++) vs_ddp_grad_ready(x->ddp, i);
        vs_ddp_finish_grad_sync(x->ddp);
    }
    if (E(A, "vs_ddp_step", "lr NaN", FX_DDPF)) {
        sw_backward(x);
        R(vs_ddp_step(x->ddp, NAN), "lr");
    }
    if (E(A, "vs_ddp_step", "lr -0.1", FX_DDPF)) {
        sw_backward(x);
        R(vs_ddp_step(x->ddp, -0.1), "lr -0.1");
    }
    if (E(A, "vs_ddp_step", "lr inf", FX_DDPF)) {
        sw_backward(x);
        R(vs_ddp_step(x->ddp, INFINITY), "lr inf");
    }
    if (E(A, "vs_ddp_step_count", "ddp NULL", FX_NONE)) R((int)vs_ddp_step_count(NULL), "ddp is NULL");
    if (E(A, "vs_ddp_skipped_steps", "ddp NULL", FX_NONE)) R((int)vs_ddp_skipped_steps(NULL), "ddp is NULL");
    if (E(A, "vs_ddp_memory_usage", "ddp NULL", FX_NONE)) R(vs_ddp_memory_usage(NULL, &mem), "ddp");
    if (E(A, "vs_ddp_memory_usage", "out NULL", FX_DDPF)) R(vs_ddp_memory_usage(x->ddp, NULL), "out");
    if (E(A, "vs_ddp_free", "ddp NULL", FX_NONE)) DOC(vs_ddp_free(NULL) == VS_OK, "VS_OK (documented)");
#undef DINIT
#undef PADD
}

static void sweep_lr(sw_ctx* x)
{
    const char* A = "lr";
    vs_lr_schedule s;
    memset(&s, 0, sizeof s);
    s.kind = VS_LR_COSINE;
    s.lr = 1e-3;
    s.min_lr = 1e-5;
    s.warmup_steps = 10;
    s.total_steps = 100;
    if (E(A, "vs_lr_check", "schedule NULL", FX_NONE)) R(vs_lr_check(NULL), "schedule");
    if (E(A, "vs_lr_check", "kind 99", FX_NONE)) {
        s.kind = (vs_lr_kind)99;
        R(vs_lr_check(&s), "kind 99");
    }
    if (E(A, "vs_lr_check", "kind -1", FX_NONE)) {
        s.kind = (vs_lr_kind)-1;
        R(vs_lr_check(&s), "kind -1");
    }
    if (E(A, "vs_lr_check", "lr NaN", FX_NONE)) {
        s.lr = NAN;
        R(vs_lr_check(&s), "lr");
    }
    if (E(A, "vs_lr_check", "lr -1", FX_NONE)) {
        s.lr = -1;
        R(vs_lr_check(&s), "lr -1");
    }
    if (E(A, "vs_lr_check", "min_lr inf", FX_NONE)) {
        s.min_lr = INFINITY;
        R(vs_lr_check(&s), "min_lr inf");
    }
    if (E(A, "vs_lr_check", "warmup_steps -1", FX_NONE)) {
        s.warmup_steps = -1;
        R(vs_lr_check(&s), "warmup_steps -1");
    }
    if (E(A, "vs_lr_check", "total_steps -1", FX_NONE)) {
        s.total_steps = -1;
        R(vs_lr_check(&s), "total_steps -1");
    }
    if (E(A, "vs_lr_check", "cosine total_steps 0", FX_NONE)) {
        s.warmup_steps = 0;
        s.total_steps = 0;
        R(vs_lr_check(&s), "total_steps 0");
    }
    if (E(A, "vs_lr_check", "linear total_steps < warmup_steps", FX_NONE)) {
        s.kind = VS_LR_LINEAR;
        s.total_steps = 5;
        R(vs_lr_check(&s), "total_steps 5");
    }
    if (E(A, "vs_lr_check", "step_size -1", FX_NONE)) {
        s.kind = VS_LR_STEP;
        s.step_size = -1;
        R(vs_lr_check(&s), "step_size -1");
    }
    if (E(A, "vs_lr_check", "step gamma NaN", FX_NONE)) {
        s.kind = VS_LR_STEP;
        s.step_size = 10;
        s.gamma = NAN;
        R(vs_lr_check(&s), "gamma");
    }
    if (E(A, "vs_lr_check", "step gamma -0.5", FX_NONE)) {
        s.kind = VS_LR_STEP;
        s.step_size = 10;
        s.gamma = -0.5;
        R(vs_lr_check(&s), "gamma -0.5");
    }
    if (E(A, "vs_lr_at", "schedule NULL", FX_NONE)) RN(vs_lr_at(NULL, 0), "schedule");
    if (E(A, "vs_lr_at", "kind 99", FX_NONE)) {
        s.kind = (vs_lr_kind)99;
        RN(vs_lr_at(&s, 5), "kind 99");
    }
    if (E(A, "vs_lr_at", "step -1", FX_NONE)) RN(vs_lr_at(&s, -1), "step -1");
    if (E(A, "vs_lr_at", "step INT64_MIN", FX_NONE)) RN(vs_lr_at(&s, INT64_MIN), "step -");
    if (E(A, "vs_lr_at", "lr -1", FX_NONE)) {
        s.lr = -1;
        RN(vs_lr_at(&s, 5), "lr -1");
    }
    if (E(A, "vs_lr_at", "total_steps INT64_MIN", FX_NONE)) {
        s.total_steps = INT64_MIN;
        RN(vs_lr_at(&s, 5), "total_steps");
    }
}

/* ------------------------------------------------------------------------ */
/* vescale_pipe.h */

/* A schedule of the fixture's shape from text (world: the entry's, or NULL). */
static vs_pipe_sched* sw_sched(const vs_world* w, const char* text)
{
    vs_pipe_sched* s = NULL;
    vs_pipe_sched_parse(w, text ? text : sw_sched_text, &s);
    return s;
}

/* A schedule made without a world (vs_pipe_sched_new's), freed. */
static vs_pipe_sched* sw_freed_sched(void)
{
    vs_pipe_sched* s = NULL;
    vs_pipe_sched_new(NULL, 2, 2, NULL, 2, &s);
    vs_pipe_sched_free(s);
    return s;
}

/* The bad calls a unit's forward makes (FX_PIPE, x->probe; >= 100: after its output). */
static vs_result sw_probe(sw_ctx* x, vs_pipe_call* c)
{
    void* d = NULL;
    int64_t sh[2] = {SW_ROWS, SW_W};
    switch (x->probe) {
    case 1: return vs_pipe_output(c, 5, VS_F32, 2, sh, &d);
    case 2: return vs_pipe_output(c, -1, VS_F32, 2, sh, &d);
    case 3: return vs_pipe_output(c, 0, (vs_dtype)99, 2, sh, &d);
    case 4: return vs_pipe_output(c, 0, VS_F32, 9, sh, &d);
    case 5: return vs_pipe_output(c, 0, VS_F32, 2, NULL, &d);
    case 6: {
        int64_t b[2] = {-1, SW_W};
        return vs_pipe_output(c, 0, VS_F32, 2, b, &d);
    }
    case 7: {
        int64_t b[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
        return vs_pipe_output(c, 0, VS_F32, 2, b, &d);
    }
    case 8: {
        int64_t b[2] = {SW_ROWS, 5};
        return vs_pipe_output(c, 0, VS_F32, 2, b, &d);
    }
    case 9: return vs_pipe_output(c, 0, VS_F32, 2, sh, NULL);
    case 10: return vs_pipe_output(c, 0, VS_I32, 2, sh, &d);
    case 11: return vs_pipe_save(c, SIZE_MAX, &d);
    case 12: return vs_pipe_save(c, 16, NULL);
    case 13: return vs_pipe_save(c, SIZE_MAX - 8, &d);
    case 100: return vs_pipe_output(c, 0, VS_F32, 2, sh, &d);
    case 101: {
        vs_result r = vs_pipe_save(c, 16, &d);
        return r ? r : vs_pipe_save(c, 16, &d);
    }
    }
    return VS_OK;
}

/* Runs the fixture's pipe with probe k and takes the probe's outcome (stage 0's units make it). */
static void sw_probe_run(sw_ctx* x, int k, const char* needle)
{
    x->probe = k;
    x->probe_ran = 0;
    vs_pipe_run(x->pipe, x->sched, NULL);
    if (vs_pipe_stage(x->pipe) != 0) {
        x->outcome = SW_IGNORED, x->detail[0] = 0;
        return;
    }
    if (!x->probe_ran) {
        sw_set(x, SW_SETUP, "the probe did not run");
        return;
    }
    if (x->probe_r >= 0) {
        sw_set(x, SW_SILENT, "returned %d", x->probe_r);
        return;
    }
    if (!x->probe_msg[0]) sw_set(x, SW_VAGUE, "%s with no message", vs_result_string(x->probe_r));
    else if (!sw_names(x->probe_msg, needle))
        sw_set(x, SW_VAGUE, "%s: '%s' does not name '%s'", vs_result_string(x->probe_r), x->probe_msg, needle);
    else sw_set(x, SW_CLEAR, "%s: %s", vs_result_string(x->probe_r), x->probe_msg);
}

static void sweep_pipe_sched(sw_ctx* x)
{
    const char* A = "pipe-sched";
    vs_pipe_sched* o = NULL;
    vs_pipe_instr in;
    vs_pipe_kind k;
    int cs[2] = {0, 5}, cs0[2] = {0, 0};
    if (E(A, "vs_pipe_version", "(no input)", FX_NONE))
        DOC(vs_pipe_version() == VESCALE_VERSION_NUMBER, "returned %d", vs_pipe_version());
    if (E(A, "vs_pipe_sched_new", "out NULL", FX_NONE)) R(vs_pipe_sched_new(NULL, 2, 2, NULL, 2, NULL), "out");
    if (E(A, "vs_pipe_sched_new", "stages 0", FX_NONE)) R(vs_pipe_sched_new(NULL, 0, 2, NULL, 2, &o), "stages = 0");
    if (E(A, "vs_pipe_sched_new", "stages 257", FX_NONE)) R(vs_pipe_sched_new(NULL, 257, 257, NULL, 2, &o), "stages = 257");
    if (E(A, "vs_pipe_sched_new", "nchunks 1 < 2 stages", FX_NONE)) R(vs_pipe_sched_new(NULL, 2, 1, NULL, 2, &o), "nchunks = 1");
    if (E(A, "vs_pipe_sched_new", "nchunks 257", FX_NONE)) R(vs_pipe_sched_new(NULL, 2, 257, NULL, 2, &o), "nchunks = 257");
    if (E(A, "vs_pipe_sched_new", "microbatches 0", FX_NONE)) R(vs_pipe_sched_new(NULL, 2, 2, NULL, 0, &o), "microbatch count 0");
    if (E(A, "vs_pipe_sched_new", "microbatches -5", FX_NONE)) R(vs_pipe_sched_new(NULL, 2, 2, NULL, -5, &o), "-5");
    if (E(A, "vs_pipe_sched_new", "microbatches INT_MAX", FX_NONE))
        R(vs_pipe_sched_new(NULL, 2, 2, NULL, INT_MAX, &o), "2147483647");
    if (E(A, "vs_pipe_sched_new", "chunk_stage {0, 5}", FX_NONE)) R(vs_pipe_sched_new(NULL, 2, 2, cs, 2, &o), "chunk_stage[1] = 5");
    if (E(A, "vs_pipe_sched_new", "chunk_stage {0, 0} (stage 1 empty)", FX_NONE))
        R(vs_pipe_sched_new(NULL, 2, 2, cs0, 2, &o), "stage 1 holds no chunk");
    if (E(A, "vs_pipe_sched_push", "schedule NULL", FX_NONE)) R(vs_pipe_sched_push(NULL, 0, VS_PIPE_F, 0, 0), "schedule is NULL");
    if (E(A, "vs_pipe_sched_push", "stage -1", FX_NONE)) R(vs_pipe_sched_push(sw_sched(NULL, NULL), -1, VS_PIPE_F, 0, 0), "stage -1");
    if (E(A, "vs_pipe_sched_push", "stage 2 of 2", FX_NONE)) R(vs_pipe_sched_push(sw_sched(NULL, NULL), 2, VS_PIPE_F, 0, 0), "stage 2");
    if (E(A, "vs_pipe_sched_push", "op NOP", FX_NONE)) R(vs_pipe_sched_push(sw_sched(NULL, NULL), 0, VS_PIPE_NOP, 0, 0), "op 0");
    if (E(A, "vs_pipe_sched_push", "op 99", FX_NONE)) R(vs_pipe_sched_push(sw_sched(NULL, NULL), 0, (vs_pipe_op)99, 0, 0), "op 99");
    if (E(A, "vs_pipe_sched_push", "chunk 5 of 2", FX_NONE)) R(vs_pipe_sched_push(sw_sched(NULL, NULL), 0, VS_PIPE_F, 5, 0), "chunk 5");
    if (E(A, "vs_pipe_sched_push", "SYNC chunk -1", FX_NONE)) R(vs_pipe_sched_push(sw_sched(NULL, NULL), 0, VS_PIPE_SYNC, -1, 0), "chunk -1");
    if (E(A, "vs_pipe_sched_push", "microbatch -1", FX_NONE)) R(vs_pipe_sched_push(sw_sched(NULL, NULL), 0, VS_PIPE_F, 0, -1), "microbatch -1");
    if (E(A, "vs_pipe_sched_push", "microbatch 2 of 2", FX_NONE)) R(vs_pipe_sched_push(sw_sched(NULL, NULL), 0, VS_PIPE_W, 0, 2), "microbatch 2");
    if (E(A, "vs_pipe_sched_push", "freed schedule", FX_PIPE)) {
        vs_pipe_sched* s = sw_sched(x->w, NULL);
        vs_pipe_sched_free(s);
        R(vs_pipe_sched_push(s, 0, VS_PIPE_F, 0, 0), "already freed");
    }
    // made without a world (issue 33): this thread keeps the last freed ones readable, as a world keeps its own
    if (E(A, "vs_pipe_sched_push", "freed schedule, NULL world", FX_NONE))
        R(vs_pipe_sched_push(sw_freed_sched(), 0, VS_PIPE_F, 0, 0), "already freed");
    if (E(A, "vs_pipe_sched_stages", "freed schedule, NULL world", FX_NONE)) R(vs_pipe_sched_stages(sw_freed_sched()), "already freed");
    if (E(A, "vs_pipe_sched_free", "freed twice, NULL world", FX_NONE)) R(vs_pipe_sched_free(sw_freed_sched()), "already freed");
    if (E(A, "vs_pipe_sched_print", "freed schedule, NULL world", FX_NONE)) {
        char b[64];
        R(vs_pipe_sched_print(sw_freed_sched(), b, sizeof b), "already freed");
    }
    if (E(A, "vs_pipe_simulate", "freed schedule, NULL world (vs_pipe_generate's)", FX_NONE)) {
        vs_pipe_sim sim;
        vs_pipe_sched* s = NULL;
        vs_pipe_generate(NULL, VS_PIPE_1F1B, 2, 0, 2, &s);
        vs_pipe_sched_free(s);
        R(vs_pipe_simulate(s, NULL, &sim), "already freed");
    }
    if (E(A, "vs_pipe_sched_check", "freed schedule, NULL world (vs_pipe_sched_forward's)", FX_NONE)) {
        vs_pipe_sched* s = NULL;
        vs_pipe_sched_forward(sw_sched(NULL, NULL), &s);
        vs_pipe_sched_free(s);
        R(vs_pipe_sched_check(s, NULL), "already freed");
    }
    if (E(A, "vs_pipe_sched_stages", "schedule NULL", FX_NONE)) R(vs_pipe_sched_stages(NULL), "schedule is NULL");
    if (E(A, "vs_pipe_sched_stages", "freed schedule", FX_PIPE)) {
        vs_pipe_sched* s = sw_sched(x->w, NULL);
        vs_pipe_sched_free(s);
        R(vs_pipe_sched_stages(s), "already freed");
    }
    if (E(A, "vs_pipe_sched_nchunks", "schedule NULL", FX_NONE)) R(vs_pipe_sched_nchunks(NULL), "schedule is NULL");
    if (E(A, "vs_pipe_sched_mbs", "schedule NULL", FX_NONE)) R(vs_pipe_sched_mbs(NULL), "schedule is NULL");
    if (E(A, "vs_pipe_sched_mbs", "freed schedule", FX_PIPE)) {
        vs_pipe_sched* s = sw_sched(x->w, NULL);
        vs_pipe_sched_free(s);
        R(vs_pipe_sched_mbs(s), "already freed");
    }
    if (E(A, "vs_pipe_sched_chunk_stage", "schedule NULL", FX_NONE)) R(vs_pipe_sched_chunk_stage(NULL, 0), "schedule is NULL");
    if (E(A, "vs_pipe_sched_chunk_stage", "chunk 2 of 2", FX_NONE)) R(vs_pipe_sched_chunk_stage(sw_sched(NULL, NULL), 2), "chunk 2");
    if (E(A, "vs_pipe_sched_chunk_stage", "chunk -1", FX_NONE)) R(vs_pipe_sched_chunk_stage(sw_sched(NULL, NULL), -1), "chunk -1");
    if (E(A, "vs_pipe_sched_len", "schedule NULL", FX_NONE)) R(vs_pipe_sched_len(NULL, 0), "schedule is NULL");
    if (E(A, "vs_pipe_sched_len", "stage 2 of 2", FX_NONE)) R(vs_pipe_sched_len(sw_sched(NULL, NULL), 2), "stage 2");
    if (E(A, "vs_pipe_sched_len", "stage INT_MIN", FX_NONE)) R(vs_pipe_sched_len(sw_sched(NULL, NULL), INT_MIN), "stage -2147483648");
    if (E(A, "vs_pipe_sched_at", "schedule NULL", FX_NONE)) R(vs_pipe_sched_at(NULL, 0, 0, &in), "schedule is NULL");
    if (E(A, "vs_pipe_sched_at", "out NULL", FX_NONE)) R(vs_pipe_sched_at(sw_sched(NULL, NULL), 0, 0, NULL), "out is NULL");
    if (E(A, "vs_pipe_sched_at", "stage 9", FX_NONE)) R(vs_pipe_sched_at(sw_sched(NULL, NULL), 9, 0, &in), "stage 9");
    if (E(A, "vs_pipe_sched_at", "position -1", FX_NONE)) R(vs_pipe_sched_at(sw_sched(NULL, NULL), 0, -1, &in), "position -1");
    if (E(A, "vs_pipe_sched_at", "position 10 of 10", FX_NONE)) R(vs_pipe_sched_at(sw_sched(NULL, NULL), 0, 10, &in), "position 10");
    if (E(A, "vs_pipe_sched_free", "schedule NULL", FX_NONE)) DOC(vs_pipe_sched_free(NULL) == VS_OK, "VS_OK (documented)");
    if (E(A, "vs_pipe_sched_free", "freed twice", FX_PIPE)) {
        vs_pipe_sched* s = sw_sched(x->w, NULL);
        vs_pipe_sched_free(s);
        R(vs_pipe_sched_free(s), "already freed");
    }
    if (E(A, "vs_pipe_sched_print", "schedule NULL", FX_NONE)) {
        char b[64];
        R(vs_pipe_sched_print(NULL, b, sizeof b), "schedule is NULL");
    }
    if (E(A, "vs_pipe_sched_print", "freed schedule", FX_PIPE)) {
        char b[64];
        vs_pipe_sched* s = sw_sched(x->w, NULL);
        vs_pipe_sched_free(s);
        R(vs_pipe_sched_print(s, b, sizeof b), "already freed");
    }
    if (E(A, "vs_pipe_sched_parse", "text NULL", FX_NONE)) R(vs_pipe_sched_parse(NULL, NULL, &o), "text is NULL");
    if (E(A, "vs_pipe_sched_parse", "out NULL", FX_NONE)) R(vs_pipe_sched_parse(NULL, sw_sched_text, NULL), "out is NULL");
    if (E(A, "vs_pipe_sched_parse", "'' (empty)", FX_NONE)) R(vs_pipe_sched_parse(NULL, "", &o), "header");
    if (E(A, "vs_pipe_sched_parse", "comments only", FX_NONE)) R(vs_pipe_sched_parse(NULL, "# a\n\n  # b\n", &o), "header");
    if (E(A, "vs_pipe_sched_parse", "'pipe stages=2'", FX_NONE)) R(vs_pipe_sched_parse(NULL, "pipe stages=2\n", &o), "line 1");
    if (E(A, "vs_pipe_sched_parse", "chunks=0", FX_NONE)) R(vs_pipe_sched_parse(NULL, "pipe stages=2 chunks=0 mbs=2 place=0\n", &o), "chunks=0");
    if (E(A, "vs_pipe_sched_parse", "chunks=999", FX_NONE)) R(vs_pipe_sched_parse(NULL, "pipe stages=2 chunks=999 mbs=2 place=0\n", &o), "chunks=999");
    if (E(A, "vs_pipe_sched_parse", "place= with 1 of 2 stages", FX_NONE))
        R(vs_pipe_sched_parse(NULL, "pipe stages=2 chunks=2 mbs=2 place=0\n", &o), "place=");
    if (E(A, "vs_pipe_sched_parse", "place=0,-1", FX_NONE)) R(vs_pipe_sched_parse(NULL, "pipe stages=2 chunks=2 mbs=2 place=0,-1\n", &o), "place=");
    if (E(A, "vs_pipe_sched_parse", "mbs=-1", FX_NONE)) R(vs_pipe_sched_parse(NULL, "pipe stages=2 chunks=2 mbs=-1 place=0,1\n", &o), "-1");
    if (E(A, "vs_pipe_sched_parse", "mbs=2147483647", FX_NONE))
        R(vs_pipe_sched_parse(NULL, "pipe stages=2 chunks=2 mbs=2147483647 place=0,1\n", &o), "2147483647");
    if (E(A, "vs_pipe_sched_parse", "mbs=99999999999 (overflows int)", FX_NONE))
        R(vs_pipe_sched_parse(NULL, "pipe stages=2 chunks=2 mbs=99999999999 place=0,1\n", &o), "mbs");
    if (E(A, "vs_pipe_sched_parse", "stage line '5:'", FX_NONE))
        R(vs_pipe_sched_parse(NULL, "pipe stages=2 chunks=2 mbs=2 place=0,1\n5: F0.0\n", &o), "\"5:\"");
    if (E(A, "vs_pipe_sched_parse", "stage listed twice", FX_NONE))
        R(vs_pipe_sched_parse(NULL, "pipe stages=2 chunks=2 mbs=2 place=0,1\n0: F0.0\n0: F0.1\n", &o), "stage 0 listed twice");
    if (E(A, "vs_pipe_sched_parse", "instruction 'X0.0'", FX_NONE))
        R(vs_pipe_sched_parse(NULL, "pipe stages=2 chunks=2 mbs=2 place=0,1\n0: X0.0\n", &o), "\"X0.0\"");
    if (E(A, "vs_pipe_sched_parse", "instruction 'F99999999999.0'", FX_NONE))
        R(vs_pipe_sched_parse(NULL, "pipe stages=2 chunks=2 mbs=2 place=0,1\n0: F99999999999.0\n", &o), "F99999999999.0");
    if (E(A, "vs_pipe_sched_parse", "instruction 'F0.5' of 2 microbatches", FX_NONE))
        R(vs_pipe_sched_parse(NULL, "pipe stages=2 chunks=2 mbs=2 place=0,1\n0: F0.5\n", &o), "microbatch 5");
    if (E(A, "vs_pipe_sched_parse", "instruction 'F0' (no microbatch)", FX_NONE))
        R(vs_pipe_sched_parse(NULL, "pipe stages=2 chunks=2 mbs=2 place=0,1\n0: F0\n", &o), "\"F0\"");
    if (E(A, "vs_pipe_sched_parse", "instruction 'STEP3'", FX_NONE))
        R(vs_pipe_sched_parse(NULL, "pipe stages=2 chunks=2 mbs=2 place=0,1\n0: STEP3\n", &o), "\"STEP3\"");
    if (E(A, "vs_pipe_sched_add_comm", "schedule NULL", FX_NONE)) R(vs_pipe_sched_add_comm(NULL), "schedule is NULL");
    if (E(A, "vs_pipe_sched_add_comm", "freed schedule", FX_PIPE)) {
        vs_pipe_sched* s = sw_sched(x->w, NULL);
        vs_pipe_sched_free(s);
        R(vs_pipe_sched_add_comm(s), "already freed");
    }
    if (E(A, "vs_pipe_sched_check", "schedule NULL", FX_NONE)) R(vs_pipe_sched_check(NULL, NULL), "schedule is NULL");
    if (E(A, "vs_pipe_sched_check", "freed schedule", FX_PIPE)) {
        vs_pipe_sched* s = sw_sched(x->w, NULL);
        vs_pipe_sched_free(s);
        R(vs_pipe_sched_check(s, NULL), "already freed");
    }
    if (E(A, "vs_pipe_sched_check", "max_live_activations -1", FX_NONE))
        R(vs_pipe_sched_check(sw_sched(NULL, NULL), &(vs_pipe_check_desc){.max_live_activations = -1}), "max_live_activations = -1");
    if (E(A, "vs_pipe_sched_check", "max_live_activations INT64_MIN", FX_NONE))
        R(vs_pipe_sched_check(sw_sched(NULL, NULL), &(vs_pipe_check_desc){.max_live_activations = INT64_MIN}), "max_live_activations");
    if (E(A, "vs_pipe_sched_check", "2 activations held, bound 1", FX_NONE))
        R(vs_pipe_sched_check(sw_sched(NULL, NULL), &(vs_pipe_check_desc){.max_live_activations = 1}), "the bound is 1");
    if (E(A, "vs_pipe_sched_check", "backward before its forward", FX_NONE))
        R(vs_pipe_sched_check(sw_sched(NULL, "pipe stages=1 chunks=1 mbs=1 place=0\n0: BW0.0 F0.0\n"), NULL), "before the forward");
    if (E(A, "vs_pipe_sched_check", "backwards out of microbatch order", FX_NONE))
        R(vs_pipe_sched_check(sw_sched(NULL, "pipe stages=1 chunks=1 mbs=2 place=0\n0: F0.0 F0.1 BW0.1 BW0.0\n"), NULL),
          "microbatch order");
    if (E(A, "vs_pipe_sched_check", "a receive that never comes (deadlock)", FX_NONE))
        R(vs_pipe_sched_check(sw_sched(NULL, "pipe stages=2 chunks=2 mbs=1 place=0,1\n0: RB0.0 F0.0 SF0.0 BW0.0\n"
                                             "1: RF1.0 F1.0 BW1.0 SB1.0\n"), NULL), "deadlock");
    if (E(A, "vs_pipe_sched_check", "a forward missing", FX_NONE))
        R(vs_pipe_sched_check(sw_sched(NULL, "pipe stages=1 chunks=1 mbs=2 place=0\n0: F0.0 BW0.0\n"), NULL), "microbatch 1");
    if (E(A, "vs_pipe_kind_name", "kind 99", FX_NONE))
        DOC(!strcmp(vs_pipe_kind_name((vs_pipe_kind)99), "invalid"), "'%s'", vs_pipe_kind_name((vs_pipe_kind)99));
    if (E(A, "vs_pipe_kind_name", "kind -1", FX_NONE))
        DOC(!strcmp(vs_pipe_kind_name((vs_pipe_kind)-1), "invalid"), "'%s'", vs_pipe_kind_name((vs_pipe_kind)-1));
    if (E(A, "vs_pipe_kind_parse", "name NULL", FX_NONE)) R(vs_pipe_kind_parse(NULL, &k), "name is NULL");
    if (E(A, "vs_pipe_kind_parse", "out NULL", FX_NONE)) R(vs_pipe_kind_parse("gpipe", NULL), "out is NULL");
    if (E(A, "vs_pipe_kind_parse", "'GPipe'", FX_NONE)) R(vs_pipe_kind_parse("GPipe", &k), "\"GPipe\"");
    if (E(A, "vs_pipe_kind_parse", "'invalid'", FX_NONE)) R(vs_pipe_kind_parse("invalid", &k), "\"invalid\"");
    if (E(A, "vs_pipe_kind_parse", "''", FX_NONE)) R(vs_pipe_kind_parse("", &k), "\"\"");
    if (E(A, "vs_pipe_generate", "out NULL", FX_NONE)) R(vs_pipe_generate(NULL, VS_PIPE_1F1B, 2, 0, 2, NULL), "out is NULL");
    if (E(A, "vs_pipe_generate", "kind 0", FX_NONE)) R(vs_pipe_generate(NULL, (vs_pipe_kind)0, 2, 0, 2, &o), "kind 0");
    if (E(A, "vs_pipe_generate", "kind 99", FX_NONE)) R(vs_pipe_generate(NULL, (vs_pipe_kind)99, 2, 0, 2, &o), "kind 99");
    if (E(A, "vs_pipe_generate", "stages 0", FX_NONE)) R(vs_pipe_generate(NULL, VS_PIPE_1F1B, 0, 0, 2, &o), "stages = 0");
    if (E(A, "vs_pipe_generate", "stages 300", FX_NONE)) R(vs_pipe_generate(NULL, VS_PIPE_1F1B, 300, 0, 2, &o), "stages = 300");
    if (E(A, "vs_pipe_generate", "microbatches 0", FX_NONE)) R(vs_pipe_generate(NULL, VS_PIPE_GPIPE, 2, 0, 0, &o), "microbatch count 0");
    if (E(A, "vs_pipe_generate", "microbatches INT_MAX", FX_NONE)) R(vs_pipe_generate(NULL, VS_PIPE_GPIPE, 2, 0, INT_MAX, &o), "2147483647");
    if (E(A, "vs_pipe_generate", "zbv, chunks 3", FX_NONE)) R(vs_pipe_generate(NULL, VS_PIPE_ZBV, 2, 3, 2, &o), "chunks = 3");
    if (E(A, "vs_pipe_generate", "1f1b, chunks 2", FX_NONE)) R(vs_pipe_generate(NULL, VS_PIPE_1F1B, 2, 2, 2, &o), "chunks = 2");
    if (E(A, "vs_pipe_generate", "interleaved, chunks -1", FX_NONE)) R(vs_pipe_generate(NULL, VS_PIPE_INTERLEAVED, 2, -1, 2, &o), "chunks = -1");
    if (E(A, "vs_pipe_generate", "interleaved, 2 stages x 200 chunks", FX_NONE))
        R(vs_pipe_generate(NULL, VS_PIPE_INTERLEAVED, 2, 200, 2, &o), "chunks = 200");
}

static void sweep_pipe_sim(sw_ctx* x)
{
    const char* A = "pipe-sim";
    vs_pipe_sim sim;
    char b[256];
    double nanv[2] = {1, NAN};
    double t[2][10] = {{0}}, tb[10];
    const double* t0[2] = {t[0], t[1]};
    const double* t1[2] = {t[0], t[1]};
    char path[400];
    snprintf(path, sizeof path, "%s/trace.json", x->dir ? x->dir : "/tmp");
    for (int i = 0; i < 10; i++) tb[i] = i;
#define SIM(...) vs_pipe_simulate(sw_sched(NULL, NULL), &(vs_pipe_costs){__VA_ARGS__}, &sim)
    if (E(A, "vs_pipe_simulate", "schedule NULL", FX_NONE)) R(vs_pipe_simulate(NULL, NULL, &sim), "schedule is NULL");
    if (E(A, "vs_pipe_simulate", "out NULL", FX_NONE)) R(vs_pipe_simulate(sw_sched(NULL, NULL), NULL, NULL), "out is NULL");
    if (E(A, "vs_pipe_simulate", "f -1", FX_NONE)) R(SIM(.f = -1, .b = 1, .w = 1), "f of chunk 0 = -1");
    if (E(A, "vs_pipe_simulate", "b NaN", FX_NONE)) R(SIM(.f = 1, .b = NAN, .w = 1), "b of chunk 0 = nan|b of chunk 0 = -nan");
    if (E(A, "vs_pipe_simulate", "w inf", FX_NONE)) R(SIM(.f = 1, .b = 1, .w = INFINITY), "w of chunk 0 = inf");
    if (E(A, "vs_pipe_simulate", "p2p -1", FX_NONE)) R(SIM(.p2p = -1), "p2p = -1");
    if (E(A, "vs_pipe_simulate", "p2p NaN", FX_NONE)) R(SIM(.p2p = NAN), "p2p = nan|p2p = -nan");
    if (E(A, "vs_pipe_simulate", "chunk_f {1, NaN}", FX_NONE)) R(SIM(.chunk_f = nanv), "f of chunk 1");
    if (E(A, "vs_pipe_simulate", "f 1e308 (the sum overflows)", FX_NONE)) R(SIM(.f = 1e308, .b = 1e308, .w = 1e308), "1e+308");
    if (E(A, "vs_pipe_simulate", "p2p 1e308 (the sum overflows)", FX_NONE)) R(SIM(.f = 1, .p2p = 1e308), "1e+308");
    if (E(A, "vs_pipe_simulate", "freed schedule", FX_PIPE)) {
        vs_pipe_sched* s = sw_sched(x->w, NULL);
        vs_pipe_sched_free(s);
        R(vs_pipe_simulate(s, NULL, &sim), "already freed");
    }
    if (E(A, "vs_pipe_draw", "schedule NULL", FX_NONE)) R(vs_pipe_draw(NULL, NULL, 0, b, sizeof b), "schedule is NULL");
    if (E(A, "vs_pipe_draw", "slot -1", FX_NONE)) R(vs_pipe_draw(sw_sched(NULL, NULL), NULL, -1, b, sizeof b), "slot = -1");
    if (E(A, "vs_pipe_draw", "slot NaN", FX_NONE)) R(vs_pipe_draw(sw_sched(NULL, NULL), NULL, NAN, b, sizeof b), "slot = nan|slot = -nan");
    // a slot so small that the run needs 1e300 columns: cut at 4096, as documented (it crashed: float-to-int overflow)
    if (E(A, "vs_pipe_draw", "slot 1e-300 (tiny)", FX_NONE)) {
        char big[40000];
        int n = vs_pipe_draw(sw_sched(NULL, NULL), NULL, 1e-300, big, sizeof big);
        DOC(n > 0 && (size_t)n < sizeof big && strstr(big, "cut at 4096 columns") && strstr(big, " 0 | F0  -   -"),
            "returned %d: %.200s", n, big);
    }
    if (E(A, "vs_pipe_draw", "slot 5e-324 (denormal)", FX_NONE)) {
        char big[40000];
        int n = vs_pipe_draw(sw_sched(NULL, NULL), NULL, 5e-324, big, sizeof big);
        DOC(n > 0 && (size_t)n < sizeof big && strstr(big, "cut at 4096 columns"), "returned %d: %.200s", n, big);
    }
    if (E(A, "vs_pipe_draw", "costs f -1", FX_NONE))
        R(vs_pipe_draw(sw_sched(NULL, NULL), &(vs_pipe_costs){.f = -1}, 0, b, sizeof b), "f of chunk 0 = -1");
    if (E(A, "vs_pipe_draw", "costs 1e308", FX_NONE))
        R(vs_pipe_draw(sw_sched(NULL, NULL), &(vs_pipe_costs){.f = 1e308, .b = 1e308}, 0, b, sizeof b), "1e+308");
    if (E(A, "vs_pipe_draw", "buf NULL, cap 64", FX_NONE)) R(vs_pipe_draw(sw_sched(NULL, NULL), NULL, 0, NULL, 64), "buf is NULL");
    if (E(A, "vs_pipe_trace_simulated", "schedule NULL", FX_NONE)) R(vs_pipe_trace_simulated(NULL, NULL, path), "schedule is NULL");
    if (E(A, "vs_pipe_trace_simulated", "path NULL", FX_NONE)) R(vs_pipe_trace_simulated(sw_sched(NULL, NULL), NULL, NULL), "path is NULL");
    if (E(A, "vs_pipe_trace_simulated", "path in a missing folder", FX_NONE))
        R(vs_pipe_trace_simulated(sw_sched(NULL, NULL), NULL, "/nonexistent-vs/x/trace.json"), "/nonexistent-vs/x/trace.json");
    if (E(A, "vs_pipe_trace_simulated", "costs b -3", FX_NONE))
        R(vs_pipe_trace_simulated(sw_sched(NULL, NULL), &(vs_pipe_costs){.f = 1, .b = -3}, path), "b of chunk 0 = -3");
    if (E(A, "vs_pipe_trace_write", "schedule NULL", FX_NONE)) R(vs_pipe_trace_write(NULL, t0, t1, path), "schedule is NULL");
    if (E(A, "vs_pipe_trace_write", "t0 NULL", FX_NONE)) R(vs_pipe_trace_write(sw_sched(NULL, NULL), NULL, t1, path), "t0 is NULL");
    if (E(A, "vs_pipe_trace_write", "t1 NULL", FX_NONE)) R(vs_pipe_trace_write(sw_sched(NULL, NULL), t0, NULL, path), "t1 is NULL");
    if (E(A, "vs_pipe_trace_write", "path NULL", FX_NONE)) R(vs_pipe_trace_write(sw_sched(NULL, NULL), t0, t1, NULL), "path is NULL");
    if (E(A, "vs_pipe_trace_write", "t0[1] NULL", FX_NONE)) {
        const double* z[2] = {t[0], NULL};
        R(vs_pipe_trace_write(sw_sched(NULL, NULL), z, t1, path), "t0[1] is NULL");
    }
    if (E(A, "vs_pipe_trace_write", "a start of NaN", FX_NONE)) {
        t[1][3] = NAN;
        R(vs_pipe_trace_write(sw_sched(NULL, NULL), t0, t1, path), "stage 1 instruction 3");
    }
    if (E(A, "vs_pipe_trace_write", "an end before its start", FX_NONE)) {
        const double* z[2] = {tb, tb};
        const double* e[2] = {t[0], t[1]};
        R(vs_pipe_trace_write(sw_sched(NULL, NULL), z, e, path), "stage 0 instruction 1");
    }
    if (E(A, "vs_pipe_trace_write", "path in a missing folder", FX_NONE))
        R(vs_pipe_trace_write(sw_sched(NULL, NULL), t0, t1, "/nonexistent-vs/trace.json"), "/nonexistent-vs/trace.json");
#undef SIM
}

static void sweep_pipe_split(sw_ctx* x)
{
    const char* A = "pipe-split";
    vs_pipe_unit u[4];
    vs_pipe_plan p;
    char b[512];
    (void)x;
    memset(u, 0, sizeof u);
    const char* names[4] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++) u[i].name = names[i], u[i].flops = 1, u[i].params = 1, u[i].time_f = 1;
#define SPLIT(...) vs_pipe_split(u, 4, &(vs_pipe_split_desc){__VA_ARGS__}, &p)
    if (E(A, "vs_pipe_split", "out NULL", FX_NONE)) R(vs_pipe_split(u, 4, &(vs_pipe_split_desc){.stages = 2}, NULL), "out is NULL");
    if (E(A, "vs_pipe_split", "units NULL", FX_NONE)) R(vs_pipe_split(NULL, 4, &(vs_pipe_split_desc){.stages = 2}, &p), "units is NULL");
    if (E(A, "vs_pipe_split", "desc NULL", FX_NONE)) R(vs_pipe_split(u, 4, NULL, &p), "desc is NULL");
    if (E(A, "vs_pipe_split", "nunits 0", FX_NONE)) R(vs_pipe_split(u, 0, &(vs_pipe_split_desc){.stages = 1}, &p), "nunits = 0");
    if (E(A, "vs_pipe_split", "nunits -1", FX_NONE)) R(vs_pipe_split(u, -1, &(vs_pipe_split_desc){.stages = 1}, &p), "nunits = -1");
    if (E(A, "vs_pipe_split", "stages 0", FX_NONE)) R(SPLIT(.stages = 0), "stages = 0");
    if (E(A, "vs_pipe_split", "stages 300", FX_NONE)) R(SPLIT(.stages = 300), "stages = 300");
    if (E(A, "vs_pipe_split", "chunks -1", FX_NONE)) R(SPLIT(.stages = 2, .chunks = -1), "chunks = -1");
    if (E(A, "vs_pipe_split", "2 stages x 200 chunks", FX_NONE)) R(SPLIT(.stages = 2, .chunks = 200), "400 chunks");
    if (E(A, "vs_pipe_split", "kind 77", FX_NONE)) R(SPLIT(.stages = 2, .kind = (vs_pipe_split_kind)77), "kind = 77");
    if (E(A, "vs_pipe_split", "kind -1", FX_NONE)) R(SPLIT(.stages = 2, .kind = (vs_pipe_split_kind)-1), "kind = -1");
    if (E(A, "vs_pipe_split", "placement 55", FX_NONE)) R(SPLIT(.stages = 2, .placement = (vs_pipe_placement)55), "placement = 55");
    if (E(A, "vs_pipe_split", "points with kind uniform", FX_NONE))
        R(SPLIT(.stages = 2, .kind = VS_PIPE_SPLIT_UNIFORM, .points = "c"), "\"c\"");
    if (E(A, "vs_pipe_split", "5 chunks of 4 units", FX_NONE)) R(SPLIT(.stages = 5), "only 4 units");
    if (E(A, "vs_pipe_split", "a unit name NULL", FX_NONE)) {
        u[2].name = NULL;
        R(SPLIT(.stages = 2), "unit 2 has no name");
    }
    if (E(A, "vs_pipe_split", "a unit name of 80 bytes", FX_NONE)) {
        u[1].name = "b123456789b123456789b123456789b123456789b123456789b123456789b123456789b123456789";
        R(SPLIT(.stages = 2), "unit 1's name");
    }
    if (E(A, "vs_pipe_split", "two units named 'a'", FX_NONE)) {
        u[3].name = "a";
        R(SPLIT(.stages = 2), "both named 'a'");
    }
    if (E(A, "vs_pipe_split", "flops NaN", FX_NONE)) {
        u[1].flops = NAN;
        R(SPLIT(.stages = 2), "flops = nan|flops = -nan");
    }
    if (E(A, "vs_pipe_split", "flops -1", FX_NONE)) {
        u[2].flops = -1;
        R(SPLIT(.stages = 2), "flops = -1");
    }
    if (E(A, "vs_pipe_split", "flops 1e308 each (sum inf)", FX_NONE)) {
        for (int i = 0; i < 4; i++) u[i].flops = 1e308;
        R(SPLIT(.stages = 2), "infinity");
    }
    if (E(A, "vs_pipe_split", "every flops 0", FX_NONE)) {
        for (int i = 0; i < 4; i++) u[i].flops = 0;
        R(SPLIT(.stages = 2), "every unit's flops is 0");
    }
    if (E(A, "vs_pipe_split", "params -5", FX_NONE)) {
        u[0].params = -5;
        R(SPLIT(.stages = 2, .kind = VS_PIPE_SPLIT_PARAMS), "params = -5");
    }
    if (E(A, "vs_pipe_split", "time_b inf", FX_NONE)) {
        u[0].time_b = INFINITY;
        R(SPLIT(.stages = 2, .kind = VS_PIPE_SPLIT_TIME), "time_b = inf");
    }
    if (E(A, "vs_pipe_split", "point 'zz' (no such unit)", FX_NONE)) R(SPLIT(.stages = 2, .points = "zz"), "'zz'");
    if (E(A, "vs_pipe_split", "points 'b,c' for 2 chunks", FX_NONE)) R(SPLIT(.stages = 2, .points = "b,c"), "\"b,c\"");
    if (E(A, "vs_pipe_split", "point 'a' (the first unit)", FX_NONE)) R(SPLIT(.stages = 2, .points = "a"), "'a' is the first unit");
    if (E(A, "vs_pipe_split", "points 'c,b' (out of order)", FX_NONE)) R(SPLIT(.stages = 3, .points = "c,b"), "out of model order");
    if (E(A, "vs_pipe_split", "points 'b,,c'", FX_NONE)) R(SPLIT(.stages = 2, .chunks = 2, .points = "b,,c"), "empty");
    if (E(A, "vs_pipe_split", "a group coming back", FX_NONE)) {
        u[0].group = u[2].group = "g";
        R(SPLIT(.stages = 2), "group 'g' is not contiguous");
    }
    if (E(A, "vs_pipe_split", "a point inside a group", FX_NONE)) {
        u[1].group = u[2].group = "g";
        R(SPLIT(.stages = 2, .points = "c"), "inside group 'g'");
    }
    if (E(A, "vs_pipe_plan_print", "plan NULL", FX_NONE)) R(vs_pipe_plan_print(NULL, u, b, sizeof b), "plan is NULL");
    if (E(A, "vs_pipe_plan_print", "nchunks 999", FX_NONE)) {
        memset(&p, 0, sizeof p);
        p.nchunks = 999;
        int n = vs_pipe_plan_print(&p, u, b, sizeof b);
        DOC(n > 0 && strstr(b, "invalid") && strstr(b, "999"), "returned %d: %s", n, b);
    }
    if (E(A, "vs_pipe_plan_print", "buf NULL, cap 64", FX_NONE)) {
        vs_pipe_split(u, 4, &(vs_pipe_split_desc){.stages = 2}, &p);
        R(vs_pipe_plan_print(&p, u, NULL, 64), "buf is NULL");
    }
#undef SPLIT
}

static void sweep_pipe_engine(sw_ctx* x)
{
    const char* A = "pipe-engine";
    vs_pipe* o = NULL;
    void* d = NULL;
    double l = 0;
    vs_pipe_tensor t;
    const double *t0, *t1;
    int n = 0;
    vs_pipe_call fake;
    memset(&fake, 0, sizeof fake);
    vs_pipe_desc pd;
    memset(&pd, 0, sizeof pd);
    pd.mesh = x->mesh, pd.units = x->punits, pd.nunits = 2, pd.plan = &x->pplan, pd.data = sw_data;
    int64_t sh[2] = {2, 4};
    if (E(A, "vs_pipe_output", "call NULL", FX_NONE)) R(vs_pipe_output(NULL, 0, VS_F32, 2, sh, &d), "call is NULL");
    if (E(A, "vs_pipe_output", "not the engine's call", FX_NONE)) R(vs_pipe_output(&fake, 0, VS_F32, 2, sh, &d), "not inside an engine callback");
    if (E(A, "vs_pipe_output", "output 5 of 1", FX_PIPE)) sw_probe_run(x, 1, "output 5");
    if (E(A, "vs_pipe_output", "output -1", FX_PIPE)) sw_probe_run(x, 2, "output -1");
    if (E(A, "vs_pipe_output", "dtype 99", FX_PIPE)) sw_probe_run(x, 3, "dtype 99");
    if (E(A, "vs_pipe_output", "ndim 9", FX_PIPE)) sw_probe_run(x, 4, "ndim 9");
    if (E(A, "vs_pipe_output", "ndim 2, shape NULL", FX_PIPE)) sw_probe_run(x, 5, "shape");
    if (E(A, "vs_pipe_output", "shape {-1, 4}", FX_PIPE)) sw_probe_run(x, 6, "shape[0] = -1");
    if (E(A, "vs_pipe_output", "shape {2^40, 2^40}", FX_PIPE)) sw_probe_run(x, 7, "shape[1] = 1099511627776");
    if (E(A, "vs_pipe_output", "shape {2, 5}, spec [*,4]", FX_PIPE)) sw_probe_run(x, 8, "f32[*,4]");
    if (E(A, "vs_pipe_output", "data NULL", FX_PIPE)) sw_probe_run(x, 9, "data is NULL");
    if (E(A, "vs_pipe_output", "dtype i32, spec f32", FX_PIPE)) sw_probe_run(x, 10, "i32");
    if (E(A, "vs_pipe_output", "the output twice", FX_PIPE)) sw_probe_run(x, 100, "twice");
    if (E(A, "vs_pipe_save", "call NULL", FX_NONE)) R(vs_pipe_save(NULL, 16, &d), "call is NULL");
    if (E(A, "vs_pipe_save", "not the engine's call", FX_NONE)) R(vs_pipe_save(&fake, 16, &d), "only inside a unit's forward");
    if (E(A, "vs_pipe_save", "bytes SIZE_MAX", FX_PIPE)) sw_probe_run(x, 11, "18446744073709551615");
    if (E(A, "vs_pipe_save", "bytes SIZE_MAX - 8", FX_PIPE)) sw_probe_run(x, 13, "18446744073709551607");
    if (E(A, "vs_pipe_save", "data NULL", FX_PIPE)) sw_probe_run(x, 12, "data is NULL");
    if (E(A, "vs_pipe_save", "twice in one forward", FX_PIPE)) sw_probe_run(x, 101, "saved twice");
    if (E(A, "vs_pipe_init", "out NULL", FX_PIPE)) R(vs_pipe_init(&pd, NULL), "out is NULL");
    if (E(A, "vs_pipe_init", "desc NULL", FX_NONE)) R(vs_pipe_init(NULL, &o), "desc is NULL");
    if (E(A, "vs_pipe_init", "mesh NULL", FX_NONE)) R(vs_pipe_init(&pd, &o), "desc.mesh is NULL");
    if (E(A, "vs_pipe_init", "units NULL", FX_PIPE)) {
        pd.units = NULL;
        R(vs_pipe_init(&pd, &o), "desc.units is NULL");
    }
    if (E(A, "vs_pipe_init", "nunits 0", FX_PIPE)) {
        pd.nunits = 0;
        R(vs_pipe_init(&pd, &o), "nunits 0");
    }
    if (E(A, "vs_pipe_init", "plan NULL", FX_PIPE)) {
        pd.plan = NULL;
        R(vs_pipe_init(&pd, &o), "desc.plan is NULL");
    }
    if (E(A, "vs_pipe_init", "loss 7", FX_PIPE)) {
        pd.loss = (vs_pipe_reduce)7;
        R(vs_pipe_init(&pd, &o), "desc.loss = 7");
    }
    if (E(A, "vs_pipe_init", "pp_dim 'XX'", FX_PIPE)) {
        pd.pp_dim = "XX";
        R(vs_pipe_init(&pd, &o), "\"XX\"");
    }
    if (E(A, "vs_pipe_init", "a 1-stage plan on 2 stages", FX_PIPE)) {
        vs_pipe_plan p1;
        vs_pipe_split(x->punits, 2, &(vs_pipe_split_desc){.stages = 1}, &p1);
        pd.plan = &p1;
        R(vs_pipe_init(&pd, &o), "stage");
    }
    if (E(A, "vs_pipe_init", "plan nchunks 999", FX_PIPE)) {
        vs_pipe_plan p1 = x->pplan;
        p1.nchunks = 999;
        pd.plan = &p1;
        R(vs_pipe_init(&pd, &o), "999");
    }
    if (E(A, "vs_pipe_init", "plan for 3 units, 2 given", FX_PIPE)) {
        vs_pipe_plan p1 = x->pplan;
        p1.nunits = 3, p1.first_unit[2] = 3;
        pd.plan = &p1;
        R(vs_pipe_init(&pd, &o), "3");
    }
    if (E(A, "vs_pipe_init", "a unit without forward", FX_PIPE)) {
        vs_pipe_unit u2[2] = {x->punits[0], x->punits[1]};
        u2[1].forward = NULL;
        pd.units = u2;
        R(vs_pipe_init(&pd, &o), "ploss");
    }
    if (E(A, "vs_pipe_init", "a unit without backward", FX_PIPE)) {
        vs_pipe_unit u2[2] = {x->punits[0], x->punits[1]};
        u2[0].backward = NULL;
        pd.units = u2;
        R(vs_pipe_init(&pd, &o), "u0");
    }
    if (E(A, "vs_pipe_init", "specs disagree (h f32[*,4] and f32[*,5])", FX_PIPE)) {
        vs_pipe_unit u2[2] = {x->punits[0], x->punits[1]};
        u2[1].inputs = "h:f32[*,5]";
        pd.units = u2;
        R(vs_pipe_init(&pd, &o), "\"h\"");
    }
    if (E(A, "vs_pipe_init", "a spec 'h:f99[*]'", FX_PIPE)) {
        vs_pipe_unit u2[2] = {x->punits[0], x->punits[1]};
        u2[0].outputs = "h:f99[*]";
        pd.units = u2;
        R(vs_pipe_init(&pd, &o), "f99");
    }
    if (E(A, "vs_pipe_run", "pipe NULL", FX_PIPE)) R(vs_pipe_run(NULL, x->sched, &l), "pipe is NULL");
    if (E(A, "vs_pipe_run", "schedule NULL", FX_PIPE)) R(vs_pipe_run(x->pipe, NULL, &l), "schedule is NULL");
    if (E(A, "vs_pipe_run", "freed schedule", FX_PIPE)) {
        vs_pipe_sched* s = sw_sched(x->w, NULL);
        vs_pipe_sched_free(s);
        R(vs_pipe_run(x->pipe, s, &l), "already freed");
    }
    if (E(A, "vs_pipe_run", "a 3-stage schedule", FX_PIPE)) {
        vs_pipe_sched* s = NULL;
        vs_pipe_generate(x->w, VS_PIPE_1F1B, 3, 0, 2, &s);
        R(vs_pipe_run(x->pipe, s, &l), "3 stages");
        vs_pipe_sched_free(s);
    }
    if (E(A, "vs_pipe_run", "an invalid schedule", FX_PIPE)) {
        vs_pipe_sched* s = sw_sched(x->w, "pipe stages=2 chunks=2 mbs=1 place=0,1\n0: BW0.0 F0.0\n1: F1.0\n");
        R(vs_pipe_run(x->pipe, s, &l), "before the forward");
        vs_pipe_sched_free(s);
    }
    if (E(A, "vs_pipe_run", "freed pipe", FX_PIPE)) {
        vs_pipe* p2 = NULL;
        vs_pipe_init(&pd, &p2);
        vs_pipe_free(p2);
        R(vs_pipe_run(p2, x->sched, &l), "already freed");
    }
    if (E(A, "vs_pipe_mb_loss", "pipe NULL", FX_NONE)) R(vs_pipe_mb_loss(NULL, 0, &l), "pipe is NULL");
    if (E(A, "vs_pipe_mb_loss", "loss NULL", FX_PIPE)) R(vs_pipe_mb_loss(x->pipe, 0, NULL), "loss is NULL");
    if (E(A, "vs_pipe_mb_loss", "microbatch 2 of 2", FX_PIPE)) {
        R(vs_pipe_mb_loss(x->pipe, 2, &l), "microbatch 2");
        ONLY_RANK(1);
    }
    if (E(A, "vs_pipe_mb_loss", "microbatch -1", FX_PIPE)) {
        R(vs_pipe_mb_loss(x->pipe, -1, &l), "microbatch -1");
        ONLY_RANK(1);
    }
    if (E(A, "vs_pipe_mb_loss", "on stage 0 (not the last)", FX_PIPE)) {
        R(vs_pipe_mb_loss(x->pipe, 0, &l), "stage 0 does not hold the last chunk");
        ONLY_RANK(0);
    }
    if (E(A, "vs_pipe_mb_loss", "before any run", FX_PIPE)) {
        vs_pipe* p2 = NULL;
        vs_pipe_init(&pd, &p2);
        R(vs_pipe_mb_loss(p2, 0, &l), "no completed run");
        vs_pipe_free(p2);
    }
    if (E(A, "vs_pipe_mb_output", "pipe NULL", FX_NONE)) R(vs_pipe_mb_output(NULL, 0, 0, &t), "pipe is NULL");
    if (E(A, "vs_pipe_mb_output", "out NULL", FX_PIPE)) R(vs_pipe_mb_output(x->pipe, 0, 0, NULL), "out is NULL");
    if (E(A, "vs_pipe_mb_output", "output 5 of 1", FX_PIPE)) {
        R(vs_pipe_mb_output(x->pipe, 0, 5, &t), "output 5");
        ONLY_RANK(1);
    }
    if (E(A, "vs_pipe_mb_output", "microbatch 9", FX_PIPE)) {
        R(vs_pipe_mb_output(x->pipe, 9, 0, &t), "microbatch 9");
        ONLY_RANK(1);
    }
    if (E(A, "vs_pipe_stage", "pipe NULL", FX_NONE)) R(vs_pipe_stage(NULL), "pipe is NULL");
    if (E(A, "vs_pipe_stage", "freed pipe", FX_PIPE)) {
        vs_pipe* p2 = NULL;
        vs_pipe_init(&pd, &p2);
        vs_pipe_free(p2);
        R(vs_pipe_stage(p2), "already freed");
    }
    if (E(A, "vs_pipe_last_timeline", "pipe NULL", FX_NONE)) R(vs_pipe_last_timeline(NULL, &t0, &t1, &n), "NULL");
    if (E(A, "vs_pipe_last_timeline", "t0 NULL", FX_PIPE)) R(vs_pipe_last_timeline(x->pipe, NULL, &t1, &n), "t0 is NULL");
    if (E(A, "vs_pipe_last_timeline", "n NULL", FX_PIPE)) R(vs_pipe_last_timeline(x->pipe, &t0, &t1, NULL), "n is NULL");
    if (E(A, "vs_pipe_last_hooks", "pipe NULL", FX_NONE)) R(vs_pipe_last_hooks(NULL, &l, &l), "pipe is NULL");
    if (E(A, "vs_pipe_last_hooks", "freed pipe", FX_PIPE)) {
        vs_pipe* p2 = NULL;
        vs_pipe_init(&pd, &p2);
        vs_pipe_free(p2);
        R(vs_pipe_last_hooks(p2, &l, &l), "already freed");
    }
    if (E(A, "vs_pipe_tie_grads", "pipe NULL", FX_NONE)) R(vs_pipe_tie_grads(NULL, 0, 1, x->buf, 4, VS_F32), "pipe is NULL");
    if (E(A, "vs_pipe_tie_grads", "chunks 0 and 0", FX_PIPE)) R(vs_pipe_tie_grads(x->pipe, 0, 0, x->buf, 4, VS_F32), "chunks 0 and 0");
    if (E(A, "vs_pipe_tie_grads", "chunk 5", FX_PIPE)) R(vs_pipe_tie_grads(x->pipe, 0, 5, x->buf, 4, VS_F32), "chunks 0 and 5");
    if (E(A, "vs_pipe_tie_grads", "dtype i32", FX_PIPE)) R(vs_pipe_tie_grads(x->pipe, 0, 1, x->buf, 4, VS_I32), "dtype i32");
    if (E(A, "vs_pipe_tie_grads", "grad NULL for 4", FX_PIPE)) R(vs_pipe_tie_grads(x->pipe, 0, 1, NULL, 4, VS_F32), "grad is NULL");
    if (E(A, "vs_pipe_tie_grads", "count SIZE_MAX/2 f32", FX_PIPE))
        R(vs_pipe_tie_grads(x->pipe, 0, 1, x->buf, HUGE_F32, VS_F32), "9223372036854775807");
    if (E(A, "vs_pipe_free", "pipe NULL", FX_NONE)) DOC(vs_pipe_free(NULL) == VS_OK, "VS_OK (documented)");
    if (E(A, "vs_pipe_free", "freed twice", FX_PIPE)) {
        vs_pipe* p2 = NULL;
        vs_pipe_init(&pd, &p2);
        vs_pipe_free(p2);
        R(vs_pipe_free(p2), "already freed");
    }
    if (E(A, "vs_pipe_free", "a training state's pipe", FX_TRAIN)) R(vs_pipe_free(vs_train_pipe(x->train)), "belongs to");
}

/* ------------------------------------------------------------------------ */
/* vescale_ckpt.h */

/* Writes text into <dir>/<sub>/index.json (a hand-made checkpoint). */
static void sw_write_index(const char* dir, const char* sub, const char* text, char* path, size_t cap)
{
    snprintf(path, cap, "%s/%s", dir, sub);
    mkdir(path, 0755);
    char f[600];
    snprintf(f, sizeof f, "%s/index.json", path);
    FILE* fp = fopen(f, "w");
    if (fp) {
        fputs(text, fp);
        fclose(fp);
    }
}

static void sweep_ckpt(sw_ctx* x)
{
    const char* A = "ckpt";
    char out[512], path[512], p2[512];
    vs_ckpt* o = NULL;
    size_t used = 0, bound = 0;
    int loaded[4];
    int64_t blob8 = 7;
    vs_mesh* tm = x->train ? vs_train_mesh(x->train) : NULL;
    vs_ckpt_entry e[2];
    memset(e, 0, sizeof e);
    e[0].name = "w";
    e[0].t.layout.mesh = tm;
    e[0].t.dtype = VS_F32;
    e[0].t.ndim = 1;
    e[0].t.shape[0] = 8;
    e[0].t.data = x->buf;
    e[1].name = "b";
    e[1].kind = VS_CKPT_BLOB;
    e[1].blob = &blob8;
    e[1].blob_bytes = 8;
    snprintf(path, sizeof path, "%s/new", x->dir ? x->dir : "/tmp");
    volatile size_t sw_huge = SIZE_MAX;
    vs_ckpt_save_opts async = {1, 0};
    if (E(A, "vs_ckpt_version", "(no input)", FX_NONE)) DOC(vs_ckpt_version() == VESCALE_VERSION_NUMBER, "returned %d", vs_ckpt_version());
    if (E(A, "vs_ckpt_latest", "folder NULL", FX_NONE)) R(vs_ckpt_latest(NULL, out, sizeof out), "folder is NULL");
    if (E(A, "vs_ckpt_latest", "out NULL", FX_NONE)) R(vs_ckpt_latest(x->dir, NULL, 64), "out is NULL");
    if (E(A, "vs_ckpt_latest", "a missing folder", FX_NONE)) R(vs_ckpt_latest("/nonexistent-vs/ckpts", out, sizeof out), "/nonexistent-vs/ckpts");
    if (E(A, "vs_ckpt_latest", "a folder without checkpoints", FX_NONE)) R(vs_ckpt_latest(x->dir, out, sizeof out), "no complete checkpoint");
    if (E(A, "vs_ckpt_latest", "cap 4", FX_TRAIN)) {
        R(vs_ckpt_latest(x->dir, out, 4), "4 bytes");
        ONLY_RANK(0);
    }
    if (E(A, "vs_ckpt_latest", "cap 0", FX_TRAIN)) {
        R(vs_ckpt_latest(x->dir, out, 0), "0 bytes");
        ONLY_RANK(0);
    }
    if (E(A, "vs_ckpt_retain", "folder NULL", FX_NONE)) R(vs_ckpt_retain(NULL, 1), "folder is NULL");
    if (E(A, "vs_ckpt_retain", "keep 0", FX_NONE)) R(vs_ckpt_retain(x->dir, 0), "keep = 0");
    if (E(A, "vs_ckpt_retain", "keep INT_MIN", FX_NONE)) R(vs_ckpt_retain(x->dir, INT_MIN), "keep = -2147483648");
    if (E(A, "vs_ckpt_retain", "a missing folder", FX_NONE)) R(vs_ckpt_retain("/nonexistent-vs/ckpts", 2), "/nonexistent-vs/ckpts");
    if (E(A, "vs_ckpt_init", "out NULL", FX_TRAIN)) R(vs_ckpt_init(&(vs_ckpt_desc){.mesh = tm}, NULL), "out is NULL");
    if (E(A, "vs_ckpt_init", "desc NULL", FX_NONE)) R(vs_ckpt_init(NULL, &o), "desc is NULL");
    if (E(A, "vs_ckpt_init", "mesh NULL", FX_NONE)) R(vs_ckpt_init(&(vs_ckpt_desc){.keep_last = 1}, &o), "desc.mesh is NULL");
    if (E(A, "vs_ckpt_init", "keep_last -1", FX_TRAIN)) R(vs_ckpt_init(&(vs_ckpt_desc){.mesh = tm, .keep_last = -1}, &o), "keep_last = -1");
    if (E(A, "vs_ckpt_init", "no_checksum 2", FX_TRAIN)) R(vs_ckpt_init(&(vs_ckpt_desc){.mesh = tm, .no_checksum = 2}, &o), "no_checksum = 2");
    if (E(A, "vs_ckpt_init", "untouched_on_error -1", FX_TRAIN))
        R(vs_ckpt_init(&(vs_ckpt_desc){.mesh = tm, .untouched_on_error = -1}, &o), "untouched_on_error = -1");
    if (E(A, "vs_ckpt_free", "ck NULL", FX_NONE)) DOC(vs_ckpt_free(NULL) == VS_OK, "VS_OK (documented)");
    if (E(A, "vs_ckpt_free", "freed twice", FX_TRAIN)) {
        vs_ckpt_init(&(vs_ckpt_desc){.mesh = tm}, &o);
        vs_ckpt_free(o);
        R(vs_ckpt_free(o), "already freed");
    }
    if (E(A, "vs_ckpt_save", "ck NULL", FX_NONE)) R(vs_ckpt_save(NULL, path, e, 2, NULL), "ck is NULL");
    if (E(A, "vs_ckpt_save", "path NULL", FX_TRAIN)) R(vs_ckpt_save(x->ck, NULL, e, 2, NULL), "path is NULL");
    if (E(A, "vs_ckpt_save", "n -1", FX_TRAIN)) R(vs_ckpt_save(x->ck, path, e, -1, NULL), "-1 entries");
    if (E(A, "vs_ckpt_save", "entries NULL, n 2", FX_TRAIN)) R(vs_ckpt_save(x->ck, path, NULL, 2, NULL), "2 entries");
    if (E(A, "vs_ckpt_save", "async 7", FX_TRAIN)) R(vs_ckpt_save(x->ck, path, e, 2, &(vs_ckpt_save_opts){.async = 7}), "opts.async = 7");
    if (E(A, "vs_ckpt_save", "overwrite -1", FX_TRAIN)) R(vs_ckpt_save(x->ck, path, e, 2, &(vs_ckpt_save_opts){.overwrite = -1}), "opts.overwrite = -1");
    if (E(A, "vs_ckpt_save", "onto an existing path", FX_TRAIN)) R(vs_ckpt_save(x->ck, x->ck0, e, 2, NULL), "exists");
    if (E(A, "vs_ckpt_save", "async onto an existing path", FX_TRAIN)) R(vs_ckpt_save(x->ck, x->ck0, e, 2, &async), "exists");
    if (E(A, "vs_ckpt_save", "two async saves to one path", FX_TRAIN)) {
        vs_ckpt_save(x->ck, path, e, 2, &async);
        R(vs_ckpt_save(x->ck, path, e, 2, &async), "exists");
    }
    if (E(A, "vs_ckpt_save", "a path in a missing folder", FX_TRAIN)) R(vs_ckpt_save(x->ck, "/nonexistent-vs/a/b", e, 2, NULL), "/nonexistent-vs/a/b");
    if (E(A, "vs_ckpt_save", "a path of 3100 bytes", FX_TRAIN)) {
        char lp[3200];
        memset(lp, 'p', sizeof lp - 1);
        lp[sizeof lp - 1] = 0;
        lp[0] = '/';
        R(vs_ckpt_save(x->ck, lp, e, 2, NULL), "path is longer");
    }
    if (E(A, "vs_ckpt_save", "entry name NULL", FX_TRAIN)) {
        e[0].name = NULL;
        R(vs_ckpt_save(x->ck, path, e, 2, NULL), "entry 0");
    }
    if (E(A, "vs_ckpt_save", "entry name 'a#b'", FX_TRAIN)) {
        e[0].name = "a#b";
        R(vs_ckpt_save(x->ck, path, e, 2, NULL), "\"a#b\"");
    }
    if (E(A, "vs_ckpt_save", "entry name of 300 bytes", FX_TRAIN)) {
        static char nm[301];
        memset(nm, 'n', 300);
        e[0].name = nm;
        R(vs_ckpt_save(x->ck, path, e, 2, NULL), "entry 0");
    }
    if (E(A, "vs_ckpt_save", "an entry twice", FX_TRAIN)) {
        e[1] = e[0];
        R(vs_ckpt_save(x->ck, path, e, 2, NULL), "twice");
    }
    if (E(A, "vs_ckpt_save", "kind 9", FX_TRAIN)) {
        e[0].kind = (vs_ckpt_kind)9;
        R(vs_ckpt_save(x->ck, path, e, 2, NULL), "kind 9");
    }
    if (E(A, "vs_ckpt_save", "dtype 99", FX_TRAIN)) {
        e[0].t.dtype = (vs_dtype)99;
        R(vs_ckpt_save(x->ck, path, e, 2, NULL), "dtype 99");
    }
    if (E(A, "vs_ckpt_save", "ndim 9", FX_TRAIN)) {
        e[0].t.ndim = 9;
        R(vs_ckpt_save(x->ck, path, e, 2, NULL), "ndim 9");
    }
    if (E(A, "vs_ckpt_save", "shape {-8}", FX_TRAIN)) {
        e[0].t.shape[0] = -8;
        R(vs_ckpt_save(x->ck, path, e, 2, NULL), "shape[0] = -8");
    }
    if (E(A, "vs_ckpt_save", "shape {2^62}", FX_TRAIN)) {
        e[0].t.shape[0] = (int64_t)1 << 62;
        R(vs_ckpt_save(x->ck, path, e, 2, NULL), "shape[0] = 4611686018427387904");
    }
    if (E(A, "vs_ckpt_save", "t.data NULL", FX_TRAIN)) {
        e[0].t.data = NULL;
        R(vs_ckpt_save(x->ck, path, e, 2, NULL), "t.data is NULL");
    }
    if (E(A, "vs_ckpt_save", "t.layout.mesh NULL", FX_TRAIN)) {
        e[0].t.layout.mesh = NULL;
        R(vs_ckpt_save(x->ck, path, e, 2, NULL), "t.layout.mesh is NULL");
    }
    if (E(A, "vs_ckpt_save", "a Partial tensor", FX_TRAIN)) {
        e[0].t.layout.p[1] = vs_partial(VS_OP_SUM);
        R(vs_ckpt_save(x->ck, path, e, 2, NULL), "Partial");
    }
    if (E(A, "vs_ckpt_save", "range [4, 99)", FX_TRAIN)) {
        e[0].kind = VS_CKPT_RANGE;
        e[0].range_begin = 4, e[0].range_end = 99;
        R(vs_ckpt_save(x->ck, path, e, 2, NULL), "range [4, 99)");
    }
    if (E(A, "vs_ckpt_save", "blob NULL for 8 bytes", FX_TRAIN)) {
        e[1].blob = NULL;
        R(vs_ckpt_save(x->ck, path, e, 2, NULL), "blob is NULL");
    }
    if (E(A, "vs_ckpt_save", "blob_bytes SIZE_MAX", FX_TRAIN)) {
        e[1].blob_bytes = sw_huge;
        R(vs_ckpt_save(x->ck, path, e, 2, NULL), "blob_bytes = 18446744073709551615");
    }
    if (E(A, "vs_ckpt_save", "async, blob_bytes SIZE_MAX", FX_TRAIN)) {
        e[1].blob_bytes = sw_huge;
        R(vs_ckpt_save(x->ck, path, e, 2, &async), "blob_bytes = 18446744073709551615");
    }
    // async: one rank's bad entry fails every rank's call (the call agrees on the entries)
    if (E(A, "vs_ckpt_save", "async, one rank's entry bad", FX_TRAIN)) {
        if (x->rank == 1) e[0].t.dtype = (vs_dtype)99;
        vs_clear_error();
        vs_result r = vs_ckpt_save(x->ck, path, e, 2, &async);
        if (r == VS_OK) r = vs_ckpt_wait(x->ck);
        sw_res(x, r, "dtype 99");
    }
    if (E(A, "vs_ckpt_save", "async, one rank's blob_bytes SIZE_MAX", FX_TRAIN)) {
        if (x->rank == 0) e[1].blob_bytes = sw_huge;
        vs_clear_error();
        vs_result r = vs_ckpt_save(x->ck, path, e, 2, &async);
        if (r == VS_OK) r = vs_ckpt_wait(x->ck);
        sw_res(x, r, "blob_bytes = 18446744073709551615");
    }
    if (E(A, "vs_ckpt_save", "freed checkpointer", FX_TRAIN)) {
        vs_ckpt_init(&(vs_ckpt_desc){.mesh = tm}, &o);
        vs_ckpt_free(o);
        R(vs_ckpt_save(o, path, e, 2, NULL), "already freed");
    }
    if (E(A, "vs_ckpt_wait", "ck NULL", FX_NONE)) R(vs_ckpt_wait(NULL), "ck is NULL");
    if (E(A, "vs_ckpt_wait", "freed checkpointer", FX_TRAIN)) {
        vs_ckpt_init(&(vs_ckpt_desc){.mesh = tm}, &o);
        vs_ckpt_free(o);
        R(vs_ckpt_wait(o), "already freed");
    }
    if (E(A, "vs_ckpt_load", "ck NULL", FX_NONE)) R(vs_ckpt_load(NULL, path, e, 2, NULL), "ck is NULL");
    if (E(A, "vs_ckpt_load", "path NULL", FX_TRAIN)) R(vs_ckpt_load(x->ck, NULL, e, 2, NULL), "path is NULL");
    if (E(A, "vs_ckpt_load", "n -1", FX_TRAIN)) R(vs_ckpt_load(x->ck, x->ck0, e, -1, NULL), "-1 entries");
    if (E(A, "vs_ckpt_load", "entries NULL, n 2", FX_TRAIN)) R(vs_ckpt_load(x->ck, x->ck0, NULL, 2, loaded), "2 entries");
    if (E(A, "vs_ckpt_load", "a missing path", FX_TRAIN)) R(vs_ckpt_load(x->ck, path, e, 2, NULL), path);
    if (E(A, "vs_ckpt_load", "an entry it lacks", FX_TRAIN)) R(vs_ckpt_load(x->ck, x->ck0, e, 2, NULL), "has no entry \"w\"");
    if (E(A, "vs_ckpt_load", "a blob asked for as a tensor", FX_TRAIN)) {
        e[0].name = "__skipped";
        R(vs_ckpt_load(x->ck, x->ck0, e, 1, NULL), "asked for as a tensor");
    }
    if (E(A, "vs_ckpt_load", "a blob buffer of 4 bytes for 8", FX_TRAIN)) {
        e[1].name = "__skipped", e[1].blob_bytes = 4;
        R(vs_ckpt_load(x->ck, x->ck0, e + 1, 1, NULL), "has 8 bytes, the buffer 4");
    }
    if (E(A, "vs_ckpt_load", "a tensor of another shape", FX_TRAIN)) {
        e[0].name = "lin.w", e[0].t.ndim = 2, e[0].t.shape[0] = 4, e[0].t.shape[1] = 2;
        R(vs_ckpt_load(x->ck, x->ck0, e, 1, NULL), "f32[4,4]");
    }
    if (E(A, "vs_ckpt_load", "a tensor of another dtype", FX_TRAIN)) {
        static double b64[16];
        e[0].name = "lin.w", e[0].t.ndim = 2, e[0].t.shape[0] = 4, e[0].t.shape[1] = 4, e[0].t.dtype = VS_F64;
        e[0].t.data = b64;
        R(vs_ckpt_load(x->ck, x->ck0, e, 1, NULL), "asked for as f64");
    }
    if (E(A, "vs_ckpt_load", "index.json '{'", FX_TRAIN)) {
        sw_write_index(x->dir, "bad", "{", p2, sizeof p2);
        R(vs_ckpt_load(x->ck, p2, e, 2, NULL), "index.json");
    }
    if (E(A, "vs_ckpt_load", "index.json '[]'", FX_TRAIN)) {
        sw_write_index(x->dir, "bad", "[]", p2, sizeof p2);
        R(vs_ckpt_load(x->ck, p2, e, 2, NULL), "index.json");
    }
    if (E(A, "vs_ckpt_load", "freed checkpointer", FX_TRAIN)) {
        vs_ckpt_init(&(vs_ckpt_desc){.mesh = tm}, &o);
        vs_ckpt_free(o);
        R(vs_ckpt_load(o, x->ck0, e, 2, NULL), "already freed");
    }
    if (E(A, "vs_ckpt_async_memory", "ck NULL", FX_NONE)) R(vs_ckpt_async_memory(NULL, &used, &bound), "NULL");
    if (E(A, "vs_ckpt_async_memory", "used NULL", FX_TRAIN)) R(vs_ckpt_async_memory(x->ck, NULL, &bound), "used is NULL");
    if (E(A, "vs_ckpt_async_memory", "bound NULL", FX_TRAIN)) R(vs_ckpt_async_memory(x->ck, &used, NULL), "bound is NULL");
    if (E(A, "vs_ckpt_save_ddp", "ck NULL", FX_NONE)) R(vs_ckpt_save_ddp(NULL, path, NULL, "", NULL, 0, NULL), "ck is NULL");
    if (E(A, "vs_ckpt_save_ddp", "ddp NULL", FX_TRAIN)) R(vs_ckpt_save_ddp(x->ck, path, NULL, "", NULL, 0, NULL), "ddp is NULL");
    if (E(A, "vs_ckpt_save_ddp", "path NULL", FX_TRAIN)) R(vs_ckpt_save_ddp(x->ck, NULL, vs_train_ddp(x->train), "", NULL, 0, NULL), "path is NULL");
    if (E(A, "vs_ckpt_save_ddp", "prefix 'm#'", FX_TRAIN)) R(vs_ckpt_save_ddp(x->ck, path, vs_train_ddp(x->train), "m#", NULL, 0, NULL), "m#");
    if (E(A, "vs_ckpt_save_ddp", "nextra -1", FX_TRAIN)) R(vs_ckpt_save_ddp(x->ck, path, vs_train_ddp(x->train), "", e, -1, NULL), "nextra -1|-1 extra");
    if (E(A, "vs_ckpt_save_ddp", "extra NULL, nextra 2", FX_TRAIN))
        R(vs_ckpt_save_ddp(x->ck, path, vs_train_ddp(x->train), "", NULL, 2, NULL), "extra");
    if (E(A, "vs_ckpt_save_ddp", "an extra named like a parameter", FX_TRAIN)) {
        e[1].name = "lin.w";
        R(vs_ckpt_save_ddp(x->ck, path, vs_train_ddp(x->train), "", e + 1, 1, NULL), "\"lin.w\"");
    }
    if (E(A, "vs_ckpt_save_ddp", "async 2", FX_TRAIN))
        R(vs_ckpt_save_ddp(x->ck, path, vs_train_ddp(x->train), "", NULL, 0, &(vs_ckpt_save_opts){.async = 2}), "opts.async = 2");
    if (E(A, "vs_ckpt_load_ddp", "ck NULL", FX_NONE)) R(vs_ckpt_load_ddp(NULL, path, NULL, "", NULL, 0), "ck is NULL");
    if (E(A, "vs_ckpt_load_ddp", "ddp NULL", FX_TRAIN)) R(vs_ckpt_load_ddp(x->ck, x->ck0, NULL, "", NULL, 0), "ddp is NULL");
    if (E(A, "vs_ckpt_load_ddp", "a missing path", FX_TRAIN)) R(vs_ckpt_load_ddp(x->ck, path, vs_train_ddp(x->train), "", NULL, 0), path);
    if (E(A, "vs_ckpt_load_ddp", "prefix 'zz.' (absent)", FX_TRAIN))
        R(vs_ckpt_load_ddp(x->ck, x->ck0, vs_train_ddp(x->train), "zz.", NULL, 0), "zz.lin.w");
    if (E(A, "vs_ckpt_load_ddp", "nextra -1", FX_TRAIN)) R(vs_ckpt_load_ddp(x->ck, x->ck0, vs_train_ddp(x->train), "", e, -1), "-1");
}

/* ------------------------------------------------------------------------ */
/* vescale.h */

/* A copy of the fixture model whose layers the entry may spoil. */
typedef struct sw_model_copy {
    vs_layer_decl l[2];
    vs_model_desc m;
} sw_model_copy;

static vs_model_desc* sw_model_dup(sw_model_copy* c)
{
    c->l[0] = sw_layers[0], c->l[1] = sw_layers[1];
    c->m = sw_model;
    c->m.layers = c->l;
    return &c->m;
}

static vs_result sw_data_fail(vs_pipe_call* c)
{
    (void)c;
    return vs_set_error(VS_ERR_INVALID, "sw-data: no rows today");
}

static vs_result sw_hl_data(vs_pipe_call* c)
{
    int64_t sh[2] = {2, SW_W};
    float* d;
    vs_result r = vs_pipe_output(c, 0, VS_F32, 2, sh, (void**)&d);
    for (int i = 0; !r && i < 2 * SW_W; i++) d[i] = (float)i * 0.1f;
    return r;
}

static void sweep_model(sw_ctx* x)
{
    const char* A = "model";
    sw_model_copy mc;
    vs_model_desc* m = sw_model_dup(&mc);
    vs_param_decl* w = &mc.l[0].params[0];
    vs_pipe_call c;
    vs_layer_ctx lc;
    memset(&c, 0, sizeof c);
    memset(&lc, 0, sizeof lc);
    int64_t ls[VS_TENSOR_MAX_DIMS];
    (void)x;
    if (E(A, "vs_layer_user", "call NULL", FX_NONE)) RP(vs_layer_user(NULL), "call is NULL");
    if (E(A, "vs_layer_user", "a call without a layer", FX_NONE)) RP(vs_layer_user(&c), "not a layer's call");
    if (E(A, "vs_layer_param", "call NULL", FX_NONE)) RP(vs_layer_param(NULL, 0), "call is NULL");
    if (E(A, "vs_layer_param", "parameter 16", FX_NONE)) {
        c.user = &lc;
        RP(vs_layer_param(&c, 16), "parameter 16");
    }
    if (E(A, "vs_layer_param", "parameter -1", FX_NONE)) {
        c.user = &lc;
        RP(vs_layer_param(&c, -1), "parameter -1");
    }
    if (E(A, "vs_layer_grad", "call NULL", FX_NONE)) RP(vs_layer_grad(NULL, 0), "call is NULL");
    if (E(A, "vs_layer_grad", "parameter 99", FX_NONE)) {
        c.user = &lc;
        RP(vs_layer_grad(&c, 99), "parameter 99");
    }
    if (E(A, "vs_layer_param_box", "call NULL", FX_NONE)) R(vs_layer_param_box(NULL, 0, ls, ls), "call is NULL");
    if (E(A, "vs_layer_param_box", "parameter 16", FX_NONE)) {
        c.user = &lc;
        R(vs_layer_param_box(&c, 16, ls, ls), "parameter 16");
    }
    if (E(A, "vs_layer_tp", "call NULL", FX_NONE)) RP(vs_layer_tp(NULL), "call is NULL");
    if (E(A, "vs_model_check", "model NULL", FX_NONE)) R(vs_model_check(NULL), "model is NULL");
    if (E(A, "vs_model_check", "layers NULL", FX_NONE)) {
        m->layers = NULL;
        R(vs_model_check(m), "layers is NULL");
    }
    if (E(A, "vs_model_check", "nlayers 0", FX_NONE)) {
        m->nlayers = 0;
        R(vs_model_check(m), "0 layers");
    }
    if (E(A, "vs_model_check", "nlayers -1", FX_NONE)) {
        m->nlayers = -1;
        R(vs_model_check(m), "-1 layers");
    }
    if (E(A, "vs_model_check", "a layer without a name", FX_NONE)) {
        mc.l[1].unit.name = NULL;
        R(vs_model_check(m), "layer 1 has no name");
    }
    if (E(A, "vs_model_check", "a layer without a forward", FX_NONE)) { // (issue 33: vs_parallelize found it later)
        mc.l[1].unit.forward = NULL;
        R(vs_model_check(m), "layer \"loss\" has no forward");
    }
    if (E(A, "vs_model_check", "specs that disagree", FX_NONE)) { // (issue 33: vs_parallelize found it later)
        mc.l[1].unit.inputs = "y:f32[*,5],t";
        R(vs_model_check(m), "layer \"lin\" makes y:f32[*,4] but layer \"loss\" takes y:f32[*,5]");
    }
    if (E(A, "vs_model_check", "a row-parallel W2 whose rows are not W1's columns", FX_NONE)) { // (issue 33)
        mc.l[0].nparams = 2;
        mc.l[0].params[0].role = VS_ROLE_COLUMN, mc.l[0].params[0].shape[0] = SW_W, mc.l[0].params[0].shape[1] = 8;
        mc.l[0].params[1] = mc.l[0].params[0];
        mc.l[0].params[1].name = "lin.w2", mc.l[0].params[1].role = VS_ROLE_ROW;
        mc.l[0].params[1].shape[0] = 6, mc.l[0].params[1].shape[1] = SW_W;
        R(vs_model_check(m), "\"lin.w2\" has 6 rows, but the column-parallel weight before it, \"lin.w\", has 8");
    }
    if (E(A, "vs_model_check", "a spec that does not parse", FX_NONE)) {
        mc.l[1].unit.inputs = "y:f99[*,4],t";
        R(vs_model_check(m), "unknown dtype");
    }
    if (E(A, "vs_model_check", "nparams 17", FX_NONE)) {
        mc.l[0].nparams = 17;
        R(vs_model_check(m), "17 parameters");
    }
    if (E(A, "vs_model_check", "nparams -1", FX_NONE)) {
        mc.l[0].nparams = -1;
        R(vs_model_check(m), "-1 parameters");
    }
    if (E(A, "vs_model_check", "a parameter name NULL", FX_NONE)) {
        w->name = NULL;
        R(vs_model_check(m), "parameter 0");
    }
    if (E(A, "vs_model_check", "a parameter name of 300 bytes", FX_NONE)) {
        static char nm[301];
        memset(nm, 'q', 300);
        w->name = nm;
        R(vs_model_check(m), "parameter 0");
    }
    if (E(A, "vs_model_check", "dtype f64", FX_NONE)) {
        w->dtype = VS_F64;
        R(vs_model_check(m), "dtype f64");
    }
    if (E(A, "vs_model_check", "dtype 99", FX_NONE)) {
        w->dtype = (vs_dtype)99;
        R(vs_model_check(m), "dtype");
    }
    if (E(A, "vs_model_check", "ndim 0", FX_NONE)) {
        w->ndim = 0;
        R(vs_model_check(m), "ndim 0");
    }
    if (E(A, "vs_model_check", "ndim 9", FX_NONE)) {
        w->ndim = 9;
        R(vs_model_check(m), "ndim 9");
    }
    if (E(A, "vs_model_check", "shape {4, 0}", FX_NONE)) {
        w->shape[1] = 0;
        R(vs_model_check(m), "shape[1] = 0");
    }
    if (E(A, "vs_model_check", "role 77", FX_NONE)) {
        w->role = (vs_role)77;
        R(vs_model_check(m), "role 77");
    }
    if (E(A, "vs_model_check", "shard_unit -1", FX_NONE)) {
        w->shard_unit = -1;
        R(vs_model_check(m), "shard_unit -1");
    }
    if (E(A, "vs_model_check", "shape {2^62} (bytes overflow)", FX_NONE)) {
        w->ndim = 1, w->shape[0] = (int64_t)1 << 62;
        R(vs_model_check(m), "4611686018427387904");
    }
    if (E(A, "vs_model_check", "shape {2^31, 2^31, 2^31} (elements overflow)", FX_NONE)) {
        w->ndim = 3, w->shape[0] = w->shape[1] = w->shape[2] = (int64_t)1 << 31;
        R(vs_model_check(m), "2147483648");
    }
    if (E(A, "vs_model_check", "16 parameters of 2^59 (the sum overflows)", FX_NONE)) {
        static const char* const nm[16] = {"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7",
                                           "p8", "p9", "pa", "pb", "pc", "pd", "pe", "pf"};
        mc.l[0].nparams = 16;
        for (int i = 0; i < 16; i++) {
            mc.l[0].params[i] = *w;
            mc.l[0].params[i].name = nm[i];
            mc.l[0].params[i].ndim = 1, mc.l[0].params[i].shape[0] = (int64_t)1 << 59;
        }
        R(vs_model_check(m), "bytes");
    }
    if (E(A, "vs_model_check", "a parameter twice in a layer", FX_NONE)) {
        mc.l[0].nparams = 2;
        mc.l[0].params[1] = *w;
        R(vs_model_check(m), "twice");
    }
    if (E(A, "vs_model_check", "a tied parameter of another shape", FX_NONE)) {
        mc.l[1].nparams = 1;
        mc.l[1].params[0] = *w;
        mc.l[1].params[0].shape[0] = 3;
        R(vs_model_check(m), "different shapes");
    }
    if (E(A, "vs_model_check", "sp_ok 2", FX_NONE)) {
        mc.l[1].sp_ok = 2;
        R(vs_model_check(m), "sp_ok = 2");
    }
}

static void sweep_plan(sw_ctx* x)
{
    const char* A = "plan";
    vs_plan p, o;
    memset(&p, 0, sizeof p);
    sw_model_copy mc;
    vs_model_desc* m = sw_model_dup(&mc);
    vs_placement pl;
    const char* why = NULL;
    char b[2048];
    (void)x;
#define PARSE(t) vs_plan_parse(t, &o)
    if (E(A, "vs_plan_print", "plan NULL", FX_NONE)) R(vs_plan_print(NULL, b, sizeof b), "plan is NULL");
    if (E(A, "vs_plan_print", "buf NULL, cap 64", FX_NONE)) R(vs_plan_print(&p, NULL, 64), "buf is NULL");
    if (E(A, "vs_plan_print", "a rule pattern with a newline", FX_NONE)) {
        p.nrules = 1;
        snprintf(p.rules[0].pattern, sizeof p.rules[0].pattern, "a\nzero: 2");
        snprintf(p.rules[0].placement, sizeof p.rules[0].placement, "Replicate");
        R(vs_plan_print(&p, b, sizeof b), "rule 0");
    }
    if (E(A, "vs_plan_print", "nrules 99", FX_NONE)) {
        p.nrules = 99;
        R(vs_plan_print(&p, b, sizeof b), "99 rules");
    }
    if (E(A, "vs_plan_print", "split_points not terminated", FX_NONE)) {
        memset(p.split_points, 'a', sizeof p.split_points);
        R(vs_plan_print(&p, b, sizeof b), "split_points");
    }
    if (E(A, "vs_plan_print_json", "plan NULL", FX_NONE)) R(vs_plan_print_json(NULL, b, sizeof b), "plan is NULL");
    if (E(A, "vs_plan_print_json", "a rule pattern with byte 0xe9", FX_NONE)) {
        p.nrules = 1;
        snprintf(p.rules[0].pattern, sizeof p.rules[0].pattern, "caf\xe9.*");
        snprintf(p.rules[0].placement, sizeof p.rules[0].placement, "Replicate");
        R(vs_plan_print_json(&p, b, sizeof b), "UTF-8");
    }
    if (E(A, "vs_plan_print_json", "a rule pattern with a quote", FX_NONE)) {
        p.nrules = 1;
        snprintf(p.rules[0].pattern, sizeof p.rules[0].pattern, "a\"b");
        snprintf(p.rules[0].placement, sizeof p.rules[0].placement, "Replicate");
        R(vs_plan_print_json(&p, b, sizeof b), "rule 0");
    }
    if (E(A, "vs_plan_print_json", "split_points with a backslash", FX_NONE)) {
        snprintf(p.split_points, sizeof p.split_points, "a\\b");
        R(vs_plan_print_json(&p, b, sizeof b), "split_points");
    }
    if (E(A, "vs_plan_parse", "text NULL", FX_NONE)) R(PARSE(NULL), "text is NULL");
    if (E(A, "vs_plan_parse", "out NULL", FX_NONE)) R(vs_plan_parse("zero: 1\n", NULL), "out is NULL");
    if (E(A, "vs_plan_parse", "'' (empty)", FX_NONE)) R(PARSE(""), "holds no");
    if (E(A, "vs_plan_parse", "comments only", FX_NONE)) R(PARSE("# a plan\n\n   # nothing else\n"), "holds no");
    if (E(A, "vs_plan_parse", "'{}' (empty JSON)", FX_NONE)) R(PARSE("{}"), "holds no");
    if (E(A, "vs_plan_parse", "a key twice", FX_NONE)) R(PARSE("zero: 1\nchunks: 1\nzero: 2\n"), "\"zero\" twice");
    if (E(A, "vs_plan_parse", "a JSON key twice", FX_NONE)) R(PARSE("{\"zero\": 1, \"zero\": 2}"), "\"zero\" twice");
    if (E(A, "vs_plan_parse", "a JSON key twice (mesh)", FX_NONE))
        R(PARSE("{\"mesh\": {\"pp\": 1, \"dp\": 1, \"tp\": 1}, \"mesh\": {\"pp\": 2, \"dp\": 1, \"tp\": 1}}"), "\"mesh\" twice");
    if (E(A, "vs_plan_parse", "unknown key", FX_NONE)) R(PARSE("zerro: 1\n"), "unknown key \"zerro\"");
    // a newcomer's first plan: the sizes are one key, and the message names the keys
    if (E(A, "vs_plan_parse", "'dp: 4' (the sizes are mesh)", FX_NONE)) R(PARSE("dp: 4\nzero: 3\n"), "\"mesh: PP=1 DP=4 TP=1\"");
    if (E(A, "vs_plan_parse", "JSON 'dp' (the sizes are mesh)", FX_NONE))
        R(PARSE("{\"dp\": 4, \"zero\": 3}"), "\"mesh\": {\"pp\": 1, \"dp\": 4, \"tp\": 1}");
    if (E(A, "vs_plan_parse", "'dp_shards: 2' (a typo)", FX_NONE))
        R(PARSE("zero: 3\ndp_shards: 2\n"), "(the keys: mesh, policy, strict, split, split_points, chunks, schedule, "
          "microbatches, zero, sequence_parallel, shard, recompute, dp_shard, reshard_after_forward, prefetch)");
    if (E(A, "vs_plan_parse", "JSON zero 3.0", FX_NONE)) R(PARSE("{\"zero\": 3.0}"), "\"zero\": unexpected a number that is not an integer");
    if (E(A, "vs_plan_parse", "no colon", FX_NONE)) R(PARSE("zero 1\n"), "line 1");
    if (E(A, "vs_plan_parse", "a line of 600 bytes", FX_NONE)) {
        char t[700];
        memset(t, 'a', 600);
        memcpy(t, "split_points: ", 14);
        t[600] = 0;
        R(PARSE(t), "line 1 is too long");
    }
    if (E(A, "vs_plan_parse", "mesh PP=0", FX_NONE)) R(PARSE("mesh: PP=0 DP=1 TP=1\n"), "PP=0");
    if (E(A, "vs_plan_parse", "mesh PP=65536 DP=65536 TP=2 (overflows)", FX_NONE)) R(PARSE("mesh: PP=65536 DP=65536 TP=2\n"), "PP=65536 DP=65536 TP=2");
    if (E(A, "vs_plan_parse", "mesh PP=99999999999", FX_NONE)) R(PARSE("mesh: PP=99999999999 DP=1 TP=1\n"), "PP=99999999999");
    if (E(A, "vs_plan_parse", "mesh 'PP=2 DP=1 TP=1 x'", FX_NONE)) R(PARSE("mesh: PP=2 DP=1 TP=1 x\n"), "PP=2 DP=1 TP=1 x");
    if (E(A, "vs_plan_parse", "policy 'magic'", FX_NONE)) R(PARSE("policy: magic\n"), "\"magic\"");
    if (E(A, "vs_plan_parse", "split 'random'", FX_NONE)) R(PARSE("split: random\n"), "\"random\"");
    if (E(A, "vs_plan_parse", "schedule 'zbx'", FX_NONE)) R(PARSE("schedule: zbx\n"), "\"zbx\"");
    if (E(A, "vs_plan_parse", "zero 4", FX_NONE)) R(PARSE("zero: 4\n"), "zero = \"4\"");
    if (E(A, "vs_plan_parse", "dp_shard 3 of DP 8", FX_NONE)) R(PARSE("mesh: PP=1 DP=8 TP=1\ndp_shard: 3\n"), "dp_shard 3");
    if (E(A, "vs_plan_parse", "dp_shard -2", FX_NONE)) R(PARSE("dp_shard: -2\n"), "dp_shard = \"-2\"");
    if (E(A, "vs_plan_parse", "reshard_after_forward 2", FX_NONE)) R(PARSE("reshard_after_forward: 2\n"), "reshard_after_forward = \"2\"");
    if (E(A, "vs_plan_parse", "prefetch -1", FX_NONE)) R(PARSE("prefetch: -1\n"), "prefetch = \"-1\"");
    if (E(A, "vs_plan_parse", "chunks -1", FX_NONE)) R(PARSE("chunks: -1\n"), "chunks = \"-1\"");
    if (E(A, "vs_plan_parse", "microbatches 'abc'", FX_NONE)) R(PARSE("microbatches: abc\n"), "microbatches = \"abc\"");
    if (E(A, "vs_plan_parse", "strict 2", FX_NONE)) R(PARSE("strict: 2\n"), "strict = \"2\"");
    if (E(A, "vs_plan_parse", "sequence_parallel 2", FX_NONE)) R(PARSE("sequence_parallel: 2\n"), "sequence_parallel = \"2\"");
    if (E(A, "vs_plan_parse", "rule without placement", FX_NONE)) R(PARSE("shard: lin.*\n"), "\"lin.*\"");
    if (E(A, "vs_plan_parse", "rule 'x Shard(x)'", FX_NONE)) R(PARSE("shard: x Shard(x)\n"), "Shard(x)");
    if (E(A, "vs_plan_parse", "rule with an empty pattern (JSON)", FX_NONE))
        R(PARSE("{\"rules\": [{\"pattern\": \"\", \"placement\": \"Replicate\"}]}"), "pattern");
    if (E(A, "vs_plan_parse", "33 rules", FX_NONE)) {
        char t[1200];
        size_t n = 0;
        for (int i = 0; i < 33; i++) n += (size_t)snprintf(t + n, sizeof t - n, "shard: r%d R\n", i);
        R(PARSE(t), "more than 32 rules");
    }
    if (E(A, "vs_plan_parse", "a control character", FX_NONE)) R(PARSE("split_points: a\x01" "b\n"), "control");
    if (E(A, "vs_plan_parse", "a rule with byte 0xff", FX_NONE)) R(PARSE("shard: a\xff R\n"), "UTF-8");
    if (E(A, "vs_plan_parse", "a truncated UTF-8 sequence (0xc3)", FX_NONE)) R(PARSE("split_points: a\xc3\n"), "UTF-8");
    if (E(A, "vs_plan_parse", "an overlong UTF-8 '/' (0xc0 0xaf)", FX_NONE)) R(PARSE("shard: a\xc0\xaf R\n"), "UTF-8");
    if (E(A, "vs_plan_parse", "JSON '{'", FX_NONE)) R(PARSE("{"), "vs_plan_parse: plan JSON");
    if (E(A, "vs_plan_parse", "JSON '{\"split_points\": \" \",\xfe'", FX_NONE)) // (fuzz_plan: the message lacked the function)
        R(PARSE("{\"split_points\": \" \",\xfe\"x\": 1}"), "vs_plan_parse: plan JSON");
    if (E(A, "vs_plan_parse", "JSON '[1]' (not an object)", FX_NONE)) R(PARSE(" [1]"), "line 1");
    if (E(A, "vs_plan_parse", "JSON mesh without tp", FX_NONE)) R(PARSE("{\"mesh\": {\"pp\": 1, \"dp\": 1}}"), "pp, dp, tp");
    if (E(A, "vs_plan_parse", "JSON rules not an array", FX_NONE)) R(PARSE("{\"rules\": 5}"), "not an array");
    if (E(A, "vs_plan_parse", "JSON value an object", FX_NONE)) R(PARSE("{\"zero\": {}}"), "\"zero\"");
    if (E(A, "vs_plan_parse", "JSON zero 1.5", FX_NONE)) R(PARSE("{\"zero\": 1.5}"), "zero");
    if (E(A, "vs_plan_parse", "JSON zero 1e300", FX_NONE)) R(PARSE("{\"zero\": 1e300}"), "zero");
    if (E(A, "vs_plan_parse", "JSON split_points \"\\u00e9\" escaped", FX_NONE)) {
        vs_result r = PARSE("{\"split_points\": \"caf\\u00e9\"}");
        // a valid escape of a valid character: accepted, as UTF-8 bytes
        DOC(r == VS_OK && !strcmp(o.split_points, "caf\xc3\xa9"), "returned %d, '%s'", r, r ? vs_last_error() : o.split_points);
    }
    if (E(A, "vs_plan_check", "plan NULL", FX_NONE)) R(vs_plan_check(NULL, m), "plan is NULL");
    if (E(A, "vs_plan_check", "model NULL", FX_NONE)) R(vs_plan_check(&p, NULL), "model is NULL");
    if (E(A, "vs_plan_check", "pp -1", FX_NONE)) {
        p.pp = -1;
        R(vs_plan_check(&p, m), "PP=-1");
    }
    if (E(A, "vs_plan_check", "mesh 65536 x 65536 x 2 (overflows)", FX_NONE)) {
        p.pp = 1, p.dp = 65536 * 2, p.tp = 65536;
        R(vs_plan_check(&p, m), "DP=131072");
    }
    if (E(A, "vs_plan_check", "nrules 33", FX_NONE)) {
        p.nrules = 33;
        R(vs_plan_check(&p, m), "33 rules");
    }
    if (E(A, "vs_plan_check", "nrules -1", FX_NONE)) {
        p.nrules = -1;
        R(vs_plan_check(&p, m), "-1 rules");
    }
    if (E(A, "vs_plan_check", "policy 77", FX_NONE)) {
        p.policy = (vs_tp_policy)77;
        R(vs_plan_check(&p, m), "policy 77");
    }
    if (E(A, "vs_plan_check", "split 55", FX_NONE)) {
        p.split = (vs_pipe_split_kind)55;
        R(vs_plan_check(&p, m), "split 55");
    }
    if (E(A, "vs_plan_check", "microbatches -3", FX_NONE)) {
        p.microbatches = -3;
        R(vs_plan_check(&p, m), "microbatches -3");
    }
    if (E(A, "vs_plan_check", "chunks -1", FX_NONE)) {
        p.chunks = -1;
        R(vs_plan_check(&p, m), "chunks -1");
    }
    if (E(A, "vs_plan_check", "strict 2", FX_NONE)) {
        p.strict = 2;
        R(vs_plan_check(&p, m), "strict 2");
    }
    if (E(A, "vs_plan_check", "zero 7", FX_NONE)) {
        p.zero = (vs_zero_stage)7;
        R(vs_plan_check(&p, m), "zero 7");
    }
    if (E(A, "vs_plan_check", "dp_shard 3 of DP 2", FX_NONE)) {
        p.dp = 2, p.dp_shard = 3;
        R(vs_plan_check(&p, m), "dp_shard 3");
    }
    if (E(A, "vs_plan_check", "prefetch -1", FX_NONE)) {
        p.prefetch = -1;
        R(vs_plan_check(&p, m), "prefetch -1");
    }
    if (E(A, "vs_plan_check", "reshard_after_forward 5", FX_NONE)) {
        p.reshard_after_forward = 5;
        R(vs_plan_check(&p, m), "reshard_after_forward 5");
    }
    if (E(A, "vs_plan_check", "schedule 99", FX_NONE)) {
        p.schedule = (vs_pipe_kind)99;
        R(vs_plan_check(&p, m), "schedule 99");
    }
    if (E(A, "vs_plan_check", "sequence_parallel 3", FX_NONE)) {
        p.sequence_parallel = 3;
        R(vs_plan_check(&p, m), "sequence_parallel 3");
    }
    if (E(A, "vs_plan_check", "sequence_parallel, policy none, TP2", FX_NONE)) {
        p.sequence_parallel = 1, p.policy = VS_TP_NONE, p.tp = 2;
        R(vs_plan_check(&p, m), "policy none");
    }
    if (E(A, "vs_plan_check", "sequence_parallel on layers that do not handle it", FX_NONE)) {
        p.sequence_parallel = 1, p.tp = 2;
        R(vs_plan_check(&p, m), "\"lin\"");
    }
    if (E(A, "vs_plan_check", "3 stages of 2 layers", FX_NONE)) {
        p.pp = 3;
        R(vs_plan_check(&p, m), "3 stages");
    }
    if (E(A, "vs_plan_check", "a rule 'lin.w Shard(9)'", FX_NONE)) {
        p.nrules = 1;
        snprintf(p.rules[0].pattern, sizeof p.rules[0].pattern, "lin.w");
        snprintf(p.rules[0].placement, sizeof p.rules[0].placement, "Shard(9)");
        R(vs_plan_check(&p, m), "Shard(9)");
    }
    if (E(A, "vs_plan_check", "strict, a rule matching nothing", FX_NONE)) {
        p.nrules = 1, p.strict = 1;
        snprintf(p.rules[0].pattern, sizeof p.rules[0].pattern, "nothing.*");
        snprintf(p.rules[0].placement, sizeof p.rules[0].placement, "Replicate");
        R(vs_plan_check(&p, m), "\"nothing.*\"");
    }
    if (E(A, "vs_plan_check", "TP 3 does not divide 4", FX_NONE)) {
        p.tp = 3, p.nrules = 1;
        snprintf(p.rules[0].pattern, sizeof p.rules[0].pattern, "lin.w");
        snprintf(p.rules[0].placement, sizeof p.rules[0].placement, "Shard(1)");
        R(vs_plan_check(&p, m), "TP=3");
    }
    if (E(A, "vs_plan_check", "a rule pattern not terminated", FX_NONE)) {
        p.nrules = 1;
        memset(p.rules[0].pattern, 'a', sizeof p.rules[0].pattern);
        snprintf(p.rules[0].placement, sizeof p.rules[0].placement, "Replicate");
        R(vs_plan_check(&p, m), "rule 0");
    }
    if (E(A, "vs_plan_check", "a rule placement not terminated", FX_NONE)) {
        p.nrules = 1;
        snprintf(p.rules[0].pattern, sizeof p.rules[0].pattern, "x");
        memset(p.rules[0].placement, 'R', sizeof p.rules[0].placement);
        R(vs_plan_check(&p, m), "rule 0");
    }
    if (E(A, "vs_plan_check", "a rule pattern with byte 0x80", FX_NONE)) {
        p.nrules = 1;
        snprintf(p.rules[0].pattern, sizeof p.rules[0].pattern, "lin\x80");
        snprintf(p.rules[0].placement, sizeof p.rules[0].placement, "Replicate");
        R(vs_plan_check(&p, m), "UTF-8");
    }
    if (E(A, "vs_plan_check", "an empty rule pattern", FX_NONE)) {
        p.nrules = 1;
        snprintf(p.rules[0].placement, sizeof p.rules[0].placement, "Replicate");
        R(vs_plan_check(&p, m), "rule 0");
    }
    if (E(A, "vs_plan_check", "a model with role 77", FX_NONE)) {
        mc.l[0].params[0].role = (vs_role)77;
        R(vs_plan_check(&p, m), "role 77");
    }
    if (E(A, "vs_plan_placement", "plan NULL", FX_NONE)) R(vs_plan_placement(NULL, &sw_layers[0].params[0], &pl, &why), "plan is NULL");
    if (E(A, "vs_plan_placement", "decl NULL", FX_NONE)) R(vs_plan_placement(&p, NULL, &pl, &why), "decl is NULL|parameter is NULL");
    if (E(A, "vs_plan_placement", "out NULL", FX_NONE)) R(vs_plan_placement(&p, &sw_layers[0].params[0], NULL, &why), "out is NULL");
    if (E(A, "vs_plan_placement", "role 77", FX_NONE)) {
        vs_param_decl d = sw_layers[0].params[0];
        d.role = (vs_role)77;
        R(vs_plan_placement(&p, &d, &pl, &why), "role 77");
    }
    if (E(A, "vs_plan_placement", "role -1", FX_NONE)) {
        vs_param_decl d = sw_layers[0].params[0];
        d.role = (vs_role)-1;
        R(vs_plan_placement(&p, &d, &pl, &why), "role -1");
    }
    if (E(A, "vs_plan_placement", "policy 77", FX_NONE)) {
        p.policy = (vs_tp_policy)77;
        R(vs_plan_placement(&p, &sw_layers[0].params[0], &pl, &why), "policy 77");
    }
    if (E(A, "vs_plan_placement", "decl name NULL", FX_NONE)) {
        vs_param_decl d = sw_layers[0].params[0];
        d.name = NULL;
        p.nrules = 1;
        snprintf(p.rules[0].pattern, sizeof p.rules[0].pattern, "*");
        snprintf(p.rules[0].placement, sizeof p.rules[0].placement, "Replicate");
        R(vs_plan_placement(&p, &d, &pl, &why), "name is NULL");
    }
    if (E(A, "vs_plan_placement", "a rule 'Shard(1)' of a 1-dim parameter", FX_NONE)) {
        vs_param_decl d = sw_layers[0].params[0];
        d.ndim = 1;
        p.nrules = 1;
        snprintf(p.rules[0].pattern, sizeof p.rules[0].pattern, "lin.*");
        snprintf(p.rules[0].placement, sizeof p.rules[0].placement, "Shard(1)");
        R(vs_plan_placement(&p, &d, &pl, &why), "shards dim 1");
    }
    if (E(A, "vs_plan_placement", "nrules 40", FX_NONE)) {
        p.nrules = 40;
        R(vs_plan_placement(&p, &sw_layers[0].params[0], &pl, &why), "40 rules");
    }
#undef PARSE
}

static void sweep_generate(sw_ctx* x)
{
    const char* A = "generate-plan";
    vs_profile pf, po;
    memset(&pf, 0, sizeof pf);
    vs_constraints c;
    memset(&c, 0, sizeof c);
    c.world = 2, c.global_batch = 4;
    vs_plan out;
    vs_plan_estimate est[8];
    int n = 0;
    char b[4096];
    sw_model_copy mc;
    vs_model_desc* m = sw_model_dup(&mc);
#define GEN() vs_generate_plan(m, &c, &pf, &out, est, 8, &n)
    if (E(A, "vs_profile_measure", "world NULL", FX_NONE)) R(vs_profile_measure(NULL, m, sw_hl_data, NULL, &po), "world is NULL");
    if (E(A, "vs_profile_measure", "model NULL", FX_W2)) R(vs_profile_measure(x->w, NULL, sw_hl_data, NULL, &po), "model is NULL");
    if (E(A, "vs_profile_measure", "out NULL", FX_W2)) R(vs_profile_measure(x->w, m, sw_hl_data, NULL, NULL), "out is NULL");
    if (E(A, "vs_profile_measure", "data NULL", FX_W2)) R(vs_profile_measure(x->w, m, NULL, NULL, &po), "data is NULL");
    if (E(A, "vs_profile_measure", "a model with role 77", FX_W2)) {
        mc.l[0].params[0].role = (vs_role)77;
        R(vs_profile_measure(x->w, m, sw_hl_data, NULL, &po), "role 77");
    }
    if (E(A, "vs_profile_measure", "nlayers 0", FX_W2)) {
        m->nlayers = 0;
        R(vs_profile_measure(x->w, m, sw_hl_data, NULL, &po), "layers");
    }
    if (E(A, "vs_profile_measure", "a data callback that fails", FX_W2))
        R(vs_profile_measure(x->w, m, sw_data_fail, NULL, &po), "sw-data: no rows today");
    if (E(A, "vs_profile_print", "profile NULL", FX_NONE)) R(vs_profile_print(NULL, b, sizeof b), "profile is NULL");
    if (E(A, "vs_profile_print", "flop_s NaN", FX_NONE)) {
        pf.flop_s = NAN;
        R(vs_profile_print(&pf, b, sizeof b), "flop_s");
    }
    if (E(A, "vs_profile_print", "bw -1", FX_NONE)) {
        pf.bw_bytes_s = -1;
        R(vs_profile_print(&pf, b, sizeof b), "bw");
    }
    if (E(A, "vs_profile_print", "latency inf", FX_NONE)) {
        pf.latency_s = INFINITY;
        R(vs_profile_print(&pf, b, sizeof b), "latency");
    }
    if (E(A, "vs_profile_print", "ar_n 1", FX_NONE)) {
        pf.ar_n[0] = 1;
        R(vs_profile_print(&pf, b, sizeof b), "ar_n[0] = 1");
    }
    if (E(A, "vs_profile_print", "ar_n {4, 4} (twice)", FX_NONE)) {
        pf.ar_n[0] = pf.ar_n[1] = 4;
        R(vs_profile_print(&pf, b, sizeof b), "ar_n[1] = 4");
    }
    if (E(A, "vs_profile_print", "ar_s[0][2] NaN", FX_NONE)) {
        pf.ar_n[0] = 2, pf.ar_s[0][2] = NAN;
        R(vs_profile_print(&pf, b, sizeof b), "ar_s[0][2]");
    }
    if (E(A, "vs_profile_print", "tp_s[0] -inf", FX_NONE)) {
        pf.ar_n[0] = 2, pf.tp_s[0] = -INFINITY;
        R(vs_profile_print(&pf, b, sizeof b), "tp_s[0]");
    }
    if (E(A, "vs_profile_print", "buf NULL, cap 64", FX_NONE)) R(vs_profile_print(&pf, NULL, 64), "buf is NULL");
    if (E(A, "vs_profile_parse", "text NULL", FX_NONE)) R(vs_profile_parse(NULL, &po), "text is NULL");
    if (E(A, "vs_profile_parse", "out NULL", FX_NONE)) R(vs_profile_parse("flop_s=1", NULL), "out is NULL");
    if (E(A, "vs_profile_parse", "flop_s=abc", FX_NONE)) R(vs_profile_parse("flop_s=abc", &po), "flop_s = 'abc'");
    if (E(A, "vs_profile_parse", "flop_s=-1", FX_NONE)) R(vs_profile_parse("flop_s=-1", &po), "flop_s = '-1'");
    if (E(A, "vs_profile_parse", "flop_s=nan", FX_NONE)) R(vs_profile_parse("flop_s=nan", &po), "flop_s = 'nan'");
    if (E(A, "vs_profile_parse", "bw=1e999", FX_NONE)) R(vs_profile_parse("bw=1e999", &po), "bw = '1e999'");
    if (E(A, "vs_profile_parse", "bogus=1", FX_NONE)) R(vs_profile_parse("bogus=1", &po), "unknown key 'bogus'");
    if (E(A, "vs_profile_parse", "'flop_s' (no value)", FX_NONE)) R(vs_profile_parse("flop_s", &po), "'flop_s'");
    if (E(A, "vs_profile_parse", "ar1=1,2,3,4", FX_NONE)) R(vs_profile_parse("ar1=1,2,3,4", &po), "'ar1'");
    if (E(A, "vs_profile_parse", "ar4=1,2,3 (3 numbers)", FX_NONE)) R(vs_profile_parse("ar4=1,2,3", &po), "ar4");
    if (E(A, "vs_profile_parse", "tp4=inf", FX_NONE)) R(vs_profile_parse("tp4=inf", &po), "tp4 = 'inf'");
    if (E(A, "vs_profile_parse", "7 group sizes", FX_NONE))
        R(vs_profile_parse("tp2=0 tp3=0 tp4=0 tp5=0 tp6=0 tp7=0 tp8=0", &po), "more than 6 group sizes");
    if (E(A, "vs_profile_parse", "a key twice", FX_NONE)) R(vs_profile_parse("flop_s=1 flop_s=2", &po), "'flop_s' twice");
    if (E(A, "vs_profile_parse", "ar2 twice", FX_NONE)) R(vs_profile_parse("ar2=1,1,1,1 ar2=2,2,2,2", &po), "'ar2' twice");
    if (E(A, "vs_generate_plan", "model NULL", FX_NONE)) R(vs_generate_plan(NULL, &c, &pf, &out, est, 8, &n), "model is NULL");
    if (E(A, "vs_generate_plan", "constraints NULL", FX_NONE)) R(vs_generate_plan(m, NULL, &pf, &out, est, 8, &n), "constraints is NULL");
    if (E(A, "vs_generate_plan", "out NULL", FX_NONE)) R(vs_generate_plan(m, &c, &pf, NULL, est, 8, &n), "out is NULL");
    if (E(A, "vs_generate_plan", "est NULL, cap 8", FX_NONE)) R(vs_generate_plan(m, &c, &pf, &out, NULL, 8, &n), "est is NULL");
    if (E(A, "vs_generate_plan", "cap -1", FX_NONE)) R(vs_generate_plan(m, &c, &pf, &out, est, -1, &n), "cap -1");
    if (E(A, "vs_generate_plan", "world 0", FX_NONE)) {
        c.world = 0;
        R(GEN(), "world = 0");
    }
    if (E(A, "vs_generate_plan", "global_batch 0", FX_NONE)) {
        c.global_batch = 0;
        R(GEN(), "global_batch = 0");
    }
    if (E(A, "vs_generate_plan", "pp -1", FX_NONE)) {
        c.pp = -1;
        R(GEN(), "pp=-1");
    }
    if (E(A, "vs_generate_plan", "policy 77", FX_NONE)) {
        c.policy = (vs_tp_policy)77;
        R(GEN(), "policy 77");
    }
    if (E(A, "vs_generate_plan", "split 55", FX_NONE)) {
        c.split = (vs_pipe_split_kind)55;
        R(GEN(), "split 55");
    }
    if (E(A, "vs_generate_plan", "split manual", FX_NONE)) {
        c.split = VS_PIPE_SPLIT_MANUAL;
        R(GEN(), "split 1");
    }
    if (E(A, "vs_generate_plan", "sequence_parallel 2", FX_NONE)) {
        c.sequence_parallel = 2;
        R(GEN(), "sequence_parallel 2");
    }
    if (E(A, "vs_generate_plan", "sequence_parallel on layers that do not handle it", FX_NONE)) {
        c.sequence_parallel = 1, c.tp = 2, c.policy = VS_TP_MEGATRON;
        R(GEN(), "\"lin\"");
    }
    if (E(A, "vs_generate_plan", "mem_limit_bytes NaN", FX_NONE)) {
        c.mem_limit_bytes = NAN;
        R(GEN(), "mem_limit_bytes = nan|mem_limit_bytes = -nan");
    }
    if (E(A, "vs_generate_plan", "act_bytes_per_row -1", FX_NONE)) {
        c.act_bytes_per_row = -1;
        R(GEN(), "act_bytes_per_row = -1");
    }
    if (E(A, "vs_generate_plan", "zero3 2", FX_NONE)) {
        c.zero3 = 2;
        R(GEN(), "zero3 2");
    }
    if (E(A, "vs_generate_plan", "node_ranks -1", FX_NONE)) {
        c.node_ranks = -1;
        R(GEN(), "node_ranks = -1");
    }
    if (E(A, "vs_generate_plan", "inter_bw_bytes_s inf", FX_NONE)) {
        c.inter_bw_bytes_s = INFINITY;
        R(GEN(), "inter_bw_bytes_s = inf");
    }
    if (E(A, "vs_generate_plan", "profile flop_s NaN", FX_NONE)) {
        pf.flop_s = NAN;
        R(GEN(), "flop_s = nan|flop_s = -nan");
    }
    if (E(A, "vs_generate_plan", "profile ar_n[2] -1", FX_NONE)) {
        pf.ar_n[2] = -1;
        R(GEN(), "ar_n[2] = -1");
    }
    if (E(A, "vs_generate_plan", "profile w_share 1", FX_NONE)) {
        pf.w_share = 1;
        R(GEN(), "profile w_share = 1 (in [0, 1)");
    }
    if (E(A, "vs_generate_plan", "profile w_share NaN", FX_NONE)) {
        pf.w_share = NAN;
        R(GEN(), "w_share = nan|w_share = -nan");
    }
    if (E(A, "vs_generate_plan", "profile latency 1e308", FX_NONE)) {
        pf.latency_s = 1e308;
        R(GEN(), "1e+308");
    }
    if (E(A, "vs_generate_plan", "a memory limit of 1 byte", FX_NONE)) {
        c.mem_limit_bytes = 1;
        R(GEN(), "the limit is 1 B");
    }
    if (E(A, "vs_generate_plan", "a model with role 77", FX_NONE)) {
        mc.l[0].params[0].role = (vs_role)77;
        R(GEN(), "role 77");
    }
    if (E(A, "vs_generate_plan", "a model with shape {2^62}", FX_NONE)) {
        mc.l[0].params[0].ndim = 1, mc.l[0].params[0].shape[0] = (int64_t)1 << 62;
        R(GEN(), "4611686018427387904");
    }
    if (E(A, "vs_plan_explain", "est NULL, n 3", FX_NONE)) R(vs_plan_explain(NULL, 3, b, sizeof b), "est is NULL");
    if (E(A, "vs_plan_explain", "n -1", FX_NONE)) R(vs_plan_explain(est, -1, b, sizeof b), "n = -1");
    if (E(A, "vs_plan_explain", "buf NULL, cap 64", FX_NONE)) {
        vs_generate_plan(m, &c, NULL, &out, est, 8, &n);
        R(vs_plan_explain(est, n, NULL, 64), "buf is NULL");
    }
    if (E(A, "vs_plan_explain", "an estimate's why not terminated", FX_NONE)) {
        vs_generate_plan(m, &c, NULL, &out, est, 8, &n);
        for (int i = 0; i < n; i++) memset(est[i].why, 'x', sizeof est[i].why);
        R(vs_plan_explain(est, n, b, sizeof b), "why");
    }
    if (E(A, "vs_plan_explain", "feasible 5", FX_NONE)) {
        vs_generate_plan(m, &c, NULL, &out, est, 8, &n);
        est[0].feasible = 5;
        R(vs_plan_explain(est, n, b, sizeof b), "feasible = 5");
    }
    if (E(A, "vs_plan_explain", "step_s NaN", FX_NONE)) {
        vs_generate_plan(m, &c, NULL, &out, est, 8, &n);
        est[0].step_s = NAN;
        R(vs_plan_explain(est, n, b, sizeof b), "step_s");
    }
#undef GEN
}

/* vs_train_desc.storage that must never be called (ZeRO-3 refuses it first). */
static vs_result sw_storage_never(const char* name, vs_dtype dt, vs_dtype gdt, int64_t n, void** p, void** g, void* u)
{
    (void)name, (void)dt, (void)gdt, (void)n, (void)u;
    *p = *g = NULL;
    return vs_set_error(VS_ERR_STATE, "sw_storage_never: called");
}

static void sweep_train(sw_ctx* x)
{
    const char* A = "train";
    vs_train* o = NULL;
    vs_plan p;
    memset(&p, 0, sizeof p);
    p.dp = 2;
    sw_model_copy mc;
    vs_model_desc* m = sw_model_dup(&mc);
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = m, d.plan = &p;
    vs_batch bt = sw_batch();
    double loss = 0;
    int64_t a = 0, b2 = 0;
    float wbuf[16];
    char path[400];
    snprintf(path, sizeof path, "%s/new", x->dir ? x->dir : "/tmp");
    int64_t blob8 = 3;
    volatile size_t sw_huge = SIZE_MAX;
    vs_ckpt_entry ex[2];
    memset(ex, 0, sizeof ex);
    ex[0].name = "data_pos", ex[0].kind = VS_CKPT_BLOB, ex[0].blob = &blob8, ex[0].blob_bytes = 8;
#define PAR() vs_parallelize(x->w, &d, &o)
    if (E(A, "vs_parallelize", "out NULL", FX_W2)) R(vs_parallelize(x->w, &d, NULL), "out is NULL");
    if (E(A, "vs_parallelize", "world NULL", FX_NONE)) R(vs_parallelize(NULL, &d, &o), "world is NULL");
    if (E(A, "vs_parallelize", "desc NULL", FX_W2)) R(vs_parallelize(x->w, NULL, &o), "desc is NULL");
    if (E(A, "vs_parallelize", "plan NULL", FX_W2)) {
        d.plan = NULL;
        R(PAR(), "desc.plan is NULL");
    }
    if (E(A, "vs_parallelize", "model NULL", FX_W2)) {
        d.model = NULL;
        R(PAR(), "model is NULL");
    }
    if (E(A, "vs_parallelize", "zero 3 with trainer-owned storage (desc.storage)", FX_W2)) {
        p.zero = VS_ZERO_3;
        d.storage = sw_storage_never;
        R(PAR(), "zero 3 with desc.storage");
    }
    if (E(A, "vs_parallelize", "dp_shard 3 of DP=2 (HSDP)", FX_W2)) {
        p.dp_shard = 3;
        R(PAR(), "dp_shard 3");
    }
    if (E(A, "vs_parallelize", "mesh PP2 x DP2 on 2 ranks", FX_W2)) {
        p.pp = 2;
        R(PAR(), "the world has 2");
    }
    if (E(A, "vs_parallelize", "mesh 65536 x 65536 x 1 (the product overflows)", FX_W2)) {
        p.pp = 65536, p.dp = 65536;
        R(PAR(), "PP=65536");
    }
    if (E(A, "vs_parallelize", "clip NaN", FX_W2)) {
        d.clip = NAN;
        R(PAR(), "desc.clip = nan|desc.clip = -nan");
    }
    if (E(A, "vs_parallelize", "clip -1", FX_W2)) {
        d.clip = -1;
        R(PAR(), "desc.clip = -1");
    }
    if (E(A, "vs_parallelize", "nonfinite 7", FX_W2)) {
        d.nonfinite = (vs_nonfinite_policy)7;
        R(PAR(), "desc.nonfinite = 7");
    }
    if (E(A, "vs_parallelize", "lr kind 99", FX_W2)) {
        d.lr.kind = (vs_lr_kind)99;
        R(PAR(), "kind 99");
    }
    if (E(A, "vs_parallelize", "lr -1", FX_W2)) {
        d.lr.lr = -1;
        R(PAR(), "lr -1");
    }
    if (E(A, "vs_parallelize", "optim beta1 2", FX_W2)) {
        d.optim.beta1 = 2;
        R(PAR(), "beta1 2");
    }
    if (E(A, "vs_parallelize", "policy 77", FX_W2)) {
        p.policy = (vs_tp_policy)77;
        R(PAR(), "policy 77");
    }
    if (E(A, "vs_parallelize", "split 55", FX_W2)) {
        p.split = (vs_pipe_split_kind)55;
        R(PAR(), "split 55");
    }
    if (E(A, "vs_parallelize", "microbatches -3", FX_W2)) {
        p.microbatches = -3;
        R(PAR(), "microbatches -3");
    }
    if (E(A, "vs_parallelize", "chunks -1", FX_W2)) {
        p.chunks = -1;
        R(PAR(), "chunks -1");
    }
    if (E(A, "vs_parallelize", "zero 7", FX_W2)) {
        p.zero = (vs_zero_stage)7;
        R(PAR(), "zero 7");
    }
    if (E(A, "vs_parallelize", "a parameter role 77", FX_W2)) {
        mc.l[0].params[0].role = (vs_role)77;
        R(PAR(), "role 77");
    }
    if (E(A, "vs_parallelize", "a parameter of shape {2^62}", FX_W2)) {
        mc.l[0].params[0].ndim = 1, mc.l[0].params[0].shape[0] = (int64_t)1 << 62;
        R(PAR(), "4611686018427387904");
    }
    if (E(A, "vs_parallelize", "a parameter of shape {2^40} (no memory)", FX_W2)) {
        mc.l[0].params[0].ndim = 1, mc.l[0].params[0].shape[0] = (int64_t)1 << 40;
        R(PAR(), "lin.w");
    }
    if (E(A, "vs_parallelize", "sequence_parallel on layers that do not handle it", FX_W2)) {
        p.dp = 1, p.tp = 2, p.sequence_parallel = 1;
        R(PAR(), "\"lin\"");
    }
    if (E(A, "vs_parallelize", "split points 'nope'", FX_W2)) {
        p.dp = 1, p.pp = 2;
        snprintf(p.split_points, sizeof p.split_points, "nope");
        R(PAR(), "'nope'");
    }
    if (E(A, "vs_parallelize", "zbv with 2 layers on 2 stages", FX_W2)) {
        p.dp = 1, p.pp = 2, p.schedule = VS_PIPE_ZBV;
        R(PAR(), "2 stages x 2 chunks");
    }
    if (E(A, "vs_train_step", "train NULL", FX_NONE)) R(vs_train_step(NULL, &bt, &loss), "train is NULL");
    if (E(A, "vs_train_step", "batch NULL", FX_TRAIN)) R(vs_train_step(x->train, NULL, &loss), "batch is NULL");
    if (E(A, "vs_train_step", "batch.n 0", FX_TRAIN)) {
        bt.n = 0;
        R(vs_train_step(x->train, &bt, &loss), "batch.n = 0");
    }
    if (E(A, "vs_train_step", "batch.n 9", FX_TRAIN)) {
        bt.n = 9;
        R(vs_train_step(x->train, &bt, &loss), "batch.n = 9");
    }
    if (E(A, "vs_train_step", "0 rows", FX_TRAIN)) {
        bt.shape[0][0] = bt.shape[1][0] = 0;
        R(vs_train_step(x->train, &bt, &loss), "0 rows");
        if (x->outcome == SW_CLEAR && vs_train_steps(x->train) != 1)
            sw_set(x, SW_SILENT, "refused, but the step count is %lld", (long long)vs_train_steps(x->train));
    }
    if (E(A, "vs_train_step", "-4 rows", FX_TRAIN)) {
        bt.shape[0][0] = bt.shape[1][0] = -4;
        R(vs_train_step(x->train, &bt, &loss), "-4 rows");
    }
    if (E(A, "vs_train_step", "3 rows over DP2", FX_TRAIN)) {
        bt.shape[0][0] = bt.shape[1][0] = 3;
        R(vs_train_step(x->train, &bt, &loss), "3 rows");
    }
    if (E(A, "vs_train_step", "rows 4 and 8", FX_TRAIN)) {
        bt.shape[1][0] = 8;
        R(vs_train_step(x->train, &bt, &loss), "4 and 8 rows");
    }
    if (E(A, "vs_train_step", "an input name NULL", FX_TRAIN)) {
        bt.name[1] = NULL;
        R(vs_train_step(x->train, &bt, &loss), "batch input 1");
    }
    if (E(A, "vs_train_step", "an input data NULL", FX_TRAIN)) {
        bt.data[0] = NULL;
        R(vs_train_step(x->train, &bt, &loss), "batch input 0");
    }
    if (E(A, "vs_train_step", "an input ndim 0", FX_TRAIN)) {
        bt.ndim[0] = 0;
        R(vs_train_step(x->train, &bt, &loss), "batch input 0");
    }
    if (E(A, "vs_train_step", "an input dtype 99", FX_TRAIN)) {
        bt.dtype[0] = (vs_dtype)99;
        R(vs_train_step(x->train, &bt, &loss), "dtype 99");
    }
    if (E(A, "vs_train_step", "an input shape {4, -4}", FX_TRAIN)) {
        bt.shape[0][1] = -4;
        R(vs_train_step(x->train, &bt, &loss), "shape[1] = -4");
    }
    if (E(A, "vs_train_step", "an input shape {4, 2^62} (bytes overflow)", FX_TRAIN)) {
        bt.shape[0][1] = (int64_t)1 << 62;
        R(vs_train_step(x->train, &bt, &loss), "4611686018427387904");
    }
    if (E(A, "vs_train_step", "the same input twice", FX_TRAIN)) {
        bt.name[1] = "x";
        R(vs_train_step(x->train, &bt, &loss), "\"x\" twice");
    }
    if (E(A, "vs_train_step", "no input 't'", FX_TRAIN)) {
        bt.name[1] = "target";
        R(vs_train_step(x->train, &bt, &loss), "\"t\"");
    }
    if (E(A, "vs_train_step", "freed training state", FX_W2)) {
        vs_parallelize(x->w, &d, &o);
        vs_train_free(o);
        R(vs_train_step(o, &bt, &loss), "already freed");
    }
    if (E(A, "vs_train_steps", "train NULL", FX_NONE)) R(vs_train_steps(NULL), "train is NULL");
    if (E(A, "vs_train_skipped_steps", "train NULL", FX_NONE)) R(vs_train_skipped_steps(NULL), "train is NULL");
    if (E(A, "vs_train_grad_norm", "train NULL", FX_NONE)) RN(vs_train_grad_norm(NULL), "train is NULL");
    if (E(A, "vs_train_mesh", "train NULL", FX_NONE)) RP(vs_train_mesh(NULL), "train is NULL");
    if (E(A, "vs_train_pipe", "train NULL", FX_NONE)) RP(vs_train_pipe(NULL), "train is NULL");
    if (E(A, "vs_train_ddp", "train NULL", FX_NONE)) RP(vs_train_ddp(NULL), "train is NULL");
    if (E(A, "vs_train_memory", "train NULL", FX_NONE)) R(vs_train_memory(NULL, &a, &b2), "train is NULL");
    if (E(A, "vs_train_get_param", "train NULL", FX_NONE)) R(vs_train_get_param(NULL, "lin.w", wbuf, sizeof wbuf), "train is NULL");
    if (E(A, "vs_train_get_param", "name NULL", FX_TRAIN)) R(vs_train_get_param(x->train, NULL, wbuf, sizeof wbuf), "name is NULL");
    if (E(A, "vs_train_get_param", "out NULL", FX_TRAIN)) R(vs_train_get_param(x->train, "lin.w", NULL, sizeof wbuf), "out is NULL");
    if (E(A, "vs_train_get_param", "name 'lin.q'", FX_TRAIN)) R(vs_train_get_param(x->train, "lin.q", wbuf, sizeof wbuf), "\"lin.q\"");
    if (E(A, "vs_train_get_param", "bytes 63 for 64", FX_TRAIN)) R(vs_train_get_param(x->train, "lin.w", wbuf, 63), "got 63");
    if (E(A, "vs_train_save", "train NULL", FX_NONE)) R(vs_train_save(NULL, path, NULL, 0, 0), "train is NULL");
    if (E(A, "vs_train_save", "path NULL", FX_TRAIN)) R(vs_train_save(x->train, NULL, NULL, 0, 0), "path is NULL");
    if (E(A, "vs_train_save", "nextra -1", FX_TRAIN)) R(vs_train_save(x->train, path, ex, -1, 0), "-1 extra");
    if (E(A, "vs_train_save", "nextra 61", FX_TRAIN)) R(vs_train_save(x->train, path, ex, 61, 0), "61 extra");
    if (E(A, "vs_train_save", "extra NULL, nextra 1", FX_TRAIN)) R(vs_train_save(x->train, path, NULL, 1, 0), "extra");
    if (E(A, "vs_train_save", "async 7", FX_TRAIN)) R(vs_train_save(x->train, path, NULL, 0, 7), "async = 7");
    if (E(A, "vs_train_save", "async -1", FX_TRAIN)) R(vs_train_save(x->train, path, NULL, 0, -1), "async = -1");
    if (E(A, "vs_train_save", "onto an existing path", FX_TRAIN)) R(vs_train_save(x->train, x->ck0, NULL, 0, 0), "exists");
    if (E(A, "vs_train_save", "async onto an existing path", FX_TRAIN)) R(vs_train_save(x->train, x->ck0, NULL, 0, 1), "exists");
    if (E(A, "vs_train_save", "two async saves to one path", FX_TRAIN)) {
        vs_train_save(x->train, path, NULL, 0, 1);
        R(vs_train_save(x->train, path, NULL, 0, 1), "exists");
    }
    if (E(A, "vs_train_save", "an extra named '__plan'", FX_TRAIN)) {
        ex[0].name = "__plan";
        R(vs_train_save(x->train, path, ex, 1, 0), "\"__plan\"");
    }
    if (E(A, "vs_train_save", "an extra named like a parameter", FX_TRAIN)) {
        ex[0].name = "lin.w";
        R(vs_train_save(x->train, path, ex, 1, 0), "\"lin.w\"");
    }
    if (E(A, "vs_train_save", "an extra name NULL", FX_TRAIN)) {
        ex[0].name = NULL;
        R(vs_train_save(x->train, path, ex, 1, 0), "entry");
    }
    if (E(A, "vs_train_save", "an extra blob_bytes SIZE_MAX", FX_TRAIN)) {
        ex[0].blob_bytes = sw_huge;
        R(vs_train_save(x->train, path, ex, 1, 0), "blob_bytes = 18446744073709551615");
    }
    if (E(A, "vs_train_save", "async, an extra blob_bytes SIZE_MAX", FX_TRAIN)) {
        ex[0].blob_bytes = sw_huge;
        R(vs_train_save(x->train, path, ex, 1, 1), "blob_bytes = 18446744073709551615");
    }
    if (E(A, "vs_train_save", "a path under a regular file", FX_TRAIN)) {
        char f[400], q[500];
        snprintf(f, sizeof f, "%s/file", x->dir);
        FILE* fp = fopen(f, "w");
        if (fp) fclose(fp);
        snprintf(q, sizeof q, "%s/sub/ck", f);
        R(vs_train_save(x->train, q, NULL, 0, 0), f);
    }
    if (E(A, "vs_train_wait", "train NULL", FX_NONE)) R(vs_train_wait(NULL), "train is NULL");
    if (E(A, "vs_train_wait", "freed training state", FX_W2)) {
        vs_parallelize(x->w, &d, &o);
        vs_train_free(o);
        R(vs_train_wait(o), "already freed");
    }
    if (E(A, "vs_train_load", "train NULL", FX_NONE)) R(vs_train_load(NULL, path, NULL, 0), "train is NULL");
    if (E(A, "vs_train_load", "path NULL", FX_TRAIN)) R(vs_train_load(x->train, NULL, NULL, 0), "path is NULL");
    if (E(A, "vs_train_load", "a missing path", FX_TRAIN)) R(vs_train_load(x->train, path, NULL, 0), path);
    if (E(A, "vs_train_load", "nextra -1", FX_TRAIN)) R(vs_train_load(x->train, x->ck0, ex, -1), "-1 extra");
    if (E(A, "vs_train_load", "extra NULL, nextra 1", FX_TRAIN)) R(vs_train_load(x->train, x->ck0, NULL, 1), "1 extra");
    if (E(A, "vs_train_load", "an extra the checkpoint lacks", FX_TRAIN)) R(vs_train_load(x->train, x->ck0, ex, 1), "\"data_pos\"");
    if (E(A, "vs_train_load", "index.json '{'", FX_TRAIN)) {
        char q[512];
        sw_write_index(x->dir, "bad", "{", q, sizeof q);
        R(vs_train_load(x->train, q, NULL, 0), "index.json");
    }
    if (E(A, "vs_train_saved_plan", "path NULL", FX_NONE)) {
        vs_plan q;
        R(vs_train_saved_plan(NULL, &q), "path is NULL");
    }
    if (E(A, "vs_train_saved_plan", "out NULL", FX_NONE)) R(vs_train_saved_plan(x->dir, NULL), "out is NULL");
    if (E(A, "vs_train_saved_plan", "a missing path", FX_NONE)) {
        vs_plan q;
        R(vs_train_saved_plan("/nonexistent-vs/ck", &q), "/nonexistent-vs/ck");
    }
    if (E(A, "vs_train_saved_plan", "an empty index.json", FX_NONE)) {
        vs_plan q;
        char d2[512];
        sw_write_index(x->dir, "bad", "", d2, sizeof d2);
        R(vs_train_saved_plan(d2, &q), "index.json");
    }
    if (E(A, "vs_train_saved_plan", "index.json '{'", FX_NONE)) {
        vs_plan q;
        char d2[512];
        sw_write_index(x->dir, "bad", "{", d2, sizeof d2);
        R(vs_train_saved_plan(d2, &q), "index.json");
    }
    if (E(A, "vs_train_saved_plan", "index.json a directory", FX_NONE)) {
        vs_plan q;
        char d2[512], f[600];
        snprintf(d2, sizeof d2, "%s/dirix", x->dir);
        mkdir(d2, 0755);
        snprintf(f, sizeof f, "%s/index.json", d2);
        mkdir(f, 0755);
        R(vs_train_saved_plan(d2, &q), "index.json");
    }
    if (E(A, "vs_train_saved_plan", "a checkpoint without a plan", FX_TRAIN)) {
        vs_plan q;
        vs_ckpt_entry e1 = ex[0];
        vs_ckpt_save(x->ck, path, &e1, 1, NULL);
        R(vs_train_saved_plan(path, &q), "holds no plan");
        ONLY_RANK(0);
    }
    if (E(A, "vs_train_saved_plan", "a plan blob of 2 bytes 'x:'", FX_TRAIN)) {
        vs_plan q;
        vs_ckpt_entry e1 = ex[0];
        e1.name = "__plan", e1.blob = (void*)"x:", e1.blob_bytes = 2;
        vs_ckpt_save(x->ck, path, &e1, 1, NULL);
        R(vs_train_saved_plan(path, &q), "unknown key \"x\"");
        ONLY_RANK(0);
    }
    if (E(A, "vs_train_saved_plan", "a plan's bytes changed", FX_TRAIN)) {
        vs_plan q;
        if (x->rank == 0) // the plan text is in one of the shards: its "PP=" becomes "QP="
            for (int k = 0; k < 2; k++) {
                char shard[600];
                snprintf(shard, sizeof shard, "%s/shard-%05d.safetensors", x->ck0, k);
                FILE* fp = fopen(shard, "r+b");
                char* buf = NULL;
                long len = 0;
                if (fp && !fseek(fp, 0, SEEK_END) && (len = ftell(fp)) > 0 && (buf = (char*)malloc((size_t)len)) &&
                    !fseek(fp, 0, SEEK_SET) && fread(buf, 1, (size_t)len, fp) == (size_t)len) {
                    for (long i = 0; i + 3 < len; i++)
                        if (!memcmp(buf + i, "PP=", 3) && !fseek(fp, i, SEEK_SET)) {
                            fputc('Q', fp);
                            break;
                        }
                }
                free(buf);
                if (fp) fclose(fp);
            }
        R(vs_train_saved_plan(x->ck0, &q), "checksum");
        ONLY_RANK(0);
    }
    if (E(A, "vs_train_free", "train NULL", FX_NONE)) DOC(vs_train_free(NULL) == VS_OK, "VS_OK (documented)");
    if (E(A, "vs_train_free", "freed twice", FX_W2)) {
        vs_parallelize(x->w, &d, &o);
        vs_train_free(o);
        R(vs_train_free(o), "already freed");
    }
#undef PAR
}

static void sweep_all(sw_ctx* x)
{
    sweep_base(x);
    sweep_comm(x);
    sweep_mesh(x);
    sweep_layout(x);
    sweep_tp(x);
    sweep_init(x);
    sweep_bootstrap(x);
    sweep_ddp(x);
    sweep_lr(x);
    sweep_pipe_sched(x);
    sweep_pipe_sim(x);
    sweep_pipe_split(x);
    sweep_pipe_engine(x);
    sweep_ckpt(x);
    sweep_model(x);
    sweep_plan(x);
    sweep_generate(x);
    sweep_train(x);
}

/* ------------------------------------------------------------------------ */
/* Fixtures, children, outcomes. */

static void sw_logger(vs_log_level level, const char* msg, void* user)
{
    (void)level;
    if (strstr(msg, "sw-mark")) __atomic_add_fetch(&((sw_job*)user)->marks, 1, __ATOMIC_SEQ_CST);
}

static vs_result sw_setup_pipe(sw_ctx* x)
{
    vs_result r;
    static const vs_pipe_unit u[2] = {
        {.name = "u0", .inputs = "x", .outputs = "h:f32[*,4]", .forward = sw_u0_fwd, .backward = sw_u0_bwd, .flops = 1},
        {.name = "ploss", .inputs = "h", .outputs = "loss:f32[]", .forward = sw_ploss_fwd, .backward = sw_ploss_bwd,
         .flops = 1}};
    x->punits[0] = u[0], x->punits[1] = u[1];
    x->punits[0].user = x->punits[1].user = x;
    if ((r = vs_mesh_init(x->w, &(vs_mesh_desc){.shape = {2}, .dim_names = {"PP"}}, &x->mesh))) return r;
    if ((r = vs_pipe_split(x->punits, 2, &(vs_pipe_split_desc){.stages = 2}, &x->pplan))) return r;
    if ((r = vs_pipe_init(&(vs_pipe_desc){.mesh = x->mesh, .units = x->punits, .nunits = 2, .plan = &x->pplan,
                                          .data = sw_data},
                          &x->pipe)))
        return r;
    if ((r = vs_pipe_generate(x->w, VS_PIPE_1F1B, 2, 0, 2, &x->sched))) return r;
    return vs_pipe_run(x->pipe, x->sched, NULL);
}

static vs_result sw_setup_train(sw_ctx* x)
{
    vs_result r;
    vs_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.dp = 2;
    if ((r = vs_parallelize(x->w, &(vs_train_desc){.model = &sw_model, .plan = &plan}, &x->train))) return r;
    vs_batch b = sw_batch();
    double loss;
    if ((r = vs_train_step(x->train, &b, &loss))) return r;
    snprintf(x->ck0, sizeof x->ck0, "%s/ck0", x->dir);
    if ((r = vs_train_save(x->train, x->ck0, NULL, 0, 0))) return r;
    return vs_ckpt_init(&(vs_ckpt_desc){.mesh = vs_train_mesh(x->train)}, &x->ck);
}

static vs_result sw_setup(sw_ctx* x, int fx)
{
    vs_result r;
    x->comm = vs_world_comm(x->w);
    x->rank = vs_world_rank(x->w);
    for (int i = 0; i < 64; i++) x->buf[i] = (float)i, x->buf2[i] = 0;
    if ((r = vs_comm_split(x->comm, 0, x->rank, &x->split))) return r;
    if ((r = vs_comm_split(x->comm, 0, x->rank, &x->freed))) return r;
    if ((r = vs_comm_free(x->freed))) return r;
    if (fx == FX_PIPE) return sw_setup_pipe(x);
    if (fx == FX_TRAIN) return sw_setup_train(x);
    if (fx < FX_M4) return VS_OK;
    if ((r = vs_mesh_init(x->w, &(vs_mesh_desc){.shape = {2, 2}}, &x->mesh))) return r;
    if ((r = vs_mesh_submesh(x->mesh, "DP", &x->dp))) return r;
    if ((r = vs_mesh_submesh(x->mesh, "TP", &x->tp))) return r;
    if (fx < FX_DDP) return VS_OK;
    if ((r = vs_ddp_init(&(vs_ddp_desc){.mesh = x->mesh, .zero = VS_ZERO_1}, &x->ddp))) return r;
    if ((r = vs_ddp_add_param(x->ddp, &(vs_ddp_param_desc){.name = "w", .dtype = VS_F32, .ndim = 2, .shape = {4, 4}}, NULL)))
        return r;
    if ((r = vs_ddp_add_param(x->ddp, &(vs_ddp_param_desc){.name = "b", .dtype = VS_F32, .ndim = 1, .shape = {4}}, NULL)))
        return r;
    if (fx < FX_DDPF) return VS_OK;
    return vs_ddp_finalize(x->ddp);
}

static void sw_teardown(sw_ctx* x)
{
    if (x->ck) vs_ckpt_free(x->ck);
    if (x->train) vs_train_free(x->train);
    if (x->sched) vs_pipe_sched_free(x->sched);
    if (x->pipe) vs_pipe_free(x->pipe);
    if (x->ddp) vs_ddp_free(x->ddp);
    if (x->mesh) vs_mesh_free(x->mesh);
    if (x->split) vs_comm_free(x->split);
}

static int sw_rank(vs_world* w, void* arg)
{
    sw_job* j = (sw_job*)arg;
    sw_ctx* x = (sw_ctx*)calloc(1, sizeof *x);
    if (!x) return VS_ERR_NOMEM;
    x->sel = j->sel;
    x->job = j;
    x->w = w;
    x->dir = j->dir;
    x->outcome = SW_NONE;
    vs_result r = sw_setup(x, j->fx);
    if (r)
        sw_set(x, SW_SETUP, "fixture: %s: %s", vs_result_string(r), vs_last_error());
    else
        sweep_all(x);
    int me = x->rank >= 0 && x->rank < 4 ? x->rank : 0;
    j->outcome[me] = x->outcome;
    memcpy(j->detail[me], x->detail, SW_DETAIL);
    sw_teardown(x);
    free(x);
    return 0;
}

typedef struct sw_report {
    int outcome;
    char detail[SW_DETAIL + 16];
} sw_report;

/* Runs entry `id` (in the child) and says what came of it. */
/* rm -r of the entry's temporary folder (what the library left there). */
static void sw_rmtree(const char* path)
{
    struct stat st;
    if (lstat(path, &st)) return;
    if (S_ISDIR(st.st_mode)) {
        DIR* d = opendir(path);
        struct dirent* e;
        while (d && (e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char sub[1024];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            sw_rmtree(sub);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static void sw_run_entry_in(int id, sw_report* rep, sw_job* j);

static void sw_run_entry(int id, sw_report* rep)
{
    static sw_job j;
    memset(&j, 0, sizeof j);
    snprintf(j.dir, sizeof j.dir, "%s/vs-badinput-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(j.dir)) {
        rep->outcome = SW_SETUP;
        snprintf(rep->detail, sizeof rep->detail, "mkdtemp %s failed", j.dir);
        return;
    }
    sw_run_entry_in(id, rep, &j);
    sw_rmtree(j.dir);
}

static void sw_run_entry_in(int id, sw_report* rep, sw_job* jp)
{
    int fx = sw_metas[id].fx;
    rep->outcome = SW_NONE;
    if (fx == FX_NONE) {
        sw_ctx* x = (sw_ctx*)calloc(1, sizeof *x);
        if (!x) return;
        x->sel = id;
        x->outcome = SW_NONE;
        x->dir = jp->dir;
        sweep_all(x);
        rep->outcome = x->outcome;
        snprintf(rep->detail, sizeof rep->detail, "%s", x->detail);
        free(x);
        return;
    }
    jp->sel = id;
    jp->fx = fx;
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = sw_fx_ranks[fx];
    d.timeout_s = 5;
    d.log_level = VS_LOG_DEBUG;
    d.logger.fn = sw_logger;
    d.logger.user = jp;
    vs_result lr = vs_launch_ex(&d, sw_rank, jp);
    // the worst outcome over the ranks that count
    int worst = -1, at = 0;
    for (int r = 0; r < d.nranks; r++) {
        if (jp->outcome[r] == SW_IGNORED) continue;
        if (worst < 0 || jp->outcome[r] > worst || (worst == SW_CLEAR && jp->outcome[r] == SW_TOLERATED))
            worst = jp->outcome[r], at = r;
    }
    if (worst < 0) {
        rep->outcome = SW_NONE;
        snprintf(rep->detail, sizeof rep->detail, "no rank recorded an outcome (launch: %s)", vs_result_string(lr));
        return;
    }
    rep->outcome = worst;
    snprintf(rep->detail, sizeof rep->detail, "rank %d: %s", at, jp->detail[at]);
}

/* Forks a child for entry `id`; the child reports through a pipe. */
static int sw_fork_entry(int id, char* detail, size_t cap)
{
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(detail, cap, "pipe failed");
        return SW_SETUP;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        snprintf(detail, cap, "fork failed");
        return SW_SETUP;
    }
    if (pid == 0) {
        close(fds[0]);
        alarm(20);
#ifndef SW_ASAN
        struct rlimit rl; // a runaway allocation fails here instead of in the machine
        rl.rlim_cur = rl.rlim_max = (rlim_t)8 << 30;
        setrlimit(RLIMIT_AS, &rl);
#endif
        sw_report rep;
        memset(&rep, 0, sizeof rep);
        sw_run_entry(id, &rep);
        ssize_t k = write(fds[1], &rep, sizeof rep);
        _exit(k == (ssize_t)sizeof rep ? 0 : 3);
    }
    close(fds[1]);
    sw_report rep;
    memset(&rep, 0, sizeof rep);
    size_t got = 0;
    while (got < sizeof rep) {
        ssize_t k = read(fds[0], (char*)&rep + got, sizeof rep - got);
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fds[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
    }
    if (WIFSIGNALED(st)) {
        int sig = WTERMSIG(st);
        snprintf(detail, cap, "killed by signal %d", sig);
        return sig == SIGALRM ? SW_HANG : SW_CRASH;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || got != sizeof rep) {
        snprintf(detail, cap, "exit status %d, %s", WIFEXITED(st) ? WEXITSTATUS(st) : -1,
                 got == sizeof rep ? "report complete" : "no report (a sanitizer stopped it?)");
        return SW_CRASH;
    }
    rep.detail[sizeof rep.detail - 1] = 0;
    snprintf(detail, cap, "%s", rep.detail);
    return rep.outcome;
}

static const char* const sw_areas[] = {"base", "comm", "mesh", "layout", "tp", "init", "bootstrap", "ddp", "lr",
                                       "pipe-sched", "pipe-sim", "pipe-split", "pipe-engine", "ckpt", "model", "plan",
                                       "generate-plan", "train"};
#define SW_NAREAS ((int)(sizeof sw_areas / sizeof sw_areas[0]))

static int sw_area_index(const char* a)
{
    for (int i = 0; i < SW_NAREAS; i++)
        if (!strcmp(a, sw_areas[i])) return i;
    return 0;
}

static void t_sweep(const char* only)
{
    sw_ctx lx;
    memset(&lx, 0, sizeof lx);
    lx.listing = 1;
    sweep_all(&lx);
    VT_CHECK(sw_nmeta <= SW_MAX, "%d entries, room for %d", sw_nmeta, SW_MAX);
    if (sw_nmeta > SW_MAX) return;
    int count[SW_HANG + 1] = {0}, area_bad[SW_NAREAS] = {0}, area_n[SW_NAREAS] = {0}, calls = 0;
    for (int id = 0; id < sw_nmeta; id++) {
        const sw_meta* m = &sw_metas[id];
        if (only && !strstr(m->fn, only) && strcmp(only, m->area)) continue;
        char detail[SW_DETAIL + 64];
        int o = sw_fork_entry(id, detail, sizeof detail);
        calls++;
        count[o]++;
        int a = sw_area_index(m->area);
        area_n[a]++;
        if (o == SW_TOLERATED) {
            printf("# note %s(%s): %s\n", m->fn, m->input, detail);
        } else if (o != SW_CLEAR) {
            area_bad[a]++;
            printf("# %s: %s(%s): %s\n", sw_outcome_names[o], m->fn, m->input, detail);
        }
    }
    for (int a = 0; a < SW_NAREAS; a++) {
        char name[64];
        snprintf(name, sizeof name, "badinput/%s", sw_areas[a]);
        if (!area_n[a]) continue;
        vt_begin(name);
        VT_CHECK(area_bad[a] == 0, "%d of %d calls in %s without a clear error", area_bad[a], area_n[a], sw_areas[a]);
        vt_end(name);
    }
    int crashes = count[SW_CRASH] + count[SW_HANG] + count[SW_SETUP] + count[SW_NONE];
    int silent = count[SW_SILENT] + count[SW_VAGUE];
    printf("%d calls: %d clear errors, %d crashes, %d silent\n", calls, count[SW_CLEAR], crashes, silent);
    printf("# of which: %d hangs, %d vague messages, %d setup failures; %d tolerated (cannot fail, no documented "
           "error value; listed as notes)\n", count[SW_HANG], count[SW_VAGUE], count[SW_SETUP] + count[SW_NONE],
           count[SW_TOLERATED]);
    vt_begin("badinput/sweep");
    VT_CHECK(crashes == 0 && silent == 0, "%d crashes or hangs, %d silent or vague", crashes, silent);
    vt_end("badinput/sweep");
}

/* ------------------------------------------------------------------------ */
/* Valid inputs at the edges must work. */

static int edges_rank(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh *mesh = NULL, *sub = NULL, *dp = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {2, 2}}, &mesh));
    if (!mesh) return 1;
    // dim lists with spaces
    VT_OK(vs_mesh_submesh(mesh, "DP, TP", &sub));
    VT_CHECK(sub && vs_mesh_nranks(sub) == 4 && vs_mesh_ndims(sub) == 2, "submesh 'DP, TP'");
    VT_OK(vs_mesh_submesh(mesh, " DP ", &dp));
    VT_CHECK(dp && vs_mesh_nranks(dp) == 2, "submesh ' DP '");
    int ranks[4], n = 0;
    VT_OK(vs_mesh_group_of(mesh, "TP , DP", 0, ranks, 4, &n));
    VT_CHECK(n == 4 && ranks[0] == 0 && ranks[1] == 2 && ranks[2] == 1 && ranks[3] == 3, "group_of 'TP , DP': n %d", n);
    // a shape of INT64_MAX sharded over the 2 DP ranks: exact, non-negative boxes
    vs_layout L;
    memset(&L, 0, sizeof L);
    L.mesh = mesh;
    L.p[0] = vs_shard(0);
    int64_t shape[1] = {INT64_MAX}, ls[2][1], off[2][1];
    VT_OK(vs_layout_local(&L, 1, shape, 0, ls[0], off[0]));
    VT_OK(vs_layout_local(&L, 1, shape, 2, ls[1], off[1])); // mesh rank 2: DP coordinate 1
    VT_CHECK(off[0][0] == 0 && ls[0][0] == ((int64_t)1 << 62), "chunk 0: off %lld len %lld", (long long)off[0][0],
             (long long)ls[0][0]);
    VT_CHECK(off[1][0] == ((int64_t)1 << 62) && ls[1][0] == ((int64_t)1 << 62) - 1, "chunk 1: off %lld len %lld",
             (long long)off[1][0], (long long)ls[1][0]);
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

static void t_valid_edges(void)
{
    VT_OK(vs_launch(4, edges_rank, NULL));
    // extreme schedule lengths: finite rates between min_lr and lr
    vs_lr_schedule s;
    memset(&s, 0, sizeof s);
    s.kind = VS_LR_COSINE;
    s.lr = 1e-3;
    s.min_lr = 1e-5;
    s.total_steps = INT64_MAX;
    s.warmup_steps = INT64_MAX - 1;
    VT_OK(vs_lr_check(&s));
    const int64_t steps[] = {0, 1, INT64_MAX / 2, INT64_MAX - 2, INT64_MAX - 1, INT64_MAX};
    for (int k = 0; k < 2; k++) {
        s.kind = k ? VS_LR_LINEAR : VS_LR_COSINE;
        for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
            double v = vs_lr_at(&s, steps[i]);
            VT_CHECK(v == v && v >= 0 && v <= s.lr * (1 + 1e-12), "kind %d step %lld: lr %g", k, (long long)steps[i], v);
        }
    }
    s.kind = VS_LR_STEP;
    s.warmup_steps = 0;
    s.step_size = 1;
    s.gamma = 0.5;
    double v = vs_lr_at(&s, INT64_MAX);
    VT_CHECK(v == 0, "step decay over INT64_MAX steps: %g", v);
}

int main(int argc, char** argv)
{
    // argv[1]: run only the entries of this function or area (debugging)
    t_sweep(argc > 1 ? argv[1] : NULL);
    VT_CASE("badinput/valid_edges", t_valid_edges());
    return vt_summary();
}
