/* tests/strict/vs_strict.h - the strict stand-in: the CUDA runtime and NCCL as
   the hardware behaves where GPU bugs hide, without a GPU.

   A test built for NCCL (-DVESCALE_NCCL, the real <cuda_runtime.h> and <nccl.h>
   from the CUDA toolkit) includes this file once, after the vescale headers with
   VESCALE_IMPLEMENTATION, and links -lnvrtc and nothing of libcudart or libnccl:
   every cuda* and nccl* function the library calls is defined here. NVRTC is
   the real one (the kernels are compiled for sm_90 as on an H100); their
   execution is the host build of the same kernel text.

   What it enforces, each failure reported on stderr as
   "vs_strict: VIOLATION <class>: <what>" (and counted: vs_strict_violations(),
   by class vs_strict_violations_of(class)):
   - Device memory is not host memory. cudaMalloc returns an address in a
     PROT_NONE view of a memfd; kernels, copies and collectives work through a
     second, read-write view of the same pages. Host code that touches device
     memory faults at once (class host-access). Each allocation ends at a guard
     page and freed pages lose their access, so a kernel or copy running past its
     allocation or into freed memory faults too (device-bounds). Only
     cudaMallocHost / cudaHostRegister'ed host memory is GPU-reachable.
   - Streams are asynchronous: each runs its operations on its own worker
     thread, in order. Events, cudaStreamWaitEvent, the synchronize calls, the
     legacy default stream's implicit synchronisation with blocking streams (and
     its absence for cudaStreamNonBlocking), and the rules for pageable copies
     (cudaMemcpy H2D returns once the source is staged; cudaMemcpyAsync from
     pinned memory reads the source when the stream gets there; D2H to pageable
     memory returns when done). VS_STRICT_DELAY_US=n sleeps a random 0..n us
     before every stream operation, so a missing wait shows up as a wrong value
     or a TSan report.
   - Devices are separate (VS_STRICT_DEVICES, default 8, at most 1,024;
     communicators of up to 1,024 ranks): cudaSetDevice is per
     thread (a new thread starts on device 0); streams, events and allocations
     belong to a device; a kernel launched on another device's stream, an event
     recorded on another device's stream, a kernel given another device's memory
     fail as CUDA does (class cross-device).
   - cudaMalloc, cudaFree and cudaDeviceSynchronize synchronise the device.
     Calling one while a collective on the device waits for its peers is
     reported at once (classes free-during-collective, malloc-during-collective,
     device-sync-during-collective: the deadlock of NCCL's guide when the peer
     does the same; the last two while a peer has not enqueued its side yet,
     the only state in which they can deadlock), and every wait of the stand-in has a deadline (class hang,
     VS_STRICT_HANG_S, default 120 s) after which it reports what each stream
     waits for and exits.
   - NCCL: init from a unique id, split (non-blocking: returns ncclSuccess and
     writes the child later, as NCCL 2.28 does), abort, finalize, destroy, async
     errors, groups, every collective and send/recv, each enqueued on the
     caller's stream and blocking that stream until its peers arrive. Buffers
     must be GPU-reachable memory of the communicator's device (class
     host-pointer, as NCCL_CHECK_POINTERS=1); two host threads issuing NCCL on
     one device at once are reported (class nccl-threads) and, under TSan, any
     use of one device's NCCL from two threads without synchronisation between
     them is a data race on a variable written by every call; mismatched
     collectives (class nccl-mismatch). Sums start at a rank that rotates with
     every collective (no rank-order promise) and round to the dtype after each
     addition; ncclAvg on floats pre-multiplies by 1/n.
   - NCCL's fault tolerance (2.28): ncclCommRevoke stops the caller's in-flight
     and queued operations on the communicator (their kernels end writing
     nothing; non-blocking: ncclInProgress until they have stopped, then
     ncclSuccess, an earlier async error reset as NCCL's revoke job does) and
     refuses its collectives, send/recv, finalize and a second revoke (class
     use-after-revoke). It is local, as NCCL's: a peer that does not revoke
     stays blocked, and the hang report says a peer revoked. ncclCommShrink:
     the ranks not excluded, in their order, call it and nobody waits for the
     excluded (a dead rank never calls); NCCL_SHRINK_ABORT first stops the
     parent's operations; the list is sorted in place, as NCCL does; the child
     takes its config or, NULL, the parent's, and the call blocks as the parent
     does (ncclCommSplit too). Reported: different lists (nccl-mismatch: every
     caller fails, no hang), an excluded rank calling (nccl-shrink-excluded),
     a rank outside or twice in the list (nccl-shrink-list), undefined flag
     bits (nccl-flags), NCCL_SHRINK_DEFAULT with the parent's operations in
     flight (nccl-shrink-busy), a shrink before the parent settled, e.g. during
     a non-blocking revoke (nccl-not-ready, ncclInvalidArgument as NCCL's
     ncclCommEnsureReady). A parent's async error is returned, as NCCL 2.28
     does even with NCCL_SHRINK_ABORT: revoke first.
   - Missing waits (class missing-wait, tests/strict/vs_strict_race.h): a
     happens-before check with vector clocks over streams (stream order,
     events, the legacy stream's implicit waits, host waits, collectives):
     a copy, memset, kernel or collective that touches bytes of a device
     allocation another stream wrote (or read, if it writes) with nothing
     ordering the two is reported, whichever of them ran first.
   - Kernels run in their device order: the library's kernels are written so
     that their host build follows the grid and block decomposition (>>kernels).
     The texts' device meaning itself (what NVRTC compiles)
     is not run here: tests/test_kernels_device.c runs it, CUDA's vocabulary
     emulated on host threads, against the host build, bit for bit.

   - Devices have a compute capability (VS_STRICT_CC, default 9.0, an H100's;
     a list is repeated over the devices): cudaLibraryLoadData takes a cubin
     or PTX text, and a launch on a device that cannot run the image fails
     (class no-kernel-image): a cubin runs on its SM's major with an equal or
     later minor, PTX on its architecture and later ones.

   - Virtual time (tests/strict/vs_strict_clock.h): every operation also gets
     the time it would take on a GPU of a spec (VS_STRICT_SPEC=h100|h200|file;
     H100 by default): stream, event and host clocks, collectives that start
     with their latest rank, busy and exposed-communication times per device
     (vs_strict_clock_*; cudaEventElapsedTime answers from it), a Chrome trace
     (VS_STRICT_TRACE=path). It only
     observes: nothing it computes changes what runs or what is checked.

   - Cost-only mode (VS_STRICT_COST_ONLY=1, read at the first call): kernels,
     copies, memsets and collectives are timed by the clock and checked as
     ever (order, waits, devices, bounds of their arguments), but not run;
     device memory is address space only (a PROT_NONE reservation of up to
     32 TiB, never backed: a host access still faults), and stream threads get 256 KiB
     stacks. So the library's control code runs on a thousand simulated GPUs
     in one process (tests/test_strict_scale.c). Every rank reads back the
     same values: the bytes of copies, memsets and send/recvs of at most 64 KiB
     are carried, collectives whose ranks each send at most that compute from
     the carried inputs, and all else (what kernels wrote) reads as zero; a
     larger read of nothing carried leaves its host buffer as it was.
     vs_strict_counts.device_bytes is the device memory allocated and not
     freed, in either mode.

   VS_STRICT_BACKTRACE=1 prints the caller's stack after each violation
   (addr2line -e <binary> on the +offsets names the lines).

   Counts (vs_strict_counts): device allocations, host-blocking waits, copies
   between host and device, NVRTC libraries loaded (and of them, those from
   PTX), kernels launched. A host wait counts only for work the host has not
   seen complete, and what it has seen is transitive, as on hardware: when it
   sees stream s done up to an operation (a sync, a blocking copy, a query that
   answered cudaSuccess), it knows done everything that operation's completion
   proves, through stream order, cudaStreamWaitEvent and the legacy stream's
   implicit waits (per-operation completion clocks, vs_strict_race.h; not
   through collectives: a peer's side may still run). So a trainer that reads
   its loss each step may query earlier work of any stream the loss waited for
   without a count. Exact: by clock, whatever the timing.

   What it cannot see: the GPU's own arithmetic (FMA contraction, approximate
   functions; NVRTC is run with IEEE flags), races between threads of one block
   (a block's threads run one after another), launch limits (registers, shared
   memory), and a collective that deadlocks only because the GPU runs out of
   room for concurrent NCCL kernels of different communicators
   (VS_STRICT_NCCL_SERIAL=1 gives each device one NCCL operation at a time,
   the worst case). The missing-wait check does not see order made between
   host threads (mutexes, pthread_create: a thread knows only what it waited
   for itself, so work handed to another thread after a host wait may be
   reported), does not order ranks by send/recv, takes a strided kernel
   argument's envelope, and tracks device memory only (not pinned host
   memory an asynchronous copy still uses while the host touches it). Of
   NCCL's fault tolerance: no failure is ever detected (a dead rank is a
   thread that stops calling: its peers block, with no ncclRemoteError, RAS or
   timeout; the program must learn of it itself); no resources, so
   splitShare/shrinkShare and what a revoke frees are not modelled; a blocking
   revoke, or NCCL_SHRINK_ABORT, waits for the communicator's queued
   operations to reach the head of their streams (NCCL synchronises its own
   streams); ncclCommSplit does not check that its parent settled; no
   ncclCommGrow, ncclCommSuspend or ncclCommResume (NCCL 2.29). */
#ifndef VS_STRICT_H
#define VS_STRICT_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <execinfo.h>

#ifdef __cplusplus
#define ST_C extern "C"
#else
#define ST_C
#endif

/* ---- what a program reads of the stand-in ---------------------------------------
   make compiles the stand-in once ($(B)/impl/standin.o from tests/strict/vs_strict.c);
   a program built with VS_STRICT_LINKED gets only this part and links that object
   (whose state is then the one state of the process, as in a one-file build). */

#define ST_MAXDEV 1024 /* VS_STRICT_DEVICES at most (one per thread rank at scale) */
#define ST_MAXWAIT 16  /* an operation's implicit and event waits */

typedef struct st_ksig {
    const char* name;
    int nargs;
    int size[16];
    unsigned ptr; /* bit i: argument i is a pointer */
    void (*run)(void** a, dim3 grid, dim3 block);
    unsigned wr; /* bit i: pointer argument i is written (vs_strict_race.h) */
    /* the byte offset and count each pointer argument touches (left: from the
       pointer to its allocation's end) */
    void (*range)(void** a, dim3 grid, size_t* off, size_t* bytes);
} st_ksig;

/* a kernel argument's size, for a table of st_ksig (vs_strict_add_kernels) */
#define ST_P sizeof(void*)
#define ST_LL sizeof(long long)
#define ST_I sizeof(int)
#define ST_F sizeof(float)
#define ST_D sizeof(double)

