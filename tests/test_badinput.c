/* test_badinput.c - a bad-input sweep over every public function (issue 8).

   Each entry of the table below calls one public function of vescale_mesh.h or
   vescale_ddp.h with one bad input: a NULL pointer, an out-of-range value, an
   unknown enum, a call in the wrong state, a size that overflows. Entries that
   need live handles run inside vs_launch (2 thread ranks with a world, or 4 with
   a {2, 2} mesh, its DP and TP submeshes, and a DDP), every rank making the same
   call. Each entry runs in a forked child, so a crash or a hang is recorded
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
#include "vescale_ddp.h"
#include "vs_test.h"

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
    FX_DDPF      // + the DDP finalized
};
static const int sw_fx_ranks[] = {0, 2, 4, 4, 4};

#define SW_DETAIL 300
#define SW_MAX 600

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
    int rank;
    float buf[64], buf2[64];
    int outcome;
    char detail[SW_DETAIL];
} sw_ctx;

struct sw_job {
    int sel, fx;
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
    if (E(A, "vs_comm_rank", "freed comm", FX_W2)) R(vs_comm_rank(x->freed), "already freed");
    if (E(A, "vs_comm_size", "freed comm", FX_W2)) R(vs_comm_size(x->freed), "already freed");
    if (E(A, "vs_comm_set_timeout", "comm NULL", FX_NONE)) R(vs_comm_set_timeout(NULL, 1), "comm");
    if (E(A, "vs_comm_set_timeout", "-1 s", FX_W2)) R(vs_comm_set_timeout(x->comm, -1), "timeout");
    if (E(A, "vs_comm_set_timeout", "NaN s", FX_W2)) R(vs_comm_set_timeout(x->comm, NAN), "timeout");
    if (E(A, "vs_comm_set_timeout", "-inf s", FX_W2)) R(vs_comm_set_timeout(x->comm, -INFINITY), "timeout");
    if (E(A, "vs_comm_set_timeout", "freed comm", FX_W2)) R(vs_comm_set_timeout(x->freed, 1), "freed");
    if (E(A, "vs_comm_set_stream", "comm NULL", FX_NONE)) R(vs_comm_set_stream(NULL, NULL), "comm");
    if (E(A, "vs_comm_set_stream", "threads comm (no streams)", FX_W2)) R(vs_comm_set_stream(x->comm, (void*)x), "stream");
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
    if (E(A, "vs_world_init", "device_select 99", FX_NONE)) R(WINIT(.transport = VS_TRANSPORT_NCCL, .world_size = 2, .device_select = (vs_device_select)99), "device_select 99");
    if (E(A, "vs_world_init", "cuda_device -1 (explicit)", FX_NONE)) R(WINIT(.transport = VS_TRANSPORT_NCCL, .world_size = 2, .device_select = VS_DEVICE_EXPLICIT, .cuda_device = -1), "cuda_device -1");
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
    vs_clip_desc clip = {1.0, 0};
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
        vs_clip_desc c = {NAN, 1};
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
        vs_clip_desc c = {1.0, 1};
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
}

/* ------------------------------------------------------------------------ */
/* Fixtures, children, outcomes. */

static void sw_logger(vs_log_level level, const char* msg, void* user)
{
    (void)level;
    if (strstr(msg, "sw-mark")) __atomic_add_fetch(&((sw_job*)user)->marks, 1, __ATOMIC_SEQ_CST);
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
static void sw_run_entry(int id, sw_report* rep)
{
    int fx = sw_metas[id].fx;
    rep->outcome = SW_NONE;
    if (fx == FX_NONE) {
        sw_ctx* x = (sw_ctx*)calloc(1, sizeof *x);
        if (!x) return;
        x->sel = id;
        x->outcome = SW_NONE;
        sweep_all(x);
        rep->outcome = x->outcome;
        snprintf(rep->detail, sizeof rep->detail, "%s", x->detail);
        free(x);
        return;
    }
    static sw_job j;
    memset(&j, 0, sizeof j);
    j.sel = id;
    j.fx = fx;
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = sw_fx_ranks[fx];
    d.timeout_s = 5;
    d.log_level = VS_LOG_DEBUG;
    d.logger.fn = sw_logger;
    d.logger.user = &j;
    vs_result lr = vs_launch_ex(&d, sw_rank, &j);
    // the worst outcome over the ranks that count
    int worst = -1, at = 0;
    for (int r = 0; r < d.nranks; r++) {
        if (j.outcome[r] == SW_IGNORED) continue;
        if (worst < 0 || j.outcome[r] > worst || (worst == SW_CLEAR && j.outcome[r] == SW_TOLERATED))
            worst = j.outcome[r], at = r;
    }
    if (worst < 0) {
        rep->outcome = SW_NONE;
        snprintf(rep->detail, sizeof rep->detail, "no rank recorded an outcome (launch: %s)", vs_result_string(lr));
        return;
    }
    rep->outcome = worst;
    snprintf(rep->detail, sizeof rep->detail, "rank %d: %s", at, j.detail[at]);
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

static const char* const sw_areas[] = {"base", "comm", "mesh", "layout", "tp", "init", "bootstrap", "ddp", "lr"};
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
