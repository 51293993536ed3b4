/* tests/strict/vs_strict_clock.h - virtual time in the strict stand-in
   (included by tests/strict/vs_strict.h twice: its interface in the part a
   program reads, its implementation beside the missing-wait check). The
   stand-in runs every operation on the host as fast as the host goes; this
   file gives each one the time it would take on the GPU of a spec, so a test
   can read overlap, exposed communication and step time as the hardware would
   make them. Deterministic: times depend on what was enqueued and waited for,
   never on how the stand-in's threads happened to run.

   The spec (vs_strict_spec): VS_STRICT_SPEC=h100 (the default), h200, or a
   file of "key = value" lines (vs_strict_spec_parse: '#' comments; "base =
   h100" starts from a built-in, else every key is needed); a bad file stops
   the program at its first call, naming the line. Keys, in the units they name:
   name, bf16_tflops, f16_tflops, tf32_tflops, f32_tflops (dense), mem_gbps,
   launch_us, host_gbps, nvlink_gbps, net_gbps (each direction), gpus_per_node,
   nvlink_latency_us, net_latency_us, host_call_us, host_factor,
   kernel_default_us.

   Costs (vs_strict_cost_*, each formula here and nowhere else):
   - a kernel: max(flops / peak[dtype], bytes / mem_bw) + seconds + launch_s,
     flops, bytes, dtype and seconds from a cost function a test registers
     (vs_strict_kernel_cost), else flops, bytes and dtype as the kernel's
     declaration states them (vescale_mesh.h's vs_kernel_decl: every kernel of
     the library's texts and of examples/gpt_kernels.h declares its cost beside
     its text); without either, bytes = what its pointer arguments touch
     (st_ksig's range function, else from the pointer to its allocation's
     end), and with no pointer argument seconds = kernel_default_s.
     A host function (cudaLaunchHostFunc) costs vs_strict_clock_host_fn_cost's
     seconds (default kernel_default_s) + launch_s.
   - a copy: launch_s + bytes / link: host_bw between host and device, mem_bw / 2
     within a device (it reads and writes), nvlink_bw (net_bw across nodes)
     between devices; a memset: launch_s + bytes / mem_bw.
   - NCCL (a flat ring over the communicator; n ranks, bytes: all-reduce,
     broadcast, reduce, send/recv their buffer, all-gather its output and
     reduce-scatter its input): latency + f * bytes / bw with f = 2(n-1)/n for
     all-reduce, (n-1)/n for all-gather and reduce-scatter, 1 for broadcast,
     reduce and send/recv (0 for a collective of one rank). A communicator
     whose devices are not all on one node (node = device / gpus_per_node)
     runs at net_bw with net_latency_s (each GPU's ring edge crosses its own
     NIC), else at nvlink_bw with nvlink_latency_s.

   Semantics:
   - Each stream has a clock (the end of its last operation). An operation
     starts at the latest of its stream's clock, the times of what it waits
     for (cudaStreamWaitEvent's event, the legacy stream's implicit waits) and
     its host thread's clock when enqueued; it ends at start + cost.
   - A collective starts when every rank's operation can start (the latest of
     them) and ends at start + cost on every rank; a send/recv pair at the
     later of its two sides. A group's collectives run one after another from
     the group's start, its send/recvs beside them.
   - An event's time is the recorded position's end; cudaEventElapsedTime
     gives the interval between two (a program's own timing code reads the
     modelled times: bench/gpu_calib.c).
   - Each host thread has a clock: every CUDA/NCCL call that enqueues, waits
     or allocates adds host_call_s (a query that answers cudaErrorNotReady
     adds nothing: the number of polls depends on the host's speed, the time
     they wait does not); a host wait (synchronize, a blocking copy, cudaMalloc
     and cudaFree, a query that answered cudaSuccess) moves it to the time of
     what it waited for. With host_factor > 0 the thread's CPU time between
     two calls, times host_factor, is added too (then times vary run to run).
   - Busy time per device by class: compute (kernels, host functions,
     memsets, copies within the device), copy (host <-> device and between
     devices), communication (NCCL); exposed communication is the
     communication time no compute of that device overlaps.
   - Host-bound idle per device: the time the device ran nothing while an
     operation waited only for its host's call (host_idle); a step whose
     host-bound idle is at least its busy time is host-bound (host_bound).
   - Communication by tag: each NCCL operation carries a tag (0 ..
     VS_STRICT_CLOCK_TAGS - 1): the tag its host thread set last
     (vs_strict_clock_tag, default 0), or what a program's tagger
     (vs_strict_clock_tagger) makes of it, the operation's kind and its
     communicator's devices; comm_tag[t] and exposed_tag[t] are comm and
     exposed_comm over tag t's operations alone (the tags' busy times may
     overlap one another, so their sum can exceed comm). vs_strict_clock_tag_as
     times a tag's collectives as over more ranks, across nodes (a bench's
     stand-in for a larger DP).

   What it does not model: contention (concurrent kernels each get the whole
   GPU, concurrent transfers each the whole link), pageable copies' staging,
   NCCL's protocols and tree algorithms, p2p over shared NICs. Legacy-stream
   implicit waits beyond the stand-in's 16 a operation are not timed.
   VS_STRICT_TRACE=path writes a Chrome trace (chrome://tracing, Perfetto):
   a process per device, a row per stream, and a host row (the host waits of
   the threads whose current device it is). */

#ifndef VS_STRICT_CLOCK_API_H
#define VS_STRICT_CLOCK_API_H

typedef struct vs_strict_spec {
    char name[32];
    double flops_bf16, flops_f16, flops_tf32, flops_f32; /* dense peak, FLOP/s */
    double mem_bw;                                        /* device memory, B/s */
    double launch_s;                                      /* a kernel, copy or memset's fixed time on the GPU */
    double host_bw;                                       /* host <-> device, each direction, B/s */
    double nvlink_bw, net_bw;                             /* per GPU, each direction, B/s */
    int gpus_per_node;
    double nvlink_latency_s, net_latency_s; /* an NCCL call's fixed time */
    double host_call_s;                     /* the host's time per CUDA/NCCL call */
    double host_factor;                     /* measured host CPU time x this (0: not measured) */
    double kernel_default_s;                /* a kernel with nothing known, a host function */
} vs_strict_spec;