typedef struct vs_strict_counts {
    long device_allocs, device_frees, h2d, d2h, d2d, libraries, launches, nccl_ops;
    /* host_syncs: every call that blocks the host on device work it has not yet
       seen complete, whether or not it had to wait (so the count does not depend
       on timing): the synchronize calls, copies that
       return when done, and each polled wait (the first cudaStreamQuery /
       cudaEventQuery of a thread on a stream position or a recorded event). A
       wait for work up to a position of its stream that the host has seen done
       costs nothing and is not counted; seen done: by an earlier sync or query
       of the host, or transitively, because an operation the host saw done had
       to wait for it (stream order, an event wait, the legacy stream's implicit
       waits; st_seen_comp_locked): reading the loss each step makes later
       queries of the work it waited for free. events:
       cudaEventCreate calls.
       nccl_colls, nccl_p2p: NCCL collective calls, ncclSend/ncclRecv calls
       (nccl_ops counts what the streams ran: a group once). */
    long host_syncs, events, nccl_colls, nccl_p2p;
    long ptx_libraries; /* of the libraries, those loaded from PTX (the rest: cubins) */
    long device_bytes;  /* device memory allocated and not freed (bytes asked) */
} vs_strict_counts;

ST_C long vs_strict_violations(void);
ST_C long vs_strict_violations_of(const char* cls); /* cls: a class, e.g. "missing-wait" */
ST_C const char* vs_strict_first_violation(void);
ST_C vs_strict_counts vs_strict_get_counts(void);
ST_C void vs_strict_add_kernels(const st_ksig* table);
/* A kernel text's kernels beside the library's, from its declarations
   (vescale_mesh.h's vs_kernel_decl: arguments and cost) and its host function:
   a trainer's own (examples/gpt_kernels.h). Before the first
   cudaLibraryGetKernel; t is kept by pointer (16 texts at most). */
ST_C void vs_strict_add_text(const vs_kernel_text* t);

#include "vs_strict_clock.h" /* virtual time: its interface */

/* the stand-in's lock and wake-up, for a program that waits for its state (neg.h);
   st_cv is broadcast when NCCL's state changes (a stream's progress has its own, and
   so has each NCCL clique for its streams blocked in its operations) */
extern pthread_mutex_t st_mu;
extern pthread_cond_t st_cv;
extern double st_hang_s;
extern long st_nviol;
extern int st_delay_us; /* VS_STRICT_DELAY_US (test_pipe_nccl sets it for its second pass) */
double st_now(void);
void st_hang(const char* what);
/* A collective of device dev's that waits for its peers (st_mu held): what it is, or NULL. */
const char* st_nccl_waiting_locked(int dev);

/* Waits on st_cv (st_mu held) until `done` says so, with the hang deadline. */
#define ST_WAIT_UNTIL(cond, what) ST_WAIT_ON(&st_cv, cond, what)
/* ... on the condition variable cvp, which whatever makes cond true signals (a
   stream's `progress` for its `done`: fewer wake-ups than st_cv's every change) */
#define ST_WAIT_ON(cvp, cond, what)                                                                                   \
    do {                                                                                                              \
        double st_dl_ = st_now() + st_hang_s;                                                                        \
        while (!(cond)) {                                                                                             \
            struct timespec ts_;                                                                                      \
            clock_gettime(CLOCK_REALTIME, &ts_);                                                                      \
            ts_.tv_nsec += 20 * 1000 * 1000;                                                                          \
            if (ts_.tv_nsec >= 1000000000) ts_.tv_sec++, ts_.tv_nsec -= 1000000000;                                   \
            pthread_cond_timedwait((cvp), &st_mu, &ts_);                                                              \
            if (!(cond) && st_now() > st_dl_) {                                                                       \
                pthread_mutex_unlock(&st_mu);                                                                         \
                st_hang(what);                                                                                        \
            }                                                                                                         \
        }                                                                                                             \
    } while (0)

#ifndef VS_STRICT_LINKED

/* ---- state ------------------------------------------------------------------ */

#define ST_PAGE 4096
#define ST_ARENA ((size_t)16 << 30) /* address space of each view */
/* VS_STRICT_COST_ONLY=1: operations are timed (vs_strict_clock.h), not run;
   device memory is address space only (one PROT_NONE reservation of this size,
   never backed: the program's view and the stand-in's are the same pages) */
#define ST_ARENA_COST_ONLY ((size_t)32 << 40)

typedef struct st_op st_op;
typedef struct st_nop st_nop;
struct st_vc;
struct st_rset;

struct CUstream_st {
    int dev;
    unsigned flags;
    int legacy;
    long id;
    long enq, done; /* operations enqueued, completed */
    long known;     /* completed as the host has seen (a sync or a query): host_syncs */
    st_op *head, *tail;
    pthread_t th;
    int quit, started, dead;
    /* its worker's wait for work (st_mu's): signalled by a push and a destroy only.
       On st_cv every idle worker woke at every broadcast of every stream, and most
       of a run's CPU time was theirs, in futex calls. */
    pthread_cond_t work;
    pthread_cond_t progress; /* broadcast when `done` grows: a wait for it waits here (ST_WAIT_ON) */
    const char* blocked; /* what its running operation waits for (diagnostics) */
    void* bcomm;         /* the NCCL communicator it waits in, if any */
    struct CUstream_st* next;
    struct CUstream_st* dnext; /* the next of its device's (st_dev_streams) */
    struct st_vc* vc; /* vs_strict_race.h: the clock of its last operation to start, */
    unsigned clk;     /* and how many have started */
    struct st_vc* cvc; /* that operation's completion clock (what its completion proves done) */
    double vt;         /* vs_strict_clock.h: when its last operation to run ended */
};

struct CUevent_st {
    int dev;
    struct CUstream_st* s; /* NULL: never recorded (complete) */
    long target;
    int dead;
    struct st_vc* vc; /* vs_strict_race.h: the recorded operation's clock */
    struct st_vc* cvc; /* and its completion clock */
    struct st_tcell* tc; /* vs_strict_clock.h: the recorded position's end time */
    unsigned flags;      /* cudaEventCreateWithFlags' */
    struct CUevent_st* enext; /* every event (kept: a late use is reported) */
};

struct CUlib_st {
    int dead;
    struct CUlib_st* next; /* every library (kept, as events are) */
    int arch, ptx; /* the image's: sm_<arch> cubin, or PTX for compute_<arch> */
};
struct CUkern_st {
    const st_ksig* sig;
    struct CUlib_st* lib;
    struct CUkern_st* next; /* every kernel handle (kept, as libraries are) */
};

struct st_op {
    void (*fn)(struct CUstream_st* s, st_op* op);
    const char* what;
    st_op* next;
    /* copies */
    void *dst, *src;
    size_t n;
    int val;
    int ddev, sdev; /* the devices of dst and src (-1: host memory): cost-only mode's carried bytes */
    char* staged;
    /* waits: up to 16 (stream, target) pairs */
    int nwait;
    struct CUstream_st* ws[ST_MAXWAIT + 1];
    long wt[ST_MAXWAIT + 1];
    /* kernels */
    const st_ksig* sig;
    dim3 grid, block;
    char args[1024];
    int bad; /* a host pointer handed to the kernel: it faults when it runs */
    /* NCCL */
    st_nop* nops;
    /* vs_strict_race.h: its clock (filled when it starts), the enqueuing
       thread's, and that of each wait's target */
    struct st_vc *rvc, *hvc, *wvc[ST_MAXWAIT + 1];
    /* its completion clock (filled when it starts) and each wait target's */
    struct st_vc *cvc, *cwvc[ST_MAXWAIT + 1];
    /* cudaLaunchHostFunc */
    cudaHostFn_t host_fn;
    void* host_arg;
    /* vs_strict_clock.h: the host's time at enqueue, the latest end of what it
       waits for that had ended then, its start, end, cost and class, its own
       end's cell (when something waits for it), the cells it waits for */
    double t_host, t_dep, t0, t1, cost;
    int cls, ntcw;
    struct st_tcell *tc, **tcw;
};
/* a kernel operation's arguments: a[i] points at argument i in op->args
   (each copied at launch into 8-byte-aligned slots) */
static void st_op_args(const st_op* op, void** a)
{
    int o = 0;
    for (int i = 0; i < op->sig->nargs; i++) a[i] = (void*)(op->args + o), o += (op->sig->size[i] + 7) & ~7;
}

typedef struct st_alloc {
    size_t off, n, span; /* user offset in the arena, bytes asked, pages reserved from span start */
    size_t start;
    int dev, live, dead_pending; /* dead_pending: cudaFreeAsync queued */
    struct st_rset* race; /* vs_strict_race.h: its accesses */
} st_alloc;

typedef struct st_pin {
    char* p;
    size_t n;
    int registered;
} st_pin;

pthread_mutex_t st_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t st_cv = PTHREAD_COND_INITIALIZER;
static int st_ready, st_ndev = 8, st_serial;
static int st_cost_only;         /* VS_STRICT_COST_ONLY */
static size_t st_arena = ST_ARENA; /* the views' size */
int st_delay_us;
static int st_cc[ST_MAXDEV]; /* each device's compute capability, major * 10 + minor */
double st_hang_s = 120;
static char *st_dbase, *st_sbase; /* the program's (PROT_NONE) and the stand-in's view */
static size_t st_top;
static st_alloc* st_allocs;
static int st_nallocs, st_capallocs;
static st_pin* st_pins;
static int st_npins, st_cappins;
static struct CUstream_st* st_streams;
static struct CUstream_st** st_byid; /* [id]: the stream of that id (st_seen_comp_locked) */
static int st_nbyid;
/* each device's streams (dnext): a device-wide wait or scan (cudaMalloc, cudaFree,
   the legacy stream's implicit waits) touches its own, not every rank's (at 1,024
   ranks the scan of all streams was most of a run) */
static struct CUstream_st* st_dev_streams[ST_MAXDEV];
static struct CUstream_st* st_legacy[ST_MAXDEV];
static struct CUevent_st* st_events;
static struct CUlib_st* st_libs;
static struct CUkern_st* st_kerns;
static long st_nextid = 1;
static int st_sticky[ST_MAXDEV];
static __thread int st_cur_dev;
static __thread cudaError_t st_last_err;
long st_nviol;
static char st_first_viol[512];

static vs_strict_counts st_count;
static __thread const void* st_poll_obj; /* the last polled stream or event, and its target */
static __thread long st_poll_target;

/* A polled wait for s's work up to target: counted once per (object, target) a
   thread queries in a row, unless the host has seen that much of s done. */
static void st_count_poll_locked(const void* obj, struct CUstream_st* s, long target)
{
    if (obj == st_poll_obj && target == st_poll_target) return;
    st_poll_obj = obj, st_poll_target = target;
    if (target > s->known) st_count.host_syncs++;
}

/* A blocking wait for s's work up to t: counted before, s->known set after. */
static void st_count_sync_locked(struct CUstream_st* s, long t)
{
    if (t > s->known) st_count.host_syncs++;
}
static void st_seen_locked(struct CUstream_st* s, long t)
{
    if (t > s->known) s->known = t;
}

static unsigned st_rand(void)
{
    static unsigned long long x = 0x9E3779B97F4A7C15ull;
    unsigned long long v = __atomic_add_fetch(&x, 0x9E3779B97F4A7C15ull, __ATOMIC_RELAXED);
    v ^= v >> 31, v *= 0xBF58476D1CE4E5B9ull, v ^= v >> 29;
    return (unsigned)v;
}

