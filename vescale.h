/* vescale.h - v0.1.0 (2026-11-23) - nD-parallel training for C/C++ trainers: one
   device mesh for data, tensor/sequence, pipeline parallel and ZeRO, over threads,
   MPI or NCCL. Header-only C99. MIT license (end of file).

   This header includes every part:
       vescale_mesh.h   results, hooks, dtypes, transports, bootstrap, device mesh,
                        layouts and redistribute, TP/SP regions, sharded init
       vescale_ddp.h    DDP and the distributed optimizer (ZeRO-1/2)
       vescale_pipe.h   pipeline schedules and engine            (skeleton)
       vescale_ckpt.h   distributed, resharding checkpoints      (skeleton)

   Do this in *one* C or C++ file:
       #define VESCALE_IMPLEMENTATION
       #include "vescale.h"
   and just #include "vescale.h" everywhere else. Or define VESCALE_STATIC (before
   the include, in every file that includes it): it implies VESCALE_IMPLEMENTATION
   and makes every function static inline, nothing exported. Each file then has
   its own copy of the library; pass no handle from one file to another.

   Platforms: POSIX.1-2008 with pthreads (tested on Linux/glibc), a C99 or C++11
   compiler; VESCALE_MPI: an MPI-3 library with MPI_THREAD_MULTIPLE; VESCALE_NCCL:
   CUDA 11+ and NCCL 2.18+ (ncclCommSplit), any C compiler (nvcc not needed).

   Macros: see vescale_mesh.h (VESCALE_STATIC, VESCALE_MPI, VESCALE_NCCL, VS_ASSERT).
   Link:
       threads (always)  -lpthread -lm
       VESCALE_MPI       the MPI library: build with mpicc, or add what
                         `mpicc --showme:link` prints (Open MPI; usually -lmpi)
       VESCALE_NCCL      -I$CUDA/include -L$CUDA/lib64 -lcudart -lnccl -lnvrtc
                         (NVRTC: vescale_ddp.h compiles its CUDA kernels at run time)
   Installed (`make install PREFIX=...`): `pkg-config --cflags --libs vescale`
   (or vescale-mpi, vescale-nccl), or in CMake
       find_package(vescale REQUIRED [COMPONENTS MPI NCCL])
       target_link_libraries(app PRIVATE vescale::vescale)   # or vescale::mpi, vescale::nccl

   From C++: the examples' `&(vs_mesh_desc){ .shape = {2, 2} }` is a C99 compound
   literal, which g++ rejects. Zero-initialize a named desc and set its fields:
       vs_mesh_desc md = {};            // every field zero: every default
       md.shape[0] = 2; md.shape[1] = 2;
       vs_mesh_init(w, &md, &mesh);
   or, from C++20, designated initializers in declaration order:
       vs_mesh_desc md{ .shape = {2, 2} };
   (g++ 12 with -Wextra warns there about every field left out; add
   -Wno-missing-field-initializers, or use the first form.)
   Every desc is a plain struct whose zero value means "defaults", so `= {}` is
   always a valid start. The headers have extern "C" linkage.

   The high-level API (model description, sharding plans, parallelize, training
   state save/load) arrives here with its issue. Start from examples/mlp_dp_tp.c:
   a trainer on DP2 x TP2 built from the parts described below.

   Memory
   ------
   The library allocates host and device memory through the world's allocator
   hooks: vs_allocator in vs_launch_desc or vs_world_desc (alloc, free,
   device_alloc, device_free, user; NULL members take malloc/free and
   cudaMalloc/cudaFree). A trainer can route its own buffers through the same hooks
   with vs_alloc / vs_free / vs_device_alloc / vs_device_free. Hooks are called from
   every rank thread and from progress threads at once: they must be thread-safe.
   Allocation failure is VS_ERR_NOMEM. Scratch space (redistribute's, DDP's buckets
   and optimizer state) is kept in the handle that needs it and freed with it
   (vs_mesh_free, vs_ddp_free). Buffers you pass are never freed or kept: they must
   stay valid until the call returns, or until vs_wait for an asynchronous one.
   Buffers are host memory on the threads and MPI transports and CUDA device memory
   on NCCL; vs_ddp_memory_usage reports what a DDP holds.

   Errors and logging
   ------------------
   A function that can fail returns a vs_result: VS_OK (0) or a negative code,
   grouped by kind (-1..-19 your input, -20..-39 resources and availability,
   -40..-59 communication and backends); vs_result_string names it. vs_last_error()
   gives the calling thread's message for the last error, naming the call and the
   bad value ("vs_mesh_init: shape 2x3 has 6 ranks but the communicator has 4");
   vs_last_backend_code() the raw CUDA, NCCL, MPI or errno code behind
   VS_ERR_BACKEND and VS_ERR_IO. A function that returns a pointer or a count says
   in its comment what it returns on error; the message is set the same way.
   Nothing exits or aborts on bad input; VS_ASSERT (default: assert) only guards
   internal invariants. Faults (timeouts, a rank that fails) end the job on every
   rank with VS_ERR_ABORTED naming the cause: see vescale_mesh.h.
   The library prints nothing unless asked. Give a logger (vs_logger in the launch
   or world desc: a function called with a level and a message without newline)
   and a log_level, or set VESCALE_LOG=error|warn|info|debug to log to stderr when
   no logger is given. At warn, every error a function returns is logged once with
   its rank; the cause of a failed job once at error. Loggers are called from any
   thread (progress threads too) and must be re-entrant.

   Threads and streams
   -------------------
   - A handle (vs_world, vs_comm, vs_mesh, vs_ddp, vs_work) is used by one thread
     at a time. Under vs_launch each rank is a thread with its own handles;
     several jobs may run in one process. vs_wait and vs_test: the thread that
     issued the operation. vs_comm_abort and vs_result_string: any thread.
   - The error message is per thread: read vs_last_error() on the thread whose
     call failed.
   - Asynchronous operations (a vs_work** argument) run in issue order on a
     progress thread per communicator (threads and MPI transports) or on the
     communicator's CUDA stream (NCCL). Blocking calls return when the operation
     is complete on this rank, on every transport (NCCL: the host waits for it).
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
   its inputs.) With tp = the "TP" submesh (vs_mesh_submesh(mesh, "TP", &tp)):
       forward                                          per TP rank
       x [B, D]        whole on every TP rank (the forward of copy is the identity)
       a = x W1 + b1   [B, H/TP], this rank's columns   no communication
       z = gelu(a)
       y = z W2        [B, D], a partial sum over TP
       vs_tp_reduce_forward(tp, y, B * D, VS_F32)       all-reduce: y whole
       y += b2         once, after the sum
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
/* VESCALE_STATIC: every part included is implemented here, static inline. */
#if defined(VESCALE_STATIC) && !defined(VESCALE_IMPLEMENTATION)
#define VESCALE_IMPLEMENTATION
#endif
#ifndef VESCALE_INCLUDED
#define VESCALE_INCLUDED
#include "vescale_mesh.h"
#include "vescale_ddp.h"
#include "vescale_pipe.h"
#include "vescale_ckpt.h"
#endif // VESCALE_INCLUDED