enum { VS_STRICT_BF16, VS_STRICT_F16, VS_STRICT_TF32, VS_STRICT_F32 };
typedef struct vs_strict_kcost {
    double flops, bytes; /* arithmetic at dtype's peak, bytes of device memory */
    int dtype;           /* VS_STRICT_BF16 ... */
    double seconds;      /* a fixed time besides */
} vs_strict_kcost;
/* a kernel's cost from its arguments (a[i]: argument i's slot, as st_ksig's run) */
typedef void (*vs_strict_cost_fn)(void** a, dim3 grid, dim3 block, vs_strict_kcost* out);

/* the kinds vs_strict_cost_copy and vs_strict_cost_nccl price */
enum { VS_STRICT_H2D, VS_STRICT_D2H, VS_STRICT_D2D, VS_STRICT_PEER, VS_STRICT_MEMSET };
enum { VS_STRICT_ALLREDUCE, VS_STRICT_REDUCE, VS_STRICT_BCAST, VS_STRICT_ALLGATHER, VS_STRICT_REDSCAT,
       VS_STRICT_SEND, VS_STRICT_RECV };

/* NCCL operations' tags (vs_strict_clock_tag) */
#define VS_STRICT_CLOCK_TAGS 8

/* per device, since its last reset (seconds of virtual time) */
typedef struct vs_strict_clock_stats {
    double compute, copy, comm; /* busy: the union of the class's operations' intervals */
    double exposed_comm;        /* comm no compute overlaps */
    double first, last;         /* the earliest start and the latest end (0, 0: nothing ran) */
    long ops;                   /* operations that took time */
    /* host-bound idle: time in [first, last] when the device ran nothing and an
       operation was ready but for its host's enqueue (its stream and waits were
       done before its host call); host_bound: that idle is at least the
       device's busy time (the host's calls, not the GPU, set the step's pace) */
    double host_idle;
    int host_bound;
    double busy;                                   /* the union of every class's intervals */
    double comm_tag[VS_STRICT_CLOCK_TAGS];         /* comm of the operations of tag t */
    double exposed_tag[VS_STRICT_CLOCK_TAGS];      /* ... no compute overlaps */
} vs_strict_clock_stats;

/* Specs: a built-in by name ("h100", "h200"); a file's text (err: "<where>:<line>:
   <what>"). 0 on success, -1 with *err written. */
ST_C int vs_strict_spec_builtin(const char* name, vs_strict_spec* out);
ST_C int vs_strict_spec_parse(const char* text, const char* where, vs_strict_spec* out, char* err, size_t cap);
ST_C int vs_strict_spec_load(const char* path, vs_strict_spec* out, char* err, size_t cap);
/* the spec in use (VS_STRICT_SPEC's), and another from now on (operations enqueued after) */
ST_C vs_strict_spec vs_strict_clock_spec(void);
ST_C void vs_strict_clock_set_spec(const vs_strict_spec* sp);

/* the formulas (the top comment's); cross_node: the ranks or devices span nodes */
ST_C double vs_strict_cost_kernel(const vs_strict_spec* sp, const vs_strict_kcost* k);
ST_C double vs_strict_cost_copy(const vs_strict_spec* sp, int kind, double bytes, int cross_node);
ST_C double vs_strict_cost_nccl(const vs_strict_spec* sp, int kind, int nranks, int cross_node, double bytes);

/* kernel `name`'s cost function (NULL: the default); before its launches */
ST_C void vs_strict_kernel_cost(const char* name, vs_strict_cost_fn fn);
/* the calling thread's host functions from now on cost this (< 0: kernel_default_s) */
ST_C void vs_strict_clock_host_fn_cost(double seconds);

/* The calling thread's NCCL operations from now on carry tag (0 ..
   VS_STRICT_CLOCK_TAGS - 1; another value is 0). */
ST_C void vs_strict_clock_tag(int tag);
/* A tag for each NCCL operation at its enqueue, from its kind (VS_STRICT_ALLREDUCE
   ...), its communicator's devices (devs[0..nranks), in rank order) and its
   thread's tag (fn NULL: the thread's tag). Set before the operations it tags. */
typedef int (*vs_strict_tag_fn)(int kind, int nranks, const int* devs, int thread_tag, void* user);
ST_C void vs_strict_clock_tagger(vs_strict_tag_fn fn, void* user);
/* The collectives of tag t (not send/recv) from now on cost as over nranks ranks,
   across nodes if cross_node (nranks 0: as they run): a bench that runs 2 DP
   ranks in place of many times their collectives at the full size where the
   engine overlaps them, so that their exposed part is the full size's
   (bench/gpu_model.c --published). Set while no NCCL operation runs. */
ST_C void vs_strict_clock_tag_as(int tag, int nranks, int cross_node);

/* The calling thread's host clock. */
ST_C double vs_strict_clock_host(void);
/* When everything enqueued on stream h so far ends (waits for it; not a host
   wait: neither the host's clock nor the counts change). */
ST_C double vs_strict_clock_stream(cudaStream_t h);
/* Device dev's busy times since its last reset (waits for its enqueued work). */
ST_C vs_strict_clock_stats vs_strict_clock_device(int dev);
/* Forgets device dev's busy times (dev < 0: every device's), after its work
   ends; the clocks run on. Between steps. */
ST_C void vs_strict_clock_reset(int dev);
/* Ends VS_STRICT_TRACE's file (done at exit too); later operations are not traced. */
ST_C void vs_strict_clock_trace_close(void);

#endif /* VS_STRICT_CLOCK_API_H */

#if defined(VS_STRICT_CLOCK_IMPL_HERE) && !defined(VS_STRICT_CLOCK_IMPL) /* vs_strict.h's second include */
#define VS_STRICT_CLOCK_IMPL