double st_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The violations by class (cls: a string literal), for vs_strict_violations_of. */
#define ST_NCLASS 48
static struct {
    const char* cls;
    long n;
} st_vclass[ST_NCLASS];
static pthread_mutex_t st_vmu = PTHREAD_MUTEX_INITIALIZER;

static void st_violation(const char* cls, const char* fmt, ...)
{
    char msg[480];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "vs_strict: VIOLATION %s: %s\n", cls, msg);
    if (getenv("VS_STRICT_BACKTRACE")) { /* where (addr2line -e the binary on the +offsets) */
        void* bt[24];
        backtrace_symbols_fd(bt, backtrace(bt, 24), 2);
    }
    fflush(stderr);
    pthread_mutex_lock(&st_vmu);
    for (int i = 0; i < ST_NCLASS; i++)
        if (!st_vclass[i].cls || !strcmp(st_vclass[i].cls, cls)) {
            st_vclass[i].cls = cls, st_vclass[i].n++;
            break;
        }
    pthread_mutex_unlock(&st_vmu);
    if (__atomic_fetch_add(&st_nviol, 1, __ATOMIC_SEQ_CST) == 0)
        snprintf(st_first_viol, sizeof st_first_viol, "%s: %s", cls, msg);
}

/* What the tests read. */
ST_C long vs_strict_violations(void) { return __atomic_load_n(&st_nviol, __ATOMIC_SEQ_CST); }
ST_C long vs_strict_violations_of(const char* cls)
{
    long n = 0;
    pthread_mutex_lock(&st_vmu);
    for (int i = 0; i < ST_NCLASS && st_vclass[i].cls; i++)
        if (!strcmp(st_vclass[i].cls, cls)) n = st_vclass[i].n;
    pthread_mutex_unlock(&st_vmu);
    return n;
}
ST_C const char* vs_strict_first_violation(void) { return st_first_viol; }
ST_C vs_strict_counts vs_strict_get_counts(void)
{
    pthread_mutex_lock(&st_mu);
    vs_strict_counts c = st_count;
    pthread_mutex_unlock(&st_mu);
    return c;
}

/* A wait of the stand-in's that passed its deadline: say what every stream
   waits for, then end the process (the hardware would hang forever). */
static const char* st_nccl_hang_note(void* bcomm); /* vs_strict_nccl.h */
void st_hang(const char* what)
{
    char buf[2048];
    const char* note = ""; /* first: the report is cut at st_violation's length */
    for (struct CUstream_st* s = st_streams; s; s = s->next)
        if (s->enq > s->done && s->bcomm && *st_nccl_hang_note(s->bcomm)) note = st_nccl_hang_note(s->bcomm);
    int k = snprintf(buf, sizeof buf, "%s did not finish within %.0f s%s (streams:", what, st_hang_s, note);
    for (struct CUstream_st* s = st_streams; s && k < (int)sizeof buf - 100; s = s->next)
        if (s->enq > s->done)
            k += snprintf(buf + k, sizeof buf - (size_t)k, " [stream %ld, device %d: %ld pending, at %s]", s->id, s->dev,
                          s->enq - s->done, s->blocked ? s->blocked : s->head ? s->head->what : "?");
    snprintf(buf + (k < (int)sizeof buf - 2 ? k : (int)sizeof buf - 2), 2, ")");
    st_violation("hang", "%s", buf);
    _exit(87);
}


/* ---- memory ----------------------------------------------------------------- */