#ifndef VESCALE_HL_INCLUDED
#define VESCALE_HL_INCLUDED
#ifdef __cplusplus
extern "C" {
#endif

// >>model ----------------------------------------------------------------------

/* What a parameter is, for the TP policy (megatron) and the planner. Weights
   are stored [in, out] (y = x W). */
typedef enum vs_role {
    VS_ROLE_OTHER = 0,  // replicated
    VS_ROLE_EMBEDDING,  // [vocab, dim]: vocab-parallel, Shard(0) over TP
    VS_ROLE_COLUMN,     // column-parallel linear: weight Shard(1), its bias Shard(0)
    VS_ROLE_ROW,        // row-parallel linear: weight Shard(0), its bias replicated
    VS_ROLE_NORM,       // replicated (norm gains and biases)
    VS_ROLE_HEAD        // an output projection [dim, vocab]: Shard(1) (vocab-parallel)
} vs_role;

#define VS_LAYER_MAX_PARAMS 16

typedef struct vs_param_decl {
    const char* name; // full name, e.g. "h.3.attn.wq"; the same name in two layers is one tied parameter
    vs_dtype dtype;   // f32 (0: f32)
    int ndim;
    int64_t shape[VS_TENSOR_MAX_DIMS]; // global shape
    vs_role role;
    vs_init_desc init; // how it starts (vs_init_fill; seed and name are vescale's: the model seed and this name)
    int no_decay;      // no weight decay (norms, biases)
} vs_param_decl;

/* One layer: a pipeline unit (vescale_pipe.h: its named inputs and outputs,
   callbacks and cost; its user pointer is vescale's, see vs_layer_user) and the
   parameters it owns. */
typedef struct vs_layer_decl {
    vs_pipe_unit unit;
    vs_param_decl params[VS_LAYER_MAX_PARAMS];
    int nparams;
    void* user; // the layer's own pointer (vs_layer_user)
} vs_layer_decl;

typedef struct vs_model_desc {
    const vs_layer_decl* layers;
    int nlayers;
    uint64_t seed; // parameter init: vs_init_fill with this seed and each parameter's name
} vs_model_desc;

/* What a layer's callbacks see: call->user of vescale_pipe.h's vs_pipe_call
   points at this (vs_layer(call)). param[i] is this rank's shard of parameter i
   under the plan's layout (local_shape, offset: its box in the global tensor);
   the callbacks ADD their parameter gradients into grad[i]. tp is the TP
   submesh for vs_tp_* and vs_vocab_* calls (NULL without TP). A test can fill
   one by hand to run a layer on one device. */
typedef struct vs_layer_ctx {
    void* user; // the layer's own pointer (vs_layer_decl.user)
    void* param[VS_LAYER_MAX_PARAMS];
    void* grad[VS_LAYER_MAX_PARAMS];
    int64_t local_shape[VS_LAYER_MAX_PARAMS][VS_TENSOR_MAX_DIMS];
    int64_t offset[VS_LAYER_MAX_PARAMS][VS_TENSOR_MAX_DIMS];
    vs_mesh* tp;
    int tp_size, tp_rank; // 1, 0 without TP
} vs_layer_ctx;

static inline vs_layer_ctx* vs_layer(const vs_pipe_call* call) { return (vs_layer_ctx*)call->user; }

/* Checks a model (names, shapes, roles, tied parameters agree) without a mesh. */
VS_API vs_result vs_model_check(const vs_model_desc* m);

// >>plan -----------------------------------------------------------------------

#define VS_PLAN_MAX_RULES 32

/* A sharding rule: parameters whose full name matches `pattern` (glob: * any run,
   ? one character, [abc] a set) get `placement` along the TP dim ("Replicate",
   "Shard(0)", "Shard(1)"). The first matching rule wins; parameters no rule
   matches follow the plan's policy (megatron: by role; none: replicated). */
typedef struct vs_shard_rule {
    char pattern[128];
    char placement[32];
} vs_shard_rule;

typedef enum vs_tp_policy { VS_TP_MEGATRON = 0, VS_TP_NONE } vs_tp_policy;

/* Everything that says how a model runs on a mesh. Prints as text and JSON and
   parses back (vs_plan_print / vs_plan_parse). */
typedef struct vs_plan {
    int pp, dp, tp;               // mesh sizes (0: 1); the mesh is (PP, DP, TP), TP innermost
    vs_tp_policy policy;
    int strict;                   // a rule that matches no parameter is an error
    vs_shard_rule rules[VS_PLAN_MAX_RULES];
    int nrules;
    vs_pipe_split_kind split;     // how layers are cut into stages (0: flops)
    char split_points[256];       // manual: layer names that start a chunk
    int chunks;                   // virtual chunks per stage (0: the schedule's: 1, or 2 for zbv/dualpipev)
    vs_pipe_kind schedule;        // 0: 1f1b
    int microbatches;             // per DP rank and step (0: pp, at least 1)
    vs_zero_stage zero;
} vs_plan;

/* Text (one "key: value" per line, rules as "shard <pattern> <placement>") or
   JSON; returns the length needed (snprintf-like). */
VS_API int vs_plan_print(const vs_plan* p, char* buf, size_t cap);
VS_API int vs_plan_print_json(const vs_plan* p, char* buf, size_t cap);
/* Either form; errors name the line and the key. */
VS_API vs_result vs_plan_parse(const char* text, vs_plan* out);
/* The layout of each parameter under a plan: its placement along TP, and why
   (the rule or the role). Checks the plan against the model: a strict rule that
   matches nothing, a TP size that does not divide a sharded dim (the first
   such parameter), more stages x chunks than layers. */
VS_API vs_result vs_plan_check(const vs_plan* p, const vs_model_desc* m);
VS_API vs_result vs_plan_placement(const vs_plan* p, const vs_param_decl* d, vs_placement* out, const char** why);

// >>generate-plan ---------------------------------------------------------------

/* What the machine does, measured (vs_profile_measure) or given: seconds per flop
   of unit compute and the transports' bandwidth and latency. */
typedef struct vs_profile {
    double flop_s;        // seconds per flop of the model's compute (0: 1e-10)
    double bw_bytes_s;    // collective bandwidth, bytes/s (0: 1e9)
    double latency_s;     // per collective call (0: 2e-5)
    double p2p_bw_bytes_s;   // point-to-point (0: bw)
} vs_profile;

/* Measures a profile: the model's layers' forward and backward times on this
   rank (one microbatch of `rows` rows from the data callback `data`) and the
   world's all-reduce and p2p bandwidth. Collective over the world. Prints and
   parses as one line of text (saved with a checkpoint, reused by later runs). */
VS_API vs_result vs_profile_measure(vs_world* w, const vs_model_desc* m, vs_pipe_fn data, void* data_user,
                                    vs_profile* out);
VS_API int vs_profile_print(const vs_profile* p, char* buf, size_t cap);
VS_API vs_result vs_profile_parse(const char* text, vs_profile* out);

typedef struct vs_constraints {
    int world;                 // required: ranks
    int pp, dp, tp;            // fixed sizes (0: free)
    vs_pipe_split_kind split;  // 0: flops
    vs_tp_policy policy;
    double mem_limit_bytes;    // per rank (0: none)
    int microbatches;          // per DP rank (0: free)
    int64_t global_batch;      // rows per step (required)
    int64_t act_bytes_per_row; // activation bytes a layer keeps per row per microbatch (0: 4 * largest param dim)
} vs_constraints;

/* One configuration as the planner saw it. */
typedef struct vs_plan_estimate {
    vs_plan plan;
    double step_s, compute_s, comm_s, bubble_s; // estimated step time and its parts (exposed)
    double mem_bytes;                           // per rank: params, grads, optimizer state, activations
    int feasible;
    char why[160];                              // why it lost or is infeasible
} vs_plan_estimate;

/* Enumerates every (pp, dp, tp, schedule, microbatches, zero) meeting the
   constraints, estimates each with the cost model (compute, exposed
   communication, the pipe simulator's bubble, memory), and returns the best in
   *out; est[0..cap) gets the best and the runners-up, then the rejected (with
   their reasons), *n how many. No configuration: VS_ERR_INVALID saying which
   resource is short and by how much. */
VS_API vs_result vs_generate_plan(const vs_model_desc* m, const vs_constraints* c, const vs_profile* prof,
                                  vs_plan* out, vs_plan_estimate* est, int cap, int* n);
/* The explanation: chosen plan, the two runners-up, why others lost. */
VS_API int vs_plan_explain(const vs_plan_estimate* est, int n, char* buf, size_t cap);

// >>train ----------------------------------------------------------------------

/* A global batch: named data inputs of the model (e.g. "tokens", "targets"),
   each with the batch rows as its first dim. Every rank passes the same batch
   (or at least the same values for its rows); vescale gives each DP rank its
   slice and each microbatch its rows, in the order one device would take them. */
#define VS_BATCH_MAX 8
typedef struct vs_batch {
    int n;
    const char* name[VS_BATCH_MAX];
    vs_dtype dtype[VS_BATCH_MAX];
    int ndim[VS_BATCH_MAX];
    int64_t shape[VS_BATCH_MAX][VS_PIPE_MAX_DIMS];
    const void* data[VS_BATCH_MAX]; // host memory
} vs_batch;

typedef struct vs_train_desc {
    const vs_model_desc* model; // kept by pointer
    const vs_plan* plan;        // copied
    vs_optim_desc optim;        // AdamW by default
    vs_lr_schedule lr;          // lr 0: 1e-3 constant
    double clip;                // global grad-norm clip (0: none)
} vs_train_desc;

typedef struct vs_train vs_train;

/* Collective over the world: makes the (PP, DP, TP) mesh, allocates and
   initializes only this rank's shards (sharding-invariant init: the same values
   as one device), and wires DDP / ZeRO, the pipeline engine and TP. */
VS_API vs_result vs_parallelize(vs_world* w, const vs_train_desc* d, vs_train** out);
/* One training step on a global batch: forward, backward, gradient sync,
   clipping, optimizer and LR-schedule step. *loss: the global mean loss. */
VS_API vs_result vs_train_step(vs_train* t, const vs_batch* batch, double* loss);
VS_API int64_t vs_train_steps(const vs_train* t);
VS_API vs_mesh* vs_train_mesh(vs_train* t);
VS_API vs_pipe* vs_train_pipe(vs_train* t);
VS_API vs_ddp* vs_train_ddp(vs_train* t);
/* Host bytes this rank allocated for parameters during vs_parallelize, at the
   peak, and the full model's bytes. */
VS_API vs_result vs_train_memory(const vs_train* t, int64_t* init_peak, int64_t* model_bytes);
/* The global value of a parameter (gathered; every rank gets it). */
VS_API vs_result vs_train_get_param(vs_train* t, const char* name, void* out, size_t bytes);

/* The whole training state (parameters, optimizer, step, LR schedule, plan text,
   and extra blobs such as RNG and data position) into a checkpoint directory,
   and back, on any plan or mesh. Collective. */
VS_API vs_result vs_train_save(vs_train* t, const char* path, const vs_ckpt_entry* extra, int nextra, int async);
VS_API vs_result vs_train_load(vs_train* t, const char* path, vs_ckpt_entry* extra, int nextra);
/* The plan stored in a checkpoint (to resume with the same one, or to see what
   the job ran). Not collective. */
VS_API vs_result vs_train_saved_plan(const char* path, vs_plan* out);
VS_API vs_result vs_train_free(vs_train* t);

#ifdef __cplusplus
}
#endif
#endif // VESCALE_HL_INCLUDED