#include <stddef.h>

static struct CUstream_st* st_stream_locked(cudaStream_t h);

/* ---- specs ------------------------------------------------------------------------
   From NVIDIA's datasheets: "NVIDIA H100 Tensor Core GPU" (H100 SXM column) and
   "NVIDIA H200 Tensor Core GPU" (H200 SXM column): BF16 and FP16 Tensor Core
   1,979 TFLOPS and TF32 Tensor Core 989 TFLOPS, both with sparsity (dense: half),
   FP32 67 TFLOPS; GPU memory bandwidth 3.35 TB/s (H100), 4.8 TB/s (H200); NVLink
   900 GB/s and PCIe Gen5 128 GB/s, both the two directions together (each
   direction: half). Network: the DGX H100/H200 systems' eight single-port
   ConnectX-7 400 Gb/s adapters, one a GPU (NVIDIA's DGX BasePOD reference
   architecture), 50 GB/s each direction; 8 GPUs a node.
   Not in the datasheets, assumed: launch_s 2 us (back-to-back kernels on one
   stream), host_call_s 2 us (a launch call's host time), NCCL latency 5 us
   within a node, 10 us across nodes, kernel_default_s 2 us. */
static const vs_strict_spec st_spec_h100 = {"h100", 989.5e12, 989.5e12, 494.5e12, 67e12, 3.35e12, 2e-6, 64e9,
                                            450e9, 50e9, 8, 5e-6, 10e-6, 2e-6, 0, 2e-6};
static const vs_strict_spec st_spec_h200 = {"h200", 989.5e12, 989.5e12, 494.5e12, 67e12, 4.8e12, 2e-6, 64e9,
                                            450e9, 50e9, 8, 5e-6, 10e-6, 2e-6, 0, 2e-6};

ST_C int vs_strict_spec_builtin(const char* name, vs_strict_spec* out)
{
    if (name && !strcmp(name, "h100")) return *out = st_spec_h100, 0;
    if (name && !strcmp(name, "h200")) return *out = st_spec_h200, 0;
    return -1;
}

/* a file's keys: name, its unit (the struct's value is the file's times mul, or
   over div: 20 us is 20 / 1e6 s, as exact as the literal 20e-6), rate (must be
   positive), where it goes */
#define ST_SK(k, f, mul, div, rate) {k, mul, div, rate, offsetof(vs_strict_spec, f)}
static const struct {
    const char* key;
    double mul, div;
    int rate;
    size_t at;
} st_spec_keys[] = {
    ST_SK("bf16_tflops", flops_bf16, 1e12, 1, 1), ST_SK("f16_tflops", flops_f16, 1e12, 1, 1),
    ST_SK("tf32_tflops", flops_tf32, 1e12, 1, 1), ST_SK("f32_tflops", flops_f32, 1e12, 1, 1),
    ST_SK("mem_gbps", mem_bw, 1e9, 1, 1),         ST_SK("launch_us", launch_s, 1, 1e6, 0),
    ST_SK("host_gbps", host_bw, 1e9, 1, 1),       ST_SK("nvlink_gbps", nvlink_bw, 1e9, 1, 1),
    ST_SK("net_gbps", net_bw, 1e9, 1, 1),         ST_SK("nvlink_latency_us", nvlink_latency_s, 1, 1e6, 0),
    ST_SK("net_latency_us", net_latency_s, 1, 1e6, 0), ST_SK("host_call_us", host_call_s, 1, 1e6, 0),
    ST_SK("host_factor", host_factor, 1, 1, 0),   ST_SK("kernel_default_us", kernel_default_s, 1, 1e6, 0)};
#undef ST_SK
#define ST_NSK (int)(sizeof st_spec_keys / sizeof st_spec_keys[0])

static int st_spec_err(char* err, size_t cap, const char* where, int line, const char* fmt, const char* a)
{
    char what[300];
    snprintf(what, sizeof what, fmt, a);
    if (line > 0) snprintf(err, cap, "%s:%d: %s", where, line, what);
    else snprintf(err, cap, "%s: %s", where, what);
    return -1;
}

/* Rates must be positive, times and the factor not negative. */
static int st_spec_valid(const vs_strict_spec* s, const char* where, char* err, size_t cap, const unsigned* seen)
{
    for (int i = 0; i < ST_NSK; i++) {
        double v = *(const double*)(const void*)((const char*)s + st_spec_keys[i].at);
        if (seen && !(seen[0] >> i & 1)) return st_spec_err(err, cap, where, 0, "no '%s' (or a 'base = h100|h200' line)", st_spec_keys[i].key);
        int rate = st_spec_keys[i].rate;
        if (!(v == v) || (rate ? v <= 0 : v < 0))
            return st_spec_err(err, cap, where, 0, rate ? "'%s' must be positive" : "'%s' must not be negative",
                               st_spec_keys[i].key);
    }
    if (seen && !(seen[0] >> ST_NSK & 1)) return st_spec_err(err, cap, where, 0, "no '%s'", "gpus_per_node");
    if (s->gpus_per_node < 1) return st_spec_err(err, cap, where, 0, "'%s' must be at least 1", "gpus_per_node");
    return 0;
}