static void st_segv(int sig, siginfo_t* si, void* uc)
{
    (void)uc;
    char* a = (char*)si->si_addr;
    char msg[256];
    int n = 0;
    if (st_dbase && a >= st_dbase && a < st_dbase + st_arena)
        n = snprintf(msg, sizeof msg,
                     "vs_strict: VIOLATION host-access: host code touched device memory at %p (device memory is not "
                     "host memory: copy it with cudaMemcpy)\n",
                     (void*)a);
    else if (!st_cost_only && st_sbase && a >= st_sbase && a < st_sbase + st_arena)
        n = snprintf(msg, sizeof msg,
                     "vs_strict: VIOLATION device-bounds: a kernel, copy or collective touched device memory past its "
                     "allocation or after cudaFree (device address %p)\n",
                     (void*)(a - st_sbase + st_dbase));
    if (n > 0) {
        if (write(2, msg, (size_t)n) < 0) _exit(86);
        _exit(86);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void st_clock_init_locked(void); /* vs_strict_clock.h */
static void st_init_locked(void)
{
    if (st_ready) return;
    const char* e = getenv("VS_STRICT_DEVICES");
    if (e && atoi(e) > 0) st_ndev = atoi(e) > ST_MAXDEV ? ST_MAXDEV : atoi(e);
    if ((e = getenv("VS_STRICT_COST_ONLY"))) st_cost_only = atoi(e) > 0;
    if ((e = getenv("VS_STRICT_DELAY_US"))) st_delay_us = atoi(e);
    if ((e = getenv("VS_STRICT_HANG_S")) && atof(e) > 0) st_hang_s = atof(e);
    if ((e = getenv("VS_STRICT_NCCL_SERIAL"))) st_serial = atoi(e);
    /* VS_STRICT_CC=major.minor[,major.minor...]: the devices' compute capabilities,
       the list repeated over the devices (default 9.0, an H100's) */
    const char* cc = getenv("VS_STRICT_CC");
    for (int d = 0; d < ST_MAXDEV; d++) {
        int maj = 9, mnr = 0;
        if (cc && *cc) {
            const char* p = cc;
            for (int k = 0; k < d; k++) { /* entry d of the list, cyclically */
                p = strchr(p, ',');
                p = p ? p + 1 : cc;
            }
            if (sscanf(p, "%d.%d", &maj, &mnr) != 2 || maj < 1 || mnr < 0 || mnr > 9) {
                fprintf(stderr, "vs_strict: VS_STRICT_CC=%s: want major.minor[,major.minor...]\n", cc);
                _exit(85);
            }
        }
        st_cc[d] = maj * 10 + mnr;
    }
    if (st_cost_only) { /* address space only: nothing may touch it (the host faults, no kernel runs); */
        for (st_arena = ST_ARENA_COST_ONLY; st_arena >= ST_ARENA; st_arena /= 4) { /* (a sanitizer's is smaller) */
            st_dbase = (char*)mmap(NULL, st_arena, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (st_dbase != MAP_FAILED) break;
        }
        st_sbase = st_dbase;
    }
    int fd = st_cost_only ? -2 : (int)syscall(SYS_memfd_create, "vs_strict_device", 0);
    if (fd == -2) {
    } else if (fd < 0 || ftruncate(fd, (off_t)ST_ARENA) != 0) {
        fprintf(stderr, "vs_strict: memfd: %s\n", strerror(errno));
        _exit(85);
    }
    if (fd >= 0) {
        st_dbase = (char*)mmap(NULL, ST_ARENA, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, 0);
        st_sbase = (char*)mmap(NULL, ST_ARENA, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, 0);
        close(fd);
    }
    if (st_dbase == MAP_FAILED || st_sbase == MAP_FAILED) {
        fprintf(stderr, "vs_strict: mmap of the device arena: %s\n", strerror(errno));
        _exit(85);
    }
    st_top = ST_PAGE;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = st_segv;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    st_ready = 1;
    st_clock_init_locked();
}

static void st_init(void)
{
    pthread_mutex_lock(&st_mu);
    st_init_locked();
    pthread_mutex_unlock(&st_mu);
}

/* The allocation holding device address p, or NULL (st_mu held). */
static st_alloc* st_find_locked(const void* p, int with_freed)
{
    const char* c = (const char*)p;
    if (!st_dbase || c < st_dbase || c >= st_dbase + st_top) return NULL;
    size_t off = (size_t)(c - st_dbase);
    int lo = 0, hi = st_nallocs - 1;
    while (lo <= hi) { /* by start: allocations are made in address order */
        int mid = (lo + hi) / 2;
        if (st_allocs[mid].start + st_allocs[mid].span <= off) lo = mid + 1;
        else if (st_allocs[mid].start > off) hi = mid - 1;
        else return st_allocs[mid].live || with_freed ? &st_allocs[mid] : NULL;
    }
    return NULL;
}

static st_pin* st_pin_find_locked(const void* p, size_t n)
{
    const char* c = (const char*)p;
    for (int i = 0; i < st_npins; i++)
        if (st_pins[i].p && c >= st_pins[i].p && c + n <= st_pins[i].p + st_pins[i].n) return &st_pins[i];
    return NULL;
}

enum { ST_HOST = 0, ST_DEV, ST_PINNED, ST_PAST_END, ST_FREED };
static const char* const st_where_names[] = {"host (pageable) memory", "device memory", "pinned host memory",
                                             "device memory past its allocation's end", "freed device memory"};

/* Where [p, p + n) is; *dev gets a device allocation's device. */
static int st_where_locked(const void* p, size_t n, int* dev)
{
    st_alloc* a = st_find_locked(p, 1);
    if (a) {
        if (dev) *dev = a->dev;
        if (!a->live) return ST_FREED;
        return (size_t)((const char*)p - st_dbase) + n <= a->off + a->n ? ST_DEV : ST_PAST_END;
    }
    if (st_dbase && (const char*)p >= st_dbase && (const char*)p < st_dbase + st_arena) return ST_FREED;
    return st_pin_find_locked(p, n) ? ST_PINNED : ST_HOST;
}

static int st_where(const void* p, size_t n, int* dev)
{
    pthread_mutex_lock(&st_mu);
    int w = st_where_locked(p, n, dev);
    pthread_mutex_unlock(&st_mu);
    return w;
}

/* The stand-in's view of a GPU-reachable address. */
static void* st_sh(const void* p)
{
    const char* c = (const char*)p;
    if (st_dbase && c >= st_dbase && c < st_dbase + st_arena) return st_sbase + (c - st_dbase);
    return (void*)(uintptr_t)p;
}

static void st_ksig_ranges(const st_ksig* sig, void** a, dim3 grid, size_t* off, size_t* bytes);
static int st_ksig_cost(const st_ksig* sig, void** a, vs_strict_kcost* k);
#include "vs_strict_race.h"
#define VS_STRICT_CLOCK_IMPL_HERE
#include "vs_strict_clock.h"

/* ---- streams and events ------------------------------------------------------ */

static void* st_worker(void* arg);

static struct CUstream_st* st_stream_new_locked(int dev, unsigned flags, int legacy)
{
    struct CUstream_st* s = (struct CUstream_st*)calloc(1, sizeof *s);
    s->dev = dev, s->flags = flags, s->legacy = legacy, s->id = st_nextid++;
    if (s->id >= st_nbyid) {
        int cap = st_nbyid ? 2 * st_nbyid : 1024;
        while (cap <= s->id) cap *= 2;
        st_byid = (struct CUstream_st**)realloc(st_byid, sizeof *st_byid * (size_t)cap);
        memset(st_byid + st_nbyid, 0, sizeof *st_byid * (size_t)(cap - st_nbyid));
        st_nbyid = cap;
    }
    st_byid[s->id] = s;
    pthread_cond_init(&s->work, NULL);
    pthread_cond_init(&s->progress, NULL);
    s->next = st_streams;
    st_streams = s;
    s->dnext = st_dev_streams[dev];
    st_dev_streams[dev] = s;
    st_clock_stream_named_locked(s);
    return s;
}

static struct CUstream_st* st_legacy_locked(int dev)
{
    if (!st_legacy[dev]) st_legacy[dev] = st_stream_new_locked(dev, 0, 1);
    return st_legacy[dev];
}

/* The stream a handle names: NULL, cudaStreamLegacy and cudaStreamPerThread are
   the current device's legacy stream (per-thread streams are not modelled:
   the library never uses them). */
static struct CUstream_st* st_stream_locked(cudaStream_t h)
{
    if (!h || h == cudaStreamLegacy || h == cudaStreamPerThread) return st_legacy_locked(st_cur_dev);
    return (struct CUstream_st*)h;
}

/* Appends op to s (st_mu held), with the legacy stream's implicit
   synchronisation: work on the legacy stream waits for every blocking stream of
   its device, and work on a blocking stream waits for the legacy stream. */
static void st_push_locked(struct CUstream_st* s, st_op* op)
{
    if (s->dead) {
        st_violation("use-after-destroy", "%s enqueued on destroyed stream %ld", op->what, s->id);
        st_race_op_free_locked(op);
        st_clock_op_free_locked(op);
        free(op);
        return;
    }
    if (!(s->flags & cudaStreamNonBlocking)) {
        if (s->legacy) {
            for (struct CUstream_st* o = st_dev_streams[s->dev]; o; o = o->dnext)
                if (o != s && !o->legacy && !(o->flags & cudaStreamNonBlocking) && !o->dead &&
                    o->enq > o->done && op->nwait < ST_MAXWAIT)
                    op->ws[op->nwait] = o, op->wt[op->nwait++] = o->enq;
        } else {
            struct CUstream_st* l = st_legacy[s->dev];
            if (l && l->enq > l->done) op->ws[op->nwait] = l, op->wt[op->nwait++] = l->enq;
        }
    }
    st_clock_push_locked(s, op);
    st_race_push_locked(s, op);
    op->next = NULL;
    if (s->tail) s->tail->next = op;
    else s->head = op;
    s->tail = op;
    s->enq++;
    if (!s->started) {
        s->started = 1;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        /* no kernel runs on it in cost-only mode: thousands of streams at scale */
        if (st_cost_only) pthread_attr_setstacksize(&at, (size_t)256 << 10);
        pthread_create(&s->th, &at, st_worker, s);
        pthread_attr_destroy(&at);
    }
    pthread_cond_signal(&s->work); /* (no st_cv broadcast: no wait of st_cv's waits for an enqueue) */
}

static st_op* st_op_new(const char* what, void (*fn)(struct CUstream_st*, st_op*))
{
    st_op* op = (st_op*)calloc(1, sizeof *op);
    op->what = what, op->fn = fn;
    return op;
}

static void st_carry_kernel_locked(struct CUstream_st* s, st_op* op);
static void st_carry_put(int dev, const void* a, const void* v, size_t n);
static void* st_worker(void* arg)
{
    struct CUstream_st* s = (struct CUstream_st*)arg;
    pthread_mutex_lock(&st_mu);
    for (;;) {
        while (!s->head && !s->quit) pthread_cond_wait(&s->work, &st_mu);
        if (!s->head) break;
        st_op* op = s->head;
        /* the implicit and explicit waits of this operation */
        for (int i = 0; i < op->nwait; i++) {
            struct CUstream_st* o = op->ws[i];
            long t = op->wt[i];
            s->blocked = "an event or the legacy stream";
            ST_WAIT_ON(&o->progress, o->done >= t, "a stream's wait for an event");
        }
        s->blocked = NULL;
        st_race_start_locked(s, op);
        st_clock_start_locked(s, op);
        if (st_cost_only && op->fn == st_kernel_run && !op->bad) st_carry_kernel_locked(s, op);
        pthread_mutex_unlock(&st_mu);
        if (st_delay_us) usleep(st_rand() % (unsigned)(st_delay_us + 1));
        if (op->fn) op->fn(s, op);
        pthread_mutex_lock(&st_mu);
        st_clock_end_locked(s, op);
        s->head = op->next;
        if (!s->head) s->tail = NULL;
        s->done++;
        s->blocked = NULL;
        free(op->staged);
        st_race_op_free_locked(op);
        st_clock_op_free_locked(op);
        free(op);
        /* the waits for a stream's `done` wait on its `progress` (ST_WAIT_ON): no st_cv
           broadcast, which woke every collective waiting for its peers at every
           operation of every stream (what else waits on st_cv for a stream's
           state, as neg.h's waits, sees it within ST_WAIT_ON's 20 ms slice) */
        pthread_cond_broadcast(&s->progress);
    }
    s->quit = 2;
    pthread_cond_broadcast(&st_cv);
    pthread_mutex_unlock(&st_mu);
    return NULL;
}

/* Waits for every stream of device dev (st_mu held); a host-blocking wait. */
static void st_device_idle_locked(int dev, const char* what)
{
    for (struct CUstream_st* s = st_dev_streams[dev]; s; s = s->dnext)
        if (!st_race_host_covers_locked(s)) {
            long t = s->enq;
            struct st_vc* v = st_race_target_locked(s);
            st_tcell* c = st_clock_target_locked(s);
            ST_WAIT_ON(&s->progress, s->done >= t, what);
            st_race_host_merge_locked(v);
            st_clock_host_wait_locked(c);
        }
}

static cudaError_t st_err(cudaError_t e)
{
    st_last_err = e;
    return e;
}

static cudaError_t st_sticky_check(void)
{
    int e = __atomic_load_n(&st_sticky[st_cur_dev], __ATOMIC_SEQ_CST);
    return e ? st_err((cudaError_t)e) : cudaSuccess;
}

/* ---- the runtime API ------------------------------------------------------------ */

ST_C const char* cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorSymbolNotFound: return "named symbol not found";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    default: return "unknown error (vs_strict)";
    }
}
ST_C const char* cudaGetErrorName(cudaError_t e)
{
    (void)e;
    return "cudaError (vs_strict)";
}
ST_C cudaError_t cudaGetLastError(void)
{
    cudaError_t e = st_last_err;
    st_last_err = cudaSuccess;
    return e;
}
ST_C cudaError_t cudaPeekAtLastError(void) { return st_last_err; }

ST_C cudaError_t cudaGetDeviceCount(int* n)
{
    st_init();
    *n = st_ndev;
    return cudaSuccess;
}
ST_C cudaError_t cudaGetDevice(int* dev)
{
    *dev = st_cur_dev;
    return cudaSuccess;
}
ST_C cudaError_t cudaSetDevice(int dev)
{
    st_init();
    if (dev < 0 || dev >= st_ndev) return st_err(cudaErrorInvalidDevice);
    st_cur_dev = dev;
    return cudaSuccess;
}
ST_C cudaError_t cudaDeviceGetAttribute(int* v, enum cudaDeviceAttr a, int dev)
{
    st_init();
    if (dev < 0 || dev >= st_ndev) return st_err(cudaErrorInvalidDevice);
    *v = a == cudaDevAttrComputeCapabilityMajor ? st_cc[dev] / 10 : a == cudaDevAttrComputeCapabilityMinor ? st_cc[dev] % 10 : 0;
    return cudaSuccess;
}
ST_C cudaError_t cudaDriverGetVersion(int* v)
{
    *v = 12080;
    return cudaSuccess;
}
ST_C cudaError_t cudaRuntimeGetVersion(int* v)
{
    *v = 12080;
    return cudaSuccess;
}

/* n bytes of device dev (st_mu held): an allocation of the arena. */
static cudaError_t st_alloc_locked(void** p, size_t n, int dev)
{
    size_t body = (n + 255) & ~(size_t)255, span = (body + ST_PAGE - 1) / ST_PAGE * ST_PAGE;
    if (st_top + span + ST_PAGE > st_arena) return st_err(cudaErrorMemoryAllocation);
    if (st_nallocs == st_capallocs) {
        st_capallocs = st_capallocs ? 2 * st_capallocs : 1024;
        st_allocs = (st_alloc*)realloc(st_allocs, sizeof *st_allocs * (size_t)st_capallocs);
    }
    st_alloc* a = &st_allocs[st_nallocs++];
    a->start = st_top, a->span = span, a->off = st_top + span - body, a->n = n, a->dev = dev, a->live = 1, a->dead_pending = 0, a->race = NULL;
    st_top += span + ST_PAGE; /* then a guard page, never accessible */
    if (!st_cost_only) {
        mprotect(st_sbase + a->start, span, PROT_READ | PROT_WRITE);
        memset(st_sbase + a->off, 0xA5, body); /* cudaMalloc's memory is not zeroed */
    }
    st_count.device_allocs++;
    st_count.device_bytes += n;
    *p = st_dbase + a->off;
    return cudaSuccess;
}

/* A collective of device dev's that waits for its peers (st_mu held); one that
   waits for a peer that has not enqueued its side yet. */
static const char* st_nccl_unmatched_locked(int dev);

/* A call that synchronises device dev (st_mu held) while a collective there waits
   for its peers: reported at once as class cls (two ranks doing this deadlock,
   NCCL's guide), not only when the peer's doing the same hangs this run.
   cudaFree: any such collective; cudaMalloc and cudaDeviceSynchronize: one whose
   peer has not enqueued its side yet (all: unmatched 0), the state in which the
   deadlock is possible (a program that makes every rank enqueue first, e.g.
   behind a host barrier, may drain the device). */
static void st_sync_beside_collective_locked(int dev, const char* cls, const char* call, int unmatched)
{
    const char* w = unmatched ? st_nccl_unmatched_locked(dev) : st_nccl_waiting_locked(dev);
    if (!w) return;
    char buf[200];
    snprintf(buf, sizeof buf, "%s", w);
    pthread_mutex_unlock(&st_mu);
    st_violation(cls,
                 "%s on device %d synchronises the device while %s waits for its peers (two ranks doing this "
                 "deadlock: NCCL's guide)",
                 call, dev, buf);
    pthread_mutex_lock(&st_mu);
}

ST_C cudaError_t cudaMalloc(void** p, size_t n)
{
    st_clock_call();
    pthread_mutex_lock(&st_mu);
    st_init_locked();
    int dev = st_cur_dev;
    st_sync_beside_collective_locked(dev, "malloc-during-collective", "cudaMalloc", 1);
    st_device_idle_locked(dev, "cudaMalloc (it synchronises the device)");
    cudaError_t e = n ? st_alloc_locked(p, n, dev) : (*p = NULL, cudaSuccess);
    pthread_mutex_unlock(&st_mu);
    return e;
}

ST_C cudaError_t cudaFree(void* p)
{
    if (!p) return cudaSuccess;
    st_clock_call();
    pthread_mutex_lock(&st_mu);
    st_alloc* a = st_find_locked(p, 1);
    if (!a || !a->live || a->dead_pending || st_dbase + a->off != (char*)p) {
        int w = st_where_locked(p, 1, NULL);
        pthread_mutex_unlock(&st_mu);
        st_violation("bad-free", "cudaFree(%p): %s", p,
                     w == ST_FREED ? "freed twice" : w == ST_HOST || w == ST_PINNED ? "not device memory"
                                                                                   : "not the start of an allocation");
        return st_err(cudaErrorInvalidValue);
    }
    st_sync_beside_collective_locked(a->dev, "free-during-collective", "cudaFree", 0);
    st_device_idle_locked(a->dev, "cudaFree (it synchronises the device)");
    a = st_find_locked(p, 1);
    a->live = 0;
    st_race_free_locked(a);
    if (!st_cost_only) {
        mprotect(st_sbase + a->start, a->span, PROT_NONE);
        madvise(st_sbase + a->start, a->span, MADV_REMOVE);
    } else {
        st_carry_put(a->dev, st_dbase + a->off, NULL, a->n);
    }
    st_count.device_frees++;
    st_count.device_bytes -= a->n;
    pthread_mutex_unlock(&st_mu);
    return cudaSuccess;
}

/* Stream-ordered allocation (a memory pool's): neither call synchronises the
   device. cudaMallocAsync hands out memory at once (counted as an allocation);
   cudaFreeAsync revokes it when the stream gets there, so work queued before it
   on that stream still sees it, and a later use faults (device-bounds). */
ST_C cudaError_t cudaMallocAsync(void** p, size_t n, cudaStream_t h)
{
    st_clock_call();
    pthread_mutex_lock(&st_mu);
    st_init_locked();
    struct CUstream_st* s = st_stream_locked(h);
    cudaError_t e = s->dev != st_cur_dev ? st_err(cudaErrorInvalidResourceHandle)
                                         : st_alloc_locked(p, n ? n : 1, s->dev);
    pthread_mutex_unlock(&st_mu);
    return e;
}
static void st_free_async_run(struct CUstream_st* s, st_op* op)
{
    (void)s;
    pthread_mutex_lock(&st_mu);
    st_alloc* a = st_find_locked(op->dst, 1);
    a->live = 0;
    st_count.device_bytes -= a->n;
    if (!st_cost_only) {
        mprotect(st_sbase + a->start, a->span, PROT_NONE);
        madvise(st_sbase + a->start, a->span, MADV_REMOVE);
    } else {
        st_carry_put(a->dev, st_dbase + a->off, NULL, a->n);
    }
    pthread_mutex_unlock(&st_mu);
}
ST_C cudaError_t cudaFreeAsync(void* p, cudaStream_t h)
{
    if (!p) return cudaSuccess;
    st_clock_call();
    pthread_mutex_lock(&st_mu);
    st_alloc* a = st_find_locked(p, 1);
    if (!a || !a->live || a->dead_pending || st_dbase + a->off != (char*)p) {
        pthread_mutex_unlock(&st_mu);
        st_violation("bad-free", "cudaFreeAsync(%p): not a live device allocation's start", p);
        return st_err(cudaErrorInvalidValue);
    }
    a->dead_pending = 1;
    st_op* op = st_op_new("cudaFreeAsync", st_free_async_run);
    op->dst = p;
    st_push_locked(st_stream_locked(h), op);
    st_count.device_frees++;
    pthread_mutex_unlock(&st_mu);
    return cudaSuccess;
}

ST_C cudaError_t cudaMallocHost(void** p, size_t n)
{
    pthread_mutex_lock(&st_mu);
    st_init_locked();
    if (st_npins == st_cappins) {
        st_cappins = st_cappins ? 2 * st_cappins : 64;
        st_pins = (st_pin*)realloc(st_pins, sizeof *st_pins * (size_t)st_cappins);
    }
    st_pin* q = &st_pins[st_npins++];
    /* cost-only: zeroed, as a read-back no copy fills (copies are not run) must read
       the same on every rank (a gradient norm's: ranks that disagree on a skip
       issue different collectives) */
    q->p = (char*)(st_cost_only ? calloc(1, n ? n : 1) : malloc(n ? n : 1)), q->n = n, q->registered = 0;
    *p = q->p;
    pthread_mutex_unlock(&st_mu);
    return cudaSuccess;
}
ST_C cudaError_t cudaFreeHost(void* p)
{
    pthread_mutex_lock(&st_mu);
    for (int i = 0; i < st_npins; i++)
        if (st_pins[i].p == p && !st_pins[i].registered) {
            free(p);
            st_pins[i].p = NULL;
            pthread_mutex_unlock(&st_mu);
            return cudaSuccess;
        }
    pthread_mutex_unlock(&st_mu);
    st_violation("bad-free", "cudaFreeHost(%p): not from cudaMallocHost", p);
    return st_err(cudaErrorInvalidValue);
}
ST_C cudaError_t cudaHostRegister(void* p, size_t n, unsigned flags)
{
    (void)flags;
    pthread_mutex_lock(&st_mu);
    st_init_locked();
    if (st_pin_find_locked(p, 1)) {
        pthread_mutex_unlock(&st_mu);
        return st_err(cudaErrorHostMemoryAlreadyRegistered);
    }
    if (st_npins == st_cappins) {
        st_cappins = st_cappins ? 2 * st_cappins : 64;
        st_pins = (st_pin*)realloc(st_pins, sizeof *st_pins * (size_t)st_cappins);
    }
    st_pin* q = &st_pins[st_npins++];
    q->p = (char*)p, q->n = n, q->registered = 1;
    pthread_mutex_unlock(&st_mu);
    return cudaSuccess;
}
ST_C cudaError_t cudaHostUnregister(void* p)
{
    pthread_mutex_lock(&st_mu);
    for (int i = 0; i < st_npins; i++)
        if (st_pins[i].p == p && st_pins[i].registered) {
            st_pins[i].p = NULL;
            pthread_mutex_unlock(&st_mu);
            return cudaSuccess;
        }
    pthread_mutex_unlock(&st_mu);
    return st_err(cudaErrorHostMemoryNotRegistered);
}

ST_C cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes* at, const void* p)
{
    memset(at, 0, sizeof *at);
    int dev = 0, w = st_where(p, 1, &dev);
    if (w == ST_DEV || w == ST_PAST_END) {
        at->type = cudaMemoryTypeDevice, at->device = dev, at->devicePointer = (void*)(uintptr_t)p;
    } else if (w == ST_PINNED) {
        at->type = cudaMemoryTypeHost, at->hostPointer = (void*)(uintptr_t)p, at->devicePointer = (void*)(uintptr_t)p;
    } else {
        at->type = cudaMemoryTypeUnregistered, at->hostPointer = (void*)(uintptr_t)p;
    }
    return cudaSuccess;
}

