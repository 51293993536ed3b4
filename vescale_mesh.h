/* vescale_mesh.h - v0.1.0 (2026-11-23) - the base of vescale: results, hooks, dtypes,
   transports (threads, MPI, NCCL), bootstrap and the device mesh ("one mesh fits all").

   Do this:
       #define VESCALE_IMPLEMENTATION      (or VESCALE_MESH_IMPLEMENTATION)
   before you include this file in *one* C or C++ file to create the
   implementation. Every other file just includes it.

       #define VESCALE_MESH_IMPLEMENTATION
       #include "vescale_mesh.h"

   Step by step (threads transport: 8 ranks as threads of this process):

       static int train(vs_world* w, void* arg) {
           (void)arg;
           vs_mesh* mesh;
           vs_mesh_init(w, &(vs_mesh_desc){ .shape = {2, 2, 2} }, &mesh); // PP,DP,TP
           vs_mesh* dp;
           vs_mesh_submesh(mesh, "DP", &dp);          // collective the first time
           float g[1024] = {0};
           vs_all_reduce(vs_mesh_comm(dp), g, g, 1024, VS_F32, VS_OP_AVG, NULL);
           vs_mesh_free(mesh);
           return 0;
       }
       int main(void) { return vs_launch(8, train, NULL) == VS_OK ? 0 : 1; }

   Macros read (all optional). Transports:
       VESCALE_MPI          compile the MPI transport (link -lmpi, or use mpicc)
       VESCALE_NCCL         compile the NCCL transport (CUDA device buffers;
                            link -lcudart -lnccl -lnvrtc: NVRTC compiles the
                            layout/TP/init kernels at run time, see >>kernels)
       VESCALE_NVRTC        build only NVRTC's half of the device kernels (their text
                            compiled by vs_nvrtc_compile; link -lnvrtc) without the
                            NCCL transport: for offline checks of the kernels
                            (VESCALE_NCCL implies it)

   Linkage and checks:
       VESCALE_STATIC       every function `static inline`, nothing exported; implies
                            VESCALE_IMPLEMENTATION (define it alone, before the
                            include, in each file): for single-translation-unit
                            builds. Each TU then has its own implementation; never
                            pass a handle between TUs.
       VS_API               linkage of public functions (default: extern, or
                            static inline under VESCALE_STATIC)
       VS_ASSERT(c)         internal-invariant check (default: assert(c))

   Copies on the threads transport:
       VESCALE_NT_MIN       buffers of at least this many bytes are written with
                            non-temporal stores (default 4 MiB)
       VESCALE_NO_SIMD      no SSE2 intrinsics (plain memcpy everywhere)

   Link: -lpthread -lm always; the MPI library with VESCALE_MPI (mpicc, or -lmpi);
   -lcudart -lnccl -lnvrtc with VESCALE_NCCL.
   Installed (make install): pkg-config --cflags --libs vescale | vescale-mpi |
   vescale-nccl; CMake find_package(vescale [COMPONENTS MPI NCCL]) gives
   vescale::vescale / vescale::mpi / vescale::nccl.

   Platforms: POSIX.1-2008 with pthreads (tested on Linux/glibc), a C99 or C++11
   compiler; VESCALE_MPI: MPI-3 with MPI_THREAD_MULTIPLE; VESCALE_NCCL: CUDA 12+
   (cudaLibraryLoadData) and NCCL 2.18+ (ncclCommSplit).
   Feature macros: included first with none defined, the implementation defines
   _POSIX_C_SOURCE 200809L (it needs POSIX clocks and sockets). glibc then hides
   what POSIX does not name, M_PI among them: build with -D_DEFAULT_SOURCE (or
   -D_GNU_SOURCE), or define M_PI yourself, if your file needs those.

   From C++ (g++ has no compound literals): vs_mesh_desc md = {}; md.shape[0] = 2;
   md.shape[1] = 2; vs_mesh_init(w, &md, &mesh); or C++20 vs_mesh_desc md{ .shape =
   {2, 2} }; (g++ -Wextra then needs -Wno-missing-field-initializers).

   Environment read (only when the corresponding desc field is left zero).
   Logging, timeouts, the transport:
       VESCALE_LOG=off|error|warn|info|debug  log level (default: warn: warnings and a failed
                                           job's cause print; see "Faults" on the errors
                                           functions return)
       VESCALE_TIMEOUT=<seconds>|inf|0     default communication timeout (default 300);
                                           inf or 0: no timeout (wait forever)
       VESCALE_TRANSPORT=threads|mpi|nccl  transport for vs_world_init (default: mpi
                                           when compiled in, else nccl)
       VESCALE_DEBUG=desync,params         a list of debug modes (vs_world_desc.debug,
                                           vs_launch_desc.debug;
                                           vs_debug_modes parses them): desync,
                                           MPI: check every collective's arguments across
                                           ranks (see vs_world_abort); params: DDP
                                           (vescale_ddp.h, vs_ddp_wait_params)

   Rendezvous (NCCL):
       VESCALE_RUN_ID (or TORCHELASTIC_RUN_ID)  a per-job secret for the NCCL TCP
                                           and file rendezvous (see _vs_tcp_bcast)
       VESCALE_INIT_FILE=<path>            NCCL without MPI: the rendezvous through
                                           a shared file system (vs_world_desc.init_file)

   Elastic jobs (>>elastic):
       VESCALE_ELASTIC_DIR=<dir>           NCCL jobs of processes: survive a rank
         or tcp://host:port                (vs_world_desc.elastic_dir; >>elastic;
                                           tcp: a vs_lighthouse's address)
       VESCALE_ELASTIC_JOIN=0|1            1: this process replaces a failed rank
                                           (vs_world_desc.join; >>elastic)
       VESCALE_LIGHTHOUSE_TOKEN=<secret>   a lighthouse's shared token: ranks sign
                                           with it (vs_world_desc.elastic_token), a
                                           lighthouse checks it (vs_lighthouse_desc.token)

   Launchers (vs_bootstrap_from_env):
       RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT   (torchrun style)
       SLURM_PROCID SLURM_NTASKS SLURM_LOCALID              (srun)
       OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK (mpirun)
   A malformed value ("abc", "5s", a level of 99) is an error naming the variable,
   returned by vs_launch / vs_world_init; it is never silently taken as the default.

   Topics (grep the markers):
       // >>base       results, per-thread error message, version
       // >>hooks      allocator, logger, assert
       // >>dtype      dtypes and reduction ops
       // >>comm       the communicator interface: collectives, p2p, groups, async work

       // >>threads    the threads transport (vs_launch)
       // >>mpi        the MPI transport
       // >>nccl       the NCCL transport
       // >>bootstrap  world init from launcher environment, TCP and file rendezvous

       // >>mesh       the device mesh
       // >>elastic    failure as a normal event: shrink, grow, replacement ranks
       // >>lighthouse the store served over TCP, for ranks that share no directory

       // >>kernels    the layout/TP/init kernels, host C and NVRTC from one text;
                       vs_nvrtc_compile; the kernel vocabulary the parts and a
                       trainer's own kernels share (VS_MK* words, each kernel
                       declared once: vs_kernel_decl, its arguments and cost;
                       vs_kernels_get: compiled once per process and architecture)
       // >>layout     placements, local shards, redistribute
       // >>tp         Megatron TP/SP regions, vocab-parallel embedding and loss
       // >>init       sharding-invariant initialization (Philox4x32-10)

   Implementation only:
       // >>time       clocks, deadlines, spinning, condition variables on CLOCK_MONOTONIC
       // >>transports one table of operations per transport (see the checklists)
       // >>store      an elastic job's store: a directory or a lighthouse, one table each
       // >>layout-device  redistribute on device buffers
   A public function is declared and defined under the same marker
   (tests/check_markers.sh checks it).

   Adding a transport:
   - one section with its operations;
   - its table in >>transports, filled by member name (struct _vs_transport_ops
     says what each member does; the threads transport is the reference),
     world_init and reform included (vs_launch for in-process ranks);
   - its case in _vs_transport_of.
   Nothing else above the transport asks which transport it runs on.

   Adding a collective:
   - an X(...) line in _VS_OP_KINDS, its public entry point (>>comm, filled by
     _vs_op_make);
   - its match rules in _vs_t_match (threads) and the MPI fingerprint;
   - its data movement in each transport's exec/submit (_vs_t_collective,
     _vs_mpi_start, _vs_nccl_launch); a test in test_collectives.

   Semantics shared by every transport
   -----------------------------------
   - A communicator (vs_comm) is a per-rank handle. Collectives must be called by
     every rank of the communicator in the same order with matching arguments.
     Operations on one communicator complete in the order they were issued
     (stream order), whether blocking or asynchronous.
   - Blocking calls (work == NULL) return when the operation is complete on this
     rank. Passing a vs_work** makes the call asynchronous: it returns at once and
     the operation progresses in the background (a progress thread on the threads
     and MPI transports, the CUDA stream on NCCL: the call returns once NCCL has
     enqueued it, without waiting for the GPU or a peer; only an uneven
     reduce-scatter that outgrows the communicator's scratch first waits for
     its stream, once); vs_wait() completes it. Buffers must stay valid and
     untouched until then.
   - Root-only buffers: broadcast reads `send` on the root only and reduce writes
     `recv` on the root only; other ranks may pass NULL there.
   - In-place: all-reduce, reduce (on the root) and broadcast accept send == recv; all-gather accepts
     send == recv + rank*count; reduce-scatter accepts recv == send + rank*count
     (the NCCL rules). All-to-all is never in place.
   - Point-to-point: a send completes only once the matching recv is posted (no
     buffering, as NCCL). Wrap exchanges in vs_group_start/vs_group_end.
   - A peer that does not arrive within the timeout gives VS_ERR_TIMEOUT; the
     communicator is then aborted and later calls give VS_ERR_ABORTED. Timeouts
     are seconds on a steady clock (CLOCK_MONOTONIC); 0 or INFINITY in
     vs_comm_set_timeout, and inf or 0 in VESCALE_TIMEOUT, mean no timeout.
   - A handle (world, comm, mesh) is used by one thread at a time.

   Faults: fail-fast, and errors that say who and where
   -----------------------------------------------------
   - Every collective carries a per-communicator sequence number and a
     fingerprint (kind, count, dtype, op, root). Ranks whose calls differ all get
     VS_ERR_MISMATCH naming each distinct call with its ranks, group and world:
       "collective mismatch on DP group [0,2] of mesh (DP=2, TP=2): ranks 0, 1, 3
        (world 0, 1, 3) called all_reduce #10 (f32 x 4, sum); rank 2 (world 2)
        called barrier #10"
     Calls are paired by order, as in NCCL: a rank that skips one of several
     identical calls is seen at its first call that differs, or when it returns.
   - Threads transport (vs_launch): the first fault ends the job. A rank that
     returns an error, returns while peers wait on it, calls vs_comm_abort, or
     times out aborts every communicator of the job, so every rank blocked
     anywhere gets VS_ERR_ABORTED at once (well under 100 ms), with a message
     naming the cause; vs_launch returns the cause's own result and message.
   - The cause is what users see. A rank whose own call failed is the cause;
     what the abort makes every other rank return is a consequence that names
     the origin's world rank and its own words. A layer callback of the
     pipeline that fails on world rank 5 (the engine aborts with
     vs_comm_abort_with):

       rank 5:   VS_ERR_INVALID "vs_train_step (step 1): vs_pipe_run: stage 1 at
                 instruction 5 (F1.1): unit "h.1.attn" forward, microbatch 1: ..."
       others:   VS_ERR_ABORTED "...: job aborted: world rank 5 failed
                 (VS_ERR_INVALID): vs_pipe_run: stage 1 at instruction 5 (F1.1): ..."
       vs_launch: VS_ERR_INVALID and rank 5's message.

   - Two ranks that fail at once: the first recorded is the cause, everywhere.
     MPI: the abort notice carries the origin and its message to every rank.
   - Jobs are independent: one job's failure never touches another's.
   - A rank's function must complete (vs_wait) its asynchronous work before it
     returns: once it has returned, peers waiting on it treat it as gone.
   - A timeout names the missing ranks (group and world), the communicator and
     the operation with its sequence number.
   - NCCL in a vs_launch job (one process, a thread per GPU): the same
     fail-fast; every NCCL wait and vs_test also watches the job, so a rank that
     fails, returns an error or calls vs_comm_abort ends the others' waits at once
     (their communicators are aborted) with the cause named. NCCL across
     processes: ncclCommAbort reaches only the caller, so the other ranks end at
     their deadline (VS_ERR_TIMEOUT) or on NCCL's own asynchronous error. MPI:
     see the >>mpi notes on what vs_comm_abort reaches.
   - Every error a function returns is logged once at warn, with the rank, when
     the log level (VESCALE_LOG or the desc's) is warn or more verbose and was
     asked for (VESCALE_LOG set, a logger given, or a desc level other than
     warn); by default (nothing set: warn) they are not, the caller has them. A
     job's cause is logged once at error; the consequences (errors that report
     another rank's failure) at info.

   Getters
   -------
   Functions that return a value instead of a vs_result (vs_comm_rank,
   vs_world_timeout, vs_mesh_comm, vs_ddp_num_params, ...) share one rule: on a
   NULL, freed or otherwise bad handle they set vs_last_error() and return their
   type's error value: a negative vs_result for ints (VS_ERR_NULL, VS_ERR_STATE for
   a freed communicator), NULL for pointers, NaN for doubles, 0 (DEFAULT/INVALID)
   for enums. Freeing NULL is VS_OK everywhere.

   Lifetimes
   ---------
   - world: freed last (vs_launch frees each rank's). comm from vs_comm_split:
     vs_comm_free before the world; a second free, or any call on a freed one,
     is VS_ERR_STATE while it is among the world's last 16 freed. The world's and
     a mesh's communicators are theirs to free (VS_ERR_INVALID).
   - work: vs_wait once (a second vs_wait is VS_ERR_STATE while the handle is
     among its communicator's last 16 waited). Freeing the communicator first
     completes the work and detaches it: vs_wait then returns its result.
   - mesh: free the mesh vs_mesh_init returned; its submeshes go with it
     (vs_mesh_free on a submesh is VS_ERR_STATE). Handles built on a mesh (a
     vs_ddp) retain it: vs_mesh_free is VS_ERR_STATE until they are freed.
   - The parts' handles that mark themselves freed (vs_pipe, vs_pipe_sched,
     vs_ckpt, vs_train; see their headers): a second free, or any call on a
     freed one, is VS_ERR_STATE while it is among its world's last 16 freed
     such handles (vs_free_later); a vs_pipe_sched made with a NULL world:
     among the freeing thread's last 16 (released when that thread ends).
   - Past those windows a freed handle is freed memory: do not use it.

   Memory
   ------
   - The library allocates host and device memory through the world's
     allocator hooks: vs_allocator in vs_launch_desc or vs_world_desc (alloc,
     free, device_alloc, device_free, user; NULL members take malloc/free and
     cudaMalloc/cudaFree).
   - A trainer can route its own buffers through the same hooks with vs_alloc /
     vs_free / vs_device_alloc / vs_device_free.
   - Hooks are called from every rank thread and from progress threads at once:
     they must be thread-safe. Allocation failure is VS_ERR_NOMEM.
   - Scratch space (redistribute's, DDP's buckets and optimizer state) is kept
     in the handle that needs it and freed with it (vs_mesh_free, vs_ddp_free);
     vs_ddp_memory_usage reports what a DDP holds.
   - Buffers you pass are never freed or kept: they must stay valid until the
     call returns, or until vs_wait for an asynchronous one. They are host
     memory on the threads and MPI transports, CUDA device memory on NCCL.

   Errors and logging
   ------------------
   - A function that can fail returns a vs_result: VS_OK (0) or a negative
     code, grouped by kind: -1..-19 your input, -20..-39 resources and
     availability, -40..-59 communication and backends. vs_result_string names it.
   - vs_last_error(): the calling thread's message for the last error, naming
     the call and the bad value ("vs_mesh_init: shape 2x3 has 6 ranks but the
     communicator has 4"). vs_last_backend_code(): the raw CUDA, NCCL, MPI or
     errno code behind VS_ERR_BACKEND and VS_ERR_IO.
   - A function that returns a pointer or a count says in its comment what it
     returns on error; the message is set the same way.
   - Nothing exits or aborts on bad input; VS_ASSERT (default: assert) only
     guards internal invariants.
   - Faults (timeouts, a rank that fails) end the job on every rank with
     VS_ERR_ABORTED naming the cause, the world rank it happened on and its own
     message; that rank keeps its own error, and vs_launch returns it (Faults,
     above).

   Logging:
   - The default level is warn: without a logger, warnings (a skipped step, a
     lost lighthouse, ...) and a failed job's cause print to stderr;
     VESCALE_LOG=off silences them.
   - Give a logger (vs_logger in the launch or world desc: a function called
     with a level and a message without newline) and a log_level, or set
     VESCALE_LOG=off|error|warn|info|debug (stderr when no logger is given).
   - When a level is asked for (VESCALE_LOG, a logger, or a desc level other
     than warn), at warn every error a function returns is logged once with its
     rank too (by default it is not: the caller has it); the cause of a failed
     job once at error, and the errors it causes on the other ranks at info.
   - Loggers are called from any thread (progress threads too) and must be
     re-entrant.

   Threads and streams
   -------------------
   - A handle (vs_world, vs_comm, vs_mesh, vs_ddp, vs_work) is used by one thread
     at a time. Under vs_launch each rank is a thread with its own handles;
     several jobs may run in one process. vs_wait and vs_test: the thread that
     issued the operation. vs_comm_abort, vs_comm_abort_with and
     vs_result_string: any thread.
   - The error message is per thread: read vs_last_error() on the thread whose
     call failed.
   - Asynchronous operations (a vs_work** argument) run in issue order on a
     progress thread per communicator (threads and MPI transports) or on the
     communicator's CUDA stream (NCCL). Blocking calls return when the operation
     is complete on this rank, on every transport (NCCL: the host waits for it).
   - NCCL without host waits: vs_wait_stream completes a handle in stream order
     (a stream waits for it, the host does not) and vs_sync_stream is the host
     wait with the deadline and fault watch (the loss read of a step). Work the
     host did not wait for is watched by one watchdog thread per world (started
     by the first vs_wait_stream; it looks every 20 ms while such work is in
     flight, thread ranks beyond the cores less often, and sleeps while none
     is): past the timeout, on NCCL's asynchronous error
     or when the job has failed, it aborts the communicator, so no stream waits
     forever, and the communicator's next call reports the fault. DDP completes
     its collectives this way.
   - NCCL device buffers, except for those collectives: vs_redistribute, the
     TP/SP regions, the vocab functions and vs_init_fill return when their work
     is enqueued, and the results are ready in stream order on the caller's
     stream (the communicator's: the one set with vs_comm_set_stream, else the
     legacy default stream), whose earlier work they follow.
   - So read a result after a sync of that stream (vs_sync_stream, or a
     cudaMemcpy of the loss) or enqueue work after it there; free a buffer only
     after its users' work (>>tp has the id check that reports later). No host
     sync, allocation, event or copy to the host in a steady state.
   - CUDA graphs: the library's calls are not capturable (blocking calls and
     vs_wait query the stream or an event, an error while it captures).
   - Host and device kernels from one text give the same bits only without
     floating-point contraction on the host: the C99/C11 ISO modes do not
     contract (gcc's -std=c99); -std=gnu11 with -march=native contracts into
     FMAs unless -ffp-contract=off is given. NVRTC compiles with --fmad=false.
   - NCCL: a communicator enqueues on its own stream, or on the one given with
     vs_comm_set_stream (yours stays yours). DDP runs its kernels on
     vs_ddp_desc.stream, and each bucket's collective waits for the work already
     queued there. The threads and MPI transports have no streams
     (vs_comm_set_stream is VS_ERR_UNSUPPORTED).

   Layouts and tensor parallelism
   ------------------------------
   A layout gives a tensor one placement per mesh dim: Replicate (every coordinate
   holds the whole tensor), Shard(d) (tensor dim d is split over the coordinates
   like torch.chunk) or Partial(op) (each coordinate holds a partial value; op
   combines them). vs_layout_local gives a rank's box, vs_redistribute moves a
   tensor between two layouts, and vs_init_fill gives any shard the values the whole
   tensor would have (so every layout starts from the same model).

   A Megatron MLP on a (DP, TP) mesh, weights stored [in, out] (y = x W):
       W1 [D, H]  column-parallel  [Replicate, Shard(1)]  each TP rank: H/TP columns
       b1 [H]                      [Replicate, Shard(0)]
       W2 [H, D]  row-parallel     [Replicate, Shard(0)]  each TP rank: H/TP rows
       b2 [D]                      [Replicate, Replicate]
   (Stored [out, in] as in torch, column-parallel is Shard(0) and row-parallel
   Shard(1): the column-parallel layer splits its outputs, the row-parallel one
   its inputs.)

   Its steps, with tp = the "TP" submesh (vs_mesh_submesh(mesh, "TP", &tp)):
       forward                                          per TP rank
       x [B, D]        whole on every TP rank (the forward of copy is the identity)
       a = x W1 + b1   [B, H/TP], this rank's columns   no communication
       z = gelu(a)
       y = z W2        [B, D], a partial sum over TP
       vs_tp_reduce_forward(tp, y, B * D, VS_F32)       all-reduce: y whole
       y += b2         once, after the sum (the two in one call:
                       vs_tp_reduce_forward_bias(tp, y, B, D, VS_F32, b2, VS_F32))

       backward
       dy              whole on every rank (the backward of reduce is the identity)
       db2 = sum_b dy; dW2 = z^T dy; dz = dy W2^T       this rank's rows of W2
       da = dz * gelu'(a); db1 = sum_b da; dW1 = x^T da this rank's columns of W1
       dx = da W1^T    a partial sum over TP
       vs_tp_copy_backward(tp, dx, B * D, VS_F32)       all-reduce: dx whole, for
                                                        the layer before

   One all-reduce forward, one backward. With sequence parallelism x and y stay
   Shard(seq) between blocks: vs_sp_gather_forward takes the place of the identity
   before W1 (its backward, vs_sp_gather_backward, of vs_tp_copy_backward) and
   vs_sp_scatter_forward the place of vs_tp_reduce_forward. Give DDP the same
   placements (vs_ddp_param_desc.placements, DP dim Replicate): it averages every
   gradient over DP; b2's gradient is already the same on every TP rank.
*/
/* Before the guard, so a later include with VESCALE_IMPLEMENTATION still works. */
#if defined(VESCALE_STATIC) && !defined(VESCALE_IMPLEMENTATION)
#define VESCALE_IMPLEMENTATION
#endif
#if defined(VESCALE_IMPLEMENTATION) && !defined(VESCALE_MESH_IMPLEMENTATION)
#define VESCALE_MESH_IMPLEMENTATION
#endif

/* The implementation needs POSIX (clock_gettime(CLOCK_MONOTONIC), getaddrinfo), which
   a strict `cc -std=c99` hides. Feature macros work only before the first system
   header: when this file comes first we define one; when a system header came
   before it without one, we stop with a message saying what to do. */
#if defined(VESCALE_MESH_IMPLEMENTATION) && !defined(VESCALE_MESH_IMPLEMENTED) && \
    !defined(_POSIX_C_SOURCE) && !defined(_XOPEN_SOURCE) && !defined(_GNU_SOURCE) && \
    !defined(_DEFAULT_SOURCE) && !defined(_BSD_SOURCE) && !defined(__APPLE__)
#if defined(_FEATURES_H) || defined(__GLIBC__) || defined(_STDIO_H) || defined(_STDLIB_H)
#error "vescale: include the implementation before any system header, or build with -D_POSIX_C_SOURCE=200809L (it needs POSIX clocks and sockets)"
#endif
#define _POSIX_C_SOURCE 200809L
#endif

#ifndef VESCALE_MESH_INCLUDED
#define VESCALE_MESH_INCLUDED

#include <stddef.h>
#include <stdint.h>

#ifndef VS_API
#ifdef VESCALE_STATIC
#define VS_API static inline
#else
#define VS_API extern
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

// >>base ---------------------------------------------------------------------

#define VESCALE_VERSION_MAJOR 0
#define VESCALE_VERSION_MINOR 1
#define VESCALE_VERSION_PATCH 0
#define VESCALE_VERSION_STRING "0.1.0"
#define VESCALE_VERSION_NUMBER \
    (VESCALE_VERSION_MAJOR * 10000 + VESCALE_VERSION_MINOR * 100 + VESCALE_VERSION_PATCH)

/* 0 is success; errors are negative and grouped by kind:
   -1..-19 the caller's input, -20..-39 resources and availability,
   -40..-59 communication and backends. */
typedef int vs_result;
enum {
    VS_OK = 0,
    VS_ERR_INVALID = -1,      // an argument has a bad value
    VS_ERR_NULL = -2,         // a required pointer is NULL
    VS_ERR_MISMATCH = -3,     // ranks disagree (count, dtype, op, root) or sizes differ
    VS_ERR_STATE = -4,        // call not allowed now (e.g. async inside a group), or the handle was freed
    VS_ERR_NONFINITE = -5,    // a value that must be finite is NaN or infinite (e.g. a gradient)
    VS_ERR_NOMEM = -20,       // allocation failed
    VS_ERR_UNAVAILABLE = -21, // transport or feature not compiled in / not usable
    VS_ERR_UNSUPPORTED = -22, // valid request this transport cannot do
    VS_ERR_TIMEOUT = -40,     // a peer did not arrive in time
    VS_ERR_ABORTED = -41,     // the communicator was aborted earlier
    VS_ERR_BACKEND = -42,     // CUDA/NCCL/MPI/OS error; see vs_last_backend_code()
    VS_ERR_IO = -43           // socket or file error
};

/* Short constant name of a result code ("VS_ERR_TIMEOUT"). Any thread. */
VS_API const char* vs_result_string(vs_result r);
/* Detail of the last error set on the calling thread, naming the bad input.
   Valid until the next vescale call on this thread. Empty string if none. */
VS_API const char* vs_last_error(void);
/* Raw CUDA/NCCL/MPI/errno code behind the last VS_ERR_BACKEND/VS_ERR_IO on this thread. */
VS_API int vs_last_backend_code(void);
/* Clears the calling thread's error message. */
VS_API void vs_clear_error(void);
/* Sets the calling thread's error message (printf-style) and returns `code`: for
   the parts built on this header (vescale_ddp.h, ...) and for callers' wrappers. */
VS_API vs_result vs_set_error(vs_result code, const char* fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The implementation's VESCALE_VERSION_NUMBER; compare with the header's to catch
   a header/implementation mismatch. */
VS_API int vs_version(void);
VS_API const char* vs_version_string(void);

/* How long a waiting rank spins before it blocks. When ranks outnumber cores a
   spinning rank steals the core a peer needs, so it spins briefly and sleeps; when
   every rank has a core it spins for a while (a sleep and wake-up costs tens of
   microseconds, and the scheduler may then put two ranks on one core). */
#define _VS_SPIN_PAUSES 64
#define _VS_SPIN_YIELDS 32
#define _VS_SPIN_LONG_S 50e-6

// >>hooks --------------------------------------------------------------------

typedef enum vs_log_level {
    VS_LOG_DEFAULT = 0, // take VESCALE_LOG from the environment (warn when unset)
    VS_LOG_OFF,
    VS_LOG_ERROR,
    VS_LOG_WARN,
    VS_LOG_INFO,
    VS_LOG_DEBUG
} vs_log_level;

/* Loggers may be called from any thread (progress threads included); they must be
   re-entrant. `msg` has no trailing newline. */
typedef void (*vs_log_fn)(vs_log_level level, const char* msg, void* user);
typedef struct vs_logger {
    vs_log_fn fn; // NULL: print to stderr when the level asks
    void* user;
} vs_logger;

/* Allocation hooks. NULL members take malloc/free and cudaMalloc/cudaFree. Every
   allocation of the library goes through the hooks given in vs_launch_desc or
   vs_world_desc (host bookkeeping, communicators, meshes, DDP buffers, scratch),
   from rank, progress and caller threads: they must be thread-safe. What was
   allocated through them is freed through them (test_alloc checks both). */
typedef struct vs_allocator {
    void* (*alloc)(size_t size, void* user);
    void (*free)(void* ptr, void* user);
    void* (*device_alloc)(size_t size, void* user);
    void (*device_free)(void* ptr, void* user);
    void* user;
} vs_allocator;

#ifndef VS_ASSERT
#include <assert.h>
#define VS_ASSERT(c) assert(c)
#endif

/* VESCALE_DEBUG's modes, a comma-separated list ("desync,params"); each header
   reads the bits it owns through this one parser. */
typedef enum vs_debug_mode {
    VS_DEBUG_DESYNC = 1, // MPI: every collective's arguments checked across ranks (vs_world_init)
    VS_DEBUG_PARAMS = 2  // DDP: a parameter read before vs_ddp_wait_params is caught (vescale_ddp.h)
} vs_debug_mode;
/* The modes named in `text` (NULL: the VESCALE_DEBUG environment variable;
   unset or empty: none) as VS_DEBUG_* bits in *modes. An unknown name is
   VS_ERR_INVALID naming it and the known ones. Any thread. */
VS_API vs_result vs_debug_modes(const char* text, unsigned* modes);

// >>dtype --------------------------------------------------------------------

typedef enum vs_dtype {
    VS_DTYPE_INVALID = 0,
    VS_F32,
    VS_F16,
    VS_BF16,
    VS_F64,
    VS_I32,
    VS_I64,
    VS_U8,
    VS_DTYPE_COUNT
} vs_dtype;

typedef enum vs_op {
    VS_OP_DEFAULT = 0, // sum
    VS_OP_SUM,
    VS_OP_AVG, // sum / nranks; integers truncate toward zero
    VS_OP_MAX,
    VS_OP_MIN,
    VS_OP_COUNT
} vs_op;

/* Bytes per element; 0 for an invalid dtype. */
VS_API size_t vs_dtype_size(vs_dtype dt);
/* "f32", "bf16", ...; "invalid" for anything else. */
VS_API const char* vs_dtype_name(vs_dtype dt);
VS_API const char* vs_op_name(vs_op op);
/* IEEE half / bfloat16 conversions (round to nearest even), used by reductions. */
VS_API float vs_f16_to_f32(uint16_t h);
VS_API uint16_t vs_f32_to_f16(float f);
VS_API float vs_bf16_to_f32(uint16_t h);
VS_API uint16_t vs_f32_to_bf16(float f);

// >>comm ---------------------------------------------------------------------

typedef enum vs_transport {
    VS_TRANSPORT_DEFAULT = 0,
    VS_TRANSPORT_THREADS,
    VS_TRANSPORT_MPI,
    VS_TRANSPORT_NCCL
} vs_transport;

typedef struct vs_world vs_world; // one per rank: transport, hooks, world communicator
typedef struct vs_comm vs_comm;   // a communicator, per-rank handle
typedef struct vs_work vs_work;   // an asynchronous operation in flight

#define VS_COLOR_NONE (-1) // vs_comm_split: this rank joins no communicator

VS_API const char* vs_transport_name(vs_transport t);
/* 1 when the transport is compiled into this build. */
VS_API int vs_transport_available(vs_transport t);

VS_API int vs_comm_rank(const vs_comm* c);
VS_API int vs_comm_size(const vs_comm* c);
VS_API vs_transport vs_comm_transport(const vs_comm* c);
/* 1 when the communicator's buffers are CUDA device memory (the NCCL
   transport: collectives, layouts, TP and init take device pointers, and
   vs_device_alloc gives them), 0 for host memory (threads, MPI) or a bad handle.
   Ask this, not the transport, for "where do buffers live". */
VS_API int vs_comm_device(const vs_comm* c);
/* Timeout in seconds for peers to arrive (inherited from the world). 0 or INFINITY:
   no timeout (wait forever); values over 1e9 s count as none; negative or NaN is
   VS_ERR_INVALID. */
VS_API vs_result vs_comm_set_timeout(vs_comm* c, double seconds);
/* NCCL: the cudaStream_t the comm's operations are enqueued on; NULL gives back
   the communicator's own stream. The stream must be of c's device; the
   caller's stays the caller's (never destroyed here) and must outlive its use.
   Stream order:
   - on a stream you give, your work and the library's are ordered by it;
   - on its own (non-blocking) stream, every call waits for what you enqueued
     on the legacy default stream before it, and your later work there waits
     for the call's device work (events, no host wait);
   - work on other streams of yours: give that stream, or order it yourself.
   A trainer's own stream is handed in here: e.g. its communication stream,
   with vs_wait_stream(work, compute_stream) making its compute stream wait for
   a collective (the host does not). It may change between any two calls: work
   already enqueued stays ordered on its stream, and the new stream waits for
   it (an event, no host wait). Threads and MPI: VS_ERR_UNSUPPORTED. Only the
   thread using c. */
VS_API vs_result vs_comm_set_stream(vs_comm* c, void* cuda_stream);
/* The cudaStream_t c enqueues on now (the one set above, else its own); NULL on
   threads and MPI, and on a bad handle (with vs_last_error()). */
VS_API void* vs_comm_stream(const vs_comm* c);

/* The raw handles under a communicator, for a trainer that keeps some of its own
   NCCL or MPI calls beside vescale's. They stay the library's: never free,
   finalize, abort or split them yourself (vs_comm_abort, vs_comm_split,
   vs_comm_free do that).

   - vs_comm_nccl: the ncclComm_t of an NCCL communicator, as void*. NULL, with
     vs_last_error() naming the transport, on a threads or MPI communicator;
     NULL too once the communicator was aborted (a timeout, vs_comm_abort,
     NCCL's asynchronous error, a failed rank of a vs_launch job: NCCL's handle
     is gone). Read it anew rather than keep it: a handle kept past an abort is
     freed memory.
   - vs_comm_mpi: a pointer to the communicator's MPI_Comm (MPI_Comm mc =
     *(MPI_Comm*)vs_comm_mpi(c); void* so that this header needs no <mpi.h>);
     NULL on threads and NCCL. It is vescale's own duplicate of the world's (or
     a split of it): your operations on it must come in the same place of
     vescale's order on every rank, with no vescale asynchronous work
     outstanding on it (a progress thread issues that); MPI_Comm_dup it to be
     free of both.
   Both getters: any thread that uses c.

   Your own NCCL calls on c's ncclComm_t go between vs_comm_nccl_begin and
   vs_comm_nccl_end, on the thread that uses c:
       void* nc;
       if (vs_comm_nccl_begin(c, &nc) == VS_OK) {
           ncclAllReduce(x, x, n, ncclFloat, ncclSum, (ncclComm_t)nc, my_stream);
           r = vs_comm_nccl_end(c);          // NCCL took it; the GPU runs it later
       }
   - begin takes the communicator's NCCL lock (the one vescale's own NCCL calls
     on it hold), reports a fault already known as c's next call would
     (VS_ERR_ABORTED, VS_ERR_TIMEOUT, VS_ERR_BACKEND with NCCL's asynchronous
     error) and gives the ncclComm_t.
   - end waits on the host only until NCCL has taken your calls (c is a
     non-blocking communicator: a call may answer ncclInProgress, and end polls
     ncclCommGetAsyncError with c's deadline; a failure aborts c, as vescale's
     own calls do), then releases the lock.
   - Your operations then complete in stream order, as vescale's stream-ordered
     ones do: on the stream you gave them (any stream of c's device:
     vs_comm_stream(c), or your own); vs_sync_stream(c, stream) is the host
     wait that has the deadline and watches NCCL's errors.
   What is safe to interleave, and why:
   - NCCL matches the operations on one communicator by their order, and takes
     them from one thread at a time. Every vescale call issues its NCCL
     operations before it returns (blocking or not), on the calling thread, in
     call order: the collectives, p2p and barrier (a group's at the outermost
     vs_group_end), vs_comm_split (and a mesh's first vs_mesh_submesh for a set
     of dims), vs_redistribute, the >>tp functions and vs_init_fill on a mesh
     over c, DDP's reductions and gathers on its mesh's communicators.
   - vs_wait, vs_wait_stream, vs_test and vs_sync_stream issue none, and no
     thread of vescale's issues any (the watchdog below only queries and
     aborts; a checkpoint's writer thread does not communicate). So your calls
     may go between any two vescale calls, with outstanding vescale work
     (vs_work) or not, as long as every rank makes them in the same place of
     that order.
   - Never while a vescale call on c runs on another thread, and make no vescale
     call on c between begin and end (the calls that would issue NCCL there are
     VS_ERR_STATE naming c; begin inside an open vs_group_start is too).
   - The world's watchdog thread (running once vs_wait_stream was used) may call
     ncclCommGetAsyncError and ncclCommAbort on c when vescale's stream-ordered
     work is past its deadline or NCCL reports an error; it never does between
     begin and end (it skips a communicator whose lock is held), which is what
     makes a raw call outside them unsafe: it could meet a handle just aborted.
     The watchdog watches vescale's work only: your own operations' deadline is
     your host wait's (vs_sync_stream has one).
   - vs_comm_abort from another thread while begin holds the lock marks c, and
     end aborts it and returns VS_ERR_ABORTED; vs_comm_free ends an open begin.
   - Only the ncclComm_t: ncclGroupStart/End around your own calls are yours.
   Threads and MPI: begin is VS_ERR_UNSUPPORTED naming the transport. */
VS_API void* vs_comm_nccl(const vs_comm* c);
VS_API void* vs_comm_mpi(const vs_comm* c);
VS_API vs_result vs_comm_nccl_begin(vs_comm* c, void** nccl_comm);
VS_API vs_result vs_comm_nccl_end(vs_comm* c);

/* Collective over `c`: ranks with the same color form a new communicator, ordered by
   (key, old rank). VS_COLOR_NONE gives *out = NULL. Free with vs_comm_free. */
VS_API vs_result vs_comm_split(vs_comm* c, int color, int key, vs_comm** out);
/* Frees a communicator made by vs_comm_split (not the world's or a mesh's). */
VS_API vs_result vs_comm_free(vs_comm* c);
/* Marks the communicator failed on every rank: peers blocked in it return
   VS_ERR_ABORTED. Any thread. (MPI: aborts the whole world; see vs_world_abort.) */
VS_API vs_result vs_comm_abort(vs_comm* c);
/* vs_comm_abort because this rank failed with `why` (< 0) and `message` (NULL:
   this thread's vs_last_error()): that failure becomes the cause every rank is
   told. Threads: vs_launch returns it, and every rank's error names it ("job
   aborted: world rank 5 failed (VS_ERR_INVALID): <message>"); MPI: the abort
   notice carries it to every rank of the world. With message NULL and a last
   error that only reports another rank's failure (an abort that reached this
   rank), that rank stays the cause. The pipeline engine calls it when a run
   fails. Any thread. */
VS_API vs_result vs_comm_abort_with(vs_comm* c, vs_result why, const char* message);

/* Collectives. `count`s are elements. work == NULL: blocking. */
VS_API vs_result vs_all_reduce(vs_comm* c, const void* send, void* recv, size_t count,
                               vs_dtype dt, vs_op op, vs_work** work);
VS_API vs_result vs_reduce(vs_comm* c, const void* send, void* recv, size_t count,
                           vs_dtype dt, vs_op op, int root, vs_work** work);
VS_API vs_result vs_broadcast(vs_comm* c, const void* send, void* recv, size_t count,
                              vs_dtype dt, int root, vs_work** work);
/* recv holds size*count elements, rank i's block at i*count. */
VS_API vs_result vs_all_gather(vs_comm* c, const void* send, void* recv, size_t count,
                               vs_dtype dt, vs_work** work);
/* Uneven: rank i contributes counts[i] elements, placed at recv + displs[i]
   (displs NULL: packed in rank order). counts/displs equal on every rank. */
VS_API vs_result vs_all_gatherv(vs_comm* c, const void* send, void* recv,
                                const size_t* counts, const size_t* displs, vs_dtype dt,
                                vs_work** work);
/* send holds size*count elements; rank i receives the reduction of block i. */
VS_API vs_result vs_reduce_scatter(vs_comm* c, const void* send, void* recv, size_t count,
                                   vs_dtype dt, vs_op op, vs_work** work);
/* Uneven: block i has counts[i] elements, packed in rank order in send. */
VS_API vs_result vs_reduce_scatterv(vs_comm* c, const void* send, void* recv,
                                    const size_t* counts, vs_dtype dt, vs_op op,
                                    vs_work** work);
/* send block j (count elements) goes to rank j; recv block i comes from rank i. */
VS_API vs_result vs_all_to_all(vs_comm* c, const void* send, void* recv, size_t count,
                               vs_dtype dt, vs_work** work);
/* Uneven all-to-all: send_counts[j] elements at send + send_displs[j] go to rank j,
   recv_counts[i] elements from rank i land at recv + recv_displs[i]. */
VS_API vs_result vs_all_to_allv(vs_comm* c, const void* send, const size_t* send_counts,
                                const size_t* send_displs, void* recv,
                                const size_t* recv_counts, const size_t* recv_displs,
                                vs_dtype dt, vs_work** work);
VS_API vs_result vs_barrier(vs_comm* c, vs_work** work);

/* Point-to-point. Between vs_group_start/vs_group_end they are posted together and
   complete at vs_group_end, so exchanges in any order do not deadlock. */
VS_API vs_result vs_send(vs_comm* c, const void* buf, size_t count, vs_dtype dt, int peer,
                         vs_work** work);
VS_API vs_result vs_recv(vs_comm* c, void* buf, size_t count, vs_dtype dt, int peer,
                         vs_work** work);
/* Groups nest; operations issued inside one (p2p and collectives, work == NULL) are
   launched at the outermost vs_group_end, which blocks, or with work != NULL returns
   a handle for all of them. Groups are per communicator. */
VS_API vs_result vs_group_start(vs_comm* c);
VS_API vs_result vs_group_end(vs_comm* c, vs_work** work);

/* Completes an asynchronous operation and frees its handle; returns its result.
   (vs_group_end of an empty group gives *work = NULL: nothing to wait for.)
   Times out like a blocking call. Only the thread that issued it. */
VS_API vs_result vs_wait(vs_work* w);
/* vs_wait_stream and vs_sync_stream, apart: the first makes a stream wait for one
   operation (the host goes on); the second makes the host wait for a stream.

   Completes an asynchronous operation in stream order and frees its handle: the
   work enqueued on `stream` after this call runs after the operation, and the
   host does not wait (NCCL). stream NULL: the caller's stream (the one given to
   vs_comm_set_stream, else the legacy default stream). This keeps the host ahead
   of the GPU: a training step needs one host wait, for its loss.
   What goes wrong later (a peer that never arrives, NCCL's asynchronous errors,
   a failed rank of the job):
   - the communicator's next call reports it;
   - the world's watchdog thread (started by the first such wait) aborts the
     communicator once the operation is past the timeout or NCCL reports an
     error, so a stream waiting on it never hangs, and ends a vs_launch job as
     a failed rank does.
   Threads and MPI (no device streams): vs_wait. Only the thread that issued it. */
VS_API vs_result vs_wait_stream(vs_work* w, void* stream);
/* The host waits for everything enqueued so far on `stream` (NULL: c's caller
   stream, as above), with c's deadline and fault watch: NCCL's asynchronous
   errors, a failed rank of the job, a fault the watchdog found (stream-ordered
   work of c that never finished). The one host wait a training step needs, e.g.
   before reading its loss: unlike cudaStreamSynchronize it ends with an error
   naming the fault instead of waiting past the timeout. Threads and MPI: VS_OK
   at once (their calls complete on the host). Only the thread using c. */
VS_API vs_result vs_sync_stream(vs_comm* c, void* stream);
/* *done = 1 when the operation has completed (vs_wait then returns at once). */
VS_API vs_result vs_test(vs_work* w, int* done);

// >>threads ------------------------------------------------------------------

/* A rank's entry point under vs_launch; a non-zero return is reported by vs_launch
   (unless the job's survivors recovered from that rank's failure: see vs_launch). */
typedef int (*vs_rank_fn)(vs_world* world, void* arg);

typedef struct vs_launch_desc {
    int nranks;             // required, 1..4096 (each rank is a thread)
    vs_transport transport; // DEFAULT/THREADS: shared memory; NCCL: one GPU per thread
    double timeout_s;       // 0: VESCALE_TIMEOUT or 300
    int ranks_per_node;     // local rank = rank % ranks_per_node (0: all on one node)
    vs_logger logger;
    vs_log_level log_level;
    vs_allocator allocator;
    /* Debug modes, as vs_world_desc.debug (NULL: VESCALE_DEBUG; "": none); an
       unknown one is the launch's VS_ERR_INVALID. Every rank's world reads
       them back (vs_world_query_desc). */
    const char* debug;
    /* Each rank thread's stack in bytes (0: the system's default, ulimit -s;
       below 16 KiB: VS_ERR_INVALID). Thousands of ranks in one process want
       small ones: tests/test_strict_scale.c runs 1,024 on 256 KiB. */
    size_t stack_bytes;
} vs_launch_desc;

/* Runs fn on nranks ranks, each a thread of this process, and joins them. Returns
   VS_OK, a launch error, the failed job's cause, or the first non-zero value a
   rank returned, by rank order; in an elastic job, not the value of a rank whose
   failure the survivors recovered from (a rank vs_world_shrink / vs_mesh_shrink
   counted as failed: the job went on without it, so its 1 is not the job's; its
   replacement's value counts). The world
   each rank gets is freed when fn returns. Jobs are independent: several may run
   at once in one process. */
VS_API vs_result vs_launch(int nranks, vs_rank_fn fn, void* arg);
VS_API vs_result vs_launch_ex(const vs_launch_desc* desc, vs_rank_fn fn, void* arg);

// >>bootstrap ----------------------------------------------------------------

/* Where this process sits in the job, as launchers describe it. */
typedef struct vs_bootstrap_info {
    int rank, world_size, local_rank;
    char master_addr[256];
    int master_port;
    const char* source; // "explicit", "torchrun", "slurm", "openmpi", "none"
} vs_bootstrap_info;

/* Reads the launcher environment: torchrun, then SLURM, then Open MPI variables.
   Returns VS_ERR_INVALID naming the variable when one is malformed or out of range;
   *out->source == "none" (world_size 1) when nothing is set. */
VS_API vs_result vs_bootstrap_from_env(vs_bootstrap_info* out);

typedef enum vs_device_select {
    VS_DEVICE_BY_LOCAL_RANK = 0, // cudaSetDevice(local_rank % device count)
    VS_DEVICE_EXPLICIT,          // cudaSetDevice(cuda_device)
    VS_DEVICE_KEEP               // leave the current device
} vs_device_select;

typedef struct vs_world_desc {
    vs_transport transport; // DEFAULT: VESCALE_TRANSPORT, else MPI if built, else NCCL
    int world_size;         // 0: from the environment; else rank/local_rank explicit
    int rank;
    int local_rank;
    const char* master_addr; // NCCL rendezvous without MPI (NULL: MASTER_ADDR)
    int master_port;         // 0: MASTER_PORT
    /* NCCL without MPI: the unique id through this path on a file system every
       rank sees (NULL: VESCALE_INIT_FILE; neither: the TCP rendezvous on
       master_addr:master_port). See vs_world_init. */
    const char* init_file;
    double timeout_s;        // 0: VESCALE_TIMEOUT or 300
    /* NCCL jobs of processes that survive a rank (>>elastic): a directory every
       rank sees, or "tcp://host:port", a vs_lighthouse's address (NULL:
       VESCALE_ELASTIC_DIR; neither: none, and a failure ends the job). It
       carries failure notices and the survivors' agreement. */
    const char* elastic_dir;
    /* The lighthouse's shared token (elastic_dir "tcp://..."; NULL:
       VESCALE_LIGHTHOUSE_TOKEN; neither: none): every request is signed with
       it. A lighthouse that has one refuses a rank without it. */
    const char* elastic_token;
    /* 1 (or VESCALE_ELASTIC_JOIN=1): this process replaces a failed rank of a
       running elastic job: no rendezvous, no communicator until vs_world_grow. */
    int join;
    vs_device_select device_select;
    int cuda_device;
    void* mpi_comm; // optional MPI_Comm* to build on instead of MPI_COMM_WORLD
    vs_logger logger;
    vs_log_level log_level;
    vs_allocator allocator;
    /* Debug modes, comma-separated as vs_debug_modes reads them ("desync,params";
       NULL: VESCALE_DEBUG; "": none). An unknown one is VS_ERR_INVALID. Read
       back (vs_world_query_desc) as the modes' names, "" for none. */
    const char* debug;
    /* A lighthouse (elastic_dir "tcp://..."): how long a rank waits for its
       answer before giving it up, with a warning, and training on without it
       (0: 5 s; > 0 and finite). No collective waits on it either way. */
    double lighthouse_wait_s;
} vs_world_desc;

/* Starts this process's rank of a multi-process job (MPI or NCCL transport). For the
   threads transport use vs_launch. MPI is initialised (MPI_THREAD_MULTIPLE) unless
   the program already did.

   NCCL: rank 0's unique id reaches the others by the first of these that
   applies:
   - over MPI, when the job has it (MPI initialised, or an Open MPI launcher);
   - through init_file (or VESCALE_INIT_FILE), a path every rank sees;
   - over TCP on master_addr:master_port.
   The two rendezvous carry the same: the job key (VESCALE_RUN_ID, else
   TORCHELASTIC_RUN_ID, and the world size; see the TCP rendezvous' notes in
   >>bootstrap), the world size, the payload's length, the id, and each rank's
   claim; rank 0 returns once every rank has its id.

   The file rendezvous (its steps: _vs_file_bcast) leaves nothing behind, never
   uses a file of another job (another run id or world size: waited past, and
   rank 0 replaces it), and survives one left by an earlier run of the same
   job. Every wait has the world's timeout (VESCALE_TIMEOUT); a timeout names
   the file, what was found there and, on rank 0, the ranks that never claimed.
   Errors naming the path:
   - a directory that does not exist or that the rank cannot write in
     (VS_ERR_IO, at once on every rank);
   - a file at the path that is not a rendezvous file (VS_ERR_INVALID: rank 0
     does not replace it);
   - one that is truncated or damaged (VS_ERR_IO);
   - an init_file longer than 1000 bytes or empty (VS_ERR_INVALID).
   The path must be on a file system with atomic rename that every rank sees
   (NFS, Lustre, a local disk for one node). */
VS_API vs_result vs_world_init(const vs_world_desc* desc, vs_world** out);
/* Frees the world (and finalizes MPI if vs_world_init initialised it). MPI:
   - after a timeout or abort left operations in flight that do not complete
     within 0.2 s, MPI is not finalized (MPI_Finalize would wait for them
     forever): the world is freed all the same and this returns VS_ERR_ABORTED;
     end the process;
   - MPI cannot start twice: vs_world_init after MPI was finalized is VS_ERR_STATE;
   - with ULFM, after the job lost a process: MPI_Finalize is given at most the
     world's timeout (10 s at most; Open MPI 5 can wait for good on a message to
     a process that ended): past it, VS_ERR_ABORTED; end the process. */
VS_API vs_result vs_world_free(vs_world* w);
/* Ends the job after a fault. MPI: MPI_Abort on the world, which ends every
   process of the job with exit status -why (1 when that is not in 1..255), after
   printing this rank, `why` and the last error to stderr; does not return. MPI
   run with ULFM (>>elastic): ends this process only, the others told why.
   Threads and NCCL: aborts the world's communicator and returns VS_OK: with
   vs_comm_abort_with(why, this thread's last error) when why < 0, else
   vs_comm_abort.

   What each transport does on a fault:
   - threads: vs_comm_abort and timeouts wake every rank blocked in the
     communicator with VS_ERR_ABORTED.
   - MPI: vs_comm_abort, a timeout or an MPI error on any communicator aborts the
     whole world on this rank and sends an abort notice to every other rank of the
     world (over a duplicate of the world communicator). A rank blocked in, or
     later calling, any operation on any communicator of that world returns
     VS_ERR_ABORTED naming the origin (the world rank whose failure it was) and
     its message ("world rank 5 failed (VS_ERR_INVALID): ..."), within about a
     millisecond of the notice. Only the origin sends the notice: a rank that
     learnt of the abort never names itself.
   - MPI errors are VS_ERR_BACKEND, not the end of the job: every MPI
     communicator the library makes has MPI_ERRORS_RETURN, and so has
     MPI_COMM_WORLD when vs_world_init started MPI (Open MPI reports errors of
     non-blocking collectives there; a program that starts MPI itself sets it).
     The buffers of an operation that failed this way may still be written by
     MPI until the job ends (MPI cannot cancel collectives): keep them.
   - MPI timeouts name this rank, the communicator's size and the operation with
     its sequence number; the missing ranks for p2p, for a collective of a
     2-rank communicator (a pipeline link, a TP pair: the other rank), and for
     other collectives with VESCALE_DEBUG=desync. vs_comm_split honours the
     timeout.
   - Where MPI cannot say who is missing (a collective; desync's late ranks may
     be alive in the op before), the rank that timed out asks every rank of the
     communicator where it is: a probe over the abort channel, answered from any
     wait, for a quarter of the timeout (at most 0.5 s). Its message and notice
     ("missing world rank 2") then name:
       - the ranks that did not answer (stopped, cut off), else
       - one that answered far behind all the others (a slow link),
       - and list those that answered from another op.
     No probe under ULFM, nor after a shrink.
     A communicator a fault left requests on is freed once they complete (a
     moment; else it stays, and vs_world_free frees it if they have completed).
   - NCCL: a timeout names the operation with its sequence number, the
     communicator, its size and this rank (NCCL cannot say who is missing).
     vs_comm_abort calls ncclCommAbort on this rank only. In a vs_launch
     job the others learn of it from the job; in a job of processes with an
     elastic directory, vs_world_abort posts a notice there that the others'
     waits read (>>elastic); else each rank's deadline ends the job.

   VESCALE_DEBUG (comma-separated, parsed by vs_debug_modes, read by MPI at
   vs_world_init; an unknown value is VS_ERR_INVALID), "desync": before every
   collective (and every group holding one, but no p2p), all ranks are checked
   to make the same call.
   - Each rank sends an 80-byte fingerprint (per-communicator sequence number,
     kind, count, dtype, op, root, and a hash of the group and of the counts
     ranks must agree on) to every other rank and compares all of them.
   - A difference is VS_ERR_MISMATCH on every rank, naming each differing
     rank's call and sequence number (group and world ranks); no data moves and
     the communicator stays usable.
   - Cost: 2(n-1) small messages per rank and one message latency per
     collective: a debugging aid.
   Without it a mismatched call on MPI may give garbage or an MPI error on some
   ranks only (the erring rank then aborts the world, so the others fail their
   next call). */
VS_API vs_result vs_world_abort(vs_world* w, vs_result why);
VS_API int vs_world_rank(const vs_world* w);
VS_API int vs_world_size(const vs_world* w);
VS_API int vs_world_local_rank(const vs_world* w);
VS_API vs_transport vs_world_transport(const vs_world* w);
VS_API vs_comm* vs_world_comm(vs_world* w);
VS_API double vs_world_timeout(const vs_world* w);
/* The desc as this world uses it, every zero-is-default resolved (as sokol's
   sg_query_desc): transport, world_size/rank/local_rank (the final ones: MPI's
   when it numbered the ranks), master_addr/port, init_file (NULL: none),
   timeout_s (INFINITY: none), log_level, logger, allocator, debug (the modes'
   names), lighthouse_wait_s. Worlds of vs_launch report the launch desc's values the same way
   (debug: vs_launch_desc.debug's modes, else VESCALE_DEBUG's). master_addr, init_file and debug point into
   the world. */
VS_API vs_result vs_world_query_desc(const vs_world* w, vs_world_desc* out);

/* Logs through the world's logger at `level` (printf-style). */
VS_API void vs_log(const vs_world* w, vs_log_level level, const char* fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Host and device allocation through the world's hooks. NULL when out of memory,
   with vs_last_error() saying so. */
VS_API void* vs_alloc(const vs_world* w, size_t size);
VS_API void vs_free(const vs_world* w, void* ptr);
VS_API void* vs_device_alloc(const vs_world* w, size_t size);
/* The NCCL build: VS_OK when p is NULL, device memory or pinned host memory
   (what NCCL may be given), else VS_ERR_INVALID "<fn>: <which> <p> is host
   memory ...". Other builds: VS_OK (their buffers are host memory). For the
   parts built on this header (a DDP's trainer-owned storage). */
VS_API vs_result vs_device_check(const char* fn, const char* which, const void* p);
VS_API void vs_device_free(const vs_world* w, void* ptr);
/* vs_free, later: for the handles of the parts built on this header (vs_pipe,
   vs_pipe_sched, vs_ckpt, vs_train), which mark themselves freed (a magic
   number) and hand their memory here. It joins the world's last 16 freed
   handles and the oldest of them is released, so a second free or a call on a
   recently freed handle reads the mark, not freed memory. NULL w: released at
   once; the rest go with the world (vs_world_free). Same thread as the
   world's other calls. */
VS_API void vs_free_later(const vs_world* w, void* ptr);

// >>mesh ---------------------------------------------------------------------

#define VS_MESH_MAX_DIMS 8
#define VS_MESH_NAME_MAX 32

typedef struct vs_mesh vs_mesh;

typedef struct vs_mesh_desc {
    int shape[VS_MESH_MAX_DIMS]; // sizes, outermost first; ndims = leading non-zero entries
    int ndims;                   // 0: count the leading non-zero shape entries
    /* NULL entries: defaults for 1-3 dims: (DP), (DP,TP), (PP,DP,TP); TP innermost. */
    const char* dim_names[VS_MESH_MAX_DIMS];
    vs_comm* comm; // ranks of the mesh (NULL: the world's communicator)
} vs_mesh_desc;

/* A mesh over the ranks of desc->comm (product of shape == its size), rank r at the
   row-major coordinate of r. Local over the world's communicator; collective over
   desc->comm otherwise (it learns the world rank of each member). The
   communicator is shared, not copied, and must outlive the mesh. */
VS_API vs_result vs_mesh_init(vs_world* w, const vs_mesh_desc* desc, vs_mesh** out);
/* Frees the mesh, every submesh it made and their communicators. A submesh is
   owned by its parent: freeing it alone is VS_ERR_STATE. While a handle built on
   the mesh or one of its submeshes (a vs_ddp) is alive, VS_ERR_STATE: free it first.
   Device buffers: waits for the device (the mesh's calls returned when their work
   was enqueued) and for the vocab calls' id checks still in flight (>>tp); an
   id out of range that no later vocab call reported fails it (VS_ERR_INVALID
   naming the call, the id and its position), the mesh freed all the same. */
VS_API vs_result vs_mesh_free(vs_mesh* m);
/* A handle built on a mesh or one of its submeshes (a vs_ddp does this itself)
   retains it at creation and releases it when freed; vs_mesh_free refuses while
   any retain is outstanding, instead of leaving the handle dangling. Same thread
   as the mesh's other calls. */
VS_API vs_result vs_mesh_retain(vs_mesh* m);
VS_API vs_result vs_mesh_release(vs_mesh* m);

/* The desc as the mesh uses it (ndims, shape, dim_names owned by the mesh, comm). */
VS_API vs_result vs_mesh_query_desc(const vs_mesh* m, vs_mesh_desc* out);
VS_API int vs_mesh_ndims(const vs_mesh* m);
/* Index of a dim by name, or VS_ERR_INVALID naming it. */
VS_API int vs_mesh_dim_index(const vs_mesh* m, const char* dim);
VS_API const char* vs_mesh_dim_name(const vs_mesh* m, int dim_index);
/* Size along a dim (veScale's get_strategy_size), or a negative error. */
VS_API int vs_mesh_size(const vs_mesh* m, const char* dim);
/* Number of ranks in the mesh. */
VS_API int vs_mesh_nranks(const vs_mesh* m);
/* This rank's index in the mesh (== rank in vs_mesh_comm). */
VS_API int vs_mesh_rank(const vs_mesh* m);
/* This rank's coordinate along a dim, or a negative error. */
VS_API int vs_mesh_coord_along(const vs_mesh* m, const char* dim);
VS_API vs_result vs_mesh_coord(const vs_mesh* m, int coord[VS_MESH_MAX_DIMS]);
/* Coordinate of any mesh rank, and the mesh rank at a coordinate. */
VS_API vs_result vs_mesh_coord_of(const vs_mesh* m, int mesh_rank, int coord[VS_MESH_MAX_DIMS]);
VS_API vs_result vs_mesh_rank_of(const vs_mesh* m, const int* coord, int* mesh_rank);
/* Global (world) rank of a mesh rank. */
VS_API int vs_mesh_global_rank(const vs_mesh* m, int mesh_rank);
VS_API int vs_mesh_local_rank(const vs_mesh* m);
VS_API vs_comm* vs_mesh_comm(vs_mesh* m);
VS_API vs_world* vs_mesh_world(vs_mesh* m);

/* The submesh over `dims` ("DP", "DP,TP"; order given = order of its dims) that
   contains this rank, with its communicator. The first call for a set of dims is
   collective over the whole mesh; later calls return the cached submesh, owned by
   `m`. */
VS_API vs_result vs_mesh_submesh(vs_mesh* m, const char* dims, vs_mesh** out);
/* Global ranks of the submesh over `dims` containing mesh rank `mesh_rank`, in its
   order. *n gets the count; cap too small gives VS_ERR_INVALID. No communication. */
VS_API vs_result vs_mesh_group_of(const vs_mesh* m, const char* dims, int mesh_rank,
                                  int* ranks, int cap, int* n);
/* All sibling submeshes over `dims`: *ngroups rows of *group_size global ranks each,
   row g = the g-th group in row-major order of the remaining dims. */
VS_API vs_result vs_mesh_groups(const vs_mesh* m, const char* dims, int* ranks, int cap,
                                int* ngroups, int* group_size);
/* The rank `offset` steps along `dim` from this one (e.g. -1/+1: previous/next
   pipeline stage). Without wrap, stepping off the end gives *global_rank = -1 and
   VS_OK. *mesh_rank (may be NULL) gets its mesh rank or -1. */
VS_API vs_result vs_mesh_neighbor(const vs_mesh* m, const char* dim, int offset, int wrap,
                                  int* global_rank, int* mesh_rank);
/* 1 when this rank is first/last along `dim`, 0 if not, negative on a bad dim. */
VS_API int vs_mesh_is_first(const vs_mesh* m, const char* dim);
VS_API int vs_mesh_is_last(const vs_mesh* m, const char* dim);
/* Writes "(PP=2, DP=2, TP=2)" into buf. Returns the length it needs. */
VS_API int vs_mesh_describe(const vs_mesh* m, char* buf, size_t cap);

// >>elastic ------------------------------------------------------------------

/* Failure as a normal event: the survivors of a failed rank agree on what
   failed, shrink the world (and a mesh, by whole DP replicas), go on, and later
   grow back with a replacement. The loop a trainer writes (vescale.h's
   vs_train_reconfigure moves the training state; examples/train_gpt.c
   --elastic is the whole of it):

       r = vs_train_step(t, &batch, &loss);
       if (r == VS_ERR_ABORTED || r == VS_ERR_TIMEOUT) {   // a rank failed
           vs_mesh* small;
           r = vs_mesh_shrink(vs_train_mesh(t), "DP", &small, &info);
           if (r == VS_OK && small) r = vs_train_reconfigure(&t, &desc, small, last_ckpt, NULL);
           if (r == VS_OK && !small) { vs_train_free(t); t = NULL; ... wait in vs_world_grow }
       }

   What each transport does, phase by phase (the notes below the table):

   | transport       | a failure is seen by        | the survivors agree   | the new world        | grow back        |
   | threads         | its function returned (1)   | in the job's memory   | a new shared state   | vs_world_respawn |
   | NCCL, vs_launch | the job; world comm revoked | in the job's memory   | ncclCommShrink (2)   | vs_world_respawn |
   | NCCL, processes | a notice in the store (3)   | through the store (4) | ncclCommShrink (2)   | join = 1 (5)     |
   | MPI with ULFM   | MPI's error; a notice (6)   | MPIX_Comm_shrink      | MPIX_Comm_shrink (7) | no (7)           |
   | MPI without     | -                           | UNSUPPORTED (8)       | -                    | -                |

   Every wait has the world's timeout: a live rank that never arrives makes
   the call VS_ERR_TIMEOUT on the others, naming it; nothing hangs.

   1)  threads: a rank whose function returned while the others go on is
       failed. Every live rank must arrive at the agreement; a rank that dies
       during it joins the failed set, so it never waits for the dead and never
       ends on two different sets. vs_world_respawn starts a replacement thread.
   2)  NCCL: the job's fail-fast (vs_launch), or a notice (processes), revokes
       the world's ncclComm_t (ncclCommRevoke: it stops this rank's operations
       and keeps the handle) instead of aborting it. A shrink waits until it is
       quiet and makes the new world with ncclCommShrink (NCCL_SHRINK_ABORT),
       the ranks that leave excluded.
       - A grow, a shrink where some rank's world handle was aborted, or one
         after a timeout (aborted): a new communicator from an id the agreement
         (the decision) carries.
       - The shrinking mesh's other communicators are aborted first, so the
         streams waiting on a dead peer go on.
       - Needs NCCL 2.27 or later (else the new world comes from a new id).
   3)  NCCL jobs of processes (torchrun-style, vs_world_init) learn of a failure:
       - a rank that calls vs_world_abort (the error path of a trainer) posts a
         notice in the store, which every other rank's waits and watchdog read
         within 50 ms (VS_ERR_ABORTED naming it and its message);
       - a rank whose process ends without a word (a signal) is seen gone by the
         ranks on its host within about 200 ms (each rank writes its pid there;
         kill(pid, 0)), which post the notice for it; at a lighthouse, by every
         rank on any host (its connection closes);
       - one on another host that dies or hangs is found by the others'
         deadlines, and the first of them to shrink posts the notice that stops
         the rest.
   4)  The store: a directory every rank sees (vs_world_desc.elastic_dir or
       VESCALE_ELASTIC_DIR: a local disk for one node, NFS or Lustre across
       nodes), or a lighthouse (elastic_dir = "tcp://host:port", >>lighthouse)
       for ranks that share none. No rank is needed alive (rank 0 included):
       each arrives, and the first that can decide links the decision (a link
       has one winner: every rank follows the same one).
       - A shrink decides when every member has arrived or said it failed, or
         half the world's timeout after this rank arrived: who has not come by
         then is failed (a process on another host that died cannot be told
         from a slow one but by time); if it was only slow it learns so
         (VS_ERR_ABORTED) and may come back with vs_world_grow.
       - A member that dies inside a shrink, after it arrived, makes the new
         communicator time out on the others: they are then at the decision's
         epoch with a communicator that failed, and a second shrink goes on
         without it.
       - Left in a directory: one decision per reconfiguration (a few hundred
         bytes); remove it with the job. Jobs that share a store need
         different run ids (VESCALE_RUN_ID).
       - A lighthouse can never end a healthy job: no wait waits on it, one
         that does not answer is given up with a warning, and it caps and signs
         what clients send (see vs_lighthouse_desc).
   5)  A replacement is a new process of the failed rank started with
       vs_world_desc.join = 1 (or VESCALE_ELASTIC_JOIN=1): it makes no
       rendezvous, asks to come in, and waits in vs_world_grow; the members see
       it in vs_world_joiners. A replacement for a rank whose process still
       runs on its host is VS_ERR_INVALID at vs_world_init.
   6)  MPI with ULFM (built with an MPI that has it, MPIX_Comm_shrink, and run
       with it: Open MPI 5's mpirun --with-ft ulfm): a process that ends is seen
       by the first rank whose operation involves it (MPI's error), which sends
       the others a notice naming it (VS_ERR_ABORTED "world rank 2 failed ...
       its process ended"). vs_world_abort ends this process only (SIGKILL,
       after its notice: the others hear its error; Open MPI's runtime ends the
       whole job on a non-zero exit status, not on a killed process).
   7)  The shrink revokes the world's communicator and shrinks it
       (MPIX_Comm_shrink: MPI's own agreement on who ended); a mesh's dropped
       replica leaves by a split. MPI jobs do not grow back (vs_world_grow:
       VS_ERR_UNSUPPORTED); a rank that left ends its process with status 0.
   8)  Without ULFM, or not run with it: VS_ERR_UNSUPPORTED saying which; the
       job ends on a failure as before and resumes from a checkpoint
       (vs_train_load on fewer ranks). */

#define VS_REFORM_LIST 64 // world ranks listed in a vs_reform_info (the counts are whole)

typedef struct vs_reform_info {
    int epoch;    // reconfigurations the world has taken part in (1 after the first)
    int nfailed;  // world ranks the survivors agreed have failed in this one
    int failed[VS_REFORM_LIST];
    int ndropped; // vs_mesh_shrink: live ranks that left with a failed rank's DP replica
    int dropped[VS_REFORM_LIST];
    int njoined;  // vs_world_grow: ranks that came in (replacements, dropped ranks)
    int joined[VS_REFORM_LIST];
    int nlive;    // ranks in the world's communicator afterwards
    int left;     // 1: this rank left (dropped with its replica): it holds no communicator until vs_world_grow
} vs_reform_info;

/* Collective over the live ranks of the world after a failure (a call that
   returned VS_ERR_ABORTED or VS_ERR_TIMEOUT): they agree on the failed set
   (the ranks gone: returned from their function), and the world's
   communicator becomes a new one over the survivors, in world-rank order
   (vs_world_rank stays; vs_comm_size(vs_world_comm(w)) is the live count).
   The old communicators stay aborted: free what was made on them. info may be
   NULL. Errors:
   - no failure since the last reconfiguration (VS_ERR_STATE: there is nothing
     to shrink from);
   - a rank that neither arrives nor fails within the timeout (VS_ERR_TIMEOUT
     naming it; the failure stands, call again);
   - a rank that left (info.left) calls vs_world_grow instead (VS_ERR_STATE).
   NCCL jobs of processes (an elastic store): "no failure" is none this rank
   saw (a notice, or its own communicator's fault); a rank that came after half
   the timeout is counted failed (VS_ERR_ABORTED saying so on it); see the
   notes above. */
VS_API vs_result vs_world_shrink(vs_world* w, vs_reform_info* info);
/* vs_world_shrink for a mesh: the failed ranks' whole replicas along `dim`
   (NULL: "DP") leave too, so every other dim stays whole. *out: the smaller
   mesh (same dim names, `dim` smaller, the ranks in the old order), or NULL on
   a rank that left (info->left = 1: it keeps no communicator and may come back
   with vs_world_grow). The mesh must be over the world's communicator (as
   vs_parallelize's is) and every live rank calls this, not vs_world_shrink.
   m stays the caller's to free. Errors:
   - a submesh (shrink its root);
   - a mesh shrunk before (VS_ERR_STATE: the smaller mesh it gave is the one to
     shrink);
   - no failure (VS_ERR_STATE);
   - every replica lost a rank (VS_ERR_STATE naming the failed ranks: no
     replica holds their part; resume from a checkpoint). */
VS_API vs_result vs_mesh_shrink(vs_mesh* m, const char* dim, vs_mesh** out, vs_reform_info* info);
/* Collective over every rank of the job that is alive: the world's members, the
   ranks that left at a shrink, and replacements (vs_world_respawn): the world's
   communicator becomes one over all of them, in world-rank order (with every
   failed rank replaced: the original one). Make the mesh again on it
   (vs_mesh_init). Ranks already in the world call it at a step boundary, all at
   the same one: vs_world_joiners says when someone waits.
   - A failure while ranks wait here: VS_ERR_ABORTED on each (the members then
     shrink; the others call this again).
   - vs_launch jobs (threads, NCCL) and NCCL jobs of processes with an elastic
     store only (else VS_ERR_UNSUPPORTED); there a replacement nobody takes in
     within the timeout is VS_ERR_TIMEOUT, its request withdrawn. */
VS_API vs_result vs_world_grow(vs_world* w, vs_reform_info* info);
/* Collective over the world's communicator: *n = ranks waiting in
   vs_world_grow to come in (the same on every member: the largest any saw). */
VS_API vs_result vs_world_joiners(vs_world* w, int* n);
/* vs_launch jobs (threads, NCCL): starts a replacement for world rank `rank`,
   which has failed (its function returned): a new thread runs the job's
   function with a new world of that rank, where vs_world_joining is 1 and
   vs_world_comm is NULL; it comes in with vs_world_grow (on NCCL its GPU is
   chosen there, by local rank, as the first one's was). vs_launch waits for it
   too and reports its result instead of the failed one's. A rank that is alive is VS_ERR_INVALID. Any rank, any time. */
VS_API vs_result vs_world_respawn(vs_world* w, int rank);
/* 1 on a replacement's world, and on a rank that left at a shrink, until its
   vs_world_grow succeeds; 0 otherwise. */
VS_API int vs_world_joining(const vs_world* w);

// >>lighthouse ---------------------------------------------------------------

/* A lighthouse: the store of an NCCL job of processes whose ranks share no
   directory.

       vs_lighthouse* lh = NULL;
       vs_lighthouse_start_desc(&(vs_lighthouse_desc){ .port = 29400, .token = secret }, &lh);
       ... every rank: elastic_dir = "tcp://<this host>:29400", elastic_token = secret
       vs_lighthouse_stop(lh);

   Start one where it outlives every rank (the launcher's node:
   tools/vescale-lighthouse, or this call in the launcher). It serves on a
   thread of its own until vs_lighthouse_stop; what the ranks post lives in
   its memory. A rank's process that ends, on any host, is seen by the
   others within about 200 ms (its connection closes), where a directory
   sees only those on its own host. Jobs that share one need different run
   ids (VESCALE_RUN_ID).

   It can never end a healthy job:
   - ranks never wait on it inside a collective (a watcher thread per rank
     looks every 50 ms); a request it does not answer within 5 s
     (vs_world_desc.lighthouse_wait_s) makes every rank give it up, once,
     with a warning ("the lighthouse at ... does not answer: this job can no
     longer survive a failure"), and train on;
   - it never blocks on a client: an answer a client does not take waits in
     that connection's buffer, and the connection is closed after stall_s;
   - it caps what clients hold (connections, value size, entries per job,
     bytes in all) and refuses beyond with a message naming the limit; idle
     connections that hold no rank's entry are closed after idle_s (and at
     max_conns the longest idle one makes room); a job nobody holds or
     touched for expire_s is forgotten;
   - with a token, every request is signed (HMAC-SHA256 of the connection's
     nonce, a sequence number, the key and value): a client without the
     token cannot read, write or post a notice, and a captured request is
     refused when replayed. Without one it says so once (a warning) and
     trusts what it is sent.
   Errors: a port or limit out of range (VS_ERR_INVALID); an address that
   does not resolve or a port in use (VS_ERR_IO naming it). */
typedef struct vs_lighthouse vs_lighthouse;
typedef struct vs_lighthouse_desc {
    const char* addr;   // the address to listen on (NULL or "": every one)
    int port;           // 0: any free one (vs_lighthouse_port says which)
    const char* token;  // the jobs' shared secret (NULL: VESCALE_LIGHTHOUSE_TOKEN; neither: none); not read back
    int max_conns;      // 0: 512, at most the descriptor limit (ulimit -n) less 24
    double idle_s;      // 0: 60; a connection holding no rank's entry and silent this long is closed
    double stall_s;     // 0: 5; a connection that does not take its answer this long is closed
    size_t max_value;   // 0: 1 MiB; a longer value is refused
    int max_keys;       // 0: 65536 entries per job
    size_t max_bytes;   // 0: 64 MiB: entries (keys, values, 64 bytes each) and answers waiting, in all
    double expire_s;    // 0: 600; a job no connection holds an entry of, untouched this long, is forgotten
    vs_logger logger;   // its warnings (NULL fn: stderr at the level below)
    vs_log_level log_level; // DEFAULT: VESCALE_LOG
} vs_lighthouse_desc;
/* What a lighthouse holds now (refreshed once a second). */
typedef struct vs_lighthouse_stats {
    int conns, jobs;
    long long entries;
    long long bytes;    // entries' bytes, as max_bytes counts them
    long long pending;  // answers not yet taken by their clients
    long long refused;  // requests refused (a limit, a bad signature) and connections turned away
    long long closed;   // connections closed for idling or for not taking their answers
} vs_lighthouse_stats;
VS_API vs_result vs_lighthouse_start_desc(const vs_lighthouse_desc* desc, vs_lighthouse** out);
VS_API vs_result vs_lighthouse_start(const char* addr, int port, vs_lighthouse** out); // the defaults otherwise
/* desc (NULL: all defaults) as vs_lighthouse_start_desc resolves it. */
VS_API vs_result vs_lighthouse_query_desc(const vs_lighthouse_desc* desc, vs_lighthouse_desc* out);
VS_API vs_result vs_lighthouse_query_stats(vs_lighthouse* lh, vs_lighthouse_stats* out);
VS_API int vs_lighthouse_port(const vs_lighthouse* lh); // 0 for NULL
VS_API void vs_lighthouse_stop(vs_lighthouse* lh);      // NULL: nothing

// >>kernels ------------------------------------------------------------------
/* Compiles CUDA C++ `src` at run time with NVRTC for `arch` ("sm_90": a cubin,
   "compute_90": PTX) the way vescale's own kernels are built (--fmad=false, IEEE
   division and square root) into *image, *size bytes from w's allocator hooks
   (free it with vs_free(w, *image); w may be NULL: malloc). No device needed.
   VS_ERR_UNAVAILABLE in a build without NVRTC (VESCALE_NCCL or VESCALE_NVRTC);
   VS_ERR_BACKEND with NVRTC's log when the source does not compile. */
VS_API vs_result vs_nvrtc_compile(const vs_world* w, const char* src, const char* name, const char* arch,
                                  char** image, size_t* size);

/* The kernel vocabulary: device kernels written once, as text in the VS_MK*
   words below, and built twice: as host C with VS_MK_DEVICE defined 0 (each
   kernel a plain loop, each "thread block" a loop over its threads: the host
   path) and, with it 1, stringified (VS_MKSTR) into NVRTC source that
   vs_kernels_get compiles and loads, so a trainer built by gcc gets device
   kernels without nvcc. The library's parts write theirs so, and a trainer's
   own kernels may too (examples/gpt_kernels.h). A text:
       #define MY_KERNELS \
           VS_MKGLOBAL VS_MKSEL(my_h_axpy, my_axpy)(float* y, const float* x, float a, long long n) \
           { \
               VS_MKLOOP(i, n) y[i] = y[i] + a * x[i]; \
           }
       #define VS_MK_DEVICE 0
       MY_KERNELS                                  (the host build: my_h_axpy)
       #undef VS_MK_DEVICE
       #define VS_MK_DEVICE 1
       static const char my_body[] = VS_MKSTR(MY_KERNELS) "\n";   (the device build)
       #undef VS_MK_DEVICE
   Block comments only in a text (it becomes one line). The shared words
   VS_MK_DTYPES define (bf16/f16 conversions, ld/st of an f32/bf16/f16 element)
   are in NVRTC's prelude; a host build expands VS_MK_HOSTBITS and VS_MK_DTYPES
   once per file (guard: VS_MK_HOST_SHARED, as the library's texts do).

   Each kernel is declared once, beside its text (vs_kernel_decl): its name,
   its arguments (one letter each) and a cost function giving its arithmetic,
   its memory traffic and the bytes each pointer argument touches from its
   arguments, so a launcher can marshal it, and a stand-in runtime can run and
   time it, without a second copy of its signature (tests/strict/ builds its
   kernel table and its clock from these). */
#define VS_KERNEL_MAX_ARGS 16
/* A launch's cost, as its declaration's cost function states it. */
typedef struct vs_kernel_cost {
    double flops;   /* arithmetic operations (an exp, log or tanh: a stated count, see the text's declarations) */
    double bytes;   /* device memory traffic: bytes read plus bytes written, each operand once */
    vs_dtype dtype; /* the arithmetic's precision: VS_F32 (also 0), or VS_BF16 / VS_F16 on tensor cores */
    /* pointer argument i touches [off[i], off[i] + len[i]) bytes from where it
       points; len[i] < 0 (the default): from it to its allocation's end */
    long long off[VS_KERNEL_MAX_ARGS], len[VS_KERNEL_MAX_ARGS];
} vs_kernel_cost;
/* a[i] points at argument i, as a launch passes them (cudaLaunchKernel's args);
   *c comes zeroed, len[] -1 (vs_kernel_cost_get) */
typedef void (*vs_kernel_cost_fn)(void** a, vs_kernel_cost* c);
typedef struct vs_kernel_decl {
    const char* name;     /* its extern "C" name in the text ("vs_k_adamw") */
    /* a letter an argument, in order: w a pointer the kernel writes (it may read it
       too), r a pointer it only reads, i int, l long long, u unsigned long long,
       f float, d double, s a struct passed by value (struct_size bytes) */
    const char* args;
    const char* argnames; /* their names, space-separated (messages) */
    vs_kernel_cost_fn cost;
    int struct_size;      /* the 's' argument's bytes (0: none) */
} vs_kernel_decl;
/* d's cost for a launch with arguments a: VS_ERR_INVALID naming the kernel when
   it declares no cost function. */
VS_API vs_result vs_kernel_cost_get(const vs_kernel_decl* d, void** a, vs_kernel_cost* out);

typedef struct vs_kernel_text {
    const char* name;              /* NVRTC's program name, for messages ("vescale_ddp_kernels.cu") */
    const char* body;              /* the kernels' NVRTC source; compiled after the shared prelude
                                      (the vs_rtc_* qualifiers, VS_MK_DTYPES' device build) */
    int count;                     /* kernels */
    const vs_kernel_decl* kernels; /* their declarations (kernels[i].name: its extern "C" name) */
    /* kernel k's host build, computing what a launch computes (the device's
       block decomposition where it matters), on a launch's arguments (a[i]
       points at argument i): what a stand-in runtime runs (NULL: none) */
    void (*host)(int k, void** a);
} vs_kernel_text;
/* t's kernels for the calling thread's current CUDA device: kernels[i] gets
   t->kernels[i]'s cudaKernel_t. t and its strings must be static storage: the
   cache keeps them. Any thread; threads asking at once wait for one compile.
   - NVRTC compiles t once per process and device architecture: a cubin for the
     device's sm_XY, or, for a device newer than the NVRTC, PTX for the newest
     compute_XY that NVRTC knows (the driver compiles it for the device).
   - The image is loaded once per process too (cudaLibraryLoadData: the library
     and its kernels are context-independent; every device of that
     architecture runs them).
   - Compiled images and libraries are kept until the process exits (never
     unloaded: the driver releases them with the process).
   Errors: VS_ERR_UNAVAILABLE in a build without CUDA (VESCALE_NCCL);
   VS_ERR_BACKEND with NVRTC's log or CUDA's error; messages start with fn
   (NULL: "vs_kernels_get"). */
VS_API vs_result vs_kernels_get(const vs_kernel_text* t, const char* fn, void** kernels);
/* VS_ERR_BACKEND with "fn: what: <CUDA's error string>" for the CUDA error code
   err (a cudaError_t), which vs_last_backend_code() then gives. */
VS_API vs_result vs_cuda_error(int err, const char* fn, const char* what);

/* The words: each is its host meaning where VS_MK_DEVICE is 0 at the point of
   use, its device meaning where it is 1. A loop word's first parameter names
   its variable (any name but x, y, z: blockIdx.x would become blockIdx.<it> in
   the device build). */
#define VS_MKSEL(h, d) _VS_MKSEL_(VS_MK_DEVICE, h, d)
#define _VS_MKSEL_(m, h, d) _VS_MKSEL__(m, h, d)
#define _VS_MKSEL__(m, h, d) _VS_MKSEL_##m(h, d)
#define _VS_MKSEL_0(h, d) h
#define _VS_MKSEL_1(h, d) d
#if defined(__GNUC__) || defined(__clang__)
#define _VS_MKHOSTFN static __attribute__((unused))
#else
#define _VS_MKHOSTFN static
#endif
#define VS_MKDEV VS_MKSEL(_VS_MKHOSTFN, vs_rtc_device static)         /* a device function */
#define VS_MKGLOBAL VS_MKSEL(_VS_MKHOSTFN void, vs_rtc_global void)   /* a kernel */
#define VS_MKN(x) VS_MKSEL(_vs_mk_##x, vs_mk_##x)                     /* names of the shared text */
#define VS_MKLOOP VS_MKSEL(_VS_MKLOOP_H, _VS_MKLOOP_D)                /* (x, n): x over [0, n), grid-strided */
#define VS_MKROWS VS_MKSEL(_VS_MKROWS_H, _VS_MKROWS_D)                /* (i, n): row i of n, a block each */
#define VS_MKTHREADS VS_MKSEL(_VS_MKTHREADS_H, _VS_MKTHREADS_D)       /* (t): each thread t of the block */
#define VS_MKTHREADS_BELOW VS_MKSEL(_VS_MKTHREADS_BELOW_H, _VS_MKTHREADS_BELOW_D) /* (t, k): those below k */
#define VS_MKSYNC VS_MKSEL(((void)0), vs_rtc_sync())                  /* __syncthreads */
#define VS_MKPUBLISH VS_MKSEL(_VS_MKPUBLISH_H, _VS_MKPUBLISH_D)       /* (p, v): *p = v, after the writes before */
#define VS_MKSHARED VS_MKSEL(, vs_rtc_shared)                         /* __shared__ */
#define VS_MKU2F VS_MKSEL(_vs_mk_u2f, __uint_as_float)                /* bits as float, and back */
#define VS_MKF2U VS_MKSEL(_vs_mk_f2u, __float_as_uint)
#define VS_MKU2D VS_MKSEL(_vs_mk_u2d, _VS_MKU2D_D)                    /* bits as double, and back */
#define VS_MKD2U VS_MKSEL(_vs_mk_d2u, _VS_MKD2U_D)
#define _VS_MKPUBLISH_H(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define _VS_MKPUBLISH_D(p, v) (__threadfence_system(), *(volatile long long*)(p) = (v))
/* (the parameters' names are ones a kernel does not use: a parameter named x
   would rewrite blockIdx.x, in the device build only) */
#define _VS_MKLOOP_H(vs_v_, n) for (long long vs_v_ = 0; vs_v_ < (n); vs_v_++)
#define _VS_MKLOOP_D(vs_v_, n) \
    for (long long vs_v_ = blockIdx.x * (long long)blockDim.x + threadIdx.x; vs_v_ < (n); \
         vs_v_ += (long long)gridDim.x * blockDim.x)
#define _VS_MKROWS_H(vs_v_, n) for (long long vs_v_ = 0; vs_v_ < (n); vs_v_++)
#define _VS_MKROWS_D(vs_v_, n) for (long long vs_v_ = blockIdx.x; vs_v_ < (n); vs_v_ += gridDim.x)
#define _VS_MKTHREADS_H(vs_v_) for (int vs_v_ = 0; vs_v_ < VS_MKT; vs_v_++)
#define _VS_MKTHREADS_D(vs_v_) for (int vs_v_ = (int)threadIdx.x, vs_v_##_once = 1; vs_v_##_once; vs_v_##_once = 0)
#define _VS_MKTHREADS_BELOW_H(vs_v_, k) for (int vs_v_ = 0; vs_v_ < (k) && vs_v_ < VS_MKT; vs_v_++)
#define _VS_MKTHREADS_BELOW_D(vs_v_, k) _VS_MKTHREADS_D(vs_v_) if (vs_v_ < (k))
#define _VS_MKU2D_D(u) __longlong_as_double((long long)(u))
#define _VS_MKD2U_D(d) ((unsigned long long)__double_as_longlong(d))
#define VS_MKT 256 /* threads per block */
#define _VS_MKSTR_(...) #__VA_ARGS__
#define VS_MKSTR(...) _VS_MKSTR_(__VA_ARGS__) /* a text as one string (its words expanded first) */
/* (s, cnt, width, OP): a block's row reduction, after its threads below cnt
   left their partials in s[0, cnt) (shared) and every thread of the block
   reaches it: s[0] = the partials folded by a tree, OP(s[u], s[u + w]) for w =
   width/2, width/4, ..., 1 (a barrier after each level), the same order on host
   and device. width: the block's threads (VS_MKT; 1 folds nothing: a host
   build that reduces in order); OP: VS_MK_ADD, VS_MK_MAX, VS_MK_MIN or a
   macro of one's own. */
#define VS_MKFOLD(s, cnt, width, OP) \
    for (int vs_w_ = (width) / 2; vs_w_ > 0; vs_w_ /= 2) { \
        VS_MKTHREADS_BELOW(vs_u_, vs_w_ < (cnt) - vs_w_ ? vs_w_ : (cnt) - vs_w_) \
        (s)[vs_u_] = OP((s)[vs_u_], (s)[vs_u_ + vs_w_]); \
        VS_MKSYNC; \
    }
#define VS_MK_ADD(a, b) ((a) + (b))
#define VS_MK_MAX(a, b) ((b) > (a) ? (b) : (a))
#define VS_MK_MIN(a, b) ((b) < (a) ? (b) : (a))
/* (n, width): how many threads reduce n elements, each strided partial at least
   one: min(n, width), and 1 when n <= 0 */
#define VS_MKWIDTH(n, width) ((n) < (width) ? ((n) > 0 ? (int)(n) : 1) : (width))
/* In a cost function (vs_kernel_cost_fn): argument i as type T; the bytes of
   an element of the ld/st codes (0 f32, 1 bf16, 2 f16). */
#define VS_MKARG(T, i) (*(T*)a[i])
#define VS_MKESZ(t) ((t) == 0 ? 4.0 : 2.0)

/* The host build's bit casts (the device has its intrinsics). */
#define VS_MK_HOSTBITS \
    _VS_MKHOSTFN float _vs_mk_u2f(unsigned int u) \
    { \
        float f; \
        memcpy(&f, &u, 4); \
        return f; \
    } \
    _VS_MKHOSTFN unsigned int _vs_mk_f2u(float f) \
    { \
        unsigned int u; \
        memcpy(&u, &f, 4); \
        return u; \
    } \
    _VS_MKHOSTFN double _vs_mk_u2d(unsigned long long u) \
    { \
        double d; \
        memcpy(&d, &u, 8); \
        return d; \
    } \
    _VS_MKHOSTFN unsigned long long _vs_mk_d2u(double d) \
    { \
        unsigned long long u; \
        memcpy(&u, &d, 8); \
        return u; \
    }

/* The shared text, NVRTC's prelude: f32 to bf16 and f16 and f16 to f32, round
   to nearest even (NaN stays quiet), the same bits as vs_f32_to_bf16,
   vs_f32_to_f16 and vs_f16_to_f32 (bf16 to f32 is VS_MKU2F(h << 16)), and
   element i of p as f32 and back, p of storage code t (0 f32, 1 bf16, 2 f16;
   the stored value rounded once): VS_MKN(bf16), VS_MKN(f16), VS_MKN(from_f16),
   VS_MKN(ld)(p, t, i), VS_MKN(st)(p, t, i, v). */
#define VS_MK_DTYPES \
    VS_MKDEV unsigned short VS_MKN(bf16)(float f) \
    { \
        unsigned int u = VS_MKF2U(f); \
        if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u); \
        return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); \
    } \
    VS_MKDEV unsigned short VS_MKN(f16)(float f) \
    { \
        unsigned int u = VS_MKF2U(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu, sh, m, q, rem, half; \
        if (a > 0x7f800000u) return (unsigned short)(sign | 0x7e00u); \
        if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u); /* rounds to inf */ \
        if (a < 0x33000000u) return (unsigned short)sign; /* below half the smallest subnormal */ \
        if (a < 0x38800000u) { /* subnormal */ \
            sh = 126u - (a >> 23), m = (a & 0x7fffffu) | 0x800000u; \
            q = m >> sh, rem = m & ((1u << sh) - 1u), half = 1u << (sh - 1u); \
            return (unsigned short)(sign | (q + (rem > half || (rem == half && (q & 1u))))); \
        } \
        m = a - 0x38000000u, q = m >> 13, rem = m & 0x1fffu; /* rebias the exponent 127 -> 15 */ \
        return (unsigned short)(sign | (q + (rem > 0x1000u || (rem == 0x1000u && (q & 1u))))); \
    } \
    VS_MKDEV float VS_MKN(from_f16)(unsigned int h) \
    { \
        unsigned int sign = (h & 0x8000u) << 16, ex = (h >> 10) & 0x1fu, man = h & 0x3ffu; \
        float f; \
        if (ex == 0x1fu) return VS_MKU2F(sign | 0x7f800000u | (man << 13)); \
        if (ex == 0) { /* subnormal: man * 2^-24 */ \
            f = (float)man * (1.0f / 16777216.0f); \
            return sign ? -f : f; \
        } \
        return VS_MKU2F(sign | ((ex + 112u) << 23) | (man << 13)); \
    } \
    VS_MKDEV float VS_MKN(ld)(const void* p, int t, long long i) \
    { \
        if (t == 0) return ((const float*)p)[i]; \
        if (t == 1) return VS_MKU2F((unsigned int)((const unsigned short*)p)[i] << 16); \
        return VS_MKN(from_f16)(((const unsigned short*)p)[i]); \
    } \
    VS_MKDEV void VS_MKN(st)(void* p, int t, long long i, float v) \
    { \
        if (t == 0) \
            ((float*)p)[i] = v; \
        else \
            ((unsigned short*)p)[i] = t == 1 ? VS_MKN(bf16)(v) : VS_MKN(f16)(v); \
    }

// >>layout -------------------------------------------------------------------

#define VS_TENSOR_MAX_DIMS 8

/* Where a tensor lives along one mesh dim. Zero is Replicate. */
typedef enum vs_placement_kind {
    VS_PLACE_REPLICATE = 0, // every coordinate holds the whole (current) tensor
    VS_PLACE_SHARD,         // chunked along tensor dim `dim` like torch.chunk
    VS_PLACE_PARTIAL        // every coordinate holds a partial value; `op` combines them
} vs_placement_kind;

typedef struct vs_placement {
    vs_placement_kind kind;
    int dim;  // Shard: tensor dim
    vs_op op; // Partial: reduction (VS_OP_DEFAULT = sum)
} vs_placement;

VS_API vs_placement vs_replicate(void);
VS_API vs_placement vs_shard(int dim);
VS_API vs_placement vs_partial(vs_op op);

/* A layout: a mesh and one placement per mesh dim (entries past the mesh's dims
   are ignored). Several mesh dims may shard one tensor dim: outer mesh dim first,
   each chunking the chunk of the one before (as DTensor does). */
typedef struct vs_layout {
    vs_mesh* mesh;
    vs_placement p[VS_MESH_MAX_DIMS];
} vs_layout;

/* A distributed tensor as one rank sees it: its global shape, layout and this
   rank's local shard (row-major, contiguous; host memory, CUDA device memory on NCCL). */
typedef struct vs_dtensor {
    vs_layout layout;
    vs_dtype dtype;
    int ndim;
    int64_t shape[VS_TENSOR_MAX_DIMS];
    void* data;
} vs_dtensor;

/* Checks the layout against a tensor of `ndim` dims (shard dims, ops). */
VS_API vs_result vs_layout_check(const vs_layout* L, int ndim);
/* Shape and global offset of the shard that mesh rank `mesh_rank` holds of a tensor
   of global `shape` (ndim entries each; local_shape and offset may be NULL). The
   numbers are vs_layout_box's for the mesh's shape and mesh_rank's coordinate.
   Empty shard: a coordinate past the last chunk of a dim holds size 0 there, at the
   offset where the chunk it cuts ends; with one mesh dim sharding that tensor dim,
   that is the dim's size (DTensor's convention: Shard(0) of 3 rows over 4 ranks
   gives rank 3 size 0 at offset 3). Several mesh dims sharding one tensor dim:
   the end of the enclosing chunk (Shard(0), Shard(0) of 4 rows on a 2x3 mesh:
   coordinate (0, 2) holds size 0 at offset 2). */
VS_API vs_result vs_layout_local(const vs_layout* L, int ndim, const int64_t* shape, int mesh_rank,
                                 int64_t* local_shape, int64_t* offset);
/* Layout arithmetic without a mesh, for meshes that do not exist in this job
   (planners, checkpoint tools): the local shape and global offset that coordinate
   `coord` holds of a tensor of global `shape` (ndim dims) under `placements`
   (mesh_ndims entries) on a mesh of mesh_ndims dims of sizes mesh_shape, outermost
   first. The same numbers vs_layout_local gives on a live mesh of that shape.
   Replicate and Partial dims do not cut the tensor (every coordinate along them
   holds the same box). Writes ndim entries of local_shape and offset (either
   may be NULL), nothing on error. No communication; any thread. Checks:
   - mesh_ndims in [1, VS_MESH_MAX_DIMS], sizes >= 1 and at most INT_MAX ranks
     (as vs_mesh_init);
   - placements as vs_layout_check (Shard dim in [0, ndim), Partial with a
     valid op, no other kinds);
   - shape dims >= 0 and fewer than 2^63 elements; 0 <= coord[k] < mesh_shape[k].
   Empty shard: a coordinate past the last chunk of a dim holds size 0 there, at the
   offset where the chunk it cuts ends; with one mesh dim sharding that tensor dim,
   that is the dim's size (DTensor's convention: Shard(0) of 3 rows over 4 ranks
   gives coordinate 3 size 0 at offset 3). Several mesh dims sharding one tensor dim:
   the end of the enclosing chunk (Shard(0), Shard(0) of 4 rows on a 2x3 mesh:
   coordinate (0, 2) holds size 0 at offset 2). A dim of size 0: size 0 at 0. */
VS_API vs_result vs_layout_box(int mesh_ndims, const int* mesh_shape, const vs_placement* placements, int ndim,
                               const int64_t* shape, const int* coord, int64_t* local_shape, int64_t* offset);
/* The coordinate (mesh_ndims entries) of mesh rank `mesh_rank` in a mesh of this
   shape: row-major, as vs_mesh_init places ranks (vs_mesh_coord_of without a mesh).
   Checks the shape as vs_layout_box and 0 <= mesh_rank < the rank count. */
VS_API vs_result vs_layout_rank_coord(int mesh_ndims, const int* mesh_shape, int mesh_rank, int* coord);
/* Elements of this rank's shard of t. */
VS_API vs_result vs_dtensor_local_numel(const vs_dtensor* t, int64_t* numel);
/* "[Shard(0), Replicate, Partial(sum)]". Returns the length it needs. */
VS_API int vs_layout_format(const vs_layout* L, char* buf, size_t cap);
/* Parses what vs_layout_format writes (also the short forms S(0), R, P(sum)); one
   placement per mesh dim. */
VS_API vs_result vs_layout_parse(vs_mesh* mesh, const char* text, vs_layout* out);
/* The same text without a mesh: exactly mesh_ndims placements (1..VS_MESH_MAX_DIMS)
   into out[0..mesh_ndims), written only on success. Shard dims are checked against
   a tensor later (vs_layout_box, vs_layout_check). */
VS_API vs_result vs_layout_parse_placements(int mesh_ndims, const char* text, vs_placement* out);

/* Moves a tensor from src's layout to dst's (same mesh, dtype and global shape),
   reading src->data and writing dst->data (sized by vs_dtensor_local_numel).
   Collective over the mesh: every rank calls it with the same layouts. Uses, per
   mesh dim: all-gather (S->R), all-reduce (P->R), reduce-scatter (P->S), local
   slices (R->S), all-to-all (S(i)->S(j)), zero fill (R->P, S->P). On error nothing
   is written to dst->data.
   - Threads and MPI: host buffers; scratch is kept in the mesh for the next
     call (vs_mesh_free releases it).
   - NCCL: CUDA device buffers; strided blocks are packed and unpacked by
     kernels on each step's communicator's stream; device scratch comes from the
     world's hooks and is kept in the mesh too (grow-only, the device drained
     before it grows; vs_mesh_free releases it). The call returns when its work
     is enqueued: dst->data is ready in stream order on the caller's stream of
     the mesh's communicator (the one set with vs_comm_set_stream, else the
     legacy default stream), after what was enqueued there before the call; the
     host does not wait (see Threads and streams in the top comment). */
VS_API vs_result vs_redistribute(const vs_dtensor* src, const vs_dtensor* dst);

// >>tp -----------------------------------------------------------------------
/* Megatron's tensor- and sequence-parallel regions as named uses of redistribute,
   over a 1-D TP mesh (vs_mesh_submesh(mesh, "TP", &tp)). `shape` is the global
   (unsharded) shape, `seq_dim` the dim that sequence parallelism shards. Backward
   counterparts carry gradients. All collective over tp.

   Buffers (ids and targets too) are host memory, or CUDA device memory on
   NCCL: the gathers, scatter-adds and the cross-entropy then run as kernels on
   tp's communicator's stream, and every function here returns when its work is
   enqueued: results are ready in stream order on the caller's stream (tp's
   communicator's: the one set with vs_comm_set_stream, else the legacy default
   stream), after what was enqueued there before the call; no host sync (a
   trainer's one a step: its loss read).

   Ids out of range are VS_ERR_INVALID naming the first one and its position:
   - on the host: the call fails before anything runs;
   - on the device a kernel finds it (no copy of the ids, no sync) and the
     kernels leave that id out (the outputs are not meaningful); the call has
     returned by then, so a later vocab call on the same mesh fails instead,
     naming the earlier one: "vs_vocab_cross_entropy:
     vs_vocab_embedding_forward (the previous call on this mesh): id 512 at
     position 7 out of range [0, 301) ...";
   - each vocab call reads the checks still in flight (without a CUDA call)
     before it runs anything, so the report comes at the first vocab call after
     the check's kernel ran (surely after a host sync, e.g. the loss read);
   - up to 16 checks stay in flight (one more waits for the oldest), and
     vs_mesh_free waits for them, failing with the report if no call gave it. */

/* Column-parallel input [copy_to_tensor_model_parallel_region]: forward is the
   identity; backward all-reduces (sums) the input gradient in place. */
VS_API vs_result vs_tp_copy_backward(vs_mesh* tp, void* grad, size_t count, vs_dtype dt);
/* Row-parallel output [reduce_from_tensor_model_parallel_region]: forward
   all-reduces the partial outputs in place; backward is the identity. */
VS_API vs_result vs_tp_reduce_forward(vs_mesh* tp, void* x, size_t count, vs_dtype dt);
/* Row-parallel output with its bias [RowParallelLinear's forward after the
   matmul]: y (rows x cols, row-major) holds this rank's partial product
   x_shard W_shard^T; it is summed over TP in place and the bias (cols entries,
   Replicate over TP: the same on every TP rank) is added to every row, once:
       y = sum over TP of y + bias          whole, on every TP rank.

   The bias is added after the sum, on every rank, rather than on TP coordinate 0
   before it: the sum then rounds as without a bias and the bias is rounded in
   once, as y = x W^T + b on one rank does (added to one partial first, it would
   be rounded into every step of the sum; with f16/bf16 partials that cancel it
   can be lost). The cost is the same: one elementwise pass over y on the
   critical path either way (before the sum the other ranks wait for coordinate
   0's at the all-reduce).

   dt is y's dtype: f32, f64, f16 or bf16; bias_dt is dt, or f32 for f16/bf16 y
   (the add in f32, rounded to dt once). Host buffers, or CUDA device memory on
   NCCL: the all-reduce and one kernel on tp's communicator's stream, returning
   when enqueued (stream order as the other functions here, no host sync).

   Backward [the bias gradient]: the backward of the sum is the identity, so dy
   (rows x cols) is whole and the same on every TP rank; db[j] = sum over rows i
   of dy[i][j] is then the same on every TP rank too and needs no TP collective
   (give DDP the bias with placements Replicate over TP: it averages it over DP
   only); dx_shard = dy W_shard and dW_shard = dy^T x_shard are this rank's. */
VS_API vs_result vs_tp_reduce_forward_bias(vs_mesh* tp, void* y, int64_t rows, int64_t cols, vs_dtype dt,
                                           const void* bias, vs_dtype bias_dt);
/* Sequence-parallel gather [gather_from_sequence_parallel_region]: forward
   all-gathers along seq_dim (Shard -> Replicate); backward reduce-scatters the
   gradient (Partial -> Shard). `in` is local, `out` full, or the reverse. */
VS_API vs_result vs_sp_gather_forward(vs_mesh* tp, vs_dtype dt, int ndim, const int64_t* shape, int seq_dim,
                                      const void* in, void* out);
VS_API vs_result vs_sp_gather_backward(vs_mesh* tp, vs_dtype dt, int ndim, const int64_t* shape, int seq_dim,
                                       const void* grad_full, void* grad_local);
/* Sequence-parallel scatter [reduce_scatter_to_sequence_parallel_region]: forward
   reduce-scatters partial sums along seq_dim; backward all-gathers. */
VS_API vs_result vs_sp_scatter_forward(vs_mesh* tp, vs_dtype dt, int ndim, const int64_t* shape, int seq_dim,
                                       const void* partial_full, void* out_local);
VS_API vs_result vs_sp_scatter_backward(vs_mesh* tp, vs_dtype dt, int ndim, const int64_t* shape, int seq_dim,
                                        const void* grad_local, void* grad_full);

/* Rows of a `vocab`-row table this TP rank holds under Shard(0) (torch.chunk). */
VS_API vs_result vs_vocab_range(vs_mesh* tp, int64_t vocab, int64_t* start, int64_t* rows);
/* Vocab-parallel embedding: table_shard holds this rank's rows (vs_vocab_range) of a
   vocab x dim f32 table; out (n x dim) gets the embedding of each id, summed over
   TP so every rank has all rows. Ids outside [0, vocab) are an error. */
VS_API vs_result vs_vocab_embedding_forward(vs_mesh* tp, const float* table_shard, int64_t vocab, int64_t dim,
                                            const int32_t* ids, int64_t n, float* out);
/* Adds grad_out (n x dim, the same on every rank) into the rows of grad_table_shard
   this rank owns. No communication. */
VS_API vs_result vs_vocab_embedding_backward(vs_mesh* tp, const float* grad_out, const int32_t* ids, int64_t n,
                                             int64_t vocab, int64_t dim, float* grad_table_shard);
/* Vocab-parallel cross-entropy over logits sharded along the vocab (n x vocab,
   this rank holding n x rows of vs_vocab_range): the max and the sum of exps are
   all-reduced over TP, the full logits are never gathered. loss[i] (every rank)
   = logsumexp(logits[i]) - logits[i][targets[i]]. grad_shard (may be NULL) gets
   d loss[i] / d logits: softmax - one_hot, this rank's columns. */
VS_API vs_result vs_vocab_cross_entropy(vs_mesh* tp, const float* logits_shard, int64_t n, int64_t vocab,
                                        const int32_t* targets, float* loss, float* grad_shard);

// >>init ---------------------------------------------------------------------
/* Sharding-invariant initialization: an element's value depends only on (seed,
   tensor name, its global row-major index), drawn from a counter-based generator
   (Philox4x32-10), so any sharding of a tensor equals the same tensor initialized
   whole on one rank, bit for bit. */

typedef enum vs_init_kind {
    VS_INIT_ZEROS = 0,
    VS_INIT_ONES,
    VS_INIT_CONSTANT,     // a
    VS_INIT_UNIFORM,      // [a, b)
    VS_INIT_NORMAL,       // mean a, std b
    VS_INIT_SCALED_NORMAL // mean a, std b / sqrt(2 * num_layers) (GPT output projections)
} vs_init_kind;

typedef struct vs_init_desc {
    vs_init_kind kind;
    uint64_t seed;
    const char* name; // the tensor's name: part of the key (NULL = "")
    double a, b;
    int num_layers;
} vs_init_desc;

/* Fills t->data (this rank's shard) from the global element indices of its box
   (device memory on NCCL: a kernel on the mesh's stream, the same bits; returns
   when enqueued, the values ready in stream order on the caller's stream).
   Random kinds need a floating dtype; a Partial layout is an error. A constant
   must fit the dtype (integers: finite and in range; f16/bf16/f32: inf and NaN,
   or finite within the type's finite range). Local. */
VS_API vs_result vs_init_fill(const vs_dtensor* t, const vs_init_desc* d);
/* The value (before rounding to the dtype) of global element `index`. A uniform
   draw that rounds up to b in the dtype is stored as a instead. */
/* A NULL desc, an unknown kind, a scaled normal with num_layers < 1, a uniform
   range [a, b) that is not finite with a <= b, or a normal whose mean a is not
   finite or whose std b is not finite and >= 0 gives NaN (vs_init_fill: an
   error), with the reason in vs_last_error(). */
VS_API double vs_init_value(const vs_init_desc* d, uint64_t index);
/* Philox4x32-10 of a 128-bit counter under a 64-bit key. out NULL: VS_ERR_NULL. */
VS_API vs_result vs_philox(uint64_t key, uint64_t counter_lo, uint64_t counter_hi, uint32_t out[4]);

#ifdef __cplusplus
}
#endif

#endif // VESCALE_MESH_INCLUDED

/* ========================================================================== */
/*                              IMPLEMENTATION                                */
/* ========================================================================== */
#if defined(VESCALE_MESH_IMPLEMENTATION) && !defined(VESCALE_MESH_IMPLEMENTED)
#define VESCALE_MESH_IMPLEMENTED

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

#if defined(__SSE2__) && !defined(VESCALE_NO_SIMD)
#include <emmintrin.h>
#define _VS_HAVE_NT 1
#endif

#ifdef VESCALE_MPI
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1 /* the C API only: the C++ bindings do not build warning-free */
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h> /* (Open MPI's extensions: ULFM's MPIX_ calls where it was built with them) */
#endif
#endif
#ifdef VESCALE_NCCL
#include <cuda_runtime.h>
/* >>kernels loads its kernels with cudaLibraryLoadData / cudaLibraryGetKernel. */
#if !defined(CUDART_VERSION) || CUDART_VERSION < 12000
#error "vescale: VESCALE_NCCL needs CUDA 12.0 or later (cudaLibraryLoadData, cudaLibraryGetKernel); this cuda_runtime.h is older"
#endif
#include <nccl.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define _VS_UNUSED __attribute__((unused))
#define _VS_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define _VS_UNUSED
#define _VS_PRINTF(a, b)
#endif
#define _VS_PRIVATE static _VS_UNUSED

/* Thread-local storage for the per-thread error message (errors must be reportable
   before any handle exists) and vescale_pipe.h's freed NULL-world schedules (no
   world owns them). Both are per thread, so two meshes never share them. */
#if defined(__cplusplus) && __cplusplus >= 201103L
#define _VS_TLS thread_local
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__STDC_NO_THREADS__)
#define _VS_TLS _Thread_local
#else
#define _VS_TLS __thread
#endif

/* Every allocation of the library goes through the allocator hooks (>>hooks):
   n zeroed T from hooks h (h NULL, or a NULL member: the C allocator). The cast:
   C++ needs it, C tolerates it. */
#define _VS_HNEW(h, T, n) ((T*)_vs_hcalloc((h), (size_t)(n), sizeof(T)))

// >>base ----------------------------------------------------------------------

/* A thread's last error. Errors that only report another rank's failure (an
   abort reached this rank: "consequences") carry that rank as their origin, so
   the job's cause is told apart from its cascade: consequences are logged at
   info, not warn, never become a job's cause, and an abort with this thread's
   error (vs_comm_abort_with, NULL message) does not claim them. A wrap of a
   consequence stays one: same code, or a message that quotes the origin's. */
#define _VS_ERR_MSG 1024
#define _VS_ORIGIN_KEY 48
typedef struct _vs_errstate {
    char msg[_VS_ERR_MSG];
    int backend_code;
    const vs_world* world; // this thread's rank, for logging errors (a rank or progress thread)
    uint64_t logged;       // hash of the last message logged, so a re-raised one logs once
    vs_result code;        // the last error's code (VS_OK after vs_clear_error)
    int origin;            // 1 + the world rank whose failure the last error reports; 0: its own
    char origin_key[_VS_ORIGIN_KEY]; // the start of the origin's cause, as consequences quote it
} _vs_errstate;

_VS_PRIVATE _vs_errstate* _vs_err_tls(void)
{
    static _VS_TLS _vs_errstate s;
    return &s;
}

_VS_PRIVATE void _vs_log_error(const vs_world* w, vs_result code, const char* msg, int consequence);

/* Every error the library returns passes here: the message is kept for
   vs_last_error() and logged at warn (once, with the rank) when the level asks;
   a consequence at info. */
_VS_PRIVATE vs_result _vs_verr(vs_result code, int raw, int set_raw, const char* fmt, va_list ap)
{
    _vs_errstate* s = _vs_err_tls();
    char msg[sizeof s->msg]; // formatted apart: an argument may be vs_last_error() itself
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (s->origin && code != s->code && !(s->origin_key[0] && strstr(msg, s->origin_key))) s->origin = 0;
    if (code == VS_OK) s->origin = 0;
    s->code = code;
    memcpy(s->msg, msg, sizeof msg);
    if (set_raw) s->backend_code = raw;
    if (code != VS_OK) {
        uint64_t h = 1469598103934665603ull;
        for (const char* p = s->msg; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
        h ^= (uint64_t)(unsigned)code;
        if (h != s->logged) {
            s->logged = h;
            _vs_log_error(s->world, code, s->msg, s->origin != 0);
        }
    }
    return code;
}

/* A consequence: an error that reports world rank `origin`'s failure, whose
   cause text starts with `cause` (quoted in fmt's message). */
_VS_PRIVATE _VS_PRINTF(4, 5) vs_result _vs_err_from(int origin, const char* cause, vs_result code, const char* fmt, ...)
{
    _vs_errstate* s = _vs_err_tls();
    s->origin = origin >= 0 ? origin + 1 : 0;
    s->code = code;
    s->origin_key[0] = 0;
    if (cause) {
        size_t n = strlen(cause);
        if (n >= sizeof s->origin_key) n = sizeof s->origin_key - 1;
        memcpy(s->origin_key, cause, n);
        s->origin_key[n] = 0;
    }
    va_list ap;
    va_start(ap, fmt);
    _vs_verr(code, 0, 0, fmt, ap);
    va_end(ap);
    return code;
}

_VS_PRIVATE _VS_PRINTF(2, 3) vs_result _vs_err(vs_result code, const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    _vs_verr(code, 0, 0, fmt, ap);
    va_end(ap);
    return code;
}

_VS_PRIVATE vs_result _vs_err_backend(vs_result code, int raw, const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    _vs_verr(code, raw, 1, fmt, ap);
    va_end(ap);
    return code;
}

/* snprintf for messages that may be cut short on purpose (names, lists): a cut is
   fine there, so it goes through vsnprintf, which -Wformat-truncation leaves alone. */
_VS_PRIVATE _VS_PRINTF(3, 4) int _vs_fmt(char* buf, size_t cap, const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return n < 0 ? 0 : n;
}

VS_API const char* vs_result_string(vs_result r)
{
    switch (r) {
    case VS_OK: return "VS_OK";
    case VS_ERR_INVALID: return "VS_ERR_INVALID";
    case VS_ERR_NULL: return "VS_ERR_NULL";
    case VS_ERR_MISMATCH: return "VS_ERR_MISMATCH";
    case VS_ERR_STATE: return "VS_ERR_STATE";
    case VS_ERR_NONFINITE: return "VS_ERR_NONFINITE";
    case VS_ERR_NOMEM: return "VS_ERR_NOMEM";
    case VS_ERR_UNAVAILABLE: return "VS_ERR_UNAVAILABLE";
    case VS_ERR_UNSUPPORTED: return "VS_ERR_UNSUPPORTED";
    case VS_ERR_TIMEOUT: return "VS_ERR_TIMEOUT";
    case VS_ERR_ABORTED: return "VS_ERR_ABORTED";
    case VS_ERR_BACKEND: return "VS_ERR_BACKEND";
    case VS_ERR_IO: return "VS_ERR_IO";
    default: return "VS_ERR_UNKNOWN";
    }
}

VS_API const char* vs_last_error(void)
{
    const char* m = _vs_err_tls()->msg;
#if defined(__GNUC__) || defined(__clang__)
    /* Callers copy the message into buffers of their own size (snprintf "%s"
       cuts it there, as they mean). Where the compiler sees this is the
       1024-byte buffer, -Wformat-truncation (-O1 and up) would hold every such
       buffer to 1024 bytes: the empty asm hides where m points. */
    __asm__("" : "+r"(m));
#endif
    return m;
}

/* Copies this thread's error message into buf (truncated), to carry it across a
   call that may overwrite it or to another thread. */
_VS_PRIVATE void _vs_save_error(char* buf, size_t cap)
{
    const char* m = _vs_err_tls()->msg;
    size_t n = strlen(m);
    if (n >= cap) n = cap - 1;
    memcpy(buf, m, n);
    buf[n] = 0;
}
VS_API int vs_last_backend_code(void) { return _vs_err_tls()->backend_code; }
VS_API vs_result vs_set_error(vs_result code, const char* fmt, ...)
{
    if (!fmt) {
        _vs_err_tls()->msg[0] = 0;
        _vs_err_tls()->origin = 0;
        return code;
    }
    va_list ap;
    va_start(ap, fmt);
    _vs_verr(code, 0, 0, fmt, ap); // (vs_last_error() may be among the arguments)
    va_end(ap);
    return code;
}

VS_API void vs_clear_error(void)
{
    _vs_errstate* s = _vs_err_tls();
    s->msg[0] = 0;
    s->backend_code = 0;
    s->code = VS_OK;
    s->origin = 0;
}
VS_API int vs_version(void) { return VESCALE_VERSION_NUMBER; }
VS_API const char* vs_version_string(void) { return VESCALE_VERSION_STRING; }

#define _VS_CHECK_NULL(p, what)                                                      \
    do {                                                                             \
        if (!(p)) return _vs_err(VS_ERR_NULL, "%s: %s is NULL", __func__, what);     \
    } while (0)

/* A communicator or work handle: NULL, freed (caught while it is quarantined) or
   not a handle at all each give their own error. */
#define _VS_CHECK_HANDLE(p, what)                                                    \
    do {                                                                             \
        _VS_CHECK_NULL(p, what);                                                     \
        if ((p)->magic == _VS_MAGIC_DEAD)                                            \
            return _vs_err(VS_ERR_STATE, "%s: this %s was already freed", __func__, what); \
        if ((p)->magic != _VS_MAGIC_LIVE)                                            \
            return _vs_err(VS_ERR_INVALID, "%s: %p is not a live %s handle", __func__, (const void*)(p), what); \
    } while (0)

// >>time ----------------------------------------------------------------------

_VS_PRIVATE double _vs_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Longest single condition wait: an infinite or huge timeout waits in slices of this
   (and re-checks), so the deadline never overflows time_t (pthread_cond_timedwait
   would return EINVAL at once and the waiter would spin holding the mutex). */
#define _VS_WAIT_SLICE_S 3600.0

/* Condition variables that time out run on CLOCK_MONOTONIC, so a step of the wall
   clock (NTP, an operator) neither fires nor stretches a timeout. */
_VS_PRIVATE void _vs_cond_init(pthread_cond_t* cv)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
}

/* Absolute CLOCK_MONOTONIC deadline for pthread_cond_timedwait on a _vs_cond_init
   condition, at most _VS_WAIT_SLICE_S ahead (negative or NaN: now). */
_VS_PRIVATE struct timespec _vs_abs_deadline(double seconds_from_now)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if (!(seconds_from_now > 0)) seconds_from_now = 0;
    if (seconds_from_now > _VS_WAIT_SLICE_S) seconds_from_now = _VS_WAIT_SLICE_S;
    double s = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + seconds_from_now;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
    return ts;
}

_VS_PRIVATE void _vs_sleep_us(long us)
{
    struct timespec ts;
    ts.tv_sec = us / 1000000L;
    ts.tv_nsec = (us % 1000000L) * 1000L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

_VS_PRIVATE void _vs_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ __volatile__("pause");
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

// >>hooks ---------------------------------------------------------------------

typedef struct _vs_hooks {
    vs_logger logger;
    vs_log_level level;
    int log_returns; // errors functions return are logged (at warn): a level was asked for, not the default's
    vs_allocator alloc;
} _vs_hooks;

static const char* const _vs_level_names[] = {"default", "off", "error", "warn", "info", "debug"};

/* VESCALE_LOG's text: a level name, or a digit 1-5 for the same levels. */
_VS_PRIVATE vs_result _vs_parse_log_level(const char* text, vs_log_level* out)
{
    if (!text) return _vs_err(VS_ERR_NULL, "log level text is NULL");
    for (int l = VS_LOG_OFF; l <= VS_LOG_DEBUG; l++)
        if (!strcmp(text, _vs_level_names[l]) || (text[0] == '0' + l && !text[1])) {
            *out = (vs_log_level)l;
            return VS_OK;
        }
    return _vs_err(VS_ERR_INVALID, "VESCALE_LOG='%.64s' is not one of off, error, warn, info, debug", text);
}

/* The level a desc asks for: its own, else VESCALE_LOG, else warn. */
_VS_PRIVATE vs_result _vs_resolve_level(vs_log_level lv, vs_log_level* out)
{
    if ((int)lv < VS_LOG_DEFAULT || lv > VS_LOG_DEBUG)
        return _vs_err(VS_ERR_INVALID, "log_level %d out of range [VS_LOG_DEFAULT, VS_LOG_DEBUG]", (int)lv);
    *out = lv;
    if (lv != VS_LOG_DEFAULT) return VS_OK;
    *out = VS_LOG_WARN;
    const char* e = getenv("VESCALE_LOG");
    return e && *e ? _vs_parse_log_level(e, out) : VS_OK;
}

static const char* const _vs_debug_names[] = {"desync", "params"}; // bit k: 1 << k

VS_API vs_result vs_debug_modes(const char* text, unsigned* modes)
{
    if (!modes) return _vs_err(VS_ERR_NULL, "vs_debug_modes: modes is NULL");
    const char* e = text ? text : getenv("VESCALE_DEBUG");
    const char* what = text ? "vs_debug_modes" : "environment: VESCALE_DEBUG";
    *modes = 0;
    for (const char* p = e ? e : ""; *p;) {
        while (*p == ',' || *p == ' ') p++;
        const char* q = p;
        while (*q && *q != ',') q++;
        size_t len = (size_t)(q - p), k = 0, n = sizeof _vs_debug_names / sizeof *_vs_debug_names;
        while (len > 0 && p[len - 1] == ' ') len--;
        while (k < n && !(strlen(_vs_debug_names[k]) == len && !strncmp(p, _vs_debug_names[k], len))) k++;
        if (len > 0 && k == n)
            return _vs_err(VS_ERR_INVALID, "%s='%.100s': unknown value '%.*s' (known: desync, params)", what, e,
                           (int)(len < 64 ? len : 64), p);
        if (len > 0) *modes |= 1u << k;
        p = q;
    }
    return VS_OK;
}

/* The names of the VS_DEBUG_* bits in modes, comma-separated, in buf ("": none). */
_VS_PRIVATE void _vs_debug_names_of(unsigned modes, char* buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
    for (size_t k = 0; k < sizeof _vs_debug_names / sizeof *_vs_debug_names; k++)
        if (modes & (1u << k)) {
            int m = snprintf(buf + n, cap - n, "%s%s", n ? "," : "", _vs_debug_names[k]);
            if (m < 0 || (size_t)m >= cap - n) break;
            n += (size_t)m;
        }
}

/* Timeouts above this many seconds (~31 years) mean "no timeout". */
#define _VS_TIMEOUT_FOREVER_S 1e9

/* VESCALE_TIMEOUT's text: seconds > 0, or inf/infinity/forever/0 for no timeout.
   The whole text must be the number ("5s" is an error). */
_VS_PRIVATE vs_result _vs_parse_timeout(const char* text, double* out)
{
    if (!text) return _vs_err(VS_ERR_NULL, "timeout text is NULL");
    if (!strcmp(text, "inf") || !strcmp(text, "infinity") || !strcmp(text, "forever")) {
        *out = INFINITY;
        return VS_OK;
    }
    char* end = NULL;
    double v = strtod(text, &end);
    int number = end != text && !*end && (text[0] == '.' || (text[0] >= '0' && text[0] <= '9'));
    if (!number || !(v >= 0) || v == HUGE_VAL)
        return _vs_err(VS_ERR_INVALID,
                       "VESCALE_TIMEOUT='%.64s' is not a number of seconds >= 0 (or inf; 0 and inf: no timeout)", text);
    *out = v == 0 || v > _VS_TIMEOUT_FOREVER_S ? INFINITY : v;
    return VS_OK;
}

/* A timeout a desc asks for: > 0 that many seconds (huge: none), INFINITY none,
   0 VESCALE_TIMEOUT or 300; negative or NaN an error. */
_VS_PRIVATE vs_result _vs_resolve_timeout(const char* fn, double t, double* out)
{
    if (t != t || t < 0)
        return _vs_err(VS_ERR_INVALID, "%s: timeout_s %g must be > 0, 0 (default) or INFINITY (none)", fn, t);
    if (t > 0) {
        *out = t > _VS_TIMEOUT_FOREVER_S ? INFINITY : t;
        return VS_OK;
    }
    *out = 300.0;
    const char* e = getenv("VESCALE_TIMEOUT");
    return e && *e ? _vs_parse_timeout(e, out) : VS_OK;
}

_VS_PRIVATE void _vs_hooks_init(_vs_hooks* h, const vs_logger* lg, vs_log_level lv,
                                const vs_allocator* al)
{
    memset(h, 0, sizeof *h);
    if (lg) h->logger = *lg;
    if (al) h->alloc = *al;
    h->level = lv; // resolved by _vs_resolve_level
    const char* e = getenv("VESCALE_LOG");
    // warn with neither a logger nor VESCALE_LOG is the default's (or a desc's warn): returned errors stay quiet
    h->log_returns = lv != VS_LOG_WARN || (lg && lg->fn) || (e && *e);
}

_VS_PRIVATE void _vs_vlog(const _vs_hooks* h, int rank, vs_log_level level, const char* fmt,
                          va_list ap)
{
    const char* const* names = _vs_level_names;
    if (!h || level > h->level || level <= VS_LOG_OFF || level > VS_LOG_DEBUG) return;
    char msg[1024];
    int off = rank >= 0 ? snprintf(msg, sizeof msg, "[rank %d] ", rank) : 0;
    vsnprintf(msg + off, sizeof msg - (size_t)off, fmt, ap);
    if (h->logger.fn)
        h->logger.fn(level, msg, h->logger.user);
    else
        fprintf(stderr, "vescale %s: %s\n", names[level], msg);
}

_VS_PRIVATE void* _vs_halloc(const _vs_hooks* h, size_t n)
{
    if (h && h->alloc.alloc) return h->alloc.alloc(n, h->alloc.user);
    return malloc(n ? n : 1);
}

_VS_PRIVATE void _vs_hfree(const _vs_hooks* h, void* p)
{
    if (!p) return;
    if (h && h->alloc.free)
        h->alloc.free(p, h->alloc.user);
    else
        free(p);
}

/* n x size zeroed bytes; NULL on overflow or when out of memory. */
_VS_PRIVATE void* _vs_hcalloc(const _vs_hooks* h, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) return NULL;
    void* p = _vs_halloc(h, n * size);
    if (p && (n * size) != 0) memset(p, 0, n * size);
    return p;
}

/* realloc through the hooks (they have no realloc): a new block, the old bytes
   copied, the old block freed. NULL (old block kept) when out of memory. */
_VS_PRIVATE void* _vs_hrealloc(const _vs_hooks* h, void* p, size_t old_bytes, size_t bytes)
{
    void* q = _vs_halloc(h, bytes);
    if (!q) return NULL;
    if (p) memcpy(q, p, old_bytes < bytes ? old_bytes : bytes);
    _vs_hfree(h, p);
    return q;
}

/* `bytes` aligned to `align` (a power of two) from the hooks: the block from the
   hook starts up to align-1 bytes earlier; its address sits just below the result. */
_VS_PRIVATE void* _vs_halloc_aligned(const _vs_hooks* h, size_t bytes, size_t align)
{
    if (bytes > SIZE_MAX - align - sizeof(void*)) return NULL;
    char* raw = (char*)_vs_halloc(h, bytes + align + sizeof(void*));
    if (!raw) return NULL;
    uintptr_t a = ((uintptr_t)(raw + sizeof(void*)) + align - 1) & ~(uintptr_t)(align - 1);
    memcpy((char*)a - sizeof(void*), &raw, sizeof raw);
    return (void*)a;
}

_VS_PRIVATE void _vs_hfree_aligned(const _vs_hooks* h, void* p)
{
    if (!p) return;
    void* raw;
    memcpy(&raw, (char*)p - sizeof(void*), sizeof raw);
    _vs_hfree(h, raw);
}

// >>dtype ---------------------------------------------------------------------

VS_API size_t vs_dtype_size(vs_dtype dt)
{
    switch (dt) {
    case VS_F32: case VS_I32: return 4;
    case VS_F16: case VS_BF16: return 2;
    case VS_F64: case VS_I64: return 8;
    case VS_U8: return 1;
    default: return 0;
    }
}

VS_API const char* vs_dtype_name(vs_dtype dt)
{
    switch (dt) {
    case VS_F32: return "f32";
    case VS_F16: return "f16";
    case VS_BF16: return "bf16";
    case VS_F64: return "f64";
    case VS_I32: return "i32";
    case VS_I64: return "i64";
    case VS_U8: return "u8";
    default: return "invalid";
    }
}

VS_API const char* vs_op_name(vs_op op)
{
    switch (op) {
    case VS_OP_DEFAULT: case VS_OP_SUM: return "sum";
    case VS_OP_AVG: return "avg";
    case VS_OP_MAX: return "max";
    case VS_OP_MIN: return "min";
    default: return "invalid";
    }
}

_VS_PRIVATE uint32_t _vs_f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

_VS_PRIVATE float _vs_u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

VS_API float vs_bf16_to_f32(uint16_t h) { return _vs_u2f((uint32_t)h << 16); }

VS_API uint16_t vs_f32_to_bf16(float f)
{
    uint32_t u = _vs_f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

VS_API float vs_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return _vs_u2f(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0) return _vs_u2f(sign);
        float f = (float)man * (1.0f / 16777216.0f); // subnormal: man * 2^-24
        return sign ? -f : f;
    }
    return _vs_u2f(sign | ((exp + 112u) << 23) | (man << 13));
}

VS_API uint16_t vs_f32_to_f16(float f)
{
    uint32_t u = _vs_f2u(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); // rounds to inf
    if (a < 0x38800000u) {                                   // subnormal or zero
        if (a < 0x33000000u) return (uint16_t)sign;          // below half of min subnormal
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; // 14..24 bits dropped for 2^-24 units
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = a - 0x38000000u; // rebias exponent 127 -> 15
    uint32_t out = r >> 13, rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (out & 1u))) out++;
    return (uint16_t)(sign | out);
}

#if defined(__GNUC__) || defined(__clang__) || defined(_MSC_VER)
#define _VS_RESTRICT __restrict
#else
#define _VS_RESTRICT
#endif

/* Loops in groups of 16 with a fixed trip count: compilers vectorize those even at
   -O2 (GCC's cheap cost model refuses loops of unknown length). */
#define _VS_FOR16(i, n, BODY)                                                        \
    do {                                                                             \
        size_t _vs_b = 0;                                                            \
        for (; _vs_b + 16 <= (n); _vs_b += 16)                                       \
            for (size_t i = _vs_b; i < _vs_b + 16; i++) BODY;                        \
        for (size_t i = _vs_b; i < (n); i++) BODY;                                   \
    } while (0)

/* o op= s, elementwise. Integer sums wrap (computed unsigned). */
#define _VS_DEF_ACC(SUF, T, UT)                                                      \
    _VS_PRIVATE void _vs_acc_##SUF(int op, T* _VS_RESTRICT o, const T* _VS_RESTRICT s, size_t n) \
    {                                                                                \
        if (op == VS_OP_MAX)                                                         \
            _VS_FOR16(i, n, o[i] = s[i] > o[i] ? s[i] : o[i]);                       \
        else if (op == VS_OP_MIN)                                                    \
            _VS_FOR16(i, n, o[i] = s[i] < o[i] ? s[i] : o[i]);                       \
        else                                                                         \
            _VS_FOR16(i, n, o[i] = (T)((UT)o[i] + (UT)s[i]));                        \
    }
_VS_DEF_ACC(f32, float, float)

/* f32 sums fused two sources a pass: o = a + b, then o = (o + a) + b, so the
   running sum is read and written half as often; the order stays rank order. */
_VS_PRIVATE void _vs_sum2_f32(float* _VS_RESTRICT o, const float* _VS_RESTRICT a, const float* _VS_RESTRICT b, size_t n)
{
    _VS_FOR16(i, n, o[i] = a[i] + b[i]);
}

_VS_PRIVATE void _vs_sum2acc_f32(float* _VS_RESTRICT o, const float* _VS_RESTRICT a, const float* _VS_RESTRICT b,
                                 size_t n)
{
    _VS_FOR16(i, n, o[i] = (o[i] + a[i]) + b[i]);
}
_VS_DEF_ACC(f64, double, double)
_VS_DEF_ACC(i32, int32_t, uint32_t)
_VS_DEF_ACC(i64, int64_t, uint64_t)
_VS_DEF_ACC(u8, uint8_t, uint8_t)

_VS_PRIVATE void _vs_widen_half(vs_dtype dt, float* _VS_RESTRICT o, const uint16_t* _VS_RESTRICT s, size_t n)
{
    if (dt == VS_BF16)
        _VS_FOR16(i, n, {
            uint32_t u = (uint32_t)s[i] << 16;
            memcpy(&o[i], &u, 4);
        });
    else
        for (size_t i = 0; i < n; i++) o[i] = vs_f16_to_f32(s[i]);
}

_VS_PRIVATE void _vs_narrow_half(vs_dtype dt, uint16_t* _VS_RESTRICT o, const float* _VS_RESTRICT f, size_t n)
{
    if (dt == VS_BF16) // vs_f32_to_bf16, written out so the loop vectorizes
        _VS_FOR16(i, n, {
            uint32_t u;
            memcpy(&u, &f[i], 4);
            u = (u & 0x7fffffffu) > 0x7f800000u ? (u | 0x400000u) : u + 0x7fffu + ((u >> 16) & 1u);
            o[i] = (uint16_t)(u >> 16);
        });
    else
        for (size_t i = 0; i < n; i++) o[i] = vs_f32_to_f16(f[i]);
}

/* In-place average of a finished sum (transports without a native average). */
_VS_PRIVATE void _vs_divide(vs_dtype dt, void* buf, size_t count, int n)
{
    size_t i;
    switch (dt) {
    case VS_F32: for (i = 0; i < count; i++) ((float*)buf)[i] /= (float)n; break;
    case VS_F64: for (i = 0; i < count; i++) ((double*)buf)[i] /= (double)n; break;
    case VS_I32: for (i = 0; i < count; i++) ((int32_t*)buf)[i] /= n; break;
    case VS_I64: for (i = 0; i < count; i++) ((int64_t*)buf)[i] /= n; break;
    case VS_U8: for (i = 0; i < count; i++) ((uint8_t*)buf)[i] = (uint8_t)(((uint8_t*)buf)[i] / n); break;
    case VS_F16:
        for (i = 0; i < count; i++) {
            uint16_t* p = (uint16_t*)buf + i;
            *p = vs_f32_to_f16(vs_f16_to_f32(*p) / (float)n);
        }
        break;
    case VS_BF16:
        for (i = 0; i < count; i++) {
            uint16_t* p = (uint16_t*)buf + i;
            *p = vs_f32_to_bf16(vs_bf16_to_f32(*p) / (float)n);
        }
        break;
    default: break;
    }
}

#define _VS_RED_BLOCK 2048 /* elements per reduction block: in L1 with the inputs */

/* Reduces `len` elements at element offset `off` of srcs[0..nsrc) in fixed order
   (src 0 first) into out. Half types accumulate in float and round once. Integer
   sums wrap. VS_OP_AVG divides by `navg` at the end (integers truncate). */
_VS_PRIVATE void _vs_reduce_block(vs_dtype dt, vs_op op, int navg, const void* const* srcs,
                                  int nsrc, size_t off, size_t len, void* out)
{
    VS_ASSERT(len <= _VS_RED_BLOCK && nsrc >= 1);
    size_t esz = vs_dtype_size(dt);
    if (dt == VS_F16 || dt == VS_BF16) {
        float acc[_VS_RED_BLOCK], tmp[_VS_RED_BLOCK];
        _vs_widen_half(dt, acc, (const uint16_t*)srcs[0] + off, len);
        for (int k = 1; k < nsrc; k++) {
            _vs_widen_half(dt, tmp, (const uint16_t*)srcs[k] + off, len);
            _vs_acc_f32(op, acc, tmp, len);
        }
        if (op == VS_OP_AVG) _VS_FOR16(i, len, acc[i] /= (float)navg);
        _vs_narrow_half(dt, (uint16_t*)out, acc, len);
        return;
    }
    if (dt == VS_F32 && (op == VS_OP_SUM || op == VS_OP_AVG) && nsrc >= 2) {
        float* o = (float*)out;
        _vs_sum2_f32(o, (const float*)srcs[0] + off, (const float*)srcs[1] + off, len);
        int k = 2;
        for (; k + 1 < nsrc; k += 2)
            _vs_sum2acc_f32(o, (const float*)srcs[k] + off, (const float*)srcs[k + 1] + off, len);
        if (k < nsrc) _vs_acc_f32(VS_OP_SUM, o, (const float*)srcs[k] + off, len);
        if (op == VS_OP_AVG) _vs_divide(dt, out, len, navg);
        return;
    }
    memcpy(out, (const char*)srcs[0] + off * esz, len * esz);
    for (int k = 1; k < nsrc; k++) {
        const void* s = (const char*)srcs[k] + off * esz;
        switch (dt) {
        case VS_F32: _vs_acc_f32(op, (float*)out, (const float*)s, len); break;
        case VS_F64: _vs_acc_f64(op, (double*)out, (const double*)s, len); break;
        case VS_I32: _vs_acc_i32(op, (int32_t*)out, (const int32_t*)s, len); break;
        case VS_I64: _vs_acc_i64(op, (int64_t*)out, (const int64_t*)s, len); break;
        default: _vs_acc_u8(op, (uint8_t*)out, (const uint8_t*)s, len); break;
        }
    }
    if (op == VS_OP_AVG) _vs_divide(dt, out, len, navg);
}


// >>comm ----------------------------------------------------------------------

/* The operation kinds, one list: the enum and the names messages use come from it.
   X(enum suffix, name in messages) */
#define _VS_OP_KINDS(X)                                                                           \
    X(ALLREDUCE, "all_reduce")                                                                    \
    X(REDUCE, "reduce")                                                                           \
    X(BCAST, "broadcast")                                                                         \
    X(ALLGATHER, "all_gather")         /* counts/displs always filled (uniform ones too) */      \
    X(REDSCAT, "reduce_scatter")       /* counts/displs always filled */                          \
    X(ALLTOALL, "all_to_all")          /* counts/displs send side, rcounts/rdispls recv side */   \
    X(BARRIER, "barrier")                                                                         \
    X(SEND, "send")                                                                               \
    X(RECV, "recv")                                                                               \
    X(SPLIT, "split")                                                                             \
    X(SHM, "shared_memory_step")       /* a callback every rank runs on the others' buffers */

#define _VS_K_ENUM(e, name) _VS_K_##e,
#define _VS_K_NAME(e, name) name,
enum { _VS_K_NONE = 0, _VS_OP_KINDS(_VS_K_ENUM) _VS_K_COUNT };
static const char* const _vs_kind_names[] = {"?", _VS_OP_KINDS(_VS_K_NAME)};
#undef _VS_K_ENUM
#undef _VS_K_NAME

/* One operation as issued by one rank. Arrays are owned (`own`) so the op can be
   queued or grouped after the caller's arrays are gone. */
typedef struct _vs_opdesc {
    int kind; // _VS_K_*
    vs_dtype dt;
    vs_op op;
    int root; // root, or peer for send/recv
    const void* send;
    void* recv;
    size_t count;   // uniform count (all_reduce, reduce, bcast, p2p)
    int uniform;    // 1: all_gather/reduce_scatter/all_to_all called with one count
    size_t* counts; // per-rank counts (send side for all_to_all)
    size_t* displs;
    size_t* rcounts; // all_to_all recv side
    size_t* rdispls;
    size_t* own;
    const _vs_hooks* h; // own's allocator
    int color, key;     // split
    vs_comm** split_out;
    void (*shm)(vs_comm* c, const struct _vs_opdesc* const* all); // _VS_K_SHM: the step
    const void* ctx;    // _VS_K_SHM: the step's own data (redistribute: the geometry)
    uint64_t seq;       // collectives: 1 + the communicator's earlier collectives (its fingerprint's order)
} _vs_opdesc;

#define _VS_MAGIC_LIVE 0x76734c56u /* "vsLV": a handle in use */
#define _VS_MAGIC_DEAD 0x76734444u /* "vsDD": freed, kept a while to catch a second use */
#define _VS_QUARANTINE 16          /* freed handles kept per owner before memory is released */

struct vs_work {
    uint32_t magic;
    const _vs_hooks* h; // its allocator (the world's, which outlives it)
    vs_comm* comm; // NULL once its communicator was freed (the result is kept here)
    vs_work* wnext; // the communicator's outstanding handles
    _vs_opdesc* ops;
    int nops;
    int state; // 0 pending, 1 done (atomic)
    vs_result res;
    char err[_VS_ERR_MSG];
    int origin;                     // err reports another rank's failure (see _vs_errstate)
    char okey[_VS_ORIGIN_KEY];
    vs_work* next;
#ifdef VESCALE_NCCL
    cudaEvent_t ev;
    uint64_t eseq; // the event's place in its communicator's stream (_vs_nccl_watch)
    int ekind;     // the operation (first of a group) and its sequence number, for the watchdog's message
    uint64_t opseq;
#endif
};

typedef struct _vs_tshared _vs_tshared;

typedef struct _vs_transport_ops _vs_transport_ops;
typedef struct _vs_store_ops _vs_store_ops; // >>store

/* The hooks of a world (NULL world: the C allocator). */
#define _VS_WH(w) ((w) ? &(w)->hooks : (const _vs_hooks*)NULL)

/* What a communicator handle is to its owner. */
typedef enum _vs_comm_kind {
    _VS_COMM_USER = 0, // from vs_comm_split: the caller frees it
    _VS_COMM_WORLD,    // the world's: vs_world_free frees it
    _VS_COMM_MESH      // a submesh's: vs_mesh_free frees it
} _vs_comm_kind;

#ifdef VESCALE_NCCL
/* A stream-ordered operation the watchdog watches (vs_comm.watch). */
typedef struct _vs_nwatch {
    cudaEvent_t ev;
    uint64_t eseq, opseq;
    double deadline;
    int kind;
} _vs_nwatch;
#endif

struct vs_comm {
    uint32_t magic;
    vs_world* world;
    vs_transport tr;
    const _vs_transport_ops* tp; // the transport's table: every transport-specific call goes through it
    int rank, size;
    double timeout;
    int aborted; // sticky, this handle (atomic)
    _vs_comm_kind kind;
    vs_work* works;                       // async handles returned and not yet waited (under qmu)
    vs_work* waited[_VS_QUARANTINE];      // waited handles, released when pushed out
    int nwaited;
    uint64_t seq;    // collectives issued on this handle
    uint64_t sent;   // bytes this rank's operations send by a ring's count (_vs_tally; tests read it: HSDP's traffic)
    char label[128]; // names it in errors: "world", "DP group [0,2] of mesh (PP=2, DP=2, TP=2)"
    // groups
    int group_depth;
    _vs_opdesc* gops;
    int gn, gcap;
    // progress queue (threads and MPI transports)
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    vs_work* qhead;
    vs_work* qtail;
    int qbusy, qstop, qthread_on;
    pthread_t qthread;
    vs_comm* rnext; // the world's retired communicators (>>elastic)
    int epoch;      // the world's reconfigurations when it was made (>>elastic: older ones may have dead peers)
    // threads transport
    _vs_tshared* sh;
#ifdef VESCALE_MPI
    MPI_Comm mc;   // errors return (MPI_ERRORS_RETURN)
#endif
#ifdef VESCALE_NCCL
    ncclComm_t nc;
    cudaStream_t stream;
    int own_stream;
    cudaStream_t own; // the stream the communicator created (stream is it, or the caller's)
    cudaEvent_t fence; // orders the own stream with the caller's (_vs_nccl_fence)
    void* scratch; // device: one float for barriers
    cudaEvent_t* evpool; // events of released work handles, for the next (_vs_nccl_event_get)
    int nev, evcap;
    void* vscratch; // uneven reduce-scatters' padded blocks (_vs_nccl_vbytes), grow-only
    size_t vscratch_cap;
    /* ncclCommSplit's output: on a non-blocking communicator NCCL's init thread
       writes the child here when the split completes, after ncclCommSplit has
       returned ncclSuccess; so it lives as long as the parent, not on a stack. */
    ncclComm_t split_out;
    /* >>elastic: the world's ncclComm_t after the job failed (revoked, not
       aborted: vs_world_shrink shrinks it with ncclCommShrink), or after a
       reconfiguration retired it; c->nc is NULL then (every path reads that as
       aborted) and this is aborted with the communicator */
    ncclComm_t revoked_nc;
    /* Stream-ordered completion (vs_wait_stream) and the watchdog. The host no
       longer waits for such work, so its deadline is watched here: events
       recorded after it, oldest first (under qmu; a full ring merges its two
       newest, the newer covering the older in stream order). ncmu: held by the
       thread in an NCCL call on this communicator (the op table's wrappers), so
       the watchdog (trylock) never calls NCCL beside it; it records its fault
       in wd_res/wd_msg under ncmu. */
    _vs_nwatch watch[4]; // (few: each holds a pooled event until the ring drops it or a host wait retires it)
    int nwatch;
    uint64_t evseq; // events recorded on the stream so far
    pthread_mutex_t ncmu;
    int ncmu_made, dev, wd_listed;
    vs_comm* wd_next; // the world's watched communicators (under the world's wdmu)
    int fence_depth;  // device entry points entered (_vs_dev_enter): their one fence pair stands for the inner ones'
    int raw_held;     // between vs_comm_nccl_begin and _end: this thread holds ncmu (read by c's thread only)
    vs_result wd_res;
    char wd_msg[512];
#endif
};

typedef struct _vs_tjob _vs_tjob;

#define _VS_INIT_FILE_MAX 1000 /* bytes of vs_world_desc.init_file (its suffixes fit beside it) */

#define _VS_LH_TOKEN_MAX 256 /* a lighthouse token's bytes, at most */

#define _VS_LH_ANSWER_S 5.0 // a rank gives the lighthouse up when a request is not answered within this (the default)
struct vs_world {
    vs_transport tr;
    int rank, size, local_rank;
    double timeout;
    _vs_hooks hooks;
    vs_comm* comm;
    _vs_tjob* job; // threads transport: the vs_launch job this rank belongs to
    /* >>elastic: after a reconfiguration the world's communicator is over the
       live ranks only: wranks[i] is the world rank of its rank i (NULL: i);
       the communicators it replaced (aborted; meshes made on them may still
       point at them) wait in `retired` for vs_world_free */
    int* wranks;
    int epoch;   // reconfigurations taken (vs_reform_info.epoch)
    int joining; // a replacement, or a rank that left at a shrink: no communicator until vs_world_grow
    vs_comm* retired;
    /* >>elastic, NCCL jobs of processes: the store that carries failure notices
       and the agreement */
    char elastic_dir[_VS_INIT_FILE_MAX + 1]; // its address: a directory every rank sees, or "tcp://host:port" ("": none)
    uint64_t ekey;     // the job's key (its files' names)
    uint64_t enonce;   // this process's (a join request's mark)
    int64_t epoll_us;  // atomic: the last look for a failure notice
    int fail_seen;     // atomic: 1 when a failure notice of this epoch was seen (eorigin, ecause set first), 2 writing
    int eorigin;
    char ecause[800];
    int esaw;          // vs_mesh_shrink: a communicator of the mesh failed on this rank
    int self_failed;   // this rank posted its own failure (vs_world_abort): its communicators are aborted when freed
    int* epid;         // atomic entries: a member's pid on this host, read from the store's p<rank> files
                       // (_vs_dir_liveness says what 0 and the negative values mean)
    int64_t elive_us;  // atomic: the last look at them
    const _vs_store_ops* store; // the store's table (>>store): a directory or a lighthouse (NULL: none)
    int efd;           // a lighthouse: the connection to it (-1: none)
    pthread_mutex_t emu; // one request at a time on efd
    uint64_t egone;    // atomic: the lighthouse's count of ended processes at the last look (0: look again)
    int elost;         // atomic: the lighthouse did not answer in time: given up (said once)
    double ewait;      // how long a request to it may go unanswered (vs_world_desc.lighthouse_wait_s; 0: _vs_lh_wait's default)
    uint64_t eseq;     // requests sent on efd (under emu)
    char etoken[_VS_LH_TOKEN_MAX + 1]; // the job's lighthouse token ("": none, or the lighthouse checks none)
    unsigned char elh_nonce[16];       // the lighthouse's hello on efd: what this connection's requests sign
    char ewhy[256];    // the lighthouse's last refusal (status 2, 3)
    int ebadtoken;     // it refused a request as not signed by its token (under emu)
    unsigned char* ejoin; // atomic per world rank: a replacement waits (the watcher's last look at the lighthouse)
    pthread_t ew;      // the lighthouse's watcher (_vs_lh_watch_main)
    pthread_mutex_t ewmu;
    pthread_cond_t ewcv;
    int ew_on, ew_stop;
    vs_comm* dead[_VS_QUARANTINE]; // freed split communicators, released when pushed out
    int ndead;
    void* dead_h[_VS_QUARANTINE];  // other freed handles (vs_free_later), the same way
    int ndead_h;
    vs_world_desc desc;                // as resolved (vs_world_query_desc); master_addr -> master
    char master[256];
    char init_file[_VS_INIT_FILE_MAX + 1]; // desc.init_file points here (when given)
    unsigned debug_modes;              // VS_DEBUG_* bits, as resolved (desc.debug, else VESCALE_DEBUG)
    char debug[32];                    // their names: desc.debug points here
    void* kcache;                      // >>kernels: this rank's compiled device kernels
    void (*kcache_free)(vs_world* w);  // set with it
    int mpi_finalize;
#ifdef VESCALE_MPI
    MPI_Op u8_sum; // wrapping 8-bit sum
    int u8_sum_made;
    int mpi_desync;            // VESCALE_DEBUG=desync: fingerprints before each collective
    MPI_Comm mab;              // abort channel: a duplicate of the world communicator
    MPI_Request abreq;         // posted receive for a peer's abort notice
    struct _vs_mpi_notice* abin; // abort notice in / out (from the hooks)
    struct _vs_mpi_notice* abmsg;
    int ab_state;              // 1 once the world is aborted (atomic; ab_* set before)
    int ab_rank, ab_why, ab_sent;
    char* ab_text;             // the cause, as the origin worded it: "world rank 5 failed (...): ..."
    pthread_mutex_t mmu; // guards abreq and the leak list
    int mmu_made;
    struct _vs_mpi_leak* leaks; // requests a fault left in flight
    MPI_Request pbreq;         // posted receive for a peer's question "where are you?" (a timeout's probe)
    int64_t pbin[4];           // the question: magic, asker's world rank
    int64_t where[2];          // the op this rank waits in (kind, seq; kind 0: none), as an answer says
    int mft;                   // >>elastic: ULFM is built in and the job runs with it (mpirun --with-ft ulfm)
#endif
#ifdef VESCALE_NCCL
    // the watchdog of stream-ordered NCCL work (_vs_wd_main), started at its first use
    pthread_t wd;
    pthread_mutex_t wdmu;
    pthread_cond_t wdcv;
    int wd_on, wd_stop;
    vs_comm* wd_comms;
    long wd_timed; // its wake-ups at the end of a period (atomic; a test bounds them by _vs_wd_period)
#endif
};

/* The transport interface: one table per transport (the threads transport is the
   reference); code above it never asks which transport it runs on.
   - submit   runs or queues a batch of ops, taking their arrays; out != NULL:
              returns an async handle, registered on c->works.
   - exec     host transports: runs a batch on the calling thread (the progress
              queue's worker; _vs_submit_host is their submit).
   - wait     completes an async handle (the handle is retired by the caller).
   - test     *done = 1 when complete.
   - detach   completes a handle whose communicator is being freed (result in w->res).
   - split    NULL: split is a _VS_K_SPLIT op through submit.
   - abort    makes peers blocked on c return VS_ERR_ABORTED (reach: see top comment);
              cause NULL: vs_comm_abort; else world rank `origin` failed with
              `why`, and `cause` ("world rank 5 failed (...): ...") says so to
              every rank it reaches (vs_comm_abort_with).
   - destroy  frees the transport's part of a handle.
   - set_stream, stream   NULL: the transport has no streams.
   - world_free  the transport's part of vs_world_free (MPI_Finalize), may be NULL.
   - wait_stream  vs_wait_stream: the caller's stream waits for the handle, not
              the host (NULL: no streams; vs_wait_stream is vs_wait).
   - sync_stream  vs_sync_stream: the host waits for a stream, watching c's
              faults (NULL: no streams; VS_OK).
   - world_abort the transport's vs_world_abort (MPI_Abort); NULL: abort the
              world's communicator.
   - work_release  frees the transport's part of a work handle (a CUDA event).
   - shm      1: ranks share memory and run _VS_K_SHM steps (vs_redistribute's
              in-place moves); 0: those steps use the plain collectives.
   - device   1: buffers are CUDA device memory (host loops must refuse them).
   - handle   the raw handle under c (NCCL: the ncclComm_t; MPI: &MPI_Comm),
              NULL: none (threads).
   - raw_begin, raw_end  vs_comm_nccl_begin / _end (NULL: no NCCL).
   - aborted_error  an operation on an aborted c: the error naming the world
              abort's origin when the transport learns it apart from c (MPI:
              its abort message arrives just after c is marked); VS_OK: none.
   - world_init  vs_world_init's part for the transport (its world
              communicator); NULL: vs_launch makes its worlds (threads).
   - reform   vs_world_shrink / _grow: the survivors' agreement of `kind`
              (_VS_REFORM_*) and the new world communicator, or an error
              saying what the job lacks for one.
   - quiesce  before a shrink (vs_mesh_shrink): stops the work in flight on
              c's of a failing mesh (and the world's others with work watched) on
              this rank, so the streams behind them go on (NULL: nothing waits).
   - joins    1: a replacement rank may join a running job (vs_world_desc.join). */
typedef int (*_vs_keep_fn)(const int* failed, int nfailed, int rank, void* ctx);
struct _vs_transport_ops {
    vs_transport id;
    vs_result (*submit)(vs_comm* c, _vs_opdesc* ops, int nops, vs_work** out);
    vs_result (*exec)(vs_comm* c, _vs_opdesc* ops, int nops);
    vs_result (*wait)(vs_work* w);
    vs_result (*test)(vs_work* w, int* done);
    void (*detach)(vs_work* w);
    vs_result (*split)(vs_comm* c, int color, int key, vs_comm** out);
    void (*abort)(vs_comm* c, vs_result why, int origin, const char* cause);
    void (*destroy)(vs_comm* c);
    vs_result (*set_stream)(vs_comm* c, void* stream);
    void* (*stream)(const vs_comm* c);
    vs_result (*world_free)(vs_world* w);
    vs_result (*world_abort)(vs_world* w, vs_result why);
    void (*work_release)(vs_work* w);
    vs_result (*wait_stream)(vs_work* w, void* stream);
    vs_result (*sync_stream)(vs_comm* c, void* stream);
    int shm, device;
    void* (*handle)(const vs_comm* c);
    vs_result (*raw_begin)(vs_comm* c, void** out);
    vs_result (*raw_end)(vs_comm* c);
    vs_result (*aborted_error)(vs_comm* c, const char* what);
    vs_result (*world_init)(vs_world* w, const vs_world_desc* d, const vs_bootstrap_info* bi);
    vs_result (*reform)(vs_world* w, int kind, _vs_keep_fn keep, void* ctx, vs_reform_info* info, const char* fn);
    void (*quiesce)(vs_world* w, vs_comm* const* comms, int n);
    int joins;
};

/* The table of a transport compiled into this build, NULL otherwise (>>transports). */
_VS_PRIVATE const _vs_transport_ops* _vs_transport_of(vs_transport tr);

VS_API const char* vs_transport_name(vs_transport t)
{
    switch (t) {
    case VS_TRANSPORT_DEFAULT: return "default";
    case VS_TRANSPORT_THREADS: return "threads";
    case VS_TRANSPORT_MPI: return "mpi";
    case VS_TRANSPORT_NCCL: return "nccl";
    default: return "invalid";
    }
}

VS_API int vs_transport_available(vs_transport t)
{
    switch (t) {
    case VS_TRANSPORT_THREADS: return 1;
#ifdef VESCALE_MPI
    case VS_TRANSPORT_MPI: return 1;
#endif
#ifdef VESCALE_NCCL
    case VS_TRANSPORT_NCCL: return 1;
#endif
    default: return 0;
    }
}

_VS_PRIVATE vs_comm* _vs_comm_new(vs_world* w, vs_transport tr, int rank, int size)
{
    const _vs_hooks* h = _VS_WH(w);
    vs_comm* c = _VS_HNEW(h, vs_comm, 1);
    if (!c) return NULL;
    c->tp = _vs_transport_of(tr);
    if (!c->tp) {
        _vs_hfree(h, c);
        return NULL;
    }
    c->magic = _VS_MAGIC_LIVE;
    c->world = w;
    c->tr = tr;
    c->rank = rank;
    c->size = size;
    c->timeout = w ? w->timeout : 300.0;
    c->epoch = w ? w->epoch : 0;
    snprintf(c->label, sizeof c->label, "a %d-rank %s communicator", size, vs_transport_name(tr));
    pthread_mutex_init(&c->qmu, NULL);
    _vs_cond_init(&c->qcv);
    return c;
}

/* c->label = "<what> [w0,w1,...] split from <from>": the members' world ranks. */
_VS_PRIVATE void _vs_comm_label_members(vs_comm* c, const char* what, const int* granks, int n, const char* from)
{
    size_t len = (size_t)_vs_fmt(c->label, sizeof c->label, "%s [", what);
    for (int i = 0; i < n && len < sizeof c->label; i++) {
        if (i == 8 && n > 9) {
            len += (size_t)_vs_fmt(c->label + len, sizeof c->label - len, ",...,%d", granks[n - 1]);
            break;
        }
        len += (size_t)_vs_fmt(c->label + len, sizeof c->label - len, "%s%d", i ? "," : "", granks[i]);
    }
    if (len < sizeof c->label)
        _vs_fmt(c->label + len, sizeof c->label - len, "]%s%s", from ? " split from " : "", from ? from : "");
}

/* Getters share one rule (top comment, "Getters"): a NULL or freed handle gives the
   type's error value with a message. This is their check: 0 when c is usable. */
_VS_PRIVATE vs_result _vs_comm_get(const char* fn, const vs_comm* c)
{
    if (!c) return _vs_err(VS_ERR_NULL, "%s: comm is NULL", fn);
    if (c->magic == _VS_MAGIC_DEAD) return _vs_err(VS_ERR_STATE, "%s: the communicator was already freed", fn);
    if (c->magic != _VS_MAGIC_LIVE) return _vs_err(VS_ERR_INVALID, "%s: %p is not a live comm handle", fn, (const void*)c);
    return VS_OK;
}

VS_API int vs_comm_rank(const vs_comm* c)
{
    vs_result r = _vs_comm_get("vs_comm_rank", c);
    return r ? r : c->rank;
}
VS_API int vs_comm_size(const vs_comm* c)
{
    vs_result r = _vs_comm_get("vs_comm_size", c);
    return r ? r : c->size;
}
VS_API vs_transport vs_comm_transport(const vs_comm* c)
{
    return _vs_comm_get("vs_comm_transport", c) ? VS_TRANSPORT_DEFAULT : c->tr;
}

VS_API int vs_comm_device(const vs_comm* c)
{
    return _vs_comm_get("vs_comm_device", c) ? 0 : c->tp->device;
}

VS_API vs_result vs_comm_set_timeout(vs_comm* c, double seconds)
{
    _VS_CHECK_HANDLE(c, "comm");
    if (seconds != seconds || seconds < 0)
        return _vs_err(VS_ERR_INVALID, "vs_comm_set_timeout: timeout %g s must be > 0, or 0 / INFINITY for none",
                       seconds);
    c->timeout = seconds == 0 || seconds > _VS_TIMEOUT_FOREVER_S ? INFINITY : seconds;
    return VS_OK;
}

VS_API vs_result vs_comm_set_stream(vs_comm* c, void* cuda_stream)
{
    _VS_CHECK_HANDLE(c, "comm");
    if (!c->tp->set_stream)
        return _vs_err(VS_ERR_UNSUPPORTED, "vs_comm_set_stream: transport '%s' has no streams",
                       vs_transport_name(c->tr));
    return c->tp->set_stream(c, cuda_stream);
}

VS_API void* vs_comm_stream(const vs_comm* c)
{
    if (_vs_comm_get("vs_comm_stream", c)) return NULL;
    return c->tp->stream ? c->tp->stream(c) : NULL;
}

/* The raw handle of transport `tr` under c, or NULL naming what c is. */
_VS_PRIVATE void* _vs_comm_raw(const char* fn, const vs_comm* c, vs_transport tr, const char* what)
{
    if (_vs_comm_get(fn, c)) return NULL;
    if (c->tr != tr || !c->tp->handle) {
        _vs_err(VS_ERR_UNSUPPORTED, "%s: %s is a %s communicator: no %s (the %s transport's)", fn, c->label,
                vs_transport_name(c->tr), what, vs_transport_name(tr));
        return NULL;
    }
    return c->tp->handle(c);
}

VS_API void* vs_comm_nccl(const vs_comm* c) { return _vs_comm_raw("vs_comm_nccl", c, VS_TRANSPORT_NCCL, "ncclComm_t"); }
VS_API void* vs_comm_mpi(const vs_comm* c) { return _vs_comm_raw("vs_comm_mpi", c, VS_TRANSPORT_MPI, "MPI_Comm"); }

VS_API vs_result vs_comm_nccl_begin(vs_comm* c, void** nccl_comm)
{
    _VS_CHECK_HANDLE(c, "comm");
    _VS_CHECK_NULL(nccl_comm, "nccl_comm");
    *nccl_comm = NULL;
    if (!c->tp->raw_begin)
        return _vs_err(VS_ERR_UNSUPPORTED, "vs_comm_nccl_begin: %s is a %s communicator: no ncclComm_t (the nccl "
                       "transport's)", c->label, vs_transport_name(c->tr));
    if (c->group_depth > 0)
        return _vs_err(VS_ERR_STATE, "vs_comm_nccl_begin: a vs_group_start is open on %s (end it first)", c->label);
    return c->tp->raw_begin(c, nccl_comm);
}

VS_API vs_result vs_comm_nccl_end(vs_comm* c)
{
    _VS_CHECK_HANDLE(c, "comm");
    if (!c->tp->raw_end)
        return _vs_err(VS_ERR_UNSUPPORTED, "vs_comm_nccl_end: %s is a %s communicator (no ncclComm_t)", c->label,
                       vs_transport_name(c->tr));
    return c->tp->raw_end(c);
}

_VS_PRIVATE void _vs_op_release(_vs_opdesc* op)
{
    _vs_hfree(op->h, op->own);
    op->own = NULL;
}

/* Checks rank blocks [displs[i], displs[i] + counts[i]): no end past what a buffer
   of `dt` can hold and, where they are written (`disjoint`), no two that overlap. */
_VS_PRIVATE vs_result _vs_check_ranges(const char* fn, const char* side, const size_t* counts, const size_t* displs,
                                       int n, vs_dtype dt, int disjoint)
{
    size_t lim = (size_t)PTRDIFF_MAX / (vs_dtype_size(dt) ? vs_dtype_size(dt) : 1);
    int sorted = 1;
    for (int i = 0; i < n; i++) {
        if (counts[i] > lim || displs[i] > lim - counts[i])
            return _vs_err(VS_ERR_INVALID, "%s: %s block %d (displacement %zu + count %zu) overflows the address space",
                           fn, side, i, displs[i], counts[i]);
        if (i && displs[i] < displs[i - 1] + counts[i - 1]) sorted = 0;
    }
    if (!disjoint || sorted) return VS_OK;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n && counts[i]; j++)
            if (counts[j] && displs[i] < displs[j] + counts[j] && displs[j] < displs[i] + counts[i])
                return _vs_err(VS_ERR_INVALID, "%s: %s blocks %d [%zu, %zu) and %d [%zu, %zu) overlap", fn, side, i,
                               displs[i], displs[i] + counts[i], j, displs[j], displs[j] + counts[j]);
    return VS_OK;
}

/* Fills counts/displs for the v-ops from either one count or the caller's arrays
   (displs NULL: packed), and checks them (op->dt set). Allocates op->own. */
_VS_PRIVATE vs_result _vs_op_arrays(const char* fn, const _vs_hooks* h, _vs_opdesc* op, int n, size_t count,
                                    const size_t* counts, const size_t* displs, const size_t* rcounts,
                                    const size_t* rdispls)
{
    int sides = op->kind == _VS_K_ALLTOALL ? 2 : 1;
    op->own = _VS_HNEW(h, size_t, (size_t)n * 2 * (size_t)sides);
    op->h = h;
    if (!op->own) return _vs_err(VS_ERR_NOMEM, "%s: out of memory for %d ranks", fn, n);
    op->counts = op->own;
    op->displs = op->own + n;
    size_t lim = (size_t)PTRDIFF_MAX / vs_dtype_size(op->dt);
    vs_result r = VS_OK;
    for (int side = 0; side < sides && !r; side++) {
        size_t* oc = side ? op->own + 2 * n : op->counts;
        size_t* od = side ? op->own + 3 * n : op->displs;
        const size_t* ic = side ? rcounts : counts;
        const size_t* id = side ? rdispls : displs;
        size_t run = 0;
        for (int i = 0; i < n && !r; i++) {
            oc[i] = ic ? ic[i] : count;
            if (!id && oc[i] > lim - run)
                r = _vs_err(VS_ERR_INVALID, "%s: %zu elements per rank x %d ranks overflows the address space", fn,
                            oc[i], n);
            od[i] = id ? id[i] : run;
            run += oc[i];
        }
        // written blocks must not overlap: all-gather's and all-to-all's receive side
        int written = (op->kind == _VS_K_ALLGATHER) || side == 1;
        if (!r) r = _vs_check_ranges(fn, side ? "recv" : op->kind == _VS_K_ALLTOALL ? "send" : "rank", oc, od, n,
                                     op->dt, written);
    }
    if (sides == 2) {
        op->rcounts = op->own + 2 * n;
        op->rdispls = op->own + 3 * n;
    }
    if (r) _vs_op_release(op);
    return r;
}

_VS_PRIVATE vs_result _vs_check_dtype(const char* fn, vs_dtype dt)
{
    if (vs_dtype_size(dt) == 0) return _vs_err(VS_ERR_INVALID, "%s: invalid dtype %d", fn, (int)dt);
    return VS_OK;
}

_VS_PRIVATE vs_result _vs_check_op(const char* fn, vs_op op)
{
    if ((int)op < 0 || op >= VS_OP_COUNT)
        return _vs_err(VS_ERR_INVALID, "%s: invalid reduction op %d", fn, (int)op);
    return VS_OK;
}

// (the progress queue, groups and async work)
/* Threads and MPI transports give async operations a progress thread per
   communicator handle; it runs queued batches in issue order (a "stream").
   Blocking calls run on the caller's thread when the queue is idle. */

_VS_PRIVATE vs_result _vs_exec(vs_comm* c, _vs_opdesc* ops, int nops) { return c->tp->exec(c, ops, nops); }

/* Releases what a work handle holds (its ops; c's transport: its own part, e.g. a
   CUDA event), not the handle. */
_VS_PRIVATE void _vs_work_release(vs_comm* c, vs_work* w)
{
    for (int i = 0; i < w->nops; i++) _vs_op_release(&w->ops[i]);
    _vs_hfree(w->h, w->ops);
    w->ops = NULL;
    w->nops = 0;
    if (c && c->tp->work_release) c->tp->work_release(w);
}

_VS_PRIVATE void _vs_work_free(vs_work* w)
{
    _vs_work_release(w->comm, w);
    _vs_hfree(w->h, w);
}

/* A waited handle: off the comm's list, marked freed and kept among the comm's
   last _VS_QUARANTINE waited handles, so a second vs_wait on it is an error (not a
   use after free); the oldest is released. */
_VS_PRIVATE void _vs_work_retire(vs_comm* c, vs_work* w)
{
    _vs_work_release(c, w);
    pthread_mutex_lock(&c->qmu);
    vs_work** l = &c->works;
    while (*l && *l != w) l = &(*l)->wnext;
    if (*l) *l = w->wnext;
    w->magic = _VS_MAGIC_DEAD;
    int slot = c->nwaited++ % _VS_QUARANTINE;
    vs_work* old = c->waited[slot];
    c->waited[slot] = w;
    pthread_mutex_unlock(&c->qmu);
    if (old) _vs_hfree(old->h, old);
}

_VS_PRIVATE void _vs_err_world(const vs_world* w);

/* A work's error, raised on the waiting thread (a consequence stays one). */
_VS_PRIVATE vs_result _vs_work_err(const vs_work* w)
{
    if (w->origin) return _vs_err_from(w->origin - 1, w->okey, w->res, "%s", w->err);
    return _vs_err(w->res, "%s", w->err);
}

_VS_PRIVATE void* _vs_progress_main(void* arg)
{
    vs_comm* c = (vs_comm*)arg;
    _vs_err_world(c->world);
    pthread_mutex_lock(&c->qmu);
    for (;;) {
        while (!c->qhead && !c->qstop) pthread_cond_wait(&c->qcv, &c->qmu);
        if (!c->qhead) break;
        vs_work* w = c->qhead;
        c->qhead = w->next;
        if (!c->qhead) c->qtail = NULL;
        c->qbusy = 1;
        pthread_mutex_unlock(&c->qmu);
        vs_result r = _vs_exec(c, w->ops, w->nops);
        if (r) {
            const _vs_errstate* es = _vs_err_tls();
            _vs_save_error(w->err, sizeof w->err);
            w->origin = es->origin;
            memcpy(w->okey, es->origin_key, sizeof w->okey);
        }
        pthread_mutex_lock(&c->qmu);
        w->res = r;
        __atomic_store_n(&w->state, 1, __ATOMIC_RELEASE);
        c->qbusy = 0;
        pthread_cond_broadcast(&c->qcv);
    }
    pthread_mutex_unlock(&c->qmu);
    return NULL;
}

_VS_PRIVATE vs_result _vs_work_wait_host(vs_work* w)
{
    vs_comm* c = w->comm;
    for (int i = 0; i < _VS_SPIN_PAUSES; i++) {
        if (__atomic_load_n(&w->state, __ATOMIC_ACQUIRE)) break;
        _vs_cpu_relax();
    }
    pthread_mutex_lock(&c->qmu);
    while (!__atomic_load_n(&w->state, __ATOMIC_ACQUIRE)) pthread_cond_wait(&c->qcv, &c->qmu);
    pthread_mutex_unlock(&c->qmu);
    vs_result r = w->res;
    if (r) _vs_work_err(w);
    return r;
}

/* Takes ownership of ops[0..nops) (their arrays; the ops array itself is copied). */
_VS_PRIVATE vs_result _vs_submit_host(vs_comm* c, _vs_opdesc* ops, int nops, vs_work** out)
{
    pthread_mutex_lock(&c->qmu);
    int idle = !c->qhead && !c->qbusy;
    pthread_mutex_unlock(&c->qmu);
    if (idle && !out) {
        vs_result r = _vs_exec(c, ops, nops);
        for (int i = 0; i < nops; i++) _vs_op_release(&ops[i]);
        return r;
    }
    const _vs_hooks* h = _VS_WH(c->world);
    vs_work* w = _VS_HNEW(h, vs_work, 1);
    _vs_opdesc* copy = _VS_HNEW(h, _vs_opdesc, nops);
    if (!w || !copy) {
        _vs_hfree(h, w);
        _vs_hfree(h, copy);
        for (int i = 0; i < nops; i++) _vs_op_release(&ops[i]);
        return _vs_err(VS_ERR_NOMEM, "async operation: out of memory");
    }
    memcpy(copy, ops, sizeof *copy * (size_t)nops);
    w->comm = c;
    w->h = h;
    w->ops = copy;
    w->nops = nops;
    pthread_mutex_lock(&c->qmu);
    if (!c->qthread_on) {
        if (pthread_create(&c->qthread, NULL, _vs_progress_main, c) != 0) {
            pthread_mutex_unlock(&c->qmu);
            _vs_work_free(w);
            return _vs_err_backend(VS_ERR_BACKEND, errno, "async operation: cannot start progress thread");
        }
        c->qthread_on = 1;
    }
    if (c->qtail)
        c->qtail->next = w;
    else
        c->qhead = w;
    c->qtail = w;
    if (out) { // the caller's handle: tracked until vs_wait, detached if the comm goes first
        w->magic = _VS_MAGIC_LIVE;
        w->wnext = c->works;
        c->works = w;
    }
    pthread_cond_broadcast(&c->qcv);
    pthread_mutex_unlock(&c->qmu);
    if (out) {
        *out = w;
        return VS_OK;
    }
    vs_result r = _vs_work_wait_host(w);
    _vs_work_free(w);
    return r;
}

_VS_PRIVATE vs_result _vs_submit(vs_comm* c, _vs_opdesc* ops, int nops, vs_work** out)
{
    return c->tp->submit(c, ops, nops, out);
}

#ifdef VESCALE_MPI
_VS_PRIVATE int _vs_mpi_aborted(vs_world* w); // (>>mpi: 1 when the MPI world is aborted, its notices read)
#endif

/* The threads transport's fail-fast state (>>threads, below): whether the
   communicator's job was aborted, and the error naming its cause. */
_VS_PRIVATE int _vs_t_job_aborted(const _vs_tshared* sh);
_VS_PRIVATE vs_result _vs_t_abort_result_op(vs_comm* c, const _vs_opdesc* op, int later);

/* The bytes op sends from this rank as ring algorithms move them (NCCL's bus
   bandwidth accounting; any transport: a shared-memory one moves none really),
   added to c->sent: of a full buffer of N bytes over n ranks, an all-reduce
   2 (n-1)/n N, a reduce-scatter or all-gather (n-1)/n N (all but this rank's
   piece), a reduce N off the root, a broadcast N from the root, a send and an
   all-to-all what goes to the others. A test-only count: nothing reads it. */
_VS_PRIVATE void _vs_tally(vs_comm* c, const _vs_opdesc* op)
{
    uint64_t esz = vs_dtype_size(op->dt), n = (uint64_t)c->size, full = 0, mine = 0;
    for (int i = 0; op->counts && i < c->size; i++) full += op->counts[i];
    if (op->counts) mine = op->counts[c->rank];
    switch (op->kind) {
    case _VS_K_ALLREDUCE: c->sent += 2 * (n - 1) * op->count * esz / n; break;
    case _VS_K_ALLGATHER:
    case _VS_K_REDSCAT: c->sent += (full - mine) * esz; break;
    case _VS_K_ALLTOALL: c->sent += (full - mine) * esz; break;
    case _VS_K_REDUCE: c->sent += c->rank != op->root ? op->count * esz : 0; break;
    case _VS_K_BCAST: c->sent += c->rank == op->root ? op->count * esz : 0; break;
    case _VS_K_SEND: c->sent += op->count * esz; break;
    default: break;
    }
}

/* Entry of every operation: checks the comm, then groups, queues or runs it.
   Takes ownership of op's arrays. */
_VS_PRIVATE vs_result _vs_issue(vs_comm* c, _vs_opdesc* op, vs_work** work)
{
    const char* what = _vs_kind_names[op->kind];
    _vs_tally(c, op);
    if (work) *work = NULL;
    if (op->kind != _VS_K_SEND && op->kind != _VS_K_RECV) op->seq = ++c->seq;
    if (c->sh && _vs_t_job_aborted(c->sh)) { // with its cause
        _vs_op_release(op);
        return _vs_t_abort_result_op(c, op, 1);
    }
    if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) {
        _vs_op_release(op);
        vs_result why = c->tp->aborted_error ? c->tp->aborted_error(c, what) : VS_OK;
        if (why) return why;
        return _vs_err(VS_ERR_ABORTED, "%s: communicator was aborted (an earlier error or timeout)", what);
    }
    if (c->group_depth > 0) {
        if (work) {
            _vs_op_release(op);
            return _vs_err(VS_ERR_STATE, "%s: no work handle inside a group; vs_group_end gives one", what);
        }
        if (c->gn == c->gcap) {
            int cap = c->gcap ? c->gcap * 2 : 8;
            _vs_opdesc* g = (_vs_opdesc*)_vs_hrealloc(_VS_WH(c->world), c->gops, sizeof *g * (size_t)c->gcap,
                                                       sizeof *g * (size_t)cap);
            if (!g) {
                _vs_op_release(op);
                return _vs_err(VS_ERR_NOMEM, "%s: out of memory growing a group", what);
            }
            c->gops = g;
            c->gcap = cap;
        }
        c->gops[c->gn++] = *op;
        return VS_OK;
    }
    return _vs_submit(c, op, 1, work);
}

VS_API vs_result vs_group_start(vs_comm* c)
{
    _VS_CHECK_HANDLE(c, "comm");
    c->group_depth++;
    return VS_OK;
}

VS_API vs_result vs_group_end(vs_comm* c, vs_work** work)
{
    _VS_CHECK_HANDLE(c, "comm");
    if (work) *work = NULL;
    if (c->group_depth <= 0) return _vs_err(VS_ERR_STATE, "vs_group_end: no group was started");
    if (--c->group_depth > 0) return VS_OK;
    int n = c->gn;
    c->gn = 0;
    if (n == 0) return VS_OK;
    vs_result r = _vs_submit(c, c->gops, n, work);
    return r;
}

VS_API vs_result vs_test(vs_work* w, int* done)
{
    _VS_CHECK_HANDLE(w, "work");
    _VS_CHECK_NULL(done, "done");
    if (!w->comm) { // detached: completed when its communicator was freed
        *done = 1;
        return VS_OK;
    }
    return w->comm->tp->test(w, done);
}

/* Host transports: the progress thread marks a handle done. */
_VS_PRIVATE vs_result _vs_work_test_host(vs_work* w, int* done)
{
    *done = __atomic_load_n(&w->state, __ATOMIC_ACQUIRE) != 0;
    return VS_OK;
}

VS_API vs_result vs_wait(vs_work* w)
{
    _VS_CHECK_HANDLE(w, "work");
    vs_comm* c = w->comm;
    if (!c) { // its communicator was freed, which completed it: the result is here
        vs_result r = w->res;
        if (r) _vs_work_err(w);
        _vs_work_free(w);
        return r;
    }
    vs_result r = c->tp->wait(w);
    _vs_work_retire(c, w);
    return r;
}

VS_API vs_result vs_sync_stream(vs_comm* c, void* stream)
{
    vs_result r = _vs_comm_get("vs_sync_stream", c);
    if (r) return r;
    return c->tp->sync_stream ? c->tp->sync_stream(c, stream) : VS_OK;
}

VS_API vs_result vs_wait_stream(vs_work* w, void* stream)
{
    _VS_CHECK_HANDLE(w, "work");
    vs_comm* c = w->comm;
    if (!c || !c->tp->wait_stream) return vs_wait(w); // completed, or a transport without streams
    vs_result r = c->tp->wait_stream(w, stream);
    _vs_work_retire(c, w);
    return r;
}

// (the collectives' entry points)

_VS_PRIVATE vs_result _vs_check_comm(const char* fn, vs_comm* c, vs_dtype dt)
{
    vs_result r = _vs_comm_get(fn, c);
    return r ? r : _vs_check_dtype(fn, dt);
}

/* Elements of `dt` a buffer may hold: its bytes must fit ptrdiff_t. */
_VS_PRIVATE vs_result _vs_check_elems(const char* fn, size_t elems, vs_dtype dt, const char* what)
{
    size_t esz = vs_dtype_size(dt);
    if (esz && elems > (size_t)PTRDIFF_MAX / esz)
        return _vs_err(VS_ERR_INVALID, "%s: %s of %zu %s elements overflows the address space", fn, what, elems,
                       vs_dtype_name(dt));
    return VS_OK;
}

_VS_PRIVATE vs_result _vs_check_bufs(const char* fn, const void* send, const void* recv,
                                     size_t send_elems, size_t recv_elems)
{
    if (send_elems && !send) return _vs_err(VS_ERR_NULL, "%s: send buffer is NULL for %zu elements", fn, send_elems);
    if (recv_elems && !recv) return _vs_err(VS_ERR_NULL, "%s: recv buffer is NULL for %zu elements", fn, recv_elems);
    return VS_OK;
}

_VS_PRIVATE vs_result _vs_check_root(const char* fn, const vs_comm* c, int root, const char* what)
{
    if (root < 0 || root >= c->size)
        return _vs_err(VS_ERR_INVALID, "%s: %s %d out of range [0, %d)", fn, what, root, c->size);
    return VS_OK;
}

#define _VS_TRY(x)                                                                   \
    do {                                                                             \
        vs_result _vs_r = (x);                                                       \
        if (_vs_r) return _vs_r;                                                     \
    } while (0)

/* An operation descriptor with the fields every kind has; the rest stay zero.
   VS_OP_DEFAULT becomes VS_OP_SUM. */
_VS_PRIVATE _vs_opdesc _vs_op_make(int kind, vs_dtype dt, vs_op op, int root, const void* send, void* recv,
                                   size_t count)
{
    _vs_opdesc o;
    memset(&o, 0, sizeof o);
    o.kind = kind;
    o.dt = dt;
    o.op = op == VS_OP_DEFAULT ? VS_OP_SUM : op;
    o.root = root;
    o.send = send;
    o.recv = recv;
    o.count = count;
    return o;
}

VS_API vs_result vs_all_reduce(vs_comm* c, const void* send, void* recv, size_t count,
                               vs_dtype dt, vs_op op, vs_work** work)
{
    _VS_TRY(_vs_check_comm("vs_all_reduce", c, dt));
    _VS_TRY(_vs_check_op("vs_all_reduce", op));
    _VS_TRY(_vs_check_elems("vs_all_reduce", count, dt, "count"));
    _VS_TRY(_vs_check_bufs("vs_all_reduce", send, recv, count, count));
    _vs_opdesc o = _vs_op_make(_VS_K_ALLREDUCE, dt, op, 0, send, recv, count);
    return _vs_issue(c, &o, work);
}

VS_API vs_result vs_reduce(vs_comm* c, const void* send, void* recv, size_t count, vs_dtype dt,
                           vs_op op, int root, vs_work** work)
{
    _VS_TRY(_vs_check_comm("vs_reduce", c, dt));
    _VS_TRY(_vs_check_op("vs_reduce", op));
    _VS_TRY(_vs_check_root("vs_reduce", c, root, "root"));
    _VS_TRY(_vs_check_elems("vs_reduce", count, dt, "count"));
    _VS_TRY(_vs_check_bufs("vs_reduce", send, recv, count, c->rank == root ? count : 0));
    _vs_opdesc o = _vs_op_make(_VS_K_REDUCE, dt, op, root, send, recv, count);
    return _vs_issue(c, &o, work);
}

VS_API vs_result vs_broadcast(vs_comm* c, const void* send, void* recv, size_t count,
                              vs_dtype dt, int root, vs_work** work)
{
    _VS_TRY(_vs_check_comm("vs_broadcast", c, dt));
    _VS_TRY(_vs_check_root("vs_broadcast", c, root, "root"));
    _VS_TRY(_vs_check_elems("vs_broadcast", count, dt, "count"));
    _VS_TRY(_vs_check_bufs("vs_broadcast", send, recv, c->rank == root ? count : 0, count));
    _vs_opdesc o = _vs_op_make(_VS_K_BCAST, dt, VS_OP_SUM, root, c->rank == root ? send : NULL, recv, count);
    return _vs_issue(c, &o, work);
}

_VS_PRIVATE vs_result _vs_gather_like(const char* fn, int kind, vs_comm* c, const void* send,
                                      void* recv, size_t count, const size_t* counts,
                                      const size_t* displs, vs_dtype dt, vs_op op, vs_work** work)
{
    _VS_TRY(_vs_check_comm(fn, c, dt));
    if (kind == _VS_K_REDSCAT) _VS_TRY(_vs_check_op(fn, op));
    _vs_opdesc o = _vs_op_make(kind, dt, op, 0, send, recv, counts ? 0 : count);
    o.uniform = counts == NULL;
    _VS_TRY(_vs_op_arrays(fn, _VS_WH(c->world), &o, c->size, count, counts, displs, NULL, NULL));
    size_t total = 0, mine = o.counts[c->rank];
    for (int i = 0; i < c->size; i++) {
        size_t end = o.displs[i] + o.counts[i];
        total = end > total ? end : total;
    }
    vs_result r = kind == _VS_K_ALLGATHER ? _vs_check_bufs(fn, send, recv, mine, total)
                                          : _vs_check_bufs(fn, send, recv, total, mine);
    if (r) {
        _vs_op_release(&o);
        return r;
    }
    return _vs_issue(c, &o, work);
}

VS_API vs_result vs_all_gather(vs_comm* c, const void* send, void* recv, size_t count,
                               vs_dtype dt, vs_work** work)
{
    return _vs_gather_like("vs_all_gather", _VS_K_ALLGATHER, c, send, recv, count, NULL, NULL,
                           dt, VS_OP_SUM, work);
}

VS_API vs_result vs_all_gatherv(vs_comm* c, const void* send, void* recv, const size_t* counts,
                                const size_t* displs, vs_dtype dt, vs_work** work)
{
    if (c && !counts) return _vs_err(VS_ERR_NULL, "vs_all_gatherv: counts is NULL");
    return _vs_gather_like("vs_all_gatherv", _VS_K_ALLGATHER, c, send, recv, 0, counts, displs,
                           dt, VS_OP_SUM, work);
}

VS_API vs_result vs_reduce_scatter(vs_comm* c, const void* send, void* recv, size_t count,
                                   vs_dtype dt, vs_op op, vs_work** work)
{
    return _vs_gather_like("vs_reduce_scatter", _VS_K_REDSCAT, c, send, recv, count, NULL, NULL,
                           dt, op, work);
}

VS_API vs_result vs_reduce_scatterv(vs_comm* c, const void* send, void* recv,
                                    const size_t* counts, vs_dtype dt, vs_op op, vs_work** work)
{
    if (c && !counts) return _vs_err(VS_ERR_NULL, "vs_reduce_scatterv: counts is NULL");
    return _vs_gather_like("vs_reduce_scatterv", _VS_K_REDSCAT, c, send, recv, 0, counts, NULL,
                           dt, op, work);
}

_VS_PRIVATE vs_result _vs_all_to_all(const char* fn, vs_comm* c, const void* send,
                                     const size_t* scounts, const size_t* sdispls, void* recv,
                                     const size_t* rcounts, const size_t* rdispls, size_t count,
                                     vs_dtype dt, vs_work** work)
{
    _VS_TRY(_vs_check_comm(fn, c, dt));
    _vs_opdesc o = _vs_op_make(_VS_K_ALLTOALL, dt, VS_OP_SUM, 0, send, recv, scounts ? 0 : count);
    o.uniform = scounts == NULL;
    _VS_TRY(_vs_op_arrays(fn, _VS_WH(c->world), &o, c->size, count, scounts, sdispls, rcounts, rdispls));
    size_t stot = 0, rtot = 0;
    for (int i = 0; i < c->size; i++) {
        size_t se = o.displs[i] + o.counts[i], re = o.rdispls[i] + o.rcounts[i];
        stot = se > stot ? se : stot;
        rtot = re > rtot ? re : rtot;
    }
    vs_result r = _vs_check_bufs(fn, send, recv, stot, rtot);
    if (!r && send && send == recv && (stot || rtot))
        r = _vs_err(VS_ERR_INVALID, "%s: send and recv are the same buffer; all-to-all is never in place", fn);
    if (r) {
        _vs_op_release(&o);
        return r;
    }
    return _vs_issue(c, &o, work);
}

VS_API vs_result vs_all_to_all(vs_comm* c, const void* send, void* recv, size_t count,
                               vs_dtype dt, vs_work** work)
{
    return _vs_all_to_all("vs_all_to_all", c, send, NULL, NULL, recv, NULL, NULL, count, dt, work);
}

VS_API vs_result vs_all_to_allv(vs_comm* c, const void* send, const size_t* send_counts,
                                const size_t* send_displs, void* recv, const size_t* recv_counts,
                                const size_t* recv_displs, vs_dtype dt, vs_work** work)
{
    if (c && (!send_counts || !recv_counts))
        return _vs_err(VS_ERR_NULL, "vs_all_to_allv: %s is NULL", send_counts ? "recv_counts" : "send_counts");
    return _vs_all_to_all("vs_all_to_allv", c, send, send_counts, send_displs, recv, recv_counts,
                          recv_displs, 0, dt, work);
}

VS_API vs_result vs_barrier(vs_comm* c, vs_work** work)
{
    _VS_CHECK_HANDLE(c, "comm");
    _vs_opdesc o = _vs_op_make(_VS_K_BARRIER, VS_F32, VS_OP_SUM, 0, NULL, NULL, 0);
    return _vs_issue(c, &o, work);
}

_VS_PRIVATE vs_result _vs_p2p(const char* fn, int kind, vs_comm* c, const void* sbuf, void* rbuf,
                              size_t count, vs_dtype dt, int peer, vs_work** work)
{
    _VS_TRY(_vs_check_comm(fn, c, dt));
    _VS_TRY(_vs_check_root(fn, c, peer, "peer"));
    _VS_TRY(_vs_check_elems(fn, count, dt, "count"));
    if (count && !sbuf && !rbuf) return _vs_err(VS_ERR_NULL, "%s: buffer is NULL for %zu elements", fn, count);
    _vs_opdesc o = _vs_op_make(kind, dt, VS_OP_DEFAULT, peer, sbuf, rbuf, count);
    return _vs_issue(c, &o, work);
}

VS_API vs_result vs_send(vs_comm* c, const void* buf, size_t count, vs_dtype dt, int peer,
                         vs_work** work)
{
    return _vs_p2p("vs_send", _VS_K_SEND, c, buf, NULL, count, dt, peer, work);
}

VS_API vs_result vs_recv(vs_comm* c, void* buf, size_t count, vs_dtype dt, int peer, vs_work** work)
{
    return _vs_p2p("vs_recv", _VS_K_RECV, c, NULL, buf, count, dt, peer, work);
}

VS_API vs_result vs_comm_split(vs_comm* c, int color, int key, vs_comm** out)
{
    _VS_CHECK_HANDLE(c, "comm");
    _VS_CHECK_NULL(out, "out");
    *out = NULL;
    if (color < 0 && color != VS_COLOR_NONE)
        return _vs_err(VS_ERR_INVALID, "vs_comm_split: color %d must be >= 0 or VS_COLOR_NONE", color);
    if (c->group_depth > 0) return _vs_err(VS_ERR_STATE, "vs_comm_split: not allowed inside a group");
    if (c->tp->split) return c->tp->split(c, color, key, out);
    _vs_opdesc o = _vs_op_make(_VS_K_SPLIT, VS_F32, VS_OP_SUM, 0, NULL, NULL, 0);
    o.color = color;
    o.key = key;
    o.split_out = out;
    return _vs_issue(c, &o, NULL);
}

// (lifetimes: free, abort)


/* Drains the queue, stops the progress thread and frees what the handle holds,
   not the handle itself. Handles not yet waited are completed and detached: their
   vs_wait then returns the result without the communicator. */
_VS_PRIVATE void _vs_comm_teardown(vs_comm* c)
{
    pthread_mutex_lock(&c->qmu);
    while (c->qhead || c->qbusy) pthread_cond_wait(&c->qcv, &c->qmu);
    c->qstop = 1;
    pthread_cond_broadcast(&c->qcv);
    int on = c->qthread_on;
    vs_work* pending = c->works;
    c->works = NULL;
    pthread_mutex_unlock(&c->qmu);
    if (on) pthread_join(c->qthread, NULL);
    for (vs_work* w = pending; w; w = w->wnext) {
        if (c->tp->detach) c->tp->detach(w);
        _vs_work_release(c, w);
        w->comm = NULL;
    }
    const _vs_hooks* h = _VS_WH(c->world);
    for (int i = 0; i < _VS_QUARANTINE; i++) _vs_hfree(h, c->waited[i]);
    for (int i = 0; i < c->gn; i++) _vs_op_release(&c->gops[i]);
    _vs_hfree(h, c->gops);
    c->tp->destroy(c);
    pthread_mutex_destroy(&c->qmu);
    pthread_cond_destroy(&c->qcv);
}

_VS_PRIVATE void _vs_comm_destroy(vs_comm* c)
{
    if (!c) return;
    _vs_comm_teardown(c);
    _vs_hfree(_VS_WH(c->world), c);
}

VS_API vs_result vs_comm_free(vs_comm* c)
{
    if (!c) return VS_OK;
    _VS_CHECK_HANDLE(c, "comm");
    if (c->kind != _VS_COMM_USER)
        return _vs_err(VS_ERR_INVALID, "vs_comm_free: this communicator belongs to its %s",
                       c->kind == _VS_COMM_WORLD ? "world" : "mesh");
    if (c->group_depth > 0) return _vs_err(VS_ERR_STATE, "vs_comm_free: a group is open on this communicator");
    _vs_comm_teardown(c);
    c->magic = _VS_MAGIC_DEAD;
    vs_world* w = c->world;
    if (!w) {
        _vs_hfree(NULL, c);
        return VS_OK;
    }
    // kept among the world's last freed communicators: a second free is an error
    int slot = w->ndead++ % _VS_QUARANTINE;
    _vs_hfree(&w->hooks, w->dead[slot]);
    w->dead[slot] = c;
    return VS_OK;
}

VS_API vs_result vs_comm_abort(vs_comm* c)
{
    _VS_CHECK_HANDLE(c, "comm");
    __atomic_store_n(&c->aborted, 1, __ATOMIC_SEQ_CST);
    c->tp->abort(c, VS_ERR_ABORTED, -1, NULL);
    return VS_OK;
}

VS_API vs_result vs_comm_abort_with(vs_comm* c, vs_result why, const char* message)
{
    _VS_CHECK_HANDLE(c, "comm");
    if (why >= 0) return _vs_err(VS_ERR_INVALID, "vs_comm_abort_with: why %d is not an error (a negative vs_result)", (int)why);
    const _vs_errstate* es = _vs_err_tls();
    int me = c->world ? c->world->rank : c->rank;
    __atomic_store_n(&c->aborted, 1, __ATOMIC_SEQ_CST);
    if (!message && es->origin && es->origin - 1 != me) { // another rank's failure: that one is the cause
        char cause[_VS_ERR_MSG];
        _vs_fmt(cause, sizeof cause, "%s", es->msg);
        c->tp->abort(c, VS_ERR_ABORTED, es->origin - 1, cause);
        return VS_OK;
    }
    char cause[_VS_ERR_MSG];
    _vs_fmt(cause, sizeof cause, "world rank %d failed (%s)%s%s", me, vs_result_string(why),
            (message ? message : es->msg)[0] ? ": " : "", message ? message : es->msg);
    c->tp->abort(c, why, me, cause);
    return VS_OK;
}

// >>threads -------------------------------------------------------------------

/* Spins until *p != v (returns 1) or the spin budget is spent (returns 0). */
_VS_PRIVATE int _vs_spin_while_eq(const int* p, int v, int long_spin)
{
    for (int i = 0; i < _VS_SPIN_PAUSES + _VS_SPIN_YIELDS; i++) {
        if (__atomic_load_n(p, __ATOMIC_ACQUIRE) != v) return 1;
        if (i < _VS_SPIN_PAUSES)
            _vs_cpu_relax();
        else
            sched_yield();
    }
    if (!long_spin) return 0;
    double t0 = _vs_now();
    do {
        for (int i = 0; i < 64; i++) {
            if (__atomic_load_n(p, __ATOMIC_ACQUIRE) != v) return 1;
            _vs_cpu_relax();
        }
    } while (_vs_now() - t0 < _VS_SPIN_LONG_S);
    return 0;
}

_VS_PRIVATE int _vs_online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

enum { _VS_P2P_POSTED = 0, _VS_P2P_MATCHED, _VS_P2P_DONE };

typedef struct _vs_tp2p {
    int is_send, src, dst;
    const void* sbuf;
    void* rbuf;
    size_t bytes;
    int state; // atomic
    vs_result res;
    struct _vs_tp2p* next;
} _vs_tp2p;

/* A job's cause as ranks quote it: "world rank 5 failed (VS_ERR_INVALID): ..." */
#define _VS_CAUSE_MSG 800

/* State shared by the ranks of one threads-transport communicator. */
struct _vs_tshared {
    int n;
    int refs; // handles alive, under mu
    pthread_mutex_t mu;
    pthread_cond_t cv;     // barrier
    pthread_cond_t p2p_cv; // point-to-point completion
    int gen;               // barrier generation (atomic; wraps)
    int long_spin;         // every rank can have a core: spin longer before sleeping
    int arrived, sleepers;
    int aborted;           // atomic
    vs_result abort_res;   // why, with abort_msg and abort_origin (set once, under mu, before aborted)
    int abort_origin;      // the world rank whose failure it was
    int abort_cause_at;    // where the origin's own text starts in abort_msg (after "job aborted: ")
    char abort_msg[_VS_CAUSE_MSG + 16];
    /* [i]: what member i called, and its send and receive buffers, each written
       by member i before the entry barrier and read by all after it. Shared, not
       a table of n a rank copied each call: 24 B x n a communicator a rank
       (24 MiB for the world and its groups at 1,024 ranks) */
    const _vs_opdesc** ops;
    const void** srcs;
    void** dsts;
    /* a split: member i's new state and place in it, written by member 0 */
    _vs_tshared** split_out;
    int* split_at;
    /* [dst]: the unmatched sends to rank dst, and the receives it posted, in
       posting order (a pair matches the first of its source: FIFO per pair).
       Per destination, not per pair: n x n heads were 16 MiB at 1,024 ranks,
       and a ring of send/recv touched a page of them per rank */
    _vs_tp2p** sendq;
    _vs_tp2p** recvq;
    int* granks;      // world rank of each member
    int* at;          // barrier generation each member last arrived at (under mu)
    _vs_tjob* job;    // the job, for fail-fast (NULL outside vs_launch)
    const _vs_hooks* h; // its allocator: the job's (every rank's world has the same)
    _vs_tshared* jnext; // the job's list of live shared states
};

/* One vs_launch job: its ranks, and the fail-fast state every communicator of the
   job shares. A rank that fails, aborts or returns while peers wait on it makes
   the first "cause"; every communicator of the job is then aborted, so no rank
   waits for the timeout, and vs_launch reports the cause: the failing rank's own
   result and its last message (what its function returned, when that is its own
   error, else what it aborted with). */
struct _vs_tjob {
    vs_launch_desc desc;
    vs_rank_fn fn;
    void* arg;
    _vs_tshared* sh;
    vs_world** worlds;
    vs_result* results;
    _vs_hooks hooks;    // from the launch desc: the job's own allocations and logging
    pthread_mutex_t mu; // guards comms and the cause; taken before any s->mu, never after
    _vs_tshared* comms; // live shared states (jnext)
    int* exited;        // [n] 1 once a rank's function returned and its world was freed (atomic)
    int failed;         // atomic; cause_* are written before it is set
    int64_t failed_us;  // atomic: when (microseconds of _vs_now) it was set (_vs_job_settled)
    vs_result cause_res;
    int cause_rank;     // the world rank whose failure it is
    char cause[_VS_CAUSE_MSG];
    /* Reconfiguration (>>elastic), under mu: who is in the world's communicator
       (live), who failed and was recovered from (vs_launch leaves them out),
       each rank's pending arrival at an agreement (tk: the round's answer is
       written there, NULL: none), the rounds taken (epoch), and the
       replacements' threads (vs_world_respawn). */
    pthread_cond_t rcv; // an arrival, an exit, a completed round
    int* live;
    int* recovered;
    struct _vs_rticket** tk;
    int epoch;
    struct _vs_textra* extra;
#ifdef VESCALE_NCCL
    ncclUniqueId id;
#endif
};

_VS_PRIVATE void _vs_tshared_free(_vs_tshared* s)
{
    const _vs_hooks* h = s->h;
    _vs_hfree(h, (void*)s->ops);
    _vs_hfree(h, (void*)s->srcs);
    _vs_hfree(h, s->dsts);
    _vs_hfree(h, s->split_out);
    _vs_hfree(h, s->split_at);
    _vs_hfree(h, s->sendq);
    _vs_hfree(h, s->recvq);
    _vs_hfree(h, s->granks);
    _vs_hfree(h, s->at);
    _vs_hfree(h, s);
}

/* Shared state of an n-member communicator whose member i is world rank granks[i]
   (NULL: i), registered with `job` (may be NULL), allocated from h. */
_VS_PRIVATE _vs_tshared* _vs_tshared_new(int n, const int* granks, _vs_tjob* job, const _vs_hooks* h)
{
    _vs_tshared* s = _VS_HNEW(h, _vs_tshared, 1);
    if (!s) return NULL;
    s->h = h;
    s->n = n;
    s->refs = n;
    /* Spin long only when every thread rank of the job has a CPU: a split's
       members are few, but the job's other ranks share the same cores, and a
       pair that spins starves them (a TP pair's all-reduce on 8 ranks and 2
       cores took 2-7x the world's). */
    s->long_spin = (job && job->desc.nranks > n ? job->desc.nranks : n) <= _vs_online_cpus();
    s->ops = _VS_HNEW(h, const _vs_opdesc*, n);
    s->srcs = _VS_HNEW(h, const void*, n);
    s->dsts = _VS_HNEW(h, void*, n);
    s->split_out = _VS_HNEW(h, _vs_tshared*, n);
    s->split_at = _VS_HNEW(h, int, n);
    s->sendq = _VS_HNEW(h, _vs_tp2p*, n);
    s->recvq = _VS_HNEW(h, _vs_tp2p*, n);
    s->granks = _VS_HNEW(h, int, n);
    s->at = _VS_HNEW(h, int, n);
    if (!s->ops || !s->srcs || !s->dsts || !s->split_out || !s->split_at || !s->sendq || !s->recvq || !s->granks ||
        !s->at) {
        _vs_tshared_free(s);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        s->granks[i] = granks ? granks[i] : i;
        s->at[i] = -1;
    }
    pthread_mutex_init(&s->mu, NULL);
    _vs_cond_init(&s->cv);
    _vs_cond_init(&s->p2p_cv);
    s->job = job;
    if (job) {
        pthread_mutex_lock(&job->mu);
        s->jnext = job->comms;
        job->comms = s;
        pthread_mutex_unlock(&job->mu);
    }
    return s;
}

_VS_PRIVATE void _vs_tshared_unref(_vs_tshared* s)
{
    pthread_mutex_lock(&s->mu);
    int left = --s->refs;
    pthread_mutex_unlock(&s->mu);
    if (left > 0) return;
    if (s->job) {
        pthread_mutex_lock(&s->job->mu);
        _vs_tshared** l = &s->job->comms;
        while (*l && *l != s) l = &(*l)->jnext;
        if (*l) *l = s->jnext;
        pthread_mutex_unlock(&s->job->mu);
    }
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->p2p_cv);
    _vs_tshared_free(s);
}

/* Marks s failed with `why`, caused by world rank `origin`, and its message
   `prefix` + `cause` (the first reason stays), and wakes every waiter. */
_VS_PRIVATE void _vs_tshared_abort(_vs_tshared* s, vs_result why, int origin, const char* prefix, const char* cause)
{
    pthread_mutex_lock(&s->mu);
    if (!s->aborted) {
        s->abort_res = why;
        s->abort_origin = origin;
        s->abort_cause_at = _vs_fmt(s->abort_msg, sizeof s->abort_msg, "%s", prefix ? prefix : "");
        if (s->abort_cause_at >= (int)sizeof s->abort_msg) s->abort_cause_at = (int)sizeof s->abort_msg - 1;
        _vs_fmt(s->abort_msg + s->abort_cause_at, sizeof s->abort_msg - (size_t)s->abort_cause_at, "%s",
                cause ? cause : "the communicator was aborted");
    }
    __atomic_store_n(&s->aborted, 1, __ATOMIC_SEQ_CST);
    pthread_cond_broadcast(&s->cv);
    pthread_cond_broadcast(&s->p2p_cv);
    pthread_mutex_unlock(&s->mu);
}

/* The error a rank gets from an aborted communicator (s->aborted read as set): a
   consequence of abort_origin's failure. */
_VS_PRIVATE vs_result _vs_tshared_abort_result(_vs_tshared* s, const char* what)
{
    return _vs_err_from(s->abort_origin, s->abort_msg + s->abort_cause_at,
                        s->abort_res == VS_ERR_TIMEOUT ? VS_ERR_TIMEOUT : VS_ERR_ABORTED, "%s: %s", what, s->abort_msg);
}

_VS_PRIVATE void _vs_op_where(const vs_comm* c, const _vs_opdesc* o, char* buf, size_t cap);

/* The same, naming this rank's call: "all_reduce #3 (f32 x 4, sum) on world: ...".
   A call issued after the abort (later) is VS_ERR_ABORTED whatever the cause. */
_VS_PRIVATE int _vs_t_job_aborted(const _vs_tshared* sh) { return __atomic_load_n(&sh->aborted, __ATOMIC_ACQUIRE); }

_VS_PRIVATE vs_result _vs_t_abort_result_op(vs_comm* c, const _vs_opdesc* op, int later)
{
    char where[256];
    _vs_op_where(c, op, where, sizeof where);
    if (later)
        return _vs_err_from(c->sh->abort_origin, c->sh->abort_msg + c->sh->abort_cause_at, VS_ERR_ABORTED,
                            "%s: the communicator was aborted: %s", where, c->sh->abort_msg);
    return _vs_tshared_abort_result(c->sh, where);
}

/* Ends the job: records the cause, world rank `origin`'s failure (the first one
   wins), aborts s (may be NULL: the communicator where it happened) with `res`
   and the cause as it is, and every other communicator of the job with
   VS_ERR_ABORTED and "job aborted: <cause>", so peers blocked anywhere return at
   once naming the cause. All under job->mu: a second, later cause changes no
   communicator. Never called with an s->mu held. */
_VS_PRIVATE void _vs_job_fail(_vs_tjob* job, _vs_tshared* s, vs_result res, int origin, const char* cause)
{
    if (!job) {
        if (s) _vs_tshared_abort(s, res, origin, NULL, cause);
        return;
    }
    pthread_mutex_lock(&job->mu);
    if (!__atomic_load_n(&job->failed, __ATOMIC_ACQUIRE)) {
        job->cause_res = res;
        job->cause_rank = origin;
        _vs_fmt(job->cause, sizeof job->cause, "%s", cause);
        __atomic_store_n(&job->failed_us, (int64_t)(_vs_now() * 1e6), __ATOMIC_RELEASE);
        __atomic_store_n(&job->failed, 1, __ATOMIC_RELEASE);
        const vs_world* lw = _vs_err_tls()->world; // the cause, once for the job
        if (lw) vs_log(lw, VS_LOG_ERROR, "job aborted: %s", job->cause);
        if (s) _vs_tshared_abort(s, res, origin, NULL, job->cause);
    }
    for (_vs_tshared* t = job->comms; t; t = t->jnext)
        _vs_tshared_abort(t, VS_ERR_ABORTED, job->cause_rank, "job aborted: ", job->cause);
    pthread_mutex_unlock(&job->mu);
}

/* 1 once the job has failed and a short grace has passed (NCCL's waits, the
   watchdog): work every rank had joined before the failure still completes, so
   ranks waiting for the same finished step see it finish alike instead of some
   aborting before it and some after (>>elastic: the survivors' states must
   agree on the step; vs_train_reconfigure takes it from those who have it). */
#define _VS_FAIL_GRACE_S 0.25
_VS_PRIVATE int _vs_job_settled(const _vs_tjob* job, double timeout)
{
    if (!job || !__atomic_load_n(&job->failed, __ATOMIC_ACQUIRE)) return 0;
    double grace = timeout > 0 && timeout < _VS_FAIL_GRACE_S ? timeout : _VS_FAIL_GRACE_S;
    return _vs_now() - (double)__atomic_load_n(&job->failed_us, __ATOMIC_ACQUIRE) * 1e-6 >= grace;
}

/* World rank `rank`'s function returned `res` with its own error `msg`: when that
   rank is the job's cause, vs_launch reports this (its final word on it). */
_VS_PRIVATE void _vs_job_final(_vs_tjob* job, int rank, vs_result res, const char* msg)
{
    pthread_mutex_lock(&job->mu);
    if (__atomic_load_n(&job->failed, __ATOMIC_ACQUIRE) && job->cause_rank == rank) {
        job->cause_res = res;
        _vs_fmt(job->cause, sizeof job->cause, "%s", msg);
    }
    pthread_mutex_unlock(&job->mu);
}

/* World rank `rank` has returned from its function: wake every communicator it
   belongs to, so waiters see it is gone (_vs_t_gone) instead of timing out. */
_VS_PRIVATE void _vs_job_exit(_vs_tjob* job, int rank)
{
    __atomic_store_n(&job->exited[rank], 1, __ATOMIC_RELEASE);
    pthread_mutex_lock(&job->mu);
    pthread_cond_broadcast(&job->rcv); // (an agreement counts it failed)
    for (_vs_tshared* t = job->comms; t; t = t->jnext) {
        int member = 0;
        for (int i = 0; i < t->n && !member; i++) member = t->granks[i] == rank;
        if (!member) continue;
        pthread_mutex_lock(&t->mu);
        pthread_cond_broadcast(&t->cv);
        pthread_cond_broadcast(&t->p2p_cv);
        pthread_mutex_unlock(&t->mu);
    }
    pthread_mutex_unlock(&job->mu);
}

/* Member index of a rank of s that has returned from its function without
   arriving at barrier generation g (g < 0: any that has returned), or -1. */
_VS_PRIVATE int _vs_t_gone(const _vs_tshared* s, int g)
{
    if (!s->job) return -1;
    for (int i = 0; i < s->n; i++)
        if (__atomic_load_n(&s->job->exited[s->granks[i]], __ATOMIC_ACQUIRE) && (g < 0 || s->at[i] != g)) return i;
    return -1;
}

_VS_PRIVATE void _vs_world_retire_comm(vs_world* w);

/* The threads transport's agreement (>>elastic: vs_world_shrink, vs_mesh_shrink,
   vs_world_grow). It is the job's own memory, so it needs no communicator:
   each rank arrives with a ticket and waits; the last to make the round
   complete writes every participant's answer into its ticket. A shrink round
   is complete when every live rank has arrived or returned from its function
   (the ones that returned are the failed set: one set, the same for all, and a
   rank that dies while the others wait joins it instead of being waited for);
   a grow round when every rank that has not returned has arrived. */
enum { _VS_REFORM_SHRINK = 1, _VS_REFORM_GROW = 2 };

/* _vs_keep_fn (declared with the transport table): a shrink's choice of who
   stays (vs_mesh_shrink: not a failed rank's replica): 1 when world rank `rank`
   stays, given the failed set. */

typedef struct _vs_rticket {
    int kind;            // _VS_REFORM_*
    _vs_keep_fn keep;    // shrink: who stays (NULL: every survivor)
    void* keep_ctx;
    int done;            // set by the round's completer, with the rest
    _vs_tshared* sh;     // the new world communicator's state (NULL: this rank left)
    int index, n;        // this rank's place in it, and its size
    int* members;        // its members' world ranks (the completer's copy for this rank: it frees it)
    int can_shrink;      // NCCL: this rank's world ncclComm_t is still there (revoked or whole)
    int use_shrink;      // NCCL: every staying rank's is: ncclCommShrink it; else a new one from id
    unsigned char id[128]; // NCCL: the new communicator's ncclUniqueId (opaque here)
    vs_reform_info info;
} _vs_rticket;

_VS_PRIVATE void _vs_rlist(int* list, int* n, int v)
{
    if (*n < VS_REFORM_LIST) list[*n] = v;
    (*n)++;
}

/* 1 when the open round of `kind` can complete (job->mu held): every member
   arrived or returned from its function; those that returned (a shrink's) in
   failed[*nf]. */
_VS_PRIVATE int _vs_threads_reform_ready(_vs_tjob* job, int kind, int* failed, int* nf)
{
    int np = 0;
    *nf = 0;
    for (int x = 0; x < job->desc.nranks; x++) {
        int gone = __atomic_load_n(&job->exited[x], __ATOMIC_ACQUIRE);
        _vs_rticket* t = job->tk[x];
        if (kind == _VS_REFORM_SHRINK) {
            if (!job->live[x]) continue;
            if (gone) failed[(*nf)++] = x;
            else if (!t || t->kind != kind) return 0;
            else np++;
        } else if (!gone) {
            if (!t || t->kind != kind) return 0;
            np++;
        }
    }
    return np > 0;
}

/* Completes a round _vs_threads_reform_ready found complete: who stays, the new
   communicator's state, every participant's answer in its ticket. 0 when out
   of memory (the waiters' deadline ends it). */
_VS_PRIVATE int _vs_threads_reform_finish(_vs_tjob* job, int kind, const int* failed, int nf, int* stay)
{
    const int n = job->desc.nranks;
    int ns = 0;
    _vs_rticket* first = NULL;
    for (int x = 0; x < n; x++) {
        _vs_rticket* t = job->tk[x];
        stay[x] = 0;
        if (!t || t->kind != kind || __atomic_load_n(&job->exited[x], __ATOMIC_ACQUIRE)) continue;
        if (kind == _VS_REFORM_SHRINK && !job->live[x]) continue;
        if (!first) first = t;
        stay[x] = !first->keep || first->keep(failed, nf, x, first->keep_ctx);
        ns += stay[x];
    }
    int* members = _VS_HNEW(&job->hooks, int, ns ? ns : 1);
    _vs_tshared* sh = NULL;
    int threads = job->desc.transport == VS_TRANSPORT_THREADS, use_shrink = kind == _VS_REFORM_SHRINK;
    unsigned char id[128];
    memset(id, 0, sizeof id);
    if (members) {
        int k = 0;
        for (int x = 0; x < n; x++)
            if (stay[x]) members[k++] = x, use_shrink &= job->tk[x]->can_shrink;
    }
    int made = members != NULL; // the new communicator's state: threads, a shared state; NCCL, an id (or a shrink)
    if (made && ns && threads) made = (sh = _vs_tshared_new(ns, members, NULL, &job->hooks)) != NULL;
#ifdef VESCALE_NCCL
    ncclUniqueId uid;
    if (made && ns && !threads && !use_shrink) made = ncclGetUniqueId(&uid) == ncclSuccess;
    if (made && ns && !threads && !use_shrink) memcpy(id, &uid, sizeof uid);
#endif
    if (!made) {
        _vs_hfree(&job->hooks, members);
        return 0;
    }
    // registered with the job by hand: _vs_tshared_new would take job->mu, held here
    if (sh) {
        sh->job = job;
        sh->long_spin = n <= _vs_online_cpus();
        sh->jnext = job->comms;
        job->comms = sh;
    }
    job->epoch++;
    vs_reform_info ri;
    memset(&ri, 0, sizeof ri);
    ri.epoch = job->epoch;
    ri.nlive = ns;
    for (int i = 0; i < nf; i++) {
        _vs_rlist(ri.failed, &ri.nfailed, failed[i]);
        job->live[failed[i]] = 0;
        job->recovered[failed[i]] = 1; // (its failure no longer ends the job)
    }
    for (int x = 0; x < n; x++) {
        _vs_rticket* t = job->tk[x];
        if (!t || t->kind != kind || __atomic_load_n(&job->exited[x], __ATOMIC_ACQUIRE)) continue;
        if (kind == _VS_REFORM_SHRINK && !job->live[x]) continue;
        if (kind == _VS_REFORM_SHRINK && !stay[x]) _vs_rlist(ri.dropped, &ri.ndropped, x);
        if (kind == _VS_REFORM_GROW && !job->live[x]) _vs_rlist(ri.joined, &ri.njoined, x);
    }
    int k = 0;
    for (int x = 0; x < n; x++) {
        _vs_rticket* t = job->tk[x];
        if (!t || t->kind != kind || __atomic_load_n(&job->exited[x], __ATOMIC_ACQUIRE)) continue;
        if (kind == _VS_REFORM_SHRINK && !job->live[x]) continue;
        t->info = ri;
        t->info.left = !stay[x];
        t->sh = stay[x] ? sh : NULL;
        t->index = stay[x] ? k++ : -1;
        t->n = ns;
        t->use_shrink = use_shrink;
        memcpy(t->id, id, sizeof id);
        t->members = stay[x] ? _VS_HNEW(&job->hooks, int, ns) : NULL; // (NULL: the arriver reports no memory)
        if (t->members) memcpy(t->members, members, sizeof(int) * (size_t)ns);
        t->done = 1;
        job->tk[x] = NULL;
    }
    for (int x = 0; x < n; x++)
        if (stay[x]) job->live[x] = 1;
        else if (kind == _VS_REFORM_SHRINK && job->live[x]) job->live[x] = 0;
    if (kind == _VS_REFORM_SHRINK) __atomic_store_n(&job->failed, 0, __ATOMIC_RELEASE); // recovered
    pthread_cond_broadcast(&job->rcv);
    _vs_hfree(&job->hooks, members);
    return 1;
}

/* Completes the open round of `kind` when it can (job->mu held): 1 when done. */
_VS_PRIVATE int _vs_threads_reform_complete(_vs_tjob* job, int kind)
{
    int nf = 0;
    int* failed = _VS_HNEW(&job->hooks, int, job->desc.nranks);
    int* stay = _VS_HNEW(&job->hooks, int, job->desc.nranks);
    int done = failed && stay && _vs_threads_reform_ready(job, kind, failed, &nf) &&
               _vs_threads_reform_finish(job, kind, failed, nf, stay);
    _vs_hfree(&job->hooks, failed);
    _vs_hfree(&job->hooks, stay);
    return done;
}


/* The first 16 world ranks x with pick[x]: "1, 5, 6". */
_VS_PRIVATE void _vs_rank_list_text(const int* pick, int n, char* buf, size_t cap)
{
    size_t len = 0;
    int cnt = 0;
    buf[0] = 0;
    for (int x = 0; x < n; x++)
        if (pick[x] && ++cnt <= 16 && len < cap) len += (size_t)_vs_fmt(buf + len, cap - len, "%s%d", cnt > 1 ? ", " : "", x);
    if (cnt > 16 && len < cap) _vs_fmt(buf + len, cap - len, ", ... (%d in all)", cnt);
}

/* The live ranks of the job not yet arrived at the open round of `kind`
   (job->mu held), as _vs_rank_list_text words them. */
_VS_PRIVATE void _vs_threads_reform_missing(_vs_tjob* job, int kind, char* buf, size_t cap)
{
    int* pick = _VS_HNEW(&job->hooks, int, job->desc.nranks);
    buf[0] = 0;
    if (!pick) return;
    for (int x = 0; x < job->desc.nranks; x++)
        pick[x] = !__atomic_load_n(&job->exited[x], __ATOMIC_ACQUIRE) && (kind != _VS_REFORM_SHRINK || job->live[x]) &&
                  !(job->tk[x] && job->tk[x]->kind == kind);
    _vs_rank_list_text(pick, job->desc.nranks, buf, cap);
    _vs_hfree(&job->hooks, pick);
}

#ifdef VESCALE_NCCL
_VS_PRIVATE vs_result _vs_nccl_reform(vs_world* w, const _vs_rticket* tk, const char* fn, vs_comm** out);
#endif

/* The end of every agreement: nc (NULL: this rank left) becomes the world's
   communicator over the world ranks wr[0, tk->n) (taken; freed with the
   world's hooks), the old one retires, *info gets the round's answer. */
_VS_PRIVATE void _vs_reform_adopt(vs_world* w, vs_comm* nc, int* wr, const _vs_rticket* tk, vs_reform_info* info)
{
    if (nc) {
        nc->kind = _VS_COMM_WORLD;
        _vs_fmt(nc->label, sizeof nc->label, "world (epoch %d: %d rank%s)", tk->info.epoch, tk->n,
                tk->n == 1 ? "" : "s");
    }
    _vs_hfree(&w->hooks, w->wranks);
    w->wranks = nc ? wr : NULL;
    if (!nc) _vs_hfree(&w->hooks, wr);
    _vs_world_retire_comm(w);
    w->comm = nc;
    __atomic_store_n(&w->epoch, tk->info.epoch, __ATOMIC_RELEASE); // (the watchdog reads it)
    w->joining = nc == NULL;
    if (info) *info = tk->info;
}

/* Arrives at an agreement of `kind` and waits for its answer (the world's
   timeout). On success the world's communicator is the new one (or none: this
   rank left) and *info the round's answer. */
_VS_PRIVATE vs_result _vs_threads_reform(vs_world* w, int kind, _vs_keep_fn keep, void* ctx, vs_reform_info* info,
                                         const char* caller)
{
    (void)caller; // (its messages name the world's call, vs_mesh_shrink's too)
    const char* fn = kind == _VS_REFORM_SHRINK ? "vs_world_shrink" : "vs_world_grow";
    _vs_tjob* job = w->job;
    if (!job) return _vs_err(VS_ERR_UNSUPPORTED, "%s: this world is not a vs_launch job's", fn);
    const int me = w->rank;
    _vs_rticket tk;
    memset(&tk, 0, sizeof tk);
    tk.kind = kind;
    tk.keep = keep;
    tk.keep_ctx = ctx;
#ifdef VESCALE_NCCL
    tk.can_shrink = w->comm && (w->comm->nc || w->comm->revoked_nc);
#endif
    double end = _vs_now() + w->timeout;
    vs_result r = VS_OK;
    pthread_mutex_lock(&job->mu);
    if (kind == _VS_REFORM_SHRINK && !job->live[me])
        r = _vs_err(VS_ERR_STATE, "%s: world rank %d left the world at a shrink: it comes back with vs_world_grow",
                    fn, me);
    else if (kind == _VS_REFORM_SHRINK && !__atomic_load_n(&job->failed, __ATOMIC_ACQUIRE))
        r = _vs_err(VS_ERR_STATE, "%s: no rank failed since the world's last reconfiguration (epoch %d): nothing to "
                    "shrink from", fn, job->epoch);
    else if (kind == _VS_REFORM_GROW && job->live[me] && __atomic_load_n(&job->failed, __ATOMIC_ACQUIRE))
        r = _vs_err_from(job->cause_rank, job->cause, VS_ERR_ABORTED, "%s: a rank failed: shrink first (%s)", fn,
                         job->cause);
    if (r) {
        pthread_mutex_unlock(&job->mu);
        return r;
    }
    job->tk[me] = &tk;
    pthread_cond_broadcast(&job->rcv);
    while (!tk.done) {
        if (_vs_threads_reform_complete(job, kind)) continue;
        if (kind == _VS_REFORM_GROW && job->live[me] && __atomic_load_n(&job->failed, __ATOMIC_ACQUIRE)) {
            r = _vs_err_from(job->cause_rank, job->cause, VS_ERR_ABORTED, "%s: a rank failed while the world waited to "
                             "grow: shrink first (%s)", fn, job->cause);
            break;
        }
        double left = end - _vs_now();
        if (left <= 0) {
            char miss[256];
            _vs_threads_reform_missing(job, kind, miss, sizeof miss);
            r = _vs_err(VS_ERR_TIMEOUT, "%s: world rank%s %s neither arrived nor failed within %g s (world rank %d "
                        "waited)", fn, strchr(miss, ',') ? "s" : "", miss[0] ? miss : "?", w->timeout, me);
            break;
        }
        struct timespec dl = _vs_abs_deadline(left < 0.05 ? left : 0.05);
        pthread_cond_timedwait(&job->rcv, &job->mu, &dl);
    }
    if (!tk.done) job->tk[me] = NULL; // (withdrawn: the round goes on without this arrival)
    pthread_mutex_unlock(&job->mu);
    if (r) return r;
    vs_comm* nc = NULL;
    int* wr = tk.members;
    if (tk.index >= 0 && !wr) r = _vs_err(VS_ERR_NOMEM, "%s: out of memory for the new world communicator", fn);
    if (!r && tk.sh) { // threads: a handle on the round's shared state
        if ((nc = _vs_comm_new(w, VS_TRANSPORT_THREADS, tk.index, tk.n))) nc->sh = tk.sh;
        else r = _vs_err(VS_ERR_NOMEM, "%s: out of memory for the new world communicator", fn);
    }
#ifdef VESCALE_NCCL
    if (!r && tk.index >= 0 && w->tr == VS_TRANSPORT_NCCL) r = _vs_nccl_reform(w, &tk, fn, &nc);
#endif
    if (r) {
        if (tk.sh) _vs_tshared_unref(tk.sh);
        if (nc) _vs_comm_destroy(nc);
        _vs_hfree(&job->hooks, wr);
        return r;
    }
    _vs_reform_adopt(w, nc, wr, &tk, info);
    return VS_OK;
}

/* "all_reduce #7 (f32 x 1024, sum)": an operation's fingerprint for messages. */
_VS_PRIVATE void _vs_op_text(const _vs_opdesc* o, char* buf, size_t cap)
{
    const char* k = _vs_kind_names[o->kind];
    switch (o->kind) {
    case _VS_K_ALLREDUCE:
        _vs_fmt(buf, cap, "%s #%llu (%s x %zu, %s)", k, (unsigned long long)o->seq, vs_dtype_name(o->dt), o->count,
                 vs_op_name(o->op));
        break;
    case _VS_K_REDUCE:
        _vs_fmt(buf, cap, "%s #%llu (%s x %zu, %s, root %d)", k, (unsigned long long)o->seq, vs_dtype_name(o->dt),
                 o->count, vs_op_name(o->op), o->root);
        break;
    case _VS_K_BCAST:
        _vs_fmt(buf, cap, "%s #%llu (%s x %zu, root %d)", k, (unsigned long long)o->seq, vs_dtype_name(o->dt),
                 o->count, o->root);
        break;
    case _VS_K_ALLGATHER:
    case _VS_K_REDSCAT:
    case _VS_K_ALLTOALL:
        if (o->uniform)
            _vs_fmt(buf, cap, "%s #%llu (%s x %zu per rank)", k, (unsigned long long)o->seq, vs_dtype_name(o->dt),
                     o->count);
        else
            _vs_fmt(buf, cap, "%s #%llu (%s, uneven)", k, (unsigned long long)o->seq, vs_dtype_name(o->dt));
        break;
    case _VS_K_SEND:
    case _VS_K_RECV:
        _vs_fmt(buf, cap, "%s (%s x %zu, peer %d)", k, vs_dtype_name(o->dt), o->count, o->root);
        break;
    default: _vs_fmt(buf, cap, "%s #%llu", k, (unsigned long long)o->seq); break;
    }
}

/* "all_reduce #7 (f32 x 1024, sum) on DP group [0,2] of mesh (...)" */
_VS_PRIVATE void _vs_op_where(const vs_comm* c, const _vs_opdesc* o, char* buf, size_t cap)
{
    char t[128];
    _vs_op_text(o, t, sizeof t);
    _vs_fmt(buf, cap, "%s on %s", t, c->label[0] ? c->label : "a communicator");
}

/* "ranks 1, 3 (world 5, 7)": the members i with pick(s, i, arg), the first 16. */
_VS_PRIVATE void _vs_t_rank_list(const _vs_tshared* s, int (*pick)(const _vs_tshared*, int, int), int arg,
                                 char* buf, size_t cap)
{
    char a[160] = "", b[160] = "";
    int cnt = 0;
    for (int i = 0; i < s->n; i++) {
        if (!pick(s, i, arg)) continue;
        size_t la = strlen(a), lb = strlen(b);
        if (++cnt > 16) {
            if (cnt == 17) _vs_fmt(a + la, sizeof a - la, ", ..."), _vs_fmt(b + lb, sizeof b - lb, ", ...");
            continue;
        }
        _vs_fmt(a + la, sizeof a - la, "%s%d", cnt > 1 ? ", " : "", i);
        _vs_fmt(b + lb, sizeof b - lb, "%s%d", cnt > 1 ? ", " : "", s->granks[i]);
    }
    _vs_fmt(buf, cap, "%s %s (world %s)", cnt == 1 ? "rank" : "ranks", a, b);
}

_VS_PRIVATE int _vs_pick_absent(const _vs_tshared* s, int i, int g) { return s->at[i] != g; }

/* Barrier over the ranks of c's shared state, inside operation `op`. An entry
   barrier (timeout > 0) is where a peer may fail to arrive: it times out, sees a
   member that returned from its function, and honours aborts; the first two end
   the job (_vs_job_fail). Barriers after an entry barrier (timeout <= 0) only wait
   for ranks that are already inside the same operation doing memory work, so they
   cannot hang and must not return early (peers may be writing into this rank's
   buffers). */
_VS_PRIVATE vs_result _vs_t_barrier(vs_comm* c, double timeout, const _vs_opdesc* op)
{
    _vs_tshared* s = c->sh;
    pthread_mutex_lock(&s->mu);
    if (timeout > 0 && s->aborted) {
        pthread_mutex_unlock(&s->mu);
        return _vs_t_abort_result_op(c, op, 0);
    }
    int g = __atomic_load_n(&s->gen, __ATOMIC_RELAXED);
    s->at[c->rank] = g;
    if (++s->arrived == s->n) {
        s->arrived = 0;
        __atomic_store_n(&s->gen, (int)((unsigned)g + 1u), __ATOMIC_SEQ_CST);
        if (s->sleepers) pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        return VS_OK;
    }
    pthread_mutex_unlock(&s->mu);
    if (_vs_spin_while_eq(&s->gen, g, s->long_spin)) return VS_OK;
    // the clock is read outside the lock: a rank preempted inside it (ranks may
    // outnumber cores) stalls every peer that needs the lock to arrive
    double end = timeout > 0 ? _vs_now() + timeout : 0;
    struct timespec dl = _vs_abs_deadline(timeout); // the first wait slice
    vs_result r = VS_OK;
    pthread_mutex_lock(&s->mu);
    s->sleepers++;
    while (__atomic_load_n(&s->gen, __ATOMIC_ACQUIRE) == g) {
        if (timeout <= 0) {
            pthread_cond_wait(&s->cv, &s->mu);
            continue;
        }
        if (s->aborted) {
            r = _vs_t_abort_result_op(c, op, 0);
            break;
        }
        int gone = _vs_t_gone(s, g), late = 0;
        if (gone < 0 && pthread_cond_timedwait(&s->cv, &s->mu, &dl) == ETIMEDOUT &&
            __atomic_load_n(&s->gen, __ATOMIC_ACQUIRE) == g && !s->aborted) {
            double now = _vs_now();
            late = now >= end;
            if (!late) dl = _vs_abs_deadline(end - now); // a long timeout's next slice
        }
        if (gone >= 0 || late) {
            // the cause: named here, recorded for the job, seen by every peer
            char where[256], who[200], msg[400], cause[440];
            _vs_op_where(c, op, where, sizeof where);
            int me = s->granks[c->rank];
            if (gone >= 0) { // the cause is the rank that left; this rank reports it
                r = VS_ERR_ABORTED;
                _vs_fmt(msg, sizeof msg, "%s: rank %d (world %d) returned from its function while %d rank(s) wait for it",
                         where, gone, s->granks[gone], s->arrived);
            } else {
                r = VS_ERR_TIMEOUT;
                _vs_t_rank_list(s, _vs_pick_absent, g, who, sizeof who);
                _vs_fmt(msg, sizeof msg, "%s: %s did not arrive within %g s (%d of %d ranks arrived)", where, who,
                         timeout, s->arrived, s->n);
            }
            s->sleepers--;
            pthread_mutex_unlock(&s->mu);
            if (gone >= 0) {
                _vs_job_fail(s->job, s, r, s->granks[gone], msg);
                return _vs_err_from(s->granks[gone], msg, r, "%s", msg);
            }
            _vs_fmt(cause, sizeof cause, "world rank %d timed out: %s", me, msg);
            _vs_job_fail(s->job, s, r, me, cause);
            return _vs_err(r, "%s", msg);
        }
    }
    s->sleepers--;
    pthread_mutex_unlock(&s->mu);
    return r;
}

/* 1 when members i and k issued the same call: kind, dtype, op, root, counts and
   sequence number (the fingerprint). */
_VS_PRIVATE int _vs_t_same_call(const _vs_tshared* s, int i, int k)
{
    const _vs_opdesc* a = s->ops[k];
    const _vs_opdesc* b = s->ops[i];
    if (a->kind != b->kind || a->dt != b->dt || a->op != b->op || a->root != b->root || a->count != b->count ||
        a->seq != b->seq || a->uniform != b->uniform)
        return 0;
    if ((a->kind == _VS_K_ALLGATHER || a->kind == _VS_K_REDSCAT) && !a->uniform) // (uniform: count says it all)
        for (int j = 0; j < s->n; j++)
            if (a->counts[j] != b->counts[j]) return 0;
    return 1;
}

/* Every rank checks every rank's call, so all agree on a mismatch, and each names
   every distinct call with the ranks (group and world) that made it. */
_VS_PRIVATE vs_result _vs_t_match(vs_comm* c)
{
    _vs_tshared* s = c->sh;
    int n = s->n;
    int k = 1;
    while (k < n && _vs_t_same_call(s, k, 0)) k++;
    if (k < n) {
        char msg[512], who[200], call[128];
        size_t len = (size_t)_vs_fmt(msg, sizeof msg, "collective mismatch on %s: ", c->label);
        int groups = 0;
        for (int i = 0; i < n && len < sizeof msg; i++) {
            int seen = 0;
            for (int j = 0; j < i && !seen; j++) seen = _vs_t_same_call(s, i, j);
            if (seen) continue;
            if (groups++ == 4) {
                _vs_fmt(msg + len, sizeof msg - len, "; ...");
                break;
            }
            _vs_t_rank_list(s, _vs_t_same_call, i, who, sizeof who);
            _vs_op_text(s->ops[i], call, sizeof call);
            len += (size_t)_vs_fmt(msg + len, sizeof msg - len, "%s%s called %s", groups > 1 ? "; " : "", who, call);
        }
        // the first field that differs, named as the caller knows it
        const _vs_opdesc* a = s->ops[0];
        const _vs_opdesc* b = s->ops[k];
        if (len >= sizeof msg || a->kind != b->kind)
            ;
        else if (a->dt != b->dt)
            _vs_fmt(msg + len, sizeof msg - len, " (dtype differs: %s on rank 0, %s on rank %d)", vs_dtype_name(a->dt),
                    vs_dtype_name(b->dt), k);
        else if (a->op != b->op)
            _vs_fmt(msg + len, sizeof msg - len, " (op differs: %s on rank 0, %s on rank %d)", vs_op_name(a->op),
                    vs_op_name(b->op), k);
        else if (a->root != b->root)
            _vs_fmt(msg + len, sizeof msg - len, " (root differs: %d on rank 0, %d on rank %d)", a->root, b->root, k);
        else if (a->count != b->count || a->uniform != b->uniform)
            _vs_fmt(msg + len, sizeof msg - len, " (count differs: %zu on rank 0, %zu on rank %d)", a->count, b->count,
                    k);
        else if (a->seq != b->seq)
            _vs_fmt(msg + len, sizeof msg - len, " (sequence number differs: #%llu on rank 0, #%llu on rank %d)",
                    (unsigned long long)a->seq, (unsigned long long)b->seq, k);
        else
            for (int j = 0; j < n; j++)
                if (a->counts[j] != b->counts[j]) {
                    _vs_fmt(msg + len, sizeof msg - len, " (counts[%d] differs: %zu on rank 0, %zu on rank %d)", j,
                            a->counts[j], b->counts[j], k);
                    break;
                }
        return _vs_err(VS_ERR_MISMATCH, "%s", msg);
    }
    if (s->ops[0]->kind == _VS_K_ALLTOALL) {
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                size_t sc = s->ops[i]->counts[j], rc = s->ops[j]->rcounts[i];
                if (sc != rc)
                    return _vs_err(VS_ERR_MISMATCH,
                                   "all_to_all #%llu on %s: rank %d (world %d) sends %zu elements to rank %d "
                                   "(world %d), which expects %zu",
                                   (unsigned long long)s->ops[i]->seq, c->label, i, s->granks[i], sc, j,
                                   s->granks[j], rc);
            }
    }
    return VS_OK;
}

/* Elements per rank-chunk of an all-reduce: whole cache lines, so chunks of two
   ranks never share a line. */
_VS_PRIVATE size_t _vs_chunk(size_t count, int n, size_t esz)
{
    size_t per = (count + (size_t)n - 1) / (size_t)n;
    size_t line = 64 / esz;
    return (per + line - 1) / line * line;
}

/* Buffers at least this large are written with non-temporal stores: they will not
   be read again soon, and streaming skips the read-for-ownership of every line. */
#ifndef VESCALE_NT_MIN
#define VESCALE_NT_MIN ((size_t)4 << 20)
#endif
/* `bytes + 1 >`: the same test, without a warning when VESCALE_NT_MIN is 0 */
#define _VS_USE_NT(bytes) ((size_t)(bytes) + 1 > (size_t)(VESCALE_NT_MIN))
#define _VS_FAN_BLOCK ((size_t)64 << 10) /* source block kept in cache while fanned out */

/* Lines to prefetch while a copy streams out: for each 64 bytes stored, the next 64
   bytes (from byte off on, up to `bytes`) of src[first], src[first + step], ...
   below src[count]. */
typedef struct _vs_pf {
    const void* const* src;
    int first, step, count;
    size_t off, bytes;
} _vs_pf;

/* Copies bytes from src to dst, streaming (non-temporal) when nt; a streaming copy
   also prefetches the lines `pf` names, so a core's reads of the next block overlap
   its stores of this one (pf NULL: none). */
_VS_PRIVATE void _vs_copy_nt_pf(void* dst, const void* src, size_t bytes, int nt, const _vs_pf* pf)
{
    if (dst == src || !bytes) return;
#ifdef _VS_HAVE_NT
    if (nt && bytes >= 256) {
        char* d = (char*)dst;
        const char* p = (const char*)src;
        size_t head = (16 - ((uintptr_t)d & 15)) & 15, pos = 0;
        memcpy(d, p, head);
        d += head, p += head, bytes -= head;
        for (; bytes >= 64; bytes -= 64, d += 64, p += 64, pos += 64) {
            if (pf && pos < pf->bytes)
                for (int j = pf->first; j < pf->count; j += pf->step)
                    _mm_prefetch((const char*)pf->src[j] + pf->off + pos, _MM_HINT_T0);
            __m128i a = _mm_loadu_si128((const __m128i*)p), b = _mm_loadu_si128((const __m128i*)(p + 16));
            __m128i e = _mm_loadu_si128((const __m128i*)(p + 32)), f = _mm_loadu_si128((const __m128i*)(p + 48));
            _mm_stream_si128((__m128i*)d, a);
            _mm_stream_si128((__m128i*)(d + 16), b);
            _mm_stream_si128((__m128i*)(d + 32), e);
            _mm_stream_si128((__m128i*)(d + 48), f);
        }
        memcpy(d, p, bytes);
        return;
    }
#else
    (void)nt;
    (void)pf;
#endif
    memcpy(dst, src, bytes);
}

_VS_PRIVATE void _vs_copy_nt(void* dst, const void* src, size_t bytes, int nt) { _vs_copy_nt_pf(dst, src, bytes, nt, NULL); }

_VS_PRIVATE void _vs_copy(void* dst, const void* src, size_t bytes) { _vs_copy_nt(dst, src, bytes, 0); }

/* Makes streamed stores visible before the barrier that publishes them. */
_VS_PRIVATE void _vs_streamed_stores_fence(void)
{
#ifdef _VS_HAVE_NT
    _mm_sfence();
#endif
}

/* Copies src to dsts[k] + off for every k, a cache-sized block at a time, so the
   source is read from memory once however many destinations there are. */
_VS_PRIVATE void _vs_copy_fan(void* const* dsts, int ndst, size_t off, const void* src, size_t bytes, int nt)
{
    for (size_t b = 0; b < bytes; b += _VS_FAN_BLOCK) {
        size_t m = bytes - b < _VS_FAN_BLOCK ? bytes - b : _VS_FAN_BLOCK;
        for (int k = 0; k < ndst; k++) _vs_copy_nt((char*)dsts[k] + off + b, (const char*)src + b, m, nt);
    }
}

/* Bytes of each source per block when the result is streamed (nt). A core reads a
   block's sources, then stores its results; reads and stores overlap only if the
   next block's sources are prefetched during the stores, a line per line stored,
   and blocks are small enough for those to stay in L1 (the figures that chose
   2 KiB: bench/RESULTS.md, "reduction block"). */
#define _VS_RED_STREAM_BYTES 2048

#ifdef _VS_HAVE_NT
#define _VS_STREAM_SEG 4096 /* f32 elements in a segment of _vs_reduce_stream_f32: 16 KiB */
#define _VS_STREAM_PF 2048  /* bytes ahead of its loads that it prefetches a source */

/* Stores the 16 floats at p to d (16-byte aligned) with non-temporal stores. */
_VS_PRIVATE void _vs_stream_line_f32(float* d, const float* p)
{
    _mm_stream_ps(d, _mm_loadu_ps(p));
    _mm_stream_ps(d + 4, _mm_loadu_ps(p + 4));
    _mm_stream_ps(d + 8, _mm_loadu_ps(p + 8));
    _mm_stream_ps(d + 12, _mm_loadu_ps(p + 12));
}

/* The f32 sum (avg: then divided by n) of srcs[0..n) over [off, off+len), streamed
   to every dsts[k] + dst_off (each 16-byte aligned). Segment by segment: while
   source k of segment s is added into acc, segment s-1, complete in prev, is
   streamed to dsts[k], so one source's reads run alongside one destination's
   stores, as in a copy, instead of the block loop's 2n streams switched every
   2 KiB; it wins from 4 ranks up and loses at 2, and as reduce-scatter (one
   destination) at 4 (bench/RESULTS.md, "streamed segments"). The sum is in rank
   order ((s0 + s1) + s2) ..., as in
   _vs_reduce_block: the same bits. A segment is stored only after all its inputs
   were read, so in place is safe. */
_VS_PRIVATE void _vs_reduce_stream_f32(const void* const* srcs, int n, int avg, size_t off, size_t len,
                                       void* const* dsts, size_t dst_off)
{
    __m128 seg[2][_VS_STREAM_SEG / 4]; // __m128: 16-byte aligned
    const __m128 div = _mm_set1_ps((float)n);
    size_t pb = 0, pm = 0; // previous segment: offset, length
    for (size_t b = 0, cur = 0; pm || b < len; b += _VS_STREAM_SEG, cur ^= 1) {
        size_t m = b < len ? (len - b < _VS_STREAM_SEG ? len - b : _VS_STREAM_SEG) : 0;
        size_t m16 = m & ~(size_t)15, p16 = pm & ~(size_t)15;
        float* acc = (float*)seg[cur];
        const float* prev = (const float*)seg[cur ^ 1];
        for (int k = 0; k < n; k++) {
            const float* s = m ? (const float*)srcs[k] + off + b : NULL;
            float* d = pm ? (float*)dsts[k] + dst_off + pb : NULL;
            int last = avg && k == n - 1;
            for (size_t i = 0; i < m16 || i < p16; i += 16) {
                if (i < m16) {
                    if ((i + 16) * 4 + _VS_STREAM_PF <= m * 4)
                        _mm_prefetch((const char*)(s + i) + _VS_STREAM_PF, _MM_HINT_T0);
                    for (size_t j = i; j < i + 16; j += 4) {
                        __m128 a = _mm_loadu_ps(s + j);
                        if (k) a = _mm_add_ps(_mm_load_ps(acc + j), a);
                        if (last) a = _mm_div_ps(a, div);
                        _mm_store_ps(acc + j, a);
                    }
                }
                if (i < p16) _vs_stream_line_f32(d + i, prev + i);
            }
            for (size_t j = m16; j < m; j++) {
                float a = k ? acc[j] + s[j] : s[j];
                acc[j] = last ? a / (float)n : a;
            }
            if (p16 < pm) memcpy(d + p16, prev + p16, (pm - p16) * 4);
        }
        pb = b;
        pm = m;
    }
}
#endif

/* Reduces elements [off, off+len) of every rank's send buffer (c->sh->srcs) and writes
   them at element offset dst_off of each of dsts[0..ndst), block by block so the
   inputs of a block are all read before any output of it is written (in place). */
_VS_PRIVATE void _vs_t_reduce_range(vs_comm* c, vs_dtype dt, vs_op op, size_t off, size_t len,
                                    void* const* dsts, int ndst, size_t dst_off, int nt)
{
    unsigned char tmp[_VS_RED_BLOCK * 8];
    size_t esz = vs_dtype_size(dt);
    size_t blk = nt ? _VS_RED_STREAM_BYTES / esz : _VS_RED_BLOCK;
    int n = c->size;
    const void* const* srcs = c->sh->srcs;
#ifdef _VS_HAVE_NT
    // all-reduce of f32 sums over 4 or more ranks: segments (_vs_reduce_stream_f32)
    int seg = nt && ndst == n && n >= 4 && dt == VS_F32 && (op == VS_OP_SUM || op == VS_OP_AVG);
    for (int k = 0; k < ndst && seg; k++) seg = (((uintptr_t)dsts[k] + dst_off * esz) & 15) == 0;
    if (seg) {
        _vs_reduce_stream_f32(srcs, n, op == VS_OP_AVG, off, len, dsts, dst_off);
        return;
    }
#endif
    for (size_t b = 0; b < len; b += blk) {
        size_t m = len - b < blk ? len - b : blk, next = b + m;
        _vs_reduce_block(dt, op, n, srcs, n, off + b, m, tmp);
        // destination k prefetches sources k, k + ndst, ... of the next block
        _vs_pf pf = {srcs, 0, ndst, n, (off + next) * esz, (len - next < blk ? len - next : blk) * esz};
        for (int k = 0; k < ndst; k++) {
            pf.first = k;
            _vs_copy_nt_pf((char*)dsts[k] + (dst_off + b) * esz, tmp, m * esz, nt, &pf);
        }
    }
}

_VS_PRIVATE vs_result _vs_t_collective(vs_comm* c, const _vs_opdesc* op)
{
    _vs_tshared* s = c->sh;
    int n = s->n, me = c->rank;
    s->ops[me] = op;
    s->srcs[me] = op->send, s->dsts[me] = op->recv;
    vs_result r = _vs_t_barrier(c, c->timeout, op);
    if (r) return r;
    r = _vs_t_match(c);
    size_t esz = vs_dtype_size(op->dt);
    if (r == VS_OK) {
        switch (op->kind) {
        case _VS_K_ALLREDUCE:
        case _VS_K_REDUCE: {
            // rank `me` reduces chunk `me` and writes it to every destination
            size_t per = _vs_chunk(op->count, n, esz);
            size_t lo = per * (size_t)me;
            if (lo >= op->count) break;
            size_t len = op->count - lo < per ? op->count - lo : per;
            int nt = _VS_USE_NT(op->count * esz);
            if (op->kind == _VS_K_REDUCE)
                _vs_t_reduce_range(c, op->dt, op->op, lo, len, &s->dsts[op->root], 1, lo, nt);
            else
                _vs_t_reduce_range(c, op->dt, op->op, lo, len, s->dsts, n, lo, nt);
            break;
        }
        case _VS_K_BCAST:
            _vs_copy_nt(op->recv, s->ops[op->root]->send, op->count * esz, _VS_USE_NT(op->count * esz));
            break;
        case _VS_K_ALLGATHER: {
            size_t total = op->displs[n - 1] + op->counts[n - 1];
            _vs_copy_fan(s->dsts, n, op->displs[me] * esz, op->send, op->counts[me] * esz, _VS_USE_NT(total * esz));
            break;
        }
        case _VS_K_REDSCAT: {
            void* dst = op->recv;
            size_t total = op->displs[n - 1] + op->counts[n - 1];
            _vs_t_reduce_range(c, op->dt, op->op, op->displs[me], op->counts[me], &dst, 1, 0,
                               _VS_USE_NT(total * esz));
            break;
        }
        case _VS_K_ALLTOALL:
            for (int j = 0; j < n; j++)
                _vs_copy_nt((char*)s->dsts[j] + s->ops[j]->rdispls[me] * esz,
                            (const char*)op->send + op->displs[j] * esz, op->counts[j] * esz,
                            _VS_USE_NT(op->counts[j] * esz));
            break;
        default: break;
        }
        _vs_streamed_stores_fence();
    }
    // exit: peers may still read or write this rank's buffers until all are here
    vs_result r2 = _vs_t_barrier(c, 0, op);
    return r ? r : r2;
}

/* Point-to-point on threads: the rank that arrives second copies; both complete. */
_VS_PRIVATE void _vs_t_p2p_post(vs_comm* c, _vs_tp2p* p)
{
    _vs_tshared* s = c->sh;
    _vs_tp2p** other = p->is_send ? &s->recvq[p->dst] : &s->sendq[p->dst];
    _vs_tp2p** mine = p->is_send ? &s->sendq[p->dst] : &s->recvq[p->dst];
    pthread_mutex_lock(&s->mu);
    while (*other && (*other)->src != p->src) other = &(*other)->next; // the pair's first
    _vs_tp2p* m = *other;
    if (!m) {
        p->next = NULL;
        while (*mine) mine = &(*mine)->next;
        *mine = p;
        pthread_mutex_unlock(&s->mu);
        return;
    }
    *other = m->next;
    __atomic_store_n(&m->state, _VS_P2P_MATCHED, __ATOMIC_RELEASE);
    __atomic_store_n(&p->state, _VS_P2P_MATCHED, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&s->mu);
    _vs_tp2p* snd = p->is_send ? p : m;
    _vs_tp2p* rcv = p->is_send ? m : p;
    vs_result r = VS_OK;
    if (snd->bytes != rcv->bytes)
        r = _vs_err(VS_ERR_MISMATCH, "send/recv: rank %d sends %zu bytes, rank %d receives %zu",
                    snd->src, snd->bytes, rcv->dst, rcv->bytes);
    else
        _vs_copy(rcv->rbuf, snd->sbuf, snd->bytes);
    pthread_mutex_lock(&s->mu);
    snd->res = rcv->res = r;
    __atomic_store_n(&m->state, _VS_P2P_DONE, __ATOMIC_RELEASE);
    __atomic_store_n(&p->state, _VS_P2P_DONE, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&s->p2p_cv);
    pthread_mutex_unlock(&s->mu);
}

_VS_PRIVATE vs_result _vs_t_p2p_wait(vs_comm* c, _vs_tp2p* p, double deadline)
{
    _vs_tshared* s = c->sh;
    // posted -> matched -> done: spin through each state once, then sleep
    if (_vs_spin_while_eq(&p->state, _VS_P2P_POSTED, s->long_spin))
        _vs_spin_while_eq(&p->state, _VS_P2P_MATCHED, s->long_spin);
    int peer = p->is_send ? p->dst : p->src;
    if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == _VS_P2P_DONE) goto done;
    pthread_mutex_lock(&s->mu);
    while (p->state != _VS_P2P_DONE) {
        int timed_out = _vs_now() >= deadline;
        if (p->state == _VS_P2P_POSTED && !s->aborted && s->job &&
            __atomic_load_n(&s->job->exited[s->granks[peer]], __ATOMIC_ACQUIRE)) {
            _vs_tp2p** l = p->is_send ? &s->sendq[p->dst] : &s->recvq[p->dst];
            while (*l && *l != p) l = &(*l)->next;
            if (*l) *l = p->next;
            pthread_mutex_unlock(&s->mu);
            char msg[400];
            _vs_fmt(msg, sizeof msg, "%s on %s: rank %d (world %d) returned from its function before the matching %s",
                     p->is_send ? "send" : "recv", c->label, peer, s->granks[peer], p->is_send ? "recv" : "send");
            _vs_job_fail(s->job, s, VS_ERR_ABORTED, s->granks[peer], msg);
            return _vs_err_from(s->granks[peer], msg, VS_ERR_ABORTED, "%s", msg);
        }
        if (p->state == _VS_P2P_POSTED && (timed_out || s->aborted)) {
            _vs_tp2p** l = p->is_send ? &s->sendq[p->dst] : &s->recvq[p->dst];
            while (*l && *l != p) l = &(*l)->next;
            if (*l) *l = p->next;
            int aborted = s->aborted;
            pthread_mutex_unlock(&s->mu);
            if (aborted) return _vs_tshared_abort_result(s, p->is_send ? "send" : "recv");
            char msg[400];
            _vs_fmt(msg, sizeof msg, "%s on %s: rank %d (world %d) got no matching %s from rank %d (world %d) within %g s",
                     p->is_send ? "send" : "recv", c->label, c->rank, s->granks[c->rank], p->is_send ? "recv" : "send",
                     peer, s->granks[peer], c->timeout);
            _vs_job_fail(s->job, s, VS_ERR_TIMEOUT, s->granks[c->rank], msg);
            return _vs_err(VS_ERR_TIMEOUT, "%s", msg);
        }
        struct timespec dl = _vs_abs_deadline(timed_out ? 0.01 : deadline - _vs_now());
        pthread_cond_timedwait(&s->p2p_cv, &s->mu, &dl);
    }
    pthread_mutex_unlock(&s->mu);
done:
    if (p->res) {
        // the message was written on the thread that copied; repeat it here
        if (p->res == VS_ERR_MISMATCH)
            return _vs_err(VS_ERR_MISMATCH, "%s: size mismatch between rank %d and rank %d",
                           p->is_send ? "send" : "recv", p->src, p->dst);
        return p->res;
    }
    return VS_OK;
}

_VS_PRIVATE vs_result _vs_t_split(vs_comm* c, const _vs_opdesc* op);

/* A shared-memory step: between the entry and exit barriers every rank runs
   op->shm with every rank's op (their buffers, their ctx; c->sh->srcs holds
   their send buffers). The transport knows nothing of what the step does. */
_VS_PRIVATE vs_result _vs_t_shm(vs_comm* c, const _vs_opdesc* op)
{
    _vs_tshared* s = c->sh;
    s->ops[c->rank] = op;
    s->srcs[c->rank] = op->send, s->dsts[c->rank] = op->recv;
    vs_result r = _vs_t_barrier(c, c->timeout, op);
    if (r) return r;
    r = _vs_t_match(c);
    if (!r) {
        op->shm(c, s->ops);
        _vs_streamed_stores_fence();
    }
    vs_result r2 = _vs_t_barrier(c, 0, op); // peers may still read this rank's buffers
    return r ? r : r2;
}

/* Runs a batch on threads: post every p2p op, run the collectives in order, then
   wait for the p2p ops. */
_VS_PRIVATE vs_result _vs_t_exec(vs_comm* c, _vs_opdesc* ops, int nops)
{
    vs_result r = VS_OK;
    int np = 0;
    for (int i = 0; i < nops; i++) np += ops[i].kind == _VS_K_SEND || ops[i].kind == _VS_K_RECV;
    const _vs_hooks* h = _VS_WH(c->world);
    _vs_tp2p* ps = np ? _VS_HNEW(h, _vs_tp2p, np) : NULL;
    if (np && !ps) return _vs_err(VS_ERR_NOMEM, "group of %d point-to-point ops: out of memory", np);
    if (np && __atomic_load_n(&c->sh->aborted, __ATOMIC_ACQUIRE)) {
        _vs_hfree(h, ps);
        return _vs_tshared_abort_result(c->sh, "send/recv");
    }
    double deadline = _vs_now() + c->timeout;
    int k = 0;
    for (int i = 0; i < nops; i++) {
        const _vs_opdesc* o = &ops[i];
        if (o->kind != _VS_K_SEND && o->kind != _VS_K_RECV) continue;
        _vs_tp2p* p = &ps[k++];
        p->is_send = o->kind == _VS_K_SEND;
        p->src = p->is_send ? c->rank : o->root;
        p->dst = p->is_send ? o->root : c->rank;
        p->sbuf = o->send;
        p->rbuf = o->recv;
        p->bytes = o->count * vs_dtype_size(o->dt);
        _vs_t_p2p_post(c, p);
    }
    for (int i = 0; i < nops; i++) {
        vs_result ri = VS_OK;
        if (ops[i].kind == _VS_K_SPLIT)
            ri = _vs_t_split(c, &ops[i]);
        else if (ops[i].kind == _VS_K_SHM)
            ri = _vs_t_shm(c, &ops[i]);
        else if (ops[i].kind != _VS_K_SEND && ops[i].kind != _VS_K_RECV)
            ri = _vs_t_collective(c, &ops[i]);
        if (ri && !r) r = ri;
    }
    char keep[512] = "";
    if (r) _vs_save_error(keep, sizeof keep);
    vs_result rp = VS_OK;
    for (int i = 0; i < np; i++) {
        vs_result ri = _vs_t_p2p_wait(c, &ps[i], deadline);
        if (ri && !rp) {
            rp = ri;
            if (!r) _vs_save_error(keep, sizeof keep);
        }
    }
    _vs_hfree(h, ps);
    if (!r) r = rp;
    if (r) _vs_err(r, "%s", keep);
    return r;
}

/* A split's member as member 0 sorts them: by color, then (key, rank). */
typedef struct _vs_tsplit_ent {
    int color, key, rank;
} _vs_tsplit_ent;

_VS_PRIVATE int _vs_tsplit_cmp(const void* x, const void* y)
{
    const _vs_tsplit_ent *a = (const _vs_tsplit_ent*)x, *b = (const _vs_tsplit_ent*)y;
    if (a->color != b->color) return a->color < b->color ? -1 : 1;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return a->rank < b->rank ? -1 : a->rank > b->rank;
}

/* Member 0 makes every color's state and tells each member its state and place
   (split_out, split_at): O(n log n) once, where each member sorting its own
   color was O(n) of time and an n-entry table on every member at once. */
_VS_PRIVATE void _vs_t_split_plan(_vs_tshared* s, const _vs_hooks* h)
{
    int n = s->n;
    for (int i = 0; i < n; i++) s->split_out[i] = NULL, s->split_at[i] = -1;
    _vs_tsplit_ent* e = _VS_HNEW(h, _vs_tsplit_ent, n);
    int* g = _VS_HNEW(h, int, n);
    if (!e || !g) { // (every member then reads NULL: out of memory)
        _vs_hfree(h, e);
        _vs_hfree(h, g);
        return;
    }
    int m = 0;
    for (int i = 0; i < n; i++)
        if (s->ops[i]->color != VS_COLOR_NONE) e[m].color = s->ops[i]->color, e[m].key = s->ops[i]->key, e[m++].rank = i;
    qsort(e, (size_t)m, sizeof *e, _vs_tsplit_cmp);
    for (int a = 0, b; a < m; a = b) {
        for (b = a; b < m && e[b].color == e[a].color; b++) g[b - a] = s->granks[e[b].rank];
        _vs_tshared* ns = _vs_tshared_new(b - a, g, s->job, s->h);
        for (int i = a; ns && i < b; i++) s->split_out[e[i].rank] = ns, s->split_at[e[i].rank] = i - a;
    }
    _vs_hfree(h, e);
    _vs_hfree(h, g);
}

_VS_PRIVATE vs_result _vs_t_split(vs_comm* c, const _vs_opdesc* op)
{
    _vs_tshared* s = c->sh;
    int me = c->rank;
    s->ops[me] = op;
    vs_result r = _vs_t_barrier(c, c->timeout, op);
    if (r) return r;
    if ((r = _vs_t_match(c)) != VS_OK) {
        // the others may run a collective: two barriers in all, as they do
        vs_result r2 = _vs_t_barrier(c, 0, op);
        return r ? r : r2;
    }
    if (me == 0) _vs_t_split_plan(s, _VS_WH(c->world));
    r = _vs_t_barrier(c, 0, op);
    vs_comm* nc = NULL;
    _vs_tshared* ns = s->split_out[me];
    int at = s->split_at[me];
    if (op->color != VS_COLOR_NONE) { // (after a failed barrier too: each member holds a reference)
        int m = ns ? ns->n : 0;
        if (!ns) {
            if (!r) r = _vs_err(VS_ERR_NOMEM, "split: out of memory for the communicator of color %d", op->color);
        } else if (!(nc = _vs_comm_new(c->world, VS_TRANSPORT_THREADS, at, m))) {
            _vs_tshared_unref(ns);
            if (!r) r = _vs_err(VS_ERR_NOMEM, "split: out of memory");
        } else {
            nc->sh = ns;
            nc->timeout = c->timeout;
            _vs_comm_label_members(nc, "communicator", ns->granks, m, c->label);
        }
    }
    vs_result r2 = _vs_t_barrier(c, 0, op);
    *op->split_out = nc;
    return r ? r : r2;
}

// (vs_launch)

/* The world's constructor (>>bootstrap, below). */
_VS_PRIVATE vs_world* _vs_world_new(vs_transport tr, int rank, int size, int local_rank, double timeout,
                                    const vs_logger* lg, vs_log_level lv, const vs_allocator* al);
_VS_PRIVATE void _vs_world_keep_desc(vs_world* w, const vs_world_desc* d);


typedef struct _vs_trank {
    _vs_tjob* job;
    int rank;
} _vs_trank;

/* A replacement rank's thread (vs_world_respawn), joined by vs_launch. */
typedef struct _vs_textra {
    pthread_t th;
    _vs_trank tr;
    struct _vs_textra* next;
} _vs_textra;


#ifdef VESCALE_NCCL
_VS_PRIVATE vs_result _vs_nccl_world_comm(vs_world* w, const void* id, int device_select, int cuda_device);
#endif

_VS_PRIVATE void* _vs_rank_main(void* arg)
{
    _vs_trank* tr = (_vs_trank*)arg;
    _vs_tjob* job = tr->job;
    vs_world* w = job->worlds[tr->rank];
    vs_result r = VS_OK;
    _vs_err_world(w);
#ifdef VESCALE_NCCL
    if (job->desc.transport == VS_TRANSPORT_NCCL && !w->joining)
        r = _vs_nccl_world_comm(w, &job->id, VS_DEVICE_BY_LOCAL_RANK, 0);
#endif
    if (r == VS_OK) r = job->fn(w, job->arg);
    job->results[tr->rank] = r;
    pthread_mutex_lock(&job->mu);
    int live = job->live[tr->rank]; // (a rank that left at a shrink fails no one)
    pthread_mutex_unlock(&job->mu);
    if (r && live) {
        // fail first: the world's queue then drains at once instead of waiting on peers.
        // An error that reports another rank's failure is not a cause of its own.
        char cause[_VS_CAUSE_MSG];
        const _vs_errstate* es = _vs_err_tls();
        int origin = es->origin ? es->origin - 1 : tr->rank;
        _vs_fmt(cause, sizeof cause, "world rank %d failed (%s)%s%s", tr->rank, vs_result_string(r),
                 es->msg[0] ? ": " : "", es->msg);
        _vs_job_fail(job, NULL, r, origin, cause);
        if (!es->origin) _vs_job_final(job, tr->rank, r, cause);
    }
    vs_world_free(w);
    _vs_err_world(NULL);
    job->worlds[tr->rank] = NULL;
    if (job->exited) _vs_job_exit(job, tr->rank);
    return NULL;
}

#define _VS_LAUNCH_MAX_RANKS 4096
#define _VS_LAUNCH_MIN_STACK 16384 // (PTHREAD_STACK_MIN is not a constant everywhere)

/* A vs_launch_desc with every zero-is-default resolved and checked (the one place
   its defaults live): transport (threads), timeout_s, log_level, ranks_per_node
   (0: all on one node, i.e. nranks). */
_VS_PRIVATE vs_result _vs_launch_desc_defaults(const vs_launch_desc* d, vs_launch_desc* out)
{
    int n = d->nranks;
    // each rank is a thread with an n-entry table per communicator: far more would
    // only run the process out of threads and memory after a long time
    if (n < 1 || n > _VS_LAUNCH_MAX_RANKS)
        return _vs_err(VS_ERR_INVALID, "vs_launch: nranks %d out of range [1, %d]", n, _VS_LAUNCH_MAX_RANKS);
    *out = *d;
    if (out->transport == VS_TRANSPORT_DEFAULT) out->transport = VS_TRANSPORT_THREADS;
    vs_transport tr = out->transport;
    if (tr != VS_TRANSPORT_THREADS && tr != VS_TRANSPORT_NCCL)
        return _vs_err(VS_ERR_INVALID, "vs_launch: transport '%s' cannot run ranks as threads",
                       vs_transport_name(tr));
    if (!vs_transport_available(tr))
        return _vs_err(VS_ERR_UNAVAILABLE, "vs_launch: transport '%s' not compiled in (build with -DVESCALE_NCCL)",
                       vs_transport_name(tr));
    if (d->ranks_per_node < 0)
        return _vs_err(VS_ERR_INVALID, "vs_launch: ranks_per_node %d must be >= 0", d->ranks_per_node);
    if (out->ranks_per_node == 0) out->ranks_per_node = n;
    if (d->stack_bytes && d->stack_bytes < _VS_LAUNCH_MIN_STACK)
        return _vs_err(VS_ERR_INVALID, "vs_launch: stack_bytes %zu below %d", d->stack_bytes, _VS_LAUNCH_MIN_STACK);
#ifdef VESCALE_NCCL
    if (tr == VS_TRANSPORT_NCCL) { // each rank on its own GPU (local_rank % devices): NCCL refuses two on one
        int ndev = 0, local = out->ranks_per_node < n ? out->ranks_per_node : n;
        if (cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0 && local > ndev)
            return _vs_err(VS_ERR_INVALID, "vs_launch: %d NCCL ranks on this node but %d CUDA device%s: each rank "
                           "needs its own GPU (NCCL refuses two ranks on one device); launch at most %d", local, ndev,
                           ndev == 1 ? "" : "s", ndev);
    }
#endif
    _VS_TRY(_vs_resolve_timeout("vs_launch", d->timeout_s, &out->timeout_s));
    _VS_TRY(_vs_resolve_level(d->log_level, &out->log_level));
    unsigned modes; // a malformed value is the launch's error (naming it), not modes silently off
    if (d->debug && vs_debug_modes(d->debug, &modes))
        return _vs_err(VS_ERR_INVALID, "vs_launch: desc.debug: %s", vs_last_error());
    if (!d->debug) _VS_TRY(vs_debug_modes(NULL, &modes)); // (its message names the variable)
    return VS_OK;
}

/* World rank i of a vs_launch job, without its communicator. */
_VS_PRIVATE vs_world* _vs_launch_world(_vs_tjob* job, int i)
{
    const vs_launch_desc* d = &job->desc;
    int local = d->ranks_per_node ? i % d->ranks_per_node : i;
    vs_world* w = _vs_world_new(d->transport, i, d->nranks, local, d->timeout_s, &d->logger, d->log_level,
                                &d->allocator);
    if (w) { // what vs_world_query_desc reports for a rank of vs_launch
        vs_world_desc wd;
        memset(&wd, 0, sizeof wd);
        wd.logger = d->logger;
        wd.allocator = d->allocator;
        wd.debug = d->debug ? d->debug : getenv("VESCALE_DEBUG");
        _vs_world_keep_desc(w, &wd);
    }
    return w;
}

VS_API vs_result vs_launch_ex(const vs_launch_desc* desc, vs_rank_fn fn, void* arg)
{
    _VS_CHECK_NULL(desc, "desc");
    _VS_CHECK_NULL(fn, "fn");
    vs_launch_desc rd;
    memset(&rd, 0, sizeof rd);
    _VS_TRY(_vs_launch_desc_defaults(desc, &rd));
    const vs_launch_desc* d = &rd;
    int n = rd.nranks;
    vs_transport tr = rd.transport;
    vs_log_level level = rd.log_level;
    _vs_tjob job;
    memset(&job, 0, sizeof job);
    _vs_hooks_init(&job.hooks, &d->logger, level, &d->allocator);
    const _vs_hooks* h = &job.hooks;
    job.desc = *d;
    job.desc.transport = tr;
    job.fn = fn;
    job.arg = arg;
    job.worlds = _VS_HNEW(h, vs_world*, n);
    job.results = _VS_HNEW(h, vs_result, n);
    job.exited = _VS_HNEW(h, int, n);
    job.live = _VS_HNEW(h, int, n);
    job.recovered = _VS_HNEW(h, int, n);
    job.tk = _VS_HNEW(h, _vs_rticket*, n);
    pthread_mutex_init(&job.mu, NULL);
    _vs_cond_init(&job.rcv);
    for (int i = 0; job.live && i < n; i++) job.live[i] = 1;
    _vs_trank* ranks = _VS_HNEW(h, _vs_trank, n);
    pthread_t* th = _VS_HNEW(h, pthread_t, n);
    vs_result r = VS_OK;
    int started = 0;
    if (!job.worlds || !job.results || !job.exited || !job.live || !job.recovered || !job.tk || !ranks || !th) {
        r = _vs_err(VS_ERR_NOMEM, "vs_launch: out of memory for %d ranks", n);
        goto done;
    }
#ifdef VESCALE_NCCL
    if (tr == VS_TRANSPORT_NCCL) {
        ncclResult_t nr = ncclGetUniqueId(&job.id);
        if (nr != ncclSuccess) {
            r = _vs_err_backend(VS_ERR_BACKEND, (int)nr, "vs_launch: ncclGetUniqueId: %s", ncclGetErrorString(nr));
            goto done;
        }
    }
#endif
    if (tr == VS_TRANSPORT_THREADS && !(job.sh = _vs_tshared_new(n, NULL, &job, &job.hooks))) {
        r = _vs_err(VS_ERR_NOMEM, "vs_launch: out of memory for %d ranks", n);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        vs_world* w = _vs_launch_world(&job, i);
        if (w && tr == VS_TRANSPORT_THREADS) {
            w->comm = _vs_comm_new(w, tr, i, n);
            if (w->comm) {
                w->comm->sh = job.sh;
                w->comm->kind = _VS_COMM_WORLD;
                snprintf(w->comm->label, sizeof w->comm->label, "world");
            }
        }
        if (!w || (tr == VS_TRANSPORT_THREADS && !w->comm)) {
            if (w) _vs_hfree(h, w);
            for (int k = 0; k < i; k++) vs_world_free(job.worlds[k]);
            // ranks never created still hold references to the shared state
            for (int k = i; k < n; k++) _vs_tshared_unref(job.sh);
            job.sh = NULL;
            r = _vs_err(VS_ERR_NOMEM, "vs_launch: out of memory creating rank %d", i);
            goto done;
        }
        w->job = &job;
        job.worlds[i] = w;
    }
    pthread_attr_t at;
    pthread_attr_init(&at);
    if (d->stack_bytes) pthread_attr_setstacksize(&at, d->stack_bytes);
    for (int i = 0; i < n; i++) {
        ranks[i].job = &job;
        ranks[i].rank = i;
        if (pthread_create(&th[i], &at, _vs_rank_main, &ranks[i]) != 0) {
            r = _vs_err_backend(VS_ERR_BACKEND, errno, "vs_launch: cannot start thread for rank %d", i);
            _vs_job_fail(&job, NULL, r, i, "vs_launch could not start every rank's thread");
            for (int k = i; k < n; k++) vs_world_free(job.worlds[k]);
            break;
        }
        started++;
    }
    pthread_attr_destroy(&at);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    for (;;) { // the replacements (vs_world_respawn), and theirs
        pthread_mutex_lock(&job.mu);
        _vs_textra* x = job.extra;
        if (x) job.extra = x->next;
        pthread_mutex_unlock(&job.mu);
        if (!x) break;
        pthread_join(x->th, NULL);
        _vs_hfree(h, x);
    }
    // the cause: the first rank that failed, aborted, timed out or left peers waiting
    if (r == VS_OK && __atomic_load_n(&job.failed, __ATOMIC_ACQUIRE)) {
        r = job.cause_res ? job.cause_res : VS_ERR_ABORTED;
        _vs_err(r, "vs_launch: %s", job.cause);
    }
    if (r == VS_OK)
        for (int i = 0; i < n; i++)
            if (job.results[i] && !job.recovered[i]) { // (a failure the survivors recovered from is not the job's)
                r = job.results[i];
                _vs_err(r, "vs_launch: rank %d returned %d (%s)", i, r, vs_result_string(r));
                break;
            }
done:
    pthread_mutex_destroy(&job.mu);
    pthread_cond_destroy(&job.rcv);
    _vs_hfree(h, job.live);
    _vs_hfree(h, job.recovered);
    _vs_hfree(h, job.tk);
    _vs_hfree(h, job.worlds);
    _vs_hfree(h, job.results);
    _vs_hfree(h, job.exited);
    _vs_hfree(h, ranks);
    _vs_hfree(h, th);
    return r;
}

VS_API vs_result vs_launch(int nranks, vs_rank_fn fn, void* arg)
{
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = nranks;
    return vs_launch_ex(&d, fn, arg);
}

// >>mpi -----------------------------------------------------------------------
#ifdef VESCALE_MPI

/* Open MPI's vectorised 8-bit sum saturates; NCCL and the threads transport wrap. */
static void _vs_mpi_u8_sum(void* in, void* inout, int* len, MPI_Datatype* dt)
{
    (void)dt;
    const uint8_t* a = (const uint8_t*)in;
    uint8_t* b = (uint8_t*)inout;
    for (int i = 0; i < *len; i++) b[i] = (uint8_t)(a[i] + b[i]);
}

_VS_PRIVATE MPI_Datatype _vs_mpi_type(vs_dtype dt)
{
    switch (dt) {
    case VS_F32: return MPI_FLOAT;
    case VS_F64: return MPI_DOUBLE;
    case VS_I32: return MPI_INT32_T;
    case VS_I64: return MPI_INT64_T;
    case VS_U8: return MPI_UINT8_T;
    default: return MPI_UINT16_T; // f16, bf16: moved as bits, reduced as f32
    }
}

_VS_PRIVATE MPI_Op _vs_mpi_op(vs_comm* c, vs_dtype dt, vs_op op)
{
    if (op == VS_OP_MAX) return MPI_MAX;
    if (op == VS_OP_MIN) return MPI_MIN;
    return dt == VS_U8 ? c->world->u8_sum : MPI_SUM; // avg: sum, divided after
}

_VS_PRIVATE vs_result _vs_mpi_fail(int code, const char* what)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(code, s, &len);
    return _vs_err_backend(VS_ERR_BACKEND, code, "%s: MPI error %d: %s", what, code, s);
}

/* Per-op scratch the requests need until they complete. */
typedef struct _vs_mpi_tmp {
    int* ints;   // count/displ arrays as int
    void* buf;   // temporary receive buffer (in-place reduce-scatter, half types)
    float* fsend; // half types: the input widened to f32
    int half;     // reduce f16/bf16 in f32 and round once, as the threads transport
} _vs_mpi_tmp;

_VS_PRIVATE int _vs_mpi_ints(const size_t* a, int n, int* out)
{
    for (int i = 0; i < n; i++) {
        if (a[i] > (size_t)INT_MAX) return 0;
        out[i] = (int)a[i];
    }
    return 1;
}

/* Starts one op's MPI request(s); returns how many it started in *nreq. */
_VS_PRIVATE vs_result _vs_mpi_start(vs_comm* c, _vs_opdesc* o, _vs_mpi_tmp* t, MPI_Request* req,
                                    int* nreq)
{
    const _vs_hooks* h = _VS_WH(c->world);
    const char* what = _vs_kind_names[o->kind];
    int n = c->size, me = c->rank;
    size_t esz = vs_dtype_size(o->dt);
    MPI_Datatype ty = _vs_mpi_type(o->dt);
    MPI_Op mop = _vs_mpi_op(c, o->dt, o->op);
    if (o->count > (size_t)INT_MAX)
        return _vs_err(VS_ERR_UNSUPPORTED, "%s: count %zu exceeds MPI's int range", what, o->count);
    int cnt = (int)o->count, e = MPI_SUCCESS;
    *nreq = 1;
    if (o->kind == _VS_K_ALLGATHER || o->kind == _VS_K_REDSCAT || o->kind == _VS_K_ALLTOALL) {
        t->ints = _VS_HNEW(h, int, 4 * (size_t)n);
        if (!t->ints) return _vs_err(VS_ERR_NOMEM, "%s: out of memory", what);
        int ok = _vs_mpi_ints(o->counts, n, t->ints) && _vs_mpi_ints(o->displs, n, t->ints + n);
        if (o->kind == _VS_K_ALLTOALL)
            ok = ok && _vs_mpi_ints(o->rcounts, n, t->ints + 2 * n) &&
                 _vs_mpi_ints(o->rdispls, n, t->ints + 3 * n);
        if (!ok) return _vs_err(VS_ERR_UNSUPPORTED, "%s: a count or offset exceeds MPI's int range", what);
    }
    t->half = (o->dt == VS_F16 || o->dt == VS_BF16) &&
              (o->kind == _VS_K_ALLREDUCE || o->kind == _VS_K_REDUCE || o->kind == _VS_K_REDSCAT);
    if (t->half) {
        size_t ns = o->kind == _VS_K_REDSCAT ? o->displs[n - 1] + o->counts[n - 1] : o->count;
        size_t nr = o->kind == _VS_K_REDSCAT ? o->counts[me] : o->count;
        t->fsend = (float*)_vs_halloc(h, ns * sizeof(float) + 1);
        t->buf = _vs_halloc(h, nr * sizeof(float) + 1);
        if (!t->fsend || !t->buf) return _vs_err(VS_ERR_NOMEM, "%s: out of memory", what);
        _vs_widen_half(o->dt, t->fsend, (const uint16_t*)o->send, ns);
        ty = MPI_FLOAT;
    }
    switch (o->kind) {
    case _VS_K_ALLREDUCE:
        if (t->half)
            e = MPI_Iallreduce(t->fsend, t->buf, cnt, ty, mop, c->mc, req);
        else
            e = MPI_Iallreduce(o->send == o->recv ? MPI_IN_PLACE : o->send, o->recv, cnt, ty, mop, c->mc, req);
        break;
    case _VS_K_REDUCE: {
        const void* sb = (me == o->root && o->send == o->recv) ? MPI_IN_PLACE : o->send;
        if (t->half)
            e = MPI_Ireduce(t->fsend, t->buf, cnt, ty, mop, o->root, c->mc, req);
        else
            e = MPI_Ireduce(sb, o->recv, cnt, ty, mop, o->root, c->mc, req);
        break;
    }
    case _VS_K_BCAST:
        if (me == o->root) _vs_copy(o->recv, o->send, o->count * esz);
        e = MPI_Ibcast(o->recv, cnt, ty, o->root, c->mc, req);
        break;
    case _VS_K_ALLGATHER: {
        const void* sb = o->send == (const char*)o->recv + o->displs[me] * esz ? MPI_IN_PLACE : o->send;
        e = MPI_Iallgatherv(sb, t->ints[me], ty, o->recv, t->ints, t->ints + n, ty, c->mc, req);
        break;
    }
    case _VS_K_REDSCAT: {
        // NCCL's in-place form (recv inside send) is not MPI's: receive into scratch
        size_t bytes = o->counts[me] * esz;
        void* rb = o->recv;
        const char* lo = (const char*)o->send;
        const char* hi = lo + (o->displs[n - 1] + o->counts[n - 1]) * esz;
        if (t->half) {
            e = MPI_Ireduce_scatter(t->fsend, t->buf, t->ints, ty, mop, c->mc, req);
            break;
        }
        if (bytes && (const char*)o->recv < hi && (const char*)o->recv + bytes > lo) {
            if (!(t->buf = _vs_halloc(h, bytes))) return _vs_err(VS_ERR_NOMEM, "%s: out of memory", what);
            rb = t->buf;
        }
        e = MPI_Ireduce_scatter(o->send, rb, t->ints, ty, mop, c->mc, req);
        break;
    }
    case _VS_K_ALLTOALL:
        e = MPI_Ialltoallv(o->send, t->ints, t->ints + n, ty, o->recv, t->ints + 2 * n, t->ints + 3 * n,
                           ty, c->mc, req);
        break;
    case _VS_K_BARRIER: e = MPI_Ibarrier(c->mc, req); break;
    // synchronous send: completes only when the recv is matched, as with NCCL
    case _VS_K_SEND: e = MPI_Issend(o->send, cnt, ty, o->root, 0, c->mc, req); break;
    case _VS_K_RECV: e = MPI_Irecv(o->recv, cnt, ty, o->root, 0, c->mc, req); break;
    default: *nreq = 0; break;
    }
    if (e != MPI_SUCCESS) return _vs_mpi_fail(e, what);
    return VS_OK;
}

_VS_PRIVATE void _vs_mpi_finish(vs_comm* c, _vs_opdesc* o, _vs_mpi_tmp* t)
{
    int me = c->rank;
    size_t esz = vs_dtype_size(o->dt);
    if (t->half) { // narrow the f32 result once, averaging first
        if (o->kind == _VS_K_REDUCE && me != o->root) return;
        size_t nr = o->kind == _VS_K_REDSCAT ? o->counts[me] : o->count;
        float* f = (float*)t->buf;
        if (o->op == VS_OP_AVG)
            for (size_t i = 0; i < nr; i++) f[i] /= (float)c->size;
        _vs_narrow_half(o->dt, (uint16_t*)o->recv, f, nr);
        return;
    }
    if (o->kind == _VS_K_REDSCAT && t->buf) memcpy(o->recv, t->buf, o->counts[me] * esz);
    if (o->op != VS_OP_AVG) return;
    if (o->kind == _VS_K_ALLREDUCE) _vs_divide(o->dt, o->recv, o->count, c->size);
    if (o->kind == _VS_K_REDUCE && me == o->root) _vs_divide(o->dt, o->recv, o->count, c->size);
    if (o->kind == _VS_K_REDSCAT) _vs_divide(o->dt, o->recv, o->counts[me], c->size);
}

/* Faults on MPI. Every communicator the library makes returns MPI errors
   (MPI_ERRORS_RETURN): they become VS_ERR_BACKEND. Waits poll MPI_Testall until
   the deadline, and with it the world's abort channel (a duplicate of the world
   communicator with a receive posted for a peer's notice). A timeout, an MPI
   error or vs_comm_abort aborts the world on this rank and sends a notice to every
   other rank: whatever they wait for, on any communicator of the world, returns
   VS_ERR_ABORTED naming the rank and its cause. MPI collectives cannot be
   cancelled: the requests a fault leaves in flight (and the memory they may still
   write) go to the world's leak list, and vs_world_free finalizes MPI only once
   they have completed. */

#define _VS_MPI_TAG_FP 0x7673    /* desync fingerprints: p2p on the comm itself (vs_send uses tag 0) */
#define _VS_MPI_TAG_ABORT 0x7674 /* abort notices, on the world's abort channel */
#define _VS_MPI_TAG_PROBE 0x7675 /* a timeout's question "where are you?", on the abort channel */
#define _VS_MPI_TAG_ANSWER 0x7676 /* its answer: world rank, the op it waits in */
#define _VS_MPI_MAGIC ((int64_t)0x7673616274LL)
#define _VS_FP_N 10 /* fingerprint: seq, kind, count, dtype, op, root, nops, hash | world rank, rank */
#define _VS_FP_CMP 8
#define _VS_AB_MISS 7 /* missing world ranks a timeout's notice names */

/* The abort notice: the origin (the world rank whose failure it is), why, and
   its own words, so every rank of the world names the origin and its message.
   Only the origin sends one: a rank that learnt of the abort from a notice never
   sends its own (else a survivor could name that rank instead). Ranks run one
   program, so it travels as bytes. */
typedef struct _vs_mpi_notice {
    int64_t magic, origin, why;
    char text[_VS_CAUSE_MSG];
} _vs_mpi_notice;

typedef struct _vs_mpi_leak {
    MPI_Request* req;
    int nreq;
    MPI_Comm mc; // the communicator they are on; `own`: freed here, once they complete (its vs_comm is gone)
    int own;
    int p2p; // every one is point-to-point: it can be cancelled
    _vs_mpi_tmp* tmp;
    int ntmp;
    void* extra;
    struct _vs_mpi_leak* next;
} _vs_mpi_leak;

_VS_PRIVATE void _vs_mpi_tmp_free(const _vs_hooks* h, _vs_mpi_tmp* t, int n)
{
    if (!t) return;
    for (int i = 0; i < n; i++) {
        _vs_hfree(h, t[i].ints);
        _vs_hfree(h, t[i].buf);
        _vs_hfree(h, t[i].fsend);
    }
    _vs_hfree(h, t);
}

/* Hands requests a fault left in flight on communicator mc (p2p: all of them
   point-to-point), and the memory they may still write, to the world (takes
   ownership of every pointer). Under w->mmu (which w has made). */
_VS_PRIVATE void _vs_mpi_leak_push_locked(vs_world* w, MPI_Comm mc, int p2p, MPI_Request* req, int nreq,
                                          _vs_mpi_tmp* tmp, int ntmp, void* extra)
{
    _vs_mpi_leak* l = _VS_HNEW(_VS_WH(w), _vs_mpi_leak, 1);
    if (!l) return; // (out of memory: these stay leaked for good)
    memset(l, 0, sizeof *l);
    l->mc = mc, l->p2p = p2p, l->req = req, l->nreq = nreq, l->tmp = tmp, l->ntmp = ntmp, l->extra = extra;
    l->next = w->leaks;
    w->leaks = l;
}

/* _vs_mpi_leak_push_locked, taking w->mmu. */
_VS_PRIVATE void _vs_mpi_leak_add(vs_world* w, MPI_Comm mc, int p2p, MPI_Request* req, int nreq, _vs_mpi_tmp* tmp,
                                  int ntmp, void* extra)
{
    if (!w || !w->mmu_made) return; // (no world: these stay leaked for good)
    pthread_mutex_lock(&w->mmu);
    _vs_mpi_leak_push_locked(w, mc, p2p, req, nreq, tmp, ntmp, extra);
    pthread_mutex_unlock(&w->mmu);
}

/* Tests *rq until it completes (in error too: then it is dropped) or the
   deadline; MPI_REQUEST_NULL once done. */
_VS_PRIVATE void _vs_mpi_settle(MPI_Request* rq, double until)
{
    while (*rq != MPI_REQUEST_NULL && _vs_now() < until) {
        int flag = 0;
        if (MPI_Test(rq, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag) *rq = MPI_REQUEST_NULL;
    }
}

/* Frees communicator *mc of world w once no request a fault left in flight is
   pending on it: they get a moment to complete (a late peer's message), then a
   point-to-point one is cancelled. A collective still pending keeps the
   communicator: the leak list owns it then, and vs_world_free frees it once the
   requests complete (freed under them, Open MPI reads freed memory when the late
   message arrives). */
_VS_PRIVATE void _vs_mpi_comm_release(vs_world* w, MPI_Comm* mc)
{
    int fin = 0, kept = 0;
    MPI_Finalized(&fin);
    if (*mc == MPI_COMM_NULL || fin) return;
    if (w && w->mmu_made) {
        pthread_mutex_lock(&w->mmu);
        double until = _vs_now() + 0.2;
        for (_vs_mpi_leak* l = w->leaks; l; l = l->next) {
            if (l->mc != *mc || l->own) continue;
            int open = 0;
            for (int i = 0; i < l->nreq; i++) {
                _vs_mpi_settle(&l->req[i], until);
                if (l->req[i] != MPI_REQUEST_NULL && l->p2p && MPI_Cancel(&l->req[i]) == MPI_SUCCESS)
                    _vs_mpi_settle(&l->req[i], _vs_now() + 0.2);
                open |= l->req[i] != MPI_REQUEST_NULL;
            }
            if (open && !kept) l->own = kept = 1;
        }
        pthread_mutex_unlock(&w->mmu);
    }
    if (!kept) MPI_Comm_free(mc);
    *mc = MPI_COMM_NULL;
}

/* The world rank of rank r of c (-1 when MPI cannot say). */
_VS_PRIVATE int _vs_mpi_wrank(const vs_comm* c, int r)
{
    const vs_world* w = c->world;
    if (!w || !w->comm || c == w->comm) return r;
    MPI_Group g, wg;
    int out = MPI_UNDEFINED;
    if (MPI_Comm_group(c->mc, &g) != MPI_SUCCESS) return -1;
    if (MPI_Comm_group(w->comm->mc, &wg) == MPI_SUCCESS) {
        MPI_Group_translate_ranks(g, 1, &r, wg, &out);
        MPI_Group_free(&wg);
    }
    MPI_Group_free(&g);
    return out == MPI_UNDEFINED ? -1 : out;
}

/* Records the world's abort (the first one stays): world rank `origin` failed
   with `why`, in its words `text` (NULL: none came). Under w->mmu. */
_VS_PRIVATE void _vs_mpi_mark_locked(vs_world* w, int origin, int why, const char* text)
{
    if (__atomic_load_n(&w->ab_state, __ATOMIC_ACQUIRE)) return;
    w->ab_rank = origin;
    w->ab_why = why;
    if (w->ab_text) {
        if (text && text[0])
            _vs_fmt(w->ab_text, _VS_CAUSE_MSG, "%s", text);
        else
            _vs_fmt(w->ab_text, _VS_CAUSE_MSG, "world rank %d aborted the world (no notice text)", origin);
    }
    __atomic_store_n(&w->ab_state, 1, __ATOMIC_RELEASE);
}

/* A peer's notice has arrived in w->abin (from `source`): the abort it reports. */
_VS_PRIVATE void _vs_mpi_mark_notice_locked(vs_world* w, int source)
{
    _vs_mpi_notice* n = w->abin;
    if (n && n->magic == _VS_MPI_MAGIC && n->origin >= 0 && n->origin < w->size) {
        n->text[sizeof n->text - 1] = 0;
        _vs_mpi_mark_locked(w, (int)n->origin, (int)n->why, n->text);
    } else {
        _vs_mpi_mark_locked(w, source, VS_ERR_ABORTED, NULL);
    }
}

/* A peer that timed out asks every rank where it is (_vs_mpi_probe): the answer
   is the op this rank waits in, sent from any wait (they all poll here). The
   answer's buffer and request go to the leak list (rare: a timeout's). Under w->mmu. */
_VS_PRIVATE void _vs_mpi_answer_locked(vs_world* w)
{
    const _vs_hooks* h = _VS_WH(w);
    for (int k = 0; k < 8 && w->pbreq != MPI_REQUEST_NULL; k++) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Test(&w->pbreq, &flag, &st) != MPI_SUCCESS || !flag) return;
        int64_t* a = _VS_HNEW(h, int64_t, 4);
        MPI_Request* rq = _VS_HNEW(h, MPI_Request, 1);
        if (a && rq && w->pbin[0] == _VS_MPI_MAGIC) {
            a[0] = _VS_MPI_MAGIC, a[1] = w->rank;
            a[2] = __atomic_load_n(&w->where[0], __ATOMIC_RELAXED), a[3] = __atomic_load_n(&w->where[1], __ATOMIC_RELAXED);
            if (MPI_Isend(a, 4, MPI_INT64_T, st.MPI_SOURCE, _VS_MPI_TAG_ANSWER, w->mab, rq) == MPI_SUCCESS) {
                _vs_mpi_leak_push_locked(w, w->mab, 1, rq, 1, NULL, 0, a);
                a = NULL, rq = NULL;
            }
        }
        _vs_hfree(h, a), _vs_hfree(h, rq);
        if (MPI_Irecv(w->pbin, 4, MPI_INT64_T, MPI_ANY_SOURCE, _VS_MPI_TAG_PROBE, w->mab, &w->pbreq) != MPI_SUCCESS)
            w->pbreq = MPI_REQUEST_NULL;
    }
}

/* 1 when the world is aborted: by this rank, or a peer's notice has arrived. */
_VS_PRIVATE int _vs_mpi_aborted(vs_world* w)
{
    if (__atomic_load_n(&w->ab_state, __ATOMIC_ACQUIRE)) return 1;
    if (!w->mmu_made || pthread_mutex_trylock(&w->mmu) != 0) return 0; // another thread polls it
    if (w->abreq != MPI_REQUEST_NULL) {
        int flag = 0;
        MPI_Status st;
        int e = MPI_Test(&w->abreq, &flag, &st);
#ifdef MPIX_ERR_PROC_FAILED
        int cls = 0;
        if (e != MPI_SUCCESS && w->mft && MPI_Error_class(e, &cls) == MPI_SUCCESS && cls == MPIX_ERR_PROC_FAILED_PENDING) {
            MPIX_Comm_failure_ack(w->mab); // (a peer ended: the receive from any source goes on, from the others)
            e = MPI_Test(&w->abreq, &flag, &st);
        }
#endif
        if (e == MPI_SUCCESS && flag) _vs_mpi_mark_notice_locked(w, st.MPI_SOURCE);
    }
    _vs_mpi_answer_locked(w);
    pthread_mutex_unlock(&w->mmu);
    return __atomic_load_n(&w->ab_state, __ATOMIC_ACQUIRE);
}

/* Marks c and the world aborted on this rank, caused by world rank `origin`'s
   failure `why` worded `text`, and, when this rank is the cause recorded (the
   world was not aborted yet, or by this rank), sends the notice to every other
   rank of the world (once). Any thread. */
_VS_PRIVATE void _vs_mpi_fault_ex(vs_comm* c, int why, int origin, const char* text, int relay);

_VS_PRIVATE void _vs_mpi_fault(vs_comm* c, int why, int origin, const char* text)
{
    _vs_mpi_fault_ex(c, why, origin, text, 0);
}

/* relay 1: the notice is sent for `origin` (a process that ended: ULFM). */
_VS_PRIVATE void _vs_mpi_fault_ex(vs_comm* c, int why, int origin, const char* text, int relay)
{
    const _vs_hooks* h = _VS_WH(c->world);
    vs_world* w = c->world;
    __atomic_store_n(&c->aborted, 1, __ATOMIC_SEQ_CST);
    if (!w || !w->mmu_made) return;
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    _vs_mpi_aborted(w); // a peer's notice that came in first is the cause
    pthread_mutex_lock(&w->mmu);
    _vs_mpi_mark_locked(w, origin, why, text);
    int send = !w->ab_sent && (w->ab_rank == w->rank || (relay && w->ab_rank == origin)) && w->mab != MPI_COMM_NULL &&
               w->abmsg;
    if (send) {
        w->ab_sent = 1;
        _vs_mpi_notice* m = w->abmsg;
        memset(m, 0, sizeof *m);
        m->magic = _VS_MPI_MAGIC, m->origin = w->ab_rank, m->why = w->ab_why;
        _vs_fmt(m->text, sizeof m->text, "%s", w->ab_text ? w->ab_text : "");
    }
    pthread_mutex_unlock(&w->mmu);
    if (!send) return;
    int msize = 0, mrank = 0; // (the channel's ranks: the world's live ones after a shrink, not world ranks)
    MPI_Comm_size(w->mab, &msize);
    MPI_Comm_rank(w->mab, &mrank);
    MPI_Request* rq = _VS_HNEW(h, MPI_Request, msize);
    int* dead = _VS_HNEW(h, int, msize);
    if (!rq || !dead) {
        _vs_hfree(h, rq), _vs_hfree(h, dead);
        return;
    }
#ifdef MPIX_ERR_PROC_FAILED
    /* ULFM: none to a process MPI knows has ended (a send to one left in
       flight can keep Open MPI's MPI_Finalize waiting for good) */
    MPI_Group fg, mg;
    int nf = 0;
    if (w->mft && MPIX_Comm_failure_ack(w->mab) == MPI_SUCCESS && MPIX_Comm_failure_get_acked(w->mab, &fg) == MPI_SUCCESS) {
        MPI_Group_size(fg, &nf);
        int* in = nf > 0 ? _VS_HNEW(h, int, 2 * (size_t)nf) : NULL;
        if (in && MPI_Comm_group(w->mab, &mg) == MPI_SUCCESS) {
            for (int i = 0; i < nf; i++) in[i] = i;
            MPI_Group_translate_ranks(fg, nf, in, mg, in + nf);
            for (int i = 0; i < nf; i++)
                if (in[nf + i] >= 0 && in[nf + i] < msize) dead[in[nf + i]] = 1;
            MPI_Group_free(&mg);
        }
        _vs_hfree(h, in);
        MPI_Group_free(&fg);
    }
#endif
    int k = 0;
    for (int r = 0; r < msize; r++)
        if (r != mrank && !dead[r] &&
            MPI_Isend(w->abmsg, (int)sizeof *w->abmsg, MPI_BYTE, r, _VS_MPI_TAG_ABORT, w->mab, &rq[k]) == MPI_SUCCESS)
            k++;
    _vs_hfree(h, dead);
    _vs_mpi_leak_add(w, w->mab, 1, rq, k, NULL, 0, NULL); // small: they complete at once, but may not
}

/* A fault this rank found in operation `kind` #seq (a timeout naming the world
   ranks found missing, an MPI error): the cause, worded with this thread's error. */
_VS_PRIVATE void _vs_mpi_fault_here(vs_comm* c, int why, int kind, int64_t seq, const int* missing, int nmissing)
{
    char text[_VS_CAUSE_MSG];
    int me = c->world ? c->world->rank : c->rank;
    const char* how = why == VS_ERR_TIMEOUT ? "timed out in" : why == VS_ERR_BACKEND ? "hit an MPI error in" : "failed in";
    const char* k = kind >= 1 && kind < _VS_K_COUNT ? _vs_kind_names[kind] : "an operation";
    int len = seq >= 0 ? _vs_fmt(text, sizeof text, "world rank %d %s %s #%lld (%s)", me, how, k, (long long)seq, vs_result_string(why))
                       : _vs_fmt(text, sizeof text, "world rank %d %s %s (%s)", me, how, k, vs_result_string(why));
    if (nmissing > _VS_AB_MISS) nmissing = _VS_AB_MISS;
    for (int i = 0; missing && i < nmissing && (size_t)len < sizeof text; i++)
        len += _vs_fmt(text + len, sizeof text - (size_t)len, "%s%d", i ? ", " : ", missing world rank ", missing[i]);
    if ((size_t)len < sizeof text && vs_last_error()[0])
        _vs_fmt(text + len, sizeof text - (size_t)len, ": %s", vs_last_error());
    _vs_mpi_fault(c, why, me, text);
}

_VS_PRIVATE void _vs_mpi_comm_abort(vs_comm* c, vs_result why, int origin, const char* cause)
{
    if (cause) {
        _vs_mpi_fault(c, why, origin, cause);
        return;
    }
    char text[300];
    int me = c->world ? c->world->rank : c->rank;
    _vs_fmt(text, sizeof text, "world rank %d called vs_comm_abort on %s", me, c->label);
    _vs_mpi_fault(c, VS_ERR_ABORTED, me, text);
}

/* The normalised call of one op, as the desync check compares it:
   kind, count (-1: uneven all-to-all), dtype, op, root/peer (-1: none). */
_VS_PRIVATE void _vs_mpi_opnorm(const _vs_opdesc* o, int n, int64_t v[5])
{
    int k = o->kind;
    int64_t cnt = (int64_t)o->count;
    if ((k == _VS_K_ALLGATHER || k == _VS_K_REDSCAT) && !o->uniform) {
        cnt = 0;
        for (int i = 0; i < n; i++) cnt += (int64_t)o->counts[i];
    }
    if (k == _VS_K_ALLTOALL && !o->uniform) cnt = -1;
    int bare = k == _VS_K_BARRIER || k == _VS_K_SPLIT;
    v[0] = k;
    v[1] = bare ? 0 : cnt;
    v[2] = bare ? 0 : (int64_t)o->dt;
    v[3] = (k == _VS_K_ALLREDUCE || k == _VS_K_REDUCE || k == _VS_K_REDSCAT) ? (int64_t)o->op : 0;
    v[4] = (k == _VS_K_REDUCE || k == _VS_K_BCAST || k == _VS_K_SEND || k == _VS_K_RECV) ? o->root : -1;
}

/* "all_reduce #7 (count 4, f32, sum)"; seq < 0: no number. */
_VS_PRIVATE void _vs_mpi_opstr(const int64_t v[5], int64_t seq, char* buf, size_t cap)
{
    int k = (int)v[0];
    const char* name = k >= 1 && k < _VS_K_COUNT ? _vs_kind_names[k] : "unknown operation";
    int len = seq >= 0 ? snprintf(buf, cap, "%s #%lld", name, (long long)seq) : snprintf(buf, cap, "%s", name);
    if (k == _VS_K_BARRIER || k == _VS_K_SPLIT || len < 0 || (size_t)len >= cap) return;
    char cnt[40];
    if (v[1] < 0)
        snprintf(cnt, sizeof cnt, "uneven counts");
    else
        snprintf(cnt, sizeof cnt, "count %lld", (long long)v[1]);
    len += snprintf(buf + len, cap - (size_t)len, " (%s, %s", cnt, vs_dtype_name((vs_dtype)v[2]));
    if (v[3] && (size_t)len < cap) len += snprintf(buf + len, cap - (size_t)len, ", %s", vs_op_name((vs_op)v[3]));
    if (v[4] >= 0 && (size_t)len < cap)
        len += snprintf(buf + len, cap - (size_t)len, ", %s %lld", k == _VS_K_SEND || k == _VS_K_RECV ? "peer" : "root",
                        (long long)v[4]);
    if ((size_t)len < cap) snprintf(buf + len, cap - (size_t)len, ")");
}

_VS_PRIVATE void _vs_mpi_opdesc_str(const vs_comm* c, const _vs_opdesc* o, int64_t seq, char* buf, size_t cap)
{
    int64_t v[5];
    _vs_mpi_opnorm(o, c->size, v);
    _vs_mpi_opstr(v, seq, buf, cap);
}

/* The call an error message names: formatted only when one is written. */
typedef struct _vs_mpi_what {
    const vs_comm* c;
    const _vs_opdesc* o;
    int64_t seq;
    char s[160];
} _vs_mpi_what;

_VS_PRIVATE const char* _vs_mpi_wstr(_vs_mpi_what* wh)
{
    if (!wh->s[0]) _vs_mpi_opdesc_str(wh->c, wh->o, wh->seq, wh->s, sizeof wh->s);
    return wh->s;
}

/* The error of an operation that found the world aborted: a consequence of the
   origin's failure, naming it in its own words. */
_VS_PRIVATE vs_result _vs_mpi_aborted_err(vs_comm* c, _vs_mpi_what* wh)
{
    vs_world* w = c->world;
    const char* text = w->ab_text ? w->ab_text : "";
    __atomic_store_n(&c->aborted, 1, __ATOMIC_SEQ_CST);
    return _vs_err_from(w->ab_rank, text, VS_ERR_ABORTED,
                        "%s: the MPI world was aborted (this is rank %d of %d, world rank %d%s): %s", _vs_mpi_wstr(wh),
                        c->rank, c->size, w->rank, w->ab_rank == w->rank ? ", the origin" : "", text);
}

/* Polls requests to completion, the deadline or an abort of the world. Returns
   VS_OK, VS_ERR_TIMEOUT or VS_ERR_ABORTED (message not set), or VS_ERR_BACKEND
   (message set). `st` has n entries or is NULL.
   An abort seen while the requests are open gives them _VS_MPI_GRACE_S more to
   complete: a notice says the world is lost, not that this operation is. A
   rank that fails right after a collective (vs_world_abort) sends its notice
   while a slower peer's request of that same collective, its result already
   in place, waits for one more MPI_Testall; failing it there made that peer
   alone see the collective fail (CI saw it: tests/ulfm.sh abort). What could
   not finish still fails, that much later; the next call fails at once. */
#define _VS_MPI_GRACE_S 0.05
_VS_PRIVATE vs_result _vs_mpi_poll(vs_comm* c, int n, MPI_Request* req, MPI_Status* st, double deadline,
                                   _vs_mpi_what* wh)
{
    double grace = 0; // (when an abort was seen: the end of the requests' grace)
    for (long it = 0;; it++) {
        int flag = 0, e = MPI_Testall(n, req, &flag, st ? st : MPI_STATUSES_IGNORE);
        if (e != MPI_SUCCESS) {
            if (e == MPI_ERR_IN_STATUS && st)
                for (int i = 0; i < n; i++)
                    if (st[i].MPI_ERROR != MPI_SUCCESS && st[i].MPI_ERROR != MPI_ERR_PENDING) {
                        e = st[i].MPI_ERROR;
                        break;
                    }
            return _vs_mpi_fail(e, _vs_mpi_wstr(wh));
        }
        if (flag) return VS_OK;
        if (grace > 0) {
            if (_vs_now() > grace) return VS_ERR_ABORTED;
            sched_yield();
            continue;
        }
        if (((it & 15) == 0 || it > 2000) &&
            (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE) || _vs_mpi_aborted(c->world))) {
            grace = _vs_now() + _VS_MPI_GRACE_S;
            continue;
        }
        if (_vs_now() > deadline) return VS_ERR_TIMEOUT;
        // MPI progresses only inside its calls: poll fast at first, then back off
        if (it > 2000) _vs_sleep_us(it > 20000 ? 200 : 20);
        else if (it > 200) sched_yield();
    }
}

/* Appends "rank r (world w)" for each listed rank of c. */
_VS_PRIVATE void _vs_mpi_ranklist(const vs_comm* c, const int* ranks, int n, char* buf, size_t cap)
{
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < n && len + 1 < cap; i++) {
        int wr = _vs_mpi_wrank(c, ranks[i]);
        int k = wr >= 0 ? snprintf(buf + len, cap - len, "%s%d (world %d)", i ? ", " : "", ranks[i], wr)
                        : snprintf(buf + len, cap - len, "%s%d", i ? ", " : "", ranks[i]);
        if (k < 0) break;
        len += (size_t)k;
    }
}

/* ULFM (w->mft): after an MPI error, the ranks of c whose processes ended, as
   MPI knows them. When there is one: the world is aborted naming the first
   (a notice sent for it to every other rank), *r is VS_ERR_ABORTED saying so,
   and 1 is returned. */
_VS_PRIVATE int _vs_mpi_dead(vs_comm* c, _vs_mpi_what* wh, vs_result* r)
{
#ifdef MPIX_ERR_PROC_FAILED
    vs_world* w = c->world;
    if (!w || !w->mft) return 0;
    int cls = 0, revoked = MPI_Error_class(vs_last_backend_code(), &cls) == MPI_SUCCESS && cls == MPIX_ERR_REVOKED;
    char was[400];
    _vs_save_error(was, sizeof was);
    /* MPI's error may come before what explains it: the failed rank's own
       notice (its words), or MPI's knowledge of which process ended (an error
       of a collective's round can be a plain one): a moment for either */
    for (double until = _vs_now() + 1.0;;) {
        if (_vs_mpi_aborted(w)) break; // (a notice: the origin in its own words, or a rank that named the dead)
        MPI_Group fg, cg;
        int n = 0, x = 0, dead = MPI_UNDEFINED;
        if (!revoked && MPIX_Comm_failure_ack(c->mc) == MPI_SUCCESS &&
            MPIX_Comm_failure_get_acked(c->mc, &fg) == MPI_SUCCESS) {
            MPI_Group_size(fg, &n);
            if (n > 0 && MPI_Comm_group(c->mc, &cg) == MPI_SUCCESS) {
                MPI_Group_translate_ranks(fg, 1, &x, cg, &dead);
                MPI_Group_free(&cg);
            }
            MPI_Group_free(&fg);
        }
        if (n > 0 && dead != MPI_UNDEFINED && dead >= 0) {
            int wd = _vs_mpi_wrank(c, dead);
            char text[_VS_CAUSE_MSG];
            _vs_fmt(text, sizeof text, "world rank %d failed (VS_ERR_ABORTED): its process ended (ULFM: %d process%s "
                    "of %s gone, seen by world rank %d: %s)", wd, n, n == 1 ? "" : "es", c->label, w->rank, was);
            _vs_mpi_fault_ex(c, VS_ERR_ABORTED, wd, text, 1); // (sent for it: the others learn it from this rank)
            break;
        }
        if (_vs_now() > until) {
            if (!revoked) return 0; // (an MPI error of its own: the caller's path)
            char text[_VS_CAUSE_MSG]; // (a survivor began a shrink: the failure's notice never came here)
            _vs_fmt(text, sizeof text, "world rank %d's %s was revoked: a rank began a shrink after a failure",
                    w->rank, c->label);
            _vs_mpi_fault(c, VS_ERR_ABORTED, w->rank, text);
            break;
        }
        _vs_sleep_us(1000);
    }
    *r = _vs_mpi_aborted_err(c, wh);
    return 1;
#else
    (void)c, (void)wh, (void)r;
    return 0;
#endif
}

/* A timeout's probe: asks every other rank of c where it is, over the abort
   channel (each answers from whatever wait it polls, _vs_mpi_answer_locked), and
   waits up to `wait` s. ans (_VS_MPI_ANS per rank of c): the op each answering
   rank waits in (kind, seq; kind 0: none) and its answer's time in microseconds;
   kind -1 for a rank that did not answer. Returns how many did not, or -1 when
   there is no probe: ULFM (MPI names the dead there) or after a shrink (the
   channel's ranks are not the world's). */
#define _VS_MPI_ANS 3
_VS_PRIVATE int _vs_mpi_probe(vs_comm* c, int64_t* ans, double wait)
{
    vs_world* w = c->world;
    const _vs_hooks* h = _VS_WH(w);
    int n = c->size, me = c->rank, silent = 0;
    for (int q = 0; q < n; q++) ans[_VS_MPI_ANS * q] = q == me ? 0 : -1, ans[_VS_MPI_ANS * q + 1] = -1, ans[_VS_MPI_ANS * q + 2] = 0;
    if (!w || w->mft || w->epoch > 0 || w->mab == MPI_COMM_NULL || w->pbreq == MPI_REQUEST_NULL || n < 2) return -1;
    MPI_Request* rq = _VS_HNEW(h, MPI_Request, 2 * (size_t)n);
    int64_t* buf = _VS_HNEW(h, int64_t, 4 * (size_t)n + 4); // the answers, then the question
    if (!rq || !buf) {
        _vs_hfree(h, rq), _vs_hfree(h, buf);
        return -1;
    }
    memset(buf, 0, (4 * (size_t)n + 4) * sizeof *buf);
    int64_t* qn = buf + 4 * (size_t)n;
    qn[0] = _VS_MPI_MAGIC, qn[1] = w->rank;
    double t0 = _vs_now();
    int want = 0;
    for (int q = 0; q < n; q++) {
        int wq = q == me ? -1 : _vs_mpi_wrank(c, q);
        rq[q] = rq[n + q] = MPI_REQUEST_NULL;
        if (wq < 0) continue;
        if (MPI_Irecv(buf + 4 * q, 4, MPI_INT64_T, wq, _VS_MPI_TAG_ANSWER, w->mab, &rq[q]) == MPI_SUCCESS)
            want++;
        else
            rq[q] = MPI_REQUEST_NULL;
        if (MPI_Isend(qn, 4, MPI_INT64_T, wq, _VS_MPI_TAG_PROBE, w->mab, &rq[n + q]) != MPI_SUCCESS)
            rq[n + q] = MPI_REQUEST_NULL;
    }
    // each answer's time: a rank behind a slow link answers last, from the back of its queue
    for (double end = t0 + wait; want > 0 && _vs_now() <= end;) {
        for (int q = 0; q < n; q++) {
            int flag = 0;
            if (rq[q] == MPI_REQUEST_NULL || MPI_Test(&rq[q], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag) continue;
            rq[q] = MPI_REQUEST_NULL, want--;
            ans[_VS_MPI_ANS * q + 2] = (int64_t)((_vs_now() - t0) * 1e6);
        }
        _vs_mpi_aborted(w); // (answers the others' probes: they time out too)
        _vs_sleep_us(100);
    }
    int open = 0;
    for (int q = 0; q < n; q++) {
        if (q == me) continue;
        if (rq[q] == MPI_REQUEST_NULL && buf[4 * q] == _VS_MPI_MAGIC) {
            ans[_VS_MPI_ANS * q] = buf[4 * q + 2], ans[_VS_MPI_ANS * q + 1] = buf[4 * q + 3];
        } else {
            silent++;
            if (rq[q] != MPI_REQUEST_NULL && MPI_Cancel(&rq[q]) == MPI_SUCCESS) _vs_mpi_settle(&rq[q], _vs_now() + 0.1);
        }
        _vs_mpi_settle(&rq[n + q], _vs_now()); // (one test)
        open |= rq[q] != MPI_REQUEST_NULL || rq[n + q] != MPI_REQUEST_NULL;
    }
    if (open) // (a question to a rank cut off: still in flight)
        _vs_mpi_leak_add(w, w->mab, 1, rq, 2 * n, NULL, 0, buf);
    else
        _vs_hfree(h, rq), _vs_hfree(h, buf);
    return silent;
}

/* The probe's findings, for a timeout's message: the ranks that did not answer,
   or else one that answered far behind every other (a slow link; listed in
   *miss as world ranks, *nmiss of them), and where those that answered wait
   when it is not where this rank waits. */
_VS_PRIVATE void _vs_mpi_probe_str(vs_comm* c, const int64_t* ans, int silent, double wait, int* miss, int* nmiss,
                                   char* buf, size_t cap)
{
    vs_world* w = c->world;
    int n = c->size, me = c->rank;
    size_t len = 0;
    buf[0] = 0;
    *nmiss = 0;
    if (silent < 0) return;
    if (silent > 0) {
        int* s = miss; // (c's ranks first, made world ranks below)
        for (int q = 0; q < n; q++)
            if (ans[_VS_MPI_ANS * q] < 0) s[(*nmiss)++] = q;
        char list[300];
        _vs_mpi_ranklist(c, s, *nmiss, list, sizeof list);
        len += (size_t)_vs_fmt(buf, cap, "; rank%s %s did not answer within %g s (stopped, cut off, or busy outside "
                               "vescale)", *nmiss == 1 ? "" : "s", list, wait);
        for (int i = 0; i < *nmiss; i++) s[i] = _vs_mpi_wrank(c, s[i]);
    } else {
        int slow = -1; // the last answer, when the others all came far sooner
        int64_t t1 = -1, t2 = 0;
        for (int q = 0; q < n; q++) {
            if (q == me) continue;
            int64_t t = ans[_VS_MPI_ANS * q + 2];
            if (t > t1) t2 = t1 > t2 ? t1 : t2, t1 = t, slow = q;
            else if (t > t2) t2 = t;
        }
        if (n > 2 && t1 > 20000 && t1 > 8 * t2) {
            char one[64];
            _vs_mpi_ranklist(c, &slow, 1, one, sizeof one);
            len += (size_t)_vs_fmt(buf, cap, "; rank %s answered last, after %.3f s, the others within %.3f s (a slow "
                                   "link or a loaded host: the rank the others wait on)", one, (double)t1 * 1e-6,
                                   (double)t2 * 1e-6);
            miss[(*nmiss)++] = _vs_mpi_wrank(c, slow);
        } else {
            len += (size_t)_vs_fmt(buf, cap, "; every other rank answered within %.3f s", (double)t1 * 1e-6);
        }
    }
    int k = 0, mk = (int)__atomic_load_n(&w->where[0], __ATOMIC_RELAXED);
    int64_t ms = __atomic_load_n(&w->where[1], __ATOMIC_RELAXED);
    for (int q = 0; q < n && len + 1 < cap && k < 4; q++) {
        const int64_t* a = ans + _VS_MPI_ANS * q;
        if (q == me || a[0] < 0 || (a[0] == mk && a[1] == ms)) continue;
        int kd = (int)a[0];
        const char* kn = kd >= 1 && kd < _VS_K_COUNT ? _vs_kind_names[kd] : "no operation";
        char one[64];
        _vs_mpi_ranklist(c, &q, 1, one, sizeof one);
        len += (size_t)_vs_fmt(buf + len, cap - len, "%s rank %s waits in %s", k ? "," : "; alive elsewhere:", one, kn);
        if (kd >= 1 && a[1] >= 0 && len + 1 < cap) len += (size_t)_vs_fmt(buf + len, cap - len, " #%lld", (long long)a[1]);
        k++;
    }
}

/* After a failed wait: sets the message (timeout, abort), aborts the world (or
   notes a peer's abort) and hands the requests in flight to the world. reqop[i] is
   the op of req[i] (NULL: all ops[0]). Takes ownership of req, reqop, tmp, extra. */
_VS_PRIVATE vs_result _vs_mpi_failed(vs_comm* c, vs_result r, const _vs_opdesc* ops, int64_t seq, _vs_mpi_what* wh,
                                     MPI_Request* req, int* reqop, int nreq, _vs_mpi_tmp* tmp, int ntmp, void* extra)
{
    const _vs_hooks* h = _VS_WH(c->world);
    int kind = ops[0].kind;
    if (r == VS_ERR_ABORTED) {
        r = _vs_mpi_aborted_err(c, wh);
    } else if (r == VS_ERR_TIMEOUT) {
        // a p2p request that is still open names its peer; a collective cannot say who is
        // missing, but for a pair: the other rank
        int* miss = _VS_HNEW(h, int, nreq + 1 + (size_t)c->size);
        int nm = 0, coll = 0;
        for (int i = 0; i < nreq; i++) {
            const _vs_opdesc* o = &ops[reqop ? reqop[i] : 0];
            int flag = 0;
            MPI_Test(&req[i], &flag, MPI_STATUS_IGNORE);
            if (flag) continue;
            if (o->kind == _VS_K_SEND || o->kind == _VS_K_RECV) {
                if (miss) miss[nm++] = o->root;
            } else {
                coll = 1;
            }
        }
        char who[200] = "", probe[400] = "";
        int pair = coll && c->size == 2 && miss; // the other rank is the only one who can be missing
        int64_t* ans = coll && !pair && !nm ? _VS_HNEW(h, int64_t, _VS_MPI_ANS * (size_t)c->size) : NULL;
        int* pm = ans ? _VS_HNEW(h, int, c->size) : NULL;
        if (ans && pm) { // MPI cannot tell who is missing: ask who is where (a moment)
            double pw = c->timeout / 4 < 0.5 ? c->timeout / 4 : 0.5;
            int np = 0;
            _vs_mpi_probe_str(c, ans, _vs_mpi_probe(c, ans, pw), pw, pm, &np, probe, sizeof probe);
            for (int i = 0; i < np && miss; i++) miss[nm++] = pm[i]; // (world ranks: named as such below)
            if (np) coll = 2;
        }
        _vs_hfree(h, ans);
        _vs_hfree(h, pm);
        if (pair) {
            int peer = 1 - c->rank, have = 0;
            for (int i = 0; i < nm; i++) have |= miss[i] == peer;
            if (!have) miss[nm++] = peer;
            _vs_mpi_ranklist(c, &peer, 1, who, sizeof who);
        } else if (nm) {
            _vs_mpi_ranklist(c, miss, nm, who, sizeof who);
        }
        if (pair)
            r = _vs_err(VS_ERR_TIMEOUT, "%s on %s: rank %s, the other rank of this pair, did not arrive within %g s "
                        "(this is rank %d, world rank %d; MPI)", _vs_mpi_wstr(wh), c->label, who, c->timeout, c->rank,
                        c->world->rank);
        else if (coll == 2)
            r = _vs_err(VS_ERR_TIMEOUT, "%s on %s: not every one of its %d ranks arrived within %g s "
                        "(this is rank %d, world rank %d)%s", _vs_mpi_wstr(wh), c->label, c->size, c->timeout, c->rank,
                        c->world->rank, probe);
        else if (coll)
            r = _vs_err(VS_ERR_TIMEOUT, "%s on %s: not every one of its %d ranks arrived within %g s "
                        "(this is rank %d, world rank %d); MPI cannot tell which is missing: VESCALE_DEBUG=desync names it%s%s%s",
                        _vs_mpi_wstr(wh), c->label, c->size, c->timeout, c->rank, c->world->rank,
                        nm ? "; no p2p match from rank " : "", who, probe);
        else
            r = _vs_err(VS_ERR_TIMEOUT, "%s: no match from rank %s within %g s (this is rank %d of %d, world rank %d; MPI)",
                        _vs_mpi_wstr(wh), nm ? who : "?", c->timeout, c->rank, c->size, c->world->rank);
        if (coll != 2) // (the probe's are world ranks already)
            for (int i = 0; i < nm; i++) miss[i] = _vs_mpi_wrank(c, miss[i]);
        _vs_mpi_fault_here(c, VS_ERR_TIMEOUT, kind, seq, miss, nm);
        _vs_hfree(h, miss);
    } else if (_vs_mpi_dead(c, wh, &r)) {
        // (ULFM: a peer's process ended; the others hear of it for it)
    } else {
        _vs_mpi_fault_here(c, r == VS_ERR_BACKEND ? VS_ERR_BACKEND : r, kind, seq, NULL, 0);
    }
    int p2p = 1;
    for (int i = 0; i < nreq; i++) {
        int k = ops[reqop ? reqop[i] : 0].kind;
        p2p &= k == _VS_K_SEND || k == _VS_K_RECV;
    }
    _vs_hfree(h, reqop);
    _vs_mpi_leak_add(c->world, c->mc, p2p, req, nreq, tmp, ntmp, extra);
    return r;
}

_VS_PRIVATE uint64_t _vs_mpi_mix(uint64_t h, int64_t x)
{
    for (int i = 0; i < 8; i++) {
        h ^= (uint64_t)((x >> (8 * i)) & 0xff);
        h *= 1099511628211ULL;
    }
    return h;
}

/* The batch's fingerprint: its first op in the clear, every op (and the count
   arrays ranks must agree on) in a hash. */
_VS_PRIVATE void _vs_mpi_fingerprint(const vs_comm* c, const _vs_opdesc* ops, int nops, int64_t seq, int64_t* fp)
{
    int n = c->size;
    uint64_t h = 1469598103934665603ULL;
    fp[0] = seq;
    _vs_mpi_opnorm(&ops[0], n, fp + 1);
    fp[6] = nops;
    for (int i = 0; i < nops; i++) {
        int64_t v[5];
        _vs_mpi_opnorm(&ops[i], n, v);
        for (int j = 0; j < 5; j++) h = _vs_mpi_mix(h, v[j]);
        if (ops[i].kind == _VS_K_ALLGATHER || ops[i].kind == _VS_K_REDSCAT)
            for (int j = 0; j < n; j++) {
                h = _vs_mpi_mix(h, (int64_t)ops[i].counts[j]);
                h = _vs_mpi_mix(h, (int64_t)ops[i].displs[j]);
            }
    }
    fp[7] = (int64_t)(h >> 1);
    fp[8] = c->world ? c->world->rank : c->rank;
    fp[9] = c->rank;
}

_VS_PRIVATE void _vs_mpi_fpstr(const int64_t* fp, const int64_t* ref, char* buf, size_t cap)
{
    int len = snprintf(buf, cap, "rank %lld (world %lld) called ", (long long)fp[9], (long long)fp[8]);
    if (len < 0 || (size_t)len >= cap) return;
    _vs_mpi_opstr(fp + 1, fp[0], buf + len, cap - (size_t)len);
    len = (int)strlen(buf);
    if (fp[6] > 1 && (size_t)len < cap) len += snprintf(buf + len, cap - (size_t)len, " first of a group of %lld", (long long)fp[6]);
    if (ref && !memcmp(fp, ref, 7 * sizeof *fp) && fp[7] != ref[7] && (size_t)len < cap)
        snprintf(buf + len, cap - (size_t)len, " (another op of the group, or the counts, differ)");
}

/* VESCALE_DEBUG=desync: every rank sends the batch's fingerprint to every other
   rank and checks them all, so every rank reaches the same verdict; on a timeout
   the ranks whose fingerprint never came are the missing ones. */
_VS_PRIVATE vs_result _vs_mpi_desync(vs_comm* c, const _vs_opdesc* ops, int nops, int64_t seq, double deadline,
                                     _vs_mpi_what* wh)
{
    const _vs_hooks* h = _VS_WH(c->world);
    int n = c->size, me = c->rank, k = 0, e = MPI_SUCCESS;
    int64_t* fp = _VS_HNEW(h, int64_t, (size_t)n * _VS_FP_N);
    MPI_Request* req = _VS_HNEW(h, MPI_Request, 2 * (size_t)n);
    MPI_Status* st = _VS_HNEW(h, MPI_Status, 2 * (size_t)n);
    int* who = _VS_HNEW(h, int, n);
    vs_result r = VS_OK;
    if (!fp || !req || !st || !who) {
        _vs_hfree(h, fp), _vs_hfree(h, req), _vs_hfree(h, st), _vs_hfree(h, who);
        return _vs_err(VS_ERR_NOMEM, "%s: out of memory for the desync check over %d ranks", _vs_mpi_wstr(wh), n);
    }
    _vs_mpi_fingerprint(c, ops, nops, seq, fp + (size_t)me * _VS_FP_N);
    for (int q = 0; q < n && e == MPI_SUCCESS; q++)
        if (q != me && (e = MPI_Irecv(fp + (size_t)q * _VS_FP_N, _VS_FP_N, MPI_INT64_T, q, _VS_MPI_TAG_FP, c->mc,
                                      &req[k])) == MPI_SUCCESS)
            k++;
    for (int q = 0; q < n && e == MPI_SUCCESS; q++)
        if (q != me && (e = MPI_Isend(fp + (size_t)me * _VS_FP_N, _VS_FP_N, MPI_INT64_T, q, _VS_MPI_TAG_FP, c->mc,
                                      &req[k])) == MPI_SUCCESS)
            k++;
    if (e != MPI_SUCCESS) {
        r = _vs_mpi_fail(e, _vs_mpi_wstr(wh));
    } else {
        r = _vs_mpi_poll(c, k, req, st, deadline, wh);
    }
    if (r == VS_ERR_TIMEOUT) { // the fingerprints that never came name the missing ranks
        int nm = 0;
        for (int q = 0, i = 0; q < n; q++) {
            if (q == me) continue;
            int flag = 0;
            MPI_Test(&req[i++], &flag, MPI_STATUS_IGNORE);
            if (!flag) who[nm++] = q;
        }
        char list[300], probe[400] = "";
        _vs_mpi_ranklist(c, who, nm, list, sizeof list);
        /* a rank that did not arrive may be alive, waiting in an earlier op on
           another rank: ask who is where (a moment); the silent ones are named */
        int64_t* ans = _VS_HNEW(h, int64_t, _VS_MPI_ANS * (size_t)n);
        int* pm = _VS_HNEW(h, int, n);
        int np = 0;
        if (ans && pm) {
            double pw = c->timeout / 4 < 0.5 ? c->timeout / 4 : 0.5;
            _vs_mpi_probe_str(c, ans, _vs_mpi_probe(c, ans, pw), pw, pm, &np, probe, sizeof probe);
        }
        r = _vs_err(VS_ERR_TIMEOUT, "%s on %s: rank%s %s of its %d ranks did not arrive within %g s "
                    "(this is rank %d, world rank %d; desync check)%s",
                    _vs_mpi_wstr(wh), c->label, nm == 1 ? "" : "s", nm ? list : "?", n, c->timeout, me, c->world->rank,
                    probe);
        for (int i = 0; i < nm; i++) who[i] = _vs_mpi_wrank(c, who[i]);
        if (np) // (the notice names the silent: the late ones that answered are alive)
            _vs_mpi_fault_here(c, VS_ERR_TIMEOUT, ops[0].kind, seq, pm, np);
        else
            _vs_mpi_fault_here(c, VS_ERR_TIMEOUT, ops[0].kind, seq, who, nm);
        _vs_hfree(h, ans), _vs_hfree(h, pm);
    } else if (r == VS_ERR_ABORTED) {
        r = _vs_mpi_aborted_err(c, wh);
    } else if (r) {
        _vs_mpi_fault_here(c, VS_ERR_BACKEND, ops[0].kind, seq, NULL, 0);
    }
    if (r) {
        _vs_hfree(h, st);
        _vs_hfree(h, who);
        _vs_mpi_leak_add(c->world, c->mc, 1, req, k, NULL, 0, fp);
        return r;
    }
    // the verdict: the call most ranks made is the reference (ties: the lowest rank)
    int diff = 0;
    for (int q = 1; q < n && !diff; q++) diff = memcmp(fp, fp + (size_t)q * _VS_FP_N, _VS_FP_CMP * sizeof *fp) != 0;
    if (diff) {
        int ref = 0, best = 0;
        for (int q = 0; q < n; q++) {
            int same = 0;
            for (int p = 0; p < n; p++)
                same += !memcmp(fp + (size_t)q * _VS_FP_N, fp + (size_t)p * _VS_FP_N, _VS_FP_CMP * sizeof *fp);
            if (same > best) best = same, ref = q;
        }
        const int64_t* rf = fp + (size_t)ref * _VS_FP_N;
        char msg[480], one[200];
        int len = _vs_fmt(msg, sizeof msg, "%s: ranks disagree on %s (VESCALE_DEBUG=desync, %d ranks): ", _vs_mpi_wstr(wh),
                          c->label, n);
        for (int q = 0; q < n && len > 0 && (size_t)len < sizeof msg; q++) {
            const int64_t* f = fp + (size_t)q * _VS_FP_N;
            if (!memcmp(f, rf, _VS_FP_CMP * sizeof *fp)) continue;
            _vs_mpi_fpstr(f, rf, one, sizeof one);
            len += snprintf(msg + len, sizeof msg - (size_t)len, "%s; ", one);
        }
        _vs_mpi_fpstr(rf, NULL, one, sizeof one);
        if (len > 0 && (size_t)len < sizeof msg) {
            if (best > 1)
                snprintf(msg + len, sizeof msg - (size_t)len, "while %d ranks, e.g. %s", best, one);
            else
                snprintf(msg + len, sizeof msg - (size_t)len, "while %s", one);
        }
        r = _vs_err(VS_ERR_MISMATCH, "%s", msg);
    }
    _vs_hfree(h, fp), _vs_hfree(h, req), _vs_hfree(h, st), _vs_hfree(h, who);
    return r;
}

_VS_PRIVATE vs_result _vs_mpi_split(vs_comm* c, _vs_opdesc* o, int64_t seq, double deadline, int arrived,
                                    _vs_mpi_what* wh)
{
    const _vs_hooks* h = _VS_WH(c->world);
    *o->split_out = NULL;
    if (!arrived && c->size > 1) {
        // MPI_Comm_split blocks with no deadline: first every rank arrives (a barrier that can be polled)
        MPI_Request* rq = _VS_HNEW(h, MPI_Request, 1);
        if (!rq) return _vs_err(VS_ERR_NOMEM, "%s: out of memory", _vs_mpi_wstr(wh));
        int e = MPI_Ibarrier(c->mc, rq);
        vs_result r = e != MPI_SUCCESS ? _vs_mpi_fail(e, _vs_mpi_wstr(wh)) : _vs_mpi_poll(c, 1, rq, NULL, deadline, wh);
        if (r) return _vs_mpi_failed(c, r, o, seq, wh, rq, NULL, e == MPI_SUCCESS, NULL, 0, NULL);
        _vs_hfree(h, rq);
    }
    MPI_Comm nc = MPI_COMM_NULL;
    int e = MPI_Comm_split(c->mc, o->color == VS_COLOR_NONE ? MPI_UNDEFINED : o->color, o->key, &nc);
    if (e != MPI_SUCCESS) {
        vs_result r = _vs_mpi_fail(e, _vs_mpi_wstr(wh));
        _vs_mpi_fault_here(c, VS_ERR_BACKEND, o->kind, seq, NULL, 0);
        return r;
    }
    if (nc == MPI_COMM_NULL) return VS_OK;
    MPI_Comm_set_errhandler(nc, MPI_ERRORS_RETURN);
    int r, n;
    MPI_Comm_rank(nc, &r);
    MPI_Comm_size(nc, &n);
    vs_comm* out = _vs_comm_new(c->world, VS_TRANSPORT_MPI, r, n);
    if (!out) {
        MPI_Comm_free(&nc);
        return _vs_err(VS_ERR_NOMEM, "%s: out of memory", _vs_mpi_wstr(wh));
    }
    out->mc = nc;
    out->timeout = c->timeout;
    *o->split_out = out;
    return VS_OK;
}

/* Runs one batch: checks the world is not aborted, with VESCALE_DEBUG=desync
   checks every rank makes the same call, starts every op as a non-blocking MPI
   request and polls them to completion, the deadline or an abort. */
_VS_PRIVATE vs_result _vs_mpi_exec_batch(vs_comm* c, _vs_opdesc* ops, int nops)
{
    const _vs_hooks* h = _VS_WH(c->world);
    vs_world* w = c->world;
    int coll = 0, p2p = 0;
    for (int i = 0; i < nops; i++) {
        if (ops[i].kind == _VS_K_SEND || ops[i].kind == _VS_K_RECV)
            p2p = 1;
        else
            coll = 1;
    }
    // the batch's number: its first collective's (_vs_issue numbers them); p2p-only
    // batches involve some ranks only and have none
    int64_t seq = -1;
    for (int i = 0; i < nops && seq < 0; i++)
        if (ops[i].kind != _VS_K_SEND && ops[i].kind != _VS_K_RECV) seq = (int64_t)ops[i].seq;
    _vs_mpi_what what; // the call, as messages name it (made only for one)
    what.c = c, what.o = &ops[0], what.seq = seq, what.s[0] = 0;
    _vs_mpi_what* wh = &what;
    if (_vs_mpi_aborted(w)) return _vs_mpi_aborted_err(c, wh);
    for (int i = 0; i < nops; i++)
        if (ops[i].kind == _VS_K_SPLIT && nops > 1)
            return _vs_err(VS_ERR_STATE, "split cannot be batched with other operations");
    double deadline = _vs_now() + c->timeout;
    int checked = 0;
    if (w->mpi_desync && coll && !p2p && c->size > 1) {
        _VS_TRY(_vs_mpi_desync(c, ops, nops, seq, deadline, wh));
        checked = 1;
    }
    if (ops[0].kind == _VS_K_SPLIT) return _vs_mpi_split(c, &ops[0], seq, deadline, checked, wh);
    MPI_Request* req = _VS_HNEW(h, MPI_Request, nops);
    MPI_Status* st = _VS_HNEW(h, MPI_Status, nops);
    int* reqop = _VS_HNEW(h, int, nops);
    _vs_mpi_tmp* tmp = _VS_HNEW(h, _vs_mpi_tmp, nops);
    vs_result r = VS_OK;
    int nreq = 0;
    if (!req || !st || !reqop || !tmp) {
        _vs_hfree(h, req), _vs_hfree(h, st), _vs_hfree(h, reqop), _vs_hfree(h, tmp);
        return _vs_err(VS_ERR_NOMEM, "%s: out of memory for a batch of %d ops", _vs_mpi_wstr(wh), nops);
    }
    for (int i = 0; i < nops && !r; i++) {
        int k = 0;
        r = _vs_mpi_start(c, &ops[i], &tmp[i], &req[nreq], &k);
        for (int j = 0; j < k; j++) reqop[nreq + j] = i;
        if (!r) nreq += k;
    }
    if (r && nreq > 0) { // some ops are in flight, the batch cannot complete on the peers
        char keep[400];
        _vs_save_error(keep, sizeof keep);
        _vs_hfree(h, st);
        _vs_mpi_failed(c, VS_ERR_BACKEND, ops, seq, wh, req, reqop, nreq, tmp, nops, NULL);
        return _vs_err(r, "%s", keep);
    }
    if (!r) {
        r = _vs_mpi_poll(c, nreq, req, st, deadline, wh);
        if (r) {
            _vs_hfree(h, st);
            return _vs_mpi_failed(c, r, ops, seq, wh, req, reqop, nreq, tmp, nops, NULL);
        }
        for (int i = 0; i < nops; i++) _vs_mpi_finish(c, &ops[i], &tmp[i]);
    }
    _vs_mpi_tmp_free(h, tmp, nops);
    _vs_hfree(h, req), _vs_hfree(h, st), _vs_hfree(h, reqop);
    return r;
}

/* _vs_mpi_exec_batch, with where this rank waits noted for a peer's probe. */
_VS_PRIVATE vs_result _vs_mpi_exec(vs_comm* c, _vs_opdesc* ops, int nops)
{
    vs_world* w = c->world;
    int64_t seq = -1;
    for (int i = 0; i < nops && seq < 0; i++)
        if (ops[i].kind != _VS_K_SEND && ops[i].kind != _VS_K_RECV) seq = (int64_t)ops[i].seq;
    __atomic_store_n(&w->where[1], seq, __ATOMIC_RELAXED);
    __atomic_store_n(&w->where[0], (int64_t)ops[0].kind, __ATOMIC_RELAXED);
    vs_result r = _vs_mpi_exec_batch(c, ops, nops);
    __atomic_store_n(&w->where[0], (int64_t)0, __ATOMIC_RELAXED);
    return r;
}

/* The debug modes (d->debug as resolved, NULL: VESCALE_DEBUG; vs_debug_modes,
   the one parser): desync is this transport's. */
_VS_PRIVATE vs_result _vs_mpi_debug(const vs_world_desc* d, int* desync)
{
    unsigned modes = 0;
    vs_result r = vs_debug_modes(d->debug, &modes);
    *desync = (modes & VS_DEBUG_DESYNC) != 0;
    return r;
}

_VS_PRIVATE vs_result _vs_mpi_world(vs_world* w, const vs_world_desc* d)
{
    w->mab = MPI_COMM_NULL;
    w->abreq = MPI_REQUEST_NULL;
    w->pbreq = MPI_REQUEST_NULL;
    if (!w->mmu_made) pthread_mutex_init(&w->mmu, NULL);
    w->mmu_made = 1;
    int init = 0, fin = 0;
    MPI_Finalized(&fin);
    if (fin)
        return _vs_err(VS_ERR_STATE, "vs_world_init: MPI was already finalized in this process (by an earlier "
                       "vs_world_free or the program); MPI cannot be started twice");
    _VS_TRY(_vs_mpi_debug(d, &w->mpi_desync));
    MPI_Initialized(&init);
    if (!init) {
        int provided = 0;
        int e = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
        if (e != MPI_SUCCESS) return _vs_mpi_fail(e, "vs_world_init: MPI_Init_thread");
        w->mpi_finalize = 1;
        if (provided < MPI_THREAD_MULTIPLE)
            vs_log(w, VS_LOG_WARN, "MPI gives thread level %d < MPI_THREAD_MULTIPLE: "
                   "use async operations on one communicator at a time", provided);
    }
    MPI_Comm base = d->mpi_comm ? *(MPI_Comm*)d->mpi_comm : MPI_COMM_WORLD;
    MPI_Comm mc;
    int e = MPI_Comm_dup(base, &mc);
    if (e != MPI_SUCCESS) return _vs_mpi_fail(e, "vs_world_init: MPI_Comm_dup");
    // MPI errors come back as results on every communicator made from this one. Open MPI
    // reports errors of non-blocking collectives (in MPI_Testall) on MPI_COMM_WORLD, not
    // on the request's communicator: when vescale started MPI, it sets that one too
    MPI_Comm_set_errhandler(mc, MPI_ERRORS_RETURN);
    if (w->mpi_finalize) MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(mc, &w->rank);
    MPI_Comm_size(mc, &w->size);
    MPI_Comm node;
    e = MPI_Comm_split_type(mc, MPI_COMM_TYPE_SHARED, w->rank, MPI_INFO_NULL, &node);
    if (e == MPI_SUCCESS) {
        MPI_Comm_rank(node, &w->local_rank);
        MPI_Comm_free(&node);
    }
    if (e == MPI_SUCCESS) e = MPI_Comm_dup(mc, &w->mab);
    const _vs_hooks* h = &w->hooks;
    w->abin = _VS_HNEW(h, _vs_mpi_notice, 1);
    w->abmsg = _VS_HNEW(h, _vs_mpi_notice, 1);
    w->ab_text = _VS_HNEW(h, char, _VS_CAUSE_MSG);
    if (e == MPI_SUCCESS && (!w->abin || !w->abmsg || !w->ab_text)) {
        MPI_Comm_free(&mc);
        return _vs_err(VS_ERR_NOMEM, "vs_world_init: out of memory");
    }
    if (e == MPI_SUCCESS)
        e = MPI_Irecv(w->abin, (int)sizeof *w->abin, MPI_BYTE, MPI_ANY_SOURCE, _VS_MPI_TAG_ABORT, w->mab, &w->abreq);
    if (e != MPI_SUCCESS) {
        MPI_Comm_free(&mc);
        return _vs_mpi_fail(e, "vs_world_init: setting up the MPI communicators");
    }
    MPI_Op_create(_vs_mpi_u8_sum, 1, &w->u8_sum);
    w->u8_sum_made = 1;
#ifdef MPIX_ERR_PROC_FAILED
    { // ULFM built in: on when the job runs with it (Open MPI: mpirun --with-ft ulfm; MPICH: MPIR_CVAR_ENABLE_FT)
        const char* ft[2] = {getenv("OMPI_MCA_mpi_ft_enable"), getenv("MPIR_CVAR_ENABLE_FT")};
        for (int i = 0; i < 2; i++)
            w->mft |= ft[i] && (!strcmp(ft[i], "1") || !strcmp(ft[i], "true") || !strcmp(ft[i], "yes"));
    }
#endif
    if (!w->mft && // a timeout's probe (none under ULFM: MPI names the dead there)
        MPI_Irecv(w->pbin, 4, MPI_INT64_T, MPI_ANY_SOURCE, _VS_MPI_TAG_PROBE, w->mab, &w->pbreq) != MPI_SUCCESS)
        w->pbreq = MPI_REQUEST_NULL;
    w->comm = _vs_comm_new(w, VS_TRANSPORT_MPI, w->rank, w->size);
    if (!w->comm) {
        MPI_Comm_free(&mc);
        return _vs_err(VS_ERR_NOMEM, "vs_world_init: out of memory");
    }
    w->comm->mc = mc;
    w->comm->kind = _VS_COMM_WORLD;
    return VS_OK;
}

/* An explicit rank/size, or torchrun's, must be MPI's: MPI numbers the job. */
_VS_PRIVATE vs_result _vs_mpi_check_launcher(const vs_world* w, const vs_bootstrap_info* bi, const vs_world_desc* d)
{
    int expl = !strcmp(bi->source, "explicit");
    if (!expl && (strcmp(bi->source, "torchrun") != 0 || d->mpi_comm)) return VS_OK;
    if (bi->rank == w->rank && bi->world_size == w->size) return VS_OK;
    const char* in = d->mpi_comm ? "desc.mpi_comm" : "MPI_COMM_WORLD";
    if (expl)
        return _vs_err(VS_ERR_MISMATCH, "vs_world_init: desc.rank %d, desc.world_size %d disagree with MPI's rank %d of %d "
                       "(%s); leave world_size 0 to take MPI's", bi->rank, bi->world_size, w->rank, w->size, in);
    return _vs_err(VS_ERR_MISMATCH, "vs_world_init: environment RANK=%d, WORLD_SIZE=%d (torchrun) disagree with MPI's "
                   "rank %d of %d (%s)", bi->rank, bi->world_size, w->rank, w->size, in);
}

#ifdef MPIX_ERR_PROC_FAILED
_VS_PRIVATE void* _vs_mpi_finalize_main(void* done)
{
    MPI_Finalize();
    __atomic_store_n((int*)done, 1, __ATOMIC_RELEASE);
    return NULL;
}
#endif

_VS_PRIVATE vs_result _vs_mpi_world_fini(vs_world* w)
{
    const _vs_hooks* h = &w->hooks;
    int fin = 0, pending = 0, late = 0;
    MPI_Finalized(&fin);
    if (w->mmu_made && !fin) {
        if (w->abreq != MPI_REQUEST_NULL) {
            MPI_Status st;
            int cancelled = 0;
            MPI_Cancel(&w->abreq);
            MPI_Wait(&w->abreq, &st);
            MPI_Test_cancelled(&st, &cancelled);
            if (!cancelled) { // a peer's notice came in: this world was aborted too
                pthread_mutex_lock(&w->mmu);
                _vs_mpi_mark_notice_locked(w, st.MPI_SOURCE);
                pthread_mutex_unlock(&w->mmu);
            }
        }
        if (w->pbreq != MPI_REQUEST_NULL) { // (a question that came meanwhile goes unanswered)
            MPI_Cancel(&w->pbreq);
            MPI_Wait(&w->pbreq, MPI_STATUS_IGNORE);
        }
        // requests a fault left in flight may still complete (a late peer): a moment for them
        double until = _vs_now() + 0.2;
        for (_vs_mpi_leak* l = w->leaks; l; l = l->next) {
            int flag = 0;
            for (;;) {
                if (MPI_Testall(l->nreq, l->req, &flag, MPI_STATUSES_IGNORE) != MPI_SUCCESS) flag = 0;
                if (flag || _vs_now() > until) break;
                _vs_sleep_us(1000);
            }
            if (!flag) pending += l->nreq;
        }
        // after an abort MPI_Finalize waits for every process, dead or stopped ones too:
        // finalize only when every rank reaches this point soon. (ULFM: a rank that left at
        // a shrink finalizes; MPI waits there for the others' ends, not for the dead.)
        if (!pending && w->mpi_finalize && w->size > 1 && __atomic_load_n(&w->ab_state, __ATOMIC_ACQUIRE) &&
            !(w->mft && !w->comm && w->epoch > 0)) {
            MPI_Request* b = _VS_HNEW(h, MPI_Request, 1);
            double wait = w->timeout < 2.0 ? w->timeout : 2.0;
            int flag = 0;
            if (b && MPI_Ibarrier(w->mab, b) == MPI_SUCCESS) {
                for (double end = _vs_now() + wait;;) {
                    if (MPI_Test(b, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag || _vs_now() > end) break;
                    _vs_sleep_us(1000);
                }
                if (!flag) _vs_mpi_leak_add(w, w->mab, 0, b, 1, NULL, 0, NULL), b = NULL;
            }
            _vs_hfree(h, b);
            late = !flag;
        }
        while (w->leaks) {
            _vs_mpi_leak* l = w->leaks;
            w->leaks = l->next;
            if (!pending && !late) { // else MPI may still write into them: they stay
                if (l->own) MPI_Comm_free(&l->mc);
                _vs_hfree(h, l->req);
                _vs_mpi_tmp_free(h, l->tmp, l->ntmp);
                _vs_hfree(h, l->extra);
            }
            _vs_hfree(h, l);
        }
        if (!pending && !late && w->mab != MPI_COMM_NULL) MPI_Comm_free(&w->mab);
        if (!pending && !late) _vs_hfree(h, w->abmsg); // else a notice may still be in flight
        w->abmsg = NULL;
    }
    _vs_hfree(h, w->abmsg); // (NULL above unless MPI is gone, or never sent)
    _vs_hfree(h, w->abin); // its receive completed or was cancelled above
    _vs_hfree(h, w->ab_text);
    w->abin = w->abmsg = NULL;
    w->ab_text = NULL;
    if (w->mmu_made) pthread_mutex_destroy(&w->mmu);
    w->mmu_made = 0;
    if (w->u8_sum_made && !fin) MPI_Op_free(&w->u8_sum);
    w->u8_sum_made = 0;
    if (pending)
        return _vs_err(VS_ERR_ABORTED, "vs_world_free: world rank %d: %d MPI requests are still in flight after a "
                       "timeout or abort, so MPI was not finalized (MPI_Finalize would wait for them forever): "
                       "end the process, or end the job with vs_world_abort", w->rank, pending);
    if (late)
        return _vs_err(VS_ERR_ABORTED, "vs_world_free: world rank %d: the world was aborted and not every rank reached "
                       "vs_world_free within %g s, so MPI was not finalized (MPI_Finalize would wait for them): "
                       "end the process, or end the job with vs_world_abort", w->rank, w->timeout < 2.0 ? w->timeout : 2.0);
#ifdef MPIX_ERR_PROC_FAILED
    if (w->mpi_finalize && !fin && w->mft && w->epoch > 0) { // (a job that lost a process: bounded)
        int* done = _VS_HNEW(NULL, int, 1); // (the thread's: left to it when MPI does not return)
        pthread_t th;
        if (done && pthread_create(&th, NULL, _vs_mpi_finalize_main, done) == 0) {
            double end = _vs_now() + (w->timeout < 10 ? w->timeout : 10);
            while (!__atomic_load_n(done, __ATOMIC_ACQUIRE) && _vs_now() < end) _vs_sleep_us(1000);
            if (!__atomic_load_n(done, __ATOMIC_ACQUIRE)) {
                pthread_detach(th);
                return _vs_err(VS_ERR_ABORTED, "vs_world_free: world rank %d: MPI_Finalize did not return within %g s "
                               "after the job lost a process (Open MPI's ULFM can wait for a message to a process that "
                               "ended): end the process (status 0)", w->rank, w->timeout < 10 ? w->timeout : 10);
            }
            pthread_join(th, NULL);
            _vs_hfree(NULL, done);
            return VS_OK;
        }
        _vs_hfree(NULL, done);
    }
#endif
    if (w->mpi_finalize && !fin) MPI_Finalize();
    return VS_OK;
}

#endif // VESCALE_MPI

#ifdef VESCALE_MPI
/* vs_world_abort on MPI: ends the job with MPI_Abort and a message. */
_VS_PRIVATE vs_result _vs_mpi_world_abort(vs_world* w, vs_result why)
{
    {
        int init = 0, fin = 0;
        MPI_Initialized(&init);
        MPI_Finalized(&fin);
        if (!init || fin) return _vs_err(VS_ERR_STATE, "vs_world_abort: MPI is not running (finalized, or never started)");
        int code = why < 0 ? -why : why;
        if (code < 1 || code > 255) code = 1;
        char last[512];
        _vs_save_error(last, sizeof last);
        if (w->mft && w->comm) { // ULFM: this process ends, not the job: the others hear why, then shrink
            char cause[_VS_CAUSE_MSG];
            _vs_fmt(cause, sizeof cause, "world rank %d failed (%s)%s%s", w->rank,
                    vs_result_string(why < 0 ? why : VS_ERR_ABORTED), last[0] ? ": " : "", last);
            _vs_mpi_fault(w->comm, why < 0 ? why : VS_ERR_ABORTED, w->rank, cause);
            double until = _vs_now() + 1.0; // (the notices out first: a moment for them)
            for (_vs_mpi_leak* l = w->leaks; l; l = l->next)
                for (int i = 0; i < l->nreq; i++) _vs_mpi_settle(&l->req[i], until);
            fprintf(stderr, "vescale: world rank %d of %d leaves the MPI job (ULFM: the others go on): %s%s%s\n",
                    w->rank, w->size, vs_result_string(why), last[0] ? "; last error: " : "", last);
            fflush(stderr);
            kill(getpid(), SIGKILL); // (what ULFM counts as a process failure; a non-zero exit ends the job)
        }
        fprintf(stderr, "vescale: world rank %d of %d aborts the MPI job with exit status %d: %s%s%s\n", w->rank,
                w->size, code, vs_result_string(why), last[0] ? "; last error: " : "", last);
        fflush(stderr);
        MPI_Abort(w->comm ? w->comm->mc : MPI_COMM_WORLD, code);
        return _vs_err(VS_ERR_ABORTED, "vs_world_abort: MPI_Abort returned"); // not reached
    }
}
#endif

// >>nccl ----------------------------------------------------------------------
#ifdef VESCALE_NCCL

_VS_PRIVATE ncclDataType_t _vs_nccl_type(vs_dtype dt)
{
    switch (dt) {
    case VS_F32: return ncclFloat32;
    case VS_F16: return ncclFloat16;
    case VS_BF16: return ncclBfloat16;
    case VS_F64: return ncclFloat64;
    case VS_I32: return ncclInt32;
    case VS_I64: return ncclInt64;
    default: return ncclUint8;
    }
}

_VS_PRIVATE ncclRedOp_t _vs_nccl_op(vs_op op)
{
    switch (op) {
    case VS_OP_AVG: return ncclAvg;
    case VS_OP_MAX: return ncclMax;
    case VS_OP_MIN: return ncclMin;
    default: return ncclSum;
    }
}

_VS_PRIVATE vs_result _vs_nccl_abort(vs_comm* c, vs_result code, int raw, const char* what,
                                     const char* why)
{
    __atomic_store_n(&c->aborted, 1, __ATOMIC_SEQ_CST);
    if (c->nc) {
        ncclCommAbort(c->nc);
        c->nc = NULL;
    }
    return _vs_err_backend(code, raw, "%s: %s (NCCL communicator aborted)", what, why);
}

/* Fail-fast in a vs_launch job (ranks are threads of one process, each on its
   GPU): NCCL's abort reaches only the caller, so every wait of an NCCL
   communicator also watches the job. Once any rank has failed, aborted or
   returned an error, a waiting rank aborts its own communicator and returns
   VS_ERR_ABORTED naming that rank and its message, at once instead of after the
   timeout. (A job of processes has this channel only with an elastic
   directory: the notices >>elastic's store carries; else each rank's deadline
   ends it; see "Faults" in the top comment.) */
_VS_PRIVATE int _vs_store_poll(vs_world* w, int now_);

_VS_PRIVATE vs_result _vs_nccl_job_check(vs_comm* c, const char* what)
{
    _vs_tjob* job = c->world ? c->world->job : NULL;
    /* a job of processes with a store (>>elastic): a failure notice another
       rank posted there, for this world's epoch, does the same */
    vs_world* sw = !job && c->world && c->world->elastic_dir[0] && c->epoch >= c->world->epoch ? c->world : NULL;
    int own = sw && __atomic_load_n(&sw->self_failed, __ATOMIC_ACQUIRE); // (this rank posted its own: nothing waits)
    if (sw ? !own && !_vs_store_poll(sw, 0) : (!job || !__atomic_load_n(&job->failed, __ATOMIC_ACQUIRE))) return VS_OK;
    __atomic_store_n(&c->aborted, 1, __ATOMIC_SEQ_CST);
    if (c->nc) {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
        if (c->kind == _VS_COMM_WORLD) // revoked, kept for vs_world_shrink (ncclCommShrink); aborted when freed
            ncclCommRevoke(c->nc, NCCL_REVOKE_DEFAULT), c->revoked_nc = c->nc;
        else
#endif
            ncclCommAbort(c->nc);
        c->nc = NULL;
    }
    char cause[_VS_CAUSE_MSG];
    int origin = sw ? (own ? sw->rank : sw->eorigin) : 0;
    if (sw) _vs_fmt(cause, sizeof cause, "%s", own ? "this rank failed (vs_world_abort)" : sw->ecause);
    else {
        pthread_mutex_lock(&job->mu); // (the cause's rank may still be rewording it: _vs_job_final)
        origin = job->cause_rank;
        _vs_fmt(cause, sizeof cause, "%s", job->cause);
        pthread_mutex_unlock(&job->mu);
    }
    return _vs_err_from(origin, cause, VS_ERR_ABORTED, "%s: job aborted: %s (NCCL communicator aborted)", what, cause);
}

/* A timeout's error, worded as MPI's: the op and its number (kind 0: none), the
   group, this rank; NCCL cannot say which rank is missing. */
_VS_PRIVATE vs_result _vs_nccl_timeout(vs_comm* c, const char* what, int kind, uint64_t seq)
{
    char why[400];
    int wr = c->world ? c->world->rank : c->rank;
    if (kind >= 1 && kind < _VS_K_COUNT)
        _vs_fmt(why, sizeof why, "timed out: %s #%llu on %s did not complete on all of its %d ranks within %g s (this is "
                "rank %d, world rank %d; NCCL cannot tell which rank is missing)", _vs_kind_names[kind],
                (unsigned long long)seq, c->label, c->size, c->timeout, c->rank, wr);
    else
        _vs_fmt(why, sizeof why, "timed out: not every one of the %d ranks of %s arrived within %g s (this is rank %d, "
                "world rank %d)", c->size, c->label, c->timeout, c->rank, wr);
    return _vs_nccl_abort(c, VS_ERR_TIMEOUT, 0, what, why);
}

/* Non-blocking communicators answer ncclInProgress; poll until settled or the
   deadline, then abort: a dead peer ends in an error, never a hang. o: the
   batch's first op (NULL: none, as for a split). */
_VS_PRIVATE vs_result _vs_nccl_settle(vs_comm* c, ncclComm_t nc, ncclResult_t r, const char* what,
                                      double deadline, const _vs_opdesc* o)
{
    while (r == ncclInProgress) {
        vs_result jr = _vs_nccl_job_check(c, what);
        if (jr) return jr;
        if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE) && c->nc == nc)
            return _vs_nccl_abort(c, VS_ERR_ABORTED, 0, what, "the communicator was aborted (vs_comm_abort)");
        if (_vs_now() > deadline) return _vs_nccl_timeout(c, what, o ? o->kind : 0, o ? o->seq : 0);
        _vs_sleep_us(50);
        ncclCommGetAsyncError(nc, &r);
    }
    if (r != ncclSuccess) return _vs_nccl_abort(c, VS_ERR_BACKEND, (int)r, what, ncclGetErrorString(r));
    return VS_OK;
}

_VS_PRIVATE void _vs_nccl_event_put(vs_comm* c, cudaEvent_t ev);

/* Stream-ordered completion (vs_wait_stream) and its watchdog
   ------------------------------------------------------------
   The caller's stream: the one given with vs_comm_set_stream, else the legacy
   default stream (the communicator's own stream is non-blocking). */
_VS_PRIVATE cudaStream_t _vs_nccl_caller(const vs_comm* c)
{
    return c->own_stream && c->stream == c->own ? cudaStreamLegacy : c->stream;
}

#define _VS_NWATCH ((int)(sizeof(((vs_comm*)0)->watch) / sizeof(((vs_comm*)0)->watch[0])))

/* The watched events up to eseq (UINT64_MAX: all) are complete (a host wait saw
   them done): back into the pool, their deadlines met. */
_VS_PRIVATE void _vs_nccl_watch_done(vs_comm* c, uint64_t upto)
{
    cudaEvent_t done[_VS_NWATCH];
    int nd = 0;
    pthread_mutex_lock(&c->qmu);
    while (nd < c->nwatch && c->watch[nd].eseq <= upto) done[nd] = c->watch[nd].ev, nd++;
    memmove(c->watch, c->watch + nd, sizeof c->watch[0] * (size_t)(c->nwatch - nd));
    c->nwatch -= nd;
    pthread_mutex_unlock(&c->qmu);
    for (int i = 0; i < nd; i++) _vs_nccl_event_put(c, done[i]);
}

/* w's event joins the watch, its deadline the communicator's timeout from now;
   a full ring drops its newest entry (w's event, later on the same stream,
   completes only after it: its deadline moves to w's). */
_VS_PRIVATE void _vs_nccl_watch_add(vs_comm* c, vs_work* w)
{
    cudaEvent_t drop = NULL;
    pthread_mutex_lock(&c->qmu);
    int first = c->nwatch == 0;
    if (c->nwatch == _VS_NWATCH) drop = c->watch[--c->nwatch].ev;
    _vs_nwatch* e = &c->watch[c->nwatch++];
    e->ev = w->ev, e->eseq = w->eseq, e->opseq = w->opseq, e->kind = w->ekind;
    e->deadline = _vs_now() + c->timeout;
    pthread_mutex_unlock(&c->qmu);
    w->ev = NULL;
    if (drop) _vs_nccl_event_put(c, drop);
    vs_world* wd = c->world;
    if (first && c->wd_listed && wd && wd->wd_on) { // the watchdog may sleep with nothing to watch: work now
        pthread_mutex_lock(&wd->wdmu);
        pthread_cond_signal(&wd->wdcv);
        pthread_mutex_unlock(&wd->wdmu);
    }
}

/* A fault the watchdog recorded, or an abort another thread asked for (its
   ncclCommAbort waits for the thread in the call: _vs_nccl_abort_comm), as the
   error of `what`. With ncmu held. */
_VS_PRIVATE vs_result _vs_nccl_wd_check(vs_comm* c, const char* what)
{
    if (c->wd_res) return _vs_err(c->wd_res, "%s: %s", what, c->wd_msg);
    if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE) && c->nc) {
        ncclCommAbort(c->nc);
        c->nc = NULL;
    }
    return VS_OK;
}

/* One look at c (with the world's wdmu held): the oldest stream-ordered work
   past its deadline, an asynchronous NCCL error, or a failed job aborts c (so a
   stream waiting on a dead peer is released), records the fault for c's next
   call, and ends the job. Skipped while c's thread is in an NCCL call (ncmu):
   that call watches the same things with its own deadline. */
_VS_PRIVATE int _vs_wd_check(vs_comm* c)
{
    pthread_mutex_lock(&c->qmu);
    int n = c->nwatch;
    _vs_nwatch e;
    memset(&e, 0, sizeof e);
    if (n) e = c->watch[0];
    pthread_mutex_unlock(&c->qmu);
    if (!n || pthread_mutex_trylock(&c->ncmu)) return n;
    if (!c->nc || c->wd_res) {
        pthread_mutex_unlock(&c->ncmu);
        return 0;
    }
    cudaSetDevice(c->dev);
    _vs_tjob* job = c->world ? c->world->job : NULL;
    vs_result code = VS_OK;
    char msg[sizeof c->wd_msg];
    msg[0] = 0;
    int origin = c->world ? c->world->rank : 0;
    ncclResult_t ar = ncclSuccess;
    if (job && __atomic_load_n(&job->failed, __ATOMIC_ACQUIRE) && !_vs_job_settled(job, c->timeout)) {
        pthread_mutex_unlock(&c->ncmu); // (a moment for what every rank joined: _vs_job_settled)
        return n;
    }
    if (job && __atomic_load_n(&job->failed, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&job->mu);
        origin = job->cause_rank;
        _vs_fmt(msg, sizeof msg, "job aborted: %s (NCCL communicator aborted)", job->cause);
        pthread_mutex_unlock(&job->mu);
        code = VS_ERR_ABORTED;
    } else if (!job && c->epoch >= c->world->epoch &&
               (__atomic_load_n(&c->world->self_failed, __ATOMIC_ACQUIRE) || _vs_store_poll(c->world, 0))) { // (a notice)
        int own = __atomic_load_n(&c->world->self_failed, __ATOMIC_ACQUIRE);
        origin = own ? c->world->rank : c->world->eorigin;
        _vs_fmt(msg, sizeof msg, "job aborted: %s (NCCL communicator aborted)",
                own ? "this rank failed (vs_world_abort)" : c->world->ecause);
        code = VS_ERR_ABORTED;
    } else if (ncclCommGetAsyncError(c->nc, &ar), ar != ncclSuccess && ar != ncclInProgress) {
        code = VS_ERR_BACKEND;
        _vs_fmt(msg, sizeof msg, "world rank %d failed (VS_ERR_BACKEND): NCCL's asynchronous error on %s: %s "
                "(the watchdog aborted the NCCL communicator)", origin, c->label, ncclGetErrorString(ar));
    } else if (_vs_now() > e.deadline) {
        if (cudaEventQuery(e.ev) == cudaSuccess) { // done, unseen: the next one's turn
            pthread_mutex_unlock(&c->ncmu);
            _vs_nccl_watch_done(c, e.eseq);
            return n;
        }
        code = VS_ERR_TIMEOUT;
        _vs_fmt(msg, sizeof msg, "world rank %d failed (VS_ERR_TIMEOUT): %s #%llu on %s, completed in stream order "
                "(vs_wait_stream), did not finish within the timeout of %g s (the watchdog aborted the NCCL "
                "communicator)", origin, _vs_kind_names[e.kind], (unsigned long long)e.opseq, c->label, c->timeout);
    }
    if (code) {
        __atomic_store_n(&c->aborted, 1, __ATOMIC_SEQ_CST);
        ncclCommAbort(c->nc);
        c->nc = NULL;
        _vs_fmt(c->wd_msg, sizeof c->wd_msg, "%s", msg);
        c->wd_res = code;
        // (a communicator from before a reconfiguration: its work left unfinished is not the new world's failure)
        if (job && code != VS_ERR_ABORTED && c->epoch >= __atomic_load_n(&c->world->epoch, __ATOMIC_ACQUIRE))
            _vs_job_fail(job, NULL, code, origin, msg);
    }
    pthread_mutex_unlock(&c->ncmu);
    return code ? 0 : n;
}

/* The watchdog's period while work is in flight: 20 ms; thread ranks beyond
   the cores (simulated GPUs at scale) 20 ms x ranks / cores, at most 1 s and a
   tenth of the timeout: 1,024 ranks' watchdogs waking every 20 ms were 16% of
   a cost-only GPT run's samples on 2 cores (futex_wake), all to find
   deadlines of minutes. */
_VS_PRIVATE double _vs_wd_period(const vs_world* w)
{
    const _vs_tjob* job = w->job;
    const int cpus = _vs_online_cpus();
    double p = job && job->desc.nranks > cpus ? 0.02 * job->desc.nranks / cpus : 0.02;
    if (p > 1) p = 1;
    if (p > w->timeout / 10) p = w->timeout / 10;
    return p < 0.02 ? 0.02 : p;
}

_VS_PRIVATE void* _vs_wd_main(void* arg)
{
    vs_world* w = (vs_world*)arg;
    pthread_mutex_lock(&w->wdmu);
    while (!w->wd_stop) {
        int watched = 0;
        for (vs_comm* c = w->wd_comms; c; c = c->wd_next) watched += _vs_wd_check(c);
        if (!watched) { // nothing in flight to watch: sleep until some is (_vs_nccl_watch_add) or the stop
            pthread_cond_wait(&w->wdcv, &w->wdmu);
            continue;
        }
        struct timespec ts = _vs_abs_deadline(_vs_wd_period(w));
        if (pthread_cond_timedwait(&w->wdcv, &w->wdmu, &ts) == ETIMEDOUT)
            __atomic_add_fetch(&w->wd_timed, 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&w->wdmu);
    return NULL;
}

/* c joins its world's watchdog, which starts with the first one. */
_VS_PRIVATE vs_result _vs_wd_list(vs_comm* c, const char* what)
{
    vs_world* w = c->world;
    if (c->wd_listed || !w) return VS_OK;
    if (!w->wd_on) {
        pthread_mutex_init(&w->wdmu, NULL);
        _vs_cond_init(&w->wdcv);
        w->wd_stop = 0;
        if (pthread_create(&w->wd, NULL, _vs_wd_main, w) != 0) {
            pthread_cond_destroy(&w->wdcv);
            pthread_mutex_destroy(&w->wdmu);
            return _vs_err_backend(VS_ERR_BACKEND, errno, "%s: cannot start the watchdog thread", what);
        }
        w->wd_on = 1;
    }
    pthread_mutex_lock(&w->wdmu);
    c->wd_next = w->wd_comms;
    w->wd_comms = c;
    c->wd_listed = 1;
    pthread_cond_signal(&w->wdcv); // (it may sleep with nothing watched: c's work is)
    pthread_mutex_unlock(&w->wdmu);
    return VS_OK;
}

_VS_PRIVATE void _vs_wd_unlist(vs_comm* c)
{
    vs_world* w = c->world;
    if (!c->wd_listed || !w || !w->wd_on) return;
    pthread_mutex_lock(&w->wdmu); // (the watchdog is not looking at c once this is held)
    vs_comm** l = &w->wd_comms;
    while (*l && *l != c) l = &(*l)->wd_next;
    if (*l) *l = c->wd_next;
    c->wd_listed = 0;
    pthread_mutex_unlock(&w->wdmu);
}

_VS_PRIVATE void _vs_wd_stop(vs_world* w)
{
    if (!w->wd_on) return;
    pthread_mutex_lock(&w->wdmu);
    w->wd_stop = 1;
    pthread_cond_signal(&w->wdcv);
    pthread_mutex_unlock(&w->wdmu);
    pthread_join(w->wd, NULL);
    pthread_cond_destroy(&w->wdcv);
    pthread_mutex_destroy(&w->wdmu);
    w->wd_on = 0;
}

/* vs_wait_stream on NCCL: `stream` (NULL: the caller's) waits for w's event; the
   host does not. The event goes to the watch, which gives the work its deadline.
   A fault already known (the job, NCCL's asynchronous error, the watchdog's) is
   reported now. */
_VS_PRIVATE vs_result _vs_nccl_wait_stream(vs_work* w, void* stream)
{
    vs_comm* c = w->comm;
    const char* what = "vs_wait_stream";
    _VS_TRY(_vs_nccl_wd_check(c, what));
    _VS_TRY(_vs_nccl_job_check(c, what));
    if (!c->nc) return _vs_err(VS_ERR_ABORTED, "%s: NCCL communicator was aborted", what);
    ncclResult_t ar = ncclSuccess;
    ncclCommGetAsyncError(c->nc, &ar);
    if (ar != ncclSuccess && ar != ncclInProgress)
        return _vs_nccl_abort(c, VS_ERR_BACKEND, (int)ar, what, ncclGetErrorString(ar));
    cudaStream_t to = stream ? (cudaStream_t)stream : _vs_nccl_caller(c);
    cudaError_t e = to == c->stream ? cudaSuccess : cudaStreamWaitEvent(to, w->ev, 0);
    if (e != cudaSuccess)
        return _vs_err_backend(VS_ERR_BACKEND, (int)e, "%s: the stream's wait for the operation: %s", what,
                               cudaGetErrorString(e));
    _vs_nccl_watch_add(c, w);
    return _vs_wd_list(c, what);
}

/* Waits for an event (or the whole stream when ev is NULL) while watching NCCL's
   asynchronous errors and the deadline; kind, seq: the op waited for, as a
   timeout names it (kind 0: none known). */
_VS_PRIVATE vs_result _vs_nccl_sync(vs_comm* c, cudaEvent_t ev, const char* what, int kind, uint64_t seq)
{
    double deadline = _vs_now() + c->timeout;
    _VS_TRY(_vs_nccl_wd_check(c, what));
    /* Poll 1,000 times, then every 20 us; thread ranks beyond the cores
       (simulated GPUs at scale) sleep from the first: a poll of one takes the
       core a rank with work needs (256 ranks on 2 cores polled 2 million times
       in a DDP setup and step, 40 thousand so) */
    _vs_tjob* job0 = c->world ? c->world->job : NULL;
    long spin = job0 && job0->desc.nranks > _vs_online_cpus() ? 0 : 1000;
    for (long it = 0;; it++) {
        cudaError_t e = ev ? cudaEventQuery(ev) : cudaStreamQuery(c->stream);
        if (e == cudaSuccess) {
            if (!ev) _vs_nccl_watch_done(c, UINT64_MAX); // the stream drained: every watched event is done
            return VS_OK;
        }
        if (e != cudaErrorNotReady)
            return _vs_nccl_abort(c, VS_ERR_BACKEND, (int)e, what, cudaGetErrorString(e));
        _vs_tjob* job = c->world ? c->world->job : NULL;
        if (job && __atomic_load_n(&job->failed, __ATOMIC_ACQUIRE) && !_vs_job_settled(job, c->timeout)) {
            _vs_sleep_us(20); // (what every rank joined may still finish: _vs_job_settled)
            continue;
        }
        vs_result jr = _vs_nccl_job_check(c, what);
        if (jr) return jr;
        if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) // vs_comm_abort from another thread
            return _vs_nccl_abort(c, VS_ERR_ABORTED, 0, what, "the communicator was aborted (vs_comm_abort)");
        ncclResult_t ar = ncclSuccess;
        if (c->nc) ncclCommGetAsyncError(c->nc, &ar);
        if (ar != ncclSuccess && ar != ncclInProgress)
            return _vs_nccl_abort(c, VS_ERR_BACKEND, (int)ar, what, ncclGetErrorString(ar));
        if (_vs_now() > deadline) return _vs_nccl_timeout(c, what, kind, seq);
        if (it >= spin) _vs_sleep_us(20);
    }
}

/* Uneven all-gathers and reduce-scatters (the v-forms) in one pass each (they
   were one ncclBroadcast or ncclReduce per rank, each moving the data through
   every rank): an all-gatherv is grouped sends of this rank's block to every
   peer and receives of theirs; a reduce-scatterv packs the blocks at the stride
   of the largest count into the communicator's scratch (copies on its stream,
   before the group's kernel), runs one ncclReduceScatter in place there, and
   copies this rank's block out after the group (_vs_nccl_vpost). Bytes of
   scratch op o needs (0: none). */
_VS_PRIVATE size_t _vs_nccl_vbytes(const vs_comm* c, const _vs_opdesc* o)
{
    if (o->kind != _VS_K_REDSCAT || o->uniform) return 0;
    size_t mx = 0;
    for (int i = 0; i < c->size; i++) mx = o->counts[i] > mx ? o->counts[i] : mx;
    return (mx * (size_t)c->size * vs_dtype_size(o->dt) + 255) / 256 * 256;
}

_VS_PRIVATE size_t _vs_nccl_vmax(const vs_comm* c, const _vs_opdesc* o)
{
    size_t mx = 0;
    for (int i = 0; i < c->size; i++) mx = o->counts[i] > mx ? o->counts[i] : mx;
    return mx;
}

/* Before the group (its kernels come after these copies on the stream): each
   uneven reduce-scatter's blocks packed into the scratch, each uneven
   all-gather's own block into place. */
_VS_PRIVATE cudaError_t _vs_nccl_vpre(vs_comm* c, const _vs_opdesc* ops, int nops)
{
    char* vs = (char*)c->vscratch;
    cudaError_t e = cudaSuccess;
    for (int k = 0; k < nops && e == cudaSuccess; k++) {
        const _vs_opdesc* o = &ops[k];
        size_t esz = vs_dtype_size(o->dt), b = _vs_nccl_vbytes(c, o), mx = b ? _vs_nccl_vmax(c, o) : 0;
        const char* sb = (const char*)o->send;
        char* rb = (char*)o->recv;
        if (o->kind == _VS_K_ALLGATHER && !o->uniform && o->counts[c->rank] && sb != rb + o->displs[c->rank] * esz)
            e = cudaMemcpyAsync(rb + o->displs[c->rank] * esz, sb, o->counts[c->rank] * esz, cudaMemcpyDeviceToDevice,
                                c->stream);
        for (int i = 0; i < c->size && b && e == cudaSuccess; i++)
            if (o->counts[i])
                e = cudaMemcpyAsync(vs + (size_t)i * mx * esz, sb + o->displs[i] * esz, o->counts[i] * esz,
                                    cudaMemcpyDeviceToDevice, c->stream);
        vs += b;
    }
    return e;
}

/* After the group: each uneven reduce-scatter's block out of the scratch. */
_VS_PRIVATE cudaError_t _vs_nccl_vpost(vs_comm* c, const _vs_opdesc* ops, int nops)
{
    char* vs = (char*)c->vscratch;
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < nops && e == cudaSuccess; i++) {
        size_t b = _vs_nccl_vbytes(c, &ops[i]), esz = vs_dtype_size(ops[i].dt);
        if (!b) continue;
        if (ops[i].counts[c->rank])
            e = cudaMemcpyAsync(ops[i].recv, vs + _vs_nccl_vmax(c, &ops[i]) * esz * (size_t)c->rank,
                                ops[i].counts[c->rank] * esz, cudaMemcpyDeviceToDevice, c->stream);
        vs += b;
    }
    return e;
}

/* A communicator's own device scratch. Without device hooks in the world it is
   stream-ordered (cudaMallocAsync / cudaFreeAsync on c's stream, which alone
   uses it): neither call synchronises the device, so none waits beside a
   collective of another communicator that waits for its peers (NCCL's
   deadlock when a peer does the same; made as a comm is split, or an uneven
   reduce-scatter first runs, in the middle of a vs_redistribute). Through the
   hooks otherwise (theirs to make safe). */
_VS_PRIVATE int _vs_nccl_sasync(const vs_comm* c)
{
    return !c->world || (!c->world->hooks.alloc.device_alloc && !c->world->hooks.alloc.device_free);
}

_VS_PRIVATE void* _vs_nccl_salloc(vs_comm* c, size_t bytes)
{
    void* p = NULL;
    if (!_vs_nccl_sasync(c)) return vs_device_alloc(c->world, bytes);
    return cudaMallocAsync(&p, bytes ? bytes : 1, c->stream) == cudaSuccess ? p : NULL;
}

_VS_PRIVATE void _vs_nccl_sfree(vs_comm* c, void* p)
{
    if (p && _vs_nccl_sasync(c))
        cudaFreeAsync(p, c->stream); // (after its users, in c's stream order)
    else if (p)
        vs_device_free(c->world, p);
}

/* The scratch for every uneven reduce-scatter of ops (grown as needed: only a
   growth frees and allocates). */
_VS_PRIVATE vs_result _vs_nccl_vscratch(vs_comm* c, const _vs_opdesc* ops, int nops, const char* what)
{
    size_t need = 0;
    for (int i = 0; i < nops; i++) need += _vs_nccl_vbytes(c, &ops[i]);
    if (need <= c->vscratch_cap) return VS_OK;
    size_t cap = 4096;
    while (cap < need && cap <= SIZE_MAX / 2) cap *= 2;
    if (cap < need) cap = need;
    if (c->vscratch && !_vs_nccl_sasync(c)) { // the old one may still be read by c's stream-ordered work: drained
        vs_result r = _vs_nccl_sync(c, NULL, what, 0, 0); // (with the deadline; every rank grows at the same call)
        if (r) return r;
    }
    _vs_nccl_sfree(c, c->vscratch);
    c->vscratch = _vs_nccl_salloc(c, cap);
    c->vscratch_cap = c->vscratch ? cap : 0;
    return c->vscratch ? VS_OK : _vs_err(VS_ERR_NOMEM, "%s: out of device memory for %zu bytes of scratch", what, cap);
}

_VS_PRIVATE ncclResult_t _vs_nccl_launch(vs_comm* c, const _vs_opdesc* o, char* vs)
{
    ncclDataType_t ty = _vs_nccl_type(o->dt);
    ncclRedOp_t op = _vs_nccl_op(o->op);
    size_t esz = vs_dtype_size(o->dt);
    ncclComm_t nc = c->nc;
    cudaStream_t st = c->stream;
    const char* sb = (const char*)o->send;
    char* rb = (char*)o->recv;
    ncclResult_t r = ncclSuccess;
    int n = c->size, me = c->rank;
    switch (o->kind) {
    case _VS_K_ALLREDUCE: return ncclAllReduce(sb, rb, o->count, ty, op, nc, st);
    case _VS_K_REDUCE: return ncclReduce(sb, rb, o->count, ty, op, o->root, nc, st);
    case _VS_K_BCAST: return ncclBroadcast(sb, rb, o->count, ty, o->root, nc, st);
    case _VS_K_ALLGATHER:
        if (o->uniform) return ncclAllGather(sb, rb, o->counts[0], ty, nc, st);
        // v-form (see _vs_nccl_vbytes): this rank's block copied before (_vs_nccl_vpre), the others' received
        for (int j = 0; j < n && (r == ncclSuccess || r == ncclInProgress); j++) {
            if (j == me) continue;
            if (o->counts[me]) r = ncclSend(sb, o->counts[me], ty, j, nc, st);
            if ((r == ncclSuccess || r == ncclInProgress) && o->counts[j])
                r = ncclRecv(rb + o->displs[j] * esz, o->counts[j], ty, j, nc, st);
        }
        return r;
    case _VS_K_REDSCAT: {
        if (o->uniform) return ncclReduceScatter(sb, rb, o->counts[0], ty, op, nc, st);
        size_t mx = _vs_nccl_vmax(c, o); // v-form (see _vs_nccl_vbytes): packed in vs before, reduced in place
        if (!mx) return ncclSuccess;
        return ncclReduceScatter(vs, vs + (size_t)me * mx * esz, mx, ty, op, nc, st);
    }
    case _VS_K_ALLTOALL:
        for (int j = 0; j < n && r == ncclSuccess; j++) {
            if (o->counts[j]) r = ncclSend(sb + o->displs[j] * esz, o->counts[j], ty, j, nc, st);
            if (r == ncclSuccess && o->rcounts[j])
                r = ncclRecv(rb + o->rdispls[j] * esz, o->rcounts[j], ty, j, nc, st);
        }
        return r;
    case _VS_K_BARRIER: return ncclAllReduce(c->scratch, c->scratch, 1, ncclFloat32, ncclSum, nc, st);
    case _VS_K_SEND: return ncclSend(sb, o->count, ty, o->root, nc, st);
    case _VS_K_RECV: return ncclRecv(rb, o->count, ty, o->root, nc, st);
    default: return ncclInvalidArgument;
    }
}

/* Stream order with the caller. A communicator on its own stream (no
   vs_comm_set_stream) takes the legacy default stream as the caller's: what the
   caller enqueued there before a call happens before the call's device work
   (after_caller 1), and what it enqueues there after the call happens after it
   (after_caller 0). Its own stream is non-blocking, so without these two the
   caller's cudaMemcpy of an input (a pageable one returns before its DMA lands)
   and the library's kernels or collectives would race. A communicator on the
   caller's stream is ordered by that stream itself. */
_VS_PRIVATE vs_result _vs_nccl_fence_now(vs_comm* c, int after_caller, const char* what)
{
    if (!c->tp->device || !c->own_stream || c->stream != c->own || !c->fence) return VS_OK;
    cudaStream_t from = after_caller ? cudaStreamLegacy : c->stream, to = after_caller ? c->stream : cudaStreamLegacy;
    cudaError_t e = cudaEventRecord(c->fence, from);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(to, c->fence, 0);
    return e == cudaSuccess ? VS_OK : _vs_err_backend(VS_ERR_BACKEND, (int)e, "%s: ordering with the caller's stream: %s", what, cudaGetErrorString(e));
}

/* Inside a device entry point that made its own pair (_vs_dev_enter /
   _vs_dev_leave) the kernels, copies and collectives need none of their own. */
_VS_PRIVATE vs_result _vs_nccl_fence(vs_comm* c, int after_caller, const char* what)
{
    return c->fence_depth ? VS_OK : _vs_nccl_fence_now(c, after_caller, what);
}

/* A work handle's event: one from the communicator's pool (the events of released
   handles), else a new one; not one cudaEventCreate per operation. */
_VS_PRIVATE cudaError_t _vs_nccl_event_get(vs_comm* c, cudaEvent_t* ev)
{
    pthread_mutex_lock(&c->qmu);
    *ev = c->nev ? c->evpool[--c->nev] : NULL;
    pthread_mutex_unlock(&c->qmu);
    return *ev ? cudaSuccess : cudaEventCreateWithFlags(ev, cudaEventDisableTiming);
}

/* Back into c's pool (destroyed with c: _vs_nccl_comm_destroy). */
_VS_PRIVATE void _vs_nccl_event_put(vs_comm* c, cudaEvent_t ev)
{
    pthread_mutex_lock(&c->qmu);
    if (c->nev == c->evcap) {
        int cap = c->evcap ? 2 * c->evcap : 8;
        cudaEvent_t* p = (cudaEvent_t*)_vs_hrealloc(_VS_WH(c->world), c->evpool, sizeof *p * (size_t)c->evcap,
                                                    sizeof *p * (size_t)cap);
        if (p) c->evpool = p, c->evcap = cap;
    }
    int kept = c->nev < c->evcap;
    if (kept) c->evpool[c->nev++] = ev;
    pthread_mutex_unlock(&c->qmu);
    if (!kept) cudaEventDestroy(ev);
}

/* NCCL takes device (or pinned, registered) memory only. A plain host buffer is
   refused here, naming it, before any work: NCCL does not check by default, and
   its kernel would fault (the CUDA context lost) or, on one GPU, quietly copy. */
_VS_PRIVATE vs_result _vs_nccl_check_buf(const char* what, const char* which, const void* p)
{
    if (!p) return VS_OK;
    struct cudaPointerAttributes a;
    memset(&a, 0, sizeof a);
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) cudaGetLastError(); // (an unknown pointer: host memory, and no error left behind)
    if (e == cudaSuccess && a.type != cudaMemoryTypeUnregistered) return VS_OK;
    return _vs_err(VS_ERR_INVALID, "%s: %s %p is host memory: on NCCL it must be device memory (cudaMalloc, "
                   "vs_device_alloc) or pinned host memory (cudaMallocHost, cudaHostRegister)", what, which, p);
}

_VS_PRIVATE vs_result _vs_nccl_check_bufs(vs_comm* c, const _vs_opdesc* ops, int nops, const char* what)
{
    for (int i = 0; i < nops; i++) {
        const _vs_opdesc* o = &ops[i];
        int k = o->kind, root = o->root == c->rank;
        if (k == _VS_K_BARRIER) continue;
        int reads = k != _VS_K_RECV && (k != _VS_K_BCAST || root);
        int writes = k != _VS_K_SEND && (k != _VS_K_REDUCE || root);
        if (reads) _VS_TRY(_vs_nccl_check_buf(what, "the send buffer", o->send));
        if (writes && o->recv != o->send) _VS_TRY(_vs_nccl_check_buf(what, "the receive buffer", o->recv));
    }
    return VS_OK;
}

_VS_PRIVATE vs_result _vs_nccl_submit(vs_comm* c, _vs_opdesc* ops, int nops, vs_work** out)
{
    const char* what = _vs_kind_names[ops[0].kind];
    double deadline = _vs_now() + c->timeout;
    vs_result res = VS_OK;
    if ((res = _vs_nccl_wd_check(c, what))) goto done;
    if ((res = _vs_nccl_job_check(c, what))) goto done;
    if (!c->nc) {
        res = _vs_err(VS_ERR_ABORTED, "%s: NCCL communicator was aborted", what);
        goto done;
    }
    if ((res = _vs_nccl_check_bufs(c, ops, nops, what))) goto done;
    if ((res = _vs_nccl_fence(c, 1, what))) goto done;
    if ((res = _vs_nccl_vscratch(c, ops, nops, what))) goto done;
    {
        cudaError_t e = _vs_nccl_vpre(c, ops, nops);
        if (e != cudaSuccess) {
            res = _vs_err_backend(VS_ERR_BACKEND, (int)e, "%s: %s", what, cudaGetErrorString(e));
            goto done;
        }
    }
    {
        ncclResult_t r = ncclGroupStart();
        char* vs = (char*)c->vscratch;
        for (int i = 0; i < nops && (r == ncclSuccess || r == ncclInProgress); i++) {
            r = _vs_nccl_launch(c, &ops[i], vs);
            vs += _vs_nccl_vbytes(c, &ops[i]);
        }
        ncclResult_t r2 = ncclGroupEnd();
        if (r == ncclSuccess || r == ncclInProgress) r = r2;
        res = _vs_nccl_settle(c, c->nc, r, what, deadline, &ops[0]);
    }
    if (!res) {
        cudaError_t e = _vs_nccl_vpost(c, ops, nops);
        if (e != cudaSuccess) res = _vs_err_backend(VS_ERR_BACKEND, (int)e, "%s: %s", what, cudaGetErrorString(e));
    }
    if (res) goto done;
    if (out) {
        vs_work* w = _VS_HNEW(_VS_WH(c->world), vs_work, 1);
        if (!w) {
            res = _vs_err(VS_ERR_NOMEM, "%s: out of memory", what);
            goto done;
        }
        w->h = _VS_WH(c->world);
        w->comm = c;
        cudaError_t e = _vs_nccl_event_get(c, &w->ev);
        if (e == cudaSuccess) e = cudaEventRecord(w->ev, c->stream);
        w->eseq = ++c->evseq, w->ekind = ops[0].kind, w->opseq = ops[0].seq;
        if (e != cudaSuccess) {
            _vs_work_free(w);
            res = _vs_err_backend(VS_ERR_BACKEND, (int)e, "%s: %s", what, cudaGetErrorString(e));
            goto done;
        }
        pthread_mutex_lock(&c->qmu);
        w->magic = _VS_MAGIC_LIVE;
        w->wnext = c->works;
        c->works = w;
        pthread_mutex_unlock(&c->qmu);
        *out = w;
    } else {
        res = _vs_nccl_sync(c, NULL, what, ops[0].kind, ops[0].seq);
    }
done:
    for (int i = 0; i < nops; i++) _vs_op_release(&ops[i]);
    return res;
}

_VS_PRIVATE vs_result _vs_nccl_wait(vs_work* w)
{
    vs_result r = _vs_nccl_sync(w->comm, w->ev, "vs_wait", w->ekind, w->opseq);
    if (!r) _vs_nccl_watch_done(w->comm, w->eseq); // (stream order: what was recorded before is done too)
    return r;
}

_VS_PRIVATE vs_result _vs_nccl_comm_setup(vs_comm* c, ncclComm_t nc)
{
    c->nc = nc;
    if (!c->ncmu_made) pthread_mutex_init(&c->ncmu, NULL), c->ncmu_made = 1;
    cudaGetDevice(&c->dev);
    cudaError_t e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) c->own_stream = 1, c->own = c->stream, e = cudaEventCreateWithFlags(&c->fence, cudaEventDisableTiming);
    if (e == cudaSuccess && !(c->scratch = _vs_nccl_salloc(c, sizeof(float))))
        e = cudaErrorMemoryAllocation;
    if (e != cudaSuccess)
        return _vs_err_backend(VS_ERR_BACKEND, (int)e, "NCCL communicator setup: %s", cudaGetErrorString(e));
    return VS_OK;
}

_VS_PRIVATE vs_result _vs_nccl_split(vs_comm* c, int color, int key, vs_comm** out)
{
    if (!c->nc) return _vs_err(VS_ERR_ABORTED, "vs_comm_split: NCCL communicator was aborted");
    vs_result r = _vs_nccl_sync(c, NULL, "vs_comm_split", 0, 0); // earlier work first (stream order)
    if (r) return r;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    double deadline = _vs_now() + c->timeout;
    __atomic_store_n(&c->split_out, (ncclComm_t)NULL, __ATOMIC_RELEASE);
    ncclResult_t nr = ncclCommSplit(c->nc, color == VS_COLOR_NONE ? NCCL_SPLIT_NOCOLOR : color, key, &c->split_out, &cfg);
    /* Non-blocking, ncclCommSplit answers ncclSuccess while its job still runs
       (NCCL 2.28 returns the setup's result, not the group's ncclInProgress): the
       parent reads ncclInProgress until the job has written split_out, so poll
       the parent whatever the answer (seen on an H200: the child came after the
       return, into a stack slot that was gone). */
    if (nr == ncclSuccess) nr = ncclInProgress;
    r = _vs_nccl_settle(c, c->nc, nr, "vs_comm_split", deadline, NULL);
    if (r) return r;
    ncclComm_t nc = __atomic_load_n(&c->split_out, __ATOMIC_ACQUIRE);
    if (!nc && color != VS_COLOR_NONE)
        return _vs_err(VS_ERR_BACKEND, "vs_comm_split: NCCL made no communicator for color %d", color);
    if (nc) {
        ncclResult_t ar = ncclInProgress;
        while (ar == ncclInProgress) {
            ncclCommGetAsyncError(nc, &ar);
            if (ar == ncclInProgress && _vs_now() > deadline) {
                ncclCommAbort(nc);
                return _vs_err(VS_ERR_TIMEOUT, "vs_comm_split: new communicator timed out");
            }
            if (ar == ncclInProgress) _vs_sleep_us(50);
        }
        if (ar != ncclSuccess) {
            ncclCommAbort(nc);
            return _vs_err_backend(VS_ERR_BACKEND, (int)ar, "vs_comm_split: %s", ncclGetErrorString(ar));
        }
    }
    if (!nc) return VS_OK;
    int rank = 0, size = 0;
    ncclCommUserRank(nc, &rank);
    ncclCommCount(nc, &size);
    vs_comm* o = _vs_comm_new(c->world, VS_TRANSPORT_NCCL, rank, size);
    if (!o) {
        ncclCommAbort(nc);
        return _vs_err(VS_ERR_NOMEM, "vs_comm_split: out of memory");
    }
    o->timeout = c->timeout;
    r = _vs_nccl_comm_setup(o, nc);
    if (r) {
        _vs_comm_destroy(o);
        return r;
    }
    *out = o;
    return VS_OK;
}

_VS_PRIVATE void _vs_nccl_raw_release(vs_comm* c);

_VS_PRIVATE void _vs_nccl_comm_destroy(vs_comm* c)
{
    if (c->ncmu_made) _vs_nccl_raw_release(c); // (freeing c ends an open vs_comm_nccl_begin)
    _vs_wd_unlist(c); // the watchdog no longer looks at c
    for (int i = 0; i < c->nwatch; i++) cudaEventDestroy(c->watch[i].ev);
    c->nwatch = 0;
    if (c->nc && c->world && (c->epoch < c->world->epoch || c->world->self_failed)) // (made before a reconfiguration, or
        ncclCommAbort(c->nc), c->nc = NULL; // this rank failed: its peers may be gone, finalizing would wait for them)
    if (c->nc) {
        ncclResult_t r = ncclCommFinalize(c->nc);
        double deadline = _vs_now() + c->timeout;
        while (r == ncclInProgress && _vs_now() < deadline) {
            _vs_sleep_us(50);
            ncclCommGetAsyncError(c->nc, &r);
        }
        if (r == ncclSuccess)
            ncclCommDestroy(c->nc);
        else
            ncclCommAbort(c->nc);
        c->nc = NULL;
    }
    if (c->revoked_nc) ncclCommAbort(c->revoked_nc), c->revoked_nc = NULL;
    // (cudaFree, through the hooks or not: it takes stream-ordered memory too, and the caller's stream may be gone)
    vs_device_free(c->world, c->vscratch);
    c->vscratch = NULL, c->vscratch_cap = 0;
    vs_device_free(c->world, c->scratch);
    c->scratch = NULL;
    if (c->own_stream) cudaStreamDestroy(c->own);
    if (c->fence) cudaEventDestroy(c->fence);
    for (int i = 0; i < c->nev; i++) cudaEventDestroy(c->evpool[i]);
    _vs_hfree(_VS_WH(c->world), c->evpool);
    c->evpool = NULL, c->nev = c->evcap = 0;
    if (c->ncmu_made) pthread_mutex_destroy(&c->ncmu), c->ncmu_made = 0;
}

_VS_PRIVATE vs_result _vs_nccl_world_comm(vs_world* w, const void* id, int device_select, int cuda_device)
{
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0)
        return _vs_err_backend(VS_ERR_UNAVAILABLE, (int)e, "NCCL transport: no CUDA device (%s)",
                               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    if (device_select == VS_DEVICE_EXPLICIT && (cuda_device < 0 || cuda_device >= ndev))
        return _vs_err(VS_ERR_INVALID, "NCCL transport: cuda_device %d out of range [0, %d)", cuda_device, ndev);
    if (device_select != VS_DEVICE_KEEP) {
        int dev = device_select == VS_DEVICE_EXPLICIT ? cuda_device : w->local_rank % ndev;
        e = cudaSetDevice(dev);
        if (e != cudaSuccess)
            return _vs_err_backend(VS_ERR_BACKEND, (int)e, "cudaSetDevice(%d): %s", dev, cudaGetErrorString(e));
    }
    vs_comm* c = _vs_comm_new(w, VS_TRANSPORT_NCCL, w->rank, w->size);
    if (!c) return _vs_err(VS_ERR_NOMEM, "NCCL transport: out of memory");
    c->kind = _VS_COMM_WORLD;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t nc = NULL;
    ncclUniqueId uid;
    memcpy(&uid, id, sizeof uid);
    ncclResult_t r = ncclCommInitRankConfig(&nc, w->size, uid, w->rank, &cfg);
    c->nc = nc;
    vs_result res = nc ? _vs_nccl_settle(c, nc, r, "ncclCommInitRankConfig", _vs_now() + w->timeout, NULL)
                       : _vs_err_backend(VS_ERR_BACKEND, (int)r, "ncclCommInitRankConfig: %s", ncclGetErrorString(r));
    if (!res) res = _vs_nccl_comm_setup(c, c->nc);
    if (res) {
        c->kind = _VS_COMM_USER;
        _vs_comm_destroy(c);
        return res;
    }
    w->comm = c;
    return VS_OK;
}

/* vs_world_shrink / vs_world_grow on NCCL (a vs_launch job: the agreement is
   the job's, _vs_threads_reform): this rank's new world communicator, rank
   tk->index of tk->n. A shrink whose staying ranks all still hold the world's
   ncclComm_t (revoked by the job's fail-fast, or whole) makes it with
   ncclCommShrink (NCCL_SHRINK_ABORT: it first ends what is still in flight on
   the parent), the ranks not staying excluded; otherwise (a grow, or a parent
   some rank had to abort) a new communicator from the id the agreement made.
   Non-blocking, each wait with the world's deadline. */
_VS_PRIVATE vs_result _vs_nccl_reform(vs_world* w, const _vs_rticket* tk, const char* fn, vs_comm** out)
{
    *out = NULL;
    int ndev = 0;
    if (!w->comm && cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0) // a replacement: its GPU first
        cudaSetDevice(w->local_rank % ndev);
    vs_comm* c = _vs_comm_new(w, VS_TRANSPORT_NCCL, tk->index, tk->n);
    if (!c) return _vs_err(VS_ERR_NOMEM, "%s: out of memory", fn);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    double deadline = _vs_now() + w->timeout;
    ncclComm_t nc = NULL;
    ncclResult_t nr = ncclSuccess;
    const char* call = "ncclCommInitRankConfig";
    vs_comm* old = w->comm;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
    if (tk->use_shrink && old) {
        call = "ncclCommShrink";
        int* excl = _VS_HNEW(&w->hooks, int, old->size);
        if (!excl) {
            _vs_comm_destroy(c);
            return _vs_err(VS_ERR_NOMEM, "%s: out of memory", fn);
        }
        int ne = 0;
        for (int i = 0; i < old->size; i++) {
            int wr = w->wranks ? w->wranks[i] : i, in = 0;
            for (int j = 0; j < tk->n && !in; j++) in = tk->members[j] == wr;
            if (!in) excl[ne++] = i;
        }
        /* revoked first (every survivor: a revoke is local), and quiet: a shrink
           does not get past an error the parent still reports */
        if (old->nc) ncclCommRevoke(old->nc, NCCL_REVOKE_DEFAULT), old->revoked_nc = old->nc, old->nc = NULL;
        ncclComm_t parent = old->revoked_nc;
        nr = ncclInProgress;
        while (nr == ncclInProgress && _vs_now() < deadline)
            if (ncclCommGetAsyncError(parent, &nr) != ncclSuccess || nr == ncclInProgress) _vs_sleep_us(50);
        __atomic_store_n(&old->split_out, (ncclComm_t)NULL, __ATOMIC_RELEASE);
        if (nr == ncclSuccess) nr = ncclCommShrink(parent, excl, ne, &old->split_out, &cfg, NCCL_SHRINK_ABORT);
        _vs_hfree(&w->hooks, excl);
        /* non-blocking, as ncclCommSplit: the parent reads ncclInProgress until
           NCCL's job has written the child, which then settles on its own */
        if (nr == ncclSuccess) nr = ncclInProgress;
        while (nr == ncclInProgress && _vs_now() < deadline)
            if (ncclCommGetAsyncError(parent, &nr) != ncclSuccess || nr == ncclInProgress) _vs_sleep_us(50);
        nc = nr == ncclSuccess ? __atomic_load_n(&old->split_out, __ATOMIC_ACQUIRE) : NULL;
        if (nc) nr = ncclInProgress;
        while (nc && nr == ncclInProgress && _vs_now() < deadline)
            if (ncclCommGetAsyncError(nc, &nr) != ncclSuccess || nr == ncclInProgress) _vs_sleep_us(50);
    } else
#endif
    {
        ncclUniqueId id;
        memcpy(&id, tk->id, sizeof id);
        nr = ncclCommInitRankConfig(&nc, tk->n, id, tk->index, &cfg);
        while (nr == ncclInProgress && nc && _vs_now() < deadline) {
            _vs_sleep_us(50);
            ncclCommGetAsyncError(nc, &nr);
        }
    }
    vs_result r = VS_OK;
    if (nr == ncclInProgress)
        r = _vs_err(VS_ERR_TIMEOUT, "%s: %s of a %d-rank world did not complete within %g s", fn, call, tk->n, w->timeout);
    else if (nr != ncclSuccess || !nc)
        r = _vs_err_backend(VS_ERR_BACKEND, (int)nr, "%s: %s: %s", fn, call, ncclGetErrorString(nr));
    if (!r) r = _vs_nccl_comm_setup(c, nc);
    else if (nc) ncclCommAbort(nc);
    if (r) {
        _vs_comm_destroy(c);
        return r;
    }
    *out = c;
    return VS_OK;
}

#endif // VESCALE_NCCL

// >>transports ----------------------------------------------------------------
/* One table per transport (see struct _vs_transport_ops). The threads transport is
   the reference: the others match what a caller can observe of it. */

/* The cause a bare vs_comm_abort (cause NULL) gives a vs_launch job, on threads
   and NCCL: "rank 1 (world 3) called vs_comm_abort on ..."; returns the caller's
   world rank (its origin). */
_VS_PRIVATE int _vs_abort_cause(const vs_comm* c, char* msg, size_t cap)
{
    int me = c->world ? c->world->rank : c->sh->granks[c->rank];
    _vs_fmt(msg, cap, "rank %d (world %d) called vs_comm_abort on %s", c->rank, me, c->label);
    return me;
}

/* The job's cause, when first, aborts every communicator of the job with it. */
_VS_PRIVATE void _vs_t_abort(vs_comm* c, vs_result why, int origin, const char* cause)
{
    char msg[300];
    if (!cause) origin = _vs_abort_cause(c, msg, sizeof msg), cause = msg, why = VS_ERR_ABORTED;
    _vs_job_fail(c->sh->job, c->sh, why, origin, cause);
}

_VS_PRIVATE void _vs_t_destroy(vs_comm* c)
{
    if (c->sh) _vs_tshared_unref(c->sh);
}

static const _vs_transport_ops _vs_threads_ops = {
    .id = VS_TRANSPORT_THREADS,
    .submit = _vs_submit_host,
    .exec = _vs_t_exec,
    .wait = _vs_work_wait_host,
    .test = _vs_work_test_host,
    .detach = NULL, // the queue drained
    .split = NULL,  // an op
    .abort = _vs_t_abort,
    .destroy = _vs_t_destroy,
    .set_stream = NULL, // no streams
    .stream = NULL,
    .world_free = NULL,
    .world_abort = NULL,
    .work_release = NULL,
    .wait_stream = NULL, // vs_wait
    .sync_stream = NULL,
    .shm = 1,
    .device = 0,
    .handle = NULL, // no raw handle
    .raw_begin = NULL,
    .raw_end = NULL,
    .aborted_error = NULL,
    .world_init = NULL, // vs_launch makes the worlds
    .reform = _vs_threads_reform, // the vs_launch job's agreement, in its memory
    .quiesce = NULL,
    .joins = 0,
};

#ifdef VESCALE_MPI
_VS_PRIVATE void _vs_mpi_destroy(vs_comm* c)
{
    _vs_mpi_comm_release(c->world, &c->mc); // (after the requests a fault left on it)
}

_VS_PRIVATE void* _vs_mpi_handle(const vs_comm* c) { return (void*)&c->mc; }

/* The world's abort names the origin; it is marked just after the communicator
   (_vs_mpi_fault): a moment for it, under load. */
_VS_PRIVATE vs_result _vs_mpi_aborted_error(vs_comm* c, const char* what)
{
    vs_world* mw = c->world;
    for (double until = _vs_now() + 0.1; mw && mw->mmu_made && !_vs_mpi_aborted(mw) && _vs_now() < until;)
        _vs_sleep_us(1000);
    if (mw && mw->mmu_made && __atomic_load_n(&mw->ab_state, __ATOMIC_ACQUIRE))
        return _vs_err_from(mw->ab_rank, mw->ab_text ? mw->ab_text : "", VS_ERR_ABORTED,
                            "%s: communicator was aborted: %s", what, mw->ab_text ? mw->ab_text : "");
    return VS_OK;
}

_VS_PRIVATE vs_result _vs_mpi_world_init(vs_world* w, const vs_world_desc* d, const vs_bootstrap_info* bi); // >>bootstrap
#ifdef MPIX_ERR_PROC_FAILED
_VS_PRIVATE vs_result _vs_mpi_reform(vs_world* w, int kind, _vs_keep_fn keep, void* ctx, vs_reform_info* info,
                                     const char* fn); // >>elastic
#endif

/* MPI survives a rank only with ULFM, in a job run with it. */
_VS_PRIVATE vs_result _vs_mpi_world_reform(vs_world* w, int kind, _vs_keep_fn keep, void* ctx, vs_reform_info* info,
                                           const char* fn)
{
#ifdef MPIX_ERR_PROC_FAILED
    if (w->mft) return _vs_mpi_reform(w, kind, keep, ctx, info, fn);
    const char* why = "this MPI has ULFM, but the job does not run with it (Open MPI: mpirun --with-ft ulfm; "
                      "MPICH: MPIR_CVAR_ENABLE_FT=1)";
#else
    (void)w, (void)kind, (void)keep, (void)ctx, (void)info;
    const char* why = "this build's MPI has no ULFM (MPIX_Comm_agree, MPIX_Comm_shrink: Open MPI 5 or MPICH "
                      "built with it)";
#endif
    return _vs_err(VS_ERR_UNSUPPORTED, "%s: the MPI transport cannot survive a rank: %s; the job ends on a "
                   "failure: resume it from a checkpoint on the ranks left (vs_train_load reshards)", fn, why);
}

static const _vs_transport_ops _vs_mpi_ops = {
    .id = VS_TRANSPORT_MPI,
    .submit = _vs_submit_host,
    .exec = _vs_mpi_exec,
    .wait = _vs_work_wait_host,
    .test = _vs_work_test_host,
    .detach = NULL,
    .split = NULL,
    .abort = _vs_mpi_comm_abort, // notifies every rank of the world
    .destroy = _vs_mpi_destroy,
    .set_stream = NULL,
    .stream = NULL,
    .world_free = _vs_mpi_world_fini,
    .world_abort = _vs_mpi_world_abort,
    .work_release = NULL,
    .wait_stream = NULL,
    .sync_stream = NULL,
    .shm = 0,
    .device = 0,
    .handle = _vs_mpi_handle,
    .raw_begin = NULL,
    .raw_end = NULL,
    .aborted_error = _vs_mpi_aborted_error,
    .world_init = _vs_mpi_world_init,
    .reform = _vs_mpi_world_reform,
    .quiesce = NULL,
    .joins = 0,
};
#endif

#ifdef VESCALE_NCCL
_VS_PRIVATE vs_result _vs_nccl_test(vs_work* w, int* done)
{
    cudaError_t e = cudaEventQuery(w->ev);
    *done = e == cudaSuccess;
    if (e != cudaSuccess && e != cudaErrorNotReady)
        return _vs_err_backend(VS_ERR_BACKEND, (int)e, "vs_test: %s", cudaGetErrorString(e));
    vs_comm* c = w->comm;
    if (!*done && c) _VS_TRY(_vs_nccl_job_check(c, "vs_test"));
    ncclResult_t ar = ncclSuccess;
    if (!*done && c && c->nc) ncclCommGetAsyncError(c->nc, &ar); // (a failed peer shows here too, not at vs_wait only)
    if (ar != ncclSuccess && ar != ncclInProgress)
        return _vs_nccl_abort(c, VS_ERR_BACKEND, (int)ar, "vs_test", ncclGetErrorString(ar));
    return VS_OK;
}

/* Freeing a communicator completes its unwaited work as vs_wait would: with the
   deadline and the async-error watch (a hung peer aborts the communicator;
   cudaEventSynchronize here never returned). */
_VS_PRIVATE void _vs_nccl_detach(vs_work* w)
{
    vs_result r = w->ev && w->comm ? _vs_nccl_sync(w->comm, w->ev, "vs_comm_free: unwaited work", w->ekind, w->opseq) : VS_OK;
    w->res = r;
    if (r) _vs_fmt(w->err, sizeof w->err, "%s", vs_last_error());
}

_VS_PRIVATE void _vs_nccl_abort_comm(vs_comm* c, vs_result why, int origin, const char* cause)
{
    /* any thread: c->aborted is set; when c's thread is in an NCCL call on it
       (ncmu), that call aborts it at its next poll (_vs_nccl_wd_check, the
       waits), not this thread beside it */
    if (!c->ncmu_made || pthread_mutex_trylock(&c->ncmu) == 0) {
        if (c->nc) ncclCommAbort(c->nc), c->nc = NULL;
        if (c->ncmu_made) pthread_mutex_unlock(&c->ncmu);
    }
    /* ncclCommAbort tells no peer; in a vs_launch job the job does (_vs_nccl_job_check) */
    _vs_tjob* job = c->world ? c->world->job : NULL;
    if (!job) return;
    // (a communicator from before a reconfiguration: what it left unfinished is not the new world's failure)
    if (c->epoch < __atomic_load_n(&c->world->epoch, __ATOMIC_ACQUIRE)) return;
    char msg[300];
    if (!cause) origin = _vs_abort_cause(c, msg, sizeof msg), cause = msg, why = VS_ERR_ABORTED;
    _vs_job_fail(job, NULL, why, origin, cause);
}

/* >>elastic: c belongs to a mesh a failure is replacing: its operations still in
   flight (waiting for a dead peer) stop here, on this rank, so the streams
   waiting for them go on; no peer is told (a vs_mesh_shrink: they all do it). */
_VS_PRIVATE void _vs_nccl_drop(vs_comm* c)
{
    if (c->tr != VS_TRANSPORT_NCCL) return;
    __atomic_store_n(&c->aborted, 1, __ATOMIC_SEQ_CST);
    if (c->ncmu_made) pthread_mutex_lock(&c->ncmu); // (not beside the watchdog)
    if (c->nc) ncclCommAbort(c->nc), c->nc = NULL;
    if (c->ncmu_made) pthread_mutex_unlock(&c->ncmu);
    _vs_wd_unlist(c); // (its work will never finish: the watchdog would end the next epoch's job for it)
}

/* _vs_nccl_drop for every communicator of w with stream-ordered work watched
   (the pipeline's links, DDP's, TP's: whoever made them), but the world's own
   (a shrink revokes it): their work waiting on a dead peer would keep the
   streams, and with them the world's communicator, from ever coming quiet. */
_VS_PRIVATE void _vs_nccl_drop_watched(vs_world* w)
{
    int n;
    do {
        vs_comm* l[64];
        n = 0;
        if (!w->wd_on) return;
        pthread_mutex_lock(&w->wdmu);
        for (vs_comm* c = w->wd_comms; c && n < 64; c = c->wd_next)
            if (c != w->comm) l[n++] = c;
        pthread_mutex_unlock(&w->wdmu);
        for (int i = 0; i < n; i++) _vs_nccl_drop(l[i]); // (each leaves the list)
    } while (n == 64);
}

/* The table's quiesce: on a failure to recover from (else the agreement's error,
   and the mesh stays whole), a failing mesh's communicators' operations in
   flight stop first, so the streams behind them go on and the world's
   communicator can come quiet for its shrink. */
_VS_PRIVATE void _vs_nccl_quiesce(vs_world* w, vs_comm* const* comms, int n)
{
    _vs_tjob* job = w->job;
    if (!job && w->elastic_dir[0])
        for (int i = 0; i < n; i++) // (a job of processes: a submesh's failure is one this rank saw)
            w->esaw |= comms[i] && __atomic_load_n(&comms[i]->aborted, __ATOMIC_ACQUIRE);
    if ((job && __atomic_load_n(&job->failed, __ATOMIC_ACQUIRE)) ||
        (!job && w->elastic_dir[0] &&
         (w->esaw || _vs_store_poll(w, 1) || (w->comm && __atomic_load_n(&w->comm->aborted, __ATOMIC_ACQUIRE))))) {
        for (int i = 0; i < n; i++)
            if (comms[i]) _vs_nccl_drop(comms[i]);
        _vs_nccl_drop_watched(w); // (and the others of this world with work in flight: a pipeline's links)
    }
}

/* NULL gives back the communicator's own stream; the caller's is never destroyed here. */
_VS_PRIVATE vs_result _vs_nccl_set_stream(vs_comm* c, void* stream)
{
    cudaStream_t to = stream ? (cudaStream_t)stream : c->own;
    // what c enqueued on the stream it leaves happens before its work on the next, so its stream-ordered
    // scratch (_vs_nccl_salloc) is freed or reused there only after its last users
    cudaError_t e = to == c->stream || !c->fence ? cudaSuccess : cudaEventRecord(c->fence, c->stream);
    if (e == cudaSuccess && to != c->stream && c->fence) e = cudaStreamWaitEvent(to, c->fence, 0);
    if (e != cudaSuccess)
        return _vs_err_backend(VS_ERR_BACKEND, (int)e, "vs_comm_set_stream: ordering the new stream after the old: %s",
                               cudaGetErrorString(e));
    c->stream = to;
    return VS_OK;
}

_VS_PRIVATE void* _vs_nccl_stream(const vs_comm* c) { return (void*)c->stream; }

_VS_PRIVATE void _vs_nccl_work_release(vs_work* w)
{
    if (w->ev && w->comm)
        _vs_nccl_event_put(w->comm, w->ev);
    else if (w->ev)
        cudaEventDestroy(w->ev);
    w->ev = NULL;
}

/* A world whose NCCL id came over MPI finalizes the MPI it started. */
_VS_PRIVATE vs_result _vs_nccl_world_free(vs_world* w)
{
#ifdef VESCALE_MPI
    if (w->mpi_finalize) return _vs_mpi_world_fini(w);
#else
    (void)w;
#endif
    return VS_OK;
}

/* The trainer's own NCCL calls (vs_comm_nccl_begin / _end) hold ncmu from begin
   to end, as the table's calls do: the watchdog and another thread's
   vs_comm_abort leave c alone meanwhile, and a fault known is reported first. */
_VS_PRIVATE vs_result _vs_nccl_raw_begin(vs_comm* c, void** out)
{
    const char* what = "vs_comm_nccl_begin";
    if (c->raw_held) return _vs_err(VS_ERR_STATE, "%s: already begun on %s (vs_comm_nccl_end first)", what, c->label);
    pthread_mutex_lock(&c->ncmu);
    vs_result r = _vs_nccl_wd_check(c, what);
    if (!r) r = _vs_nccl_job_check(c, what);
    if (!r && !c->nc) r = _vs_err(VS_ERR_ABORTED, "%s: the NCCL communicator of %s was aborted", what, c->label);
    ncclResult_t ar = ncclSuccess;
    if (!r) ncclCommGetAsyncError(c->nc, &ar);
    if (ar != ncclSuccess && ar != ncclInProgress)
        r = _vs_nccl_abort(c, VS_ERR_BACKEND, (int)ar, what, ncclGetErrorString(ar));
    if (r) {
        pthread_mutex_unlock(&c->ncmu);
        return r;
    }
    c->raw_held = 1;
    *out = (void*)c->nc;
    return VS_OK;
}

_VS_PRIVATE void _vs_nccl_raw_release(vs_comm* c)
{
    if (!c->raw_held) return;
    c->raw_held = 0;
    pthread_mutex_unlock(&c->ncmu);
}

/* Until NCCL has taken the trainer's calls (ncclInProgress on a non-blocking
   communicator), with c's deadline; an abort asked for meanwhile happens here. */
_VS_PRIVATE vs_result _vs_nccl_raw_end(vs_comm* c)
{
    const char* what = "vs_comm_nccl_end";
    if (!c->raw_held) return _vs_err(VS_ERR_STATE, "%s: no vs_comm_nccl_begin is open on %s", what, c->label);
    vs_result r = VS_OK;
    if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) {
        if (c->nc) ncclCommAbort(c->nc), c->nc = NULL;
        r = _vs_err(VS_ERR_ABORTED, "%s: %s was aborted (vs_comm_abort) while the trainer's NCCL calls were issued",
                    what, c->label);
    } else if (c->nc) {
        ncclResult_t ar = ncclSuccess;
        ncclCommGetAsyncError(c->nc, &ar);
        r = _vs_nccl_settle(c, c->nc, ar, what, _vs_now() + c->timeout, NULL);
    } else {
        r = _vs_err(VS_ERR_ABORTED, "%s: the NCCL communicator of %s was aborted", what, c->label);
    }
    _vs_nccl_raw_release(c);
    return r;
}

/* The ncclComm_t, read under ncmu (the watchdog may be aborting it), or NULL. */
_VS_PRIVATE void* _vs_nccl_handle(const vs_comm* cc)
{
    vs_comm* c = (vs_comm*)cc; // (the lock only: nothing of c changes)
    if (c->raw_held) return (void*)c->nc; // (this thread holds ncmu)
    pthread_mutex_lock(&c->ncmu);
    void* nc = (void*)c->nc;
    pthread_mutex_unlock(&c->ncmu);
    if (!nc) _vs_err(VS_ERR_ABORTED, "vs_comm_nccl: the NCCL communicator of %s was aborted", c->label);
    return nc;
}

/* The table's calls into NCCL hold the communicator's ncmu, so its watchdog
   (and another thread's vs_comm_abort) never call NCCL beside them; not
   between vs_comm_nccl_begin and _end (the trainer's calls hold it). */
#define _VS_NCCL_LOCKED(c, call)                                                                                      \
    vs_result _r;                                                                                                     \
    if ((c)->raw_held)                                                                                                \
        return _vs_err(VS_ERR_STATE, "a vescale call on %s between vs_comm_nccl_begin and vs_comm_nccl_end (end "     \
                       "the trainer's NCCL calls first)", (c)->label);                                                \
    pthread_mutex_lock(&(c)->ncmu);                                                                                   \
    _r = (call);                                                                                                      \
    pthread_mutex_unlock(&(c)->ncmu);                                                                                 \
    return _r

_VS_PRIVATE vs_result _vs_nccl_submit_l(vs_comm* c, _vs_opdesc* ops, int nops, vs_work** out)
{
    _VS_NCCL_LOCKED(c, _vs_nccl_submit(c, ops, nops, out));
}
_VS_PRIVATE vs_result _vs_nccl_wait_l(vs_work* w) { _VS_NCCL_LOCKED(w->comm, _vs_nccl_wait(w)); }
_VS_PRIVATE vs_result _vs_nccl_test_l(vs_work* w, int* done) { _VS_NCCL_LOCKED(w->comm, _vs_nccl_test(w, done)); }
_VS_PRIVATE vs_result _vs_nccl_wait_stream_l(vs_work* w, void* stream)
{
    _VS_NCCL_LOCKED(w->comm, _vs_nccl_wait_stream(w, stream));
}
/* vs_sync_stream: an event recorded on the stream, polled with c's deadline
   and fault watch (_vs_nccl_sync). */
_VS_PRIVATE vs_result _vs_nccl_sync_stream(vs_comm* c, void* stream)
{
    const char* what = "vs_sync_stream";
    cudaStream_t st = stream ? (cudaStream_t)stream : _vs_nccl_caller(c);
    cudaEvent_t ev = NULL;
    cudaError_t e = _vs_nccl_event_get(c, &ev);
    if (e == cudaSuccess) e = cudaEventRecord(ev, st);
    if (e != cudaSuccess) {
        if (ev) _vs_nccl_event_put(c, ev);
        return _vs_err_backend(VS_ERR_BACKEND, (int)e, "%s: %s", what, cudaGetErrorString(e));
    }
    vs_result r = _vs_nccl_sync(c, ev, what, 0, 0);
    _vs_nccl_event_put(c, ev);
    return r;
}
_VS_PRIVATE vs_result _vs_nccl_sync_stream_l(vs_comm* c, void* stream)
{
    _VS_NCCL_LOCKED(c, _vs_nccl_sync_stream(c, stream));
}
_VS_PRIVATE vs_result _vs_nccl_split_l(vs_comm* c, int color, int key, vs_comm** out)
{
    _VS_NCCL_LOCKED(c, _vs_nccl_split(c, color, key, out));
}
_VS_PRIVATE void _vs_nccl_detach_l(vs_work* w)
{
    vs_comm* c = w->comm;
    if (c) _vs_nccl_raw_release(c); // (vs_comm_free ends an open vs_comm_nccl_begin)
    if (c) pthread_mutex_lock(&c->ncmu);
    _vs_nccl_detach(w);
    if (c) pthread_mutex_unlock(&c->ncmu);
}

_VS_PRIVATE vs_result _vs_nccl_world_init(vs_world* w, const vs_world_desc* d, const vs_bootstrap_info* bi); // >>bootstrap
_VS_PRIVATE vs_result _vs_store_reform(vs_world* w, int kind, _vs_keep_fn keep, void* ctx, vs_reform_info* info,
                                       const char* fn); // >>elastic

/* A vs_launch job's agreement (its memory), else an NCCL job of processes'
   (its store, when it has one). */
_VS_PRIVATE vs_result _vs_nccl_world_reform(vs_world* w, int kind, _vs_keep_fn keep, void* ctx, vs_reform_info* info,
                                            const char* fn)
{
    if (w->job) return _vs_threads_reform(w, kind, keep, ctx, info, fn);
    if (w->elastic_dir[0]) return _vs_store_reform(w, kind, keep, ctx, info, fn);
    return _vs_err(VS_ERR_UNSUPPORTED, "%s: this %s job of processes has no elastic directory for its survivors' "
                   "agreement: give every rank one they all see (vs_world_desc.elastic_dir or VESCALE_ELASTIC_DIR); "
                   "else resume from a checkpoint on the ranks left", fn, vs_transport_name(w->tr));
}

static const _vs_transport_ops _vs_nccl_ops = {
    .id = VS_TRANSPORT_NCCL,
    .submit = _vs_nccl_submit_l,
    .exec = NULL,
    .wait = _vs_nccl_wait_l,
    .test = _vs_nccl_test_l,
    .detach = _vs_nccl_detach_l,
    .split = _vs_nccl_split_l,
    .abort = _vs_nccl_abort_comm,
    .destroy = _vs_nccl_comm_destroy,
    .set_stream = _vs_nccl_set_stream,
    .stream = _vs_nccl_stream,
    .world_free = _vs_nccl_world_free,
    .world_abort = NULL,
    .work_release = _vs_nccl_work_release,
    .wait_stream = _vs_nccl_wait_stream_l,
    .sync_stream = _vs_nccl_sync_stream_l,
    .shm = 0,
    .device = 1,
    .handle = _vs_nccl_handle,
    .raw_begin = _vs_nccl_raw_begin,
    .raw_end = _vs_nccl_raw_end,
    .aborted_error = NULL,
    .world_init = _vs_nccl_world_init,
    .reform = _vs_nccl_world_reform,
    .quiesce = _vs_nccl_quiesce,
    .joins = 1, // with a store (vs_world_desc.elastic_dir)
};
#endif

_VS_PRIVATE const _vs_transport_ops* _vs_transport_of(vs_transport tr)
{
    switch (tr) {
    case VS_TRANSPORT_THREADS: return &_vs_threads_ops;
#ifdef VESCALE_MPI
    case VS_TRANSPORT_MPI: return &_vs_mpi_ops;
#endif
#ifdef VESCALE_NCCL
    case VS_TRANSPORT_NCCL: return &_vs_nccl_ops;
#endif
    default: return NULL;
    }
}

// >>bootstrap -----------------------------------------------------------------
// (the world's getters, logging, allocation, free)

#define _VS_WORLD_GET(fn, w, bad) \
    if (!(w)) return _vs_err(VS_ERR_NULL, fn ": world is NULL"), (bad)
VS_API int vs_world_rank(const vs_world* w)
{
    _VS_WORLD_GET("vs_world_rank", w, VS_ERR_NULL);
    return w->rank;
}
VS_API int vs_world_size(const vs_world* w)
{
    _VS_WORLD_GET("vs_world_size", w, VS_ERR_NULL);
    return w->size;
}
VS_API int vs_world_local_rank(const vs_world* w)
{
    _VS_WORLD_GET("vs_world_local_rank", w, VS_ERR_NULL);
    return w->local_rank;
}
VS_API vs_transport vs_world_transport(const vs_world* w)
{
    _VS_WORLD_GET("vs_world_transport", w, VS_TRANSPORT_DEFAULT);
    return w->tr;
}
VS_API vs_comm* vs_world_comm(vs_world* w)
{
    _VS_WORLD_GET("vs_world_comm", w, (vs_comm*)NULL);
    return w->comm;
}
VS_API double vs_world_timeout(const vs_world* w)
{
    _VS_WORLD_GET("vs_world_timeout", w, (double)NAN);
    return w->timeout;
}
#undef _VS_WORLD_GET

VS_API void vs_log(const vs_world* w, vs_log_level level, const char* fmt, ...)
{
    if (!w || !fmt) return;
    va_list ap;
    va_start(ap, fmt);
    _vs_vlog(&w->hooks, w->rank, level, fmt, ap);
    va_end(ap);
}

/* An error returned to the caller: logged at warn (a consequence of another
   rank's failure: at info) through this thread's world, or, on a thread without
   one (before a world exists), to stderr when VESCALE_LOG asks. */
_VS_PRIVATE void _vs_log_error(const vs_world* w, vs_result code, const char* msg, int consequence)
{
    vs_log_level lv = consequence ? VS_LOG_INFO : VS_LOG_WARN;
    if (w) {
        if (w->hooks.level >= lv && w->hooks.log_returns) vs_log(w, lv, "%s: %s", vs_result_string(code), msg);
        return;
    }
    const char* e = getenv("VESCALE_LOG"); // (not parsed: a bad value is reported where it is read)
    int env = VS_LOG_OFF;
    for (int l = VS_LOG_OFF; e && l <= VS_LOG_DEBUG; l++)
        if (!strcmp(e, _vs_level_names[l]) || (e[0] == '0' + l && !e[1])) env = l;
    if (env >= (int)lv) fprintf(stderr, "vescale %s: %s: %s\n", _vs_level_names[lv], vs_result_string(code), msg);
}

/* Errors raised on this thread are logged through w (NULL: none). */
_VS_PRIVATE void _vs_err_world(const vs_world* w) { _vs_err_tls()->world = w; }

VS_API void* vs_alloc(const vs_world* w, size_t size)
{
    void* p = _vs_halloc(w ? &w->hooks : NULL, size);
    if (!p) _vs_err(VS_ERR_NOMEM, "vs_alloc: out of memory for %zu bytes", size);
    return p;
}
VS_API void vs_free(const vs_world* w, void* ptr) { _vs_hfree(w ? &w->hooks : NULL, ptr); }
VS_API void vs_free_later(const vs_world* cw, void* ptr)
{
    if (!cw || !ptr) {
        vs_free(cw, ptr);
        return;
    }
    vs_world* w = (vs_world*)cw; // (const as vs_free's: the caller's handle keeps a const world)
    int slot = w->ndead_h;
    w->ndead_h = (slot + 1) % _VS_QUARANTINE;
    _vs_hfree(&w->hooks, w->dead_h[slot]);
    w->dead_h[slot] = ptr;
}

VS_API void* vs_device_alloc(const vs_world* w, size_t size)
{
    if (w && w->hooks.alloc.device_alloc) return w->hooks.alloc.device_alloc(size, w->hooks.alloc.user);
#ifdef VESCALE_NCCL
    void* p = NULL;
    if (cudaMalloc(&p, size ? size : 1) != cudaSuccess) return NULL;
    return p;
#else
    (void)size;
    _vs_err(VS_ERR_UNAVAILABLE, "vs_device_alloc: built without VESCALE_NCCL (no CUDA)");
    return NULL;
#endif
}

VS_API vs_result vs_device_check(const char* fn, const char* which, const void* p)
{
#ifdef VESCALE_NCCL
    return _vs_nccl_check_buf(fn ? fn : "vs_device_check", which ? which : "a buffer", p);
#else
    (void)fn, (void)which, (void)p;
    return VS_OK;
#endif
}

VS_API void vs_device_free(const vs_world* w, void* ptr)
{
    if (!ptr) return;
    if (w && w->hooks.alloc.device_free) {
        w->hooks.alloc.device_free(ptr, w->hooks.alloc.user);
        return;
    }
#ifdef VESCALE_NCCL
    cudaFree(ptr);
#endif
}

_VS_PRIVATE vs_world* _vs_world_new(vs_transport tr, int rank, int size, int local_rank,
                                    double timeout, const vs_logger* lg, vs_log_level lv,
                                    const vs_allocator* al)
{
    _vs_hooks h;
    _vs_hooks_init(&h, lg, lv, al);
    vs_world* w = _VS_HNEW(&h, vs_world, 1);
    if (!w) return NULL;
    w->tr = tr;
    w->rank = rank;
    w->size = size;
    w->local_rank = local_rank;
    w->timeout = timeout; // resolved by _vs_resolve_timeout
    w->hooks = h;
    return w;
}


/* Keeps the resolved desc, with this rank's final numbers (MPI's may win). */
_VS_PRIVATE void _vs_world_keep_desc(vs_world* w, const vs_world_desc* d)
{
    w->desc = *d;
    w->desc.transport = w->tr;
    w->desc.world_size = w->size;
    w->desc.rank = w->rank;
    w->desc.local_rank = w->local_rank;
    w->desc.timeout_s = w->timeout;
    w->desc.log_level = w->hooks.level;
    snprintf(w->master, sizeof w->master, "%s", d->master_addr ? d->master_addr : "");
    w->desc.master_addr = w->master;
    snprintf(w->init_file, sizeof w->init_file, "%s", d->init_file ? d->init_file : "");
    w->desc.init_file = d->init_file ? w->init_file : NULL;
    w->desc.elastic_dir = w->elastic_dir[0] ? w->elastic_dir : NULL;
    w->desc.join = w->elastic_dir[0] ? w->desc.join : 0;
    w->desc.elastic_token = NULL; // (the secret is not read back)
    w->debug_modes = 0;
    if (vs_debug_modes(d->debug ? d->debug : "", &w->debug_modes)) w->debug_modes = 0; // (vs_launch's: DDP reports it)
    _vs_debug_names_of(w->debug_modes, w->debug, sizeof w->debug);
    w->desc.debug = w->debug;
}

VS_API vs_result vs_world_query_desc(const vs_world* w, vs_world_desc* out)
{
    _VS_CHECK_NULL(w, "world");
    _VS_CHECK_NULL(out, "out");
    *out = w->desc;
    return VS_OK;
}

/* The world's communicator joins the retired ones (>>elastic: a reconfiguration
   replaced it; meshes made on it may still use it until they are freed). */
_VS_PRIVATE void _vs_store_close(vs_world* w);

_VS_PRIVATE void _vs_world_retire_comm(vs_world* w)
{
    if (!w->comm) return;
#ifdef VESCALE_NCCL
    if (w->comm->nc) w->comm->revoked_nc = w->comm->nc, w->comm->nc = NULL; // (aborted when freed: its peers are gone)
    _vs_wd_unlist(w->comm); // (what it left in flight is not the new world's failure)
#endif
    w->comm->rnext = w->retired;
    w->retired = w->comm;
    w->comm = NULL;
}

VS_API vs_result vs_world_free(vs_world* w)
{
    if (!w) return VS_OK;
    if (_vs_err_tls()->world == w) _vs_err_world(NULL);
    if (w->kcache_free) w->kcache_free(w);
    for (int i = 0; i < _VS_QUARANTINE; i++) _vs_hfree(&w->hooks, w->dead[i]), _vs_hfree(&w->hooks, w->dead_h[i]);
    _vs_world_retire_comm(w);
    while (w->retired) {
        vs_comm* c = w->retired;
        w->retired = c->rnext;
        c->kind = _VS_COMM_USER;
        _vs_comm_destroy(c);
    }
    _vs_hfree(&w->hooks, w->wranks);
#ifdef VESCALE_NCCL
    _vs_wd_stop(w); // (every communicator has left it)
#endif
    if (w->elastic_dir[0]) _vs_store_close(w);
    vs_result r = VS_OK;
    const _vs_transport_ops* t = _vs_transport_of(w->tr);
    if (t && t->world_free) r = t->world_free(w); // MPI: see vs_world_abort
    _vs_hooks h = w->hooks; // the world goes, its allocator stays
    _vs_hfree(&h, w);
    return r;
}

// (vs_world_abort: its MPI part above)


_VS_PRIVATE void _vs_store_notice(vs_world* w, int origin, const char* cause, int failed);

VS_API vs_result vs_world_abort(vs_world* w, vs_result why)
{
    _VS_CHECK_NULL(w, "world");
    const _vs_transport_ops* t = _vs_transport_of(w->tr);
    if (t && t->world_abort) return t->world_abort(w, why);
    const _vs_errstate* es = _vs_err_tls();
    if (w->elastic_dir[0] && w->comm && !(es->origin && es->origin - 1 != w->rank)) {
        /* an NCCL job of processes with a store (>>elastic): the others learn
           of it there, as a vs_launch job's ranks do from the job */
        char cause[_VS_ERR_MSG];
        _vs_fmt(cause, sizeof cause, "world rank %d failed (%s)%s%s", w->rank, vs_result_string(why < 0 ? why : VS_ERR_ABORTED),
                es->msg[0] ? ": " : "", es->msg);
        _vs_store_notice(w, w->rank, cause, 1);
        __atomic_store_n(&w->self_failed, 1, __ATOMIC_RELEASE); // (its peers drop what they share with it: waits end)
    }
    if (w->comm) { // this rank's fault, its last error, is the cause
        if (why < 0)
            vs_comm_abort_with(w->comm, why, NULL);
        else
            vs_comm_abort(w->comm);
    }
    return VS_OK;
}



/* Parses a whole decimal int from the environment; *found = 0 when unset. */
_VS_PRIVATE vs_result _vs_env_int(const char* name, int* out, int* found)
{
    const char* e = getenv(name);
    *found = 0;
    if (!e || !*e) return VS_OK;
    char* end = NULL;
    errno = 0;
    long v = strtol(e, &end, 10);
    if (errno || *end || v < INT_MIN || v > INT_MAX)
        return _vs_err(VS_ERR_INVALID, "environment: %s='%s' is not an integer", name, e);
    *out = (int)v;
    *found = 1;
    return VS_OK;
}

/* MASTER_ADDR and MASTER_PORT (defaults 127.0.0.1:29500), checked: the one reader
   of both, for the environment's ranks and for explicit ones alike. */
_VS_PRIVATE vs_result _vs_env_master(vs_bootstrap_info* out)
{
    const char* addr = getenv("MASTER_ADDR");
    if (addr && strlen(addr) >= sizeof out->master_addr)
        return _vs_err(VS_ERR_INVALID, "environment: MASTER_ADDR is longer than %zu bytes", sizeof out->master_addr - 1);
    snprintf(out->master_addr, sizeof out->master_addr, "%s", addr ? addr : "127.0.0.1");
    int port = 0, fp;
    _VS_TRY(_vs_env_int("MASTER_PORT", &port, &fp));
    if (fp && (port < 1 || port > 65535))
        return _vs_err(VS_ERR_INVALID, "environment: MASTER_PORT=%d out of range [1, 65535]", port);
    out->master_port = fp ? port : 29500;
    return VS_OK;
}

VS_API vs_result vs_bootstrap_from_env(vs_bootstrap_info* out)
{
    _VS_CHECK_NULL(out, "out");
    static const char* const sets[3][4] = {
        {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
        {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
        {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"}};
    memset(out, 0, sizeof *out);
    out->world_size = 1;
    out->source = "none";
    for (int s = 0; s < 3; s++) {
        int rank = 0, size = 0, local = 0, fr, fs, fl;
        _VS_TRY(_vs_env_int(sets[s][1], &rank, &fr));
        _VS_TRY(_vs_env_int(sets[s][2], &size, &fs));
        _VS_TRY(_vs_env_int(sets[s][3], &local, &fl));
        if (!fr && !fs) continue;
        if (!fr || !fs)
            return _vs_err(VS_ERR_INVALID, "environment: %s is set but %s is not", fr ? sets[s][1] : sets[s][2],
                           fr ? sets[s][2] : sets[s][1]);
        if (size < 1) return _vs_err(VS_ERR_INVALID, "environment: %s=%d must be >= 1", sets[s][2], size);
        if (rank < 0 || rank >= size)
            return _vs_err(VS_ERR_INVALID, "environment: %s=%d out of range [0, %d)", sets[s][1], rank, size);
        if (fl && local < 0)
            return _vs_err(VS_ERR_INVALID, "environment: %s=%d must be >= 0", sets[s][3], local);
        out->rank = rank;
        out->world_size = size;
        out->local_rank = fl ? local : 0;
        out->source = sets[s][0];
        break;
    }
    return _vs_env_master(out);
}

/* TCP rendezvous: rank 0 listens on addr:port; every other rank connects (retrying
   until the deadline), presents itself and receives `len` bytes. It hands out the
   NCCL unique id when there is no MPI, so it must not hand it to anyone else.

   Wire format, integers big-endian:
     hello   rank r -> rank 0, 24 bytes: magic "vsc2", r, world size, payload length,
             8-byte job key
     answer  rank 0 -> rank r, 8 bytes:  magic "vsa2", status (0: accepted and the
             payload follows; else a _VS_RDV_* reason and the connection closes)
   - Rank 0 reads the hellos of all connected peers at once (poll), so a peer
     that connects and says nothing holds only its own slot, for at most
     _VS_RDV_HELLO_S seconds, and never delays real ranks.
   - Rank 0 rejects a peer, logs it through the world's logger (when there is
     one) and keeps serving when the peer sends a wrong magic or garbage (closed
     without an answer: it is not one of ours), closes early, stays silent, or
     presents a wrong key, world size or payload length, a rank outside
     [1, size), or a rank that already joined.
   - The first valid claim of a rank wins; later claims of it are rejected as
     duplicates. Rejected ranks get the reason in the answer, so a
     misconfigured rank fails at once instead of timing out.
   - The deadline bounds everything; rank 0's timeout names the ranks that
     never joined. timeout_s <= 0 or infinite: no deadline.

   The job key is FNV-1a 64 over the run id, VESCALE_RUN_ID, else TORCHELASTIC_RUN_ID
   (torchrun's --rdzv-id, ignored when it is torchrun's default "none"), plus the world
   size.
   It is an equality token, not cryptography: it travels in clear, so it keeps
   out stray connections, ranks of other jobs and strangers who do not know the run
   id, not an attacker who can read the traffic or the job's environment. Without a
   run id the key derives from MASTER_PORT and WORLD_SIZE, which are public: that
   guards against accidents (a rank of another job or of an earlier run of different
   size), not against attackers. Set VESCALE_RUN_ID to a fresh random value per job
   for more. The address is left out of the key: ranks may spell rank 0's address
   differently (hostname, IP), and two jobs cannot listen on one port anyway. */
#include <fcntl.h> /* O_NONBLOCK: a connect that the deadline bounds */

#define _VS_RDV_MAGIC 0x76736332u  /* "vsc2": the hello carries a job key */
#define _VS_RDV_ANSWER 0x76736132u /* "vsa2": not the hello's, so a reflected hello is no answer */
#define _VS_RDV_HELLO 24
#define _VS_RDV_HELLO_S 5.0 /* how long rank 0 waits for a connected peer's hello */
#define _VS_RDV_SLOTS 32    /* peers rank 0 waits on at once; the oldest gives way */

enum { _VS_RDV_ACCEPTED = 0, _VS_RDV_BAD_KEY, _VS_RDV_BAD_SIZE, _VS_RDV_BAD_LEN, _VS_RDV_BAD_RANK, _VS_RDV_DUP_RANK };

_VS_PRIVATE const char* _vs_rdv_reason(uint32_t status)
{
    switch (status) {
    case _VS_RDV_BAD_KEY: return "job key differs (another job, or another VESCALE_RUN_ID/TORCHELASTIC_RUN_ID)";
    case _VS_RDV_BAD_SIZE: return "world size differs";
    case _VS_RDV_BAD_LEN: return "payload length differs";
    case _VS_RDV_BAD_RANK: return "rank out of range";
    case _VS_RDV_DUP_RANK: return "rank already joined (first claim wins)";
    default: return "unknown reason";
    }
}

#define _VS_FNV64_BASIS 14695981039346656037ull
_VS_PRIVATE uint64_t _vs_fnv1a64(uint64_t h, const void* p, size_t n)
{
    const unsigned char* b = (const unsigned char*)p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* The job key both sides present (see above); *from names where it came from.
   place: what stands in for a run id ("port 29500"; the file rendezvous: "file"),
   place_src: its name in *from. */
_VS_PRIVATE uint64_t _vs_job_key(const char* place, const char* place_src, int size, const char** from)
{
    const char* id = getenv("VESCALE_RUN_ID");
    const char* src = "VESCALE_RUN_ID";
    if (!id || !*id) {
        id = getenv("TORCHELASTIC_RUN_ID");
        src = "TORCHELASTIC_RUN_ID";
        if (id && !strcmp(id, "none")) id = NULL;
    }
    char num[48];
    uint64_t h = _vs_fnv1a64(_VS_FNV64_BASIS, "vescale rendezvous 2", 21);
    if (id && *id) {
        h = _vs_fnv1a64(h, "run id", 7);
        h = _vs_fnv1a64(h, id, strlen(id) + 1);
    } else {
        src = place_src;
        h = _vs_fnv1a64(h, place, strlen(place) + 1);
    }
    snprintf(num, sizeof num, "size %d", size);
    h = _vs_fnv1a64(h, num, strlen(num) + 1);
    if (from) *from = src;
    return h;
}

/* The TCP rendezvous' key: without a run id, the port stands in for it. */
_VS_PRIVATE uint64_t _vs_rdv_key(int port, int size, const char** from)
{
    char place[48];
    snprintf(place, sizeof place, "port %d", port);
    return _vs_job_key(place, "MASTER_PORT and WORLD_SIZE only (no run id: guards against accidents, not attackers)",
                       size, from);
}

_VS_PRIVATE void _vs_be_put32(unsigned char* p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

_VS_PRIVATE uint32_t _vs_be_get32(const unsigned char* p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Milliseconds for poll until `deadline` (which may be infinite), at most one second
   so callers re-check their deadlines; 0 once it has passed. */
_VS_PRIVATE int _vs_poll_ms(double deadline)
{
    double left = deadline - _vs_now();
    if (!(left > 0)) return 0;
    return left >= 1.0 ? 1000 : (int)(left * 1000) + 1;
}

/* Sends or receives exactly len bytes before the deadline; errors name the
   peer as who. */
_VS_PRIVATE vs_result _vs_io_full_as(int fd, void* buf, size_t len, int sending, double deadline, const char* who)
{
    char* p = (char*)buf;
    while (len) {
        if (_vs_now() >= deadline)
            return _vs_err(VS_ERR_TIMEOUT, "%s: peer did not %s in time", who, sending ? "take the data" : "answer");
        struct pollfd pf;
        pf.fd = fd;
        pf.events = sending ? POLLOUT : POLLIN;
        pf.revents = 0;
        int pr = poll(&pf, 1, _vs_poll_ms(deadline));
        if (pr < 0 && errno != EINTR) return _vs_err_backend(VS_ERR_IO, errno, "%s: poll: %s", who, strerror(errno));
        if (pr <= 0) continue;
        ssize_t k = sending ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if (k == 0) return _vs_err(VS_ERR_IO, "%s: connection closed by peer", who);
        if (k < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
            return _vs_err_backend(VS_ERR_IO, errno, "%s: %s", who, strerror(errno));
        }
        p += k;
        len -= (size_t)k;
    }
    return VS_OK;
}

_VS_PRIVATE vs_result _vs_io_full(int fd, void* buf, size_t len, int sending, double deadline)
{
    return _vs_io_full_as(fd, buf, len, sending, deadline, "rendezvous");
}

/* "3,5-7" for the ranks in [1, size) that have not joined, cut with "..." to fit. */
_VS_PRIVATE void _vs_rdv_missing(const unsigned char* joined, int size, char* buf, size_t cap)
{
    size_t off = 0;
    buf[0] = 0;
    for (int i = 1; i < size; i++) {
        if (joined[i]) continue;
        int j = i;
        while (j + 1 < size && !joined[j + 1]) j++;
        char item[32];
        if (j == i)
            snprintf(item, sizeof item, "%s%d", off ? "," : "", i);
        else
            snprintf(item, sizeof item, "%s%d-%d", off ? "," : "", i, j);
        size_t n = strlen(item);
        if (off + n + 5 > cap) {
            if (off + 4 < cap) memcpy(buf + off, ",...", 5);
            return;
        }
        memcpy(buf + off, item, n + 1);
        off += n;
        i = j;
    }
}

typedef struct _vs_rdv_peer {
    int fd;
    double until; // its hello must be complete by then
    size_t got;
    unsigned char hello[_VS_RDV_HELLO];
    char name[96]; // address:port, for the log
} _vs_rdv_peer;

typedef struct _vs_rdv_server {
    const vs_world* log;
    int size;
    const void* data;
    size_t len;
    uint64_t key;
    double deadline;
    unsigned char* joined;
    int njoined;
    int nrejected;
    char last[320]; // the last rejection, for the timeout message
    _vs_rdv_peer peer[_VS_RDV_SLOTS];
    int npeer;
} _vs_rdv_server;

_VS_PRIVATE _VS_PRINTF(3, 4) void _vs_rdv_reject(_vs_rdv_server* s, int i, const char* fmt, ...)
{
    char why[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    snprintf(s->last, sizeof s->last, "%s: %s", s->peer[i].name, why);
    s->nrejected++;
    vs_log(s->log, VS_LOG_WARN, "rendezvous: rejected peer %s", s->last);
}

_VS_PRIVATE void _vs_rdv_drop(_vs_rdv_server* s, int i)
{
    close(s->peer[i].fd);
    s->peer[i] = s->peer[--s->npeer];
}

/* Judges peer i's complete hello: answers, sends the payload to a valid new rank. */
_VS_PRIVATE void _vs_rdv_admit(_vs_rdv_server* s, int i)
{
    _vs_rdv_peer* p = &s->peer[i];
    uint32_t rank = _vs_be_get32(p->hello + 4), size = _vs_be_get32(p->hello + 8), len = _vs_be_get32(p->hello + 12);
    uint64_t key = (uint64_t)_vs_be_get32(p->hello + 16) << 32 | _vs_be_get32(p->hello + 20);
    uint32_t status = _VS_RDV_ACCEPTED;
    if (key != s->key)
        status = _VS_RDV_BAD_KEY;
    else if (size != (uint32_t)s->size)
        status = _VS_RDV_BAD_SIZE;
    else if (len != (uint32_t)s->len)
        status = _VS_RDV_BAD_LEN;
    else if (rank == 0 || rank >= (uint32_t)s->size)
        status = _VS_RDV_BAD_RANK;
    else if (s->joined[rank])
        status = _VS_RDV_DUP_RANK;
    unsigned char ans[8];
    _vs_be_put32(ans, _VS_RDV_ANSWER);
    _vs_be_put32(ans + 4, status);
    if (status != _VS_RDV_ACCEPTED) {
        (void)!send(p->fd, ans, sizeof ans, MSG_NOSIGNAL); // best effort: 8 bytes fit an empty socket buffer
        _vs_rdv_reject(s, i, "claims rank %u of %u: %s", rank, size, _vs_rdv_reason(status));
        return;
    }
    double until = _vs_now() + _VS_RDV_HELLO_S;
    if (until > s->deadline) until = s->deadline;
    vs_result r = _vs_io_full(p->fd, ans, sizeof ans, 1, until);
    if (!r) r = _vs_io_full(p->fd, (void*)(uintptr_t)s->data, s->len, 1, until);
    if (r) {
        _vs_rdv_reject(s, i, "rank %u did not take the payload: %s", rank, vs_last_error());
        return;
    }
    s->joined[rank] = 1;
    s->njoined++;
    vs_log(s->log, VS_LOG_DEBUG, "rendezvous: rank %u joined from %s", rank, p->name);
}

/* Reads what peer i sent; drops it once judged, on garbage, or when it closed. */
_VS_PRIVATE void _vs_rdv_read(_vs_rdv_server* s, int i)
{
    _vs_rdv_peer* p = &s->peer[i];
    ssize_t k = recv(p->fd, p->hello + p->got, _VS_RDV_HELLO - p->got, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (k <= 0) {
        _vs_rdv_reject(s, i, "closed after %zu of %d hello bytes", p->got, _VS_RDV_HELLO);
    } else {
        size_t had = p->got;
        p->got += (size_t)k;
        if (had < 4 && p->got >= 4 && _vs_be_get32(p->hello) != _VS_RDV_MAGIC)
            _vs_rdv_reject(s, i, "wrong magic 0x%08x (not a vescale rank)", _vs_be_get32(p->hello));
        else if (p->got < _VS_RDV_HELLO)
            return;
        else
            _vs_rdv_admit(s, i);
    }
    _vs_rdv_drop(s, i);
}

_VS_PRIVATE void _vs_rdv_accept(_vs_rdv_server* s, int lfd)
{
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    int cfd = accept(lfd, (struct sockaddr*)&sa, &sl);
    if (cfd < 0) {
        if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED)
            _vs_sleep_us(1000); // out of descriptors, say: do not spin
        return;
    }
    if (s->npeer == _VS_RDV_SLOTS) { // full of silent peers: the oldest gives way
        int old = 0;
        for (int i = 1; i < s->npeer; i++)
            if (s->peer[i].until < s->peer[old].until) old = i;
        _vs_rdv_reject(s, old, "dropped unjudged: %d peers waiting at once", _VS_RDV_SLOTS);
        _vs_rdv_drop(s, old);
    }
    _vs_rdv_peer* p = &s->peer[s->npeer++];
    memset(p, 0, sizeof *p);
    p->fd = cfd;
    p->until = _vs_now() + _VS_RDV_HELLO_S;
    char host[64] = "?", serv[16] = "?";
    if (getnameinfo((struct sockaddr*)&sa, sl, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV))
        snprintf(host, sizeof host, "?");
    snprintf(p->name, sizeof p->name, "%s:%s", host, serv);
}

/* Rank 0's side: serves until every rank in [1, size) has the payload. */
_VS_PRIVATE vs_result _vs_rdv_serve(_vs_rdv_server* s, int lfd, const char* addr, int port, double timeout)
{
    vs_result r = VS_OK;
    while (s->njoined < s->size - 1) {
        double now = _vs_now();
        if (now >= s->deadline) {
            char miss[256];
            _vs_rdv_missing(s->joined, s->size, miss, sizeof miss);
            r = _vs_err(VS_ERR_TIMEOUT,
                        "rendezvous: rank(s) %s never joined rank 0 at %s:%d within %g s (%d of %d ranks in; %d "
                        "peers rejected%s%s)",
                        miss, addr, port, timeout, s->njoined + 1, s->size, s->nrejected,
                        s->nrejected ? ", last " : "", s->last);
            break;
        }
        for (int i = s->npeer - 1; i >= 0; i--)
            if (now >= s->peer[i].until) {
                _vs_rdv_reject(s, i, "sent %zu of %d hello bytes within %g s", s->peer[i].got, _VS_RDV_HELLO,
                               _VS_RDV_HELLO_S);
                _vs_rdv_drop(s, i);
            }
        struct pollfd pf[_VS_RDV_SLOTS + 1];
        double wake = s->deadline;
        pf[0].fd = lfd;
        pf[0].events = POLLIN;
        pf[0].revents = 0;
        for (int i = 0; i < s->npeer; i++) {
            pf[i + 1].fd = s->peer[i].fd;
            pf[i + 1].events = POLLIN;
            pf[i + 1].revents = 0;
            if (s->peer[i].until < wake) wake = s->peer[i].until;
        }
        int pr = poll(pf, (nfds_t)(s->npeer + 1), _vs_poll_ms(wake));
        if (pr < 0 && errno != EINTR) {
            r = _vs_err_backend(VS_ERR_IO, errno, "rendezvous: poll: %s", strerror(errno));
            break;
        }
        if (pr <= 0) continue;
        // downwards: a dropped peer's slot takes the last one, which was already seen
        for (int i = s->npeer - 1; i >= 0 && s->njoined < s->size - 1; i--)
            if (pf[i + 1].revents) _vs_rdv_read(s, i);
        if (pf[0].revents & POLLIN) _vs_rdv_accept(s, lfd);
    }
    while (s->npeer) _vs_rdv_drop(s, s->npeer - 1);
    return r;
}

/* A connect that gives up at the deadline. Returns the socket, or -1 with *err set. */
_VS_PRIVATE int _vs_rdv_connect(const struct addrinfo* ai, double deadline, int* err)
{
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL, 0);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS)) {
        *err = errno;
        close(fd);
        return -1;
    }
    for (;;) { // until connected, refused or the deadline; a finished connect is writable
        struct pollfd pf;
        pf.fd = fd;
        pf.events = POLLOUT;
        pf.revents = 0;
        int pr = poll(&pf, 1, _vs_poll_ms(deadline));
        if (pr > 0) break;
        if ((pr < 0 && errno != EINTR) || _vs_now() >= deadline) {
            *err = pr < 0 ? errno : ETIMEDOUT;
            close(fd);
            return -1;
        }
    }
    int so = 0;
    socklen_t sl = sizeof so;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl) != 0 || so != 0) {
        *err = so ? so : errno;
        close(fd);
        return -1;
    }
    /* With rank 0 not up yet and its port in the ephemeral range, a connect to the
       local host can pick that very port and connect to itself (TCP simultaneous
       open); it would then hold the port rank 0 needs. */
    struct sockaddr_storage me, peer;
    socklen_t ml = sizeof me, pl = sizeof peer;
    memset(&me, 0, sizeof me);
    memset(&peer, 0, sizeof peer);
    if (getsockname(fd, (struct sockaddr*)&me, &ml) == 0 && getpeername(fd, (struct sockaddr*)&peer, &pl) == 0 &&
        ml == pl && !memcmp(&me, &peer, ml)) {
        *err = ECONNREFUSED;
        close(fd);
        return -1;
    }
    return fd;
}

/* Rank r's side: joins (retrying until the deadline) and receives the payload. */
_VS_PRIVATE vs_result _vs_rdv_join(const struct addrinfo* ai, const char* addr, int port, int rank, int size,
                                   void* data, size_t len, uint64_t key, double timeout, double deadline)
{
    unsigned char hello[_VS_RDV_HELLO];
    _vs_be_put32(hello, _VS_RDV_MAGIC);
    _vs_be_put32(hello + 4, (uint32_t)rank);
    _vs_be_put32(hello + 8, (uint32_t)size);
    _vs_be_put32(hello + 12, (uint32_t)len);
    _vs_be_put32(hello + 16, (uint32_t)(key >> 32));
    _vs_be_put32(hello + 20, (uint32_t)key);
    char last[256] = "";
    for (int attempt = 0;; attempt++) {
        if (attempt) _vs_sleep_us(20000);
        if (_vs_now() >= deadline)
            return _vs_err(VS_ERR_TIMEOUT, "rendezvous: rank %d could not join rank 0 at %s:%d within %g s%s%s", rank,
                           addr, port, timeout, last[0] ? ": " : "", last);
        int err = 0, fd = _vs_rdv_connect(ai, deadline, &err);
        if (fd < 0) {
            snprintf(last, sizeof last, "connect: %s", strerror(err));
            continue;
        }
        unsigned char ans[8];
        vs_result r = _vs_io_full(fd, hello, sizeof hello, 1, deadline);
        if (!r) r = _vs_io_full(fd, ans, sizeof ans, 0, deadline);
        if (!r && _vs_be_get32(ans) != _VS_RDV_ANSWER) {
            r = _vs_err(VS_ERR_IO, "the listener answered 0x%08x: not a vescale rank 0", _vs_be_get32(ans));
        } else if (!r && _vs_be_get32(ans + 4) != _VS_RDV_ACCEPTED) {
            close(fd);
            return _vs_err(VS_ERR_MISMATCH, "rendezvous: rank 0 at %s:%d rejected rank %d of %d: %s", addr, port,
                           rank, size, _vs_rdv_reason(_vs_be_get32(ans + 4)));
        }
        if (!r) r = _vs_io_full(fd, data, len, 0, deadline);
        close(fd);
        if (!r) return VS_OK;
        _vs_save_error(last, sizeof last); // retry: rank 0 may have dropped us, or was not up yet
    }
}

/* Rank 0 sends data[0, len) to every other rank of `size`; the others receive it
   into data. `log` (may be NULL) gets a line per rejected peer. See above. */
/* getaddrinfo for a TCP stream to (passive: on) host:port (host NULL: every
   address); 0 or its error. */
_VS_PRIVATE int _vs_tcp_resolve(const char* host, long port, int passive, struct addrinfo** ai)
{
    char ports[24];
    snprintf(ports, sizeof ports, "%ld", port);
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (passive) hints.ai_flags = AI_PASSIVE;
    *ai = NULL;
    int gr = getaddrinfo(host, ports, &hints, ai);
    return gr != 0 ? gr : *ai ? 0 : EAI_NONAME;
}

_VS_PRIVATE vs_result _vs_tcp_bcast_log(const vs_world* log, const char* addr, int port, int rank, int size,
                                        void* data, size_t len, double timeout)
{
    if (!addr || !*addr) return _vs_err(VS_ERR_INVALID, "rendezvous: no master address");
    if (port < 1 || port > 65535) return _vs_err(VS_ERR_INVALID, "rendezvous: port %d out of range", port);
    if (size < 1 || rank < 0 || rank >= size)
        return _vs_err(VS_ERR_INVALID, "rendezvous: rank %d of %d out of range", rank, size);
    if ((!data && len) || len > UINT32_MAX)
        return _vs_err(VS_ERR_INVALID, "rendezvous: payload of %zu bytes at %p", len, data);
    if (timeout != timeout) return _vs_err(VS_ERR_INVALID, "rendezvous: timeout is NaN");
    if (size == 1) return VS_OK;
    double deadline = timeout > 0 ? _vs_now() + timeout : (double)INFINITY;
    const char* from = NULL;
    uint64_t key = _vs_rdv_key(port, size, &from);
    vs_log(log, VS_LOG_DEBUG, "rendezvous: rank %d of %d via %s:%d, job key from %s", rank, size, addr, port, from);
    struct addrinfo* ai = NULL;
    int gr = _vs_tcp_resolve(addr, port, rank == 0, &ai);
    if (gr != 0)
        return _vs_err_backend(VS_ERR_IO, gr, "rendezvous: cannot resolve '%s': %s", addr, gai_strerror(gr));
    vs_result r = VS_OK;
    if (rank != 0) {
        r = _vs_rdv_join(ai, addr, port, rank, size, data, len, key, timeout, deadline);
        freeaddrinfo(ai);
        return r;
    }
    const _vs_hooks* h = _VS_WH(log);
    _vs_rdv_server* s = _VS_HNEW(h, _vs_rdv_server, 1);
    unsigned char* joined = _VS_HNEW(h, unsigned char, size);
    int fd = socket(ai->ai_family, SOCK_STREAM, 0), one = 1;
    if (!s || !joined) {
        r = _vs_err(VS_ERR_NOMEM, "rendezvous: out of memory for %d ranks", size);
    } else if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
               bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
        r = _vs_err_backend(VS_ERR_IO, errno, "rendezvous: cannot listen on %s:%d: %s", addr, port, strerror(errno));
    } else {
        s->log = log;
        s->size = size;
        s->data = data;
        s->len = len;
        s->key = key;
        s->deadline = deadline;
        s->joined = joined;
        r = _vs_rdv_serve(s, fd, addr, port, timeout);
    }
    if (fd >= 0) close(fd);
    _vs_hfree(h, joined);
    _vs_hfree(h, s);
    freeaddrinfo(ai);
    return r;
}

_VS_PRIVATE vs_result _vs_tcp_bcast(const char* addr, int port, int rank, int size, void* data, size_t len,
                                    double timeout)
{
    return _vs_tcp_bcast_log(NULL, addr, port, rank, size, data, len, timeout);
}

/* The file rendezvous (vs_world_init's notes say what it guarantees): the same
   exchange as the TCP one through a path every rank sees.
   - Rank 0 writes the id file at init_file (a temporary file in its directory,
     renamed over the path: a reader sees the old file or the whole new one)
     with a fresh random nonce.
   - Rank r reads it and writes its claim <init_file>.rank<r> the same way.
   - Rank 0 takes the claims that carry its nonce, deletes them (each rank
     returns when its claim is gone) and then the id file.
   - A file from another job (its key differs) is never used: it is waited past
     until the deadline, and rank 0 replaces it.
   - A file left by an earlier run of the same job (same key, e.g. an elastic
     restart after a crash) may be read first, but its nonce is not the new
     rank 0's: the rank re-reads and claims again when rank 0's file appears,
     and rank 0 takes only claims of its own nonce.

   Files, integers
   big-endian, each ending in an FNV-1a 64 of the bytes before it:
     id file  <path>        "vsf1", world size, payload length, job key (8),
                            nonce (8: rank 0's, random, per run), payload
     claim    <path>.rank<r> "vsk1", r, world size, job key, the nonce read, a
                            token (8: this call's, random; another one there is a
                            second claim of r)
   Each is written to <path>.tmp<rank>.<pid> and renamed over its name. Rank 0
   deletes the claims of its nonce when all are in (the sign that ends each
   rank's wait), then the id file. */
#define _VS_FRDV_MAGIC 0x76736631u /* "vsf1" */
#define _VS_FRDV_CLAIM 0x76736b31u /* "vsk1" */
#define _VS_FRDV_HEAD 28
#define _VS_FRDV_CLAIM_LEN 44

_VS_PRIVATE void _vs_be_put64(unsigned char* p, uint64_t v)
{
    _vs_be_put32(p, (uint32_t)(v >> 32));
    _vs_be_put32(p + 4, (uint32_t)v);
}

_VS_PRIVATE uint64_t _vs_be_get64(const unsigned char* p)
{
    return (uint64_t)_vs_be_get32(p) << 32 | _vs_be_get32(p + 4);
}

/* 8 random bytes (/dev/urandom; else the clock, the pid and an address). */
_VS_PRIVATE uint64_t _vs_random64(void)
{
    uint64_t v = 0;
    int fd = open("/dev/urandom", O_RDONLY);
    ssize_t k = fd >= 0 ? read(fd, &v, sizeof v) : -1;
    if (fd >= 0) close(fd);
    if (k == (ssize_t)sizeof v) return v;
    double t = _vs_now();
    uint64_t tb;
    memcpy(&tb, &t, sizeof tb);
    return _vs_fnv1a64(_vs_fnv1a64(tb, &fd, sizeof fd) ^ (uint64_t)getpid(), &v, sizeof v) ^ (uint64_t)(uintptr_t)&v;
}

enum { _VS_FILE_OK = 0, _VS_FILE_MISSING, _VS_FILE_ERROR };

/* Up to cap bytes of the file at path (*got: how many; cap means "cap or more"). */
_VS_PRIVATE int _vs_file_slurp(const char* path, unsigned char* buf, size_t cap, size_t* got)
{
    *got = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return errno == ENOENT ? _VS_FILE_MISSING : _VS_FILE_ERROR;
    while (*got < cap) {
        ssize_t k = read(fd, buf + *got, cap - *got);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            int e = errno;
            close(fd);
            errno = e;
            return _VS_FILE_ERROR;
        }
        if (k == 0) break;
        *got += (size_t)k;
    }
    close(fd);
    return _VS_FILE_OK;
}

/* buf[0, n) to path atomically: a temporary file beside it, synced, renamed. */
_VS_PRIVATE vs_result _vs_file_put(const char* path, int rank, const unsigned char* buf, size_t n)
{
    char tmp[_VS_INIT_FILE_MAX + 64];
    snprintf(tmp, sizeof tmp, "%s.tmp%d.%ld", path, rank, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644), e = 0;
    if (fd < 0)
        return _vs_err_backend(VS_ERR_IO, errno, "rendezvous: rank %d cannot create %s: %s", rank, tmp,
                               strerror(errno));
    for (size_t off = 0; off < n && !e;) {
        ssize_t k = write(fd, buf + off, n - off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) e = k < 0 ? errno : EIO;
        else off += (size_t)k;
    }
    if (!e && fsync(fd) != 0) e = errno;
    if (close(fd) != 0 && !e) e = errno;
    if (!e && rename(tmp, path) != 0) e = errno;
    if (!e) return VS_OK;
    unlink(tmp);
    return _vs_err_backend(VS_ERR_IO, e, "rendezvous: rank %d cannot write %s: %s", rank, path, strerror(e));
}

/* This rank can create its temporary file beside path (made and removed):
   checked first, so that every rank fails at once on a directory that is
   missing or not writable (access() would pass root anywhere) instead of
   waiting for a file. */
_VS_PRIVATE vs_result _vs_file_dir_check(const char* path, int rank)
{
    char tmp[_VS_INIT_FILE_MAX + 64], dir[_VS_INIT_FILE_MAX + 1];
    snprintf(tmp, sizeof tmp, "%s.tmp%d.%ld", path, rank, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        close(fd);
        unlink(tmp);
        return VS_OK;
    }
    int e = errno;
    snprintf(dir, sizeof dir, "%s", path);
    char* slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    return _vs_err_backend(VS_ERR_IO, e, "rendezvous: rank %d cannot write in %s, the directory of the init file %s "
                           "(every rank writes there): %s", rank, dir, path, strerror(e));
}

/* The id file in buf[0, got): 0 ours (its fields out), else why not (a message
   in msg): 1 not a rendezvous file, 2 truncated or damaged. */
_VS_PRIVATE int _vs_frdv_parse(const unsigned char* b, size_t got, size_t cap, int* size, size_t* len, uint64_t* key,
                               uint64_t* nonce, char* msg, size_t mcap)
{
    if (got < 4 || _vs_be_get32(b) != _VS_FRDV_MAGIC) {
        _vs_fmt(msg, mcap, "not a vescale rendezvous file (%zu bytes%s)", got, got >= 4 ? ", another magic" : "");
        return 1;
    }
    size_t need = got >= _VS_FRDV_HEAD ? _VS_FRDV_HEAD + (size_t)_vs_be_get32(b + 8) + 8 : 0;
    if (got < _VS_FRDV_HEAD || got != need || got >= cap ||
        _vs_be_get64(b + got - 8) != _vs_fnv1a64(_VS_FNV64_BASIS, b, got - 8)) {
        _vs_fmt(msg, mcap, "a vescale rendezvous file, truncated or damaged (%zu bytes%s)", got,
                need && got != need ? ", its header says otherwise" : "");
        return 2;
    }
    *size = (int)_vs_be_get32(b + 4), *len = _vs_be_get32(b + 8), *key = _vs_be_get64(b + 12);
    *nonce = _vs_be_get64(b + 20);
    return 0;
}

/* Rank r's claim file, read: 1 when it is r's for this job (nonce and token out). */
_VS_PRIVATE int _vs_frdv_claim_read(const char* cpath, int r, int size, uint64_t key, uint64_t* nonce, uint64_t* token)
{
    unsigned char b[_VS_FRDV_CLAIM_LEN + 1];
    size_t got = 0;
    if (_vs_file_slurp(cpath, b, sizeof b, &got) != _VS_FILE_OK || got != _VS_FRDV_CLAIM_LEN) return 0;
    if (_vs_be_get32(b) != _VS_FRDV_CLAIM || _vs_be_get32(b + 4) != (uint32_t)r ||
        _vs_be_get32(b + 8) != (uint32_t)size || _vs_be_get64(b + 12) != key ||
        _vs_be_get64(b + 36) != _vs_fnv1a64(_VS_FNV64_BASIS, b, 36))
        return 0;
    *nonce = _vs_be_get64(b + 20), *token = _vs_be_get64(b + 28);
    return 1;
}

/* The poll of a wait: 1 ms at first, up to 20 ms. */
_VS_PRIVATE void _vs_frdv_nap(int it) { _vs_sleep_us(it < 20 ? 1000 : 20000); }

/* Rank 0: writes the id file, takes every rank's claim of its nonce, cleans up. */
_VS_PRIVATE vs_result _vs_frdv_root(const vs_world* log, const char* path, int size, const void* data, size_t len,
                                    uint64_t key, double timeout, double deadline)
{
    const _vs_hooks* h = _VS_WH(log);
    size_t flen = _VS_FRDV_HEAD + len + 8;
    unsigned char* b = _VS_HNEW(h, unsigned char, flen + 1);
    unsigned char* joined = _VS_HNEW(h, unsigned char, (size_t)size);
    char cpath[_VS_INIT_FILE_MAX + 32], msg[160], last[256] = "";
    vs_result r = VS_OK;
    int njoined = 1, st;
    size_t got = 0;
    uint64_t nonce = 0;
    if (!b || !joined) {
        r = _vs_err(VS_ERR_NOMEM, "rendezvous: out of memory for %d ranks", size);
        goto done;
    }
    if ((st = _vs_file_slurp(path, b, flen + 1, &got)) == _VS_FILE_ERROR) {
        r = _vs_err_backend(VS_ERR_IO, errno, "rendezvous: rank 0 cannot read %s: %s", path, strerror(errno));
        goto done;
    }
    {
        int sz = 0;
        size_t ln = 0;
        uint64_t k = 0, n = 0;
        if (st == _VS_FILE_OK && _vs_frdv_parse(b, got, flen + 1, &sz, &ln, &k, &n, msg, sizeof msg) == 1) {
            r = _vs_err(VS_ERR_INVALID, "rendezvous: the init file %s is %s: rank 0 does not replace it (remove it, or "
                        "give another path)", path, msg);
            goto done;
        }
        if (st == _VS_FILE_OK)
            vs_log(log, VS_LOG_INFO, "rendezvous: replacing %s, left by an earlier run or another job", path);
    }
    nonce = _vs_random64();
    _vs_be_put32(b, _VS_FRDV_MAGIC);
    _vs_be_put32(b + 4, (uint32_t)size);
    _vs_be_put32(b + 8, (uint32_t)len);
    _vs_be_put64(b + 12, key);
    _vs_be_put64(b + 20, nonce);
    if (len) memcpy(b + _VS_FRDV_HEAD, data, len);
    _vs_be_put64(b + flen - 8, _vs_fnv1a64(_VS_FNV64_BASIS, b, flen - 8));
    if ((r = _vs_file_put(path, 0, b, flen))) goto done;
    for (int it = 0; njoined < size; it++) {
        for (int q = 1; q < size; q++) {
            uint64_t cn = 0, tok = 0;
            if (joined[q]) continue;
            snprintf(cpath, sizeof cpath, "%s.rank%d", path, q);
            if (_vs_frdv_claim_read(cpath, q, size, key, &cn, &tok) && cn == nonce)
                joined[q] = 1, njoined++;
            else if (cn)
                _vs_fmt(last, sizeof last, "; rank %d's claim is for an earlier id file", q);
        }
        if (njoined == size) break;
        if (_vs_now() >= deadline) {
            char miss[256];
            _vs_rdv_missing(joined, size, miss, sizeof miss);
            unlink(path); // (no later run reads it)
            r = _vs_err(VS_ERR_TIMEOUT, "rendezvous: rank(s) %s never claimed the id rank 0 wrote to %s within %g s "
                        "(%d of %d ranks in%s)", miss, path, timeout, njoined, size, last);
            goto done;
        }
        _vs_frdv_nap(it);
    }
    for (int q = 1; q < size; q++) { // each rank's wait ends with its claim
        snprintf(cpath, sizeof cpath, "%s.rank%d", path, q);
        unlink(cpath);
    }
    unlink(path);
done:
    _vs_hfree(h, joined);
    _vs_hfree(h, b);
    return r;
}

/* Rank r: reads the id file of this job, claims it, and waits until rank 0 has
   taken the claim (deleted it); re-reads and claims again when rank 0 writes a
   new id file meanwhile (the one read was an earlier run's). */
_VS_PRIVATE vs_result _vs_frdv_join(const vs_world* log, const char* path, int rank, int size, void* data, size_t len,
                                    uint64_t key, double timeout, double deadline)
{
    const _vs_hooks* h = _VS_WH(log);
    size_t flen = _VS_FRDV_HEAD + len + 8;
    unsigned char* b = _VS_HNEW(h, unsigned char, flen + 1);
    if (!b) return _vs_err(VS_ERR_NOMEM, "rendezvous: out of memory for %zu bytes", flen);
    char cpath[_VS_INIT_FILE_MAX + 32], seen[256], msg[160];
    snprintf(cpath, sizeof cpath, "%s.rank%d", path, rank);
    snprintf(seen, sizeof seen, "no file there");
    uint64_t token = _vs_random64(), mine = 0;
    int claimed = 0;
    vs_result r = VS_OK;
    for (int it = 0;; it++) {
        if (claimed) { // rank 0 deletes the claims of its nonce once all are in
            uint64_t cn = 0, tok = 0;
            unsigned char probe;
            size_t pg = 0;
            if (_vs_file_slurp(cpath, &probe, 1, &pg) == _VS_FILE_MISSING) break;
            if (_vs_frdv_claim_read(cpath, rank, size, key, &cn, &tok) && tok != token) {
                r = _vs_err(VS_ERR_MISMATCH, "rendezvous: rank %d of %d was claimed twice: %s holds another process's "
                            "claim (two processes with the same rank?)", rank, size, cpath);
                break;
            }
        }
        size_t got = 0;
        int st = _vs_file_slurp(path, b, flen + 1, &got), sz = 0;
        size_t ln = 0;
        uint64_t k = 0, n = 0;
        if (st == _VS_FILE_ERROR) {
            r = _vs_err_backend(VS_ERR_IO, errno, "rendezvous: rank %d cannot read %s: %s", rank, path,
                                strerror(errno));
            break;
        }
        int pr = st == _VS_FILE_OK ? _vs_frdv_parse(b, got, flen + 1, &sz, &ln, &k, &n, msg, sizeof msg) : -1;
        if (pr > 0) {
            r = _vs_err(pr == 1 ? VS_ERR_INVALID : VS_ERR_IO, "rendezvous: rank %d: the init file %s is %s", rank, path,
                        msg);
            break;
        }
        if (pr == 0 && sz != size)
            _vs_fmt(seen, sizeof seen, "a file for a world of %d ranks (this one has %d: another job)", sz, size);
        else if (pr == 0 && k != key)
            _vs_fmt(seen, sizeof seen, "a file of another job (its key differs: another VESCALE_RUN_ID or "
                    "TORCHELASTIC_RUN_ID)");
        else if (pr == 0 && ln != len)
            _vs_fmt(seen, sizeof seen, "a file with a payload of %zu bytes (%zu here)", ln, len);
        else if (pr == 0 && (!claimed || n != mine)) {
            unsigned char c[_VS_FRDV_CLAIM_LEN];
            _vs_be_put32(c, _VS_FRDV_CLAIM);
            _vs_be_put32(c + 4, (uint32_t)rank);
            _vs_be_put32(c + 8, (uint32_t)size);
            _vs_be_put64(c + 12, key);
            _vs_be_put64(c + 20, n);
            _vs_be_put64(c + 28, token);
            _vs_be_put64(c + 36, _vs_fnv1a64(_VS_FNV64_BASIS, c, 36));
            if ((r = _vs_file_put(cpath, rank, c, sizeof c))) break;
            if (len) memcpy(data, b + _VS_FRDV_HEAD, len);
            mine = n, claimed = 1;
            _vs_fmt(seen, sizeof seen, "this job's id file, claimed in %s; rank 0 never took the claim (the file "
                    "was an earlier run's, and this run's rank 0 did not write one?)", cpath);
        }
        if (_vs_now() >= deadline) {
            r = _vs_err(VS_ERR_TIMEOUT, "rendezvous: rank %d of %d got no id through the init file %s within %g s: %s",
                        rank, size, path, timeout, seen);
            break;
        }
        _vs_frdv_nap(it);
    }
    if (r && claimed) unlink(cpath);
    (void)log;
    _vs_hfree(h, b);
    return r;
}

/* The file rendezvous' entry: rank 0 sends data[0, len) to every other rank. */
_VS_PRIVATE vs_result _vs_file_bcast(const vs_world* log, const char* path, int rank, int size, void* data, size_t len,
                                     double timeout)
{
    if (!path || !*path) return _vs_err(VS_ERR_INVALID, "rendezvous: no init file");
    if (strlen(path) > _VS_INIT_FILE_MAX)
        return _vs_err(VS_ERR_INVALID, "rendezvous: the init file's path is longer than %d bytes", _VS_INIT_FILE_MAX);
    if (size < 1 || rank < 0 || rank >= size)
        return _vs_err(VS_ERR_INVALID, "rendezvous: rank %d of %d out of range", rank, size);
    if ((!data && len) || len > UINT32_MAX - _VS_FRDV_HEAD - 8)
        return _vs_err(VS_ERR_INVALID, "rendezvous: payload of %zu bytes at %p", len, data);
    if (timeout != timeout) return _vs_err(VS_ERR_INVALID, "rendezvous: timeout is NaN");
    if (size == 1) return VS_OK;
    _VS_TRY(_vs_file_dir_check(path, rank));
    double deadline = timeout > 0 ? _vs_now() + timeout : (double)INFINITY;
    const char* from = NULL;
    uint64_t key = _vs_job_key("file", "WORLD_SIZE only (no run id: another job of the same size is not told apart)",
                               size, &from);
    vs_log(log, VS_LOG_DEBUG, "rendezvous: rank %d of %d via the file %s, job key from %s", rank, size, path, from);
    return rank == 0 ? _vs_frdv_root(log, path, size, data, len, key, timeout, deadline)
                     : _vs_frdv_join(log, path, rank, size, data, len, key, timeout, deadline);
}

/* VESCALE_TRANSPORT's text: threads, mpi or nccl. */
_VS_PRIVATE vs_result _vs_parse_transport(const char* text, vs_transport* out)
{
    if (!text) return _vs_err(VS_ERR_NULL, "transport text is NULL");
    for (int t = VS_TRANSPORT_THREADS; t <= VS_TRANSPORT_NCCL; t++)
        if (!strcmp(text, vs_transport_name((vs_transport)t))) {
            *out = (vs_transport)t;
            return VS_OK;
        }
    return _vs_err(VS_ERR_INVALID, "VESCALE_TRANSPORT='%.64s' is not one of threads, mpi, nccl", text);
}

/* VESCALE_TRANSPORT, else MPI when built in, else NCCL. */
_VS_PRIVATE vs_result _vs_transport_from_env(vs_transport* out)
{
    const char* e = getenv("VESCALE_TRANSPORT");
    if (e && *e) return _vs_parse_transport(e, out);
#ifdef VESCALE_MPI
    *out = VS_TRANSPORT_MPI;
#else
    *out = VS_TRANSPORT_NCCL;
#endif
    return VS_OK;
}

#ifdef VESCALE_NCCL
_VS_PRIVATE vs_result _vs_nccl_unique_id(ncclUniqueId* id)
{
    ncclResult_t nr = ncclGetUniqueId(id);
    if (nr != ncclSuccess) return _vs_err_backend(VS_ERR_BACKEND, (int)nr, "ncclGetUniqueId: %s", ncclGetErrorString(nr));
    return VS_OK;
}
#endif

/* A vs_world_desc with every zero-is-default resolved and checked (the one place
   its defaults live; vs_world_query_desc gives it back): transport (VESCALE_TRANSPORT,
   else MPI if built, else NCCL), timeout_s, log_level, world_size/rank/local_rank
   (explicit, else the launcher's environment), master_addr/port, init_file (else
   VESCALE_INIT_FILE, else NULL). *bi gets where the numbers came from;
   out->master_addr points into it. */
_VS_PRIVATE vs_result _vs_world_desc_defaults(const vs_world_desc* d, vs_world_desc* out, vs_bootstrap_info* bi)
{
    // the desc's own numbers first, whichever transports this build has
    if (d->world_size < 0) return _vs_err(VS_ERR_INVALID, "vs_world_init: world_size %d < 0", d->world_size);
    if (d->world_size > 0 && (d->rank < 0 || d->rank >= d->world_size))
        return _vs_err(VS_ERR_INVALID, "vs_world_init: rank %d out of range [0, %d)", d->rank, d->world_size);
    if (d->world_size > 0 && d->local_rank < 0)
        return _vs_err(VS_ERR_INVALID, "vs_world_init: local_rank %d < 0", d->local_rank);
    if (d->master_port < 0 || d->master_port > 65535)
        return _vs_err(VS_ERR_INVALID, "vs_world_init: master_port %d out of range [1, 65535] (0: MASTER_PORT)",
                       d->master_port);
    if (d->master_addr && strlen(d->master_addr) >= sizeof bi->master_addr)
        return _vs_err(VS_ERR_INVALID, "vs_world_init: master_addr is longer than %zu bytes", sizeof bi->master_addr - 1);
    if (d->init_file && !*d->init_file)
        return _vs_err(VS_ERR_INVALID, "vs_world_init: init_file is empty (NULL: VESCALE_INIT_FILE, else TCP)");
    if (d->init_file && strlen(d->init_file) > _VS_INIT_FILE_MAX)
        return _vs_err(VS_ERR_INVALID, "vs_world_init: init_file is longer than %d bytes", _VS_INIT_FILE_MAX);
    if ((int)d->device_select < VS_DEVICE_BY_LOCAL_RANK || d->device_select > VS_DEVICE_KEEP)
        return _vs_err(VS_ERR_INVALID, "vs_world_init: device_select %d is not a vs_device_select", (int)d->device_select);
    if (d->device_select == VS_DEVICE_EXPLICIT && d->cuda_device < 0)
        return _vs_err(VS_ERR_INVALID, "vs_world_init: cuda_device %d < 0", d->cuda_device);
    if (!(d->lighthouse_wait_s >= 0 && d->lighthouse_wait_s < HUGE_VAL))
        return _vs_err(VS_ERR_INVALID, "vs_world_init: lighthouse_wait_s %g must be > 0 or 0 (5 s)", d->lighthouse_wait_s);
    *out = *d;
    if (out->lighthouse_wait_s == 0) out->lighthouse_wait_s = _VS_LH_ANSWER_S;
    if (out->transport == VS_TRANSPORT_DEFAULT) _VS_TRY(_vs_transport_from_env(&out->transport));
    _VS_TRY(_vs_resolve_timeout("vs_world_init", d->timeout_s, &out->timeout_s));
    _VS_TRY(_vs_resolve_level(d->log_level, &out->log_level));
    unsigned modes = 0; // (checked here; _vs_world_keep_desc keeps them)
    if (d->debug && vs_debug_modes(d->debug, &modes))
        return _vs_err(VS_ERR_INVALID, "vs_world_init: debug: %s", vs_last_error());
    if (!d->debug) _VS_TRY(vs_debug_modes(NULL, &modes)); // (its message names the variable)
    out->debug = d->debug ? d->debug : getenv("VESCALE_DEBUG");
    vs_transport tr = out->transport;
    const _vs_transport_ops* tp = _vs_transport_of(tr);
    if (tp && !tp->world_init)
        return _vs_err(VS_ERR_INVALID, "vs_world_init: the %s transport runs ranks with vs_launch", vs_transport_name(tr));
    if ((int)tr < VS_TRANSPORT_THREADS || (int)tr > VS_TRANSPORT_NCCL)
        return _vs_err(VS_ERR_INVALID, "vs_world_init: invalid transport %d", (int)tr);
    if (!tp) {
        char macro[16]; // VESCALE_<its name in capitals>
        size_t i = 0;
        for (const char* n = vs_transport_name(tr); *n && i + 1 < sizeof macro; n++)
            macro[i++] = (char)(*n >= 'a' && *n <= 'z' ? *n - 'a' + 'A' : *n);
        macro[i] = 0;
        return _vs_err(VS_ERR_UNAVAILABLE, "vs_world_init: transport '%s' not compiled in (build with -DVESCALE_%s)",
                       vs_transport_name(tr), macro);
    }
    if (d->world_size > 0) { // rank and local_rank checked above
        memset(bi, 0, sizeof *bi);
        bi->rank = d->rank;
        bi->world_size = d->world_size;
        bi->local_rank = d->local_rank;
        bi->source = "explicit";
        _VS_TRY(_vs_env_master(bi));
    } else {
        _VS_TRY(vs_bootstrap_from_env(bi));
    }
    if (d->master_addr) snprintf(bi->master_addr, sizeof bi->master_addr, "%s", d->master_addr);
    if (d->master_port) bi->master_port = d->master_port;
    const char* f = d->init_file ? d->init_file : getenv("VESCALE_INIT_FILE");
    if (f && strlen(f) > _VS_INIT_FILE_MAX)
        return _vs_err(VS_ERR_INVALID, "environment: VESCALE_INIT_FILE is longer than %d bytes", _VS_INIT_FILE_MAX);
    out->init_file = f && *f ? f : NULL;
    if (d->elastic_dir && !*d->elastic_dir)
        return _vs_err(VS_ERR_INVALID, "vs_world_init: elastic_dir is empty (NULL: VESCALE_ELASTIC_DIR, else none)");
    const char* ed = d->elastic_dir ? d->elastic_dir : getenv("VESCALE_ELASTIC_DIR");
    if (ed && strlen(ed) > _VS_INIT_FILE_MAX - 64)
        return _vs_err(VS_ERR_INVALID, "vs_world_init: the elastic directory is longer than %d bytes",
                       _VS_INIT_FILE_MAX - 64);
    out->elastic_dir = ed && *ed ? ed : NULL;
    const char* tk = d->elastic_token ? d->elastic_token : getenv("VESCALE_LIGHTHOUSE_TOKEN");
    out->elastic_token = tk && *tk ? tk : NULL;
    if (d->join != 0 && d->join != 1) return _vs_err(VS_ERR_INVALID, "vs_world_init: join %d is not 0 or 1", d->join);
    const char* je = getenv("VESCALE_ELASTIC_JOIN");
    if (!d->join && je && *je && strcmp(je, "0") && strcmp(je, "1"))
        return _vs_err(VS_ERR_INVALID, "environment: VESCALE_ELASTIC_JOIN='%s' is not 0 or 1", je);
    out->join = d->join || (je && !strcmp(je, "1"));
    if (out->join && (!tp->joins || !out->elastic_dir))
        return _vs_err(VS_ERR_INVALID, "vs_world_init: join: only an NCCL job of processes with an elastic directory "
                       "(elastic_dir or VESCALE_ELASTIC_DIR) takes a replacement rank (transport %s, %s)",
                       vs_transport_name(tr), out->elastic_dir ? "a directory" : "no directory");
    out->world_size = bi->world_size;
    out->rank = bi->rank;
    out->local_rank = bi->local_rank;
    out->master_addr = bi->master_addr;
    out->master_port = bi->master_port;
    return VS_OK;
}

_VS_PRIVATE vs_result _vs_store_open(vs_world* w, const char* dir, int join, const char* token);
_VS_PRIVATE void _vs_store_members(vs_world* w);

#ifdef VESCALE_MPI
/* The MPI table's world_init: MPI's world, its numbering checked against the launcher's. */
_VS_PRIVATE vs_result _vs_mpi_world_init(vs_world* w, const vs_world_desc* d, const vs_bootstrap_info* bi)
{
    vs_result r = _vs_mpi_world(w, d);
    return r ? r : _vs_mpi_check_launcher(w, bi, d);
}
#endif

#ifdef VESCALE_NCCL
/* The NCCL table's world_init: rank 0's ncclUniqueId reaches every rank (over
   MPI when an MPI launcher started the job, else the init file or TCP), then
   the world communicator; with an elastic store, opened first. */
_VS_PRIVATE vs_result _vs_nccl_world_init(vs_world* w, const vs_world_desc* d, const vs_bootstrap_info* bi)
{
    vs_result r = VS_OK;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    int over_mpi = 0;
#ifdef VESCALE_MPI
    // the id travels over MPI when the job was started by an MPI launcher: MPI's
    // numbering is taken first (checked against explicit or torchrun values), so
    // the rank that makes the id is the rank that broadcasts it
    int mpi_up = 0;
    MPI_Initialized(&mpi_up);
    if (mpi_up || !strcmp(bi->source, "openmpi")) {
        over_mpi = 1;
        vs_world* mw = _vs_world_new(VS_TRANSPORT_MPI, 0, 1, 0, w->timeout, NULL, VS_LOG_OFF, &d->allocator);
        r = mw ? _vs_mpi_world(mw, d) : _vs_err(VS_ERR_NOMEM, "vs_world_init: out of memory");
        if (!r) r = _vs_mpi_check_launcher(mw, bi, d);
        if (!r) {
            w->mpi_finalize = mw->mpi_finalize;
            mw->mpi_finalize = 0;
            w->rank = mw->rank;
            w->size = mw->size;
            w->local_rank = mw->local_rank;
            if (w->rank == 0) r = _vs_nccl_unique_id(&id);
            // every rank takes part, so rank 0's failure is every rank's error
            vs_result rb = vs_broadcast(mw->comm, &id, &id, sizeof id, VS_U8, 0, NULL);
            if (!r) r = rb;
        }
        if (mw) {
            if (mw->comm) mw->comm->kind = _VS_COMM_USER;
            vs_world_free(mw);
        }
    }
#endif
    w->ewait = d->lighthouse_wait_s; // (resolved: > 0)
    if (d->elastic_dir) r = _vs_store_open(w, d->elastic_dir, d->join, d->elastic_token);
    if (!r && d->join) { // a replacement: no rendezvous; it comes in with vs_world_grow
        w->joining = 1;
    } else if (!r && !over_mpi) {
        if (w->rank == 0) r = _vs_nccl_unique_id(&id);
        if (!r && w->size > 1 && d->init_file)
            r = _vs_file_bcast(w, d->init_file, w->rank, w->size, &id, sizeof id, w->timeout);
        else if (!r && w->size > 1)
            r = _vs_tcp_bcast_log(w, bi->master_addr, bi->master_port, w->rank, w->size, &id, sizeof id,
                                  w->timeout);
    }
    if (!r && !w->joining) r = _vs_nccl_world_comm(w, &id, d->device_select, d->cuda_device);
    if (!r && w->elastic_dir[0]) _vs_store_members(w); // (the members' pids: every one wrote its own before the rendezvous)
    return r;
}
#endif

VS_API vs_result vs_world_init(const vs_world_desc* desc, vs_world** out)
{
    _VS_CHECK_NULL(desc, "desc");
    _VS_CHECK_NULL(out, "out");
    *out = NULL;
    vs_world_desc rd;
    vs_bootstrap_info bi;
    memset(&rd, 0, sizeof rd);
    memset(&bi, 0, sizeof bi);
    _VS_TRY(_vs_world_desc_defaults(desc, &rd, &bi));
    const vs_world_desc* d = &rd;
    vs_transport tr = rd.transport;
    double timeout = rd.timeout_s;
    vs_log_level level = rd.log_level;
    vs_world* w = _vs_world_new(tr, bi.rank, bi.world_size, bi.local_rank, timeout, &d->logger, level,
                                &d->allocator);
    if (!w) return _vs_err(VS_ERR_NOMEM, "vs_world_init: out of memory");
    vs_result r = _vs_transport_of(tr)->world_init(w, d, &bi);
    if (r) {
        char keep[512];
        _vs_save_error(keep, sizeof keep);
        vs_world_free(w);
        return _vs_err(r, "%s", keep);
    }
    if (w->comm) snprintf(w->comm->label, sizeof w->comm->label, "world");
    _vs_err_world(w); // errors on this thread log through the world's logger
    _vs_world_keep_desc(w, &rd);
    vs_log(w, VS_LOG_INFO, "world up: transport %s, rank %d of %d (local %d, from %s)", vs_transport_name(tr),
           w->rank, w->size, w->local_rank, bi.source ? bi.source : "?");
    *out = w;
    return VS_OK;
}

// >>mesh ----------------------------------------------------------------------

/* Slots of a mesh's cache on its communicator's side: [0], [1] device
   vs_redistribute's step buffers, [2], [3] its packing, [4] the cross-entropy's. */
enum { _VS_MSCRATCH = 5 };
/* Id checks of a mesh's vocab calls in flight before one waits (_vs_ids_launch). */
enum { _VS_IDSLOTS = 16 };

typedef struct _vs_subentry {
    int dims[VS_MESH_MAX_DIMS];
    int ndims;
    vs_mesh* mesh;
} _vs_subentry;

struct vs_mesh {
    vs_world* world;
    vs_comm* comm;
    int owns_comm;
    int ndims;
    int shape[VS_MESH_MAX_DIMS];
    char names[VS_MESH_MAX_DIMS][VS_MESH_NAME_MAX];
    int nranks;
    int* granks; // world rank of each mesh rank
    int mrank;
    int coord[VS_MESH_MAX_DIMS];
    _vs_subentry* subs;
    int nsubs;
    void* scratch[4]; // redistribute's buffers, kept (grow-only) for the next call
    size_t scratch_cap[4];
    void* mscratch[_VS_MSCRATCH]; // the same on the comm's side (device memory on NCCL): _vs_mesh_mscratch
    size_t mscratch_cap[_VS_MSCRATCH];
    /* device path: the vocab functions' id checks in flight (_vs_ids_launch), a
       ring of slots, oldest first: each slot's flag (position, id) in pinned host
       memory, the event recorded after its check kernel, and the call it checks */
    long long* idflag;
    void* idev[_VS_IDSLOTS]; // cudaEvent_t
    const char* idfn[_VS_IDSLOTS];
    long long idvocab[_VS_IDSLOTS];
    unsigned char idrep[_VS_IDSLOTS]; // its bad id already reported
    int idhead, idpend;
    vs_mesh* parent; // submeshes: the mesh that made (and frees) this one
    int users;       // handles built on this mesh or its submeshes (DDP, ...) still alive
    int shrunk;      // >>elastic: the world's reconfiguration that shrank it (0: none)
};

/* The root of a submesh chain: dependents count there, so freeing the root sees them. */
_VS_PRIVATE vs_mesh* _vs_mesh_root(vs_mesh* m)
{
    while (m->parent) m = m->parent;
    return m;
}


/* Scratch slot `i` of at least `bytes`, reused across calls; NULL when out of memory. */
_VS_PRIVATE void* _vs_mesh_scratch(vs_mesh* m, int i, size_t bytes)
{
    if (m->scratch_cap[i] >= bytes) return m->scratch[i];
    _vs_hfree_aligned(_VS_WH(m->world), m->scratch[i]);
    // page-aligned: memcpy between buffers of different alignment is slow
    m->scratch[i] = _vs_halloc_aligned(_VS_WH(m->world), bytes, 4096);
    m->scratch_cap[i] = m->scratch[i] ? bytes : 0;
    return m->scratch[i];
}

static const char* const _vs_default_names[3][3] = {{"DP"}, {"DP", "TP"}, {"PP", "DP", "TP"}};

_VS_PRIVATE void _vs_mesh_coord_calc(const vs_mesh* m, int r, int* coord)
{
    for (int d = m->ndims - 1; d >= 0; d--) {
        coord[d] = r % m->shape[d];
        r /= m->shape[d];
    }
}

_VS_PRIVATE int _vs_mesh_rank_calc(const vs_mesh* m, const int* coord)
{
    int r = 0;
    for (int d = 0; d < m->ndims; d++) r = r * m->shape[d] + coord[d];
    return r;
}

/* A vs_mesh_desc with every zero-is-default resolved and checked (the one place
   its defaults live; vs_mesh_query_desc gives it back): comm (the world's), ndims
   (the leading non-zero sizes), dim_names ((DP), (DP,TP), (PP,DP,TP)). */
_VS_PRIVATE vs_result _vs_mesh_desc_defaults(vs_world* w, const vs_mesh_desc* d, vs_mesh_desc* out)
{
    if (d->comm) _VS_TRY(_vs_comm_get("vs_mesh_init: desc.comm", d->comm));
    *out = *d;
    if (!out->comm) out->comm = w->comm;
    vs_comm* c = out->comm;
    if (!c) return _vs_err(VS_ERR_STATE, "vs_mesh_init: the world has no communicator");
    int nd = d->ndims;
    if (nd < 0 || nd > VS_MESH_MAX_DIMS)
        return _vs_err(VS_ERR_INVALID, "vs_mesh_init: ndims %d out of range [1, %d]", nd, VS_MESH_MAX_DIMS);
    if (nd == 0)
        while (nd < VS_MESH_MAX_DIMS && d->shape[nd] != 0) nd++;
    // a 0 inside the shape ({2, 0, 2}) is a mistake, not the end of it
    for (int i = d->ndims ? VS_MESH_MAX_DIMS : nd; i < VS_MESH_MAX_DIMS; i++)
        if (d->shape[i] != 0)
            return _vs_err(VS_ERR_INVALID, "vs_mesh_init: shape[%d] = 0 but shape[%d] = %d: a dim of size 0 (sizes "
                                           "end at the first 0; set ndims to say how many)", nd, i, d->shape[i]);
    if (nd == 0) return _vs_err(VS_ERR_INVALID, "vs_mesh_init: shape is empty (shape[0] is 0)");
    out->ndims = nd;
    long prod = 1;
    char desc_txt[128] = "";
    for (int i = 0; i < nd; i++) {
        size_t l = strlen(desc_txt);
        snprintf(desc_txt + l, sizeof desc_txt - l, "%s%d", i ? "x" : "", d->shape[i]);
    }
    for (int i = 0; i < nd; i++) {
        if (d->shape[i] <= 0)
            return _vs_err(VS_ERR_INVALID, "vs_mesh_init: shape[%d] = %d must be >= 1 (shape %s)", i, d->shape[i],
                           desc_txt);
        prod *= d->shape[i];
        if (prod > INT_MAX) return _vs_err(VS_ERR_INVALID, "vs_mesh_init: shape %s is too large", desc_txt);
    }
    if (prod != c->size)
        return _vs_err(VS_ERR_MISMATCH, "vs_mesh_init: shape %s has %ld ranks but the communicator has %d",
                       desc_txt, prod, c->size);
    for (int i = 0; i < nd; i++) {
        const char* nm = d->dim_names[i];
        if (!nm) {
            if (nd > 3)
                return _vs_err(VS_ERR_INVALID, "vs_mesh_init: dim %d has no name (defaults exist for 1-3 dims, "
                               "this mesh has %d)", i, nd);
            nm = _vs_default_names[nd - 1][i];
        }
        size_t len = strlen(nm);
        if (len == 0 || len >= VS_MESH_NAME_MAX || strchr(nm, ',') || strchr(nm, ' '))
            return _vs_err(VS_ERR_INVALID, "vs_mesh_init: dim name '%s' must be 1-%d characters without ',' or ' '",
                           nm, VS_MESH_NAME_MAX - 1);
        for (int k = 0; k < i; k++)
            if (!strcmp(out->dim_names[k], nm))
                return _vs_err(VS_ERR_INVALID, "vs_mesh_init: dim name '%s' used twice (dims %d and %d)", nm, k, i);
        out->dim_names[i] = nm;
    }
    return VS_OK;
}

/* A collective of a few host values over c (gather 1: an all-gather of count
   each into recv; 0: an all-reduce with op). NCCL takes only device memory:
   there the values go through a device buffer on c's stream, read back with
   c's deadline and fault watch (vs_sync_stream). For set-up and recovery, not
   a steady-state step (it allocates and waits). fn names the caller. */
_VS_PRIVATE vs_result _vs_host_coll(vs_comm* c, int gather, const void* send, void* recv, size_t count, vs_dtype dt,
                                    vs_op op, const char* fn)
{
#ifdef VESCALE_NCCL
    if (c->tp->device) { // (NCCL's: only device memory)
        size_t sb = count * vs_dtype_size(dt), rb = gather ? sb * (size_t)c->size : sb;
        char* d = (char*)vs_device_alloc(c->world, sb + rb + 1);
        if (!d) return _vs_err(VS_ERR_NOMEM, "%s: %zu bytes of device memory", fn, sb + rb);
        cudaStream_t st = c->stream;
        cudaError_t e = cudaMemcpyAsync(d, send, sb, cudaMemcpyHostToDevice, st);
        vs_result r = e != cudaSuccess ? _vs_err(VS_ERR_BACKEND, "%s: %s", fn, cudaGetErrorString(e))
                      : gather         ? vs_all_gather(c, d, d + sb, count, dt, NULL)
                                       : vs_all_reduce(c, d, d + sb, count, dt, op, NULL);
        if (!r && (e = cudaMemcpyAsync(recv, d + sb, rb, cudaMemcpyDeviceToHost, st)) != cudaSuccess)
            r = _vs_err(VS_ERR_BACKEND, "%s: %s", fn, cudaGetErrorString(e));
        if (!r) r = vs_sync_stream(c, st);
        vs_device_free(c->world, d);
        return r;
    }
#endif
    (void)fn;
    return gather ? vs_all_gather(c, send, recv, count, dt, NULL) : vs_all_reduce(c, send, recv, count, dt, op, NULL);
}

/* Every rank's world rank over communicator c (host memory out). */
_VS_PRIVATE vs_result _vs_mesh_gather_ranks(vs_comm* c, int32_t mine, int32_t* all)
{
    return _vs_host_coll(c, 1, &mine, all, 1, VS_I32, VS_OP_SUM, "vs_mesh_init");
}

VS_API vs_result vs_mesh_init(vs_world* w, const vs_mesh_desc* desc, vs_mesh** out)
{
    _VS_CHECK_NULL(w, "world");
    _VS_CHECK_NULL(desc, "desc");
    _VS_CHECK_NULL(out, "out");
    *out = NULL;
    vs_mesh_desc rd;
    memset(&rd, 0, sizeof rd);
    _VS_TRY(_vs_mesh_desc_defaults(w, desc, &rd));
    vs_comm* c = rd.comm;
    int nd = rd.ndims;
    long prod = c->size;
    const _vs_hooks* h = &w->hooks;
    vs_mesh* m = _VS_HNEW(h, vs_mesh, 1);
    if (!m) return _vs_err(VS_ERR_NOMEM, "vs_mesh_init: out of memory");
    m->world = w;
    m->comm = c;
    m->ndims = nd;
    for (int i = 0; i < nd; i++) {
        memcpy(m->names[i], rd.dim_names[i], strlen(rd.dim_names[i]) + 1);
        m->shape[i] = rd.shape[i];
    }
    m->nranks = (int)prod;
    m->mrank = c->rank;
    _vs_mesh_coord_calc(m, m->mrank, m->coord);
    m->granks = _VS_HNEW(h, int, m->nranks);
    if (!m->granks) {
        _vs_hfree(h, m);
        return _vs_err(VS_ERR_NOMEM, "vs_mesh_init: out of memory");
    }
    if (c == w->comm) { // (its ranks in world order: all of them, or the live ones after a reconfiguration)
        for (int i = 0; i < m->nranks; i++) m->granks[i] = w->wranks ? w->wranks[i] : i;
    } else { // ranks of a sub-communicator: learn their world ranks
        int32_t mine = (int32_t)w->rank;
        int32_t* all = _VS_HNEW(h, int32_t, m->nranks);
        vs_result r = all ? _vs_mesh_gather_ranks(c, mine, all) : VS_ERR_NOMEM;
        if (r) {
            _vs_hfree(h, all);
            _vs_hfree(h, m->granks);
            _vs_hfree(h, m);
            return r == VS_ERR_NOMEM ? _vs_err(r, "vs_mesh_init: out of memory") : r;
        }
        for (int i = 0; i < m->nranks; i++) m->granks[i] = all[i];
        _vs_hfree(h, all);
    }
    *out = m;
    return VS_OK;
}

_VS_PRIVATE void _vs_mesh_mscratch_free(vs_mesh* m);
_VS_PRIVATE void* _vs_mesh_mscratch(vs_mesh* m, int i, size_t bytes);
_VS_PRIVATE void _vs_mesh_ids_free(vs_mesh* m);
_VS_PRIVATE vs_result _vs_dev_drain(vs_comm* c, const char* fn);
_VS_PRIVATE vs_result _vs_ids_reclaim(vs_mesh* tp, const char* fn, int wait);

/* The id checks still in flight on m and its submeshes, waited for (>>tp). */
_VS_PRIVATE vs_result _vs_mesh_ids_final(vs_mesh* m)
{
    vs_result r = VS_OK;
    for (int i = 0; i < m->nsubs; i++) {
        vs_result ri = _vs_mesh_ids_final(m->subs[i].mesh);
        if (!r) r = ri;
    }
    // (a communicator aborted before, a failed job's or one an elastic reform replaced: its waits answer at once,
    // and what they say is not the free's to report)
    int gone = m->comm && __atomic_load_n(&m->comm->aborted, __ATOMIC_ACQUIRE);
    while (m->idpend > 0) { // (every slot leaves the ring: the first error is kept)
        vs_result ri = _vs_ids_reclaim(m, "vs_mesh_free", 1);
        if (!r && !gone) r = ri;
    }
    return r;
}

/* Every device call on m and its submeshes done (_vs_dev_drain of each
   communicator): their scratch goes next. The first error is kept. */
_VS_PRIVATE vs_result _vs_mesh_drain(vs_mesh* m)
{
    vs_result r = VS_OK;
    for (int i = 0; i < m->nsubs; i++) {
        vs_result ri = _vs_mesh_drain(m->subs[i].mesh);
        if (!r) r = ri;
    }
    vs_result rc = m->comm ? _vs_dev_drain(m->comm, "vs_mesh_free") : VS_OK;
    return r ? r : rc;
}

_VS_PRIVATE void _vs_mesh_destroy(vs_mesh* m)
{
    for (int i = 0; i < m->nsubs; i++) _vs_mesh_destroy(m->subs[i].mesh);
    const _vs_hooks* h = _VS_WH(m->world);
    _vs_hfree(h, m->subs);
    for (int i = 0; i < 4; i++) _vs_hfree_aligned(h, m->scratch[i]);
    _vs_mesh_mscratch_free(m);
    if (m->owns_comm && m->comm) _vs_comm_destroy(m->comm);
    _vs_hfree(h, m->granks);
    _vs_hfree(h, m);
}

VS_API vs_result vs_mesh_retain(vs_mesh* m)
{
    _VS_CHECK_NULL(m, "mesh");
    _vs_mesh_root(m)->users++;
    return VS_OK;
}

VS_API vs_result vs_mesh_release(vs_mesh* m)
{
    _VS_CHECK_NULL(m, "mesh");
    vs_mesh* r = _vs_mesh_root(m);
    if (r->users <= 0) return _vs_err(VS_ERR_STATE, "vs_mesh_release: no vs_mesh_retain to release");
    r->users--;
    return VS_OK;
}

VS_API vs_result vs_mesh_query_desc(const vs_mesh* m, vs_mesh_desc* out)
{
    _VS_CHECK_NULL(m, "mesh");
    _VS_CHECK_NULL(out, "out");
    memset(out, 0, sizeof *out);
    out->ndims = m->ndims;
    for (int i = 0; i < m->ndims; i++) {
        out->shape[i] = m->shape[i];
        out->dim_names[i] = m->names[i];
    }
    out->comm = m->comm;
    return VS_OK;
}

VS_API vs_result vs_mesh_free(vs_mesh* m)
{
    if (!m) return VS_OK;
    if (m->parent)
        return _vs_err(VS_ERR_STATE, "vs_mesh_free: this is a submesh, owned and freed by its parent mesh; "
                                     "free the mesh vs_mesh_init returned");
    if (m->users > 0)
        return _vs_err(VS_ERR_STATE, "vs_mesh_free: %d handle(s) built on this mesh or a submesh (a vs_ddp, vs_pipe "
                                     "or vs_ckpt) are still alive: free them first (a training state's mesh, "
                                     "vs_train_mesh: vs_train_free frees it with them); the mesh is left as it was",
                       m->users);
    vs_result r = _vs_mesh_ids_final(m); // (an id out of range found after its call returned: reported, freed anyway)
    // device: the calls returned when enqueued; their work done before the frees, with the deadline (its error is
    // not the free's: an aborted communicator answers at once, as a failed job's survivors free theirs)
    (void)_vs_mesh_drain(m);
    _vs_mesh_destroy(m);
    return r;
}

VS_API int vs_mesh_ndims(const vs_mesh* m) { return m ? m->ndims : _vs_err(VS_ERR_NULL, "vs_mesh_ndims: mesh is NULL"); }

VS_API int vs_mesh_dim_index(const vs_mesh* m, const char* dim)
{
    if (!m) return _vs_err(VS_ERR_NULL, "vs_mesh_dim_index: mesh is NULL");
    if (!dim) return _vs_err(VS_ERR_NULL, "vs_mesh_dim_index: dim name is NULL");
    for (int i = 0; i < m->ndims; i++)
        if (!strcmp(m->names[i], dim)) return i;
    char have[VS_MESH_MAX_DIMS * (VS_MESH_NAME_MAX + 2)] = "";
    for (int i = 0; i < m->ndims; i++) {
        size_t l = strlen(have);
        snprintf(have + l, sizeof have - l, "%s%s", i ? ", " : "", m->names[i]);
    }
    return _vs_err(VS_ERR_INVALID, "mesh has no dim named '%s' (dims: %s)", dim, have);
}

VS_API const char* vs_mesh_dim_name(const vs_mesh* m, int i)
{
    if (!m) return _vs_err(VS_ERR_NULL, "vs_mesh_dim_name: mesh is NULL"), (const char*)NULL;
    if (i < 0 || i >= m->ndims)
        return _vs_err(VS_ERR_INVALID, "vs_mesh_dim_name: dim index %d out of range [0, %d)", i, m->ndims),
               (const char*)NULL;
    return m->names[i];
}

VS_API int vs_mesh_size(const vs_mesh* m, const char* dim)
{
    int i = vs_mesh_dim_index(m, dim);
    return i < 0 ? i : m->shape[i];
}

VS_API int vs_mesh_nranks(const vs_mesh* m) { return m ? m->nranks : _vs_err(VS_ERR_NULL, "vs_mesh_nranks: mesh is NULL"); }
VS_API int vs_mesh_rank(const vs_mesh* m) { return m ? m->mrank : _vs_err(VS_ERR_NULL, "vs_mesh_rank: mesh is NULL"); }

VS_API int vs_mesh_coord_along(const vs_mesh* m, const char* dim)
{
    int i = vs_mesh_dim_index(m, dim);
    return i < 0 ? i : m->coord[i];
}

VS_API vs_result vs_mesh_coord(const vs_mesh* m, int coord[VS_MESH_MAX_DIMS])
{
    _VS_CHECK_NULL(m, "mesh");
    _VS_CHECK_NULL(coord, "coord");
    memcpy(coord, m->coord, sizeof(int) * (size_t)m->ndims);
    return VS_OK;
}

_VS_PRIVATE vs_result _vs_mesh_check_rank(const char* fn, const vs_mesh* m, int r)
{
    if (r < 0 || r >= m->nranks)
        return _vs_err(VS_ERR_INVALID, "%s: mesh rank %d out of range [0, %d)", fn, r, m->nranks);
    return VS_OK;
}

VS_API vs_result vs_mesh_coord_of(const vs_mesh* m, int r, int coord[VS_MESH_MAX_DIMS])
{
    _VS_CHECK_NULL(m, "mesh");
    _VS_CHECK_NULL(coord, "coord");
    _VS_TRY(_vs_mesh_check_rank("vs_mesh_coord_of", m, r));
    _vs_mesh_coord_calc(m, r, coord);
    return VS_OK;
}

VS_API vs_result vs_mesh_rank_of(const vs_mesh* m, const int* coord, int* r)
{
    _VS_CHECK_NULL(m, "mesh");
    _VS_CHECK_NULL(coord, "coord");
    _VS_CHECK_NULL(r, "mesh_rank");
    for (int d = 0; d < m->ndims; d++)
        if (coord[d] < 0 || coord[d] >= m->shape[d])
            return _vs_err(VS_ERR_INVALID, "vs_mesh_rank_of: coordinate %d along %s out of range [0, %d)", coord[d],
                           m->names[d], m->shape[d]);
    *r = _vs_mesh_rank_calc(m, coord);
    return VS_OK;
}

VS_API int vs_mesh_global_rank(const vs_mesh* m, int r)
{
    if (!m) return _vs_err(VS_ERR_NULL, "vs_mesh_global_rank: mesh is NULL");
    vs_result e = _vs_mesh_check_rank("vs_mesh_global_rank", m, r);
    return e ? e : m->granks[r];
}

VS_API int vs_mesh_local_rank(const vs_mesh* m) { return m ? m->world->local_rank : _vs_err(VS_ERR_NULL, "vs_mesh_local_rank: mesh is NULL"); }
VS_API vs_comm* vs_mesh_comm(vs_mesh* m)
{
    if (!m) return _vs_err(VS_ERR_NULL, "vs_mesh_comm: mesh is NULL"), (vs_comm*)NULL;
    return m->comm;
}
VS_API vs_world* vs_mesh_world(vs_mesh* m)
{
    if (!m) return _vs_err(VS_ERR_NULL, "vs_mesh_world: mesh is NULL"), (vs_world*)NULL;
    return m->world;
}

/* "DP,TP" -> dim indices, in the order given. */
_VS_PRIVATE vs_result _vs_mesh_parse_dims(const char* fn, const vs_mesh* m, const char* dims, int* idx, int* n)
{
    if (!m) return _vs_err(VS_ERR_NULL, "%s: mesh is NULL", fn);
    if (!dims) return _vs_err(VS_ERR_NULL, "%s: dims is NULL", fn);
    *n = 0;
    const char* p = dims;
    for (;;) {
        const char* e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        while (len && (*p == ' ' || *p == '\t')) p++, len--; // "DP, TP" reads as "DP,TP"
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
        char name[VS_MESH_NAME_MAX];
        if (len == 0 || len >= sizeof name)
            return _vs_err(VS_ERR_INVALID, "%s: bad dims list '%.64s' (names separated by commas)", fn, dims);
        memcpy(name, p, len);
        name[len] = 0;
        int i = vs_mesh_dim_index(m, name);
        if (i < 0) {
            char why[256];
            _vs_save_error(why, sizeof why);
            return _vs_err(VS_ERR_INVALID, "%s: in dims '%.64s': %s", fn, dims, why);
        }
        for (int k = 0; k < *n; k++)
            if (idx[k] == i) return _vs_err(VS_ERR_INVALID, "%s: dim '%s' named twice in '%s'", fn, name, dims);
        if (*n == VS_MESH_MAX_DIMS) return _vs_err(VS_ERR_INVALID, "%s: too many dims in '%s'", fn, dims);
        idx[(*n)++] = i;
        if (!e) break;
        p = e + 1;
    }
    return VS_OK;
}

/* Mesh ranks of the group over dims idx[0..k) through the point `coord`, in
   row-major order of the dims as given. */
_VS_PRIVATE void _vs_mesh_members(const vs_mesh* m, const int* idx, int k, const int* coord, int* out)
{
    int c[VS_MESH_MAX_DIMS];
    memcpy(c, coord, sizeof c);
    int total = 1;
    for (int i = 0; i < k; i++) total *= m->shape[idx[i]];
    for (int j = 0; j < total; j++) {
        int r = j;
        for (int i = k - 1; i >= 0; i--) {
            c[idx[i]] = r % m->shape[idx[i]];
            r /= m->shape[idx[i]];
        }
        out[j] = _vs_mesh_rank_calc(m, c);
    }
}

VS_API vs_result vs_mesh_group_of(const vs_mesh* m, const char* dims, int mesh_rank, int* ranks, int cap, int* n)
{
    int idx[VS_MESH_MAX_DIMS], k;
    _VS_TRY(_vs_mesh_parse_dims("vs_mesh_group_of", m, dims, idx, &k));
    _VS_CHECK_NULL(ranks, "ranks");
    _VS_CHECK_NULL(n, "n");
    _VS_TRY(_vs_mesh_check_rank("vs_mesh_group_of", m, mesh_rank));
    int total = 1;
    for (int i = 0; i < k; i++) total *= m->shape[idx[i]];
    *n = total;
    if (cap < total) return _vs_err(VS_ERR_INVALID, "vs_mesh_group_of: cap %d < group size %d", cap, total);
    int coord[VS_MESH_MAX_DIMS] = {0};
    _vs_mesh_coord_calc(m, mesh_rank, coord);
    _vs_mesh_members(m, idx, k, coord, ranks);
    for (int j = 0; j < total; j++) ranks[j] = m->granks[ranks[j]];
    return VS_OK;
}

VS_API vs_result vs_mesh_groups(const vs_mesh* m, const char* dims, int* ranks, int cap, int* ngroups, int* group_size)
{
    int idx[VS_MESH_MAX_DIMS], k;
    _VS_TRY(_vs_mesh_parse_dims("vs_mesh_groups", m, dims, idx, &k));
    _VS_CHECK_NULL(ranks, "ranks");
    _VS_CHECK_NULL(ngroups, "ngroups");
    _VS_CHECK_NULL(group_size, "group_size");
    int in[VS_MESH_MAX_DIMS] = {0}, rest[VS_MESH_MAX_DIMS], nrest = 0;
    for (int i = 0; i < k; i++) in[idx[i]] = 1;
    for (int d = 0; d < m->ndims; d++)
        if (!in[d]) rest[nrest++] = d;
    int gs = 1, ng = 1;
    for (int i = 0; i < k; i++) gs *= m->shape[idx[i]];
    for (int i = 0; i < nrest; i++) ng *= m->shape[rest[i]];
    *ngroups = ng;
    *group_size = gs;
    if (cap < ng * gs)
        return _vs_err(VS_ERR_INVALID, "vs_mesh_groups: cap %d < %d groups x %d ranks", cap, ng, gs);
    for (int g = 0; g < ng; g++) {
        int coord[VS_MESH_MAX_DIMS] = {0}, r = g;
        for (int i = nrest - 1; i >= 0; i--) {
            coord[rest[i]] = r % m->shape[rest[i]];
            r /= m->shape[rest[i]];
        }
        _vs_mesh_members(m, idx, k, coord, ranks + (size_t)g * (size_t)gs);
        for (int j = 0; j < gs; j++) ranks[g * gs + j] = m->granks[ranks[g * gs + j]];
    }
    return VS_OK;
}

VS_API vs_result vs_mesh_submesh(vs_mesh* m, const char* dims, vs_mesh** out)
{
    int idx[VS_MESH_MAX_DIMS], k;
    _VS_TRY(_vs_mesh_parse_dims("vs_mesh_submesh", m, dims, idx, &k));
    _VS_CHECK_NULL(out, "out");
    *out = NULL;
    for (int i = 0; i < m->nsubs; i++)
        if (m->subs[i].ndims == k && !memcmp(m->subs[i].dims, idx, sizeof(int) * (size_t)k)) {
            *out = m->subs[i].mesh;
            return VS_OK;
        }
    const _vs_hooks* h = _VS_WH(m->world);
    _vs_subentry* grown = (_vs_subentry*)_vs_hrealloc(h, m->subs, sizeof *grown * (size_t)m->nsubs,
                                                      sizeof *grown * (size_t)(m->nsubs + 1));
    if (!grown) return _vs_err(VS_ERR_NOMEM, "vs_mesh_submesh: out of memory");
    m->subs = grown;
    // color: my position over the other dims; key: my position over `dims`
    int in[VS_MESH_MAX_DIMS] = {0}, color = 0, key = 0;
    for (int i = 0; i < k; i++) in[idx[i]] = 1;
    for (int d = 0; d < m->ndims; d++)
        if (!in[d]) color = color * m->shape[d] + m->coord[d];
    for (int i = 0; i < k; i++) key = key * m->shape[idx[i]] + m->coord[idx[i]];
    vs_mesh* s = _VS_HNEW(h, vs_mesh, 1);
    int gs = 1;
    for (int i = 0; i < k; i++) gs *= m->shape[idx[i]];
    int* members = s ? _VS_HNEW(h, int, gs) : NULL;
    vs_comm* sc = NULL;
    // the split is collective: every rank takes part even if its allocation failed
    vs_result r = vs_comm_split(m->comm, color, key, &sc);
    if (!r && (!s || !members)) r = _vs_err(VS_ERR_NOMEM, "vs_mesh_submesh: out of memory");
    if (r) {
        if (sc) _vs_comm_destroy(sc);
        _vs_hfree(h, members);
        _vs_hfree(h, s);
        return r;
    }
    sc->kind = _VS_COMM_MESH;
    {
        char names[VS_MESH_MAX_DIMS * (VS_MESH_NAME_MAX + 1)] = "", shape[160];
        for (int i = 0; i < k; i++)
            _vs_fmt(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? "," : "", m->names[idx[i]]);
        vs_mesh_describe(m, shape, sizeof shape);
        int* g = _VS_HNEW(h, int, gs);
        if (g) {
            _vs_mesh_members(m, idx, k, m->coord, g);
            for (int j = 0; j < gs; j++) g[j] = m->granks[g[j]];
            char what[VS_MESH_MAX_DIMS * (VS_MESH_NAME_MAX + 1) + 8];
            _vs_fmt(what, sizeof what, "%s group", names);
            _vs_comm_label_members(sc, what, g, gs, NULL);
            size_t len = strlen(sc->label);
            _vs_fmt(sc->label + len, sizeof sc->label - len, " of mesh %s", shape);
            _vs_hfree(h, g);
        }
    }
    s->parent = m;
    s->world = m->world;
    s->comm = sc;
    s->owns_comm = 1;
    s->ndims = k;
    for (int i = 0; i < k; i++) {
        s->shape[i] = m->shape[idx[i]];
        memcpy(s->names[i], m->names[idx[i]], VS_MESH_NAME_MAX);
        s->coord[i] = m->coord[idx[i]];
    }
    s->nranks = gs;
    s->mrank = key;
    _vs_mesh_members(m, idx, k, m->coord, members);
    for (int j = 0; j < gs; j++) members[j] = m->granks[members[j]];
    s->granks = members;
    VS_ASSERT(sc->rank == key && sc->size == gs);
    _vs_subentry* e = &m->subs[m->nsubs++];
    memset(e, 0, sizeof *e);
    memcpy(e->dims, idx, sizeof(int) * (size_t)k);
    e->ndims = k;
    e->mesh = s;
    *out = s;
    return VS_OK;
}

VS_API vs_result vs_mesh_neighbor(const vs_mesh* m, const char* dim, int offset, int wrap, int* global_rank,
                                  int* mesh_rank)
{
    int d = vs_mesh_dim_index(m, dim);
    if (d < 0) return d;
    _VS_CHECK_NULL(global_rank, "global_rank");
    int c[VS_MESH_MAX_DIMS];
    memcpy(c, m->coord, sizeof c);
    long v = (long)c[d] + offset, n = m->shape[d];
    if (wrap)
        v = ((v % n) + n) % n;
    else if (v < 0 || v >= n) {
        *global_rank = -1;
        if (mesh_rank) *mesh_rank = -1;
        return VS_OK;
    }
    c[d] = (int)v;
    int r = _vs_mesh_rank_calc(m, c);
    *global_rank = m->granks[r];
    if (mesh_rank) *mesh_rank = r;
    return VS_OK;
}

VS_API int vs_mesh_is_first(const vs_mesh* m, const char* dim)
{
    int d = vs_mesh_dim_index(m, dim);
    return d < 0 ? d : m->coord[d] == 0;
}

VS_API int vs_mesh_is_last(const vs_mesh* m, const char* dim)
{
    int d = vs_mesh_dim_index(m, dim);
    return d < 0 ? d : m->coord[d] == m->shape[d] - 1;
}

VS_API int vs_mesh_describe(const vs_mesh* m, char* buf, size_t cap)
{
    if (!m) return _vs_err(VS_ERR_NULL, "vs_mesh_describe: mesh is NULL");
    char tmp[VS_MESH_MAX_DIMS * (VS_MESH_NAME_MAX + 16) + 4];
    size_t l = 0;
    tmp[l++] = '(';
    for (int i = 0; i < m->ndims; i++)
        l += (size_t)snprintf(tmp + l, sizeof tmp - l, "%s%s=%d", i ? ", " : "", m->names[i], m->shape[i]);
    l += (size_t)snprintf(tmp + l, sizeof tmp - l, ")");
    if (buf && cap) snprintf(buf, cap, "%s", tmp);
    return (int)l;
}


// >>store ---------------------------------------------------------------------
/* The store of an NCCL job of processes (vs_world_desc.elastic_dir): the side
   channel its survivors agree through (NCCL cannot: its communicators are what
   failed; and no rank, rank 0 included, is needed alive). Two kinds, a table
   each (struct _vs_store_ops):
     directory   one every rank sees; an entry is a file
     lighthouse  "tcp://host:port": a vs_lighthouse's memory (>>lighthouse)

   Entries are small texts named vs-<job key>-<what>, written beside the name
   and renamed over it (replaced), or linked to it (the first one wins: a
   decision, a first notice):
     f<E>      the first failure notice of epoch E: "<origin> <message>"
     f<E>r<R>  world rank R failed at epoch E (it said so: vs_world_abort)
     a<E>s<R>  world rank R arrived at the shrink from epoch E: "<can ncclCommShrink>"
     a<E>g<R>  ... at the grow from epoch E
     j<R>      world rank R asks to come in: "<nonce> <pid> <host>"
     p<R>      world rank R's process: "<pid> <host>" (removed by vs_world_free)
     d<E>      the decision that made epoch E (linked: there is one)

   The agreement over them: >>elastic. Left in a directory: the decisions (a
   few hundred bytes each); remove it with the job. */

/* The lighthouse's wire format, integers big-endian:
     hello    "vsH1", flags (bit 0: requests must be signed), 16-byte nonce:
              its first words on a connection (when it takes no more: a
              refusal instead, an answer of status 2)
     request  "vsl2", op, key length, value length (4 bytes each), sequence
              (8), MAC (32), key, value
     answer   "vsL1", status, value length (4 bytes each), value

   Status:
     0  done
     1  LINK found the entry there; GET found none
     2  refused by a limit (the value says which)
     3  not signed by the lighthouse's token (the connection is then closed)

   Ops:
     PUT   replace
     LINK  create (status 1: it was there, unchanged)
     GET   read (status 1: missing)
     DEL   remove
     OWN   PUT, and the entry is this connection's: when the connection ends
           holding it, its value becomes "gone" and the lighthouse's count of
           those rises (how the others learn that a process ended, on any host)
     GONE  that count, as text
     LIST  the keys that begin with the key, one a line

   Signing (with a token): the MAC is HMAC-SHA256 under it of the nonce, the
   request's first 24 bytes, its key and its value; the sequence counts the
   connection's requests from 1. A request captured on one connection is
   refused on another (another nonce) and again on its own (an old number).
   Without a token the MAC and sequence are not looked at. */
enum { _VS_LH_PUT = 1, _VS_LH_LINK, _VS_LH_GET, _VS_LH_DEL, _VS_LH_OWN, _VS_LH_GONE, _VS_LH_LIST };
#define _VS_LH_MAGIC 0x76736c32u  /* "vsl2" */
#define _VS_LH_ANSWER 0x76734c31u /* "vsL1" */
#define _VS_LH_HELLO 0x76734831u  /* "vsH1" */
#define _VS_LH_REQ 56             /* a request's fixed part */
#define _VS_LH_HELLO_LEN 24
#define _VS_LH_KEY_MAX 512u       /* a longer key closes the connection */

/* A store's operations (w->store; every path is a name _vs_store_name made). */
struct _vs_store_ops {
    const char* what; // "directory", "lighthouse" (messages)
    int watched;      // 1: the world's watcher looks at it; a collective's poll only reads what it found
    int owns_entries; // 1: an entry written with excl 2 reads "gone" once its process ended
    vs_result (*open)(vs_world* w, const char* addr, const char* token); // reaches it; sets w->ekey
    vs_result (*start)(vs_world* w); // once this rank's entry is there (NULL: nothing)
    void (*stop)(vs_world* w);       // before it goes (NULL: nothing)
    void (*close)(vs_world* w);      // after (NULL: nothing)
    int (*prefix)(const vs_world* w, char* buf, size_t cap); // where the job's names begin (snprintf's result)
    int (*write)(vs_world* w, const char* path, const char* text, int excl); // _vs_dir_write says how
    long (*read)(vs_world* w, const char* path, char* buf, size_t cap);      // its length, 0 missing, -1 errno
    int (*has)(vs_world* w, const char* path);
    void (*del)(vs_world* w, const char* path);
    const char* (*why)(vs_world* w, int e, char* buf, size_t cap); // its own text for errno e (NULL: strerror's)
    int (*liveness)(vs_world* w, int64_t now, int64_t last); // a look at the members' processes: 1 when one ended
    int (*joining)(vs_world* w, int x); // 1: world rank x asks to come in
};

/* SHA-256 (FIPS 180-4) and HMAC (RFC 2104): the lighthouse's signatures. */
typedef struct _vs_sha256 {
    uint32_t h[8];
    uint64_t len;
    unsigned char blk[64];
    size_t used;
} _vs_sha256;

_VS_PRIVATE void _vs_sha256_init(_vs_sha256* s)
{
    static const uint32_t h0[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                                   0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
    memcpy(s->h, h0, sizeof h0);
    s->len = 0, s->used = 0;
}

#define _VS_ROR32(x, n) (((x) >> (n)) | ((x) << (32 - (n))))
_VS_PRIVATE void _vs_sha256_block(_vs_sha256* s, const unsigned char* p)
{
    static const uint32_t k[64] = {
        0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u, 0xab1c5ed5u,
        0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu, 0x9bdc06a7u, 0xc19bf174u,
        0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu, 0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau,
        0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u, 0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u,
        0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu, 0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u,
        0xa2bfe8a1u, 0xa81a664bu, 0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u,
        0x19a4c116u, 0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
        0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u, 0xc67178f2u};
    uint32_t m[64], v[8];
    for (int i = 0; i < 16; i++) m[i] = _vs_be_get32(p + 4 * i);
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = _VS_ROR32(m[i - 15], 7) ^ _VS_ROR32(m[i - 15], 18) ^ (m[i - 15] >> 3);
        uint32_t s1 = _VS_ROR32(m[i - 2], 17) ^ _VS_ROR32(m[i - 2], 19) ^ (m[i - 2] >> 10);
        m[i] = m[i - 16] + s0 + m[i - 7] + s1;
    }
    memcpy(v, s->h, sizeof v);
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = v[7] + (_VS_ROR32(v[4], 6) ^ _VS_ROR32(v[4], 11) ^ _VS_ROR32(v[4], 25)) +
                      ((v[4] & v[5]) ^ (~v[4] & v[6])) + k[i] + m[i];
        uint32_t t2 = (_VS_ROR32(v[0], 2) ^ _VS_ROR32(v[0], 13) ^ _VS_ROR32(v[0], 22)) +
                      ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
        memmove(v + 1, v, 7 * sizeof v[0]);
        v[4] += t1;
        v[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++) s->h[i] += v[i];
}
#undef _VS_ROR32

_VS_PRIVATE void _vs_sha256_add(_vs_sha256* s, const void* data, size_t n)
{
    const unsigned char* p = (const unsigned char*)data;
    s->len += n;
    while (n) {
        size_t k = 64 - s->used < n ? 64 - s->used : n;
        memcpy(s->blk + s->used, p, k);
        s->used += k, p += k, n -= k;
        if (s->used == 64) _vs_sha256_block(s, s->blk), s->used = 0;
    }
}

_VS_PRIVATE void _vs_sha256_end(_vs_sha256* s, unsigned char out[32])
{
    unsigned char pad[72] = {0x80};
    uint64_t bits = s->len * 8;
    size_t k = (s->used < 56 ? 56 : 120) - s->used;
    _vs_be_put64(pad + k, bits);
    _vs_sha256_add(s, pad, k + 8);
    for (int i = 0; i < 8; i++) _vs_be_put32(out + 4 * i, s->h[i]);
}

/* HMAC-SHA256 under key of the n parts. */
_VS_PRIVATE void _vs_hmac_sha256(const char* key, size_t klen, const void* const* part, const size_t* len, int n,
                                 unsigned char out[32])
{
    unsigned char k[64], pad[64];
    _vs_sha256 s;
    memset(k, 0, sizeof k);
    if (klen > 64) {
        _vs_sha256_init(&s);
        _vs_sha256_add(&s, key, klen);
        _vs_sha256_end(&s, k);
    } else if (klen) {
        memcpy(k, key, klen);
    }
    for (int i = 0; i < 64; i++) pad[i] = (unsigned char)(k[i] ^ 0x36);
    _vs_sha256_init(&s);
    _vs_sha256_add(&s, pad, 64);
    for (int i = 0; i < n; i++) _vs_sha256_add(&s, part[i], len[i]);
    _vs_sha256_end(&s, out);
    for (int i = 0; i < 64; i++) pad[i] = (unsigned char)(k[i] ^ 0x5c);
    _vs_sha256_init(&s);
    _vs_sha256_add(&s, pad, 64);
    _vs_sha256_add(&s, out, 32);
    _vs_sha256_end(&s, out);
}

/* A request's fixed part (h: _VS_LH_REQ bytes), signed under token (""
   none: the MAC stays zero) for the connection whose hello gave nonce. */
_VS_PRIVATE void _vs_lh_request_head(unsigned char* h, uint32_t op, const char* key, size_t klen, const void* val,
                                     size_t vlen, uint64_t seq, const char* token, const unsigned char* nonce)
{
    memset(h, 0, _VS_LH_REQ);
    _vs_be_put32(h, _VS_LH_MAGIC);
    _vs_be_put32(h + 4, op);
    _vs_be_put32(h + 8, (uint32_t)klen);
    _vs_be_put32(h + 12, (uint32_t)vlen);
    _vs_be_put64(h + 16, seq);
    if (!token || !*token) return;
    const void* part[4] = {nonce, h, key, val ? val : ""};
    size_t len[4] = {16, 24, klen, vlen};
    _vs_hmac_sha256(token, strlen(token), part, len, 4, h + 24);
}

/* a == b over n bytes, in a time that does not depend on where they differ */
_VS_PRIVATE int _vs_same_bytes(const unsigned char* a, const unsigned char* b, size_t n)
{
    unsigned char d = 0;
    for (size_t i = 0; i < n; i++) d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

/* How long a request to the lighthouse may go unanswered: the world's
   lighthouse_wait_s (resolved by vs_world_init), else (a world made another
   way, a test's by hand) the default. */
_VS_PRIVATE double _vs_lh_wait(const vs_world* w) { return w->ewait > 0 ? w->ewait : _VS_LH_ANSWER_S; }

/* The world's side of the lighthouse: one connection, one request at a time
   (the watcher and the agreement share it). The answer's status (0; 1: LINK
   found the entry there, GET found none), or -1 with errno: ENOSPC or
   EACCES when the lighthouse refused it (w->ewhy says why), ENOTCONN when
   it cannot be reached. A request not answered within _vs_lh_wait gives
   the lighthouse up for good on this rank: said once in the log, and the
   job trains on without surviving a failure. The connection then stays
   open (closed, the lighthouse would count this process as ended). A GET's
   value goes to out (cap bytes, NUL-terminated; what does not fit is
   dropped), its length to *len. */
_VS_PRIVATE int _vs_lh_call(vs_world* w, uint32_t op, const char* key, const char* val, char* out, size_t cap,
                            size_t* len)
{
    size_t klen = strlen(key), vlen = val ? strlen(val) : 0, got = 0;
    unsigned char h[_VS_LH_REQ];
    char msg[_VS_ERR_MSG] = "";
    int st = -1, err = ENOTCONN;
    if (w->efd < 0) { // (never connected: a world whose vs_world_init failed on the way)
        if (len) *len = 0;
        errno = ENOTCONN;
        return -1;
    }
    pthread_mutex_lock(&w->emu);
    if (w->efd >= 0 && w->ebadtoken) { // (refused as unsigned: the lighthouse closed the connection)
        err = EACCES;
    } else if (w->efd >= 0 && !__atomic_load_n(&w->elost, __ATOMIC_ACQUIRE)) {
        _vs_lh_request_head(h, op, key, klen, val, vlen, ++w->eseq, w->etoken, w->elh_nonce);
        const double give_up = _vs_lh_wait(w), until = _vs_now() + give_up;
        const char* what = "lighthouse";
        vs_result r = _vs_io_full_as(w->efd, h, sizeof h, 1, until, what);
        if (!r) r = _vs_io_full_as(w->efd, (void*)(uintptr_t)key, klen, 1, until, what);
        if (!r && vlen) r = _vs_io_full_as(w->efd, (void*)(uintptr_t)val, vlen, 1, until, what);
        if (!r) r = _vs_io_full_as(w->efd, h, 12, 0, until, what);
        if (!r && _vs_be_get32(h) != _VS_LH_ANSWER) r = _vs_err(VS_ERR_IO, "it answered 0x%08x", _vs_be_get32(h));
        uint32_t status = r ? 0 : _vs_be_get32(h + 4);
        if (status >= 2) out = w->ewhy, cap = sizeof w->ewhy; // (a refusal: its reason)
        for (size_t n = r ? 0 : _vs_be_get32(h + 8); !r && got < n;) { // (what does not fit in out: read, dropped)
            char sink[256];
            size_t room = out && got + 1 < cap ? cap - 1 - got : 0, k = n - got;
            if (!room && k > sizeof sink) k = sizeof sink;
            if (room && k > room) k = room;
            r = _vs_io_full_as(w->efd, room ? out + got : sink, k, 0, until, what);
            got += k;
        }
        if (!r) {
            st = status >= 2 ? -1 : (int)status;
            err = status == 3 ? EACCES : ENOSPC;
            w->ebadtoken |= status == 3;
            if (out && cap) out[got < cap ? got : cap - 1] = 0;
        } else {
            if (r == VS_ERR_TIMEOUT)
                snprintf(msg, sizeof msg, "waited %g s", give_up);
            else
                _vs_save_error(msg, sizeof msg);
            __atomic_store_n(&w->elost, 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&w->emu);
    if (msg[0]) vs_log(w, VS_LOG_WARN, "elastic: the lighthouse at %s does not answer (%s): this job can no longer "
                       "survive a failure (it trains on)", w->elastic_dir, msg);
    if (len) *len = st == 0 && out && cap ? (got < cap ? got : cap - 1) : 0;
    if (st < 0) errno = err;
    return st;
}

/* The store table's why: the lighthouse's reason for errno e, in buf (ewhy
   copied under emu: the watcher may be writing it), or NULL: strerror's. */
_VS_PRIVATE const char* _vs_lh_store_why(vs_world* w, int e, char* buf, size_t cap)
{
    if (e == EACCES || e == ENOSPC) {
        pthread_mutex_lock(&w->emu);
        snprintf(buf, cap, "%s", w->ewhy);
        pthread_mutex_unlock(&w->emu);
        if (buf[0]) return buf;
    }
    return e == ENOTCONN ? "the lighthouse does not answer (given up: see the log)" : NULL;
}

/* vs_world_init: the world's connection to the lighthouse at elastic_dir
   ("tcp://host:port"), tried until the world's timeout (it may come up after
   the ranks), and the lighthouse's hello read. */
_VS_PRIVATE vs_result _vs_lh_open(vs_world* w, const char* token)
{
    char host[256];
    const char* hp = w->elastic_dir + 6;
    const char* colon = strrchr(hp, ':');
    char* end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : 0;
    size_t hl = colon ? (size_t)(colon - hp) : 0;
    if (hl >= 2 && hp[0] == '[' && hp[hl - 1] == ']') hp++, hl -= 2; // ("[::1]:29400")
    if (!colon || !hl || hl >= sizeof host || !end || *end || end == colon + 1 || port < 1 || port > 65535)
        return _vs_err(VS_ERR_INVALID, "vs_world_init: elastic_dir '%s' is not tcp://host:port (a lighthouse's "
                       "address, port in [1, 65535])", w->elastic_dir);
    if (token && strlen(token) > _VS_LH_TOKEN_MAX)
        return _vs_err(VS_ERR_INVALID, "vs_world_init: the lighthouse token is %zu bytes, over %d", strlen(token),
                       _VS_LH_TOKEN_MAX);
    snprintf(w->etoken, sizeof w->etoken, "%s", token ? token : "");
    memcpy(host, hp, hl);
    host[hl] = 0;
    struct addrinfo* ai = NULL;
    int gr = _vs_tcp_resolve(host, port, 0, &ai);
    if (gr != 0)
        return _vs_err_backend(VS_ERR_IO, gr, "vs_world_init: cannot resolve the lighthouse's host '%s': %s", host,
                               gai_strerror(gr));
    double deadline = _vs_now() + (w->timeout > 0 ? w->timeout : 300);
    int err = 0, fd = -1;
    for (int attempt = 0; fd < 0 && (attempt == 0 || _vs_now() < deadline); attempt++) {
        if (attempt) _vs_sleep_us(20000);
        fd = _vs_rdv_connect(ai, deadline, &err);
    }
    freeaddrinfo(ai);
    if (fd < 0)
        return _vs_err_backend(VS_ERR_IO, err, "vs_world_init: rank %d cannot reach the lighthouse at %s within %g s: "
                               "%s (start one there: tools/vescale-lighthouse, or vs_lighthouse_start)", w->rank,
                               w->elastic_dir, w->timeout, strerror(err));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    unsigned char hello[_VS_LH_HELLO_LEN];
    double until = _vs_now() + _vs_lh_wait(w);
    vs_result r = _vs_io_full_as(fd, hello, 12, 0, until, "the lighthouse");
    if (!r && _vs_be_get32(hello) == _VS_LH_ANSWER) { // (turned away: why)
        char why[201] = "";
        size_t n = _vs_be_get32(hello + 8) < 200 ? _vs_be_get32(hello + 8) : 200;
        if (_vs_io_full_as(fd, why, n, 0, until, "the lighthouse") == VS_OK) why[n] = 0;
        close(fd);
        return _vs_err(VS_ERR_IO, "vs_world_init: rank %d: the lighthouse at %s turned this connection away: %s",
                       w->rank, w->elastic_dir, why);
    }
    if (!r) r = _vs_io_full_as(fd, hello + 12, sizeof hello - 12, 0, until, "the lighthouse");
    if (!r && _vs_be_get32(hello) != _VS_LH_HELLO)
        r = _vs_err(VS_ERR_IO, "it greeted with 0x%08x, not a vescale lighthouse's hello", _vs_be_get32(hello));
    if (r) {
        char msg[_VS_ERR_MSG];
        _vs_save_error(msg, sizeof msg);
        close(fd);
        return _vs_err(VS_ERR_IO, "vs_world_init: rank %d: the lighthouse at %s: %s", w->rank, w->elastic_dir, msg);
    }
    int auth = _vs_be_get32(hello + 4) & 1;
    if (auth && !w->etoken[0]) {
        close(fd);
        return _vs_err(VS_ERR_INVALID, "vs_world_init: the lighthouse at %s takes only requests signed by its token: "
                       "give the job's (vs_world_desc.elastic_token or VESCALE_LIGHTHOUSE_TOKEN)", w->elastic_dir);
    }
    if (!auth) // (the token is not needed there: said, the job goes on)
        vs_log(w, w->etoken[0] ? VS_LOG_WARN : VS_LOG_INFO, "elastic: the lighthouse at %s checks no token: anyone "
               "who reaches it can end this job%s", w->elastic_dir, w->etoken[0] ? " (this rank's token is not used)" : "");
    if (!auth) w->etoken[0] = 0;
    memcpy(w->elh_nonce, hello + 8, 16);
    pthread_mutex_init(&w->emu, NULL);
    w->efd = fd;
    return VS_OK;
}

/* The store table's open: the connection, and the job's key (it leaves the
   address out: ranks may spell it apart). */
_VS_PRIVATE vs_result _vs_lh_store_open(vs_world* w, const char* addr, const char* token)
{
    _VS_TRY(_vs_lh_open(w, token));
    char place[48];
    snprintf(place, sizeof place, "lighthouse port %s", strrchr(addr, ':') + 1);
    w->ekey = _vs_job_key(place, "the lighthouse's port (no run id: one job a lighthouse)", w->size, NULL);
    return VS_OK;
}

/* The store table's close: the connection (its entry gone first). */
_VS_PRIVATE void _vs_lh_store_close(vs_world* w)
{
    if (w->efd < 0) return;
    close(w->efd);
    pthread_mutex_destroy(&w->emu);
    w->efd = -1;
}

/* The watcher of a world whose store is a lighthouse: it looks there for a
   failure notice every 50 ms, for ended processes and replacements every
   200 ms, so that a collective's wait only reads what it found (never waits
   on the lighthouse: a stopped or unreachable one cannot take a wait's
   time). */
_VS_PRIVATE int _vs_store_look(vs_world* w, int64_t now);
_VS_PRIVATE void _vs_lh_joiners_look(vs_world* w);

_VS_PRIVATE void* _vs_lh_watch_main(void* arg)
{
    vs_world* w = (vs_world*)arg;
    double joiners = 0;
    pthread_mutex_lock(&w->ewmu);
    while (!w->ew_stop) {
        pthread_mutex_unlock(&w->ewmu);
        double now = _vs_now();
        if (!__atomic_load_n(&w->elost, __ATOMIC_ACQUIRE)) {
            if (!__atomic_load_n(&w->fail_seen, __ATOMIC_ACQUIRE)) _vs_store_look(w, (int64_t)(now * 1e6));
            if (now - joiners >= 0.2) joiners = now, _vs_lh_joiners_look(w);
        }
        pthread_mutex_lock(&w->ewmu);
        if (!w->ew_stop) {
            struct timespec ts = _vs_abs_deadline(0.05);
            pthread_cond_timedwait(&w->ewcv, &w->ewmu, &ts);
        }
    }
    pthread_mutex_unlock(&w->ewmu);
    return NULL;
}

_VS_PRIVATE vs_result _vs_lh_watch_start(vs_world* w)
{
    pthread_mutex_init(&w->ewmu, NULL);
    _vs_cond_init(&w->ewcv);
    if (pthread_create(&w->ew, NULL, _vs_lh_watch_main, w) != 0) {
        pthread_cond_destroy(&w->ewcv);
        pthread_mutex_destroy(&w->ewmu);
        return _vs_err(VS_ERR_NOMEM, "vs_world_init: cannot start the lighthouse's watcher thread");
    }
    w->ew_on = 1;
    return VS_OK;
}

_VS_PRIVATE void _vs_lh_watch_stop(vs_world* w)
{
    if (!w->ew_on) return;
    pthread_mutex_lock(&w->ewmu);
    w->ew_stop = 1;
    pthread_cond_signal(&w->ewcv);
    pthread_mutex_unlock(&w->ewmu);
    pthread_join(w->ew, NULL);
    pthread_cond_destroy(&w->ewcv);
    pthread_mutex_destroy(&w->ewmu);
    w->ew_on = 0;
}

#define _VS_STORE_PATH (_VS_INIT_FILE_MAX + 160)

/* Where the names of w's job begin: a directory's files, a lighthouse's keys. */
_VS_PRIVATE int _vs_dir_prefix(const vs_world* w, char* buf, size_t cap)
{
    return snprintf(buf, cap, "%s/vs-%016llx-", w->elastic_dir, (unsigned long long)w->ekey);
}
_VS_PRIVATE int _vs_lh_store_prefix(const vs_world* w, char* buf, size_t cap)
{
    return snprintf(buf, cap, "vs-%016llx-", (unsigned long long)w->ekey);
}

_VS_PRIVATE _VS_PRINTF(4, 5) void _vs_store_name(const vs_world* w, char* buf, size_t cap, const char* fmt, ...)
{
    int k = w->store->prefix(w, buf, cap);
    va_list ap;
    va_start(ap, fmt);
    if (k > 0 && (size_t)k < cap) vsnprintf(buf + k, cap - (size_t)k, fmt, ap);
    va_end(ap);
}

/* The store table's write: text to path: renamed over it (excl 0), or linked
   (excl 1: 1 when it was there first); excl 2: as 0, and on a lighthouse the
   entry is this process's (it reads "gone" once the process has ended). -1
   with errno on an error. */
_VS_PRIVATE int _vs_lh_store_write(vs_world* w, const char* path, const char* text, int excl)
{
    return _vs_lh_call(w, excl == 1 ? _VS_LH_LINK : excl == 2 ? _VS_LH_OWN : _VS_LH_PUT, path, text, NULL, 0, NULL);
}
_VS_PRIVATE int _vs_dir_write(vs_world* w, const char* path, const char* text, int excl)
{
    char tmp[_VS_STORE_PATH + 64];
    snprintf(tmp, sizeof tmp, "%s.t%d.%ld.%llx", path, w->rank, (long)getpid(), (unsigned long long)_vs_random64());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644), e = 0, res = 0;
    if (fd < 0) return -1;
    size_t n = strlen(text);
    for (size_t off = 0; off < n && !e;) {
        ssize_t k = write(fd, text + off, n - off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) e = k < 0 ? errno : EIO;
        else off += (size_t)k;
    }
    if (close(fd) != 0 && !e) e = errno;
    if (!e && excl == 1 && link(tmp, path) != 0) {
        if (errno == EEXIST) res = 1;
        else e = errno;
    }
    if (!e && excl != 1 && rename(tmp, path) != 0) e = errno;
    if (excl == 1 || e) unlink(tmp);
    if (e) errno = e;
    return e ? -1 : res;
}

/* The store table's read: the entry at path, NUL-terminated, in buf: its
   length, 0 when missing (or empty), -1 on an error (errno). */
_VS_PRIVATE long _vs_lh_store_read(vs_world* w, const char* path, char* buf, size_t cap)
{
    size_t len = 0;
    int st = _vs_lh_call(w, _VS_LH_GET, path, NULL, buf, cap, &len);
    if (st != 0) buf[0] = 0;
    return st < 0 ? -1 : st ? 0 : (long)len;
}
_VS_PRIVATE long _vs_dir_read(vs_world* w, const char* path, char* buf, size_t cap)
{
    (void)w;
    size_t got = 0;
    int fr = _vs_file_slurp(path, (unsigned char*)buf, cap - 1, &got);
    buf[fr == _VS_FILE_OK ? got : 0] = 0;
    return fr == _VS_FILE_ERROR ? -1 : (long)(fr == _VS_FILE_OK ? got : 0);
}

/* The store table's has: 1 when path is there. */
_VS_PRIVATE int _vs_lh_store_has(vs_world* w, const char* path)
{
    char t[8];
    return _vs_lh_call(w, _VS_LH_GET, path, NULL, t, sizeof t, NULL) == 0;
}
_VS_PRIVATE int _vs_dir_has(vs_world* w, const char* path)
{
    (void)w;
    return access(path, F_OK) == 0;
}

_VS_PRIVATE void _vs_lh_store_del(vs_world* w, const char* path) { _vs_lh_call(w, _VS_LH_DEL, path, NULL, NULL, 0, NULL); }
_VS_PRIVATE void _vs_dir_del(vs_world* w, const char* path)
{
    (void)w;
    unlink(path);
}

/* The store's operations, through its table (w->store). */
_VS_PRIVATE int _vs_store_write(vs_world* w, const char* path, const char* text, int excl)
{
    return w->store->write(w, path, text, excl);
}
_VS_PRIVATE long _vs_store_read(vs_world* w, const char* path, char* buf, size_t cap)
{
    return w->store->read(w, path, buf, cap);
}
_VS_PRIVATE int _vs_store_has(vs_world* w, const char* fmt, int a, int b)
{
    char path[_VS_STORE_PATH], sfx[64];
    snprintf(sfx, sizeof sfx, fmt, a, b);
    _vs_store_name(w, path, sizeof path, "%s", sfx);
    return w->store->has(w, path);
}
_VS_PRIVATE void _vs_store_del(vs_world* w, const char* path) { w->store->del(w, path); }
/* Why the last store call on w failed (errno as it left it), in buf. */
_VS_PRIVATE const char* _vs_store_why(vs_world* w, char* buf, size_t cap)
{
    int e = errno;
    const char* m = w->store->why ? w->store->why(w, e, buf, cap) : NULL;
    if (m) return m;
    snprintf(buf, cap, "%s", strerror(e));
    return buf;
}

/* This host as the store's entries name it: "<hostname>/<boot id>.<pid
   namespace>", so that two containers with one hostname (one boot, two pid
   namespaces) or two machines with one name (two boots) are two hosts, and
   a pid is looked at (kill(pid, 0)) only where it means this process's
   neighbour. Parts that cannot be read are left out (the hostname alone:
   the old behaviour). */
_VS_PRIVATE void _vs_host_id(char* buf, size_t cap)
{
    char host[128] = "?", boot[64] = "";
    gethostname(host, sizeof host - 1);
    host[strcspn(host, " \t\n")] = 0;
    FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        size_t k = 0;
        for (int ch; (ch = fgetc(f)) != EOF && ch != '\n' && k < 12;)
            if (ch != '-') boot[k++] = (char)ch;
        boot[k] = 0;
        fclose(f);
    }
    struct stat ns;
    if (stat("/proc/self/ns/pid", &ns) == 0)
        snprintf(buf, cap, "%s/%s.%llu", host, boot[0] ? boot : "-", (unsigned long long)ns.st_ino);
    else
        snprintf(buf, cap, "%s%s%s", host, boot[0] ? "/" : "", boot);
}

/* The members whose process _vs_store_poll watches: the world communicator's
   ranks (none while it is being replaced: (re)set at vs_world_init's end and
   after each agreement, by the thread that makes them). */
_VS_PRIVATE void _vs_store_members(vs_world* w)
{
    for (int x = 0; x < w->size; x++) __atomic_store_n(&w->epid[x], 0, __ATOMIC_RELEASE);
    for (int i = 0; w->comm && i < w->comm->size; i++) {
        int x = w->wranks ? w->wranks[i] : i;
        if (x != w->rank) __atomic_store_n(&w->epid[x], -1, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&w->elive_us, (int64_t)0, __ATOMIC_RELEASE);
    __atomic_store_n(&w->egone, (uint64_t)0, __ATOMIC_RELEASE);
}

/* Posts a notice at the world's epoch, naming world rank `origin`: the
   epoch's first one when none is there, and with failed (origin failed) its
   own. */
_VS_PRIVATE void _vs_store_notice(vs_world* w, int origin, const char* cause, int failed)
{
    char why[256]; // (_vs_store_why's text)
    char path[_VS_STORE_PATH], text[900];
    int e = __atomic_load_n(&w->epoch, __ATOMIC_ACQUIRE);
    _vs_fmt(text, sizeof text, "%d %s", origin, cause);
    _vs_store_name(w, path, sizeof path, "f%dr%d", e, origin);
    if (failed && _vs_store_write(w, path, text, 0) != 0)
        vs_log(w, VS_LOG_WARN, "elastic: cannot write %s: %s", path, _vs_store_why(w, why, sizeof why));
    _vs_store_name(w, path, sizeof path, "f%d", e);
    if (_vs_store_write(w, path, text, 1) < 0)
        vs_log(w, VS_LOG_WARN, "elastic: cannot write %s: %s", path, _vs_store_why(w, why, sizeof why));
}

/* The lighthouse table's liveness: the members' entries, read only when its
   count of ended processes moved; one that reads "gone" is failed, posted for
   it (origin: that rank). 1 when posted. */
_VS_PRIVATE int _vs_lh_store_liveness(vs_world* w, int64_t now, int64_t last)
{
    (void)now, (void)last;
    char path[_VS_STORE_PATH], text[300];
    uint64_t seen = __atomic_load_n(&w->egone, __ATOMIC_ACQUIRE), gone = 0;
    if (_vs_lh_call(w, _VS_LH_GONE, "", NULL, text, sizeof text, NULL) != 0) return 0;
    gone = strtoull(text, NULL, 10) + 1; // (+1: 0 means "look again")
    if (gone == seen) return 0;
    for (int x = 0; x < w->size; x++) {
        if (!__atomic_load_n(&w->epid[x], __ATOMIC_ACQUIRE)) continue;
        _vs_store_name(w, path, sizeof path, "p%d", x);
        if (_vs_store_read(w, path, text, sizeof text) <= 0 || strcmp(text, "gone")) continue;
        char cause[400];
        _vs_fmt(cause, sizeof cause, "world rank %d failed (VS_ERR_ABORTED): its process ended without a word "
                "(its connection to the lighthouse at %s closed)", x, w->elastic_dir);
        _vs_store_notice(w, x, cause, 1);
        __atomic_store_n(&w->epid[x], 0, __ATOMIC_RELEASE);
        return 1;
    }
    __atomic_compare_exchange_n(&w->egone, &seen, gone, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return 0;
}

/* The directory table's liveness: the members' processes on this host (their
   p files read again each second, as a replacement writes its own): one that
   has ended is failed, posted for it (origin: that rank). 1 when posted.
   epid[x]: 0 not a member, -1 not read yet, -2 on another host (not read
   again until the next agreement), -3 this process (ranks as threads: read
   again), else the pid. */
_VS_PRIVATE int _vs_dir_liveness(vs_world* w, int64_t now, int64_t last)
{
    char path[_VS_STORE_PATH], text[300], host[256], mine[256] = "";
    int reread = now / 1000000 != last / 1000000;
    _vs_host_id(mine, sizeof mine);
    for (int x = 0; x < w->size; x++) {
        int pid = __atomic_load_n(&w->epid[x], __ATOMIC_ACQUIRE);
        if (pid == 0 || pid == -2) continue;
        if (pid == -1 || (reread && (pid == -3 || pid > 0))) {
            long p = 0;
            _vs_store_name(w, path, sizeof path, "p%d", x);
            if (_vs_store_read(w, path, text, sizeof text) <= 0 || sscanf(text, "%ld %255s", &p, host) != 2) continue;
            int np = strcmp(host, mine) ? -2 : p == (long)getpid() ? -3 : p > 0 && p <= INT_MAX ? (int)p : -2;
            if (!__atomic_compare_exchange_n(&w->epid[x], &pid, np, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                continue; // (no longer a member: an agreement reset them)
            pid = np;
        }
        if (pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char cause[400];
        _vs_fmt(cause, sizeof cause, "world rank %d failed (VS_ERR_ABORTED): its process (pid %d on %s) ended "
                "without a word", x, pid, mine);
        _vs_store_notice(w, x, cause, 1); // (posted for it)
        __atomic_store_n(&w->epid[x], 0, __ATOMIC_RELEASE);
        return 1;
    }
    return 0;
}

/* One look at the members' processes (every 200 ms), the store's way: 1 when
   a failure was posted for one. */
_VS_PRIVATE int _vs_store_liveness(vs_world* w, int64_t now)
{
    int64_t last = __atomic_load_n(&w->elive_us, __ATOMIC_ACQUIRE);
    if (now - last < 200000) return 0;
    __atomic_store_n(&w->elive_us, now, __ATOMIC_RELEASE);
    return w->store->liveness(w, now, last);
}

/* One look at the store for a failure notice of the world's epoch from
   another rank (and at the members' processes): 1 when one is known
   (w->eorigin, w->ecause say whose and what). A notice read while the world
   moved on to another epoch is dropped (fail_seen goes 0 -> 2 -> 1 only while
   the epoch stays the one looked at; an agreement clears it). */
_VS_PRIVATE int _vs_store_look(vs_world* w, int64_t now)
{
    char path[_VS_STORE_PATH], text[sizeof w->ecause + 16];
    int e = __atomic_load_n(&w->epoch, __ATOMIC_ACQUIRE);
    _vs_store_name(w, path, sizeof path, "f%d", e);
    if (_vs_store_read(w, path, text, sizeof text) <= 0 && !(w->epid && _vs_store_liveness(w, now) &&
                                                          _vs_store_read(w, path, text, sizeof text) > 0))
        return 0;
    char* end = NULL;
    long origin = strtol(text, &end, 10);
    if (end == text || origin == w->rank) return 0; // (this rank's own: it knows)
    int expect = 0;
    if (!__atomic_compare_exchange_n(&w->fail_seen, &expect, 2, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return expect == 1;
    if (__atomic_load_n(&w->epoch, __ATOMIC_ACQUIRE) != e) {
        __atomic_store_n(&w->fail_seen, 0, __ATOMIC_RELEASE);
        return 0;
    }
    w->eorigin = origin >= 0 && origin < w->size ? (int)origin : -1;
    _vs_fmt(w->ecause, sizeof w->ecause, "%s", *end ? end + 1 : "");
    expect = 2;
    return __atomic_compare_exchange_n(&w->fail_seen, &expect, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/* 1 when a failure notice of the world's epoch from another rank is known.
   Looks at a directory at most every 50 ms (now: at once); any thread. A
   lighthouse is looked at by the world's watcher: without now this only
   reads what it found, so that no collective's wait ever waits on it. */
_VS_PRIVATE int _vs_store_poll(vs_world* w, int now_)
{
    if (!w || !w->elastic_dir[0]) return 0;
    int f = __atomic_load_n(&w->fail_seen, __ATOMIC_ACQUIRE);
    if (f) return f == 1;
    if (w->store->watched && !now_) return 0; // (the watcher looks)
    int64_t now = (int64_t)(_vs_now() * 1e6), last = __atomic_load_n(&w->epoll_us, __ATOMIC_RELAXED);
    if (!now_ && now - last < 50000) return 0;
    if (!__atomic_compare_exchange_n(&w->epoll_us, &last, now, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED) && !now_)
        return 0; // (another thread is looking)
    return _vs_store_look(w, now);
}

/* A join request's rank is alive as far as this host can tell: its process
   is on another host, or it is there. */
_VS_PRIVATE int _vs_store_alive(const char* text)
{
    unsigned long long nonce = 0;
    long pid = 0;
    char host[256] = "", mine[256] = "";
    if (!strcmp(text, "gone")) return 0; // (a lighthouse's: the process ended)
    if (sscanf(text, "%llx %ld %255s", &nonce, &pid, host) != 3) return 1;
    _vs_host_id(mine, sizeof mine);
    if (strcmp(host, mine) || pid <= 0) return 1;
    return !(kill((pid_t)pid, 0) != 0 && errno == ESRCH);
}

/* The store tables' joining: 1 when world rank x asks to come in (a
   lighthouse's: the watcher's last look, so a step boundary never waits on
   it). */
_VS_PRIVATE int _vs_dir_joining(vs_world* w, int x)
{
    char path[_VS_STORE_PATH], text[600];
    _vs_store_name(w, path, sizeof path, "j%d", x);
    return _vs_store_read(w, path, text, sizeof text) > 0 && _vs_store_alive(text);
}
_VS_PRIVATE int _vs_lh_store_joining(vs_world* w, int x) { return __atomic_load_n(&w->ejoin[x], __ATOMIC_ACQUIRE); }

/* vs_world_joiners on the store: the ranks asking to come in (alive as far as
   this host can tell) that are not members. */
_VS_PRIVATE int _vs_store_joiners(vs_world* w)
{
    int* in = _VS_HNEW(&w->hooks, int, w->size), cnt = 0;
    if (!in) return 0;
    for (int i = 0; w->comm && i < w->comm->size; i++) in[w->wranks ? w->wranks[i] : i] = 1;
    for (int x = 0; x < w->size; x++) {
        if (in[x]) continue;
        cnt += w->store->joining(w, x);
    }
    _vs_hfree(&w->hooks, in);
    return cnt;
}

/* The watcher's look at the replacements waiting at the lighthouse (their
   requests, LIST then GET): w->ejoin[x] = 1 for each whose process lives. */
_VS_PRIVATE void _vs_lh_joiners_look(vs_world* w)
{
    char prefix[_VS_STORE_PATH], text[600];
    size_t cap = 64 * (size_t)w->size + 64;
    char* list = _VS_HNEW(&w->hooks, char, cap);
    unsigned char* now = _VS_HNEW(&w->hooks, unsigned char, w->size);
    _vs_store_name(w, prefix, sizeof prefix, "j");
    if (list && now && _vs_lh_call(w, _VS_LH_LIST, prefix, NULL, list, cap, NULL) == 0) {
        size_t pl = strlen(prefix);
        for (char *l = list, *nl; *l; l = *nl ? nl + 1 : nl) { // (a key a line)
            nl = l + strcspn(l, "\n");
            char save = *nl, *end = NULL;
            *nl = 0;
            long x = strlen(l) > pl ? strtol(l + pl, &end, 10) : -1;
            if (end && !*end && x >= 0 && x < w->size && _vs_lh_call(w, _VS_LH_GET, l, NULL, text, sizeof text, NULL) == 0)
                now[x] = (unsigned char)_vs_store_alive(text);
            *nl = save;
        }
        for (int x = 0; x < w->size; x++) __atomic_store_n(&w->ejoin[x], now[x], __ATOMIC_RELEASE);
    }
    _vs_hfree(&w->hooks, list);
    _vs_hfree(&w->hooks, now);
}

/* The directory's open: the job's key from its path (and run id). */
_VS_PRIVATE vs_result _vs_dir_open(vs_world* w, const char* addr, const char* token)
{
    (void)token;
    w->ekey = _vs_job_key(addr, "the elastic directory", w->size, NULL);
    return VS_OK;
}

/* The two stores, by member (struct _vs_store_ops says what each does). */
static const _vs_store_ops _vs_dir_store = {
    .what = "directory",
    .watched = 0,
    .owns_entries = 0,
    .open = _vs_dir_open,
    .start = NULL,
    .stop = NULL,
    .close = NULL,
    .prefix = _vs_dir_prefix,
    .write = _vs_dir_write,
    .read = _vs_dir_read,
    .has = _vs_dir_has,
    .del = _vs_dir_del,
    .why = NULL,
    .liveness = _vs_dir_liveness,
    .joining = _vs_dir_joining,
};
static const _vs_store_ops _vs_lh_store = {
    .what = "lighthouse",
    .watched = 1,
    .owns_entries = 1,
    .open = _vs_lh_store_open,
    .start = _vs_lh_watch_start,
    .stop = _vs_lh_watch_stop,
    .close = _vs_lh_store_close,
    .prefix = _vs_lh_store_prefix,
    .write = _vs_lh_store_write,
    .read = _vs_lh_store_read,
    .has = _vs_lh_store_has,
    .del = _vs_lh_store_del,
    .why = _vs_lh_store_why,
    .liveness = _vs_lh_store_liveness,
    .joining = _vs_lh_store_joining,
};

/* vs_world_init: the store at addr (a directory, or "tcp://host:port": a
   lighthouse), checked writable at once. A replacement (join) for a rank
   whose process is alive (on this host; at a lighthouse, on any) is
   VS_ERR_INVALID. token: a lighthouse's (NULL: none). */
_VS_PRIVATE vs_result _vs_store_open(vs_world* w, const char* addr, int join, const char* token)
{
    char why[256]; // (_vs_store_why's text)
    snprintf(w->elastic_dir, sizeof w->elastic_dir, "%s", addr);
    w->enonce = _vs_random64();
    w->efd = -1;
    w->store = !strncmp(addr, "tcp://", 6) ? &_vs_lh_store : &_vs_dir_store;
    _VS_TRY(w->store->open(w, addr, token));
    char path[_VS_STORE_PATH];
    char text[300], host[256], other[256];
    _vs_host_id(host, sizeof host);
    long pid = 0;
    _vs_store_name(w, path, sizeof path, "p%d", w->rank);
    if (join && w->store->owns_entries && _vs_store_read(w, path, text, sizeof text) > 0 && strcmp(text, "gone"))
        return _vs_err(VS_ERR_INVALID, "vs_world_init: join: world rank %d is alive (its process, %.*s, holds its "
                       "entry at the lighthouse %s): a replacement comes only for a rank that failed", w->rank,
                       (int)strcspn(text, "\n"), text, addr);
    if (join && _vs_store_read(w, path, text, sizeof text) > 0 && sscanf(text, "%ld %255s", &pid, other) == 2 &&
        !strcmp(other, host) && pid > 0 && pid != (long)getpid() && (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
        return _vs_err(VS_ERR_INVALID, "vs_world_init: join: world rank %d is alive (its process, pid %ld on %s, is "
                       "running): a replacement comes only for a rank that failed", w->rank, pid, host);
    _vs_fmt(text, sizeof text, "%ld %s\n", (long)getpid(), host);
    _vs_store_name(w, path, sizeof path, "p%d", w->rank); // (this process: the others see it end)
    if (_vs_store_write(w, path, text, 2) != 0)
        return _vs_err_backend(errno == EACCES ? VS_ERR_INVALID : VS_ERR_IO, errno, "vs_world_init: rank %d cannot "
                               "write in the elastic %s %s (every rank writes there): %s", w->rank, w->store->what,
                               addr, _vs_store_why(w, why, sizeof why));
    if (!(w->epid = _VS_HNEW(&w->hooks, int, w->size)) || !(w->ejoin = _VS_HNEW(&w->hooks, unsigned char, w->size)))
        return _vs_err(VS_ERR_NOMEM, "vs_world_init: out of memory");
    return w->store->start ? w->store->start(w) : VS_OK;
}

/* vs_world_free: this process's entry goes (a rank that ends cleanly is not
   reported gone). */
_VS_PRIVATE void _vs_store_close(vs_world* w)
{
    char path[_VS_STORE_PATH];
    if (!w->store) return; // (vs_world_init failed before the store was chosen)
    if (w->store->stop) w->store->stop(w);
    _vs_store_name(w, path, sizeof path, "p%d", w->rank);
    _vs_store_del(w, path);
    _vs_hfree(&w->hooks, w->epid);
    _vs_hfree(&w->hooks, w->ejoin);
    w->epid = NULL, w->ejoin = NULL;
    if (w->store->close) w->store->close(w);
}

// >>elastic -------------------------------------------------------------------

/* The agreement through the store (NCCL jobs of processes; the entries:
   >>store). A round from epoch E ends when a member links d<E+1>, once every
   member has arrived (a shrink: or posted its failure, or half the world's
   timeout has passed: who has not arrived then failed). Every rank follows the
   d<E+1> it reads, so no two ranks act on different sets, and no rank is
   waited for past the deadline. A decision carries the ranks and the new NCCL
   id; the training state never goes through the store. */
/* A decision: the new epoch, its kind, the ranks. */
typedef struct _vs_sdec {
    int epoch, kind, use_shrink;
    unsigned char id[128];
    int nm, nf, nd, nj;
    int *members, *failed, *dropped, *joined; // each up to the world's size
    unsigned long long* jnonce;               // the joined ranks' request marks
} _vs_sdec;

_VS_PRIVATE int _vs_sdec_alloc(vs_world* w, _vs_sdec* d)
{
    memset(d, 0, sizeof *d);
    d->members = _VS_HNEW(&w->hooks, int, 4 * (size_t)w->size);
    d->jnonce = _VS_HNEW(&w->hooks, unsigned long long, w->size);
    if (!d->members || !d->jnonce) return 0;
    d->failed = d->members + w->size, d->dropped = d->failed + w->size, d->joined = d->dropped + w->size;
    return 1;
}

_VS_PRIVATE void _vs_sdec_free(vs_world* w, _vs_sdec* d)
{
    _vs_hfree(&w->hooks, d->members);
    _vs_hfree(&w->hooks, d->jnonce);
}

_VS_PRIVATE char* _vs_sdec_text(vs_world* w, const _vs_sdec* d)
{
    size_t cap = 512 + 40 * (size_t)(d->nm + d->nf + d->nd + 2 * d->nj), len = 0;
    char* t = _VS_HNEW(&w->hooks, char, cap);
    if (!t) return NULL;
    len += (size_t)snprintf(t + len, cap - len, "vescale-elastic 1 epoch %d kind %d shrink %d id ", d->epoch, d->kind,
                            d->use_shrink);
    for (int i = 0; i < 128; i++) len += (size_t)snprintf(t + len, cap - len, "%02x", d->id[i]);
    const int* lists[3] = {d->members, d->failed, d->dropped};
    const int counts[3] = {d->nm, d->nf, d->nd};
    for (int l = 0; l < 3; l++) {
        len += (size_t)snprintf(t + len, cap - len, "\n%d", counts[l]);
        for (int i = 0; i < counts[l]; i++) len += (size_t)snprintf(t + len, cap - len, " %d", lists[l][i]);
    }
    len += (size_t)snprintf(t + len, cap - len, "\n%d", d->nj);
    for (int i = 0; i < d->nj; i++) len += (size_t)snprintf(t + len, cap - len, " %d %llx", d->joined[i], d->jnonce[i]);
    snprintf(t + len, cap - len, "\nend\n");
    return t;
}

/* Reads the decision at path: 1 read, 0 not there, -1 damaged or unreadable. */
_VS_PRIVATE int _vs_sdec_read(vs_world* w, const char* path, _vs_sdec* d)
{
    size_t cap = 1024 + 48 * 5 * (size_t)w->size;
    char* t = _VS_HNEW(&w->hooks, char, cap);
    if (!t) return -1;
    long n = _vs_store_read(w, path, t, cap);
    int ok = n > 0 ? -1 : (int)n;
    char* p = t;
    char id[257];
    int used = 0;
    if (n > 0 && sscanf(p, "vescale-elastic 1 epoch %d kind %d shrink %d id %256s%n", &d->epoch, &d->kind,
                        &d->use_shrink, id, &used) == 4 && strlen(id) == 256) {
        for (int i = 0; i < 128; i++) {
            unsigned v = 0;
            sscanf(id + 2 * i, "%2x", &v);
            d->id[i] = (unsigned char)v;
        }
        p += used;
        int* lists[3] = {d->members, d->failed, d->dropped};
        int* counts[3] = {&d->nm, &d->nf, &d->nd};
        int good = 1;
        for (int l = 0; l < 4 && good; l++) {
            long c = strtol(p, &p, 10);
            good = c >= 0 && c <= w->size;
            if (l < 3) *counts[l] = (int)c;
            else d->nj = (int)c;
            for (long i = 0; i < c && good; i++) {
                long r = strtol(p, &p, 10);
                good = r >= 0 && r < w->size;
                if (l < 3) lists[l][i] = (int)r;
                else d->joined[i] = (int)r, d->jnonce[i] = strtoull(p, &p, 16);
            }
        }
        if (good && !strncmp(p, "\nend\n", 5)) ok = 1;
    }
    _vs_hfree(&w->hooks, t);
    return ok;
}

/* A member's look at the round from epoch E: when it can be decided, the
   decision linked (by this rank or another: the caller reads it back). 1 when
   there is one to read, 0 not yet, else an error (a grow a failure ended:
   VS_ERR_ABORTED). in[x]: the members; st[x] scratch of the world's size. */
_VS_PRIVATE vs_result _vs_store_decide(vs_world* w, int kind, int E, const int* in, int* st, double half,
                                       _vs_keep_fn keep, void* ctx, _vs_sdec* d, int* decided, const char* fn)
{
    char why[256]; // (_vs_store_why's text)
    const int n = w->size;
    const char kc = kind == _VS_REFORM_SHRINK ? 's' : 'g';
    char path[_VS_STORE_PATH], text[600];
    int missing = 0, nf = 0;
    *decided = 0;
    for (int x = 0; x < n; x++) { // st: 0 not a member, 1 arrived, 3 arrived able to shrink, 4 failed, 5 missing
        st[x] = 0;
        if (!in[x]) continue;
        _vs_store_name(w, path, sizeof path, "a%d%c%d", E, kc, x);
        long k = _vs_store_read(w, path, text, sizeof text);
        if (k > 0) st[x] = text[0] == '1' ? 3 : 1;
        else st[x] = _vs_store_has(w, "f%dr%d", E, x) ? 4 : 5;
        missing += st[x] == 5;
    }
    if (kind == _VS_REFORM_GROW && _vs_store_poll(w, 1))
        return _vs_err_from(w->eorigin, w->ecause, VS_ERR_ABORTED, "%s: a rank failed while the world waited to grow: "
                            "shrink first (%s)", fn, w->ecause);
    if (missing && (kind == _VS_REFORM_GROW || _vs_now() < half)) return VS_OK;
    memset(d->id, 0, sizeof d->id);
    d->epoch = E + 1, d->kind = kind, d->nm = d->nf = d->nd = d->nj = 0;
    for (int x = 0; x < n; x++)
        if (st[x] >= 4) d->failed[nf++] = x;
    d->nf = nf;
    int use_shrink = kind == _VS_REFORM_SHRINK;
    for (int x = 0; x < n; x++) {
        int stay = 0;
        if (st[x] == 1 || st[x] == 3) {
            stay = !keep || keep(d->failed, nf, x, ctx);
            if (!stay) d->dropped[d->nd++] = x;
        } else if (!st[x] && kind == _VS_REFORM_GROW) { // not a member: a join request?
            _vs_store_name(w, path, sizeof path, "j%d", x);
            if (_vs_store_read(w, path, text, sizeof text) > 0 && _vs_store_alive(text)) {
                d->joined[d->nj] = x, d->jnonce[d->nj++] = strtoull(text, NULL, 16);
                stay = 1;
            }
        }
        if (stay) d->members[d->nm++] = x, use_shrink &= st[x] == 3;
    }
    d->use_shrink = use_shrink && d->nm > 0;
#ifdef VESCALE_NCCL
    if (!d->use_shrink && d->nm) {
        ncclUniqueId uid;
        ncclResult_t nr = ncclGetUniqueId(&uid);
        if (nr != ncclSuccess)
            return _vs_err_backend(VS_ERR_BACKEND, (int)nr, "%s: ncclGetUniqueId: %s", fn, ncclGetErrorString(nr));
        memcpy(d->id, &uid, sizeof uid);
    }
#endif
    char* t = _vs_sdec_text(w, d);
    if (!t) return _vs_err(VS_ERR_NOMEM, "%s: out of memory", fn);
    _vs_store_name(w, path, sizeof path, "d%d", E + 1);
    int wr = _vs_store_write(w, path, t, 1);
    _vs_hfree(&w->hooks, t);
    if (wr < 0)
        return _vs_err_backend(VS_ERR_IO, errno, "%s: cannot write the decision %s: %s", fn, path,
                               _vs_store_why(w, why, sizeof why));
    *decided = 1;
    return VS_OK;
}

/* An agreement of `kind` through the store (_vs_reform for an NCCL job of
   processes): arrive, wait for the decision (deciding when this rank can),
   follow it. A member the decision counts failed (it came after half the
   timeout) gets VS_ERR_ABORTED saying so, and may come back with
   vs_world_grow. */
_VS_PRIVATE vs_result _vs_store_reform(vs_world* w, int kind, _vs_keep_fn keep, void* ctx, vs_reform_info* info,
                                   const char* fn)
{
    char why[256]; // (_vs_store_why's text)
    const int n = w->size, me = w->rank, joiner = w->comm == NULL;
    const char kc = kind == _VS_REFORM_SHRINK ? 's' : 'g';
    if (joiner && kind == _VS_REFORM_SHRINK)
        return _vs_err(VS_ERR_STATE, "%s: world rank %d holds no communicator (it left at a shrink, or is a "
                       "replacement): it comes in with vs_world_grow", fn, me);
    int saw = !joiner && (_vs_store_poll(w, 1) || w->esaw || __atomic_load_n(&w->comm->aborted, __ATOMIC_ACQUIRE));
    if (kind == _VS_REFORM_SHRINK && !saw)
        return _vs_err(VS_ERR_STATE, "%s: world rank %d saw no failure since the world's last reconfiguration (epoch "
                       "%d): nothing to shrink from (a shrink follows a call that returned VS_ERR_ABORTED or "
                       "VS_ERR_TIMEOUT)", fn, me, w->epoch);
    const int notice = __atomic_load_n(&w->fail_seen, __ATOMIC_ACQUIRE) == 1;
    if (kind == _VS_REFORM_GROW && saw)
        return _vs_err_from(notice ? w->eorigin : me, notice ? w->ecause : "", VS_ERR_ABORTED,
                            "%s: world rank %d saw a failure (%s): shrink first", fn, me,
                            notice ? w->ecause : "its communicator failed");
    int E = w->epoch;
    const double start = _vs_now(), end = start + w->timeout, half = start + 0.5 * w->timeout;
    for (int x = 0; w->epid && x < n; x++) __atomic_store_n(&w->epid[x], 0, __ATOMIC_RELEASE); // (its own deadline)
    char path[_VS_STORE_PATH], apath[_VS_STORE_PATH], text[600];
    int* in = _VS_HNEW(&w->hooks, int, 2 * (size_t)n);
    _vs_sdec d;
    if (!in || !_vs_sdec_alloc(w, &d)) {
        _vs_hfree(&w->hooks, in);
        _vs_sdec_free(w, &d);
        return _vs_err(VS_ERR_NOMEM, "%s: out of memory", fn);
    }
    int* st = in + n;
    if (!joiner)
        for (int i = 0; i < w->comm->size; i++) in[w->wranks ? w->wranks[i] : i] = 1;
    vs_result r = VS_OK;
    char host[256];
    _vs_host_id(host, sizeof host);
    if (joiner) {
        _vs_store_name(w, path, sizeof path, "j%d", me);
        _vs_fmt(text, sizeof text, "%llx %ld %s\n", (unsigned long long)w->enonce, (long)getpid(), host);
    } else {
        _vs_store_name(w, path, sizeof path, "a%d%c%d", E, kc, me);
        int can = 0;
#ifdef VESCALE_NCCL
        can = w->comm->nc != NULL || w->comm->revoked_nc != NULL; // (ncclCommShrink needs every staying rank's)
#endif
        _vs_fmt(text, sizeof text, "%d\n", can);
    }
    _vs_fmt(apath, sizeof apath, "%s", path);
    if (_vs_store_write(w, path, text, joiner ? 2 : 0) != 0)
        r = _vs_err_backend(VS_ERR_IO, errno, "%s: cannot write %s: %s", fn, path, _vs_store_why(w, why, sizeof why));
    if (!r && kind == _VS_REFORM_SHRINK && !_vs_store_has(w, "f%d", E, 0)) { // the others stop their waits now
        char cause[400];
        _vs_fmt(cause, sizeof cause, "world rank %d saw a failure and began a shrink (%s)", me,
                notice ? w->ecause : "its communicator failed");
        _vs_store_notice(w, me, cause, 0); // (a wake-up: this rank is well)
    }
    int got = 0;
    for (long it = 0; !r; it++) {
        _vs_store_name(w, path, sizeof path, "d%d", E + 1);
        int pr = _vs_sdec_read(w, path, &d);
        if (pr < 0) {
            r = _vs_err(VS_ERR_IO, "%s: the decision %s is damaged or unreadable", fn, path);
            break;
        }
        if (pr > 0 && joiner) {
            for (int i = 0; i < d.nj && !got; i++) got = d.joined[i] == me && d.jnonce[i] == w->enonce;
            if (got) break;
            E++; // (a round without this rank: the next one may take it)
            continue;
        }
        if (pr > 0) {
            got = 1;
            break;
        }
        int decided = 0;
        if (!joiner) r = _vs_store_decide(w, kind, E, in, st, half, keep, ctx, &d, &decided, fn);
        if (r || decided) continue;
        if (_vs_now() > end) {
            char miss[256];
            for (int x = 0; x < n; x++) st[x] = st[x] == 5;
            _vs_rank_list_text(st, n, miss, sizeof miss);
            if (joiner)
                r = _vs_err(VS_ERR_TIMEOUT, "%s: no grow of the world took world rank %d in within %g s (the world "
                            "is at epoch %d: its members call vs_world_grow when vs_world_joiners counts this rank)",
                            fn, me, w->timeout, E);
            else
                r = _vs_err(VS_ERR_TIMEOUT, "%s: world rank%s %s did not arrive within %g s (world rank %d waited)",
                            fn, strchr(miss, ',') ? "s" : "", miss[0] ? miss : "?", w->timeout, me);
            break;
        }
        _vs_sleep_us(it < 200 ? 500 : 5000);
    }
    _vs_rticket tk;
    memset(&tk, 0, sizeof tk);
    int* wr = NULL;
    if (!r) { // the decision, as this rank's ticket
        tk.kind = kind;
        tk.index = -1;
        tk.n = d.nm;
        tk.use_shrink = d.use_shrink;
        memcpy(tk.id, d.id, sizeof tk.id);
        tk.info.epoch = d.epoch;
        tk.info.nlive = d.nm;
        for (int i = 0; i < d.nf; i++) _vs_rlist(tk.info.failed, &tk.info.nfailed, d.failed[i]);
        for (int i = 0; i < d.nd; i++) _vs_rlist(tk.info.dropped, &tk.info.ndropped, d.dropped[i]);
        for (int i = 0; i < d.nj; i++) _vs_rlist(tk.info.joined, &tk.info.njoined, d.joined[i]);
        for (int i = 0; i < d.nm; i++)
            if (d.members[i] == me) tk.index = i;
        tk.info.left = tk.index < 0;
        int was_failed = 0, was_dropped = 0;
        for (int i = 0; i < d.nf; i++) was_failed |= d.failed[i] == me;
        for (int i = 0; i < d.nd; i++) was_dropped |= d.dropped[i] == me;
        if (tk.index >= 0 && !(wr = _VS_HNEW(&w->hooks, int, d.nm)))
            r = _vs_err(VS_ERR_NOMEM, "%s: out of memory for the new world communicator", fn);
        if (wr) memcpy(wr, d.members, sizeof(int) * (size_t)d.nm), tk.members = wr;
        if (!r && tk.index < 0 && !was_dropped) { // counted failed: out, alive
            _vs_reform_adopt(w, NULL, NULL, &tk, NULL);
            __atomic_store_n(&w->fail_seen, 0, __ATOMIC_RELEASE);
            r = _vs_err(VS_ERR_ABORTED, "%s: the survivors agreed world rank %d had failed (it %s): it holds no "
                        "communicator now and may come back with vs_world_grow", fn, me,
                        was_failed ? "did not arrive within half the timeout" : "was not in the decision");
        }
    }
    vs_comm* nc = NULL;
#ifdef VESCALE_NCCL
    if (!r && tk.index >= 0 && (r = _vs_nccl_reform(w, &tk, fn, &nc))) {
        /* a member of the decision failed before its communicator was made (a
           second failure): the decision stands, so this rank takes its epoch
           with a communicator that failed, and the next shrink (the one this
           error asks for) starts from there, without the new dead */
        char msg[_VS_ERR_MSG];
        _vs_save_error(msg, sizeof msg);
        vs_comm* dead = _vs_comm_new(w, VS_TRANSPORT_NCCL, tk.index, tk.n);
        if (dead) {
            __atomic_store_n(&dead->aborted, 1, __ATOMIC_SEQ_CST);
            _vs_reform_adopt(w, dead, wr, &tk, NULL);
            wr = NULL;
            w->esaw = 0;
            __atomic_store_n(&w->fail_seen, 0, __ATOMIC_RELEASE);
            _vs_store_members(w);
        }
        r = _vs_err(r == VS_ERR_TIMEOUT ? VS_ERR_TIMEOUT : VS_ERR_ABORTED, "%s (the world is now at epoch %d, %d "
                    "ranks: a rank among them failed too; shrink again)", msg, tk.info.epoch, tk.n);
    }
#endif
    if (!r) {
        _vs_reform_adopt(w, nc, wr, &tk, info);
        wr = NULL;
        w->esaw = 0;
        __atomic_store_n(&w->fail_seen, 0, __ATOMIC_RELEASE); // (a new epoch: its own notices)
        _vs_store_members(w);
    }
    _vs_hfree(&w->hooks, wr);
    _vs_store_del(w, apath); // (read by the decision, or withdrawn: an arrival or a request lasts only while its rank waits)
    _vs_hfree(&w->hooks, in);
    _vs_sdec_free(w, &d);
    return r;
}

#if defined(VESCALE_MPI) && defined(MPIX_ERR_PROC_FAILED)
/* MPIX_Comm_shrink on a thread of its own: it has no deadline, the caller's
   wait has. */
typedef struct _vs_m_shrink {
    MPI_Comm in, out;
    int rc, done;
} _vs_m_shrink;

_VS_PRIVATE void* _vs_m_shrink_main(void* a)
{
    _vs_m_shrink* s = (_vs_m_shrink*)a;
    s->rc = MPIX_Comm_shrink(s->in, &s->out);
    __atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* An agreement on an MPI job with ULFM (w->mft): a shrink only. The world's
   communicator is revoked and shrunk (MPIX_Comm_shrink: the agreement, over
   the live processes, on who has ended), the ranks `keep` drops leave by a
   split, and the stayers get a new abort channel: the world's notices start
   afresh. MPI jobs do not grow back. */
_VS_PRIVATE vs_result _vs_mpi_reform(vs_world* w, int kind, _vs_keep_fn keep, void* ctx, vs_reform_info* info,
                                   const char* fn)
{
    const _vs_hooks* h = &w->hooks;
    if (kind == _VS_REFORM_GROW)
        return _vs_err(VS_ERR_UNSUPPORTED, "%s: an MPI job does not grow back (a process cannot join a running MPI "
                       "job here): it goes on smaller; the whole mesh comes back from a checkpoint (vs_train_load)", fn);
    if (!w->comm)
        return _vs_err(VS_ERR_STATE, "%s: world rank %d left the world at a shrink: on MPI it cannot come back; end "
                       "the process (status 0)", fn, w->rank);
    if (!__atomic_load_n(&w->ab_state, __ATOMIC_ACQUIRE) && !_vs_mpi_aborted(w) &&
        !__atomic_load_n(&w->comm->aborted, __ATOMIC_ACQUIRE))
        return _vs_err(VS_ERR_STATE, "%s: world rank %d saw no failure since the world's last reconfiguration (epoch "
                       "%d): nothing to shrink from (a shrink follows a call that returned VS_ERR_ABORTED or "
                       "VS_ERR_TIMEOUT)", fn, w->rank, w->epoch);
    MPI_Comm old = w->comm->mc;
    MPIX_Comm_revoke(old); // (every live rank's operations on it stop)
    _vs_m_shrink* sh = _VS_HNEW(h, _vs_m_shrink, 1);
    pthread_t th;
    if (!sh) return _vs_err(VS_ERR_NOMEM, "%s: out of memory", fn);
    sh->in = old;
    if (pthread_create(&th, NULL, _vs_m_shrink_main, sh) != 0) {
        _vs_hfree(h, sh);
        return _vs_err(VS_ERR_NOMEM, "%s: cannot start a thread for MPIX_Comm_shrink", fn);
    }
    double end = _vs_now() + w->timeout;
    while (!__atomic_load_n(&sh->done, __ATOMIC_ACQUIRE) && _vs_now() < end) _vs_sleep_us(1000);
    if (!__atomic_load_n(&sh->done, __ATOMIC_ACQUIRE)) {
        pthread_detach(th); // (it writes into sh when MPI returns: sh stays)
        return _vs_err(VS_ERR_TIMEOUT, "%s: MPIX_Comm_shrink did not return within %g s on world rank %d (a live "
                       "rank that does not shrink: every live rank calls it)", fn, w->timeout, w->rank);
    }
    pthread_join(th, NULL);
    MPI_Comm sc = sh->out;
    int rc = sh->rc;
    _vs_hfree(h, sh);
    if (rc != MPI_SUCCESS) return _vs_mpi_fail(rc, "vs_world_shrink: MPIX_Comm_shrink");
    MPI_Comm_set_errhandler(sc, MPI_ERRORS_RETURN);
    /* the requests the failure left in flight complete now (in error: their
       communicators are revoked or lost a rank); tested later, after their
       communicators are freed, MPI would read freed memory */
    pthread_mutex_lock(&w->mmu);
    if (w->mab != MPI_COMM_NULL) MPIX_Comm_revoke(w->mab); // (the notices in flight: to the dead among them)
    for (_vs_mpi_leak* l = w->leaks; l; l = l->next)
        for (int i = 0; i < l->nreq; i++) _vs_mpi_settle(&l->req[i], _vs_now() + 0.5);
    pthread_mutex_unlock(&w->mmu);
    int on = w->comm->size, sn = 0;
    MPI_Comm_size(sc, &sn);
    int* oldx = _VS_HNEW(h, int, 3 * (size_t)on); // the old ranks' new ranks, their indices, the failed
    _vs_rticket tk;
    memset(&tk, 0, sizeof tk);
    if (!oldx) {
        MPI_Comm_free(&sc);
        return _vs_err(VS_ERR_NOMEM, "%s: out of memory", fn);
    }
    int* idx = oldx + on;
    MPI_Group og, sg;
    MPI_Comm_group(old, &og);
    MPI_Comm_group(sc, &sg);
    for (int i = 0; i < on; i++) idx[i] = i;
    MPI_Group_translate_ranks(og, on, idx, sg, oldx);
    MPI_Group_free(&og);
    MPI_Group_free(&sg);
    tk.kind = kind;
    tk.info.epoch = w->epoch + 1;
    int* failed = oldx + 2 * on, nf = 0;
    for (int i = 0; i < on; i++)
        if (oldx[i] == MPI_UNDEFINED) {
            failed[nf++] = w->wranks ? w->wranks[i] : i;
            _vs_rlist(tk.info.failed, &tk.info.nfailed, failed[nf - 1]);
        }
    // every survivor's choice is the same function of the same set: who stays is known everywhere
    int* wr = _VS_HNEW(h, int, sn > 0 ? sn : 1);
    int n = 0;
    tk.index = -1;
    for (int i = 0; wr && i < on; i++) {
        if (oldx[i] == MPI_UNDEFINED) continue;
        int x = w->wranks ? w->wranks[i] : i;
        if (!keep || keep(failed, nf, x, ctx)) {
            if (x == w->rank) tk.index = n;
            wr[n++] = x;
        } else {
            _vs_rlist(tk.info.dropped, &tk.info.ndropped, x);
        }
    }
    _vs_hfree(h, oldx);
    const int stay = tk.index >= 0;
    MPI_Comm nc = MPI_COMM_NULL, nab = MPI_COMM_NULL;
    int e = wr ? MPI_Comm_split(sc, stay ? 0 : MPI_UNDEFINED, 0, &nc) : MPI_ERR_NO_MEM;
    MPI_Comm_free(&sc);
    if (e == MPI_SUCCESS && nc != MPI_COMM_NULL) e = MPI_Comm_dup(nc, &nab);
    if (e != MPI_SUCCESS) { // (a second failure inside: the next shrink goes on from the old world)
        _vs_hfree(h, wr);
        if (nc != MPI_COMM_NULL) MPI_Comm_free(&nc);
        vs_result r = _vs_mpi_fail(e, "vs_world_shrink: the new world communicator");
        return _vs_err(r == VS_ERR_NOMEM ? r : VS_ERR_ABORTED, "%s (a rank failed inside the shrink: shrink again)",
                       vs_last_error());
    }
    tk.n = n;
    tk.info.nlive = n;
    tk.info.left = !stay;
    vs_comm* vc = NULL;
    if (stay) {
        MPI_Comm_set_errhandler(nc, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(nab, MPI_ERRORS_RETURN);
        int r = 0;
        MPI_Comm_rank(nc, &r);
        if (!(vc = _vs_comm_new(w, VS_TRANSPORT_MPI, r, n))) {
            MPI_Comm_free(&nc), MPI_Comm_free(&nab);
            _vs_hfree(h, wr);
            return _vs_err(VS_ERR_NOMEM, "%s: out of memory for the new world communicator", fn);
        }
        vc->mc = nc;
        vc->timeout = w->comm->timeout;
        // the abort channel starts afresh: the old one's receive is withdrawn (its notices are the past)
        pthread_mutex_lock(&w->mmu);
        if (w->abreq != MPI_REQUEST_NULL) { // (a receive's cancel completes here: nothing stays in flight)
            MPI_Cancel(&w->abreq);
            _vs_mpi_settle(&w->abreq, _vs_now() + 0.5);
        }
        w->abreq = MPI_REQUEST_NULL;
        w->mab = nab; // (the old one stays, with the leaked receive: freed with the world's MPI)
        __atomic_store_n(&w->ab_state, 0, __ATOMIC_RELEASE);
        w->ab_sent = 0, w->ab_rank = -1, w->ab_why = 0;
        if (w->ab_text) w->ab_text[0] = 0;
        MPI_Irecv(w->abin, (int)sizeof *w->abin, MPI_BYTE, MPI_ANY_SOURCE, _VS_MPI_TAG_ABORT, w->mab, &w->abreq);
        pthread_mutex_unlock(&w->mmu);
    } else {
        _vs_hfree(h, wr);
        wr = NULL;
    }
    _vs_reform_adopt(w, vc, wr, &tk, info);
    return VS_OK;
}
#endif

/* An agreement of `kind` (_VS_REFORM_*) on w: the transport's (its table's
   reform: a vs_launch job's in its memory, an NCCL job of processes' in its
   store, an MPI job's with ULFM); the others cannot, and say what is missing. */
_VS_PRIVATE vs_result _vs_reform(vs_world* w, int kind, _vs_keep_fn keep, void* ctx, vs_reform_info* info,
                                 const char* fn)
{
    const _vs_transport_ops* tp = _vs_transport_of(w->tr);
    if (!tp || !tp->reform) return _vs_err(VS_ERR_UNSUPPORTED, "%s: transport %s has no agreement", fn, vs_transport_name(w->tr));
    return tp->reform(w, kind, keep, ctx, info, fn);
}

VS_API vs_result vs_world_shrink(vs_world* w, vs_reform_info* info)
{
    _VS_CHECK_NULL(w, "world");
    return _vs_reform(w, _VS_REFORM_SHRINK, NULL, NULL, info, "vs_world_shrink");
}

/* vs_mesh_shrink's choice: world rank `rank` stays unless a failed rank of the
   mesh has its coordinate along the dim (ranks outside the mesh stay). */
typedef struct _vs_keep_mesh {
    const vs_mesh* m;
    int dim;
} _vs_keep_mesh;

_VS_PRIVATE int _vs_mesh_index_of(const vs_mesh* m, int world_rank)
{
    for (int i = 0; i < m->nranks; i++)
        if (m->granks[i] == world_rank) return i;
    return -1;
}

_VS_PRIVATE int _vs_keep_replica(const int* failed, int nfailed, int rank, void* ctx)
{
    const _vs_keep_mesh* k = (const _vs_keep_mesh*)ctx;
    int i = _vs_mesh_index_of(k->m, rank), c[VS_MESH_MAX_DIMS], f[VS_MESH_MAX_DIMS];
    if (i < 0) return 1;
    _vs_mesh_coord_calc(k->m, i, c);
    for (int j = 0; j < nfailed; j++) {
        int fi = _vs_mesh_index_of(k->m, failed[j]);
        if (fi < 0) continue;
        _vs_mesh_coord_calc(k->m, fi, f);
        if (f[k->dim] == c[k->dim]) return 0;
    }
    return 1;
}

VS_API vs_result vs_mesh_shrink(vs_mesh* m, const char* dim, vs_mesh** out, vs_reform_info* info)
{
    const char* fn = "vs_mesh_shrink";
    _VS_CHECK_NULL(m, "mesh");
    _VS_CHECK_NULL(out, "out");
    *out = NULL;
    vs_world* w = m->world;
    if (m->parent) return _vs_err(VS_ERR_INVALID, "%s: a submesh: shrink the mesh it belongs to", fn);
    if (m->shrunk)
        return _vs_err(VS_ERR_STATE, "%s: this mesh was shrunk before (at the world's reconfiguration %d): shrink the "
                       "mesh that gave", fn, m->shrunk);
    if (m->comm != w->comm)
        return _vs_err(VS_ERR_INVALID, "%s: the mesh must be over the world's communicator (as vs_parallelize's is): "
                       "its replicas are chosen among all the world's live ranks", fn);
    const char* dn = dim ? dim : "DP";
    int di = -1;
    for (int i = 0; i < m->ndims; i++)
        if (!strcmp(m->names[i], dn)) di = i;
    if (di < 0) {
        char desc[128];
        vs_mesh_describe(m, desc, sizeof desc);
        return _vs_err(VS_ERR_INVALID, "%s: the mesh %s has no dim '%s' to drop replicas along", fn, desc, dn);
    }
    const _vs_transport_ops* tp = _vs_transport_of(w->tr);
    if (tp && tp->quiesce) { // (the submeshes' work in flight, on a failure: NCCL's streams)
        vs_comm** subs = _VS_HNEW(_VS_WH(w), vs_comm*, m->nsubs ? m->nsubs : 1);
        if (!subs) return _vs_err(VS_ERR_NOMEM, "%s: out of memory", fn);
        for (int i = 0; i < m->nsubs; i++) subs[i] = m->subs[i].mesh ? m->subs[i].mesh->comm : NULL;
        tp->quiesce(w, subs, m->nsubs);
        _vs_hfree(_VS_WH(w), subs);
    }
    _vs_keep_mesh k = {m, di};
    vs_reform_info ri;
    _VS_TRY(_vs_reform(w, _VS_REFORM_SHRINK, _vs_keep_replica, &k, &ri, fn));
    m->shrunk = ri.epoch;
    if (info) *info = ri;
    if (ri.left) {
        if (ri.nlive == 0) {
            char failed[256] = "";
            size_t len = 0;
            for (int i = 0; i < ri.nfailed && i < VS_REFORM_LIST && len < sizeof failed; i++)
                len += (size_t)_vs_fmt(failed + len, sizeof failed - len, "%s%d", i ? ", " : "", ri.failed[i]);
            return _vs_err(VS_ERR_STATE, "%s: every replica along %s lost a rank (failed world ranks %s): no replica "
                           "holds the whole model; resume from a checkpoint (vs_train_load on a new mesh)", fn, dn,
                           failed);
        }
        return VS_OK; // (this rank left with its replica: it comes back with vs_world_grow)
    }
    // the new shape: the dim keeps the coordinates some staying rank still has
    int nd = 0, c[VS_MESH_MAX_DIMS];
    int* seen = _VS_HNEW(&w->hooks, int, m->shape[di]);
    if (!seen) return _vs_err(VS_ERR_NOMEM, "%s: out of memory", fn);
    for (int i = 0; i < w->comm->size; i++) {
        int mi = _vs_mesh_index_of(m, w->wranks ? w->wranks[i] : i);
        if (mi < 0) continue;
        _vs_mesh_coord_calc(m, mi, c);
        if (!seen[c[di]]) seen[c[di]] = 1, nd++;
    }
    _vs_hfree(&w->hooks, seen);
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.ndims = m->ndims;
    for (int i = 0; i < m->ndims; i++) md.shape[i] = i == di ? nd : m->shape[i], md.dim_names[i] = m->names[i];
    return vs_mesh_init(w, &md, out);
}

VS_API vs_result vs_world_grow(vs_world* w, vs_reform_info* info)
{
    _VS_CHECK_NULL(w, "world");
    return _vs_reform(w, _VS_REFORM_GROW, NULL, NULL, info, "vs_world_grow");
}

VS_API vs_result vs_world_joiners(vs_world* w, int* n)
{
    _VS_CHECK_NULL(w, "world");
    _VS_CHECK_NULL(n, "n");
    *n = 0;
    if (!w->comm) return _vs_err(VS_ERR_STATE, "vs_world_joiners: world rank %d is not in the world's communicator "
                                 "(it left at a shrink, or is a replacement): it joins with vs_world_grow", w->rank);
    int32_t mine = 0, all = 0;
    if (w->job) { // (a vs_launch job's: threads or NCCL)
        _vs_tjob* job = w->job;
        pthread_mutex_lock(&job->mu);
        for (int x = 0; x < job->desc.nranks; x++)
            mine += job->tk[x] && job->tk[x]->kind == _VS_REFORM_GROW && !job->live[x];
        pthread_mutex_unlock(&job->mu);
    } else if (w->elastic_dir[0]) { // (an NCCL job of processes: the store's requests)
        mine = _vs_store_joiners(w);
    }
    _VS_TRY(_vs_host_coll(w->comm, 0, &mine, &all, 1, VS_I32, VS_OP_MAX, "vs_world_joiners"));
    *n = all;
    return VS_OK;
}

VS_API vs_result vs_world_respawn(vs_world* w, int rank)
{
    const char* fn = "vs_world_respawn";
    _VS_CHECK_NULL(w, "world");
    _vs_tjob* job = w->job;
    if (!job)
        return _vs_err(VS_ERR_UNSUPPORTED, "%s: only a vs_launch job starts replacements (a job of processes starts "
                       "its own: a process with vs_world_desc.join = 1 or VESCALE_ELASTIC_JOIN=1)", fn);
    if (rank < 0 || rank >= job->desc.nranks)
        return _vs_err(VS_ERR_INVALID, "%s: rank %d out of range [0, %d)", fn, rank, job->desc.nranks);
    vs_result r = VS_OK;
    pthread_mutex_lock(&job->mu);
    if (!__atomic_load_n(&job->exited[rank], __ATOMIC_ACQUIRE))
        r = _vs_err(VS_ERR_INVALID, "%s: world rank %d is alive: a replacement comes only for a rank that failed", fn,
                    rank);
    else if (job->live[rank])
        r = _vs_err(VS_ERR_STATE, "%s: world rank %d failed but the survivors have not agreed on it yet: shrink first "
                    "(vs_mesh_shrink or vs_world_shrink)", fn, rank);
    _vs_textra* x = r ? NULL : _VS_HNEW(&job->hooks, _vs_textra, 1);
    vs_world* nw = x ? _vs_launch_world(job, rank) : NULL;
    if (!r && (!x || !nw)) r = _vs_err(VS_ERR_NOMEM, "%s: out of memory for world rank %d", fn, rank);
    if (!r) {
        nw->job = job;
        nw->joining = 1;
        nw->epoch = job->epoch;
        job->worlds[rank] = nw;
        job->results[rank] = VS_OK;
        job->recovered[rank] = 0;
        __atomic_store_n(&job->exited[rank], 0, __ATOMIC_RELEASE);
        x->tr.job = job;
        x->tr.rank = rank;
        pthread_attr_t at; // the job's stack size, as its first ranks'
        pthread_attr_init(&at);
        if (job->desc.stack_bytes) pthread_attr_setstacksize(&at, job->desc.stack_bytes);
        int e = pthread_create(&x->th, &at, _vs_rank_main, &x->tr);
        pthread_attr_destroy(&at);
        if (e != 0) {
            r = _vs_err_backend(VS_ERR_BACKEND, e, "%s: cannot start a thread for world rank %d", fn, rank);
            job->worlds[rank] = NULL;
            job->recovered[rank] = 1;
            __atomic_store_n(&job->exited[rank], 1, __ATOMIC_RELEASE);
        } else {
            x->next = job->extra;
            job->extra = x;
            x = NULL, nw = NULL;
        }
    }
    pthread_mutex_unlock(&job->mu);
    if (nw) vs_world_free(nw);
    _vs_hfree(&job->hooks, x);
    return r;
}

VS_API int vs_world_joining(const vs_world* w) { return w && w->joining; }

// >>lighthouse ----------------------------------------------------------------
/* The lighthouse (vs_lighthouse_start; tools/vescale-lighthouse.c): the store
   served over TCP (its wire format: >>store), the entries in its memory.
   - One thread polls every connection and never blocks on one: its sockets
     are non-blocking; an answer a client does not take waits in that
     connection's buffer (no more of its requests are read meanwhile); a
     connection whose answer has not moved for stall_s is closed.
   - A connection that sends an unknown op, or a key over _VS_LH_KEY_MAX
     bytes, is closed.
   - A job is a key's part up to its second '-' ("vs-<job key>-"). Capped:
     a job's entries (max_keys), and everything held (max_bytes: entries and
     answers waiting alike). A job no connection holds an entry of, that no
     request touched for expire_s, is forgotten. */
#define _VS_LH_BUCKETS 1024
#define _VS_LH_JOBS_MAX 1024
#define _VS_LH_ENTRY_COST 64 /* what an entry costs beside its key and value, counted in max_bytes */

typedef struct _vs_lh_job {
    char name[64]; // the keys' part up to their second '-'
    size_t nlen;
    long keys, owned; // its entries, those a connection holds
    size_t bytes;     // what they cost (max_bytes' measure)
    double touched;   // the last request on one of its keys
} _vs_lh_job;

typedef struct _vs_lh_ent {
    struct _vs_lh_ent* next;
    char* key; // NUL-terminated
    char* val; // vlen bytes (and a NUL)
    size_t vlen;
    long owner; // the connection that holds it (OWN), else 0
    _vs_lh_job* job;
} _vs_lh_ent;

typedef struct _vs_lh_conn {
    int fd;
    long id;
    unsigned char* in; // what it sent, not yet served
    size_t got, cap;
    unsigned char* out; // its answer, not yet taken (osent of olen bytes sent)
    size_t osent, olen;
    size_t skip;   // bytes of a refused request still to discard
    double last;   // its last request (or its accept)
    double moved;  // the last time its answer moved
    int holds;     // 1 once it owned an entry (a rank's liveness connection): never closed for idling
    int closing;   // told a refusal it cannot come back from: closed once that is sent
    uint64_t seq;  // requests it sent
    unsigned char nonce[16];
} _vs_lh_conn;

struct vs_lighthouse {
    vs_lighthouse_desc d; // as resolved
    _vs_hooks hooks;      // its logger
    char token[_VS_LH_TOKEN_MAX + 1];
    int lfd, port, wake[2], spare;
    pthread_t th;
    _vs_lh_ent* tab[_VS_LH_BUCKETS];
    _vs_lh_conn* conn;
    int nconn, capconn;
    _vs_lh_job* jobs[_VS_LH_JOBS_MAX];
    int njobs;
    long next_id;
    unsigned long long gone;
    size_t bytes, pending;   // held in entries; in answers not yet taken
    double accept_after;     // out of descriptors: accept again after this
    pthread_mutex_t smu;     // st, copied out by vs_lighthouse_query_stats
    vs_lighthouse_stats st;
    long long refused, closed; // (the thread's own counts, published in st)
};

_VS_PRIVATE _VS_PRINTF(3, 4) void _vs_lh_log(const vs_lighthouse* lh, vs_log_level level, const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    _vs_vlog(&lh->hooks, -1, level, fmt, ap);
    va_end(ap);
}

/* The job of a key (made when missing and make): NULL when there is none, or
   no room for another. */
_VS_PRIVATE _vs_lh_job* _vs_lh_job_of(vs_lighthouse* lh, const char* key, size_t klen, int make)
{
    const char* d1 = (const char*)memchr(key, '-', klen);
    const char* d2 = d1 ? (const char*)memchr(d1 + 1, '-', klen - (size_t)(d1 + 1 - key)) : NULL;
    size_t n = d2 ? (size_t)(d2 + 1 - key) : klen;
    if (n > sizeof lh->jobs[0]->name - 1) n = sizeof lh->jobs[0]->name - 1;
    for (int i = 0; i < lh->njobs; i++)
        if (lh->jobs[i]->nlen == n && !memcmp(lh->jobs[i]->name, key, n)) return lh->jobs[i];
    if (!make || lh->njobs == _VS_LH_JOBS_MAX) return NULL;
    _vs_lh_job* j = _VS_HNEW(NULL, _vs_lh_job, 1);
    if (!j) return NULL;
    memcpy(j->name, key, n);
    j->nlen = n;
    j->touched = _vs_now();
    lh->jobs[lh->njobs++] = j;
    return j;
}

_VS_PRIVATE _vs_lh_ent** _vs_lh_slot(vs_lighthouse* lh, const char* key, size_t klen)
{
    _vs_lh_ent** e = &lh->tab[_vs_fnv1a64(_VS_FNV64_BASIS, key, klen) % _VS_LH_BUCKETS];
    while (*e && (strlen((*e)->key) != klen || memcmp((*e)->key, key, klen))) e = &(*e)->next;
    return e;
}

/* The value of an entry (made when missing): 1 done, 0 out of memory, -1
   refused by a limit (why says which). */
_VS_PRIVATE int _vs_lh_set(vs_lighthouse* lh, const char* key, size_t klen, const void* val, size_t vlen, long owner,
                           char* why, size_t wcap)
{
    _vs_lh_ent** s = _vs_lh_slot(lh, key, klen);
    _vs_lh_job* job = *s ? (*s)->job : _vs_lh_job_of(lh, key, klen, 1);
    size_t old = *s ? (*s)->vlen : 0, add = *s ? 0 : klen + _VS_LH_ENTRY_COST;
    if (!job && lh->njobs == _VS_LH_JOBS_MAX) {
        snprintf(why, wcap, "the lighthouse holds %d jobs, its most", lh->njobs);
        return -1;
    }
    if (!job) return 0; // (out of memory)
    if (!*s && job->keys >= (long)lh->d.max_keys) {
        snprintf(why, wcap, "job '%s' holds %ld entries, the lighthouse's max_keys", job->name, job->keys);
        return -1;
    }
    if (vlen > old && lh->bytes + lh->pending + add + (vlen - old) > lh->d.max_bytes) {
        snprintf(why, wcap, "the lighthouse holds %zu bytes; %zu more would pass its max_bytes %zu", lh->bytes +
                 lh->pending, add + vlen - old, lh->d.max_bytes);
        return -1;
    }
    char* v = _VS_HNEW(NULL, char, vlen + 1);
    if (!v) return 0;
    memcpy(v, val, vlen);
    if (!*s) {
        _vs_lh_ent* e = _VS_HNEW(NULL, _vs_lh_ent, 1);
        char* k = _VS_HNEW(NULL, char, klen + 1);
        if (!e || !k) {
            _vs_hfree(NULL, e), _vs_hfree(NULL, k), _vs_hfree(NULL, v);
            return 0;
        }
        memcpy(k, key, klen);
        e->key = k, e->job = job;
        *s = e;
        job->keys++;
    }
    _vs_lh_ent* e = *s;
    job->owned += (owner != 0) - (e->owner != 0);
    job->bytes = job->bytes + add + vlen - old;
    lh->bytes = lh->bytes + add + vlen - old;
    job->touched = _vs_now();
    _vs_hfree(NULL, e->val);
    e->val = v, e->vlen = vlen, e->owner = owner;
    return 1;
}

/* Removes the entry at s. */
_VS_PRIVATE void _vs_lh_unlink(vs_lighthouse* lh, _vs_lh_ent** s)
{
    _vs_lh_ent* e = *s;
    size_t cost = strlen(e->key) + e->vlen + _VS_LH_ENTRY_COST;
    e->job->keys--, e->job->owned -= e->owner != 0, e->job->bytes -= cost;
    lh->bytes -= cost;
    *s = e->next;
    _vs_hfree(NULL, e->key), _vs_hfree(NULL, e->val), _vs_hfree(NULL, e);
}

/* Connection i goes: what it still holds reads "gone" (its process ended
   without a word). */
_VS_PRIVATE void _vs_lh_drop(vs_lighthouse* lh, int i)
{
    _vs_lh_conn* c = &lh->conn[i];
    char why[8];
    for (int b = 0; c->holds && b < _VS_LH_BUCKETS; b++)
        for (_vs_lh_ent* e = lh->tab[b]; e; e = e->next)
            if (e->owner == c->id && _vs_lh_set(lh, e->key, strlen(e->key), "gone", 4, 0, why, sizeof why) == 1)
                lh->gone++;
    close(c->fd);
    lh->pending -= c->olen - c->osent;
    _vs_hfree(NULL, c->in), _vs_hfree(NULL, c->out);
    lh->conn[i] = lh->conn[--lh->nconn];
}

/* Queues an answer on connection c: sent at once as far as its socket takes
   it, the rest kept for later (nothing else of c is read until it has gone).
   0 when c is to be dropped. */
_VS_PRIVATE int _vs_lh_answer(vs_lighthouse* lh, _vs_lh_conn* c, uint32_t status, const void* val, size_t vlen)
{
    unsigned char h[12];
    _vs_be_put32(h, _VS_LH_ANSWER);
    _vs_be_put32(h + 4, status);
    _vs_be_put32(h + 8, (uint32_t)vlen);
    size_t sent = 0, total = sizeof h + vlen;
    while (sent < total) {
        const unsigned char* p = sent < sizeof h ? h + sent : (const unsigned char*)val + (sent - sizeof h);
        size_t n = sent < sizeof h ? sizeof h - sent : total - sent;
        ssize_t k = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (k <= 0) return 0;
        sent += (size_t)k;
    }
    if (sent == total) return 1;
    size_t rest = total - sent;
    unsigned char* o = _VS_HNEW(NULL, unsigned char, rest);
    if (!o) return 0;
    if (sent < sizeof h) {
        memcpy(o, h + sent, sizeof h - sent);
        if (vlen) memcpy(o + sizeof h - sent, val, vlen);
    } else {
        memcpy(o, (const unsigned char*)val + (sent - sizeof h), rest);
    }
    c->out = o, c->osent = 0, c->olen = rest, c->moved = _vs_now();
    lh->pending += rest;
    return 1;
}

/* A refusal (status 2 or 3) that names why. */
_VS_PRIVATE int _vs_lh_refuse(vs_lighthouse* lh, _vs_lh_conn* c, uint32_t status, const char* why)
{
    lh->refused++;
    return _vs_lh_answer(lh, c, status, why, strlen(why));
}

/* One request of connection i: 0 when the connection is to be dropped. */
_VS_PRIVATE int _vs_lh_do(vs_lighthouse* lh, int i, uint32_t op, const char* key, size_t klen, const char* val,
                          size_t vlen)
{
    _vs_lh_conn* c = &lh->conn[i];
    _vs_lh_ent** s = _vs_lh_slot(lh, key, klen);
    char why[200] = "";
    int k;
    if (*s) (*s)->job->touched = _vs_now();
    switch (op) {
    case _VS_LH_PUT:
    case _VS_LH_OWN:
    case _VS_LH_LINK:
        if (op == _VS_LH_LINK && *s) return _vs_lh_answer(lh, c, 1, NULL, 0);
        k = _vs_lh_set(lh, key, klen, val, vlen, op == _VS_LH_OWN ? c->id : 0, why, sizeof why);
        if (k < 0) return _vs_lh_refuse(lh, c, 2, why);
        c->holds |= k > 0 && op == _VS_LH_OWN;
        return k > 0 && _vs_lh_answer(lh, c, 0, NULL, 0);
    case _VS_LH_GET:
        if (*s && lh->pending + (*s)->vlen > lh->d.max_bytes) {
            snprintf(why, sizeof why, "answers of %zu bytes wait for their clients; %zu more would pass the "
                     "lighthouse's max_bytes %zu", lh->pending, (*s)->vlen, lh->d.max_bytes);
            return _vs_lh_refuse(lh, c, 2, why);
        }
        return *s ? _vs_lh_answer(lh, c, 0, (*s)->val, (*s)->vlen) : _vs_lh_answer(lh, c, 1, NULL, 0);
    case _VS_LH_DEL:
        if (*s) _vs_lh_unlink(lh, s);
        return _vs_lh_answer(lh, c, 0, NULL, 0);
    case _VS_LH_GONE: {
        char t[32];
        int n = snprintf(t, sizeof t, "%llu", lh->gone);
        return _vs_lh_answer(lh, c, 0, t, (size_t)n);
    }
    case _VS_LH_LIST: {
        size_t len = 0, cap = 256;
        char* t = _VS_HNEW(NULL, char, cap);
        for (int b = 0; t && b < _VS_LH_BUCKETS; b++)
            for (_vs_lh_ent* e = lh->tab[b]; t && e; e = e->next) {
                size_t n = strlen(e->key);
                if (n < klen || memcmp(e->key, key, klen)) continue;
                if (len + n + 2 > cap) {
                    char* g = _VS_HNEW(NULL, char, 2 * cap + n);
                    if (g) memcpy(g, t, len), cap = 2 * cap + n;
                    _vs_hfree(NULL, t);
                    t = g;
                    if (!t) break;
                }
                memcpy(t + len, e->key, n);
                len += n;
                t[len++] = '\n';
            }
        int ok = t && _vs_lh_answer(lh, c, 0, t, len);
        _vs_hfree(NULL, t);
        return ok;
    }
    default:
        return 0;
    }
}

/* Serves the whole requests connection i has sent, while it has no answer
   waiting. 0: drop it. */
_VS_PRIVATE int _vs_lh_serve(vs_lighthouse* lh, int i)
{
    _vs_lh_conn* c = &lh->conn[i];
    size_t off = 0;
    int ok = 1;
    while (ok && !c->closing && !c->out && c->got - off >= 4) {
        const unsigned char* h = c->in + off;
        if (_vs_be_get32(h) != _VS_LH_MAGIC) return 0; // (not a vescale rank: closed at its first word)
        if (c->got - off < _VS_LH_REQ) break;
        uint32_t op = _vs_be_get32(h + 4), klen = _vs_be_get32(h + 8), vlen = _vs_be_get32(h + 12);
        if (klen > _VS_LH_KEY_MAX) return 0;
        if (vlen > lh->d.max_value) { // (read and dropped: the connection stays a rank's)
            char why[160];
            size_t have = c->got - off - _VS_LH_REQ, need = (size_t)klen + vlen;
            snprintf(why, sizeof why, "a value of %u bytes: over the lighthouse's max_value %zu", vlen,
                     lh->d.max_value);
            c->seq++;
            c->skip = need - (have < need ? have : need);
            off += _VS_LH_REQ + (have < need ? have : need);
            ok = _vs_lh_refuse(lh, c, 2, why);
            c = &lh->conn[i];
            continue;
        }
        if (c->got - off < _VS_LH_REQ + (size_t)klen + vlen) break;
        const char* key = (const char*)h + _VS_LH_REQ;
        c->last = _vs_now();
        if (lh->token[0]) {
            unsigned char mac[_VS_LH_REQ];
            _vs_lh_request_head(mac, op, key, klen, key + klen, vlen, c->seq + 1, lh->token, c->nonce);
            if (_vs_be_get64(h + 16) != c->seq + 1 || !_vs_same_bytes(mac + 24, h + 24, 32)) {
                c->closing = 1;
                ok = _vs_lh_refuse(lh, c, 3, _vs_be_get64(h + 16) != c->seq + 1
                                                 ? "a request out of sequence (a replay?): refused, connection closed"
                                                 : "a request not signed by the lighthouse's token: refused, "
                                                   "connection closed (give the job's VESCALE_LIGHTHOUSE_TOKEN)");
                break;
            }
        }
        c->seq++;
        ok = _vs_lh_do(lh, i, op, key, klen, key + klen, vlen);
        c = &lh->conn[i];
        off += _VS_LH_REQ + (size_t)klen + vlen;
    }
    if (off) memmove(c->in, c->in + off, c->got - off), c->got -= off;
    return ok && !(c->closing && !c->out);
}

/* What connection i sent: read, and its whole requests served. 0: drop it. */
_VS_PRIVATE int _vs_lh_read(vs_lighthouse* lh, int i)
{
    _vs_lh_conn* c = &lh->conn[i];
    size_t most = _VS_LH_REQ + _VS_LH_KEY_MAX + lh->d.max_value;
    if (c->cap - c->got < 4096 && c->cap < most) {
        size_t cap = c->cap ? 2 * c->cap : 8192;
        if (cap > most) cap = most;
        unsigned char* b = _VS_HNEW(NULL, unsigned char, cap);
        if (!b) return 0;
        if (c->got) memcpy(b, c->in, c->got);
        _vs_hfree(NULL, c->in);
        c->in = b, c->cap = cap;
    }
    unsigned char sink[4096];
    int skipping = c->skip > 0;
    size_t room = skipping ? (c->skip < sizeof sink ? c->skip : sizeof sink) : c->cap - c->got;
    if (!room) return _vs_lh_serve(lh, i); // (a whole request is there: it waits for its turn)
    ssize_t k = recv(c->fd, skipping ? sink : c->in + c->got, room, MSG_DONTWAIT);
    if (k < 0) return errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK;
    if (k == 0) return 0;
    if (skipping) c->skip -= (size_t)k;
    else c->got += (size_t)k;
    return _vs_lh_serve(lh, i);
}

/* Sends what connection i's answer has left; once all is sent, serves what it
   sent meanwhile. 0: drop it. */
_VS_PRIVATE int _vs_lh_flush(vs_lighthouse* lh, int i)
{
    _vs_lh_conn* c = &lh->conn[i];
    while (c->out && c->osent < c->olen) {
        ssize_t k = send(c->fd, c->out + c->osent, c->olen - c->osent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 1;
        if (k <= 0) return 0;
        c->osent += (size_t)k, lh->pending -= (size_t)k, c->moved = _vs_now();
    }
    _vs_hfree(NULL, c->out);
    c->out = NULL, c->osent = c->olen = 0;
    return !c->closing && _vs_lh_serve(lh, i);
}

/* A connection turned away: told why (as far as its socket takes it at
   once), closed. */
_VS_PRIVATE void _vs_lh_turn_away(vs_lighthouse* lh, int fd, const char* why)
{
    unsigned char h[12 + 200];
    size_t n = strlen(why) < 200 ? strlen(why) : 200;
    _vs_be_put32(h, _VS_LH_ANSWER);
    _vs_be_put32(h + 4, 2);
    _vs_be_put32(h + 8, (uint32_t)n);
    memcpy(h + 12, why, n);
    if (send(fd, h, 12 + n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {} // (best effort: it is closed either way)
    close(fd);
    lh->refused++;
}

/* Takes the connections that wait. At the cap, the longest idle one that
   holds nothing (idle a second at least) makes room, else the newcomer is
   told and closed; out of descriptors, the spare one makes room to tell it
   (then accepting pauses 100 ms if even that fails: never a busy loop). */
_VS_PRIVATE void _vs_lh_accept(vs_lighthouse* lh)
{
    for (int n = 0; n < 64; n++) {
        int fd = accept(lh->lfd, NULL, NULL);
        double now = _vs_now();
        if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
            if (lh->spare >= 0) close(lh->spare), lh->spare = -1;
            fd = accept(lh->lfd, NULL, NULL);
            if (fd >= 0) _vs_lh_turn_away(lh, fd, "the lighthouse is out of file descriptors: try again later");
            lh->spare = open("/dev/null", O_RDONLY);
            if (fd < 0 || lh->spare < 0) lh->accept_after = now + 0.1;
            return;
        }
        if (fd < 0) return; // (EAGAIN: none waits; else the next poll says)
        if (lh->nconn >= lh->d.max_conns) {
            int old = -1;
            for (int i = 0; i < lh->nconn; i++)
                if (!lh->conn[i].holds && !lh->conn[i].out && now - lh->conn[i].last >= 1 &&
                    (old < 0 || lh->conn[i].last < lh->conn[old].last))
                    old = i;
            if (old < 0) {
                char why[160];
                snprintf(why, sizeof why, "the lighthouse serves %d connections, its max_conns: try again later",
                         lh->nconn);
                _vs_lh_turn_away(lh, fd, why);
                continue;
            }
            lh->closed++;
            _vs_lh_drop(lh, old);
        }
        if (lh->nconn == lh->capconn) {
            int nc = lh->capconn ? 2 * lh->capconn : 64;
            _vs_lh_conn* g = _VS_HNEW(NULL, _vs_lh_conn, nc);
            if (g && lh->nconn) memcpy(g, lh->conn, sizeof *g * (size_t)lh->nconn);
            if (g) _vs_hfree(NULL, lh->conn), lh->conn = g, lh->capconn = nc;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (lh->nconn == lh->capconn) {
            _vs_lh_turn_away(lh, fd, "the lighthouse is out of memory");
            continue;
        }
        _vs_lh_conn* c = &lh->conn[lh->nconn++];
        memset(c, 0, sizeof *c);
        c->fd = fd, c->id = ++lh->next_id, c->last = now;
        uint64_t r1 = _vs_random64(), r2 = _vs_random64();
        memcpy(c->nonce, &r1, 8), memcpy(c->nonce + 8, &r2, 8);
        unsigned char hello[_VS_LH_HELLO_LEN];
        _vs_be_put32(hello, _VS_LH_HELLO);
        _vs_be_put32(hello + 4, lh->token[0] ? 1u : 0u);
        memcpy(hello + 8, c->nonce, 16);
        if (send(fd, hello, sizeof hello, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof hello)
            _vs_lh_drop(lh, lh->nconn - 1);
    }
}

/* Once a second: connections idle past idle_s that hold nothing, and those
   whose answer has not moved for stall_s, closed; jobs nobody holds or
   touched for expire_s forgotten. */
_VS_PRIVATE void _vs_lh_sweep(vs_lighthouse* lh, double now)
{
    for (int i = lh->nconn - 1; i >= 0; i--) {
        _vs_lh_conn* c = &lh->conn[i];
        if ((c->out && now - c->moved > lh->d.stall_s) || (!c->out && !c->holds && now - c->last > lh->d.idle_s))
            lh->closed++, _vs_lh_drop(lh, i);
    }
    for (int j = lh->njobs - 1; j >= 0; j--) {
        _vs_lh_job* job = lh->jobs[j];
        if (job->keys && (job->owned || now - job->touched <= lh->d.expire_s)) continue;
        for (int b = 0; job->keys && b < _VS_LH_BUCKETS; b++)
            for (_vs_lh_ent** s = &lh->tab[b]; *s;)
                if ((*s)->job == job) _vs_lh_unlink(lh, s);
                else s = &(*s)->next;
        _vs_hfree(NULL, job);
        lh->jobs[j] = lh->jobs[--lh->njobs];
    }
    pthread_mutex_lock(&lh->smu);
    lh->st.conns = lh->nconn, lh->st.jobs = lh->njobs;
    lh->st.bytes = (long long)lh->bytes, lh->st.pending = (long long)lh->pending;
    lh->st.entries = 0;
    for (int j = 0; j < lh->njobs; j++) lh->st.entries += lh->jobs[j]->keys;
    lh->st.refused = lh->refused, lh->st.closed = lh->closed;
    pthread_mutex_unlock(&lh->smu);
}

_VS_PRIVATE void* _vs_lh_main(void* arg)
{
    vs_lighthouse* lh = (vs_lighthouse*)arg;
    struct pollfd* pf = NULL;
    int cap = 0;
    double swept = 0;
    for (;;) {
        if (cap < lh->nconn + 2) {
            _vs_hfree(NULL, pf);
            cap = 2 * (lh->nconn + 2);
            if (!(pf = _VS_HNEW(NULL, struct pollfd, cap))) { // (out of memory: wait, the stop still works)
                cap = 0;
                _vs_sleep_us(100000);
                continue;
            }
        }
        int n = lh->nconn;
        double now = _vs_now();
        pf[0].fd = lh->wake[0], pf[0].events = POLLIN;
        pf[1].fd = now >= lh->accept_after ? lh->lfd : -1, pf[1].events = POLLIN;
        for (int i = 0; i < n; i++)
            pf[i + 2].fd = lh->conn[i].fd, pf[i + 2].events = lh->conn[i].out ? POLLOUT : POLLIN;
        for (int i = 0; i < n + 2; i++) pf[i].revents = 0;
        int pr = poll(pf, (nfds_t)(n + 2), 250);
        if (pr > 0 && pf[0].revents) break;
        for (int i = pr > 0 ? n - 1 : -1; i >= 0; i--) { // (downwards: a dropped one's slot takes the last, already seen)
            short ev = pf[i + 2].revents;
            if (!ev) continue;
            int ok = lh->conn[i].out ? ((ev & (POLLOUT | POLLERR | POLLHUP)) ? _vs_lh_flush(lh, i) : 1)
                                     : _vs_lh_read(lh, i);
            if (!ok) _vs_lh_drop(lh, i);
        }
        if (pr > 0 && (pf[1].revents & POLLIN)) _vs_lh_accept(lh);
        if ((now = _vs_now()) - swept >= 1) swept = now, _vs_lh_sweep(lh, now);
    }
    _vs_hfree(NULL, pf);
    return NULL;
}

/* The defaults of vs_lighthouse_desc resolved and checked in this one place;
   fn names the caller (vs_lighthouse_query_desc, vs_lighthouse_start). */
_VS_PRIVATE vs_result _vs_lh_resolve(const vs_lighthouse_desc* d, vs_lighthouse_desc* out, const char* fn)
{
    vs_lighthouse_desc z;
    memset(&z, 0, sizeof z);
    if (!d) d = &z;
    if (d->port < 0 || d->port > 65535)
        return _vs_err(VS_ERR_INVALID, "%s: desc.port %d out of range (0 .. 65535; 0: any free one)", fn, d->port);
    if (d->max_conns < 0 || d->max_keys < 0)
        return _vs_err(VS_ERR_INVALID, "%s: desc.%s %d out of range (>= 0; 0: the default)", fn,
                       d->max_conns < 0 ? "max_conns" : "max_keys", d->max_conns < 0 ? d->max_conns : d->max_keys);
    const double secs[3] = {d->idle_s, d->stall_s, d->expire_s};
    static const char* const sname[3] = {"idle_s", "stall_s", "expire_s"};
    for (int i = 0; i < 3; i++)
        if (!(secs[i] >= 0))
            return _vs_err(VS_ERR_INVALID, "%s: desc.%s %g out of range (>= 0; 0: the default)", fn, sname[i], secs[i]);
    *out = *d;
    const char* tok = d->token ? d->token : getenv("VESCALE_LIGHTHOUSE_TOKEN");
    out->token = tok && *tok ? tok : NULL;
    if (out->token && strlen(out->token) > _VS_LH_TOKEN_MAX)
        return _vs_err(VS_ERR_INVALID, "%s: the token is %zu bytes, over %d", fn, strlen(out->token),
                       _VS_LH_TOKEN_MAX);
    struct rlimit rl;
    int fds = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 1u << 20
                  ? (int)rl.rlim_cur : 1 << 20;
    if (!out->max_conns) out->max_conns = 512;
    if (out->max_conns > fds - 24) out->max_conns = fds - 24 > 8 ? fds - 24 : 8; // (the process's other descriptors)
    if (!out->idle_s) out->idle_s = 60;
    if (!out->stall_s) out->stall_s = 5;
    if (!out->max_value) out->max_value = 1u << 20;
    if (!out->max_keys) out->max_keys = 65536;
    if (!out->max_bytes) out->max_bytes = (size_t)64 << 20;
    if (!out->expire_s) out->expire_s = 600;
    _VS_TRY(_vs_resolve_level(d->log_level, &out->log_level));
    if (out->max_value > 0x7fffffffu)
        return _vs_err(VS_ERR_INVALID, "%s: desc.max_value %zu out of range (at most 2^31 - 1)", fn, out->max_value);
    return VS_OK;
}

VS_API vs_result vs_lighthouse_query_desc(const vs_lighthouse_desc* d, vs_lighthouse_desc* out)
{
    _VS_CHECK_NULL(out, "out");
    return _vs_lh_resolve(d, out, "vs_lighthouse_query_desc");
}

VS_API vs_result vs_lighthouse_start_desc(const vs_lighthouse_desc* desc, vs_lighthouse** out)
{
    if (!out) return _vs_err(VS_ERR_INVALID, "vs_lighthouse_start: out is NULL");
    *out = NULL;
    vs_lighthouse_desc d;
    _VS_TRY(_vs_lh_resolve(desc, &d, "vs_lighthouse_start"));
    const char* addr = d.addr;
    struct addrinfo* ai = NULL;
    int gr = _vs_tcp_resolve(addr && *addr ? addr : NULL, d.port, 1, &ai);
    if (gr != 0)
        return _vs_err_backend(VS_ERR_IO, gr, "vs_lighthouse_start: cannot resolve '%s': %s", addr ? addr : "",
                               gai_strerror(gr));
    vs_lighthouse* lh = _VS_HNEW(NULL, vs_lighthouse, 1);
    vs_result r = VS_OK;
    int one = 1;
    if (!lh) {
        freeaddrinfo(ai);
        return _vs_err(VS_ERR_NOMEM, "vs_lighthouse_start: out of memory");
    }
    lh->d = d;
    _vs_hooks_init(&lh->hooks, &d.logger, d.log_level, NULL);
    if (d.token) snprintf(lh->token, sizeof lh->token, "%s", d.token);
    lh->d.token = NULL; // (the secret is not kept where the desc is read back)
    lh->wake[0] = lh->wake[1] = -1;
    lh->spare = open("/dev/null", O_RDONLY);
    lh->lfd = socket(ai->ai_family, SOCK_STREAM, 0);
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    int fl = lh->lfd >= 0 ? fcntl(lh->lfd, F_GETFL, 0) : -1;
    if (lh->lfd < 0 || setsockopt(lh->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(lh->lfd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(lh->lfd, SOMAXCONN) != 0 ||
        getsockname(lh->lfd, (struct sockaddr*)&sa, &sl) != 0 || fl < 0 || fcntl(lh->lfd, F_SETFL, fl | O_NONBLOCK) != 0)
        r = _vs_err_backend(VS_ERR_IO, errno, "vs_lighthouse_start: cannot listen on %s:%d: %s",
                            addr && *addr ? addr : "*", d.port, strerror(errno));
    freeaddrinfo(ai);
    if (!r) lh->port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6*)&sa)->sin6_port
                                                      : ((struct sockaddr_in*)&sa)->sin_port);
    if (!r && pipe(lh->wake) != 0)
        r = _vs_err_backend(VS_ERR_IO, errno, "vs_lighthouse_start: pipe: %s", strerror(errno));
    if (!r) pthread_mutex_init(&lh->smu, NULL);
    if (!r && pthread_create(&lh->th, NULL, _vs_lh_main, lh) != 0) {
        pthread_mutex_destroy(&lh->smu);
        r = _vs_err(VS_ERR_NOMEM, "vs_lighthouse_start: cannot start its thread");
    }
    if (r) {
        if (lh->lfd >= 0) close(lh->lfd);
        if (lh->spare >= 0) close(lh->spare);
        if (lh->wake[0] >= 0) close(lh->wake[0]), close(lh->wake[1]);
        _vs_hfree(NULL, lh);
        return r;
    }
    if (!lh->token[0]) // (said once, as it starts)
        _vs_lh_log(lh, VS_LOG_WARN, "the lighthouse on port %d has no token: anyone who reaches it can read its "
                   "jobs' entries and end them (give one: vs_lighthouse_desc.token, VESCALE_LIGHTHOUSE_TOKEN, "
                   "vescale-lighthouse --token-file)", lh->port);
    *out = lh;
    return VS_OK;
}

VS_API vs_result vs_lighthouse_start(const char* addr, int port, vs_lighthouse** out)
{
    vs_lighthouse_desc d;
    memset(&d, 0, sizeof d);
    d.addr = addr, d.port = port;
    return vs_lighthouse_start_desc(&d, out);
}

VS_API int vs_lighthouse_port(const vs_lighthouse* lh) { return lh ? lh->port : 0; }

VS_API vs_result vs_lighthouse_query_stats(vs_lighthouse* lh, vs_lighthouse_stats* out)
{
    _VS_CHECK_NULL(lh, "lighthouse");
    _VS_CHECK_NULL(out, "out");
    pthread_mutex_lock(&lh->smu);
    *out = lh->st;
    pthread_mutex_unlock(&lh->smu);
    return VS_OK;
}

VS_API void vs_lighthouse_stop(vs_lighthouse* lh)
{
    if (!lh) return;
    char b = 1;
    while (write(lh->wake[1], &b, 1) < 0 && errno == EINTR) {}
    pthread_join(lh->th, NULL);
    while (lh->nconn) {
        _vs_lh_conn* c = &lh->conn[--lh->nconn];
        close(c->fd);
        _vs_hfree(NULL, c->in), _vs_hfree(NULL, c->out);
    }
    for (int b = 0; b < _VS_LH_BUCKETS; b++)
        while (lh->tab[b]) _vs_lh_unlink(lh, &lh->tab[b]);
    for (int j = 0; j < lh->njobs; j++) _vs_hfree(NULL, lh->jobs[j]);
    close(lh->lfd), close(lh->wake[0]), close(lh->wake[1]);
    if (lh->spare >= 0) close(lh->spare);
    pthread_mutex_destroy(&lh->smu);
    _vs_hfree(NULL, lh->conn);
    _vs_hfree(NULL, lh);
}

// >>kernels --------------------------------------------------------------------
#if defined(VESCALE_NCCL) && !defined(_VS_MESH_CUDA)
#define _VS_MESH_CUDA 1 /* device buffers: kernels through NVRTC (link -lnvrtc) */
#endif
#if (defined(_VS_MESH_CUDA) || defined(VESCALE_NVRTC)) && !defined(_VS_MESH_NVRTC)
#define _VS_MESH_NVRTC 1 /* VESCALE_NVRTC alone: only the compiler half (tests) */
#endif
#ifndef _VS_MESH_FORCE_DEVICE
#define _VS_MESH_FORCE_DEVICE 0 /* tests only: the device path over a host transport */
#endif
#ifdef __cplusplus
}
#endif
#if defined(_VS_MESH_CUDA) && !defined(VESCALE_NCCL)
#include <cuda_runtime.h>
#endif
#ifdef _VS_MESH_NVRTC
#include <nvrtc.h>
#endif
#ifdef __cplusplus
extern "C" {
#endif

/* The device kernels of layouts, TP and init, written once. The host path
   compiles this text as C (each kernel a plain loop, each "thread block" a loop
   over its threads); with device buffers (the NCCL transport) the very same text
   is handed, as a string, to NVRTC at run time (vs_kernels_get: once per process
   and GPU architecture) and launched on the communicator's stream, so a trainer
   built by gcc needs no nvcc. NVRTC runs with
   --fmad=false and IEEE division and square root, and the text brings its own
   exp, log and cos (double, from + - * / only), so host and device give the same
   bits. Row reductions (cross-entropy's max and sum of exps) use one fixed order
   on both: VS_MKT strided partial sums, then a tree. Dtype and init-kind codes
   are vs_dtype's and vs_init_kind's values. Block comments only in here: the
   text becomes one line. */
#define _VS_MK_MAXD 8
#define _VS_MESH_KERNELS \
    typedef struct VS_MKN(geo_s) { /* a strided box copy: element x of the box */ \
        long long dim[_VS_MK_MAXD], dstr[_VS_MK_MAXD], sstr[_VS_MK_MAXD]; \
        long long doff, soff; \
        int nd, esz; \
    } VS_MKN(geo); \
    typedef struct VS_MKN(ibox_s) { /* a shard's box in its tensor, for init */ \
        long long ls[_VS_MK_MAXD], off[_VS_MK_MAXD], shape[_VS_MK_MAXD]; \
        int nd; \
    } VS_MKN(ibox); \
    VS_MKDEV double VS_MKN(pow2)(long long k) /* 2^k for k in [-1022, 1023] */ \
    { \
        return VS_MKU2D((unsigned long long)(k + 1023) << 52); \
    } \
    VS_MKDEV double VS_MKN(exp)(double x) \
    { \
        double k, r, p; \
        long long ki; \
        if (x != x) return x; \
        if (x > 709.8) return VS_MKU2D(0x7ff0000000000000ull); \
        if (x < -745.2) return 0.0; \
        ki = (long long)(x * 1.4426950408889634 + (x < 0 ? -0.5 : 0.5)); \
        k = (double)ki; \
        r = (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10; /* Cody-Waite */ \
        /* Taylor to r^13 (|r| < 0.35: below 1e-17), Horner */ \
        p = 1.6059043836821613e-10; p = p * r + 2.08767569878681e-09; p = p * r + 2.505210838544172e-08; p = p * r + 2.755731922398589e-07; p = p * r + 2.7557319223985893e-06; p = p * r + 2.48015873015873e-05; p = p * r + 0.0001984126984126984; p = p * r + 0.001388888888888889; p = p * r + 0.008333333333333333; p = p * r + 0.041666666666666664; p = p * r + 0.16666666666666666; p = p * r + 0.5; p = p * r + 1.0; p = p * r + 1.0; \
        if (ki > 1023) return p * VS_MKN(pow2)(ki - 1) * 2.0; \
        if (ki < -1021) return p * VS_MKN(pow2)(ki + 60) * VS_MKN(pow2)(-60); \
        return p * VS_MKN(pow2)(ki); \
    } \
    VS_MKDEV double VS_MKN(log)(double x) \
    { \
        unsigned long long u; \
        long long e = 0; \
        double m, s, s2, p; \
        if (x != x) return x; \
        if (x < 0) return VS_MKU2D(0x7ff8000000000000ull); \
        if (x == 0) return VS_MKU2D(0xfff0000000000000ull); \
        if (x > 1.7976931348623157e308) return x; \
        u = VS_MKD2U(x); \
        if (u < 0x0010000000000000ull) { /* subnormal */ \
            x *= 18014398509481984.0; \
            u = VS_MKD2U(x); \
            e = -54; \
        } \
        e += (long long)(u >> 52) - 1023; \
        m = VS_MKU2D((u & 0x000fffffffffffffull) | 0x3ff0000000000000ull); \
        if (m > 1.4142135623730951) { \
            m *= 0.5; \
            e += 1; \
        } \
        s = (m - 1.0) / (m + 1.0); /* log m = 2 atanh s, |s| < 0.172 */ \
        s2 = s * s; \
        p = 0.043478260869565216; p = p * s2 + 0.047619047619047616; p = p * s2 + 0.05263157894736842; p = p * s2 + 0.058823529411764705; p = p * s2 + 0.06666666666666667; p = p * s2 + 0.07692307692307693; p = p * s2 + 0.09090909090909091; p = p * s2 + 0.1111111111111111; p = p * s2 + 0.14285714285714285; p = p * s2 + 0.2; p = p * s2 + 0.3333333333333333; p = p * s2 + 1.0; /* sum of s2^j / (2j + 1) */ \
        return (double)e * 6.93147180369123816490e-01 + (2.0 * s * p + (double)e * 1.90821492927058770002e-10); \
    } \
    VS_MKDEV double VS_MKN(cos2pi)(double v) /* cos(2 pi v), v in [0, 1) */ \
    { \
        double w = v * 4.0, f, t, t2, c, sn; \
        long long q = (long long)w; \
        f = w - (double)q; \
        if (f > 0.5) { \
            f -= 1.0; \
            q += 1; \
        } \
        t = f * 1.5707963267948966; \
        t2 = t * t; \
        c = -1.5619206968586225e-16; c = c * t2 + 4.779477332387385e-14; c = c * t2 + -1.1470745597729725e-11; c = c * t2 + 2.08767569878681e-09; c = c * t2 + -2.755731922398589e-07; c = c * t2 + 2.48015873015873e-05; c = c * t2 + -0.001388888888888889; c = c * t2 + 0.041666666666666664; c = c * t2 + -0.5; c = c * t2 + 1.0; \
        sn = -8.22063524662433e-18; sn = sn * t2 + 2.8114572543455206e-15; sn = sn * t2 + -7.647163731819816e-13; sn = sn * t2 + 1.6059043836821613e-10; sn = sn * t2 + -2.505210838544172e-08; sn = sn * t2 + 2.7557319223985893e-06; sn = sn * t2 + -0.0001984126984126984; sn = sn * t2 + 0.008333333333333333; sn = sn * t2 + -0.16666666666666666; sn = sn * t2 + 1.0; \
        sn *= t; \
        switch (q & 3) { \
        case 0: return c; \
        case 1: return -sn; \
        case 2: return -c; \
        default: return sn; \
        } \
    } \
    VS_MKDEV void VS_MKN(philox)(unsigned long long key, unsigned long long lo, unsigned long long hi, \
                                   unsigned int* out) \
    { \
        unsigned int c0 = (unsigned int)lo, c1 = (unsigned int)(lo >> 32), c2 = (unsigned int)hi, \
                     c3 = (unsigned int)(hi >> 32), k0 = (unsigned int)key, k1 = (unsigned int)(key >> 32), n0, n2; \
        unsigned long long p0, p1; \
        int r; \
        for (r = 0; r < 10; r++) { \
            p0 = 0xD2511F53ull * c0, p1 = 0xCD9E8D57ull * c2; \
            n0 = (unsigned int)(p1 >> 32) ^ c1 ^ k0, n2 = (unsigned int)(p0 >> 32) ^ c3 ^ k1; \
            c0 = n0, c1 = (unsigned int)p1, c2 = n2, c3 = (unsigned int)p0; \
            k0 += 0x9E3779B9u, k1 += 0xBB67AE85u; \
        } \
        out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3; \
    } \
    /* element `index`'s value before rounding: kinds 0 zeros 1 ones 2 constant 3 \
       uniform 4 normal 5 scaled normal (std: b or its scaled value) */ \
    VS_MKDEV double VS_MKN(draw)(int kind, unsigned long long key, unsigned long long index, double a, double b, \
                                   double std) \
    { \
        unsigned int x[4]; \
        double u, v; \
        if (kind == 0) return 0.0; \
        if (kind == 1) return 1.0; \
        if (kind == 2) return a; \
        VS_MKN(philox)(key, index, 0, x); \
        u = (double)(((unsigned long long)x[0] << 21) ^ (x[1] >> 11)) * (1.0 / 9007199254740992.0); \
        if (kind == 3) return a + (b - a) * u; \
        v = (double)(((unsigned long long)x[2] << 21) ^ (x[3] >> 11)) * (1.0 / 9007199254740992.0); \
        return a + std * (sqrt(-2.0 * VS_MKN(log)(1.0 - u)) * VS_MKN(cos2pi)(v)); \
    } \
    /* stores v as dtype dt at element i; uniform draws that round up to b store a */ \
    VS_MKDEV void VS_MKN(store)(void* p, int dt, long long i, double v, int kind, double a, double b) \
    { \
        float f; \
        unsigned short h; \
        switch (dt) { \
        case 1: /* f32 */ \
            f = (float)v; \
            if (kind == 3 && (double)f >= b) f = (float)a; \
            ((float*)p)[i] = f; \
            break; \
        case 2: /* f16 */ \
            h = VS_MKN(f16)((float)v); \
            if (kind == 3 && (double)VS_MKN(from_f16)(h) >= b) h = VS_MKN(f16)((float)a); \
            ((unsigned short*)p)[i] = h; \
            break; \
        case 3: /* bf16 */ \
            h = VS_MKN(bf16)((float)v); \
            if (kind == 3 && (double)VS_MKU2F((unsigned int)h << 16) >= b) h = VS_MKN(bf16)((float)a); \
            ((unsigned short*)p)[i] = h; \
            break; \
        case 4: /* f64 */ \
            ((double*)p)[i] = kind == 3 && v >= b ? a : v; \
            break; \
        case 5: ((int*)p)[i] = (int)v; break; \
        case 6: ((long long*)p)[i] = (long long)v; break; \
        default: ((unsigned char*)p)[i] = (unsigned char)v; break; \
        } \
    } \
    VS_MKGLOBAL VS_MKN(init)(void* out, int dt, long long n, VS_MKN(ibox) g, unsigned long long key, int kind, \
                               double a, double b, double std) \
    { \
        VS_MKLOOP(x, n) { \
            long long rem = x, q; \
            unsigned long long gi = 0, mul = 1; \
            int d; \
            for (d = g.nd - 1; d >= 0; d--) { /* row-major: global index of local element x */ \
                q = rem % g.ls[d]; \
                rem /= g.ls[d]; \
                gi += (unsigned long long)(g.off[d] + q) * mul; \
                mul *= (unsigned long long)g.shape[d]; \
            } \
            VS_MKN(store)(out, dt, x, VS_MKN(draw)(kind, key, gi, a, b, std), kind, a, b); \
        } \
    } \
    VS_MKGLOBAL VS_MKN(box)(char* dst, const char* src, long long n, VS_MKN(geo) g) \
    { \
        VS_MKLOOP(x, n) { \
            long long rem = x, q, so = g.soff, dof = g.doff; \
            int d; \
            for (d = g.nd - 1; d >= 0; d--) { \
                q = rem % g.dim[d]; \
                rem /= g.dim[d]; \
                so += q * g.sstr[d]; \
                dof += q * g.dstr[d]; \
            } \
            switch (g.esz) { \
            case 1: ((unsigned char*)dst)[dof] = ((const unsigned char*)src)[so]; break; \
            case 2: ((unsigned short*)dst)[dof] = ((const unsigned short*)src)[so]; break; \
            case 4: ((unsigned int*)dst)[dof] = ((const unsigned int*)src)[so]; break; \
            default: ((unsigned long long*)dst)[dof] = ((const unsigned long long*)src)[so]; break; \
            } \
        } \
    } \
    VS_MKGLOBAL VS_MKN(embed_fwd)(float* out, const float* table, const int* ids, long long n, long long dim, \
                                    long long start, long long rows) \
    { \
        VS_MKLOOP(x, n * dim) { \
            long long i = x / dim, r = ids[i] - start; \
            out[x] = r >= 0 && r < rows ? table[r * dim + (x - i * dim)] : 0.0f; \
        } \
    } \
    /* element (r, j) of the table gradient is owned by one thread (j, r % nb), \
       which adds the tokens in order: the host loop's order, for any nb */ \
    VS_MKGLOBAL VS_MKN(embed_bwd)(float* gt, const float* gout, const int* ids, long long n, long long dim, \
                                    long long start, long long rows, long long nb) \
    { \
        VS_MKLOOP(x, dim * nb) { \
            long long j = x % dim, b = x / dim, i, r; \
            for (i = 0; i < n; i++) { \
                r = ids[i] - start; \
                if (r >= 0 && r < rows && r % nb == b) gt[r * dim + j] += gout[i * dim + j]; \
            } \
        } \
    } \
    VS_MKGLOBAL VS_MKN(ce_max)(float* mx, const float* lg, long long n, long long rows) \
    { \
        VS_MKSHARED float s[VS_MKT]; \
        /* cnt threads have a column: the others' partials would be the identity \
           (-inf here, 0 in ce_sum), so the tree leaves them out: the same bits \
           as the full tree, without the host build's idle loops */ \
        int cnt = VS_MKWIDTH(rows, VS_MKT); \
        VS_MKROWS(i, n) { \
            VS_MKTHREADS_BELOW(t, cnt) { \
                float m = VS_MKU2F(0xff800000u), v; \
                long long j; \
                for (j = t; j < rows; j += VS_MKT) { \
                    v = lg[i * rows + j]; \
                    m = v > m ? v : m; \
                } \
                s[t] = m; \
            } \
            VS_MKSYNC; \
            VS_MKFOLD(s, cnt, VS_MKT, VS_MK_MAX) \
            VS_MKTHREADS(t) if (t == 0) mx[i] = s[0]; \
            VS_MKSYNC; \
        } \
    } \
    VS_MKGLOBAL VS_MKN(ce_sum)(float* se, float* tl, const float* lg, const float* mx, const int* tg, long long n, \
                                 long long rows, long long start) \
    { \
        VS_MKSHARED float s[VS_MKT]; \
        int cnt = VS_MKWIDTH(rows, VS_MKT); /* as in ce_max */ \
        VS_MKROWS(i, n) { \
            VS_MKTHREADS_BELOW(t, cnt) { \
                float acc = 0.0f; \
                long long j; \
                for (j = t; j < rows; j += VS_MKT) acc += (float)VS_MKN(exp)((double)(lg[i * rows + j] - mx[i])); \
                s[t] = acc; \
            } \
            VS_MKSYNC; \
            VS_MKFOLD(s, cnt, VS_MKT, VS_MK_ADD) \
            VS_MKTHREADS(t) if (t == 0) { \
                long long q = tg[i] - start; \
                se[i] = s[0]; \
                tl[i] = q >= 0 && q < rows ? lg[i * rows + q] : 0.0f; \
            } \
            VS_MKSYNC; \
        } \
    } \
    VS_MKGLOBAL VS_MKN(ce_loss)(float* loss, const float* mx, const float* se, const float* tl, long long n) \
    { \
        VS_MKLOOP(x, n) loss[x] = (float)VS_MKN(log)((double)se[x]) + mx[x] - tl[x]; \
    } \
    VS_MKGLOBAL VS_MKN(ce_grad)(float* g, const float* lg, const float* mx, const float* se, const int* tg, \
                                  long long n, long long rows, long long start) \
    { \
        VS_MKLOOP(x, n * rows) { \
            long long i = x / rows, j = x - i * rows; \
            g[x] = (float)VS_MKN(exp)((double)(lg[x] - mx[i])) / se[i] - (start + j == tg[i] ? 1.0f : 0.0f); \
        } \
    } \
    /* the vocab functions' id check on the device (>>tp): the first position whose \
       id is outside [0, vocab) and that id into flag[0], flag[1] (pinned host \
       memory, untouched when every id is in range; the host may read flag[0] \
       while the kernel runs: the id is written first, the position published \
       after it); one block, each thread's \
       first strided position, then a tree of minima: the same answer however \
       the threads interleave */ \
    VS_MKGLOBAL VS_MKN(ids_check)(long long* flag, const int* ids, long long n, long long vocab) \
    { \
        VS_MKSHARED long long s[VS_MKT]; \
        VS_MKROWS(row, 1) { \
            VS_MKTHREADS(t) { \
                long long x, f = n; \
                for (x = t; x < n; x += VS_MKT) \
                    if (ids[x] < 0 || ids[x] >= vocab) { \
                        f = x; \
                        break; \
                    } \
                s[t] = f; \
            } \
            VS_MKSYNC; \
            VS_MKFOLD(s, VS_MKT, VS_MKT, VS_MK_MIN) \
            VS_MKTHREADS(t) if (t == 0 && s[0] < n) { \
                flag[1] = ids[s[0]]; \
                VS_MKPUBLISH(&flag[0], s[0]); \
            } \
            VS_MKSYNC; \
        } \
    } \
    /* the row-parallel bias (>>tp): y[x] + b[x % cols] in y's dtype dt (f32, f16, \
       bf16: an f32 add rounded once; f64: a double add), b of dtype bdt (dt, or \
       f32 for f16/bf16 y) */ \
    VS_MKDEV float VS_MKN(ld16)(const unsigned short* p, long long i, int dt) \
    { \
        return dt == 3 ? VS_MKU2F((unsigned int)p[i] << 16) : VS_MKN(from_f16)(p[i]); \
    } \
    VS_MKGLOBAL VS_MKN(bias_add)(void* y, const void* b, long long rows, long long cols, int dt, int bdt) \
    { \
        VS_MKLOOP(x, rows * cols) { \
            long long j = x % cols; \
            float v, bv; \
            if (dt == 4) { \
                ((double*)y)[x] = ((double*)y)[x] + ((const double*)b)[j]; \
                continue; \
            } \
            v = dt == 1 ? ((float*)y)[x] : VS_MKN(ld16)((const unsigned short*)y, x, dt); \
            bv = bdt == 1 ? ((const float*)b)[j] : VS_MKN(ld16)((const unsigned short*)b, j, bdt); \
            v = v + bv; \
            if (dt == 1) ((float*)y)[x] = v; \
            else ((unsigned short*)y)[x] = dt == 3 ? VS_MKN(bf16)(v) : VS_MKN(f16)(v); \
        } \
    }

/* Kernel indices (names: "vs_mk_" + the name); the row kernels run one block per
   row. */
enum {
    _VS_MK_INIT,
    _VS_MK_BOX,
    _VS_MK_EMBED_FWD,
    _VS_MK_EMBED_BWD,
    _VS_MK_CE_MAX,
    _VS_MK_CE_SUM,
    _VS_MK_CE_LOSS,
    _VS_MK_CE_GRAD,
    _VS_MK_IDS_CHECK,
    _VS_MK_BIAS_ADD,
    _VS_MK_N
};
#define _VS_MK_ROWKERNEL(ki) ((ki) == _VS_MK_CE_MAX || (ki) == _VS_MK_CE_SUM || (ki) == _VS_MK_IDS_CHECK)

/* The text as host C: the shared part once per file (vescale_ddp.h's
   implementation builds it where this one is not), then the kernels. */
#define VS_MK_DEVICE 0
#ifndef VS_MK_HOST_SHARED
#define VS_MK_HOST_SHARED
VS_MK_HOSTBITS
VS_MK_DTYPES
#endif
_VS_MESH_KERNELS
#undef VS_MK_DEVICE

/* Each kernel's declaration: its arguments and its cost from them (each
   operand's bytes once; the text's exp and log, in double, as _VS_MK_TRANS
   operations each: a stated count, not a measured one). */
#define _VS_MK_TRANS 20.0
_VS_PRIVATE double _vs_mk_esz(int dt) { return (double)vs_dtype_size((vs_dtype)dt); }
_VS_PRIVATE void _vs_mkc_init(void** a, vs_kernel_cost* c) /* out, dt, n, g, key, kind, a, b, std */
{
    double n = (double)VS_MKARG(long long, 2);
    c->flops = 64 * n; // Philox4x32-10's ten rounds and the draw's transform: 64 an element
    c->bytes = n * _vs_mk_esz(VS_MKARG(int, 1));
    c->len[0] = (long long)c->bytes;
}
_VS_PRIVATE void _vs_mkc_box(void** a, vs_kernel_cost* c) /* dst, src, n, g: each side's envelope */
{
    _vs_mk_geo g = VS_MKARG(_vs_mk_geo, 3);
    long long n = VS_MKARG(long long, 2), dl = 0, sl = 0;
    for (int d = 0; d < g.nd; d++) dl += (g.dim[d] - 1) * g.dstr[d], sl += (g.dim[d] - 1) * g.sstr[d];
    c->bytes = 2.0 * (double)n * g.esz;
    c->off[0] = g.doff * g.esz, c->off[1] = g.soff * g.esz;
    c->len[0] = n > 0 ? (dl + 1) * g.esz : 0, c->len[1] = n > 0 ? (sl + 1) * g.esz : 0;
}
_VS_PRIVATE void _vs_mkc_embed_fwd(void** a, vs_kernel_cost* c) /* out, table, ids, n, dim, start, rows */
{
    long long t = VS_MKARG(long long, 3), dim = VS_MKARG(long long, 4), rows = VS_MKARG(long long, 6);
    c->bytes = 4.0 * (double)t * (double)dim * 2 + 4.0 * (double)t; // out written, table rows read, ids
    c->len[0] = t * dim * 4, c->len[1] = rows * dim * 4, c->len[2] = t * 4;
}
_VS_PRIVATE void _vs_mkc_embed_bwd(void** a, vs_kernel_cost* c) /* gt, gout, ids, n, dim, start, rows, nb */
{
    long long t = VS_MKARG(long long, 3), dim = VS_MKARG(long long, 4), rows = VS_MKARG(long long, 6);
    c->flops = (double)t * (double)dim;
    c->bytes = 4.0 * (double)t * (double)dim * 3 + 4.0 * (double)t; // gout read, gt's rows read and written, ids
    c->len[0] = rows * dim * 4, c->len[1] = t * dim * 4, c->len[2] = t * 4;
}
_VS_PRIVATE void _vs_mkc_ce_max(void** a, vs_kernel_cost* c) /* mx, lg, n, rows */
{
    long long t = VS_MKARG(long long, 2), rows = VS_MKARG(long long, 3);
    c->flops = (double)t * (double)rows;
    c->bytes = 4.0 * (double)t * (double)rows + 4.0 * (double)t;
    c->len[0] = t * 4, c->len[1] = t * rows * 4;
}
_VS_PRIVATE void _vs_mkc_ce_sum(void** a, vs_kernel_cost* c) /* se, tl, lg, mx, tg, n, rows, start */
{
    long long t = VS_MKARG(long long, 5), rows = VS_MKARG(long long, 6);
    c->flops = (double)t * (double)rows * (_VS_MK_TRANS + 2);
    c->bytes = 4.0 * (double)t * (double)rows + 16.0 * (double)t;
    c->len[0] = c->len[1] = c->len[3] = c->len[4] = t * 4, c->len[2] = t * rows * 4;
}
_VS_PRIVATE void _vs_mkc_ce_loss(void** a, vs_kernel_cost* c) /* loss, mx, se, tl, n */
{
    long long t = VS_MKARG(long long, 4);
    c->flops = (double)t * (_VS_MK_TRANS + 2);
    c->bytes = 16.0 * (double)t;
    c->len[0] = c->len[1] = c->len[2] = c->len[3] = t * 4;
}
_VS_PRIVATE void _vs_mkc_ce_grad(void** a, vs_kernel_cost* c) /* g, lg, mx, se, tg, n, rows, start */
{
    long long t = VS_MKARG(long long, 5), rows = VS_MKARG(long long, 6);
    c->flops = (double)t * (double)rows * (_VS_MK_TRANS + 3);
    c->bytes = 8.0 * (double)t * (double)rows + 12.0 * (double)t;
    c->len[0] = c->len[1] = t * rows * 4, c->len[2] = c->len[3] = c->len[4] = t * 4;
}
_VS_PRIVATE void _vs_mkc_ids_check(void** a, vs_kernel_cost* c) /* flag (pinned), ids, n, vocab */
{
    long long t = VS_MKARG(long long, 2);
    c->flops = 2.0 * (double)t;
    c->bytes = 4.0 * (double)t + 16;
    c->len[0] = 2 * (long long)sizeof(long long), c->len[1] = t * 4;
}
_VS_PRIVATE void _vs_mkc_bias_add(void** a, vs_kernel_cost* c) /* y, b, rows, cols, dt, bdt */
{
    long long rows = VS_MKARG(long long, 2), cols = VS_MKARG(long long, 3);
    double ey = _vs_mk_esz(VS_MKARG(int, 4)), eb = _vs_mk_esz(VS_MKARG(int, 5));
    c->flops = (double)rows * (double)cols;
    c->bytes = 2.0 * (double)rows * (double)cols * ey + (double)cols * eb;
    c->len[0] = (long long)((double)rows * (double)cols * ey), c->len[1] = (long long)((double)cols * eb);
}
static _VS_UNUSED const vs_kernel_decl _vs_mk_decls[_VS_MK_N] = {
    {"vs_mk_init", "wilsuiddd", "out dt n g key kind a b std", _vs_mkc_init, (int)sizeof(_vs_mk_ibox)},
    {"vs_mk_box", "wrls", "dst src n g", _vs_mkc_box, (int)sizeof(_vs_mk_geo)},
    {"vs_mk_embed_fwd", "wrrllll", "out table ids n dim start rows", _vs_mkc_embed_fwd, 0},
    {"vs_mk_embed_bwd", "wrrlllll", "gt gout ids n dim start rows nb", _vs_mkc_embed_bwd, 0},
    {"vs_mk_ce_max", "wrll", "mx lg n rows", _vs_mkc_ce_max, 0},
    {"vs_mk_ce_sum", "wwrrrlll", "se tl lg mx tg n rows start", _vs_mkc_ce_sum, 0},
    {"vs_mk_ce_loss", "wrrrl", "loss mx se tl n", _vs_mkc_ce_loss, 0},
    {"vs_mk_ce_grad", "wrrrrlll", "g lg mx se tg n rows start", _vs_mkc_ce_grad, 0},
    {"vs_mk_ids_check", "wrll", "flag ids n vocab", _vs_mkc_ids_check, 0},
    {"vs_mk_bias_add", "wrllii", "y b rows cols dt bdt", _vs_mkc_bias_add, 0}};

_VS_PRIVATE void _vs_mk_host(int ki, void** a);

/* The text as NVRTC source: the prelude every part's kernels are compiled
   after, then this header's kernels (a vs_kernel_text like any part's).
   CUDA's qualifiers are spelled vs_rtc_* and defined by the prelude's first
   lines: a host compiler that includes the real <cuda_runtime.h> (gcc or clang
   building an NCCL trainer) defines __device__, __global__ and __shared__ as
   nothing, and the stringified text would lose them (the strict stand-in found
   it: NVRTC refused every kernel). */
#ifdef _VS_MESH_NVRTC /* (a C99 compiler need not take a string this long: only NVRTC builds have it) */
#define VS_MK_DEVICE 1
static _VS_UNUSED const char _vs_mk_prelude[] =
    "#define vs_rtc_device __device__\n#define vs_rtc_global extern \"C\" __global__\n"
    "#define vs_rtc_shared __shared__\n#define vs_rtc_sync __syncthreads\n" VS_MKSTR(VS_MK_DTYPES) "\n";
static _VS_UNUSED const char _vs_mk_body[] = VS_MKSTR(_VS_MESH_KERNELS) "\n";
#undef VS_MK_DEVICE
static _VS_UNUSED const vs_kernel_text _vs_mk_text = {"vescale_mesh_kernels.cu", _vs_mk_body, _VS_MK_N, _vs_mk_decls,
                                                      _vs_mk_host};
#endif

/* The codes the text uses are these enums' values. */
typedef char _vs_mk_codes_check[(VS_F32 == 1 && VS_F16 == 2 && VS_BF16 == 3 && VS_F64 == 4 && VS_I32 == 5 &&
                                  VS_I64 == 6 && VS_INIT_UNIFORM == 3 && VS_INIT_SCALED_NORMAL == 5 &&
                                  VS_TENSOR_MAX_DIMS == _VS_MK_MAXD)
                                     ? 1
                                     : -1];

/* Runs kernel ki's host build with the arguments as a launch passes them (each
   args[i] points at the i-th parameter). The host path runs every kernel through
   this; tests/test_device_layout.c's stand-in runtime does too. */
_VS_PRIVATE void _vs_mk_host(int ki, void** a)
{
#define _VS_A(T, i) (*(T*)a[i])
    switch (ki) {
    case _VS_MK_INIT:
        _vs_mk_init(_VS_A(void*, 0), _VS_A(int, 1), _VS_A(long long, 2), _VS_A(_vs_mk_ibox, 3),
                    _VS_A(unsigned long long, 4), _VS_A(int, 5), _VS_A(double, 6), _VS_A(double, 7), _VS_A(double, 8));
        break;
    case _VS_MK_BOX: _vs_mk_box(_VS_A(char*, 0), _VS_A(const char*, 1), _VS_A(long long, 2), _VS_A(_vs_mk_geo, 3)); break;
    case _VS_MK_EMBED_FWD:
        _vs_mk_embed_fwd(_VS_A(float*, 0), _VS_A(const float*, 1), _VS_A(const int*, 2), _VS_A(long long, 3),
                         _VS_A(long long, 4), _VS_A(long long, 5), _VS_A(long long, 6));
        break;
    case _VS_MK_EMBED_BWD:
        _vs_mk_embed_bwd(_VS_A(float*, 0), _VS_A(const float*, 1), _VS_A(const int*, 2), _VS_A(long long, 3),
                         _VS_A(long long, 4), _VS_A(long long, 5), _VS_A(long long, 6), _VS_A(long long, 7));
        break;
    case _VS_MK_CE_MAX:
        _vs_mk_ce_max(_VS_A(float*, 0), _VS_A(const float*, 1), _VS_A(long long, 2), _VS_A(long long, 3));
        break;
    case _VS_MK_CE_SUM:
        _vs_mk_ce_sum(_VS_A(float*, 0), _VS_A(float*, 1), _VS_A(const float*, 2), _VS_A(const float*, 3),
                      _VS_A(const int*, 4), _VS_A(long long, 5), _VS_A(long long, 6), _VS_A(long long, 7));
        break;
    case _VS_MK_CE_LOSS:
        _vs_mk_ce_loss(_VS_A(float*, 0), _VS_A(const float*, 1), _VS_A(const float*, 2), _VS_A(const float*, 3),
                       _VS_A(long long, 4));
        break;
    case _VS_MK_IDS_CHECK:
        _vs_mk_ids_check(_VS_A(long long*, 0), _VS_A(const int*, 1), _VS_A(long long, 2), _VS_A(long long, 3));
        break;
    case _VS_MK_BIAS_ADD:
        _vs_mk_bias_add(_VS_A(void*, 0), _VS_A(const void*, 1), _VS_A(long long, 2), _VS_A(long long, 3),
                        _VS_A(int, 4), _VS_A(int, 5));
        break;
    default:
        _vs_mk_ce_grad(_VS_A(float*, 0), _VS_A(const float*, 1), _VS_A(const float*, 2), _VS_A(const float*, 3),
                       _VS_A(const int*, 4), _VS_A(long long, 5), _VS_A(long long, 6), _VS_A(long long, 7));
        break;
    }
#undef _VS_A
}

/* The box copy's geometry: element strides of both sides, dims that are
   contiguous on both merged. */
_VS_PRIVATE _vs_mk_geo _vs_mk_geometry(const int64_t* dshape, const int64_t* doff, const int64_t* sshape,
                                       const int64_t* soff, const int64_t* box, int ndim, size_t esz)
{
    _vs_mk_geo g;
    memset(&g, 0, sizeof g);
    g.esz = (int)esz;
    int64_t ds = 1, ss = 1;
    long long dst[_VS_MK_MAXD], sst[_VS_MK_MAXD];
    for (int d = ndim - 1; d >= 0; d--) {
        dst[d] = ds, sst[d] = ss;
        g.doff += doff[d] * ds, g.soff += soff[d] * ss;
        ds *= dshape[d], ss *= sshape[d];
    }
    int nd = 0; // merged dims, outermost first
    for (int d = 0; d < ndim; d++) {
        if (nd > 0 && g.dstr[nd - 1] == box[d] * dst[d] && g.sstr[nd - 1] == box[d] * sst[d]) {
            g.dim[nd - 1] *= box[d], g.dstr[nd - 1] = dst[d], g.sstr[nd - 1] = sst[d];
            continue;
        }
        g.dim[nd] = box[d], g.dstr[nd] = dst[d], g.sstr[nd] = sst[d];
        nd++;
    }
    g.nd = nd;
    return g;
}

/* Compiles `src` for `arch` ("sm_90": a cubin; "compute_90": PTX) into a buffer
   from the hooks' allocator (h may be NULL: malloc), exactly as the device path
   does (--fmad=false, IEEE division and square root). No device needed. */
#ifdef _VS_MESH_NVRTC
_VS_PRIVATE vs_result _vs_nvrtc_compile(const _vs_hooks* h, const char* src, const char* prog_name, const char* arch,
                                        char** image, size_t* size)
{
    *image = NULL;
    *size = 0;
    char opt_arch[64];
    snprintf(opt_arch, sizeof opt_arch, "--gpu-architecture=%s", arch);
    const char* opts[] = {opt_arch, "--fmad=false", "--prec-div=true", "--prec-sqrt=true", "--ftz=false"};
    nvrtcProgram prog;
    nvrtcResult e = nvrtcCreateProgram(&prog, src, prog_name, 0, NULL, NULL);
    if (e != NVRTC_SUCCESS) return _vs_err(VS_ERR_BACKEND, "NVRTC: %s: %s", prog_name, nvrtcGetErrorString(e));
    e = nvrtcCompileProgram(prog, (int)(sizeof opts / sizeof opts[0]), opts);
    if (e != NVRTC_SUCCESS) {
        char log[512] = "";
        size_t n = 0;
        if (nvrtcGetProgramLogSize(prog, &n) == NVRTC_SUCCESS && n > 1) {
            char* full = (char*)_vs_halloc(h, n);
            if (full && nvrtcGetProgramLog(prog, full) == NVRTC_SUCCESS) snprintf(log, sizeof log, "%s", full);
            _vs_hfree(h, full);
        }
        nvrtcDestroyProgram(&prog);
        return _vs_err(VS_ERR_BACKEND, "NVRTC cannot compile %s for %s: %s: %s", prog_name, arch,
                       nvrtcGetErrorString(e), log);
    }
    int cubin = !strncmp(arch, "sm_", 3);
    e = cubin ? nvrtcGetCUBINSize(prog, size) : nvrtcGetPTXSize(prog, size);
    if (e == NVRTC_SUCCESS && !(*image = (char*)_vs_halloc(h, *size + 1))) {
        nvrtcDestroyProgram(&prog);
        return _vs_err(VS_ERR_NOMEM, "NVRTC: out of memory for a %zu-byte kernel image", *size);
    }
    if (e == NVRTC_SUCCESS) e = cubin ? nvrtcGetCUBIN(prog, *image) : nvrtcGetPTX(prog, *image);
    nvrtcDestroyProgram(&prog);
    if (e != NVRTC_SUCCESS) {
        _vs_hfree(h, *image);
        *image = NULL;
        return _vs_err(VS_ERR_BACKEND, "NVRTC: %s: %s", prog_name, nvrtcGetErrorString(e));
    }
    return VS_OK;
}
#endif // _VS_MESH_NVRTC

VS_API vs_result vs_nvrtc_compile(const vs_world* w, const char* src, const char* name, const char* arch,
                                  char** image, size_t* size)
{
    _VS_CHECK_NULL(src, "src");
    _VS_CHECK_NULL(name, "name");
    _VS_CHECK_NULL(arch, "arch");
    _VS_CHECK_NULL(image, "image");
    _VS_CHECK_NULL(size, "size");
#ifdef _VS_MESH_NVRTC
    return _vs_nvrtc_compile(_VS_WH(w), src, name, arch, image, size);
#else
    (void)w;
    *image = NULL;
    *size = 0;
    return _vs_err(VS_ERR_UNAVAILABLE, "vs_nvrtc_compile: built without NVRTC (define VESCALE_NCCL or VESCALE_NVRTC)");
#endif
}

#ifdef _VS_MESH_NVRTC
/* What NVRTC builds for a device of compute capability maj.mnr: a cubin for its
   own sm_XY when NVRTC knows it; for a device newer than the NVRTC, PTX for the
   newest compute_XY below it that NVRTC knows, which the driver compiles for the
   device (PTX runs on any later architecture). */
_VS_PRIVATE vs_result _vs_k_target(int maj, int mnr, char* out, size_t cap)
{
    int n = 0, archs[256], want = maj * 10 + mnr, best = 0, oldest = 0;
    nvrtcResult e = nvrtcGetNumSupportedArchs(&n);
    if (e == NVRTC_SUCCESS && (n <= 0 || n > 256)) e = NVRTC_ERROR_INTERNAL_ERROR;
    if (e == NVRTC_SUCCESS) e = nvrtcGetSupportedArchs(archs);
    if (e != NVRTC_SUCCESS)
        return _vs_err(VS_ERR_BACKEND, "NVRTC: the architectures it supports: %s", nvrtcGetErrorString(e));
    for (int i = 0; i < n; i++) {
        if (archs[i] == want) {
            snprintf(out, cap, "sm_%d", want);
            return VS_OK;
        }
        if (archs[i] < want && archs[i] > best) best = archs[i];
        if (!oldest || archs[i] < oldest) oldest = archs[i];
    }
    if (!best)
        return _vs_err(VS_ERR_UNSUPPORTED, "NVRTC cannot build for a device of compute capability %d.%d: the oldest "
                       "architecture it knows is sm_%d", maj, mnr, oldest);
    snprintf(out, cap, "compute_%d", best);
    return VS_OK;
}

/* The NVRTC source of t (the prelude, then t->body) compiled for target into a
   buffer from the C allocator; errors start with fn. */
_VS_PRIVATE vs_result _vs_k_compile(const vs_kernel_text* t, const char* target, const char* fn, char** image,
                                    size_t* size)
{
    size_t np = strlen(_vs_mk_prelude), nb = strlen(t->body);
    char* src = (char*)_vs_halloc(NULL, np + nb + 1);
    if (!src) return _vs_err(VS_ERR_NOMEM, "%s: out of memory for %s", fn, t->name);
    memcpy(src, _vs_mk_prelude, np);
    memcpy(src + np, t->body, nb + 1);
    vs_result r = _vs_nvrtc_compile(NULL, src, t->name, target, image, size);
    _vs_hfree(NULL, src);
    if (!r) return VS_OK;
    char why[768]; // the message buffer is about to be rewritten
    snprintf(why, sizeof why, "%s", vs_last_error());
    return _vs_err(r, "%s: %s", fn, why);
}
#endif // _VS_MESH_NVRTC

#ifdef _VS_MESH_CUDA
_VS_PRIVATE vs_result _vs_cuda_err(cudaError_t e, const char* fn, const char* what)
{
    return _vs_err_backend(VS_ERR_BACKEND, (int)e, "%s: %s: %s", fn, what, cudaGetErrorString(e));
}

/* The process's compiled kernels (vs_kernels_get), the one state outside the
   handles besides the per-thread error message: one entry per text and target
   ("sm_90", "compute_120"), its library loaded and its kernels looked up. An
   entry is complete before it is published and never changes or goes (the
   driver releases the libraries with the process; unloading them at exit would
   race the CUDA runtime's own teardown), so worlds and meshes share it freely;
   the list grows under the lock. Host memory from the C allocator: it belongs
   to no world. With VESCALE_STATIC each file has its own. The counts are for
   tests. */
typedef struct _vs_kentry {
    struct _vs_kentry* next;
    const vs_kernel_text* t; // its strings (static storage) are the key, with target
    char target[24];
    cudaLibrary_t lib;
    cudaKernel_t* k;
} _vs_kentry;
static struct {
    pthread_mutex_t mu;
    _vs_kentry* head;
    long compiles, loads; // NVRTC compilations and libraries loaded by this process
} _vs_kc = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};

_VS_PRIVATE int _vs_k_same(const vs_kernel_text* a, const vs_kernel_text* b)
{
    if (a == b) return 1;
    if (a->count != b->count || strcmp(a->body, b->body) || strcmp(a->name, b->name)) return 0;
    for (int i = 0; i < a->count; i++)
        if (strcmp(a->kernels[i].name, b->kernels[i].name)) return 0;
    return 1;
}

/* Compiles t for target, loads it and looks its kernels up (under _vs_kc.mu). */
_VS_PRIVATE vs_result _vs_k_build(const vs_kernel_text* t, const char* target, const char* fn, _vs_kentry** out)
{
    char* image = NULL;
    size_t size = 0;
    _vs_kentry* en = _VS_HNEW(NULL, _vs_kentry, 1);
    cudaKernel_t* k = _VS_HNEW(NULL, cudaKernel_t, t->count);
    vs_result r = en && k ? VS_OK : _vs_err(VS_ERR_NOMEM, "%s: out of memory for %s", fn, t->name);
    if (!r) r = _vs_k_compile(t, target, fn, &image, &size);
    cudaError_t e = cudaSuccess;
    if (!r) {
        _vs_kc.compiles++;
        if ((e = cudaLibraryLoadData(&en->lib, image, NULL, NULL, 0, NULL, NULL, 0)) != cudaSuccess)
            r = _vs_err_backend(VS_ERR_BACKEND, (int)e, "%s: loading %s (%s): %s", fn, t->name, target,
                                cudaGetErrorString(e));
    }
    if (!r) _vs_kc.loads++;
    for (int i = 0; i < t->count && !r; i++)
        if ((e = cudaLibraryGetKernel(&k[i], en->lib, t->kernels[i].name)) != cudaSuccess)
            r = _vs_cuda_err(e, fn, t->kernels[i].name);
    _vs_hfree(NULL, image);
    if (r) {
        if (en && en->lib) cudaLibraryUnload(en->lib);
        _vs_hfree(NULL, en);
        _vs_hfree(NULL, k);
        return r;
    }
    en->t = t, en->k = k;
    snprintf(en->target, sizeof en->target, "%s", target);
    en->next = _vs_kc.head;
    _vs_kc.head = en;
    *out = en;
    return VS_OK;
}

_VS_PRIVATE vs_result _vs_kernels_get(const vs_kernel_text* t, const char* fn, void** kernels)
{
    int dev = 0, maj = 0, mnr = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&maj, cudaDevAttrComputeCapabilityMajor, dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&mnr, cudaDevAttrComputeCapabilityMinor, dev);
    if (e != cudaSuccess) return _vs_cuda_err(e, fn, "the device's compute capability");
    char target[24];
    _VS_TRY(_vs_k_target(maj, mnr, target, sizeof target));
    pthread_mutex_lock(&_vs_kc.mu);
    _vs_kentry* en = _vs_kc.head;
    while (en && (strcmp(en->target, target) || !_vs_k_same(en->t, t))) en = en->next;
    vs_result r = en ? VS_OK : _vs_k_build(t, target, fn, &en);
    pthread_mutex_unlock(&_vs_kc.mu);
    for (int i = 0; i < t->count && !r; i++) kernels[i] = (void*)en->k[i];
    return r;
}

/* This world's kernels for the current device, from the process's cache the
   first time (a world is used by one thread at a time: its own memo needs no
   lock). */
typedef struct _vs_mkmod {
    int dev;
    void* k[_VS_MK_N];
} _vs_mkmod;

_VS_PRIVATE void _vs_mk_cache_free(vs_world* w)
{
    _vs_hfree(&w->hooks, w->kcache);
    w->kcache = NULL;
}

_VS_PRIVATE vs_result _vs_mk_module(vs_world* w, const char* fn, const _vs_mkmod** out)
{
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return _vs_cuda_err(e, fn, "cudaGetDevice");
    _vs_mkmod* md = (_vs_mkmod*)w->kcache;
    if (md && md->dev == dev) {
        *out = md;
        return VS_OK;
    }
    if (!md) {
        if (!(md = _VS_HNEW(&w->hooks, _vs_mkmod, 1))) return _vs_err(VS_ERR_NOMEM, "%s: out of memory", fn);
        w->kcache = md;
        w->kcache_free = _vs_mk_cache_free;
    }
    md->dev = -1; // until the kernels for dev are in
    _VS_TRY(_vs_kernels_get(&_vs_mk_text, fn, md->k));
    md->dev = dev;
    *out = md;
    return VS_OK;
}
#endif // _VS_MESH_CUDA

VS_API vs_result vs_kernels_get(const vs_kernel_text* t, const char* fn, void** kernels)
{
    _VS_CHECK_NULL(t, "t");
    _VS_CHECK_NULL(kernels, "kernels");
    if (!fn) fn = "vs_kernels_get";
    if (!t->name || !t->body || t->count <= 0 || !t->kernels)
        return _vs_err(VS_ERR_INVALID, "%s: kernel text %s: name, body, count (%d) and kernels must be set", fn,
                       t->name ? t->name : "(no name)", t->count);
#ifdef _VS_MESH_CUDA
    return _vs_kernels_get(t, fn, kernels);
#else
    return _vs_err(VS_ERR_UNAVAILABLE, "%s: %s: built without CUDA (define VESCALE_NCCL)", fn, t->name);
#endif
}

VS_API vs_result vs_kernel_cost_get(const vs_kernel_decl* d, void** a, vs_kernel_cost* out)
{
    _VS_CHECK_NULL(d, "d");
    _VS_CHECK_NULL(out, "out");
    memset(out, 0, sizeof *out);
    for (int i = 0; i < VS_KERNEL_MAX_ARGS; i++) out->len[i] = -1;
    out->dtype = VS_F32;
    if (!d->cost) return _vs_err(VS_ERR_INVALID, "vs_kernel_cost_get: kernel %s declares no cost", d->name ? d->name : "(no name)");
    _VS_CHECK_NULL(a, "a");
    d->cost(a, out);
    return VS_OK;
}

VS_API vs_result vs_cuda_error(int err, const char* fn, const char* what)
{
    if (!fn) fn = "vescale";
    if (!what) what = "CUDA";
#ifdef _VS_MESH_CUDA
    return _vs_cuda_err((cudaError_t)err, fn, what);
#else
    return _vs_err_backend(VS_ERR_BACKEND, err, "%s: %s: CUDA error %d", fn, what, err);
#endif
}

/* Device buffers on c: the NCCL transport's (tests may force the device path
   over the threads transport, with a stand-in runtime: _VS_MESH_FORCE_DEVICE). */
#ifdef _VS_MESH_CUDA
#define _VS_ON_DEVICE(c) ((c)->tp->device || (_VS_MESH_FORCE_DEVICE))
#else
#define _VS_ON_DEVICE(c) ((void)(c), 0)
#endif

/* vs_redistribute on device buffers (>>layout-device). */
_VS_PRIVATE vs_result _vs_redistribute_device(const vs_dtensor* src, const vs_dtensor* dst, int64_t n_in,
                                              int64_t n_out);

/* Device work of the library's own ordered with the caller's (>>nccl's
   _vs_nccl_fence): after_caller 1 before it, 0 after it. */
#ifdef VESCALE_NCCL
#define _VS_DEV_FENCE(c, after_caller, fn) _vs_nccl_fence((c), (after_caller), (fn))
/* A public device entry point of several kernels, copies and collectives on c:
   one fence pair around all of them (the caller's stream before the first, the
   last before the caller's stream) instead of one per operation. */
_VS_PRIVATE vs_result _vs_dev_enter(vs_comm* c, const char* fn)
{
    return c && _VS_ON_DEVICE(c) && c->fence_depth++ == 0 ? _vs_nccl_fence_now(c, 1, fn) : VS_OK;
}
_VS_PRIVATE vs_result _vs_dev_leave(vs_comm* c, const char* fn)
{
    return c && _VS_ON_DEVICE(c) && --c->fence_depth == 0 ? _vs_nccl_fence_now(c, 0, fn) : VS_OK;
}
#else
#define _VS_DEV_FENCE(c, after_caller, fn) ((void)(c), (void)(fn), VS_OK)
#define _vs_dev_enter(c, fn) ((void)(c), (void)(fn), VS_OK)
#define _vs_dev_leave(c, fn) ((void)(c), (void)(fn), VS_OK)
#endif

/* Kernel ki over `work` elements (row kernels: rows) with device buffers on c's
   stream, else its host build now. */
_VS_PRIVATE vs_result _vs_mk_run(vs_comm* c, const char* fn, int ki, long long work, void** args)
{
    if (work <= 0) return VS_OK;
#ifdef _VS_MESH_CUDA
    if (_VS_ON_DEVICE(c)) {
        const _vs_mkmod* md = NULL;
        _VS_TRY(_vs_mk_module(c->world, fn, &md));
        long long blocks = _VS_MK_ROWKERNEL(ki) ? work : (work + VS_MKT - 1) / VS_MKT;
        if (blocks > 65535) blocks = 65535; // grid-stride loops do the rest
        dim3 grid, block;
        grid.x = (unsigned)blocks, grid.y = grid.z = 1;
        block.x = VS_MKT, block.y = block.z = 1;
        _VS_TRY(_VS_DEV_FENCE(c, 1, fn));
        cudaError_t e = cudaLaunchKernel((const void*)md->k[ki], grid, block, args, 0, (cudaStream_t)vs_comm_stream(c));
        return e == cudaSuccess ? _VS_DEV_FENCE(c, 0, fn) : _vs_cuda_err(e, fn, _vs_mk_decls[ki].name);
    }
#else
    (void)c, (void)fn;
#endif
    _vs_mk_host(ki, args);
    return VS_OK;
}

/* Memory on c's side: device memory on c's stream, or host memory. */
_VS_PRIVATE vs_result _vs_mem_zero(vs_comm* c, const char* fn, void* p, size_t bytes)
{
    if (!bytes) return VS_OK;
#ifdef _VS_MESH_CUDA
    if (_VS_ON_DEVICE(c)) {
        _VS_TRY(_VS_DEV_FENCE(c, 1, fn));
        cudaError_t e = cudaMemsetAsync(p, 0, bytes, (cudaStream_t)vs_comm_stream(c));
        return e == cudaSuccess ? _VS_DEV_FENCE(c, 0, fn) : _vs_cuda_err(e, fn, "cudaMemsetAsync");
    }
#else
    (void)c, (void)fn;
#endif
    memset(p, 0, bytes);
    return VS_OK;
}

_VS_PRIVATE vs_result _vs_mem_copy(vs_comm* c, const char* fn, void* dst, const void* src, size_t bytes)
{
    if (!bytes || dst == src) return VS_OK;
#ifdef _VS_MESH_CUDA
    if (_VS_ON_DEVICE(c)) {
        _VS_TRY(_VS_DEV_FENCE(c, 1, fn));
        cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)vs_comm_stream(c));
        return e == cudaSuccess ? _VS_DEV_FENCE(c, 0, fn) : _vs_cuda_err(e, fn, "cudaMemcpyAsync");
    }
#else
    (void)c, (void)fn;
#endif
    _vs_copy(dst, src, bytes);
    return VS_OK;
}

/* An argument a device entry point's kernels and collectives will touch: on
   NCCL it must be device (or pinned, registered) memory; plain host memory is
   refused naming the argument, before any work (the kernel would fault). */
_VS_PRIVATE vs_result _vs_dev_arg(vs_comm* c, const char* fn, const char* arg, const void* p)
{
#ifdef VESCALE_NCCL
    return p && c && _VS_ON_DEVICE(c) ? _vs_nccl_check_buf(fn, arg, p) : VS_OK; // (the collectives' check)
#else
    (void)c, (void)fn, (void)arg, (void)p;
    return VS_OK;
#endif
}

/* Stream-ordered completion of the device paths (layout, TP, init with device
   buffers): a call enqueues its kernels and collectives and returns. Each kernel,
   copy and collective on c's stream comes after what the caller enqueued on its
   stream before (the communicator's caller stream: the one set with
   vs_comm_set_stream, else the legacy default stream; _VS_DEV_FENCE and
   _vs_nccl_submit's fence), and the caller's stream after it: a kernel's closing
   fence, or for a collective an async handle (_VS_DEV_WORK) that _vs_dev_done
   completes with vs_wait_stream (the caller's stream waits for its event, the host
   does not). Host transports with device buffers (tests: _VS_MESH_FORCE_DEVICE)
   block in the collective instead: their progress thread would race with the
   kernels around it. */
#define _VS_DEV_WORK(c, w) ((c)->tp->device ? &(w) : (vs_work**)NULL) /* w: NULL before */

_VS_PRIVATE vs_result _vs_dev_done(vs_result r, vs_work** w)
{
    vs_work* h = *w;
    *w = NULL; // (for the next collective)
    if (!h) return r;
    vs_result r2 = vs_wait_stream(h, NULL);
    return r ? r : r2;
}

/* c's caller stream (NULL on host transports). */
_VS_PRIVATE void* _vs_dev_caller(vs_comm* c)
{
#ifdef VESCALE_NCCL
    if (c->tp->device) return (void*)_vs_nccl_caller(c);
#endif
    (void)c;
    return NULL;
}

/* Work enqueued on stream `to` from now on waits for what is enqueued on `from`
   so far, through via's fence event recorded now (NCCL; nothing when from and to
   are one stream). vs_redistribute's steps change communicators (streams). */
_VS_PRIVATE vs_result _vs_dev_link(vs_comm* via, void* from, void* to, const char* fn)
{
#ifdef VESCALE_NCCL
    if (!via->tp->device || from == to || !via->fence) return VS_OK;
    cudaError_t e = cudaEventRecord(via->fence, (cudaStream_t)from);
    if (e == cudaSuccess) e = cudaStreamWaitEvent((cudaStream_t)to, via->fence, 0);
    return e == cudaSuccess ? VS_OK : _vs_cuda_err(e, fn, "ordering two streams");
#else
    (void)via, (void)from, (void)to, (void)fn;
    return VS_OK;
#endif
}

/* The device paths' one host wait: for event ev, or (ev NULL) for all that is
   enqueued so far on c's stream, with c's deadline and fault watch on NCCL
   (_vs_nccl_sync, as vs_sync_stream: a peer that stalls or fails ends it in
   VS_ERR_TIMEOUT / VS_ERR_ABORTED, where a cudaEventSynchronize or
   cudaDeviceSynchronize waited for good). Over a host transport (the tests'
   forced device path) no peer holds a stream: a plain wait. */
_VS_PRIVATE vs_result _vs_dev_wait(vs_comm* c, void* ev, const char* what)
{
#ifdef VESCALE_NCCL
    if (c->tp->device) {
        _VS_NCCL_LOCKED(c, _vs_nccl_sync(c, (cudaEvent_t)ev, what, 0, 0));
    }
#endif
#ifdef _VS_MESH_CUDA
    if (_VS_ON_DEVICE(c)) {
        cudaError_t e = ev ? cudaEventSynchronize((cudaEvent_t)ev)
                           : cudaStreamSynchronize((cudaStream_t)vs_comm_stream(c));
        if (e != cudaSuccess) return _vs_cuda_err(e, what, "the host's wait for the device");
    }
#endif
    (void)c, (void)ev, (void)what;
    return VS_OK;
}

/* Before a device scratch buffer of c's goes (a growth's free, vs_mesh_free):
   the work of the calls that used it done. Each call enqueued it on c's stream
   and ordered c's caller stream after it (_vs_mk_run's fences, _vs_dev_link),
   so waiting for both, with the deadline (_vs_dev_wait), covers them. A host
   sync, only when a buffer grows or goes (never in a steady state). */
_VS_PRIVATE vs_result _vs_dev_drain(vs_comm* c, const char* fn)
{
    if (!_VS_ON_DEVICE(c)) return VS_OK;
    vs_result r = _vs_dev_wait(c, NULL, fn);
    void* caller = _vs_dev_caller(c);
    if (!r && caller && caller != vs_comm_stream(c)) r = vs_sync_stream(c, caller);
    return r;
}

/* A buffer on c's side through the world's hooks (device: vs_device_alloc). */
_VS_PRIVATE void* _vs_mem_alloc(vs_comm* c, size_t bytes)
{
    const vs_world* w = c->world;
    if (_VS_ON_DEVICE(c)) return vs_device_alloc(w, bytes ? bytes : 1);
    return _vs_halloc(w ? &w->hooks : NULL, bytes ? bytes : 1);
}

_VS_PRIVATE void _vs_mem_free(vs_comm* c, void* p)
{
    const vs_world* w = c->world;
    if (_VS_ON_DEVICE(c))
        vs_device_free(w, p);
    else
        _vs_hfree(w ? &w->hooks : NULL, p);
}

// >>layout --------------------------------------------------------------------

/* Ranks along one mesh dim that redistribute's per-member tables (stack arrays)
   are sized for; a larger dim is VS_ERR_UNSUPPORTED. */
#define _VS_MAX_DIM_RANKS 256

VS_API vs_placement vs_replicate(void)
{
    vs_placement p;
    memset(&p, 0, sizeof p);
    return p;
}

VS_API vs_placement vs_shard(int dim)
{
    vs_placement p = vs_replicate();
    p.kind = VS_PLACE_SHARD;
    p.dim = dim;
    return p;
}

VS_API vs_placement vs_partial(vs_op op)
{
    vs_placement p = vs_replicate();
    p.kind = VS_PLACE_PARTIAL;
    p.op = op == VS_OP_DEFAULT ? VS_OP_SUM : op;
    return p;
}

/* Canonical form: unused fields zero, Partial's default op made explicit. */
_VS_PRIVATE vs_placement _vs_place_norm(vs_placement p)
{
    if (p.kind == VS_PLACE_SHARD) return vs_shard(p.dim);
    if (p.kind == VS_PLACE_PARTIAL) return vs_partial(p.op);
    return vs_replicate();
}

_VS_PRIVATE int _vs_place_eq(vs_placement a, vs_placement b)
{
    a = _vs_place_norm(a);
    b = _vs_place_norm(b);
    return a.kind == b.kind && a.dim == b.dim && a.op == b.op;
}

_VS_PRIVATE int _vs_place_text(vs_placement p, char* buf, size_t cap)
{
    if (p.kind == VS_PLACE_SHARD) return snprintf(buf, cap, "Shard(%d)", p.dim);
    if (p.kind == VS_PLACE_PARTIAL) return snprintf(buf, cap, "Partial(%s)", vs_op_name(p.op));
    if (p.kind == VS_PLACE_REPLICATE) return snprintf(buf, cap, "Replicate");
    return snprintf(buf, cap, "Invalid(%d)", (int)p.kind);
}

/* The label of mesh dim k in messages: its name on a mesh, its index without one. */
_VS_PRIVATE void _vs_mdim_label(const vs_mesh* m, int k, char* buf, size_t cap)
{
    if (m) snprintf(buf, cap, "%s", m->names[k]);
    else snprintf(buf, cap, "%d", k);
}

/* Placements p[0..mesh_ndims) against a tensor of ndim dims: kinds, Shard dims,
   Partial ops. m (may be NULL) only names the mesh dims in messages. */
_VS_PRIVATE vs_result _vs_placements_check(const char* fn, const vs_mesh* m, int mesh_ndims, const vs_placement* p,
                                           int ndim)
{
    if (ndim < 0 || ndim > VS_TENSOR_MAX_DIMS)
        return _vs_err(VS_ERR_INVALID, "%s: tensor of %d dims (at most %d)", fn, ndim, VS_TENSOR_MAX_DIMS);
    for (int k = 0; k < mesh_ndims; k++) {
        char t[48], dn[VS_MESH_NAME_MAX];
        _vs_place_text(p[k], t, sizeof t);
        _vs_mdim_label(m, k, dn, sizeof dn);
        if (p[k].kind == VS_PLACE_SHARD && (p[k].dim < 0 || p[k].dim >= ndim))
            return _vs_err(VS_ERR_INVALID, "%s: %s on mesh dim %s: tensor has %d dims", fn, t, dn, ndim);
        if (p[k].kind == VS_PLACE_PARTIAL && ((int)p[k].op < 0 || p[k].op >= VS_OP_COUNT))
            return _vs_err(VS_ERR_INVALID, "%s: Partial with invalid op %d on mesh dim %s", fn, (int)p[k].op, dn);
        if (p[k].kind != VS_PLACE_SHARD && p[k].kind != VS_PLACE_PARTIAL && p[k].kind != VS_PLACE_REPLICATE)
            return _vs_err(VS_ERR_INVALID, "%s: invalid placement kind %d on mesh dim %s", fn, (int)p[k].kind, dn);
    }
    return VS_OK;
}

_VS_PRIVATE vs_result _vs_layout_check(const char* fn, const vs_layout* L, int ndim)
{
    if (!L) return _vs_err(VS_ERR_NULL, "%s: layout is NULL", fn);
    if (!L->mesh) return _vs_err(VS_ERR_NULL, "%s: layout has no mesh", fn);
    return _vs_placements_check(fn, L->mesh, L->mesh->ndims, L->p, ndim);
}

VS_API vs_result vs_layout_check(const vs_layout* L, int ndim) { return _vs_layout_check("vs_layout_check", L, ndim); }

/* A mesh shape as vs_mesh_init accepts it: 1..VS_MESH_MAX_DIMS sizes >= 1, at most
   INT_MAX ranks. */
_VS_PRIVATE vs_result _vs_check_mesh_shape(const char* fn, int mesh_ndims, const int* mesh_shape)
{
    if (mesh_ndims < 1 || mesh_ndims > VS_MESH_MAX_DIMS)
        return _vs_err(VS_ERR_INVALID, "%s: mesh_ndims %d out of range [1, %d]", fn, mesh_ndims, VS_MESH_MAX_DIMS);
    if (!mesh_shape) return _vs_err(VS_ERR_NULL, "%s: mesh_shape is NULL", fn);
    long long prod = 1;
    for (int k = 0; k < mesh_ndims; k++) {
        if (mesh_shape[k] < 1)
            return _vs_err(VS_ERR_INVALID, "%s: mesh_shape[%d] = %d must be >= 1", fn, k, mesh_shape[k]);
        prod *= mesh_shape[k];
        if (prod > INT_MAX)
            return _vs_err(VS_ERR_INVALID, "%s: mesh_shape has more than INT_MAX ranks (at mesh_shape[%d] = %d)", fn,
                           k, mesh_shape[k]);
    }
    return VS_OK;
}

/* torch.chunk: chunks of ceil(n/m); trailing ones short or empty. */
/* Chunk i of m of a dim of n (torch.chunk), without overflow for any n >= 0. */
_VS_PRIVATE void _vs_chunk_range(int64_t n, int m, int i, int64_t* start, int64_t* len)
{
    int64_t c = n / m + (n % m != 0);
    int64_t s = i > 0 && c > n / i ? n : c * i;
    if (s > n) s = n;
    *start = s;
    *len = c > n - s ? n - s : c;
}

/* The box (shape, global offset) mesh coordinate `coord` holds under placements p,
   on a mesh of mesh_ndims dims of sizes mesh_shape: the one implementation of the
   layout arithmetic (vs_layout_box, vs_layout_local and redistribute all use it). */
_VS_PRIVATE void _vs_box_calc(int mesh_ndims, const int* mesh_shape, const vs_placement* p, int ndim,
                              const int64_t* shape, const int* coord, int64_t* ls, int64_t* off)
{
    for (int d = 0; d < ndim; d++) ls[d] = shape[d], off[d] = 0;
    for (int k = 0; k < mesh_ndims; k++) {
        if (p[k].kind != VS_PLACE_SHARD) continue;
        int d = p[k].dim;
        int64_t s, l;
        _vs_chunk_range(ls[d], mesh_shape[k], coord[k], &s, &l);
        off[d] += s;
        ls[d] = l;
    }
}

/* The box a coordinate of mesh m holds. */
_VS_PRIVATE void _vs_box_of(const vs_mesh* m, const vs_placement* p, int ndim, const int64_t* shape, const int* coord,
                            int64_t* ls, int64_t* off)
{
    _vs_box_calc(m->ndims, m->shape, p, ndim, shape, coord, ls, off);
}

/* _vs_box_calc into the caller's (optional) arrays. */
_VS_PRIVATE void _vs_box_write(int mesh_ndims, const int* mesh_shape, const vs_placement* p, int ndim,
                               const int64_t* shape, const int* coord, int64_t* local_shape, int64_t* offset)
{
    int64_t ls[VS_TENSOR_MAX_DIMS], off[VS_TENSOR_MAX_DIMS];
    _vs_box_calc(mesh_ndims, mesh_shape, p, ndim, shape, coord, ls, off);
    for (int d = 0; d < ndim; d++) {
        if (local_shape) local_shape[d] = ls[d];
        if (offset) offset[d] = off[d];
    }
}

_VS_PRIVATE int64_t _vs_numel(const int64_t* s, int ndim)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= s[d];
    return n;
}

/* Dims >= 0 and an element count that fits int64 (so _vs_numel of any box of it
   cannot overflow). */
_VS_PRIVATE vs_result _vs_check_shape(const char* fn, int ndim, const int64_t* shape)
{
    if (!shape && ndim) return _vs_err(VS_ERR_NULL, "%s: shape is NULL", fn);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return _vs_err(VS_ERR_INVALID, "%s: shape[%d] = %lld < 0", fn, d, (long long)shape[d]);
        if (shape[d] && n > INT64_MAX / shape[d])
            return _vs_err(VS_ERR_INVALID, "%s: shape[%d] = %lld: the tensor has more than 2^63 elements", fn, d,
                           (long long)shape[d]);
        n *= shape[d];
    }
    return VS_OK;
}

VS_API vs_result vs_layout_local(const vs_layout* L, int ndim, const int64_t* shape, int mesh_rank, int64_t* local_shape,
                                 int64_t* offset)
{
    _VS_TRY(_vs_layout_check("vs_layout_local", L, ndim));
    _VS_TRY(_vs_check_shape("vs_layout_local", ndim, shape));
    _VS_TRY(_vs_mesh_check_rank("vs_layout_local", L->mesh, mesh_rank));
    int coord[VS_MESH_MAX_DIMS];
    _vs_mesh_coord_calc(L->mesh, mesh_rank, coord);
    _vs_box_write(L->mesh->ndims, L->mesh->shape, L->p, ndim, shape, coord, local_shape, offset);
    return VS_OK;
}

VS_API vs_result vs_layout_box(int mesh_ndims, const int* mesh_shape, const vs_placement* placements, int ndim,
                               const int64_t* shape, const int* coord, int64_t* local_shape, int64_t* offset)
{
    _VS_TRY(_vs_check_mesh_shape("vs_layout_box", mesh_ndims, mesh_shape));
    _VS_CHECK_NULL(placements, "placements");
    _VS_TRY(_vs_placements_check("vs_layout_box", NULL, mesh_ndims, placements, ndim));
    _VS_TRY(_vs_check_shape("vs_layout_box", ndim, shape));
    _VS_CHECK_NULL(coord, "coord");
    for (int k = 0; k < mesh_ndims; k++)
        if (coord[k] < 0 || coord[k] >= mesh_shape[k])
            return _vs_err(VS_ERR_INVALID, "vs_layout_box: coord[%d] = %d out of range [0, %d) (mesh_shape[%d])", k,
                           coord[k], mesh_shape[k], k);
    _vs_box_write(mesh_ndims, mesh_shape, placements, ndim, shape, coord, local_shape, offset);
    return VS_OK;
}

VS_API vs_result vs_layout_rank_coord(int mesh_ndims, const int* mesh_shape, int mesh_rank, int* coord)
{
    _VS_TRY(_vs_check_mesh_shape("vs_layout_rank_coord", mesh_ndims, mesh_shape));
    _VS_CHECK_NULL(coord, "coord");
    vs_mesh m; // only ndims and shape: the mesh's own rank-to-coordinate rule
    memset(&m, 0, sizeof m);
    m.ndims = mesh_ndims;
    m.nranks = 1;
    for (int k = 0; k < mesh_ndims; k++) m.shape[k] = mesh_shape[k], m.nranks *= mesh_shape[k];
    _VS_TRY(_vs_mesh_check_rank("vs_layout_rank_coord", &m, mesh_rank));
    _vs_mesh_coord_calc(&m, mesh_rank, coord);
    return VS_OK;
}

_VS_PRIVATE vs_result _vs_dtensor_check(const char* fn, const vs_dtensor* t, const char* which)
{
    if (!t) return _vs_err(VS_ERR_NULL, "%s: %s tensor is NULL", fn, which);
    _VS_TRY(_vs_layout_check(fn, &t->layout, t->ndim));
    _VS_TRY(_vs_check_dtype(fn, t->dtype));
    _VS_TRY(_vs_check_shape(fn, t->ndim, t->shape));
    int64_t n = _vs_numel(t->shape, t->ndim);
    if ((uint64_t)n > (uint64_t)PTRDIFF_MAX / vs_dtype_size(t->dtype))
        return _vs_err(VS_ERR_INVALID, "%s: %s tensor of %lld %s elements is larger than memory can address", fn,
                       which, (long long)n, vs_dtype_name(t->dtype));
    return VS_OK;
}

VS_API vs_result vs_dtensor_local_numel(const vs_dtensor* t, int64_t* numel)
{
    _VS_TRY(_vs_dtensor_check("vs_dtensor_local_numel", t, "the"));
    _VS_CHECK_NULL(numel, "numel");
    int64_t ls[VS_TENSOR_MAX_DIMS], off[VS_TENSOR_MAX_DIMS];
    _vs_box_of(t->layout.mesh, t->layout.p, t->ndim, t->shape, t->layout.mesh->coord, ls, off);
    *numel = _vs_numel(ls, t->ndim);
    return VS_OK;
}

VS_API int vs_layout_format(const vs_layout* L, char* buf, size_t cap)
{
    if (!L || !L->mesh) return _vs_err(VS_ERR_NULL, "vs_layout_format: layout or its mesh is NULL");
    char tmp[VS_MESH_MAX_DIMS * 24 + 4];
    size_t l = 0;
    tmp[l++] = '[';
    for (int k = 0; k < L->mesh->ndims; k++) {
        if (k) tmp[l++] = ',', tmp[l++] = ' ';
        l += (size_t)_vs_place_text(L->p[k], tmp + l, sizeof tmp - l);
    }
    tmp[l++] = ']';
    tmp[l] = 0;
    if (buf && cap) snprintf(buf, cap, "%s", tmp);
    return (int)l;
}

_VS_PRIVATE const char* _vs_skip_ws(const char* s)
{
    while (*s == ' ' || *s == '\t' || *s == '\n') s++;
    return s;
}

/* One placement at *s: Shard(0) S(0) Replicate Replicate() R Partial(sum) P(sum) Partial P. */
_VS_PRIVATE int _vs_parse_place(const char** ps, vs_placement* out)
{
    const char* s = _vs_skip_ws(*ps);
    static const char* const names[3][2] = {{"Replicate", "R"}, {"Shard", "S"}, {"Partial", "P"}};
    int kind = -1;
    size_t len = 0;
    for (int k = 0; k < 3 && kind < 0; k++)
        for (int v = 0; v < 2; v++) {
            size_t n = strlen(names[k][v]);
            if (!strncmp(s, names[k][v], n) && (s[n] == '(' || s[n] == ',' || s[n] == ']' || s[n] == ' ' ||
                                                   s[n] == '\t' || s[n] == '\n')) {
                kind = k;
                len = n;
                break;
            }
        }
    if (kind < 0) return 0;
    s += len;
    char arg[16] = "";
    if (*s == '(') {
        const char* e = strchr(s, ')');
        if (!e || (size_t)(e - s - 1) >= sizeof arg) return 0;
        memcpy(arg, s + 1, (size_t)(e - s - 1));
        arg[e - s - 1] = 0;
        s = e + 1;
    }
    if (kind == 0) {
        if (arg[0]) return 0;
        *out = vs_replicate();
    } else if (kind == 1) {
        char* end = NULL;
        long d = strtol(arg, &end, 10);
        if (!arg[0] || *end || d < 0 || d >= VS_TENSOR_MAX_DIMS) return 0;
        *out = vs_shard((int)d);
    } else {
        vs_op op = VS_OP_SUM;
        if (arg[0]) {
            op = VS_OP_COUNT;
            for (int o = VS_OP_SUM; o < VS_OP_COUNT; o++)
                if (!strcmp(arg, vs_op_name((vs_op)o))) op = (vs_op)o;
            if (op == VS_OP_COUNT) return 0;
        }
        *out = vs_partial(op);
    }
    *ps = s;
    return 1;
}

/* The placements of a layout's text, one per mesh dim (mesh_ndims of them), into
   p[0..mesh_ndims); p is written even on error. */
_VS_PRIVATE vs_result _vs_parse_placements(const char* fn, int mesh_ndims, const char* text, vs_placement* p)
{
    const char* s = _vs_skip_ws(text);
    if (*s != '[') return _vs_err(VS_ERR_INVALID, "%s: '%s' does not start with '['", fn, text);
    s++;
    int k = 0;
    for (;;) {
        s = _vs_skip_ws(s);
        if (*s == ']' && k == 0) break;
        if (k == mesh_ndims)
            return _vs_err(VS_ERR_INVALID, "%s: '%s' has more placements than the mesh's %d dims", fn, text,
                           mesh_ndims);
        if (!_vs_parse_place(&s, &p[k]))
            return _vs_err(VS_ERR_INVALID, "%s: bad placement at '%.20s' in '%s'", fn, s, text);
        k++;
        s = _vs_skip_ws(s);
        if (*s == ',') {
            s++;
            continue;
        }
        if (*s == ']') break;
        return _vs_err(VS_ERR_INVALID, "%s: expected ',' or ']' at '%.20s' in '%s'", fn, s, text);
    }
    s = _vs_skip_ws(s + 1);
    if (*s) return _vs_err(VS_ERR_INVALID, "%s: trailing text '%.20s' in '%s'", fn, s, text);
    if (k != mesh_ndims)
        return _vs_err(VS_ERR_INVALID, "%s: '%s' has %d placements, the mesh has %d dims", fn, text, k, mesh_ndims);
    return VS_OK;
}

VS_API vs_result vs_layout_parse(vs_mesh* mesh, const char* text, vs_layout* out)
{
    _VS_CHECK_NULL(mesh, "mesh");
    _VS_CHECK_NULL(text, "text");
    _VS_CHECK_NULL(out, "out");
    vs_layout L;
    memset(&L, 0, sizeof L);
    L.mesh = mesh;
    _VS_TRY(_vs_parse_placements("vs_layout_parse", mesh->ndims, text, L.p));
    *out = L;
    return VS_OK;
}

VS_API vs_result vs_layout_parse_placements(int mesh_ndims, const char* text, vs_placement* out)
{
    if (mesh_ndims < 1 || mesh_ndims > VS_MESH_MAX_DIMS)
        return _vs_err(VS_ERR_INVALID, "vs_layout_parse_placements: mesh_ndims %d out of range [1, %d]", mesh_ndims,
                       VS_MESH_MAX_DIMS);
    _VS_CHECK_NULL(text, "text");
    _VS_CHECK_NULL(out, "out");
    vs_placement p[VS_MESH_MAX_DIMS];
    memset(p, 0, sizeof p);
    _VS_TRY(_vs_parse_placements("vs_layout_parse_placements", mesh_ndims, text, p));
    memcpy(out, p, (size_t)mesh_ndims * sizeof *p);
    return VS_OK;
}

/* Copies the box `box` at offset soff of a row-major src (shape sshape) to offset
   doff of dst (shape dshape). Trailing dims that are whole on both sides merge
   into one memcpy. */
_VS_PRIVATE void _vs_box_copy_nt(char* dst, const int64_t* dshape, const int64_t* doff, const char* src,
                                 const int64_t* sshape, const int64_t* soff, const int64_t* box, int ndim, size_t esz,
                                 int nt)
{
    if (ndim == 0) {
        memcpy(dst, src, esz);
        return;
    }
    if (_vs_numel(box, ndim) == 0) return;
    int p = ndim - 1; // rows are dims p.. merged
    size_t row = (size_t)box[p] * esz;
    while (p > 0 && box[p] == dshape[p] && box[p] == sshape[p] && doff[p] == 0 && soff[p] == 0) {
        p--;
        row *= (size_t)box[p];
    }
    // strides in elements
    int64_t ds[VS_TENSOR_MAX_DIMS], ss[VS_TENSOR_MAX_DIMS];
    ds[ndim - 1] = ss[ndim - 1] = 1;
    for (int d = ndim - 2; d >= 0; d--) ds[d] = ds[d + 1] * dshape[d + 1], ss[d] = ss[d + 1] * sshape[d + 1];
    int64_t idx[VS_TENSOR_MAX_DIMS] = {0};
    for (;;) {
        int64_t so = 0, dof = 0;
        for (int d = 0; d < p; d++) so += (soff[d] + idx[d]) * ss[d], dof += (doff[d] + idx[d]) * ds[d];
        so += soff[p] * ss[p];
        dof += doff[p] * ds[p];
        _vs_copy_nt(dst + (size_t)dof * esz, src + (size_t)so * esz, row, nt);
        int d = p - 1;
        while (d >= 0 && ++idx[d] == box[d]) idx[d--] = 0;
        if (d < 0) break;
    }
}

_VS_PRIVATE void _vs_box_copy(char* dst, const int64_t* dshape, const int64_t* doff, const char* src,
                              const int64_t* sshape, const int64_t* soff, const int64_t* box, int ndim, size_t esz)
{
    _vs_box_copy_nt(dst, dshape, doff, src, sshape, soff, box, ndim, esz, 0);
}

enum { _VS_R_GATHER = 1, _VS_R_ALLREDUCE, _VS_R_REDSCAT, _VS_R_SLICE, _VS_R_A2A, _VS_R_TOPARTIAL };

typedef struct _vs_rstep {
    int type, k;
    vs_placement before[VS_MESH_MAX_DIMS], after[VS_MESH_MAX_DIMS];
} _vs_rstep;

/* Plans the steps from src to dst placements, one mesh dim at a time:
   1. innermost to outermost, take apart the shards that change (all-to-all when
      the shard moves to another tensor dim and nothing else shards either, else
      all-gather);
   2. finish partial sums that become replicated (all-reduce);
   3. outermost to innermost, make the new shards (slice, or reduce-scatter from a
      partial) and the new partials (zero fill).
   A mesh dim sharding a tensor dim that an outer changing mesh dim shards too is
   taken apart and remade, since its chunk boundaries move. */
_VS_PRIVATE int _vs_plan_redistribute(const vs_mesh* m, const vs_placement* src, const vs_placement* dst,
                                      _vs_rstep* steps)
{
    int nd = m->ndims, ns = 0, change[VS_MESH_MAX_DIMS] = {0}, done[VS_MESH_MAX_DIMS] = {0};
    vs_placement cur[VS_MESH_MAX_DIMS], tgt[VS_MESH_MAX_DIMS];
    for (int k = 0; k < nd; k++) cur[k] = _vs_place_norm(src[k]), tgt[k] = _vs_place_norm(dst[k]);
    for (int k = 0; k < nd; k++) {
        change[k] = !_vs_place_eq(cur[k], tgt[k]);
        for (int j = 0; j < k && !change[k]; j++) {
            if (!change[j]) continue;
            for (int a = 0; a < 2; a++) {
                vs_placement pj = a ? tgt[j] : cur[j];
                if (pj.kind != VS_PLACE_SHARD) continue;
                if ((cur[k].kind == VS_PLACE_SHARD && cur[k].dim == pj.dim) ||
                    (tgt[k].kind == VS_PLACE_SHARD && tgt[k].dim == pj.dim))
                    change[k] = 1;
            }
        }
    }
#define _VS_STEP(T, K, NEW)                                                          \
    do {                                                                             \
        steps[ns].type = (T); /* before cur changes: T may read it */                \
        steps[ns].k = (K);                                                           \
        memcpy(steps[ns].before, cur, sizeof cur);                                   \
        cur[K] = (NEW);                                                              \
        memcpy(steps[ns].after, cur, sizeof cur);                                    \
        ns++;                                                                        \
    } while (0)
    for (int k = nd - 1; k >= 0; k--) {
        if (!change[k] || cur[k].kind != VS_PLACE_SHARD) continue;
        int d = cur[k].dim, direct = tgt[k].kind == VS_PLACE_SHARD && tgt[k].dim != d;
        for (int j = 0; j < nd && direct; j++) {
            if (j != k && cur[j].kind == VS_PLACE_SHARD && (cur[j].dim == d || cur[j].dim == tgt[k].dim)) direct = 0;
            if (j < k && tgt[j].kind == VS_PLACE_SHARD && tgt[j].dim == tgt[k].dim) direct = 0;
        }
        if (direct) {
            _VS_STEP(_VS_R_A2A, k, tgt[k]);
            done[k] = 1;
        } else {
            _VS_STEP(_VS_R_GATHER, k, vs_replicate());
        }
    }
    for (int k = 0; k < nd; k++)
        if (change[k] && cur[k].kind == VS_PLACE_PARTIAL && tgt[k].kind != VS_PLACE_SHARD)
            _VS_STEP(_VS_R_ALLREDUCE, k, vs_replicate());
    for (int k = 0; k < nd; k++) {
        if (!change[k] || done[k]) continue;
        if (tgt[k].kind == VS_PLACE_SHARD)
            _VS_STEP(cur[k].kind == VS_PLACE_PARTIAL ? _VS_R_REDSCAT : _VS_R_SLICE, k, tgt[k]);
        else if (tgt[k].kind == VS_PLACE_PARTIAL)
            _VS_STEP(_VS_R_TOPARTIAL, k, tgt[k]);
    }
#undef _VS_STEP
    return ns;
}

/* Per-member chunk of tensor dim d along mesh dim k, relative to the parent box. */
_VS_PRIVATE void _vs_members_chunks(const vs_mesh* m, const vs_placement* shardp, int ndim, const int64_t* shape, int k,
                                    int d, int64_t parent_off, int64_t* start, int64_t* len)
{
    int coord[VS_MESH_MAX_DIMS];
    int64_t ls[VS_TENSOR_MAX_DIMS], off[VS_TENSOR_MAX_DIMS];
    memcpy(coord, m->coord, sizeof coord);
    for (int i = 0; i < m->shape[k]; i++) {
        coord[k] = i;
        _vs_box_of(m, shardp, ndim, shape, coord, ls, off);
        start[i] = off[d] - parent_off;
        len[i] = ls[d];
    }
}

typedef struct _vs_rctx {
    vs_mesh* mesh;
    vs_dtype dt;
    size_t esz;
    int ndim;
    const int64_t* shape;
    void* tmp; // scratch for packed blocks, taken when a step first packs
    void* tmp2;
    size_t tmp_bytes;
    size_t* counts; // 4 arrays of mesh-dim size
} _vs_rctx;

/* The packing buffers, for the steps that pack (transports without in-place
   strided copies); the threads transport never asks for them. */
_VS_PRIVATE vs_result _vs_rctx_packing(_vs_rctx* x)
{
    if (x->tmp) return VS_OK;
    x->tmp = _vs_mesh_scratch(x->mesh, 0, x->tmp_bytes);
    x->tmp2 = _vs_mesh_scratch(x->mesh, 1, x->tmp_bytes);
    if (!x->tmp || !x->tmp2)
        return _vs_err(VS_ERR_NOMEM, "vs_redistribute: out of memory for %zu-byte packing buffers", x->tmp_bytes);
    return VS_OK;
}

/* Geometry of one redistribute step, for the threads transport's in-place path. */
typedef struct _vs_boxctx {
    const vs_mesh* m;
    const _vs_rstep* st;
    int ndim;
    const int64_t* shape;
} _vs_boxctx;

/* One shared-memory step as every rank sees it: its op, its boxes before (lb, ob)
   and after (la, oa) the step, and every rank's op in all[]. */
typedef struct _vs_bstep {
    vs_comm* c;
    const _vs_opdesc* const* all;
    const _vs_opdesc* op;
    const _vs_boxctx* x;
    int n, nd, k, me, e, nt; // e: the dim split across ranks after the step
    size_t esz;
    int64_t la[VS_TENSOR_MAX_DIMS], oa[VS_TENSOR_MAX_DIMS], lb[VS_TENSOR_MAX_DIMS], ob[VS_TENSOR_MAX_DIMS];
} _vs_bstep;

/* The box mesh rank `i` along the step's dim holds under placements p. */
_VS_PRIVATE void _vs_bstep_box(const _vs_bstep* b, const vs_placement* p, int i, int64_t* ls, int64_t* off)
{
    int coord[VS_MESH_MAX_DIMS];
    memcpy(coord, b->x->m->coord, sizeof coord);
    coord[b->k] = i;
    _vs_box_of(b->x->m, p, b->nd, b->x->shape, coord, ls, off);
}

/* Gathering the last dim: every rank ends with the same rows, so rank `me`
   assembles rows [r0, r1) once, a cache-sized block at a time, from every peer's
   piece, and streams each block to all ranks (peers' blocks differ from the
   gathered box in the last dim only). Each element is read once. */
_VS_PRIVATE void _vs_bstep_gather_last(const _vs_bstep* b)
{
    int n = b->n, nd = b->nd;
    int64_t plen[_VS_MAX_DIM_RANKS], coff[_VS_MAX_DIM_RANKS], rows = _vs_numel(b->la, nd - 1);
    for (int i = 0; i < n; i++) {
        int64_t pl[VS_TENSOR_MAX_DIMS], po[VS_TENSOR_MAX_DIMS];
        _vs_bstep_box(b, b->x->st->before, i, pl, po);
        plen[i] = pl[nd - 1];
        coff[i] = po[nd - 1] - b->oa[nd - 1];
    }
    size_t esz = b->esz, rowb = (size_t)b->la[nd - 1] * esz;
    int64_t per = rowb <= _VS_FAN_BLOCK ? (int64_t)(_VS_FAN_BLOCK / rowb) : 1;
    unsigned char* blk = (unsigned char*)_vs_halloc(_VS_WH(b->c->world), (size_t)per * rowb + 1);
    int64_t r0 = rows * b->me / n, r1 = rows * (b->me + 1) / n;
    for (int64_t q = r0; q < r1; q += per) {
        int64_t nr = r1 - q < per ? r1 - q : per;
        char* dst = blk ? (char*)blk : (char*)b->op->recv + (size_t)q * rowb; // no memory: build in my own buffer
        for (int64_t r = 0; r < nr; r++)
            for (int i = 0; i < n; i++)
                if (plen[i])
                    memcpy(dst + (size_t)r * rowb + (size_t)coff[i] * esz,
                           (const char*)b->all[i]->send + (size_t)((q + r) * plen[i]) * esz, (size_t)plen[i] * esz);
        for (int j = 0; j < n; j++) _vs_copy_nt((char*)b->all[j]->recv + (size_t)q * rowb, dst, (size_t)nr * rowb, b->nt);
    }
    _vs_hfree(_VS_WH(b->c->world), blk);
}

/* Gathers pull (each rank copies the block it shares with every peer into its own
   buffer); all-to-alls push (each rank copies its part into every peer's). */
_VS_PRIVATE void _vs_bstep_blocks(const _vs_bstep* b)
{
    int push = b->x->st->type == _VS_R_A2A, nd = b->nd;
    for (int i = 0; i < b->n; i++) { // the block shared by my buffer and peer i's
        int64_t pl[VS_TENSOR_MAX_DIMS], po[VS_TENSOR_MAX_DIMS];
        _vs_bstep_box(b, push ? b->x->st->after : b->x->st->before, i, pl, po);
        const int64_t *sl = push ? b->lb : pl, *so = push ? b->ob : po; // source box
        const int64_t *dl = push ? pl : b->la, *dO = push ? po : b->oa; // destination box
        int64_t sz[VS_TENSOR_MAX_DIMS], dof[VS_TENSOR_MAX_DIMS], sof[VS_TENSOR_MAX_DIMS];
        int empty = 0;
        for (int d = 0; d < nd; d++) {
            int64_t a0 = so[d] > dO[d] ? so[d] : dO[d];
            int64_t e0 = so[d] + sl[d] < dO[d] + dl[d] ? so[d] + sl[d] : dO[d] + dl[d];
            sz[d] = e0 > a0 ? e0 - a0 : 0;
            empty |= sz[d] == 0;
            dof[d] = a0 - dO[d];
            sof[d] = a0 - so[d];
        }
        if (empty) continue;
        const char* src = push ? (const char*)b->op->send : (const char*)b->all[i]->send;
        char* dst = push ? (char*)b->all[i]->recv : (char*)b->op->recv;
        _vs_box_copy_nt(dst, dl, dof, src, sl, sof, sz, nd, b->esz, b->nt);
    }
}

/* Row by row (the last dim): a reduce-scatter reduces rows [r0, r1) of the box
   every peer holds (Partial along k); an all-to-all splitting the last dim reads
   its own rows. Each row's pieces go to the ranks that own them. The owners' boxes
   and strides are a table of n rows (from the hooks; on the stack it was 48 KiB). */
_VS_PRIVATE void _vs_bstep_rows(const _vs_bstep* b)
{
    int n = b->n, nd = b->nd, e = b->e, me = b->me;
    const _vs_opdesc* op = b->op;
    const int64_t *lb = b->lb, *ob = b->ob;
    size_t esz = b->esz;
    int reduce = b->x->st->type == _VS_R_REDSCAT;
    vs_comm* c = b->c;
    const void* const* srcs = c->sh->srcs; // (b->all[i]->send, published by _vs_t_shm)
    const _vs_hooks* h = _VS_WH(c->world);
    int64_t* tab = _VS_HNEW(h, int64_t, (size_t)n * 3 * VS_TENSOR_MAX_DIMS);
    int own = tab != NULL;
    int64_t small[3 * VS_TENSOR_MAX_DIMS]; // out of memory: recompute one owner at a time
#define _VS_OWNER(j) (own ? tab + (size_t)(j) * 3 * VS_TENSOR_MAX_DIMS : small)
    for (int j = 0; own && j < n; j++) { // each owner's box and strides
        int64_t* t = _VS_OWNER(j);
        _vs_bstep_box(b, b->x->st->after, j, t, t + VS_TENSOR_MAX_DIMS);
        int64_t* os = t + 2 * VS_TENSOR_MAX_DIMS;
        os[nd - 1] = 1;
        for (int d = nd - 2; d >= 0; d--) os[d] = os[d + 1] * t[d + 1];
    }
    int64_t rowlen = lb[nd - 1], rows = _vs_numel(lb, nd - 1);
    int64_t r0 = reduce ? rows * me / n : 0, r1 = reduce ? rows * (me + 1) / n : rows, t = r0;
    int64_t idx[VS_TENSOR_MAX_DIMS] = {0};
    for (int d = nd - 2; d >= 0; d--) { // multi-index of row r0
        idx[d] = t % lb[d];
        t /= lb[d];
    }
    unsigned char tmp[_VS_RED_BLOCK * 8];
    for (int64_t r = r0; r < r1; r++) {
        for (int64_t b0 = 0; b0 < rowlen; b0 += _VS_RED_BLOCK) {
            int64_t mlen = rowlen - b0 < _VS_RED_BLOCK ? rowlen - b0 : _VS_RED_BLOCK;
            const unsigned char* row = (const unsigned char*)op->send + (size_t)(r * rowlen + b0) * esz;
            if (reduce) {
                _vs_reduce_block(op->dt, op->op, n, srcs, n, (size_t)(r * rowlen + b0), (size_t)mlen, tmp);
                row = tmp;
            }
            for (int j = 0; j < n; j++) {
                int64_t* ol = _VS_OWNER(j);
                if (!own) {
                    _vs_bstep_box(b, b->x->st->after, j, ol, ol + VS_TENSOR_MAX_DIMS);
                    int64_t* os = ol + 2 * VS_TENSOR_MAX_DIMS;
                    os[nd - 1] = 1;
                    for (int d = nd - 2; d >= 0; d--) os[d] = os[d + 1] * ol[d + 1];
                }
                const int64_t *oo = ol + VS_TENSOR_MAX_DIMS, *os = ol + 2 * VS_TENSOR_MAX_DIMS;
                int64_t c0 = b0, c1 = b0 + mlen; // the columns of this block j owns
                if (e == nd - 1) {
                    int64_t lo = oo[e] - ob[e], hi = lo + ol[e];
                    c0 = c0 > lo ? c0 : lo;
                    c1 = c1 < hi ? c1 : hi;
                    if (c1 <= c0) continue;
                } else if (!(ol[e] > 0 && ob[e] + idx[e] >= oo[e] && ob[e] + idx[e] < oo[e] + ol[e])) {
                    continue; // e not the last dim: the whole row has one owner
                }
                int64_t off = 0;
                for (int d = 0; d < nd - 1; d++) off += (ob[d] + idx[d] - oo[d]) * os[d];
                off += ob[nd - 1] + c0 - oo[nd - 1];
                _vs_copy_nt((char*)b->all[j]->recv + (size_t)off * esz, row + (size_t)(c0 - b0) * esz,
                            (size_t)(c1 - c0) * esz, b->nt);
            }
        }
        for (int d = nd - 2; d >= 0 && ++idx[d] == lb[d]; d--) idx[d] = 0;
    }
#undef _VS_OWNER
    _vs_hfree(h, tab);
}

/* The data movement of a step on threads (the _VS_K_SHM callback). Ranks share the
   address space, so every block moves once, from its source straight into its
   final place, strided or not: no packing and no scratch. */
_VS_PRIVATE void _vs_box_step(vs_comm* c, const _vs_opdesc* const* all)
{
    _vs_bstep b;
    b.c = c;
    b.all = all;
    b.op = all[c->rank];
    b.x = (const _vs_boxctx*)b.op->ctx;
    const _vs_rstep* st = b.x->st;
    b.n = c->size, b.nd = b.x->ndim, b.k = st->k, b.me = c->rank, b.e = st->after[st->k].dim;
    b.esz = vs_dtype_size(b.op->dt);
    _vs_box_of(b.x->m, st->after, b.nd, b.x->shape, b.x->m->coord, b.la, b.oa);
    _vs_box_of(b.x->m, st->before, b.nd, b.x->shape, b.x->m->coord, b.lb, b.ob);
    b.nt = _VS_USE_NT((size_t)_vs_numel(b.la, b.nd) * b.esz);
    int nd = b.nd;
    if (st->type != _VS_R_GATHER && nd > 0 && _vs_numel(b.lb, nd) > 0 && (st->type == _VS_R_REDSCAT || b.e == nd - 1))
        _vs_bstep_rows(&b);
    else if (st->type == _VS_R_GATHER && nd > 1 && st->before[b.k].dim == nd - 1 && _vs_numel(b.la, nd) > 0)
        _vs_bstep_gather_last(&b);
    else if (st->type != _VS_R_REDSCAT)
        _vs_bstep_blocks(&b);
    else if (_vs_numel(b.lb, nd) > 0 && b.me == 0) { // scalars: rank 0 reduces the one element
        unsigned char one[16];
        _vs_reduce_block(b.op->dt, b.op->op, b.n, c->sh->srcs, b.n, 0, 1, one);
        memcpy(all[0]->recv, one, b.esz);
    }
}

/* The sub-box of `box` that is rank chunk [start, start + len) along `dim`: its
   shape bs and its offset bo inside box. */
_VS_PRIVATE void _vs_sub_box(const int64_t* box, int nd, int dim, int64_t start, int64_t len, int64_t* bs, int64_t* bo)
{
    for (int i = 0; i < nd; i++) bs[i] = box[i], bo[i] = 0;
    bs[dim] = len;
    bo[dim] = start;
}

_VS_PRIVATE vs_result _vs_dbox(vs_comm* c, const char* fn, char* dst, const int64_t* dshape, const int64_t* doff,
                               const char* src, const int64_t* sshape, const int64_t* soff, const int64_t* box, int nd,
                               size_t esz);

/* dst's box at doff <- src's box at soff, on c's side (a host copy, or the box
   kernel on c's stream for device buffers). */
_VS_PRIVATE vs_result _vs_step_box(vs_comm* c, char* dst, const int64_t* dshape, const int64_t* doff, const char* src,
                                   const int64_t* sshape, const int64_t* soff, const int64_t* box, int nd, size_t esz)
{
    if (_VS_ON_DEVICE(c)) return _vs_dbox(c, "vs_redistribute", dst, dshape, doff, src, sshape, soff, box, nd, esz);
    _vs_box_copy(dst, dshape, doff, src, sshape, soff, box, nd, esz);
    return VS_OK;
}

/* One step of a redistribute, for host and device buffers alike: contiguous blocks
   go to the plain collectives, strided ones are packed and unpacked around them
   (on threads, with host buffers, they move in place instead: _vs_box_step). On
   device buffers the step is enqueued on its communicator's stream when it
   returns, that communicator's caller stream ordered after it (>>layout-device
   orders the steps' streams with each other and with the call's caller). */
_VS_PRIVATE vs_result _vs_run_step(_vs_rctx* x, const _vs_rstep* st, const void* in, void* out)
{
    const char* fn = "vs_redistribute";
    vs_mesh* m = x->mesh;
    int k = st->k, nm = m->shape[k], me = m->coord[k], nd = x->ndim;
    size_t esz = x->esz;
    int64_t lb[VS_TENSOR_MAX_DIMS], ob[VS_TENSOR_MAX_DIMS], la[VS_TENSOR_MAX_DIMS], oa[VS_TENSOR_MAX_DIMS];
    _vs_box_of(m, st->before, nd, x->shape, m->coord, lb, ob);
    _vs_box_of(m, st->after, nd, x->shape, m->coord, la, oa);
    vs_mesh* sub = NULL;
    // per-member tables below are sized for _VS_MAX_DIM_RANKS
    if (nm > _VS_MAX_DIM_RANKS)
        return _vs_err(VS_ERR_UNSUPPORTED, "redistribute: mesh dim %s of size %d > %d", m->names[k], nm,
                       _VS_MAX_DIM_RANKS);
    _VS_TRY(vs_mesh_submesh(m, m->names[k], &sub));
    vs_comm* c = vs_mesh_comm(sub);
    int dev = _VS_ON_DEVICE(c);
    int strided = 0;
    if (st->type == _VS_R_GATHER) strided = _vs_numel(la, st->before[k].dim) != 1;
    if (st->type == _VS_R_REDSCAT) strided = _vs_numel(lb, st->after[k].dim) != 1;
    if (st->type == _VS_R_A2A) strided = 1;
    if (c->tp->shm && strided && !dev) {
        _vs_boxctx bx;
        bx.m = m;
        bx.st = st;
        bx.ndim = nd;
        bx.shape = x->shape;
        // count: the step type, which ranks must agree on
        _vs_opdesc o = _vs_op_make(_VS_K_SHM, x->dt, st->type == _VS_R_REDSCAT ? st->before[k].op : VS_OP_SUM, 0,
                                   in, out, (size_t)st->type);
        o.shm = _vs_box_step;
        o.ctx = &bx;
        return _vs_issue(c, &o, NULL);
    }
    size_t *cnt = x->counts, *dsp = x->counts + nm, *cnt2 = x->counts + 2 * nm, *dsp2 = x->counts + 3 * nm;
    int64_t start[_VS_MAX_DIM_RANKS], len[_VS_MAX_DIM_RANKS], start2[_VS_MAX_DIM_RANKS], len2[_VS_MAX_DIM_RANKS];
    int64_t zero[VS_TENSOR_MAX_DIMS] = {0};
    int64_t bs[VS_TENSOR_MAX_DIMS], bo[VS_TENSOR_MAX_DIMS];
    const char* ic = (const char*)in;
    char* oc = (char*)out;
    vs_result r = VS_OK;
    vs_work* w = NULL; // device buffers on NCCL: each collective's, completed in stream order (_vs_dev_done)
    // host scratch is taken only when the step packs; device scratch came with the call
    int packs = st->type != _VS_R_A2A ? strided
                                      : _vs_numel(lb, st->after[k].dim) != 1 || _vs_numel(la, st->before[k].dim) != 1;
    if (packs && !dev && (r = _vs_rctx_packing(x)) != VS_OK) return r;
    char *t1 = (char*)x->tmp, *t2 = (char*)x->tmp2;
    switch (st->type) {
    case _VS_R_ALLREDUCE:
        r = vs_all_reduce(c, in, out, (size_t)_vs_numel(lb, nd), x->dt, st->before[k].op, _VS_DEV_WORK(c, w));
        r = _vs_dev_done(r, &w);
        break;
    case _VS_R_TOPARTIAL: {
        size_t bytes = (size_t)_vs_numel(la, nd) * esz;
        r = st->after[k].op == VS_OP_SUM && me != 0 ? _vs_mem_zero(c, fn, out, bytes) : _vs_mem_copy(c, fn, out, in, bytes);
        break;
    }
    case _VS_R_SLICE: {
        int64_t so[VS_TENSOR_MAX_DIMS];
        for (int i = 0; i < nd; i++) so[i] = oa[i] - ob[i];
        r = _vs_step_box(c, oc, la, zero, ic, lb, so, la, nd, esz);
        break;
    }
    case _VS_R_GATHER: {
        int d = st->before[k].dim;
        _vs_members_chunks(m, st->before, nd, x->shape, k, d, oa[d], start, len);
        int64_t outer = _vs_numel(la, d), inner = _vs_numel(la + d + 1, nd - d - 1);
        size_t run = 0;
        for (int i = 0; i < nm; i++) {
            cnt[i] = (size_t)(outer * len[i] * inner);
            dsp[i] = outer == 1 ? (size_t)(start[i] * inner) : run;
            run += cnt[i];
        }
        if (outer == 1) {
            r = _vs_dev_done(vs_all_gatherv(c, in, out, cnt, dsp, x->dt, _VS_DEV_WORK(c, w)), &w);
            break;
        }
        r = _vs_dev_done(vs_all_gatherv(c, in, t1, cnt, dsp, x->dt, _VS_DEV_WORK(c, w)), &w);
        for (int i = 0; i < nm && !r; i++) { // unpack block i: shape la with dim d = len[i], at start[i]
            _vs_sub_box(la, nd, d, start[i], len[i], bs, bo);
            r = _vs_step_box(c, oc, la, bo, t1 + dsp[i] * esz, bs, zero, bs, nd, esz);
        }
        break;
    }
    case _VS_R_REDSCAT: {
        int e = st->after[k].dim;
        _vs_members_chunks(m, st->after, nd, x->shape, k, e, ob[e], start, len);
        int64_t outer = _vs_numel(lb, e), inner = _vs_numel(lb + e + 1, nd - e - 1);
        for (int i = 0; i < nm; i++) cnt[i] = (size_t)(outer * len[i] * inner);
        if (outer == 1) {
            r = _vs_dev_done(vs_reduce_scatterv(c, in, out, cnt, x->dt, st->before[k].op, _VS_DEV_WORK(c, w)), &w);
            break;
        }
        size_t run = 0;
        for (int i = 0; i < nm && !r; i++) { // pack block i (dim e = chunk i) contiguously
            _vs_sub_box(lb, nd, e, start[i], len[i], bs, bo);
            r = _vs_step_box(c, t1 + run * esz, bs, zero, ic, lb, bo, bs, nd, esz);
            run += cnt[i];
        }
        if (!r) r = _vs_dev_done(vs_reduce_scatterv(c, t1, out, cnt, x->dt, st->before[k].op, _VS_DEV_WORK(c, w)), &w);
        break;
    }
    case _VS_R_A2A: {
        int d = st->before[k].dim, e = st->after[k].dim;
        _vs_members_chunks(m, st->after, nd, x->shape, k, e, ob[e], start, len);   // e chunks, in `in`
        _vs_members_chunks(m, st->before, nd, x->shape, k, d, oa[d], start2, len2); // d chunks, in `out`
        // blocks are contiguous (no packing) when every dim before the split one has size 1
        int send_direct = _vs_numel(lb, e) == 1, recv_direct = _vs_numel(la, d) == 1;
        size_t srun = 0, rrun = 0;
        for (int j = 0; j < nm && !r; j++) {
            _vs_sub_box(lb, nd, e, start[j], len[j], bs, bo);
            cnt[j] = (size_t)_vs_numel(bs, nd);
            dsp[j] = send_direct ? (size_t)(start[j] * _vs_numel(lb + e + 1, nd - e - 1)) : srun;
            if (!send_direct) r = _vs_step_box(c, t1 + srun * esz, bs, zero, ic, lb, bo, bs, nd, esz);
            srun += cnt[j];
            _vs_sub_box(la, nd, d, start2[j], len2[j], bs, bo);
            cnt2[j] = (size_t)_vs_numel(bs, nd);
            dsp2[j] = recv_direct ? (size_t)(start2[j] * _vs_numel(la + d + 1, nd - d - 1)) : rrun;
            rrun += cnt2[j];
        }
        if (!r)
            r = _vs_dev_done(vs_all_to_allv(c, send_direct ? in : t1, cnt, dsp, recv_direct ? out : t2, cnt2, dsp2,
                                            x->dt, _VS_DEV_WORK(c, w)),
                             &w);
        for (int i = 0; i < nm && !r && !recv_direct; i++) {
            _vs_sub_box(la, nd, d, start2[i], len2[i], bs, bo);
            r = _vs_step_box(c, oc, la, bo, t2 + dsp2[i] * esz, bs, zero, bs, nd, esz);
        }
        break;
    }
    default: return _vs_err(VS_ERR_STATE, "redistribute: bad step %d", st->type);
    }
    return r;
}

VS_API vs_result vs_redistribute(const vs_dtensor* src, const vs_dtensor* dst)
{
    const char* fn = "vs_redistribute";
    _VS_TRY(_vs_dtensor_check(fn, src, "source"));
    _VS_TRY(_vs_dtensor_check(fn, dst, "destination"));
    if (src->layout.mesh != dst->layout.mesh)
        return _vs_err(VS_ERR_MISMATCH, "%s: source and destination layouts are on different meshes", fn);
    if (src->dtype != dst->dtype)
        return _vs_err(VS_ERR_MISMATCH, "%s: dtype %s -> %s (redistribute does not convert)", fn,
                       vs_dtype_name(src->dtype), vs_dtype_name(dst->dtype));
    if (src->ndim != dst->ndim)
        return _vs_err(VS_ERR_MISMATCH, "%s: %d-dim source, %d-dim destination", fn, src->ndim, dst->ndim);
    for (int d = 0; d < src->ndim; d++)
        if (src->shape[d] != dst->shape[d])
            return _vs_err(VS_ERR_MISMATCH, "%s: shape[%d] is %lld in the source, %lld in the destination", fn, d,
                           (long long)src->shape[d], (long long)dst->shape[d]);
    vs_mesh* m = src->layout.mesh;
    int isint = src->dtype == VS_I32 || src->dtype == VS_I64 || src->dtype == VS_U8;
    for (int k = 0; k < m->ndims; k++) {
        const vs_placement* ps[2] = {&src->layout.p[k], &dst->layout.p[k]};
        for (int a = 0; a < 2; a++)
            if (ps[a]->kind == VS_PLACE_PARTIAL && ps[a]->op == VS_OP_AVG && isint)
                return _vs_err(VS_ERR_INVALID, "%s: Partial(avg) on mesh dim %s: %s cannot be averaged exactly", fn,
                               m->names[k], vs_dtype_name(src->dtype));
    }
    int64_t n_in = 0, n_out = 0;
    vs_dtensor_local_numel(src, &n_in);
    vs_dtensor_local_numel(dst, &n_out);
    if ((n_in && !src->data) || (n_out && !dst->data))
        return _vs_err(VS_ERR_NULL, "%s: %s data is NULL for %lld elements", fn, n_in && !src->data ? "source" : "destination",
                       (long long)(n_in && !src->data ? n_in : n_out));
    if (m->comm && _VS_ON_DEVICE(m->comm)) {
        _VS_TRY(_vs_dev_arg(m->comm, fn, "the source data", n_in ? src->data : NULL));
        _VS_TRY(_vs_dev_arg(m->comm, fn, "the destination data", n_out ? dst->data : NULL));
        return _vs_redistribute_device(src, dst, n_in, n_out); // >>layout-device
    }
    _vs_rstep steps[3 * VS_MESH_MAX_DIMS];
    int ns = _vs_plan_redistribute(m, src->layout.p, dst->layout.p, steps);
    size_t esz = vs_dtype_size(src->dtype);
    if (ns == 0) {
        _vs_copy(dst->data, src->data, (size_t)n_out * esz);
        return VS_OK;
    }
    // scratch: two step buffers (ping-pong) and packing space, sized by the largest box
    int64_t big = n_in > n_out ? n_in : n_out;
    for (int i = 0; i < ns; i++) {
        int64_t ls[VS_TENSOR_MAX_DIMS], off[VS_TENSOR_MAX_DIMS];
        _vs_box_of(m, steps[i].after, src->ndim, src->shape, m->coord, ls, off);
        int64_t v = _vs_numel(ls, src->ndim);
        big = v > big ? v : big;
    }
    _vs_rctx x;
    memset(&x, 0, sizeof x);
    x.mesh = m;
    x.dt = src->dtype;
    x.esz = esz;
    x.ndim = src->ndim;
    x.shape = src->shape;
    size_t bytes = (size_t)big * esz + 1;
    size_t counts[4 * _VS_MAX_DIM_RANKS];
    char* buf[2] = {NULL, NULL};
    vs_result r = VS_OK;
    x.counts = counts;
    x.tmp_bytes = bytes;
    for (int i = 0; i < 2 && i < ns - 1; i++) buf[i] = (char*)_vs_mesh_scratch(m, 2 + i, bytes);
    if ((ns > 1 && !buf[0]) || (ns > 2 && !buf[1]))
        return _vs_err(VS_ERR_NOMEM, "%s: out of memory for %zu-byte scratch buffers", fn, bytes);
    // the last step writes dst->data; earlier ones alternate between scratch buffers
    const void* in = src->data;
    for (int i = 0; i < ns && !r; i++) {
        void* out = i == ns - 1 ? dst->data : buf[i % 2];
        r = _vs_run_step(&x, &steps[i], in, out);
        in = out;
    }
    return r;
}


// >>tp ------------------------------------------------------------------------

_VS_PRIVATE vs_result _vs_tp_check(const char* fn, const vs_mesh* tp)
{
    if (!tp) return _vs_err(VS_ERR_NULL, "%s: tp mesh is NULL", fn);
    if (tp->ndims != 1)
        return _vs_err(VS_ERR_INVALID, "%s: the TP mesh must have 1 dim, this one has %d (use vs_mesh_submesh)", fn,
                       tp->ndims);
    return VS_OK;
}

/* The sum over TP that both the column input's backward and the row output's
   forward are. */
_VS_PRIVATE vs_result _vs_tp_sum(const char* fn, vs_mesh* tp, void* x, size_t count, vs_dtype dt)
{
    _VS_TRY(_vs_tp_check(fn, tp));
    vs_work* w = NULL;
    return _vs_dev_done(vs_all_reduce(tp->comm, x, x, count, dt, VS_OP_SUM, _VS_DEV_WORK(tp->comm, w)), &w);
}

VS_API vs_result vs_tp_copy_backward(vs_mesh* tp, void* grad, size_t count, vs_dtype dt)
{
    return _vs_tp_sum("vs_tp_copy_backward", tp, grad, count, dt);
}

VS_API vs_result vs_tp_reduce_forward(vs_mesh* tp, void* x, size_t count, vs_dtype dt)
{
    return _vs_tp_sum("vs_tp_reduce_forward", tp, x, count, dt);
}

/* A TP entry point with device buffers: one fence pair (_vs_dev_enter) around
   its kernels and collectives; a bad tp is named by the call itself. */
#define _VS_TP_ENTRY(fn, tp, call)                                                                                    \
    do {                                                                                                               \
        vs_comm* c_ = _vs_tp_check(fn, tp) ? NULL : (tp)->comm;                                                        \
        vs_result r_ = _vs_dev_enter(c_, fn);                                                                          \
        if (r_) return r_;                                                                                             \
        r_ = (call);                                                                                                   \
        vs_result l_ = _vs_dev_leave(c_, fn);                                                                          \
        return r_ ? r_ : l_;                                                                                           \
    } while (0)

_VS_PRIVATE vs_result _vs_tp_reduce_forward_bias(vs_mesh* tp, void* y, int64_t rows, int64_t cols, vs_dtype dt,
                                                 const void* bias, vs_dtype bias_dt)
{
    const char* fn = "vs_tp_reduce_forward_bias";
    _VS_TRY(_vs_tp_check(fn, tp));
    if (dt != VS_F32 && dt != VS_F64 && dt != VS_F16 && dt != VS_BF16)
        return _vs_err(VS_ERR_INVALID, "%s: y's dtype %s (%d) is not f32, f64, f16 or bf16", fn, vs_dtype_name(dt),
                       (int)dt);
    if (bias_dt != dt && !(bias_dt == VS_F32 && (dt == VS_F16 || dt == VS_BF16)))
        return _vs_err(VS_ERR_MISMATCH, "%s: bias dtype %s (%d) with y of dtype %s: the bias is y's dtype%s", fn,
                       vs_dtype_name(bias_dt), (int)bias_dt, vs_dtype_name(dt),
                       dt == VS_F16 || dt == VS_BF16 ? " or f32" : "");
    if (rows < 0 || cols < 0)
        return _vs_err(VS_ERR_INVALID, "%s: %s %lld < 0", fn, rows < 0 ? "rows" : "cols",
                       (long long)(rows < 0 ? rows : cols));
    size_t esz = vs_dtype_size(dt);
    if (cols && rows > (int64_t)(PTRDIFF_MAX / (ptrdiff_t)esz) / cols)
        return _vs_err(VS_ERR_INVALID, "%s: rows %lld x cols %lld of %s overflow the address space", fn,
                       (long long)rows, (long long)cols, vs_dtype_name(dt));
    if (rows && cols && !y)
        return _vs_err(VS_ERR_NULL, "%s: y is NULL for %lld x %lld", fn, (long long)rows, (long long)cols);
    if (cols && !bias) return _vs_err(VS_ERR_NULL, "%s: bias is NULL for %lld columns", fn, (long long)cols);
    vs_comm* c = tp->comm;
    _VS_TRY(_vs_dev_arg(c, fn, "y", y));
    _VS_TRY(_vs_dev_arg(c, fn, "bias", bias));
    vs_work* w = NULL;
    _VS_TRY(_vs_dev_done(vs_all_reduce(c, y, y, (size_t)(rows * cols), dt, VS_OP_SUM, _VS_DEV_WORK(c, w)), &w));
    long long rr = rows, cc = cols;
    int d = (int)dt, bd = (int)bias_dt;
    void* args[] = {&y, &bias, &rr, &cc, &d, &bd};
    return _vs_mk_run(c, fn, _VS_MK_BIAS_ADD, rr * cc, args); // (after the sum: c's stream, or the host now)
}

VS_API vs_result vs_tp_reduce_forward_bias(vs_mesh* tp, void* y, int64_t rows, int64_t cols, vs_dtype dt,
                                           const void* bias, vs_dtype bias_dt)
{
    _VS_TP_ENTRY("vs_tp_reduce_forward_bias", tp,
                 _vs_tp_reduce_forward_bias(tp, y, rows, cols, dt, bias, bias_dt));
}

_VS_PRIVATE vs_result _vs_sp_move(const char* fn, vs_mesh* tp, vs_dtype dt, int ndim, const int64_t* shape,
                                  int seq_dim, vs_placement from, vs_placement to, const void* in, void* out)
{
    _VS_TRY(_vs_tp_check(fn, tp));
    if (ndim < 1 || ndim > VS_TENSOR_MAX_DIMS)
        return _vs_err(VS_ERR_INVALID, "%s: ndim %d out of range [1, %d]", fn, ndim, VS_TENSOR_MAX_DIMS);
    if (seq_dim < 0 || seq_dim >= ndim)
        return _vs_err(VS_ERR_INVALID, "%s: seq_dim %d out of range for %d dims", fn, seq_dim, ndim);
    _VS_TRY(_vs_check_shape(fn, ndim, shape));
    vs_dtensor s, d;
    memset(&s, 0, sizeof s);
    s.layout.mesh = tp;
    s.dtype = dt;
    s.ndim = ndim;
    memcpy(s.shape, shape, sizeof(int64_t) * (size_t)ndim);
    d = s;
    s.layout.p[0] = from.kind == VS_PLACE_SHARD ? vs_shard(seq_dim) : from;
    d.layout.p[0] = to.kind == VS_PLACE_SHARD ? vs_shard(seq_dim) : to;
    s.data = (void*)in;
    d.data = out;
    return vs_redistribute(&s, &d);
}

VS_API vs_result vs_sp_gather_forward(vs_mesh* tp, vs_dtype dt, int ndim, const int64_t* shape, int seq_dim,
                                      const void* in, void* out)
{
    return _vs_sp_move("vs_sp_gather_forward", tp, dt, ndim, shape, seq_dim, vs_shard(0), vs_replicate(), in, out);
}

VS_API vs_result vs_sp_gather_backward(vs_mesh* tp, vs_dtype dt, int ndim, const int64_t* shape, int seq_dim,
                                       const void* grad_full, void* grad_local)
{
    return _vs_sp_move("vs_sp_gather_backward", tp, dt, ndim, shape, seq_dim, vs_partial(VS_OP_SUM), vs_shard(0),
                       grad_full, grad_local);
}

VS_API vs_result vs_sp_scatter_forward(vs_mesh* tp, vs_dtype dt, int ndim, const int64_t* shape, int seq_dim,
                                       const void* partial_full, void* out_local)
{
    return _vs_sp_move("vs_sp_scatter_forward", tp, dt, ndim, shape, seq_dim, vs_partial(VS_OP_SUM), vs_shard(0),
                       partial_full, out_local);
}

VS_API vs_result vs_sp_scatter_backward(vs_mesh* tp, vs_dtype dt, int ndim, const int64_t* shape, int seq_dim,
                                        const void* grad_local, void* grad_full)
{
    return _vs_sp_move("vs_sp_scatter_backward", tp, dt, ndim, shape, seq_dim, vs_shard(0), vs_replicate(),
                       grad_local, grad_full);
}

_VS_PRIVATE vs_result _vs_vocab_range(const char* fn, vs_mesh* tp, int64_t vocab, int64_t* start, int64_t* rows)
{
    _VS_TRY(_vs_tp_check(fn, tp));
    if (!start || !rows) return _vs_err(VS_ERR_NULL, "%s: %s is NULL", fn, start ? "rows" : "start");
    if (vocab < 0) return _vs_err(VS_ERR_INVALID, "%s: vocab %lld < 0", fn, (long long)vocab);
    _vs_chunk_range(vocab, tp->shape[0], tp->coord[0], start, rows);
    return VS_OK;
}

VS_API vs_result vs_vocab_range(vs_mesh* tp, int64_t vocab, int64_t* start, int64_t* rows)
{
    return _vs_vocab_range("vs_vocab_range", tp, vocab, start, rows);
}

/* n tokens of dim floats each: both >= 0 and n x dim addressable. */
_VS_PRIVATE vs_result _vs_check_tokens(const char* fn, int64_t n, int64_t dim)
{
    if (n < 0) return _vs_err(VS_ERR_INVALID, "%s: n %lld < 0", fn, (long long)n);
    if (dim < 0) return _vs_err(VS_ERR_INVALID, "%s: dim %lld < 0", fn, (long long)dim);
    if (dim && n > (int64_t)(PTRDIFF_MAX / (ptrdiff_t)sizeof(float)) / dim)
        return _vs_err(VS_ERR_INVALID, "%s: n %lld x dim %lld floats overflows the address space", fn, (long long)n,
                       (long long)dim);
    return VS_OK;
}

_VS_PRIVATE vs_result _vs_check_ids(const char* fn, const int32_t* ids, int64_t n, int64_t vocab)
{
    if (n < 0) return _vs_err(VS_ERR_INVALID, "%s: n %lld < 0", fn, (long long)n);
    if (n && !ids) return _vs_err(VS_ERR_NULL, "%s: ids are NULL for %lld tokens", fn, (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return _vs_err(VS_ERR_INVALID, "%s: id %d at position %lld out of range [0, %lld)", fn, ids[i],
                           (long long)i, (long long)vocab);
    return VS_OK;
}

/* The ids' range check. Host buffers: on the host, before anything runs.
   Device buffers (no copy to the host, no sync of its own; S2-3): here only n
   and the pointer; then _vs_ids_launch runs a kernel on c's stream that writes
   the first id out of range and its position into a slot of the mesh's pinned
   flags (the id, then the position published after it) and records the slot's
   event after it. The call returns when enqueued, so the flags are read later,
   without a CUDA call: each vocab call on the mesh first reads the positions of
   the checks in flight (_vs_ids_scan), and one that found an id out of range
   fails that later call, naming the earlier one (found as soon as its kernel
   ran: after a host sync, surely). A slot is reused once its event is complete
   (_vs_ids_reclaim: the ring holds _VS_IDSLOTS checks, so the oldest is many
   calls old and a query of it is free once the host has synced past it; only a
   ring of checks still running waits for the oldest); vs_mesh_free waits for
   every check. The kernels leave such an id out (its embedding row is zeros, it
   adds no gradient, its target logit counts as 0), and the outputs of the call
   it names are not meaningful. */
_VS_PRIVATE vs_result _vs_check_ids_on(vs_comm* c, const char* fn, const int32_t* ids, int64_t n, int64_t vocab)
{
    _VS_TRY(_vs_dev_arg(c, fn, "ids", ids));
    if (_VS_ON_DEVICE(c) && n > 0 && ids) return VS_OK; // the range: on the device
    return _vs_check_ids(fn, ids, n, vocab);
}

/* Slot k's bad id, if its kernel found one not reported yet: an error of `fn`
   naming the call it checked. */
_VS_PRIVATE vs_result _vs_ids_report(vs_mesh* tp, const char* fn, int k)
{
    long long pos = __atomic_load_n(&tp->idflag[2 * k], __ATOMIC_ACQUIRE);
    if (pos < 0 || tp->idrep[k]) return VS_OK;
    tp->idrep[k] = 1;
    int latest = k == (tp->idhead + tp->idpend - 1) % _VS_IDSLOTS;
    return _vs_err(VS_ERR_INVALID, "%s: %s (%s on this mesh): id %lld at position %lld out of range [0, %lld) (found "
                   "on the device after that call returned; its kernels left the id out: its outputs are not "
                   "meaningful)", fn, tp->idfn[k], latest ? "the previous call" : "an earlier call",
                   tp->idflag[2 * k + 1], pos, tp->idvocab[k]);
}

/* The checks in flight, oldest first, read without a CUDA call: the first bad
   id not yet reported fails `fn`. */
_VS_PRIVATE vs_result _vs_ids_scan(vs_mesh* tp, const char* fn)
{
    for (int i = 0; i < tp->idpend; i++) _VS_TRY(_vs_ids_report(tp, fn, (tp->idhead + i) % _VS_IDSLOTS));
    return VS_OK;
}

/* The oldest check leaves the ring once its event is complete (a query; wait 1
   or a query that finds it running: the host waits for it). Its bad id, if not
   reported yet, fails `fn`. */
_VS_PRIVATE vs_result _vs_ids_reclaim(vs_mesh* tp, const char* fn, int wait)
{
#ifdef _VS_MESH_CUDA
    int k = tp->idhead;
    cudaEvent_t ev = (cudaEvent_t)tp->idev[k];
    cudaError_t e = wait ? cudaErrorNotReady : cudaEventQuery(ev);
    // (a wait behind the TP stream's collectives: with the deadline)
    vs_result r = e == cudaErrorNotReady ? _vs_dev_wait(tp->comm, ev, fn)
                  : e != cudaSuccess     ? _vs_cuda_err(e, fn, "the id check's event")
                                         : VS_OK;
    if (!r) r = _vs_ids_report(tp, fn, k);
    tp->idhead = (k + 1) % _VS_IDSLOTS, tp->idpend--; // (leaves the ring whatever the answer)
    return r;
#else
    (void)tp, (void)fn, (void)wait;
    return VS_OK;
#endif
}

/* A device vocab call's start: the checks of the earlier calls read (an id out
   of range there fails this call before it runs anything). */
_VS_PRIVATE vs_result _vs_ids_start(vs_mesh* tp, const char* fn)
{
    return _VS_ON_DEVICE(tp->comm) && tp->idpend > 0 ? _vs_ids_scan(tp, fn) : VS_OK;
}

_VS_PRIVATE vs_result _vs_ids_launch(vs_mesh* tp, const char* fn, const int32_t* ids, int64_t n, int64_t vocab)
{
    if (!_VS_ON_DEVICE(tp->comm) || n == 0) return VS_OK;
#ifdef _VS_MESH_CUDA
    if (!tp->idflag) { // once per mesh: the slots' flags and events
        cudaError_t e = cudaMallocHost((void**)&tp->idflag, 2 * sizeof(long long) * _VS_IDSLOTS);
        for (int i = 0; i < _VS_IDSLOTS && e == cudaSuccess; i++)
            e = cudaEventCreateWithFlags((cudaEvent_t*)&tp->idev[i], cudaEventDisableTiming);
        if (e != cudaSuccess) {
            _vs_mesh_ids_free(tp);
            return _vs_cuda_err(e, fn, "the id check's flags and events");
        }
    }
    if (tp->idpend == _VS_IDSLOTS) _VS_TRY(_vs_ids_reclaim(tp, fn, 0)); // the oldest slot, once complete
    int k = (tp->idhead + tp->idpend) % _VS_IDSLOTS;
    __atomic_store_n(&tp->idflag[2 * k], -1LL, __ATOMIC_RELAXED); // (its earlier check is complete)
    tp->idrep[k] = 0;
    long long* f = tp->idflag + 2 * k;
    long long nn = n, vv = vocab;
    void* args[] = {&f, &ids, &nn, &vv};
    _VS_TRY(_vs_mk_run(tp->comm, fn, _VS_MK_IDS_CHECK, 1, args));
    cudaError_t e = cudaEventRecord((cudaEvent_t)tp->idev[k], (cudaStream_t)vs_comm_stream(tp->comm));
    if (e != cudaSuccess) return _vs_cuda_err(e, fn, "cudaEventRecord (the id check)");
    tp->idfn[k] = fn, tp->idvocab[k] = vocab, tp->idpend++;
    return VS_OK;
#else
    (void)fn, (void)ids, (void)vocab;
    return VS_OK;
#endif
}

/* The id checks' flags and events (vs_mesh_free; a failed first launch). */
_VS_PRIVATE void _vs_mesh_ids_free(vs_mesh* m)
{
#ifdef _VS_MESH_CUDA
    if (m->idflag) cudaFreeHost(m->idflag);
    for (int i = 0; i < _VS_IDSLOTS; i++)
        if (m->idev[i]) cudaEventDestroy((cudaEvent_t)m->idev[i]);
#endif
    m->idflag = NULL;
    for (int i = 0; i < _VS_IDSLOTS; i++) m->idev[i] = NULL;
    m->idhead = m->idpend = 0;
}

/* The gather, scatter-add and cross-entropy below run >>kernels' text: host
   loops, or kernels on the TP communicator's stream with device buffers (NCCL),
   whose collectives complete in stream order (_vs_dev_done): each returns when
   its work is enqueued. */
_VS_PRIVATE vs_result _vs_vocab_embedding_forward(vs_mesh* tp, const float* table_shard, int64_t vocab, int64_t dim,
                                               const int32_t* ids, int64_t n, float* out)
{
    const char* fn = "vs_vocab_embedding_forward";
    int64_t start = 0, rows = 0;
    _VS_TRY(_vs_vocab_range(fn, tp, vocab, &start, &rows));
    _VS_TRY(_vs_ids_start(tp, fn));
    _VS_TRY(_vs_check_tokens(fn, n, dim));
    vs_comm* c = tp->comm;
    _VS_TRY(_vs_check_ids_on(c, fn, ids, n, vocab));
    if (n > 0 && dim > 0 && !out) return _vs_err(VS_ERR_NULL, "%s: out is NULL", fn);
    if (rows > 0 && dim > 0 && !table_shard) return _vs_err(VS_ERR_NULL, "%s: table_shard is NULL", fn);
    _VS_TRY(_vs_dev_arg(c, fn, "out", out));
    _VS_TRY(_vs_dev_arg(c, fn, "table_shard", table_shard));
    float* o = out;
    const float* tb = table_shard;
    const int32_t* id = ids;
    long long nn = n, dd = dim, st = start, rr = rows;
    void* args[] = {&o, &tb, &id, &nn, &dd, &st, &rr};
    _VS_TRY(_vs_ids_launch(tp, fn, ids, n, vocab));
    _VS_TRY(_vs_mk_run(c, fn, _VS_MK_EMBED_FWD, nn * dd, args));
    vs_work* w = NULL;
    return _vs_dev_done(vs_all_reduce(c, out, out, (size_t)(n * dim), VS_F32, VS_OP_SUM, _VS_DEV_WORK(c, w)), &w);
}

VS_API vs_result vs_vocab_embedding_forward(vs_mesh* tp, const float* table_shard, int64_t vocab, int64_t dim,
                                            const int32_t* ids, int64_t n, float* out)
{
    _VS_TP_ENTRY("vs_vocab_embedding_forward", tp,
                 _vs_vocab_embedding_forward(tp, table_shard, vocab, dim, ids, n, out));
}

_VS_PRIVATE vs_result _vs_vocab_embedding_backward(vs_mesh* tp, const float* grad_out, const int32_t* ids, int64_t n,
                                                int64_t vocab, int64_t dim, float* grad_table_shard)
{
    const char* fn = "vs_vocab_embedding_backward";
    int64_t start = 0, rows = 0;
    _VS_TRY(_vs_vocab_range(fn, tp, vocab, &start, &rows));
    _VS_TRY(_vs_ids_start(tp, fn));
    _VS_TRY(_vs_check_tokens(fn, n, dim));
    vs_comm* c = tp->comm;
    _VS_TRY(_vs_check_ids_on(c, fn, ids, n, vocab));
    if (n > 0 && dim > 0 && !grad_out) return _vs_err(VS_ERR_NULL, "%s: grad_out is NULL", fn);
    if (rows > 0 && dim > 0 && !grad_table_shard) return _vs_err(VS_ERR_NULL, "%s: grad_table_shard is NULL", fn);
    _VS_TRY(_vs_dev_arg(c, fn, "grad_out", grad_out));
    _VS_TRY(_vs_dev_arg(c, fn, "grad_table_shard", grad_table_shard));
    if (n == 0) return VS_OK;
    float* g = grad_table_shard;
    const float* go = grad_out;
    const int32_t* id = ids;
    // nb: threads per column on the device (rows r % nb); any nb adds in token order
    long long nn = n, dd = dim, st = start, rr = rows, nb = _VS_ON_DEVICE(c) ? 16 : 1;
    void* args[] = {&g, &go, &id, &nn, &dd, &st, &rr, &nb};
    _VS_TRY(_vs_ids_launch(tp, fn, ids, n, vocab)); // (every rank checks, with rows or not)
    if (rows > 0) _VS_TRY(_vs_mk_run(c, fn, _VS_MK_EMBED_BWD, dd * nb, args));
    return VS_OK;
}

VS_API vs_result vs_vocab_embedding_backward(vs_mesh* tp, const float* grad_out, const int32_t* ids, int64_t n,
                                             int64_t vocab, int64_t dim, float* grad_table_shard)
{
    _VS_TP_ENTRY("vs_vocab_embedding_backward", tp,
                 _vs_vocab_embedding_backward(tp, grad_out, ids, n, vocab, dim, grad_table_shard));
}

_VS_PRIVATE vs_result _vs_vocab_cross_entropy(vs_mesh* tp, const float* logits_shard, int64_t n, int64_t vocab,
                                         const int32_t* targets, float* loss, float* grad_shard)
{
    const char* fn = "vs_vocab_cross_entropy";
    int64_t start = 0, rows = 0;
    _VS_TRY(_vs_vocab_range(fn, tp, vocab, &start, &rows));
    _VS_TRY(_vs_ids_start(tp, fn));
    _VS_TRY(_vs_check_tokens(fn, n, 3));
    _VS_TRY(_vs_check_tokens(fn, n, vocab));
    vs_comm* c = tp->comm;
    _VS_TRY(_vs_check_ids_on(c, fn, targets, n, vocab));
    if (n && !loss) return _vs_err(VS_ERR_NULL, "%s: loss is NULL", fn);
    if (n > 0 && rows > 0 && !logits_shard) return _vs_err(VS_ERR_NULL, "%s: logits_shard is NULL", fn);
    _VS_TRY(_vs_dev_arg(c, fn, "loss", loss));
    _VS_TRY(_vs_dev_arg(c, fn, "logits_shard", logits_shard));
    _VS_TRY(_vs_dev_arg(c, fn, "grad_shard", grad_shard));
    if (n == 0) return VS_OK;
    // scratch kept in the mesh: the next call's kernels come after these on c's stream
    float* mx = (float*)_vs_mesh_mscratch(tp, 4, sizeof(float) * (size_t)(3 * n));
    if (!mx) return _vs_err(VS_ERR_NOMEM, "%s: out of memory for %lld tokens", fn, (long long)n);
    float* se = mx + n; // followed by the target logits: one all-reduce for both
    float* tl = mx + 2 * n;
    const float* lg = logits_shard;
    const int32_t* tg = targets;
    float* g = grad_shard;
    long long nn = n, rr = rows, st = start;
    void* a_max[] = {&mx, &lg, &nn, &rr};
    void* a_sum[] = {&se, &tl, &lg, &mx, &tg, &nn, &rr, &st};
    void* a_loss[] = {&loss, &mx, &se, &tl, &nn};
    void* a_grad[] = {&g, &lg, &mx, &se, &tg, &nn, &rr, &st};
    // on NCCL the all-reduces complete in stream order: the kernels after them are on the same stream
    vs_work* w = NULL;
    vs_result r = _vs_ids_launch(tp, fn, targets, n, vocab);
    if (!r) r = _vs_mk_run(c, fn, _VS_MK_CE_MAX, nn, a_max);
    if (!r) r = _vs_dev_done(vs_all_reduce(c, mx, mx, (size_t)n, VS_F32, VS_OP_MAX, _VS_DEV_WORK(c, w)), &w);
    if (!r) r = _vs_mk_run(c, fn, _VS_MK_CE_SUM, nn, a_sum);
    if (!r) r = _vs_dev_done(vs_all_reduce(c, se, se, (size_t)(2 * n), VS_F32, VS_OP_SUM, _VS_DEV_WORK(c, w)), &w);
    if (!r) r = _vs_mk_run(c, fn, _VS_MK_CE_LOSS, nn, a_loss);
    if (!r && grad_shard) r = _vs_mk_run(c, fn, _VS_MK_CE_GRAD, nn * rr, a_grad);
    return r;
}

VS_API vs_result vs_vocab_cross_entropy(vs_mesh* tp, const float* logits_shard, int64_t n, int64_t vocab,
                                        const int32_t* targets, float* loss, float* grad_shard)
{
    _VS_TP_ENTRY("vs_vocab_cross_entropy", tp,
                 _vs_vocab_cross_entropy(tp, logits_shard, n, vocab, targets, loss, grad_shard));
}

// >>init ----------------------------------------------------------------------

VS_API vs_result vs_philox(uint64_t key, uint64_t counter_lo, uint64_t counter_hi, uint32_t out[4])
{
    _VS_CHECK_NULL(out, "out");
    unsigned int x[4];
    _vs_mk_philox(key, counter_lo, counter_hi, x); // >>kernels' text: the device's too
    for (int i = 0; i < 4; i++) out[i] = x[i];
    return VS_OK;
}

/* Key of a tensor: the seed mixed with a 64-bit FNV-1a hash of its name. */
_VS_PRIVATE uint64_t _vs_init_key(const vs_init_desc* d)
{
    uint64_t h = 1469598103934665603ull;
    for (const char* p = d->name ? d->name : ""; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    uint64_t k = d->seed ^ (h + 0x9E3779B97F4A7C15ull + (d->seed << 6) + (d->seed >> 2));
    return k;
}

/* The std a normal kind draws with. */
_VS_PRIVATE double _vs_init_std(const vs_init_desc* d)
{
    return d->kind == VS_INIT_SCALED_NORMAL ? d->b / sqrt(2.0 * (double)d->num_layers) : d->b;
}

/* >>kernels' text (host build): the numbers vs_init_fill's kernel draws. */
_VS_PRIVATE double _vs_init_draw(const vs_init_desc* d, uint64_t key, uint64_t index)
{
    return _vs_mk_draw((int)d->kind, key, index, d->a, d->b, _vs_init_std(d));
}

/* The random kinds' numbers: a finite uniform range with a <= b (as torch's
   uniform_), a finite mean and a finite std >= 0 (as torch's normal_). */
_VS_PRIVATE vs_result _vs_init_check_numbers(const char* fn, const vs_init_desc* d)
{
    const char* nm = d->name ? d->name : "";
    if (d->kind == VS_INIT_UNIFORM && !(isfinite(d->a) && isfinite(d->b) && d->a <= d->b))
        return _vs_err(VS_ERR_INVALID, "%s: uniform init of '%s': range [a %g, b %g) must be finite with a <= b", fn,
                       nm, d->a, d->b);
    if ((d->kind == VS_INIT_NORMAL || d->kind == VS_INIT_SCALED_NORMAL) && !isfinite(d->a))
        return _vs_err(VS_ERR_INVALID, "%s: normal init of '%s': mean a %g must be finite", fn, nm, d->a);
    if ((d->kind == VS_INIT_NORMAL || d->kind == VS_INIT_SCALED_NORMAL) && !(isfinite(d->b) && d->b >= 0))
        return _vs_err(VS_ERR_INVALID, "%s: normal init of '%s': std b %g must be finite and >= 0", fn, nm, d->b);
    return VS_OK;
}

VS_API double vs_init_value(const vs_init_desc* d, uint64_t index)
{
    if (!d) return _vs_err(VS_ERR_NULL, "vs_init_value: desc is NULL"), (double)NAN;
    if ((int)d->kind < 0 || d->kind > VS_INIT_SCALED_NORMAL)
        return _vs_err(VS_ERR_INVALID, "vs_init_value: invalid init kind %d", (int)d->kind), (double)NAN;
    if (d->kind == VS_INIT_SCALED_NORMAL && d->num_layers < 1)
        return _vs_err(VS_ERR_INVALID, "vs_init_value: num_layers %d < 1 for a scaled normal", d->num_layers),
               (double)NAN;
    if (_vs_init_check_numbers("vs_init_value", d)) return (double)NAN;
    return _vs_init_draw(d, _vs_init_key(d), index);
}

/* A constant `v` stored as `dt` without overflow (integer conversions of values
   out of range are undefined behaviour; float ones turn finite into inf). */
_VS_PRIVATE int _vs_fits_dtype(double v, vs_dtype dt)
{
    switch (dt) {
    case VS_F64: return 1;
    case VS_F32: return !isfinite(v) || fabs(v) <= 3.4028234663852886e38;
    case VS_BF16: return !isfinite(v) || fabs(v) <= 3.3895313892515355e38;
    case VS_F16: return !isfinite(v) || fabs(v) <= 65504.0;
    case VS_I32: return v > -2147483649.0 && v < 2147483648.0;
    case VS_I64: return v >= -9223372036854775808.0 && v < 9223372036854775808.0;
    case VS_U8: return v > -1.0 && v < 256.0;
    default: return 0;
    }
}

VS_API vs_result vs_init_fill(const vs_dtensor* t, const vs_init_desc* d)
{
    const char* fn = "vs_init_fill";
    _VS_TRY(_vs_dtensor_check(fn, t, "the"));
    _VS_CHECK_NULL(d, "desc");
    if ((int)d->kind < 0 || d->kind > VS_INIT_SCALED_NORMAL)
        return _vs_err(VS_ERR_INVALID, "%s: invalid init kind %d for '%s'", fn, (int)d->kind, d->name ? d->name : "");
    int isfloat = t->dtype == VS_F32 || t->dtype == VS_F64 || t->dtype == VS_F16 || t->dtype == VS_BF16;
    if (d->kind >= VS_INIT_UNIFORM && !isfloat)
        return _vs_err(VS_ERR_INVALID, "%s: random init of '%s' needs a floating dtype, not %s", fn,
                       d->name ? d->name : "", vs_dtype_name(t->dtype));
    if (d->kind == VS_INIT_SCALED_NORMAL && d->num_layers < 1)
        return _vs_err(VS_ERR_INVALID, "%s: scaled normal init of '%s' needs num_layers >= 1, got %d", fn,
                       d->name ? d->name : "", d->num_layers);
    _VS_TRY(_vs_init_check_numbers(fn, d));
    if (d->kind == VS_INIT_CONSTANT && !_vs_fits_dtype(d->a, t->dtype))
        return _vs_err(VS_ERR_INVALID, "%s: constant %g for '%s' does not fit %s", fn, d->a, d->name ? d->name : "",
                       vs_dtype_name(t->dtype));
    const vs_mesh* m = t->layout.mesh;
    for (int k = 0; k < m->ndims; k++)
        if (t->layout.p[k].kind == VS_PLACE_PARTIAL)
            return _vs_err(VS_ERR_INVALID, "%s: '%s' is Partial on mesh dim %s: initialize it Replicate or Shard", fn,
                           d->name ? d->name : "", m->names[k]);
    int64_t ls[VS_TENSOR_MAX_DIMS], off[VS_TENSOR_MAX_DIMS];
    _vs_box_of(m, t->layout.p, t->ndim, t->shape, m->coord, ls, off);
    int64_t n = _vs_numel(ls, t->ndim);
    if (n == 0) return VS_OK;
    if (!t->data) return _vs_err(VS_ERR_NULL, "%s: data is NULL for %lld elements", fn, (long long)n);
    _VS_TRY(_vs_dev_arg(m->comm, fn, "data", t->data));
    // one kernel (>>kernels): a host loop, or on device memory on the mesh's stream
    _vs_mk_ibox g;
    memset(&g, 0, sizeof g);
    g.nd = t->ndim;
    for (int k = 0; k < t->ndim; k++) g.ls[k] = ls[k], g.off[k] = off[k], g.shape[k] = t->shape[k];
    void* data = t->data;
    int dt = (int)t->dtype, kind = (int)d->kind;
    long long nn = n;
    unsigned long long key = _vs_init_key(d);
    double a = d->a, b = d->b, sd = _vs_init_std(d);
    void* args[] = {&data, &dt, &nn, &g, &key, &kind, &a, &b, &sd};
    return _vs_mk_run(m->comm, fn, _VS_MK_INIT, nn, args); // (device: fenced both ways, returns when enqueued)
}

// >>layout-device ----------------------------------------------------------------
/* vs_redistribute on device buffers (NCCL): the steps of the host path without
   the threads transport's in-place moves. Contiguous blocks go straight to the
   collectives; strided ones are packed, sent and unpacked by >>kernels' box copy
   on the step's communicator's stream (each mesh dim's submesh). Nothing waits
   on the host: each collective completes in stream order (_vs_dev_done), each
   step's stream waits for the stream of the step before (the first: for the mesh
   communicator's caller stream), and the caller's stream for the last step's
   (_vs_dev_link); so the call returns when its work is enqueued, the result
   ready in stream order on the caller's stream. Scratch is device memory from
   the world's hooks, kept in the mesh for the next call (_vs_mesh_mscratch). */

/* Slot i of m's cache on its communicator's side (device memory on NCCL, through
   the world's hooks), at least `bytes`; NULL when out of memory. Grow-only, in
   powers of two: a steady state allocates nothing (a cudaFree synchronises the
   device, and one beside a collective waiting for its peers can deadlock; only
   a growth frees, after draining the device (_vs_dev_drain): the buffer's
   earlier users, enqueued by calls that did not wait, are done then). Freed
   with the mesh. */
_VS_PRIVATE void* _vs_mesh_mscratch(vs_mesh* m, int i, size_t bytes)
{
    if (m->mscratch_cap[i] >= bytes && m->mscratch[i]) return m->mscratch[i];
    size_t cap = 256;
    while (cap < bytes && cap <= SIZE_MAX / 2) cap *= 2;
    if (cap < bytes) cap = bytes;
#ifdef VESCALE_NCCL
    if (m->comm->tp->device && _vs_nccl_sasync(m->comm)) {
        /* no device hooks: stream-ordered on the caller's stream, which every earlier call's work comes before
           and every call's first work waits for (as _vs_nccl_salloc: no cudaMalloc / cudaFree beside a collective
           that waits for a peer); c's stream, where the cross-entropy uses it at once, ordered after it */
        cudaStream_t st = (cudaStream_t)_vs_dev_caller(m->comm);
        void* p = NULL;
        if (m->mscratch[i]) cudaFreeAsync(m->mscratch[i], st);
        m->mscratch[i] = cudaMallocAsync(&p, cap, st) == cudaSuccess ? p : NULL;
        m->mscratch_cap[i] = p ? cap : 0;
        if (p && _vs_dev_link(m->comm, st, vs_comm_stream(m->comm), "the mesh's scratch")) return NULL;
        return p;
    }
#endif
    if (m->mscratch[i]) {
        if (_vs_dev_drain(m->comm, "the mesh's scratch growth")) return NULL; // (kept: freed with the mesh)
        _vs_mem_free(m->comm, m->mscratch[i]);
    }
    m->mscratch[i] = _vs_mem_alloc(m->comm, cap);
    m->mscratch_cap[i] = m->mscratch[i] ? cap : 0;
    return m->mscratch[i];
}

_VS_PRIVATE void _vs_mesh_mscratch_free(vs_mesh* m)
{
    _vs_mesh_ids_free(m);
    for (int i = 0; i < _VS_MSCRATCH; i++) {
        if (m->mscratch[i] && m->comm) _vs_mem_free(m->comm, m->mscratch[i]);
        m->mscratch[i] = NULL;
        m->mscratch_cap[i] = 0;
    }
}

/* dst's box at doff (shape dshape) <- src's box at soff (shape sshape), on c's side. */
_VS_PRIVATE vs_result _vs_dbox(vs_comm* c, const char* fn, char* dst, const int64_t* dshape, const int64_t* doff,
                               const char* src, const int64_t* sshape, const int64_t* soff, const int64_t* box, int nd,
                               size_t esz)
{
    long long n = _vs_numel(box, nd);
    if (n == 0) return VS_OK;
    _vs_mk_geo g = _vs_mk_geometry(dshape, doff, sshape, soff, box, nd, esz);
    void* args[] = {&dst, &src, &n, &g};
    return _vs_mk_run(c, fn, _VS_MK_BOX, n, args);
}

_VS_PRIVATE vs_result _vs_redistribute_device(const vs_dtensor* src, const vs_dtensor* dst, int64_t n_in,
                                              int64_t n_out)
{
    const char* fn = "vs_redistribute";
    vs_mesh* m = src->layout.mesh;
    vs_comm* mc = m->comm;
    _vs_rstep steps[3 * VS_MESH_MAX_DIMS];
    int ns = _vs_plan_redistribute(m, src->layout.p, dst->layout.p, steps);
    size_t esz = vs_dtype_size(src->dtype);
    if (ns == 0) return _vs_mem_copy(mc, fn, dst->data, src->data, (size_t)n_out * esz); // (fenced both ways)
    int64_t big = n_in > n_out ? n_in : n_out;
    int packs = 0;
    for (int i = 0; i < ns; i++) {
        int64_t ls[VS_TENSOR_MAX_DIMS], off[VS_TENSOR_MAX_DIMS];
        _vs_box_of(m, steps[i].after, src->ndim, src->shape, m->coord, ls, off);
        int64_t v = _vs_numel(ls, src->ndim);
        big = v > big ? v : big;
        packs |= steps[i].type == _VS_R_GATHER || steps[i].type == _VS_R_REDSCAT || steps[i].type == _VS_R_A2A;
    }
    _vs_rctx x;
    memset(&x, 0, sizeof x);
    x.mesh = m;
    x.dt = src->dtype;
    x.esz = esz;
    x.ndim = src->ndim;
    x.shape = src->shape;
    size_t bytes = (size_t)big * esz + 1, counts[4 * 256];
    x.counts = counts;
    x.tmp_bytes = bytes;
    // [0], [1]: the steps' ping-pong buffers; [2], [3]: packing (x.tmp, x.tmp2)
    void* buf[4] = {NULL, NULL, NULL, NULL};
    int need[4] = {ns > 1, ns > 2, packs, packs}, fail = 0;
    for (int i = 0; i < 4; i++)
        if (need[i] && !(buf[i] = _vs_mesh_mscratch(m, i, bytes))) fail = 1;
    x.tmp = buf[2];
    x.tmp2 = buf[3];
    vs_result r = fail ? _vs_err(VS_ERR_NOMEM, "%s: out of device memory for %zu-byte scratch buffers", fn, bytes)
                       : VS_OK;
    const void* in = src->data;
    // each step after the caller's earlier work, or after the step before (another stream)
    vs_comm* pc = mc;
    void *caller = _vs_dev_caller(mc), *prev = caller;
    for (int i = 0; i < ns && !r; i++) {
        void* out = i == ns - 1 ? dst->data : buf[i % 2];
        vs_mesh* sub = NULL;
        r = vs_mesh_submesh(m, m->names[steps[i].k], &sub);
        vs_comm* c = r ? NULL : vs_mesh_comm(sub);
        if (!r) r = _vs_dev_link(pc, prev, vs_comm_stream(c), fn);
        if (!r) r = _vs_run_step(&x, &steps[i], in, out);
        if (!r) pc = c, prev = vs_comm_stream(c);
        in = out;
    }
    if (!r) r = _vs_dev_link(pc, prev, caller, fn); // the caller's stream after the last step
    return r;
}

#ifdef __cplusplus
}
#endif

// >>end-of-implementation
#endif // VESCALE_MESH_IMPLEMENTATION
/* vescale_mesh.h - MIT License

   Copyright (c) 2026 the vescale authors

   Permission is hereby granted, free of charge, to any person obtaining a copy
   of this software and associated documentation files (the "Software"), to deal
   in the Software without restriction, including without limitation the rights
   to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
   copies of the Software, and to permit persons to whom the Software is
   furnished to do so, subject to the following conditions:

   The above copyright notice and this permission notice shall be included in all
   copies or substantial portions of the Software.

   THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
   IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
   FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
   AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
   LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
   OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
   SOFTWARE.
*/