ST_C int vs_strict_spec_parse(const char* text, const char* where, vs_strict_spec* out, char* err, size_t cap)
{
    vs_strict_spec s;
    memset(&s, 0, sizeof s);
    snprintf(s.name, sizeof s.name, "%s", "file");
    unsigned seen = 0; /* bit i: st_spec_keys[i] given; bit ST_NSK: gpus_per_node */
    int line = 0;
    where = where ? where : "spec";
    for (const char* p = text; p && *p;) {
        const char* e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char buf[256], key[64], val[192], more[192];
        line++;
        if (len >= sizeof buf) return st_spec_err(err, cap, where, line, "%s", "line too long");
        memcpy(buf, p, len), buf[len] = 0;
        p = e ? e + 1 : p + len;
        char* h = strchr(buf, '#');
        if (h) *h = 0;
        if (strspn(buf, " \t\r") == strlen(buf)) continue;
        char* eq = strchr(buf, '=');
        if (!eq) return st_spec_err(err, cap, where, line, "'%s': want key = value", buf);
        *eq = 0;
        if (sscanf(buf, " %63s %63s", key, val) != 1) return st_spec_err(err, cap, where, line, "'%s': one key before '='", buf);
        if (sscanf(eq + 1, " %191s %191s", val, more) != 1)
            return st_spec_err(err, cap, where, line, "'%s': one value after '='", key);
        if (!strcmp(key, "base")) {
            char nm[32];
            memcpy(nm, s.name, sizeof nm);
            if (vs_strict_spec_builtin(val, &s)) return st_spec_err(err, cap, where, line, "base '%s': not h100 or h200", val);
            if (strcmp(nm, "file")) memcpy(s.name, nm, sizeof nm);
            seen = ~0u;
            continue;
        }
        if (!strcmp(key, "name")) {
            snprintf(s.name, sizeof s.name, "%.31s", val);
            continue;
        }
        char* end;
        double v = strtod(val, &end);
        if (*end || end == val) return st_spec_err(err, cap, where, line, "'%s': not a number", val);
        if (!strcmp(key, "gpus_per_node")) {
            if (v < 1 || v != (double)(int)v) return st_spec_err(err, cap, where, line, "gpus_per_node %s: want a whole number >= 1", val);
            s.gpus_per_node = (int)v, seen |= 1u << ST_NSK;
            continue;
        }
        int i = 0;
        while (i < ST_NSK && strcmp(key, st_spec_keys[i].key)) i++;
        if (i == ST_NSK) return st_spec_err(err, cap, where, line, "unknown key '%s'", key);
        int rate = st_spec_keys[i].rate;
        if (rate ? v <= 0 : v < 0)
            return st_spec_err(err, cap, where, line, rate ? "'%s' must be positive" : "'%s' must not be negative", key);
        *(double*)(void*)((char*)&s + st_spec_keys[i].at) = v * st_spec_keys[i].mul / st_spec_keys[i].div;
        seen |= 1u << i;
    }
    if (st_spec_valid(&s, where, err, cap, &seen)) return -1;
    *out = s;
    return 0;
}

ST_C int vs_strict_spec_load(const char* path, vs_strict_spec* out, char* err, size_t cap)
{
    FILE* f = fopen(path, "r");
    if (!f) return st_spec_err(err, cap, path, 0, "cannot open: %s", strerror(errno));
    char* text = NULL;
    size_t n = 0, capt = 0;
    for (int c; (c = fgetc(f)) != EOF;) {
        if (n + 2 > capt) text = (char*)realloc(text, capt = capt ? 2 * capt : 4096);
        text[n++] = (char)c;
    }
    fclose(f);
    if (text) text[n] = 0;
    int r = vs_strict_spec_parse(text ? text : "", path, out, err, cap);
    free(text);
    return r;
}

/* ---- the formulas ----------------------------------------------------------------- */

ST_C double vs_strict_cost_kernel(const vs_strict_spec* sp, const vs_strict_kcost* k)
{
    double peak = k->dtype == VS_STRICT_BF16 ? sp->flops_bf16 : k->dtype == VS_STRICT_F16 ? sp->flops_f16
                : k->dtype == VS_STRICT_TF32 ? sp->flops_tf32 : sp->flops_f32;
    double tc = k->flops / peak, tm = k->bytes / sp->mem_bw;
    return (tc > tm ? tc : tm) + k->seconds + sp->launch_s;
}

ST_C double vs_strict_cost_copy(const vs_strict_spec* sp, int kind, double bytes, int cross_node)
{
    double bw = kind == VS_STRICT_H2D || kind == VS_STRICT_D2H ? sp->host_bw
              : kind == VS_STRICT_D2D                          ? sp->mem_bw / 2 /* read and write */
              : kind == VS_STRICT_MEMSET                       ? sp->mem_bw
              : cross_node                                     ? sp->net_bw
                                                               : sp->nvlink_bw;
    return sp->launch_s + bytes / bw;
}

ST_C double vs_strict_cost_nccl(const vs_strict_spec* sp, int kind, int n, int cross_node, double bytes)
{
    double f = kind == VS_STRICT_ALLREDUCE                               ? 2.0 * (n - 1) / n
             : kind == VS_STRICT_ALLGATHER || kind == VS_STRICT_REDSCAT ? (double)(n - 1) / n
             : kind == VS_STRICT_SEND || kind == VS_STRICT_RECV          ? 1
             : n > 1                                                     ? 1
                                                                         : 0;
    return (cross_node ? sp->net_latency_s : sp->nvlink_latency_s) + f * bytes / (cross_node ? sp->net_bw : sp->nvlink_bw);
}

/* ---- state (under st_mu, but for the host clocks: each its thread's) --------------- */

typedef struct st_tcell { /* the end time of an operation, once it ends; shared, counted */
    int refs, set;
    double t;
} st_tcell;

typedef struct st_hclk { /* a host thread's clock */
    double t, cpu, fn_s; /* fn_s: its host functions' cost (< 0: the spec's default) */
    int cpu_set;
    struct st_hclk* next;
} st_hclk;

typedef struct st_ivl {
    double a, b;
} st_ivl;
typedef struct st_ivls {
    st_ivl* v;
    int n, cap;
} st_ivls;
enum { ST_CL_NONE, ST_CL_COMPUTE, ST_CL_COPY, ST_CL_COMM };