ST_C cudaError_t cudaStreamCreateWithFlags(cudaStream_t* st, unsigned flags)
{
    pthread_mutex_lock(&st_mu);
    st_init_locked();
    *st = st_stream_new_locked(st_cur_dev, flags, 0);
    pthread_mutex_unlock(&st_mu);
    return cudaSuccess;
}
ST_C cudaError_t cudaStreamCreate(cudaStream_t* st) { return cudaStreamCreateWithFlags(st, 0); }

ST_C cudaError_t cudaStreamDestroy(cudaStream_t h)
{
    if (!h || h == cudaStreamLegacy || h == cudaStreamPerThread) return st_err(cudaErrorInvalidResourceHandle);
    struct CUstream_st* s = (struct CUstream_st*)h;
    pthread_mutex_lock(&st_mu);
    if (s->dead) {
        pthread_mutex_unlock(&st_mu);
        st_violation("use-after-destroy", "cudaStreamDestroy of stream %ld twice", s->id);
        return st_err(cudaErrorInvalidResourceHandle);
    }
    /* CUDA lets the work finish in the background; the worker ends after it */
    s->dead = 1, s->quit = 1;
    pthread_cond_signal(&s->work);
    pthread_cond_broadcast(&st_cv);
    pthread_mutex_unlock(&st_mu);
    return cudaSuccess;
}

ST_C cudaError_t cudaStreamGetDevice(cudaStream_t h, int* dev)
{
    pthread_mutex_lock(&st_mu);
    *dev = st_stream_locked(h)->dev;
    pthread_mutex_unlock(&st_mu);
    return cudaSuccess;
}

ST_C cudaError_t cudaStreamSynchronize(cudaStream_t h)
{
    st_clock_call();
    pthread_mutex_lock(&st_mu);
    st_init_locked();
    struct CUstream_st* s = st_stream_locked(h);
    long t = s->enq;
    st_count_sync_locked(s, t);
    struct st_vc* v = st_race_target_locked(s);
    struct st_vc* cv = st_comp_target_locked(s);
    st_tcell* tc = st_clock_target_locked(s);
    ST_WAIT_ON(&s->progress, s->done >= t, "cudaStreamSynchronize");
    st_clock_host_wait_locked(tc);
    st_race_host_merge_locked(v);
    st_seen_locked(s, t);
    st_seen_comp_locked(cv);
    pthread_mutex_unlock(&st_mu);
    return st_sticky_check();
}

ST_C cudaError_t cudaStreamQuery(cudaStream_t h)
{
    pthread_mutex_lock(&st_mu);
    st_init_locked();
    struct CUstream_st* s = st_stream_locked(h);
    int busy = s->done < s->enq;
    st_count_poll_locked(s, s, s->enq);
    if (!busy) st_clock_call(), st_clock_host_wait_locked(st_clock_target_locked(s));
    if (!busy) st_seen_locked(s, s->enq), st_seen_comp_locked(st_vc_ref(s->cvc));
    if (!busy) st_race_host_merge_locked(st_race_target_locked(s));
    pthread_mutex_unlock(&st_mu);
    if (busy) return cudaErrorNotReady;
    return st_sticky_check();
}

ST_C cudaError_t cudaDeviceSynchronize(void)
{
    st_clock_call();
    pthread_mutex_lock(&st_mu);
    st_init_locked();
    st_count.host_syncs++;
    st_sync_beside_collective_locked(st_cur_dev, "device-sync-during-collective", "cudaDeviceSynchronize", 1);
    st_device_idle_locked(st_cur_dev, "cudaDeviceSynchronize");
    for (struct CUstream_st* q = st_dev_streams[st_cur_dev]; q; q = q->dnext)
        st_seen_locked(q, q->done), st_seen_comp_locked(st_vc_ref(q->cvc));
    pthread_mutex_unlock(&st_mu);
    return st_sticky_check();
}

ST_C cudaError_t cudaEventCreateWithFlags(cudaEvent_t* ev, unsigned flags)
{
    st_init();
    struct CUevent_st* e = (struct CUevent_st*)calloc(1, sizeof *e);
    e->dev = st_cur_dev, e->flags = flags;
    pthread_mutex_lock(&st_mu);
    e->enext = st_events, st_events = e;
    st_count.events++;
    pthread_mutex_unlock(&st_mu);
    *ev = e;
    return cudaSuccess;
}
ST_C cudaError_t cudaEventCreate(cudaEvent_t* ev) { return cudaEventCreateWithFlags(ev, 0); }

ST_C cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    if (!ev) return st_err(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&st_mu);
    int dead = ev->dead;
    ev->dead = 1; /* kept: a later use is reported, not a crash */
    pthread_mutex_unlock(&st_mu);
    if (dead) {
        st_violation("use-after-destroy", "cudaEventDestroy of an event destroyed before");
        return st_err(cudaErrorInvalidResourceHandle);
    }
    return cudaSuccess;
}