/* The parts' implementations are switched on by their own headers when
   VESCALE_IMPLEMENTATION is defined; a second include is harmless. */
#ifdef VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vescale_ddp.h"
#include "vescale_pipe.h"
#include "vescale_ckpt.h"
#endif

#if defined(VESCALE_IMPLEMENTATION) && !defined(VESCALE_HL_IMPLEMENTED)
#define VESCALE_HL_IMPLEMENTED
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __cplusplus
extern "C" {
#endif
#define _VS_HL_PRIVATE static _VS_UNUSED

// >>model ----------------------------------------------------------------------

// >>plan -----------------------------------------------------------------------

// >>generate-plan ---------------------------------------------------------------
/* (the planner: its own change) */
VS_API vs_result vs_generate_plan(const vs_model_desc* m, const vs_constraints* c, const vs_profile* prof,
                                  vs_plan* out, vs_plan_estimate* est, int cap, int* n)
{
    (void)m, (void)c, (void)prof, (void)out, (void)est, (void)cap, (void)n;
    return vs_set_error(VS_ERR_UNSUPPORTED, "vs_generate_plan: not yet");
}
VS_API int vs_plan_explain(const vs_plan_estimate* est, int n, char* buf, size_t cap)
{
    (void)est, (void)n, (void)buf, (void)cap;
    return 0;
}
VS_API vs_result vs_profile_measure(vs_world* w, const vs_model_desc* m, vs_pipe_fn data, void* data_user,
                                    vs_profile* out)
{
    (void)w, (void)m, (void)data, (void)data_user, (void)out;
    return vs_set_error(VS_ERR_UNSUPPORTED, "vs_profile_measure: not yet");
}
VS_API int vs_profile_print(const vs_profile* p, char* buf, size_t cap)
{
    (void)p, (void)buf, (void)cap;
    return 0;
}
VS_API vs_result vs_profile_parse(const char* text, vs_profile* out)
{
    (void)text, (void)out;
    return vs_set_error(VS_ERR_UNSUPPORTED, "vs_profile_parse: not yet");
}
// >>generate-plan end

// >>train ----------------------------------------------------------------------

#ifdef __cplusplus
}
#endif
#endif // VESCALE_HL_IMPLEMENTATION


/* vescale.h - MIT License

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