static vs_strict_spec st_spec;
static int st_spec_ready;
static pthread_mutex_t st_hclk_mu = PTHREAD_MUTEX_INITIALIZER;
static st_hclk* st_hclks; /* every host thread's (kept: reachable) */
static __thread st_hclk* st_hclk_me;
static st_ivls st_busy[ST_MAXDEV][3];
static st_ivls st_busy_tag[ST_MAXDEV][VS_STRICT_CLOCK_TAGS]; /* comm by tag */
static __thread int st_tag_me;
static vs_strict_tag_fn st_tagger;
static void* st_tagger_user;
static int st_tag_as[VS_STRICT_CLOCK_TAGS][2]; /* vs_strict_clock_tag_as: nranks (0: none), cross_node */
static st_ivls st_hwait[ST_MAXDEV]; /* per device: [ready, enqueued) of operations the host held back */
static long st_busy_ops[ST_MAXDEV];
static struct {
    const char* name;
    vs_strict_cost_fn fn;
} st_kcosts[256];
static int st_nkcosts;
static FILE* st_trace;
static pid_t st_trace_pid;
static int st_trace_n;

/* The spec (st_mu held, or after the stand-in's init: it is set then, and again
   only by vs_strict_clock_set_spec, which a program calls while no other
   thread makes CUDA calls). */
static const vs_strict_spec* st_spec_get(void)
{
    if (!__atomic_load_n(&st_spec_ready, __ATOMIC_ACQUIRE)) st_spec = st_spec_h100, __atomic_store_n(&st_spec_ready, 1, __ATOMIC_RELEASE);
    return &st_spec;
}

static st_tcell* st_tc_new(int set, double t)
{
    st_tcell* c = (st_tcell*)calloc(1, sizeof *c);
    c->refs = 1, c->set = set, c->t = t;
    return c;
}
static st_tcell* st_tc_ref(st_tcell* c)
{
    if (c) c->refs++;
    return c;
}
static void st_tc_unref(st_tcell* c)
{
    if (c && --c->refs == 0) free(c);
}

static st_hclk* st_hc(void)
{
    if (!st_hclk_me) {
        st_hclk* h = (st_hclk*)calloc(1, sizeof *h);
        h->fn_s = -1;
        pthread_mutex_lock(&st_hclk_mu);
        h->next = st_hclks, st_hclks = h;
        pthread_mutex_unlock(&st_hclk_mu);
        st_hclk_me = h;
    }
    return st_hclk_me;
}

static void st_trace_close_locked(void)
{
    if (st_trace && st_trace_pid == getpid()) fputs("\n]\n", st_trace), fclose(st_trace);
    st_trace = NULL;
}
static void st_trace_atexit(void)
{
    pthread_mutex_lock(&st_mu);
    st_trace_close_locked();
    pthread_mutex_unlock(&st_mu);
}
ST_C void vs_strict_clock_trace_close(void) { st_trace_atexit(); }

static void st_trace_event_locked(const char* json)
{
    if (!st_trace || st_trace_pid != getpid()) return;
    fprintf(st_trace, "%s\n%s", st_trace_n++ ? "," : "", json);
}

/* At the stand-in's init (st_mu held): VS_STRICT_SPEC, VS_STRICT_TRACE. */
static void st_clock_init_locked(void)
{
    const char* e = getenv("VS_STRICT_SPEC");
    if (!st_spec_ready && e && *e) {
        char err[400];
        if (vs_strict_spec_builtin(e, &st_spec) && vs_strict_spec_load(e, &st_spec, err, sizeof err)) {
            fprintf(stderr, "vs_strict: VS_STRICT_SPEC=%s: %s\n", e, err);
            _exit(85);
        }
        __atomic_store_n(&st_spec_ready, 1, __ATOMIC_RELEASE);
    }
    st_spec_get();
    if ((e = getenv("VS_STRICT_TRACE")) && *e && !st_trace) {
        if (!(st_trace = fopen(e, "w"))) {
            fprintf(stderr, "vs_strict: VS_STRICT_TRACE=%s: %s\n", e, strerror(errno));
            _exit(85);
        }
        st_trace_pid = getpid();
        fputs("[", st_trace);
        for (int d = 0; d < st_ndev; d++) {
            char buf[160];
            snprintf(buf, sizeof buf, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"device %d\"}}", d, d);
            st_trace_event_locked(buf);
            snprintf(buf, sizeof buf, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"host\"}}", d);
            st_trace_event_locked(buf);
        }
        atexit(st_trace_atexit);
    }
}

ST_C vs_strict_spec vs_strict_clock_spec(void)
{
    pthread_mutex_lock(&st_mu);
    st_init_locked();
    vs_strict_spec s = st_spec;
    pthread_mutex_unlock(&st_mu);
    return s;
}
ST_C void vs_strict_clock_set_spec(const vs_strict_spec* sp)
{
    pthread_mutex_lock(&st_mu);
    st_spec = *sp;
    __atomic_store_n(&st_spec_ready, 1, __ATOMIC_RELEASE);
    st_init_locked();
    pthread_mutex_unlock(&st_mu);
}

ST_C void vs_strict_kernel_cost(const char* name, vs_strict_cost_fn fn)
{
    pthread_mutex_lock(&st_mu);
    int i = 0;
    while (i < st_nkcosts && strcmp(st_kcosts[i].name, name)) i++;
    if (i < (int)(sizeof st_kcosts / sizeof st_kcosts[0])) {
        st_kcosts[i].name = name, st_kcosts[i].fn = fn;
        if (i == st_nkcosts) st_nkcosts++;
    } else {
        fprintf(stderr, "vs_strict: vs_strict_kernel_cost(%s): more than %d kernels\n", name, i);
    }
    pthread_mutex_unlock(&st_mu);
}