ST_C cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t h)
{
    st_clock_call();
    pthread_mutex_lock(&st_mu);
    st_init_locked();
    struct CUstream_st* s = st_stream_locked(h);
    if (!ev || ev->dead) {
        pthread_mutex_unlock(&st_mu);
        st_violation("use-after-destroy", "cudaEventRecord of a destroyed event");
        return st_err(cudaErrorInvalidResourceHandle);
    }
    if (ev->dev != s->dev) {
        pthread_mutex_unlock(&st_mu);
        st_violation("cross-device", "cudaEventRecord: an event of device %d recorded on a stream of device %d",
                     ev->dev, s->dev);
        return st_err(cudaErrorInvalidResourceHandle);
    }
    /* an empty operation, so that legacy-stream rules apply to the record too */
    st_push_locked(s, st_op_new("event record", NULL));
    ev->s = s, ev->target = s->enq;
    st_tc_unref(ev->tc);
    ev->tc = st_clock_target_locked(s);
    st_race_event_record_locked(ev, s);
    pthread_mutex_unlock(&st_mu);
    return cudaSuccess;
}

ST_C cudaError_t cudaStreamWaitEvent(cudaStream_t h, cudaEvent_t ev, unsigned flags)
{
    (void)flags;
    st_clock_call();
    pthread_mutex_lock(&st_mu);
    st_init_locked();
    struct CUstream_st* s = st_stream_locked(h);
    if (!ev || ev->dead) {
        pthread_mutex_unlock(&st_mu);
        st_violation("use-after-destroy", "cudaStreamWaitEvent on a destroyed event");
        return st_err(cudaErrorInvalidResourceHandle);
    }
    st_op* op = st_op_new("cudaStreamWaitEvent", NULL);
    if (ev->s) op->ws[op->nwait] = ev->s, op->wt[op->nwait++] = ev->target; /* captured now, as CUDA does */
    if (ev->s) st_race_wait_event_locked(op, ev), st_comp_wait_event_locked(op, ev);
    if (ev->s) st_clock_wait_event_locked(op, ev);
    st_push_locked(s, op);
    pthread_mutex_unlock(&st_mu);
    return cudaSuccess;
}

ST_C cudaError_t cudaEventQuery(cudaEvent_t ev)
{
    pthread_mutex_lock(&st_mu);
    if (!ev || ev->dead) {
        pthread_mutex_unlock(&st_mu);
        st_violation("use-after-destroy", "cudaEventQuery on a destroyed event");
        return st_err(cudaErrorInvalidResourceHandle);
    }
    int busy = ev->s && ev->s->done < ev->target;
    int dev = ev->dev;
    if (ev->s) st_count_poll_locked(ev, ev->s, ev->target);
    if (ev->s && !busy) st_seen_locked(ev->s, ev->target), st_seen_comp_locked(st_vc_ref(ev->cvc));
    if (!busy) st_clock_call(), st_clock_host_wait_locked(st_tc_ref(ev->tc));
    if (!busy) st_race_host_merge_locked(st_vc_ref(ev->vc));
    pthread_mutex_unlock(&st_mu);
    if (busy) return cudaErrorNotReady;
    int e = __atomic_load_n(&st_sticky[dev], __ATOMIC_SEQ_CST);
    return e ? st_err((cudaError_t)e) : cudaSuccess;
}

ST_C cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
    st_clock_call();
    pthread_mutex_lock(&st_mu);
    if (!ev || ev->dead) {
        pthread_mutex_unlock(&st_mu);
        st_violation("use-after-destroy", "cudaEventSynchronize on a destroyed event");
        return st_err(cudaErrorInvalidResourceHandle);
    }
    if (ev->s) st_count_sync_locked(ev->s, ev->target);
    struct st_vc* v = st_vc_ref(ev->vc);
    struct st_vc* cv = st_vc_ref(ev->cvc);
    /* (a record of ev meanwhile on another stream: seen within the 20 ms slice) */
    ST_WAIT_ON(ev->s ? &ev->s->progress : &st_cv, !ev->s || ev->s->done >= ev->target, "cudaEventSynchronize");
    st_clock_host_wait_locked(st_tc_ref(ev->tc));
    st_race_host_merge_locked(v);
    if (ev->s) st_seen_locked(ev->s, ev->target);
    st_seen_comp_locked(cv);
    pthread_mutex_unlock(&st_mu);
    return st_sticky_check();
}

/* The virtual time between two recorded events (vs_strict_clock.h: an event's
   time is its recorded position's end), in ms as CUDA gives it: a program's own
   timing code gets the modelled times (bench/gpu_calib.c). Not a wait: as
   CUDA, cudaErrorNotReady while either has not completed; an event never
   recorded or made with cudaEventDisableTiming is an invalid handle. */
ST_C cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b)
{
    if (!ms) return st_err(cudaErrorInvalidValue);
    pthread_mutex_lock(&st_mu);
    cudaError_t r = cudaSuccess;
    if (!a || !b || a->dead || b->dead || !a->tc || !b->tc || ((a->flags | b->flags) & cudaEventDisableTiming))
        r = cudaErrorInvalidResourceHandle;
    else if ((a->s && a->s->done < a->target) || (b->s && b->s->done < b->target) || !a->tc->set || !b->tc->set)
        r = cudaErrorNotReady;
    else *ms = (float)((b->tc->t - a->tc->t) * 1e3);
    pthread_mutex_unlock(&st_mu);
    return r == cudaSuccess ? r : r == cudaErrorNotReady ? r : st_err(r);
}

/* ---- copies ------------------------------------------------------------------- */

/* Cost-only mode's device bytes, carried in host memory by device and address
   (a device's entries sorted and disjoint): what copies, memsets and send/recvs
   of at most ST_CARRY bytes write, and small collectives' results (st_collective_locked).
   All else reads as zero: what kernels write (their written ranges drop what
   was carried), what large transfers write. So the ranks read the same
   control values (a checkpoint's agreement, a step's norm and skip). */
#define ST_CARRY 65536
typedef struct st_carry {
    const char* a;
    size_t n;
    char* v;
} st_carry;
typedef struct st_carry_set {
    st_carry* e;
    int n, cap;
} st_carry_set;
static st_carry_set st_carries[ST_MAXDEV];
static pthread_mutex_t st_carry_mu = PTHREAD_MUTEX_INITIALIZER;
static int st_is_dev(const void* p)
{
    const char* c = (const char*)p;
    return st_dbase && c >= st_dbase && c < st_dbase + st_arena;
}
/* the first of s's entries that ends after c (st_carry_mu held) */
static int st_carry_first(const st_carry_set* s, const char* c)
{
    int lo = 0, hi = s->n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (s->e[mid].a + s->e[mid].n <= c) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}
/* device dev's [a, a + n) now holds v (NULL, or all zero bytes: nothing carried) */
static void st_carry_put(int dev, const void* a, const void* v, size_t n)
{
    const char *c = (const char*)a, *end = c + n;
    if (!n || dev < 0 || dev >= ST_MAXDEV) return;
    size_t z = 0;
    while (v && z < n && !((const char*)v)[z]) z++;
    char* copy = v && z < n ? (char*)malloc(n) : NULL;
    if (copy) memcpy(copy, v, n);
    pthread_mutex_lock(&st_carry_mu);
    st_carry_set* s = &st_carries[dev];
    int i = st_carry_first(s, c), j = i, na = 0;
    while (j < s->n && s->e[j].a < end) j++;
    st_carry add[3]; /* what is left of the first and last entries cut, around the new one */
    int head = i < j && s->e[i].a < c;
    if (head) add[na].a = s->e[i].a, add[na].n = (size_t)(c - s->e[i].a), add[na++].v = s->e[i].v; /* (a prefix) */
    if (copy) add[na].a = c, add[na].n = n, add[na++].v = copy;
    if (i < j && s->e[j - 1].a + s->e[j - 1].n > end) {
        const st_carry* t = &s->e[j - 1];
        size_t tn = (size_t)(t->a + t->n - end);
        add[na].a = end, add[na].n = tn, add[na].v = (char*)malloc(tn);
        memcpy(add[na++].v, t->v + (end - t->a), tn);
    }
    for (int k = i; k < j; k++)
        if (k != i || !head) free(s->e[k].v);
    int m = s->n - (j - i) + na;
    if (m > s->cap) {
        s->cap = m > 2 * s->cap ? m : 2 * s->cap;
        s->e = (st_carry*)realloc(s->e, sizeof *s->e * (size_t)s->cap);
    }
    memmove(s->e + i + na, s->e + j, sizeof *s->e * (size_t)(s->n - j));
    memcpy(s->e + i, add, sizeof *add * (size_t)na);
    s->n = m;
    pthread_mutex_unlock(&st_carry_mu);
}
/* what device dev's [a, a + n) holds, into out (zeros where nothing is carried);
   out NULL: only whether anything is carried there */
static int st_carry_get(int dev, const void* a, void* out, size_t n)
{
    const char *c = (const char*)a, *end = c + n;
    int got = 0;
    if (out) memset(out, 0, n);
    if (dev < 0 || dev >= ST_MAXDEV) return 0;
    pthread_mutex_lock(&st_carry_mu);
    const st_carry_set* s = &st_carries[dev];
    for (int k = st_carry_first(s, c); k < s->n && s->e[k].a < end; k++) {
        const st_carry* x = &s->e[k];
        const char *lo = x->a > c ? x->a : c, *hi = x->a + x->n < end ? x->a + x->n : end;
        if (out) memcpy((char*)out + (lo - c), x->v + (lo - x->a), (size_t)(hi - lo));
        got = 1;
    }
    pthread_mutex_unlock(&st_carry_mu);
    return got;
}
/* n bytes at p (device dev's, or host memory) into out; whether any was known */
static int st_carry_read(int dev, const void* p, void* out, size_t n)
{
    if (st_is_dev(p)) return st_carry_get(dev, p, out, n);
    memcpy(out, p, n);
    return 1;
}
/* v (NULL: zeros) into n bytes at p (device dev's, or host memory: pinned, a
   collective's; zeros not written past ST_CARRY bytes, as st_carry_move) */
static void st_carry_write(int dev, void* p, const void* v, size_t n)
{
    if (st_is_dev(p)) st_carry_put(dev, p, v, n);
    else if (v) memcpy(p, v, n);
    else if (n <= ST_CARRY) memset(p, 0, n);
}
/* A transfer of n bytes from src (device sdev's or host; its bytes staged when
   not NULL) to dst (device ddev's or host) in cost-only mode. A large one to the
   device leaves zeros; to the host, what is carried of its source with zeros
   between, or, when nothing is, nothing (a large read of what kernels wrote
   would back its host buffer: data, not a control value). */