ST_C void vs_strict_clock_host_fn_cost(double seconds) { st_hc()->fn_s = seconds; }
ST_C void vs_strict_clock_tag(int tag) { st_tag_me = tag >= 0 && tag < VS_STRICT_CLOCK_TAGS ? tag : 0; }
ST_C void vs_strict_clock_tagger(vs_strict_tag_fn fn, void* user)
{
    pthread_mutex_lock(&st_mu);
    st_tagger = fn, st_tagger_user = user;
    pthread_mutex_unlock(&st_mu);
}
ST_C void vs_strict_clock_tag_as(int tag, int nranks, int cross_node)
{
    if (tag < 0 || tag >= VS_STRICT_CLOCK_TAGS) return;
    pthread_mutex_lock(&st_mu);
    st_tag_as[tag][0] = nranks > 0 ? nranks : 0, st_tag_as[tag][1] = cross_node != 0;
    pthread_mutex_unlock(&st_mu);
}
/* An NCCL operation's tag at its enqueue (st_mu held): devs, its communicator's. */
static int st_clock_nccl_tag_locked(int kind, int n, const int* devs)
{
    int t = st_tagger ? st_tagger(kind, n, devs, st_tag_me, st_tagger_user) : st_tag_me;
    return t >= 0 && t < VS_STRICT_CLOCK_TAGS ? t : 0;
}
ST_C double vs_strict_clock_host(void) { return st_hc()->t; }

/* ---- the host clock ---------------------------------------------------------------- */

/* A CUDA/NCCL call of this thread's (at its start). */
static void st_clock_call(void)
{
    if (!__atomic_load_n(&st_spec_ready, __ATOMIC_ACQUIRE)) st_init();
    st_hclk* h = st_hc();
    double f = st_spec_get()->host_factor;
    if (f > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        double c = ts.tv_sec + ts.tv_nsec * 1e-9;
        if (h->cpu_set) h->t += f * (c - h->cpu);
        h->cpu = c, h->cpu_set = 1;
    }
    h->t += st_spec_get()->host_call_s;
}

static void st_trace_x_locked(int dev, long tid, const char* cat, double a, double b, const char* name);

/* The host waited for cell c (ended), and drops it; the trace's host row of the
   thread's current device shows the wait. */
static void st_clock_host_wait_locked(st_tcell* c)
{
    if (!c) return;
    st_hclk* h = st_hc();
    if (c->set && c->t > h->t) st_trace_x_locked(st_cur_dev, 0, "host", h->t, c->t, "host wait"), h->t = c->t;
    st_tc_unref(c);
}

/* ---- operations ---------------------------------------------------------------------- */

/* The end time of what stream s has enqueued so far: its tail's cell, or (nothing
   pending) its clock. A reference. */
static st_tcell* st_clock_target_locked(struct CUstream_st* s)
{
    if (s->enq > s->done && s->tail) {
        if (!s->tail->tc) s->tail->tc = st_tc_new(0, 0);
        return st_tc_ref(s->tail->tc);
    }
    return st_tc_new(1, s->vt);
}

static void st_clock_dep_locked(st_op* op, st_tcell* c)
{
    if (c->set) {
        if (c->t > op->t_dep) op->t_dep = c->t;
        st_tc_unref(c);
        return;
    }
    op->tcw = (st_tcell**)realloc(op->tcw, sizeof(st_tcell*) * (size_t)(op->ntcw + 1));
    op->tcw[op->ntcw++] = c;
}

/* cudaStreamWaitEvent's operation waits for ev's time. */
static void st_clock_wait_event_locked(st_op* op, struct CUevent_st* ev)
{
    if (ev->tc) st_clock_dep_locked(op, st_tc_ref(ev->tc));
}

/* An operation enqueued on s: the host's time, and the legacy stream's implicit
   waits by clock (whether or not the other stream's work has run yet). */
static void st_clock_push_locked(struct CUstream_st* s, st_op* op)
{
    op->t_host = st_hc()->t;
    if (s->flags & cudaStreamNonBlocking) return;
    if (s->legacy) {
        int k = 0;
        for (struct CUstream_st* o = st_dev_streams[s->dev]; o; o = o->dnext)
            if (o != s && !o->legacy && !(o->flags & cudaStreamNonBlocking) && !o->dead &&
                (o->enq == o->done || k++ < ST_MAXWAIT)) /* (past the stand-in's 16 real waits: not timed) */
                st_clock_dep_locked(op, st_clock_target_locked(o));
    } else if (st_legacy[s->dev]) {
        st_clock_dep_locked(op, st_clock_target_locked(st_legacy[s->dev]));
    }
}

static void st_clock_op_free_locked(st_op* op)
{
    st_tc_unref(op->tc);
    for (int i = 0; i < op->ntcw; i++) st_tc_unref(op->tcw[i]);
    free(op->tcw);
}

static void st_ivls_add(st_ivls* l, double a, double b);
static void st_clock_busy_locked(int dev, long sid, int cls, double a, double b, const char* name);

/* An NCCL operation of tag tag ran [a, b) on device dev: busy, and its tag's. */
static void st_clock_comm_busy_locked(int dev, long sid, int tag, double a, double b, const char* name)
{
    st_clock_busy_locked(dev, sid, ST_CL_COMM, a, b, name);
    if (b > a && dev >= 0 && dev < ST_MAXDEV) st_ivls_add(&st_busy_tag[dev][tag], a, b);
}

/* Operation op starts on s (its waits are over). */
static void st_clock_start_locked(struct CUstream_st* s, st_op* op)
{
    double t = s->vt > op->t_host ? s->vt : op->t_host;
    if (op->t_dep > t) t = op->t_dep;
    for (int i = 0; i < op->ntcw; i++)
        if (op->tcw[i]->set && op->tcw[i]->t > t) t = op->tcw[i]->t;
    double ready = s->vt > op->t_dep ? s->vt : op->t_dep;
    for (int i = 0; i < op->ntcw; i++)
        if (op->tcw[i]->set && op->tcw[i]->t > ready) ready = op->tcw[i]->t;
    if (op->t_host > ready && s->dev >= 0 && s->dev < ST_MAXDEV) st_ivls_add(&st_hwait[s->dev], ready, op->t_host);
    op->t0 = t, op->t1 = t + op->cost;
}

static void st_ivls_merge(st_ivls* l);

/* [a, b) onto l (merged with its last when they touch; merged in place past 4096) */
static void st_ivls_add(st_ivls* l, double a, double b)
{
    if (l->n && l->v[l->n - 1].b >= a && l->v[l->n - 1].a <= a) {
        if (b > l->v[l->n - 1].b) l->v[l->n - 1].b = b;
        return;
    }
    if (l->n == l->cap && l->n >= 4096) st_ivls_merge(l);
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = (st_ivl*)realloc(l->v, sizeof l->v[0] * (size_t)l->cap);
    }
    l->v[l->n].a = a, l->v[l->n].b = b, l->n++;
}

/* [a, b) of class cls on device dev: busy time, and the trace's event. */
static void st_clock_busy_locked(int dev, long sid, int cls, double a, double b, const char* name)
{
    if (b <= a || cls == ST_CL_NONE || dev < 0 || dev >= ST_MAXDEV) return;
    st_busy_ops[dev]++;
    st_ivls_add(&st_busy[dev][cls - 1], a, b); /* (a step without a reset: bounded by the gaps) */
    static const char* const cat[] = {"", "compute", "copy", "comm"};
    st_trace_x_locked(dev, sid, cat[cls], a, b, name);
}

/* An event [a, b) on device dev's row tid (0: the host's). */
static void st_trace_x_locked(int dev, long tid, const char* cat, double a, double b, const char* name)
{
    if (!st_trace) return;
    char buf[320];
    snprintf(buf, sizeof buf, "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%ld,\"ts\":%.4f,\"dur\":%.4f}",
             name, cat, dev, tid, a * 1e6, (b - a) * 1e6);
    st_trace_event_locked(buf);
}

/* Operation op ended on s (NCCL operations wrote their own busy time and op->t1). */
static void st_clock_end_locked(struct CUstream_st* s, st_op* op)
{
    if (op->cls != ST_CL_COMM) st_clock_busy_locked(s->dev, s->id, op->cls, op->t0, op->t1, op->what);
    s->vt = op->t1;
    if (op->tc) op->tc->set = 1, op->tc->t = op->t1;
}

static void st_clock_stream_named_locked(struct CUstream_st* s)
{
    if (!st_trace) return;
    char buf[200];
    snprintf(buf, sizeof buf, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%ld,\"args\":{\"name\":\"stream %ld%s\"}}",
             s->dev, s->id, s->id, s->legacy ? " (legacy)" : "");
    st_trace_event_locked(buf);
}

/* A kernel's cost at launch (its arguments in op->args, pointers in the
   stand-in's view). */
static void st_clock_kernel_locked(st_op* op)
{
    const st_ksig* sig = op->sig;
    void* a[16];
    st_op_args(op, a);
    vs_strict_kcost k;
    memset(&k, 0, sizeof k);
    k.dtype = VS_STRICT_F32;
    int i = 0;
    while (i < st_nkcosts && strcmp(st_kcosts[i].name, sig->name)) i++;
    if (i < st_nkcosts && st_kcosts[i].fn) {
        st_kcosts[i].fn(a, op->grid, op->block, &k);
    } else if (!st_ksig_cost(sig, a, &k)) { /* no declared cost: what its pointer arguments touch */
        size_t off[16], bytes[16];
        int nptr = 0;
        st_ksig_ranges(sig, a, op->grid, off, bytes);
        for (int j = 0; j < sig->nargs; j++) {
            if (!(sig->ptr >> j & 1)) continue;
            nptr++;
            const char* p = (const char*)st_race_dev(*(void**)a[j]);
            st_alloc* al = p ? st_find_locked(p, 0) : NULL;
            size_t left = al ? al->off + al->n - (size_t)(p - st_dbase) : 0;
            if (al && (size_t)(p - st_dbase) + off[j] >= al->off + al->n) left = 0;
            else if (al) left -= off[j];
            k.bytes += (double)(bytes[j] == (size_t)-1 || bytes[j] > left ? left : bytes[j]);
        }
        if (!nptr) k.seconds = st_spec_get()->kernel_default_s;
    }
    op->cost = vs_strict_cost_kernel(st_spec_get(), &k), op->cls = ST_CL_COMPUTE;
}

static int st_clock_node(int dev) { return dev / st_spec_get()->gpus_per_node; }

/* A copy or memset's cost (kind VS_STRICT_*; ddev, sdev: the devices, -1 host). */
static void st_clock_copy_locked(st_op* op, int kind, int ddev, int sdev)
{
    int peer = kind == VS_STRICT_D2D && ddev != sdev;
    op->cost = vs_strict_cost_copy(st_spec_get(), peer ? VS_STRICT_PEER : kind, (double)op->n,
                                   peer && st_clock_node(ddev) != st_clock_node(sdev));
    op->cls = kind == VS_STRICT_D2D && !peer ? ST_CL_COMPUTE : kind == VS_STRICT_MEMSET ? ST_CL_COMPUTE : ST_CL_COPY;
}

static void st_clock_host_fn_locked(st_op* op)
{
    vs_strict_kcost k;
    memset(&k, 0, sizeof k);
    double s = st_hc()->fn_s;
    k.seconds = s >= 0 ? s : st_spec_get()->kernel_default_s;
    op->cost = vs_strict_cost_kernel(st_spec_get(), &k), op->cls = ST_CL_COMPUTE;
}

/* An NCCL operation of n ranks on devices devs[] (kind ST_N_*, the same order as
   VS_STRICT_ALLREDUCE...). */
static double st_clock_nccl_cost_locked(int kind, int n, const int* devs, double bytes)
{
    int cross = 0;
    for (int i = 1; i < n; i++) cross |= st_clock_node(devs[i]) != st_clock_node(devs[0]);
    return vs_strict_cost_nccl(st_spec_get(), kind, n, cross, bytes);
}
/* A collective of tag t: as st_clock_nccl_cost_locked, or as vs_strict_clock_tag_as
   says (per: its bytes a rank, the all-gather's input, the reduce-scatter's output) */