static void st_carry_move(void* dst, int ddev, const void* src, int sdev, const char* staged, size_t n)
{
    if (n > ST_CARRY && (st_is_dev(dst) || staged || !st_is_dev(src) || !st_carry_get(sdev, src, NULL, n))) {
        if (st_is_dev(dst)) st_carry_put(ddev, dst, NULL, n);
        return;
    }
    char* tmp = (char*)malloc(n + 1);
    if (staged) memcpy(tmp, staged, n);
    else st_carry_read(sdev, src, tmp, n);
    st_carry_write(ddev, dst, tmp, n);
    free(tmp);
}
/* A kernel about to run (st_mu held): the ranges it writes are unknown now. */
static void st_ksig_ranges(const st_ksig* sig, void** a, dim3 grid, size_t* off, size_t* bytes);
static void st_carry_kernel_locked(struct CUstream_st* s, st_op* op)
{
    const st_ksig* sig = op->sig;
    void* a[16];
    size_t off[16], bytes[16];
    st_op_args(op, a);
    st_ksig_ranges(sig, a, op->grid, off, bytes);
    for (int i = 0; i < sig->nargs; i++) {
        char* p = (sig->wr >> i & 1) ? *(char**)a[i] : NULL;
        st_alloc* al = p ? st_find_locked(p, 1) : NULL;
        if (!al || !st_is_dev(p)) continue;
        size_t from = (size_t)(p - st_dbase) + off[i], to = al->off + al->n;
        if (bytes[i] != (size_t)-1 && from + bytes[i] < to) to = from + bytes[i];
        if (from < to) st_carry_put(s->dev, st_dbase + from, NULL, to - from);
    }
}

static void st_copy_run(struct CUstream_st* s, st_op* op)
{
    (void)s;
    if (!st_cost_only) memcpy(st_sh(op->dst), op->staged ? op->staged : st_sh(op->src), op->n);
    else st_carry_move(op->dst, op->ddev, op->src, op->sdev, op->staged, op->n);
}
static void st_set_run(struct CUstream_st* s, st_op* op)
{
    (void)s;
    if (!st_cost_only) {
        memset(st_sh(op->dst), op->val, op->n);
    } else if (op->n <= ST_CARRY && (op->val & 0xff)) {
        char* v = (char*)malloc(op->n);
        memset(v, op->val, op->n);
        st_carry_put(op->ddev, op->dst, v, op->n);
        free(v);
    } else {
        st_carry_put(op->ddev, op->dst, NULL, op->n); /* zeros (a large non-zero memset: unknown) */
    }
}

/* Checks one side of a copy: host memory, or n bytes inside one live device
   allocation. Returns its kind, or -1 after reporting. */
static int st_copy_side(const void* p, size_t n, const char* fn, const char* side)
{
    int dev = 0, w = st_where(p, n, &dev);
    if (w == ST_PAST_END || w == ST_FREED) {
        st_violation("device-bounds", "%s: %s %p + %zu bytes is %s", fn, side, p, n, st_where_names[w]);
        return -1;
    }
    return w;
}

static cudaError_t st_memcpy(void* dst, const void* src, size_t n, enum cudaMemcpyKind k, cudaStream_t h, int async)
{
    const char* fn = async ? "cudaMemcpyAsync" : "cudaMemcpy";
    if (!n) return cudaSuccess;
    st_init();
    st_clock_call();
    int wd = st_copy_side(dst, n, fn, "destination"), ws = st_copy_side(src, n, fn, "source");
    if (wd < 0 || ws < 0) return st_err(cudaErrorInvalidValue);
    int ddev = wd == ST_DEV, sdev = ws == ST_DEV;
    if ((k == cudaMemcpyHostToDevice && (!ddev || sdev)) || (k == cudaMemcpyDeviceToHost && (ddev || !sdev)) ||
        (k == cudaMemcpyDeviceToDevice && (!ddev || !sdev)) || (k == cudaMemcpyHostToHost && (ddev || sdev))) {
        st_violation("copy-kind", "%s: kind %d, but the destination is %s and the source %s", fn, (int)k,
                     st_where_names[wd], st_where_names[ws]);
        return st_err(cudaErrorInvalidValue);
    }
    pthread_mutex_lock(&st_mu);
    struct CUstream_st* s = st_stream_locked(async ? h : NULL);
    if (ddev && sdev) st_count.d2d++;
    else if (ddev) st_count.h2d++;
    else if (sdev) st_count.d2h++;
    st_op* op = st_op_new(fn, st_copy_run);
    op->dst = dst, op->src = (void*)(uintptr_t)src, op->n = n;
    int ddv = -1, sdv = -1;
    if (ddev) st_where_locked(dst, 1, &ddv);
    if (sdev) st_where_locked(src, 1, &sdv);
    op->ddev = ddv, op->sdev = sdv;
    st_clock_copy_locked(op, ddev && sdev ? VS_STRICT_D2D : ddev ? VS_STRICT_H2D : VS_STRICT_D2H, ddv, sdv);
    int wait = 0;
    if (!ddev && !sdev) {
        pthread_mutex_unlock(&st_mu);
        memcpy(dst, src, n);
        free(op);
        return cudaSuccess;
    }
    if (ddev && ws == ST_HOST) {
        /* pageable to device: staged now; the DMA lands when the stream gets there
           (cudaMemcpy too returns before it lands) */
        op->staged = st_cost_only && n > ST_CARRY ? NULL : (char*)malloc(n);
        if (op->staged) memcpy(op->staged, src, n);
        if (!async) {
            long t = s->enq; /* "a stream sync is performed before the copy is initiated" */
            st_count_sync_locked(s, t);
            struct st_vc* v = st_race_target_locked(s);
            struct st_vc* cv = st_comp_target_locked(s);
            st_tcell* tc = st_clock_target_locked(s);
            ST_WAIT_ON(&s->progress, s->done >= t, "cudaMemcpy's stream sync");
            st_clock_host_wait_locked(tc);
            st_race_host_merge_locked(v);
            st_seen_locked(s, t);
            st_seen_comp_locked(cv);
        }
    } else if (!async || (sdev && wd == ST_HOST)) {
        wait = 1; /* synchronous, or device to pageable: returns when done */
    }
    st_push_locked(s, op);
    if (wait) {
        long t = s->enq;
        st_count_sync_locked(s, t);
        struct st_vc* v = st_race_target_locked(s);
        struct st_vc* cv = st_comp_target_locked(s);
        st_tcell* tc = st_clock_target_locked(s);
        ST_WAIT_ON(&s->progress, s->done >= t, fn);
        st_clock_host_wait_locked(tc);
        st_race_host_merge_locked(v);
        st_seen_locked(s, t);
        st_seen_comp_locked(cv);
    }
    pthread_mutex_unlock(&st_mu);
    return st_sticky_check();
}

ST_C cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, enum cudaMemcpyKind k)
{
    return st_memcpy(dst, src, n, k, NULL, 0);
}
ST_C cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, enum cudaMemcpyKind k, cudaStream_t h)
{
    return st_memcpy(dst, src, n, k, h, 1);
}

static cudaError_t st_memset(void* p, int v, size_t n, cudaStream_t h, const char* fn)
{
    if (!n) return cudaSuccess;
    st_init();
    st_clock_call();
    int w = st_copy_side(p, n, fn, "destination");
    if (w < 0) return st_err(cudaErrorInvalidValue);
    if (w != ST_DEV) {
        st_violation("host-pointer", "%s: %p is %s, not device memory", fn, p, st_where_names[w]);
        return st_err(cudaErrorInvalidValue);
    }
    pthread_mutex_lock(&st_mu);
    st_op* op = st_op_new(fn, st_set_run);
    op->dst = p, op->n = n, op->val = v, op->ddev = -1;
    st_where_locked(p, 1, &op->ddev);
    st_clock_copy_locked(op, VS_STRICT_MEMSET, -1, -1);
    st_push_locked(st_stream_locked(h), op); /* cudaMemset too is asynchronous for device memory */
    pthread_mutex_unlock(&st_mu);
    return cudaSuccess;
}
ST_C cudaError_t cudaMemset(void* p, int v, size_t n) { return st_memset(p, v, n, NULL, "cudaMemset"); }
ST_C cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t h)
{
    return st_memset(p, v, n, h, "cudaMemsetAsync");
}

/* ---- host functions ---------------------------------------------------------------- */

static void st_host_fn_run(struct CUstream_st* s, st_op* op)
{
    (void)s;
    op->host_fn(op->host_arg);
}

/* fn(arg) on the stream's worker when the stream gets there (it may touch host and
   pinned memory only, and call no CUDA function, as on the hardware); counted as a
   kernel launch (tests use it as their device compute). */
ST_C cudaError_t cudaLaunchHostFunc(cudaStream_t h, cudaHostFn_t fn, void* arg)
{
    st_init();
    if (!fn) return st_err(cudaErrorInvalidValue);
    st_clock_call();
    st_op* op = st_op_new("cudaLaunchHostFunc", st_host_fn_run);
    op->host_fn = fn, op->host_arg = arg;
    pthread_mutex_lock(&st_mu);
    st_clock_host_fn_locked(op);
    struct CUstream_st* s = st_stream_locked(h);
    if (s->dev != st_cur_dev) {
        pthread_mutex_unlock(&st_mu);
        free(op);
        st_violation("cross-device", "cudaLaunchHostFunc on a stream of device %d while the current device is %d",
                     s->dev, st_cur_dev);
        return st_err(cudaErrorInvalidResourceHandle);
    }
    st_count.launches++;
    st_push_locked(s, op);
    pthread_mutex_unlock(&st_mu);
    return cudaSuccess;
}

/* ---- kernels -------------------------------------------------------------------- */

static const st_ksig* st_ksig_find(const char* name);
static void st_ksig_run(const st_ksig* sig, void** a, dim3 grid, dim3 block);

ST_C cudaError_t cudaLibraryLoadData(cudaLibrary_t* lib, const void* code, enum cudaJitOption* jo, void** jv, unsigned njo,
                                    enum cudaLibraryOption* lo, void** lv, unsigned nlo)
{
    (void)jo, (void)jv, (void)njo, (void)lo, (void)lv, (void)nlo;
    st_init();
    /* a cubin (an ELF image: the SM in e_flags bits 8-15, NVRTC 12.8+'s layout) or
       PTX text (".target sm_XY"); which devices run it is checked at launch */
    int arch = 0, ptx = 0;
    const char* t;
    if (code && !memcmp(code, "\177ELF", 4)) {
        unsigned flags;
        memcpy(&flags, (const char*)code + 48, 4); /* Elf64_Ehdr.e_flags */
        arch = (int)(flags >> 8 & 0xff);
    } else if (code && strstr((const char*)code, ".version") && (t = strstr((const char*)code, ".target sm_"))) {
        arch = atoi(t + 11), ptx = 1;
    }
    if (arch <= 0) return st_err(cudaErrorInvalidKernelImage);
    struct CUlib_st* l = (struct CUlib_st*)calloc(1, sizeof(struct CUlib_st));
    l->arch = arch, l->ptx = ptx;
    pthread_mutex_lock(&st_mu);
    st_count.libraries++;
    st_count.ptx_libraries += ptx;
    l->next = st_libs, st_libs = l;
    pthread_mutex_unlock(&st_mu);
    *lib = l;
    return cudaSuccess;
}
ST_C cudaError_t cudaLibraryGetKernel(cudaKernel_t* k, cudaLibrary_t lib, const char* name)
{
    if (!lib || lib->dead) return st_err(cudaErrorInvalidResourceHandle);
    const st_ksig* sig = st_ksig_find(name);
    if (!sig) return st_err(cudaErrorSymbolNotFound);
    struct CUkern_st* kh = (struct CUkern_st*)calloc(1, sizeof(struct CUkern_st));
    kh->sig = sig, kh->lib = lib;
    pthread_mutex_lock(&st_mu);
    kh->next = st_kerns, st_kerns = kh;
    pthread_mutex_unlock(&st_mu);
    *k = kh;
    return cudaSuccess;
}
ST_C cudaError_t cudaLibraryUnload(cudaLibrary_t lib)
{
    if (!lib || lib->dead) {
        st_violation("use-after-destroy", "cudaLibraryUnload twice");
        return st_err(cudaErrorInvalidResourceHandle);
    }
    lib->dead = 1;
    return cudaSuccess;
}