static double st_clock_coll_cost_locked(int kind, int n, const int* devs, double bytes, double per, int t)
{
    int N = t >= 0 && t < VS_STRICT_CLOCK_TAGS ? st_tag_as[t][0] : 0;
    if (!N) return st_clock_nccl_cost_locked(kind, n, devs, bytes);
    return vs_strict_cost_nccl(st_spec_get(), kind, N, st_tag_as[t][1], kind == VS_STRICT_ALLGATHER || kind == VS_STRICT_REDSCAT ? per * N : bytes);
}

/* ---- what the tests read -------------------------------------------------------------- */

static int st_ivl_cmp(const void* x, const void* y)
{
    double a = *(const double*)x, b = *(const double*)y;
    return a < b ? -1 : a > b;
}
/* l sorted by start, overlapping intervals merged (in place) */
static void st_ivls_merge(st_ivls* l)
{
    if (l->n < 2) return;
    qsort(l->v, (size_t)l->n, sizeof l->v[0], st_ivl_cmp);
    int k = 0;
    for (int i = 1; i < l->n; i++) {
        if (l->v[i].a <= l->v[k].b) {
            if (l->v[i].b > l->v[k].b) l->v[k].b = l->v[i].b;
        } else {
            l->v[++k] = l->v[i];
        }
    }
    l->n = k + 1;
}
static double st_ivls_len(const st_ivls* l)
{
    double s = 0;
    for (int i = 0; i < l->n; i++) s += l->v[i].b - l->v[i].a;
    return s;
}
/* the length of x's intervals that y's overlap (both merged) */
static double st_ivls_overlap(const st_ivls* x, const st_ivls* y)
{
    double s = 0;
    for (int i = 0, j = 0; i < x->n && j < y->n;) {
        double a = x->v[i].a > y->v[j].a ? x->v[i].a : y->v[j].a, b = x->v[i].b < y->v[j].b ? x->v[i].b : y->v[j].b;
        if (b > a) s += b - a;
        if (x->v[i].b < y->v[j].b) i++;
        else j++;
    }
    return s;
}

/* Waits for every stream of device dev (st_mu held), without a host wait's effects. */
static void st_clock_idle_locked(int dev)
{
    for (struct CUstream_st* s = st_dev_streams[dev]; s; s = s->dnext) {
        long t = s->enq;
        ST_WAIT_ON(&s->progress, s->done >= t, "vs_strict_clock (waiting for the device's work)");
    }
}

ST_C double vs_strict_clock_stream(cudaStream_t h)
{
    pthread_mutex_lock(&st_mu);
    st_init_locked();
    struct CUstream_st* s = st_stream_locked(h);
    st_tcell* c = st_clock_target_locked(s);
    long t = s->enq;
    ST_WAIT_UNTIL(s->done >= t, "vs_strict_clock_stream");
    double v = c->t;
    st_tc_unref(c);
    pthread_mutex_unlock(&st_mu);
    return v;
}

ST_C vs_strict_clock_stats vs_strict_clock_device(int dev)
{
    vs_strict_clock_stats r;
    memset(&r, 0, sizeof r);
    if (dev < 0 || dev >= ST_MAXDEV) return r;
    pthread_mutex_lock(&st_mu);
    st_init_locked();
    st_clock_idle_locked(dev);
    st_ivls* l = st_busy[dev];
    for (int c = 0; c < 3; c++) st_ivls_merge(&l[c]);
    r.compute = st_ivls_len(&l[0]), r.copy = st_ivls_len(&l[1]), r.comm = st_ivls_len(&l[2]);
    r.exposed_comm = r.comm - st_ivls_overlap(&l[2], &l[0]);
    r.ops = st_busy_ops[dev];
    int any = 0;
    for (int c = 0; c < 3; c++)
        if (l[c].n) {
            if (!any || l[c].v[0].a < r.first) r.first = l[c].v[0].a;
            if (!any || l[c].v[l[c].n - 1].b > r.last) r.last = l[c].v[l[c].n - 1].b;
            any = 1;
        }
    /* host-bound idle: the host's holds in [first, last], less what any class's busy time covers */
    st_ivls h = {NULL, 0, 0}, u = {NULL, 0, 0};
    st_ivls_merge(&st_hwait[dev]);
    for (int i = 0; any && i < st_hwait[dev].n; i++) {
        double a = st_hwait[dev].v[i].a > r.first ? st_hwait[dev].v[i].a : r.first;
        double b = st_hwait[dev].v[i].b < r.last ? st_hwait[dev].v[i].b : r.last;
        if (b > a) st_ivls_add(&h, a, b);
    }
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < l[c].n; i++) st_ivls_add(&u, l[c].v[i].a, l[c].v[i].b);
    st_ivls_merge(&h), st_ivls_merge(&u);
    r.host_idle = st_ivls_len(&h) - st_ivls_overlap(&h, &u);
    r.host_bound = any && r.host_idle >= st_ivls_len(&u);
    r.busy = st_ivls_len(&u);
    for (int t = 0; t < VS_STRICT_CLOCK_TAGS; t++) {
        st_ivls* x = &st_busy_tag[dev][t];
        st_ivls_merge(x);
        r.comm_tag[t] = st_ivls_len(x), r.exposed_tag[t] = r.comm_tag[t] - st_ivls_overlap(x, &l[0]);
    }
    free(h.v), free(u.v);
    pthread_mutex_unlock(&st_mu);
    return r;
}

ST_C void vs_strict_clock_reset(int dev)
{
    pthread_mutex_lock(&st_mu);
    st_init_locked();
    for (int d = 0; d < ST_MAXDEV; d++)
        if (dev < 0 || d == dev) {
            if (d < st_ndev) st_clock_idle_locked(d);
            for (int c = 0; c < 3; c++) st_busy[d][c].n = 0;
            for (int t = 0; t < VS_STRICT_CLOCK_TAGS; t++) st_busy_tag[d][t].n = 0;
            st_hwait[d].n = 0;
            st_busy_ops[d] = 0;
        }
    pthread_mutex_unlock(&st_mu);
}

#endif /* VS_STRICT_CLOCK_IMPL */