static void st_kernel_run(struct CUstream_st* s, st_op* op)
{
    if (op->bad) {
        __atomic_store_n(&st_sticky[s->dev], (int)cudaErrorIllegalAddress, __ATOMIC_SEQ_CST);
        return;
    }
    void* a[16];
    st_op_args(op, a);
    if (!st_cost_only) st_ksig_run(op->sig, a, op->grid, op->block);
}

ST_C cudaError_t cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void** args, size_t shmem, cudaStream_t h)
{
    st_init();
    st_clock_call();
    cudaError_t se = st_sticky_check();
    if (se) return se;
    const struct CUkern_st* kh = (const struct CUkern_st*)func;
    const st_ksig* sig = kh ? kh->sig : NULL;
    if (!sig || !st_ksig_find(sig->name)) return st_err(cudaErrorInvalidDeviceFunction);
    if (kh->lib->dead) {
        st_violation("use-after-destroy", "%s launched from an unloaded library", sig->name);
        return st_err(cudaErrorInvalidResourceHandle);
    }
    /* a cubin runs on its SM's major with an equal or later minor; PTX on its
       architecture and every later one (the driver compiles it) */
    int cc = st_cc[st_cur_dev], la = kh->lib->arch;
    if (kh->lib->ptx ? la > cc : (la / 10 != cc / 10 || la % 10 > cc % 10)) {
        st_violation("no-kernel-image", "%s: a %s for %s_%d launched on device %d of compute capability %d.%d",
                     sig->name, kh->lib->ptx ? "PTX" : "cubin", kh->lib->ptx ? "compute" : "sm", la, st_cur_dev,
                     cc / 10, cc % 10);
        return st_err(cudaErrorNoKernelImageForDevice);
    }
    if (shmem > 48 * 1024 || block.x * block.y * block.z > 1024 || !grid.x || !block.x)
        return st_err(cudaErrorInvalidConfiguration);
    st_op* op = st_op_new(sig->name, st_kernel_run);
    op->sig = sig, op->grid = grid, op->block = block;
    pthread_mutex_lock(&st_mu);
    struct CUstream_st* s = st_stream_locked(h);
    if (s->dev != st_cur_dev) {
        pthread_mutex_unlock(&st_mu);
        free(op);
        st_violation("cross-device", "%s launched on a stream of device %d while the current device is %d", sig->name,
                     s->dev, st_cur_dev);
        return st_err(cudaErrorInvalidResourceHandle);
    }
    int off = 0;
    for (int i = 0; i < sig->nargs; i++) {
        char* slot = op->args + off;
        if (off + sig->size[i] > (int)sizeof op->args) { /* the stand-in's own limit */
            fprintf(stderr, "vs_strict: %s: arguments larger than %zu bytes\n", sig->name, sizeof op->args);
            _exit(85);
        }
        memcpy(slot, args[i], (size_t)sig->size[i]); /* arguments are copied at launch */
        if (sig->ptr >> i & 1) {
            void* p;
            memcpy(&p, slot, sizeof p);
            int dev = 0, w = p ? st_where_locked(p, 1, &dev) : ST_DEV;
            if (p && (w == ST_HOST || w == ST_FREED)) {
                pthread_mutex_unlock(&st_mu);
                st_violation(w == ST_HOST ? "host-pointer" : "device-bounds",
                             "%s: argument %d (%p) is %s: the kernel faults with an illegal address", sig->name, i, p,
                             st_where_names[w]);
                pthread_mutex_lock(&st_mu);
                op->bad = 1;
            } else if (p && w != ST_PINNED && dev != s->dev) {
                pthread_mutex_unlock(&st_mu);
                st_violation("cross-device", "%s on device %d: argument %d (%p) is memory of device %d", sig->name,
                             s->dev, i, p, dev);
                pthread_mutex_lock(&st_mu);
                op->bad = 1;
            }
            p = st_sh(p);
            memcpy(slot, &p, sizeof p);
        }
        off += (sig->size[i] + 7) & ~7;
    }
    st_clock_kernel_locked(op);
    st_count.launches++;
    st_push_locked(s, op);
    pthread_mutex_unlock(&st_mu);
    return cudaSuccess;
}

/* The kernel table: the library's kernel texts (vescale_mesh.h >>kernels,
   vescale_ddp.h, vescale.h), a trainer's (vs_strict_add_text), each kernel from
   its declaration (its argument letters: sizes, pointers, the ones written; its
   cost function: the bytes each pointer touches, flops and bytes for the clock)
   and run as its text's host build, which follows the device's block
   decomposition; then a test's own st_ksig tables (vs_strict_add_kernels). */
typedef struct st_kent { /* a kernel of a text: its st_ksig first (op->sig points at it) */
    st_ksig s;
    const vs_kernel_text* text;
    int ki;
} st_kent;
static void st_kent_run(void** a, dim3 g, dim3 b) { (void)a, (void)g, (void)b; } /* marks an st_kent */
static st_kent* st_kent_of(const st_ksig* sig) { return sig && sig->run == st_kent_run ? (st_kent*)(void*)sig : NULL; }

/* t's kernels as table entries (kept: the kernel handles point at them) */
static st_kent* st_kents_make(const vs_kernel_text* t)
{
    st_kent* e = (st_kent*)calloc((size_t)t->count, sizeof(st_kent));
    for (int k = 0; e && k < t->count; k++) {
        const vs_kernel_decl* d = &t->kernels[k];
        st_ksig* s = &e[k].s;
        int n = (int)strlen(d->args);
        if (n > 16 || !t->host) {
            fprintf(stderr, "vs_strict: %s: %s\n", d->name, n > 16 ? "more than 16 arguments" : "its text has no host build");
            _exit(85);
        }
        s->name = d->name, s->nargs = n, s->run = st_kent_run;
        for (int i = 0; i < n; i++) {
            char c = d->args[i];
            s->size[i] = c == 'w' || c == 'r' ? (int)sizeof(void*) : c == 'i' ? (int)sizeof(int)
                       : c == 'f' ? (int)sizeof(float) : c == 's' ? d->struct_size : 8;
            if (c == 'w' || c == 'r') s->ptr |= 1u << i;
            if (c == 'w') s->wr |= 1u << i;
        }
        e[k].text = t, e[k].ki = k;
    }
    return e;
}

static pthread_once_t st_kents_once = PTHREAD_ONCE_INIT;
static const vs_kernel_text* st_ktexts[20];
static st_kent* st_kents[20];
static int st_nktexts, st_nlib_texts;
static void st_kents_lib(void)
{
#ifdef _VS_MESH_CUDA
    st_ktexts[st_nktexts++] = &_vs_mk_text;
#endif
#if defined(VESCALE_DDP_INCLUDED) && defined(_VS_DDP_CUDA)
    st_ktexts[st_nktexts++] = &_vs_ddp_text;
#endif
#if defined(VESCALE_HL_IMPLEMENTED) && defined(VESCALE_NCCL)
    st_ktexts[st_nktexts++] = &_vs_hl_text;
#endif
    st_nlib_texts = st_nktexts;
    for (int i = 0; i < st_nktexts; i++) st_kents[i] = st_kents_make(st_ktexts[i]);
}

ST_C void vs_strict_add_text(const vs_kernel_text* t)
{
    pthread_once(&st_kents_once, st_kents_lib);
    pthread_mutex_lock(&st_mu);
    int i = 0;
    while (i < st_nktexts && st_ktexts[i] != t) i++;
    if (i == st_nktexts && i < st_nlib_texts + 16) {
        st_ktexts[i] = t, st_kents[i] = st_kents_make(t);
        __atomic_store_n(&st_nktexts, i + 1, __ATOMIC_RELEASE);
    } else if (i == st_nktexts) {
        fprintf(stderr, "vs_strict: vs_strict_add_text(%s): more than 16 texts\n", t->name);
    }
    pthread_mutex_unlock(&st_mu);
}

static void st_ksig_run(const st_ksig* sig, void** a, dim3 grid, dim3 block)
{
    st_kent* e = st_kent_of(sig);
    if (e) e->text->host(e->ki, a);
    else sig->run(a, grid, block);
}

/* the byte offset and count each pointer argument touches (count (size_t)-1:
   to its allocation's end): the declaration's, or the st_ksig's range function */
static void st_ksig_ranges(const st_ksig* sig, void** a, dim3 grid, size_t* off, size_t* bytes)
{
    st_kent* e = st_kent_of(sig);
    for (int i = 0; i < sig->nargs; i++) off[i] = 0, bytes[i] = (size_t)-1;
    if (e && e->text->kernels[e->ki].cost) {
        vs_kernel_cost c;
        vs_kernel_cost_get(&e->text->kernels[e->ki], a, &c);
        for (int i = 0; i < sig->nargs; i++)
            if (c.len[i] >= 0) off[i] = (size_t)c.off[i], bytes[i] = (size_t)c.len[i];
    } else if (!e && sig->range) {
        sig->range(a, grid, off, bytes);
    }
}

/* the declaration's cost (1), or none declared (0) */
static int st_ksig_cost(const st_ksig* sig, void** a, vs_strict_kcost* k)
{
    st_kent* e = st_kent_of(sig);
    if (!e || !e->text->kernels[e->ki].cost) return 0;
    vs_kernel_cost c;
    vs_kernel_cost_get(&e->text->kernels[e->ki], a, &c);
    k->flops = c.flops, k->bytes = c.bytes;
    k->dtype = c.dtype == VS_BF16 ? VS_STRICT_BF16 : c.dtype == VS_F16 ? VS_STRICT_F16 : VS_STRICT_F32;
    return 1;
}

/* A test's own kernels beside the library's (vs_strict_add_kernels, before the
   first cudaLibraryGetKernel): a table ending in a NULL name, kept by pointer. */
static const st_ksig* st_ksigs_more;
ST_C void vs_strict_add_kernels(const st_ksig* table) { st_ksigs_more = table; }

static const st_ksig* st_ksig_find(const char* name)
{
    if (!name) return NULL;
    pthread_once(&st_kents_once, st_kents_lib);
    int nt = __atomic_load_n(&st_nktexts, __ATOMIC_ACQUIRE);
    for (int t = 0; t < nt; t++)
        for (int k = 0; st_kents[t] && k < st_ktexts[t]->count; k++)
            if (name == st_kents[t][k].s.name || !strcmp(name, st_kents[t][k].s.name)) return &st_kents[t][k].s;
    for (int i = 0; st_ksigs_more && st_ksigs_more[i].name; i++)
        if (name == st_ksigs_more[i].name || !strcmp(name, st_ksigs_more[i].name)) return &st_ksigs_more[i];
    return NULL;
}

#include "vs_strict_nccl.h"
#include "vs_strict_race.h" /* its NCCL part */

#endif /* VS_STRICT_LINKED */

#endif
